"""The optional compiled engine: one extension module per concern, each built from its ``.pyx``
where a C compiler was there (setup.py builds every ``scrapy_simhash/_*_c.pyx``):

- ``_segment_c``: the segmenter (the route, the HMM, the cut of a text; :mod:`.segment`);
- ``_vocabulary_c``: the feature words, TF-IDF and bit vote of a text (:mod:`.features`, :mod:`.simhash`);
- ``_signatures_c``: the sentence pieces (:mod:`.signatures`);
- ``_text_c``: the text passes (:mod:`.normalize`, :mod:`.hints`).

Every module with a compiled path imports its module from here, and here they are all or none: each
is ``None`` when one of them is not built (a partly built install: the pure-Python engine, not a mix)
or with ``SCRAPY_SIMHASH_PURE_PYTHON=1`` (the pure-Python fallbacks on purpose, for benchmarks and
checks)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType

#: The compiled modules, one per ``scrapy_simhash/_*_c.pyx`` (tests/test_compiled_modules.py holds
#: this to what the build declares).
MODULES = ("_segment_c", "_vocabulary_c", "_signatures_c", "_text_c")


def _load(import_module: Callable[[str], ModuleType] = importlib.import_module,
          ) -> tuple[dict[str, ModuleType | None], tuple[str, ...]]:
    """Every compiled module, or every one ``None``; and the names of those that did not import."""
    loaded: dict[str, ModuleType | None] = {}
    missing = []
    for name in MODULES:
        try:
            loaded[name] = import_module(f"{__package__}.{name}")
        # ImportError: not built. The others: Cython's own checks of what a module cimports from another
        # (_vocabulary_c from _segment_c) failing on a _segment_c of another build (no such C function or
        # signature, another type size): a stale module, as good as missing.
        except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover - where not all are built
            missing.append(name)
    if missing or os.environ.get("SCRAPY_SIMHASH_PURE_PYTHON"):
        loaded = dict.fromkeys(MODULES)
    return loaded, tuple(missing)


_loaded, MISSING = _load()  # MISSING: the compiled modules not built here (all of them: none built)
_segment_c: ModuleType | None = _loaded["_segment_c"]
_vocabulary_c: ModuleType | None = _loaded["_vocabulary_c"]
_signatures_c: ModuleType | None = _loaded["_signatures_c"]
_text_c: ModuleType | None = _loaded["_text_c"]
