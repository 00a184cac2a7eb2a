"""Times as users read them: ISO 8601 UTC to the second, the same in the flag field, the command
line's output and its exports."""

from __future__ import annotations

from datetime import datetime, timezone


def iso(ts: float | None) -> str | None:
    """POSIX seconds as ISO 8601 UTC, to the second."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
