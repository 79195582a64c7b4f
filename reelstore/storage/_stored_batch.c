/* reelstore.storage._stored_batch: the per-object loop of `cat-file --batch` over mapped packs, in C.
 *
 * An optional accelerator (docs/commands/cat-file.md): reelstore.storage.bulk_read uses it when it
 * was built and REEL_PURE is not set, and reads in pure Python otherwise. It answers only what the
 * pure path's inline read answers -- a full lowercase hex id whose entry is stored (method 0, its size
 * a one- or two-byte varint written twice) -- with the same checks: the entry's CRC-32, one BLAKE3 of
 * `kind\0body` compared with the id, a blob's body checked to be one msgpack bin. Anything else, or
 * anything that fails a check, it hands back unanswered: the pure path then reads that name and names
 * the damage, so both paths print the same bytes and refuse the same entries with the same errors.
 *
 * BLAKE3 comes from the `blake3` package (a hasher is passed in and called), so the hash is the one
 * every other reader uses. CRC-32 (zlib's: reflected polynomial 0xEDB88320) is computed here, eight
 * bytes a step through eight tables: ~1.5x zlib's speed on entries of a few hundred bytes, the size
 * of most objects.
 *
 * Every read of a mapped file is bounds-checked against its length: a damaged pack or index makes a
 * name go back to the pure path, never a read outside the map.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Pack index layout (docs/format.md): a 12-byte header (magic, version, count), a fan-out table of 256
 * big-endian u32, then per entry a 32-byte id, an 8-byte offset, a 4-byte CRC-32 and an 8-byte mtime
 * (as four columns), then two 32-byte trailers. */
#define IDX_HEADER 12
#define FANOUT (256 * 4)
#define ID_LEN 32
#define ROW (ID_LEN + 8 + 4 + 8)
#define TRAILER 32
#define STORED 0
#define BLOB 1

/* One pack as this call sees it: both files' mapped bytes, held for the call only (an exported buffer
 * keeps the map from being closed under us). */
typedef struct {
    Py_buffer idx, pack;
    int held;
    uint64_t count;
    Py_ssize_t data_start, data_end;
} PackView;

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const unsigned char *p) {
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void release_views(PackView *views, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (views[i].held) {
            PyBuffer_Release(&views[i].idx);
            PyBuffer_Release(&views[i].pack);
            views[i].held = 0;
        }
    }
}

/* Take the buffers of one (index map, pack map, data start, data end) tuple. Returns 1 if the geometry
 * checks (the index's size fits its count, the entries lie inside the pack), 0 if it does not (the call
 * then answers nothing: the pure path reads and reports), -1 with an exception set on a bad argument. */
static int open_view(PyObject *spec, PackView *v) {
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 4) {
        PyErr_SetString(PyExc_TypeError, "a pack is (index map, pack map, data start, data end)");
        return -1;
    }
    v->data_start = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 2));
    v->data_end = PyLong_AsSsize_t(PyTuple_GET_ITEM(spec, 3));
    if (PyErr_Occurred())
        return -1;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(spec, 0), &v->idx, PyBUF_SIMPLE) < 0)
        return -1;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(spec, 1), &v->pack, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&v->idx);
        return -1;
    }
    v->held = 1;
    if (v->idx.len < IDX_HEADER + FANOUT + 2 * TRAILER)
        return 0;
    v->count = be32((const unsigned char *)v->idx.buf + 8);
    if ((uint64_t)v->idx.len != IDX_HEADER + FANOUT + v->count * ROW + 2 * TRAILER)
        return 0;
    return 0 <= v->data_start && v->data_start <= v->data_end && v->data_end <= v->pack.len;
}

/* Position of `id` in the index, or -1; -2 if the fan-out bounds are out of range (damage: the pure
 * path decides). A plain bisection of the id's fan-out bucket: an index damaged out of order may hide an
 * id from it, which then goes back to the pure path, whose map holds every id listed; an id it does
 * find is still checked by CRC and hash before it is believed. */
static int64_t find(const PackView *v, const unsigned char *id) {
    const unsigned char *base = v->idx.buf;
    const unsigned char *fan = base + IDX_HEADER, *ids = base + IDX_HEADER + FANOUT;
    uint64_t lo = id[0] ? be32(fan + 4 * (id[0] - 1)) : 0, hi = be32(fan + 4 * id[0]);
    if (hi > v->count || lo > hi)
        return -2;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int cmp = memcmp(ids + ID_LEN * mid, id, ID_LEN);
        if (cmp < 0)
            lo = mid + 1;
        else if (cmp > 0)
            hi = mid;
        else
            return (int64_t)mid;
    }
    return -1;
}

/* CRC-32 tables: CRC[0] is the classic byte-at-a-time table; CRC[k][b] is the CRC of byte b followed
 * by k zero bytes, so eight bytes are folded in with eight independent lookups. Filled at import. */
static uint32_t CRC[8][256];

static void fill_crc(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int bit = 0; bit < 8; bit++)
            c = c & 1 ? c >> 1 ^ 0xEDB88320u : c >> 1;
        CRC[0][b] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int b = 0; b < 256; b++)
            CRC[k][b] = CRC[k - 1][b] >> 8 ^ CRC[0][CRC[k - 1][b] & 0xFF];
}

static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* zlib's crc32(0, p, n). */
static uint32_t crc32_of(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo = c ^ le32(p), hi = le32(p + 4);
        c = CRC[7][lo & 0xFF] ^ CRC[6][lo >> 8 & 0xFF] ^ CRC[5][lo >> 16 & 0xFF] ^ CRC[4][lo >> 24] ^
            CRC[3][hi & 0xFF] ^ CRC[2][hi >> 8 & 0xFF] ^ CRC[1][hi >> 16 & 0xFF] ^ CRC[0][hi >> 24];
    }
    for (; n; p++, n--)
        c = c >> 8 ^ CRC[0][(c ^ *p) & 0xFF];
    return c ^ 0xFFFFFFFFu;
}

/* Lowercase hex digit -> its value, any other byte -> -1: filled at import. A table, not comparisons,
 * because random digits make branches mispredict (it was a third of this loop's own time). */
static signed char HEX[256];

static void fill_hex(void) {
    memset(HEX, -1, sizeof HEX);
    for (int i = 0; i < 16; i++)
        HEX[(unsigned char)"0123456789abcdef"[i]] = (signed char)i;
}

/* The binary id of a name that is a full lowercase hex id (as the pure path's map is keyed); 0 if not. */
static int parse_id(PyObject *name, unsigned char *id) {
    if (!PyBytes_Check(name) || PyBytes_GET_SIZE(name) != 2 * ID_LEN)
        return 0;
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(name);
    int bad = 0;
    for (int i = 0; i < ID_LEN; i++) {
        int hi = HEX[s[2 * i]], lo = HEX[s[2 * i + 1]];
        bad |= hi | lo; /* negative if either is no digit */
        id[i] = (unsigned char)((hi & 0xF) << 4 | (lo & 0xF));
    }
    return bad >= 0;
}

/* A stored entry at `off`, as the pure path's inline read recognises one: method STORED, its size and
 * payload length the same one- or two-byte varint written twice, all inside the entries. Sets the kind
 * code, the body's start and size; 0 if the entry is not one (the pure path reads it the general way). */
static int stored_entry(const PackView *v, uint64_t off, int *code, Py_ssize_t *body, Py_ssize_t *size) {
    const unsigned char *m = v->pack.buf;
    if (off < (uint64_t)v->data_start || v->data_end < 6 || off > (uint64_t)(v->data_end - 6))
        return 0;
    const unsigned char *e = m + off;
    if (e[1] != STORED)
        return 0;
    if (e[2] < 0x80) {
        if (e[3] != e[2])
            return 0;
        *size = e[2];
        *body = (Py_ssize_t)off + 4;
    } else if (e[3] < 0x80) {
        if (e[4] != e[2] || e[5] != e[3])
            return 0;
        *size = (e[2] & 0x7F) | e[3] << 7;
        *body = (Py_ssize_t)off + 6;
    } else {
        return 0;
    }
    *code = e[0];
    return *body + *size <= v->data_end;
}

/* The blake3 package's hasher, as bound methods fetched once per call (a name looked up per object
 * would cost as much as the hashing of a small one). */
typedef struct {
    PyObject *reset, *update, *digest;
} Hasher;

static int open_hasher(PyObject *hasher, Hasher *h) {
    h->reset = PyObject_GetAttrString(hasher, "reset");
    h->update = h->reset ? PyObject_GetAttrString(hasher, "update") : NULL;
    h->digest = h->update ? PyObject_GetAttrString(hasher, "digest") : NULL;
    if (h->digest == NULL) {
        Py_XDECREF(h->reset);
        Py_XDECREF(h->update);
        return -1;
    }
    return 0;
}

static void close_hasher(Hasher *h) {
    Py_DECREF(h->reset);
    Py_DECREF(h->update);
    Py_DECREF(h->digest);
}

/* Whether BLAKE3 of `tag` + `body` (the object's canonical bytes) is `id`; -1 with an exception set if
 * the hasher itself fails. */
static int hashes_to(const Hasher *h, PyObject *tag, const unsigned char *body, Py_ssize_t size,
                     const unsigned char *id) {
    Py_ssize_t tag_len = PyBytes_GET_SIZE(tag);
    PyObject *raw = PyBytes_FromStringAndSize(NULL, tag_len + size);
    if (raw == NULL)
        return -1;
    memcpy(PyBytes_AS_STRING(raw), PyBytes_AS_STRING(tag), (size_t)tag_len);
    memcpy(PyBytes_AS_STRING(raw) + tag_len, body, (size_t)size);
    PyObject *done = PyObject_CallNoArgs(h->reset);
    if (done != NULL) {
        Py_DECREF(done);
        done = PyObject_CallOneArg(h->update, raw);
    }
    Py_DECREF(raw);
    if (done == NULL)
        return -1;
    Py_DECREF(done);
    PyObject *digest = PyObject_CallNoArgs(h->digest);
    if (digest == NULL)
        return -1;
    int same = PyBytes_Check(digest) && PyBytes_GET_SIZE(digest) == ID_LEN &&
               memcmp(PyBytes_AS_STRING(digest), id, ID_LEN) == 0;
    Py_DECREF(digest);
    return same;
}

/* A blob's body is one msgpack bin (bin 8, 16 or 32): the length of its header, or 0 if it is not. */
static Py_ssize_t bin_header(const unsigned char *body, Py_ssize_t size) {
    if (size < 1)
        return 0;
    int width = body[0] == 0xC4 ? 1 : body[0] == 0xC5 ? 2 : body[0] == 0xC6 ? 4 : 0;
    if (width == 0 || size < 1 + width)
        return 0;
    uint64_t length = 0;
    for (int i = 1; i <= width; i++)
        length = length << 8 | body[i];
    return length == (uint64_t)(size - 1 - width) ? 1 + width : 0;
}

/* Append `<name> <kind> <size>\n` and, with content, `<content>\n` to `out`. */
static int append_answer(PyObject *out, PyObject *name, const char *kind, Py_ssize_t kind_len,
                         const unsigned char *content, Py_ssize_t length, int with_content) {
    char digits[24];
    int n = 0;
    size_t value = (size_t)length;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    Py_ssize_t name_len = PyBytes_GET_SIZE(name), head = name_len + 1 + kind_len + 1 + n + 1;
    Py_ssize_t at = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, at + head + (with_content ? length + 1 : 0)) < 0)
        return -1;
    char *dst = PyByteArray_AS_STRING(out) + at;
    memcpy(dst, PyBytes_AS_STRING(name), (size_t)name_len);
    dst += name_len;
    *dst++ = ' ';
    memcpy(dst, kind, (size_t)kind_len);
    dst += kind_len;
    *dst++ = ' ';
    while (n)
        *dst++ = digits[--n];
    *dst++ = '\n';
    if (with_content) {
        memcpy(dst, content, (size_t)length);
        dst[length] = '\n';
    }
    return 0;
}

/* Answer one name into `out`: 1 if answered, 0 if handed back to the pure path, -1 on an exception. */
static int answer_one(PackView *views, Py_ssize_t npacks, PyObject *name, PyObject *tags,
                      const Hasher *hasher, PyObject *out, int with_content, Py_ssize_t direct) {
    unsigned char id[ID_LEN];
    if (!parse_id(name, id))
        return 0;
    for (Py_ssize_t p = 0; p < npacks; p++) {
        PackView *v = &views[p];
        int64_t i = find(v, id);
        if (i == -1)
            continue;
        if (i < 0)
            return 0;
        const unsigned char *idx = v->idx.buf, *m = v->pack.buf;
        uint64_t off = be64(idx + IDX_HEADER + FANOUT + ID_LEN * v->count + 8 * (uint64_t)i);
        uint32_t crc = be32(idx + IDX_HEADER + FANOUT + (ID_LEN + 8) * v->count + 4 * (uint64_t)i);
        int code;
        Py_ssize_t body, size;
        if (!stored_entry(v, off, &code, &body, &size))
            return 0;
        /* `tags` maps a kind code to `kind\0` (None for a code no kind has). */
        if (code >= PyTuple_GET_SIZE(tags) || !PyBytes_Check(PyTuple_GET_ITEM(tags, code)))
            return 0;
        PyObject *tag = PyTuple_GET_ITEM(tags, code);
        if (crc32_of(m + off, (size_t)(body + size - (Py_ssize_t)off)) != crc)
            return 0;
        int same = hashes_to(hasher, tag, m + body, size, id);
        if (same <= 0)
            return same;
        Py_ssize_t skip = 0;
        if (code == BLOB && (skip = bin_header(m + body, size)) == 0)
            return 0;
        Py_ssize_t length = size - skip;
        if (with_content && length >= direct)
            return 0; /* the caller writes it straight out, not gathered with the others */
        const char *kind = PyBytes_AS_STRING(tag);
        Py_ssize_t kind_len = PyBytes_GET_SIZE(tag) - 1; /* without the NUL */
        return append_answer(out, name, kind, kind_len, m + body + skip, length, with_content) < 0 ? -1 : 1;
    }
    return 0; /* in none of these packs: a revision, a loose object, a missing id */
}

PyDoc_STRVAR(answer_doc,
"answer(names, start, packs, tags, hasher, out, with_content, direct) -> int\n\n"
"Answer names[start:] in order into bytearray `out` until a name this loop does not answer; return\n"
"that name's index (len(names) if all were answered). `packs` is a tuple of (index map, pack map,\n"
"data start, data end); `tags` maps a kind code to `kind\\0` (or None); `hasher` is a blake3 hasher;\n"
"contents of `direct` bytes or more are left to the caller.");

static PyObject *answer(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "answer takes 8 arguments");
        return NULL;
    }
    PyObject *names = args[0], *packs = args[2], *tags = args[3], *out = args[5];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), direct = PyLong_AsSsize_t(args[7]);
    int with_content = PyObject_IsTrue(args[6]);
    if (PyErr_Occurred() || with_content < 0)
        return NULL;
    if (!PyList_Check(names) || !PyTuple_Check(packs) || !PyTuple_Check(tags) || !PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "answer takes a list, two tuples and a bytearray");
        return NULL;
    }
    Hasher hasher;
    if (open_hasher(args[4], &hasher) < 0)
        return NULL;
    Py_ssize_t npacks = PyTuple_GET_SIZE(packs);
    PackView *views = PyMem_Calloc(npacks ? (size_t)npacks : 1, sizeof(PackView));
    if (views == NULL) {
        close_hasher(&hasher);
        return PyErr_NoMemory();
    }
    Py_ssize_t at = start < 0 ? 0 : start;
    int ok = 1;
    for (Py_ssize_t p = 0; p < npacks && ok > 0; p++)
        ok = open_view(PyTuple_GET_ITEM(packs, p), &views[p]);
    if (ok > 0) {
        /* The list is re-measured each round and each name held while it is read: the hasher is Python
         * code's to call, and nothing here assumes the list stays as it was. */
        for (; at < PyList_GET_SIZE(names); at++) {
            PyObject *name = PyList_GET_ITEM(names, at);
            Py_INCREF(name);
            int got = answer_one(views, npacks, name, tags, &hasher, out, with_content, direct);
            Py_DECREF(name);
            if (got < 0)
                ok = -1;
            if (got <= 0)
                break;
        }
    }
    release_views(views, npacks);
    PyMem_Free(views);
    close_hasher(&hasher);
    if (ok < 0)
        return NULL;
    return PyLong_FromSsize_t(at);
}

PyDoc_STRVAR(crc32_doc,
"crc32(data) -> int\n\nzlib.crc32(data), as this module computes it (for its tests).");

static PyObject *crc32_py(PyObject *module, PyObject *data) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = crc32_of(view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"crc32", crc32_py, METH_O, crc32_doc},
    {"answer", (PyCFunction)(void (*)(void))answer, METH_FASTCALL, answer_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_stored_batch",
    "cat-file --batch's per-object loop over stored pack entries, in C (optional; see bulk_read).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__stored_batch(void) {
    fill_hex();
    fill_crc();
    return PyModule_Create(&module_def);
}
