/* BLAKE3 (unkeyed hash, 32-byte digest) in C, written from the BLAKE3 specification ("BLAKE3: one
 * function, fast everywhere", https://github.com/BLAKE3-team/BLAKE3-specs, section 2) for
 * reelstore.backend.packs._stored_batch, which hashes every object it returns.
 *
 * Several inputs are hashed side by side, one per lane: the state is held as vectors of B3_LANES words
 * (GCC's vector extension, which compiles to SSE2 on any x86-64 with no intrinsics, and to AVX2 in a
 * second build of the compression that the loader picks on a CPU that has it; a compiler without the
 * extension fails the optional build and reelstore reads in pure Python). An object is most often one
 * chunk (up to 1 KiB), so lanes are what make a short input cheap; a longer input's chunks fill the
 * lanes in turn and are joined into the tree of parent nodes. Checked against the `blake3` package on
 * inputs of every length around the block and chunk boundaries (tests/test_stored_batch.py). */

#ifndef REEL_BLAKE3_H
#define REEL_BLAKE3_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define B3_LANES 8
#define B3_BLOCK 64
#define B3_CHUNK 1024
#define B3_OUT 32

/* Domain flags (spec table 3). */
enum { B3_CHUNK_START = 1, B3_CHUNK_END = 2, B3_PARENT = 4, B3_ROOT = 8 };

/* The initial chaining value: SHA-256's IV (spec table 1). */
static const uint32_t B3_IV[8] = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
                                  0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};

/* The message permutation applied between rounds (spec table 2): word i of the next round's block is
 * word B3_PERMUTATION[i] of this round's. */
static const uint8_t B3_PERMUTATION[16] = {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8};

/* Which word of the original block round r reads at place i: the permutation applied r times, worked
 * out once (b3_init) so that the rounds read the block where it is instead of permuting copies. */
static uint8_t B3_SCHEDULE[7][16];

static void b3_init(void) {
    for (int i = 0; i < 16; i++)
        B3_SCHEDULE[0][i] = (uint8_t)i;
    for (int r = 1; r < 7; r++)
        for (int i = 0; i < 16; i++)
            B3_SCHEDULE[r][i] = B3_SCHEDULE[r - 1][B3_PERMUTATION[i]];
}

typedef uint32_t b3_lanes[B3_LANES]; /* one 32-bit word of every lane's state */
/* The same as a vector (GCC's vector extension): element-wise arithmetic in SIMD registers. */
typedef uint32_t b3_vec __attribute__((vector_size(4 * B3_LANES)));

#define B3_ROT(w, c) ((w) >> (c) | (w) << (32 - (c)))

/* The quarter-round G (spec 2.2) on state words a, b, c, d of every lane, with message words x, y. */
static inline void b3_g(b3_vec *v, int a, int b, int c, int d, const b3_vec *x, const b3_vec *y) {
    v[a] = v[a] + v[b] + *x;
    v[d] = B3_ROT(v[d] ^ v[a], 16);
    v[c] = v[c] + v[d];
    v[b] = B3_ROT(v[b] ^ v[c], 12);
    v[a] = v[a] + v[b] + *y;
    v[d] = B3_ROT(v[d] ^ v[a], 8);
    v[c] = v[c] + v[d];
    v[b] = B3_ROT(v[b] ^ v[c], 7);
}

/* On x86-64, the compression is also compiled for AVX2 (all eight lanes in one register, where SSE2
 * takes two) and the loader picks the build this CPU runs (GCC's function multiversioning).
 * B3_BASELINE_ONLY builds the baseline alone, so the tests can run it on a CPU the loader would give
 * the AVX2 build. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(B3_BASELINE_ONLY)
#define B3_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define B3_CLONES
#endif

/* One compression per lane (spec 2.2): `cv` is replaced by the first eight output words (all a chaining
 * value or a 32-byte digest needs), for the lanes in `live` only. */
B3_CLONES static void b3_compress(b3_lanes cv[8], const b3_lanes m[16], const uint32_t len[],
                                  const uint64_t counter[], const uint32_t flags[], const int live[]) {
    b3_vec v[16], x[16];
    uint32_t lo[B3_LANES], hi[B3_LANES];
    for (int l = 0; l < B3_LANES; l++)
        lo[l] = (uint32_t)counter[l], hi[l] = (uint32_t)(counter[l] >> 32);
    for (int i = 0; i < 8; i++)
        memcpy(&v[i], cv[i], sizeof(b3_vec));
    for (int i = 0; i < 4; i++)
        v[8 + i] = (b3_vec){0} + B3_IV[i];
    memcpy(&v[12], lo, sizeof(b3_vec));
    memcpy(&v[13], hi, sizeof(b3_vec));
    memcpy(&v[14], len, sizeof(b3_vec));
    memcpy(&v[15], flags, sizeof(b3_vec));
    for (int r = 0; r < 7; r++) {
        for (int i = 0; i < 16; i++) /* this round's words in the order it reads them */
            memcpy(&x[i], m[B3_SCHEDULE[r][i]], sizeof(b3_vec));
        b3_g(v, 0, 4, 8, 12, &x[0], &x[1]); /* columns */
        b3_g(v, 1, 5, 9, 13, &x[2], &x[3]);
        b3_g(v, 2, 6, 10, 14, &x[4], &x[5]);
        b3_g(v, 3, 7, 11, 15, &x[6], &x[7]);
        b3_g(v, 0, 5, 10, 15, &x[8], &x[9]); /* diagonals */
        b3_g(v, 1, 6, 11, 12, &x[10], &x[11]);
        b3_g(v, 2, 7, 8, 13, &x[12], &x[13]);
        b3_g(v, 3, 4, 9, 14, &x[14], &x[15]);
    }
    for (int i = 0; i < 8; i++) {
        b3_lanes out;
        b3_vec w = v[i] ^ v[i + 8];
        memcpy(out, &w, sizeof out);
        for (int l = 0; l < B3_LANES; l++)
            if (live[l])
                cv[i][l] = out[l];
    }
}

static inline uint32_t b3_load32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Words to bytes, little-endian: how a chaining value enters a parent block and leaves as a digest. */
static void b3_store(unsigned char *out, const b3_lanes cv[8], int lane) {
    for (int i = 0; i < 8; i++) {
        uint32_t w = cv[i][lane];
        out[4 * i] = (unsigned char)w, out[4 * i + 1] = (unsigned char)(w >> 8);
        out[4 * i + 2] = (unsigned char)(w >> 16), out[4 * i + 3] = (unsigned char)(w >> 24);
    }
}

/* The chaining values of up to B3_LANES chunks side by side: chunk l is in[l][0..len[l]) (at most
 * B3_CHUNK bytes; an empty chunk is one empty block) and is chunk number counter[l] of its input;
 * `root` is set on each one's last block (a chunk that is the whole input, spec 2.4). */
static void b3_chunks(const unsigned char *const in[], const size_t len[], const uint64_t counter[], int n,
                      uint32_t root, b3_lanes cv[8]) {
    size_t blocks[B3_LANES] = {0}, most = 0;
    uint64_t chunk[B3_LANES] = {0}; /* every lane's counter (the unused ones' too: they are computed) */
    for (int l = 0; l < n; l++) {
        blocks[l] = (len[l] + B3_BLOCK - 1) / B3_BLOCK + (len[l] == 0);
        most = blocks[l] > most ? blocks[l] : most;
        chunk[l] = counter[l];
    }
    for (int i = 0; i < 8; i++)
        for (int l = 0; l < B3_LANES; l++)
            cv[i][l] = B3_IV[i];
    for (size_t b = 0; b < most; b++) {
        b3_lanes m[16];
        uint32_t bytes[B3_LANES], flags[B3_LANES];
        int live[B3_LANES];
        for (int l = 0; l < B3_LANES; l++) {
            live[l] = b < blocks[l];
            size_t at = b * B3_BLOCK, left = live[l] && len[l] > at ? len[l] - at : 0;
            bytes[l] = (uint32_t)(left < B3_BLOCK ? left : B3_BLOCK);
            flags[l] = (b == 0 ? B3_CHUNK_START : 0) | (b + 1 == blocks[l] ? B3_CHUNK_END | root : 0);
            if (bytes[l] == B3_BLOCK) { /* a whole block is read where it is */
                for (int w = 0; w < 16; w++)
                    m[w][l] = b3_load32(in[l] + at + 4 * w);
                continue;
            }
            unsigned char block[B3_BLOCK] = {0}; /* the last block, zero-padded (spec 2.4) */
            if (bytes[l])
                memcpy(block, in[l] + at, bytes[l]);
            for (int w = 0; w < 16; w++)
                m[w][l] = b3_load32(block + 4 * w);
        }
        b3_compress(cv, (const b3_lanes *)m, bytes, chunk, flags, live);
    }
}

/* The chaining value of the parent of two chaining values (spec 2.5), `root` if it is the root. */
static void b3_parent(const unsigned char left[B3_OUT], const unsigned char right[B3_OUT], uint32_t root,
                      unsigned char out[B3_OUT]) {
    b3_lanes cv[8], m[16];
    uint32_t bytes[B3_LANES] = {0}, flags[B3_LANES] = {0};
    uint64_t counter[B3_LANES] = {0};
    int live[B3_LANES] = {1};
    memset(m, 0, sizeof m);
    for (int i = 0; i < 8; i++) {
        cv[i][0] = B3_IV[i];
        m[i][0] = b3_load32(left + 4 * i);
        m[i + 8][0] = b3_load32(right + 4 * i);
    }
    bytes[0] = B3_BLOCK;
    flags[0] = B3_PARENT | root;
    b3_compress(cv, (const b3_lanes *)m, bytes, counter, flags, live);
    b3_store(out, (const b3_lanes *)cv, 0);
}

/* The chaining value of the subtree over chunks first..first+count of an input whose chunk chaining
 * values are `cvs`: a chunk, or a parent over a left subtree of the largest power-of-two number of
 * chunks that leaves the right one non-empty (spec 2.5). */
static void b3_subtree(const unsigned char (*cvs)[B3_OUT], size_t first, size_t count, uint32_t root,
                       unsigned char out[B3_OUT]) {
    if (count == 1) {
        memcpy(out, cvs[first], B3_OUT);
        return;
    }
    size_t left = 1;
    while (2 * left < count)
        left *= 2;
    unsigned char l[B3_OUT], r[B3_OUT];
    b3_subtree(cvs, first, left, 0, l);
    b3_subtree(cvs, first + left, count - left, 0, r);
    b3_parent(l, r, root, out);
}

/* BLAKE3 of an input longer than one chunk, whose `count` chunk chaining values go in `cvs`: its chunks
 * hashed B3_LANES at a time, then the tree over them. */
static void b3_long(const unsigned char *in, size_t len, unsigned char (*cvs)[B3_OUT], size_t count,
                    unsigned char out[B3_OUT]) {
    for (size_t c = 0; c < count; c += B3_LANES) {
        const unsigned char *at[B3_LANES];
        size_t bytes[B3_LANES];
        uint64_t counter[B3_LANES] = {0};
        int n = 0;
        for (; n < B3_LANES && c + n < count; n++) {
            at[n] = in + (c + n) * B3_CHUNK;
            bytes[n] = len - (c + n) * B3_CHUNK < B3_CHUNK ? len - (c + n) * B3_CHUNK : B3_CHUNK;
            counter[n] = c + n;
        }
        b3_lanes cv[8];
        b3_chunks(at, bytes, counter, n, 0, cv);
        for (int l = 0; l < n; l++)
            b3_store(cvs[c + l], (const b3_lanes *)cv, l);
    }
    b3_subtree((const unsigned char (*)[B3_OUT])cvs, 0, count, B3_ROOT, out);
}

/* The digests of up to B3_LANES inputs that are each one chunk (at most B3_CHUNK bytes), side by side. */
static void b3_hash_short(const unsigned char *const in[], const size_t len[], int n,
                          unsigned char out[][B3_OUT]) {
    b3_lanes cv[8];
    uint64_t counter[B3_LANES] = {0};
    b3_chunks(in, len, counter, n, B3_ROOT, cv);
    for (int l = 0; l < n; l++)
        b3_store(out[l], (const b3_lanes *)cv, l);
}

#endif
