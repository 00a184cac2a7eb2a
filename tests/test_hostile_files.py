"""Hostile index files, through the engine, the console script and real crawls.

Each file (pickle payloads in every column, SQLite that is not ours, truncated, another parameter
set or schema version, read-only) must give a clear error or a documented read-only behaviour: no code runs (the
payload would create a marker file if it were ever unpickled), nothing is overwritten (bytes are
compared before and after), no item is passed on as new, and a crawl closes with reason
``simhash_index_error`` when the index cannot be opened.

Tests run as root, where file permission bits do not stop writes: read-only files and directories
are made with ``chattr +i`` (skipped where chattr is not available); ``readonly=True`` opening is
covered in ``test_index_sqlite.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import pickle
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from sqlitedict import SqliteDict

from scrapy_simhash import Deduplicator
from scrapy_simhash.engine import required_params
from scrapy_simhash.index import IndexOpenError, ParameterMismatch, SimhashIndexError, open_index
from scrapy_simhash.index.sqlite.file import SCHEMA_VERSION
from tests.conftest import (
    REPO,
    STORY_EN,
    STORY_ZH,
    STORY_ZH_2,
    crawl_settings,
    refused_crawl,
    repost_with_suffix,
    run_crawl,
)

ITEMS = [{**s, "url": f"https://a.example/{n}"} for n, s in enumerate((STORY_ZH, STORY_ZH_2, STORY_EN))]


class Payload:
    """Unpickling this creates ``marker`` (the proof that code ran)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "PWNED"
    yield path
    assert not path.exists(), "a pickle payload from the file was executed"


def payload(marker: Path) -> bytes:
    return pickle.dumps(Payload(str(marker)))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(path: Path, *, but: str) -> list[str]:
    """Every schema object and row of the file as SQL, but the rows of table ``but``."""
    conn = sqlite3.connect(path)
    try:
        return [line for line in conn.iterdump() if not line.startswith(f'INSERT INTO "{but}"')]
    finally:
        conn.close()


def make_index(path: Path, **options: Any) -> Path:
    """A real index: three stories and one recorded duplicate decision."""
    with Deduplicator.open(f"sqlite:///{path}", **options) as dedup:
        for item in ITEMS:
            assert dedup.check_and_add(item["title"], item["body"], url=item["url"]).status == "new"
        repost = repost_with_suffix(STORY_ZH)
        assert dedup.check_and_add(repost["title"], repost["body"], url="https://b.example/0").status == "duplicate"
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("scrapy-simhash")
    exe = [str(script)] if script.exists() else [sys.executable, "-m", "scrapy_simhash.cli"]
    return subprocess.run([*exe, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def assert_cli_refuses(index: Path, tmp_path: Path, *commands: str) -> None:
    """Each command exits 2 with one clear line naming the file, never a traceback."""
    items = tmp_path / "items.jsonl"
    items.write_text('{"title": "t", "body": "b"}\n', encoding="utf-8")
    argv = {"dedup": ["dedup", str(items), "--no-progress"], "stats": ["stats"], "export": ["export"],
            "check": ["check", "--title", STORY_ZH["title"], "--body", STORY_ZH["body"]]}
    for command in commands:
        result = cli(*argv[command], "--index", str(index))
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and str(index) in result.stderr, (command, result.stderr)


async def assert_crawl_closes(index: Path) -> str:
    """A crawl on this index passes nothing on and closes with ``simhash_index_error``; returns the reason."""
    reason = await refused_crawl(crawl_settings(index), ITEMS)
    return reason


def poison(path: Path, value: bytes, *, keep: frozenset[tuple[str, str]] = frozenset(),
           skip_tables: tuple[str, ...] = ()) -> int:
    """Write ``value`` into every column of every table (``UPDATE OR IGNORE``, so unique keys keep
    one row each), except INTEGER PRIMARY KEYs (rowids cannot hold a BLOB) and ``keep``; returns
    how many columns were poisoned."""
    conn = sqlite3.connect(path)
    n = 0
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                             "AND name NOT LIKE 'sqlite_%'")]
        for table in tables:
            if table in skip_tables:
                continue
            for _, column, type_, _, _, pk in conn.execute(f'PRAGMA table_info("{table}")').fetchall():
                if (pk and type_.upper() == "INTEGER" and table != "band") or (table, column) in keep:
                    continue
                conn.execute(f'UPDATE OR IGNORE "{table}" SET "{column}" = ?', (value,))
                n += 1
        conn.commit()
    finally:
        conn.close()
    return n


#: Columns that tie rows to the namespace and bands: left intact so that the poisoned values are read.
KEEP_STRUCTURE = frozenset({("namespace", "name"), ("entry", "ns"), ("decision", "ns"), ("band", "key")})


# -- pickle payloads ----------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_pickle_payload_in_every_column_is_never_run(tmp_path: Path, marker: Path) -> None:
    index = make_index(tmp_path / "i.sqlite3")
    evil = payload(marker)
    assert poison(index, evil) >= 15
    before = digest(index)
    for opener in (lambda: open_index(index), lambda: open_index(index, readonly=True),
                   lambda: Deduplicator.open(f"sqlite:///{index}")):
        with pytest.raises(IndexOpenError, match=f"{index}.*unreadable simhash_meta"):
            opener()
    assert_cli_refuses(index, tmp_path, "dedup", "stats", "export")
    await assert_crawl_closes(index)
    assert digest(index) == before
    assert not marker.exists()
    pickle.loads(evil).close()  # the payload is live: unpickling it does create the marker
    assert marker.exists()
    marker.unlink()


@pytest_twisted.ensureDeferred
async def test_pickle_payload_in_every_value_column_of_a_valid_index(tmp_path: Path, marker: Path,
                                                                     caplog: Any) -> None:
    """The self-description intact, every stored value a payload (the rows still belong to the
    namespace): the crawl never crashes, nothing runs, no item is passed on as new unless it is in
    the index, and the others are counted as index errors."""
    index = make_index(tmp_path / "i.sqlite3")
    keep = KEEP_STRUCTURE
    assert poison(index, payload(marker), keep=keep, skip_tables=("simhash_meta",)) >= 10
    before = rows(index, but="run")
    crawler = await run_crawl(crawl_settings(index), [*ITEMS, {**ITEMS[0], "url": "https://c.example/0"}])
    stats = crawler.stats.get_stats()
    passed = [i["url"] for i in crawler.spider.collected]
    assert stats["finish_reason"] == "finished"
    assert "Error processing" not in caplog.text and "Traceback" not in caplog.text
    assert stats.get("simhash/index_error", 0) + len(passed) + stats.get("simhash/dropped/title", 0) + stats.get(
        "simhash/dropped/body", 0) == len(ITEMS) + 1
    assert stats.get("simhash/index_error", 0) >= 1  # the stored fingerprints were hit and refused
    if passed:
        conn = sqlite3.connect(index)
        stored = {r[0] for r in conn.execute("SELECT url FROM entry")}
        conn.close()
        assert set(passed) <= stored
    else:  # every stored row untouched; the crawl's one write is its own run, its index errors counted
        assert rows(index, but="run") == before
        conn = sqlite3.connect(index)
        ((run_id, record),) = conn.execute("SELECT id, record FROM run").fetchall()
        conn.close()
        assert run_id == stats["simhash/run"]
        assert json.loads(record)["counts"]["index_errors"] == stats["simhash/index_error"]


def test_wrongly_typed_stored_values_are_a_clear_index_error(tmp_path: Path, marker: Path) -> None:
    index = make_index(tmp_path / "i.sqlite3")
    keep = KEEP_STRUCTURE
    poison(index, payload(marker), keep=keep, skip_tables=("simhash_meta",))
    with open_index(index, readonly=True) as ix, pytest.raises(SimhashIndexError, match=str(index)):
        list(ix.entries())
    result = cli("export", "--index", str(index))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr


# -- not ours, truncated, other parameters ---------------------------------------------------------


def foreign_files(tmp_path: Path, marker: Path) -> dict[str, Path]:
    """SQLite files that are not scrapy-simhash indexes."""
    files = {}
    # sqlitedict with its default pickle codec, even under our meta table's name, holding payloads.
    for table in ("unnamed", "simhash_meta"):
        path = tmp_path / f"sqlitedict-{table}.sqlite3"
        with SqliteDict(str(path), tablename=table, autocommit=True) as sd:
            sd["format"] = Payload(str(marker))
            sd["params"] = Payload(str(marker))
        files[f"sqlitedict-{table}"] = path
    assert not marker.exists()  # (pickling does not run the payload, only unpickling would)
    # Another application's database, and one that has our meta table but says it is something else.
    path = tmp_path / "app.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE items(url TEXT, body BLOB); INSERT INTO items VALUES ('u', x'80049500');")
    conn.close()
    files["other-app"] = path
    path = tmp_path / "other-format.sqlite3"
    with SqliteDict(str(path), tablename="simhash_meta", autocommit=True, encode=json.dumps,
                    decode=json.loads) as sd:
        sd["format"] = "something-else"
    files["other-format"] = path
    return files


@pytest_twisted.ensureDeferred
async def test_sqlite_files_that_are_not_ours_are_refused_untouched(tmp_path: Path, marker: Path) -> None:
    for n, (name, path) in enumerate(foreign_files(tmp_path, marker).items()):
        before = digest(path)
        with pytest.raises(IndexOpenError, match=f"{path}.*not a scrapy-simhash index") as excinfo:
            open_index(path)
        assert "pickle" not in str(excinfo.value).lower(), name
        assert_cli_refuses(path, tmp_path, "stats" if n else "dedup")
        await assert_crawl_closes(path)
        assert digest(path) == before, name
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(path.name)) == [path.name], name


@pytest_twisted.ensureDeferred
async def test_truncated_files_are_refused_untouched(tmp_path: Path) -> None:
    full = make_index(tmp_path / "full.sqlite3")
    data = full.read_bytes()
    assert len(data) >= 4 * 4096
    for n, cut in enumerate((50, 4096, len(data) // 2, len(data) - 4096)):
        path = tmp_path / f"cut{cut}.sqlite3"
        path.write_bytes(data[:cut])
        with pytest.raises(IndexOpenError, match=f"{path}.*(truncated|corrupt)"):
            open_index(path)
        assert_cli_refuses(path, tmp_path, ("dedup", "stats")[n % 2])
        await assert_crawl_closes(path)
        assert path.read_bytes() == data[:cut], cut


@pytest_twisted.ensureDeferred
async def test_index_of_another_parameter_set_is_refused_untouched(tmp_path: Path) -> None:
    cases = {"bits32": {"bits": 32}, "title_k1": {"title_max_distance": 1, "body_max_distance": 1}}
    for name, options in cases.items():
        path = make_index(tmp_path / f"{name}.sqlite3", **options)
        before = digest(path)
        with pytest.raises(ParameterMismatch, match=str(path)):
            open_index(path, params=required_params(64, 2, 3))
        with pytest.raises(ParameterMismatch, match=str(path)):
            Deduplicator.open(f"sqlite:///{path}").close()
        assert_cli_refuses(path, tmp_path, "dedup")
        reason = await assert_crawl_closes(path)
        assert str(path) in reason
        assert digest(path) == before, name


@pytest_twisted.ensureDeferred
async def test_index_of_another_schema_version_is_refused_untouched(tmp_path: Path) -> None:
    """A real index whose record says another schema version (a development build's): no converter
    runs; the engine, the command line (status 2) and a crawl (closed, the reason naming the file
    and both versions) refuse it, and the file is not touched."""
    path = make_index(tmp_path / "other-version.sqlite3")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE simhash_meta SET value = '7' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = digest(path)
    message = (f"{path} has schema version 7 .*; this scrapy-simhash reads version {SCHEMA_VERSION}: "
               ".*no converter exists")
    with pytest.raises(IndexOpenError, match=message):
        Deduplicator.open(f"sqlite:///{path}").close()
    assert_cli_refuses(path, tmp_path, "dedup", "stats", "check")
    reason = await assert_crawl_closes(path)
    assert f"{path} has schema version 7" in reason and f"reads version {SCHEMA_VERSION}" in reason, reason
    assert digest(path) == before


# -- read-only ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``chattr +i``: not even root may write, create or delete there."""
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)],
                                                         capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (tests run as root, where permission bits do not apply)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest_twisted.ensureDeferred
async def test_read_only_file_reads_work_and_nothing_is_passed_on_unchecked(tmp_path: Path) -> None:
    index = make_index(tmp_path / "i.sqlite3")
    before = digest(index)
    with immutable(index):
        result = cli("stats", "--index", str(index))  # reading tools open it read-only
        assert result.returncode == 0 and "entries" in result.stdout, result.stderr
        result = cli("check", "--index", str(index), "--title", STORY_ZH["title"], "--body", STORY_ZH["body"])
        assert result.returncode == 0 and "duplicate" in result.stdout, result.stdout
        new_story = {
            "title": "北湖湿地公园完成生态修复 候鸟数量十年来首次回升到两万只",
            "body": "<p>北湖湿地公园管理处介绍，经过三年的退塘还湖和水系连通工程，园区水质由劣五类提升到三类，"
                    "今年冬季观测到的越冬候鸟超过两万只，其中包括国家一级保护动物东方白鹳四十余只。</p>",
            "url": "https://n.example/1",
        }
        # refused at open, before the new story could be passed on without its entry
        reason = await refused_crawl(crawl_settings(index, SIMHASH_INDEX_RETRIES=1, SIMHASH_INDEX_RETRY_DELAY=0.0),
                                     [new_story, ITEMS[0]])
        assert "read-only" in reason, reason
    assert digest(index) == before


def test_read_only_file_is_refused_at_writable_open(tmp_path: Path) -> None:
    index = make_index(tmp_path / "i.sqlite3")
    with immutable(index), pytest.raises(IndexOpenError, match=f"{index}.*read-only"):
        open_index(index).close()


@pytest_twisted.ensureDeferred
async def test_read_only_directory_is_a_clear_error(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    directory.mkdir()
    index = make_index(directory / "i.sqlite3")
    before = digest(index)
    with immutable(directory):
        with pytest.raises(IndexOpenError, match=str(index)):
            open_index(index)
        assert_cli_refuses(index, tmp_path, "dedup", "stats")
        await assert_crawl_closes(index)
        new = directory / "new.sqlite3"
        with pytest.raises(IndexOpenError, match=f"cannot create index {new}"):
            open_index(new)
    assert digest(index) == before
    assert sorted(p.name for p in directory.iterdir()) == ["i.sqlite3"]
