/* Non-finite weights (NaN, Inf) found at load time: such a file would
 * otherwise load, and every logit of every step would be NaN (the sampler
 * then picks token 0 forever). In a block type only the f16 scale fields
 * (d, m, dmin) can hold one, as the quants are integers (MXFP4: a scale
 * byte so large that its top codes overflow); F32, F16 and BF16 are read
 * whole. */
#include "tn-quant.h"

#include <stddef.h>
#include <string.h>

_Static_assert(offsetof(tn_block_q3_K, d) == 108, "q3_K d");
_Static_assert(offsetof(tn_block_q2_K, d) == 80 && offsetof(tn_block_q2_K, dmin) == 82, "q2_K d, dmin");

/* Byte offsets of the f16 fields in one block, -1 ends the list; NULL for
 * a type this check does not know (it passes). */
static const int *half_fields(uint32_t type) {
    static const int d0[] = {0, -1}, d0m2[] = {0, 2, -1}, q6k[] = {208, -1}, q3k[] = {108, -1},
                     q2k[] = {80, 82, -1};
    switch (type) {
    case TN_TYPE_Q4_0:
    case TN_TYPE_Q5_0:
    case TN_TYPE_Q8_0:
        return d0;
    case TN_TYPE_Q4_1:
    case TN_TYPE_Q5_1:
    case TN_TYPE_Q4_K:
    case TN_TYPE_Q5_K:
        return d0m2;
    case TN_TYPE_Q6_K:
        return q6k;
    case TN_TYPE_Q3_K: /* d after hmask, qs and scales */
        return q3k;
    case TN_TYPE_Q2_K: /* d and dmin after scales and qs */
        return q2k;
    case TN_TYPE_IQ4_NL:
    case TN_TYPE_IQ4_XS:
        return d0;
    default:
        return NULL;
    }
}

/* All-ones exponent: Inf or NaN. Written as a reduction without an early
 * exit so that the compiler vectorizes it; a row is short. */
static bool halves_finite(const uint16_t *h, int64_t n) {
    unsigned bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad |= (h[i] & 0x7c00u) == 0x7c00u;
    return !bad;
}

static bool floats_finite(const uint32_t *f, int64_t n) {
    unsigned bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad |= (f[i] & 0x7f800000u) == 0x7f800000u;
    return !bad;
}

static bool bf16_finite(const uint16_t *h, int64_t n) {
    unsigned bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad |= (h[i] & 0x7f80u) == 0x7f80u;
    return !bad;
}

int64_t tn_weights_first_nonfinite(uint32_t type, const void *data, size_t row_bytes,
                                   int64_t rows, int64_t cols) {
    const int *fields = half_fields(type);
    const size_t bb = tn_type_block_bytes(type), bs = tn_type_block_size(type);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = (const uint8_t *)data + (size_t)r * row_bytes;
        bool ok = true;
        if (type == TN_TYPE_F32) {
            ok = ((uintptr_t)row & 3) == 0 ? floats_finite((const uint32_t *)(const void *)row, cols)
                                           : true;
            if ((uintptr_t)row & 3)
                for (int64_t i = 0; i < cols && ok; i++) {
                    uint32_t u;
                    memcpy(&u, row + 4 * i, 4);
                    ok = (u & 0x7f800000u) != 0x7f800000u;
                }
        } else if (type == TN_TYPE_F16 || type == TN_TYPE_BF16) {
            if (((uintptr_t)row & 1) == 0) {
                const uint16_t *h = (const uint16_t *)(const void *)row;
                ok = type == TN_TYPE_F16 ? halves_finite(h, cols) : bf16_finite(h, cols);
            } else {
                const uint16_t mask = type == TN_TYPE_F16 ? 0x7c00u : 0x7f80u;
                for (int64_t i = 0; i < cols && ok; i++) {
                    uint16_t h;
                    memcpy(&h, row + 2 * i, 2);
                    ok = (h & mask) != mask;
                }
            }
        } else if (type == TN_TYPE_MXFP4) {
            /* A scale byte of 253 or more makes the top codes overflow
             * (8 x 2^125 is 2^128): such a block reads as infinities. */
            unsigned bad = 0;
            for (int64_t k = 0; k < cols / TN_QK_MXFP4; k++)
                bad |= row[(size_t)k * sizeof(tn_block_mxfp4)] >= 253;
            ok = !bad;
        } else if (fields && bs) {
            const int64_t nblk = cols / (int64_t)bs;
            unsigned bad = 0;
            for (int64_t k = 0; k < nblk; k++)
                for (const int *f = fields; *f >= 0; f++) {
                    uint16_t h;
                    memcpy(&h, row + (size_t)k * bb + (size_t)*f, 2);
                    bad |= (h & 0x7c00u) == 0x7c00u;
                }
            ok = !bad;
        }
        if (!ok)
            return r;
    }
    return -1;
}
