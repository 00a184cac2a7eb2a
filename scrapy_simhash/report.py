"""``scrapy-simhash report``: one self-contained HTML page about whether the thresholds suit your sites.

For each fingerprint tier (title, body) the page shows

* a histogram of distances: recent *decisions* (items dropped or flagged, at or under the threshold)
  next to the recent *new entries' nearest earlier entry* (the near misses, over the threshold);
* the closest pairs on both sides of the threshold, side by side: the weakest matches that were
  still judged duplicates, and the strongest near misses that were still admitted as new.

If the left column holds different stories, the threshold is too loose; if the right column holds
reposts, it is too tight. Decisions of the sentence tier (an earlier story's sampled sentences
found in the item) have no fingerprint distance and no near misses: they are counted with the others
and listed in a section of their own, when there are any.

Where the data comes from
-------------------------
* Decisions: ``index.decisions(limit)`` (URL, title, tier, distance and the original entry of each
  recent duplicate or flagged item), plus any ``--decisions`` files written by ``dedup``.
* Near misses: the band index can only find neighbours up to ``bands - 1`` bits, which for the
  title tier is the threshold itself. So the report compares fingerprints directly: each of the
  most recent entries against every earlier entry (up to ``max_comparisons`` Hamming distances per
  tier; the number of recent entries examined shrinks as the index grows, and the page says how
  many were examined).

The page has inline CSS and SVG only: no script, no external resource, so it can be mailed or
attached to an issue and opened anywhere.
"""

from __future__ import annotations

import gzip
import html
import json
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .index import BandIndex, Entry, Tier
from .index.damage import report as report_damage
from .labels import nearest_earlier

#: The tiers with a fingerprint and a threshold: histograms and near misses.
FINGERPRINT_TIERS: tuple[Tier, ...] = ("title", "body")
#: Every tier a decision can come from, as counted on the page.
DECISION_TIERS: tuple[Tier, ...] = (*FINGERPRINT_TIERS, "sentence")
#: Hamming distances computed per tier for the near-miss search: the bound on its work.
DEFAULT_MAX_COMPARISONS = 8_000_000
#: Entries kept in memory as the comparison set (the most recent ones).
DEFAULT_WINDOW = 200_000


@dataclass(frozen=True)
class Pair:
    """Two items at some distance in one tier: ``left`` is the later one (dropped or new)."""

    tier: Tier
    distance: int
    kind: str  # "duplicate" | "flagged" | "new" (a near miss) | "entries" (two stored entries)
    left_url: str | None
    left_title: str | None
    right: Entry | None
    right_url: str | None = None  # when the original is known by URL only
    when: float | None = None


@dataclass
class ReportData:
    """Everything the page shows, gathered from the index (and decision files)."""

    location: str
    namespace: str
    params: Mapping[str, Any]
    entries: int
    thresholds: dict[str, int]
    decisions: list[Pair] = field(default_factory=list)
    near: list[Pair] = field(default_factory=list)
    examined: int = 0  # recent entries whose nearest earlier entry was computed
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def decision_counts(self) -> str:
        """"title N, body N, sentence N": the decisions of each tier."""
        return ", ".join(f"{tier} {sum(d.tier == tier for d in self.decisions):,}" for tier in DECISION_TIERS)


# ------------------------------------------------------------------------------------------------
# Gathering
# ------------------------------------------------------------------------------------------------


class DecisionFileError(ValueError):
    """A ``--decisions`` file that cannot be read (missing, not gzip where it says so, cut short)."""


def read_decision_files(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Duplicate/flagged records of ``dedup --decisions`` files (plain or gzip), in file order; lines
    that are not such records (not UTF-8, not JSON, another status) are passed over. A file that
    cannot be read raises :class:`DecisionFileError`, naming it."""
    out = []
    for path in paths:
        try:
            out += _decision_records(Path(path))
        except (OSError, EOFError, zlib.error) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise DecisionFileError(f"cannot read {path}: {why}") from exc
    return out


def _decision_records(p: Path) -> list[dict[str, Any]]:
    out = []
    with open(p, "rb") as f:
        magic = f.read(2)
    opener: Any = gzip.open if magic == b"\x1f\x8b" else open
    with opener(p, "rb") as f:
        for line in f:
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, or not UTF-8
                continue
            if (isinstance(record, dict) and record.get("status") in ("duplicate", "flagged")
                    and record.get("tier") in DECISION_TIERS and isinstance(record.get("distance"), int)):
                out.append(record)
    return out


def gather(
    index: BandIndex,
    *,
    recent: int = 1000,
    decision_files: Sequence[str | Path] = (),
    title_max_distance: int | None = None,
    body_max_distance: int | None = None,
    max_comparisons: int = DEFAULT_MAX_COMPARISONS,
    window: int = DEFAULT_WINDOW,
    damaged: Callable[[str], None] | None = None,
) -> ReportData:
    """Collect decisions and near misses (see the module docstring). Entries and decisions holding
    values the index never writes are described to ``damaged`` and left out (noted on the page);
    without ``damaged``, the first raises :class:`~.index.SimhashIndexError`."""
    skipped: list[str] = []

    def skip(problem: str) -> None:
        skipped.append(problem)
        if damaged is not None:
            damaged(problem)
        else:
            report_damage(None, index.location, problem)

    params = index.params
    thresholds = {
        "title": params.max_title_distance if title_max_distance is None else title_max_distance,
        "body": params.max_body_distance if body_max_distance is None else body_max_distance,
    }
    data = ReportData(index.location, index.namespace, params.as_dict(), index.count(), thresholds)

    entries = list(index.entries(latest=window, damaged=skip))
    by_id = {e.id: e for e in entries}
    by_url = {e.url: e for e in entries if e.url}
    if len(entries) < data.entries:
        data.notes.append(f"near misses use the {len(entries):,} most recent of {data.entries:,} entries")

    # Decisions stored in the index.
    decisions = index.decisions(recent, damaged=skip)
    data.sources.append(f"{len(decisions):,} decisions from the index")
    seen_urls = set()
    for d in decisions:
        data.decisions.append(Pair(d.tier, d.distance, d.status, d.url, d.title, d.original, when=d.decided_at))
        seen_urls.add(d.url)
    # Decisions from dedup runs' files.
    if decision_files:
        records = read_decision_files(decision_files)
        added = 0
        for r in reversed(records):  # newest (last written) first
            if r.get("url") in seen_urls and r.get("url") is not None:
                continue
            seen_urls.add(r.get("url"))
            ref = r.get("original")
            original = by_url.get(ref)
            if original is None and isinstance(ref, str) and ref.startswith("entry #") and ref[7:].isdigit():
                original = by_id.get(int(ref[7:]))  # dedup names originals without a URL by entry id
            data.decisions.append(Pair(r["tier"], r["distance"], r["status"], r.get("url"), None, original,
                                       right_url=r.get("original")))
            added += 1
            if added >= recent:
                break
        data.sources.append(f"{added:,} decisions from {len(decision_files)} --decisions file(s)")

    # Near misses: each recent entry against every earlier entry, per tier, by direct comparison.
    n = len(entries)
    budget_recent = recent
    if n > 1:
        # sum over the last r entries of their position <= r * n: keep r * n within the budget
        budget_recent = max(1, min(recent, max_comparisons // n))
    start = max(1, n - budget_recent)
    data.examined = n - start if n > 1 else 0
    for tier in FINGERPRINT_TIERS:
        for i, j, best in nearest_earlier(entries, start, tier):
            e = entries[i]
            data.near.append(Pair(tier, best, "new" if best > thresholds[tier] else "entries", e.url, e.title,
                                  entries[j], when=e.first_seen))
    data.sources.append(
        f"nearest earlier entry of the {data.examined:,} most recent entries, compared with up to "
        f"{max(n - 1, 0):,} earlier ones"
    )
    if skipped:
        data.notes.append(f"{len(skipped):,} damaged entries or decisions (values scrapy-simhash never writes) "
                          f"were left out; the first: {skipped[0]}")
    return data


# ------------------------------------------------------------------------------------------------
# Rendering
# ------------------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI","Noto Sans CJK SC","Microsoft YaHei",sans-serif;
margin:24px;color:#1d2330;background:#fff;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d8dde6}
h3{font-size:15px;margin:14px 0 6px}.meta{color:#5a6475;font-size:13px}.meta code{font-size:12px}
.legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:11px;height:11px;
vertical-align:-1px;margin-right:4px}.dup{background:#d9534f}.new{background:#5b8ff9}
.pairs{display:grid;grid-template-columns:1fr 1fr;gap:18px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #eceff4;
padding:4px 6px;text-align:left;vertical-align:top}th{background:#f5f7fa}td.d{font-weight:600;
text-align:center;width:2.5em}.t{display:block}.u{display:block;color:#5a6475;font-size:11px;
word-break:break-all}.none{color:#8a93a3;font-style:italic}ul.notes{color:#5a6475;font-size:13px}
svg text{font:11px system-ui,sans-serif;fill:#1d2330}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _n(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _iso(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def histogram_svg(tier: str, inside: Sequence[int], outside: Sequence[int], threshold: int,
                  cap: int | None = None) -> str:
    """An SVG bar chart: count per distance, decisions (≤ threshold) and near misses stacked."""
    cap = cap if cap is not None else max(16, threshold * 4)
    step = 1 if cap <= 20 else 2
    counts_in = [0] * (cap + 1)
    counts_out = [0] * (cap + 1)
    for d in inside:
        counts_in[min(d, cap)] += 1
    for d in outside:
        counts_out[min(d, cap)] += 1
    top = max([a + b for a, b in zip(counts_in, counts_out, strict=True)] + [1])
    width, height, left, bottom, top_pad = 640, 220, 44, 30, 16
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    bar_w = plot_w / (cap + 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" class="histogram" data-tier="{_e(tier)}" '
             f'aria-label="{_e(tier)} distance histogram">']
    # y grid
    for frac in (0, 0.5, 1):
        y = top_pad + plot_h * (1 - frac)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#eceff4"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{round(top * frac)}</text>')
    for d in range(cap + 1):
        x = left + d * bar_w
        y0: float = top_pad + plot_h
        for count, colour, kind in ((counts_in[d], "#d9534f", "decision"), (counts_out[d], "#5b8ff9", "near")):
            if count:
                h = plot_h * count / top
                y0 -= h
                parts.append(f'<rect class="bar {kind}" data-distance="{d}" data-count="{count}" x="{x + 1:.1f}" '
                             f'y="{y0:.1f}" width="{max(bar_w - 2, 1):.1f}" height="{h:.1f}" fill="{colour}">'
                             f'<title>distance {d}{"+" if d == cap else ""}: {count} {kind}</title></rect>')
        label = f"{d}+" if d == cap else str(d)
        if d % step and d != cap:
            continue
        parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{height - bottom + 14}" text-anchor="middle">{label}</text>')
    tx = left + (threshold + 1) * bar_w
    parts.append(f'<line class="threshold" x1="{tx:.1f}" y1="{top_pad - 6}" x2="{tx:.1f}" y2="{top_pad + plot_h}" '
                 f'stroke="#1d2330" stroke-dasharray="4 3"/>')
    parts.append(f'<text x="{tx + 4:.1f}" y="{top_pad + 4}">threshold {threshold}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 2}" text-anchor="middle">Hamming distance '
                 f'({_e(tier)} fingerprints, bits)</text>')
    parts.append("</svg>")
    return "".join(parts)


def _pair_rows(pairs: Sequence[Pair]) -> str:
    if not pairs:
        return '<tr><td colspan="3" class="none">no pairs on this side</td></tr>'
    rows = []
    for p in pairs:
        left = (f'<span class="t">{_e(p.left_title) if p.left_title else "<i>title not stored</i>"}</span>'
                f'<span class="u">{_e(p.left_url or "(no URL)")}</span>')
        if p.right is not None:
            right = (f'<span class="t">{_e(p.right.title) if p.right.title else "<i>no title stored</i>"}</span>'
                     f'<span class="u">#{p.right.id} · {_e(p.right.url or "(no URL)")} · '
                     f'{_e(_iso(p.right.first_seen))}</span>')
        else:
            right = (f'<span class="t"><i>no longer in the index</i></span>'
                     f'<span class="u">{_e(p.right_url or "")}</span>')
        rows.append(f'<tr class="pair" data-kind="{_e(p.kind)}" data-distance="{p.distance}">'
                    f'<td class="d">{p.distance}</td><td>{left}</td><td>{right}</td></tr>')
    return "".join(rows)


def render(data: ReportData, pairs: int = 8) -> str:
    """The HTML page."""
    p = data.params
    sections = []
    head = "<tr><th>bits</th><th>later item</th><th>earlier entry it was compared with</th></tr>"
    for tier in FINGERPRINT_TIERS:
        k = data.thresholds[tier]
        inside = [x for x in data.decisions if x.tier == tier] + [
            x for x in data.near if x.tier == tier and x.distance <= k]
        outside = [x for x in data.near if x.tier == tier and x.distance > k]
        cap = max(k * 4, int(p.get("bits") or 64) // 2)
        svg = histogram_svg(tier, [x.distance for x in inside], [x.distance for x in outside], k, cap)
        closest_in = sorted(inside, key=lambda x: (-x.distance, -(x.when or 0)))[:pairs]
        closest_out = sorted(outside, key=lambda x: (x.distance, -(x.when or 0)))[:pairs]
        sections.append(f"""
<section class="tier" id="tier-{tier}">
<h2>{tier.capitalize()} tier — threshold {k} bits</h2>
<p class="meta">{_n(len(inside), "pair")} at or under the threshold (decisions), {len(outside):,} over it
(nearest earlier entry of a new item). The index answers this tier exactly up to
{(p.get(f"{tier}_bands") or 1) - 1} bits.</p>
<p class="legend"><span><i class="sw dup"></i>duplicate / flagged decisions (≤ {k})</span>
<span><i class="sw new"></i>new items: distance to their nearest earlier entry (&gt; {k})</span></p>
{svg}
<div class="pairs">
<div class="side inside"><h3>Weakest matches still judged duplicates (≤ {k}): different stories here mean
the threshold is too loose</h3><table>{head}{_pair_rows(closest_in)}</table></div>
<div class="side outside"><h3>Closest near misses admitted as new (&gt; {k}): reposts here mean the threshold
is too tight</h3><table>{head}{_pair_rows(closest_out)}</table></div>
</div>
</section>""")
    sentence = [x for x in data.decisions if x.tier == "sentence"]
    if sentence:
        weakest = sorted(sentence, key=lambda x: (-x.distance, -(x.when or 0)))[:pairs]
        sections.append(f"""
<section class="tier" id="tier-sentence">
<h2>Sentence tier — {_n(len(sentence), "decision")}</h2>
<p class="meta">Items that hold more than <code>SIMHASH_SENTENCES_SHARED</code> percent of an earlier story's
sampled sentences. This tier has no fingerprint distance and no near misses: the number shown is how many
of the earlier story's sampled sentences the item lacks.</p>
<div class="side inside"><h3>Weakest sentence matches (most sentences missing): different stories here
mean SIMHASH_SENTENCES_SHARED is too low</h3>
<table>{head.replace("bits", "missing")}{_pair_rows(weakest)}</table></div>
</section>""")
    notes = "".join(f"<li>{_e(n)}</li>" for n in [*data.sources, *data.notes,
                    "The index keeps each entry's short title and URL, not the dropped item's title: "
                    "dropped items are shown by URL."])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>scrapy-simhash report — {_e(data.location)}</title>
<style>{_CSS}</style></head>
<body>
<h1>scrapy-simhash: are the thresholds right for your sites?</h1>
<p class="meta">Index <code>{_e(data.location)}</code>, namespace <code>{_e(data.namespace)}</code>:
{data.entries:,} entries · {p.get("bits")}-bit fingerprints · title bands {p.get("title_bands")},
body bands {p.get("body_bands")} · decisions: {_e(data.decision_counts())} · generated
{_e(_iso(time.time()))}</p>
<ul class="notes">{notes}</ul>
{"".join(sections)}
</body></html>
"""


def write_report(
    index: BandIndex,
    output: str | Path,
    *,
    recent: int = 1000,
    pairs: int = 8,
    decision_files: Sequence[str | Path] = (),
    title_max_distance: int | None = None,
    body_max_distance: int | None = None,
    damaged: Callable[[str], None] | None = None,
) -> str:
    """Gather, render and write the page; returns a one-line summary. ``damaged``: see :func:`gather`."""
    data = gather(index, recent=recent, decision_files=decision_files, title_max_distance=title_max_distance,
                  body_max_distance=body_max_distance, damaged=damaged)
    page = render(data, pairs=pairs)
    Path(output).write_text(page, encoding="utf-8")
    return (f"report: {output} ({len(page):,} bytes): {len(data.decisions):,} decisions "
            f"({data.decision_counts()}), near misses of {data.examined:,} recent entries")
