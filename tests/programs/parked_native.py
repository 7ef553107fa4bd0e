"""A target for `stackwatch dump --native` and `record --pid --native`:
threads parked in known C call chains. The main thread sleeps in
time.sleep called from a key function that list.sort calls (C calling
back into Python: sorted -> list.sort -> key -> leaf -> time.sleep); a
thread named "waiter" blocks in select.select. Once both are about to
block it prints "ready" and a JSON map of thread names to native ids.
Runs until killed."""
import json
import select
import threading
import time

started = threading.Event()
ids = {}


def waiter():
    ids["waiter"] = threading.get_native_id()
    started.set()
    select.select([], [], [], 3600)


def leaf():
    ids["main"] = threading.get_native_id()
    print("ready", json.dumps(ids), flush=True)
    time.sleep(3600)


def key(x):
    leaf()
    return x


threading.Thread(target=waiter, name="waiter", daemon=True).start()
started.wait()
sorted([1], key=key)
