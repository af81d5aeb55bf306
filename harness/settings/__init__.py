"""Settings: the one table of user variables, their reading, validation and spelling as flags."""
