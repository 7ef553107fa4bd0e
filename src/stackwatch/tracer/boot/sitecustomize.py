"""stackwatch's bootstrap of followed processes (tracer/follow.py): Python
imports this file at start when a traced program's child inherits
PYTHONPATH with this folder first. It puts sys.path and os.environ back as
the program would have them, starts the child's trace or profile (the
run's kind; only if stackwatch is importable here; otherwise the child
runs untraced) and then imports
the sitecustomize the child would have imported without it, if any, in its
place. Written for any Python 3: a child may be another interpreter.
"""
import os
import sys


def _clean(here):
    """sys.path without this folder; os.environ (the program's view; the C
    environment keeps the follow variables for this process's children)
    without the follow variables and with the PYTHONPATH the parent meant.
    Returns the two follow variables and the kind of the run ("trace" or
    "profile")."""
    for i, entry in enumerate(sys.path):
        if os.path.abspath(entry or os.curdir) == here:
            del sys.path[i]
            break
    sys.path_importer_cache.pop(here, None)
    env = os.environ
    follow, spawn = env.get("STACKWATCH_FOLLOW"), env.get("STACKWATCH_SPAWN")
    try:
        os.unsetenv("STACKWATCH_SPAWN")   # this process's own, not its children's
    except (AttributeError, OSError):
        pass
    meant = kind = None
    if follow:
        import json
        try:
            cfg = json.loads(follow)
            meant, kind = cfg.get("pythonpath"), cfg.get("kind")
        except (ValueError, AttributeError):
            pass
    try:
        data, key, value = env._data, env.encodekey, env.encodevalue
    except AttributeError:
        return follow, spawn, kind
    for name in ("STACKWATCH_FOLLOW", "STACKWATCH_SPAWN"):
        data.pop(key(name), None)
    if meant is None:
        data.pop(key("PYTHONPATH"), None)
    else:
        data[key("PYTHONPATH")] = value(meant)
    return follow, spawn, kind


def _bootstrap():
    here = os.path.dirname(os.path.abspath(__file__))
    follow, spawn, kind = _clean(here)
    if follow:
        try:
            from stackwatch.tracer import follow as _follow
            if kind == "profile":
                from stackwatch.tracer import follow_profile as starter
            else:
                from stackwatch.tracer import session as starter
        except Exception:
            _follow = None  # no stackwatch for this Python: it runs untraced
        if _follow is not None:
            _follow.bootstrap(starter.start, follow, spawn)
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  the next one on sys.path, now in sys.modules
    except ImportError as e:
        if getattr(e, "name", None) != "sitecustomize":
            raise
        sys.modules["sitecustomize"] = me  # there is none: the import system expects this one


_bootstrap()
del _bootstrap, _clean
