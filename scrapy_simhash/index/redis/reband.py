"""Re-banding a Redis index: the band buckets of another layout, built from the fingerprints the holders keep.

The layout (the bands of each tier, so the thresholds it answers) is the index's, shared by its
namespaces. :func:`reband` files every stored fingerprint in the buckets of the new layout under new
key names (its *generation*, one more than the present one) while the present ones stay whole, then
switches the index's record to the new layout (compare-and-set) and deletes the old buckets. Killed
before the switch, the index is as it was (what was built is deleted by the next re-banding, first
thing); killed after it, the new layout is complete.

While it runs it holds ``<prefix>:reband`` (its token, on a lease it renews; opens are refused
meanwhile), and every namespace's marker holds the token: a crawler that opened the index before
fails at its next call instead of adding entries the new buckets would miss, and reopens it once the
re-banding is done. Like ``reset``: run it while crawlers are stopped.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from ..bands import REDIS, bands_for, records
from ..base import IndexWriteError
from ..meta import check_params
from .client import SWAP, Link, command
from .index import SCHEMA_VERSION, RedisIndex, reband_lock
from .maintain import unlink_scanned
from .store import Keys, View, glob_escape, namespace_base

#: Seconds the lock outlives a re-banding that stopped renewing it (died).
LEASE = 30
#: Fingerprints filed per write (``docs/decisions/0102-redis-transactions.md``).
BATCH = 200
#: Renew the lock if it is still ours (``EVAL RENEW 1 lock token seconds``); 1 when it was.
RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end return 0"
#: Let go of the lock if it is still ours.
RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_BAND_KEY = re.compile(r"b(\d+)[tb]\d+:")


def reband(
    index: RedisIndex, *, title_bands: int | None = None, body_bands: int | None = None, at_least: bool = False,
    progress: Callable[[int, int], None] | None = None, lease: float = LEASE,
) -> dict[str, Any]:
    """Give the Redis index ``index`` was opened on (writable) the layout of ``title_bands``/``body_bands``
    bands (None: the recorded number; ``at_least``: never fewer than recorded), the entries of every
    namespace kept; ``index`` is stale afterwards (close it). Returns ``{"entries", "band_rows",
    "params", "previous", "seconds"}``; ``progress(done, total)`` is called as holder keys are read."""
    started = time.monotonic()
    previous = index.params
    title = previous.title_bands if title_bands is None else title_bands
    body = previous.body_bands if body_bands is None else body_bands
    if at_least:
        title, body = max(title, previous.title_bands), max(body, previous.body_bands)
    params = replace(previous, title_bands=title, body_bands=body)
    check_params(params)
    server = index._server
    server.writable()
    lock, token, lease = reband_lock(index.prefix), os.urandom(8).hex(), max(1, round(lease))

    def call(fn: Callable[[Any], Any], retry: bool = True) -> Any:
        return server.retrying("reband", fn, write=True, retry=retry)

    def renew(client: Any) -> None:
        if not client.eval(RENEW, 1, lock, token, lease):
            raise IndexWriteError(f"index {index.location}: the re-banding lost its lock (stalled for "
                                  f"{lease} s?); the index is as it was: run it again")

    if not call(lambda c: c.set(lock, token, nx=True, ex=lease), retry=False):
        raise IndexWriteError(f"index {index.location} is being re-banded by another process")
    try:
        gen = index._k.gen
        names = sorted(set(call(lambda c: c.hkeys(f"{index.prefix}:namespaces"))) | {index.namespace})
        frozen = f"{SCHEMA_VERSION}:reband:{token}"
        counts = [0] * len(names)
        entries = 0
        for i, name in enumerate(names):
            base = namespace_base(index.prefix, name)
            call(command("set", base + "meta", frozen))
            call(partial(drop_bands, base=base, keep=gen, renew=renew))  # what a killed run built
            entries += int(call(command("get", base + "n")) or 0)
            new = Keys(index.prefix, name, params.bits, bands_for(params, REDIS), gen + 1)
            counts[i] = server.attempts("reband", partial(
                _file_all, keys=new, base=base, progress=progress, tick=partial(call, renew)), write=True)
        tiers = records(params, REDIS)
        record = {**index._meta, "schema_version": SCHEMA_VERSION, "params": params.as_dict(),
                  "title_layout": tiers["title"], "body_layout": tiers["body"], "band_gen": gen + 1}

        def switch(client: Any) -> None:
            if not client.eval(SWAP, 1, f"{index.prefix}:meta", index._record, json.dumps(record, sort_keys=True)):
                raise IndexWriteError(f"index {index.location}: its record changed during the re-banding; the "
                                      "index is as it was: run it again")
            for name, count in zip(names, counts, strict=True):
                base = namespace_base(index.prefix, name)
                client.set(base + "nbands", count)
                client.set(base + "meta", f"{SCHEMA_VERSION}:{os.urandom(8).hex()}")

        call(switch, retry=False)
        for name in names:  # the new layout serves
            call(partial(drop_bands, base=namespace_base(index.prefix, name), keep=gen + 1))
    finally:
        call(lambda c: c.eval(RELEASE, 1, lock, token))
    return {"entries": entries, "band_rows": sum(counts), "params": params.as_dict(),
            "previous": previous.as_dict(), "seconds": time.monotonic() - started}


def _file_all(link: Link, keys: Keys, base: str, progress: Callable[[int, int], None] | None,
              tick: Callable[[], None]) -> int:
    """File every fingerprint the namespace's holders keep in the buckets of ``keys``; band rows made."""
    client = link.server.live()
    holder_keys = list(client.scan_iter(match=glob_escape(base) + "h[tb]:*", count=1000))
    low = 8 * keys.fp_bytes - 16
    rows = 0
    pending: dict[str, list[int]] = {"title": [], "body": []}

    def flush() -> None:
        nonlocal rows
        for tier, fps in pending.items():
            if fps:
                view = View(keys, link, watch=False)
                view.file(tier, fps)  # type: ignore[arg-type]
                view.commit()
                rows += view.counts["nbands"]
                fps.clear()
        tick()

    for done, key in enumerate(holder_keys, 1):
        tier = "title" if key[len(base) + 1] == "t" else "body"
        high = int(key.rsplit(":", 1)[1], 16)
        (flat,) = link.send([("HKEYS", key)])
        pending[tier] += [(high << low) | int.from_bytes(field, "big") for field in flat]
        if len(pending["title"]) + len(pending["body"]) >= BATCH or done == len(holder_keys):
            flush()
            if progress is not None:
                progress(done, len(holder_keys))
    flush()
    return rows


def drop_bands(client: Any, base: str, keep: int, renew: Callable[[Any], None] | None = None) -> int:
    """Delete namespace ``base``'s band buckets (and their sub-buckets) of every layout generation
    but ``keep``; ``renew(client)`` after each thousand keys scanned."""
    def other(key: str) -> bool:
        found = _BAND_KEY.match(key[len(base):])
        return found is not None and int(found.group(1)) != keep

    tick = None if renew is None else partial(renew, client)
    return unlink_scanned(client, glob_escape(base) + "b[0-9]*", other, tick)
