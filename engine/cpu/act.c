/* SiLU- and GELU-gated products (g = act(g) * u) and the logit softcap (v =
 * cap tanh(v / cap)), with one fixed arithmetic for every instruction set
 * (tn-cpu.h): the scalar references below and the AVX2 kernels (act-avx2.c)
 * perform the same IEEE operations in the same order, so they agree bit for
 * bit and the choice between them is a matter of speed only. */
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

/* SiLU's polynomial up to (not including) its last step: p1 with e^r = 1 +
 * r p1 (rounded once by the caller's FMA), e^r - 1 = r p1. */
static inline float exp_p1(float r) {
    float p = TN_SILU_C7;
    p = fmaf(p, r, TN_SILU_C6);
    p = fmaf(p, r, TN_SILU_C5);
    p = fmaf(p, r, TN_SILU_C4);
    p = fmaf(p, r, TN_SILU_C3);
    p = fmaf(p, r, TN_SILU_C2);
    return fmaf(p, r, 1.0f);
}

/* The comparisons below are the AVX2 kernel's max/min: a > b ? a : b
 * returns b when either is NaN, as VMAXPS/VMAXPD do. */
float tn_gelu_ref(float x) {
    const float xc = TN_GELU_XMIN > x ? TN_GELU_XMIN : x; /* NaN stays */
    const double xd = xc;
    const double x2 = xd * xd;
    double z = x2 * TN_GELU_K3;
    z = z + TN_GELU_K1;
    z = z * xd;
    z = z > TN_GELU_ZMIN ? z : TN_GELU_ZMIN; /* NaN -> ZMIN: xc / d stays NaN */
    z = z < TN_GELU_ZMAX ? z : TN_GELU_ZMAX;
    const double t = z * TN_GELU_LOG2E + TN_GELU_SHIFT;
    const double n = t - TN_GELU_SHIFT;
    const double rd = z - n * TN_GELU_LN2;
    const float r = (float)rd;     /* |r| <= ln 2 / 2 (+ 1e-14) */
    const int32_t k = (int32_t)n; /* an integer in [-29, 127]: exact */
    const float p = fmaf(exp_p1(r), r, 1.0f);
    uint32_t pb;
    memcpy(&pb, &p, 4);
    pb += (uint32_t)k << 23;
    float e;
    memcpy(&e, &pb, 4);
    return xc / (1.0f + e);
}

void tn_gelu_mul(float *g, const float *u, int64_t n) {
#if defined(TN_CPU_X86)
    if (tn_isa_available(TN_ISA_AVX2)) { /* as tn_silu_mul */
        tn_gelu_mul_avx2(g, u, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        g[i] = tn_gelu_ref(g[i]) * u[i];
}

/* tanh|y| = (1 - e^-2|y|) / (1 + e^-2|y|) = -w / (2 + w), w = e^z - 1, z =
 * -2|y| (exact). w = 2^n e^r - 1 = fma(2^n, e^r - 1, 2^n - 1): one
 * rounding, and where n = 0 (|z| < ln 2 / 2) w is r p1 itself, so a small y
 * keeps its relative precision (1 - e^-2|y| would cancel). */
float tn_tanh_ref(float y) {
    const float a = fabsf(y);
    float z = a * -2.0f;
    z = z > TN_SILU_ZMIN ? z : TN_SILU_ZMIN; /* NaN -> ZMIN, put back below */
    const float t = z * TN_SILU_LOG2E + TN_SILU_SHIFT;
    const float n = t - TN_SILU_SHIFT;
    float r = fmaf(n, -TN_SILU_LN2_HI, z);
    r = fmaf(n, -TN_SILU_LN2_LO, r);
    const float q = exp_p1(r) * r;
    uint32_t tb, sb, two_n;
    memcpy(&tb, &t, 4);
    const float shift = TN_SILU_SHIFT;
    memcpy(&sb, &shift, 4);
    two_n = (tb - sb + 127u) << 23; /* n in [-29, 0]: a normal power of two */
    float s;
    memcpy(&s, &two_n, 4);
    const float w = fmaf(s, q, s - 1.0f);
    const float th = -w / (2.0f + w);
    const float res = copysignf(th, y);
    return y != y ? y : res;
}

void tn_softcap(float *v, int64_t n, float cap) {
#if defined(TN_CPU_X86)
    if (tn_isa_available(TN_ISA_AVX2)) {
        tn_softcap_avx2(v, n, cap);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        v[i] = cap * tn_tanh_ref(v[i] / cap);
}
