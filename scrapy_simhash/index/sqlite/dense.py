"""Dense band buckets, split further: what keeps a check short when fingerprints crowd together.

Fingerprints crowded around one centre (boilerplate-heavy sites: distinct texts sharing most of
their bits) share part values, so a bucket of the ``band`` table can hold thousands of them, every
one a candidate of a check that probes it, and the buckets next to it (one bit away, what the
probes also read) hold many more. A bucket that reaches its threshold (:func:`split_at`) is *split*:
it keeps one marker row (``fp`` = an empty BLOB, a value no fingerprint has) and its fingerprints
move to ``band2``, into the buckets of the multi-index layout of their other bits
(:attr:`.bands.TierBands.splits`, :meth:`~.bands.TierBands.rest`). A ``band2`` bucket that grows
dense is split the same way once more, into ``band2`` buckets of the bits left (two levels,
:data:`MAX_DEPTH`). A split bucket stays split (its rows are maintained below) even if entries go.

A check that meets a marker reads the sub-buckets of its own other bits within the bits it has left:
a bucket reached through a probe that flipped ``s`` bits holds fingerprints ``s`` bits away in that
part, so the rest must be within ``k - s`` (:meth:`~.bands.TierBands.probe_within`); every fingerprint
within ``k`` is still found, and the sub-probes of a neighbour's bucket are few (k=2: 2 exact
sub-probes instead of 34). Each level is one statement.

``band2`` keys: ``(namespace id, tier, path, hash)`` packed in 63 bits, where the path numbers the
parts taken from the top (its level and, per level, which part: exact) and the hash is 34 bits of
the parent bucket's key, mixed, XOR the sub-part's value. Two buckets whose keys meet by chance share
the namespace, tier and path, so their fingerprints are split by the same bits and found by the
same probes: a check reads the other bucket's rows as extra candidates, verified like every other
(never a missed one), and a fingerprint's rows stay its namespace's.

Thresholds: a sub-probe in a batched statement costs about half the CPU of a row read (~0.27 µs
against ~0.5 µs with its decode and distance, on the clustered data of ``benchmarks/index_scaling.py``:
``benchmarks/README.md``), so a bucket is
split once reading it costs more than the sub-probes of a visit through a neighbour (one bit spent at
each level above): title k=2 at 4 fingerprints, body k=3 at 17 in ``band``, 4 in ``band2``.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..bands import TierBands
from .schema import insert_rows_sql

#: ``band.fp`` / ``band2.fp`` of a split bucket's marker row.
MARKER = b""
#: Levels of ``band2`` buckets below a ``band`` bucket.
MAX_DEPTH = 2
#: A bucket of fewer fingerprints is never split (a marker and a row per sub-part each cost more).
MIN_SPLIT = 4
#: What one sub-probe costs, in row reads (measured: ~0.27 µs a probe, ~0.5 µs a row).
PROBE_ROWS = 0.5
PATH_BITS = 8
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


@dataclass(frozen=True)
class Split:
    """How the buckets of one path split: the layout of their fingerprints' other bits, the path
    code of each sub-part, and the depth of the sub-buckets (1: ``band2`` below ``band``)."""

    layout: TierBands
    codes: tuple[int, ...]
    depth: int


def plan(top: TierBands) -> dict[tuple[int, ...], Split]:
    """Per path of a splittable bucket, its :class:`Split` (a path without one is never split)."""
    known = _PLANS.get(id(top))  # by identity: hashing the layout costs more than the rest of a lookup
    if known is None or known[0] is not top:
        known = _PLANS[id(top)] = (top, _plan(top))
    return known[1]


_PLANS: dict[int, tuple[TierBands, dict[tuple[int, ...], Split]]] = {}


@cache
def _plan(top: TierBands) -> dict[tuple[int, ...], Split]:
    out: dict[tuple[int, ...], Split] = {}
    code = 0

    def walk(path: tuple[int, ...], layout: TierBands, depth: int) -> None:
        nonlocal code
        sub = layout.splits[path[-1]]
        if sub is None or depth > MAX_DEPTH or code + len(sub.parts) > 1 << PATH_BITS:
            return
        out[path] = Split(sub, tuple(range(code, code + len(sub.parts))), depth)
        code += len(sub.parts)
        for j in range(len(sub.parts)):
            walk((*path, j), sub, depth + 1)

    for n in range(len(top.parts)):
        walk((n,), top, 1)
    return out


def split_at(top: TierBands, split: Split) -> int:
    """Fingerprints at which a bucket splits: where reading it costs more than the sub-probes of a
    visit through a neighbour (one bit spent at each level above)."""
    remaining = max(top.distance - split.depth, 0)
    return max(MIN_SPLIT, math.ceil(PROBE_ROWS * split.layout.probes_within(remaining)))


def child(parent: int, prefix: int, code: int, value: int) -> int:
    """The ``band2`` key of sub-part ``code`` (its value ``value``) of the bucket ``parent``;
    ``prefix`` is the namespace id and tier bit (:meth:`.sqlite_tables.Rows.prefix`)."""
    while value >> HASH_BITS:  # a sub-part wider than the hash (few parts of wide fingerprints): folded
        value = (value & _HASH_MASK) ^ (value >> HASH_BITS)
    mixed = ((parent * _GOLDEN) & _MASK64) >> (64 - HASH_BITS)
    return ((prefix << PATH_BITS | code) << HASH_BITS) | (mixed ^ value)


def is_marker(raw: Any) -> bool:
    return type(raw) is bytes and not raw


def _rest(top: TierBands, path: tuple[int, ...], fp: int) -> int:
    """The bits of ``fp`` a bucket of ``path`` splits by."""
    rest, layout = top.rest(fp, path[0]), top
    for i in range(1, len(path)):
        layout = plan(top)[path[:i]].layout
        rest = layout.rest(rest, path[i])
    return rest


def _below(rows: Any, item: Item, depth: int) -> list[Item]:
    """The items of ``item``'s fingerprint in the sub-buckets of its (split) bucket."""
    key, raw, tier, path, rest = item
    split = plan(rows.tiers[tier])[path]
    if rest is None:
        rest = rows.tiers[tier].rest(rows.dec(raw), path[0])
    prefix = rows.prefix(key, depth)
    return [(child(key, prefix, split.codes[j], value), raw, tier, (*path, j), split.layout.rest(rest, j))
            for j, value in split.layout.store(rest)]


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
        split = plan(rows.tiers[tier]).get((part,))
        if split is not None and size >= split_at(rows.tiers[tier], split):
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
            item[0] in known and known[item[0]][0] + 1 < MIN_SPLIT and not known[item[0]][1] for item in items):
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
        if item[0] in split and item[3] in plan(rows.tiers[item[2]]):
            below += _below(rows, item, depth)
        else:
            plain.append(item)
    if plain:
        conn.executemany(f"INSERT OR IGNORE INTO {table}(key, fp) VALUES (?, ?)", [item[:2] for item in plain])
    fresh: dict[int, tuple[str, tuple[int, ...], int]] = {}
    thresholds: dict[tuple[str, tuple[int, ...]], int | None] = {}
    for key, _, tier, path, _ in plain:
        if key in fresh or size.get(key, 0) + placed_under[key] < MIN_SPLIT:
            continue
        if (tier, path) not in thresholds:
            how = plan(rows.tiers[tier]).get(path)
            thresholds[tier, path] = None if how is None else split_at(rows.tiers[tier], how)
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
    return [item for raw in raws for item in _below(rows, (key, raw, tier, path, _rest(top, path, dec(raw))), depth)]


def _read_below(conn: sqlite3.Connection, keys: list[int]) -> list[tuple[int, Any]]:
    """The ``band2`` rows under these keys (one statement a 400, of a few IN-list sizes: cached)."""
    out = []
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i : i + _CHUNK]
        size = next(n for n in _PADDED if n >= len(chunk))
        chunk += chunk[-1:] * (size - len(chunk))  # a repeated key reads its rows once
        out += conn.execute(f"SELECT key, fp FROM band2 WHERE key IN ({','.join('?' * size)})", chunk).fetchall()
    return out


@cache
def _spent(top: TierBands) -> tuple[tuple[int, int], ...]:
    """Per probe of :meth:`.bands.TierBands.probe` (in its order), its part and the bits it flipped."""
    return tuple((n, mask.bit_count()) for n, masks in enumerate(top.flips) for mask in masks)


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
    for key, (part, spent) in zip(keys, _spent(top), strict=True):
        if key in marked and (key not in frontier or frontier[key][2] < top.distance - spent):
            frontier[key] = ((part,), top.rest(fp, part), top.distance - spent)
    steps = plan(top)
    depth = 0
    while frontier:
        probes: dict[int, tuple[tuple[int, ...], int, int]] = {}
        for key, (path, rest, remaining) in frontier.items():
            split = steps.get(path)
            if split is None:  # a marker the layout does not split by: not ours (check_rows refuses most)
                continue
            high = rows.prefix(key, depth) << PATH_BITS
            mixed = ((key * _GOLDEN) & _MASK64) >> (64 - HASH_BITS)
            for j, value, spent in split.layout.probe_within(rest, remaining):
                sub = ((high | split.codes[j]) << HASH_BITS) | (mixed ^ value) if value <= _HASH_MASK else \
                    child(key, high >> PATH_BITS, split.codes[j], value)
                left = remaining - spent
                if left > probes.get(sub, _NONE)[2]:
                    probes[sub] = ((*path, j), rest, left)
        frontier = {}
        for key, raw in _read_below(conn, list(probes)):
            if is_marker(raw):
                path, rest, remaining = probes[key]
                frontier[key] = (path, steps[path[:-1]].layout.rest(rest, path[-1]), remaining)
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
        if item[3] in plan(top):
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
            if item[3] not in plan(top) or not conn.execute(
                    f"SELECT 1 FROM {table} WHERE key = ? AND fp = ?", (item[0], MARKER)).fetchone():
                break
            item, table, depth = _below(rows, item, depth)[0], "band2", depth + 1
    return present
