/*
 * Zig-zag varints as Kafka records use them (see logtrove/records/varint.py), for the
 * compiled loops: records/_walk.c and storage/derived/_indexcore.c.
 */
#ifndef LOGTROVE_VARINT_H
#define LOGTROVE_VARINT_H

#include <Python.h>
#include <stdint.h>

/* A zig-zag varint of at most 10 bytes at *p, below end (64 bits kept). -1 if it does
 * not fit. */
static inline int
read_varint(const uint8_t *b, Py_ssize_t end, Py_ssize_t *p, int64_t *out)
{
    Py_ssize_t q = *p;
    if (q < end && b[q] < 0x80) {
        uint64_t r = b[q];
        *out = (int64_t)(r >> 1) ^ -(int64_t)(r & 1);
        *p = q + 1;
        return 0;
    }
    uint64_t r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (q >= end) {
            return -1;
        }
        uint8_t c = b[q++];
        r |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            *out = (int64_t)(r >> 1) ^ -(int64_t)(r & 1);
            *p = q;
            return 0;
        }
    }
    return -1;
}

#endif
