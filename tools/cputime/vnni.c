/* How many vpdpbusd zmm a core issues a cycle (docs/PERFORMANCE.md, "What
 * a Zen 5 core's vpdpbusd can do", session 26): from registers with 8 and
 * 12 independent accumulators (fewer than latency x throughput shows the
 * latency), with the activation word as an embedded-broadcast memory
 * operand, and with two 64-byte loads beside every 12. The clock is taken
 * from a chain of dependent adds (one a cycle), so the figures are per
 * cycle of the core as it runs (turbo included).
 *   gcc -O2 -mavx512f -mavx512bw -mavx512vnni tools/cputime/vnni.c -o /tmp/vnni && /tmp/vnni */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define DP(src, acc) "vpdpbusd " src ", %%zmm21, %%zmm" #acc "\n"
#define DP8(s) DP(s, 0) DP(s, 1) DP(s, 2) DP(s, 3) DP(s, 4) DP(s, 5) DP(s, 6) DP(s, 7)
#define DP12(s) DP8(s) DP(s, 8) DP(s, 9) DP(s, 10) DP(s, 11)
#define BC(off, acc) "vpdpbusd " #off "(%0)%{1to16%}, %%zmm21, %%zmm" #acc "\n"
#define BC12 BC(0, 0) BC(4, 1) BC(8, 2) BC(12, 3) BC(16, 4) BC(20, 5) BC(24, 6) BC(28, 7) \
    BC(32, 8) BC(36, 9) BC(40, 10) BC(44, 11)
#define CLOBBERS "zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm8", "zmm9", \
    "zmm10", "zmm11", "zmm20", "zmm21", "zmm22", "zmm23", "memory"

int main(void) {
    static int buf[64] __attribute__((aligned(64)));
    const int *p = buf;
    const long n = 100000000;
    long x = 0;
    double t = now();
    for (long i = 0; i < n; i++)
        __asm__ volatile("add $1, %0\n add $1, %0\n add $1, %0\n add $1, %0" : "+r"(x));
    const double hz = n * 4 / (now() - t);
    printf("clock ~ %.2f GHz (dependent adds)\n", hz / 1e9);
    __asm__ volatile("vpxord %%zmm20, %%zmm20, %%zmm20\n vpternlogd $0xff, %%zmm21, %%zmm21, %%zmm21"
                     ::: "zmm20", "zmm21");
#define RUN(name, per, body)                                                          \
    do {                                                                              \
        t = now();                                                                    \
        for (long i = 0; i < n; i++)                                                  \
            __asm__ volatile(body ::"r"(p) : CLOBBERS);                               \
        printf("%-40s %.2f vpdpbusd a cycle\n", name, (double)n * (per) / ((now() - t) * hz)); \
    } while (0)
    RUN("registers, 8 accumulators", 8, DP8("%%zmm20"));
    RUN("registers, 12 accumulators", 12, DP12("%%zmm20"));
    RUN("embedded broadcast, 12 accumulators", 12, BC12);
    RUN("embedded broadcast + 2 loads, 12", 12, BC12 "vmovdqu64 64(%0), %%zmm22\n vmovdqu64 128(%0), %%zmm23\n");
    printf("(%ld)\n", x);
    return 0;
}
