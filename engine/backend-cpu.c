/* The CPU backend: the seam's operations (tn-backend.h) mapped one to one
 * onto engine/cpu/, which does not know about the seam. Every entry is set,
 * so this table also fills the gaps of any other backend's: its state is
 * be->cpu_state (opened for every model), never be->state. */
#include "tn-backend.h"
#include "tn-internal.h"
#include "tn-repack-cache.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct cpu_state {
    void *storage;  /* tn_weights_repack's one allocation, or NULL */
    void *map;      /* or the repack cache's file, mapped (tn-repack-cache.h) */
    size_t map_bytes;
    bool x16;       /* some matrix is in TN_LAYOUT_X16 */
    bool x16_kquant; /* ... and some of those are K-quants */
    bool x16_kquant2; /* ... Q2_K, Q3_K or IQ4_XS among them */
    bool x16_iq4nl;   /* ... IQ4_NL among them (rows before session 11) */
} cpu_state;

static int cpu_open(tn_backend *be, tn_error *err) {
    cpu_state *s = calloc(1, sizeof *s);
    if (!s)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    be->cpu_state = s;
    return TN_OK;
}

static void cpu_close(tn_backend *be) {
    cpu_state *s = be->cpu_state;
    if (s) {
        free(s->storage);
        tn_repack_cache_unmap(s->map, s->map_bytes);
    }
    free(s);
    be->cpu_state = NULL;
}

/* The faster layout of the kernel family (tn_weights_repack), all or
 * nothing; TERN_REPACK=0 keeps the file's rows. Through the repack cache
 * when the weights come from a file (be->gguf) and the cache is on: a
 * problem with the cache only costs the sharing, with a one-line notice. */
static int cpu_prepare_weights(tn_backend *be, tn_weight *const *ws, int n, int n_file_only,
                               bool file_mapped, const char *path, uint64_t *bytes,
                               tn_error *err) {
    cpu_state *s = be->cpu_state;
    size_t got = 0;
    int rc;
    snprintf(be->repack_source, sizeof be->repack_source, "none");
    be->repack_cache[0] = '\0';
    be->repack_cache_hit = false;
    tn_error fault = {0};
    if (file_mapped && be->gguf) {
        tn_repack_cache_result r;
        rc = tn_repack_cache_prepare(ws, n, n_file_only, be->gguf, NULL, be->repack_outlook, &r);
        fault = r.fault;
        s->storage = r.storage;
        s->map = r.map;
        s->map_bytes = r.map_bytes;
        be->weights_map = r.in_file ? r.map : NULL;
        be->weights_map_bytes = r.in_file ? r.map_bytes : 0;
        got = r.bytes;
        if (rc == TN_OK && r.outcome == TN_REPACK_CACHE_PRIVATE && r.why[0])
            fprintf(stderr, "tern: repack cache: %s; the weights are repacked in this "
                            "process's memory instead\n",
                    r.why);
        if (rc == TN_OK && r.note[0])
            fprintf(stderr, "tern: repack cache: %s\n", r.note);
        if (r.outcome != TN_REPACK_CACHE_OFF)
            snprintf(be->repack_source, sizeof be->repack_source, "%s",
                     r.outcome == TN_REPACK_CACHE_HIT       ? "cache"
                     : r.outcome == TN_REPACK_CACHE_WRITTEN ? "cache-new"
                                                            : "memory");
        /* Also when PRIVATE: a mixture's experts may stay in the file while
         * the dense matrices were copied out (4 KiB pages). */
        if (r.in_file)
            snprintf(be->repack_cache, sizeof be->repack_cache, "%s", r.path);
        be->repack_cache_hit = rc == TN_OK && r.hit;
    } else {
        rc = tn_weights_repack(ws, n - n_file_only, file_mapped, &s->storage, &got);
        if (rc == TN_OK && s->storage)
            snprintf(be->repack_source, sizeof be->repack_source, "memory");
    }
    if (rc != TN_OK && (fault.code == TN_ERR_IO || fault.code == TN_ERR_CANCELLED)) {
        if (err) /* the model file shrank under the repack, or the load was cancelled */
            *err = fault;
        return fault.code;
    }
    if (rc != TN_OK)
        return tn_fail(err, rc, "%s: out of memory for the repacked weights", path);
    *bytes = got;
    s->x16 = s->storage != NULL || s->map != NULL;
    /* K-quants in X16 round differently from their row kernels (issue 21):
     * "x16k" keeps pins made before them from being restored. */
    for (int i = 0; i < n; i++)
        s->x16_kquant = s->x16_kquant ||
                        (ws[i]->layout == TN_LAYOUT_X16 &&
                         (ws[i]->type == TN_TYPE_Q4_K || ws[i]->type == TN_TYPE_Q5_K ||
                          ws[i]->type == TN_TYPE_Q6_K));
    /* So do Q2_K, Q3_K and IQ4_XS (X16 since issue 21's kquant session): a
     * file of them said "x16k" before (its Q6_K output) with row kernels. */
    for (int i = 0; i < n; i++)
        s->x16_kquant2 = s->x16_kquant2 ||
                         (ws[i]->layout == TN_LAYOUT_X16 &&
                          (ws[i]->type == TN_TYPE_Q2_K || ws[i]->type == TN_TYPE_Q3_K ||
                           ws[i]->type == TN_TYPE_IQ4_XS));
    for (int i = 0; i < n; i++)
        s->x16_iq4nl = s->x16_iq4nl ||
                       (ws[i]->layout == TN_LAYOUT_X16 && ws[i]->type == TN_TYPE_IQ4_NL);
    return TN_OK;
}

/* Family, layout, "kv-bf16" (the KV cache's type: pins made with f32 keys
 * and values must not be restored into it), the attention's arithmetic, the
 * gated feed-forward's SiLU and GELU and the logit softcap's tanh (forward.c
 * calls tn_silu_mul, tn_gelu_mul and tn_softcap whatever the backend: their
 * name rides here). */
static void cpu_arith_name(const tn_backend *be, char *buf, size_t size) {
    const cpu_state *s = be->cpu_state;
    snprintf(buf, size, "%s%s/%s%s/kv-bf16/%s/%s", tn_isa_name(be->isa),
             be->isa == TN_ISA_AVX512 && tn_isa_has_avx512_bf16() ? "+bf16" : "",
             s && s->x16 ? (s->x16_kquant2 ? "x16k2" : s->x16_kquant ? "x16k" : "x16") : "rows",
             s && s->x16_iq4nl ? "+nl" : "", TN_ATTN_ARITHMETIC, TN_ACT_ARITHMETIC);
}

static void cpu_parallel_for(const tn_backend *be, tn_cpu *pool, tn_task_fn fn, void *arg) {
    (void)be;
    tn_cpu_parallel(pool, fn, arg);
}

static int cpu_matmul(const tn_backend *be, tn_cpu *pool, const tn_weight *w, const float *x,
                      int64_t n, float *y) {
    (void)be;
    return tn_matmul(pool, w, x, n, y);
}

static int cpu_matmul_group(const tn_backend *be, tn_cpu *pool, const tn_matmul_item *items,
                            int n) {
    (void)be;
    return tn_matmul_group(pool, items, n);
}

static int cpu_weight_row(const tn_backend *be, const tn_weight *w, int64_t r, float *out) {
    (void)be;
    return tn_weight_row_f32(w, r, out);
}

static void cpu_kv_store(const tn_backend *be, uint16_t *k_rows, uint16_t *v_rows, int64_t pos,
                         const float *k, const float *v, int32_t head_dim) {
    (void)be;
    for (int32_t d = 0; d < head_dim; d++) {
        k_rows[tn_attn_k_index(pos, d, head_dim)] = tn_bf16_from_f32(k[d]);
        v_rows[tn_attn_v_index(pos, d, head_dim)] = tn_bf16_from_f32(v[d]);
    }
}

static void cpu_kv_copy(const tn_backend *be, uint16_t *rows, bool values, int32_t n,
                        int32_t head_dim, uint16_t *plain, bool to_plain) {
    (void)be;
    for (int32_t j = 0; j < n; j++)
        for (int32_t d = 0; d < head_dim; d++) {
            uint16_t *e = rows + (values ? tn_attn_v_index(j, d, head_dim)
                                         : tn_attn_k_index(j, d, head_dim));
            if (to_plain)
                plain[(size_t)j * head_dim + d] = *e;
            else
                *e = plain[(size_t)j * head_dim + d];
        }
}

static void cpu_attention(const tn_backend *be, const tn_attn_tile *t, float *scratch) {
    tn_attention_tile(be->isa, t, scratch);
}

const tn_backend_ops tn_backend_cpu_ops = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .prepare_weights = cpu_prepare_weights,
    .arith_name = cpu_arith_name,
    .parallel_for = cpu_parallel_for,
    .matmul = cpu_matmul,
    .matmul_group = cpu_matmul_group,
    .weight_row = cpu_weight_row,
    .kv_store = cpu_kv_store,
    .kv_copy = cpu_kv_copy,
    .attention = cpu_attention,
};

bool tn_type_matrix_supported(uint32_t type) {
    return tn_type_supported(type) && tn_matmul_has_kernel(TN_ISA_SCALAR, type);
}

const char *tn_cpu_kernels(void) { return tn_isa_name(tn_isa_best()); }
