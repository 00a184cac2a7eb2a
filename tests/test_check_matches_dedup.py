"""``scrapy-simhash check`` gives the verdict ``dedup`` gives: one rule, no second copy of it.

One stream of items goes through the real command line, item by item: first ``check`` (a dry run,
nothing written), then ``dedup`` of the same item (which adds it when new). Every ``check`` verdict
must equal the ``dedup`` verdict that follows, on SQLite and on Redis, with the default tiers and
with the sentence tier on. The stream holds recurring wire headlines over reports with other
figures (the number guard), reposts that hit the title tier, the body tier and the sentence tier,
and new stories.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.cli import main
from tests.conftest import STORY_EN, STORY_ZH, read_jsonl, repost_with_new_title, repost_with_suffix
from tests.test_index_protocol import redis_server_url, with_prefix

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "example_project" / "site"
RECURRING = ("USDA COMMENTS ON EXPORT SALES REPORT", "HOG AND CATTLE SLAUGHTER GUESSTIMATES")


def _edited(story: dict[str, str], title: str) -> dict[str, str]:
    """The story with one sentence in three rewritten and a new headline: the body fingerprint
    drifts, most sentences stay."""
    sentences = re.split(r"(?<=[.!?])\s+", story["body"])
    body = " ".join(s if i % 3 else f"Earlier on, and as reported, {s.lower()}" for i, s in enumerate(sentences))
    return {"url": "edited", "title": title, "body": body}


def _stream() -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    for record in read_jsonl("en/reuters21578.jsonl.gz"):  # skips when the corpus is absent
        if record.get("title") in RECURRING and record.get("body"):
            wire.append({"url": f"reuters/{record['id']}", "title": record["title"], "body": record["body"]})
    assert len(wire) >= 5, "the corpus lost its recurring wire headlines"
    usda = [w for w in wire if w["title"] == RECURRING[0]]
    return [
        *wire[:3],
        {**usda[-1], "url": "copy/usda", "title": usda[-1]["title"] + " - Reuters",
         "body": usda[-1]["body"] + "\nSource: Reuters"},  # title tier, numbers agree
        {**STORY_ZH, "url": "zh"},
        {**repost_with_suffix(STORY_ZH), "url": "zh/suffix"},  # title tier
        {**repost_with_new_title(STORY_ZH, "地铁新线通车首日客流创新高"), "url": "zh/new-title"},  # body tier
        {**STORY_EN, "url": "en"},
        _edited(STORY_EN, "A different headline over an edited copy"),  # body or sentence tier
        *wire[3:],
        {"url": "empty", "title": "", "body": "x"},  # skipped: too little text
    ]


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(args))
    return status, out.getvalue()


def _verdicts(index: str, tmp_path: Path, options: list[str]) -> list[tuple[Any, ...]]:
    pairs = []
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert _cli("dedup", str(empty), "--index", index, "-q", "--no-progress", *options)[0] == 0  # creates it
    for n, item in enumerate(_stream()):
        status, out = _cli("check", "--item", json.dumps(item, ensure_ascii=False), "--index", index, "--json",
                           *options)
        assert status == 0, out
        checked = json.loads(out)["verdict"]
        line = tmp_path / f"item{n}.jsonl"
        line.write_text(json.dumps(item, ensure_ascii=False) + "\n", encoding="utf-8")
        decisions = tmp_path / f"decision{n}.jsonl"
        status, _ = _cli("dedup", str(line), "--index", index, "--decisions", str(decisions), "-q", "--no-progress",
                         *options)
        assert status == 0
        decided = json.loads(decisions.read_text(encoding="utf-8"))
        original = checked["original"] and (checked["original"]["url"] or f"entry #{checked['original']['id']}")
        pairs.append((
            (item["url"], checked["status"], checked["tier"], checked["distance"], original),
            (item["url"], decided["status"], decided["tier"], decided["distance"], decided["original"]),
        ))
    return pairs


def _assert_same(pairs: list[tuple[Any, ...]]) -> None:
    differ = [(c, d) for c, d in pairs if c != d]
    assert not differ, "check and dedup disagree (check, dedup):\n" + "\n".join(map(str, differ))
    statuses = {(c[1], c[2]) for c, _ in pairs}
    # The stream really exercises the rule: new items, title- and body-tier duplicates, a skip.
    assert {("new", None), ("duplicate", "title"), ("duplicate", "body"), ("skipped", None)} <= statuses


@pytest.mark.parametrize("options", [[], ["--sentences-shared", "50"]], ids=["default", "sentence-tier"])
def test_check_verdict_equals_dedup_verdict_sqlite(tmp_path: Path, options: list[str]) -> None:
    _assert_same(_verdicts(str(tmp_path / "index.sqlite3"), tmp_path, options))


@pytest.mark.parametrize("options", [[], ["--sentences-shared", "50"]], ids=["default", "sentence-tier"])
def test_check_verdict_equals_dedup_verdict_redis(tmp_path: Path, options: list[str]) -> None:
    url = with_prefix(redis_server_url(), f"check-{os.urandom(6).hex()}")
    _assert_same(_verdicts(url, tmp_path, options))


def test_a_recurring_headline_with_other_figures_is_new_for_check_too(tmp_path: Path) -> None:
    """The drift that made this test: two USDA reports sharing a headline but not their figures."""
    usda = [w for w in _stream() if w["title"] == RECURRING[0] and w["url"].startswith("reuters/")]
    index = str(tmp_path / "index.sqlite3")
    line = tmp_path / "first.jsonl"
    line.write_text(json.dumps(usda[0]) + "\n", encoding="utf-8")
    assert _cli("dedup", str(line), "--index", index, "-q", "--no-progress")[0] == 0
    status, out = _cli("check", "--item", json.dumps(usda[1]), "--index", index, "--json")
    assert status == 0 and json.loads(out)["verdict"]["status"] == "new"
