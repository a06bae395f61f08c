/* Which instruction sets this CPU has, asked once, and the TERN_ISA cap:
 * apart from the matrix products, which only read the answer. */
#include "tn-cpu-internal.h"

#include <stdlib.h>
#include <string.h>

const char *tn_isa_name(tn_isa isa) {
    switch (isa) {
    case TN_ISA_SCALAR:
        return "scalar";
    case TN_ISA_AVX2:
        return "avx2";
    case TN_ISA_AVX512:
        return "avx512";
    default:
        return "unknown";
    }
}

#if defined(TN_CPU_X86)
#include <cpuid.h>
/* clang 14's __builtin_cpu_supports does not know "f16c": ask CPUID (leaf 1, ECX bit 29). */
static bool cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

#if defined(TN_CPU_SHA)
#include <cpuid.h>
#endif

static bool cpu_has_uncached(tn_isa isa);

/* CPUID answers never change: asked once per family, then read on every
 * matmul. */
static bool cpu_has(tn_isa isa) {
    static atomic_int cache[TN_ISA_COUNT_]; /* 0 unknown, 1 no, 2 yes */
    if (isa < TN_ISA_SCALAR || isa >= TN_ISA_COUNT_)
        return false;
    int c = atomic_load_explicit(&cache[isa], memory_order_relaxed);
    if (c == 0) {
        c = cpu_has_uncached(isa) ? 2 : 1;
        atomic_store_explicit(&cache[isa], c, memory_order_relaxed);
    }
    return c == 2;
}

static bool cpu_has_uncached(tn_isa isa) {
#if defined(TN_CPU_X86)
    __builtin_cpu_init();
    switch (isa) {
    case TN_ISA_SCALAR:
        return true;
    case TN_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               cpu_has_f16c();
    case TN_ISA_AVX512:
        return cpu_has_uncached(TN_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
    default:
        return false;
    }
#else
    return isa == TN_ISA_SCALAR;
#endif
}

bool tn_isa_available(tn_isa isa) { return isa >= TN_ISA_SCALAR && isa < TN_ISA_COUNT_ && cpu_has(isa); }

bool tn_cpu_has_sha(void) {
#if defined(TN_CPU_SHA)
    static atomic_int cache; /* 0 unknown, 1 no, 2 yes */
    int c = atomic_load_explicit(&cache, memory_order_relaxed);
    if (c == 0) {
        unsigned a, b, cx, d;
        /* leaf 7 EBX bit 29: SHA; leaf 1 ECX bits 9 and 19: SSSE3, SSE4.1 */
        const bool sha = __get_cpuid_count(7, 0, &a, &b, &cx, &d) && (b & (1u << 29));
        const bool sse = __get_cpuid(1, &a, &b, &cx, &d) && (cx & (1u << 9)) && (cx & (1u << 19));
        c = sha && sse ? 2 : 1;
        atomic_store_explicit(&cache, c, memory_order_relaxed);
    }
    return c == 2;
#else
    return false;
#endif
}

#if !defined(TN_CPU_SHA)
/* A build without the SHA extensions' file (another architecture, an old
 * compiler): never called, as tn_cpu_has_sha() says no. */
void tn_sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t n_blocks) {
    (void)h;
    (void)p;
    (void)n_blocks;
}
#endif

bool tn_isa_has_avx512_bf16(void) {
#if defined(TN_CPU_X86) && defined(TN_CPU_AVX512_BF16)
    __builtin_cpu_init();
    return cpu_has(TN_ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

tn_isa tn_isa_best(void) {
    tn_isa best = TN_ISA_SCALAR;
    for (int i = TN_ISA_COUNT_ - 1; i > 0; i--)
        if (cpu_has((tn_isa)i)) {
            best = (tn_isa)i;
            break;
        }
    const char *cap = getenv("TERN_ISA");
    if (cap && *cap)
        for (int i = 0; i < TN_ISA_COUNT_; i++)
            if (!strcmp(cap, tn_isa_name((tn_isa)i)) && (tn_isa)i < best)
                best = (tn_isa)i;
    return best;
}
