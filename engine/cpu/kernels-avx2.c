/* AVX2 + FMA + F16C kernels (this file alone is compiled for them): the
 * family for x86-64 CPUs without AVX-512 VNNI.
 *
 * Same shape as the AVX-512 kernels: one weight row is read and unpacked
 * once per block, then dotted with up to KB activation rows, one
 * accumulator each, with the same instructions for every row of the tile
 * (batch invariance). Integer dot products use vpmaddubsw (unsigned x
 * signed bytes to 16 bits) then vpmaddwd; activations are quantized once per
 * row and matmul to 8 bits with one scale per 32 values (Q4_0, Q8_0) or per
 * 256 (K-quants). */
#include "tn-cpu-internal.h"

#include "tn-quant.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* Activation quants: v (x * 127 / max|x|) to int32, clamped to int8's
 * range, as cvt_q8_512 (tn-avx512-dpbusd.h): a NaN or infinite activation
 * gives INT32_MIN, whose block sums overflow; finite ones are unchanged. */
INLINE __m256i cvt_q8_256(__m256 v) {
    return _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(127)),
                            _mm256_set1_epi32(-128));
}

static inline uint16_t rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Fixed-order horizontal sum (part of the result's definition). */
INLINE float hsum(__m256 v) {
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* Calls CALL(n) with a compile-time n (a power of two): a tile runs as
 * passes of 8, 4, 2, 1 rows (see kernels-avx512.c). */
static inline int pass_rows(int left, int max) {
    int n = max;
    while (n > left)
        n >>= 1;
    return n;
}
#define DISPATCH_P2_4(n, CALL) \
    switch (n) {               \
    case 1: CALL(1); break;    \
    case 2: CALL(2); break;    \
    default: CALL(4); break;   \
    }
#define DISPATCH_P2_8(n, CALL) \
    if ((n) < 8) {             \
        DISPATCH_P2_4(n, CALL) \
    } else {                   \
        CALL(8);               \
    }

/* --------------------------------------------------------- f32 f16 bf16 */

static size_t act_f32_bytes(int64_t cols) { return (size_t)cols * sizeof(float); }
static void convert_f32(const float *x, void *dst, int64_t cols) {
    memcpy(dst, x, (size_t)cols * sizeof(float));
}

/* Eight f32 weights from any of the three float types; `left` < 8 loads a
 * zero-padded tail. */
INLINE __m256 load_w8(const void *w, int64_t k, int wt, int left) {
    const size_t es = wt == 0 ? 4 : 2;
    const uint8_t *p = (const uint8_t *)w + (size_t)k * es;
    uint8_t tmp[32] = {0};
    if (left < 8) {
        memcpy(tmp, p, (size_t)left * es);
        p = tmp;
    }
    if (wt == 0)
        return _mm256_loadu_ps((const float *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (wt == 1)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INLINE __m256 load_x8(const float *x, int left) {
    if (left < 8) {
        float tmp[8] = {0};
        memcpy(tmp, x, (size_t)left * sizeof(float));
        return _mm256_loadu_ps(tmp);
    }
    return _mm256_loadu_ps(x);
}

/* wt: 0 f32, 1 f16, 2 bf16. */
INLINE void rows_float(const void *w, int wt, int64_t cols, const float *x, int64_t xs, int nb,
                       float *y, int64_t ys) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        __m256 wv = load_w8(w, k, wt, 8);
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++)
            acc[j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + j * xs + k), acc[j]);
    }
    if (k < cols) {
        int left = (int)(cols - k);
        __m256 wv = load_w8(w, k, wt, left);
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++)
            acc[j] = _mm256_fmadd_ps(wv, load_x8(x + j * xs + k, left), acc[j]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define FLOAT_TILE(NAME, WT)                                                                 \
    static void NAME(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0,       \
                     int nb) {                                                              \
        (void)thr;                                                                          \
        const tn_weight *w = mm->w;                                                         \
        const int64_t xs = (int64_t)(mm->act_row / sizeof(float));                          \
        for (int64_t r = r0; r < r1; r++) {                                                 \
            const void *wr = (const uint8_t *)w->data + (size_t)r * w->row_bytes;           \
            for (int j0 = 0, n; j0 < nb; j0 += n) {                                        \
                const float *x = (const float *)((const uint8_t *)mm->act +                 \
                                                 (b0 + j0) * mm->act_row);                  \
                float *y = mm->y + (b0 + j0) * w->rows + r;                                 \
                n = pass_rows(nb - j0, 8);                                                  \
                DISPATCH_P2_8(n, CALL_FLOAT_##WT);                                            \
            }                                                                               \
        }                                                                                   \
    }
#define CALL_FLOAT_0(N) rows_float(wr, 0, w->cols, x, xs, N, y, w->rows)
#define CALL_FLOAT_1(N) rows_float(wr, 1, w->cols, x, xs, N, y, w->rows)
#define CALL_FLOAT_2(N) rows_float(wr, 2, w->cols, x, xs, N, y, w->rows)
FLOAT_TILE(tile_f32, 0)
FLOAT_TILE(tile_f16, 1)
FLOAT_TILE(tile_bf16, 2)

/* ------------------------------------------- 32-value blocks: Q4_0, Q8_0
 *
 * Activations per block: qs[32] int8 in row order, the scale, and (Q4_0)
 * ci = -sum(q), added once per int32 lane so that the 8 lanes together
 * take 8 * sum(q) off the dot product of the unsigned nibbles. */
typedef struct {
    int8_t qs[32];
    float d;
    int32_t ci;
} act32;
_Static_assert(sizeof(act32) == 40, "act32 is 40 bytes");

static size_t act32_bytes(int64_t cols) { return (size_t)(cols / 32) * sizeof(act32); }

static void convert_act32(const float *x, void *dst, int64_t cols) {
    act32 *a = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t k = 0; k < cols / 32; k++, x += 32) {
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        a[k].d = amax / 127.0f;
        __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        __m256i q[4];
        for (int i = 0; i < 4; i++)
            q[i] = cvt_q8_256(_mm256_mul_ps(v[i], id));
        /* Pack 32-bit to 8-bit; packs interleave 128-bit lanes, fixed up by
         * a final dword permutation. */
        __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)a[k].qs, p);
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        a[k].ci = -_mm_cvtsi128_si32(s4);
    }
}

/* MXFP4: ggml's Q8_0 activations exactly, their scales rounded to fp16 as
 * block_q8_0 stores them (the quants keep the f32 inverse), so that a
 * gpt-oss router near a tie sees the products llama.cpp sees
 * (docs/MODEL.md). A scale past fp16's range (|x| above 8.3e6) keeps its
 * f32 value rather than becoming infinity. */
static void convert_mxfp4(const float *x, void *dst, int64_t cols) {
    convert_act32(x, dst, cols);
    act32 *a = dst;
    for (int64_t k = 0; k < cols / 32; k++)
        if (a[k].d < 65504.0f)
            a[k].d = _cvtsh_ss(_cvtss_sh(a[k].d, _MM_FROUND_TO_NEAREST_INT));
}

INLINE __m256 block_update(__m256 acc, __m256i i32, float dw, const act32 *a) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), _mm256_set1_ps(dw * a->d), acc);
}

/* Adds one block of 32 signed weights q (scale dw) times block k of each of
 * the nb act32 rows to acc: |w| times x with w's sign, as vpmaddubsw wants
 * (unsigned x signed). Shared by Q8_0, IQ4_NL and MXFP4, whose blocks differ
 * only in how q and dw are read. */
INLINE void signed_block32(__m256 *acc, __m256i q, float dw, const uint8_t *act, size_t as,
                           int64_t k, int nb) {
    const __m256i ones = _mm256_set1_epi16(1), aq = _mm256_sign_epi8(q, q);
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++) {
        const act32 *a = (const act32 *)(act + j * as) + k;
        __m256i sx = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a->qs), q);
        __m256i i32 = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, sx), ones);
        acc[j] = block_update(acc[j], i32, dw, a);
    }
}

INLINE void rows_q4_0(const uint8_t *w, int64_t nblk, const uint8_t *act, size_t as, int nb,
                      float *y, int64_t ys) {
    const __m256i lo4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nblk; k++) {
        const uint8_t *blk = w + k * 18;
        __m128i raw = _mm_loadu_si128((const __m128i *)(blk + 2));
        __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), lo4);
        const float dw = _cvtsh_ss(rd16(blk));
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) {
            const act32 *a = (const act32 *)(act + j * as) + k;
            __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)a->qs));
            __m256i i32 = _mm256_add_epi32(_mm256_madd_epi16(p, ones), _mm256_set1_epi32(a->ci));
            acc[j] = block_update(acc[j], i32, dw, a);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

INLINE void rows_q8_0(const uint8_t *w, int64_t nblk, const uint8_t *act, size_t as, int nb,
                      float *y, int64_t ys) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nblk; k++) {
        const uint8_t *blk = w + k * 34;
        const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 2));
        const float dw = _cvtsh_ss(rd16(blk));
        signed_block32(acc, q, dw, act, as, k, nb);
    }
#pragma GCC unroll 8
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
                DISPATCH_P2_##NBMAX(n, CALL_##ROWS);                                                 \
            }                                                                                \
        }                                                                                    \
    }
#define CALL_rows_q4_0(N) rows_q4_0(wr, nblk, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q8_0(N) rows_q8_0(wr, nblk, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_q4_0, rows_q4_0, 32, 8)
QUANT_TILE(tile_q8_0, rows_q8_0, 32, 8)

/* ---------------------------------- 32-value blocks: Q4_1, Q5_0, Q5_1
 *
 * The activations of Q4_0 (act32). Q5_0 and Q5_1 put the fifth bit of value
 * v (bit v of qh) on byte v: broadcast qh's byte v / 8 to byte v, then test
 * bit v % 8 (an OR with all other bits set, compared with all ones). Q5_0's
 * quants are 0..31 with an offset of 16: 2 * ci in each of the 8 lanes
 * takes 16 * sum(q) off. Q4_1 and Q5_1 (x = d * q + m) add the min's
 * m * dx * sum(q) per block to lane 0, after the quants' FMA: a second
 * FMA whose other lanes add m * 0. */
INLINE __m256i fifth_bits(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                              0x0303030303030303);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), spread);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_and_si256(_mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

INLINE void rows_q451(const uint8_t *w, int64_t nblk, bool has_min, bool q5, const uint8_t *act,
                      size_t as, int nb, float *y, int64_t ys) {
    const __m256i lo4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const size_t bb = 18 + (has_min ? 2 : 0) + (q5 ? 4 : 0);
    const size_t qoff = 2 + (has_min ? 2 : 0) + (q5 ? 4 : 0);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nblk; k++) {
        const uint8_t *blk = w + k * bb;
        __m128i raw = _mm_loadu_si128((const __m128i *)(blk + qoff));
        __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), lo4);
        if (q5)
            q = _mm256_or_si256(q, fifth_bits(blk + qoff - 4));
        const float dw = _cvtsh_ss(rd16(blk));
        const __m256 mv = has_min ? _mm256_setr_ps(_cvtsh_ss(rd16(blk + 2)), 0, 0, 0, 0, 0, 0, 0)
                                  : _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int j = 0; j < nb; j++) {
            const act32 *a = (const act32 *)(act + j * as) + k;
            __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)a->qs));
            __m256i i32 = _mm256_madd_epi16(p, ones);
            if (!has_min)
                i32 = _mm256_add_epi32(i32, _mm256_set1_epi32(2 * a->ci));
            acc[j] = block_update(acc[j], i32, dw, a);
            if (has_min)
                acc[j] = _mm256_fmadd_ps(mv, _mm256_set1_ps(a->d * (float)-a->ci), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define CALL_rows_q4_1(N) rows_q451(wr, nblk, true, false, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q5_0(N) rows_q451(wr, nblk, false, true, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q5_1(N) rows_q451(wr, nblk, true, true, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_q4_1, rows_q4_1, 32, 8)
QUANT_TILE(tile_q5_0, rows_q5_0, 32, 8)
QUANT_TILE(tile_q5_1, rows_q5_1, 32, 8)

/* The kernels of Q4_1, Q5_0 and Q5_1; false for other types. */
static bool q451_ops(tn_mm_ops *ops, uint32_t type) {
    if (type != TN_TYPE_Q4_1 && type != TN_TYPE_Q5_0 && type != TN_TYPE_Q5_1)
        return false;
    ops->act_bytes = act32_bytes;
    ops->convert = convert_act32;
    ops->tile = type == TN_TYPE_Q4_1 ? tile_q4_1 : type == TN_TYPE_Q5_0 ? tile_q5_0 : tile_q5_1;
    return true;
}

/* ------------------------------------------------- K-quants: Q4_K, Q5_K, Q6_K
 *
 * Activations per 256-value super-block, in row order: qs[256] int8, one
 * scale, and int16 sums: per sub-block of 32 (Q4_K/Q5_K, 8 used, for the
 * mins) or per 16 values (Q6_K, for its -32 offset). */
typedef struct {
    int8_t qs[256];
    int16_t bs[16];
    float d;
    uint8_t pad[28];
} act256;
_Static_assert(sizeof(act256) == 320, "act256 is five cache lines");

static size_t act256_bytes(int64_t cols) { return (size_t)(cols / 256) * sizeof(act256); }

static void convert_act256(const float *x, void *dst, int64_t cols, bool per32) {
    act256 *a = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t s = 0; s < cols / 256; s++, x += 256) {
        act256 *as = &a[s];
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 256; i += 8)
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        as->d = amax / 127.0f;
        __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        memset(as->bs, 0, sizeof as->bs);
        for (int i = 0; i < 16; i++) {
            __m256i q0 = cvt_q8_256(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * i), id));
            __m256i q1 = cvt_q8_256(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * i + 8), id));
            __m256i p = _mm256_packs_epi32(q0, q1); /* 16-bit, lanes interleaved */
            p = _mm256_permute4x64_epi64(p, 0xd8);
            __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
            _mm_storeu_si128((__m128i *)(as->qs + 16 * i), b);
            __m256i sm = _mm256_add_epi32(q0, q1);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sm), _mm256_extracti128_si256(sm, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
            int sum = _mm_cvtsi128_si32(s4);
            if (per32)
                as->bs[i / 2] = (int16_t)(as->bs[i / 2] + sum);
            else
                as->bs[i] = (int16_t)sum;
        }
        memset(as->pad, 0, sizeof as->pad);
    }
}

static void convert_kq(const float *x, void *dst, int64_t cols) { convert_act256(x, dst, cols, true); }
static void convert_q6k(const float *x, void *dst, int64_t cols) {
    convert_act256(x, dst, cols, false);
}

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

/* Q4_K / Q5_K: sub-block j (32 values) is one register; value l of
 * 64-group g is the low nibble of qs[32g + l] (sub-block 2g) or the high
 * one (2g + 1); Q5_K adds bit j of qh[l] as the fifth bit. */
INLINE void rows_kq(const uint8_t *w, int64_t nsb, bool q5, const uint8_t *act, size_t as,
                    int nb, float *y, int64_t ys) {
    const __m256i lo4 = _mm256_set1_epi8(0x0f);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    const size_t bb = q5 ? sizeof(tn_block_q5_K) : sizeof(tn_block_q4_K);
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * bb;
        const float d = _cvtsh_ss(rd16(blk)), dmin = _cvtsh_ss(rd16(blk + 2));
        uint8_t sc[8], mn[8];
        kq_scales_mins(blk + 4, sc, mn);
        uint64_t m64;
        memcpy(&m64, mn, 8);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m64));
        const uint8_t *qs = blk + (q5 ? 48 : 16);
        __m256i q[8];
        const __m256i qh = q5 ? _mm256_loadu_si256((const __m256i *)(blk + 16)) : _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * g));
            q[2 * g] = _mm256_and_si256(v, lo4);
            q[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
        }
        if (q5)
            for (int j = 0; j < 8; j++) {
                __m256i bit = _mm256_set1_epi8((char)(1 << j));
                __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
                q[j] = _mm256_or_si256(q[j], _mm256_and_si256(on, _mm256_set1_epi8(0x10)));
            }
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m256i isum = _mm256_setzero_si256();
            for (int i = 0; i < 8; i++) {
                __m256i p = _mm256_maddubs_epi16(q[i], _mm256_loadu_si256((const __m256i *)(a->qs + 32 * i)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16(sc[i])));
            }
            __m128i msum = _mm_madd_epi16(mins, _mm_loadu_si128((const __m128i *)a->bs));
            __m256 ms = _mm256_insertf128_ps(_mm256_setzero_ps(), _mm_cvtepi32_ps(msum), 0);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a->d), acc[j]);
            acc[j] = _mm256_fmadd_ps(ms, _mm256_set1_ps(-dmin * a->d), acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

/* Q6_K: per half of 128 values, ql[0..31] / ql[32..63] low nibbles are
 * values 0..31 / 32..63, their high nibbles 64..95 / 96..127; qh[l] holds
 * the two top bits of values l, 32+l, 64+l, 96+l (bits 0-1, 2-3, 4-5, 6-7).
 * Stored + 32; one int8 scale per 16 values. */
INLINE void rows_q6k(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, int nb,
                     float *y, int64_t ys) {
    const __m256i lo4 = _mm256_set1_epi8(0x0f), b45 = _mm256_set1_epi8(0x30);
    __m256 acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * sizeof(tn_block_q6_K);
        const int8_t *scales = (const int8_t *)(blk + 192);
        const float d = _cvtsh_ss(rd16(blk + 208));
        __m256i q[8], sc[8];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
            q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, lo4),
                                           _mm256_and_si256(_mm256_slli_epi16(hb, 4), b45));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, lo4),
                                           _mm256_and_si256(_mm256_slli_epi16(hb, 2), b45));
            q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4),
                                           _mm256_and_si256(hb, b45));
            q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), b45));
        }
        for (int i = 0; i < 8; i++)
            sc[i] = _mm256_set_m128i(_mm_set1_epi16(scales[2 * i + 1]), _mm_set1_epi16(scales[2 * i]));
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)scales));
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m256i isum = _mm256_setzero_si256();
            for (int i = 0; i < 8; i++) {
                __m256i p = _mm256_maddubs_epi16(q[i], _mm256_loadu_si256((const __m256i *)(a->qs + 32 * i)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc[i]));
            }
            __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a->bs));
            isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 5));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a->d), acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define CALL_rows_q4k(N) rows_kq(wr, nblk, false, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q5k(N) rows_kq(wr, nblk, true, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q6k(N) rows_q6k(wr, nblk, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_q4k, rows_q4k, 256, 4)
QUANT_TILE(tile_q5k, rows_q5k, 256, 4)
QUANT_TILE(tile_q6k, rows_q6k, 256, 4)

/* ------------------------------------- Q2_K, Q3_K, IQ4_NL, IQ4_XS
 *
 * Q2_K/Q3_K: register r (values 32r..32r+31 of the super-block, two
 * sub-blocks of 16 in its 128-bit halves) is bits 2(r%4)..2(r%4)+1 of
 * qs[32(r/4) ..]; Q3_K's third bit is bit r of hmask[0..31]. Q3_K's quants
 * go in as q + 4 (0..7, unsigned for vpmaddubsw) and 4 * sum(sc * x) is
 * taken back off with the activations' per-16 sums, as Q6_K's offset.
 * Sub-block sums accumulate in int32 per row over the super-block, then one
 * float update. IQ4: the nibbles index the 16-level table with vpshufb;
 * the signed levels go through vpmaddubsw as |w| times x with w's sign
 * (as Q8_0). */

/* Q3_K's 16 scales (6 bits, stored + 32) as int8 minus 32. */
INLINE void q3k_scales16(const uint8_t *s, int8_t out[16]) {
    uint32_t a0, a1, a2;
    memcpy(&a0, s, 4);
    memcpy(&a1, s + 4, 4);
    memcpy(&a2, s + 8, 4);
    uint32_t v[4] = {
        (a0 & 0x0f0f0f0f) | ((a2 & 0x03030303) << 4),
        (a1 & 0x0f0f0f0f) | (((a2 >> 2) & 0x03030303) << 4),
        ((a0 >> 4) & 0x0f0f0f0f) | (((a2 >> 4) & 0x03030303) << 4),
        ((a1 >> 4) & 0x0f0f0f0f) | (((a2 >> 6) & 0x03030303) << 4),
    };
    uint8_t u[16];
    memcpy(u, v, 16);
    for (int k = 0; k < 16; k++)
        out[k] = (int8_t)(u[k] - 32);
}

/* Register r's low 2 bits (values 32r..32r+31). */
INLINE __m256i q2_bits_reg(const uint8_t *qs, int r) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * (r / 4)));
    return _mm256_and_si256(_mm256_srli_epi16(v, 2 * (r % 4)), _mm256_set1_epi8(3));
}

INLINE __m256i sc_pair16(int lo, int hi) {
    return _mm256_set_m128i(_mm_set1_epi16((short)hi), _mm_set1_epi16((short)lo));
}

INLINE void rows_q2k(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, int nb,
                     float *y, int64_t ys) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * sizeof(tn_block_q2_K);
        const uint8_t *scales = blk, *qs = blk + 16;
        const float d = _cvtsh_ss(rd16(blk + 80)), dmin = _cvtsh_ss(rd16(blk + 82));
        const __m128i sraw = _mm_loadu_si128((const __m128i *)scales);
        const __m256i m16 =
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sraw, 4), _mm_set1_epi8(0x0f)));
        __m256i isum[4];
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++)
            isum[j] = _mm256_setzero_si256();
        for (int r = 0; r < 8; r++) {
            const __m256i q = q2_bits_reg(qs, r);
            const __m256i sc = sc_pair16(scales[2 * r] & 15, scales[2 * r + 1] & 15);
#pragma GCC unroll 4
            for (int j = 0; j < nb; j++) {
                const act256 *a = (const act256 *)(act + j * as) + s;
                __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(a->qs + 32 * r)));
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p, sc));
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m256i msum = _mm256_madd_epi16(m16, _mm256_loadu_si256((const __m256i *)a->bs));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_set1_ps(d * a->d), acc[j]);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-dmin * a->d), acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

INLINE void rows_q3k(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, int nb,
                     float *y, int64_t ys) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * sizeof(tn_block_q3_K);
        const uint8_t *hmask = blk, *qs = blk + 32;
        const float d = _cvtsh_ss(rd16(blk + 108));
        int8_t sc8[16];
        q3k_scales16(blk + 96, sc8);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc8));
        const __m256i hm = _mm256_loadu_si256((const __m256i *)hmask);
        __m256i isum[4];
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++)
            isum[j] = _mm256_setzero_si256();
        for (int r = 0; r < 8; r++) {
            const __m256i bit = _mm256_set1_epi8((char)(1 << r));
            const __m256i on = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
            const __m256i q = _mm256_or_si256(q2_bits_reg(qs, r),
                                              _mm256_and_si256(on, _mm256_set1_epi8(4)));
            const __m256i sc = sc_pair16(sc8[2 * r], sc8[2 * r + 1]);
#pragma GCC unroll 4
            for (int j = 0; j < nb; j++) {
                const act256 *a = (const act256 *)(act + j * as) + s;
                __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(a->qs + 32 * r)));
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p, sc));
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)a->bs));
            __m256i t = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(off, 2));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_set1_ps(d * a->d), acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

/* 32 IQ4 levels (signed) in row order from 16 bytes of nibbles. */
INLINE __m256i iq4_levels(const uint8_t *qs, __m256i table) {
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw),
                                   _mm256_set1_epi8(0x0f));
    return _mm256_shuffle_epi8(table, nib);
}

INLINE __m256i iq4_table(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tn_iq4nl_values));
}

INLINE void rows_iq4nl(const uint8_t *w, int64_t nblk, const uint8_t *act, size_t as, int nb,
                       float *y, int64_t ys) {
    const __m256i table = iq4_table();
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nblk; k++) {
        const uint8_t *blk = w + k * sizeof(tn_block_iq4_nl);
        const __m256i q = iq4_levels(blk + 2, table);
        const float dw = _cvtsh_ss(rd16(blk));
        signed_block32(acc, q, dw, act, as, k, nb);
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

INLINE void rows_iq4xs(const uint8_t *w, int64_t nsb, const uint8_t *act, size_t as, int nb,
                       float *y, int64_t ys) {
    const __m256i table = iq4_table();
    __m256 acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
        const uint8_t *blk = w + s * sizeof(tn_block_iq4_xs);
        const float d = _cvtsh_ss(rd16(blk));
        const unsigned sh = rd16(blk + 2);
        const uint8_t *sl = blk + 4, *qs = blk + 8;
        __m256i isum[4];
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++)
            isum[j] = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++) {
            const int ls = (int)(((sl[ib / 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4)) - 32;
            const __m256i q = iq4_levels(qs + 16 * ib, table);
            const __m256i aq = _mm256_sign_epi8(q, q);
            const __m256i sc = _mm256_set1_epi16((short)ls);
#pragma GCC unroll 4
            for (int j = 0; j < nb; j++) {
                const act256 *a = (const act256 *)(act + j * as) + s;
                __m256i sx = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a->qs + 32 * ib)), q);
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(aq, sx), sc));
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < nb; j++) {
            const act256 *a = (const act256 *)(act + j * as) + s;
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_set1_ps(d * a->d), acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define CALL_rows_q2k(N) rows_q2k(wr, nblk, act, mm->act_row, N, y, w->rows)
#define CALL_rows_q3k(N) rows_q3k(wr, nblk, act, mm->act_row, N, y, w->rows)
#define CALL_rows_iq4nl(N) rows_iq4nl(wr, nblk, act, mm->act_row, N, y, w->rows)
#define CALL_rows_iq4xs(N) rows_iq4xs(wr, nblk, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_q2k, rows_q2k, 256, 4)
QUANT_TILE(tile_q3k, rows_q3k, 256, 4)
QUANT_TILE(tile_iq4nl, rows_iq4nl, 32, 8)
QUANT_TILE(tile_iq4xs, rows_iq4xs, 256, 4)

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
        ops->convert = convert_act32;
        ops->tile = tile_iq4nl;
        return true;
    default:
        return false;
    }
}

/* ------------------------------------------------------------------ MXFP4
 *
 * As IQ4_NL: the nibbles index the 16 E2M1 levels (doubled, so integers)
 * with vpshufb, the signed levels go through vpmaddubsw as |w| times x with
 * w's sign; the block scale is the E8M0 byte's power of two, halved
 * (tn_e8m0_half). Activations: Q8_0's blocks of 32 (act32) with fp16
 * scales (convert_mxfp4); each block adds its integer sum times the two
 * scales' product, as ggml does. */
INLINE void rows_mxfp4(const uint8_t *w, int64_t nblk, const uint8_t *act, size_t as, int nb,
                       float *y, int64_t ys) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tn_mxfp4_values));
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nblk; k++) {
        const uint8_t *blk = w + k * sizeof(tn_block_mxfp4);
        const __m256i q = iq4_levels(blk + 1, table);
        const float dw = tn_e8m0_half(blk[0]);
        signed_block32(acc, q, dw, act, as, k, nb);
    }
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        y[j * ys] = hsum(acc[j]);
}

#define CALL_rows_mxfp4(N) rows_mxfp4(wr, nblk, act, mm->act_row, N, y, w->rows)
QUANT_TILE(tile_mxfp4, rows_mxfp4, 32, 8)

static bool mm_ops_mxfp4(tn_mm_ops *ops, uint32_t type) {
    if (type != TN_TYPE_MXFP4)
        return false;
    ops->act_bytes = act32_bytes;
    ops->convert = convert_mxfp4;
    ops->tile = tile_mxfp4;
    return true;
}

bool tn_mm_ops_avx2(tn_mm_ops *ops, uint32_t type, uint32_t layout) {
    if (layout != TN_LAYOUT_ROWS)
        return false;
    if (q451_ops(ops, type))
        return true;
    switch (type) {
    case TN_TYPE_F32:
    case TN_TYPE_F16:
    case TN_TYPE_BF16:
        ops->act_bytes = act_f32_bytes;
        ops->convert = convert_f32;
        ops->tile = type == TN_TYPE_F32 ? tile_f32 : type == TN_TYPE_F16 ? tile_f16 : tile_bf16;
        return true;
    case TN_TYPE_Q4_0:
    case TN_TYPE_Q8_0:
        ops->act_bytes = act32_bytes;
        ops->convert = convert_act32;
        ops->tile = type == TN_TYPE_Q4_0 ? tile_q4_0 : tile_q8_0;
        return true;
    case TN_TYPE_Q4_K:
    case TN_TYPE_Q5_K:
        ops->act_bytes = act256_bytes;
        ops->convert = convert_kq;
        ops->tile = type == TN_TYPE_Q4_K ? tile_q4k : tile_q5k;
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
