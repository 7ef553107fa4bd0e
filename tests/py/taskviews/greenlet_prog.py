"""A greenlet program for the views' end-to-end tests, run under
`stackwatch run --events tasks`: a producer and a consumer greenlet pass
numbers with switch(); each sleeps while it runs (time.sleep: running, not
a recorded wait), and the program logs its own ground truth: how long
each greenlet slept, the order of its switches (logged where it calls
switch()) and of its other task events (creations, the values switch()
passes: sent as it is called, received when it returns or a greenlet
starts with them; the consumer's exit)."""
import json

from conftest import needs_module, run_traced

PROGRAM = r'''
import json, sys, time
import greenlet

N = 4
slept = {"greenlet produce": 0, "greenlet consume": 0}
switches = []
events = []   # [kind, from, to] of the creations, messages and exit, in order
names = {}

def label(g):
    return "MainThread" if g.parent is None else names[id(g)]

def switch(target, *args):
    """target.switch(*args), logged first as (target, the current greenlet)."""
    me = label(greenlet.getcurrent())
    if args:
        events.append(["send", me, label(target)])
    if not target and not target.dead:   # it starts
        events.append(["create", me, label(target)])
    switches.append([label(target), me])
    return target.switch(*args)

def nap(who, s):
    t = time.perf_counter_ns()
    time.sleep(s)
    slept[who] += time.perf_counter_ns() - t

def produce(n):
    events.append(["receive", "MainThread", "greenlet produce"])
    for i in range(1, n + 1):
        nap("greenlet produce", 0.004)
        switch(consumer, i)
    switch(consumer, None)

def consume(first):
    events.append(["receive", "greenlet produce", "greenlet consume"])
    acc, i = 1, first
    while i is not None:
        acc *= i
        nap("greenlet consume", 0.002)
        i = switch(producer)
        events.append(["receive", "greenlet produce", "greenlet consume"])
    events.append(["exit", None, "greenlet consume"])
    return acc

producer = greenlet.greenlet(produce)
consumer = greenlet.greenlet(consume)
names[id(producer)], names[id(consumer)] = "greenlet produce", "greenlet consume"
result = switch(producer, N)
switches.append(["MainThread", "greenlet consume"])   # consume's return ends it
assert result == 24, result
json.dump({"slept": slept, "switches": switches, "events": events}, open(sys.argv[1], "w"))
'''


def traced(folder):
    """(the trace's path, the program's own log) of PROGRAM run with task
    events in `folder`."""
    needs_module("greenlet", "greenlet is not installed (scripts/venv.sh installs it)")
    log = folder / "log.json"
    swt, _ = run_traced(folder, PROGRAM, "--events", "tasks", args=(str(log),))
    return swt, json.loads(log.read_text())
