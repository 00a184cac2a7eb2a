"""Do two checkouts normalize and fingerprint every real text the same way?

For every record of the four corpora in ``../shared/corpus/{zh,en}/*.jsonl.gz`` and every HTML
page under ``../shared/corpus/html/`` (raw bytes, title from its ``<title>``), this computes
``normalize_title``, ``normalize_body``, ``normalize_text``, ``main_text`` and
``Fingerprinter().fingerprint(title, body)`` (pages also with ``main_content=True``), once with
this checkout's package and once with another checkout's (each in its own process), and counts the
outputs that differ. Meant for changes that should not change any output (a pattern of
``scrapy_simhash/text/normalize.py`` rewritten, a faster route)::

    git worktree add /tmp/base main
    python benchmarks/normalize_diff.py --base /tmp/base            # every record (~10 min, 1 core)
    python benchmarks/normalize_diff.py --base /tmp/base --limit 3000

Exits 1 when any output differs, and lists the first differences.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
JSONL = ("zh/newsspider-2016.jsonl.gz", "zh/inews-bdci2019.jsonl.gz", "en/bbc-2225.jsonl.gz",
         "en/reuters21578.jsonl.gz")


def records(limit: int | None) -> Iterator[tuple[str, Any, Any]]:
    """``(key, title, body)``: corpus records (text), then HTML pages (bytes)."""
    import lxml.etree
    import lxml.html

    for relative in JSONL:
        with gzip.open(CORPUS / relative, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f):
                if limit is not None and n >= limit:
                    break
                doc = json.loads(line)
                yield f"{relative}:{n}", doc.get("title") or "", doc.get("body") or ""
    for path in sorted((CORPUS / "html").rglob("*")):
        name = path.name
        if not (name.endswith((".html", ".html.gz", ".htm", ".dat"))):
            continue
        raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
        try:
            title = lxml.html.document_fromstring(raw).findtext(".//title") or ""
        except (ValueError, lxml.etree.ParserError):
            title = ""
        yield str(path.relative_to(CORPUS)), title, raw


def digest(limit: int | None, out: Path) -> None:
    """Write ``key<TAB>output name<TAB>sha256 of repr(output)`` for every record."""
    import scrapy_simhash
    from scrapy_simhash import Fingerprinter
    from scrapy_simhash.text.normalize import main_text, normalize_body, normalize_text, normalize_title

    print(f"  {scrapy_simhash.__file__}", file=sys.stderr)
    plain, main = Fingerprinter(), Fingerprinter(main_content=True)
    with open(out, "w", encoding="utf-8") as f:
        for key, title, body in records(limit):
            outputs: dict[str, Any] = {
                "normalize_title": normalize_title(title),
                "normalize_body": normalize_body(body),
                "main_text": main_text(body),
                "fingerprint": plain.fingerprint(title, body),
            }
            if isinstance(body, str):
                outputs["normalize_text"] = normalize_text(body)
            else:
                outputs["fingerprint_main_content"] = main.fingerprint(title, body)
            for name, value in outputs.items():
                f.write(f"{key}\t{name}\t{hashlib.sha256(repr(value).encode('utf-8', 'surrogatepass')).hexdigest()}\n")


def run_side(code: Path, limit: int | None, out: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(code))
    cmd = [sys.executable, __file__, "--digest-to", str(out)] + ([] if limit is None else ["--limit", str(limit)])
    started = time.monotonic()
    subprocess.run(cmd, env=env, check=True, cwd=code)
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="the other checkout (e.g. a worktree of main)")
    ap.add_argument("--limit", type=int, help="first N records of each JSONL corpus (default: all)")
    ap.add_argument("--digest-to", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.digest_to:
        digest(args.limit, args.digest_to)
        return 0
    if args.base is None:
        ap.error("--base is required")
    if not all((CORPUS / r).exists() for r in JSONL):
        print(f"skipped: needs the shared corpus under {CORPUS}")
        return 0
    with tempfile.TemporaryDirectory(prefix="simhash-normdiff-") as tmp:
        sides = {}
        for label, code in (("this", REPO), ("base", args.base.resolve())):
            out = Path(tmp) / f"{label}.tsv"
            print(f"{label}: {code} ({run_side(code, args.limit, out):.0f} s)")
            sides[label] = out.read_text("utf-8").splitlines()
    this, base = sides["this"], sides["base"]
    if len(this) != len(base):
        print(f"DIFFERENT record counts: {len(this)} vs {len(base)} outputs")
        return 1
    diffs = [a.rsplit("\t", 1)[0] for a, b in zip(this, base, strict=True) if a != b]
    per_name: dict[str, int] = {}
    for line in this:
        name = line.split("\t")[1]
        per_name[name] = per_name.get(name, 0) + 1
    keys = {line.split("\t")[0] for line in this}
    print(f"{len(keys)} records, {len(this)} outputs ({', '.join(f'{k} {v}' for k, v in per_name.items())}): "
          f"{len(diffs)} differ")
    for d in diffs[:20]:
        print(f"  differs: {d}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
