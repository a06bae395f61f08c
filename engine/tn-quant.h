/* Block layouts of the GGUF tensor types, byte for byte as ggml stores them
 * (ggml-common.h). A weight row is a sequence of these blocks. */
#ifndef TN_QUANT_H
#define TN_QUANT_H

#include "tern.h"

#include <assert.h>
#include <string.h>

#define TN_QK4_0 32
#define TN_QK4_1 32
#define TN_QK5_0 32
#define TN_QK5_1 32
#define TN_QK8_0 32
#define TN_QK8_1 32
#define TN_QK_K 256
#define TN_K_SCALE_SIZE 12

typedef uint16_t tn_half; /* IEEE binary16 bits */

typedef struct { tn_half d; uint8_t qs[TN_QK4_0 / 2]; } tn_block_q4_0;
_Static_assert(sizeof(tn_block_q4_0) == 18, "q4_0 block is 18 bytes");

typedef struct { tn_half d; tn_half m; uint8_t qs[TN_QK4_1 / 2]; } tn_block_q4_1;
_Static_assert(sizeof(tn_block_q4_1) == 20, "q4_1 block is 20 bytes");

typedef struct { tn_half d; uint8_t qh[4]; uint8_t qs[TN_QK5_0 / 2]; } tn_block_q5_0;
_Static_assert(sizeof(tn_block_q5_0) == 22, "q5_0 block is 22 bytes");

typedef struct { tn_half d; tn_half m; uint8_t qh[4]; uint8_t qs[TN_QK5_1 / 2]; } tn_block_q5_1;
_Static_assert(sizeof(tn_block_q5_1) == 24, "q5_1 block is 24 bytes");

typedef struct { tn_half d; int8_t qs[TN_QK8_0]; } tn_block_q8_0;
_Static_assert(sizeof(tn_block_q8_0) == 34, "q8_0 block is 34 bytes");

typedef struct { tn_half d; tn_half s; int8_t qs[TN_QK8_1]; } tn_block_q8_1;
_Static_assert(sizeof(tn_block_q8_1) == 36, "q8_1 block is 36 bytes");

/* 256 values in 8 sub-blocks of 32; 6-bit scales and mins packed in 12 bytes. */
typedef struct {
    tn_half d;    /* super-block scale for the quantized scales */
    tn_half dmin; /* super-block scale for the quantized mins */
    uint8_t scales[TN_K_SCALE_SIZE];
    uint8_t qs[TN_QK_K / 2];
} tn_block_q4_K;
_Static_assert(sizeof(tn_block_q4_K) == 144, "q4_K block is 144 bytes");

typedef struct {
    tn_half d;
    tn_half dmin;
    uint8_t scales[TN_K_SCALE_SIZE];
    uint8_t qh[TN_QK_K / 8]; /* high bit of each quant */
    uint8_t qs[TN_QK_K / 2]; /* low 4 bits */
} tn_block_q5_K;
_Static_assert(sizeof(tn_block_q5_K) == 176, "q5_K block is 176 bytes");

/* 256 values in 16 sub-blocks of 16; 8-bit signed scales. */
typedef struct {
    uint8_t ql[TN_QK_K / 2];     /* low 4 bits */
    uint8_t qh[TN_QK_K / 4];     /* high 2 bits */
    int8_t scales[TN_QK_K / 16];
    tn_half d;
} tn_block_q6_K;
_Static_assert(sizeof(tn_block_q6_K) == 210, "q6_K block is 210 bytes");

/* The activation format of K-quant dot products (not stored in files). */
typedef struct {
    float d;
    int8_t qs[TN_QK_K];
    int16_t bsums[TN_QK_K / 16];
} tn_block_q8_K;
_Static_assert(sizeof(tn_block_q8_K) == 292, "q8_K block is 292 bytes");

/* Q2_K: 256 values in 16 sub-blocks of 16; a 4-bit scale (low nibble) and
 * a 4-bit min (high nibble) per sub-block, 2-bit quants. */
typedef struct {
    uint8_t scales[TN_QK_K / 16];
    uint8_t qs[TN_QK_K / 4];
    tn_half d;    /* super-block scale for the quantized scales */
    tn_half dmin; /* super-block scale for the quantized mins */
} tn_block_q2_K;
_Static_assert(sizeof(tn_block_q2_K) == 84, "q2_K block is 84 bytes");

/* Q3_K: 256 values in 16 sub-blocks of 16; signed 6-bit scales (stored +32)
 * packed in 12 bytes, quants of 2 low bits plus a high bit in hmask. */
typedef struct {
    uint8_t hmask[TN_QK_K / 8];
    uint8_t qs[TN_QK_K / 4];
    uint8_t scales[12];
    tn_half d;
} tn_block_q3_K;
_Static_assert(sizeof(tn_block_q3_K) == 110, "q3_K block is 110 bytes");

/* IQ4_NL: 32 values; 4-bit indices into the non-linear table
 * tn_iq4nl_values, nibbles laid out as Q4_0's. */
#define TN_QK4_NL 32
typedef struct { tn_half d; uint8_t qs[TN_QK4_NL / 2]; } tn_block_iq4_nl;
_Static_assert(sizeof(tn_block_iq4_nl) == 18, "iq4_nl block is 18 bytes");

/* IQ4_XS: 256 values in 8 sub-blocks of 32, each with a signed 6-bit scale
 * (stored +32: low 4 bits in scales_l, high 2 bits in scales_h), indices
 * into the same table as IQ4_NL. */
typedef struct {
    tn_half d;
    uint16_t scales_h;
    uint8_t scales_l[TN_QK_K / 64];
    uint8_t qs[TN_QK_K / 2];
} tn_block_iq4_xs;
_Static_assert(sizeof(tn_block_iq4_xs) == 136, "iq4_xs block is 136 bytes");

/* The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl). */
extern const int8_t tn_iq4nl_values[16];

/* MXFP4 (OCP microscaling, gpt-oss's expert weights): 32 values, one E8M0
 * scale byte (a power of two, 2^(e - 127)) and 4-bit E2M1 codes, nibbles
 * laid out as Q4_0's. The codes index tn_mxfp4_values, which are twice
 * the E2M1 values (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives) so that
 * they are integers; the scale is halved to match (tn_e8m0_half), as
 * ggml's kvalues_mxfp4 and GGML_E8M0_TO_FP32_HALF do. */
#define TN_QK_MXFP4 32
typedef struct { uint8_t e; uint8_t qs[TN_QK_MXFP4 / 2]; } tn_block_mxfp4;
_Static_assert(sizeof(tn_block_mxfp4) == 17, "mxfp4 block is 17 bytes");
extern const int8_t tn_mxfp4_values[16];

/* 2^(e - 128) as a float: half the E8M0 scale. e 0 and 1 are the denormals
 * 2^-128 and 2^-127; e 255 (NaN in the MX format) reads as 2^127, as in
 * ggml. From e 253 on the top codes overflow to infinity (8 x 2^125 is
 * 2^128): the quantizer never writes such a block (its largest is 252) and
 * the loader refuses one (tn_weights_first_nonfinite). */
static inline float tn_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Scalar reference dequantizers, one per type: n is a multiple of the block. */
void tn_dequant_ref_q4_0(const tn_block_q4_0 *x, float *y, int64_t n);
void tn_dequant_ref_q4_1(const tn_block_q4_1 *x, float *y, int64_t n);
void tn_dequant_ref_q5_0(const tn_block_q5_0 *x, float *y, int64_t n);
void tn_dequant_ref_q5_1(const tn_block_q5_1 *x, float *y, int64_t n);
void tn_dequant_ref_q8_0(const tn_block_q8_0 *x, float *y, int64_t n);
void tn_dequant_ref_q4_K(const tn_block_q4_K *x, float *y, int64_t n);
void tn_dequant_ref_q5_K(const tn_block_q5_K *x, float *y, int64_t n);
void tn_dequant_ref_q6_K(const tn_block_q6_K *x, float *y, int64_t n);
void tn_dequant_ref_q2_K(const tn_block_q2_K *x, float *y, int64_t n);
void tn_dequant_ref_q3_K(const tn_block_q3_K *x, float *y, int64_t n);
void tn_dequant_ref_iq4_nl(const tn_block_iq4_nl *x, float *y, int64_t n);
void tn_dequant_ref_iq4_xs(const tn_block_iq4_xs *x, float *y, int64_t n);
void tn_dequant_ref_mxfp4(const tn_block_mxfp4 *x, float *y, int64_t n);

/* Scalar reference quantizers (round-to-nearest with ggml's scale search
 * for the K types), same byte layout as ggml's reference quantizers. */
void tn_quant_ref_q4_0(const float *x, tn_block_q4_0 *y, int64_t n);
void tn_quant_ref_q4_1(const float *x, tn_block_q4_1 *y, int64_t n);
void tn_quant_ref_q5_0(const float *x, tn_block_q5_0 *y, int64_t n);
void tn_quant_ref_q5_1(const float *x, tn_block_q5_1 *y, int64_t n);
void tn_quant_ref_q8_0(const float *x, tn_block_q8_0 *y, int64_t n);
void tn_quant_ref_q8_1(const float *x, tn_block_q8_1 *y, int64_t n);
void tn_quant_ref_q8_K(const float *x, tn_block_q8_K *y, int64_t n);
void tn_quant_ref_q4_K(const float *x, tn_block_q4_K *y, int64_t n);
void tn_quant_ref_q5_K(const float *x, tn_block_q5_K *y, int64_t n);
void tn_quant_ref_q6_K(const float *x, tn_block_q6_K *y, int64_t n);
/* Simpler than ggml's for these four (no importance matrix, fewer trial
 * grids): valid blocks of the same layout, error bounds in docs/QUANT.md. */
void tn_quant_ref_q2_K(const float *x, tn_block_q2_K *y, int64_t n);
void tn_quant_ref_q3_K(const float *x, tn_block_q3_K *y, int64_t n);
void tn_quant_ref_iq4_nl(const float *x, tn_block_iq4_nl *y, int64_t n);
void tn_quant_ref_iq4_xs(const float *x, tn_block_iq4_xs *y, int64_t n);
/* ggml's quantize_row_mxfp4_ref: the scale from the block's largest |x|
 * (2^(floor(log2 amax) - 2), so that amax lands in the top codes), each
 * value to the nearest level (the first of equal ones). */
void tn_quant_ref_mxfp4(const float *x, tn_block_mxfp4 *y, int64_t n);

/* The first row of a weight matrix [rows][cols] of `type` (rows row_bytes
 * apart) that holds a NaN or an infinity, or -1 when none does. Block types
 * hold non-finite values only in their f16 scales, so only those are read.
 * Types this check does not know pass. (weights-finite.c) */
int64_t tn_weights_first_nonfinite(uint32_t type, const void *data, size_t row_bytes,
                                   int64_t rows, int64_t cols);

#endif
