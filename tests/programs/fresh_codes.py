"""Code objects freed and made again at the same addresses, sampled while
they run (tests/py/tracer/test_sample_vs_trace.py): imports of many fresh
modules, each run once and freed (the shape of an import-heavy start-up),
and source compiled and run in a loop. Each module and each compiled
source has its own file name and its functions their own first lines, so
a frame named after a code object that lived at its address before is a
stack the program never had. Modules without functions too: their file
name goes with their code once run, and the next module's code, its
name the interned "<module>" and its file name of the same length, is
made where theirs were, pointer for pointer; a missing attribute's
message, made right after, takes the freed file name's memory (a reader
that read a module frame's file name after its import ended showed it).

    python fresh_codes.py DIR MODULES ROUNDS
"""
import importlib
import sys
from pathlib import Path


def module_source(i):
    # A function at a first line of its own, a class, and some work in
    # the module's body (samples land in it) that calls them.
    return ("\n" * (i % 5) + f"def f{i}(x):\n    return x * 3 + {i}\n\n"
            f"class C{i}:\n    def __init__(self, v):\n        self.v = f{i}(v)\n\n"
            f"total = 0\nfor k in range({300 + i % 17}):\n    total += C{i}(k).v\n")


BARE = 60   # (fewer, or names of one length, misnamed frames far less often)


def bare_source(i):
    return f"total = 0\nfor k in range({200 + i % 13}):\n    total += k * {i}\n"


def main():
    folder, modules, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    folder.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(folder))
    sys.dont_write_bytecode = True
    for i in range(modules):
        (folder / f"fresh_{i}.py").write_text(module_source(i))
    for i in range(BARE):
        (folder / f"bare_{i}.py").write_text(bare_source(i))
    total, messages = 0, []
    for r in range(rounds):   # (first: a heap not yet cut up by the rest)
        for i in range(BARE):
            name = f"bare_{i}"
            total += importlib.import_module(name).total
            del sys.modules[name]
            # (a string as long as a file name, made right after)
            messages.append(f"{name} imported".ljust(len(str(folder)) + 12, "."))
            del messages[:-50]
    for r in range(rounds):
        for i in range(modules):
            name = f"fresh_{i}"
            total += importlib.import_module(name).total
            del sys.modules[name]   # the next round imports it afresh
        for i in range(modules):
            # (the module's code object is freed when exec returns)
            g = {}
            exec(compile(module_source(i + modules * (r + 1)), f"<compiled {i}>", "exec"), g)
            total += g["total"]
    print(total)


main()
