"""``--option key=value`` as the benchmarks take it (accuracy.py, audit.py, peers.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any


def parse_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}`` (values read as Python literals when they are)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out
