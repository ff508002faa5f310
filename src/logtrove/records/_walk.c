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

static PyMethodDef walk_methods[] = {
    {"walk", walk, METH_O, walk_doc},
    {"first_at_or_after", first_at_or_after, METH_VARARGS, first_at_or_after_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef walk_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "logtrove.records._walk",
    .m_doc = "The produce-time walk over a batch's records, compiled (see logtrove.records.walk).",
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
