"""``tune``: the labels of ``review`` replayed under other settings, each candidate's precision and
recall on them, and the settings to paste (nothing is written)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..labels import Label, Pair, decision_pair
from .common import CliError, Damage, describe, fingerprinter_options, make_fingerprinter, open_index_for, shown
from .labelled import read_labels_for, refingerprinting

if TYPE_CHECKING:
    from ..tune import Score, Setting


def run_tune(args: argparse.Namespace) -> int:
    """Replay the labels (and the index's decisions) under candidate settings; print, write nothing."""
    from ..tune import Setting, candidates, ranked, score

    path = Path(args.labels_file)
    if not path.is_file():
        raise CliError(f"cannot read {path}: no such file")
    labels = read_labels_for(path, args.namespace, "tune")
    if not labels:
        raise CliError(f"{path} holds no labels of namespace {args.namespace!r}: label pairs with "
                       "'scrapy-simhash review' first")
    current = Setting(args.title_max_distance, args.body_max_distance, args.title_numbers, args.sentences_shared)
    decisions: list[Pair] = []
    answers = None
    if args.index:
        index = open_index_for(args, readonly=True)
        damage = Damage()
        try:
            answers = (index.params.max_title_distance, index.params.max_body_distance)
            recorded = index.decisions(args.recent, damaged=damage)
            title_fp = None
            if recorded:
                try:
                    fingerprinter = make_fingerprinter({**fingerprinter_options(args), "bits": index.params.bits})
                except (OSError, ValueError) as exc:
                    raise CliError(describe(exc)) from exc
                title_fp = refingerprinting(fingerprinter, index, [d.original for d in recorded if d.original])
            decisions = [p for d in recorded if (p := decision_pair(d, bits=index.params.bits, title_fp=title_fp))]
        finally:
            index.close()
        damage.warn("tune", args.index)
    scores = score(labels, candidates(current, args.title_up_to, args.body_up_to), decisions)
    best = ranked(scores, current)
    now = next(sc for sc in scores if sc.setting == current)
    suggested = best[0]
    same = sum(lb.same for lb in labels)
    notes = _tune_notes(labels, same)
    reband = _reband(suggested.setting, answers, args.index)
    if args.apply:
        print(f"# scrapy-simhash tune: suggested by {len(labels)} labels of {path} "
              f"(precision {_pct(suggested.precision)}, recall {_pct(suggested.recall)}); paste into settings.py")
        for name, value in suggested.setting.as_settings().items():
            print(f"{name} = {value}")
        for line in [*notes, *reband]:
            print(f"tune: {line}", file=sys.stderr)
        return 0
    if args.json:
        print(json.dumps({
            "labels": len(labels), "same": same, "different": len(labels) - same, "decisions": len(decisions),
            "current": now.as_dict(), "suggested": suggested.as_dict(),
            "candidates": [sc.as_dict() for sc in best[: args.top]], "notes": notes, "reband": reband,
        }, ensure_ascii=False, indent=2))
        return 0
    print(f"{len(labels):,} labels in {path} (same story {same:,}, different {len(labels) - same:,}), "
          f"namespace {args.namespace!r}" + (f"; {len(decisions):,} recorded decisions of {shown(args.index)} "
                                             "replayed" if args.index else ""))
    rows = [(now, "current"), *((sc, "") for sc in best[: args.top] if sc is not now)]
    rows = [(sc, "suggested" if sc is suggested else mark) for sc, mark in rows]
    if suggested is now:
        rows[0] = (now, "current, suggested")
    print(_table(rows, bool(decisions)))
    print("\nTP/FP: pairs the setting calls duplicates, labelled same/different; FN/TN: pairs it admits; ?: outcome "
          "unknown (counted as a mistake in the ranking); [95% Wilson interval]")
    print(f"suggested: {_settings_line(suggested.setting)}")
    print(_margins(scores, suggested))
    for line in [*notes, *reband]:
        print(line)
    return 0


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _interval(x: float | None, iv: tuple[float, float] | None) -> str:
    return "-" if x is None or iv is None else f"{x:.2f} [{iv[0]:.2f}-{iv[1]:.2f}]"


def _settings_line(s: Setting) -> str:
    return ", ".join(f"{k} = {v}" for k, v in s.as_settings().items())


def _table(rows: Sequence[tuple[Score, str]], decisions: bool) -> str:
    head = ["title", "body", "numbers", "sentences", "TP", "FP", "FN", "TN", "?", "precision [95%]",
            "recall [95%]", "F1"]
    if decisions:
        head.append("decisions kept")
    lines = []
    for sc, mark in rows:
        s = sc.setting
        row = [str(s.title_max_distance), str(s.body_max_distance), str(s.title_numbers), str(s.sentences_shared),
               str(sc.tp), str(sc.fp), str(sc.fn), str(sc.tn), str(sc.unknown),
               _interval(sc.precision, sc.precision_interval), _interval(sc.recall, sc.recall_interval),
               f"{sc.pessimistic_f1:.2f}"]
        if decisions:
            row.append(f"{sc.decisions_kept}/{sc.decisions}" + (f" (+{sc.decisions_unknown}?)"
                                                                if sc.decisions_unknown else ""))
        lines.append((row, mark))
    widths = [max(len(h), *(len(r[i]) for r, _ in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + (f"  ← {m}" if m else "") for r, m in lines]
    return "\n".join(out)


def _margins(scores: Sequence[Score], best: Score) -> str:
    """How far each threshold can move from the suggestion, the other held, and score as well."""
    by_setting = {sc.setting: sc.pessimistic_f1 for sc in scores}
    s = best.setting

    def run(field: str) -> str:
        value = getattr(s, field)
        ok = [v for v in range(0, 129)
              if by_setting.get(replace(s, **{field: v})) == best.pessimistic_f1]
        low = high = value
        while low - 1 in ok:
            low -= 1
        while high + 1 in ok:
            high += 1
        return f"{low}-{high}" if low != high else str(low)

    return (f"as good on these labels: title max distance {run('title_max_distance')} (body {s.body_max_distance}), "
            f"body max distance {run('body_max_distance')} (title {s.title_max_distance})")


def _tune_notes(labels: Sequence[Label], same: int) -> list[str]:
    notes = []
    if same == 0 or same == len(labels):
        kind = "same story" if same else "different stories"
        notes.append(f"every label says {kind}: nothing bounds the thresholds on the other side; label pairs "
                     "of both kinds (decisions and near misses) before trusting a suggestion")
    elif len(labels) < 30:
        notes.append(f"{len(labels)} labels: the intervals are wide; a setting is only clearly better when its "
                     "interval does not overlap the current one's")
    return notes


def _reband(s: Setting, answers: tuple[int, int] | None, location: str | None) -> list[str]:
    """What an index needs for the suggested thresholds."""
    command = (f"scrapy-simhash reband {shown(location) if location else 'PATH_OR_URL'} "
               f"--title-max-distance {s.title_max_distance} --body-max-distance {s.body_max_distance}")
    if answers is None:
        return [f"an index answers the distances it was banded for (scrapy-simhash stats shows them); one that "
                f"answers less than title {s.title_max_distance} / body {s.body_max_distance} needs: {command}"]
    if s.title_max_distance <= answers[0] and s.body_max_distance <= answers[1]:
        return [f"no re-band needed: the index answers title distances up to {answers[0]} and body up to "
                f"{answers[1]}"]
    return [f"re-band first (the index answers title up to {answers[0]}, body up to {answers[1]}): {command}"]


# ------------------------------------------------------------------------------------------------
# stopwords
# ------------------------------------------------------------------------------------------------


__all__ = ["run_tune"]
