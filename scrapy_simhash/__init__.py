"""scrapy-simhash: drop reposted news while you crawl.

Public names only; each lives in a small module named for what it does. They are imported on
first use, so the engine (``Deduplicator``) and the command line start without loading Scrapy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .__version__ import __version__

if TYPE_CHECKING:
    from .addon import Addon
    from .dedup import Deduplicator, Verdict
    from .drops import IndexUnavailable, NearDuplicate
    from .fingerprint import Fingerprinter
    from .pipeline import SimhashPipeline
    from .settings import SettingError
    from .simhash import hamming_distance
    from .summary import DedupSummary

_WHERE = {
    "Addon": ".addon",
    "DedupSummary": ".summary",
    "SettingError": ".settings",
    "Deduplicator": ".dedup",
    "Verdict": ".dedup",
    "Fingerprinter": ".fingerprint",
    "IndexUnavailable": ".drops",
    "NearDuplicate": ".drops",
    "SimhashPipeline": ".pipeline",
    "hamming_distance": ".simhash",
}

__all__ = [
    "Addon",
    "DedupSummary",
    "Deduplicator",
    "Fingerprinter",
    "IndexUnavailable",
    "NearDuplicate",
    "SettingError",
    "SimhashPipeline",
    "Verdict",
    "__version__",
    "hamming_distance",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
