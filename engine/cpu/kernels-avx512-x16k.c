/* AVX-512 VNNI kernels of the X16 layout (repack.c) for Q2_K, Q3_K and
 * IQ4_XS: prefill and verify batches reuse each weight register across
 * activation rows, as Q4_K's and Q6_K's X16 kernels do (kernels-avx512.c,
 * where the ideas are explained; the helpers both files use are in
 * tn-avx512-dpbusd.h). Compiled with the AVX-512 flags; reached only
 * through tn_mm_ops_avx512, after CPUID said yes.
 *
 * One weight register holds 4 bytes of each of 16 rows; vpdpbusd against 4
 * activation bytes broadcast gives the 16 rows' partial sums in 16 lanes.
 * A sub-block's sum S is multiplied by the rows' sub-block scales (vpmulld
 * for IQ4_XS; vpdpwssd on int16 words for Q2_K and Q3_K, where S fits one)
 * and added up in int32 over the super-block (exact, so the order inside a
 * super-block does not matter); then one float update per super-block and
 * row, in the same order for every pass size:
 *   Q2_K:   acc += isum * (d * dx); acc -= msum * (dmin * dx), msum the
 *           mins times the activation's per-16 sums (vpdpwssd on pairs)
 *   Q3_K:   quants 0..7 (low 2 bits + 4 * the hmask bit) with an offset of
 *           4: isum = sum(sc * S) - 4 * sum(sc * B), B a sub-block's
 *           activation sum.
 *           The offset's sum is taken once per super-block and row,
 *           vpdpwssd of int16 pairs of scales against pairs of B (as Q6_K's
 *           in kernels-avx512.c): starting each S at -4 B instead cost a
 *           broadcast and a live pointer per row and sub-block (6 % slower
 *           at 8 and 16 rows).
 *   IQ4_XS: the levels looked up (vpshufb) + 128, unsigned; S starts at
 *           -128 * (the sub-block's activation sum). (Taking that out of
 *           the loop as for Q3_K measured 9 % slower here.)
 *           acc += isum * (d * dx) for both.
 *
 * Activations, per row: qs[cols] int8 in row order with one scale per 256
 * values (as the other K-quants' X16 kernels), dx[cols / 256] f32, then 16
 * int32 words per super-block, int16 pairs of activation sums B: Q2_K: 8
 * (per-16 sums 2p, 2p + 1); Q3_K: 8 (per-16 sums 4m + u, 4m + u + 2 in word
 * 2m + u, the order of its scale pairs); IQ4_XS: -128 * the 8 per-32 sums. */
#include "tn-cpu-internal.h"

#include "tn-quant.h"
#include "tn-avx512-dpbusd.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* Activation rows per pass: a pass of nb rows holds nb int32 and nb float
 * accumulators (the kernels below are written for at most 8, as Q4_K's). */
#ifndef KB2
#define KB2 8
#endif

enum { K2_Q2K, K2_Q3K, K2_IQ4XS };

static size_t act_x16k2_bytes(int64_t cols) { return (size_t)cols + 68 * (size_t)(cols / 256); }

static void convert_x16k2(const float *x, void *dst, int64_t cols, int kind) {
    int8_t *qs = dst;
    const int64_t nsb = cols / 256;
    float *dx = (float *)(qs + cols);
    int32_t *extra = (int32_t *)(dx + nsb);
    for (int64_t s = 0; s < nsb; s++, x += 256) {
        __m512 m = _mm512_setzero_ps();
        for (int i = 0; i < 256; i += 16)
            m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
        const float amax = _mm512_reduce_max_ps(m);
        dx[s] = amax / 127.0f;
        const __m512 vid = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        int32_t sum16[16];
        for (int i = 0; i < 16; i++) {
            __m512i q = cvt_q8_512(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * i), vid));
            sum16[i] = _mm512_reduce_add_epi32(q);
            _mm_storeu_si128((__m128i *)(qs + 256 * s + 16 * i), _mm512_cvtsepi32_epi8(q));
        }
        int32_t *e = extra + 16 * s;
        memset(e, 0, 16 * sizeof *e);
        for (int k = 0; k < 8; k++) {
            int32_t lo = sum16[2 * k], hi = sum16[2 * k + 1]; /* Q2_K */
            if (kind == K2_Q3K) {
                lo = sum16[4 * (k / 2) + k % 2];
                hi = sum16[4 * (k / 2) + k % 2 + 2];
            } else if (kind == K2_IQ4XS) {
                e[k] = -128 * (sum16[2 * k] + sum16[2 * k + 1]);
                continue;
            }
            e[k] = (int32_t)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16);
        }
    }
}

static void convert_x16_q2k(const float *x, void *dst, int64_t cols) {
    convert_x16k2(x, dst, cols, K2_Q2K);
}
static void convert_x16_q3k(const float *x, void *dst, int64_t cols) {
    convert_x16k2(x, dst, cols, K2_Q3K);
}
static void convert_x16_iq4xs(const float *x, void *dst, int64_t cols) {
    convert_x16k2(x, dst, cols, K2_IQ4XS);
}

/* The four quant registers of one 16-value sub-block from its 2-bit
 * register: byte u of lane i of wq[t] = the quant of value 16k + 4t + u. */
INLINE void q2_regs(__m512i r, __m512i wq[4]) {
    const __m512i m3 = _mm512_set1_epi8(3);
    wq[0] = _mm512_and_si512(r, m3);
    wq[1] = _mm512_and_si512(_mm512_srli_epi16(r, 2), m3);
    wq[2] = _mm512_and_si512(_mm512_srli_epi16(r, 4), m3);
    wq[3] = _mm512_and_si512(_mm512_srli_epi16(r, 6), m3);
}

/* S of one 16-value sub-block for one activation row: 4 vpdpbusd. */
INLINE __m512i dot16(__m512i start, const __m512i wq[4], const uint8_t *x) {
    __m512i t = start;
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++)
        t = dpbusd_bcast(t, wq[u], x + 4 * u);
    return t;
}

/* Q2_K. Per 16-value sub-block k, S (at most 16 * 3 * 127 in magnitude)
 * fits the low int16 word of its lane, so one vpdpwssd against the rows'
 * scales as int32 lanes whose high word is 0 adds S * sc to the
 * super-block's int32 sum: the same integer as a vpmulld and an add, in
 * one instruction. (Session 13: the vpshufb lookup of scaled quants this
 * replaces, and the vpmulld form before it, spent about twice the
 * instructions per weight byte, which at one activation row kept Q2_K
 * below the memory's rate.) The scale bytes of sub-blocks 2p and 2p + 1
 * are widened once for both the scales (low nibbles) and the mins (high
 * nibbles, as int16 pairs for the vpdpwssd against the activation's
 * per-16 sums). */
INLINE void rows_x16_q2k(const uint8_t *g, const uint8_t *g2, int streams,
                         int64_t cols, const uint8_t *act, const uint8_t *act2, size_t as, int nb,
                         float *y, float *y2, int64_t ys, int valid, int valid2) {
    const int64_t nsb = cols / 256;
    const size_t cb = 16 * sizeof(tn_block_q2_K);
    const __m512i m4 = _mm512_set1_epi32(15), m4p = _mm512_set1_epi32(0x000f000f);
    __m512 acc[KB2];
    __m512 acc2[1] = {_mm512_setzero_ps()};
#pragma GCC unroll 16
    for (int b = 0; b < nb; b++)
        acc[b] = _mm512_setzero_ps();
    const tn_prefetch_mode pf_mode = tn_cpu_prefetch_mode(nb, TN_TYPE_Q2_K);
    for (int64_t s = 0; s < nsb; s++) {
#pragma GCC unroll 2
        for (int u = 0; u < streams; u++) {
            TN_X16_STREAM(u);
            const uint8_t *c = g_u + (size_t)s * cb;
            x16_prefetch(c, cb, 0, cb, pf_mode);
            __m512i isum[KB2];
#pragma GCC unroll 16
            for (int b = 0; b < nb_u; b++)
                isum[b] = _mm512_setzero_si512();
            /* The mins as int16 pairs (m 2p, m 2p + 1) per row. */
            __m512i mp[8];
#pragma GCC unroll 1
            for (int p = 0; p < 8; p++) {
                const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c + 64 + 32 * p)));
                const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(c + 80 + 32 * p)));
                mp[p] = _mm512_and_si512(_mm512_or_si512(_mm512_srli_epi32(lo, 4), _mm512_slli_epi32(hi, 12)),
                                         m4p);
                const __m512i sc[2] = {_mm512_and_si512(lo, m4), _mm512_and_si512(hi, m4)};
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const int k = 2 * p + h;
                    __m512i wq[4];
                    q2_regs(_mm512_loadu_si512(c + 320 + 64 * k), wq);
#pragma GCC unroll 16
                    for (int b = 0; b < nb_u; b++) {
                        const uint8_t *x = act_u + (size_t)b * as + 256 * s + 16 * k;
                        isum[b] = _mm512_dpwssd_epi32(isum[b], dot16(_mm512_setzero_si512(), wq, x), sc[h]);
                    }
                }
            }
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)c));
            const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(c + 32)));
#pragma GCC unroll 16
            for (int b = 0; b < nb_u; b++) {
                const uint8_t *a = act_u + (size_t)b * as;
                const float *dx = (const float *)(a + cols);
                const uint8_t *bp = (const uint8_t *)(dx + nsb) + 64 * s;
                __m512i ms = _mm512_setzero_si512();
#pragma GCC unroll 16
                for (int p = 0; p < 8; p++)
                    ms = _mm512_dpwssd_epi32(ms, mp[p], bcast32(bp + 4 * p));
                const __m512 vdx = _mm512_set1_ps(dx[s]);
                acc_u[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[b]), _mm512_mul_ps(d, vdx), acc_u[b]);
                acc_u[b] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmin, vdx), acc_u[b]);
            }
        }
    }
    const __mmask16 m = (__mmask16)((1u << valid) - 1);
#pragma GCC unroll 16
    for (int b = 0; b < nb; b++)
        _mm512_mask_storeu_ps(y + b * ys, m, acc[b]);
    if (streams == 2)
        _mm512_mask_storeu_ps(y2, (__mmask16)((1u << valid2) - 1), acc2[0]);
}

/* Q3_K's 16 scales of 16 rows as signed bytes, from the packed registers
 * w0 (scales[0..3]), w1 ([4..7]) and w2 ([8..11]): byte u of lane i of
 * sc[m] is scale 4m + u of row i, less 32. Scale k's low 4 bits are in
 * byte k % 8 (w0 for k % 8 < 4, else w1), its high nibble when k >= 8;
 * its top 2 bits are bits 2(k / 4), 2(k / 4) + 1 of byte 8 + k % 4 (w2).
 * Five vector ops per 4 scales: once per super-block, where extracting
 * each scale inside the sub-block loop (as before session 16) took eight
 * per scale. */
INLINE void q3k_scales(__m512i w0, __m512i w1, __m512i w2, __m512i sc[4]) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi8(0x3f);
    const __m512i k32 = _mm512_set1_epi8(32);
    const __m512i lo[4] = {w0, w1, _mm512_srli_epi32(w0, 4), _mm512_srli_epi32(w1, 4)};
    const __m512i hi[4] = {_mm512_slli_epi32(w2, 4), _mm512_slli_epi32(w2, 2), w2,
                           _mm512_srli_epi32(w2, 2)};
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) /* 0xe4: lo4 ? lo : hi, bit by bit */
        sc[m] = _mm512_sub_epi8(_mm512_and_si512(_mm512_ternarylogic_epi32(lo[m], hi[m], lo4, 0xe4), m6),
                                k32);
}

/* Q3_K. A sub-block's S (16 values, quants less 4: at most 16 * 4 * 127 in
 * magnitude) fits an int16, and so does a scale; sub-blocks k and k + 2
 * go into the low and high words of one int32 lane, their scales likewise,
 * and one vpdpwssd adds S_k * sc_k + S_k+2 * sc_k+2 to the super-block's
 * int32 sum: the same integer as two vpmulld and two adds, so the same
 * results, in fewer instructions (Q2_K does the same with one sub-block
 * per lane). */
INLINE void rows_x16_q3k(const uint8_t *g, const uint8_t *g2, int streams,
                         int64_t cols, const uint8_t *act, const uint8_t *act2, size_t as, int nb,
                         float *y, float *y2, int64_t ys, int valid, int valid2) {
    const int64_t nsb = cols / 256;
    const size_t cb = 16 * sizeof(tn_block_q3_K);
    const __m512i v4 = _mm512_set1_epi8(4), low16 = _mm512_set1_epi32(0xffff);
    __m512 acc[KB2];
    __m512 acc2[1] = {_mm512_setzero_ps()};
#pragma GCC unroll 16
    for (int b = 0; b < nb; b++)
        acc[b] = _mm512_setzero_ps();
    const tn_prefetch_mode pf_mode = tn_cpu_prefetch_mode(nb, TN_TYPE_Q3_K);
    for (int64_t s = 0; s < nsb; s++) {
#pragma GCC unroll 2
        for (int u = 0; u < streams; u++) {
            TN_X16_STREAM(u);
            const uint8_t *c = g_u + (size_t)s * cb;
            x16_prefetch(c, cb, 0, cb, pf_mode);
            __m512i sc8[4];
            q3k_scales(_mm512_loadu_si512(c + 1536), _mm512_loadu_si512(c + 1600), _mm512_loadu_si512(c + 1664),
                       sc8);
            __m512i isum[KB2];
#pragma GCC unroll 16
            for (int b = 0; b < nb_u; b++)
                isum[b] = _mm512_setzero_si512();
#pragma GCC unroll 1
            for (int m = 0; m < 4; m++) {
                /* Words (scale 4m, scale 4m + 2) and (4m + 1, 4m + 3), signed. */
                const __m512i pair[2] = {_mm512_srai_epi16(_mm512_slli_epi16(sc8[m], 8), 8),
                                         _mm512_srai_epi16(sc8[m], 8)};
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {
                    const int ka = 4 * m + u, kb = ka + 2;
                    __m512i wa[4], wb[4];
                    q2_regs(_mm512_loadu_si512(c + 64 * ka), wa);
                    q2_regs(_mm512_loadu_si512(c + 64 * kb), wb);
#pragma GCC unroll 4
                    for (int t = 0; t < 4; t++) { /* the third bits: one masked byte add each */
                        uint64_t mka, mkb;
                        memcpy(&mka, c + 1024 + 32 * ka + 8 * t, 8);
                        memcpy(&mkb, c + 1024 + 32 * kb + 8 * t, 8);
                        wa[t] = _mm512_mask_add_epi8(wa[t], _cvtu64_mask64(mka), wa[t], v4);
                        wb[t] = _mm512_mask_add_epi8(wb[t], _cvtu64_mask64(mkb), wb[t], v4);
                    }
#pragma GCC unroll 16
                    for (int b = 0; b < nb_u; b++) {
                        const uint8_t *a = act_u + (size_t)b * as;
                        const __m512i sa = dot16(_mm512_setzero_si512(), wa, a + 256 * s + 16 * ka);
                        const __m512i sb = dot16(_mm512_setzero_si512(), wb, a + 256 * s + 16 * kb);
                        const __m512i both = _mm512_ternarylogic_epi32(sa, _mm512_slli_epi32(sb, 16), low16, 0xe4);
                        isum[b] = _mm512_dpwssd_epi32(isum[b], both, pair[u]);
                    }
                }
            }
            /* - 4 * sum(sc * B): the same scale pairs against the row's B pairs. */
            __m512i pairs[8];
#pragma GCC unroll 4
            for (int m = 0; m < 4; m++) {
                pairs[2 * m] = _mm512_srai_epi16(_mm512_slli_epi16(sc8[m], 8), 8);
                pairs[2 * m + 1] = _mm512_srai_epi16(sc8[m], 8);
            }
#pragma GCC unroll 16
            for (int b = 0; b < nb_u; b++) {
                const uint8_t *a = act_u + (size_t)b * as;
                const uint8_t *bp = (const uint8_t *)((const float *)(a + cols) + nsb) + 64 * s;
                isum[b] = _mm512_sub_epi32(isum[b], _mm512_slli_epi32(pair_dot8(pairs, bp), 2));
            }
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(c + 1728)));
#pragma GCC unroll 16
            for (int b = 0; b < nb_u; b++) {
                const float *dx = (const float *)(act_u + (size_t)b * as + cols);
                acc_u[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[b]),
                                         _mm512_mul_ps(d, _mm512_set1_ps(dx[s])), acc_u[b]);
            }
        }
    }
    const __mmask16 m = (__mmask16)((1u << valid) - 1);
#pragma GCC unroll 16
    for (int b = 0; b < nb; b++)
        _mm512_mask_storeu_ps(y + b * ys, m, acc[b]);
    if (streams == 2)
        _mm512_mask_storeu_ps(y2, (__mmask16)((1u << valid2) - 1), acc2[0]);
}

INLINE void rows_x16_iq4xs(const uint8_t *g, const uint8_t *g2, int streams, int64_t cols,
                           const uint8_t *act, const uint8_t *act2, size_t as, int nb, float *y,
                           float *y2, int64_t ys, int valid, int valid2) {
    const int64_t nsb = cols / 256;
    const size_t cb = 16 * sizeof(tn_block_iq4_xs);
    const __m512i lo4 = _mm512_set1_epi8(0x0f), m4 = _mm512_set1_epi32(15);
    const __m512i m2 = _mm512_set1_epi32(3), k32 = _mm512_set1_epi32(32);
    /* The levels + 128 (1..241) in every 128-bit lane, unsigned for vpdpbusd. */
    const __m512i table = levels_table512(tn_iq4nl_values, 128);
    __m512 acc[KB2];
    __m512 acc2[1] = {_mm512_setzero_ps()};
#pragma GCC unroll 16
    for (int b = 0; b < nb; b++)
        acc[b] = _mm512_setzero_ps();
    const tn_prefetch_mode pf_mode = tn_cpu_prefetch_mode(nb, TN_TYPE_IQ4_XS);
    for (int64_t s = 0; s < nsb; s++) {
#pragma GCC unroll 2
        for (int u = 0; u < streams; u++) {
            TN_X16_STREAM(u);
            const uint8_t *c = g_u + (size_t)s * cb;
            x16_prefetch(c, cb, 0, cb, pf_mode);
            const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(c + 32)));
            const __m512i sl = _mm512_loadu_si512(c + 64);
            __m512i isum[KB2];
#pragma GCC unroll 16
            for (int b = 0; b < nb_u; b++)
                isum[b] = _mm512_setzero_si512();
#pragma GCC unroll 1
            for (int j = 0; j < 8; j++) {
                /* ls = scales_l nibble j | (scales_h bits 2j, 2j + 1) << 4, less 32. */
                const __m512i lo = _mm512_and_si512(_mm512_srl_epi32(sl, _mm_cvtsi32_si128(4 * j)), m4);
                const __m512i hi = _mm512_and_si512(_mm512_srl_epi32(sh, _mm_cvtsi32_si128(2 * j)), m2);
                const __m512i sc = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), k32);
                const uint8_t *qb = c + 128 + 256 * j;
                __m512i wq[8];
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++) {
                    const __m512i v = _mm512_loadu_si512(qb + 64 * p);
                    wq[p] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, lo4));
                    wq[p + 4] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4));
                }
#pragma GCC unroll 16
                for (int b = 0; b < nb_u; b++) {
                    const uint8_t *a = act_u + (size_t)b * as;
                    const int32_t *ci = (const int32_t *)((const float *)(a + cols) + nsb) + 16 * s;
                    const uint8_t *x = a + 256 * s + 32 * j;
                    __m512i t = _mm512_set1_epi32(ci[j]);
#pragma GCC unroll 16
                    for (int p = 0; p < 8; p++) /* low nibbles: values 4p..; high: 16 + 4(p - 4).. */
                        t = dpbusd_bcast(t, wq[p], x + (p < 4 ? 4 * p : 16 + 4 * (p - 4)));
                    isum[b] = _mm512_add_epi32(isum[b], _mm512_mullo_epi32(t, sc));
                }
            }
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)c));
#pragma GCC unroll 16
            for (int b = 0; b < nb_u; b++) {
                const float *dx = (const float *)(act_u + (size_t)b * as + cols);
                acc_u[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[b]),
                                         _mm512_mul_ps(d, _mm512_set1_ps(dx[s])), acc_u[b]);
            }
        }
    }
    const __mmask16 m = (__mmask16)((1u << valid) - 1);
#pragma GCC unroll 16
    for (int b = 0; b < nb; b++)
        _mm512_mask_storeu_ps(y + b * ys, m, acc[b]);
    if (streams == 2)
        _mm512_mask_storeu_ps(y2, (__mmask16)((1u << valid2) - 1), acc2[0]);
}

/* A tile of nb rows runs as passes of 8, 4, 2, 1 rows (nb = 13: 8 + 4 + 1),
 * each with a compile-time row count; a row's instructions are the same in
 * every pass size. */
static inline int pass_rows(int left) {
    int n = KB2;
    while (n > left)
        n >>= 1;
    return n;
}

#define X16K2_CALL(N)                                                                  \
    (KIND == K2_Q2K ? rows_x16_q2k(g, NULL, 1, w->cols, act, NULL, mm->act_row, N, y, NULL, w->rows, \
                                   valid, 0)                                                     \
     : KIND == K2_Q3K                                                                             \
         ? rows_x16_q3k(g, NULL, 1, w->cols, act, NULL, mm->act_row, N, y, NULL, w->rows, valid, 0) \
         : rows_x16_iq4xs(g, NULL, 1, w->cols, act, NULL, mm->act_row, N, y, NULL, w->rows, valid, 0))
#define X16K2_TILE(NAME, K)                                                            \
    static void NAME(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0, \
                     int nb) {                                                        \
        (void)thr;                                                                    \
        const int KIND = K;                                                           \
        const tn_weight *w = mm->w;                                                   \
        const size_t gb = tn_x16_group_bytes(w->type, w->cols);                       \
        for (int64_t r = r0; r < r1; r += 16) {                                       \
            const uint8_t *g = (const uint8_t *)w->data + (size_t)(r / 16) * gb;      \
            const int valid = w->rows - r < 16 ? (int)(w->rows - r) : 16;              \
            for (int j0 = 0, n; j0 < nb; j0 += n) {                                   \
                const uint8_t *act = (const uint8_t *)mm->act + (b0 + j0) * mm->act_row; \
                float *y = mm->y + (b0 + j0) * w->rows + r;                           \
                n = pass_rows(nb - j0);                                               \
                switch (n) {                                                          \
                case 1: X16K2_CALL(1); break;                                         \
                case 2: X16K2_CALL(2); break;                                         \
                case 4: X16K2_CALL(4); break;                                         \
                case 8: X16K2_CALL(8); break;                                         \
                default: X16K2_CALL(KB2); break;                                      \
                }                                                                     \
            }                                                                         \
        }                                                                             \
    }
X16K2_TILE(tile_x16_q2k, K2_Q2K)
X16K2_TILE(tile_x16_q3k, K2_Q3K)
X16K2_TILE(tile_x16_iq4xs, K2_IQ4XS)
#define ROWS2_x16k2(FN) FN(ga, gb, 2, wa->cols, ma->act, mb->act, ma->act_row, 1, ya, yb, wa->rows, va, vb)
TN_X16_TILE_PAIR(pair_x16_q2k, tile_x16_q2k, ROWS2_x16k2(rows_x16_q2k))
TN_X16_TILE_PAIR(pair_x16_q3k, tile_x16_q3k, ROWS2_x16k2(rows_x16_q3k))
TN_X16_TILE_PAIR(pair_x16_iq4xs, tile_x16_iq4xs, ROWS2_x16k2(rows_x16_iq4xs))

bool tn_mm_ops_avx512_x16k2(tn_mm_ops *ops, uint32_t type) {
    switch (type) {
    case TN_TYPE_Q2_K:
        ops->convert = convert_x16_q2k;
        ops->tile = tile_x16_q2k;
        ops->tile_pair = pair_x16_q2k;
        break;
    case TN_TYPE_Q3_K:
        ops->convert = convert_x16_q3k;
        ops->tile = tile_x16_q3k;
        ops->tile_pair = pair_x16_q3k;
        break;
    case TN_TYPE_IQ4_XS:
        ops->convert = convert_x16_iq4xs;
        ops->tile = tile_x16_iq4xs;
        ops->tile_pair = pair_x16_iq4xs;
        break;
    default:
        return false;
    }
    ops->act_bytes = act_x16k2_bytes;
    ops->row_align = 16;
    return true;
}
