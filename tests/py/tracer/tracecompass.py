"""What Trace Compass reads of an LTTng trace, restated in Python for the
tests of the CTF export. Trace Compass (an Eclipse application) cannot run
here, so its rules are applied to what the real reader here, babeltrace2,
reads of the export. Each rule names the file of Trace Compass it comes
from (eclipse-tracecompass/org.eclipse.tracecompass; docs/architecture.md
"What Trace Compass needs of the CTF export" lists them)."""
import re
from collections import defaultdict

UST = "lttng/org.eclipse.tracecompass.lttng2.ust.core/src/org/eclipse/tracecompass/"
# The call-stack analysis's events (UST layout, LttngUst20EventLayout.java;
# LttngUstCallStackProvider.java takes both libraries' entry and exit).
FUNC_ENTRY = {"lttng_ust_cyg_profile:func_entry", "lttng_ust_cyg_profile_fast:func_entry"}
FUNC_EXIT = {"lttng_ust_cyg_profile:func_exit", "lttng_ust_cyg_profile_fast:func_exit"}
# The kernel analysis's (LttngEventLayout.java, Lttng26EventLayout.java):
# the fields SchedSwitchHandler.java and SchedWakeupHandler.java read.
SCHED_SWITCH_FIELDS = {"prev_comm", "prev_tid", "prev_state", "prev_prio", "next_comm", "next_tid", "next_prio"}
SCHED_WAKEUP_FIELDS = {"tid", "prio", "target_cpu"}
SYSCALL_ENTRY, SYSCALL_EXIT, SYSCALL_RET = "syscall_entry_", "syscall_exit_", "ret"
# StateDumpHandler.java reads these of lttng_statedump_process_state (as
# integers, and the name as a string).
STATEDUMP, STATEDUMP_FIELDS = "lttng_statedump_process_state", {"tid", "pid", "ppid", "name", "status", "cpu"}


def metadata(path):
    """A TSDL metadata file as the parts Trace Compass reads: env (values
    unquoted, as CtfUtils.getTracerName does), the clock's uuid, the
    stream's event context field names and each event's payload field
    names, both as written (the CTF parser exposes a context field as
    "context." + that name, CtfTmfEvent.parseFields, and a payload field
    without its leading "_", CtfTmfEventField.parseField)."""
    text = path.read_text()
    env_block = re.search(r"^env \{\n(.*?)^\};", text, re.M | re.S)[1]
    env = {k: v.strip('"') for k, v in re.findall(r"^\t(\w+) = (\"(?:[^\"\\]|\\.)*\"|-?\d+);$", env_block, re.M)}
    clock = re.search(r"^clock \{\n(.*?)^\};", text, re.M | re.S)[1]
    uuid = re.search(r'^\tuuid = "([^"]*)";$', clock, re.M)
    context = re.search(r"event\.context := struct \{\n(.*?)\t\};", text, re.S)[1]
    events = {m[1]: re.findall(r"(\w+)(?:\[\d+\])?;$", m[2], re.M)
              for m in re.finditer(r'^event \{\n\tname = "([^"]+)";.*?fields := struct \{\n(.*?)\t\};\n\};', text,
                                   re.M | re.S)}
    return {"env": env, "clock_uuid": uuid and uuid[1], "context": re.findall(r"(\w+)(?:\[\d+\])?;$", context, re.M),
            "events": events}


def trace_type(meta):
    """What Trace Compass takes the trace for, and the event layout it
    reads it with: ("ust", 29) is an LTTng-UST trace read with
    LttngUst29EventLayout (LttngUstTrace.java: validate, getLayoutFromEnv;
    ("ust", None): the default layout), ("kernel", 29) an LTTng kernel
    trace read with Lttng29EventLayout (LttngKernelTrace.java: validate,
    getTracerFromEnv; ("kernel", 0): the base layout, whose system calls
    are named sys_*); None: neither."""
    env = meta["env"]
    try:
        major, minor = int(env.get("tracer_major", -1)), int(env.get("tracer_minor", -1))
    except ValueError:
        major = minor = -1
    domain, tracer = env.get("domain"), env.get("tracer_name")
    if domain == "ust":
        if tracer != "lttng-ust" or major < 2:
            return "ust", None
        return "ust", 20 + min(minor, 9) if minor >= 7 else 20
    if domain == "kernel":
        if tracer != "lttng-modules" or major < 2 or minor < 6:
            return "kernel", 0
        return "kernel", 20 + min(minor, 9)
    return None


def host_id(meta, trace_name):
    """CtfTmfTrace.getHostId: the clock's uuid, else the trace's own name
    (which would put ust/ and kernel/ on two hosts)."""
    return meta["clock_uuid"] or trace_name


# FunctionNameMapper.java (tmf.core): the lines of an nm-style file and of
# an "address size name" one; IMappingFile.java: a "-PID." in the file's
# name makes it one process's.
NM_PATTERN = re.compile(r"([0-9a-f]+)([\s][a-zA-Z][\s])(.+)")
MAP_WITH_SIZE_PATTERN = re.compile(r"([0-9a-f]+)[\s]([a-f0-9]+)[\s](.+)")
PID_IN_NAME = re.compile(r"(.+)-([0-9]+)\.(.+)")


def name_map(path):
    """{address: name} as the symbol configuration reads a mapping file
    (FunctionNameMapper.guessMappingType, then mapFromNmTextFile); None
    when it would not take the file for nm's format."""
    lines = path.read_text().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    nm = sized = 0
    for line in lines:
        nm += bool(NM_PATTERN.search(line))
        sized += bool(MAP_WITH_SIZE_PATTERN.search(line))
        if abs(sized - nm) > 10:
            break
    if not nm > sized:
        return None
    table = {}
    for line in lines:
        m = NM_PATTERN.search(line)
        if m:
            table[int(m[1], 16)] = m[3]
    return table


def symbol(table, address):
    """The name the call-stack view shows for an address
    (MappingFile.getSymbolEntry: the nearest symbol at or below it, but
    only the exact one past the last; SymbolProviderUtils: else the
    address in hex)."""
    below = [a for a in table if a <= address]
    if below:
        floor = max(below)
        if floor == address or floor != max(table):
            return table[floor]
    return hex(address)


def call_stacks(events, field):
    """The call stacks CallStackStateProvider.eventHandle builds with
    LttngUstCallStackProvider from babeltrace2's [(t, name, vtid, payload)]:
    per thread (its vtid; considerEvent needs it) an entry pushes its addr,
    an exit pops. Returns ({vtid: the stack left}, [(vtid, t, addr of the
    exit, addr popped)] for every exit that pops another function or an
    empty stack: Trace Compass logs those as unmatched)."""
    stacks, unmatched = defaultdict(list), []
    for t, name, vtid, payload in events:
        if name in FUNC_ENTRY:
            stacks[vtid].append(int(field(payload, "addr"), 16))
        elif name in FUNC_EXIT:
            addr = int(field(payload, "addr"), 16)
            popped = stacks[vtid].pop() if stacks[vtid] else None
            if popped != addr:
                unmatched.append((vtid, t, addr, popped))
    return dict(stacks), unmatched


def syscall_threads(events, field):
    """The thread Trace Compass's kernel analysis gives each system call
    from babeltrace2's [(t, name, cpu_id, tid, payload)] of a kernel
    trace: the one its CPU (the packet's cpu_id) runs then, by the last
    sched_switch's next_tid there (KernelStateProvider, SchedSwitchHandler,
    SysEntryHandler: the event's own tid context is not read). Yields
    (t, cpu, tid of the event, the thread given it or None)."""
    running = {}
    for t, name, cpu, tid, payload in events:
        if name == "sched_switch":
            running[cpu] = int(field(payload, "next_tid"))
        elif name.startswith(SYSCALL_ENTRY):
            yield t, cpu, tid, running.get(cpu)


def thread_processes(events, field):
    """{tid: (pid, name)} as StateDumpHandler sets each thread's process
    and name from lttng_statedump_process_state events (the first one for
    a thread wins: it only sets what is not set yet)."""
    out = {}
    for t, name, cpu, tid, payload in events:
        if name == STATEDUMP:
            out.setdefault(int(field(payload, "tid")), (int(field(payload, "pid")), field(payload, "name")))
    return out
