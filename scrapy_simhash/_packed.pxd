# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Words of 1 to 4 BMP characters packed into 64 bits (:func:`_pack`), and an open-addressing table
keyed by them: the route's dictionary (:class:`._segment_c.Router`) and the vocabulary's token and
IDF indexes (:mod:`._vocabulary_c`). Inline only: each module that cimports this compiles its own
copy, so there is no module of this name to import at run time."""

from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free


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


cdef inline int _table_init(Table *t, Py_ssize_t n) except -1:
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
    cdef uint64_t i = (key * 11400714819323198485ULL) >> t.shift  # 2^64 / golden ratio: Fibonacci hashing
    while t.slots[i].key != 0 and t.slots[i].key != key:
        i = (i + 1) & t.mask
    return &t.slots[i]


cdef inline double _table_get(const Table *t, uint64_t key, double missing) noexcept:
    cdef Slot *slot = _table_slot(t, key)
    return slot.value if slot.key else missing


cdef inline int _table_put(Table *t, uint64_t key, double value) except -1:
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
