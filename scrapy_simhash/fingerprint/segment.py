"""jieba's accurate mode (HMM on), word for word: :meth:`Segmenter.cut` returns exactly
``list(tokenizer.cut(text))`` for a jieba ``Tokenizer``. Its words are what fingerprints are made of.

Two routes, bound once for the process by :mod:`scrapy_simhash._compiled`:

- pure Python: jieba's own ``Tokenizer.cut``, remembered by piece. jieba splits a text into blocks
  (runs of its block pattern: Han, Latin, digits and ``+#&._%-``) and the text between them, and
  cuts each of these pieces on its own; so does :meth:`Segmenter.cut`, which hands each piece not
  seen yet to ``tokenizer.cut`` and remembers its words. News repeats its pieces all the time
  (punctuation, numbers, names, bylines, whole sentences of boilerplate).
- compiled (``_segment_c``): the same route through the prefix dictionary and the same HMM in C,
  over compact copies of the dictionary (:func:`_router`); the tests hold it to jieba's own ``cut``
  on real articles and on hostile text.

A change to the tokenizer's dictionary after a segmenter was made (``jieba.add_word``) clears what
it remembered.
"""

from __future__ import annotations

import threading
import weakref
from math import log
from typing import Any

from .._compiled import COMPILED, _segment_c
from .dictionary import load_route
from .jieba_loader import finalseg, jieba

__all__ = ["COMPILED", "Segmenter"]

_BLOCK = jieba.re_han_default  # the pieces jieba cuts one by one: its blocks, and the text between them
#: Pieces (blocks, for the compiled route) and unknown runs remembered, each, before they are forgotten
#: (docs/decisions/0200-pure-segmenter.md).
_CACHE_MAX = 100_000

#: The dictionary state a segmenter's remembered words and route belong to.
_State = tuple[int, int, int, int, bool]

_routers: weakref.WeakKeyDictionary[jieba.Tokenizer, tuple[_State, Any]] = weakref.WeakKeyDictionary()
_routers_lock = threading.Lock()


def _router(tokenizer: jieba.Tokenizer, state: _State) -> Any:
    """The compiled route (a ``_segment_c.Router``) of this tokenizer's dictionary in this state, built
    once and shared by every segmenter; None when a frequency is one it cannot hold (jieba's own cut
    then runs) or where the compiled engine is not in use. A
    tokenizer not initialized yet gets the route of its dictionary file from the table cache
    (:func:`.dictionary.load_route`) and stays so: its ``FREQ`` is built only for what needs it (a
    user dictionary, jieba's own API). An initialized one gets the route of its ``FREQ``."""
    compiled = _segment_c
    if compiled is None:
        return None
    with _routers_lock:
        known = _routers.get(tokenizer)
        if known is not None and known[0] == state:
            return known[1]
        try:
            if tokenizer.initialized:
                router = compiled.Router(tokenizer.FREQ, log(tokenizer.total))
            else:
                router = load_route(tokenizer, compiled.ROUTE_LAYOUT,
                                    lambda freq, total, tables: compiled.Router(freq, log(total), tables))
        except (ValueError, OverflowError):
            router = None
        _routers[tokenizer] = (state, router)
        return router


class Segmenter:
    """Cuts text into words exactly as ``tokenizer.cut(text)`` (accurate mode, HMM on) does.

    ``compiled``: the route :mod:`scrapy_simhash._compiled` bound (None, the default), or the one
    named (True raises ``RuntimeError`` where the compiled modules are not in use).
    """

    def __init__(self, tokenizer: jieba.Tokenizer, compiled: bool | None = None) -> None:
        if compiled and _segment_c is None:
            raise RuntimeError("the compiled segmenter (scrapy_simhash._segment_c) is not in use here")
        self.compiled = COMPILED if compiled is None else compiled
        self.tokenizer = tokenizer
        self._state: _State | None = None
        self._pieces: dict[str, tuple[str, ...]] = {}  # piece (compiled route: block) → its words
        self._unknown: dict[str, tuple[str, ...]] = {}  # compiled route: unknown run → its HMM words
        self._router: Any = None  # the compiled route (_segment_c.Router), else None

    def _sync(self) -> None:
        """Forget remembered words when the dictionary changed since they were made; the route of
        the dictionary as it is now (see :func:`_router`)."""
        t = self.tokenizer
        state = (id(t.FREQ), t.total, len(t.FREQ), len(finalseg.Force_Split_Words), t.initialized)
        if state != self._state:
            self._pieces.clear()
            self._unknown.clear()
            router = _router(t, state) if self.compiled else None
            if router is None and not t.initialized:
                t.check_initialized()  # jieba's cut reads FREQ
                return self._sync()
            self._router = router
            self._state = state

    def prepare(self) -> None:
        """Load the dictionary (or the compiled route) now rather than at the first cut."""
        self._sync()

    def compiled_route(self) -> tuple[object, tuple[Any, ...]] | None:
        """For a compiled pass that cuts as :meth:`cut` does: the dictionary's state (another one
        means blocks cut before are stale) and the route's arguments after the text (the router, the
        unknown runs' words, the HMM tables, the forced splits, the cache's size); None on the pure route."""
        self._sync()
        if self._router is None:
            return None
        return self._state, (self._router, self._unknown, _hmm(), finalseg.Force_Split_Words, _CACHE_MAX)

    def cut(self, text: str) -> list[str]:
        """The words of ``text``, as jieba's ``Tokenizer.cut(text)`` yields them."""
        self._sync()
        pieces = self._pieces
        compiled = _segment_c
        if self._router is not None and compiled is not None:
            return compiled.cut_text(text, self._router, pieces, self._unknown, _hmm(), finalseg.Force_Split_Words,
                                     _CACHE_MAX)
        cut = self.tokenizer.cut
        out: list[str] = []
        for piece in _BLOCK.split(text):
            if piece:
                words = pieces.get(piece)
                if words is None:
                    if len(pieces) >= _CACHE_MAX:
                        pieces.clear()
                    words = pieces[piece] = tuple(cut(piece))
                out.extend(words)
        return out


_hmm_cache: list[Any] = [None, None]  # [identity of finalseg's tables, their _segment_c.Hmm]


def _hmm() -> Any:
    """finalseg's tables as the compiled Viterbi (a ``_segment_c.Hmm``) takes them, rebuilt if
    finalseg's dicts were replaced."""
    compiled = _segment_c
    if compiled is None:
        raise RuntimeError("the compiled segmenter (scrapy_simhash._segment_c) is not in use here")
    start, trans, emit = finalseg.start_P, finalseg.trans_P, finalseg.emit_P
    key = (id(start), id(trans), id(emit), finalseg.MIN_FLOAT)
    if _hmm_cache[0] != key:
        low = finalseg.MIN_FLOAT
        _hmm_cache[1] = compiled.Hmm(
            (start["B"], start["M"], start["E"], start["S"]),
            (trans["E"].get("B", low), trans["S"].get("B", low), trans["M"].get("M", low), trans["B"].get("M", low),
             trans["S"].get("S", low), trans["E"].get("S", low), trans["B"].get("E", low), trans["M"].get("E", low)),
            emit["B"], emit["M"], emit["E"], emit["S"], low,
        )
        _hmm_cache[0] = key
    return _hmm_cache[1]
