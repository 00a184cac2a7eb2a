"""Normalized text → fingerprints: words (:mod:`.segment`, jieba's dictionary and IDF tables in
:mod:`.dictionary`), weighted features (:mod:`.features`), the simhash vote (:mod:`.simhash`), the
number and sentence signatures (:mod:`.signatures`), and :class:`~.fingerprinter.Fingerprinter`,
which takes an item's title and body through all of them."""
