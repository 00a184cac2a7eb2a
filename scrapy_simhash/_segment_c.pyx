# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The segmenter's hot loops compiled (optional: where it is not built, :mod:`.segment` cuts with
jieba's own ``Tokenizer.cut``, which gives the same words): the route through a block (:class:`Router`,
jieba's ``Tokenizer.__cut_DAG``), the HMM (:class:`Hmm`) and the cut of a text (:func:`cut_text`). The
fingerprint's pass (:mod:`._vocabulary_c`) cuts through the same classes at C level
(``_segment_c.pxd``).

The route and the Viterbi are jieba's: the same floating-point operations in the same order (C
doubles are the IEEE doubles of Python floats, ``log`` is the C library's that ``math.log`` calls;
there are only additions and comparisons, nothing a compiler may contract or reorder without
-ffast-math). What is faster in the route is the dictionary lookup. The prefix dictionary
is a dict of ~500,000 words, so a lookup costs a few cache misses (its index, its entry, the key
string) plus building the substring; 99 % of the lookups are of 1 to 4 characters. Here those go
to two compact tables built from the dict: one slot per BMP character, and an open-addressing table
keyed by the 2 to 4 code points packed into 64 bits (``_packed.pxd``: the key *is* the word: no
hash collisions to verify). Both hold ``log(freq) - log(total)``, the term jieba adds. Longer
fragments, characters outside the BMP and NUL go to the dict itself.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_KIND, PyUnicode_READ
from libc.math cimport INFINITY, NAN, isnan, log
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from ._packed cimport Slot, Table, _pack, _table_get, _table_init, _table_put


cdef enum:
    _SEEN_BITS = 23


cdef inline uint64_t _seen_bit(uint64_t key) noexcept:
    return (key * 0xC2B2AE3D27D4EB4FULL) >> (64 - _SEEN_BITS)


#: The layout of :meth:`Router.tables` (the slot table, its hash, the seen bits, written 16-byte
#: aligned so that a Router uses them in place): a cached copy of another layout is not read but
#: rebuilt once. Changed whenever the tables' bytes change.
ROUTE_LAYOUT = "2"


cdef inline bint _aligned(const void *p) noexcept:
    """Can ``p`` be read as doubles and 64-bit words (8-byte aligned)?"""
    return (<size_t> p) % 8 == 0


cdef class Router:
    """The route through one prefix dictionary (jieba's ``Tokenizer.__cut_DAG``), for one ``total``.
    ``ValueError`` when the dictionary holds a frequency below 0, infinite or that is not a number
    (jieba's own cut then runs).

    With ``tables`` (what :meth:`tables` gave for the same dictionary and ``logtotal``), the compact
    tables are copied from them instead of built, and ``freq`` need only hold the words they cannot
    (:meth:`unpacked`): the start-up without jieba's 500,000-word dict (:func:`.dictionary.load_route`).
    ``ValueError`` when they are not tables of this layout."""

    # (its attributes are declared in _segment_c.pxd)

    def __cinit__(self, dict freq, double logtotal, tuple tables=None):
        cdef Py_ssize_t i, pos = 0
        cdef double f, lp
        cdef PyObject *key
        cdef PyObject *value
        cdef Py_ssize_t k
        cdef uint64_t packed
        self.freq = freq
        self.logtotal = logtotal
        self.one = <double *> malloc(65536 * sizeof(double))
        self.seen = <uint64_t *> calloc(1 << (_SEEN_BITS - 6), sizeof(uint64_t))
        if self.one == NULL or self.seen == NULL:
            raise MemoryError()
        if tables is not None:
            self._copy(tables)
            return
        for i in range(65536):
            self.one[i] = NAN
        _table_init(&self.words, len(freq))  # at least the words of 2 to 4 characters: one pass, not two
        while PyDict_Next(freq, &pos, &key, &value):
            if type(<object> key) is not str:
                continue
            k = len(<str> key)
            if not 1 <= k <= 4:
                continue
            if type(<object> value) is not int and type(<object> value) is not float:
                raise ValueError("a frequency that is not a number")
            f = <object> value
            if not 0 <= f < INFINITY:
                raise ValueError("a frequency below 0 or infinite")
            lp = INFINITY if f == 0 else log(f) - logtotal
            packed = _pack(<str> key, 0, k)
            if packed == 0:
                continue
            if k == 1:
                self.one[packed] = lp
            else:
                _table_put(&self.words, packed, lp)
                self.seen[_seen_bit(packed) >> 6] |= (<uint64_t> 1) << (_seen_bit(packed) & 63)

    cdef int _copy(self, tuple tables) except -1:
        cdef const unsigned char[:] one, slots, seen
        cdef Py_ssize_t n, i, used = 0
        cdef int bits = 0
        if len(tables) != 3:
            raise ValueError("not the tables of a Router")
        one, slots, seen = tables
        n = slots.shape[0] // sizeof(Slot)
        while (<Py_ssize_t> 1) << bits < n:
            bits += 1
        if (one.shape[0] != 65536 * sizeof(double) or seen.shape[0] != (1 << (_SEEN_BITS - 6)) * sizeof(uint64_t)
                or n < 1024 or (<Py_ssize_t> 1) << bits != n or slots.shape[0] != n * <Py_ssize_t> sizeof(Slot)):
            raise ValueError("not the tables of a Router")
        if _aligned(&one[0]) and _aligned(&slots[0]) and _aligned(&seen[0]):
            # read only from now on: the route uses the tables where they are (a mapped file's pages,
            # which forked workers share too) instead of copying 17 MB
            free(self.one)
            free(self.seen)
            self.one, self.words.slots, self.seen = <double *> &one[0], <Slot *> &slots[0], <uint64_t *> &seen[0]
            self.shared = tables
        else:
            self.words.slots = <Slot *> malloc(n * sizeof(Slot))
            if self.words.slots == NULL:
                raise MemoryError()
            memcpy(self.one, &one[0], one.shape[0])
            memcpy(self.words.slots, &slots[0], slots.shape[0])
            memcpy(self.seen, &seen[0], seen.shape[0])
        self.words.mask = n - 1
        self.words.shift = 64 - bits
        for i in range(n):
            if self.words.slots[i].key:
                used += 1
        if 2 * used > n:  # more than half full: not written by _table_put (and a probe might not end)
            raise ValueError("not the tables of a Router")
        self.words.used = used
        return 0

    def tables(self):
        """The compact tables as bytes (for ``Router(unpacked, logtotal, tables)``)."""
        return (PyBytes_FromStringAndSize(<char *> self.one, 65536 * sizeof(double)),
                PyBytes_FromStringAndSize(<char *> self.words.slots, (self.words.mask + 1) * sizeof(Slot)),
                PyBytes_FromStringAndSize(<char *> self.seen, (1 << (_SEEN_BITS - 6)) * sizeof(uint64_t)))

    def unpacked(self):
        """The words of the dictionary the compact tables do not hold (longer than 4 characters, or
        with a character outside the BMP or NUL), with their frequencies: what the route looks up in
        the dict."""
        cdef Py_ssize_t pos = 0, k
        cdef PyObject *key
        cdef PyObject *value
        cdef dict out = {}
        while PyDict_Next(self.freq, &pos, &key, &value):
            if type(<object> key) is str:
                k = len(<str> key)
                if k > 4 or (k >= 1 and _pack(<str> key, 0, k) == 0):
                    out[<object> key] = <object> value
        return out

    def __dealloc__(self):
        if self.shared is None:
            free(self.one)
            free(self.words.slots)
            free(self.seen)

    cdef double _lookup(self, str block, Py_ssize_t start, Py_ssize_t stop) except? -2.0:
        """The log term of ``block[start:stop]``: INFINITY for a prefix, NAN when absent."""
        cdef uint64_t key = _pack(block, start, stop)
        cdef PyObject *value
        cdef double f
        if key:
            return _packed(self, key, stop - start)
        value = PyDict_GetItem(self.freq, block[start:stop])
        if value == NULL:
            return NAN
        f = <object> value
        if f < 0:
            raise ValueError("math domain error")  # math.log's error
        return INFINITY if f == 0 else log(f) - self.logtotal

    cdef bint _is_word(self, str text, Py_ssize_t start, Py_ssize_t stop) except -1:
        """``bool(freq.get(text[start:stop]))``: a word, not only a prefix (:meth:`_flush`)."""
        cdef uint64_t key = _pack(text, start, stop)
        cdef PyObject *value
        cdef double lp
        if key:
            lp = _packed(self, key, stop - start)
            return not isnan(lp) and lp != INFINITY
        value = PyDict_GetItem(self.freq, text[start:stop])
        return value != NULL and bool(<object> value)

    cdef int _route(self, str text, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *end) except -1:
        """The most probable route through ``text[lo:hi]``: ``end[x - lo]``, where the word that
        starts at ``x`` ends. Scores as jieba's ``calc`` sums them, ties to the later end."""
        cdef Py_ssize_t n = hi - lo
        cdef Py_ssize_t start, i, best_end
        cdef double best, p, lp
        cdef bint found
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef uint64_t key
        cdef Py_UCS4 c
        cdef double *score = <double *> malloc((n + 1) * sizeof(double))
        if score == NULL:
            raise MemoryError()
        try:
            score[n] = 0.0
            for start in range(n - 1, -1, -1):
                found = False
                best = 0.0
                best_end = start
                i = start
                key = 0  # text[lo + start:lo + i] packed (as _pack), one character more a step; 0: not packable
                while i < n:
                    c = PyUnicode_READ(kind, data, lo + i)
                    if (key or i == start) and i - start < 4 and c != 0 and c <= 0xFFFF:
                        key = key << 16 | <uint64_t> c
                        lp = _packed(self, key, i - start + 1)
                    else:
                        key = 0
                        lp = self._lookup(text, lo + start, lo + i + 1)
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
                    best = 0.0 - self.logtotal + score[start + 1]
                score[start] = best
                end[start] = best_end + 1
        finally:
            free(score)
        return 0

    def cut_block(self, str block, dict unknown, Hmm hmm not None, object force_split, Py_ssize_t cache_max):
        """The words of ``block`` (jieba's ``Tokenizer.__cut_DAG``): the most probable route through the
        prefix dictionary; runs of single characters as :meth:`_flush` cuts them, unknown
        runs remembered in ``unknown`` (cleared at ``cache_max``)."""
        return self._cut_block(block, unknown, hmm, force_split, cache_max)

    cdef tuple _cut_block(self, str block, dict unknown, Hmm hmm, object force_split, Py_ssize_t cache_max):
        cdef Py_ssize_t n = len(block)
        cdef Py_ssize_t x, y, buf_start
        cdef Py_ssize_t *end = <Py_ssize_t *> malloc((n + 1) * sizeof(Py_ssize_t))
        cdef list out = []
        if end == NULL:
            raise MemoryError()
        try:
            self._route(block, 0, n, end)
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
            free(end)
        return tuple(out)

    cdef void _flush(self, str buf, list out, dict unknown, Hmm hmm, object force_split,
                     Py_ssize_t cache_max) except *:
        """A run of single characters as jieba's ``__cut_DAG`` cuts it: one character as is, a known
        word's characters one by one, an unknown run through the HMM."""
        if len(buf) == 1:
            out.append(buf)
            return
        if self._is_word(buf, 0, len(buf)):
            out.extend(buf)
            return
        out.extend(_hmm_words(buf, unknown, hmm, force_split, cache_max))


cdef inline double _packed(Router self, uint64_t key, Py_ssize_t k) noexcept:
    """The log term of a packed word of ``k`` characters (NAN: absent). (A function, not an inline
    method: those would need their bodies in the .pxd; so is :func:`_emissions`.)"""
    cdef uint64_t bit
    if k == 1:
        return self.one[key]
    bit = _seen_bit(key)
    if not (self.seen[bit >> 6] >> (bit & 63)) & 1:
        return NAN
    return _table_get(&self.words, key, NAN)


cdef object _hmm_words(str run, dict unknown, Hmm hmm, object force_split, Py_ssize_t cache_max):
    """The words of a run of characters the dictionary does not know, through the HMM, remembered
    in ``unknown`` (cleared at ``cache_max``)."""
    cdef PyObject *known = PyDict_GetItem(unknown, run)
    cdef list words
    if known != NULL:
        return <object> known
    if len(unknown) >= cache_max:
        unknown.clear()
    words = []
    hmm._cut(run, 0, len(run), force_split, words)
    out = unknown[run] = tuple(words)
    return out


cdef inline double _emit(dict table, object c, double low) except? -1.0:
    cdef PyObject *value = PyDict_GetItem(table, c)
    return low if value == NULL else <double> <object> value


cdef class Hmm:
    """jieba's ``finalseg`` B/M/E/S Viterbi (``finalseg.viterbi``) over one set of tables:
    ``start`` = (B, M, E, S) start log probabilities; ``trans`` = (E→B, S→B, M→M, B→M, S→S, E→S,
    B→E, M→E); the four emission dicts and ``low`` (``MIN_FLOAT``) for what they lack. The emission
    log probabilities of the Han characters (the runs it is given) are copied into one array, the
    others read from the dicts."""

    # (its attributes are declared in _segment_c.pxd)

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

    cdef Py_ssize_t _words(self, str run, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *spans,
                           Py_ssize_t k) except -1:
        """The words of the Han run ``run[lo:hi]``, same sums in the same order, same tie-breaks as
        jieba: ``(start, end, 1)`` written to ``spans`` from triple ``k`` on (at most one a
        character); where they end."""
        cdef Py_ssize_t n = hi - lo, i, begin, nexti
        cdef double b, m, e, s, nb, nm, ne, ns, x, y
        cdef double em[4]
        cdef unsigned char state, pos
        # back[4 * i + k]: best predecessor of state k (0 B, 1 M, 2 E, 3 S) at position i ≥ 1
        cdef unsigned char *back = <unsigned char *> malloc(4 * n + 4)
        cdef unsigned char *states = <unsigned char *> malloc(n + 1)
        if back == NULL or states == NULL:
            free(back)
            free(states)
            raise MemoryError()
        try:
            _emissions(self, run, lo, em)
            b = self.s_b + em[0]
            m = self.s_m + em[1]
            e = self.s_e + em[2]
            s = self.s_s + em[3]
            for i in range(1, n):
                _emissions(self, run, lo + i, em)
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
                    k = _span(spans, k, lo + begin, lo + i + 1, 1)
                    nexti = i + 1
                elif pos == 3:
                    k = _span(spans, k, lo + i, lo + i + 1, 1)
                    nexti = i + 1
            if nexti < n:
                k = _span(spans, k, lo + nexti, hi, 1)
        finally:
            free(back)
            free(states)
        return k

    cdef Py_ssize_t _spans(self, str text, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *spans) except -1:
        """The words of ``jieba.finalseg.cut(text[lo:hi])`` as ``(start, end, hmm)`` triples in
        ``spans`` (room for ``hi - lo``); how many. Han runs (``finalseg.re_han``) through the
        Viterbi (``hmm`` 1: subject to ``Force_Split_Words``); the other parts cut as
        ``finalseg.re_skip.split`` cuts them (``[a-zA-Z0-9]+(?:\.\d+)?%?`` and what lies between)."""
        cdef Py_ssize_t i = lo, j, q, r, k = 0
        while i < hi:
            if _is_han(text[i]):
                j = i + 1
                while j < hi and _is_han(text[j]):
                    j += 1
                k = self._words(text, i, j, spans, k)
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
                    k = _span(spans, k, i, q, 0)
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
                k = _span(spans, k, q, r, 0)
                i = r
            i = j
        return k

    cdef void _cut(self, str text, Py_ssize_t lo, Py_ssize_t hi, object force_split, list out) except *:
        """``jieba.finalseg.cut(text[lo:hi])`` appended to ``out`` (see :meth:`_spans`): a word of
        the Viterbi in ``force_split`` one character at a time."""
        cdef Py_ssize_t *spans = <Py_ssize_t *> malloc((3 * (hi - lo) + 1) * sizeof(Py_ssize_t))
        cdef Py_ssize_t k, n
        if spans == NULL:
            raise MemoryError()
        try:
            n = self._spans(text, lo, hi, spans)
            for k in range(n):
                word = text[spans[3 * k]:spans[3 * k + 1]]
                if spans[3 * k + 2] and word in force_split:
                    out.extend(word)
                else:
                    out.append(word)
        finally:
            free(spans)

    def cut(self, str text, object force_split):
        """``tuple(jieba.finalseg.cut(text))``."""
        cdef list out = []
        self._cut(text, 0, len(text), force_split, out)
        return tuple(out)


cdef inline void _emissions(Hmm self, str run, Py_ssize_t i, double *em) except *:
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


cdef inline Py_ssize_t _span(Py_ssize_t *spans, Py_ssize_t k, Py_ssize_t start, Py_ssize_t end,
                             Py_ssize_t hmm) noexcept:
    spans[3 * k] = start
    spans[3 * k + 1] = end
    spans[3 * k + 2] = hmm
    return k + 1


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
