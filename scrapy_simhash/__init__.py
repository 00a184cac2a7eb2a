"""scrapy-simhash: drop reposted news while you crawl.

Public names only; each lives in a small module named for what it does. They are imported on
first use, so the engine (``Deduplicator``) and the command line start without loading Scrapy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .__version__ import __version__

if TYPE_CHECKING:
    from .engine import Deduplicator, Verdict
    from .fingerprint.fingerprinter import Fingerprinter
    from .fingerprint.simhash import hamming_distance
    from .scrapy.addon import Addon
    from .scrapy.drops import IndexUnavailable, NearDuplicate
    from .scrapy.pipeline import SimhashPipeline
    from .scrapy.summary import DedupSummary
    from .settings import SettingError

_WHERE = {
    "Addon": ".scrapy.addon",
    "DedupSummary": ".scrapy.summary",
    "SettingError": ".settings",
    "Deduplicator": ".engine",
    "Verdict": ".engine",
    "Fingerprinter": ".fingerprint.fingerprinter",
    "IndexUnavailable": ".scrapy.drops",
    "NearDuplicate": ".scrapy.drops",
    "SimhashPipeline": ".scrapy.pipeline",
    "hamming_distance": ".fingerprint.simhash",
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
