"""What only the SQLite band index has: file locations, a self-describing file that is refused
untouched when foreign, garbage, truncated, corrupt or pickled, read-only files, the write lock,
query plans, and SIGKILL durability. Real files, real processes.

Every behaviour both backends share (exactness, tiers, expiry, namespaces, maintenance, parameter
checks, atomicity across processes) is in ``test_index_protocol.py``, run against SQLite and Redis."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlitedict import SqliteDict

from scrapy_simhash.index import (
    BandIndex,
    Decision,
    Entry,
    IndexOpenError,
    IndexParams,
    IndexWriteError,
    Match,
    Outcome,
    Query,
    open_index,
)
from scrapy_simhash.index.bands import records
from scrapy_simhash.index.sqlite.index import FORMAT, META_TABLE, SCHEMA_VERSION, SqliteIndex

REPO = Path(__file__).resolve().parents[1]


def q(title_fp: int | None, body_fp: int | None, /, *, tk: int = 2, bk: int = 3, **kw: object) -> Query:
    return Query(title_fp=title_fp, body_fp=body_fp, title_k=tk, body_k=bk, **kw)  # type: ignore[arg-type]


def file_state(path: Path) -> tuple[str, int, list[str]]:
    """Content hash, mtime and sibling files: enough to prove a file was not touched."""
    return (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        path.stat().st_mtime_ns,
        sorted(p.name for p in path.parent.iterdir()),
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "index.sqlite3"


@pytest.fixture
def index(path: Path):
    ix = open_index(path)
    yield ix
    ix.close()


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# -- open_index ---------------------------------------------------------------------------------


def test_open_index_plain_path_pathlike_and_protocol(path: Path) -> None:
    with open_index(str(path)) as ix:
        assert isinstance(ix, SqliteIndex)
        assert isinstance(ix, BandIndex)
        assert ix.location == str(path)
        assert ix.namespace == "default"
        assert ix.params == IndexParams()
    with open_index(path) as ix:  # os.PathLike, the file now exists
        assert ix.count() == 0


def test_sqlite_urls_follow_sqlalchemy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_index("sqlite:///rel/index.sqlite3") as ix:  # three slashes: relative to the cwd
        assert ix.location == str(tmp_path / "rel" / "index.sqlite3")
    absolute = tmp_path / "abs.sqlite3"
    url = f"sqlite:///{absolute}"  # absolute path starts with "/": four slashes in all
    assert url.startswith("sqlite:////")
    with open_index(url) as ix:
        assert ix.location == str(absolute)
    assert absolute.exists() and (tmp_path / "rel" / "index.sqlite3").exists()


@pytest.mark.parametrize("url", ["postgres://db/x", "mongodb://h/x", "sqlite://", "sqlite:///", "sqlite://rel.db"])
def test_unknown_scheme_or_empty_sqlite_url(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(IndexOpenError, match=r"cannot open|names no file"):
        open_index(url)
    assert list(tmp_path.iterdir()) == []


def test_missing_file_with_create_false_or_readonly(path: Path) -> None:
    for kwargs in ({"create": False}, {"readonly": True}):
        with pytest.raises(IndexOpenError, match=str(path)):
            open_index(path, **kwargs)
    assert not path.exists()


def test_reexported_names() -> None:
    import scrapy_simhash.index as mod

    for name in ("BandIndex", "IndexParams", "Query", "Outcome", "Match", "Entry", "Decision",
                 "IndexOpenError", "ParameterMismatch", "IndexWriteError", "SimhashIndexError", "open_index"):
        assert hasattr(mod, name), name
    assert {Outcome, Match, Entry, Decision} <= {getattr(mod, n) for n in mod.__all__}


# -- locking ------------------------------------------------------------------------------------


def test_lock_held_past_busy_timeout_is_a_write_error(path: Path) -> None:
    with open_index(path, busy_timeout=0.2) as ix:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        start = time.monotonic()
        with pytest.raises(IndexWriteError, match=f"{path}.*write lock"):
            ix.check_and_add(q(1, 2))
        assert time.monotonic() - start < 5
        assert ix.lookup(1, None, title_k=0, body_k=0) == []  # readers are not blocked (WAL)
        other.execute("ROLLBACK")
        other.close()
        assert ix.check_and_add(q(1, 2)).match is None


# -- flat cost under skew -----------------------------------------------------------------------


def test_hot_queries_use_indexes(index: SqliteIndex) -> None:
    """O(log n) per step: every statement of the hot path is an index SEARCH, never a SCAN."""
    conn = index._conn
    assert conn is not None
    plans = []
    for tier in ("title", "body"):
        keys = index._rows.probe_keys(tier, 12345)
        plans += conn.execute("EXPLAIN QUERY PLAN " + index._rows.sql_band[tier], keys).fetchall()
        key = index._rows.fp_key(5)
        plans += conn.execute("EXPLAIN QUERY PLAN " + index._rows.sql_first[tier], (key, 1, 5, 0.0, 1, 0)).fetchall()
        plans += conn.execute("EXPLAIN QUERY PLAN " + index._rows.sql_used[tier], (key, 1, 5)).fetchall()
    # the probe keys' own list (a constant VALUES list joined with band) is the one thing scanned
    details = [row[3] for row in plans if not re.fullmatch(r"CO-ROUTINE k|SCAN k|SCAN \d+ CONSTANT ROWS", row[3])]
    assert details and all(d.startswith("SEARCH") for d in details), details
    assert any("entry_title" in d for d in details) and any("entry_body" in d for d in details)
    assert any(d.startswith("SEARCH band USING PRIMARY KEY") for d in details), details


# -- self-describing, safe to open --------------------------------------------------------------


def test_meta_is_a_json_sqlitedict_mapping(path: Path) -> None:
    params = IndexParams(bits=64, title_bands=2, body_bands=5, tokenizer="jieba-test", features_version="9")
    open_index(path, params=params).close()
    conn = sqlite3.connect(path)
    raw = dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    conn.close()
    assert all(isinstance(v, str) for v in raw.values())  # text, not pickled bytes
    decoded = {k: json.loads(v) for k, v in raw.items()}
    # any tool can read it through sqlitedict (journal_mode="WAL": its default would switch the file)
    with SqliteDict(str(path), tablename=META_TABLE, flag="r", decode=json.loads, journal_mode="WAL") as sd:
        assert dict(sd.items()) == decoded
    assert decoded["format"] == FORMAT and decoded["schema_version"] == SCHEMA_VERSION
    assert decoded["params"] == params.as_dict()
    assert decoded["title_layout"] == records(params)["title"] and decoded["body_layout"] == records(params)["body"]
    for tier in ("title", "body"):  # the parts cover the 64 bits, in order
        parts = decoded[f"{tier}_layout"]["parts"]
        assert [s for s, _ in parts] == [sum(w for _, w in parts[:i]) for i in range(len(parts))]
        assert sum(w for _, w in parts) == 64
    with open_index(path) as ix:  # params=None: what the file has
        assert ix.params == params


def test_foreign_sqlite_file_is_refused_untouched(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB)")
    conn.execute("CREATE TABLE entry (id INTEGER PRIMARY KEY, url TEXT)")
    conn.execute("INSERT INTO meta VALUES ('format', 'someone-else')")
    conn.commit()
    conn.close()
    time.sleep(0.01)
    before = file_state(path)
    for kwargs in ({}, {"readonly": True}, {"params": IndexParams()}):
        with pytest.raises(IndexOpenError, match=f"{path}.*not a scrapy-simhash index"):
            open_index(path, **kwargs)
    assert file_state(path) == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    conn.close()


def test_garbage_and_empty_files_are_refused_untouched(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(random.Random(5).randbytes(8192))
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    text = tmp_path / "notes.sqlite3"
    text.write_text("SQLite format 3 is what this file talks about, but it is text.\n" * 10)
    for f in (garbage, empty, text):
        before = file_state(f)
        with pytest.raises(IndexOpenError, match=str(f)):
            open_index(f)
        assert file_state(f) == before


def test_truncated_file_is_refused(path: Path) -> None:
    rng = random.Random(9)
    with open_index(path) as ix:
        ix.add([(rng.getrandbits(64), rng.getrandbits(64), f"https://x/{i}", "t" * 50, 1.0) for i in range(4000)])
    data = path.read_bytes()
    assert len(data) > 200_000
    for size in (len(data) // 2, 4096 * 3, 50):
        path.write_bytes(data[:size])
        with pytest.raises(IndexOpenError, match=f"{path}.*truncated"):
            open_index(path)
        assert path.stat().st_size == size  # nothing recreated


def test_corrupt_schema_page_is_refused(path: Path) -> None:
    open_index(path).close()
    data = bytearray(path.read_bytes())
    data[100:4096] = random.Random(1).randbytes(3996)  # page 1 after the header: the schema
    path.write_bytes(bytes(data))
    with pytest.raises(IndexOpenError, match=str(path)):
        open_index(path)
    assert path.read_bytes() == bytes(data)


def test_damaged_index_missing_a_table(path: Path) -> None:
    open_index(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE band")
    conn.commit()
    conn.close()
    with pytest.raises(IndexOpenError, match=f"{path}.*damaged.*band"):
        open_index(path)


class _Boom:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # unpickling this would create the marker file
        return (open, (self.marker, "w"))


def test_nothing_read_from_the_file_is_unpickled(path: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    open_index(path).close()
    payload = pickle.dumps(_Boom(str(marker)))
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE {META_TABLE} SET value = ? WHERE key = 'params'", (payload,))
    conn.commit()
    conn.close()
    with pytest.raises(IndexOpenError, match=f"{path}.*unreadable"):
        open_index(path)
    assert not marker.exists()
    pickle.loads(payload).close()  # the payload is real: unpickling it does create the marker
    assert marker.exists()


def recording_version(path: Path, version: object) -> None:
    """A real index file (one entry) whose meta record says ``version``."""
    with open_index(path) as ix:
        ix.check_and_add(q(77, 88, url="orig"))
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE {META_TABLE} SET value = ? WHERE key = 'schema_version'", (json.dumps(version),))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [0, 1, 2, 7, "8", None])
def test_a_file_of_another_schema_version_is_refused_untouched_saying_what_to_do(path: Path, version: object) -> None:
    """Any version but this one's (an older development build's, a later one's, not a number) is
    refused at open, writable or read-only, and by re-banding, naming both versions and what to
    do; nothing is converted and the file is not touched."""
    recording_version(path, version)
    before = file_state(path)
    expected = (rf"index {re.escape(str(path))} has schema version {re.escape(repr(version))} \(created by "
                rf"scrapy-simhash [^)]+\); this scrapy-simhash reads version {SCHEMA_VERSION}: .*no converter exists "
                r"for a format no release wrote: delete it or use a new index file and let it fill again "
                r"\(SIMHASH_RESET / --reset does not help\)")
    for kwargs in ({}, {"readonly": True}, {"params": IndexParams()}):
        with pytest.raises(IndexOpenError, match=expected) as e:
            open_index(path, **kwargs)  # type: ignore[arg-type]
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        assert ("upgrade scrapy-simhash if a newer release made it" in str(e.value)) == newer
    from scrapy_simhash.index.sqlite.reband import reband

    with pytest.raises(IndexOpenError, match=expected):
        reband(path, body_bands=6)
    assert file_state(path) == before


def test_a_file_of_another_schema_version_is_refused_by_the_command_line(path: Path) -> None:
    """Each command exits with status 2 (an index that cannot be opened) and the one-line message."""
    recording_version(path, 7)
    before = file_state(path)
    for command in (["stats"], ["export"], ["reband"], ["purge", "--older-than", "1"]):
        proc = subprocess.run([sys.executable, "-m", "scrapy_simhash.cli", *command, "--index", str(path)],
                              capture_output=True, text=True, cwd=REPO, timeout=120)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stdout == "", (command, proc.stderr)
        assert f"{path} has schema version 7" in proc.stderr, proc.stderr
        assert f"reads version {SCHEMA_VERSION}" in proc.stderr, proc.stderr
        assert "no converter exists" in proc.stderr, proc.stderr
    assert file_state(path) == before


def test_readonly_open_reads_and_refuses_writes(path: Path) -> None:
    with open_index(path) as ix:
        ix.check_and_add(q(77, 88, url="orig"))
        ix.check_and_add(q(77, None, url="dup"))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with open_index(path, readonly=True) as ro:
        assert ro.count() == 1 and ro.stats()["readonly"] is True
        assert ro.lookup(77, None, title_k=2, body_k=0)[0].entry.url == "orig"
        assert ro.explain("dup").tier == "title"  # type: ignore[union-attr]
        assert [e.url for e in ro.entries()] == ["orig"]
        for write in (lambda: ro.check_and_add(q(1, 2)), lambda: ro.add([(1, 2, None, None, 1.0)]),
                      lambda: ro.forget("orig"), lambda: ro.purge(time.time()), ro.reset):
            with pytest.raises(IndexWriteError, match=f"{path} was opened read-only"):
                write()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):  # a truly read-only connection
            ro._conn.execute("DELETE FROM entry")  # type: ignore[union-attr]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    with open_index(path, readonly=True, namespace="elsewhere") as ro:  # unknown namespace: empty, no write
        assert ro.count() == 0 and ro.lookup(77, None, title_k=2, body_k=0) == [] and list(ro.entries()) == []


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_file_on_disk(path: Path) -> None:  # pragma: no cover - not run as root
    with open_index(path) as ix:
        ix.check_and_add(q(1, 2))
    path.chmod(0o444)
    path.parent.chmod(0o555)
    try:
        with pytest.raises(IndexOpenError, match=f"{path}.*readonly=True"):
            open_index(path)
        with open_index(path, readonly=True) as ro:
            assert ro.count() == 1
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)


# -- real processes: atomic, durable ------------------------------------------------------------


_WRITER = textwrap.dedent(
    """
    import random, sys
    from scrapy_simhash.index import open_index, Query
    ix = open_index(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        fp = rng.getrandbits(64)
        if n % 5 == 0:
            fp = 0x5A5A_5A5A_5A5A_5A5A ^ (1 << rng.randrange(64))  # some duplicates too
        out = ix.check_and_add(Query(title_fp=fp, body_fp=rng.getrandbits(64), title_k=2, body_k=3,
                                     url=f"https://x/{sys.argv[2]}/{n}", title="t" * rng.randrange(200)))
        if out.match is None:
            print(out.entry_id, flush=True)
    """
)


def test_durable_after_sigkill(path: Path) -> None:
    """A writer killed at random moments: the file opens, passes integrity_check, and holds every
    entry that was reported new."""
    rng = random.Random(1234)
    reported: set[int] = set()
    open_index(path).close()
    for round_ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(round_)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=REPO)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, err
        ids = {int(line) for line in out.split()}
        reported |= ids
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.close()
        with open_index(path) as ix:
            stored = {e.id for e in ix.entries()}
            assert reported <= stored, sorted(reported - stored)[:10]
            assert ix.count() == len(stored)
    assert len(reported) > 20  # the writers did get work done between kills


def test_number_signature_is_stored_with_the_entry_and_guards_the_title_tier(path: Path) -> None:
    """Schema 2: ``entry.numbers`` round-trips through check-and-add, lookup and export, and a
    title-tier candidate whose numbers disagree is passed over for the body tier."""
    with open_index(path) as ix:
        assert ix.check_and_add(q(0xF0F0, 0, numbers="0000000a 0000000b", url="a")).match is None
        assert [e.numbers for e in ix.entries()] == ["0000000a 0000000b"]
        assert ix.lookup(0xF0F0, None, title_k=2, body_k=3)[0].entry.numbers == "0000000a 0000000b"
        # Same title, other numbers, body 1 bit away: the body tier decides.
        out = ix.check_and_add(q(0xF0F0, 1, numbers="0000000c 0000000d", title_numbers=70, url="b"))
        assert out.match is not None and (out.match.tier, out.match.distance) == ("body", 1)
        # Same title, other numbers, far body: new.
        far = ix.check_and_add(q(0xF0F0, (1 << 64) - 1, numbers="0000000c", title_numbers=70, url="c"))
        assert far.match is None and ix.count() == 2
    conn = sqlite3.connect(path)
    cols = [r[1] for r in conn.execute("PRAGMA table_info(entry)")]
    conn.close()
    assert "numbers" in cols
