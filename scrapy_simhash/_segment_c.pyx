# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The segmenter's hot loops compiled (optional: :mod:`.segment` and :mod:`.features` fall back to
their pure-Python versions, which give the same words): the route through a block
(:class:`Router`, ``Segmenter._cut_block``), the HMM Viterbi (:func:`viterbi_words`), and the loops
over the parts of a text (:func:`cut_parts`) and over its tokens (:func:`map_words`).

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
from cpython.object cimport PyObject
from libc.math cimport INFINITY, NAN, isnan, log
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc

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
        while PyDict_Next(freq, &pos, &key, &value):
            if type(<object> key) is str and 2 <= len(<str> key) <= 3:
                n += 1
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

    def cut_block(self, str block, object flush):
        """The words of ``block``: the most probable route through the prefix dictionary; runs of
        single characters go to ``flush(run, out)``."""
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
                        flush(block[buf_start:x], out)
                        buf_start = -1
                    out.append(block[x:y])
                x = y
            if buf_start >= 0:
                flush(block[buf_start:], out)
        finally:
            free(score)
            free(end)
        return tuple(out)


cdef inline double _emit(dict table, object c, double low) except? -1.0:
    cdef PyObject *value = PyDict_GetItem(table, c)
    return low if value == NULL else <double> <object> value


def viterbi_words(str run, tuple start, tuple trans, dict e_b, dict e_m, dict e_e, dict e_s, double low):
    """``segment._viterbi_words``: the B/M/E/S Viterbi of jieba's ``finalseg`` over ``run`` and the
    words it marks. ``start`` = (B, M, E, S) start log probabilities; ``trans`` = (E→B, S→B, M→M,
    B→M, S→S, E→S, B→E, M→E). Same sums in the same order, same tie-breaks."""
    cdef Py_ssize_t n = len(run), i, begin, nexti
    cdef double t_eb = trans[0], t_sb = trans[1], t_mm = trans[2], t_bm = trans[3]
    cdef double t_ss = trans[4], t_es = trans[5], t_be = trans[6], t_me = trans[7]
    cdef double b, m, e, s, nb, nm, ne, ns, x, y, em
    cdef object c
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
        c = run[0:1]
        b = <double> start[0] + _emit(e_b, c, low)
        m = <double> start[1] + _emit(e_m, c, low)
        e = <double> start[2] + _emit(e_e, c, low)
        s = <double> start[3] + _emit(e_s, c, low)
        for i in range(1, n):
            c = run[i:i + 1]
            em = _emit(e_b, c, low)
            x = e + t_eb + em
            y = s + t_sb + em
            if x > y:
                nb = x
                back[4 * i] = 2
            else:
                nb = y
                back[4 * i] = 3
            em = _emit(e_m, c, low)
            x = m + t_mm + em
            y = b + t_bm + em
            if x >= y:
                nm = x
                back[4 * i + 1] = 1
            else:
                nm = y
                back[4 * i + 1] = 0
            em = _emit(e_s, c, low)
            x = s + t_ss + em
            y = e + t_es + em
            if x >= y:
                ns = x
                back[4 * i + 3] = 3
            else:
                ns = y
                back[4 * i + 3] = 2
            em = _emit(e_e, c, low)
            x = b + t_be + em
            y = m + t_me + em
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
                words.append(run[begin:i + 1])
                nexti = i + 1
            elif pos == 3:
                words.append(run[i:i + 1])
                nexti = i + 1
        if nexti < n:
            words.append(run[nexti:])
    finally:
        free(back)
        free(states)
    return words


def cut_parts(list parts, dict blocks, object cut_block, object skip_split, Py_ssize_t cache_max):
    """``Segmenter.cut`` after ``_BLOCK.split(text)``: blocks (odd parts) cut by ``cut_block`` and
    remembered in ``blocks`` (cleared at ``cache_max``), the other parts split by ``skip_split``
    into whitespace runs (kept whole) and other characters (one by one)."""
    cdef list out = []
    cdef Py_ssize_t n, m
    cdef PyObject *known
    cdef str part, piece
    cdef object words
    for n in range(len(parts)):
        part = <str> parts[n]
        if not part:
            continue
        if n & 1:
            known = PyDict_GetItem(blocks, part)
            if known == NULL:
                if len(blocks) >= cache_max:
                    blocks.clear()
                words = cut_block(part)
                blocks[part] = words
            else:
                words = <object> known
            out.extend(words)
        else:
            pieces = skip_split(part)
            for m in range(len(pieces)):
                piece = <str> pieces[m]
                if m & 1:
                    out.append(piece)  # whitespace, whole
                elif len(piece) == 1:
                    out.append(piece)
                else:
                    out.extend(piece)  # anything else, one character at a time
    return out


def map_words(list tokens, dict cache, object miss):
    """``[cache[t] for t in tokens if cache[t] is not None]``, ``miss(t)`` filling the cache for a
    token not in it yet (``FeatureExtractor.words``)."""
    cdef list out = []
    cdef PyObject *known
    cdef object word
    for token in tokens:
        known = PyDict_GetItem(cache, token)
        if known == NULL:
            word = miss(token)
        else:
            word = <object> known
        if word is not None:
            out.append(word)
    return out
