/* Speculative decoding: the drafter object and the verification step.
 *
 * One step verifies [t, d1..dk] (t: the token just emitted, d: the draft)
 * in one tn_ctx_decode with TN_LOGITS_ALL. Row i of that call is bit for bit
 * the row a one-token decode would give (batch invariance), so:
 *   greedy   - the target's pick after t, d1..d(i-1) is sampled from row
 *              i - 1 exactly as the plain loop would; d(i) is kept while it
 *              equals that pick, and the first pick that differs (or the pick
 *              after the last draft) is the next token. The output is the
 *              plain output, token for token;
 *   sampling - speculative rejection sampling (Leviathan et al. 2023, Chen et
 *              al. 2023): d(i) drawn from q is kept with probability
 *              min(1, p(d)/q(d)); the first rejected position draws from
 *              normalize(max(0, p - q)); after k kept drafts the next token
 *              is drawn from p. Each emitted token is then distributed
 *              exactly as p. Deterministic drafters have a one-hot q.
 * Rows of rejected drafts are cut from the KV (a truncation); accepted
 * drafts are queued for the session's loop, which emits them through the
 * same stop checks as any token and cuts their rows again if it stops first,
 * so the KV ends exactly where it would have without speculation.
 */
#include "cpu/tn-cpu.h"
#include "tn-internal.h"
#include "tn-model.h"
#include "tn-spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- the drafter */

tn_drafter_params tn_drafter_default_params(void) {
    tn_drafter_params p;
    memset(&p, 0, sizeof p);
    p.draft_max = 0;
    p.ngram_min = 2;
    p.ngram_max = 5;
    p.n_threads = 0;
    p.n_ctx = 0;
    return p;
}

static int32_t clamp_draft_max(int32_t n, int32_t def) {
    if (n <= 0)
        n = def;
    if (n > TN_SPEC_MAX_DRAFT)
        n = TN_SPEC_MAX_DRAFT;
    return n < 1 ? 1 : n;
}

int tn_drafter_new_cancellable(tn_drafter_new_fn make, const tn_model *target, const char *path,
                               tn_drafter_params p, tn_drafter **out, tn_error *err) {
    tn_load_state outer;
    tn_load_cancel_arm(p.cancelled, p.cancelled_user, &outer);
    int rc = make(target, path, p, out, err);
    if (rc != TN_OK && tn_load_cancelled())
        rc = tn_load_fail_cancelled(err, path);
    tn_load_cancel_disarm(&outer);
    return rc;
}

int tn_drafter_wrap(const char *name, const tn_drafter_ops *ops, const tn_drafter_hooks *hooks,
                    void *self, int32_t draft_max, const tn_model *target, tn_drafter **out,
                    tn_error *err) {
    tn_drafter *d = calloc(1, sizeof *d);
    if (!d) {
        if (ops && ops->free)
            ops->free(self);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    d->name = name;
    d->ops = *ops;
    if (hooks)
        d->hooks = *hooks;
    d->self = self;
    d->draft_max = clamp_draft_max(draft_max, 8);
    d->target = target;
    *out = d;
    return TN_OK;
}

int tn_drafter_set_hidden_ids(tn_drafter *d, const int32_t *ids, int32_t n, tn_error *err) {
    int32_t *copy = malloc((size_t)(n > 0 ? n : 1) * sizeof *copy);
    if (!copy)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    if (n > 0)
        memcpy(copy, ids, (size_t)n * sizeof *copy);
    free(d->hidden_ids);
    d->hidden_ids = copy;
    d->n_hidden_ids = n;
    return TN_OK;
}

int tn_drafter_new_custom(const tn_drafter_ops *ops, void *self, int32_t draft_max,
                          tn_drafter **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_custom: out is NULL");
    *out = NULL;
    if (!ops || !ops->propose)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_custom: no propose function");
    return tn_drafter_wrap("custom", ops, NULL, self, draft_max, NULL, out, err);
}

void tn_drafter_free(tn_drafter *d) {
    if (!d)
        return;
    if (d->ops.free)
        d->ops.free(d->self);
    free(d->hidden_ids);
    free(d);
}

void tn_drafter_reset(tn_drafter *d) {
    if (d && d->ops.reset)
        d->ops.reset(d->self);
}

const char *tn_drafter_name(const tn_drafter *d) { return d ? d->name : "none"; }
int32_t tn_drafter_draft_max(const tn_drafter *d) { return d ? d->draft_max : 0; }
int32_t tn_drafter_block_size(const tn_drafter *d) { return d ? d->block_size : 0; }

/* Printable form of a token text for a message (n >= 8). */
static void quote(char *dst, size_t n, tn_str s) {
    size_t o = 0;
    uint64_t i = 0;
    for (; i < s.len; i++) {
        const unsigned char c = (unsigned char)s.ptr[i];
        const bool esc = c < 0x20 || c == 0x7f;
        if (o + (esc ? 4 : 1) + 4 > n) /* room for "..." and the NUL */
            break;
        if (esc)
            o += (size_t)snprintf(dst + o, n - o, "\\x%02x", c);
        else
            dst[o++] = (char)c;
    }
    if (i < s.len) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

int tn_drafter_guard_init(tn_drafter_guard *g, const tn_gguf *draft, const tn_model *target,
                          tn_error *err) {
    g->spans = NULL;
    g->n_spans = 0;
    g->fault = 0;
    int n = 0;
    tn_read_span *own = tn_gguf_read_spans(draft, &n);
    const int n_target = target ? target->n_read_spans : 0;
    tn_read_span *all = own ? realloc(own, ((size_t)n + (size_t)n_target) * sizeof *all +
                                               sizeof *all)
                            : NULL;
    if (!all) {
        free(own);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n_target; i++)
        all[n + i] = target->read_spans[i];
    g->spans = all;
    g->n_spans = n + n_target;
    return TN_OK;
}

void tn_drafter_guard_free(tn_drafter_guard *g) {
    free(g->spans);
    g->spans = NULL;
    g->n_spans = 0;
}

int tn_drafter_guard_check(const tn_drafter_guard *g, tn_error *err) {
    if (g->fault > 0 && g->fault <= g->n_spans)
        return tn_fail_shrank(err, g->spans[g->fault - 1].path);
    return TN_OK;
}

int tn_drafter_weights_check(const tn_drafter *d, tn_error *err) {
    return d && d->hooks.check ? d->hooks.check(d->self, err) : TN_OK;
}

int tn_drafter_guard_run(tn_drafter_guard *g, tn_cpu *cpu, void (*fn)(void *arg, int ith, int nth),
                         void *arg, tn_error *err) {
    const int gone = tn_drafter_guard_check(g, err);
    if (gone != TN_OK)
        return gone;
    if (g->n_spans == 0) { /* in memory: nothing can shrink */
        fn(arg, 0, 1);
        return TN_OK;
    }
    const int hit = tn_guarded_step(cpu, g->spans, g->n_spans, fn, arg);
    if (hit < 0)
        return TN_OK;
    g->fault = hit + 1;
    return tn_fail_shrank(err, g->spans[hit].path);
}

int tn_drafter_check_vocab(const tn_model *target, const tn_gguf *draft, const char *dp,
                           bool require, tn_error *err) {
    const char *tp = tn_model_path(target);
    const tn_gguf_value *ta = tn_gguf_find(tn_model_gguf(target), "tokenizer.ggml.tokens");
    const tn_gguf_value *da = tn_gguf_find(draft, "tokenizer.ggml.tokens");
    const bool t_ok = ta && ta->type == TN_GGUF_ARRAY && ta->v.arr.type == TN_GGUF_STRING;
    const bool d_ok = da && da->type == TN_GGUF_ARRAY && da->v.arr.type == TN_GGUF_STRING;
    if (t_ok && d_ok) {
        const uint64_t n = ta->v.arr.n < da->v.arr.n ? ta->v.arr.n : da->v.arr.n;
        for (uint64_t i = 0; i < n; i++) {
            tn_str a = ta->v.arr.items[i].v.str, b = da->v.arr.items[i].v.str;
            if (a.len != b.len || memcmp(a.ptr, b.ptr, (size_t)a.len) != 0) {
                char qa[64], qb[64];
                quote(qa, sizeof qa, a);
                quote(qb, sizeof qb, b);
                return tn_fail(err, TN_ERR_INVALID,
                               "%s: token %llu is '%s' but '%s' in the target %s: a draft "
                               "must use the target's vocabulary",
                               dp, (unsigned long long)i, qb, qa, tp);
            }
        }
        if (ta->v.arr.n != da->v.arr.n) {
            const bool draft_longer = da->v.arr.n > ta->v.arr.n;
            char qx[64];
            quote(qx, sizeof qx, (draft_longer ? da : ta)->v.arr.items[n].v.str);
            if (draft_longer)
                return tn_fail(err, TN_ERR_INVALID,
                               "%s: the vocabularies differ from token %llu on ('%s' exists only "
                               "in the draft): the draft has %llu tokens, the target %s %llu",
                               dp, (unsigned long long)n, qx, (unsigned long long)da->v.arr.n, tp,
                               (unsigned long long)ta->v.arr.n);
            return tn_fail(err, TN_ERR_INVALID,
                           "%s: the vocabularies differ from token %llu on ('%s' exists only in "
                           "the target): the draft has %llu tokens, the target %s %llu",
                           dp, (unsigned long long)n, qx, (unsigned long long)da->v.arr.n, tp,
                           (unsigned long long)ta->v.arr.n);
        }
    } else if (require && t_ok != d_ok) {
        return tn_fail(err, TN_ERR_INVALID,
                       "%s: only one of the draft and the target (%s) carries a vocabulary, so "
                       "they cannot be checked to match",
                       dp, tp);
    }
    return TN_OK;
}

/* ------------------------------------------------- the verification state */

struct tn_spec {
    int32_t n_vocab;
    tn_drafter *d;        /* bound for the current request; NULL: off */
    int32_t draft_max;    /* effective for the request */
    int32_t k_next;       /* tokens to ask for next (adapts within a request) */
    bool greedy;
    int32_t rows_alloc;   /* rows of logits allocated */
    float *logits;        /* [rows_alloc][n_vocab] rows of a verification */
    float *q;             /* [rows_alloc - 1][n_vocab] draft distributions */
    float *p;             /* [n_vocab] target distribution of one row */
    float *scratch;       /* [n_vocab] */
    int32_t block[TN_SPEC_MAX_DRAFT + 1]; /* [t, d1..dk] */
    /* Tokens the step produced, in order: q_drafted accepted drafts, then
     * the target's next token. */
    int32_t queue[TN_SPEC_MAX_DRAFT + 1];
    int32_t q_len, q_head, q_drafted;
    uint8_t *flags;
    int32_t n_flags, cap_flags;
    bool last_drafted;
    int32_t last_row; /* queue index (= logits row) of the token popped last; -1: none */
};

int tn_spec_new(int32_t n_vocab, tn_spec **out, tn_error *err) {
    *out = NULL;
    tn_spec *sp = calloc(1, sizeof *sp);
    if (!sp)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    sp->n_vocab = n_vocab;
    sp->p = malloc((size_t)n_vocab * sizeof *sp->p);
    sp->scratch = malloc((size_t)n_vocab * sizeof *sp->scratch);
    if (!sp->p || !sp->scratch) {
        tn_spec_free(sp);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    *out = sp;
    return TN_OK;
}

void tn_spec_free(tn_spec *sp) {
    if (!sp)
        return;
    free(sp->logits);
    free(sp->q);
    free(sp->p);
    free(sp->scratch);
    free(sp->flags);
    free(sp);
}

bool tn_spec_active(const tn_spec *sp) { return sp && sp->d; }

static int ensure_rows(tn_spec *sp, int32_t rows, tn_error *err) {
    if (rows <= sp->rows_alloc)
        return TN_OK;
    const size_t V = (size_t)sp->n_vocab;
    float *l = realloc(sp->logits, (size_t)rows * V * sizeof *l);
    if (!l)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for %d rows of logits", rows);
    sp->logits = l;
    float *q = realloc(sp->q, (size_t)rows * V * sizeof *q);
    if (!q)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for %d draft distributions", rows);
    sp->q = q;
    sp->rows_alloc = rows;
    return TN_OK;
}

/* A drafter made for one model also runs with another of the same shape
 * (its own weights are the ones it was made with); anything else is refused. */
static int check_fits(const tn_drafter *d, const tn_model *m, tn_error *err) {
    if (!d->target || d->target == m)
        return TN_OK;
    if (tn_model_n_vocab(d->target) != tn_model_n_vocab(m) ||
        tn_model_n_embd(d->target) != tn_model_n_embd(m) ||
        tn_model_n_layer(d->target) != tn_model_n_layer(m))
        return tn_fail(err, TN_ERR_INVALID,
                       "the %s drafter was made for %s (%d tokens, width %d, %d layers), not for "
                       "%s (%d tokens, width %d, %d layers)",
                       d->name, tn_model_path(d->target), tn_model_n_vocab(d->target),
                       tn_model_n_embd(d->target), tn_model_n_layer(d->target), tn_model_path(m),
                       tn_model_n_vocab(m), tn_model_n_embd(m), tn_model_n_layer(m));
    return TN_OK;
}

static int feed(tn_spec *sp, int32_t pos0, const int32_t *tokens, int32_t n, const float *hidden,
                tn_error *err) {
    tn_drafter *d = sp->d;
    return d->hooks.observe(d->self, pos0, tokens, n, hidden, err);
}

/* Hidden states of rows [from, n) that the drafter lacks, computed in a
 * scratch context over the same tokens (identical rows: batch invariance),
 * so the session's KV is never written. Costs one prefill of n rows, once:
 * the drafter keeps what it was given for as long as the history matches. */
static int backfill(tn_spec *sp, tn_ctx *ctx, const int32_t *tokens, int32_t from, int32_t n,
                    tn_error *err) {
    tn_ctx *scratch = NULL;
    int rc = tn_ctx_new(tn_ctx_model(ctx), n, tn_ctx_n_threads(ctx), &scratch, err);
    if (rc == TN_OK)
        rc = tn_ctx_capture_hidden(scratch, sp->d->hidden_ids, sp->d->n_hidden_ids, err);
    enum { CHUNK = 64 };
    for (int32_t done = 0; rc == TN_OK && done < n;) {
        if (tn_ctx_cancelled(ctx)) {
            rc = tn_fail(err, TN_ERR_CANCELLED, "cancelled");
            break;
        }
        const int32_t m = n - done < CHUNK ? n - done : CHUNK;
        rc = tn_ctx_decode(scratch, tokens + done, m, TN_LOGITS_NONE, NULL, err);
        if (rc == TN_OK && done + m > from) {
            int32_t rows;
            const float *h = tn_ctx_hidden(scratch, &rows);
            const int32_t skip = from > done ? from - done : 0;
            const size_t row = (size_t)sp->d->n_hidden_ids * (size_t)tn_model_n_embd(tn_ctx_model(ctx));
            rc = feed(sp, done + skip, tokens + done + skip, m - skip, h + (size_t)skip * row, err);
        }
        done += m;
    }
    tn_ctx_free(scratch);
    return rc;
}

int tn_spec_begin(tn_spec *sp, tn_ctx *ctx, const tn_gen_params *g, const int32_t *kv_tokens,
                  int32_t n_kv, tn_error *err) {
    sp->d = NULL;
    sp->q_len = sp->q_head = sp->q_drafted = 0;
    sp->n_flags = 0;
    sp->last_drafted = false;
    sp->last_row = -1;
    tn_drafter *d = g->drafter;
    if (!d)
        return TN_OK;
    const tn_model *m = tn_ctx_model(ctx);
    int rc = check_fits(d, m, err);
    if (rc != TN_OK)
        return rc;
    sp->draft_max = clamp_draft_max(g->draft_max, d->draft_max);
    sp->k_next = sp->draft_max;
    sp->greedy = g->sampler.temperature <= 0.0f;
    if ((rc = ensure_rows(sp, sp->draft_max + 1, err)) != TN_OK)
        return rc;
    if (d->hooks.begin && (rc = d->hooks.begin(d->self, &g->sampler, err)) != TN_OK)
        return rc;
    sp->d = d;
    if (d->hooks.bind)
        d->hooks.bind(d->self, ctx);
    if (d->n_hidden_ids > 0 && d->hooks.observe) {
        rc = tn_ctx_capture_hidden(ctx, d->hidden_ids, d->n_hidden_ids, err);
        int32_t known = d->hooks.known ? d->hooks.known(d->self, kv_tokens, n_kv) : 0;
        if (rc == TN_OK && known < n_kv)
            rc = backfill(sp, ctx, kv_tokens, known, n_kv, err);
        if (rc != TN_OK) {
            tn_spec_end(sp, ctx);
            return rc;
        }
    }
    return TN_OK;
}

void tn_spec_end(tn_spec *sp, tn_ctx *ctx) {
    if (sp->d && sp->d->n_hidden_ids > 0)
        tn_ctx_capture_hidden(ctx, NULL, 0, NULL);
    if (sp->d && sp->d->hooks.bind)
        sp->d->hooks.bind(sp->d->self, NULL);
    sp->d = NULL;
}

int tn_spec_observe(tn_spec *sp, tn_ctx *ctx, int32_t pos0, const int32_t *tokens, int32_t n,
                    tn_error *err) {
    if (!sp || !sp->d || sp->d->n_hidden_ids == 0 || !sp->d->hooks.observe || n <= 0)
        return TN_OK;
    int32_t rows;
    const float *h = tn_ctx_hidden(ctx, &rows);
    if (!h || rows < n)
        return tn_fail(err, TN_ERR_INVALID,
                       "internal error: %d hidden-state rows captured, %d needed", rows, n);
    return feed(sp, pos0, tokens, n, h, err);
}

/* ------------------------------------------------------------- acceptance */

bool tn_spec_accept_or_resample(const float *p, const float *q, int32_t n_vocab, int32_t d,
                                tn_sampler *sampler, float *scratch, int32_t *out) {
    const double u = tn_sampler_uniform(sampler);
    const double qd = q ? (double)q[d] : 1.0;
    if (u * qd < (double)p[d])
        return true;
    /* Rejected: the rest of the mass is where p exceeds q. */
    double z = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        const double qt = q ? (double)q[t] : (t == d ? 1.0 : 0.0);
        const double r = (double)p[t] - qt;
        scratch[t] = r > 0 ? (float)r : 0.0f;
        z += scratch[t];
    }
    const float *dist = scratch;
    if (!(z > 0)) {
        /* p <= q everywhere (p == q up to rounding): p itself is right. */
        dist = p;
        z = 0;
        for (int32_t t = 0; t < n_vocab; t++)
            z += p[t];
    }
    const double target = tn_sampler_uniform(sampler) * z;
    double cum = 0;
    int32_t last = -1;
    for (int32_t t = 0; t < n_vocab; t++) {
        if (dist[t] <= 0)
            continue;
        last = t;
        cum += dist[t];
        if (target < cum) {
            *out = t;
            return false;
        }
    }
    *out = last >= 0 ? last : d; /* rounding left cum just under z */
    return false;
}

/* --------------------------------------------------------------- the step */

static int check_draft(const tn_spec *sp, const int32_t *draft, int32_t n, int32_t max,
                       tn_error *err) {
    if (n > max)
        return tn_fail(err, TN_ERR_INVALID,
                       "the %s drafter returned %d tokens; at most %d were asked for",
                       sp->d->name, n, max);
    for (int32_t i = 0; i < n; i++)
        if (draft[i] < 0 || draft[i] >= sp->n_vocab)
            return tn_fail(err, TN_ERR_INVALID,
                           "the %s drafter proposed token %d, outside the vocabulary (0..%d)",
                           sp->d->name, draft[i], sp->n_vocab - 1);
    return TN_OK;
}

static void queue_set(tn_spec *sp, const int32_t *accepted, int32_t n_accepted, int32_t next) {
    if (n_accepted > 0)
        memcpy(sp->queue, accepted, (size_t)n_accepted * sizeof *accepted);
    sp->queue[n_accepted] = next;
    sp->q_drafted = n_accepted;
    sp->q_len = n_accepted + 1;
    sp->q_head = 0;
}

int tn_spec_step(tn_spec *sp, tn_ctx *ctx, tn_sampler *sampler, const int32_t *history,
                 int32_t n_kv, int32_t budget, tn_session_stats *st, tn_error *err) {
    tn_drafter *d = sp->d;
    const size_t V = (size_t)sp->n_vocab;
    const int32_t token = history[n_kv];
    int32_t k = sp->k_next;
    const int32_t room = tn_ctx_n_ctx(ctx) - n_kv - 1; /* rows left after token's */
    if (k > room)
        k = room;
    if (k > budget)
        k = budget;
    int32_t nd = 0;
    bool has_q = false;
    int32_t *draft = sp->block + 1;
    if (k > 0) {
        if (d->hooks.propose_q)
            nd = d->hooks.propose_q(d->self, history, n_kv + 1, k, draft, sp->greedy ? NULL : sp->q,
                                    &has_q, err);
        else
            nd = d->ops.propose(d->self, history, n_kv + 1, k, draft, err);
        if (nd < 0)
            return nd;
        int rc = check_draft(sp, draft, nd, k, err);
        if (rc != TN_OK)
            return rc;
        /* TERN_SPEC_TRACE=1: every draft on stderr, to compare a drafter
         * with another implementation's (tools/compare/mtp-llamacpp.sh). */
        const char *trace = getenv("TERN_SPEC_TRACE");
        if (trace && *trace == '1') {
            fprintf(stderr, "spec trace: %s at pos %d after %d:", d->name, n_kv, token);
            for (int32_t i = 0; i < nd; i++)
                fprintf(stderr, " %d", draft[i]);
            fputc('\n', stderr);
        }
    }
    sp->block[0] = token;
    const int32_t n_rows = nd + 1;
    int rc = tn_ctx_decode(ctx, sp->block, n_rows, nd > 0 ? TN_LOGITS_ALL : TN_LOGITS_LAST,
                           sp->logits, err);
    if (rc != TN_OK)
        return rc;
    int32_t j = 0, next = -1;
    if (nd > 0) {
        st->drafted += nd;
        st->verify_steps++;
    }
    for (; j < nd; j++) {
        const float *row = sp->logits + (size_t)j * V;
        if (sp->greedy) {
            const int32_t pick = tn_sampler_sample(sampler, row);
            if (pick != draft[j]) {
                next = pick;
                break;
            }
        } else {
            tn_sampler_probs(sampler, row, sp->p);
            if (!tn_spec_accept_or_resample(sp->p, has_q ? sp->q + (size_t)j * V : NULL,
                                            sp->n_vocab, draft[j], sampler, sp->scratch, &next))
                break;
        }
        /* Kept: it is in the sequence now (penalties see it from the next row on). */
        tn_sampler_accept(sampler, draft[j]);
    }
    if (j == nd)
        next = tn_sampler_sample(sampler, sp->logits + (size_t)nd * V);
    if (j < nd) {
        rc = tn_ctx_kv_truncate(ctx, n_kv + 1 + j);
        if (rc != TN_OK)
            return tn_fail(err, rc, "internal error: cannot drop the rejected draft rows");
    }
    if (nd > 0) {
        st->accepted += j;
        if (d->ops.accepted)
            d->ops.accepted(d->self, j);
        /* Every verified row costs (c(B) grows with B), so drafts get longer
         * while they are fully accepted and shorter after a rejection (the
         * schedule of Hugging Face's assisted generation). It depends only
         * on this request's past: a seeded request stays reproducible. */
        if (j == nd)
            sp->k_next = sp->k_next + 2 < sp->draft_max ? sp->k_next + 2 : sp->draft_max;
        else if (sp->k_next > 1)
            sp->k_next--;
    }
    rc = tn_spec_observe(sp, ctx, n_kv, sp->block, j + 1, err);
    if (rc != TN_OK)
        return rc;
    queue_set(sp, draft, j, next);
    return TN_OK;
}

int tn_spec_pop(tn_spec *sp, int32_t *token) {
    int kind = TN_SPEC_NONE;
    sp->last_row = -1;
    if (sp->q_head < sp->q_len) {
        kind = sp->q_head < sp->q_drafted ? TN_SPEC_DRAFTED : TN_SPEC_NEXT;
        /* queue[i] was picked from row i: drafts 0..j-1 from the rows
         * that verified them, the next token from row j */
        sp->last_row = sp->q_head;
        *token = sp->queue[sp->q_head++];
    }
    sp->last_drafted = kind == TN_SPEC_DRAFTED;
    if (sp->n_flags == sp->cap_flags) {
        int32_t cap = sp->cap_flags ? sp->cap_flags * 2 : 256;
        uint8_t *f = realloc(sp->flags, (size_t)cap);
        if (!f)
            return kind; /* the flags are a nicety; generation goes on */
        sp->flags = f;
        sp->cap_flags = cap;
    }
    sp->flags[sp->n_flags++] = sp->last_drafted ? 1 : 0;
    return kind;
}

bool tn_spec_last_drafted(const tn_spec *sp) { return sp && sp->last_drafted; }

const float *tn_spec_last_row(const tn_spec *sp) {
    if (!sp || sp->last_row < 0)
        return NULL;
    return sp->logits + (size_t)sp->last_row * (size_t)sp->n_vocab;
}

const uint8_t *tn_spec_flags(const tn_spec *sp, int32_t *n) {
    if (n)
        *n = sp ? sp->n_flags : 0;
    return sp ? sp->flags : NULL;
}

void tn_spec_finish(tn_spec *sp, int32_t n_generated) {
    if (sp && n_generated >= 0 && n_generated < sp->n_flags)
        sp->n_flags = n_generated;
}
