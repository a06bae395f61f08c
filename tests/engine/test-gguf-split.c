/* Models split by llama.cpp's gguf-split (NAME-0000K-of-0000N.gguf, the
 * split.no / split.count / split.tensors.count keys, metadata in part 1 only)
 * open through their first part as one model: the same tensors and the same
 * logits, bit for bit, as the file in one piece. Broken sets give errors that
 * name the part: a missing part, parts of another set, a part opened first, a
 * tensor in two parts, a wrong tensor count, a first part named otherwise. */
#include "tn-test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct split_opts {
    int32_t parts;
    int32_t bad_no_part;     /* this part (0-based) claims another split.no; -1: none */
    int32_t dup_in_last;     /* the last part repeats tensor 0 */
    int64_t tensors_delta;   /* added to split.tensors.count */
    int32_t count_in_last;   /* split.count written in the last part (0: the real one) */
} split_opts;

/* Writes the parts of `whole` as gguf-split does: every metadata key and the
 * split keys in part 1, only the split keys in the others, the tensors in
 * order, spread over the parts. `name` gets "-0000K-of-0000N.gguf". */
static bool write_parts(const char *whole, const char *prefix, split_opts o) {
    tn_error err;
    tn_gguf *g = NULL;
    if (tn_gguf_open(whole, &g, &err) != TN_OK) {
        fprintf(stderr, "%s\n", err.message);
        return false;
    }
    int64_t n = tn_gguf_n_tensors(g), per = (n + o.parts - 1) / o.parts;
    bool ok = true;
    for (int32_t k = 0; k < o.parts && ok; k++) {
        tn_gguf_writer *w = tn_gguf_writer_new();
        ok = w != NULL;
        if (ok && k == 0)
            for (int64_t i = 0; i < tn_gguf_n_kv(g) && ok; i++) {
                tn_str key = tn_gguf_kv_key(g, i);
                char kbuf[256];
                snprintf(kbuf, sizeof kbuf, "%.*s", (int)key.len, key.ptr);
                ok = tn_gguf_writer_set_value(w, kbuf, tn_gguf_kv_value(g, i)) == TN_OK;
            }
        int32_t count = k == o.parts - 1 && o.count_in_last ? o.count_in_last : o.parts;
        ok = ok && tn_gguf_writer_set_u16(w, "split.no", (uint16_t)(k == o.bad_no_part ? k + 1 : k)) == TN_OK &&
             tn_gguf_writer_set_u16(w, "split.count", (uint16_t)count) == TN_OK &&
             tn_gguf_writer_set_i32(w, "split.tensors.count", (int32_t)(n + o.tensors_delta)) == TN_OK;
        for (int64_t i = k * per; i < n && i < (k + 1) * per && ok; i++) {
            const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
            ok = tn_gguf_writer_add_tensor_data(w, name, t->type, t->n_dims, t->ne, t->data,
                                                t->nbytes) == TN_OK;
        }
        if (ok && o.dup_in_last && k == o.parts - 1) {
            const tn_gguf_tensor *t = tn_gguf_tensor_at(g, 0);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
            ok = tn_gguf_writer_add_tensor_data(w, name, t->type, t->n_dims, t->ne, t->data,
                                                t->nbytes) == TN_OK;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s-%05d-of-%05d.gguf", prefix, k + 1, o.parts);
        if (ok && tn_gguf_writer_write(w, path, &err) != TN_OK) {
            fprintf(stderr, "%s\n", err.message);
            ok = false;
        }
        tn_gguf_writer_free(w);
    }
    tn_gguf_close(g);
    return ok;
}

static float *logits_of(const char *path, const int32_t *tokens, int32_t n, int32_t *n_vocab) {
    tn_error err;
    tn_model *m = NULL;
    tn_ctx *c = NULL;
    float *out = NULL;
    if (tn_model_load(path, tn_model_default_params(), &m, &err) != TN_OK ||
        tn_ctx_new(m, 64, 1, &c, &err) != TN_OK) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        goto done;
    }
    *n_vocab = tn_model_n_vocab(m);
    out = malloc(sizeof(float) * (size_t)n * (size_t)*n_vocab);
    if (out && tn_ctx_decode(c, tokens, n, TN_LOGITS_ALL, out, &err) != TN_OK) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        free(out);
        out = NULL;
    }
done:
    tn_ctx_free(c);
    tn_model_free(m);
    return out;
}

/* tn_gguf_open(path) fails with `code` and a message holding `a` and `b`. */
static void expect_refused(const char *path, int code, const char *a, const char *b,
                           const char *what) {
    tn_error err = {0};
    tn_gguf *g = NULL;
    int rc = tn_gguf_open(path, &g, &err);
    CHECKF(rc == code && g == NULL, "%s: open gave %d, expected %d", what, rc, code);
    CHECKF(strstr(err.message, a) && (!b || strstr(err.message, b)),
           "%s: the message lacks '%s'/'%s': %s", what, a, b ? b : "", err.message);
    tn_gguf_close(g);
    /* The model loader says the same. */
    tn_model *m = NULL;
    rc = tn_model_load(path, tn_model_default_params(), &m, &err);
    CHECKF(rc != TN_OK && m == NULL && strstr(err.message, a), "%s: model load: %s", what,
           err.message);
    tn_model_free(m);
}

static void remove_parts(const char *prefix, int32_t parts) {
    char path[1024];
    for (int32_t k = 0; k < parts; k++) {
        snprintf(path, sizeof path, "%s-%05d-of-%05d.gguf", prefix, k + 1, parts);
        unlink(path);
    }
}

int main(void) {
    const char *dir = tn_test_tmpdir();
    char whole[1024], prefix[1024], first[1100], second[1100], third[1100];
    snprintf(whole, sizeof whole, "%s/whole.gguf", dir);
    snprintf(prefix, sizeof prefix, "%s/model", dir);
    snprintf(first, sizeof first, "%s-00001-of-00003.gguf", prefix);
    snprintf(second, sizeof second, "%s-00002-of-00003.gguf", prefix);
    snprintf(third, sizeof third, "%s-00003-of-00003.gguf", prefix);

    tn_error err;
    tn_mkmodel_params p = tn_test_tiny_model("llama", 5);
    if (tn_mkmodel(&p, whole, &err) != TN_OK) {
        fprintf(stderr, "mkmodel: %s\n", err.message);
        return 1;
    }
    split_opts good = {.parts = 3, .bad_no_part = -1};
    CHECK(write_parts(whole, prefix, good));

    /* One model: the tensors of all parts, the same bytes, every size. */
    tn_gguf *a = NULL, *b = NULL;
    CHECK(tn_gguf_open(whole, &a, &err) == TN_OK);
    CHECKF(tn_gguf_open(first, &b, &err) == TN_OK, "%s", err.message);
    if (a && b) {
        CHECK(tn_gguf_n_parts(a) == 1 && tn_gguf_n_parts(b) == 3);
        CHECK(tn_gguf_n_tensors(a) == tn_gguf_n_tensors(b));
        bool parts_seen[3] = {false, false, false};
        for (int64_t i = 0; i < tn_gguf_n_tensors(a); i++) {
            const tn_gguf_tensor *ta = tn_gguf_tensor_at(a, i);
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)ta->name.len, ta->name.ptr);
            const tn_gguf_tensor *tb = tn_gguf_find_tensor(b, name);
            CHECKF(tb && tb->type == ta->type && tb->nbytes == ta->nbytes &&
                       memcmp(tb->data, ta->data, ta->nbytes) == 0,
                   "tensor %s differs in the split model", name);
            if (tb && tb->part < 3)
                parts_seen[tb->part] = true;
        }
        CHECK(parts_seen[0] && parts_seen[1] && parts_seen[2]);
        FILE *f1 = fopen(first, "rb"), *f2 = fopen(second, "rb"), *f3 = fopen(third, "rb");
        long s = 0;
        FILE *fs[3] = {f1, f2, f3};
        for (int k = 0; k < 3; k++)
            if (fs[k]) {
                fseek(fs[k], 0, SEEK_END);
                s += ftell(fs[k]);
                fclose(fs[k]);
            }
        CHECKF((long)tn_gguf_file_size(b) == s, "file size %llu, the parts hold %ld",
               (unsigned long long)tn_gguf_file_size(b), s);
    }
    tn_gguf_close(a);
    tn_gguf_close(b);

    /* The same logits, bit for bit. */
    int32_t tokens[12], nv1 = 0, nv2 = 0;
    for (int i = 0; i < 12; i++)
        tokens[i] = 3 + 17 * i;
    float *l1 = logits_of(whole, tokens, 12, &nv1), *l2 = logits_of(first, tokens, 12, &nv2);
    CHECK(l1 && l2 && nv1 == nv2 && nv1 > 0);
    if (l1 && l2 && nv1 == nv2)
        CHECK(memcmp(l1, l2, sizeof(float) * 12 * (size_t)nv1) == 0);
    free(l1);
    free(l2);

    /* Part 2 opened first: refused, naming part 1. */
    expect_refused(second, TN_ERR_INVALID, "model-00001-of-00003.gguf", "part 2 of 3",
                   "part 2 opened");
    /* A missing part. */
    char moved[1200];
    snprintf(moved, sizeof moved, "%s.away", third);
    CHECK(rename(third, moved) == 0);
    expect_refused(first, TN_ERR_NOT_FOUND, "part 3 of 3", "model-00003-of-00003.gguf",
                   "a missing part");
    CHECK(rename(moved, third) == 0);
    remove_parts(prefix, 3);

    /* Parts of another set: part 2 says it is part 3; part 3 says it is
     * one of 4 parts. */
    split_opts other = good;
    other.bad_no_part = 1;
    CHECK(write_parts(whole, prefix, other));
    expect_refused(first, TN_ERR_FORMAT, "different models", "model-00002-of-00003.gguf",
                   "a part claiming another number");
    remove_parts(prefix, 3);
    other = good;
    other.count_in_last = 4;
    CHECK(write_parts(whole, prefix, other));
    expect_refused(first, TN_ERR_FORMAT, "different models", NULL, "a part of another count");
    remove_parts(prefix, 3);

    /* A tensor in two parts; a wrong tensor count. */
    other = good;
    other.dup_in_last = 1;
    other.tensors_delta = 1;
    CHECK(write_parts(whole, prefix, other));
    expect_refused(first, TN_ERR_FORMAT, "appears twice", NULL, "a tensor in two parts");
    remove_parts(prefix, 3);
    other = good;
    other.tensors_delta = -1;
    CHECK(write_parts(whole, prefix, other));
    expect_refused(first, TN_ERR_FORMAT, "split.tensors.count", NULL, "a wrong tensor count");

    /* A first part named otherwise: its parts cannot be found. */
    char renamed[1200];
    snprintf(renamed, sizeof renamed, "%s/renamed.gguf", dir);
    CHECK(rename(first, renamed) == 0);
    expect_refused(renamed, TN_ERR_FORMAT, "-00001-of-00003.gguf", "cannot be found",
                   "a first part under another name");
    unlink(renamed);
    remove_parts(prefix, 3);
    unlink(whole);
    return tn_test_finish("gguf-split");
}
