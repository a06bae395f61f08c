/* The Q4_K X16 tile's inner loop alone (kernels-avx512.c rows_x16_q4k, one
 * 32-value sub-block j of 16 weight rows against NB activation rows), on
 * data that stays in L1: vpdpbusd a cycle as the kernel orders the chains
 * (row by row) and interleaved across rows (p-outer), with and without the
 * nibble unpacking and the scale multiply, and with the NB rows' activation
 * words 1 KiB apart (-DINTERLEAVED: by sub-block, 256 contiguous bytes).
 * docs/PERFORMANCE.md, session 26. Results are meaningless sums.
 *   gcc -O3 -mavx512f -mavx512bw -mavx512vnni -DNB=8 tools/cputime/tile-loop.c -o /tmp/tile-loop */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#ifndef NB
#define NB 8 /* activation rows a pass (at most 12: the accumulators are registers) */
#endif
#ifdef INTERLEAVED
#define ACT(b, j, p) (act + 256 * (j) + 32 * (b) + 4 * (p))
#else
#define ACT(b, j, p) (act + 1024 * (b) + 32 * (j) + 4 * (p))
#endif

typedef int32_t i32_alias __attribute__((may_alias));
static inline __attribute__((always_inline)) __m512i dpbusd_bcast(__m512i acc, __m512i w,
                                                                  const uint8_t *x) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const i32_alias *)x));
    return acc;
}

static uint8_t weights[4096] __attribute__((aligned(64)));
static uint8_t act[12 * 1024] __attribute__((aligned(64)));

enum { RAW = 1, NO_SCALE = 2, ACROSS_ROWS = 4 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static __m512i run(long iters, int mode) {
    const __m512i lo4 = _mm512_set1_epi8(15), sc = _mm512_set1_epi32(3);
    __m512i isum[NB];
    for (int b = 0; b < NB; b++)
        isum[b] = _mm512_setzero_si512();
    for (long it = 0; it < iters; it++) {
        for (int j = 0; j < 8; j++) {
            const uint8_t *qb = weights + 512 * (j / 2);
            __m512i wq[8];
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++) {
                const __m512i v = _mm512_load_si512(qb + 64 * p);
                wq[p] = mode & RAW ? v : _mm512_and_si512(j & 1 ? _mm512_srli_epi16(v, 4) : v, lo4);
            }
            __m512i t[NB];
#pragma GCC unroll 12
            for (int b = 0; b < NB; b++)
                t[b] = _mm512_setzero_si512();
            if (mode & ACROSS_ROWS) {
#pragma GCC unroll 8
                for (int p = 0; p < 8; p++)
#pragma GCC unroll 12
                    for (int b = 0; b < NB; b++)
                        t[b] = dpbusd_bcast(t[b], wq[p], ACT(b, j, p));
            } else {
#pragma GCC unroll 12
                for (int b = 0; b < NB; b++)
#pragma GCC unroll 8
                    for (int p = 0; p < 8; p++)
                        t[b] = dpbusd_bcast(t[b], wq[p], ACT(b, j, p));
            }
#pragma GCC unroll 12
            for (int b = 0; b < NB; b++)
                isum[b] = _mm512_add_epi32(isum[b], mode & NO_SCALE ? t[b] : _mm512_mullo_epi32(t[b], sc));
        }
    }
    __m512i r = isum[0];
    for (int b = 1; b < NB; b++)
        r = _mm512_add_epi32(r, isum[b]);
    return r;
}

int main(void) {
    long x = 0;
    const long n = 100000000;
    double t = now();
    for (long i = 0; i < n; i++)
        __asm__ volatile("add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0" : "+r"(x));
    const double hz = n * 4 / (now() - t);
    static const char *const names[] = {
        "row by row", "row by row, no unpacking", "row by row, no scale multiply",
        "row by row, neither", "across rows", "across rows, no unpacking",
        "across rows, no scale multiply", "across rows, neither"};
    printf("NB = %d, clock ~ %.2f GHz (%ld)\n", NB, hz / 1e9, x);
    for (int mode = 0; mode < 8; mode++) {
        const long iters = 2000000;
        const double t0 = now();
        const __m512i r = run(iters, mode);
        const double dt = now() - t0;
        printf("%-32s %.2f vpdpbusd a cycle (%d)\n", names[mode], iters * 64.0 * NB / (dt * hz),
               _mm512_reduce_add_epi32(r));
    }
    return 0;
}
