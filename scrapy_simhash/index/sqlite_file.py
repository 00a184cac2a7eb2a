"""The SQLite index file itself: made whole or not at all, and refused untouched when it is not ours.

Everything here is about the file, not the rule: building a new file under a temporary name and
linking it into place, checking the header of an existing one before SQLite reads it, reading its
self-description (JSON only, never pickle), probing that it can be written, and naming the file in
every error. The schema it holds is described in :mod:`.sqlite_tables`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from sqlitedict import SqliteDict

from .base import IndexError_, IndexOpenError, IndexWriteError
from .sqlite_tables import SCHEMA

#: 2: entry.numbers (title tier's number guard), sentence table (opt-in tier). 3: sentence hashes as
#: 8-byte integers, an entry's sample in its row (entry.sentences), entry.short (short bodies),
#: entry.numbers as a BLOB.
SCHEMA_VERSION = 3
META_TABLE = "simhash_meta"
TABLES = ("namespace", "entry", "band", "decision", "sentence")
_SQLITE_MAGIC = b"SQLite format 3\x00"



def _json_encode(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def create_file(file: Path, meta: dict[str, Any]) -> None:
    """Build a complete index file recording ``meta`` under a temporary name, then link it into
    place atomically.

    ``os.link`` fails if the name exists, so when two processes create the same file at once
    one wins and the other simply opens the winner's file; nobody ever sees half a file.
    """
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IndexOpenError(f"cannot create the directory of index {file}: {exc}") from exc
    tmp = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}.creating")
    try:
        # Fail here, in this thread, if the directory cannot be written: sqlitedict would fail
        # in its background thread first.
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        with SqliteDict(
            str(tmp),
            tablename=META_TABLE,
            flag="n",
            encode=_json_encode,
            decode=json.loads,
            autocommit=False,
        ) as sd:
            for key, value in meta.items():
                sd[key] = value
            sd.commit()
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            conn.executescript(f"BEGIN; {SCHEMA} COMMIT;")
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, file)
        except FileExistsError:
            pass  # someone else created it first: open theirs
        except OSError:
            # Filesystems without hard links: a rename is atomic but could replace a file made
            # in the meantime, so only do it if the name is still free.
            if not file.exists():
                os.replace(tmp, file)
        with contextlib.suppress(OSError):
            dfd = os.open(file.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        raise IndexOpenError(f"cannot create index {file}: {exc}") from exc
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{tmp}{suffix}")


def check_header(file: Path) -> None:
    """Reject what SQLite would reject later (or worse, half-read) before touching the file."""
    if file.is_dir():
        raise IndexOpenError(f"index {file} is a directory, not a file")
    try:
        size = file.stat().st_size
        with open(file, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise IndexOpenError(f"cannot read index {file}: {exc}") from exc
    if size == 0:
        raise IndexOpenError(
            f"{file} is an empty file, not a scrapy-simhash index "
            "(delete it to let a new index be created)"
        )
    if header[:16] != _SQLITE_MAGIC:
        raise IndexOpenError(
            f"{file} is not a SQLite database (garbage or another format): not a scrapy-simhash index"
        )
    if len(header) < 100:
        raise IndexOpenError(f"index {file} is truncated ({size} bytes, shorter than a SQLite header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    change_counter = int.from_bytes(header[24:28], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    wal = Path(f"{file}-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0
    if pages and change_counter == valid_for and not wal_pending and size < pages * page_size:
        raise IndexOpenError(
            f"index {file} is truncated: {size} bytes but its header says {pages} pages of {page_size}"
        )


def probe_write(conn: sqlite3.Connection) -> None:
    """Try a write (rolled back) so a file SQLite can only read fails at open, not at the first
    item. A lock held by another process says nothing about that: the probe then gives way at
    once (check-and-adds wait for locks and are retried)."""
    busy_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO namespace(name, created) VALUES (char(0) || 'probe', 0)")
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")


def read_meta(conn: sqlite3.Connection, file: Path) -> dict[str, Any]:
    """The self-description: the sqlitedict table, read on our own connection, JSON only.

    Reading goes through our connection rather than ``SqliteDict(flag="r")`` because the latter
    opens a second, read-write connection that runs ``PRAGMA journal_mode``/``synchronous``
    (writes, on a file opened read-only or not yet known to be ours) and leaves a helper
    connection open until the next garbage collection (file descriptors, WAL left behind).
    """
    try:
        rows = conn.execute(f'SELECT key, value FROM "{META_TABLE}"').fetchall()
        return {str(key): json.loads(value) for key, value in rows}
    except (ValueError, TypeError, sqlite3.Error) as exc:
        raise IndexOpenError(
            f"index {file}: unreadable {META_TABLE} table (not a scrapy-simhash index?): {exc}"
        ) from exc


def sqlite_error(location: str, exc: BaseException, doing: str) -> IndexError_:
    """Map a sqlite3 error to ours, naming the file: corruption apart from write failures."""
    text = str(exc)
    if any(s in text for s in ("malformed", "not a database", "disk image")):
        return IndexError_(f"index {location} is corrupt ({text}) while {doing}")
    return IndexWriteError(f"index {location}: {doing} failed: {text}")
