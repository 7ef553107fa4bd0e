"""What every room of the Python package shares: parsing sizes and durations
(units.py). Imports nothing else of stackwatch."""
