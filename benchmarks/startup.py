"""Start-up of the engine in a fresh process: import, open, first fingerprint.

Each run is a new interpreter that imports what the pipeline needs (``--engine-only``: only
``scrapy_simhash.Deduplicator``, what the command line and a worker process load), opens a fresh
SQLite index and fingerprints one item, timing each step (wall) and the CPU of all three. The
tables are read from the cache (``~/.cache/scrapy-simhash``; one warm-up run first writes them).
Medians of ``--runs`` runs. ``PYTHONPATH`` chooses the checkout measured (the runs start in a
temporary directory, so the current one is not on their path). The modules' bytecode is cached
as in an installed package (``pip`` compiles it), in a temporary ``PYTHONPYCACHEPREFIX``, even
where ``PYTHONDONTWRITEBYTECODE`` is set (``--no-bytecode-cache``: as the environment says; every
module of the checkout is then compiled at every start).

Run: ``python benchmarks/startup.py --runs 7``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CODE = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from scrapy_simhash import Deduplicator
if sys.argv[2] == "pipeline":
    import scrapy_simhash.scrapy.pipeline  # what Scrapy loads for the pipeline (Scrapy itself included)
t1 = time.perf_counter()
d = Deduplicator.open(sys.argv[1])
t2 = time.perf_counter()
d.fingerprint("北京今日发布暴雨蓝色预警", "北京市气象台今天下午发布暴雨蓝色预警信号，预计夜间有大到暴雨，局地大暴雨。")
t3 = time.perf_counter()
cpu = time.process_time() - c0
d.close()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "first": t3 - t2, "total": t3 - t0, "cpu": cpu}))
"""


def run(kind: str, workdir: Path, n: int, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CODE, f"sqlite:///{workdir / f'start-{n}.sqlite3'}", kind],
                         capture_output=True, text=True, check=True, env=env, cwd=workdir)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--engine-only", action="store_true", help="without importing the pipeline (and Scrapy)")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="keep the environment's PYTHONDONTWRITEBYTECODE / PYTHONPYCACHEPREFIX")
    args = ap.parse_args(argv)
    kind = "engine" if args.engine_only else "pipeline"
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if not args.no_bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        run(kind, Path(tmp), -1, env)  # the tables and the bytecode cached
        runs = [run(kind, Path(tmp), n, env) for n in range(args.runs)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"{kind}: import {med['import']:.3f} s, open {med['open']:.3f} s, first fingerprint {med['first']:.3f} s"
          f" → {med['total']:.3f} s wall, {med['cpu']:.3f} s CPU (medians of {args.runs}"
          f"{', no bytecode cache' if args.no_bytecode_cache else ''}; load "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
