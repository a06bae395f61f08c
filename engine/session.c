/* Sessions: a pinned system prompt, single-turn requests restored exactly to
 * it, and multi-turn chat with prefix reuse.
 *
 * The KV cache is a stack of rows. The session mirrors it with the token of
 * every row (kv_tokens), which is what makes exact restore cheap and
 * checkable: identical tokens at identical positions give bit-identical rows
 * (the forward pass is batch invariant), so "the pin is in the KV" is a
 * comparison of token ids, and restoring it is a truncation.
 *
 * The pinned rows are protected by construction: a request only ever cuts the
 * KV back to n_pin and appends (tn_ctx_decode writes at kv_len and above),
 * and the token that ends an answer is sampled but never decoded. After every
 * request the session checks that the KV is exactly the pin again. Only
 * pinning and multi-turn chat may cut below n_pin; the next request then
 * restores the pin (from the snapshot on disk, or by prefilling it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tn-internal.h"
#include "tn-session.h"
#include "tn-spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Prefill runs in chunks of this many tokens, so that progress can be
 * reported and cancellation honoured between them. The result does not
 * depend on the chunking (batch invariance). */
#define PREFILL_CHUNK 64

/* Pin tokens (to prefill) below which prefilling beats reading a snapshot:
 * shorter pins are neither saved nor loaded. */
#define SNAPSHOT_MIN_TOKENS 16

typedef enum pin_kind {
    PIN_NONE = 0,   /* nothing pinned: the text API pins the empty system part first */
    PIN_TEXT = 1,   /* pinned through tn_session_pin (pin_text NULL: no system prompt) */
    PIN_TOKENS = 2, /* pinned through tn_session_pin_tokens */
} pin_kind;

struct tn_session {
    const tn_model *model;
    tn_ctx *ctx;
    int32_t n_ctx;
    int32_t n_vocab;
    tn_session_params params; /* strings point at the copies below */
    char *stop_copies[TN_SESSION_MAX_STOP];
    char *cache_dir;          /* NULL: snapshots off */

    /* Text: tokenizer and chat format (NULL tokenizer: token APIs only). */
    const tn_tokenizer *tok; /* the model's */
    tn_chat_kind chat_kind;
    int32_t eos; /* end of generation without a tokenizer */

    /* Mirror of the KV cache: kv_tokens[i] is the token of row i. */
    int32_t *kv_tokens; /* [n_ctx] */
    /* 0 for a text row; for an image row (kv_tokens holds the image
     * placeholder token there) a hash of the image's embeddings and the row's
     * index in it, so that a row matches only the same image row. Rows at
     * and beyond n_kv are always 0. */
    uint64_t *kv_keys; /* [n_ctx] */
    int32_t n_kv;

    /* The pin. */
    pin_kind pin_kind;
    char *pin_text;      /* PIN_TEXT: the system prompt, NULL for none */
    int32_t *pin_tokens; /* [n_pin] */
    int32_t n_pin;
    tn_pin_info info;

    /* Generation. */
    tn_sampler *sampler;
    float *logits; /* [n_vocab] of the last decoded row */
    /* During a token callback: the row its token was picked from (s->logits
     * or a verification row) and the token; NULL outside (logprobs). */
    const float *cb_row;
    int32_t cb_token;
    size_t cb_dropped; /* tn_session_token_dropped */
    tn_spec *spec; /* speculative decoding (spec.c): the request's drafter, if any */
    /* TN_CONSTRAIN_JSON_OBJECT: the answer's text so far, as the sampler's
     * token filter sees it (json_allow). */
    bool json_on;
    tn_json_prefix json;
    /* TN_CONSTRAIN_JSON_SCHEMA: the same against the request's schema
     * (json_on set too); NULL otherwise. */
    const tn_json_schema *schema;
    tn_json_schema_state jstate;
    /* The tokens json_allow can accept, by first byte (first_start[257],
     * first_tokens), built at the first constrained request: the
     * sampler's whole-vocabulary check tries only the groups whose byte can
     * come next (tn_sampler_set_allow_groups). */
    int32_t *first_start;
    int32_t *first_tokens;
    atomic_bool cancel;
};

/* --------------------------------------------------------------- helpers */

/* A warning is a tn_error made by tn_fail, so that its format and arguments
 * reach the caller, who translates it as an error (docs/TRANSLATING.md). */
static void warn(tn_session *s, const tn_error *w) {
    if (s->params.warn)
        s->params.warn(w, s->params.warn_user);
    else
        fprintf(stderr, "tern: %s\n", w->message);
}

static bool cancelled(const tn_session *s) {
    return atomic_load(&((tn_session *)s)->cancel);
}

/* Rows of the KV that hold exactly tokens[0..n) (keys NULL: text rows). */
static int32_t kv_prefix(const tn_session *s, const int32_t *tokens, const uint64_t *keys,
                         int32_t n) {
    const int32_t m = n < s->n_kv ? n : s->n_kv;
    int32_t i = 0;
    while (i < m && s->kv_tokens[i] == tokens[i] && s->kv_keys[i] == (keys ? keys[i] : 0))
        i++;
    return i;
}

/* Cuts the KV (and its mirror) back to n rows. */
static void kv_cut(tn_session *s, int32_t n) {
    if (n < s->n_kv) {
        tn_ctx_kv_truncate(s->ctx, n);
        memset(s->kv_keys + n, 0, (size_t)(s->n_kv - n) * sizeof(uint64_t));
        s->n_kv = n;
    }
}

/* Rows per step of a scoring prefill (tn_gen_params.prompt_logprobs). */
static int32_t score_rows(int32_t n_vocab) {
    const int32_t rows = TN_PROMPT_LOGITS_FLOATS / (n_vocab > 0 ? n_vocab : 1);
    return rows < 1 ? 1 : rows > PREFILL_CHUNK ? PREFILL_CHUNK : rows;
}

/* Appends tokens to the KV in chunks; the logits of the last row go to
 * s->logits when want_logits. With score (a request's prompt_logprobs),
 * every row's logits are computed, a few rows at a time into one buffer,
 * and each is reduced at once to the next token's entry: a long prompt
 * never holds more than TN_PROMPT_LOGITS_FLOATS of them. On failure the
 * rows of the chunks that were done stay (the mirror says so) and the error
 * is returned. */
static int kv_append_scored(tn_session *s, const int32_t *tokens, int32_t n, bool want_logits,
                            const tn_gen_params *score, tn_session_progress_cb progress,
                            void *user, tn_error *err) {
    const int32_t chunk = score ? score_rows(s->n_vocab) : PREFILL_CHUNK;
    float *rows = NULL;
    if (score && !(rows = malloc((size_t)chunk * (size_t)s->n_vocab * sizeof(float))))
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for the prompt's log-probabilities");
    int rc = TN_OK;
    for (int32_t done = 0; done < n;) {
        if (cancelled(s)) {
            rc = tn_fail(err, TN_ERR_CANCELLED, "cancelled");
            break;
        }
        const int32_t m = n - done < chunk ? n - done : chunk;
        const bool last = done + m == n;
        rc = tn_ctx_decode(s->ctx, tokens + done, m,
                           score                 ? TN_LOGITS_ALL
                           : last && want_logits ? TN_LOGITS_LAST
                                                 : TN_LOGITS_NONE,
                           score ? rows : s->logits, err);
        if (rc != TN_OK)
            break;
        /* A drafter that reads hidden states (DFlash) sees every row. */
        if ((rc = tn_spec_observe(s->spec, s->ctx, s->n_kv, tokens + done, m, err)) != TN_OK) {
            tn_ctx_kv_truncate(s->ctx, s->n_kv);
            break;
        }
        for (int32_t r = 0; score && r < m && rc == TN_OK; r++) {
            const float *row = rows + (size_t)r * (size_t)s->n_vocab;
            const int32_t i = done + r + 1; /* the token this row predicts */
            if (i < n) {
                tn_token_logprob top[TN_TOP_LOGPROBS_MAX];
                float lp = 0;
                const int got = tn_logprobs(row, s->n_vocab, tokens[i], score->prompt_top, &lp,
                                            top, err);
                if (got < 0)
                    rc = got;
                else
                    score->prompt_logprobs(i, tokens[i], lp, top, got,
                                           score->prompt_logprobs_user);
            } else if (want_logits) {
                memcpy(s->logits, row, (size_t)s->n_vocab * sizeof(float));
            }
        }
        if (rc != TN_OK) {
            tn_ctx_kv_truncate(s->ctx, s->n_kv);
            break;
        }
        memcpy(s->kv_tokens + s->n_kv, tokens + done, (size_t)m * sizeof(int32_t));
        s->n_kv += m;
        done += m;
        if (progress && !progress(done, n, user) && !last) {
            atomic_store(&s->cancel, true);
            rc = tn_fail(err, TN_ERR_CANCELLED, "cancelled");
            break;
        }
    }
    free(rows);
    return rc;
}

static int kv_append(tn_session *s, const int32_t *tokens, int32_t n, bool want_logits,
                     tn_session_progress_cb progress, void *user, tn_error *err) {
    return kv_append_scored(s, tokens, n, want_logits, NULL, progress, user, err);
}

static bool pin_in_kv(const tn_session *s) {
    return s->n_kv >= s->n_pin && kv_prefix(s, s->pin_tokens, NULL, s->n_pin) == s->n_pin;
}

/* A prompt with images: the token array holds the image placeholder token
 * at image rows; keys says which image row each is (0: text); spans give
 * the embeddings of each image's rows. */
typedef struct img_span {
    int32_t start, n;  /* rows [start, start + n) of the prompt */
    const float *embd; /* [n][n_embd] */
} img_span;

typedef struct prompt_plan {
    const uint64_t *keys;
    const img_span *spans; /* in prompt order */
    int32_t n_spans;
    int32_t n_image_rows;
} prompt_plan;

typedef struct progress_shift {
    tn_session_progress_cb cb;
    void *user;
    int32_t offset, total;
} progress_shift;

static bool shifted_progress(int32_t done, int32_t total, void *p) {
    (void)total;
    const progress_shift *ps = p;
    return ps->cb(ps->offset + done, ps->total, ps->user);
}

/* Whether an image span attends both ways: Gemma 3 always; Gemma 4 except
 * E2B and E4B (text widths 1536 and 2560), which llama.cpp decodes causally
 * (mtmd_decode_use_non_causal). */
static bool image_bidirectional(const tn_session *s) {
    if (tn_model_arch(s->model) != TN_ARCH_GEMMA4)
        return true;
    const int32_t E = tn_model_n_embd(s->model);
    return E != 1536 && E != 2560;
}

/* kv_append for rows [from, n) of a prompt with images: text runs go
 * through kv_append, each image span through one bidirectional pass of its
 * embeddings. `from` never falls inside a span (callers cut the KV back to
 * a span's start). Same failure contract as kv_append. */
static int kv_append_plan(tn_session *s, const int32_t *tokens, int32_t from, int32_t n,
                          const prompt_plan *plan, bool want_logits,
                          tn_session_progress_cb progress, void *user, tn_error *err) {
    const int32_t total = n - from;
    progress_shift ps = {progress, user, 0, total};
    int32_t at = from, si = 0;
    while (at < n) {
        while (si < plan->n_spans && plan->spans[si].start < at)
            si++; /* reused from the KV */
        const int32_t text_end = si < plan->n_spans ? plan->spans[si].start : n;
        int rc;
        if (text_end > at) {
            ps.offset = at - from;
            rc = kv_append(s, tokens + at, text_end - at, want_logits && text_end == n,
                           progress ? shifted_progress : NULL, &ps, err);
            if (rc != TN_OK)
                return rc;
            at = text_end;
            continue;
        }
        const img_span *sp = &plan->spans[si];
        if (cancelled(s))
            return tn_fail(err, TN_ERR_CANCELLED, "cancelled");
        const bool last = at + sp->n == n;
        rc = tn_ctx_decode_embd(s->ctx, sp->embd, sp->n, image_bidirectional(s),
                                last && want_logits ? TN_LOGITS_LAST : TN_LOGITS_NONE, s->logits,
                                err);
        if (rc != TN_OK)
            return rc;
        if ((rc = tn_spec_observe(s->spec, s->ctx, s->n_kv, tokens + at, sp->n, err)) != TN_OK) {
            tn_ctx_kv_truncate(s->ctx, s->n_kv);
            return rc;
        }
        memcpy(s->kv_tokens + s->n_kv, tokens + at, (size_t)sp->n * sizeof(int32_t));
        memcpy(s->kv_keys + s->n_kv, plan->keys + at, (size_t)sp->n * sizeof(uint64_t));
        s->n_kv += sp->n;
        at += sp->n;
        si++;
        if (progress && !progress(at - from, total, user) && at < n) {
            atomic_store(&s->cancel, true);
            return tn_fail(err, TN_ERR_CANCELLED, "cancelled");
        }
    }
    return TN_OK;
}

/* ---------------------------------------------------------------- params */

tn_gen_params tn_gen_default_params(void) {
    tn_gen_params g;
    memset(&g, 0, sizeof g);
    g.sampler = tn_sampler_default_params();
    g.max_tokens = 0;
    g.thinking = true;
    return g;
}

tn_session_params tn_session_default_params(void) {
    tn_session_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 1024;
    p.n_threads = 0;
    p.gen = tn_gen_default_params();
    p.pin_cache_dir = NULL;
    p.pin_cache_max_bytes = 0;
    return p;
}

const char *tn_stop_reason_name(tn_stop_reason r) {
    switch (r) {
    case TN_STOP_NONE: return "none";
    case TN_STOP_EOG: return "eog";
    case TN_STOP_STRING: return "stop string";
    case TN_STOP_LIMIT: return "limit";
    case TN_STOP_CONTEXT_FULL: return "context full";
    case TN_STOP_CALLBACK: return "callback";
    case TN_STOP_CANCELLED: return "cancelled";
    }
    return "?";
}

static int check_gen(const tn_gen_params *g, int32_t n_vocab, tn_error *err) {
    if (g->n_stop < 0 || g->n_stop > TN_SESSION_MAX_STOP || g->n_stop_tokens < 0 ||
        g->n_stop_tokens > TN_SESSION_MAX_STOP)
        return tn_fail(err, TN_ERR_INVALID, "at most %d stop strings and %d stop tokens",
                       TN_SESSION_MAX_STOP, TN_SESSION_MAX_STOP);
    for (int32_t i = 0; i < g->n_stop; i++)
        if (!g->stop[i] || !g->stop[i][0])
            return tn_fail(err, TN_ERR_INVALID, "stop string %d is empty", i);
    for (int32_t i = 0; i < g->n_stop_tokens; i++)
        if (g->stop_tokens[i] < 0 || g->stop_tokens[i] >= n_vocab)
            return tn_fail(err, TN_ERR_INVALID, "stop token %d is outside the vocabulary (0..%d)",
                           g->stop_tokens[i], n_vocab - 1);
    if (g->constrain != TN_CONSTRAIN_NONE && g->constrain != TN_CONSTRAIN_JSON_OBJECT &&
        g->constrain != TN_CONSTRAIN_JSON_SCHEMA)
        return tn_fail(err, TN_ERR_INVALID, "unknown output constraint %d", g->constrain);
    if (g->constrain == TN_CONSTRAIN_JSON_SCHEMA && !g->schema)
        return tn_fail(err, TN_ERR_INVALID, "JSON schema output without a schema");
    /* A stop string or token would end a constrained answer wherever it
     * falls, before the object closes: refused, not honoured or ignored. */
    if (g->constrain != TN_CONSTRAIN_NONE && (g->n_stop > 0 || g->n_stop_tokens > 0))
        return tn_fail(err, TN_ERR_INVALID,
                       "JSON output cannot have stop strings or stop tokens: they would cut the "
                       "JSON short; remove them");
    /* Before the prefill: the sampler's own check (sampler_begin) comes
     * after it, seconds of work later for a long prompt. */
    return tn_logit_bias_check(g->logit_bias, g->n_logit_bias, n_vocab, err);
}

/* ------------------------------------------------------------ life cycle */

static void load_text_layer(tn_session *s) {
    const tn_gguf *g = tn_model_gguf(s->model);
    s->tok = tn_model_tokenizer(s->model);
    /* A guessed template is the model's news, told by whoever loads it
     * (tn_model_chat_kind's warning), not repeated by every session. */
    s->chat_kind = (tn_chat_kind)tn_model_chat_kind(s->model, NULL);
    int64_t eos = -1;
    if (tn_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos) != TN_OK)
        eos = -1;
    s->eos = eos >= 0 && eos < s->n_vocab ? (int32_t)eos : -1;
}

int tn_session_new(const tn_model *model, tn_session_params params, tn_session **out,
                   tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_session_new: out is NULL");
    *out = NULL;
    if (!model)
        return tn_fail(err, TN_ERR_INVALID, "tn_session_new: model is NULL");
    if (params.n_ctx <= 0)
        params.n_ctx = 1024;
    /* Nothing is pinned yet: this is the context size asked for (chat's as
     * much as a pin's), so the message must not speak of a pin. */
    if (params.n_ctx > tn_model_n_ctx_train(model))
        return tn_fail(err, TN_ERR_INVALID,
                       "%s: a context of %d tokens is longer than the model's %d (its training "
                       "context); ask for %d tokens or fewer",
                       tn_model_path(model), params.n_ctx, tn_model_n_ctx_train(model),
                       tn_model_n_ctx_train(model));
    int rc = check_gen(&params.gen, tn_model_n_vocab(model), err);
    if (rc != TN_OK)
        return rc;
    tn_session *s = calloc(1, sizeof *s);
    if (!s)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    s->model = model;
    s->n_vocab = tn_model_n_vocab(model);
    s->params = params;
    /* Tools are a request's: the defaults hold none (documented in tern.h). */
    s->params.gen.tools = NULL;
    s->params.gen.n_tools = 0;
    s->params.gen.logit_bias = NULL;
    s->params.gen.n_logit_bias = 0;
    if (s->params.gen.constrain == TN_CONSTRAIN_JSON_SCHEMA)
        s->params.gen.constrain = TN_CONSTRAIN_NONE;
    s->params.gen.schema = NULL;
    atomic_init(&s->cancel, false);
    for (int32_t i = 0; i < params.gen.n_stop; i++) {
        s->stop_copies[i] = strdup(params.gen.stop[i]);
        if (!s->stop_copies[i])
            goto nomem;
        s->params.gen.stop[i] = s->stop_copies[i];
    }
    if (params.pin_cache_dir) {
        if (params.pin_cache_dir[0] && !(s->cache_dir = strdup(params.pin_cache_dir)))
            goto nomem;
    } else {
        s->cache_dir = tn_pin_cache_default_dir(); /* NULL without HOME: snapshots off */
    }
    s->params.pin_cache_dir = s->cache_dir ? s->cache_dir : "";
    if (s->params.pin_cache_max_bytes == 0)
        s->params.pin_cache_max_bytes = TN_PIN_DEFAULT_MAX_BYTES;
    s->kv_tokens = calloc((size_t)params.n_ctx, sizeof(int32_t));
    s->kv_keys = calloc((size_t)params.n_ctx, sizeof(uint64_t));
    s->logits = calloc((size_t)s->n_vocab, sizeof(float));
    if (!s->kv_tokens || !s->kv_keys || !s->logits)
        goto nomem;
    rc = tn_ctx_new(model, params.n_ctx, params.n_threads, &s->ctx, err);
    if (rc != TN_OK) {
        tn_session_free(s);
        return rc;
    }
    s->n_ctx = tn_ctx_n_ctx(s->ctx);
    rc = tn_sampler_new(s->n_vocab, params.gen.sampler, &s->sampler, err);
    if (rc == TN_OK)
        rc = tn_spec_new(s->n_vocab, &s->spec, err);
    if (rc != TN_OK) {
        tn_session_free(s);
        return rc;
    }
    load_text_layer(s);
    s->info.n_ctx = s->n_ctx;
    s->info.n_free = s->n_ctx;
    *out = s;
    return TN_OK;
nomem:
    tn_session_free(s);
    return tn_fail(err, TN_ERR_NOMEM, "out of memory");
}

void tn_session_free(tn_session *s) {
    if (!s)
        return;
    tn_ctx_free(s->ctx);
    tn_sampler_free(s->sampler);
    tn_spec_free(s->spec);
    free(s->first_start);
    free(s->first_tokens);
    for (int i = 0; i < TN_SESSION_MAX_STOP; i++)
        free(s->stop_copies[i]);
    free(s->cache_dir);
    free(s->kv_tokens);
    free(s->kv_keys);
    free(s->pin_text);
    free(s->pin_tokens);
    free(s->logits);
    free(s);
}

const tn_model *tn_session_model(const tn_session *s) { return s ? s->model : NULL; }
int32_t tn_session_n_ctx(const tn_session *s) { return s ? s->n_ctx : 0; }
tn_ctx *tn_session_ctx(tn_session *s) { return s ? s->ctx : NULL; }

const int32_t *tn_session_kv_tokens(const tn_session *s, int32_t *n) {
    if (n)
        *n = s ? s->n_kv : 0;
    return s ? s->kv_tokens : NULL;
}

const int32_t *tn_session_pinned_tokens(const tn_session *s, int32_t *n) {
    if (n)
        *n = s ? s->n_pin : 0;
    return s ? s->pin_tokens : NULL;
}

tn_pin_info tn_session_pin_info(const tn_session *s) {
    tn_pin_info none = {0};
    return s ? s->info : none;
}

bool tn_session_token_drafted(const tn_session *s) {
    return s && tn_spec_last_drafted(s->spec);
}

size_t tn_session_token_dropped(const tn_session *s) {
    return s && s->cb_row ? s->cb_dropped : 0;
}

int tn_session_token_logprobs(const tn_session *s, int32_t k, float *logprob,
                              tn_token_logprob *top, tn_error *err) {
    if (!s || !s->cb_row)
        return tn_fail(err, TN_ERR_INVALID,
                       "log-probabilities are only known inside a token callback, for the token "
                       "it delivers");
    return tn_logprobs(s->cb_row, s->n_vocab, s->cb_token, k, logprob, top, err);
}

const uint8_t *tn_session_drafted_flags(const tn_session *s, int32_t *n) {
    return tn_spec_flags(s ? s->spec : NULL, n);
}

void tn_session_cancel(tn_session *s) {
    if (!s)
        return;
    atomic_store(&s->cancel, true);
    tn_ctx_cancel(s->ctx);
}

/* A call starts: forget an earlier cancel. */
static void begin_call(tn_session *s) {
    atomic_store(&s->cancel, false);
    tn_ctx_cancel_reset(s->ctx);
}

/* ------------------------------------------------------------ text layer */

static int need_tokenizer(const tn_session *s, tn_error *err) {
    if (s->tok)
        return TN_OK;
    /* The model's own error (its format and arguments) rather than a wrapper
     * around its English text, so that the caller can translate it. */
    const tn_error *why = tn_model_tokenizer_failure(s->model);
    if (!why || !why->message[0])
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: no usable tokenizer",
                       tn_model_path(s->model));
    if (err) {
        *err = *why;
        err->code = TN_ERR_UNSUPPORTED;
    }
    return TN_ERR_UNSUPPORTED;
}

/* Rendered template text -> tokens, BOS first when the format starts with
 * it. Control tokens are matched in the template's markup only (they must
 * become their ids there); in the content spans their text is text, so a
 * message cannot close its turn or open a system turn. */
/* What the rendered text is for, and so how many rows it may take: a
 * system prompt leaves at least one for the requests (pin_impl), a turn
 * fits after the pin (ask_impl), a conversation in the whole context
 * (chat_impl); COUNT only counts. */
typedef enum { FIT_COUNT, FIT_PIN, FIT_TURN, FIT_CHAT } fit_kind;

/* The rows a text of this kind may take. */
static int64_t fit_room(const tn_session *s, fit_kind fit) {
    const int64_t room = fit == FIT_PIN    ? (int64_t)s->n_ctx - 1
                         : fit == FIT_TURN ? (int64_t)s->n_ctx - s->n_pin
                                           : (int64_t)s->n_ctx;
    return room > 0 ? room : 0;
}

/* rc, the refusal tn_fail just wrote to err, with its numbers beside the
 * message (tn_error.overflow) so that no caller has to read them out of
 * words that change and are translated. */
static int overflowed(tn_error *err, int rc, int64_t needed, int64_t room, bool at_least) {
    if (err)
        err->overflow = (tn_overflow){.needed = needed, .room = room, .at_least = at_least};
    return rc;
}

/* A text that cannot fit, refused from its length before it is encoded:
 * encoding a 1 MiB message took seconds only for the check after it to
 * refuse it. tn_tokenizer_min_tokens never exceeds the real count, so
 * whatever fits still passes to the exact checks after tokenizing. */
static int refuse_early(const tn_session *s, const tn_buf *text, bool bos, fit_kind fit,
                        tn_error *err) {
    if (fit == FIT_COUNT)
        return TN_OK;
    const int64_t room = fit_room(s, fit);
    const size_t len = text->len;
    const size_t at_least = tn_tokenizer_min_tokens(s->tok, text->data, len) + (bos ? 1 : 0);
    if (at_least <= (uint64_t)room)
        return TN_OK;
    const int64_t needed = at_least > INT64_MAX ? INT64_MAX : (int64_t)at_least;
    /* One format per case, each translated whole (docs/TRANSLATING.md). */
    if (fit == FIT_PIN)
        return overflowed(
            err,
            tn_fail(err, TN_ERR_OVERFLOW,
                    "the system prompt is %zu bytes as the template writes it, at least %zu "
                    "tokens; the pinned context holds %d and needs room for the requests "
                    "(raise the context size)",
                    len, at_least, s->n_ctx),
            needed, room, true);
    if (fit == FIT_CHAT)
        return overflowed(
            err,
            tn_fail(err, TN_ERR_OVERFLOW,
                    "the conversation is %zu bytes as the template writes it, at least %zu "
                    "tokens; the context holds %d (start a new chat or raise the context "
                    "size)",
                    len, at_least, s->n_ctx),
            needed, room, true);
    if (s->n_pin > 0)
        return overflowed(
            err,
            tn_fail(err, TN_ERR_OVERFLOW,
                    "the message is %zu bytes as the template writes it, at least %zu tokens; "
                    "%d are free after the %d-token system prompt",
                    len, at_least, s->n_ctx - s->n_pin, s->n_pin),
            needed, room, true);
    return overflowed(
        err,
        tn_fail(err, TN_ERR_OVERFLOW,
                "the message is %zu bytes as the template writes it, at least %zu tokens; "
                "the context holds %d",
                len, at_least, s->n_ctx),
        needed, room, true);
}

static int tokenize_rendered(const tn_session *s, const tn_buf *text,
                             const tn_text_spans *content, bool with_bos, fit_kind fit,
                             tn_tokens *out, tn_error *err) {
    const bool bos =
        with_bos && tn_chat_kind_adds_bos(s->chat_kind) && tn_tokenizer_bos(s->tok) >= 0;
    int rc = refuse_early(s, text, bos, fit, err);
    if (rc != TN_OK)
        return rc;
    if (bos) {
        rc = tn_tokens_push(out, tn_tokenizer_bos(s->tok));
        if (rc != TN_OK)
            return tn_fail(err, rc, "out of memory");
    }
    if (text->len == 0)
        return TN_OK;
    return tn_tokenize_spans(s->tok, text->data, text->len, TN_TOKENIZE_SPECIAL,
                             content ? content->v : NULL, content ? content->n : 0, out, err);
}

static int render_system_tokens(tn_session *s, const char *system, fit_kind fit,
                                tn_tokens *out, tn_error *err) {
    int rc = need_tokenizer(s, err);
    if (rc != TN_OK)
        return rc;
    tn_buf text = {0};
    tn_text_spans content = {0};
    tn_chat_options o = tn_chat_default_options();
    rc = tn_chat_render_system_spans(s->chat_kind, system, &o, &text, &content, err);
    if (rc == TN_OK)
        rc = tokenize_rendered(s, &text, &content, true, fit, out, err);
    tn_text_spans_free(&content);
    tn_buf_free(&text);
    return rc;
}

static bool has_system(const tn_session *s) {
    return (s->pin_kind == PIN_TEXT && s->pin_text) || (s->pin_kind == PIN_TOKENS && s->n_pin > 0);
}

static int render_turn_tokens(tn_session *s, const char *user_text, bool thinking,
                              tn_tokens *out, tn_error *err) {
    tn_buf text = {0};
    tn_text_spans content = {0};
    tn_chat_options o = tn_chat_default_options();
    o.enable_thinking = thinking;
    int rc = tn_chat_render_turn_spans(s->chat_kind, has_system(s), user_text, &o, &text,
                                       &content, err);
    if (rc == TN_OK)
        rc = tokenize_rendered(s, &text, &content, false, FIT_TURN, out, err);
    tn_text_spans_free(&content);
    tn_buf_free(&text);
    return rc;
}

static bool is_eog(const tn_session *s, const tn_gen_params *g, const tn_harmony *h,
                   int32_t token) {
    for (int32_t i = 0; i < g->n_stop_tokens; i++)
        if (g->stop_tokens[i] == token)
            return true;
    if (tn_harmony_ends_message(h, token))
        return false; /* the end of one gpt-oss message, not of the answer */
    if (s->tok)
        return tn_token_is_eog(s->tok, token);
    return token == s->eos;
}

/* ---------------------------------------------------------------- pinning */

int tn_session_count_system_tokens(tn_session *s, const char *system_text, int32_t *n_tokens,
                                   tn_error *err) {
    if (!s || !n_tokens)
        return tn_fail(err, TN_ERR_INVALID, "tn_session_count_system_tokens: bad arguments");
    tn_tokens t = {0};
    int rc = render_system_tokens(s, system_text && system_text[0] ? system_text : NULL,
                                  FIT_COUNT, &t, err);
    *n_tokens = rc == TN_OK ? (int32_t)t.n : 0;
    tn_tokens_free(&t);
    return rc;
}

static int pin_too_long(const tn_session *s, int32_t n, tn_error *err) {
    return overflowed(
        err,
        tn_fail(err, TN_ERR_OVERFLOW,
                "the system prompt is %d tokens; the pinned context holds %d and needs room "
                "for the requests (raise the context size)",
                n, s->n_ctx),
        n, fit_room(s, FIT_PIN), false);
}

/* Brings the KV to exactly `tokens` (the pin): keeps what is already
 * there, loads the snapshot, or prefills; then saves the snapshot. Fills
 * *loaded / *saved. On failure the KV holds a prefix of the tokens. */
static int establish(tn_session *s, const int32_t *tokens, int32_t n,
                     tn_session_progress_cb progress, void *user, bool *loaded, bool *saved,
                     tn_error *err) {
    *loaded = false;
    *saved = false;
    int32_t keep = kv_prefix(s, tokens, NULL, n);
    if (keep == n) {
        kv_cut(s, n);
        if (progress)
            progress(n, n, user);
        return TN_OK;
    }
    tn_pin_key key;
    const bool use_cache = s->cache_dir && n >= SNAPSHOT_MIN_TOKENS &&
                           tn_pin_key_compute(s->model, tokens, n, &key, NULL) == TN_OK;
    if (use_cache && n - keep >= SNAPSHOT_MIN_TOKENS) {
        tn_error e = {0};
        int rc = tn_pin_store_load(s->cache_dir, &key, s->ctx, tokens, n, &e);
        if (rc == TN_OK) {
            memcpy(s->kv_tokens, tokens, (size_t)n * sizeof(int32_t));
            memset(s->kv_keys, 0, (size_t)(n > s->n_kv ? n : s->n_kv) * sizeof(uint64_t));
            s->n_kv = n;
            *loaded = *saved = true;
            if (progress)
                progress(n, n, user);
            return TN_OK;
        }
        if (rc != TN_ERR_NOT_FOUND)
            warn(s, &e);
        /* A snapshot cut short while its rows were being copied empties
         * the KV (tn_pin_store_load): the mirror follows, and the pin is
         * recomputed from there. */
        const int32_t left = tn_ctx_kv_len(s->ctx);
        if (left < keep) {
            kv_cut(s, left); /* keep <= s->n_kv: the mirror is longer */
            keep = left;
        }
    }
    kv_cut(s, keep);
    /* The progress counts the whole pin, the rows kept as done: counted
     * from `keep`, its total was the pin less the prefix already there (the
     * BOS and the template's opening), and a 1822-token system prompt
     * pinned as "of 1816 tokens" beside the panel's count. A first report,
     * before any work, says how many are kept: a caller's speed counts from
     * there (after an edit at its end, most of a long prompt is kept). A
     * no from it is heard at kv_append's first report. */
    if (progress)
        (void)progress(keep, n, user);
    progress_shift ps = {progress, user, keep, n};
    int rc = kv_append(s, tokens + keep, n - keep, false, progress ? shifted_progress : NULL,
                       &ps, err);
    if (rc != TN_OK)
        return rc;
    if (use_cache) {
        tn_error e = {0};
        rc = tn_pin_store_save(s->cache_dir, &key, s->ctx, tokens, n,
                               s->params.pin_cache_max_bytes, &e);
        if (rc == TN_OK)
            *saved = true;
        else
            warn(s, &e);
    }
    return TN_OK;
}

static int pin_impl(tn_session *s, pin_kind kind, const char *text, const int32_t *tokens,
                    int32_t n, tn_session_progress_cb progress, void *user, tn_error *err) {
    if (n >= s->n_ctx)
        return pin_too_long(s, n, err);
    /* Everything that can fail for lack of memory happens before the KV is
     * touched. */
    int32_t *copy = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    char *text_copy = text ? strdup(text) : NULL;
    if (!copy || (text && !text_copy)) {
        free(copy);
        free(text_copy);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    if (n > 0)
        memcpy(copy, tokens, (size_t)n * sizeof(int32_t));
    const double t0 = tn_now_ms();
    bool loaded, saved;
    int rc = establish(s, copy, n, progress, user, &loaded, &saved, err);
    if (rc != TN_OK) {
        /* The previous pin is still the pin; the next request restores it. */
        free(copy);
        free(text_copy);
        return rc;
    }
    free(s->pin_tokens);
    free(s->pin_text);
    s->pin_tokens = copy;
    s->pin_text = text_copy;
    s->n_pin = n;
    s->pin_kind = kind;
    s->info.n_pin = n;
    s->info.n_ctx = s->n_ctx;
    s->info.n_free = s->n_ctx - n;
    s->info.prefill_ms = tn_now_ms() - t0;
    s->info.loaded_from_snapshot = loaded;
    s->info.snapshot_saved = saved;
    return TN_OK;
}

int tn_session_pin_tokens(tn_session *s, const int32_t *tokens, int32_t n_tokens,
                          tn_session_progress_cb progress, void *user, tn_error *err) {
    if (!s || n_tokens < 0 || (n_tokens > 0 && !tokens))
        return tn_fail(err, TN_ERR_INVALID, "tn_session_pin_tokens: bad arguments");
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= s->n_vocab)
            return tn_fail(err, TN_ERR_INVALID, "token %d is outside the vocabulary (0..%d)",
                           tokens[i], s->n_vocab - 1);
    begin_call(s);
    return pin_impl(s, PIN_TOKENS, NULL, tokens, n_tokens, progress, user, err);
}

int tn_session_pin(tn_session *s, const char *system_text, tn_session_progress_cb progress,
                   void *user, tn_error *err) {
    if (!s)
        return tn_fail(err, TN_ERR_INVALID, "tn_session_pin: session is NULL");
    begin_call(s);
    if (system_text && !system_text[0])
        system_text = NULL;
    tn_tokens t = {0};
    int rc = render_system_tokens(s, system_text, FIT_PIN, &t, err);
    if (rc == TN_OK)
        rc = pin_impl(s, PIN_TEXT, system_text, t.ids, (int32_t)t.n, progress, user, err);
    tn_tokens_free(&t);
    return rc;
}

/* Makes the KV exactly the pin again: a truncation when the pinned rows are
 * intact, else the pin is re-established (snapshot or prefill). */
static int restore_pin(tn_session *s, tn_error *err) {
    if (pin_in_kv(s)) {
        kv_cut(s, s->n_pin);
        return TN_OK;
    }
    bool loaded, saved;
    return establish(s, s->pin_tokens, s->n_pin, NULL, NULL, &loaded, &saved, err);
}

void tn_session_reset(tn_session *s) {
    if (!s)
        return;
    /* Keep what is left of the pin; a damaged pin is restored lazily. */
    kv_cut(s, kv_prefix(s, s->pin_tokens, NULL, s->n_pin));
}

void tn_session_unpin(tn_session *s) {
    if (!s)
        return;
    kv_cut(s, 0);
    free(s->pin_tokens);
    free(s->pin_text);
    s->pin_tokens = NULL;
    s->pin_text = NULL;
    s->n_pin = 0;
    s->pin_kind = PIN_NONE;
    memset(&s->info, 0, sizeof s->info);
    s->info.n_ctx = s->n_ctx;
    s->info.n_free = s->n_ctx;
}

/* ------------------------------------------------------------ generation */

static bool same_sampler(tn_sampler_params a, tn_sampler_params b) {
    return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p &&
           a.min_p == b.min_p && a.repeat_penalty == b.repeat_penalty &&
           a.presence_penalty == b.presence_penalty &&
           a.frequency_penalty == b.frequency_penalty && a.penalty_last_n == b.penalty_last_n &&
           a.seed == b.seed;
}

/* The constrained answer's token filter: a token may come next when its
 * bytes keep the text a prefix of a JSON object. Control tokens (and the
 * user-defined ones such as <think>, which the server reads as markup)
 * never; end of generation never either: the answer ends when the object
 * closes (generate). An empty piece would let the answer spin in place. */
static bool json_allow(int32_t token, void *user) {
    tn_session *s = user;
    if (!s->tok)
        return false;
    const int type = tn_token_type_of(s->tok, token);
    if (type != TN_TOKEN_TYPE_NORMAL && type != TN_TOKEN_TYPE_BYTE &&
        type != TN_TOKEN_TYPE_UNDEFINED)
        return false;
    if (tn_token_is_eog(s->tok, token))
        return false;
    size_t len = 0;
    const char *piece = tn_token_piece(s->tok, token, &len);
    if (!piece || len == 0)
        return false;
    if (s->schema) {
        tn_json_schema_state q = s->jstate;
        return tn_json_schema_feed(&q, piece, len) == len;
    }
    tn_json_prefix q = s->json;
    return tn_json_prefix_feed(&q, piece, len) == len;
}

/* Whether a token starting with byte g can come next. */
static bool json_first_ok(int g, void *user) {
    tn_session *s = user;
    const char b = (char)g;
    if (s->schema) {
        tn_json_schema_state q = s->jstate;
        return tn_json_schema_feed(&q, &b, 1) == 1;
    }
    tn_json_prefix q = s->json;
    return tn_json_prefix_feed(&q, &b, 1) == 1;
}

/* json_allow's candidates by first byte (a counting sort over the
 * vocabulary); false when out of memory, the sampler then checks every
 * token. */
static bool build_first_index(tn_session *s) {
    if (s->first_start)
        return true;
    if (!s->tok)
        return false;
    int32_t *start = calloc(257, sizeof *start);
    int32_t *tokens = malloc((size_t)s->n_vocab * sizeof *tokens);
    if (!start || !tokens) {
        free(start);
        free(tokens);
        return false;
    }
    for (int pass = 0; pass < 2; pass++) {
        int32_t fill[256];
        if (pass == 1) {
            for (int g = 0, sum = 0; g < 256; g++) {
                const int32_t c = start[g + 1];
                start[g] = sum; /* start[g + 1] held group g's count */
                fill[g] = sum;
                sum += c;
            }
        }
        for (int32_t t = 0; t < s->n_vocab; t++) {
            const int type = tn_token_type_of(s->tok, t);
            if ((type != TN_TOKEN_TYPE_NORMAL && type != TN_TOKEN_TYPE_BYTE &&
                 type != TN_TOKEN_TYPE_UNDEFINED) ||
                tn_token_is_eog(s->tok, t))
                continue;
            size_t len = 0;
            const char *piece = tn_token_piece(s->tok, t, &len);
            if (!piece || len == 0)
                continue;
            const uint8_t g = (uint8_t)piece[0];
            if (pass == 0)
                start[g + 1]++;
            else
                tokens[fill[g]++] = t;
        }
        if (pass == 1)
            start[256] = fill[255];
    }
    s->first_start = start;
    s->first_tokens = tokens;
    return true;
}

/* Every request starts the sampler afresh from its seed, with the penalty
 * window filled from the prompt: the same request draws the same tokens. */
static int sampler_begin(tn_session *s, const tn_gen_params *g, tn_error *err) {
    if (!same_sampler(tn_sampler_get_params(s->sampler), g->sampler)) {
        tn_sampler *fresh;
        int rc = tn_sampler_new(s->n_vocab, g->sampler, &fresh, err);
        if (rc != TN_OK)
            return rc;
        tn_sampler_free(s->sampler);
        s->sampler = fresh;
    }
    tn_sampler_reset(s->sampler);
    int rc = tn_sampler_set_logit_bias(s->sampler, g->logit_bias, g->n_logit_bias, err);
    if (rc != TN_OK)
        return rc;
    s->json_on = g->constrain == TN_CONSTRAIN_JSON_OBJECT ||
                 g->constrain == TN_CONSTRAIN_JSON_SCHEMA;
    tn_json_prefix_init(&s->json);
    s->schema = g->constrain == TN_CONSTRAIN_JSON_SCHEMA ? g->schema : NULL;
    tn_json_schema_init(&s->jstate, s->schema);
    tn_sampler_set_allow(s->sampler, s->json_on ? json_allow : NULL, s);
    if (s->json_on && build_first_index(s))
        tn_sampler_set_allow_groups(s->sampler, s->first_start, s->first_tokens, json_first_ok);
    const tn_sampler_params p = g->sampler;
    const bool penalties = p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f ||
                           p.frequency_penalty != 0.0f;
    if (penalties && p.penalty_last_n > 0) {
        int32_t from = s->n_kv > p.penalty_last_n ? s->n_kv - p.penalty_last_n : 0;
        for (int32_t i = from; i < s->n_kv; i++)
            tn_sampler_accept(s->sampler, s->kv_tokens[i]);
    }
    return TN_OK;
}

/* Text between the detokenizer and the callback: holds back what could be
 * the start of a stop string, and finds stop strings split across tokens. */
typedef struct stop_filter {
    const tn_gen_params *g;
    tn_buf pending; /* decoded, not yet emitted */
    tn_buf emit;    /* what the callback gets now */
    bool matched;
} stop_filter;

/* Moves text from pending to emit: all of it, up to a stop string, or all
 * but a tail that may still become one. */
static int stop_filter_push(stop_filter *f, const char *text, size_t len, bool final) {
    f->emit.len = 0;
    if (f->emit.data)
        f->emit.data[0] = '\0';
    if (len && tn_buf_append(&f->pending, text, len) != TN_OK)
        return TN_ERR_NOMEM;
    const char *p = f->pending.data ? f->pending.data : "";
    const size_t n = f->pending.len;
    size_t cut = n; /* emit [0, cut) */
    size_t match_at = SIZE_MAX;
    for (int32_t i = 0; i < f->g->n_stop; i++) {
        const char *hit = memmem(p, n, f->g->stop[i], strlen(f->g->stop[i]));
        if (hit && (size_t)(hit - p) < match_at)
            match_at = (size_t)(hit - p);
    }
    if (match_at != SIZE_MAX) {
        cut = match_at;
        f->matched = true;
    } else if (!final) {
        for (int32_t i = 0; i < f->g->n_stop; i++) {
            const char *stop = f->g->stop[i];
            const size_t ls = strlen(stop);
            for (size_t k = ls - 1 < n ? ls - 1 : n; k > 0; k--)
                if (memcmp(p + n - k, stop, k) == 0) {
                    if (n - k < cut)
                        cut = n - k;
                    break;
                }
        }
    }
    if (cut && tn_buf_append(&f->emit, p, cut) != TN_OK)
        return TN_ERR_NOMEM;
    if (f->matched) {
        f->pending.len = 0;
    } else if (cut > 0) {
        memmove(f->pending.data, p + cut, n - cut);
        f->pending.len = n - cut;
    }
    if (f->pending.data)
        f->pending.data[f->pending.len] = '\0';
    return TN_OK;
}

/* The decode loop: samples from s->logits (the last prompt row), streams
 * each token, decodes it, and repeats until a stop. The token that ends the
 * answer is never decoded, so it gets no KV row.
 *
 * Speculative decoding (g->drafter, spec.c): instead of decoding the one
 * sampled token, tn_spec_step decodes [token, d1..dk] in one call, keeps the
 * drafts the target agrees with and queues them with the target's next
 * token; the loop then takes tokens from that queue (tn_spec_pop) through
 * the same checks as any token. An accepted draft's KV row already exists,
 * so "decoding" it only mirrors it; rows of drafts never emitted are cut
 * when the loop ends. Everything else in this loop stays as it is. */
static int generate(tn_session *s, const tn_gen_params *g, tn_session_token_cb cb, void *user,
                    double t_call, tn_session_stats *st, tn_error *err) {
    /* An answer continues its prompt: its first token keeps its leading
     * space, as llama.cpp gives it (docs/TOKENIZER.md, "The leading space"). */
    tn_detok_stream detok;
    if (s->tok)
        tn_detok_stream_init(&detok, s->tok, TN_DETOKENIZE_CONTINUATION);
    stop_filter sf = {.g = g};
    tn_buf piece = {0}, shown = {0};
    /* gpt-oss: its channels as text (tn_harmony, chat.c) */
    tn_harmony h;
    tn_harmony_init(&h, s->chat_kind == TN_CHAT_GPTOSS ? s->tok : NULL);
    h.calls_as_text = g->n_tools > 0; /* the server parses them (docs/SERVER.md) */
    int rc = TN_OK;
    int32_t steps = 0;
    double t_first = 0;
    for (;;) {
        if (cancelled(s)) {
            st->stop_reason = TN_STOP_CANCELLED;
            break;
        }
        /* Tokens a verification step produced come first (spec.c). */
        int32_t token;
        const int from_spec = tn_spec_pop(s->spec, &token);
        if (from_spec == TN_SPEC_NONE)
            token = tn_sampler_sample(s->sampler, s->logits);
        if (token < 0) { /* the JSON filter allowed nothing */
            rc = tn_fail(err, TN_ERR_INVALID,
                         "no token of the model's vocabulary can continue the JSON answer");
            break;
        }
        if (st->generated_tokens == 0) {
            t_first = tn_now_ms();
            st->ttft_ms = t_first - t_call;
        }
        if (is_eog(s, g, &h, token)) {
            tn_harmony_stop(&h, token);
            st->stop_reason = TN_STOP_EOG;
            break;
        }
        if (from_spec != TN_SPEC_DRAFTED) /* the step recorded accepted drafts */
            tn_sampler_accept(s->sampler, token);
        if (s->json_on) {
            size_t len = 0;
            const char *bytes = tn_token_piece(s->tok, token, &len);
            if (s->schema)
                tn_json_schema_feed(&s->jstate, bytes, len); /* json_allow took all of it */
            else
                tn_json_prefix_feed(&s->json, bytes, len);
        }
        st->generated_tokens++;
        piece.len = 0;
        if (s->tok && (rc = tn_detok_stream_push(&detok, token, &piece, err)) != TN_OK)
            break;
        const tn_buf *text = &piece;
        if (h.on) {
            if (tn_harmony_piece(&h, token, piece.data, piece.len, &shown) != TN_OK) {
                rc = tn_fail(err, TN_ERR_NOMEM, "out of memory");
                break;
            }
            text = &shown;
        }
        if (stop_filter_push(&sf, text->data, text->len, false) != TN_OK) {
            rc = tn_fail(err, TN_ERR_NOMEM, "out of memory");
            break;
        }
        /* Read by tn_session_token_logprobs: a queued token's verification
         * row, else the row just sampled (neither is written before the
         * next step, after the callback). */
        const float *spec_row = from_spec != TN_SPEC_NONE ? tn_spec_last_row(s->spec) : NULL;
        s->cb_row = spec_row ? spec_row : s->logits;
        s->cb_token = token;
        s->cb_dropped = s->tok ? detok.dropped : 0;
        const bool go_on = !cb || cb(sf.emit.data ? sf.emit.data : "", token, user);
        s->cb_row = NULL;
        s->cb_dropped = 0;
        if (!go_on) {
            st->stop_reason = sf.matched ? TN_STOP_STRING : TN_STOP_CALLBACK;
            break;
        }
        if (sf.matched) {
            st->stop_reason = TN_STOP_STRING;
            break;
        }
        if (s->json_on && (s->schema ? tn_json_schema_complete(&s->jstate)
                                     : tn_json_prefix_complete(&s->json))) {
            st->stop_reason = TN_STOP_EOG; /* the object is the whole answer */
            break;
        }
        if (g->max_tokens > 0 && st->generated_tokens >= g->max_tokens) {
            st->stop_reason = TN_STOP_LIMIT;
            break;
        }
        if (s->n_kv >= s->n_ctx) {
            st->stop_reason = TN_STOP_CONTEXT_FULL;
            break;
        }
        if (from_spec == TN_SPEC_DRAFTED) {
            rc = TN_OK; /* verified with its block: its KV row is already there */
        } else if (tn_spec_active(s->spec)) {
            const int32_t budget =
                g->max_tokens > 0 ? g->max_tokens - st->generated_tokens : INT32_MAX;
            s->kv_tokens[s->n_kv] = token;
            rc = tn_spec_step(s->spec, s->ctx, s->sampler, s->kv_tokens, s->n_kv, budget, st,
                              err);
        } else {
            rc = tn_ctx_decode(s->ctx, &token, 1, TN_LOGITS_LAST, s->logits, err);
        }
        if (rc == TN_ERR_CANCELLED) {
            rc = TN_OK;
            st->stop_reason = TN_STOP_CANCELLED;
            break;
        }
        if (rc != TN_OK)
            break;
        s->kv_tokens[s->n_kv++] = token;
        steps++;
    }
    /* Rows of drafts that were verified but never emitted (the answer
     * stopped first): the KV ends where it would without speculation. */
    if (tn_ctx_kv_len(s->ctx) > s->n_kv)
        tn_ctx_kv_truncate(s->ctx, s->n_kv);
    tn_spec_finish(s->spec, st->generated_tokens);
    /* Text still held back (an incomplete character, a possible stop-string
     * start) belongs to the answer when it ended for another reason. */
    if (rc == TN_OK && st->stop_reason != TN_STOP_STRING &&
        st->stop_reason != TN_STOP_CALLBACK) {
        piece.len = 0;
        if (s->tok)
            tn_detok_stream_flush(&detok, &piece, NULL);
        const tn_buf *text = &piece;
        if (h.on) { /* held-back bytes of a body; an unclosed analysis closes */
            tn_harmony_finish(&h, piece.data, piece.len, &shown);
            text = &shown;
        }
        if (stop_filter_push(&sf, text->data, text->len, true) == TN_OK && sf.emit.len && cb)
            cb(sf.emit.data, -1, user);
    }
    if (t_first > 0) {
        st->decode_ms = tn_now_ms() - t_first;
        st->decode_tok_s = st->decode_ms > 0 ? steps * 1e3 / st->decode_ms : 0;
    }
    tn_buf_free(&piece);
    tn_buf_free(&shown);
    tn_buf_free(&sf.pending);
    tn_buf_free(&sf.emit);
    return rc;
}

/* ------------------------------------------------------------------- ask */

static int overflow_message(const tn_session *s, int32_t n_req, tn_error *err) {
    const int32_t n_free = s->n_ctx - s->n_pin;
    if (s->n_pin > 0)
        return overflowed(
            err,
            tn_fail(err, TN_ERR_OVERFLOW,
                    "the message is %d tokens; %d are free after the %d-token system prompt", n_req,
                    n_free, s->n_pin),
            n_req, fit_room(s, FIT_TURN), false);
    return overflowed(err,
                      tn_fail(err, TN_ERR_OVERFLOW,
                              "the message is %d tokens; the context holds %d", n_req, s->n_ctx),
                      n_req, fit_room(s, FIT_TURN), false);
}

static int ask_impl(tn_session *s, const int32_t *req, int32_t n_req, const prompt_plan *plan,
                    const tn_gen_params *g, tn_session_token_cb cb, void *user,
                    tn_session_stats *st, double t_call, tn_error *err) {
    if (n_req <= 0)
        return tn_fail(err, TN_ERR_INVALID, "the request is empty");
    /* One format per number: a translation has its own word for each
     * (docs/TRANSLATING.md), which an "image%s" suffix would not allow. */
    if (n_req > s->n_ctx - s->n_pin && plan && plan->n_spans == 1)
        return overflowed(
            err,
            tn_fail(err, TN_ERR_OVERFLOW,
                    "the message is %d tokens (%d of them for %d image); %d are free after "
                    "the %d-token system prompt (use fewer image tokens or a larger context)",
                    n_req, plan->n_image_rows, plan->n_spans, s->n_ctx - s->n_pin, s->n_pin),
            n_req, fit_room(s, FIT_TURN), false);
    if (n_req > s->n_ctx - s->n_pin && plan && plan->n_spans > 1)
        return overflowed(
            err,
            tn_fail(err, TN_ERR_OVERFLOW,
                    "the message is %d tokens (%d of them for %d images); %d are free after "
                    "the %d-token system prompt (use fewer image tokens or a larger context)",
                    n_req, plan->n_image_rows, plan->n_spans, s->n_ctx - s->n_pin, s->n_pin),
            n_req, fit_room(s, FIT_TURN), false);
    if (n_req > s->n_ctx - s->n_pin)
        return overflow_message(s, n_req, err);
    for (int32_t i = 0; i < n_req; i++)
        if (req[i] < 0 || req[i] >= s->n_vocab)
            return tn_fail(err, TN_ERR_INVALID, "token %d is outside the vocabulary (0..%d)",
                           req[i], s->n_vocab - 1);
    const double t_restore = tn_now_ms();
    int rc = restore_pin(s, err);
    st->restore_ms = tn_now_ms() - t_restore;
    if (rc != TN_OK)
        return rc;
    st->restored_tokens = s->n_pin;
    rc = tn_spec_begin(s->spec, s->ctx, g, s->kv_tokens, s->n_kv, err);
    if (rc != TN_OK)
        return rc;
    const double t_prefill = tn_now_ms();
    if (plan)
        rc = kv_append_plan(s, req, 0, n_req, plan, true, g->progress, g->progress_user, err);
    else
        rc = kv_append_scored(s, req, n_req, true, g->prompt_logprobs ? g : NULL, g->progress,
                              g->progress_user, err);
    st->prefill_ms = tn_now_ms() - t_prefill;
    st->prompt_tokens = s->n_kv - s->n_pin;
    if (st->prefill_ms > 0)
        st->prefill_tok_s = st->prompt_tokens * 1e3 / st->prefill_ms;
    if (rc == TN_OK && g->no_answer)
        st->stop_reason = TN_STOP_LIMIT;
    else if (rc == TN_OK)
        rc = sampler_begin(s, g, err);
    if (rc == TN_OK && !g->no_answer)
        rc = generate(s, g, cb, user, t_call, st, err);
    tn_spec_end(s->spec, s->ctx);
    /* Nothing of the request survives it. */
    kv_cut(s, s->n_pin);
    if (s->n_kv != s->n_pin || tn_ctx_kv_len(s->ctx) != s->n_pin || !pin_in_kv(s)) {
        /* Cannot happen: every write above is at or after n_pin. */
        return tn_fail(err, TN_ERR_INVALID,
                       "internal error: the KV holds %d rows after a request, the pin %d",
                       tn_ctx_kv_len(s->ctx), s->n_pin);
    }
    if (rc == TN_ERR_CANCELLED)
        st->stop_reason = TN_STOP_CANCELLED;
    return rc;
}

static void stats_finish(const tn_session *s, tn_session_stats *st) {
    st->kv_len = s->n_kv;
}

/* The caller's stats, or local ones, zeroed: every entry point starts so. */
static tn_session_stats *stats_start(tn_session_stats *stats, tn_session_stats *local) {
    tn_session_stats *st = stats ? stats : local;
    memset(st, 0, sizeof *st);
    return st;
}

static int check_images(const tn_session *s, const tn_image_embd *images, int32_t n_images,
                        tn_error *err);

/* What every request checks before it touches the KV: the generation
 * parameters, the tokenizer when text is involved, the images if any. */
enum { NO_TEXT, ASK_TEXT, CHAT_TEXT };

static int check_request(tn_session *s, const tn_gen_params *g, int text,
                         const tn_image_embd *images, int32_t n_images, tn_error *err) {
    int rc = check_gen(g, s->n_vocab, err);
    if (rc == TN_OK && g->constrain != TN_CONSTRAIN_NONE && s->chat_kind == TN_CHAT_GPTOSS)
        rc = tn_fail(err, TN_ERR_INVALID,
                     "JSON output is not available for gpt-oss models: their answers are "
                     "in channels");
    /* Tools live in the system part a pin fixes without them: only a whole
     * conversation (chat) carries them. */
    if (rc == TN_OK && g->n_tools > 0 && text != CHAT_TEXT)
        rc = tn_fail(err, TN_ERR_INVALID,
                     "tool definitions need a conversation (tn_session_chat), not a "
                     "single-turn request against the pinned system prompt");
    if (rc == TN_OK && text)
        rc = need_tokenizer(s, err);
    if (rc == TN_OK && n_images != 0)
        rc = check_images(s, images, n_images, err);
    /* The scores are the request's own prefill rows: a conversation reuses
     * earlier rows that have none, and image rows are no tokens. */
    if (rc == TN_OK && (g->prompt_logprobs || g->no_answer) &&
        (text == CHAT_TEXT || n_images != 0))
        rc = tn_fail(err, TN_ERR_INVALID,
                     "the prompt's log-probabilities and a prefill without an answer are for "
                     "single-turn requests without images");
    if (rc == TN_OK && g->prompt_logprobs &&
        (g->prompt_top < 0 || g->prompt_top > TN_TOP_LOGPROBS_MAX))
        rc = tn_fail(err, TN_ERR_INVALID, "prompt_top is %d; expected 0 to %d", g->prompt_top,
                     TN_TOP_LOGPROBS_MAX);
    return rc;
}

/* A single-turn request without a pin: the empty system part (Gemma's
 * <bos>, ...) becomes the pin, its time counted as the restore. */
static int pin_if_none(tn_session *s, tn_session_stats *st, tn_error *err) {
    if (s->pin_kind != PIN_NONE)
        return TN_OK;
    const double t0 = tn_now_ms();
    int rc = tn_session_pin(s, NULL, NULL, NULL, err);
    st->restore_ms += tn_now_ms() - t0;
    return rc;
}

/* The bodies of the requests, run after the prologue every one shares
 * (run_prompt: the stats zeroed, the gen params resolved and checked,
 * begin_call); each ends the stats itself, at the points it always did. */

static int ask_tokens_body(tn_session *s, const int32_t *tokens, int32_t n_tokens,
                           const tn_gen_params *g, tn_session_token_cb cb, void *user,
                           tn_session_stats *st, double t_call, tn_error *err) {
    int rc = ask_impl(s, tokens, n_tokens, NULL, g, cb, user, st, t_call, err);
    stats_finish(s, st);
    return rc;
}

static int ask_text_body(tn_session *s, const char *user_text, const tn_gen_params *g,
                         tn_session_token_cb cb, void *user, tn_session_stats *st, double t_call,
                         tn_error *err) {
    int rc;
    if ((rc = pin_if_none(s, st, err)) != TN_OK)
        return rc;
    tn_tokens req = {0};
    rc = render_turn_tokens(s, user_text, g->thinking, &req, err);
    if (rc == TN_OK)
        rc = ask_impl(s, req.ids, (int32_t)req.n, NULL, g, cb, user, st, t_call, err);
    tn_tokens_free(&req);
    stats_finish(s, st);
    return rc;
}

/* ------------------------------------------------------------------ chat */

static int chat_impl(tn_session *s, const int32_t *tokens, int32_t n, const prompt_plan *plan,
                     const tn_gen_params *g, tn_session_token_cb cb, void *user,
                     tn_session_stats *st, double t_call, tn_error *err) {
    if (n <= 0)
        return tn_fail(err, TN_ERR_INVALID, "the conversation is empty");
    if (n > s->n_ctx)
        return overflowed(
            err,
            tn_fail(err, TN_ERR_OVERFLOW,
                    "the conversation is %d tokens; the context holds %d (start a new chat "
                    "or raise the context size)",
                    n, s->n_ctx),
            n, fit_room(s, FIT_CHAT), false);
    const double t_restore = tn_now_ms();
    int32_t keep = kv_prefix(s, tokens, plan ? plan->keys : NULL, n);
    if (keep == n)
        keep = n - 1; /* the last row is run again for its logits */
    /* An image span runs as one pass: never keep part of one. */
    for (int32_t i = 0; plan && i < plan->n_spans; i++)
        if (plan->spans[i].start < keep && keep < plan->spans[i].start + plan->spans[i].n)
            keep = plan->spans[i].start;
    kv_cut(s, keep);
    st->restored_tokens = keep;
    st->restore_ms = tn_now_ms() - t_restore;
    int rc = tn_spec_begin(s->spec, s->ctx, g, s->kv_tokens, s->n_kv, err);
    if (rc != TN_OK)
        return rc;
    const double t_prefill = tn_now_ms();
    if (plan)
        rc = kv_append_plan(s, tokens, keep, n, plan, true, g->progress, g->progress_user, err);
    else
        rc = kv_append(s, tokens + keep, n - keep, true, g->progress, g->progress_user, err);
    st->prefill_ms = tn_now_ms() - t_prefill;
    st->prompt_tokens = s->n_kv - keep;
    if (st->prefill_ms > 0)
        st->prefill_tok_s = st->prompt_tokens * 1e3 / st->prefill_ms;
    if (rc == TN_OK)
        rc = sampler_begin(s, g, err);
    if (rc == TN_OK)
        rc = generate(s, g, cb, user, t_call, st, err);
    tn_spec_end(s->spec, s->ctx);
    if (rc == TN_ERR_CANCELLED)
        st->stop_reason = TN_STOP_CANCELLED;
    return rc;
}

static tn_chat_role role_of(const char *role, bool *ok) {
    *ok = true;
    if (role && !strcmp(role, "system"))
        return TN_CHAT_ROLE_SYSTEM;
    if (role && !strcmp(role, "user"))
        return TN_CHAT_ROLE_USER;
    if (role && !strcmp(role, "assistant"))
        return TN_CHAT_ROLE_ASSISTANT;
    if (role && !strcmp(role, "tool"))
        return TN_CHAT_ROLE_TOOL;
    *ok = false;
    return TN_CHAT_ROLE_USER;
}

/* The conversation as template text: the pinned system prompt first when
 * the messages bring none, then the assistant header. */
static int render_chat_text(tn_session *s, const tn_session_message *messages,
                            int32_t n_messages, const tn_gen_params *g, tn_buf *text,
                            tn_text_spans *content, tn_error *err) {
    tn_chat_message *msgs = calloc((size_t)n_messages + 1, sizeof *msgs);
    if (!msgs)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    size_t n = 0;
    bool first_is_system = n_messages > 0 && messages[0].role &&
                           !strcmp(messages[0].role, "system");
    if (!first_is_system && s->pin_kind == PIN_TEXT && s->pin_text)
        msgs[n++] = (tn_chat_message){.role = TN_CHAT_ROLE_SYSTEM, .content = s->pin_text};
    for (int32_t i = 0; i < n_messages; i++) {
        bool ok;
        msgs[n].role = role_of(messages[i].role, &ok);
        msgs[n].content = messages[i].content ? messages[i].content : "";
        msgs[n].tool_calls = messages[i].tool_calls;
        msgs[n].n_tool_calls = messages[i].n_tool_calls;
        msgs[n].tool_call_id = messages[i].tool_call_id;
        msgs[n].name = messages[i].name;
        if (!ok) {
            free(msgs);
            return tn_fail(err, TN_ERR_INVALID,
                           "message %d has role '%s'; expected system, user, assistant or tool", i,
                           messages[i].role ? messages[i].role : "(null)");
        }
        n++;
    }
    tn_chat_options o = tn_chat_default_options();
    o.add_generation_prompt = true;
    o.enable_thinking = g->thinking;
    o.tools = g->tools;
    o.n_tools = g->n_tools;
    int rc = tn_chat_render_spans(s->chat_kind, msgs, n, &o, text, content, err);
    free(msgs);
    return rc;
}

static int chat_text_body(tn_session *s, const tn_session_message *messages,
                          int32_t n_messages, const tn_gen_params *g, tn_session_token_cb cb,
                          void *user, tn_session_stats *st, double t_call, tn_error *err) {
    tn_buf text = {0};
    tn_text_spans content = {0};
    tn_tokens toks = {0};
    int rc = render_chat_text(s, messages, n_messages, g, &text, &content, err);
    if (rc == TN_OK)
        rc = tokenize_rendered(s, &text, &content, true, FIT_CHAT, &toks, err);
    if (rc == TN_OK)
        rc = chat_impl(s, toks.ids, (int32_t)toks.n, NULL, g, cb, user, st, t_call, err);
    tn_tokens_free(&toks);
    tn_text_spans_free(&content);
    tn_buf_free(&text);
    stats_finish(s, st);
    return rc;
}

/* ---------------------------------------------------------------- images */

/* What replaces each image marker before tokenizing, with one placeholder
 * token that is then expanded to the image's rows. Gemma 3: its image
 * sequence (HF Gemma3Processor: "\n\n" + boi + image tokens + eoi +
 * "\n\n"). Gemma 4: "<|image>" rows "<image|>" (llama.cpp's mtmd for
 * projector gemma4v; the chat template writes "<|image|>", the soft token,
 * where an image goes). */
#define IMAGE_START "<start_of_image>"
#define IMAGE_END "<end_of_image>"
#define IMAGE_SOFT "<image_soft_token>"
#define IMAGE4_START "<|image>"
#define IMAGE4_END "<image|>"
#define IMAGE4_SOFT "<|image|>"

typedef struct image_tokens {
    int32_t start, end, soft;
    const char *seq;  /* the text a marker becomes */
    const char *soft_s, *start_s, *end_s;
} image_tokens;

static bool find_model_image_tokens(const tn_model *m, const tn_tokenizer *tok,
                                    image_tokens *it) {
    const bool g4 = m && tn_model_arch(m) == TN_ARCH_GEMMA4;
    it->start_s = g4 ? IMAGE4_START : IMAGE_START;
    it->end_s = g4 ? IMAGE4_END : IMAGE_END;
    it->soft_s = g4 ? IMAGE4_SOFT : IMAGE_SOFT;
    it->seq = g4 ? IMAGE4_START IMAGE4_SOFT IMAGE4_END
                 : "\n\n" IMAGE_START IMAGE_SOFT IMAGE_END "\n\n";
    if (!tok)
        return false;
    it->start = tn_tokenizer_find(tok, it->start_s, strlen(it->start_s));
    it->end = tn_tokenizer_find(tok, it->end_s, strlen(it->end_s));
    it->soft = tn_tokenizer_find(tok, it->soft_s, strlen(it->soft_s));
    return it->start >= 0 && it->end >= 0 && it->soft >= 0;
}

static bool find_image_tokens(const tn_session *s, image_tokens *it) {
    return find_model_image_tokens(s ? s->model : NULL, s ? s->tok : NULL, it);
}

bool tn_model_takes_images(const tn_model *model) {
    image_tokens it;
    return model && find_model_image_tokens(model, tn_model_tokenizer(model), &it);
}

int32_t tn_session_image_cost(const tn_session *s, int32_t n_image_tokens) {
    image_tokens it;
    if (!find_image_tokens(s, &it) || n_image_tokens < 0)
        return -1;
    return n_image_tokens + 2;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Identity of an image: FNV-1a over its embedding bytes and shape. */
static uint64_t image_hash(const tn_image_embd *im) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const uint8_t *p = (const uint8_t *)im->embd;
    const size_t nb = (size_t)im->n_tokens * (size_t)im->n_embd * sizeof(float);
    for (size_t i = 0; i < nb; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return mix64(h ^ ((uint64_t)im->n_tokens << 32 | (uint32_t)im->n_embd));
}

static int check_images(const tn_session *s, const tn_image_embd *images, int32_t n_images,
                        tn_error *err) {
    if (n_images < 0 || (n_images > 0 && !images))
        return tn_fail(err, TN_ERR_INVALID, "bad image list");
    image_tokens it;
    if (n_images > 0 && !find_image_tokens(s, &it))
        return tn_fail(err, TN_ERR_UNSUPPORTED,
                       "%s: this model takes no images (its vocabulary has no %s/%s tokens)",
                       tn_model_path(s->model), it.start_s, it.end_s);
    const int32_t E = tn_model_n_embd(s->model);
    for (int32_t i = 0; i < n_images; i++) {
        if (!images[i].embd || images[i].n_tokens < 1)
            return tn_fail(err, TN_ERR_INVALID, "image %d has no embeddings", i + 1);
        if (images[i].n_embd != E)
            return tn_fail(err, TN_ERR_INVALID,
                           "image %d: its embeddings are %d wide, the model's %d (a vision "
                           "projector made for another model?)",
                           i + 1, images[i].n_embd, E);
    }
    return TN_OK;
}

static size_t count_markers(const char *text) {
    size_t n = 0;
    for (const char *p = text; p && (p = strstr(p, TN_IMAGE_MARKER)); p += strlen(TN_IMAGE_MARKER))
        n++;
    return n;
}

/* text with n markers in front (the images of a message without markers). */
static char *with_markers(const char *text, int32_t n) {
    const size_t lm = strlen(TN_IMAGE_MARKER), lt = strlen(text);
    char *out = malloc((size_t)n * lm + lt + 1);
    if (!out)
        return NULL;
    for (int32_t i = 0; i < n; i++)
        memcpy(out + (size_t)i * lm, TN_IMAGE_MARKER, lm);
    memcpy(out + (size_t)n * lm, text, lt + 1);
    return out;
}

typedef struct image_prompt {
    int32_t *ids;
    uint64_t *keys;
    img_span *spans;
    int32_t n;
    prompt_plan plan;
} image_prompt;

static void image_prompt_free(image_prompt *ip) {
    free(ip->ids);
    free(ip->keys);
    free(ip->spans);
    memset(ip, 0, sizeof *ip);
}

/* Rendered text with markers -> the prompt's rows: each marker becomes the
 * image sequence, the text is tokenized as a whole (so "\n\n" merges with
 * its neighbours exactly as in the reference processor), then each
 * placeholder token is expanded into the image's rows. */
/* The content spans of text[from, to) copied to `at` in another buffer. */
static int copy_spans(const tn_text_spans *in, size_t from, size_t to, size_t at,
                      tn_text_spans *out) {
    for (size_t k = 0; in && k < in->n; k++) {
        const size_t a = in->v[k].start > from ? in->v[k].start : from;
        const size_t e = in->v[k].start + in->v[k].len;
        const size_t b = e < to ? e : to;
        if (a >= b)
            continue;
        if (out->n == out->cap) {
            const size_t cap = out->cap ? out->cap * 2 : 8;
            tn_text_span *v = realloc(out->v, cap * sizeof *v);
            if (!v)
                return TN_ERR_NOMEM;
            out->v = v;
            out->cap = cap;
        }
        out->v[out->n++] = (tn_text_span){at + (a - from), b - a};
    }
    return TN_OK;
}

static int expand_images(tn_session *s, const tn_buf *text, const tn_text_spans *content,
                         bool with_bos, const tn_image_embd *images, int32_t n_images,
                         image_prompt *out, tn_error *err) {
    memset(out, 0, sizeof *out);
    image_tokens it;
    if (!find_image_tokens(s, &it))
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: this model takes no images",
                       tn_model_path(s->model));
    const char *seq = it.seq;
    const size_t lm = strlen(TN_IMAGE_MARKER);
    /* The image sequence is markup (its control tokens must match); the
     * text around the markers keeps its content spans. */
    tn_buf t = {0};
    tn_text_spans t_content = {0};
    int32_t markers = 0;
    int rc = TN_OK;
    const char *base = text->data ? text->data : "";
    const char *p = base;
    for (const char *m; rc == TN_OK && (m = strstr(p, TN_IMAGE_MARKER)); p = m + lm, markers++) {
        rc = copy_spans(content, (size_t)(p - base), (size_t)(m - base), t.len, &t_content);
        if (rc == TN_OK && (rc = tn_buf_append(&t, p, (size_t)(m - p))) == TN_OK)
            rc = tn_buf_append_str(&t, seq);
    }
    if (rc == TN_OK)
        rc = copy_spans(content, (size_t)(p - base), strlen(base), t.len, &t_content);
    if (rc == TN_OK)
        rc = tn_buf_append_str(&t, p);
    if (rc != TN_OK) {
        tn_buf_free(&t);
        tn_text_spans_free(&t_content);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    if (markers != n_images) {
        tn_buf_free(&t);
        tn_text_spans_free(&t_content);
        /* The four forms in full, for translations (see ask_impl). */
        if (markers == 1 && n_images == 1)
            return tn_fail(err, TN_ERR_INVALID, "the prompt has %d image marker for %d image",
                           markers, n_images);
        if (markers == 1)
            return tn_fail(err, TN_ERR_INVALID, "the prompt has %d image marker for %d images",
                           markers, n_images);
        if (n_images == 1)
            return tn_fail(err, TN_ERR_INVALID, "the prompt has %d image markers for %d image",
                           markers, n_images);
        return tn_fail(err, TN_ERR_INVALID, "the prompt has %d image markers for %d images",
                       markers, n_images);
    }
    tn_tokens raw = {0};
    /* Each image's rows replace one placeholder token: the text's own
     * bound holds for the whole. */
    rc = tokenize_rendered(s, &t, &t_content, with_bos, with_bos ? FIT_CHAT : FIT_TURN, &raw,
                           err);
    tn_buf_free(&t);
    tn_text_spans_free(&t_content);
    if (rc != TN_OK) {
        tn_tokens_free(&raw);
        return rc;
    }
    int64_t total = (int64_t)raw.n, n_soft = 0;
    for (size_t i = 0; i < raw.n; i++)
        n_soft += raw.ids[i] == it.soft;
    if (n_soft != n_images) {
        tn_tokens_free(&raw);
        return tn_fail(err, TN_ERR_INVALID,
                       "the text itself contains the image placeholder token %s", it.soft_s);
    }
    for (int32_t i = 0; i < n_images; i++)
        total += images[i].n_tokens - 1;
    if (total > INT32_MAX / 2) {
        tn_tokens_free(&raw);
        return overflowed(err, tn_fail(err, TN_ERR_OVERFLOW, "the prompt is too long"), total,
                          fit_room(s, with_bos ? FIT_CHAT : FIT_TURN), false);
    }
    out->ids = malloc((size_t)total * sizeof *out->ids);
    out->keys = calloc((size_t)total, sizeof *out->keys);
    out->spans = calloc((size_t)(n_images > 0 ? n_images : 1), sizeof *out->spans);
    if (!out->ids || !out->keys || !out->spans) {
        tn_tokens_free(&raw);
        image_prompt_free(out);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    int32_t at = 0, img = 0;
    for (size_t i = 0; i < raw.n; i++) {
        if (raw.ids[i] != it.soft) {
            out->ids[at++] = raw.ids[i];
            continue;
        }
        const tn_image_embd *im = &images[img];
        const uint64_t h = image_hash(im);
        out->spans[img] = (img_span){at, im->n_tokens, im->embd};
        for (int32_t r = 0; r < im->n_tokens; r++) {
            out->ids[at] = it.soft;
            out->keys[at++] = mix64(h + (uint64_t)r) | 1;
        }
        out->plan.n_image_rows += im->n_tokens;
        img++;
    }
    tn_tokens_free(&raw);
    out->n = at;
    out->plan.keys = out->keys;
    out->plan.spans = out->spans;
    out->plan.n_spans = n_images;
    return TN_OK;
}

static int ask_images_body(tn_session *s, const char *user_text, const tn_image_embd *images,
                           int32_t n_images, const tn_gen_params *g, tn_session_token_cb cb,
                           void *user, tn_session_stats *st, double t_call, tn_error *err) {
    int rc;
    if ((rc = pin_if_none(s, st, err)) != TN_OK)
        return rc;
    char *owned = NULL;
    if (n_images > 0 && count_markers(user_text) == 0) {
        if (!(owned = with_markers(user_text, n_images)))
            return tn_fail(err, TN_ERR_NOMEM, "out of memory");
        user_text = owned;
    }
    tn_buf text = {0};
    tn_text_spans content = {0};
    tn_chat_options o = tn_chat_default_options();
    o.enable_thinking = g->thinking;
    image_prompt ip = {0};
    rc = tn_chat_render_turn_spans(s->chat_kind, has_system(s), user_text, &o, &text, &content,
                                   err);
    if (rc == TN_OK)
        rc = expand_images(s, &text, &content, false, images, n_images, &ip, err);
    if (rc == TN_OK)
        rc = ask_impl(s, ip.ids, ip.n, &ip.plan, g, cb, user, st, t_call, err);
    image_prompt_free(&ip);
    tn_text_spans_free(&content);
    tn_buf_free(&text);
    free(owned);
    stats_finish(s, st);
    return rc;
}

static int chat_images_body(tn_session *s, const tn_session_message *messages,
                            int32_t n_messages, const tn_image_embd *images, int32_t n_images,
                            size_t markers, const tn_gen_params *g, tn_session_token_cb cb,
                            void *user, tn_session_stats *st, double t_call, tn_error *err) {
    int32_t last_user = -1;
    for (int32_t i = 0; i < n_messages; i++)
        if (messages[i].role && !strcmp(messages[i].role, "user"))
            last_user = i;
    /* Images without markers go in front of the last user message. */
    tn_session_message *copy = NULL;
    char *owned = NULL;
    if (n_images > 0 && markers == 0) {
        if (last_user < 0)
            return tn_fail(err, TN_ERR_INVALID, "images need a user message");
        copy = malloc((size_t)n_messages * sizeof *copy);
        owned = with_markers(messages[last_user].content ? messages[last_user].content : "",
                             n_images);
        if (!copy || !owned) {
            free(copy);
            free(owned);
            return tn_fail(err, TN_ERR_NOMEM, "out of memory");
        }
        memcpy(copy, messages, (size_t)n_messages * sizeof *copy);
        copy[last_user].content = owned;
        messages = copy;
    }
    tn_buf text = {0};
    tn_text_spans content = {0};
    image_prompt ip = {0};
    int rc = render_chat_text(s, messages, n_messages, g, &text, &content, err);
    if (rc == TN_OK)
        rc = expand_images(s, &text, &content, true, images, n_images, &ip, err);
    if (rc == TN_OK)
        rc = chat_impl(s, ip.ids, ip.n, &ip.plan, g, cb, user, st, t_call, err);
    image_prompt_free(&ip);
    tn_text_spans_free(&content);
    tn_buf_free(&text);
    free(copy);
    free(owned);
    stats_finish(s, st);
    return rc;
}

/* ---------------------------------------------------------- entry points */

/* The markers in a prompt's user text (tokens have none). */
static size_t prompt_markers(const tn_prompt *p) {
    if (p->kind == TN_PROMPT_TEXT)
        return count_markers(p->text);
    size_t n = 0;
    for (int32_t i = 0; p->kind == TN_PROMPT_MESSAGES && i < p->n_messages; i++)
        n += count_markers(p->messages[i].content);
    return n;
}

/* Every request, whichever entry it came through: the prologue they all
 * share, then the body for its kind. with_images: the images (and markers)
 * are asked for (an _images call, or a prompt with images set); even then
 * a prompt with neither images nor markers runs as the plain call, so that
 * models without image support answer it too. The prompt is well formed
 * (the caller checked its arguments). */
static int run_prompt(tn_session *s, const tn_prompt *p, bool with_images,
                      const tn_gen_params *gen, tn_session_token_cb cb, void *user,
                      tn_session_stats *st, tn_error *err) {
    const double t_call = tn_now_ms();
    const size_t markers = with_images ? prompt_markers(p) : 0;
    const bool images = with_images && (p->n_images != 0 || markers > 0);
    const int text = p->kind == TN_PROMPT_TOKENS ? NO_TEXT
                     : p->kind == TN_PROMPT_TEXT ? ASK_TEXT
                                                 : CHAT_TEXT;
    const tn_gen_params *g = gen ? gen : &s->params.gen;
    /* The filter follows the text one accepted token at a time; the drafts
     * a verify step checks would need it at every row: no speculation. */
    tn_gen_params unspeculated;
    if (g->constrain != TN_CONSTRAIN_NONE && g->drafter) {
        unspeculated = *g;
        unspeculated.drafter = NULL;
        g = &unspeculated;
    }
    int rc = check_request(s, g, text, p->images, images ? p->n_images : 0, err);
    if (rc != TN_OK)
        return rc;
    begin_call(s);
    switch (p->kind) {
    case TN_PROMPT_TOKENS:
        return ask_tokens_body(s, p->tokens, p->n_tokens, g, cb, user, st, t_call, err);
    case TN_PROMPT_TEXT:
        if (images)
            return ask_images_body(s, p->text, p->images, p->n_images, g, cb, user, st, t_call,
                                   err);
        return ask_text_body(s, p->text, g, cb, user, st, t_call, err);
    case TN_PROMPT_MESSAGES:
        if (images)
            return chat_images_body(s, p->messages, p->n_messages, p->images, p->n_images,
                                    markers, g, cb, user, st, t_call, err);
        return chat_text_body(s, p->messages, p->n_messages, g, cb, user, st, t_call, err);
    }
    /* Cannot happen: check_prompt and the wrappers give a known kind. */
    return tn_fail(err, TN_ERR_INVALID, "tn_prompt.kind is %d; expected TN_PROMPT_TEXT, "
                   "TN_PROMPT_TOKENS or TN_PROMPT_MESSAGES", (int)p->kind);
}

/* A prompt from outside: everything run_prompt relies on, each fault named
 * by its field. Fields are compared as int: a kind read from anywhere may
 * hold any value. */
static int check_prompt(const tn_prompt *p, tn_error *err) {
    const int kind = (int)p->kind;
    if (kind != TN_PROMPT_TEXT && kind != TN_PROMPT_TOKENS && kind != TN_PROMPT_MESSAGES)
        return tn_fail(err, TN_ERR_INVALID, "tn_prompt.kind is %d; expected TN_PROMPT_TEXT, "
                       "TN_PROMPT_TOKENS or TN_PROMPT_MESSAGES", kind);
    const char *name = kind == TN_PROMPT_TEXT     ? "TN_PROMPT_TEXT"
                       : kind == TN_PROMPT_TOKENS ? "TN_PROMPT_TOKENS"
                                                  : "TN_PROMPT_MESSAGES";
    /* A field of another kind: the prompt was filled for one kind and
     * labelled another, and running it would ignore what the caller meant. */
    const char *stray = NULL;
    if (kind != TN_PROMPT_TEXT && p->text)
        stray = "text";
    else if (kind != TN_PROMPT_TOKENS && (p->tokens || p->n_tokens))
        stray = p->tokens ? "tokens" : "n_tokens";
    else if (kind != TN_PROMPT_MESSAGES && (p->messages || p->n_messages))
        stray = p->messages ? "messages" : "n_messages";
    if (stray)
        return tn_fail(err, TN_ERR_INVALID,
                       "tn_prompt.%s is set on a %s prompt; only the fields of its kind may be",
                       stray, name);
    if (kind == TN_PROMPT_TOKENS && (p->images || p->n_images))
        return tn_fail(err, TN_ERR_INVALID,
                       "a TN_PROMPT_TOKENS prompt takes no images: an image goes where its "
                       "marker is in the text (use TN_PROMPT_TEXT or TN_PROMPT_MESSAGES)");
    if (kind == TN_PROMPT_TEXT && !p->text)
        return tn_fail(err, TN_ERR_INVALID,
                       "tn_prompt.text is NULL; a TN_PROMPT_TEXT prompt needs its text");
    const struct {
        const char *array, *count;
        const void *ptr;
        int32_t n;
    } lists[] = {
        {"tokens", "n_tokens", p->tokens, p->n_tokens},
        {"messages", "n_messages", p->messages, p->n_messages},
        {"images", "n_images", p->images, p->n_images},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        if (lists[i].n < 0)
            return tn_fail(err, TN_ERR_INVALID, "tn_prompt.%s is %d; a count cannot be negative",
                           lists[i].count, lists[i].n);
        if (lists[i].n > 0 && !lists[i].ptr)
            return tn_fail(err, TN_ERR_INVALID, "tn_prompt.%s is NULL with %s = %d",
                           lists[i].array, lists[i].count, lists[i].n);
    }
    return TN_OK;
}

int tn_session_run(tn_session *s, const tn_prompt *prompt, const tn_gen_params *gen,
                   tn_session_token_cb cb, void *user, tn_session_stats *stats, tn_error *err) {
    tn_session_stats local;
    tn_session_stats *st = stats_start(stats, &local);
    if (!s || !prompt)
        return tn_fail(err, TN_ERR_INVALID, "tn_session_run: bad arguments");
    int rc = check_prompt(prompt, err);
    if (rc != TN_OK)
        return rc;
    return run_prompt(s, prompt, prompt->images != NULL, gen, cb, user, st, err);
}

/* The calls that came before tn_prompt, each tn_session_run with its prompt
 * filled in, after its own argument check (whose message names it). */

int tn_session_ask_tokens(tn_session *s, const int32_t *tokens, int32_t n_tokens,
                          const tn_gen_params *gen, tn_session_token_cb cb, void *user,
                          tn_session_stats *stats, tn_error *err) {
    tn_session_stats local;
    tn_session_stats *st = stats_start(stats, &local);
    if (!s || n_tokens < 0 || (n_tokens > 0 && !tokens))
        return tn_fail(err, TN_ERR_INVALID, "tn_session_ask_tokens: bad arguments");
    const tn_prompt p = {.kind = TN_PROMPT_TOKENS, .tokens = tokens, .n_tokens = n_tokens};
    return run_prompt(s, &p, false, gen, cb, user, st, err);
}

int tn_session_ask(tn_session *s, const char *user_text, const tn_gen_params *gen,
                   tn_session_token_cb cb, void *user, tn_session_stats *stats, tn_error *err) {
    tn_session_stats local;
    tn_session_stats *st = stats_start(stats, &local);
    if (!s || !user_text)
        return tn_fail(err, TN_ERR_INVALID, "tn_session_ask: bad arguments");
    const tn_prompt p = {.kind = TN_PROMPT_TEXT, .text = user_text};
    return run_prompt(s, &p, false, gen, cb, user, st, err);
}

int tn_session_chat(tn_session *s, const tn_session_message *messages, int32_t n_messages,
                    const tn_gen_params *gen, tn_session_token_cb cb, void *user,
                    tn_session_stats *stats, tn_error *err) {
    tn_session_stats local;
    tn_session_stats *st = stats_start(stats, &local);
    if (!s || n_messages < 0 || (n_messages > 0 && !messages))
        return tn_fail(err, TN_ERR_INVALID, "tn_session_chat: bad arguments");
    const tn_prompt p = {
        .kind = TN_PROMPT_MESSAGES, .messages = messages, .n_messages = n_messages};
    return run_prompt(s, &p, false, gen, cb, user, st, err);
}

/* The images are asked for even when `images` is NULL: a marker without an
 * image is refused here, where tn_session_ask takes it as text. */
int tn_session_ask_images(tn_session *s, const char *user_text, const tn_image_embd *images,
                          int32_t n_images, const tn_gen_params *gen, tn_session_token_cb cb,
                          void *user, tn_session_stats *stats, tn_error *err) {
    tn_session_stats local;
    tn_session_stats *st = stats_start(stats, &local);
    if (!s || !user_text)
        return tn_fail(err, TN_ERR_INVALID, "tn_session_ask_images: bad arguments");
    const tn_prompt p = {
        .kind = TN_PROMPT_TEXT, .text = user_text, .images = images, .n_images = n_images};
    return run_prompt(s, &p, true, gen, cb, user, st, err);
}

int tn_session_chat_images(tn_session *s, const tn_session_message *messages,
                           int32_t n_messages, const tn_image_embd *images, int32_t n_images,
                           const tn_gen_params *gen, tn_session_token_cb cb, void *user,
                           tn_session_stats *stats, tn_error *err) {
    tn_session_stats local;
    tn_session_stats *st = stats_start(stats, &local);
    if (!s || n_messages < 0 || (n_messages > 0 && !messages))
        return tn_fail(err, TN_ERR_INVALID, "tn_session_chat_images: bad arguments");
    const tn_prompt p = {.kind = TN_PROMPT_MESSAGES,
                         .messages = messages,
                         .n_messages = n_messages,
                         .images = images,
                         .n_images = n_images};
    return run_prompt(s, &p, true, gen, cb, user, st, err);
}
