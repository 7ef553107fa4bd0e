"""stackwatch.units: the name before the house move of stackwatch.common.units
(see _moved.py); importing it gives that module."""
from ._moved import forward

forward(__name__, "stackwatch.common.units")
