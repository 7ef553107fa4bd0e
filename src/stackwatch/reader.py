"""stackwatch.reader: the name before the house move of stackwatch.tracer.tracefile
(see _moved.py); importing it gives that module."""
from ._moved import forward

forward(__name__, "stackwatch.tracer.tracefile")
