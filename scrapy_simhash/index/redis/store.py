"""How the Redis index holds the rule's data, and the rule's :class:`~..rule.Store` over it.

Redis is a store here: the rule (:mod:`..rule`) decides in Python, as it does for SQLite, over a
:class:`View` that reads keys and keeps the writes of a decision until :meth:`View.commit`.
Atomicity is Redis's optimistic transaction: the view ``WATCH``\\ es every key whose content the
decision read before it reads it, and commits the writes with ``MULTI``/``EXEC``; ``EXEC`` fails
when a watched key changed meanwhile, and the index decides again. Two processes carrying one
story: the second one's probes include a band key the first one writes, so its commit fails and its
next decision finds the first one's entry.

Keys (``<ns>`` is the namespace, percent-encoded, in braces: a Redis Cluster hash tag, so every key of a
namespace lives in one slot). Small values are grouped in hashes keyed by a fixed prefix of what
they are looked up by, so that Redis keeps each hash in its compact listpack encoding (a key costs
~50–90 bytes before its data, a listpack field a few): ``docs/decisions/0101-redis-key-grouping.md``.

``<prefix>:meta`` (JSON record, :mod:`..meta`), ``<prefix>:namespaces``, ``<prefix>:reband`` (lock)
    As :mod:`.index` describes.
``…:{<ns>}:meta``
    The namespace's marker, read at open and watched and checked by every call: a server that lost
    the index's keys (flushed, restarted without persistence) is refused, not silently filled again.
``…:seq``, ``…:n``, ``…:nbands``
    Entry id counter, entries, band rows. A check reserves the ids of the entries it may add with
    its first read (one round trip less for a new item); an id a decision did not use is the
    process's next one, so ids are never reused and one process's entries get consecutive ids.
``…:e:<id>``
    An entry's record (:mod:`.records`), written once.
``…:b<gen><t|b><part>:<hex>`` field ``<low bits>``
    A band bucket of the shared layout (:mod:`..bands`, at Redis's costs: ``k + 1`` parts probed
    exactly): the part's value split into a key (its top :data:`BAND_KEY_BITS` bits) and a field
    (the rest, :func:`band_field_bits`); the value is the fingerprints filed there, packed. A split
    bucket's value is :data:`MARK`; its sub-buckets are the fields ``<code><value>`` of the hash
    ``<bucket key>/<bucket field in hex>`` (and so on below). ``<gen>`` counts re-bandings.
``…:h<t|b>:<hex>`` field ``<low bytes>``
    The entries holding a fingerprint: ``(first seen, id)`` packed (:data:`HOLDER`), sorted.
``…:s:<hex>`` field ``<low 6 bytes>`` and ``…:S:<hash>``
    The entries whose sample holds a sentence hash: ids packed. A hash held by
    :data:`~..rule.SENTENCE_MAX_HOLDERS` entries is boilerplate, which the rule ignores: its field
    becomes :data:`FULL` and its ids move to ``…:S:<hash>``, which no check reads or watches (more
    holders cannot make it count again; a removal that takes it under the limit moves it back).
``…:u:<hex>`` field ``<bytes>``
    The entries with a URL (by its SHA-1): ids packed (``forget`` by URL).
``…:t:<hour>`` and ``…:hours``
    Time buckets: the ids of the entries first seen in that hour, packed; the hours in a sorted set.
    Purge drops whole buckets (an id whose entry is gone is skipped).
``…:r:<minute>`` field ``<request token>``
    The entry an *added* outcome returned, per request token, expiring after ``TOKEN_TTL``.
``…:pending`` (id → owner), ``…:alive:<owner>``
    Pending entries and their owners' leases.
``…:d:<url>`` and ``…:decided``
    The latest decision about a non-new URL, and the decided URLs by time.
"""

from __future__ import annotations

import hashlib
import struct
from bisect import insort
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

from .. import bands, rule
from ..bands import TierBands
from ..base import Entry, Match, Query, SimhashIndexError, Tier
from ..meta import TITLE_CHARS
from .client import Arg, Link
from .records import decode_record, encode_record, is_hex

#: High bits of a band value that name its hash, the rest being its field; a part this narrow or
#: narrower is cut in halves (``docs/decisions/0101-redis-key-grouping.md``).
BAND_KEY_BITS = 16
#: High bits of a fingerprint, of a sentence hash, and bytes of a URL's SHA-1 that name their hash.
HOLDER_KEY_BITS = 16
SENTENCE_KEY_BITS = 18
URL_KEY_BYTES = 2
#: A split band bucket's value, and a boilerplate sentence's (no packed list is one byte long).
MARK = b"\x00"
FULL = b"\x00"
HOLDER = struct.Struct(">dI")
ID = struct.Struct(">I")
ID_LIMIT = 2**32
TIER_CHAR: dict[Tier, bytes] = {"title": b"t", "body": b"b", "sentence": b"s"}
CHAR_TIER: dict[str, Tier] = {"t": "title", "b": "body", "s": "sentence"}
#: Errors that concern one item (a value under our keys that is not ours, a hostile signature).
ITEM_ERRORS = (ValueError, OverflowError, struct.error, UnicodeDecodeError, SimhashIndexError)


def namespace_base(prefix: str, namespace: str) -> str:
    return f"{prefix}:{{{quote(namespace, safe='')}}}:"


def glob_escape(text: str) -> str:
    """``text`` matched literally by a ``SCAN MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def value_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8 or 1, "big")


class Keys:
    """The key names of one namespace, for one band layout (``gen``: its generation)."""

    def __init__(self, prefix: str, namespace: str, bits: int, tiers: dict[Tier, TierBands], gen: int) -> None:
        self.base = base = namespace_base(prefix, namespace).encode()
        self.namespace, self.tiers, self.gen = namespace, tiers, gen
        self.fp_bytes = bits // 8
        self.marker, self.seq, self.n, self.nbands = base + b"meta", base + b"seq", base + b"n", base + b"nbands"
        self.hours, self.pending, self.decided = base + b"hours", base + b"pending", base + b"decided"
        self.runs = base + b"runs"  # hash: run id → its record (scrapy_simhash.index.runs)
        self.parts = {tier: [(base + b"b%d%s%d:" % (gen, TIER_CHAR[tier], n), band_field_bits(width))
                             for n, (_, width) in enumerate(layout.parts)] for tier, layout in tiers.items()}
        self._low = 8 * self.fp_bytes - HOLDER_KEY_BITS

    def bucket(self, tier: Tier, part: int, value: int) -> tuple[bytes, bytes]:
        prefix, low = self.parts[tier][part]
        return prefix + b"%x" % (value >> low), (value & ((1 << low) - 1)).to_bytes((low + 7) // 8 or 1, "big")

    def holders(self, tier: Tier, fp: int) -> tuple[bytes, bytes]:
        low = self._low
        return (self.base + b"h%s:%x" % (TIER_CHAR[tier], fp >> low),
                (fp & ((1 << low) - 1)).to_bytes(low // 8, "big"))

    def sentence(self, digest: str) -> tuple[bytes, bytes]:
        if not is_hex(digest, 16):
            raise ValueError(f"a sentence hash must be 16 hex digits, not {digest!r}")
        h = int(digest, 16)
        return self.base + b"s:%x" % (h >> (64 - SENTENCE_KEY_BITS)), (h & (2**48 - 1)).to_bytes(6, "big")

    def full(self, digest: str) -> bytes:
        return self.base + b"S:" + digest.encode()

    def url(self, url: str) -> tuple[bytes, bytes]:
        digest = hashlib.sha1(url.encode("utf-8", "surrogatepass")).digest()
        return self.base + b"u:" + digest[:URL_KEY_BYTES].hex().encode(), digest[URL_KEY_BYTES:8]

    def entry(self, entry_id: int) -> bytes:
        return self.base + b"e:%d" % entry_id

    def hour(self, hour: int) -> bytes:
        return self.base + b"t:%d" % hour

    def token(self, minute: int) -> bytes:
        return self.base + b"r:%d" % minute

    def alive(self, owner: str) -> bytes:
        return self.base + b"alive:" + owner.encode()

    def decision(self, url: str) -> bytes:
        return self.base + b"d:" + url.encode("utf-8", "surrogatepass")


def band_field_bits(width: int) -> int:
    """Low bits of a ``width``-bit band value that are its field (the rest name its hash)."""
    return width - BAND_KEY_BITS if width > BAND_KEY_BITS else width // 2


def unpack_ids(raw: bytes) -> list[int]:
    if len(raw) % 4:
        raise ValueError(f"unreadable list of ids ({len(raw)} bytes): not ours")
    return [i for (i,) in ID.iter_unpack(raw)]


def unpack_holders(raw: bytes) -> list[tuple[float, int]]:
    if len(raw) % HOLDER.size:
        raise ValueError(f"unreadable list of holders ({len(raw)} bytes): not ours")
    return list(HOLDER.iter_unpack(raw))


# -- the store ---------------------------------------------------------------------------------------

Pair = tuple[bytes, bytes]


class View:
    """The rule's :class:`~..rule.Store` over one namespace inside one optimistic transaction: reads
    go through the writes made so far (so a later query of a batch sees the earlier ones' entries),
    keys are watched before they are read (``watch``), and :meth:`commit` sends the writes."""

    def __init__(self, keys: Keys, link: Link, *, watch: bool, ids: list[int] | None = None) -> None:
        self.k, self.link, self.watch = keys, link, watch
        self.fields: dict[Pair, bytes | None] = {}
        self.dirty: dict[Pair, None] = {}
        self.watched: set[bytes] = set()
        self.records: dict[int, Entry | None] = {}
        self.written: dict[int, bytes] = {}  # records this view adds, decoded when read
        #: Fingerprints inserted but not filed yet (:meth:`file_later`), or None: filed at insert.
        self.unfiled: dict[Tier, list[int]] | None = None
        self.commands: list[tuple[Arg, ...]] = []
        self.strings: dict[bytes, bytes | None] = {}
        self.dirty_strings: dict[bytes, None] = {}
        self.counts = {"n": 0, "nbands": 0}
        self.ids = ids if ids is not None else []  # reserved ids, smallest first (the caller's pool)
        self.used = 0  # of them, taken by this view's inserts (left in the pool until it commits)
        self.reserve = 1
        self._probes: dict[tuple[Tier, int], list[tuple[Pair, int, int]]] = {}

    # -- reading -----------------------------------------------------------------------------------

    def read(self, pairs: Iterable[Pair], unwatched: Sequence[Pair] = (), before: Sequence[tuple[Arg, ...]] = (),
             watch: Sequence[bytes] = ()) -> list[Any]:
        """Load the fields not known yet (watching their keys, and the keys ``watch``, first, in one
        ``WATCH``); returns ``before``'s replies."""
        fields, asked = self.fields, dict[Pair, None]()
        for pair in pairs:
            if pair not in fields and pair not in asked:
                asked[pair] = None
        for pair in unwatched:
            asked.setdefault(pair, None)
        if not asked and not before:
            return []
        commands = list(before)
        if self.watch:
            new = {key for key, _ in asked if key not in self.watched}.difference(key for key, _ in unwatched)
            new.update(key for key in watch if key not in self.watched)
            if new:
                commands.insert(0, ("WATCH", *new))
                self.watched |= new
        by_key: dict[bytes, list[bytes]] = {}
        for key, field in asked:
            by_key.setdefault(key, []).append(field)
        replies, values = self.link.read_fields(list(by_key.items()), commands)
        it = iter(values)
        for key, wanted in by_key.items():
            for field in wanted:
                fields[key, field] = next(it)
        return replies[1:] if len(commands) > len(before) else replies

    def get(self, pair: Pair) -> bytes | None:
        if pair not in self.fields:
            self.read((pair,))
        return self.fields[pair]

    def set(self, pair: Pair, value: bytes | None) -> None:
        self.fields[pair] = value or None
        self.dirty[pair] = None

    def get_string(self, key: bytes) -> bytes | None:
        """A string value (watched first)."""
        if key not in self.strings:
            commands: list[tuple[Arg, ...]] = [("GET", key)]
            if self.watch and key not in self.watched:
                commands.insert(0, ("WATCH", key))
                self.watched.add(key)
            self.strings[key] = self.link.send(commands)[-1]
        return self.strings[key]

    def set_string(self, key: bytes, value: bytes | None) -> None:
        self.strings[key] = value or None
        self.dirty_strings[key] = None

    def entries(self, ids: Sequence[int]) -> list[Entry]:
        """The entries with these ids that exist, in this order (records never change: not watched)."""
        missing = [i for i in dict.fromkeys(ids) if i not in self.records]
        if self.written and missing:
            for i in [i for i in missing if i in self.written]:
                self.records[i] = decode_record(i, self.k.namespace, self.written[i], self.k.fp_bytes)
            missing = [i for i in missing if i not in self.records]
        if missing:
            (raws,) = self.link.send([("MGET", *(self.k.entry(i) for i in missing))])
            if isinstance(raws, Exception):
                raise SimhashIndexError(f"reading entries failed: {raws}")
            for i, raw in zip(missing, raws, strict=True):
                self.records[i] = None if raw is None else decode_record(i, self.k.namespace, raw, self.k.fp_bytes)
        return [e for e in (self.records[i] for i in ids) if e is not None]

    def probes(self, tier: Tier, fp: int) -> list[tuple[Pair, int, int]]:
        """The buckets a query for ``fp`` reads: ``(pair, part, bits flipped)``, own values first."""
        known = self._probes.get((tier, fp))
        if known is not None:
            return known
        top, out = self.k.tiers[tier], []
        for n, ((shift, width), masks) in enumerate(zip(top.parts, top.flips, strict=True)):
            prefix, low = self.k.parts[tier][n]
            value = (fp >> shift) & ((1 << width) - 1)
            size, lmask = (low + 7) // 8 or 1, (1 << low) - 1
            out += [((prefix + b"%x" % (v >> low), (v & lmask).to_bytes(size, "big")), n, mask.bit_count())
                    for mask in masks for v in (value ^ mask,)]
        self._probes[tier, fp] = out
        return out

    def prefetch(self, queries: Sequence[Query], tokens: Sequence[Pair]) -> list[Any]:
        """Read (watched) what deciding and adding ``queries`` reads first: their probed buckets, the
        holders of their fingerprints, their sentences and URLs; and (unwatched) their request
        tokens and, first, the namespace's marker. Returns the marker."""
        pairs: list[Pair] = []
        for q in queries:
            for tier, fp in (("title", q.title_fp), ("body", q.body_fp)):
                if fp is not None:
                    pairs += [pair for pair, _, _ in self.probes(tier, fp)]  # type: ignore[arg-type]
                    pairs.append(self.k.holders(tier, fp))  # type: ignore[arg-type]
            if q.sentences_shared > 0 or q.sentences:
                for h in set(q.sentences):
                    if is_hex(h, 16):
                        pairs.append(self.k.sentence(h))
            if q.url is not None:
                pairs.append(self.k.url(q.url))
        before: list[tuple[Arg, ...]] = [("GET", self.k.marker)]
        need = self.reserve - len(self.ids)
        if self.watch and need > 0:
            before.append(("INCRBY", self.k.seq, need))  # ids for the entries it may add
        replies = self.read(pairs, tokens, before, (self.k.marker,))
        if self.watch and len(replies) > 1:
            last = replies.pop()
            if isinstance(last, Exception):
                raise last
            self.ids += range(int(last) - need + 1, int(last) + 1)
        return replies

    # -- the rule's Store ----------------------------------------------------------------------------

    def candidates(self, tier: Tier, fp: int) -> list[int]:
        top, fb = self.k.tiers[tier], self.k.fp_bytes
        probes = self.probes(tier, fp)
        self.read(pair for pair, _, _ in probes)
        found: list[int] = []
        frontier: dict[Pair, tuple[bands.Path, int, int]] = {}
        for pair, part, spent in probes:
            raw = self.fields[pair]
            if raw is None:
                continue
            if raw == MARK:
                left = top.distance - spent
                if pair not in frontier or frontier[pair][2] < left:
                    frontier[pair] = ((part,), top.rest(fp, part), left)
            else:
                found += unpack_fps(raw, fb)
        while frontier:
            below: dict[Pair, tuple[bands.Path, int, int]] = {}
            for (key, field), (path, rest, left) in frontier.items():
                sub = key + b"/" + field.hex().encode()
                for code, value, sub_path, sub_rest, sub_left in bands.sub_probes(top, path, rest, left):
                    pair = (sub, bytes((code,)) + value_bytes(value))
                    if pair not in below or below[pair][2] < sub_left:
                        below[pair] = (sub_path, sub_rest, sub_left)
            self.read(below)
            frontier = {}
            for pair, how in below.items():
                raw = self.fields[pair]
                if raw == MARK:
                    frontier[pair] = how
                elif raw is not None:
                    found += unpack_fps(raw, fb)
        return found

    def holders(self, tier: Tier, fp: int, not_before: float, limit: int | None, offset: int = 0) -> list[Entry]:
        raw = self.get(self.k.holders(tier, fp))
        rows = [i for t, i in unpack_holders(raw or b"") if t >= not_before]
        return self.entries(rows[offset : None if limit is None else offset + limit])

    def sentence_holders(self, hashes: Sequence[str], not_before: float) -> list[tuple[Entry, int, int]]:
        pairs = [self.k.sentence(h) for h in hashes]
        self.read(pairs)
        shared: dict[int, int] = {}
        for pair in pairs:
            raw = self.fields[pair]
            if raw is None or raw == FULL:
                continue
            ids = unpack_ids(raw)
            if len(ids) < rule.SENTENCE_MAX_HOLDERS:
                for i in ids:
                    shared[i] = shared.get(i, 0) + 1
        found = [(e, shared[e.id], len(e.sentences)) for e in self.entries(list(shared)) if e.first_seen >= not_before]
        found.sort(key=lambda row: (row[0].first_seen, row[0].id))
        return found

    def new_id(self) -> int:
        """The next reserved id (more are reserved when none is left). An id a decision did not use
        stays in the pool for the next one, so one process's entries get consecutive ids."""
        if self.used >= len(self.ids):
            need = max(1, self.reserve)
            (last,) = self.link.send([("INCRBY", self.k.seq, need)])
            if isinstance(last, Exception):
                raise last
            self.ids += range(int(last) - need + 1, int(last) + 1)
        entry_id = self.ids[self.used]
        self.used += 1
        if entry_id >= ID_LIMIT:
            raise SimhashIndexError("the index ran out of entry ids")
        return entry_id

    def insert(self, query: Query, seen_at: float) -> int:
        k = self.k
        entry_id = self.new_id()
        record = encode_record(query, seen_at, k.fp_bytes)
        self.written[entry_id] = record
        self.commands.append(("SET", k.entry(entry_id), record))
        for tier, fp in (("title", query.title_fp), ("body", query.body_fp)):
            if fp is not None:
                pair = k.holders(tier, fp)  # type: ignore[arg-type]
                held = unpack_holders(self.get(pair) or b"")
                insort(held, (seen_at, entry_id))
                self.set(pair, b"".join(HOLDER.pack(*h) for h in held))
                if len(held) == 1:  # a fingerprint is filed once however many entries hold it
                    if self.unfiled is None:
                        self.file(tier, [fp])  # type: ignore[arg-type]
                    else:
                        self.unfiled[tier].append(fp)  # type: ignore[index]
        for h in sorted(set(query.sentences))[: rule.SENTENCES_STORED]:
            pair = k.sentence(h)
            raw = self.get(pair)
            if raw == FULL:
                self.commands.append(("APPEND", k.full(h), ID.pack(entry_id)))
            elif raw is None or len(raw) // ID.size + 1 < rule.SENTENCE_MAX_HOLDERS:
                self.set(pair, (raw or b"") + ID.pack(entry_id))
            else:
                self.set(pair, FULL)
                self.commands.append(("SET", k.full(h), raw + ID.pack(entry_id)))
        if query.url is not None:
            pair = k.url(query.url)
            self.set(pair, (self.get(pair) or b"") + ID.pack(entry_id))
        hour = int(seen_at // 3600) if abs(seen_at) < 1e15 else 0
        self.commands += [("APPEND", k.hour(hour), ID.pack(entry_id)), ("ZADD", k.hours, "NX", hour, hour)]
        if query.owner is not None:
            self.commands.append(("HSET", k.pending, entry_id, query.owner))
        self.counts["n"] += 1
        return entry_id

    def record(self, query: Query, match: Match, status: str, seen_at: float) -> None:
        assert query.url is not None
        title = "" if query.title is None else query.title[:TITLE_CHARS]
        self.commands += [
            ("DEL", self.k.decision(query.url)),
            ("HSET", self.k.decision(query.url), "status", status, "tier", TIER_CHAR[match.tier],
             "distance", match.distance, "original", match.entry.id, "decided_at", repr(float(seen_at)),
             *(("title", title) if query.title is not None else ()),
             *(("score", repr(float(match.score))) if match.score is not None else ())),
            ("ZADD", self.k.decided, repr(float(seen_at)), query.url),
        ]

    # -- band buckets --------------------------------------------------------------------------------

    def file(self, tier: Tier, fps: Sequence[int]) -> None:
        """File fingerprints in their band buckets, descending into split buckets and splitting the
        buckets they make crowded (:mod:`..bands` decides when and where)."""
        top, fb, k = self.k.tiers[tier], self.k.fp_bytes, self.k
        items: list[tuple[Pair, bands.Path, int, int]] = [
            (k.bucket(tier, n, value), (n,), fp, top.rest(fp, n)) for fp in fps for n, value in top.store(fp)]
        steps = bands.plan(top)
        while items:
            self.read(pair for pair, _, _, _ in items)
            below = []
            for pair, path, fp, rest in items:
                raw = self.fields[pair]
                if raw == MARK:
                    below += self._children(top, pair, path, fp, rest)
                    continue
                raw = raw or b""
                if len(raw) % fb:
                    raise ValueError(f"unreadable band bucket ({len(raw)} bytes): not ours")
                mine = fp.to_bytes(fb, "big")
                if holds(raw, mine):
                    continue
                raw += mine
                self.counts["nbands"] += 1
                size = len(raw) // fb
                split = steps.get(path) if size >= bands.MIN_SPLIT else None
                if split is not None and size >= bands.split_at(top, split):
                    self.set(pair, MARK)
                    self.counts["nbands"] -= size
                    for other in unpack_fps(raw, fb):
                        below += self._children(top, pair, path, other, bands.rest_at(top, path, other))
                else:
                    self.set(pair, raw)
            items = below

    def file_later(self) -> None:
        """From now on, inserts leave their fingerprints to :meth:`file_unfiled` (a bulk add: its
        entries are not looked up before it commits), so that a batch descends into split buckets one
        round trip a level, not one a level and entry."""
        self.unfiled = {"title": [], "body": []}

    def file_unfiled(self) -> None:
        for tier, fps in (self.unfiled or {}).items():
            if fps:
                self.file(tier, fps)
        self.unfiled = None

    def unfile(self, tier: Tier, fps: Sequence[int]) -> None:
        """Take fingerprints out of their band buckets (and the sub-buckets of split ones)."""
        top, fb, k = self.k.tiers[tier], self.k.fp_bytes, self.k
        items: list[tuple[Pair, bands.Path, int, int]] = [
            (k.bucket(tier, n, value), (n,), fp, top.rest(fp, n)) for fp in fps for n, value in top.store(fp)]
        while items:
            self.read(pair for pair, _, _, _ in items)
            below = []
            for pair, path, fp, rest in items:
                raw = self.fields[pair]
                if raw == MARK:
                    below += self._children(top, pair, path, fp, rest)
                elif raw is not None:
                    mine = fp.to_bytes(fb, "big")
                    kept = [x for x in unpack_raw(raw, fb) if x != mine]
                    if len(kept) * fb != len(raw):
                        self.counts["nbands"] -= 1
                        self.set(pair, b"".join(kept))
            items = below

    @staticmethod
    def _children(top: TierBands, pair: Pair, path: bands.Path, fp: int, rest: int
                  ) -> list[tuple[Pair, bands.Path, int, int]]:
        sub = pair[0] + b"/" + pair[1].hex().encode()
        return [((sub, bytes((code,)) + value_bytes(value)), sub_path, fp, sub_rest)
                for code, value, sub_path, sub_rest in bands.children(top, path, rest)]

    # -- committing --------------------------------------------------------------------------------------

    def writes(self) -> list[tuple[Arg, ...]]:
        """The commands that apply this view's writes."""
        out: list[tuple[Arg, ...]] = []
        sets: dict[bytes, list[bytes]] = {}
        dels: dict[bytes, list[bytes]] = {}
        for key, field in self.dirty:
            value = self.fields[key, field]
            if value is None:
                dels.setdefault(key, []).append(field)
            else:
                sets.setdefault(key, []).extend((field, value))
        out += [("HSET", key, *args) for key, args in sets.items()]
        out += [("HDEL", key, *args) for key, args in dels.items()]
        out += [("SET", key, v) if (v := self.strings[key]) is not None else ("DEL", key) for key in self.dirty_strings]
        out += self.commands
        out += [("INCRBY", getattr(self.k, name), n) for name, n in self.counts.items() if n]
        return out

    def commit(self, extra: Sequence[tuple[Arg, ...]] = ()) -> bool:
        """Apply the writes (and ``extra``) in one ``MULTI``/``EXEC``; False when a watched key
        changed since it was read (nothing applied)."""
        body = [*self.writes(), *extra]
        if not body:
            if self.watched:
                self.link.send([("UNWATCH",)])
            del self.ids[: self.used]
            return True
        replies = self.link.send([("MULTI",), *body, ("EXEC",)])
        done = replies[-1]
        if done is None:
            return False
        del self.ids[: self.used]
        failed = [r for r in replies[:-1] if isinstance(r, Exception)] + (
            [r for r in done if isinstance(r, Exception)] if isinstance(done, list) else [done])
        if failed:
            raise SimhashIndexError(f"a write was refused by the server: {failed[0]}")
        return True


def holds(raw: bytes, mine: bytes) -> bool:
    """Does the packed list ``raw`` hold ``mine`` (at a multiple of its length)?"""
    at = raw.find(mine)
    while at >= 0:
        if not at % len(mine):
            return True
        at = raw.find(mine, at + 1)
    return False


def unpack_raw(raw: bytes, fb: int) -> list[bytes]:
    if len(raw) % fb:
        raise ValueError(f"unreadable band bucket ({len(raw)} bytes): not ours")
    return [raw[i : i + fb] for i in range(0, len(raw), fb)]


def unpack_fps(raw: bytes, fb: int) -> list[int]:
    if fb == 8 and not len(raw) % 8:
        return list(struct.unpack(f">{len(raw) // 8}Q", raw))
    if raw == MARK:
        return []
    return [int.from_bytes(x, "big") for x in unpack_raw(raw, fb)]
