"""What crosses into pytest and back: variable names, side files, markers, rows and winners."""
