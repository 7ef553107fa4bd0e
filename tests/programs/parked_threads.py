"""A target for `stackwatch dump`: threads parked at known points (blocked
on Events, one in a generator, one in a nested function), the main thread
parked reading stdin. Once all are parked it prints "names", its minor
version and a JSON map of thread ids to Python's thread names, then
"locals" and a JSON map of each parked function's name to its own view of
its local variables as it parks ({name: [type name, id, repr]}), then
"ready" and a JSON map of thread ids to native ids; SIGUSR1 then makes
faulthandler write every thread's stack, at that parked point, to the file
named by argv[1]. Ends when stdin closes."""
import faulthandler
import json
import signal
import sys
import threading

release = threading.Event()
LOCALS = {}


def snapshot(function, variables):
    LOCALS[function] = {k: [type(v).__name__, id(v), repr(v)] for k, v in variables.items()}


class Worker:
    def run(self, ready):
        count, zero, ratio, tiny, big, neg = 42, 0, 2.5, 1e-310, 2 ** 100, -(10 ** 30)
        text, data, flag, off, nothing = "h\xe9llo \u5165\u308c\u5b50 \U0001f600 'q\"", b"\x00by'tes\xff", True, False, None
        long_text, long_data, inf = "x" * 5000, bytes(range(256)) * 8, float("-inf")
        snapshot("run", locals())
        ready.set()
        release.wait()


def gen(ready):
    label = "generator"
    snapshot("gen", locals())
    ready.set()
    yield release.wait()


def consume(ready):
    snapshot("consume", locals())
    for _ in gen(ready):
        pass


def outer(ready):
    depth = 1

    def inner():
        mine = 3.0
        snapshot("inner", locals())   # ready: a free variable
        ready.set()
        release.wait()
    snapshot("outer", locals())   # ready: a cell variable
    inner()


def start(target, name):
    ready = threading.Event()
    t = threading.Thread(target=target, args=(ready,), name=name, daemon=True)
    t.start()
    ready.wait()
    return t


def main():
    threads = [start(Worker().run, "worker"), start(consume, "générateur"), start(outer, "入れ子")]   # str kinds 1 and 2
    ids = {t.ident: t.native_id for t in threads + [threading.main_thread()]}
    names = {t.ident: t.name for t in threading.enumerate()}
    print("names", sys.version_info[1], json.dumps(names), flush=True)
    out = open(sys.argv[1], "w")
    faulthandler.register(signal.SIGUSR1, file=out, all_threads=True)
    snapshot("main", locals())
    print("locals", json.dumps(LOCALS), flush=True)
    print("ready", json.dumps(ids), flush=True), sys.stdin.read()   # one line: the main thread's place from "ready" on


if __name__ == "__main__":
    main()
