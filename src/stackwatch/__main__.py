"""python -m stackwatch: the command line."""
from .cli import main

main()
