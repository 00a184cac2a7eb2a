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
string) plus building the substring; 99 % of the lookups are of 1 to 4 characters. Here those go
to two compact tables built from the dict: one slot per BMP character, and an open-addressing table
keyed by the 2 to 4 code points packed into 64 bits (:func:`_pack`; the key *is* the word: no hash
collisions to verify). Both hold ``log(freq) - log(total)``, the term jieba adds. Longer fragments,
characters outside the BMP and NUL go to the dict itself. The fingerprint's pass takes the words of
a block where the route puts them, as word numbers, making no string for a token it has met
(:meth:`Vocabulary._block`).
"""

from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.unicode cimport PyUnicode_4BYTE_KIND, PyUnicode_Compare, PyUnicode_FromKindAndData
from cpython.unicode cimport (Py_UNICODE_ISDECIMAL, Py_UNICODE_ISSPACE, PyUnicode_DATA, PyUnicode_GET_LENGTH,
                              PyUnicode_KIND, PyUnicode_READ)
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
    double value


# An open-addressing table keyed by packed words (_pack): the key *is* the word, so there are no
# collisions to verify.
cdef struct Table:
    Slot *slots
    uint64_t mask
    int shift
    Py_ssize_t used


cdef int _table_init(Table *t, Py_ssize_t n) except -1:
    """Room for ``n`` keys at most half full (at least 1,024 slots); ``t`` unchanged on failure."""
    cdef Py_ssize_t slots = 1024
    cdef int bits = 10
    cdef Slot *new
    while slots < 2 * n:
        slots *= 2
        bits += 1
    new = <Slot *> calloc(slots, sizeof(Slot))
    if new == NULL:
        raise MemoryError()
    t.slots = new
    t.mask = slots - 1
    t.shift = 64 - bits
    t.used = 0
    return 0


cdef inline Slot *_table_slot(const Table *t, uint64_t key) noexcept:
    """The slot of ``key``: its own, or the empty one where it would go."""
    cdef uint64_t i = (key * _MULT) >> t.shift
    while t.slots[i].key != 0 and t.slots[i].key != key:
        i = (i + 1) & t.mask
    return &t.slots[i]


cdef inline double _table_get(const Table *t, uint64_t key, double missing) noexcept:
    cdef Slot *slot = _table_slot(t, key)
    return slot.value if slot.key else missing


cdef int _table_put(Table *t, uint64_t key, double value) except -1:
    """Set ``key``; the table doubles when it would be more than half full."""
    cdef Slot *slot = _table_slot(t, key)
    cdef Slot *old
    cdef Py_ssize_t i, n
    if slot.key == 0:
        if 2 * (t.used + 1) > <Py_ssize_t> t.mask + 1:
            old, n = t.slots, <Py_ssize_t> t.mask + 1
            _table_init(t, n)
            for i in range(n):
                if old[i].key:
                    _table_slot(t, old[i].key)[0] = old[i]
                    t.used += 1
            free(old)
            slot = _table_slot(t, key)
        t.used += 1
    slot.key = key
    slot.value = value
    return 0


cdef inline uint64_t _pack(str s, Py_ssize_t lo, Py_ssize_t hi) noexcept:
    """``s[lo:hi]`` (1 to 4 characters of the BMP, none NUL) as 16 bits a code point, first
    highest; 0 when it cannot be packed. Unambiguous: every packed character is non-zero."""
    cdef uint64_t key = 0
    cdef Py_UCS4 c
    cdef Py_ssize_t i
    if hi - lo > 4:
        return 0
    for i in range(lo, hi):
        c = s[i]
        if c == 0 or c > 0xFFFF:
            return 0
        key = key << 16 | <uint64_t> c
    return key


cdef enum:
    _SEEN_BITS = 23


cdef inline uint64_t _seen_bit(uint64_t key) noexcept:
    return (key * 0xC2B2AE3D27D4EB4FULL) >> (64 - _SEEN_BITS)


#: The layout of :meth:`Router.tables` (the slot table, its hash, the seen bits): a cached copy of
#: another layout is not read.
ROUTE_LAYOUT = "1"


cdef class Router:
    """The route through one prefix dictionary (``Segmenter._cut_block``), for one ``total``.
    ``ValueError`` when the dictionary holds a frequency below 0, infinite or that is not a number
    (the pure-Python route handles those as jieba does).

    With ``tables`` (what :meth:`tables` gave for the same dictionary and ``logtotal``), the compact
    tables are copied from them instead of built, and ``freq`` need only hold the words they cannot
    (:meth:`unpacked`): the start-up without jieba's 500,000-word dict (:func:`.tables.load_route`).
    ``ValueError`` when they are not tables of this layout."""

    cdef double *one    # per BMP code point: NAN absent, INFINITY prefix only, else the log term
    cdef Table words    # the words of 2 to 4 characters (packed), the same values
    cdef uint64_t *seen  # a bit per _seen_bit(key), set for each key of `words`: most absent keys are told
                         # by this 1 MB (mostly cached) instead of a probe of the 16 MB table
    cdef dict freq
    cdef readonly double logtotal

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
        free(self.one)
        free(self.words.slots)
        free(self.seen)

    cdef inline double _packed(self, uint64_t key, Py_ssize_t k) noexcept:
        """The log term of a packed word of ``k`` characters (NAN: absent)."""
        cdef uint64_t bit
        if k == 1:
            return self.one[key]
        bit = _seen_bit(key)
        if not (self.seen[bit >> 6] >> (bit & 63)) & 1:
            return NAN
        return _table_get(&self.words, key, NAN)

    cdef double _lookup(self, str block, Py_ssize_t start, Py_ssize_t stop) except? -2.0:
        """The log term of ``block[start:stop]``: INFINITY for a prefix, NAN when absent."""
        cdef uint64_t key = _pack(block, start, stop)
        cdef PyObject *value
        cdef double f
        if key:
            return self._packed(key, stop - start)
        value = PyDict_GetItem(self.freq, block[start:stop])
        if value == NULL:
            return NAN
        f = <object> value
        if f < 0:
            raise ValueError("math domain error")  # math.log's error
        return INFINITY if f == 0 else log(f) - self.logtotal

    cdef bint _is_word(self, str text, Py_ssize_t start, Py_ssize_t stop) except -1:
        """``bool(freq.get(text[start:stop]))``: a word, not only a prefix (``Segmenter._flush``)."""
        cdef uint64_t key = _pack(text, start, stop)
        cdef PyObject *value
        cdef double lp
        if key:
            lp = self._packed(key, stop - start)
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
                        lp = self._packed(key, i - start + 1)
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
        """The words of ``block`` (``Segmenter._cut_block``): the most probable route through the
        prefix dictionary; runs of single characters as ``Segmenter._flush`` cuts them, unknown
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
        """``Segmenter._flush``: one character as is, a known word's characters one by one, an
        unknown run through the HMM."""
        if len(buf) == 1:
            out.append(buf)
            return
        if self._is_word(buf, 0, len(buf)):
            out.extend(buf)
            return
        out.extend(_hmm_words(buf, unknown, hmm, force_split, cache_max))


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
        """The words of ``segment._hmm_cut(text[lo:hi])`` as ``(start, end, hmm)`` triples in
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
        """``segment._hmm_cut(text[lo:hi])`` appended to ``out`` (see :meth:`_spans`): a word of
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
        """``segment._hmm_cut(text)``."""
        cdef list out = []
        self._cut(text, 0, len(text), force_split, out)
        return tuple(out)


cdef inline Py_ssize_t _span(Py_ssize_t *spans, Py_ssize_t k, Py_ssize_t start, Py_ssize_t end,
                             Py_ssize_t hmm) noexcept:
    spans[3 * k] = start
    spans[3 * k + 1] = end
    spans[3 * k + 2] = hmm
    return k + 1


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


cdef class _IdfKeys:
    """The packable words (:func:`_pack`) of a sorted IDF table, hashed to their index in it: one
    probe where a bisection of 270,000 words costs some twenty string comparisons, most of them
    cache misses."""

    cdef Table table
    cdef tuple words  # the table's words, kept: their identity tells whether this is still their index

    def __cinit__(self, tuple words):
        cdef Py_ssize_t i, n = len(words)
        cdef uint64_t key
        cdef Slot *slot
        self.words = words
        _table_init(&self.table, n * 3 // 4)  # 270,000 words in 2^19 slots (8 MB), not 2^20
        for i in range(n):
            word = <object> PyTuple_GET_ITEM(words, i)
            if type(word) is not str:
                continue
            key = _pack(<str> word, 0, len(<str> word))
            if key:
                slot = _table_slot(&self.table, key)
                if slot.key == 0:  # the first of equal words, as bisect_left finds it
                    slot.key = key
                    slot.value = i
                    self.table.used += 1

    def __dealloc__(self):
        free(self.table.slots)


cdef _IdfKeys _last_idf_keys = None


cdef _IdfKeys _idf_keys(tuple words):
    """The :class:`_IdfKeys` of ``words``, built once per table (~10 ms) and shared."""
    global _last_idf_keys
    if _last_idf_keys is None or _last_idf_keys.words is not words:
        _last_idf_keys = _IdfKeys(words)
    return _last_idf_keys


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
    cdef tuple sorted_words      # the IDF table's words, sorted (a tables.SortedTable), else None
    cdef const double[:] sorted_values
    cdef _IdfKeys idf_keys       # its packable words hashed (None: bisect every word)

    def __cinit__(self, dict word_idf, object stop_words, object idf, object median):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError()
        self.word_idf, self.stop_words, self.table, self.median = word_idf, stop_words, idf, median
        words = getattr(idf, "_words", None)
        if type(words) is tuple and type(idf).__name__ == "SortedTable":  # looked up here, not through Mapping.get
            self.sorted_words, self.sorted_values = words, idf._values
            self.idf_keys = _idf_keys(words)
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
        """``idf.get(word, median)``; a SortedTable bisected here as its ``__getitem__`` does."""
        cdef tuple words = self.sorted_words
        cdef Py_ssize_t lo = 0, hi, mid
        cdef uint64_t key
        cdef Slot *slot
        if words is None:
            return self.table.get(word, self.median)
        key = _pack(word, 0, len(word))
        if key:  # a word of the table equal to it is packable too: it is in idf_keys or nowhere
            slot = _table_slot(&self.idf_keys.table, key)
            return self.sorted_values[<Py_ssize_t> slot.value] if slot.key else self.median
        hi = len(words)
        while lo < hi:  # bisect_left
            mid = (lo + hi) // 2
            if PyUnicode_Compare(<object> PyTuple_GET_ITEM(words, mid), word) < 0:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(words) and PyUnicode_Compare(<object> PyTuple_GET_ITEM(words, lo), word) == 0:
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


# -- signatures.py ----------------------------------------------------------------------------------


cdef inline bint _sentence_mark(Py_UCS4 c) noexcept:
    return c == u'。' or c == u'!' or c == u'?' or c == u';'


cdef inline bint _closer(Py_UCS4 c) noexcept:
    return c == u'"' or c == u"'" or c == u'”' or c == u'’' or c == u')' or c == u']' or c == u'」' or c == u'』'


cdef void _piece(dict found, str text, Py_ssize_t lo, Py_ssize_t hi, Py_UCS4 *buf, bint sentence) except *:
    """``text[lo:hi]`` without whitespace, lower-cased, into ``found``: 0 for a sentence, else
    ``_LINE_BIT`` unless it is there already."""
    cdef Py_ssize_t i, n = 0
    cdef Py_UCS4 c
    for i in range(lo, hi):
        c = text[i]
        if not c.isspace():
            buf[n] = c
            n += 1
    key = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, n).lower()
    if sentence:
        found[key] = 0
    elif PyDict_GetItem(found, key) == NULL:
        found[key] = _LINE_BIT


cdef object _LINE_BIT = 1 << 63


cdef str _exact(object text):
    """``text`` as a ``str`` itself (a subclass, such as lxml's text results, copied)."""
    if type(text) is str:
        return <str> text
    if isinstance(text, str):
        return str.__str__(text)
    raise TypeError(f"expected a str, not {type(text).__name__}")


def sentence_pieces(object text_):
    r"""``signatures._pieces_python(text)``: the pieces of a text, cut at line breaks and at
    ``signatures._SENTENCE_END`` (``[。!?;]+``, or a period before a space or the end with closing
    quotes and brackets between), each without its whitespace (``\s``: ``str.isspace``) and
    lower-cased → 0 for a sentence (a piece a mark ends), ``_LINE_BIT`` for a line (a piece only a
    line break or the end ends)."""
    cdef str text = _exact(text_)
    cdef dict found = {}
    cdef Py_ssize_t n = len(text), i = 0, j, line_end, start
    cdef Py_UCS4 c
    cdef Py_UCS4 *buf = <Py_UCS4 *> malloc((n + 1) * sizeof(Py_UCS4))
    if buf == NULL:
        raise MemoryError()
    try:
        while True:
            line_end = i
            while line_end < n and text[line_end] != u'\n':
                line_end += 1
            start = i
            while i < line_end:
                c = text[i]
                if _sentence_mark(c):
                    j = i + 1
                    while j < line_end and _sentence_mark(text[j]):
                        j += 1
                    _piece(found, text, start, i, buf, True)
                    start = i = j
                    continue
                if c == u'.':
                    j = i + 1
                    while j < line_end and _closer(text[j]):
                        j += 1
                    if j == line_end or (<Py_UCS4> text[j]).isspace():
                        _piece(found, text, start, i, buf, True)
                        start = i = i + 1
                        continue
                i += 1
            _piece(found, text, start, line_end, buf, False)
            if line_end == n:
                break
            i = line_end + 1
    finally:
        free(buf)
    return found


def non_space(object text_):
    r"""``len(re.sub(r"\s+", "", text))``: how many characters of ``text`` are not whitespace."""
    cdef str text = _exact(text_)
    cdef Py_ssize_t n = 0
    cdef Py_UCS4 c
    for c in text:
        if not c.isspace():
            n += 1
    return n


# -- normalize.py -----------------------------------------------------------------------------------


def chars_in(object text_, bytes bitmap):
    """``set(re.findall(class, text))`` for the character class whose BMP code points have their
    bit set in ``bitmap`` (8,192 bytes, bit ``c & 7`` of byte ``c >> 3``): which of them ``text``
    holds."""
    cdef str text = _exact(text_)
    cdef const unsigned char *bits = <const unsigned char *> PyBytes_AS_STRING(bitmap)
    cdef Py_UCS4 c
    cdef uint64_t cp
    cdef set out = set()
    if PyBytes_GET_SIZE(bitmap) != 8192:
        raise ValueError("a bitmap of the BMP is 8,192 bytes")
    for c in text:
        cp = <uint64_t> c
        if cp < 65536 and bits[cp >> 3] >> (cp & 7) & 1:
            out.add(c)
    return out


# -- hints.py: the regex hints' answers in one pass --------------------------------------------------


cdef enum:
    # the bits of a character in hints.py's class table, and the flags hint_flags answers (hints.H_*)
    _C_DIGIT = 1
    _C_SPACE = 2
    _C_SYM = 4
    _C_CJK = 8
    _C_FOLD = 16  # not ASCII, yet a case-insensitive pattern's ASCII letter matches it (ſ for s, K for k)
    _H_SPACE_RUN = 1
    _H_YEAR = 2
    _H_DATE0 = 4
    _H_DATE1 = 8
    _H_DATE2 = 16
    _H_AP = 32
    _H_CN_TIME = 64
    _H_SPACE_NL = 128
    _H_ADVERSARIAL = 256
    _H_DATE_TIME = 512
    _H_DATE3 = 1024
    _H_DATE4 = 2048
    _H_MONTHS = 4096
    _H_EXACT = 8192
    _H_ALL = 8191


cdef inline Py_UCS4 _at(int kind, void *data, Py_ssize_t n, Py_ssize_t i) noexcept:
    """The character at ``i``, NUL past the end (a NUL is no digit, space or mark any hint needs)."""
    return PyUnicode_READ(kind, data, i) if 0 <= i < n else 0


cdef inline Py_ssize_t _skip_spaces(int kind, void *data, Py_ssize_t n, Py_ssize_t i,
                                     const unsigned char *cls) noexcept:
    cdef Py_UCS4 c
    while i < n:
        c = PyUnicode_READ(kind, data, i)
        if c > 0xFFFF or not cls[c] & _C_SPACE:
            break
        i += 1
    return i


cdef inline Py_ssize_t _digits(int kind, void *data, Py_ssize_t n, Py_ssize_t i,
                               const unsigned char *cls) noexcept:
    """How many digits (``\\d``) start at ``i``."""
    cdef Py_ssize_t j = i
    cdef Py_UCS4 c
    while j < n:
        c = PyUnicode_READ(kind, data, j)
        if c > 0xFFFF or not cls[c] & _C_DIGIT:
            break
        j += 1
    return j - i


cdef inline bint _is(Py_UCS4 c, const unsigned char *cls, unsigned char bit) noexcept:
    return c <= 0xFFFF and cls[c] & bit


cdef inline Py_UCS4 _lower(Py_UCS4 c) noexcept:
    """An ASCII letter lower-cased (what bytes.lower does), any other character as it is."""
    return <Py_UCS4> (<unsigned int> c + 32) if 65 <= c <= 90 else c


cdef inline bint _month(Py_UCS4 a, Py_UCS4 b, Py_UCS4 c) noexcept:
    """Are these three lower-case characters the start of a month's name (dates._MONTH_PREFIXES)?"""
    if a == 106:  # j
        return b == 97 and c == 110 or b == 117 and (c == 110 or c == 108)  # jan jun jul
    if a == 102:
        return b == 101 and c == 98  # feb
    if a == 109:
        return b == 97 and (c == 114 or c == 121)  # mar may
    if a == 97:
        return b == 112 and c == 114 or b == 117 and c == 103  # apr aug
    if a == 115:
        return b == 101 and c == 112  # sep
    if a == 111:
        return b == 99 and c == 116  # oct
    if a == 110:
        return b == 111 and c == 118  # nov
    if a == 100:
        return b == 101 and c == 99  # dec
    return False


cdef inline bint _ordinal(Py_UCS4 a, Py_UCS4 b) noexcept:
    """st, nd, rd or th (lower case)."""
    return (a == 115 and b == 116 or a == 110 and b == 100 or a == 114 and b == 100
            or a == 116 and b == 104)


cdef inline bint _year(int kind, void *data, Py_ssize_t n, Py_ssize_t i, const unsigned char *cls) noexcept:
    """(?:1[89]|2[01])\\d\\d at ``i``."""
    cdef Py_UCS4 c = _at(kind, data, n, i), d = _at(kind, data, n, i + 1)
    return (((c == 49 and (d == 56 or d == 57)) or (c == 50 and (d == 48 or d == 49)))
            and _is(_at(kind, data, n, i + 2), cls, _C_DIGIT) and _is(_at(kind, data, n, i + 3), cls, _C_DIGIT))


def hint_flags(object text_, bytes classes):
    """:func:`.hints.hint_flags` in one pass over ``text``: which of the hints hold (``hints.H_*``), with
    ``H_EXACT``; every hint without ``H_EXACT`` when the text holds a character outside the BMP or one
    the class table marks ``_C_FOLD``.
    ``classes``: 65,536 bytes, a BMP code point's ``hints`` class bits."""
    cdef str text = _exact(text_)
    cdef const unsigned char *cls = <const unsigned char *> PyBytes_AS_STRING(classes)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i, j, k
    cdef Py_UCS4 c, p = 0, d, s
    cdef unsigned char cc
    cdef bint digit_before = False  # the last character before this one that is not \s is a \d
    cdef int flags = 0
    cdef Py_UCS4 a1 = 0, a2 = 0  # the last two ASCII characters, lower-cased (text.encode("ascii", "ignore").lower())
    if PyBytes_GET_SIZE(classes) != 65536:
        raise ValueError("a class table of the BMP is 65,536 bytes")
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if c > 0xFFFF:
            return _H_ALL
        cc = cls[c]
        if cc & _C_FOLD:
            return _H_ALL
        if c < 128:
            c = _lower(c)
            if _month(a2, a1, c):
                flags |= _H_MONTHS
            a2, a1 = a1, c
            c = PyUnicode_READ(kind, data, i)
        if cc & _C_DIGIT:
            d = _at(kind, data, n, i + 1)
            if _is(d, cls, _C_DIGIT):  # of the hints at a digit, only the year goes on with one
                if (c == 49 or c == 50) and _year(kind, data, n, i, cls):
                    flags |= _H_YEAR  # (?:1[89]|2[01])\d\d
            else:
                if (d == 45 or d == 58) and _is(_at(kind, data, n, i + 2), cls, _C_DIGIT):  # \d[-:]\d
                    flags |= _H_DATE_TIME
                if d == 45 or d == 47 or d == 46:  # \d([-/.])\d{1,2}\1\d
                    s = d
                    if _is(_at(kind, data, n, i + 2), cls, _C_DIGIT) and (
                            (_at(kind, data, n, i + 3) == s and _is(_at(kind, data, n, i + 4), cls, _C_DIGIT))
                            or (_is(_at(kind, data, n, i + 3), cls, _C_DIGIT) and _at(kind, data, n, i + 4) == s
                                and _is(_at(kind, data, n, i + 5), cls, _C_DIGIT))):
                        flags |= _H_DATE1 | (_H_DATE2 if s == 47 else 0)
                elif d == 44 or _is(d, cls, _C_SPACE) or _ordinal(_lower(d), _lower(_at(kind, data, n, i + 2))):
                    # \d(?:st|nd|rd|th)?\s+(?:jan|feb|…) and \d(?:st|nd|rd|th)?,?\s+(?:1[89]|2[01])\d\d,
                    # case-insensitive: an ordinal, a comma or a space after the digit
                    j = i + 1
                    if _ordinal(_lower(d), _lower(_at(kind, data, n, i + 2))):
                        j += 2
                    k = _skip_spaces(kind, data, n, j, cls)
                    if k > j and _month(_lower(_at(kind, data, n, k)), _lower(_at(kind, data, n, k + 1)),
                                        _lower(_at(kind, data, n, k + 2))):
                        flags |= _H_DATE3
                    if _at(kind, data, n, j) == 44:
                        j += 1
                        k = _skip_spaces(kind, data, n, j, cls)
                    if k > j and _year(kind, data, n, k, cls):
                        flags |= _H_DATE4
        elif cc & _C_SPACE:
            if c != 10:
                d = _at(kind, data, n, i + 1)
                if c != 32 or (d != 10 and _is(d, cls, _C_SPACE)):  # [^\S\n](?:[^\S\n]+|(?<! ))
                    flags |= _H_SPACE_RUN
            elif p == 32 or _is(_at(kind, data, n, i + 1), cls, _C_SPACE):  # a \n that " *\n\s*" changes
                flags |= _H_SPACE_NL
        elif cc & _C_SYM:
            if p == 32 or _is(p, cls, _C_CJK):  # SYM(?<=[CJK ]SYM)
                flags |= _H_ADVERSARIAL
        elif c == 0x5E74 and digit_before:  # \d\s*年\s*\d{1,2}\s*月\s*\d{1,2}\s*[日号]
            j = _skip_spaces(kind, data, n, i + 1, cls)
            k = _digits(kind, data, n, j, cls)
            if 1 <= k <= 2:
                j = _skip_spaces(kind, data, n, j + k, cls)
                if _at(kind, data, n, j) == 0x6708:
                    j = _skip_spaces(kind, data, n, j + 1, cls)
                    k = _digits(kind, data, n, j, cls)
                    if 1 <= k <= 2:
                        j = _skip_spaces(kind, data, n, j + k, cls)
                        d = _at(kind, data, n, j)
                        if d == 0x65E5 or d == 0x53F7:
                            flags |= _H_DATE0
        elif (c == 65 or c == 97 or c == 80 or c == 112) and digit_before:  # \d\s*[AaPp]\.?\s?[Mm]
            j = i + 1
            if _at(kind, data, n, j) == 46:
                j += 1
            if _is(_at(kind, data, n, j), cls, _C_SPACE):
                j += 1
            d = _at(kind, data, n, j)
            if d == 77 or d == 109:
                flags |= _H_AP
        elif ((c == 0x5348 and (p == 0x4E0A or p == 0x4E0B or p == 0x4E2D))  # 上午 下午 中午
              or (c == 0x4E0A and (p == 0x65E9 or p == 0x665A))  # 早上 晚上
              or (c == 0x6668 and (p == 0x65E9 or p == 0x51CC or p == 0x6E05))  # 早晨 凌晨 清晨
              or (c == 0x665A and p == 0x508D)  # 傍晚
              or (c == 0x95F4 and (p == 0x665A or p == 0x591C))):  # 晚间 夜间: (?:上午|…)\s*\d{1,2}:\d{2}
            j = _skip_spaces(kind, data, n, i + 1, cls)
            k = _digits(kind, data, n, j, cls)
            if 1 <= k <= 2 and _at(kind, data, n, j + k) == 58 and _digits(kind, data, n, j + k + 1, cls) >= 2:
                flags |= _H_CN_TIME
        if cc & _C_DIGIT:
            digit_before = True
        elif not cc & _C_SPACE:
            digit_before = False
        p = c
    return flags | _H_EXACT




cdef inline bint _digit(Py_UCS4 c, const unsigned char *cls) noexcept:
    """``\\d`` (``str.isdecimal``): the class table in the BMP."""
    return cls[c] & _C_DIGIT if c <= 0xFFFF else Py_UNICODE_ISDECIMAL(c)


cdef inline bint _space(Py_UCS4 c, const unsigned char *cls) noexcept:
    """``\\s`` (``str.isspace``): the class table in the BMP."""
    return cls[c] & _C_SPACE if c <= 0xFFFF else Py_UNICODE_ISSPACE(c)


cdef const unsigned char *_classes(bytes classes) except NULL:
    if PyBytes_GET_SIZE(classes) != 65536:
        raise ValueError("a class table of the BMP is 65,536 bytes")
    return <const unsigned char *> PyBytes_AS_STRING(classes)


def collapse_spaces(object text_, bytes classes):
    """``re.sub(r"[^\\S\\n]+", " ", text)``: each run of whitespace other than line breaks as one space."""
    cdef str text = _exact(text_)
    cdef const unsigned char *cls = _classes(classes)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, j = 0, start
    cdef Py_UCS4 c
    cdef Py_UCS4 *out
    cdef bint changed = False
    out = <Py_UCS4 *> malloc((n + 1) * sizeof(Py_UCS4))
    if out == NULL:
        raise MemoryError()
    try:
        while i < n:
            c = PyUnicode_READ(kind, data, i)
            i += 1
            if c != 10 and _space(c, cls):
                start = i - 1
                while i < n:
                    c = PyUnicode_READ(kind, data, i)
                    if c == 10 or not _space(c, cls):
                        break
                    i += 1
                changed = changed or i - start > 1 or PyUnicode_READ(kind, data, start) != 32
                out[j] = 32
            else:
                out[j] = c
            j += 1
        if not changed:
            return text
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, j)
    finally:
        free(out)


def tidy_line_breaks(object text_, bytes classes):
    """``re.sub(r" *\\n\\s*", "\\n", text)``: the spaces before a line break and the whitespace after it
    dropped (``normalize._SPACE_NL_RE``)."""
    cdef str text = _exact(text_)
    cdef const unsigned char *cls = _classes(classes)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, j = 0, k, start
    cdef Py_UCS4 c
    cdef Py_UCS4 *out
    cdef bint changed = False
    out = <Py_UCS4 *> malloc((n + 1) * sizeof(Py_UCS4))
    if out == NULL:
        raise MemoryError()
    try:
        while i < n:
            c = PyUnicode_READ(kind, data, i)
            if c == 32:
                k = i
                while k < n and PyUnicode_READ(kind, data, k) == 32:
                    k += 1
                if k < n and PyUnicode_READ(kind, data, k) == 10:
                    changed = True
                    i = k  # the line break, below
                else:
                    while i < k:
                        out[j] = 32
                        j += 1
                        i += 1
                    continue
            if PyUnicode_READ(kind, data, i) == 10:
                out[j] = 10
                j += 1
                i += 1
                start = i
                while i < n and _space(PyUnicode_READ(kind, data, i), cls):
                    i += 1
                changed = changed or i > start
            else:
                out[j] = c
                j += 1
                i += 1
        if not changed:
            return text
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, j)
    finally:
        free(out)


def numbers(object text_, bytes classes):
    """``re.findall(r"\\d\\d*(?:[.,]\\d+)*", text)`` (``signatures._NUMBER``)."""
    cdef str text = _exact(text_)
    cdef const unsigned char *cls = _classes(classes)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, start
    cdef Py_UCS4 c
    cdef list out = []
    while i < n:
        if not _digit(PyUnicode_READ(kind, data, i), cls):
            i += 1
            continue
        start = i
        i += 1
        while i < n and _digit(PyUnicode_READ(kind, data, i), cls):
            i += 1
        while i + 1 < n:
            c = PyUnicode_READ(kind, data, i)
            if (c != 46 and c != 44) or not _digit(PyUnicode_READ(kind, data, i + 1), cls):
                break
            i += 2
            while i < n and _digit(PyUnicode_READ(kind, data, i), cls):
                i += 1
        out.append(text[start:i])
    return out
