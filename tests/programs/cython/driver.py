"""driver.py - runs cyprog.main (tests/py/tracer/test_cython.py): the
compiled module, or with `twin` as argument its pure-Python twin (with
`linetrace`, the module compiled with linetrace=True); the
callback is a Python function, so the trace has Python frames under
Cython frames."""
import sys


def callback(x):
    return x + 1


def run():
    if sys.argv[1:] == ["twin"]:
        import cyprog_twin as prog
    elif sys.argv[1:] == ["linetrace"]:
        import cyprog_lt as prog
    else:
        import cyprog as prog
    print(prog.__file__, prog.main(callback))


run()
