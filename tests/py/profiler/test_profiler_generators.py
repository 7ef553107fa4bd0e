"""Stacks through generators keep their callers in `stackwatch profile`: a
recursive tree walk whose work runs inside a generator it iterates (the
shape of ast.iter_child_nodes walkers) and pyflakes on a source tree. A
generator that yields while its stack is read used to end the walk there,
so that its frame showed up as a thread's outermost one, beside <module>
(tests/py/tracer/test_sample_vs_trace.py checks every sampled stack
against the exact trace)."""
import os
from pathlib import Path

import pytest

from conftest import needs_sampler, run

pytestmark = needs_sampler

PROGRAM = Path(__file__).resolve().parents[2] / "programs" / "gen_shapes.py"


def collapsed_stacks(path):
    """[(frames, count)] of a collapsed profile, outermost frame first."""
    out = []
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        out.append((stack.split(";"), int(count)))
    return out


def rooted(stacks, in_program, root):
    """(samples holding a frame of the program, those not rooted at root)."""
    own = [(f, n) for f, n in stacks if any(in_program(x) for x in f)]
    return sum(n for _, n in own), [(f, n) for f, n in own if f[0] != root]


@pytest.mark.timing
@pytest.mark.parametrize("mode", ["wall", "cpu"])
def test_tree_walk_through_a_generator(tmp_path, mode):
    out = tmp_path / "p.collapsed.txt"
    r = run(["profile", "--interval", "200us", "--mode", mode, "-o", str(out), str(PROGRAM), "8", "25", "walk"])
    assert r.returncode == 0, r.stderr
    stacks = collapsed_stacks(out)
    total, stray = rooted(stacks, lambda f: str(PROGRAM) in f, f"<module> ({PROGRAM}:1)")
    assert not stray, stray[:5]
    assert total >= 50, r.stderr
    # The generator is sampled, under its callers (a generator leaf that
    # yields before its frame is read is a torn walk, redone: the thread
    # state is read again right before the frame, so a generator body this
    # short is still sampled).
    assert any(f[-1].startswith("iter_child_nodes ") for f, _ in stacks), stacks[:5]


@pytest.mark.timing
def test_pyflakes(tmp_path):
    try:
        import pyflakes
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("pyflakes is not installed (scripts/venv.sh installs it)")
        pytest.skip("pyflakes is not installed (scripts/venv.sh installs it)")
    src = Path(pyflakes.__file__).parent
    out = tmp_path / "p.collapsed.txt"
    r = run(["profile", "--interval", "200us", "-o", str(out), "-m", "pyflakes", str(src)])
    assert r.returncode in (0, 1), r.stderr   # (1: pyflakes found something to say)
    stacks = collapsed_stacks(out)
    total, stray = rooted(stacks, lambda f: f"{os.sep}pyflakes{os.sep}" in f,
                          f"<module> ({src / '__main__.py'}:1)")
    assert not stray, stray[:5]
    assert total >= 50, r.stderr
