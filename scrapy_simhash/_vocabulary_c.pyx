# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A text's whole way from characters to fingerprint compiled (optional: :mod:`.features` and
:mod:`.simhash` fall back to their pure-Python versions, which give the same words and
fingerprints): the feature word of a token (:func:`feature_word`), the words an extractor has met
with their IDF and digests (:class:`Vocabulary`), :meth:`Vocabulary.fingerprint` (the cut, feature
words, TF-IDF, top-k, share cap, bit vote) and the bit vote alone (:func:`vote`).

The fingerprint's pass takes the words of a block where the route (:class:`._segment_c.Router`,
called at C level through ``_segment_c.pxd``) puts them, as word numbers, making no string for a
token it has met (:meth:`Vocabulary._block`). The vote makes the same floating-point additions in
the same order as ``simhash._vote_python``.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from cpython.pythread cimport (NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock, PyThread_type_lock)

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t *size) except NULL
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcmp, memcpy, memset

from ._packed cimport Slot, Table, _pack, _table_init, _table_put, _table_slot
from ._segment_c cimport Hmm, Router, _hmm_words, _in_block, _is_han

from hashlib import blake2b as _blake2b
from sys import getswitchinterval as _getswitchinterval
from time import monotonic as _monotonic
from time import sleep as _sleep


cdef object _feature_word(str token, object stop_words):
    r"""``FeatureExtractor._word``: the feature word of a token, or None. ``_NO_WORD`` (``[\W_]+``)
    is "no alphanumeric character" (``\w`` is ``str.isalnum()`` or ``_``), ``_NUMBER`` and ``_HAN``
    on one character are "a decimal digit" and "in ``[\u3400-\u9fff\uf900-\ufaff]``"."""
    cdef str word = token.strip().lower()
    cdef Py_UCS4 c
    cdef bint alnum = False
    if not word:
        return None
    for c in word:
        if c.isalnum():
            alnum = True
            break
    if not alnum or word in stop_words:
        return None
    if len(word) == 1:
        c = word[0]
        if not (c.isdecimal() or 0x3400 <= c <= 0x9FFF or 0xF900 <= c <= 0xFAFF):
            return None  # a lone Latin letter carries nothing
    return word


def feature_word(str token, object stop_words):
    """The compiled ``FeatureExtractor._word`` (tested equal to it)."""
    return _feature_word(token, stop_words)


#: :meth:`Vocabulary.fingerprint` looks at the clock every this many blocks (~1,000 characters)
#: and, once it has run for the interpreter's switch interval, sleeps :data:`_PAUSE` seconds
#: without the interpreter lock: a thread waiting for it runs. (Releasing it without sleeping is
#: not enough: the waiting thread is still waking up when this one takes the lock back.)
cdef int _YIELD_BLOCKS = 64
cdef double _PAUSE = 0.0001


cdef class _MappedIdf:
    """The arrays of a ``tables.MappedTable`` (its cache file's bytes), checked once: the offsets
    rise from 0 to the end of the words, each hashed index is a word's, an empty slot remains (a probe
    ends). A table that fails is looked up through its ``Mapping`` methods instead."""

    cdef const double[:] values
    cdef const unsigned int[:] offsets
    cdef const unsigned char[:] words
    cdef const unsigned char[:] slot_bytes
    cdef Table table
    cdef Py_ssize_t count

    def __cinit__(self, object mapped):
        cdef Py_ssize_t i, n, slots
        cdef const Slot *slot
        self.values, self.offsets, self.words = mapped.value_array, mapped.offsets, mapped.words_blob
        self.slot_bytes = mapped.key_slots
        n = self.count = self.values.shape[0]
        if self.offsets.shape[0] != n + 1 or self.offsets[0] != 0 or self.offsets[n] != self.words.shape[0]:
            raise ValueError("offsets do not span the words")
        for i in range(n):
            if self.offsets[i + 1] <= self.offsets[i] or self.words[self.offsets[i + 1] - 1] != 10:
                raise ValueError("offsets out of order")
        slots = self.slot_bytes.shape[0] // sizeof(Slot)
        if slots < 1024 or slots & (slots - 1):
            raise ValueError("not a power of two of slots")
        self.table.slots = <Slot *> &self.slot_bytes[0]  # read only: never put to
        self.table.mask = slots - 1
        self.table.shift = 64
        while slots > 1:
            slots >>= 1
            self.table.shift -= 1
        self.table.used = 0
        for i in range(<Py_ssize_t> self.table.mask + 1):
            slot = &self.table.slots[i]
            if slot.key:
                if not (0 <= slot.value < n) or <Py_ssize_t> slot.value != slot.value:
                    raise ValueError("a slot out of the table")
                self.table.used += 1
        if self.table.used > <Py_ssize_t> self.table.mask:
            raise ValueError("no empty slot")

    cdef inline int _compare(self, Py_ssize_t i, const char *word, Py_ssize_t size) noexcept:
        """The order of word ``i`` and ``word`` (UTF-8 bytes, which sort as the strings do)."""
        cdef Py_ssize_t start = self.offsets[i], length = self.offsets[i + 1] - 1 - self.offsets[i]
        cdef int c = memcmp(&self.words[start], word, min(length, size)) if min(length, size) else 0
        if c:
            return c
        return (length > size) - (length < size)

    cdef object get(self, str word, object missing):
        cdef uint64_t key = _pack(word, 0, len(word))
        cdef Slot *slot
        cdef Py_ssize_t lo = 0, hi = self.count, mid, size
        cdef const char *utf8
        if key:  # a word of the table equal to it is packable too: it is in the slots or nowhere
            slot = _table_slot(&self.table, key)
            return self.values[<Py_ssize_t> slot.value] if slot.key else missing
        try:
            utf8 = PyUnicode_AsUTF8AndSize(word, &size)
        except UnicodeError:  # lone surrogates: no word of the table (valid UTF-8)
            return missing
        while lo < hi:  # bisect_left
            mid = (lo + hi) // 2
            if self._compare(mid, utf8, size) < 0:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.count and self._compare(lo, utf8, size) == 0:
            return self.values[lo]
        return missing


cdef _MappedIdf _last_mapped = None
cdef object _last_mapped_of = None


cdef _MappedIdf _mapped_idf(object table):
    """The :class:`_MappedIdf` of ``table``, checked once per table and shared."""
    global _last_mapped, _last_mapped_of
    if _last_mapped_of is not table:
        _last_mapped, _last_mapped_of = _MappedIdf(table), table
    return _last_mapped


cdef class Vocabulary:
    """The feature words an extractor has met, numbered, with what the fingerprint needs of each:
    its IDF and its BLAKE2b digests. Tokens are remembered as word numbers (by packed key where they
    can be packed), and so are the blocks that start with another character than a Han one (words
    of Latin script and figures, which recur), so that a text goes from characters to fingerprint
    (:meth:`fingerprint`) over arrays and compact tables, with a dict lookup per Latin block and
    per token never met before. (Chinese blocks rarely recur: remembering them costs more than
    cutting them again.) The same numbers as
    ``FeatureExtractor.words``, ``weights``, ``cap_shares`` and ``simhash``: a token's word is
    ``FeatureExtractor._word``'s, its IDF ``idf.get(word, median)`` (also written to ``word_idf``,
    the extractor's dict).

    One call at a time (a lock: the counts are shared scratch), and :meth:`fingerprint` lets other
    threads run (see :data:`_YIELD_BLOCKS`): a long text is one C call, which the interpreter's
    switch interval cannot interrupt, so without it the crawl's reactor thread would wait for the
    whole text (a pipeline that fingerprints in a thread, ``SIMHASH_WORKERS = 0``)."""

    cdef PyThread_type_lock lock
    cdef dict token_ids  # token → word number, -1: no feature word
    cdef dict word_ids   # feature word → word number
    cdef dict block_ids  # dictionary block → its words' numbers (int32 bytes), in order
    cdef int *char_ids   # per BMP code point, a one-character token: word number + 2, 0: not met yet
    cdef Table token_keys  # a packed token of 2 to 4 characters (see _pack) → its word number (-1: none)
    cdef list words      # word number → feature word
    cdef double *idf
    cdef unsigned char *digests[3]  # digest sizes 4, 8, 16 bytes: per word number
    cdef unsigned char *have        # per word number: bit s set when digests[s] holds its digest
    cdef int *counts                # per word number, 0 between calls
    cdef readonly Py_ssize_t size
    cdef Py_ssize_t capacity
    cdef dict word_idf
    cdef object stop_words, table, median
    cdef _MappedIdf mapped       # the IDF table's arrays (a tables.MappedTable), else None

    def __cinit__(self, dict word_idf, object stop_words, object idf, object median):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError()
        self.word_idf, self.stop_words, self.table, self.median = word_idf, stop_words, idf, median
        if type(idf).__name__ == "MappedTable":  # looked up in its bytes here, not through Mapping.get
            try:
                self.mapped = _mapped_idf(idf)
            except ValueError:
                self.mapped = None
        self.char_ids = <int *> calloc(65536, sizeof(int))
        if self.char_ids == NULL:
            raise MemoryError()
        self.clear()

    def __dealloc__(self):
        free(self.char_ids)
        self._free()
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    cdef void _enter(self) noexcept:
        if not PyThread_acquire_lock(self.lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self.lock, WAIT_LOCK)

    cdef void _free(self):
        cdef int s
        free(self.idf)
        free(self.have)
        free(self.counts)
        free(self.token_keys.slots)
        self.token_keys.slots = NULL
        for s in range(3):
            free(self.digests[s])
            self.digests[s] = NULL
        self.idf = NULL
        self.have = NULL
        self.counts = NULL

    def clear(self):
        """Forget every word (``word_idf`` is the caller's to clear)."""
        self._enter()
        try:
            self._free()
            self.token_ids, self.word_ids, self.block_ids, self.words = {}, {}, {}, []
            memset(self.char_ids, 0, 65536 * sizeof(int))
            _table_init(&self.token_keys, 0)
            self.size = self.capacity = 0
        finally:
            PyThread_release_lock(self.lock)

    def clear_blocks(self):
        """Forget the words of the blocks (the dictionary changed)."""
        self._enter()
        self.block_ids = {}
        PyThread_release_lock(self.lock)

    cdef void _grow(self) except *:
        cdef Py_ssize_t cap = max(1024, 2 * self.capacity)
        cdef int s
        cdef double *idf = <double *> realloc(self.idf, cap * sizeof(double))
        cdef unsigned char *have
        cdef unsigned char *d
        cdef int *counts
        if idf == NULL:
            raise MemoryError()
        self.idf = idf
        have = <unsigned char *> realloc(self.have, cap)
        if have == NULL:
            raise MemoryError()
        self.have = have
        counts = <int *> realloc(self.counts, cap * sizeof(int))
        if counts == NULL:
            raise MemoryError()
        self.counts = counts
        memset(self.counts + self.capacity, 0, (cap - self.capacity) * sizeof(int))
        for s in range(3):
            d = <unsigned char *> realloc(self.digests[s], cap * (4 << s))
            if d == NULL:
                raise MemoryError()
            self.digests[s] = d
        self.capacity = cap

    cdef int _id(self, object token) except -2:
        """The word number of a token (-1: no feature word), learnt on first sight."""
        cdef PyObject *known = PyDict_GetItem(self.token_ids, token)
        cdef int i
        if known != NULL:
            return <int> <object> known
        word = _feature_word(<str> token, self.stop_words)
        if word is None:
            i = -1
        else:
            known = PyDict_GetItem(self.word_ids, word)
            if known != NULL:
                i = <int> <object> known
            else:
                known = PyDict_GetItem(self.word_idf, word)
                if known != NULL:
                    value = <object> known
                else:
                    value = self.word_idf[word] = self._idf_of(<str> word)
                if self.size == self.capacity:
                    self._grow()
                i = self.size
                self.idf[i] = value
                self.have[i] = 0
                self.words.append(word)
                self.word_ids[word] = i
                self.size += 1
        self.token_ids[token] = i
        return i

    cdef object _idf_of(self, str word):
        """``idf.get(word, median)``; a MappedTable looked up in its bytes."""
        if self.mapped is None:
            return self.table.get(word, self.median)
        return self.mapped.get(word, self.median)

    cdef inline int _char_id(self, str text, Py_ssize_t i) except -2:
        """The word number of the one-character token ``text[i]``."""
        cdef Py_UCS4 c = text[i]
        cdef int known
        if c >= 65536:
            return self._id(text[i:i + 1])
        known = self.char_ids[c]
        if known == 0:
            known = self.char_ids[c] = self._id(text[i:i + 1]) + 2
        return known - 2

    def words_of(self, list tokens):
        """``FeatureExtractor.words`` of these tokens: their feature words, in order."""
        cdef list out = []
        cdef int i
        self._enter()
        try:
            for token in tokens:
                i = self._id(token)
                if i >= 0:
                    out.append(self.words[i])
        finally:
            PyThread_release_lock(self.lock)
        return out

    cdef int _span_id(self, str text, Py_ssize_t lo, Py_ssize_t hi) except -2:
        """The word number of the token ``text[lo:hi]``: a packed token looked up in
        ``token_keys``, without making its string once it has been met."""
        cdef uint64_t key
        cdef Slot *slot
        cdef int i
        if hi - lo == 1:
            return self._char_id(text, lo)
        key = _pack(text, lo, hi)
        if key == 0:
            return self._id(text[lo:hi])
        slot = _table_slot(&self.token_keys, key)
        if slot.key:
            return <int> slot.value
        i = self._id(text[lo:hi])
        _table_put(&self.token_keys, key, i)
        return i

    cdef Py_ssize_t _run_ids(self, str text, Py_ssize_t lo, Py_ssize_t hi, Router router, dict unknown, Hmm hmm,
                             object force_split, Py_ssize_t cache_max, int *ids, Py_ssize_t k) except -1:
        """``Router._flush`` of the run of single characters ``text[lo:hi]``, its feature words'
        numbers written to ``ids`` from ``k`` on; where they end."""
        cdef Py_ssize_t x, n
        cdef int i
        cdef str word
        cdef Py_ssize_t *spans
        if hi - lo == 1 or router._is_word(text, lo, hi):  # one character, or a known word's one by one
            for x in range(lo, hi):
                i = self._char_id(text, x)
                if i >= 0:
                    ids[k] = i
                    k += 1
            return k
        if not force_split:  # the HMM's words where they are, no strings made (nor remembered)
            spans = <Py_ssize_t *> malloc((3 * (hi - lo) + 1) * sizeof(Py_ssize_t))
            if spans == NULL:
                raise MemoryError()
            try:
                n = hmm._spans(text, lo, hi, spans)
                for x in range(n):
                    i = self._span_id(text, spans[3 * x], spans[3 * x + 1])
                    if i >= 0:
                        ids[k] = i
                        k += 1
            finally:
                free(spans)
            return k
        for word in _hmm_words(text[lo:hi], unknown, hmm, force_split, cache_max):
            i = self._span_id(word, 0, len(word))
            if i >= 0:
                ids[k] = i
                k += 1
        return k

    cdef bytes _block(self, str text, Py_ssize_t lo, Py_ssize_t hi, Router router, dict unknown, Hmm hmm,
                      object force_split, Py_ssize_t cache_max):
        """The word numbers of the dictionary block ``text[lo:hi]``'s words (feature words only),
        in order (remembered unless it starts with a Han character): ``Router._cut_block``'s words
        without making their strings."""
        cdef str block = None
        cdef PyObject *known
        cdef Py_ssize_t n = hi - lo, k = 0, x, y, run = -1
        cdef int i
        cdef int *ids
        cdef Py_ssize_t *end
        if not _is_han(text[lo]):
            block = text[lo:hi]
            known = PyDict_GetItem(self.block_ids, block)
            if known != NULL:
                return <bytes> known
        ids = <int *> malloc(n * sizeof(int))  # a word has at least one character
        end = <Py_ssize_t *> malloc(n * sizeof(Py_ssize_t))
        try:
            if ids == NULL or end == NULL:
                raise MemoryError()
            router._route(text, lo, hi, end)
            x = lo
            while x < hi:
                y = lo + end[x - lo]
                if y - x == 1:
                    if run < 0:
                        run = x
                else:
                    if run >= 0:
                        k = self._run_ids(text, run, x, router, unknown, hmm, force_split, cache_max, ids, k)
                        run = -1
                    i = self._span_id(text, x, y)
                    if i >= 0:
                        ids[k] = i
                        k += 1
                x = y
            if run >= 0:
                k = self._run_ids(text, run, hi, router, unknown, hmm, force_split, cache_max, ids, k)
            out = PyBytes_FromStringAndSize(<char *> ids, k * sizeof(int))
        finally:
            free(ids)
            free(end)
        if block is None:
            return out
        if len(self.block_ids) >= cache_max:
            self.block_ids = {}
        self.block_ids[block] = out
        return out

    def fingerprint(self, str text, Router router not None, dict unknown, Hmm hmm not None, object force_split,
                    Py_ssize_t cache_max,
                    Py_ssize_t top_k, double max_share, object tf, int bits):
        """``(number of features, fingerprint)`` of a normalized text: its words as
        ``Segmenter.cut`` and ``FeatureExtractor.words`` give them (blocks cut by ``router``, see
        :func:`cut_text`), weighed by ``FeatureExtractor.weights`` (``top_k`` ≤ 0: every word),
        capped by ``cap_shares`` when ``max_share`` > 0, voted by ``simhash``. ``tf`` None: the
        linear term frequency, else the callable of ``TF_MODES``."""
        cdef Py_ssize_t n = len(text), i = 0, j, k, nt = 0, kept, nt_counted = -1
        cdef bytes ids
        cdef const int *p
        cdef int word
        cdef int *touched = <int *> malloc((n + 1) * sizeof(int))  # word numbers, first occurrence first
        cdef double *w = NULL
        cdef int blocks = 0
        cdef double ran_since = _monotonic()
        if touched == NULL:
            raise MemoryError()
        self._enter()
        try:
            while i < n:
                if _in_block(text[i]):
                    blocks += 1
                    if blocks == _YIELD_BLOCKS:  # let a thread that waits for the interpreter run
                        blocks = 0
                        if _monotonic() - ran_since >= _getswitchinterval():
                            _sleep(_PAUSE)
                            ran_since = _monotonic()
                    j = i + 1
                    while j < n and _in_block(text[j]):
                        j += 1
                    ids = self._block(text, i, j, router, unknown, hmm, force_split, cache_max)
                    p = <const int *> PyBytes_AS_STRING(ids)
                    for k in range(PyBytes_GET_SIZE(ids) // <Py_ssize_t> sizeof(int)):
                        word = p[k]
                        if self.counts[word] == 0:
                            touched[nt] = word
                            nt += 1
                        self.counts[word] += 1
                    i = j
                    continue
                if text[i] == u'\r' and i + 1 < n and text[i + 1] == u'\n':
                    word = self._id(u"\r\n")
                    i += 2
                else:
                    word = self._char_id(text, i)
                    i += 1
                if word >= 0:
                    if self.counts[word] == 0:
                        touched[nt] = word
                        nt += 1
                    self.counts[word] += 1
            if nt == 0:
                return 0, 0
            w = <double *> malloc(2 * nt * sizeof(double))
            if w == NULL:
                raise MemoryError()
            for k in range(nt):
                word = touched[k]
                if tf is None:
                    w[k] = <double> self.counts[word] * self.idf[word]
                else:
                    w[k] = <double> tf(self.counts[word]) * self.idf[word]
            _reset(self.counts, touched, nt)
            nt_counted = nt
            kept = nt
            if top_k > 0 and nt > top_k:  # the top_k heaviest and every one tied with the last of them
                kept = _top(w, w + nt, touched, nt, top_k)
            if max_share > 0:
                _cap_shares(w, w + nt, kept, max_share)
            return kept, self._vote(touched, w, kept, bits)
        finally:
            if nt_counted < 0:  # an error while counting
                _reset(self.counts, touched, nt)
            PyThread_release_lock(self.lock)
            free(touched)
            free(w)

    cdef object _vote(self, const int *ids, const double *w, Py_ssize_t n, int bits):
        """``simhash._vote_python``: the same additions in the same order (``v + (±1.0 × w)`` is
        ``v ± w``), zero weights skipped."""
        cdef Py_ssize_t nbytes = bits // 8, i
        cdef int s = 0 if bits == 32 else (1 if bits == 64 else 2)
        cdef unsigned char *d
        for i in range(n):
            if w[i] and not self.have[ids[i]] & (1 << s):
                digest = _blake2b(self.words[ids[i]].encode("utf-8"), digest_size=nbytes).digest()
                memcpy(self.digests[s] + ids[i] * nbytes, PyBytes_AS_STRING(digest), nbytes)
                self.have[ids[i]] |= 1 << s
        return _vote_digests(self.digests[s], ids, w, n, bits)


cdef inline void _reset(int *counts, const int *ids, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        counts[ids[i]] = 0


cdef Py_ssize_t _top(double *w, double *ordered, int *ids, Py_ssize_t n, Py_ssize_t top_k) noexcept:
    """Keep, in order, the weights (and ids) at or above the ``top_k``-th largest; how many."""
    cdef Py_ssize_t i, kept = 0
    cdef double cutoff
    memcpy(ordered, w, n * sizeof(double))
    qsort(ordered, n, sizeof(double), _descending)
    cutoff = ordered[top_k - 1]
    for i in range(n):
        if w[i] >= cutoff:
            w[kept] = w[i]
            ids[kept] = ids[i]
            kept += 1
    return kept


cdef object _vote_digests(const unsigned char *digests, const int *ids, const double *w, Py_ssize_t n, int bits):
    """The bit vote over digests (``digests + ids[i] * bits / 8``, big-endian) weighing ``w``."""
    cdef double votes[128]
    cdef Py_ssize_t i, j, nbytes = bits // 8
    cdef int k
    cdef const unsigned char *d
    cdef unsigned char byte
    cdef double x
    cdef uint64_t lo = 0, hi = 0
    for j in range(bits):
        votes[j] = 0.0
    for i in range(n):
        x = w[i]
        if not x:
            continue
        d = digests + (ids[i] if ids != NULL else i) * nbytes
        for j in range(nbytes):  # the last byte holds bits 0-7
            byte = d[nbytes - 1 - j]
            for k in range(8):
                if (byte >> k) & 1:
                    votes[8 * j + k] += x
                else:
                    votes[8 * j + k] -= x
    for j in range(min(bits, 64)):
        if votes[j] > 0:
            lo |= (<uint64_t> 1) << j
    for j in range(64, bits):
        if votes[j] > 0:
            hi |= (<uint64_t> 1) << (j - 64)
    return lo if bits <= 64 else (<object> hi) << 64 | lo


cdef int _descending(const void *a, const void *b) noexcept nogil:
    cdef double x = (<const double *> a)[0], y = (<const double *> b)[0]
    return -1 if x > y else (1 if x < y else 0)


cdef void _cap_shares(double *w, double *ordered, Py_ssize_t n, double max_share) except *:
    """``features.cap_shares`` on the n weights ``w``, in place (``ordered``: room for n doubles)."""
    cdef Py_ssize_t k, i
    cdef double rest, c, x
    memcpy(ordered, w, n * sizeof(double))
    qsort(ordered, n, sizeof(double), _descending)
    rest = sum([ordered[i] for i in range(n)])  # Python's sum: compensated from 3.12 on
    for k in range(n):
        if <double> k * max_share >= 1:
            break
        # The k heaviest capped at c, the others summing to `rest`: c = share × (k·c + rest).
        c = max_share * rest / (1 - <double> k * max_share)
        if ordered[k] <= c:
            if k:
                for i in range(n):
                    if c < w[i]:  # min(w, c)
                        w[i] = c
            return
        rest -= ordered[k]
    x = ordered[n - 1]
    for i in range(n):
        w[i] = x


def vote(object items, int bits):
    """``simhash._vote_python(items, bits)`` for ``(feature, weight)`` items."""
    cdef list digests = []
    cdef list weights = []
    cdef Py_ssize_t i, n, nbytes = bits // 8
    cdef double *w
    cdef bytes joined
    for feature, weight in items:
        if weight:
            digests.append(_blake2b(feature.encode("utf-8"), digest_size=nbytes).digest())
            weights.append(weight)
    n = len(weights)
    w = <double *> malloc((n + 1) * sizeof(double))
    if w == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            w[i] = weights[i]
        joined = b"".join(digests)
        return _vote_digests(joined, NULL, w, n, bits)
    finally:
        free(w)
