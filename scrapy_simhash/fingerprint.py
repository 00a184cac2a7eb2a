"""Title and body of an item → fingerprints: normalize, extract features, simhash.

One :class:`Fingerprinter` holds the whole configuration so the pipeline, the command line and
the benchmarks compute fingerprints the same way.

Besides the two fingerprints, an item gets a *number signature* of its body
(:func:`number_signature`): the title tier uses it so that a recurring templated headline over a
report with other figures is not taken for a repost. And it gets a *sentence signature*
(:func:`sentence_signature`, the hashes of its sentences, smallest first) for the opt-in sentence
tier, which catches edited reposts whose body fingerprints drifted past the body threshold.

Too little text makes no fingerprint (``None``): a few words hash to a few bits that collide with
other short texts, so they must not create matches by themselves. A title needs
``min_title_chars`` characters and 2 features after normalization; a body needs
``min_body_chars`` characters and 3 features.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from .features import DEFAULT_TOP_K, FeatureExtractor
from .index.base import NUMBERS_MAX, SENTENCES_CHECKED
from .normalize import main_text, normalize_body, normalize_text, normalize_title
from .simhash import SUPPORTED_BITS, simhash

DEFAULT_MIN_TITLE_CHARS = 5
DEFAULT_MIN_BODY_CHARS = 30
_MIN_TITLE_FEATURES = 2
_MIN_BODY_FEATURES = 3
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Dates (ISO after normalization) and clock times are metadata a repost adds or rewrites, not figures.
_DATE_TIME = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?|\b\d{1,2}:\d{2}(?::\d{2})?\b")


#: Sentence ends in normalized text (。 stays full width; ！？； are ASCII by then); a period ends a
#: sentence only before a space or the end, so decimals stay whole.
_SENTENCE_END = re.compile(r"[。!?;\n]+|\.(?=\s|$)")
_SPACE = re.compile(r"\s+")
#: Shorter sentences are too common ("Reuters", "记者 张三") to identify a story.
MIN_SENTENCE_CHARS = 20


def sentence_signature(text: str) -> tuple[str, ...]:
    """Hashes of the distinct sentences of a normalized text, smallest first, at most
    :data:`~.index.base.SENTENCES_CHECKED`.

    A sentence is lower-cased with all whitespace removed and must have at least
    :data:`MIN_SENTENCE_CHARS` characters; each is hashed to 64 bits (BLAKE2b) and written as 16
    lowercase hex digits. Fewer than 2 such sentences → ``()`` (no signature). An item is checked
    with all of these; the index keeps only the :data:`~.index.base.SENTENCES_STORED` smallest, a
    sample of the story's sentences chosen by hash, so the sample of an original and the text of
    its repost agree on which sentences count, however the repost was cut, padded or reordered.
    """
    found = {_SPACE.sub("", part).lower() for part in _SENTENCE_END.split(text)}
    hashes = sorted(blake2b(x.encode("utf-8"), digest_size=8).hexdigest()
                    for x in found if len(x) >= MIN_SENTENCE_CHARS)
    return tuple(hashes[:SENTENCES_CHECKED]) if len(hashes) >= 2 else ()


def number_signature(text: str) -> str:
    """The numbers of a normalized text as a short, comparable signature.

    Dates and clock times are left out (a repost adds or reformats them). Each distinct number
    (thousands commas removed, so ``1,234`` = ``1234``) is hashed to 32 bits
    (BLAKE2b); the :data:`~.index.base.NUMBERS_MAX` smallest hashes, as 8 lowercase hex digits,
    sorted and space-separated, are the signature (``""``: no numbers). A bottom-k sample, so two
    signatures estimate how far the number sets overlap (:func:`~.index.base.numbers_agree`).
    """
    found = {n.replace(",", "") for n in _NUMBER.findall(_DATE_TIME.sub(" ", text))}
    hashes = sorted(int.from_bytes(blake2b(n.encode("ascii", "replace"), digest_size=4).digest(), "big") for n in found)
    return " ".join(f"{h:08x}" for h in hashes[:NUMBERS_MAX])


@dataclass(frozen=True)
class Fingerprints:
    """Fingerprints of one item, ``None`` where there was too little text, plus what they came from."""

    title: int | None
    body: int | None
    title_text: str
    body_chars: int
    numbers: str | None = None  # number signature of the body (None: not computed)
    sentences: tuple[str, ...] = ()  # sentence signature of the body (empty: none)

    @property
    def usable(self) -> bool:
        return self.title is not None or self.body is not None


class Fingerprinter:
    """Normalization + features + simhash, configured once."""

    def __init__(
        self,
        bits: int = 64,
        top_k: int = DEFAULT_TOP_K,
        stop_words: str | os.PathLike[str] | Iterable[str] | None = None,
        user_dict: str | os.PathLike[str] | None = None,
        title_patterns: Iterable[str | re.Pattern[str]] = (),
        min_title_chars: int = DEFAULT_MIN_TITLE_CHARS,
        min_body_chars: int = DEFAULT_MIN_BODY_CHARS,
        main_content: bool = False,
        sentences: bool = True,
        tf: str = "linear",
        max_share: float | None = None,
    ) -> None:
        if bits not in SUPPORTED_BITS:
            raise ValueError(f"fingerprint size must be one of {SUPPORTED_BITS} bits, not {bits!r}")
        self.bits = bits
        self.features = FeatureExtractor(top_k=top_k, stop_words=stop_words, user_dict=user_dict, tf=tf,
                                         max_share=max_share)
        self.title_patterns = tuple(re.compile(p) if isinstance(p, str) else p for p in title_patterns)
        self.min_title_chars = min_title_chars
        self.min_body_chars = min_body_chars
        self.main_content = main_content
        self.sentences = sentences  # sentence signatures serve only the opt-in tier: skip them without it

    def clean_title(self, raw: Any) -> str:
        """The normalized title (site suffixes and repost marks removed)."""
        return normalize_title(raw, self.title_patterns)

    def clean_body(self, raw: Any) -> str:
        """The normalized body text (HTML parsed; boilerplate removed when ``main_content``)."""
        if self.main_content and isinstance(raw, (str, bytes)):
            return normalize_text(main_text(raw))
        return normalize_body(raw)

    def title(self, raw: Any) -> int | None:
        """Fingerprint of a title, or None when it is too short to be trusted."""
        return self._title_fp(self.clean_title(raw))

    def body(self, raw: Any) -> int | None:
        """Fingerprint of a body (HTML or text), or None when it is too short to be trusted."""
        return self._body_fp(self.clean_body(raw))

    def fingerprint(self, title: Any, body: Any) -> Fingerprints:
        """Both fingerprints of an item."""
        title_text = self.clean_title(title)
        body_text = self.clean_body(body)
        return Fingerprints(
            self._title_fp(title_text), self._body_fp(body_text), title_text, len(body_text),
            number_signature(body_text), sentence_signature(body_text) if self.sentences else (),
        )

    def _title_fp(self, text: str) -> int | None:
        if len(text) < self.min_title_chars:
            return None
        features = self.features.title_features(text)
        if len(features) < _MIN_TITLE_FEATURES:
            return None
        return simhash(features, self.bits)

    def _body_fp(self, text: str) -> int | None:
        if len(text) < self.min_body_chars:
            return None
        features = self.features.body_features(text)
        if len(features) < _MIN_BODY_FEATURES:
            return None
        return simhash(features, self.bits)
