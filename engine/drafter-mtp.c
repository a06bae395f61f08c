/* The Gemma 4 MTP "assistant" drafter (docs/MTP.md; llama.cpp's
 * `gemma4-assistant` architecture, src/models/gemma4-assistant.cpp).
 *
 * An assistant is a few Gemma 4 layers that own no keys or values: their
 * queries attend over the TARGET's KV memory (sliding layers over the
 * memory the target's layer n_layer - 2 reads, full layers over that of
 * layer n_layer - 1), so it costs no prefill and no cache of its own. One
 * step maps [target embedding of the token (times sqrt(width)), a hidden
 * state] through nextn.pre_projection into the assistant's width, runs the
 * layers with the query at the position the token will take, and gives
 * logits (the tied token_embd) and the next hidden state
 * (nextn.post_projection of the normed output). The first step's hidden
 * state is the target's last row after its final norm; every further step
 * feeds back the assistant's own, at the SAME position (the target's memory
 * does not grow while drafting), as llama.cpp's draft-mtp loop does.
 *
 * State: the token history mirrored up to the last row the target decoded
 * and that row's normed hidden state. A draft only decides speed, never the
 * output (the target verifies every token), but the arithmetic is
 * deterministic all the same. */
#include "tn-drafter-common.h"
#include "tn-drafter-math.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mlayer {
    bool swa;
    int32_t D;              /* head size: the target memory's it reads */
    int32_t n_rot;
    int32_t F;
    int32_t src;            /* target layer whose KV memory it reads (a KV-owning one) */
    int32_t KV;             /* that memory's KV heads */
    float rope_base;
    const float *freqs;     /* full layers: rope_freqs divisors, else NULL */
    const float *attn_norm; /* [E] */
    tn_weight wq;           /* [H * D][E] */
    const float *q_norm;    /* [D] */
    tn_weight wo;           /* [E][H * D] */
    const float *post_attn; /* [E] */
    const float *ffn_norm;  /* [E] */
    tn_weight gate, up;     /* [F][E] */
    tn_weight down;         /* [E][F] */
    const float *post_ffn;  /* [E] */
    float out_scale;
} mlayer;

typedef struct mtp {
    tn_draft_base b; /* its file, thread pool and guard */
    const tn_model *target;
    int32_t E, Eb, L, H, V, window, max_d, max_f;
    float eps;
    tn_weight embd;          /* [V][E], also the head (tied) */
    tn_weight pre;           /* [E][2 Eb] */
    tn_weight post;          /* [Eb][E] */
    const float *out_norm;   /* [E] */
    mlayer *layers;
    tn_ctx *ctx;             /* the target's context while a request runs */
    /* History: tokens[0, known) are the rows the target decoded; h is the
     * normed hidden state of row known - 1. */
    int32_t *tokens;
    int32_t known, cap;
    float *h;                /* [Eb] */
    /* Scratch of one row. */
    float *in, *x, *xn, *q, *att, *o, *gate, *up, *logits, *cs, *scores;
    uint16_t *qb;
    size_t scores_stride;
} mtp;

/* ---------------------------------------------------------------- maths */

static int mm(mtp *a, const tn_weight *w, const float *x, float *y, tn_error *err) {
    int rc = tn_matmul(a->b.cpu, w, x, 1, y);
    if (rc != TN_OK)
        return tn_fail(err, rc, "%s: a matrix product of the assistant failed (%s)", a->b.path,
                       tn_status_name(rc));
    return TN_OK;
}

/* ------------------------------------------------------------ the step */

typedef struct attn_job {
    mtp *a;
    const mlayer *ly;
    int64_t pos;  /* the query's position; the target's memory holds [0, pos) */
} attn_job;

/* One query head per item, through the target's own attention kernel over
 * the target's cache (its layout is the backend's). */
static void task_attention(void *p, int ith, int nth) {
    const attn_job *j = p;
    mtp *a = j->a;
    const mlayer *ly = j->ly;
    const tn_backend *be = &a->target->backend;
    const int32_t group = a->H / ly->KV;
    float *scratch = a->scores + (size_t)ith * a->scores_stride;
    for (int32_t h = ith; h < a->H; h += nth) {
        tn_attn_tile t = {.head_dim = ly->D,
                          .n = 1,
                          .k = tn_ctx_kv_head(a->ctx, false, ly->src, h / group),
                          .v = tn_ctx_kv_head(a->ctx, true, ly->src, h / group),
                          .scale = 1.0f};
        t.q[0] = a->qb + (size_t)h * (size_t)ly->D;
        t.out[0] = a->att + (size_t)h * (size_t)ly->D;
        t.first[0] = ly->swa && a->window > 0 && j->pos - a->window + 1 > 0
                         ? j->pos - a->window + 1
                         : 0;
        t.last[0] = j->pos - 1;
        be->run.attention(be, &t, scratch);
    }
}

/* One assistant step: token at pos with hidden state a->h; leaves the
 * logits in a->logits and the next hidden state in a->h. */
static int step(mtp *a, int32_t token, int64_t pos, tn_error *err) {
    const int32_t E = a->E, Eb = a->Eb;
    int rc = a->target->backend.run.weight_row(&a->target->backend, &a->target->tok_embd, token,
                                               a->in);
    if (rc != TN_OK)
        return tn_fail(err, rc, "%s: cannot read embedding row %d", tn_model_path(a->target),
                       token);
    const float scale = sqrtf((float)Eb);
    for (int32_t e = 0; e < Eb; e++)
        a->in[e] *= scale;
    memcpy(a->in + Eb, a->h, (size_t)Eb * sizeof(float));
    if ((rc = mm(a, &a->pre, a->in, a->x, err)))
        return rc;
    for (int32_t il = 0; il < a->L; il++) {
        const mlayer *ly = &a->layers[il];
        tn_rmsnorm(a->xn, a->x, ly->attn_norm, E, a->eps);
        if ((rc = mm(a, &ly->wq, a->xn, a->q, err)))
            return rc;
        tn_draft_rope_table(a->cs, pos, ly->n_rot, ly->rope_base, ly->freqs);
        for (int32_t h = 0; h < a->H; h++) {
            float *q = a->q + (size_t)h * (size_t)ly->D;
            tn_rmsnorm(q, q, ly->q_norm, ly->D, a->eps);
            tn_draft_rope(q, a->cs, ly->n_rot);
            uint16_t *qb = a->qb + (size_t)h * (size_t)ly->D;
            for (int32_t d = 0; d < ly->D; d++)
                qb[d] = tn_bf16_from_f32(q[d]);
        }
        attn_job job = {.a = a, .ly = ly, .pos = pos};
        tn_cpu_parallel(a->b.cpu, task_attention, &job);
        if ((rc = mm(a, &ly->wo, a->att, a->o, err)))
            return rc;
        tn_rmsnorm(a->o, a->o, ly->post_attn, E, a->eps);
        for (int32_t e = 0; e < E; e++)
            a->x[e] += a->o[e];
        tn_rmsnorm(a->xn, a->x, ly->ffn_norm, E, a->eps);
        if ((rc = mm(a, &ly->gate, a->xn, a->gate, err)) ||
            (rc = mm(a, &ly->up, a->xn, a->up, err)))
            return rc;
        for (int32_t f = 0; f < ly->F; f++)
            a->gate[f] = tn_draft_gelu_tanh(a->gate[f]) * a->up[f];
        if ((rc = mm(a, &ly->down, a->gate, a->o, err)))
            return rc;
        tn_rmsnorm(a->o, a->o, ly->post_ffn, E, a->eps);
        for (int32_t e = 0; e < E; e++)
            a->x[e] = (a->x[e] + a->o[e]) * ly->out_scale;
    }
    tn_rmsnorm(a->xn, a->x, a->out_norm, E, a->eps);
    if ((rc = mm(a, &a->embd, a->xn, a->logits, err)) || (rc = mm(a, &a->post, a->xn, a->h, err)))
        return rc;
    return TN_OK;
}

/* Matching prefix of the mirror and history[0, n). */
static int32_t matching(const mtp *a, const int32_t *history, int32_t n) {
    return tn_draft_prefix(a->tokens, a->known, history, n);
}

/* The drafting steps of one proposal, one guarded step in all. */
typedef struct mtp_call {
    mtp *a;
    int32_t token, pos, max_draft, nd;
    int32_t *draft;
    tn_error *err;
    int rc;
} mtp_call;

static void drafts_run(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    mtp_call *c = arg;
    int32_t token = c->token;
    for (c->nd = 0; c->nd < c->max_draft; c->nd++) {
        if ((c->rc = step(c->a, token, c->pos, c->err)) != TN_OK)
            break;
        token = tn_argmax(c->a->logits, c->a->V);
        c->draft[c->nd] = token;
    }
}

/* The last token of history is about to be verified at position n - 1;
 * the target's memory holds [0, n - 1) and the assistant needs the hidden
 * state of row n - 2. Without it (a history it has not seen) it drafts
 * nothing: never a wrong guess from stale state. */
static int32_t mtp_propose(void *self, const int32_t *history, int32_t n, int32_t max_draft,
                           int32_t *draft, tn_error *err) {
    mtp *a = self;
    const int32_t P = n - 1;
    if (!a->ctx || P < 1 || max_draft < 1 || a->known != P || matching(a, history, P) != P ||
        tn_ctx_kv_len(a->ctx) != P)
        return 0;
    /* Steps overwrite h: the target's own stays valid for the next call
     * (the verification's observe replaces it anyway). */
    float *keep = a->h + a->Eb;
    memcpy(keep, a->h, (size_t)a->Eb * sizeof(float));
    mtp_call c = {.a = a, .token = history[P], .pos = P, .max_draft = max_draft, .draft = draft,
                  .err = err, .rc = TN_OK};
    int rc = tn_drafter_guard_run(&a->b.guard, a->b.cpu, drafts_run, &c, err);
    if (rc != TN_OK) {
        a->known = 0; /* its state is garbage (and every later step fails) */
        return rc;
    }
    memcpy(a->h, keep, (size_t)a->Eb * sizeof(float));
    return c.rc != TN_OK ? c.rc : c.nd;
}

static int grow(mtp *a, int32_t need, tn_error *err) {
    if (need <= a->cap)
        return TN_OK;
    int32_t cap = a->cap ? a->cap : 256;
    while (cap < need)
        cap *= 2;
    int32_t *t = realloc(a->tokens, (size_t)cap * sizeof *t);
    if (!t)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for the assistant's history");
    a->tokens = t;
    a->cap = cap;
    return TN_OK;
}

/* Rows [pos0, pos0 + n) of the target: their tokens extend the mirror and
 * the last row's state, after the target's final norm, is the next h. */
static int mtp_observe(void *self, int32_t pos0, const int32_t *tokens, int32_t n,
                       const float *hidden, tn_error *err) {
    mtp *a = self;
    if (pos0 > a->known || n < 1)
        return TN_OK; /* a gap: these rows cannot extend the known prefix */
    int rc = grow(a, pos0 + n, err);
    if (rc != TN_OK)
        return rc;
    memcpy(a->tokens + pos0, tokens, (size_t)n * sizeof *tokens);
    a->known = pos0 + n;
    tn_rmsnorm(a->h, hidden + (size_t)(n - 1) * (size_t)a->Eb, a->target->output_norm, a->Eb,
               a->target->hp.norm_eps);
    return TN_OK;
}

/* Rows whose state the assistant has: the whole history when it holds the
 * state of its last row, else one row less (tn_spec_begin then recomputes
 * the last row, and observe hands it over). */
static int32_t mtp_known(void *self, const int32_t *history, int32_t n) {
    mtp *a = self;
    const int32_t m = matching(a, history, n);
    if (m == n && a->known == n)
        return n;
    a->known = m < n ? m : n - 1;
    if (a->known < 0)
        a->known = 0;
    return a->known;
}

static void mtp_bind(void *self, tn_ctx *ctx) {
    mtp *a = self;
    a->ctx = ctx;
}

static void mtp_reset(void *self) {
    mtp *a = self;
    a->known = 0;
}

static int mtp_check(void *self, tn_error *err) {
    const mtp *a = self;
    return tn_drafter_guard_check(&a->b.guard, err);
}

static void mtp_free(void *self) {
    mtp *a = self;
    if (!a)
        return;
    free(a->layers);
    free(a->tokens);
    float *bufs[] = {a->h, a->in, a->x, a->xn, a->q, a->att, a->o, a->gate,
                     a->up, a->logits, a->cs, a->scores};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(a->qb);
    tn_draft_close(&a->b);
    free(a);
}

/* --------------------------------------------------------------- loading */

typedef struct ld {
    mtp *a;
    const tn_model *target;
    const char *path;
    tn_error *err;
} ld;

#define ARCH "gemma4-assistant"

static int key_int(ld *l, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi,
                   int32_t *out) {
    return tn_draft_key_int(&l->a->b, suffix, required, def, lo, hi, out, l->err);
}

/* A key that is one integer or an array of one per layer (head_count_kv,
 * feed_forward_length): layer il's value. */
static int key_int_layer(ld *l, const char *suffix, bool required, int64_t def, int64_t lo,
                         int64_t hi, int32_t il, int32_t *out) {
    char key[128];
    snprintf(key, sizeof key, ARCH ".%s", suffix);
    const tn_gguf_value *v = tn_gguf_find(l->a->b.gguf, key);
    if (v && v->type == TN_GGUF_ARRAY) {
        if (v->v.arr.n != (uint64_t)l->a->L || v->v.arr.type == TN_GGUF_STRING ||
            v->v.arr.type == TN_GGUF_ARRAY || v->v.arr.type == TN_GGUF_F32 ||
            v->v.arr.type == TN_GGUF_F64 || v->v.arr.type == TN_GGUF_BOOL)
            return tn_fail(l->err, TN_ERR_FORMAT,
                           "%s: metadata key '%s' must be a number or one per layer (%d)",
                           l->path, key, l->a->L);
        const int64_t x = tn_gguf_arr_int(v, (uint64_t)il);
        if (x < lo || x > hi)
            return tn_fail(l->err, TN_ERR_FORMAT,
                           "%s: metadata key '%s' is %lld for layer %d, outside [%lld, %lld]",
                           l->path, key, (long long)x, il, (long long)lo, (long long)hi);
        *out = (int32_t)x;
        return TN_OK;
    }
    return key_int(l, suffix, required, def, lo, hi, out);
}

static int key_float(ld *l, const char *suffix, double def, double lo, double hi, float *out) {
    return tn_draft_key_float(&l->a->b, suffix, def, lo, hi, out, l->err);
}

static int matrix(ld *l, const char *name, int64_t cols, int64_t rows, tn_weight *w) {
    return tn_draft_matrix(&l->a->b, name, cols, rows, w, l->err);
}

static int vector(ld *l, const char *name, int64_t n, const float **out) {
    return tn_draft_vector(&l->a->b, name, n, out, l->err);
}

/* The keys and tensors llama.cpp's gemma4-assistant loader reads
 * (src/models/gemma4-assistant.cpp, load_arch_hparams / load_arch_tensors),
 * and what must fit the target: the memory the layers read, the width of
 * the hidden state, the vocabulary. */
static int load(void *arg) {
    ld *l = arg;
    const tn_model *target = l->target;
    mtp *a = l->a;
    const char *path = l->path, *tp = tn_model_path(target);
    int rc;
    tn_str arch = {0};
    rc = tn_gguf_read_str(a->b.gguf, "general.architecture", &arch, l->err);
    if (rc != TN_OK && rc != TN_ERR_NOT_FOUND)
        return rc;
    if (rc != TN_OK ||
        !tn_str_eq(arch, ARCH))
        return tn_fail(l->err, TN_ERR_UNSUPPORTED,
                       "%s: not a Gemma 4 assistant (general.architecture is '%.*s', expected "
                       "'gemma4-assistant')",
                       path, (int)(arch.len > 32 ? 32 : arch.len), arch.ptr ? arch.ptr : "");
    if (target->hp.arch != TN_ARCH_GEMMA4)
        return tn_fail(l->err, TN_ERR_INVALID,
                       "%s: a Gemma 4 assistant drafts for Gemma 4 models only, and %s is not one",
                       path, tp);
    int32_t D_full, D_swa, v_full, v_swa, n_rot, n_rot_swa, nextn, shared;
    if ((rc = key_int(l, "embedding_length", true, 0, 1, 1 << 16, &a->E)) ||
        (rc = key_int(l, "block_count", true, 0, 1, 64, &a->L)) ||
        (rc = key_int(l, "attention.head_count", true, 0, 1, 1024, &a->H)) ||
        (rc = key_int(l, "attention.key_length", true, 0, 2, 1 << 12, &D_full)) ||
        (rc = key_int(l, "attention.value_length", false, D_full, 1, 1 << 12, &v_full)) ||
        (rc = key_int(l, "attention.key_length_swa", true, 0, 2, 1 << 12, &D_swa)) ||
        (rc = key_int(l, "attention.value_length_swa", true, 0, 1, 1 << 12, &v_swa)) ||
        (rc = key_int(l, "attention.sliding_window", true, 0, 1, INT32_MAX, &a->window)) ||
        (rc = key_int(l, "embedding_length_out", true, 0, 1, 1 << 16, &a->Eb)) ||
        (rc = key_int(l, "nextn_predict_layers", false, a->L, 0, 64, &nextn)) ||
        (rc = key_int(l, "attention.shared_kv_layers", false, 0, 0, 64, &shared)) ||
        (rc = key_int(l, "rope.dimension_count", false, D_full, 2, D_full, &n_rot)) ||
        (rc = key_int(l, "rope.dimension_count_swa", false, D_swa, 2, D_swa, &n_rot_swa)))
        return rc;
    /* llama.cpp's own refusals, in its words' sense. */
    if (v_full != D_full || v_swa != D_swa)
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: a Gemma 4 assistant needs equal key and value lengths (%d/%d full, "
                       "%d/%d sliding)",
                       path, D_full, v_full, D_swa, v_swa);
    if (a->Eb == a->E)
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: 'gemma4-assistant.embedding_length_out' must carry the target's "
                       "width, and equals the assistant's own (%d)",
                       path, a->E);
    if (nextn != a->L)
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: %d layers but nextn_predict_layers is %d: every layer of an "
                       "assistant is a draft layer",
                       path, a->L, nextn);
    if (D_full % 2 || D_swa % 2 || n_rot % 2 || n_rot_swa % 2)
        return tn_fail(l->err, TN_ERR_FORMAT, "%s: head and rope sizes must be even", path);
    float rope_base, rope_base_swa;
    if ((rc = key_float(l, "attention.layer_norm_rms_epsilon", 1e-6, TN_EPS_MIN, TN_EPS_MAX,
                        &a->eps)) ||
        (rc = key_float(l, "rope.freq_base", 10000.0, TN_ROPE_BASE_MIN, TN_ROPE_BASE_MAX,
                        &rope_base)) ||
        (rc = key_float(l, "rope.freq_base_swa", 10000.0, TN_ROPE_BASE_MIN, TN_ROPE_BASE_MAX,
                        &rope_base_swa)))
        return rc;
    tn_str scaling = {0};
    if (tn_gguf_get_str(a->b.gguf, ARCH ".rope.scaling.type", &scaling) == TN_OK &&
        !tn_str_eq(scaling, "none"))
        return tn_fail(l->err, TN_ERR_UNSUPPORTED,
                       "%s: rope scaling '%.*s' in an assistant is not supported", path,
                       (int)(scaling.len > 32 ? 32 : scaling.len), scaling.ptr);

    /* What has to fit the target. */
    const int32_t NL = target->hp.n_layer;
    if (a->Eb != tn_model_n_embd(target))
        return tn_fail(l->err, TN_ERR_INVALID,
                       "%s: the assistant reads hidden states %d wide but the target %s is %d: "
                       "it was made for another model",
                       path, a->Eb, tp, tn_model_n_embd(target));
    if (NL < 2 || target->layers[NL - 1].swa || !target->layers[NL - 2].swa)
        return tn_fail(l->err, TN_ERR_INVALID,
                       "%s: the assistant reads the memory of the target's last full and last "
                       "sliding layer, and %s does not end with a sliding then a full layer",
                       path, tp);
    a->V = tn_model_n_vocab(target);
    if ((rc = tn_drafter_check_vocab(target, a->b.gguf, path, false, l->err)))
        return rc;

    if ((rc = matrix(l, "token_embd.weight", a->E, a->V, &a->embd)) ||
        (rc = vector(l, "output_norm.weight", a->E, &a->out_norm)) ||
        (rc = matrix(l, "nextn.pre_projection.weight", 2 * (int64_t)a->Eb, a->E, &a->pre)) ||
        (rc = matrix(l, "nextn.post_projection.weight", a->E, a->Eb, &a->post)))
        return rc;
    /* The ordered-embedding centroid head (E2B, E4B): llama.cpp's loader
     * accepts and ignores it (its converter drops masked_embedding
     * tensors) and ranks the whole tied vocabulary; so does Tern. */
    const tn_gguf_value *pattern =
        tn_gguf_find(a->b.gguf, ARCH ".attention.sliding_window_pattern");
    if (!pattern || pattern->type != TN_GGUF_ARRAY || pattern->v.arr.n != (uint64_t)a->L ||
        pattern->v.arr.type == TN_GGUF_STRING || pattern->v.arr.type == TN_GGUF_ARRAY ||
        pattern->v.arr.type == TN_GGUF_F32 || pattern->v.arr.type == TN_GGUF_F64)
        return tn_fail(l->err, TN_ERR_FORMAT,
                       "%s: 'gemma4-assistant.attention.sliding_window_pattern' needs one flag "
                       "per layer (%d)",
                       path, a->L);
    a->layers = calloc((size_t)a->L, sizeof *a->layers);
    if (!a->layers)
        return tn_fail(l->err, TN_ERR_NOMEM, "out of memory");
    const float *freqs = NULL;
    for (int32_t il = 0; il < a->L; il++) {
        mlayer *ly = &a->layers[il];
        ly->swa = tn_gguf_arr_int(pattern, (uint64_t)il) != 0;
        ly->D = ly->swa ? D_swa : D_full;
        ly->n_rot = ly->swa ? n_rot_swa : n_rot;
        ly->rope_base = ly->swa ? rope_base_swa : rope_base;
        ly->src = target->layers[NL - (ly->swa ? 2 : 1)].kv_layer;
        const tn_layer *src = &target->layers[ly->src];
        ly->KV = src->n_head_kv;
        int32_t kv;
        if ((rc = key_int_layer(l, "feed_forward_length", true, 0, 1, 1 << 18, il, &ly->F)) ||
            (rc = key_int_layer(l, "attention.head_count_kv", false, ly->KV, 1, 1024, il, &kv)))
            return rc;
        if (ly->D != src->head_dim || kv != src->n_head_kv || a->H % src->n_head_kv)
            return tn_fail(l->err, TN_ERR_INVALID,
                           "%s: assistant layer %d (%s) has %d heads of %d over %d key/value "
                           "heads, but the target memory it reads (layer %d of %s) has %d heads "
                           "of %d: it was made for another model",
                           path, il, ly->swa ? "sliding" : "full", a->H, ly->D, kv, ly->src, tp,
                           src->n_head_kv, src->head_dim);
        if (ly->D > a->max_d)
            a->max_d = ly->D;
        if (ly->F > a->max_f)
            a->max_f = ly->F;
        if (!ly->swa && !freqs &&
            (rc = vector(l, "rope_freqs.weight", D_full / 2, &freqs)))
            return rc;
        ly->freqs = ly->swa ? NULL : freqs;
        const int64_t E = a->E, QD = (int64_t)a->H * ly->D;
        tn_draft_base *b = &a->b;
        const float *scale = NULL;
        if ((rc = tn_draft_blk_vector(b, il, "attn_norm", E, true, &ly->attn_norm, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "attn_q", E, QD, &ly->wq, l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "attn_q_norm", ly->D, true, &ly->q_norm, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "attn_output", QD, E, &ly->wo, l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "post_attention_norm", E, true, &ly->post_attn,
                                      l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "ffn_norm", E, true, &ly->ffn_norm, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "ffn_gate", E, ly->F, &ly->gate, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "ffn_up", E, ly->F, &ly->up, l->err)) ||
            (rc = tn_draft_blk_matrix(b, il, "ffn_down", ly->F, E, &ly->down, l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "post_ffw_norm", E, true, &ly->post_ffn, l->err)) ||
            (rc = tn_draft_blk_vector(b, il, "layer_output_scale", 1, true, &scale, l->err)))
            return rc;
        ly->out_scale = scale[0];
    }
    if ((rc = tn_draft_check_freqs(&a->b, freqs, D_full / 2, l->err)))
        return rc;

    /* Scratch. */
    const size_t QD = (size_t)a->H * (size_t)a->max_d;
    a->h = malloc(2 * (size_t)a->Eb * sizeof(float));
    a->in = malloc(2 * (size_t)a->Eb * sizeof(float));
    a->x = malloc((size_t)a->E * sizeof(float));
    a->xn = malloc((size_t)a->E * sizeof(float));
    a->o = malloc((size_t)(a->E > a->Eb ? a->E : a->Eb) * sizeof(float));
    a->q = malloc(QD * sizeof(float));
    a->att = malloc(QD * sizeof(float));
    a->qb = malloc(QD * sizeof *a->qb);
    a->gate = malloc((size_t)a->max_f * sizeof(float));
    a->up = malloc((size_t)a->max_f * sizeof(float));
    a->logits = malloc((size_t)a->V * sizeof(float));
    a->cs = malloc((size_t)a->max_d * sizeof(float));
    if (!a->h || !a->in || !a->x || !a->xn || !a->o || !a->q || !a->att || !a->qb || !a->gate ||
        !a->up || !a->logits || !a->cs)
        return tn_fail(l->err, TN_ERR_NOMEM, "out of memory for the assistant's scratch");
    return TN_OK;
}

static int new_mtp(const tn_model *target, const char *path, tn_drafter_params p,
                   tn_drafter **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_mtp: out is NULL");
    *out = NULL;
    if (!target || !path)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_mtp: no target or assistant path");
    mtp *a = calloc(1, sizeof *a);
    if (!a)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    a->target = target;
    ld l = {.a = a, .target = target, .path = path, .err = err};
    int rc = tn_draft_open(&a->b, path, ARCH, "Gemma 4 assistant", load, &l, p.n_threads, err);
    if (rc == TN_OK) {
        a->scores_stride = tn_attention_scratch_floats(a->max_d);
        a->scores = malloc((size_t)tn_cpu_threads(a->b.cpu) * a->scores_stride * sizeof(float));
        if (!a->scores)
            rc = tn_fail(err, TN_ERR_NOMEM, "out of memory for the assistant's scratch");
    }
    if (rc == TN_OK)
        rc = grow(a, 256, err);
    if (rc == TN_OK)
        rc = tn_drafter_guard_init(&a->b.guard, a->b.gguf, target, err);
    if (rc != TN_OK) {
        mtp_free(a);
        return rc;
    }
    static const tn_drafter_ops ops = {
        .propose = mtp_propose,
        .reset = mtp_reset,
        .free = mtp_free,
    };
    static const tn_drafter_hooks hooks = {
        .observe = mtp_observe,
        .known = mtp_known,
        .bind = mtp_bind,
        .check = mtp_check,
    };
    /* llama.cpp drafts 3 by default (common.h, draft.n_max). */
    const int32_t id = tn_model_n_layer(target); /* the last layer's output */
    return tn_draft_wrap("mtp", &ops, &hooks, a, p.draft_max > 0 ? p.draft_max : 3, 0, &id, 1,
                         target, out, err);
}

/* p.cancelled is asked as tn_model_load asks its own (docs/MODEL.md,
 * "Cancelling a load"): before the weights are read, at every matrix's
 * NaN/Inf pass and every 64 MiB of it, and once the weights are in. */
int tn_drafter_new_mtp(const tn_model *target, const char *path, tn_drafter_params p,
                       tn_drafter **out, tn_error *err) {
    return tn_drafter_new_cancellable(new_mtp, target, path, p, out, err);
}
