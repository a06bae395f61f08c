#include "tn-test.h"

#include "tn-internal.h"
#include "tn-session.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tn_test_failures;
int tn_test_checks;

tn_mkmodel_params tn_test_tiny_model(const char *arch, uint64_t seed) {
    tn_mkmodel_params p = tn_mkmodel_default_params();
    /* gemma4moe: the gemma4 model below with Gemma 4 26B-A4B's mixture (8
     * experts, 2 per token) beside each dense feed-forward */
    const bool g4moe = !strcmp(arch, "gemma4moe");
    if (g4moe) {
        arch = "gemma4";
        p.n_expert = 8;
        p.n_expert_used = 2;
        p.n_ff_exp = 64;
    }
    p.arch = arch;
    p.type = "q8_0";
    p.n_embd = 64;
    p.n_layer = 2;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.head_dim = 32;
    p.n_ff = 128;
    p.n_ctx = 2048;
    p.seed = seed;
    p.n_threads = 2;
    if (!strcmp(arch, "gpt-oss")) {
        /* 8 experts, 2 per token, MXFP4 as published (the rest Q8_0);
         * even layers sliding, a window short enough to matter */
        p.type = "mxfp4";
        p.n_expert = 8;
        p.n_expert_used = 2;
        p.n_ff_exp = 64;
        p.sliding_window = 16;
    }
    if (!strcmp(arch, "qwen3moe")) {
        /* 8 experts, 2 per token */
        p.n_expert = 8;
        p.n_expert_used = 2;
        p.n_ff_exp = 64;
    }
    if (!strcmp(arch, "gemma4")) {
        /* sliding, sliding, full, ...: layers 3-5 reuse the KV of layers 1
         * (sliding) and 2 (full); full layers have twice the head size;
         * per-layer inputs; a window short enough to matter */
        p.n_layer = 6;
        p.swa_period = 3;
        p.n_shared_kv = 3;
        p.head_dim = 64;
        p.head_dim_swa = 32;
        p.n_embd_per_layer = 32;
        p.double_wide_ffn = true;
        p.sliding_window = 16;
        /* untied: a tied random model answers every prompt alike */
    }
    return p;
}

int tn_test_finish(const char *name) {
    fprintf(stderr, "%s: %d checks, %d failed\n", name, tn_test_checks, tn_test_failures);
    if (tn_test_checks == 0) {
        fprintf(stderr, "%s: no check ran\n", name);
        return 1;
    }
    return tn_test_failures ? 1 : 0;
}

void tn_test_missing(const char *why) {
    fprintf(stderr, "failed: missing test data: %s\n", why);
    exit(1);
}

const char *tn_test_tmpdir(void) {
    static char dir[4096];
    if (dir[0])
        return dir;
    const char *base = getenv("TERN_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0755);
    snprintf(dir, sizeof dir, "%s/t%ld", base, (long)getpid());
    mkdir(dir, 0755);
    return dir;
}

const char *tn_test_vocab(const char *name) {
    static char path[4096];
    const char *base = getenv("TERN_VOCAB_DIR");
    if (!base || !*base)
        return NULL;
    snprintf(path, sizeof path, "%s/%s", base, name);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return NULL;
    return path;
}

uint64_t tn_test_rand(uint64_t *state) { return tn_splitmix64(state); }

float tn_test_randf(uint64_t *state) {
    return (float)((tn_test_rand(state) >> 40) * (1.0 / (1ULL << 24))) * 2.0f - 1.0f;
}

double *tn_test_tensor(const tn_gguf *g, const char *name, int64_t *n) {
    const tn_gguf_tensor *t = tn_gguf_find_tensor(g, name);
    if (!t)
        return NULL;
    int64_t c = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        c *= (int64_t)t->ne[d];
    float *f = malloc((size_t)c * sizeof *f);
    double *out = malloc((size_t)c * sizeof *out);
    tn_dequantize_row(t->type, t->data, f, c);
    for (int64_t i = 0; i < c; i++)
        out[i] = f[i];
    free(f);
    if (n)
        *n = c;
    return out;
}

bool tn_test_gemma3_model(const char *file, uint64_t seed, char *path, size_t cap) {
    const char *vocab = tn_test_vocab("gemma3");
    if (!vocab)
        tn_test_missing("no gemma3 vocabulary in TERN_VOCAB_DIR (tools/fetch-vocab.sh)");
    char tokjson[4200];
    snprintf(tokjson, sizeof tokjson, "%s/tokenizer.json", vocab);
    snprintf(path, cap, "%s/%s", tn_test_tmpdir(), file);
    tn_error err = {0};
    tn_mkmodel_params p = tn_test_tiny_model("gemma3", seed);
    p.tokenizer = tokjson;
    const bool ok = tn_mkmodel(&p, path, &err) == TN_OK;
    CHECKF(ok, "mkmodel: %s", err.message);
    return ok;
}

float *tn_test_image_rows(int32_t n, int32_t width, uint64_t seed) {
    float *rows = malloc((size_t)n * width * sizeof(float));
    for (int32_t i = 0; i < n * width; i++)
        rows[i] = tn_test_randf(&seed);
    return rows;
}

tn_session_params tn_test_session_params(int32_t n_ctx, int32_t n_threads) {
    tn_session_params sp = tn_session_default_params();
    sp.n_ctx = n_ctx;
    sp.n_threads = n_threads;
    sp.pin_cache_dir = "";
    return sp;
}

tn_session *tn_test_session(const tn_model *m, int32_t n_ctx) {
    tn_session_params sp = tn_test_session_params(n_ctx, 2);
    tn_session *s = NULL;
    tn_error err = {0};
    CHECKF(tn_session_new(m, sp, &s, &err) == TN_OK, "session: %s", err.message);
    return s;
}

uint64_t tn_test_pinned_rows_hash(tn_session *s) {
    int32_t n_pin = tn_session_pin_info(s).n_pin;
    tn_ctx *c = tn_session_ctx(s);
    uint64_t bytes = tn_ctx_kv_state_bytes(c, n_pin);
    void *buf = malloc(bytes ? bytes : 1);
    uint64_t h = 0;
    if (tn_ctx_kv_len(c) >= n_pin && tn_ctx_kv_state_save(c, n_pin, buf, bytes, NULL) == TN_OK)
        h = tn_checksum64(buf, bytes, 0);
    free(buf);
    return h;
}

bool tn_test_copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    bool ok = a && b;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0)
        ok = fwrite(buf, 1, n, b) == n;
    if (a)
        fclose(a);
    if (b && fclose(b) != 0)
        ok = false;
    return ok;
}

bool tn_test_clone_gguf(const char *src, const char *dst, tn_test_kv_edit edit, void *user) {
    const tn_test_gguf_edits edits = {.kv = edit, .user = user};
    return tn_test_clone_gguf_edited(src, dst, &edits);
}

bool tn_test_clone_gguf_edited(const char *src, const char *dst, const tn_test_gguf_edits *e) {
    tn_gguf *g = NULL;
    if (tn_gguf_open(src, &g, NULL) != TN_OK)
        return false;
    tn_gguf_writer *w = tn_gguf_writer_new();
    bool ok = w != NULL;
    for (int64_t i = 0; ok && i < tn_gguf_n_kv(g); i++) {
        tn_str k = tn_gguf_kv_key(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        tn_gguf_value v = *tn_gguf_kv_value(g, i);
        if (e->kv && e->kv(key, &v, w, e->user))
            continue;
        ok = tn_gguf_writer_set_value(w, key, &v) == TN_OK;
    }
    if (ok && e->after_kv)
        ok = e->after_kv(w, e->user);
    for (int64_t i = 0; ok && i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        tn_test_tensor_copy c = {name, t->type, t->n_dims, {0}, t->data, t->nbytes};
        memcpy(c.ne, t->ne, sizeof c.ne);
        if (e->tensor && e->tensor(&c, w, e->user))
            continue;
        ok = tn_gguf_writer_add_tensor_data(w, c.name, c.type, c.n_dims, c.ne, c.data, c.nbytes) ==
             TN_OK;
    }
    if (ok && e->after_tensors)
        ok = e->after_tensors(w, e->user);
    ok = ok && tn_gguf_writer_write(w, dst, NULL) == TN_OK;
    tn_gguf_writer_free(w);
    tn_gguf_close(g);
    return ok;
}

/* The UTF-8 rule that the engine's sanitizer, tern-cli info, tern-cli's
 * JSON and json.c each had a copy of before tn_utf8_char_len, written out
 * by byte ranges: the reference the shared check must agree with. */
size_t tn_test_utf8_len_reference(const unsigned char *p, size_t n) {
    if (n == 0)
        return 0;
    const size_t len = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2
                       : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                                                                           : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
        return 0;
    return len;
}

void tn_test_empty_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

int tn_test_count_entries(const char *dir, bool hidden_only) {
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            (!hidden_only || e->d_name[0] == '.'))
            n++;
    closedir(d);
    return n - (!strcmp(dir, "/proc/self/fd") ? 1 : 0);
}
