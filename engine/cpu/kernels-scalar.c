/* The scalar reference: dequantize a weight row once, then a plain f32 dot
 * product with each activation row of the tile. Runs every type libtern can
 * dequantize; the SIMD kernels are tested against it. */
#include "tn-cpu-internal.h"

/* Eight partial sums (like an 8-lane vector) then a fixed tree: the order
 * is part of the result and never depends on the batch. */
static float dot_f32(const float *a, const float *b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[k + j] * b[k + j];
    for (int j = 0; k < n; k++, j++)
        acc[j] += a[k] * b[k];
    float s0 = (acc[0] + acc[4]) + (acc[2] + acc[6]);
    float s1 = (acc[1] + acc[5]) + (acc[3] + acc[7]);
    return s0 + s1;
}

/* The dequantized row, then room for a row gathered from an interleaved
 * layout (no type takes more than 4 bytes a value). */
static size_t row_scratch_bytes(int64_t cols) { return (size_t)cols * 2 * sizeof(float); }

static void tile_f32(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0, int nb) {
    (void)thr;
    const tn_weight *w = mm->w;
    for (int64_t r = r0; r < r1; r++) {
        const float *wr = (const float *)((const uint8_t *)w->data + (size_t)r * w->row_bytes);
        for (int64_t b = b0; b < b0 + nb; b++)
            mm->y[b * w->rows + r] = dot_f32(wr, mm->x + b * w->cols, w->cols);
    }
}

static void tile_dequant(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0,
                         int nb) {
    const tn_weight *w = mm->w;
    float *wr = thr;
    uint8_t *raw = (uint8_t *)(wr + w->cols);
    for (int64_t r = r0; r < r1; r++) {
        tn_dequantize_row(w->type, tn_weight_row_raw(w, r, raw), wr, w->cols);
        for (int64_t b = b0; b < b0 + nb; b++)
            mm->y[b * w->rows + r] = dot_f32(wr, mm->x + b * w->cols, w->cols);
    }
}

void tn_mm_ops_scalar(tn_mm_ops *ops, uint32_t type) {
    if (type == TN_TYPE_F32) {
        ops->tile = tile_f32;
        return;
    }
    if (!tn_type_supported(type))
        return;
    ops->thr_bytes = row_scratch_bytes;
    ops->tile = tile_dequant;
}
