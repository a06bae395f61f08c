/* Internals of speculative decoding: the drafter object (spec.c) with the
 * hooks the built-in drafters use beyond the public tn_drafter_ops, and the
 * per-session verification state the session's decode loop calls into. */
#ifndef TN_SPEC_H
#define TN_SPEC_H

#include "tern.h"

/* What the built-in drafters add to the public ops. Every hook may be NULL. */
typedef struct tn_drafter_hooks {
    /* A request starts with these sampling settings (the draft model
     * re-seeds its own sampler so that a request is reproducible). */
    int (*begin)(void *self, const tn_sampler_params *sp, tn_error *err);
    /* As tn_drafter_ops.propose; when q is not NULL the drafter may write
     * the distribution each token was DRAWN from, q[i * n_vocab ..], and set
     * *has_q (rejection sampling then uses it; else a draft is one-hot). */
    int32_t (*propose_q)(void *self, const int32_t *history, int32_t n_history,
                         int32_t max_draft, int32_t *draft, float *q, bool *has_q,
                         tn_error *err);
    /* Hidden states of the target rows at positions pos0 .. pos0 + n - 1
     * (tokens[n]; hidden[n][n_hidden_ids][n_embd]), after every decode of
     * the target while the drafter is in use. */
    int (*observe)(void *self, int32_t pos0, const int32_t *tokens, int32_t n,
                   const float *hidden, tn_error *err);
    /* How many leading rows of history the drafter already has features for. */
    int32_t (*known)(void *self, const int32_t *history, int32_t n_history);
    /* The target's context for the request (NULL when it ends): drafters
     * that read the target's KV memory (the MTP assistant) keep it. */
    void (*bind)(void *self, tn_ctx *ctx);
    /* tn_drafter_weights_check: TN_OK while the drafter's weights can be
     * read (NULL: it has none that can go). */
    int (*check)(void *self, tn_error *err);
} tn_drafter_hooks;

struct tn_drafter {
    const char *name;
    tn_drafter_ops ops;
    tn_drafter_hooks hooks;
    void *self;
    int32_t draft_max;
    int32_t block_size;       /* DFlash */
    const tn_model *target;   /* made for this model (NULL: any) */
    int32_t *hidden_ids;      /* target hidden states it reads (tn_ctx_capture_hidden ids) */
    int32_t n_hidden_ids;
};

/* Wraps a built-in drafter; ops.free releases self. On failure self is
 * released through ops.free. */
int tn_drafter_wrap(const char *name, const tn_drafter_ops *ops, const tn_drafter_hooks *hooks,
                    void *self, int32_t draft_max, const tn_model *target, tn_drafter **out,
                    tn_error *err);
/* A built-in drafter's constructor (DFlash, MTP), run as tn_model_load
 * runs a load: p.cancelled armed for its length (docs/MODEL.md,
 * "Cancelling a load"), and a failure once it said yes reported as the
 * cancel it is, naming path. */
typedef int (*tn_drafter_new_fn)(const tn_model *target, const char *path, tn_drafter_params p,
                                 tn_drafter **out, tn_error *err);
int tn_drafter_new_cancellable(tn_drafter_new_fn make, const tn_model *target, const char *path,
                               tn_drafter_params p, tn_drafter **out, tn_error *err);
/* Copies ids into d->hidden_ids. */
int tn_drafter_set_hidden_ids(tn_drafter *d, const int32_t *ids, int32_t n, tn_error *err);

/* The draft's vocabulary (tokenizer.ggml.tokens of draft, a file at
 * draft_path) must equal the target's token for token: TN_ERR_INVALID naming
 * the first differing token. When only one of them has a token list, that is
 * an error when require is true, else nothing is checked. */
/* A drafter that runs its own passes over mapped weights (DFlash, MTP:
 * its own file, and the target's embedding or head) runs each step under
 * tn_guarded_step with these spans: a file cut short under the step is
 * TN_ERR_IO naming it ("'PATH' shrank while it was being read ...") instead
 * of a SIGBUS, and the drafter remembers it, as a model does (its weights
 * are gone): every later step fails at once with the same error, which
 * fails the generation that asked for the draft (spec.c passes a drafter's
 * error on). */
typedef struct tn_drafter_guard {
    struct tn_read_span *spans; /* the drafter's file, then the target's */
    int n_spans;
    int fault; /* 1 + the span a step faulted in, or 0 */
} tn_drafter_guard;
/* The spans of draft (its mappings) and of target (its file and repack
 * cache); TN_ERR_NOMEM. */
int tn_drafter_guard_init(tn_drafter_guard *g, const tn_gguf *draft, const tn_model *target,
                          tn_error *err);
void tn_drafter_guard_free(tn_drafter_guard *g);
/* TN_OK while no step of g met a file cut short; else that step's error. */
int tn_drafter_guard_check(const tn_drafter_guard *g, tn_error *err);
/* fn(arg, 0, 1) as one guarded step on cpu's pool (tn_guarded_step): TN_OK
 * when it ran to its end (fn's own result is the caller's), TN_ERR_IO with
 * the message when a file was cut short under this step or an earlier one. */
struct tn_cpu;
int tn_drafter_guard_run(tn_drafter_guard *g, struct tn_cpu *cpu,
                         void (*fn)(void *arg, int ith, int nth), void *arg, tn_error *err);

int tn_drafter_check_vocab(const tn_model *target, const tn_gguf *draft, const char *draft_path,
                           bool require, tn_error *err);

/* The built-in constructors' bodies (drafter-*.c). */
int32_t tn_lookup_propose(const int32_t *history, int32_t n_history, int32_t ngram_min,
                          int32_t ngram_max, int32_t max_draft, int32_t *draft);

/* ------------------------------------------------- the verification loop */

typedef struct tn_spec tn_spec;

int tn_spec_new(int32_t n_vocab, tn_spec **out, tn_error *err);
void tn_spec_free(tn_spec *sp);

/* A request starts: binds g->drafter (NULL: speculation off, nothing else
 * happens), checks it fits the target, turns on hidden-state capture when it
 * reads hidden states, and hands it the features of the rows already in the
 * KV that it lacks (computed in a scratch context: the KV is not touched).
 * Also clears the per-token flags. */
int tn_spec_begin(tn_spec *sp, tn_ctx *ctx, const tn_gen_params *g, const int32_t *kv_tokens,
                  int32_t n_kv, tn_error *err);
/* The request ended: capture off (plain decoding pays nothing). */
void tn_spec_end(tn_spec *sp, tn_ctx *ctx);
bool tn_spec_active(const tn_spec *sp);

/* After a decode of n target rows at pos0 outside tn_spec_step (prefill):
 * gives the drafter their hidden states when it reads them. */
int tn_spec_observe(tn_spec *sp, tn_ctx *ctx, int32_t pos0, const int32_t *tokens, int32_t n,
                    tn_error *err);

/* Result of tn_spec_pop. */
enum {
    TN_SPEC_NONE = 0,    /* nothing queued: sample from the logits as usual */
    TN_SPEC_DRAFTED = 1, /* an accepted draft: its KV row is already written and it
                            is already in the sampler's history */
    TN_SPEC_NEXT = 2,    /* the target's own next token, sampled by the step */
};

/* One verification step for `token`, the token just emitted and not yet
 * decoded, at position n_kv (history[0..n_kv] ends with it; the context's
 * kv_len is n_kv). Asks the drafter for up to min(draft_max, budget,
 * n_ctx - n_kv - 1) tokens, decodes [token, drafts] in one call, accepts
 * (greedy: while the target's pick equals the draft; else rejection
 * sampling) and queues the accepted drafts and the target's next token for
 * tn_spec_pop. On return the context holds rows for token and the accepted
 * drafts (kv_len = n_kv + 1 + accepted); the caller mirrors them as it pops.
 * With no draft this is exactly one plain decode and one sample. */
int tn_spec_step(tn_spec *sp, tn_ctx *ctx, tn_sampler *sampler, const int32_t *history,
                 int32_t n_kv, int32_t budget, tn_session_stats *st, tn_error *err);
/* Called once per token the decode loop considers: the next queued token
 * (TN_SPEC_NONE when the queue is empty, and the caller samples). Records
 * the token's flag (drafted or not) for the callback and the stats. */
int tn_spec_pop(tn_spec *sp, int32_t *token);
/* The flag of the token popped last; the flags of this request, one per
 * pop (the caller keeps the first generated_tokens). */
bool tn_spec_last_drafted(const tn_spec *sp);
/* The logits row of the verification the token popped last was picked
 * from (an accepted draft's or the target's next token's), valid until the
 * next step; NULL when it came from no step (TN_SPEC_NONE). */
const float *tn_spec_last_row(const tn_spec *sp);
const uint8_t *tn_spec_flags(const tn_spec *sp, int32_t *n);
/* The decode loop ended with n_generated tokens: keeps that many flags. */
void tn_spec_finish(tn_spec *sp, int32_t n_generated);

/* Speculative rejection sampling of one position (exposed for tests):
 * p = target distribution, q = the distribution the draft token d was drawn
 * from (NULL: d was chosen deterministically, q one-hot). Returns true when
 * d is accepted; else *out is drawn from normalize(max(0, p - q)). The
 * sampler's generator supplies the randomness; scratch holds n_vocab floats. */
bool tn_spec_accept_or_resample(const float *p, const float *q, int32_t n_vocab, int32_t d,
                                tn_sampler *sampler, float *scratch, int32_t *out);

#endif
