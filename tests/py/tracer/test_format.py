"""The trace file: damaged, truncated or foreign files give one clear error
naming the file, and intact chunks before damage still read."""
import os

import pytest

import stackwatch
from conftest import run, slice_of, thread_pos
from stackwatch import Trace


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@pytest.fixture
def trace_file(tmp_path):
    p = str(tmp_path / "t.swt")
    with stackwatch.trace(p, buffer_size="4K"):
        fib(16)
    return p


def calls_of(t, name):
    return sum(r.calls for r in t.stats() if t.codes[r.code].qualname == name)


def test_roundtrip(trace_file):
    t = Trace(trace_file)
    assert t.complete and t.damage is None
    assert calls_of(t, "fib") == 3193
    assert t.meta["pid"] == os.getpid()
    assert t.meta["python_version"]
    assert t.meta["clock"] in ("tsc", "monotonic")


def test_truncated_keeps_intact_chunks(trace_file, tmp_path):
    data = open(trace_file, "rb").read()
    cut = tmp_path / "cut.swt"
    cut.write_bytes(data[: len(data) * 2 // 3])
    t = Trace(str(cut))
    assert not t.complete
    assert "truncated" in t.damage
    assert 0 < calls_of(t, "fib") < 3193


def chunk_payloads(data):
    """(offset, length) of each chunk's payload (docs/format.md)."""
    out, off = [], 16
    while off + 12 <= len(data):
        n = int.from_bytes(data[off + 4:off + 8], "little")
        out.append((off + 12, n))
        off += 12 + n
    return out


def test_corrupted_byte_detected(trace_file, tmp_path):
    data = bytearray(open(trace_file, "rb").read())
    chunks = chunk_payloads(data)
    assert len(chunks) > 4
    off, n = chunks[len(chunks) // 2]   # a byte inside a payload in the middle
    data[off + n // 2] ^= 0xFF
    bad = tmp_path / "bad.swt"
    bad.write_bytes(bytes(data))
    t = Trace(str(bad))
    assert "checksum" in t.damage
    assert calls_of(t, "fib") < 3193


@pytest.mark.parametrize("content", [b"", b"hello world, not a trace", b"\x89SWT\r\n\x1a\n" + b"\x07\x00" * 4])
def test_foreign_files_are_errors(tmp_path, content):
    p = tmp_path / "x.swt"
    p.write_bytes(content)
    with pytest.raises(stackwatch.TraceError) as e:
        Trace(str(p))
    assert str(p) in str(e.value)


def test_cli_on_foreign_file(tmp_path):
    p = tmp_path / "x.swt"
    p.write_bytes(b"garbage" * 10)
    r = run(["stats", str(p)])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert str(p) in r.stderr and "not a stackwatch trace" in r.stderr


def test_bytes_per_event_on_fib(tmp_path):
    p = str(tmp_path / "f.swt")
    with stackwatch.trace(p) as t:
        fib(22)
    events = t.summary.events
    assert events >= 2 * 57313
    size = os.path.getsize(p)
    # The format's budget is at most 4 bytes per call or return event.
    assert size / events <= 4.0, size / events


def test_the_clock_rate_is_cached_for_the_boot(tmp_path):
    """The TSC's rate is measured over 2 ms once a boot and cached (clock.c,
    docs/architecture.md "Data flow"): the first trace writes the cache with
    the rate in its META, the next one takes it, and its times are still
    right (a 50 ms sleep lasts 50 ms)."""
    cache = tmp_path / "clock"
    prog = tmp_path / "p.py"
    prog.write_text("import time\n\ndef nap():\n    time.sleep(0.05)\n\nnap()\n")
    metas = []
    for i in range(2):
        out = tmp_path / f"t{i}.swt"
        r = run(["run", "-o", str(out), str(prog)], env={"STACKWATCH_CLOCK_CACHE": str(cache)})
        assert r.returncode == 0, r.stderr
        t = Trace(str(out))
        metas.append(t.meta)
        start, end = slice_of(t, thread_pos(t, "MainThread"), "nap")
        assert 0.049 <= (end - start) / 1e9 < 0.5
    if metas[0]["clock"] != "tsc":   # (the kernel's clocksource is not the TSC: no rate to cache)
        assert not cache.exists()
        return
    _, _, boot, millihz, over = cache.read_text().split()
    assert boot == metas[0]["boot_id"] and int(over) >= 2_000_000
    assert abs(metas[0]["clock_hz"] - int(millihz) / 1000) < 1
    assert metas[1]["clock_hz"] == int(millihz) / 1000
