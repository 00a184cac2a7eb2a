"""Every field of every item's fingerprints, one JSON line each, to compare two versions of the engine.

A speed change must not change a decision, so it must not change a fingerprint or a signature. Run
this with each version (``PYTHONPATH`` pointing at each checkout) and compare the files byte for
byte (``cmp a.jl b.jl``):

    PYTHONPATH=/path/to/main python benchmarks/fingerprint_dump.py -o main.jl
    PYTHONPATH=$PWD python benchmarks/fingerprint_dump.py -o branch.jl
    SCRAPY_SIMHASH_PURE_PYTHON=1 PYTHONPATH=$PWD python benchmarks/fingerprint_dump.py -o fallback.jl

Items: the first ``--limit`` articles of each text corpus (zh: inews and NewsSpider; en: Reuters and
BBC) and every HTML page under ``../shared/corpus/html`` (as bytes, and decoded to text as a spider's
``response.text`` would be), each under several configurations (the defaults, 32 and 128 bits,
``tf="log"``, no share cap, ``main_content=True``, a ``top_k`` of 8).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
TEXTS = ("zh/inews-bdci2019.jsonl.gz", "zh/newsspider-2016.jsonl.gz", "en/reuters21578.jsonl.gz",
         "en/bbc-2225.jsonl.gz")
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "bits32": {"bits": 32},
    "bits128": {"bits": 128},
    "tf-log": {"tf": "log"},
    "no-cap": {"max_share": None},
    "main-content": {"main_content": True},
    "top8": {"top_k": 8},
}


def items(limit: int) -> Iterator[tuple[str, Any, Any]]:
    """``(id, title, body)`` of every item compared."""
    for name in TEXTS:
        with gzip.open(CORPUS / name, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f):
                if n >= limit:
                    break
                rec = json.loads(line)
                yield f"{name}:{n}", rec.get("title"), rec.get("body")
    for path in sorted(CORPUS.glob("html/**/*.htm*")):
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        name = str(path.relative_to(CORPUS))
        yield f"{name}:bytes", path.stem, raw
        yield f"{name}:text", path.stem, raw.decode("utf-8", "replace")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=1500, help="articles per text corpus (default 1500)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list of {', '.join(CONFIGS)}")
    ap.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    args = ap.parse_args(argv)
    if not CORPUS.is_dir():
        print(f"corpus missing: {CORPUS} (needs ../shared/corpus next to the repo)", file=sys.stderr)
        return 2
    from scrapy_simhash import Fingerprinter
    from scrapy_simhash.fingerprint.fingerprinter import UnreadableField

    corpus = list(items(args.limit))
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")  # noqa: SIM115
    try:
        for config in args.configs.split(","):
            fp = Fingerprinter(**CONFIGS[config])
            for key, title, body in corpus:
                try:
                    record: dict[str, Any] = asdict(fp.fingerprint(title, body))
                except UnreadableField as exc:
                    record = {"error": f"{exc.part}: {exc}"}
                out.write(json.dumps({"config": config, "item": key, **record}, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
