"""Title and body of an item → fingerprints: normalize, extract features, simhash.

One :class:`Fingerprinter` holds the whole configuration so the pipeline, the command line and
the benchmarks compute fingerprints the same way.

Besides the two fingerprints, an item gets a *number signature* of its body
(:func:`number_signature`): the title tier uses it so that a recurring templated headline over a
report with other figures is not taken for a repost. And it gets a *sentence signature*
(:func:`sentence_signature`, the hashes of its sentences, smallest first) for the sentence
tier, which catches edited reposts whose body fingerprints drifted past the body threshold, and
for the title tier's body check. A short body also gets its character key
(:func:`~scrapy_simhash.text.similarity.char_key`), the body tier's second check. A body that is a
whole page is first reduced to its main text.

Too little text makes no fingerprint (``None``): a few words hash to a few bits that collide with
other short texts, so they must not create matches by themselves. A title needs
``min_title_chars`` characters and 2 features after normalization; a body needs
``min_body_chars`` characters and 3 features.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from .. import defaults
from ..index.base import FEATURES_VERSION
from ..setting_values import PROFILES
from ..text.hints import CJK
from ..text.normalize import looks_like_page, main_text, normalize_body, normalize_text, normalize_title
from ..text.similarity import MIN_KEY_CHARS, SHORT_PROFILE_CHARS, SHORT_TEXT_CHARS, char_key
from .features import DEFAULT_TOP_K, FeatureExtractor
from .signatures import FIGURE_HEAVY_SHARE, figure_share, number_signature, sentence_signature, short_body_digest
from .simhash import SUPPORTED_BITS

_T = TypeVar("_T")
DEFAULT_MIN_TITLE_CHARS = 5
DEFAULT_MIN_BODY_CHARS = 30
# PROFILES (SIMHASH_PROFILE): "news" (articles: title and body) and "short" (comments, reviews,
# posts, replies: one text field, no title; SHORT_MIN_BODY_CHARS, unstuff()).
#: The short profile fingerprints texts from this many normalized characters and one feature: a
#: one-word reply posted again ("好评", "好评！") is a copy too, and every match of the profile is
#: confirmed by its characters, so a text this short joins only its own repeat.
SHORT_MIN_BODY_CHARS = 2
#: Whitespace, punctuation and symbols between two CJK characters: what a spammer inserts to dodge a
#: word filter ("好用推荐购*买", "好 用 推 荐", "加-微-信"); the short profile removes them.
_STUFFED = re.compile(rf"(?<=[{CJK}])[\W_]+(?=[{CJK}])")


def unstuff(text: str) -> str:
    """A normalized short text without the whitespace, punctuation and symbols between CJK characters."""
    return _STUFFED.sub("", text)
_MIN_TITLE_FEATURES = 2
_MIN_BODY_FEATURES = 3


class UnreadableField(ValueError):
    """A title or body that cannot be read as text (a number, a dict, an iterator that raises …);
    ``part`` says which: ``"title"`` or ``"body"``."""

    def __init__(self, part: str, exc: Exception) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.part = part


def _read(part: str, clean: Callable[[Any], _T], raw: Any) -> _T:
    try:
        return clean(raw)
    except Exception as exc:  # whatever reading an item's value raises, it is this field's fault
        raise UnreadableField(part, exc) from exc


@dataclass(frozen=True)
class Fingerprints:
    """Fingerprints of one item, ``None`` where there was too little text, plus what they came from."""

    title: int | None
    body: int | None
    title_text: str
    body_chars: int
    numbers: str | None = None  # number signature of the body (None: no body to compare)
    sentences: tuple[str, ...] = ()  # sentence signature of the body (empty: none)
    figures: bool = False  # the body is figure-heavy (signatures.FIGURE_HEAVY_SHARE): body matches need its numbers
    short_body: str | None = None  # digest of a body too short to fingerprint (signatures.short_body_digest)
    main_text: bool = False  # the body was a page, reduced to its main text (stat simhash/main_text)
    title_features: int = 0  # how many features the title fingerprint votes (the rule's TITLE_ALONE_FEATURES)
    chars: str | None = None  # a short body's character key (text.similarity.char_key): the body tier's second check

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
        main_content: bool | None = None,
        sentences: bool = True,
        tf: str = "linear",
        max_share: float | None = defaults.MAX_SHARE,
        profile: str = defaults.PROFILE,
    ) -> None:
        if bits not in SUPPORTED_BITS:
            raise ValueError(f"fingerprint size must be one of {SUPPORTED_BITS} bits, not {bits!r}")
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, not {profile!r}")
        self.profile = profile
        #: Bodies with a character key shorter than this keep it (the body tier's second check).
        self.chars_limit = SHORT_PROFILE_CHARS if profile == "short" else SHORT_TEXT_CHARS
        if profile == "short" and min_body_chars == DEFAULT_MIN_BODY_CHARS:
            min_body_chars = SHORT_MIN_BODY_CHARS
        self.bits = bits
        self.features = FeatureExtractor(top_k=top_k, stop_words=stop_words, user_dict=user_dict, tf=tf,
                                         max_share=max_share)
        self.title_patterns = tuple(re.compile(p) if isinstance(p, str) else p for p in title_patterns)
        self.min_title_chars = min_title_chars
        self.min_body_chars = min_body_chars
        self.min_body_features = 1 if profile == "short" else _MIN_BODY_FEATURES
        #: Texts keep their character key from this many characters: in the short profile, every text
        #: it fingerprints, so that none of its matches is taken on a fingerprint alone.
        self.chars_least = 1 if profile == "short" else MIN_KEY_CHARS
        self.main_content = main_content
        self.sentences = sentences  # sentence signatures: the sentence tier, and the title tier's body check

    def prepare(self) -> None:
        """Load now what the first fingerprint would (the segmenter's route): before worker
        processes are forked, so that they share it."""
        self.features.segmenter.prepare()

    @property
    def features_version(self) -> str:
        """What an index records as its ``features_version``: :data:`~.index.base.FEATURES_VERSION`,
        then each weighting setting that differs from its default (``;top_k=32``, ``;tf=log``,
        ``;max_share=0.2``): body fingerprints weighted otherwise cannot be compared with ours, so an
        index built with other weights is refused rather than silently mixed."""
        f = self.features
        settings = (
            ("top_k", f.top_k, DEFAULT_TOP_K), ("tf", f.tf, "linear"), ("max_share", f.max_share, defaults.MAX_SHARE),
            ("profile", self.profile, "news"),
        )
        return FEATURES_VERSION + "".join(f";{name}={value}" for name, value, default in settings if value != default)

    def clean_title(self, raw: Any) -> str:
        """The normalized title (site suffixes and repost marks removed); the short profile has none."""
        return "" if self.profile == "short" else normalize_title(raw, self.title_patterns)

    def clean_body(self, raw: Any) -> str:
        """The normalized body text (HTML parsed; a page reduced to its main text, see :meth:`is_page`;
        in an HTML fragment, link-heavy blocks left out unless ``main_content`` is False)."""
        return self._clean_body(raw, self.is_page(raw))

    def _clean_body(self, raw: Any, page: bool) -> str:
        if page:
            text = normalize_text(main_text(raw))
        else:
            text = normalize_body(raw, drop_link_blocks=self.main_content is not False)
        return unstuff(text) if self.profile == "short" else text

    def is_page(self, raw: Any) -> bool:
        """Is this body reduced to its main text? ``main_content`` True: every HTML body; False:
        none; None (default): bodies that look like a whole page or a link-dense block
        (:func:`~.normalize.looks_like_page`), so ``response.css("body").get()`` still works."""
        if not isinstance(raw, (str, bytes)) or self.main_content is False:
            return False
        return self.main_content is True or looks_like_page(raw)

    def title(self, raw: Any) -> int | None:
        """Fingerprint of a title, or None when it is too short to be trusted."""
        return self._title_fp(self.clean_title(raw))

    def body(self, raw: Any) -> int | None:
        """Fingerprint of a body (HTML or text), or None when it is too short to be trusted."""
        return self._body_fp(self.clean_body(raw))

    def fingerprint(self, title: Any, body: Any) -> Fingerprints:
        """Both fingerprints of an item; :class:`UnreadableField` if either cannot be read."""
        title_text = _read("title", self.clean_title, title)
        page = _read("body", self.is_page, body)
        body_text = _read("body", lambda raw: self._clean_body(raw, page), body)
        body_fp = self._body_fp(body_text)
        short = short_body_digest(body_text) if body_fp is None else None
        title_features, title_fp = self._title_features_fp(title_text)
        return Fingerprints(
            title_fp, body_fp, title_text, len(body_text),
            # no body to speak of: no numbers to compare either (a title-only copy matches its title)
            number_signature(body_text) if body_fp is not None or short is not None else None,
            sentence_signature(body_text) if self.sentences else (),
            figure_share(body_text) >= FIGURE_HEAVY_SHARE, short, page, title_features,
            char_key(body_text, self.chars_limit, self.chars_least) if body_fp is not None else None,
        )

    def _title_fp(self, text: str) -> int | None:
        return self._title_features_fp(text)[1]

    def _title_features_fp(self, text: str) -> tuple[int, int | None]:
        """``(number of features, fingerprint)`` of a normalized title; ``(0, None)`` when too short."""
        if len(text) < self.min_title_chars:
            return 0, None
        count, fingerprint = self.features.fingerprint(text, body=False, bits=self.bits)
        return (count, fingerprint) if count >= _MIN_TITLE_FEATURES else (0, None)

    def _body_fp(self, text: str) -> int | None:
        if len(text) < self.min_body_chars:
            return None
        count, fingerprint = self.features.fingerprint(text, body=True, bits=self.bits)
        return fingerprint if count >= self.min_body_features else None
