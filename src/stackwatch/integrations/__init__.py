"""stackwatch inside other tools: the pytest plugin (pytest_plugin.py,
registered by the entry point pytest11) and the IPython / Jupyter magics
(ipython.py, `%load_ext stackwatch`). Importing this package loads
nothing: each tool imports its module."""
