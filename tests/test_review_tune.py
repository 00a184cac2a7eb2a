"""The review loop: ``review`` (labels as JSON lines next to the index), ``explain`` showing a label,
``tune`` (labels replayed under other settings; it writes nothing) and ``stopwords``.

The example crawl is real (``scrapy crawl news`` over the bundled site, every reposted page flagged
instead of dropped so the export holds them all); its labels are the site's manifest, which says the
story of every page. The synthetic labels of the threshold tests are pairs at known distances.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter
from scrapy_simhash.index import IndexParams, open_index
from scrapy_simhash.labels import Label, Pair, Side, append_label, default_labels_path, read_labels
from scrapy_simhash.tune import Setting, candidates, replay, score, wilson

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_project"
MANIFEST = json.loads((EXAMPLE / "site" / "manifest.json").read_text(encoding="utf-8"))
STORY = {p["path"]: p["story"] for p in MANIFEST["pages"]}
BIN = Path(sys.executable).parent
SCRIPT = BIN / "scrapy-simhash"
URL_RE = re.compile(r"http://127\.0\.0\.1:\d+/(\S+)")


def run(*args: Any, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *map(str, args)], input=stdin, capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def snapshot(directory: Path) -> dict[str, str]:
    """Every file of ``directory`` and the hash of its bytes; SQLite's shared-memory file and an empty
    write-ahead log are left out (a reader of a WAL-mode file maps the one and may create the other)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())
            if p.is_file() and not p.name.endswith("-shm")
            and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example project crawled once into a fresh index; reposts flagged, so items.jsonl has every page."""
    d = tmp_path_factory.mktemp("example")
    project = d / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".scrapy", "*.jsonl", "__pycache__"))
    index = d / "index.sqlite3"
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "news", "-O", str(d / "items.jsonl"),
         "-s", f"SIMHASH_INDEX_URL=sqlite:///{index}", "-s", "SIMHASH_TITLE_ACTION=flag",
         "-s", "SIMHASH_BODY_ACTION=flag", "-s", "FEEDS={}"],
        cwd=project, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-4000:]
    return {"dir": d, "index": index, "items": d / "items.jsonl"}


def review_from_manifest(*args: Any) -> str:
    """Run ``review`` and answer every pair as the manifest says (same story or not), as a person would
    at the prompt; returns what it printed."""
    proc = subprocess.Popen([str(SCRIPT), "review", *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    out, buf = [], ""
    while ch := proc.stdout.read(1):
        buf += ch
        if buf.endswith("[q] quit: "):
            later, earlier = URL_RE.findall(buf)[-2:]
            proc.stdin.write("s\n" if STORY[later] == STORY[earlier] else "d\n")
            out.append(buf)
            buf = ""
    proc.stdin.close()
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.wait(timeout=60) == 0, err
    return "".join(out) + buf + err


def test_labels_path_is_next_to_a_sqlite_index_and_absent_for_redis(tmp_path: Path) -> None:
    assert default_labels_path(str(tmp_path / "index.sqlite3")) == tmp_path / "index.labels.jsonl"
    assert default_labels_path(f"sqlite:///{tmp_path}/a/x.db") == tmp_path / "a" / "x.labels.jsonl"
    assert default_labels_path("redis://127.0.0.1:6379/0") is None
    proc = run("review", "--index", "redis://127.0.0.1:9/0")
    assert proc.returncode == 2 and "--labels" in proc.stderr and "Traceback" not in proc.stderr


def test_review_appends_one_label_per_answer_and_does_not_ask_again(example: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    before = snapshot(example["dir"])
    proc = ok(run("review", "--index", example["index"], "--labels", labels, "--by", "tester",
                  stdin="s\nbogus\nd\nk\nq\n"))
    assert "answer s, d, k or q" in proc.stdout
    lines = [json.loads(line) for line in labels.read_text("utf-8").splitlines()]
    assert [r["label"] for r in lines] == ["same", "different"]
    for r in lines:
        assert r["by"] == "tester" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["at"])
        assert r["kind"] == "decision" and r["later"]["url"] and r["earlier"]["entry"] is not None
        assert r["earlier"]["title_fp"] and r["tier"] in ("title", "body")
    first_pairs = {(r["later"]["url"], r["earlier"]["url"]) for r in lines}
    # the labelled pairs are not offered again; the skipped one is
    again = ok(run("review", "--index", example["index"], "--labels", labels, "--limit", "1", stdin="d\n"))
    assert "2 of 20 already labelled" in again.stdout
    latest = read_labels(labels)
    assert len(latest) == 3 and len({lb.pair.key for lb in latest}) == 3
    assert first_pairs < {(lb.pair.later.url, lb.pair.earlier.url) for lb in latest}
    assert snapshot(example["dir"]) == before  # the index (and the export) untouched


def test_twenty_labels_of_the_example_tune_and_explain(example: dict[str, Path]) -> None:
    """The review of the example index: 20 pairs labelled from the manifest, tune's table on them,
    explain showing a label, and nothing but the labels file written."""
    d, index = example["dir"], example["index"]
    labels = d / "index.labels.jsonl"
    labels.unlink(missing_ok=True)
    shown = review_from_manifest("--index", index, "--items", example["items"], "--by", "manifest")
    assert "20 labelled (same story 9, different 11)" in shown
    assert "“SURABAYA, Indonesia/JAKARTA (Reuters) - Indonesian rescuers" in shown  # a body, as the person reads it
    records = read_labels(labels)
    assert len(records) == 20
    decisions = [lb for lb in records if lb.pair.kind == "decision"]
    assert len(decisions) == 9 and all(lb.same for lb in decisions)
    # with --items, a decision's both distances are known: the replay needs no guess
    assert all(not lb.pair.unknown and lb.pair.title_distance is not None and lb.pair.body_distance is not None
               for lb in decisions)
    near = [lb for lb in records if lb.pair.kind == "near_miss"]
    assert len(near) == 11 and not any(lb.same for lb in near)

    before = snapshot(d)
    table = ok(run("tune", labels, "--index", index)).stdout
    current = next(line for line in table.splitlines() if "current" in line)
    assert re.search(r"\b9\s+0\s+0\s+11\s+0\s+1\.00 \[0\.70-1\.00\]\s+1\.00 \[0\.70-1\.00\]", current), table
    assert "9/9" in current and "no re-band needed" in table
    data = json.loads(ok(run("tune", labels, "--index", index, "--json")).stdout)
    assert data["labels"] == 20 and data["suggested"]["precision"] == 1.0 and data["suggested"]["recall"] == 1.0
    assert snapshot(d) == before

    # explain: the label of a decided URL
    url, original = decisions[0].pair.later.url, decisions[0].pair.earlier.url
    assert url is not None and original is not None
    out = ok(run("explain", url, "--index", index)).stdout
    assert f"labelled same story as {original}" in out
    data = json.loads(ok(run("explain", url, "--index", index, "--json")).stdout)
    assert data["labels"][0]["label"] == "same" and data["labels"][0]["by"] == "manifest"
    assert snapshot(d) == before


# ------------------------------------------------------------------------------------------------
# tune on synthetic labels: pairs at known distances
# ------------------------------------------------------------------------------------------------


def _flip(fp: int, bits: int, rng: random.Random) -> int:
    for b in rng.sample(range(64), bits):
        fp ^= 1 << b
    return fp


def _pair(rng: random.Random, n: int, title_distance: int, body_distance: int) -> Pair:
    t, b = rng.getrandbits(64), rng.getrandbits(64)
    earlier = Side(f"https://a.example/{n}", n, f"story {n}", t, b)
    later = Side(f"https://b.example/{n}", n + 1000, f"story {n} again", _flip(t, title_distance, rng),
                 _flip(b, body_distance, rng))
    return Pair("near_miss", "new", "body", body_distance, later, earlier, title_distance, body_distance)


def _write(path: Path, labelled: list[tuple[Pair, str]]) -> None:
    for pair, judgement in labelled:
        append_label(path, Label(pair, judgement, "2026-12-05T00:00:00Z", "synthetic"))  # type: ignore[arg-type]


def _tune(path: Path, *args: str) -> dict[str, Any]:
    return json.loads(ok(run("tune", path, "--json", *args)).stdout)


def test_tune_recovers_a_wider_body_threshold(tmp_path: Path) -> None:
    """Reposts whose bodies sit 4-5 bits apart, other stories 8+ bits apart: the default 3 misses the
    reposts, tune finds 5 (the nearest of the perfect thresholds, 5-7) with recall 1."""
    rng = random.Random(7)
    labelled = [(_pair(rng, n, 30, rng.choice((4, 5))), "same") for n in range(12)]
    labelled += [(_pair(rng, n, 30, rng.randint(8, 14)), "different") for n in range(100, 112)]
    labelled += [(_pair(rng, n, 31, 1), "same") for n in range(200, 204)]
    path = tmp_path / "labels.jsonl"
    _write(path, labelled)
    before = snapshot(tmp_path)
    data = _tune(path)
    assert data["current"]["settings"]["SIMHASH_BODY_MAX_DISTANCE"] == 3
    assert data["current"]["recall"] == pytest.approx(4 / 16)
    best = data["suggested"]
    assert best["settings"]["SIMHASH_BODY_MAX_DISTANCE"] == 5
    assert best["settings"]["SIMHASH_TITLE_MAX_DISTANCE"] == 2  # unchanged: the titles tell nothing here
    assert (best["tp"], best["fp"], best["fn"], best["tn"]) == (16, 0, 0, 12)
    low, high = best["recall_95"]
    assert 0.79 < low < 0.81 and high == 1.0  # Wilson, 16 of 16
    # the table and --apply: the block to paste, and still nothing written
    table = ok(run("tune", path)).stdout
    assert re.search(r"^\s+2\s+5\s+70\s+50\s+16\s+0\s+0\s+12\s.*suggested$", table, re.M), table
    assert re.search(r"^\s+2\s+3\s+70\s+50\s+4\s+0\s+12\s+12\s.*current$", table, re.M), table
    applied = ok(run("tune", path, "--apply"))
    assert "SIMHASH_BODY_MAX_DISTANCE = 5\n" in applied.stdout
    assert "SIMHASH_TITLE_MAX_DISTANCE = 2\n" in applied.stdout
    assert "scrapy-simhash reband PATH_OR_URL --title-max-distance 2 --body-max-distance 5" in applied.stderr
    assert snapshot(tmp_path) == before
    # with an index banded for the defaults (body up to 3): the re-band command for it
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    location = index_dir / "index.sqlite3"
    open_index(str(location), params=IndexParams()).close()
    stored = snapshot(index_dir)
    table = ok(run("tune", path, "--index", location)).stdout
    assert f"re-band first (the index answers title up to 2, body up to 3): scrapy-simhash reband {location} " \
           "--title-max-distance 2 --body-max-distance 5" in table
    url = f"sqlite:///{location}"  # an absolute path: four slashes, all kept in the command shown
    table = ok(run("tune", path, "--index", url)).stdout
    assert f"scrapy-simhash reband {url} --title-max-distance 2" in table
    assert snapshot(index_dir) == stored and snapshot(tmp_path) == before


def test_tune_recovers_a_tighter_title_threshold(tmp_path: Path) -> None:
    """Recurring headlines 2 bits apart over other texts (bodies 12-18 bits apart: they do not
    contradict a title match) were judged different; reposts sit at title distance 0-1 (bodies
    rewritten, 15 bits apart: out of the body tier's reach)."""
    rng = random.Random(11)
    labelled = [(_pair(rng, n, rng.choice((0, 1)), 15), "same") for n in range(10)]
    labelled += [(_pair(rng, n, 2, rng.randint(12, 18)), "different") for n in range(100, 110)]
    path = tmp_path / "labels.jsonl"
    _write(path, labelled)
    data = _tune(path)
    assert (data["current"]["tp"], data["current"]["fp"]) == (10, 10)
    best = data["suggested"]
    assert best["settings"]["SIMHASH_TITLE_MAX_DISTANCE"] == 1
    assert (best["tp"], best["fp"], best["fn"], best["tn"]) == (10, 0, 0, 10)


def test_replay_is_the_rule_and_unknown_stays_unknown() -> None:
    rng = random.Random(3)
    pair = _pair(rng, 1, 5, 4)
    assert replay(pair, Setting(2, 3, 70, 50)) is False
    assert replay(pair, Setting(2, 4, 70, 50)) is True
    assert replay(pair, Setting(5, 0, 70, 50)) is True
    # a title-tier decision whose body the index never kept: admitted by the title tier → unknown
    decided = Pair("decision", "duplicate", "title", 1, Side("https://b/1", None, "x", None, None),
                   pair.earlier, 1, None, ("body",))
    assert replay(decided, Setting(2, 3, 70, 50)) is True
    assert replay(decided, Setting(0, 3, 70, 50)) is None
    # the title tier's body check: bodies 30 bits apart contradict a title match
    far = _pair(rng, 2, 0, 30)
    assert replay(far, Setting(2, 3, 0, 0)) is False


def test_wilson_interval() -> None:
    assert wilson(0, 0) is None
    low, high = wilson(5, 5)  # type: ignore[misc]
    assert low == pytest.approx(0.5655, abs=1e-4) and high == 1.0
    low, high = wilson(5, 10)  # type: ignore[misc]
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)


def test_tune_refuses_without_labels_and_skips_bad_lines(tmp_path: Path) -> None:
    missing = run("tune", tmp_path / "none.jsonl")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    path = tmp_path / "labels.jsonl"
    path.write_text("not json\n{\"label\": \"maybe\"}\n", encoding="utf-8")
    empty = run("tune", path)
    assert empty.returncode == 2 and "holds no labels" in empty.stderr and "Traceback" not in empty.stderr
    rng = random.Random(5)
    _write(path, [(_pair(rng, 1, 0, 0), "same"), (_pair(rng, 2, 20, 20), "different")])
    proc = ok(run("tune", path))
    assert "skipped 2 line(s)" in proc.stderr and "line 1: not JSON" in proc.stderr
    assert "2 labels" in proc.stdout


# ------------------------------------------------------------------------------------------------
# stopwords
# ------------------------------------------------------------------------------------------------


CHROME = "本站声明：凡注明来源华夏快讯网的作品，版权均属华夏快讯网所有，未经授权不得转载。"


def test_stopwords_proposes_site_chrome_and_writes_a_stop_words_file(example: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    items = [json.loads(line) for line in example["items"].read_text("utf-8").splitlines()]
    chromed = tmp_path / "items.jsonl"
    with open(chromed, "w", encoding="utf-8") as f:
        for item in items:
            item["body"] = f"<div><p>{CHROME}</p>{item['body']}<p>{CHROME}</p></div>"
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    index_dir = example["dir"]
    before = snapshot(index_dir)
    out = tmp_path / "stop.txt"
    out.write_text("# my words\n已有词\n", encoding="utf-8")
    proc = ok(run("stopwords", chromed, "--index", example["index"], "--min-items", "5", "--min-share", "0.9",
                  "-o", out))
    assert "of 8 entries of namespace 'default'" in proc.stdout  # the 8 stories, not their 17 copies
    proposed = re.findall(r"^\s+[\d.]+%\s+[\d,]+\s+[\d.]+%\s+(\S+)$", proc.stdout, re.M)
    chrome_words = set(Fingerprinter().features.words(CHROME))
    # the chrome's words that are rare in general text, and no word of the 8 different stories
    assert {"华夏", "快讯", "转载", "版权", "本站", "声明"} <= set(proposed) <= chrome_words
    assert "re-index" in proc.stderr.lower() and "--reset --stop-words" in proc.stderr
    text = out.read_text("utf-8")
    assert text.startswith("# my words\n已有词\n# scrapy-simhash stopwords")
    words = [w for w in text.splitlines() if w and not w.startswith("#")]
    assert set(proposed) <= set(words) and len(words) == len(set(words))
    # SIMHASH_STOP_WORDS reads it: the proposed words are no features any more
    left = Fingerprinter(stop_words=out).features.words(CHROME)
    assert not set(left) & set(proposed)
    # a second run adds nothing twice
    ok(run("stopwords", chromed, "--index", example["index"], "--min-items", "5", "--min-share", "0.9", "-o", out))
    assert out.read_text("utf-8") == text
    assert snapshot(index_dir) == before
    few = run("stopwords", chromed, "--min-items", "1000")
    assert few.returncode == 1 and "too few" in few.stderr
    assert os.path.getsize(out) == len(text.encode("utf-8"))


def test_review_and_tune_on_a_redis_index(example: dict[str, Path], tmp_path: Path) -> None:
    """The same loop on Redis: the labels go where --labels says (no directory next to the index)."""
    from tests.redis_server import shared_server_url

    url = f"{shared_server_url()}?prefix=review-{os.getpid()}-{random.getrandbits(32):x}"
    ok(run("dedup", example["items"], "--index", url, "-q"))
    labels = tmp_path / "labels.jsonl"
    shown = review_from_manifest("--index", url, "--labels", labels, "--items", example["items"])
    assert "20 labelled (same story 9, different 11)" in shown
    assert len(read_labels(labels)) == 20
    table = ok(run("tune", labels, "--index", url)).stdout
    current = next(line for line in table.splitlines() if "current" in line)
    assert re.search(r"\b9\s+0\s+0\s+11\s+0\s", current) and "9/9" in current, table
    decided = next(lb for lb in read_labels(labels) if lb.pair.kind == "decision")
    assert decided.pair.later.url is not None
    out = ok(run("explain", decided.pair.later.url, "--index", url, "--labels", labels)).stdout
    assert "labelled same story as" in out
    ok(run("reset", "--index", url, "--yes"))


def test_score_counts_every_replay() -> None:
    """The counts of every candidate setting are those of replaying each pair under it."""
    rng = random.Random(9)
    labels = [Label(_pair(rng, n, rng.randint(0, 8), rng.randint(0, 14)), rng.choice(("same", "different")),
                    "", "") for n in range(60)]
    settings = candidates(Setting(2, 3, 70, 50), 6, 10)
    for s, sc in zip(settings, score(labels, settings), strict=True):
        verdicts = [(replay(lb.pair, s), lb.same) for lb in labels]
        assert (sc.tp, sc.fp, sc.fn, sc.tn) == (
            sum(v is True and same for v, same in verdicts), sum(v is True and not same for v, same in verdicts),
            sum(v is False and same for v, same in verdicts), sum(v is False and not same for v, same in verdicts),
        ), s
