/* CPU time per token (one thread): a P-token prefill and N one-token
 * decodes, timed with CLOCK_PROCESS_CPUTIME_ID (robust to other tenants);
 * with a fifth argument V, also the CPU time of a V-token verify step (all
 * V rows' logits, at position P) over a one-token step (its logits), each
 * the median of 8 steps. */
#include "tern.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    tn_error err; tn_model *m; tn_ctx *c;
    tn_model_params p = tn_model_default_params(); p.load_tokenizer = false;
    if (tn_model_load(argv[1], p, &m, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    int P = argc > 2 ? atoi(argv[2]) : 64, N = argc > 3 ? atoi(argv[3]) : 32, R = argc > 4 ? atoi(argv[4]) : 2;
    int V = argc > 5 ? atoi(argv[5]) : 0;
    if (tn_ctx_new(m, 1024, 1, &c, &err)) return 1;
    float *lg = malloc(sizeof(float) * tn_model_n_vocab(m) * (V > 1 ? V : 1));
    int32_t *toks = malloc(sizeof(int32_t) * (P + V));
    /* Inside any vocabulary of more than 2000 tokens (a 32k one too). */
    const int span = tn_model_n_vocab(m) > 51000 ? 50000 : tn_model_n_vocab(m) - 1000;
    for (int i = 0; i < P + V; i++) toks[i] = 1000 + (i * 7919) % span;
    tn_ctx_decode(c, toks, 8, TN_LOGITS_LAST, lg, &err); tn_ctx_kv_truncate(c, 0); /* warm-up */
    for (int r = 0; r < R; r++) {
        tn_ctx_kv_truncate(c, 0);
        double t0 = cpu();
        tn_ctx_decode(c, toks, P, TN_LOGITS_LAST, lg, &err);
        double t1 = cpu();
        int32_t t = 1000;
        for (int i = 0; i < N; i++) tn_ctx_decode(c, &t, 1, TN_LOGITS_LAST, lg, &err);
        double t2 = cpu();
        printf("%s pp%d %.1f tok/cpu-s  tg%d %.2f tok/cpu-s (%s, %s)\n", argv[1], P, P / (t1 - t0), N, N / (t2 - t1), tn_model_arithmetic(m), tn_model_repack_source(m));
        if (V > 1) {
            double one[8], ver[8];
            for (int k = 0; k < 8; k++) {
                tn_ctx_kv_truncate(c, P);
                double a = cpu();
                tn_ctx_decode(c, toks + P, 1, TN_LOGITS_ALL, lg, &err);
                double b = cpu();
                tn_ctx_kv_truncate(c, P);
                tn_ctx_decode(c, toks + P, V, TN_LOGITS_ALL, lg, &err);
                double e = cpu();
                one[k] = b - a;
                ver[k] = e - b;
            }
            qsort(one, 8, sizeof one[0], cmp);
            qsort(ver, 8, sizeof ver[0], cmp);
            printf("  verify%d %.1f ms / one-token %.1f ms = %.2f (cpu-s medians)\n", V, ver[4] * 1e3, one[4] * 1e3, ver[4] / one[4]);
        }
        fflush(stdout);
    }
    return 0;
}
