"""Where a durable SQLite check-and-add's CPU goes as the index grows: pages, not rows.

For each prebuilt index (``index_scaling.build``, one file per distribution and size, built once
into ``--dir`` and reused) and each variant (SQLite pragmas, prewarming, a file evicted from the OS
cache), runs separate processes in alternation, ``--rounds`` of them per pair, each on a fresh copy
of the file: ``--warm`` check-and-adds, then ``--ops`` timed ones as ``index_scaling.py`` makes them
(the same queries in every process, so the pairs do the same work). Per check-and-add, medians over
the rounds: CPU µs (user, sys), read and write system calls (``/proc/self/io``), SQLite page-cache
hits, misses and pages written (``sqlite3_db_status``), minor faults and blocks read from disk. With
``--frames``, also which tables' pages one add writes to the WAL (frames a commit) and how many of
them are distinct over the run (what a checkpoint writes back into the file); that run keeps its
whole WAL (``wal_autocheckpoint=0``), so its CPU and system-call figures are not the shipped ones:
measure those in a run without ``--frames``.

Run: ``python benchmarks/sqlite_pages.py --sizes 10000,1000000 --dists random,identical
--variant base= --variant mmap=mmap_size=1073741824 [--frames]`` (a variant is ``name=`` then
pragmas and flags separated by ``;``: ``prewarm`` reads every table and index once first,
``evict`` drops the copy from the OS page cache first, ``peek`` times the read side alone, ``inplace``
runs on the prebuilt file itself instead of a copy, with queries of its own (for 10M files, whose copy
would cost more than the run; each process then adds its entries to the file for good). Measurement only,
never shipped: ``nobands`` neither reads nor writes band rows (the cost of everything but the band index,
the floor of any band layout kept outside the file's B-trees), ``drop:INDEX,INDEX`` drops those indexes of
the copy first (``drop:entry_url,entry_title,entry_body``: random fingerprints and URLs never use them).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import resource
import shutil
import sqlite3
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import index_scaling

from scrapy_simhash.index import IndexParams, Query, open_index

FIELDS = ("cpu", "user", "sys", "syscr", "syscw", "hit", "miss", "written", "minflt", "inblock")
_PREWARM = {"entry_title": "title_fp IS NOT NULL", "entry_body": "body_fp IS NOT NULL",
            "entry_url": "url_key IS NOT NULL", "entry_seen": "ns >= 0"}


def _db_status() -> Any:
    """``sqlite3_db_status`` of the library the ``sqlite3`` module uses (None where unreachable)."""
    try:
        import _sqlite3

        lib = ctypes.CDLL(_sqlite3.__file__)
        status, filename = lib.sqlite3_db_status, lib.sqlite3_db_filename
    except (ImportError, OSError, AttributeError):
        return None
    status.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                       ctypes.c_int]
    filename.argtypes, filename.restype = [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_char_p
    return status, filename


def page_counts(conn: sqlite3.Connection, path: str) -> tuple[int, int, int] | None:
    """(cache hits, misses, pages written) of ``conn`` so far, or None. The ``sqlite3 *`` handle is
    read from CPython's connection object (its first field) and checked against the file's name, so a
    different layout gives None, never a wrong count."""
    api = _db_status()
    if api is None:
        return None
    status, filename = api
    handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    if not handle or filename(handle, b"main") != os.path.realpath(path).encode():
        return None
    counts = []
    for op in (7, 8, 9):  # SQLITE_DBSTATUS_CACHE_HIT, _MISS, _WRITE
        cur, high = ctypes.c_int(), ctypes.c_int()
        status(handle, op, ctypes.byref(cur), ctypes.byref(high), 0)
        counts.append(cur.value)
    return counts[0], counts[1], counts[2]


def _proc_io() -> dict[str, int]:
    with open("/proc/self/io") as f:
        return {key: int(value) for key, value in (line.split(":") for line in f)}


def wal_frames(path: str) -> list[int]:
    """The page number of each frame of ``path``'s WAL, in order."""
    data = Path(path + "-wal").read_bytes()
    if len(data) < 32:
        return []
    size = struct.unpack(">I", data[8:12])[0]
    return [struct.unpack(">I", data[off:off + 4])[0] for off in range(32, len(data) - size - 23, size + 24)]


def _without_bands() -> None:
    """Measurement only: band rows are neither read nor written (every probe finds nothing), so a
    check-and-add costs what the rest of the file does; the floor of any band layout kept elsewhere."""
    from scrapy_simhash.index.sqlite import dense as sqlite_dense
    from scrapy_simhash.index.sqlite import tables as sqlite_tables

    sqlite_tables.Tables._prefetched = lambda self, tier, fp: []  # type: ignore[method-assign]
    sqlite_dense.candidates = lambda *args, **kwargs: []
    sqlite_dense.write = lambda *args, **kwargs: None


def child(file: str, dist: str, warm: int, ops: int, flags: list[str], frames: bool) -> dict[str, Any]:
    """One process's measurement on a fresh copy of ``file`` (see the module docstring)."""
    inplace = "inplace" in flags
    copy = file if inplace else f"{file}.{os.getpid()}.copy"
    if not inplace:
        shutil.copyfile(file, copy)
    try:
        if "evict" in flags:
            fd = os.open(copy, os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        with open_index(copy, params=IndexParams()) as ix:
            conn = ix._conn  # type: ignore[attr-defined]
            for flag in flags:
                if flag.startswith("drop:"):
                    for index in flag[5:].split(","):
                        conn.execute(f"DROP INDEX {index}")
                elif flag == "nobands":
                    _without_bands()
                elif flag not in ("evict", "prewarm", "peek", "inplace"):
                    conn.execute(f"PRAGMA {flag}")
            if frames:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("PRAGMA wal_autocheckpoint=0")
            if "prewarm" in flags:
                for table in ("band", "band2", "entry"):
                    conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                for index, where in _PREWARM.items():
                    conn.execute(f"SELECT count(*) FROM entry INDEXED BY {index} WHERE {where}").fetchone()
            source = index_scaling.Source(dist, 100_000 + os.getpid() if inplace else 2)
            timed = ix.peek if "peek" in flags else ix.check_and_add

            def one(call: Any, number: int, n: int) -> None:
                t, b = source.pair()
                call(Query(title_fp=t, body_fp=b, title_k=index_scaling.TITLE_K, body_k=index_scaling.BODY_K,
                           url=f"https://q/{number}/{n}", title="q", seen_at=2e9))

            for n in range(warm):
                one(ix.check_and_add, 0, n)
            before_frames = len(wal_frames(copy)) if frames else 0
            pages0, io0, ru0, cpu0 = page_counts(conn, copy), _proc_io(), resource.getrusage(resource.RUSAGE_SELF), \
                time.process_time()
            for n in range(ops):
                one(timed, 1, n)
            cpu1, ru1, io1, pages1 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF), _proc_io(), \
                page_counts(conn, copy)
            out: dict[str, Any] = {
                "cpu": (cpu1 - cpu0) * 1e6 / ops, "user": (ru1.ru_utime - ru0.ru_utime) * 1e6 / ops,
                "sys": (ru1.ru_stime - ru0.ru_stime) * 1e6 / ops,
                "syscr": (io1["syscr"] - io0["syscr"]) / ops, "syscw": (io1["syscw"] - io0["syscw"]) / ops,
                "minflt": (ru1.ru_minflt - ru0.ru_minflt) / ops, "inblock": (ru1.ru_inblock - ru0.ru_inblock) / ops,
                "load": os.getloadavg()[0],
            }
            if pages0 is not None and pages1 is not None:
                out.update(hit=(pages1[0] - pages0[0]) / ops, miss=(pages1[1] - pages0[1]) / ops,
                           written=(pages1[2] - pages0[2]) / ops)
            if frames:
                out["frames"] = _frames_by_table(copy, wal_frames(copy)[before_frames:], ops)
        return out
    finally:
        for suffix in ("", "-wal", "-shm") if not inplace else ():
            Path(copy + suffix).unlink(missing_ok=True)


def _frames_by_table(path: str, pages: list[int], ops: int) -> dict[str, tuple[float, float]]:
    """``{table or index: (WAL frames an op, distinct pages an op)}`` (``dbstat`` names the pages)."""
    with sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True) as ro:
        owner = dict(ro.execute("SELECT pageno, name FROM dbstat"))
    frames = collections.Counter(owner.get(p, "other") for p in pages)
    distinct = collections.Counter(owner.get(p, "other") for p in set(pages))
    return {name: (n / ops, distinct[name] / ops) for name, n in frames.most_common()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--dists", default="random")
    ap.add_argument("--variant", action="append", default=[], help="name=pragma;flag;… (default: base=)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=int, default=200)
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--frames", action="store_true",
                    help="also the WAL frames of an add, by table (no checkpoints in the run)")
    ap.add_argument("--dir", default="/var/tmp/sqlite_pages", help="where the prebuilt files are kept")
    ap.add_argument("--child", nargs=2, metavar=("FILE", "DIST"), help=argparse.SUPPRESS)
    ap.add_argument("--flags", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        flags = [f for f in args.flags.split(";") if f]
        print(json.dumps(child(*args.child, args.warm, args.ops, flags, args.frames)))
        return 0
    variants = [v.split("=", 1) for v in (args.variant or ["base="])]
    os.makedirs(args.dir, exist_ok=True)
    files = []
    for dist in args.dists.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            path = os.path.join(args.dir, f"{dist}-{size}.sqlite3")
            if not os.path.exists(path):
                rate = index_scaling.build(path, dist, size)
                print(f"built {path}: {rate:,.0f} entries/s", flush=True)
            files.append((dist, size, path))
    runs = [(dist, size, path, name, flags) for dist, size, path in files for name, flags in variants]
    results: dict[tuple[str, int, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for number in range(args.rounds):
        for dist, size, path, name, flags in runs if number % 2 == 0 else runs[::-1]:
            done = subprocess.run(
                [sys.executable, __file__, "--child", path, dist, "--flags", flags, "--warm", str(args.warm),
                 "--ops", str(args.ops), *(["--frames"] if args.frames else [])],
                check=True, capture_output=True, text=True)
            results[dist, size, name].append(json.loads(done.stdout.splitlines()[-1]))
        print(f"round {number + 1}/{args.rounds}, load {os.getloadavg()[0]:.2f}", flush=True)
    print("\n| data | entries | variant | " + " | ".join(FIELDS) + " | CPU min–max | load |")
    print("|---|---:|---|" + "---:|" * (len(FIELDS) + 2))
    for (dist, size, name), rows in results.items():
        med = [statistics.median(r[f] for r in rows) if all(f in r for r in rows) else float("nan") for f in FIELDS]
        cpus, loads = [r["cpu"] for r in rows], [r["load"] for r in rows]
        print(f"| {dist} | {size:,} | {name} | " + " | ".join(f"{m:,.1f}" for m in med)
              + f" | {min(cpus):,.0f}–{max(cpus):,.0f} | {min(loads):.1f}–{max(loads):.1f} |")
    if args.frames:
        for (dist, size, name), rows in results.items():
            if not rows[-1]["frames"]:
                continue  # peek: no writes
            print(f"\nWAL frames an op, distinct pages an op ({dist} {size:,} {name}, last round):")
            for table, (n, distinct) in rows[-1]["frames"].items():
                print(f"  {table:16} {n:5.2f} {distinct:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
