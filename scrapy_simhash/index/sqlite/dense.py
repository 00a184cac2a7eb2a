"""Split band buckets in SQLite: where the rows of a crowded bucket go, and the statements that read them.

When to split a bucket, which sub-buckets a fingerprint goes to and which ones a query reads are
the shared layout's (:mod:`..bands`: :func:`~..bands.split_at`, :func:`~..bands.children`,
:func:`~..bands.plan`); this module stores them. A split ``band`` bucket keeps one marker row
(``fp`` = an empty BLOB, a value no fingerprint has) and its fingerprints move to ``band2``; a
``band2`` bucket that grows dense is split the same way, in ``band2``. Each level is read by one
statement.

``band2`` keys: ``(namespace id, tier, path code, hash)`` packed in 63 bits, where the path code
numbers the parts taken from the top (:attr:`~..bands.Split.codes`) and the hash is 34 bits of the
parent bucket's key, mixed, XOR the sub-part's value. Two buckets whose keys meet by chance share
the namespace, tier and path, so their fingerprints are split by the same bits and found by the
same probes: a check reads the other bucket's rows as extra candidates, verified like every other
(never a missed one), and a fingerprint's rows stay its namespace's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from .. import bands
from ..bands import MIN_SPLIT, Split, plan, split_at

__all__ = ["MARKER", "MIN_SPLIT", "Split", "candidates", "drop", "held", "is_marker", "plan", "split_at",
           "split_dense", "write"]
from .schema import insert_rows_sql

#: ``band.fp`` / ``band2.fp`` of a split bucket's marker row.
MARKER = b""
PATH_BITS = bands.PATH_BITS
HASH_BITS = 34  # 63 - namespace bits (20) - tier (1) - PATH_BITS
_HASH_MASK = (1 << HASH_BITS) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1
_CHUNK = 400
_PADDED = (8, 32, 128, _CHUNK)  # IN-list sizes of the band2 statement (cached, not prepared each time)
_NONE = ((), 0, -1)

#: A band row on its way into a bucket: ``(bucket key, stored fp, tier, path, rest)``; the path is the
#: part numbers taken so far (the first is the ``band`` part), the rest the bits not yet taken (None:
#: not computed yet, a ``band`` row's).
Item = tuple[int, Any, str, tuple[int, ...], "int | None"]


def child(parent: int, prefix: int, code: int, value: int) -> int:
    """The ``band2`` key of sub-part ``code`` (its value ``value``) of the bucket ``parent``;
    ``prefix`` is the namespace id and tier bit (:meth:`.sqlite_tables.Rows.prefix`)."""
    while value >> HASH_BITS:  # a sub-part wider than the hash (few parts of wide fingerprints): folded
        value = (value & _HASH_MASK) ^ (value >> HASH_BITS)
    mixed = ((parent * _GOLDEN) & _MASK64) >> (64 - HASH_BITS)
    return ((prefix << PATH_BITS | code) << HASH_BITS) | (mixed ^ value)


def is_marker(raw: Any) -> bool:
    return type(raw) is bytes and not raw


def _below(rows: Any, item: Item, depth: int) -> list[Item]:
    """The items of ``item``'s fingerprint in the sub-buckets of its (split) bucket."""
    key, raw, tier, path, rest = item
    top = rows.tiers[tier]
    if rest is None:
        rest = top.rest(rows.dec(raw), path[0])
    prefix = rows.prefix(key, depth)
    return [(child(key, prefix, code, value), raw, tier, sub, sub_rest)
            for code, value, sub, sub_rest in bands.children(top, path, rest)]


def write(conn: sqlite3.Connection, rows: Any, placed: list[tuple[int, Any, str, int, int]],
          sizes: dict[int, tuple[int, bool]] | None = None) -> None:
    """Store band rows ``(key, stored fp, tier, part, fp)``: in ``band``, or below for split buckets;
    then split the buckets these rows made dense. ``sizes``: ``{key: (rows, split)}`` of every
    ``band`` bucket of ``placed``, read already in this transaction (else read here)."""
    _descend(conn, rows, [(key, raw, tier, (part,), None) for key, raw, tier, part, _ in placed], 0, sizes)


def split_dense(conn: sqlite3.Connection, rows: Any, sizes: Iterable[tuple[int, int]]) -> None:
    """Split the ``band`` buckets of these ``(key, fingerprints)`` that hold their threshold, and
    below them (re-banding, after the bulk insert)."""
    items: list[Item] = []
    for key, size in sizes:
        tier, part = rows.part_of(key)
        split = bands.plan(rows.tiers[tier]).get((part,))
        if split is not None and size >= bands.split_at(rows.tiers[tier], split):
            items += _split(conn, rows, "band", key, tier, (part,), 0)
    _descend(conn, rows, items, 1)


def _descend(conn: sqlite3.Connection, rows: Any, items: list[Item], depth: int,
             sizes: dict[int, tuple[int, bool]] | None = None) -> None:
    """Place ``items`` at ``depth``, then the rows of the buckets split meanwhile one level down, …"""
    while items:
        items = _place(conn, rows, items, depth, sizes)
        depth, sizes = depth + 1, None


def _place(conn: sqlite3.Connection, rows: Any, items: list[Item], depth: int,
           known: dict[int, tuple[int, bool]] | None = None) -> list[Item]:
    """Insert ``items`` into their buckets at ``depth`` (0: ``band``); returns those of split buckets,
    for the level below. One statement reads, per bucket, its size and whether it is split, before the
    rows go in: only buckets whose size before plus the rows placed reach their threshold (rare) are
    counted again after the insert."""
    table = "band" if depth == 0 else "band2"
    if known is not None and len(known) == len(items) and all(
            item[0] in known and known[item[0]][0] + 1 < bands.MIN_SPLIT and not known[item[0]][1] for item in items):
        # the usual case (distinct keys, every bucket small and none split, so none splits now:
        # what the general path below finds): the rows go in with one statement
        conn.execute(insert_rows_sql(table, "key, fp", len(items)), [x for item in items for x in item[:2]])
        return []
    placed_under: dict[int, int] = {}
    for item in items:
        placed_under[item[0]] = placed_under.get(item[0], 0) + 1
    split: set[int] = set()
    size: dict[int, int] = {}
    keys = list(placed_under)
    if known is not None and all(key in known for key in keys):
        size = {key: known[key][0] for key in keys if known[key][0]}
        split = {key for key in keys if known[key][1]}
        keys = []
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i : i + _CHUNK]
        for key, count, marked in conn.execute(
                f"SELECT key, count(*), max(fp = ?) FROM {table} WHERE key IN ({','.join('?' * len(chunk))})"
                " GROUP BY key", (MARKER, *chunk)):
            if marked:
                split.add(key)
            size[key] = count
    below: list[Item] = []
    plain = []
    for item in items:
        if item[0] in split and item[3] in bands.plan(rows.tiers[item[2]]):
            below += _below(rows, item, depth)
        else:
            plain.append(item)
    if plain:
        conn.executemany(f"INSERT OR IGNORE INTO {table}(key, fp) VALUES (?, ?)", [item[:2] for item in plain])
    fresh: dict[int, tuple[str, tuple[int, ...], int]] = {}
    thresholds: dict[tuple[str, tuple[int, ...]], int | None] = {}
    for key, _, tier, path, _ in plain:
        if key in fresh or size.get(key, 0) + placed_under[key] < bands.MIN_SPLIT:
            continue
        if (tier, path) not in thresholds:
            how = bands.plan(rows.tiers[tier]).get(path)
            thresholds[tier, path] = None if how is None else bands.split_at(rows.tiers[tier], how)
        threshold = thresholds[tier, path]
        if threshold is not None and size.get(key, 0) + placed_under[key] >= threshold:
            fresh[key] = (tier, path, threshold)
    for key, (tier, path, threshold) in fresh.items():
        if conn.execute(f"SELECT count(*) FROM {table} WHERE key = ?", (key,)).fetchone()[0] >= threshold:
            below += _split(conn, rows, table, key, tier, path, depth)
    return below


def _split(conn: sqlite3.Connection, rows: Any, table: str, key: int, tier: str, path: tuple[int, ...],
           depth: int) -> list[Item]:
    """Leave a bucket's marker; returns its fingerprints' items for the level below."""
    raws = [raw for (raw,) in conn.execute(f"SELECT fp FROM {table} WHERE key = ?", (key,)) if not is_marker(raw)]
    conn.execute(f"DELETE FROM {table} WHERE key = ?", (key,))
    conn.execute(f"INSERT INTO {table}(key, fp) VALUES (?, ?)", (key, MARKER))
    top, dec = rows.tiers[tier], rows.dec
    return [item for raw in raws
            for item in _below(rows, (key, raw, tier, path, bands.rest_at(top, path, dec(raw))), depth)]


def _read_below(conn: sqlite3.Connection, keys: list[int]) -> list[tuple[int, Any]]:
    """The ``band2`` rows under these keys (one statement a 400, of a few IN-list sizes: cached)."""
    out = []
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i : i + _CHUNK]
        size = next(n for n in _PADDED if n >= len(chunk))
        chunk += chunk[-1:] * (size - len(chunk))  # a repeated key reads its rows once
        out += conn.execute(f"SELECT key, fp FROM band2 WHERE key IN ({','.join('?' * size)})", chunk).fetchall()
    return out


def candidates(conn: sqlite3.Connection, rows: Any, tier: str, fp: int,
               band_rows: list[tuple[int, Any]] | None = None) -> list[int]:
    """Stored fingerprints sharing a probed row with ``fp``: plain buckets, and split buckets' sub-rows
    (``band_rows``: the ``band`` rows under its probes, read already in this transaction)."""
    top, dec = rows.tiers[tier], rows.dec
    if band_rows is None:
        band_rows = conn.execute(rows.sql_band[tier], rows.probe_keys(tier, fp)).fetchall()
    found, marked = [], set()
    for key, raw in band_rows:
        if is_marker(raw):
            marked.add(key)
        else:
            found.append(dec(raw))
    if not marked:
        return found
    keys = rows.probe_keys(tier, fp)
    # bucket key -> (path, rest, bits remaining); a key two probes share (folded values) keeps the most
    frontier: dict[int, tuple[tuple[int, ...], int, int]] = {}
    for key, (part, spent) in zip(keys, bands.probe_spent(top), strict=True):
        if key in marked and (key not in frontier or frontier[key][2] < top.distance - spent):
            frontier[key] = ((part,), top.rest(fp, part), top.distance - spent)
    depth = 0
    while frontier:
        probes: dict[int, tuple[tuple[int, ...], int, int]] = {}
        for key, (path, rest, remaining) in frontier.items():
            # empty for a marker the layout does not split by: not ours (check_rows refuses most)
            high = rows.prefix(key, depth) << PATH_BITS
            mixed = ((key * _GOLDEN) & _MASK64) >> (64 - HASH_BITS)
            for code, value, sub_path, sub_rest, left in bands.sub_probes(top, path, rest, remaining):
                sub = ((high | code) << HASH_BITS) | (mixed ^ value) if value <= _HASH_MASK else \
                    child(key, high >> PATH_BITS, code, value)
                if left > probes.get(sub, _NONE)[2]:
                    probes[sub] = (sub_path, sub_rest, left)
        frontier = {}
        for key, raw in _read_below(conn, list(probes)):
            if is_marker(raw):
                frontier[key] = probes[key]
            else:
                found.append(dec(raw))
        depth += 1
    return found


def _chain(rows: Any, tier: str, fp: int, part: int, key: int) -> list[tuple[int, tuple[int, ...]]]:
    """Every ``band2`` key (with its path) where ``fp``'s rows of ``part`` may be, top down."""
    top = rows.tiers[tier]
    out = []
    stack: list[Item] = [(key, None, tier, (part,), top.rest(fp, part))]
    while stack:
        item = stack.pop()
        if item[3] in bands.plan(top):
            for sub in _below(rows, item, len(item[3]) - 1):
                out.append((sub[0], sub[3]))
                stack.append(sub)
    return out


def drop(conn: sqlite3.Connection, rows: Any, tier: str, raw: Any) -> None:
    """Delete every band row of one stored fingerprint of ``tier`` (plain and split buckets)."""
    fp = rows.dec(raw)
    keys = rows.keys(tier, fp)
    conn.executemany("DELETE FROM band WHERE key = ? AND fp = ?", [(key, raw) for key in keys])
    conn.executemany("DELETE FROM band2 WHERE key = ? AND fp = ?",
                     [(sub, raw) for part, key in enumerate(keys) for sub, _ in _chain(rows, tier, fp, part, key)])


def held(conn: sqlite3.Connection, rows: Any, tier: str, raw: Any) -> int:
    """How many of its parts' rows one stored fingerprint has (plain or in a split bucket: followed
    through the markers by its first sub-part)."""
    fp, top = rows.dec(raw), rows.tiers[tier]
    present = 0
    for part, key in enumerate(rows.keys(tier, fp)):
        item: Item = (key, raw, tier, (part,), top.rest(fp, part))
        table, depth = "band", 0
        while True:
            if conn.execute(f"SELECT 1 FROM {table} WHERE key = ? AND fp = ?", (item[0], raw)).fetchone():
                present += 1
                break
            if item[3] not in bands.plan(top) or not conn.execute(
                    f"SELECT 1 FROM {table} WHERE key = ? AND fp = ?", (item[0], MARKER)).fetchone():
                break
            item, table, depth = _below(rows, item, depth)[0], "band2", depth + 1
    return present
