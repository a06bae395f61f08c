/* Attention with AVX2 + FMA (tn-cpu.h): the reference's arithmetic, the 16
 * key positions of a block in two registers. Same chunks as the AVX-512
 * kernel (attention-avx512.c); queries go through the score pass four at a
 * time (8 accumulators + 2 key registers fit the 16 ymm registers), their
 * pairs' halves broadcast from a float table, and through the values one at
 * a time. */
#include "tn-cpu-internal.h"

#include <immintrin.h>
#include <math.h>

static inline __m256 exp2_8(__m256 x) {
    const __m256i ok = _mm256_castps_si256(_mm256_cmp_ps(x, _mm256_set1_ps(TN_EXP2_MIN), _CMP_GE_OQ));
    const __m256 t = _mm256_add_ps(x, _mm256_set1_ps(TN_EXP2_SHIFT));
    const __m256 r = _mm256_sub_ps(x, _mm256_sub_ps(t, _mm256_set1_ps(TN_EXP2_SHIFT)));
    __m256 p = _mm256_set1_ps(TN_EXP2_C4);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_EXP2_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_EXP2_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_EXP2_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_add_epi32(_mm256_castps_si256(p),
                                       _mm256_slli_epi32(_mm256_castps_si256(t), 23));
    return _mm256_castsi256_ps(_mm256_and_si256(e, ok));
}

/* The 8 partial denominators keep the reference's lanes in the order
 * 0 1 4 5 2 3 6 7 (add_pairs); the tree (lanes j + 4, then j + 2, then the
 * last two) runs after putting them back in order. */
static inline float sum8(__m256 l) {
    l = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(l), _MM_SHUFFLE(3, 1, 2, 0)));
    __m128 g = _mm_add_ps(_mm256_castps256_ps128(l), _mm256_extractf128_ps(l, 1));
    __m128 f = _mm_add_ps(g, _mm_movehl_ps(g, g));
    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* l + the 16 probabilities p0 (positions 0-7) and p1 (8-15) by pairs:
 * reference lane j adds p[2j + 1], then p[2j]. In-lane shuffles put lane j
 * at register lane 0 1 4 5 2 3 6 7 for j = 0 1 2 3 4 5 6 7. */
static inline __m256 add_pairs(__m256 l, __m256 p0, __m256 p1) {
    l = _mm256_add_ps(l, _mm256_shuffle_ps(p0, p1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_add_ps(l, _mm256_shuffle_ps(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)));
}

static inline float max8(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

/* acc + x.hi * y.hi + x.lo * y.lo per 32-bit lane (bf16 pairs), in that
 * order: VDPBF16PS's arithmetic as two FMAs. x is a broadcast pair, given
 * as its two halves already widened. */
static inline __m256 dot2(__m256 acc, __m256 xhi, __m256 xlo, __m256i y) {
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    acc = _mm256_fmadd_ps(xhi, _mm256_castsi256_ps(_mm256_and_si256(y, hi)), acc);
    return _mm256_fmadd_ps(xlo, _mm256_castsi256_ps(_mm256_slli_epi32(y, 16)), acc);
}

static inline __m256i pair_keep(int64_t w, int64_t u0, int64_t u1) {
    return _mm256_set1_epi32((int)tn_attn_pair_keep(w, u0, u1));
}

/* p (finite, >= 0) rounded to the nearest bf16, ties to even, as a float. */
static inline __m256 round_bf16(__m256 p) {
    const __m256i u = _mm256_castps_si256(p);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
}

/* Scores of n queries (n <= 4, a constant after inlining) against one key
 * block. qf: the queries' pairs as floats, [head_dim / 2][TN_ATTN_TILE][2]
 * (high half first), so that each half is one broadcast from memory. */
static inline __attribute__((always_inline)) void qk_block(int n, const float *qf,
                                                           const uint16_t *kb, int32_t D,
                                                           __m256 *s) {
    __m256 a[4], b[4];
    for (int i = 0; i < n; i++)
        a[i] = b[i] = _mm256_setzero_ps();
    for (int32_t e = 0; e < D / 2; e++) {
        const uint16_t *ke = kb + (size_t)e * 2 * TN_ATTN_KB;
        const __m256i k0 = _mm256_loadu_si256((const __m256i *)(const void *)ke);
        const __m256i k1 = _mm256_loadu_si256((const __m256i *)(const void *)(ke + 16));
        const float *qe = qf + (size_t)e * 2 * TN_ATTN_TILE;
        for (int i = 0; i < n; i++) {
            const __m256 qh = _mm256_broadcast_ss(qe + 2 * i), ql = _mm256_broadcast_ss(qe + 2 * i + 1);
            a[i] = dot2(a[i], qh, ql, k0);
            b[i] = dot2(b[i], qh, ql, k1);
        }
    }
    for (int i = 0; i < n; i++) {
        s[2 * i] = a[i];
        s[2 * i + 1] = b[i];
    }
}

static void qk_any(int n, const float *qf, const uint16_t *kb, int32_t D, __m256 *s) {
    for (int i0 = 0; i0 < n; i0 += 4) {
        switch (n - i0) {
        case 1: qk_block(1, qf + 2 * i0, kb, D, s + 2 * i0); break;
        case 2: qk_block(2, qf + 2 * i0, kb, D, s + 2 * i0); break;
        case 3: qk_block(3, qf + 2 * i0, kb, D, s + 2 * i0); break;
        default: qk_block(4, qf + 2 * i0, kb, D, s + 2 * i0); break;
        }
    }
}

/* acc[d] += the value pairs of positions u0..u1 of a chunk weighed by the
 * probabilities pf (bf16 values kept as floats), in order; the accumulators
 * stay in registers for the whole chunk. Only the range's first and last
 * pair can hold a hidden position. */
static void pv_one(float *ai, const float *pf, const uint16_t *vb, int32_t D, int64_t u0,
                   int64_t u1) {
    int32_t d = 0;
    for (; d + 32 <= D; d += 32) {
        __m256 a0 = _mm256_loadu_ps(ai + d), a1 = _mm256_loadu_ps(ai + d + 8);
        __m256 a2 = _mm256_loadu_ps(ai + d + 16), a3 = _mm256_loadu_ps(ai + d + 24);
        for (int64_t w = u0 / 2; w <= u1 / 2; w++) {
            const __m256 ph = _mm256_broadcast_ss(pf + 2 * w + 1);
            const __m256 pl = _mm256_broadcast_ss(pf + 2 * w);
            const __m256i *vv =
                (const __m256i *)(const void *)(vb + (size_t)w * 2 * (size_t)D + 2 * d);
            __m256i v0 = _mm256_loadu_si256(vv), v1 = _mm256_loadu_si256(vv + 1);
            __m256i v2 = _mm256_loadu_si256(vv + 2), v3 = _mm256_loadu_si256(vv + 3);
            if (2 * w < u0 || 2 * w + 1 > u1) {
                const __m256i keep = pair_keep(w, u0, u1);
                v0 = _mm256_and_si256(v0, keep);
                v1 = _mm256_and_si256(v1, keep);
                v2 = _mm256_and_si256(v2, keep);
                v3 = _mm256_and_si256(v3, keep);
            }
            a0 = dot2(a0, ph, pl, v0);
            a1 = dot2(a1, ph, pl, v1);
            a2 = dot2(a2, ph, pl, v2);
            a3 = dot2(a3, ph, pl, v3);
        }
        _mm256_storeu_ps(ai + d, a0);
        _mm256_storeu_ps(ai + d + 8, a1);
        _mm256_storeu_ps(ai + d + 16, a2);
        _mm256_storeu_ps(ai + d + 24, a3);
    }
    for (; d < D; d += 8) {
        __m256 a0 = _mm256_loadu_ps(ai + d);
        for (int64_t w = u0 / 2; w <= u1 / 2; w++) {
            const __m256i vv = _mm256_loadu_si256(
                (const __m256i *)(const void *)(vb + (size_t)w * 2 * (size_t)D + 2 * d));
            a0 = dot2(a0, _mm256_broadcast_ss(pf + 2 * w + 1), _mm256_broadcast_ss(pf + 2 * w),
                      _mm256_and_si256(vv, pair_keep(w, u0, u1)));
        }
        _mm256_storeu_ps(ai + d, a0);
    }
}

bool tn_attention_avx2(const tn_attn_tile *t, float *scratch) {
    const int32_t D = t->head_dim;
    if (D % 8 != 0 || t->n < 1 || t->n > TN_ATTN_TILE)
        return false;
    const int n = t->n;
    float *acc = scratch;
    float *lsum = acc + (size_t)TN_ATTN_TILE * (size_t)D;
    float *mx = lsum + (size_t)TN_ATTN_TILE * TN_ATTN_KB;
    float *qf = mx + TN_ATTN_TILE; /* [D / 2][TILE][2] */
    for (int32_t e = 0; e < D / 2; e++)
        for (int i = 0; i < n; i++) {
            qf[((size_t)e * TN_ATTN_TILE + (size_t)i) * 2] = tn_bf16_to_f32(t->q[i][2 * e + 1]);
            qf[((size_t)e * TN_ATTN_TILE + (size_t)i) * 2 + 1] = tn_bf16_to_f32(t->q[i][2 * e]);
        }
    int64_t pmin = INT64_MAX, pmax = -1;
    for (int i = 0; i < n; i++) {
        for (int32_t d = 0; d < D; d += 8)
            _mm256_storeu_ps(acc + (size_t)i * D + d, _mm256_setzero_ps());
        _mm256_storeu_ps(lsum + (size_t)i * TN_ATTN_KB, _mm256_setzero_ps());
        mx[i] = -INFINITY;
        pmin = t->first[i] < pmin ? t->first[i] : pmin;
        pmax = t->last[i] > pmax ? t->last[i] : pmax;
    }
    const float c = t->scale * TN_EXP_LOG2E;
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i lane8 = _mm256_add_epi32(lane, _mm256_set1_epi32(8));
    /* A chunk's scores, then (in place) its probabilities rounded to bf16
     * and kept as floats: a pair's two weights are then plain broadcasts. */
    _Alignas(32) float sc[TN_ATTN_TILE][TN_ATTN_CHUNK];
    for (int64_t ch = pmin / TN_ATTN_CHUNK; ch <= pmax / TN_ATTN_CHUNK; ch++) {
        tn_attn_chunk cv;
        tn_attn_chunk_at(t, pmin, pmax, ch, &cv);
        const int64_t j0 = cv.j0, oa = cv.oa, oz = cv.oz, *u0 = cv.u0, *u1 = cv.u1;
        for (int64_t o = oa; o <= oz; o += TN_ATTN_KB) {
            __m256 s[2 * TN_ATTN_TILE];
            qk_any(n, qf, t->k + (size_t)(j0 + o) * (size_t)D, D, s);
            for (int i = 0; i < n; i++) {
                /* Lanes a..z of the block valid: lane > a - 1 and lane < z + 1. */
                const int64_t a = u0[i] > o ? u0[i] - o : 0;
                const int64_t z = u1[i] - o < TN_ATTN_KB - 1 ? u1[i] - o : TN_ATTN_KB - 1;
                const __m256i lo_b = _mm256_set1_epi32((int)a - 1), hi_b = _mm256_set1_epi32((int)z + 1);
                const __m256 v0 = _mm256_castsi256_ps(_mm256_and_si256(
                    _mm256_cmpgt_epi32(lane, lo_b), _mm256_cmpgt_epi32(hi_b, lane)));
                const __m256 v1 = _mm256_castsi256_ps(_mm256_and_si256(
                    _mm256_cmpgt_epi32(lane8, lo_b), _mm256_cmpgt_epi32(hi_b, lane8)));
                _mm256_store_ps(sc[i] + o, _mm256_blendv_ps(ninf, s[2 * i], v0));
                _mm256_store_ps(sc[i] + o + 8, _mm256_blendv_ps(ninf, s[2 * i + 1], v1));
            }
        }
        for (int i = 0; i < n; i++) {
            if (u0[i] > u1[i])
                continue;
            float *ai = acc + (size_t)i * D;
            float *li = lsum + (size_t)i * TN_ATTN_KB;
            __m256 l = _mm256_loadu_ps(li);
            __m256 cmax = ninf;
            for (int64_t o = oa; o < oz + TN_ATTN_KB; o += 8)
                cmax = _mm256_max_ps(cmax, _mm256_load_ps(sc[i] + o));
            /* As in the AVX-512 kernel: reduce only when a score passes. */
            if (_mm256_movemask_ps(_mm256_cmp_ps(cmax, _mm256_set1_ps(mx[i]), _CMP_GT_OQ))) {
                const float mb = max8(cmax);
                if (mx[i] != -INFINITY) {
                    const __m256 cm = exp2_8(_mm256_set1_ps(mx[i] * c - mb * c));
                    l = _mm256_mul_ps(l, cm);
                    for (int32_t d = 0; d < D; d += 8)
                        _mm256_storeu_ps(ai + d, _mm256_mul_ps(_mm256_loadu_ps(ai + d), cm));
                }
                mx[i] = mb;
            }
            const __m256 vc = _mm256_set1_ps(c), nmc = _mm256_set1_ps(-(mx[i] * c));
            for (int64_t o = oa; o <= oz; o += TN_ATTN_KB) {
                const __m256 p0 =
                    round_bf16(exp2_8(_mm256_fmadd_ps(_mm256_load_ps(sc[i] + o), vc, nmc)));
                const __m256 p1 =
                    round_bf16(exp2_8(_mm256_fmadd_ps(_mm256_load_ps(sc[i] + o + 8), vc, nmc)));
                l = add_pairs(l, p0, p1);
                _mm256_store_ps(sc[i] + o, p0);
                _mm256_store_ps(sc[i] + o + 8, p1);
            }
            _mm256_storeu_ps(li, l);
            pv_one(ai, sc[i], t->v + (size_t)j0 * (size_t)D, D, u0[i], u1[i]);
        }
    }
    for (int i = 0; i < n; i++) {
        const float *li = lsum + (size_t)i * TN_ATTN_KB;
        const __m256 inv =
            _mm256_set1_ps(tn_attn_inv_denom(t, i, sum8(_mm256_loadu_ps(li)), mx[i], c));
        for (int32_t d = 0; d < D; d += 8)
            _mm256_storeu_ps(t->out[i] + d,
                             _mm256_mul_ps(_mm256_loadu_ps(acc + (size_t)i * D + d), inv));
    }
    return true;
}
