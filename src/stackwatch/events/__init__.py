"""The dispatch layer's Python half: the event kinds and groups as the C
table defines them (kinds.py), the mechanisms only Python can switch
(switch.py, with sys.monitoring in monitoring.py: called by the C owner of
the switching, native/ext/tracer/switch.c), Python handlers (handlers.py)
and the USDT probes (probes.py)."""
# Loaded with the package, so that the switching owner's first call (a
# trace starting, a handler added) does not import it.
from . import switch  # noqa: F401
