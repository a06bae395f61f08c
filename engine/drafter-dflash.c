/* The DFlash block drafter (docs/DFLASH.md; z-lab/dflash `dflash/model.py`).
 *
 * Run state, like a KV cache: for every context position the drafter has
 * seen, the keys and values its layers derive from the target's hidden
 * states there (fc -> RMSNorm -> attn_k / attn_v, k-norm, rope). They are
 * computed once, when the target decodes the position (tn_spec_observe), and
 * kept while the token history matches (a mirror of the tokens, as the
 * session keeps for its own KV). A proposal is one forward of the block
 * [t, MASK...] through the draft layers with non-causal attention over the
 * context's keys and the block's own, then the target's output head.
 *
 * Batch invariance is not needed here (a draft only decides speed, never
 * the output), but the arithmetic is deterministic all the same: the same
 * history gives the same draft whatever the thread count. */
#include "tn-drafter-common.h"
#include "tn-drafter-math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS_MAX 64 /* rows of one internal pass (block, or a chunk of context) */

typedef struct dlayer {
    bool swa;
    bool shared_kv;         /* no attn_v: values are the unweighted RMSNorm of the raw keys */
    const float *attn_norm; /* [E] */
    tn_weight wq;           /* [H * D][E] */
    tn_weight wk, wv;       /* [KV * D][E], also applied to context features */
    const float *q_norm;    /* [D] */
    const float *k_norm;    /* [D] */
    tn_weight wo;           /* [E][H * D] */
    const float *post_attn; /* [E] or NULL (Gemma-style drafts) */
    const float *ffn_norm;  /* [E] */
    tn_weight gate, up;     /* [F][E] */
    tn_weight down;         /* [E][F] */
    const float *post_ffn;  /* [E] or NULL */
    float out_scale;        /* layer_output_scale, 1 when absent */
    float *ck, *cv;         /* [cap][KV * D] context keys (normed, rotated) and values */
} dlayer;

typedef struct dflash {
    tn_draft_base b; /* its file, thread pool and guard */
    const tn_model *target;
    int32_t E, L, H, KV, D, F, B, V;
    int32_t n_taps;
    int32_t n_rot;             /* rotated dimensions of a head (rope.dimension_count) */
    float eps, rope_base, softcap, in_scale, logit_scale, kq_scale;
    bool gelu;                 /* hidden_activation gelu(_pytorch_tanh): GELU-tanh, else SiLU */
    const float *rope_freqs;   /* [n_rot / 2] divisors of the rotation frequencies, or NULL */
    const float *ones;         /* [D] the weight of the unweighted value norm */
    int32_t window; /* 0: none */
    bool causal;
    int32_t mask;
    int32_t Vd;                /* rows of the draft's head: V, or fewer with d2t */
    int32_t *d2t;              /* [Vd] target id of each head row (reduced vocabulary), or NULL */
    float *dlogits;            /* [B][Vd] head output before the d2t scatter */
    tn_weight fc;              /* [E][n_taps * E] */
    const float *enc_norm;     /* [E] */
    const float *out_norm;     /* [E] */
    tn_weight embd;            /* [V][E]: the draft's own, or the target's */
    tn_weight head;            /* [V][E] */
    dlayer *layers;
    /* Context. */
    int32_t cap;     /* positions allocated */
    int32_t known;   /* positions [0, known) have features */
    int32_t *tokens; /* [cap] the token at each known position */
    /* Scratch for ROWS_MAX rows. */
    float *x, *xn, *q, *k, *v, *att, *o, *gate, *up, *feat, *cs, *logits, *scores;
    int32_t scores_stride;
    tn_sampler *sampler;
    bool greedy;
} dflash;

/* ---------------------------------------------------------------- maths */

static int mm(dflash *df, const tn_weight *w, const float *x, int32_t n, float *y, tn_error *err) {
    int rc = tn_matmul(df->b.cpu, w, x, n, y);
    if (rc != TN_OK)
        return tn_fail(err, rc, "%s: a matrix product of the draft failed (%s)", df->b.path,
                       tn_status_name(rc));
    return TN_OK;
}

/* Keys (per-head k_norm, then rope from df->cs) of n rows in df->k; with a
 * shared K/V projection the values are first taken from the raw keys,
 * RMS-normed without a weight and not rotated (llama.cpp's DFlash graph). */
static void key_values(dflash *df, const dlayer *ly, int32_t n) {
    const int32_t D = df->D, KV = df->KV;
    for (int32_t i = 0; i < n; i++)
        for (int32_t h = 0; h < KV; h++) {
            const size_t at = ((size_t)i * KV + (size_t)h) * D;
            float *k = df->k + at;
            if (ly->shared_kv)
                tn_rmsnorm(df->v + at, k, df->ones, D, df->eps);
            tn_rmsnorm(k, k, ly->k_norm, D, df->eps);
            tn_draft_rope(k, df->cs + (size_t)i * D, df->n_rot);
        }
}

/* ------------------------------------------------------------- context */

static int grow(dflash *df, int32_t need, tn_error *err) {
    if (need <= df->cap)
        return TN_OK;
    int32_t cap = df->cap ? df->cap : 256;
    while (cap < need)
        cap *= 2;
    const size_t kvd = (size_t)df->KV * (size_t)df->D;
    int32_t *t = realloc(df->tokens, (size_t)cap * sizeof *t);
    if (!t)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for the DFlash context");
    df->tokens = t;
    for (int32_t l = 0; l < df->L; l++) {
        float *k = realloc(df->layers[l].ck, (size_t)cap * kvd * sizeof *k);
        if (!k)
            return tn_fail(err, TN_ERR_NOMEM, "out of memory for the DFlash context");
        df->layers[l].ck = k;
        float *v = realloc(df->layers[l].cv, (size_t)cap * kvd * sizeof *v);
        if (!v)
            return tn_fail(err, TN_ERR_NOMEM, "out of memory for the DFlash context");
        df->layers[l].cv = v;
    }
    float *sc = realloc(df->scores,
                        (size_t)tn_cpu_threads(df->b.cpu) * (size_t)(cap + ROWS_MAX) * sizeof *sc);
    if (!sc)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for the DFlash context");
    df->scores = sc;
    df->scores_stride = cap + ROWS_MAX;
    df->cap = cap;
    return TN_OK;
}

static int32_t df_known(void *self, const int32_t *history, int32_t n) {
    dflash *df = self;
    df->known = tn_draft_prefix(df->tokens, df->known, history, n);
    return df->known;
}

/* Context keys and values of n rows at pos0 from their hidden states. */
static int context_rows(dflash *df, int32_t pos0, const int32_t *tokens, int32_t n,
                        const float *hidden, tn_error *err) {
    const int32_t E = df->E, D = df->D, KV = df->KV;
    const size_t kvd = (size_t)KV * (size_t)D;
    int rc = mm(df, &df->fc, hidden, n, df->feat, err);
    if (rc != TN_OK)
        return rc;
    for (int32_t i = 0; i < n; i++)
        tn_rmsnorm(df->feat + (size_t)i * E, df->feat + (size_t)i * E, df->enc_norm, E, df->eps);
    for (int32_t i = 0; i < n; i++)
        tn_draft_rope_table(df->cs + (size_t)i * D, pos0 + i, df->n_rot, df->rope_base,
                            df->rope_freqs);
    for (int32_t l = 0; l < df->L; l++) {
        dlayer *ly = &df->layers[l];
        if ((rc = mm(df, &ly->wk, df->feat, n, df->k, err)) ||
            (!ly->shared_kv && (rc = mm(df, &ly->wv, df->feat, n, df->v, err))))
            return rc;
        key_values(df, ly, n);
        memcpy(ly->ck + (size_t)pos0 * kvd, df->k, (size_t)n * kvd * sizeof(float));
        memcpy(ly->cv + (size_t)pos0 * kvd, df->v, (size_t)n * kvd * sizeof(float));
    }
    memcpy(df->tokens + pos0, tokens, (size_t)n * sizeof *tokens);
    df->known = pos0 + n;
    return TN_OK;
}

/* One guarded step of the drafter (context rows or a block): its
 * arguments and result, so that it runs as tn_drafter_guard_run's fn. */
typedef struct df_call {
    dflash *df;
    int32_t pos0, n, anchor, n_ctx;
    const int32_t *tokens;
    const float *hidden;
    tn_error *err;
    int rc;
} df_call;

static void observe_run(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    df_call *c = arg;
    const size_t row = (size_t)c->df->n_taps * (size_t)c->df->E;
    for (int32_t done = 0; c->rc == TN_OK && done < c->n; done += ROWS_MAX) {
        const int32_t m = c->n - done < ROWS_MAX ? c->n - done : ROWS_MAX;
        c->rc = context_rows(c->df, c->pos0 + done, c->tokens + done, m,
                             c->hidden + (size_t)done * row, c->err);
    }
}

/* A step cut short by a file cut short: its rows are garbage, and so is
 * what the drafter knew (every later step fails the same way anyway). */
static int df_guarded(dflash *df, void (*fn)(void *, int, int), df_call *c) {
    const int rc = tn_drafter_guard_run(&df->b.guard, df->b.cpu, fn, c, c->err);
    if (rc != TN_OK) {
        df->known = 0;
        return rc;
    }
    return c->rc;
}

static int df_observe(void *self, int32_t pos0, const int32_t *tokens, int32_t n,
                      const float *hidden, tn_error *err) {
    dflash *df = self;
    if (pos0 > df->known)
        return TN_OK; /* a gap: these rows cannot extend the known prefix */
    int rc = grow(df, pos0 + n, err); /* outside the guard: it allocates */
    if (rc != TN_OK)
        return rc;
    df_call c = {.df = df, .pos0 = pos0, .n = n, .tokens = tokens, .hidden = hidden,
                 .err = err, .rc = TN_OK};
    return df_guarded(df, observe_run, &c);
}

/* --------------------------------------------------------------- block */

typedef struct attn_job {
    dflash *df;
    const dlayer *ly;
    int32_t n_ctx;  /* context positions visible */
    int32_t nb;     /* block rows */
    int64_t pos0;   /* position of block row 0 */
} attn_job;

/* One (row, head) per item: softmax over the context keys then the block's,
 * in that fixed order. */
static void task_attention(void *p, int ith, int nth) {
    const attn_job *j = p;
    dflash *df = j->df;
    const int32_t D = df->D, H = df->H, KV = df->KV, group = H / KV;
    const size_t kvd = (size_t)KV * (size_t)D;
    float *scores = df->scores + (size_t)ith * (size_t)df->scores_stride;
    const int32_t window = j->ly->swa ? df->window : 0;
    const float scale = df->kq_scale;
    for (int64_t it = ith; it < (int64_t)j->nb * H; it += nth) {
        const int32_t i = (int32_t)(it / H), h = (int32_t)(it % H), kh = h / group;
        const int64_t qpos = j->pos0 + i;
        const float *q = df->q + ((size_t)i * H + (size_t)h) * D;
        const int32_t total = j->n_ctx + j->nb;
        float max = -INFINITY;
        for (int32_t t = 0; t < total; t++) {
            const bool in_ctx = t < j->n_ctx;
            const int64_t kpos = in_ctx ? t : j->pos0 + (t - j->n_ctx);
            bool visible = true;
            /* llama.cpp's standard window: keys at least `window` behind the
             * query are hidden; the block's later rows (non-causal) are not. */
            if (window > 0 && qpos - kpos >= window)
                visible = false;
            if (df->causal && !in_ctx && kpos > qpos)
                visible = false;
            if (!visible) {
                scores[t] = -INFINITY;
                continue;
            }
            const float *key = in_ctx ? j->ly->ck + (size_t)t * kvd + (size_t)kh * D
                                      : df->k + ((size_t)(t - j->n_ctx) * KV + (size_t)kh) * D;
            const float s = tn_dot_f32(q, key, D) * scale;
            scores[t] = s;
            if (s > max)
                max = s;
        }
        float sum = 0;
        for (int32_t t = 0; t < total; t++) {
            const float e = scores[t] == -INFINITY ? 0.0f : expf(scores[t] - max);
            scores[t] = e;
            sum += e;
        }
        float *out = df->att + ((size_t)i * H + (size_t)h) * D;
        memset(out, 0, (size_t)D * sizeof *out);
        for (int32_t t = 0; t < total; t++) {
            const float w = scores[t];
            if (w == 0.0f)
                continue;
            const float *val = t < j->n_ctx
                                   ? j->ly->cv + (size_t)t * kvd + (size_t)kh * D
                                   : df->v + ((size_t)(t - j->n_ctx) * KV + (size_t)kh) * D;
            for (int32_t d = 0; d < D; d++)
                out[d] += w * val[d];
        }
        const float inv = sum > 0 ? 1.0f / sum : 0.0f;
        for (int32_t d = 0; d < D; d++)
            out[d] *= inv;
    }
}

/* The block forward: rows [anchor, MASK...] at positions pos0.., leaves the
 * logits of rows 1 .. nb - 1 in df->logits. */
static int block_forward(dflash *df, int32_t anchor, int64_t pos0, int32_t n_ctx, int32_t nb,
                         tn_error *err) {
    const int32_t E = df->E, D = df->D, H = df->H;
    int rc;
    for (int32_t i = 0; i < nb; i++) {
        float *x = df->x + (size_t)i * E;
        if ((rc = tn_weight_row_f32(&df->embd, i == 0 ? anchor : df->mask, x)) != TN_OK)
            return tn_fail(err, rc, "%s: cannot read an embedding row", df->b.path);
        if (df->in_scale != 1.0f)
            for (int32_t e = 0; e < E; e++)
                x[e] *= df->in_scale;
        tn_draft_rope_table(df->cs + (size_t)i * D, pos0 + i, df->n_rot, df->rope_base,
                            df->rope_freqs);
    }
    for (int32_t l = 0; l < df->L; l++) {
        const dlayer *ly = &df->layers[l];
        for (int32_t i = 0; i < nb; i++)
            tn_rmsnorm(df->xn + (size_t)i * E, df->x + (size_t)i * E, ly->attn_norm, E, df->eps);
        if ((rc = mm(df, &ly->wq, df->xn, nb, df->q, err)) ||
            (rc = mm(df, &ly->wk, df->xn, nb, df->k, err)) ||
            (!ly->shared_kv && (rc = mm(df, &ly->wv, df->xn, nb, df->v, err))))
            return rc;
        for (int32_t i = 0; i < nb; i++) {
            const float *cs = df->cs + (size_t)i * D;
            for (int32_t h = 0; h < H; h++) {
                float *q = df->q + ((size_t)i * H + (size_t)h) * D;
                tn_rmsnorm(q, q, ly->q_norm, D, df->eps);
                tn_draft_rope(q, cs, df->n_rot);
            }
        }
        key_values(df, ly, nb);
        attn_job job = {.df = df, .ly = ly, .n_ctx = n_ctx, .nb = nb, .pos0 = pos0};
        tn_cpu_parallel(df->b.cpu, task_attention, &job);
        if ((rc = mm(df, &ly->wo, df->att, nb, df->o, err)))
            return rc;
        for (int32_t i = 0; i < nb; i++) {
            float *x = df->x + (size_t)i * E, *o = df->o + (size_t)i * E;
            if (ly->post_attn)
                tn_rmsnorm(o, o, ly->post_attn, E, df->eps);
            for (int32_t e = 0; e < E; e++)
                x[e] += o[e];
            tn_rmsnorm(df->xn + (size_t)i * E, x, ly->ffn_norm, E, df->eps);
        }
        if ((rc = mm(df, &ly->gate, df->xn, nb, df->gate, err)) ||
            (rc = mm(df, &ly->up, df->xn, nb, df->up, err)))
            return rc;
        for (size_t e = 0; e < (size_t)nb * (size_t)df->F; e++)
            df->gate[e] = (df->gelu ? tn_draft_gelu_tanh(df->gate[e])
                                    : tn_draft_silu(df->gate[e])) * df->up[e];
        if ((rc = mm(df, &ly->down, df->gate, nb, df->o, err)))
            return rc;
        for (int32_t i = 0; i < nb; i++) {
            float *x = df->x + (size_t)i * E, *o = df->o + (size_t)i * E;
            if (ly->post_ffn)
                tn_rmsnorm(o, o, ly->post_ffn, E, df->eps);
            for (int32_t e = 0; e < E; e++)
                x[e] = (x[e] + o[e]) * ly->out_scale;
        }
    }
    /* Row 0 (the anchor) predicts nothing; rows 1.. are the drafts. */
    for (int32_t i = 1; i < nb; i++)
        tn_rmsnorm(df->xn + (size_t)(i - 1) * E, df->x + (size_t)i * E, df->out_norm, E, df->eps);
    float *out = df->d2t ? df->dlogits : df->logits;
    if ((rc = mm(df, &df->head, df->xn, nb - 1, out, err)))
        return rc;
    /* The target's output transforms, so that a sampled draft is drawn from
     * a distribution shaped like the target's (argmax is unchanged). */
    const size_t n_out = (size_t)(nb - 1) * (size_t)df->Vd;
    if (df->logit_scale != 1.0f)
        for (size_t e = 0; e < n_out; e++)
            out[e] *= df->logit_scale;
    if (df->softcap > 0) {
        const float c = df->softcap;
        for (size_t e = 0; e < n_out; e++)
            out[e] = c * tanhf(out[e] / c);
    }
    /* A reduced head: tokens it has no row for cannot be drafted. */
    if (df->d2t)
        for (int32_t i = 0; i < nb - 1; i++) {
            float *row = df->logits + (size_t)i * (size_t)df->V;
            const float *src = df->dlogits + (size_t)i * (size_t)df->Vd;
            for (int32_t t = 0; t < df->V; t++)
                row[t] = -INFINITY;
            for (int32_t r = 0; r < df->Vd; r++)
                row[df->d2t[r]] = src[r];
        }
    return TN_OK;
}

static void block_run(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    df_call *c = arg;
    c->rc = block_forward(c->df, c->anchor, c->pos0, c->n_ctx, c->n, c->err);
}

static int32_t df_propose_q(void *self, const int32_t *history, int32_t n, int32_t max_draft,
                            int32_t *draft, float *q, bool *has_q, tn_error *err) {
    dflash *df = self;
    *has_q = false;
    if (n < 1 || max_draft < 1)
        return 0;
    const int32_t nb = max_draft + 1 < df->B ? max_draft + 1 : df->B;
    const int32_t n_ctx = df_known(df, history, n - 1);
    int rc = grow(df, n + nb, err);
    if (rc == TN_OK) {
        df_call c = {.df = df, .anchor = history[n - 1], .pos0 = n - 1, .n_ctx = n_ctx,
                     .n = nb, .err = err, .rc = TN_OK};
        rc = df_guarded(df, block_run, &c);
    }
    if (rc != TN_OK)
        return rc;
    const bool sample = q && !df->greedy;
    for (int32_t i = 0; i < nb - 1; i++) {
        const float *row = df->logits + (size_t)i * (size_t)df->V;
        if (sample)
            tn_sampler_probs(df->sampler, row, q + (size_t)i * (size_t)df->V);
        draft[i] = tn_sampler_sample(df->sampler, row);
    }
    *has_q = sample;
    return nb - 1;
}

static int32_t df_propose(void *self, const int32_t *history, int32_t n, int32_t max_draft,
                          int32_t *draft, tn_error *err) {
    bool has_q;
    return df_propose_q(self, history, n, max_draft, draft, NULL, &has_q, err);
}

/* Drafts follow the request's sampling (penalties aside), from a generator
 * of their own seeded by the request. */
static int df_begin(void *self, const tn_sampler_params *sp, tn_error *err) {
    dflash *df = self;
    tn_sampler_params p = *sp;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.seed = sp->seed ^ 0xdf1a5bULL;
    tn_sampler *fresh;
    int rc = tn_sampler_new(df->V, p, &fresh, err);
    if (rc != TN_OK)
        return rc;
    tn_sampler_free(df->sampler);
    df->sampler = fresh;
    df->greedy = p.temperature <= 0.0f;
    return TN_OK;
}

static void df_reset(void *self) {
    dflash *df = self;
    df->known = 0;
}

static int df_check(void *self, tn_error *err) {
    const dflash *df = self;
    return tn_drafter_guard_check(&df->b.guard, err);
}

static void df_free(void *self) {
    dflash *df = self;
    if (!df)
        return;
    for (int32_t l = 0; df->layers && l < df->L; l++) {
        free(df->layers[l].ck);
        free(df->layers[l].cv);
    }
    free(df->layers);
    free(df->tokens);
    free(df->d2t);
    free(df->dlogits);
    float *bufs[] = {df->x,  df->xn,   df->q,    df->k,  df->v,      df->att,   df->o,
                     df->gate, df->up, df->feat, df->cs, df->logits, df->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    tn_sampler_free(df->sampler);
    tn_draft_close(&df->b);
    free(df);
}

/* --------------------------------------------------------------- loading */

typedef struct ld {
    dflash *df;
    const tn_model *target;
    const char *path;
    tn_error *err;
} ld;

static int key_int(ld *l, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi,
                   int32_t *out) {
    return tn_draft_key_int(&l->df->b, suffix, required, def, lo, hi, out, l->err);
}

static int key_float(ld *l, const char *suffix, double def, double lo, double hi, float *out) {
    return tn_draft_key_float(&l->df->b, suffix, def, lo, hi, out, l->err);
}

static int matrix(ld *l, const char *name, int64_t cols, int64_t rows, tn_weight *w) {
    return tn_draft_matrix(&l->df->b, name, cols, rows, w, l->err);
}

static int vector(ld *l, const char *name, int64_t n, const float **out) {
    return tn_draft_vector(&l->df->b, name, n, out, l->err);
}

/* The reduced vocabulary: d2t (I64, absolute target ids, one per row of the
 * draft's own output.weight), as llama.cpp's converter writes it. */
static int load_d2t(ld *l, const tn_gguf_tensor *t) {
    dflash *df = l->df;
    if (t->type != 27 /* i64 */ || t->n_dims != 1 || t->ne[0] < 1 ||
        t->ne[0] > (uint64_t)df->V)
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: tensor 'd2t' must be one i64 target id per draft vocabulary row "
                       "(1 to %d of them)",
                       l->path, df->V);
    df->Vd = (int32_t)t->ne[0];
    df->d2t = malloc((size_t)df->Vd * sizeof *df->d2t);
    uint8_t *seen = calloc((size_t)df->V, 1);
    int rc = TN_OK;
    if (!df->d2t || !seen)
        rc = tn_fail(l->err, TN_ERR_NOMEM, "out of memory");
    for (int32_t r = 0; rc == TN_OK && r < df->Vd; r++) {
        int64_t id;
        memcpy(&id, (const uint8_t *)t->data + (size_t)r * 8, 8);
        if (id < 0 || id >= df->V)
            rc = tn_fail(l->err, TN_ERR_INVALID,
                         "%s: d2t row %d maps to target token %lld, outside the target's "
                         "vocabulary",
                         l->path, r, (long long)id);
        else if (seen[id])
            rc = tn_fail(l->err, TN_ERR_INVALID,
                         "%s: d2t row %d maps to target token %lld, which an earlier row "
                         "already maps to",
                         l->path, r, (long long)id);
        else
            seen[id] = 1, df->d2t[r] = (int32_t)id;
    }
    free(seen);
    return rc;
}

static int load(void *arg) {
    ld *l = arg;
    const tn_model *target = l->target;
    dflash *df = l->df;
    const char *path = l->path;
    const char *tp = tn_model_path(target);
    int rc;
    /* empty when the key is missing or not a string: the message prints it */
    tn_str arch = {0};
    rc = tn_gguf_read_str(df->b.gguf, "general.architecture", &arch, l->err);
    if (rc != TN_OK && rc != TN_ERR_NOT_FOUND)
        return rc;
    if (rc != TN_OK ||
        !tn_str_eq(arch, "dflash"))
        return tn_fail(l->err, TN_ERR_UNSUPPORTED,
                       "%s: not a DFlash draft (general.architecture is '%.*s', expected 'dflash')",
                       path, (int)(arch.len > 32 ? 32 : arch.len), arch.ptr ? arch.ptr : "");
    if ((rc = key_int(l, "embedding_length", true, 0, 1, 1 << 16, &df->E)) ||
        (rc = key_int(l, "block_count", true, 0, 1, 256, &df->L)) ||
        (rc = key_int(l, "feed_forward_length", true, 0, 1, 1 << 18, &df->F)) ||
        (rc = key_int(l, "attention.head_count", true, 0, 1, 1024, &df->H)) ||
        (rc = key_int(l, "attention.head_count_kv", false, df->H, 1, df->H, &df->KV)) ||
        (rc = key_int(l, "attention.key_length", false, df->E / df->H, 2, 1024, &df->D)) ||
        (rc = key_int(l, "block_size", false, 16, 2, ROWS_MAX, &df->B)) ||
        (rc = key_int(l, "attention.sliding_window", false, 0, 0, INT32_MAX, &df->window)))
        return rc;
    int32_t vlen;
    if ((rc = key_int(l, "attention.value_length", false, df->D, df->D, df->D, &vlen)))
        return rc;
    if (df->H % df->KV || df->D % 2)
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: %d heads, %d key/value heads of %d values: not a layout Tern runs",
                       path, df->H, df->KV, df->D);
    if ((rc = key_int(l, "rope.dimension_count", false, df->D, 2, df->D, &df->n_rot)))
        return rc;
    if (df->n_rot % 2)
        return tn_fail(l->err, TN_ERR_FORMAT, "%s: 'dflash.rope.dimension_count' is odd (%d)",
                       path, df->n_rot);
    /* embedding_scale and logit_scale: 0 (or absent) means none, as llama.cpp
     * reads them (the converter stores the checkpoint's input_embedding_scale
     * and output_multiplier under these names). */
    float emb_scale = 0;
    if ((rc = key_float(l, "attention.layer_norm_rms_epsilon", 1e-6, TN_EPS_MIN, TN_EPS_MAX,
                        &df->eps)) ||
        (rc = key_float(l, "rope.freq_base", 10000.0, TN_ROPE_BASE_MIN, TN_ROPE_BASE_MAX,
                        &df->rope_base)) ||
        (rc = key_float(l, "final_logit_softcapping", 0.0, TN_SOFTCAP_MIN, TN_SOFTCAP_MAX,
                        &df->softcap)) ||
        (rc = key_float(l, "embedding_scale", 0.0, TN_SCALE_MIN, TN_SCALE_MAX, &emb_scale)) ||
        (rc = key_float(l, "logit_scale", 0.0, TN_SCALE_MIN, TN_SCALE_MAX, &df->logit_scale)) ||
        (rc = key_float(l, "attention.scale", 0.0, TN_SCALE_MIN, TN_SCALE_MAX, &df->kq_scale)))
        return rc;
    df->in_scale = emb_scale > 0 ? emb_scale : 1.0f;
    if (df->logit_scale == 0)
        df->logit_scale = 1.0f;
    if (df->kq_scale == 0)
        df->kq_scale = 1.0f / sqrtf((float)df->D);
    tn_str act = {0};
    if (tn_gguf_find(df->b.gguf, "dflash.hidden_activation") &&
        tn_gguf_get_str(df->b.gguf, "dflash.hidden_activation", &act) != TN_OK)
        return tn_fail(l->err, TN_ERR_FORMAT, "%s: 'dflash.hidden_activation' is not a string",
                       path);
    df->gelu = act.ptr && (tn_str_eq(act, "gelu") || tn_str_eq(act, "gelu_pytorch_tanh"));
    if (act.ptr && !df->gelu && !tn_str_eq(act, "silu"))
        return tn_fail(l->err, TN_ERR_UNSUPPORTED,
                       "%s: hidden activation '%.*s' is not one Tern runs (silu, gelu, "
                       "gelu_pytorch_tanh)",
                       path, (int)(act.len > 32 ? 32 : act.len), act.ptr);
    /* Drafts for M-RoPE targets carry sections [n_rot / 2, 0, 0, 0]: on text
     * positions that is the plain rotation. A fourth section would rotate by
     * a position Tern does not have. */
    const tn_gguf_value *sect = tn_gguf_find(df->b.gguf, "dflash.rope.dimension_sections");
    if (sect && (sect->type != TN_GGUF_ARRAY || sect->v.arr.n < 4 ||
                 sect->v.arr.type == TN_GGUF_STRING || sect->v.arr.type == TN_GGUF_ARRAY ||
                 tn_gguf_arr_int(sect, 3) != 0))
        return tn_fail(l->err, TN_ERR_UNSUPPORTED,
                       "%s: 'dflash.rope.dimension_sections' is not a text-only rope Tern runs",
                       path);
    tn_str scaling = {0};
    if (tn_gguf_get_str(df->b.gguf, "dflash.rope.scaling.type", &scaling) == TN_OK &&
        !tn_str_eq(scaling, "none"))
        return tn_fail(l->err, TN_ERR_UNSUPPORTED,
                       "%s: rope scaling '%.*s' in a DFlash draft is not supported", path,
                       (int)(scaling.len > 32 ? 32 : scaling.len), scaling.ptr);
    /* The variants of llama.cpp's dflash architecture Tern does not run. */
    static const struct {
        const char *tensor, *what;
    } variants[] = {
        {"selector_hidden.weight", "a DFlash2 draft (conv and selector heads)"},
        {"markov_w1.weight", "a DSpark draft (Markov head)"},
        {"hc_head_fn.weight", "a DeepSeek-V4 DSpark draft"},
        {"blk.0.attn_sinks.weight", "a draft with attention sinks"},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (tn_gguf_find_tensor(df->b.gguf, variants[i].tensor))
            return tn_fail(l->err, TN_ERR_UNSUPPORTED,
                           "%s: %s; Tern runs DFlash drafts (fc, enc.output_norm, plain layers)",
                           path, variants[i].what);
    bool causal = false;
    if (tn_gguf_find(df->b.gguf, "dflash.attention.causal") &&
        tn_gguf_get_bool(df->b.gguf, "dflash.attention.causal", &causal) != TN_OK)
        return tn_fail(l->err, TN_ERR_FORMAT, "%s: 'dflash.attention.causal' is not a bool", path);
    df->causal = causal;

    /* What has to fit the target. */
    if (df->E != tn_model_n_embd(target))
        return tn_fail(l->err, TN_ERR_INVALID,
                       "%s: the draft is %d wide but the target %s is %d: it was made for "
                       "another model",
                       path, df->E, tp, tn_model_n_embd(target));
    const tn_gguf_value *taps = tn_gguf_find(df->b.gguf, "dflash.target_layers");
    if (!taps || taps->type != TN_GGUF_ARRAY || taps->v.arr.n < 1 || taps->v.arr.n > 64 ||
        taps->v.arr.type == TN_GGUF_STRING || taps->v.arr.type == TN_GGUF_ARRAY ||
        taps->v.arr.type == TN_GGUF_F32 || taps->v.arr.type == TN_GGUF_F64 ||
        taps->v.arr.type == TN_GGUF_BOOL)
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: 'dflash.target_layers' must be an array of 1 to 64 layer ids", path);
    df->n_taps = (int32_t)taps->v.arr.n;
    for (int32_t i = 0; i < df->n_taps; i++) {
        const int64_t id = tn_gguf_arr_int(taps, (uint64_t)i);
        if (id < 0 || id > tn_model_n_layer(target))
            return tn_fail(l->err, TN_ERR_INVALID,
                           "%s: target layer %lld does not exist in %s, which has hidden states "
                           "0 (embeddings) .. %d: the draft was made for another model",
                           path, (long long)id, tp, tn_model_n_layer(target));
    }
    int64_t mask;
    if (tn_gguf_get_int(df->b.gguf, "tokenizer.ggml.mask_token_id", &mask) != TN_OK)
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: 'tokenizer.ggml.mask_token_id' is missing (a DFlash draft needs "
                       "its MASK token)",
                       path);
    df->V = tn_model_n_vocab(target);
    if (mask < 0 || mask >= df->V)
        return tn_fail(l->err, TN_ERR_INVALID,
                       "%s: the mask token %lld is outside the vocabulary of %s (0..%d)", path,
                       (long long)mask, tp, df->V - 1);
    df->mask = (int32_t)mask;
    if ((rc = tn_drafter_check_vocab(target, df->b.gguf, path, false, l->err)))
        return rc;

    /* Weights. */
    const int64_t E = df->E, QD = (int64_t)df->H * df->D, KD = (int64_t)df->KV * df->D;
    if ((rc = matrix(l, "fc.weight", (int64_t)df->n_taps * E, E, &df->fc)) ||
        (rc = vector(l, "enc.output_norm.weight", E, &df->enc_norm)) ||
        (rc = vector(l, "output_norm.weight", E, &df->out_norm)))
        return rc;
    /* Embedding and head: the draft's own when it has them (a head of Vd rows
     * with d2t; its embedding doubles as the head when only it is present,
     * as llama.cpp ties them), else the target's. */
    df->Vd = df->V;
    const tn_gguf_tensor *d2t = tn_gguf_find_tensor(df->b.gguf, "d2t");
    if (d2t && (rc = load_d2t(l, d2t)))
        return rc;
    bool has_embd, has_head;
    if ((rc = tn_gguf_get_weight(df->b.gguf, path, "DFlash", "token_embd.weight", E, df->V, false,
                                 &df->embd, &has_embd, l->err)) ||
        (rc = tn_gguf_get_weight(df->b.gguf, path, "DFlash", "output.weight", E, df->Vd, false,
                                 &df->head, &has_head, l->err)))
        return rc;
    if (d2t && !has_head && (df->Vd != df->V || !has_embd))
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: the draft maps %d head rows to the target (d2t) but has no "
                       "output.weight of that many rows",
                       path, df->Vd);
    if (!has_head)
        df->head = has_embd ? df->embd : target->output;
    if (!has_embd)
        df->embd = target->tok_embd;
    const tn_gguf_tensor *rf = tn_gguf_find_tensor(df->b.gguf, "rope_freqs.weight");
    if (rf && (rc = vector(l, "rope_freqs.weight", df->n_rot / 2, &df->rope_freqs)))
        return rc;
    if ((rc = tn_draft_check_freqs(&df->b, df->rope_freqs, df->n_rot / 2, l->err)))
        return rc;
    float *ones = tn_draft_alloc(&df->b, df->D, l->err);
    if (!ones)
        return TN_ERR_NOMEM;
    for (int32_t i = 0; i < df->D; i++)
        ones[i] = 1.0f;
    df->ones = ones;
    df->layers = calloc((size_t)df->L, sizeof *df->layers);
    if (!df->layers)
        return tn_fail(l->err, TN_ERR_NOMEM, "out of memory");
    /* One flag per draft layer, as llama.cpp reads it (it requires the array
     * whenever there is a window; Tern reads a window alone as every layer). */
    const tn_gguf_value *pattern =
        tn_gguf_find(df->b.gguf, "dflash.attention.sliding_window_pattern");
    if (pattern && (pattern->type != TN_GGUF_ARRAY || pattern->v.arr.n != (uint64_t)df->L ||
                    pattern->v.arr.type == TN_GGUF_STRING || pattern->v.arr.type == TN_GGUF_ARRAY ||
                    pattern->v.arr.type == TN_GGUF_F32 || pattern->v.arr.type == TN_GGUF_F64))
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: 'dflash.attention.sliding_window_pattern' needs one flag per layer "
                       "(%d)",
                       path, df->L);
    for (int32_t il = 0; il < df->L; il++) {
        dlayer *ly = &df->layers[il];
        ly->swa = df->window > 0 && (!pattern || tn_gguf_arr_int(pattern, (uint64_t)il) != 0);
        tn_draft_base *b = &df->b;
        const float *scale = NULL;
        ly->shared_kv = !tn_draft_blk_has(b, il, "attn_v");
        if ((rc = tn_draft_blk_vector(b, il, "attn_norm", E, true, &ly->attn_norm, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "attn_q", E, QD, &ly->wq, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "attn_k", E, KD, &ly->wk, l->err)) ||
            (!ly->shared_kv &&
             (rc = tn_draft_blk_matrix(b, il, "attn_v", E, KD, &ly->wv, l->err))) ||
            (rc = tn_draft_blk_vector(b, il, "attn_q_norm", df->D, true, &ly->q_norm, l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "attn_k_norm", df->D, true, &ly->k_norm, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "attn_output", QD, E, &ly->wo, l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "post_attention_norm", E, false, &ly->post_attn,
                                      l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "ffn_norm", E, true, &ly->ffn_norm, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "ffn_gate", E, df->F, &ly->gate, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "ffn_up", E, df->F, &ly->up, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "ffn_down", df->F, E, &ly->down, l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "post_ffw_norm", E, false, &ly->post_ffn, l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "layer_output_scale", 1, false, &scale, l->err)))
            return rc;
        ly->out_scale = scale ? scale[0] : 1.0f;
    }
    /* Scratch. */
    const size_t R = ROWS_MAX, F = (size_t)df->F;
    bool ok = true;
#define ALLOC(p, n)                                                                 \
    do {                                                                            \
        (p) = malloc((n) * sizeof(float));                                          \
        ok = ok && (p);                                                             \
    } while (0)
    ALLOC(df->x, R * (size_t)E);
    ALLOC(df->xn, R * (size_t)E);
    ALLOC(df->q, R * (size_t)QD);
    ALLOC(df->k, R * (size_t)KD);
    ALLOC(df->v, R * (size_t)KD);
    ALLOC(df->att, R * (size_t)QD);
    ALLOC(df->o, R * (size_t)E);
    ALLOC(df->gate, R * F);
    ALLOC(df->up, R * F);
    ALLOC(df->feat, R * (size_t)E);
    ALLOC(df->cs, R * (size_t)df->D);
    ALLOC(df->logits, (size_t)df->B * (size_t)df->V);
    if (df->d2t)
        ALLOC(df->dlogits, (size_t)df->B * (size_t)df->Vd);
#undef ALLOC
    if (!ok)
        return tn_fail(l->err, TN_ERR_NOMEM, "out of memory for the DFlash scratch");
    return TN_OK;
}

static int new_dflash(const tn_model *target, const char *path, tn_drafter_params p,
                      tn_drafter **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_dflash: out is NULL");
    *out = NULL;
    if (!target || !path)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_dflash: no target or draft path");
    dflash *df = calloc(1, sizeof *df);
    if (!df)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    df->target = target;
    ld l = {.df = df, .target = target, .path = path, .err = err};
    int rc = tn_draft_open(&df->b, path, "dflash", "DFlash", load, &l, p.n_threads, err);
    if (rc == TN_OK)
        rc = tn_sampler_new(df->V, tn_sampler_default_params(), &df->sampler, err);
    if (rc == TN_OK)
        rc = grow(df, 256, err);
    if (rc == TN_OK)
        rc = tn_drafter_guard_init(&df->b.guard, df->b.gguf, target, err);
    if (rc != TN_OK) {
        df_free(df);
        return rc;
    }
    df->greedy = true;
    /* The hidden-state ids, in fc order. */
    const tn_gguf_value *taps = tn_gguf_find(df->b.gguf, "dflash.target_layers");
    int32_t ids[64];
    for (int32_t i = 0; i < df->n_taps; i++)
        ids[i] = (int32_t)tn_gguf_arr_int(taps, (uint64_t)i);
    static const tn_drafter_ops ops = {
        .propose = df_propose,
        .reset = df_reset,
        .free = df_free,
    };
    static const tn_drafter_hooks hooks = {
        .begin = df_begin,
        .propose_q = df_propose_q,
        .observe = df_observe,
        .known = df_known,
        .check = df_check,
    };
    const int32_t block = df->B;
    return tn_draft_wrap("dflash", &ops, &hooks, df, p.draft_max > 0 ? p.draft_max : block - 1,
                         block, ids, df->n_taps, target, out, err);
}

/* p.cancelled is asked as tn_model_load asks its own (docs/MODEL.md,
 * "Cancelling a load"): before the weights are read, at every matrix's
 * NaN/Inf pass and every 64 MiB of it (tn_gguf_get_weight), and once the
 * weights are in; a 1.1 GB draft takes half a second from a cold disk. */
int tn_drafter_new_dflash(const tn_model *target, const char *path, tn_drafter_params p,
                          tn_drafter **out, tn_error *err) {
    return tn_drafter_new_cancellable(new_dflash, target, path, p, out, err);
}
