/* Random-weight DFlash drafts for a target model, in the GGUF layout of the
 * published drafts (docs/DFLASH.md). The weights are meaningless (acceptance
 * near zero); the file exercises every part of loading, drafting and
 * verification, and its cost is that of a real draft of the same shape. */
#include "tn-mk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tn_mkmodel_dflash_params tn_mkmodel_dflash_default_params(void) {
    tn_mkmodel_dflash_params p;
    memset(&p, 0, sizeof p);
    p.type = "q8_0";
    p.n_layer = 1;
    p.block_size = 16;
    p.mask_token = -1;
    p.seed = 1;
    return p;
}

typedef struct dtensor {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[2];
    float std; /* 0: a norm weight (ones) */
    uint64_t seed;
    const void *raw; /* when set: the tensor's bytes as they are (d2t, rope_freqs) */
} dtensor;

/* Uniform rows of the given std (ones for norms), quantized row by row; a
 * row depends only on (seed, name, row). */
static int fill(void *user, const char *name, void *dst, uint64_t nbytes, tn_error *err) {
    const dtensor *t = user;
    const size_t row_bytes = tn_type_row_bytes(t->type, t->ne[0]);
    if (row_bytes * t->ne[1] != nbytes)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel dflash: size mismatch for %s", name);
    if (t->raw) {
        memcpy(dst, t->raw, nbytes);
        return TN_OK;
    }
    float *row = malloc(t->ne[0] * sizeof *row);
    if (!row)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    const float a = t->std * sqrtf(3.0f);
    int rc = TN_OK;
    for (uint64_t r = 0; r < t->ne[1] && rc == TN_OK; r++) {
        uint64_t s = tn_mk_row_state(t->seed, t->name, r);
        for (uint64_t i = 0; i < t->ne[0]; i++)
            row[i] = t->std > 0 ? (float)(tn_mk_uniform(&s) * a) : 1.0f;
        if (tn_quantize_row(t->type, row, (uint8_t *)dst + r * row_bytes, (int64_t)t->ne[0]) !=
            TN_OK)
            rc = tn_fail(err, TN_ERR_UNSUPPORTED, "mkmodel dflash: cannot write %s as %s", name,
                         tn_type_name(t->type));
    }
    free(row);
    return rc;
}

/* A matrix [ne1][ne0] of `type`, or (ne1 == 1) an f32 vector. */
static void add(dtensor *ts, size_t *nt, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                float std, uint64_t seed) {
    dtensor *t = &ts[(*nt)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = ne1 > 1 ? type : TN_TYPE_F32;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = (uint64_t)ne0;
    t->ne[1] = (uint64_t)ne1;
    t->std = std;
    t->seed = seed;
}

/* One integer, or the first of a per-layer array (Gemma 4's head_count_kv
 * and feed_forward_length): the draft's own sizes only need a typical value. */
static int get_u(const tn_gguf *g, const char *arch, const char *suffix, int64_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const tn_gguf_value *v = tn_gguf_find(g, key);
    if (v && v->type == TN_GGUF_ARRAY && v->v.arr.n > 0 && v->v.arr.type != TN_GGUF_STRING &&
        v->v.arr.type != TN_GGUF_ARRAY) {
        *out = tn_gguf_arr_int(v, 0);
        return TN_OK;
    }
    return tn_gguf_get_int(g, key, out);
}

/* Copies the target's tokenizer.* keys (its mask token aside), as llama.cpp's
 * converter gives a draft the target's vocabulary: llama.cpp loads the draft
 * as a model of its own, and Tern compares the token lists. */
static int copy_tokenizer(const tn_gguf *g, tn_gguf_writer *w) {
    int rc = TN_OK;
    for (int64_t i = 0; rc == TN_OK && i < tn_gguf_n_kv(g); i++) {
        const tn_str k = tn_gguf_kv_key(g, i);
        if (k.len < 10 || memcmp(k.ptr, "tokenizer.", 10) || k.len >= 128 ||
            tn_str_eq(k, "tokenizer.ggml.mask_token_id"))
            continue;
        char key[128];
        memcpy(key, k.ptr, k.len);
        key[k.len] = '\0';
        rc = tn_gguf_writer_set_value(w, key, tn_gguf_kv_value(g, i));
    }
    return rc;
}

int tn_mkmodel_dflash(const tn_mkmodel_dflash_params *pp, const char *out_path, tn_error *err) {
    if (!pp || !pp->target || !out_path)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel dflash: needs a target model and an output");
    tn_mkmodel_dflash_params p = *pp;
    tn_gguf *g = NULL;
    int rc = tn_gguf_open(p.target, &g, err);
    if (rc != TN_OK)
        return rc;
    char arch[64] = "";
    tn_str a;
    if (tn_gguf_get_str(g, "general.architecture", &a) == TN_OK && a.len < sizeof arch) {
        memcpy(arch, a.ptr, a.len);
        arch[a.len] = '\0';
    }
    int64_t E = 0, L = 0, H = 0, KV = 0, D = 0, F = 0;
    if (!arch[0] || get_u(g, arch, "embedding_length", &E) || get_u(g, arch, "block_count", &L) ||
        get_u(g, arch, "attention.head_count", &H) || get_u(g, arch, "feed_forward_length", &F)) {
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_FORMAT, "%s: not a model Tern can make a DFlash draft for",
                       p.target);
    }
    if (get_u(g, arch, "attention.head_count_kv", &KV))
        KV = H;
    if (get_u(g, arch, "attention.key_length", &D))
        D = E / H;
    const tn_gguf_tensor *te = tn_gguf_find_tensor(g, "token_embd.weight");
    const int64_t V = te ? (int64_t)te->ne[1] : 0;
    if (V <= 0) {
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_FORMAT, "%s: no token_embd.weight", p.target);
    }
    if (p.n_layer <= 0)
        p.n_layer = 1;
    if (p.n_head <= 0)
        p.n_head = H;
    if (p.n_head_kv <= 0)
        p.n_head_kv = p.n_head == H ? KV : 1;
    if (p.head_dim <= 0)
        p.head_dim = D;
    if (p.n_ff <= 0)
        p.n_ff = F;
    if (p.block_size <= 0)
        p.block_size = 16;
    if (!p.type)
        p.type = "q8_0";
    if (p.n_target_layers <= 0) {
        /* Five ids spread over checkpoint layers 1 .. L - 3, stored + 1. */
        const int64_t lo = L > 1 ? 1 : 0, hi = L - 3 > lo ? L - 3 : lo;
        const int64_t n = hi - lo + 1 < 5 ? hi - lo + 1 : 5;
        for (int64_t i = 0; i < n; i++)
            p.target_layers[p.n_target_layers++] =
                (int32_t)(lo + (n > 1 ? i * (hi - lo) / (n - 1) : 0) + 1);
    }
    if (p.mask_token < 0) {
        int64_t id = -1;
        if (tn_gguf_get_int(g, "tokenizer.ggml.padding_token_id", &id) != TN_OK &&
            tn_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", &id) != TN_OK)
            id = V - 1;
        p.mask_token = id >= 0 && id < V ? id : V - 1;
    }
    const int type = tn_type_from_name(p.type);
    const char *why = NULL;
    if (type < 0 || !tn_type_supported((uint32_t)type) || type == TN_TYPE_Q8_1 ||
        type == TN_TYPE_Q8_K)
        why = "unknown weight type (use f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, "
              "q5_K or q6_K)";
    else if (p.n_layer > 64 || p.n_head > 256 || p.head_dim > 1024 || p.n_ff > (1 << 18) ||
             p.block_size > 64 || p.block_size < 2)
        why = "a dimension is out of range (layers <= 64, block size 2..64)";
    else if (p.n_head % p.n_head_kv || p.head_dim % 2)
        why = "heads must be a multiple of kv heads, and the head dimension even";
    else if (p.mask_token >= V)
        why = "the mask token is outside the target's vocabulary";
    else if (p.draft_vocab < 0 || p.draft_vocab > V)
        why = "the draft vocabulary must have 1 to as many rows as the target's";
    for (int32_t i = 0; !why && i < p.n_target_layers; i++)
        if (p.target_layers[i] < 0 || p.target_layers[i] > L) {
            tn_gguf_close(g);
            return tn_fail(err, TN_ERR_INVALID,
                           "mkmodel dflash: target layer %d does not exist in %s, which has "
                           "hidden states 0 (embeddings) .. %lld",
                           p.target_layers[i], p.target, (long long)L);
        }
    const uint32_t base = (uint32_t)(type < 0 ? TN_TYPE_F32 : type);
    const uint64_t NT = (uint64_t)p.n_target_layers;
    const uint64_t rows_in[] = {(uint64_t)E, (uint64_t)(p.n_head * p.head_dim), (uint64_t)p.n_ff,
                                NT * (uint64_t)E};
    for (size_t i = 0; !why && i < sizeof rows_in / sizeof rows_in[0]; i++)
        if (tn_type_row_bytes(base, rows_in[i]) == 0)
            why = "rows are not whole blocks of that weight type (try q8_0 or f16)";
    if (why) {
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_INVALID, "mkmodel dflash: %s", why);
    }

    /* What follows the target: Gemma's scaled embedding (the checkpoint
     * embeds the block with the target's embed_tokens, which scales by
     * sqrt(width)), its final softcapping, and its sliding window with the
     * target's per-layer pattern repeated over the draft's layers. */
    char key[128];
    const bool gemma = !strncmp(arch, "gemma", 5);
    double softcap = 0;
    snprintf(key, sizeof key, "%s.final_logit_softcapping", arch);
    tn_gguf_get_float(g, key, &softcap);
    int64_t window = p.sliding_window > 0 ? p.sliding_window : 0;
    snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
    if (p.sliding_window == 0 && tn_gguf_get_int(g, key, &window) != TN_OK)
        window = 0;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    const tn_gguf_value *tpat = p.sliding_window == 0 ? tn_gguf_find(g, key) : NULL;
    if (tpat && (tpat->type != TN_GGUF_ARRAY || tpat->v.arr.n == 0 ||
                 tpat->v.arr.type == TN_GGUF_STRING || tpat->v.arr.type == TN_GGUF_ARRAY))
        tpat = NULL;

    tn_gguf_writer *w = tn_gguf_writer_new();
    const uint64_t n_tensors = 6 + 14 * (uint64_t)p.n_layer;
    dtensor *ts = calloc(n_tensors, sizeof *ts);
    uint8_t *pattern = malloc((size_t)p.n_layer);
    int64_t *d2t = p.draft_vocab > 0 ? malloc((size_t)p.draft_vocab * sizeof *d2t) : NULL;
    float *freqs = malloc((size_t)(p.head_dim / 2 + 1) * sizeof *freqs);
    if (!w || !ts || !pattern || !freqs || (p.draft_vocab > 0 && !d2t)) {
        tn_gguf_writer_free(w);
        free(ts);
        free(pattern);
        free(d2t);
        free(freqs);
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    for (int64_t il = 0; il < p.n_layer; il++)
        pattern[il] = tpat ? tn_gguf_arr_int(tpat, (uint64_t)il % tpat->v.arr.n) != 0 : 1;
    /* A reduced vocabulary spread evenly over the target's ids (unique,
     * ascending), the absolute ids llama.cpp's converter stores. */
    for (int64_t r = 0; r < p.draft_vocab; r++)
        d2t[r] = r * V / p.draft_vocab;
    /* Gemma 4's proportional rope on full-attention heads: a quarter of the
     * dimensions rotate, the rest sit behind a huge divisor (as the
     * converter writes rope_freqs). */
    const int64_t n_rot_half = p.head_dim / 8 > 0 ? p.head_dim / 8 : 1;
    for (int64_t i = 0; i < p.head_dim / 2; i++)
        freqs[i] = i < n_rot_half ? 1.0f : 1e30f;
    size_t nt = 0;
    const int64_t QD = p.n_head * p.head_dim, KD = p.n_head_kv * p.head_dim;
    const float resid = 1.0f / sqrtf(2.0f * (float)p.n_layer);
    add(ts, &nt, "fc.weight", base, (int64_t)NT * E, E, 1.0f / sqrtf((float)(NT * (uint64_t)E)),
        p.seed);
    add(ts, &nt, "enc.output_norm.weight", base, E, 1, 0.0f, p.seed);
    for (int64_t il = 0; il < p.n_layer; il++) {
        char name[64];
#define BLK(suffix, ne0, ne1, sd)                                                   \
    do {                                                                            \
        snprintf(name, sizeof name, "blk.%d." suffix ".weight", (int)il);           \
        add(ts, &nt, name, base, (ne0), (ne1), (sd), p.seed);                       \
    } while (0)
        BLK("attn_norm", E, 1, 0.0f);
        BLK("attn_q", E, QD, 1.0f / sqrtf((float)E));
        BLK("attn_k", E, KD, 1.0f / sqrtf((float)E));
        if (!p.gemma_layers)
            BLK("attn_v", E, KD, 1.0f / sqrtf((float)E));
        BLK("attn_q_norm", p.head_dim, 1, 0.0f);
        BLK("attn_k_norm", p.head_dim, 1, 0.0f);
        BLK("attn_output", QD, E, resid / sqrtf((float)QD));
        if (p.gemma_layers)
            BLK("post_attention_norm", E, 1, 0.0f);
        BLK("ffn_norm", E, 1, 0.0f);
        BLK("ffn_gate", E, p.n_ff, 1.0f / sqrtf((float)E));
        BLK("ffn_up", E, p.n_ff, 1.0f / sqrtf((float)E));
        BLK("ffn_down", p.n_ff, E, resid / sqrtf((float)p.n_ff));
        if (p.gemma_layers) {
            BLK("post_ffw_norm", E, 1, 0.0f);
            BLK("layer_output_scale", 1, 1, 0.0f);
        }
#undef BLK
    }
    add(ts, &nt, "output_norm.weight", base, E, 1, 0.0f, p.seed);
    if (p.gemma_layers) {
        add(ts, &nt, "rope_freqs.weight", base, p.head_dim / 2, 1, 0.0f, p.seed);
        ts[nt - 1].raw = freqs;
    }
    if (p.draft_vocab > 0) {
        add(ts, &nt, "output.weight", base, E, p.draft_vocab, 1.0f / sqrtf((float)E), p.seed);
        add(ts, &nt, "d2t", base, p.draft_vocab, 1, 0.0f, p.seed);
        ts[nt - 1].type = 27; /* i64 */
        ts[nt - 1].raw = d2t;
    }

    double eps = 1e-6, rope = 1000000.0;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    tn_gguf_get_float(g, key, &eps);
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    tn_gguf_get_float(g, key, &rope);
    int32_t layers[16];
    memcpy(layers, p.target_layers, sizeof layers);
#define SET(call)                \
    do {                         \
        if (rc == TN_OK)         \
            rc = (call);         \
    } while (0)
    SET(tn_gguf_writer_set_str(w, "general.architecture", "dflash"));
    SET(tn_gguf_writer_set_str(w, "general.name", "Tern DFlash draft (random weights)"));
    SET(tn_gguf_writer_set_bool(w, "tern.random_weights", true));
    SET(tn_gguf_writer_set_u32(w, "general.alignment", TN_GGUF_DEFAULT_ALIGNMENT));
    SET(tn_gguf_writer_set_u32(w, "dflash.block_count", (uint32_t)p.n_layer));
    SET(tn_gguf_writer_set_u32(w, "dflash.embedding_length", (uint32_t)E));
    SET(tn_gguf_writer_set_u32(w, "dflash.feed_forward_length", (uint32_t)p.n_ff));
    SET(tn_gguf_writer_set_u32(w, "dflash.attention.head_count", (uint32_t)p.n_head));
    SET(tn_gguf_writer_set_u32(w, "dflash.attention.head_count_kv", (uint32_t)p.n_head_kv));
    SET(tn_gguf_writer_set_u32(w, "dflash.attention.key_length", (uint32_t)p.head_dim));
    SET(tn_gguf_writer_set_u32(w, "dflash.attention.value_length", (uint32_t)p.head_dim));
    SET(tn_gguf_writer_set_f32(w, "dflash.attention.layer_norm_rms_epsilon", (float)eps));
    SET(tn_gguf_writer_set_f32(w, "dflash.rope.freq_base", (float)rope));
    SET(tn_gguf_writer_set_u32(w, "dflash.context_length", 32768));
    SET(tn_gguf_writer_set_u32(w, "dflash.block_size", (uint32_t)p.block_size));
    SET(tn_gguf_writer_set_arr(w, "dflash.target_layers", TN_GGUF_I32, layers,
                               (uint64_t)p.n_target_layers));
    SET(tn_gguf_writer_set_bool(w, "dflash.attention.causal", false));
    SET(tn_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)p.mask_token));
    if (softcap > 0)
        SET(tn_gguf_writer_set_f32(w, "dflash.final_logit_softcapping", (float)softcap));
    if (gemma)
        SET(tn_gguf_writer_set_f32(w, "dflash.embedding_scale", sqrtf((float)E)));
    if (window > 0) {
        SET(tn_gguf_writer_set_u32(w, "dflash.attention.sliding_window", (uint32_t)window));
        SET(tn_gguf_writer_set_arr(w, "dflash.attention.sliding_window_pattern", TN_GGUF_BOOL,
                                   pattern, (uint64_t)p.n_layer));
    }
    if (p.gemma_layers) {
        SET(tn_gguf_writer_set_str(w, "dflash.hidden_activation", "gelu_pytorch_tanh"));
        SET(tn_gguf_writer_set_f32(w, "dflash.attention.scale", 1.0f));
        SET(tn_gguf_writer_set_u32(w, "dflash.rope.dimension_count", (uint32_t)p.head_dim));
    }
    SET(copy_tokenizer(g, w));
#undef SET
    if (rc != TN_OK)
        tn_fail(err, rc, "mkmodel dflash: cannot write metadata");
    for (size_t i = 0; rc == TN_OK && i < nt; i++) {
        rc = tn_gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, fill,
                                       &ts[i]);
        if (rc != TN_OK)
            tn_fail(err, rc, "mkmodel dflash: cannot add %s", ts[i].name);
    }
    if (rc == TN_OK)
        rc = tn_gguf_writer_write(w, out_path, err);
    tn_gguf_writer_free(w);
    free(ts);
    free(pattern);
    free(d2t);
    free(freqs);
    tn_gguf_close(g);
    return rc;
}

/* ------------------------------------------------ Gemma 4 MTP assistants */

tn_mkmodel_mtp_params tn_mkmodel_mtp_default_params(void) {
    tn_mkmodel_mtp_params p;
    memset(&p, 0, sizeof p);
    p.type = "q8_0";
    p.seed = 1;
    return p;
}

/* Key `suffix` of the target's architecture at layer il: one integer, or
 * element il of a per-layer array. */
static int get_layer(const tn_gguf *g, const char *arch, const char *suffix, int64_t il,
                     int64_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const tn_gguf_value *v = tn_gguf_find(g, key);
    if (v && v->type == TN_GGUF_ARRAY && (uint64_t)il < v->v.arr.n &&
        v->v.arr.type != TN_GGUF_STRING && v->v.arr.type != TN_GGUF_ARRAY) {
        *out = tn_gguf_arr_int(v, (uint64_t)il);
        return TN_OK;
    }
    return tn_gguf_get_int(g, key, out);
}

int tn_mkmodel_mtp(const tn_mkmodel_mtp_params *pp, const char *out_path, tn_error *err) {
    if (!pp || !pp->target || !out_path)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel gemma4-assistant: needs a target model and "
                                            "an output");
    tn_mkmodel_mtp_params p = *pp;
    tn_gguf *g = NULL;
    int rc = tn_gguf_open(p.target, &g, err);
    if (rc != TN_OK)
        return rc;
    tn_str a;
    if (tn_gguf_get_str(g, "general.architecture", &a) != TN_OK || !tn_str_eq(a, "gemma4")) {
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_INVALID,
                       "%s: a Gemma 4 assistant is made for a gemma4 model, and this is not one",
                       p.target);
    }
    const char *arch = "gemma4";
    if (p.n_embd <= 0)
        p.n_embd = 256;
    if (p.n_layer <= 0)
        p.n_layer = 4;
    if (p.n_head <= 0)
        p.n_head = 4;
    if (p.n_ff <= 0)
        p.n_ff = 4 * p.n_embd;
    if (!p.type)
        p.type = "q8_0";
    int64_t Eb = 0, L = 0, D = 0, Dswa = 0, rot = 0, rot_swa = 0, kv_full = 0, kv_swa = 0,
            window = 0, n_ctx = 0;
    if (get_u(g, arch, "embedding_length", &Eb) || get_u(g, arch, "block_count", &L) || L < 2 ||
        get_u(g, arch, "attention.key_length", &D) ||
        get_u(g, arch, "attention.sliding_window", &window) ||
        get_layer(g, arch, "attention.head_count_kv", L - 1, &kv_full) ||
        get_layer(g, arch, "attention.head_count_kv", L - 2, &kv_swa)) {
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: not a Gemma 4 model Tern can make an assistant for", p.target);
    }
    if (get_u(g, arch, "attention.key_length_swa", &Dswa))
        Dswa = D;
    if (get_u(g, arch, "rope.dimension_count", &rot))
        rot = D;
    if (get_u(g, arch, "rope.dimension_count_swa", &rot_swa))
        rot_swa = Dswa;
    if (get_u(g, arch, "context_length", &n_ctx))
        n_ctx = 32768;
    const tn_gguf_tensor *te = tn_gguf_find_tensor(g, "token_embd.weight");
    const int64_t V = te ? (int64_t)te->ne[1] : 0;
    const int type = tn_type_from_name(p.type);
    const char *why = NULL;
    if (V <= 0)
        why = "the target has no token_embd.weight";
    else if (type < 0 || !tn_type_supported((uint32_t)type) || type == TN_TYPE_Q8_1 ||
             type == TN_TYPE_Q8_K)
        why = "unknown weight type (use f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, "
              "q5_K or q6_K)";
    else if (p.n_layer > 64 || p.n_head > 256 || p.n_embd > (1 << 14) || p.n_ff > (1 << 18))
        why = "a dimension is out of range (layers <= 64, heads <= 256)";
    else if (p.n_embd == Eb)
        why = "the assistant's width must differ from the target's (llama.cpp requires it)";
    else if (kv_full < 1 || kv_swa < 1 || p.n_head % kv_full || p.n_head % kv_swa)
        why = "the heads must be a multiple of the target's key/value heads";
    const uint32_t base = (uint32_t)(type < 0 ? TN_TYPE_F32 : type);
    const int64_t rows_in[] = {p.n_embd, 2 * Eb, p.n_head * D, p.n_head * Dswa, p.n_ff};
    for (size_t i = 0; !why && i < sizeof rows_in / sizeof rows_in[0]; i++)
        if (tn_type_row_bytes(base, (uint64_t)rows_in[i]) == 0)
            why = "rows are not whole blocks of that weight type (try q8_0 or f16)";
    if (why) {
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_INVALID, "mkmodel gemma4-assistant: %s", why);
    }
    /* The target's proportional rope of full layers, carried over. */
    float *freqs = malloc((size_t)(D / 2 + 1) * sizeof *freqs);
    const tn_gguf_tensor *tf = tn_gguf_find_tensor(g, "rope_freqs.weight");
    for (int64_t i = 0; freqs && i < D / 2; i++) {
        freqs[i] = i < rot / 8 ? 1.0f : 1e30f;
        if (tf && tf->type == TN_TYPE_F32 && tf->ne[0] == (uint64_t)(D / 2))
            memcpy(&freqs[i], (const uint8_t *)tf->data + 4 * i, 4);
    }
    const uint64_t n_tensors = 6 + 11 * (uint64_t)p.n_layer;
    dtensor *ts = calloc(n_tensors, sizeof *ts);
    uint8_t *pattern = malloc((size_t)p.n_layer);
    uint32_t *kv = malloc((size_t)p.n_layer * sizeof *kv);
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!w || !ts || !pattern || !kv || !freqs) {
        tn_gguf_writer_free(w);
        free(ts);
        free(pattern);
        free(kv);
        free(freqs);
        tn_gguf_close(g);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    /* Sliding layers, then one full layer last (the published layer_types). */
    for (int64_t il = 0; il < p.n_layer; il++) {
        pattern[il] = il < p.n_layer - 1;
        kv[il] = (uint32_t)(pattern[il] ? kv_swa : kv_full);
    }
    const int64_t E = p.n_embd;
    const float resid = 1.0f / sqrtf(2.0f * (float)p.n_layer);
    size_t nt = 0;
    add(ts, &nt, "token_embd.weight", base, E, V, 1.0f, p.seed);
    add(ts, &nt, "output_norm.weight", base, E, 1, 0.0f, p.seed);
    add(ts, &nt, "nextn.pre_projection.weight", base, 2 * Eb, E,
        1.0f / sqrtf((float)(2 * Eb)), p.seed);
    add(ts, &nt, "nextn.post_projection.weight", base, E, Eb, 1.0f / sqrtf((float)E), p.seed);
    add(ts, &nt, "rope_freqs.weight", base, D / 2, 1, 0.0f, p.seed);
    ts[nt - 1].raw = freqs;
    for (int64_t il = 0; il < p.n_layer; il++) {
        char name[64];
        const int64_t HD = p.n_head * (pattern[il] ? Dswa : D), Dl = pattern[il] ? Dswa : D;
#define BLK(suffix, ne0, ne1, sd)                                                   \
    do {                                                                            \
        snprintf(name, sizeof name, "blk.%d." suffix ".weight", (int)il);           \
        add(ts, &nt, name, base, (ne0), (ne1), (sd), p.seed);                       \
    } while (0)
        BLK("attn_norm", E, 1, 0.0f);
        BLK("attn_q", E, HD, 1.0f / sqrtf((float)E));
        BLK("attn_q_norm", Dl, 1, 0.0f);
        BLK("attn_output", HD, E, resid / sqrtf((float)HD));
        BLK("post_attention_norm", E, 1, 0.0f);
        BLK("ffn_norm", E, 1, 0.0f);
        BLK("ffn_gate", E, p.n_ff, 1.0f / sqrtf((float)E));
        BLK("ffn_up", E, p.n_ff, 1.0f / sqrtf((float)E));
        BLK("ffn_down", p.n_ff, E, resid / sqrtf((float)p.n_ff));
        BLK("post_ffw_norm", E, 1, 0.0f);
        BLK("layer_output_scale", 1, 1, 0.0f);
#undef BLK
    }
    double eps = 1e-6, rope = 1000000.0, rope_swa = 10000.0, softcap = 0;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    tn_gguf_get_float(g, key, &eps);
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    tn_gguf_get_float(g, key, &rope);
    snprintf(key, sizeof key, "%s.rope.freq_base_swa", arch);
    tn_gguf_get_float(g, key, &rope_swa);
    snprintf(key, sizeof key, "%s.final_logit_softcapping", arch);
    tn_gguf_get_float(g, key, &softcap);
#define SET(call)                \
    do {                         \
        if (rc == TN_OK)         \
            rc = (call);         \
    } while (0)
#define K(suffix) "gemma4-assistant." suffix
    SET(tn_gguf_writer_set_str(w, "general.architecture", "gemma4-assistant"));
    SET(tn_gguf_writer_set_str(w, "general.name", "Tern Gemma 4 assistant (random weights)"));
    SET(tn_gguf_writer_set_bool(w, "tern.random_weights", true));
    SET(tn_gguf_writer_set_u32(w, "general.alignment", TN_GGUF_DEFAULT_ALIGNMENT));
    SET(tn_gguf_writer_set_u32(w, K("context_length"), (uint32_t)n_ctx));
    SET(tn_gguf_writer_set_u32(w, K("embedding_length"), (uint32_t)E));
    SET(tn_gguf_writer_set_u32(w, K("block_count"), (uint32_t)p.n_layer));
    SET(tn_gguf_writer_set_u32(w, K("feed_forward_length"), (uint32_t)p.n_ff));
    SET(tn_gguf_writer_set_u32(w, K("attention.head_count"), (uint32_t)p.n_head));
    SET(tn_gguf_writer_set_arr(w, K("attention.head_count_kv"), TN_GGUF_U32, kv,
                               (uint64_t)p.n_layer));
    SET(tn_gguf_writer_set_u32(w, K("attention.key_length"), (uint32_t)D));
    SET(tn_gguf_writer_set_u32(w, K("attention.value_length"), (uint32_t)D));
    SET(tn_gguf_writer_set_u32(w, K("attention.key_length_swa"), (uint32_t)Dswa));
    SET(tn_gguf_writer_set_u32(w, K("attention.value_length_swa"), (uint32_t)Dswa));
    SET(tn_gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"), (float)eps));
    SET(tn_gguf_writer_set_f32(w, K("rope.freq_base"), (float)rope));
    SET(tn_gguf_writer_set_f32(w, K("rope.freq_base_swa"), (float)rope_swa));
    SET(tn_gguf_writer_set_u32(w, K("rope.dimension_count"), (uint32_t)rot));
    SET(tn_gguf_writer_set_u32(w, K("rope.dimension_count_swa"), (uint32_t)rot_swa));
    SET(tn_gguf_writer_set_u32(w, K("attention.sliding_window"), (uint32_t)window));
    SET(tn_gguf_writer_set_arr(w, K("attention.sliding_window_pattern"), TN_GGUF_BOOL, pattern,
                               (uint64_t)p.n_layer));
    SET(tn_gguf_writer_set_u32(w, K("attention.shared_kv_layers"), (uint32_t)p.n_layer));
    SET(tn_gguf_writer_set_u32(w, K("embedding_length_per_layer_input"), 0));
    SET(tn_gguf_writer_set_u32(w, K("embedding_length_out"), (uint32_t)Eb));
    SET(tn_gguf_writer_set_u32(w, K("nextn_predict_layers"), (uint32_t)p.n_layer));
    if (softcap > 0)
        SET(tn_gguf_writer_set_f32(w, K("final_logit_softcapping"), (float)softcap));
    /* The whole tokenizer, as the converter writes the assistant's own. */
    for (int64_t i = 0; rc == TN_OK && i < tn_gguf_n_kv(g); i++) {
        const tn_str k = tn_gguf_kv_key(g, i);
        if (k.len < 10 || memcmp(k.ptr, "tokenizer.", 10) || k.len >= sizeof key)
            continue;
        memcpy(key, k.ptr, k.len);
        key[k.len] = '\0';
        rc = tn_gguf_writer_set_value(w, key, tn_gguf_kv_value(g, i));
    }
#undef K
#undef SET
    if (rc != TN_OK)
        tn_fail(err, rc, "mkmodel gemma4-assistant: cannot write metadata");
    for (size_t i = 0; rc == TN_OK && i < nt; i++) {
        rc = tn_gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, fill,
                                       &ts[i]);
        if (rc != TN_OK)
            tn_fail(err, rc, "mkmodel gemma4-assistant: cannot add %s", ts[i].name);
    }
    if (rc == TN_OK)
        rc = tn_gguf_writer_write(w, out_path, err);
    tn_gguf_writer_free(w);
    free(ts);
    free(pattern);
    free(kv);
    free(freqs);
    tn_gguf_close(g);
    return rc;
}
