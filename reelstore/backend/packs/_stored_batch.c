/* reelstore.backend.packs._stored_batch: the per-object loop of `cat-file --batch` over mapped packs, in C.
 *
 * An optional accelerator (docs/commands/cat-file.md): reelstore.backend.packs.bulk_read uses it when it
 * was built and REEL_PURE is not set, and reads in pure Python otherwise. It answers only what the
 * pure path's inline read answers -- a full lowercase hex id whose entry is stored (method 0, its size
 * a one- or two-byte varint written twice) -- with the same checks: the entry's CRC-32, one BLAKE3 of
 * `kind\0body` compared with the id, a blob's body checked to be one msgpack bin. Anything else, or
 * anything that fails a check, it hands back unanswered: the pure path then reads that name and names
 * the damage, so both paths print the same bytes and refuse the same entries with the same errors.
 *
 * BLAKE3 is computed here too (_blake3.h, written from the specification and checked against the
 * `blake3` package), eight objects side by side: calling the package's hasher from C cost ~0.4 us an
 * object, mostly the calls; hashed in lanes, grouped by length, a few-hundred-byte object costs ~0.2 us
 * (0.19 with AVX2, 0.25 with SSE2). CRC-32 (zlib's: reflected polynomial 0xEDB88320) is computed here
 * too: folded 16 bytes at a time by carry-less multiplication on x86-64 (PCLMULQDQ), else eight bytes
 * a step through eight tables.
 *
 * Every read of a mapped file is bounds-checked against its length: a damaged pack or index makes a
 * name go back to the pure path, never a read outside the map.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_blake3.h"

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

static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The CRC register `c` (no initial or final inversion) run over `n` bytes, eight bytes a step. */
static uint32_t crc_tables(uint32_t c, const unsigned char *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo = c ^ le32(p), hi = le32(p + 4);
        c = CRC[7][lo & 0xFF] ^ CRC[6][lo >> 8 & 0xFF] ^ CRC[5][lo >> 16 & 0xFF] ^ CRC[4][lo >> 24] ^
            CRC[3][hi & 0xFF] ^ CRC[2][hi >> 8 & 0xFF] ^ CRC[1][hi >> 16 & 0xFF] ^ CRC[0][hi >> 24];
    }
    for (; n; p++, n--)
        c = c >> 8 ^ CRC[0][(c ^ *p) & 0xFF];
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <wmmintrin.h>
#define CRC_FOLDS 1
/* Carry-less multiplication (PCLMULQDQ, on every x86-64 CPU since 2010; checked at import): the message
 * is folded 16 bytes at a time into one 128-bit register, whose two halves are multiplied by x^(128+32)
 * and x^(128-32) mod P (bit-reflected, as the CRC is; worked out in fill_crc) and added to the next 16
 * bytes. The polynomial those 16 bytes then make is the message's so far, modulo P, so the tables finish
 * the CRC from them. ~5x the tables' speed on a few hundred bytes. */
static uint64_t CRC_FOLD[2];
static int crc_folds;

__attribute__((target("pclmul,sse2"))) static uint32_t crc_folded(const unsigned char *p, size_t n) {
    const __m128i k = _mm_set_epi64x((long long)CRC_FOLD[1], (long long)CRC_FOLD[0]);
    __m128i x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)0xFFFFFFFFu));
    for (p += 16, n -= 16; n >= 16; p += 16, n -= 16) {
        __m128i lo = _mm_clmulepi64_si128(x, k, 0x00), hi = _mm_clmulepi64_si128(x, k, 0x11);
        x = _mm_xor_si128(_mm_xor_si128(lo, hi), _mm_loadu_si128((const __m128i *)p));
    }
    unsigned char folded[16];
    _mm_storeu_si128((__m128i *)folded, x);
    return crc_tables(crc_tables(0, folded, 16), p, n) ^ 0xFFFFFFFFu;
}
#else
#define CRC_FOLDS 0
static int crc_folds;
#endif

/* x^e modulo the CRC-32 polynomial (0x104C11DB7, not reflected). */
static uint32_t crc_xpow(int e) {
    uint64_t r = 1;
    for (int i = 0; i < e; i++) {
        r <<= 1;
        if (r >> 32 & 1)
            r ^= 0x104C11DB7u;
    }
    return (uint32_t)r;
}

static uint32_t reflect32(uint32_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++)
        r |= (v >> i & 1) << (31 - i);
    return r;
}

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
#if CRC_FOLDS
    /* Reflected and shifted up one bit: a carry-less product of reflected operands comes out one bit low. */
    CRC_FOLD[0] = (uint64_t)reflect32(crc_xpow(128 + 32)) << 1;
    CRC_FOLD[1] = (uint64_t)reflect32(crc_xpow(128 - 32)) << 1;
    __builtin_cpu_init();
    crc_folds = __builtin_cpu_supports("pclmul");
#endif
}

/* zlib's crc32(0, p, n); `tables` keeps to the tables (the tests check both ways). */
static uint32_t crc32_of(const unsigned char *p, size_t n, int tables) {
#if CRC_FOLDS
    if (crc_folds && !tables && n >= 32)
        return crc_folded(p, n);
#endif
    (void)tables;
    return crc_tables(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
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
static int parse_id(const unsigned char *name, Py_ssize_t len, unsigned char *id) {
    if (len != 2 * ID_LEN)
        return 0;
    int bad = 0;
    for (int i = 0; i < ID_LEN; i++) {
        int hi = HEX[name[2 * i]], lo = HEX[name[2 * i + 1]];
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
static int append_answer(PyObject *out, const unsigned char *name, Py_ssize_t name_len, const char *kind,
                         Py_ssize_t kind_len, const unsigned char *content, Py_ssize_t length,
                         int with_content) {
    char digits[24];
    int n = 0;
    size_t value = (size_t)length;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    Py_ssize_t head = name_len + 1 + kind_len + 1 + n + 1;
    Py_ssize_t at = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, at + head + (with_content ? length + 1 : 0)) < 0)
        return -1;
    char *dst = PyByteArray_AS_STRING(out) + at;
    memcpy(dst, name, (size_t)name_len);
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

/* A name whose entry passed every check but the hash: where its name, entry and content are, while it
 * waits to be hashed with the names after it. */
typedef struct {
    Py_ssize_t at, name_len;   /* the name, in the records */
    unsigned char id[ID_LEN];  /* the id it names */
    const unsigned char *body; /* the entry's body, in the map */
    Py_ssize_t size, skip;     /* the body's size; the content starts `skip` bytes in (a blob's bin header) */
    PyObject *tag;             /* `kind\0`, borrowed from `tags` */
    unsigned char digest[B3_OUT];
} Pending;

/* Names checked before their hashes are computed together: enough to fill the lanes by length. */
#define WINDOW 64
/* The longest canonical bytes a stored entry gives: a tag and a body whose size is a two-byte varint. */
#define MAX_RAW (16 + 0x3FFF)
/* What a window's canonical bytes may take together (they are copied out to be hashed). */
#define RAW_BUDGET (64 * 1024)

/* Every check of a name but its hash: a full lowercase hex id, in one of the packs, whose entry is
 * stored, of a known kind, CRC-right, a blob's body one msgpack bin, a content the caller does not
 * write straight out. 1 with `p` filled in, 0 if the name is handed back to the pure path. */
static int check_one(PackView *views, Py_ssize_t npacks, const unsigned char *name, Py_ssize_t name_len,
                     PyObject *tags, int with_content, Py_ssize_t direct, Pending *p) {
    if (!parse_id(name, name_len, p->id))
        return 0;
    for (Py_ssize_t n = 0; n < npacks; n++) {
        PackView *v = &views[n];
        int64_t i = find(v, p->id);
        if (i == -1)
            continue;
        if (i < 0)
            return 0;
        const unsigned char *idx = v->idx.buf, *m = v->pack.buf;
        uint64_t off = be64(idx + IDX_HEADER + FANOUT + ID_LEN * v->count + 8 * (uint64_t)i);
        uint32_t crc = be32(idx + IDX_HEADER + FANOUT + (ID_LEN + 8) * v->count + 4 * (uint64_t)i);
        int code;
        Py_ssize_t body;
        if (!stored_entry(v, off, &code, &body, &p->size))
            return 0;
        /* `tags` maps a kind code to `kind\0` (None for a code no kind has). */
        if (code >= PyTuple_GET_SIZE(tags) || !PyBytes_Check(PyTuple_GET_ITEM(tags, code)))
            return 0;
        p->tag = PyTuple_GET_ITEM(tags, code);
        if (PyBytes_GET_SIZE(p->tag) + p->size > MAX_RAW)
            return 0;
        if (crc32_of(m + off, (size_t)(body + p->size - (Py_ssize_t)off), 0) != crc)
            return 0;
        p->body = m + body;
        p->skip = 0;
        if (code == BLOB && (p->skip = bin_header(p->body, p->size)) == 0)
            return 0;
        if (with_content && p->size - p->skip >= direct)
            return 0; /* the caller writes it straight out, not gathered with the others */
        p->name_len = name_len;
        return 1;
    }
    return 0; /* in none of these packs: a revision, a loose object, a missing id */
}

/* The digests of `n` inputs: those of one chunk side by side, B3_LANES at a time, grouped by their
 * number of blocks so that the lanes of a group do the same work (mixed, they do the longest one's);
 * longer ones alone. `cvs` holds a chunk chaining value for every chunk of the longest input. */
static void hash_inputs(const unsigned char *const in[], const size_t len[], int n,
                        unsigned char (*out)[B3_OUT], unsigned char (*cvs)[B3_OUT]) {
    int order[WINDOW], count = 0;
    for (size_t blocks = 1; blocks <= B3_CHUNK / B3_BLOCK; blocks++) /* counting sort by block count */
        for (int i = 0; i < n; i++)
            if (len[i] <= B3_CHUNK && (len[i] ? (len[i] + B3_BLOCK - 1) / B3_BLOCK : 1) == blocks)
                order[count++] = i;
    for (int g = 0; g < count; g += B3_LANES) {
        const unsigned char *lane_in[B3_LANES];
        size_t lane_len[B3_LANES];
        unsigned char digest[B3_LANES][B3_OUT];
        int lanes = count - g < B3_LANES ? count - g : B3_LANES;
        for (int l = 0; l < lanes; l++)
            lane_in[l] = in[order[g + l]], lane_len[l] = len[order[g + l]];
        b3_hash_short(lane_in, lane_len, lanes, digest);
        for (int l = 0; l < lanes; l++)
            memcpy(out[order[g + l]], digest[l], B3_OUT);
    }
    for (int i = 0; i < n; i++)
        if (len[i] > B3_CHUNK)
            b3_long(in[i], len[i], cvs, (len[i] + B3_CHUNK - 1) / B3_CHUNK, out[i]);
}

/* Hash the pending names' canonical bytes (`kind\0` + body, laid end to end in `raw`). */
static void hash_pending(Pending *w, int n, unsigned char *raw, unsigned char (*cvs)[B3_OUT]) {
    const unsigned char *in[WINDOW] = {NULL};
    size_t len[WINDOW] = {0};
    unsigned char digest[WINDOW][B3_OUT];
    for (int i = 0; i < n; i++) {
        Py_ssize_t tag_len = PyBytes_GET_SIZE(w[i].tag);
        memcpy(raw, PyBytes_AS_STRING(w[i].tag), (size_t)tag_len);
        memcpy(raw + tag_len, w[i].body, (size_t)w[i].size);
        in[i] = raw, len[i] = (size_t)(tag_len + w[i].size);
        raw += len[i];
    }
    hash_inputs(in, len, n, digest, cvs);
    for (int i = 0; i < n; i++)
        memcpy(w[i].digest, digest[i], B3_OUT);
}

/* What one call works with besides its arguments. */
typedef struct {
    Pending window[WINDOW];
    unsigned char raw[RAW_BUDGET];                     /* a window's canonical bytes, to be hashed */
    unsigned char cvs[MAX_RAW / B3_CHUNK + 1][B3_OUT]; /* the chunk chaining values of one of them */
} Scratch;

/* Answer the `sep`-ended names of records[*at..len) into `out` a window at a time: the names up to the
 * first that fails a check are checked, hashed together and, each whose hash is its id, answered in
 * order. `*at` ends at the first name not answered (len if none). 0, or -1 with an exception set. */
static int answer_names(PackView *views, Py_ssize_t npacks, const unsigned char *data, Py_ssize_t len,
                        int sep, Py_ssize_t *at, PyObject *tags, PyObject *out, int with_content,
                        Py_ssize_t direct, Scratch *s) {
    Pending *w = s->window;
    for (;;) {
        int n = 0, stopped = 0;
        Py_ssize_t next = *at, used = 0;
        while (n < WINDOW && next < len) {
            const unsigned char *end = memchr(data + next, sep, (size_t)(len - next));
            if (end == NULL || !check_one(views, npacks, data + next, end - (data + next), tags, with_content,
                                          direct, &w[n])) {
                stopped = 1;
                break;
            }
            Py_ssize_t raw_len = PyBytes_GET_SIZE(w[n].tag) + w[n].size;
            if (used + raw_len > RAW_BUDGET)
                break; /* the next window starts with it */
            used += raw_len;
            w[n++].at = next;
            next = end - data + 1;
        }
        hash_pending(w, n, s->raw, s->cvs);
        for (int k = 0; k < n; k++) {
            if (memcmp(w[k].digest, w[k].id, ID_LEN) != 0) {
                *at = w[k].at; /* the pure path names the damage */
                return 0;
            }
            const char *kind = PyBytes_AS_STRING(w[k].tag);
            Py_ssize_t kind_len = PyBytes_GET_SIZE(w[k].tag) - 1; /* without the NUL */
            if (append_answer(out, data + w[k].at, w[k].name_len, kind, kind_len, w[k].body + w[k].skip,
                              w[k].size - w[k].skip, with_content) < 0)
                return -1;
        }
        *at = next;
        if (stopped || next >= len)
            return 0;
    }
}

PyDoc_STRVAR(answer_doc,
"answer(records, start, sep, packs, tags, out, with_content, direct) -> int\n\n"
"Answer the names in `records` (bytes: names each ending with the byte `sep`) from offset `start`, in\n"
"order, into bytearray `out`, until a name this loop does not answer; return the offset where that\n"
"name starts (len(records) if all were answered). `packs` is a tuple of (index map, pack map, data\n"
"start, data end); `tags` maps a kind code to `kind\\0` (or None); contents of `direct` bytes or\n"
"more are left to the caller.");

static PyObject *answer(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "answer takes 8 arguments");
        return NULL;
    }
    PyObject *records = args[0], *packs = args[3], *tags = args[4], *out = args[5];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), sep = PyLong_AsSsize_t(args[2]);
    Py_ssize_t direct = PyLong_AsSsize_t(args[7]);
    int with_content = PyObject_IsTrue(args[6]);
    if (PyErr_Occurred() || with_content < 0)
        return NULL;
    if (!PyBytes_Check(records) || !PyTuple_Check(packs) || !PyTuple_Check(tags) || !PyByteArray_Check(out) ||
        sep < 0 || sep > 255) {
        PyErr_SetString(PyExc_TypeError, "answer takes bytes, an offset, a byte, two tuples and a bytearray");
        return NULL;
    }
    Py_ssize_t npacks = PyTuple_GET_SIZE(packs);
    PackView *views = PyMem_Calloc(npacks ? (size_t)npacks : 1, sizeof(PackView));
    Scratch *scratch = PyMem_Malloc(sizeof(Scratch));
    if (views == NULL || scratch == NULL) {
        PyMem_Free(views);
        PyMem_Free(scratch);
        return PyErr_NoMemory();
    }
    /* `records` is immutable bytes, held by the caller for the call; nothing here calls Python code. */
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(records);
    Py_ssize_t len = PyBytes_GET_SIZE(records), at = start < 0 ? 0 : start > len ? len : start;
    int ok = 1;
    for (Py_ssize_t p = 0; p < npacks && ok > 0; p++)
        ok = open_view(PyTuple_GET_ITEM(packs, p), &views[p]);
    if (ok > 0 && at < len &&
        answer_names(views, npacks, data, len, (int)sep, &at, tags, out, with_content, direct, scratch) < 0)
        ok = -1;
    release_views(views, npacks);
    PyMem_Free(views);
    PyMem_Free(scratch);
    if (ok < 0)
        return NULL;
    return PyLong_FromSsize_t(at);
}

PyDoc_STRVAR(blake3_doc,
"blake3(inputs) -> list of bytes\n\n"
"The BLAKE3 digest of each bytes in `inputs` (at most 64), hashed as the batch hashes objects: one-chunk\n"
"inputs side by side in lanes, grouped by length (for this module's tests).");

static PyObject *blake3_py(PyObject *module, PyObject *inputs) {
    (void)module;
    if (!PyList_Check(inputs) || PyList_GET_SIZE(inputs) > WINDOW) {
        PyErr_SetString(PyExc_TypeError, "blake3 takes a list of at most 64 bytes objects");
        return NULL;
    }
    int n = (int)PyList_GET_SIZE(inputs);
    const unsigned char *in[WINDOW] = {NULL};
    size_t len[WINDOW] = {0}, longest = 0;
    for (int i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(inputs, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "blake3 takes a list of bytes objects");
            return NULL;
        }
        in[i] = (const unsigned char *)PyBytes_AS_STRING(item);
        len[i] = (size_t)PyBytes_GET_SIZE(item);
        longest = len[i] > longest ? len[i] : longest;
    }
    unsigned char digest[WINDOW][B3_OUT];
    unsigned char (*cvs)[B3_OUT] = PyMem_Malloc((longest / B3_CHUNK + 1) * B3_OUT);
    if (cvs == NULL)
        return PyErr_NoMemory();
    hash_inputs(in, len, n, digest, cvs);
    PyMem_Free(cvs);
    PyObject *result = PyList_New(n);
    for (int i = 0; result != NULL && i < n; i++) {
        PyObject *d = PyBytes_FromStringAndSize((const char *)digest[i], B3_OUT);
        if (d == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, d);
    }
    return result;
}

PyDoc_STRVAR(crc32_doc,
"crc32(data, tables=False) -> int\n\n"
"zlib.crc32(data), as this module computes it: folded by carry-less multiplication where the CPU has\n"
"it, or from tables if `tables` (for its tests, which check both).");

static PyObject *crc32_py(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer view;
    int tables = 0;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &tables))
        return NULL;
    uint32_t c = crc32_of(view.buf, (size_t)view.len, tables);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"crc32", crc32_py, METH_VARARGS, crc32_doc},
    {"blake3", blake3_py, METH_O, blake3_doc},
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
    b3_init();
    return PyModule_Create(&module_def);
}
