"""The numpy bit vote gives exactly the pure-Python vote's fingerprints (issue 18, deliverable 2)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from scrapy_simhash.fingerprint import simhash as sh
from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter

pytest.importorskip("numpy", reason="the vectorized vote needs numpy (pip install scrapy-simhash[fast])")

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SOURCES = {"zh": CORPUS / "zh" / "inews-bdci2019.jsonl.gz", "en": CORPUS / "en" / "reuters21578.jsonl.gz"}

# Weight pools: TF-IDF-like reals; a few values, so equal weights meet and cancel to an exact 0
# (a tie: the bit stays 0); magnitudes 2^54 apart, where the order of the additions decides the sign
# (1e16 + 1 - 1e16 + 1 is 1 added left to right, 0 added pairwise).
POOLS = {
    "reals": lambda rng: rng.uniform(0.01, 12.0),
    "ties": lambda rng: rng.choice([1, 2, 0.5, 1.5, 3.0]),
    "decimals": lambda rng: rng.choice([0.1, 0.2, 0.3, 0.7, 1.1]),
    "cancel": lambda rng: rng.choice([1e16, 3e16, 1.0, 2.0, 0.5]),
    "mixed": lambda rng: rng.choice([0, 0.0, -1.0, 2.5, 1e16, rng.uniform(-3, 3)]),
}


def random_sets(rng: random.Random, count: int) -> list[tuple[list[tuple[str, float]], int]]:
    """``count`` (pairs, bits) cases: 1–300 features from a small vocabulary (repeats included)."""
    cases = []
    for i in range(count):
        pool = POOLS[list(POOLS)[i % len(POOLS)]]
        n = rng.choice([1, 2, 3, 4, 5, 8, 20, 64, 65, 300]) if rng.random() < 0.5 else rng.randint(1, 120)
        vocab = [f"w{k}" for k in range(rng.choice([4, 50, 5000]))]
        pairs = [(rng.choice(vocab), pool(rng)) for _ in range(n)]
        cases.append((pairs, sh.SUPPORTED_BITS[i % 3]))
    return cases


def test_numpy_vote_equals_python_vote_on_random_sets():
    rng = random.Random(18)
    differ = []
    for pairs, bits in random_sets(rng, 6000):
        nonzero = [(f, w) for f, w in pairs if w]
        want = sh._vote_python(pairs, bits)
        got = sh._vote_numpy(nonzero, bits) if nonzero else 0
        if got != want:
            differ.append((bits, pairs[:5], hex(want), hex(got)))
    assert not differ, f"{len(differ)} fingerprints differ, first: {differ[0]}"


def test_order_decides_the_sign_and_both_paths_add_in_the_same_order():
    # The classic case where pairwise or BLAS summation would differ from the Python loop.
    hashes = {"a": (1 << 64) - 1, "b": (1 << 64) - 1, "c": 0, "d": (1 << 64) - 1}
    weights = [("a", 1e16), ("b", 1.0), ("c", 1e16), ("d", 1.0)]
    want = sh._vote_python(weights, 64, hash_func=hashes.__getitem__)
    assert want == (1 << 64) - 1  # ((1e16 + 1) - 1e16) + 1 = 1 > 0 on every bit
    for bits in sh.SUPPORTED_BITS:
        cases = [[(f"x{i}", w) for i, w in enumerate(ws)] for ws in ([1e16, 1.0, 1e16, 1.0] * 3, [0.1, 0.2, 0.3] * 5)]
        for pairs in cases:
            assert sh._vote_numpy(pairs, bits) == sh._vote_python(pairs, bits)


COMPILED = pytest.mark.skipif(sh._vote_compiled is None, reason="extension not built (setup.py build_ext --inplace)")


@COMPILED
def test_compiled_vote_equals_python_vote_on_random_sets():
    rng = random.Random(19)
    differ = []
    for pairs, bits in random_sets(rng, 6000):
        want = sh._vote_python(pairs, bits)
        got = sh._vote_compiled(pairs, bits)
        if got != want:
            differ.append((bits, pairs[:5], hex(want), hex(got)))
    assert not differ, f"{len(differ)} fingerprints differ, first: {differ[0]}"


@COMPILED
def test_compiled_vote_adds_in_the_python_order():
    for bits in sh.SUPPORTED_BITS:
        for ws in ([1e16, 1.0, 1e16, 1.0] * 3, [0.1, 0.2, 0.3] * 5, [1e16, -1e16, 1.0, 0.0, -0.0]):
            pairs = [(f"x{i}", w) for i, w in enumerate(ws)]
            assert sh._vote_compiled(pairs, bits) == sh._vote_python(pairs, bits)


def test_simhash_takes_the_numpy_path_and_falls_back(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sh, "_vote_compiled", None)  # numpy's turn where the extension is not built
    features = {f"feature{i}": 1.0 + i % 4 for i in range(sh.NUMPY_MIN_FEATURES + 5)}
    calls = []
    real = sh._vote_numpy
    monkeypatch.setattr(sh, "_vote_numpy", lambda *a: calls.append(1) or real(*a))
    fast = sh.simhash(features)
    assert calls, "numpy is importable but simhash() did not use it"
    monkeypatch.setattr(sh, "_np", None)
    calls.clear()
    assert sh.simhash(features) == fast
    assert not calls


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_corpus_fingerprints_identical_with_and_without_numpy(lang: str, monkeypatch: pytest.MonkeyPatch):
    if not SOURCES[lang].is_file():
        pytest.skip(f"corpus file missing: {SOURCES[lang]} (needs ../shared/corpus next to the repo)")
    docs = []
    with gzip.open(SOURCES[lang], "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if (rec.get("body") or "").strip():
                docs.append((rec.get("title") or "", rec["body"]))
            if len(docs) >= 300:
                break
    for bits in sh.SUPPORTED_BITS:
        fp = Fingerprinter(bits=bits, sentences=False)
        fast = [fp.fingerprint(t, b) for t, b in docs]
        with monkeypatch.context() as m:
            m.setattr(sh, "_np", None)
            slow = [Fingerprinter(bits=bits, sentences=False).fingerprint(t, b) for t, b in docs]
        assert sum(x.body is not None for x in fast) > len(docs) // 2
        assert fast == slow
