"""Child processes read from Linux's ``/proc``, tolerant of threads and processes that end while
they are read (a task directory listed a moment ago may be gone: that is not an error)."""

from __future__ import annotations

from pathlib import Path


def _direct(pid: int | str) -> set[int]:
    """The child processes of ``pid``'s threads (a thread that ended meanwhile has none)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.update(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def children(pid: int | str = "self") -> set[int]:
    """Live child processes of ``pid``, but multiprocessing's resource tracker (one per process that
    ever spawned: it lives as long as that process)."""
    return {c for c in _direct(pid) if running(c) and b"resource_tracker" not in cmdline(c)}


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (the resource tracker included)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        kids = _direct(todo.pop())
        todo += kids - found
        found |= kids
    return found
