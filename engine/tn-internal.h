/* Shared internals of libtern: error reporting and small helpers. */
#ifndef TN_INTERNAL_H
#define TN_INTERNAL_H

#include "tern.h"

#include <stdarg.h>

#if defined(__GNUC__)
#define TN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TN_PRINTF(a, b)
#endif

/* Fills err (when non-NULL) and returns code, so callers can write
 * `return tn_fail(err, TN_ERR_FORMAT, "%s: ...", path);` */
int tn_fail(tn_error *err, int code, const char *fmt, ...) TN_PRINTF(3, 4);
int tn_vfail(tn_error *err, int code, const char *fmt, va_list ap);
void tn_error_clear(tn_error *err);

/* The file of part k (0: the one opened) of a model, NULL past the last
 * (tn_gguf_n_parts). */
const char *tn_gguf_part_path(const tn_gguf *g, int32_t k);

/* A file mapped for reading: a SIGBUS at an address in [base, base + size)
 * during a guarded pass means `path` shrank under its mapping. */
typedef struct tn_read_span {
    const void *base;
    size_t size;
    const char *path;
} tn_read_span;

/* Runs fn(arg), a load-time pass over mapped files, so that a file that
 * shrinks under it (truncated or rewritten in place) is an error instead of
 * the end of the process: a SIGBUS on this thread at an address inside one
 * of the spans jumps back out of fn, and this returns TN_ERR_IO ("'PATH'
 * shrank while it was being read ..."); TN_OK otherwise. fn must be able to
 * stop at any read of the mapping: it takes no lock and allocates nothing
 * that only it knows of (its caller allocates before, frees after, and
 * treats what fn was writing as garbage). Costs no system call without a
 * fault. engine/error.c has the handler (shared with tn_sigbus_say); `pass`
 * names the pass for the test hook below. */
int tn_guarded_read(const tn_read_span *spans, int n_spans, const char *pass,
                    void (*fn)(void *arg), void *arg, tn_error *err);

/* fn(ctx, ith, nth), one slot of a pool task, under the same guard (no
 * test hook, no message): the index of the span a SIGBUS on this thread
 * cut it short in, or -1 when it ran to its end. For a decode step's
 * tasks (engine/forward.c), on every thread that runs them; fn must be
 * able to stop at any read of the mapping, as for tn_guarded_read. The
 * handler must be installed first (tn_read_guard_install). */
int tn_guarded_task(const tn_read_span *spans, int n_spans, void (*fn)(void *, int, int),
                    void *ctx, int ith, int nth);
void tn_read_guard_install(void);
/* A whole step under the guard, as a decode step runs (engine/forward.c):
 * fn(arg, 0, 1) on the calling thread under tn_guarded_task, and every
 * slot of every task it hands to cpu's pool (NULL: none) under
 * tn_guarded_task on whichever thread claims it (tn_cpu_set_task_wrap),
 * so that a fault in a worker's slot ends that slot only and the barrier
 * still completes. The index of the span a fault cut the step short in,
 * or -1 when none did (a slot that faulted does not stop the step, which
 * may have run to its end: its results are then garbage). fn must own
 * nothing a jump would lose (tn_guarded_read's contract); it must be the
 * only user of cpu meanwhile. cpu must not be NULL where fn runs matrix
 * products: without a pool a product allocates its scratch per call, and a
 * fault jumps over its free (tn_cpu_new(1) starts no thread). Cost: one
 * sigsetjmp (no system call) per step and per slot. Used by the decode
 * step, the DFlash and MTP drafters' steps and a vision tower's encoding. */
struct tn_cpu;
int tn_guarded_step(struct tn_cpu *cpu, const tn_read_span *spans, int n_spans,
                    void (*fn)(void *arg, int ith, int nth), void *arg);
/* The error of a file cut short under a guarded read: TN_ERR_IO, "'PATH'
 * shrank while it was being read ...". */
int tn_fail_shrank(tn_error *err, const char *path);

/* A file the engine writes (a GGUF, a pin snapshot) that could not be
 * written: TN_ERR_IO, "PATH: cannot write: CAUSE", CAUSE tn_write_cause's
 * words. The cause is part of the format (one msgid per cause), not an
 * argument: a translation shows the whole sentence in the user's language,
 * where an argument would stay English. */
int tn_fail_write(tn_error *err, const char *path, int errnum);

/* Tests only: every write of the engine's writers (tn_gguf_writer_write, a
 * pin snapshot, a repack cache file) to a path that ends in `suffix` fails
 * with errnum, as a full disk or a used-up quota would (neither can be made
 * without root). NULL removes it. Set it while nothing writes. */
void tn_test_fail_writes(const char *suffix, int errnum);
/* The errno a write to path fails with under tn_test_fail_writes, else 0. */
int tn_test_write_errno(const char *path);

/* A load's cancel point (tn_model_params.cancelled, docs/MODEL.md,
 * "Cancelling a load"). tn_model_load arms it on its own thread for the
 * load's length (tn_load_cancel_arm, then _disarm). tn_load_cancelled asks
 * the caller's function (once it said yes, it stays yes, without asking
 * again); false when nothing is armed on this thread. tn_load_poll, called
 * inside a guarded pass (tn_guarded_read) at a point where the pass holds
 * nothing a jump would lose, leaves the pass when the load is cancelled:
 * tn_guarded_read then returns TN_ERR_CANCELLED, and its caller cleans up as
 * after a file cut short. Outside a guarded pass it does nothing. */
typedef struct tn_load_state {
    bool (*cancelled)(void *user);
    void *user;
    bool said_yes;
    void (*progress)(float fraction, void *user);
    void *progress_user;
    uint64_t done, total;     /* bytes of the weights' passes */
    uint64_t repack_expected; /* of total: the repack's, as expected */
    float reported;           /* the last fraction given */
} tn_load_state;
/* A caller's callback may itself load a model on this thread: arm keeps
 * the state it replaces in *outer, and disarm puts it back, so that the
 * outer load can still be cancelled and still reports its progress. */
void tn_load_cancel_arm(bool (*cancelled)(void *user), void *user, tn_load_state *outer);
void tn_load_cancel_disarm(const tn_load_state *outer);
bool tn_load_cancelled(void);
void tn_load_poll(void);
/* The error of a load the question stopped: TN_ERR_CANCELLED, "PATH:
 * loading was cancelled" (the model's, a drafter's, a projector's). */
int tn_load_fail_cancelled(tn_error *err, const char *path);

/* A load's progress (tn_model_params.progress), counted in bytes of the
 * weights' passes: tn_load_progress_arm for the load's length (the cancel
 * disarm ends it too); _expect says how many bytes of work remain from
 * here, _add counts bytes done, _end says the load is complete. The
 * fraction given is never less than the one before and stays below 1
 * until _end, whatever the estimates did. Nothing armed: nothing done. */
void tn_load_progress_arm(void (*progress)(float fraction, void *user), void *user);
void tn_load_progress_expect(uint64_t remaining_bytes);
/* The same, of which repack_bytes are the repack's, as expected before the
 * repack cache decides; tn_load_progress_repack_begins, at the start of a
 * repack pass, puts what that pass will read in their place. */
void tn_load_progress_expect_repack(uint64_t remaining_bytes, uint64_t repack_bytes);
void tn_load_progress_repack_begins(uint64_t pass_bytes);
void tn_load_progress_add(uint64_t bytes);
/* Whether this load reports progress: the estimates are skipped otherwise. */
bool tn_load_progress_armed(void);
void tn_load_progress_end(void);

/* Tests only: hook(pass, user) runs inside each guarded pass, armed, before
 * fn reads anything (a test truncates the file there). NULL removes it. */
void tn_test_read_guard_hook(void (*hook)(const char *pass, void *user), void *user);

/* The mappings of g (its file and every part of a split model), for
 * tn_guarded_read: *n of them, malloc'd (NULL, *n 0, without memory). */
tn_read_span *tn_gguf_read_spans(const tn_gguf *g, int *n);

/* tn_guarded_read over g's mappings (none for an in-memory GGUF, or without
 * memory for their list: fn then runs unguarded). */
int tn_gguf_guarded_read(const tn_gguf *g, const char *pass, void (*fn)(void *arg), void *arg,
                         tn_error *err);

/* A message without arguments that the engine hands out as static text (the
 * chat-template warnings): the English text is the msgid, extracted by
 * xgettext's --keyword=TN_N_ (po/meson.build) like tn_fail's formats; the
 * caller translates it. libtern itself has no gettext. */
#define TN_N_(text) (text)

/* tn_gguf_get_int/float/bool/str for a reader that fails on a bad value:
 * TN_ERR_NOT_FOUND (err untouched) when the key is absent, so the caller
 * still decides between a default and "missing"; a key of another type, or
 * an unsigned one past INT64_MAX, fails with TN_ERR_FORMAT naming the key,
 * its type and the type wanted. */
int tn_gguf_read_int(const tn_gguf *g, const char *key, int64_t *out, tn_error *err);
int tn_gguf_read_float(const tn_gguf *g, const char *key, double *out, tn_error *err);
int tn_gguf_read_bool(const tn_gguf *g, const char *key, bool *out, tn_error *err);
int tn_gguf_read_str(const tn_gguf *g, const char *key, tn_str *out, tn_error *err);
/* tn_gguf_read_float held to [lo, hi]: a value that is not finite or lies
 * outside fails with TN_ERR_FORMAT naming the key, the value and the range.
 * The one check for the hyperparameters a model's numbers hang on (norm
 * epsilons, rope bases and factors, softcaps): a denormal epsilon is
 * positive, yet adds nothing. */
/* The ranges every published model lies well inside (docs/MODEL.md lists
 * the values real models give). Norm epsilons: 1e-6 to 1e-5. */
#define TN_EPS_MIN 1e-12
#define TN_EPS_MAX 0.1
/* Rope frequency bases: 10,000 (Llama 2, Gemma's sliding layers) to 1e6
 * (Qwen3, Gemma 4) and a few billion (context-extended Llama 3 fine-tunes). */
#define TN_ROPE_BASE_MIN 100.0
#define TN_ROPE_BASE_MAX 1e12
/* Rope scaling factors (linear or YaRN): 2 to 64 (gpt-oss: 32). */
#define TN_ROPE_FACTOR_MIN 0.01
#define TN_ROPE_FACTOR_MAX 1000.0
/* YaRN's attention factor: 1, or about 1 + 0.1 ln factor. */
#define TN_ROPE_ATTN_MIN 0.01
#define TN_ROPE_ATTN_MAX 100.0
/* Logit softcaps (0: none): Gemma's 30 (final) and 50 (attention). */
#define TN_SOFTCAP_MIN 1.0
#define TN_SOFTCAP_MAX 1000.0
/* Multipliers of embeddings, logits and attention scores (0: none):
 * sqrt(width) up to about 128, Granite-style 1/128 to 12. */
#define TN_SCALE_MIN 1e-4
#define TN_SCALE_MAX 1e4
int tn_gguf_read_float_in(const tn_gguf *g, const char *key, double lo, double hi, double *out,
                          tn_error *err);
/* An optional key through the same check: absent, it gives def and
 * TN_ERR_NOT_FOUND (the caller decides whether it was required); written as
 * def itself it is taken too, so that a file may spell out a default that
 * lies outside [lo, hi] (0 for "no softcap"). */
int tn_gguf_read_float_or(const tn_gguf *g, const char *key, double def, double lo, double hi,
                          double *out, tn_error *err);

/* Overflow-checked arithmetic: return false on overflow. */
static inline bool tn_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool tn_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* Milliseconds of the monotonic clock (for durations). */
#include <time.h>
static inline double tn_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Unaligned little-endian loads (GGUF is little-endian; Tern targets
 * little-endian hosts, checked at build time). */
#include <string.h>
static inline uint16_t tn_rd_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t tn_rd_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t tn_rd_u64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* splitmix64: the next number of the stream *state. tn_mkmodel's weights and
 * the sampler's seeding come from it: a change changes every demo model. */
static inline uint64_t tn_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* FNV-1a of n bytes (GGUF's key index; tn_mkmodel's per-tensor seeds). */
static inline uint64_t tn_fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}
static inline uint64_t tn_fnv1a_str(const char *s) { return tn_fnv1a(s, strlen(s)); }

/* The sampler's vectorizable e^x for x <= 0 (engine/sampler.c), for its
 * test against exp(). */
float tn_sampler_exp_neg(float x);
/* out[t] = e^((w[t] - max) * scale), four at a time where SSE2 is there. */
void tn_sampler_exp_neg_all(const float *w, float *out, int32_t n, float max, float scale);
/* The first index of the greatest value (NaNs never win, unless w[0] is one:
 * then 0), two passes (engine/sampler.c): greedy picks and drafters' argmax. */
int32_t tn_argmax(const float *w, int32_t n);

/* gpt-oss's harmony answers as text (chat.c; the session streams through
 * it for TN_CHAT_GPTOSS): messages, each "<|channel|>NAME<|message|>TEXT",
 * the next introduced by "<|end|><|start|>assistant", the last ended by
 * <|return|> (or <|call|>: a tool call). The analysis channel's text comes
 * out as "<think>TEXT</think>", as Qwen3's reasoning comes, so that the
 * app, the CLI and the server (reasoning_content) show it as thinking; the
 * other channels' text is the answer; roles and channel names are not text.
 * <|end|> ends a message, not the answer (tn_harmony_ends_message). Text
 * before any channel header (a model that does not follow the format) is
 * answer text. A message addressed to a recipient other than the assistant
 * ("to=functions.NAME" in its role or channel header: a tool call, whose
 * body is the call's arguments) is never analysis: its body is answer
 * text, and `recipient` keeps the name; with calls_as_text (the request
 * has tools) such a message is written whole, as the template shows a call
 * in history: "<|start|>assistant to=RECIPIENT<|channel|>commentary
 * json<|message|>BODY<|call|>" (the server's tool-call parser reads it;
 * <|call|> only when the message was ended by it or by <|end|>). A
 * function of the token stream alone. */
typedef struct tn_harmony {
    bool on;
    int32_t start, channel, message, end;
    int state; /* 0 body, 1 header, 2 channel name */
    char name[16];
    size_t n_name;
    bool think_open;
    int to_seen;        /* bytes of "to=" matched in the header */
    bool in_recipient;  /* after "to=", until a space or a control token */
    char recipient[64]; /* this message's recipient, NUL-terminated ("" none) */
    size_t n_recipient;
    bool calls_as_text; /* write addressed messages whole (set after init) */
    int32_t call;       /* <|call|> (-1: none) */
    bool in_call;       /* in the body of an addressed message written whole */
    bool called;        /* the answer stopped at <|call|> (tn_harmony_stop) */
} tn_harmony;

/* On when tok has the harmony tokens (tok NULL: off, a no-op filter). */
void tn_harmony_init(tn_harmony *h, const tn_tokenizer *tok);

/* TN_OK when n biases fit a vocabulary of n_vocab tokens (each token in
 * it, each bias finite, at most TN_LOGIT_BIAS_MAX); else TN_ERR_INVALID
 * and why. The session's check before a prefill and the sampler's. */
int tn_logit_bias_check(const tn_logit_bias *bias, int32_t n, int32_t n_vocab, tn_error *err);

/* The bytes of text tn_tokenize_spans has been given in this process, all
 * tokenizers together: how a test tells that a refusal came before any
 * encoding (tests/engine/test-session.c), without timing it. */
uint64_t tn_tokenizer_bytes_seen(void);
/* The ids given (tests). */
void tn_harmony_init_ids(tn_harmony *h, int32_t start, int32_t channel, int32_t message,
                         int32_t end);
/* out = what token (whose detokenized text is piece[0..len)) shows. */
int tn_harmony_piece(tn_harmony *h, int32_t token, const char *piece, size_t len, tn_buf *out);
/* out = the held-back text at the end (piece) as shown, and the closing
 * "</think>" of an analysis that did not end. */
int tn_harmony_finish(tn_harmony *h, const char *piece, size_t len, tn_buf *out);
bool tn_harmony_ends_message(const tn_harmony *h, int32_t token);
/* The answer stopped at end-of-generation token `token` (before
 * tn_harmony_finish). */
void tn_harmony_stop(tn_harmony *h, int32_t token);

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libtern reads GGUF in place and needs a little-endian host"
#endif

#endif
