"""Who added a pending entry, and whether that process still lives.

An entry added for an item that has not reached storage yet is *pending* and carries its owner:
``host|pid|start|nonce``, where ``start`` is the process's start time (Linux: from ``/proc``, so a
reused pid is told apart) and ``nonce`` tells two indexes opened by one process apart. A pending
entry is a reference like any other (two copies in flight still admit exactly one); it is
released (removed) when its item is dropped or fails downstream, and at the next open when its
owner died before delivering it. An owner is dead when it ran on this host and its pid is gone or
now belongs to a process started at another time; on another host only its lease can tell (the
Redis index's heartbeat key), so :func:`alive` answers None there.
"""

from __future__ import annotations

import os
import socket
from functools import cache


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), or "" where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


@cache
def _host() -> str:
    return socket.gethostname().replace("|", "_")


def new_owner() -> str:
    """An owner token for this process (a new one per call)."""
    pid = os.getpid()
    return f"{_host()}|{pid}|{_start_time(pid)}|{os.urandom(4).hex()}"


def alive(owner: str) -> bool | None:
    """True if the owner's process runs, False if it ran on this host and is gone, None if it ran
    on another host (or the token is not one of ours)."""
    try:
        host, pid_text, start, _ = owner.split("|")
        pid = int(pid_text)
    except ValueError:
        return None
    if host != _host():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    return not start or _start_time(pid) in ("", start)
