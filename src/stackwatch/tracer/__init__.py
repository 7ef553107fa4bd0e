"""The exact tracer: a tracing session of this process (session.py: start,
stop, trace, traced; forks and execs) and trace files read back
(tracefile.py: Trace). `stackwatch stats` prints a trace's tables
(cli/stats.py)."""
