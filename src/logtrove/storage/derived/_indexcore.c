/*
 * logtrove.storage.derived._indexcore: the indexer's per-record work, compiled.
 *
 * One `Pending` object collects what one index block needs from the records of many
 * batches: the hashes of keys, client message IDs and indexed headers with their
 * relative offsets (for `.keyidx`), tagged records (for `.tagidx`), the time bounds and
 * the set of value tokens (for `.skip`). It then encodes those parts of the blocks.
 * `probe_tables`, `chain`, `chain_from` and `tables_candidates` (in `_keyindex.c`, compiled
 * into this module) read the candidates of written `.keyidx` blocks for the query side.
 * It is the compiled twin of `logtrove.storage.derived.blockentries.PyPending`, which defines the
 * behaviour and the formats; tests/storage/test_pending.py checks that both produce
 * the same bytes for the same batches.
 *
 * Why C: the pure-Python loop costs 2-4 us a record, several times what a broker takes
 * to append one, and the indexer must keep up with sustained produce. The hashes are
 * xxh3-64 from the xxHash library (header-only, XXH_INLINE_ALL), the same function the
 * Python `xxhash` package computes, so both sides of an index agree.
 *
 * Input is the decompressed records section of a batch (Kafka record format v2):
 *   length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint | key | valueLength varint | value |
 *   headerCount varint | (nameLength varint | name | valueLength varint | value) * count
 * All varints are zig-zag. A record that does not fit its length or the payload raises
 * ValueError and leaves the object as it was before the batch (except for extra value
 * tokens, which can only make the token filter answer "maybe" more often).
 *
 * Memory safety: every read is bounds-checked against the record's length and the
 * buffer. tests/storage/test_pending.py feeds it damaged batches; to run that under
 * AddressSanitizer and UBSan, build the module over the installed one and preload them:
 *   gcc -shared -fPIC -g -O1 -fsanitize=address,undefined -std=c11 -I<python include> \
 *       src/logtrove/storage/derived/_indexcore.c src/logtrove/storage/derived/_keyindex.c \
 *       -o src/logtrove/storage/derived/_indexcore.<suffix>.so
 *   ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$(gcc -print-file-name=libasan.so) \
 *       $(gcc -print-file-name=libubsan.so)" .venv/bin/python -m pytest tests/storage/test_pending.py
 * then `make install` again.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../../records/varint.h" /* read_varint */

#define XXH_INLINE_ALL
#include <xxhash.h>

#define MIN_TOKEN 3
#define BLOOM_HASHES 2
#define BLOOM_BITS_PER_TOKEN 16
#define BLOOM_MIN_LOG2 6

/* ---- growable vectors ---------------------------------------------------------- */

/* A vector of `type` named `name`, with `name_push` (which sets MemoryError on failure). */
#define DEFINE_VECTOR(name, type)                                                  \
    typedef struct {                                                               \
        type *v;                                                                   \
        Py_ssize_t n, cap;                                                         \
    } name;                                                                        \
                                                                                   \
    static int name##_push(name *a, type x)                                        \
    {                                                                              \
        if (a->n == a->cap) {                                                      \
            Py_ssize_t cap = a->cap ? 2 * a->cap : 1024;                           \
            type *v = PyMem_Realloc(a->v, (size_t)cap * sizeof(type));             \
            if (v == NULL) {                                                       \
                PyErr_NoMemory();                                                  \
                return -1;                                                         \
            }                                                                      \
            a->v = v;                                                              \
            a->cap = cap;                                                          \
        }                                                                          \
        a->v[a->n++] = x;                                                          \
        return 0;                                                                  \
    }

DEFINE_VECTOR(u64vec, uint64_t)
DEFINE_VECTOR(u32vec, uint32_t)

/* ---- a set of 64-bit token digests ------------------------------------------------
 * Open addressing with linear probing; 0 marks an empty slot, so the digest 0 is kept
 * in a flag. The Bloom filter only needs the distinct digests, and sizes itself by
 * their count. */

typedef struct {
    uint64_t *slots;
    size_t mask; /* capacity - 1, capacity a power of two; 0 before the first add */
    size_t n;
    int has_zero;
} digestset;

static int
dset_grow(digestset *s)
{
    size_t cap = s->slots ? 2 * (s->mask + 1) : 4096;
    uint64_t *slots = PyMem_Calloc(cap, sizeof(uint64_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (s->slots) {
        for (size_t i = 0; i <= s->mask; i++) {
            uint64_t d = s->slots[i];
            if (d) {
                size_t j = (size_t)(d ^ (d >> 29)) & (cap - 1);
                while (slots[j]) {
                    j = (j + 1) & (cap - 1);
                }
                slots[j] = d;
            }
        }
        PyMem_Free(s->slots);
    }
    s->slots = slots;
    s->mask = cap - 1;
    return 0;
}

static int
dset_add(digestset *s, uint64_t d)
{
    if (d == 0) {
        s->has_zero = 1;
        return 0;
    }
    if (s->slots == NULL || 2 * (s->n + 1) > s->mask + 1) {
        if (dset_grow(s) < 0) {
            return -1;
        }
    }
    size_t j = (size_t)(d ^ (d >> 29)) & s->mask;
    while (s->slots[j]) {
        if (s->slots[j] == d) {
            return 0;
        }
        j = (j + 1) & s->mask;
    }
    s->slots[j] = d;
    s->n++;
    return 0;
}

/* ---- helpers --------------------------------------------------------------------- */

static const unsigned char TOKEN_BYTE[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
    ['8'] = 1, ['9'] = 1, ['_'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
};

static inline void
put_be32(unsigned char *out, uint32_t x)
{
    out[0] = (unsigned char)(x >> 24);
    out[1] = (unsigned char)(x >> 16);
    out[2] = (unsigned char)(x >> 8);
    out[3] = (unsigned char)x;
}

/* ---- the Pending type ------------------------------------------------------------- */

typedef struct {
    const char *name;
    Py_ssize_t name_len;
    const char *prefix;
    Py_ssize_t prefix_len;
} indexed_header;

typedef struct {
    PyObject_HEAD
    PyObject *names;      /* (id_name, tag_name, indexed dict): keeps the bytes alive */
    const char *id_name;
    Py_ssize_t id_len;
    const char *tag_name;
    Py_ssize_t tag_len;
    indexed_header *indexed;
    Py_ssize_t n_indexed;
    u64vec key_digests;
    u32vec key_rel;
    u32vec tag_rel;
    u32vec tag_hashes;
    PyObject *tag_counts; /* dict: tag bytes -> records */
    digestset tokens;
    long long min_ts;
    long long max_ts;
    Py_ssize_t records;
    char *scratch;
    Py_ssize_t scratch_cap;
} Pending;

/* xxh3-64 of prefix + data (the namespaced inputs of the indexes). */
static int
digest2(Pending *self, const char *prefix, Py_ssize_t plen, const uint8_t *data, Py_ssize_t dlen,
        uint64_t *out)
{
    Py_ssize_t need = plen + dlen;
    if (need > self->scratch_cap) {
        Py_ssize_t cap = need < 4096 ? 4096 : need;
        char *s = PyMem_Realloc(self->scratch, (size_t)cap);
        if (s == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->scratch = s;
        self->scratch_cap = cap;
    }
    memcpy(self->scratch, prefix, (size_t)plen);
    memcpy(self->scratch + plen, data, (size_t)dlen);
    *out = XXH3_64bits(self->scratch, (size_t)need);
    return 0;
}

/* One .keyidx entry: the hash of prefix + data, at relative offset rel. */
static int
add_key_entry(Pending *self, const char *prefix, Py_ssize_t plen, const uint8_t *data, Py_ssize_t dlen,
              long long rel)
{
    uint64_t d;
    if (digest2(self, prefix, plen, data, dlen, &d) < 0 || u64vec_push(&self->key_digests, d) < 0 ||
        u32vec_push(&self->key_rel, (uint32_t)rel) < 0) {
        return -1;
    }
    return 0;
}

static int
add_tokens(Pending *self, const uint8_t *v, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        while (i < n && !TOKEN_BYTE[v[i]]) {
            i++;
        }
        Py_ssize_t start = i;
        while (i < n && TOKEN_BYTE[v[i]]) {
            i++;
        }
        if (i - start >= MIN_TOKEN) {
            uint64_t d;
            if (digest2(self, "w:", 2, v + start, i - start, &d) < 0 || dset_add(&self->tokens, d) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

static int
Pending_init(Pending *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"id_name", "tag_name", "indexed", NULL};
    PyObject *id_name, *tag_name, *indexed;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "SSO!:Pending", kwlist, &id_name, &tag_name, &PyDict_Type,
                                     &indexed)) {
        return -1;
    }
    if (self->names != NULL) {
        PyErr_SetString(PyExc_TypeError, "Pending is initialised once");
        return -1;
    }
    PyObject *copy = PyDict_Copy(indexed);
    if (copy == NULL) {
        return -1;
    }
    self->names = PyTuple_Pack(3, id_name, tag_name, copy);
    Py_DECREF(copy);
    self->tag_counts = PyDict_New();
    if (self->names == NULL || self->tag_counts == NULL) {
        return -1;
    }
    self->id_name = PyBytes_AS_STRING(id_name);
    self->id_len = PyBytes_GET_SIZE(id_name);
    self->tag_name = PyBytes_AS_STRING(tag_name);
    self->tag_len = PyBytes_GET_SIZE(tag_name);
    Py_ssize_t n = PyDict_GET_SIZE(copy);
    self->indexed = PyMem_Calloc(n ? (size_t)n : 1, sizeof(indexed_header));
    if (self->indexed == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(copy, &pos, &k, &v)) {
        if (!PyBytes_Check(k) || !PyBytes_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "indexed maps header names (bytes) to hash prefixes (bytes)");
            return -1;
        }
        indexed_header *h = &self->indexed[self->n_indexed++];
        h->name = PyBytes_AS_STRING(k);
        h->name_len = PyBytes_GET_SIZE(k);
        h->prefix = PyBytes_AS_STRING(v);
        h->prefix_len = PyBytes_GET_SIZE(v);
    }
    self->min_ts = INT64_MAX;
    self->max_ts = INT64_MIN;
    return 0;
}

static void
Pending_dealloc(Pending *self)
{
    Py_XDECREF(self->names);
    Py_XDECREF(self->tag_counts);
    PyMem_Free(self->indexed);
    PyMem_Free(self->key_digests.v);
    PyMem_Free(self->key_rel.v);
    PyMem_Free(self->tag_rel.v);
    PyMem_Free(self->tag_hashes.v);
    PyMem_Free(self->tokens.slots);
    PyMem_Free(self->scratch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
same(const uint8_t *a, Py_ssize_t alen, const char *b, Py_ssize_t blen)
{
    return alen == blen && memcmp(a, b, (size_t)alen) == 0;
}

static int
corrupt(Py_ssize_t record, const char *what)
{
    PyErr_Format(PyExc_ValueError, "record %zd of the batch is malformed: %s", record, what);
    return -1;
}

/* Parse the records of one batch (see the file comment). */
static int
parse_batch(Pending *self, const uint8_t *b, Py_ssize_t end, long long rel_base, long long base_ts,
            int has_append_ts, long long append_ts, u64vec *tag_spans, Py_ssize_t *count_out)
{
    Py_ssize_t p = 0, count = 0;
    long long min_ts = self->min_ts, max_ts = self->max_ts;
    int64_t v;
    while (p < end) {
        if (read_varint(b, end, &p, &v) < 0 || v < 0 || v > end - p) {
            return corrupt(count, "its length runs past the batch");
        }
        Py_ssize_t rec_end = p + (Py_ssize_t)v;
        p += 1; /* attributes */
        int64_t ts_delta, off_delta, klen, vlen, nheaders = 0;
        if (p > rec_end || read_varint(b, rec_end, &p, &ts_delta) < 0 ||
            read_varint(b, rec_end, &p, &off_delta) < 0) {
            return corrupt(count, "truncated timestamp or offset delta");
        }
        long long rel = rel_base + off_delta;
        if (rel < 0 || rel > (long long)UINT32_MAX) {
            return corrupt(count, "offset outside the segment");
        }
        long long ts = base_ts + ts_delta;
        if (read_varint(b, rec_end, &p, &klen) < 0 || klen > rec_end - p) {
            return corrupt(count, "truncated key");
        }
        if (klen >= 0) {
            if (add_key_entry(self, "k:", 2, b + p, (Py_ssize_t)klen, rel) < 0) {
                return -1;
            }
            p += (Py_ssize_t)klen;
        }
        if (read_varint(b, rec_end, &p, &vlen) < 0 || vlen > rec_end - p) {
            return corrupt(count, "truncated value");
        }
        if (vlen > 0) {
            if (add_tokens(self, b + p, (Py_ssize_t)vlen) < 0) {
                return -1;
            }
            p += (Py_ssize_t)vlen;
        }
        if (p < rec_end && (read_varint(b, rec_end, &p, &nheaders) < 0 || nheaders < 0)) {
            return corrupt(count, "bad header count");
        }
        Py_ssize_t tag_pos = -1, tag_len = 0;
        for (int64_t h = 0; h < nheaders; h++) {
            int64_t nlen, hlen;
            if (read_varint(b, rec_end, &p, &nlen) < 0 || nlen < 0 || nlen > rec_end - p) {
                return corrupt(count, "truncated header name");
            }
            const uint8_t *name = b + p;
            p += (Py_ssize_t)nlen;
            if (read_varint(b, rec_end, &p, &hlen) < 0 || hlen > rec_end - p) {
                return corrupt(count, "truncated header value");
            }
            int is_tag = same(name, (Py_ssize_t)nlen, self->tag_name, self->tag_len);
            if (hlen < 0) {
                if (is_tag) {
                    tag_pos = -1;
                }
                continue;
            }
            const uint8_t *value = b + p;
            p += (Py_ssize_t)hlen;
            if (same(name, (Py_ssize_t)nlen, self->id_name, self->id_len) &&
                add_key_entry(self, "i:", 2, value, (Py_ssize_t)hlen, rel) < 0) {
                return -1;
            }
            if (is_tag) {
                tag_pos = value - b;
                tag_len = (Py_ssize_t)hlen;
            }
            for (Py_ssize_t i = 0; i < self->n_indexed; i++) {
                indexed_header *ih = &self->indexed[i];
                if (same(name, (Py_ssize_t)nlen, ih->name, ih->name_len) &&
                    add_key_entry(self, ih->prefix, ih->prefix_len, value, (Py_ssize_t)hlen, rel) < 0) {
                    return -1;
                }
            }
        }
        if (tag_pos >= 0) {
            uint64_t d;
            if (digest2(self, "t:", 2, b + tag_pos, tag_len, &d) < 0 ||
                u32vec_push(&self->tag_rel, (uint32_t)rel) < 0 || u32vec_push(&self->tag_hashes, (uint32_t)d) < 0 ||
                u64vec_push(tag_spans, (uint64_t)tag_pos) < 0 || u64vec_push(tag_spans, (uint64_t)tag_len) < 0) {
                return -1;
            }
        }
        p = rec_end;
        if (ts < min_ts) {
            min_ts = ts;
        }
        if (ts > max_ts) {
            max_ts = ts;
        }
        count++;
    }
    if (has_append_ts) { /* LogAppendTime: every record has the batch's time */
        min_ts = self->min_ts < append_ts ? self->min_ts : append_ts;
        max_ts = self->max_ts > append_ts ? self->max_ts : append_ts;
    }
    self->min_ts = min_ts;
    self->max_ts = max_ts;
    *count_out = count;
    return 0;
}

static int
count_tags(Pending *self, const uint8_t *b, const u64vec *spans)
{
    for (Py_ssize_t i = 0; i < spans->n; i += 2) {
        PyObject *tag = PyBytes_FromStringAndSize((const char *)b + spans->v[i], (Py_ssize_t)spans->v[i + 1]);
        if (tag == NULL) {
            return -1;
        }
        PyObject *old = PyDict_GetItemWithError(self->tag_counts, tag);
        long n = 0;
        if (old != NULL) {
            n = PyLong_AsLong(old);
        } else if (PyErr_Occurred()) {
            Py_DECREF(tag);
            return -1;
        }
        PyObject *now = PyLong_FromLong(n + 1);
        int rc = now == NULL ? -1 : PyDict_SetItem(self->tag_counts, tag, now);
        Py_XDECREF(now);
        Py_DECREF(tag);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(Pending_add_doc,
             "add(payload, rel_base, base_ts, append_ts)\n--\n\n"
             "Index the records of one batch (its decompressed records section); returns how many.\n"
             "rel_base: the batch's base offset minus the segment's; append_ts: the batch's\n"
             "max timestamp for a LogAppendTime batch, else None. ValueError if a record is\n"
             "malformed (the object is left as it was, but for extra value tokens).");

static PyObject *
Pending_add(Pending *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "add(payload, rel_base, base_ts, append_ts) takes 4 arguments");
        return NULL;
    }
    if (self->names == NULL) {
        PyErr_SetString(PyExc_TypeError, "Pending is not initialised");
        return NULL;
    }
    long long rel_base = PyLong_AsLongLong(args[1]);
    long long base_ts = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    int has_append_ts = args[3] != Py_None;
    long long append_ts = has_append_ts ? PyLong_AsLongLong(args[3]) : 0;
    if (has_append_ts && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    /* What to restore if the batch is malformed. */
    Py_ssize_t keys = self->key_digests.n, tags = self->tag_rel.n;
    long long min_ts = self->min_ts, max_ts = self->max_ts;
    u64vec spans = {NULL, 0, 0};
    Py_ssize_t count = 0;
    const uint8_t *b = buf.buf;
    int rc = parse_batch(self, b, buf.len, rel_base, base_ts, has_append_ts, append_ts, &spans, &count);
    if (rc == 0) {
        rc = count_tags(self, b, &spans);
    }
    PyMem_Free(spans.v);
    PyBuffer_Release(&buf);
    if (rc < 0) {
        self->key_digests.n = self->key_rel.n = keys;
        self->tag_rel.n = self->tag_hashes.n = tags;
        self->min_ts = min_ts;
        self->max_ts = max_ts;
        return NULL;
    }
    self->records += count;
    return PyLong_FromSsize_t(count);
}

PyDoc_STRVAR(Pending_key_table_doc,
             "key_table()\n--\n\n"
             "The .keyidx payload after its names: slot count, entry count, slot ends, and the\n"
             "entries grouped by slot, newest first in each (keyindex.encode_table's bytes).");

static PyObject *
Pending_key_table(Pending *self, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t n = self->key_digests.n;
    if (n > (Py_ssize_t)UINT32_MAX - 1) {
        PyErr_SetString(PyExc_OverflowError, "too many entries for one block");
        return NULL;
    }
    size_t slots = 1;
    while (slots < (size_t)n) {
        slots <<= 1;
    }
    size_t mask = slots - 1;
    /* a counting sort by slot: sizes, then ends, then each entry placed from its slot's
     * end backwards, oldest first, so that each slot's entries end up newest first */
    uint32_t *cursor = PyMem_Calloc(slots, sizeof(uint32_t));
    if (cursor == NULL) {
        return PyErr_NoMemory();
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 + 4 * slots + 8 * (size_t)n));
    if (out == NULL) {
        PyMem_Free(cursor);
        return NULL;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    put_be32(o, (uint32_t)slots);
    put_be32(o + 4, (uint32_t)n);
    for (Py_ssize_t i = 0; i < n; i++) {
        cursor[(size_t)(self->key_digests.v[i] >> 32) & mask]++;
    }
    uint32_t end = 0;
    for (size_t s = 0; s < slots; s++) {
        end += cursor[s];
        cursor[s] = end;
        put_be32(o + 8 + 4 * s, end);
    }
    unsigned char *entries = o + 8 + 4 * slots;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t d = self->key_digests.v[i];
        unsigned char *e = entries + 8 * (size_t)--cursor[(size_t)(d >> 32) & mask];
        put_be32(e, (uint32_t)d);
        put_be32(e + 4, self->key_rel.v[i]);
    }
    PyMem_Free(cursor);
    return out;
}

PyDoc_STRVAR(Pending_bloom_doc,
             "bloom()\n--\n\n"
             "(log2 bits, filter bytes): the .skip Bloom filter of the distinct value tokens.");

static inline void
set_bits(unsigned char *bloom, uint64_t mask, uint64_t d)
{
    uint64_t h1 = d & 0xFFFFFFFFu, h2 = (d >> 32) | 1;
    for (uint64_t i = 0; i < BLOOM_HASHES; i++) {
        uint64_t bit = (h1 + i * h2) & mask;
        bloom[bit >> 3] |= (unsigned char)(1u << (bit & 7));
    }
}

static PyObject *
Pending_bloom(Pending *self, PyObject *Py_UNUSED(ignored))
{
    size_t tokens = self->tokens.n + (size_t)self->tokens.has_zero;
    int log2 = BLOOM_MIN_LOG2;
    while (((size_t)1 << log2) < BLOOM_BITS_PER_TOKEN * tokens) {
        log2++;
    }
    PyObject *bits = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)1 << (log2 - 3));
    if (bits == NULL) {
        return NULL;
    }
    unsigned char *bloom = (unsigned char *)PyBytes_AS_STRING(bits);
    memset(bloom, 0, (size_t)1 << (log2 - 3));
    uint64_t mask = ((uint64_t)1 << log2) - 1;
    if (self->tokens.slots) {
        for (size_t i = 0; i <= self->tokens.mask; i++) {
            if (self->tokens.slots[i]) {
                set_bits(bloom, mask, self->tokens.slots[i]);
            }
        }
    }
    if (self->tokens.has_zero) {
        set_bits(bloom, mask, 0);
    }
    return Py_BuildValue("(iN)", log2, bits);
}

PyDoc_STRVAR(Pending_tag_entries_doc,
             "tag_entries()\n--\n\n"
             "The .tagidx entries: (relative offset u32, tag hash u32) big-endian, offset order.");

static PyObject *
Pending_tag_entries(Pending *self, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t n = self->tag_rel.n;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 * n);
    if (out == NULL) {
        return NULL;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        put_be32(o + 8 * i, self->tag_rel.v[i]);
        put_be32(o + 8 * i + 4, self->tag_hashes.v[i]);
    }
    return out;
}

PyDoc_STRVAR(Pending_tag_counts_doc,
             "tag_counts()\n--\n\nA new dict: each tag of the block and how many records carry it.");

static PyObject *
Pending_tag_counts(Pending *self, PyObject *Py_UNUSED(ignored))
{
    if (self->tag_counts == NULL) {
        return PyDict_New();
    }
    return PyDict_Copy(self->tag_counts);
}

static PyMethodDef Pending_methods[] = {
    {"add", (PyCFunction)(void (*)(void))Pending_add, METH_FASTCALL, Pending_add_doc},
    {"key_table", (PyCFunction)Pending_key_table, METH_NOARGS, Pending_key_table_doc},
    {"bloom", (PyCFunction)Pending_bloom, METH_NOARGS, Pending_bloom_doc},
    {"tag_entries", (PyCFunction)Pending_tag_entries, METH_NOARGS, Pending_tag_entries_doc},
    {"tag_counts", (PyCFunction)Pending_tag_counts, METH_NOARGS, Pending_tag_counts_doc},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Pending_members[] = {
    {"records", T_PYSSIZET, offsetof(Pending, records), READONLY, "records added"},
    {"min_ts", T_LONGLONG, offsetof(Pending, min_ts), READONLY, "smallest timestamp (2**63-1 if none)"},
    {"max_ts", T_LONGLONG, offsetof(Pending, max_ts), READONLY, "largest timestamp (-2**63 if none)"},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(Pending_doc,
             "Pending(id_name, tag_name, indexed)\n--\n\n"
             "What one index block needs from the records added to it. id_name / tag_name: the\n"
             "topic's message-ID and tag header names; indexed: indexed header name -> hash\n"
             "prefix (b'h:<name>:'). See logtrove.storage.derived.blockentries.PyPending.");

static PyTypeObject PendingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "logtrove.storage.derived._indexcore.Pending",
    .tp_basicsize = sizeof(Pending),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = Pending_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pending_init,
    .tp_dealloc = (destructor)Pending_dealloc,
    .tp_methods = Pending_methods,
    .tp_members = Pending_members,
};

/* The query side's functions, in _keyindex.c. */
extern PyMethodDef logtrove_keyindex_functions[];

static struct PyModuleDef indexcore_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "logtrove.storage.derived._indexcore",
    .m_doc = "The indexer's per-record work, compiled (see logtrove.storage.derived.blockentries).",
    .m_size = -1,
    .m_methods = logtrove_keyindex_functions,
};

PyMODINIT_FUNC
PyInit__indexcore(void)
{
    if (PyType_Ready(&PendingType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&indexcore_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Pending", (PyObject *)&PendingType) < 0 ||
        PyModule_AddIntConstant(m, "XXHASH_VERSION", XXH_VERSION_NUMBER) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
