"""Profile files (".swprof", docs/format.md "Profile files"): a profiler's
history of trees with its threads and totals, written by Profiler.save()
(`stackwatch profile -o out.swprof`), read back as a History.

    h = stackwatch.load_profile("run.swprof")
    h.info()["damage"]                # "" for an intact file
"""
import os

from .. import _native
from .history import History

PROFILE_SUFFIX = ".swprof"


def save(path, sampler, info, threads):
    """Writes the profile file of a running or stopped sampler
    (_native.Sampler) to path: its history, `info` (History.info() of its
    profiler) and `threads` (Profiler.threads())."""
    data = sampler.save_bytes(info, threads)
    with open(os.fspath(path), "wb") as f:
        f.write(data)


def load_profile(path):
    """The History stored in a profile file. ValueError (with a one-line
    message) for a file that is empty, not a profile, or of an unknown
    version; a damaged file is read up to the damage, described in
    info()["damage"]."""
    return History(_native.read_profile(os.fspath(path)), _path=os.fspath(path))


def is_profile_file(path):
    """True if the file starts like a profile file."""
    with open(path, "rb") as f:
        return bool(_native.is_profile(f.read(16)))
