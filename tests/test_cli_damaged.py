"""The command line on data it cannot trust: index rows holding values scrapy-simhash never writes
(SQLite columns of another type, a Redis counter that is text, a record with an impossible time),
inputs made of nothing (gzip files of blank lines, of ``{}``, of garbage), and an index of another
features version. Each is reported in one line (or counted) and skipped, or stops the command with
one line and a status: never a traceback, and the output stays proportional to the real items.

Commands run in process (:func:`scrapy_simhash.cli.main`: no interpreter start per command) except
where the console script itself is the point."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash import cli
from scrapy_simhash.index import IndexParams, SimhashIndexError, open_index
from scrapy_simhash.index.base import FEATURES_VERSION

from .conftest import STORY_EN, STORY_ZH, STORY_ZH_2, repost_with_suffix

SCRIPT = Path(sys.executable).parent / "scrapy-simhash"
ITEMS = [
    {"url": "http://a.example/1", **STORY_ZH},
    {"url": "http://a.example/2", **STORY_ZH_2},
    {"url": "http://a.example/3", **STORY_EN},
    {"url": "http://b.example/1", **repost_with_suffix(STORY_ZH)},  # a duplicate of entry #1: a decision
]


#: Stories unlike the items and each other, added after them to the Redis index.
NEWER = [
    {"url": f"http://c.example/{k}", "title": f"{place} council approves the {thing} budget for {year}",
     "body": f"The {place} council voted on {day} to fund the {thing}. " + " ".join(words) + "."}
    for k, (place, thing, year, day, words) in enumerate([
        ("Northfield", "bridge repair", 2031, "Monday", ["steel", "girders", "traffic", "detour", "contractor",
                                                         "inspection", "river", "crossing", "engineers"]),
        ("Lakeside", "school library", 2032, "Tuesday", ["books", "pupils", "reading", "shelves", "teachers",
                                                         "donation", "computers", "classroom", "literacy"]),
        ("Hillcrest", "water treatment", 2033, "Wednesday", ["pipes", "filters", "reservoir", "chlorine",
                                                             "pumping", "drought", "meters", "leaks", "utility"]),
        ("Brookhaven", "park lighting", 2034, "Thursday", ["lamps", "paths", "safety", "evening", "joggers",
                                                           "solar", "poles", "playground", "benches"]),
    ])
]


def jsonl(items: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(i, ensure_ascii=False).encode() + b"\n" for i in items)


class Run:
    """One in-process command: its status and what it printed."""

    def __init__(self, capsys: pytest.CaptureFixture[str], *argv: Any) -> None:
        self.status = cli.main([str(a) for a in argv])
        out = capsys.readouterr()
        self.out, self.err = out.out, out.err
        assert "Traceback" not in self.err and "unexpected" not in self.err, self.err
        assert "Traceback" not in self.out

    def __repr__(self) -> str:
        return f"status {self.status}\nstdout:\n{self.out}\nstderr:\n{self.err}"


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The items file and a SQLite index of them: 3 entries, 1 decision (item 4, a copy of entry #1)."""
    d = tmp_path_factory.mktemp("sound")
    src = d / "items.jsonl"
    src.write_bytes(jsonl(ITEMS))
    index = d / "index.sqlite3"
    assert cli.main(["import", str(src), "--index", str(index), "-q"]) == 0
    return src, index


# -- SQLite: columns that take any type -----------------------------------------------------------

#: kind → (SQL that damages entry #1, what the message names)
SQLITE_DAMAGE = {
    "url-blob": ("UPDATE entry SET url = CAST(url AS BLOB) WHERE id = 1", "entry #1: url is bytes"),
    "first_seen-text": ("UPDATE entry SET first_seen = 'yesterday' WHERE id = 1", "entry #1: first_seen is str"),
    "first_seen-9e18": ("UPDATE entry SET first_seen = 9e18 WHERE id = 1", "entry #1: first_seen is 9e+18"),
    # its title band rows gone with its fingerprint, else the open's band-row check may find them orphaned
    # and refuse the whole index (tests/test_tampered_files.py)
    "title_fp-text": ("DELETE FROM band WHERE fp = (SELECT title_fp FROM entry WHERE id = 1);"
                      " UPDATE entry SET title_fp = 'x' WHERE id = 1", "entry #1: title_fp is str"),
}


@pytest.fixture(params=list(SQLITE_DAMAGE))
def damaged(request: pytest.FixtureRequest, sound: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A copy of the sound index with entry #1 damaged one way; and what the message must name."""
    sql, named = SQLITE_DAMAGE[request.param]
    index = tmp_path / "damaged.sqlite3"
    index.write_bytes(sound[1].read_bytes())
    with sqlite3.connect(index) as conn:
        conn.executescript(sql)
    conn.close()
    yield index, named


def test_export_skips_a_damaged_entry_names_it_and_exits_2(capsys: pytest.CaptureFixture[str],
                                                           damaged: tuple[Path, str]) -> None:
    index, named = damaged
    run = Run(capsys, "export", "--index", index)
    assert run.status == 2, run  # the export is not the whole index: a damaged index's status
    assert [json.loads(line)["url"] for line in run.out.splitlines()] == [i["url"] for i in ITEMS[1:3]]
    assert "skipped 1 damaged row" in run.err and named in run.err, run


def test_report_leaves_damaged_rows_out_and_says_so(capsys: pytest.CaptureFixture[str], damaged: tuple[Path, str],
                                                    tmp_path: Path) -> None:
    index, named = damaged
    run = Run(capsys, "report", "--index", index, "-o", tmp_path / "r.html")
    assert run.status == 0, run
    assert "damaged rows" in run.err and named in run.err, run  # the entry, and the decision it is the original of
    assert "damaged entries or decisions" in (tmp_path / "r.html").read_text("utf-8")


def test_stats_leaves_a_damaged_time_out_of_oldest_and_newest(capsys: pytest.CaptureFixture[str],
                                                              damaged: tuple[Path, str]) -> None:
    index, named = damaged
    run = Run(capsys, "stats", "--index", index)
    assert run.status == 0 and "3 entries" in run.out, run
    data = json.loads(Run(capsys, "stats", "--index", index, "--json").out)
    if "first_seen" in named:
        assert named in run.err, run
        assert data["namespaces"]["default"]["damaged"] == 1
        assert isinstance(data["oldest"], float) and data["oldest"] < 1e11
    else:  # stats reads no other column
        assert "damaged" not in run.err


def test_explain_and_check_of_a_damaged_original_stop_with_one_line(capsys: pytest.CaptureFixture[str],
                                                                     damaged: tuple[Path, str]) -> None:
    index, named = damaged
    run = Run(capsys, "explain", ITEMS[3]["url"], "--index", index)
    assert run.status == 2 and run.err.count("\n") == 1 and named in run.err, run
    run = Run(capsys, "explain", ITEMS[2]["url"], "--index", index)  # a sound entry: found past the damaged one
    assert run.status == 0 and "admitted as new" in run.out, run
    run = Run(capsys, "check", "--index", index, "--item", json.dumps(ITEMS[1], ensure_ascii=False))
    assert run.status == 0 and run.out.startswith("verdict: duplicate"), run
    if "title_fp" not in named:  # (entry #1 cannot be found by its title fingerprint then)
        run = Run(capsys, "check", "--index", index, "--item", json.dumps(ITEMS[3], ensure_ascii=False))
        assert run.status == 2 and run.err.count("\n") == 1 and named in run.err, run


def test_dedup_names_a_damaged_original_by_id_and_counts_it(capsys: pytest.CaptureFixture[str],
                                                            damaged: tuple[Path, str], sound: tuple[Path, Path],
                                                            tmp_path: Path) -> None:
    index, named = damaged
    run = Run(capsys, "dedup", sound[0], "--index", index, "--decisions", tmp_path / "d.jsonl")
    assert run.status == 0, run
    records = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text("utf-8").splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3, 4]
    if "title_fp" in named:
        return  # entry #1 is found by its body then, or not at all: what the crawl decides, not the command line
    first = "entry #1" if "url" in named else ITEMS[0]["url"]  # by id when its URL is what is damaged
    assert [r["original"] for r in records] == [first, ITEMS[1]["url"], ITEMS[2]["url"], first]
    assert "damaged            2" in run.err and named in run.err, run


def test_a_damaged_row_read_without_a_callback_raises_the_index_error(damaged: tuple[Path, str]) -> None:
    index, named = damaged
    with open_index(str(index), readonly=True) as ix:
        with pytest.raises(SimhashIndexError, match=re.escape(named)):
            list(ix.entries())
        problems: list[str] = []
        assert [e.id for e in ix.entries(damaged=problems.append)] == [2, 3]
        assert len(problems) == 1 and named in problems[0]


def test_the_console_script_prints_no_traceback_for_a_damaged_file(sound: tuple[Path, Path], tmp_path: Path) -> None:
    index = tmp_path / "i.sqlite3"
    index.write_bytes(sound[1].read_bytes())
    with sqlite3.connect(index) as conn:
        conn.execute(SQLITE_DAMAGE["first_seen-9e18"][0])
    conn.close()
    for argv in (["export"], ["stats"], ["report", "-o", str(tmp_path / "r.html")]):
        proc = subprocess.run([str(SCRIPT), *argv, "--index", str(index)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr, proc.stderr
        assert "entry #1: first_seen is 9e+18, not a time" in proc.stderr


# -- Redis: counters and records ------------------------------------------------------------------

@pytest.fixture
def redis_index(url: str, sound: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                tmp_path: Path) -> tuple[str, Any]:
    """A Redis index of the items (on the test server, a fresh prefix), then of newer stories (so that
    the entries the tests damage are not among those the open spot-checks), and a raw client."""
    from tests.test_index_protocol import raw_redis

    assert cli.main(["import", str(sound[0]), "--index", url, "-q"]) == 0
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(jsonl(NEWER))
    assert cli.main(["import", str(newer), "--index", url, "-q"]) == 0
    capsys.readouterr()
    return url, raw_redis(url.split("?")[0], decode=False)


def _prefix(url: str) -> str:
    return url.rsplit("prefix=", 1)[1]


def test_redis_a_counter_that_is_text_stops_stats_and_report_with_one_line(
        capsys: pytest.CaptureFixture[str], redis_index: tuple[str, Any], tmp_path: Path) -> None:
    url, client = redis_index
    key = f"{_prefix(url)}:{{default}}:n"
    client.set(key, b"many")
    for argv in (["stats"], ["report", "-o", tmp_path / "r.html"]):
        run = Run(capsys, *argv, "--index", url)
        assert run.status == 2 and run.err.count("\n") == 1, run
        # refused at open, naming the check and the counter (index/redis/guard.py)
        assert "check 'counters readable'" in run.err and ":n is 'many'" in run.err, run
    run = Run(capsys, "export", "--index", url)  # a counter no open can read: refused in one line too
    assert run.status == 2 and run.err.count("\n") == 1 and "'many'" in run.err, run


def test_redis_damaged_records_and_time_buckets_are_skipped_and_named(
        capsys: pytest.CaptureFixture[str], redis_index: tuple[str, Any], tmp_path: Path) -> None:
    url, client = redis_index
    base = f"{_prefix(url)}:{{default}}:"
    raw = client.get(base + "e:1")
    client.set(base + "e:1", struct.pack(">d", 9e18) + raw[8:])  # first seen in no year
    client.set(base + "e:2", client.get(base + "e:2")[:5])  # cut short: no record of ours
    client.zadd(base + "hours", {b"soon": 1})
    run = Run(capsys, "export", "--index", url)
    assert run.status == 2, run
    assert [json.loads(line)["url"] for line in run.out.splitlines()] == [ITEMS[2]["url"]] + [i["url"] for i in NEWER]
    assert "skipped 3 damaged rows" in run.err and "time bucket str 'soon'" in run.err, run
    run = Run(capsys, "stats", "--index", url)
    assert run.status == 0 and "damaged rows" in run.err, run
    run = Run(capsys, "report", "--index", url, "-o", tmp_path / "r.html")
    assert run.status == 0 and "damaged rows" in run.err, run
    run = Run(capsys, "explain", ITEMS[3]["url"], "--index", url)  # its original is entry #1
    assert run.status == 2 and "its original entry #1: first_seen is 9e+18" in run.err, run


# -- inputs made of nothing -------------------------------------------------------------------------

def _dedup_gz(capsys: pytest.CaptureFixture[str], tmp_path: Path, data: bytes, *extra: Any) -> tuple[Run, Path]:
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(gzip.compress(data, 9))
    decisions = tmp_path / "d.jsonl"
    run = Run(capsys, "dedup", src, "--index", tmp_path / "i.sqlite3", "--decisions", decisions, "-o",
              tmp_path / "kept.jsonl", *extra)
    return run, decisions


def test_a_gzip_file_of_blank_lines_is_counted_not_decided(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    """10 KB of gzip holding ten million blank lines (and the items between them): the blank lines
    are counted in the summary, the items keep their line numbers, nothing else is written."""
    blank = b"\n" * 5_000_000 + b"  \t\r\n" * 1000 + b"\n" * 5_000_000
    data = blank + jsonl(ITEMS[:1]) + blank + jsonl(ITEMS[3:])
    run, decisions = _dedup_gz(capsys, tmp_path, data)
    assert run.status == 0, run
    assert len(gzip.compress(data, 9)) < 25_000
    records = [json.loads(line) for line in decisions.read_text("utf-8").splitlines()]
    first = 10_001_001
    assert [(r["line"], r["status"]) for r in records] == [(first, "new"), (2 * first, "duplicate")]
    assert "dedup: 20,002,002 lines" in run.err, run
    assert re.search(r"skipped +20,002,000  \(blank line: 20,002,000\)$", run.err, re.M), run


def test_a_gzip_file_of_empty_objects_is_counted_as_skipped(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    """Lines with neither a title nor a body (``{}``, a URL alone, empty fields) are counted as
    skipped with their reason: no decision line each, no report line each."""
    data = b"{}\n" * 30_000 + b'{"url": "http://x.example/", "title": "", "body": []}\n' * 1000 + jsonl(ITEMS[:1])
    run, decisions = _dedup_gz(capsys, tmp_path, data, "--jobs", "2")
    assert run.status == 0, run
    assert [json.loads(line)["line"] for line in decisions.read_text("utf-8").splitlines()] == [31_001]
    assert re.search(r"skipped +31,000  \(no title or body \(looked for title, body, content, text\): 31,000\)$",
                     run.err, re.M), run
    assert "line 1:" not in run.err  # skipped lines are not reported one by one


def test_a_flood_of_bad_lines_writes_a_bounded_number_of_error_decisions(capsys: pytest.CaptureFixture[str],
                                                                         tmp_path: Path) -> None:
    from scrapy_simhash.cli.common import MAX_ERROR_DECISIONS
    from scrapy_simhash.cli.dedup import MAX_REPORTED_BAD_LINES

    data = b"x\n" * 50_000 + jsonl(ITEMS[:1])
    run, decisions = _dedup_gz(capsys, tmp_path, data)
    assert run.status == 0, run
    records = [json.loads(line) for line in decisions.read_text("utf-8").splitlines()]
    assert len(records) == MAX_ERROR_DECISIONS + 1 and records[-1] == {**records[-1], "line": 50_001, "status": "new"}
    assert [r["line"] for r in records[:-1]] == list(range(1, MAX_ERROR_DECISIONS + 1))
    assert re.search(rf"errors +50,000  \(bad lines, see above or --decisions: the first {MAX_ERROR_DECISIONS:,} of",
                     run.err), run
    assert len([line for line in run.err.splitlines() if line.startswith("line ")]) == MAX_REPORTED_BAD_LINES


# -- an index of another features version ---------------------------------------------------------

def test_an_index_of_another_features_version_names_a_remedy_that_works(
        capsys: pytest.CaptureFixture[str], sound: tuple[Path, Path], tmp_path: Path) -> None:
    """Fingerprints of another version cannot be re-banded into ours: the message does not send the
    user to ``reband`` (which succeeds and changes nothing) but to building a new index from the
    items, and that command, run as the message gives it, works."""
    src = sound[0]
    old = tmp_path / "old.sqlite3"
    with open_index(str(old), params=IndexParams(title_bands=2, features_version="4")) as ix:
        ix.add([(1, 2, "http://old.example/", "old", 1.7e9)])
    run = Run(capsys, "dedup", src, "--index", old, "-q")
    assert run.status == 2 and run.err.count("\n") == 1, run
    assert "reband`" not in run.err and "re-band the index" not in run.err, run
    assert f"features version '4'; this one makes '{FEATURES_VERSION}'" in run.err, run
    command = run.err.split("`scrapy-simhash ", 1)[1].split("`", 1)[0]
    assert command == "import ITEMS.jsonl --index NEW_INDEX", command
    new = tmp_path / "new.sqlite3"
    run = Run(capsys, *command.replace("ITEMS.jsonl", str(src)).replace("NEW_INDEX", str(new)).split(), "-q")
    assert run.status == 0, run
    run = Run(capsys, "dedup", src, "--index", new, "--decisions", "-")
    assert run.status == 0 and [json.loads(line)["status"] for line in run.out.splitlines()] == ["duplicate"] * 4


def test_an_index_of_other_weighting_settings_names_them(capsys: pytest.CaptureFixture[str],
                                                         sound: tuple[Path, Path], tmp_path: Path) -> None:
    index = tmp_path / "k.sqlite3"
    assert Run(capsys, "import", sound[0], "--index", index, "--top-k", "32", "-q").status == 0
    run = Run(capsys, "dedup", sound[0], "--index", index, "-q")
    assert run.status == 2 and "top_k = 32 (SIMHASH_TOP_K / --top-k)" in run.err, run
    assert "open it with the settings it records" in run.err and "reband" not in run.err
    run = Run(capsys, "dedup", sound[0], "--index", index, "--top-k", "32", "--decisions", "-")
    assert run.status == 0 and [json.loads(line)["status"] for line in run.out.splitlines()] == ["duplicate"] * 4


def test_only_a_band_mismatch_is_sent_to_reband(capsys: pytest.CaptureFixture[str], sound: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    index = tmp_path / "b.sqlite3"
    with open_index(str(index), params=IndexParams(title_bands=2)):
        pass
    run = Run(capsys, "dedup", sound[0], "--index", index, "-q")
    assert run.status == 2 and "scrapy-simhash reband" in run.err, run
    assert Run(capsys, "reband", index, "--title-max-distance", "2").status == 0
    assert Run(capsys, "dedup", sound[0], "--index", index, "-q").status == 0



# -- other files the commands read ------------------------------------------------------------------

def test_unreadable_side_files_stop_with_one_line_naming_them(capsys: pytest.CaptureFixture[str],
                                                              sound: tuple[Path, Path], tmp_path: Path) -> None:
    """A ``--decisions`` file for ``report`` cut short or missing, an ``--item-file`` for ``check``
    that is broken gzip or nested past the parser: one line naming the file, status 2. Lines of a
    decisions file that are not UTF-8 are passed over like lines that are not JSON."""
    index = sound[1]
    cut = tmp_path / "d.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"line": 1, "status": "duplicate"}\n' * 100)[:40])
    for name in (cut, tmp_path / "missing.jsonl"):
        run = Run(capsys, "report", "--index", index, "-o", tmp_path / "r.html", "--decisions", name)
        assert run.status == 2 and run.err.count("\n") == 1 and f"cannot read {name}" in run.err, run
    not_utf8 = tmp_path / "latin1.jsonl"
    not_utf8.write_bytes(b'\xff\xfe{"status": "duplicate"}\n')
    assert Run(capsys, "report", "--index", index, "-o", tmp_path / "r.html", "--decisions", not_utf8).status == 0
    broken = tmp_path / "item.json.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000, "utf-8")
    for name, why in ((broken, f"cannot read {broken}"), (deep, "nested too deeply")):
        run = Run(capsys, "check", "--index", index, "--item-file", name)
        assert run.status == 2 and run.err.count("\n") == 1 and why in run.err, run
