"""Parsing sizes ("256K", "1MiB") and durations ("10us", "1.5ms"), and
writing durations for a person (format_ns).

Parsed by hand, not with regular expressions: start() parses its buffer
size, and compiling a pattern on first use cost more instructions than
tracing a short program."""

_SIZE = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
         "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
_TIME = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def _number_and_unit(text):
    """(number, unit) for "<digits>[.<digits>] <unit>" with optional spaces
    around both, the unit letters only (possibly empty); else None."""
    t = text.strip()
    i = 0
    while i < len(t) and t[i].isdecimal():
        i += 1
    if i == 0:
        return None
    if i < len(t) and t[i] == ".":
        j = i + 1
        while j < len(t) and t[j].isdecimal():
            j += 1
        if j == i + 1:
            return None
        i = j
    unit = t[i:].lstrip()
    if unit and not (unit.isalpha() and (unit.isascii() or unit == "µs")):
        return None
    return t[:i], unit


def parse_size(value):
    """Bytes from an int or a string such as "4096", "256K", "1MiB"."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"size must not be negative: {value}")
        return value
    parts = _number_and_unit(str(value))
    if not parts or parts[1].lower() not in _SIZE:
        raise ValueError(f"invalid size {value!r} (examples: 4096, 256K, 16M, 1GiB)")
    return int(float(parts[0]) * _SIZE[parts[1].lower()])


def parse_duration_ns(value):
    """Nanoseconds from a string such as "500ns", "10us", "1.5ms", "2s";
    a bare number means microseconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"duration must not be negative: {value}")
        return int(value * 1000)
    parts = _number_and_unit(str(value))
    if not parts or (parts[1] and parts[1] not in _TIME):
        raise ValueError(f"invalid duration {value!r} (examples: 500ns, 10us, 1.5ms, 2s)")
    return int(round(float(parts[0]) * _TIME[parts[1] or "us"]))


def format_ns(ns):
    """A duration for a person: 1.234s, 5.678ms, 9.1us or 12ns."""
    if ns >= 1e9:
        return f"{ns / 1e9:.3f}s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f}ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f}us"
    return f"{ns}ns"
