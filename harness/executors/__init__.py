"""Where child runs happen: a plan of tasks in, their ends back as events; local or Slurm."""
