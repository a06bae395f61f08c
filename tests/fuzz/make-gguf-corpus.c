/* Writes the seed corpus of the GGUF fuzz target with libtern's writer.
 *
 *   build/tests/fuzz/make-gguf-corpus tests/fuzz/corpus/gguf
 *
 * The files are small (the fuzzer runs with -max_len=65536) and
 * deterministic, so rerunning this after a writer change shows up as a
 * reviewable diff. test-gguf-corrupt checks that each seed still opens.
 */
#include "tern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tensor bytes: a fixed pattern, so that the files never change by chance. */
static int add(tn_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
               const uint64_t *ne) {
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++)
        rows *= ne[d];
    uint64_t nb = rows * tn_type_row_bytes(type, ne[0]);
    uint8_t *data = malloc(nb ? nb : 1);
    if (!data)
        return TN_ERR_NOMEM;
    for (uint64_t i = 0; i < nb; i++)
        data[i] = (uint8_t)(i * 29 + 7);
    int rc = tn_gguf_writer_add_tensor_data(w, name, type, n_dims, ne, data, nb);
    free(data);
    return rc;
}

static int finish(tn_gguf_writer *w, int rc, const char *dir, const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    tn_error err = {0};
    if (rc != TN_OK) {
        fprintf(stderr, "make-gguf-corpus: %s: building it failed (%s)\n", path,
                tn_status_name(rc));
        tn_gguf_writer_free(w);
        return 1;
    }
    rc = tn_gguf_writer_write(w, path, &err);
    tn_gguf_writer_free(w);
    if (rc != TN_OK) {
        fprintf(stderr, "make-gguf-corpus: %s\n", err.message);
        return 1;
    }
    printf("%s\n", path);
    return 0;
}

/* A model-shaped file: llama keys, a small tokenizer, four tensors. */
static int model_small(const char *dir) {
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!w)
        return 1;
    static const char *const tokens[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the",
                                         "a",     "b",   "<0x0A>", "\xe2\x96\x81"};
    static const float scores[] = {0, 0, 0, -1.5f, -2, -2.5f, -3, -3.5f};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 6, 1};
    int rc = 0;
    rc |= tn_gguf_writer_set_str(w, "general.architecture", "llama");
    rc |= tn_gguf_writer_set_str(w, "general.name", "fuzz seed");
    rc |= tn_gguf_writer_set_u32(w, "llama.block_count", 1);
    rc |= tn_gguf_writer_set_u32(w, "llama.embedding_length", 32);
    rc |= tn_gguf_writer_set_u32(w, "llama.attention.head_count", 2);
    rc |= tn_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    rc |= tn_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    rc |= tn_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, 8);
    rc |= tn_gguf_writer_set_arr(w, "tokenizer.ggml.scores", TN_GGUF_F32, scores, 8);
    rc |= tn_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TN_GGUF_I32, types, 8);
    rc |= tn_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    rc |= tn_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    const uint64_t emb[] = {32, 8}, norm[] = {32}, q[] = {32, 32};
    if (!rc)
        rc = add(w, "token_embd.weight", TN_TYPE_Q8_0, 2, emb);
    if (!rc)
        rc = add(w, "blk.0.attn_norm.weight", TN_TYPE_F32, 1, norm);
    if (!rc)
        rc = add(w, "blk.0.attn_q.weight", TN_TYPE_Q4_0, 2, q);
    if (!rc)
        rc = add(w, "output_norm.weight", TN_TYPE_F32, 1, norm);
    return finish(w, rc, dir, "model-small.gguf");
}

/* Every metadata type, arrays of each fixed type, and a spread of tensor
 * types, with a non-default alignment. */
static int all_types(const char *dir) {
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!w)
        return 1;
    static const uint8_t u8s[] = {0, 255};
    static const int16_t i16s[] = {-32768, 32767};
    static const uint64_t u64s[] = {0, UINT64_MAX};
    static const double f64s[] = {-0.0, 1e300};
    static const bool bools[] = {false, true};
    static const char *const strs[] = {"", "x", "\xf0\x9f\x90\xa6"};
    int rc = 0;
    rc |= tn_gguf_writer_set_u32(w, "general.alignment", 64);
    rc |= tn_gguf_writer_set_u8(w, "s.u8", 1);
    rc |= tn_gguf_writer_set_i8(w, "s.i8", -1);
    rc |= tn_gguf_writer_set_u16(w, "s.u16", 2);
    rc |= tn_gguf_writer_set_i16(w, "s.i16", -2);
    rc |= tn_gguf_writer_set_u32(w, "s.u32", 3);
    rc |= tn_gguf_writer_set_i32(w, "s.i32", -3);
    rc |= tn_gguf_writer_set_f32(w, "s.f32", 0.25f);
    rc |= tn_gguf_writer_set_bool(w, "s.bool", false);
    rc |= tn_gguf_writer_set_str(w, "s.str", "text");
    rc |= tn_gguf_writer_set_u64(w, "s.u64", 4);
    rc |= tn_gguf_writer_set_i64(w, "s.i64", -4);
    rc |= tn_gguf_writer_set_f64(w, "s.f64", 0.5);
    rc |= tn_gguf_writer_set_arr(w, "a.u8", TN_GGUF_U8, u8s, 2);
    rc |= tn_gguf_writer_set_arr(w, "a.i16", TN_GGUF_I16, i16s, 2);
    rc |= tn_gguf_writer_set_arr(w, "a.u64", TN_GGUF_U64, u64s, 2);
    rc |= tn_gguf_writer_set_arr(w, "a.f64", TN_GGUF_F64, f64s, 2);
    rc |= tn_gguf_writer_set_arr(w, "a.bool", TN_GGUF_BOOL, bools, 2);
    rc |= tn_gguf_writer_set_arr(w, "a.empty", TN_GGUF_I32, NULL, 0);
    rc |= tn_gguf_writer_set_arr_str(w, "a.str", strs, 3);
    const uint64_t v16[] = {16}, v8[] = {8, 1}, k[] = {256}, q5[] = {32, 2};
    if (!rc)
        rc = add(w, "t.f16", TN_TYPE_F16, 1, v16);
    if (!rc)
        rc = add(w, "t.bf16", TN_TYPE_BF16, 2, v8);
    if (!rc)
        rc = add(w, "t.q4_k", TN_TYPE_Q4_K, 1, k);
    if (!rc)
        rc = add(w, "t.q6_k", TN_TYPE_Q6_K, 1, k);
    if (!rc)
        rc = add(w, "t.q5_0", TN_TYPE_Q5_0, 2, q5);
    return finish(w, rc, dir, "all-types-align64.gguf");
}

static int metadata_only(const char *dir) {
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!w)
        return 1;
    int rc = 0;
    rc |= tn_gguf_writer_set_str(w, "general.architecture", "qwen3");
    rc |= tn_gguf_writer_set_str(w, "tokenizer.chat_template",
                                 "{% for m in messages %}{{ m.content }}{% endfor %}");
    rc |= tn_gguf_writer_set_u64(w, "qwen3.context_length", 4096);
    return finish(w, rc, dir, "metadata-only.gguf");
}

static int zero_size_tensor(const char *dir) {
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!w)
        return 1;
    const uint64_t empty[] = {0, 4}, four[] = {4};
    int rc = tn_gguf_writer_set_str(w, "general.architecture", "llama");
    if (!rc)
        rc = add(w, "t.empty", TN_TYPE_F32, 2, empty);
    if (!rc)
        rc = add(w, "t.four", TN_TYPE_F32, 1, four);
    return finish(w, rc, dir, "zero-size-tensor.gguf");
}

/* Arrays nested to the reader's limit (8 levels) and arrays of string arrays. */
static int nested(const char *dir) {
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!w)
        return 1;
    static const uint32_t leaf[] = {7, 8, 9};
    tn_gguf_value levels[8];
    memset(levels, 0, sizeof levels);
    levels[0].type = TN_GGUF_ARRAY;
    levels[0].v.arr.type = TN_GGUF_U32;
    levels[0].v.arr.n = 3;
    levels[0].v.arr.data = (const uint8_t *)leaf;
    for (int i = 1; i < 8; i++) {
        levels[i].type = TN_GGUF_ARRAY;
        levels[i].v.arr.type = TN_GGUF_ARRAY;
        levels[i].v.arr.n = 1;
        levels[i].v.arr.items = &levels[i - 1];
    }
    tn_gguf_value s[3], inner[2], outer;
    memset(s, 0, sizeof s);
    memset(inner, 0, sizeof inner);
    memset(&outer, 0, sizeof outer);
    const char *words[] = {"merge", "a b", ""};
    for (int i = 0; i < 3; i++) {
        s[i].type = TN_GGUF_STRING;
        s[i].v.str.ptr = words[i];
        s[i].v.str.len = strlen(words[i]);
    }
    inner[0].type = inner[1].type = TN_GGUF_ARRAY;
    inner[0].v.arr.type = inner[1].v.arr.type = TN_GGUF_STRING;
    inner[0].v.arr.n = 3;
    inner[0].v.arr.items = s;
    inner[1].v.arr.n = 1;
    inner[1].v.arr.items = s + 1;
    outer.type = TN_GGUF_ARRAY;
    outer.v.arr.type = TN_GGUF_ARRAY;
    outer.v.arr.n = 2;
    outer.v.arr.items = inner;
    int rc = 0;
    rc |= tn_gguf_writer_set_value(w, "n.deep", &levels[7]);
    rc |= tn_gguf_writer_set_value(w, "n.strings", &outer);
    const uint64_t ne[] = {32, 1, 1, 2};
    if (!rc)
        rc = add(w, "t.q8_0", TN_TYPE_Q8_0, 4, ne);
    return finish(w, rc, dir, "nested-arrays.gguf");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make-gguf-corpus DIR\n");
        return 1;
    }
    int bad = 0;
    bad |= model_small(argv[1]);
    bad |= all_types(argv[1]);
    bad |= metadata_only(argv[1]);
    bad |= zero_size_tensor(argv[1]);
    bad |= nested(argv[1]);
    return bad;
}
