"""stackwatch.probes: the name before the house move of stackwatch.events.probes
(see _moved.py); importing it gives that module."""
from ._moved import forward

forward(__name__, "stackwatch.events.probes")
