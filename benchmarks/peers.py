"""The engine next to its peers, end to end on the same articles.

Every system runs a streaming dedup over the same ``--limit`` articles per language (``zh``: inews
BDCI 2019, ``en``: Reuters-21578 bodies that are not empty, picked as ``throughput.py`` picks them):
build a fresh index, then per article compute its signature, query the index and insert the article
when nothing was found. Systems:

* ``engine``: ``Deduplicator.open`` on a fresh durable SQLite index (default settings) and
  ``check_and_add(title, body, url=...)`` per article; ``engine:KEY=VALUE,...`` is the same with
  ``Deduplicator.open`` options (``--option sentences_shared=50``, repeatable: one variant each);
  ``engine-batched`` is the default engine deciding 32 articles per index transaction (one fsync),
  as ``scrapy-simhash dedup`` does (``Deduplicator.decide_many``; a later article of a batch is
  still checked against the earlier ones; the pipeline groups the items that arrive together);
  ``engine-fallback`` is the default engine with its pure-Python fallbacks forced (the bit vote
  without numpy, the segmenter without its compiled route: ``SCRAPY_SIMHASH_PURE_PYTHON=1``), to
  show what the compiled paths buy;
* ``minhash@0.5`` / ``minhash@0.8``: datasketch ``MinHashLSH`` (128 permutations, shared between
  the sketches as datasketch allows, so a sketch does not redraw them) over the body's character
  5-grams, ``MinHash.update_batch``;
* ``rensa@0.5`` / ``rensa@0.8``: ``rensa.RMinHashLSH`` (Rust) with ``RMinHash`` (128 permutations)
  over the same 5-grams; rensa needs a band count dividing 128, so the threshold gives the divisor
  whose LSH threshold (1/b)^(1/r) is nearest (0.5 → 32 bands × 4 rows ≈ 0.42; 0.8 → 8 × 16 ≈ 0.88);
* ``simhash-pypi``: the ``simhash`` package's defaults (``Simhash(body)``: character 4-grams of the
  lower-cased word characters) with ``SimhashIndex(k=3)`` (its bit array widened for numpy ≥ 2, which
  it otherwise overflows on a 4-gram counted more than 255 times; same fingerprints);
* ``jieba-floor``: ``jieba.analyse.extract_tags(body, topK=64)`` alone, no index (the floor of any
  jieba-based engine).

Each run is a fresh subprocess (nothing cached from another system or run): it loads the articles
and the system's dictionaries (reported as "setup", untimed otherwise), then times the stream: wall
(``perf_counter``) and CPU (``process_time``) seconds. Rounds interleave the runs, (system, language)
pairs shuffled per round (``--seed``), so every system sees the same minutes of a shared machine;
the tables give medians over rounds and the ratio of each system's docs/s to the default engine's.

Packages the library does not depend on: ``datasketch`` and ``rensa`` (``pip install datasketch
rensa``), ``simhash`` (``pip install simhash``); a system whose package is missing is skipped with a
message. The index files go to a temporary directory under ``--dir`` (a real disk: the engine's
index fsyncs its commits; tmpfs is refused).

Run: ``python benchmarks/peers.py`` (2,200 articles per language, 3 rounds; ``--limit 300 --rounds=1``
for a smoke run). ``--base ../main`` also runs another tree's default engine, interleaved, as
``base:engine`` (its own script and package: a change measured against its base in one run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
from options import parse_options  # noqa: E402
from throughput import SOURCES, fs_type, load_docs  # noqa: E402

NUM_PERM = 128
SHINGLE = 5
TOP_K = 64
PEERS = ("minhash@0.5", "minhash@0.8", "rensa@0.5", "rensa@0.8", "simhash-pypi", "jieba-floor")
NEEDS = {"minhash": "datasketch", "rensa": "rensa", "simhash-pypi": "simhash", "jieba-floor": "jieba"}

Stream = Callable[[list[dict[str, str]]], int]  # runs the dedup, returns the number of duplicates


def grams(text: str) -> set[str]:
    """Character ``SHINGLE``-grams of ``text`` (the whole text when shorter)."""
    return {text[i:i + SHINGLE] for i in range(max(1, len(text) - SHINGLE + 1))}


def lsh_stream(lsh: Any, sketch: Callable[[str], Any], docs: list[dict[str, str]]) -> int:
    """A streaming dedup on a MinHash LSH: each article queried, then inserted when new; duplicates found."""
    dups = 0
    for n, d in enumerate(docs):
        m = sketch(d["body"])
        if lsh.query(m):
            dups += 1
        else:
            lsh.insert(n, m)
    return dups


def rensa_bands(threshold: float) -> int:
    """The divisor b of ``NUM_PERM`` whose LSH threshold (1/b)^(1/r) is nearest to ``threshold``."""
    divisors = [b for b in range(1, NUM_PERM + 1) if NUM_PERM % b == 0]
    return min(divisors, key=lambda b: abs((1 / b) ** (b / NUM_PERM) - threshold))


# ------------------------------------------------------------------------------------------------
# the systems (child side): setup() loads dictionaries, returns the timed stream function
# ------------------------------------------------------------------------------------------------


def setup_engine(options: dict[str, Any], workdir: Path, batch: int = 1) -> Stream:
    from scrapy_simhash import Deduplicator, Fingerprinter

    Fingerprinter().fingerprint("预热词典 warm up", "北京市气象台今天下午发布暴雨蓝色预警信号。 The dictionaries load.")

    def run(docs: list[dict[str, str]]) -> int:
        dups = 0
        with Deduplicator.open(f"sqlite:///{workdir / 'index.sqlite3'}", **options) as dedup:
            if batch == 1:
                for d in docs:
                    dups += dedup.check_and_add(d["title"], d["body"], url=d["url"]).status != "new"
                return dups
            for start in range(0, len(docs), batch):  # as `scrapy-simhash dedup` decides its lines
                chunk = docs[start : start + batch]
                fps = [(dedup.fingerprint(d["title"], d["body"]), d["url"]) for d in chunk]
                dups += sum(v.status != "new" for v in dedup.decide_many(fps))
        return dups

    return run


def setup_minhash(threshold: float) -> Stream:
    from datasketch import MinHash, MinHashLSH

    first = MinHash(num_perm=NUM_PERM, seed=1)
    perms, scheme = first.permutations, getattr(first, "scheme", None)
    shared = {"scheme": scheme} if scheme else {}  # datasketch ≥ 2.0 wants the scheme with the permutations

    def sketch(body: str) -> Any:
        m = MinHash(num_perm=NUM_PERM, permutations=perms, **shared)
        m.update_batch([g.encode("utf-8") for g in grams(body)])
        return m

    def run(docs: list[dict[str, str]]) -> int:
        return lsh_stream(MinHashLSH(threshold=threshold, num_perm=NUM_PERM), sketch, docs)

    return run


def setup_rensa(threshold: float) -> Stream:
    from rensa import RMinHash, RMinHashLSH

    bands = rensa_bands(threshold)

    def sketch(body: str) -> Any:
        m = RMinHash(NUM_PERM, 1)
        m.update(list(grams(body)))
        return m

    def run(docs: list[dict[str, str]]) -> int:
        return lsh_stream(RMinHashLSH(threshold, NUM_PERM, bands), sketch, docs)

    return run


def setup_simhash_pypi() -> Stream:
    from simhash import Simhash, SimhashIndex

    class Widened(Simhash):  # type: ignore[misc]
        """The package's ``Simhash``, its bit array widened: under numpy ≥ 2 a feature counted more
        than 255 times overflows the package's uint8 array (numpy 1 widened it by itself), so
        fingerprints are the same as with numpy 1."""

        def _bitarray_from_bytes(self, b: bytes) -> Any:
            return super()._bitarray_from_bytes(b).astype("int64")

    def run(docs: list[dict[str, str]]) -> int:
        index = SimhashIndex([], k=3)
        dups = 0
        for n, d in enumerate(docs):
            h = Widened(d["body"])
            if index.get_near_dups(h):
                dups += 1
            else:
                index.add(str(n), h)
        return dups

    return run


def setup_jieba_floor() -> Stream:
    import jieba
    import jieba.analyse

    jieba.setLogLevel(60)
    jieba.analyse.extract_tags("预热词典", topK=1)

    def run(docs: list[dict[str, str]]) -> int:
        for d in docs:
            jieba.analyse.extract_tags(d["body"], topK=TOP_K)
        return 0

    return run


def setup(system: str, workdir: Path) -> Stream:
    name, _, arg = system.partition(":") if system.startswith("engine") else system.partition("@")
    if name == "engine":
        return setup_engine(parse_options(filter(None, arg.split(","))), workdir)
    if name == "engine-batched":
        from scrapy_simhash.cli.dedup import DECIDE_BATCH

        return setup_engine({}, workdir, DECIDE_BATCH)
    if name == "engine-fallback":
        os.environ["SCRAPY_SIMHASH_PURE_PYTHON"] = "1"  # the segmenter's pure-Python route
        from scrapy_simhash.fingerprint import segment, simhash

        assert not segment.COMPILED
        simhash._np = simhash._vote_compiled = None  # the vote's pure-Python path, as without numpy
        return setup_engine({}, workdir)
    if name == "minhash":
        return setup_minhash(float(arg))
    if name == "rensa":
        return setup_rensa(float(arg))
    if name == "simhash-pypi":
        return setup_simhash_pypi()
    if name == "jieba-floor":
        return setup_jieba_floor()
    raise ValueError(f"unknown system {system!r}")


def child(system: str, lang: str, limit: int, workdir: Path) -> None:
    """One run in this (fresh) process: prints one JSON line."""
    docs = load_docs(lang, limit)
    t0 = time.perf_counter()
    run = setup(system, workdir)
    setup_s = time.perf_counter() - t0
    w0, c0 = time.perf_counter(), time.process_time()
    dups = run(docs)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(json.dumps({"n": len(docs), "wall": wall, "cpu": cpu, "setup": setup_s, "dups": dups}))


# ------------------------------------------------------------------------------------------------
# parent: rounds, interleaving, tables
# ------------------------------------------------------------------------------------------------


def missing_package(system: str) -> str | None:
    if system.startswith("engine"):
        return None
    pkg = NEEDS[system.partition("@")[0]]
    return None if importlib.util.find_spec(pkg) else pkg


def run_one(system: str, lang: str, limit: int, root: Path, base: Path | None = None) -> dict[str, Any]:
    """One fresh child process; a ``base:`` system runs from the ``base`` tree (its script, its package)."""
    tree = REPO
    if system.startswith("base:"):
        assert base is not None
        tree, system = base, system.removeprefix("base:")
    with tempfile.TemporaryDirectory(prefix="peers-", dir=root) as tmp:
        proc = subprocess.run(
            [sys.executable, str(tree / "benchmarks" / "peers.py"), "--_child", system, lang, str(limit), tmp],
            capture_output=True, text=True, cwd=str(tree), env={**os.environ, "PYTHONPATH": str(tree)},
        )
    if proc.returncode:
        raise RuntimeError(f"{system} {lang} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def commit(tree: Path = REPO) -> str:
    out = subprocess.run(["git", "-C", str(tree), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=2200, help="articles per language (default 2200)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are printed (default 3)")
    ap.add_argument("--langs", default="zh,en")
    ap.add_argument("--option", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                    help="an engine variant with these Deduplicator.open options (repeatable); default: "
                         "sentences_shared=50 and main_content=True, one variant each")
    ap.add_argument("--no-variants", action="store_true", help="only the default engine (batched and fallback too)")
    ap.add_argument("--base", help="another tree (e.g. main's) whose default engine runs interleaved as base:engine")
    ap.add_argument("--no-fallback", action="store_true", help="leave engine-fallback out")
    ap.add_argument("--systems", default="", help=f"comma list of peers to run (default all: {','.join(PEERS)})")
    ap.add_argument("--seed", type=int, default=18, help="seed of the per-round shuffle")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="parent of the index directories (a real disk)")
    ap.add_argument("--_child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        system, lang, limit, workdir = args._child
        child(system, lang, int(limit), Path(workdir))
        return 0
    print("$ " + shlex.join(["python", "benchmarks/peers.py", *(sys.argv[1:] if argv is None else argv)]))
    langs = [x for x in args.langs.split(",") if x]
    for lang in langs:
        if not SOURCES[lang].is_file():
            print(f"corpus file missing: {SOURCES[lang]} (needs ../shared/corpus next to the repo)")
            return 2
    root = Path(args.dir)
    kind = fs_type(root)
    if kind.startswith(("tmpfs", "ramfs")):
        print(f"--dir {root} is on {kind}: the index must be on a real disk (pass --dir)")
        return 2
    options = args.option if args.option is not None else ["sentences_shared=50", "main_content=True"]
    if args.no_variants:
        options = []
    systems = ["engine", *(f"engine:{o}" for o in options)]
    if args.base:
        systems.append("base:engine")
    systems += ["engine-batched", *([] if args.no_fallback else ["engine-fallback"])]
    for peer in [s for s in args.systems.split(",") if s] or PEERS:
        pkg = missing_package(peer)
        if pkg:
            print(f"skipping {peer}: package {pkg!r} is not installed (pip install {pkg})")
        else:
            systems.append(peer)
    if args.base:
        print(f"base:engine = the default engine of {args.base} (commit {commit(Path(args.base))})")
    print(f"commit {commit()}, python {platform.python_version()}, {os.cpu_count()} CPUs; index under {root} "
          f"on {kind}; {args.limit} articles per language, {args.rounds} round(s)")
    print(f"load average at start {loadavg()}", flush=True)
    rng = random.Random(args.seed)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    started = time.perf_counter()
    for rnd in range(args.rounds):
        runs = [(s, lang) for s in systems for lang in langs]
        rng.shuffle(runs)
        for system, lang in runs:
            results.setdefault((system, lang), []).append(
                run_one(system, lang, args.limit, root, Path(args.base) if args.base else None))
        print(f"  round {rnd + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s, load {loadavg()})",
              flush=True)
    end_load = loadavg()
    for lang in langs:
        n = results[("engine", lang)][0]["n"]
        med = {s: {k: statistics.median(r[k] for r in results[(s, lang)]) for k in ("wall", "cpu", "setup")}
               for s in systems}
        base = med["engine"]
        print(f"\n### {lang}: {n} articles, median of {args.rounds} round(s)\n")
        print("| system | docs/s (CPU) | docs/s (wall) | × engine (CPU) | × engine (wall) | setup s | duplicates |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for s in systems:
            m = med[s]
            dups = sorted({r["dups"] for r in results[(s, lang)]})
            print(f"| {s} | {n / m['cpu']:,.0f} | {n / m['wall']:,.0f} | {base['cpu'] / m['cpu']:.2f} | "
                  f"{base['wall'] / m['wall']:.2f} | {m['setup']:.2f} | {'/'.join(map(str, dups))} |")
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at start see above, at end {end_load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
