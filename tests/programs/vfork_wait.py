"""vfork_wait.py LIB MS - a Python program whose main thread cannot be
stopped for MS milliseconds: it calls vfork_wait(MS) of the C library LIB
(tests/programs/native/vfork_wait.c), waiting in the kernel for its vfork
child, while a second thread spins in Python. Prints "ready" before the
call, then "back" after it, then exits when its input closes."""
import ctypes
import sys
import threading


def spin():
    n = 0
    while True:
        n += 1


lib = ctypes.CDLL(sys.argv[1])
threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
lib.vfork_wait(int(sys.argv[2]))
print("back", flush=True)
sys.stdin.read()
