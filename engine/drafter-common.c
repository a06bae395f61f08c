/* The loading, reporting and freeing the DFlash and MTP drafters share
 * (tn-drafter-common.h). */
#include "tn-drafter-common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tn_draft_open(tn_draft_base *b, const char *path, const char *arch, const char *kind,
                  int (*load)(void *arg), void *arg, int32_t n_threads, tn_error *err) {
    b->arch = arch;
    b->kind = kind;
    b->path = strdup(path);
    int rc =
        b->path ? tn_gguf_open(path, &b->gguf, err) : tn_fail(err, TN_ERR_NOMEM, "out of memory");
    if (rc == TN_OK)
        rc = tn_load_cancelled() ? tn_load_fail_cancelled(err, path) : load(arg);
    if (rc == TN_OK && tn_load_cancelled())
        rc = tn_load_fail_cancelled(err, path);
    if (rc == TN_OK && !(b->cpu = tn_cpu_new(n_threads)))
        rc = tn_fail(err, TN_ERR_NOMEM, "cannot start the CPU thread pool");
    return rc;
}

void tn_draft_close(tn_draft_base *b) {
    for (int32_t i = 0; i < b->n_owned; i++)
        free(b->owned[i]);
    free(b->owned);
    tn_cpu_free(b->cpu);
    tn_drafter_guard_free(&b->guard);
    tn_gguf_close(b->gguf);
    free(b->path);
}

int tn_draft_key_int(const tn_draft_base *b, const char *suffix, bool required, int64_t def,
                     int64_t lo, int64_t hi, int32_t *out, tn_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", b->arch, suffix);
    int64_t v;
    int rc = tn_gguf_read_int(b->gguf, key, &v, err);
    if (rc == TN_ERR_NOT_FOUND && !required)
        v = def;
    else if (rc == TN_ERR_NOT_FOUND)
        return tn_fail(err, TN_ERR_FORMAT, "%s: metadata key '%s' is missing", b->path, key);
    else if (rc != TN_OK)
        return rc;
    if (v < lo || v > hi)
        return tn_fail(err, TN_ERR_FORMAT, "%s: metadata key '%s' is %lld, outside [%lld, %lld]",
                       b->path, key, (long long)v, (long long)lo, (long long)hi);
    *out = (int32_t)v;
    return TN_OK;
}

int tn_draft_key_float(const tn_draft_base *b, const char *suffix, double def, double lo, double hi,
                       float *out, tn_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", b->arch, suffix);
    double v;
    int rc = tn_gguf_read_float_or(b->gguf, key, def, lo, hi, &v, err);
    if (rc != TN_OK && rc != TN_ERR_NOT_FOUND)
        return rc;
    *out = (float)v;
    return TN_OK;
}

int tn_draft_matrix(const tn_draft_base *b, const char *name, int64_t cols, int64_t rows,
                    tn_weight *w, tn_error *err) {
    return tn_gguf_get_weight(b->gguf, b->path, b->kind, name, cols, rows, true, w, NULL, err);
}

float *tn_draft_alloc(tn_draft_base *b, int64_t n, tn_error *err) {
    float **o = realloc(b->owned, (size_t)(b->n_owned + 1) * sizeof *o);
    float *v = malloc((size_t)n * sizeof *v);
    if (o)
        b->owned = o;
    if (!o || !v) {
        free(v);
        tn_fail(err, TN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    b->owned[b->n_owned++] = v;
    return v;
}

int tn_draft_vector(tn_draft_base *b, const char *name, int64_t n, const float **out,
                    tn_error *err) {
    tn_weight w;
    int rc = tn_gguf_get_weight(b->gguf, b->path, b->kind, name, n, 1, true, &w, NULL, err);
    if (rc != TN_OK)
        return rc;
    float *v = tn_draft_alloc(b, n, err);
    if (!v)
        return TN_ERR_NOMEM;
    /* Under the guard, as the scan in tn_gguf_get_weight: the file may
     * have shrunk since. */
    rc = tn_gguf_weight_to_f32(b->gguf, b->path, name, &w, v, err);
    if (rc != TN_OK)
        return rc;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return tn_fail(err, TN_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value", b->path,
                           name);
    *out = v;
    return TN_OK;
}

static void blk_name(char *name, size_t size, int32_t il, const char *part) {
    snprintf(name, size, "blk.%d.%s.weight", il, part);
}

bool tn_draft_blk_has(const tn_draft_base *b, int32_t il, const char *part) {
    char name[96];
    blk_name(name, sizeof name, il, part);
    return tn_gguf_find_tensor(b->gguf, name) != NULL;
}

int tn_draft_blk_matrix(const tn_draft_base *b, int32_t il, const char *part, int64_t cols,
                        int64_t rows, tn_weight *w, tn_error *err) {
    char name[96];
    blk_name(name, sizeof name, il, part);
    return tn_draft_matrix(b, name, cols, rows, w, err);
}

int tn_draft_blk_vector(tn_draft_base *b, int32_t il, const char *part, int64_t n, bool required,
                        const float **out, tn_error *err) {
    char name[96];
    blk_name(name, sizeof name, il, part);
    *out = NULL;
    if (!required && !tn_gguf_find_tensor(b->gguf, name))
        return TN_OK;
    return tn_draft_vector(b, name, n, out, err);
}

int tn_draft_check_freqs(const tn_draft_base *b, const float *freqs, int32_t n, tn_error *err) {
    for (int32_t i = 0; freqs && i < n; i++)
        if (!(freqs[i] > 0))
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: rope_freqs.weight holds a divisor that is not positive", b->path);
    return TN_OK;
}

int tn_draft_wrap(const char *name, const tn_drafter_ops *ops, const tn_drafter_hooks *hooks,
                  void *self, int32_t draft_max, int32_t block, const int32_t *ids, int32_t n_ids,
                  const tn_model *target, tn_drafter **out, tn_error *err) {
    int rc = tn_drafter_wrap(name, ops, hooks, self, draft_max, target, out, err);
    if (rc != TN_OK)
        return rc;
    (*out)->block_size = block;
    rc = tn_drafter_set_hidden_ids(*out, ids, n_ids, err);
    if (rc != TN_OK) {
        tn_drafter_free(*out);
        *out = NULL;
    }
    return rc;
}
