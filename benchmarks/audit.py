"""Real-crawl audit: ``scrapy-simhash dedup`` over whole corpora, then how much text each drop shares.

No labels and no tuning target: it measures what the default settings do to real data. Each corpus
(``../shared/corpus``: zh/newsspider-2016, zh/inews-bdci2019, en/reuters21578, en/bbc-2225, and
any JSON-lines file named on the command line) goes through the real command,
``scrapy-simhash dedup FILE --index <fresh temporary SQLite> --decisions …`` (its ``main()``, in
this process), in file order, with default settings unless ``--option`` says otherwise. The items
fed are the records with a non-empty body (the audit judges bodies; ``--all-records`` feeds
title-only records too: Reuters has 2,535 of them, and they add title drops). Then for every drop,
the *containment* of the two bodies: character 5-grams of each body with HTML tags and all
whitespace removed, shared 5-grams divided by the size of the smaller set. A drop whose
containment is below 0.15 is a different text by any reading; each is printed with both titles,
lines, URLs or ids, tier and distance so that a reader can judge it. A drop where one side has
under 5 characters of body has no containment: counted and printed apart. The table also counts
the drops with containment ≥ 0.5, clearly the same text: a change that removes bad drops should
keep those.

``--option key=value`` (repeatable, the value read as a Python literal as in ``accuracy.py``):
an option the command line has a flag for becomes that flag (``sentences_shared=50`` →
``--sentences-shared 50``, ``main_content=True`` → ``--main-content``); any other option is a
:class:`~scrapy_simhash.fingerprint.fingerprinter.Fingerprinter` keyword (``tf=log``, ``max_share=0.05``) and is
added to the options the command builds its Fingerprinter with. Each item goes in with one more
field, its line in the file, given to the command as ``--url-field``, so that every decision names
the line of its original; URLs take no part in the rule.

Run: ``python benchmarks/audit.py`` (all four corpora, ≈ 45 s on an idle core), ``--corpus
newsspider,bbc``, ``--limit 500`` (first lines of each file only, for quick runs), ``--json FILE``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from options import parse_options  # noqa: E402

from scrapy_simhash import cli  # noqa: E402
from scrapy_simhash import defaults as D  # noqa: E402
from scrapy_simhash.cli import dedup as cli_dedup  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
CORPORA = {
    "newsspider": "zh/newsspider-2016.jsonl.gz",
    "inews": "zh/inews-bdci2019.jsonl.gz",
    "reuters": "en/reuters21578.jsonl.gz",
    "bbc": "en/bbc-2225.jsonl.gz",
}
LOW = 0.15
SAME = 0.5
TIERS = ("title", "body", "sentence")
#: The field through which each decision names its item and original: the line in the audited file.
REF_FIELD = "_audit_line"
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSON-lines file (gzip or plain); a bad line is an empty record (the command skips it)."""
    with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")) as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = {}
            yield record if isinstance(record, dict) else {}


def pick(record: dict[str, Any], names: Sequence[str]) -> Any:
    """The first non-empty field of ``names`` (as the command picks it)."""
    for name in names:
        value = record.get(name)
        if value not in (None, "", [], {}):
            return value
    return None


def body_text(body: Any) -> str:
    """A body with HTML tags and all whitespace removed (a list of paragraphs is joined)."""
    if isinstance(body, list):
        body = "".join(x for x in body if isinstance(x, str))
    if not isinstance(body, str):
        return ""
    return _SPACE.sub("", _TAG.sub("", body))


def grams(text: str, n: int = 5) -> set[str]:
    return {text[i : i + n] for i in range(len(text) - n + 1)}


def containment(a: set[str], b: set[str]) -> float | None:
    """Shared 5-grams / the smaller set; None when either side has no 5-gram."""
    if not a or not b:
        return None
    return len(a & b) / min(len(a), len(b))


# ---------------------------------------------------------------------------------------------
# Running the command
# ---------------------------------------------------------------------------------------------


def _dedup_flags() -> dict[str, argparse.Action]:
    """Option dest → argparse action of ``scrapy-simhash dedup``."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in sub.choices["dedup"]._actions if a.option_strings}


def command_args(options: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """``--option``s as command-line flags, and the rest (extra Fingerprinter keywords)."""
    flags, extra = [], {}
    known = _dedup_flags()
    for key, value in options.items():
        action = known.get(key)
        if action is None:
            extra[key] = value
            continue
        flag = max((o for o in action.option_strings if not o.startswith("--no-")), key=len)
        if isinstance(action, argparse.BooleanOptionalAction):
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (list, tuple)):
            for v in value:
                flags += [flag, str(v)]
        else:
            flags += [flag, str(value)]
    return flags, extra


@contextlib.contextmanager
def extra_fingerprinter_options(extra: dict[str, Any]) -> Iterator[None]:
    """Let the command build its Fingerprinter with ``extra`` keywords it has no flag for."""
    if not extra:
        yield
        return
    original = cli_dedup.fingerprinter_options
    cli_dedup.fingerprinter_options = lambda args: {**original(args), **extra}  # type: ignore[assignment]
    try:
        yield
    finally:
        cli_dedup.fingerprinter_options = original


def run_dedup(path: Path, flags: list[str], extra: dict[str, Any], tmp: Path, jobs: int) -> tuple[list[dict], str]:
    """Decisions of ``scrapy-simhash dedup`` over ``path`` on a fresh index, and its summary."""
    index = tmp / "index.sqlite3"
    decisions = tmp / "decisions.jsonl"
    argv = ["dedup", str(path), "--index", str(index), "--decisions", str(decisions), "--url-field", REF_FIELD,
            "--jobs", str(jobs), "--no-progress", "-q", *flags]
    err = io.StringIO()
    with extra_fingerprinter_options(extra), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exc:  # argparse: a bad flag
            status = exc.code
    if status != 0:
        raise SystemExit(f"scrapy-simhash dedup failed ({status}): {err.getvalue().strip()}")
    with decisions.open(encoding="utf-8") as f:
        out = [json.loads(line) for line in f]
    return out, err.getvalue().strip()


# ---------------------------------------------------------------------------------------------
# The audit
# ---------------------------------------------------------------------------------------------


@dataclass
class Drop:
    tier: str
    distance: int | None
    containment: float | None
    line: int
    id: str
    title: str
    original_line: int
    original_id: str
    original_title: str


@dataclass
class Audit:
    corpus: str
    records: int
    with_body: int
    fed: int  # items given to the command
    drops: dict[str, int] = field(default_factory=dict)
    low: dict[str, int] = field(default_factory=dict)
    no_body: list[Drop] = field(default_factory=list)  # a side with < 5 characters of body: no containment
    same_text: int = 0  # drops with containment ≥ SAME: clearly the same text (what a change must keep)
    seconds: float = 0.0
    summary: str = ""
    low_drops: list[Drop] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.drops.values())

    @property
    def total_low(self) -> int:
        return sum(self.low.values())


def has_body(record: dict[str, Any], body_fields: Sequence[str]) -> bool:
    body = pick(record, body_fields)
    if isinstance(body, list):
        return any(isinstance(x, str) and x.strip() for x in body)
    return isinstance(body, str) and bool(body.strip())


def audit(
    name: str, path: Path, flags: list[str], extra: dict[str, Any], limit: int | None, jobs: int,
    all_records: bool = False,
) -> Audit:
    """Dedup the file's items with a body (every record with ``all_records``) and judge every drop."""
    title_fields = [D.TITLE_FIELD] if isinstance(D.TITLE_FIELD, str) else list(D.TITLE_FIELD)
    body_fields = [D.BODY_FIELD] if isinstance(D.BODY_FIELD, str) else list(D.BODY_FIELD)
    id_fields = ["url", "id"]
    records = list(read_jsonl(path))[:limit]
    fed = [(n, r) for n, r in enumerate(records, 1) if all_records or has_body(r, body_fields)]
    with tempfile.TemporaryDirectory(prefix="simhash-audit-") as tmp_name:
        tmp = Path(tmp_name)
        source = tmp / "input.jsonl"
        with source.open("w", encoding="utf-8") as f:  # each item names its line of the file: REF_FIELD
            f.writelines(json.dumps({**r, REF_FIELD: str(n)}, ensure_ascii=False) + "\n" for n, r in fed)
        t0 = time.perf_counter()
        decisions, summary = run_dedup(source, flags, extra, tmp, jobs)
        seconds = time.perf_counter() - t0
    by_line = dict(fed)
    result = Audit(name, len(records), sum(1 for r in records if has_body(r, body_fields)), len(fed),
                   drops=dict.fromkeys(TIERS, 0), low=dict.fromkeys(TIERS, 0), seconds=seconds, summary=summary)
    for d in decisions:
        if d["status"] not in ("duplicate", "flagged"):
            continue
        tier = d["tier"]
        result.drops[tier] = result.drops.get(tier, 0) + 1
        here, there = int(d["url"]), int(d["original"])
        item, orig = by_line[here], by_line[there]
        c = containment(grams(body_text(pick(item, body_fields))), grams(body_text(pick(orig, body_fields))))
        drop = Drop(tier, d["distance"], c, here, str(pick(item, id_fields)), str(pick(item, title_fields) or ""),
                    there, str(pick(orig, id_fields)), str(pick(orig, title_fields) or ""))
        if c is None:
            result.no_body.append(drop)
        elif c < LOW:
            result.low[tier] = result.low.get(tier, 0) + 1
            result.low_drops.append(drop)
        elif c >= SAME:
            result.same_text += 1
    return result


def _by_tier(counts: dict[str, int]) -> str:
    return " / ".join(str(counts.get(t, 0)) for t in TIERS)


def _drop_lines(d: Drop) -> str:
    c = "–" if d.containment is None else f"{d.containment:.3f}"
    head = f"  {d.tier} d={d.distance} c={c}  "
    return (f"{head}line {d.line} [{d.id}] {d.title}\n"
            f"{'':>{len(head)}}← line {d.original_line} [{d.original_id}] {d.original_title}")


def report(audits: Sequence[Audit]) -> str:
    out = [
        "| corpus | records | items with a body | items fed | drops (title / body / sentence) | "
        "containment < 0.15 (title / body / sentence) | share of drops | containment ≥ 0.5 | "
        "a side without body | s |",
        "|---|---:|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for a in audits:
        share = f"{a.total_low / a.total:.1%}" if a.total else "–"
        out.append(f"| {a.corpus} | {a.records:,} | {a.with_body:,} | {a.fed:,} | {a.total:,} ({_by_tier(a.drops)}) | "
                   f"{a.total_low:,} ({_by_tier(a.low)}) | {share} | {a.same_text:,} | {len(a.no_body):,} | "
                   f"{a.seconds:.0f} |")
    for a in audits:
        out.append(f"\n{a.corpus}: {len(a.low_drops)} drop(s) with containment < {LOW} (line in the file [url or id])")
        out += [_drop_lines(d) for d in a.low_drops]
        if a.no_body:
            out.append(f"{a.corpus}: {len(a.no_body)} drop(s) where a side has under 5 characters of body")
            out += [_drop_lines(d) for d in a.no_body]
    return "\n".join(out)


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (with uncommitted changes)" if dirty else "")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="more JSON-lines files to audit")
    ap.add_argument("--corpus", default=",".join(CORPORA),
                    help=f"comma-separated subset of {','.join(CORPORA)} ('' for none)")
    ap.add_argument("--corpus-dir", type=Path, default=CORPUS)
    ap.add_argument("--limit", type=int, help="first N lines of each file only")
    ap.add_argument("--all-records", action="store_true",
                    help="feed every record, also those without a body (default: the items with a body)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="engine option, e.g. sentences_shared=50 (a flag) or a Fingerprinter keyword")
    ap.add_argument("--jobs", type=int, default=1, help="the command's --jobs (default 1: the machine is shared)")
    ap.add_argument("--json", type=Path, help="also write the figures and every low-containment drop here")
    args = ap.parse_args(argv)
    print("$ " + shlex.join(["python", "benchmarks/audit.py", *(sys.argv[1:] if argv is None else argv)]))
    print(f"commit {_commit()}")
    options = parse_options(args.option)
    flags, extra = command_args(options)
    print("$ " + shlex.join(["scrapy-simhash", "dedup", "FILE", "--index", "<fresh temporary index>",
                             "--decisions", "<file>", "--url-field", REF_FIELD, "--jobs", str(args.jobs), *flags])
          + (f"   + Fingerprinter keywords {extra}" if extra else ""))
    fed = "every record" if args.all_records else "the items with a body"
    print(f"limit={args.limit or 'whole files'}, fed: {fed}, options={options or 'defaults'}\n")
    targets: list[tuple[str, Path]] = []
    for name in (n for n in args.corpus.split(",") if n):
        if name not in CORPORA:
            ap.error(f"unknown corpus {name!r} (choose from {', '.join(CORPORA)})")
        path = args.corpus_dir / CORPORA[name]
        if not path.is_file():
            print(f"corpus not found: {path} (skipped)", file=sys.stderr)
            continue
        targets.append((CORPORA[name].removesuffix(".jsonl.gz"), path))
    targets += [(str(p), p) for p in args.files]
    if not targets:
        print("nothing to audit", file=sys.stderr)
        return 2
    audits = []
    for name, path in targets:
        a = audit(name, path, flags, extra, args.limit, args.jobs, args.all_records)
        print(f"{name}: {a.summary.splitlines()[0] if a.summary else ''}", file=sys.stderr)
        audits.append(a)
    print(report(audits))
    if args.json:
        figures = [{**asdict(a), "total": a.total, "total_low": a.total_low} for a in audits]
        args.json.write_text(json.dumps(figures, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
