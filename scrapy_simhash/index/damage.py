"""What an entry or a decision read back from an index may hold, and naming what does not.

Every value an index writes has a known type and range: an entry's URL and title are text or
nothing, its first-seen time is a finite number of POSIX seconds, its fingerprints are unsigned
integers of the index's width. A value outside that was not written by scrapy-simhash (an edit with
another tool, a damaged file or server). The readers of the whole index (``entries()``,
``decisions()``: export, report, explain, stats) check each row with these functions and pass a
damaged one to their ``damaged`` callback, skipping it, or raise :class:`~.base.SimhashIndexError`
naming it: never a value of the wrong type handed on to be formatted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .base import Decision, Entry, SimhashIndexError

#: The first-seen and decision times an index can hold: those a date can be made of (years 1 to
#: 9999, what ``datetime`` and ISO 8601 show).
TIME_MIN, TIME_MAX = -62135596800.0, 253402300799.0
STATUSES = ("duplicate", "flagged")
TIERS = ("title", "body", "sentence")

#: What the readers of a whole index call with the description of a row they skip.
Damaged = Callable[[str], None]


def shown(value: Any) -> str:
    """A value as a damage message shows it: its type, and its beginning."""
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'…' if len(text) > 40 else ''}"


def time_damage(value: Any) -> str | None:
    """Why ``value`` is no time an index writes (None: it is one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is {shown(value)}, not a number of seconds"
    if not (math.isfinite(value) and TIME_MIN <= value <= TIME_MAX):
        return f"is {value!r}, not a time (years 1 to 9999)"
    return None


def _text_damage(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else f"is {shown(value)}, not text"


def _fp_damage(value: Any, bits: int | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (bits is not None and value >> bits):
        return f"is {shown(value)}, not an unsigned {bits or 64}-bit fingerprint"
    return None


def entry_damage(entry: Entry, bits: int | None = None) -> str | None:
    """``"entry #N: <field> is …"`` for the first value of ``entry`` no index writes; None when
    every value is one (``bits``: the index's fingerprint width, when known)."""
    problems = (
        ("url", _text_damage(entry.url)),
        ("title", _text_damage(entry.title)),
        ("first_seen", time_damage(entry.first_seen)),
        ("title_fp", _fp_damage(entry.title_fp, bits)),
        ("body_fp", _fp_damage(entry.body_fp, bits)),
        ("numbers", _text_damage(entry.numbers)),
        ("short_body", _text_damage(entry.short_body)),
        ("chars", _text_damage(entry.chars)),
    )
    for name, problem in problems:
        if problem is not None:
            return f"entry #{entry.id}: {name} {problem}"
    if entry.title_fp is None and entry.body_fp is None:
        return f"entry #{entry.id}: has neither a title nor a body fingerprint"
    return None


def decision_damage(decision: Decision, bits: int | None = None) -> str | None:
    """``"decision about <url>: <field> is …"`` for the first value of ``decision`` (or of its
    original entry) no index writes; None when every value is one."""
    about = f"decision about {decision.url!r}" if isinstance(decision.url, str) else "a decision"
    problems = (
        ("url", None if isinstance(decision.url, str) else f"is {shown(decision.url)}, not text"),
        ("status", None if decision.status in STATUSES else f"is {shown(decision.status)}, not one of {STATUSES}"),
        ("tier", None if decision.tier in TIERS else f"is {shown(decision.tier)}, not one of {TIERS}"),
        ("distance", None if isinstance(decision.distance, int) and not isinstance(decision.distance, bool)
         and 0 <= decision.distance <= 128 else f"is {shown(decision.distance)}, not a distance"),
        ("decided_at", time_damage(decision.decided_at)),
        ("title", _text_damage(decision.title)),
        ("score", None if decision.score is None or (type(decision.score) is float and 0 <= decision.score <= 1)
         else f"is {shown(decision.score)}, not a similarity"),
    )
    for name, problem in problems:
        if problem is not None:
            return f"{about}: {name} {problem}"
    if decision.original is not None:
        problem = entry_damage(decision.original, bits)
        if problem is not None:
            return f"{about}: its original {problem}"
    return None


def report(damaged: Damaged | None, location: str, problem: str) -> None:
    """Hand a damaged row's description to ``damaged``, or, without one, refuse to go on."""
    if damaged is None:
        raise SimhashIndexError(f"index {location} holds a damaged row (a value scrapy-simhash never writes): "
                                f"{problem}")
    damaged(problem)
