"""``benchmarks/semantic.py`` replays the engine's verdicts as its module docstring says: a veto undoes a
vetoed tier's drop whose two embeddings are below the threshold, a catch drops an admitted item whose
best cosine to an earlier admitted item reaches it, and the sign-bit cosine tracks the float one.
Hand-made embeddings, no model needed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from accuracy import Item, Outcome, RunResult, Stream, evaluate
from semantic import binary_sim, replay, scores


def _item(key: str, cluster: str, positive: bool = False) -> Item:
    return Item(key, "zh", cluster, "original", "original", key, key, positive=positive)


def _unit(*rows: list[float]) -> np.ndarray:
    a = np.array(rows, dtype=np.float32)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def test_veto_undoes_a_far_title_drop_and_catch_takes_a_close_admitted_item() -> None:
    # a: a story; b: another story the title tier joined with a (a wrong drop); c: a rewrite of a the
    # tiers called new; d: an unrelated story.
    stream = Stream("zh", [_item("a", "A"), _item("b", "B"), _item("c", "A", positive=True), _item("d", "D")])
    base = RunResult("engine", [Outcome(False), Outcome(True, "title", "a", 1), Outcome(False), Outcome(False)], 0.0)
    emb = _unit([1, 0, 0], [0, 1, 0], [0.95, 0.3, 0], [0, 0, 1])
    sc = scores(stream, base, emb, binary=False, window=100)
    assert sc.match_sim[1] is not None and sc.match_sim[1] < 0.1
    assert sc.best_idx[2] == 0 and sc.best_sim[2] is not None and sc.best_sim[2] > 0.9

    vetoed = replay(stream, base, sc, t_veto=0.5, t_catch=None, veto_tiers={"title"})
    assert [o.dropped for o in vetoed.outcomes] == [False, False, False, False]
    caught = replay(stream, base, sc, t_veto=None, t_catch=0.9, veto_tiers={"title"})
    assert [(o.dropped, o.tier, o.match) for o in caught.outcomes][2] == (True, "semantic", "a")
    assert not caught.outcomes[3].dropped  # unrelated: below the threshold
    both = evaluate(stream, replay(stream, base, sc, 0.5, 0.9, {"title"}))
    assert (both["precision"], both["recall"]) == (1.0, 1.0)
    # the veto only acts on its tiers
    kept = replay(stream, base, sc, t_veto=0.5, t_catch=None, veto_tiers={"sentence"})
    assert kept.outcomes[1].dropped


def test_the_catch_compares_with_the_last_window_admitted_items_only() -> None:
    stream = Stream("zh", [_item("a", "A"), _item("x", "X"), _item("c", "A", positive=True)])
    base = RunResult("engine", [Outcome(False)] * 3, 0.0)
    emb = _unit([1, 0], [0, 1], [1, 0.01])
    assert scores(stream, base, emb, binary=False, window=2).best_idx[2] == 0
    assert scores(stream, base, emb, binary=False, window=1).best_idx[2] == 1


def test_sign_bit_cosine_follows_the_float_cosine() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((200, 256)).astype(np.float32)
    near = x + 0.3 * rng.standard_normal(x.shape).astype(np.float32)
    bits = np.packbits(np.vstack([x, near]) > 0, axis=1)
    est = np.array([binary_sim(bits, i, np.array([200 + i]))[0] for i in range(200)])
    true = np.sum(x * near, axis=1) / np.linalg.norm(x, axis=1) / np.linalg.norm(near, axis=1)
    assert abs(float(np.mean(est - true))) < 0.02
    assert float(np.max(np.abs(est - true))) < 0.1
