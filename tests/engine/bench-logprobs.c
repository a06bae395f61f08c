/* meson test --benchmark logprobs: what tn_logprobs costs per token at the
 * 262,144 tokens of Gemma's vocabulary (one pass: the running log-sum-exp
 * and the top k), for k = 0, 5 and 20, next to what a token already costs
 * the sampler: greedy (tn_sampler_sample's argmax, one pass) and
 * temperature 0.8 with top-k 40 / top-p 0.95. Normal random logits (sd 2,
 * a real model's spread); CPU time, best of the calls. docs/SERVER.md
 * ("Log-probabilities") lists the results.
 *
 *   bench-logprobs [CALLS]   (default 30) */
#include "tn-test.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 30;
    const int32_t V = 262144;
    float *logits = malloc((size_t)V * sizeof *logits);
    uint64_t st = 1;
    for (int32_t i = 0; i < V; i += 2) { /* Box-Muller: two normals at a time */
        const double u1 = (tn_test_randf(&st) + 1.0) / 2.0 + 1e-12, u2 = tn_test_randf(&st);
        const double r = sqrt(-2.0 * log(u1));
        logits[i] = (float)(2.0 * r * cos(M_PI * u2));
        logits[i + 1] = (float)(2.0 * r * sin(M_PI * u2));
    }
    volatile float sink = 0;
    const int ks[] = {0, 5, 20};
    for (size_t n = 0; n < sizeof ks / sizeof ks[0]; n++) {
        tn_token_logprob top[TN_TOP_LOGPROBS_MAX];
        float lp = 0;
        double best = INFINITY;
        for (int c = 0; c < calls; c++) {
            const double t0 = cpu_ms();
            const int32_t got = tn_logprobs(logits, V, c % V, ks[n], &lp, top, NULL);
            const double ms = cpu_ms() - t0;
            CHECK(got == ks[n]);
            sink += lp;
            if (ms < best)
                best = ms;
        }
        printf("tn_logprobs k=%-2d            %.3f ms\n", ks[n], best);
    }
    tn_sampler_params sps[2] = {tn_sampler_default_params(), tn_sampler_default_params()};
    sps[1].temperature = 0.8f;
    sps[1].top_k = 40;
    sps[1].top_p = 0.95f;
    const char *names[2] = {"greedy", "t 0.8 top-k 40 top-p 0.95"};
    for (int n = 0; n < 2; n++) {
        tn_sampler *sm = NULL;
        tn_error err = {0};
        CHECK(tn_sampler_new(V, sps[n], &sm, &err) == TN_OK);
        if (!sm)
            break;
        double best = INFINITY;
        for (int c = 0; c < calls; c++) {
            const double t0 = cpu_ms();
            sink += (float)tn_sampler_sample(sm, logits);
            const double ms = cpu_ms() - t0;
            if (ms < best)
                best = ms;
        }
        printf("sampler %-26s %.3f ms\n", names[n], best);
        tn_sampler_free(sm);
    }
    (void)sink;
    free(logits);
    return tn_test_finish("bench-logprobs");
}
