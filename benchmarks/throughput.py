"""Throughput of scrapy-simhash next to the tokenizer floor, on real articles.

All stages run in one invocation, interleaved run by run, so their ratios hold on a noisy, shared
machine. Per language (``zh``: inews BDCI 2019, ``en``: Reuters-21578 bodies that are not empty),
on the same ``--limit`` articles:

(a) ``jieba.analyse.extract_tags(body, topK=64)`` alone over the raw bodies: the floor;
(b) ``Fingerprinter().fingerprint(title, body)`` (as ``Deduplicator.open`` builds it for the default
    tiers, the sentence tier included): normalize + features + simhash + signatures;
(c) ``Deduplicator.check_and_add`` on a fresh durable SQLite index (WAL, ``synchronous=FULL``) in a
    temporary directory on a real disk (``--dir``; the file system type is printed, tmpfs refused);
    (c') the same with ``synchronous=OFF``, only to show the share of the per-commit fsync;
(d) the Scrapy pipeline in a real offline crawl (fresh subprocess, ``ADDONS = {"scrapy_simhash.Addon":
    300}``): one spider fetches a JSON-lines page from a 127.0.0.1 server and yields every article as
    an item; items/s is timed from the response to the last item leaving the pipeline. (d0) is the
    same crawl with ``SIMHASH_ENABLED = False`` (Scrapy's own cost);
(e) ``scrapy-simhash dedup FILE --index … --jobs 1`` and ``--jobs <cpus>`` on ``--cli-limit``
    articles (2,000 by default, so the start-up of the processes does not dominate; subprocess wall
    time, interpreter start and dictionary load included; a 1-article run shows that fixed cost).

The child processes (crawls, command lines) cache the modules' bytecode as an installed package has it
(``pip`` compiles it), in a temporary ``PYTHONPYCACHEPREFIX``, even where ``PYTHONDONTWRITEBYTECODE``
is set (``--no-bytecode-cache``: as the environment says; every module of an editable checkout is then
compiled again at every start), as ``startup.py`` does.

Per-stage shares (normalize / features (jieba) / simhash / signatures / index) come from an
instrumented pass of (c) that times each step of the same calls, in wall and in CPU seconds (its
features and simhash are the Python functions, not the compiled single pass that
``Fingerprinter.fingerprint`` takes: their share is overstated). Also measured: startup of the
pipeline in a fresh process (import + ``Deduplicator.open`` + first fingerprint, goal ≤ 1 s), and RSS
of a process that fills an
index with ``SqliteIndex.add`` up to ``--index-entries`` synthetic entries (``index_scaling.fill``;
goal ≤ 200 MB at 1M).

Run: ``python benchmarks/throughput.py`` (≈ 4–5 min on 2 cores; ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import gzip
import http.server
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
SOURCES = {"zh": CORPUS / "zh" / "inews-bdci2019.jsonl.gz", "en": CORPUS / "en" / "reuters21578.jsonl.gz"}
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

TOP_K = 64


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def load_docs(lang: str, limit: int) -> list[dict[str, str]]:
    """The first ``limit`` articles with a non-empty body, as ``{"title", "body", "url"}``."""
    docs = []
    with gzip.open(SOURCES[lang], "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            body = rec.get("body") or ""
            if not body.strip():
                continue
            docs.append({"title": rec.get("title") or "", "body": body,
                         "url": rec.get("url") or f"https://{lang}.example/{rec['id']}"})
            if len(docs) >= limit:
                break
    return docs


def peak_rss_mb() -> float:
    """Peak resident set size of this process (VmHWM), MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fs_type(path: Path) -> str:
    """File system type of the mount holding ``path`` (from /proc/mounts)."""
    best, kind = "", "?"
    real = str(path.resolve())
    with open("/proc/mounts") as f:
        for line in f:
            _, mnt, typ, *_ = line.split()
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, kind = mnt, typ
    return f"{kind} ({best})"


def run_child(cmd: list[str], **kw: Any) -> tuple[float, float, str]:
    """Run ``cmd``; returns wall seconds, peak RSS MB of the child (and waited descendants), stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far; per child we take it from /proc in the child.
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return wall, rss, out


def timed(func: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    func()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------------
# in-process stages (a), (b), (c)
# ------------------------------------------------------------------------------------------------


def stage_inprocess(docs: list[dict[str, str]], make_fp: Callable[[], Any], workdir: Path, tag: str,
                    chunk: int = 25) -> dict[str, Any]:
    """(a), (b), (c) and (c') interleaved chunk by chunk (rotating order), wall and CPU seconds each.

    Interleaving in chunks of ``chunk`` articles keeps a burst of load from other processes out of
    the ratios: every stage sees the same minutes of the machine. Each of (b), (c), (c') gets a
    fresh ``Fingerprinter`` per run, so none profits from what another stage or an earlier run
    left in the segmenter's and feature caches (the dictionaries themselves stay loaded, as in a
    running crawl).
    """
    import jieba.analyse

    extract_tags = jieba.analyse.extract_tags
    fp = make_fp()
    full = open_dedup(workdir, f"c-{tag}.sqlite3", make_fp())
    off = open_dedup(workdir, f"coff-{tag}.sqlite3", make_fp())
    off.index._conn.execute("PRAGMA synchronous=OFF")
    counts: dict[str, int] = {}

    def floor(part: list[dict[str, str]]) -> None:
        for d in part:
            extract_tags(d["body"], topK=TOP_K)

    def fingerprint(part: list[dict[str, str]]) -> None:
        for d in part:
            fp.fingerprint(d["title"], d["body"])

    def check_full(part: list[dict[str, str]]) -> None:
        for d in part:
            v = full.check_and_add(d["title"], d["body"], url=d["url"])
            counts[v.status] = counts.get(v.status, 0) + 1

    def check_off(part: list[dict[str, str]]) -> None:
        for d in part:
            off.check_and_add(d["title"], d["body"], url=d["url"])

    stages: list[tuple[str, Callable[[list[dict[str, str]]], None]]] = [
        ("a", floor), ("b", fingerprint), ("c", check_full), ("c_off", check_off)]
    wall = dict.fromkeys([k for k, _ in stages], 0.0)
    cpu = dict.fromkeys(wall, 0.0)
    try:
        for i in range(0, len(docs), chunk):
            part = docs[i:i + chunk]
            k = (i // chunk) % len(stages)
            for key, func in stages[k:] + stages[:k]:
                w0, c0 = time.perf_counter(), time.process_time()
                func(part)
                wall[key] += time.perf_counter() - w0
                cpu[key] += time.process_time() - c0
    finally:
        full.close()
        off.close()
    return {"wall": wall, "cpu": cpu, "counts": counts}


def open_dedup(workdir: Path, name: str, fp: Any) -> Any:
    from scrapy_simhash import Deduplicator

    return Deduplicator.open(f"sqlite:///{workdir / name}", fingerprinter=fp)


def stage_breakdown(docs: list[dict[str, str]], make_fp: Callable[[], Any], workdir: Path,
                    name: str) -> dict[str, float]:
    """Seconds spent in normalize / features / simhash / signatures / index over (c)'s calls.

    Repeats what ``Fingerprinter.fingerprint`` does with timers in between and compares every result
    with ``fingerprint()``'s; ``mismatches`` counts documents where they differ (the engine changed
    and this split must follow it).
    """
    import dataclasses

    from scrapy_simhash.fingerprint import fingerprinter as fpmod
    from scrapy_simhash.fingerprint.simhash import simhash

    fields = {f.name for f in dataclasses.fields(fpmod.Fingerprints)}
    numbers = getattr(fpmod, "number_signature", None) if "numbers" in fields else None
    sentences = getattr(fpmod, "sentence_signature", None) if "sentences" in fields else None
    figures = getattr(fpmod, "figure_share", None) if "figures" in fields else None
    short_digest = getattr(fpmod, "short_body_digest", None) if "short_body" in fields else None
    min_title_f = getattr(fpmod, "_MIN_TITLE_FEATURES", 2)
    min_body_f = getattr(fpmod, "_MIN_BODY_FEATURES", 3)
    t = {"normalize": 0.0, "features": 0.0, "simhash": 0.0, "signatures": 0.0, "index": 0.0, "mismatches": 0}
    cpu = dict.fromkeys(("normalize", "features", "simhash", "signatures", "index"), 0.0)
    fp, reference = make_fp(), make_fp()
    dedup = open_dedup(workdir, name, fp)
    pc, tc = time.perf_counter, time.process_time
    try:
        for d in docs:
            c0 = tc()
            t0 = pc()
            title_text = fp.clean_title(d["title"])
            page = fp.is_page(d["body"])
            body_text = fp._clean_body(d["body"], page)
            t1, c1 = pc(), tc()
            tf = fp.features.title_features(title_text) if len(title_text) >= fp.min_title_chars else {}
            bf = fp.features.body_features(body_text) if len(body_text) >= fp.min_body_chars else {}
            t2, c2 = pc(), tc()
            th = simhash(tf, fp.bits) if len(tf) >= min_title_f else None
            bh = simhash(bf, fp.bits) if len(bf) >= min_body_f else None
            t3, c3 = pc(), tc()
            extra: dict[str, Any] = {}
            short = short_digest(body_text) if short_digest is not None and bh is None else None
            if short_digest is not None:
                extra["short_body"] = short
            if numbers is not None:
                extra["numbers"] = numbers(body_text) if bh is not None or short is not None else None
            if sentences is not None and getattr(fp, "sentences", True):
                extra["sentences"] = sentences(body_text)
            if figures is not None:
                extra["figures"] = figures(body_text) >= fpmod.FIGURE_HEAVY_SHARE
            if "main_text" in fields:
                extra["main_text"] = page
            fps = fpmod.Fingerprints(th, bh, title_text, len(body_text), **extra)
            t4, c4 = pc(), tc()
            dedup.decide(fps, url=d["url"])
            t5, c5 = pc(), tc()
            t["normalize"] += t1 - t0
            t["features"] += t2 - t1
            t["simhash"] += t3 - t2
            t["signatures"] += t4 - t3
            t["index"] += t5 - t4
            for key, (start, end) in zip(cpu, ((c0, c1), (c1, c2), (c2, c3), (c3, c4), (c4, c5)), strict=True):
                cpu[key] += end - start
            t["mismatches"] += fps != reference.fingerprint(d["title"], d["body"])
    finally:
        dedup.close()
    return {**t, **{f"cpu:{k}": v for k, v in cpu.items()}}


# ------------------------------------------------------------------------------------------------
# (d) the crawl, in a fresh subprocess
# ------------------------------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A 127.0.0.1 HTTP server for ``directory`` on a free port (daemon thread)."""
    handler = lambda *a, **k: _Quiet(*a, directory=str(directory), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def crawl_child(url: str, index_url: str, enabled: bool) -> None:
    """Entry point of the crawl subprocess: prints one JSON line with timings and stats."""
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    marks: dict[str, float] = {}

    class ArticlesSpider(scrapy.Spider):
        name = "throughput"
        start_urls = [url]

        def parse(self, response: Any) -> Any:
            marks.setdefault("parse", time.perf_counter())
            marks.setdefault("parse_cpu", time.process_time())
            for line in response.body.splitlines():
                if line.strip():
                    yield json.loads(line)

    def item_done(*args: Any, **kwargs: Any) -> None:
        marks["last"] = time.perf_counter()
        marks["last_cpu"] = time.process_time()

    t0 = time.perf_counter()
    process = CrawlerProcess({
        "ADDONS": {"scrapy_simhash.Addon": 300},
        "SIMHASH_ENABLED": enabled,
        "SIMHASH_INDEX_URL": index_url,
        "LOG_LEVEL": "ERROR",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "DOWNLOAD_MAXSIZE": 0,
        "DOWNLOAD_WARNSIZE": 0,
    })
    crawler = process.create_crawler(ArticlesSpider)
    for sig in (signals.item_scraped, signals.item_dropped):
        crawler.signals.connect(item_done, signal=sig)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats()
    print(json.dumps({
        "items_s": marks["last"] - marks["parse"],
        "cpu_s": marks["last_cpu"] - marks["parse_cpu"],
        "wall_s": time.perf_counter() - t0,
        "scraped": stats.get("item_scraped_count", 0),
        "dropped": stats.get("item_dropped_count", 0),
        "new": stats.get("simhash/new", 0),
        "rss_mb": peak_rss_mb(),
    }))


def stage_crawl(url: str, workdir: Path, name: str, enabled: bool) -> dict[str, Any]:
    index_url = f"sqlite:///{workdir / name}"
    _, _, out = run_child([sys.executable, __file__, "--_crawl", url, index_url, "1" if enabled else "0"])
    return json.loads(out.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------
# (e) the CLI batch command
# ------------------------------------------------------------------------------------------------


def cli_path() -> str:
    exe = Path(sys.executable).with_name("scrapy-simhash")
    return str(exe) if exe.exists() else shutil.which("scrapy-simhash") or "scrapy-simhash"


def stage_cli(jsonl: Path, workdir: Path, name: str, jobs: int) -> dict[str, Any]:
    cmd = [cli_path(), "dedup", str(jsonl), "--index", f"sqlite:///{workdir / name}", "--jobs", str(jobs),
           "--no-progress", "-q"]
    # /usr/bin/time is not everywhere: wrap with a tiny Python launcher that reports the peak RSS.
    wrapper = [sys.executable, "-c",
               "import os,resource,subprocess,sys,json;p=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
               "r=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss;"
               "print(json.dumps({'rc':p.returncode,'rss_mb':r/1024}));sys.exit(p.returncode)", *cmd]
    wall, _, out = run_child(wrapper)
    info = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": wall, "rss_mb": info["rss_mb"], "cmd": cmd}


# ------------------------------------------------------------------------------------------------
# startup and index RSS (fresh subprocesses)
# ------------------------------------------------------------------------------------------------

STARTUP_CODE = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from scrapy_simhash import Deduplicator
import scrapy_simhash.scrapy.pipeline  # what Scrapy loads for the pipeline
t1 = time.perf_counter()
d = Deduplicator.open(sys.argv[1])
t2 = time.perf_counter()
d.fingerprint("北京今日发布暴雨蓝色预警", "北京市气象台今天下午发布暴雨蓝色预警信号，预计夜间有大到暴雨，局地大暴雨。")
t3 = time.perf_counter()
d.close()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "first": t3 - t2, "cpu": time.process_time() - c0}))
"""


def stage_startup(workdir: Path, name: str) -> dict[str, float]:
    t0 = time.perf_counter()
    _, _, out = run_child([sys.executable, "-c", STARTUP_CODE, f"sqlite:///{workdir / name}"], cwd=str(REPO))
    total = time.perf_counter() - t0
    r = json.loads(out.strip().splitlines()[-1])
    r["in_process"] = r["import"] + r["open"] + r["first"]
    r["process"] = total  # interpreter start and exit included
    return r


INDEX_RSS_CODE = r"""
import json, sys
sys.path[:0] = sys.argv[3:5]
from index_scaling import Source, fill
from scrapy_simhash.index import IndexParams, open_index

def rss():
    vals = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                vals[k] = int(v.split()[0]) / 1024
    return vals

out, stored = [], 0
src = Source("random", 1)
with open_index(sys.argv[1], params=IndexParams()) as ix:
    base = rss()["VmRSS"]
    for size in sorted(int(s) for s in sys.argv[2].split(",")):
        secs = fill(ix, src, stored, size)
        stored = size
        out.append({"entries": size, "fill_s": secs, **rss()})
print(json.dumps({"base_mb": base, "steps": out}))
"""


def stage_index_rss(workdir: Path, sizes: list[int]) -> dict[str, Any]:
    path = workdir / "rss.sqlite3"
    _, _, out = run_child([sys.executable, "-c", INDEX_RSS_CODE, str(path), ",".join(map(str, sizes)),
                           str(REPO), str(REPO / "benchmarks")])
    r = json.loads(out.strip().splitlines()[-1])
    r["file_mb"] = sum(p.stat().st_size for p in workdir.glob("rss.sqlite3*")) / 2**20
    return r


# ------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per stage; the median is printed (default 3)")
    ap.add_argument("--limit", type=int, default=400, help="articles per language (default 400)")
    ap.add_argument("--cli-limit", type=int, default=2000,
                    help="articles per language for the command line runs (e), default 2000: enough that the "
                         "start-up of the processes does not dominate")
    ap.add_argument("--langs", default="zh,en", help="languages to run (zh, en)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="--jobs of the all-cores CLI run")
    ap.add_argument("--index-entries", default="10000,100000,1000000",
                    help="index sizes for the RSS measurement ('' to skip)")
    ap.add_argument("--skip", default="", help="comma list of stages to skip: crawl,cli,startup,index")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="parent of the temporary work directory "
                    "(must be a real disk, not tmpfs)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 60 articles, 1 run, index to 20k")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="children keep the environment's PYTHONDONTWRITEBYTECODE / PYTHONPYCACHEPREFIX")
    ap.add_argument("--_crawl", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._crawl:
        crawl_child(args._crawl[0], args._crawl[1], args._crawl[2] == "1")
        return 0
    if args.quick:
        args.limit, args.cli_limit, args.runs, args.index_entries = 60, 120, 1, "2000,20000"
    skip = set(filter(None, args.skip.split(",")))
    langs = [lang for lang in args.langs.split(",") if lang]
    for lang in langs:
        if not SOURCES[lang].is_file():
            print(f"corpus file missing: {SOURCES[lang]} (needs ../shared/corpus next to the repo)")
            return 2
    argv_shown = argv if argv is not None else sys.argv[1:]
    print(f"$ python benchmarks/throughput.py {' '.join(argv_shown)}".rstrip())
    import sqlite3

    print(f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
          f"{platform.platform()}")
    workroot = Path(args.dir)
    kind = fs_type(workroot)
    if kind.startswith("tmpfs") or kind.startswith("ramfs"):
        print(f"--dir {workroot} is on {kind}: the index must be on a real disk (pass --dir)")
        return 2
    print(f"index files in a temporary directory under {workroot} on {kind}; load average at start "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = time.perf_counter()

    import jieba
    import jieba.analyse

    jieba.setLogLevel(60)
    from scrapy_simhash import Fingerprinter

    Fingerprinter()  # jieba's dictionary and the IDF table loaded before anything is timed
    # (b), (c) and the split fingerprint as Deduplicator.open does for the default tiers (the sentence
    # tier is on by default: sentences_shared=50 needs the sentence signatures).
    engine_fp = Fingerprinter
    jieba.analyse.extract_tags("预热词典", topK=1)  # dictionaries loaded before anything is timed
    results: dict[str, dict[str, list[Any]]] = {}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="throughput-", dir=workroot) as tmp:
        work = Path(tmp)
        if not args.no_bytecode_cache:  # inherited by every child; the warm-up runs below write it
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
            os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        server, base_url = serve(work)
        data: dict[str, tuple[list[dict[str, str]], float, str]] = {}
        cli_sizes: dict[str, int] = {}
        for lang in langs:
            docs = load_docs(lang, args.limit)
            mb = sum(len(d["body"].encode("utf-8")) for d in docs) / 1e6
            path = work / f"{lang}.jsonl"
            path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), "utf-8")
            (work / f"{lang}-1.jsonl").write_text(json.dumps(docs[0], ensure_ascii=False) + "\n", "utf-8")
            cli_docs = load_docs(lang, args.cli_limit)
            (work / f"{lang}-cli.jsonl").write_text(
                "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in cli_docs), "utf-8")
            cli_sizes[lang] = len(cli_docs)
            data[lang] = (docs, mb, f"{base_url}/{path.name}")
            # untimed warm-up: caches, lazily compiled regexes, the first SQLite file
            stage_inprocess(docs[:20], engine_fp, work, f"warm-{lang}", chunk=10)
            if "cli" not in skip:  # untimed: the bytecode cache written, as an install has it
                stage_cli(work / f"{lang}-1.jsonl", work, f"warm-cli-{lang}.sqlite3", args.jobs)
            print(f"{lang}: {len(docs)} articles, {mb:.2f} MB of body text "
                  f"({sum(len(d['body']) for d in docs) / len(docs):.0f} chars/article)", flush=True)
        for run in range(args.runs):
            for lang in langs:
                docs, mb, url = data[lang]
                r = results.setdefault(lang, {})
                tag = f"{lang}{run}"
                loads.append(os.getloadavg()[0])
                r.setdefault("inproc", []).append(stage_inprocess(docs, engine_fp, work, tag))
                r.setdefault("split", []).append(stage_breakdown(docs, engine_fp, work, f"split-{tag}.sqlite3"))
                if "crawl" not in skip:
                    r.setdefault("d", []).append(stage_crawl(url, work, f"d-{tag}.sqlite3", True))
                    r.setdefault("d0", []).append(stage_crawl(url, work, f"d0-{tag}.sqlite3", False))
                if "cli" not in skip:
                    jsonl = work / f"{lang}-cli.jsonl"
                    r.setdefault("e1", []).append(stage_cli(jsonl, work, f"e1-{tag}.sqlite3", 1))
                    r.setdefault("eN", []).append(stage_cli(jsonl, work, f"eN-{tag}.sqlite3", args.jobs))
                    one = work / f"{lang}-1.jsonl"
                    r.setdefault("e1_0", []).append(stage_cli(one, work, f"e10-{tag}.sqlite3", 1))
                    r.setdefault("eN_0", []).append(stage_cli(one, work, f"eN0-{tag}.sqlite3", args.jobs))
                print(f"  run {run + 1}/{args.runs} {lang} done ({time.perf_counter() - started:.0f} s, "
                      f"load {os.getloadavg()[0]:.2f})", flush=True)
        server.shutdown()
        startup = [stage_startup(work, f"startup-{i}.sqlite3") for i in range(max(3, args.runs))] \
            if "startup" not in skip else []
        rss_sizes = [int(s) for s in args.index_entries.split(",") if s]
        index_rss = stage_index_rss(work, rss_sizes) if rss_sizes and "index" not in skip else None
        bench_rss = peak_rss_mb()

    print()
    print(f"median of {args.runs} run(s); docs/s and MB/s of raw body text; 1-min load average during "
          f"the runs: min {min(loads):.2f}, median {med(loads):.2f}, max {max(loads):.2f}")
    for lang in langs:
        docs, mb, _ = data[lang]
        r = results[lang]
        n = len(docs)
        ip = r["inproc"]
        rows: list[tuple[str, float, float | None, str]] = []  # label, wall s, CPU s, RSS
        for key, label in (("a", "(a) jieba extract_tags (floor)"), ("b", "(b) normalize + fingerprint"),
                           ("c", "(c) check_and_add, SQLite FULL"), ("c_off", "(c') same, synchronous=OFF")):
            rows.append((label, med([x["wall"][key] for x in ip]), med([x["cpu"][key] for x in ip]), ""))
        if "d" in r:
            for key, label in (("d", "(d) Scrapy crawl + pipeline"), ("d0", "(d0) same crawl, pipeline off")):
                rows.append((label, med([x["items_s"] for x in r[key]]), med([x["cpu_s"] for x in r[key]]),
                             f"{med([x['rss_mb'] for x in r[key]]):.0f}"))
        print(f"\n### {lang}: {n} articles, {mb:.2f} MB\n")
        print("| stage | wall s | docs/s | MB/s | × floor | CPU docs/s | × floor (CPU) | peak RSS MB |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        floor_w, floor_c = n / rows[0][1], n / rows[0][2]
        for label, wall, cpu, rss in rows:
            cpu_cols = f"{n / cpu:,.0f} | {n / cpu / floor_c:.2f}" if cpu else "— | —"
            print(f"| {label} | {wall:.2f} | {n / wall:,.0f} | {mb / wall:.2f} | {n / wall / floor_w:.2f} | "
                  f"{cpu_cols} | {rss or '—'} |")
        for clock in ("wall", "CPU"):
            split = {k.removeprefix("cpu:"): med([s[k] for s in r["split"]]) for k in r["split"][0]
                     if k != "mismatches" and k.startswith("cpu:") == (clock == "CPU")}
            total = sum(split.values())
            print(f"\nper-stage share of (c) (instrumented pass, {clock}): " + ", ".join(
                f"{k} {v / total:.0%} ({v / n * 1e3:.3f} ms/doc)" for k, v in split.items()))
        bad = max(s["mismatches"] for s in r["split"])
        if bad:
            print(f"WARNING: the instrumented pass differs from Fingerprinter.fingerprint on {bad} articles: "
                  "the engine changed, update stage_breakdown")
        c_w, coff_w = med([x["wall"]["c"] for x in ip]), med([x["wall"]["c_off"] for x in ip])
        print(f"fsync (synchronous=FULL vs OFF): {(c_w - coff_w) / n * 1e3:+.2f} ms/doc wall, "
              f"{(c_w - coff_w) / c_w:+.0%} of (c); verdicts of (c): {ip[0]['counts']}")
        ratios = [f"(c)/(a) {rows[0][1] / c_w:.2f} wall, "
                  f"{rows[0][2] / med([x['cpu']['c'] for x in ip]):.2f} CPU (goal ≥ 0.9)"]
        if "d" in r:
            dsec = med([x["items_s"] for x in r["d"]])
            ratios.append(f"(d)/(a) {rows[0][1] / dsec:.2f} wall (goal ≥ 0.8)")
            ratios.append(f"crawl drops {r['d'][0]['dropped']} = (c) duplicates {ip[0]['counts'].get('duplicate', 0)}")
        if "e1" in r:
            e1, eN = med([x["wall_s"] for x in r["e1"]]), med([x["wall_s"] for x in r["eN"]])
            f1, fN = med([x["wall_s"] for x in r["e1_0"]]), med([x["wall_s"] for x in r["eN_0"]])
            m = cli_sizes[lang]
            print(f"(e) CLI `dedup FILE --jobs J` on {m} articles: --jobs 1 {e1:.2f} s ({m / e1:,.0f} docs/s, "
                  f"{m / e1 / floor_w:.2f} × floor, RSS {med([x['rss_mb'] for x in r['e1']]):.0f} MB); "
                  f"--jobs {args.jobs} {eN:.2f} s ({m / eN:,.0f} docs/s, RSS of the largest process "
                  f"{med([x['rss_mb'] for x in r['eN']]):.0f} MB); a 1-article run takes {f1:.2f} s / {fN:.2f} s")
            ratios.append(f"(e {args.jobs} jobs)/(e 1) {e1 / eN:.2f} wall, {(e1 - f1) / (eN - fN):.2f} without the "
                          "1-article run (goal ≥ 1.8 on 2 cores)")
        print("ratios: " + "; ".join(ratios))
    print(f"\n(a)–(c') interleaved in chunks of 25 articles; (c)/(c')/split: in this process (peak RSS "
          f"{bench_rss:.0f} MB, corpus included); (d) RSS of the crawl process; (e) RSS = the largest process "
          "of the run (ru_maxrss of waited children), not the sum of the workers.")
    if startup:
        print(f"\nstartup, fresh process (median of {len(startup)}): import scrapy_simhash + pipeline "
              f"{med([s['import'] for s in startup]):.2f} s, Deduplicator.open {med([s['open'] for s in startup]):.2f}"
              f" s, first fingerprint (jieba dictionary load) {med([s['first'] for s in startup]):.2f} s → "
              f"{med([s['in_process'] for s in startup]):.2f} s in process (goal ≤ 1 s; "
              f"CPU {med([s['cpu'] for s in startup]):.2f} s); "
              f"{med([s['process'] for s in startup]):.2f} s with interpreter start and exit")
    if index_rss:
        steps = ", ".join(f"{s['entries']:,}: RSS {s['VmRSS']:.0f} MB (peak {s['VmHWM']:.0f})"
                          for s in index_rss["steps"])
        top = index_rss["steps"][-1]
        goal = "ok" if top["VmHWM"] <= 200 else "ABOVE GOAL"
        print(f"\nindex RSS while filling with SqliteIndex.add (fresh process, {index_rss['base_mb']:.0f} MB after "
              f"open): {steps}; file {index_rss['file_mb']:.0f} MB (goal ≤ 200 MB at 1M: {goal})")
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at end "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
