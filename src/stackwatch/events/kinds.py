"""The dispatch layer's event kinds and groups, as the C table defines them
(native/ext/dispatch/kinds.h, read from _native): a kind's number is its
position in KINDS and its bit in a mask is 1 << number."""
from .. import _native

KINDS = tuple(_native.EVENT_KINDS)
BIT = {name: 1 << number for number, name in enumerate(KINDS)}
GROUPS = dict(_native.EVENT_GROUPS)   # "calls", "c_calls", "gc", "objects", "threads", "exceptions", "all"


def mask_of(events):
    """Event names (or group names, see GROUPS) -> bit mask. Raises
    ValueError for an unknown name or none at all."""
    if isinstance(events, str):
        events = [events]
    m = 0
    for e in events:
        if e in BIT:
            m |= BIT[e]
        elif e in GROUPS:
            m |= GROUPS[e]
        else:
            raise ValueError(f"unknown event {e!r} (known: {', '.join(KINDS + tuple(GROUPS))})")
    if not m:
        raise ValueError("no events given")
    return m


def names_of_options(values):
    """The event names of a repeatable --events option's values (each
    comma-separated), in order. Raises ValueError for an unknown name."""
    names = [e.strip() for v in values or () for e in v.split(",") if e.strip()]
    if names:
        mask_of(names)
    return names
