/* SiLU-gated products, g = silu(g) * u, with one fixed arithmetic for every
 * instruction set (tn-cpu.h): the scalar reference below and the AVX2 kernel
 * (act-avx2.c) perform the same IEEE operations in the same order, so they
 * agree bit for bit and the choice between them is a matter of speed only. */
#include "tn-cpu-internal.h"

#include <string.h>

/* exp(z) for z clamped to [TN_SILU_ZMIN, TN_SILU_ZMAX]: n = round(z log2 e)
 * by the shift constant, r = z - n ln 2 in two FMAs (ln 2 split in a high part
 * with 16 trailing zero bits and the rest), e^r by its degree-7 Taylor
 * polynomial in Horner form (truncation error under 4e-9 on |r| <= ln2 / 2),
 * scaled by 2^n with an integer add into the exponent field (n in [-29, 127]
 * keeps the result normal). */
float tn_silu_ref(float x) {
    float z = -x;
    z = z > TN_SILU_ZMIN ? z : TN_SILU_ZMIN; /* NaN -> ZMIN: x / d stays NaN */
    z = z < TN_SILU_ZMAX ? z : TN_SILU_ZMAX;
    const float t = z * TN_SILU_LOG2E + TN_SILU_SHIFT;
    const float n = t - TN_SILU_SHIFT;
    float r = fmaf(n, -TN_SILU_LN2_HI, z);
    r = fmaf(n, -TN_SILU_LN2_LO, r);
    float p = TN_SILU_C7;
    p = fmaf(p, r, TN_SILU_C6);
    p = fmaf(p, r, TN_SILU_C5);
    p = fmaf(p, r, TN_SILU_C4);
    p = fmaf(p, r, TN_SILU_C3);
    p = fmaf(p, r, TN_SILU_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t pb, tb, sb;
    memcpy(&pb, &p, 4);
    memcpy(&tb, &t, 4);
    const float shift = TN_SILU_SHIFT;
    memcpy(&sb, &shift, 4);
    pb += (tb - sb) << 23; /* (tb - sb) is n as an integer, modulo 2^32 */
    float e;
    memcpy(&e, &pb, 4);
    return x / (1.0f + e);
}

void tn_silu_mul(float *g, const float *u, int64_t n) {
#if defined(TN_CPU_X86)
    /* CPUID alone (cached), not TERN_ISA: the result is the same bits either
     * way, and a decode step calls this with a few thousand values. */
    if (tn_isa_available(TN_ISA_AVX2)) {
        tn_silu_mul_avx2(g, u, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        g[i] = tn_silu_ref(g[i]) * u[i];
}
