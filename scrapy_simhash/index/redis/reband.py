"""Re-banding a Redis index: the band tables of another layout, built from the full fingerprints every entry keeps.

The layout (the bands of each tier, so the thresholds it answers) is the index's, shared by its namespaces.
:func:`reband` builds the tables of the new layout under new names (its *generation*, one more than the
present one: ``tb0g1``, …, :func:`.redis_keys.band_table`) while the present ones stay whole, then switches
the index's record to the new layout (compare-and-set) and deletes the old tables. Killed before the switch,
the index is as it was (what was built is deleted by the next re-banding, first thing); killed after it, the
new layout is complete (the old tables are deleted by the next re-banding).

While it runs it holds ``<prefix>:reband`` (its token, on a lease it renews; opens are refused meanwhile),
and every namespace's marker holds the token: a crawler that opened the index before fails at its next
call, instead of adding entries the new tables would miss, and reopens it once the re-banding is done. One
that dies lets go when its lease runs out. Like ``reset``: run it while crawlers are stopped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..base import IndexWriteError
from ..meta import check_params, layouts, pigeonhole_records
from .client import SWAP
from .index import _LIMITS, RedisIndex
from .keys import BAND_TABLE, Keys, glob_escape, reband_lock
from .maintain import unlink_scanned
from .record import SCHEMA_VERSION

#: Seconds the lock outlives a re-banding that stopped renewing it (died).
LEASE = 30
#: Entry ids one script call files: ~10 ms of the server's time (~200 µs an entry at 1M entries, measured), which
#: other clients of the server wait for.
BATCH = 50
#: Renew the lock if it is still ours (``EVAL RENEW 1 lock token seconds``); 1 when it was.
RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end return 0"
#: Let go of the lock if it is still ours.
RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def reband(
    index: RedisIndex, *, title_bands: int | None = None, body_bands: int | None = None, at_least: bool = False,
    progress: Callable[[int, int], None] | None = None, lease: float = LEASE,
) -> dict[str, Any]:
    """Give the Redis index ``index`` was opened on (writable) the layout of ``title_bands``/``body_bands``
    bands (None: the recorded number; ``at_least``: never fewer than recorded), the entries of every
    namespace kept; ``index`` is stale afterwards (close it). Returns ``{"entries", "band_rows",
    "params", "previous", "seconds"}``; ``progress(done, total)`` is called as entry ids are read
    (total: the ids to read)."""
    started = time.monotonic()
    previous = index.params
    title = previous.title_bands if title_bands is None else title_bands
    body = previous.body_bands if body_bands is None else body_bands
    if at_least:
        title, body = max(title, previous.title_bands), max(body, previous.body_bands)
    params = replace(previous, title_bands=title, body_bands=body)
    check_params(params)
    entries, members = _Reband(index, lease).run(params, progress)
    return {"entries": entries, "band_rows": members, "params": params.as_dict(), "previous": previous.as_dict(),
            "seconds": time.monotonic() - started}


class _Reband:
    def __init__(self, index: RedisIndex, lease: float) -> None:
        self.index, self.server, self.lease = index, index._server, max(1, round(lease))
        self.lock, self.token = reband_lock(index.prefix), os.urandom(8).hex()

    def _call(self, fn: Callable[[Any], Any], *, retry: bool = True) -> Any:
        return self.server.retrying("reband", fn, write=True, retry=retry)

    def _renew(self, client: Any) -> None:
        if not client.eval(RENEW, 1, self.lock, self.token, self.lease):
            raise IndexWriteError(f"index {self.index.location}: the re-banding lost its lock (stalled for "
                                  f"{self.lease} s?); the index is as it was: run it again")

    def run(self, params: Any, progress: Callable[[int, int], None] | None) -> tuple[int, int]:
        index = self.index
        if not self._call(lambda c: c.set(self.lock, self.token, nx=True, ex=self.lease), retry=False):
            raise IndexWriteError(f"index {index.location} is being re-banded by another process")
        try:
            return self._run(params, progress)
        finally:
            self._call(lambda c: c.eval(RELEASE, 1, self.lock, self.token))

    def _run(self, params: Any, progress: Callable[[int, int], None] | None) -> tuple[int, int]:
        index, prefix = self.index, self.index.prefix
        old = index._k
        new = Keys(index.location, index.namespace, params.bits, layouts(params), old.gen + 1)
        names = sorted(set(self._call(lambda c: c.hkeys(f"{prefix}:namespaces"))) | {index.namespace})
        bases = [index._namespace_base(name) for name in names]
        frozen = f"{SCHEMA_VERSION}:reband:{self.token}"

        def freeze(client: Any) -> list[int]:
            # crawlers that opened the index fail from now on; what a re-banding killed midway built goes
            for base in bases:
                client.set(base + "meta", frozen)
                drop_bands(client, base, old.tables(), lambda: self._renew(client))
            return [int(client.get(base + "seq") or 0) for base in bases]

        last_ids = self._call(freeze)
        total, done, entries, members = sum(last_ids), 0, 0, [0] * len(bases)
        limits = {**_LIMITS, **new.limits()}
        for i, (base, last) in enumerate(zip(bases, last_ids, strict=True)):
            common = json.dumps({"base": base, "limits": limits, "mark": frozen}, ensure_ascii=False, sort_keys=True)
            for lo in range(1, last + 1, BATCH):
                hi = min(last, lo + BATCH - 1)
                call = json.dumps({"op": "reband", "from": lo, "to": hi})
                read, added = self.server.script("reband", [(call, common)], route=base + "seq")[0]
                self._call(self._renew)
                entries, members[i], done = entries + int(read), members[i] + int(added), done + hi - lo + 1
                if progress is not None:
                    progress(done, total)
        tiers = pigeonhole_records(params)
        record = {**index._meta, "schema_version": SCHEMA_VERSION, "params": params.as_dict(),
                  "title_layout": tiers["title"], "body_layout": tiers["body"], "band_gen": new.gen}
        mark = f"{SCHEMA_VERSION}:{os.urandom(6).hex()}"

        def switch(client: Any) -> None:
            if not client.eval(SWAP, 1, f"{prefix}:meta", index._record, json.dumps(record, sort_keys=True)):
                raise IndexWriteError(f"index {index.location}: its record changed during the re-banding; the "
                                      "index is as it was: run it again")
            for base, count in zip(bases, members, strict=True):
                client.set(base + "nbands", count)
                client.set(base + "meta", mark)

        self._call(switch, retry=False)
        self._call(lambda c: [drop_bands(c, base, new.tables()) for base in bases])  # the new layout serves
        return entries, sum(members)


def drop_bands(client: Any, base: str, keep: set[str], tick: Callable[[], None] | None = None) -> int:
    """Delete namespace ``base``'s band tables but ``keep`` (those of another generation of the
    layout): their buckets, crowded keys' sorted sets and split nodes, and their ``lh`` states;
    ``tick()`` after each thousand keys scanned."""
    def other(key: str) -> bool:
        table = key[len(base):].removeprefix("Z").split(":", 1)[0]
        return BAND_TABLE.fullmatch(table) is not None and table not in keep

    gone = sum(unlink_scanned(client, glob_escape(base) + pattern, other, tick)
               for pattern in ("[tb]b[0-9]*", "Z[tb]b[0-9]*"))
    states = [field for field in client.hkeys(base + "lh") if BAND_TABLE.fullmatch(field) and field not in keep]
    if states:
        client.hdel(base + "lh", *states)
    return gone
