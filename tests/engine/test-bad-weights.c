/* A weight file whose weights hold NaN or Inf is refused at load with a
 * message naming the tensor (issue 21), instead of loading and answering
 * token 0 forever. Models written by mkmodel, then one value poisoned in
 * place: an f16 scale of a block type, an f32/f16 weight, a K-quant's d
 * and dmin, the token embedding. A poisoned quant byte (which is an
 * integer, never non-finite) must still load, and so must the clean file.
 * With the repack cache on, the pass over the matrices it serves waits for
 * the cache: a load that maps a cache file made by an earlier load of the
 * same file (which ran the pass) skips it.
 *
 * Damage the loader once named as something else is named as what it is:
 * a metadata key of the wrong type (not "missing", not "per-layer"), and an
 * embedding cut short (not the intact output head that disagrees with it).
 *
 * Every float hyperparameter (norm epsilon, rope bases, factors, softcap)
 * goes through one range check: denormal, NaN, infinite, negative or huge,
 * it is refused with the key, its value and the range. */
#include "tn-test.h"
#include "tn-model.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Writes `bytes` at byte `at` of tensor `name` in a copy of `clean`. */
static bool poison(const char *clean, const char *out, const char *name, uint64_t at,
                   const void *bytes, size_t n) {
    tn_error err;
    tn_gguf *g = NULL;
    if (tn_gguf_open(clean, &g, &err) != TN_OK)
        return false;
    const tn_gguf_tensor *t = tn_gguf_find_tensor(g, name);
    long pos = t && at + n <= t->nbytes ? (long)(tn_gguf_data_offset(g) + t->offset + at) : -1;
    tn_gguf_close(g);
    if (pos < 0 || !tn_test_copy_file(clean, out))
        return false;
    FILE *f = fopen(out, "r+b");
    bool ok = f && fseek(f, pos, SEEK_SET) == 0 && fwrite(bytes, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = false;
    return ok;
}

/* Loads `path`: expect_ok, or a format error whose message names `name`. */
static void expect_load(const char *path, bool expect_ok, const char *name, const char *what) {
    tn_model *m = NULL;
    tn_error err = {0};
    int rc = tn_model_load(path, tn_model_default_params(), &m, &err);
    if (expect_ok) {
        CHECKF(rc == TN_OK, "%s: load failed: %s", what, err.message);
    } else {
        CHECKF(rc == TN_ERR_FORMAT, "%s: load gave %d, expected a format error", what, rc);
        CHECKF(strstr(err.message, name) && strstr(err.message, "NaN"),
               "%s: the message does not name '%s': %s", what, name, err.message);
    }
    tn_model_free(m);
}

/* A second load of a clean model, through the cache file the first one
 * wrote, does not run the NaN/Inf pass over the matrices the cache serves
 * (the first load ran it): on a hit nothing else would read them from the
 * model file. Only the norms' pass is left (they are copied to f32 anyway). */
static void cache_hit_skips_the_pass(const char *dir) {
    const char *cache = getenv("TERN_REPACK_CACHE");
    if (!cache || !*cache || !strcmp(cache, "0")) {
        fprintf(stderr, "bad-weights: the repack cache is off: the hit check is not run\n");
        return;
    }
    tn_mkmodel_params p = tn_test_tiny_model("llama", 11);
    char path[512];
    snprintf(path, sizeof path, "%s/hit.gguf", dir);
    tn_error err;
    CHECKF(tn_mkmodel(&p, path, &err) == TN_OK, "mkmodel: %s", err.message);
    uint64_t matrices = 0; /* the bytes of the 2-D tensors of more than one row */
    tn_gguf *g = NULL;
    CHECK(tn_gguf_open(path, &g, &err) == TN_OK);
    for (int64_t i = 0; g && i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        if (t->n_dims >= 2 && t->ne[1] > 1)
            matrices += t->nbytes;
    }
    tn_gguf_close(g);
    for (int load = 0; load < 2; load++) {
        tn_model *m = NULL;
        int rc = tn_model_load(path, tn_model_default_params(), &m, &err);
        CHECKF(rc == TN_OK, "load %d: %s", load, err.message);
        if (rc != TN_OK)
            return;
        const char *source = tn_model_repack_source(m);
        if (load == 0) {
            CHECKF(!strcmp(source, "cache-new"), "first load: %s", source);
            CHECKF(m->finite_checked_bytes >= matrices, "first load: %llu bytes checked of %llu",
                   (unsigned long long)m->finite_checked_bytes, (unsigned long long)matrices);
        } else {
            CHECKF(!strcmp(source, "cache"), "second load: %s", source);
            CHECKF(m->finite_checked_bytes < matrices / 20,
                   "second load (a cache hit): %llu bytes checked, the matrices are %llu",
                   (unsigned long long)m->finite_checked_bytes, (unsigned long long)matrices);
        }
        tn_model_free(m);
    }
}

/* A copy of src whose metadata is copied and then changed by edit (a key
 * set again replaces the copied one), token_embd.weight cut to its first
 * half of rows when halve_embd. */
typedef struct rewrite_how {
    void (*edit)(tn_gguf_writer *w);
    bool halve_embd;
} rewrite_how;

static bool rewrite_keys(tn_gguf_writer *w, void *user) {
    const rewrite_how *how = user;
    if (how->edit)
        how->edit(w);
    return true;
}

static bool rewrite_tensor(tn_test_tensor_copy *t, tn_gguf_writer *w, void *user) {
    (void)w;
    const rewrite_how *how = user;
    if (how->halve_embd && !strcmp(t->name, "token_embd.weight")) {
        t->nbytes = t->nbytes / t->ne[1] * (t->ne[1] / 2);
        t->ne[1] /= 2;
    }
    return false;
}

static bool rewrite(const char *src, const char *dst, void (*edit)(tn_gguf_writer *w),
                    bool halve_embd) {
    rewrite_how how = {edit, halve_embd};
    const tn_test_gguf_edits edits = {
        .after_kv = rewrite_keys, .tensor = rewrite_tensor, .user = &how};
    return tn_test_clone_gguf_edited(src, dst, &edits);
}

static void key_length_str(tn_gguf_writer *w) {
    tn_gguf_writer_set_str(w, "llama.attention.key_length", "32");
}
static void key_length_f32(tn_gguf_writer *w) {
    tn_gguf_writer_set_f32(w, "llama.attention.key_length", 32.0f);
}
static void key_length_2_63(tn_gguf_writer *w) {
    tn_gguf_writer_set_u64(w, "llama.attention.key_length", (uint64_t)1 << 63);
}
static void key_length_array(tn_gguf_writer *w) {
    const uint32_t per_layer[2] = {32, 32};
    tn_gguf_writer_set_arr(w, "llama.attention.key_length", TN_GGUF_U32, per_layer, 2);
}
static void rope_base_str(tn_gguf_writer *w) {
    tn_gguf_writer_set_str(w, "llama.rope.freq_base", "10000");
}
static void rope_scaling_u32(tn_gguf_writer *w) {
    tn_gguf_writer_set_u32(w, "llama.rope.scaling.type", 1);
}
/* Read as absent once: the prompt's BOS came or went without a word. */
static void add_bos_u32(tn_gguf_writer *w) {
    tn_gguf_writer_set_u32(w, "tokenizer.ggml.add_bos_token", 0);
}
static void add_eos_str(tn_gguf_writer *w) {
    tn_gguf_writer_set_str(w, "tokenizer.ggml.add_eos_token", "false");
}
static void arch_u32(tn_gguf_writer *w) {
    tn_gguf_writer_set_u32(w, "general.architecture", 1);
}
static void arch_f32(tn_gguf_writer *w) {
    tn_gguf_writer_set_f32(w, "general.architecture", 1.0f);
}

static void misnamed_faults(const char *dir) {
    char clean[512], bad[512];
    snprintf(clean, sizeof clean, "%s/clean-names.gguf", dir);
    tn_mkmodel_params p = tn_test_tiny_model("llama", 5);
    tn_error err;
    CHECKF(tn_mkmodel(&p, clean, &err) == TN_OK, "mkmodel: %s", err.message);
    struct {
        void (*edit)(tn_gguf_writer *w);
        bool halve_embd;
        const char *says, *also;
        const char *never; /* the misleading message it once gave */
    } cases[] = {
        {key_length_str, false, "'llama.attention.key_length' has type string",
         "expected an integer", "per-layer"},
        {key_length_f32, false, "'llama.attention.key_length' has type f32", "expected an integer",
         "per-layer"},
        {key_length_2_63, false, "'llama.attention.key_length' is 9223372036854775808",
         "more than any setting can be", "per-layer"},
        /* a real per-layer array keeps its message */
        {key_length_array, false, "'llama.attention.key_length' is not a single integer",
         "per-layer values are not supported", "has type"},
        {rope_base_str, false, "'llama.rope.freq_base' has type string", "expected a number",
         "is not a number"},
        /* it loaded, as if the file asked for no scaling */
        {rope_scaling_u32, false, "'llama.rope.scaling.type' has type u32", "expected string",
         "is not supported"},
        {add_bos_u32, false, "'tokenizer.ggml.add_bos_token' has type u32", "expected bool",
         "(nothing: it was silent)"},
        {add_eos_str, false, "'tokenizer.ggml.add_eos_token' has type string", "expected bool",
         "(nothing: it was silent)"},
        {arch_u32, false, "'general.architecture' has type u32", "expected string", "missing"},
        {arch_f32, false, "'general.architecture' has type f32", "expected string", "missing"},
        {NULL, true, "tensor 'token_embd.weight' has ", "fewer than the tokenizer's",
         "'output.weight' has shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(bad, sizeof bad, "%s/names-%zu.gguf", dir, i);
        CHECKF(rewrite(clean, bad, cases[i].edit, cases[i].halve_embd), "rewrite %zu", i);
        tn_model *m = NULL;
        int rc = tn_model_load(bad, tn_model_default_params(), &m, &err);
        /* The tokenizer's keys: the model loads, its tokenizer does not
         * (tn_model_tokenizer_error, what tokenize and run report). */
        const char *why = rc ? err.message : m ? tn_model_tokenizer_error(m) : NULL;
        const bool tok_key = !strncmp(cases[i].says, "'tokenizer.", 11);
        CHECKF((tok_key ? rc == TN_OK && m && !tn_model_tokenizer(m)
                        : rc == TN_ERR_FORMAT && !m) &&
                   why && strstr(why, cases[i].says) && strstr(why, cases[i].also) &&
                   !strstr(why, cases[i].never),
               "case %zu: rc %d: %s", i, rc, why ? why : "loaded");
        tn_model_free(m);
        remove(bad);
    }
    remove(clean);
}

/* One float key set to one value, with the string keys that make the
 * loader read it (rope scaling's type). */
typedef struct float_edit {
    const char *key, *also_key, *also_str;
    float value;
} float_edit;

static bool set_float_key(tn_gguf_writer *w, void *user) {
    const float_edit *e = user;
    if (e->also_key && tn_gguf_writer_set_str(w, e->also_key, e->also_str) != TN_OK)
        return false;
    return tn_gguf_writer_set_f32(w, e->key, e->value) == TN_OK;
}

static void float_refused(const char *clean, const char *bad, float_edit e) {
    static const float values[] = {1e-44f, NAN, INFINITY, -1.0f, 1e30f};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        e.value = values[i];
        const tn_test_gguf_edits edits = {.after_kv = set_float_key, .user = &e};
        CHECKF(tn_test_clone_gguf_edited(clean, bad, &edits), "rewrite %s", e.key);
        char says[256];
        snprintf(says, sizeof says, "metadata key '%s' is %g; expected a number from ", e.key,
                 (double)e.value);
        tn_model *m = NULL;
        tn_error err;
        int rc = tn_model_load(bad, tn_model_default_params(), &m, &err);
        CHECKF(rc == TN_ERR_FORMAT && !m && strstr(err.message, says),
               "%s = %g: rc %d: %s", e.key, (double)e.value, rc, rc ? err.message : "loaded");
        tn_model_free(m);
        remove(bad);
    }
}

static void float_hyperparameters(const char *dir) {
    static const struct {
        const char *arch;
        float_edit edits[4];
    } cases[] = {
        {"llama",
         {{"llama.attention.layer_norm_rms_epsilon", NULL, NULL, 0},
          {"llama.rope.freq_base", NULL, NULL, 0},
          {"llama.rope.scale_linear", NULL, NULL, 0},
          {"llama.final_logit_softcapping", NULL, NULL, 0}}},
        {"llama", {{"llama.rope.scaling.factor", "llama.rope.scaling.type", "linear", 0}}},
        {"gemma4", {{"gemma4.rope.freq_base_swa", NULL, NULL, 0}}},
        {"gpt-oss",
         {{"gpt-oss.rope.scaling.factor", NULL, NULL, 0},
          {"gpt-oss.rope.scaling.attn_factor", NULL, NULL, 0},
          {"gpt-oss.rope.freq_base_swa", NULL, NULL, 0}}},
    };
    char clean[512], bad[512];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(clean, sizeof clean, "%s/floats-%s.gguf", dir, cases[c].arch);
        snprintf(bad, sizeof bad, "%s/floats-%s-bad.gguf", dir, cases[c].arch);
        tn_mkmodel_params p = tn_test_tiny_model(cases[c].arch, 9);
        tn_error err;
        CHECKF(tn_mkmodel(&p, clean, &err) == TN_OK, "mkmodel %s: %s", cases[c].arch,
               err.message);
        expect_load(clean, true, "", clean);
        for (size_t k = 0; k < 4 && cases[c].edits[k].key; k++)
            float_refused(clean, bad, cases[c].edits[k]);
        remove(clean);
    }
}

int main(void) {
    const char *dir = tn_test_tmpdir();
    char clean[512], bad[512];
    const uint16_t nan16 = 0x7e00, inf16 = 0x7c00, neg_inf16 = 0xfc00;
    const uint32_t nan32 = 0x7fc00000u;
    const uint8_t q = 0xff;
    struct {
        const char *type;
        const char *tensor;
        uint64_t at; /* byte in the tensor */
        const void *bytes;
        size_t n;
        bool loads;
    } cases[] = {
        /* Q8_0 blocks are 34 bytes: d of row 0's second block, a quant. */
        {"q8_0", "blk.1.ffn_up.weight", 34, &nan16, 2, false},
        {"q8_0", "blk.0.attn_q.weight", 34 * 2 + 2 + 5, &q, 1, true},
        {"q8_0", "token_embd.weight", 34 * 7, &inf16, 2, false},
        /* F16, F32: a value in the middle. */
        {"f16", "blk.0.ffn_down.weight", 2 * 1000, &neg_inf16, 2, false},
        {"f32", "blk.1.attn_v.weight", 4 * 77, &nan32, 4, false},
        /* Q4_K / Q6_K in the mix: Q4_K's dmin (bytes 2-3), Q6_K's d (208). */
        {"q4_k_m", "blk.1.attn_q.weight", 2, &inf16, 2, false},
        {"q4_k_m", "output.weight", 208, &nan16, 2, false},
        {"q4_k_m", "blk.0.attn_k.weight", 40, &q, 1, true},
        /* The types added later: Q3_K's d (108), Q2_K's dmin (82), IQ4's d (0). */
        {"q3_k", "blk.0.ffn_gate.weight", 108, &nan16, 2, false},
        {"q2_k", "blk.1.ffn_down.weight", 82, &inf16, 2, false},
        {"iq4_xs", "blk.0.attn_output.weight", 0, &nan16, 2, false},
        {"iq4_nl", "blk.1.attn_v.weight", 18, &inf16, 2, false},
    };
    const char *made = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(made, cases[i].type)) {
            tn_mkmodel_params p = tn_test_tiny_model("llama", 7);
            p.type = cases[i].type;
            /* Q4_K needs rows of whole 256-value super-blocks. */
            if (!strcmp(p.type, "q4_k_m") || !strcmp(p.type, "q3_k") || !strcmp(p.type, "q2_k") ||
                !strcmp(p.type, "iq4_xs")) {
                p.n_embd = 256;
                p.n_ff = 256;
                p.n_head = 4;
                p.head_dim = 64;
            }
            snprintf(clean, sizeof clean, "%s/clean-%s.gguf", dir, p.type);
            tn_error err;
            int rc = tn_mkmodel(&p, clean, &err);
            CHECKF(rc == TN_OK, "mkmodel %s: %s", p.type, err.message);
            if (rc != TN_OK)
                continue;
            expect_load(clean, true, "", clean);
            made = cases[i].type;
        }
        snprintf(bad, sizeof bad, "%s/bad-%zu.gguf", dir, i);
        CHECKF(poison(clean, bad, cases[i].tensor, cases[i].at, cases[i].bytes, cases[i].n),
               "cannot poison %s in %s", cases[i].tensor, clean);
        char what[256];
        snprintf(what, sizeof what, "%s, %s byte %llu", cases[i].type, cases[i].tensor,
                 (unsigned long long)cases[i].at);
        expect_load(bad, cases[i].loads, cases[i].tensor, what);
        remove(bad);
    }
    cache_hit_skips_the_pass(dir);
    misnamed_faults(dir);
    float_hyperparameters(dir);
    return tn_test_finish("bad-weights");
}
