/* The AVX2 + FMA kernels of tn_silu_mul, tn_gelu_mul and tn_softcap
 * (act.c): the references' operations, 8 lanes at a time, the tail through
 * masked loads. */
#include "tn-cpu-internal.h"

#include <immintrin.h>

static inline __m256 silu8(__m256 x) {
    __m256 z = _mm256_sub_ps(_mm256_setzero_ps(), x);
    /* max/min return their second operand for a NaN first: ZMIN, as the
     * reference's comparisons do. */
    z = _mm256_max_ps(z, _mm256_set1_ps(TN_SILU_ZMIN));
    z = _mm256_min_ps(z, _mm256_set1_ps(TN_SILU_ZMAX));
    const __m256 shift = _mm256_set1_ps(TN_SILU_SHIFT);
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(z, _mm256_set1_ps(TN_SILU_LOG2E)), shift);
    const __m256 n = _mm256_sub_ps(t, shift);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-TN_SILU_LN2_HI), z);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-TN_SILU_LN2_LO), r);
    __m256 p = _mm256_set1_ps(TN_SILU_C7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i k = _mm256_slli_epi32(
        _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(shift)), 23);
    const __m256 e = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), k));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

void tn_silu_mul_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(g + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    if (i < n) {
        const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), idx);
        const __m256 y = _mm256_mul_ps(silu8(_mm256_maskload_ps(g + i, m)), _mm256_maskload_ps(u + i, m));
        _mm256_maskstore_ps(g + i, m, y);
    }
}

static inline __m256i tail_mask(int64_t left) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), idx);
}

/* SiLU's polynomial up to p1 (act.c's exp_p1). */
static inline __m256 exp_p1_8(__m256 r) {
    __m256 p = _mm256_set1_ps(TN_SILU_C7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(TN_SILU_C2));
    return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

/* z's reduction in double for four lanes: r (double) and n (int32). */
static inline void gelu_reduce4(__m128 x4, __m128 *r, __m128i *k) {
    const __m256d xd = _mm256_cvtps_pd(x4);
    const __m256d x2 = _mm256_mul_pd(xd, xd);
    __m256d z = _mm256_mul_pd(x2, _mm256_set1_pd(TN_GELU_K3));
    z = _mm256_add_pd(z, _mm256_set1_pd(TN_GELU_K1));
    z = _mm256_mul_pd(z, xd);
    z = _mm256_max_pd(z, _mm256_set1_pd(TN_GELU_ZMIN));
    z = _mm256_min_pd(z, _mm256_set1_pd(TN_GELU_ZMAX));
    const __m256d shift = _mm256_set1_pd(TN_GELU_SHIFT);
    const __m256d t = _mm256_add_pd(_mm256_mul_pd(z, _mm256_set1_pd(TN_GELU_LOG2E)), shift);
    const __m256d n = _mm256_sub_pd(t, shift);
    const __m256d rd = _mm256_sub_pd(z, _mm256_mul_pd(n, _mm256_set1_pd(TN_GELU_LN2)));
    *r = _mm256_cvtpd_ps(rd);
    *k = _mm256_cvttpd_epi32(n);
}

static inline __m256 gelu8(__m256 x) {
    /* max returns its second operand for a NaN in either: x, as the
     * reference's comparison does. */
    const __m256 xc = _mm256_max_ps(_mm256_set1_ps(TN_GELU_XMIN), x);
    __m128 rl, rh;
    __m128i kl, kh;
    gelu_reduce4(_mm256_castps256_ps128(xc), &rl, &kl);
    gelu_reduce4(_mm256_extractf128_ps(xc, 1), &rh, &kh);
    const __m256 r = _mm256_set_m128(rh, rl);
    const __m256i k = _mm256_slli_epi32(_mm256_set_m128i(kh, kl), 23);
    const __m256 p = _mm256_fmadd_ps(exp_p1_8(r), r, _mm256_set1_ps(1.0f));
    const __m256 e = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), k));
    return _mm256_div_ps(xc, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

void tn_gelu_mul_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(g + i, _mm256_mul_ps(gelu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        const __m256 y = _mm256_mul_ps(gelu8(_mm256_maskload_ps(g + i, m)), _mm256_maskload_ps(u + i, m));
        _mm256_maskstore_ps(g + i, m, y);
    }
}

static inline __m256 tanh8(__m256 y) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 a = _mm256_andnot_ps(sign, y);
    __m256 z = _mm256_mul_ps(a, _mm256_set1_ps(-2.0f));
    z = _mm256_max_ps(z, _mm256_set1_ps(TN_SILU_ZMIN)); /* NaN -> ZMIN */
    const __m256 shift = _mm256_set1_ps(TN_SILU_SHIFT);
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(z, _mm256_set1_ps(TN_SILU_LOG2E)), shift);
    const __m256 n = _mm256_sub_ps(t, shift);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-TN_SILU_LN2_HI), z);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-TN_SILU_LN2_LO), r);
    const __m256 q = _mm256_mul_ps(exp_p1_8(r), r);
    const __m256i nb = _mm256_add_epi32(
        _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(shift)), _mm256_set1_epi32(127));
    const __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(nb, 23));
    const __m256 w = _mm256_fmadd_ps(s, q, _mm256_sub_ps(s, _mm256_set1_ps(1.0f)));
    const __m256 th = _mm256_div_ps(_mm256_xor_ps(w, sign), _mm256_add_ps(_mm256_set1_ps(2.0f), w));
    const __m256 res = _mm256_or_ps(_mm256_andnot_ps(sign, th), _mm256_and_ps(sign, y));
    return _mm256_blendv_ps(res, y, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
}

void tn_softcap_avx2(float *v, int64_t n, float cap) {
    const __m256 c = _mm256_set1_ps(cap);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(v + i, _mm256_mul_ps(c, tanh8(_mm256_div_ps(_mm256_loadu_ps(v + i), c))));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(v + i, m, _mm256_mul_ps(c, tanh8(_mm256_div_ps(_mm256_maskload_ps(v + i, m), c))));
    }
}
