# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The signatures' scans and hashes compiled (optional: :mod:`.signatures` falls back to its
pure-Python versions, which give the same pieces and hashes): a text's sentence and line pieces
(:func:`sentence_pieces`) and their hashes (:func:`sentence_hashes`), the hashes of its numbers
(:func:`number_hashes`), and its count of non-whitespace characters (:func:`non_space`).

The hashes are BLAKE2b (RFC 7693, unkeyed, 8 or 4 bytes of digest: what ``hashlib.blake2b(data,
digest_size=n)`` gives), computed here in C: a text's few dozen pieces cost one call, not a hashlib
object, an encoded copy and a hex string each in Python."""

from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_4BYTE_KIND, PyUnicode_FromKindAndData
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

cdef extern from "Python.h":
    Py_UCS4 Py_UNICODE_TOLOWER(Py_UCS4 c) noexcept
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL
    object PyUnicode_FromStringAndSize(const char *data, Py_ssize_t size)

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>

    static const uint64_t ss_blake2b_iv[8] = {
        0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
        0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

    static const uint8_t ss_blake2b_sigma[12][16] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
        {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
        {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
        {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
        {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
        {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
        {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
        {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
        {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

    static inline uint64_t ss_rotr64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

    static inline uint64_t ss_load64(const uint8_t *p) {
        return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
               (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
    }

    #define SS_G(a, b, c, d, x, y) do { \
        v[a] = v[a] + v[b] + (x); v[d] = ss_rotr64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d]; v[b] = ss_rotr64(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y); v[d] = ss_rotr64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d]; v[b] = ss_rotr64(v[b] ^ v[c], 63); } while (0)

    static void ss_blake2b_compress(uint64_t h[8], const uint8_t block[128], uint64_t t, int last) {
        uint64_t v[16], m[16];
        int i;
        for (i = 0; i < 16; i++) m[i] = ss_load64(block + 8 * i);
        for (i = 0; i < 8; i++) { v[i] = h[i]; v[i + 8] = ss_blake2b_iv[i]; }
        v[12] ^= t;
        if (last) v[14] = ~v[14];
        for (i = 0; i < 12; i++) {
            const uint8_t *s = ss_blake2b_sigma[i];
            SS_G(0, 4, 8, 12, m[s[0]], m[s[1]]);
            SS_G(1, 5, 9, 13, m[s[2]], m[s[3]]);
            SS_G(2, 6, 10, 14, m[s[4]], m[s[5]]);
            SS_G(3, 7, 11, 15, m[s[6]], m[s[7]]);
            SS_G(0, 5, 10, 15, m[s[8]], m[s[9]]);
            SS_G(1, 6, 11, 12, m[s[10]], m[s[11]]);
            SS_G(2, 7, 8, 13, m[s[12]], m[s[13]]);
            SS_G(3, 4, 9, 14, m[s[14]], m[s[15]]);
        }
        for (i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
    }

    /* Unkeyed BLAKE2b of data[0:n] with an outlen-byte digest (1..64), into out. */
    static void ss_blake2b(const uint8_t *data, size_t n, int outlen, uint8_t *out) {
        uint64_t h[8], t = 0;
        uint8_t block[128];
        int i;
        for (i = 0; i < 8; i++) h[i] = ss_blake2b_iv[i];
        h[0] ^= 0x01010000ULL ^ (uint64_t)outlen;
        while (n > 128) {
            t += 128;
            ss_blake2b_compress(h, data, t, 0);
            data += 128;
            n -= 128;
        }
        memset(block, 0, sizeof block);
        if (n) memcpy(block, data, n);
        t += n;
        ss_blake2b_compress(h, block, t, 1);
        for (i = 0; i < outlen; i++) out[i] = (uint8_t)(h[i / 8] >> (8 * (i % 8)));
    }
    """
    void ss_blake2b(const uint8_t *data, size_t n, int outlen, uint8_t *out) noexcept nogil


cdef const char *_HEX = b"0123456789abcdef"


cdef str _hex(const uint8_t *digest, int n):
    """``digest[0:n]`` as lowercase hex digits (``bytes.hex()``)."""
    cdef char buf[128]
    cdef int i
    for i in range(n):
        buf[2 * i] = _HEX[digest[i] >> 4]
        buf[2 * i + 1] = _HEX[digest[i] & 15]
    return PyUnicode_FromStringAndSize(buf, 2 * n)


def blake2b_hex(bytes data, int digest_size):
    """``hashlib.blake2b(data, digest_size=digest_size).hexdigest()`` (1 to 64 bytes), the C hash
    the signatures use: tests hold it to hashlib."""
    cdef uint8_t digest[64]
    if not 1 <= digest_size <= 64:
        raise ValueError(f"digest_size must be 1 to 64, not {digest_size}")
    ss_blake2b(<const uint8_t *> <const char *> data, len(data), digest_size, digest)
    return _hex(digest, digest_size)

from ._text_c cimport _exact


cdef inline bint _sentence_mark(Py_UCS4 c) noexcept:
    return c == u'。' or c == u'!' or c == u'?' or c == u';'


cdef inline bint _closer(Py_UCS4 c) noexcept:
    return c == u'"' or c == u"'" or c == u'”' or c == u'’' or c == u')' or c == u']' or c == u'」' or c == u'』'


cdef void _piece(dict found, str text, Py_ssize_t lo, Py_ssize_t hi, Py_UCS4 *buf, bint sentence) except *:
    """``text[lo:hi]`` without whitespace, lower-cased, into ``found``: 0 for a sentence, else
    ``_LINE_BIT`` unless it is there already. ASCII letters are lower-cased here; ``str.lower`` runs
    only on a piece with another character that has a lower case (its full mapping: ``İ`` → ``i̇``)."""
    cdef Py_ssize_t i, n = 0
    cdef Py_UCS4 c
    cdef bint cased = False
    for i in range(lo, hi):
        c = text[i]
        if <uint32_t> c < 128:
            if c.isspace():
                continue
            if 65 <= <uint32_t> c <= 90:  # A-Z
                c = <Py_UCS4> (<uint32_t> c + 32)
        elif c.isspace():
            continue
        elif not cased and Py_UNICODE_TOLOWER(c) != c:
            cased = True
        buf[n] = c
        n += 1
    key = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, n)
    if cased:
        key = key.lower()
    if sentence:
        found[key] = 0
    elif PyDict_GetItem(found, key) == NULL:
        found[key] = _LINE_BIT


cdef object _LINE_BIT = 1 << 63


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


def sentence_hashes(object text_, Py_ssize_t min_chars):
    """The hashes of ``signatures.sentence_signature`` before they are sorted: for each piece of
    :func:`sentence_pieces` of at least ``min_chars`` characters and without ``=``, its UTF-8
    BLAKE2b-64 as 16 hex digits, the top bit cleared for a sentence and set for a line (a piece
    that cannot be UTF-8 encoded raises, as ``str.encode`` does)."""
    cdef dict found = sentence_pieces(text_)
    cdef list out = []
    cdef Py_ssize_t pos = 0, size
    cdef PyObject *key
    cdef PyObject *value
    cdef const char *data
    cdef uint8_t digest[8]
    while PyDict_Next(found, &pos, &key, &value):
        piece = <str> key
        if len(piece) < min_chars or "=" in piece:
            continue
        data = PyUnicode_AsUTF8AndSize(piece, &size)
        ss_blake2b(<const uint8_t *> data, size, 8, digest)
        if <object> value:  # a line
            digest[0] |= 0x80
        else:
            digest[0] &= 0x7F
        out.append(_hex(digest, 8))
    return out


def number_hashes(object numbers):
    """``[blake2b(n.encode("ascii", "replace"), digest_size=4).hexdigest() for n in numbers]``:
    each number's ASCII bytes (a character beyond ASCII as ``?``) hashed to 8 hex digits."""
    cdef list out = []
    cdef str number
    cdef Py_ssize_t i, n
    cdef Py_UCS4 c
    cdef uint8_t digest[4]
    cdef uint8_t *buf
    for item in numbers:
        number = <str?> item
        n = len(number)
        buf = <uint8_t *> malloc(n + 1)
        if buf == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                c = number[i]
                buf[i] = <uint8_t> c if c < 128 else 63  # "?"
            ss_blake2b(buf, n, 4, digest)
        finally:
            free(buf)
        out.append(_hex(digest, 4))
    return out
