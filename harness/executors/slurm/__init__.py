"""EXECUTOR=slurm: a plan's tasks as job arrays, and the array task that runs its share."""
