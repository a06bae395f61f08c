/* Drafting with a smaller model of the same vocabulary.
 *
 * The draft model keeps its own KV cache mirrored by the tokens of its rows,
 * exactly like the session does: a proposal first brings the draft's KV to
 * the history (keeping the longest common prefix, so after a verification
 * only the accepted tokens and the target's next one are new), then decodes
 * token by token. Greedy requests draft greedily; with temperature > 0 the
 * draft samples with the request's settings from its own seeded generator
 * and reports the distribution of each draw, which rejection sampling needs. */
#include "tn-drafter-common.h"

#include <stdlib.h>
#include <string.h>

typedef struct draft_model {
    tn_model *model;
    tn_ctx *ctx;
    int32_t n_ctx;
    int32_t n_vocab;
    int32_t *rows;   /* [n_ctx] token of each KV row */
    int32_t n_rows;
    float *logits;   /* [n_vocab] */
    tn_sampler *sampler;
    bool greedy;
} draft_model;

/* Appends tokens to the draft's KV; the logits of the last go to dm->logits. */
static int append(draft_model *dm, const int32_t *tokens, int32_t n, tn_error *err) {
    int rc = tn_ctx_decode(dm->ctx, tokens, n, TN_LOGITS_LAST, dm->logits, err);
    if (rc != TN_OK)
        return rc;
    memcpy(dm->rows + dm->n_rows, tokens, (size_t)n * sizeof *tokens);
    dm->n_rows += n;
    return TN_OK;
}

static int32_t dm_propose_q(void *self, const int32_t *history, int32_t n, int32_t max_draft,
                            int32_t *draft, float *q, bool *has_q, tn_error *err) {
    draft_model *dm = self;
    *has_q = false;
    /* The draft's context may be shorter than the target's: no draft then. */
    if (n + max_draft - 1 > dm->n_ctx)
        max_draft = dm->n_ctx - n + 1;
    if (max_draft <= 0)
        return 0;
    /* Keep the common prefix, but always decode the last history token again
     * when its row is the last one: its logits are not kept between calls. */
    int32_t keep = tn_draft_prefix(dm->rows, dm->n_rows, history, n);
    if (keep >= n)
        keep = n - 1;
    tn_ctx_kv_truncate(dm->ctx, keep);
    dm->n_rows = keep;
    int rc = append(dm, history + keep, n - keep, err);
    if (rc != TN_OK)
        return rc;
    const bool sample = q && !dm->greedy;
    for (int32_t i = 0; i < max_draft; i++) {
        if (sample) {
            float *qi = q + (size_t)i * (size_t)dm->n_vocab;
            tn_sampler_probs(dm->sampler, dm->logits, qi);
            draft[i] = tn_sampler_sample(dm->sampler, dm->logits);
        } else {
            draft[i] = tn_sampler_sample(dm->sampler, dm->logits);
        }
        if (i + 1 < max_draft && (rc = append(dm, &draft[i], 1, err)) != TN_OK)
            return rc;
    }
    *has_q = sample;
    return max_draft;
}

static int32_t dm_propose(void *self, const int32_t *history, int32_t n, int32_t max_draft,
                          int32_t *draft, tn_error *err) {
    bool has_q;
    return dm_propose_q(self, history, n, max_draft, draft, NULL, &has_q, err);
}

/* The draft samples like the request (penalties aside: any q is exact as
 * long as the draws follow it) from its own generator, seeded from the
 * request's seed so that a request is reproducible. */
static int dm_begin(void *self, const tn_sampler_params *sp, tn_error *err) {
    draft_model *dm = self;
    tn_sampler_params p = *sp;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.seed = sp->seed ^ 0x5eed0fd7a4f7ULL;
    tn_sampler *fresh;
    int rc = tn_sampler_new(dm->n_vocab, p, &fresh, err);
    if (rc != TN_OK)
        return rc;
    tn_sampler_free(dm->sampler);
    dm->sampler = fresh;
    dm->greedy = p.temperature <= 0.0f;
    return TN_OK;
}

static void dm_reset(void *self) {
    draft_model *dm = self;
    tn_ctx_kv_truncate(dm->ctx, 0);
    dm->n_rows = 0;
    tn_sampler_reset(dm->sampler);
}

static int dm_check(void *self, tn_error *err) {
    const draft_model *dm = self;
    return tn_model_weights_check(dm->model, err);
}

static void dm_free(void *self) {
    draft_model *dm = self;
    if (!dm)
        return;
    tn_sampler_free(dm->sampler);
    tn_ctx_free(dm->ctx);
    tn_model_free(dm->model);
    free(dm->rows);
    free(dm->logits);
    free(dm);
}

int tn_drafter_new_model(const tn_model *target, const char *draft_path, tn_drafter_params p,
                         tn_drafter **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_model: out is NULL");
    *out = NULL;
    if (!target || !draft_path)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_model: no target or draft path");
    draft_model *dm = calloc(1, sizeof *dm);
    if (!dm)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    tn_model_params mp = tn_model_default_params();
    mp.load_tokenizer = false;
    mp.cancelled = p.cancelled;
    mp.cancelled_user = p.cancelled_user;
    int rc = tn_model_load(draft_path, mp, &dm->model, err);
    if (rc == TN_OK)
        rc = tn_drafter_check_vocab(target, tn_model_gguf(dm->model), draft_path, true, err);
    if (rc == TN_OK && tn_model_n_vocab(target) != tn_model_n_vocab(dm->model))
        rc = tn_fail(err, TN_ERR_INVALID,
                     "%s: the draft's embedding has %d rows, the target %s %d: a draft model "
                     "must use the target's vocabulary",
                     draft_path, tn_model_n_vocab(dm->model), tn_model_path(target),
                     tn_model_n_vocab(target));
    if (rc == TN_OK) {
        int32_t n_ctx = p.n_ctx;
        if (n_ctx <= 0) {
            n_ctx = tn_model_n_ctx_train(dm->model);
            if (n_ctx > 4096)
                n_ctx = 4096;
        }
        rc = tn_ctx_new(dm->model, n_ctx, p.n_threads, &dm->ctx, err);
    }
    if (rc == TN_OK) {
        dm->n_ctx = tn_ctx_n_ctx(dm->ctx);
        dm->n_vocab = tn_model_n_vocab(dm->model);
        dm->rows = malloc((size_t)dm->n_ctx * sizeof *dm->rows);
        dm->logits = malloc((size_t)dm->n_vocab * sizeof *dm->logits);
        if (!dm->rows || !dm->logits)
            rc = tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    if (rc == TN_OK)
        rc = tn_sampler_new(dm->n_vocab, tn_sampler_default_params(), &dm->sampler, err);
    if (rc != TN_OK) {
        dm_free(dm);
        return rc;
    }
    dm->greedy = true;
    static const tn_drafter_ops ops = {
        .propose = dm_propose,
        .reset = dm_reset,
        .free = dm_free,
    };
    static const tn_drafter_hooks hooks = {
        .begin = dm_begin,
        .propose_q = dm_propose_q,
        .check = dm_check,
    };
    return tn_drafter_wrap("draft model", &ops, &hooks, dm, p.draft_max > 0 ? p.draft_max : 8,
                           target, out, err);
}
