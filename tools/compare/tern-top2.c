/* Tern's side of tools/compare/gemma4-compare.sh: the same output as
 * llama-top2.c (teacher-forced top-1/top-2 per position, then greedy
 * steps), through libtern's public API. Not part of the build.
 *
 * usage: tern-top2 MODEL TOKENS THREADS [GREEDY_N] */
#include "tern.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void top2(const float *l, int n, int *a, int *b) {
    *a = 0;
    *b = 1;
    if (l[1] > l[0]) {
        *a = 1;
        *b = 0;
    }
    for (int i = 2; i < n; i++) {
        if (l[i] > l[*a]) {
            *b = *a;
            *a = i;
        } else if (l[i] > l[*b]) {
            *b = i;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: tern-top2 MODEL TOKENS THREADS [GREEDY_N]\n");
        return 2;
    }
    int threads = atoi(argv[3]), greedy = argc > 4 ? atoi(argv[4]) : 0;
    FILE *f = fopen(argv[2], "r");
    if (!f)
        return 2;
    int cap = 1 << 16, n = 0;
    int32_t *toks = malloc(sizeof *toks * (size_t)cap);
    while (n < cap && fscanf(f, "%d", &toks[n]) == 1)
        n++;
    fclose(f);
    tn_error err = {0};
    tn_model *m = NULL;
    tn_ctx *ctx = NULL;
    if (tn_model_load(argv[1], tn_model_default_params(), &m, &err) ||
        tn_ctx_new(m, n + greedy + 16, threads, &ctx, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    /* Which kernels ran: with TERN_REPACK_CACHE set, a mixture's experts
     * run X16 ("/exp16"), otherwise the file's rows. */
    fprintf(stderr, "tern: %s\n", tn_model_arithmetic(m));
    const int V = tn_model_n_vocab(m);
    float *lg = malloc(sizeof(float) * (size_t)V * 64);
    double t0 = now_s(), t_pp = 0;
    for (int p0 = 0; p0 < n; p0 += 64) {
        int k = n - p0 < 64 ? n - p0 : 64;
        double tb = now_s();
        int drc = tn_ctx_decode(ctx, toks + p0, k, TN_LOGITS_ALL, lg, &err);
        t_pp += now_s() - tb;
        if (drc) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        for (int i = 0; i < k; i++) {
            int a, b;
            top2(lg + (size_t)i * V, V, &a, &b);
            printf("%d %d %.6f %d %.6f\n", p0 + i, a, lg[(size_t)i * V + a], b,
                   lg[(size_t)i * V + b]);
        }
    }
    (void)t0;
    double tg0 = now_s();
    if (greedy > 0) {
        const float *l = lg + (size_t)((n - 1) % 64) * V;
        printf("greedy");
        for (int g = 0; g < greedy; g++) {
            int a, b;
            top2(l, V, &a, &b);
            printf(" %d", a);
            int32_t t = a;
            if (tn_ctx_decode(ctx, &t, 1, TN_LOGITS_LAST, lg, &err))
                return 1;
            l = lg;
        }
        printf("\n");
    }
    fprintf(stderr, "timing: %d positions in %.2f s (%.2f tok/s, all logits); %d greedy steps in %.2f s (%.2f tok/s)\n",
            n, t_pp, n / t_pp, greedy, now_s() - tg0, greedy > 0 ? greedy / (now_s() - tg0) : 0.0);
    free(lg);
    free(toks);
    tn_ctx_free(ctx);
    tn_model_free(m);
    return 0;
}
