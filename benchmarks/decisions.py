#!/usr/bin/env python3
"""Identical decisions: dump and compare the per-item verdicts of ``scrapy-simhash dedup`` on both backends.

A refactor that should change no verdict is checked here: the real command line of each version
(the ``scrapy-simhash`` console script of a venv, run as a subprocess with ``PYTHONPATH`` removed, so
it judges with the code that venv installs) goes over the same frozen input streams, on SQLite and on
Redis, and every decision record of one version must equal the other's. This file imports nothing of
scrapy_simhash; only the ``streams`` mode runs a checkout's benchmarks (under that checkout's python).

Before/after comparison, from a fresh clone (the "after" tree, its venv active)::

    git worktree add ../before <commit>
    python -m venv ../before-venv && ../before-venv/bin/pip install -e ../before
    python benchmarks/decisions.py streams
    python benchmarks/decisions.py dump --label before --scrapy-simhash ../before-venv/bin/scrapy-simhash
    python benchmarks/decisions.py dump --label after
    python benchmarks/decisions.py compare before after

``compare`` prints ``all identical`` and exits 0 when nothing differs, else exits 1.
``compare after:sqlite after:redis`` compares the two backends of one label.

Modes
-----
``streams`` (once) writes the input streams to ``<out>/streams/`` (``--streams DIR`` elsewhere) with
    the benchmarks of a checkout, run under its python (``--checkout PATH --python PATH``; default:
    this repository and the running python). They are then reused, byte-identical, for every label:

    * ``acc-{zh,en}-{tune,report}``: ``benchmarks/accuracy.py``'s ``build_stream(lang, split,
      --limit 1000, --seed 1, --reposts 3)``, each item as ``{"url": item.key, "title", "body"}`` in
      stream order (the key is unique, so a drop names its original). The labels (cluster, kind,
      recipe, hard, positive, source_key, edit_rate) go to ``<stream>.labels.jsonl`` beside it, one
      line per item, for judging differences; they are not fed.
    * ``audit-<corpus>``: what ``benchmarks/audit.py`` feeds the command for each whole corpus
      (``--corpus``, default ``../shared/corpus`` beside the repository): the records in file order
      that have a non-empty body (the command's body fields), each with one more field
      ``_audit_line`` (its line in the corpus file), run with ``--url-field _audit_line`` exactly as
      audit.py does, so ``url``/``original`` are corpus line numbers.
    * ``audit-reuters21578-all``: the same with audit.py's ``--all-records`` (title-only records too).

    ``streams/manifest.json`` lists each stream: file, extra flags, item count, sha256, source and
    the checkout and commit it was built from. ``dump`` refuses a stream whose sha256 changed.

``dump`` (the default mode) runs, for every stream and backend::

    scrapy-simhash dedup STREAM --index INDEX --decisions OUT.jsonl -o KEPT --no-progress [FLAGS]

    with default settings (FLAGS: only the stream's ``--url-field``; ``--jobs N`` if given), where
    INDEX is ``sqlite:///<fresh file in a fresh temp dir>`` or the Redis URL: by default a
    redis-server this script starts on a free loopback port with ``--appendonly yes --appendfsync
    everysec --save ''`` in a temp dir and stops at the end; with ``--redis-url``, that db, emptied
    (FLUSHDB) before each stream, so give it only a db you can lose. ``--scrapy-simhash`` defaults to
    the console script beside the running python. Writes ``<out>/<label>/<backend>/<stream>.jsonl``
    (the command's own --decisions file, untouched) and ``<stream>.meta.json`` (command, exit code,
    wall seconds, stdout and stderr, version, and the sha256 and line count of the kept output, which
    is then deleted).

``compare A B`` compares two dumps. A and B are ``LABEL`` or ``LABEL:BACKEND``: ``compare before
    after`` compares each backend both have; ``compare before:sqlite before:redis`` compares the two
    backends of one label. Per stream: items, kept/new, drops per tier on each side, the number of
    differing decision records, whether the kept outputs are identical, and the first ``--show``
    differences (with the titles of the items involved, read from the streams when present). The
    streams compared are the manifest's, or, without one, those dumped on either side.

``summary [LABEL …]`` prints the counts and times of each dump (default: every label under ``<out>``).

What is compared, what is stripped
----------------------------------
Each decision record is ``{"line", "url", "status", "tier", "distance", "original", "error"}``;
all of them are compared, matched by ``line``. None of them legitimately differs from run to run:
the ``url``/``original`` values are the stream's own ids (accuracy keys, or corpus line numbers),
not temp paths or times, so :data:`IGNORED_FIELDS` is empty. Only an ``error`` message carrying the
temp dir of its run has that dir replaced by ``<tmp>`` before comparing (see :func:`_normal`).
What does vary run to run lives only in ``.meta.json`` and is never compared as a decision: the wall
time, stdout and stderr (elapsed seconds, items/s, the index location with its temp path or Redis
port), the command line (temp paths, the console script's path). The kept output's sha256 is
compared and reported apart (it depends on the decisions and on how kept items are re-serialized),
and so are the exit codes: a stream differs when its decisions, kept output or exit codes differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
OUT = ROOT / ".decisions"
BACKENDS = ("sqlite", "redis")
TIERS = ("title", "body", "sentence")
#: Decision fields left out of the comparison (none: see the module docstring).
IGNORED_FIELDS: tuple[str, ...] = ()
#: audit.py's corpora (name in the stream → file under the corpus dir).
CORPORA = {
    "newsspider-2016": "zh/newsspider-2016.jsonl.gz",
    "inews-bdci2019": "zh/inews-bdci2019.jsonl.gz",
    "reuters21578": "en/reuters21578.jsonl.gz",
    "bbc-2225": "en/bbc-2225.jsonl.gz",
}
#: Prefix of every temp dir this script makes (recognized in error messages by :func:`_normal`).
TMP_PREFIX = "decisions-"


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH/PYTHONHOME/VIRTUAL_ENV: a venv's script uses its own install."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _streams_dir(args: argparse.Namespace) -> Path:
    return Path(args.streams).resolve() if args.streams else Path(args.out).resolve() / "streams"


# ------------------------------------------------------------------------------------------------
# streams
# ------------------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cmd_streams(args: argparse.Namespace) -> int:
    """Re-run this file under the checkout's python to build the streams with its benchmarks."""
    streams = _streams_dir(args)
    manifest = streams / "manifest.json"
    built = set(json.loads(manifest.read_text())) if manifest.exists() else set()
    wanted = set(filter(None, args.only.split(","))) or built
    if wanted & built and not args.force:
        print(f"already built, frozen: {sorted(wanted & built)} (--force to rebuild)", file=sys.stderr)
        return 2
    streams.mkdir(parents=True, exist_ok=True)
    cmd = [args.python, str(Path(__file__).resolve()), "_build", "--checkout", str(Path(args.checkout).resolve()),
           "--streams", str(streams), "--corpus", str(Path(args.corpus).resolve()), "--limit", str(args.limit),
           "--reposts", str(args.reposts), "--seed", str(args.seed), "--only", args.only]
    if args.nice:
        cmd = ["nice", "-n", str(args.nice), *cmd]
    print("$ " + " ".join(cmd), file=sys.stderr)
    return subprocess.call(cmd, env=_clean_env())


def _build(args: argparse.Namespace) -> int:
    """(internal, under the checkout's python) write the streams with its benchmarks' own code."""
    checkout = Path(args.checkout).resolve()
    sys.path[:0] = [str(checkout), str(checkout / "benchmarks")]
    import accuracy  # the checkout's benchmarks
    import audit

    streams = Path(args.streams)
    corpus = Path(args.corpus)
    manifest_path = streams / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    only = set(filter(None, args.only.split(",")))

    def record(name: str, path: Path, flags: list[str], items: int, source: str, seconds: float) -> None:
        manifest[name] = {"file": path.name, "flags": flags, "items": items, "sha256": _sha256(path),
                          "source": source, "built_from": f"{checkout} @ {commit}",
                          "build_seconds": round(seconds, 1)}
        manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        print(f"{name}: {items:,} items ({seconds:.0f} s)", file=sys.stderr)

    for lang in ("zh", "en"):
        for split in ("tune", "report"):
            name = f"acc-{lang}-{split}"
            if only and name not in only:
                continue
            t0 = time.perf_counter()
            stream = accuracy.build_stream(lang, split, args.limit, args.seed, args.reposts, corpus)
            path = streams / f"{name}.jsonl"
            with path.open("w", encoding="utf-8") as f, \
                    (streams / f"{name}.labels.jsonl").open("w", encoding="utf-8") as lab:
                for it in stream.items:
                    f.write(json.dumps({"url": it.key, "title": it.title, "body": it.body}, ensure_ascii=False)
                            + "\n")
                    lab.write(json.dumps({"url": it.key, "cluster": it.cluster, "kind": it.kind,
                                          "recipe": it.recipe, "hard": it.hard, "positive": it.positive,
                                          "source_key": it.source_key, "edit_rate": it.edit_rate},
                                         ensure_ascii=False) + "\n")
            (streams / f"{name}.info.json").write_text(json.dumps(stream.info, indent=1, ensure_ascii=False,
                                                                  default=str) + "\n")
            record(name, path, [], len(stream.items),
                   f"benchmarks/accuracy.py build_stream({lang!r}, {split!r}, limit={args.limit}, "
                   f"seed={args.seed}, reposts={args.reposts})", time.perf_counter() - t0)

    body_fields = [audit.D.BODY_FIELD] if isinstance(audit.D.BODY_FIELD, str) else list(audit.D.BODY_FIELD)
    for corpus_name, rel in CORPORA.items():
        for all_records in (False, True):
            if all_records and corpus_name != "reuters21578":
                continue
            name = f"audit-{corpus_name}" + ("-all" if all_records else "")
            if only and name not in only:
                continue
            t0 = time.perf_counter()
            records = list(audit.read_jsonl(corpus / rel))
            fed = [(n, r) for n, r in enumerate(records, 1) if all_records or audit.has_body(r, body_fields)]
            path = streams / f"{name}.jsonl"
            with path.open("w", encoding="utf-8") as f:  # exactly as audit.audit() writes its input
                f.writelines(json.dumps({**r, audit.REF_FIELD: str(n)}, ensure_ascii=False) + "\n" for n, r in fed)
            record(name, path, ["--url-field", audit.REF_FIELD], len(fed),
                   f"benchmarks/audit.py feeding of {rel}" + (" with --all-records" if all_records else "")
                   + f" ({len(records):,} records)", time.perf_counter() - t0)
    return 0


def load_manifest(streams: Path, required: bool = True) -> dict[str, Any]:
    """The streams' manifest; without one, an error (``required``) or an empty dict."""
    path = streams / "manifest.json"
    if not path.exists():
        if not required:
            return {}
        raise SystemExit(f"no {path}: run '{Path(__file__).name} streams' first (or give --streams DIR)")
    manifest: dict[str, Any] = json.loads(path.read_text())
    return manifest


# ------------------------------------------------------------------------------------------------
# A minimal Redis client (RESP over a socket): FLUSHDB and PING only, no redis package needed
# ------------------------------------------------------------------------------------------------


def _redis_call(url: str, *commands: list[str]) -> list[object]:
    parts = urlsplit(url)
    db = (parts.path or "/0").strip("/") or "0"
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=30) as s:
        f = s.makefile("rb")
        prelude = []
        if parts.password is not None:
            prelude.append(["AUTH", *([unquote(parts.username)] if parts.username else []), unquote(parts.password)])
        prelude.append(["SELECT", db])
        out: list[object] = []
        for cmd in [*prelude, *commands]:
            s.sendall(f"*{len(cmd)}\r\n".encode() + b"".join(
                f"${len(a.encode())}\r\n".encode() + a.encode() + b"\r\n" for a in cmd))
            line = f.readline()
            kind, rest = line[:1], line[1:].rstrip(b"\r\n")
            if kind == b"-":
                raise RuntimeError(f"redis {cmd[0]}: {rest.decode()}")
            if kind == b"$":
                n = int(rest)
                out.append(None if n < 0 else f.read(n + 2)[:-2].decode())
            else:
                out.append(rest.decode())
        return out[len(prelude):]


class OwnRedis:
    """A redis-server on a free loopback port in a temp dir, persisting as the index demands."""

    def __init__(self, binary: str = "redis-server") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=TMP_PREFIX + "redis-"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
             "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        for _ in range(100):
            try:
                _redis_call(self.url, ["PING"])
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise SystemExit(f"redis-server did not answer on port {self.port} (see {self.dir}/redis.log)")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# dump
# ------------------------------------------------------------------------------------------------


def run_one(exe: str, stream: Path, flags: list[str], index: str, out: Path, tmp: Path, nice: int) -> dict[str, Any]:
    """Run the command once over ``stream``; its decisions go to ``out``, the rest into the returned meta."""
    kept = tmp / "kept.jsonl"
    cmd = [exe, "dedup", str(stream), "--index", index, "--decisions", str(out), "-o", str(kept), "--no-progress",
           *flags]
    t0 = time.perf_counter()
    done = subprocess.run(["nice", "-n", str(nice), *cmd] if nice else cmd, capture_output=True, text=True,
                          env=_clean_env(), stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    meta: dict[str, Any] = {"command": cmd, "exit": done.returncode, "seconds": round(seconds, 2),
                            "stderr": done.stderr.strip(), "stdout": done.stdout.strip()}
    if kept.exists():
        with kept.open("rb") as f:
            meta["kept_lines"] = sum(1 for _ in f)
        meta["kept_sha256"] = _sha256(kept)
        kept.unlink()
    return meta


def _check_label(label: str) -> str:
    if not label or label == "streams" or any(c in label for c in "/:\\") or label.startswith("."):
        raise SystemExit(f"not a usable label: {label!r} (no '/', ':', leading '.', nor 'streams')")
    return label


def cmd_dump(args: argparse.Namespace) -> int:
    """Run the command over every stream (or ``--stream``) on each backend; exit 1 if a run failed."""
    label = _check_label(args.label)
    exe = str(Path(args.scrapy_simhash).absolute())
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"not an executable: {exe}")
    streams = _streams_dir(args)
    manifest = load_manifest(streams)
    names = [n for n in manifest if not args.stream or n in args.stream]
    if args.stream and set(args.stream) - set(names):
        raise SystemExit(f"unknown stream(s): {sorted(set(args.stream) - set(names))}; known: {list(manifest)}")
    backends = [b for b in args.backend.split(",") if b]
    if set(backends) - set(BACKENDS):
        raise SystemExit(f"unknown backend(s): {sorted(set(backends) - set(BACKENDS))}; known: {list(BACKENDS)}")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, env=_clean_env()).stdout.strip()
    out_dir = Path(args.out).resolve()
    own = None
    redis_url = args.redis_url
    failures = 0
    try:
        if "redis" in backends and not redis_url:
            own = OwnRedis(args.redis_server)
            redis_url = own.url
            print(f"started redis-server on {redis_url} (dir {own.dir}, pid {own.proc.pid})", file=sys.stderr)
        totals: Counter[str] = Counter()
        for backend in backends:
            dest = out_dir / label / backend
            dest.mkdir(parents=True, exist_ok=True)
            for name in names:
                entry = manifest[name]
                stream = streams / entry["file"]
                if _sha256(stream) != entry["sha256"]:
                    raise SystemExit(f"{stream} no longer matches its sha256 in the manifest")
                with tempfile.TemporaryDirectory(prefix=TMP_PREFIX, dir=args.tmp) as tmp_name:
                    tmp = Path(tmp_name)
                    if backend == "sqlite":
                        index = "sqlite:///" + str(tmp / "index.sqlite3")
                    else:
                        _redis_call(redis_url, ["FLUSHDB"])
                        index = redis_url
                    out = dest / f"{name}.jsonl"
                    flags = [*entry["flags"], *(["--jobs", str(args.jobs)] if args.jobs != 1 else [])]
                    meta = run_one(exe, stream, flags, index, out, tmp, args.nice)
                meta.update(label=label, backend=backend, stream=name, stream_sha256=entry["sha256"],
                            version=version, scrapy_simhash=exe,
                            finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
                (dest / f"{name}.meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
                totals[backend] += meta["seconds"]
                counts = _counts(_read(out)) if out.exists() else None
                status = "ok" if meta["exit"] == 0 else f"EXIT {meta['exit']}"
                failures += meta["exit"] != 0
                print(f"{label}/{backend}/{name}: {status} in {meta['seconds']:.1f} s  {_fmt_counts(counts)}",
                      file=sys.stderr)
                if meta["exit"] != 0:
                    print("  " + meta["stderr"].replace("\n", "\n  "), file=sys.stderr)
        for backend in backends:
            print(f"{label}/{backend}: {totals[backend]:.1f} s in the command", file=sys.stderr)
    finally:
        if own is not None:
            own.stop()
    return 1 if failures else 0


# ------------------------------------------------------------------------------------------------
# compare
# ------------------------------------------------------------------------------------------------


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _counts(records: list[dict[str, Any]]) -> Counter[str]:
    c: Counter[str] = Counter(items=len(records))
    for r in records:
        c[r["status"]] += 1
        if r["status"] in ("duplicate", "flagged"):
            c["drop:" + str(r["tier"])] += 1
    return c


def _fmt_counts(c: Counter[str] | None) -> str:
    if c is None:
        return "(no decisions)"
    drops = sum(c["drop:" + t] for t in TIERS)
    extra = "".join(f", {k} {c[k]:,}" for k in ("skipped", "error", "flagged") if c[k])
    return (f"items {c['items']:,}, new {c['new']:,}, drops {drops:,} (title {c['drop:title']:,} / body "
            f"{c['drop:body']:,} / sentence {c['drop:sentence']:,}){extra}")


def _normal(record: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The record as compared: IGNORED_FIELDS removed, the run's temp dir in an error message made ``<tmp>``."""
    out = {k: v for k, v in record.items() if k not in IGNORED_FIELDS}
    if isinstance(out.get("error"), str):
        for arg in meta.get("command", []):
            if isinstance(arg, str) and arg.startswith(("/", "sqlite:///")) and TMP_PREFIX in arg:
                tmp = arg.removeprefix("sqlite:///").rsplit("/", 1)[0]
                out["error"] = out["error"].replace(tmp, "<tmp>")
    return out


def _spec(text: str) -> tuple[str, str | None]:
    label, _, backend = text.partition(":")
    return label, backend or None


def _titles(stream_file: Path, lines: set[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    if not stream_file.exists():
        return out
    with stream_file.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if n in lines:
                try:
                    out[n] = str(json.loads(line).get("title") or "")[:60]
                except ValueError:
                    out[n] = "?"
    return out


_URL_INDEX: dict[Path, dict[str, int]] = {}


def _line_of(stream_file: Path, url: object) -> int | None:
    """The stream line of an ``original`` value: a corpus line number (``_audit_line``) or an accuracy key."""
    if url is None or not stream_file.exists():
        return None
    index = _URL_INDEX.get(stream_file)
    if index is None:
        index = {}
        with stream_file.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                key = item.get("_audit_line") or item.get("url")
                if key is not None:
                    index[str(key)] = n
        _URL_INDEX[stream_file] = index
    return index.get(str(url))


def _dumped(*dirs: Path) -> list[str]:
    """The stream names with a decisions file in any of ``dirs``."""
    return sorted({p.name.removesuffix(".jsonl") for d in dirs if d.is_dir() for p in d.glob("*.jsonl")})


def _show_differences(stream_file: Path, diff: list[int], show: int, sides: list[tuple[str, dict[int, Any]]]) -> None:
    shown = diff[:show]
    wanted = set(shown)
    for n in shown:
        for _, by_line in sides:
            ln = _line_of(stream_file, (by_line.get(n) or {}).get("original"))
            if ln:
                wanted.add(ln)
    titles = _titles(stream_file, wanted)
    for n in shown:
        print(f"  line {n} '{titles.get(n, '')}'")
        for side, by_line in sides:
            rec = by_line.get(n)
            if rec is None:
                print(f"    {side}: (no record)")
                continue
            ln = _line_of(stream_file, rec.get("original"))
            orig = f" ← line {ln} '{titles.get(ln, '')}'" if ln else ""
            print(f"    {side}: {rec['status']} {rec['tier'] or ''} d={rec['distance']} "
                  f"original={rec['original']}{orig}" + (f" error={rec['error']}" if rec.get("error") else ""))
    if len(diff) > len(shown):
        print(f"  … {len(diff) - len(shown):,} more (--show N)")


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare two dumps stream by stream; exit 1 if any stream differs or is missing on one side."""
    out_dir = Path(args.out).resolve()
    (la, ba), (lb, bb) = _spec(args.a), _spec(args.b)
    if (ba is None) != (bb is None):
        raise SystemExit("give a backend on both sides (LABEL:BACKEND) or on neither")
    pairs = [(ba, bb)] if ba is not None and bb is not None else \
        [(b, b) for b in BACKENDS if (out_dir / la / b).is_dir() and (out_dir / lb / b).is_dir()]
    if not pairs:
        raise SystemExit(f"nothing to compare: no backend dumped under both {out_dir / la} and {out_dir / lb}")
    streams = _streams_dir(args)
    manifest = load_manifest(streams, required=False)
    differing = 0
    for side_a, side_b in pairs:
        da, db = out_dir / la / side_a, out_dir / lb / side_b
        for d in (da, db):
            if not d.is_dir():
                raise SystemExit(f"no dump at {d}")
        print(f"== {la}:{side_a} vs {lb}:{side_b}")
        for name in list(manifest) or _dumped(da, db):
            fa, fb = da / f"{name}.jsonl", db / f"{name}.jsonl"
            if not fa.exists() or not fb.exists():
                print(f"{name}: missing on {'the left' if not fa.exists() else 'the right'}")
                differing += 1
                continue
            ma = json.loads((da / f"{name}.meta.json").read_text())
            mb = json.loads((db / f"{name}.meta.json").read_text())
            ra, rb = _read(fa), _read(fb)
            ca, cb = _counts(ra), _counts(rb)
            by_a = {r["line"]: _normal(r, ma) for r in ra}
            by_b = {r["line"]: _normal(r, mb) for r in rb}
            diff = sorted(n for n in by_a.keys() | by_b.keys() if by_a.get(n) != by_b.get(n))
            repeated = len(by_a) != len(ra) or len(by_b) != len(rb)  # a line decided twice
            if repeated and not diff:
                diff = sorted({n for n in by_a} | {n for n in by_b})
            same_kept = ma.get("kept_sha256") == mb.get("kept_sha256")
            exits = "" if ma["exit"] == mb["exit"] == 0 else f"  exit codes {ma['exit']} / {mb['exit']}"
            verdict = "IDENTICAL" if not diff and same_kept and not exits else f"{len(diff):,} DIFFERING decisions"
            differing += bool(diff) or not same_kept or bool(exits)
            print(f"{name}: {verdict}; kept output {'identical' if same_kept else 'DIFFERS'}; "
                  f"{ma['seconds']:.1f} s / {mb['seconds']:.1f} s{exits}")
            print(f"  {la}:{side_a}  {_fmt_counts(ca)}")
            if ca != cb:
                print(f"  {lb}:{side_b}  {_fmt_counts(cb)}")
            if diff:
                stream_file = streams / manifest.get(name, {}).get("file", f"{name}.jsonl")
                _show_differences(stream_file, diff, args.show, [(f"{la}:{side_a}", by_a), (f"{lb}:{side_b}", by_b)])
    print(f"\n{'all identical' if not differing else f'{differing} stream(s) differ'}")
    return 1 if differing else 0


def cmd_summary(args: argparse.Namespace) -> int:
    """Print the counts and command times of each dump."""
    out_dir = Path(args.out).resolve()
    manifest = load_manifest(_streams_dir(args), required=False)
    labels = args.label
    if not labels and out_dir.is_dir():
        labels = sorted(p.name for p in out_dir.iterdir()
                        if p.is_dir() and p.name != "streams" and any((p / b).is_dir() for b in BACKENDS))
    if not labels:
        raise SystemExit(f"no dump under {out_dir}")
    for label in labels:
        for backend in BACKENDS:
            d = out_dir / label / backend
            if not d.is_dir():
                continue
            total = 0.0
            print(f"== {label}:{backend}")
            for name in list(manifest) or _dumped(d):
                f = d / f"{name}.jsonl"
                if not f.exists():
                    continue
                meta = json.loads((d / f"{name}.meta.json").read_text())
                total += meta["seconds"]
                status = "" if meta["exit"] == 0 else f"  EXIT {meta['exit']}"
                print(f"{name:24} {meta['seconds']:7.1f} s  {_fmt_counts(_counts(_read(f)))}{status}")
            print(f"{'total':24} {total:7.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["dump", *argv]  # the default mode
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="examples:\n"
                                        "  decisions.py streams\n"
                                        "  decisions.py dump --label before "
                                        "--scrapy-simhash ../before-venv/bin/scrapy-simhash\n"
                                        "  decisions.py dump --label after\n"
                                        "  decisions.py compare before after\n"
                                        "  decisions.py compare after:sqlite after:redis\n"
                                        "  decisions.py summary")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", default=str(OUT), metavar="DIR",
                        help=f"holds <label>/<backend>/ dumps and streams/ (default: {OUT})")
    common.add_argument("--streams", metavar="DIR", help="the streams and their manifest (default: <out>/streams)")
    sub = ap.add_subparsers(dest="mode", required=True, metavar="{streams,dump,compare,summary}")

    p = sub.add_parser("streams", parents=[common], help="write the input streams once (with a checkout's benchmarks)")
    p.add_argument("--python", default=sys.executable, help="the checkout's python (default: this one)")
    p.add_argument("--checkout", default=str(ROOT), help="whose benchmarks build the streams (default: this repo)")
    p.add_argument("--corpus", default=str(CORPUS), help=f"default: {CORPUS}")
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--reposts", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", default="", help="comma-separated stream names (default: all)")
    p.add_argument("--nice", type=int, default=10, help="niceness of the build (0: none)")
    p.add_argument("--force", action="store_true", help="rebuild even though manifest.json exists")

    p = sub.add_parser("_build", parents=[common])  # internal: no help, so not listed
    for opt in ("--checkout", "--corpus", "--only"):
        p.add_argument(opt, default="")
    for opt in ("--limit", "--reposts", "--seed"):
        p.add_argument(opt, type=int)

    p = sub.add_parser("dump", parents=[common],
                       help="run the command over every stream and keep its decisions (default mode)")
    p.add_argument("--scrapy-simhash", default=str(Path(sys.executable).parent / "scrapy-simhash"), metavar="PATH",
                   help="the console script of the version judged (default: the one beside this python)")
    p.add_argument("--label", required=True, help="before | after | …")
    p.add_argument("--backend", default="sqlite,redis", help="comma-separated: sqlite,redis")
    p.add_argument("--redis-url", help="a Redis db that may be FLUSHed (default: start our own server)")
    p.add_argument("--redis-server", default="redis-server", help="binary used when starting our own server")
    p.add_argument("--stream", action="append", help="only this stream (repeatable)")
    p.add_argument("--tmp", help="parent of the temp dirs (SQLite index, kept output); default: $TMPDIR or /tmp")
    p.add_argument("--nice", type=int, default=10, help="niceness of the command (0: none)")
    p.add_argument("--jobs", type=int, default=1,
                   help="the command's --jobs (default 1, its default; e.g. --jobs 2 --label after-j2)")

    p = sub.add_parser("compare", parents=[common],
                       help="compare two dumps: LABEL LABEL or LABEL:BACKEND LABEL:BACKEND")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--show", type=int, default=5, help="differences shown per stream")

    p = sub.add_parser("summary", parents=[common], help="counts and times of each dump")
    p.add_argument("label", nargs="*", help="default: every label under --out")

    args = ap.parse_args(argv)
    modes = {"streams": cmd_streams, "_build": _build, "dump": cmd_dump, "compare": cmd_compare,
             "summary": cmd_summary}
    return modes[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
