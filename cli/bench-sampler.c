/* tern-cli bench --sampler: what sampling costs per token, alone (synthetic
 * logits, vocabulary sizes of real models) and inside decoding (a model's
 * decode loop, greedy against temperature, alternated). */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli bench --sampler [--vocab 151936,262144] [-r REPS]\n"
              "       tern-cli bench --sampler -m MODEL [-n 128] [-t N] [-r REPS]\n\n"
              "Without -m: microseconds per tn_sampler_sample call on normal logits (sd 2.5)\n"
              "for greedy, temperature 0.7 alone (the whole vocabulary), with top-p 0.95,\n"
              "with min-p 0.05, and with tern-cli run's defaults (top-k 40, top-p 0.95,\n"
              "min-p 0.05). With -m: decode tokens/s of N tokens, greedy and temperature 0.7\n"
              "alone, alternated REPS times (default 3), and their ratio.\n"));
}

typedef struct config {
    const char *name;
    float temp, top_p, min_p;
    int32_t top_k;
} config;

static const config configs[] = {
    {"greedy", 0.0f, 1.0f, 0.0f, 0},
    {"temp 0.7", 0.7f, 1.0f, 0.0f, 0},
    {"temp 0.7 top-p 0.95", 0.7f, 0.95f, 0.0f, 0},
    {"temp 0.7 min-p 0.05", 0.7f, 1.0f, 0.05f, 0},
    {"temp 0.7 top-k 40 top-p 0.95 min-p 0.05", 0.7f, 0.95f, 0.05f, 40},
};

static tn_sampler_params params_of(const config *c, uint64_t seed) {
    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = c->temp;
    p.top_p = c->top_p;
    p.min_p = c->min_p;
    p.top_k = c->top_k;
    p.seed = seed;
    return p;
}

static int bench_alone(const char *vocab_list, int reps) {
    char *list = strdup(vocab_list);
    int rc = CLI_EXIT_OK;
    for (char *save = NULL, *v = strtok_r(list, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        long V;
        if (!cli_parse_long("--vocab", v, 2, 1 << 24, &V)) {
            rc = CLI_EXIT_USAGE;
            break;
        }
        float *logits = malloc((size_t)V * sizeof *logits);
        if (!logits) {
            cli_error(_("out of memory"));
            rc = CLI_EXIT_BAD_INPUT;
            break;
        }
        uint64_t x = 88172645463325252ULL;
        for (long i = 0; i < V; i += 2) { /* Box-Muller on xorshift64 */
            double u[2];
            for (int k = 0; k < 2; k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                u[k] = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
            }
            const double r = 2.5 * sqrt(-2.0 * log(u[0]));
            logits[i] = (float)(r * cos(6.283185307179586 * u[1]));
            if (i + 1 < V)
                logits[i + 1] = (float)(r * sin(6.283185307179586 * u[1]));
        }
        printf("vocabulary %ld:\n", V);
        for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
            tn_sampler *s = NULL;
            tn_error err = {0};
            if (tn_sampler_new((int32_t)V, params_of(&configs[c], 1), &s, &err) != TN_OK) {
                cli_error("%s", cli_engine_message(&err));
                rc = CLI_EXIT_BAD_INPUT;
                break;
            }
            double best = INFINITY;
            volatile int32_t sink = 0;
            for (int r = 0; r < reps; r++) {
                int calls = 0;
                const double t0 = now_s();
                double t1 = t0;
                while (calls < 20 || t1 - t0 < 0.3) {
                    sink += tn_sampler_sample(s, logits);
                    calls++;
                    t1 = now_s();
                }
                const double us = (t1 - t0) * 1e6 / calls;
                best = us < best ? us : best;
            }
            (void)sink;
            printf("  %-42s %9.1f us/token (best of %d)\n", configs[c].name, best, reps);
            tn_sampler_free(s);
        }
        free(logits);
        if (rc != CLI_EXIT_OK)
            break;
    }
    free(list);
    return rc;
}

/* One decode run of n tokens from a one-token prompt; tokens/s. */
static double decode_run(tn_ctx *ctx, tn_sampler *s, float *logits, int32_t n, int32_t first,
                         tn_error *err) {
    if (tn_ctx_kv_truncate(ctx, 0) != TN_OK)
        return -1;
    tn_sampler_reset(s);
    int32_t tok = first;
    if (tn_ctx_decode(ctx, &tok, 1, TN_LOGITS_LAST, logits, err) != TN_OK)
        return -1;
    const double t0 = now_s();
    for (int32_t i = 0; i < n; i++) {
        tok = tn_sampler_sample(s, logits);
        if (tn_ctx_decode(ctx, &tok, 1, TN_LOGITS_LAST, logits, err) != TN_OK)
            return -1;
    }
    return n / (now_s() - t0);
}

static int bench_decode(const char *path, long n, long threads, int reps) {
    tn_error err = {0};
    tn_model *m = NULL;
    if (tn_model_load(path, tn_model_default_params(), &m, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    const int32_t V = tn_model_n_vocab(m);
    tn_ctx *ctx = NULL;
    float *logits = malloc((size_t)V * sizeof *logits);
    tn_sampler *greedy = NULL, *temp = NULL;
    int rc = CLI_EXIT_BAD_INPUT;
    if (!logits || tn_ctx_new(m, (int32_t)n + 8, (int32_t)threads, &ctx, &err) != TN_OK ||
        tn_sampler_new(V, params_of(&configs[0], 1), &greedy, &err) != TN_OK ||
        tn_sampler_new(V, params_of(&configs[1], 1), &temp, &err) != TN_OK) {
        cli_error("%s", err.message[0] ? cli_engine_message(&err) : _("out of memory"));
        goto done;
    }
    printf("decode of %ld tokens, vocabulary %d, %d thread(s):\n", n, V, tn_ctx_n_threads(ctx));
    double g_best = 0, t_best = 0;
    for (int r = 0; r < reps; r++) {
        const double g = decode_run(ctx, greedy, logits, (int32_t)n, 1, &err);
        const double t = decode_run(ctx, temp, logits, (int32_t)n, 1, &err);
        if (g < 0 || t < 0) {
            cli_error("%s", cli_engine_message(&err));
            goto done;
        }
        printf("  run %d: greedy %.1f tok/s, temp 0.7 %.1f tok/s (ratio %.3f)\n", r + 1, g, t,
               g / t);
        g_best = g > g_best ? g : g_best;
        t_best = t > t_best ? t : t_best;
    }
    printf("  best: greedy %.1f tok/s, temp 0.7 %.1f tok/s, greedy/temp %.3f\n", g_best, t_best,
           g_best / t_best);
    rc = CLI_EXIT_OK;
done:
    tn_sampler_free(greedy);
    tn_sampler_free(temp);
    tn_ctx_free(ctx);
    free(logits);
    tn_model_free(m);
    return rc;
}

int cmd_bench_sampler(int argc, char **argv) {
    const char *path = NULL, *vocab = "151936,262144";
    long n = 128, threads = 0, reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--sampler"))
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        }
        if (i + 1 >= argc) {
            cli_error(_("bench --sampler: option '%s' needs a value (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            path = v;
        else if (!strcmp(a, "--vocab"))
            vocab = v;
        else if (!strcmp(a, "-n"))
            ok = cli_parse_long(a, v, 1, 1 << 16, &n);
        else if (!strcmp(a, "-t"))
            ok = cli_parse_long(a, v, 1, 512, &threads);
        else if (!strcmp(a, "-r"))
            ok = cli_parse_long(a, v, 1, 1000, &reps);
        else {
            cli_error(_("bench --sampler: unknown option '%s' (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        if (!ok)
            return CLI_EXIT_USAGE;
    }
    return path ? bench_decode(path, n, threads, (int)reps) : bench_alone(vocab, (int)reps);
}
