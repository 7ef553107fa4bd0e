"""watch(): a profiler started in the background, seen as its live
History, as dask's profiler watches a thread.

    h = stackwatch.watch(interval="1ms", cycle="2s", maxlen=1000)
    ...
    stackwatch.get_profile(h, start=time.time() - 10)
"""
import threading

from .history import History
from .session import Profiler


def watch(thread_id=None, interval="1ms", cycle="2s", maxlen=1000, omit=(), stop=None, *, mode="wall"):
    """Starts a profiler and returns its live History: a new tree every
    `cycle`, at most `maxlen` kept (None: no bound), frames of files
    matching the `omit` globs left out (their callees attach to their
    caller). thread_id: only that thread's trees (by threading.get_ident();
    all threads are sampled; default all threads, unlike dask which
    defaults to the calling thread). stop: a callable polled every cycle
    (on a helper thread); when it returns true the profiler stops.
    history.stop() stops it too."""
    if thread_id is not None and (isinstance(thread_id, bool) or not isinstance(thread_id, int) or thread_id < 0):
        raise ValueError(f"thread_id must be a thread ident (threading.get_ident()) or None, not {thread_id!r}")
    if stop is not None and not callable(stop):
        raise ValueError(f"stop must be a callable (polled every cycle) or None, not {stop!r}")
    prof = Profiler(interval, mode=mode, cycle=cycle, maxlen=maxlen, omit=omit)
    h = History(prof._s, thread_id, _profiler=prof)
    if stop is not None:
        done = threading.Event()
        period = prof.cycle_ns / 1e9

        def poll():
            while not done.wait(period):
                if not prof.running:
                    return
                try:
                    should = stop()
                except Exception:
                    should = True   # a broken stop condition must not keep it sampling forever
                if should:
                    h.stop()
                    return

        prof._ignore = prof._ignore + (poll.__code__,)
        t = threading.Thread(target=poll, name="stackwatch-watch", daemon=True)
        h._poller = (t, done)
    prof.start()
    if h._poller:
        h._poller[0].start()
    return h
