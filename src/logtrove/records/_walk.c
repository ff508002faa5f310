/*
 * logtrove.records._walk: the produce-time walk over a batch's records, compiled.
 *
 * walk(payload) -> (records, keyless, keyless_indexes)
 *
 * `payload` is the decompressed records section of a produced RecordBatch v2 (Kafka
 * record format v2, all varints zig-zag):
 *   length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint | key | valueLength varint | value |
 *   headerCount varint | (nameLength varint | name | valueLength varint | value) * count
 * It checks what Kafka's LogValidator and DefaultRecord.readFrom check for a producer's
 * batch: each record's length fits the payload; every field fits the record and the
 * record has no bytes left over; the offset delta of record i is i; the header count is
 * not negative; header names are not null and are UTF-8 (as logtrove's readers decode
 * them). A null key (length < 0) is allowed: `keyless` counts those records and
 * `keyless_indexes` holds the indexes of the first MAX_KEYLESS_REPORTED of them, in
 * order (a compacted topic refuses the batch and names each one in Produce's
 * record_errors; the cap bounds the memory and the response a hostile batch of a million
 * keyless records could cost). Any failure raises ValueError naming the record and what
 * is wrong.
 *
 * It is the compiled twin of logtrove.records.walk.py_walk, which defines the
 * behaviour; tests/records/test_walk.py checks that both return the same values and
 * raise the same messages on valid and damaged payloads. Every read is bounds-checked
 * against the record's length, which is checked against the payload.
 *
 * Why C: the produce path must stay cheap (a few ns a record); the Python twin costs
 * about a microsecond a record.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "varint.h"

/* Same value as logtrove.records.walk.MAX_KEYLESS_REPORTED (a test checks it). */
#define MAX_KEYLESS_REPORTED 1000

/* The keyless records seen so far: their number and the first indexes (on the stack of
 * walk(), 8 KB; nothing to free on the error paths). */
typedef struct {
    Py_ssize_t count;
    Py_ssize_t first[MAX_KEYLESS_REPORTED];
} keyless_t;

static PyObject *
malformed(Py_ssize_t record, const char *what)
{
    PyErr_Format(PyExc_ValueError, "record %zd of the batch is malformed: %s", record, what);
    return NULL;
}

static int
is_utf8(const uint8_t *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] >= 0x80) {
            PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
            if (text == NULL) {
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(text);
            return 1;
        }
    }
    return 1;
}

static PyObject *
keyless_result(Py_ssize_t count, const keyless_t *keyless)
{
    Py_ssize_t n = keyless->count < MAX_KEYLESS_REPORTED ? keyless->count : MAX_KEYLESS_REPORTED;
    PyObject *indexes = PyTuple_New(n);
    if (indexes == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *index = PyLong_FromSsize_t(keyless->first[i]);
        if (index == NULL) {
            Py_DECREF(indexes);
            return NULL;
        }
        PyTuple_SET_ITEM(indexes, i, index);
    }
    return Py_BuildValue("(nnN)", count, keyless->count, indexes);
}

static PyObject *
walk_payload(const uint8_t *b, Py_ssize_t end, keyless_t *keyless)
{
    Py_ssize_t p = 0, count = 0;
    int64_t v;
    while (p < end) {
        if (read_varint(b, end, &p, &v) < 0 || v < 0 || v > end - p) {
            return malformed(count, "its length runs past the records");
        }
        Py_ssize_t rec_end = p + (Py_ssize_t)v;
        if (p >= rec_end) {
            return malformed(count, "it is empty");
        }
        p += 1; /* attributes */
        int64_t ts_delta, off_delta, klen, vlen, nheaders;
        if (read_varint(b, rec_end, &p, &ts_delta) < 0) {
            return malformed(count, "truncated timestamp delta");
        }
        if (read_varint(b, rec_end, &p, &off_delta) < 0) {
            return malformed(count, "truncated offset delta");
        }
        if (off_delta != (int64_t)count) {
            PyErr_Format(PyExc_ValueError,
                         "record %zd of the batch is malformed: its offset delta is %lld, expected %zd",
                         count, (long long)off_delta, count);
            return NULL;
        }
        if (read_varint(b, rec_end, &p, &klen) < 0 || klen > rec_end - p) {
            return malformed(count, "truncated key");
        }
        if (klen >= 0) {
            p += (Py_ssize_t)klen;
        } else {
            if (keyless->count < MAX_KEYLESS_REPORTED) {
                keyless->first[keyless->count] = count;
            }
            keyless->count++;
        }
        if (read_varint(b, rec_end, &p, &vlen) < 0 || vlen > rec_end - p) {
            return malformed(count, "truncated value");
        }
        if (vlen >= 0) {
            p += (Py_ssize_t)vlen;
        }
        if (read_varint(b, rec_end, &p, &nheaders) < 0 || nheaders < 0) {
            return malformed(count, "bad header count");
        }
        for (int64_t h = 0; h < nheaders; h++) { /* each header takes 2 bytes or more */
            int64_t nlen, hlen;
            if (read_varint(b, rec_end, &p, &nlen) < 0 || nlen < 0 || nlen > rec_end - p) {
                return malformed(count, "truncated header name");
            }
            if (!is_utf8(b + p, (Py_ssize_t)nlen)) {
                return malformed(count, "a header name is not UTF-8");
            }
            p += (Py_ssize_t)nlen;
            if (read_varint(b, rec_end, &p, &hlen) < 0 || hlen > rec_end - p) {
                return malformed(count, "truncated header value");
            }
            if (hlen >= 0) {
                p += (Py_ssize_t)hlen;
            }
        }
        if (p != rec_end) {
            return malformed(count, "bytes left over after its fields");
        }
        count++;
    }
    return keyless_result(count, keyless);
}

PyDoc_STRVAR(walk_doc,
             "walk(payload)\n--\n\n"
             "(records, keyless records, indexes of the first MAX_KEYLESS_REPORTED keyless\n"
             "records) of a produced batch's decompressed records section; ValueError if a\n"
             "record is malformed.\n"
             "See logtrove.records.walk.py_walk.");

static PyObject *
walk(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer buf;
    keyless_t keyless;
    keyless.count = 0;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *out = walk_payload(buf.buf, buf.len, &keyless);
    PyBuffer_Release(&buf);
    return out;
}

/*
 * first_at_or_after(payload, base_ts, base_offset, timestamp, min_offset) -> offset | None
 *
 * The offset of the first record whose timestamp (base_ts + timestampDelta) is >=
 * timestamp and whose offset (base_offset + offsetDelta) is >= min_offset, reading only
 * each record's length, timestamp delta and offset delta; None if no record qualifies.
 * The twin of logtrove.records.walk.py_first_at_or_after (ValueError on a record that
 * overruns the payload). Used by the topic histogram, once per batch straddling an edge.
 */
static PyObject *
first_at_or_after(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer buf;
    long long base_ts, base_offset, timestamp, min_offset;
    if (!PyArg_ParseTuple(args, "y*LLLL", &buf, &base_ts, &base_offset, &timestamp, &min_offset)) {
        return NULL;
    }
    const uint8_t *b = buf.buf;
    Py_ssize_t end = buf.len, p = 0, count = 0;
    PyObject *out = NULL;
    while (p < end) {
        int64_t length, ts_delta, off_delta;
        if (read_varint(b, end, &p, &length) < 0 || length < 2 || length > end - p) {
            malformed(count, "its length runs past the records");
            goto done;
        }
        Py_ssize_t rec_end = p + (Py_ssize_t)length, q = p + 1; /* after the attributes */
        if (read_varint(b, rec_end, &q, &ts_delta) < 0 || read_varint(b, rec_end, &q, &off_delta) < 0) {
            malformed(count, "truncated timestamp or offset delta");
            goto done;
        }
        if (base_ts + ts_delta >= timestamp && base_offset + off_delta >= min_offset) {
            out = PyLong_FromLongLong(base_offset + off_delta);
            goto done;
        }
        p = rec_end;
        count++;
    }
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&buf);
    return out;
}

PyDoc_STRVAR(first_at_or_after_doc,
             "first_at_or_after(payload, base_ts, base_offset, timestamp, min_offset)\n--\n\n"
             "Offset of the first record with timestamp >= timestamp and offset >= min_offset,\n"
             "or None. See logtrove.records.walk.py_first_at_or_after.");

/*
 * Picking records out of a batch for the query engine (twins in logtrove.records.pick,
 * which define the behaviour; tests/records/test_pick.py checks both agree).
 *
 * Both read a decompressed records section strictly: a varint longer than 10 bytes or
 * whose value does not fit 64 bits, a field past its record, a record past the payload,
 * offset deltas that do not rise, a negative header count, a null or non-UTF-8 header
 * name, bytes left over after a record's fields, or an offset or timestamp past 64 bits
 * raise ValueError. They are meant to be stricter than logtrove.records.record's readers:
 * on ValueError the caller answers with those readers, so a damaged batch gives what it
 * gave before, and a batch they accept gives the same records.
 */

/* A zig-zag varint of at most 10 bytes below end whose value fits 64 bits. -1 if not. */
static inline int
strict_varint(const uint8_t *b, Py_ssize_t end, Py_ssize_t *p, int64_t *out)
{
    Py_ssize_t q = *p;
    uint64_t r = 0;
    for (int i = 0; i < 10; i++) {
        if (q >= end) {
            return -1;
        }
        uint8_t c = b[q++];
        if (i == 9 && c > 1) {
            return -1;
        }
        r |= (uint64_t)(c & 0x7F) << (7 * i);
        if (c < 0x80) {
            *out = (int64_t)(r >> 1) ^ -(int64_t)(r & 1);
            *p = q;
            return 0;
        }
    }
    return -1;
}

static PyObject *
bad_record(Py_ssize_t record, const char *what)
{
    PyErr_Format(PyExc_ValueError, "record %zd: %s", record, what);
    return NULL;
}

/* A field of `len` bytes at *p (NULL for a negative length), as bytes. */
static int
take_bytes(const uint8_t *b, Py_ssize_t rec_end, Py_ssize_t *p, int64_t len, PyObject **out)
{
    if (len < 0) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    if (len > rec_end - *p) {
        return -1;
    }
    *out = PyBytes_FromStringAndSize((const char *)b + *p, (Py_ssize_t)len);
    if (*out == NULL) {
        return -2;
    }
    *p += (Py_ssize_t)len;
    return 0;
}

/* A length-prefixed field at *p (key, value or header value): its strict varint length,
 * then its bytes (none for a negative length, which means null). *p moves past it. With
 * `out`, the field is also returned as bytes (None for null); without, it is only
 * skipped. 0 on success; -1 when the length is no strict varint or the field runs past
 * rec_end; -2 with a Python exception set. */
static inline int
length_prefixed(const uint8_t *b, Py_ssize_t rec_end, Py_ssize_t *p, PyObject **out)
{
    int64_t len;
    if (strict_varint(b, rec_end, p, &len) < 0) {
        return -1;
    }
    if (out != NULL) {
        return take_bytes(b, rec_end, p, len, out);
    }
    if (len > rec_end - *p) {
        return -1;
    }
    *p += len > 0 ? (Py_ssize_t)len : 0;
    return 0;
}

/*
 * The fields after the offset delta of the record that ends at rec_end: key, value and
 * headers, checked (and, when `out` is not NULL, decoded into (offset, timestamp, key,
 * value, headers)). 0 on success, -1 with an exception set.
 */
static int
record_fields(const uint8_t *b, Py_ssize_t rec_end, Py_ssize_t p, Py_ssize_t index, int64_t offset,
              int64_t timestamp, PyObject **out)
{
    int64_t n;
    PyObject *key = NULL, *value = NULL, *headers = NULL;
    const char *what = "truncated key";
    int r;
    if ((r = length_prefixed(b, rec_end, &p, out != NULL ? &key : NULL)) < 0) {
        goto failed;
    }
    what = "truncated value";
    if ((r = length_prefixed(b, rec_end, &p, out != NULL ? &value : NULL)) < 0) {
        goto failed;
    }
    what = "bad header count";
    if (strict_varint(b, rec_end, &p, &n) < 0 || n < 0 || n > rec_end - p) {
        goto bad; /* each header takes 2 bytes or more */
    }
    if (out != NULL && (headers = PyTuple_New((Py_ssize_t)n)) == NULL) {
        goto fail;
    }
    for (int64_t h = 0; h < n; h++) {
        int64_t nlen;
        what = "truncated header name";
        if (strict_varint(b, rec_end, &p, &nlen) < 0 || nlen < 0 || nlen > rec_end - p) {
            goto bad;
        }
        PyObject *name = PyUnicode_DecodeUTF8((const char *)b + p, (Py_ssize_t)nlen, "strict");
        if (name == NULL) {
            PyErr_Clear();
            what = "a header name is not UTF-8";
            goto bad;
        }
        p += (Py_ssize_t)nlen;
        PyObject *hval = NULL;
        what = "truncated header value";
        r = length_prefixed(b, rec_end, &p, out != NULL ? &hval : NULL);
        if (r < 0 || out == NULL) { /* skipped: the name only had to be UTF-8 */
            Py_DECREF(name);
            if (r < 0) {
                goto failed;
            }
            continue;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(name);
            Py_DECREF(hval);
            goto fail;
        }
        PyTuple_SET_ITEM(pair, 0, name);
        PyTuple_SET_ITEM(pair, 1, hval);
        PyTuple_SET_ITEM(headers, (Py_ssize_t)h, pair);
    }
    if (p != rec_end) {
        what = "bytes left over after its fields";
        goto bad;
    }
    if (out != NULL) {
        *out = Py_BuildValue("(LLNNN)", (long long)offset, (long long)timestamp, key, value, headers);
        return *out == NULL ? -1 : 0;
    }
    return 0;
failed:
    if (r == -2) {
        goto fail;
    }
bad:
    bad_record(index, what);
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    return -1;
}

/* The framing of the record at *p: its end, timestamp delta and offset delta; *p moves
 * past the offset delta. -1 with an exception set. */
static int
frame(const uint8_t *b, Py_ssize_t end, Py_ssize_t *p, Py_ssize_t index, Py_ssize_t *rec_end, int64_t *ts_delta,
      int64_t *off_delta)
{
    int64_t length;
    if (strict_varint(b, end, p, &length) < 0 || length < 2 || length > end - *p) {
        bad_record(index, "its length runs past the records");
        return -1;
    }
    *rec_end = *p + (Py_ssize_t)length;
    *p += 1; /* attributes */
    if (strict_varint(b, *rec_end, p, ts_delta) < 0 || strict_varint(b, *rec_end, p, off_delta) < 0) {
        bad_record(index, "truncated timestamp or offset delta");
        return -1;
    }
    return 0;
}

static int
int64_arg(PyObject *o, int64_t none_value, int64_t *out)
{
    if (o == Py_None) {
        *out = none_value;
        return 0;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = v;
    return 0;
}

PyDoc_STRVAR(pick_window_doc,
             "pick_window(payload, base_offset, base_ts, append_ts, start_ms, end_ms, min_offset, max_offset,\n"
             "            limit=-1)\n"
             "--\n\n"
             "None when no record's timestamp is in [start_ms, end_ms) (None: unbounded), else\n"
             "(records in the payload, [(offset, timestamp, key, value, headers) of the first\n"
             "limit (negative: all) of those in the window with min_offset <= offset < max_offset]).\n"
             "Every record is checked either way. See logtrove.records.pick.py_pick_window.");

static PyObject *
pick_window(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer buf;
    long long base_offset, base_ts, min_offset, max_offset;
    Py_ssize_t limit = -1;
    PyObject *append_obj, *start_obj, *end_obj;
    if (!PyArg_ParseTuple(args, "y*LLOOOLL|n", &buf, &base_offset, &base_ts, &append_obj, &start_obj, &end_obj,
                          &min_offset, &max_offset, &limit)) {
        return NULL;
    }
    const uint8_t *b = buf.buf;
    Py_ssize_t end = buf.len, p, count = 0, rec_end;
    int64_t append_ts, start_ms, end_ms, ts_delta, off_delta, lo = INT64_MAX, hi = INT64_MIN;
    int appended = append_obj != Py_None;
    PyObject *out = NULL, *list = NULL;
    if (int64_arg(append_obj, 0, &append_ts) < 0 || int64_arg(start_obj, INT64_MIN, &start_ms) < 0 ||
        int64_arg(end_obj, INT64_MAX, &end_ms) < 0) {
        goto done;
    }
    if (appended) {
        lo = hi = append_ts;
    } else {
        for (p = 0; p < end; p = rec_end, count++) { /* framing only: the batch's time bounds */
            if (frame(b, end, &p, count, &rec_end, &ts_delta, &off_delta) < 0) {
                goto done;
            }
            int64_t ts;
            if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &ts)) {
                bad_record(count, "its timestamp does not fit 64 bits");
                goto done;
            }
            lo = ts < lo ? ts : lo;
            hi = ts > hi ? ts : hi;
        }
        if (count == 0) {
            bad_record(0, "the batch holds no record");
            goto done;
        }
    }
    if (hi < start_ms || (end_obj != Py_None && lo >= end_ms)) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if ((list = PyList_New(0)) == NULL) {
        goto done;
    }
    int64_t previous = 0;
    for (p = 0, count = 0; p < end; p = rec_end, count++) {
        if (frame(b, end, &p, count, &rec_end, &ts_delta, &off_delta) < 0) {
            goto done;
        }
        if (count > 0 && off_delta <= previous) {
            bad_record(count, "its offset delta does not rise");
            goto done;
        }
        previous = off_delta;
        int64_t offset, ts = append_ts;
        if (__builtin_add_overflow((int64_t)base_offset, off_delta, &offset) ||
            (!appended && __builtin_add_overflow((int64_t)base_ts, ts_delta, &ts))) {
            bad_record(count, "its offset or timestamp does not fit 64 bits");
            goto done;
        }
        int wanted = ts >= start_ms && (end_obj == Py_None || ts < end_ms) && offset >= min_offset &&
                     offset < max_offset && (limit < 0 || PyList_GET_SIZE(list) < limit);
        PyObject *record = NULL;
        if (record_fields(b, rec_end, p, count, offset, ts, wanted ? &record : NULL) < 0) {
            goto done;
        }
        if (record != NULL) {
            int failed = PyList_Append(list, record);
            Py_DECREF(record);
            if (failed < 0) {
                goto done;
            }
        }
    }
    out = Py_BuildValue("(nO)", count, list);
done:
    Py_XDECREF(list);
    PyBuffer_Release(&buf);
    return out;
}

PyDoc_STRVAR(pick_offset_doc,
             "pick_offset(payload, base_offset, base_ts, append_ts, offset)\n--\n\n"
             "(offset, timestamp, key, value, headers) of the record at offset, or None when the\n"
             "first record at or after it has a larger offset or there is none. Records after it\n"
             "are not read. See logtrove.records.pick.py_pick_offset.");

/* The record at `offset` in the records section b[0:end], as pick_offset gives it:
 * a new reference to the record tuple or to None, or NULL with ValueError set. */
static PyObject *
pick_in(const uint8_t *b, Py_ssize_t end, int64_t base_offset, int64_t base_ts, int append, int64_t append_ts,
        int64_t offset)
{
    Py_ssize_t p = 0, count = 0, rec_end;
    int64_t ts_delta, off_delta, previous = 0;
    for (; p < end; p = rec_end, count++) {
        if (frame(b, end, &p, count, &rec_end, &ts_delta, &off_delta) < 0) {
            return NULL;
        }
        if (count > 0 && off_delta <= previous) {
            return bad_record(count, "its offset delta does not rise");
        }
        previous = off_delta;
        int64_t at, ts = append_ts;
        if (__builtin_add_overflow(base_offset, off_delta, &at) ||
            (!append && __builtin_add_overflow(base_ts, ts_delta, &ts))) {
            return bad_record(count, "its offset or timestamp does not fit 64 bits");
        }
        if (at < offset) {
            continue;
        }
        if (at > offset) {
            break;
        }
        PyObject *record = NULL;
        return record_fields(b, rec_end, p, count, at, ts, &record) == 0 ? record : NULL;
    }
    return Py_NewRef(Py_None);
}

static PyObject *
pick_offset(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer buf;
    long long base_offset, base_ts, offset;
    PyObject *append_obj;
    if (!PyArg_ParseTuple(args, "y*LLOL", &buf, &base_offset, &base_ts, &append_obj, &offset)) {
        return NULL;
    }
    int64_t append_ts;
    PyObject *out = NULL;
    if (int64_arg(append_obj, 0, &append_ts) == 0) {
        out = pick_in(buf.buf, buf.len, base_offset, base_ts, append_obj != Py_None, append_ts, offset);
    }
    PyBuffer_Release(&buf);
    return out;
}

/* RecordBatch v2 header fields find_record reads (big-endian, at these byte positions). */
#define BATCH_HEADER_SIZE 61
#define BATCH_LOG_OVERHEAD 12
#define BATCH_ATTR_CODEC 0x07
#define BATCH_ATTR_LOG_APPEND_TIME 0x08

static inline int64_t
be64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | b[i];
    }
    return (int64_t)v;
}

static inline int32_t
be32(const uint8_t *b)
{
    return (int32_t)(((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3]);
}

PyDoc_STRVAR(find_record_doc,
             "find_record(buf, room, offset)\n--\n\n"
             "The record at offset among the batches that start at buf[0] (read from a log\n"
             "that holds room bytes from there): None when the batch holding it starts past it;\n"
             "(batch size, record or None) when an uncompressed batch wholly in buf decides it;\n"
             "the batch's position in buf when it holds the offset but is compressed or refused\n"
             "by pick_offset; -1 when buf does not decide. See\n"
             "logtrove.records.pick.py_find_record.");

static PyObject *
find_record(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t room;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*nL", &buf, &room, &offset)) {
        return NULL;
    }
    const uint8_t *b = buf.buf;
    Py_ssize_t n = buf.len, rel = 0;
    PyObject *out = NULL;
    while (rel <= n - BATCH_HEADER_SIZE) {
        const uint8_t *h = b + rel;
        int64_t base_offset = be64(h), last;
        int32_t batch_length = be32(h + 8), last_delta = be32(h + 23);
        int attributes = (h[21] << 8) | h[22];
        if (h[16] != 2 || batch_length < BATCH_HEADER_SIZE - BATCH_LOG_OVERHEAD ||
            (Py_ssize_t)batch_length + BATCH_LOG_OVERHEAD > room - rel ||
            __builtin_add_overflow(base_offset, (int64_t)last_delta, &last)) {
            break;
        }
        Py_ssize_t size = (Py_ssize_t)batch_length + BATCH_LOG_OVERHEAD;
        if (last < offset) {
            rel += size;
            continue;
        }
        if (size > n - rel) {
            break;
        }
        if (base_offset > offset) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        if ((attributes & BATCH_ATTR_CODEC) != 0) {
            out = PyLong_FromSsize_t(rel);
            goto done;
        }
        int append = (attributes & BATCH_ATTR_LOG_APPEND_TIME) != 0;
        PyObject *record = pick_in(h + BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE, base_offset, be64(h + 27),
                                   append, append ? be64(h + 35) : 0, offset);
        if (record == NULL) {
            if (PyErr_ExceptionMatches(PyExc_ValueError)) {
                PyErr_Clear();
                out = PyLong_FromSsize_t(rel);
            }
            goto done;
        }
        out = Py_BuildValue("(nN)", size, record);
        goto done;
    }
    out = PyLong_FromLong(-1);
done:
    PyBuffer_Release(&buf);
    return out;
}

PyDoc_STRVAR(time_bounds_doc,
             "time_bounds(payload, base_ts)\n--\n\n"
             "(smallest, largest) record timestamp of a batch's records section, from record\n"
             "lengths and timestamp deltas. See logtrove.records.pick.py_time_bounds.");

static PyObject *
time_bounds(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer buf;
    long long base_ts;
    if (!PyArg_ParseTuple(args, "y*L", &buf, &base_ts)) {
        return NULL;
    }
    const uint8_t *b = buf.buf;
    Py_ssize_t end = buf.len, p = 0, count = 0, rec_end;
    int64_t ts_delta, off_delta, lo = INT64_MAX, hi = INT64_MIN;
    PyObject *out = NULL;
    for (; p < end; p = rec_end, count++) {
        if (frame(b, end, &p, count, &rec_end, &ts_delta, &off_delta) < 0) {
            goto done;
        }
        int64_t ts;
        if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &ts)) {
            bad_record(count, "its timestamp does not fit 64 bits");
            goto done;
        }
        lo = ts < lo ? ts : lo;
        hi = ts > hi ? ts : hi;
    }
    if (count == 0) {
        bad_record(0, "the batch holds no record");
        goto done;
    }
    out = Py_BuildValue("(LL)", (long long)lo, (long long)hi);
done:
    PyBuffer_Release(&buf);
    return out;
}

PyDoc_STRVAR(count_times_doc,
             "count_times(payload, base_ts, base_offset, min_offset, edges, counts)\n--\n\n"
             "Add to counts[i] (a writable buffer of n native int64) the records of a batch's\n"
             "records section with offset >= min_offset and timestamp in [edges[i], edges[i+1])\n"
             "(edges: n+1 increasing native int64), from record lengths and timestamp and offset\n"
             "deltas; returns the records framed. Nothing is added when a record is refused\n"
             "(ValueError). See logtrove.records.pick.py_count_times.");

static PyObject *
count_times(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer buf, edges_buf, counts_buf;
    long long base_ts, base_offset, min_offset;
    if (!PyArg_ParseTuple(args, "y*LLLy*w*", &buf, &base_ts, &base_offset, &min_offset, &edges_buf,
                          &counts_buf)) {
        return NULL;
    }
    PyObject *out = NULL;
    int64_t *local = NULL;
    Py_ssize_t n = counts_buf.len / (Py_ssize_t)sizeof(int64_t);
    if (counts_buf.len % (Py_ssize_t)sizeof(int64_t) != 0 || edges_buf.len != (n + 1) * (Py_ssize_t)sizeof(int64_t) ||
        n < 1) {
        PyErr_SetString(PyExc_ValueError, "count_times: edges must hold one int64 more than counts (at least 1)");
        goto done;
    }
    local = PyMem_Calloc((size_t)n, sizeof(int64_t));
    if (local == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const int64_t *e = edges_buf.buf;
    const uint8_t *b = buf.buf;
    Py_ssize_t end = buf.len, p = 0, count = 0, rec_end;
    int64_t ts_delta, off_delta;
    for (; p < end; p = rec_end, count++) {
        if (frame(b, end, &p, count, &rec_end, &ts_delta, &off_delta) < 0) {
            goto done;
        }
        int64_t ts, offset;
        if (__builtin_add_overflow((int64_t)base_offset, off_delta, &offset) ||
            __builtin_add_overflow((int64_t)base_ts, ts_delta, &ts)) {
            bad_record(count, "its offset or timestamp does not fit 64 bits");
            goto done;
        }
        if (offset < min_offset || ts < e[0] || ts >= e[n]) {
            continue;
        }
        Py_ssize_t lo = 0, hi = n; /* e[lo] <= ts < e[hi] */
        while (hi - lo > 1) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (e[mid] <= ts) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        local[lo]++;
    }
    int64_t *c = counts_buf.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        c[i] += local[i];
    }
    out = PyLong_FromSsize_t(count);
done:
    PyMem_Free(local);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&edges_buf);
    PyBuffer_Release(&counts_buf);
    return out;
}

static PyMethodDef walk_methods[] = {
    {"walk", walk, METH_O, walk_doc},
    {"first_at_or_after", first_at_or_after, METH_VARARGS, first_at_or_after_doc},
    {"pick_window", pick_window, METH_VARARGS, pick_window_doc},
    {"pick_offset", pick_offset, METH_VARARGS, pick_offset_doc},
    {"find_record", find_record, METH_VARARGS, find_record_doc},
    {"time_bounds", time_bounds, METH_VARARGS, time_bounds_doc},
    {"count_times", count_times, METH_VARARGS, count_times_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef walk_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "logtrove.records._walk",
    .m_doc = "The produce-time walk over a batch's records and the query engine's record\n"
             "picking, compiled (see logtrove.records.walk and logtrove.records.pick).",
    .m_size = -1,
    .m_methods = walk_methods,
};

PyMODINIT_FUNC
PyInit__walk(void)
{
    PyObject *module = PyModule_Create(&walk_module);
    if (module != NULL && PyModule_AddIntConstant(module, "MAX_KEYLESS_REPORTED", MAX_KEYLESS_REPORTED) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
