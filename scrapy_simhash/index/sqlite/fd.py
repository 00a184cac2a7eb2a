"""Reading an SQLite file's bytes without dropping this process's locks on it.

POSIX record locks belong to the process, not to the descriptor: closing *any* descriptor of a file
releases every lock the process holds on it, SQLite's included. The checks made before SQLite opens a
file (its header, its ``-shm``) must therefore not simply ``open``/``close`` it while another
connection of this process is live: a connection that lost its shared lock on the main file looks
gone to other processes, and the last of them to close deletes the WAL under it (what it commits
afterwards is lost). SQLite defers such closes itself; :func:`descriptor` does the same: a descriptor
whose close would release locks this process holds (read from ``/proc/locks``) is kept open and
reused, and closed by a later call once the locks are gone. Where ``/proc/locks`` cannot be read,
descriptors are kept for the life of the process (one per file and mode).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

_kept: dict[tuple[int, int, int], list[int]] = {}  # (device, inode, flags) -> descriptors
_guard = threading.Lock()


def _locked_inodes() -> set[tuple[str, int]] | None:
    """(``major:minor`` in hex, inode) of every file this process holds POSIX locks on; None if unknown."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    pid, held = str(os.getpid()), set()
    for line in lines:
        fields = line.split()
        if "->" in fields or len(fields) < 6 or fields[1] != "POSIX" or fields[4] != pid:
            continue
        major, minor, inode = fields[5].split(":")
        held.add((f"{major}:{minor}", int(inode)))
    return held


def _key(dev: int) -> str:
    return f"{os.major(dev):02x}:{os.minor(dev):02x}"


@contextlib.contextmanager
def descriptor(path: Path | str, flags: int = os.O_RDONLY) -> Iterator[int]:
    """A descriptor of ``path`` (``os.open`` errors propagate), closed afterwards only if that drops
    no lock of this process."""
    st = os.stat(path)
    with _guard:
        spare = _kept.get((st.st_dev, st.st_ino, flags))
        fd = spare.pop() if spare else None
    if fd is None:
        fd = os.open(path, flags)
    try:
        yield fd
    finally:
        fst = os.fstat(fd)
        with _guard:
            _kept.setdefault((fst.st_dev, fst.st_ino, flags), []).append(fd)
            held = _locked_inodes()
            for key in [k for k in _kept if held is not None and (_key(k[0]), k[1]) not in held]:
                for kept in _kept.pop(key):
                    os.close(kept)
