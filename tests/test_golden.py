"""Fingerprints stay fixed: both engines give the golden file's results (tests/golden.py), and a change
of fingerprints without a new ``FEATURES_VERSION`` fails.

The compiled engine is checked in this process (where it is built); the pure-Python one in a
subprocess with ``SCRAPY_SIMHASH_PURE_PYTHON=1`` (or here, where this process runs it). Inputs of
the shared corpus are checked where ../shared/corpus is (skipped with the reason elsewhere)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from scrapy_simhash._compiled import COMPILED, PURE_PYTHON_ENV
from scrapy_simhash.index.base import FEATURES_VERSION
from tests import golden
from tests.conftest import CORPUS, REPO

ROUTES = ["compiled", "pure"]
PARTS = ["repository", "corpus"]


@functools.cache
def _golden() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return golden.read_golden()


@functools.cache
def _pure_results(corpus: bool) -> dict[str, Any]:
    """The pure-Python engine's results, from a process that runs it."""
    if not COMPILED:
        return golden.compute(_golden()[1], corpus)
    env = {**os.environ, PURE_PYTHON_ENV: "1", "SIMHASH_TEST_CORPUS": str(CORPUS),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tests.golden", "--compute", *(["--corpus"] if corpus else [])],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def check(header: dict[str, Any], specs: list[dict[str, Any]], results: dict[str, Any], what: str) -> None:
    """Fail when ``results`` are not the golden ones, saying what to do."""
    if header["features_version"] != FEATURES_VERSION:
        pytest.fail(f"regenerate the golden file ({golden.WRITE_COMMAND}): it was made with FEATURES_VERSION "
                    f"{header['features_version']!r}, this is {FEATURES_VERSION!r}")
    diffs = []
    for spec in specs:
        got = results.get(spec["id"])
        for config, expected in spec["expected"].items():
            actual = (got or {}).get(config)
            if actual != expected:
                fields = sorted(k for k in {*expected, *(actual or {})} if (actual or {}).get(k) != expected.get(k))
                diffs.append(f"{spec['id']} [{config}]: " + "; ".join(
                    f"{k}: {expected.get(k)!r:.60} → {(actual or {}).get(k)!r:.60}" for k in fields))
    if diffs:
        pytest.fail(f"fingerprints changed ({what}): bump FEATURES_VERSION (scrapy_simhash/index/base.py) and "
                    f"regenerate the golden file ({golden.WRITE_COMMAND}); {len(diffs)} results differ:\n"
                    + "\n".join(diffs[:20]))


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("route", ROUTES)
def test_the_engine_gives_the_golden_fingerprints(route: str, part: str) -> None:
    header, specs = _golden()
    corpus = part == "corpus"
    chosen = [spec for spec in specs if ("corpus" in spec) == corpus]
    if corpus and not CORPUS.is_dir():
        pytest.skip(f"the golden file's corpus inputs need the shared corpus {CORPUS} (absent on this machine)")
    if route == "compiled":
        if not COMPILED:
            pytest.skip("the compiled engine is not in use here (not built, or SCRAPY_SIMHASH_PURE_PYTHON set)")
        results = golden.compute(chosen, corpus)
    else:
        results = _pure_results(corpus)
    check(header, chosen, results, f"{route} engine, {part} inputs")


def test_the_golden_file_covers_every_kind_of_input() -> None:
    """Real articles, titles alone, short texts, pages and hostile cases; every configuration; all
    the fields a fingerprint has."""
    header, specs = _golden()
    kinds = {spec["kind"] for spec in specs}
    assert kinds == {"article", "title", "review", "page", "hostile"}
    assert sum("corpus" not in spec for spec in specs) >= 30  # checked wherever the repository is
    assert set(header["configs"]) == set(golden.CONFIGS)
    assert all(set(spec["expected"]) in ({"default"}, set(golden.CONFIGS)) for spec in specs)
    results = [r for spec in specs for r in spec["expected"].values() if "error" not in r]
    fields = {f for r in results for f in r}
    from dataclasses import fields as dataclass_fields

    from scrapy_simhash.fingerprint.fingerprinter import Fingerprints

    assert fields == {f.name for f in dataclass_fields(Fingerprints)}
    # every outcome is there: fingerprints, none, short-body digests, pages reduced, figure-heavy bodies
    assert any(r["title"] for r in results) and any(r["title"] is None for r in results)
    assert any(r["body"] for r in results) and any(r["body"] is None for r in results)
    assert any(r["short_body"] for r in results) and any(r["main_text"] for r in results)
    assert any(r["figures"] for r in results) and any(r["sentences"] for r in results)


def test_a_changed_fingerprint_fails_with_what_to_do() -> None:
    """The check can fail: a result that moved asks for a new FEATURES_VERSION; a golden file of
    another FEATURES_VERSION asks to be regenerated."""
    header, specs = _golden()
    spec = next(s for s in specs if s["id"] == "mixed-scripts")
    results = {spec["id"]: json.loads(json.dumps(spec["expected"]))}
    check(header, [spec], results, "as written")
    body = results[spec["id"]]["default"]["body"]
    results[spec["id"]]["default"]["body"] = f"{int(body, 16) ^ 1:0{len(body)}x}"
    with pytest.raises(pytest.fail.Exception, match=r"fingerprints changed .*bump FEATURES_VERSION"):
        check(header, [spec], results, "one bit flipped")
    with pytest.raises(pytest.fail.Exception, match="regenerate the golden file"):
        check({**header, "features_version": header["features_version"] + "-old"}, [spec],
              {spec["id"]: spec["expected"]}, "another version")


def test_a_changed_corpus_record_is_noticed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, specs = _golden()
    spec = next((s for s in specs if "line" in s), None)
    if spec is None or not CORPUS.is_dir():
        pytest.skip(f"needs the shared corpus {CORPUS}")
    with pytest.raises(golden.CorpusChanged, match="regenerate the golden file"):
        list(golden.read_inputs([{**spec, "sha256": "0" * 64}]))
