/* Attention: the scalar reference, and the choice of kernel.
 *
 * The reference spells out, one query at a time, the arithmetic every
 * family must reproduce bit for bit (tn-cpu.h): fmaf where the SIMD
 * kernels fuse, plain float ops elsewhere, in the same order. It is also the
 * kernel of machines without AVX2 and of head sizes the SIMD kernels do not
 * take. */
#include "tn-cpu-internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

size_t tn_attention_scratch_floats(int32_t head_dim) {
    /* Per query: accumulators, denominators, the running maximum, and the
     * query regrouped by dimension pair (AVX-512: one 32-bit word a pair;
     * AVX2: the pair's two halves as floats). */
    return (size_t)TN_ATTN_TILE * (2 * (size_t)head_dim + TN_ATTN_KB + 2);
}

static float exp2_ref(float x) {
    if (!(x >= TN_EXP2_MIN))
        return 0.0f;
    const float t = x + TN_EXP2_SHIFT;
    const float r = x - (t - TN_EXP2_SHIFT);
    float p = TN_EXP2_C4;
    p = fmaf(p, r, TN_EXP2_C3);
    p = fmaf(p, r, TN_EXP2_C2);
    p = fmaf(p, r, TN_EXP2_C1);
    p = fmaf(p, r, 1.0f);
    uint32_t pb, tb;
    memcpy(&pb, &p, sizeof pb);
    memcpy(&tb, &t, sizeof tb);
    pb += tb << 23;
    memcpy(&p, &pb, sizeof p);
    return p;
}

/* The 8 partial denominators: lanes j and j + 4, then j and j + 2, then the
 * last two (the SIMD kernels' register halves). */
static float sum8(const float *l) {
    float h[4], g[2];
    for (int j = 0; j < 4; j++)
        h[j] = l[j] + l[j + 4];
    for (int j = 0; j < 2; j++)
        g[j] = h[j] + h[j + 2];
    return g[0] + g[1];
}

void tn_attention_scalar(const tn_attn_tile *t, float *scratch) {
    const int32_t D = t->head_dim;
    float *acc = scratch;
    const float c = t->scale * TN_EXP_LOG2E;
    for (int i = 0; i < t->n; i++) {
        const uint16_t *q = t->q[i];
        float l[TN_ATTN_KB / 2] = {0}, m = -INFINITY;
        memset(acc, 0, (size_t)D * sizeof *acc);
        for (int64_t ch = t->first[i] / TN_ATTN_CHUNK; ch <= t->last[i] / TN_ATTN_CHUNK; ch++) {
            const int64_t j0 = ch * TN_ATTN_CHUNK;
            const int64_t u0 = t->first[i] > j0 ? t->first[i] - j0 : 0;
            const int64_t u1 =
                t->last[i] - j0 < TN_ATTN_CHUNK - 1 ? t->last[i] - j0 : TN_ATTN_CHUNK - 1;
            float s[TN_ATTN_CHUNK], mb = -INFINITY;
            for (int64_t u = 0; u < TN_ATTN_CHUNK; u++) {
                s[u] = -INFINITY;
                if (u < u0 || u > u1)
                    continue;
                float a = 0.0f;
                for (int32_t e = 0; e < D / 2; e++)
                    a = tn_attn_dot_pair(a, tn_attn_pair_at(q + 2 * e),
                                         tn_attn_pair_at(t->k + tn_attn_k_index(j0 + u, 2 * e, D)));
                s[u] = a;
                mb = s[u] > mb ? s[u] : mb;
            }
            if (mb > m) {
                if (m != -INFINITY) {
                    const float cm = exp2_ref(m * c - mb * c);
                    for (int j = 0; j < TN_ATTN_KB / 2; j++)
                        l[j] *= cm;
                    for (int32_t d = 0; d < D; d++)
                        acc[d] *= cm;
                }
                m = mb;
            }
            uint16_t p[TN_ATTN_CHUNK];
            const float nmc = -(m * c);
            for (int u = 0; u < TN_ATTN_CHUNK; u++)
                p[u] = tn_bf16_from_f32(exp2_ref(fmaf(s[u], c, nmc)));
            for (int u = 0; u < TN_ATTN_CHUNK; u += 2)
                l[u % TN_ATTN_KB / 2] =
                    tn_attn_dot_pair(l[u % TN_ATTN_KB / 2], tn_attn_pair_at(p + u), TN_ATTN_PAIR_ONES);
            for (int64_t w = u0 / 2; w <= u1 / 2; w++) {
                const uint32_t pw = tn_attn_pair_at(p + 2 * w);
                const uint32_t keep = tn_attn_pair_keep(w, u0, u1);
                const uint16_t *v = t->v + tn_attn_v_index(j0 + 2 * w, 0, D);
                for (int32_t d = 0; d < D; d++)
                    acc[d] = tn_attn_dot_pair(acc[d], pw, tn_attn_pair_at(v + 2 * d) & keep);
            }
        }
        const float inv = tn_attn_inv_denom(t, i, sum8(l), m, c);
        for (int32_t d = 0; d < D; d++)
            t->out[i][d] = acc[d] * inv;
    }
}

#if defined(TN_CPU_X86) && defined(TN_CPU_AVX512_BF16)
/* VDPBF16PS is used only where it computes the reference's bits (checked
 * once: 1 yes, -1 no, 0 not yet). */
static bool tn_attention_bf16_exact(void) {
    static _Atomic int state;
    int s = atomic_load_explicit(&state, memory_order_relaxed);
    if (s == 0) {
        s = tn_isa_has_avx512_bf16() && tn_attention_avx512bf16_selftest() ? 1 : -1;
        atomic_store_explicit(&state, s, memory_order_relaxed);
    }
    return s > 0;
}
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
/* FTZ (bit 15) and DAZ (bit 6): VDPBF16PS flushes denormals whatever MXCSR
 * says; every other family does the same by running under these bits. */
#define TN_MXCSR_FLUSH 0x8040u
#endif

void tn_attention_tile(tn_isa isa, const tn_attn_tile *t, float *scratch) {
#if defined(__x86_64__) || defined(__i386__)
    const unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | TN_MXCSR_FLUSH);
#endif
#if defined(TN_CPU_X86)
#if defined(TN_CPU_AVX512_BF16)
    if (isa >= TN_ISA_AVX512 && tn_attention_bf16_exact() && tn_attention_avx512bf16(t, scratch))
        goto done;
#endif
    if (isa >= TN_ISA_AVX512 && tn_attention_avx512(t, scratch))
        goto done;
    if (isa >= TN_ISA_AVX2 && tn_attention_avx2(t, scratch))
        goto done;
#else
    (void)isa;
#endif
    tn_attention_scalar(t, scratch);
#if defined(TN_CPU_X86)
done:
#endif
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(csr);
#endif
}
