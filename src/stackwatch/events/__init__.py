"""The dispatch layer's Python half: the event kinds and groups as the C
table defines them (kinds.py), the mechanisms only Python can switch
(switch.py, with sys.monitoring in monitoring.py: called by the C owner of
the switching, native/ext/tracer/switch.c), Python handlers (handlers.py)
and the USDT probes (probes.py)."""
import os as _os

from .. import _native

# stackwatch's own code is never an event for handlers: its package
# directory, told to the dispatch layer when the layer is first loaded
# (every tracing session and handler loads it).
_native._set_own_prefix(_os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), ""))

# Loaded with the layer, so that the switching owner's first call (a trace
# starting, a handler added) does not import it.
from . import switch  # noqa: E402,F401
