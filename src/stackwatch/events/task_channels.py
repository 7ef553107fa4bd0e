"""Channels of task events beyond queues and locks (issue 22):
multiprocessing's pipes used within one process, and the program's own
channels through a small API.

    stackwatch.sent(channel, value)       the running task hands value to
                                          channel (call it where it does)
    stackwatch.received(channel, value)   the running task's receive from
                                          channel returned value

channel is a name (a str) or an object (named by stackwatch.name(), else by
its class and address); value is recorded as its repr, cut at 200
characters. Both do nothing unless task events are recorded (`stackwatch
run --events tasks`, `stackwatch.start(events=["tasks"])`), and never
raise into the program for a value whose repr fails.

Pipes: while task events are wanted, multiprocessing.connection.Pipe
notes the two ends it makes (a pipe is one channel per direction, named
by stackwatch.name() of either end, else "Pipe 0x..."; a duplex pipe's
directions are told apart by " 1>2" and " 2>1"), and Connection's send /
send_bytes (recorded as it starts: once sent, the receiver may run first)
and recv / recv_bytes (as it returns) are sends and receives. A recv that finds
nothing to read (poll) blocks (reason channel); when it returns, the
thread that ended its wait is the first that sent on that direction after
it blocked (TASK_WOKEN, written by the receiver, which alone knows).

Sockets: a blocking recv / recv_into on an end of a socket.socketpair()
made while task events are wanted, with nothing to read, blocks (reason
I/O, on the receiving socket's name); when it returns, the thread that
ended its wait is the first that sent on the other end after it blocked
(TASK_WOKEN, as for pipes). The bytes are not messages.
Installed by task_hooks.
"""
import select   # (built in)
import sys
import time
import weakref

from .. import _native
from . import task_hooks
from .task_imports import when_imported

_ends = weakref.WeakKeyDictionary()        # a pipe's end -> (pipe id, its number 1 or 2, duplex, the other end)
_first = {}                                # (pipe id, sender's end) -> the first send since a receiver blocked
_last = {}                                 # (pipe id, sender's end) -> the last send: (native id, task, ns)
_since = {}                                # (pipe id, sender's end) -> when its receiver's block was recorded (ns)
_peers = weakref.WeakKeyDictionary()       # a socketpair's end -> weak reference to the other end


def sent(channel, value):
    """The running task hands `value` to `channel` (a name or an object)."""
    _message("task_send", channel, value)


def received(channel, value):
    """The running task's receive from `channel` returned `value`."""
    _message("task_receive", channel, value)


def _message(kind, channel, value):
    if not task_hooks._saved:   # task events are not wanted
        return
    try:
        name = channel if isinstance(channel, str) else task_hooks.channel_name(channel)
        task_hooks._event(kind, 0, 0, 0, name, task_hooks._repr(value), task_hooks._where(sys._getframe(2)))
    except Exception:   # (never into the program)
        pass


def install(wrap):
    """Wraps the pipes' methods with task_hooks' wrap(owner, name, make),
    which puts them back when task events stop: now, or when the program
    imports multiprocessing.connection (task_imports.py)."""
    when_imported("multiprocessing.connection", lambda mc: _install_pipes(mc, wrap))
    when_imported("socket", lambda socket: _install_sockets(socket, wrap))


def _install_pipes(mc, wrap):
    wrap(mc, "Pipe", _pipe)
    base = getattr(mc, "_ConnectionBase", mc.Connection)
    for name in ("send", "send_bytes"):
        wrap(base, name, _send)
    for name in ("recv", "recv_bytes"):
        wrap(base, name, _recv)


def _install_sockets(socket, wrap):
    wrap(socket, "socketpair", _socketpair)
    for name in ("send", "sendall"):
        wrap(socket.socket, name, _sock_send, inherited=True)
    for name in ("recv", "recv_into"):
        wrap(socket.socket, name, _sock_recv, inherited=True)


def forget():
    """Task events stop: no send is waited for any more."""
    _first.clear()
    _last.clear()
    _since.clear()


def _pipe(orig):
    def Pipe(duplex=True):
        a, b = orig(duplex)
        try:
            _ends[a] = (id(a), 1, duplex, weakref.ref(b))
            _ends[b] = (id(a), 2, duplex, weakref.ref(a))
        except Exception:
            pass
        return a, b
    return Pipe


def _direction(conn, sending):
    """(the key of the direction a message takes from or to conn: (pipe
    id, the sending end's number), its channel name), or None for an end
    Pipe did not make while task events were wanted."""
    end = _ends.get(conn)
    if end is None:
        return None
    pipe, number, duplex, other = end
    given = task_hooks._names.get(conn) or task_hooks._names.get(other())
    name = given[0] if given else f"Pipe {pipe:#x}"
    sender = number if sending else 3 - number
    return (pipe, sender), (f"{name} {sender}>{3 - sender}" if duplex else name)


def _send(orig):
    def send(self, obj, *args):
        try:   # (before: once sent, the receiver may run and record its receive first)
            d = _direction(self, True)
            if d is not None:
                key, channel = d
                task_hooks._event("task_send", 0, 0, 0, channel, task_hooks._repr(_sent_bytes(obj, *args)),
                                  task_hooks._where(sys._getframe(1)))
                _sending(key)
        except Exception:
            pass
        return orig(self, obj, *args)
    return send


def _sending(key):
    """The running thread sends in direction key: the first sender since
    a receiver blocked on it, if it is, and the last."""
    me = (task_hooks.threading_get_native_id(), _native.hooks.task_running(), time.monotonic_ns())
    _last[key] = me
    if key in _first and _first[key] is None:
        _first[key] = me


def _blocking(key, channel, reason, frame):
    """The running thread waits for a sender in direction key (its block)."""
    _first[key] = None
    task_hooks._event("task_block", task_hooks._reason(reason), 0, 0, channel, None, task_hooks._where(frame))
    _since[key] = time.monotonic_ns()


def _received(key, channel, frame):
    """The wait in direction key ended: woken by its first sender (else the
    last), at its send, or at the block if the send came first (a sender
    between the receiver's poll and its block's record: the wake is never
    before the wait it ends)."""
    try:
        who = _first.pop(key, None) or _last.get(key)
        since = _since.pop(key, 0)
        if who is not None:
            native_id, task, t = who
            t = max(t, since)
            task_hooks._event("task_woken", task, t, native_id, channel, None,   # (t: made `ago` in C)
                              task_hooks._where(frame))
    except Exception:
        pass


def _sent_bytes(obj, offset=0, size=None):
    """What send_bytes(obj, offset, size) sends (send(obj): obj)."""
    if not offset and size is None:
        return obj
    view = memoryview(obj).cast("B")
    return bytes(view[offset:None if size is None else offset + size])


def _recv(orig):
    def recv(self, *args):
        d = key = channel = None
        try:
            d = _direction(self, False)
            if d is not None:
                key, channel = d
                if not self.poll():   # nothing to read: it waits for a sender
                    _blocking(key, channel, "channel", sys._getframe(1))
                else:
                    key = None
        except Exception:
            key = None
        try:
            obj = orig(self, *args)
        finally:
            if key is not None:
                _received(key, channel, sys._getframe(1))
        try:
            if d is not None:
                task_hooks._event("task_receive", 0, 0, 0, d[1], task_hooks._repr(obj),
                                  task_hooks._where(sys._getframe(1)))
        except Exception:
            pass
        return obj
    return recv


# ---- a socketpair's ends ----

def _socketpair(orig):
    def socketpair(*args, **kwargs):
        a, b = orig(*args, **kwargs)
        try:
            _peers[a], _peers[b] = weakref.ref(b), weakref.ref(a)
        except Exception:
            pass
        return a, b
    return socketpair


def _sock_send(orig):
    def send(self, *args, **kwargs):
        try:
            peer = _peers.get(self) if _peers else None
            if peer is not None:
                _sending(("socket", id(peer())))
        except Exception:
            pass
        return orig(self, *args, **kwargs)
    return send


def _sock_recv(orig):
    def recv(self, *args, **kwargs):
        key = None
        try:   # (a blocking end with nothing to read: it waits for its peer)
            if _peers and self in _peers and self.gettimeout() is None and not select.select([self], [], [], 0)[0]:
                key, channel = ("socket", id(self)), task_hooks.channel_name(self)
                _blocking(key, channel, "io", sys._getframe(1))
        except Exception:
            key = None
        try:
            return orig(self, *args, **kwargs)
        finally:
            if key is not None:
                _received(key, channel, sys._getframe(1))
    return recv
