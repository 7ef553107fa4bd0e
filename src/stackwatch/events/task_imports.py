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

_finder = None


def when_imported(name, hook):
    """hook(module) at once if `name` is imported, else right after the
    program imports it (its warning printed, never raised into it)."""
    global _finder
    module = sys.modules.get(name)
    if module is not None:
        _run(hook, module, name)
        return
    if _finder is None:
        _finder = _AfterImport()
        sys.meta_path.insert(0, _finder)
    hooks = _finder.hooks.setdefault(name, [])
    if hook not in hooks:   # (the same hook asked for again: once)
        hooks.append(hook)


def forget():
    """Task events stop: the finder goes, with the hooks not run."""
    global _finder
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


class _AfterImport:
    """A finder that lets the other finders find a module and calls its
    hooks with it once it has run (its loader put back first: the module
    sees its own)."""

    def __init__(self):
        self.hooks = {}
        self._busy = False

    def find_spec(self, name, path=None, target=None):
        if name not in self.hooks or self._busy:
            return None
        # The other finders asked in turn, as the import system does
        # (importlib.util is not imported: on 3.9 it imports importlib.abc,
        # whose registrations invalidate every ABC's isinstance cache, which
        # changes the calls a traced program makes).
        self._busy = True
        spec = None
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None) if finder is not self else None
                spec = find(name, path, target) if find else None
                if spec is not None:
                    break
        except Exception:
            return None
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Then(spec.loader, name, self.hooks.pop(name))
        return spec

    def invalidate_caches(self):
        pass


class _Then:
    def __init__(self, loader, name, hooks):
        self._loader, self._name, self._hooks = loader, name, hooks

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        for hook in self._hooks:
            _run(hook, module, self._name)

    def __getattr__(self, name):
        return getattr(self._loader, name)
