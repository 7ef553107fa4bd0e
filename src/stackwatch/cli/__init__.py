"""The stackwatch command line: builds the parser from the commands and
runs the one asked for.

Each command is a module of this package with
    NAME                  its word on the command line
    add_parser(subparsers) -> argparse parser    adds its arguments
    run(args) -> int      does it; returns the exit status, raises
                          UsageError for a mistake of the user's
    RUNS_PROGRAM = True   (optional) for a command that runs the user's
                          program: every word after the script (or
                          command, or "-") or after -m MODULE / -c CODE
                          is the program's (args.argv), and
                          args.words holds the words before them
and never imports this module. COMMANDS names them in the order
`stackwatch --help` shows them; program.py (running the program, the
finisher) and files.py (reading traces and profiles) serve them. Only the
command asked for is imported (each brings what it needs: the tracer, the
exporters, the outside reader), all of them only for `--help` or a word
that is no command: a command's start-up is its own imports, not every
command's (`stackwatch run` of an empty script: 90 ms before, 70-80 after).

Every error a user can cause (missing script, bad option, unwritable or
unreadable file) is one line on stderr starting with "stackwatch: error:"
and a non-zero exit status; never a traceback from stackwatch itself.
"""
import argparse
import importlib
import os
import sys

from .. import _native
from ..common.version import VERSION
from .program import UsageError, error_text

# The commands (each the module of that name), in --help's order.
COMMANDS = ("run", "profile", "record", "top", "dump", "attach", "probes", "stats", "tasks", "export", "config")


def command_module(name):
    """The module of command `name` (imported now if it was not)."""
    return importlib.import_module(f"{__name__}.{name}")


def _error(msg, status=2):
    print(f"stackwatch: error: {msg}", file=sys.stderr)
    return status


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser(only=None):
    """The parser of every command (only: of that one command alone);
    .program_parsers: the parsers of the commands that run a program, by
    name."""
    p = _Parser(prog="stackwatch", description="Trace and profile Python programs.")
    p.add_argument("--version", action="version", version=f"stackwatch {VERSION}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    commands = [command_module(n) for n in COMMANDS if only is None or n == only]
    parsers = {c.NAME: c.add_parser(sub) for c in commands}
    p.program_parsers = {c.NAME: parsers[c.NAME] for c in commands if getattr(c, "RUNS_PROGRAM", False)}
    return p


def main(argv=None):
    if argv is None and sys.argv and os.path.isfile(sys.argv[0]):
        # The console script that runs this (its frames are not the program's).
        from ..tracer import session
        session.launched_by(sys.argv[0])
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    try:
        split = None
        if argv and argv[0] in parser.program_parsers:
            split = split_at_module(parser.program_parsers[argv[0]], argv[1:])
        if split is None:
            args = parser.parse_args(argv)
        else:
            args = parser.parse_args(argv[:1] + split[0])
            args.argv = split[1]
    except UsageError as e:
        return _exit(_error(str(e)))
    if args.command is None:
        parser.print_help(sys.stderr)
        return _exit(2)
    command = command_module(args.command)
    if args.command in parser.program_parsers:
        args.words = argv[:len(argv) - len(args.argv or [])]
    try:
        # Called here, not through a helper: `stackwatch profile` leaves
        # its caller's frames (this function's) out of the profile.
        return _exit(command.run(args))
    except UsageError as e:
        return _exit(_error(str(e)))
    except _native.TraceError as e:
        return _exit(_error(str(e)))
    except BrokenPipeError:
        return _exit(0)
    except OSError as e:
        return _exit(_error(error_text(e)))


def split_at_module(sub, args):
    """Like python, everything after '-m MODULE' (or '-c CODE') belongs to
    the program, even words that look like stackwatch's options ('run -m
    pytest -q -x'). Returns (stackwatch's arguments up to the module name or
    code; or up to '-', then '-' and the program's arguments), or None when
    a script, '--' or nothing comes before any -m, -c or -."""
    options = sub._option_string_actions
    i = 0
    while i < len(args):
        word = args[i]
        if word == "-":         # the program on stdin, then its arguments
            return args[:i], args[i:]
        if word == "--" or not word.startswith("-"):
            return None
        if word in ("-m", "-c"):
            return (args[:i + 2], args[i + 2:]) if i + 1 < len(args) else None
        if word.startswith(("-m", "-c")) and not word.startswith("--"):
            return args[:i + 1], args[i + 1:]
        name = word.split("=", 1)[0]
        action = options.get(name)
        if action is None and name.startswith("--"):
            matches = {options[o] for o in options if o.startswith(name)}
            action = matches.pop() if len(matches) == 1 else None
        value_attached = "=" in word or (not word.startswith("--") and len(word) > 2)
        if action is not None and not value_attached and i + 1 < len(args):
            following = args[i + 1]
            if action.nargs is None:
                i += 1
            elif action.nargs == "?" and not following.startswith("-"):
                # "--sample script.py": run.run takes a word that is no rate
                # for the program.
                if action.dest != "sample" or following[:1].isdigit() or following[:1] == ".":
                    i += 1
        i += 1
    return None


def _exit(status):
    sys.exit(status)


if __name__ == "__main__":
    main()
