"""The Redis band index: one index shared by crawlers on many machines (``redis://``, ``rediss://``).

Same protocol, same verdicts as the SQLite index: :func:`..rule.check_and_add` decides for both,
here over a :class:`.store.View` of the namespace's keys. A check-and-add is an optimistic
transaction on a connection of the calling thread's own (:mod:`.store`): the keys the decision reads
are watched, the writes are committed with ``MULTI``/``EXEC``, and the decision is made again when a
watched key changed meanwhile (at most :data:`MAX_ATTEMPTS` times, then an
:class:`~..base.IndexWriteError`). So N crawler processes on N machines carrying one story admit
exactly one copy, and no lock is held across the network. A batch is decided in one transaction
(a later query sees the earlier ones' entries); when another writer got in its way, its queries are
decided one transaction each.

Each call carries a request token (the query's ``request_id``, which the pipeline keeps per item
across its retries, else a random one); an *added* outcome is remembered under it for
:data:`TOKEN_TTL`, so a call retried after a lost reply returns the same entry instead of finding
itself as its own duplicate.

The index's record ``<prefix>:meta`` (JSON, :mod:`..meta`) is made once (``SET NX``: of several
processes creating it at once, one wins and all check against its record) and checked at every
open; a key space of another :data:`SCHEMA_VERSION` is refused, naming both versions.

A server that forgets is caught, however it forgot (:mod:`.guard`). A server that may evict keys or
lose writes it acknowledged (no append-only file, ``appendfsync no``) is refused at open
(``unsafe="refuse"``) or logged (``"warn"``). The namespace's marker, a random value made with it,
is checked by every call, and the id counter, which only goes up, by each reservation of ids and
each reconnection: a namespace that lost its keys, was made again by another open, or was taken
back to an older copy of the server's data stops the process for good. State that cannot be right
is refused at open and where a check reads it, naming the check.

Failures: an unreachable server, a wrong password or a missing ``redis`` package is an
:class:`~..base.IndexOpenError` at open. A connection error or timeout later is retried a bounded
number of times (``retries``, a doubling delay, reconnecting), then raised as
:class:`~..base.IndexWriteError` (reads: :class:`~..base.SimhashIndexError`). The password is never shown:
:attr:`RedisIndex.location` replaces it with ``***``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any

from .. import rule
from ..bands import REDIS, bands_for, records
from ..base import Entry, IndexOpenError, IndexParams, IndexWriteError, Match, Outcome, Query, SimhashIndexError, Tier
from ..meta import FORMAT, TITLE_CHARS, QueryChecks, check_params, new_meta, verify_meta
from .client import Arg, Link, Server, command, redacted
from .guard import Guard, Ids, View
from .maintain import Maintenance
from .store import ID, ITEM_ERRORS, Keys, namespace_base

logger = logging.getLogger(__name__)
#: The one format of the key space this version reads and writes.
SCHEMA_VERSION = 10
#: Seconds an *added* outcome is remembered under its request token, and a process's pending
#: entries stay its own without a check-and-add or heartbeat (``docs/decisions/0102-redis-transactions.md``).
TOKEN_TTL = 120
LEASE = 120
#: Decisions of one check-and-add made again after a watched key changed, at most
#: (``docs/decisions/0102-redis-transactions.md``).
MAX_ATTEMPTS = 50
#: Queries of a batch decided in one transaction (``docs/decisions/0102-redis-transactions.md``): a
#: transaction watches every key its queries read, and the server's cost of a ``WATCH`` grows with
#: the keys its connection already watches.
TXN_QUERIES = 2
#: Entries per transaction of :meth:`RedisIndex.add` (``docs/decisions/0102-redis-transactions.md``).
ADD_BATCH = 100


def redis_records(params: IndexParams) -> dict[Tier, Any]:
    """The band layout of each tier a Redis index records (the shared layout at Redis's costs)."""
    return records(params, REDIS)


def reband_lock(prefix: str) -> str:
    return f"{prefix}:reband"


class RedisIndex(Guard, Maintenance, QueryChecks):
    """A :class:`~..base.BandIndex` on a Redis server (see the module docstring).

    Open it with :func:`scrapy_simhash.index.open_index` or :meth:`RedisIndex.open`. Methods may be
    called from several threads (each has its own connection)."""

    SCHEMA_VERSION = SCHEMA_VERSION
    location: str
    namespace: str
    params: IndexParams

    def __init__(self) -> None:  # use RedisIndex.open()
        self._server: Server
        self._mark: bytes | None = None  # the namespace's marker at open
        self._readonly = False
        self._unsafe = "refuse"
        self._broken: str | None = None  # why this index may no longer be used (see _refuse)
        self._floor = 0  # the id counter at open: every id reserved later is above it
        self._top = 0  # the highest id this process reserved (any thread)

    @classmethod
    def open(
        cls, url: str, *, namespace: str = "default", params: IndexParams | None = None, create: bool = True,
        readonly: bool = False, busy_timeout: float = 30.0, redis_params: Mapping[str, Any] | None = None,
        retries: int = 2, retry_delay: float = 0.05, unsafe: str = "refuse",
    ) -> RedisIndex:
        """Connect to the Redis index at ``url``, creating its record (``params`` or the defaults)
        if absent. ``busy_timeout`` is the socket timeout of a command; ``redis_params`` go to
        ``redis.Redis`` (``SIMHASH_REDIS_PARAMS``) and override it; connection failures are retried
        ``retries`` times, ``retry_delay`` seconds apart, doubling."""
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
        self._base = namespace_base(self.prefix, namespace)
        self._server.open(lambda client: self._verify(client, params, create))
        self._server.on_connect = self._still_the_same
        return self

    def _verify(self, client: Any, requested: IndexParams | None, create: bool) -> None:
        """Check the record (made when absent) and take the namespace's marker (made when absent). The
        lock is asked again after the marker is read: a re-banding that began meanwhile may have given
        the marker the value its own calls carry."""
        meta_key = f"{self.prefix}:meta"
        for _ in range(3):
            self._not_rebanding(client)
            raw = self._verify_record(client, requested, create)
            mark = client.get(self._base + "meta")
            self._not_rebanding(client)
            if client.get(meta_key) == raw:
                self._mark = None if mark is None else mark.encode()
                if mark is not None:
                    self._floor = self._top = self._check_state(client)
                return
        raise IndexOpenError(f"index {self.location}: its record {meta_key!r} kept changing while it was opened")

    def _not_rebanding(self, client: Any) -> None:
        if client.exists(reband_lock(self.prefix)):
            raise IndexOpenError(f"index {self.location} is being re-banded (scrapy-simhash reband): open it "
                                 "when that is done (a re-banding that died lets go within half a minute)")

    def _verify_record(self, client: Any, requested: IndexParams | None, create: bool) -> str:
        """Check the index's record against ``requested`` and take its parameters; the record's text."""
        meta_key = f"{self.prefix}:meta"
        try:
            raw = client.get(meta_key)
            if raw is None:
                self._no_orphans(client)
                if self._readonly or not create:
                    why = "opened read-only" if self._readonly else "create=False"
                    raise IndexOpenError(f"index {self.location} does not exist (no key {meta_key!r}; {why})")
                record = {"backend": "redis", **new_meta(requested or IndexParams(), SCHEMA_VERSION,
                                                         layout_records=redis_records)}
                client.set(meta_key, json.dumps(record, sort_keys=True), nx=True)
                raw = client.get(meta_key)
            meta = json.loads(raw)
            if not isinstance(meta, dict):
                raise TypeError(f"a JSON {type(meta).__name__}, not an object")
        except UnicodeDecodeError as exc:
            raise IndexOpenError(f"{self.location}: unreadable key {meta_key!r} (binary, not JSON text: "
                                 f"not a scrapy-simhash index): {exc}") from exc
        except (ValueError, TypeError) as exc:
            raise IndexOpenError(f"{self.location}: unreadable key {meta_key!r} (not a scrapy-simhash index?): "
                                 f"{exc}") from exc
        except self._server.errors.ResponseError as exc:
            if "WRONGTYPE" in str(exc):
                raise IndexOpenError(f"{self.location}: key {meta_key!r} holds something else: not a "
                                     "scrapy-simhash index") from exc
            raise
        remedy = (f"(another database or ?prefix=; to delete this one: redis-cli --scan --pattern "
                  f"'{self.prefix}:*' | xargs redis-cli unlink)")
        self.params = verify_meta(meta, self.location, SCHEMA_VERSION, requested, remedy, layout_records=redis_records)
        self._meta, self._record, self._bits = meta, raw, self.params.bits
        self._k = Keys(self.prefix, self.namespace, self.params.bits, bands_for(self.params, REDIS),
                       int(meta.get("band_gen", 0)))
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
            self._mark_namespace(client)
        return raw

    # -- transactions ------------------------------------------------------------------------------

    def _id_pool(self) -> list[int]:
        """The entry ids this thread of this process reserved and has not used yet, smallest first."""
        local = self._server._local
        held = getattr(local, "ids", None)
        if held is None or held[0] != (os.getpid(), self._k.seq):
            held = local.ids = ((os.getpid(), self._k.seq), Ids(self))
        return held[1]

    def _transaction(self, doing: str, step: Any, *, marked: bool = False, retry: bool = True) -> Any:
        """``step(view)`` in an optimistic transaction, made again while a watched key changed; the
        view's writes are committed with ``step``'s ``(value, extra commands)``. ``marked``: ``step``
        reads and checks the marker itself."""

        def run(link: Link) -> Any:
            for attempt in range(MAX_ATTEMPTS):
                view = View(self._k, link, watch=True, ids=self._id_pool())
                if not marked:
                    mark = view.read((), before=[("WATCH", self._k.marker), ("GET", self._k.marker)])[-1]
                    view.watched.add(self._k.marker)
                    self._checked_mark(mark, True)
                value, extra = step(view)
                if view.commit(extra):
                    return value
                if attempt >= 2:
                    time.sleep(random.uniform(0, 0.001 * attempt))
            raise IndexWriteError(f"index {self.location}: {doing} kept meeting other writers "
                                  f"({MAX_ATTEMPTS} attempts); try again")

        return self._server.attempts(doing, run, write=True, retry=retry)

    def _reading(self, doing: str, step: Any, first: Query | None = None) -> Any:
        """``step(view)`` over an unwatched view, after checking the marker (read with what deciding
        ``first`` reads first, when given)."""

        def run(link: Link) -> Any:
            view = View(self._k, link, watch=False)
            if first is None:
                mark = view.read((), before=[("GET", self._k.marker)])[-1]
            else:
                (mark,) = view.prefetch([first], ())
            self._checked_mark(mark, False)
            return step(view)

        try:
            return self._server.attempts(doing, run, write=False)
        except ITEM_ERRORS as exc:
            if isinstance(exc, SimhashIndexError):
                raise
            raise SimhashIndexError(f"index {self.location}: {doing}: {exc}") from exc

    # -- the protocol --------------------------------------------------------------------------------

    def check_and_add(self, query: Query, *, flagged: Collection[Tier] = ()) -> Outcome:
        """The rule (:func:`..rule.check_and_add`) in one optimistic transaction."""
        return self.check_and_add_many([query], flagged=flagged)[0].checked()

    def check_and_add_many(self, queries: Sequence[Query], *, flagged: Collection[Tier] = ()) -> list[Outcome]:
        """Each query in turn (a later one sees the earlier ones' entries), in one transaction; when
        another writer changed what the batch read, one transaction a query. An item the index
        cannot decide gets an outcome with ``error`` (nothing of it written)."""
        for query in queries:
            self._check_query(query)
        self._server.writable()
        if not queries:
            return []
        tokens = [query.request_id or os.urandom(12).hex() for query in queries]
        out: list[list[Outcome]] = []
        if len(queries) > 1 and TXN_QUERIES > 1:
            for start in range(0, len(queries), TXN_QUERIES):
                part, mine = queries[start : start + TXN_QUERIES], tokens[start : start + TXN_QUERIES]
                decided = self._server.attempts("check-and-add", partial(
                    self._batch, queries=part, tokens=mine, flagged=flagged, failed={}), write=True)
                if decided is None:  # another writer got in the way: one transaction a query
                    out += [self._transaction("check-and-add", partial(
                        self._decide, queries=[q], tokens=[t], flagged=flagged, failed={}), marked=True)
                        for q, t in zip(part, mine, strict=True)]
                else:
                    out += [[o] for o in decided]
            return [outcomes[0] for outcomes in out]
        for query, token in zip(queries, tokens, strict=True):
            out.append(self._transaction("check-and-add", lambda view, q=query, t=token: self._decide(
                view, [q], [t], flagged, {}), marked=True))
        return [outcomes[0] for outcomes in out]

    def _batch(self, link: Link, queries: Sequence[Query], tokens: list[str], flagged: Collection[Tier],
               failed: dict[int, str]) -> list[Outcome] | None:
        """The batch in one transaction; None when a watched key changed (nothing applied)."""
        while True:
            view = View(self._k, link, watch=True, ids=self._id_pool())
            try:
                outcomes, extra = self._decide(view, queries, tokens, flagged, failed)
            except _ItemFailed as exc:  # decided again without it: nothing of it is written
                failed[exc.position] = exc.message
                continue
            return outcomes if view.commit(extra) else None

    def _decide(self, view: View, queries: Sequence[Query], tokens: Sequence[str], flagged: Collection[Tier],
                failed: dict[int, str]) -> tuple[list[Outcome], list[tuple[Arg, ...]]]:
        """Decide ``queries`` on ``view`` (prefetched first); the outcomes and the extra commands
        of the commit (request tokens, leases)."""
        now = time.time()
        minute = int(now // 60)
        fields = [hashlib.sha1(token.encode("utf-8", "surrogatepass")).digest()[:12] for token in tokens]
        windows = [self._k.token(m) for m in range(minute - TOKEN_TTL // 60 - 1, minute + 1)]
        asked = [(key, field) for field in fields for key in windows]
        view.reserve = len(queries)
        (mark,) = view.prefetch([q for i, q in enumerate(queries) if i not in failed], asked)
        self._checked_mark(mark, True)
        outcomes: list[Outcome] = []
        extra: list[tuple[Arg, ...]] = []
        for i, (query, field) in enumerate(zip(queries, fields, strict=True)):
            if i in failed:
                outcomes.append(Outcome(match=None, entry_id=None, error=failed[i]))
                continue
            answered = [view.fields[key, field] for key in windows if view.fields.get((key, field))]
            if answered:
                outcomes.append(Outcome(match=None, entry_id=int(answered[-1] or 0)))
                continue
            try:
                outcome = rule.check_and_add(view, query, flagged)
            except ITEM_ERRORS as exc:
                message = f"index {self.location}: check-and-add failed: {exc}"
                if len(queries) == 1:
                    return [Outcome(match=None, entry_id=None, error=message)], []
                raise _ItemFailed(i, message) from exc
            outcomes.append(outcome)
            if outcome.entry_id is not None:
                key = self._k.token(minute)
                extra += [("HSET", key, field, outcome.entry_id), ("EXPIRE", key, TOKEN_TTL + 120)]
                view.fields[key, field] = b"%d" % outcome.entry_id
        for owner in {q.owner for q in queries if q.owner is not None}:
            extra.append(("SET", self._k.alive(owner), 1, "EX", LEASE))
        return outcomes, extra

    def peek(self, query: Query) -> Match | None:
        """What :meth:`check_and_add` would answer now (:func:`..rule.peek`); nothing is written."""
        self._check_query(query)
        return self._reading("check", lambda view: rule.peek(view, query), query)

    def lookup(
        self, title_fp: int | None, body_fp: int | None, *, title_k: int, body_k: int,
        not_before: float | None = None, limit: int = 5,
    ) -> list[Match]:
        """Nearest entries per tier within the distances, title tier first, each tier nearest first."""
        self._check_fp(title_fp, "title_fp")
        self._check_fp(body_fp, "body_fp")
        self._check_k(title_k, body_k)
        if limit <= 0 or (title_fp is None and body_fp is None):
            self._server.live()
            return []
        first = Query(title_fp=title_fp, body_fp=body_fp, title_k=title_k, body_k=body_k)
        return self._reading("lookup", lambda view: rule.lookup(
            view, title_fp, body_fp, title_k=title_k, body_k=body_k, not_before=not_before, limit=limit), first)

    def add(self, entries: list[tuple[int | None, int | None, str | None, str | None, float]]) -> int:
        """Bulk-add ``(title_fp, body_fp, url, title, first_seen)`` unchecked, ``ADD_BATCH`` a transaction."""
        self._server.writable()
        queries = []
        for tfp, bfp, url, title, first_seen in entries:
            if tfp is None and bfp is None:
                raise ValueError("an entry needs a title or a body fingerprint")
            self._check_fp(tfp, "title_fp")
            self._check_fp(bfp, "body_fp")
            queries.append(Query(title_fp=tfp, body_fp=bfp, title_k=0, body_k=0, url=url,
                                 title=None if title is None else title[:TITLE_CHARS], seen_at=float(first_seen)))
        for start in range(0, len(queries), ADD_BATCH):  # everything is validated before the first write
            chunk = queries[start : start + ADD_BATCH]
            def step(view: View, chunk: list[Query] = chunk) -> tuple[None, list[Any]]:
                view.reserve = len(chunk)
                pairs = [view.k.holders(t, fp) for q in chunk  # type: ignore[arg-type]
                         for t, fp in (("title", q.title_fp), ("body", q.body_fp)) if fp is not None]
                pairs += [view.k.bucket(t, n, value) for q in chunk  # type: ignore[arg-type]
                          for t, fp in (("title", q.title_fp), ("body", q.body_fp)) if fp is not None
                          for n, value in view.k.tiers[t].store(fp)]  # type: ignore[index]
                view.read(pairs + [view.k.url(q.url) for q in chunk if q.url is not None])
                view.file_later()
                for q in chunk:
                    view.insert(q, q.seen_at)
                view.file_unfiled()
                return None, []

            self._transaction("bulk add", step, retry=False)  # a lost reply would add it twice
        return len(queries)

    # -- delivery -----------------------------------------------------------------------------------

    def deliver(self, entry_ids: Sequence[int]) -> None:
        """These pending entries' items reached storage: no longer pending."""
        if entry_ids:
            self._server.attempts("deliver", lambda link: link.send([("HDEL", self._k.pending, *entry_ids)]),
                                  write=True)

    def release(self, entry_ids: Sequence[int]) -> int:
        """Remove these pending entries (their items were dropped downstream); returns how many."""
        if not entry_ids:
            return 0
        (owners,) = self._server.attempts("release", lambda link: link.send(
            [("HMGET", self._k.pending, *entry_ids)]), write=True)
        return self._remove("release", [int(i) for i, o in zip(entry_ids, owners, strict=True) if o is not None])

    def recover(self, delivered: Callable[[str], Collection[int]] | None = None) -> int:
        """Release the pending entries of owners that died: on this host, a pid that is gone; on
        another, a lease (:data:`LEASE`) that ran out. Pending ids that name no entry, and stamps
        that no process of ours can have written (:func:`..owners.impossible`), are refused with
        :class:`IndexOpenError`, nothing released. Those ``delivered(owner)`` lists are delivered."""
        from ..owners import alive as owners_alive

        (pending,) = self._server.attempts("recover", lambda link: link.send(
            [("HGETALL", self._k.pending)]), write=True)
        by_owner: dict[str, list[int]] = {}
        for i in range(0, len(pending), 2):
            if not pending[i].isdigit():
                raise IndexOpenError(f"index {self.location}: a pending id {pending[i][:40]!r} is not an entry id; "
                                     "refusing to release entries on it (check: pending rows)")
            by_owner.setdefault(pending[i + 1].decode("utf-8", "replace"), []).append(int(pending[i]))
        if problem := self._pending_problem(by_owner):
            raise IndexOpenError(f"index {self.location}: {problem}; refusing to release entries on them "
                                 "(check: pending rows)")
        total = 0
        for owner, ids in by_owner.items():
            alive = owners_alive(owner)
            if alive is None:
                alive = bool(self._server.retrying("recover", command("exists", self._k.alive(owner)), write=True))
            if not alive:
                stored = set(delivered(owner)) if delivered is not None and owners_alive(owner) is False else set()
                if kept := [i for i in ids if i in stored]:
                    self.deliver(kept)
                if doomed := [i for i in ids if i not in stored]:
                    total += self._remove("recover", doomed)
        return total

    def _pending_problem(self, by_owner: dict[str, list[int]]) -> str | None:
        """Why these pending ids cannot be right (None: they can): ids without an entry, or stamps
        no process of ours can have written on their entries."""
        from ..owners import impossible

        if not by_owner:
            return None
        entries = self._entries_by_id("recover", [i for ids in by_owner.values() for i in ids])
        for owner, ids in by_owner.items():
            orphans = [i for i in ids if i not in entries]
            if orphans:
                return f"{len(orphans)} pending id(s) that no entry owns (e.g. {orphans[0]})"
            why = impossible(owner, min(entries[i].first_seen for i in ids), other_hosts=True)
            if why is not None:
                return f"{len(ids)} pending id(s): {why}"
        return None

    def heartbeat(self, owner: str) -> None:
        """Keep ``owner``'s pending entries its own for another :data:`LEASE` seconds (every
        check-and-add does too), so that no process on another host takes it for dead."""
        seen = self._top
        replies = self._server.attempts("heartbeat", lambda link: link.send(
            [("SET", self._k.alive(owner), 1, "EX", LEASE), ("MGET", self._k.marker, self._k.seq)]), write=True)
        self._same_as_seen(replies[1], seen, IndexWriteError)

    def _entries_by_id(self, doing: str, ids: Sequence[int]) -> dict[int, Entry]:
        """The entries with these ids that still exist."""
        found = self._reading(doing, lambda view: view.entries(list(ids)))
        return {e.id: e for e in found}

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


class _ItemFailed(Exception):
    def __init__(self, position: int, message: str) -> None:
        super().__init__(message)
        self.position, self.message = position, message


__all__ = ["FORMAT", "ID", "SCHEMA_VERSION", "RedisIndex", "redacted"]
