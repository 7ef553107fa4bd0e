"""What every room of the Python package shares: parsing sizes and durations
(units.py) and the version (version.py, written by the build from
version.py.in). Imports nothing else of stackwatch."""
