/* The interleaved X16 layout (tn-cpu.h): made from, and read back into, the
 * file's row layout.
 *
 * For a group of 16 rows and a pair of 32-value blocks (k = 2kk, 2kk + 1):
 *   64 bytes      f16 scales d: 16 rows of block 2kk, then 16 of block 2kk + 1
 *   64 bytes      Q4_1, Q5_1 only: the f16 mins m, arranged as d
 *   2 x QB bytes  block 2kk, then 2kk + 1:
 *     Q5_0, Q5_1: 64 bytes of fifth bits first, as eight 64-bit masks: bit
 *                 4i + t of mask j is the fifth bit of value 4j + t of row
 *                 i, i.e. of byte t of lane i of quant register j below (so
 *                 one masked byte add puts it in place)
 *     then 64-byte registers whose 4-byte lane i belongs to row i:
 *     Q4_0, Q4_1, Q5_0, Q5_1: register p = 0..3, lane i = qs[4p .. 4p + 3]
 *                      of row i (low nibbles: values 4p.., high: 16 + 4p..)
 *     Q8_0 (QB = 512): register j = 0..7, lane i = qs[4j .. 4j + 3] of row i,
 *                      stored + 128 (as unsigned bytes) for VNNI
 * MXFP4 keeps its one-byte E8M0 scales: a 32-byte header, the 16 rows' e of
 * block 2kk, then of 2kk + 1, then Q4_0's registers (IQ4_NL's nibble
 * order). Its chunk (544 bytes) is then exactly the file's bytes, and its
 * registers sit 32 bytes off a cache line in every other chunk (the kernel
 * loads them unaligned).
 * Missing rows (past the last) and a missing odd block are zero. Every
 * block keeps its bytes (QB + the header's share is the file's block size
 * times 16): the layout costs no memory bandwidth.
 *
 * K-quants (Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS): one chunk per 256-value
 * super-block and group of 16 rows, again the file's bytes times 16,
 * 64-byte registers whose 4-byte lane i belongs to row i:
 *   Q4_K (2304 bytes): 32 bytes f16 d (16 rows), 32 bytes f16 dmin, then
 *     three registers w = 0..2, lane i = scales[4w .. 4w + 3] of row i (the
 *     packed 6-bit scales and mins, unpacked by the kernel), then for each
 *     64-value group g = 0..3 eight registers p, lane i = qs[32g + 4p ..
 *     32g + 4p + 3] of row i: low nibbles are values 4p.. of sub-block 2g,
 *     high nibbles those of sub-block 2g + 1.
 *   Q5_K (2816 bytes): as Q4_K, with 512 bytes of fifth bits between the
 *     scales and the quants: for sub-block j and quant register p (as
 *     Q4_K's, low or high nibbles) one 64-bit mask at 64j + 8p whose bit
 *     4i + t is the fifth bit of byte t of lane i (as Q5_0's).
 *   Q6_K (3360 bytes): 32 bytes f16 d, 256 bytes of int8 scales (sub-block
 *     k of row i at 16k + i), then per 16-value sub-block k three registers
 *     R0, R1, R2; byte u of lane i of Rt holds, for row i and the 6-bit
 *     quants q of values v = 16k + 4t + u (t = 0..3), q(t) in its bits
 *     0..5 and bits 2t, 2t + 1 of q(3) in its bits 6, 7: three quants come
 *     out with one AND each, the fourth from the three top bit pairs.
 *   Q2_K (1344 bytes): 32 bytes f16 d, 32 bytes f16 dmin, 256 bytes of
 *     scale bytes as in the file (sub-block k of row i at 16k + i: low
 *     nibble the scale, high the min), then per 16-value sub-block k one
 *     register whose byte u of lane i holds, at bits 2t, 2t + 1 (t =
 *     0..3), the 2-bit quant of value 16k + 4t + u of row i.
 *   Q3_K (1760 bytes): first the 16 registers of low 2 bits as Q2_K's,
 *     then 512 bytes of third bits: for sub-block k and t = 0..3 one
 *     64-bit mask at 1024 + 32k + 8t whose bit 4i + u is the hmask bit of
 *     value 16k + 4t + u of row i (as Q5_0's masks), then three registers
 *     w = 0..2 with lane i = scales[4w .. 4w + 3] of row i (packed, as
 *     Q4_K's), then 32 bytes f16 d. (Quants first: each chunk is 27.5
 *     cache lines, so every other one starts aligned, with its registers.)
 *   IQ4_XS (2176 bytes): 32 bytes f16 d, 32 bytes of u16 scales_h, one
 *     register with lane i = scales_l[0..3] of row i, then per 32-value
 *     sub-block j four registers p, lane i = qs[16j + 4p .. 16j + 4p + 3]
 *     of row i: low nibbles values 4p.., high 16 + 4p.. of the sub-block. */
#include "tn-cpu-internal.h"

#include "tn-quant.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* What a file block of each type holds, in order: `fields` f16 (d, then m),
 * the 32 fifth bits (qh) when `qh`, then `words` 4-byte words of quants. */
typedef struct {
    int fields, words;
    bool qh, xor80;
    size_t bb;  /* file block bytes */
    bool e8m0;  /* MXFP4: one scale byte first, instead of f16 fields */
} x16_fmt;

static bool x16_format(uint32_t type, x16_fmt *f) {
    switch (type) {
    case TN_TYPE_Q4_0:
        *f = (x16_fmt){1, 4, false, false, sizeof(tn_block_q4_0), false};
        return true;
    case TN_TYPE_IQ4_NL: /* Q4_0's block: the nibbles index a table instead */
        *f = (x16_fmt){1, 4, false, false, sizeof(tn_block_iq4_nl), false};
        return true;
    case TN_TYPE_Q8_0:
        *f = (x16_fmt){1, 8, false, true, sizeof(tn_block_q8_0), false};
        return true;
    case TN_TYPE_Q4_1:
        *f = (x16_fmt){2, 4, false, false, sizeof(tn_block_q4_1), false};
        return true;
    case TN_TYPE_Q5_0:
        *f = (x16_fmt){1, 4, true, false, sizeof(tn_block_q5_0), false};
        return true;
    case TN_TYPE_Q5_1:
        *f = (x16_fmt){2, 4, true, false, sizeof(tn_block_q5_1), false};
        return true;
    case TN_TYPE_MXFP4:
        *f = (x16_fmt){0, 4, false, false, sizeof(tn_block_mxfp4), true};
        return true;
    default:
        return false;
    }
}

/* K-quant chunk bytes per super-block and group of 16 rows (0: no such
 * layout). */
static size_t kq_chunk_bytes(uint32_t type) {
    switch (type) {
    case TN_TYPE_Q4_K:
        return 16 * sizeof(tn_block_q4_K);
    case TN_TYPE_Q5_K:
        return 16 * sizeof(tn_block_q5_K);
    case TN_TYPE_Q6_K:
        return 16 * sizeof(tn_block_q6_K);
    case TN_TYPE_Q2_K:
        return 16 * sizeof(tn_block_q2_K);
    case TN_TYPE_Q3_K:
        return 16 * sizeof(tn_block_q3_K);
    case TN_TYPE_IQ4_XS:
        return 16 * sizeof(tn_block_iq4_xs);
    default:
        return 0;
    }
}

size_t tn_x16_kq_chunk_bytes(uint32_t type) { return kq_chunk_bytes(type); }

size_t tn_x16_quant_bytes(uint32_t type) {
    x16_fmt f;
    return x16_format(type, &f) ? (f.qh ? 64 : 0) + 64 * (size_t)f.words : 0;
}

size_t tn_x16_header_bytes(uint32_t type) {
    x16_fmt f;
    return x16_format(type, &f) ? (f.e8m0 ? 32 : 64 * (size_t)f.fields) : 0;
}

size_t tn_x16_group_bytes(uint32_t type, int64_t cols) {
    if (kq_chunk_bytes(type))
        return (size_t)(cols / 256) * kq_chunk_bytes(type);
    size_t qb = tn_x16_quant_bytes(type);
    int64_t npairs = (cols / 32 + 1) / 2;
    return qb ? (size_t)npairs * (tn_x16_header_bytes(type) + 2 * qb) : 0;
}

static bool x16_possible(const tn_weight *w) {
    return w && w->data && w->layout == TN_LAYOUT_ROWS && w->rows > 0 && w->cols > 0 &&
           w->cols % 32 == 0 && tn_x16_group_bytes(w->type, w->cols) &&
           w->row_bytes >= tn_type_row_bytes(w->type, (uint64_t)w->cols);
}

static bool repack_enabled(void) {
    const char *e = getenv("TERN_REPACK");
    return !(e && !strcmp(e, "0"));
}

size_t tn_weight_repack_size(const tn_weight *w) {
    if (!x16_possible(w) || tn_isa_best() < TN_ISA_AVX512 || !repack_enabled())
        return 0;
    return (size_t)((w->rows + 15) / 16) * tn_x16_group_bytes(w->type, w->cols);
}

/* The 6-bit quant of value v (0..255) of a Q6_K block, and its inverse
 * (into a zeroed block). */
static int q6k_get(const uint8_t *blk, int v) {
    const uint8_t *ql = blk + 64 * (v / 128), *qh = blk + 128 + 32 * (v / 128);
    const int l = v % 128, q = l % 32, part = l / 32; /* part: bits 2*part of qh */
    const int lo = part & 1 ? ql[q + 32] : ql[q];
    return ((part & 2 ? lo >> 4 : lo) & 15) | ((qh[q] >> (2 * part)) & 3) << 4;
}

static void q6k_set(uint8_t *blk, int v, int qv) {
    uint8_t *ql = blk + 64 * (v / 128), *qh = blk + 128 + 32 * (v / 128);
    const int l = v % 128, q = l % 32, part = l / 32;
    uint8_t *lo = part & 1 ? &ql[q + 32] : &ql[q];
    *lo |= (uint8_t)((qv & 15) << (part & 2 ? 4 : 0));
    qh[q] |= (uint8_t)(((qv >> 4) & 3) << (2 * part));
}

/* The 2-bit quant of value v (0..255) in the qs[64] of a Q2_K or Q3_K
 * block, and its inverse (into zeroed bytes): bits 2j of qs[32h + l] for
 * v = 128h + 32j + l. */
static int q2k_get(const uint8_t *qs, int v) {
    return (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
}

static void q2k_set(uint8_t *qs, int v, int q) {
    qs[32 * (v / 128) + v % 32] |= (uint8_t)((q & 3) << (2 * ((v % 128) / 32)));
}

/* Q2_K, Q3_K and IQ4_XS (the layouts at the top of this file): super-block
 * s of row i (file bytes blk) into or out of its chunk c. */
static void kq2_block_x16(uint32_t type, uint8_t *c, uint8_t *blk, int i, bool to_x16) {
#define KQ2_MOVE(cp, bp, n) (to_x16 ? memcpy((cp), (bp), (n)) : memcpy((bp), (cp), (n)))
    if (type == TN_TYPE_IQ4_XS) {
        KQ2_MOVE(c + 2 * i, blk, 2);          /* d */
        KQ2_MOVE(c + 32 + 2 * i, blk + 2, 2); /* scales_h */
        KQ2_MOVE(c + 64 + 4 * i, blk + 4, 4); /* scales_l */
        for (int j = 0; j < 8; j++)
            for (int p = 0; p < 4; p++)
                KQ2_MOVE(c + 128 + 256 * j + 64 * p + 4 * i, blk + 8 + 16 * j + 4 * p, 4);
        return;
    }
    const bool q3 = type == TN_TYPE_Q3_K;
    uint8_t *qs = blk + (q3 ? 32 : 16), *hmask = blk;
    uint8_t *regs = c + (q3 ? 0 : 320);
    if (q3) {
        KQ2_MOVE(c + 1728 + 2 * i, blk + 108, 2);
        for (int w = 0; w < 3; w++)
            KQ2_MOVE(c + 1536 + 64 * w + 4 * i, blk + 96 + 4 * w, 4);
    } else {
        KQ2_MOVE(c + 2 * i, blk + 80, 2);       /* d */
        KQ2_MOVE(c + 32 + 2 * i, blk + 82, 2);  /* dmin */
        for (int k = 0; k < 16; k++)
            KQ2_MOVE(c + 64 + 16 * k + i, blk + k, 1);
    }
#undef KQ2_MOVE
    if (!to_x16) {
        memset(qs, 0, 64);
        if (q3)
            memset(hmask, 0, 32);
    }
    for (int k = 0; k < 16; k++)
        for (int t = 0; t < 4; t++)
            for (int u = 0; u < 4; u++) {
                const int v = 16 * k + 4 * t + u;
                uint8_t *r = regs + 64 * k + 4 * i + u;
                if (to_x16)
                    *r |= (uint8_t)(q2k_get(qs, v) << (2 * t));
                else
                    q2k_set(qs, v, *r >> (2 * t));
                if (!q3)
                    continue;
                /* The hmask bit of value v: bit 4h + j of hmask[l]; in the
                 * chunk, bit 4(i & 1) + u of byte i / 2 of mask (k, t). */
                const int l = v % 32, hbit = 4 * (v / 128) + (v % 128) / 32;
                uint8_t *mb = c + 1024 + 32 * k + 8 * t + i / 2;
                const int mbit = 4 * (i & 1) + u;
                if (to_x16)
                    *mb |= (uint8_t)(((hmask[l] >> hbit) & 1) << mbit);
                else
                    hmask[l] |= (uint8_t)(((*mb >> mbit) & 1) << hbit);
            }
}

/* Super-block s of row i (file bytes blk) into or out of its chunk c. */
static void kq_block_x16(uint32_t type, uint8_t *c, uint8_t *blk, int i, bool to_x16) {
    if (type == TN_TYPE_Q2_K || type == TN_TYPE_Q3_K || type == TN_TYPE_IQ4_XS) {
        kq2_block_x16(type, c, blk, i, to_x16);
        return;
    }
#define KQ_MOVE(cp, bp, n) (to_x16 ? memcpy((cp), (bp), (n)) : memcpy((bp), (cp), (n)))
    if (type == TN_TYPE_Q4_K || type == TN_TYPE_Q5_K) {
        const bool q5 = type == TN_TYPE_Q5_K;
        KQ_MOVE(c + 2 * i, blk, 2);           /* d */
        KQ_MOVE(c + 32 + 2 * i, blk + 2, 2);  /* dmin */
        for (int w = 0; w < 3; w++)
            KQ_MOVE(c + 64 + 64 * w + 4 * i, blk + 4 + 4 * w, 4);
        uint8_t *cq = c + (q5 ? 768 : 256);
        const uint8_t *bq = blk + (q5 ? 48 : 16);
        for (int g = 0; g < 4; g++)
            for (int p = 0; p < 8; p++)
                KQ_MOVE(cq + 512 * g + 64 * p + 4 * i, (uint8_t *)(uintptr_t)bq + 32 * g + 4 * p, 4);
        if (!q5)
            return;
        /* Fifth bits: bit j of qh[l] is that of value l of sub-block j. */
        uint8_t *qh = blk + 16;
        if (!to_x16)
            memset(qh, 0, 32);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++) {
                uint8_t *mb = c + 256 + 64 * j + 8 * (l / 4) + i / 2;
                const int bit = 4 * (i & 1) + l % 4;
                if (to_x16)
                    *mb |= (uint8_t)(((qh[l] >> j) & 1) << bit);
                else
                    qh[l] |= (uint8_t)(((*mb >> bit) & 1) << j);
            }
        return;
    }
    /* Q6_K */
    KQ_MOVE(c + 2 * i, blk + 208, 2);
    for (int k = 0; k < 16; k++)
        KQ_MOVE(c + 32 + 16 * k + i, blk + 192 + k, 1);
#undef KQ_MOVE
    if (!to_x16)
        memset(blk, 0, 192);
    for (int k = 0; k < 16; k++) {
        uint8_t *r = c + 288 + 192 * k + 4 * i;
        for (int u = 0; u < 4; u++) {
            if (to_x16) {
                int q[4];
                for (int t = 0; t < 4; t++)
                    q[t] = q6k_get(blk, 16 * k + 4 * t + u);
                for (int t = 0; t < 3; t++)
                    r[64 * t + u] = (uint8_t)(q[t] | ((q[3] >> (2 * t)) & 3) << 6);
            } else {
                int q3 = 0;
                for (int t = 0; t < 3; t++) {
                    q6k_set(blk, 16 * k + 4 * t + u, r[64 * t + u] & 63);
                    q3 |= (r[64 * t + u] >> 6) << (2 * t);
                }
                q6k_set(blk, 16 * k + 4 * 3 + u, q3);
            }
        }
    }
}

static void kq_repack(const tn_weight *w, uint8_t *dst, int64_t r0, int64_t r1) {
    const size_t cb = kq_chunk_bytes(w->type), bb = cb / 16;
    const int64_t nsb = w->cols / 256;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        uint8_t *g = dst + (size_t)(r / 16) * (size_t)nsb * cb;
        for (int64_t s = 0; s < nsb; s++)
            kq_block_x16(w->type, g + (size_t)s * cb, (uint8_t *)(uintptr_t)(row + (size_t)s * bb),
                         (int)(r % 16), true);
    }
}

/* Rows [r0, r1) of w (r0 a multiple of 16, r1 one too or w->rows) into
 * their groups of dst, the whole matrix's X16 storage: a group holds 16
 * rows, so pieces split there write disjoint bytes, and the pieces of a
 * matrix, in any number, write what one call over all its rows does.
 * False: a type without an X16 layout. */
static bool repack_rows(const tn_weight *w, uint8_t *dst, int64_t r0, int64_t r1) {
    const size_t group = tn_x16_group_bytes(w->type, w->cols);
    x16_fmt f = {0};
    if (!kq_chunk_bytes(w->type) && !x16_format(w->type, &f))
        return false;
    memset(dst + (size_t)(r0 / 16) * group, 0, (size_t)((r1 - r0 + 15) / 16) * group);
    if (kq_chunk_bytes(w->type)) {
        kq_repack(w, dst, r0, r1);
        return true;
    }
    const size_t qb = tn_x16_quant_bytes(w->type), hdr = tn_x16_header_bytes(w->type);
    const size_t chunk = hdr + 2 * qb, qoff = 2 * (size_t)f.fields + (f.qh ? 4 : 0) + f.e8m0;
    const int64_t nblk = w->cols / 32;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        uint8_t *g = (uint8_t *)dst + (size_t)(r / 16) * group;
        const int i = (int)(r % 16);
        for (int64_t k = 0; k < nblk; k++) {
            const uint8_t *blk = row + (size_t)k * f.bb;
            uint8_t *c = g + (size_t)(k / 2) * chunk;
            const int h = (int)(k % 2);
            for (int fi = 0; fi < f.fields; fi++)
                memcpy(c + 64 * fi + 32 * h + 2 * i, blk + 2 * fi, 2);
            if (f.e8m0)
                c[16 * h + i] = blk[0];
            uint8_t *q = c + hdr + (size_t)h * qb;
            if (f.qh) {
                uint32_t qh;
                memcpy(&qh, blk + 2 * f.fields, 4);
                for (int j = 0; j < 8; j++)
                    for (int t = 0; t < 4; t++)
                        if (qh >> (4 * j + t) & 1)
                            q[8 * j + i / 2] |= (uint8_t)(1u << (4 * (i & 1) + t));
                q += 64;
            }
            for (int reg = 0; reg < f.words; reg++)
                for (int t = 0; t < 4; t++) {
                    uint8_t v = blk[qoff + 4 * reg + t];
                    q[64 * reg + 4 * i + t] = f.xor80 ? (uint8_t)(v ^ 0x80) : v;
                }
        }
    }
    return true;
}

int tn_weight_repack(const tn_weight *w, void *dst, size_t size, tn_weight *out) {
    if (!x16_possible(w))
        return TN_ERR_UNSUPPORTED;
    const size_t need = (size_t)((w->rows + 15) / 16) * tn_x16_group_bytes(w->type, w->cols);
    if (!dst || !out || size < need || ((uintptr_t)dst & 63))
        return TN_ERR_INVALID;
    if (!repack_rows(w, dst, 0, w->rows))
        return TN_ERR_UNSUPPORTED;
    *out = *w;
    out->data = dst;
    out->layout = TN_LAYOUT_X16;
    return TN_OK;
}

const uint8_t *tn_weight_row_raw(const tn_weight *w, int64_t r, uint8_t *tmp) {
    if (w->layout == TN_LAYOUT_ROWS)
        return (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    return tn_weight_row_raw_part(w, r, 0, w->cols / tn_weight_row_block_cols(w), tmp);
}

int64_t tn_weight_row_block_cols(const tn_weight *w) {
    return kq_chunk_bytes(w->type) ? 256 : 32;
}

const uint8_t *tn_weight_row_raw_part(const tn_weight *w, int64_t r, int64_t b0, int64_t nb,
                                      uint8_t *tmp) {
    if (kq_chunk_bytes(w->type)) {
        const size_t cb = kq_chunk_bytes(w->type), bb = cb / 16;
        const int64_t nsb = w->cols / 256;
        const uint8_t *g = (const uint8_t *)w->data + (size_t)(r / 16) * (size_t)nsb * cb;
        for (int64_t s = b0; s < b0 + nb; s++)
            kq_block_x16(w->type, (uint8_t *)(uintptr_t)(g + (size_t)s * cb),
                         tmp + (size_t)(s - b0) * bb, (int)(r % 16), false);
        return tmp;
    }
    x16_fmt f = {0};
    x16_format(w->type, &f); /* check_weight let only X16 types through */
    const size_t qb = tn_x16_quant_bytes(w->type), hdr = tn_x16_header_bytes(w->type);
    const size_t chunk = hdr + 2 * qb, qoff = 2 * (size_t)f.fields + (f.qh ? 4 : 0) + f.e8m0;
    const uint8_t *g = (const uint8_t *)w->data + (size_t)(r / 16) * tn_x16_group_bytes(w->type, w->cols);
    const int i = (int)(r % 16);
    for (int64_t k = b0; k < b0 + nb; k++) {
        uint8_t *blk = tmp + (size_t)(k - b0) * f.bb;
        const uint8_t *c = g + (size_t)(k / 2) * chunk;
        const int h = (int)(k % 2);
        for (int fi = 0; fi < f.fields; fi++)
            memcpy(blk + 2 * fi, c + 64 * fi + 32 * h + 2 * i, 2);
        if (f.e8m0)
            blk[0] = c[16 * h + i];
        const uint8_t *q = c + hdr + (size_t)h * qb;
        if (f.qh) {
            uint32_t qh = 0;
            for (int j = 0; j < 8; j++)
                for (int t = 0; t < 4; t++)
                    if (q[8 * j + i / 2] >> (4 * (i & 1) + t) & 1)
                        qh |= 1u << (4 * j + t);
            memcpy(blk + 2 * f.fields, &qh, 4);
            q += 64;
        }
        for (int reg = 0; reg < f.words; reg++)
            for (int t = 0; t < 4; t++) {
                uint8_t v = q[64 * reg + 4 * i + t];
                blk[qoff + 4 * reg + t] = f.xor80 ? (uint8_t)(v ^ 0x80) : v;
            }
    }
    return tmp;
}

/* Drops the pages wholly inside [p, p + n) from this process: they are
 * file-backed and read-only, so a later read would just fault them in. */
static void release_pages(const void *p, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~((uintptr_t)ps - 1);
    if (e > a)
        madvise((void *)a, e - a, MADV_DONTNEED);
}

typedef struct alias_key {
    const tn_weight *w;
    int i;
} alias_key;

/* By data, then type, layout and shape, then position. */
static int alias_cmp(const void *pa, const void *pb) {
    const alias_key *a = pa, *b = pb;
    const tn_weight *x = a->w, *y = b->w;
    if (x->data != y->data)
        return (uintptr_t)x->data < (uintptr_t)y->data ? -1 : 1;
    if (x->type != y->type)
        return x->type < y->type ? -1 : 1;
    if (x->layout != y->layout)
        return x->layout < y->layout ? -1 : 1;
    if (x->rows != y->rows)
        return x->rows < y->rows ? -1 : 1;
    if (x->cols != y->cols)
        return x->cols < y->cols ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static bool same_matrix(const tn_weight *x, const tn_weight *y) {
    return x->data == y->data && x->type == y->type && x->layout == y->layout &&
           x->rows == y->rows && x->cols == y->cols;
}

bool tn_weights_aliases(tn_weight *const *ws, int n, int *alias, bool *mixed) {
    if (mixed)
        *mixed = false;
    if (n <= 0)
        return true;
    alias_key *k = malloc((size_t)n * sizeof *k);
    if (!k)
        return false;
    for (int i = 0; i < n; i++)
        k[i] = (alias_key){.w = ws[i], .i = i};
    qsort(k, (size_t)n, sizeof *k, alias_cmp);
    for (int s = 0; s < n; s++) {
        const bool same = s > 0 && same_matrix(k[s - 1].w, k[s].w);
        alias[k[s].i] = same ? alias[k[s - 1].i] : k[s].i;
        if (mixed && s > 0 && !same && k[s - 1].w->data == k[s].w->data)
            *mixed = true;
    }
    free(k);
    return true;
}

size_t tn_weights_repack_bytes(tn_weight *const *ws, int n, const int *alias) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (alias[i] == i)
            total += (tn_weight_repack_size(ws[i]) + 63) / 64 * 64;
    return total;
}

/* The rows of w in a piece of at most piece_bytes of them (0: all), in
 * whole groups of 16, one group at least. */
static int64_t piece_rows(const tn_weight *w, size_t piece_bytes) {
    if (piece_bytes == 0 || w->row_bytes == 0)
        return w->rows;
    const size_t rows = piece_bytes / w->row_bytes / 16 * 16;
    return rows < 16 ? 16 : rows >= (size_t)w->rows ? w->rows : (int64_t)rows;
}

void tn_weights_repack_into(tn_weight *const *ws, int n, const int *alias,
                            bool release_originals, uint8_t *buf, size_t piece_bytes,
                            void (*before_each)(void *user, int i, int64_t rows, size_t final),
                            void *user) {
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        tn_weight *w = ws[i];
        size_t size = alias[i] == i ? tn_weight_repack_size(w) : 0;
        if (!size) {
            if (before_each)
                before_each(user, i, w->rows, off);
            /* An alias: its first holder is repacked (or left as it was) already. */
            if (alias[i] != i && w->layout == TN_LAYOUT_ROWS &&
                ws[alias[i]]->layout == TN_LAYOUT_X16)
                *w = *ws[alias[i]];
            continue;
        }
        const void *orig = w->data;
        size_t orig_bytes = w->row_bytes * (size_t)w->rows;
        const int64_t step = piece_rows(w, piece_bytes);
        const size_t group = tn_x16_group_bytes(w->type, w->cols);
        bool ok = true;
        for (int64_t r0 = 0; r0 < w->rows; r0 += step) {
            const int64_t r1 = w->rows - r0 < step ? w->rows : r0 + step;
            if (before_each)
                before_each(user, i, r1 - r0, off + (size_t)(r0 / 16) * group);
            /* A type without a layout fails on its first piece: the rest
             * are still announced, so that the caller's count of rows is
             * whole. */
            ok = ok && repack_rows(w, buf + off, r0, r1);
        }
        if (!ok)
            continue;
        tn_weight out = *w;
        out.data = buf + off;
        out.layout = TN_LAYOUT_X16;
        *w = out;
        if (release_originals)
            release_pages(orig, orig_bytes);
        off += (size + 63) / 64 * 64;
    }
}

/* A decode step streams every byte of this buffer once: in 4 KiB pages
 * that is a TLB miss, and a restart of the hardware prefetcher, every
 * 4 KiB. 2 MiB pages (transparent huge pages, asked for before the first
 * write faults the pages in) measured +16-26 % decode speed on the 1B Q4_0
 * model (docs/PERFORMANCE.md). Small models keep 64-byte alignment: a huge
 * page would cost them up to 2 MiB of RSS. */
void *tn_weights_storage_alloc(size_t total) {
    const char *thp = getenv("TERN_THP");
    const size_t huge_page = (size_t)2 << 20;
    const bool huge = total >= TN_WEIGHTS_HUGE_MIN && !(thp && *thp == '0');
    const size_t alloc = huge ? (total + huge_page - 1) / huge_page * huge_page
                              : (total + 63) / 64 * 64;
    void *buf = aligned_alloc(huge ? huge_page : 64, alloc ? alloc : 64);
#ifdef MADV_HUGEPAGE
    if (buf && huge)
        madvise(buf, alloc, MADV_HUGEPAGE); /* a hint: without THP it changes nothing */
#endif
    return buf;
}

int tn_weights_repack(tn_weight *const *ws, int n, bool release_originals, void **storage,
                      size_t *bytes) {
    if (!storage || n < 0 || (n > 0 && !ws))
        return TN_ERR_INVALID;
    *storage = NULL;
    if (bytes)
        *bytes = 0;
    int *alias = malloc((size_t)(n > 0 ? n : 1) * sizeof *alias);
    if (!alias || !tn_weights_aliases(ws, n, alias, NULL)) {
        free(alias);
        return TN_ERR_NOMEM;
    }
    const size_t total = tn_weights_repack_bytes(ws, n, alias);
    if (total == 0) {
        free(alias);
        return TN_OK;
    }
    uint8_t *buf = tn_weights_storage_alloc(total);
    if (!buf) {
        free(alias);
        return TN_ERR_NOMEM;
    }
    tn_weights_repack_into(ws, n, alias, release_originals, buf, 0, NULL, NULL);
    free(alias);
    *storage = buf;
    if (bytes)
        *bytes = total;
    return TN_OK;
}
