/* The reference a one-row kernel's stream is held to: one thread reading a
 * buffer far larger than the last-level cache with plain AVX-512 loads,
 * W vpdpbusd per 64 bytes beside them (W = 0: a vpaddd), and optionally a
 * software prefetch DIST bytes ahead (hint 0: T0, 1: T1). GB/s of wall
 * time, best of the repetitions; 2 MiB pages unless NOHUGE is set.
 * stream [W [DIST [HINT [MIB]]]]   (default 4 0 0 1024)
 * Build: gcc -O2 -mavx512f -mavx512bw -mavx512vnni tools/cputime/stream.c -o /tmp/stream
 * docs/PERFORMANCE.md (session 17) compares it with tile's rate from DRAM. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define PF(o)                                                      \
    do {                                                           \
        if (hint)                                                  \
            _mm_prefetch((const char *)p + k + dist + (o), _MM_HINT_T1); \
        else                                                       \
            _mm_prefetch((const char *)p + k + dist + (o), _MM_HINT_T0); \
    } while (0)

__attribute__((noinline)) static __m512i run(const uint8_t *p, size_t n, int w, size_t dist,
                                             int hint) {
    const __m512i x = _mm512_set1_epi32(0x01020304);
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t k = 0; k + 256 <= n; k += 256) {
        if (dist) {
            PF(0);
            PF(64);
            PF(128);
            PF(192);
        }
        const __m512i v0 = _mm512_load_si512(p + k), v1 = _mm512_load_si512(p + k + 64);
        const __m512i v2 = _mm512_load_si512(p + k + 128), v3 = _mm512_load_si512(p + k + 192);
        /* Four independent chains: the loads' latency is what is measured. */
        for (int i = 0; i < w; i++) {
            a0 = _mm512_dpbusd_epi32(a0, v0, x);
            a1 = _mm512_dpbusd_epi32(a1, v1, x);
            a2 = _mm512_dpbusd_epi32(a2, v2, x);
            a3 = _mm512_dpbusd_epi32(a3, v3, x);
        }
        if (w == 0) {
            a0 = _mm512_add_epi32(a0, v0);
            a1 = _mm512_add_epi32(a1, v1);
            a2 = _mm512_add_epi32(a2, v2);
            a3 = _mm512_add_epi32(a3, v3);
        }
    }
    return _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
}

int main(int argc, char **argv) {
    const int w = argc > 1 ? atoi(argv[1]) : 4;
    const size_t dist = argc > 2 ? (size_t)atol(argv[2]) : 0;
    const int hint = argc > 3 ? atoi(argv[3]) : 0;
    const size_t mib = argc > 4 ? (size_t)atol(argv[4]) : 1024;
    if (w < 0 || w > 64 || mib < 64 || dist % 64) {
        fprintf(stderr, "usage: stream [W (0-64) [DIST (bytes, 64s) [HINT (0 T0, 1 T1) [MIB (>= 64)]]]]\n");
        return 2;
    }
    const size_t huge = (size_t)2 << 20, n = mib << 20;
    uint8_t *p = aligned_alloc(huge, n + huge);
    if (!p) {
        fprintf(stderr, "stream: no memory for %zu MiB\n", mib);
        return 1;
    }
    if (!getenv("NOHUGE"))
        madvise(p, n + huge, MADV_HUGEPAGE);
    memset(p, 1, n + huge);
    volatile int sink = 0;
    double best = 0;
    for (int r = 0; r < 5; r++) {
        const double t0 = now();
        const __m512i s = run(p, n, w, dist, hint);
        const double dt = now() - t0;
        sink += _mm512_reduce_add_epi32(s);
        if (n / dt > best)
            best = n / dt;
    }
    printf("stream W=%d dist=%zu hint=%s %zu MiB %s: %.1f GB/s\n", w, dist, hint ? "T1" : "T0", mib,
           getenv("NOHUGE") ? "4 KiB pages" : "2 MiB pages", best / 1e9);
    free(p);
    return 0;
}
