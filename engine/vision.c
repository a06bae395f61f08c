/* The Gemma 3 vision encoder: a SigLIP ViT plus the Gemma 3 multimodal
 * projector, read from the ecosystem's "mmproj" GGUF layout (docs/VISION.md).
 *
 *   pixels -> patches (conv as a matrix product) + position embeddings
 *   -> L pre-norm blocks (LayerNorm, MHA with biases, LayerNorm, GELU-tanh MLP)
 *   -> post LayerNorm -> 4x4 average pool -> RMSNorm * soft_emb_norm
 *   -> mm.input_projection into the text model's width.
 *
 * A smaller token budget shrinks the patch grid (the image is resampled to
 * fewer pixels and the position embeddings bilinearly interpolated), so a
 * cheaper image also costs less to encode. */
#include "tn-vision.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct vision_layer {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;          /* [E] */
    tn_weight q, k, v, o;                          /* [E] -> [E] */
    float *q_b, *k_b, *v_b, *o_b;                  /* [E] */
    tn_weight up, down;                            /* [E] -> [F], [F] -> [E] */
    float *up_b, *down_b;                          /* [F], [E] */
} vision_layer;

struct tn_vision {
    tn_gguf *g;
    tn_vision_info info;
    int pool;          /* patches per token side (4 for Gemma 3) */
    int n_side;        /* native patches per side */
    tn_weight patch;   /* [E] rows of [3][patch][patch] */
    float *patch_b;    /* [E] */
    float *pos;        /* [n_side * n_side][E] */
    vision_layer *layers;
    float *post_w, *post_b; /* [E] */
    float *soft_norm;       /* [E], used as stored (the converter already added 1) */
    float *proj_t;          /* [n_embd_text][E]: the file's [E][n_embd_text], transposed */
    tn_weight proj;
    tn_vision_g4 *g4; /* a Gemma 4 projector: everything else above is unused */
    /* The file's mappings, for the encoding's guard, and 1 + the one a
     * guarded encoding found cut short (0: none): every later encoding
     * then fails at once. */
    tn_read_span *spans;
    int n_spans;
    atomic_int read_fault;
};

static const char *vpath(const tn_vision *v) { return tn_gguf_path(v->g); }

/* Whole sentences, one for each model, for the translators. */
static int missing_tensor(const tn_gguf *g, bool gemma4, const char *name, tn_error *err) {
    if (gemma4)
        return tn_fail(err, TN_ERR_FORMAT, "%s: missing tensor '%s' (not a complete Gemma 4 "
                       "vision projector)", tn_gguf_path(g), name);
    return tn_fail(err, TN_ERR_FORMAT, "%s: missing tensor '%s' (not a complete Gemma 3 "
                   "vision projector)", tn_gguf_path(g), name);
}

typedef struct copy_read {
    void *dst;
    const void *src;
    size_t n;
} copy_read;

/* Each read of the projector's file at load is a cancel point (a load
 * with a question: tn_vision_load_with). */
static void copy_read_run(void *arg) {
    const copy_read *cr = arg;
    tn_load_poll();
    memcpy(cr->dst, cr->src, cr->n);
}

typedef struct vec_read {
    const tn_gguf_tensor *t;
    float *out;
    int64_t n;
    int rc;
} vec_read;

static void vec_read_run(void *arg) {
    vec_read *vr = arg;
    tn_load_poll();
    vr->rc = tn_dequantize_row(vr->t->type, vr->t->data, vr->out, vr->n);
}

int tn_vision_read_copy(const tn_gguf *g, void *dst, const void *src, size_t n, tn_error *err) {
    copy_read cr = {.dst = dst, .src = src, .n = n};
    return tn_gguf_guarded_read(g, "vision", copy_read_run, &cr, err);
}

int tn_vision_load_vec(const tn_gguf *g, bool gemma4, const char *name, int64_t n,
                       bool required, float **out, tn_error *err) {
    *out = NULL;
    const tn_gguf_tensor *t = tn_gguf_find_tensor(g, name);
    if (!t)
        return required ? missing_tensor(g, gemma4, name, err) : TN_OK;
    uint64_t count = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        count *= t->ne[d];
    if ((int64_t)count != n || tn_type_row_bytes(t->type, count) != t->nbytes)
        return tn_fail(err, TN_ERR_FORMAT, "%s: tensor '%s' has %llu values of type %s, expected "
                       "%lld", tn_gguf_path(g), name, (unsigned long long)count,
                       tn_type_name(t->type) ? tn_type_name(t->type) : "?", (long long)n);
    float *buf = malloc((size_t)n * sizeof *buf);
    if (!buf)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", tn_gguf_path(g));
    /* The one read of the vector from the mapping: guarded, so that a
     * projector file cut short meanwhile is a load error, not a SIGBUS. */
    vec_read vr = {.t = t, .out = buf, .n = n};
    int rc = tn_gguf_guarded_read(g, "vision", vec_read_run, &vr, err);
    if (rc != TN_OK) {
        free(buf);
        return rc;
    }
    if (vr.rc != TN_OK) {
        free(buf);
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: tensor '%s' has a type Tern cannot read",
                       tn_gguf_path(g), name);
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(buf[i])) {
            free(buf);
            return tn_fail(err, TN_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value",
                           tn_gguf_path(g), name);
        }
    *out = buf;
    return TN_OK;
}

int tn_vision_load_mat(const tn_gguf *g, bool gemma4, const char *name, int64_t rows,
                       int64_t cols, tn_weight *w, tn_error *err) {
    const tn_gguf_tensor *t = tn_gguf_find_tensor(g, name);
    if (!t)
        return missing_tensor(g, gemma4, name, err);
    uint64_t inner = 1;
    for (uint32_t d = 0; d + 1 < t->n_dims; d++)
        inner *= t->ne[d];
    const size_t row_bytes = tn_type_row_bytes(t->type, inner);
    if (t->n_dims < 2 || (int64_t)inner != cols || (int64_t)t->ne[t->n_dims - 1] != rows ||
        row_bytes == 0 || row_bytes * (uint64_t)rows != t->nbytes)
        return tn_fail(err, TN_ERR_FORMAT, "%s: tensor '%s' has shape [%llu x %llu], expected "
                       "[%lld x %lld] (inputs x outputs)", tn_gguf_path(g), name,
                       (unsigned long long)inner,
                       (unsigned long long)t->ne[t->n_dims > 1 ? t->n_dims - 1 : 0],
                       (long long)cols, (long long)rows);
    /* Gemma 3's message (translated as it is) does not name the type. */
    if (!tn_type_matrix_supported(t->type) && gemma4)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: tensor '%s' has a type Tern cannot run (%s)",
                       tn_gguf_path(g), name, tn_type_name(t->type) ? tn_type_name(t->type) : "?");
    if (!tn_type_matrix_supported(t->type))
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: tensor '%s' has a type Tern cannot run",
                       tn_gguf_path(g), name);
    memset(w, 0, sizeof *w);
    w->type = t->type;
    w->rows = rows;
    w->cols = cols;
    w->data = t->data;
    w->row_bytes = row_bytes;
    return TN_OK;
}

int tn_vision_key_int(const tn_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out,
                      tn_error *err) {
    int64_t x;
    int rc = tn_gguf_read_int(g, key, &x, err);
    if (rc != TN_OK && rc != TN_ERR_NOT_FOUND)
        return rc;
    if (rc != TN_OK)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: missing or mistyped key '%s' (expected a whole number in [%lld, %lld])",
                       tn_gguf_path(g), key, (long long)lo, (long long)hi);
    if (x < lo || x > hi)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: bad value for '%s' (expected a whole number in [%lld, %lld])",
                       tn_gguf_path(g), key, (long long)lo, (long long)hi);
    *out = x;
    return TN_OK;
}

/* Published encoders use 1e-6 (Gemma 3's SigLIP, Gemma 4) to 1e-5; the
 * range is wide around them and shared with the text models' epsilons
 * (TN_EPS_MIN, TN_EPS_MAX), but a denormal or an epsilon that swamps the
 * variance is refused. */
int tn_vision_key_eps(const tn_gguf *g, float *eps, tn_error *err) {
    static const char key[] = "clip.vision.attention.layer_norm_epsilon";
    double x;
    const int rc = tn_gguf_read_float_in(g, key, TN_EPS_MIN, TN_EPS_MAX, &x, err);
    if (rc == TN_ERR_NOT_FOUND)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: missing or bad clip.vision.attention.layer_norm_epsilon",
                       tn_gguf_path(g));
    if (rc != TN_OK)
        return rc;
    *eps = (float)x;
    return TN_OK;
}

#define TN_VISION_PIXEL_MAX 1e4

int tn_vision_key_stats(const tn_gguf *g, bool gemma4, float mean[3], float std[3], tn_error *err) {
    static const char *const stat_keys[2] = {"clip.vision.image_mean", "clip.vision.image_std"};
    for (int k = 0; k < 2; k++) {
        float *dst = k ? std : mean;
        const tn_gguf_value *a = tn_gguf_find(g, stat_keys[k]);
        if (!a && !gemma4) {
            for (int c = 0; c < 3; c++)
                dst[c] = 0.5f; /* Gemma 3's values */
            continue;
        }
        if (!a || a->type != TN_GGUF_ARRAY || a->v.arr.n < 3 || (!gemma4 && a->v.arr.n != 3) ||
            !a->v.arr.data || (a->v.arr.type != TN_GGUF_F32 && a->v.arr.type != TN_GGUF_F64))
            return tn_fail(err, TN_ERR_FORMAT, "%s: %s must be an array of 3 floats",
                           tn_gguf_path(g), stat_keys[k]);
        for (int c = 0; c < 3; c++) {
            dst[c] = (float)tn_gguf_arr_float(a, (uint64_t)c);
            if (k && !(dst[c] > 0 && isfinite(dst[c])))
                return tn_fail(err, TN_ERR_FORMAT, "%s: image_std must be positive",
                               tn_gguf_path(g));
            /* A NaN mean would turn every pixel, and so every image token,
             * into NaN. */
            if (!k && !isfinite(dst[c]))
                return tn_fail(err, TN_ERR_FORMAT, "%s: image_mean must be finite",
                               tn_gguf_path(g));
        }
    }
    /* Finite and positive is not enough: a pixel in [0, 1] scaled past
     * this (a std of 1e-30, a mean of 3e38) overflows the tower, and every
     * image token is NaN again. Published projectors stay within a few
     * units (Gemma 3 and Gemma 4: 1). */
    for (int c = 0; c < 3; c++) {
        const double far = fmax(fabs((double)mean[c]), fabs(1.0 - mean[c])) / std[c];
        if (!(far <= TN_VISION_PIXEL_MAX))
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: image_mean and image_std scale a pixel to %g, more than %g",
                           tn_gguf_path(g), far, TN_VISION_PIXEL_MAX);
    }
    return TN_OK;
}

static int load_vec(tn_vision *v, const char *name, int64_t n, float **out, tn_error *err) {
    return tn_vision_load_vec(v->g, false, name, n, true, out, err);
}

static int load_mat(tn_vision *v, const char *name, int64_t rows, int64_t cols, tn_weight *w,
                    tn_error *err) {
    return tn_vision_load_mat(v->g, false, name, rows, cols, w, err);
}

static int get_int_key(tn_vision *v, const char *key, int64_t lo, int64_t hi, int *out,
                       tn_error *err) {
    int64_t x;
    int rc = tn_vision_key_int(v->g, key, lo, hi, &x, err);
    if (rc == TN_OK)
        *out = (int)x;
    return rc;
}

void tn_vision_free(tn_vision *v) {
    if (!v)
        return;
    if (v->layers) {
        for (int l = 0; l < v->info.n_layer; l++) {
            vision_layer *L = &v->layers[l];
            free(L->ln1_w), free(L->ln1_b), free(L->ln2_w), free(L->ln2_b);
            free(L->q_b), free(L->k_b), free(L->v_b), free(L->o_b), free(L->up_b), free(L->down_b);
        }
        free(v->layers);
    }
    free(v->patch_b);
    free(v->pos);
    free(v->post_w);
    free(v->post_b);
    free(v->soft_norm);
    free(v->proj_t);
    tn_vg4_free(v->g4);
    free(v->spans);
    tn_gguf_close(v->g);
    free(v);
}

static int load_body(tn_vision *v, tn_error *err) {
    /* A projector for one modality names its type in clip.projector_type;
     * one holding both an image and an audio encoder (Gemma 4 E2B/E4B)
     * names each in clip.vision.projector_type / clip.audio.projector_type,
     * which is how llama.cpp's clip loader reads them. */
    bool has_vision = false, has_audio = false;
    int rc = tn_gguf_read_bool(v->g, "clip.has_vision_encoder", &has_vision, err);
    if (rc != TN_OK && rc != TN_ERR_NOT_FOUND)
        return rc;
    rc = tn_gguf_read_bool(v->g, "clip.has_audio_encoder", &has_audio, err);
    if (rc != TN_OK && rc != TN_ERR_NOT_FOUND)
        return rc;
    tn_str s;
    rc = tn_gguf_read_str(v->g, "clip.projector_type", &s, err);
    if (rc == TN_ERR_NOT_FOUND && has_vision)
        rc = tn_gguf_read_str(v->g, "clip.vision.projector_type", &s, err);
    if (rc == TN_ERR_NOT_FOUND && has_audio)
        rc = tn_gguf_read_str(v->g, "clip.audio.projector_type", &s, err);
    if (rc != TN_OK && rc != TN_ERR_NOT_FOUND)
        return rc;
    if (rc == TN_ERR_NOT_FOUND)
        return tn_fail(err, TN_ERR_FORMAT, "%s: no clip.projector_type: not a vision projector "
                       "(mmproj) file", vpath(v));
    const int shown = (int)(s.len > 64 ? 64 : s.len);
    if (!has_vision && has_audio)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: this is an audio projector (type '%.*s'); "
                       "Tern takes images only for now, so audio input is not supported",
                       vpath(v), shown, s.ptr);
    if (tn_str_eq(s, "gemma4uv"))
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: Gemma 4 unified vision projectors (type "
                       "'%.*s') are not supported yet; Tern runs types 'gemma3' and 'gemma4v'",
                       vpath(v), shown, s.ptr);
    if (tn_str_eq(s, "gemma4v")) {
        if (!has_vision)
            return tn_fail(err, TN_ERR_FORMAT, "%s: clip.has_vision_encoder is not true",
                           vpath(v));
        return tn_vg4_load(v->g, &v->info, &v->g4, err);
    }
    if (!tn_str_eq(s, "gemma3"))
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: projector type '%.*s' is not supported "
                       "(Tern runs Gemma 3 and Gemma 4 vision projectors, types 'gemma3' and "
                       "'gemma4v')", vpath(v), shown, s.ptr);
    if (!has_vision)
        return tn_fail(err, TN_ERR_FORMAT, "%s: clip.has_vision_encoder is not true", vpath(v));
    tn_vision_info *I = &v->info;
    if ((rc = get_int_key(v, "clip.vision.image_size", 1, 8192, &I->image_size, err)) ||
        (rc = get_int_key(v, "clip.vision.patch_size", 1, 1024, &I->patch_size, err)) ||
        (rc = get_int_key(v, "clip.vision.embedding_length", 1, 1 << 16, &I->n_embd, err)) ||
        (rc = get_int_key(v, "clip.vision.feed_forward_length", 1, 1 << 18, &I->n_ff, err)) ||
        (rc = get_int_key(v, "clip.vision.block_count", 1, 1024, &I->n_layer, err)) ||
        (rc = get_int_key(v, "clip.vision.attention.head_count", 1, 1024, &I->n_head, err)))
        return rc;
    if ((rc = tn_vision_key_eps(v->g, &I->eps, err)))
        return rc;
    /* Gemma 3 projectors state no pooling key; llama.cpp and HF both pool 4x4. */
    v->pool = 4;
    int64_t sf;
    if (tn_gguf_get_int(v->g, "clip.vision.projector.scale_factor", &sf) == TN_OK && sf >= 1 &&
        sf <= 64)
        v->pool = (int)sf;
    if (I->n_embd % I->n_head || I->image_size % I->patch_size ||
        (I->image_size / I->patch_size) % v->pool)
        return tn_fail(err, TN_ERR_FORMAT, "%s: inconsistent shape (width %d, %d heads, image %d, "
                       "patch %d, pool %d)", vpath(v), I->n_embd, I->n_head, I->image_size,
                       I->patch_size, v->pool);
    v->n_side = I->image_size / I->patch_size;
    I->n_image_tokens = (v->n_side / v->pool) * (v->n_side / v->pool);
    I->kind = TN_VISION_GEMMA3;
    if ((rc = tn_vision_key_stats(v->g, false, I->image_mean, I->image_std, err)))
        return rc;
    const int64_t E = I->n_embd, F = I->n_ff, P = I->patch_size;
    const tn_gguf_tensor *pt = tn_gguf_find_tensor(v->g, "mm.input_projection.weight");
    if (!pt)
        return tn_fail(err, TN_ERR_FORMAT, "%s: missing tensor 'mm.input_projection.weight'",
                       vpath(v));
    if (pt->n_dims != 2 || (int64_t)pt->ne[1] != E || pt->ne[0] < 1 || pt->ne[0] > (1 << 20))
        return tn_fail(err, TN_ERR_FORMAT, "%s: 'mm.input_projection.weight' must be [text width "
                       "x %lld]", vpath(v), (long long)E);
    I->n_embd_text = (int)pt->ne[0];
    const int64_t T = I->n_embd_text;
    if ((rc = load_mat(v, "v.patch_embd.weight", E, 3 * P * P, &v->patch, err)) ||
        (rc = load_vec(v, "v.patch_embd.bias", E, &v->patch_b, err)) ||
        (rc = load_vec(v, "v.position_embd.weight", E * v->n_side * v->n_side, &v->pos, err)) ||
        (rc = load_vec(v, "v.post_ln.weight", E, &v->post_w, err)) ||
        (rc = load_vec(v, "v.post_ln.bias", E, &v->post_b, err)) ||
        (rc = load_vec(v, "mm.soft_emb_norm.weight", E, &v->soft_norm, err)))
        return rc;
    /* The file stores the projection as HF does, x @ W with W [E][T] (rows of
     * T values); tn_matmul wants output rows, so transpose it once here. */
    float *pw = NULL;
    if ((rc = load_vec(v, "mm.input_projection.weight", E * T, &pw, err)))
        return rc;
    v->proj_t = malloc((size_t)(E * T) * sizeof *v->proj_t);
    if (!v->proj_t) {
        free(pw);
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", vpath(v));
    }
    for (int64_t e = 0; e < E; e++)
        for (int64_t t = 0; t < T; t++)
            v->proj_t[t * E + e] = pw[e * T + t];
    free(pw);
    v->proj = (tn_weight){.type = TN_TYPE_F32, .rows = T, .cols = E, .data = v->proj_t,
                          .row_bytes = (size_t)E * sizeof(float)};
    v->layers = calloc((size_t)I->n_layer, sizeof *v->layers);
    if (!v->layers)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", vpath(v));
    for (int l = 0; l < I->n_layer; l++) {
        vision_layer *L = &v->layers[l];
        char n[64];
#define NM(part) (snprintf(n, sizeof n, "v.blk.%d.%s", l, part), n)
        if ((rc = load_vec(v, NM("ln1.weight"), E, &L->ln1_w, err)) ||
            (rc = load_vec(v, NM("ln1.bias"), E, &L->ln1_b, err)) ||
            (rc = load_vec(v, NM("ln2.weight"), E, &L->ln2_w, err)) ||
            (rc = load_vec(v, NM("ln2.bias"), E, &L->ln2_b, err)) ||
            (rc = load_mat(v, NM("attn_q.weight"), E, E, &L->q, err)) ||
            (rc = load_mat(v, NM("attn_k.weight"), E, E, &L->k, err)) ||
            (rc = load_mat(v, NM("attn_v.weight"), E, E, &L->v, err)) ||
            (rc = load_mat(v, NM("attn_out.weight"), E, E, &L->o, err)) ||
            (rc = load_vec(v, NM("attn_q.bias"), E, &L->q_b, err)) ||
            (rc = load_vec(v, NM("attn_k.bias"), E, &L->k_b, err)) ||
            (rc = load_vec(v, NM("attn_v.bias"), E, &L->v_b, err)) ||
            (rc = load_vec(v, NM("attn_out.bias"), E, &L->o_b, err)) ||
            (rc = load_mat(v, NM("ffn_up.weight"), F, E, &L->up, err)) ||
            (rc = load_vec(v, NM("ffn_up.bias"), F, &L->up_b, err)) ||
            (rc = load_mat(v, NM("ffn_down.weight"), E, F, &L->down, err)) ||
            (rc = load_vec(v, NM("ffn_down.bias"), E, &L->down_b, err)))
            return rc;
#undef NM
    }
    return TN_OK;
}

tn_vision_params tn_vision_default_params(void) { return (tn_vision_params){0}; }

static int vision_load(const char *path, tn_vision **out, tn_error *err) {
    if (!path || !out)
        return tn_fail(err, TN_ERR_INVALID, "tn_vision_load: needs a path and an output");
    *out = NULL;
    tn_vision *v = calloc(1, sizeof *v);
    if (!v)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
    atomic_init(&v->read_fault, 0);
    int rc = tn_gguf_open(path, &v->g, err);
    if (rc == TN_OK)
        rc = tn_load_cancelled() ? tn_load_fail_cancelled(err, path) : load_body(v, err);
    if (rc == TN_OK && tn_load_cancelled())
        rc = tn_load_fail_cancelled(err, path);
    if (rc == TN_OK && !(v->spans = tn_gguf_read_spans(v->g, &v->n_spans)))
        rc = tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
    if (rc != TN_OK) {
        tn_vision_free(v);
        return rc;
    }
    *out = v;
    return TN_OK;
}

/* params.cancelled is asked as tn_model_load asks its own (docs/MODEL.md,
 * "Cancelling a load"): before the tensors are read, at each vector's
 * read, and once all are in. */
int tn_vision_load_with(const char *path, tn_vision_params params, tn_vision **out,
                        tn_error *err) {
    tn_load_state outer;
    tn_load_cancel_arm(params.cancelled, params.cancelled_user, &outer);
    int rc = vision_load(path, out, err);
    if (rc != TN_OK && tn_load_cancelled())
        rc = tn_load_fail_cancelled(err, path);
    tn_load_cancel_disarm(&outer);
    return rc;
}

int tn_vision_load(const char *path, tn_vision **out, tn_error *err) {
    return tn_vision_load_with(path, tn_vision_default_params(), out, err);
}

const tn_vision_info *tn_vision_get_info(const tn_vision *v) { return v ? &v->info : NULL; }

/* k x k tokens with k = floor(sqrt(budget)), at most the native grid. */
static int side_for_budget(const tn_vision *v, int budget) {
    const int native = v->n_side / v->pool;
    if (budget <= 0)
        return native;
    int k = (int)floor(sqrt((double)budget));
    while ((k + 1) * (k + 1) <= budget)
        k++;
    while (k > 1 && k * k > budget)
        k--;
    return k < native ? (k < 1 ? 1 : k) : native;
}

int tn_vision_tokens(const tn_vision *v, int budget) {
    if (!v)
        return 0;
    if (v->g4) {
        /* What an image costs about (tn_vg4_plan: its own count follows its
         * size). 0 for a budget the projector does not take. */
        const int *list;
        const int n = tn_vg4_budgets(&list);
        if (budget <= 0)
            return list[n - 1];
        for (int i = 0; i < n; i++)
            if (list[i] == budget)
                return budget;
        return 0;
    }
    const int k = side_for_budget(v, budget);
    return k * k;
}

int tn_vision_input_side(const tn_vision *v, int budget) {
    if (!v || v->g4)
        return 0; /* Gemma 4 resizes the image itself, keeping its aspect */
    return side_for_budget(v, budget) * v->pool * v->info.patch_size;
}

int tn_vision_budgets(const tn_vision *v, const int **list) {
    if (list)
        *list = NULL;
    return v && v->g4 ? tn_vg4_budgets(list) : 0;
}

int tn_vision_check_budget(const tn_vision *v, int budget, tn_error *err) {
    if (!v)
        return tn_fail(err, TN_ERR_INVALID, "no vision projector");
    if (v->g4 && budget > 0 && tn_vision_tokens(v, budget) == 0)
        return tn_fail(err, TN_ERR_INVALID, "an image budget of %d tokens is not one Gemma 4 "
                       "takes (70, 140, 280, 560 or 1120)", budget);
    return TN_OK;
}

int tn_vision_image_tokens(const tn_vision *v, int budget, int w, int h, tn_error *err) {
    if (!v)
        return tn_fail(err, TN_ERR_INVALID, "no vision projector");
    if (v->g4) {
        int tw, th, n;
        const int rc = tn_vg4_plan(v->g4, budget, w, h, &tw, &th, &n, err);
        return rc != TN_OK ? rc : n;
    }
    if (w <= 0 || h <= 0)
        return tn_fail(err, TN_ERR_INVALID, "image of %d x %d pixels: nothing to encode", w, h);
    return tn_vision_tokens(v, budget);
}

/* Bilinear sampling with pixel centres aligned (torch's align_corners=False). */
static void bilinear_src(int dst_i, int dst_n, int src_n, int *i0, int *i1, float *f) {
    double x = ((double)dst_i + 0.5) * (double)src_n / (double)dst_n - 0.5;
    if (x < 0)
        x = 0;
    int a = (int)x;
    if (a > src_n - 1)
        a = src_n - 1;
    *i0 = a;
    *i1 = a + 1 < src_n ? a + 1 : a;
    *f = (float)(x - a);
}

static void layer_norm(const float *x, const float *w, const float *b, int64_t n, float eps,
                       float *y) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++)
        mean += x[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
    const float inv = (float)(1.0 / sqrt(var / (double)n + eps));
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)(x[i] - mean) * inv * w[i] + b[i];
}

static void add_bias(float *y, const float *b, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++)
            y[r * n + i] += b[i];
}

typedef struct attn_ctx {
    const float *q, *k, *v; /* [P][E] */
    float *out;             /* [P][E] */
    float *scratch;         /* [nth][P] */
    int64_t P, E, n_head, d;
    int nth_alloc;
    float scale;
} attn_ctx;

/* Non-causal attention; each (head, query row) is one unit of work, computed
 * the same way whatever the thread count. */
static void attn_task(void *vctx, int ith, int nth) {
    attn_ctx *c = vctx;
    const int64_t units = c->n_head * c->P;
    const int64_t per = (units + nth - 1) / nth;
    const int64_t u0 = per * ith, u1 = u0 + per < units ? u0 + per : units;
    float *s = c->scratch + (int64_t)ith * c->P;
    const float scale = c->scale;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t h = u / c->P, i = u % c->P;
        const float *qi = c->q + i * c->E + h * c->d;
        float mx = -INFINITY;
        for (int64_t j = 0; j < c->P; j++) {
            const float *kj = c->k + j * c->E + h * c->d;
            float acc = 0;
            for (int64_t t = 0; t < c->d; t++)
                acc += qi[t] * kj[t];
            s[j] = acc * scale;
            if (s[j] > mx)
                mx = s[j];
        }
        float sum = 0;
        for (int64_t j = 0; j < c->P; j++) {
            s[j] = expf(s[j] - mx);
            sum += s[j];
        }
        float *o = c->out + i * c->E + h * c->d;
        for (int64_t t = 0; t < c->d; t++)
            o[t] = 0;
        for (int64_t j = 0; j < c->P; j++) {
            const float *vj = c->v + j * c->E + h * c->d;
            const float p = s[j];
            for (int64_t t = 0; t < c->d; t++)
                o[t] += p * vj[t];
        }
        const float inv = 1.0f / sum;
        for (int64_t t = 0; t < c->d; t++)
            o[t] *= inv;
    }
}

/* The same attention through the matrix kernels, one head at a time:
 * S = Q_h K_h^T (K_h an f32 "weight" of P rows), a softmax per row, then
 * O_h = S V_h (V_h^T a weight of d rows). The products run at the kernels'
 * SIMD speed and read K and V once per block of queries instead of once per
 * query; the scalar attn_task stays as the reference
 * (TERN_VISION_ATTENTION=scalar selects it; tests compare the two). */
typedef struct softmax_ctx {
    float *s; /* [P][P] */
    int64_t P;
    float scale;
} softmax_ctx;

static void softmax_task(void *vctx, int ith, int nth) {
    softmax_ctx *c = vctx;
    for (int64_t i = ith; i < c->P; i += nth) {
        float *row = c->s + i * c->P;
        float mx = -INFINITY;
        for (int64_t j = 0; j < c->P; j++) {
            row[j] *= c->scale;
            if (row[j] > mx)
                mx = row[j];
        }
        float sum = 0;
        for (int64_t j = 0; j < c->P; j++) {
            row[j] = expf(row[j] - mx);
            sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < c->P; j++)
            row[j] *= inv;
    }
}

typedef struct attn_bufs {
    float *qh, *kh, *vt, *oh; /* [P][d], [P][d], [d][P], [P][d] */
    float *s;                 /* [P][P] */
} attn_bufs;

static int attention_matmul(tn_cpu *cpu, const attn_ctx *c, attn_bufs *b) {
    const int64_t P = c->P, E = c->E, d = c->d;
    for (int64_t h = 0; h < c->n_head; h++) {
        for (int64_t i = 0; i < P; i++) {
            memcpy(b->qh + i * d, c->q + i * E + h * d, (size_t)d * sizeof(float));
            memcpy(b->kh + i * d, c->k + i * E + h * d, (size_t)d * sizeof(float));
            for (int64_t t = 0; t < d; t++)
                b->vt[t * P + i] = c->v[i * E + h * d + t];
        }
        const tn_weight wk = {.type = TN_TYPE_F32, .rows = P, .cols = d, .data = b->kh,
                              .row_bytes = (size_t)d * sizeof(float)};
        int rc = tn_matmul(cpu, &wk, b->qh, P, b->s);
        if (rc != TN_OK)
            return rc;
        softmax_ctx sc = {.s = b->s, .P = P, .scale = c->scale};
        tn_cpu_parallel(cpu, softmax_task, &sc);
        const tn_weight wv = {.type = TN_TYPE_F32, .rows = d, .cols = P, .data = b->vt,
                              .row_bytes = (size_t)P * sizeof(float)};
        if ((rc = tn_matmul(cpu, &wv, b->s, P, b->oh)) != TN_OK)
            return rc;
        for (int64_t i = 0; i < P; i++)
            memcpy(c->out + i * E + h * d, b->oh + i * d, (size_t)d * sizeof(float));
    }
    return TN_OK;
}

int tn_vision_attend(tn_cpu *cpu, const float *q, const float *k, const float *v, float *out,
                     int64_t P, int64_t E, int64_t n_head, float scale, tn_error *err) {
    const char *mode = getenv("TERN_VISION_ATTENTION");
    const bool scalar = mode && !strcmp(mode, "scalar");
    const int64_t d = E / n_head;
    int nth = cpu ? tn_cpu_threads(cpu) : 1;
    if (nth < 1)
        nth = 1;
    attn_ctx ac = {.q = q, .k = k, .v = v, .out = out, .P = P, .E = E, .n_head = n_head, .d = d,
                   .nth_alloc = nth, .scale = scale};
    attn_bufs ab = {0};
    int rc = TN_OK;
    if (scalar) {
        ac.scratch = malloc((size_t)nth * (size_t)P * sizeof(float));
        if (!ac.scratch)
            return tn_fail(err, TN_ERR_NOMEM, "out of memory encoding an image");
        tn_cpu_parallel(cpu, attn_task, &ac);
        free(ac.scratch);
        return TN_OK;
    }
    ab.qh = malloc((size_t)(P * d) * sizeof(float));
    ab.kh = malloc((size_t)(P * d) * sizeof(float));
    ab.vt = malloc((size_t)(P * d) * sizeof(float));
    ab.oh = malloc((size_t)(P * d) * sizeof(float));
    ab.s = malloc((size_t)P * (size_t)P * sizeof(float));
    if (!ab.qh || !ab.kh || !ab.vt || !ab.oh || !ab.s)
        rc = tn_fail(err, TN_ERR_NOMEM, "out of memory encoding an image (attention over %lld "
                     "patches)", (long long)P);
    else if ((rc = attention_matmul(cpu, &ac, &ab)) != TN_OK)
        rc = tn_fail(err, rc, "attention: matrix product failed (%s)", tn_status_name(rc));
    free(ab.qh), free(ab.kh), free(ab.vt), free(ab.oh), free(ab.s);
    return rc;
}

static float gelu_tanh(float x) {
    const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

static int encode(tn_vision *v, const float *rgb, int w, int h, int budget, float *out,
                  int *n_tokens, tn_cpu *cpu, tn_vision_bufs *b, tn_error *err) {
    if (!v || !out)
        return tn_fail(err, TN_ERR_INVALID, "tn_vision_encode: needs a projector and an output");
    if (!rgb || w <= 0 || h <= 0)
        return tn_fail(err, TN_ERR_INVALID, "image of %d x %d pixels: nothing to encode", w, h);
    if (w > 65536 || h > 65536) /* "nothing to encode" would mislead here */
        return tn_fail(err, TN_ERR_INVALID, "an image of %d x %d pixels is too large to encode: "
                       "at most 65536 pixels a side; crop or scale it down", w, h);
    const tn_vision_info *I = &v->info;
    const int k = side_for_budget(v, budget);
    const int g = k * v->pool;             /* patches per side */
    const int64_t P = (int64_t)g * g;      /* patches */
    const int64_t S = (int64_t)g * I->patch_size; /* pixels per side */
    const int64_t E = I->n_embd, F = I->n_ff, T = I->n_embd_text, ps = I->patch_size;
    const int64_t K = 3 * ps * ps;
    int nth = cpu ? tn_cpu_threads(cpu) : 1;
    if (nth < 1)
        nth = 1;
    const size_t big = (size_t)P * (size_t)(F > K ? (F > E ? F : E) : (K > E ? K : E));
    /* The caller's buffers (tn_vision_bufs): freed after the guarded step. */
    float *x = tn_vision_alloc(b, (size_t)(P * E) * sizeof *x); /* residual stream */
    float *t = tn_vision_alloc(b, (size_t)(P * E) * sizeof *t);
    float *q = tn_vision_alloc(b, (size_t)(P * E) * sizeof *q);
    float *kk = tn_vision_alloc(b, (size_t)(P * E) * sizeof *kk);
    float *vv = tn_vision_alloc(b, (size_t)(P * E) * sizeof *vv);
    float *u = tn_vision_alloc(b, big * sizeof *u);
    float *scratch = tn_vision_alloc(b, (size_t)nth * (size_t)P * sizeof *scratch);
    const char *mode = getenv("TERN_VISION_ATTENTION");
    const bool scalar_attention = mode && !strcmp(mode, "scalar");
    const int64_t d_head = E / I->n_head;
    attn_bufs ab = {0};
    if (!scalar_attention) {
        ab.qh = tn_vision_alloc(b, (size_t)(P * d_head) * sizeof(float));
        ab.kh = tn_vision_alloc(b, (size_t)(P * d_head) * sizeof(float));
        ab.vt = tn_vision_alloc(b, (size_t)(P * d_head) * sizeof(float));
        ab.oh = tn_vision_alloc(b, (size_t)(P * d_head) * sizeof(float));
        ab.s = tn_vision_alloc(b, (size_t)P * (size_t)P * sizeof(float));
    }
    int rc = TN_OK;
    if (!x || !t || !q || !kk || !vv || !u || !scratch ||
        (!scalar_attention && (!ab.qh || !ab.kh || !ab.vt || !ab.oh || !ab.s))) {
        rc = tn_fail(err, TN_ERR_NOMEM, "out of memory encoding an image");
        goto done;
    }
    /* Pixels: resample to S x S, normalize, cut into patches laid out as the
     * patch kernel's rows ([channel][y][x]). */
    for (int64_t py = 0; py < S; py++) {
        int y0, y1;
        float fy;
        bilinear_src((int)py, (int)S, h, &y0, &y1, &fy);
        for (int64_t px = 0; px < S; px++) {
            int x0, x1;
            float fx;
            bilinear_src((int)px, (int)S, w, &x0, &x1, &fx);
            const int64_t patch = (py / ps) * g + px / ps;
            for (int c = 0; c < 3; c++) {
                const float a = rgb[((int64_t)y0 * w + x0) * 3 + c];
                const float b = rgb[((int64_t)y0 * w + x1) * 3 + c];
                const float d = rgb[((int64_t)y1 * w + x0) * 3 + c];
                const float e = rgb[((int64_t)y1 * w + x1) * 3 + c];
                const float val = (a * (1 - fx) + b * fx) * (1 - fy) + (d * (1 - fx) + e * fx) * fy;
                u[patch * K + c * ps * ps + (py % ps) * ps + px % ps] =
                    (val - I->image_mean[c]) / I->image_std[c];
            }
        }
    }
    if ((rc = tn_matmul(cpu, &v->patch, u, P, x)) != TN_OK)
        goto mm_fail;
    add_bias(x, v->patch_b, P, E);
    /* Position embeddings, bilinearly resized from the native grid. */
    for (int64_t gy = 0; gy < g; gy++) {
        int y0, y1;
        float fy;
        bilinear_src((int)gy, g, v->n_side, &y0, &y1, &fy);
        for (int64_t gx = 0; gx < g; gx++) {
            int x0, x1;
            float fx;
            bilinear_src((int)gx, g, v->n_side, &x0, &x1, &fx);
            const float *a = v->pos + ((int64_t)y0 * v->n_side + x0) * E;
            const float *b = v->pos + ((int64_t)y0 * v->n_side + x1) * E;
            const float *d = v->pos + ((int64_t)y1 * v->n_side + x0) * E;
            const float *e = v->pos + ((int64_t)y1 * v->n_side + x1) * E;
            float *row = x + (gy * g + gx) * E;
            for (int64_t i = 0; i < E; i++)
                row[i] += (a[i] * (1 - fx) + b[i] * fx) * (1 - fy) + (d[i] * (1 - fx) + e[i] * fx) * fy;
        }
    }
    for (int l = 0; l < I->n_layer; l++) {
        const vision_layer *L = &v->layers[l];
        for (int64_t r = 0; r < P; r++)
            layer_norm(x + r * E, L->ln1_w, L->ln1_b, E, I->eps, t + r * E);
        if ((rc = tn_matmul(cpu, &L->q, t, P, q)) || (rc = tn_matmul(cpu, &L->k, t, P, kk)) ||
            (rc = tn_matmul(cpu, &L->v, t, P, vv)))
            goto mm_fail;
        add_bias(q, L->q_b, P, E);
        add_bias(kk, L->k_b, P, E);
        add_bias(vv, L->v_b, P, E);
        attn_ctx ac = {.q = q, .k = kk, .v = vv, .out = t, .scratch = scratch, .P = P, .E = E,
                       .n_head = I->n_head, .d = E / I->n_head, .nth_alloc = nth,
                       .scale = 1.0f / sqrtf((float)(E / I->n_head))};
        if (scalar_attention)
            tn_cpu_parallel(cpu, attn_task, &ac);
        else if ((rc = attention_matmul(cpu, &ac, &ab)) != TN_OK)
            goto mm_fail;
        if ((rc = tn_matmul(cpu, &L->o, t, P, q)))
            goto mm_fail;
        for (int64_t r = 0; r < P; r++)
            for (int64_t i = 0; i < E; i++)
                x[r * E + i] += q[r * E + i] + L->o_b[i];
        for (int64_t r = 0; r < P; r++)
            layer_norm(x + r * E, L->ln2_w, L->ln2_b, E, I->eps, t + r * E);
        if ((rc = tn_matmul(cpu, &L->up, t, P, u)))
            goto mm_fail;
        for (int64_t r = 0; r < P; r++)
            for (int64_t i = 0; i < F; i++)
                u[r * F + i] = gelu_tanh(u[r * F + i] + L->up_b[i]);
        if ((rc = tn_matmul(cpu, &L->down, u, P, q)))
            goto mm_fail;
        for (int64_t r = 0; r < P; r++)
            for (int64_t i = 0; i < E; i++)
                x[r * E + i] += q[r * E + i] + L->down_b[i];
    }
    for (int64_t r = 0; r < P; r++)
        layer_norm(x + r * E, v->post_w, v->post_b, E, I->eps, t + r * E);
    /* pool x pool average, then RMSNorm with soft_emb_norm. */
    const int64_t n_tok = (int64_t)k * k;
    const float inv_area = 1.0f / (float)(v->pool * v->pool);
    for (int64_t ty = 0; ty < k; ty++)
        for (int64_t tx = 0; tx < k; tx++) {
            float *dst = q + (ty * k + tx) * E;
            for (int64_t i = 0; i < E; i++)
                dst[i] = 0;
            for (int dy = 0; dy < v->pool; dy++)
                for (int dx = 0; dx < v->pool; dx++) {
                    const float *src = t + ((ty * v->pool + dy) * g + tx * v->pool + dx) * E;
                    for (int64_t i = 0; i < E; i++)
                        dst[i] += src[i];
                }
            double ss = 0;
            for (int64_t i = 0; i < E; i++) {
                dst[i] *= inv_area;
                ss += (double)dst[i] * dst[i];
            }
            const float inv = (float)(1.0 / sqrt(ss / (double)E + I->eps));
            for (int64_t i = 0; i < E; i++)
                dst[i] = dst[i] * inv * v->soft_norm[i];
        }
    if ((rc = tn_matmul(cpu, &v->proj, q, n_tok, out)))
        goto mm_fail;
    (void)T;
    if (n_tokens)
        *n_tokens = (int)n_tok;
    goto done;
mm_fail:
    rc = tn_fail(err, rc, "%s: matrix product failed (%s): unsupported weight type?", vpath(v),
                 tn_status_name(rc));
done:
    return rc;
}

void *tn_vision_alloc(tn_vision_bufs *b, size_t bytes) {
    if (b->n >= TN_VISION_BUFS)
        return NULL;
    void *p = malloc(bytes);
    if (p)
        b->p[b->n++] = p;
    return p;
}

static void bufs_free(tn_vision_bufs *b) {
    for (int i = 0; i < b->n; i++)
        free(b->p[i]);
    b->n = 0;
}

/* One encoding, as the guarded step's fn. */
typedef struct encode_call {
    tn_vision *v;
    const float *rgb;
    int w, h, budget;
    float *out;
    int *n_tokens;
    tn_cpu *cpu;
    tn_vision_bufs *bufs;
    tn_error *err;
    int rc;
} encode_call;

static void encode_run(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    encode_call *c = arg;
    tn_vision *v = c->v;
    c->rc = v && v->g4 ? tn_vg4_encode(v->g4, c->rgb, c->w, c->h, c->budget, c->out,
                                       c->n_tokens, c->cpu, c->bufs, c->err)
                       : encode(v, c->rgb, c->w, c->h, c->budget, c->out, c->n_tokens, c->cpu,
                                c->bufs, c->err);
}

/* The flag is written by an encoding through a projector shared read-only
 * otherwise, allocated writable: the cast is sound. */
int tn_vision_weights_check(const tn_vision *v, tn_error *err) {
    const int broken = v ? atomic_load(&((tn_vision *)v)->read_fault) : 0;
    if (broken > 0 && broken <= v->n_spans)
        return tn_fail_shrank(err, v->spans[broken - 1].path);
    return TN_OK;
}

/* The pool lives for one call: a projector is shared by threads that encode
 * at once (one pool must not run two calls), and starting the threads costs
 * microseconds against the milliseconds of an image. One thread has a pool
 * too (it starts no thread): the matrix products keep their scratch in it,
 * freed below. Without one each product allocated its own and freed it on
 * return, which a file cut short under the encoding jumped over (320 KiB
 * lost per fault with the projector of tests/server/test-conn.py). */
int tn_vision_encode(tn_vision *v, const float *rgb, int w, int h, int budget, float *out,
                     int *n_tokens, int n_threads, tn_error *err) {
    if (v && v->g4 && (!rgb || !out))
        return tn_fail(err, TN_ERR_INVALID, "tn_vision_encode: needs pixels and an output");
    /* The projector's file cut short under an earlier encoding: its
     * weights are gone (as a model's, engine/forward.c). */
    const int gone = tn_vision_weights_check(v, err);
    if (gone != TN_OK)
        return gone;
    tn_cpu *cpu = tn_cpu_new(n_threads);
    if (!cpu)
        return tn_fail(err, TN_ERR_NOMEM, "cannot start the CPU thread pool");
    /* The matrices are read from the mapping by the encoder and by the
     * pool's workers: one guarded step (tn_guarded_step), so that a file cut
     * short under it is TN_ERR_IO naming it, not a SIGBUS; the encoder
     * allocates only through bufs, freed here whatever happened. Cost: one
     * sigsetjmp per encoding and per pool slot. */
    tn_vision_bufs bufs = {.n = 0};
    encode_call c = {.v = v, .rgb = rgb, .w = w, .h = h, .budget = budget, .out = out,
                     .n_tokens = n_tokens, .cpu = cpu, .bufs = &bufs, .err = err, .rc = TN_OK};
    int rc;
    if (v && v->n_spans > 0) {
        const int hit = tn_guarded_step(cpu, v->spans, v->n_spans, encode_run, &c);
        if (hit >= 0) {
            int none = 0;
            atomic_compare_exchange_strong(&v->read_fault, &none, hit + 1);
            rc = tn_fail_shrank(err, v->spans[hit].path);
        } else {
            rc = c.rc;
        }
    } else {
        encode_run(&c, 0, 1); /* in memory (or no list of spans): nothing can shrink */
        rc = c.rc;
    }
    bufs_free(&bufs);
    tn_cpu_free(cpu);
    return rc;
}

int tn_vision_encode_new(tn_vision *v, const float *rgb, int w, int h, int budget, int n_threads,
                         float **rows, int *n_tokens, tn_error *err) {
    if (!rows || !n_tokens)
        return tn_fail(err, TN_ERR_INVALID, "tn_vision_encode: needs pixels and an output");
    *rows = NULL;
    *n_tokens = 0;
    const int n_tok = tn_vision_image_tokens(v, budget, w, h, err);
    if (n_tok < 0)
        return n_tok;
    const size_t n_embd = (size_t)tn_vision_get_info(v)->n_embd_text;
    float *out = malloc((size_t)n_tok * n_embd * sizeof(float));
    if (!out)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for a %d-row image span", n_tok);
    int n = 0;
    const int rc = tn_vision_encode(v, rgb, w, h, budget, out, &n, n_threads, err);
    if (rc != TN_OK) {
        free(out);
        return rc;
    }
    *rows = out;
    *n_tokens = n;
    return TN_OK;
}
