"""Parsing sizes ("256K", "1MiB") and durations ("10us", "1.5ms")."""
import re

_SIZE = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
         "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
_TIME = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_size(value):
    """Bytes from an int or a string such as "4096", "256K", "1MiB"."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"size must not be negative: {value}")
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
    if not m or m.group(2).lower() not in _SIZE:
        raise ValueError(f"invalid size {value!r} (examples: 4096, 256K, 16M, 1GiB)")
    return int(float(m.group(1)) * _SIZE[m.group(2).lower()])


def parse_duration_ns(value):
    """Nanoseconds from a string such as "500ns", "10us", "1.5ms", "2s";
    a bare number means microseconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"duration must not be negative: {value}")
        return int(value * 1000)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)?\s*", str(value))
    if not m:
        raise ValueError(f"invalid duration {value!r} (examples: 500ns, 10us, 1.5ms, 2s)")
    return int(round(float(m.group(1)) * _TIME[m.group(2) or "us"]))
