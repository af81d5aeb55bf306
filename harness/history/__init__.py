"""The history store: every run, batch and campaign indexed from its files, and queries over it."""

# The default store's file under OUT. Here, not in store.py, so that a caller that only names it
# needs no SQLAlchemy (the `history` extra).
DEFAULT_NAME = "history.sqlite"
