"""`stackwatch probes`: list the USDT probes and the library to attach to,
and the LTTng-UST tracepoints of `run --lttng` when they were built (or,
with --events, the event names handlers and `run --events` accept)."""
import os
import sys

from ..events import kinds, probes

NAME = "probes"


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("probes", help="list the USDT probes and the file to attach to")
    p.add_argument("--events", action="store_true", help="list the event names handlers and --events accept")
    return p


def run(args):
    if args.events:
        for name in kinds.KINDS:
            print(name)
        print("groups: " + ", ".join(kinds.GROUPS))
        return 0
    if not probes.available:
        print("stackwatch: USDT probes were not compiled in (<sys/sdt.h> not found at build time; "
              "on Debian: apt install systemtap-sdt-dev, then reinstall stackwatch)", file=sys.stderr)
        return 1
    print(f"library: {probes.library}")
    print("probes (provider stackwatch; attach as usdt:LIBRARY:stackwatch:NAME):")
    for name in probes.names:
        print(f"  {name}({probes.ARGUMENTS.get(name, '')})")
    print("They fire in programs run with 'stackwatch run --probes' (or that call "
          "stackwatch.probes.watch()).")
    _lttng()
    return 0


def _lttng():
    """The LTTng-UST tracepoints, when their provider library was built
    (looked for beside the extension, not loaded: lttng-ust starts threads
    of its own)."""
    provider = os.path.join(os.path.dirname(probes.library or ""), "libstackwatch_lttng.so")
    if not os.path.exists(provider):
        print("LTTng-UST tracepoints: not built (lttng-ust's headers were not found at build time; on Debian: "
              "apt install liblttng-ust-dev, then reinstall stackwatch from source)")
        return
    print(f"LTTng-UST tracepoints (provider library {provider}):")
    for name in ("function_entry", "function_exit"):
        print(f"  stackwatch:{name} {{ function, file, line }}")
    for name in ("native_entry", "native_exit"):
        print(f"  stackwatch:{name} {{ function, file, line, addr }}")
    tasks = [k for k in kinds.KINDS if k.startswith("task_")]
    print(f"  stackwatch:{tasks[0]} ... {tasks[-1]} ({len(tasks)}) {{ function, file, line, a, b, c, s1, s2 }}")
    for name, fields in KERNEL_TRACEPOINTS:
        print(f"  stackwatch:{name} {{ tid, ts, {fields} }}")
    print("They fire in programs run with 'stackwatch run --lttng', recorded by an LTTng session that "
          "enabled them (lttng enable-event -u 'stackwatch:*'): the Python calls, the native functions, "
          "(with --events tasks) the task events and (with --kernel) the kernel events the trace records; "
          "these carry the thread they are about (tid) and their own time (ts, CLOCK_MONOTONIC ns), "
          "since stackwatch's reader thread emits them later.")


# The kernel events' tracepoints (native/lttng/lttng_tracepoints.h): name, fields after tid and ts.
KERNEL_TRACEPOINTS = (("syscall_entry", "id, name"), ("syscall_exit", "id, name, ret"),
                      ("off_cpu", "cpu, reason, state, next_tid, next_comm"),
                      ("on_cpu", "cpu, waker, woken_ns, prev_tid, prev_comm"), ("wakeup", "cpu, wakee, comm"),
                      ("page_fault", "cpu, address"))
