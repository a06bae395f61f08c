/* What the DFlash and MTP drafters (engine/drafter-dflash.c,
 * engine/drafter-mtp.c) share beyond their arithmetic (tn-drafter-math.h):
 * their file, the vectors they copy out of it, their thread pool and guard,
 * the reading of their metadata and tensors, and the wrapping of the result.
 * One copy, so that both drafters load, report and free alike
 * (docs/DFLASH.md, docs/MTP.md). */
#ifndef TN_DRAFTER_COMMON_H
#define TN_DRAFTER_COMMON_H

#include "tn-internal.h"
#include "tn-model.h"
#include "tn-spec.h"

typedef struct tn_draft_base {
    tn_gguf *gguf;
    char *path;
    const char *arch; /* its metadata keys' prefix: "dflash", "gemma4-assistant" */
    const char *kind; /* what messages about its tensors call it */
    float **owned;    /* vectors copied out of the file, freed with it */
    int32_t n_owned;
    tn_cpu *cpu;
    /* Every pass over the weights runs under this (tn_drafter_guard_run):
     * the draft's file, or the target's, cut short is TN_ERR_IO. */
    tn_drafter_guard guard;
} tn_draft_base;

/* Opens path into b (zeroed by the caller) and runs load(arg) on it, with
 * tn_load_cancelled asked before and after (docs/MODEL.md, "Cancelling a
 * load"), then starts the thread pool. On failure b holds what was made:
 * tn_draft_close frees it. */
int tn_draft_open(tn_draft_base *b, const char *path, const char *arch, const char *kind,
                  int (*load)(void *arg), void *arg, int32_t n_threads, tn_error *err);
void tn_draft_close(tn_draft_base *b);

/* The integer key "<arch>.<suffix>" in [lo, hi]; def when it is missing and
 * not required. */
int tn_draft_key_int(const tn_draft_base *b, const char *suffix, bool required, int64_t def,
                     int64_t lo, int64_t hi, int32_t *out, tn_error *err);
/* The number "<arch>.<suffix>" in [lo, hi] through the engine's one range
 * check (tn_gguf_read_float_or): def when it is missing or written as def. */
int tn_draft_key_float(const tn_draft_base *b, const char *suffix, double def, double lo, double hi,
                       float *out, tn_error *err);
/* A required matrix of rows x cols (tn_gguf_get_weight: shape, type, NaN/Inf). */
int tn_draft_matrix(const tn_draft_base *b, const char *name, int64_t cols, int64_t rows,
                    tn_weight *w, tn_error *err);
/* A required vector of n values, copied to f32 (owned by b) and finite. */
int tn_draft_vector(tn_draft_base *b, const char *name, int64_t n, const float **out,
                    tn_error *err);
/* Layer il's tensor "blk.<il>.<part>.weight", as both formats name them:
 * whether the file has it, the matrix (as tn_draft_matrix), the vector (as
 * tn_draft_vector; when not required, an absent one is *out = NULL). */
bool tn_draft_blk_has(const tn_draft_base *b, int32_t il, const char *part);
int tn_draft_blk_matrix(const tn_draft_base *b, int32_t il, const char *part, int64_t cols,
                        int64_t rows, tn_weight *w, tn_error *err);
int tn_draft_blk_vector(tn_draft_base *b, int32_t il, const char *part, int64_t n, bool required,
                        const float **out, tn_error *err);
/* n floats owned by b; NULL once "out of memory" is in err. */
float *tn_draft_alloc(tn_draft_base *b, int64_t n, tn_error *err);
/* rope_freqs.weight's n divisors must all be positive. */
int tn_draft_check_freqs(const tn_draft_base *b, const float *freqs, int32_t n, tn_error *err);

/* tn_drafter_wrap, then the block size and the target hidden states it
 * reads; on failure nothing is left (self is freed through ops.free). */
int tn_draft_wrap(const char *name, const tn_drafter_ops *ops, const tn_drafter_hooks *hooks,
                  void *self, int32_t draft_max, int32_t block, const int32_t *ids, int32_t n_ids,
                  const tn_model *target, tn_drafter **out, tn_error *err);

/* How many leading tokens a[0, na) and b[0, nb) share: what a drafter's
 * mirror of the history still holds. */
static inline int32_t tn_draft_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t i = 0, m = na < nb ? na : nb;
    while (i < m && a[i] == b[i])
        i++;
    return i;
}

#endif
