/* The arithmetic the DFlash and MTP drafters share (engine/drafter-dflash.c,
 * engine/drafter-mtp.c): one copy, so that both stay what llama.cpp's
 * Gemma-style draft graphs compute (docs/DFLASH.md, docs/MTP.md). */
#ifndef TN_DRAFTER_MATH_H
#define TN_DRAFTER_MATH_H

#include <math.h>
#include <stdint.h>

static inline float tn_draft_silu(float x) { return x / (1.0f + expf(-x)); }

static inline float tn_draft_gelu_tanh(float x) {
    const float k = 0.79788456080286535588f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(k * x * (1.0f + 0.044715f * x * x)));
}

/* cos, sin of pos * base^(-2i / n_rot) / freqs[i] for i < n_rot / 2: the
 * rotation of the two halves of the first n_rot dimensions of a head (NeoX
 * order, as llama.cpp's DFlash and Gemma 4 graphs). freqs (rope_freqs)
 * divides the frequencies; Gemma-style (proportional) rope parks the
 * dimensions it does not rotate behind a huge divisor. */
static inline void tn_draft_rope_table(float *cs, int64_t pos, int32_t n_rot, float base,
                                       const float *freqs) {
    for (int32_t i = 0; i < n_rot / 2; i++) {
        double theta = (double)pos * pow((double)base, -2.0 * i / n_rot);
        if (freqs)
            theta /= (double)freqs[i];
        cs[2 * i] = (float)cos(theta);
        cs[2 * i + 1] = (float)sin(theta);
    }
}

static inline void tn_draft_rope(float *v, const float *cs, int32_t n_rot) {
    const int32_t half = n_rot / 2;
    for (int32_t i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1], x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x0 * s + x1 * c;
    }
}

#endif
