/* Loading a model: hyperparameters from `{arch}.*` keys, weights by name with
 * every shape and type checked, so that the forward pass can trust them. */
#include "tn-internal.h"
#include "tn-model.h"
#include "tn-quant.h"
#include "tn-repack-cache.h"
#include "tn-text.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

/* Generous bounds that keep every product of dimensions far from overflow
 * while admitting any real model. */
#define MAX_DIM (1 << 24)
#define MAX_LAYERS 4096
/* llama.cpp's LLAMA_MAX_EXPERTS */
#define MAX_EXPERTS 512

const char *tn_arch_name(tn_arch arch) {
    switch (arch) {
    case TN_ARCH_LLAMA: return "llama";
    case TN_ARCH_QWEN3: return "qwen3";
    case TN_ARCH_GEMMA3: return "gemma3";
    case TN_ARCH_GEMMA4: return "gemma4";
    case TN_ARCH_QWEN3MOE: return "qwen3moe";
    case TN_ARCH_GPTOSS: return "gpt-oss";
    }
    return "unknown";
}

tn_model_params tn_model_default_params(void) {
    tn_model_params p = {.load_tokenizer = true, .backend = NULL};
    return p;
}

typedef struct loader {
    tn_model *m;
    const tn_gguf *g;
    const char *path;
    const char *arch;
    tn_error *err;
    /* The repack cache most likely holds this file's weights: the NaN/Inf
     * pass over the experts and over the matrices it may serve (a read of
     * most of the file) waits for prepare, which skips it when a cache
     * file made by an earlier load of this file as it is now is mapped
     * (that load ran it). */
    bool defer_checks;
} loader;

/* A NaN/Inf pass put off until prepare: a matrix [rows][cols], or an
 * experts tensor of rows x n_exp rows. */
struct tn_deferred_check {
    const tn_gguf_tensor *t;
    int64_t rows;
};

static int defer_check(loader *ld, const tn_gguf_tensor *t, int64_t rows) {
    tn_model *m = ld->m;
    if (m->n_deferred_checks == m->cap_deferred_checks) {
        int32_t cap = m->cap_deferred_checks ? 2 * m->cap_deferred_checks : 64;
        struct tn_deferred_check *c = realloc(m->deferred_checks, (size_t)cap * sizeof *c);
        if (!c)
            return tn_fail(ld->err, TN_ERR_NOMEM, "%s: out of memory", ld->path);
        m->deferred_checks = c;
        m->cap_deferred_checks = cap;
    }
    m->deferred_checks[m->n_deferred_checks++] = (struct tn_deferred_check){.t = t, .rows = rows};
    return TN_OK;
}

static int key_int(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo,
                   int64_t hi, int32_t *out) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    const tn_gguf_value *found = tn_gguf_find(ld->g, key);
    if (found && found->type == TN_GGUF_ARRAY)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: metadata key '%s' is not a single integer (per-layer values are "
                       "not supported)",
                       ld->path, key);
    int64_t v;
    int rc = tn_gguf_read_int(ld->g, key, &v, ld->err);
    if (rc == TN_ERR_NOT_FOUND) {
        if (required)
            return tn_fail(ld->err, TN_ERR_FORMAT, "%s: metadata key '%s' is missing", ld->path,
                           key);
        v = def;
    } else if (rc != TN_OK) {
        return rc;
    }
    if (v < lo || v > hi)
        return tn_fail(ld->err, TN_ERR_FORMAT, "%s: metadata key '%s' is %lld, outside [%lld, %lld]",
                       ld->path, key, (long long)v, (long long)lo, (long long)hi);
    *out = (int32_t)v;
    return TN_OK;
}

/* A key that is one integer or one per layer (Gemma 4's head_count_kv and
 * feed_forward_length): out[n_layer]. */
static int key_int_layers(loader *ld, const char *suffix, bool required, int64_t def,
                          int64_t lo, int64_t hi, int32_t n_layer, int32_t *out) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    const tn_gguf_value *v = tn_gguf_find(ld->g, key);
    if (!v || v->type != TN_GGUF_ARRAY) {
        int32_t one;
        int rc = key_int(ld, suffix, required, def, lo, hi, &one);
        for (int32_t il = 0; rc == TN_OK && il < n_layer; il++)
            out[il] = one;
        return rc;
    }
    if (v->v.arr.n != (uint64_t)n_layer ||
        (v->v.arr.type != TN_GGUF_I32 && v->v.arr.type != TN_GGUF_U32 &&
         v->v.arr.type != TN_GGUF_I64 && v->v.arr.type != TN_GGUF_U64 &&
         v->v.arr.type != TN_GGUF_U16 && v->v.arr.type != TN_GGUF_I16))
        return tn_fail(ld->err, TN_ERR_FORMAT, "%s: '%s' must be an integer or one per layer (%d)",
                       ld->path, key, n_layer);
    for (int32_t il = 0; il < n_layer; il++) {
        int64_t x = tn_gguf_arr_int(v, (uint64_t)il);
        if (x < lo || x > hi)
            return tn_fail(ld->err, TN_ERR_FORMAT,
                           "%s: metadata key '%s' is %lld at layer %d, outside [%lld, %lld]",
                           ld->path, key, (long long)x, il, (long long)lo, (long long)hi);
        out[il] = (int32_t)x;
    }
    return TN_OK;
}

/* Every float a model's numbers hang on goes through the one range check
 * (tn-internal.h: the ranges and what real models give): a denormal epsilon
 * or softcap is positive and finite, yet turns a norm or the logits into
 * nothing. */
static int key_float(loader *ld, const char *suffix, bool required, double def, double lo,
                     double hi, double *out) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    int rc = tn_gguf_read_float_or(ld->g, key, def, lo, hi, out, ld->err);
    if (rc == TN_ERR_NOT_FOUND && required)
        return tn_fail(ld->err, TN_ERR_FORMAT, "%s: metadata key '%s' is missing", ld->path, key);
    return rc == TN_ERR_NOT_FOUND ? TN_OK : rc;
}

static const char *type_label(uint32_t type, char *buf, size_t n) {
    const char *name = tn_type_name(type);
    if (name)
        return name;
    snprintf(buf, n, "#%u", type);
    return buf;
}

typedef struct finite_scan {
    const tn_gguf_tensor *t;
    size_t row_bytes;
    int64_t rows, cols;
    int64_t bad; /* the result */
} finite_scan;

/* In pieces of about 64 MiB, with a cancel point between them: the
 * largest tensors (a Gemma 4 E4B's per-layer embeddings, 1.6 GB in Q4_0)
 * take a second or more to read from a cold disk. */
static void finite_scan_run(void *arg) {
    finite_scan *f = arg;
    const size_t piece_bytes = (size_t)64 << 20;
    const int64_t piece = f->row_bytes ? (int64_t)(piece_bytes / f->row_bytes) + 1 : f->rows;
    const uint8_t *data = f->t->data;
    f->bad = -1;
    for (int64_t r0 = 0; r0 < f->rows && f->bad < 0; r0 += piece) {
        tn_load_poll();
        const int64_t n = f->rows - r0 < piece ? f->rows - r0 : piece;
        const int64_t bad = tn_weights_first_nonfinite(
            f->t->type, data + (size_t)r0 * f->row_bytes, f->row_bytes, n, f->cols);
        if (bad >= 0)
            f->bad = r0 + bad;
        tn_load_progress_add((uint64_t)n * f->row_bytes);
    }
}

/* A tensor without NaN or Inf (its shape already checked): a matrix
 * ne = {cols, rows}, or experts ne = {cols, rows, n_exp}. The pass reads
 * the whole tensor from the mapping: under tn_guarded_read, so that a file
 * truncated meanwhile is an error, not a SIGBUS. g: the file t is in. */
static int check_finite(tn_model *m, const tn_gguf *g, const char *path, const tn_gguf_tensor *t,
                        int64_t rows, tn_error *err) {
    const int64_t cols = (int64_t)t->ne[0];
    const bool experts = t->n_dims >= 3 && t->ne[2] > 1;
    const int64_t n_exp = experts ? (int64_t)t->ne[2] : 1;
    size_t row_bytes = tn_type_row_bytes(t->type, (uint64_t)cols);
    if (m)
        m->finite_checked_bytes += (uint64_t)row_bytes * (uint64_t)rows * (uint64_t)n_exp;
    finite_scan f = {.t = t, .row_bytes = row_bytes, .rows = rows * n_exp, .cols = cols};
    /* The model's spans are found once per load; a drafter's file (m
     * NULL: a few tensors) per tensor. */
    int n_spans = m ? m->n_read_spans : 0;
    tn_read_span *own = m ? NULL : tn_gguf_read_spans(g, &n_spans);
    const tn_read_span *spans = m ? m->read_spans : own;
    int rc = spans && n_spans > 0
                 ? tn_guarded_read(spans, n_spans, "finite", finite_scan_run, &f, err)
                 : (finite_scan_run(&f), TN_OK); /* an in-memory file cannot shrink */
    free(own);
    if (rc != TN_OK)
        return rc;
    const int64_t bad = f.bad;
    if (bad < 0)
        return TN_OK;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
    if (!experts)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: tensor '%s' holds a NaN or infinite weight (row %lld): the file is "
                       "damaged, or was written from a model whose training diverged",
                       path, name, (long long)bad);
    return tn_fail(err, TN_ERR_FORMAT,
                   "%s: tensor '%s' holds a NaN or infinite weight (expert %lld, row %lld): "
                   "the file is damaged, or was written from a model whose training diverged",
                   path, name, (long long)(bad / rows), (long long)(bad % rows));
}

static int missing(loader *ld, const char *name) {
    return tn_fail(ld->err, TN_ERR_FORMAT,
                   "%s: tensor '%s' is missing (incomplete file, or not a %s model)", ld->path,
                   name, ld->arch);
}

/* What a matrix and a stack of experts both need of t: a type Tern runs
 * (with a matrix kernel when `kernel`), rows of cols values in whole
 * blocks (*row_bytes), and n_exp blocks of `rows` such rows (*stride bytes
 * each) within the tensor. */
static int tensor_rows(loader *ld, const tn_gguf_tensor *t, const char *name, int64_t cols,
                       int64_t rows, int64_t n_exp, bool kernel, size_t *row_bytes,
                       uint64_t *stride) {
    char buf[16];
    if (!tn_type_supported(t->type) || (kernel && !tn_matmul_has_kernel(TN_ISA_SCALAR, t->type)))
        return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                       "%s: tensor '%s' has type %s, which Tern cannot run", ld->path, name,
                       type_label(t->type, buf, sizeof buf));
    *row_bytes = tn_type_row_bytes(t->type, (uint64_t)cols);
    if (*row_bytes == 0)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: tensor '%s': rows of %lld values are not whole %s blocks of %zu",
                       ld->path, name, (long long)cols, type_label(t->type, buf, sizeof buf),
                       tn_type_block_size(t->type));
    uint64_t need;
    if (!tn_mul_u64(*row_bytes, (uint64_t)rows, stride) ||
        !tn_mul_u64(*stride, (uint64_t)n_exp, &need) || t->nbytes < need)
        return tn_fail(ld->err, TN_ERR_FORMAT, "%s: tensor '%s' is shorter than its shape says",
                       ld->path, name);
    return TN_OK;
}

/* A 2-D weight [rows][cols] (GGUF ne = {cols, rows}). *found tells an
 * optional absent tensor from a present one. */
static int get_matrix(loader *ld, const char *name, int64_t cols, int64_t rows, bool required,
                      tn_weight *w, bool *found) {
    const tn_gguf_tensor *t = tn_gguf_find_tensor(ld->g, name);
    if (found)
        *found = t != NULL;
    if (!t)
        return required ? missing(ld, name) : TN_OK;
    bool two_d = t->n_dims <= 2;
    for (uint32_t d = 2; d < t->n_dims; d++)
        two_d = two_d && t->ne[d] == 1;
    if (!two_d || (int64_t)t->ne[0] != cols || (int64_t)t->ne[1] != rows)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: tensor '%s' has shape [%llu, %llu%s], expected [%lld, %lld]", ld->path,
                       name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                       two_d ? "" : ", ...", (long long)cols, (long long)rows);
    /* Vectors (rows == 1) are only converted; matrices also need a kernel. */
    size_t row_bytes;
    uint64_t size;
    int rc = tensor_rows(ld, t, name, cols, rows, 1, rows > 1, &row_bytes, &size);
    if (rc != TN_OK)
        return rc;
    w->type = t->type;
    w->rows = rows;
    w->cols = cols;
    w->data = t->data;
    w->row_bytes = row_bytes;
    /* One pass over the scales (block types) or the values (float types):
     * a NaN or Inf weight would make every logit NaN, so the file is
     * refused, naming the tensor. Cost: docs/PERFORMANCE.md (issue 21),
     * mostly the page faults that the repacking would otherwise take; a
     * matrix the repack cache may serve waits for prepare (defer_checks),
     * as on a cache hit nothing else reads it from the file. */
    if (ld->defer_checks && ld->m && rows > 1 && tn_weight_repack_size(w) > 0)
        return defer_check(ld, t, rows);
    return check_finite(ld->m, ld->g, ld->path, t, rows, ld->err);
}

static void advise_huge(const void *p, uint64_t n) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t e = ((uintptr_t)p + (uintptr_t)n) & ~(huge - 1);
    if (e > a)
        madvise((void *)a, e - a, MADV_HUGEPAGE); /* a hint: failing changes nothing */
#else
    (void)p;
    (void)n;
#endif
}


/* The experts of one projection: a 3-D tensor ne = {cols, rows, n_exp},
 * each expert a [rows][cols] matrix, checked as get_matrix checks one. */
static int get_experts(loader *ld, const char *name, int64_t cols, int64_t rows, int64_t n_exp,
                       tn_experts *x) {
    const tn_gguf_tensor *t = tn_gguf_find_tensor(ld->g, name);
    if (!t)
        return missing(ld, name);
    bool three_d = t->n_dims == 3 || (t->n_dims == 4 && t->ne[3] == 1);
    if (!three_d || (int64_t)t->ne[0] != cols || (int64_t)t->ne[1] != rows ||
        (int64_t)t->ne[2] != n_exp)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: tensor '%s' has %u dimensions [%llu, %llu, %llu], expected the %lld "
                       "experts' [%lld, %lld, %lld]",
                       ld->path, name, t->n_dims, (unsigned long long)t->ne[0],
                       (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1),
                       (unsigned long long)(t->n_dims > 2 ? t->ne[2] : 1), (long long)n_exp,
                       (long long)cols, (long long)rows, (long long)n_exp);
    size_t row_bytes;
    uint64_t stride;
    int rc = tensor_rows(ld, t, name, cols, rows, n_exp, true, &row_bytes, &stride);
    if (rc != TN_OK)
        return rc;
    /* A step reads its K experts anywhere in gigabytes of mapping: in 2 MiB
     * pages rather than 4 KiB ones (where the file system gives the page
     * cache such folios: ext4 since Linux 6.16), Qwen3-30B-A3B's decode
     * with the experts in rows measured 7.8 -> 11.9 tok/s
     * (docs/PERFORMANCE.md). Asked for before the check below faults the
     * pages in; only whole 2 MiB pages of the tensor, none of its
     * neighbours'. */
    advise_huge(t->data, t->nbytes);
    /* As for a matrix: one pass over the scales, so that a NaN expert is
     * refused at load rather than found by the token that routes to it. */
    if (ld->defer_checks && ld->m)
        rc = defer_check(ld, t, rows);
    else
        rc = check_finite(ld->m, ld->g, ld->path, t, rows, ld->err);
    if (rc != TN_OK)
        return rc;
    x->first = (tn_weight){.type = t->type, .rows = rows, .cols = cols, .data = t->data,
                           .row_bytes = row_bytes};
    x->stride = (size_t)stride;
    return TN_OK;
}

static int own(tn_model *m, float *p) {
    if (m->n_owned == m->cap_owned) {
        int32_t cap = m->cap_owned ? m->cap_owned * 2 : 64;
        float **o = realloc(m->owned, (size_t)cap * sizeof *o);
        if (!o)
            return TN_ERR_NOMEM;
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return TN_OK;
}

typedef struct convert_pass {
    const tn_weight *w;
    float *out; /* w->rows * w->cols, the caller's */
    int rc;     /* the result */
} convert_pass;

static void convert_pass_run(void *arg) {
    convert_pass *c = arg;
    c->rc = TN_OK;
    const tn_weight *w = c->w;
    for (int64_t r = 0; r < w->rows && c->rc == TN_OK; r++)
        c->rc = tn_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes,
                                  c->out + (size_t)r * (size_t)w->cols, w->cols);
}

/* w's rows converted to f32 into out (allocated by the caller). The copy
 * reads the mapping again after check_finite's pass: a file truncated in
 * between (or during) made it a SIGBUS that ended the process, mid-load,
 * on a norm vector anywhere in the file. Under tn_guarded_read like the
 * other passes; without spans (an in-memory file cannot shrink) as is. */
static int convert_guarded(const tn_read_span *spans, int n_spans, const char *path,
                           const char *name, const tn_weight *w, float *out, tn_error *err) {
    convert_pass c = {.w = w, .out = out, .rc = TN_OK};
    int rc = spans && n_spans > 0
                 ? tn_guarded_read(spans, n_spans, "convert", convert_pass_run, &c, err)
                 : (convert_pass_run(&c), TN_OK);
    if (rc != TN_OK)
        return rc;
    if (c.rc != TN_OK)
        return tn_fail(err, c.rc, "%s: tensor '%s' cannot be converted to f32", path, name);
    return TN_OK;
}

/* The model's spans are found once per load (m->read_spans). */
static int convert_rows(loader *ld, const char *name, const tn_weight *w, float *out) {
    tn_model *m = ld->m;
    int n_spans = m ? m->n_read_spans : 0;
    tn_read_span *own_spans = m ? NULL : tn_gguf_read_spans(ld->g, &n_spans);
    int rc = convert_guarded(m ? m->read_spans : own_spans, n_spans, ld->path, name, w, out,
                             ld->err);
    free(own_spans);
    return rc;
}

int tn_gguf_weight_to_f32(const tn_gguf *g, const char *path, const char *name,
                          const tn_weight *w, float *out, tn_error *err) {
    int n_spans = 0;
    tn_read_span *spans = tn_gguf_read_spans(g, &n_spans);
    int rc = convert_guarded(spans, n_spans, path, name, w, out, err);
    free(spans);
    return rc;
}

/* A 1-D tensor of n values (norm weights, rope factors), kept as f32. */
static int get_vector(loader *ld, const char *name, int64_t n, bool required, const float **out) {
    tn_weight w = {0};
    bool found;
    *out = NULL;
    int rc = get_matrix(ld, name, n, 1, required, &w, &found);
    if (rc != TN_OK || !found)
        return rc;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v || own(ld->m, v) != TN_OK) {
        free(v);
        return tn_fail(ld->err, TN_ERR_NOMEM, "%s: out of memory", ld->path);
    }
    rc = convert_rows(ld, name, &w, v);
    if (rc != TN_OK)
        return rc;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return tn_fail(ld->err, TN_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value",
                           ld->path, name);
    *out = v;
    return TN_OK;
}

/* A 2-D tensor [rows][cols] kept as an f32 copy (gpt-oss's per-expert
 * biases), checked as a matrix. */
static int get_table(loader *ld, const char *name, int64_t cols, int64_t rows,
                     const float **out) {
    tn_weight w = {0};
    *out = NULL;
    int rc = get_matrix(ld, name, cols, rows, true, &w, NULL);
    if (rc != TN_OK)
        return rc;
    float *v = malloc((size_t)cols * (size_t)rows * sizeof *v);
    if (!v || own(ld->m, v) != TN_OK) {
        free(v);
        return tn_fail(ld->err, TN_ERR_NOMEM, "%s: out of memory", ld->path);
    }
    rc = convert_rows(ld, name, &w, v);
    if (rc != TN_OK)
        return rc;
    for (size_t i = 0; i < (size_t)cols * (size_t)rows; i++)
        if (!isfinite(v[i]))
            return tn_fail(ld->err, TN_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value",
                           ld->path, name);
    *out = v;
    return TN_OK;
}

/* The router and expert shapes of qwen3moe and Gemma 4 26B-A4B (llama.cpp:
 * src/llama-model.cpp load_hparams, src/models/qwen3moe.cpp, gemma4.cpp):
 * expert_count and expert_used_count are required, 0 < used <= count <=
 * 512; expert_feed_forward_length defaults, as there, to
 * feed_forward_length / expert_used_count (qwen3moe; Gemma 4 needs it). */
static int load_moe(loader *ld, tn_hparams *hp, int32_t experts) {
    int rc;
    if (experts < 1)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: a %s model needs %s.expert_count > 0 (its feed-forward layers are "
                       "mixtures of experts)",
                       ld->path, ld->arch, ld->arch);
    if (experts > MAX_EXPERTS)
        return tn_fail(ld->err, TN_ERR_FORMAT, "%s: %d experts per layer, more than the %d Tern "
                       "supports", ld->path, experts, MAX_EXPERTS);
    if ((rc = key_int(ld, "expert_used_count", true, 0, 0, INT32_MAX, &hp->n_expert_used)))
        return rc;
    if (hp->n_expert_used < 1 || hp->n_expert_used > experts)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: %s.expert_used_count is %d, but a token must use between 1 and the "
                       "%d experts of a layer",
                       ld->path, ld->arch, hp->n_expert_used, experts);
    hp->n_expert = experts;
    int32_t ff = 0;
    /* Gemma 4's feed_forward_length is the dense branch's (often a per-layer
     * array): its experts' width must be given. */
    if (hp->arch != TN_ARCH_GEMMA4 &&
        (rc = key_int(ld, "feed_forward_length", false, 0, 0, MAX_DIM, &ff)))
        return rc;
    if ((rc = key_int(ld, "expert_feed_forward_length", ff == 0, ff / hp->n_expert_used, 1,
                      MAX_DIM, &hp->n_ff_exp)))
        return rc;
    if (hp->n_ff_exp < 1)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: %s.expert_feed_forward_length is missing and feed_forward_length is "
                       "too small to derive it",
                       ld->path, ld->arch);
    return TN_OK;
}

static int load_hparams(loader *ld, tn_hparams *hp) {
    int rc;
    tn_str arch;
    rc = tn_gguf_read_str(ld->g, "general.architecture", &arch, ld->err);
    if (rc == TN_ERR_NOT_FOUND)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: metadata key 'general.architecture' is missing (not a model file?)",
                       ld->path);
    if (rc != TN_OK)
        return rc;
    if (tn_str_eq(arch, "llama"))
        hp->arch = TN_ARCH_LLAMA;
    else if (tn_str_eq(arch, "qwen3"))
        hp->arch = TN_ARCH_QWEN3;
    else if (tn_str_eq(arch, "gemma3"))
        hp->arch = TN_ARCH_GEMMA3;
    else if (tn_str_eq(arch, "gemma4"))
        hp->arch = TN_ARCH_GEMMA4;
    else if (tn_str_eq(arch, "qwen3moe"))
        hp->arch = TN_ARCH_QWEN3MOE;
    else if (tn_str_eq(arch, "gpt-oss"))
        hp->arch = TN_ARCH_GPTOSS;
    else if (tn_str_eq(arch, "gemma4-assistant"))
        return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                       "%s: 'gemma4-assistant' is Gemma 4's multi-token-prediction drafter, not "
                       "a model Tern runs (Tern runs the Gemma 4 models: E2B, E4B, 26B-A4B, "
                       "31B)",
                       ld->path);
    else
        return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                       "%s: architecture '%.*s' is not supported (Tern runs llama, qwen3, "
                       "qwen3moe, gemma3, gemma4 and gpt-oss)",
                       ld->path, (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    ld->arch = tn_arch_name(hp->arch);

    int32_t experts = 0;
    if ((rc = key_int(ld, "expert_count", false, 0, 0, MAX_DIM, &experts)))
        return rc;
    if (hp->arch == TN_ARCH_QWEN3MOE || hp->arch == TN_ARCH_GPTOSS) {
        if ((rc = load_moe(ld, hp, experts)))
            return rc;
        experts = 0; /* handled */
    }
    /* Gemma 4 26B-A4B: every layer a mixture beside its dense feed-forward.
     * A router tensor without expert_count is refused by load_moe, naming
     * the key (llama.cpp would mix dense and mixture layers; no published
     * Gemma 4 does). */
    if (hp->arch == TN_ARCH_GEMMA4 &&
        (experts > 0 || tn_gguf_find_tensor(ld->g, "blk.0.ffn_gate_inp.weight"))) {
        if ((rc = load_moe(ld, hp, experts)))
            return rc;
        hp->moe_dense = true;
        experts = 0; /* handled */
    }
    if (experts > 0)
        return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                       "%s: mixture-of-experts models (%d experts) of architecture '%s' are not "
                       "supported (Tern runs qwen3moe, Gemma 4 26B-A4B and gpt-oss)",
                       ld->path, experts, ld->arch);
    if (hp->arch == TN_ARCH_GEMMA4)
        for (int64_t i = 0; i < tn_gguf_n_tensors(ld->g); i++) {
            const tn_gguf_tensor *t = tn_gguf_tensor_at(ld->g, i);
            if ((t->name.len > 2 && !memcmp(t->name.ptr, "a.", 2)) ||
                (t->name.len > 5 && !memcmp(t->name.ptr, "audio", 5)))
                return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                               "%s: tensor '%.*s': Gemma 4 audio is not supported; Tern runs the "
                               "text of the Gemma 4 models (E2B, E4B, 26B-A4B, 31B)",
                               ld->path, (int)(t->name.len > 64 ? 64 : t->name.len), t->name.ptr);
        }

    if ((rc = key_int(ld, "context_length", true, 0, 1, INT32_MAX, &hp->n_ctx_train)) ||
        (rc = key_int(ld, "embedding_length", true, 0, 1, MAX_DIM, &hp->n_embd)) ||
        (rc = key_int(ld, "block_count", true, 0, 1, MAX_LAYERS, &hp->n_layer)) ||
        (rc = key_int(ld, "attention.head_count", true, 0, 1, MAX_DIM, &hp->n_head)))
        return rc;
    /* Gemma 4 may give these per layer: load_layer_shapes reads them. */
    hp->n_ff = 1;
    hp->n_head_kv = hp->n_head;
    /* qwen3moe has no dense feed-forward: its scratch is sized by the
     * experts' width (load_moe); feed_forward_length is optional there. */
    if (hp->arch != TN_ARCH_GEMMA4 &&
        ((rc = key_int(ld, "feed_forward_length", hp->n_expert == 0, hp->n_ff_exp, 1, MAX_DIM,
                       &hp->n_ff)) ||
         (rc = key_int(ld, "attention.head_count_kv", false, hp->n_head, 1, hp->n_head,
                       &hp->n_head_kv))))
        return rc;
    if (hp->n_head % hp->n_head_kv != 0)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: %d attention heads cannot share %d key/value heads evenly", ld->path,
                       hp->n_head, hp->n_head_kv);
    int32_t def_head_dim = hp->n_embd / hp->n_head;
    if ((rc = key_int(ld, "attention.key_length", false, def_head_dim, 2, 1 << 16,
                      &hp->head_dim)))
        return rc;
    int32_t v_len;
    if ((rc = key_int(ld, "attention.value_length", false, hp->head_dim, 1, 1 << 16, &v_len)))
        return rc;
    if (v_len != hp->head_dim)
        return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                       "%s: key length %d and value length %d differ, which Tern does not support",
                       ld->path, hp->head_dim, v_len);
    if (hp->head_dim % 2 != 0)
        return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                       "%s: heads of %d values: Tern's attention needs an even head size", ld->path,
                       hp->head_dim);
    if ((int64_t)hp->head_dim * hp->n_head > MAX_DIM)
        return tn_fail(ld->err, TN_ERR_FORMAT, "%s: %d heads of %d values are too wide", ld->path,
                       hp->n_head, hp->head_dim);
    if ((rc = key_int(ld, "rope.dimension_count", false, hp->head_dim, 2, hp->head_dim,
                      &hp->n_rot)))
        return rc;
    if (hp->n_rot % 2 != 0)
        return tn_fail(ld->err, TN_ERR_FORMAT, "%s: rope dimension count %d is odd", ld->path,
                       hp->n_rot);

    double d;
    if ((rc = key_float(ld, "attention.layer_norm_rms_epsilon", true, TN_EPS_MIN, TN_EPS_MIN,
                        TN_EPS_MAX, &d)))
        return rc;
    hp->norm_eps = (float)d;
    if ((rc = key_float(ld, "rope.freq_base", false, 10000.0, TN_ROPE_BASE_MIN, TN_ROPE_BASE_MAX,
                        &d)))
        return rc;
    hp->rope_base = (float)d;

    /* Rope scaling: linear is a divisor of the position; YaRN (gpt-oss
     * only) as ggml's rope computes it; anything else changes the
     * frequencies in ways Tern does not implement. */
    double factor = 1.0;
    char key[256];
    snprintf(key, sizeof key, "%s.rope.scaling.type", ld->arch);
    tn_str stype;
    /* Of another type it was taken for no scaling at all: the model then
     * ran with the wrong positions, without a word. Named instead. */
    const int srs = tn_gguf_read_str(ld->g, key, &stype, ld->err);
    if (srs != TN_OK && srs != TN_ERR_NOT_FOUND)
        return srs;
    if (srs == TN_OK && !tn_str_eq(stype, "none")) {
        const bool yarn = tn_str_eq(stype, "yarn") && hp->arch == TN_ARCH_GPTOSS;
        if (!tn_str_eq(stype, "linear") && !yarn)
            return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                           "%s: rope scaling '%.*s' is not supported (only linear; YaRN for "
                           "gpt-oss)",
                           ld->path, (int)(stype.len > 32 ? 32 : stype.len), stype.ptr);
        if ((rc = key_float(ld, "rope.scaling.factor", false, 1.0, TN_ROPE_FACTOR_MIN,
                            TN_ROPE_FACTOR_MAX, &factor)))
            return rc;
        if (yarn && (rc = key_int(ld, "rope.scaling.original_context_length", false,
                                  hp->n_ctx_train, 1, INT32_MAX, &hp->yarn_orig_ctx)))
            return rc;
    } else {
        if ((rc = key_float(ld, "rope.scale_linear", false, 1.0, TN_ROPE_FACTOR_MIN,
                            TN_ROPE_FACTOR_MAX, &factor)))
            return rc;
    }
    hp->rope_scale = (float)(1.0 / factor);
    if (hp->yarn_orig_ctx > 0) {
        /* llama.cpp's context set-up (llama-context.cpp: get_mscale(factor,
         * 1) over 1 + 0.1 ln factor, times rope.scaling.attn_factor) and
         * ggml's rope (x 1 + 0.1 ln(1 / freq_scale)), in the same float
         * operations: about 1 + 0.1 ln factor in all. */
        double attn;
        if ((rc = key_float(ld, "rope.scaling.attn_factor", false, 1.0, TN_ROPE_ATTN_MIN,
                            TN_ROPE_ATTN_MAX, &attn)))
            return rc;
        const float fs = hp->rope_scale, f = 1.0f / fs;
        float a = f <= 1.0f ? 1.0f : 0.1f * logf(f) + 1.0f;
        a *= 1.0f / (1.0f + 0.1f * logf(f));
        a *= (float)attn;
        hp->yarn_mscale = a * (1.0f + 0.1f * logf(1.0f / fs));
    }
    hp->rope_base_swa = hp->rope_base;
    hp->rope_scale_swa = hp->rope_scale;
    hp->rope_kind = hp->arch == TN_ARCH_LLAMA ? TN_ROPE_ADJACENT : TN_ROPE_HALVES;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = 1.0f;
    hp->final_softcap = 0;
    hp->n_layer_kv = hp->n_layer;
    hp->n_rot_swa = hp->n_rot;

    switch (hp->arch) {
    case TN_ARCH_LLAMA:
        break;
    case TN_ARCH_QWEN3:
    case TN_ARCH_QWEN3MOE:
        hp->qk_norm = true;
        break;
    case TN_ARCH_GEMMA4:
        /* src/models/gemma4.cpp: no query pre-scaling (self.scaling = 1),
         * weightless RMSNorm of the values, sliding layers rotating with
         * rope.freq_base_swa (default 10000) and no scaling. */
        hp->qk_norm = true;
        hp->v_norm = true;
        hp->post_norms = true;
        hp->gelu = true;
        hp->embd_scale = sqrtf((float)hp->n_embd);
        hp->attn_scale = 1.0f;
        if ((rc = key_float(ld, "rope.freq_base_swa", false, 10000.0, TN_ROPE_BASE_MIN,
                            TN_ROPE_BASE_MAX, &d)))
            return rc;
        hp->rope_base_swa = (float)d;
        hp->rope_scale_swa = 1.0f;
        if ((rc = key_int(ld, "attention.sliding_window", true, 0, 0, INT32_MAX,
                          &hp->sliding_window)) ||
            (rc = key_int(ld, "embedding_length_per_layer_input", false, 0, 0, 1 << 16,
                          &hp->n_embd_per_layer)))
            return rc;
        int32_t shared = 0;
        if ((rc = key_int(ld, "attention.shared_kv_layers", false, 0, 0, hp->n_layer - 1,
                          &shared)))
            return rc;
        hp->n_layer_kv = hp->n_layer - shared;
        break;
    case TN_ARCH_GPTOSS:
        /* src/models/openai-moe.cpp: NEOX rope on every layer with the same
         * scaling (rope.freq_base_swa, when given, for the sliding ones),
         * the sliding window on the layers load_swa_pattern says. */
        hp->oai = true;
        if ((rc = key_float(ld, "rope.freq_base_swa", false, hp->rope_base, TN_ROPE_BASE_MIN,
                            TN_ROPE_BASE_MAX, &d)))
            return rc;
        hp->rope_base_swa = (float)d;
        if ((rc = key_int(ld, "attention.sliding_window", true, 0, 1, INT32_MAX,
                          &hp->sliding_window)))
            return rc;
        break;
    case TN_ARCH_GEMMA3:
        hp->qk_norm = true;
        hp->post_norms = true;
        hp->gelu = true;
        hp->embd_scale = sqrtf((float)hp->n_embd);
        /* As llama.cpp: local layers rotate with base 10000 and no scaling. */
        hp->rope_base_swa = 10000.0f;
        hp->rope_scale_swa = 1.0f;
        if ((rc = key_int(ld, "attention.sliding_window", true, 0, 0, INT32_MAX,
                          &hp->sliding_window)))
            return rc;
        /* query_pre_attn_scalar is head_dim except for the 27B model (62
         * layers), where it is n_embd / n_head (gemma_pytorch config). */
        if (hp->n_layer == 62)
            hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
        break;
    }
    double cap;
    /* 0 (or absent): none; a negative one was once taken for none too. */
    if ((rc = key_float(ld, "final_logit_softcapping", false, 0.0, TN_SOFTCAP_MIN, TN_SOFTCAP_MAX,
                        &cap)))
        return rc;
    hp->final_softcap = (float)cap;
    return TN_OK;
}

/* Which layers use the sliding window: `{arch}.attention.sliding_window_pattern`
 * when the file has it (a per-layer array of flags, or a period), else
 * Gemma 3's period of 6 (layers 0-4 local, 5 global, ...). */
static int load_swa_pattern(loader *ld, tn_model *m) {
    tn_hparams *hp = &m->hp;
    for (int32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].swa = false;
    if (hp->sliding_window <= 0)
        return TN_OK;
    char key[256];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", ld->arch);
    const tn_gguf_value *v = tn_gguf_find(ld->g, key);
    /* gpt-oss: llama.cpp's load_swa_pattern(ml, 2), even layers sliding */
    int64_t period = hp->arch == TN_ARCH_GPTOSS ? 2 : 6;
    if (v && v->type == TN_GGUF_ARRAY) {
        if (v->v.arr.n != (uint64_t)hp->n_layer ||
            (v->v.arr.type != TN_GGUF_BOOL && v->v.arr.type != TN_GGUF_U8 &&
             v->v.arr.type != TN_GGUF_I8 && v->v.arr.type != TN_GGUF_I32 &&
             v->v.arr.type != TN_GGUF_U32))
            return tn_fail(ld->err, TN_ERR_FORMAT,
                           "%s: '%s' must hold one flag per layer (%d)", ld->path, key,
                           hp->n_layer);
        for (int32_t il = 0; il < hp->n_layer; il++)
            m->layers[il].swa = tn_gguf_arr_int(v, (uint64_t)il) != 0;
        return TN_OK;
    }
    if (v) {
        if (tn_gguf_get_int(ld->g, key, &period) != TN_OK || period < 0 || period > MAX_LAYERS)
            return tn_fail(ld->err, TN_ERR_FORMAT, "%s: '%s' is not a layer period", ld->path,
                           key);
    }
    for (int32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].swa = period == 0 || (il % period) < period - 1;
    return TN_OK;
}

/* Every layer's own shapes, and which layer's KV memory it reads. One
 * shape for all layers except in Gemma 4, whose sliding-window layers have
 * their own head size (attention.key_length_swa) and rope dimensions, whose
 * KV head count and feed-forward width may be per-layer arrays, and whose
 * last attention.shared_kv_layers layers own no KV memory: each reads that
 * of the last earlier KV-owning layer of its own kind (sliding or full), as
 * HF's Gemma 4 does (kv_shared_layer_index). llama.cpp hard-codes the same
 * choice as layers n_layer_kv - 2 (sliding) and n_layer_kv - 1 (full),
 * which agrees for E2B and E4B (their layer n_layer_kv - 1 is full and the
 * one before it sliding). */
static int load_layer_shapes(loader *ld, tn_model *m) {
    tn_hparams *hp = &m->hp;
    const int32_t NL = hp->n_layer;
    int rc = TN_OK;
    int32_t d_swa = hp->head_dim;
    int32_t *kv = malloc((size_t)NL * sizeof *kv), *ff = malloc((size_t)NL * sizeof *ff);
    if (!kv || !ff) {
        free(kv);
        free(ff);
        return tn_fail(ld->err, TN_ERR_NOMEM, "%s: out of memory", ld->path);
    }
    for (int32_t il = 0; il < NL; il++) {
        kv[il] = hp->n_head_kv;
        /* A mixture's per-layer width is its experts' (the scratch of
         * the feed-forward holds one expert's rows at a time). */
        ff[il] = hp->n_expert > 0 ? hp->n_ff_exp : hp->n_ff;
    }
    if (hp->arch == TN_ARCH_GEMMA4) {
        int32_t v_swa, r_swa;
        if ((rc = key_int(ld, "attention.key_length_swa", false, hp->head_dim, 2, 1 << 16,
                          &d_swa)) ||
            (rc = key_int(ld, "attention.value_length_swa", false, d_swa, 1, 1 << 16, &v_swa)) ||
            (rc = key_int(ld, "rope.dimension_count_swa", false,
                          hp->n_rot < d_swa ? hp->n_rot : d_swa, 2, d_swa, &r_swa)) ||
            (rc = key_int_layers(ld, "attention.head_count_kv", false, hp->n_head, 1, hp->n_head,
                                 NL, kv)) ||
            (rc = key_int_layers(ld, "feed_forward_length", true, 0, 1, MAX_DIM, NL, ff)))
            goto out;
        if (v_swa != d_swa) {
            rc = tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                         "%s: sliding-window key length %d and value length %d differ, which "
                         "Tern does not support",
                         ld->path, d_swa, v_swa);
            goto out;
        }
        if (d_swa % 2 || r_swa % 2 || (int64_t)d_swa * hp->n_head > MAX_DIM) {
            rc = tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                         "%s: sliding-window heads of %d values (%d rotated) are not supported",
                         ld->path, d_swa, r_swa);
            goto out;
        }
        hp->n_rot_swa = r_swa;
        if (hp->n_layer_kv < 1) {
            rc = tn_fail(ld->err, TN_ERR_FORMAT, "%s: every layer shares another's KV memory",
                         ld->path);
            goto out;
        }
    }
    hp->n_ff = 0;
    for (int32_t il = 0; il < NL; il++) {
        tn_layer *L = &m->layers[il];
        L->head_dim = L->swa ? d_swa : hp->head_dim;
        L->n_rot = L->swa ? hp->n_rot_swa : hp->n_rot;
        L->n_head_kv = kv[il];
        L->n_ff = ff[il];
        L->out_scale = 1.0f;
        L->kv_layer = il;
        if (hp->n_head % L->n_head_kv != 0) {
            rc = tn_fail(ld->err, TN_ERR_FORMAT,
                         "%s: %d attention heads cannot share %d key/value heads evenly (layer %d)",
                         ld->path, hp->n_head, L->n_head_kv, il);
            goto out;
        }
        if (il >= hp->n_layer_kv) {
            int32_t j = hp->n_layer_kv - 1;
            while (j >= 0 && m->layers[j].swa != L->swa)
                j--;
            if (j < 0 && L->swa) {
                rc = tn_fail(ld->err, TN_ERR_FORMAT,
                             "%s: layer %d shares the KV memory of an earlier sliding-window "
                             "layer, and there is none",
                             ld->path, il);
                goto out;
            }
            if (j < 0) {
                rc = tn_fail(ld->err, TN_ERR_FORMAT,
                             "%s: layer %d shares the KV memory of an earlier full-attention "
                             "layer, and there is none",
                             ld->path, il);
                goto out;
            }
            if (m->layers[j].n_head_kv != L->n_head_kv) {
                rc = tn_fail(ld->err, TN_ERR_FORMAT,
                             "%s: layer %d has %d KV heads but shares the KV memory of layer %d, "
                             "which has %d",
                             ld->path, il, L->n_head_kv, j, m->layers[j].n_head_kv);
                goto out;
            }
            L->kv_layer = j;
        }
        if (L->n_ff > hp->n_ff)
            hp->n_ff = L->n_ff;
        if (L->head_dim > hp->max_head_dim)
            hp->max_head_dim = L->head_dim;
        if (L->n_head_kv * L->head_dim > hp->max_kv_dim)
            hp->max_kv_dim = L->n_head_kv * L->head_dim;
    }
    /* The feed-forward scratch holds the dense branch's rows or one
     * expert's, in turn. */
    if (hp->moe_dense && hp->n_ff_exp > hp->n_ff)
        hp->n_ff = hp->n_ff_exp;
    hp->n_head_kv = m->layers[0].n_head_kv;
    hp->max_rot = hp->n_rot > hp->n_rot_swa ? hp->n_rot : hp->n_rot_swa;
out:
    free(kv);
    free(ff);
    return rc;
}

/* Layer il's router and experts. The gate and up experts may be one fused
 * 3-D tensor, ffn_gate_up_exps (ne = {n_embd, 2 n_ff_exp, n_expert}: each
 * expert's gate rows, then its up rows, as llama.cpp's converter writes
 * Gemma 4's experts.gate_up_proj); they are then two views of it with the
 * fused stride. ffn_down_exps.scale, if present, scales each expert's
 * output (Gemma 4's router.per_expert_scale; llama.cpp's down_exps_s).
 * Gemma 4 adds the router's input scale and the branch norms. */
static int load_layer_experts(loader *ld, tn_model *m, int32_t il) {
    const tn_hparams *hp = &m->hp;
    tn_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, NE = hp->n_expert, FX = hp->n_ff_exp;
    char name[96];
    int rc;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", il);
    if ((rc = get_matrix(ld, name, E, NE, true, &L->ffn_gate_inp, NULL)))
        return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps.weight", il);
    if (tn_gguf_find_tensor(ld->g, name)) {
        tn_experts gu;
        if ((rc = get_experts(ld, name, E, 2 * FX, NE, &gu)))
            return rc;
        L->gate_exps = gu;
        L->gate_exps.first.rows = FX;
        L->up_exps = L->gate_exps;
        L->up_exps.first.data = (const uint8_t *)gu.first.data + (size_t)FX * gu.first.row_bytes;
    } else {
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", il);
        if ((rc = get_experts(ld, name, E, FX, NE, &L->gate_exps)))
            return rc;
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", il);
        if ((rc = get_experts(ld, name, E, FX, NE, &L->up_exps)))
            return rc;
    }
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", il);
    if ((rc = get_experts(ld, name, FX, E, NE, &L->down_exps)))
        return rc;
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.scale", il);
    if ((rc = get_vector(ld, name, NE, false, &L->down_exps_s)))
        return rc;
    /* llama.cpp would also scale the gate and up experts' outputs by these;
     * no converter writes them for these architectures. */
    static const char *const scales[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_gate_up_exps"};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        snprintf(name, sizeof name, "blk.%d.%s.scale", il, scales[i]);
        if (tn_gguf_find_tensor(ld->g, name))
            return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                           "%s: tensor '%s': per-expert scales of the gate and up projections "
                           "are not supported",
                           ld->path, name);
    }
    if (!hp->moe_dense)
        return TN_OK;
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.scale", il);
    if ((rc = get_vector(ld, name, E, true, &L->router_s)))
        return rc;
    snprintf(name, sizeof name, "blk.%d.post_ffw_norm_1.weight", il);
    if ((rc = get_vector(ld, name, E, true, &L->post_ffw_norm_1)))
        return rc;
    snprintf(name, sizeof name, "blk.%d.pre_ffw_norm_2.weight", il);
    if ((rc = get_vector(ld, name, E, true, &L->pre_ffw_norm_2)))
        return rc;
    snprintf(name, sizeof name, "blk.%d.post_ffw_norm_2.weight", il);
    return get_vector(ld, name, E, true, &L->post_ffw_norm_2);
}

static int load_tensors(loader *ld, tn_model *m) {
    tn_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    int rc;

    const tn_gguf_tensor *te = tn_gguf_find_tensor(ld->g, "token_embd.weight");
    if (!te)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: tensor 'token_embd.weight' is missing (incomplete file, or not a %s "
                       "model)",
                       ld->path, ld->arch);
    if (te->ne[1] < 1 || te->ne[1] > (uint64_t)INT32_MAX)
        return tn_fail(ld->err, TN_ERR_FORMAT, "%s: tensor 'token_embd.weight' has %llu rows",
                       ld->path, (unsigned long long)te->ne[1]);
    /* The output head is checked against the embedding's rows: a cut-short
     * embedding would make the intact head the one blamed. The tokenizer
     * says which is right (an embedding may be padded past its tokens, never
     * short of them). */
    const tn_gguf_tensor *to = tn_gguf_find_tensor(ld->g, "output.weight");
    const tn_gguf_value *toks = tn_gguf_find(ld->g, "tokenizer.ggml.tokens");
    if (to && to->n_dims >= 2 && to->ne[1] != te->ne[1] && toks &&
        toks->type == TN_GGUF_ARRAY && te->ne[1] < toks->v.arr.n && to->ne[1] >= toks->v.arr.n)
        return tn_fail(ld->err, TN_ERR_FORMAT,
                       "%s: tensor 'token_embd.weight' has %llu rows, fewer than the tokenizer's "
                       "%llu tokens ('output.weight' has %llu): the file is damaged; download or "
                       "convert it again",
                       ld->path, (unsigned long long)te->ne[1],
                       (unsigned long long)toks->v.arr.n, (unsigned long long)to->ne[1]);
    hp->n_vocab = (int32_t)te->ne[1];
    if ((rc = get_matrix(ld, "token_embd.weight", E, hp->n_vocab, true, &m->tok_embd, NULL)))
        return rc;
    if ((rc = get_vector(ld, "output_norm.weight", E, true, &m->output_norm)))
        return rc;
    bool has_output;
    if ((rc = get_matrix(ld, "output.weight", E, hp->n_vocab, false, &m->output, &has_output)))
        return rc;
    if (!has_output) {
        m->output = m->tok_embd;
        m->output_tied = true;
    }
    if ((rc = get_vector(ld, "rope_freqs.weight", hp->n_rot / 2, false, &m->rope_freqs)))
        return rc;
    if (m->rope_freqs)
        for (int32_t i = 0; i < hp->n_rot / 2; i++)
            if (!(m->rope_freqs[i] > 0))
                return tn_fail(ld->err, TN_ERR_FORMAT,
                               "%s: tensor 'rope_freqs.weight' holds a factor <= 0", ld->path);

    if (hp->arch == TN_ARCH_GEMMA4 && hp->n_embd_per_layer > 0) {
        const int64_t P = hp->n_embd_per_layer, LP = (int64_t)hp->n_layer * P;
        if ((rc = get_matrix(ld, "per_layer_token_embd.weight", LP, hp->n_vocab, true,
                             &m->pl_tok_embd, NULL)) ||
            (rc = get_matrix(ld, "per_layer_model_proj.weight", E, LP, true, &m->pl_model_proj,
                             NULL)) ||
            (rc = get_vector(ld, "per_layer_proj_norm.weight", P, true, &m->pl_proj_norm)))
            return rc;
    }
    if (hp->v_norm) {
        /* also the weight of Gemma 4's router norm (n_embd values) */
        const int32_t n_ones = hp->max_head_dim > hp->n_embd ? hp->max_head_dim : hp->n_embd;
        float *ones = malloc((size_t)n_ones * sizeof *ones);
        if (!ones || own(m, ones) != TN_OK) {
            free(ones);
            return tn_fail(ld->err, TN_ERR_NOMEM, "%s: out of memory", ld->path);
        }
        for (int32_t i = 0; i < n_ones; i++)
            ones[i] = 1.0f;
        m->ones = ones;
    }
    if (tn_gguf_find_tensor(ld->g, "blk.0.attn_qkv.weight"))
        return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                       "%s: tensor 'blk.0.attn_qkv.weight': fused Q/K/V projections are not "
                       "supported",
                       ld->path);

    static const char *const biases[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    for (size_t i = 0; !hp->oai && i < sizeof biases / sizeof biases[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "blk.0.%s.bias", biases[i]);
        if (tn_gguf_find_tensor(ld->g, name))
            return tn_fail(ld->err, TN_ERR_UNSUPPORTED,
                           "%s: tensor '%s': attention biases are not supported", ld->path, name);
    }

    for (int32_t il = 0; il < hp->n_layer; il++) {
        tn_layer *L = &m->layers[il];
        const int64_t D = L->head_dim, QD = (int64_t)hp->n_head * D, KD = (int64_t)L->n_head_kv * D;
        const int64_t F = L->n_ff;
        const bool own_kv = L->kv_layer == il;
        char name[96];
#define MAT(field, suffix, cols, rows)                                          \
    do {                                                                        \
        snprintf(name, sizeof name, "blk.%d." suffix ".weight", il);            \
        if ((rc = get_matrix(ld, name, (cols), (rows), true, &L->field, NULL))) \
            return rc;                                                          \
    } while (0)
#define VEC(field, suffix, n)                                           \
    do {                                                                \
        snprintf(name, sizeof name, "blk.%d." suffix ".weight", il);    \
        if ((rc = get_vector(ld, name, (n), true, &L->field)))          \
            return rc;                                                  \
    } while (0)
        VEC(attn_norm, "attn_norm", E);
        MAT(wq, "attn_q", E, QD);
        /* A shared-KV layer's own key and value projections (if the file
         * has them) are never used: not loaded, not repacked. */
        if (own_kv) {
            MAT(wk, "attn_k", E, KD);
            if (hp->arch == TN_ARCH_GEMMA4) {
                bool has_v;
                snprintf(name, sizeof name, "blk.%d.attn_v.weight", il);
                if ((rc = get_matrix(ld, name, E, KD, false, &L->wv, &has_v)))
                    return rc;
                L->v_is_k = !has_v;
            } else {
                MAT(wv, "attn_v", E, KD);
            }
        }
        MAT(wo, "attn_output", QD, E);
        if (hp->qk_norm) {
            VEC(q_norm, "attn_q_norm", D);
            if (own_kv)
                VEC(k_norm, "attn_k_norm", D);
        }
        if (hp->post_norms)
            VEC(post_attn_norm, "post_attention_norm", E);
        /* gpt-oss's norm before the mixture is post_attention_norm */
        if (hp->oai)
            VEC(ffn_norm, "post_attention_norm", E);
        else
            VEC(ffn_norm, "ffn_norm", E);
        if (hp->n_expert == 0 || hp->moe_dense) {
            MAT(ffn_gate, "ffn_gate", E, F);
            MAT(ffn_up, "ffn_up", E, F);
            MAT(ffn_down, "ffn_down", F, E);
        }
        if (hp->n_expert > 0 && (rc = load_layer_experts(ld, m, il)))
            return rc;
        if (hp->oai) {
            const int64_t NE = hp->n_expert, FX = hp->n_ff_exp;
#define BIAS(field, suffix, n)                                          \
    do {                                                                \
        snprintf(name, sizeof name, "blk.%d." suffix ".bias", il);      \
        if ((rc = get_vector(ld, name, (n), true, &L->field)))          \
            return rc;                                                  \
    } while (0)
            BIAS(bq, "attn_q", QD);
            BIAS(bk, "attn_k", KD);
            BIAS(bv, "attn_v", KD);
            BIAS(bo, "attn_output", E);
            BIAS(gate_inp_b, "ffn_gate_inp", NE);
#undef BIAS
            VEC(sinks, "attn_sinks", hp->n_head);
            snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.bias", il);
            if ((rc = get_table(ld, name, FX, NE, &L->gate_exps_b)))
                return rc;
            snprintf(name, sizeof name, "blk.%d.ffn_up_exps.bias", il);
            if ((rc = get_table(ld, name, FX, NE, &L->up_exps_b)))
                return rc;
            snprintf(name, sizeof name, "blk.%d.ffn_down_exps.bias", il);
            if ((rc = get_table(ld, name, E, NE, &L->down_exps_b)))
                return rc;
        }
        if (hp->post_norms)
            VEC(post_ffw_norm, "post_ffw_norm", E);
        if (hp->arch == TN_ARCH_GEMMA4) {
            const float *scale;
            snprintf(name, sizeof name, "blk.%d.layer_output_scale.weight", il);
            if ((rc = get_vector(ld, name, 1, false, &scale)))
                return rc;
            if (scale)
                L->out_scale = scale[0];
            if (hp->n_embd_per_layer > 0) {
                MAT(pl_gate, "inp_gate", E, hp->n_embd_per_layer);
                MAT(pl_proj, "proj", hp->n_embd_per_layer, E);
                VEC(pl_post_norm, "post_norm", E);
            }
        }
#undef MAT
#undef VEC
    }
    return TN_OK;
}

/* "Random llama 1B-shape (Q4_0)": the name tern-cli mkmodel gave its
 * models before they carried tern.random_weights (an architecture, a count
 * of weights, a type), matched whole. */
static bool old_mkmodel_name(const char *s) {
    static const char prefix[] = "Random ";
    if (strncmp(s, prefix, sizeof prefix - 1))
        return false;
    s += sizeof prefix - 1;
    const char *sp = strchr(s, ' ');
    if (!sp || sp == s)
        return false;
    for (const char *c = s; c < sp; c++)
        if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_')
            return false;
    s = sp + 1;
    size_t digits = 0;
    while (isdigit((unsigned char)*s) || (*s == '.' && digits > 0)) {
        digits++;
        s++;
    }
    if (!digits || (*s != 'K' && *s != 'M' && *s != 'B'))
        return false;
    s++;
    static const char shape[] = "-shape (";
    if (strncmp(s, shape, sizeof shape - 1))
        return false;
    s += sizeof shape - 1;
    size_t type = 0;
    while (isupper((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_') {
        type++;
        s++;
    }
    return type > 0 && !strcmp(s, ")");
}

/* A model of random weights (docs/MODEL.md, "Demo models"): Tern's writers
 * mark it with tern.random_weights; files written before that are known by
 * the exact names those writers gave. A real model whose name merely holds
 * "random" or "demo" ("Demographics-7B") is not one. */
static bool random_weights(const tn_gguf *g, const char *name) {
    bool v = false;
    if (tn_gguf_find(g, "tern.random_weights"))
        return tn_gguf_get_bool(g, "tern.random_weights", &v) == TN_OK && v;
    static const char *const old_names[] = {
        "Tern demo model (random weights)",
        "Tern DFlash draft (random weights)",
        "Tern Gemma 4 assistant (random weights)",
    };
    for (size_t i = 0; i < sizeof old_names / sizeof *old_names; i++)
        if (!strcmp(name, old_names[i]))
            return true;
    return old_mkmodel_name(name);
}

static void describe(tn_model *m) {
    const tn_gguf *g = m->gguf;
    uint64_t bytes_by_type[TN_TYPE_COUNT_] = {0};
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            n *= t->ne[d];
        m->n_params += n;
        m->weight_bytes += t->nbytes;
        if (t->type < TN_TYPE_COUNT_ && t->n_dims >= 2)
            bytes_by_type[t->type] += t->nbytes;
    }
    m->main_type = TN_TYPE_F32;
    for (uint32_t t = 0; t < TN_TYPE_COUNT_; t++)
        if (bytes_by_type[t] > bytes_by_type[m->main_type])
            m->main_type = t;

    char params[32];
    if (m->n_params >= 1000000000ULL)
        snprintf(params, sizeof params, "%.2fB", m->n_params / 1e9);
    else if (m->n_params >= 1000000ULL)
        snprintf(params, sizeof params, "%.1fM", m->n_params / 1e6);
    else
        snprintf(params, sizeof params, "%.1fK", m->n_params / 1e3);
    const char *tname = tn_type_name(m->main_type);
    /* A mix is named by the file's own key when it has one: a Q4_K_M file's
     * largest tensors may be its Q6_K embeddings. */
    int64_t file_type;
    const char *ftname = tn_gguf_get_int(g, "general.file_type", &file_type) == TN_OK &&
                                 file_type >= 0 && file_type <= UINT32_MAX
                             ? tn_file_type_name((uint32_t)file_type)
                             : NULL;
    m->demo = random_weights(g, m->name);
    size_t n = strlen(m->name) + 128;
    m->description = malloc(n);
    char *up = m->quant;
    snprintf(up, sizeof m->quant, "?");
    if (ftname)
        snprintf(up, sizeof m->quant, "%s", ftname);
    else if (tname) {
        size_t i = 0;
        for (; tname[i] && i + 1 < sizeof m->quant; i++)
            up[i] = (char)toupper((unsigned char)tname[i]);
        up[i] = '\0';
    }
    if (m->description)
        snprintf(m->description, n, "%s (%s, %s params, %s)%s", m->name, tn_arch_name(m->hp.arch),
                 params, up, m->demo ? " - demo model, random weights" : "");
}

/* The tokenizer and chat format. A model without a usable tokenizer still
 * runs on token ids (tests, perplexity of pre-tokenized input), so a failure
 * here is kept as a message for the callers that need text. */
static void load_text(tn_model *m, tn_model_params params) {
    tn_str jinja = {0};
    tn_gguf_get_str(m->gguf, "tokenizer.chat_template", &jinja);
    m->chat_kind = (int)tn_chat_template_detect(jinja.ptr, (size_t)jinja.len,
                                                tn_arch_name(m->hp.arch), &m->chat_warning);
    if (!params.load_tokenizer) {
        tn_fail(&m->tokenizer_error, TN_ERR_UNSUPPORTED, "%s: tokenizer not loaded", m->path);
        return;
    }
    if (!tn_gguf_find(m->gguf, "tokenizer.ggml.model")) {
        tn_fail(&m->tokenizer_error, TN_ERR_UNSUPPORTED,
                "%s: the file has no tokenizer (tokenizer.ggml.* metadata)", m->path);
        return;
    }
    tn_error e = {0};
    if (tn_tokenizer_load(m->gguf, &m->tokenizer, &e) != TN_OK) {
        m->tokenizer = NULL;
        m->tokenizer_error = e;
        return;
    }
    if (tn_tokenizer_n_vocab(m->tokenizer) > m->hp.n_vocab) {
        tn_fail(&m->tokenizer_error, TN_ERR_FORMAT,
                "%s: the tokenizer has %d tokens but the model only %d embeddings", m->path,
                tn_tokenizer_n_vocab(m->tokenizer), m->hp.n_vocab);
        tn_tokenizer_free(m->tokenizer);
        m->tokenizer = NULL;
    }
}

/* The backend prepares every matrix once, here, and names the arithmetic:
 * it must not change between the prefill of a pin and the requests answered
 * from it, or between two runs that should answer identically. On the CPU
 * (engine/backend-cpu.c), Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K
 * matrices go into the kernel family's faster layout; the LM head too (with
 * the embedding, when tied: lookups gather their row from it). An untied
 * embedding stays in place: it is only read one row per token. TERN_REPACK=0
 * keeps the file's layout. */
/* The experts as matrices of their own, for the repack cache: per layer and
 * expert gate, up, down, so that the cache file holds each layer's experts
 * at one stride. Only where the cache is on and the experts have a faster
 * layout: 0 (and nothing allocated) otherwise. */
static int expert_weights(tn_model *m, tn_error *err) {
    const tn_hparams *hp = &m->hp;
    if (hp->n_expert == 0)
        return 0;
    char *dir = tn_repack_cache_dir();
    free(dir);
    if (!dir)
        return 0;
    size_t n = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const tn_layer *L = &m->layers[il];
        const tn_experts *x[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
        for (int k = 0; k < 3; k++)
            if (x[k]->first.data && tn_weight_repack_size(&x[k]->first) > 0)
                n++;
    }
    if (n == 0)
        return 0;
    m->expert_ws = calloc((size_t)hp->n_layer * (size_t)hp->n_expert * 3, sizeof *m->expert_ws);
    if (!m->expert_ws)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", m->path);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const tn_layer *L = &m->layers[il];
        const tn_experts *x[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
        bool take[3];
        for (int k = 0; k < 3; k++)
            take[k] = x[k]->first.data && tn_weight_repack_size(&x[k]->first) > 0;
        for (int32_t e = 0; e < hp->n_expert; e++)
            for (int k = 0; k < 3; k++) {
                tn_weight *w = &m->expert_ws[((size_t)il * (size_t)hp->n_expert + (size_t)e) * 3 +
                                             (size_t)k];
                if (!take[k])
                    continue; /* data NULL: not handed to the backend */
                *w = x[k]->first;
                w->data = (const uint8_t *)x[k]->first.data + (size_t)e * x[k]->stride;
            }
    }
    return 0;
}

/* After prepare: each expert tensor whose experts all came back in the
 * faster layout, at one stride, reads them there. Returns how many did. */
static int adopt_expert_weights(tn_model *m) {
    const tn_hparams *hp = &m->hp;
    int adopted = 0;
    for (int32_t il = 0; m->expert_ws && il < hp->n_layer; il++) {
        tn_layer *L = &m->layers[il];
        tn_experts *x[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
        for (int k = 0; k < 3; k++) {
            const size_t NE = (size_t)hp->n_expert;
            const tn_weight *w0 = &m->expert_ws[(size_t)il * NE * 3 + (size_t)k];
            if (!w0->data || w0->layout == TN_LAYOUT_ROWS)
                continue;
            const uint8_t *d0 = w0->data;
            const size_t stride =
                NE > 1 ? (size_t)((const uint8_t *)w0[3].data - d0) : x[k]->stride;
            bool regular = true;
            for (size_t e = 0; e < NE && regular; e++) {
                const tn_weight *w = w0 + 3 * e;
                regular = w->layout == w0->layout && (const uint8_t *)w->data == d0 + e * stride;
            }
            if (!regular)
                continue; /* never seen: then they stay in the file's rows */
            x[k]->first = *w0;
            x[k]->stride = stride;
            adopted++;
        }
    }
    return adopted;
}

static int prepare(tn_model *m, tn_repack_cache_outlook *outlook, tn_error *err) {
    const int32_t nl = m->hp.n_layer;
    int rc = expert_weights(m, err);
    if (rc != TN_OK)
        return rc;
    const size_t n_exp_ws = m->expert_ws ? (size_t)nl * (size_t)m->hp.n_expert * 3 : 0;
    tn_weight **ws = malloc(((size_t)nl * 10 + 3 + n_exp_ws) * sizeof *ws);
    if (!ws)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", m->path);
    int n = 0;
    for (int32_t il = 0; il < nl; il++) {
        tn_layer *L = &m->layers[il];
        tn_weight *mats[] = {&L->wq,       &L->wk,     &L->wv,       &L->wo,     &L->ffn_gate,
                             &L->ffn_up,   &L->ffn_down, &L->pl_gate, &L->pl_proj,
                             &L->ffn_gate_inp};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            if (mats[i]->data) /* absent: shared-KV layers, no attn_v, no per-layer input */
                ws[n++] = mats[i];
    }
    /* Gemma 4's per_layer_token_embd (most of an E2B/E4B file) is not here:
     * it stays in the mapping and is read one row per token. Nor are the
     * experts of a mixture (most of a qwen3moe or 26B-A4B file) unless the
     * repack cache is on: a token reads 8 of 128, so a private copy of all
     * would cost their whole size in memory for a sixteenth of them used per
     * step (docs/MODEL.md); the cache's file holds them instead, shared and
     * droppable like the model file's pages. */
    if (m->pl_model_proj.data)
        ws[n++] = &m->pl_model_proj;
    ws[n++] = &m->output;
    if (m->output_tied)
        ws[n++] = &m->tok_embd;
    int n_file_only = 0;
    for (size_t i = 0; i < n_exp_ws; i++)
        if (m->expert_ws[i].data) {
            ws[n++] = &m->expert_ws[i];
            n_file_only++;
        }
    m->backend.gguf = m->gguf; /* the repack cache's key (engine/repack-cache.c) */
    /* What remains, now known but for the repack cache's choices (the
     * repack pass says what it reads when it begins; a cache hit maps
     * instead): the matrices to repack, the experts among them where the
     * cache takes them, and the deferred NaN/Inf passes. */
    uint64_t repack = 0, checks = 0, x16[2] = {0, 0}, rows[2] = {0, 0};
    for (int i = 0; tn_load_progress_armed() && i < n; i++)
        /* A tied LM head's second entry is the same matrix: repacked once,
         * one place in the file (repack_step_bytes, make_plan). */
        if (tn_weight_repack_size(ws[i]) > 0 && !(m->output_tied && ws[i] == &m->tok_embd)) {
            rows[i >= n - n_file_only] += (uint64_t)ws[i]->row_bytes * (uint64_t)ws[i]->rows;
            x16[i >= n - n_file_only] += tn_weight_repack_size(ws[i]);
        }
    /* The experts (last) where the cache takes them: its own answer, its
     * room for them included. */
    if (x16[1] == 0 || !tn_repack_cache_takes_experts(m->gguf, x16[0], x16[1], outlook))
        x16[1] = rows[1] = 0;
    repack = rows[0] + rows[1];
    /* A new cache file's checksum (and copy out) after the repack. */
    if (repack > 0)
        repack += tn_repack_cache_new_file_work(m->gguf, x16[0], x16[1], outlook);
    for (int32_t i = 0; tn_load_progress_armed() && i < m->n_deferred_checks; i++) {
        const tn_gguf_tensor *t = m->deferred_checks[i].t;
        const int64_t n_exp = t->n_dims >= 3 && t->ne[2] > 1 ? (int64_t)t->ne[2] : 1;
        checks += (uint64_t)tn_type_row_bytes(t->type, t->ne[0]) *
                  (uint64_t)m->deferred_checks[i].rows * (uint64_t)n_exp;
    }
    tn_load_progress_expect_repack(repack + checks, repack);
    m->backend.repack_outlook = outlook; /* this load's, for the cache's choices */
    rc = tn_backend_prepare(&m->backend, ws, n, n_file_only, true, m->path, err);
    m->backend.repack_outlook = NULL;
    const bool from_cache = m->backend.repack_cache_hit;
    if (from_cache)
        tn_load_progress_expect(0); /* the cache's file was mapped: no pass is left */
    /* Deferred NaN/Inf passes: skipped only when a cache file made by an
     * earlier load of this model file as it is now was mapped (that load ran
     * them), even if its experts then went back to rows (4 KiB pages,
     * docs/QUANT.md). A cache file just made from a damaged model goes, so
     * that the next load checks again. */
    for (int32_t i = 0; rc == TN_OK && !from_cache && i < m->n_deferred_checks; i++) {
        rc = check_finite(m, m->gguf, m->path, m->deferred_checks[i].t,
                          m->deferred_checks[i].rows, err);
        if (rc != TN_OK && rc != TN_ERR_CANCELLED && m->backend.repack_cache[0])
            unlink(m->backend.repack_cache);
    }
    const bool experts_x16 = rc == TN_OK && adopt_expert_weights(m) > 0;
    /* MXFP4 products round their activations' block scales to fp16 as
     * ggml does (since issue 23's mxfp4 session): "mx16" keeps pins made
     * before from being restored. The experts are not among ws. */
    bool mxfp4 = false;
    for (int i = 0; i < n; i++)
        mxfp4 = mxfp4 || ws[i]->type == TN_TYPE_MXFP4;
    for (int32_t il = 0; il < nl; il++) {
        const tn_layer *L = &m->layers[il];
        mxfp4 = mxfp4 || (L->gate_exps.first.data && L->gate_exps.first.type == TN_TYPE_MXFP4) ||
                (L->up_exps.first.data && L->up_exps.first.type == TN_TYPE_MXFP4) ||
                (L->down_exps.first.data && L->down_exps.first.type == TN_TYPE_MXFP4);
    }
    if (rc == TN_OK && mxfp4) {
        const size_t len = strlen(m->backend.arith);
        snprintf(m->backend.arith + len, sizeof m->backend.arith - len, "/mx16");
    }
    /* Experts in the cache's layout round as its kernels do, not as the
     * row kernels that read them from the model file: a pin made one way
     * must not be restored the other. */
    if (experts_x16) {
        const size_t len = strlen(m->backend.arith);
        snprintf(m->backend.arith + len, sizeof m->backend.arith - len, "/exp16");
    }
    free(ws);
    return rc;
}

void tn_model_free(tn_model *m) {
    if (!m)
        return;
    for (int32_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->deferred_checks);
    free(m->read_spans);
    free(m->expert_ws);
    free(m->layers);
    tn_backend_close(&m->backend);
    free(m->description);
    free(m->name);
    free(m->path);
    tn_tokenizer_free(m->tokenizer);
    tn_gguf_close(m->gguf);
    free(m);
}

/* The load's work as its progress counts it, estimated from the file
 * before any tensor is looked at (prepare says what remains exactly): one
 * NaN/Inf pass over every tensor, and one repack pass over each matrix the
 * kernel family rewrites (not Gemma 4's per-layer embeddings, nor the token
 * embedding but when the output is tied to it; a mixture's experts only
 * when the repack cache takes them: otherwise they stay in the file's rows),
 * and what a new cache file then adds (its checksum, maybe a copy out:
 * tn_repack_cache_new_file_work, the pass's own rule). With a repack cache
 * file likely to serve, most checks wait and may never come: the estimate
 * is the checks alone. */
static bool tensor_named(const tn_gguf_tensor *t, const char *name) {
    return t->name.len == strlen(name) && !memcmp(t->name.ptr, name, strlen(name));
}

static void expect_load_work(const tn_gguf *g, tn_repack_cache_outlook *outlook) {
    if (!tn_load_progress_armed())
        return;
    const bool cache_likely = outlook->likely;
    const bool tied = !tn_gguf_find_tensor(g, "output.weight");
    /* repacked: the dense matrices, the experts (their rows, their X16 bytes) */
    uint64_t bytes = 0, rows[2] = {0, 0}, x16[2] = {0, 0};
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        bytes += t->nbytes;
        const bool experts = t->n_dims == 3 || (t->n_dims == 4 && t->ne[3] == 1);
        if (cache_likely || !(t->n_dims == 2 || experts) ||
            (!tied && tensor_named(t, "token_embd.weight")) ||
            tensor_named(t, "per_layer_token_embd.weight"))
            continue;
        /* One matrix (an expert's) stands for its tensor: the same type and width. */
        const tn_weight w = {.type = t->type,
                             .layout = TN_LAYOUT_ROWS,
                             .rows = (int64_t)t->ne[1],
                             .cols = (int64_t)t->ne[0],
                             .data = t->data,
                             .row_bytes = tn_type_row_bytes(t->type, t->ne[0])};
        const size_t x16_size = w.row_bytes > 0 ? tn_weight_repack_size(&w) : 0;
        if (x16_size > 0) {
            rows[experts] += t->nbytes;
            x16[experts] += (uint64_t)x16_size * (t->nbytes / (w.row_bytes * (uint64_t)w.rows));
        }
    }
    /* The cache's own answer, 4 KiB pages and its room for them included:
     * asked apart from it, an estimate counted experts it then left in the
     * model file's rows, and the bar leapt when the repack began. */
    if (x16[1] > 0 && !tn_repack_cache_takes_experts(g, x16[0], x16[1], outlook))
        rows[1] = x16[1] = 0;
    bytes += rows[0] + rows[1];
    /* A new cache file is read back for its checksum after the repack
     * (and in 4 KiB pages its dense matrices copied out): counted from
     * here, or the bar stood still when the repack began while the work
     * caught up with the larger total (0.51 for 2.5 s of a 4.4 GB
     * mixture's first load). */
    if (!cache_likely)
        bytes += tn_repack_cache_new_file_work(g, x16[0], x16[1], outlook);
    tn_load_progress_expect(bytes);
}

static int fail_cancelled(tn_error *err, const char *path) {
    return tn_load_fail_cancelled(err, path);
}

static int load_model(const char *path, tn_model_params params, tn_model **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_model_load: out is NULL");
    *out = NULL;
    if (!path)
        return tn_fail(err, TN_ERR_INVALID, "tn_model_load: path is NULL");
    tn_model *m = calloc(1, sizeof *m);
    if (!m)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
    int rc = tn_backend_open(&m->backend, params.backend, err);
    if (rc == TN_OK)
        rc = tn_gguf_open(path, &m->gguf, err);
    if (rc != TN_OK) {
        tn_model_free(m);
        return rc;
    }
    m->path = strdup(path);
    tn_str name;
    if (tn_gguf_get_str(m->gguf, "general.name", &name) == TN_OK && name.len > 0 &&
        name.len < 4096) {
        /* The file's text, shown on terminals (tern-cli run, bench, serve),
         * in logs and in the app's labels: one line that drives no terminal
         * (a hostile name's ESC shows as "\x1b"). */
        size_t cap = 4 * (size_t)name.len + 1;
        m->name = malloc(cap);
        if (m->name)
            tn_text_one_line(name.ptr, (size_t)name.len, m->name, cap, TN_TEXT_ESCAPE_C0, NULL);
    } else {
        const char *slash = strrchr(path, '/');
        m->name = strdup(slash ? slash + 1 : path);
    }
    m->read_spans = tn_gguf_read_spans(m->gguf, &m->n_read_spans);
    if (!m->path || !m->name || !m->read_spans) {
        tn_model_free(m);
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
    }
    /* The repack cache is asked once what it holds and has room for; the
     * estimates and prepare's choices share the answers. */
    tn_repack_cache_outlook outlook;
    tn_repack_cache_outlook_init(&outlook, m->gguf);
    loader ld = {.m = m, .g = m->gguf, .path = path, .arch = "?", .err = err,
                 .defer_checks = outlook.likely};
    expect_load_work(m->gguf, &outlook);
    rc = tn_load_cancelled() ? fail_cancelled(err, path) : load_hparams(&ld, &m->hp);
    if (rc == TN_OK) {
        m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
        if (!m->layers)
            rc = tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
    }
    if (rc == TN_OK)
        rc = load_swa_pattern(&ld, m);
    if (rc == TN_OK)
        rc = load_layer_shapes(&ld, m);
    if (rc == TN_OK)
        rc = load_tensors(&ld, m);
    if (rc != TN_OK) {
        tn_model_free(m);
        return rc;
    }
    rc = tn_load_cancelled() ? fail_cancelled(err, path) : prepare(m, &outlook, err);
    if (rc == TN_OK && m->backend.weights_map && m->backend.repack_cache[0]) {
        /* The steps read the weights where prepare left them: the repack
         * cache's file joins the spans their guard covers (forward.c). */
        tn_read_span *s = realloc(m->read_spans, ((size_t)m->n_read_spans + 1) * sizeof *s);
        if (!s) {
            rc = tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
        } else {
            s[m->n_read_spans++] = (tn_read_span){.base = m->backend.weights_map,
                                                  .size = m->backend.weights_map_bytes,
                                                  .path = m->backend.repack_cache};
            m->read_spans = s;
        }
    }
    if (rc != TN_OK) {
        tn_model_free(m);
        return rc;
    }
    describe(m);
    load_text(m, params);
    if (tn_load_cancelled()) {
        tn_model_free(m);
        return fail_cancelled(err, path);
    }
    *out = m;
    return TN_OK;
}

int tn_model_load(const char *path, tn_model_params params, tn_model **out, tn_error *err) {
    tn_load_state outer;
    tn_load_cancel_arm(params.cancelled, params.cancelled_user, &outer);
    tn_load_progress_arm(params.progress, params.progress_user);
    int rc = load_model(path, params, out, err);
    if (rc == TN_OK)
        tn_load_progress_end();
    /* A pass the cancel point left reports it without the file's name, or
     * as its caller's failure: the load's error says what happened. */
    if (rc != TN_OK && tn_load_cancelled())
        rc = fail_cancelled(err, path ? path : "?");
    tn_load_cancel_disarm(&outer);
    return rc;
}

tn_arch tn_model_arch(const tn_model *m) { return m->hp.arch; }
int32_t tn_model_n_vocab(const tn_model *m) { return m->hp.n_vocab; }
int32_t tn_model_n_ctx_train(const tn_model *m) { return m->hp.n_ctx_train; }
int32_t tn_model_n_embd(const tn_model *m) { return m->hp.n_embd; }
int32_t tn_model_n_layer(const tn_model *m) { return m->hp.n_layer; }
int32_t tn_model_n_head(const tn_model *m) { return m->hp.n_head; }
int32_t tn_model_n_head_kv(const tn_model *m) { return m->hp.n_head_kv; }
int32_t tn_model_head_dim(const tn_model *m) { return m->hp.head_dim; }
uint64_t tn_model_n_params(const tn_model *m) { return m->n_params; }
uint64_t tn_model_weight_bytes(const tn_model *m) { return m->weight_bytes; }
uint64_t tn_model_repacked_bytes(const tn_model *m) { return m->backend.prepared_bytes; }
const char *tn_model_repack_source(const tn_model *m) {
    return m->backend.repack_source[0] ? m->backend.repack_source : "none";
}
const char *tn_model_repack_cache_path(const tn_model *m) { return m->backend.repack_cache; }
const char *tn_model_arithmetic(const tn_model *m) { return m->backend.arith; }
const char *tn_model_backend(const tn_model *m) { return m->backend.run.name; }
const tn_error *tn_model_backend_refusal(const tn_model *m, const char **backend, bool *asked) {
    if (backend)
        *backend = m->backend.refused_by[0] ? m->backend.refused_by : NULL;
    if (asked)
        *asked = m->backend.refused_by[0] && m->backend.refused_asked;
    return m->backend.refused_by[0] ? &m->backend.refusal : NULL;
}
const char *tn_model_name(const tn_model *m) { return m->name; }
const char *tn_model_description(const tn_model *m) {
    return m->description ? m->description : m->name;
}
bool tn_model_is_demo(const tn_model *m) { return m->demo; }
const char *tn_model_quant_name(const tn_model *m) { return m->quant; }
const char *tn_model_path(const tn_model *m) { return m->path; }
const tn_gguf *tn_model_gguf(const tn_model *m) { return m->gguf; }
/* Only layers that own KV memory count (Gemma 4's shared-KV layers own
 * none); each with its own head count and size. */
uint64_t tn_model_kv_bytes_per_token(const tn_model *m) {
    uint64_t per = 0;
    for (int32_t il = 0; il < m->hp.n_layer; il++)
        if (m->layers[il].kv_layer == il)
            per += (uint64_t)m->layers[il].n_head_kv * (uint64_t)m->layers[il].head_dim;
    return 2ULL * per * sizeof(uint16_t);
}
const tn_tokenizer *tn_model_tokenizer(const tn_model *m) { return m->tokenizer; }
const char *tn_model_tokenizer_error(const tn_model *m) {
    return m->tokenizer ? NULL : m->tokenizer_error.message;
}
const tn_error *tn_model_tokenizer_failure(const tn_model *m) {
    return m->tokenizer ? NULL : &m->tokenizer_error;
}
int tn_model_chat_kind(const tn_model *m, const char **warning) {
    if (warning)
        *warning = m->chat_warning;
    return m->chat_kind;
}

/* For the DFlash drafter (drafter-dflash.c), whose file is not a model: a
 * weight [rows][cols] of any GGUF, checked exactly as the model's own. */
int tn_gguf_get_weight(const tn_gguf *g, const char *path, const char *kind, const char *name,
                       int64_t cols, int64_t rows, bool required, tn_weight *w, bool *found,
                       tn_error *err) {
    loader ld = {.m = NULL, .g = g, .path = path, .arch = kind, .err = err};
    return get_matrix(&ld, name, cols, rows, required, w, found);
}
