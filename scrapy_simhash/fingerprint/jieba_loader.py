"""``import jieba`` without ``pkg_resources``, whose import scans every installed distribution:
start-up time of every process (docs/decisions/0202-table-cache.md).

``jieba._compat`` imports ``pkg_resources`` (setuptools' deprecated resource API, which scans every
installed distribution at import) only to open its own data files, and opens them directly when
that import fails. So while jieba is first imported here, ``pkg_resources`` is marked as missing
(``sys.modules[name] = None``, the documented way to make an import fail); the mark is removed
right after, so a later ``import pkg_resources`` works as usual. Where ``pkg_resources`` or jieba
is already imported, nothing changes.
"""

from __future__ import annotations

import sys

if "jieba" not in sys.modules and "pkg_resources" not in sys.modules:
    sys.modules["pkg_resources"] = None  # type: ignore[assignment]
    try:
        import jieba
    finally:
        if sys.modules.get("pkg_resources", 0) is None:
            del sys.modules["pkg_resources"]

import jieba
from jieba import finalseg

__all__ = ["finalseg", "jieba"]
