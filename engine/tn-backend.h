/* The compute-backend seam (docs/BACKENDS.md).
 *
 * A backend is a table of operations: prepare the weights once at load,
 * matrix products, attention over the KV cache (with the cache's layout),
 * parallel-for, and the name of its arithmetic. Any entry may be NULL: that
 * operation then runs on the CPU backend (engine/backend-cpu.c, which maps
 * every entry onto engine/cpu/). A model owns one opened backend; its
 * contexts call through the resolved table, so a NULL entry costs nothing
 * per call, and the hot path pays one indirect call per matrix product,
 * per attention tile and per KV write of a head, never per element.
 *
 * Private to the engine: callers see only the backend's name, the reason a
 * requested backend was refused, and the arithmetic string (tern.h).
 */
#ifndef TN_BACKEND_H
#define TN_BACKEND_H

#include "cpu/tn-cpu.h"
#include "tern.h"

typedef struct tn_backend tn_backend;

/* Threads for one context are always CPU threads (the row operations of
 * forward.c run on them whatever the backend): `pool` below is that
 * context's tn_cpu. */
typedef struct tn_backend_ops {
    const char *name; /* "cpu", "xrt": what params.backend asks for */
    /* Tried only when asked for by name, never by "auto": a backend that
     * computes nothing yet (XRT while no kernels ship) would only add a
     * device probe to every load. */
    bool by_name_only;

    /* Opens the backend for a model, or refuses with a tn_fail message a
     * user can act on ("no NPU found", "no kernels for this NPU"); the
     * model then runs on the CPU and keeps the message (a refusing open
     * frees what it made: close is not called). be->state is the
     * backend's own. NULL: nothing to open.
     *
     * Operations that touch the same data must come from one backend:
     * prepare_weights with matmul and weight_row (the weight layout), and
     * kv_store with kv_copy and attention (the cache layout). A backend
     * that implements matmul or attention must name its arithmetic
     * (arith_name); tn_backend_open refuses it otherwise. */
    int (*open)(tn_backend *be, tn_error *err);
    void (*close)(tn_backend *be);

    /* Once at load, every matrix of the model: may change a weight's
     * layout or data (one layout for all, as the arithmetic string must
     * name it). file_mapped: the originals are read-only file pages the
     * backend may drop. *bytes gets what the backend holds in memory
     * besides the file. path names the model in messages. The last
     * n_file_only of ws (a mixture's experts, when the repack cache is
     * on) may change layout only into a shared file, never into private
     * memory: most of the model, they would not fit twice. */
    int (*prepare_weights)(tn_backend *be, tn_weight *const *ws, int n, int n_file_only,
                           bool file_mapped, const char *path, uint64_t *bytes, tn_error *err);
    /* Writes the arithmetic of this backend's forward passes (pins are
     * keyed by it; two backends that round differently must not share a
     * string). Called once, after prepare_weights. */
    void (*arith_name)(const tn_backend *be, char *buf, size_t size);

    /* Runs fn(arg, ith, nth) on every thread of the pool. */
    void (*parallel_for)(const tn_backend *be, tn_cpu *pool, tn_task_fn fn, void *arg);
    /* y[b][rows] = W x[b][cols] for b < n, batch-invariant (tn-cpu.h).
     * Weights are as prepare_weights left them. The experts of a mixture
     * (tn_experts, tn-model.h) too: prepare_weights sees them only as
     * file-only matrices when the repack cache is on; otherwise they come
     * in the file's row layout (TN_LAYOUT_ROWS), straight from the mapping. */
    int (*matmul)(const tn_backend *be, tn_cpu *pool, const tn_weight *w, const float *x,
                  int64_t n, float *y);
    /* Several independent products in one hand-off to the threads
     * (tn_matmul_group): each item's result exactly as matmul gives it. A
     * backend with its own matmul and no matmul_group gets one that calls
     * its matmul per item (tn_backend_open). */
    int (*matmul_group)(const tn_backend *be, tn_cpu *pool, const tn_matmul_item *items,
                        int n);
    /* Row r of a weight as f32 (embedding lookups), in the prepared layout. */
    int (*weight_row)(const tn_backend *be, const tn_weight *w, int64_t r, float *out);

    /* The KV cache and attention go together: kv_store writes position pos
     * of one KV head (head_dim keys and values, f32 in) into that head's
     * rows, kv_copy moves positions [0, n) of one head between the cache
     * and a plain [n][head_dim] bf16 array (snapshots, pins), and attention
     * reads what kv_store wrote. A backend with its own cache layout
     * provides all three; the CPU's is tn_attn_k_index / tn_attn_v_index
     * (cpu/tn-cpu.h). */
    void (*kv_store)(const tn_backend *be, uint16_t *k_rows, uint16_t *v_rows, int64_t pos,
                     const float *k, const float *v, int32_t head_dim);
    void (*kv_copy)(const tn_backend *be, uint16_t *rows, bool values, int32_t n,
                    int32_t head_dim, uint16_t *plain, bool to_plain);
    /* One tile of queries against one KV head (tn_attn_tile); scratch holds
     * tn_attention_scratch_floats(head_dim) floats of the calling thread. */
    void (*attention)(const tn_backend *be, const tn_attn_tile *t, float *scratch);
} tn_backend_ops;

/* An opened backend, owned by its model. */
struct tn_backend {
    const tn_backend_ops *ops; /* the backend's own table (entries may be NULL) */
    tn_backend_ops run;        /* what callers use: ops, with the CPU's entry in every gap */
    void *state;               /* the backend's (the CPU backend uses cpu_state) */
    void *cpu_state;           /* the CPU backend's: it is always open, for the gaps */
    tn_isa isa;                /* CPU kernel family of the CPU operations, fixed at open */
    uint64_t prepared_bytes;   /* prepare_weights' *bytes */
    /* The model's file, set before prepare (NULL: weights not from a file):
     * the CPU backend keys its repack cache by it. */
    const tn_gguf *gguf;
    /* The load's answers from the repack cache (set around prepare; NULL:
     * the cache asks afresh). */
    struct tn_repack_cache_outlook *repack_outlook;
    char repack_source[12];    /* tn_model_repack_source's answer */
    char repack_cache[512];    /* tn_model_repack_cache_path's */
    bool repack_cache_hit;     /* a cache file made by an earlier load was mapped */
    /* The repack cache's file the weights are read from (repack_cache
     * names it), mapped: the decode steps' reads of it are guarded as the
     * model file's are (forward.c). NULL: none. */
    const void *weights_map;
    size_t weights_map_bytes;
    char arith[64];            /* arith_name's (and model.c's "/mx16", "/exp16") */
    /* When the requested backend (or the first one "auto" tried) refused
     * to open: its name and its reason, kept whole so that a caller can
     * translate it ("xrt: REASON; using cpu"). refused_by[0] == 0: none. */
    char refused_by[16];
    tn_error refusal;
    bool refused_asked; /* it was asked for by name (not only tried by "auto") */
};

/* The CPU backend: every entry set. */
extern const tn_backend_ops tn_backend_cpu_ops;
/* The AMD NPU through XRT (engine/backend-xrt.c): refuses today, with the
 * probe's reason (no kernels ship yet). */
extern const tn_backend_ops tn_backend_xrt_ops;

/* Opens the backend `name` asks for: NULL, "" or "auto" = the first
 * registered backend other than the CPU that opens, else the CPU; "cpu";
 * or any registered name. A backend that refuses leaves the CPU in its
 * place and its reason in be->refusal (never an error). TN_ERR_INVALID for a
 * name no backend has (the message lists the names). */
int tn_backend_open(tn_backend *be, const char *name, tn_error *err);
/* tn_backend_open over another table than the build's (tests: backends
 * that refuse, or implement some operations only). */
int tn_backend_open_from(tn_backend *be, const char *name, const tn_backend_ops *const *table,
                         int n, tn_error *err);
/* Prepares the weights and names the arithmetic: call once after open. */
int tn_backend_prepare(tn_backend *be, tn_weight *const *ws, int n, int n_file_only,
                       bool file_mapped, const char *path, tn_error *err);
void tn_backend_close(tn_backend *be);

/* CPU threads for one context of the backend's model, set to its kernel
 * family. NULL when the threads cannot be started. */
tn_cpu *tn_backend_pool_new(const tn_backend *be, int n_threads);

#endif
