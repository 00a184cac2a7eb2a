"""Normalized text → weighted features: jieba words weighted by TF-IDF.

Chinese is cut into words by jieba and each word weighs ``tf × idf`` with jieba's own IDF table
(words it does not know get the median IDF). Latin words are lower-cased. Numbers stay features
(with the median IDF), because two market reports that differ only in their figures are two
stories. Stop words (a built-in Chinese/English list, plus yours) and punctuation are dropped.
Bodies keep their ``top_k`` heaviest features *and every feature tied with the last one kept*,
titles keep all: a title has too few words to leave any out. Ties matter: English words all get
the median IDF, so dozens of words share the cutoff weight, and breaking the tie by any order
(alphabetical, hash) lets one added or removed paragraph swap several of them in or out of the
fingerprint; keeping the whole tied group makes the kept set depend on the weights only.

Term frequency counts linearly by default (``tf="linear"``), so a word repeated twenty times can
carry a fifth of a body's weight and decide most bits alone: different stories on one topic (疫苗,
"vr") then collide. ``max_share`` (0.1 by default) bounds that: it lowers the heaviest body
features to one level so that, once lowered, none holds more than that share of the body's total
weight. ``tf="log"`` (``1 + ln n``) or
``tf="sqrt"`` (``√n``) count repeats sublinearly instead: they flatten every repeated word, not only
the dominant one, and cost more recall (docs/decisions/0008-max-share.md). Why ``top_k`` is 64 and
ties are kept: docs/decisions/0009-top-k.md.

A title has a handful of words, and the heaviest of two or three decides every bit alone
("六小龄童姓什么" and "六小龄童什么时候死的" both hash to 六小龄童, "和信贷怎么样" and "今天你的心情怎么样"
to 怎么样). Titles are capped too, at :data:`TITLE_MAX_SHARE`: a title of five words or fewer weighs
them all the same, a longer one lowers its heaviest words to that share
(docs/decisions/0521-title-share.md).

jieba's dictionary is loaded once per process and shared by every extractor with the same user
dictionary.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from .. import defaults
from .._compiled import _vocabulary_c
from .dictionary import load_idf, load_prefix_dict
from .jieba_loader import jieba
from .segment import Segmenter
from .simhash import simhash

logger = logging.getLogger(__name__)

DEFAULT_TOP_K = defaults.TOP_K
#: No title feature weighs more than this share of the title's total weight (docs/decisions/0521-title-share.md).
TITLE_MAX_SHARE = 0.2
#: How a word's count in the text becomes its term frequency.
TF_MODES: dict[str, Callable[[int], float]] = {
    "linear": float,
    "log": lambda n: 1.0 + math.log(n),
    "sqrt": math.sqrt,
}

# A token made only of these is no feature: punctuation, symbols, spaces.
_NO_WORD = re.compile(r"^[\W_]+$", re.UNICODE)
_NUMBER = re.compile(r"^[+-]?\d+(?:[.,]\d+)*%?$")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")

_UNSEEN: Any = object()
#: The word caches (token → feature word, word → IDF) are emptied when one holds more than this many
#: entries: a long crawl of varied text keeps meeting new tokens, and the caches must not grow with it.
_WORD_CACHE_MAX = 200_000

_tokenizers: dict[str | None, jieba.Tokenizer] = {}
_tokenizers_lock = threading.Lock()


def _quiet_jieba() -> None:
    jieba.setLogLevel(logging.WARNING)


def get_tokenizer(user_dict: str | os.PathLike[str] | None = None) -> jieba.Tokenizer:
    """The process-wide jieba tokenizer for this user dictionary.

    jieba's own (``jieba.dt``, no user dictionary) is left uninitialized: the compiled segmenter
    cuts with its route from the table cache, and its ``FREQ`` (500,000 words, a large part of
    jieba's start-up) is built only when something reads it (:func:`_initialize_from_cache`). A user
    dictionary's is loaded here."""
    key = os.fspath(user_dict) if user_dict else None
    with _tokenizers_lock:
        tokenizer = _tokenizers.get(key)
        if tokenizer is None:
            _quiet_jieba()
            if key is None:
                tokenizer = jieba.dt
                _initialize_from_cache(tokenizer)
            else:
                if not Path(key).is_file():
                    raise FileNotFoundError(f"jieba user dictionary not found: {key}")
                tokenizer = jieba.Tokenizer()
                load_prefix_dict(tokenizer)
                tokenizer.load_userdict(key)
            _tokenizers[key] = tokenizer
    return tokenizer


def _initialize_from_cache(tokenizer: jieba.Tokenizer) -> None:
    """Until it is initialized, ``tokenizer`` initializes from the table cache (``load_prefix_dict``)
    whenever jieba's API needs its dictionary (``check_initialized`` calls ``self.initialize()``),
    so that its prefix dictionary comes from the package's table cache
    (:func:`.dictionary.load_prefix_dict`), never from jieba's own cache."""
    if tokenizer.initialized:
        return

    def initialize(dictionary: str | None = None) -> None:
        tokenizer.__dict__.pop("initialize", None)  # from now on, jieba's own
        if dictionary:
            tokenizer.initialize(dictionary)
        else:
            load_prefix_dict(tokenizer)

    tokenizer.initialize = initialize


@lru_cache(maxsize=1)
def idf_table() -> tuple[Mapping[str, float], float]:
    """jieba's IDF table and its median (the weight of unknown words).

    Read from the ``analyse/idf.txt`` file jieba ships (through :mod:`.dictionary`), without importing
    ``jieba.analyse``: that import also loads ``jieba.posseg`` (a slow import) and builds TextRank
    tables we never use.
    """
    return load_idf(Path(jieba.__file__).parent / "analyse" / "idf.txt")


@lru_cache(maxsize=1)
def builtin_stop_words() -> frozenset[str]:
    text = resources.files("scrapy_simhash").joinpath("data/stopwords.txt").read_text("utf-8")
    return frozenset(_read_word_lines(text))


def _read_word_lines(text: str) -> Iterable[str]:
    for line in text.splitlines():
        word = line.strip().lower()
        if word and not word.startswith("#"):
            yield word


def load_stop_words(source: str | os.PathLike[str] | Iterable[str] | None) -> frozenset[str]:
    """Extra stop words from a file path (one per line, ``#`` comments) or an iterable of words."""
    if source is None:
        return frozenset()
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"stop words file not found: {path}")
        return frozenset(_read_word_lines(path.read_text("utf-8")))
    return frozenset(w.strip().lower() for w in source if w and w.strip())


class FeatureExtractor:
    """Turns normalized text into ``{feature: weight}``; one configuration, many texts."""

    def __init__(
        self,
        top_k: int = DEFAULT_TOP_K,
        stop_words: str | os.PathLike[str] | Iterable[str] | None = None,
        user_dict: str | os.PathLike[str] | None = None,
        tf: str = "linear",
        max_share: float | None = defaults.MAX_SHARE,
    ) -> None:
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, not {top_k!r}")
        if tf not in TF_MODES:
            raise ValueError(f"tf must be one of {sorted(TF_MODES)}, not {tf!r}")
        if max_share is not None and not 0 < max_share <= 1:
            raise ValueError(f"max_share must be in (0, 1] or None, not {max_share!r}")
        self.top_k = top_k
        self.tf = tf
        self._tf = TF_MODES[tf]
        self.max_share = max_share
        self.stop_words = builtin_stop_words() | load_stop_words(stop_words)
        self.tokenizer = get_tokenizer(user_dict)
        self.segmenter = Segmenter(self.tokenizer)
        self.idf, self.median_idf = idf_table()
        self._word_cache: dict[str, str | None] = {}  # token → feature word (tokens repeat: Zipf)
        # feature word → its IDF, for the words seen: a small dict whose keys are the words' own
        # objects, where a lookup in the 270,000-word IDF table costs a few cache misses
        self._word_idf: dict[str, float] = {}
        # The compiled loops (None: the Python ones below run), with their own word cache
        self._compiled = (_vocabulary_c.Vocabulary(self._word_idf, self.stop_words, self.idf, self.median_idf)
                          if self.segmenter.compiled and _vocabulary_c is not None else None)
        self._tf_compiled = None if tf == "linear" else self._tf
        self._blocks_state: object = None  # the segmenter's dictionary state the compiled blocks were cut with

    def _word(self, token: str) -> str | None:
        """The feature word of one token, or None when it is no feature."""
        word = token.strip().lower()
        if not word or _NO_WORD.match(word) or word in self.stop_words:
            return None
        if len(word) == 1 and not _NUMBER.match(word) and not _HAN.match(word):
            return None  # a lone Latin letter carries nothing
        return word

    def words(self, text: str) -> list[str]:
        """The feature words of ``text`` in order: lower-cased, without stop words and punctuation."""
        tokens = self._tokens(text)
        if self._compiled is not None:  # the same loop, compiled
            return self._compiled.words_of(tokens)
        cache = self._word_cache
        out: list[str] = []
        for token in tokens:
            word = cache.get(token, _UNSEEN)
            if word is _UNSEEN:
                word = self._learn(token)
            if word is not None:
                out.append(word)
        return out

    def _tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` (the word caches emptied first when they grew too big)."""
        self._trim()
        return self.segmenter.cut(text)

    def _trim(self) -> None:
        """Empty the word caches when they grew too big."""
        if len(self._word_cache) > _WORD_CACHE_MAX or (self._compiled is not None and
                                                        self._compiled.size > _WORD_CACHE_MAX):
            self._word_cache.clear()
            self._word_idf.clear()
            if self._compiled is not None:
                self._compiled.clear()

    def _learn(self, token: str) -> str | None:
        """The feature word of a token not seen yet, remembered with its IDF."""
        word = self._word_cache[token] = self._word(token)
        if word is not None and word not in self._word_idf:
            self._word_idf[word] = self.idf.get(word, self.median_idf)
        return word

    def weights(self, text: str, top_k: int | None = None) -> dict[str, float]:
        """TF-IDF weight of each word; with ``top_k``, the ``top_k`` heaviest plus every word tied
        with the ``top_k``-th (so the kept set never depends on an arbitrary tie-break)."""
        counts = Counter(self.words(text))  # counted in C, in order of first occurrence as a loop would
        idf = self._word_idf  # every word words() returned is in it
        if self.tf == "linear":  # the default's fast path: no call per word
            weighted = {w: n * idf[w] for w, n in counts.items()}
        else:
            tf = self._tf
            weighted = {w: tf(n) * idf[w] for w, n in counts.items()}
        if top_k is not None and len(weighted) > top_k:
            cutoff = sorted(weighted.values(), reverse=True)[top_k - 1]
            weighted = {w: v for w, v in weighted.items() if v >= cutoff}
        return weighted

    def fingerprint(self, text: str, body: bool, bits: int = 64) -> tuple[int, int]:
        """``(number of features, simhash)`` of :meth:`body_features` (``body``) or
        :meth:`title_features`: one compiled pass from the tokens to the fingerprint where the
        extension is built, the same numbers as the Python functions."""
        compiled = self._compiled
        route = self.segmenter.compiled_route() if compiled is not None else None
        if compiled is not None and route is not None:
            self._trim()
            state, route_args = route
            if state is not self._blocks_state:  # another dictionary: cut the blocks again
                compiled.clear_blocks()
                self._blocks_state = state
            return compiled.fingerprint(
                text, *route_args,
                self.top_k if body else 0, (self.max_share or 0.0) if body else TITLE_MAX_SHARE, self._tf_compiled,
                bits)
        features = self.body_features(text) if body else self.title_features(text)
        return len(features), simhash(features, bits)

    def title_features(self, text: str) -> dict[str, float]:
        """All words of a title, TF-IDF weighted, each capped at :data:`TITLE_MAX_SHARE` of their total."""
        return cap_shares(self.weights(text), TITLE_MAX_SHARE)

    def body_features(self, text: str) -> dict[str, float]:
        """The ``top_k`` heaviest words of a body (and those tied with the last of them), each
        capped at ``max_share`` of their total weight when that is set."""
        weighted = self.weights(text, self.top_k)
        if self.max_share is not None:
            weighted = cap_shares(weighted, self.max_share)
        return weighted


def cap_shares(weights: dict[str, float], max_share: float) -> dict[str, float]:
    """``weights`` with every weight above a level ``c`` lowered to ``c``, ``c`` chosen so that a
    capped weight is exactly ``max_share`` of the new total (water-filling from the top). With fewer
    than ``1 / max_share`` features no such level exists, and all weigh the same."""
    ordered = sorted(weights.values(), reverse=True)
    rest = sum(ordered)
    for k, w in enumerate(ordered):
        if k * max_share >= 1:
            break
        # The k heaviest capped at c, the others summing to `rest`: c = share × (k·c + rest).
        c = max_share * rest / (1 - k * max_share)
        if w <= c:
            return weights if k == 0 else {f: min(v, c) for f, v in weights.items()}
        rest -= w
    return dict.fromkeys(weights, ordered[-1]) if weights else weights
