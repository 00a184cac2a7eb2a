"""How the SQLite index file holds the rule's data: what is stored where (the SQL is in
:mod:`.schema`), band keys, and the rule's Store.

What is stored where, and why
-----------------------------
``simhash_meta`` (a :mod:`sqlitedict` table: ``key TEXT PRIMARY KEY, value BLOB``, JSON values)
    The file describes itself (:func:`.meta.new_meta`): ``format`` (``"scrapy-simhash-index"``),
    ``schema_version``, the :class:`~.base.IndexParams` (bits, bands per tier, tokenizer, features
    version), the band layouts derived from them, how band keys are packed (``band_key``), how
    fingerprints are stored, and when and by which version the file was created. Other parameters
    at open are a :class:`~.base.ParameterMismatch`; a file without this table is "not a
    scrapy-simhash index". It is written once, by ``SqliteDict(encode=json.dumps)`` (never its
    pickle default), into a private temporary file before that file is linked into place, so
    sqlitedict's own background connection never meets our transactions. It is read at open on our
    own connection with the same JSON decoder (see :func:`.file.read_meta` for why not
    through sqlitedict); any tool can read it read-only with plain :mod:`sqlite3`
    (``sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True)``, ``json.loads`` on
    each value: the README's recipe). Not with ``SqliteDict(flag="r")``: its default
    ``journal_mode="DELETE"`` would switch the index out of WAL mode.
    Its values are checked at every open against what the parameters imply
    (:func:`check_storage_meta`, :func:`.meta.verify_meta`), and the rows against the recorded layout
    (:func:`check_rows`).
``namespace``
    ``(id, name, created)``: several projects can share one file; every other row carries the id.
``entry``
    One row per admitted item: ``id`` (never reused, ``AUTOINCREMENT``, so a decision's reference
    to a forgotten entry cannot point at a newer one), ``ns``, ``title_fp``, ``body_fp`` (NULL when
    that text was too short), ``first_seen`` (POSIX seconds, whole: :func:`~.values.whole_seconds`; a
    4-byte integer on disk, read back as a float), ``url``, ``title`` (first 300
    characters), ``numbers`` (the body's number signature, see :func:`~.rule.numbers_agree`, as a
    BLOB of its 4-byte hashes: an empty BLOB is a body without numbers), ``sentences`` (the first
    4 bytes of each of its sampled sentence hashes, ascending: the way to its ``sentence`` rows,
    which hold the whole hashes, see :mod:`.sentences`), ``short`` (the digest of a body
    too short to fingerprint, a signed 64-bit integer) and ``chars`` (a short body's character key,
    :func:`~scrapy_simhash.text.similarity.char_key`: under 200 characters, only for short bodies).
    Indexes ``(fp key, first_seen)`` of each tier find the earliest non-expired entry holding a
    fingerprint in O(log n), however many share it, in the rule's order (first seen, then id:
    entries of one second in commit order); the key is the fingerprint XOR a mask of the namespace
    (:func:`.schema.fp_key_sql`), so the index needs
    no ``ns`` column. ``(ns, first_seen)`` serves purge/stats/export and ``(url_key)`` serves
    ``forget(url)``: ``url_key`` is a 32-bit digest of the namespace and the URL
    (:func:`~.values.url_key`), 4 bytes in the index where the URL would take its length; the row's
    ``ns`` and ``url`` are compared too, so a digest shared by chance never forgets another entry.
    Whole seconds, the 32-bit digest, the keys without ``ns`` and the 4-byte sentence prefixes keep
    an entry small (docs/decisions/0302-sqlite-entry-layout.md). Every time order is the stored
    times' own, never the id order: an entry added with an earlier time than the newest (another
    writer's clock behind, an import) is ordered, expired and purged by its time.
``band`` (``WITHOUT ROWID``, primary key ``(key, fp)``)
    The band rows of the multi-index layout (:mod:`.bands`): one per part of a fingerprint. ``key``
    packs ``(namespace id, tier, part number, part value)`` into one non-negative 63-bit integer; ``fp``
    is the full fingerprint. A check reads the keys of its parts' values and their neighbours. A
    fingerprint is stored once per part however many entries share it, so boilerplate pages and
    empty bodies do not grow buckets:
    the cost of a check stays flat under skew. Band rows go away only when the last entry of the
    namespace holding that fingerprint does (forget, purge, reset).
``band2`` (``WITHOUT ROWID``, primary key ``(key, fp)``)
    The rows of split buckets (:mod:`.dense`): a ``band`` bucket that reached its threshold
    (:func:`~.dense.split_at`) keeps one marker row (``fp`` an empty BLOB) and its fingerprints
    are stored here, in the buckets of their other bits; a ``band2`` bucket that grows dense is split
    once more the same way (a marker, then buckets of the bits left). ``key`` packs the namespace id,
    the tier, the path of parts taken and a 34-bit hash of the parent bucket XOR the sub-part's value.
``sentence`` (``WITHOUT ROWID``, primary key ``(key, entry)``)
    The sentence tier's lookup table: one row per stored sentence hash of an entry (its
    :data:`~.rule.SENTENCES_STORED` smallest), ``key`` the hash XORed with a mask of the entry's
    namespace (:mod:`.sentences`: no namespace column, lookups still exact and per
    namespace). Rows go with their entry (found from ``entry.sentences``, so no second index on
    ``entry``).
``pending``
    ``(entry, owner)``: an entry whose item was not yet delivered to storage, and the process that
    added it (:mod:`.owners`). The row goes when the item is delivered; the entry goes with it when
    the item is dropped downstream or its owner died first.
``request`` (``WITHOUT ROWID``)
    What a check-and-add with a request id (:attr:`.Query.request_id`) answered: the entry it added,
    or the tier, distance and entry it matched, kept :data:`.schema.REQUEST_TTL` seconds, so that the same
    request sent again (its worker process died after the commit, before its answer:
    :mod:`scrapy_simhash.workers.pool`) gets the same answer instead of finding its own entry.
``decision``
    The latest decision per ``(ns, url)`` for a matched item (status, tier, distance, id of the
    original, time, the character similarity when it confirmed a short body's match) so that
    ``explain(url)`` can say why an item was dropped or flagged. Only queries with a URL are
    recorded; one row per URL keeps the table bounded.
``run`` (``WITHOUT ROWID``, primary key ``(ns, id)``)
    The namespace's last :data:`~scrapy_simhash.index.runs.RUNS_KEPT` crawls
    (:mod:`scrapy_simhash.index.runs`): when each started and ended, what it counted and its
    decision latency, as one JSON record; ``started`` is a column too, to keep the newest. A reset
    keeps them: they are the namespace's crawls, not its stories.

Fingerprints: ``bits`` ≤ 64 are stored as SQLite's signed 64-bit integers through
:func:`~scrapy_simhash.fingerprint.simhash.to_signed64` /
:func:`~scrapy_simhash.fingerprint.simhash.from_signed64` (the only place
the mapping happens is :func:`~.values.codec`); 128-bit fingerprints as 16-byte
big-endian BLOBs. A band value of more than 36 bits (only with 128 bits or very few bands) is folded
(XOR) into 36 bits inside the key: that can only add candidates, and every candidate is verified by
exact Hamming distance, so exactness is unaffected.

Scaling: identical fingerprints cost nothing extra; distinct fingerprints read by a check are those
sharing a probed part value: ~66·n/2³² for random ones with the default layout (1.5 at 100M), and
for fingerprints crowded around one centre the sub-buckets of the split buckets probed
(:mod:`.dense`; ``benchmarks/index_scaling.py``, ``benchmarks/band_schemes.py``). A file is
re-banded in place by :mod:`.reband`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

from .. import rule
from ..bands import TierBands, bands_for
from ..base import TIERS, Entry, IndexOpenError, IndexParams, Match, Outcome, Query, Tier
from ..meta import TITLE_CHARS
from . import dense as sqlite_dense
from . import sentences as sqlite_sentences
from .schema import FP_MIX, fp_key_sql
from .values import hash_hex, hash_int, pack_numbers, unpack_numbers, url_key, whole_seconds

#: Bits of the band value inside a band key, at most; the rest of the 63 bits hold the prefix.
MAX_VALUE_BITS = 36
#: Bits reserved for the namespace id in a band key (about a million namespaces per file).
NAMESPACE_BITS = 20
BAND_NUMBER_BITS = 6  # up to 64 bands per tier
assert NAMESPACE_BITS + 1 + sqlite_dense.PATH_BITS + sqlite_dense.HASH_BITS == 63  # band2 keys
#: A tier's bit in a band key.
TIER_KIND = {"title": 0, "body": 1}

ENTRY_COLS = "id, title_fp, body_fp, first_seen, url, title, numbers, sentences, short, chars"
ENTRY_COLS_E = ", ".join(f"e.{c.strip()}" for c in ENTRY_COLS.split(","))


def value_bits(params: IndexParams) -> int:
    """Bits of the band value kept in a key for these parameters (recorded as ``band_key.value_bits``)."""
    widest = max(width for layout in bands_for(params).values() for _, width in layout.parts)
    return min(widest, MAX_VALUE_BITS)


def storage_meta(params: IndexParams) -> dict[str, Any]:
    """What a file records about how it stores these parameters' data: band key packing and the
    fingerprint type. Recorded at creation and checked at every open against the recorded params."""
    return {
        "band_key": {
            "value_bits": value_bits(params),
            "namespace_bits": NAMESPACE_BITS,
            "band_number_bits": BAND_NUMBER_BITS,
        },
        "fingerprint_storage": "int64" if params.bits <= 64 else "blob16",
    }


def check_storage_meta(meta: dict[str, Any], params: IndexParams, location: str) -> None:
    """Refuse a file whose recorded storage is not what its recorded parameters imply (a changed
    ``band_key.value_bits`` reads every band under other keys: everything would be admitted again)."""
    for field, expected in storage_meta(params).items():
        if meta.get(field) != expected:
            raise IndexOpenError(
                f"index {location} records {field} = {json.dumps(meta.get(field))}, but its parameters imply "
                f"{json.dumps(expected)}: the file was altered or damaged, refusing it"
            )


def _probe_sql(n: int, folded: bool) -> str:
    """The statement reading the band rows under ``n`` probe keys. The keys of a layout whose values
    fit in a key are distinct (a part's base and value, each flip mask once): a join with the list of
    keys seeks each one, where ``key IN (…)`` first builds a temporary index of the list
    (docs/decisions/0300-sqlite-probe-join.md). Folded values may repeat a key, which the join would
    read twice: ``IN``."""
    if folded:
        return f"SELECT key, fp FROM band WHERE key IN ({','.join('?' * n)})"
    return (f"WITH k(v) AS (VALUES {','.join(['(?)'] * n)})"
            " SELECT band.key, band.fp FROM k CROSS JOIN band ON band.key = k.v")


def _pair(title: int | None, body: int | None) -> tuple[tuple[Tier, int | None], ...]:
    """Each fingerprint tier with its fingerprint (None: none)."""
    return ("title", title), ("body", body)


def _fold(value: int, bits: int) -> int:
    mask = (1 << bits) - 1
    while value >> bits:
        value = (value & mask) ^ (value >> bits)
    return value


class Rows:
    """One namespace's rows: band keys, stored fingerprint values, entries from rows, and the SQL of
    the hot path, computed once at open."""

    def __init__(
        self, ns_id: int | None, namespace: str, tiers: dict[Tier, TierBands], vbits: int,
        enc: Callable[[int], Any], dec: Callable[[Any], int],
    ) -> None:
        self.ns_id, self.namespace, self.enc, self.dec, self._vbits = ns_id, namespace, enc, dec, vbits
        self.tiers = tiers
        ns = ns_id or 0
        self._base = {
            tier: [(((ns << 1 | TIER_KIND[tier]) << BAND_NUMBER_BITS) | number) << vbits
                   for number in range(len(tiers[tier].parts))]
            for tier in TIERS
        }
        self._fold = any(width > vbits for tier in TIERS for _, width in tiers[tier].parts)
        # per tier, each part's (key base, shift, value mask, flip masks): the probes' arithmetic
        self._probe_parts = {
            tier: tuple((base, shift, (1 << width) - 1, masks) for base, (shift, width), masks
                        in zip(self._base[tier], tiers[tier].parts, tiers[tier].flips, strict=True))
            for tier in TIERS
        }
        self.key_range = ((ns << (1 + BAND_NUMBER_BITS)) << vbits, ((ns + 1) << (1 + BAND_NUMBER_BITS)) << vbits)
        below = 1 + sqlite_dense.PATH_BITS + sqlite_dense.HASH_BITS
        self.key_range_below = (ns << below, (ns + 1) << below)  # its band2 keys
        self.sql_band = {tier: _probe_sql(tiers[tier].probes, self._fold) for tier in TIERS}
        self.sql_band_both = _probe_sql(sum(tiers[tier].probes for tier in TIERS), self._fold)
        self.tier_shift = vbits + BAND_NUMBER_BITS  # a band key's tier bit
        self._fp_mask = ns * FP_MIX
        # (fp_key, ns, stored fp, ...): INDEXED BY, or the planner takes entry_seen for `ns = ?`
        where = {tier: f"FROM entry INDEXED BY entry_{tier} WHERE {fp_key_sql(f'{tier}_fp')} = ? AND ns = ?"
                 f" AND {tier}_fp = ?" for tier in TIERS}
        self.sql_first = {
            tier: f"SELECT {ENTRY_COLS} {where[tier]} AND first_seen >= ? ORDER BY first_seen, id LIMIT ? OFFSET ?"
            for tier in TIERS
        }
        self.sql_used = {tier: f"SELECT 1 {where[tier]} LIMIT 1" for tier in TIERS}

    def fp_key(self, raw: Any) -> Any:
        """The fingerprint index key of a stored fingerprint in this namespace (:func:`fp_key_sql`)."""
        return raw ^ self._fp_mask if type(raw) is int else raw

    def _keys(self, tier: Tier, values: list[tuple[int, int]]) -> list[int]:
        base, vb = self._base[tier], self._vbits
        if self._fold:  # a value wider than a key holds is folded (XOR): only ever more candidates
            return [base[n] | _fold(value, vb) for n, value in values]
        return [base[n] | value for n, value in values]

    def keys(self, tier: Tier, fp: int) -> list[int]:
        """The band keys an entry with ``fp`` in ``tier`` stores (one per part)."""
        return self._keys(tier, self.tiers[tier].store(fp))

    def probe_keys(self, tier: Tier, fp: int) -> list[int]:
        """The band keys a query for ``fp`` in ``tier`` reads (each part's value and its neighbours),
        in the order of :meth:`.bands.TierBands.probe`."""
        if self._fold:
            return self._keys(tier, self.tiers[tier].probe(fp))
        keys: list[int] = []
        for base, shift, value_mask, masks in self._probe_parts[tier]:
            keys += map((base | ((fp >> shift) & value_mask)).__xor__, masks)  # the mask stays inside the value bits
        return keys

    def band_rows(self, tfp: int | None, bfp: int | None,
                  keys: dict[Tier, list[int]] | None = None) -> list[tuple[int, Any, str, int, int]]:
        """``(key, stored fp, tier, part, fp)`` rows of an entry's fingerprints (:func:`.dense.write`);
        ``keys``: their :meth:`keys` per tier, computed already."""
        rows: list[tuple[int, Any, str, int, int]] = []
        for tier, fp in _pair(tfp, bfp):
            if fp is not None:
                raw = self.enc(fp)
                mine = keys[tier] if keys is not None else self.keys(tier, fp)
                rows.extend((key, raw, tier, part, fp) for part, key in enumerate(mine))
        return rows

    def prefix(self, key: int, depth: int) -> int:
        """The namespace id and tier bit of a bucket key (``depth`` 0: of ``band``, else of ``band2``)."""
        if depth == 0:
            return key >> (self._vbits + BAND_NUMBER_BITS)
        return key >> (sqlite_dense.PATH_BITS + sqlite_dense.HASH_BITS)

    def part_of(self, key: int) -> tuple[Tier, int]:
        """The tier and part number a band key belongs to."""
        vb = self._vbits
        return TIERS[key >> (vb + BAND_NUMBER_BITS) & 1], key >> vb & ((1 << BAND_NUMBER_BITS) - 1)

    def entries(self, conn: sqlite3.Connection, rows: Iterable[Sequence[Any]]) -> list[Entry]:
        """:class:`~.base.Entry` objects from ``ENTRY_COLS`` rows, each with its exact sentence sample
        (read from the ``sentence`` rows its prefixes lead to)."""
        dec = self.dec  # first: a value that is not ours is the decoder's clear error
        rows = [(r, None if r[1] is None else dec(r[1]), None if r[2] is None else dec(r[2])) for r in rows]
        if not rows:  # the sentence tier's usual answer: nothing to decode or resolve
            return []
        samples = sqlite_sentences.resolve(conn, self.ns_id or 0, {r[0]: r[7] for r, _, _ in rows if r[7]})
        return [
            Entry(
                id=ident, namespace=self.namespace, url=url, title=title, first_seen=first_seen, title_fp=tfp,
                body_fp=bfp, numbers=unpack_numbers(numbers), sentences=samples.get(ident, ()),
                short_body=None if short is None else hash_hex(short), chars=chars,
            )
            for (ident, _, _, first_seen, url, title, numbers, _, short, chars), tfp, bfp in rows
        ]

    def drop_unused_bands(self, conn: sqlite3.Connection, removed: list[tuple[Any, Any]]) -> None:
        """Delete band rows of fingerprints (stored values, per tier) no remaining entry holds."""
        for index, tier in enumerate(TIERS):
            for raw in {r[index] for r in removed if r[index] is not None}:
                if conn.execute(self.sql_used[tier], (self.fp_key(raw), self.ns_id, raw)).fetchone() is None:
                    sqlite_dense.drop(conn, self, tier, raw)


@cache
def _sentence_sql(n: int) -> str:
    """The sentence tier's statement for ``n`` hashes (built once per length)."""
    return (f"WITH q(k) AS (VALUES {','.join(f'(?{i})' for i in range(4, 4 + n))})"
            f" SELECT {ENTRY_COLS_E}, count(*) FROM q CROSS JOIN sentence s ON s.key = q.k"
            " CROSS JOIN entry e ON e.id = s.entry"
            " WHERE (SELECT count(*) FROM (SELECT 1 FROM sentence WHERE key = q.k LIMIT ?1)) < ?1"
            " AND e.ns = ?2 AND e.first_seen >= ?3 GROUP BY e.id ORDER BY e.first_seen, e.id")


class Tables:
    """The rule's :class:`~.rule.Store` on these tables, inside the caller's transaction.

    Given the ``query`` the rule is about to decide, the band rows both its fingerprints probe are
    read by one statement, at the first :meth:`candidates` call (a new item probes both tiers: one
    statement instead of two), and its insert takes the sizes of the buckets it adds to from those
    rows instead of reading them again (nothing is written between the two inside the transaction)."""

    def __init__(self, rows: Rows, conn: sqlite3.Connection, query: Query | None = None) -> None:
        self.rows, self.conn, self.query = rows, conn, query
        self._probed: dict[Tier, list[tuple[int, Any]]] | None = None
        self._sentence_keys: tuple[Sequence[str], list[int]] = ((), [])  # the last hashes looked up, their keys

    def _prefetched(self, tier: Tier, fp: int) -> list[tuple[int, Any]] | None:
        """The band rows under ``fp``'s probes when ``fp`` is the query's, read with the other tier's."""
        query = self.query
        if query is None or (query.title_fp if tier == "title" else query.body_fp) != fp:
            return None
        if self._probed is None:
            rows = self.rows
            if query.title_fp is None or query.body_fp is None:  # one tier: this one
                self._probed = {tier: self.conn.execute(rows.sql_band[tier], rows.probe_keys(tier, fp)).fetchall()}
            else:
                keys = rows.probe_keys("title", query.title_fp) + rows.probe_keys("body", query.body_fp)
                self._probed = {"title": [], "body": []}
                shift = rows.tier_shift
                for row in self.conn.execute(rows.sql_band_both, keys):
                    self._probed["body" if row[0] >> shift & 1 else "title"].append(row)
        return self._probed[tier]

    def candidates(self, tier: Tier, fp: int) -> Iterable[int]:
        return sqlite_dense.candidates(self.conn, self.rows, tier, fp, self._prefetched(tier, fp))

    def _sizes(self, query: Query, keys: dict[Tier, list[int]]) -> dict[int, tuple[int, bool]] | None:
        """``{key: (rows, split)}`` of the buckets the query's band rows (under ``keys``, per tier) go
        to, from the probe read (None: not read, or for another query)."""
        probed = self._probed
        if probed is None or query is not self.query:
            return None
        sizes: dict[int, tuple[int, bool]] = {}
        for tier, fp in _pair(query.title_fp, query.body_fp):
            if fp is not None:
                own = dict.fromkeys(keys[tier], (0, False))
                for key, raw in probed[tier]:
                    if key in own:
                        n, split = own[key]
                        own[key] = (n + 1, split or sqlite_dense.is_marker(raw))
                sizes.update(own)
        return sizes

    def holders(self, tier: Tier, fp: int, not_before: float, limit: int | None, offset: int = 0) -> list[Entry]:
        rows = self.rows
        raw = rows.enc(fp)
        args = (rows.fp_key(raw), rows.ns_id, raw, not_before, -1 if limit is None else limit, offset)
        return rows.entries(self.conn, self.conn.execute(rows.sql_first[tier], args))

    def sentence_holders(self, hashes: Sequence[str], not_before: float) -> list[tuple[Entry, int, int]]:
        if not hashes:
            return []
        ns = self.rows.ns_id
        # one statement: the boilerplate test of each hash (its first SENTENCE_MAX_HOLDERS rows counted)
        # sits in the outer loop over the hashes, then their holders (CROSS JOIN: sentence rows first,
        # the namespace test must not lead the plan into entry)
        keys = sqlite_sentences.keys_of(ns or 0, hashes)
        self._sentence_keys = (hashes, keys)  # the insert's sample is a head of them
        found = self.conn.execute(
            _sentence_sql(len(hashes)), (rule.SENTENCE_MAX_HOLDERS, ns, not_before, *keys),
        ).fetchall()
        entries = self.rows.entries(self.conn, (row[:-1] for row in found))
        return [(e, row[-1], len(e.sentences)) for e, row in zip(entries, found, strict=True)]

    def insert(self, query: Query, seen_at: float) -> int:
        rows, conn = self.rows, self.conn
        tfp, bfp = query.title_fp, query.body_fp
        stored = sorted(set(query.sentences))[: rule.SENTENCES_STORED]
        entry_id = conn.execute(
            "INSERT INTO entry(ns, title_fp, body_fp, first_seen, url, url_key, title, numbers, sentences, short,"
            " chars) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rows.ns_id,
                None if tfp is None else rows.enc(tfp),
                None if bfp is None else rows.enc(bfp),
                whole_seconds(seen_at),
                query.url,
                url_key(rows.ns_id or 0, query.url),
                None if query.title is None else query.title[:TITLE_CHARS],
                pack_numbers(query.numbers),
                sqlite_sentences.pack_prefixes(stored),
                None if query.short_body is None else hash_int(query.short_body),
                query.chars,
            ),
        ).lastrowid
        assert entry_id is not None
        band_keys = {tier: rows.keys(tier, fp) for tier, fp in _pair(tfp, bfp) if fp is not None}
        sqlite_dense.write(conn, rows, rows.band_rows(tfp, bfp, band_keys), self._sizes(query, band_keys))
        if query.owner is not None:
            conn.execute("INSERT INTO pending(entry, owner) VALUES (?, ?)", (entry_id, query.owner))
        if stored:
            hashes, keys = self._sentence_keys
            if list(hashes[: len(stored)]) != stored:
                keys = sqlite_sentences.keys_of(rows.ns_id or 0, stored)
            sqlite_sentences.insert(conn, entry_id, keys[: len(stored)])
        return entry_id

    def answered(self, token: str) -> Outcome | None:
        """What the request ``token`` was answered, if it was (and its matched entry is still there)."""
        row = self.conn.execute("SELECT entry, tier, distance FROM request WHERE token = ?", (token,)).fetchone()
        if row is None:
            return None
        entry_id, tier, distance = row
        if tier is None:
            return Outcome(match=None, entry_id=entry_id)
        found = self.rows.entries(self.conn, self.conn.execute(
            f"SELECT {ENTRY_COLS} FROM entry WHERE id = ? AND ns = ?", (entry_id, self.rows.ns_id)))
        return Outcome(match=Match(tier, distance, found[0]), entry_id=None) if found else None

    def remember(self, token: str, outcome: Outcome, at: float) -> None:
        """Keep what the request ``token`` was answered (an outcome with an error is not kept)."""
        if outcome.error is not None:
            return
        match = outcome.match
        self.conn.execute(
            "INSERT OR REPLACE INTO request(token, entry, tier, distance, at) VALUES (?, ?, ?, ?, ?)",
            (token, outcome.entry_id, None, None, at) if match is None
            else (token, match.entry.id, match.tier, match.distance, at),
        )

    def record(self, query: Query, match: Match, status: str, seen_at: float) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO decision(ns, url, status, tier, distance, original, decided_at, title, score)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.rows.ns_id, query.url, status, match.tier, match.distance, match.entry.id, seen_at,
                None if query.title is None else query.title[:TITLE_CHARS], match.score,
            ),
        )
