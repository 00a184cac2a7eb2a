"""``check`` (the verdict for one item without adding it, and its nearest entries), ``explain``
(the stored decision about a URL) and ``report`` (the HTML page about the thresholds,
:mod:`scrapy_simhash.report`)."""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..index.damage import entry_damage
from ..labels import Label, LabelsError, default_labels_path, labels_of_url, read_labels
from .common import (
    GZIP_MAGIC,
    CliError,
    Damage,
    describe,
    entry_dict,
    fingerprinter_options,
    hex_fp,
    iso,
    json_type,
    make_fingerprinter,
    open_dedup,
    open_index_for,
    pick,
    print_json,
    shown,
)

if TYPE_CHECKING:
    from ..engine import Verdict
    from ..index import Match

def _check_item(args: argparse.Namespace) -> tuple[Any, Any, str | None]:
    if args.title is not None:
        return args.title, args.body, None
    if args.body is not None:
        raise CliError("--body goes with --title")
    if args.item is not None:
        text, where = args.item, "--item"
    else:
        where = args.item_file
        try:
            if args.item_file == "-":
                text = sys.stdin.read()
            else:
                raw = Path(args.item_file).read_bytes()
                text = (gzip.decompress(raw) if raw[:2] == GZIP_MAGIC else raw).decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:
            raise CliError(f"cannot read {args.item_file}: {describe(exc)}") from exc
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{where} is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise CliError(f"{where} is not JSON: nested too deeply") from exc
    if not isinstance(item, dict):
        raise CliError(f"{where} must be a JSON object, not {json_type(item)}")
    _, title = pick(item, args.title_field)
    _, body = pick(item, args.body_field)
    _, url = pick(item, args.url_field)
    if title is None and body is None:
        raise CliError(f"{where} has no title or body field (looked for "
                       f"{', '.join([*args.title_field, *args.body_field])})")
    return title, body, url if isinstance(url, str) else None


def run_check(args: argparse.Namespace) -> int:
    """Verdict without adding, then the nearest entries per tier and what they share."""
    title, body, url = _check_item(args)
    try:
        fingerprinter = make_fingerprinter(fingerprinter_options(args))
    except (OSError, ValueError) as exc:
        raise CliError(describe(exc)) from exc
    dedup = open_dedup(args, fingerprinter, readonly=True)
    damage = Damage()
    try:
        try:
            fps = dedup.fingerprint(title, body)
        except (TypeError, ValueError) as exc:
            raise CliError(f"cannot fingerprint this item: {exc}") from exc
        index = dedup.index
        now = time.time()
        not_before = None if dedup.ttl_days is None else now - dedup.ttl_days * 86400
        body_k = dedup.body_distance_for(fps.body_chars)
        verdict = dedup.peek(fps, url=url, now=now)  # the rule dedup runs, without the insert
        params = index.params
        near: list[Match] = []
        if fps.usable:
            near = index.lookup(fps.title, fps.body, title_k=params.max_title_distance,
                                body_k=params.max_body_distance, not_before=not_before,
                                limit=args.limit)
        original = verdict.original
        problem = None if original is None else entry_damage(original, params.bits)
        if problem is not None:
            raise CliError(f"index {shown(args.index)}: the entry that decides this item is damaged (a value "
                           f"scrapy-simhash never writes): {problem}")
        for match in near:
            problem = entry_damage(match.entry, params.bits)
            if problem is not None:
                damage(problem)
        near = [m for m in near if entry_damage(m.entry, params.bits) is None]
        features = fingerprinter.features
        title_features = features.title_features(fps.title_text) if fps.title_text else {}
        body_text = fingerprinter.clean_body(body) if fps.body is not None else ""
        body_features = features.body_features(body_text) if body_text else {}
        neighbours = []
        for match in near:
            stored_words = set(features.words(match.entry.title or ""))
            shared = [w for w in title_features if w in stored_words]
            neighbours.append({
                "tier": match.tier, "distance": match.distance,
                "within_threshold": match.distance <= (dedup.title_max_distance if match.tier == "title"
                                                       else body_k),
                "entry": entry_dict(match.entry), "shared_title_words": shared,
            })
        report = {
            "url": url,
            "verdict": verdict.as_dict(),
            "thresholds": {"title": dedup.title_max_distance, "body": body_k},
            "index_answers_up_to": {"title": params.max_title_distance, "body": params.max_body_distance},
            "query": {
                "title": fps.title_text, "body_chars": fps.body_chars,
                "title_fp": hex_fp(fps.title), "body_fp": hex_fp(fps.body),
                "title_features": _rounded(title_features),
                "body_features": _rounded(dict(sorted(body_features.items(), key=lambda kv: -kv[1]))),
            },
            "nearest": neighbours,
            "note": "the index stores fingerprints and short titles, not bodies: shared features of "
                    "stored entries are their title words",
        }
    finally:
        dedup.close()
    if args.json:
        print_json(report)
    else:
        _print_check(report, verdict)
    damage.warn("check", args.index)
    return 0


def _print_check(report: Mapping[str, Any], verdict: Verdict) -> None:
    q = report["query"]
    detail = f" ({verdict.summary()})" if verdict.status in ("duplicate", "flagged", "skipped") else ""
    print(f"verdict: {verdict.status}{detail}" + ("  (nothing was added)" if verdict.status != "skipped" else ""))
    if verdict.original is not None:
        o = verdict.original
        print(f"  original: entry #{o.id}, first seen {iso(o.first_seen)}, {o.url or '(no URL)'}")
        print(f"            {o.title or '(no title stored)'}")
    print(f"query title: {q['title'] or '(none)'}")
    print(f"  title fp {q['title_fp'] or '(too little text)'}, body fp {q['body_fp'] or '(too little text)'}, "
          f"body {q['body_chars']:,} chars")
    print(f"  title features: {_features_line(q['title_features'])}")
    top = dict(list(q["body_features"].items())[:12])
    print(f"  body features (top {len(top)} of {len(q['body_features'])}): {_features_line(top)}")
    for tier in ("title", "body"):
        rows = [n for n in report["nearest"] if n["tier"] == tier]
        print(f"nearest by {tier} (threshold {report['thresholds'][tier]} bits; the index answers up to "
              f"{report['index_answers_up_to'][tier]}):")
        if not rows:
            print("  none within reach")
        for n in rows:
            e = n["entry"]
            mark = "≤" if n["within_threshold"] else ">"
            print(f"  distance {n['distance']} ({mark} threshold)  entry #{e['id']}  {e['first_seen']}  "
                  f"{e['url'] or '(no URL)'}")
            print(f"      {e['title'] or '(no title stored)'}")
            print(f"      shared title words: {' '.join(n['shared_title_words']) or '(none)'}")
    print(f"note: {report['note']}")


def _features_line(features: Mapping[str, float]) -> str:
    return " ".join(f"{w}({v:g})" for w, v in features.items()) or "(none)"


def _rounded(features: Mapping[str, float]) -> dict[str, float]:
    return {w: round(v, 2) for w, v in features.items()}




def run_explain(args: argparse.Namespace) -> int:
    index = open_index_for(args, readonly=True)
    damage = Damage()
    try:
        decision = index.explain(args.url)
        entry = None
        if decision is None:
            entry = next((e for e in index.entries(damaged=damage) if e.url == args.url), None)
    finally:
        index.close()
    damage.warn("explain", args.index)
    if decision is not None:
        data: dict[str, Any] = {
            "url": decision.url, "status": decision.status, "tier": decision.tier,
            "distance": decision.distance, "decided_at": iso(decision.decided_at),
            "check": "fingerprint" if decision.score is None else "characters",
            "score": None if decision.score is None else round(decision.score, 3),
            "original": entry_dict(decision.original) if decision.original is not None else None,
        }
    elif entry is not None:
        data = {"url": args.url, "status": "new", "entry": entry_dict(entry)}
    else:
        data = {"url": args.url, "status": None}
    labels = _labels_of(args)
    if decision is not None or entry is not None:
        data["labels"] = [{"label": lb.label, "kind": lb.pair.kind, "later": lb.pair.later.url,
                           "earlier": lb.pair.earlier.url, "at": lb.at, "by": lb.by} for lb in labels]
    if args.json:
        print_json(data)
    elif decision is not None:
        verb = "dropped as a duplicate" if decision.status == "duplicate" else f"kept but {decision.status}"
        chars = "" if decision.score is None else f", confirmed by characters (similarity {decision.score:.2f})"
        print(f"{args.url}\n  {verb} on {data['decided_at']}: {decision.tier} tier, distance {decision.distance}"
              f"{chars}")
        o = decision.original
        if o is None:
            print("  original: no longer in the index (purged or forgotten)")
        else:
            print(f"  original: entry #{o.id}, first seen {iso(o.first_seen)}, {o.url or '(no URL)'}")
            print(f"            {o.title or '(no title stored)'}")
    elif entry is not None:
        print(f"{args.url}\n  admitted as new: entry #{entry.id}, first seen {iso(entry.first_seen)}")
        print(f"  {entry.title or '(no title stored)'}")
    else:
        print(f"{args.url}: no decision and no entry for this URL in namespace {args.namespace!r}",
              file=sys.stderr)
        return 1
    for lb in labels if not args.json else ():
        other = lb.pair.earlier if lb.pair.later.url == args.url else lb.pair.later
        story = "same story" if lb.same else "different stories"
        print(f"  labelled {story} as {other.url or other.key} ({lb.pair.kind.replace('_', ' ')}; "
              f"by {lb.by or '?'} on {lb.at or '?'})")
    return 0


def _labels_of(args: argparse.Namespace) -> list[Label]:
    """The labels of pairs holding ``args.url`` (none when there is no labels file)."""
    path = Path(args.labels) if args.labels else default_labels_path(args.index)
    if path is None or not path.is_file():
        return []
    try:
        return labels_of_url(read_labels(path, args.namespace, bad=lambda n, why: None), args.url)
    except LabelsError as exc:
        raise CliError(str(exc)) from exc


def run_report(args: argparse.Namespace) -> int:
    """Gather, render and write the page; the one-line summary goes to stderr."""
    from ..report import DecisionFileError, write_report

    index = open_index_for(args, readonly=True)
    damage = Damage()
    try:
        summary = write_report(
            index, args.output, recent=args.recent, pairs=args.pairs, decision_files=args.decisions,
            title_max_distance=args.title_max_distance, body_max_distance=args.body_max_distance, damaged=damage,
        )
    except DecisionFileError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {describe(exc)}") from exc
    finally:
        index.close()
    print(summary, file=sys.stderr)
    damage.warn("report", args.index)
    return 0
