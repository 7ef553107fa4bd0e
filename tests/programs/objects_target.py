"""A known program for the object-lifetime tests: creates and deletes known
numbers of instances of several classes (a subclass, a class with
__slots__, one with __del__, one created while events are on, a
namedtuple, a hot loop, a linked list freed at once, cycles freed by the
collector) and prints the expected counts per class as JSON.

Usage: python objects_target.py handler          counts from a handler
       python objects_target.py file PATH        records objects into PATH
       python objects_target.py probes P[,P...]  waits for bpftrace (and the
                                                 test's "go", see probe_target.py)
"""
import collections
import copy
import gc
import json
import sys

import stackwatch
from stackwatch import _native


class SwPlain:
    pass


class SwChild(SwPlain):
    def __init__(self, x):
        self.x = x


class SwSlotted:
    __slots__ = ("next",)

    def __init__(self, nxt):
        self.next = nxt


class SwWithDel:
    def __del__(self):
        pass


def workload():
    """Runs the known workload; returns {class: instances created and
    deleted} (every instance made here is also freed here)."""
    class SwLate(SwChild):              # created while the events are on
        pass
    SwPair = collections.namedtuple("SwPair", "a b")
    for _ in range(1000):               # a hot loop
        SwPlain()
    for i in range(500):
        SwChild(i)
    head = None
    for _ in range(300):                # a linked list, freed in one cascade
        head = SwSlotted(head)
    del head
    for _ in range(20):
        SwWithDel()
    for _ in range(7):
        SwLate(1)
    for _ in range(5):
        SwPair(1, 2)
    for _ in range(3):                  # the copy is made without calling the class
        copy.copy(SwChild(1))
    gc.disable()
    for _ in range(10):                 # cycles: freed by the collector
        p = SwPlain()
        p.me = p
    del p
    gc.collect()
    gc.enable()
    return {"SwPlain": 1010, "SwChild": 506, "SwSlotted": 300, "SwWithDel": 20,
            "workload.<locals>.SwLate": 7, "SwPair": 5}


def main():
    mode = sys.argv[1]
    if mode == "handler":
        seen = collections.Counter()
        files = set()

        def on_event(ev):
            seen[ev.kind + " " + ev.name] += 1
            if ev.name.startswith(("Sw", "workload.")):
                files.add(ev.data["class_file"])
        h = stackwatch.add_handler(on_event, events="objects")
        expected = workload()
        h.remove()
        state = _native._objects_state()
        print(json.dumps({"expected": expected, "seen": seen, "files": sorted(files),
                          "state_after": state}))
    elif mode == "file":
        stackwatch.start(sys.argv[2], events=["objects"])
        expected = workload()
        summary = stackwatch.stop()
        print(json.dumps({"expected": expected, "error": summary.error, "dropped": summary.dropped}))
    elif mode == "probes":
        from probe_target import wait_until_attached
        error = wait_until_attached(sys.argv[2].split(","))
        if error:
            print(json.dumps({"error": error}), flush=True)
            return 1
        expected = workload()
        stackwatch.probes.unwatch()
        print(json.dumps({"expected": expected}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
