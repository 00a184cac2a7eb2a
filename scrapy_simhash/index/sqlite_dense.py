"""Dense band buckets, split further: what keeps a check short when fingerprints crowd together.

Fingerprints crowded around one centre (boilerplate-heavy sites: distinct texts sharing most of
their bits) share part values, so a bucket of the ``band`` table can hold thousands of them, every
one a candidate of a check that probes it. Once a bucket holds :data:`SPLIT_AT` fingerprints it is
*split*: its rows move to ``band2``, keyed by ``(bucket key, sub-key)`` where the sub-keys are those
of the fingerprint's other bits (:meth:`.bands.TierBands.store_split`), and the bucket keeps one
marker row (``fp`` = an empty BLOB, a value no fingerprint has). A check that meets the marker reads
the bucket's ``band2`` rows under the sub-keys of its own other bits
(:meth:`~.bands.TierBands.probe_split`): an entry in the bucket agrees with the query's probed
value of that part, so its other bits are within the threshold of the query's, and the sub-layout
answers that exactly. A split bucket stays split (its rows are maintained in ``band2``) even if
entries go. One level only: at 10M clustered entries the sub-buckets hold ~100.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

#: A bucket is split when it holds this many fingerprints (reading 64 rows costs about what the
#: ~34 sub-probes of a split bucket cost).
SPLIT_AT = 64
#: ``band.fp`` of a split bucket's marker row.
MARKER = b""
SUB_VALUE_BITS = 56
_CHUNK = 400


def sub_keys(values: Iterable[tuple[int, int]]) -> list[int]:
    """``band2.sub`` of ``(sub-part, value)`` pairs (a value wider than 56 bits is folded: more candidates only)."""
    mask = (1 << SUB_VALUE_BITS) - 1
    out = []
    for j, value in values:
        while value >> SUB_VALUE_BITS:
            value = (value & mask) ^ (value >> SUB_VALUE_BITS)
        out.append(j << SUB_VALUE_BITS | value)
    return out


def is_marker(raw: Any) -> bool:
    return type(raw) is bytes and not raw


def write(conn: sqlite3.Connection, rows: Any, placed: list[tuple[int, Any, Any, int, int]]) -> None:
    """Store band rows ``(key, stored fp, tier, part, fp)``: in ``band``, or in ``band2`` for split
    buckets; then split the buckets these rows made dense.

    One statement reads, per bucket, its size and whether it is split, before the rows go in: a
    bucket can only have become dense if its size before plus the rows placed under it reach
    :data:`SPLIT_AT`, and only such buckets (rare) are counted again after the insert."""
    placed_under: dict[int, int] = {}
    for key, *_ in placed:
        placed_under[key] = placed_under.get(key, 0) + 1
    split: set[int] = set()
    size: dict[int, int] = {}
    keys = list(placed_under)
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i : i + _CHUNK]
        for key, count, marked in conn.execute(
                f"SELECT key, count(*), max(fp = ?) FROM band WHERE key IN ({','.join('?' * len(chunk))})"
                " GROUP BY key", (MARKER, *chunk)):
            if marked:
                split.add(key)
            size[key] = count
    plain = [(key, raw) for key, raw, *_ in placed if key not in split]
    if plain:
        conn.executemany("INSERT OR IGNORE INTO band(key, fp) VALUES (?, ?)", plain)
    subs = [(key, sub, raw) for key, raw, tier, part, fp in placed if key in split
            for sub in sub_keys(rows.tiers[tier].store_split(fp, part))]
    if subs:
        conn.executemany("INSERT OR IGNORE INTO band2(key, sub, fp) VALUES (?, ?, ?)", subs)
    fresh = sorted({(key, tier, part) for key, _, tier, part, _ in placed
                    if key not in split and rows.tiers[tier].splits[part] is not None
                    and size.get(key, 0) + placed_under[key] >= SPLIT_AT})
    for i in range(0, len(fresh), _CHUNK):
        chunk = fresh[i : i + _CHUNK]
        where = {key: (tier, part) for key, tier, part in chunk}
        dense = conn.execute(
            f"SELECT key FROM band WHERE key IN ({','.join('?' * len(chunk))}) GROUP BY key HAVING count(*) >= ?",
            (*where, SPLIT_AT)).fetchall()
        for (key,) in dense:
            split_bucket(conn, rows, key, *where[key])


def split_bucket(conn: sqlite3.Connection, rows: Any, key: int, tier: str, part: int) -> None:
    """Move a bucket's rows to ``band2`` and leave its marker."""
    raws = [raw for (raw,) in conn.execute("SELECT fp FROM band WHERE key = ?", (key,)) if not is_marker(raw)]
    layout = rows.tiers[tier]
    conn.executemany("INSERT OR IGNORE INTO band2(key, sub, fp) VALUES (?, ?, ?)",
                     [(key, sub, raw) for raw in raws for sub in sub_keys(layout.store_split(rows.dec(raw), part))])
    conn.execute("DELETE FROM band WHERE key = ?", (key,))
    conn.execute("INSERT INTO band(key, fp) VALUES (?, ?)", (key, MARKER))


def candidates(conn: sqlite3.Connection, rows: Any, tier: str, fp: int) -> list[int]:
    """Stored fingerprints sharing a probed row with ``fp``: plain buckets, and split buckets' sub-rows."""
    layout, dec = rows.tiers[tier], rows.dec
    keys = rows.probe_keys(tier, fp)
    found, split = [], []
    for key, raw in conn.execute(rows.sql_band[tier], keys):
        if is_marker(raw):
            split.append(key)
        else:
            found.append(dec(raw))
    if split:
        parts = dict(zip(keys, (n for n, _ in layout.probe(fp)), strict=True))
        for key in split:
            subs = sub_keys(layout.probe_split(fp, parts[key]))
            found += [dec(raw) for (raw,) in conn.execute(
                f"SELECT fp FROM band2 WHERE key = ? AND sub IN ({','.join('?' * len(subs))})", (key, *subs))]
    return found


def drop(conn: sqlite3.Connection, rows: Any, tier: str, raw: Any) -> None:
    """Delete every band row of one stored fingerprint of ``tier`` (plain and split buckets)."""
    fp, layout = rows.dec(raw), rows.tiers[tier]
    keys = rows.keys(tier, fp)
    conn.executemany("DELETE FROM band WHERE key = ? AND fp = ?", [(key, raw) for key in keys])
    conn.executemany("DELETE FROM band2 WHERE key = ? AND sub = ? AND fp = ?",
                     [(key, sub, raw) for part, key in enumerate(keys)
                      for sub in sub_keys(layout.store_split(fp, part))])


def held(conn: sqlite3.Connection, rows: Any, tier: str, raw: Any) -> int:
    """How many of its parts' rows one stored fingerprint has (plain or in a split bucket)."""
    fp, layout = rows.dec(raw), rows.tiers[tier]
    present = 0
    for part, key in enumerate(rows.keys(tier, fp)):
        if conn.execute("SELECT 1 FROM band WHERE key = ? AND fp = ?", (key, raw)).fetchone() is not None:
            present += 1
            continue
        subs = sub_keys(layout.store_split(fp, part))
        if subs and conn.execute("SELECT 1 FROM band WHERE key = ? AND fp = ?", (key, MARKER)).fetchone() and \
                conn.execute("SELECT 1 FROM band2 WHERE key = ? AND sub = ? AND fp = ?",
                             (key, subs[0], raw)).fetchone() is not None:
            present += 1
    return present
