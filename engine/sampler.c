/* Token sampling: penalties, then top-k, top-p, min-p, temperature (the
 * order llama.cpp's default chain uses), then a draw from Tern's own PRNG
 * (xoshiro256**, seeded through splitmix64), so that a seed gives the same
 * tokens on every machine and libc. Nothing is sorted that a filter does
 * not need sorted: temperature alone draws from the whole vocabulary in a
 * few vectorized passes, top-p sorts one bin of candidates (docs/MODEL.md). */
#include "tn-internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
    /* The sort-free paths: e^(logit - max) (times 1/temperature) by id, and
     * their sums per block of SUM_BLOCK ids. */
    float *ex;         /* [n_vocab] */
    double *block_sum; /* [n_blocks] */
    double ex_sum;
    double *bin_mass;  /* [NUCLEUS_BINS]: top-p's mass per logit bin */
    tn_logit_bias *bias;
    int32_t n_bias;
    tn_token_allow_fn allow;
    void *allow_user;
    /* tn_sampler_set_allow_groups: allow's candidates by group. */
    const int32_t *group_start; /* [257] */
    const int32_t *group_tokens;
    tn_token_group_fn group_ok;
};

#define SUM_BLOCK 64
#define NUCLEUS_BINS 2048

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
        s->rng[i] = tn_splitmix64(&x);
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
    free(s->ex);
    free(s->block_sum);
    free(s->bin_mass);
    free(s->bias);
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
    s->ex = malloc((size_t)n_vocab * sizeof *s->ex);
    s->block_sum = malloc(((size_t)n_vocab / SUM_BLOCK + 1) * sizeof *s->block_sum);
    s->bin_mass = malloc(NUCLEUS_BINS * sizeof *s->bin_mass);
    if (!s->hist || !s->counts || !s->work || !s->cand || !s->prob || !s->ex || !s->block_sum ||
        !s->bin_mass) {
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

int tn_logit_bias_check(const tn_logit_bias *bias, int32_t n, int32_t n_vocab, tn_error *err) {
    if (n < 0 || n > TN_LOGIT_BIAS_MAX || (n > 0 && !bias))
        return tn_fail(err, TN_ERR_INVALID, "logit bias: %d entries; at most %d", n,
                       TN_LOGIT_BIAS_MAX);
    for (int32_t i = 0; i < n; i++) {
        if (bias[i].token < 0 || bias[i].token >= n_vocab)
            return tn_fail(err, TN_ERR_INVALID, "token %d is outside the vocabulary (0..%d)",
                           bias[i].token, n_vocab - 1);
        if (!isfinite(bias[i].bias))
            return tn_fail(err, TN_ERR_INVALID, "logit bias: the bias of token %d is not finite",
                           bias[i].token);
    }
    return TN_OK;
}

int tn_sampler_set_logit_bias(tn_sampler *s, const tn_logit_bias *bias, int32_t n,
                              tn_error *err) {
    if (!s || n < 0 || (n > 0 && !bias))
        return tn_fail(err, TN_ERR_INVALID, "tn_sampler_set_logit_bias: bad arguments");
    /* The API's guard (apply_bias indexes by these tokens): a session has
     * checked them before its prefill already, with this same function. */
    int rc = tn_logit_bias_check(bias, n, s->n_vocab, err);
    if (rc != TN_OK)
        return rc;
    tn_logit_bias *copy = NULL;
    if (n > 0) {
        copy = malloc((size_t)n * sizeof *copy);
        if (!copy)
            return tn_fail(err, TN_ERR_NOMEM, "out of memory");
        memcpy(copy, bias, (size_t)n * sizeof *copy);
    }
    free(s->bias);
    s->bias = copy;
    s->n_bias = n;
    return TN_OK;
}

void tn_sampler_set_allow(tn_sampler *s, tn_token_allow_fn allow, void *user) {
    if (!s)
        return;
    s->allow = allow;
    s->allow_user = user;
    s->group_start = NULL;
    s->group_tokens = NULL;
    s->group_ok = NULL;
}

void tn_sampler_set_allow_groups(tn_sampler *s, const int32_t *start, const int32_t *tokens,
                                 tn_token_group_fn group_ok) {
    if (!s)
        return;
    const bool on = start && tokens && group_ok;
    s->group_start = on ? start : NULL;
    s->group_tokens = on ? tokens : NULL;
    s->group_ok = on ? group_ok : NULL;
}

/* The bias comes before the penalties, as in llama.cpp's chain; a token
 * listed twice gets both. */
static void apply_bias(tn_sampler *s) {
    for (int32_t i = 0; i < s->n_bias; i++)
        s->work[s->bias[i].token] += s->bias[i].bias;
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

/* e^x for x <= 0 without a libm call: x = n ln2 + r with |r| <= ln2/2 (ln2
 * in two parts), e^r by the Cephes expf polynomial, 2^n through the
 * exponent bits. Relative error below 3e-7 against exp()
 * (tests/engine/test-sampler.c); 0 for x below -87 (e^-87 is 1.6e-38,
 * where 2^n would leave the normal range) and for NaN, so a token whose
 * logit is -inf is never drawn. The SSE2 loop below computes the same
 * steps four at a time (GCC does not vectorize the selects of this scalar
 * form without -fno-trapping-math). */
#define EXP_LOG2E 1.44269504088896341f
#define EXP_ROUND 12582912.0f /* 1.5 * 2^23: x + it - it rounds to nearest */
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

static inline float exp_neg(float x) {
    const bool keep = x >= -87.0f; /* false for NaN */
    x = keep ? x : -87.0f;
    x = x < 0.0f ? x : 0.0f;
    const float n = (x * EXP_LOG2E + EXP_ROUND) - EXP_ROUND;
    float r = x - n * EXP_LN2_HI;
    r = r - n * EXP_LN2_LO;
    float p = EXP_P0;
    p = p * r + EXP_P1;
    p = p * r + EXP_P2;
    p = p * r + EXP_P3;
    p = p * r + EXP_P4;
    p = p * r + EXP_P5;
    p = p * r * r + r + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return keep ? p * scale : 0.0f;
}

float tn_sampler_exp_neg(float x) { return exp_neg(x); }

/* out[t] = exp_neg((w[t] - max) * scale) for t < n. */
static void exp_neg_all(const float *w, float *out, int32_t n, float max, float scale) {
    int32_t t = 0;
#ifdef __SSE2__
    const __m128 vmax = _mm_set1_ps(max), vscale = _mm_set1_ps(scale);
    const __m128 lo = _mm_set1_ps(-87.0f), zero = _mm_setzero_ps();
    const __m128 round = _mm_set1_ps(EXP_ROUND), log2e = _mm_set1_ps(EXP_LOG2E);
    for (; t + 4 <= n; t += 4) {
        __m128 x = _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(w + t), vmax), vscale);
        const __m128 keep = _mm_cmpge_ps(x, lo); /* false for NaN */
        x = _mm_min_ps(_mm_max_ps(x, lo), zero); /* maxps gives lo for NaN */
        const __m128 nf = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(x, log2e), round), round);
        __m128 r = _mm_sub_ps(x, _mm_mul_ps(nf, _mm_set1_ps(EXP_LN2_HI)));
        r = _mm_sub_ps(r, _mm_mul_ps(nf, _mm_set1_ps(EXP_LN2_LO)));
        __m128 p = _mm_set1_ps(EXP_P0);
        p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P1));
        p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P2));
        p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P3));
        p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P4));
        p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(EXP_P5));
        p = _mm_add_ps(_mm_add_ps(_mm_mul_ps(_mm_mul_ps(p, r), r), r), _mm_set1_ps(1.0f));
        const __m128i e = _mm_slli_epi32(_mm_add_epi32(_mm_cvtps_epi32(nf), _mm_set1_epi32(127)),
                                         23);
        _mm_storeu_ps(out + t, _mm_and_ps(keep, _mm_mul_ps(p, _mm_castsi128_ps(e))));
    }
#endif
    for (; t < n; t++)
        out[t] = exp_neg((w[t] - max) * scale);
}

/* The sum of x[0..n) in double, in four interleaved partial sums joined
 * as (a0 + a1) + (a2 + a3): the order every caller's results depend on
 * (the sampler's block sums, tn_logprobs' normaliser). */
static double sum4(const float *x, int32_t n) {
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a0 += x[i];
        a1 += x[i + 1];
        a2 += x[i + 2];
        a3 += x[i + 3];
    }
    for (; i < n; i++)
        a0 += x[i];
    return (a0 + a1) + (a2 + a3);
}

void tn_sampler_exp_neg_all(const float *w, float *out, int32_t n, float max, float scale) {
    exp_neg_all(w, out, n, max, scale);
}

/* ex[t] = e^((w[t] - max) * scale) for every id, with block sums and their
 * total (doubles, four running sums per block so the adds overlap). */
static void exp_all(tn_sampler *s, float max, float scale) {
    const float *w = s->work;
    float *ex = s->ex;
    const int32_t V = s->n_vocab;
    exp_neg_all(w, ex, V, max, scale);
    double total = 0;
    for (int32_t b = 0, t0 = 0; t0 < V; b++, t0 += SUM_BLOCK) {
        const int32_t t1 = V - t0 < SUM_BLOCK ? V : t0 + SUM_BLOCK;
        s->block_sum[b] = sum4(ex + t0, t1 - t0);
        total += s->block_sum[b];
    }
    s->ex_sum = total;
}

static float max_of(const float *w, int32_t n) {
    float max = -INFINITY;
    for (int32_t t = 0; t < n; t++)
        max = w[t] > max ? w[t] : max;
    return max;
}

/* A draw from ex[] (unnormalised): the block that holds u * total first,
 * then the id inside it. -1 when there is no mass at all. */
static int32_t draw_full(tn_sampler *s, double u) {
    const int32_t V = s->n_vocab;
    if (!(s->ex_sum > 0))
        return -1;
    const double target = u * s->ex_sum;
    double cum = 0;
    int32_t b = 0, t0 = 0;
    for (; t0 + SUM_BLOCK < V; b++, t0 += SUM_BLOCK) {
        if (target < cum + s->block_sum[b])
            break;
        cum += s->block_sum[b];
    }
    const int32_t t1 = V - t0 < SUM_BLOCK ? V : t0 + SUM_BLOCK;
    int32_t last = -1;
    for (int32_t t = t0; t < t1; t++) {
        if (s->ex[t] <= 0)
            continue;
        last = t;
        cum += s->ex[t];
        if (target < cum)
            return t;
    }
    if (last >= 0)
        return last; /* the block's sum rounded a hair above its running sum */
    for (int32_t t = V; t-- > 0;) /* an empty last block: the last id with mass */
        if (s->ex[t] > 0)
            return t;
    return -1;
}

/* Plain temperature (no top-k, top-p or min-p) draws from the softmax of
 * the whole vocabulary: no candidate list, no sort. */
static bool whole_vocab(const tn_sampler *s) {
    const tn_sampler_params *p = &s->p;
    return (p->top_k <= 0 || p->top_k >= s->n_vocab) && !(p->top_p < 1.0f) && !(p->min_p > 0);
}

/* Top-p without a full sort. The nucleus is the smallest best-first prefix
 * of the softmax (temperature 1) whose mass reaches top_p. Binning the ids
 * by how far below the best logit they are (1/32 per bin, the last bin
 * catching everything 64 or more below) gives the bin where that mass is
 * reached: every id of an earlier bin has a higher logit than any id of
 * that bin, so it is in; only that bin's ids are sorted, and taken in order
 * until the mass is reached. The ids come out unsorted, which changes no
 * probability. */
#define NUCLEUS_PER_LOGIT 32.0f

static inline int32_t nucleus_bin(float max, float w) {
    const float d = (max - w) * NUCLEUS_PER_LOGIT;
    return d < (float)(NUCLEUS_BINS - 1) ? (int32_t)d : NUCLEUS_BINS - 1; /* NaN: last */
}

static void nucleus(tn_sampler *s, float max) {
    const float *w = s->work;
    const int32_t V = s->n_vocab;
    exp_all(s, max, 1.0f);
    s->n_cand = 0;
    if (!(s->ex_sum > 0))
        return; /* NaN or -inf everywhere: the caller falls back to argmax */
    double *mass = s->bin_mass;
    memset(mass, 0, NUCLEUS_BINS * sizeof *mass);
    for (int32_t t = 0; t < V; t++)
        mass[nucleus_bin(max, w[t])] += s->ex[t];
    const double need = (double)s->p.top_p * s->ex_sum;
    double cum = 0;
    int32_t edge = NUCLEUS_BINS - 1;
    for (int32_t b = 0; b < NUCLEUS_BINS; b++) {
        if (cum + mass[b] >= need) {
            edge = b;
            break;
        }
        cum += mass[b];
    }
    /* The sure ids from the front of cand, the edge bin's from the back. */
    int32_t n = 0, n_edge = 0;
    for (int32_t t = 0; t < V; t++) {
        const int32_t b = nucleus_bin(max, w[t]);
        if (b < edge)
            s->cand[n++] = t;
        else if (b == edge)
            s->cand[V - 1 - n_edge++] = t;
    }
    int32_t *edge_ids = s->cand + (V - n_edge);
    qsort_r(edge_ids, (size_t)n_edge, sizeof *edge_ids, by_logit, (void *)w);
    for (int32_t i = 0; i < n_edge; i++) {
        const int32_t t = edge_ids[i]; /* read before cand[n] is written: n <= V - n_edge + i */
        s->cand[n++] = t;
        cum += s->ex[t];
        if (cum >= need)
            break;
    }
    s->n_cand = n;
}

/* Fills cand/prob (n_cand entries, probabilities summing to 1) from logits,
 * for a temperature > 0 and some filter. */
static void prepare(tn_sampler *s) {
    const tn_sampler_params *p = &s->p;
    const float *w = s->work;
    const int32_t V = s->n_vocab;
    const float max = max_of(w, V);
    const bool top_k = p->top_k > 0 && p->top_k < V;
    const bool top_p = p->top_p < 1.0f;
    const float min_bar = p->min_p > 0 ? max + logf(p->min_p) : -INFINITY;

    if (top_k) {
        top_k_select(s, p->top_k); /* best first */
        if (top_p) {
            /* top-p on the softmax (temperature 1) of what top-k left. */
            double z = 0;
            for (int32_t i = 0; i < s->n_cand; i++)
                z += exp((double)w[s->cand[i]] - max);
            double cum = 0;
            for (int32_t i = 0; i < s->n_cand; i++) {
                cum += exp((double)w[s->cand[i]] - max) / z;
                if (cum >= p->top_p) {
                    s->n_cand = i + 1;
                    break;
                }
            }
        }
    } else if (top_p) {
        nucleus(s, max);
    } else {
        int32_t n = 0;
        for (int32_t t = 0; t < V; t++)
            if (w[t] >= min_bar)
                s->cand[n++] = t;
        s->n_cand = n;
    }
    if (p->min_p > 0) { /* the best logit always passes */
        int32_t n = 0;
        for (int32_t i = 0; i < s->n_cand; i++)
            if (w[s->cand[i]] >= min_bar)
                s->cand[n++] = s->cand[i];
        s->n_cand = n;
    }
    if (s->n_cand == 0) { /* NaN logits: nothing compares */
        s->cand[0] = tn_argmax(w, V);
        s->n_cand = 1;
    }

    /* Temperature, then the softmax the draw uses. */
    float top = w[s->cand[0]];
    for (int32_t i = 0; i < s->n_cand; i++) {
        s->prob[i] = w[s->cand[i]];
        top = s->prob[i] > top ? s->prob[i] : top;
    }
    exp_neg_all(s->prob, s->prob, s->n_cand, top, 1.0f / p->temperature);
    double z = 0;
    for (int32_t i = 0; i < s->n_cand; i++)
        z += s->prob[i];
    if (!(z > 0)) { /* NaN logits */
        s->cand[0] = tn_argmax(w, V);
        s->prob[0] = 1.0f;
        s->n_cand = 1;
        return;
    }
    for (int32_t i = 0; i < s->n_cand; i++)
        s->prob[i] = (float)(s->prob[i] / z);
}

/* The first token of the greatest logit (NaNs never win, unless w[0] is
 * one: then 0). Two passes: the maximum with eight independent running
 * maxima, then its first index. One running index-and-value pair is a
 * chain of compare and conditional move through every token, which GCC
 * emits for the unconstrained path: 2.6 times slower at 262,144 tokens. */
int32_t tn_argmax(const float *w, int32_t n) {
    if (n <= 1 || isnan(w[0]))
        return 0;
    float m[8];
    for (int j = 0; j < 8; j++)
        m[j] = w[0];
    int32_t t = 1;
    for (; t + 8 <= n; t += 8)
        for (int j = 0; j < 8; j++)
            m[j] = w[t + j] > m[j] ? w[t + j] : m[j];
    for (; t < n; t++)
        m[0] = w[t] > m[0] ? w[t] : m[0];
    float best = m[0];
    for (int j = 1; j < 8; j++)
        best = m[j] > best ? m[j] : best;
    for (t = 0; t < n; t++)
        if (w[t] == best)
            return t;
    return 0;
}

/* Work's logits after the bias and the penalties. */
static void load_work(tn_sampler *s, const float *logits) {
    memcpy(s->work, logits, (size_t)s->n_vocab * sizeof *s->work);
    apply_bias(s);
    apply_penalties(s);
}

/* Every refused token's logit to -inf: the masked distribution the
 * constrained draws are equivalent to. The number of allowed tokens. */
static int32_t mask_refused(tn_sampler *s) {
    int32_t n = 0;
    if (s->group_start) {
        /* Only the tokens of the groups that can be allowed are tried; the
         * kept logits wait in cand/prob (scratch until the next prepare)
         * while the rest of work is masked. */
        for (int g = 0; g < 256; g++) {
            if (!s->group_ok(g, s->allow_user))
                continue;
            for (int32_t i = s->group_start[g]; i < s->group_start[g + 1]; i++) {
                const int32_t t = s->group_tokens[i];
                if (s->work[t] != -INFINITY && s->allow(t, s->allow_user)) {
                    s->cand[n] = t;
                    s->prob[n] = s->work[t];
                    n++;
                }
            }
        }
        for (int32_t t = 0; t < s->n_vocab; t++)
            s->work[t] = -INFINITY;
        for (int32_t i = 0; i < n; i++)
            s->work[s->cand[i]] = s->prob[i];
        return n;
    }
    for (int32_t t = 0; t < s->n_vocab; t++) {
        if (s->work[t] == -INFINITY)
            continue;
        if (s->allow(t, s->allow_user))
            n++;
        else
            s->work[t] = -INFINITY;
    }
    return n;
}

/* Candidates tried one by one before the whole vocabulary is masked. */
#define ALLOW_TRIES 64

static int32_t sample_work(tn_sampler *s);

static int32_t sample_allowed(tn_sampler *s) {
    const int32_t V = s->n_vocab;
    if (s->p.temperature <= 0.0f) {
        /* The best token is mostly allowed: one pass finds it; else the next
         * best ones in logit order, and only then the whole vocabulary. */
        const int32_t best = tn_argmax(s->work, V);
        if (s->work[best] != -INFINITY && s->allow(best, s->allow_user))
            return best;
        const int32_t k = V < ALLOW_TRIES ? V : ALLOW_TRIES;
        top_k_select(s, k);
        for (int32_t i = 0; i < k; i++)
            if (s->work[s->cand[i]] != -INFINITY && s->allow(s->cand[i], s->allow_user))
                return s->cand[i];
    } else if (whole_vocab(s)) {
        /* A refused draw leaves the distribution: its mass is taken out of
         * its block and the total, and the next draw is from the rest. */
        exp_all(s, max_of(s->work, V), 1.0f / s->p.temperature);
        for (int tries = 0; tries < ALLOW_TRIES; tries++) {
            const int32_t t = draw_full(s, tn_sampler_uniform(s));
            if (t < 0)
                break;
            if (s->allow(t, s->allow_user))
                return t;
            s->block_sum[t / SUM_BLOCK] -= s->ex[t];
            s->ex_sum -= s->ex[t];
            s->ex[t] = 0;
            if (!(s->ex_sum > 0))
                break;
        }
    } else {
        prepare(s);
        double z = 1.0;
        for (int tries = 0; tries < ALLOW_TRIES && z > 0; tries++) {
            const double u = tn_sampler_uniform(s) * z;
            double cum = 0;
            int32_t pick = -1;
            for (int32_t i = 0; i < s->n_cand; i++) {
                if (s->prob[i] <= 0)
                    continue;
                pick = i;
                cum += s->prob[i];
                if (u < cum)
                    break;
            }
            if (pick < 0)
                break;
            if (s->allow(s->cand[pick], s->allow_user))
                return s->cand[pick];
            z -= s->prob[pick];
            s->prob[pick] = 0;
        }
    }
    if (mask_refused(s) == 0)
        return -1;
    const int32_t t = sample_work(s);
    return s->work[t] != -INFINITY ? t : -1;
}

int32_t tn_sampler_sample(tn_sampler *s, const float *logits) {
    load_work(s, logits);
    if (s->allow)
        return sample_allowed(s);
    return sample_work(s);
}

/* A pick from work[] by the parameters. */
static int32_t sample_work(tn_sampler *s) {
    if (s->p.temperature <= 0.0f)
        return tn_argmax(s->work, s->n_vocab);
    if (whole_vocab(s)) {
        exp_all(s, max_of(s->work, s->n_vocab), 1.0f / s->p.temperature);
        const int32_t t = draw_full(s, tn_sampler_uniform(s));
        return t >= 0 ? t : tn_argmax(s->work, s->n_vocab); /* no mass: NaN or all -inf */
    }
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

static void probs_work(tn_sampler *s, float *probs);

/* What sample_allowed draws from: the filters' distribution renormalized
 * over the allowed tokens, or, when it has none, the masked vocabulary's. */
static void probs_allowed(tn_sampler *s, const float *logits, float *probs) {
    probs_work(s, probs);
    double z = 0;
    for (int32_t t = 0; t < s->n_vocab; t++) {
        if (probs[t] > 0 && !s->allow(t, s->allow_user))
            probs[t] = 0;
        z += probs[t];
    }
    if (z > 0) {
        for (int32_t t = 0; t < s->n_vocab; t++)
            probs[t] = (float)(probs[t] / z);
        return;
    }
    load_work(s, logits);
    if (mask_refused(s) == 0) {
        memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
        return;
    }
    probs_work(s, probs);
}

void tn_sampler_probs(tn_sampler *s, const float *logits, float *probs) {
    load_work(s, logits);
    if (s->allow)
        probs_allowed(s, logits, probs);
    else
        probs_work(s, probs);
}

static void probs_work(tn_sampler *s, float *probs) {
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    if (s->p.temperature <= 0.0f) {
        probs[tn_argmax(s->work, s->n_vocab)] = 1.0f;
        return;
    }
    if (whole_vocab(s)) {
        exp_all(s, max_of(s->work, s->n_vocab), 1.0f / s->p.temperature);
        if (!(s->ex_sum > 0)) {
            probs[tn_argmax(s->work, s->n_vocab)] = 1.0f;
            return;
        }
        const float inv = (float)(1.0 / s->ex_sum);
        for (int32_t t = 0; t < s->n_vocab; t++)
            probs[t] = s->ex[t] * inv;
        return;
    }
    prepare(s);
    for (int32_t i = 0; i < s->n_cand; i++)
        probs[s->cand[i]] = s->prob[i];
}

/* ---------------------------------------------------------- logprobs */

int tn_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t k, float *logprob,
                tn_token_logprob *top, tn_error *err) {
    if (k < 0 || k > TN_TOP_LOGPROBS_MAX)
        return tn_fail(err, TN_ERR_INVALID,
                       "%d top log-probabilities were asked for; from 0 to %d can be", k,
                       TN_TOP_LOGPROBS_MAX);
    if (!logits || n_vocab <= 0 || token < 0 || token >= n_vocab)
        return tn_fail(err, TN_ERR_INVALID, "token %d is outside the vocabulary (0..%d)", token,
                       n_vocab - 1);
    if (k > n_vocab)
        k = n_vocab;
    /* One pass, by blocks small enough to stay in L1: a block's maximum,
     * the running maximum (the sum so far rescaled when it grows), the
     * block's exponentials four at a time (exp_neg: 0 for -inf and NaN, no
     * mass), and the k best kept by insertion: a logit must beat the k-th
     * to enter, which almost none does, so nothing is sorted. Scanning ids
     * upwards and entering only on "greater" keeps equal logits in id
     * order. */
    enum { BLOCK = 512 };
    float ex[BLOCK];
    float mx = -INFINITY;
    double sum = 0;
    float best[TN_TOP_LOGPROBS_MAX];
    int32_t n = 0;
    for (int32_t b0 = 0; b0 < n_vocab; b0 += BLOCK) {
        const int32_t nb = n_vocab - b0 < BLOCK ? n_vocab - b0 : BLOCK;
        const float *w = logits + b0;
        float bm = -INFINITY;
        for (int32_t i = 0; i < nb; i++)
            bm = w[i] > bm ? w[i] : bm;
        if (!(bm > -INFINITY)) /* nothing finite here: no mass, no top entry */
            continue;
        if (bm > mx) {
            sum *= exp((double)mx - (double)bm);
            mx = bm;
        }
        exp_neg_all(w, ex, nb, mx, 1.0f);
        sum += sum4(ex, nb);
        if (k == 0 || (n == k && !(bm > best[k - 1])))
            continue;
        for (int32_t i = 0; i < nb; i++) {
            const float l = w[i];
            if (!(l > -INFINITY) || (n == k && !(l > best[k - 1])))
                continue;
            int32_t at = n < k ? n++ : k - 1;
            while (at > 0 && l > best[at - 1]) {
                best[at] = best[at - 1];
                top[at] = top[at - 1];
                at--;
            }
            best[at] = l;
            top[at].token = b0 + i;
        }
    }
    /* No finite logit: nothing is likely; every log-probability is -inf. */
    const double lse = sum > 0 ? (double)mx + log(sum) : INFINITY;
    for (int32_t i = 0; i < n; i++)
        top[i].logprob = (float)((double)best[i] - lse);
    /* Fewer finite logits than k: they are all in top, and the rest is
     * filled with -inf tokens, lowest ids first. */
    for (int32_t i = n, t = 0; i < k; i++, t++) {
        while (logits[t] > -INFINITY)
            t++;
        top[i].token = t;
        top[i].logprob = -INFINITY;
    }
    if (logprob) {
        const float l = logits[token];
        *logprob = l > -INFINITY && sum > 0 ? (float)((double)l - lse) : -INFINITY;
    }
    return k;
}
