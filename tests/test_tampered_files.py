"""Tampered or damaged index files never answer wrongly: planted schema objects, a damaged or
truncated WAL, a truncated main file with a pending WAL, tampered metadata, a FIFO at the index
path, a lock held by another process, a directory this user cannot write.

The files are made by real index processes (``benchmarks/faults.py``: 200 committed entries, one
fsynced check-and-add each, the writer SIGKILLed to leave its WAL pending as a crash does, or
closed cleanly), then damaged the way the scenarios of ``faults.py`` do. Refusal means
:class:`IndexOpenError` naming the file and the cause, with every file left byte for byte as it
was; what a crash leaves (frames of an unfinished transaction, junk after the last commit) must
still open with every committed entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scrapy_simhash.index import IndexOpenError, IndexParams, Query, open_index
from scrapy_simhash.index.bands import records
from scrapy_simhash.index.sqlite.tables import value_bits
from tests.conftest import REPO
from tests.test_hostile_files import immutable

sys.path.insert(0, str(REPO / "benchmarks"))
import faults

FPS = faults.file_fingerprints()


def states(path: Path) -> dict[str, str | None]:
    """Content hash of the file and of its -wal (None: absent or empty, as a read-only connection
    to a file without a WAL leaves it)."""
    return {
        suffix: hashlib.sha256(Path(f"{path}{suffix}").read_bytes()).hexdigest()
        if Path(f"{path}{suffix}").exists() and Path(f"{path}{suffix}").stat().st_size else None
        for suffix in ("", "-wal")
    }


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A pending index (writer killed after 200 commits) and a cleanly closed one."""
    base = tmp_path_factory.mktemp("sources")
    made = {"pending": base / "pending.sqlite3", "clean": base / "clean.sqlite3"}
    assert len(faults.write_index(made["pending"], FPS)) == len(FPS)
    assert len(faults.write_index(made["clean"], FPS, pending=False)) == len(FPS)
    assert Path(f"{made['pending']}-wal").stat().st_size > 0 and not Path(f"{made['clean']}-wal").exists()
    return made


def copy_of(sources: dict[str, Path], kind: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{kind}.sqlite3"
    faults._copy_index(sources[kind], path)
    return path


def assert_refused(path: Path, pattern: str) -> None:
    """Refused, read-write and read-only, naming the file and matching ``pattern``; nothing changed."""
    before = states(path)
    for readonly in (False, True):
        with pytest.raises(IndexOpenError) as excinfo:
            open_index(path, readonly=readonly).close()
        message = str(excinfo.value)
        assert str(path) in message and re.search(pattern, message), message
        assert states(path) == before, readonly


# -- planted or missing schema objects ------------------------------------------------------------

PLANTED = {
    "sink": faults.TRIGGER_DELETE,
    "leak": faults.TRIGGER_COPY,  # its table 'loot' is found first
    "peek": "CREATE VIEW peek AS SELECT url FROM entry;",
    "entry_extra": "CREATE INDEX entry_extra ON entry(title);",
    "entry_url": "DROP INDEX entry_url; CREATE INDEX entry_url ON entry(url);",  # ours, changed
    "entry": "ALTER TABLE entry ADD COLUMN extra INTEGER DEFAULT 1;",  # an extra column
    "namespace": "ALTER TABLE namespace ADD COLUMN note TEXT CHECK (note <> 'x');",
}


@pytest.mark.parametrize("name", PLANTED)
def test_planted_schema_objects_are_refused_untouched(sources: dict[str, Path], tmp_path: Path, name: str) -> None:
    path = copy_of(sources, "clean", tmp_path)
    faults._sql(path, PLANTED[name])
    assert_refused(path, f"tampered with: .*'{'loot' if name == 'leak' else name}'")


@pytest.mark.parametrize(("dropped", "missing"), [
    ("DROP TABLE sentence; DROP INDEX entry_seen;", "'entry_seen', 'sentence'"),
    ("DROP TABLE pending;", "'pending', 'pending_owner'"),  # every table is there from the start: none added later
    ("DROP TABLE request;", "'request', 'request_at'"),
])
def test_a_dropped_table_or_index_is_refused(sources: dict[str, Path], tmp_path: Path, dropped: str,
                                             missing: str) -> None:
    path = copy_of(sources, "clean", tmp_path)
    faults._sql(path, dropped)
    assert_refused(path, f"damaged: schema objects \\[{missing}\\] are missing")


def test_trigger_sink_no_longer_admits_everything(tmp_path: Path) -> None:
    """The scenario of the issue: with the trigger, every item was new and nothing was stored."""
    path = tmp_path / "i.sqlite3"
    open_index(path).close()
    faults._sql(path, faults.TRIGGER_DELETE)
    with pytest.raises(IndexOpenError, match="trigger 'sink'"), open_index(path) as ix:
        for t, b, url in FPS[:20]:
            ix.check_and_add(Query(t, b, 2, 3, url=url))


def test_what_sqlite_adds_itself_is_accepted_and_schema_is_untrusted(sources: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    path = copy_of(sources, "clean", tmp_path)
    faults._sql(path, "ANALYZE;")  # sqlite_stat1 (and sqlite_stat4 where compiled in)
    for readonly in (False, True):
        with open_index(path, readonly=readonly) as ix:
            assert ix.count() == len(FPS)
            assert ix._conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0  # type: ignore[attr-defined]
    assert sqlite3.sqlite_version_info >= (3, 31, 0)  # trusted_schema exists


# -- damaged or mismatched WAL ------------------------------------------------------------------------

WAL_DAMAGE = {
    "random": ("wal replaced by random bytes", "not start with a valid WAL header"),
    "middle": ("wal: 64 random bytes in its middle", "WAL is damaged at frame \\d+: commit frame \\d+"),
    "header-only": ("wal truncated to its header", "WAL holds 0 committed frames but its last writer recorded"),
    "main-half": ("main file truncated to half, wal pending", "not in its WAL \\(the file was truncated\\)"),
}


@pytest.mark.parametrize("case", WAL_DAMAGE)
def test_damaged_wal_or_main_file_is_refused_untouched(sources: dict[str, Path], tmp_path: Path,
                                                       case: str) -> None:
    scenario, pattern = WAL_DAMAGE[case]
    path = copy_of(sources, "pending", tmp_path)
    faults.FILE_DAMAGE[scenario][1](path)
    assert_refused(path, f"damaged: .*{pattern}")


def test_wal_of_another_page_size_is_refused(sources: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(other, isolation_level=None)
    conn.executescript("PRAGMA page_size=1024; PRAGMA journal_mode=WAL; CREATE TABLE t(x);")
    conn.execute("INSERT INTO t VALUES (1)")
    shutil.copyfile(f"{other}-wal", tmp_path / "wal")
    conn.close()
    path = copy_of(sources, "clean", tmp_path)
    shutil.copyfile(tmp_path / "wal", f"{path}-wal")
    assert_refused(path, "pages of 1024 bytes.*the WAL of another database")


def test_crash_leftovers_still_open_with_every_committed_entry(sources: dict[str, Path], tmp_path: Path) -> None:
    """A WAL whose tail is an unfinished transaction or junk after the last commit, as a crash
    leaves it, is what SQLite is made to recover: it opens, and every committed entry is there."""
    path = copy_of(sources, "pending", tmp_path)
    wal = Path(f"{path}-wal")
    data = wal.read_bytes()
    page = int.from_bytes(data[8:12], "big")
    frame = 24 + page
    # the last commit frame's header copied after it, marked as a non-commit frame of the same
    # transaction with a wrong checksum, then half a frame of junk: a torn unfinished transaction
    last = 32 + ((len(data) - 32) // frame - 1) * frame
    torn = bytearray(data[last:last + frame])
    torn[4:8] = (0).to_bytes(4, "big")
    torn[16:24] = bytes(8)
    with open(wal, "ab") as f:
        f.write(bytes(torn) + os.urandom(frame // 2))
    with open_index(path) as ix:
        assert {e.url for e in ix.entries()} == {url for _, _, url in FPS}


def test_sigkill_during_writes_still_opens_with_every_committed_entry(tmp_path: Path) -> None:
    for k, stop in enumerate((1, 37, 150)):
        path = tmp_path / f"k{k}.sqlite3"
        committed = faults.write_index(path, FPS, kill_after=stop)
        assert len(committed) == stop
        with open_index(path, create=False) as ix:
            assert {e.url for e in ix.entries()} == set(committed)


def test_a_live_writer_in_another_process_is_never_mistaken_for_damage(tmp_path: Path) -> None:
    """The WAL of a file in use changes under the check: it is left to the live connections."""
    path = tmp_path / "live.sqlite3"
    open_index(path).close()
    writer = textwrap.dedent(
        """
        import random, sys, time
        from scrapy_simhash.index import Query, open_index
        ix = open_index(sys.argv[1])
        rng = random.Random(3)
        print("ready", flush=True)
        end = time.monotonic() + 4
        while time.monotonic() < end:
            ix.check_and_add(Query(rng.getrandbits(64), rng.getrandbits(64), 2, 3))
        ix.close()
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    proc = subprocess.Popen([sys.executable, "-c", writer, str(path)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    opened = 0
    while proc.poll() is None:
        with open_index(path) as ix:
            ix.count()
        opened += 1
    assert proc.wait() == 0 and opened >= 5


# -- tampered metadata (item 5) -------------------------------------------------------------------


def _meta(path: Path) -> dict[str, object]:
    conn = sqlite3.connect(path)
    try:
        return {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM simhash_meta")}
    finally:
        conn.close()


@pytest.mark.parametrize("bits", [35, 16, 1000])
def test_tampered_band_key_is_refused(sources: dict[str, Path], tmp_path: Path, bits: int) -> None:
    path = copy_of(sources, "clean", tmp_path)
    expected = value_bits(IndexParams(**_meta(path)["params"]))  # type: ignore[arg-type]
    faults.FILE_DAMAGE[f"meta band_key.value_bits {bits}"][1](path)
    assert_refused(path, f'band_key = .*"value_bits": {bits}.*imply .*"value_bits": {expected}')


def test_tampered_layouts_and_bands_are_refused(sources: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(sources, "clean", tmp_path)
    faults.FILE_DAMAGE["meta params.title_bands 5"][1](path)
    implied = records(IndexParams(**_meta(path)["params"]))["title"]  # type: ignore[arg-type]
    assert_refused(path, re.escape(f"title_layout = {_meta(path)['title_layout']!r}") + ".*"
                   + re.escape(f"imply {implied}"))
    # everything the parameters imply changed to match: the band rows then disagree
    consistent = tmp_path / "consistent"
    consistent.mkdir()
    path = copy_of(sources, "clean", consistent)
    faults.FILE_DAMAGE["meta title_bands 5, layout and band_key to match"][1](path)
    # the value bits stay (the body's 32-bit parts are the widest): the sampled entries' rows disagree
    assert_refused(path, f"entry \\d+ has 0 of its {_parts(path, 'title')} title band rows under the keys the "
                   "recorded layout gives")
    path = copy_of(sources, "clean", tmp_path)
    faults.FILE_DAMAGE["meta body_bands 5, layout to match"][1](path)  # same key packing: only the rows tell
    assert_refused(path, f"entry \\d+ has \\d of its {_parts(path, 'body')} body band rows under the keys the "
                   "recorded layout gives")


def _parts(path: Path, tier: str) -> int:
    """Band rows per fingerprint of ``tier`` that the file's recorded parameters imply."""
    return len(records(IndexParams(**_meta(path)["params"]))[tier]["parts"])  # type: ignore[arg-type,index]


@pytest.mark.parametrize("script, pattern", [
    ("UPDATE namespace SET id = 7 WHERE id = 1;", "entries of namespace id 1, which its namespace table"),
    ("UPDATE namespace SET id = 7 WHERE id = 1; UPDATE entry SET ns = 7;", "band key \\d+, of namespace id 1"),
    ("UPDATE simhash_meta SET value = '\"blob16\"' WHERE key = 'fingerprint_storage';",
     'fingerprint_storage = "blob16", but its parameters imply "int64"'),
])
def test_tampered_namespace_ids_and_storage_are_refused(sources: dict[str, Path], tmp_path: Path, script: str,
                                                       pattern: str) -> None:
    path = copy_of(sources, "clean", tmp_path)
    faults._sql(path, script)
    assert_refused(path, pattern)


# -- item 8: not a file, locked, not writable ----------------------------------------------------------


def _open_in_child(path: Path, timeout: float = 30) -> str:
    """open_index in a child process (an open that hangs must fail the test, not freeze it)."""
    code = "import sys\nfrom scrapy_simhash.index import open_index\ntry: open_index(sys.argv[1]).close()\n" \
           "except Exception as e: print(type(e).__name__, e)\nelse: print('opened')"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    try:
        return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                              timeout=timeout, env=env).stdout.strip()
    except subprocess.TimeoutExpired:
        pytest.fail(f"opening {path} hung for {timeout} s")


@pytest.mark.parametrize("where", ["", "-wal", "-shm"])
def test_fifo_at_the_index_path_is_refused_at_once(sources: dict[str, Path], tmp_path: Path, where: str) -> None:
    path = tmp_path / "i.sqlite3" if not where else copy_of(sources, "clean", tmp_path)
    os.mkfifo(f"{path}{where}")
    started = time.monotonic()
    out = _open_in_child(path)
    assert out.startswith("IndexOpenError") and f"{path}{where} is a FIFO (named pipe), not a file" in out, out
    assert time.monotonic() - started < 20


def test_file_locked_by_another_process_says_so(sources: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(sources, "clean", tmp_path)
    holder = textwrap.dedent(
        """
        import sqlite3, sys, time
        conn = sqlite3.connect(sys.argv[1], isolation_level=None)
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        print("locked", flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", holder, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"locked"
        for readonly in (False, True):
            with pytest.raises(IndexOpenError) as excinfo:
                open_index(path, readonly=readonly, busy_timeout=0.2).close()
            message = str(excinfo.value)
            assert str(path) in message and "locked by another process" in message, message
            assert "corrupt" not in message, message
    finally:
        proc.communicate(b"")


def test_directory_this_user_cannot_write_is_named(sources: dict[str, Path], tmp_path: Path) -> None:
    """A WAL-mode file needs its -wal and -shm beside it even to be read: the message says that the
    directory is the obstacle, not that the file is corrupt."""
    directory = tmp_path / "d"
    directory.mkdir()
    path = copy_of(sources, "clean", directory)
    with immutable(directory):
        for readonly in (False, True):
            with pytest.raises(IndexOpenError) as excinfo:
                open_index(path, readonly=readonly).close()
            message = str(excinfo.value)
            assert f"its directory {directory} is not writable" in message and "corrupt" not in message, message


# -- item 8: a reader of the metadata that leaves the file in WAL mode ------------------------------------


def _readme_reader() -> Callable[[Path], dict[str, object]]:
    """The metadata reader recipe of the documentation (docs/operations.md), run as written."""
    page = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(# Read an index's self-description.*?)```", page, re.S)
    assert found, "docs/operations.md has no metadata reader recipe"
    assert "SqliteDict(" not in found.group(1)

    def read(path: Path) -> dict[str, object]:
        scope: dict[str, object] = {"path": str(path)}
        exec(found.group(1), scope)  # the project's own documentation, run as a reader would
        return scope["meta"]  # type: ignore[return-value]

    return read


def test_readme_metadata_reader_keeps_wal_mode(sources: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(sources, "pending", tmp_path)
    meta = _readme_reader()(path)
    assert meta == _meta(path) and meta["format"] == "scrapy-simhash-index"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with open_index(path) as ix:
        assert ix.count() == len(FPS)


def test_opening_again_in_the_same_process_keeps_its_locks(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock this process holds on it, SQLite's
    included: the checks at open must not do that, or another process closing the file would take
    it for the last user and delete the WAL under the live connection."""
    path = tmp_path / "i.sqlite3"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    with open_index(path) as live:
        live.check_and_add(Query(*FPS[0][:2], 2, 3, url=FPS[0][2]))
        assert Path(f"{path}-wal").stat().st_size > 0
        open_index(path).close()  # header and WAL checks in this process
        open_index(path, readonly=True).close()
        subprocess.run([sys.executable, "-c", "import sys; from scrapy_simhash.index import open_index\n"
                        "open_index(sys.argv[1]).close()", str(path)], check=True, env=env)
        assert Path(f"{path}-wal").exists(), "another process deleted the WAL of a live connection"
        live.check_and_add(Query(*FPS[1][:2], 2, 3, url=FPS[1][2]))
    with open_index(path) as ix:
        assert {e.url for e in ix.entries()} == {FPS[0][2], FPS[1][2]}


def test_a_wal_that_vanishes_while_it_is_checked_is_no_damage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last connection of another process may close (checkpoint, delete the WAL) between the
    check's look at the WAL and its read: nothing is pending then, and the open goes on (seen as
    "cannot read the WAL" in four processes creating one index at once)."""
    import contextlib

    from scrapy_simhash.index.sqlite import wal as sqlite_wal

    file = tmp_path / "i.sqlite3"
    with open_index(file) as ix:
        ix.check_and_add(Query(title_fp=1, body_fp=None, title_k=2, body_k=3, url="u"))
    wal = Path(f"{file}-wal")
    wal.write_bytes(b"not a WAL, and about to go" * 100)

    @contextlib.contextmanager
    def closed_meanwhile(shm: Path):
        wal.unlink()
        shm.unlink(missing_ok=True)
        yield True

    monkeypatch.setattr(sqlite_wal, "_alone", closed_meanwhile)
    sqlite_wal.check_wal(file, 4096, 1)  # no IndexOpenError
    monkeypatch.undo()
    with open_index(file) as ix:
        assert ix.count() == 1


# -- state that cannot be right: entries gone under their band rows, the id counter, the real WAL ------


@pytest.mark.parametrize(("script", "pattern"), [
    ("DELETE FROM entry;", "holds a (title|body) band row \\(band key \\d+\\) of a fingerprint that no entry of "
     "namespace id 1 holds: entries were deleted under their band rows"),
    # 8 band rows sampled an open: all on rows of the eighth entries kept with probability 8**-8
    ("DELETE FROM entry WHERE id % 8 <> 0;", "of a fingerprint that no entry of namespace id 1 holds"),
])
def test_entries_deleted_under_their_band_rows_are_refused(sources: dict[str, Path], tmp_path: Path, script: str,
                                                           pattern: str) -> None:
    """Band rows found, then no entry holding their fingerprint: every story would be new again
    (a ``DELETE FROM entry`` re-admitted all of them)."""
    path = copy_of(sources, "clean", tmp_path)
    faults._sql(path, script)
    assert_refused(path, pattern)


def test_entries_removed_through_the_index_leave_no_band_row_behind(sources: dict[str, Path], tmp_path: Path) -> None:
    """What forget and purge leave is consistent: it opens, each time (the sample is random)."""
    path = copy_of(sources, "clean", tmp_path)
    with open_index(path) as ix:
        assert sum(ix.forget(url) for _, _, url in FPS[::2]) == len(FPS[::2])
        ix.check_and_add(Query(*FPS[0][:2], 2, 3, url=FPS[0][2]))
    for _ in range(20):
        with open_index(path, readonly=True) as ix:
            assert ix.count() == len(FPS) - len(FPS[::2]) + 1


@pytest.mark.parametrize(("script", "pattern"), [
    ("UPDATE sqlite_sequence SET seq = 0;", f"entry id counter \\(sqlite_sequence\\) at 0, below its highest entry "
     f"id {len(FPS)}: the next entries would take the ids of forgotten ones"),
    ("DELETE FROM sqlite_sequence;", f"has 0 entry id counters \\(sqlite_sequence rows named 'entry'\\) where it "
     f"holds entries up to id {len(FPS)}"),
    ("INSERT INTO sqlite_sequence VALUES ('entry', 100000);", "has 2 entry id counters"),
])
def test_an_entry_id_counter_below_the_highest_id_is_refused(sources: dict[str, Path], tmp_path: Path, script: str,
                                                            pattern: str) -> None:
    """A lowered counter reuses the ids of forgotten entries: a decision or request pointing at a
    forgotten entry would point at a newer one."""
    path = copy_of(sources, "clean", tmp_path)
    faults._sql(path, script)
    assert_refused(path, pattern)


def test_a_counter_above_the_highest_id_is_what_forgetting_leaves(sources: dict[str, Path], tmp_path: Path) -> None:
    path = copy_of(sources, "clean", tmp_path)
    with open_index(path) as ix:
        newest = max(e.id for e in ix.entries())
        assert ix.forget(newest) == 1
    with open_index(path) as ix:
        assert ix.check_and_add(Query(1, 2, 2, 3, url="https://f.example/new")).entry_id == newest + 1


def test_a_damaged_wal_is_found_through_a_symbolic_link(sources: dict[str, Path], tmp_path: Path) -> None:
    """SQLite follows the link and replays ``<target>-wal``: the check reads that one (it read
    ``<link>-wal``, found none, and the open dropped the transactions after the damage)."""
    for name in ("intact", "damaged"):
        (tmp_path / name).mkdir()
    path = faults.behind_symlink(copy_of(sources, "pending", tmp_path / "intact"))
    with open_index(tmp_path / "intact" / path.name) as ix:  # an intact pending WAL behind the link: every entry
        assert {e.url for e in ix.entries()} == {url for _, _, url in FPS}
    path = copy_of(sources, "pending", tmp_path / "damaged")
    real = faults.behind_symlink(path)
    faults._overwrite(Path(f"{real}-wal"), Path(f"{real}-wal").stat().st_size // 2, faults._rng_bytes(64))
    before = states(real)
    for readonly in (False, True):
        with pytest.raises(IndexOpenError) as excinfo:
            open_index(path, readonly=readonly).close()
        message = str(excinfo.value)
        assert str(path) in message and f"move {real}-wal and {real}-shm aside" in message, message
        assert re.search("damaged: its WAL is damaged at frame \\d+: commit frame \\d+", message), message
        assert states(real) == before


@pytest.mark.parametrize("how", ["empty", "missing"])
def test_a_wal_emptied_or_deleted_under_an_intact_shm_is_refused(sources: dict[str, Path], tmp_path: Path,
                                                                how: str) -> None:
    """The -shm of the last writer records the committed frames its WAL held: with them gone,
    SQLite would open the file as it was before them (every entry of this file lost)."""
    path = copy_of(sources, "pending", tmp_path)
    if how == "empty":
        os.truncate(f"{path}-wal", 0)
    else:
        os.unlink(f"{path}-wal")
    assert_refused(path, f"damaged: its WAL is {how} but its last writer recorded \\d+ committed frames in it, "
                   "\\d+ of them not yet copied into the file")


def test_a_shm_left_behind_by_a_deleted_index_does_not_stop_a_new_one(sources: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    """The file and its WAL deleted, its -shm forgotten: the index made anew at that path opens (the
    -shm is the old file's, and SQLite resets it); the same -shm beside the old file is refused
    (test_a_wal_emptied_or_deleted_under_an_intact_shm_is_refused)."""
    path = copy_of(sources, "pending", tmp_path)
    os.unlink(path)
    os.unlink(f"{path}-wal")
    with open_index(path) as ix:
        ix.check_and_add(Query(*FPS[0][:2], 2, 3, url=FPS[0][2]))
    with open_index(path) as ix:
        assert ix.count() == 1


def test_an_emptied_wal_whose_frames_were_all_checkpointed_is_no_damage(sources: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    """A -shm saying every frame was copied into the file: an empty WAL loses nothing."""
    path = copy_of(sources, "pending", tmp_path)
    code = ("import os, signal, sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\n"
            "busy, log, done = c.execute('PRAGMA wal_checkpoint(PASSIVE)').fetchone()\nprint(log, done, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True).stdout.split()
    assert len(out) == 2 and out[0] == out[1] and int(out[0]) > 0, out  # all frames copied, the -shm left
    os.truncate(f"{path}-wal", 0)
    with open_index(path) as ix:
        assert {e.url for e in ix.entries()} == {url for _, _, url in FPS}


def test_an_unwritable_shm_is_refused_at_open_and_a_crawl_ends_with_the_error(sources: dict[str, Path],
                                                                             tmp_path: Path) -> None:
    """SQLite maps the -shm and writes it at every transaction: an immutable one is named at a
    writable open (a real ``scrapy runspider`` is refused at open, exit status 1, not SIGBUS); reading
    tools still open the file read-only."""
    path = copy_of(sources, "pending", tmp_path)
    shm = Path(f"{path}-shm")
    items, kept = tmp_path / "items.jsonl", tmp_path / "kept.jsonl"
    faults.write_jsonl(items, [{"title": f"title {k}", "body": f"body {k}", "url": url}
                               for k, (_, _, url) in enumerate(FPS[:5])])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    with immutable(shm):
        before = states(path)
        with pytest.raises(IndexOpenError) as excinfo:
            open_index(path).close()
        assert (f"index {path} cannot be written: {shm} is immutable (chattr +i), and SQLite must write its -shm "
                "file at every transaction") in str(excinfo.value)
        assert states(path) == before
        with open_index(path, readonly=True) as ix:
            assert ix.count() == len(FPS)
        crawl = subprocess.run([*faults.crawl_command(items, path, kept, tmp_path), "-s", "LOG_LEVEL=INFO"],
                               capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert crawl.returncode == 1, (crawl.returncode, crawl.stderr[-2000:])  # refused at open; not -7: SIGBUS
    assert f"cannot open its index sqlite:///{path}: index {path} cannot be written: {shm} is immutable" in crawl.stderr
    assert "Crawled (200)" not in crawl.stderr and "Traceback" not in crawl.stderr
    assert not kept.exists() or not kept.read_text()
    with open_index(path) as ix:
        assert ix.count() == len(FPS)
