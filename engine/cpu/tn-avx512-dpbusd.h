/* Helpers shared by the AVX-512 X16 kernels (kernels-avx512.c,
 * kernels-avx512-x16k.c): vpdpbusd with an embedded-broadcast activation
 * word, a broadcast word, and the K-quants' prefetch. Include only from
 * files compiled with the AVX-512 VNNI flags. */
#ifndef TN_AVX512_DPBUSD_H
#define TN_AVX512_DPBUSD_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* acc + w . (the 4 activation bytes at x in every lane), with those bytes
 * as vpdpbusd's embedded broadcast ({1to16}) memory operand: GCC does not
 * fold _mm512_set1_epi32 into vpdpbusd and issues a separate vpbroadcastd
 * per word. The Q6_K X16 kernel gained about 5 % from it at 16 activation
 * rows (docs/PERFORMANCE.md, "Q6_K in X16 (session 15)"); the same
 * instruction otherwise, so the same results. x needs no alignment. */
typedef int32_t tn_i32_alias __attribute__((may_alias));
static inline __attribute__((always_inline)) __m512i dpbusd_bcast(__m512i acc, __m512i w,
                                                                  const uint8_t *x) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const tn_i32_alias *)x));
    return acc;
}

/* The 4 bytes at p (any alignment) in every 32-bit lane. */
static inline __attribute__((always_inline)) __m512i bcast32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* The X16 K-quants' prefetch: the super-block group TN_X16K_PREFETCH
 * groups (each cb bytes) after c, into L2 (T1), a hint only. Session 11's
 * host streamed Q4_K at B = 1 at 17 GB/s without any and 27-28 with the
 * group two ahead into L1 (T0); session 17's host the other way round
 * (Q4_K 17.4 -> 23.5, Q6_K 16.1 -> 25.2 without it). Session 18, one thread
 * from DRAM (tools/cputime/kernels.c 8192x2048, three alternated rounds of
 * builds that differ), eight ahead into L2 against two into L1: Q3_K
 * 9-15 -> 21-24 GB/s at B = 1 and 277 -> 310-316 GFLOP/s at B = 16; Q4_K
 * 14-16 -> 23-25 and 205-207 -> 283-310; Q5_K 11-16 -> 19-23 and 164-188 ->
 * 247-271; Q6_K 16-17 -> 19-24 and 163-188 -> 226-307; Q2_K and IQ4_XS the
 * same or better (docs/PERFORMANCE.md, "The K-quants' prefetch"). At one
 * to three rows a context may leave it out per type
 * (tn_cpu_decode_prefetch_type, engine/decode-tune.c). An address, not a
 * pointer: past the last group it points beyond the weights, which a
 * prefetch may do and C may not. */
#define TN_X16K_PREFETCH 8
static inline __attribute__((always_inline)) void x16k_prefetch(const uint8_t *c, size_t cb) {
    const uintptr_t pf = (uintptr_t)c + TN_X16K_PREFETCH * cb;
    for (size_t o = 0; o < cb; o += 64)
        _mm_prefetch((const char *)(pf + o), _MM_HINT_T1);
}

#endif
