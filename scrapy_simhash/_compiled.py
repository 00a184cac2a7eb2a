"""The optional compiled engine, ``_segment_c`` (built from ``_segment_c.pyx`` where a C compiler
was there), or ``None``: not built, or ``SCRAPY_SIMHASH_PURE_PYTHON=1`` (the pure-Python fallbacks
on purpose, for benchmarks and checks). Every module with a compiled path imports it from here."""

from __future__ import annotations

import os
from types import ModuleType

_segment_c: ModuleType | None
try:
    from . import _segment_c
except ImportError:  # pragma: no cover - exercised where the extension is not built
    _segment_c = None
if os.environ.get("SCRAPY_SIMHASH_PURE_PYTHON"):
    _segment_c = None
