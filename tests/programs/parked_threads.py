"""A target for `stackwatch dump`: threads parked at known points (blocked
on Events, one in a generator, one in a nested function), the main thread
parked reading stdin. Once all are parked it prints "names", its minor
version and a JSON map of thread ids to Python's thread names, then
"ready" and a JSON map of thread ids to native ids; SIGUSR1 then makes
faulthandler write every thread's stack, at that parked point, to the file
named by argv[1]. Ends when stdin closes."""
import faulthandler
import json
import signal
import sys
import threading

release = threading.Event()


class Worker:
    def run(self, ready):
        ready.set()
        release.wait()


def gen(ready):
    ready.set()
    yield release.wait()


def consume(ready):
    for _ in gen(ready):
        pass


def outer(ready):
    def inner():
        ready.set()
        release.wait()
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
    print("ready", json.dumps(ids), flush=True), sys.stdin.read()   # one line: the main thread's place from "ready" on


if __name__ == "__main__":
    main()
