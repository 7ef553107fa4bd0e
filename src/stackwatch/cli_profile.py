"""stackwatch.cli_profile: the name before the house move of stackwatch.cli.profile
(see _moved.py); importing it gives that module."""
from ._moved import forward

forward(__name__, "stackwatch.cli.profile")
