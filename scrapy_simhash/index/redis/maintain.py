"""Removing entries from a Redis index and reading it whole: forget, purge, reset, count, stats,
export, decisions.

A mixin of :class:`.index.RedisIndex`: removals are optimistic transactions like a check-and-add
(:meth:`Maintenance._remove`: an entry leaves its record, its holders, its band rows when no other
entry holds its fingerprints, its sentences and URL together), so crawlers may keep writing.

The readers of the whole namespace check what they read against what the index writes
(:mod:`..damage`): a record that does not decode, or decodes to values the index never writes, is
named and skipped (or refused); a counter that is not a number is refused, naming its key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

from .. import rule
from ..base import Decision, Entry, SimhashIndexError
from ..damage import Damaged, decision_damage, entry_damage, shown
from ..damage import report as report_damage
from ..meta import stats_dict
from ..runs import RUNS_KEPT, Run, newest_first, run_from_json
from .client import Arg, Link, Server, command
from .records import decode_record
from .store import CHAR_TIER, FULL, HOLDER, ID, ID_LIMIT, Keys, View, glob_escape, namespace_base, unpack_ids

#: Entries removed per transaction.
REMOVE_BATCH = 500


class Maintenance:
    """Forget, purge, reset, count, stats, ``entries()`` and decisions over the index's keys."""

    SCHEMA_VERSION: int
    location: str
    namespace: str
    prefix: str
    _base: str
    _k: Keys
    _server: Server
    _mark: bytes | None
    _transaction: Callable[..., Any]
    _reading: Callable[..., Any]
    _entries_by_id: Callable[[str, Sequence[int]], dict[int, Entry]]

    def _remove(self, doing: str, ids: Sequence[int], extra: Sequence[tuple[Arg, ...]] = ()) -> int:
        """Remove the entries with these ids (those that exist), ``REMOVE_BATCH`` a transaction;
        ``extra`` commands go with the first. How many went."""
        total = 0
        ids = list(dict.fromkeys(ids))
        for start in range(0, max(len(ids), 1), REMOVE_BATCH):
            chunk = ids[start : start + REMOVE_BATCH]
            more = list(extra) if start == 0 else []

            def step(view: View, chunk: list[int] = chunk, more: list[tuple[Arg, ...]] = more) -> tuple[int, Any]:
                entries = view.entries(chunk)
                for entry in entries:
                    unlink(view, entry)
                return len(entries), more

            total += self._transaction(doing, step)
        return total

    def forget(self, key: int | str) -> int:
        """Remove the entry with this id (int) or every entry with this URL (str), and the URL's
        decision; returns how many entries went."""
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise TypeError(f"forget() takes an entry id or a URL, not {key!r}")
        self._server.writable()
        if isinstance(key, int):
            return self._remove("forget", [key]) if 0 < key < ID_LIMIT else 0
        pair = self._k.url(key)
        raw = self._reading("forget", lambda view: view.get(pair))
        ids = [e.id for e in self._entries_by_id("forget", unpack_ids(raw or b"")).values() if e.url == key]
        gone = ("DEL", self._k.decision(key)), ("ZREM", self._k.decided, key)
        return self._remove("forget", ids, gone)

    def purge(self, older_than: float, *, batch: int = 5000) -> int:
        """Remove entries (and decisions) first seen before ``older_than`` (POSIX seconds): whole hourly
        time buckets, and the entries of the hour it falls in that are older."""
        self._server.writable()
        batch = max(1, int(batch))
        limit = math.floor(older_than / 3600) if math.isfinite(older_than) else (0 if older_than < 0 else 2**62)
        hours = self._hours(self._server.retrying(
            "purge", lambda c: c.zrangebyscore(self._k.hours.decode(), "-inf", limit), write=True), self._k, None)
        total = 0
        for hour in hours:
            key = self._k.hour(hour)
            raw = self._server.attempts("purge", partial(_get, key=key), write=True)
            ids = unpack_ids(raw or b"")
            for start in range(0, len(ids), batch):
                found = self._entries_by_id("purge", ids[start : start + batch])
                total += self._remove("purge", [i for i, e in found.items() if e.first_seen < older_than])
            if (hour + 1) * 3600 <= older_than:
                self._server.retrying("purge", command("delete", key.decode()), write=True)
                self._server.retrying("purge", command("zrem", self._k.hours.decode(), hour), write=True)
            else:  # the hour the limit falls in keeps the ids of its entries that are left
                self._transaction("purge", partial(self._sorted_out, key=key))
        decided = self._server.retrying("purge", command(
            "zrangebyscore", self._k.decided.decode(), "-inf",
            f"({older_than!r}" if math.isfinite(older_than) else older_than), write=True)
        for start in range(0, len(decided), batch):
            urls = decided[start : start + batch]
            gone = [self._k.decision(u).decode("utf-8", "surrogatepass") for u in urls]
            self._server.retrying("purge", command("delete", *gone), write=True)
            self._server.retrying("purge", command("zrem", self._k.decided.decode(), *urls), write=True)
        return total

    @staticmethod
    def _sorted_out(view: View, key: bytes) -> tuple[None, list[Any]]:
        """Rewrite a time bucket with the ids of its entries that exist."""
        ids = unpack_ids(view.get_string(key) or b"")
        present = {e.id for e in view.entries(ids)}
        view.set_string(key, b"".join(ID.pack(i) for i in ids if i in present))
        return None, []

    def reset(self) -> int:
        """Remove every entry, band row and decision of this namespace (others are untouched).

        ``SCAN`` + ``UNLINK`` in batches: run it while no crawler writes to this namespace."""
        pattern = glob_escape(self._base) + "*"

        def run(client: Any) -> int:
            n = self._counter(client.get(self._base + "n"), self._base + "n")
            mark, seq = client.mget(self._base + "meta", self._base + "seq")
            runs = client.hgetall(self._k.runs)  # the namespace's crawls, not its stories: kept
            unlink_scanned(client, pattern)
            # emptied on purpose: still ours (the same marker, an id counter that never goes back,
            # so no id is given twice), and crawlers that opened it go on
            pipe = client.pipeline(transaction=True)
            if mark is not None:
                pipe.set(self._base + "meta", mark)
            pipe.set(self._base + "seq", seq or 0)
            pipe.set(self._base + "n", 0)
            pipe.set(self._base + "nbands", 0)
            if runs:
                pipe.hset(self._k.runs, mapping=runs)
            pipe.execute()
            return n

        return int(self._server.retrying("reset", run, write=True))

    def record_run(self, run: Run) -> None:
        """Write ``run``'s record (replacing its start), and keep the :data:`~..runs.RUNS_KEPT` newest."""
        self._server.writable()
        key = self._k.runs

        def write(client: Any) -> None:
            pipe = client.pipeline(transaction=True)
            pipe.hset(key, run.id, run.to_json())
            pipe.hlen(key)
            if pipe.execute()[-1] > RUNS_KEPT:
                kept, _ = self._decoded_runs(client.hgetall(key))
                if kept[RUNS_KEPT:]:
                    client.hdel(key, *(r.id for r in kept[RUNS_KEPT:]))

        self._server.retrying("record run", write, write=True)

    def runs(self, limit: int = RUNS_KEPT, *, damaged: Damaged | None = None) -> list[Run]:
        """The ``limit`` most recent runs of this namespace, newest first; a damaged record is
        described to ``damaged`` and left out, or without it raises :class:`SimhashIndexError`."""
        try:
            raw = self._server.retrying("runs", lambda client: client.hgetall(self._k.runs), write=False)
        except UnicodeDecodeError as exc:
            report_damage(damaged, self.location, f"the run records of {self._k.runs.decode()!r} are not text: {exc}")
            return []
        found, problems = self._decoded_runs(raw)
        for problem in problems:
            report_damage(damaged, self.location, problem)
        return found[: max(0, limit)]

    @staticmethod
    def _decoded_runs(raw: dict[Any, Any]) -> tuple[list[Run], list[str]]:
        """The runs of a ``runs`` hash, newest first, and what is wrong with the fields that hold none."""
        found, problems = [], []
        for field, record in raw.items():
            try:
                run = run_from_json(record)
                if run.id != field:
                    raise ValueError(f"run record {shown(field)} holds run {run.id!r}")
                found.append(run)
            except ValueError as exc:
                problems.append(str(exc))
        return newest_first(found), problems

    def count(self) -> int:
        """Entries in this namespace."""
        return self._counter(self._server.retrying("count", lambda c: c.get(self._base + "n"), write=False),
                             self._base + "n")

    def _counter(self, raw: Any, key: str) -> int:
        """A counter's value (absent: 0); one that is not a whole number is refused, naming its key:
        the key space was written by something else, and no count read from it can be trusted."""
        try:
            value = int(raw or 0)
        except (TypeError, ValueError):
            value = -1
        if value < 0:
            raise SimhashIndexError(f"index {self.location}: the counter {key!r} holds {shown(raw)}, not a count of "
                                    "ours: the index is damaged (scrapy-simhash export still reads its entries)")
        return value

    def _hours(self, members: Sequence[Any], keys: Keys, damaged: Damaged | None) -> list[int]:
        """The hours of a namespace's time buckets (members of ``…:hours``); a member that is no hour
        names no bucket of ours: described to ``damaged`` and left out, or refused without it."""
        hours = []
        for member in members:
            try:
                hours.append(int(member))
            except (TypeError, ValueError):
                report_damage(damaged, self.location, f"time bucket {shown(member)} of {keys.hours.decode()!r} "
                                                      "is not an hour")
        return hours

    def stats(self) -> dict[str, Any]:
        """Location, server, parameters, layouts, and per namespace: entries, oldest/newest first
        seen, decisions. ``band_rows`` counts band rows over all namespaces."""

        def run(client: Any) -> tuple[set[str], list[str], list[Any], dict[str, Any]]:
            registered = set(client.hkeys(f"{self.prefix}:namespaces"))
            names = sorted(registered | {self.namespace})
            pipe = client.pipeline(transaction=False)
            for name in names:
                base = namespace_base(self.prefix, name)
                pipe.get(base + "n")
                pipe.zcard(base + "decided")
                pipe.get(base + "nbands")
            return registered, names, pipe.execute(), client.info("server") | client.info("memory")

        registered, names, replies, info = self._server.retrying("stats", run, write=False)
        per: dict[str, dict[str, Any]] = {}
        band_rows = 0
        for i, name in enumerate(names):
            n, decisions, rows = replies[3 * i : 3 * i + 3]
            base = namespace_base(self.prefix, name)
            n = self._counter(n, base + "n")
            band_rows += self._counter(rows, base + "nbands")
            if name in registered or n or decisions:
                problems: list[str] = []
                times = [e.first_seen for e in self._bucket_entries(name, True, problems.append)]
                last = [e.first_seen for e in self._bucket_entries(name, False, problems.append)]
                per[name] = {"entries": n, "oldest": min(times, default=None),
                             "newest": max(last, default=None), "decisions": int(decisions)}
                if problems:  # those met in the buckets read (the oldest and newest)
                    per[name].update(damaged=len(set(problems)), first_damaged=problems[0])
        about = {"redis_version": info.get("redis_version"), "used_memory": info.get("used_memory"),
                 "layout_generation": self._k.gen}
        return stats_dict(self, "redis", per, band_rows, {"prefix": self.prefix}, about)

    def _bucket_entries(self, name: str, first: bool, damaged: Damaged) -> list[Entry]:
        """The entries of the oldest (``first``) or newest time bucket of namespace ``name`` that has any."""
        keys = Keys(self.prefix, name, self._k.fp_bytes * 8, self._k.tiers, self._k.gen)
        members = self._server.retrying("stats", lambda c: c.zrange(keys.hours.decode(), 0, -1), write=False)
        hours = self._hours(members, keys, damaged)
        for hour in (hours if first else reversed(hours)):
            entries = self._hour_entries(keys, hour, damaged)
            if entries:
                return entries
        return []

    def _hour_entries(self, keys: Keys, hour: int, damaged: Damaged | None) -> list[Entry]:
        """One hourly time bucket's entries that exist, oldest first (ties: by id); damaged ones are
        described to ``damaged`` (or refused without it)."""

        def read(view: View) -> tuple[list[Entry], list[str]]:
            (raw,) = view.link.send([("GET", keys.hour(hour))])
            try:
                ids = unpack_ids(raw or b"")
            except ValueError as exc:
                return [], [f"time bucket {keys.hour(hour).decode()!r}: {exc}"]
            return self._records(view.link, keys, ids)

        entries, problems = self._reading("export", read)
        for problem in problems:
            report_damage(damaged, self.location, problem)
        return sorted(entries, key=lambda e: (e.first_seen, e.id))

    def _records(self, link: Link, keys: Keys, ids: Sequence[int]) -> tuple[list[Entry], list[str]]:
        """The entries with these ids that exist, and the descriptions of the records among them
        that do not decode to an entry of ours (left out)."""
        entries: list[Entry] = []
        problems: list[str] = []
        bits = keys.fp_bytes * 8
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            (raws,) = link.send([("MGET", *(keys.entry(i) for i in chunk))])
            if isinstance(raws, Exception):
                raise SimhashIndexError(f"reading entries failed: {raws}")
            for entry_id, raw in zip(chunk, raws, strict=True):
                if raw is None:
                    continue
                try:
                    entry = decode_record(entry_id, keys.namespace, raw, keys.fp_bytes)
                except ValueError as exc:
                    problems.append(str(exc))
                    continue
                problem = entry_damage(entry, bits)
                if problem is None:
                    entries.append(entry)
                else:
                    problems.append(problem)
        return entries, problems

    def entries(self, latest: int | None = None, *, damaged: Damaged | None = None) -> Iterator[Entry]:
        """Every entry of this namespace (or the ``latest`` most recent), oldest first (ties: by id).
        A damaged record is described to ``damaged`` and skipped; without it, it raises
        :class:`SimhashIndexError`."""
        if latest is not None and latest <= 0:
            return
        members = self._server.retrying("export", lambda c: c.zrange(self._k.hours.decode(), 0, -1), write=False)
        hours = self._hours(members, self._k, damaged)
        if latest is None:
            for hour in hours:
                yield from self._hour_entries(self._k, hour, damaged)
            return
        newest: list[Entry] = []
        for hour in reversed(hours):
            if len(newest) >= latest:
                break
            newest[:0] = self._hour_entries(self._k, hour, damaged)
        yield from newest[-latest:]

    def explain(self, url: str) -> Decision | None:
        """The latest decision recorded for ``url`` in this namespace (None if it was new or unseen);
        a damaged one raises :class:`SimhashIndexError`."""
        found = self._decisions([url], None)
        return found[0] if found else None

    def decisions(self, limit: int = 1000, *, damaged: Damaged | None = None) -> list[Decision]:
        """The ``limit`` most recent decisions of this namespace, newest first; a damaged one (or one
        whose original entry is) is described to ``damaged`` and left out, or without it raises."""
        if limit <= 0:
            return []
        urls = self._server.retrying(
            "decisions", lambda c: c.zrevrange(self._k.decided.decode(), 0, limit - 1), write=False)
        return self._decisions(urls, damaged)

    def _decisions(self, urls: list[str], damaged: Damaged | None) -> list[Decision]:
        def fetch(client: Any) -> list[dict[str, str]]:
            pipe = client.pipeline(transaction=False)
            for url in urls:
                pipe.hgetall(self._k.decision(url).decode("utf-8", "surrogatepass"))
            return pipe.execute()

        decided = self._server.retrying("explain", fetch, write=False) if urls else []
        wanted = sorted({int(d["original"]) for d in decided if d and str(d.get("original", "")).isdigit()})
        found, broken = self._reading("explain", lambda view: self._records(view.link, self._k, wanted))
        originals = {e.id: e for e in found}
        out: list[Decision] = []
        for url, d in zip(urls, decided, strict=True):
            if not d:
                continue
            try:
                original_id = int(d["original"])
                decision = Decision(url=url, status=d["status"], tier=CHAR_TIER[d["tier"]], distance=int(d["distance"]),
                                    original=originals.get(original_id), decided_at=float(d["decided_at"]),
                                    title=d.get("title"), score=float(d["score"]) if "score" in d else None)
                problem = decision_damage(decision, self._k.fp_bytes * 8)
                if problem is None and decision.original is None:
                    problem = next((f"decision about {url!r}: its original {p}" for p in broken
                                    if p.startswith(f"entry #{original_id}:")), None)
            except (KeyError, ValueError, TypeError) as exc:
                problem = f"decision about {url!r}: unreadable ({type(exc).__name__}: {exc})"
            if problem is None:
                out.append(decision)
            else:
                report_damage(damaged, self.location, problem)
        return out


def _get(link: Link, key: bytes) -> Any:
    return link.send([("GET", key)])[0]


def unlink(view: View, entry: Entry) -> None:
    """Queue the removal of ``entry`` on ``view``: its record, holders, band rows of fingerprints no
    other entry holds, sentences, URL and pending mark."""
    k = view.k
    view.commands.append(("DEL", k.entry(entry.id)))
    view.records[entry.id] = None
    for tier, fp in (("title", entry.title_fp), ("body", entry.body_fp)):
        if fp is None:
            continue
        pair = k.holders(tier, fp)  # type: ignore[arg-type]
        raw = view.get(pair) or b""
        held = [h for h in HOLDER.iter_unpack(raw) if h[1] != entry.id]
        view.set(pair, b"".join(HOLDER.pack(*h) for h in held))
        if not held and raw:
            view.unfile(tier, [fp])  # type: ignore[arg-type]
    for h in entry.sentences:
        pair = k.sentence(h)
        held_by = view.get(pair)
        if held_by == FULL:
            ids = [i for i in unpack_ids(view.get_string(k.full(h)) or b"") if i != entry.id]
            packed = b"".join(ID.pack(i) for i in ids)
            if len(ids) < rule.SENTENCE_MAX_HOLDERS:
                view.set(pair, packed)
                view.set_string(k.full(h), None)
            else:
                view.set_string(k.full(h), packed)
        elif held_by is not None:
            view.set(pair, b"".join(ID.pack(i) for i in unpack_ids(held_by) if i != entry.id))
    if entry.url is not None:
        pair = k.url(entry.url)
        view.set(pair, b"".join(ID.pack(i) for i in unpack_ids(view.get(pair) or b"") if i != entry.id))
    view.commands.append(("HDEL", k.pending, entry.id))
    view.counts["n"] -= 1


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
