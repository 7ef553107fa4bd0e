"""The views of task events (issue 22): the per-task analysis behind
`stackwatch tasks` (analysis.py) and its text report (report.py). They
read only the document of stackwatch.tracer.task_events.read_task_events;
the HTML sequence diagram of the same document is a format of the
registry (render/sequence.py)."""
