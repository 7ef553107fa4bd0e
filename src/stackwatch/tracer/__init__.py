"""The exact tracer: a tracing session of this process (session.py: start,
stop, trace, traced; forks and execs), trace files read back (tracefile.py:
Trace) and the tables `stackwatch stats` prints of a trace's EXT events
and samples (stats_events.py, stats_samples.py)."""
