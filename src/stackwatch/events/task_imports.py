"""Task events' hooks on modules the program may never import (issue 22):
asyncio, queue, multiprocessing's pipes, greenlet, trio, uvloop. Importing
them all as tracing starts cost 47 M instructions (multiprocessing alone
pulls in pickle, tempfile, random, bz2 and lzma), paid by every program;
so each is hooked at once when the program has imported it already, else
when it does (a finder on sys.meta_path, while task events are wanted).

    when_imported(name, hook)   hook(module) now, or after `name` is imported
    forget()                    task events stop: the hooks not run are dropped
"""
import sys

from .. import _native

_finder = None
_hooks = {}   # module name -> [hook(module), ...], not run yet (the finder takes an entry as it finds it)


def when_imported(name, hook):
    """hook(module) at once if `name` is imported, else right after the
    program imports it (its warning printed, never raised into it)."""
    global _finder
    module = sys.modules.get(name)
    if module is not None:
        _run(hook, module, name)
        return
    if _finder is None:
        # C (ext/tracer/task_imports.c): no frame of stackwatch's in the
        # program's import, where the trace and a sample would disagree.
        _finder = _native.hooks.task_import_finder(_hooks, _run)
        sys.meta_path.insert(0, _finder)
    hooks = _hooks.setdefault(name, [])
    if hook not in hooks:   # (the same hook asked for again: once)
        hooks.append(hook)


def forget():
    """Task events stop: the finder goes, with the hooks not run."""
    global _finder
    _hooks.clear()
    if _finder is not None:
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass
        _finder = None


def _run(hook, module, name):
    try:
        hook(module)
    except Exception as e:   # never into the program
        print(f"stackwatch: warning: cannot record the task events of {name}: {e}", file=sys.stderr)
