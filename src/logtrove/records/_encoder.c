/*
 * logtrove.records._encoder: Arrow columns straight into Kafka v2 records, compiled.
 *
 * partition_order(key, explicit, rows, total, rr_start) -> (order, starts, rr_next)
 * encode_records(key, value, ts, headers, rows, order, lo, hi, budget, now_ms)
 *   -> (payload, next, base_ts, max_ts)
 *
 * It is the compiled twin of logtrove.records.encoder (py_partition_order,
 * py_encode_records), which defines the behaviour and the argument formats (see that
 * module's doc); tests/spark/test_encoder.py checks that both give the same bytes, and
 * that those equal records.build_batch's for the same rows.
 *
 * The records section written (Kafka record format v2, all varints zig-zag):
 *   length varint | attributes i8 (0) | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
 *   headerCount varint | (nameLength varint | name | valueLength varint | value) * count
 *
 * Why C: building a NewRecord per row and encoding it in Python cost ~10 us a row and
 * made the Spark writer the slowest stage of a pipeline (about 70 k rows/s).
 *
 * Memory safety: the Arrow buffers come from our own Python code but are checked anyway:
 * each buffer's length against the rows it must hold, every value's end offsets against
 * its data buffer (monotone, in bounds), every row index in `order` against `rows`.
 * ASan/UBSan: as for _columnar.c (see its header), with tests/spark/test_encoder.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- a binary column: (validity or None, ends, data, large, offset) --------------- */

typedef struct {
    int present;
    const uint8_t *validity; /* NULL: no nulls */
    const uint8_t *ends;     /* int32 or int64 */
    const uint8_t *data;
    Py_ssize_t data_len;
    int large;
    Py_ssize_t offset;
    Py_buffer views[3];
    int held;
} column;

static void
col_release(column *c)
{
    for (int i = 0; i < c->held; i++) {
        PyBuffer_Release(&c->views[i]);
    }
    c->held = 0;
}

static int
hold(column *c, PyObject *obj, Py_ssize_t need, const char *what)
{
    Py_buffer *v = &c->views[c->held];
    if (PyObject_GetBuffer(obj, v, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    c->held++;
    if (v->len < need) {
        PyErr_Format(PyExc_ValueError, "the %s buffer holds %zd bytes, needs %zd", what, v->len, need);
        return -1;
    }
    return 0;
}

/* Parse a column tuple over `rows` rows (None: absent, every row null). */
static int
col_open(column *c, PyObject *spec, Py_ssize_t rows, int allow_none)
{
    memset(c, 0, sizeof *c);
    if (spec == Py_None && allow_none) {
        return 0;
    }
    PyObject *validity, *ends, *data;
    int large;
    Py_ssize_t offset;
    if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "OOOpn", &validity, &ends, &data, &large, &offset)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "a column is (validity, ends, data, large, offset)");
        }
        return -1;
    }
    if (offset < 0 || rows > PY_SSIZE_T_MAX / 8 - offset - 1) {
        PyErr_SetString(PyExc_ValueError, "bad column offset");
        return -1;
    }
    c->present = 1;
    c->large = large;
    c->offset = offset;
    Py_ssize_t width = large ? 8 : 4;
    if (validity != Py_None) {
        if (hold(c, validity, (offset + rows + 7) / 8, "validity") < 0) {
            return -1;
        }
        c->validity = c->views[c->held - 1].buf;
    }
    if (hold(c, ends, (offset + rows + 1) * width, "offsets") < 0) {
        return -1;
    }
    c->ends = c->views[c->held - 1].buf;
    if (hold(c, data, 0, "data") < 0) {
        return -1;
    }
    c->data = c->views[c->held - 1].buf;
    c->data_len = c->views[c->held - 1].len;
    return 0;
}

static inline int64_t
end_at(const column *c, Py_ssize_t i)
{
    if (c->large) {
        int64_t x;
        memcpy(&x, c->ends + (size_t)i * 8, 8);
        return x;
    }
    int32_t x;
    memcpy(&x, c->ends + (size_t)i * 4, 4);
    return x;
}

static inline int
is_valid(const uint8_t *validity, Py_ssize_t i)
{
    return validity == NULL || ((validity[i >> 3] >> (i & 7)) & 1);
}

/* Row `row`'s value: 0 with *s, *n set (n = -1 for null), or -1 with ValueError. */
static int
col_get(const column *c, Py_ssize_t row, const uint8_t **s, int64_t *n)
{
    if (!c->present || !is_valid(c->validity, c->offset + row)) {
        *s = NULL;
        *n = -1;
        return 0;
    }
    int64_t a = end_at(c, c->offset + row), b = end_at(c, c->offset + row + 1);
    if (a < 0 || b < a || b > c->data_len) {
        PyErr_Format(PyExc_ValueError, "row %zd: its offsets are outside the data buffer", row);
        return -1;
    }
    *s = c->data + a;
    *n = b - a;
    return 0;
}

/* ---- an int column: (validity or None, data, offset) ------------------------------- */

typedef struct {
    int present;
    const uint8_t *validity;
    const uint8_t *data;
    Py_ssize_t offset;
    column hold; /* owns the buffer views */
} ints;

static int
ints_open(ints *x, PyObject *spec, Py_ssize_t rows, Py_ssize_t width)
{
    memset(x, 0, sizeof *x);
    if (spec == Py_None) {
        return 0;
    }
    PyObject *validity, *data;
    Py_ssize_t offset;
    if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "OOn", &validity, &data, &offset)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "an int column is (validity, data, offset)");
        }
        return -1;
    }
    if (offset < 0 || rows > PY_SSIZE_T_MAX / 8 - offset - 1) {
        PyErr_SetString(PyExc_ValueError, "bad column offset");
        return -1;
    }
    x->present = 1;
    x->offset = offset;
    if (validity != Py_None) {
        if (hold(&x->hold, validity, (offset + rows + 7) / 8, "validity") < 0) {
            return -1;
        }
        x->validity = x->hold.views[x->hold.held - 1].buf;
    }
    if (hold(&x->hold, data, (offset + rows) * width, "values") < 0) {
        return -1;
    }
    x->data = x->hold.views[x->hold.held - 1].buf;
    return 0;
}

/* ---- murmur2, as Kafka's Utils.murmur2 ---------------------------------------------- */

static uint32_t
murmur2(const uint8_t *d, int64_t n)
{
    const uint32_t m = 0x5BD1E995u;
    uint32_t h = 0x9747B28Cu ^ (uint32_t)n;
    int64_t tail = n & ~(int64_t)3;
    for (int64_t i = 0; i < tail; i += 4) {
        uint32_t k = (uint32_t)d[i] | ((uint32_t)d[i + 1] << 8) | ((uint32_t)d[i + 2] << 16) |
                     ((uint32_t)d[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    switch (n & 3) {
    case 3:
        h ^= (uint32_t)d[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)d[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= d[tail];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static PyObject *
partition_order(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *key_spec, *explicit_spec;
    Py_ssize_t rows, total;
    long long rr;
    if (!PyArg_ParseTuple(args, "OOnnL", &key_spec, &explicit_spec, &rows, &total, &rr)) {
        return NULL;
    }
    if (rows < 0 || total <= 0 || total > INT32_MAX || rr < 0) {
        PyErr_SetString(PyExc_ValueError, "rows >= 0, 0 < total < 2**31 and rr_start >= 0");
        return NULL;
    }
    column key;
    ints explicit;
    int32_t *part = NULL;
    int64_t *starts = NULL;
    PyObject *order = NULL, *starts_out = NULL, *out = NULL;
    memset(&explicit, 0, sizeof explicit);
    if (col_open(&key, key_spec, rows, 1) < 0 || ints_open(&explicit, explicit_spec, rows, 4) < 0) {
        goto done;
    }
    part = PyMem_Malloc((size_t)(rows ? rows : 1) * sizeof *part);
    starts = PyMem_Calloc((size_t)total + 1, sizeof *starts);
    if (part == NULL || starts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t p;
        if (explicit.present && is_valid(explicit.validity, explicit.offset + i)) {
            int32_t x;
            memcpy(&x, explicit.data + (size_t)(explicit.offset + i) * 4, 4);
            p = x;
        } else {
            const uint8_t *k;
            int64_t klen;
            if (col_get(&key, i, &k, &klen) < 0) {
                goto done;
            }
            p = klen >= 0 ? (int64_t)((murmur2(k, klen) & 0x7FFFFFFFu) % (uint32_t)total) : rr++ % total;
        }
        if (p < 0 || p >= total) {
            PyErr_Format(PyExc_ValueError, "has partitions 0-%zd, not %lld", total - 1, (long long)p);
            goto done;
        }
        part[i] = (int32_t)p;
        starts[p + 1]++;
    }
    for (Py_ssize_t p = 0; p < total; p++) {
        starts[p + 1] += starts[p];
    }
    order = PyBytes_FromStringAndSize(NULL, rows * 8);
    starts_out = PyBytes_FromStringAndSize(NULL, (total + 1) * 8);
    if (order == NULL || starts_out == NULL) {
        goto done;
    }
    memcpy(PyBytes_AS_STRING(starts_out), starts, (size_t)(total + 1) * 8);
    int64_t *o = (int64_t *)PyBytes_AS_STRING(order);
    for (Py_ssize_t i = 0; i < rows; i++) { /* a stable counting sort */
        o[starts[part[i]]++] = i;
    }
    out = Py_BuildValue("(OOL)", order, starts_out, rr);
done:
    Py_XDECREF(order);
    Py_XDECREF(starts_out);
    PyMem_Free(part);
    PyMem_Free(starts);
    col_release(&key);
    col_release(&explicit.hold);
    return out;
}

/* ---- encoding ------------------------------------------------------------------------ */

static inline Py_ssize_t
varint_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *
put_varint(uint8_t *o, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        *o++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *o++ = (uint8_t)z;
    return o;
}

static inline uint8_t *
put_bytes(uint8_t *o, const uint8_t *s, int64_t n)
{
    o = put_varint(o, n);
    if (n > 0) {
        memcpy(o, s, (size_t)n);
        o += n;
    }
    return o;
}

static inline Py_ssize_t
bytes_size(int64_t n)
{
    return varint_size(n) + (n > 0 ? (Py_ssize_t)n : 0);
}

static inline int64_t
floor_div_1000(int64_t us)
{
    int64_t q = us / 1000;
    return (us % 1000 < 0) ? q - 1 : q;
}

typedef struct {
    column key, value, name, hvalue;
    column lists; /* validity, ends, large, offset of the headers list (data unused) */
    ints ts;
    int with_headers;
    Py_ssize_t rows;
} inputs;

static void
inputs_release(inputs *in)
{
    col_release(&in->key);
    col_release(&in->value);
    col_release(&in->name);
    col_release(&in->hvalue);
    col_release(&in->lists);
    col_release(&in->ts.hold);
}

/* headers: None or (validity, ends, large, offset, name column, value column) */
static int
headers_open(inputs *in, PyObject *spec)
{
    memset(&in->lists, 0, sizeof in->lists);
    memset(&in->name, 0, sizeof in->name);
    memset(&in->hvalue, 0, sizeof in->hvalue);
    if (spec == Py_None) {
        return 0;
    }
    PyObject *validity, *ends, *name_spec, *value_spec;
    int large;
    Py_ssize_t offset;
    if (!PyTuple_Check(spec) ||
        !PyArg_ParseTuple(spec, "OOpnOO", &validity, &ends, &large, &offset, &name_spec, &value_spec)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "headers are (validity, ends, large, offset, names, values)");
        }
        return -1;
    }
    PyObject *as_column = Py_BuildValue("(OOy#On)", validity, ends, "", (Py_ssize_t)0, large ? Py_True : Py_False, offset);
    if (as_column == NULL) {
        return -1;
    }
    int rc = col_open(&in->lists, as_column, in->rows, 0);
    Py_DECREF(as_column);
    if (rc < 0) {
        return -1;
    }
    int64_t entries = end_at(&in->lists, offset + in->rows);
    if (entries < 0 || entries > PY_SSIZE_T_MAX / 16) {
        PyErr_SetString(PyExc_ValueError, "bad headers offsets");
        return -1;
    }
    in->with_headers = 1;
    return col_open(&in->name, name_spec, (Py_ssize_t)entries, 0) < 0 ||
                   col_open(&in->hvalue, value_spec, (Py_ssize_t)entries, 0) < 0
               ? -1
               : 0;
}

/* The header entries [a, b) of a row; 0, or -1 with ValueError. */
static int
header_range(const inputs *in, Py_ssize_t row, int64_t *a, int64_t *b)
{
    *a = *b = 0;
    if (!in->with_headers || !is_valid(in->lists.validity, in->lists.offset + row)) {
        return 0;
    }
    *a = end_at(&in->lists, in->lists.offset + row);
    *b = end_at(&in->lists, in->lists.offset + row + 1);
    int64_t entries = end_at(&in->lists, in->lists.offset + in->rows);
    if (*a < 0 || *b < *a || *b > entries) {
        PyErr_Format(PyExc_ValueError, "row %zd: its headers are outside the entries", row);
        return -1;
    }
    return 0;
}

/* The body size of a row's record (everything after the length prefix). */
static int
record_size(const inputs *in, Py_ssize_t row, int64_t ts_delta, int64_t delta, Py_ssize_t *size,
            int64_t *klen, int64_t *vlen)
{
    const uint8_t *s;
    if (col_get(&in->key, row, &s, klen) < 0 || col_get(&in->value, row, &s, vlen) < 0) {
        return -1;
    }
    int64_t a, b;
    if (header_range(in, row, &a, &b) < 0) {
        return -1;
    }
    Py_ssize_t n = 1 + varint_size(ts_delta) + varint_size(delta) + bytes_size(*klen) + bytes_size(*vlen) +
                   varint_size(b - a);
    for (int64_t h = a; h < b; h++) {
        int64_t nlen, hlen;
        if (col_get(&in->name, (Py_ssize_t)h, &s, &nlen) < 0 || col_get(&in->hvalue, (Py_ssize_t)h, &s, &hlen) < 0) {
            return -1;
        }
        if (nlen < 0) {
            PyErr_Format(PyExc_ValueError, "row %zd has a header without a name", row);
            return -1;
        }
        n += bytes_size(nlen) + bytes_size(hlen);
    }
    *size = n;
    return 0;
}

static uint8_t *
write_record(const inputs *in, uint8_t *o, Py_ssize_t row, Py_ssize_t size, int64_t ts_delta, int64_t delta)
{
    const uint8_t *s;
    int64_t n;
    o = put_varint(o, size);
    *o++ = 0;
    o = put_varint(o, ts_delta);
    o = put_varint(o, delta);
    col_get(&in->key, row, &s, &n); /* checked by record_size */
    o = put_bytes(o, s, n);
    col_get(&in->value, row, &s, &n);
    o = put_bytes(o, s, n);
    int64_t a, b;
    header_range(in, row, &a, &b);
    o = put_varint(o, b - a);
    for (int64_t h = a; h < b; h++) {
        col_get(&in->name, (Py_ssize_t)h, &s, &n);
        o = put_bytes(o, s, n);
        col_get(&in->hvalue, (Py_ssize_t)h, &s, &n);
        o = put_bytes(o, s, n);
    }
    return o;
}

static inline int64_t
ts_of(const inputs *in, Py_ssize_t row, int64_t now_ms)
{
    if (!in->ts.present || !is_valid(in->ts.validity, in->ts.offset + row)) {
        return now_ms;
    }
    int64_t us;
    memcpy(&us, in->ts.data + (size_t)(in->ts.offset + row) * 8, 8);
    return floor_div_1000(us);
}

static PyObject *
encode_records(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *key_spec, *value_spec, *ts_spec, *headers_spec, *order_obj;
    Py_ssize_t rows, lo, hi, budget;
    long long now_ms;
    if (!PyArg_ParseTuple(args, "OOOOnOnnnL", &key_spec, &value_spec, &ts_spec, &headers_spec, &rows, &order_obj,
                          &lo, &hi, &budget, &now_ms)) {
        return NULL;
    }
    inputs in;
    memset(&in, 0, sizeof in);
    in.rows = rows;
    Py_buffer order = {0};
    int have_order = 0;
    PyObject *out = NULL, *payload = NULL;
    if (rows < 0) {
        PyErr_SetString(PyExc_ValueError, "rows must be >= 0");
        goto done;
    }
    if (col_open(&in.key, key_spec, rows, 1) < 0 || col_open(&in.value, value_spec, rows, 1) < 0 ||
        ints_open(&in.ts, ts_spec, rows, 8) < 0 || headers_open(&in, headers_spec) < 0) {
        goto done;
    }
    if (PyObject_GetBuffer(order_obj, &order, PyBUF_SIMPLE) < 0) {
        goto done;
    }
    have_order = 1;
    Py_ssize_t count_all = order.len / 8;
    if (lo < 0 || hi > count_all || lo >= hi) {
        PyErr_SetString(PyExc_ValueError, "need 0 <= lo < hi <= len(order)");
        goto done;
    }
    const uint8_t *ord = order.buf;
    /* first pass: how many rows fit the budget, and the payload's size */
    Py_ssize_t total = 0, next = lo;
    int64_t base_ts = 0, max_ts = 0, estimate = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        int64_t row;
        memcpy(&row, ord + (size_t)i * 8, 8);
        if (row < 0 || row >= rows) {
            PyErr_Format(PyExc_ValueError, "row index %lld is not in 0-%zd", (long long)row, rows - 1);
            goto done;
        }
        int64_t ts = ts_of(&in, (Py_ssize_t)row, now_ms);
        if (i == lo) {
            base_ts = max_ts = ts;
        }
        max_ts = ts > max_ts ? ts : max_ts;
        Py_ssize_t size;
        int64_t klen, vlen;
        if (record_size(&in, (Py_ssize_t)row, ts - base_ts, i - lo, &size, &klen, &vlen) < 0) {
            goto done;
        }
        total += varint_size(size) + size;
        next = i + 1;
        estimate += (klen > 0 ? klen : 0) + (vlen > 0 ? vlen : 0) + 32;
        if (estimate >= budget) {
            break;
        }
    }
    payload = PyBytes_FromStringAndSize(NULL, total);
    if (payload == NULL) {
        goto done;
    }
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(payload);
    for (Py_ssize_t i = lo; i < next; i++) {
        int64_t row;
        memcpy(&row, ord + (size_t)i * 8, 8);
        int64_t ts = ts_of(&in, (Py_ssize_t)row, now_ms);
        Py_ssize_t size;
        int64_t klen, vlen;
        record_size(&in, (Py_ssize_t)row, ts - base_ts, i - lo, &size, &klen, &vlen);
        o = write_record(&in, o, (Py_ssize_t)row, size, ts - base_ts, i - lo);
    }
    out = Py_BuildValue("(OnLL)", payload, next, (long long)base_ts, (long long)max_ts);
done:
    Py_XDECREF(payload);
    if (have_order) {
        PyBuffer_Release(&order);
    }
    inputs_release(&in);
    return out;
}

static PyMethodDef encoder_methods[] = {
    {"partition_order", partition_order, METH_VARARGS,
     "partition_order(key, explicit, rows, total, rr_start)\n--\n\n"
     "Row indices grouped by partition, the groups' starts, and the round-robin counter."},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(key, value, ts, headers, rows, order, lo, hi, budget, now_ms)\n--\n\n"
     "The records section of rows order[lo:next], next where the size estimate reaches budget."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef encoder_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "logtrove.records._encoder",
    .m_doc = "Arrow columns into Kafka v2 records, compiled (see logtrove.records.encoder).",
    .m_size = -1,
    .m_methods = encoder_methods,
};

PyMODINIT_FUNC
PyInit__encoder(void)
{
    return PyModule_Create(&encoder_module);
}
