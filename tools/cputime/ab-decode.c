/* Wall time of decode steps at a fixed position with two prefetch
 * distances for the 4-bit X16 kernels (Q4_0, IQ4_NL, MXFP4), alternated step by step in one
 * process (A B, then B A, ...), so that the memory's swings from minute to
 * minute (this shared host's read rate moves between 20 and 75 GB/s within
 * minutes) fall on both alike: the paired ratio B/A is the figure. Run with
 * TERN_DECODE_PREFETCH=near, or the decode tuner may choose another mode.
 * ab-decode MODEL [PAIRS 200] [THREADS 2] [CHUNKS_A 2] [CHUNKS_B 6] [TOKENS 1] */
#define TN_CPU_X86
#include "tern.h"
#include "cpu/tn-cpu-internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    tn_error err; tn_model *m; tn_ctx *c;
    tn_model_params p = tn_model_default_params(); p.load_tokenizer = false;
    if (argc < 2 || tn_model_load(argv[1], p, &m, &err)) { fprintf(stderr, "usage: ab-decode MODEL [PAIRS] [THREADS] [CHUNKS_A] [CHUNKS_B] [TOKENS]\n"); return 1; }
    const int pairs = argc > 2 ? atoi(argv[2]) : 200, th = argc > 3 ? atoi(argv[3]) : 2;
    const int ca = argc > 4 ? atoi(argv[4]) : 2, cb = argc > 5 ? atoi(argv[5]) : 6;
    const int B = argc > 6 ? atoi(argv[6]) : 1;
    if (pairs < 4 || B < 1 || B > 16 || tn_ctx_new(m, 1024, th, &c, &err)) { fprintf(stderr, "bad arguments or context\n"); return 1; }
    float *lg = malloc(sizeof(float) * tn_model_n_vocab(m) * 16);
    int32_t toks[16];
    for (int i = 0; i < 16; i++) toks[i] = 1000 + i * 37;
    tn_ctx_decode(c, toks, 16, TN_LOGITS_LAST, lg, &err);
    double *a = malloc(sizeof(double) * pairs), *b = malloc(sizeof(double) * pairs), *r = malloc(sizeof(double) * pairs);
    for (int i = -10; i < pairs; i++) {
        for (int s = 0; s < 2; s++) {
            const int use_b = (i + s) & 1;
            tn_cpu_set_4bit_near_chunks(use_b ? cb : ca);
            tn_ctx_kv_truncate(c, 16);
            const double t0 = now();
            tn_ctx_decode(c, toks, B, B > 1 ? TN_LOGITS_ALL : TN_LOGITS_LAST, lg, &err);
            const double dt = now() - t0;
            if (i >= 0) { if (use_b) b[i] = dt; else a[i] = dt; }
        }
        if (i >= 0) r[i] = b[i] / a[i];
    }
    qsort(a, pairs, sizeof *a, cmp); qsort(b, pairs, sizeof *b, cmp); qsort(r, pairs, sizeof *r, cmp);
    printf("%s: %d chunks median %.2f ms (p25 %.2f, p75 %.2f); %d chunks median %.2f ms (p25 %.2f, p75 %.2f); "
           "paired B/A median %.4f (p25 %.4f, p75 %.4f), %d pairs of %d-token steps\n",
           argv[1], ca, a[pairs / 2] * 1e3, a[pairs / 4] * 1e3, a[3 * pairs / 4] * 1e3, cb, b[pairs / 2] * 1e3,
           b[pairs / 4] * 1e3, b[3 * pairs / 4] * 1e3, r[pairs / 2], r[pairs / 4], r[3 * pairs / 4], pairs, B);
    free(a); free(b); free(r); free(lg);
    tn_ctx_free(c);
    tn_model_free(m);
    return 0;
}
