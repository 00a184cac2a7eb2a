# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The engine's hot loops compiled (optional: :mod:`.segment`, :mod:`.features` and :mod:`.simhash`
fall back to their pure-Python versions, which give the same words and fingerprints): the route
through a block (:class:`Router`, ``Segmenter._cut_block``), the HMM (:class:`Hmm`), the cut of a
text (:func:`cut_text`), and a text's whole way from characters to fingerprint
(:meth:`Vocabulary.fingerprint`: feature words, TF-IDF, top-k, share cap, bit vote; :func:`vote`).

The route and the Viterbi are jieba's: the same floating-point operations in the same order (C
doubles are the IEEE doubles of Python floats, ``log`` is the C library's that ``math.log`` calls;
there are only additions and comparisons, nothing a compiler may contract or reorder without
-ffast-math). What is faster in the route is the dictionary lookup. The prefix dictionary
is a dict of ~500,000 words, so a lookup costs a few cache misses (its index, its entry, the key
string) plus building the substring; nearly all lookups are of 1 to 3 characters. Here those go to
two compact tables built from the dict: one slot per BMP character, and an open-addressing table
keyed by the 2 or 3 code points packed into 63 bits (the key *is* the word: no hash collisions to
verify). Both hold ``log(freq) - log(total)``, the term jieba adds. Longer fragments, characters
outside the BMP and NUL go to the dict itself.
"""

from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.list cimport PyList_GET_ITEM
from cpython.unicode cimport PyUnicode_Compare
from cpython.object cimport PyObject
from cpython.pythread cimport (NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock, PyThread_type_lock)
from libc.math cimport INFINITY, NAN, isnan, log
from libc.stdint cimport uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcpy, memset

from hashlib import blake2b as _blake2b
from sys import getswitchinterval as _getswitchinterval
from time import monotonic as _monotonic
from time import sleep as _sleep

cdef uint64_t _MULT = 11400714819323198485ULL  # 2^64 / golden ratio: Fibonacci hashing

cdef struct Slot:
    uint64_t key  # 0: empty
    double lp     # log(freq) - log(total); INFINITY: a prefix only (frequency 0)


cdef inline uint64_t _pack(Py_UCS4 a, Py_UCS4 b, Py_UCS4 c):
    return <uint64_t> a | (<uint64_t> b << 21) | (<uint64_t> c << 42)


cdef class Router:
    """The route through one prefix dictionary (``Segmenter._cut_block``), for one ``total``.
    ``ValueError`` when the dictionary holds a frequency below 0 or that is not a number (the
    pure-Python route handles those as jieba does)."""

    cdef double *one    # per BMP code point: NAN absent, INFINITY prefix only, else the log term
    cdef Slot *table
    cdef uint64_t mask
    cdef int shift
    cdef dict freq
    cdef double logtotal

    def __cinit__(self, dict freq, double logtotal):
        cdef Py_ssize_t i, pos = 0, n = 0, slots = 1024
        cdef int bits = 10
        cdef double f, lp
        cdef PyObject *key
        cdef PyObject *value
        cdef Py_ssize_t k
        cdef Py_UCS4 a, b, c
        self.freq = freq
        self.logtotal = logtotal
        self.one = <double *> malloc(65536 * sizeof(double))
        if self.one == NULL:
            raise MemoryError()
        for i in range(65536):
            self.one[i] = NAN
        n = len(freq)  # at least the words of 2 or 3 characters: one pass over the dict, not two
        while slots < 2 * n:
            slots *= 2
            bits += 1
        self.table = <Slot *> calloc(slots, sizeof(Slot))
        if self.table == NULL:
            raise MemoryError()
        self.mask = slots - 1
        self.shift = 64 - bits
        pos = 0
        while PyDict_Next(freq, &pos, &key, &value):
            if type(<object> key) is not str:
                continue
            k = len(<str> key)
            if not 1 <= k <= 3:
                continue
            if type(<object> value) is not int and type(<object> value) is not float:
                raise ValueError("a frequency that is not a number")
            f = <object> value
            if not f >= 0:
                raise ValueError("a frequency below 0")
            lp = INFINITY if f == 0 else log(f) - logtotal
            a = (<str> key)[0]
            if k == 1:
                if 0 < a < 65536:
                    self.one[a] = lp
                continue
            b = (<str> key)[1]
            c = (<str> key)[2] if k == 3 else 0
            if a != 0 and b != 0 and (k == 2 or c != 0):
                self._put(_pack(a, b, c), lp)

    def __dealloc__(self):
        free(self.one)
        free(self.table)

    cdef void _put(self, uint64_t key, double lp):
        cdef uint64_t i = (key * _MULT) >> self.shift
        while self.table[i].key != 0 and self.table[i].key != key:
            i = (i + 1) & self.mask
        self.table[i].key = key
        self.table[i].lp = lp

    cdef inline double _get(self, uint64_t key):
        """The log term of a packed word, INFINITY for a prefix, NAN when absent."""
        cdef uint64_t i = (key * _MULT) >> self.shift
        while True:
            if self.table[i].key == key:
                return self.table[i].lp
            if self.table[i].key == 0:
                return NAN
            i = (i + 1) & self.mask

    cdef double _lookup(self, str block, Py_ssize_t start, Py_ssize_t stop) except? -2.0:
        """The log term of ``block[start:stop]``: INFINITY for a prefix, NAN when absent."""
        cdef Py_ssize_t k = stop - start
        cdef Py_UCS4 a, b, c
        cdef PyObject *value
        cdef double f
        if k == 1:
            a = block[start]
            if 0 < a < 65536:
                return self.one[a]
        elif k <= 3:
            a = block[start]
            b = block[start + 1]
            c = block[start + 2] if k == 3 else 0
            if a != 0 and b != 0 and (k == 2 or c != 0):
                return self._get(_pack(a, b, c))
        value = PyDict_GetItem(self.freq, block[start:stop])
        if value == NULL:
            return NAN
        f = <object> value
        if f < 0:
            raise ValueError("math domain error")  # math.log's error
        return INFINITY if f == 0 else log(f) - self.logtotal

    def cut_block(self, str block, dict unknown, Hmm hmm not None, object force_split, Py_ssize_t cache_max):
        """The words of ``block`` (``Segmenter._cut_block``): the most probable route through the
        prefix dictionary; runs of single characters as ``Segmenter._flush`` cuts them, unknown
        runs remembered in ``unknown`` (cleared at ``cache_max``)."""
        return self._cut_block(block, unknown, hmm, force_split, cache_max)

    cdef tuple _cut_block(self, str block, dict unknown, Hmm hmm, object force_split, Py_ssize_t cache_max):
        cdef Py_ssize_t n = len(block)
        cdef Py_ssize_t start, i, x, y, best_end, buf_start
        cdef double best, p, lp
        cdef bint found
        cdef double logtotal = self.logtotal
        cdef double *score = <double *> malloc((n + 1) * sizeof(double))
        cdef Py_ssize_t *end = <Py_ssize_t *> malloc((n + 1) * sizeof(Py_ssize_t))
        cdef list out = []
        if score == NULL or end == NULL:
            free(score)
            free(end)
            raise MemoryError()
        try:
            score[n] = 0.0
            for start in range(n - 1, -1, -1):
                found = False
                best = 0.0
                best_end = start
                i = start
                while i < n:
                    lp = self._lookup(block, start, i + 1)
                    if isnan(lp):
                        break
                    if lp != INFINITY:
                        p = lp + score[i + 1]
                        if not found or p >= best:  # ties: the later end, as max() over (p, end)
                            best = p
                            best_end = i
                            found = True
                    i += 1
                if not found:  # no dictionary word starts here: the character alone, frequency 1
                    best = 0.0 - logtotal + score[start + 1]
                score[start] = best
                end[start] = best_end + 1

            buf_start = -1  # start of a run of single characters
            x = 0
            while x < n:
                y = end[x]
                if y - x == 1:
                    if buf_start < 0:
                        buf_start = x
                else:
                    if buf_start >= 0:
                        self._flush(block[buf_start:x], out, unknown, hmm, force_split, cache_max)
                        buf_start = -1
                    out.append(block[x:y])
                x = y
            if buf_start >= 0:
                self._flush(block[buf_start:], out, unknown, hmm, force_split, cache_max)
        finally:
            free(score)
            free(end)
        return tuple(out)

    cdef void _flush(self, str buf, list out, dict unknown, Hmm hmm, object force_split,
                     Py_ssize_t cache_max) except *:
        """``Segmenter._flush``: one character as is, a known word's characters one by one, an
        unknown run through the HMM."""
        cdef PyObject *value
        cdef PyObject *known
        cdef list words
        if len(buf) == 1:
            out.append(buf)
            return
        value = PyDict_GetItem(self.freq, buf)
        if value != NULL and <object> value:
            out.extend(buf)
            return
        known = PyDict_GetItem(unknown, buf)
        if known != NULL:
            out.extend(<object> known)
            return
        if len(unknown) >= cache_max:
            unknown.clear()
        words = []
        hmm._cut(buf, 0, len(buf), force_split, words)
        unknown[buf] = tuple(words)
        out.extend(words)


cdef inline double _emit(dict table, object c, double low) except? -1.0:
    cdef PyObject *value = PyDict_GetItem(table, c)
    return low if value == NULL else <double> <object> value


cdef enum:
    _HAN_FIRST = 0x4E00  # finalseg.re_han: [一-鿕]
    _HAN_LAST = 0x9FD5


cdef inline bint _is_han(Py_UCS4 c):
    return _HAN_FIRST <= c <= _HAN_LAST


cdef class Hmm:
    """jieba's ``finalseg`` B/M/E/S Viterbi (``segment._viterbi_words``) over one set of tables:
    ``start`` = (B, M, E, S) start log probabilities; ``trans`` = (E→B, S→B, M→M, B→M, S→S, E→S,
    B→E, M→E); the four emission dicts and ``low`` (``MIN_FLOAT``) for what they lack. The emission
    log probabilities of the Han characters (the runs it is given) are copied into one array, the
    others read from the dicts."""

    cdef double s_b, s_m, s_e, s_s
    cdef double t_eb, t_sb, t_mm, t_bm, t_ss, t_es, t_be, t_me
    cdef double low
    cdef dict e_b, e_m, e_e, e_s
    cdef double *emit  # 4 per Han character, B M E S

    def __cinit__(self, tuple start, tuple trans, dict e_b, dict e_m, dict e_e, dict e_s, double low):
        cdef Py_ssize_t i, pos, k, n
        cdef PyObject *key
        cdef PyObject *value
        cdef Py_UCS4 c
        cdef dict table
        self.s_b, self.s_m, self.s_e, self.s_s = start
        self.t_eb, self.t_sb, self.t_mm, self.t_bm, self.t_ss, self.t_es, self.t_be, self.t_me = trans
        self.low = low
        self.e_b, self.e_m, self.e_e, self.e_s = e_b, e_m, e_e, e_s
        n = _HAN_LAST - _HAN_FIRST + 1
        self.emit = <double *> malloc(4 * n * sizeof(double))
        if self.emit == NULL:
            raise MemoryError()
        for i in range(4 * n):
            self.emit[i] = low
        for k, table in enumerate((e_b, e_m, e_e, e_s)):
            pos = 0
            while PyDict_Next(table, &pos, &key, &value):
                if type(<object> key) is str and len(<str> key) == 1:
                    c = (<str> key)[0]
                    if _is_han(c):
                        self.emit[4 * (<Py_ssize_t> c - _HAN_FIRST) + k] = <double> <object> value

    def __dealloc__(self):
        free(self.emit)

    cdef inline void _emissions(self, str run, Py_ssize_t i, double *em) except *:
        cdef Py_UCS4 c = run[i]
        cdef Py_ssize_t at
        if _is_han(c):
            at = 4 * (<Py_ssize_t> c - _HAN_FIRST)
            em[0] = self.emit[at]
            em[1] = self.emit[at + 1]
            em[2] = self.emit[at + 2]
            em[3] = self.emit[at + 3]
        else:
            ch = run[i:i + 1]
            em[0] = _emit(self.e_b, ch, self.low)
            em[1] = _emit(self.e_m, ch, self.low)
            em[2] = _emit(self.e_e, ch, self.low)
            em[3] = _emit(self.e_s, ch, self.low)

    cdef list _words(self, str run, Py_ssize_t lo, Py_ssize_t hi):
        """The words of ``run[lo:hi]``: same sums in the same order, same tie-breaks as jieba."""
        cdef Py_ssize_t n = hi - lo, i, begin, nexti
        cdef double b, m, e, s, nb, nm, ne, ns, x, y
        cdef double em[4]
        cdef unsigned char state, pos
        # back[4 * i + k]: best predecessor of state k (0 B, 1 M, 2 E, 3 S) at position i ≥ 1
        cdef unsigned char *back = <unsigned char *> malloc(4 * n + 4)
        cdef unsigned char *states = <unsigned char *> malloc(n + 1)
        cdef list words = []
        if back == NULL or states == NULL:
            free(back)
            free(states)
            raise MemoryError()
        try:
            self._emissions(run, lo, em)
            b = self.s_b + em[0]
            m = self.s_m + em[1]
            e = self.s_e + em[2]
            s = self.s_s + em[3]
            for i in range(1, n):
                self._emissions(run, lo + i, em)
                x = e + self.t_eb + em[0]
                y = s + self.t_sb + em[0]
                if x > y:
                    nb = x
                    back[4 * i] = 2
                else:
                    nb = y
                    back[4 * i] = 3
                x = m + self.t_mm + em[1]
                y = b + self.t_bm + em[1]
                if x >= y:
                    nm = x
                    back[4 * i + 1] = 1
                else:
                    nm = y
                    back[4 * i + 1] = 0
                x = s + self.t_ss + em[3]
                y = e + self.t_es + em[3]
                if x >= y:
                    ns = x
                    back[4 * i + 3] = 3
                else:
                    ns = y
                    back[4 * i + 3] = 2
                x = b + self.t_be + em[2]
                y = m + self.t_me + em[2]
                if x > y:
                    ne = x
                    back[4 * i + 2] = 0
                else:
                    ne = y
                    back[4 * i + 2] = 1
                b = nb
                m = nm
                e = ne
                s = ns
            state = 2 if e > s else 3
            states[n - 1] = state
            for i in range(n - 1, 0, -1):
                state = back[4 * i + state]
                states[i - 1] = state
            begin = nexti = 0
            for i in range(n):
                pos = states[i]
                if pos == 0:
                    begin = i
                elif pos == 2:
                    words.append(run[lo + begin:lo + i + 1])
                    nexti = i + 1
                elif pos == 3:
                    words.append(run[lo + i:lo + i + 1])
                    nexti = i + 1
            if nexti < n:
                words.append(run[lo + nexti:hi])
        finally:
            free(back)
            free(states)
        return words

    cdef void _cut(self, str text, Py_ssize_t lo, Py_ssize_t hi, object force_split, list out) except *:
        """``segment._hmm_cut(text[lo:hi])`` appended to ``out``: Han runs (``finalseg.re_han``)
        through the Viterbi, words in ``force_split`` one character at a time; the other parts cut
        as ``finalseg.re_skip.split`` cuts them (``[a-zA-Z0-9]+(?:\.\d+)?%?`` and what lies between)."""
        cdef Py_ssize_t i = lo, j, q, r
        cdef Py_UCS4 c
        while i < hi:
            if _is_han(text[i]):
                j = i + 1
                while j < hi and _is_han(text[j]):
                    j += 1
                for word in self._words(text, i, j):
                    if word in force_split:
                        out.extend(word)
                    else:
                        out.append(word)
                i = j
                continue
            j = i + 1
            while j < hi and not _is_han(text[j]):
                j += 1
            while i < j:  # re_skip.split(text[i:j]), the empty pieces left out
                q = i
                while q < j and not _ascii_alnum(text[q]):
                    q += 1
                if q > i:
                    out.append(text[i:q])
                if q == j:
                    break
                r = q + 1
                while r < j and _ascii_alnum(text[r]):
                    r += 1
                if r + 1 < j and text[r] == u'.' and (<Py_UCS4> text[r + 1]).isdecimal():
                    r += 2
                    while r < j and (<Py_UCS4> text[r]).isdecimal():
                        r += 1
                if r < j and text[r] == u'%':
                    r += 1
                out.append(text[q:r])
                i = r
            i = j

    def cut(self, str text, object force_split):
        """``segment._hmm_cut(text)``."""
        cdef list out = []
        self._cut(text, 0, len(text), force_split, out)
        return tuple(out)


cdef inline bint _ascii_alnum(Py_UCS4 c):
    return (u'a' <= c <= u'z') or (u'A' <= c <= u'Z') or (u'0' <= c <= u'9')


cdef inline bint _in_block(Py_UCS4 c):
    """jieba's ``re_han_default``: ``[\u4E00-\u9FD5a-zA-Z0-9+#&\._%\-]``."""
    return _is_han(c) or _ascii_alnum(c) or c == u'+' or c == u'#' or c == u'&' or c == u'.' \
        or c == u'_' or c == u'%' or c == u'-'


def cut_text(str text, Router router not None, dict blocks, dict unknown, Hmm hmm not None, object force_split,
             Py_ssize_t cache_max):
    """``Segmenter.cut(text)`` in one call: blocks (runs of ``re_han_default``) cut by ``router``
    and remembered in ``blocks``, every other character a word by itself except ``"\r\n"``
    (``re_skip_default``), as jieba's ``Tokenizer.cut`` does. Caches are cleared at ``cache_max``."""
    cdef list out = []
    cdef Py_ssize_t n = len(text), i = 0, j
    cdef PyObject *known
    cdef str block
    cdef object words
    while i < n:
        if _in_block(text[i]):
            j = i + 1
            while j < n and _in_block(text[j]):
                j += 1
            block = text[i:j]
            known = PyDict_GetItem(blocks, block)
            if known == NULL:
                if len(blocks) >= cache_max:
                    blocks.clear()
                words = router._cut_block(block, unknown, hmm, force_split, cache_max)
                blocks[block] = words
            else:
                words = <object> known
            out.extend(words)
            i = j
        elif text[i] == u'\r' and i + 1 < n and text[i + 1] == u'\n':
            out.append(u"\r\n")
            i += 2
        else:
            out.append(text[i:i + 1])
            i += 1
    return out


# -- tokens → feature words → TF-IDF → simhash (features.py, simhash.py) ----------------------------


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


cdef class Vocabulary:
    """The feature words an extractor has met, numbered, with what the fingerprint needs of each:
    its IDF and its BLAKE2b digests. Dictionary blocks and tokens are remembered as word numbers, so
    that a text goes from characters to fingerprint (:meth:`fingerprint`) with one dict lookup per
    block (and per token of a block not met before), the rest over arrays. The same numbers as
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
    cdef list words      # word number → feature word
    cdef double *idf
    cdef unsigned char *digests[3]  # digest sizes 4, 8, 16 bytes: per word number
    cdef unsigned char *have        # per word number: bit s set when digests[s] holds its digest
    cdef int *counts                # per word number, 0 between calls
    cdef readonly Py_ssize_t size
    cdef Py_ssize_t capacity
    cdef dict word_idf
    cdef object stop_words, table, median
    cdef list sorted_words       # the IDF table's words, sorted (a tables.SortedTable), else None
    cdef const double[:] sorted_values

    def __cinit__(self, dict word_idf, object stop_words, object idf, object median):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError()
        self.word_idf, self.stop_words, self.table, self.median = word_idf, stop_words, idf, median
        words = getattr(idf, "_words", None)
        if type(words) is list and type(idf).__name__ == "SortedTable":  # looked up here, not through Mapping.get
            self.sorted_words, self.sorted_values = words, idf._values
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
        """``idf.get(word, median)``; a SortedTable bisected here as its ``__getitem__`` does."""
        cdef list words = self.sorted_words
        cdef Py_ssize_t lo = 0, hi, mid
        if words is None:
            return self.table.get(word, self.median)
        hi = len(words)
        while lo < hi:  # bisect_left
            mid = (lo + hi) // 2
            if PyUnicode_Compare(<object> PyList_GET_ITEM(words, mid), word) < 0:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(words) and PyUnicode_Compare(<object> PyList_GET_ITEM(words, lo), word) == 0:
            return self.sorted_values[lo]
        return self.median

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

    cdef bytes _block(self, str block, Router router, dict unknown, Hmm hmm, object force_split,
                      Py_ssize_t cache_max):
        """The word numbers of a dictionary block's words (feature words only), remembered."""
        cdef PyObject *known = PyDict_GetItem(self.block_ids, block)
        cdef Py_ssize_t k = 0
        cdef int i
        cdef int *ids
        if known != NULL:
            return <bytes> known
        tokens = router._cut_block(block, unknown, hmm, force_split, cache_max)
        ids = <int *> malloc((len(tokens) + 1) * sizeof(int))
        if ids == NULL:
            raise MemoryError()
        try:
            for token in tokens:
                i = self._id(token)
                if i >= 0:
                    ids[k] = i
                    k += 1
            out = PyBytes_FromStringAndSize(<char *> ids, k * sizeof(int))
        finally:
            free(ids)
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
                    ids = self._block(text[i:j], router, unknown, hmm, force_split, cache_max)
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
