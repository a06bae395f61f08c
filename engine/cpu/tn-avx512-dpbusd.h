/* Helpers shared by the AVX-512 X16 kernels (kernels-avx512.c,
 * kernels-avx512-x16k.c): vpdpbusd with an embedded-broadcast activation
 * word, a broadcast word, and the K-quants' prefetch. Include only from
 * files compiled with the AVX-512 VNNI flags. */
#ifndef TN_AVX512_DPBUSD_H
#define TN_AVX512_DPBUSD_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "tern.h"

/* acc + w . (the 4 activation bytes at x in every lane), with those bytes
 * as vpdpbusd's embedded broadcast ({1to16}) memory operand: GCC does not
 * fold _mm512_set1_epi32 into vpdpbusd and issues a separate vpbroadcastd
 * per word. The Q6_K X16 kernel gained about 5 % from it at 16 activation
 * rows (docs/PERFORMANCE.md, "Q6_K in X16 (session 15)"); the same
 * instruction otherwise, so the same results. x needs no alignment. */
typedef int32_t tn_i32_alias __attribute__((may_alias));
static inline __attribute__((always_inline)) __m512i dpbusd_bcast(__m512i acc, __m512i w,
                                                                  const uint8_t *x) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const tn_i32_alias *)x));
    return acc;
}

/* Activation quants: v (x * 127 / max|x|) to int32, clamped to int8's
 * range. A NaN or infinite activation (finite but extreme weights overflow
 * to them) converts to INT32_MIN, whose sums over a block overflow in the
 * callers' block offsets (undefined behaviour) and disagree with the
 * saturated int8 stored; a finite v is within [-127, 127] already, so the
 * clamp changes nothing else. */
static inline __attribute__((always_inline)) __m512i cvt_q8_512(__m512 v) {
    return _mm512_max_epi32(_mm512_min_epi32(_mm512_cvtps_epi32(v), _mm512_set1_epi32(127)),
                            _mm512_set1_epi32(-128));
}

/* A 16-level table (IQ4_NL's or MXFP4's) + bias in every 128-bit lane,
 * for vpshufb on the nibbles. */
static inline __attribute__((always_inline)) __m512i levels_table512(const int8_t levels[16],
                                                                     int bias) {
    return _mm512_broadcast_i32x4(
        _mm_add_epi8(_mm_loadu_si128((const __m128i *)levels), _mm_set1_epi8((char)bias)));
}

/* The 4 bytes at p (any alignment) in every 32-bit lane. */
static inline __attribute__((always_inline)) __m512i bcast32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* sum over 8 of the int16 pairs in pairs[k] times the pair in bytes 4k..4k+3
 * of bp (broadcast): a quant offset's term, sum(sc * B), of a K-quant
 * super-block for one activation row (Q3_K, Q6_K). */
static inline __attribute__((always_inline)) __m512i pair_dot8(const __m512i pairs[8],
                                                             const uint8_t *bp) {
    __m512i bs = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        bs = _mm512_dpwssd_epi32(bs, pairs[k], bcast32(bp + 4 * k));
    return bs;
}

/* The X16 kernels' software prefetch, in the mode of their weight type
 * (tn_cpu_prefetch_mode): bytes [off, off + n) of the unit (a K-quant
 * super-block group, a Q4_0-family chunk; unit bytes each) NEAR units
 * ahead into L1 (T0), or FAR units ahead into L2 (T1), or nothing. No mode
 * is best everywhere: session 11's host streamed Q4_K at one row at 17 GB/s
 * without a prefetch and 27-28 with the group two ahead into L1; session
 * 17's host the other way round (Q4_K 17.4 -> 23.5, Q6_K 16.1 -> 25.2
 * without); session 18's, one thread, eight ahead into L2 against two into
 * L1: Q3_K 9-15 -> 21-24 GB/s at one row and 277 -> 310-316 GFLOP/s at 16;
 * session 19's, two threads, the other way: two ahead into L1 Q4_K 31-33 ->
 * 49-52 GB/s at one row and 416-485 -> 698-792 GFLOP/s at 16, Q6_K best with
 * none (docs/PERFORMANCE.md, "Three prefetch modes"). So each context
 * measures (engine/decode-tune.c). An address, not a pointer: past the last
 * unit it points beyond the weights, which a prefetch may do and C may
 * not. */
#define TN_X16_PREFETCH_NEAR 2
#define TN_X16_PREFETCH_FAR 8
/* The 4-bit chunks (Q4_0, IQ4_NL: 576 bytes, 16 rows x 2 blocks; MXFP4:
 * 544), near: six ahead (3.3-3.5 KB), not two. Decode steps alternated
 * with two and six in one process (so that the memory's minute-to-minute
 * swings fall on both), near forced: 11-13 % faster on E4B- and
 * Llama-1B-shaped Q4_0, 15 % on IQ4_NL, 6 % on a gpt-oss MXFP4; a 16-token
 * Q4_0 step 11 %. Four ahead was 4 % slower than six, eight and ten no
 * faster. Q8_0's 1088-byte chunks were 3.6 % slower at three than at two,
 * and the K-quants' groups (2.3-3.4 KB) gained nothing from three
 * (docs/PERFORMANCE.md, session 29). */
#define TN_X16_PREFETCH_NEAR_4BIT 6
static inline __attribute__((always_inline)) void x16_prefetch_ahead(const uint8_t *unit,
                                                                     size_t unit_bytes, size_t off,
                                                                     size_t n, tn_prefetch_mode mode,
                                                                     size_t near_units) {
    if (mode == TN_PREFETCH_NEAR) {
        const uintptr_t pf = (uintptr_t)unit + near_units * unit_bytes + off;
        for (size_t o = 0; o < n; o += 64)
            _mm_prefetch((const char *)(pf + o), _MM_HINT_T0);
    } else if (mode == TN_PREFETCH_FAR) {
        const uintptr_t pf = (uintptr_t)unit + TN_X16_PREFETCH_FAR * unit_bytes + off;
        for (size_t o = 0; o < n; o += 64)
            _mm_prefetch((const char *)(pf + o), _MM_HINT_T1);
    }
}

static inline __attribute__((always_inline)) void x16_prefetch(const uint8_t *unit, size_t unit_bytes,
                                                               size_t off, size_t n,
                                                               tn_prefetch_mode mode) {
    x16_prefetch_ahead(unit, unit_bytes, off, n, mode, TN_X16_PREFETCH_NEAR);
}

/* Inside a rows function's loop over its blocks, `for (u = 0; u < streams;
 * u++)`: stream u's group, activation row(s), accumulators and row count
 * (u = 1: the second group of tile_pair, against one row). */
#define TN_X16_STREAM(u)                                                   \
    const uint8_t *const g_u = (u) ? g2 : g, *const act_u = (u) ? act2 : act; \
    __m512 *const acc_u = (u) ? acc2 : acc;                                \
    const int nb_u = (u) ? 1 : nb

/* tile_pair (tn_mm_ops) of an X16 family: the 16-row groups of two row
 * ranges side by side, one activation row, through ROWS2 (a call of the
 * family's rows function reading two streams: groups ga and gb of ma's and
 * mb's weights wa and wb, va and vb rows valid, results to ya and yb); what
 * one range has past the other's end goes alone through TILE, and so do
 * two ranges of different widths. */
#define TN_X16_TILE_PAIR(NAME, TILE, ROWS2)                                                   \
    static void NAME(const tn_mm *ma, int64_t ra0, int64_t ra1, const tn_mm *mb, int64_t rb0, \
                     int64_t rb1) {                                                           \
        const tn_weight *wa = ma->w, *wb = mb->w;                                             \
        if (wa->cols != wb->cols || ma->act_row != mb->act_row) {                             \
            TILE(ma, NULL, ra0, ra1, 0, 1);                                                   \
            TILE(mb, NULL, rb0, rb1, 0, 1);                                                   \
            return;                                                                           \
        }                                                                                     \
        const size_t gba = tn_x16_group_bytes(wa->type, wa->cols);                            \
        const size_t gbb = tn_x16_group_bytes(wb->type, wb->cols);                            \
        int64_t a = ra0, b = rb0;                                                             \
        for (; a < ra1 && b < rb1; a += 16, b += 16) {                                       \
            const uint8_t *ga = (const uint8_t *)wa->data + (size_t)(a / 16) * gba;           \
            const uint8_t *gb = (const uint8_t *)wb->data + (size_t)(b / 16) * gbb;           \
            const int va = wa->rows - a < 16 ? (int)(wa->rows - a) : 16;                       \
            const int vb = wb->rows - b < 16 ? (int)(wb->rows - b) : 16;                       \
            float *ya = ma->y + a, *yb = mb->y + b;                                           \
            ROWS2;                                                                            \
        }                                                                                     \
        if (a < ra1)                                                                          \
            TILE(ma, NULL, a, ra1, 0, 1);                                                     \
        if (b < rb1)                                                                          \
            TILE(mb, NULL, b, rb1, 0, 1);                                                     \
    }

#endif
