/* BF16 weights with the AVX-512 BF16 dot product (vdpbf16ps): activations
 * are rounded to bf16 once per row and matmul (round to nearest even), then
 * each instruction does 32 products in f32. Compiled with the BF16 flag on
 * top of the AVX-512 ones; only called when CPUID reports AVX512_BF16. */
#include "tn-cpu-internal.h"

#include <immintrin.h>

static size_t act_bf16_bytes(int64_t cols) { return (size_t)((cols + 31) / 32) * 64; }

static void convert_bf16(const float *x, void *dst, int64_t cols) {
    __m512i *out = dst;
    for (int64_t k = 0; k < cols; k += 32) {
        int64_t left = cols - k;
        __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
        __mmask16 m1 = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
        __m512 a = _mm512_maskz_loadu_ps(m0, x + k);
        __m512 b = _mm512_maskz_loadu_ps(m1, x + k + 16);
        /* cvtne2ps puts its second operand in the low half. */
        _mm512_store_si512(out + k / 32, (__m512i)_mm512_cvtne2ps_pbh(b, a));
    }
}

static inline float hsum(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

#define KB 16

static inline __attribute__((always_inline)) void rows(const uint16_t *w, int64_t cols,
                                                       const uint8_t *act, size_t as, int nb,
                                                       float *y, int64_t ys) {
    __m512 acc[KB];
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < cols; k += 32) {
        int64_t left = cols - k;
        __mmask32 m = left >= 32 ? 0xffffffffu : (__mmask32)((1u << left) - 1);
        __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w + k);
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++) {
            __m512bh xv = (__m512bh)_mm512_load_si512(act + j * as + k * 2);
            acc[j] = _mm512_dpbf16_ps(acc[j], wv, xv);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define CALL(N) rows(wr, cols, act, mm->act_row, N, y, w->rows)

static void tile(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0, int nb) {
    (void)thr;
    const tn_weight *w = mm->w;
    const int64_t cols = w->cols;
    for (int64_t r = r0; r < r1; r++) {
        const uint16_t *wr = (const uint16_t *)((const uint8_t *)w->data + (size_t)r * w->row_bytes);
        for (int j0 = 0, n; j0 < nb; j0 += n) {
            const uint8_t *act = (const uint8_t *)mm->act + (b0 + j0) * mm->act_row;
            float *y = mm->y + (b0 + j0) * w->rows + r;
            /* Passes of 16, 8, 4, 2, 1 rows (see kernels-avx512.c). */
            for (n = KB; n > nb - j0; n >>= 1) {
            }
            switch (n) {
            case 1: CALL(1); break;
            case 2: CALL(2); break;
            case 4: CALL(4); break;
            case 8: CALL(8); break;
            default: CALL(16); break;
            }
        }
    }
}

bool tn_mm_ops_avx512bf16(tn_mm_ops *ops, uint32_t type) {
    if (type != TN_TYPE_BF16)
        return false;
    ops->act_bytes = act_bf16_bytes;
    ops->convert = convert_bf16;
    ops->tile = tile;
    return true;
}
