/* Attention with AVX-512 (tn-cpu.h): the reference's arithmetic, 16 key
 * positions per register. Compiled twice: here, each bf16 pair's two
 * products are two FMAs on the pair's halves; attention-avx512bf16.c
 * includes this file with TN_ATTN_DPBF16 defined, and one VDPBF16PS does
 * both (the same bits: tn-cpu.h).
 *
 * The queries of a tile walk the chunks in lockstep. Scores: a block of
 * keys ([head_dim / 2][16] pairs, 2 KiB for head_dim 64) is loaded once per
 * dimension pair and feeds one VDPBF16PS per query (their chains are
 * independent, which also hides the latency); the chunk's scores wait in L1.
 * Values: four queries with the same visible range go together, each value
 * register loaded once for the four, their accumulators in registers for
 * the whole chunk. A query's own sequence of operations does not depend on
 * the others. */
#include "tn-cpu-internal.h"

#include <immintrin.h>
#include <math.h>

#if defined(TN_ATTN_DPBF16)
#define TN_ATTN_AVX512_KERNEL tn_attention_avx512bf16
/* acc + x.hi * y.hi + x.lo * y.lo, per 32-bit lane, in that order. */
static inline __m512 dot2(__m512 acc, __m512i x, __m512i y) {
    return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)y);
}
/* 16 probabilities to bf16, round to nearest even (they are finite, >= 0). */
static inline __m256i to_bf16(__m512 p) { return (__m256i)_mm512_cvtneps_pbh(p); }
#else
#define TN_ATTN_AVX512_KERNEL tn_attention_avx512
static inline __m512 dot2(__m512 acc, __m512i x, __m512i y) {
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(x, hi)),
                          _mm512_castsi512_ps(_mm512_and_si512(y, hi)), acc);
    return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)),
                           _mm512_castsi512_ps(_mm512_slli_epi32(y, 16)), acc);
}
static inline __m256i to_bf16(__m512 p) {
    const __m512i u = _mm512_castps_si512(p);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}
#endif

/* dot2 with x the 32-bit word at *x in every lane. VDPBF16PS takes it as
 * an embedded broadcast: GCC would issue a separate broadcast load. */
static inline __m512 dot2_bcast(__m512 acc, const uint32_t *x, __m512i y) {
#if defined(TN_ATTN_DPBF16)
    __asm__("vdpbf16ps %1%{1to16%}, %2, %0" : "+v"(acc) : "m"(*x), "v"(y));
    return acc;
#else
    return dot2(acc, _mm512_set1_epi32((int)*x), y);
#endif
}

/* l + the 16 probabilities p by pairs: lane j adds p[2j + 1], then p[2j]. */
static inline __m256 add_pairs(__m256 l, __m256i p) {
#if defined(TN_ATTN_DPBF16)
    return _mm256_dpbf16_ps(l, (__m256bh)p, (__m256bh)_mm256_set1_epi32((int)TN_ATTN_PAIR_ONES));
#else
    l = _mm256_add_ps(l, _mm256_castsi256_ps(_mm256_and_si256(p, _mm256_set1_epi32((int)0xffff0000u))));
    return _mm256_add_ps(l, _mm256_castsi256_ps(_mm256_slli_epi32(p, 16)));
#endif
}

static inline __m512 exp2_16(__m512 x) {
    const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(TN_EXP2_MIN), _CMP_GE_OQ);
    const __m512 t = _mm512_add_ps(x, _mm512_set1_ps(TN_EXP2_SHIFT));
    const __m512 r = _mm512_sub_ps(x, _mm512_sub_ps(t, _mm512_set1_ps(TN_EXP2_SHIFT)));
    __m512 p = _mm512_set1_ps(TN_EXP2_C4);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TN_EXP2_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TN_EXP2_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TN_EXP2_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_castsi512_ps(_mm512_maskz_add_epi32(
        ok, _mm512_castps_si512(p), _mm512_slli_epi32(_mm512_castps_si512(t), 23)));
}

/* The reference's tree: lanes j + 4, then j + 2, then the last two. */
static inline float sum8(__m256 l) {
    __m128 g = _mm_add_ps(_mm256_castps256_ps128(l), _mm256_extractf128_ps(l, 1));
    __m128 f = _mm_add_ps(g, _mm_movehl_ps(g, g));
    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* The raw scores of n queries against a chunk's blocks at offsets oa..oz,
 * n a constant after inlining (accumulators and running maxima stay in
 * registers): hidden positions become -inf, the scores go to sc, each
 * query's lane maxima to cmax. qt: the tile's query pairs,
 * [head_dim / 2][TN_ATTN_TILE] (one base address for every broadcast). */
static inline __attribute__((always_inline)) void
qk_chunk(int n, const uint32_t *qt, const uint16_t *kc, int32_t D, int64_t oa, int64_t oz,
         const int64_t *u0, const int64_t *u1, float (*sc)[TN_ATTN_CHUNK], __m512 *cmax) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m[TN_ATTN_TILE];
    for (int i = 0; i < n; i++)
        m[i] = ninf;
    for (int64_t o = oa; o <= oz; o += TN_ATTN_KB) {
        const uint16_t *kb = kc + (size_t)o * (size_t)D;
        __m512 a[TN_ATTN_TILE];
        for (int i = 0; i < n; i++)
            a[i] = _mm512_setzero_ps();
        for (int32_t e = 0; e < D / 2; e++) {
            const __m512i k = _mm512_loadu_si512(kb + (size_t)e * 2 * TN_ATTN_KB);
            const uint32_t *qe = qt + (size_t)e * TN_ATTN_TILE;
            for (int i = 0; i < n; i++)
                a[i] = dot2_bcast(a[i], qe + i, k);
        }
        for (int i = 0; i < n; i++) {
            const int64_t lo = u0[i] > o ? u0[i] - o : 0;
            const int64_t hi = u1[i] - o < TN_ATTN_KB - 1 ? u1[i] - o : TN_ATTN_KB - 1;
            const __mmask16 valid = lo > hi ? 0 : (__mmask16)((0xFFFFu >> (15 - (hi - lo))) << lo);
            const __m512 si = _mm512_mask_mov_ps(ninf, valid, a[i]);
            _mm512_store_ps(sc[i] + o, si);
            m[i] = _mm512_max_ps(m[i], si);
        }
    }
    for (int i = 0; i < n; i++)
        cmax[i] = m[i];
}

static void qk_any(int n, const uint32_t *qt, const uint16_t *kc, int32_t D, int64_t oa,
                   int64_t oz, const int64_t *u0, const int64_t *u1,
                   float (*sc)[TN_ATTN_CHUNK], __m512 *cmax) {
    switch (n) {
    case 1: qk_chunk(1, qt, kc, D, oa, oz, u0, u1, sc, cmax); break;
    case 2: qk_chunk(2, qt, kc, D, oa, oz, u0, u1, sc, cmax); break;
    case 3: qk_chunk(3, qt, kc, D, oa, oz, u0, u1, sc, cmax); break;
    case 4: qk_chunk(4, qt, kc, D, oa, oz, u0, u1, sc, cmax); break;
    case 5: qk_chunk(5, qt, kc, D, oa, oz, u0, u1, sc, cmax); break;
    case 6: qk_chunk(6, qt, kc, D, oa, oz, u0, u1, sc, cmax); break;
    case 7: qk_chunk(7, qt, kc, D, oa, oz, u0, u1, sc, cmax); break;
    default: qk_chunk(8, qt, kc, D, oa, oz, u0, u1, sc, cmax); break;
    }
}

static inline __m512i pair_keep(int64_t w, int64_t u0, int64_t u1) {
    return _mm512_set1_epi32((int)tn_attn_pair_keep(w, u0, u1));
}

/* One pair of positions w into 64 dimensions of nq queries' accumulators;
 * the values are masked only where the pair can hold a hidden position. */
static inline __attribute__((always_inline)) void pv_pair(int nq, __m512 (*c)[4],
                                                          const uint16_t *pb,
                                                          const uint16_t *v, int64_t w,
                                                          const __m512i *keep) {
    __m512i vx[4];
    for (int x = 0; x < 4; x++) {
        vx[x] = _mm512_loadu_si512(v + 32 * x);
        if (keep)
            vx[x] = _mm512_and_si512(vx[x], *keep);
    }
    for (int i = 0; i < nq; i++) {
        for (int x = 0; x < 4; x++)
            c[i][x] = dot2_bcast(
                c[i][x], (const uint32_t *)(const void *)(pb + i * TN_ATTN_CHUNK + 2 * w), vx[x]);
    }
}

/* acc[d] += the value pairs of positions u0..u1 of a chunk weighed by the
 * probabilities, in order, for nq consecutive queries (1 or 4) over the same
 * positions: each value register is loaded once for all of them, and the
 * accumulators stay in registers for the whole chunk. a, pb: the first
 * query's accumulators and probabilities (the next query's are D floats
 * and TN_ATTN_CHUNK bf16 further: one base register for all). vb: the
 * chunk's value pairs. Only the range's first and last pair can hold a
 * hidden position. */
static inline __attribute__((always_inline)) void pv_n(int nq, float *a,
                                                       const uint16_t *pb,
                                                       const uint16_t *vb, int32_t D,
                                                       int64_t u0, int64_t u1) {
    const int64_t w0 = u0 / 2, w1 = u1 / 2;
    const int64_t wa = u0 & 1 ? w0 + 1 : w0, wz = u1 & 1 ? w1 : w1 - 1;
    const __m512i keep0 = pair_keep(w0, u0, u1), keep1 = pair_keep(w1, u0, u1);
    int32_t d = 0;
    for (; d + 64 <= D; d += 64) {
        __m512 c[4][4];
        for (int i = 0; i < nq; i++)
            for (int x = 0; x < 4; x++)
                c[i][x] = _mm512_loadu_ps(a + (size_t)i * D + d + 16 * x);
        const uint16_t *vd = vb + 2 * (size_t)d;
        if (u0 & 1)
            pv_pair(nq, c, pb, vd + (size_t)w0 * 2 * (size_t)D, w0, &keep0);
        for (int64_t w = wa; w <= wz; w++)
            pv_pair(nq, c, pb, vd + (size_t)w * 2 * (size_t)D, w, NULL);
        if (!(u1 & 1))
            pv_pair(nq, c, pb, vd + (size_t)w1 * 2 * (size_t)D, w1, &keep1);
        for (int i = 0; i < nq; i++)
            for (int x = 0; x < 4; x++)
                _mm512_storeu_ps(a + (size_t)i * D + d + 16 * x, c[i][x]);
    }
    for (; d < D; d += 16)
        for (int i = 0; i < nq; i++) {
            float *ai = a + (size_t)i * D;
            __m512 c0 = _mm512_loadu_ps(ai + d);
            for (int64_t w = w0; w <= w1; w++) {
                const __m512i vx = _mm512_and_si512(
                    _mm512_loadu_si512(vb + (size_t)w * 2 * (size_t)D + 2 * (size_t)d),
                    pair_keep(w, u0, u1));
                c0 = dot2(c0,
                          _mm512_set1_epi32((int)tn_attn_pair_at(pb + i * TN_ATTN_CHUNK + 2 * w)),
                          vx);
            }
            _mm512_storeu_ps(ai + d, c0);
        }
}

bool TN_ATTN_AVX512_KERNEL(const tn_attn_tile *t, float *scratch) {
    const int32_t D = t->head_dim;
    if (D % 16 != 0 || t->n < 1 || t->n > TN_ATTN_TILE)
        return false;
    const int n = t->n;
    float *acc = scratch;                                  /* [n][D] */
    float *lsum = acc + (size_t)TN_ATTN_TILE * (size_t)D;  /* [n][8] */
    float *mx = lsum + (size_t)TN_ATTN_TILE * TN_ATTN_KB;  /* [n] */
    uint32_t *qt = (uint32_t *)(void *)(mx + TN_ATTN_TILE); /* [D / 2][TILE] */
    for (int32_t e = 0; e < D / 2; e++)
        for (int i = 0; i < n; i++)
            qt[(size_t)e * TN_ATTN_TILE + (size_t)i] = tn_attn_pair_at(t->q[i] + 2 * e);
    int64_t pmin = INT64_MAX, pmax = -1;
    for (int i = 0; i < n; i++) {
        for (int32_t d = 0; d < D; d += 16)
            _mm512_storeu_ps(acc + (size_t)i * D + d, _mm512_setzero_ps());
        _mm256_storeu_ps(lsum + (size_t)i * TN_ATTN_KB, _mm256_setzero_ps());
        mx[i] = -INFINITY;
        pmin = t->first[i] < pmin ? t->first[i] : pmin;
        pmax = t->last[i] > pmax ? t->last[i] : pmax;
    }
    const float c = t->scale * TN_EXP_LOG2E;
    _Alignas(64) float sc[TN_ATTN_TILE][TN_ATTN_CHUNK];
    _Alignas(64) uint16_t pb[TN_ATTN_TILE][TN_ATTN_CHUNK];
    for (int64_t ch = pmin / TN_ATTN_CHUNK; ch <= pmax / TN_ATTN_CHUNK; ch++) {
        tn_attn_chunk cv;
        tn_attn_chunk_at(t, pmin, pmax, ch, &cv);
        const int64_t j0 = cv.j0, oa = cv.oa, oz = cv.oz, *u0 = cv.u0, *u1 = cv.u1;
        __m512 cmax[TN_ATTN_TILE];
        qk_any(n, qt, t->k + (size_t)j0 * (size_t)D, D, oa, oz, u0, u1, sc, cmax);
        for (int i = 0; i < n; i++) {
            if (u0[i] > u1[i])
                continue;
            /* The chunk's maximum matters only when some score passes the
             * running one (rare after the first chunks): a lane compare
             * decides it without the horizontal reduction. */
            __m256 l = _mm256_loadu_ps(lsum + (size_t)i * TN_ATTN_KB);
            if (_mm512_cmp_ps_mask(cmax[i], _mm512_set1_ps(mx[i]), _CMP_GT_OQ)) {
                const float mb = _mm512_reduce_max_ps(cmax[i]);
                if (mx[i] != -INFINITY) {
                    const __m512 cm = exp2_16(_mm512_set1_ps(mx[i] * c - mb * c));
                    float *ai = acc + (size_t)i * D;
                    l = _mm256_mul_ps(l, _mm512_castps512_ps256(cm));
                    for (int32_t d = 0; d < D; d += 16)
                        _mm512_storeu_ps(ai + d, _mm512_mul_ps(_mm512_loadu_ps(ai + d), cm));
                }
                mx[i] = mb;
            }
            const __m512 vc = _mm512_set1_ps(c), nmc = _mm512_set1_ps(-(mx[i] * c));
            for (int64_t o = oa; o <= oz; o += TN_ATTN_KB) {
                const __m256i p =
                    to_bf16(exp2_16(_mm512_fmadd_ps(_mm512_load_ps(sc[i] + o), vc, nmc)));
                l = add_pairs(l, p);
                _mm256_store_si256((__m256i *)(void *)(pb[i] + o), p);
            }
            _mm256_storeu_ps(lsum + (size_t)i * TN_ATTN_KB, l);
        }
        const uint16_t *vb = t->v + (size_t)j0 * (size_t)D;
        int i = 0;
        while (i < n) {
            if (u0[i] > u1[i]) {
                i++;
                continue;
            }
            float *ai = acc + (size_t)i * D;
            if (i + 4 <= n && u0[i + 1] == u0[i] && u0[i + 2] == u0[i] && u0[i + 3] == u0[i] &&
                u1[i + 1] == u1[i] && u1[i + 2] == u1[i] && u1[i + 3] == u1[i]) {
                pv_n(4, ai, pb[i], vb, D, u0[i], u1[i]);
                i += 4;
            } else {
                pv_n(1, ai, pb[i], vb, D, u0[i], u1[i]);
                i++;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        const __m512 inv = _mm512_set1_ps(
            tn_attn_inv_denom(t, i, sum8(_mm256_loadu_ps(lsum + (size_t)i * TN_ATTN_KB)), mx[i], c));
        for (int32_t d = 0; d < D; d += 16)
            _mm512_storeu_ps(t->out[i] + d,
                             _mm512_mul_ps(_mm512_loadu_ps(acc + (size_t)i * D + d), inv));
    }
    return true;
}
