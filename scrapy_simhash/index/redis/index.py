"""The Redis band index: one index shared by crawlers on many machines (``redis://``, ``rediss://``).

Same protocol, same verdicts as the SQLite index (:mod:`.sqlite`) for the same inputs; what differs is
where the data lives and how atomicity is obtained.

Atomicity: one round trip
-------------------------
A check-and-add is one call of the Lua script ``redis_rule.lua`` (:data:`SCRIPT`: ``FCALL`` of a
library of Redis functions on Redis 7 and later, else ``EVALSHA``; loaded again when the server
lost it, e.g. after a restart without persistence or ``FUNCTION FLUSH``: see :mod:`.redis_client`),
with two JSON arguments (the call's own; base, limits and marker). Redis runs a script alone, so
the tiers and the insert are one atomic step: N
crawler processes on N machines carrying one story admit exactly one copy, and no lock is ever held
across the network. Each call carries a request token (the query's ``request_id``, which the
pipeline keeps per item across its retries, else a random one); an *added* outcome is remembered
under it for two minutes, so a call retried after a lost reply, or a batch retried after it was
applied in part, returns the same entry instead of finding itself as its own duplicate.

Keys: see :mod:`.redis_keys`.

Exactness in Lua
----------------
Lua 5.1 numbers are doubles, so fingerprints never become Lua numbers: they travel as fixed-width
hex strings, are stored as raw bytes, and the script computes Hamming distances 32 bits at a time
(``struct.unpack`` of 4-byte words, ``bit.bxor`` and a SWAR popcount). The band layout comes from
here (each band's shift and width, in the script's limits) and so do the keys a query probes
(:meth:`.redis_keys.Keys.probe_keys`: a layout that probes neighbours plugs in without touching
the script; one that probes its own bands' keys, the default, sends none and the script masks the
query's fingerprints); the script files a new fingerprint under its bands by masking it. Every candidate
is verified by its exact distance, as in SQLite. The tier rule in the script is a
section-by-section port of :mod:`.rule`; ``tests/test_rule.py`` runs both on one verdict table,
and ``tests/test_index_redis.py`` feeds both backends the same random stream.

Expiry is ``not_before`` against each entry's first-seen time plus :meth:`RedisIndex.purge`, which
drops whole hourly time buckets (no native key expiry: an entry must leave its lists together with
its record).

Failures: an unreachable server, a wrong password or a missing ``redis`` package is an
:class:`~.base.IndexOpenError` at open. A connection error or timeout later is retried a bounded
number of times (``retries``, a short doubling delay, reconnecting each time), then raised as
:class:`~.base.IndexWriteError` (reads: :class:`~.base.IndexError_`). The password is never shown:
:attr:`RedisIndex.location` replaces it with ``***``.

``reset`` deletes the namespace's keys with ``SCAN`` + ``UNLINK`` in batches (not one atomic step:
run it when no crawler is writing to that namespace, as with the SQLite index's maintenance).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from collections.abc import Collection, Mapping, Sequence
from importlib import resources
from typing import Any

from ...fingerprint.signatures import NUMBERS_MAX
from .. import rule
from ..base import Decision, Entry, IndexError_, IndexOpenError, IndexParams, Match, Outcome, Query, Tier
from ..meta import FORMAT, TITLE_CHARS, QueryChecks, check_params, layouts, verify_meta
from ..owners import alive as owners_alive
from .client import Server, redacted
from .keys import CHAR_TIER, LOAD, TAG_BITS, TIER_CHAR, Keys, as_score
from .maintain import Maintenance
from .record import SCHEMA_VERSION, not_rebanding, read_record

logger = logging.getLogger(__name__)
#: Seconds an *added* outcome is remembered under its request token (retries after a lost reply
#: come within seconds; a short life keeps the tokens of a fast crawl to a few MB).
TOKEN_TTL = 120
#: Seconds a process's pending entries stay its own without a check-and-add or heartbeat: past it,
#: a process on another host may take it for dead and release them (:meth:`RedisIndex.recover`).
LEASE = 120
#: Entries per ``EVALSHA`` in :meth:`RedisIndex.add` and per purge batch.
ADD_BATCH = 500
#: The rule's constants, as the script reads them.
_LIMITS = {
    "numbers_max": NUMBERS_MAX,
    "sentences_stored": rule.SENTENCES_STORED,
    "sentences_figures": rule.SENTENCES_FIGURES,
    "holders_page": rule.HOLDERS_PAGE,
    "sentence_body_distance": rule.SENTENCE_BODY_DISTANCE,
    "sentence_body_part": rule.SENTENCE_BODY_PART,
    "title_body_distance": rule.TITLE_BODY_DISTANCE,
    "sentence_max_holders": rule.SENTENCE_MAX_HOLDERS,
    "load": LOAD,
    "tag_bits": TAG_BITS,
}

#: The server-side half of the index: the tier rule ported from :mod:`.rule`, the store operations,
#: maintenance (``redis_rule.lua``, shipped as package data).
SCRIPT = resources.files(__package__).joinpath("rule.lua").read_text(encoding="utf-8")


# -- the index -------------------------------------------------------------------------------------


class RedisIndex(Maintenance, QueryChecks):
    """A :class:`~.base.BandIndex` on a Redis server (see the module docstring for keys and script).

    Open it with :func:`scrapy_simhash.index.open_index` or :meth:`RedisIndex.open`. The client is
    thread-safe (a connection pool), so methods may be called from several threads.
    """

    SCHEMA_VERSION = SCHEMA_VERSION
    location: str
    namespace: str
    params: IndexParams

    def __init__(self) -> None:  # use RedisIndex.open()
        self._server: Server
        self._common: tuple[Any, str] | None = None  # (base, limits, marker) and their JSON (_args)
        self._mark: str | None = None  # the namespace's marker at open (None: none, read-only)

    # -- opening -----------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        *,
        namespace: str = "default",
        params: IndexParams | None = None,
        create: bool = True,
        readonly: bool = False,
        busy_timeout: float = 30.0,
        redis_params: Mapping[str, Any] | None = None,
        retries: int = 2,
        retry_delay: float = 0.05,
        unsafe: str = "refuse",
    ) -> RedisIndex:
        """Connect to the Redis index at ``url``, creating its record (``params`` or the defaults)
        if absent. ``busy_timeout`` is the socket timeout of a command; ``redis_params`` go to
        ``redis.Redis`` (``SIMHASH_REDIS_PARAMS``) and override it; connection failures are retried
        ``retries`` times, ``retry_delay`` seconds apart, doubling. A server that may forget entries
        (evicts any key, or does not persist) is refused with ``unsafe="refuse"`` (an index opened
        to write), logged with ``"warn"``."""
        if not isinstance(namespace, str) or not namespace:
            raise ValueError("namespace must be a non-empty string")
        if params is not None:
            check_params(params)
        if unsafe not in ("refuse", "warn"):
            raise ValueError(f"unsafe must be 'refuse' or 'warn', not {unsafe!r}")
        self = cls()
        self._unsafe = unsafe
        self._server = Server(url, busy_timeout=busy_timeout, redis_params=redis_params, readonly=readonly,
                              retries=retries, retry_delay=retry_delay)
        self.location, self.prefix = self._server.location, self._server.prefix
        self.namespace = namespace
        self._readonly = readonly
        self._base = self._namespace_base(namespace)
        self._server.open(lambda client: self._verify(client, params, create), SCRIPT, self._base + "seq")
        return self

    def _verify(self, client: Any, requested: IndexParams | None, create: bool) -> None:
        # The namespace's marker: every call fails once it holds another value than it held here
        # (gone: the server was restarted without persistence or evicted keys, and the script must
        # not answer from an emptied index; changed: the index was re-banded, redis_reband).
        # Read after the record and checked against it, so that the two are of one layout.
        # The lock is asked again after the marker is read: a re-banding that began meanwhile may have
        # given it the value its own calls carry.
        meta_key = f"{self.prefix}:meta"
        for _ in range(3):
            not_rebanding(client, self.prefix, self.location)
            raw = self._verify_record(client, requested, create)
            mark = client.get(self._base + "meta")
            not_rebanding(client, self.prefix, self.location)
            if client.get(meta_key) == raw:
                self._mark, self._record = mark, raw
                return
        raise IndexOpenError(f"index {self.location}: its record {meta_key!r} kept changing while it was opened")

    def _verify_record(self, client: Any, requested: IndexParams | None, create: bool) -> str:
        """Check the index's record against ``requested`` and take its parameters; the record's text."""
        meta, raw = read_record(client, self._server.errors.ResponseError, self.prefix, self.location, requested,
                                create=create, readonly=self._readonly)
        remedy = (f"(another database or ?prefix=; to delete this one: redis-cli --scan --pattern "
                  f"'{self.prefix}:*' | xargs redis-cli unlink)")
        stored = verify_meta(meta, f"{self.location}", SCHEMA_VERSION, requested, remedy)
        self.params = stored
        self._meta = meta
        self._bits = stored.bits
        self._k = Keys(self.location, self.namespace, stored.bits, layouts(stored), int(meta.get("band_gen", 0)))
        self._limits = {**_LIMITS, **self._k.limits()}
        if not self._readonly:
            forgetful = self._server.forgetful()
            if forgetful and self._unsafe == "refuse":
                raise IndexOpenError(
                    f"index {self.location}: this Redis server may forget entries, and forgotten entries "
                    f"let their stories in again: {'; '.join(forgetful)}. Fix the server, or set "
                    "SIMHASH_REDIS_UNSAFE = 'warn' to use it anyway"
                )
            for problem in forgetful:
                logger.warning("scrapy-simhash: Redis index %s may forget entries: %s", self.location, problem)
            client.hsetnx(f"{self.prefix}:namespaces", self.namespace, repr(time.time()))
            client.set(self._base + "meta", SCHEMA_VERSION, nx=True)
        return raw

    # -- helpers -----------------------------------------------------------------------------------

    def _script(self, doing: str, args: tuple[str, str], *, write: bool = True, retry: bool = True) -> Any:
        return self._server.script(doing, [args], write=write, retry=retry)[0]

    def _args(self, op: str, **fields: Any) -> tuple[str, str]:
        """The script's two arguments, JSON objects (None values left out: absent, not null): the
        call's own, and what every call repeats (base, limits, marker), encoded once and again only
        when it changed (the script keeps what it decoded from that text while it stays loaded)."""
        common = (self._base, self._limits, self._mark)
        if self._common is None or self._common[0] != common:
            head = {"base": self._base, "limits": self._limits, "mark": self._mark}
            text = json.dumps({k: v for k, v in head.items() if v is not None}, ensure_ascii=False, sort_keys=True)
            self._common = (copy.deepcopy(common), text)
        body = json.dumps({"op": op, **{k: v for k, v in fields.items() if v is not None}}, ensure_ascii=False)
        return body, self._common[1]

    # -- the protocol --------------------------------------------------------------------------------

    def check_and_add(self, query: Query, *, flagged: Collection[Tier] = ()) -> Outcome:
        """The rule (the script's port of :func:`.rule.check_and_add`): one ``EVALSHA``, one round
        trip, atomic on the server."""
        return self.check_and_add_many([query], flagged=flagged)[0].checked()

    def check_and_add_many(self, queries: Sequence[Query], *, flagged: Collection[Tier] = ()) -> list[Outcome]:
        """One ``EVALSHA`` per query, in order, sent together (one round trip for the batch): each
        is atomic, the batch is not one transaction. A batch broken off is sent again whole with the
        same request tokens, so the part already applied returns what it added."""
        for query in queries:
            self._check_query(query)
        marks = {TIER_CHAR[tier]: True for tier in flagged} or None
        calls = [
            self._args("check", q=self._k.query(query), flagged=marks, token=query.request_id or os.urandom(12).hex(),
                       token_ttl=TOKEN_TTL, lease=LEASE)
            for query in queries
        ]
        replies = self._server.script("check-and-add", calls, per_call=True) if calls else []
        return [self._outcome(reply) for reply in replies]

    def peek(self, query: Query) -> Match | None:
        """What :meth:`check_and_add` would answer now (the script's port of :func:`.rule.peek`);
        nothing is written."""
        self._check_query(query)
        outcome = self._outcome(self._script("check", self._args("peek", q=self._k.query(query)), write=False))
        if outcome.error is not None:
            raise IndexError_(outcome.error)
        return outcome.match

    def _outcome(self, reply: Any) -> Outcome:
        if isinstance(reply, IndexError_):
            return Outcome(match=None, entry_id=None, error=str(reply))
        if reply[0] == b"added":
            return Outcome(match=None, entry_id=int(reply[1]))
        if reply[0] == b"new":
            return Outcome(match=None, entry_id=None)
        _, tc, distance, entry_id, record = reply
        try:
            entry = self._k.entry(entry_id, record)
        except IndexError_ as exc:
            return Outcome(match=None, entry_id=None, error=str(exc))
        return Outcome(match=Match(CHAR_TIER[tc.decode()], int(distance), entry), entry_id=None)

    def lookup(
        self,
        title_fp: int | None,
        body_fp: int | None,
        *,
        title_k: int,
        body_k: int,
        not_before: float | None = None,
        limit: int = 5,
    ) -> list[Match]:
        """Nearest entries per tier within the distances, title tier first, each tier nearest first."""
        self._check_fp(title_fp, "title_fp")
        self._check_fp(body_fp, "body_fp")
        self._check_k(title_k, body_k)
        if limit <= 0 or (title_fp is None and body_fp is None):
            self._server.live()
            return []
        args = self._args(
            "lookup",
            title_fp=None if title_fp is None else self._k.hex(title_fp),
            body_fp=None if body_fp is None else self._k.hex(body_fp),
            title_k=title_k, body_k=body_k, limit=int(limit),
            not_before=None if not_before is None else as_score(not_before),
            probe=self._k.probes(title_fp, body_fp),
        )
        reply = self._script("lookup", args, write=False)
        return [Match(CHAR_TIER[tc.decode()], int(d), self._k.entry(i, record)) for tc, d, i, record in reply]

    def add(self, entries: list[tuple[int | None, int | None, str | None, str | None, float]]) -> int:
        """Bulk-add ``(title_fp, body_fp, url, title, first_seen)`` unchecked, ``ADD_BATCH`` per call."""
        self._server.writable()
        rows: list[dict[str, Any]] = []
        for tfp, bfp, url, title, first_seen in entries:
            if tfp is None and bfp is None:
                raise ValueError("an entry needs a title or a body fingerprint")
            self._check_fp(tfp, "title_fp")
            self._check_fp(bfp, "body_fp")
            row = {
                "title_fp": None if tfp is None else self._k.hex(tfp),
                "body_fp": None if bfp is None else self._k.hex(bfp),
                "url": url,
                "title": None if title is None else title[:TITLE_CHARS],
                "seen_at": as_score(first_seen),
            }
            rows.append({k: v for k, v in row.items() if v is not None})
        total = 0
        for start in range(0, len(rows), ADD_BATCH):  # everything is validated before the first write
            args = self._args("add", entries=rows[start : start + ADD_BATCH])
            total += int(self._script("bulk add", args, retry=False))
        return total

    def _remove(self, doing: str, how: str, value: str | int, batch: int = ADD_BATCH) -> tuple[int, bool]:
        """Remove entries and the band members of fingerprints no entry holds any more (one call):
        (how many went, whether a purge has more to do)."""
        return self._removing(doing, self._args("remove", how=how, value=value, batch=batch))

    def _removing(self, doing: str, args: str) -> tuple[int, bool]:
        """A removing script call (``remove``, ``release``; the band members of fingerprints it left
        without entries go in the same call): (how many entries went, whether there is more to do)."""
        n, more = self._script(doing, args)
        return int(n), bool(more)

    # -- delivery -----------------------------------------------------------------------------------

    def deliver(self, entry_ids: Sequence[int]) -> None:
        """These pending entries' items reached storage: no longer pending."""
        if entry_ids:
            self._script("deliver", self._args("deliver", ids=[int(i) for i in entry_ids]))

    def release(self, entry_ids: Sequence[int]) -> int:
        """Remove these pending entries (their items were dropped downstream); returns how many."""
        if not entry_ids:
            return 0
        return self._removing("release", self._args("release", ids=[int(i) for i in entry_ids]))[0]

    def recover(self) -> int:
        """Release the pending entries of owners that died: on this host, a pid that is gone; on
        another, a heartbeat (:data:`LEASE`) that ran out."""
        owners = self._server.retrying("recover", lambda c: c.smembers(self._base + "owners"), write=True)
        total = 0
        for owner in owners:
            alive = owners_alive(owner)
            if alive is None:
                alive = bool(self._server.retrying("recover", lambda c, o=owner: c.exists(self._base + "alive:" + o),
                                                   write=True))
            if not alive:
                total += self._removing("recover", self._args("release", owner=owner))[0]
        return total

    def heartbeat(self, owner: str) -> None:
        """Keep ``owner``'s pending entries its own for another :data:`LEASE` seconds (every
        check-and-add does too), so that no process on another host takes it for dead."""
        self._script("heartbeat", self._args("heartbeat", owner=owner, lease=LEASE))

    def explain(self, url: str) -> Decision | None:
        """The latest decision recorded for ``url`` in this namespace (None if it was new or unseen)."""
        found = self._decisions([url])
        return found[0] if found else None

    def decisions(self, limit: int = 1000) -> list[Decision]:
        """The ``limit`` most recent decisions of this namespace, newest first."""
        if limit <= 0:
            return []
        urls = self._server.retrying(
            "decisions", lambda c: c.zrevrange(self._base + "decided", 0, limit - 1), write=False
        )
        return self._decisions(urls)

    def _decisions(self, urls: list[str]) -> list[Decision]:
        base = self._base

        def fetch(client: Any) -> list[dict[str, str]]:
            pipe = client.pipeline(transaction=False)
            for url in urls:
                pipe.hgetall(base + "d:" + url)
            return pipe.execute()

        decided = self._server.retrying("explain", fetch, write=False) if urls else []
        try:
            ids = sorted({int(d["original"]) for d in decided if d})
            originals = self._records("explain", ids)
            return [
                Decision(
                    url=url,
                    status=d["status"],
                    tier=CHAR_TIER[d["tier"]],
                    distance=int(d["distance"]),
                    original=originals.get(int(d["original"])),
                    decided_at=float(d["decided_at"]),
                    title=d.get("title"),
                )
                for url, d in zip(urls, decided, strict=True)
                if d
            ]
        except (KeyError, ValueError, TypeError) as exc:
            raise IndexError_(f"index {self.location}: a stored decision is unreadable ({exc!r})") from exc

    def _records(self, doing: str, ids: Sequence[int]) -> dict[int, Entry]:
        """The entries with these ids that still exist, read by the script (records are binary)."""
        out: dict[int, Entry] = {}
        for start in range(0, len(ids), 1000):
            flat = self._script(doing, self._args("records", ids=list(ids[start : start + 1000])), write=False)
            for i in range(0, len(flat), 2):
                if flat[i + 1] is not None:
                    out[int(flat[i])] = self._k.entry(flat[i], flat[i + 1])
        return out

    def close(self) -> None:
        """Close every connection (idempotent)."""
        self._server.close()

    def __enter__(self) -> RedisIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._server.client is None else ("read-only" if self._readonly else "open")
        return f"<RedisIndex {self.location} namespace={self.namespace!r} {state}>"


__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "SCRIPT",
    "RedisIndex",
    "redacted",
]


