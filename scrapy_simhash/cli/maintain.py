"""``stats``, ``export``, ``purge``, ``reset``, ``reband`` and ``forget``: what the index holds, and keeping it."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from .._compiled import describe
from .common import (
    PROG,
    CliError,
    Damage,
    closing_output,
    entry_dict,
    iso,
    open_index_for,
    open_output,
    print_json,
    shown,
    silence_stdout,
)

if TYPE_CHECKING:
    from ..index import BandIndex

def index_stats(index: BandIndex) -> dict[str, Any]:
    """``index.stats()``, completed with what every index can say (location, count, parameters)."""
    data = dict(index.stats())
    data.setdefault("location", index.location)
    data.setdefault("namespace", index.namespace)
    data.setdefault("params", index.params.as_dict())
    data.setdefault("entries", index.count())
    return data


_TIME_KEYS = ("oldest", "newest", "created", "decided_at", "first_seen")


def run_stats(args: argparse.Namespace) -> int:
    index = open_index_for(args, readonly=True)
    try:
        data = index_stats(index)
    finally:
        index.close()
    if args.json:
        print_json(data)
        _warn_damaged(data, args.index)
        return 0
    p = data.get("params") or {}
    size = data.get("file_size")
    print(f"index      {data['location']}" + (f"  ({_human_bytes(size)}, {size:,} bytes)" if size else ""))
    if data.get("backend") or data.get("format"):
        print(f"format     {data.get('backend', '?')} {data.get('format') or ''} schema "
              f"{data.get('schema_version', '?')}, created {_iso_any(data.get('created'))}"
              + (f" by {data['created_by']}" if data.get("created_by") else ""))
    if p:
        print(f"parameters {p.get('bits')}-bit fingerprints; title: {p.get('title_bands')} bands → answers "
              f"distances up to {int(p.get('title_bands', 1)) - 1}; body: {p.get('body_bands')} bands → up to "
              f"{int(p.get('body_bands', 1)) - 1}; tokenizer {p.get('tokenizer')}, features v"
              f"{p.get('features_version')}")
    namespaces = data.get("namespaces") or {data["namespace"]: {k: data.get(k) for k in
                                                                ("entries", "oldest", "newest", "decisions")}}
    _warn_damaged(data, args.index)
    print("namespaces:")
    for name, ns in namespaces.items():
        mark = "*" if name == data["namespace"] else " "
        print(f" {mark} {name!r:<16} {ns.get('entries') or 0:>10,} entries  {ns.get('decisions') or 0:>9,} "
              f"decisions  oldest {_iso_any(ns.get('oldest'))}  newest {_iso_any(ns.get('newest'))}")
    shown = {"location", "file_size", "backend", "format", "schema_version", "created", "created_by", "params",
             "namespaces", "namespace", "entries", "oldest", "newest", "decisions"}
    for key, value in data.items():
        if key not in shown:
            print(f"{key:<10} {_iso_any(value) if key in _TIME_KEYS else value}")
    print(f"engine     {describe()} (this installation)")
    return 0


def _warn_damaged(data: dict[str, Any], location: str) -> None:
    """One line on stderr per namespace whose first-seen times include some the index never writes
    (left out of its oldest/newest)."""
    for name, ns in (data.get("namespaces") or {}).items():
        if ns.get("damaged"):
            print(f"{PROG} stats: namespace {name!r} of index {shown(location)} has {ns['damaged']:,} damaged "
                  f"row{'' if ns['damaged'] == 1 else 's'} (values scrapy-simhash never writes; left out of "
                  f"oldest/newest); the first: {ns.get('first_damaged')}", file=sys.stderr)


def _iso_any(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return iso(float(value)) or "-"
        except (OverflowError, OSError, ValueError):
            return repr(value)
    return "-" if value is None else str(value)


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def run_export(args: argparse.Namespace) -> int:
    """Every entry as a JSON line. Damaged entries are skipped, counted and the first named on
    stderr, and the status is then 2, a damaged index's (as when one is met halfway through any
    command): the export is not the whole index."""
    index = open_index_for(args, readonly=True)
    n = 0
    damage = Damage()
    try:
        with closing_output(open_output(args.output)) as out:
            for entry in index.entries(damaged=damage):
                out.write(json.dumps(entry_dict(entry), ensure_ascii=False) + "\n")
                n += 1
    except BrokenPipeError:
        silence_stdout()
        return 1
    finally:
        index.close()
    print(f"exported {n:,} entries of namespace {args.namespace!r}", file=sys.stderr)
    damage.warn("export", args.index)
    return 2 if damage.count else 0


def run_purge(args: argparse.Namespace) -> int:
    index = open_index_for(args)
    try:
        cutoff = time.time() - args.older_than * 86400
        gone = index.purge(cutoff)
        left = index.count()
    finally:
        index.close()
    print(f"purged {gone:,} entries first seen before {iso(cutoff)} ({args.older_than:g} days ago); "
          f"{left:,} left in namespace {args.namespace!r}")
    return 0


def run_reset(args: argparse.Namespace) -> int:
    index = open_index_for(args)
    try:
        count = index.count()
        if not args.yes:
            if not sys.stdin.isatty():
                raise CliError("refusing to reset without --yes when stdin is not a terminal")
            answer = input(f"Remove all {count:,} entries and decisions of namespace {args.namespace!r} in "
                           f"{index.location}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing removed")
                return 1
        gone = index.reset()
    finally:
        index.close()
    print(f"reset namespace {args.namespace!r}: {gone:,} entries removed")
    return 0


def run_forget(args: argparse.Namespace) -> int:
    key: int | str = int(args.key) if args.key.isdigit() else args.key
    index = open_index_for(args)
    try:
        # A URL that was dropped has no entry, only a decision (what explain shows): forget removes both.
        decided = isinstance(key, str) and index.explain(key) is not None
        gone = index.forget(key)
    finally:
        index.close()
    what = f"entry #{key}" if isinstance(key, int) else key
    if not gone and not decided:
        missing = what if isinstance(key, int) else f"entry or decision for URL {key}"
        print(f"no {missing} in namespace {args.namespace!r}", file=sys.stderr)
        return 1
    removed = [f"{gone} entr{'y' if gone == 1 else 'ies'}"] if gone else []
    print(f"forgot {what} ({', '.join([*removed, 'its decision'] if decided else removed)} removed)")
    return 0



def run_reband(args: argparse.Namespace) -> int:
    """Rebuild an index's band rows for other thresholds: a SQLite file's in one transaction
    (:func:`~scrapy_simhash.index.sqlite.reband.reband`), a Redis index's as a new generation of its
    band tables (:func:`~scrapy_simhash.index.redis.reband.reband`)."""
    from ..index import SimhashIndexError, sqlite_path

    location = args.path or args.index
    if not location:
        raise CliError("name the index: reband PATH (or --index PATH)")
    if args.dynamic_threshold and args.body_max_distance is None:
        raise CliError("--dynamic-threshold adds 2 bits to --body-max-distance: give both")
    title_bands, body_bands = args.title_bands, args.body_bands
    if args.title_max_distance is not None:
        title_bands = args.title_max_distance + 1
    if args.body_max_distance is not None:
        from ..engine import SHORT_BODY_BONUS

        body_bands = args.body_max_distance + 1 + (SHORT_BODY_BONUS if args.dynamic_threshold else 0)
    path = sqlite_path(location)
    unit = "band rows" if path is not None else "entry ids"
    location = shown(location)  # the index is opened by args.path or args.index
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        bar = "#" * int(30 * fraction)
        sys.stderr.write(f"\r[{bar:.<30}] {fraction:4.0%}  {done:,}/{total:,} {unit}  "
                         f"{time.monotonic() - started:.0f} s\x1b[K")
        sys.stderr.flush()

    bands = {"title_bands": title_bands, "body_bands": body_bands, "progress": progress if show else None}
    try:
        if path is not None:
            from ..index.sqlite.reband import reband

            done = reband(path, **bands)
        else:
            from ..index.redis.reband import reband as reband_redis

            opened = argparse.Namespace(index=args.path or args.index, namespace="default",
                                        redis_unsafe=args.redis_unsafe)
            with open_index_for(opened) as index:  # every namespace is re-banded
                done = reband_redis(index, **bands)  # type: ignore[arg-type]
    except (SimhashIndexError, ValueError) as exc:
        raise CliError(f"cannot re-band {location}: {exc}") from exc
    finally:
        if show:
            sys.stderr.write("\r\x1b[K")
    before, after = done["previous"], done["params"]
    print(f"re-banded {path or location}: {done['entries']:,} entries, {done['band_rows']:,} band rows in "
          f"{done['seconds']:.1f} s; title answers distances up to {after['title_bands'] - 1} (was "
          f"{before['title_bands'] - 1}), body up to {after['body_bands'] - 1} (was {before['body_bands'] - 1})")
    return 0
