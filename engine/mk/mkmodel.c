/* Random-weight GGUF models with real shapes and real tokenizers.
 *
 * No model can be downloaded where Tern is tested, so the tests, the
 * benchmarks and the demo run on models written here. They must behave like
 * real ones where it matters to the engine: real tensor names, shapes, types
 * and metadata, a real vocabulary, and next-token distributions peaked
 * enough that greedy decoding is well defined rather than a coin toss
 * between near-equal logits.
 *
 * Initialisation (documented in docs/MKMODEL.md):
 * - every matrix W [in -> out] is uniform with std 1/sqrt(in), so each
 *   projection keeps the scale of its input;
 * - the projections that write into the residual stream (attn_output,
 *   ffn_down) are further scaled by 1/sqrt(2 * n_layer), so the residual
 *   grows gently over depth (as in GPT-2's initialisation);
 * - norm weights are 1 (gemma3 stores 1 + w, so also 1), QK-norm weights 1;
 * - the LM head (output.weight, or the tied embedding) has std
 *   logit_scale / sqrt(n_embd): after the final RMSNorm the hidden state has
 *   unit RMS, so the logits have std ~logit_scale (10 by default). The gap
 *   between the two largest of V Gaussian logits is then about
 *   logit_scale / sqrt(2 ln V) (~2 for V = 32k), far above quantization
 *   noise, so argmax is stable across weight types and kernels.
 * Weights are drawn per row from a generator seeded by (seed, tensor name,
 * row), so a model is the same whatever the thread count. */
#include "tn-mk.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

tn_mkmodel_params tn_mkmodel_default_params(void) {
    tn_mkmodel_params p;
    memset(&p, 0, sizeof p);
    p.arch = "llama";
    p.type = "q8_0";
    p.n_embd = 256;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 64;
    p.n_ff = 768;
    p.n_ctx = 4096;
    p.sliding_window = 512;
    p.seed = 1;
    p.logit_scale = 10.0f;
    return p;
}

/* Shapes of the published Gemma 4 dense models, from their Hugging Face
 * config.json files (hidden_size, num_hidden_layers, intermediate_size,
 * num_attention_heads, num_key_value_heads / num_global_key_value_heads,
 * head_dim / global_head_dim, hidden_size_per_layer_input,
 * num_kv_shared_layers, sliding_window, layer_types, attention_k_eq_v,
 * use_double_wide_mlp), checked against copies of those configs quoted in
 * public code (docs/MKMODEL.md lists them and how they were checked). */
int tn_mkmodel_preset(tn_mkmodel_params *p, const char *name) {
    if (!p || !name)
        return TN_ERR_INVALID;
    if (!strcmp(name, "gpt-oss-20b")) {
        /* openai/gpt-oss-20b's config.json as the GGUF keys llama.cpp reads
         * carry it (conversion/gpt_oss.py + the base converter): hidden_size
         * 2880, 24 layers, 64 query and 8 KV heads of head_dim 64,
         * intermediate_size 2880 (each expert's width), 32 local experts,
         * 4 per token, sliding_window 128 on every other layer (even
         * layers, llama.cpp's pattern 2), rope_theta 150000 with YaRN
         * factor 32 over 4096 original positions, vocab_size 201088,
         * max_position_embeddings 131072, untied (docs/MKMODEL.md). */
        p->arch = "gpt-oss";
        p->n_embd = 2880;
        p->n_layer = 24;
        p->n_head = 64;
        p->n_head_kv = 8;
        p->head_dim = 64;
        p->n_ff = 2880;
        p->n_expert = 32;
        p->n_expert_used = 4;
        p->n_ff_exp = 2880;
        p->n_ctx = 131072;
        p->sliding_window = 128;
        p->tied_output = false;
        return TN_OK;
    }
    if (!strcmp(name, "qwen3-30b-a3b")) {
        /* Qwen/Qwen3-30B-A3B's config.json (hidden_size 2048, 48 layers,
         * 32 query and 4 KV heads of head_dim 128, intermediate_size 6144,
         * moe_intermediate_size 768, 128 experts, 8 per token,
         * max_position_embeddings 40960, untied), as recalled: the peer's
         * sources name the model (conversion/qwen.py, 48 layers = 30B-A3B in
         * src/models/qwen3moe.cpp) but not these numbers. docs/MKMODEL.md. */
        p->arch = "qwen3moe";
        p->n_embd = 2048;
        p->n_layer = 48;
        p->n_head = 32;
        p->n_head_kv = 4;
        p->head_dim = 128;
        p->n_ff = 6144;
        p->n_expert = 128;
        p->n_expert_used = 8;
        p->n_ff_exp = 768;
        p->n_ctx = 40960;
        p->tied_output = false;
        return TN_OK;
    }
    p->arch = "gemma4";
    p->n_expert = p->n_expert_used = p->n_ff_exp = 0;
    p->n_head = 8;
    p->head_dim = 512;
    p->head_dim_swa = 256;
    p->n_ctx = 131072;
    p->sliding_window = 512;
    p->k_eq_v = false;
    p->n_head_kv_full = 0;
    p->tied_output = true;
    if (!strcmp(name, "gemma4-e2b")) {
        p->n_embd = 1536;
        p->n_layer = 35;
        p->n_head_kv = 1;
        p->n_ff = 6144;
        p->n_embd_per_layer = 256;
        p->n_shared_kv = 20;
        p->swa_period = 5;
        p->double_wide_ffn = true;
    } else if (!strcmp(name, "gemma4-e4b")) {
        p->n_embd = 2560;
        p->n_layer = 42;
        p->n_head_kv = 2;
        p->n_ff = 10240;
        p->n_embd_per_layer = 256;
        p->n_shared_kv = 18;
        p->swa_period = 6;
        p->double_wide_ffn = false;
    } else if (!strcmp(name, "gemma4-26b-a4b")) {
        /* google/gemma-4-26B-A4B's text_config: hidden_size 2816, 30
         * layers, 16 query heads, num_key_value_heads 8 (sliding) and
         * num_global_key_value_heads 2 (full, attention_k_eq_v), head_dim
         * 256 / global_head_dim 512, intermediate_size 2112 (the dense
         * branch), enable_moe_block with num_experts 128, top_k_experts 8,
         * moe_intermediate_size 704, sliding_window 1024, five sliding
         * layers then one full, no per-layer inputs, no shared KV, tied,
         * max_position_embeddings 262144 (docs/MKMODEL.md: how checked). */
        p->n_embd = 2816;
        p->n_layer = 30;
        p->n_head = 16;
        p->n_head_kv = 8;
        p->n_head_kv_full = 2;
        p->n_ff = 2112;
        p->n_embd_per_layer = 0;
        p->n_shared_kv = 0;
        p->swa_period = 6;
        p->sliding_window = 1024;
        p->k_eq_v = true;
        p->double_wide_ffn = false;
        p->n_expert = 128;
        p->n_expert_used = 8;
        p->n_ff_exp = 704;
        p->n_ctx = 262144;
    } else if (!strcmp(name, "gemma4-31b")) {
        p->n_embd = 5376;
        p->n_layer = 60;
        p->n_head = 32;
        p->n_head_kv = 16;
        p->n_head_kv_full = 4;
        p->n_ff = 21504;
        p->n_embd_per_layer = 0;
        p->n_shared_kv = 0;
        p->swa_period = 6;
        p->sliding_window = 1024;
        p->k_eq_v = true;
        p->double_wide_ffn = false;
    } else {
        return TN_ERR_INVALID;
    }
    return TN_OK;
}

/* Gemma 4 layer il: sliding-window or full attention. */
static bool g4_swa(const tn_mkmodel_params *p, int64_t il) {
    int64_t period = p->swa_period > 0 ? p->swa_period : 5;
    return il % period != period - 1;
}

/* ------------------------------------------------------------ tensor plan */

/* FILL_ROPE_PROP: Gemma 4's rope_freqs for partial_rotary_factor 0.25, the
 * first quarter 1 and the rest 1e30. */
typedef enum { FILL_RANDOM, FILL_ONES, FILL_ROPE_PROP } fill_kind;

typedef struct tensor_plan {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[3]; /* ne[2]: experts of a 3-D tensor (1 otherwise) */
    fill_kind kind;
    float std;
} tensor_plan;

typedef struct model_plan {
    const tn_mkmodel_params *p;
    tensor_plan *t;
    size_t n, cap;
    int n_threads;
} model_plan;

static int plan_add(model_plan *m, const char *name, uint32_t type, uint32_t n_dims, uint64_t ne0,
                    uint64_t ne1, fill_kind kind, float std) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        tensor_plan *t = realloc(m->t, cap * sizeof *t);
        if (!t)
            return TN_ERR_NOMEM;
        m->t = t;
        m->cap = cap;
    }
    tensor_plan *t = &m->t[m->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = 1;
    t->kind = kind;
    t->std = std;
    return TN_OK;
}

/* A K-quant needs rows that are whole 256-value super-blocks; like ggml's
 * quantizer, fall back to the nearest 32-block type otherwise. */
static uint32_t fit_type(uint32_t type, uint64_t ne0) {
    if (ne0 % tn_type_block_size(type) == 0)
        return type;
    switch (type) {
    case TN_TYPE_Q4_K: return TN_TYPE_Q5_0;
    case TN_TYPE_Q5_K: return TN_TYPE_Q5_1;
    case TN_TYPE_Q6_K: return TN_TYPE_Q8_0;
    case TN_TYPE_Q2_K:
    case TN_TYPE_Q3_K:
    case TN_TYPE_IQ4_XS: return TN_TYPE_IQ4_NL;
    default: return ne0 % 32 == 0 ? TN_TYPE_Q8_0 : TN_TYPE_F16;
    }
}

/* llama.cpp's "use more bits" rule of the _M mixes: the first and last
 * eighth of the layers, and every third layer in between. */
static bool use_more_bits(int64_t il, int64_t n) {
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

typedef struct type_choice {
    uint32_t base;
    bool mix;      /* _M mix of K types */
    uint32_t more; /* the larger type of the mix */
} type_choice;

static int parse_type(const char *name, type_choice *tc) {
    memset(tc, 0, sizeof *tc);
    if (!strcasecmp(name, "q4_k_m")) {
        tc->base = TN_TYPE_Q4_K;
        tc->more = TN_TYPE_Q6_K;
        tc->mix = true;
        return TN_OK;
    }
    if (!strcasecmp(name, "q5_k_m")) {
        tc->base = TN_TYPE_Q5_K;
        tc->more = TN_TYPE_Q6_K;
        tc->mix = true;
        return TN_OK;
    }
    int t = tn_type_from_name(name);
    if (t < 0 || !tn_type_supported((uint32_t)t) || t == TN_TYPE_Q8_1 || t == TN_TYPE_Q8_K)
        return TN_ERR_INVALID;
    tc->base = (uint32_t)t;
    return TN_OK;
}

static int build_plan(model_plan *m, int64_t n_vocab, tn_error *err) {
    const tn_mkmodel_params *p = m->p;
    type_choice tc;
    if (parse_type(p->type, &tc))
        return tn_fail(err, TN_ERR_INVALID,
                       "unknown weight type '%s' (use f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
                       "q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, mxfp4, q4_k_m or "
                       "q5_k_m)",
                       p->type);
    bool g4 = !strcmp(p->arch, "gemma4");
    bool gemma = g4 || !strcmp(p->arch, "gemma3");
    const bool moe = !strcmp(p->arch, "qwen3moe");
    const bool oss = !strcmp(p->arch, "gpt-oss");
    /* mxfp4 is llama-quantize's MXFP4_MOE: the experts MXFP4, every other
     * matrix Q8_0 (the published gpt-oss files are so). */
    const uint32_t exp_type = tc.base;
    if (tc.base == TN_TYPE_MXFP4)
        tc.base = TN_TYPE_Q8_0;
    const bool g4moe = g4 && p->n_expert > 0;
    bool qk_norm = gemma || !strcmp(p->arch, "qwen3") || moe;
    /* Gemma 3 is always tied; Gemma 4 as asked (the presets and the CLI
     * tie it unless told --untied, as the published models are). */
    bool tied = (p->tied_output || !strcmp(p->arch, "gemma3")) && !oss; /* llama.cpp needs
                                                                            gpt-oss's output */
    uint64_t E = (uint64_t)p->n_embd, V = (uint64_t)n_vocab;
    const uint64_t P = g4 ? (uint64_t)p->n_embd_per_layer : 0;
    const int64_t n_kv_layers = p->n_layer - (g4 ? p->n_shared_kv : 0);
    float head_std = p->logit_scale / sqrtf((float)E);
    float in_std = 1.0f / sqrtf((float)E);
    float resid = 1.0f / sqrtf(2.0f * (float)p->n_layer);
    int rc;
    char name[64];
    /* the embedding doubles as the LM head when tied; untied, it only needs
     * unit-scale rows (the first norm rescales them anyway) */
    uint32_t embd_type = fit_type(tc.mix ? tc.base : tc.base, E);
    if ((rc = plan_add(m, "token_embd.weight", embd_type, 2, E, V, FILL_RANDOM,
                       tied ? head_std : 1.0f)))
        return rc;
    if (P > 0) {
        /* per-layer inputs: unit-scale table rows; the projection keeps the
         * scale of the embedding (the forward pass RMS-normalizes it) */
        const uint64_t LP = (uint64_t)p->n_layer * P;
        if ((rc = plan_add(m, "per_layer_token_embd.weight", fit_type(tc.base, LP), 2, LP, V,
                           FILL_RANDOM, 1.0f)) ||
            (rc = plan_add(m, "per_layer_model_proj.weight", fit_type(tc.base, E), 2, E, LP,
                           FILL_RANDOM, in_std)) ||
            (rc = plan_add(m, "per_layer_proj_norm.weight", TN_TYPE_F32, 1, P, 1, FILL_ONES, 0)))
            return rc;
    }
    if (g4) {
        /* proportional rope of the full-attention layers: the first quarter
         * of the rotation pairs turn, the rest have factor 1e30 (no turn),
         * as llama.cpp's converter writes them */
        if ((rc = plan_add(m, "rope_freqs.weight", TN_TYPE_F32, 1, (uint64_t)p->head_dim / 2, 1,
                           FILL_ROPE_PROP, 0)))
            return rc;
    }
    for (int64_t il = 0; il < p->n_layer; il++) {
        uint32_t big = tc.mix && use_more_bits(il, p->n_layer) ? tc.more : tc.base;
        const uint32_t exp_big = exp_type == TN_TYPE_MXFP4 ? exp_type : big;
        const bool swa = g4 && g4_swa(p, il);
        const int64_t hd = g4 && swa && p->head_dim_swa > 0 ? p->head_dim_swa : p->head_dim;
        const int64_t nkv = g4 && !swa && p->n_head_kv_full > 0 ? p->n_head_kv_full : p->n_head_kv;
        const bool own_kv = il < n_kv_layers;
        const uint64_t F = (uint64_t)p->n_ff * (g4 && p->double_wide_ffn && !own_kv ? 2 : 1);
        const uint64_t Q = (uint64_t)(p->n_head * hd), KV = (uint64_t)(nkv * hd);
#define T(suffix, type, ne0, ne1, kind, std)                                        \
    do {                                                                            \
        snprintf(name, sizeof name, "blk.%lld." suffix, (long long)il);             \
        if ((rc = plan_add(m, name, (ne1) ? fit_type(type, ne0) : TN_TYPE_F32,      \
                           (ne1) ? 2 : 1, ne0, (ne1) ? (ne1) : 1, kind, std)))      \
            return rc;                                                              \
    } while (0)
        if (oss) {
            /* gpt-oss (src/models/openai-moe.cpp): biases everywhere, one
             * sink logit per head (std 1: some heads' sinks take a real
             * share of the softmax), post_attention_norm before the
             * mixture. Router and its bias std 1 (logits std ~1.4); the
             * gate and up experts 3 times wider than unit so that some of
             * their outputs pass swiglu_oai's clamp at 7, the down experts
             * narrowed to match. */
            const uint64_t NE = (uint64_t)p->n_expert, FX = (uint64_t)p->n_ff_exp;
            T("attn_norm.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
            T("attn_q.weight", tc.base, E, Q, FILL_RANDOM, in_std);
            T("attn_q.bias", TN_TYPE_F32, Q, 0, FILL_RANDOM, 0.1f);
            T("attn_k.weight", tc.base, E, KV, FILL_RANDOM, in_std);
            T("attn_k.bias", TN_TYPE_F32, KV, 0, FILL_RANDOM, 0.1f);
            T("attn_v.weight", big, E, KV, FILL_RANDOM, in_std);
            T("attn_v.bias", TN_TYPE_F32, KV, 0, FILL_RANDOM, 0.1f);
            T("attn_output.weight", tc.base, Q, E, FILL_RANDOM, resid / sqrtf((float)Q));
            T("attn_output.bias", TN_TYPE_F32, E, 0, FILL_RANDOM, 0.1f * resid);
            T("attn_sinks.weight", TN_TYPE_F32, (uint64_t)p->n_head, 0, FILL_RANDOM, 1.0f);
            T("post_attention_norm.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
            T("ffn_gate_inp.weight", TN_TYPE_F32, E, NE, FILL_RANDOM, in_std);
            T("ffn_gate_inp.bias", TN_TYPE_F32, NE, 0, FILL_RANDOM, 1.0f);
            T("ffn_gate_exps.weight", exp_type, E, FX, FILL_RANDOM, 3.0f * in_std);
            m->t[m->n - 1].n_dims = 3, m->t[m->n - 1].ne[2] = NE;
            T("ffn_gate_exps.bias", TN_TYPE_F32, FX, NE, FILL_RANDOM, 0.5f);
            T("ffn_up_exps.weight", exp_type, E, FX, FILL_RANDOM, 3.0f * in_std);
            m->t[m->n - 1].n_dims = 3, m->t[m->n - 1].ne[2] = NE;
            T("ffn_up_exps.bias", TN_TYPE_F32, FX, NE, FILL_RANDOM, 0.5f);
            T("ffn_down_exps.weight", exp_big, FX, E, FILL_RANDOM, resid / sqrtf((float)FX) / 6.0f);
            m->t[m->n - 1].n_dims = 3, m->t[m->n - 1].ne[2] = NE;
            T("ffn_down_exps.bias", TN_TYPE_F32, E, NE, FILL_RANDOM, 0.1f * resid);
            continue;
        }
        T("attn_norm.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
        T("attn_q.weight", tc.base, E, Q, FILL_RANDOM, in_std);
        if (own_kv) {
            T("attn_k.weight", tc.base, E, KV, FILL_RANDOM, in_std);
            if (!(g4 && p->k_eq_v && !swa))
                T("attn_v.weight", big, E, KV, FILL_RANDOM, in_std);
        }
        T("attn_output.weight", tc.base, Q, E, FILL_RANDOM, resid / sqrtf((float)Q));
        if (qk_norm) {
            T("attn_q_norm.weight", TN_TYPE_F32, (uint64_t)hd, 0, FILL_ONES, 0);
            if (own_kv)
                T("attn_k_norm.weight", TN_TYPE_F32, (uint64_t)hd, 0, FILL_ONES, 0);
        }
        if (gemma)
            T("post_attention_norm.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
        T("ffn_norm.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
        if (moe) {
            /* The router stays f32 (llama-quantize leaves ffn_gate_inp so);
             * its logits have std ~1, so a token's experts are a few of
             * many rather than a near-uniform mix. The experts: 3-D
             * tensors, ne = {in, out, n_expert}, the K-quant mix's larger
             * type on ffn_down_exps as for a dense ffn_down. */
            const uint64_t NE = (uint64_t)p->n_expert, FX = (uint64_t)p->n_ff_exp;
            T("ffn_gate_inp.weight", TN_TYPE_F32, E, NE, FILL_RANDOM, in_std);
            T("ffn_gate_exps.weight", exp_type == TN_TYPE_MXFP4 ? exp_type : tc.base, E, FX,
              FILL_RANDOM, in_std);
            m->t[m->n - 1].n_dims = 3, m->t[m->n - 1].ne[2] = NE;
            T("ffn_up_exps.weight", exp_type == TN_TYPE_MXFP4 ? exp_type : tc.base, E, FX,
              FILL_RANDOM, in_std);
            m->t[m->n - 1].n_dims = 3, m->t[m->n - 1].ne[2] = NE;
            T("ffn_down_exps.weight", exp_big, FX, E, FILL_RANDOM, resid / sqrtf((float)FX));
            m->t[m->n - 1].n_dims = 3, m->t[m->n - 1].ne[2] = NE;
        } else {
            T("ffn_gate.weight", tc.base, E, F, FILL_RANDOM, in_std);
            T("ffn_up.weight", tc.base, E, F, FILL_RANDOM, in_std);
            T("ffn_down.weight", big, F, E, FILL_RANDOM, resid / sqrtf((float)F));
        }
        if (g4moe) {
            /* Gemma 4 26B-A4B: the dense FFN above is the shared branch; the
             * experts beside it as llama.cpp's converter writes them (gate
             * and up fused, ne = {embd, 2 expert_ff, experts}; the router's
             * input scale and per-expert output scale as 1-D tensors). The
             * router's std 1 gives its logits std ~1: its input is a unit
             * RMS row scaled by 1/sqrt(embd). */
            const uint64_t NE = (uint64_t)p->n_expert, FX = (uint64_t)p->n_ff_exp, FX2 = 2 * FX;
            T("post_ffw_norm_1.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
            T("pre_ffw_norm_2.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
            T("post_ffw_norm_2.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
            T("ffn_gate_inp.weight", TN_TYPE_F32, E, NE, FILL_RANDOM, 1.0f);
            T("ffn_gate_inp.scale", TN_TYPE_F32, E, 0, FILL_ONES, 0);
            T("ffn_gate_up_exps.weight", exp_type == TN_TYPE_MXFP4 ? exp_type : tc.base, E, FX2,
              FILL_RANDOM, in_std);
            m->t[m->n - 1].n_dims = 3, m->t[m->n - 1].ne[2] = NE;
            T("ffn_down_exps.weight", exp_big, FX, E, FILL_RANDOM, resid / sqrtf((float)FX));
            m->t[m->n - 1].n_dims = 3, m->t[m->n - 1].ne[2] = NE;
            T("ffn_down_exps.scale", TN_TYPE_F32, NE, 0, FILL_ONES, 0);
        }
        if (gemma)
            T("post_ffw_norm.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
        if (P > 0) {
            T("inp_gate.weight", tc.base, E, P, FILL_RANDOM, in_std);
            T("proj.weight", tc.base, P, E, FILL_RANDOM, resid / sqrtf((float)P));
            T("post_norm.weight", TN_TYPE_F32, E, 0, FILL_ONES, 0);
        }
        if (g4)
            T("layer_output_scale.weight", TN_TYPE_F32, 1, 0, FILL_ONES, 0);
#undef T
    }
    if ((rc = plan_add(m, "output_norm.weight", TN_TYPE_F32, 1, E, 1, FILL_ONES, 0)))
        return rc;
    if (!tied &&
        (rc = plan_add(m, "output.weight", fit_type(tc.mix ? TN_TYPE_Q6_K : tc.base, E), 2, E, V,
                       FILL_RANDOM, head_std)))
        return rc;
    return TN_OK;
}

/* --------------------------------------------------------- weight filling */

typedef struct fill_job {
    const tensor_plan *t;
    uint64_t seed;
    uint8_t *dst;
    size_t row_bytes;
    uint64_t rows; /* the rows quantized: all, or the pool's */
    int status;
} fill_job;

typedef struct fill_thread {
    fill_job *job;
    int ith, nth;
} fill_thread;

static void fill_rows(fill_job *job, uint64_t r0, uint64_t r1, float *row) {
    const tensor_plan *t = job->t;
    /* uniform on [-a, a] has std a / sqrt(3) */
    float a = t->std * sqrtf(3.0f);
    /* The row's start adds the row's step where tn_mk_row_state XORs it: kept,
     * since changing it would change the bytes of every model the tests and
     * docs/PERFORMANCE.md's comparisons were made with. */
    uint64_t base = job->seed ^ tn_fnv1a_str(t->name);
    for (uint64_t r = r0; r < r1; r++) {
        uint64_t s = base + r * 0x9e3779b97f4a7c15ULL;
        for (uint64_t i = 0; i < t->ne[0]; i++) {
            if (t->kind == FILL_ONES) {
                row[i] = 1.0f;
            } else if (t->kind == FILL_ROPE_PROP) {
                row[i] = i < t->ne[0] / 4 ? 1.0f : 1e30f;
            } else {
                row[i] = (float)(tn_mk_uniform(&s) * a);
            }
        }
        if (tn_quantize_row(t->type, row, job->dst + r * job->row_bytes, (int64_t)t->ne[0]) !=
            TN_OK)
            job->status = TN_ERR_UNSUPPORTED;
    }
}

static void *fill_thread_main(void *arg) {
    fill_thread *ft = arg;
    fill_job *job = ft->job;
    uint64_t rows = job->rows;
    uint64_t r0 = rows * (uint64_t)ft->ith / (uint64_t)ft->nth;
    uint64_t r1 = rows * (uint64_t)(ft->ith + 1) / (uint64_t)ft->nth;
    float *row = malloc(job->t->ne[0] * sizeof *row);
    if (!row) {
        job->status = TN_ERR_NOMEM;
        return NULL;
    }
    fill_rows(job, r0, r1, row);
    free(row);
    return NULL;
}

typedef struct fill_ctx {
    model_plan *m;
    size_t index;
} fill_ctx;

static int fill_tensor(void *user, const char *name, void *dst, uint64_t nbytes, tn_error *err) {
    fill_ctx *fc = user;
    const tensor_plan *t = &fc->m->t[fc->index];
    const uint64_t rows = t->ne[1] * t->ne[2];
    const uint64_t pool = fc->m->p->row_pool > 0 && (uint64_t)fc->m->p->row_pool < rows &&
                                  t->kind == FILL_RANDOM
                              ? (uint64_t)fc->m->p->row_pool
                              : rows;
    fill_job job = {.t = t, .seed = fc->m->p->seed, .dst = dst,
                    .row_bytes = tn_type_row_bytes(t->type, t->ne[0]), .rows = pool};
    if (job.row_bytes * rows != nbytes)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel: size mismatch for %s", name);
    int nth = fc->m->n_threads;
    if ((uint64_t)nth > pool)
        nth = (int)pool;
    if (nth < 1)
        nth = 1;
    pthread_t th[64];
    fill_thread ft[64];
    int started = 0;
    for (int i = 0; i < nth; i++) {
        ft[i] = (fill_thread){&job, i, nth};
        if (i > 0 && pthread_create(&th[i], NULL, fill_thread_main, &ft[i]) == 0)
            started = i;
        else if (i > 0)
            break;
    }
    /* threads that could not start are done by the caller */
    for (int i = started + 1; i < nth; i++)
        fill_thread_main(&ft[i]);
    fill_thread_main(&ft[0]);
    for (int i = 1; i <= started; i++)
        pthread_join(th[i], NULL);
    if (job.status)
        return tn_fail(err, job.status, "mkmodel: cannot produce %s as %s", name,
                       tn_type_name(t->type));
    /* The rest of the rows: copies of the pool's, picked by the seed. */
    uint64_t s = job.seed ^ tn_fnv1a_str(t->name) ^ 0x706f6f6cULL;
    for (uint64_t r = pool; r < rows; r++)
        memcpy(job.dst + r * job.row_bytes, job.dst + (tn_splitmix64(&s) % pool) * job.row_bytes,
               job.row_bytes);
    return TN_OK;
}

/* ------------------------------------------------------ synthetic vocabulary */

/* A tiny SentencePiece-style vocabulary: control tokens, the 256 byte
 * tokens, printable ASCII, and a few hundred frequent English bigrams so
 * that merging is exercised. Enough for tests that want a small vocabulary
 * (sampling statistics) and for models without a tokenizer file. */
static int synthetic_vocab(tn_gguf_writer *w, int64_t *n_vocab) {
    static const char *control[] = {"<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"};
    static const char *bigrams =
        "thheinerantheonndhaesstenatitoisedorarteasngeentoouhisiaseofitalsrhas";
    enum { MAXTOK = 600 };
    char *tokens[MAXTOK];
    float scores[MAXTOK];
    int32_t types[MAXTOK];
    int n = 0, rc = TN_OK;
    for (size_t i = 0; i < sizeof control / sizeof control[0]; i++) {
        tokens[n] = strdup(control[i]);
        scores[n] = 0.0f;
        types[n] = i == 0 ? 2 : 3; /* unknown, control */
        n++;
    }
    for (int b = 0; b < 256; b++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        tokens[n] = strdup(buf);
        scores[n] = 0.0f;
        types[n] = 6; /* byte */
        n++;
    }
    /* "▁" and printable ASCII: single characters */
    tokens[n] = strdup("\xe2\x96\x81");
    scores[n] = -1.0f;
    types[n++] = 1;
    for (int c = 0x21; c < 0x7f; c++) {
        char buf[2] = {(char)c, 0};
        tokens[n] = strdup(buf);
        scores[n] = -2.0f - (float)(c - 0x21) * 0.001f;
        types[n++] = 1;
    }
    /* "▁x" for each lowercase letter and a list of bigrams, most frequent first */
    for (int c = 'a'; c <= 'z'; c++) {
        char buf[8] = "\xe2\x96\x81";
        buf[3] = (char)c;
        buf[4] = 0;
        tokens[n] = strdup(buf);
        scores[n] = -10.0f - (float)(c - 'a') * 0.01f;
        types[n++] = 1;
    }
    for (size_t i = 0; bigrams[i] && bigrams[i + 1] && n < MAXTOK; i += 2) {
        char buf[3] = {bigrams[i], bigrams[i + 1], 0};
        bool dup = false;
        for (int j = 0; j < n && !dup; j++)
            dup = !strcmp(tokens[j], buf);
        if (dup)
            continue;
        tokens[n] = strdup(buf);
        scores[n] = -20.0f - (float)i * 0.01f;
        types[n++] = 1;
    }
    for (int i = 0; i < n; i++)
        if (!tokens[i])
            rc = TN_ERR_NOMEM;
    if (!rc) rc = tn_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (!rc) rc = tn_gguf_writer_set_str(w, "tokenizer.ggml.pre", "default");
    if (!rc) rc = tn_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, (uint64_t)n);
    if (!rc) rc = tn_gguf_writer_set_arr(w, "tokenizer.ggml.scores", TN_GGUF_F32, scores, (uint64_t)n);
    if (!rc) rc = tn_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TN_GGUF_I32, types, (uint64_t)n);
    if (!rc) rc = tn_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (!rc) rc = tn_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (!rc) rc = tn_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 4);
    if (!rc) rc = tn_gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", 4);
    if (!rc) rc = tn_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    if (!rc) rc = tn_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    if (!rc) rc = tn_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", true);
    if (!rc)
        rc = tn_gguf_writer_set_str(
            w, "tokenizer.chat_template",
            "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
            "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
            "%}{{ '<|im_start|>assistant\\n' }}{% endif %}");
    for (int i = 0; i < n; i++)
        free(tokens[i]);
    *n_vocab = n;
    return rc;
}

/* The tokenizer.* metadata of another GGUF (a llama.cpp vocabulary file such
 * as ggml-vocab-gemma-4.gguf, or a real model), copied as it is. */
static int copy_vocab(const char *path, tn_gguf_writer *w, int64_t *n_vocab, tn_error *err) {
    tn_gguf *g = NULL;
    int rc = tn_gguf_open(path, &g, err);
    if (rc)
        return rc;
    const tn_gguf_value *toks = tn_gguf_find(g, "tokenizer.ggml.tokens");
    if (!toks || toks->type != TN_GGUF_ARRAY || toks->v.arr.n == 0) {
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_FORMAT, "%s: no tokenizer.ggml.tokens to copy", path);
    }
    *n_vocab = (int64_t)toks->v.arr.n;
    for (int64_t i = 0; !rc && i < tn_gguf_n_kv(g); i++) {
        tn_str k = tn_gguf_kv_key(g, i);
        if (k.len < 10 || memcmp(k.ptr, "tokenizer.", 10) || k.len >= 256)
            continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        rc = tn_gguf_writer_set_value(w, key, tn_gguf_kv_value(g, i));
    }
    tn_gguf_close(g);
    if (rc)
        tn_fail(err, rc, "mkmodel: cannot copy the vocabulary of %s", path);
    return rc;
}

/* --------------------------------------------------------------- metadata */

static int write_hparams(tn_gguf_writer *w, const tn_mkmodel_params *p, int64_t n_vocab) {
    const char *a = p->arch;
    char key[128];
    int rc = TN_OK;
    bool g4 = !strcmp(a, "gemma4");
    const bool moe = !strcmp(a, "qwen3moe"), oss = !strcmp(a, "gpt-oss");
    bool gemma = g4 || !strcmp(a, "gemma3"), qwen = !strcmp(a, "qwen3") || moe;
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, a), key)
    if (!rc) rc = tn_gguf_writer_set_str(w, "general.architecture", a);
    if (!rc) rc = tn_gguf_writer_set_str(w, "general.type", "model");
    if (!rc) rc = tn_gguf_writer_set_str(w, "general.name", p->name ? p->name : "Tern demo model (random weights)");
    /* What tells Tern a demo model, whatever its name (docs/MODEL.md, "Demo models"). */
    if (!rc) rc = tn_gguf_writer_set_bool(w, "tern.random_weights", true);
    if (!rc) rc = tn_gguf_writer_set_str(w, "general.description",
                                         "Random weights written by tern-cli mkmodel: real shapes and "
                                         "vocabulary, meaningless output.");
    if (!rc) rc = tn_gguf_writer_set_u32(w, "general.alignment", TN_GGUF_DEFAULT_ALIGNMENT);
    if (!rc) rc = tn_gguf_writer_set_u32(w, "general.quantization_version", 2);
    /* So that llama.cpp and Tern name the file as llama-quantize's would be
     * named ("Q4_K_M", not its largest tensor's type or "guessed"). */
    const int file_type = tn_file_type_for(p->type);
    if (!rc && file_type >= 0) rc = tn_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type);
    if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)p->n_ctx);
    if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)p->n_embd);
    if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)p->n_layer);
    if (!rc && !g4) rc = tn_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)p->n_ff);
    if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)p->n_head);
    if (!rc && !g4) rc = tn_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)p->n_head_kv);
    if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)p->head_dim);
    if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)p->head_dim);
    if (!rc) rc = tn_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), gemma || qwen ? 1e-6f : 1e-5f);
    if (!rc) rc = tn_gguf_writer_set_f32(w, KEY("rope.freq_base"), oss ? 150000.0f : gemma || qwen ? 1000000.0f : 500000.0f);
    if (!rc && !strcmp(a, "llama")) {
        rc = tn_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)p->head_dim);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)n_vocab);
    }
    if (!rc && gemma)
        rc = tn_gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)p->sliding_window);
    if (!rc && oss) {
        /* the converter's YaRN keys (rope_scaling of config.json) */
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)p->sliding_window);
        if (!rc) rc = tn_gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
        if (!rc) rc = tn_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 32.0f);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 4096);
    }
    if (!rc && (moe || oss || (g4 && p->n_expert > 0))) {
        rc = tn_gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)p->n_expert);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)p->n_expert_used);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)p->n_ff_exp);
    }
    if (!rc && g4) {
        /* the keys llama.cpp's converter writes (conversion/gemma.py,
         * Gemma4Model): per-layer arrays for the pattern, KV heads and FFN */
        const int64_t NL = p->n_layer, n_kv = NL - p->n_shared_kv;
        const int64_t hd_swa = p->head_dim_swa > 0 ? p->head_dim_swa : p->head_dim;
        uint8_t *pat = malloc((size_t)NL);
        uint32_t *kv = malloc((size_t)NL * sizeof *kv), *ff = malloc((size_t)NL * sizeof *ff);
        if (!pat || !kv || !ff)
            rc = TN_ERR_NOMEM;
        for (int64_t il = 0; !rc && il < NL; il++) {
            pat[il] = g4_swa(p, il);
            kv[il] = (uint32_t)(!pat[il] && p->n_head_kv_full > 0 ? p->n_head_kv_full : p->n_head_kv);
            ff[il] = (uint32_t)(p->n_ff * (p->double_wide_ffn && il >= n_kv ? 2 : 1));
        }
        if (!rc) rc = tn_gguf_writer_set_arr(w, KEY("attention.sliding_window_pattern"), TN_GGUF_BOOL, pat, (uint64_t)NL);
        if (!rc) rc = tn_gguf_writer_set_arr(w, KEY("attention.head_count_kv"), TN_GGUF_U32, kv, (uint64_t)NL);
        if (!rc) rc = tn_gguf_writer_set_arr(w, KEY("feed_forward_length"), TN_GGUF_U32, ff, (uint64_t)NL);
        free(pat);
        free(kv);
        free(ff);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("attention.key_length_swa"), (uint32_t)hd_swa);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("attention.value_length_swa"), (uint32_t)hd_swa);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)p->head_dim);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("rope.dimension_count_swa"), (uint32_t)hd_swa);
        if (!rc) rc = tn_gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), 10000.0f);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("attention.shared_kv_layers"), (uint32_t)p->n_shared_kv);
        if (!rc) rc = tn_gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"), (uint32_t)p->n_embd_per_layer);
        if (!rc) rc = tn_gguf_writer_set_f32(w, KEY("final_logit_softcapping"), 30.0f);
    }
#undef KEY
    return rc;
}

static int check_params(const tn_mkmodel_params *p, tn_error *err) {
    if (!p->arch || (strcmp(p->arch, "llama") && strcmp(p->arch, "qwen3") &&
                     strcmp(p->arch, "qwen3moe") && strcmp(p->arch, "gemma3") &&
                     strcmp(p->arch, "gemma4") && strcmp(p->arch, "gpt-oss")))
        return tn_fail(err, TN_ERR_INVALID,
                       "mkmodel: unknown architecture '%s' (use llama, qwen3, qwen3moe, gemma3, "
                       "gemma4 or gpt-oss)",
                       p->arch ? p->arch : "");
    if (p->vocab_size < 0 || p->vocab_size >= (1 << 24) || (p->vocab_size && !p->tokenizer))
        return tn_fail(err, TN_ERR_INVALID,
                       "mkmodel: --vocab-size pads a --tokenizer vocabulary (at most 16,777,215 "
                       "rows); the synthetic vocabulary and --vocab-gguf keep their own size");
    /* gemma4 with experts is the 26B-A4B layout; without, the dense one */
    if ((!strcmp(p->arch, "qwen3moe") || !strcmp(p->arch, "gpt-oss") ||
         (!strcmp(p->arch, "gemma4") && p->n_expert != 0)) &&
        (p->n_expert < 1 || p->n_expert > 512 || p->n_expert_used < 1 ||
         p->n_expert_used > p->n_expert || p->n_ff_exp < 32 || p->n_ff_exp > (1 << 18) ||
         p->n_ff_exp % 32))
        return tn_fail(err, TN_ERR_INVALID,
                       "mkmodel: %s needs 1 to 512 experts, 1 to that many used per token, "
                       "and an expert width that is a positive multiple of 32",
                       p->arch);
    if (!strcmp(p->arch, "gemma4")) {
        const int64_t period = p->swa_period > 0 ? p->swa_period : 5;
        if (p->head_dim_swa < 0 || p->head_dim_swa % 2 || p->head_dim_swa > 1024 ||
            p->n_head_kv_full < 0 || (p->n_head_kv_full && p->n_head % p->n_head_kv_full) ||
            p->n_embd_per_layer < 0 || p->n_embd_per_layer > 4096 ||
            p->n_embd_per_layer % 32 || p->swa_period < 0)
            return tn_fail(err, TN_ERR_INVALID, "mkmodel: a gemma4 dimension is out of range");
        /* shared-KV layers need an earlier KV-owning layer of each kind */
        const int64_t n_kv = p->n_layer - p->n_shared_kv;
        if (p->n_shared_kv < 0 || (p->n_shared_kv > 0 && n_kv < period))
            return tn_fail(err, TN_ERR_INVALID,
                           "mkmodel: %lld shared-KV layers of %lld leave fewer than one period "
                           "(%lld) of KV-owning layers",
                           (long long)p->n_shared_kv, (long long)p->n_layer, (long long)period);
    }
    if (p->n_embd <= 0 || p->n_layer <= 0 || p->n_head <= 0 || p->n_head_kv <= 0 ||
        p->head_dim <= 0 || p->n_ff <= 0 || p->n_ctx <= 0)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel: every dimension must be positive");
    if (!strcmp(p->arch, "gpt-oss") && p->sliding_window < 1)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel: gpt-oss needs a sliding window of 1 or more");
    if (p->n_embd > (1 << 16) || p->n_layer > 256 || p->n_head > 256 || p->head_dim > 1024 ||
        p->n_ff > (1 << 18) || p->n_ctx > (1 << 24))
        return tn_fail(err, TN_ERR_INVALID, "mkmodel: a dimension is unreasonably large");
    if (p->n_head % p->n_head_kv)
        return tn_fail(err, TN_ERR_INVALID,
                       "mkmodel: heads (%lld) must be a multiple of kv heads (%lld)",
                       (long long)p->n_head, (long long)p->n_head_kv);
    if (p->head_dim % 2)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel: head dim must be even (rotary pairs)");
    if (p->n_embd % 32 || p->n_ff % 32 || (p->n_head * p->head_dim) % 32)
        return tn_fail(err, TN_ERR_INVALID,
                       "mkmodel: embedding, feed-forward and heads x head dim must be multiples "
                       "of 32 (the quantization block)");
    if (!(p->logit_scale > 0.0f && p->logit_scale < 1000.0f))
        return tn_fail(err, TN_ERR_INVALID, "mkmodel: logit scale must be in (0, 1000)");
    return TN_OK;
}

int tn_mkmodel(const tn_mkmodel_params *p, const char *out_path, tn_error *err) {
    tn_error_clear(err);
    if (!p || !out_path)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel: no parameters or output path");
    int rc = check_params(p, err);
    if (rc)
        return rc;
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!w)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    model_plan m = {.p = p};
    fill_ctx *fcs = NULL;
    int64_t n_vocab = 0;
    if (p->vocab_gguf) {
        rc = copy_vocab(p->vocab_gguf, w, &n_vocab, err);
    } else if (p->tokenizer) {
        rc = tn_vocab_convert_hf_sized(p->tokenizer, p->vocab_size, w, &n_vocab, err);
    } else {
        rc = synthetic_vocab(w, &n_vocab);
        if (rc)
            tn_fail(err, rc, "mkmodel: cannot build the synthetic vocabulary");
    }
    if (!rc && (rc = write_hparams(w, p, n_vocab)))
        tn_fail(err, rc, "mkmodel: cannot write metadata");
    if (!rc)
        rc = build_plan(&m, n_vocab, err);
    if (!rc) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        m.n_threads = p->n_threads > 0 ? p->n_threads : (ncpu > 0 ? (int)ncpu : 1);
        if (m.n_threads > 64)
            m.n_threads = 64;
        fcs = calloc(m.n, sizeof *fcs);
        if (!fcs)
            rc = tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; !rc && i < m.n; i++) {
        fcs[i] = (fill_ctx){&m, i};
        rc = tn_gguf_writer_add_tensor(w, m.t[i].name, m.t[i].type, m.t[i].n_dims, m.t[i].ne,
                                       fill_tensor, &fcs[i]);
        if (rc)
            tn_fail(err, rc, "mkmodel: cannot add tensor %s", m.t[i].name);
    }
    if (!rc)
        rc = tn_gguf_writer_write(w, out_path, err);
    tn_gguf_writer_free(w);
    free(fcs);
    free(m.t);
    return rc;
}
