"""stackwatch.flamegraph: the name before the house move of stackwatch.render.flamegraph
(see _moved.py); importing it gives that module."""
from ._moved import forward

forward(__name__, "stackwatch.render.flamegraph")
