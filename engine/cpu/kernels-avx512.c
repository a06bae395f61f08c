/* AVX-512 kernels (F, BW, VL, DQ and VNNI; BF16 lives in its own file).
 * This file alone is compiled with those flags; matmul.c calls into it only
 * after CPUID said yes.
 *
 * Shape of every kernel: one weight row is read once and unpacked once per
 * block, then dotted with up to KB activation rows held in registers (one
 * accumulator each). What happens to activation row b is the same sequence
 * of vector instructions whether it shares the pass with 0 or 15 other
 * rows, so its result is bitwise independent of the batch.
 *
 * Integer kernels: activations are quantized once per row and matmul to
 * 8 bits (one scale per 32 values for the 32-blocks, per 256 for the
 * K-quants), laid out the way the unpacked weights come out of registers. */
#include "tn-cpu-internal.h"

#include "tn-quant.h"
#include "tn-avx512-dpbusd.h"

#include <stdatomic.h>

#include <immintrin.h>
#include <string.h>

/* Activation rows per pass, one zmm accumulator each (K-quants keep more
 * weight state in registers, so take fewer; QUANT_TILE repeats these
 * numbers as literals, which name its DISPATCH_P2_ macro). */
#define KB 16
#define KB_K 8

static inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
static inline uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Fixed-order horizontal sum (part of the result's definition). */
static inline float hsum(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* Calls CALL(n) with a compile-time n (a power of two) so that the
 * accumulator arrays live in registers. A tile of nb rows runs as passes of
 * 16, 8, 4, 2, 1 (nb = 13: 8 + 4 + 1): five instantiations per kernel
 * instead of sixteen keep the build fast, and a row's arithmetic is the
 * same in every pass size. */
static inline int pass_rows(int left, int max) {
    int n = max;
    while (n > left)
        n >>= 1;
    return n;
}
#define DISPATCH_P2_8(n, CALL) \
    switch (n) {               \
    case 1: CALL(1); break;    \
    case 2: CALL(2); break;    \
    case 4: CALL(4); break;    \
    default: CALL(8); break;   \
    }
#define DISPATCH_P2_16(n, CALL) \
    if ((n) < 16) {             \
        DISPATCH_P2_8(n, CALL)  \
    } else {                    \
        CALL(16);               \
    }

#define INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------ f32 / f16 */

/* Activations are read as f32 straight from the caller. Columns past the
 * last multiple of 16 go through a masked load (zeros). */
INLINE void rows_f32(const float *w, int64_t cols, const float *x, int64_t xs, int nb,
                     float *y, int64_t ys) {
    __m512 acc[KB];
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= cols; k += 16) {
        __m512 wv = _mm512_loadu_ps(w + k);
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++)
            acc[j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + j * xs + k), acc[j]);
    }
    if (k < cols) {
        __mmask16 m = (__mmask16)((1u << (cols - k)) - 1);
        __m512 wv = _mm512_maskz_loadu_ps(m, w + k);
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++)
            acc[j] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + j * xs + k), acc[j]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

INLINE void rows_f16(const uint16_t *w, int64_t cols, const float *x, int64_t xs, int nb,
                     float *y, int64_t ys) {
    __m512 acc[KB];
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= cols; k += 16) {
        __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + k)));
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++)
            acc[j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + j * xs + k), acc[j]);
    }
    if (k < cols) {
        __mmask16 m = (__mmask16)((1u << (cols - k)) - 1);
        __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + k));
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++)
            acc[j] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + j * xs + k), acc[j]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

/* BF16 weights on a CPU without the BF16 dot product: widen to f32. */
INLINE __m512 bf16x16_to_f32(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

INLINE void rows_bf16(const uint16_t *w, int64_t cols, const float *x, int64_t xs, int nb,
                      float *y, int64_t ys) {
    __m512 acc[KB];
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= cols; k += 16) {
        __m512 wv = bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(w + k)));
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++)
            acc[j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + j * xs + k), acc[j]);
    }
    if (k < cols) {
        __mmask16 m = (__mmask16)((1u << (cols - k)) - 1);
        __m512 wv = bf16x16_to_f32(_mm256_maskz_loadu_epi16(m, w + k));
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++)
            acc[j] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + j * xs + k), acc[j]);
    }
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

/* f32 activations are copied once into the padded scratch (see matmul.c:
 * rows of a power-of-two size would share L1 sets). */
static size_t act_f32_bytes(int64_t cols) { return (size_t)cols * sizeof(float); }
static void convert_f32(const float *x, void *dst, int64_t cols) {
    memcpy(dst, x, (size_t)cols * sizeof(float));
}

#define FLOAT_TILE(NAME, WT, ROWS)                                                            \
    static void NAME(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0,        \
                     int nb) {                                                               \
        (void)thr;                                                                           \
        const tn_weight *w = mm->w;                                                          \
        const int64_t cols = w->cols;                                                        \
        for (int64_t r = r0; r < r1; r++) {                                                  \
            const WT *wr = (const WT *)((const uint8_t *)w->data + (size_t)r * w->row_bytes); \
            for (int j0 = 0, n; j0 < nb; j0 += n) {                                          \
                const float *x = (const float *)((const uint8_t *)mm->act +                  \
                                                 (b0 + j0) * mm->act_row);                   \
                float *y = mm->y + (b0 + j0) * w->rows + r;                                  \
                n = pass_rows(nb - j0, KB);                                                  \
                DISPATCH_P2_16(n, CALL_##ROWS);                                                 \
            }                                                                                \
        }                                                                                    \
    }
#define XS ((int64_t)(mm->act_row / sizeof(float)))
#define CALL_rows_f32(N) rows_f32(wr, cols, x, XS, N, y, w->rows)
#define CALL_rows_f16(N) rows_f16(wr, cols, x, XS, N, y, w->rows)
#define CALL_rows_bf16(N) rows_bf16(wr, cols, x, XS, N, y, w->rows)
FLOAT_TILE(tile_f32, float, rows_f32)
FLOAT_TILE(tile_f16, uint16_t, rows_f16)
FLOAT_TILE(tile_bf16, uint16_t, rows_bf16)

/* ------------------------------------------- 32-value blocks: Q4_0, Q8_0
 *
 * Activations per pair of blocks (64 values), 64-byte aligned:
 *   qs[64]   int8, value order as in the row (Q8_0: stored + 128 as uint8,
 *            so that VNNI's unsigned x signed product applies)
 *   dxv[16]  the block scale, once per int32 lane of vpdpbusd (8 lanes per
 *            block): no shuffles in the inner loop
 *   ci[16]   Q4_0 only: -sum(q) of the block in each of its 8 lanes, so
 *            that dpbusd(ci, nibbles, q) = sum((nibble - 8) * q)
 * An odd last block is paired with zeros. */
typedef struct {
    int8_t qs[64];
    float dxv[16];
    int32_t ci[16];
} act32;
_Static_assert(sizeof(act32) == 192, "act32 is three cache lines");

static size_t act32_bytes(int64_t cols) { return (size_t)((cols + 63) / 64) * sizeof(act32); }

/* One block of 32 floats to int8 with scale max|x| / 127, rounding to
 * nearest even; returns the sum of the quants. */
INLINE int32_t quant_block32(const float *x, float *d_out, int8_t *q) {
    __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    __m512 m = _mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b));
    float amax = _mm512_reduce_max_ps(m);
    float d = amax / 127.0f;
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    __m512 vid = _mm512_set1_ps(id);
    __m512i qa = cvt_q8_512(_mm512_mul_ps(a, vid));
    __m512i qb = cvt_q8_512(_mm512_mul_ps(b, vid));
    _mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtsepi32_epi8(qb));
    *d_out = d;
    return _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
}

/* The scale through fp16 and back, as ggml's block_q8_0 stores it (the
 * quants keep the f32 inverse). A scale past fp16's range (|x| above
 * 8.3e6) keeps its f32 value rather than becoming infinity. */
INLINE float scale_f16(float d) {
    return d < 65504.0f ? _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT)) : d;
}

static void convert_act32(const float *x, void *dst, int64_t cols, bool unsigned_q, bool d16) {
    act32 *a = dst;
    const int64_t nblk = cols / 32;
    for (int64_t p = 0; p < (nblk + 1) / 2; p++) {
        act32 *ap = &a[p];
        for (int h = 0; h < 2; h++) {
            int64_t k = 2 * p + h;
            float d = 0;
            int32_t sum = 0;
            if (k < nblk)
                sum = quant_block32(x + k * 32, &d, ap->qs + 32 * h);
            else
                memset(ap->qs + 32 * h, 0, 32);
            if (d16)
                d = scale_f16(d);
            for (int l = 0; l < 8; l++) {
                ap->dxv[8 * h + l] = d;
                ap->ci[8 * h + l] = -sum;
            }
            /* MXFP4 (d16): each lane's own offset, -128 times the sum of
             * its 4 quants, so that every lane holds its exact integer dot
             * product; a block-wide -16 sum per lane leaves lane values
             * near 128 x 4 x 127 that cancel only after the f32 products,
             * losing up to 2e-5 of the result against ggml's. */
            for (int l = 0; d16 && l < 8; l++) {
                const int8_t *q4 = ap->qs + 32 * h + 4 * l;
                ap->ci[8 * h + l] = -128 * (q4[0] + q4[1] + q4[2] + q4[3]);
            }
        }
        if (unsigned_q) {
            __m512i q = _mm512_load_si512(ap->qs);
            _mm512_store_si512(ap->qs, _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80)));
        }
    }
}

static void convert_q4_0(const float *x, void *dst, int64_t cols) {
    convert_act32(x, dst, cols, false, false);
}
static void convert_q8_0(const float *x, void *dst, int64_t cols) {
    convert_act32(x, dst, cols, true, false);
}
/* MXFP4: ggml's Q8_0 activations exactly (fp16 scales), so that a gpt-oss
 * router near a tie sees the products llama.cpp sees (docs/MODEL.md). */
static void convert_mxfp4(const float *x, void *dst, int64_t cols) {
    convert_act32(x, dst, cols, false, true);
}

/* [d0 x 8, d1 x 8] as floats from two f16 scales. */
INLINE __m512 pair_scales(uint16_t d0, uint16_t d1) {
    __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)d0 | (uint32_t)d1 << 16)));
    return _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                                 _mm512_castps128_ps512(f));
}

/* acc += dw * (dx * dot): the one float update per pair and row. */
INLINE __m512 pair_update(__m512 acc, __m512i dot, const act32 *a, __m512 dwv) {
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_load_ps(a->dxv));
    return _mm512_fmadd_ps(f, dwv, acc);
}

INLINE void rows_q4_0(const uint8_t *w, int64_t nblk, const uint8_t *act, size_t as, int nb,
                      float *y, int64_t ys) {
    const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0,
                                            0x0004000400040004, 0x0004000400040004, 0, 0);
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    __m512 acc[KB];
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nblk; k += 2) {
        const uint8_t *b0 = w + k * 18, *b1 = b0 + 18;
        const bool two = k + 1 < nblk;
        /* [qs0, qs0, qs1, qs1] >> [0, 4, 0, 4] & 15: values in row order. */
        __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 2)));
        __m256i q1 = two ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + 2)))
                         : _mm256_setzero_si256();
        __m512i raw = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        __m512i q = _mm512_and_si512(_mm512_srlv_epi16(raw, shifts), lo4);
        __m512 dwv = pair_scales(rd16(b0), two ? rd16(b1) : 0);
        const act32 *a0 = (const act32 *)act + k / 2;
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++) {
            const act32 *a = (const act32 *)((const uint8_t *)a0 + j * as);
            __m512i dot = _mm512_dpbusd_epi32(_mm512_load_si512(a->ci), q,
                                              _mm512_load_si512(a->qs));
            acc[j] = pair_update(acc[j], dot, a, dwv);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

INLINE void rows_q8_0(const uint8_t *w, int64_t nblk, const uint8_t *act, size_t as, int nb,
                      float *y, int64_t ys) {
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    __m512 acc[KB];
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nblk; k += 2) {
        const uint8_t *b0 = w + k * 34, *b1 = b0 + 34;
        const bool two = k + 1 < nblk;
        __m256i q0 = _mm256_loadu_si256((const __m256i *)(b0 + 2));
        __m256i q1 = two ? _mm256_loadu_si256((const __m256i *)(b1 + 2)) : _mm256_setzero_si256();
        __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        /* Activations come as q + 128: take 128 * sum(w) back off. */
        __m512i corr = _mm512_sub_epi32(_mm512_setzero_si512(),
                                        _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, q));
        __m512 dwv = pair_scales(rd16(b0), two ? rd16(b1) : 0);
        const act32 *a0 = (const act32 *)act + k / 2;
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++) {
            const act32 *a = (const act32 *)((const uint8_t *)a0 + j * as);
            __m512i dot = _mm512_dpbusd_epi32(corr, _mm512_load_si512(a->qs), q);
            acc[j] = pair_update(acc[j], dot, a, dwv);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define QUANT_TILE(NAME, ROWS, BLOCK, NBMAX)                                                  \
    static void NAME(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0,        \
                     int nb) {                                                               \
        (void)thr;                                                                           \
        const tn_weight *w = mm->w;                                                          \
        const int64_t nblk = w->cols / (BLOCK);                                              \
        for (int64_t r = r0; r < r1; r++) {                                                  \
            const uint8_t *wr = (const uint8_t *)w->data + (size_t)r * w->row_bytes;         \
            for (int j0 = 0, n; j0 < nb; j0 += n) {                                          \
                const uint8_t *act = (const uint8_t *)mm->act + (b0 + j0) * mm->act_row;     \
                float *y = mm->y + (b0 + j0) * w->rows + r;                                  \
                n = pass_rows(nb - j0, NBMAX);                                               \
                DISPATCH_P2_##NBMAX(n, CALL_##ROWS);                                         \
            }                                                                                \
        }                                                                                    \
    }
#define CALL_rows_q4_0(N) rows_q4_0(wr, nblk, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q8_0(N) rows_q8_0(wr, nblk, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_q4_0, rows_q4_0, 32, 16)
QUANT_TILE(tile_q8_0, rows_q8_0, 32, 16)

/* ------------------------------------------------- K-quants: Q4_K, Q5_K, Q6_K
 *
 * Activations per 256-value super-block:
 *   qs[256]  int8 with one scale per super-block. Q4_K/Q5_K: sub-blocks of
 *            32 in the order 0,2,1,3,4,6,5,7, which is how the nibbles of
 *            two 32-byte groups come out of one 64-byte register (low
 *            nibbles: sub-blocks 2g, 2g+2; high: 2g+1, 2g+3). Q6_K: row order.
 *   bs[16]   int16 sums: per sub-block of 32 in row order (Q4_K/Q5_K, 8 used,
 *            for the mins) or per 16 values (Q6_K, for its -32 offset)
 *   d        the scale */
typedef struct {
    int8_t qs[256];
    int16_t bs[16];
    float d;
    uint8_t pad[28];
} act256;
_Static_assert(sizeof(act256) == 320, "act256 is five cache lines");

static size_t act256_bytes(int64_t cols) { return (size_t)(cols / 256) * sizeof(act256); }

static void convert_act256(const float *x, void *dst, int64_t cols, bool kq_order) {
    act256 *a = dst;
    static const int order[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (int64_t s = 0; s < cols / 256; s++, x += 256) {
        act256 *as = &a[s];
        __m512 m = _mm512_setzero_ps();
        for (int i = 0; i < 256; i += 16)
            m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
        float amax = _mm512_reduce_max_ps(m);
        as->d = amax / 127.0f;
        __m512 vid = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        int32_t sum16[16];
        for (int i = 0; i < 16; i++) {
            __m512i q = cvt_q8_512(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * i), vid));
            sum16[i] = _mm512_reduce_add_epi32(q);
            int dst_i = kq_order ? 2 * order[i / 2] + (i & 1) : i;
            _mm_storeu_si128((__m128i *)(as->qs + 16 * dst_i), _mm512_cvtsepi32_epi8(q));
        }
        memset(as->bs, 0, sizeof as->bs);
        for (int i = 0; i < 16; i++) {
            if (kq_order)
                as->bs[i / 2] = (int16_t)(as->bs[i / 2] + sum16[i]);
            else
                as->bs[i] = (int16_t)sum16[i];
        }
        memset(as->pad, 0, sizeof as->pad);
    }
}

static void convert_kq(const float *x, void *dst, int64_t cols) {
    convert_act256(x, dst, cols, true);
}
static void convert_q6k(const float *x, void *dst, int64_t cols) {
    convert_act256(x, dst, cols, false);
}

/* The 6-bit scales and mins of Q4_K/Q5_K, 8 each. */
INLINE void kq_scales_mins(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t w0, w1, w2;
    memcpy(&w0, s, 4);
    memcpy(&w1, s + 4, 4);
    memcpy(&w2, s + 8, 4);
    uint32_t sc_lo = w0 & 0x3f3f3f3f, mn_lo = w1 & 0x3f3f3f3f;
    uint32_t sc_hi = (w2 & 0x0f0f0f0f) | (((w0 >> 6) & 0x03030303) << 4);
    uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0f) | (((w1 >> 6) & 0x03030303) << 4);
    memcpy(sc, &sc_lo, 4);
    memcpy(sc + 4, &sc_hi, 4);
    memcpy(mn, &mn_lo, 4);
    memcpy(mn + 4, &mn_hi, 4);
}

/* Weight state of one Q4_K/Q5_K super-block: four registers of quants
 * (sub-block pairs in activation order) and the matching int16 scales. */
typedef struct {
    __m512i q[4];
    __m512i sc[4];
    __m128i mins; /* int16 x 8 */
    float d, dmin;
} kq_state;

INLINE void kq_load_scales(kq_state *st, const uint8_t *scales) {
    uint8_t sc[8], mn[8];
    kq_scales_mins(scales, sc, mn);
    uint64_t s64, m64;
    memcpy(&s64, sc, 8);
    memcpy(&m64, mn, 8);
    __m512i s16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)s64)));
    st->mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m64));
    /* Register i holds sub-blocks (A, B) = (0,2), (1,3), (4,6), (5,7). */
    static const int pairs[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    for (int i = 0; i < 4; i++) {
        __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16((short)pairs[i][0]),
                                         _mm256_set1_epi16((short)pairs[i][1]), 1);
        st->sc[i] = _mm512_permutexvar_epi16(idx, s16);
    }
}

INLINE void kq_load_q4(kq_state *st, const uint8_t *qs) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    for (int g = 0; g < 2; g++) {
        __m512i v = _mm512_loadu_si512(qs + 64 * g);
        st->q[2 * g] = _mm512_and_si512(v, lo4);
        st->q[2 * g + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
    }
}

/* Q5_K: bit 2g of qh[l] is the fifth bit of sub-block 2g's value l, bit
 * 2g+1 that of sub-block 2g+1. */
INLINE void kq_add_q5_high(kq_state *st, const uint8_t *qh) {
    __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh));
    const __m512i b16 = _mm512_set1_epi8(0x10);
    static const int pairs[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    for (int i = 0; i < 4; i++) {
        __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << pairs[i][0])),
                                         _mm256_set1_epi8((char)(1 << pairs[i][1])), 1);
        __mmask64 m = _mm512_test_epi8_mask(h, sel);
        st->q[i] = _mm512_mask_add_epi8(st->q[i], m, st->q[i], b16);
    }
}

/* sum over the super-block of sc * (q . x) as int32 lanes. */
INLINE __m512i kq_dot(const __m512i q[4], const __m512i sc[4], const int8_t *x) {
    __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512i p = _mm512_maddubs_epi16(q[i], _mm512_load_si512(x + 64 * i));
        acc = _mm512_dpwssd_epi32(acc, p, sc[i]);
    }
    return acc;
}

INLINE void rows_kq(const uint8_t *w, int64_t nsb, bool q5, const uint8_t *act, size_t as,
                    int nb, float *y, int64_t ys) {
    __m512 acc[KB_K];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    const size_t bb = q5 ? sizeof(tn_block_q5_K) : sizeof(tn_block_q4_K);
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * bb;
        kq_state st;
        st.d = half_to_float(rd16(blk));
        st.dmin = half_to_float(rd16(blk + 2));
        kq_load_scales(&st, blk + 4);
        if (q5) {
            kq_load_q4(&st, blk + 16 + 32);
            kq_add_q5_high(&st, blk + 16);
        } else {
            kq_load_q4(&st, blk + 16);
        }
        const __m512 vd = _mm512_set1_ps(st.d), vdmin = _mm512_set1_ps(-st.dmin);
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m512i isum = kq_dot(st.q, st.sc, a->qs);
            __m128i msum = _mm_madd_epi16(st.mins, _mm_load_si128((const __m128i *)a->bs));
            __m512 dx = _mm512_set1_ps(a->d);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(vd, dx), acc[j]);
            acc[j] = _mm512_fmadd_ps(_mm512_zextps128_ps512(_mm_cvtepi32_ps(msum)),
                                     _mm512_mul_ps(vdmin, dx), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

/* Q6_K: per half of 128 values, the low nibbles of ql[0..63] are values
 * 0..63 and the high nibbles values 64..127, in row order; qh[0..31] gives
 * bits 4-5 in pairs (bits 0-1: values 0..31, 2-3: 32..63, 4-5: 64..95,
 * 6-7: 96..127). Quants are stored + 32; the offset is taken off with the
 * per-16 sums of the activations. Scales: int8, one per 16 values. */
INLINE void rows_q6k(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, int nb,
                     float *y, int64_t ys) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f), b45 = _mm512_set1_epi8(0x30);
    const __m512i sh_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i sh_hi = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    __m512 acc[KB_K];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * sizeof(tn_block_q6_K);
        const uint8_t *ql = blk, *qh = blk + 128;
        const int8_t *scales = (const int8_t *)(blk + 192);
        const float d = half_to_float(rd16(blk + 208));
        __m512i q[4], sc[4];
        for (int h = 0; h < 2; h++) {
            __m512i l = _mm512_loadu_si512(ql + 64 * h);
            __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qh + 32 * h)));
            __m512i lo = _mm512_and_si512(l, lo4);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(l, 4), lo4);
            q[2 * h] = _mm512_or_si512(lo, _mm512_and_si512(_mm512_sllv_epi16(hb, sh_lo), b45));
            q[2 * h + 1] =
                _mm512_or_si512(hi, _mm512_and_si512(_mm512_srlv_epi16(hb, sh_hi), b45));
        }
        __m512i s16 = _mm512_castsi256_si512(
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)scales)));
        for (int i = 0; i < 4; i++) {
            /* Register i covers scales 4i..4i+3, eight int16 lanes each. */
            __m512i idx = _mm512_set_epi16(
                4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3,
                4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2,
                4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1,
                4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i);
            sc[i] = _mm512_permutexvar_epi16(idx, s16);
        }
        const __m256i sc256 = _mm512_castsi512_si256(s16);
        const __m512 vd = _mm512_set1_ps(d);
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m512i isum = kq_dot(q, sc, a->qs);
            __m256i off = _mm256_madd_epi16(sc256, _mm256_load_si256((const __m256i *)a->bs));
            isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                     _mm512_mul_ps(vd, _mm512_set1_ps(a->d)), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define CALL_rows_q4k(N) rows_kq(wr, nblk, false, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q5k(N) rows_kq(wr, nblk, true, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q6k(N) rows_q6k(wr, nblk, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_q4k, rows_q4k, 256, 8)
QUANT_TILE(tile_q5k, rows_q5k, 256, 8)
QUANT_TILE(tile_q6k, rows_q6k, 256, 8)


/* ------------------------------------- Q2_K, Q3_K, IQ4_NL, IQ4_XS
 *
 * Q2_K/Q3_K: register i holds values 64i..64i+63 (four sub-blocks of 16,
 * one per 128-bit lane), in row order: the 2-bit quants of both halves
 * come from qs[32(i/2) ..] shifted by 2j and 2j + 2 (j = 2(i%2)), Q3_K's
 * third bits from hmask bits 2i and 2i + 1. Activations in row order with
 * per-16 sums (as Q6_K). Q3_K's quants go in as q + 4 and 4 * sum(sc * x)
 * is taken back off with those sums.
 * IQ4_NL: as Q4_0 with the nibbles looked up (vpshufb) in the table + 128,
 * unsigned for vpdpbusd; the 128 * sum(x) this adds comes off through the
 * accumulator's start value, 16 * ci in each of the 8 lanes of a block.
 * IQ4_XS: signed levels through vpmaddubsw as |w| times x with w's sign,
 * and vpdpwssd with the sub-block scales, as Q4_K. */

INLINE __m512i q2k_bits(const uint8_t *qs, int i) {
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * (i / 2))));
    const int j = 2 * (i % 2);
    const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * j)),
                                          _mm256_set1_epi16((short)(2 * j + 2)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(v, sh), _mm512_set1_epi8(3));
}

/* int16 scales s16[0..15] spread so that register i has scale 4i + l in
 * its 128-bit lane l (as Q6_K). */
INLINE void sc16_lanes(__m512i s16, __m512i sc[4]) {
    for (int i = 0; i < 4; i++) {
        __m512i idx = _mm512_set_epi16(
            4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3, 4 * i + 3,
            4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2, 4 * i + 2,
            4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1, 4 * i + 1,
            4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i, 4 * i);
        sc[i] = _mm512_permutexvar_epi16(idx, s16);
    }
}

INLINE void rows_q2k(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, int nb,
                     float *y, int64_t ys) {
    __m512 acc[KB_K];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * sizeof(tn_block_q2_K);
        const uint8_t *qs = blk + 16;
        const float d = half_to_float(rd16(blk + 80)), dmin = half_to_float(rd16(blk + 82));
        const __m128i sraw = _mm_loadu_si128((const __m128i *)blk);
        const __m256i m16 =
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sraw, 4), _mm_set1_epi8(0x0f)));
        __m512i q[4], sc[4];
        sc16_lanes(_mm512_castsi256_si512(
                       _mm256_cvtepu8_epi16(_mm_and_si128(sraw, _mm_set1_epi8(0x0f)))),
                   sc);
        for (int i = 0; i < 4; i++)
            q[i] = q2k_bits(qs, i);
        const __m512 vd = _mm512_set1_ps(d), vdmin = _mm512_set1_ps(-dmin);
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m512i isum = kq_dot(q, sc, a->qs);
            __m256i msum = _mm256_madd_epi16(m16, _mm256_load_si256((const __m256i *)a->bs));
            __m512 dx = _mm512_set1_ps(a->d);
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(vd, dx), acc[j]);
            acc[j] = _mm512_fmadd_ps(_mm512_zextps256_ps512(_mm256_cvtepi32_ps(msum)),
                                     _mm512_mul_ps(vdmin, dx), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

INLINE void rows_q3k(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, int nb,
                     float *y, int64_t ys) {
    __m512 acc[KB_K];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * sizeof(tn_block_q3_K);
        const uint8_t *hmask = blk, *qs = blk + 32, *sp = blk + 96;
        const float d = half_to_float(rd16(blk + 108));
        /* The 16 6-bit scales: low nibbles from bytes 0..7 (k < 8) and their
         * high nibbles (k >= 8), top 2 bits from bytes 8..11. */
        uint32_t a0, a1, a2;
        memcpy(&a0, sp, 4);
        memcpy(&a1, sp + 4, 4);
        memcpy(&a2, sp + 8, 4);
        const __m128i sv = _mm_setr_epi32(
            (int)((a0 & 0x0f0f0f0f) | ((a2 & 0x03030303) << 4)),
            (int)((a1 & 0x0f0f0f0f) | (((a2 >> 2) & 0x03030303) << 4)),
            (int)(((a0 >> 4) & 0x0f0f0f0f) | (((a2 >> 4) & 0x03030303) << 4)),
            (int)(((a1 >> 4) & 0x0f0f0f0f) | (((a2 >> 6) & 0x03030303) << 4)));
        const __m256i s16 =
            _mm256_sub_epi16(_mm256_cvtepu8_epi16(sv), _mm256_set1_epi16(32));
        __m512i q[4], sc[4];
        sc16_lanes(_mm512_castsi256_si512(s16), sc);
        const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)hmask));
        for (int i = 0; i < 4; i++) {
            const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * i))),
                                                   _mm256_set1_epi8((char)(1 << (2 * i + 1))), 1);
            const __mmask64 m = _mm512_test_epi8_mask(hm, sel);
            const __m512i lo = q2k_bits(qs, i);
            q[i] = _mm512_mask_add_epi8(lo, m, lo, _mm512_set1_epi8(4));
        }
        const __m512 vd = _mm512_set1_ps(d);
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m512i isum = kq_dot(q, sc, a->qs);
            __m256i off = _mm256_madd_epi16(s16, _mm256_load_si256((const __m256i *)a->bs));
            isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(off, 2)));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                     _mm512_mul_ps(vd, _mm512_set1_ps(a->d)), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

/* The IQ4 table in every 128-bit lane, plus `bias` on each level. */
INLINE void rows_iq4nl(const uint8_t *w, int64_t nblk, const uint8_t *act, size_t as, int nb,
                       float *y, int64_t ys) {
    const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0,
                                            0x0004000400040004, 0x0004000400040004, 0, 0);
    const __m512i lo4 = _mm512_set1_epi8(0x0f), table = levels_table512(tn_iq4nl_values, 128);
    __m512 acc[KB];
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nblk; k += 2) {
        const uint8_t *b0 = w + k * 18, *b1 = b0 + 18;
        const bool two = k + 1 < nblk;
        __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 2)));
        __m256i q1 = two ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + 2)))
                         : _mm256_setzero_si256();
        __m512i raw = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        __m512i q = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srlv_epi16(raw, shifts), lo4));
        __m512 dwv = pair_scales(rd16(b0), two ? rd16(b1) : 0);
        const act32 *a0 = (const act32 *)act + k / 2;
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++) {
            const act32 *a = (const act32 *)((const uint8_t *)a0 + j * as);
            __m512i start = _mm512_slli_epi32(_mm512_load_si512(a->ci), 4);
            __m512i dot = _mm512_dpbusd_epi32(start, q, _mm512_load_si512(a->qs));
            acc[j] = pair_update(acc[j], dot, a, dwv);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

INLINE void rows_iq4xs(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, int nb,
                       float *y, int64_t ys) {
    const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0,
                                            0x0004000400040004, 0x0004000400040004, 0, 0);
    const __m512i lo4 = _mm512_set1_epi8(0x0f), table = levels_table512(tn_iq4nl_values, 0);
    __m512 acc[KB_K];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * sizeof(tn_block_iq4_xs);
        const float d = half_to_float(rd16(blk));
        const unsigned sh = rd16(blk + 2);
        const uint8_t *sl = blk + 4, *qs = blk + 8;
        __m512i aq[4], sc[4];
        __mmask64 neg[4];
        for (int i = 0; i < 4; i++) {
            /* [16 bytes of sub-block 2i] x 2, [16 of 2i + 1] x 2, shifted by
             * 0, 4, 0, 4: the 64 values in row order. */
            __m512i v = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(qs + 32 * i)));
            v = _mm512_shuffle_i64x2(v, v, 0x50);
            __m512i q = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srlv_epi16(v, shifts), lo4));
            aq[i] = _mm512_abs_epi8(q);
            neg[i] = _mm512_movepi8_mask(q);
            const int l0 = (int)((sl[i] & 15) | ((sh >> (4 * i)) & 3) << 4) - 32;
            const int l1 = (int)((sl[i] >> 4) | ((sh >> (4 * i + 2)) & 3) << 4) - 32;
            sc[i] = _mm512_inserti64x4(_mm512_set1_epi16((short)l0), _mm256_set1_epi16((short)l1), 1);
        }
        const __m512 vd = _mm512_set1_ps(d);
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                __m512i x = _mm512_load_si512(a->qs + 64 * i);
                x = _mm512_mask_sub_epi8(x, neg[i], _mm512_setzero_si512(), x);
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(aq[i], x), sc[i]);
            }
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                     _mm512_mul_ps(vd, _mm512_set1_ps(a->d)), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define CALL_rows_q2k(N) rows_q2k(wr, nblk, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q3k(N) rows_q3k(wr, nblk, act, mm->act_row, N, y, w->rows)
#define CALL_rows_iq4nl(N) rows_iq4nl(wr, nblk, act, mm->act_row, N, y, w->rows)
#define CALL_rows_iq4xs(N) rows_iq4xs(wr, nblk, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_q2k, rows_q2k, 256, 8)
QUANT_TILE(tile_q3k, rows_q3k, 256, 8)
QUANT_TILE(tile_iq4nl, rows_iq4nl, 32, 16)
QUANT_TILE(tile_iq4xs, rows_iq4xs, 256, 8)

/* The four types above; false for any other. */
static bool mm_ops_new_types(tn_mm_ops *ops, uint32_t type) {
    switch (type) {
    case TN_TYPE_Q2_K:
    case TN_TYPE_Q3_K:
    case TN_TYPE_IQ4_XS:
        ops->act_bytes = act256_bytes;
        ops->convert = convert_q6k;
        ops->tile = type == TN_TYPE_Q2_K ? tile_q2k : type == TN_TYPE_Q3_K ? tile_q3k : tile_iq4xs;
        return true;
    case TN_TYPE_IQ4_NL:
        ops->act_bytes = act32_bytes;
        ops->convert = convert_q4_0;
        ops->tile = tile_iq4nl;
        return true;
    default:
        return false;
    }
}

/* ------------------------------------------------------------------ MXFP4
 *
 * As IQ4_NL: the nibbles look up the 16 E2M1 levels (doubled: integers)
 * + 128 with vpshufb, unsigned for vpdpbusd, and the 128 * sum(x) this adds
 * comes off through the accumulator's start value (each lane's -128 times
 * the sum of its own 4 quants, convert_mxfp4: every lane exact). Each block's scale is the E8M0 byte's power of two,
 * halved (tn_e8m0_half). Activations: Q4_0's (act32, signed), their scales
 * rounded to fp16 as ggml's Q8_0 (convert_mxfp4). */
INLINE void rows_mxfp4(const uint8_t *w, int64_t nblk, const uint8_t *act, size_t as, int nb,
                       float *y, int64_t ys) {
    const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0,
                                            0x0004000400040004, 0x0004000400040004, 0, 0);
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    const __m512i table = levels_table512(tn_mxfp4_values, 128);
    __m512 acc[KB];
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nblk; k += 2) {
        const uint8_t *b0 = w + k * sizeof(tn_block_mxfp4), *b1 = b0 + sizeof(tn_block_mxfp4);
        const bool two = k + 1 < nblk;
        __m256i q0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 1)));
        __m256i q1 = two ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + 1)))
                         : _mm256_setzero_si256();
        __m512i raw = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        __m512i q = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srlv_epi16(raw, shifts), lo4));
        /* An odd last block pairs with zero activations: its scale is 0. */
        const __m512 dwv = _mm512_insertf32x8(_mm512_set1_ps(tn_e8m0_half(b0[0])),
                                              _mm256_set1_ps(two ? tn_e8m0_half(b1[0]) : 0.0f), 1);
        const act32 *a0 = (const act32 *)act + k / 2;
#pragma GCC unroll 16
        for (int j = 0; j < nb; j++) {
            const act32 *a = (const act32 *)((const uint8_t *)a0 + j * as);
            __m512i dot = _mm512_dpbusd_epi32(_mm512_load_si512(a->ci), q,
                                              _mm512_load_si512(a->qs));
            /* ggml's order: the two scales' product (exact: dw is a power
             * of two) times the integer sum, added by one fma. */
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                     _mm512_mul_ps(_mm512_load_ps(a->dxv), dwv), acc[j]);
        }
    }
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define CALL_rows_mxfp4(N) rows_mxfp4(wr, nblk, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_mxfp4, rows_mxfp4, 32, 16)

static bool mm_ops_mxfp4(tn_mm_ops *ops, uint32_t type) {
    if (type != TN_TYPE_MXFP4)
        return false;
    ops->act_bytes = act32_bytes;
    ops->convert = convert_mxfp4;
    ops->tile = tile_mxfp4;
    return true;
}

/* ------------------------------------------- X16 layout: Q4_0 and Q8_0
 *
 * Weights interleaved 16 rows at a time (repack.c): register j of a block
 * holds values 4j..4j+3 of 16 rows, so vpdpbusd against the activation's
 * 4 bytes broadcast yields the 16 rows' partial sums in 16 lanes, and after
 * 8 of them each lane holds its row's whole block dot product: no
 * horizontal sums, one float update per block for 16 rows, and each weight
 * register serves every activation row of the tile.
 *
 * Activations, per row: qs[cols] int8 in row order, then dx[cols / 32]
 * f32, then ci[cols / 32] int32 = -offset * sum(q) of the block, where the
 * offset (8 for Q4_0's nibbles, 128 for Q8_0's biased bytes) is what the
 * unsigned weights carry. */
static size_t act_x16_bytes(int64_t cols) { return (size_t)cols + 8 * (size_t)(cols / 32); }

static void convert_x16(const float *x, void *dst, int64_t cols, int32_t offset, bool d16) {
    int8_t *qs = dst;
    const int64_t nblk = cols / 32;
    float *dx = (float *)(qs + cols);
    int32_t *ci = (int32_t *)(dx + nblk);
    for (int64_t k = 0; k < nblk; k++) {
        float d;
        int32_t sum = quant_block32(x + 32 * k, &d, qs + 32 * k);
        dx[k] = d16 ? scale_f16(d) : d;
        ci[k] = -offset * sum;
    }
}

static void convert_x16_q4_0(const float *x, void *dst, int64_t cols) {
    convert_x16(x, dst, cols, 8, false);
}
static void convert_x16_q8_0(const float *x, void *dst, int64_t cols) {
    convert_x16(x, dst, cols, 128, false);
}
/* IQ4_NL's levels go in + 128 (unsigned for vpdpbusd), as Q8_0's quants. */
static void convert_x16_iq4nl(const float *x, void *dst, int64_t cols) {
    convert_x16(x, dst, cols, 128, false);
}
/* MXFP4's too, with ggml's fp16 activation scales (as convert_mxfp4). */
static void convert_x16_mxfp4(const float *x, void *dst, int64_t cols) {
    convert_x16(x, dst, cols, 128, true);
}


/* s + the eight dot products of a 32-value block (wq) with its activation
 * bytes x, as two chains of four: integer sums, the same bits as one chain. */
INLINE __m512i dot8_two_chains(__m512i s, const __m512i wq[8], const uint8_t *x) {
    __m512i s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int j = 0; j < 8; j += 2) {
        int32_t xw0, xw1;
        memcpy(&xw0, x + 4 * j, 4);
        memcpy(&xw1, x + 4 * j + 4, 4);
        s = _mm512_dpbusd_epi32(s, wq[j], _mm512_set1_epi32(xw0));
        s1 = _mm512_dpbusd_epi32(s1, wq[j + 1], _mm512_set1_epi32(xw1));
    }
    return _mm512_add_epi32(s, s1);
}

/* The 16 rows' E8M0 scales of an MXFP4 block (16 bytes at e), halved as
 * tn_e8m0_half: 2^(e - 128). e << 23 is the float 2^(e - 127) for e >= 1;
 * the max gives e = 0 the float 2^-127; halving is then exact (2^-128 and
 * 2^-127 come out as the denormals tn_e8m0_half writes). Only e = 255
 * differs (infinite here, 2^127 there), and the loader refuses e >= 253
 * (weights-finite.c): such a block overflows either way. */
INLINE __m512 e8m0_half16(const uint8_t *e) {
    const __m512i bits = _mm512_max_epu32(
        _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e)), 23),
        _mm512_set1_epi32(0x00400000));
    return _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0.5f));
}

static _Atomic int near_chunks_4bit = TN_X16_PREFETCH_NEAR_4BIT;

void tn_cpu_set_4bit_near_chunks(int chunks) {
    atomic_store_explicit(&near_chunks_4bit, chunks < 1 ? 1 : chunks > 64 ? 64 : chunks,
                          memory_order_relaxed);
}

/* Block k of one group of 16 rows against nb activation rows. mx: MXFP4,
 * IQ4_NL's nibbles with E8M0 scales (a 32-byte header, repack.c). */
INLINE void x16_block(const uint8_t *g, int64_t k, int64_t nblk, bool q8, bool nl, bool mx,
                      __m512i nl_table, tn_prefetch_mode pf_mode, const uint8_t *act, size_t as,
                      int nb, __m512 *acc) {
    const size_t qb = q8 ? 512 : 256, hdr = mx ? 32 : 64, chunk = hdr + 2 * qb;
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
    const uint8_t *c = g + (size_t)(k / 2) * chunk;
    const int h = (int)(k & 1);
    /* With several activation rows the weights are consumed slower than
     * DRAM delivers them and the hardware prefetcher stops running ahead:
     * asking for the block two chunks on (near) made a 16-row verify step
     * 25-30 % faster. At one or two rows (decode) Q4_0 on session 10's
     * host needed the stream requested further ahead, into L2 (far): 8
     * chunks (4.6 KB) on took Gemma 4 E4B's decode from 9.0-11.2 to 12.1
     * tok/s (docs/PERFORMANCE.md). Each context now measures the modes
     * (x16_prefetch). */
    x16_prefetch_ahead(c, chunk, (size_t)h * (chunk / 2), chunk / 2, pf_mode,
                       !q8
                           ? (size_t)atomic_load_explicit(&near_chunks_4bit, memory_order_relaxed)
                           : TN_X16_PREFETCH_NEAR);
    const __m512 dw = mx ? e8m0_half16(c + 16 * h)
                         : _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(c + 32 * h)));
    const uint8_t *q = c + hdr + (size_t)h * qb;
    __m512i wq[8];
    if (q8) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            wq[j] = _mm512_load_si512(q + 64 * j);
    } else {
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m512i v = mx ? _mm512_loadu_si512(q + 64 * p) : _mm512_load_si512(q + 64 * p);
            wq[p] = _mm512_and_si512(v, lo4);
            wq[p + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
        }
        if (nl) { /* IQ4_NL, MXFP4: the nibbles index their levels (+ 128) */
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++)
                wq[j] = _mm512_shuffle_epi8(nl_table, wq[j]);
        }
    }
#pragma GCC unroll 16
    for (int b = 0; b < nb; b++) {
        const uint8_t *a = act + (size_t)b * as;
        const float *dx = (const float *)(a + 32 * nblk);
        const int32_t *ci = (const int32_t *)(dx + nblk);
        __m512i s = _mm512_set1_epi32(ci[k]);
        if (nb <= 2) {
            /* Two chains of four dot products, not one of eight: with
             * one or two rows nothing else hides the eight back-to-back
             * vpdpbusd latencies. Integer sums: the same bits either
             * way. (With more rows the rows' chains overlap, and the
             * extra add would only cost.) Separate broadcasts here,
             * not dpbusd_bcast: at one row from DRAM no gain from it
             * could be told from the noise (docs/PERFORMANCE.md, "The
             * other X16 kernels"), so decode keeps the code it had. */
            s = dot8_two_chains(s, wq, a + 32 * k);
        } else {
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) /* embedded broadcasts: +15-29 % at 16 rows in L2 */
                s = dpbusd_bcast(s, wq[j], a + 32 * k + 4 * j);
        }
        acc[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(dx[k])), acc[b]);
    }
}

/* One group of 16 rows against nb activation rows; with g2, a second group
 * against the first activation row alone (nb == 1), its blocks read beside
 * the first's: two streams (tile_pair). Each group's arithmetic is the same
 * either way. */
INLINE void rows_x16(const uint8_t *g, const uint8_t *g2, int64_t cols, bool q8, bool nl, bool mx,
                     const uint8_t *act, const uint8_t *act2, size_t as, int nb, float *y,
                     float *y2, int64_t ys, int valid, int valid2) {
    const int64_t nblk = cols / 32;
    const __m512i nl_table = mx   ? levels_table512(tn_mxfp4_values, 128)
                             : nl ? levels_table512(tn_iq4nl_values, 128)
                                  : _mm512_setzero_si512();
    __m512 acc[KB], acc2[1] = {_mm512_setzero_ps()};
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    const uint32_t type = q8 ? TN_TYPE_Q8_0 : mx ? TN_TYPE_MXFP4 : nl ? TN_TYPE_IQ4_NL : TN_TYPE_Q4_0;
    const tn_prefetch_mode pf_mode = tn_cpu_prefetch_mode(nb, type);
    for (int64_t k = 0; k < nblk; k++) {
        x16_block(g, k, nblk, q8, nl, mx, nl_table, pf_mode, act, as, nb, acc);
        if (g2)
            x16_block(g2, k, nblk, q8, nl, mx, nl_table, pf_mode, act2, as, 1, acc2);
    }
    const __mmask16 m = (__mmask16)((1u << valid) - 1);
#pragma GCC unroll 16
    for (int b = 0; b < nb; b++)
        _mm512_mask_storeu_ps(y + b * ys, m, acc[b]);
    if (g2)
        _mm512_mask_storeu_ps(y2, (__mmask16)((1u << valid2) - 1), acc2[0]);
}

#define CALL_x16(N) rows_x16(g, NULL, w->cols, Q8, NL, MX, act, NULL, mm->act_row, N, y, NULL, w->rows, valid, 0)
#define X16_TILE(NAME, IS_Q8, IS_NL, IS_MX)                                                 \
    static void NAME(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0,      \
                     int nb) {                                                             \
        (void)thr;                                                                         \
        const bool Q8 = IS_Q8, NL = IS_NL, MX = IS_MX;                                     \
        const tn_weight *w = mm->w;                                                        \
        const size_t gb = tn_x16_group_bytes(w->type, w->cols);                            \
        for (int64_t r = r0; r < r1; r += 16) {                                            \
            const uint8_t *g = (const uint8_t *)w->data + (size_t)(r / 16) * gb;           \
            const int valid = w->rows - r < 16 ? (int)(w->rows - r) : 16;                   \
            for (int j0 = 0, n; j0 < nb; j0 += n) {                                        \
                const uint8_t *act = (const uint8_t *)mm->act + (b0 + j0) * mm->act_row;   \
                float *y = mm->y + (b0 + j0) * w->rows + r;                                \
                n = pass_rows(nb - j0, KB);                                                \
                DISPATCH_P2_16(n, CALL_x16);                                                  \
            }                                                                              \
        }                                                                                  \
    }
X16_TILE(tile_x16_q4_0, false, false, false)
X16_TILE(tile_x16_q8_0, true, false, false)
X16_TILE(tile_x16_iq4nl, false, true, false)
X16_TILE(tile_x16_mxfp4, false, true, true)

#define ROWS2_x16(Q8, NL, MX)                                                               \
    rows_x16(ga, gb, wa->cols, Q8, NL, MX, ma->act, mb->act, ma->act_row, 1, ya, yb, wa->rows, va, vb)
TN_X16_TILE_PAIR(pair_x16_q4_0, tile_x16_q4_0, ROWS2_x16(false, false, false))
TN_X16_TILE_PAIR(pair_x16_q8_0, tile_x16_q8_0, ROWS2_x16(true, false, false))
TN_X16_TILE_PAIR(pair_x16_iq4nl, tile_x16_iq4nl, ROWS2_x16(false, true, false))
TN_X16_TILE_PAIR(pair_x16_mxfp4, tile_x16_mxfp4, ROWS2_x16(false, true, true))

/* ------------------------------------- X16 layout: Q4_1, Q5_0 and Q5_1
 *
 * As Q4_0 above, with what these types add to a block (repack.c):
 *   Q5_0, Q5_1: the fifth bits come as one 64-bit mask per quant register,
 *     added (+16) to the nibbles' bytes with one masked byte add; Q5_0's
 *     quants are then 0..31 with an offset of 16 (ci = -16 * sum(q)).
 *   Q4_1, Q5_1: x = d * q + m, no offset. The min adds m * dx * sum(q) to a
 *     block's product: the activation row carries sx = dx * sum(q) per block
 *     (a float, in ci's place), and each block's update is two FMAs, the
 *     quants' then the min's, in that order for every row and batch. */
static void convert_x16_min(const float *x, void *dst, int64_t cols) {
    int8_t *qs = dst;
    const int64_t nblk = cols / 32;
    float *dx = (float *)(qs + cols);
    float *sx = dx + nblk;
    for (int64_t k = 0; k < nblk; k++) {
        float d;
        int32_t sum = quant_block32(x + 32 * k, &d, qs + 32 * k);
        dx[k] = d;
        sx[k] = d * (float)sum;
    }
}

static void convert_x16_q5_0(const float *x, void *dst, int64_t cols) {
    convert_x16(x, dst, cols, 16, false);
}

INLINE void rows_x16m(const uint8_t *g, const uint8_t *g2, int streams, int64_t cols, bool has_min,
                      bool q5, const uint8_t *act, const uint8_t *act2, size_t as, int nb, float *y,
                      float *y2, int64_t ys, int valid, int valid2) {
    const int64_t nblk = cols / 32;
    const size_t hdr = has_min ? 128 : 64, qb = q5 ? 320 : 256, chunk = hdr + 2 * qb;
    const __m512i lo4 = _mm512_set1_epi8(0x0f), v16 = _mm512_set1_epi8(0x10);
    __m512 acc[KB];
    __m512 acc2[1] = {_mm512_setzero_ps()};
#pragma GCC unroll 16
    for (int j = 0; j < nb; j++)
        acc[j] = _mm512_setzero_ps();
    const uint32_t type = has_min ? (q5 ? TN_TYPE_Q5_1 : TN_TYPE_Q4_1) : TN_TYPE_Q5_0;
    const tn_prefetch_mode pf_mode = tn_cpu_prefetch_mode(nb, type);
    for (int64_t k = 0; k < nblk; k++) {
#pragma GCC unroll 2
        for (int u = 0; u < streams; u++) {
            TN_X16_STREAM(u);
            const uint8_t *c = g_u + (size_t)(k / 2) * chunk;
            const int h = (int)(k & 1);
            /* as in rows_x16; far at one row took Gemma 3 1B's Q5_0 decode from
             * 32.8-36.2 to 38.5-41.0 tok/s on session 14's host */
            x16_prefetch(c, chunk, (size_t)h * (chunk / 2), chunk / 2, pf_mode);
            const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(c + 32 * h)));
            __m512 mw = _mm512_setzero_ps();
            if (has_min)
                mw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(c + 64 + 32 * h)));
            const uint8_t *q = c + hdr + (size_t)h * qb;
            const uint8_t *nib = q5 ? q + 64 : q;
            __m512i wq[8];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m512i v = _mm512_load_si512(nib + 64 * p);
                wq[p] = _mm512_and_si512(v, lo4);
                wq[p + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
            }
            if (q5) {
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    uint64_t m;
                    memcpy(&m, q + 8 * j, 8);
                    wq[j] = _mm512_mask_add_epi8(wq[j], _cvtu64_mask64(m), wq[j], v16);
                }
            }
#pragma GCC unroll 16
            for (int b = 0; b < nb_u; b++) {
                const uint8_t *a = act_u + (size_t)b * as;
                const float *dx = (const float *)(a + cols);
                const int32_t *ci = (const int32_t *)(dx + nblk);
                const float *sx = dx + nblk;
                __m512i s = has_min ? _mm512_setzero_si512() : _mm512_set1_epi32(ci[k]);
                if (nb_u <= 2) { /* as in rows_x16: same bits, separate broadcasts */
                    s = dot8_two_chains(s, wq, a + 32 * k);
                } else {
#pragma GCC unroll 8
                    for (int j = 0; j < 8; j++) /* embedded broadcasts: +15-29 % at 16 rows in L2 */
                        s = dpbusd_bcast(s, wq[j], a + 32 * k + 4 * j);
                }
                acc_u[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
                                         _mm512_mul_ps(dw, _mm512_set1_ps(dx[k])), acc_u[b]);
                if (has_min)
                    acc_u[b] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sx[k]), acc_u[b]);
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

#define CALL_x16m(N) \
    rows_x16m(g, NULL, 1, w->cols, HAS_MIN, Q5, act, NULL, mm->act_row, N, y, NULL, w->rows, valid, 0)
#define X16M_TILE(NAME, IS_MIN, IS_Q5)                                                     \
    static void NAME(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0,      \
                     int nb) {                                                             \
        (void)thr;                                                                         \
        const bool HAS_MIN = IS_MIN, Q5 = IS_Q5;                                           \
        const tn_weight *w = mm->w;                                                        \
        const size_t gb = tn_x16_group_bytes(w->type, w->cols);                            \
        for (int64_t r = r0; r < r1; r += 16) {                                            \
            const uint8_t *g = (const uint8_t *)w->data + (size_t)(r / 16) * gb;           \
            const int valid = w->rows - r < 16 ? (int)(w->rows - r) : 16;                   \
            for (int j0 = 0, n; j0 < nb; j0 += n) {                                        \
                const uint8_t *act = (const uint8_t *)mm->act + (b0 + j0) * mm->act_row;   \
                float *y = mm->y + (b0 + j0) * w->rows + r;                                \
                n = pass_rows(nb - j0, KB);                                                \
                DISPATCH_P2_16(n, CALL_x16m);                                              \
            }                                                                              \
        }                                                                                  \
    }
X16M_TILE(tile_x16_q4_1, true, false)
X16M_TILE(tile_x16_q5_0, false, true)
X16M_TILE(tile_x16_q5_1, true, true)
#define ROWS2_x16m(MIN, Q5)                                                                 \
    rows_x16m(ga, gb, 2, wa->cols, MIN, Q5, ma->act, mb->act, ma->act_row, 1, ya, yb, wa->rows, \
              va, vb)
TN_X16_TILE_PAIR(pair_x16_q4_1, tile_x16_q4_1, ROWS2_x16m(true, false))
TN_X16_TILE_PAIR(pair_x16_q5_0, tile_x16_q5_0, ROWS2_x16m(false, true))
TN_X16_TILE_PAIR(pair_x16_q5_1, tile_x16_q5_1, ROWS2_x16m(true, true))

/* The X16 kernels of Q4_1, Q5_0 and Q5_1; false for other types. */
static bool x16m_ops(tn_mm_ops *ops, uint32_t type) {
    ops->act_bytes = act_x16_bytes;
    ops->row_align = 16;
    switch (type) {
    case TN_TYPE_Q4_1:
        ops->convert = convert_x16_min;
        ops->tile = tile_x16_q4_1;
        ops->tile_pair = pair_x16_q4_1;
        return true;
    case TN_TYPE_Q5_0:
        ops->convert = convert_x16_q5_0;
        ops->tile = tile_x16_q5_0;
        ops->tile_pair = pair_x16_q5_0;
        return true;
    case TN_TYPE_Q5_1:
        ops->convert = convert_x16_min;
        ops->tile = tile_x16_q5_1;
        ops->tile_pair = pair_x16_q5_1;
        return true;
    default:
        return false;
    }
}

/* ------------------------------------- X16 layout: Q4_K, Q5_K and Q6_K
 *
 * The K-quants in groups of 16 rows (repack.c); Q5_K is Q4_K with its fifth
 * bits added as Q5_0's are (a masked byte add per quant register). As for Q4_0, vpdpbusd of a
 * weight register (4 bytes of each of 16 rows) against 4 activation bytes
 * broadcast gives 16 rows' partial sums in 16 lanes; a sub-block's sum S
 * (32 values for Q4_K, 16 for Q6_K) is then multiplied by the rows' 16
 * sub-block scales (vpmulld) and added up in int32 over the super-block:
 * exact integers, so the order inside a super-block does not matter. One
 * float update per super-block and row: acc += isum * (d * dx), and for
 * Q4_K acc -= msum * (dmin * dx) with msum = sum over sub-blocks of
 * min * (sum of the sub-block's activation quants), two vpdpwssd on pairs
 * of int16. Q6_K's quants are stored + 32, so its sum is
 * sum(sc * S) - 32 * sum(sc * B), B the sum of a sub-block's 16 activation
 * quants: the second sum is taken once per super-block and row, eight
 * vpdpwssd of (sc 2p, sc 2p + 1) int16 pairs, exact as before. (Starting
 * each S at -32 B instead cost a broadcast and a live pointer per row and
 * sub-block; with eight rows the pointers spilled, and the 8- and 16-row
 * tiles ran 15 % slower.)
 * Each weight register, unpacked once per pass, serves up to KB_K
 * activation rows; a row's instructions are the same in every pass size.
 *
 * Activations, per row: qs[cols] int8 in row order (one scale per 256
 * values, as act256), then dx[nsb] f32, then per super-block Q4_K: 4 int32
 * words (int16 pairs: sums of sub-blocks 2p and 2p + 1 of 32), Q6_K: 8 such
 * words for its sub-blocks of 16. */
static size_t act_x16k_bytes(int64_t cols) { return (size_t)cols + 68 * (size_t)(cols / 256); }

static void convert_x16k(const float *x, void *dst, int64_t cols, bool q6) {
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
        if (q6) {
            for (int p = 0; p < 8; p++)
                extra[8 * s + p] = (int32_t)((uint32_t)(uint16_t)sum16[2 * p] |
                                              (uint32_t)(uint16_t)sum16[2 * p + 1] << 16);
        } else {
            for (int p = 0; p < 4; p++) {
                const int32_t b0 = sum16[4 * p] + sum16[4 * p + 1];
                const int32_t b1 = sum16[4 * p + 2] + sum16[4 * p + 3];
                extra[4 * s + p] = (int32_t)((uint32_t)(uint16_t)b0 | (uint32_t)(uint16_t)b1 << 16);
            }
        }
    }
}

static void convert_x16_q4k(const float *x, void *dst, int64_t cols) {
    convert_x16k(x, dst, cols, false);
}
static void convert_x16_q6k(const float *x, void *dst, int64_t cols) {
    convert_x16k(x, dst, cols, true);
}

INLINE void rows_x16_q4k(const uint8_t *g, const uint8_t *g2, int streams,
                         int64_t cols, bool q5, const uint8_t *act, const uint8_t *act2, size_t as,
                         int nb, float *y, float *y2, int64_t ys, int valid, int valid2) {
    const int64_t nsb = cols / 256;
    const size_t cb = q5 ? 16 * sizeof(tn_block_q5_K) : 16 * sizeof(tn_block_q4_K);
    const __m512i v16 = _mm512_set1_epi8(0x10);
    const __m512i lo4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi32(63);
    const __m512i hi4 = _mm512_set1_epi8((char)0xf0);
    const __m512i m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3);
    __m512 acc[KB_K];
    __m512 acc2[1] = {_mm512_setzero_ps()};
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++)
        acc[b] = _mm512_setzero_ps();
    const tn_prefetch_mode pf_mode = tn_cpu_prefetch_mode(nb, q5 ? TN_TYPE_Q5_K : TN_TYPE_Q4_K);
    for (int64_t s = 0; s < nsb; s++) {
#pragma GCC unroll 2
        for (int u = 0; u < streams; u++) {
            TN_X16_STREAM(u);
            const uint8_t *c = g_u + (size_t)s * cb;
            x16_prefetch(c, cb, 0, cb, pf_mode);
            /* scales[0..3] (w0): sc 0..3 low 6 bits, top bits of sc 4..7;
             * scales[4..7] (w1): the same for the mins; scales[8..11] (w2):
             * low 4 bits of sc 4..7 (low nibbles) and of m 4..7 (high). */
            const __m512i w0 = _mm512_loadu_si512(c + 64), w1 = _mm512_loadu_si512(c + 128);
            const __m512i w2 = _mm512_loadu_si512(c + 192);
            __m512i isum[KB_K];
#pragma GCC unroll 8
            for (int b = 0; b < nb_u; b++)
                isum[b] = _mm512_setzero_si512();
#pragma GCC unroll 1
            for (int j = 0; j < 8; j++) {
                __m512i sc;
                if (j < 4)
                    sc = _mm512_and_si512(_mm512_srli_epi32(w0, 8 * j), m6);
                else
                    sc = _mm512_or_si512(
                        _mm512_and_si512(_mm512_srli_epi32(w2, 8 * (j - 4)), m4),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 8 * (j - 4) + 6), m2), 4));
                const uint8_t *qb = c + (q5 ? 768 : 256) + 512 * (j / 2);
                const bool in_place = !q5 && (j & 1) && nb_u == 1;
                __m512i wq[8];
#pragma GCC unroll 8
                for (int p = 0; p < 8; p++) {
                    __m512i v = _mm512_loadu_si512(qb + 64 * p);
                    /* At one row (decode) Q4_K's high nibbles stay in place
                     * (16 q): the row's sum is then 16 S, shifted back exactly
                     * below, one op where a shift per register cost eight:
                     * 5-10 % faster with the weights in L2. (At 2 to 8 rows it
                     * measured no faster or slower, so they keep the shifts.)
                     * Q5_K's fifth bit would not fit a byte above them. */
                    if (in_place)
                        wq[p] = _mm512_and_si512(v, hi4);
                    else
                        wq[p] = _mm512_and_si512(j & 1 ? _mm512_srli_epi16(v, 4) : v, lo4);
                    if (q5) { /* the fifth bits, as Q5_0's: one masked byte add */
                        uint64_t mk;
                        memcpy(&mk, c + 256 + 64 * j + 8 * p, 8);
                        wq[p] = _mm512_mask_add_epi8(wq[p], _cvtu64_mask64(mk), wq[p], v16);
                    }
                }
#pragma GCC unroll 8
                for (int b = 0; b < nb_u; b++) {
                    const uint8_t *x = act_u + (size_t)b * as + 256 * s + 32 * j;
                    __m512i t = _mm512_setzero_si512();
                    if (nb_u > 1) {
                        /* Two chains of 4: the rows' 8 chains of 8 left the
                         * multiply-add pipes idle on its latency (4-6 % of a
                         * 16-row tile, docs/PERFORMANCE.md, session 26). */
                        __m512i t1 = _mm512_setzero_si512();
#pragma GCC unroll 4
                        for (int p = 0; p < 8; p += 2) {
                            t = dpbusd_bcast(t, wq[p], x + 4 * p);
                            t1 = dpbusd_bcast(t1, wq[p + 1], x + 4 * p + 4);
                        }
                        t = _mm512_add_epi32(t, t1);
                    } else {
#pragma GCC unroll 8
                        for (int p = 0; p < 8; p++)
                            t = dpbusd_bcast(t, wq[p], x + 4 * p);
                    }
                    if (in_place) /* 16 S, a multiple of 16: exact */
                        t = _mm512_srai_epi32(t, 4);
                    isum[b] = _mm512_add_epi32(isum[b], _mm512_mullo_epi32(t, sc));
                }
            }
            /* The mins as int16 pairs (m 2p, m 2p + 1) per row. */
            __m512i mn[8], mp[4];
            for (int j = 0; j < 8; j++)
                mn[j] = j < 4 ? _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j), m6)
                              : _mm512_or_si512(
                                    _mm512_and_si512(_mm512_srli_epi32(w2, 8 * (j - 4) + 4), m4),
                                    _mm512_slli_epi32(
                                        _mm512_and_si512(_mm512_srli_epi32(w1, 8 * (j - 4) + 6), m2), 4));
            for (int p = 0; p < 4; p++)
                mp[p] = _mm512_or_si512(mn[2 * p], _mm512_slli_epi32(mn[2 * p + 1], 16));
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)c));
            const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(c + 32)));
#pragma GCC unroll 8
            for (int b = 0; b < nb_u; b++) {
                const uint8_t *a = act_u + (size_t)b * as;
                const float *dx = (const float *)(a + cols);
                const uint8_t *bp = (const uint8_t *)(dx + nsb) + 16 * s;
                __m512i ms = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int p = 0; p < 4; p++)
                    ms = _mm512_dpwssd_epi32(ms, mp[p], bcast32(bp + 4 * p));
                const __m512 vdx = _mm512_set1_ps(dx[s]);
                acc_u[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[b]), _mm512_mul_ps(d, vdx), acc_u[b]);
                acc_u[b] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmin, vdx), acc_u[b]);
            }
        }
    }
    const __mmask16 m = (__mmask16)((1u << valid) - 1);
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++)
        _mm512_mask_storeu_ps(y + b * ys, m, acc[b]);
    if (streams == 2)
        _mm512_mask_storeu_ps(y2, (__mmask16)((1u << valid2) - 1), acc2[0]);
}

INLINE void rows_x16_q6k(const uint8_t *g, const uint8_t *g2, int streams,
                         int64_t cols, const uint8_t *act, const uint8_t *act2, size_t as, int nb,
                         float *y, float *y2, int64_t ys, int valid, int valid2) {
    const int64_t nsb = cols / 256;
    const size_t cb = 16 * sizeof(tn_block_q6_K);
    const __m512i m6 = _mm512_set1_epi8(0x3f), m2 = _mm512_set1_epi8(0x03);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512 acc[KB_K];
    __m512 acc2[1] = {_mm512_setzero_ps()};
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++)
        acc[b] = _mm512_setzero_ps();
    const tn_prefetch_mode pf_mode = tn_cpu_prefetch_mode(nb, TN_TYPE_Q6_K);
    for (int64_t s = 0; s < nsb; s++) {
#pragma GCC unroll 2
        for (int u = 0; u < streams; u++) {
            TN_X16_STREAM(u);
            const uint8_t *c = g_u + (size_t)s * cb;
            x16_prefetch(c, cb, 0, cb, pf_mode);
            __m512i isum[KB_K];
#pragma GCC unroll 8
            for (int b = 0; b < nb_u; b++)
                isum[b] = _mm512_setzero_si512();
#pragma GCC unroll 1
            for (int k = 0; k < 16; k++) {
                const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(c + 32 + 16 * k)));
                const uint8_t *q = c + 288 + 192 * k;
                const __m512i r0 = _mm512_loadu_si512(q), r1 = _mm512_loadu_si512(q + 64);
                const __m512i r2 = _mm512_loadu_si512(q + 128);
                /* q(0..2): bits 0..5 of r0..r2; q(3): their bits 6, 7 (repack.c).
                 * 0xe4 is C ? A : B: q(3)'s bits 0, 1 from r0, 2, 3 from r1,
                 * then 4, 5 from r2, and the AND clears what the word shifts
                 * brought in from the next byte. 9 vector ops (the old layout,
                 * two nibble registers and one of top bits, took 17). */
                __m512i wq[4];
                wq[0] = _mm512_and_si512(r0, m6);
                wq[1] = _mm512_and_si512(r1, m6);
                wq[2] = _mm512_and_si512(r2, m6);
                const __m512i t01 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(r0, 6),
                                                              _mm512_srli_epi16(r1, 4), m2, 0xe4);
                wq[3] = _mm512_and_si512(
                    _mm512_ternarylogic_epi32(t01, _mm512_srli_epi16(r2, 2), m4, 0xe4), m6);
#pragma GCC unroll 8
                for (int b = 0; b < nb_u; b++) {
                    const uint8_t *x = act_u + (size_t)b * as + 256 * s + 16 * k;
                    __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 4
                    for (int u = 0; u < 4; u++)
                        t = dpbusd_bcast(t, wq[u], x + 4 * u);
                    isum[b] = _mm512_add_epi32(isum[b], _mm512_mullo_epi32(t, sc));
                }
            }
            /* - 32 * sum(sc * B): the 16 rows' scales of sub-blocks 2p, 2p + 1
             * as int16 pairs (one vpermw interleaves the two), against the row's
             * pairs of activation sums. */
            const __m512i pair_idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                                      23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
            __m512i scp[8];
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++)
                scp[p] = _mm512_permutexvar_epi16(
                    pair_idx, _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(c + 32 + 32 * p))));
#pragma GCC unroll 8
            for (int b = 0; b < nb_u; b++) {
                const uint8_t *a = act_u + (size_t)b * as;
                const uint8_t *bp = (const uint8_t *)((const float *)(a + cols) + nsb) + 32 * s;
                isum[b] = _mm512_sub_epi32(isum[b], _mm512_slli_epi32(pair_dot8(scp, bp), 5));
            }
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)c));
#pragma GCC unroll 8
            for (int b = 0; b < nb_u; b++) {
                const float *dx = (const float *)(act_u + (size_t)b * as + cols);
                acc_u[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[b]),
                                         _mm512_mul_ps(d, _mm512_set1_ps(dx[s])), acc_u[b]);
            }
        }
    }
    const __mmask16 m = (__mmask16)((1u << valid) - 1);
#pragma GCC unroll 8
    for (int b = 0; b < nb; b++)
        _mm512_mask_storeu_ps(y + b * ys, m, acc[b]);
    if (streams == 2)
        _mm512_mask_storeu_ps(y2, (__mmask16)((1u << valid2) - 1), acc2[0]);
}

#define CALL_x16k(N)                                                                         \
    (Q6 ? rows_x16_q6k(g, NULL, 1, w->cols, act, NULL, mm->act_row, N, y, NULL, w->rows, valid, 0) \
        : rows_x16_q4k(g, NULL, 1, w->cols, Q5, act, NULL, mm->act_row, N, y, NULL, w->rows, valid, 0))
#define X16K_TILE(NAME, IS_Q5, IS_Q6)                                                       \
    static void NAME(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0,      \
                     int nb) {                                                             \
        (void)thr;                                                                         \
        const bool Q5 = IS_Q5, Q6 = IS_Q6;                                                 \
        const tn_weight *w = mm->w;                                                        \
        const size_t gb = tn_x16_group_bytes(w->type, w->cols);                            \
        for (int64_t r = r0; r < r1; r += 16) {                                            \
            const uint8_t *g = (const uint8_t *)w->data + (size_t)(r / 16) * gb;           \
            const int valid = w->rows - r < 16 ? (int)(w->rows - r) : 16;                   \
            for (int j0 = 0, n; j0 < nb; j0 += n) {                                        \
                const uint8_t *act = (const uint8_t *)mm->act + (b0 + j0) * mm->act_row;   \
                float *y = mm->y + (b0 + j0) * w->rows + r;                                \
                n = pass_rows(nb - j0, KB_K);                                              \
                DISPATCH_P2_8(n, CALL_x16k);                                               \
            }                                                                              \
        }                                                                                  \
    }
X16K_TILE(tile_x16_q4k, false, false)
X16K_TILE(tile_x16_q5k, true, false)
X16K_TILE(tile_x16_q6k, false, true)
#define ROWS2_x16k(FN, ...) \
    FN(ga, gb, 2, wa->cols, __VA_ARGS__ ma->act, mb->act, ma->act_row, 1, ya, yb, wa->rows, va, vb)
TN_X16_TILE_PAIR(pair_x16_q4k, tile_x16_q4k, ROWS2_x16k(rows_x16_q4k, false,))
TN_X16_TILE_PAIR(pair_x16_q5k, tile_x16_q5k, ROWS2_x16k(rows_x16_q4k, true,))
TN_X16_TILE_PAIR(pair_x16_q6k, tile_x16_q6k, ROWS2_x16k(rows_x16_q6k, ))

/* The X16 kernels of the K-quants; false for other types. */
static bool x16k_ops(tn_mm_ops *ops, uint32_t type) {
    if (type != TN_TYPE_Q4_K && type != TN_TYPE_Q5_K && type != TN_TYPE_Q6_K)
        return false;
    ops->act_bytes = act_x16k_bytes;
    ops->convert = type == TN_TYPE_Q6_K ? convert_x16_q6k : convert_x16_q4k;
    ops->tile = type == TN_TYPE_Q4_K ? tile_x16_q4k : type == TN_TYPE_Q5_K ? tile_x16_q5k : tile_x16_q6k;
    ops->tile_pair = type == TN_TYPE_Q4_K   ? pair_x16_q4k
                     : type == TN_TYPE_Q5_K ? pair_x16_q5k
                                            : pair_x16_q6k;
    ops->row_align = 16;
    return true;
}

bool tn_mm_ops_avx512(tn_mm_ops *ops, uint32_t type, uint32_t layout) {
    if (layout == TN_LAYOUT_X16) {
        if (x16m_ops(ops, type) || x16k_ops(ops, type) || tn_mm_ops_avx512_x16k2(ops, type))
            return true;
        if (type != TN_TYPE_Q4_0 && type != TN_TYPE_Q8_0 && type != TN_TYPE_IQ4_NL &&
            type != TN_TYPE_MXFP4)
            return false;
        ops->act_bytes = act_x16_bytes;
        ops->convert = type == TN_TYPE_Q4_0     ? convert_x16_q4_0
                       : type == TN_TYPE_Q8_0   ? convert_x16_q8_0
                       : type == TN_TYPE_MXFP4 ? convert_x16_mxfp4
                                                : convert_x16_iq4nl;
        ops->tile = type == TN_TYPE_Q4_0     ? tile_x16_q4_0
                    : type == TN_TYPE_Q8_0   ? tile_x16_q8_0
                    : type == TN_TYPE_MXFP4 ? tile_x16_mxfp4
                                             : tile_x16_iq4nl;
        ops->row_align = 16;
        ops->tile_pair = type == TN_TYPE_Q4_0     ? pair_x16_q4_0
                         : type == TN_TYPE_Q8_0   ? pair_x16_q8_0
                         : type == TN_TYPE_MXFP4 ? pair_x16_mxfp4
                                                  : pair_x16_iq4nl;
        return true;
    }
    if (layout != TN_LAYOUT_ROWS)
        return false;
    switch (type) {
    case TN_TYPE_F32:
    case TN_TYPE_F16:
    case TN_TYPE_BF16:
#if defined(TN_CPU_AVX512_BF16)
        if (type == TN_TYPE_BF16 && tn_isa_has_avx512_bf16())
            return tn_mm_ops_avx512bf16(ops, type);
#endif
        ops->act_bytes = act_f32_bytes;
        ops->convert = convert_f32;
        ops->tile = type == TN_TYPE_F32 ? tile_f32 : type == TN_TYPE_F16 ? tile_f16 : tile_bf16;
        return true;
    case TN_TYPE_Q4_0:
        ops->act_bytes = act32_bytes;
        ops->convert = convert_q4_0;
        ops->tile = tile_q4_0;
        return true;
    case TN_TYPE_Q8_0:
        ops->act_bytes = act32_bytes;
        ops->convert = convert_q8_0;
        ops->tile = tile_q8_0;
        return true;
    case TN_TYPE_Q4_K:
        ops->act_bytes = act256_bytes;
        ops->convert = convert_kq;
        ops->tile = tile_q4k;
        return true;
    case TN_TYPE_Q5_K:
        ops->act_bytes = act256_bytes;
        ops->convert = convert_kq;
        ops->tile = tile_q5k;
        return true;
    case TN_TYPE_Q6_K:
        ops->act_bytes = act256_bytes;
        ops->convert = convert_q6k;
        ops->tile = tile_q6k;
        return true;
    default:
        return mm_ops_new_types(ops, type) || mm_ops_mxfp4(ops, type);
    }
}
