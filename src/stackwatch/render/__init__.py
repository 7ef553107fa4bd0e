"""Outputs people open: the registry of output formats and their writers
(formats.py: every format's name, file name endings, what it is written
from) and the self-contained HTML flame graph (flamegraph.py with its page
template flamegraph.html)."""
