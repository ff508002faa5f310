/*
 * logtrove.storage.cleaner._passes: the per-record work of the cleaner's two passes,
 * compiled.
 *
 *   map_records(table, capacity, size, payload, base_offset, record_count, first_dirty,
 *               limit) -> (size, full_at)
 *   filter_records(table, layout, payload, base_offset, record_count, base_ts, append_ts,
 *                  batch_horizon, now, new_horizon, end)
 *       -> (records, read, kept, tombstones_removed, live, base_ts, max_ts, horizon)
 *   digest_keys(ends, data, rows, large, offset) -> bytes
 *   map_entries(digests, offsets, rows) -> bytes
 *
 * It is the compiled twin of logtrove.storage.cleaner.passes (py_map_records,
 * py_filter_records, py_digest_keys, py_map_entries), which defines the behaviour, the table layouts and the meaning of
 * every argument and result; tests/cleaner/test_passes.py checks that both give the same
 * tables, bytes, results and error messages on real segments and damaged payloads.
 *
 * `payload` is the decompressed records section of one batch (Kafka record format v2,
 * zig-zag varints):
 *   length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint | key | valueLength varint | value | headerCount varint | headers
 * Only the fields up to the value length are decoded; from keyLength to the record's end
 * (the "tail") the bytes are copied as they are into a rebuilt record.
 *
 * Why C: the Python passes cost 5-20 us a record (hashing, probing the table, decoding);
 * here a record costs a hash and a probe, and the copy pass moves bytes with memcpy.
 * The key digest is xxh3-128 from the xxHash library (XXH_INLINE_ALL), in its canonical
 * big-endian form: the same 16 bytes as Python's xxhash.xxh3_128_digest.
 *
 * The GIL is released while a payload is walked (the buffers are held through the
 * buffer protocol, so they cannot move); errors are raised after it is taken back.
 * Every read is bounds-checked against the record's length, which is checked against
 * the payload; table probes are bounded by the table's slot count.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../../records/varint.h" /* read_varint */

#define XXH_INLINE_ALL
#include <xxhash.h>

#define SLOT 24          /* digest 16 B | offset (+1 in the hashed table) 8 B */
#define DIGEST 16
#define LAYOUT_HASHED 0  /* OffsetMap: open addressing, offset + 1 as u64, 0 = empty */
#define LAYOUT_SORTED 1  /* OffsetMapFile: 24-byte header, entries sorted by digest, i64 */
#define MAX_OFFSET_DELTA 0x7FFFFFFF
#define GROUP 16 /* records hashed and prefetched before their probes */

/* ---- errors, set once the GIL is held again ------------------------------------ */

enum fault {
    OK = 0,
    F_LENGTH,
    F_EMPTY,
    F_TIMESTAMP,
    F_OFFSET,
    F_OFFSET_RANGE,
    F_KEY,
    F_VALUE,
    F_TOO_MANY,
    F_TOO_FEW,
    F_TABLE,
};

static const char *const fault_text[] = {
    [F_LENGTH] = "its length runs past the records",
    [F_EMPTY] = "it is empty",
    [F_TIMESTAMP] = "truncated timestamp delta",
    [F_OFFSET] = "truncated offset delta",
    [F_OFFSET_RANGE] = "its offset delta is out of range",
    [F_KEY] = "truncated key",
    [F_VALUE] = "truncated value",
};

static PyObject *
raise_fault(enum fault f, Py_ssize_t record, Py_ssize_t declared)
{
    if (f == F_TOO_MANY) {
        PyErr_Format(PyExc_ValueError, "the batch holds more than its %zd declared records", declared);
    } else if (f == F_TOO_FEW) {
        PyErr_Format(PyExc_ValueError, "the batch declares %zd records, holds %zd", declared, record);
    } else if (f == F_TABLE) {
        PyErr_SetString(PyExc_ValueError, "the offset map table has no free slot");
    } else {
        PyErr_Format(PyExc_ValueError, "record %zd of the batch is malformed: %s", record, fault_text[f]);
    }
    return NULL;
}

/* ---- one record ------------------------------------------------------------------ */

typedef struct {
    Py_ssize_t tail;   /* position of keyLength: copied from here to `end` */
    Py_ssize_t end;    /* position after the record */
    int64_t ts_delta;
    int64_t off_delta;
    const uint8_t *key;
    Py_ssize_t key_len; /* < 0: null key */
    int tombstone;      /* null value */
} record_t;

static enum fault
parse_record(const uint8_t *b, Py_ssize_t n, Py_ssize_t *p, record_t *r)
{
    int64_t v;
    if (read_varint(b, n, p, &v) < 0 || v < 0 || v > n - *p) {
        return F_LENGTH;
    }
    Py_ssize_t end = *p + (Py_ssize_t)v, q = *p;
    if (q >= end) {
        return F_EMPTY;
    }
    q += 1; /* attributes */
    if (read_varint(b, end, &q, &r->ts_delta) < 0) {
        return F_TIMESTAMP;
    }
    if (read_varint(b, end, &q, &r->off_delta) < 0) {
        return F_OFFSET;
    }
    if (r->off_delta < 0 || r->off_delta > MAX_OFFSET_DELTA) {
        return F_OFFSET_RANGE;
    }
    r->tail = q;
    int64_t klen, vlen;
    if (read_varint(b, end, &q, &klen) < 0 || klen > end - q) {
        return F_KEY;
    }
    r->key = b + q;
    r->key_len = klen < 0 ? -1 : (Py_ssize_t)klen;
    if (klen > 0) {
        q += (Py_ssize_t)klen;
    }
    if (read_varint(b, end, &q, &vlen) < 0 || vlen > end - q) {
        return F_VALUE;
    }
    r->tombstone = vlen < 0;
    r->end = end;
    *p = end;
    return OK;
}

/* ---- the maps -------------------------------------------------------------------- */

static inline uint64_t
load_be64(const uint8_t *s)
{
    uint64_t v;
    memcpy(&v, s, 8);
    return __builtin_bswap64(v);
}

static inline void
store_be64(uint8_t *d, uint64_t v)
{
    v = __builtin_bswap64(v);
    memcpy(d, &v, 8);
}

static inline void
digest_of(const uint8_t *key, Py_ssize_t len, uint8_t out[DIGEST])
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(key, (size_t)len));
    memcpy(out, c.digest, DIGEST);
}

/* Slot where `dig` is, or the empty slot where it would go; -1 if the table has neither. */
static Py_ssize_t
probe(const uint8_t *t, Py_ssize_t slots, const uint8_t dig[DIGEST], uint64_t *stored)
{
    Py_ssize_t slot = (Py_ssize_t)(load_be64(dig) % (uint64_t)slots);
    for (Py_ssize_t i = 0; i < slots; i++) {
        const uint8_t *s = t + slot * SLOT;
        uint64_t v = load_be64(s + DIGEST);
        if (v == 0 || memcmp(s, dig, DIGEST) == 0) {
            *stored = v;
            return slot;
        }
        slot = slot + 1 < slots ? slot + 1 : 0;
    }
    return -1;
}

/* The latest offset of `dig` in either layout: 1 and *out when found, 0 when not, -1 when
 * a hashed table has no free slot. */
static int
latest(const uint8_t *t, Py_ssize_t len, int layout, const uint8_t dig[DIGEST], int64_t *out)
{
    if (layout == LAYOUT_HASHED) {
        uint64_t stored;
        if (probe(t, len / SLOT, dig, &stored) < 0) {
            return -1;
        }
        *out = (int64_t)(stored - 1);
        return stored != 0;
    }
    Py_ssize_t lo = 0, hi = (len - SLOT) / SLOT;
    const uint8_t *entries = t + SLOT;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        int c = memcmp(entries + mid * SLOT, dig, DIGEST);
        if (c < 0) {
            lo = mid + 1;
        } else if (c > 0) {
            hi = mid;
        } else {
            *out = (int64_t)load_be64(entries + mid * SLOT + DIGEST);
            return 1;
        }
    }
    return 0;
}

/* ---- map_records ------------------------------------------------------------------ */

typedef struct {
    uint8_t *table;
    Py_ssize_t slots, capacity, size;
    const uint8_t *b;
    Py_ssize_t n, declared;
    int64_t base_offset, first_dirty, limit;
    /* results */
    int full;
    int64_t full_at;
    Py_ssize_t count;
} map_job;

/* Records are taken GROUP at a time: parsed and hashed first, their home slots
 * prefetched, then probed in order. A table larger than the caches costs a memory miss a
 * probe; prefetching overlaps a group's misses instead of paying them one by one. */
typedef struct {
    int64_t offset;
    int has_key;
    uint8_t dig[DIGEST];
} hashed_t;

static inline void
prefetch_home(const uint8_t *t, Py_ssize_t slots, const uint8_t dig[DIGEST])
{
    const uint8_t *s = t + (Py_ssize_t)(load_be64(dig) % (uint64_t)slots) * SLOT;
    __builtin_prefetch(s);
    __builtin_prefetch(s + SLOT - 1);
}

static enum fault
map_walk(map_job *j)
{
    Py_ssize_t p = 0;
    hashed_t g[GROUP];
    while (p < j->n) {
        int k = 0, at_limit = 0;
        enum fault fault = OK;
        while (k < GROUP && p < j->n) {
            if (j->count + k == j->declared) {
                fault = F_TOO_MANY;
                break;
            }
            record_t r;
            fault = parse_record(j->b, j->n, &p, &r);
            if (fault != OK) {
                break;
            }
            int64_t offset = j->base_offset + r.off_delta;
            if (offset >= j->limit) {
                at_limit = 1; /* the rest is beyond what this round maps */
                break;
            }
            g[k].offset = offset;
            g[k].has_key = offset >= j->first_dirty && r.key_len >= 0;
            if (g[k].has_key) {
                digest_of(r.key, r.key_len, g[k].dig);
                prefetch_home(j->table, j->slots, g[k].dig);
            }
            k++;
        }
        for (int i = 0; i < k; i++) {
            j->count++;
            if (!g[i].has_key) {
                continue;
            }
            uint64_t stored;
            Py_ssize_t slot = probe(j->table, j->slots, g[i].dig, &stored);
            if (slot < 0) {
                return F_TABLE;
            }
            if (stored == 0) {
                if (j->size >= j->capacity) {
                    j->full = 1;
                    j->full_at = g[i].offset;
                    return OK;
                }
                j->size++;
            }
            uint8_t *s = j->table + slot * SLOT;
            memcpy(s, g[i].dig, DIGEST);
            store_be64(s + DIGEST, (uint64_t)g[i].offset + 1);
        }
        if (fault != OK || at_limit) {
            return fault;
        }
    }
    return j->count == j->declared ? OK : F_TOO_FEW;
}

static PyObject *
map_records(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer table, payload;
    map_job j = {0};
    if (!PyArg_ParseTuple(args, "w*nny*LnLL:map_records", &table, &j.capacity, &j.size, &payload,
                          &j.base_offset, &j.declared, &j.first_dirty, &j.limit)) {
        return NULL;
    }
    if (j.declared < 0) {
        j.declared = 0;
    }
    PyObject *result = NULL;
    if (table.len < 4 * SLOT) {
        PyErr_SetString(PyExc_ValueError, "the offset map table is too small");
        goto done;
    }
    j.table = table.buf;
    j.slots = table.len / SLOT;
    j.b = payload.buf;
    j.n = payload.len;
    enum fault f;
    Py_BEGIN_ALLOW_THREADS
    f = map_walk(&j);
    Py_END_ALLOW_THREADS
    if (f != OK) {
        raise_fault(f, j.count, j.declared);
        goto done;
    }
    if (j.full) {
        result = Py_BuildValue("(nL)", j.size, j.full_at);
    } else {
        result = Py_BuildValue("(nO)", j.size, Py_None);
    }
done:
    PyBuffer_Release(&table);
    PyBuffer_Release(&payload);
    return result;
}

/* ---- filter_records ----------------------------------------------------------------- */

typedef struct {
    const uint8_t *table;
    Py_ssize_t table_len;
    int layout;
    const uint8_t *b;
    Py_ssize_t n, declared;
    int64_t base_offset, base_ts, append_ts, now, new_horizon, end, batch_horizon;
    int has_append_ts, has_batch_horizon;
    uint8_t *keep; /* one flag per record, `flags` of them */
    Py_ssize_t flags;
    /* results */
    Py_ssize_t read, kept, tombstones_removed, live;
    int needs_horizon;
    int64_t first_ts, max_ts;
} filter_job;

static inline int64_t
record_ts(const filter_job *j, const record_t *r)
{
    return j->has_append_ts ? j->append_ts : (int64_t)((uint64_t)j->base_ts + (uint64_t)r->ts_delta);
}

/* First walk: decide each record, count, find the first and largest kept timestamps.
 * Records are taken GROUP at a time, as in map_walk: parsed, hashed and prefetched, then
 * decided in order. */
typedef struct {
    record_t r;
    int64_t offset;
    int lookup;
    uint8_t dig[DIGEST];
} candidate_t;

static void
decide(filter_job *j, const candidate_t *c, int found, int64_t newest)
{
    int keep = 1;
    if (c->offset < j->end) {
        if (c->r.key_len < 0) {
            keep = 0;
        } else if (found && newest > c->offset) {
            keep = 0;
        } else if (c->r.tombstone && j->has_batch_horizon && j->batch_horizon <= j->now) {
            keep = 0;
            j->tombstones_removed++;
        }
        if (keep) {
            j->live += !c->r.tombstone;
            j->needs_horizon |= c->r.tombstone;
        }
    }
    j->keep[j->read++] = (uint8_t)keep;
    if (keep) {
        int64_t ts = record_ts(j, &c->r);
        if (j->kept == 0 || ts > j->max_ts) {
            j->max_ts = ts;
        }
        if (j->kept == 0) {
            j->first_ts = ts;
        }
        j->kept++;
    }
}

static enum fault
filter_decide(filter_job *j)
{
    Py_ssize_t p = 0;
    candidate_t g[GROUP];
    while (p < j->n) {
        int k = 0;
        enum fault fault = OK;
        while (k < GROUP && p < j->n) {
            if (j->read + k == j->declared || j->read + k == j->flags) {
                fault = F_TOO_MANY;
                break;
            }
            candidate_t *c = &g[k];
            fault = parse_record(j->b, j->n, &p, &c->r);
            if (fault != OK) {
                break;
            }
            c->offset = j->base_offset + c->r.off_delta;
            c->lookup = c->offset < j->end && c->r.key_len >= 0;
            if (c->lookup) {
                digest_of(c->r.key, c->r.key_len, c->dig);
                if (j->layout == LAYOUT_HASHED) {
                    prefetch_home(j->table, j->table_len / SLOT, c->dig);
                }
            }
            k++;
        }
        for (int i = 0; i < k; i++) {
            int found = 0;
            int64_t newest = 0;
            if (g[i].lookup) {
                found = latest(j->table, j->table_len, j->layout, g[i].dig, &newest);
                if (found < 0) {
                    return F_TABLE;
                }
            }
            decide(j, &g[i], found, newest);
        }
        if (fault != OK) {
            return fault;
        }
    }
    return j->read == j->declared ? OK : F_TOO_FEW;
}

static inline uint8_t *
put_varint(uint8_t *d, int64_t value)
{
    uint64_t n = ((uint64_t)value << 1) ^ -((uint64_t)value >> 63);
    while (n >= 0x80) {
        *d++ = (uint8_t)(n | 0x80);
        n >>= 7;
    }
    *d++ = (uint8_t)n;
    return d;
}

static inline Py_ssize_t
varint_size(int64_t value)
{
    uint8_t scratch[10];
    return put_varint(scratch, value) - scratch;
}

/* Second walk (over a payload the first one accepted): the kept records, re-encoded with
 * their timestamps relative to `base_ts`. Returns the bytes written to `d`. */
static Py_ssize_t
filter_encode(const filter_job *j, int64_t base_ts, uint8_t *d)
{
    uint8_t *start = d;
    Py_ssize_t p = 0, i = 0;
    record_t r;
    while (p < j->n) {
        parse_record(j->b, j->n, &p, &r);
        if (!j->keep[i++]) {
            continue;
        }
        int64_t delta = (int64_t)((uint64_t)record_ts(j, &r) - (uint64_t)base_ts);
        Py_ssize_t tail = r.end - r.tail;
        d = put_varint(d, 1 + varint_size(delta) + varint_size(r.off_delta) + tail);
        *d++ = 0; /* attributes */
        d = put_varint(d, delta);
        d = put_varint(d, r.off_delta);
        memcpy(d, j->b + r.tail, (size_t)tail);
        d += tail;
    }
    return d - start;
}

static int
optional_int64(PyObject *o, int64_t *out, int *present)
{
    *present = o != Py_None;
    if (!*present) {
        return 0;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *
filter_records(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer table, payload;
    PyObject *append_ts, *batch_horizon;
    filter_job j = {0};
    if (!PyArg_ParseTuple(args, "y*iy*LnLOOLLL:filter_records", &table, &j.layout, &payload,
                          &j.base_offset, &j.declared, &j.base_ts, &append_ts, &batch_horizon, &j.now,
                          &j.new_horizon, &j.end)) {
        return NULL;
    }
    PyObject *result = NULL, *records = NULL;
    if (optional_int64(append_ts, &j.append_ts, &j.has_append_ts) < 0 ||
        optional_int64(batch_horizon, &j.batch_horizon, &j.has_batch_horizon) < 0) {
        goto done;
    }
    if ((j.layout == LAYOUT_HASHED && table.len < 4 * SLOT) ||
        (j.layout == LAYOUT_SORTED && table.len < SLOT) ||
        (j.layout != LAYOUT_HASHED && j.layout != LAYOUT_SORTED)) {
        PyErr_SetString(PyExc_ValueError, "not an offset map table of that layout");
        goto done;
    }
    j.table = table.buf;
    j.table_len = table.len;
    j.b = payload.buf;
    j.n = payload.len;
    if (j.declared < 0) {
        j.declared = 0;
    }
    /* a record that parses takes 6 bytes or more: no more than n / 6 flags are written */
    j.flags = j.declared < j.n / 6 + 1 ? j.declared : j.n / 6 + 1;
    j.keep = PyMem_Malloc((size_t)j.flags + 1);
    if (j.keep == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    enum fault f;
    Py_BEGIN_ALLOW_THREADS
    f = filter_decide(&j);
    Py_END_ALLOW_THREADS
    if (f != OK) {
        raise_fault(f, j.read, j.declared);
        goto done;
    }
    int has_horizon = j.has_batch_horizon || j.needs_horizon;
    int64_t horizon = j.has_batch_horizon ? j.batch_horizon : j.new_horizon;
    int64_t base_ts = 0, max_ts = 0;
    if (j.kept > 0 && (j.kept < j.read || has_horizon != j.has_batch_horizon)) {
        base_ts = has_horizon ? horizon : j.first_ts;
        max_ts = j.max_ts;
        /* a rebuilt record grows by at most 9 bytes of timestamp delta and 1 of length */
        records = PyBytes_FromStringAndSize(NULL, j.n + 10 * j.kept);
        if (records == NULL) {
            goto done;
        }
        Py_ssize_t written;
        Py_BEGIN_ALLOW_THREADS
        written = filter_encode(&j, base_ts, (uint8_t *)PyBytes_AS_STRING(records));
        Py_END_ALLOW_THREADS
        if (_PyBytes_Resize(&records, written) < 0) {
            goto done;
        }
        if (has_horizon) {
            result = Py_BuildValue("(OnnnnLLL)", records, j.read, j.kept, j.tombstones_removed, j.live,
                                   base_ts, max_ts, horizon);
            goto done;
        }
    }
    result = Py_BuildValue("(OnnnnLLO)", records ? records : Py_None, j.read, j.kept, j.tombstones_removed,
                           j.live, base_ts, max_ts, Py_None);
done:
    Py_XDECREF(records);
    PyMem_Free(j.keep);
    PyBuffer_Release(&table);
    PyBuffer_Release(&payload);
    return result;
}

/* ---- the Spark-built map: digests of an Arrow key column, entries of the map file -- */

/* digest_keys(ends, data, rows, large, offset) -> bytes: 16 * rows bytes, row i the
 * digest of data[ends[offset + i] : ends[offset + i + 1]] (Arrow's binary layout: int32
 * offsets, int64 when `large`, in the host's byte order). */
static PyObject *
digest_keys(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer ends, data;
    Py_ssize_t rows, offset;
    int large;
    if (!PyArg_ParseTuple(args, "y*y*npn", &ends, &data, &rows, &large, &offset)) {
        return NULL;
    }
    PyObject *out = NULL;
    Py_ssize_t width = large ? 8 : 4;
    if (rows < 0 || offset < 0 || rows > (PY_SSIZE_T_MAX / DIGEST) - 1 ||
        ends.len / width < offset + rows + 1) {
        PyErr_SetString(PyExc_ValueError, "the offsets buffer is shorter than its rows need");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, rows * DIGEST);
    if (out == NULL) {
        goto done;
    }
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    const uint8_t *e = (const uint8_t *)ends.buf, *d = (const uint8_t *)data.buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t lo, hi;
        if (large) {
            memcpy(&lo, e + 8 * (offset + i), 8);
            memcpy(&hi, e + 8 * (offset + i + 1), 8);
        } else {
            int32_t l32, h32;
            memcpy(&l32, e + 4 * (offset + i), 4);
            memcpy(&h32, e + 4 * (offset + i + 1), 4);
            lo = l32;
            hi = h32;
        }
        if (lo < 0 || hi < lo || hi > (int64_t)data.len) {
            bad = i;
            break;
        }
        digest_of(d + lo, (Py_ssize_t)(hi - lo), o + DIGEST * i);
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "row %zd has offsets outside the data buffer", bad);
        Py_CLEAR(out);
    }
done:
    PyBuffer_Release(&ends);
    PyBuffer_Release(&data);
    return out;
}

/* map_entries(digests, offsets, rows) -> bytes: the 24-byte entries of an offset map
 * file (digest 16 B, offset big-endian i64) from rows * 16 digest bytes and rows int64
 * offsets in the host's byte order (an Arrow int64 buffer). */
static PyObject *
map_entries(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer digests, offsets;
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(args, "y*y*n", &digests, &offsets, &rows)) {
        return NULL;
    }
    PyObject *out = NULL;
    if (rows < 0 || rows > PY_SSIZE_T_MAX / SLOT || digests.len / DIGEST < rows || offsets.len / 8 < rows) {
        PyErr_SetString(PyExc_ValueError, "the digest or offset buffer is shorter than its rows need");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, rows * SLOT);
    if (out == NULL) {
        goto done;
    }
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    const uint8_t *g = (const uint8_t *)digests.buf, *f = (const uint8_t *)offsets.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) {
        uint64_t v;
        memcpy(o + SLOT * i, g + DIGEST * i, DIGEST);
        memcpy(&v, f + 8 * i, 8); /* Arrow buffers are in the host's byte order */
        store_be64(o + SLOT * i + DIGEST, v);
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&digests);
    PyBuffer_Release(&offsets);
    return out;
}

static PyMethodDef methods[] = {
    {"map_records", map_records, METH_VARARGS, "Record each keyed record's offset in the table."},
    {"filter_records", filter_records, METH_VARARGS, "Keep or drop each record; rebuild the rest."},
    {"digest_keys", digest_keys, METH_VARARGS, "The 16-byte digest of each key of an Arrow binary column."},
    {"map_entries", map_entries, METH_VARARGS, "Offset-map file entries from digests and offsets."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "logtrove.storage.cleaner._passes",
    .m_doc = "The cleaner's map and copy passes over a batch's records (see passes.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__passes(void)
{
    return PyModule_Create(&module);
}
