/* The sampler: greedy, temperature, top-k, top-p, min-p, penalties and seeds.
 * Distributions are checked exactly through tn_sampler_probs and
 * empirically through draws (fixed seeds: deterministic, never flaky). */
#include "tn-test.h"

#include "tn-internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tn_sampler *make(int n_vocab, tn_sampler_params p) {
    tn_sampler *s = NULL;
    tn_error err = {0};
    int rc = tn_sampler_new(n_vocab, p, &s, &err);
    CHECKF(rc == 0, "tn_sampler_new: %s", err.message);
    return s;
}

static bool near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void test_greedy(void) {
    const float logits[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 0.0f};
    tn_sampler *s = make(6, tn_sampler_default_params());
    CHECK(tn_sampler_sample(s, logits) == 1); /* a tie goes to the lower id */
    float probs[6];
    tn_sampler_probs(s, logits, probs);
    CHECK(probs[1] == 1.0f && probs[3] == 0.0f);
    tn_sampler_free(s);

    /* top-k 1 is greedy whatever the temperature. */
    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = 5.0f;
    p.top_k = 1;
    s = make(6, p);
    bool all = true;
    for (int i = 0; i < 200; i++)
        all &= tn_sampler_sample(s, logits) == 1;
    CHECK(all);
    tn_sampler_free(s);
}

/* Greedy against a one-pass reference, at every length around the eight
 * lanes of argmax's first pass and with the maximum anywhere: the first
 * token of the greatest logit, ties to the lower id, NaN never (unless
 * token 0 is NaN: then 0), all -inf to 0. */
static int32_t ref_argmax(const float *w, int32_t n) {
    int32_t best = 0;
    for (int32_t t = 1; t < n; t++)
        if (w[t] > w[best])
            best = t;
    return best;
}

static void test_greedy_argmax(void) {
    uint64_t rng = 11;
    float w[40];
    int wrong = 0, tried = 0;
    for (int32_t n = 1; n <= 40; n++) {
        tn_sampler *s = make(n, tn_sampler_default_params());
        for (int k = 0; k < 60; k++) {
            for (int32_t t = 0; t < n; t++)
                w[t] = (float)(tn_test_rand(&rng) % 7) - 3.0f; /* many ties */
            const int kind = k % 6;
            const int32_t at = (int32_t)(tn_test_rand(&rng) % (uint64_t)n);
            if (kind == 1)
                w[at] = 10.0f; /* one clear maximum, anywhere (the tail included) */
            else if (kind == 2)
                w[at] = NAN;
            else if (kind == 3)
                w[0] = NAN;
            else if (kind == 4)
                for (int32_t t = 0; t < n; t++)
                    w[t] = -INFINITY;
            else if (kind == 5)
                w[at] = -0.0f, w[n - 1] = 0.0f;
            wrong += tn_sampler_sample(s, w) != ref_argmax(w, n);
            tried++;
        }
        tn_sampler_free(s);
    }
    CHECKF(wrong == 0, "greedy differs from the one-pass argmax in %d of %d cases", wrong, tried);
}

static void test_filters(void) {
    /* p = 0.5, 0.3, 0.15, 0.05 at temperature 1. */
    float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    float probs[4];
    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = 1.0f;

    tn_sampler *s = make(4, p);
    tn_sampler_probs(s, logits, probs);
    CHECK(near(probs[0], 0.5, 1e-6) && near(probs[1], 0.3, 1e-6) && near(probs[2], 0.15, 1e-6) &&
          near(probs[3], 0.05, 1e-6));
    tn_sampler_free(s);

    p.top_p = 0.7f; /* 0.5 < 0.7 <= 0.8: the first two */
    s = make(4, p);
    tn_sampler_probs(s, logits, probs);
    CHECKF(near(probs[0], 0.625, 1e-6) && near(probs[1], 0.375, 1e-6) && probs[2] == 0 &&
               probs[3] == 0,
           "top-p: %g %g %g %g", probs[0], probs[1], probs[2], probs[3]);
    tn_sampler_free(s);

    p.top_p = 1.0f;
    p.min_p = 0.25f; /* keeps p >= 0.125 */
    s = make(4, p);
    tn_sampler_probs(s, logits, probs);
    CHECKF(near(probs[0], 0.5 / 0.95, 1e-6) && near(probs[2], 0.15 / 0.95, 1e-6) && probs[3] == 0,
           "min-p: %g %g %g %g", probs[0], probs[1], probs[2], probs[3]);
    tn_sampler_free(s);

    p.min_p = 0.0f;
    p.top_k = 3;
    p.temperature = 0.5f; /* p^2, renormalised over the top 3 */
    s = make(4, p);
    tn_sampler_probs(s, logits, probs);
    double z = 0.25 + 0.09 + 0.0225;
    CHECKF(near(probs[0], 0.25 / z, 1e-6) && near(probs[1], 0.09 / z, 1e-6) &&
               near(probs[2], 0.0225 / z, 1e-6) && probs[3] == 0,
           "top-k + temperature: %g %g %g %g", probs[0], probs[1], probs[2], probs[3]);
    tn_sampler_free(s);
}

/* Draws follow tn_sampler_probs: a chi-square test at a false-alarm rate of
 * 1e-6 (threshold 30.7 for 3 degrees of freedom), fixed seed. */
static void test_draws(void) {
    float logits[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = 1.0f;
    p.seed = 12345;
    tn_sampler *s = make(4, p);
    int counts[4] = {0};
    const int n = 40000;
    bool in_range = true;
    for (int i = 0; i < n; i++) {
        int32_t t = tn_sampler_sample(s, logits);
        in_range &= t >= 0 && t < 4;
        if (t >= 0 && t < 4)
            counts[t]++;
    }
    CHECK(in_range);
    const double expect[4] = {0.4, 0.3, 0.2, 0.1};
    double chi2 = 0;
    for (int i = 0; i < 4; i++)
        chi2 += (counts[i] - n * expect[i]) * (counts[i] - n * expect[i]) / (n * expect[i]);
    CHECKF(chi2 < 30.7, "chi-square %.1f (%d %d %d %d)", chi2, counts[0], counts[1], counts[2],
           counts[3]);

    /* Same seed, same tokens; reset restarts the sequence; another seed
     * gives another sequence. */
    int32_t a[64], b[64], c[64];
    tn_sampler_reset(s);
    for (int i = 0; i < 64; i++)
        a[i] = tn_sampler_sample(s, logits);
    tn_sampler_reset(s);
    for (int i = 0; i < 64; i++)
        b[i] = tn_sampler_sample(s, logits);
    CHECK(!memcmp(a, b, sizeof a));
    tn_sampler *s2 = make(4, p);
    for (int i = 0; i < 64; i++)
        b[i] = tn_sampler_sample(s2, logits);
    CHECK(!memcmp(a, b, sizeof a));
    p.seed = 54321;
    tn_sampler *s3 = make(4, p);
    for (int i = 0; i < 64; i++)
        c[i] = tn_sampler_sample(s3, logits);
    CHECK(memcmp(a, c, sizeof a) != 0);
    double u = tn_sampler_uniform(s3);
    CHECK(u >= 0 && u < 1);
    tn_sampler_free(s);
    tn_sampler_free(s2);
    tn_sampler_free(s3);
}

static void test_penalties(void) {
    const float logits[5] = {2.0f, -1.0f, 1.0f, 0.5f, 0.0f};
    float probs[5];
    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = 1.0f;
    p.repeat_penalty = 2.0f;
    p.penalty_last_n = 3;
    tn_sampler *s = make(5, p);
    tn_sampler_accept(s, 3); /* falls out of the window of 3 below */
    tn_sampler_accept(s, 0);
    tn_sampler_accept(s, 1);
    tn_sampler_accept(s, 0);
    /* Penalised logits: 0 -> 1.0 (positive: divided), 1 -> -2.0 (negative:
     * multiplied), 3 untouched (outside the window). */
    const double want[5] = {1.0, -2.0, 1.0, 0.5, 0.0};
    double z = 0;
    for (int i = 0; i < 5; i++)
        z += exp(want[i]);
    tn_sampler_probs(s, logits, probs);
    bool ok = true;
    for (int i = 0; i < 5; i++)
        ok &= near(probs[i], exp(want[i]) / z, 1e-6);
    CHECKF(ok, "repeat penalty: %g %g %g %g %g", probs[0], probs[1], probs[2], probs[3], probs[4]);
    tn_sampler_free(s);

    /* Frequency (per occurrence) and presence (once) penalties. */
    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    p.penalty_last_n = 8;
    s = make(5, p);
    tn_sampler_accept(s, 0);
    tn_sampler_accept(s, 0);
    tn_sampler_accept(s, 2);
    const double want2[5] = {2.0 - 1.0 - 0.25, -1.0, 1.0 - 0.5 - 0.25, 0.5, 0.0};
    z = 0;
    for (int i = 0; i < 5; i++)
        z += exp(want2[i]);
    tn_sampler_probs(s, logits, probs);
    ok = true;
    for (int i = 0; i < 5; i++)
        ok &= near(probs[i], exp(want2[i]) / z, 1e-6);
    CHECKF(ok, "frequency/presence: %g %g %g %g %g", probs[0], probs[1], probs[2], probs[3],
           probs[4]);
    tn_sampler_free(s);

    /* Greedy sees the penalties too. */
    p.temperature = 0.0f;
    p.frequency_penalty = 2.0f;
    p.presence_penalty = 0.0f;
    s = make(5, p);
    CHECK(tn_sampler_sample(s, logits) == 0);
    tn_sampler_accept(s, 0);
    CHECK(tn_sampler_sample(s, logits) == 2); /* 2.0 - 2.0 = 0 < 1.0 */
    tn_sampler_reset(s);                       /* forgets the history */
    CHECK(tn_sampler_sample(s, logits) == 0);
    tn_sampler_free(s);
}

static void test_large_vocab(void) {
    const int V = 151936;
    float *logits = malloc(sizeof(float) * V);
    uint64_t rng = 9;
    for (int i = 0; i < V; i++)
        logits[i] = 4.0f * tn_test_randf(&rng);
    logits[777] = 30.0f;
    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.seed = 3;
    tn_sampler *s = make(V, p);
    CHECK(tn_sampler_sample(s, logits) == 777); /* min-p leaves only the clear winner */
    logits[777] = 0.0f;
    int32_t first = tn_sampler_sample(s, logits);
    CHECK(first >= 0 && first < V && logits[first] > 2.0f);
    tn_sampler_free(s);
    free(logits);
}

/* The sort-free path's e^x against libm's exp(), and its zeros. */
static void test_exp(void) {
    double worst = 0;
    float worst_x = 0;
    for (int i = 0; i <= 870000; i++) {
        const float x = -(float)i * 1e-4f;
        const double ref = exp((double)x);
        const double rel = fabs((double)tn_sampler_exp_neg(x) - ref) / ref;
        if (rel > worst) {
            worst = rel;
            worst_x = x;
        }
    }
    CHECKF(worst < 3e-7, "exp_neg: relative error %.3g at %g", worst, worst_x);
    /* The four-wide loop against exp() too, tail included (n not a
     * multiple of 4), with -inf and NaN among the inputs. */
    enum { N = 1003 };
    float in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = 3.0f - (float)i * 0.093f; /* max 3: x from 0 down to -93 */
    in[500] = -INFINITY;
    in[501] = NAN;
    tn_sampler_exp_neg_all(in, out, N, 3.0f, 1.0f);
    bool ok = out[500] == 0.0f && out[501] == 0.0f;
    for (int i = 0; i < N; i++) {
        if (i == 500 || i == 501)
            continue;
        const double x = (double)(in[i] - 3.0f);
        const double ref = x < -87 ? 0 : exp(x);
        ok &= x < -87 ? out[i] == 0.0f : fabs(out[i] - ref) <= 3e-7 * ref;
    }
    CHECK(ok);
    tn_sampler_exp_neg_all(in, out, N, 3.0f, 0.5f); /* the temperature's scale */
    CHECK(fabs(out[10] - exp(0.5 * (double)(in[10] - 3.0f))) <= 3e-7 * out[10]);
    CHECK(tn_sampler_exp_neg(0.0f) == 1.0f);
    CHECK(tn_sampler_exp_neg(-INFINITY) == 0.0f && tn_sampler_exp_neg(NAN) == 0.0f &&
          tn_sampler_exp_neg(-88.0f) == 0.0f);
}

/* Plain temperature over a vocabulary of several sum blocks: probabilities
 * against a softmax in double, draws against them by chi-square (199
 * degrees of freedom, threshold 308.8 for a false-alarm rate of 1e-6). */
static void test_whole_vocab(void) {
    enum { V = 200 };
    float logits[V];
    double want[V], z = 0;
    uint64_t rng = 77;
    const double T = 0.7;
    for (int i = 0; i < V; i++)
        logits[i] = 2.0f * tn_test_randf(&rng) + 5.0f;
    logits[13] = -INFINITY; /* never drawn */
    for (int i = 0; i < V; i++)
        z += i == 13 ? 0 : exp(logits[i] / T);
    for (int i = 0; i < V; i++)
        want[i] = i == 13 ? 0 : exp(logits[i] / T) / z;
    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = (float)T;
    p.seed = 4242;
    tn_sampler *s = make(V, p);
    float probs[V];
    tn_sampler_probs(s, logits, probs);
    bool ok = true;
    for (int i = 0; i < V; i++)
        ok &= near(probs[i], want[i], 1e-6 * want[i] + 1e-9);
    CHECK(ok && probs[13] == 0.0f);
    static int counts[V];
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        const int32_t t = tn_sampler_sample(s, logits);
        if (t >= 0 && t < V)
            counts[t]++;
    }
    double chi2 = 0;
    for (int i = 0; i < V; i++)
        if (i != 13)
            chi2 += (counts[i] - n * want[i]) * (counts[i] - n * want[i]) / (n * want[i]);
    CHECKF(chi2 < 308.8 && counts[13] == 0, "whole vocabulary: chi-square %.1f, -inf drawn %d",
           chi2, counts[13]);
    tn_sampler_free(s);

    /* Nothing but -inf: the draw still returns a valid id. */
    for (int i = 0; i < V; i++)
        logits[i] = -INFINITY;
    s = make(V, p);
    const int32_t t = tn_sampler_sample(s, logits);
    CHECK(t >= 0 && t < V);
    tn_sampler_free(s);
}

static const float *g_ref_logits;
static int by_ref_logit(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (g_ref_logits[x] != g_ref_logits[y])
        return g_ref_logits[x] > g_ref_logits[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* Top-p on a 151936-token vocabulary sorts only the candidates near the
 * best logit: the kept set and its probabilities against a full sort in
 * double, for a peaked distribution (the first reach holds the mass) and a
 * flat one over a wide range (the reach has to grow). */
static void test_top_p_large(void) {
    const int V = 151936;
    float *logits = malloc(sizeof(float) * V);
    float *probs = malloc(sizeof(float) * V);
    int32_t *order = malloc(sizeof(int32_t) * V);
    for (int shape = 0; shape < 2; shape++) {
        uint64_t rng = 31 + (uint64_t)shape;
        for (int i = 0; i < V; i++)
            logits[i] = shape == 0 ? 3.0f * tn_test_randf(&rng) : 30.0f * tn_test_randf(&rng);
        if (shape == 0)
            for (int i = 0; i < 20; i++)
                logits[(i * 7919) % V] = 18.0f - (float)i * 0.5f;
        float max = -INFINITY;
        for (int i = 0; i < V; i++)
            max = logits[i] > max ? logits[i] : max;
        for (int i = 0; i < V; i++)
            order[i] = i;
        g_ref_logits = logits;
        qsort(order, (size_t)V, sizeof *order, by_ref_logit);
        double z = 0;
        for (int i = 0; i < V; i++)
            z += exp((double)logits[i] - max);
        const double top_p = 0.9, T = 0.8;
        int keep = V;
        double cum = 0;
        for (int i = 0; i < V; i++) {
            cum += exp((double)logits[order[i]] - max) / z;
            if (cum >= top_p) {
                keep = i + 1;
                break;
            }
        }
        double zt = 0;
        for (int i = 0; i < keep; i++)
            zt += exp(((double)logits[order[i]] - max) / T);
        tn_sampler_params p = tn_sampler_default_params();
        p.temperature = (float)T;
        p.top_p = (float)top_p;
        tn_sampler *s = make(V, p);
        tn_sampler_probs(s, logits, probs);
        bool ok = true;
        for (int i = 0; i < V; i++) {
            const double w = i < keep ? exp(((double)logits[order[i]] - max) / T) / zt : 0;
            ok &= near(probs[order[i]], w, 1e-6 * w + 1e-12) && (i < keep) == (probs[order[i]] > 0);
        }
        CHECKF(ok, "top-p on a large vocabulary (shape %d, %d kept)", shape, keep);
        const int32_t t = tn_sampler_sample(s, logits);
        CHECK(t >= 0 && t < V && probs[t] > 0);
        tn_sampler_free(s);
    }
    free(logits);
    free(probs);
    free(order);
}

static void test_bad_params(void) {
    tn_sampler *s = NULL;
    tn_error err = {0};
    tn_sampler_params p = tn_sampler_default_params();
    CHECK(tn_sampler_new(0, p, &s, &err) == TN_ERR_INVALID && !s);
    p.temperature = NAN;
    CHECK(tn_sampler_new(10, p, &s, &err) == TN_ERR_INVALID && !s && err.message[0]);
    p = tn_sampler_default_params();
    p.repeat_penalty = 0.0f;
    CHECK(tn_sampler_new(10, p, &s, &err) == TN_ERR_INVALID);
    p = tn_sampler_default_params();
    p.penalty_last_n = -1;
    CHECK(tn_sampler_new(10, p, &s, &err) == TN_ERR_INVALID);
    tn_sampler_free(NULL);
}

static void test_logit_bias(void) {
    const float logits[5] = {0.5f, 3.0f, -1.0f, 2.9f, 0.0f};
    tn_error err = {0};
    tn_sampler *s = make(5, tn_sampler_default_params());
    CHECK(tn_sampler_sample(s, logits) == 1);
    /* -100 bans the best token, +100 forces a poor one. */
    tn_logit_bias ban = {.token = 1, .bias = -100.0f};
    CHECK(tn_sampler_set_logit_bias(s, &ban, 1, &err) == TN_OK);
    CHECK(tn_sampler_sample(s, logits) == 3);
    tn_logit_bias force[2] = {{.token = 1, .bias = -100.0f}, {.token = 2, .bias = 100.0f}};
    CHECK(tn_sampler_set_logit_bias(s, force, 2, &err) == TN_OK);
    CHECK(tn_sampler_sample(s, logits) == 2);
    tn_sampler_reset(s); /* a reset keeps them */
    CHECK(tn_sampler_sample(s, logits) == 2);
    /* Refused, and the biases before stay. */
    tn_logit_bias bad = {.token = 5, .bias = 1.0f};
    CHECK(tn_sampler_set_logit_bias(s, &bad, 1, &err) == TN_ERR_INVALID);
    bad.token = -1;
    CHECK(tn_sampler_set_logit_bias(s, &bad, 1, &err) == TN_ERR_INVALID);
    bad.token = 0;
    bad.bias = NAN;
    CHECK(tn_sampler_set_logit_bias(s, &bad, 1, &err) == TN_ERR_INVALID);
    bad.bias = INFINITY;
    CHECK(tn_sampler_set_logit_bias(s, &bad, 1, &err) == TN_ERR_INVALID);
    CHECK(tn_sampler_set_logit_bias(s, force, TN_LOGIT_BIAS_MAX + 1, &err) == TN_ERR_INVALID);
    CHECK(tn_sampler_sample(s, logits) == 2);
    /* The distribution the draws and speculation use sees them too. */
    float probs[5];
    tn_sampler_probs(s, logits, probs);
    CHECK(probs[2] == 1.0f);
    CHECK(tn_sampler_set_logit_bias(s, NULL, 0, &err) == TN_OK);
    CHECK(tn_sampler_sample(s, logits) == 1);
    tn_sampler_free(s);

    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = 1.0f;
    s = make(5, p);
    const tn_logit_bias half = {.token = 0, .bias = logf(2.0f)};
    CHECK(tn_sampler_set_logit_bias(s, &half, 1, &err) == TN_OK);
    tn_sampler_probs(s, logits, probs);
    double z = 0;
    for (int t = 0; t < 5; t++)
        z += exp(logits[t] + (t == 0 ? log(2.0) : 0.0));
    CHECKF(near(probs[0], 2 * exp(0.5) / z, 1e-5), "%g", probs[0]);
    tn_sampler_free(s);
}

static bool even_only(int32_t token, void *user) {
    (void)user;
    return token % 2 == 0;
}

static bool below(int32_t token, void *user) { return token < *(const int32_t *)user; }

static bool none_allowed(int32_t token, void *user) {
    (void)token;
    (void)user;
    return false;
}

/* Draws under a filter follow the masked distribution, whichever path the
 * parameters take. */
static void check_masked_draws(tn_sampler_params p, const char *what) {
    enum { V = 6, N = 40000 };
    const float logits[V] = {0.1f, 1.0f, 0.7f, 1.5f, -0.3f, 0.4f};
    tn_sampler *s = make(V, p);
    tn_sampler_set_allow(s, even_only, NULL);
    /* The expected distribution: the filters' one, renormalized over the
     * allowed tokens. */
    float expect[V];
    tn_sampler *plain = make(V, p);
    tn_sampler_probs(plain, logits, expect);
    tn_sampler_free(plain);
    double z = 0;
    for (int t = 0; t < V; t++)
        z += t % 2 == 0 ? expect[t] : 0;
    for (int t = 0; t < V; t++)
        expect[t] = t % 2 == 0 ? (float)(expect[t] / z) : 0.0f;
    int count[V] = {0};
    for (int i = 0; i < N; i++) {
        const int32_t t = tn_sampler_sample(s, logits);
        CHECKF(t >= 0 && t < V && t % 2 == 0, "%s: drew %d", what, t);
        if (t >= 0 && t < V)
            count[t]++;
    }
    for (int t = 0; t < V; t++)
        CHECKF(near((double)count[t] / N, expect[t], 0.01), "%s: token %d drawn %g, expected %g",
               what, t, (double)count[t] / N, expect[t]);
    /* tn_sampler_probs gives the same masked distribution. */
    float probs[V];
    tn_sampler_probs(s, logits, probs);
    for (int t = 0; t < V; t++)
        CHECKF(near(probs[t], expect[t], 1e-6), "%s: probs[%d] %g, expected %g", what, t,
               probs[t], expect[t]);
    tn_sampler_free(s);
}

static void test_allow(void) {
    const float logits[6] = {0.1f, 1.0f, 0.7f, 1.5f, -0.3f, 0.4f};
    tn_sampler *s = make(6, tn_sampler_default_params());
    CHECK(tn_sampler_sample(s, logits) == 3);
    tn_sampler_set_allow(s, even_only, NULL);
    CHECK(tn_sampler_sample(s, logits) == 2); /* the best allowed */
    tn_sampler_set_allow(s, none_allowed, NULL);
    CHECK(tn_sampler_sample(s, logits) == -1);
    tn_sampler_set_allow(s, NULL, NULL);
    CHECK(tn_sampler_sample(s, logits) == 3);
    tn_sampler_free(s);

    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = 1.0f;
    check_masked_draws(p, "temperature");
    p.top_k = 5;
    check_masked_draws(p, "top-k");
    p.top_k = 3; /* 3, 1, 2: only 2 is allowed */
    check_masked_draws(p, "top-k 3");
    p.top_k = 0;
    p.min_p = 0.05f;
    check_masked_draws(p, "min-p");

    /* More refused tokens than are tried one by one: the best allowed one
     * is still found (greedy), and draws stay among the allowed. */
    enum { V = 5000 };
    float *big = malloc(V * sizeof *big);
    for (int t = 0; t < V; t++)
        big[t] = (float)t * 0.01f; /* the best tokens are the last ids */
    int32_t limit = 10;
    s = make(V, tn_sampler_default_params());
    tn_sampler_set_allow(s, below, &limit);
    CHECK(tn_sampler_sample(s, big) == 9);
    tn_sampler_free(s);
    p = tn_sampler_default_params();
    p.temperature = 1.0f;
    s = make(V, p);
    tn_sampler_set_allow(s, below, &limit);
    bool all_below = true;
    for (int i = 0; i < 200; i++) {
        const int32_t t = tn_sampler_sample(s, big);
        all_below &= t >= 0 && t < limit;
    }
    CHECK(all_below);
    tn_sampler_free(s);
    p.top_p = 0.5f; /* no allowed token in the nucleus: masked first */
    s = make(V, p);
    tn_sampler_set_allow(s, below, &limit);
    all_below = true;
    for (int i = 0; i < 200; i++) {
        const int32_t t = tn_sampler_sample(s, big);
        all_below &= t >= 0 && t < limit;
    }
    CHECK(all_below);
    tn_sampler_free(s);
    free(big);
}

/* The whole-vocabulary check with an index by group (the JSON filters'
 * first bytes): the same tokens as without it, and allow is asked only
 * about the tokens of the groups that can be allowed. */
typedef struct group_filter {
    int32_t limit; /* tokens below it are allowed */
    long calls;
} group_filter;

static bool group_below(int32_t token, void *user) {
    group_filter *f = user;
    f->calls++;
    return token < f->limit;
}

static bool group_may(int group, void *user) {
    const group_filter *f = user;
    return group < f->limit; /* token t is in group t % 256 */
}

static void test_allow_groups(void) {
    enum { V = 5000, G = 256 };
    int32_t start[G + 1], tokens[V];
    int32_t n = 0;
    for (int g = 0; g < G; g++) {
        start[g] = n;
        for (int32_t t = g; t < V; t += G)
            tokens[n++] = t;
    }
    start[G] = n;
    float *logits = malloc(V * sizeof *logits);
    uint64_t rng = 3;
    for (int temp = 0; temp < 2; temp++) {
        tn_sampler_params p = tn_sampler_default_params();
        p.temperature = temp ? 1.0f : 0.0f;
        p.seed = 11;
        tn_sampler *plain = make(V, p), *grouped = make(V, p);
        group_filter fp = {10, 0}, fg = {10, 0};
        tn_sampler_set_allow(plain, group_below, &fp);
        tn_sampler_set_allow(grouped, group_below, &fg);
        tn_sampler_set_allow_groups(grouped, start, tokens, group_may);
        bool same = true;
        for (int i = 0; i < 50; i++) {
            for (int t = 0; t < V; t++)
                logits[t] = tn_test_randf(&rng) * 4.0f + (float)t * 0.001f;
            const int32_t a = tn_sampler_sample(plain, logits);
            const int32_t b = tn_sampler_sample(grouped, logits);
            same &= a == b && a >= 0 && a < 10;
        }
        CHECKF(same, "temperature %d: the same tokens with the index", temp);
        /* Without the index every token is asked about at each fallback;
         * with it, the tokens of groups 0..9 (10 allowed among them) and the
         * best few. */
        CHECKF(fp.calls >= 50L * (V - 64) && fg.calls <= 50L * (start[10] + 64 + 1),
               "temperature %d: allow asked %ld times without the index, %ld with it", temp,
               fp.calls, fg.calls);
        float pp[V], pg[V];
        tn_sampler_probs(plain, logits, pp);
        tn_sampler_probs(grouped, logits, pg);
        bool probs_same = true;
        for (int t = 0; t < V; t++)
            probs_same &= pp[t] == pg[t];
        CHECKF(probs_same, "temperature %d: the same probabilities with the index", temp);
        /* tn_sampler_set_allow clears the index. */
        tn_sampler_set_allow(grouped, group_below, &fg);
        fg.calls = 0;
        tn_sampler_sample(grouped, logits);
        CHECK(fg.calls >= V - 64);
        tn_sampler_free(plain);
        tn_sampler_free(grouped);
    }
    free(logits);
}

/* tn_logprobs against a scalar reference computed here the plain way:
 * max, sum of exp in long double, log; and the top k by a full scan for
 * the best not yet taken (ties: the lowest id). */
static long double ref_lse(const float *l, int32_t n) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (l[i] > mx)
            mx = l[i];
    long double sum = 0;
    for (int32_t i = 0; i < n; i++)
        if (l[i] > -INFINITY)
            sum += expl((long double)l[i] - mx);
    return (long double)mx + logl(sum);
}

static void ref_top(const float *l, int32_t n, int32_t k, int32_t *out) {
    for (int32_t r = 0; r < k; r++) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++) {
            bool taken = false;
            for (int32_t j = 0; j < r; j++)
                taken = taken || out[j] == i;
            if (taken)
                continue;
            if (best < 0 || l[i] > l[best] || (!(l[best] > -INFINITY) && l[i] > -INFINITY))
                best = i;
        }
        out[r] = best;
    }
}

static void check_logprobs(const float *l, int32_t n, int32_t token, int32_t k, const char *what) {
    tn_token_logprob top[TN_TOP_LOGPROBS_MAX];
    float lp = 1;
    tn_error err = {0};
    const int32_t got = tn_logprobs(l, n, token, k, &lp, top, &err);
    const int32_t want_n = k < n ? k : n;
    CHECKF(got == want_n, "%s: %d top entries, want %d (%s)", what, got, want_n, err.message);
    if (got != want_n)
        return;
    const long double lse = ref_lse(l, n);
    const long double want = l[token] > -INFINITY ? (long double)l[token] - lse : -INFINITY;
    CHECKF(isinf(want) ? isinf(lp) && lp < 0 : fabsl((long double)lp - want) < 2e-5L,
           "%s: logprob of %d is %.9g, reference %.9Lg", what, token, lp, want);
    int32_t ref[TN_TOP_LOGPROBS_MAX];
    ref_top(l, n, want_n, ref);
    for (int32_t i = 0; i < want_n; i++) {
        CHECKF(top[i].token == ref[i], "%s: top[%d] is token %d, reference %d", what, i,
               top[i].token, ref[i]);
        const long double w = l[ref[i]] > -INFINITY ? (long double)l[ref[i]] - lse : -INFINITY;
        CHECKF(isinf(w) ? isinf(top[i].logprob) : fabsl((long double)top[i].logprob - w) < 2e-5L,
               "%s: top[%d] logprob %.9g, reference %.9Lg", what, i, top[i].logprob, w);
        if (i > 0)
            CHECKF(top[i].logprob <= top[i - 1].logprob, "%s: top not sorted at %d", what, i);
    }
}

static void test_logprobs(void) {
    /* Gemma's vocabulary size, logits of a real model's spread. */
    const int32_t V = 262144;
    float *l = malloc((size_t)V * sizeof *l);
    uint64_t st = 42;
    for (int32_t i = 0; i < V; i++)
        l[i] = 8.0f * tn_test_randf(&st);
    /* the chosen token deep in the tail: not in the top 20 */
    check_logprobs(l, V, 1234, 20, "random, tail token");
    check_logprobs(l, V, 7, 0, "k = 0");
    check_logprobs(l, V, V - 1, 5, "last token");
    /* exact ties, in and at the edge of the top: the lowest id first */
    for (int32_t i = 0; i < 30; i++)
        l[1000 + i * 977] = 30.0f;
    check_logprobs(l, V, 1000 + 5 * 977, 20, "ties");
    /* a maximum rising steadily (the running sum rescaled every step) */
    for (int32_t i = 0; i < V; i++)
        l[i] = (float)i * 1e-4f;
    check_logprobs(l, V, V / 2, 20, "increasing");
    /* -inf logits (a softcap or mask upstream) and a NaN carry no mass */
    for (int32_t i = 0; i < V; i++)
        l[i] = i % 3 ? -INFINITY : (float)(i % 101) - 50.0f;
    l[5] = NAN;
    check_logprobs(l, V, 1, 20, "-inf token");
    check_logprobs(l, V, 3, 20, "finite among -inf");
    /* fewer finite logits than k: the rest of the top is -inf, lowest ids */
    const float few[6] = {-INFINITY, 2.0f, -INFINITY, 1.0f, -INFINITY, -INFINITY};
    check_logprobs(few, 6, 1, 5, "few finite");
    check_logprobs(few, 6, 0, 20, "k > n_vocab");
    /* a single finite logit: probability 1 */
    {
        float lp = 1;
        tn_token_logprob top[1];
        tn_error err = {0};
        const float one[3] = {-INFINITY, 3.5f, -INFINITY};
        CHECK(tn_logprobs(one, 3, 1, 1, &lp, top, &err) == 1 && lp == 0.0f &&
              top[0].token == 1 && top[0].logprob == 0.0f);
    }
    /* refusals name what is wrong */
    {
        tn_error err = {0};
        tn_token_logprob top[TN_TOP_LOGPROBS_MAX];
        CHECK(tn_logprobs(l, V, 0, TN_TOP_LOGPROBS_MAX + 1, NULL, top, &err) == TN_ERR_INVALID &&
              strstr(err.message, "21 top log-probabilities"));
        CHECK(tn_logprobs(l, V, 0, -1, NULL, top, &err) == TN_ERR_INVALID);
        CHECK(tn_logprobs(l, V, V, 1, NULL, top, &err) == TN_ERR_INVALID &&
              strstr(err.message, "outside the vocabulary"));
        CHECK(tn_session_token_logprobs(NULL, 1, NULL, top, &err) == TN_ERR_INVALID &&
              strstr(err.message, "token callback"));
    }
    free(l);
}

int main(void) {
    test_greedy();
    test_greedy_argmax();
    test_filters();
    test_draws();
    test_penalties();
    test_large_vocab();
    test_exp();
    test_whole_vocab();
    test_top_p_large();
    test_bad_params();
    test_logit_bias();
    test_allow();
    test_allow_groups();
    test_logprobs();
    return tn_test_finish("test-sampler");
}
