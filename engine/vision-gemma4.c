/* The Gemma 4 vision encoder, read from the mmproj GGUF layout llama.cpp's
 * clip loader reads for projector type "gemma4v" (docs/VISION.md):
 *
 *   8-bit pixels -> aspect-keeping bicubic resize to a multiple of
 *   patch x pool pixels within the budget -> x/255, image_mean/std, 2x - 1
 *   -> patches (no bias) + learned x and y position rows
 *   -> L blocks: RMSNorm, Q/K/V (clippable linears), per-head RMSNorm of Q
 *      and K (weighted) and V (unweighted), 2-D NeoX rope (x positions on
 *      the first half of each head, y on the second, theta 100), attention
 *      with scale 1, output linear, RMSNorm; RMSNorm, gated FFN, RMSNorm;
 *      an optional per-layer output scale
 *   -> pool x pool average * sqrt(width) -> (x - std_bias) * std_scale
 *   -> RMSNorm -> mm.input_projection into the text width.
 *
 * Every step follows tools/mtmd/models/gemma4v.cpp, clip.cpp (build_vit,
 * loader) and mtmd-image.cpp (resize) of llama.cpp; tools/compare/
 * gemma4v-compare.sh measures the agreement. */
#include "tn-vision.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FFN_GELU_QUICK, FFN_GELU, FFN_SILU };

/* A Gemma4ClippableLinear: input and output clamped to bounds stored as
 * scalar tensors beside the weight (absent: unbounded). */
typedef struct g4_lin {
    tn_weight w;
    float *b; /* optional [rows] */
    float in_lo, in_hi, out_lo, out_hi;
} g4_lin;

typedef struct g4_layer {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    g4_lin q, k, v, o, up, gate, down;
    bool has_gate;
    float *q_norm, *k_norm; /* [d] per head, or [E] over the row */
    int64_t q_norm_n, k_norm_n;
    float *attn_post, *ffn_post; /* [E], optional */
    float *out_scale;            /* [1] or [E], optional */
    int64_t out_scale_n;
} g4_layer;

struct tn_vision_g4 {
    const tn_gguf *g;
    int64_t E, F, H, d, L, T, patch, pool, pos_size;
    float eps;
    int ffn_op;
    float mean[3], std[3];
    tn_weight patch_w; /* [E] rows of [3][patch][patch] */
    float *pos;        /* [2][pos_size][E]: x table, then y table */
    g4_layer *layers;
    float *pre_w, *pre_b, *post_w, *post_b;
    float *std_bias, *std_scale;
    g4_lin proj;
};

static const int budgets[] = {70, 140, 280, 560, 1120};
#define N_BUDGETS ((int)(sizeof budgets / sizeof budgets[0]))
/* llama.cpp's lower bound for every budget (set_limit_image_tokens(70, ...)):
 * a small image is enlarged to at least this many tokens. */
#define MIN_TOKENS 70

int tn_vg4_budgets(const int **list) {
    if (list)
        *list = budgets;
    return N_BUDGETS;
}

static const char *gpath(const tn_vision_g4 *v) { return tn_gguf_path(v->g); }

static int load_vec(tn_vision_g4 *v, const char *name, int64_t n, bool required, float **out,
                    tn_error *err) {
    return tn_vision_load_vec(v->g, true, name, n, required, out, err);
}

static int load_mat(tn_vision_g4 *v, const char *name, int64_t rows, int64_t cols, tn_weight *w,
                    tn_error *err) {
    return tn_vision_load_mat(v->g, true, name, rows, cols, w, err);
}

/* A clamp bound: as llama.cpp's get_scalar, a one-value F32 tensor. */
static int load_bound(tn_vision_g4 *v, const char *base, const char *suffix, float dflt,
                      float *out, tn_error *err) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s", base, suffix);
    *out = dflt;
    const tn_gguf_tensor *t = tn_gguf_find_tensor(v->g, name);
    if (!t)
        return TN_OK;
    if (t->type != TN_TYPE_F32 || t->nbytes != sizeof(float))
        return tn_fail(err, TN_ERR_FORMAT, "%s: '%s' must be one F32 value", gpath(v), name);
    float x;
    int rc = tn_vision_read_copy(v->g, &x, t->data, sizeof x, err);
    if (rc != TN_OK)
        return rc;
    if (isnan(x))
        return tn_fail(err, TN_ERR_FORMAT, "%s: '%s' is NaN", gpath(v), name);
    *out = x;
    return TN_OK;
}

static int load_lin(tn_vision_g4 *v, const char *base, int64_t rows, int64_t cols, g4_lin *l,
                    tn_error *err) {
    char name[160];
    snprintf(name, sizeof name, "%s.weight", base);
    int rc = load_mat(v, name, rows, cols, &l->w, err);
    if (rc != TN_OK)
        return rc;
    snprintf(name, sizeof name, "%s.bias", base);
    if ((rc = load_vec(v, name, rows, false, &l->b, err)) ||
        (rc = load_bound(v, base, "input_min", -FLT_MAX, &l->in_lo, err)) ||
        (rc = load_bound(v, base, "input_max", FLT_MAX, &l->in_hi, err)) ||
        (rc = load_bound(v, base, "output_min", -FLT_MAX, &l->out_lo, err)) ||
        (rc = load_bound(v, base, "output_max", FLT_MAX, &l->out_hi, err)))
        return rc;
    return TN_OK;
}

/* A norm weight of n values, or of alt values (per head) when that is what
 * the file has. */
static int load_norm2(tn_vision_g4 *v, const char *name, int64_t n, int64_t alt, float **out,
                      int64_t *got, tn_error *err) {
    const tn_gguf_tensor *t = tn_gguf_find_tensor(v->g, name);
    int64_t want = n;
    if (t && t->n_dims == 1 && (int64_t)t->ne[0] == alt)
        want = alt;
    *got = want;
    return load_vec(v, name, want, true, out, err);
}

void tn_vg4_free(tn_vision_g4 *v) {
    if (!v)
        return;
    if (v->layers) {
        for (int64_t l = 0; l < v->L; l++) {
            g4_layer *Y = &v->layers[l];
            free(Y->ln1_w), free(Y->ln1_b), free(Y->ln2_w), free(Y->ln2_b);
            free(Y->q.b), free(Y->k.b), free(Y->v.b), free(Y->o.b);
            free(Y->up.b), free(Y->gate.b), free(Y->down.b);
            free(Y->q_norm), free(Y->k_norm), free(Y->attn_post), free(Y->ffn_post);
            free(Y->out_scale);
        }
        free(v->layers);
    }
    free(v->pos);
    free(v->pre_w), free(v->pre_b), free(v->post_w), free(v->post_b);
    free(v->std_bias), free(v->std_scale);
    free(v->proj.b);
    free(v);
}

static int get_int(tn_vision_g4 *v, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   tn_error *err) {
    return tn_vision_key_int(v->g, key, lo, hi, out, err);
}

static int load_all(tn_vision_g4 *v, tn_vision_info *I, tn_error *err) {
    int rc;
    int64_t image_size = 0; /* set by get_int; -O3 cannot see that tn_fail never returns TN_OK */
    if ((rc = get_int(v, "clip.vision.image_size", 1, 1 << 16, &image_size, err)) ||
        (rc = get_int(v, "clip.vision.patch_size", 1, 256, &v->patch, err)) ||
        (rc = get_int(v, "clip.vision.embedding_length", 4, 1 << 16, &v->E, err)) ||
        (rc = get_int(v, "clip.vision.feed_forward_length", 1, 1 << 18, &v->F, err)) ||
        (rc = get_int(v, "clip.vision.block_count", 1, 1024, &v->L, err)) ||
        (rc = get_int(v, "clip.vision.attention.head_count", 1, 1024, &v->H, err)))
        return rc;
    if ((rc = tn_vision_key_eps(v->g, &v->eps, err)))
        return rc;
    v->pool = 3; /* Gemma 4's pooling_kernel_size, as llama.cpp's default */
    int64_t x;
    if (tn_gguf_find(v->g, "clip.vision.projector.scale_factor") &&
        (rc = get_int(v, "clip.vision.projector.scale_factor", 1, 16, &v->pool, err)))
        return rc;
    if (v->E % v->H)
        return tn_fail(err, TN_ERR_FORMAT, "%s: width %lld is not a multiple of %lld heads",
                       gpath(v), (long long)v->E, (long long)v->H);
    v->d = v->E / v->H;
    if (tn_gguf_get_int(v->g, "clip.vision.attention.head_dim", &x) == TN_OK && x != v->d)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: head size %lld is not width / heads (%lld)",
                       gpath(v), (long long)x, (long long)v->d);
    if (tn_gguf_get_int(v->g, "clip.vision.attention.head_count_kv", &x) == TN_OK && x != v->H)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: grouped-query attention in a vision tower "
                       "(%lld KV heads for %lld) is not supported", gpath(v), (long long)x,
                       (long long)v->H);
    if (v->d % 4)
        return tn_fail(err, TN_ERR_FORMAT, "%s: head size %lld is not a multiple of 4 (2-D rope "
                       "needs two even halves)", gpath(v), (long long)v->d);
    /* The activation as llama.cpp's loader picks it: clip.use_gelu (tanh
     * GELU), clip.use_silu, otherwise quick GELU. */
    bool gelu = false, silu = false;
    (void)tn_gguf_get_bool(v->g, "clip.use_gelu", &gelu);
    (void)tn_gguf_get_bool(v->g, "clip.use_silu", &silu);
    if (gelu && silu)
        return tn_fail(err, TN_ERR_FORMAT, "%s: both clip.use_gelu and clip.use_silu are set",
                       gpath(v));
    v->ffn_op = gelu ? FFN_GELU : silu ? FFN_SILU : FFN_GELU_QUICK;
    if ((rc = tn_vision_key_stats(v->g, true, v->mean, v->std, err)))
        return rc;
    const int64_t E = v->E, F = v->F, P = v->patch;
    const tn_gguf_tensor *pt = tn_gguf_find_tensor(v->g, "mm.input_projection.weight");
    if (!pt)
        return tn_fail(err, TN_ERR_FORMAT, "%s: missing tensor 'mm.input_projection.weight'",
                       gpath(v));
    if (pt->n_dims != 2 || (int64_t)pt->ne[0] != E || pt->ne[1] < 1 || pt->ne[1] > (1 << 20))
        return tn_fail(err, TN_ERR_FORMAT, "%s: 'mm.input_projection.weight' must be [%lld x "
                       "text width]", gpath(v), (long long)E);
    v->T = (int64_t)pt->ne[1];
    const tn_gguf_tensor *pe = tn_gguf_find_tensor(v->g, "v.position_embd.weight");
    if (!pe)
        return tn_fail(err, TN_ERR_FORMAT, "%s: missing tensor 'v.position_embd.weight'",
                       gpath(v));
    if (pe->n_dims != 3 || (int64_t)pe->ne[0] != E || pe->ne[2] != 2 || pe->ne[1] < 1 ||
        pe->ne[1] > (1 << 20))
        return tn_fail(err, TN_ERR_FORMAT, "%s: 'v.position_embd.weight' must be [%lld x "
                       "positions x 2] (an x and a y table)", gpath(v), (long long)E);
    v->pos_size = (int64_t)pe->ne[1];
    if ((rc = load_mat(v, "v.patch_embd.weight", E, 3 * P * P, &v->patch_w, err)) ||
        (rc = load_vec(v, "v.position_embd.weight", 2 * v->pos_size * E, true, &v->pos, err)) ||
        (rc = load_vec(v, "v.pre_ln.weight", E, false, &v->pre_w, err)) ||
        (rc = load_vec(v, "v.pre_ln.bias", E, false, &v->pre_b, err)) ||
        (rc = load_vec(v, "v.post_ln.weight", E, false, &v->post_w, err)) ||
        (rc = load_vec(v, "v.post_ln.bias", E, false, &v->post_b, err)) ||
        (rc = load_vec(v, "v.std_bias", E, false, &v->std_bias, err)) ||
        (rc = load_vec(v, "v.std_scale", E, false, &v->std_scale, err)) ||
        (rc = load_lin(v, "mm.input_projection", v->T, E, &v->proj, err)))
        return rc;
    v->layers = calloc((size_t)v->L, sizeof *v->layers);
    if (!v->layers)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", gpath(v));
    for (int64_t l = 0; l < v->L; l++) {
        g4_layer *Y = &v->layers[l];
        char n[96];
#define NM(part) (snprintf(n, sizeof n, "v.blk.%lld.%s", (long long)l, part), n)
        if ((rc = load_vec(v, NM("ln1.weight"), E, true, &Y->ln1_w, err)) ||
            (rc = load_vec(v, NM("ln1.bias"), E, false, &Y->ln1_b, err)) ||
            (rc = load_vec(v, NM("ln2.weight"), E, true, &Y->ln2_w, err)) ||
            (rc = load_vec(v, NM("ln2.bias"), E, false, &Y->ln2_b, err)) ||
            (rc = load_lin(v, NM("attn_q"), E, E, &Y->q, err)) ||
            (rc = load_lin(v, NM("attn_k"), E, E, &Y->k, err)) ||
            (rc = load_lin(v, NM("attn_v"), E, E, &Y->v, err)) ||
            (rc = load_lin(v, NM("attn_out"), E, E, &Y->o, err)) ||
            (rc = load_norm2(v, NM("attn_q_norm.weight"), E, v->d, &Y->q_norm, &Y->q_norm_n,
                             err)) ||
            (rc = load_norm2(v, NM("attn_k_norm.weight"), E, v->d, &Y->k_norm, &Y->k_norm_n,
                             err)) ||
            (rc = load_vec(v, NM("attn_post_norm.weight"), E, false, &Y->attn_post, err)) ||
            (rc = load_vec(v, NM("ffn_post_norm.weight"), E, false, &Y->ffn_post, err)) ||
            (rc = load_lin(v, NM("ffn_up"), F, E, &Y->up, err)) ||
            (rc = load_lin(v, NM("ffn_down"), E, F, &Y->down, err)))
            return rc;
        Y->has_gate = tn_gguf_find_tensor(v->g, NM("ffn_gate.weight")) != NULL;
        if (Y->has_gate && (rc = load_lin(v, NM("ffn_gate"), F, E, &Y->gate, err)))
            return rc;
        const tn_gguf_tensor *os = tn_gguf_find_tensor(v->g, NM("out_scale.weight"));
        if (os) {
            Y->out_scale_n = os->n_dims == 1 && os->ne[0] == 1 ? 1 : E;
            if ((rc = load_vec(v, n, Y->out_scale_n, true, &Y->out_scale, err)))
                return rc;
        }
#undef NM
    }
    memset(I, 0, sizeof *I);
    I->image_size = (int)image_size;
    I->patch_size = (int)v->patch;
    I->n_embd = (int)E;
    I->n_ff = (int)F;
    I->n_layer = (int)v->L;
    I->n_head = (int)v->H;
    I->n_embd_text = (int)v->T;
    I->n_image_tokens = budgets[N_BUDGETS - 1];
    I->eps = v->eps;
    memcpy(I->image_mean, v->mean, sizeof v->mean);
    memcpy(I->image_std, v->std, sizeof v->std);
    I->kind = TN_VISION_GEMMA4;
    return TN_OK;
}

int tn_vg4_load(const tn_gguf *g, tn_vision_info *info, tn_vision_g4 **out, tn_error *err) {
    *out = NULL;
    tn_vision_g4 *v = calloc(1, sizeof *v);
    if (!v)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", tn_gguf_path(g));
    v->g = g;
    int rc = load_all(v, info, err);
    if (rc != TN_OK) {
        tn_vg4_free(v);
        return rc;
    }
    *out = v;
    return TN_OK;
}

/* ------------------------------------------------------------ the pixels */

/* llama.cpp's calc_size_preserved_ratio (HF "smart_resize"), in its float
 * arithmetic: each side aligned to `align` pixels, the area kept within
 * [min_px, max_px] with the aspect ratio. */
static void target_size(int w, int h, int align, int64_t min_px, int64_t max_px, int *ow,
                        int *oh) {
    const float f = (float)align;
#define ROUND_BY(x) ((int)roundf((x) / f) * align)
#define CEIL_BY(x) ((int)ceilf((x) / f) * align)
#define FLOOR_BY(x) ((int)floorf((x) / f) * align)
    int wb = ROUND_BY((float)w), hb = ROUND_BY((float)h);
    if (wb < align)
        wb = align;
    if (hb < align)
        hb = align;
    if ((int64_t)wb * hb > max_px) {
        const float beta = sqrtf((float)h * (float)w / (float)max_px);
        hb = FLOOR_BY((float)h / beta);
        wb = FLOOR_BY((float)w / beta);
        if (hb < align)
            hb = align;
        if (wb < align)
            wb = align;
    } else if ((int64_t)wb * hb < min_px) {
        const float beta = sqrtf((float)min_px / ((float)h * (float)w));
        hb = CEIL_BY((float)h * beta);
        wb = CEIL_BY((float)w * beta);
    }
#undef ROUND_BY
#undef CEIL_BY
#undef FLOOR_BY
    *ow = wb;
    *oh = hb;
}

int tn_vg4_plan(const tn_vision_g4 *v, int budget, int w, int h, int *tw, int *th,
                int *n_tokens, tn_error *err) {
    if (budget <= 0)
        budget = budgets[N_BUDGETS - 1];
    bool ok = false;
    for (int i = 0; i < N_BUDGETS; i++)
        ok |= budgets[i] == budget;
    if (!ok)
        return tn_fail(err, TN_ERR_INVALID, "an image budget of %d tokens is not one Gemma 4 "
                       "takes (70, 140, 280, 560 or 1120)", budget);
    if (w <= 0 || h <= 0)
        return tn_fail(err, TN_ERR_INVALID, "image of %d x %d pixels: nothing to encode", w, h);
    if (w > 65536 || h > 65536) /* "nothing to encode" would mislead here */
        return tn_fail(err, TN_ERR_INVALID, "an image of %d x %d pixels is too large to encode: "
                       "at most 65536 pixels a side; crop or scale it down", w, h);
    const int align = (int)(v->patch * v->pool);
    const int64_t area = (int64_t)align * align;
    int a, b;
    target_size(w, h, align, MIN_TOKENS * area, (int64_t)budget * area, &a, &b);
    const int64_t gx = a / v->patch, gy = b / v->patch;
    const int64_t n = (int64_t)(a / align) * (b / align);
    /* The count is near the budget, not bounded by it: an image enlarged to
     * the 70-token minimum rounds each side up (a 200 x 130 picture costs 77
     * tokens at 70), and an extreme aspect keeps its short side at one token
     * while the long one takes what the area allows (past an aspect of about
     * 4 x budget : 1, more than twice the budget). llama.cpp takes all of
     * these with the same counts.
     * What neither can encode is a side longer than the position tables:
     * llama.cpp's row lookup would fail an assertion; Tern says so. */
    if (gx > v->pos_size || gy > v->pos_size) {
        const long long need = (long long)(gx > gy ? gx : gy), have = (long long)v->pos_size;
        /* At the smallest budget, a smaller one is no way out. */
        if (budget == budgets[0])
            return tn_fail(err, TN_ERR_INVALID, "an image of %d x %d pixels is too narrow for a "
                           "budget of %d tokens: its long side would need %lld patches, and the "
                           "projector's position tables hold %lld; crop it closer to square",
                           w, h, budget, need, have);
        return tn_fail(err, TN_ERR_INVALID, "an image of %d x %d pixels is too narrow for a "
                       "budget of %d tokens: its long side would need %lld patches, and the "
                       "projector's position tables hold %lld; crop it closer to square or "
                       "choose a smaller budget", w, h, budget, need, have);
    }
    *tw = a;
    *th = b;
    if (n_tokens)
        *n_tokens = (int)n;
    return TN_OK;
}

/* Pillow's separable bicubic resampling (a = -0.5, support widened by the
 * scale when reducing, 22-bit fixed-point weights, rounding and clipping to
 * 8 bits after each pass), as llama.cpp's resize_pillow: so the encoder
 * sees the same pixels. */
#define PREC 22

static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0)
        x = -x;
    if (x < 1)
        return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0;
}

static int coeffs(int in, int out, int **bounds_out, int32_t **w_out) {
    double scale = (double)in / out, fscale = scale < 1 ? 1 : scale;
    const double support = 2.0 * fscale;
    const int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = malloc((size_t)out * 2 * sizeof *bounds);
    double *pre = malloc((size_t)out * (size_t)ksize * sizeof *pre);
    int32_t *wt = malloc((size_t)out * (size_t)ksize * sizeof *wt);
    if (!bounds || !pre || !wt) {
        free(bounds), free(pre), free(wt);
        return -1;
    }
    for (int xx = 0; xx < out; xx++) {
        const double center = (xx + 0.5) * scale, ss = 1.0 / fscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in)
            xmax = in;
        xmax -= xmin;
        double ww = 0;
        int x;
        for (x = 0; x < xmax; x++) {
            const double wv = bicubic((x + xmin - center + 0.5) * ss);
            pre[(size_t)xx * ksize + x] = wv;
            ww += wv;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0)
                pre[(size_t)xx * ksize + x] /= ww;
        for (; x < ksize; x++)
            pre[(size_t)xx * ksize + x] = 0;
        bounds[xx * 2] = xmin;
        bounds[xx * 2 + 1] = xmax;
    }
    const double fxp = ldexp(1.0, PREC);
    for (size_t i = 0; i < (size_t)out * (size_t)ksize; i++)
        wt[i] = (int32_t)(pre[i] * fxp + (pre[i] < 0 ? -0.5 : 0.5));
    free(pre);
    *bounds_out = bounds;
    *w_out = wt;
    return ksize;
}

static uint8_t clip8(int32_t v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v; }

/* Arithmetic shift of a possibly negative sum, written so that it is
 * defined C (floor division by 2^PREC). */
static int32_t fx_shift(int32_t s) {
    return s >= 0 ? s >> PREC : -(int32_t)(((uint32_t)(-(int64_t)s) + (1u << PREC) - 1) >> PREC);
}

static int resize_u8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
    if (sw == dw && sh == dh) {
        memcpy(dst, src, (size_t)sw * sh * 3);
        return 0;
    }
    uint8_t *tmp = NULL;
    const uint8_t *cur = src;
    int cw = sw;
    if (dw != sw) {
        int *b;
        int32_t *k;
        const int ks = coeffs(sw, dw, &b, &k);
        tmp = malloc((size_t)dw * sh * 3);
        if (ks < 0 || !tmp) {
            if (ks >= 0)
                free(b), free(k);
            free(tmp);
            return -1;
        }
        for (int y = 0; y < sh; y++) {
            const uint8_t *row = src + (size_t)y * sw * 3;
            uint8_t *o = tmp + (size_t)y * dw * 3;
            for (int xx = 0; xx < dw; xx++) {
                const int xmin = b[xx * 2], xcnt = b[xx * 2 + 1];
                const int32_t *kk = k + (size_t)xx * ks;
                int32_t s0 = 1 << (PREC - 1), s1 = s0, s2 = s0;
                for (int x = 0; x < xcnt; x++) {
                    const uint8_t *p = row + (size_t)(xmin + x) * 3;
                    s0 += p[0] * kk[x];
                    s1 += p[1] * kk[x];
                    s2 += p[2] * kk[x];
                }
                o[xx * 3] = clip8(fx_shift(s0));
                o[xx * 3 + 1] = clip8(fx_shift(s1));
                o[xx * 3 + 2] = clip8(fx_shift(s2));
            }
        }
        free(b), free(k);
        cur = tmp;
        cw = dw;
    }
    if (dh == sh) {
        memcpy(dst, cur, (size_t)cw * sh * 3);
        free(tmp);
        return 0;
    }
    int *b;
    int32_t *k;
    const int ks = coeffs(sh, dh, &b, &k);
    const size_t re = (size_t)cw * 3;
    int32_t *acc = malloc(re * sizeof *acc);
    if (ks < 0 || !acc) {
        if (ks >= 0)
            free(b), free(k);
        free(acc), free(tmp);
        return -1;
    }
    for (int yy = 0; yy < dh; yy++) {
        const int ymin = b[yy * 2], ycnt = b[yy * 2 + 1];
        const int32_t *kk = k + (size_t)yy * ks;
        for (size_t i = 0; i < re; i++)
            acc[i] = 1 << (PREC - 1);
        for (int y = 0; y < ycnt; y++) {
            const uint8_t *row = cur + (size_t)(ymin + y) * re;
            for (size_t i = 0; i < re; i++)
                acc[i] += row[i] * kk[y];
        }
        for (size_t i = 0; i < re; i++)
            dst[(size_t)yy * re + i] = clip8(fx_shift(acc[i]));
    }
    free(b), free(k), free(acc), free(tmp);
    return 0;
}

/* llama.cpp's img_tool::resize with PAD_CEIL (its default for this
 * projector): the image scaled to fit inside tw x th keeping its aspect,
 * centred on black. The plan's size is already near the aspect, so the
 * border is a few pixels at most. */
static int fit_pad(const uint8_t *src, int sw, int sh, uint8_t *dst, int tw, int th) {
    if (sw == tw && sh == th) {
        memcpy(dst, src, (size_t)sw * sh * 3);
        return 0;
    }
    const float sx = (float)tw / (float)sw, sy = (float)th / (float)sh;
    const float s = sx < sy ? sx : sy;
    int nw = (int)ceilf((float)sw * s), nh = (int)ceilf((float)sh * s);
    if (nw > tw)
        nw = tw;
    if (nh > th)
        nh = th;
    uint8_t *r = malloc((size_t)nw * nh * 3);
    if (!r || resize_u8(src, sw, sh, r, nw, nh)) {
        free(r);
        return -1;
    }
    memset(dst, 0, (size_t)tw * th * 3);
    const int ox = (tw - nw) / 2, oy = (th - nh) / 2;
    for (int y = 0; y < nh; y++)
        memcpy(dst + ((size_t)(y + oy) * tw + ox) * 3, r + (size_t)y * nw * 3, (size_t)nw * 3);
    free(r);
    return 0;
}

/* ------------------------------------------------------------ the tower */

static void rms_norm(float *x, int64_t n, const float *w, const float *b, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float inv = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) {
        float y = x[i] * inv;
        if (w)
            y *= w[i];
        if (b)
            y += b[i];
        x[i] = y;
    }
}

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* y = clamp(W clamp(x)) (+ b), for n rows; `tmp` holds n * cols floats
 * when the input is clamped. */
static int lin(tn_cpu *cpu, const g4_lin *l, const float *x, int64_t n, float *y, float *tmp) {
    const int64_t C = l->w.cols, R = l->w.rows;
    if (l->in_lo > -FLT_MAX || l->in_hi < FLT_MAX) {
        for (int64_t i = 0; i < n * C; i++)
            tmp[i] = clampf(x[i], l->in_lo, l->in_hi);
        x = tmp;
    }
    int rc = tn_matmul(cpu, &l->w, x, n, y);
    if (rc != TN_OK)
        return rc;
    if (l->out_lo > -FLT_MAX || l->out_hi < FLT_MAX)
        for (int64_t i = 0; i < n * R; i++)
            y[i] = clampf(y[i], l->out_lo, l->out_hi);
    if (l->b)
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < R; i++)
                y[r * R + i] += l->b[i];
    return TN_OK;
}

/* NeoX rotation of n values at x by position p: pairs (i, i + n/2) turn
 * by p * theta^(-2i/n), the angle advanced by repeated multiplication as
 * ggml's rope cache does. */
static void rope_neox(float *x, int64_t n, int64_t p, float theta) {
    const float step = powf(theta, -2.0f / (float)n);
    float ang = (float)p;
    for (int64_t i = 0; i < n / 2; i++) {
        const float c = cosf(ang), s = sinf(ang);
        const float a = x[i], b = x[i + n / 2];
        x[i] = a * c - b * s;
        x[i + n / 2] = a * s + b * c;
        ang *= step;
    }
}

static float act(int op, float x) {
    switch (op) {
    case FFN_GELU:
        return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case FFN_SILU:
        return x / (1.0f + expf(-x));
    default:
        return x / (1.0f + expf(-1.702f * x));
    }
}

int tn_vg4_encode(const tn_vision_g4 *v, const float *rgb, int w, int h, int budget, float *out,
                  int *n_tokens, tn_cpu *cpu, tn_vision_bufs *bufs, tn_error *err) {
    int tw, th, n_tok;
    int rc = tn_vg4_plan(v, budget, w, h, &tw, &th, &n_tok, err);
    if (rc != TN_OK)
        return rc;
    const int64_t E = v->E, F = v->F, T = v->T, ps = v->patch, d = v->d, m = v->pool;
    const int64_t gx = tw / ps, gy = th / ps, P = gx * gy, K = 3 * ps * ps;
    const int64_t wide = F > K ? F : K;
    const int64_t wmax = wide > E ? wide : E;
    /* The caller's buffers (tn_vision_bufs): freed after the guarded step. */
    tn_vision_bufs *b = bufs;
    uint8_t *src = tn_vision_alloc(b, (size_t)w * h * 3);
    uint8_t *pix = tn_vision_alloc(b, (size_t)tw * th * 3);
    float *x = tn_vision_alloc(b, (size_t)(P * E) * sizeof *x);
    float *t = tn_vision_alloc(b, (size_t)(P * E) * sizeof *t);
    float *q = tn_vision_alloc(b, (size_t)(P * E) * sizeof *q);
    float *k = tn_vision_alloc(b, (size_t)(P * E) * sizeof *k);
    float *vv = tn_vision_alloc(b, (size_t)(P * E) * sizeof *vv);
    float *u = tn_vision_alloc(b, (size_t)(P * wmax) * sizeof *u);
    float *g = tn_vision_alloc(b, (size_t)(P * F) * sizeof *g);
    float *tmp = tn_vision_alloc(b, (size_t)(P * wmax) * sizeof *tmp);
    if (!src || !pix || !x || !t || !q || !k || !vv || !u || !g || !tmp) {
        rc = tn_fail(err, TN_ERR_NOMEM, "out of memory encoding an image (%d x %d pixels)", tw,
                     th);
        goto done;
    }
    /* The reference works on 8-bit pixels; inputs in [0, 1] from 8-bit
     * images come back exactly. */
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        const float c = rgb[i] * 255.0f;
        src[i] = !(c > 0) ? 0 : c >= 255 ? 255 : (uint8_t)lrintf(c);
    }
    if (fit_pad(src, w, h, pix, tw, th)) {
        rc = tn_fail(err, TN_ERR_NOMEM, "out of memory resizing an image");
        goto done;
    }
    /* Patch rows as the kernel's [channel][y][x], normalized, then 2x - 1. */
    for (int64_t py = 0; py < th; py++)
        for (int64_t px = 0; px < tw; px++) {
            const int64_t patch = (py / ps) * gx + px / ps;
            for (int c = 0; c < 3; c++) {
                const float val =
                    ((float)pix[(py * tw + px) * 3 + c] / 255.0f - v->mean[c]) / v->std[c];
                u[patch * K + c * ps * ps + (py % ps) * ps + px % ps] = val * 2.0f - 1.0f;
            }
        }
    if ((rc = tn_matmul(cpu, &v->patch_w, u, P, x)) != TN_OK)
        goto mm_fail;
    for (int64_t i = 0; i < P; i++) {
        const float *ex = v->pos + (i % gx) * E, *ey = v->pos + (v->pos_size + i / gx) * E;
        for (int64_t e = 0; e < E; e++)
            x[i * E + e] = (x[i * E + e] + ex[e]) + ey[e];
    }
    if (v->pre_w || v->pre_b)
        for (int64_t i = 0; i < P; i++)
            rms_norm(x + i * E, E, v->pre_w, v->pre_b, v->eps);
    for (int64_t l = 0; l < v->L; l++) {
        const g4_layer *Y = &v->layers[l];
        memcpy(t, x, (size_t)(P * E) * sizeof *t);
        for (int64_t i = 0; i < P; i++)
            rms_norm(t + i * E, E, Y->ln1_w, Y->ln1_b, v->eps);
        if ((rc = lin(cpu, &Y->q, t, P, q, tmp)) || (rc = lin(cpu, &Y->k, t, P, k, tmp)) ||
            (rc = lin(cpu, &Y->v, t, P, vv, tmp)))
            goto mm_fail;
        for (int64_t i = 0; i < P; i++) {
            const int64_t px = i % gx, py = i / gx;
            float *qi = q + i * E, *ki = k + i * E, *vi = vv + i * E;
            if (Y->q_norm_n == E)
                rms_norm(qi, E, Y->q_norm, NULL, v->eps);
            if (Y->k_norm_n == E)
                rms_norm(ki, E, Y->k_norm, NULL, v->eps);
            for (int64_t hh = 0; hh < v->H; hh++) {
                float *qh = qi + hh * d, *kh = ki + hh * d;
                if (Y->q_norm_n == d)
                    rms_norm(qh, d, Y->q_norm, NULL, v->eps);
                if (Y->k_norm_n == d)
                    rms_norm(kh, d, Y->k_norm, NULL, v->eps);
                rope_neox(qh, d / 2, px, 100.0f);
                rope_neox(qh + d / 2, d / 2, py, 100.0f);
                rope_neox(kh, d / 2, px, 100.0f);
                rope_neox(kh + d / 2, d / 2, py, 100.0f);
                rms_norm(vi + hh * d, d, NULL, NULL, v->eps);
            }
        }
        if ((rc = tn_vision_attend(cpu, q, k, vv, t, P, E, v->H, 1.0f, err)) != TN_OK)
            goto done;
        if ((rc = lin(cpu, &Y->o, t, P, q, tmp)))
            goto mm_fail;
        for (int64_t i = 0; i < P; i++) {
            if (Y->attn_post)
                rms_norm(q + i * E, E, Y->attn_post, NULL, v->eps);
            for (int64_t e = 0; e < E; e++)
                x[i * E + e] += q[i * E + e];
        }
        memcpy(t, x, (size_t)(P * E) * sizeof *t);
        for (int64_t i = 0; i < P; i++)
            rms_norm(t + i * E, E, Y->ln2_w, Y->ln2_b, v->eps);
        if ((rc = lin(cpu, &Y->up, t, P, u, tmp)))
            goto mm_fail;
        if (Y->has_gate) {
            if ((rc = lin(cpu, &Y->gate, t, P, g, tmp)))
                goto mm_fail;
            for (int64_t i = 0; i < P * F; i++)
                u[i] = act(v->ffn_op, g[i]) * u[i];
        } else {
            for (int64_t i = 0; i < P * F; i++)
                u[i] = act(v->ffn_op, u[i]);
        }
        if ((rc = lin(cpu, &Y->down, u, P, q, tmp)))
            goto mm_fail;
        for (int64_t i = 0; i < P; i++) {
            if (Y->ffn_post)
                rms_norm(q + i * E, E, Y->ffn_post, NULL, v->eps);
            for (int64_t e = 0; e < E; e++) {
                float y = x[i * E + e] + q[i * E + e];
                if (Y->out_scale)
                    y *= Y->out_scale[Y->out_scale_n == 1 ? 0 : e];
                x[i * E + e] = y;
            }
        }
    }
    if (v->post_w || v->post_b)
        for (int64_t i = 0; i < P; i++)
            rms_norm(x + i * E, E, v->post_w, v->post_b, v->eps);
    /* m x m average pool over the patch grid (whole windows only), scaled
     * by sqrt(width); then the standardization and the pre-projection norm. */
    const int64_t ox = gx / m, oy = gy / m;
    const float scale = sqrtf((float)E), inv_area = 1.0f / (float)(m * m);
    for (int64_t ty = 0; ty < oy; ty++)
        for (int64_t tx = 0; tx < ox; tx++) {
            float *dst = t + (ty * ox + tx) * E;
            for (int64_t e = 0; e < E; e++)
                dst[e] = 0;
            for (int64_t dy = 0; dy < m; dy++)
                for (int64_t dx = 0; dx < m; dx++) {
                    const float *s = x + ((ty * m + dy) * gx + tx * m + dx) * E;
                    for (int64_t e = 0; e < E; e++)
                        dst[e] += s[e];
                }
            for (int64_t e = 0; e < E; e++) {
                float y = dst[e] * inv_area * scale;
                if (v->std_bias && v->std_scale)
                    y = (y - v->std_bias[e]) * v->std_scale[e];
                dst[e] = y;
            }
            rms_norm(dst, E, NULL, NULL, v->eps);
        }
    if ((rc = lin(cpu, &v->proj, t, ox * oy, out, tmp)))
        goto mm_fail;
    (void)T;
    if (n_tokens)
        *n_tokens = n_tok;
    goto done;
mm_fail:
    rc = tn_fail(err, rc, "%s: matrix product failed (%s): unsupported weight type?", gpath(v),
                 tn_status_name(rc));
done:
    return rc;
}
