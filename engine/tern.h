/* libtern: the Tern inference engine.
 *
 * Plain C11, no GLib. Every fallible call returns TN_OK (0) or a negative
 * tn_status and, when the caller passes a tn_error, a message a user can act
 * on ("model.gguf: tensor 'blk.3.attn_q.weight' ends past the end of the file
 * (truncated download?)"). Nothing here calls exit() or abort() on input, and
 * every tn_*_free()/close() accepts NULL.
 */
#ifndef TERN_H
#define TERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TN_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------ errors */

typedef enum tn_status {
    TN_OK = 0,
    TN_ERR_IO = -1,          /* open/read/write/mmap failed */
    TN_ERR_FORMAT = -2,      /* the file is not what it claims, or is damaged */
    TN_ERR_UNSUPPORTED = -3, /* valid, but not something Tern can run */
    TN_ERR_INVALID = -4,     /* a bad argument from the caller */
    TN_ERR_NOMEM = -5,
    TN_ERR_OVERFLOW = -6,    /* does not fit (context, buffer) */
    TN_ERR_CANCELLED = -7,
    TN_ERR_NOT_FOUND = -8,
} tn_status;

#define TN_ERROR_MESSAGE_MAX 512

typedef struct tn_error {
    int code;                           /* a tn_status */
    char message[TN_ERROR_MESSAGE_MAX]; /* one line, no trailing newline */
    /* What a caller needs to show the message in the user's language
     * (docs/TRANSLATING.md): libtern has no gettext of its own. format is the
     * English printf format message was made from (a string literal, the
     * msgid), args its arguments as printed, NUL-separated, n_args of them;
     * format is NULL (or n_args < 0) when the message cannot be rebuilt. */
    const char *format;
    char args[TN_ERROR_MESSAGE_MAX];
    int n_args;
} tn_error;

const char *tn_status_name(int status);

/* err's message in a translated format (the caller's gettext of err->format,
 * whose conversions, %s or %2$s, take err's arguments in order or by
 * position): written to out (cap bytes, one line) and returned. English when
 * translated is NULL or does not fit err's arguments. */
const char *tn_error_format(const tn_error *err, const char *translated, char *out, size_t cap);

/* ------------------------------------------------------------ tensor types */

/* ggml type ids, exactly as GGUF files store them. */
typedef enum tn_type {
    TN_TYPE_F32 = 0,
    TN_TYPE_F16 = 1,
    TN_TYPE_Q4_0 = 2,
    TN_TYPE_Q4_1 = 3,
    TN_TYPE_Q5_0 = 6,
    TN_TYPE_Q5_1 = 7,
    TN_TYPE_Q8_0 = 8,
    TN_TYPE_Q8_1 = 9,
    TN_TYPE_Q2_K = 10,
    TN_TYPE_Q3_K = 11,
    TN_TYPE_Q4_K = 12,
    TN_TYPE_Q5_K = 13,
    TN_TYPE_Q6_K = 14,
    TN_TYPE_Q8_K = 15,
    TN_TYPE_IQ4_NL = 20,
    TN_TYPE_IQ4_XS = 23,
    TN_TYPE_BF16 = 30,
    TN_TYPE_COUNT_ = 40,
} tn_type;

/* Name as ggml spells it ("q4_K", "bf16"); NULL for an id Tern does not know. */
const char *tn_type_name(uint32_t type);
/* Parses a name case-insensitively ("Q4_K", "q8_0", "f32"); -1 if unknown. */
int tn_type_from_name(const char *name);
/* Values per block (1 for F32/F16/BF16) and bytes per block; 0 if unknown. */
size_t tn_type_block_size(uint32_t type);
size_t tn_type_block_bytes(uint32_t type);
/* True for the types Tern can dequantize (and so load weights of). */
bool tn_type_supported(uint32_t type);
/* Bytes of a row of n values (n must be a multiple of the block size);
 * returns 0 for an unknown type or a row that is not whole blocks. */
size_t tn_type_row_bytes(uint32_t type, uint64_t n);

/* Scalar reference conversions. n is a multiple of the block size. */
int tn_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
int tn_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

float tn_fp16_to_fp32(uint16_t h);
uint16_t tn_fp32_to_fp16(float f);
float tn_bf16_to_fp32(uint16_t h);
uint16_t tn_fp32_to_bf16(float f);

/* -------------------------------------------------------------------- GGUF */

typedef enum tn_gguf_type {
    TN_GGUF_U8 = 0,
    TN_GGUF_I8 = 1,
    TN_GGUF_U16 = 2,
    TN_GGUF_I16 = 3,
    TN_GGUF_U32 = 4,
    TN_GGUF_I32 = 5,
    TN_GGUF_F32 = 6,
    TN_GGUF_BOOL = 7,
    TN_GGUF_STRING = 8,
    TN_GGUF_ARRAY = 9,
    TN_GGUF_U64 = 10,
    TN_GGUF_I64 = 11,
    TN_GGUF_F64 = 12,
    TN_GGUF_TYPE_COUNT_ = 13,
} tn_gguf_type;

#define TN_GGUF_DEFAULT_ALIGNMENT 32
#define TN_MAX_DIMS 4

/* A string inside the mapped file: not NUL-terminated. */
typedef struct tn_str {
    const char *ptr;
    uint64_t len;
} tn_str;

/* A metadata value. Scalars are decoded; strings point into the mapping;
 * arrays of fixed-size elements point at their (possibly unaligned) raw
 * little-endian bytes; arrays of strings or arrays have one child per item. */
typedef struct tn_gguf_value tn_gguf_value;
struct tn_gguf_value {
    tn_gguf_type type;
    union {
        uint64_t u64; /* u8/u16/u32/u64 and bool */
        int64_t i64;  /* i8/i16/i32/i64 */
        double f64;   /* f32/f64 */
        tn_str str;
        struct {
            tn_gguf_type type;            /* element type */
            uint64_t n;                   /* element count */
            const uint8_t *data;          /* raw elements (fixed-size types) */
            const tn_gguf_value *items;   /* n children (string/array types) */
        } arr;
    } v;
};

typedef struct tn_gguf_tensor {
    tn_str name;
    uint32_t n_dims;
    uint64_t ne[TN_MAX_DIMS]; /* ne[0] is the contiguous row length; unused dims are 1 */
    uint32_t type;            /* tn_type */
    uint64_t offset;          /* relative to the data section */
    const void *data;         /* inside the mapping */
    uint64_t nbytes;
} tn_gguf_tensor;

typedef struct tn_gguf tn_gguf;

/* Maps and validates a file. Every count, length, dimension and offset is
 * checked against the file size; nothing is copied. */
int tn_gguf_open(const char *path, tn_gguf **out, tn_error *err);
/* The same over caller-owned memory that must outlive the handle. `name`
 * is used in messages. */
int tn_gguf_open_memory(const void *data, size_t size, const char *name, tn_gguf **out,
                        tn_error *err);
void tn_gguf_close(tn_gguf *g);

const char *tn_gguf_path(const tn_gguf *g);
uint32_t tn_gguf_version(const tn_gguf *g);
uint64_t tn_gguf_alignment(const tn_gguf *g);
uint64_t tn_gguf_file_size(const tn_gguf *g);
uint64_t tn_gguf_data_offset(const tn_gguf *g); /* absolute start of the data section */

int64_t tn_gguf_n_kv(const tn_gguf *g);
tn_str tn_gguf_kv_key(const tn_gguf *g, int64_t i);
const tn_gguf_value *tn_gguf_kv_value(const tn_gguf *g, int64_t i);
/* NULL when absent. */
const tn_gguf_value *tn_gguf_find(const tn_gguf *g, const char *key);

/* Typed getters: TN_OK, TN_ERR_NOT_FOUND when absent, TN_ERR_FORMAT when the
 * value has another type (any integer type converts to int when in range). */
int tn_gguf_get_int(const tn_gguf *g, const char *key, int64_t *out);
int tn_gguf_get_float(const tn_gguf *g, const char *key, double *out);
int tn_gguf_get_bool(const tn_gguf *g, const char *key, bool *out);
int tn_gguf_get_str(const tn_gguf *g, const char *key, tn_str *out);
/* Element i of an array of a fixed-size type, decoded. */
int64_t tn_gguf_arr_int(const tn_gguf_value *arr, uint64_t i);
double tn_gguf_arr_float(const tn_gguf_value *arr, uint64_t i);

int64_t tn_gguf_n_tensors(const tn_gguf *g);
const tn_gguf_tensor *tn_gguf_tensor_at(const tn_gguf *g, int64_t i);
const tn_gguf_tensor *tn_gguf_find_tensor(const tn_gguf *g, const char *name);

bool tn_str_eq(tn_str s, const char *cstr);

/* Writer. Keys keep insertion order; tensors are laid out in insertion
 * order, each aligned to the alignment. Data is produced at write time by
 * a callback, so multi-gigabyte models are never held in memory. */
typedef struct tn_gguf_writer tn_gguf_writer;
/* Fills dst (nbytes) with the tensor's data; returns TN_OK or an error. */
typedef int (*tn_gguf_fill_fn)(void *user, const char *name, void *dst, uint64_t nbytes,
                               tn_error *err);

tn_gguf_writer *tn_gguf_writer_new(void);
void tn_gguf_writer_free(tn_gguf_writer *w);
/* Replaces an existing key of the same name. general.alignment set here is
 * honoured by the layout. */
int tn_gguf_writer_set_u8(tn_gguf_writer *w, const char *key, uint8_t v);
int tn_gguf_writer_set_i8(tn_gguf_writer *w, const char *key, int8_t v);
int tn_gguf_writer_set_u16(tn_gguf_writer *w, const char *key, uint16_t v);
int tn_gguf_writer_set_i16(tn_gguf_writer *w, const char *key, int16_t v);
int tn_gguf_writer_set_u32(tn_gguf_writer *w, const char *key, uint32_t v);
int tn_gguf_writer_set_i32(tn_gguf_writer *w, const char *key, int32_t v);
int tn_gguf_writer_set_u64(tn_gguf_writer *w, const char *key, uint64_t v);
int tn_gguf_writer_set_i64(tn_gguf_writer *w, const char *key, int64_t v);
int tn_gguf_writer_set_f32(tn_gguf_writer *w, const char *key, float v);
int tn_gguf_writer_set_f64(tn_gguf_writer *w, const char *key, double v);
int tn_gguf_writer_set_bool(tn_gguf_writer *w, const char *key, bool v);
int tn_gguf_writer_set_str(tn_gguf_writer *w, const char *key, const char *v);
int tn_gguf_writer_set_strn(tn_gguf_writer *w, const char *key, const char *v, uint64_t len);
/* Array of a fixed-size type: `data` holds n elements in host layout. */
int tn_gguf_writer_set_arr(tn_gguf_writer *w, const char *key, tn_gguf_type elem_type,
                           const void *data, uint64_t n);
int tn_gguf_writer_set_arr_str(tn_gguf_writer *w, const char *key, const char *const *strs,
                               uint64_t n);
/* Arrays of arrays (and any other value) from a value tree; strings and
 * data are copied. */
int tn_gguf_writer_set_value(tn_gguf_writer *w, const char *key, const tn_gguf_value *v);

int tn_gguf_writer_add_tensor(tn_gguf_writer *w, const char *name, uint32_t type,
                              uint32_t n_dims, const uint64_t *ne, tn_gguf_fill_fn fill,
                              void *user);
/* Convenience: data copied now. */
int tn_gguf_writer_add_tensor_data(tn_gguf_writer *w, const char *name, uint32_t type,
                                   uint32_t n_dims, const uint64_t *ne, const void *data,
                                   uint64_t nbytes);
/* Writes to path.tmp-XXXXXX, fsyncs, renames over path. */
int tn_gguf_writer_write(tn_gguf_writer *w, const char *path, tn_error *err);

/* ----------------------------------------------------- model and inference */

/* Architectures of `general.architecture` that Tern runs. */
typedef enum tn_arch {
    TN_ARCH_LLAMA = 0,  /* Llama 2/3, Mistral-style */
    TN_ARCH_QWEN3 = 1,
    TN_ARCH_GEMMA3 = 2,
    TN_ARCH_GEMMA4 = 3, /* the dense Gemma 4 models (E2B, E4B, 31B) */
} tn_arch;

/* "llama", "qwen3", "gemma3". */
const char *tn_arch_name(tn_arch arch);

/* Immutable after load; may be shared by threads (one tn_ctx each). */
typedef struct tn_model tn_model;

typedef struct tn_model_params {
    bool load_tokenizer; /* default true; false skips the vocabulary */
} tn_model_params;

tn_model_params tn_model_default_params(void);

/* Maps the file and checks everything the forward pass relies on: the
 * architecture, every hyperparameter, every tensor's presence, shape and
 * type. Fails with one message naming the file and the first problem
 * (TN_ERR_UNSUPPORTED for an architecture or tensor type Tern does not run,
 * TN_ERR_FORMAT for a missing tensor or a wrong shape). */
int tn_model_load(const char *path, tn_model_params params, tn_model **out, tn_error *err);
void tn_model_free(tn_model *model);

tn_arch tn_model_arch(const tn_model *model);
int32_t tn_model_n_vocab(const tn_model *model);
int32_t tn_model_n_ctx_train(const tn_model *model);
int32_t tn_model_n_embd(const tn_model *model);
int32_t tn_model_n_layer(const tn_model *model);
int32_t tn_model_n_head(const tn_model *model);
int32_t tn_model_n_head_kv(const tn_model *model);
int32_t tn_model_head_dim(const tn_model *model);
uint64_t tn_model_n_params(const tn_model *model);
/* Bytes of weights in the file. */
uint64_t tn_model_weight_bytes(const tn_model *model);
/* Bytes of matrices copied at load into a faster layout for this CPU (0:
 * all used in place from the mapped file). The file's pages of those
 * matrices are dropped, so resident memory does not grow by this much
 * after the load. TERN_REPACK=0 in the environment turns it off. */
uint64_t tn_model_repacked_bytes(const tn_model *model);
/* The arithmetic of this model's forward passes on this machine: the CPU
 * kernel family (chosen once from CPUID at load) and the weight layout,
 * e.g. "avx512+bf16/x16". Results are bitwise reproducible between runs
 * with the same string; pin snapshots are keyed by it. */
const char *tn_model_arithmetic(const tn_model *model);
/* general.name, or the file name without directory. */
const char *tn_model_name(const tn_model *model);
/* One line: "NAME (gemma3, 1.00B params, Q4_0)", plus
 * " - demo model, random weights" when general.name says the weights are
 * random ("random" or "demo" in it). */
const char *tn_model_description(const tn_model *model);
bool tn_model_is_demo(const tn_model *model);
const char *tn_model_path(const tn_model *model);
const tn_gguf *tn_model_gguf(const tn_model *model);
/* KV cache bytes per token of context (bf16 keys and values, all layers). */
uint64_t tn_model_kv_bytes_per_token(const tn_model *model);

typedef struct tn_tokenizer tn_tokenizer; /* the tokenizer section below */
/* The file's tokenizer, loaded with the model (params.load_tokenizer); NULL
 * when the file has none or it could not be loaded: then
 * tn_model_tokenizer_error says why. */
const tn_tokenizer *tn_model_tokenizer(const tn_model *model);
const char *tn_model_tokenizer_error(const tn_model *model);
/* The chat format (a tn_chat_kind) from tokenizer.chat_template and the
 * architecture; *warning (may be NULL) as tn_chat_template_detect. */
int tn_model_chat_kind(const tn_model *model, const char **warning);

/* Run state for one sequence: KV cache and scratch. Used by one thread at a
 * time (tn_ctx_cancel excepted). */
typedef struct tn_ctx tn_ctx;

/* n_ctx <= 0: min(context_length, 4096). n_threads <= 0: physical cores. */
int tn_ctx_new(const tn_model *model, int32_t n_ctx, int32_t n_threads, tn_ctx **out,
               tn_error *err);
void tn_ctx_free(tn_ctx *ctx);
const tn_model *tn_ctx_model(const tn_ctx *ctx);
int32_t tn_ctx_n_ctx(const tn_ctx *ctx);
int32_t tn_ctx_n_threads(const tn_ctx *ctx);

/* Tokens held in the KV cache. Row i of the cache is position i. */
int32_t tn_ctx_kv_len(const tn_ctx *ctx);
/* Forgets every row from n on (0 <= n <= kv_len): O(1), the next decode
 * continues at position n. TN_ERR_INVALID otherwise. */
int tn_ctx_kv_truncate(tn_ctx *ctx, int32_t n);

/* Which rows of logits tn_ctx_decode writes. */
typedef enum tn_logits_mode {
    TN_LOGITS_NONE = 0, /* none (prefill whose output is not needed) */
    TN_LOGITS_LAST = 1, /* the last row: logits[n_vocab] */
    TN_LOGITS_ALL = 2,  /* every row: logits[n][n_vocab] (verification, perplexity) */
} tn_logits_mode;

/* Runs n tokens at positions kv_len .. kv_len + n - 1 and appends their keys
 * and values. Row i of the result is bit for bit what a call with that one
 * token would give (batch invariance), whatever n and the thread count.
 * On failure or cancellation the KV length is unchanged. TN_ERR_OVERFLOW
 * when kv_len + n > n_ctx; TN_ERR_INVALID for a token outside the vocabulary. */
int tn_ctx_decode(tn_ctx *ctx, const int32_t *tokens, int32_t n, tn_logits_mode mode,
                  float *logits, tn_error *err);

/* Asks a running (or the next) decode to stop: it returns TN_ERR_CANCELLED
 * between layers. Safe from any thread. Sticky until tn_ctx_cancel_reset. */
void tn_ctx_cancel(tn_ctx *ctx);
void tn_ctx_cancel_reset(tn_ctx *ctx);
bool tn_ctx_cancelled(const tn_ctx *ctx);

/* Hidden states of chosen layers for every row of each later decode:
 * id 0 is the embedding output (after Gemma's scale), id i (1..n_layer) the
 * output of layer i - 1. n_ids = 0 turns capture off (no cost). */
int tn_ctx_capture_hidden(tn_ctx *ctx, const int32_t *ids, int32_t n_ids, tn_error *err);
/* [n_rows][n_ids][n_embd] from the last decode; NULL when capture is off. */
const float *tn_ctx_hidden(const tn_ctx *ctx, int32_t *n_rows);

/* KV rows [0, n) as bytes, for pin snapshots: size, copy out, copy in (the
 * latter sets kv_len = n). */
uint64_t tn_ctx_kv_state_bytes(const tn_ctx *ctx, int32_t n);
int tn_ctx_kv_state_save(const tn_ctx *ctx, int32_t n, void *dst, uint64_t size, tn_error *err);
int tn_ctx_kv_state_load(tn_ctx *ctx, int32_t n, const void *src, uint64_t size, tn_error *err);

/* ----------------------------------------------------------------- sampler */

typedef struct tn_sampler_params {
    float temperature;       /* <= 0: greedy (argmax after penalties) */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off; > 1 discourages tokens of the window */
    float presence_penalty;  /* 0: off; subtracted once per token in the window */
    float frequency_penalty; /* 0: off; subtracted per occurrence in the window */
    int32_t penalty_last_n;  /* window of past tokens the penalties look at */
    uint64_t seed;
} tn_sampler_params;

/* Greedy, no penalties, window 64, seed 0. */
tn_sampler_params tn_sampler_default_params(void);

typedef struct tn_sampler tn_sampler;

int tn_sampler_new(int32_t n_vocab, tn_sampler_params params, tn_sampler **out, tn_error *err);
void tn_sampler_free(tn_sampler *s);
/* Forgets the history and restarts the random sequence from the seed. */
void tn_sampler_reset(tn_sampler *s);
tn_sampler_params tn_sampler_get_params(const tn_sampler *s);
/* Records a token of the sequence (prompt or output) for the penalties. */
void tn_sampler_accept(tn_sampler *s, int32_t token);
/* Picks the next token from logits[n_vocab] (not modified). Does not call
 * tn_sampler_accept. The same seed and calls give the same tokens. */
int32_t tn_sampler_sample(tn_sampler *s, const float *logits);
/* The distribution tn_sampler_sample draws from, as probs[n_vocab]
 * (one-hot for greedy); for speculative rejection sampling. */
void tn_sampler_probs(tn_sampler *s, const float *logits, float *probs);
/* A uniform number in [0, 1) from the sampler's generator. */
double tn_sampler_uniform(tn_sampler *s);

/* ----------------------------------------------------------------- session */

/* Flash single-turn serving and multi-turn chat over one model.
 *
 * A session owns a KV cache of a fixed size (n_ctx, default 1024 tokens), a
 * sampler and a pinned system prompt:
 *   - tn_session_pin() renders the chat template's system part, tokenizes it,
 *     prefills it once (or loads a snapshot from disk) and remembers n_pin;
 *   - tn_session_ask() answers one independent request: the KV is cut back
 *     to exactly n_pin rows, the user turn and the assistant header are
 *     prefilled, and decoding runs to the end of the turn, a stop string or
 *     the limit. Rows 0 .. n_pin - 1 are never written by a request, and the
 *     sampler restarts from its seed, so the same request always gets the same
 *     answer (greedy or seeded sampling, thinking on or off);
 *   - tn_session_chat() renders a whole conversation and reuses the longest
 *     token prefix already in the KV (edits and regenerations re-run only
 *     what changed).
 * The token that ends an answer (end of turn, EOS) is never given a KV row.
 *
 * One thread at a time per session; tn_session_cancel() from any thread. */

typedef struct tn_session tn_session;
/* Speculative decoding (its own section); NULL everywhere means "off". */
typedef struct tn_drafter tn_drafter;

/* Streaming: called once per generated token with its text. A piece may be
 * "" (the bytes of an incomplete UTF-8 character, or text that may be the
 * start of a stop string, are held back and come with a later token; text
 * still held back when the answer ends comes in a last call with token -1).
 * Return false to stop generating (the call then returns TN_OK, stop reason
 * TN_STOP_CALLBACK). */
typedef bool (*tn_session_token_cb)(const char *piece, int32_t token, void *user);
/* Prefill progress: `done` of `total` tokens; return false to cancel (the
 * call returns TN_ERR_CANCELLED and changes nothing). */
typedef bool (*tn_session_progress_cb)(int32_t done, int32_t total, void *user);
/* Non-fatal problems (a snapshot ignored as corrupt, a cache not writable),
 * one line. NULL in tn_session_params: printed to stderr as "tern: ...". */
typedef void (*tn_session_warn_cb)(const char *message, void *user);

#define TN_SESSION_MAX_STOP 8

/* What one request generates. */
typedef struct tn_gen_params {
    tn_sampler_params sampler; /* re-seeded for every request */
    int32_t max_tokens;        /* <= 0: until the context is full */
    bool thinking;             /* Qwen3-style templates: enable_thinking (default true) */
    /* Extra stop strings (the template's end-of-turn tokens always stop);
     * generation ends before the string, which is not emitted. Copied by
     * tn_session_new; for a request they only need to outlive the call. */
    const char *stop[TN_SESSION_MAX_STOP];
    int32_t n_stop;
    /* Extra tokens that end the answer like end of turn (not emitted, no KV row). */
    int32_t stop_tokens[TN_SESSION_MAX_STOP];
    int32_t n_stop_tokens;
    /* Prefill progress of the request or conversation (may be NULL). */
    tn_session_progress_cb progress;
    void *progress_user;
    tn_drafter *drafter;       /* NULL: no speculation */
    int32_t draft_max;         /* tokens per draft; <= 0: the drafter's default */
} tn_gen_params;

tn_gen_params tn_gen_default_params(void);

typedef struct tn_session_params {
    int32_t n_ctx;      /* KV rows: pinned prompt + request + answer (default 1024) */
    int32_t n_threads;  /* <= 0: physical cores */
    tn_gen_params gen;  /* used when a call passes NULL gen params */
    /* Pin snapshots: NULL = $XDG_CACHE_HOME/tern/pins (~/.cache/tern/pins),
     * "" = no snapshots. Copied. */
    const char *pin_cache_dir;
    uint64_t pin_cache_max_bytes; /* least recently used evicted beyond this; 0: 4 GiB */
    tn_session_warn_cb warn;
    void *warn_user;
} tn_session_params;

tn_session_params tn_session_default_params(void);

/* The model must outlive the session. Creates the KV cache (n_ctx rows) and
 * the sampler; nothing is pinned yet (an empty system prompt is implied). */
int tn_session_new(const tn_model *model, tn_session_params params, tn_session **out,
                   tn_error *err);
void tn_session_free(tn_session *s);
const tn_model *tn_session_model(const tn_session *s);
int32_t tn_session_n_ctx(const tn_session *s);

/* Tokens the system part of the template takes for this text (what pinning
 * it would use), without touching the session. */
int tn_session_count_system_tokens(tn_session *s, const char *system_text, int32_t *n_tokens,
                                   tn_error *err);

/* Pins a system prompt (NULL or "" = none): renders the template's system
 * part and tokenizes it; refuses with TN_ERR_OVERFLOW, before anything is
 * replaced, when it leaves no room in n_ctx; then loads the snapshot when one
 * matches or prefills (progress through the callback) and saves a snapshot.
 * On any failure or cancellation the previous pin stays in place. */
int tn_session_pin(tn_session *s, const char *system_text, tn_session_progress_cb progress,
                   void *user, tn_error *err);
/* The same with already rendered, tokenized system tokens (servers, tests). */
int tn_session_pin_tokens(tn_session *s, const int32_t *tokens, int32_t n_tokens,
                          tn_session_progress_cb progress, void *user, tn_error *err);

typedef struct tn_pin_info {
    int32_t n_pin;             /* KV rows of the pinned system part (0: nothing pinned) */
    int32_t n_ctx;
    int32_t n_free;            /* n_ctx - n_pin: room for a request and its answer */
    double prefill_ms;         /* pinning time: the prefill, or the snapshot load */
    bool loaded_from_snapshot;
    bool snapshot_saved;       /* written to (or already present in) the pin cache */
} tn_pin_info;

tn_pin_info tn_session_pin_info(const tn_session *s);

typedef enum tn_stop_reason {
    TN_STOP_NONE = 0,         /* nothing generated (error before decoding) */
    TN_STOP_EOG = 1,          /* end of turn / end of sequence token */
    TN_STOP_STRING = 2,       /* a stop string */
    TN_STOP_LIMIT = 3,        /* max_tokens */
    TN_STOP_CONTEXT_FULL = 4, /* n_ctx reached */
    TN_STOP_CALLBACK = 5,     /* the token callback returned false */
    TN_STOP_CANCELLED = 6,    /* tn_session_cancel */
} tn_stop_reason;

/* "eog", "stop string", "limit", "context full", "callback", "cancelled". */
const char *tn_stop_reason_name(tn_stop_reason r);

/* Filled by every ask/chat call, also when it fails part way. */
typedef struct tn_session_stats {
    int32_t prompt_tokens;    /* tokens this call prefilled (not those reused) */
    double prefill_ms;
    double prefill_tok_s;
    int32_t generated_tokens; /* answer tokens (given to the callback; not the stop token) */
    double decode_ms;
    double decode_tok_s;      /* decode steps after the first token / decode_ms */
    double ttft_ms;           /* call start -> first token sampled */
    int32_t restored_tokens;  /* tokens reused: the pin (ask) or the common prefix (chat) */
    double restore_ms;        /* cutting the KV back (and re-pinning if needed) */
    int32_t drafted;          /* speculation: tokens proposed */
    int32_t accepted;         /* speculation: tokens accepted */
    int32_t verify_steps;     /* speculation: batched verifications (the mean accepted
                                 length per step is accepted / verify_steps) */
    int32_t kv_len;           /* KV rows after the call */
    tn_stop_reason stop_reason;
} tn_session_stats;

/* One independent request against the pin. TN_ERR_OVERFLOW when the
 * rendered request does not fit the free context ("the message is 812
 * tokens; 700 are free after the 324-token system prompt"), with nothing
 * changed. After the call the KV holds exactly the n_pin pinned rows.
 * gen NULL: the session's params.gen. stats may be NULL. */
int tn_session_ask(tn_session *s, const char *user_text, const tn_gen_params *gen,
                   tn_session_token_cb cb, void *user, tn_session_stats *stats, tn_error *err);
/* The same with the request already rendered and tokenized (user turn and
 * assistant header). */
int tn_session_ask_tokens(tn_session *s, const int32_t *tokens, int32_t n_tokens,
                          const tn_gen_params *gen, tn_session_token_cb cb, void *user,
                          tn_session_stats *stats, tn_error *err);

/* A message of a conversation; role is "system", "user", "assistant" or
 * "tool" (where the template has one: tn_chat_role). */
typedef struct tn_session_message {
    const char *role;
    const char *content;
} tn_session_message;

/* Multi-turn: renders messages (when the first is not a system message the
 * pinned system prompt is used) plus the assistant header, keeps the longest
 * common token prefix already in the KV, prefills the rest and generates the
 * next assistant message. The KV keeps the conversation and the answer (not
 * the stop token) for the next call. Cutting into the pinned rows (a
 * different system message) is allowed; the next ask re-pins. */
int tn_session_chat(tn_session *s, const tn_session_message *messages, int32_t n_messages,
                    const tn_gen_params *gen, tn_session_token_cb cb, void *user,
                    tn_session_stats *stats, tn_error *err);

/* Forgets the conversation: the KV goes back to the n_pin pinned rows. */
void tn_session_reset(tn_session *s);
/* Drops the pin too (back to an empty system prompt). */
void tn_session_unpin(tn_session *s);
/* Stops the running pin/ask/chat at the next token or layer (it returns
 * TN_ERR_CANCELLED, or TN_OK with TN_STOP_CANCELLED once tokens were
 * generated). Safe from any thread; a cancel is cleared when a call starts. */
void tn_session_cancel(tn_session *s);

/* ------------------------------------------------------------- speculation */

/* Speculative decoding. A drafter guesses the next tokens; the target checks
 * [last token, d1..dk] in one batched forward (TN_LOGITS_ALL), keeps the
 * longest prefix it agrees with plus its own next token, and drops the KV
 * rows of the rejected guesses. Greedy output is bit for bit the output
 * without speculation (the forward pass is batch invariant); with
 * temperature > 0, speculative rejection sampling keeps the distribution of
 * the output exactly the target's. The drafter is chosen per request
 * (tn_gen_params.drafter, NULL = off), so speculation is switched on, off or
 * to another drafter between requests without reloading anything, in
 * tn_session_ask (the pin is never written) and tn_session_chat alike.
 *
 * A drafter keeps state about one sequence (caches keyed by the token
 * history, checked on every call): use it from one thread at a time. The
 * target model must outlive the drafters made for it. */

#define TN_SPEC_MAX_DRAFT 64 /* most tokens one draft may hold */

typedef struct tn_drafter_params {
    int32_t draft_max; /* most tokens per draft (<= 0: the drafter's default: lookup
                          10, draft model 8, DFlash block size - 1); capped at
                          TN_SPEC_MAX_DRAFT. Within a request drafts start this long,
                          grow by 2 (up to it) after a fully accepted one and shrink
                          by 1 after a rejection */
    int32_t ngram_min; /* lookup: shortest n-gram matched (default 2) */
    int32_t ngram_max; /* lookup: longest n-gram tried first (default 5) */
    int32_t n_threads; /* draft model, DFlash: <= 0 physical cores */
    int32_t n_ctx;     /* draft model: KV rows (<= 0: min(its context length, 4096)) */
} tn_drafter_params;

tn_drafter_params tn_drafter_default_params(void);

/* Prompt lookup: finds the longest recent n-gram (ngram_max down to
 * ngram_min tokens) of the prompt and output that ends the history, and
 * proposes what followed it. Costs no model; strong on code editing,
 * quoting and anything repetitive. */
int tn_drafter_new_lookup(tn_drafter_params params, tn_drafter **out, tn_error *err);

/* A smaller model with the same vocabulary, run autoregressively (greedy;
 * with temperature > 0 it samples and its probabilities enter the rejection
 * test). The vocabularies are compared token by token: a mismatch fails with
 * TN_ERR_INVALID naming the first differing token. */
int tn_drafter_new_model(const tn_model *target, const char *draft_path, tn_drafter_params params,
                         tn_drafter **out, tn_error *err);

/* A DFlash block drafter (docs/DFLASH.md): reads hidden states of chosen
 * target layers and predicts a block of tokens in one non-causal pass,
 * sharing the target's embedding and output head. Refused (TN_ERR_INVALID)
 * when its width, vocabulary or layer ids do not fit the target. */
int tn_drafter_new_dflash(const tn_model *target, const char *dflash_path,
                          tn_drafter_params params, tn_drafter **out, tn_error *err);

/* Your own drafter (tools, benchmarks, tests). propose writes at most
 * max_draft tokens that should follow history[0..n_history) (the prompt and
 * the output so far; the last token is the one about to be verified) and
 * returns how many it wrote (0: no guess), or a negative tn_status with err
 * filled. Returning more than max_draft, or a token outside the target's
 * vocabulary, fails the request with TN_ERR_INVALID. accepted (may be NULL)
 * says how many of the last draft the target kept; reset (may be NULL)
 * forgets everything; free (may be NULL) is called by tn_drafter_free. */
typedef struct tn_drafter_ops {
    int32_t (*propose)(void *self, const int32_t *history, int32_t n_history, int32_t max_draft,
                       int32_t *draft, tn_error *err);
    void (*accepted)(void *self, int32_t n_accepted);
    void (*reset)(void *self);
    void (*free)(void *self);
} tn_drafter_ops;

/* ops is copied; draft_max <= 0 means 8. */
int tn_drafter_new_custom(const tn_drafter_ops *ops, void *self, int32_t draft_max,
                          tn_drafter **out, tn_error *err);

void tn_drafter_free(tn_drafter *d);
/* Forgets every cached state (the next draft starts from nothing). */
void tn_drafter_reset(tn_drafter *d);
/* "lookup", "draft model", "dflash" or "custom". */
const char *tn_drafter_name(const tn_drafter *d);
int32_t tn_drafter_draft_max(const tn_drafter *d);
/* DFlash: tokens per block (anchor included); 0 for other drafters. */
int32_t tn_drafter_block_size(const tn_drafter *d);

/* Random-weight DFlash drafts for a given target (docs/DFLASH.md), written
 * in the layout published drafts use. Zero/NULL fields take the defaults. */
typedef struct tn_mkmodel_dflash_params {
    const char *target;    /* the target GGUF (width, layers, vocabulary) */
    const char *type;      /* weight type of the matrices (default "q8_0") */
    int64_t n_layer;       /* draft layers (default 1) */
    int64_t n_head;        /* default: the target's */
    int64_t n_head_kv;     /* default: the target's */
    int64_t head_dim;      /* default: the target's */
    int64_t n_ff;          /* default: the target's */
    int64_t block_size;    /* tokens per block with the anchor (default 16) */
    int32_t target_layers[16]; /* hidden-state ids (0 = embeddings, i = output of layer
                                  i - 1); n_target_layers = 0: five spread from
                                  checkpoint layer 1 to L - 3, stored + 1 */
    int32_t n_target_layers;
    int64_t mask_token;    /* < 0: the target's padding token, else unknown, else last */
    uint64_t seed;
} tn_mkmodel_dflash_params;

tn_mkmodel_dflash_params tn_mkmodel_dflash_default_params(void);
int tn_mkmodel_dflash(const tn_mkmodel_dflash_params *p, const char *out_path, tn_error *err);

/* Inside a token callback of tn_session_ask/chat: true when the token being
 * delivered came from an accepted draft (the app colours them). */
bool tn_session_token_drafted(const tn_session *s);
/* After a call: one flag per generated token (1 = from an accepted draft),
 * [stats.generated_tokens]; valid until the next call. */
const uint8_t *tn_session_drafted_flags(const tn_session *s, int32_t *n);

/* ----------------------------------------------------------------- mkmodel */

/* Random-weight test models with real shapes and a real tokenizer. */
typedef struct tn_mkmodel_params {
    const char *arch;      /* "llama", "qwen3", "gemma3" or "gemma4" */
    const char *type;      /* a tensor type name ("q4_0", "q8_0", "f16", ...) or a
                              mix: "q4_k_m", "q5_k_m" */
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;
    int64_t n_ff;
    int64_t n_ctx;          /* context length (default 4096) */
    int64_t sliding_window; /* gemma3 only (default 512) */
    const char *tokenizer;  /* HF tokenizer.json, or a GPT-2 encoder.json/vocab.bpe dir;
                               NULL: a tiny synthetic byte-level vocabulary */
    uint64_t seed;
    bool tied_output;       /* no output.weight: the LM head is the embedding
                               (always true for gemma3) */
    const char *name;       /* general.name; default names it a random-weight model */
    float logit_scale;      /* target std of the logits (default 10: peaked, so
                               greedy decoding is well defined) */
    int n_threads;          /* for generating weights; <= 0: all cores */
    /* gemma4 only (docs/MKMODEL.md); zero means the stated default. */
    int64_t head_dim_swa;   /* head size of the sliding-window layers (default head_dim) */
    int64_t n_head_kv_full; /* KV heads of the full-attention layers (default n_head_kv) */
    int64_t n_embd_per_layer; /* per-layer input width (0: none) */
    int64_t n_shared_kv;    /* last layers that reuse an earlier layer's KV memory */
    int64_t swa_period;     /* layer il is full-attention iff il % period == period - 1
                               (default 5) */
    bool k_eq_v;            /* full-attention layers have no attn_v (values = keys) */
    bool double_wide_ffn;   /* shared-KV layers have a 2 x n_ff feed-forward */
    const char *vocab_gguf; /* copy the tokenizer.* metadata of this GGUF (its vocabulary
                               and chat template) instead of `tokenizer` */
} tn_mkmodel_params;

/* Real shapes of a published model: "gemma4-e2b", "gemma4-e4b", "gemma4-31b"
 * (arch, every dimension; type, vocabulary and seed are left as they are).
 * TN_ERR_INVALID for an unknown name. */
int tn_mkmodel_preset(tn_mkmodel_params *p, const char *name);

tn_mkmodel_params tn_mkmodel_default_params(void);
/* Writes the model atomically to out_path. */
int tn_mkmodel(const tn_mkmodel_params *p, const char *out_path, tn_error *err);

/* Adds the tokenizer.* metadata (and tokenizer.chat_template) converted from
 * a Hugging Face tokenizer.json (tokenizer_config.json is read from beside
 * it), or from a GPT-2 encoder.json + vocab.bpe directory. */
int tn_vocab_convert_hf(const char *path, tn_gguf_writer *w, int64_t *n_vocab, tn_error *err);

/* ---------------------------------------------------------- chat templates */

/* A growable byte buffer the library appends to. Start it zeroed
 * (`tn_buf b = {0};`); after any successful append `data` is NUL-terminated
 * (the NUL is not counted in len). */
typedef struct tn_buf {
    char *data;
    size_t len, cap;
} tn_buf;

/* Frees the bytes and zeroes the struct; NULL is a no-op. */
void tn_buf_free(tn_buf *b);
int tn_buf_append(tn_buf *b, const char *s, size_t n);
int tn_buf_append_str(tn_buf *b, const char *s);

/* The chat formats Tern renders natively (no Jinja engine): each reproduces
 * the byte output of the model family's real Jinja template for system /
 * user / assistant messages. docs/CHAT-TEMPLATES.md describes each. */
typedef enum tn_chat_kind {
    TN_CHAT_CHATML = 0,     /* <|im_start|>role\n...<|im_end|>\n */
    TN_CHAT_LLAMA2 = 1,     /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] */
    TN_CHAT_MISTRAL = 2,    /* Mistral 7B Instruct v0.1/v0.2 original: [INST] ... [/INST] */
    TN_CHAT_MISTRAL_V1 = 3, /* mistral-common v1: " [INST] ... [/INST]", system in 1st turn */
    TN_CHAT_MISTRAL_V3 = 4, /* v3 (7B v0.3, Mixtral 8x22B): "[INST] ...[/INST]", system
                               in the last user turn */
    TN_CHAT_LLAMA3 = 5,     /* Llama 3: <|start_header_id|>role<|end_header_id|>\n\n... */
    TN_CHAT_LLAMA31 = 6,    /* Llama 3.1+: Llama 3 with the "Cutting Knowledge Date"
                               system header always present */
    TN_CHAT_QWEN3 = 7,      /* ChatML + <think> handling (enable_thinking) */
    TN_CHAT_GEMMA3 = 8,     /* <start_of_turn>user/model, system folded into 1st user turn */
    TN_CHAT_GEMMA4 = 9,     /* <|turn>system/user/model ...<turn|>, <|think|> in the system
                               turn when thinking, an empty thought channel when not */
    TN_CHAT_KIND_COUNT_ = 10,
} tn_chat_kind;

/* "chatml", "llama2", "mistral", "mistral-v1", "mistral-v3", "llama3",
 * "llama3.1", "qwen3", "gemma3", "gemma4"; NULL for an unknown value. */
const char *tn_chat_kind_name(int kind);
/* The inverse (exact names above); -1 if unknown. */
int tn_chat_kind_from_name(const char *name);

/* BOS policy: rendered text NEVER contains the leading BOS token. When the
 * real template starts with bos_token (every kind but ChatML and Qwen3) this
 * returns true and the caller puts the BOS id first in the token sequence
 * (before the system part when pinning). BOS/EOS that a template puts later
 * in the conversation (Llama 2: "</s><s>[INST]" between turns; Mistral: "</s>"
 * after answers) are rendered as text, so rendered text is tokenized with
 * special tokens allowed. */
bool tn_chat_kind_adds_bos(int kind);

/* Recognises a template by its content ("<|im_start|>" with "enable_thinking"
 * -> Qwen3, other "<|im_start|>" -> ChatML, "<start_of_turn>" -> Gemma 3,
 * "<|start_header_id|>" -> Llama 3 / 3.1 ("Cutting Knowledge Date"), "[INST]"
 * with "<<SYS>>" -> Llama 2, other "[INST]" -> a Mistral variant). Without a
 * template (jinja NULL or empty) the architecture decides: llama -> Llama 2
 * (Llama 3 GGUFs carry their template; old Llama 2 / Mistral ones often do
 * not), qwen3/qwen3moe -> Qwen3, qwen2 -> ChatML, gemma* -> Gemma 3. Anything
 * else gives ChatML. *warning (may be NULL) is set to NULL, or to a static
 * one-line message the caller should show when the choice is a guess. */
tn_chat_kind tn_chat_template_detect(const char *jinja, size_t len, const char *arch,
                                     const char **warning);

typedef enum tn_chat_role {
    TN_CHAT_ROLE_SYSTEM = 0,
    TN_CHAT_ROLE_USER = 1,
    TN_CHAT_ROLE_ASSISTANT = 2,
    TN_CHAT_ROLE_TOOL = 3, /* a tool's result: Qwen3 <tool_response> in a user turn,
                              Llama 3.1 "ipython", ChatML / Llama 3 / Gemma 3 "tool";
                              refused (TN_ERR_INVALID) by Llama 2 and Mistral */
} tn_chat_role;

typedef struct tn_chat_message {
    tn_chat_role role;
    const char *content; /* NUL-terminated UTF-8; for Qwen3 an assistant message
                            may hold "<think>...</think>answer" */
} tn_chat_message;

typedef struct tn_chat_options {
    bool add_generation_prompt; /* end with the assistant header (default true); the
                                   [INST] kinds have none: their prompt ends at [/INST] */
    bool enable_thinking;       /* Qwen3 (default true); false adds the empty
                                   "<think>\n\n</think>\n\n" after the assistant header */
    const char *date_string;    /* Llama 3.1 "Today Date: " (NULL: "26 Jul 2024", the
                                   template's default; fixed so pins stay valid) */
} tn_chat_options;

tn_chat_options tn_chat_default_options(void);

/* Renders the conversation, APPENDING to out. opts NULL means the defaults.
 * A system message is allowed only first, except for ChatML, Qwen3 and the
 * Llama 3 kinds whose templates render one anywhere. Roles need not
 * alternate. Content is used as given (the kinds whose templates trim or
 * strip content do so here too, with Python's whitespace rules). */
int tn_chat_render(tn_chat_kind kind, const tn_chat_message *msgs, size_t n_msgs,
                   const tn_chat_options *opts, tn_buf *out, tn_error *err);

/* Where message content lies in rendered text: byte ranges [start,
 * start + len) of the output buffer (offsets from its start, in order,
 * never overlapping). Start it zeroed. */
typedef struct tn_text_span {
    size_t start, len;
} tn_text_span;

typedef struct tn_text_spans {
    tn_text_span *v;
    size_t n, cap;
} tn_text_spans;

void tn_text_spans_free(tn_text_spans *spans);

/* tn_chat_render (and the two calls below) that also APPEND to content the
 * spans of text that came from messages, as opposed to the template's own
 * markup; content NULL: not recorded. Tokenize the result with
 * tn_tokenize_spans(..., content) so that "<|im_end|>" typed in a message
 * stays text and cannot end the turn or forge another (docs/TOKENIZER.md). */
int tn_chat_render_spans(tn_chat_kind kind, const tn_chat_message *msgs, size_t n_msgs,
                         const tn_chat_options *opts, tn_buf *out, tn_text_spans *content,
                         tn_error *err);

/* For pinning, a single-turn request splits in two so that
 *     render_system(system) + render_turn(system != NULL, user)
 *  == render([system?, user]) with add_generation_prompt
 * byte for byte. render_system appends the part that depends only on the
 * system prompt (system NULL: the part a conversation without one starts
 * with, often empty); render_turn appends the user turn and the assistant
 * header (always, whatever opts->add_generation_prompt says) and, for
 * Qwen3 with thinking off, the empty think block. The system part never
 * depends on enable_thinking, so one pin serves both. */
int tn_chat_render_system(tn_chat_kind kind, const char *system, const tn_chat_options *opts,
                          tn_buf *out, tn_error *err);
int tn_chat_render_turn(tn_chat_kind kind, bool has_system, const char *user,
                        const tn_chat_options *opts, tn_buf *out, tn_error *err);
int tn_chat_render_system_spans(tn_chat_kind kind, const char *system,
                                const tn_chat_options *opts, tn_buf *out, tn_text_spans *content,
                                tn_error *err);
int tn_chat_render_turn_spans(tn_chat_kind kind, bool has_system, const char *user,
                              const tn_chat_options *opts, tn_buf *out, tn_text_spans *content,
                              tn_error *err);

/* --------------------------------------------------------------- tokenizer */

/* The tokenizer of a GGUF file (tokenizer.ggml.* metadata), matching the
 * Hugging Face tokenizers token for token:
 *   "llama": SentencePiece-style BPE (Llama 2, Mistral, Gemma 3): merges by
 *            score, "▁" for spaces, byte fallback <0xNN>;
 *   "gpt2":  byte-level BPE (GPT-2, Llama 3, Qwen2/3): split expression of
 *            tokenizer.ggml.pre ("gpt-2", "llama-bpe", "qwen2"), merge ranks,
 *            NFC for qwen2.
 * Immutable after load: one tokenizer may be used by many threads at once.
 * docs/TOKENIZER.md describes the details. */
typedef struct tn_tokenizer tn_tokenizer;

/* tokenizer.ggml.token_type values. */
typedef enum tn_token_type {
    TN_TOKEN_TYPE_UNDEFINED = 0,
    TN_TOKEN_TYPE_NORMAL = 1,
    TN_TOKEN_TYPE_UNKNOWN = 2,
    TN_TOKEN_TYPE_CONTROL = 3,      /* BOS, <|im_start|>, <start_of_turn>, ... */
    TN_TOKEN_TYPE_USER_DEFINED = 4, /* added tokens matched in any text (<think>) */
    TN_TOKEN_TYPE_UNUSED = 5,
    TN_TOKEN_TYPE_BYTE = 6,         /* <0x0A> */
} tn_token_type;

/* Copies what it needs: the GGUF may be closed afterwards. */
int tn_tokenizer_load(const tn_gguf *g, tn_tokenizer **out, tn_error *err);
void tn_tokenizer_free(tn_tokenizer *tok);

int32_t tn_tokenizer_n_vocab(const tn_tokenizer *tok);
/* "llama" or "gpt2" (tokenizer.ggml.model). */
const char *tn_tokenizer_model(const tn_tokenizer *tok);
/* Special ids; -1 when the vocabulary has none. eot is the end-of-turn token
 * of chat models (<|im_end|>, <end_of_turn>, <|eot_id|>), else eos. */
int32_t tn_tokenizer_bos(const tn_tokenizer *tok);
int32_t tn_tokenizer_eos(const tn_tokenizer *tok);
int32_t tn_tokenizer_eot(const tn_tokenizer *tok);
int32_t tn_tokenizer_unk(const tn_tokenizer *tok);
int32_t tn_tokenizer_pad(const tn_tokenizer *tok);
/* tokenizer.ggml.add_bos_token (default: true for "llama", false for "gpt2"
 * except llama-bpe). */
bool tn_tokenizer_add_bos(const tn_tokenizer *tok);

/* The id of a token by its exact vocabulary text ("<|im_start|>"), -1 if none. */
int32_t tn_tokenizer_find(const tn_tokenizer *tok, const char *text, size_t len);
/* A tn_token_type; TN_TOKEN_TYPE_UNDEFINED for an id outside the vocabulary. */
int tn_token_type_of(const tn_tokenizer *tok, int32_t id);
/* End of generation: eos, eot, and the end-of-turn control tokens of the
 * chat formats (<|im_end|>, <end_of_turn>, <|eot_id|>, <|endoftext|>, ...). */
bool tn_token_is_eog(const tn_tokenizer *tok, int32_t id);

/* A growable list of token ids. Start it zeroed (`tn_tokens t = {0};`). */
typedef struct tn_tokens {
    int32_t *ids;
    size_t n, cap;
} tn_tokens;

int tn_tokens_push(tn_tokens *t, int32_t id);
/* Frees the ids and zeroes the struct; NULL is a no-op. */
void tn_tokens_free(tn_tokens *t);

#define TN_TOKENIZE_SPECIAL 1u /* match control tokens (<|im_start|>, <bos>, ...) in the
                                  text; without it they are plain text. User-defined
                                  added tokens (<think>, Gemma's "\n\n") always match. */
#define TN_TOKENIZE_ADD_BOS 2u /* start with BOS when the vocabulary asks for it
                                  (tn_tokenizer_add_bos) */

/* Encodes len bytes of text, APPENDING ids to out. Any bytes are accepted:
 * invalid UTF-8 is encoded byte by byte (byte tokens), never rejected. */
int tn_tokenize(const tn_tokenizer *tok, const char *text, size_t len, unsigned flags,
                tn_tokens *out, tn_error *err);
/* The same, with control tokens matched (TN_TOKENIZE_SPECIAL) only outside
 * the plain spans: a control token's text that starts in, or reaches into,
 * a plain span is encoded as ordinary text there, as if tokenized without
 * TN_TOKENIZE_SPECIAL. Everything else, text between the matches included,
 * is what tn_tokenize gives. For rendered chat prompts with the content
 * spans of tn_chat_render_spans: messages cannot forge turns, the
 * template's markers still become control tokens. plain: sorted, not
 * overlapping, within len (TN_ERR_INVALID otherwise). */
int tn_tokenize_spans(const tn_tokenizer *tok, const char *text, size_t len, unsigned flags,
                      const tn_text_span *plain, size_t n_plain, tn_tokens *out,
                      tn_error *err);

/* The bytes a token stands for ("▁the" -> " the", "<0x0A>" -> "\n", GPT-2's
 * "Ġthe" -> " the"; control tokens: their text). NUL-terminated, owned by
 * the tokenizer; NULL for an id outside the vocabulary. A piece may be part
 * of a UTF-8 character. */
const char *tn_token_piece(const tn_tokenizer *tok, int32_t id, size_t *len);
/* The token's text as the vocabulary spells it ("▁the", "<0x0A>", "Ġthe"). */
const char *tn_token_text(const tn_tokenizer *tok, int32_t id, size_t *len);

#define TN_DETOKENIZE_SPECIAL 1u /* render control tokens (BOS, <|im_end|>) as their
                                    text; without it they produce nothing */

/* ids -> bytes, APPENDED to out. For vocabularies that prepend "▁" the
 * leading space of the result is removed, as the Hugging Face decoder does,
 * so tn_detokenize(tn_tokenize(text)) == text for UTF-8 text (Qwen: text
 * in NFC; SentencePiece: text without "▁"). TN_ERR_INVALID for an id
 * outside the vocabulary (nothing appended). */
int tn_detokenize(const tn_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
                  tn_buf *out, tn_error *err);

/* Streaming detokenizer for generated tokens: it emits only complete UTF-8
 * characters, holding back the first bytes of a character split across
 * tokens until the rest arrives. Its output is always valid UTF-8 (bytes
 * that can never form a character become U+FFFD). Plain struct: no
 * allocation, no free. */
typedef struct tn_detok_stream {
    const tn_tokenizer *tok;
    unsigned flags;    /* TN_DETOKENIZE_* */
    bool started;      /* some text was emitted (the leading space rule) */
    uint8_t n_pending;
    char pending[4];   /* an incomplete UTF-8 character */
} tn_detok_stream;

void tn_detok_stream_init(tn_detok_stream *s, const tn_tokenizer *tok, unsigned flags);
/* Appends the text that token id completes to out (possibly nothing). */
int tn_detok_stream_push(tn_detok_stream *s, int32_t id, tn_buf *out, tn_error *err);
/* End of the sequence: an incomplete character left over becomes U+FFFD. */
int tn_detok_stream_flush(tn_detok_stream *s, tn_buf *out, tn_error *err);

/* ------------------------------------------------------------------ vision */

/* A Gemma 3 vision projector ("mmproj" GGUF, clip.projector_type = "gemma3"):
 * SigLIP ViT + 4x4 average pool + RMSNorm + projection into the text width
 * (docs/VISION.md). Immutable after load: tn_vision_encode allocates its
 * scratch per call, so several threads may encode with one projector at once. */
typedef struct tn_vision tn_vision;
struct tn_cpu; /* engine/cpu/tn-cpu.h */

typedef struct tn_vision_info {
    int image_size;     /* native input side in pixels (896 for Gemma 3) */
    int patch_size;     /* 14 */
    int n_embd;         /* ViT width */
    int n_ff;
    int n_layer;
    int n_head;
    int n_embd_text;    /* width of the text model the tokens feed */
    int n_image_tokens; /* native token count: (image_size / patch / 4)^2 = 256 */
    float eps;
    float image_mean[3];
    float image_std[3];
} tn_vision_info;

int tn_vision_load(const char *path, tn_vision **out, tn_error *err);
void tn_vision_free(tn_vision *v);
const tn_vision_info *tn_vision_get_info(const tn_vision *v);
/* Tokens an image costs under a budget: k * k with k = floor(sqrt(budget)),
 * at most the native grid; budget <= 0 means native (256 for Gemma 3). */
int tn_vision_tokens(const tn_vision *v, int budget);
/* Pixels per side of the square the encoder resamples an image to under a
 * budget (896 native for Gemma 3, 448 for a budget of 70). An image decoder
 * that downscales larger pictures to at most this (with an area filter)
 * avoids the aliasing of the encoder's bilinear resampling. */
int tn_vision_input_side(const tn_vision *v, int budget);
/* rgb: w x h pixels, interleaved RGB (HWC, row-major), values in [0, 1]; the
 * encoder resamples it bilinearly to the grid the budget needs (native: the
 * projector's image_size) and applies image_mean / image_std itself. out:
 * [tn_vision_tokens(v, budget)][n_embd_text] floats; *n_tokens (optional)
 * gets the count. cpu: a tn_cpu pool (engine/cpu/tn-cpu.h) or NULL for the
 * calling thread alone. */
int tn_vision_encode(tn_vision *v, const float *rgb, int w, int h, int budget, float *out,
                     int *n_tokens, struct tn_cpu *cpu, tn_error *err);

/* Random-weight Gemma 3 vision projectors for tests and benchmarks. Zero
 * fields take the defaults (a tiny tower: 224 px, patch 14, width 64, 2
 * layers, 4 heads, ffn 128, f32). */
typedef struct tn_mkmodel_vision_params {
    const char *target;  /* optional text model GGUF: n_embd_text from it */
    const char *type;    /* "f32" (default) or "f16" for the matrices */
    int64_t image_size, patch_size, n_embd, n_ff, n_layer, n_head;
    int64_t n_embd_text; /* default 64, or the target's width */
    uint64_t seed;
} tn_mkmodel_vision_params;

tn_mkmodel_vision_params tn_mkmodel_vision_default_params(void);
int tn_mkmodel_vision(const tn_mkmodel_vision_params *p, const char *out_path, tn_error *err);

/* Images in the prompt (docs/VISION.md).
 *
 * A prompt names each image with TN_IMAGE_MARKER in the text of a user
 * message, in order. The session renders the chat template with the markers
 * in place, then puts what the model was trained on where each marker is;
 * for Gemma 3 (as the HF Gemma3Processor): "\n\n<start_of_image>", the
 * image's n_tokens embedding rows, "<end_of_image>\n\n". The image rows
 * attend to each other in both directions and to everything before them
 * (Gemma 3's bidirectional image attention, as HF's token_type_ids mask and
 * llama.cpp's non-causal image batch); text rows stay causal. Image rows
 * enter layer 0 as given (Gemma's sqrt(n_embd) scale is for token
 * embeddings only). A text without any marker gets its images before the
 * text (what Gemma's template renders for [image..., text]). */
#define TN_IMAGE_MARKER "<__image__>"

/* One image as embeddings: tn_vision_encode's output, borrowed for the call. */
typedef struct tn_image_embd {
    const float *embd; /* [n_tokens][n_embd] */
    int32_t n_tokens;  /* >= 1 */
    int32_t n_embd;    /* must equal tn_model_n_embd (checked) */
} tn_image_embd;

/* Like tn_ctx_decode, with n input rows given as embeddings [n][n_embd]
 * instead of token ids. bidirectional: the n rows also see each other's
 * keys (one image span); they then run as a single pass, whatever n. */
int tn_ctx_decode_embd(tn_ctx *ctx, const float *embd, int32_t n, bool bidirectional,
                       tn_logits_mode mode, float *logits, tn_error *err);

/* KV rows an image of n_image_tokens adds to a prompt: the image rows and
 * the start/end markers (the "\n\n" around them merge with the neighbouring
 * text's tokens, so a message may differ by a token or two); -1 when the
 * model's vocabulary has no image markers (no vision support). */
int32_t tn_session_image_cost(const tn_session *s, int32_t n_image_tokens);

/* tn_session_ask with images: user_text holds one TN_IMAGE_MARKER per image
 * (or none: images first). The request (text and image rows) must fit the
 * free context after the pin, else TN_ERR_OVERFLOW naming the counts ("the
 * message is 300 tokens (256 of them for 1 image); 200 are free after the
 * 24-token system prompt") and nothing changes. The pin is never written. */
int tn_session_ask_images(tn_session *s, const char *user_text, const tn_image_embd *images,
                          int32_t n_images, const tn_gen_params *gen, tn_session_token_cb cb,
                          void *user, tn_session_stats *stats, tn_error *err);

/* tn_session_chat with images: the markers in all user messages, in order,
 * take images[0..n_images). An image's rows are reused across turns like
 * text (its rows match only the same embeddings at the same place). */
int tn_session_chat_images(tn_session *s, const tn_session_message *messages,
                           int32_t n_messages, const tn_image_embd *images, int32_t n_images,
                           const tn_gen_params *gen, tn_session_token_cb cb, void *user,
                           tn_session_stats *stats, tn_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TERN_H */
