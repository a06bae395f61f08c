/* Attention: the scalar reference, and the choice of kernel.
 *
 * The reference spells out, one query at a time, the arithmetic every
 * family must reproduce bit for bit (tn-cpu.h): fmaf where the SIMD
 * kernels fuse, plain float ops elsewhere, in the same order. It is also the
 * kernel of machines without AVX2 and of head sizes the SIMD kernels do not
 * take. */
#include "tn-cpu-internal.h"

#include <math.h>
#include <string.h>

size_t tn_attention_scratch_floats(int32_t head_dim) {
    /* Accumulators, denominators, running maxima, scores of the block. */
    return (size_t)TN_ATTN_TILE * ((size_t)head_dim + 2 * TN_ATTN_KB + 1);
}

static float exp_ref(float x) {
    if (!(x >= TN_EXP_MIN))
        return 0.0f;
    const float n = rintf(x * TN_EXP_LOG2E);
    float r = fmaf(n, -TN_EXP_LN2_HI, x);
    r = fmaf(n, -TN_EXP_LN2_LO, r);
    float p = TN_EXP_P0;
    p = fmaf(p, r, TN_EXP_P1);
    p = fmaf(p, r, TN_EXP_P2);
    p = fmaf(p, r, TN_EXP_P3);
    p = fmaf(p, r, TN_EXP_P4);
    p = fmaf(p, r, TN_EXP_P5);
    float y = fmaf(p, r * r, r) + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

/* The 16 partial denominators: lanes i and i + 8, then i and i + 4, i and
 * i + 2, then the last two (the SIMD kernels' register halves). */
static float sum16(const float *l) {
    float h[8], g[4], f[2];
    for (int i = 0; i < 8; i++)
        h[i] = l[i] + l[i + 8];
    for (int i = 0; i < 4; i++)
        g[i] = h[i] + h[i + 4];
    for (int i = 0; i < 2; i++)
        f[i] = g[i] + g[i + 2];
    return f[0] + f[1];
}

void tn_attention_scalar(const tn_attn_tile *t, float *scratch) {
    const int32_t D = t->head_dim;
    float *acc = scratch;
    for (int i = 0; i < t->n; i++) {
        const float *q = t->q[i];
        float l[TN_ATTN_KB] = {0}, m = -INFINITY;
        memset(acc, 0, (size_t)D * sizeof *acc);
        for (int64_t b = t->first[i] / TN_ATTN_KB; b <= t->last[i] / TN_ATTN_KB; b++) {
            const int64_t j0 = b * TN_ATTN_KB;
            const float *kb = t->k + (size_t)j0 * (size_t)D;
            const int64_t u0 = t->first[i] > j0 ? t->first[i] - j0 : 0;
            const int64_t u1 = t->last[i] - j0 < TN_ATTN_KB - 1 ? t->last[i] - j0 : TN_ATTN_KB - 1;
            float s[TN_ATTN_KB], mb = -INFINITY;
            for (int u = 0; u < TN_ATTN_KB; u++) {
                float a = 0.0f;
                for (int32_t d = 0; d < D; d++)
                    a = fmaf(q[d], kb[(size_t)d * TN_ATTN_KB + (size_t)u], a);
                s[u] = u < u0 || u > u1 ? -INFINITY : a * t->scale;
                mb = s[u] > mb ? s[u] : mb;
            }
            if (mb > m) {
                if (m != -INFINITY) {
                    const float c = exp_ref(m - mb);
                    for (int u = 0; u < TN_ATTN_KB; u++)
                        l[u] *= c;
                    for (int32_t d = 0; d < D; d++)
                        acc[d] *= c;
                }
                m = mb;
            }
            float p[TN_ATTN_KB];
            for (int u = 0; u < TN_ATTN_KB; u++) {
                p[u] = exp_ref(s[u] - m);
                l[u] += p[u];
            }
            for (int64_t u = u0; u <= u1; u++) {
                const float *v = t->v + (size_t)(j0 + u) * (size_t)D;
                for (int32_t d = 0; d < D; d++)
                    acc[d] = fmaf(p[u], v[d], acc[d]);
            }
        }
        const float inv = 1.0f / sum16(l);
        for (int32_t d = 0; d < D; d++)
            t->out[i][d] = acc[d] * inv;
    }
}

void tn_attention_tile(tn_isa isa, const tn_attn_tile *t, float *scratch) {
#if defined(TN_CPU_X86)
    if (isa >= TN_ISA_AVX512 && tn_attention_avx512(t, scratch))
        return;
    if (isa >= TN_ISA_AVX2 && tn_attention_avx2(t, scratch))
        return;
#else
    (void)isa;
#endif
    tn_attention_scalar(t, scratch);
}
