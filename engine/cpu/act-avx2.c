/* The AVX2 + FMA kernel of tn_silu_mul (act.c): the reference's operations,
 * 8 lanes at a time, the tail through masked loads. */
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
