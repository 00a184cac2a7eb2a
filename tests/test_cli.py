"""The command line, run for real: the installed ``scrapy-simhash`` console script in a subprocess
on JSONL files (good and bad lines, stdin, gzip, --jobs 1/2), the maintenance subcommands on a real
SQLite index, and ``scrapy simhash`` inside a temporary Scrapy project."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash import cli
from scrapy_simhash.engine import Deduplicator
from scrapy_simhash.index import open_index

from .conftest import STORY_EN, STORY_ZH, STORY_ZH_2, read_jsonl, repost_with_new_title, repost_with_suffix
from .procs import children, running

BIN = Path(sys.executable).parent
SCRIPT = BIN / "scrapy-simhash"
DECISION_KEYS = ["line", "url", "status", "tier", "distance", "original", "error"]


@pytest.fixture(scope="module", autouse=True)
def _console_script() -> None:
    if not SCRIPT.exists():
        pytest.fail(f"{SCRIPT} is missing: run `pip install -e .` so the console script exists")


def run(*args: Any, stdin: bytes | None = None, cwd: Path | None = None, cmd: list[str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The console script (or ``cmd``) with these arguments; stdout/stderr as text, never a TTY."""
    argv = [*(cmd or [str(SCRIPT)]), *map(str, args)]
    proc = subprocess.run(argv, input=stdin, capture_output=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning:scrapy_simhash"})
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8"),
                                       proc.stderr.decode("utf-8"))


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def read_decisions(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        records = [json.loads(line) for line in f]
    for r in records:
        assert list(r) == DECISION_KEYS, r
    return records


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


# ------------------------------------------------------------------------------------------------
# A tiny hand-written input (runs without ../shared)
# ------------------------------------------------------------------------------------------------

GOOD = [
    {"url": "http://a.example/zh1", **STORY_ZH, "section": "城市"},
    {"url": "http://a.example/zh2", **STORY_ZH_2},
    {"url": "http://a.example/en1", **STORY_EN},
    {"url": "http://b.example/zh1-copy", **repost_with_suffix(STORY_ZH)},
    {"url": "http://c.example/tea", **repost_with_new_title(STORY_ZH_2, "无人机飞进南山茶园 春茶开采用上新技术")},
]
#: (raw line, expected status, what the error message must mention); a line with neither a title nor
#: a body is no item: it is counted as skipped in the summary, without a decision line (NO_RECORD)
BAD = [
    (b"this is not json {", "error", "not JSON"),
    (b"[1, 2, 3]", "error", "not a JSON object"),
    (dumps({"url": "http://x.example/1", "title": 12345, "body": "x"}).encode(), "error", "'title'"),
    (dumps({"url": "http://x.example/2", "headline": "no usable field"}).encode(), "no record", "no title or body"),
    (dumps({"url": "http://x.example/3", "title": "短", "body": ""}).encode(), "skipped", "too little text"),
    (b'{"url": "http://x.example/4", "title": "\xff\xfe broken"}', "error", "not UTF-8"),
    (dumps({"url": 7, "title": STORY_EN["title"]}).encode(), "error", "'url'"),
    (dumps({"url": "http://x.example/5", "title": STORY_EN["title"], "body": {"p": 1}}).encode(), "error",
     "'body'"),
]


def tiny_lines() -> list[bytes]:
    lines = [dumps(item).encode() for item in GOOD[:3]]
    lines += [raw for raw, _, _ in BAD[:4]]
    lines += [dumps(item).encode() for item in GOOD[3:]]
    lines += [raw for raw, _, _ in BAD[4:]]
    lines.insert(5, b"   ")  # a blank line in the middle
    return lines


def expected_tiny() -> list[tuple[str, str | None, str | None, str | None]]:
    """(status, tier, original, error fragment) per line of :func:`tiny_lines`; status "no record"
    for a line that gets no decision line (a blank one, one without a title or body)."""
    exp: list[tuple[str, str | None, str | None, str | None]] = [("new", None, None, None)] * 3
    exp += [(s, None, None, m) for _, s, m in BAD[:4]]
    exp += [("duplicate", "title", GOOD[0]["url"], None), ("duplicate", "body", GOOD[1]["url"], None)]
    exp += [(s, None, None, m) for _, s, m in BAD[4:]]
    exp.insert(5, ("no record", None, None, "blank line"))
    return exp


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny input deduped once with --jobs 1 into a fresh index (reused by several tests)."""
    d = tmp_path_factory.mktemp("tiny")
    src = d / "items.jsonl"
    src.write_bytes(b"\n".join(tiny_lines()) + b"\n")
    index = d / "index.sqlite3"
    proc = ok(run("dedup", src, "--index", index, "-o", d / "kept.jsonl", "--decisions", d / "decisions.jsonl"))
    return {"dir": d, "src": src, "index": index, "proc": proc, "decisions": read_decisions(d / "decisions.jsonl")}


def test_dedup_decides_every_line_and_reports_bad_ones(tiny: dict[str, Any]) -> None:
    records, expected = tiny["decisions"], expected_tiny()
    recorded = [n for n, (status, *_) in enumerate(expected, 1) if status != "no record"]
    assert [r["line"] for r in records] == recorded  # every item, in order; no line for what is no item
    urls = {}
    for n, raw_line in enumerate(tiny_lines(), 1):
        try:
            urls[n] = json.loads(raw_line).get("url")
        except (ValueError, AttributeError):
            urls[n] = None
    for r, (status, tier, original, error) in zip(records, [e for e in expected if e[0] != "no record"],
                                                  strict=True):
        assert r["status"] == status, r
        assert r["tier"] == tier, r
        assert r["original"] == original, r
        if status in ("duplicate", "flagged"):
            limit = 2 if tier == "title" else 3
            assert isinstance(r["distance"], int) and 0 <= r["distance"] <= limit, r
            assert r["error"] is None
        else:
            assert r["distance"] is None, r
        if error is None:
            assert r["error"] is None, r
        else:
            assert error in r["error"], r
        expected_url = urls[r["line"]] if isinstance(urls[r["line"]], str) else None
        if status != "error" or error not in ("not JSON", "not a JSON object", "not UTF-8", "'url'"):
            assert r["url"] == expected_url, r
    stderr = tiny["proc"].stderr
    bad_lines = [r["line"] for r in records if r["status"] == "error"]
    for n in bad_lines:  # each bad line is reported with its number
        assert re.search(rf"^line {n}: .+; skipped$", stderr, re.M), stderr
    assert "\r" not in stderr  # no progress bar when stderr is a pipe
    assert re.search(r"kept\s+3\s+\(new 3, flagged 0", stderr), stderr
    assert re.search(r"duplicate\s+2\s+\(title 1, body 1, sentence 0\)", stderr), stderr
    assert re.search(rf"errors\s+{len(bad_lines)}\b", stderr), stderr
    # skipped: the too-short item (a decision line), the blank line and the one without a title or body
    assert re.search(r"skipped\s+3\s+\(.*blank line: 1", stderr), stderr
    assert "too little text to fingerprint: 1" in stderr and "no title or body (looked for title" in stderr
    assert "items/s" in stderr


def test_summary_counts_the_sentence_tier(tmp_path: Path) -> None:
    """A real page and a repost with a new headline and one sentence in three rewritten: only the
    opt-in sentence tier catches it, and the summary's tier counts add up to the duplicates."""
    from tests.test_accuracy_rules import SITE, _css

    title, body = _css(SITE / "harbor" / "airasia-bodies.html", "article.story h1.headline::text",
                       "article.story div.story-body")
    if not body:
        pytest.skip("example site page changed: selector finds no body")
    from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter
    from scrapy_simhash.fingerprint.signatures import _SENTENCE_END

    parts = [p.strip() for p in _SENTENCE_END.split(Fingerprinter().clean_body(body)) if p.strip()]
    fillers = ["the weather in a distant city", "a football match in another league", "prices at a market"]
    edited = [p if n % 3 else f"An unrelated remark about {fillers[n % 3 - 1]} was inserted"
              for n, p in enumerate(parts)]
    src = tmp_path / "items.jsonl"
    src.write_text(dumps({"url": "orig", "title": title, "body": body}) + "\n" + dumps(
        {"url": "repost", "title": "Rescuers find victims of Indonesia air crash", "body": ". ".join(edited) + "."}
    ) + "\n", "utf-8")
    proc = ok(run("dedup", src, "--index", tmp_path / "i.sqlite3", "--sentences-shared", "50",
                  "--decisions", tmp_path / "d.jsonl"))
    assert [r["tier"] for r in read_decisions(tmp_path / "d.jsonl")] == [None, "sentence"]
    assert re.search(r"duplicate\s+1\s+\(title 0, body 0, sentence 1\)", proc.stderr), proc.stderr
    assert re.search(r"kept\s+1\s+\(new 1, flagged 0: title 0, body 0, sentence 0\)", proc.stderr), proc.stderr


def test_kept_items_are_the_original_objects(tiny: dict[str, Any]) -> None:
    kept = (tiny["dir"] / "kept.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line) for line in kept] == GOOD[:3]
    assert "江城地铁" in kept[0]  # ensure_ascii=False


def test_decisions_match_the_engine_in_process(tiny: dict[str, Any], tmp_path: Path) -> None:
    """Each decision equals what the Deduplicator itself says for the same items, in the same order."""
    with Deduplicator.open(str(tmp_path / "engine.sqlite3")) as dedup:
        by_line = {}
        for n, raw in enumerate(tiny_lines(), 1):
            try:
                item = json.loads(raw)
            except ValueError:
                continue
            if isinstance(item, dict) and isinstance(item.get("title"), (str, type(None))) and isinstance(
                    item.get("body"), (str, type(None))) and isinstance(item.get("url"), str) and (
                    "title" in item or "body" in item):
                by_line[n] = dedup.check_and_add(item.get("title"), item.get("body"), item["url"])
    records = {r["line"]: r for r in tiny["decisions"]}
    assert len(by_line) == len(GOOD) + 1  # and the too-short item
    for n, verdict in by_line.items():
        r = records[n]
        assert r["status"] == verdict.status
        assert r["tier"] == verdict.tier
        assert r["distance"] == verdict.distance
        assert r["original"] == (verdict.original.url if verdict.original else None)


def test_stdin_gzip_and_jobs_give_identical_decisions(tiny: dict[str, Any], tmp_path: Path) -> None:
    data = tiny["src"].read_bytes()
    ok(run("dedup", "-", "--index", tmp_path / "a.sqlite3", "--decisions", tmp_path / "a.jsonl.gz",
           "-o", "-", stdin=data))
    gz = tmp_path / "items.jsonl.gz"
    gz.write_bytes(gzip.compress(data))
    proc = ok(run("dedup", gz, "--index", tmp_path / "b.sqlite3", "--decisions", "-", "--jobs", "2",
                  "-o", tmp_path / "kept.jsonl.gz"))
    assert read_decisions(tmp_path / "a.jsonl.gz") == tiny["decisions"]
    assert [json.loads(line) for line in proc.stdout.splitlines()] == tiny["decisions"]
    with gzip.open(tmp_path / "kept.jsonl.gz", "rt", encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == GOOD[:3]
    assert "2 jobs" in proc.stderr


def test_inputs_that_cannot_be_read_exit_2_with_one_line(tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite3"
    fake_gz = tmp_path / "plain.jsonl.gz"
    fake_gz.write_text(dumps(GOOD[0]) + "\n", "utf-8")
    not_an_index = tmp_path / "notes.txt"
    not_an_index.write_text("hello\n" * 100, "utf-8")
    cases = [
        (("dedup", tmp_path / "missing.jsonl", "--index", index), "missing.jsonl"),
        (("dedup", fake_gz, "--index", index), "not gzip"),
        (("dedup", tmp_path, "--index", index), "directory"),
        (("dedup", fake_gz.with_name("x.jsonl"), "--index", not_an_index), "x.jsonl"),
    ]
    (tmp_path / "x.jsonl").write_text(dumps(GOOD[0]) + "\n", "utf-8")
    cases[-1] = (("dedup", tmp_path / "x.jsonl", "--index", not_an_index), "cannot open index")
    for args, fragment in cases:
        proc = run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and fragment in lines[0], proc.stderr


def test_truncated_gzip_keeps_what_it_read_and_exits_1(tmp_path: Path) -> None:
    data = b"".join(dumps({"url": f"http://t.example/{i}", "title": f"第{i}条新闻标题 关于城市交通的报道",
                           "body": STORY_ZH["body"].replace("38", str(i))}).encode() + b"\n" for i in range(60))
    gz = gzip.compress(data)
    src = tmp_path / "cut.jsonl.gz"
    src.write_bytes(gz[: len(gz) // 2])
    proc = run("dedup", src, "--index", tmp_path / "i.sqlite3", "--decisions", tmp_path / "d.jsonl")
    assert proc.returncode == 1, proc.stderr
    assert "broke off" in proc.stderr and "Traceback" not in proc.stderr
    decided = read_decisions(tmp_path / "d.jsonl")
    assert 0 < len(decided) < 60  # the lines before the cut were decided and written


# ------------------------------------------------------------------------------------------------
# Real articles: ../shared/corpus with made-up reposts; --jobs 1 and --jobs 2
# ------------------------------------------------------------------------------------------------


def _change_one_sentence(body: str) -> str:
    sentences = re.split(r"(?<=。)", body)
    longest = max(range(len(sentences)), key=lambda i: len(sentences[i]))
    sentences[longest] = "记者了解到，相关部门已经就此事展开调查，具体情况仍在进一步核实之中。"
    return "".join(sentences)


def corpus_items() -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """40 real articles, then title-suffix reposts of 3 and one-sentence-edited body reposts (new
    titles) of 3 long ones. Returns the items and repost URL → original URL per kind."""
    articles = [a for a in read_jsonl("zh/newsspider-2016.jsonl.gz") if len(a["body"]) > 200][:40]
    items = [{"url": a["url"], "title": a["title"], "body": a["body"]} for a in articles]
    title_reposts, body_reposts = {}, {}
    for i, a in enumerate(articles[:3]):
        url = f"http://repost.example/t{i}"
        items.append({"url": url, "title": a["title"].strip() + " - 网易新闻", "body": a["body"]})
        title_reposts[url] = a["url"]
    long_ones = sorted(articles, key=lambda a: -len(a["body"]))[:3]
    for i, a in enumerate(long_ones):
        url = f"http://repost.example/b{i}"
        items.append({"url": url, "title": f"转载第{i}篇：{'一则' * (i + 1)}完全改写的新标题", "body":
                      _change_one_sentence(a["body"])})
        body_reposts[url] = a["url"]
    return items, title_reposts, body_reposts


def test_real_articles_jobs_1_and_2_identical(tmp_path: Path) -> None:
    items, title_reposts, body_reposts = corpus_items()
    src = tmp_path / "news.jsonl.gz"
    src.write_bytes(gzip.compress(b"".join(dumps(i).encode() + b"\n" for i in items)))
    ok(run("dedup", src, "--index", tmp_path / "j1.sqlite3", "--decisions", tmp_path / "j1.jsonl", "--jobs", "1"))
    ok(run("dedup", src, "--index", tmp_path / "j2.sqlite3", "--decisions", tmp_path / "j2.jsonl", "--jobs", "2"))
    one, two = read_decisions(tmp_path / "j1.jsonl"), read_decisions(tmp_path / "j2.jsonl")
    assert one == two
    assert len(one) == len(items)
    by_url = {r["url"]: r for r in one}
    for url, original in title_reposts.items():
        r = by_url[url]
        assert (r["status"], r["tier"], r["original"]) == ("duplicate", "title", original), r
    # Replacing a whole sentence can move a body fingerprint past 3 bits (an engine matter, measured
    # by the benchmarks): the command line must report what the engine decides (checked below), and
    # a caught one must name the right original in the body tier (or the sentence tier, on by default).
    caught = [by_url[url] for url in body_reposts if by_url[url]["status"] != "new"]
    assert caught, [by_url[url] for url in body_reposts]
    def story_of(url: str) -> str:  # an original that is itself a copy of an earlier article stands for it
        r = by_url.get(url)
        return story_of(r["original"]) if r is not None and r["status"] == "duplicate" else url

    for r in caught:
        assert (r["status"], r["original"]) == ("duplicate", story_of(body_reposts[r["url"]])), r
        assert r["tier"] == "sentence" or (r["tier"] == "body" and 0 <= r["distance"] <= 3), r
    # the real articles themselves: the engine (in process) must agree line by line
    with Deduplicator.open(str(tmp_path / "engine.sqlite3")) as dedup:
        for item, r in zip(items, one, strict=True):
            v = dedup.check_and_add(item["title"], item["body"], item["url"])
            assert (r["status"], r["tier"], r["distance"]) == (v.status, v.tier, v.distance), r


# ------------------------------------------------------------------------------------------------
# Maintenance subcommands
# ------------------------------------------------------------------------------------------------


def _stats(index: Path) -> dict[str, Any]:
    return json.loads(ok(run("stats", "--index", index, "--json")).stdout)


def count(index: Path) -> int:
    """Entries of the default namespace, read in process (fewer subprocesses keep the tests fast)."""
    idx = open_index(str(index), readonly=True)
    try:
        return idx.count()
    finally:
        idx.close()


def test_stats_check_explain_export(tiny: dict[str, Any], tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite3"
    index.write_bytes(tiny["index"].read_bytes())
    data = _stats(index)
    assert data["entries"] == 3 and data["decisions"] == 2
    assert data["params"]["bits"] == 64 and data["file_size"] > 0
    text = ok(run("stats", "--index", index)).stdout
    assert str(index) in text and re.search(r"'default'\s+3 entries\s+2 decisions", text), text

    # check: the repost's verdict without adding it, and the nearest entries with shared words
    repost = repost_with_suffix(STORY_ZH)
    proc = ok(run("check", "--index", index, "--title", repost["title"], "--body", repost["body"]))
    assert proc.stdout.startswith("verdict: duplicate (title tier"), proc.stdout
    assert GOOD[0]["url"] in proc.stdout and "shared title words: " in proc.stdout
    assert "地铁" in proc.stdout.split("shared title words: ")[1].splitlines()[0]
    proc = ok(run("check", "--index", index, "--item", dumps({"headline": "x", **GOOD[4]}), "--json"))
    report = json.loads(proc.stdout)
    assert report["verdict"]["status"] == "duplicate" and report["verdict"]["tier"] == "body"
    assert report["verdict"]["original"]["url"] == GOOD[1]["url"]
    assert any(n["tier"] == "body" and n["entry"]["url"] == GOOD[1]["url"] for n in report["nearest"])
    item_file = tmp_path / "item.json"
    item_file.write_text(dumps({"title": "完全无关的一条新闻标题 关于天文观测", "body": "今晚将出现流星雨，"
                                "天文爱好者可在郊外观测，预计每小时可见流星数十颗，最佳观测时间为凌晨两点。"}), "utf-8")
    report = json.loads(ok(run("check", "--index", index, "--item-file", item_file, "--json")).stdout)
    assert report["verdict"]["status"] == "new" and report["query"]["title_features"]
    assert count(index) == 3  # check adds nothing

    # explain
    proc = ok(run("explain", GOOD[3]["url"], "--index", index))
    assert "duplicate" in proc.stdout and "title tier" in proc.stdout and GOOD[0]["url"] in proc.stdout
    data = json.loads(ok(run("explain", GOOD[4]["url"], "--index", index, "--json")).stdout)
    assert (data["status"], data["tier"], data["original"]["url"]) == ("duplicate", "body", GOOD[1]["url"])
    assert 0 <= data["distance"] <= 3
    assert "admitted as new" in ok(run("explain", GOOD[0]["url"], "--index", index)).stdout
    proc = run("explain", "http://never.example/", "--index", index)
    assert proc.returncode == 1 and "no decision" in proc.stderr

    # export
    rows = [json.loads(line) for line in ok(run("export", "--index", index)).stdout.splitlines()]
    assert [r["url"] for r in rows] == [g["url"] for g in GOOD[:3]]
    assert all(re.fullmatch(r"[0-9a-f]+", r["title_fp"]) for r in rows)
    assert rows[0]["title"].startswith("江城地铁")
    ok(run("export", "--index", index, "-o", tmp_path / "e.jsonl.gz"))
    with gzip.open(tmp_path / "e.jsonl.gz", "rt", encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == rows


def test_forget_purge_reset_import(tiny: dict[str, Any], tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite3"
    ok(run("import", tiny["src"], "--index", index, "-q"))
    assert count(index) == 3
    proc = ok(run("import", tiny["src"], "--index", index, "-q"))  # everything is known now
    assert re.search(r"duplicate\s+5\b", proc.stderr), proc.stderr

    ok(run("forget", GOOD[2]["url"], "--index", index))
    assert count(index) == 2
    proc = run("forget", GOOD[2]["url"], "--index", index)
    assert proc.returncode == 1 and "no entry" in proc.stderr
    first = json.loads(ok(run("export", "--index", index)).stdout.splitlines()[0])
    assert f"entry #{first['id']}" in ok(run("forget", first["id"], "--index", index)).stdout
    assert count(index) == 1

    # purge: two entries first seen 40 days ago go, the fresh one stays
    idx = open_index(str(index))
    old = time.time() - 40 * 86400
    idx.add([(0x0F0F, 0xF0F0, "http://old.example/1", "old one", old),
             (0x1234, 0x4321, "http://old.example/2", "old two", old)])
    idx.close()
    assert count(index) == 3
    assert "purged 2 entries" in ok(run("purge", "--older-than", "30", "--index", index)).stdout
    assert count(index) == 1

    # reset: refuses without a terminal, asks on one, --yes does it
    proc = run("reset", "--index", index)
    assert proc.returncode == 2 and "--yes" in proc.stderr
    out, status = _run_on_tty([str(SCRIPT), "reset", "--index", str(index)], answer=b"n\n")
    assert "[y/N]" in out and status == 1
    assert count(index) == 1
    ok(run("reset", "--index", index, "--yes"))
    assert count(index) == 0


def _run_on_tty(argv: list[str], answer: bytes = b"", timeout: float = 30) -> tuple[str, int]:
    """Run with stdin/stdout/stderr on a pseudo-terminal; type ``answer``; return output and status."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks, sent, deadline = [], False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
            if answer and not sent and b"[y/N]" in b"".join(chunks):
                os.write(master, answer)
                sent = True
        elif proc.poll() is not None:
            break
    status = proc.wait(timeout=5)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace"), status


def test_progress_bar_only_on_a_terminal(tiny: dict[str, Any], tmp_path: Path) -> None:
    out, status = _run_on_tty([str(SCRIPT), "dedup", str(tiny["src"]), "--index", str(tmp_path / "p.sqlite3"),
                               "-q"])
    assert status == 0, out
    assert "\r" in out and "items/s" in out and "%" in out  # the bar, with a percentage for a file
    # (piped runs elsewhere assert there is no "\r" in stderr)


def test_every_subcommand_has_help_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for name in cli.COMMANDS:
        with pytest.raises(SystemExit) as exc:
            cli.main([name, "--help"])
        assert exc.value.code == 0
        out = capsys.readouterr().out
        assert f"scrapy-simhash {name}" in out and "examples:" in out, name
        # a default is shown once, and never as "None"
        assert "(default: None)" not in out and not re.search(r"\(default:[^)]*\)\s*\(default:", out), out
    assert "--index" in ok(run("stats", "--help")).stdout


def dedup_jobs_2_recording_transactions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], lines: list[str],
                                        delay: Callable[[int], float]) -> list[int]:
    """``dedup --jobs 2`` of ``lines`` whose transaction number k (from 1) takes ``delay(k)`` seconds
    more: the size of each transaction; the run's exit code and decisions' order are checked."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(line + "\n" for line in lines), "utf-8")
    sizes: list[int] = []
    decide_many = Deduplicator.decide_many

    def slow(self: Deduplicator, items: Any, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(items))
        time.sleep(delay(len(sizes)))
        return decide_many(self, items, *args, **kwargs)

    monkeypatch.setattr(Deduplicator, "decide_many", slow)
    code = cli.main(["dedup", str(src), "--index", str(tmp_path / "i.sqlite3"), "--jobs", "2", "-q",
                     "--no-progress", "--decisions", str(tmp_path / "d.jsonl")])
    capsys.readouterr()
    assert code == 0
    assert [r["line"] for r in read_decisions(tmp_path / "d.jsonl")] == list(range(1, len(lines) + 1))
    return sizes


def test_jobs_decide_what_the_workers_finished_during_a_commit_in_the_next_transaction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """With --jobs, the parent's commits are the serial part of a run: the lines the workers
    fingerprinted while one waited for its fsync (here a slow first commit) join the next
    transaction, beyond DECIDE_BATCH, in input order, each decided once."""
    from scrapy_simhash.cli import dedup as cli_dedup

    monkeypatch.setattr(cli_dedup, "DECIDE_BATCH_READY", 128)  # what 2 workers surely finish during the sleep
    n = 300
    lines = [dumps({"url": f"u{k}", "title": f"第{k}号公告 标题 {k * 7919}",
                    "body": f"{STORY_ZH['body']} 编号{k * 104729}。"}) for k in range(n)]
    # the first commit a busy disk's fsync: the workers finish the rest meanwhile
    sizes = dedup_jobs_2_recording_transactions(tmp_path, monkeypatch, capsys, lines, lambda k: 3 if k == 1 else 0)
    assert min(sizes[:-1]) >= cli_dedup.DECIDE_BATCH and max(sizes) == cli_dedup.DECIDE_BATCH_READY, sizes
    assert sum(sizes) == n


def test_jobs_a_run_paced_by_its_commits_takes_few_of_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Where the parent's transactions set the pace (here each takes 0.3 s more: the workers are
    always ahead), a transaction takes every answered line up to DECIDE_BATCH_READY: 1,100 lines in
    a handful of commits (at most 128 lines a transaction: 9), in input order, each decided once."""
    n = 1100
    lines = [dumps({"url": f"u{k}", "title": f"Notice {k} about lot {k * 7919}",
                    "body": f"{STORY_EN['body'][:300]} Lot {k * 104729}."}) for k in range(n)]
    sizes = dedup_jobs_2_recording_transactions(tmp_path, monkeypatch, capsys, lines, lambda k: 0.3)
    assert sum(sizes) == n and len(sizes) <= 6, sizes


def test_jobs_read_ahead_holds_a_full_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """With --jobs, the lines read ahead of those decided hold a whole DECIDE_BATCH_READY transaction
    and the chunks the workers are on: while the first commit waits (a busy disk's fsync), the
    workers finish more than a transaction's worth, and the next one takes DECIDE_BATCH_READY."""
    from scrapy_simhash.cli import dedup as cli_dedup

    # the first transaction takes what is ready when the index is open, at most DECIDE_BATCH_READY:
    # past it, more than DECIDE_BATCH_READY lines are left for the second
    n = 2 * cli_dedup.DECIDE_BATCH_READY + 300
    lines = [dumps({"url": f"u{k}", "title": f"Notice {k} about lot {k * 7919}",
                    "body": f"{STORY_EN['body'][:300]} Lot {k * 104729}."}) for k in range(n)]
    sizes = dedup_jobs_2_recording_transactions(tmp_path, monkeypatch, capsys, lines, lambda k: 8 if k == 1 else 0)
    assert sizes[1] == cli_dedup.DECIDE_BATCH_READY and sum(sizes) == n, sizes


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads a thread's CPU time from /proc")
def test_jobs_pool_does_not_spin_while_answers_wait_to_be_read(tmp_path: Path) -> None:
    """The pool's threads sleep while its answers wait for a parent busy with the GIL between them:
    the CPU they take follows the answers, not how long the answers wait. A pool thread that spins
    while answers wait (CPython's ``multiprocessing.Pool``'s worker handler did) takes ten times more
    when the parent takes ten times longer over each answer."""
    (tmp_path / "answers.py").write_text("def big(n):\n    return [bytes(n)]\n", "utf-8")
    program = """
import json, os, threading, time
from answers import big
from scrapy_simhash.workers.pool import InOrder, WorkerPool
def pool_cpu():
    total = 0.0
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and thread.native_id is not None:
            stat = open(f"/proc/self/task/{thread.native_id}/stat").read().rsplit(")", 1)[1].split()
            total += (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return total
pool = WorkerPool(2)
used = []
for busy in (0.0002, 0.002):
    before = pool_cpu()
    for answer in InOrder(pool, big, [20000] * 1000, 64).batches(1, 1):  # 20 kB answers
        end = time.perf_counter() + busy  # the parent holds the GIL meanwhile
        while time.perf_counter() < end:
            pass
    used.append(pool_cpu() - before)
pool.finish()
print(json.dumps(used))
"""
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    quick, slow = json.loads(proc.stdout.splitlines()[-1])
    assert slow < 2 * quick + 0.05, (quick, slow)  # 1.8 s more of waiting answers: no more CPU


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="needs os.getpriority")
@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_jobs_workers_run_nicer_than_the_parent(tmp_path: Path, start: str) -> None:
    """The parent's check-and-adds are the serial part of a --jobs run: its workers run
    WORKER_NICE nicer, forked (no other thread) or spawned (another thread runs)."""
    from scrapy_simhash.workers.pool import WORKER_NICE

    src = tmp_path / "in.jsonl"
    src.write_text("".join(dumps({"url": f"u{k}", "title": f"第{k}号公告 标题", "body": f"{STORY_ZH['body']} {k}。"})
                           + "\n" for k in range(100)), "utf-8")
    program = f"""
import json, multiprocessing, os, threading
from scrapy_simhash import cli
from scrapy_simhash.engine import Deduplicator
if {start!r} == "spawn":
    threading.Thread(target=threading.Event().wait, args=(60,), daemon=True).start()
seen = set()
decide_many = Deduplicator.decide_many
def looking(self, *args, **kwargs):
    seen.update(os.getpriority(os.PRIO_PROCESS, c.pid) for c in multiprocessing.active_children())
    return decide_many(self, *args, **kwargs)
Deduplicator.decide_many = looking
code = cli.main(["dedup", {str(src)!r}, "--index", {str(tmp_path / "i.sqlite3")!r}, "--jobs", "2", "-q",
                 "--no-progress"])
print(json.dumps([code, os.getpriority(os.PRIO_PROCESS, 0), sorted(seen)]))
"""
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    code, parent, seen = json.loads(proc.stdout.splitlines()[-1])
    assert code == 0
    assert seen == [min(parent + WORKER_NICE, 19)], (parent, seen)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["dedup", "x.jsonl"], ["nonsense"], ["check", "--index", "i.sqlite3"],
                 ["purge", "--index", "i.sqlite3", "--older-than", "-3"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2, argv
    capsys.readouterr()


# ------------------------------------------------------------------------------------------------
# `scrapy simhash` inside a project
# ------------------------------------------------------------------------------------------------


def make_project(root: Path, settings: str = "") -> Path:
    (root / "proj").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n", "utf-8")
    (root / "proj" / "__init__.py").write_text("", "utf-8")
    (root / "proj" / "settings.py").write_text(
        f'BOT_NAME = "proj"\nSPIDER_MODULES = []\nADDONS = {{"scrapy_simhash.Addon": 300}}\n{settings}', "utf-8")
    return root


SCRAPY = [sys.executable, "-W", "error::scrapy.exceptions.ScrapyDeprecationWarning", "-m", "scrapy"]


def test_scrapy_simhash_inside_a_project_uses_its_index(tiny: dict[str, Any], tmp_path: Path) -> None:
    root = make_project(tmp_path / "p1", 'SIMHASH_BODY_FIELD = ["content", "body"]\n')
    proc = ok(run("simhash", "dedup", tiny["src"], "--decisions", "d.jsonl", cwd=root, cmd=SCRAPY))
    decided = read_decisions(root / "d.jsonl")
    # the project's SIMHASH_BODY_FIELD is the default of --body-field: its names are the ones looked for
    assert "no title or body (looked for title, content, body): 1" in proc.stderr  # counted in the summary
    assert [{**r, "error": None} for r in decided] == [{**r, "error": None} for r in tiny["decisions"]]
    assert "ScrapyDeprecationWarning" not in proc.stderr
    stats = json.loads(ok(run("simhash", "stats", "--json", cwd=root, cmd=SCRAPY)).stdout)
    assert Path(stats["location"]) == (root / ".scrapy" / "simhash" / "index.sqlite3").resolve()
    assert stats["entries"] == 3
    text = ok(run("simhash", "stats", cwd=root, cmd=SCRAPY)).stdout
    assert "index.sqlite3" in text and "3 entries" in text
    # -s before the subcommand overrides a setting, as for any Scrapy command
    other = json.loads(ok(run("simhash", "-s", "SIMHASH_NAMESPACE=other", "stats", "--json", cwd=root,
                              cmd=SCRAPY)).stdout)
    assert other["namespace"] == "other" and other["entries"] == 0
    help_text = ok(run("simhash", "check", "--help", cwd=root, cmd=SCRAPY)).stdout
    assert "scrapy simhash check" in help_text and "examples:" in help_text


def test_scrapy_simhash_reads_simhash_index_url(tmp_path: Path) -> None:
    elsewhere = tmp_path / "shared-index.sqlite3"
    root = make_project(tmp_path / "p2", f"SIMHASH_INDEX_URL = 'sqlite:///{elsewhere}'\n")
    missing = run("simhash", "stats", cwd=root, cmd=SCRAPY)
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    src = tmp_path / "items.jsonl"
    src.write_text("".join(dumps(g) + "\n" for g in GOOD), "utf-8")
    ok(run("simhash", "import", src, "-q", cwd=root, cmd=SCRAPY))
    assert json.loads(ok(run("stats", "--index", elsewhere, "--json")).stdout)["entries"] == 3


# ------------------------------------------------------------------------------------------------
# Exports as Scrapy writes them
# ------------------------------------------------------------------------------------------------

EXPORT_SPIDER = '''
import json
import scrapy


class Export(scrapy.Spider):
    name = "export"
    start_urls = ["data:,"]

    def parse(self, response):
        with open(self.settings["ITEMS_FILE"], encoding="utf-8") as f:
            yield from json.load(f)
'''


@pytest.fixture(scope="module")
def scrapy_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny GOOD items, and items long enough to cross the reader's chunks, exported by a real
    ``scrapy crawl -O items.json -O items.jl`` (offline: one data: page)."""
    root = make_project(tmp_path_factory.mktemp("export"), 'SPIDER_MODULES = ["proj.spiders"]\n')
    (root / "proj" / "spiders").mkdir()
    (root / "proj" / "spiders" / "__init__.py").write_text(EXPORT_SPIDER, "utf-8")
    long_items = [{"url": f"http://l.example/{n}", "title": f"{STORY_EN['title']} {n}",
                   "body": STORY_EN["body"] * (60 + n) + STORY_ZH["body"] * (30 + n)} for n in range(6)]
    items = [*GOOD, *long_items, {**long_items[2], "url": "http://l.example/copy"}]
    (root / "items-in.json").write_text(dumps(items), "utf-8")
    proc = run("crawl", "export", "-O", "items.json", "-O", "items.jl", "-s", f"ITEMS_FILE={root / 'items-in.json'}",
               "-s", "SIMHASH_ENABLED=False", cwd=root, cmd=SCRAPY, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (root / "items.json").read_bytes().startswith(b"[")
    return {"json": root / "items.json", "jl": root / "items.jl", "count": len(items)}  # type: ignore[dict-item]


def dedup_decisions(src: Path, tmp_path: Path, *extra: Any) -> tuple[list[dict[str, Any]], str]:
    index = tmp_path / f"{src.name}.sqlite3"
    proc = ok(run("dedup", src, "--index", index, "--decisions", tmp_path / f"{src.name}.decisions", *extra))
    return read_decisions(tmp_path / f"{src.name}.decisions"), proc.stderr


def test_a_scrapy_json_array_export_gives_the_same_decisions_as_json_lines(
        scrapy_exports: dict[str, Path], tmp_path: Path) -> None:
    from_lines, lines_summary = dedup_decisions(scrapy_exports["jl"], tmp_path)
    assert len(from_lines) == scrapy_exports["count"] and not any(d["status"] == "error" for d in from_lines)
    assert "duplicate" in [d["status"] for d in from_lines]
    assert "input      items.jl: JSON lines" in lines_summary.replace(str(scrapy_exports["jl"]), "items.jl")
    variants = {"array": scrapy_exports["json"]}
    gz = tmp_path / "items.json.gz"
    gz.write_bytes(gzip.compress(scrapy_exports["json"].read_bytes()))
    variants["array.gz"] = gz
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + scrapy_exports["json"].read_bytes())
    variants["array with BOM"] = bom
    bom_lines = tmp_path / "bom.jsonl"
    bom_lines.write_bytes(b"\xef\xbb\xbf" + scrapy_exports["jl"].read_bytes())
    variants["lines with BOM"] = bom_lines
    for what, src in variants.items():
        decided, summary = dedup_decisions(src, tmp_path)
        assert decided == from_lines, what
        kind = "JSON lines" if "lines" in what else "a JSON array"
        assert f"input      {src}: {kind}" + (", gzip" if what.endswith(".gz") else "") in summary, summary
        assert f"dedup: {scrapy_exports['count']} {'lines' if 'lines' in what else 'items'}" in summary


def test_a_line_longer_than_the_cap_is_counted_and_skipped(tmp_path: Path) -> None:
    src = tmp_path / "long.jsonl"
    huge = dumps({"url": "http://h.example/huge", "title": STORY_EN["title"], "body": "x" * 3_000_000})
    src.write_text("\n".join([dumps(GOOD[0]), huge, dumps(GOOD[1])]) + "\n", "utf-8")
    decided, summary = dedup_decisions(src, tmp_path, "--max-line-bytes", 1_000_000)
    assert [d["status"] for d in decided] == ["new", "error", "new"]
    assert decided[1]["line"] == 2 and "longer than --max-line-bytes (1,000,000)" in decided[1]["error"]
    assert re.search(r"^line 2: 3,000,\d+ bytes, longer than --max-line-bytes", summary, re.M), summary
    # In an array the element's end cannot be found without parsing it: the run stops there, exit 1.
    array = tmp_path / "long.json"
    array.write_text(f"[{dumps(GOOD[0])}, {huge}, {dumps(GOOD[1])}]", "utf-8")
    proc = run("dedup", array, "--index", tmp_path / "a.sqlite3", "--max-line-bytes", 1_000_000)
    assert proc.returncode == 1 and "item 2 of the JSON array is longer than --max-line-bytes" in proc.stderr
    assert "kept               1" in proc.stderr and "Traceback" not in proc.stderr


def test_a_broken_json_array_keeps_what_it_read_and_exits_1(tmp_path: Path) -> None:
    src = tmp_path / "broken.json"
    src.write_text(f"[{dumps(GOOD[0])},\n{dumps(GOOD[1])[:-9]}", "utf-8")  # cut in the second item
    proc = run("dedup", src, "--index", tmp_path / "b.sqlite3")
    assert proc.returncode == 1 and "broken JSON array at item 2" in proc.stderr, proc.stderr
    assert "kept               1" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("argv", [["stats", "--json"], ["stats"], ["export"], ["explain", GOOD[3]["url"]],
                                  ["dedup", "-", "-o", "-"]])
def test_a_closed_stdout_ends_quietly(tiny: dict[str, Any], tmp_path: Path, argv: list[str]) -> None:
    """``scrapy-simhash stats --json | head``: the reader went away; no traceback."""
    index = tmp_path / "copy.sqlite3"
    if "dedup" not in argv:  # dedup writes the new items of a fresh index
        shutil.copy(tiny["index"], index)
    proc = subprocess.Popen([str(SCRIPT), *argv, "--index", str(index)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # type: ignore[union-attr]
    _, err = proc.communicate(tiny["src"].read_bytes() if "dedup" in argv else b"", timeout=60)
    assert proc.returncode == 1 and b"Traceback" not in err and b"Exception ignored" not in err, err.decode()


def test_forget_a_dropped_url_removes_its_decision(tiny: dict[str, Any], tmp_path: Path) -> None:
    index = tmp_path / "copy.sqlite3"
    shutil.copy(tiny["index"], index)
    dropped = GOOD[3]["url"]
    assert "dropped as a duplicate" in ok(run("explain", dropped, "--index", index)).stdout
    assert "its decision" in ok(run("forget", dropped, "--index", index)).stdout
    assert run("explain", dropped, "--index", index).returncode == 1  # nothing stale left
    again = run("forget", dropped, "--index", index)
    assert again.returncode == 1 and "no entry or decision" in again.stderr


def test_scrapy_simhash_outside_a_project_creates_no_directory(tmp_path: Path) -> None:
    outside = tmp_path / "nowhere"
    outside.mkdir()
    proc = run("simhash", "stats", cwd=outside, cmd=SCRAPY)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert list(outside.iterdir()) == [], "a read-only command created files or directories"


def _numbered_notices(tmp_path: Path, n: int) -> Path:
    """``n`` JSON lines of one story, numbered: seconds of work for ``dedup --jobs 2`` at 20,000."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(dumps({"url": f"u{k}", "title": f"第{k}号公告 标题", "body": f"{STORY_ZH['body']} {k}。"})
                           + "\n" for k in range(n)), "utf-8")
    return src


def _jobs_run(tmp_path: Path, *options: str, **popen: Any) -> tuple[subprocess.Popen[str], set[int]]:
    """``dedup --jobs 2`` of 20,000 lines in a session of its own, with SIGINT at its default (a process
    started in a shell's background ignores it), once its two workers are up: it and their pids."""
    restore = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
               "os.execv(sys.argv[1], sys.argv[1:])")
    src = _numbered_notices(tmp_path, 20000)
    proc = subprocess.Popen([sys.executable, "-c", restore, str(SCRIPT), "dedup", str(src), "--index",
                             str(tmp_path / "i.sqlite3"), "--jobs", "2", "--no-progress", *options],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            **popen)
    try:
        deadline = time.monotonic() + 60
        while len(workers := children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(workers) == 2 and proc.poll() is None
    except BaseException:
        _end_session(proc)
        raise
    return proc, workers


def _end_session(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 9)
    proc.wait()


def _survivors(workers: set[int]) -> list[int]:
    """The workers still running 10 s from now, or none as soon as they are all gone."""
    deadline = time.monotonic() + 10
    while any(running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [w for w in workers if running(w)]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize(("sig", "group"), [("SIGTERM", False), ("SIGINT", True)], ids=["sigterm", "ctrl-c"])
def test_jobs_stopped_by_a_signal_leave_no_worker_behind(tmp_path: Path, sig: str, group: bool) -> None:
    """``SIGTERM`` to the command, or Ctrl-C (``SIGINT`` to its whole process group), while its
    workers fingerprint: the command and every worker are gone soon after."""
    import signal

    proc, workers = _jobs_run(tmp_path, "-q", env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        time.sleep(1)  # working
        if group:
            os.killpg(proc.pid, getattr(signal, sig))
        else:
            proc.send_signal(getattr(signal, sig))
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a hang (seen once in CI): where its threads wait, from faulthandler
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"dedup --jobs 2 still ran 30 s after {sig}; its threads:\n{err}")
        assert not _survivors(workers)
    finally:
        _end_session(proc)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_jobs_stopped_early_end_their_workers_under_a_handler_that_only_sets_a_flag(tmp_path: Path) -> None:
    """A program that runs ``dedup --jobs`` in-process with a Python SIGTERM handler that only sets
    a flag (Twisted's reactor, as under pytest-twisted, installs one): a run that stops early (here
    Ctrl-C in its first commit) still ends, with no worker behind. A forked worker that kept the
    parent's handler would survive the SIGTERM that ends it (``Pool.terminate``'s, or
    :mod:`multiprocessing`'s at exit) and the run would wait for it forever."""
    src = _numbered_notices(tmp_path, 20000)
    program = f"""
import os, signal, sys, threading
flag = []
signal.signal(signal.SIGTERM, lambda *_: flag.append(1))
from scrapy_simhash import cli
from scrapy_simhash.engine import Deduplicator
assert threading.active_count() == 1  # so the workers are forked
def interrupted(self, *args, **kwargs):
    raise KeyboardInterrupt
Deduplicator.decide_many = interrupted
code = cli.main(["dedup", {str(src)!r}, "--index", {str(tmp_path / "i.sqlite3")!r}, "--jobs", "2", "-q",
                 "--no-progress"])
print("exit", code, flush=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        left = children(proc.pid)
        os.killpg(proc.pid, 9)
        proc.communicate()
        pytest.fail(f"the run did not end; workers still there: {sorted(left)}")
    assert out.startswith("exit "), (out, err)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 0)
        time.sleep(1)
        os.killpg(proc.pid, 0)
        pytest.fail("a worker outlived the run")


def test_jobs_take_ctrl_c_between_transactions_not_inside_the_pools_locks(tmp_path: Path) -> None:
    """Ctrl-C while ``dedup --jobs`` waits on its pool: not raised there, where it can leave a lock that
    the pool's threads share held, but between transactions; and the workers answer what they were
    sent instead of being killed, which can leave the answers' queue locked by a worker killed while
    it sent one. Either made the pool's clean-up wait forever (the rare hang of the signal test above,
    reproduced under load). The run ends with its summary and status 130."""
    src = _numbered_notices(tmp_path, 3000)
    program = f"""
import os, signal, time
from multiprocessing.process import BaseProcess
from scrapy_simhash import cli
from scrapy_simhash.cli.lines import LineWorker
from scrapy_simhash.workers import pool
signal.signal(signal.SIGINT, signal.default_int_handler)  # ignored in a process started in a shell's background
line = LineWorker.__call__
def slow_line(self, numbered):  # workers slower than the decisions: the run waits on the pool (forked: inherited)
    time.sleep(0.002)
    return line(self, numbered)
LineWorker.__call__ = slow_line
calls, raised_inside, killed = [0], [], []
for name in ("terminate", "kill"):
    def recording(self, _original=getattr(BaseProcess, name)):
        killed.append(self.pid)
        return _original(self)
    setattr(BaseProcess, name, recording)
original = pool.wait
def wait(*args, **kwargs):
    calls[0] += 1
    try:
        if calls[0] == 1:  # Ctrl-C while the run waits for the workers' answers
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)
        return original(*args, **kwargs)
    except KeyboardInterrupt:
        raised_inside.append(calls[0])
        raise
pool.wait = wait
code = cli.main(["dedup", {str(src)!r}, "--index", {str(tmp_path / "i.sqlite3")!r}, "--jobs", "2", "-q",
                 "--no-progress"])
print("exit", code, "raised inside", raised_inside, "killed", killed, "calls", calls[0], flush=True)
"""
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert proc.stdout.startswith("exit 130 raised inside [] killed [] calls "), (proc.stdout, proc.stderr)
    assert "the summary covers the lines decided so far" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert int(proc.stdout.split()[-1]) < 100, "the run went on long after Ctrl-C"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_jobs_a_worker_killed_from_outside_ends_the_run_with_an_error(tmp_path: Path) -> None:
    """A ``dedup --jobs 2`` worker killed (the OOM killer, an operator): its lines are never answered,
    and the run waited for them forever. Now it stops: status 1, why, and what was decided, in the index."""
    import signal

    proc, workers = _jobs_run(tmp_path, "--decisions", str(tmp_path / "decisions.jsonl"))
    try:
        time.sleep(0.5)  # both busy: 20,000 lines take seconds
        os.kill(min(workers), signal.SIGKILL)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("dedup --jobs 2 still waits 30 s after one of its workers was killed")
    finally:
        _end_session(proc)
    assert "Traceback" not in err, err
    decided = sum(1 for line in (tmp_path / "decisions.jsonl").read_text("utf-8").splitlines() if line)
    if proc.returncode == 0:  # the killed worker was between two calls: it held no line, none is lost
        assert decided == 20000, err
    else:
        assert proc.returncode == 1, err
        assert f"a --jobs worker process died (killed, or out of memory?): lines after line {decided:,} were " \
               "not decided" in err, err
        assert 0 < decided < 20000
    assert not _survivors(workers), "a worker outlived the run"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_jobs_stopped_with_a_worker_that_never_answers_still_end(tmp_path: Path) -> None:
    """Ctrl-C to a ``dedup --jobs 2`` run one of whose workers never answers (stopped here, SIGSTOP):
    the run waits ``FINISH_TIMEOUT`` for its answers, then kills its workers and ends, status 130.
    ``Pool.terminate``'s SIGTERM would stay pending on the stopped worker and its join wait forever."""
    import signal

    from scrapy_simhash.workers.pool import FINISH_TIMEOUT

    proc, workers = _jobs_run(tmp_path, "-q", env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        time.sleep(0.5)
        os.kill(min(workers), signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=FINISH_TIMEOUT + 20)
        except subprocess.TimeoutExpired:  # where its threads wait, from faulthandler
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"dedup --jobs 2 still ran {FINISH_TIMEOUT + 20:.0f} s after Ctrl-C with a stopped worker; "
                        f"its threads:\n{err}")
    finally:
        _end_session(proc)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert not _survivors(workers), "a worker outlived the run"
