"""Renderers of call trees into files people open: the self-contained HTML
flame graph (flamegraph.py with its page template flamegraph.html)."""
