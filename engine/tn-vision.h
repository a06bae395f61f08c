/* Internal to the vision encoders (engine/vision.c, engine/vision-gemma4.c). */
#ifndef TN_VISION_H
#define TN_VISION_H

#include "tn-internal.h"
#include "cpu/tn-cpu.h"

/* Non-causal multi-head attention over P rows: q, k, v, out are [P][E] with
 * n_head heads of E / n_head values side by side; scores are scaled by
 * `scale` before the softmax. TERN_VISION_ATTENTION=scalar selects the
 * scalar reference loop instead of the matrix kernels. */
int tn_vision_attend(tn_cpu *cpu, const float *q, const float *k, const float *v, float *out,
                     int64_t P, int64_t E, int64_t n_head, float scale, tn_error *err);

/* A projector's tensors, for both encoders (gemma4: which model the
 * messages name). A vector: n values of any type tn_dequantize_row reads,
 * all finite, in a new array; an absent one sets *out = NULL and is an
 * error only when required. A matrix: `rows` output features of a type with
 * a matrix kernel, all dimensions but the last forming the reduction (the
 * 4-D patch kernel [patch, patch, 3, E] included); *w points into the
 * file's mapping. The vector's read of the mapping is guarded
 * (tn_guarded_read, pass "vision"): a file cut short meanwhile is TN_ERR_IO. */
int tn_vision_load_vec(const tn_gguf *g, bool gemma4, const char *name, int64_t n,
                       bool required, float **out, tn_error *err);
int tn_vision_load_mat(const tn_gguf *g, bool gemma4, const char *name, int64_t rows,
                       int64_t cols, tn_weight *w, tn_error *err);
/* n bytes of g's mapping at src into dst under the same guard. */
int tn_vision_read_copy(const tn_gguf *g, void *dst, const void *src, size_t n, tn_error *err);
/* What both encoders read of a projector's metadata: a whole number key in
 * [lo, hi] (required); clip.vision.attention.layer_norm_epsilon in (0, 1);
 * clip.vision.image_mean and image_std, three floats each, std positive.
 * Gemma 4 requires the two arrays and reads the first three values of a
 * longer one; Gemma 3 takes 0.5 for an absent one and exactly three. */
int tn_vision_key_int(const tn_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out,
                      tn_error *err);
int tn_vision_key_eps(const tn_gguf *g, float *eps, tn_error *err);
int tn_vision_key_stats(const tn_gguf *g, bool gemma4, float mean[3], float std[3], tn_error *err);

/* The Gemma 4 vision projector (llama.cpp projector type "gemma4v"). */
typedef struct tn_vision_g4 tn_vision_g4;

/* Reads the projector from an open file (borrowed: it must outlive the
 * result) and fills *info. */
int tn_vg4_load(const tn_gguf *g, tn_vision_info *info, tn_vision_g4 **out, tn_error *err);
void tn_vg4_free(tn_vision_g4 *v);
/* The budgets Gemma 4 was trained with (HF Gemma4ImageProcessor's
 * max_soft_tokens choices); budget <= 0 selects the last one. */
int tn_vg4_budgets(const int **list);
/* The pixel size an image of w x h is resized to under a budget, and its
 * token count. TN_ERR_INVALID for an unsupported budget or an image the
 * budget cannot hold. */
int tn_vg4_plan(const tn_vision_g4 *v, int budget, int w, int h, int *tw, int *th,
                int *n_tokens, tn_error *err);
/* An encoding runs as one guarded step over the projector's mapping
 * (tn_guarded_step, tn_vision_encode): a file cut short under it jumps out
 * of the encoder, so the encoder's buffers are the caller's, allocated
 * through this list before any read of the mapping and freed by the
 * caller after the step, fault or not. */
#define TN_VISION_BUFS 16
typedef struct tn_vision_bufs {
    void *p[TN_VISION_BUFS];
    int n;
} tn_vision_bufs;
/* malloc(bytes), kept in b; NULL when out of memory (or of slots). */
void *tn_vision_alloc(tn_vision_bufs *b, size_t bytes);
int tn_vg4_encode(const tn_vision_g4 *v, const float *rgb, int w, int h, int budget, float *out,
                  int *n_tokens, tn_cpu *cpu, tn_vision_bufs *bufs, tn_error *err);

#endif
