"""The profiler's self-contained interactive HTML flame graph.

    from stackwatch.render import flamegraph
    text = flamegraph.document(threads, title)  # the page as a string
    flamegraph.write(f.write, threads, title)   # the page given to f.write a piece at a time

Profiler.write(path, "html") and the other writers of the format "html"
give it their trees through the registry (formats.py). A thread's "tree"
is nested dicts (Profiler.tree()) or a stackwatch._native.CallTree: the
nodes of a CallTree are written by C a piece at a time as it walks the
tree (render_flat), never held as Python objects or as one text, so a page
of millions of nodes costs the tree and its functions' table.

One file, no network access: the page (flamegraph.html, package data) has
its script and style inline, and the profile embedded as JSON in a
<script type="application/json"> block. The JSON is pure ASCII with every
"<", ">" and "&" escaped, so no name or file name can end that block or
open another element, whatever characters it holds.

The embedded data (version 1):

    {"version": 1, "title": str, "interval_ns": int, "stats": {...},
     "counts": "samples" or "calls",          # what counts are (calls: an exact trace's trees)
     "strings": [str, ...],                   # every name, file and source line once
     "frames": [[name, file, line, source, native], ...],   # string indexes, ints
     "threads": [{"name": str, "thread_id": int, "samples": int,
                  "nodes": [parent, frame, count, self, time_ns, self_time_ns, ...]}]}

Each thread's call tree is flat, six integers per node in preorder: the
index of the parent node (-1 for the root) and of the frame (-1 for the
root), then the node's counts as in Profiler.tree(). Flat, because stacks
can be thousands of frames deep, deeper than JSON encoders and parsers
recurse. A frame's source is the text of its line (the line of the
function's first line, as Profiler.tree() reports it) read with linecache;
"native" is 1 for a frame whose tree node carries "native": True. The page
merges the threads itself for its "all threads" view.
"""
import base64
import html
import json
import linecache
import os
import stat
from hashlib import sha256
from importlib import resources

DATA_MARK = "/*STACKWATCH_DATA*/"
TITLE_MARK = "<!--STACKWATCH_TITLE-->"
CSP_MARK = "STACKWATCH_SCRIPT_HASH"
MAX_SOURCE_FILE = 16 << 20      # source lines are not looked up in larger files
MAX_SOURCE_CHARS = 240


def source_line(filename, line):
    """The stripped text of line `line` of `filename`, or "" when there is
    none. Only regular files (or sources linecache already holds) are
    read, so a name like /dev/stdin or a FIFO can never block."""
    if not filename or not isinstance(line, int) or line <= 0:
        return ""
    if filename not in linecache.cache:
        try:
            st = os.stat(filename)
        except (OSError, ValueError):
            return ""
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_FILE:
            return ""
    try:
        text = linecache.getline(filename, line)
    except Exception:   # a broken loader in linecache's cache, an odd encoding
        return ""
    text = text.strip()
    if len(text) > MAX_SOURCE_CHARS:
        text = text[:MAX_SOURCE_CHARS - 1] + "\u2026"
    return text


class _Tables:
    """Interns strings and frames."""

    def __init__(self):
        self.strings, self._sid = [], {}
        self.frames, self._fid = [], {}

    def string(self, s):
        i = self._sid.get(s)
        if i is None:
            i = self._sid[s] = len(self.strings)
            self.strings.append(s)
        return i

    def frame(self, node):
        return self.frame_of(node["name"], node["filename"], node["line"], node.get("native"))

    def frame_of(self, name, filename, line, native):
        native = 1 if native else 0
        key = (name, filename, line, native)
        i = self._fid.get(key)
        if i is None:
            name, filename, line = key[:3]
            src = "" if native else source_line(filename, line)
            i = self._fid[key] = len(self.frames)
            self.frames.append([self.string(name), self.string(filename), line, self.string(src), native])
        return i


def _flatten(tree, tables):
    """The tree (nested dicts from Profiler.tree()) as the flat list of
    six integers per node, walked without recursion."""
    out = []
    stack = [(tree, -1)]
    while stack:
        node, parent = stack.pop()
        index = len(out) // 6
        frame = -1 if parent < 0 else tables.frame(node)
        out += [parent, frame, node["count"], node["self"], node["time_ns"], node["self_time_ns"]]
        for child in reversed(node["children"]):
            stack.append((child, index))
    return out


def _thread_nodes(tree, tables):
    """(samples, write_nodes) of a thread's tree: its root's count, and a
    function that gives the text of its flat node list (without brackets)
    to write(str). A CallTree's functions are interned now, in the order
    its walk meets them (as _flatten would), its nodes written later by C."""
    if isinstance(tree, dict):
        nodes = _flatten(tree, tables)
        return int(tree["count"]), lambda write: write(json.dumps(nodes, separators=(",", ":"))[1:-1])
    from .. import _native
    funcs = tree.preorder_functions()
    frames = [0] * (max((f[0] for f in funcs), default=-1) + 1)
    for fid, name, filename, line, native in funcs:
        frames[fid] = tables.frame_of(name, filename, line, native)
    return int(tree.total), lambda write: _native.render_flat(tree, frames, write)


def _parts(threads, title, interval_ns, stats, counts):
    """The embedded data (see the module's docstring) for `threads`, as
    (head, [(thread head, write_nodes)]): the JSON is head, then each
    thread's head, nodes and "]}" (comma-separated), then "]}"."""
    tables = _Tables()
    out = []
    for t in threads:
        samples, nodes = _thread_nodes(t["tree"], tables)
        head = embed_json({"name": str(t["name"]), "thread_id": int(t["thread_id"]), "samples": samples,
                           "nodes": []})
        out.append((head[:-2], nodes))
    head = embed_json({"version": 1, "title": str(title), "interval_ns": int(interval_ns),
                       "stats": dict(stats or {}), "counts": counts, "strings": tables.strings,
                       "frames": tables.frames, "threads": []})
    return head[:-2], out


def _write_data(write, threads, title, interval_ns, stats, counts):
    head, out = _parts(threads, title, interval_ns, stats, counts)
    write(head)
    for i, (thread_head, nodes) in enumerate(out):
        write("," + thread_head if i else thread_head)
        nodes(write)
        write("]}")
    write("]}")


def data(threads, title="stackwatch profile", interval_ns=0, stats=None, counts="samples"):
    """The embedded data (a dict, see the module's docstring) for
    `threads`: [{"name", "thread_id", "tree"}], each "tree" a call tree as
    Profiler.tree(thread_id) returns it or a CallTree. counts: what the
    trees' counts are ("calls" for the trees of an exact trace)."""
    text = []
    _write_data(text.append, threads, title, interval_ns, stats, counts)
    return json.loads("".join(text))


def embed_json(obj):
    """JSON text that is safe inside an HTML <script> element: ASCII only
    (so also no U+2028/U+2029), and no "<", ">" or "&" anywhere."""
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def template(name="flamegraph.html"):
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def page_around_data(name, title):
    """(the page before its data, the page after it) of the template
    `name` (package data of this room), its title filled in and its
    Content-Security-Policy allowing exactly its own script (by hash) and
    nothing from the network. The template has one inline <script>, the
    marks CSP_MARK, TITLE_MARK and DATA_MARK (inside a <script
    type="application/json"> element: what goes there is embed_json's)."""
    page = template(name)
    start = page.index("<script>") + len("<script>")
    script = page[start:page.index("</script>", start)]
    digest = base64.b64encode(sha256(script.encode("utf-8")).digest()).decode("ascii")
    page = page.replace(CSP_MARK, "sha256-" + digest).replace(TITLE_MARK, html.escape(_printable(title)))
    before, after = page.split(DATA_MARK)   # the data last: it may hold any text
    return before, after


def write(put, threads, title="stackwatch profile", interval_ns=0, stats=None, counts="samples"):
    """The whole HTML page for `threads` as data() takes them, given to
    put(str) a piece at a time (a text file's write)."""
    before, after = page_around_data("flamegraph.html", title)
    put(before)
    _write_data(put, threads, title, interval_ns, stats, counts)
    put(after)


def document(threads, title="stackwatch profile", interval_ns=0, stats=None, counts="samples"):
    """The whole HTML page (a str) for `threads` as data() takes them."""
    text = []
    write(text.append, threads, title, interval_ns, stats, counts)
    return "".join(text)


def _printable(s):
    """`s` without lone surrogates (a file name's undecodable bytes)."""
    return str(s).encode("utf-8", "backslashreplace").decode("utf-8")
