"""The one place that binds the compiled engine or the pure-Python one, for the whole process, at import.

The compiled engine is one extension module per concern, each built from its ``.pyx`` where a C
compiler was there at install (setup.py builds every ``scrapy_simhash/_*_c.pyx``):

- ``_segment_c``: the segmenter (jieba's route and HMM, the cut of a text; :mod:`.fingerprint.segment`);
- ``_vocabulary_c``: the feature words, TF-IDF and bit vote of a text (:mod:`.fingerprint.features`,
  :mod:`.fingerprint.simhash`);
- ``_signatures_c``: the sentence pieces and the signatures' hashes (:mod:`.fingerprint.signatures`);
- ``_text_c``: the text passes (:mod:`.text.normalize`, :mod:`.text.hints`).

Every module with a compiled path imports its module from here, and here they are all or none: each
is ``None`` when one of them is not built or not usable (a partly built install runs the pure-Python
engine, not a mix), when jieba cuts its text into other pieces than the compiled segmenter was
written for, or with ``SCRAPY_SIMHASH_PURE_PYTHON=1`` (the pure-Python engine on purpose, for
benchmarks and checks). Both engines give the same fingerprints (tests/test_golden.py); the
pure-Python one is several times slower (docs/decisions/0201-pure-python-engine.md).

:func:`describe` says which engine runs and why: the crawl's INFO line when the index opens,
``scrapy-simhash --version`` and ``scrapy-simhash stats`` show it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType

#: The compiled modules, one per ``scrapy_simhash/_*_c.pyx`` (tests/test_compiled_modules.py holds
#: this to what the build declares).
MODULES = ("_segment_c", "_vocabulary_c", "_signatures_c", "_text_c")
#: The environment variable that selects the pure-Python engine.
PURE_PYTHON_ENV = "SCRAPY_SIMHASH_PURE_PYTHON"

# jieba's patterns the compiled segmenter scans for itself: its blocks, whitespace between them, and
# the runs its HMM cuts. Another jieba that cuts by others runs the pure-Python engine.
_JIEBA_PATTERNS = (
    "([\u4E00-\u9FD5a-zA-Z0-9+#&\\._%\\-]+)", "(\r\n|\\s)", "([\u4E00-\u9FD5]+)", "([a-zA-Z0-9]+(?:\\.\\d+)?%?)",
)


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
    if missing or os.environ.get(PURE_PYTHON_ENV):
        loaded = dict.fromkeys(MODULES)
    return loaded, tuple(missing)


def _jieba_cuts_as_compiled() -> bool:
    """Does the installed jieba split text with the patterns the compiled segmenter scans for?"""
    from .fingerprint.jieba_loader import finalseg, jieba

    patterns = (jieba.re_han_default, jieba.re_skip_default, finalseg.re_han, finalseg.re_skip)
    return tuple(p.pattern for p in patterns) == _JIEBA_PATTERNS


def _bind() -> tuple[dict[str, ModuleType | None], tuple[str, ...], str]:
    """The modules, those missing, and why the pure-Python engine runs (``""``: it does not)."""
    loaded, missing = _load()
    if missing:
        return loaded, missing, (
            f"compiled modules missing or unusable: {', '.join(missing)} (installed without a C compiler, or "
            "built for another version; reinstall where a C compiler is available to get them)")
    if os.environ.get(PURE_PYTHON_ENV):
        return loaded, missing, f"selected by {PURE_PYTHON_ENV}={os.environ[PURE_PYTHON_ENV]}"
    if not _jieba_cuts_as_compiled():
        return dict.fromkeys(MODULES), missing, (
            "as this jieba splits text into other pieces than the compiled segmenter was written for")
    return loaded, missing, ""


_loaded, MISSING, WHY_PURE = _bind()  # MISSING: the compiled modules not usable here (all of them: none built)
_segment_c: ModuleType | None = _loaded["_segment_c"]
_vocabulary_c: ModuleType | None = _loaded["_vocabulary_c"]
_signatures_c: ModuleType | None = _loaded["_signatures_c"]
_text_c: ModuleType | None = _loaded["_text_c"]
#: Whether the compiled engine runs in this process.
COMPILED = not WHY_PURE


def describe() -> str:
    """Which engine fingerprints in this process, and why the pure-Python one where it does."""
    if COMPILED:
        return "compiled engine"
    if MISSING:
        return f"pure-Python engine, several times slower: {WHY_PURE}"
    return f"pure-Python engine, {WHY_PURE}"
