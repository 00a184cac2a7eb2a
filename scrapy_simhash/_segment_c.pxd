# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled segmenter's C-level interface (:mod:`._segment_c`): what :mod:`._vocabulary_c`
calls to cut a text's blocks without going through Python (the route, the HMM's spans), and the
character classes both scan by."""

from libc.stdint cimport uint64_t

from ._packed cimport Table


cdef enum:
    _HAN_FIRST = 0x4E00  # finalseg.re_han: [一-鿕]
    _HAN_LAST = 0x9FD5


cdef inline bint _is_han(Py_UCS4 c):
    return _HAN_FIRST <= c <= _HAN_LAST


cdef inline bint _ascii_alnum(Py_UCS4 c):
    return (u'a' <= c <= u'z') or (u'A' <= c <= u'Z') or (u'0' <= c <= u'9')


cdef inline bint _in_block(Py_UCS4 c):
    """jieba's ``re_han_default``: ``[\u4E00-\u9FD5a-zA-Z0-9+#&\._%\-]``."""
    return _is_han(c) or _ascii_alnum(c) or c == u'+' or c == u'#' or c == u'&' or c == u'.' \
        or c == u'_' or c == u'%' or c == u'-'


cdef class Hmm:
    cdef double s_b, s_m, s_e, s_s
    cdef double t_eb, t_sb, t_mm, t_bm, t_ss, t_es, t_be, t_me
    cdef double low
    cdef dict e_b, e_m, e_e, e_s
    cdef double *emit  # 4 per Han character, B M E S

    cdef Py_ssize_t _words(self, str run, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *spans,
                           Py_ssize_t k) except -1
    cdef Py_ssize_t _spans(self, str text, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *spans) except -1
    cdef void _cut(self, str text, Py_ssize_t lo, Py_ssize_t hi, object force_split, list out) except *


cdef class Router:
    cdef double *one    # per BMP code point: NAN absent, INFINITY prefix only, else the log term
    cdef Table words    # the words of 2 to 4 characters (packed), the same values
    cdef uint64_t *seen  # a bit per _seen_bit(key), set for each key of `words`: most absent keys are told
                         # by this 1 MB (mostly cached) instead of a probe of the 16 MB table
    cdef dict freq
    cdef readonly double logtotal
    cdef readonly object shared  # the tables one, words and seen point into (None: allocated here)

    cdef int _copy(self, tuple tables) except -1
    cdef double _lookup(self, str block, Py_ssize_t start, Py_ssize_t stop) except? -2.0
    cdef bint _is_word(self, str text, Py_ssize_t start, Py_ssize_t stop) except -1
    cdef int _route(self, str text, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *end) except -1
    cdef tuple _cut_block(self, str block, dict unknown, Hmm hmm, object force_split, Py_ssize_t cache_max)
    cdef void _flush(self, str buf, list out, dict unknown, Hmm hmm, object force_split,
                     Py_ssize_t cache_max) except *


cdef object _hmm_words(str run, dict unknown, Hmm hmm, object force_split, Py_ssize_t cache_max)
