"""A damaged trace (issue 14): the reader resynchronises at the next intact
chunk, reads every intact chunk and reports each damaged range with its
offset and the chunks and events lost; `stats` and `export` print or write
what they could read and exit with status 1. The ground truth is the same
trace undamaged, and the chunk boundaries walked here from docs/format.md
("The container")."""
import re
import struct

import pytest

from conftest import run, write
from stackwatch import Trace

PROGRAM = "def f(i):\n    return i\nfor i in range(60000):\n    f(i)\n"


def chunks(data):
    """[(offset, total length)] of the file's chunks."""
    out, i = [], 16
    while i + 12 <= len(data):
        n = struct.unpack_from("<I", data, i + 4)[0]
        out.append((i, 12 + n))
        i += 12 + n
    return out


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    d = tmp_path_factory.mktemp("damaged")
    prog = write(d / "prog.py", PROGRAM)
    r = run(["run", "-q", "--buffer-size", "4K", "-o", str(d / "t.swt"), prog])
    assert r.returncode == 0, r.stderr
    return d / "t.swt"


def damage(intact, tmp_path, where):
    data = bytearray(intact.read_bytes())
    spots = {"500": [500], "middle": [len(data) // 2], "both": [500, len(data) // 2]}[where]
    for at in spots:
        data[at] ^= 0x10
    path = tmp_path / "d.swt"
    path.write_bytes(bytes(data))
    hit = sorted({off for at in spots for off, n in chunks(data) if off <= at < off + n})
    return path, hit


# The reader's resynchronisation is C over chunks, the same for every
# Python: two versions (one before 3.12's monitoring, one after).
pytestmark = pytest.mark.versions("3.11", "3.13")


@pytest.mark.parametrize("where", ["500", "middle", "both"])
def test_every_intact_chunk_is_read_and_each_damage_reported(intact, tmp_path, where):
    path, hit = damage(intact, tmp_path, where)
    whole, t = Trace(str(intact)), Trace(str(path))
    assert whole.damage is None and t.damage is not None
    # One range per damaged chunk, at its offset, one chunk each.
    ranges = re.findall(r"in the chunk at offset (\d+) \(\d+ bytes?, (\d+) chunks?", t.damage)
    assert [int(o) for o, _ in ranges] == hit and all(n == "1" for _, n in ranges), t.damage
    lost = int(re.search(r"(\d+) events lost", t.damage).group(1)) if "events lost" in t.damage else 0
    assert t.event_count() + lost == whole.event_count() > 100000
    # Read past the damage: the program's last return is there.
    last = list(t.events(0))[-1]
    assert (last.kind, last.t_ns) == (lambda e: (e.kind, e.t_ns))(list(whole.events(0))[-1])


@pytest.mark.parametrize("command", ["stats", "export"])
def test_stats_and_export_print_what_they_read_then_exit_1(intact, tmp_path, command):
    path, _ = damage(intact, tmp_path, "middle")
    out = tmp_path / "d.json"
    args = [command, str(path)] + (["--format", "chrome", "-o", str(out)] if command == "export" else [])
    r = run(args)
    assert r.returncode == 1
    last = r.stderr.splitlines()[-1]
    assert last.startswith(f"stackwatch: error: {path} is damaged (") and "the output above" in last, r.stderr
    n = Trace(str(path)).event_count()
    if command == "stats":
        assert r.stdout.startswith(f"{path}: {n} events, 1 thread")
        assert "f  (" in r.stdout
    else:
        assert out.stat().st_size > 0 and f"stackwatch: wrote {out}" in r.stderr
