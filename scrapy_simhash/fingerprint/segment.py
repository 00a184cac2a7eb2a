"""jieba's accurate mode (HMM on), word for word, with less Python per character.

:meth:`Segmenter.cut` returns exactly ``list(tokenizer.cut(text))`` for a jieba ``Tokenizer``: the
same prefix dictionary, the same maximum-probability route (ties to the longer word, as jieba's
``max`` over ``(log probability, end)`` does, with the same floating-point operations in the same
order) and the same HMM for runs of unknown characters. It is faster because it builds the route in
one pass without jieba's per-character generator and ``max`` calls, and remembers the words of the
blocks (runs of Han and Latin characters between punctuation) and unknown-character runs it has
already cut: news text repeats them all the time (English words, numbers, names, bylines).

The tokens are what fingerprints are made of, so equality with jieba is tested on real articles.
A change to the tokenizer's dictionary after this object was built (``jieba.add_word``) clears the
remembered results.

Where the optional extension ``_segment_c`` is built (``pip install`` compiles it when a C compiler
is there), the route through a block is computed in C over compact copies of the dictionary; the
Python route below stays the reference and the fallback, and the tests hold both to jieba's words.
"""

from __future__ import annotations

import threading
import weakref
from math import log

from .._compiled import _segment_c
from .dictionary import load_route
from .jieba_loader import finalseg, jieba

_BLOCK = jieba.re_han_default  # runs jieba cuts with its dictionary (Han, Latin, digits, + # & . _ % -)
_SKIP = jieba.re_skip_default  # whitespace inside the other runs
_CACHE_MAX = 100_000
# The compiled route scans for these patterns' characters itself: with a jieba that cuts by others,
# the Python route (which uses jieba's patterns) runs.
if _segment_c is not None and (_BLOCK.pattern, _SKIP.pattern, finalseg.re_han.pattern, finalseg.re_skip.pattern) != (
    "([\u4E00-\u9FD5a-zA-Z0-9+#&\\._%\\-]+)", "(\r\n|\\s)", "([\u4E00-\u9FD5]+)", "([a-zA-Z0-9]+(?:\\.\\d+)?%?)"
):
    _segment_c = None


#: Whether the compiled segmenter is importable here (``Segmenter(compiled=False)`` forces the fallback).
COMPILED = _segment_c is not None


_routers: weakref.WeakKeyDictionary[jieba.Tokenizer, tuple[tuple[int, int, int, int, bool], object]] = (
    weakref.WeakKeyDictionary()
)
_routers_lock = threading.Lock()


def _router(tokenizer: jieba.Tokenizer, state: tuple[int, int, int, int, bool]) -> _segment_c.Router | None:
    """The compiled route of this tokenizer's dictionary in this state, built once and shared by
    every segmenter; None when a frequency is one it cannot hold (the Python route then handles it as
    jieba does). A tokenizer not initialized yet gets the route of its dictionary file from the
    table cache (:func:`.tables.load_route`, a few ms) and stays so: its ``FREQ`` is built only for
    what needs it (the Python route, a user dictionary, jieba's own API). An initialized one gets
    the route of its ``FREQ`` (~0.07 s)."""
    with _routers_lock:
        known = _routers.get(tokenizer)
        if known is not None and known[0] == state:
            return known[1]  # type: ignore[return-value]
        try:
            if tokenizer.initialized:
                router = _segment_c.Router(tokenizer.FREQ, log(tokenizer.total))
            else:
                router = load_route(tokenizer, _segment_c.ROUTE_LAYOUT,
                                    lambda freq, total, tables: _segment_c.Router(freq, log(total), tables))
        except (ValueError, OverflowError):
            router = None
        _routers[tokenizer] = (state, router)
        return router


class Segmenter:
    """Cuts text into words exactly as ``tokenizer.cut(text)`` (accurate mode, HMM on) does.

    ``compiled`` (default: when built) cuts dictionary blocks with the compiled route of
    ``_segment_c`` (the whole cut about 2.5× faster on Chinese news), word for word the same.
    """

    def __init__(self, tokenizer: jieba.Tokenizer, compiled: bool | None = None) -> None:
        if compiled and _segment_c is None:
            raise RuntimeError("the compiled segmenter (scrapy_simhash._segment_c) is not built here")
        self.compiled = COMPILED if compiled is None else compiled
        self.tokenizer = tokenizer
        self._state: tuple[int, int, int, int, bool] | None = None
        self._blocks: dict[str, tuple[str, ...]] = {}
        self._unknown: dict[str, tuple[str, ...]] = {}
        self._logtotal = 0.0
        self._router: _segment_c.Router | None = None

    def _sync(self) -> None:
        """Forget remembered results when the dictionary changed since they were made; the route of
        the dictionary as it is now (see :func:`_router`)."""
        t = self.tokenizer
        state = (id(t.FREQ), t.total, len(t.FREQ), len(finalseg.Force_Split_Words), t.initialized)
        if state != self._state:
            self._blocks.clear()
            self._unknown.clear()
            router = _router(t, state) if self.compiled else None
            if router is None and not t.initialized:
                t.check_initialized()  # the Python route reads FREQ
                return self._sync()
            self._logtotal = router.logtotal if router is not None else log(t.total)
            self._router = router
            self._state = state

    def prepare(self) -> None:
        """Load the route now rather than at the first cut."""
        self._sync()

    def cut(self, text: str) -> list[str]:
        """The words of ``text``, as jieba's ``Tokenizer.cut(text)`` yields them."""
        self._sync()
        blocks = self._blocks
        if self._router is not None:
            return _segment_c.cut_text(text, self._router, blocks, self._unknown, _hmm(), finalseg.Force_Split_Words,
                                       _CACHE_MAX)
        out: list[str] = []
        # split() with a capturing group alternates: other text, block, other text, block, ...
        for n, part in enumerate(_BLOCK.split(text)):
            if not part:
                continue
            if n % 2:
                words = blocks.get(part)
                if words is None:
                    if len(blocks) >= _CACHE_MAX:
                        blocks.clear()
                    words = blocks[part] = self._cut_block(part)
                out.extend(words)
            else:
                for m, piece in enumerate(_SKIP.split(part)):
                    if m % 2:
                        out.append(piece)  # whitespace, whole
                    else:
                        out.extend(piece)  # anything else, one character at a time
        return out

    def _cut_block(self, block: str) -> tuple[str, ...]:
        """jieba's ``__cut_DAG``: the most probable route through the dictionary, HMM for unknowns."""
        freq = self.tokenizer.FREQ
        if self._router is not None:
            return self._router.cut_block(block, self._unknown, _hmm(), finalseg.Force_Split_Words, _CACHE_MAX)
        logtotal = self._logtotal
        n = len(block)
        score = [0.0] * (n + 1)
        end = [0] * n
        for start in range(n - 1, -1, -1):
            best = None
            best_end = start
            i = start
            frag = block[start]
            while i < n:
                f = freq.get(frag)
                if f is None:
                    break
                if f:
                    p = log(f) - logtotal + score[i + 1]
                    if best is None or p >= best:  # ties: the later end, as max() over (p, end)
                        best = p
                        best_end = i
                i += 1
                frag = block[start:i + 1]
            if best is None:  # no dictionary word starts here: the character alone, frequency 1
                best = 0.0 - logtotal + score[start + 1]
            score[start] = best
            end[start] = best_end + 1

        out: list[str] = []
        buf_start = -1  # start of a run of single characters
        x = 0
        while x < n:
            y = end[x]
            if y - x == 1:
                if buf_start < 0:
                    buf_start = x
            else:
                if buf_start >= 0:
                    self._flush(block[buf_start:x], out)
                    buf_start = -1
                out.append(block[x:y])
            x = y
        if buf_start >= 0:
            self._flush(block[buf_start:], out)
        return tuple(out)

    def _flush(self, buf: str, out: list[str]) -> None:
        """A run of single characters: one character as is, a known word's characters one by one,
        an unknown run through jieba's HMM."""
        if len(buf) == 1:
            out.append(buf)
        elif self.tokenizer.FREQ.get(buf):
            out.extend(buf)
        else:
            words = self._unknown.get(buf)
            if words is None:
                if len(self._unknown) >= _CACHE_MAX:
                    self._unknown.clear()
                words = self._unknown[buf] = _hmm_cut(buf, self.compiled)
            out.extend(words)


def _hmm_cut(text: str, compiled: bool = COMPILED) -> tuple[str, ...]:
    """``tuple(jieba.finalseg.cut(text))``: Han runs through the BMES Viterbi, the rest as is."""
    if compiled:  # the same, in C (what the compiled route does with an unknown run)
        return _hmm().cut(text, finalseg.Force_Split_Words)
    out: list[str] = []
    force_split = finalseg.Force_Split_Words
    for n, part in enumerate(finalseg.re_han.split(text)):
        if not part:
            continue
        if n % 2:
            for word in _viterbi_words(part):
                if word in force_split:
                    out.extend(word)
                else:
                    out.append(word)
        else:
            out.extend(x for x in finalseg.re_skip.split(part) if x)
    return tuple(out)


_hmm_cache: list = [None, None]  # [identity of finalseg's tables, their _segment_c.Hmm]


def _hmm() -> _segment_c.Hmm:
    """finalseg's tables as the compiled Viterbi takes them, rebuilt if finalseg's dicts were replaced."""
    start, trans, emit = finalseg.start_P, finalseg.trans_P, finalseg.emit_P
    key = (id(start), id(trans), id(emit), finalseg.MIN_FLOAT)
    if _hmm_cache[0] != key:
        low = finalseg.MIN_FLOAT
        _hmm_cache[1] = _segment_c.Hmm(
            (start["B"], start["M"], start["E"], start["S"]),
            (trans["E"].get("B", low), trans["S"].get("B", low), trans["M"].get("M", low), trans["B"].get("M", low),
             trans["S"].get("S", low), trans["E"].get("S", low), trans["B"].get("E", low), trans["M"].get("E", low)),
            emit["B"], emit["M"], emit["E"], emit["S"], low,
        )
        _hmm_cache[0] = key
    return _hmm_cache[1]


def _viterbi_words(run: str) -> list[str]:
    """jieba's ``finalseg`` Viterbi over B(egin)/M(iddle)/E(nd)/S(ingle) and the words it marks.

    Same sums in the same order as jieba's ``viterbi``; where two predecessors score the same, the
    one jieba's ``max`` over ``(score, state)`` picks (the larger state letter) wins.
    """
    low = finalseg.MIN_FLOAT
    start, trans, emit = finalseg.start_P, finalseg.trans_P, finalseg.emit_P
    e_b, e_m, e_e, e_s = emit["B"], emit["M"], emit["E"], emit["S"]
    t_eb, t_sb = trans["E"].get("B", low), trans["S"].get("B", low)
    t_mm, t_bm = trans["M"].get("M", low), trans["B"].get("M", low)
    t_ss, t_es = trans["S"].get("S", low), trans["E"].get("S", low)
    t_be, t_me = trans["B"].get("E", low), trans["M"].get("E", low)
    c = run[0]
    b = start["B"] + e_b.get(c, low)
    m = start["M"] + e_m.get(c, low)
    e = start["E"] + e_e.get(c, low)
    s = start["S"] + e_s.get(c, low)
    back: list[tuple[str, str, str, str]] = []  # per position ≥ 1: best predecessor of B, M, E, S
    for c in run[1:]:
        em = e_b.get(c, low)
        x, y = e + t_eb + em, s + t_sb + em
        nb, pb = (x, "E") if x > y else (y, "S")
        em = e_m.get(c, low)
        x, y = m + t_mm + em, b + t_bm + em
        nm, pm = (x, "M") if x >= y else (y, "B")
        em = e_s.get(c, low)
        x, y = s + t_ss + em, e + t_es + em
        ns, ps = (x, "S") if x >= y else (y, "E")
        em = e_e.get(c, low)
        x, y = b + t_be + em, m + t_me + em
        ne, pe = (x, "B") if x > y else (y, "M")
        back.append((pb, pm, pe, ps))
        b, m, e, s = nb, nm, ne, ns
    state = "E" if e > s else "S"
    states = [state]
    for pointers in reversed(back):
        state = pointers["BMES".index(state)]
        states.append(state)
    states.reverse()

    words: list[str] = []
    begin = nexti = 0
    for i, pos in enumerate(states):
        if pos == "B":
            begin = i
        elif pos == "E":
            words.append(run[begin:i + 1])
            nexti = i + 1
        elif pos == "S":
            words.append(run[i])
            nexti = i + 1
    if nexti < len(run):
        words.append(run[nexti:])
    return words
