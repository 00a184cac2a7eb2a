"""What keeps a Redis index from answering from a server that forgot, or from state that cannot be right.

A mixin of :class:`.index.RedisIndex` (:class:`Guard`) and the view its checks run on (:class:`View`):

* the namespace's marker, a random value made with the namespace (with its counters, in one
  transaction), checked by every call: lost, or made again by another open, and the process is
  refused for good (:meth:`Guard._refuse`);
* the id counter, which only goes up: each reservation of ids (:class:`Ids`) and each new connection
  (:meth:`Guard._still_the_same`) is checked against the ids the process already had, so a server
  restarted from an older copy of its data, whose snapshot holds the marker, is noticed;
* at open, cheap checks of the namespace's state (:meth:`Guard._check_state`), and during checks
  those of what the rule reads (:class:`View`), each naming the check.

The server's persistence is checked by :meth:`.client.Server.forgetful`. Decision record
``docs/decisions/0110-redis-forgets.md``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..base import Entry, IndexOpenError, IndexWriteError, SimhashIndexError, Tier
from .client import Link, Server
from .store import ID, Keys, namespace_base, unpack_holders, unpack_ids
from .store import View as StoreView

logger = logging.getLogger(__name__)
#: A namespace's counters, made with it: the id counter, the entries, the band rows.
COUNTERS = ("seq", "n", "nbands")
#: Ids above the id counter whose entries an open looks for (none may exist), and the ids last
#: filed in the newest time bucket that it compares with the counter.
PROBE_ABOVE = 8
NEWEST_IDS = 1024
#: The newest entries an open checks are filed where checks look for them.
SPOT_CHECKED = 4
#: Read atomically: ``HGET`` of the first ``#ARGV`` keys (field: the argument of the same rank),
#: ``EXISTS`` of the others.
ATOMIC_READ = ("local out = {} for i = 1, #ARGV do out[i] = redis.call('HGET', KEYS[i], ARGV[i]) or false end "
               "for i = #ARGV + 1, #KEYS do out[i] = redis.call('EXISTS', KEYS[i]) end return out")


class Guard:
    """The marker, the id counter and the state checks of :class:`.index.RedisIndex` (see the module)."""

    SCHEMA_VERSION: int
    location: str
    namespace: str
    prefix: str
    _base: str
    _k: Keys
    _server: Server
    _mark: bytes | None
    _readonly: bool
    _broken: str | None
    _floor: int
    _top: int

    def _mark_namespace(self, client: Any) -> None:
        """Give the namespace its marker when it has none: a value of its own (random), so that a
        namespace emptied and made again never looks like the one a process opened. A new namespace
        gets its counters with it, in one transaction, so a counter missing later was removed (a
        namespace is new while nothing was committed to it: the id counter alone may exist, made by
        a reservation that was refused)."""
        base = self._base
        if client.exists(base + "meta"):
            return
        pipe = client.pipeline(transaction=True)
        pipe.set(base + "meta", f"{self.SCHEMA_VERSION}:{os.urandom(8).hex()}", nx=True)
        if not client.exists(base + "n", base + "nbands", base + "hours"):
            for name in COUNTERS:
                pipe.set(base + name, 0, nx=True)
        pipe.execute()

    def _no_orphans(self, client: Any) -> None:
        """Refuse to make the index's record again while namespaces made under the lost one remain:
        the record says how their entries are filed, and another one would answer wrongly from them."""
        names = client.hkeys(f"{self.prefix}:namespaces")
        marked = [n for n in names if client.exists(namespace_base(self.prefix, n) + "meta")]
        if marked and client.get(f"{self.prefix}:meta") is None:  # read again: another open may have made both
            raise IndexOpenError(
                f"index {self.location}: state that cannot be right (check 'record present'): its record "
                f"{self.prefix + ':meta'!r} is gone while namespaces made under it remain ({', '.join(marked[:5])}); "
                "refusing to make a new one over them. Restore the record, or delete the index's keys "
                f"(redis-cli --scan --pattern '{self.prefix}:*' | xargs redis-cli unlink)")

    def _check_state(self, client: Any) -> int:
        """Refuse a namespace whose counters cannot be right (cheap checks, no scan): its counters
        present and whole numbers, no more entries counted than ids given, no entry filed with an id
        the id counter has not reached, the newest entries filed where checks look for them
        (:meth:`_spot_check`). Returns the id counter."""
        base = self._base
        values = client.mget([base + name for name in COUNTERS])
        for name, value in zip(COUNTERS, values, strict=True):
            if value is None:
                self._state_error("counters present",
                                  f"…:{name} is missing or not a string (it is made with the namespace)")
            if not value.isdigit():
                self._state_error("counters readable", f"…:{name} is {value[:40]!r}, not a whole number >= 0")
        seq, n = int(values[0]), int(values[1])
        if n > seq:
            self._state_error("entries within ids given", f"…:n counts {n} entries but only {seq} ids were given")
        newest = client.zrange(base + "hours", -1, -1)
        if n and not newest and int(client.get(base + "n") or 0):  # read again: a purge may have emptied it
            self._state_error("time buckets present", f"…:n counts {n} entries but …:hours lists no time bucket")
        ids: list[int] = []
        if newest:
            tail = ("GETRANGE", f"{base}t:{newest[0]}", -ID.size * NEWEST_IDS, -1)  # ids are appended
            ids = unpack_ids(self._server.attempts("open", lambda link: link.send([tail])[0], write=False) or b"")
        pipe = client.pipeline(transaction=False)
        for i in range(seq + 1, seq + 1 + PROBE_ABOVE):
            pipe.exists(f"{base}e:{i}")
        above = [seq + 1 + k for k, found in enumerate(pipe.execute()) if found]
        highest = max(ids + above, default=0)
        if highest > seq:  # the counter read again: other processes may have added entries meanwhile
            seq = int(client.get(base + "seq") or 0)
            if highest > seq:
                self._state_error("id counter above the entries", f"…:seq is {seq} but entry {highest} exists")
        if ids:
            self._server.attempts("open", partial(self._spot_check, ids=ids[-SPOT_CHECKED:]), write=False)
        return seq

    def _spot_check(self, link: Link, ids: Sequence[int]) -> None:
        """The newest entries (of ``ids``, those not forgotten) are where a check looks for them:
        listed as holders of their fingerprints, which are filed in their band buckets. An entry
        removed meanwhile by another process (its record gone after the read that missed it) is not
        damage: a removal takes the record, holders and band rows in one transaction."""
        view = StoreView(self._k, link, watch=False)
        for entry in view.entries(list(ids)):
            for tier, fp in (("title", entry.title_fp), ("body", entry.body_fp)):
                if fp is None:
                    continue
                held = [i for _, i in unpack_holders(view.get(self._k.holders(tier, fp)) or b"")]  # type: ignore[arg-type]
                check, why = ("entries listed as holders", "does not list it among its holders (…:h* keys lost?)")
                if entry.id in held:
                    if fp in view.candidates(tier, fp):  # type: ignore[arg-type]
                        continue
                    check, why = ("entries filed in band buckets", "is missing from its band buckets (…:b* keys lost?)")
                if link.send([("EXISTS", self._k.entry(entry.id))])[0]:
                    self._state_error(check, f"entry {entry.id}'s {tier} fingerprint {fp:x} {why}")
                break

    def _state_error(self, check: str, detail: str) -> None:
        raise IndexOpenError(
            f"index {self.location}: namespace {self.namespace!r} holds state that cannot be right (check "
            f"'{check}': {detail}); refusing to answer from it. If the server was restored or its keys "
            "were edited, restore a consistent copy, or delete the namespace's keys and crawl again "
            f"(redis-cli --scan --pattern '{self._base}*' | xargs redis-cli unlink)")

    @property
    def identity(self) -> str | None:
        """The namespace's marker as this index opened it (None: it had none): a value made with the
        namespace, so another process (a crawl's worker) can tell that it opens the same one."""
        return None if self._mark is None else self._mark.decode()

    def _checked_mark(self, mark: Any, write: bool) -> None:
        """Refuse to go on when the namespace's marker is not what it was at open, or when this
        index saw the server forget (:meth:`_refuse`)."""
        if self._broken is None and (mark == self._mark or (self._mark is None and self._readonly)):
            return
        error = IndexWriteError if write else SimhashIndexError
        if self._broken is not None:
            raise error(self._broken)
        if mark is None:
            self._refuse(error, "the server lost its keys (restarted without persistence, flushed, or evicted): "
                         "refusing to answer from an emptied index")
        if b":reband:" in mark or self._rebanded():
            raise error(f"index {self.location} is being or was re-banded since it was opened: reopen it")
        self._refuse(error, "its namespace was emptied and made again since this process opened it (FLUSHALL "
                     "or FLUSHDB and another open, its keys deleted, or another copy put in its place): the "
                     "entries it answered from are gone")

    def _rebanded(self) -> bool:
        """Does the index's record name another band layout than the one this index opened with?"""
        try:
            raw = self._server.live().get(f"{self.prefix}:meta")
            return raw is not None and int(json.loads(raw).get("band_gen", 0)) != self._k.gen
        except (ValueError, TypeError, AttributeError, self._server.errors.RedisError):
            return False

    def _refuse(self, error: type[SimhashIndexError], why: str) -> None:
        """Stop using this index for good (every later call is refused too): the server forgot what
        this process saw it hold, and what it holds now would let stories in again."""
        self._broken = (f"index {self.location}: {why}; refusing to go on (every call of this process is "
                        "refused from now on). Find out what happened to the server; a new crawl "
                        "opens the index as the server holds it now")
        logger.error("scrapy-simhash: %s", self._broken)
        raise error(self._broken)

    def _counter_went_back(self, server_seq: int | None, seen: int, error: type[SimhashIndexError]) -> None:
        if self._broken is not None:
            raise error(self._broken)
        try:  # a marker that changed too says more
            mark = self._server.live().get(self._k.marker.decode())
        except self._server.errors.RedisError:
            mark = self._mark
        mark = mark.encode() if isinstance(mark, str) else mark
        if mark != self._mark:
            self._checked_mark(mark, error is IndexWriteError)
        now = "missing" if server_seq is None else str(server_seq)
        self._refuse(error, f"the namespace's id counter went backwards (…:seq is {now}, this process already had "
                     f"ids up to {seen}): the server was flushed, restarted from an older copy of its data or lost "
                     "writes, or the counter was changed, so entries this process saw may be gone")

    def _still_the_same(self, link: Link) -> None:
        """On each (re)connection: the server still holds this namespace as this process last saw it
        (the marker it opened, an id counter not below the ids it reserved). A restart from an
        older snapshot passes the marker check (the snapshot holds it) but not the counter's."""
        seen = self._top
        self._same_as_seen(link.send([("MGET", self._k.marker, self._k.seq)])[0], seen, IndexWriteError)

    def _same_as_seen(self, reply: Any, seen: int, error: type[SimhashIndexError]) -> None:
        """``reply`` (the marker and the id counter, read after this process had reserved ids up to
        ``seen``) shows the namespace as this process saw it. ``seen`` is taken before the read is
        sent: ids another thread reserves meanwhile may be above the counter the read returns."""
        if isinstance(reply, Exception):
            raise reply
        mark, seq = reply
        if mark is None or b":reband:" not in mark:  # a re-banding's own calls connect meanwhile
            self._checked_mark(mark, error is IndexWriteError)
        if self._mark is None or seen <= 0:
            return
        if seq is None or not seq.isdigit() or int(seq) < seen:
            self._counter_went_back(int(seq) if seq is not None and seq.isdigit() else None, seen, error)


class View(StoreView):
    """The store's view, refusing state that cannot be right where the rule reads it: a band bucket
    filing a fingerprint no entry holds, a holder whose entry is gone or holds another fingerprint
    (the id counter was set back and a new entry took its id). Each is an error of the item being
    checked (never an answer), naming the check. What a view reads in several round trips may
    straddle another writer's removal, so a gap is read again in one atomic step before it is
    called damage."""

    def holders(self, tier: Tier, fp: int, not_before: float, limit: int | None, offset: int = 0) -> list[Entry]:
        found = super().holders(tier, fp, not_before, limit, offset)
        pair = self.k.holders(tier, fp)
        raw = self.fields.get(pair)
        end = None if limit is None else offset + limit
        listed = [i for t, i in unpack_holders(raw or b"") if t >= not_before][offset:end]
        if raw is None or len(found) != len(listed):
            self._gap(tier, fp, pair, listed, {e.id for e in found})
        for entry in found:
            if (entry.title_fp if tier == "title" else entry.body_fp) != fp:
                raise SimhashIndexError(f"state that cannot be right (check 'holders hold'): entry {entry.id} is "
                                        f"listed as holding {tier} fingerprint {fp:x} but holds another (its id "
                                        "was given twice: the id counter was set back?)")
        return found

    def _gap(self, tier: Tier, fp: int, pair: tuple[bytes, bytes], listed: list[int], found: set[int]) -> None:
        """Raise when, read again atomically, ``fp`` is filed in a band bucket but has no holders, or a
        listed holder's entry is gone."""
        buckets = [self.k.bucket(tier, n, value) for n, value in self.k.tiers[tier].store(fp)]
        missing = [i for i in listed if i not in found]
        keys = [pair[0], *(key for key, _ in buckets), *(self.k.entry(i) for i in missing)]
        (reply,) = self.link.send([("EVAL", ATOMIC_READ, len(keys), *keys, pair[1], *(f for _, f in buckets))])
        if isinstance(reply, Exception):
            raise reply
        held, filed, exist = reply[0], reply[1 : 1 + len(buckets)], reply[1 + len(buckets) :]
        mine, fb = fp.to_bytes(self.k.fp_bytes, "big"), self.k.fp_bytes
        if held is None and any(v and any(v[j : j + fb] == mine for j in range(0, len(v), fb)) for v in filed):
            raise SimhashIndexError(f"state that cannot be right (check 'band rows held'): a band bucket files "
                                    f"{tier} fingerprint {fp:x}, which no entry holds")
        still = {i for _, i in unpack_holders(held or b"")}
        gone = [i for i, n in zip(missing, exist, strict=True) if not n and i in still]
        if gone:
            raise SimhashIndexError(f"state that cannot be right (check 'holders exist'): entries {gone[:5]} are "
                                    f"listed as holding {tier} fingerprint {fp:x} but are gone")


class Ids(list[int]):
    """A thread's reserved ids (see :meth:`.index.RedisIndex._id_pool`), each reservation checked as it
    arrives: the id counter only goes up, so ids at or below ones this thread already had (or the
    counter's value at open) mean the server went back in time or the counter was changed. Refused
    before any entry is written with them."""

    def __init__(self, index: Guard) -> None:
        super().__init__()
        self.of, self.top = index, index._floor

    def __iadd__(self, ids: Any) -> Ids:  # type: ignore[override,misc]
        ids = list(ids)
        if ids:
            if ids[0] <= self.top:
                self.of._counter_went_back(ids[-1], self.top, IndexWriteError)
            self.top = ids[-1]
            if ids[-1] > self.of._top:
                self.of._top = ids[-1]
            self.extend(ids)
        return self
