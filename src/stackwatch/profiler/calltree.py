"""Call trees of samples (built and merged in C): CallTree and merge().

    tree = stackwatch.merge(h1, h2.tree(start, stop), other_tree)
    tree.to_dict()                    # dask-like nested dicts
    tree.write("out.html", "html")    # any format of render/formats.py that fits trees

A CallTree owns its function table, so trees of different processes or
files merge as well as trees of one: functions are matched by name, file
and first line.
"""
from .. import _native
from ..render import formats


class CallTree:
    """A call tree of samples (built in C). count = samples through a node,
    self = samples ending in it; time_ns = the wall time (CPU time in CPU
    mode) the samples stand for."""

    __slots__ = ("_t",)

    def __init__(self, _tree=None):
        self._t = _native.CallTree() if _tree is None else _tree

    @property
    def total(self):
        """The number of samples."""
        return self._t.total

    def tree(self):
        """Nested dicts {"name", "filename", "line", "count", "self",
        "time_ns", "self_time_ns", "children": [...]}, as
        Profiler.tree() gives them; the root is "<root>"."""
        return self._t.tree()

    def to_dict(self, source=True):
        """The tree as dask's profiler shapes it: {"identifier",
        "description": {"filename", "name", "line_number", "line"},
        "count", "children": {identifier: {...}}}, plus "self", "time_ns"
        and "self_time_ns". The identifier is "name;filename;line";
        line_number is the function's first line and "line" its source
        text (read with linecache; "" with source=False or when it cannot
        be read). The root's identifier is "root"."""
        from ..render.flamegraph import source_line   # imported when needed: see formats._write_html
        root = self._t.tree()
        out = {}
        stack = [(root, out, True)]
        while stack:      # without recursion: stacks can be thousands deep
            node, d, is_root = stack.pop()
            if is_root:
                ident, desc = "root", {"filename": "", "name": "", "line_number": 0, "line": ""}
            else:
                ident = f"{node['name']};{node['filename']};{node['line']}"
                desc = {"filename": node["filename"], "name": node["name"], "line_number": node["line"],
                        "line": source_line(node["filename"], node["line"]) if source else ""}
            d.update(identifier=ident, description=desc, count=node["count"], self=node["self"],
                     time_ns=node["time_ns"], self_time_ns=node["self_time_ns"], children={})
            for child in node["children"]:
                cd = {}
                d["children"][f"{child['name']};{child['filename']};{child['line']}"] = cd
                stack.append((child, cd, False))
        return out

    def filtered(self, include=None, exclude=None, max_depth=0):
        """A new tree without some frames, as a trace's --include,
        --exclude and --max-depth leave them out: the frames of functions
        whose name, qualified name or file matches no `include` glob (when
        given) or an `exclude` glob, whose callees become their caller's
        and own samples their caller's own; and the frames deeper than
        `max_depth` kept frames (0: any depth), whose samples go to their
        ancestor at that depth. The total stays the same."""
        return CallTree(self._t.filtered(include, exclude, max_depth))

    def merge(self, *others):
        """A new tree with the samples of this one and of `others`."""
        return merge(self, *others)

    def write(self, path, format="collapsed", title=None):
        """Writes the tree as collapsed stacks, speedscope JSON, an HTML
        flame graph or pprof (see Profiler.write)."""
        formats.get(format, formats.TREES).write(path, formats.Trees([(None, 0, self._t)], title))

    def __eq__(self, other):
        if not isinstance(other, CallTree):
            return NotImplemented
        intern = {}
        return _flat(self.tree(), intern) == _flat(other.tree(), intern)

    __hash__ = None

    def __repr__(self):
        return f"<CallTree {self.total} samples, {self._t.nodes - 1} nodes>"


def _flat(tree, intern):
    """A tree as {node id: (count, self, time_ns, self_time_ns)}, a node's
    id interned (in `intern`, shared by the trees compared) from its
    parent's id and its function: equal for equal trees whatever order
    their children were added in. Iterative: stacks can be deep."""
    out = {}
    stack = [(tree, 0)]
    while stack:
        n, parent = stack.pop()
        nid = intern.setdefault((parent, n["name"], n["filename"], n["line"]), len(intern) + 1)
        out[nid] = (n["count"], n["self"], n["time_ns"], n["self_time_ns"])
        stack.extend((c, nid) for c in n["children"])
    return out


def merge(*trees):
    """A new CallTree with every sample of the given CallTrees (or
    Histories: their whole history). Trees of different processes or files
    merge as well: functions are matched by name, file and first line."""
    out = _native.CallTree()
    for t in trees:
        whole = getattr(type(t), "_calltree", None)   # a History (history.py): its whole history
        if whole is not None:
            t = whole(t)
        if not isinstance(t, CallTree):
            raise TypeError(f"merge() takes CallTree or History objects, not {type(t).__name__}")
        out.merge(t._t)
    return CallTree(out)
