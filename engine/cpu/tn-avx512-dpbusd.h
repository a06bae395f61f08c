/* vpdpbusd with an embedded-broadcast activation word, shared by the
 * AVX-512 X16 kernels (kernels-avx512.c, kernels-avx512-x16k.c). Include
 * only from files compiled with the AVX-512 VNNI flags. */
#ifndef TN_AVX512_DPBUSD_H
#define TN_AVX512_DPBUSD_H

#include <immintrin.h>
#include <stdint.h>

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

#endif
