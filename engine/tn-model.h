/* Internals of the model, the forward pass and the KV cache.
 *
 * Grouped by lifetime, like llama2.c: tn_hparams (read once from the GGUF
 * metadata), tn_layer / tn_model (weights: pointers into the mapped file plus
 * a few small f32 copies), tn_ctx (run state: KV cache and scratch, used by one
 * thread at a time). Shapes are written row-major as [rows][cols]: a weight
 * [out][in] has `out` rows of `in` values (GGUF ne = {in, out}).
 */
#ifndef TN_MODEL_H
#define TN_MODEL_H

#include "tern.h"
#include "tn-backend.h"

#include <stdatomic.h>

/* Rotary embedding layout as the GGUF file stores Q and K. */
typedef enum tn_rope_kind {
    /* Pairs (2i, 2i+1): llama.cpp's converter permutes Llama's Q/K rows so
     * that rotation pairs are adjacent ("NORM" rope). */
    TN_ROPE_ADJACENT = 0,
    /* Pairs (i, i + n_rot/2): the halves of each head (Qwen3, Gemma 3). */
    TN_ROPE_HALVES = 1,
} tn_rope_kind;

typedef struct tn_hparams {
    tn_arch arch;
    int32_t n_vocab;     /* rows of token_embd */
    int32_t n_ctx_train; /* {arch}.context_length */
    int32_t n_embd;      /* width of the residual stream */
    int32_t n_layer;
    int32_t n_head;      /* query heads */
    int32_t n_head_kv;   /* key/value heads (GQA: n_head is a multiple) */
    int32_t head_dim;    /* {arch}.attention.key_length, default n_embd / n_head */
    int32_t n_ff;        /* {arch}.feed_forward_length */
    int32_t n_rot;       /* {arch}.rope.dimension_count, default head_dim */
    float norm_eps;      /* {arch}.attention.layer_norm_rms_epsilon */
    tn_rope_kind rope_kind;
    float rope_base;        /* {arch}.rope.freq_base: full-attention layers */
    float rope_scale;       /* 1 / linear scaling factor: full-attention layers */
    float rope_base_swa;    /* Gemma 3 sliding-window layers: 10000 */
    float rope_scale_swa;   /* Gemma 3 sliding-window layers: 1 */
    int32_t sliding_window; /* keys with q_pos - k_pos >= window are masked; 0 = none */
    float attn_scale;       /* multiplies q.k */
    float embd_scale;       /* multiplies the embedding rows (Gemma: sqrt(n_embd)) */
    float final_softcap;    /* logits = c * tanh(logits / c) when > 0 */
    bool qk_norm;           /* per-head RMSNorm of q and k before rope */
    bool post_norms;        /* Gemma: RMSNorm of the attention and FFN outputs */
    bool gelu;              /* GELU-tanh gate (Gemma) instead of SiLU (SwiGLU) */
    /* Gemma 4. Per-layer shapes live in tn_layer; the fields above are the
     * full-attention layers' (head_dim, n_head_kv, n_rot) or the largest
     * (n_ff) where a layer can differ. */
    bool v_norm;            /* RMSNorm without weight of every value head */
    int32_t n_rot_swa;      /* rope dimensions of the sliding-window layers */
    int32_t n_embd_per_layer; /* width of a per-layer input (0: none) */
    int32_t n_layer_kv;     /* layers [0, n_layer_kv) own KV memory; later ones reuse */
    int32_t max_head_dim;   /* the largest head_dim of any layer */
    int32_t max_kv_dim;     /* the largest n_head_kv * head_dim of any layer */
    int32_t max_rot;        /* max(n_rot, n_rot_swa) */
    /* Mixture of experts (qwen3moe, Gemma 4 26B-A4B); 0 experts: a dense model. */
    int32_t n_expert;       /* {arch}.expert_count */
    int32_t n_expert_used;  /* {arch}.expert_used_count: experts per token */
    int32_t n_ff_exp;       /* {arch}.expert_feed_forward_length */
    /* Gemma 4's mixture: the dense feed-forward runs beside the experts (a
     * shared expert), each branch with its own norms, and the router reads
     * its own scaled norm of the residual (src/models/gemma4.cpp). */
    bool moe_dense;
    /* gpt-oss (src/models/openai-moe.cpp): biases on the q, k, v and output
     * projections, one attention-sink logit per head, and a mixture whose
     * router has a bias and weighs the top K by a softmax over their logits,
     * whose experts have biases and a clamped SwiGLU (ggml_swiglu_oai). */
    bool oai;
    /* YaRN (rope.scaling.type "yarn"; gpt-oss only), as ggml's rope applies
     * it: yarn_orig_ctx > 0 turns it on; the correction range comes from
     * betas 32 and 1 (llama.cpp's defaults, which it does not read from the
     * file), and cos and sin are multiplied by yarn_mscale. */
    int32_t yarn_orig_ctx;  /* rope.scaling.original_context_length */
    float yarn_mscale;
} tn_hparams;

/* The experts of one layer's projection, one 3-D GGUF tensor (ne = {cols,
 * rows, n_expert}): expert e is the matrix `first` with its data moved by
 * e * stride bytes. They stay in the mapped file, in its row layout: a
 * decode step reads only the experts its tokens chose, so neither the
 * backend's weight preparation nor a private copy applies to them. */
typedef struct tn_experts {
    tn_weight first;
    size_t stride;
} tn_experts;

typedef struct tn_layer {
    bool swa;                  /* sliding-window layer (Gemma 3 local attention) */
    int32_t head_dim;          /* this layer's (Gemma 4: key_length or key_length_swa) */
    int32_t n_head_kv;         /* this layer's (Gemma 4: a per-layer array) */
    int32_t n_ff;              /* this layer's (Gemma 4: a per-layer array) */
    int32_t n_rot;             /* this layer's rope dimensions */
    int32_t kv_layer;          /* whose KV memory it reads: itself, or (Gemma 4 shared-KV
                                  layers) the last earlier KV-owning layer of its type */
    bool v_is_k;               /* no attn_v: the values are the key projection (Gemma 4) */
    float out_scale;           /* multiplies the layer's output (Gemma 4; else 1) */
    const float *attn_norm;    /* [n_embd] */
    tn_weight wq;              /* [n_head * head_dim][n_embd] */
    tn_weight wk;              /* [n_head_kv * head_dim][n_embd] */
    tn_weight wv;              /* [n_head_kv * head_dim][n_embd] */
    tn_weight wo;              /* [n_embd][n_head * head_dim] */
    const float *q_norm;       /* [head_dim] (qk_norm) */
    const float *k_norm;       /* [head_dim] (qk_norm) */
    const float *post_attn_norm; /* [n_embd] (post_norms) */
    const float *ffn_norm;     /* [n_embd] */
    tn_weight ffn_gate;        /* [n_ff][n_embd] */
    tn_weight ffn_up;          /* [n_ff][n_embd] */
    tn_weight ffn_down;        /* [n_embd][n_ff] */
    const float *post_ffw_norm; /* [n_embd] (post_norms) */
    /* Mixture of experts (hp.n_expert > 0) instead of ffn_gate/up/down: */
    tn_weight ffn_gate_inp;    /* [n_expert][n_embd] the router */
    tn_experts gate_exps;      /* n_expert x [n_ff_exp][n_embd] */
    tn_experts up_exps;        /* n_expert x [n_ff_exp][n_embd] */
    tn_experts down_exps;      /* n_expert x [n_embd][n_ff_exp] */
    const float *down_exps_s;  /* [n_expert] each expert's output scale, or NULL */
    /* Gemma 4 mixture (hp.moe_dense), beside ffn_gate/up/down: */
    const float *router_s;     /* [n_embd] ffn_gate_inp.scale: the router input's scale */
    const float *post_ffw_norm_1; /* [n_embd] of the dense branch's output */
    const float *pre_ffw_norm_2;  /* [n_embd] of the experts' input */
    const float *post_ffw_norm_2; /* [n_embd] of the experts' weighted sum */
    /* gpt-oss (hp.oai): */
    const float *bq;           /* [n_head * head_dim] */
    const float *bk;           /* [n_head_kv * head_dim] */
    const float *bv;           /* [n_head_kv * head_dim] */
    const float *bo;           /* [n_embd] */
    const float *sinks;        /* [n_head] attention-sink logits */
    const float *gate_inp_b;   /* [n_expert] router bias */
    const float *gate_exps_b;  /* [n_expert][n_ff_exp] */
    const float *up_exps_b;    /* [n_expert][n_ff_exp] */
    const float *down_exps_b;  /* [n_expert][n_embd] */
    /* Gemma 4 per-layer input (n_embd_per_layer = P > 0): */
    tn_weight pl_gate;         /* [P][n_embd] inp_gate */
    tn_weight pl_proj;         /* [n_embd][P] proj */
    const float *pl_post_norm; /* [n_embd] post_norm */
} tn_layer;

struct tn_model {
    tn_gguf *gguf;
    char *path;
    char *name;        /* general.name, or the file name */
    char *description;
    char quant[16];    /* "Q8_0": the file's type, else its largest tensors' */
    bool demo;         /* random weights Tern wrote (tn_model_is_demo) */
    tn_hparams hp;
    tn_weight tok_embd;       /* [n_vocab][n_embd] */
    tn_weight output;         /* [n_vocab][n_embd]; token_embd when tied */
    bool output_tied;
    const float *output_norm; /* [n_embd] */
    const float *rope_freqs;  /* [n_rot / 2] Llama 3 frequency divisors (Gemma 4: the
                                 full-attention layers' proportional rope), or NULL */
    const float *ones;        /* [max(max_head_dim, n_embd)] of 1: the weight of Gemma 4's value
                                 norm and router norm */
    /* Gemma 4 per-layer inputs (hp.n_embd_per_layer = P > 0): */
    tn_weight pl_tok_embd;    /* [n_vocab][n_layer * P]: stays in the mapped file, read
                                 one row per token (never repacked) */
    tn_weight pl_model_proj;  /* [n_layer * P][n_embd] */
    const float *pl_proj_norm; /* [P] */
    tn_layer *layers;         /* [n_layer] */
    float **owned;            /* the f32 copies of 1-D tensors above */
    int32_t n_owned;
    int32_t cap_owned;
    /* Tensors whose NaN/Inf pass waits for prepare (model.c): the
     * matrices the repack cache may serve, and the experts */
    struct tn_deferred_check *deferred_checks;
    int32_t n_deferred_checks;
    int32_t cap_deferred_checks;
    uint64_t finite_checked_bytes; /* what the NaN/Inf passes of the load read (tests) */
    /* The model file's mappings (tn_gguf_read_spans): the load's passes over
     * them run under tn_guarded_read */
    struct tn_read_span *read_spans;
    int n_read_spans;
    /* A decode step's read of one of read_spans' files (the repack cache's
     * file among them, once prepared) met the file cut short: that span +
     * 1, and every later step of every context fails with the same error
     * (the weights are gone); 0 while none did (forward.c). */
    atomic_int read_fault;
    /* Experts in the backend's layout, from the repack cache file (model.c
     * prepare): [n_layer][n_expert][3], gate, up, down */
    tn_weight *expert_ws;
    /* What computes the forward passes (tn-backend.h): it prepared the
     * matrices above at load (the CPU's: a faster layout in one allocation
     * it owns, the file's pages of those matrices dropped) and names the
     * arithmetic; every ctx of the model calls through backend.run. */
    tn_backend backend;
    uint32_t main_type;       /* the weight type holding most bytes */
    uint64_t n_params;
    uint64_t weight_bytes;
    tn_tokenizer *tokenizer;  /* NULL: none (tokenizer_error says why) */
    /* Why there is no tokenizer, as a tn_fail error: its format and arguments
     * let a caller show it translated (docs/TRANSLATING.md). */
    tn_error tokenizer_error;
    int chat_kind;            /* tn_chat_kind */
    const char *chat_warning; /* static text, or NULL */
};

/* Rows of one internal forward pass; longer calls are split, which changes
 * nothing in the result (batch invariance). */
#define TN_UBATCH 64

/* The prefetch modes of one context, measured (decode-tune.c). */
#define TN_DECODE_TUNE_SAMPLES 8 /* steps per mode */
typedef struct {
    tn_decode_tune_state state;
    int n_modes;                      /* the modes tried, in turn */
    uint8_t modes[TN_PREFETCH_MODES];
    uint8_t def[TN_TYPE_COUNT_];      /* the defaults: a mode leaves them only on a clear win */
    uint8_t mode[TN_TYPE_COUNT_];     /* the choice (the defaults until made) */
    int n;                            /* samples taken */
    double ms[TN_PREFETCH_MODES][TN_DECODE_TUNE_SAMPLES]; /* [mode][sample] whole steps */
    double type_ms[TN_PREFETCH_MODES][TN_DECODE_TUNE_SAMPLES][TN_TYPE_COUNT_];
    double med[TN_PREFETCH_MODES];    /* the medians, once chosen */
    double type_med[TN_PREFETCH_MODES][TN_TYPE_COUNT_];
    uint8_t wins[TN_PREFETCH_MODES][TN_TYPE_COUNT_]; /* blocks in which the mode beat the default */
} tn_prefetch_tune;
typedef struct {
    /* one_row and batch: prefetch modes; streams: weight streams per thread
     * in one-token decodes, the "modes" 1 and 2 (the count itself), measured
     * once one_row is chosen */
    tn_prefetch_tune one_row, batch, streams;
    int one_token_skipped;               /* first one-token steps left out before measuring */
    tn_prefetch_tune *sampling;          /* the class the running step samples, or NULL */
    int32_t rows;                        /* its rows */
    double step_type_ms[TN_TYPE_COUNT_]; /* its time per weight type */
} tn_decode_tune;

/* Reads TERN_DECODE_PREFETCH (set: the decode mode forced, no measuring)
 * and TERN_TWO_STREAMS (set: the stream count forced). */
void tn_decode_tune_init(tn_decode_tune *t);
/* Around every forward call of n_rows token rows (0: not tokens): begin
 * sets the process-wide modes for this context and returns a start time
 * when the call is a sample (else -1); end records it if the call
 * succeeded. Around each matrix product in between: mm_begin returns a
 * start time while sampling (else -1), mm_end books the time to the items'
 * weight types. */
double tn_decode_tune_begin(tn_decode_tune *t, int32_t n_rows);
void tn_decode_tune_end(tn_decode_tune *t, double started_ms, bool ok);
double tn_decode_tune_mm_begin(const tn_decode_tune *t);
void tn_decode_tune_report(const tn_decode_tune *t, tn_decode_tuning *out);
void tn_decode_tune_mm_end(tn_decode_tune *t, double started_ms, const tn_matmul_item *items,
                           int n);

struct tn_ctx {
    const tn_model *model;
    tn_cpu *cpu;
    int32_t n_ctx;
    int32_t n_threads;
    int32_t kv_len;
    /* KV cache, bf16, per layer and kv head one contiguous region of
     * kv_rows positions (n_ctx rounded up to TN_ATTN_KB), read in position
     * order by attention. The backend's layout (kv_store); the CPU's: keys
     * in blocks of TN_ATTN_KB positions, each [head_dim / 2][TN_ATTN_KB][2]
     * (tn_attn_k_index, engine/cpu/tn-cpu.h); values in pairs of positions,
     * [pos / 2][head_dim][2] (tn_attn_v_index). */
    int32_t kv_rows;
    uint16_t *k_cache; /* one mapping (kv_map, forward.c): keys, then values */
    uint16_t *v_cache; /* = k_cache + kv_half_bytes */
    size_t kv_half_bytes;
    size_t *kv_off;    /* [n_layer] element offset of each layer's region in either half;
                          a shared-KV layer has its source layer's */
    /* Scratch for TN_UBATCH rows. */
    float *x;      /* [U][n_embd] residual stream */
    float *xn;     /* [U][n_embd] normed input of a sublayer */
    float *q;      /* [U][n_head * head_dim] */
    uint16_t *qb;  /* [U][n_head * head_dim] the queries in bf16, as attention reads them */
    float *k;      /* [U][n_head_kv * head_dim] */
    float *v;      /* [U][n_head_kv * head_dim] */
    float *att;    /* [U][n_head * head_dim] attention output */
    float *o;      /* [U][n_embd] sublayer output */
    float *gate;   /* [U][n_ff] */
    float *up;     /* [U][n_ff] */
    float *rope_cs; /* [2][U][max_rot / 2][2] cos, sin for full and sliding layers */
    float *ple;    /* [U][n_layer][n_embd_per_layer] Gemma 4 per-layer inputs */
    float *ple_row; /* [n_layer * n_embd_per_layer] one row of per_layer_token_embd */
    float *plg;    /* [U][n_embd_per_layer] the per-layer gate */
    float *scores; /* [n_threads][tn_attention_scratch_floats] attention scratch */
    /* Mixture of experts (forward.c, moe_ffn), for U rows and K = n_expert_used: */
    float *moe_logits; /* [U][n_expert] router logits, then probabilities */
    int32_t *moe_sel;  /* [U][K] the chosen experts, best first */
    float *moe_w;      /* [U][K] their normalized weights */
    int32_t *moe_list; /* [U * K] (row * K + slot) grouped by expert */
    int32_t *moe_count; /* [n_expert + 1] start of each expert's group in moe_list */
    int32_t *moe_at;   /* [U * K] where (row * K + slot) sits in moe_list */
    float *moe_in;     /* [U * K][n_embd] the rows in moe_list's order, gathered */
    float *moe_y;      /* [U * K][n_embd] the experts' outputs, in moe_list's order */
    /* [3 * n_expert] one layer's chosen experts' matrices, [2 * n_expert]
     * the products of one hand-off (gate and up, then down) */
    tn_weight *moe_mats;
    tn_matmul_item *moe_items;
    float *moe_dense;  /* [U][n_embd] Gemma 4: the dense branch's normed output */
    int32_t ub_rows; /* rows the scratch above holds (U): TN_UBATCH, more once an
                        image span had to run as one pass (tn_ctx_decode_embd) */
    /* Hidden-state capture (speculation drafters read these). */
    int32_t *cap_ids;  /* [n_cap] 0 = embeddings, i = output of layer i - 1 */
    int32_t n_cap;
    float *cap;        /* [cap_rows][n_cap][n_embd] */
    int32_t cap_rows;  /* rows of the last decode */
    int32_t cap_alloc; /* rows allocated */
    tn_decode_tune decode_tune;
    atomic_bool cancel;
};

/* A weight [rows][cols] (GGUF ne = {cols, rows}) of any GGUF file, with the
 * model loader's checks of shape, type and size (model.c); `kind` names the
 * file's kind in the message for a missing tensor ("not a KIND model"). */
int tn_gguf_get_weight(const tn_gguf *g, const char *path, const char *kind, const char *name,
                       int64_t cols, int64_t rows, bool required, tn_weight *w, bool *found,
                       tn_error *err);

/* w's rows (a weight of g, from tn_gguf_get_weight) converted to f32 into
 * out (w->rows * w->cols floats, the caller's), the reads of g's mapping
 * under tn_guarded_read: a file truncated meanwhile is TN_ERR_IO, not a
 * SIGBUS. A type that cannot be converted fails naming `name`. */
int tn_gguf_weight_to_f32(const tn_gguf *g, const char *path, const char *name,
                          const tn_weight *w, float *out, tn_error *err);

/* Layer il's KV head kvh in the context's cache (keys, or values), in the
 * backend's layout: what its attention reads (a shared-KV layer's is its
 * source layer's). The MTP assistant attends over it. */
const uint16_t *tn_ctx_kv_head(const tn_ctx *ctx, bool values, int32_t il, int32_t kvh);

/* Row ops shared by the forward pass and (later) drafters. All are per row
 * and deterministic: the result depends on the row alone. */
void tn_rmsnorm(float *y, const float *x, const float *w, int32_t n, float eps);
float tn_dot_f32(const float *a, const float *b, int32_t n);

#endif
