"""The history store: every run, batch and campaign indexed from its files, and queries over it."""
