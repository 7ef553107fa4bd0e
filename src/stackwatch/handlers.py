"""stackwatch.handlers: the name before the house move of stackwatch.events.handlers
(see _moved.py); importing it gives that module."""
from ._moved import forward

forward(__name__, "stackwatch.events.handlers")
