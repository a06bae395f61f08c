/* Single-thread CPU time of the activations of one Gemma 4 E4B decode step:
 * GELU-tanh gating of 10,240 x 42 values and the softcap of 262,144 logits,
 * libm's tanhf per value (before session 11) against tn_gelu_mul and
 * tn_softcap (engine/cpu/act.c), and SiLU for scale. Best of 5 rounds. */
#include "cpu/tn-cpu.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static float gelu_libm(float x) { return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x))); }
enum { NG = 10240 * 42, NV = 262144 };
static float g0[NG], g[NG], u[NG], v0[NV], v[NV];
static volatile float sink;
#define TIME(label, n, reset, body)                                                    \
    do {                                                                              \
        double best = 1e9;                                                            \
        for (int rep = 0; rep < 5; rep++) {                                           \
            reset;                                                                    \
            double t0 = now();                                                        \
            body;                                                                     \
            double dt = now() - t0;                                                   \
            if (dt < best) best = dt;                                                 \
        }                                                                             \
        printf("%-22s %8.3f ms  %6.2f ns/value\n", label, best * 1e3, best * 1e9 / (n)); \
    } while (0)
int main(void) {
    uint64_t s = 1;
    for (int i = 0; i < NG; i++) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; g0[i] = ((float)(s >> 40) / (1 << 24) - 0.5f) * 6; u[i] = 1.0f + g0[i] / 8; }
    for (int i = 0; i < NV; i++) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; v0[i] = ((float)(s >> 40) / (1 << 24) - 0.5f) * 60; }
    TIME("gelu libm tanhf", NG, memcpy(g, g0, sizeof g), for (int i = 0; i < NG; i++) g[i] = gelu_libm(g[i]) * u[i]);
    sink = g[NG / 2];
    TIME("tn_gelu_mul", NG, memcpy(g, g0, sizeof g), tn_gelu_mul(g, u, NG));
    sink = g[NG / 2];
    TIME("tn_silu_mul", NG, memcpy(g, g0, sizeof g), tn_silu_mul(g, u, NG));
    sink = g[NG / 2];
    TIME("softcap libm tanhf", NV, memcpy(v, v0, sizeof v), for (int i = 0; i < NV; i++) v[i] = 30.0f * tanhf(v[i] / 30.0f));
    sink = v[NV / 2];
    TIME("tn_softcap", NV, memcpy(v, v0, sizeof v), tn_softcap(v, NV, 30.0f));
    sink = v[NV / 2];
    return 0;
}
