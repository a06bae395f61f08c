/* Token sampling: penalties, then top-k, top-p, min-p, temperature (the
 * order llama.cpp's default chain uses), then a draw from Tern's own PRNG
 * (xoshiro256**, seeded through splitmix64), so that a seed gives the same
 * tokens on every machine and libc. */
#include "tn-internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tn_sampler {
    int32_t n_vocab;
    tn_sampler_params p;
    uint64_t rng[4];
    int32_t *hist;     /* ring of the last penalty_last_n accepted tokens */
    int32_t hist_len;
    int32_t hist_pos;
    int32_t *counts;   /* [n_vocab] scratch, all zero between calls */
    float *work;       /* [n_vocab] logits after penalties */
    int32_t *cand;     /* [n_vocab] candidate ids, best first */
    float *prob;       /* [n_vocab] probabilities of cand */
    int32_t n_cand;
};

tn_sampler_params tn_sampler_default_params(void) {
    tn_sampler_params p = {
        .temperature = 0.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .penalty_last_n = 64,
        .seed = 0,
    };
    return p;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double tn_sampler_uniform(tn_sampler *s) {
    return (double)(xoshiro_next(s->rng) >> 11) * (1.0 / 9007199254740992.0);
}

void tn_sampler_reset(tn_sampler *s) {
    if (!s)
        return;
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    s->hist_len = 0;
    s->hist_pos = 0;
}

void tn_sampler_free(tn_sampler *s) {
    if (!s)
        return;
    free(s->hist);
    free(s->counts);
    free(s->work);
    free(s->cand);
    free(s->prob);
    free(s);
}

int tn_sampler_new(int32_t n_vocab, tn_sampler_params p, tn_sampler **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_sampler_new: out is NULL");
    *out = NULL;
    if (n_vocab < 1)
        return tn_fail(err, TN_ERR_INVALID, "sampler: vocabulary of %d tokens", n_vocab);
    if (!isfinite(p.temperature) || !isfinite(p.top_p) || !isfinite(p.min_p) ||
        !(p.repeat_penalty > 0) || !isfinite(p.repeat_penalty) ||
        !isfinite(p.presence_penalty) || !isfinite(p.frequency_penalty) ||
        p.penalty_last_n < 0 || p.min_p > 1)
        return tn_fail(err, TN_ERR_INVALID,
                       "sampler: a parameter is out of range (temperature %g, top-p %g, min-p %g, "
                       "repeat penalty %g, window %d)",
                       p.temperature, p.top_p, p.min_p, p.repeat_penalty, p.penalty_last_n);
    tn_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    s->n_vocab = n_vocab;
    s->p = p;
    s->hist = malloc(((size_t)p.penalty_last_n + 1) * sizeof *s->hist);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    if (!s->hist || !s->counts || !s->work || !s->cand || !s->prob) {
        tn_sampler_free(s);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    tn_sampler_reset(s);
    *out = s;
    return TN_OK;
}

tn_sampler_params tn_sampler_get_params(const tn_sampler *s) { return s->p; }

void tn_sampler_accept(tn_sampler *s, int32_t token) {
    if (!s || s->p.penalty_last_n == 0 || token < 0 || token >= s->n_vocab)
        return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->p.penalty_last_n;
    if (s->hist_len < s->p.penalty_last_n)
        s->hist_len++;
}

static void apply_penalties(tn_sampler *s) {
    const tn_sampler_params *p = &s->p;
    if (s->hist_len == 0 ||
        (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f))
        return;
    for (int32_t i = 0; i < s->hist_len; i++)
        s->counts[s->hist[i]]++;
    for (int32_t i = 0; i < s->hist_len; i++) {
        const int32_t t = s->hist[i];
        const int32_t c = s->counts[t];
        if (c == 0)
            continue; /* already applied for an earlier occurrence */
        float l = s->work[t];
        if (p->repeat_penalty != 1.0f)
            l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)c * p->frequency_penalty + p->presence_penalty;
        s->work[t] = l;
        s->counts[t] = 0;
    }
}

/* Best first; equal logits by id, so the order is total and the result
 * never depends on the sort algorithm. */
static int by_logit(const void *a, const void *b, void *ctx) {
    const float *w = ctx;
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (w[x] != w[y])
        return w[x] > w[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static inline bool better(const float *w, int32_t x, int32_t y) {
    return w[x] > w[y] || (w[x] == w[y] && x < y);
}

/* The k best ids of work[] into cand[0..k), best first: a min-heap of k,
 * O(n log k). */
static void top_k_select(tn_sampler *s, int32_t k) {
    const float *w = s->work;
    int32_t *h = s->cand;
    for (int32_t t = 0; t < s->n_vocab; t++) {
        int32_t i;
        if (t < k) {
            i = t;
            h[i] = t;
            while (i > 0 && better(w, h[(i - 1) / 2], h[i])) {
                int32_t tmp = h[i];
                h[i] = h[(i - 1) / 2];
                h[(i - 1) / 2] = tmp;
                i = (i - 1) / 2;
            }
            continue;
        }
        if (!better(w, t, h[0]))
            continue;
        h[0] = t;
        i = 0;
        for (;;) {
            int32_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < k && better(w, h[m], h[l]))
                m = l;
            if (r < k && better(w, h[m], h[r]))
                m = r;
            if (m == i)
                break;
            int32_t tmp = h[i];
            h[i] = h[m];
            h[m] = tmp;
            i = m;
        }
    }
    s->n_cand = k;
    qsort_r(s->cand, (size_t)k, sizeof *s->cand, by_logit, (void *)w);
}

/* Fills cand/prob (n_cand entries, best first, probabilities summing to 1)
 * from logits, for a temperature > 0. */
static void prepare(tn_sampler *s) {
    const tn_sampler_params *p = &s->p;
    const float *w = s->work;
    const int32_t V = s->n_vocab;

    float max = -INFINITY;
    for (int32_t t = 0; t < V; t++)
        if (w[t] > max)
            max = w[t];

    if (p->top_k > 0 && p->top_k < V) {
        top_k_select(s, p->top_k);
    } else {
        /* Tokens under min-p's bar are dropped whatever top-p keeps, so only
         * the others need sorting; top-p still sees the full softmax. */
        const float bar = p->min_p > 0 ? max + logf(p->min_p) : -INFINITY;
        int32_t n = 0;
        for (int32_t t = 0; t < V; t++)
            if (w[t] >= bar)
                s->cand[n++] = t;
        s->n_cand = n;
        qsort_r(s->cand, (size_t)n, sizeof *s->cand, by_logit, (void *)w);
    }

    /* top-p on the softmax (temperature 1) of what top-k left. */
    if (p->top_p < 1.0f) {
        double z = 0;
        if (p->top_k > 0 && p->top_k < V) {
            for (int32_t i = 0; i < s->n_cand; i++)
                z += exp((double)w[s->cand[i]] - max);
        } else {
            for (int32_t t = 0; t < V; t++)
                z += exp((double)w[t] - max);
        }
        double cum = 0;
        int32_t keep = s->n_cand;
        for (int32_t i = 0; i < s->n_cand; i++) {
            cum += exp((double)w[s->cand[i]] - max) / z;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        s->n_cand = keep;
    }
    if (p->min_p > 0) {
        const float bar = max + logf(p->min_p);
        int32_t keep = 1;
        while (keep < s->n_cand && w[s->cand[keep]] >= bar)
            keep++;
        s->n_cand = keep;
    }

    /* Temperature, then the softmax the draw uses. */
    const double inv_t = 1.0 / p->temperature;
    const double top = (double)w[s->cand[0]] * inv_t;
    double z = 0;
    for (int32_t i = 0; i < s->n_cand; i++) {
        const double e = exp((double)w[s->cand[i]] * inv_t - top);
        s->prob[i] = (float)e;
        z += e;
    }
    for (int32_t i = 0; i < s->n_cand; i++)
        s->prob[i] = (float)(s->prob[i] / z);
}

static int32_t argmax(const float *w, int32_t n) {
    int32_t best = 0;
    for (int32_t t = 1; t < n; t++)
        if (w[t] > w[best])
            best = t;
    return best;
}

int32_t tn_sampler_sample(tn_sampler *s, const float *logits) {
    memcpy(s->work, logits, (size_t)s->n_vocab * sizeof *s->work);
    apply_penalties(s);
    if (s->p.temperature <= 0.0f)
        return argmax(s->work, s->n_vocab);
    prepare(s);
    const double u = tn_sampler_uniform(s);
    double cum = 0;
    for (int32_t i = 0; i < s->n_cand; i++) {
        cum += s->prob[i];
        if (u < cum)
            return s->cand[i];
    }
    return s->cand[s->n_cand - 1]; /* rounding left cum just under 1 */
}

void tn_sampler_probs(tn_sampler *s, const float *logits, float *probs) {
    memcpy(s->work, logits, (size_t)s->n_vocab * sizeof *s->work);
    apply_penalties(s);
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    if (s->p.temperature <= 0.0f) {
        probs[argmax(s->work, s->n_vocab)] = 1.0f;
        return;
    }
    prepare(s);
    for (int32_t i = 0; i < s->n_cand; i++)
        probs[s->cand[i]] = s->prob[i];
}
