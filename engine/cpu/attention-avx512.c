/* Attention with AVX-512 (tn-cpu.h): the reference's arithmetic, 16 key
 * positions per register.
 *
 * The queries of a tile walk the key blocks in lockstep: a block of keys
 * ([head_dim][16], 4 KiB for head_dim 64) is loaded once per dimension and
 * feeds one FMA per query (their chains are independent, which also hides
 * the FMA latency); the block's values are then read from L1 by each query
 * in turn, with that query's accumulators in registers. A query's own
 * sequence of operations does not depend on the others. */
#include "tn-cpu-internal.h"

#include <immintrin.h>
#include <math.h>

static inline __m512 exp16(__m512 x) {
    const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(TN_EXP_MIN), _CMP_GE_OQ);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(TN_EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-TN_EXP_LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-TN_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(TN_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TN_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TN_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TN_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TN_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(TN_EXP_P5));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    /* n is in [-126, 0] on the lanes kept: 2^n is a normal float. */
    const __m512i e = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_maskz_mov_ps(ok, n)), _mm512_set1_epi32(127)),
        23);
    return _mm512_maskz_mul_ps(ok, y, _mm512_castsi512_ps(e));
}

/* The reference's tree: lanes i + 8, i + 4, i + 2, then the last two. */
static inline float sum16(__m512 l) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(l), _mm512_extractf32x8_ps(l, 1));
    __m128 g = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    __m128 f = _mm_add_ps(g, _mm_movehl_ps(g, g));
    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* Scores of n queries against one key block, n a constant after inlining
 * (the accumulators stay in registers). */
static inline __attribute__((always_inline)) void qk_block(int n, const float *const *q,
                                                           const float *kb, int32_t D,
                                                           __m512 *s) {
    __m512 a[TN_ATTN_TILE];
    for (int i = 0; i < n; i++)
        a[i] = _mm512_setzero_ps();
    for (int32_t d = 0; d < D; d++) {
        const __m512 k = _mm512_loadu_ps(kb + (size_t)d * TN_ATTN_KB);
        for (int i = 0; i < n; i++)
            a[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][d]), k, a[i]);
    }
    for (int i = 0; i < n; i++)
        s[i] = a[i];
}

static void qk_any(int n, const float *const *q, const float *kb, int32_t D, __m512 *s) {
    switch (n) {
    case 1: qk_block(1, q, kb, D, s); break;
    case 2: qk_block(2, q, kb, D, s); break;
    case 3: qk_block(3, q, kb, D, s); break;
    case 4: qk_block(4, q, kb, D, s); break;
    case 5: qk_block(5, q, kb, D, s); break;
    case 6: qk_block(6, q, kb, D, s); break;
    case 7: qk_block(7, q, kb, D, s); break;
    default: qk_block(8, q, kb, D, s); break;
    }
}

/* acc[d] += p[u] * v[u][d] for u in [u0, u1], in order, for one query. */
static inline void pv_one(float *ai, const float *pv, const float *vb, int32_t D, int64_t u0,
                          int64_t u1) {
    int32_t d = 0;
    for (; d + 64 <= D; d += 64) {
        __m512 a0 = _mm512_loadu_ps(ai + d), a1 = _mm512_loadu_ps(ai + d + 16);
        __m512 a2 = _mm512_loadu_ps(ai + d + 32), a3 = _mm512_loadu_ps(ai + d + 48);
        for (int64_t u = u0; u <= u1; u++) {
            const __m512 w = _mm512_set1_ps(pv[u]);
            const float *v = vb + (size_t)u * (size_t)D + d;
            a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 16), a1);
            a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 32), a2);
            a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 48), a3);
        }
        _mm512_storeu_ps(ai + d, a0);
        _mm512_storeu_ps(ai + d + 16, a1);
        _mm512_storeu_ps(ai + d + 32, a2);
        _mm512_storeu_ps(ai + d + 48, a3);
    }
    for (; d < D; d += 16) {
        __m512 a0 = _mm512_loadu_ps(ai + d);
        for (int64_t u = u0; u <= u1; u++)
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(pv[u]),
                                 _mm512_loadu_ps(vb + (size_t)u * (size_t)D + d), a0);
        _mm512_storeu_ps(ai + d, a0);
    }
}

/* The same for four queries over the same positions: each value row is
 * loaded once for the four (16 accumulators + 4 value registers), which
 * makes the loop FMA-bound rather than load-bound. Each query's own
 * operations are those of pv_one. */
static inline void pv_four(float *const *a, const float *const *pv, const float *vb, int32_t D,
                           int64_t u0, int64_t u1) {
    int32_t d = 0;
    for (; d + 64 <= D; d += 64) {
        __m512 c[4][4];
        for (int i = 0; i < 4; i++)
            for (int x = 0; x < 4; x++)
                c[i][x] = _mm512_loadu_ps(a[i] + d + 16 * x);
        for (int64_t u = u0; u <= u1; u++) {
            const float *v = vb + (size_t)u * (size_t)D + d;
            const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
            const __m512 v2 = _mm512_loadu_ps(v + 32), v3 = _mm512_loadu_ps(v + 48);
            for (int i = 0; i < 4; i++) {
                const __m512 w = _mm512_set1_ps(pv[i][u]);
                c[i][0] = _mm512_fmadd_ps(w, v0, c[i][0]);
                c[i][1] = _mm512_fmadd_ps(w, v1, c[i][1]);
                c[i][2] = _mm512_fmadd_ps(w, v2, c[i][2]);
                c[i][3] = _mm512_fmadd_ps(w, v3, c[i][3]);
            }
        }
        for (int i = 0; i < 4; i++)
            for (int x = 0; x < 4; x++)
                _mm512_storeu_ps(a[i] + d + 16 * x, c[i][x]);
    }
    for (int i = 0; i < 4; i++)
        for (int32_t e = d; e < D; e += 16) {
            __m512 a0 = _mm512_loadu_ps(a[i] + e);
            for (int64_t u = u0; u <= u1; u++)
                a0 = _mm512_fmadd_ps(_mm512_set1_ps(pv[i][u]),
                                     _mm512_loadu_ps(vb + (size_t)u * (size_t)D + e), a0);
            _mm512_storeu_ps(a[i] + e, a0);
        }
}

bool tn_attention_avx512(const tn_attn_tile *t, float *scratch) {
    const int32_t D = t->head_dim;
    if (D % 16 != 0 || t->n < 1 || t->n > TN_ATTN_TILE)
        return false;
    const int n = t->n;
    float *acc = scratch;                                  /* [n][D] */
    float *lsum = acc + (size_t)TN_ATTN_TILE * (size_t)D;  /* [n][16] */
    float *mx = lsum + (size_t)TN_ATTN_TILE * TN_ATTN_KB;  /* [n] */
    int64_t bmin = INT64_MAX, bmax = -1;
    for (int i = 0; i < n; i++) {
        for (int32_t d = 0; d < D; d += 16)
            _mm512_storeu_ps(acc + (size_t)i * D + d, _mm512_setzero_ps());
        _mm512_storeu_ps(lsum + (size_t)i * TN_ATTN_KB, _mm512_setzero_ps());
        mx[i] = -INFINITY;
        const int64_t b0 = t->first[i] / TN_ATTN_KB, b1 = t->last[i] / TN_ATTN_KB;
        bmin = b0 < bmin ? b0 : bmin;
        bmax = b1 > bmax ? b1 : bmax;
    }
    const __m512 scale = _mm512_set1_ps(t->scale), ninf = _mm512_set1_ps(-INFINITY);
    _Alignas(64) float pv[TN_ATTN_TILE][TN_ATTN_KB];
    for (int64_t b = bmin; b <= bmax; b++) {
        const int64_t j0 = b * TN_ATTN_KB;
        const float *kb = t->k + (size_t)j0 * (size_t)D;
        const float *vb = t->v + (size_t)j0 * (size_t)D;
        __m512 s[TN_ATTN_TILE];
        qk_any(n, t->q, kb, D, s);
        int64_t u0[TN_ATTN_TILE], u1[TN_ATTN_TILE];
        for (int i = 0; i < n; i++) {
            u0[i] = 1;
            u1[i] = 0; /* empty: the block is outside the query's range */
            if (t->first[i] > j0 + TN_ATTN_KB - 1 || t->last[i] < j0)
                continue;
            u0[i] = t->first[i] > j0 ? t->first[i] - j0 : 0;
            u1[i] = t->last[i] - j0 < TN_ATTN_KB - 1 ? t->last[i] - j0 : TN_ATTN_KB - 1;
            const __mmask16 valid = (__mmask16)((0xFFFFu >> (15 - (u1[i] - u0[i]))) << u0[i]);
            const __m512 si = _mm512_mask_blend_ps(valid, ninf, _mm512_mul_ps(s[i], scale));
            float *ai = acc + (size_t)i * D;
            __m512 l = _mm512_loadu_ps(lsum + (size_t)i * TN_ATTN_KB);
            /* The block's maximum matters only when some score passes the
             * running one (rare after the first blocks): a lane compare
             * decides it without the horizontal reduction. */
            if (_mm512_cmp_ps_mask(si, _mm512_set1_ps(mx[i]), _CMP_GT_OQ)) {
                const float mb = _mm512_reduce_max_ps(si);
                if (mx[i] != -INFINITY) {
                    const __m512 c = exp16(_mm512_set1_ps(mx[i] - mb));
                    l = _mm512_mul_ps(l, c);
                    for (int32_t d = 0; d < D; d += 16)
                        _mm512_storeu_ps(ai + d, _mm512_mul_ps(_mm512_loadu_ps(ai + d), c));
                }
                mx[i] = mb;
            }
            const __m512 p = exp16(_mm512_sub_ps(si, _mm512_set1_ps(mx[i])));
            _mm512_storeu_ps(lsum + (size_t)i * TN_ATTN_KB, _mm512_add_ps(l, p));
            _mm512_store_ps(pv[i], p);
        }
        int i = 0;
        while (i < n) {
            if (u0[i] > u1[i]) {
                i++;
                continue;
            }
            if (i + 4 <= n && u0[i + 1] == u0[i] && u0[i + 2] == u0[i] && u0[i + 3] == u0[i] &&
                u1[i + 1] == u1[i] && u1[i + 2] == u1[i] && u1[i + 3] == u1[i]) {
                float *const a4[4] = {acc + (size_t)i * D, acc + (size_t)(i + 1) * D,
                                      acc + (size_t)(i + 2) * D, acc + (size_t)(i + 3) * D};
                const float *const p4[4] = {pv[i], pv[i + 1], pv[i + 2], pv[i + 3]};
                pv_four(a4, p4, vb, D, u0[i], u1[i]);
                i += 4;
            } else {
                pv_one(acc + (size_t)i * D, pv[i], vb, D, u0[i], u1[i]);
                i++;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        const __m512 inv =
            _mm512_set1_ps(1.0f / sum16(_mm512_loadu_ps(lsum + (size_t)i * TN_ATTN_KB)));
        for (int32_t d = 0; d < D; d += 16)
            _mm512_storeu_ps(t->out[i] + d,
                             _mm512_mul_ps(_mm512_loadu_ps(acc + (size_t)i * D + d), inv));
    }
    return true;
}
