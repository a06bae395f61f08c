/* SHA-256's compression function with the x86 SHA extensions (SHA-NI:
 * sha256rnds2, sha256msg1/2), compiled with -msha -mssse3 -msse4.1 and run
 * only where CPUID has them (tn_cpu_has_sha). The scalar reference is
 * engine/pin-store.c's; test-pin-store compares the two on every length
 * and chunking. Checking a downloaded model's sha256 ran at about 0.38
 * GB/s through GLib's GChecksum (1.9 GB/s here): a 17 GB file kept its row
 * at 100 % for about 45 s (docs/MODELS.md). */
#include "tn-cpu.h"

#if defined(TN_CPU_SHA)
#include <immintrin.h>

void tn_sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t n_blocks) {
    /* The instructions keep the state as ABEF and CDGH (lane 3 the first
     * letter); the message words come big-endian. */
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    __m128i abcd = _mm_loadu_si128((const __m128i *)&h[0]);
    __m128i efgh = _mm_loadu_si128((const __m128i *)&h[4]);
    abcd = _mm_shuffle_epi32(abcd, 0xB1);              /* lanes B A D C */
    efgh = _mm_shuffle_epi32(efgh, 0x1B);              /* lanes H G F E */
    __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);     /* lanes F E B A */
    __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);  /* lanes H G D C */
    for (size_t b = 0; b < n_blocks; b++, p += 64) {
        const __m128i abef_in = abef, cdgh_in = cdgh;
        __m128i w[4]; /* w[k & 3]: the message words 4k .. 4k+3 */
        for (int k = 0; k < 4; k++)
            w[k] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * k)), bswap);
        for (int k = 0; k < 16; k++) {
            if (k >= 4) {
                /* W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four at a
                 * time: w[k&3] holds the words from 4k-16, w[(k+1)&3] from
                 * 4k-12, w[(k+2)&3] from 4k-8, w[(k+3)&3] from 4k-4. */
                __m128i t = _mm_sha256msg1_epu32(w[k & 3], w[(k + 1) & 3]);
                t = _mm_add_epi32(t, _mm_alignr_epi8(w[(k + 3) & 3], w[(k + 2) & 3], 4));
                w[k & 3] = _mm_sha256msg2_epu32(t, w[(k + 3) & 3]);
            }
            const __m128i wk =
                _mm_add_epi32(w[k & 3], _mm_loadu_si128((const __m128i *)&tn_sha256_k[4 * k]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef_in);
        cdgh = _mm_add_epi32(cdgh, cdgh_in);
    }
    const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(feba, dchg, 0xF0)); /* lanes D C B A */
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(dchg, feba, 8));    /* lanes H G F E */
}
#endif
