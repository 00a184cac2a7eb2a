"""Re-banding a SQLite index in place: new band rows from the full fingerprints of its entries.

Every entry keeps its whole title and body fingerprints, so the band rows of another threshold
(:mod:`.bands`) can be rebuilt from them without the texts. It is one ``BEGIN IMMEDIATE``
transaction: the band rows are deleted, rebuilt in key order (an ``INSERT … SELECT … ORDER BY``: the
B-tree is appended to, not written at random) and the meta record updated, then committed. A process
killed at any point leaves the file as it was (WAL: an uncommitted transaction is never seen); crawls
sharing the file wait for the lock meanwhile (their ``busy_timeout``), then go on with the new layout.
Only a file of this version's schema is re-banded; any other is refused as at open.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...__version__ import __version__
from ..bands import bands_for, records
from ..base import TIERS, IndexOpenError, IndexParams
from ..meta import check_params, verify_meta
from . import dense as sqlite_dense
from .file import META_TABLE, SCHEMA_VERSION, _json_encode, check_header, check_schema, connect, read_meta, sqlite_error
from .tables import Rows, check_storage_meta, storage_meta, value_bits
from .values import codec

#: Progress is reported every this many band rows computed.
PROGRESS_EVERY = 20_000

Progress = Callable[[int, int], None]


def reband(
    path: str | os.PathLike[str], *, title_bands: int | None = None, body_bands: int | None = None,
    at_least: bool = False, progress: Progress | None = None, busy_timeout: float = 30.0,
) -> dict[str, Any]:
    """Rebuild the band rows of the index file at ``path`` for ``title_bands``/``body_bands`` (None:
    keep the recorded number; ``at_least``: never fewer than recorded, so that no other namespace of
    the file loses a threshold it answered), in one transaction. Returns
    ``{"entries", "band_rows", "params", "previous", "seconds"}``. ``progress(done, total)`` is
    called as band rows are computed (total: the rows to compute)."""
    file = Path(os.path.expanduser(os.fspath(path))).absolute()
    if not file.exists():
        raise IndexOpenError(f"index {file} does not exist")
    check_header(file)
    conn = connect(file, False, busy_timeout)
    try:
        return _reband(conn, file, title_bands, body_bands, at_least, progress)
    except sqlite3.Error as exc:
        raise sqlite_error(str(file), exc, "re-banding") from exc
    finally:
        conn.close()


def _reband(
    conn: sqlite3.Connection, file: Path, title_bands: int | None, body_bands: int | None, at_least: bool,
    progress: Progress | None,
) -> dict[str, Any]:
    started = time.perf_counter()
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA cache_size=-262144")  # 256 MiB: the sort and the B-tree appends
    conn.execute("BEGIN IMMEDIATE")
    try:
        meta = read_meta(conn, file)  # under the lock: nobody re-bands it meanwhile
        previous = verify_meta(meta, str(file), SCHEMA_VERSION, None, "file", layout_records=records)
        check_schema(conn, file)
        check_storage_meta(meta, previous, str(file))
        params = IndexParams(**{**previous.as_dict(), **{
            name: max(value, getattr(previous, name)) if at_least else value
            for name, value in (("title_bands", title_bands), ("body_bands", body_bands)) if value is not None}})
        check_params(params)
        entries, band_rows = _rebuild(conn, params, progress)
        new = {"params": params.as_dict(), **{
            f"{tier}_layout": record for tier, record in records(params).items()},
            **storage_meta(params), "rebanded": time.time(), "rebanded_by": f"scrapy-simhash {__version__}"}
        conn.executemany(f'INSERT OR REPLACE INTO "{META_TABLE}"(key, value) VALUES (?, ?)',
                         [(key, _json_encode(value)) for key, value in new.items()])
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    with contextlib.suppress(sqlite3.Error):
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"entries": entries, "band_rows": band_rows, "params": params.as_dict(),
            "previous": previous.as_dict(), "seconds": time.perf_counter() - started}


def _rebuild(conn: sqlite3.Connection, params: IndexParams, progress: Progress | None) -> tuple[int, int]:
    """Delete every band row and insert those of ``params``'s layout; returns (entries, band rows)."""
    tiers, vbits = bands_for(params), value_bits(params)
    enc, dec = codec(params.bits)
    rows: dict[int, Rows] = {}
    (entries,) = conn.execute("SELECT count(*) FROM entry").fetchone()
    total = sum(conn.execute(f"SELECT count(*) FROM entry WHERE {tier}_fp IS NOT NULL").fetchone()[0]
                * len(tiers[tier].parts) for tier in TIERS)
    done = 0

    def key(ns: int, tier: str, number: int, raw: Any) -> int:
        nonlocal done
        ns_rows = rows.get(ns)
        if ns_rows is None:
            ns_rows = rows[ns] = Rows(ns, "", tiers, vbits, enc, dec)
        done += 1
        if progress is not None and done % PROGRESS_EVERY == 0:
            progress(done, total)
        return ns_rows.keys(tier, dec(raw))[number]  # type: ignore[arg-type]

    conn.create_function("simhash_band_key", 4, key)
    conn.execute("DELETE FROM band")
    conn.execute("DELETE FROM band2")
    for tier in TIERS:
        for number in range(len(tiers[tier].parts)):
            conn.execute(
                f"INSERT OR IGNORE INTO band(key, fp) SELECT simhash_band_key(ns, ?, ?, {tier}_fp) AS k, {tier}_fp"
                f" FROM entry WHERE {tier}_fp IS NOT NULL ORDER BY k, {tier}_fp", (tier, number))
    any_ns = Rows(0, "", tiers, vbits, enc, dec)  # what splitting needs: the layout, the codec, key packing
    sqlite_dense.split_dense(conn, any_ns, conn.execute(
        "SELECT key, count(*) FROM band GROUP BY key HAVING count(*) >= ?", (sqlite_dense.MIN_SPLIT,)).fetchall())
    if progress is not None:
        progress(total, total)
    band_rows = sum(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("band", "band2"))
    return entries, band_rows
