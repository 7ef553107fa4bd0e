"""stackwatch.program: the name before the house move of stackwatch.cli.program
(see _moved.py); importing it gives that module."""
from ._moved import forward

forward(__name__, "stackwatch.cli.program")
