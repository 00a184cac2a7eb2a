"""Would another tokenizer make fingerprinting much faster?

The engine's ``Fingerprinter`` with its word segmenter swapped for another tokenizer's ``cut``,
against the default (``scrapy_simhash.fingerprint.segment``: jieba's words, exactly), on the same real
articles as ``throughput.py`` (inews BDCI 2019, Reuters-21578). CPU time of ``fingerprint()`` end to
end, minimum of ``--passes`` passes, a fresh ``Fingerprinter`` per pass (no warm caches), and the
share of body fingerprints that change. Tokenizers that are not installed are skipped
(``pip install rjieba jieba-fast``).

Run: ``python benchmarks/tokenizers.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import SOURCES, load_docs


def other_tokenizers() -> dict[str, Callable[[str], list[str]]]:
    found: dict[str, Callable[[str], list[str]]] = {}
    try:
        import rjieba

        found["rjieba"] = rjieba.cut
    except ImportError:
        print("rjieba not installed: skipped")
    try:
        import jieba_fast

        jieba_fast.setLogLevel(60)
        jieba_fast.initialize()
        found["jieba-fast"] = lambda text: list(jieba_fast.cut(text))
    except ImportError:
        print("jieba-fast not installed: skipped")
    return found


class _Swapped:
    def __init__(self, cut: Callable[[str], list[str]]) -> None:
        self.cut = cut


def fingerprinter(cut: Callable[[str], list[str]] | None) -> Any:
    from scrapy_simhash import Fingerprinter

    fp = Fingerprinter()
    if cut is not None:
        fp.features.segmenter = _Swapped(cut)
    return fp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=400)
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    for path in SOURCES.values():
        if not path.is_file():
            print(f"corpus file missing: {path}")
            return 2
    print(f"$ python benchmarks/tokenizers.py --limit {args.limit} --passes {args.passes}")
    fingerprinter(None)  # dictionaries loaded before anything is timed
    tokenizers: dict[str, Callable[[str], list[str]] | None] = {"default (exact jieba)": None, **other_tokenizers()}
    print("\n| tokenizer | lang | fingerprint() ms/doc | speed-up vs default | body fingerprints changed |")
    print("|---|---|---:|---:|---:|")
    for lang in SOURCES:
        docs = load_docs(lang, args.limit)
        times: dict[str, float] = {}
        bodies: dict[str, list[int | None]] = {}
        for _ in range(args.passes):
            for name, cut in tokenizers.items():
                fp = fingerprinter(cut)
                t0 = time.process_time()
                out = [fp.fingerprint(d["title"], d["body"]) for d in docs]
                times[name] = min(times.get(name, float("inf")), time.process_time() - t0)
                bodies[name] = [f.body for f in out]
        base = times["default (exact jieba)"]
        for name, secs in times.items():
            changed = sum(a != b for a, b in zip(bodies[name], bodies["default (exact jieba)"], strict=True))
            print(f"| {name} | {lang} | {secs * 1e3 / len(docs):.2f} | {base / secs:.2f} | "
                  f"{changed / len(docs):.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
