/*
 * The query side of logtrove.storage.derived._indexcore: candidates of written .keyidx
 * blocks (compiled into the same module as _indexcore.c, which adds these functions).
 *
 * The compiled twins of logtrove.storage.derived.keyindex.py_chain, py_chain_from,
 * py_probe_tables and py_tables_candidates (which reads tables held in memory, not a
 * file): the same preads in the same order (a grouped block's slot in one read; a chained
 * block's slot unless the caller holds the slot table, then each entry of its chain,
 * newest first), the same result and the same errors, without a Python object per step. A
 * query probes every key block of every segment it reads, so these few small reads run
 * hundreds of times a query.
 *
 * Memory safety: a read never leaves its block's entries (slot ends are clamped to the
 * entry count, tables in memory are checked against their counts first).
 * tests/storage/test_key_groups.py and test_key_chain.py feed them damaged tables and
 * files; to run those under AddressSanitizer, build as _indexcore.c says, with this file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

static uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* 0 when all `len` bytes were read, -1 with a Python error set otherwise. */
static int
pread_all(int fd, unsigned char *buf, size_t len, long long pos)
{
    ssize_t got;
    do {
        got = pread(fd, buf, len, (off_t)pos);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if ((size_t)got != len) {
        PyErr_Format(PyExc_ValueError, "the key index ends inside a block's entries, at byte %lld", pos);
        return -1;
    }
    return 0;
}

/* Append the offset base + rel to the list out: 0, or -1 with a Python error set. */
static int
append_offset(PyObject *out, long long base, uint32_t rel)
{
    PyObject *offset = PyLong_FromLongLong(base + (long long)rel);
    if (offset == NULL) {
        return -1;
    }
    int failed = PyList_Append(out, offset);
    Py_DECREF(offset);
    return failed;
}

/* The chain from `link` on: each entry read, newest first, those whose stored hash is
 * `want` kept; a new list, or NULL with a Python error set. */
static PyObject *
walk(int fd, long long entries_pos, unsigned long long n, uint32_t link, uint32_t want, long long base)
{
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    unsigned char buf[12];
    for (unsigned long long steps = 0; link != 0 && steps <= n; steps++) {
        if (pread_all(fd, buf, 12, entries_pos + 12 * ((long long)link - 1)) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        uint32_t stored = be32(buf), rel = be32(buf + 4), prev = be32(buf + 8);
        if (stored == want && append_offset(out, base, rel) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (prev >= link) { /* links only point backwards; anything else is corruption */
            break;
        }
        link = prev;
    }
    return out;
}

/* The grouped entries [start, end) of one slot (clamped to the block's n entries), read
 * in one pread, those whose stored hash is `want` kept in their order (newest first); a
 * new list, or NULL with a Python error set. */
static PyObject *
slot_entries(int fd, long long entries_pos, unsigned long long n, uint32_t start, uint32_t end, uint32_t want,
             long long base)
{
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    if (end > n) {
        end = (uint32_t)n;
    }
    if (start >= end) {
        return out;
    }
    size_t length = 8 * (size_t)(end - start);
    unsigned char small[4096];
    unsigned char *buf = length <= sizeof small ? small : PyMem_Malloc(length);
    if (buf == NULL) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    if (pread_all(fd, buf, length, entries_pos + 8 * (long long)start) < 0) {
        goto failed;
    }
    for (const unsigned char *e = buf; e < buf + length; e += 8) {
        if (be32(e) == want && append_offset(out, base, be32(e + 4)) < 0) {
            goto failed;
        }
    }
    if (buf != small) {
        PyMem_Free(buf);
    }
    return out;
failed:
    if (buf != small) {
        PyMem_Free(buf);
    }
    Py_DECREF(out);
    return NULL;
}

PyDoc_STRVAR(chain_doc,
"chain(fd, table_position, slots, entry_count, digest, base_offset) -> list[int]\n\n"
"Absolute offsets of the entries whose stored hash equals digest's low 32 bits, newest\n"
"first, walking the chain of the slot digest's high 32 bits choose.");

static PyObject *
chain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "chain() takes 6 arguments");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    long long table_pos = PyLong_AsLongLong(args[1]);
    unsigned long long slots = PyLong_AsUnsignedLongLong(args[2]);
    unsigned long long n = PyLong_AsUnsignedLongLong(args[3]);
    unsigned long long digest = PyLong_AsUnsignedLongLong(args[4]);
    long long base = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (fd < 0 || fd > INT32_MAX || table_pos < 0 || slots == 0 || (slots & (slots - 1)) != 0 ||
        slots > UINT32_MAX || n > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "chain(): a bad descriptor, position or slot count");
        return NULL;
    }
    long long entries_pos = table_pos + 4 * (long long)slots;
    if (n == 0) {
        return PyList_New(0);
    }
    unsigned char buf[4];
    if (pread_all((int)fd, buf, 4, table_pos + 4 * (long long)((digest >> 32) & (slots - 1))) < 0) {
        return NULL;
    }
    return walk((int)fd, entries_pos, n, be32(buf), (uint32_t)digest, base);
}

PyDoc_STRVAR(chain_from_doc,
"chain_from(fd, entries_position, entry_count, link, digest, base_offset) -> list[int]\n\n"
"What chain() answers once it has read the slot: the chain that starts at link (a slot's\n"
"value: the newest entry number + 1, 0 for an empty slot), for a slot table held in memory.");

static PyObject *
chain_from(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "chain_from() takes 6 arguments");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    long long entries_pos = PyLong_AsLongLong(args[1]);
    unsigned long long n = PyLong_AsUnsignedLongLong(args[2]);
    unsigned long long link = PyLong_AsUnsignedLongLong(args[3]);
    unsigned long long digest = PyLong_AsUnsignedLongLong(args[4]);
    long long base = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (fd < 0 || fd > INT32_MAX || entries_pos < 0 || n > UINT32_MAX || link > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "chain_from(): a bad descriptor, position or link");
        return NULL;
    }
    if (n == 0) {
        return PyList_New(0);
    }
    return walk((int)fd, entries_pos, n, (uint32_t)link, (uint32_t)digest, base);
}

PyDoc_STRVAR(probe_tables_doc,
"probe_tables(fd, probes, digest, base_offset) -> list[list[int]]\n\n"
"The candidates of each (slot table, entries_position, entry_count, grouped) of the tuple\n"
"probes, the slot read from its table held in memory: a grouped block's slot entries in\n"
"one read, a chained block's chain as chain_from() walks it. One list per probe, in\n"
"order, empty for an empty slot. One call for several key blocks of a segment.");

static PyObject *
probe_tables(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "probe_tables() takes 4 arguments");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    unsigned long long digest = PyLong_AsUnsignedLongLong(args[2]);
    long long base = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *probes = args[1];
    if (fd < 0 || fd > INT32_MAX || !PyTuple_Check(probes)) {
        PyErr_SetString(PyExc_ValueError, "probe_tables(): a bad descriptor or probes");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(probes);
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *probe = PyTuple_GET_ITEM(probes, i);
        if (!PyTuple_Check(probe) || PyTuple_GET_SIZE(probe) != 4 || !PyBytes_Check(PyTuple_GET_ITEM(probe, 0)) ||
            !PyBool_Check(PyTuple_GET_ITEM(probe, 3))) {
            PyErr_SetString(PyExc_ValueError,
                            "probe_tables(): a probe is not (table, entries_position, entry_count, grouped)");
            goto failed;
        }
        PyObject *table = PyTuple_GET_ITEM(probe, 0);
        long long entries_pos = PyLong_AsLongLong(PyTuple_GET_ITEM(probe, 1));
        unsigned long long n = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(probe, 2));
        if (PyErr_Occurred()) {
            goto failed;
        }
        Py_ssize_t length = PyBytes_GET_SIZE(table);
        unsigned long long slots = (unsigned long long)length / 4;
        if (length % 4 != 0 || slots == 0 || (slots & (slots - 1)) != 0 || entries_pos < 0 || n > UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "probe_tables(): a bad slot table, position or entry count");
            goto failed;
        }
        unsigned long long s = (digest >> 32) & (slots - 1);
        const unsigned char *slot = (const unsigned char *)PyBytes_AS_STRING(table) + 4 * s;
        uint32_t link = be32(slot);
        PyObject *found;
        if (PyTuple_GET_ITEM(probe, 3) == Py_True) {
            uint32_t start = s ? be32(slot - 4) : 0;
            found = slot_entries((int)fd, entries_pos, n, start, link, (uint32_t)digest, base);
        } else {
            found = link == 0 || n == 0 ? PyList_New(0) : walk((int)fd, entries_pos, n, link, (uint32_t)digest, base);
        }
        if (found == NULL) {
            goto failed;
        }
        PyList_SET_ITEM(out, i, found);
    }
    return out;
failed:
    Py_DECREF(out);
    return NULL;
}

PyDoc_STRVAR(tables_candidates_doc,
"tables_candidates(tables, digest, base_offset) -> list[int]\n\n"
"The candidates of whole grouped tables held in memory (the tuple tables, oldest first),\n"
"newest table first, each table's slot entries in their order. A table too short for its\n"
"counts raises ValueError; slot ends are clamped to its entries.");

static PyObject *
tables_candidates(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "tables_candidates() takes 3 arguments");
        return NULL;
    }
    unsigned long long digest = PyLong_AsUnsignedLongLong(args[1]);
    long long base = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *tables = args[0];
    if (!PyTuple_Check(tables)) {
        PyErr_SetString(PyExc_ValueError, "tables_candidates(): tables is not a tuple");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    uint32_t want = (uint32_t)digest;
    for (Py_ssize_t i = PyTuple_GET_SIZE(tables) - 1; i >= 0; i--) {
        PyObject *table = PyTuple_GET_ITEM(tables, i);
        if (!PyBytes_Check(table) || PyBytes_GET_SIZE(table) < 8) {
            PyErr_SetString(PyExc_ValueError, "tables_candidates(): a table is not bytes holding its counts");
            goto failed;
        }
        const unsigned char *t = (const unsigned char *)PyBytes_AS_STRING(table);
        unsigned long long slots = be32(t), n = be32(t + 4);
        if (slots == 0 || (slots & (slots - 1)) != 0 ||
            (unsigned long long)PyBytes_GET_SIZE(table) < 8 + 4 * slots + 8 * n) {
            PyErr_SetString(PyExc_ValueError, "tables_candidates(): a table shorter than its counts say");
            goto failed;
        }
        unsigned long long s = (digest >> 32) & (slots - 1);
        unsigned long long end = be32(t + 8 + 4 * s), start = s ? be32(t + 8 + 4 * (s - 1)) : 0;
        if (end > n) {
            end = n;
        }
        const unsigned char *entries = t + 8 + 4 * slots;
        for (unsigned long long e = start; e < end; e++) {
            if (be32(entries + 8 * e) == want && append_offset(out, base, be32(entries + 8 * e + 4)) < 0) {
                goto failed;
            }
        }
    }
    return out;
failed:
    Py_DECREF(out);
    return NULL;
}

PyMethodDef logtrove_keyindex_functions[] = {
    {"tables_candidates", (PyCFunction)(void (*)(void))tables_candidates, METH_FASTCALL, tables_candidates_doc},
    {"chain", (PyCFunction)(void (*)(void))chain, METH_FASTCALL, chain_doc},
    {"chain_from", (PyCFunction)(void (*)(void))chain_from, METH_FASTCALL, chain_from_doc},
    {"probe_tables", (PyCFunction)(void (*)(void))probe_tables, METH_FASTCALL, probe_tables_doc},
    {NULL, NULL, 0, NULL},
};
