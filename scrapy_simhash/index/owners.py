"""Who added a pending entry, and whether that process still lives.

An entry added for an item that has not reached storage yet is *pending* and carries its owner:
``host|pid|start|nonce``, where ``start`` is the process's start (Linux: ``ticks:boot``, its start
in clock ticks since boot and the boot's time from ``/proc``, so a reused pid is told apart and the
start is known in POSIX time) and ``nonce`` tells two indexes opened by one process apart. A pending
entry is a reference like any other (two copies in flight still admit exactly one); it is
released (removed) when its item is dropped or fails downstream, and at the next open when its
owner died before delivering it. An owner is dead when it ran on this host and its pid is gone or
now belongs to a process started at another time; on another host only its lease can tell (the
Redis index's heartbeat key), so :func:`alive` answers None there.

A stamp that no process of ours could have written (:func:`impossible`) is refused at recovery
rather than acted on: releasing on a planted or copied row would remove entries that were stored.
"""

from __future__ import annotations

import os
import socket
from functools import cache

#: Seconds a pending entry may have been first seen before its owner's recorded start (clock steps,
#: the boot time's rounding) before the stamp is taken as impossible (docs/decisions/0702-recovery-and-story-key.md).
START_SLACK = 600.0


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), or "" where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


@cache
def _boot_time() -> int | None:
    """This boot's POSIX time (Linux ``/proc/stat``), or None where unknown."""
    try:
        with open("/proc/stat", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _start_stamp(pid: int) -> str:
    """``ticks:boot`` for a process of this host, or "" where unknown."""
    ticks, boot = _start_time(pid), _boot_time()
    return f"{ticks}:{boot}" if ticks and boot is not None else ""


@cache
def _host() -> str:
    return socket.gethostname().replace("|", "_")


def new_owner() -> str:
    """An owner token for this process (a new one per call)."""
    pid = os.getpid()
    return f"{_host()}|{pid}|{_start_stamp(pid)}|{os.urandom(4).hex()}"


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
    ticks = start.partition(":")[0]  # (not the boot time: it moves when the clock is stepped)
    return not ticks or _start_time(pid) in ("", ticks)


def _started_at(start: str) -> float | None:
    """POSIX time of a ``ticks:boot`` start stamp, None if it is not one."""
    ticks, _, boot = start.partition(":")
    if not (ticks.isdigit() and boot.isdigit()):
        return None
    return int(boot) + int(ticks) / os.sysconf("SC_CLK_TCK")


def impossible(owner: str, earliest: float, *, other_hosts: bool) -> str | None:
    """Why no process of ours can have written this pending stamp on entries first seen from
    ``earliest`` on (None: it can): not a token, a process of another host (``other_hosts``: the
    index is shared by many machines, their leases tell), no start time where this host records one,
    or a process started after the entries were added."""
    parts = owner.split("|")
    if len(parts) != 4 or not parts[1].isdigit():
        return f"the stamp {owner[:80]!r} is not a process token"
    host, _, start, _ = parts
    if host != _host():
        return None if other_hosts else f"the stamp names another host ({host[:60]}): a copied or restored index?"
    if not start:
        return None if not _start_stamp(os.getpid()) else f"the stamp {owner[:80]!r} names no process start"
    started = _started_at(start)
    if started is None:
        return f"the stamp {owner[:80]!r} names no process start"
    if started > earliest + START_SLACK:
        return (f"the stamp {owner[:80]!r} names a process started {started - earliest:.0f} s after its entries "
                f"were added")
    return None
