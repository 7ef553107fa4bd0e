"""Workload: a real program from the pyperformance suite, run in-process.

The benchmark sources ship inside the installed ``pyperformance`` package
(pyperformance/data-files/benchmarks/bm_NAME/run_benchmark.py). We import
that file as a module (its ``if __name__ == "__main__"`` block, pyperf's
multiprocess Runner, never runs) and call its functions directly for a
fixed amount of work; ``--size`` means, per program:

    richards    the idle task's count in one Richards().run(1) (pyperformance:
                10000)
    deltablue   repetitions of delta_blue(100) (pyperformance's unit)
    raytrace    width = height of the image (pyperformance: 100), one render
    go          games played by versus_cpu() (pyperformance: 200)
    chaos       iterations of create_image_chaos, 256x256 (pyperformance: 5000)
    json_dumps  repetitions of pyperformance's whole set of cases
"""
import importlib.util
import os
import sys

from _harness import main

PROGRAMS = ("richards", "deltablue", "raytrace", "go", "chaos", "json_dumps")


def benchmarks_dir():
    spec = importlib.util.find_spec("pyperformance")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyperformance is not installed")
    d = os.path.join(list(spec.submodule_search_locations)[0], "data-files", "benchmarks")
    if not os.path.isdir(d):
        raise RuntimeError(f"no benchmark sources in {d}")
    return d


_loaded = {}


def load(program):
    """The program's module, imported once per process (so that a warm-up
    run warms the very code objects that are measured)."""
    if program in _loaded:
        return _loaded[program]
    path = os.path.join(benchmarks_dir(), f"bm_{program}", "run_benchmark.py")
    spec = importlib.util.spec_from_file_location(f"bm_{program}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    _loaded[program] = mod
    return mod


def make(size, args):
    program = args.program
    mod = load(program)
    if program == "richards":
        # Richards().run(1) is pyperformance's unit; its length is the idle
        # task's count (10000), which we set to ``size`` to scale it.
        if not hasattr(mod, "_bench_idle_rec"):
            base = mod.IdleTaskRec

            class IdleTaskRec(base):
                count_value = 10000

                def __init__(self):
                    base.__init__(self)
                    self.count = IdleTaskRec.count_value

            mod.IdleTaskRec = mod._bench_idle_rec = IdleTaskRec
        r = mod.Richards()

        def run():
            mod._bench_idle_rec.count_value = size
            return r.run(1)
        return run
    if program == "deltablue":
        def run():
            for _ in range(size):
                mod.delta_blue(100)
        return run
    if program == "raytrace":
        return lambda: mod.bench_raytrace(1, size, size, None)
    if program == "go":
        def run():
            mod.GAMES = size
            return mod.versus_cpu()
        return run
    if program == "chaos":
        return _chaos(mod, size)
    if program == "json_dumps":
        data = [(getattr(mod, case)[0], range(getattr(mod, case)[1])) for case in mod.CASES]

        def run():
            for _ in range(size):
                mod.bench_json_dumps(data)
        return run
    raise ValueError(f"unknown program {program!r}")


def _chaos(mod, iterations):
    # The splines of bm_chaos's main(), which builds them inline.
    G = mod.GVector
    splines = [
        mod.Spline([
            G(1.597350, 3.304460, 0.000000), G(1.575810, 4.123260, 0.000000),
            G(1.313210, 5.288350, 0.000000), G(1.618900, 5.329910, 0.000000),
            G(2.889940, 5.502700, 0.000000), G(2.373060, 4.381830, 0.000000),
            G(1.662000, 4.360280, 0.000000)],
            3, [0, 0, 0, 1, 1, 1, 2, 2, 2]),
        mod.Spline([
            G(2.804500, 4.017350, 0.000000), G(2.550500, 3.525230, 0.000000),
            G(1.979010, 2.620360, 0.000000), G(1.979010, 2.620360, 0.000000)],
            3, [0, 0, 0, 1, 1, 1]),
        mod.Spline([
            G(2.001670, 4.011320, 0.000000), G(2.335040, 3.312830, 0.000000),
            G(2.366800, 3.233460, 0.000000), G(2.366800, 3.233460, 0.000000)],
            3, [0, 0, 0, 1, 1, 1]),
    ]
    chaos = mod.Chaosgame(splines, mod.DEFAULT_THICKNESS)
    return lambda: chaos.create_image_chaos(mod.DEFAULT_WIDTH, mod.DEFAULT_HEIGHT, iterations,
                                            None, mod.DEFAULT_RNG_SEED)


def add_args(p):
    p.add_argument("--program", choices=PROGRAMS, required=True)


if __name__ == "__main__":
    prog = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--program=")), None)
    if prog is None and "--program" in sys.argv[:-1]:
        prog = sys.argv[sys.argv.index("--program") + 1]
    sys.exit(main(f"pyperformance:{prog}", make, 1, add_args))
