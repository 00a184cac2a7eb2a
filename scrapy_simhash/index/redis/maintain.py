"""The maintenance operations of a Redis index: forget, purge, reset, count, stats, export.

A mixin of :class:`.redis.RedisIndex` (which connects, verifies the index and runs the rule's
script): the same server, script calls and removal (``_remove``). Kept apart so that the module
with the hot path stays short.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import quote

from ..base import Entry
from ..meta import stats_dict
from .client import Server
from .keys import ID_LIMIT, Keys, as_score, glob_escape


class Maintenance:
    """Forget, purge, reset, count, stats and ``entries()`` over the index's keys."""

    SCHEMA_VERSION: int
    location: str
    namespace: str
    prefix: str
    _base: str
    _k: Keys
    _server: Server
    _script: Callable[..., Any]
    _args: Callable[..., tuple[str, str]]
    _remove: Callable[..., tuple[int, bool]]
    _records: Callable[[str, Sequence[int]], dict[int, Entry]]

    def forget(self, key: int | str) -> int:
        """Remove the entry with this id (int) or every entry with this URL (str), and the URL's
        decision; returns how many entries went."""
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise TypeError(f"forget() takes an entry id or a URL, not {key!r}")
        if isinstance(key, int):
            if not 0 < key < ID_LIMIT:
                self._server.writable()
                return 0
            return self._remove("forget", "id", key)[0]
        return self._remove("forget", "url", key)[0]

    def purge(self, older_than: float, *, batch: int = 5000) -> int:
        """Remove entries (and decisions) first seen before ``older_than`` (POSIX seconds), ``batch``
        entries per script call so crawlers sharing the server are never blocked long."""
        total = 0
        while True:
            n, more = self._remove("purge", "older", as_score(older_than), max(1, int(batch)))
            total += n
            if not more:
                return total

    def drop_other_libraries(self) -> int:
        """Delete the script libraries other versions left on the server (``purge`` does, from the
        command line): see :meth:`.redis_client.Server.drop_other_libraries`."""
        return self._server.drop_other_libraries()

    def reset(self) -> int:
        """Remove every entry, band member and decision of this namespace (others are untouched).

        ``SCAN`` + ``UNLINK`` in batches: run it while no crawler writes to this namespace."""
        pattern = glob_escape(self._base) + "*"

        def run(client: Any) -> int:
            n = int(client.get(self._base + "n") or 0)
            mark = client.get(self._base + "meta")
            unlink_scanned(client, pattern)
            # emptied on purpose: still ours, and crawlers that opened it go on
            client.set(self._base + "meta", mark or self.SCHEMA_VERSION)
            return n

        return int(self._server.retrying("reset", run, write=True))

    def count(self) -> int:
        """Entries in this namespace."""
        return int(self._server.retrying("count", lambda c: c.get(self._base + "n") or 0, write=False))

    def stats(self) -> dict[str, Any]:
        """Location, server, parameters, layouts, and per namespace: entries, oldest/newest first
        seen, decisions. The keys ``entries``/``oldest``/``newest``/``decisions`` at the top level
        are this namespace's; ``band_rows`` counts band members over all namespaces."""

        def run(client: Any) -> tuple[set[str], list[str], list[Any], dict[str, Any]]:
            registered = set(client.hkeys(f"{self.prefix}:namespaces"))
            names = sorted(registered | {self.namespace})
            pipe = client.pipeline(transaction=False)
            for name in names:
                base = self._namespace_base(name)
                pipe.get(base + "n")
                pipe.zcard(base + "decided")
                pipe.get(base + "nbands")
            return registered, names, pipe.execute(), client.info("server") | client.info("memory")

        registered, names, replies, info = self._server.retrying("stats", run, write=False)
        per: dict[str, dict[str, Any]] = {}
        band_rows = 0
        for i, name in enumerate(names):
            n, decisions, bands = replies[3 * i : 3 * i + 3]
            band_rows += int(bands or 0)
            if name in registered or int(n or 0) or decisions:
                base = self._namespace_base(name)
                span = self._server.script("stats", [('{"op": "span"}', json.dumps({"base": base}))], write=False,
                                           route=base + "seq")[0]
                oldest, newest = (struct.unpack(">d", t)[0] for t in span) if span else (None, None)
                per[name] = {"entries": int(n or 0), "oldest": oldest, "newest": newest, "decisions": int(decisions)}
        about = {"redis_version": info.get("redis_version"), "used_memory": info.get("used_memory"),
                 "layout_generation": self._k.gen}  # re-bandings so far (redis_reband)
        return stats_dict(self, "redis", per, band_rows, {"prefix": self.prefix}, about)

    def _namespace_base(self, name: str) -> str:
        return f"{self.prefix}:{{{quote(name, safe='')}}}:"

    def entries(self, latest: int | None = None) -> Iterator[Entry]:
        """Every entry of this namespace (or the ``latest`` most recent), oldest first (ties: by
        id): the hourly time buckets in order (for ``latest``, the newest ones that hold them),
        each sorted, read in pages of 1000."""
        if latest is not None and latest <= 0:
            return
        hours = self._server.retrying("export", lambda c: c.zrange(self._base + "hours", 0, -1), write=False)
        buckets: Iterable[list[tuple[float, int]]] = map(self._bucket, hours)
        if latest is not None:
            newest: list[tuple[float, int]] = []
            for hour in reversed(hours):
                if len(newest) >= latest:
                    break
                newest[:0] = self._bucket(hour)
            buckets = [newest[-latest:]]
        for rows in buckets:
            for start in range(0, len(rows), 1000):
                ids = [i for _, i in rows[start : start + 1000]]
                found = self._records("export", ids)
                yield from (found[i] for i in ids if i in found)

    def _bucket(self, hour: Any) -> list[tuple[float, int]]:
        """``(first seen, id)`` of one hourly time bucket's entries, sorted."""
        packed = self._script("export", self._args("bucket", hour=hour), write=False)
        return sorted((struct.unpack_from(">d", packed, i + 4)[0], int.from_bytes(packed[i : i + 4], "big"))
                      for i in range(0, len(packed), 12))


def unlink_scanned(client: Any, pattern: str, wanted: Callable[[str], bool] | None = None,
                   tick: Callable[[], None] | None = None) -> int:
    """``UNLINK`` the keys ``SCAN`` finds matching ``pattern`` (those ``wanted(key)``, when given), a
    thousand at a time; ``tick()`` after each thousand scanned. Returns how many went."""
    gone, batch = 0, []
    for n, key in enumerate(client.scan_iter(match=pattern, count=1000), 1):
        if wanted is None or wanted(key):
            batch.append(key)
            if len(batch) >= 1000:
                gone, batch = gone + client.unlink(*batch), []
        if tick is not None and n % 1000 == 0:
            tick()
    return gone + (client.unlink(*batch) if batch else 0)

