/* The Gemma 4 vision encoder (projector type "gemma4v") against a naive
 * double-precision reference written here from llama.cpp's graph
 * (tools/mtmd/models/gemma4v.cpp, build_vit) on projectors from
 * tn_mkmodel_vision; the token plan of every budget; determinism; and
 * files and arguments it must refuse. Agreement with llama.cpp itself is
 * tools/compare/gemma4v-compare.sh (docs/VISION.md). */
#include "tn-test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4

static double scalar(const tn_gguf *g, const char *base, const char *sfx, double dflt) {
    char n[128];
    snprintf(n, sizeof n, "%s.%s", base, sfx);
    double *v = tn_test_tensor(g, n, NULL);
    const double r = v ? v[0] : dflt;
    free(v);
    return r;
}

static int64_t key(const tn_gguf *g, const char *k) {
    int64_t v = 0;
    tn_gguf_get_int(g, k, &v);
    return v;
}

static void rms(double *x, int64_t n, const double *w, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    const double inv = 1.0 / sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] * inv * (w ? w[i] : 1.0);
}

static double clampd(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* A Gemma4ClippableLinear of `base`: y = clamp(W clamp(x)), rows of x. */
static void clin(const tn_gguf *g, const char *base, const double *x, int64_t rows, int64_t in,
                 double *y) {
    char n[128];
    snprintf(n, sizeof n, "%s.weight", base);
    int64_t c;
    double *W = tn_test_tensor(g, n, &c);
    const int64_t out = c / in;
    const double ilo = scalar(g, base, "input_min", -DBL_MAX);
    const double ihi = scalar(g, base, "input_max", DBL_MAX);
    const double olo = scalar(g, base, "output_min", -DBL_MAX);
    const double ohi = scalar(g, base, "output_max", DBL_MAX);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = 0;
            for (int64_t i = 0; i < in; i++)
                acc += W[o * in + i] * clampd(x[r * in + i], ilo, ihi);
            y[r * out + o] = clampd(acc, olo, ohi);
        }
    free(W);
}

static void rope(double *x, int64_t n, int64_t p) {
    for (int64_t i = 0; i < n / 2; i++) {
        const double a = p * pow(100.0, -2.0 * i / n), c = cos(a), s = sin(a);
        const double u = x[i], v = x[i + n / 2];
        x[i] = u * c - v * s;
        x[i + n / 2] = u * s + v * c;
    }
}

/* The reference on an image of exactly gw x gh patches (no resize: the
 * caller picks a size the plan keeps). Returns [tokens][T]. */
static double *reference(const char *path, const unsigned char *px, int gw, int gh,
                         int64_t *T_out, int64_t *n_out) {
    tn_gguf *g = NULL;
    if (tn_gguf_open(path, &g, NULL) != TN_OK)
        return NULL;
    const int64_t ps = key(g, "clip.vision.patch_size"), E = key(g, "clip.vision.embedding_length");
    const int64_t F = key(g, "clip.vision.feed_forward_length");
    const int64_t L = key(g, "clip.vision.block_count");
    const int64_t H = key(g, "clip.vision.attention.head_count"), d = E / H, m = 3;
    const double eps = 1e-6;
    const int64_t P = (int64_t)gw * gh, K = 3 * ps * ps, W = gw * ps;
    int64_t c;
    double *pw = tn_test_tensor(g, "v.patch_embd.weight", NULL);
    double *pos = tn_test_tensor(g, "v.position_embd.weight", &c);
    const int64_t npos = c / (2 * E);
    double *x = calloc((size_t)(P * E), sizeof *x), *t = malloc((size_t)(P * E) * sizeof *t);
    double *q = malloc((size_t)(P * E) * sizeof *q), *k = malloc((size_t)(P * E) * sizeof *k);
    double *v = malloc((size_t)(P * E) * sizeof *v), *o = malloc((size_t)(P * E) * sizeof *o);
    double *up = malloc((size_t)(P * F) * sizeof *up), *gt = malloc((size_t)(P * F) * sizeof *gt);
    double *s = malloc((size_t)P * sizeof *s), *patch = malloc((size_t)K * sizeof *patch);
    for (int64_t i = 0; i < P; i++) {
        const int64_t pxi = i % gw, pyi = i / gw;
        for (int ch = 0; ch < 3; ch++)
            for (int64_t yy = 0; yy < ps; yy++)
                for (int64_t xx = 0; xx < ps; xx++) {
                    /* mean 0 and std 1 in the file: x/255 * 2 - 1 */
                    const double val = px[((pyi * ps + yy) * W + pxi * ps + xx) * 3 + ch] / 255.0;
                    patch[ch * ps * ps + yy * ps + xx] = val * 2 - 1;
                }
        for (int64_t e = 0; e < E; e++) {
            double acc = 0;
            for (int64_t j = 0; j < K; j++)
                acc += pw[e * K + j] * patch[j];
            x[i * E + e] = acc + pos[pxi * E + e] + pos[(npos + pyi) * E + e];
        }
    }
    char n[96], b[96];
    for (int64_t l = 0; l < L; l++) {
#define NM(p) (snprintf(n, sizeof n, "v.blk.%lld.%s", (long long)l, p), n)
#define BS(p) (snprintf(b, sizeof b, "v.blk.%lld.%s", (long long)l, p), b)
        double *ln1 = tn_test_tensor(g, NM("ln1.weight"), NULL), *ln2 = tn_test_tensor(g, NM("ln2.weight"), NULL);
        double *qn = tn_test_tensor(g, NM("attn_q_norm.weight"), NULL);
        double *kn = tn_test_tensor(g, NM("attn_k_norm.weight"), NULL);
        double *apn = tn_test_tensor(g, NM("attn_post_norm.weight"), NULL);
        double *fpn = tn_test_tensor(g, NM("ffn_post_norm.weight"), NULL);
        double *osc = tn_test_tensor(g, NM("out_scale.weight"), NULL);
        memcpy(t, x, (size_t)(P * E) * sizeof *t);
        for (int64_t i = 0; i < P; i++)
            rms(t + i * E, E, ln1, eps);
        clin(g, BS("attn_q"), t, P, E, q);
        clin(g, BS("attn_k"), t, P, E, k);
        clin(g, BS("attn_v"), t, P, E, v);
        for (int64_t i = 0; i < P; i++)
            for (int64_t h = 0; h < H; h++) {
                double *qh = q + i * E + h * d, *kh = k + i * E + h * d;
                rms(qh, d, qn, eps);
                rms(kh, d, kn, eps);
                rope(qh, d / 2, i % gw);
                rope(qh + d / 2, d / 2, i / gw);
                rope(kh, d / 2, i % gw);
                rope(kh + d / 2, d / 2, i / gw);
                rms(v + i * E + h * d, d, NULL, eps);
            }
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < P; i++) {
                double mx = -1e300, sum = 0;
                for (int64_t j = 0; j < P; j++) {
                    double acc = 0;
                    for (int64_t e = 0; e < d; e++)
                        acc += q[i * E + h * d + e] * k[j * E + h * d + e];
                    s[j] = acc; /* scale 1 */
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int64_t j = 0; j < P; j++)
                    sum += (s[j] = exp(s[j] - mx));
                for (int64_t e = 0; e < d; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < P; j++)
                        acc += s[j] * v[j * E + h * d + e];
                    o[i * E + h * d + e] = acc / sum;
                }
            }
        clin(g, BS("attn_out"), o, P, E, t);
        for (int64_t i = 0; i < P; i++) {
            rms(t + i * E, E, apn, eps);
            for (int64_t e = 0; e < E; e++)
                x[i * E + e] += t[i * E + e];
        }
        memcpy(t, x, (size_t)(P * E) * sizeof *t);
        for (int64_t i = 0; i < P; i++)
            rms(t + i * E, E, ln2, eps);
        clin(g, BS("ffn_up"), t, P, E, up);
        clin(g, BS("ffn_gate"), t, P, E, gt);
        for (int64_t i = 0; i < P * F; i++)
            up[i] *= gt[i] / (1 + exp(-1.702 * gt[i])); /* quick GELU: no clip.use_gelu */
        clin(g, BS("ffn_down"), up, P, F, t);
        for (int64_t i = 0; i < P; i++) {
            rms(t + i * E, E, fpn, eps);
            for (int64_t e = 0; e < E; e++)
                x[i * E + e] = (x[i * E + e] + t[i * E + e]) * osc[0];
        }
        free(ln1), free(ln2), free(qn), free(kn), free(apn), free(fpn), free(osc);
#undef NM
#undef BS
    }
    double *sb = tn_test_tensor(g, "v.std_bias", NULL), *ss = tn_test_tensor(g, "v.std_scale", NULL);
    const int64_t ox = gw / m, oy = gh / m, nt = ox * oy;
    for (int64_t ty = 0; ty < oy; ty++)
        for (int64_t tx = 0; tx < ox; tx++) {
            double *dst = t + (ty * ox + tx) * E;
            for (int64_t e = 0; e < E; e++) {
                double acc = 0;
                for (int64_t dy = 0; dy < m; dy++)
                    for (int64_t dx = 0; dx < m; dx++)
                        acc += x[((ty * m + dy) * gw + tx * m + dx) * E + e];
                dst[e] = (acc / (m * m) * sqrt((double)E) - sb[e]) * ss[e];
            }
            rms(dst, E, NULL, eps);
        }
    const tn_gguf_tensor *pt = tn_gguf_find_tensor(g, "mm.input_projection.weight");
    const int64_t T = (int64_t)pt->ne[1];
    double *out = malloc((size_t)(nt * T) * sizeof *out);
    clin(g, "mm.input_projection", t, nt, E, out);
    free(pw), free(pos), free(x), free(t), free(q), free(k), free(v), free(o), free(up), free(gt);
    free(s), free(patch), free(sb), free(ss);
    tn_gguf_close(g);
    *T_out = T;
    *n_out = nt;
    return out;
}

static unsigned char *image(int w, int h, uint64_t seed) {
    unsigned char *px = malloc((size_t)w * h * 3);
    uint64_t st = seed;
    for (int i = 0; i < w * h * 3; i++)
        px[i] = (unsigned char)(tn_test_rand(&st) >> 56);
    return px;
}

static float *to_float(const unsigned char *px, int w, int h) {
    float *f = malloc((size_t)w * h * 3 * sizeof *f);
    for (int i = 0; i < w * h * 3; i++)
        f[i] = px[i] / 255.0f;
    return f;
}

static char *write_projector_pos(const char *type, const char *name, int n_pos) {
    static char paths[4][512];
    static int k = 0;
    char *path = paths[k++ % 4];
    snprintf(path, 512, "%s/%s", tn_test_tmpdir(), name);
    tn_mkmodel_vision_params p = tn_mkmodel_vision_default_params();
    p.projector = "gemma4v";
    p.type = type;
    p.patch_size = 4; /* 12 pixels per token side */
    p.n_embd = 32;
    p.n_ff = 48;
    p.n_layer = 2;
    p.n_head = 2;
    p.n_embd_text = 24;
    p.n_pos = n_pos;
    p.seed = 5;
    tn_error err;
    CHECKF(tn_mkmodel_vision(&p, path, &err) == TN_OK, "%s", err.message);
    return path;
}

static char *write_projector(const char *type, const char *name) {
    return write_projector_pos(type, name, 128); /* 114 patches a side at 1120 tokens */
}

static void test_reference(const char *path, const char *what) {
    tn_vision *v = NULL;
    tn_error err;
    if (tn_vision_load(path, &v, &err) != TN_OK) {
        CHECKF(0, "%s: %s", what, err.message);
        return;
    }
    const tn_vision_info *I = tn_vision_get_info(v);
    CHECK(I->kind == TN_VISION_GEMMA4);
    CHECK(I->n_embd_text == 24 && I->patch_size == 4 && I->n_embd == 32);
    /* 120 x 84 pixels are 10 x 7 tokens of 12 pixels: the plan keeps the
     * size at budget 70, so no resampling comes between the two. */
    const int w = 120, h = 84;
    unsigned char *px = image(w, h, 11);
    float *rgb = to_float(px, w, h);
    int64_t T = 0, nt = 0;
    double *ref = reference(path, px, w / 4, h / 4, &T, &nt);
    CHECK(ref && nt == 70 && T == 24);
    CHECK(tn_vision_image_tokens(v, 70, w, h, NULL) == 70);
    float *out = malloc((size_t)(70 * 24) * sizeof *out);
    float *out2 = malloc((size_t)(70 * 24) * sizeof *out2);
    int n = 0;
    CHECKF(tn_vision_encode(v, rgb, w, h, 70, out, &n, 1, &err) == TN_OK, "%s", err.message);
    CHECK(n == 70);
    double mx = 0, dmax = 0;
    for (int i = 0; ref && i < 70 * 24; i++) {
        mx = fmax(mx, fabs(ref[i]));
        dmax = fmax(dmax, fabs(out[i] - ref[i]));
    }
    printf("%s: max|ref| %.3f, max|diff| %.3g\n", what, mx, dmax);
    /* f16 weights: the reference reads the same rounded weights */
    CHECKF(dmax <= TOL * fmax(1, mx), "%s: max diff %g (max |ref| %g)", what, dmax, mx);
    /* Threads do not change a bit, nor does the attention path. */
    CHECK(tn_vision_encode(v, rgb, w, h, 70, out2, &n, 2, &err) == TN_OK);
    CHECK(!memcmp(out, out2, sizeof(float) * 70 * 24));
    setenv("TERN_VISION_ATTENTION", "scalar", 1);
    CHECK(tn_vision_encode(v, rgb, w, h, 70, out2, &n, 1, &err) == TN_OK);
    unsetenv("TERN_VISION_ATTENTION");
    double ad = 0;
    for (int i = 0; i < 70 * 24; i++)
        ad = fmax(ad, fabs(out[i] - out2[i]));
    CHECKF(ad <= 1e-5 * fmax(1, mx), "scalar vs matrix attention: %g", ad);
    free(px), free(rgb), free(ref), free(out), free(out2);
    tn_vision_free(v);
}

static void test_budgets(const char *path) {
    tn_vision *v = NULL;
    tn_error err;
    if (tn_vision_load(path, &v, &err) != TN_OK) {
        CHECKF(0, "%s", err.message);
        return;
    }
    const int *list = NULL;
    CHECK(tn_vision_budgets(v, &list) == 5 && list && list[0] == 70 && list[4] == 1120);
    /* 480 x 360 (40 x 30 = 1200 tokens of 12 px) under each budget, worked
     * by hand from llama.cpp's calc_size_preserved_ratio: beta =
     * sqrt(480 * 360 / (budget * 144)), sides floor(side / beta / 12) * 12. */
    static const int want[5] = {9 * 7, 13 * 10, 19 * 14, 27 * 20, 38 * 28};
    for (int i = 0; i < 5; i++) {
        const int got = tn_vision_image_tokens(v, list[i], 480, 360, &err);
        CHECKF(got == want[i], "budget %d: %d tokens, want %d", list[i], got, want[i]);
        CHECK(got <= tn_vision_tokens(v, list[i]));
    }
    CHECK(tn_vision_tokens(v, 0) == 1120);
    CHECK(tn_vision_image_tokens(v, 0, 480, 360, &err) == 38 * 28);
    /* A small image is enlarged to at least 70 tokens, rounding each side
     * up: 50 x 40 -> beta = sqrt(10080 / 2000) = 2.245, sides
     * ceil(112.2 / 12) = 10 and ceil(89.8 / 12) = 8: 80 tokens. */
    const int small = tn_vision_image_tokens(v, 70, 50, 40, &err);
    CHECKF(small == 80, "50 x 40 at 70: %d tokens", small);
    /* Encode at two budgets with resampling (and padding) on the way: the
     * count is the plan's, every value finite. */
    unsigned char *px = image(200, 130, 3);
    float *rgb = to_float(px, 200, 130);
    for (int b = 0; b < 2; b++) {
        const int budget = b ? 140 : 70;
        const int nt = tn_vision_image_tokens(v, budget, 200, 130, &err);
        CHECK(nt > 0 && nt <= 2 * budget);
        float *out = malloc((size_t)(nt > 0 ? nt : 1) * 24 * sizeof *out);
        int n = -1;
        CHECKF(tn_vision_encode(v, rgb, 200, 130, budget, out, &n, 2, &err) == TN_OK, "%s",
               err.message);
        CHECK(n == nt);
        bool finite = true;
        for (int i = 0; n > 0 && i < n * 24; i++)
            finite &= isfinite(out[i]) != 0;
        CHECK(finite);
        free(out);
    }
    /* Budgets Gemma 4 does not take, and an image too narrow to hold. */
    CHECK(tn_vision_tokens(v, 100) == 0);
    CHECK(tn_vision_check_budget(v, 100, &err) == TN_ERR_INVALID);
    CHECKF(strstr(err.message, "70, 140, 280, 560 or 1120") != NULL, "%s", err.message);
    CHECK(tn_vision_check_budget(v, 280, &err) == TN_OK);
    float dummy[24 * 4];
    CHECK(tn_vision_encode(v, rgb, 200, 130, 64, dummy, NULL, 1, &err) == TN_ERR_INVALID);
    CHECK(tn_vision_image_tokens(v, 70, 4000, 2, &err) == TN_ERR_INVALID);
    CHECKF(strstr(err.message, "too narrow") != NULL, "%s", err.message);
    /* 70 is the smallest budget: a smaller one is not offered as the way out */
    CHECKF(strstr(err.message, "smaller budget") == NULL, "%s", err.message);
    /* beyond the position tables (128 patches a side) */
    CHECK(tn_vision_image_tokens(v, 1120, 3000, 900, &err) == TN_ERR_INVALID);
    CHECKF(strstr(err.message, "too narrow") != NULL, "%s", err.message);
    CHECKF(strstr(err.message, "smaller budget") != NULL, "%s", err.message);
    /* A side over 65536 pixels is too large, not empty (the server
     * answered "image of 70000 x 900 pixels: nothing to encode"). */
    CHECK(tn_vision_image_tokens(v, 70, 70000, 900, &err) == TN_ERR_INVALID);
    CHECKF(strstr(err.message, "70000 x 900") && strstr(err.message, "too large"), "%s",
           err.message);
    CHECK(tn_vision_encode(v, rgb, 0, 130, 70, dummy, NULL, 1, &err) == TN_ERR_INVALID);
    CHECK(tn_vision_encode(v, NULL, 200, 130, 70, dummy, NULL, 1, &err) == TN_ERR_INVALID);
    free(px), free(rgb);
    tn_vision_free(v);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    if (fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

/* Replaces the first occurrence of `from` (same length as `to`). */
static bool patch_bytes(unsigned char *b, size_t n, const char *from, const char *to) {
    const size_t l = strlen(from);
    for (size_t i = 0; i + l <= n; i++)
        if (!memcmp(b + i, from, l)) {
            memcpy(b + i, to, l);
            return true;
        }
    return false;
}

/* The f32 value of a key: after the key's text, its type (4 bytes, 6 for
 * f32), then the value. */
static bool patch_f32(unsigned char *b, size_t n, const char *key, float value) {
    const size_t l = strlen(key);
    for (size_t i = 0; i + l + 8 <= n; i++)
        if (!memcmp(b + i, key, l) && b[i + l] == 6 && !b[i + l + 1] && !b[i + l + 2] &&
            !b[i + l + 3]) {
            memcpy(b + i + l + 4, &value, 4);
            return true;
        }
    return false;
}

static void expect_refused(const char *path, const char *needle) {
    tn_vision *v = NULL;
    tn_error err = {0};
    const int rc = tn_vision_load(path, &v, &err);
    CHECKF(rc != TN_OK && v == NULL, "%s loaded", path);
    CHECKF(!needle || strstr(err.message, needle), "'%s' not in: %s", needle, err.message);
    tn_vision_free(v);
}

static void test_garbage(const char *good) {
    size_t n = 0;
    unsigned char *b = slurp(good, &n);
    CHECK(b != NULL && n > 1000);
    if (!b)
        return;
    char path[600];
    snprintf(path, sizeof path, "%s/bad.gguf", tn_test_tmpdir());
    /* cut short: the header's tensors point past the end */
    spit(path, b, n / 2);
    expect_refused(path, NULL);
    spit(path, b, 7);
    expect_refused(path, NULL);
    /* random bytes */
    uint64_t st = 9;
    unsigned char *r = malloc(4096);
    for (int i = 0; i < 4096; i++)
        r[i] = (unsigned char)(tn_test_rand(&st) >> 56);
    spit(path, r, 4096);
    expect_refused(path, NULL);
    free(r);
    /* a missing tensor, a renamed one, a clamp bound of two values */
    unsigned char *c = malloc(n);
    memcpy(c, b, n);
    CHECK(patch_bytes(c, n, "v.blk.1.ffn_down.weight", "v.blk.1.ffn_dowX.weight"));
    spit(path, c, n);
    expect_refused(path, "v.blk.1.ffn_down.weight");
    memcpy(c, b, n);
    CHECK(patch_bytes(c, n, "v.std_scale", "v.std_scalX"));
    spit(path, c, n); /* optional: without it there is no standardization */
    tn_vision *v = NULL;
    tn_error err;
    CHECKF(tn_vision_load(path, &v, &err) == TN_OK, "%s", err.message);
    tn_vision_free(v);
    /* The metadata readers Gemma 4 shares with Gemma 3 (tn_vision_key_*),
     * with Gemma 4's own rules: image_mean is required. */
    memcpy(c, b, n);
    CHECK(patch_bytes(c, n, "clip.vision.image_mean", "clip.vision.image_meaX"));
    spit(path, c, n);
    expect_refused(path, "clip.vision.image_mean must be an array of 3 floats");
    memcpy(c, b, n);
    CHECK(patch_bytes(c, n, "clip.vision.attention.layer_norm_epsilon",
                      "clip.vision.attention.layer_norm_epsiloX"));
    spit(path, c, n);
    expect_refused(path, "missing or bad clip.vision.attention.layer_norm_epsilon");
    /* A denormal epsilon is positive, yet adds nothing to a norm (it loaded). */
    memcpy(c, b, n);
    CHECK(patch_f32(c, n, "clip.vision.attention.layer_norm_epsilon", 1e-44f));
    spit(path, c, n);
    expect_refused(path, "metadata key 'clip.vision.attention.layer_norm_epsilon' is "
                         "9.80909e-45; expected a number from 1e-12 to 0.1");
    memcpy(c, b, n);
    CHECK(patch_bytes(c, n, "clip.vision.block_count", "clip.vision.block_counX"));
    spit(path, c, n);
    expect_refused(path, "missing or mistyped key 'clip.vision.block_count' (expected a whole "
                         "number in [1, 1024])");
    /* a projector type Tern does not run */
    memcpy(c, b, n);
    CHECK(patch_bytes(c, n, "gemma4v", "gemma4u"));
    spit(path, c, n);
    expect_refused(path, "gemma4u");
    /* the unified variant is named */
    free(b), free(c);
}

/* Extreme aspect ratios, with position tables long enough for them (1024
 * patches a side; patch 4, so 12 pixels a token as above). The counts are
 * llama.cpp's (libmtmd at de3ff81, through tools/compare/mtmd-embd.cpp on a
 * projector of this geometry): it keeps one token across the short side
 * and lets the long side take what the area allows, past twice the budget
 * (4000 x 14 at 70: 141 tokens); only a side beyond the position tables is
 * refused, where llama.cpp's row lookup would fail an assertion. */
static void test_extreme_aspect(const char *path) {
    tn_vision *v = NULL;
    tn_error err;
    if (tn_vision_load(path, &v, &err) != TN_OK) {
        CHECKF(0, "%s", err.message);
        return;
    }
    static const struct {
        int w, h, budget, want;
    } cases[] = {
        {4000, 60, 70, 68},    {4000, 60, 140, 96},    {4000, 60, 280, 272},
        {4000, 60, 560, 386},  {4000, 60, 1120, 1092}, {60, 4000, 70, 68},
        {60, 4000, 140, 96},   {60, 4000, 280, 272},   {60, 4000, 560, 386},
        {60, 4000, 1120, 1092}, {4000, 14, 70, 141},   {14, 4000, 70, 141},
        {4000, 14, 1120, 333}, {4000, 4, 70, 264},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int got = tn_vision_image_tokens(v, cases[i].budget, cases[i].w, cases[i].h, &err);
        CHECKF(got == cases[i].want, "%d x %d at %d: %d tokens (%s), want %d", cases[i].w,
               cases[i].h, cases[i].budget, got, got < 0 ? err.message : "", cases[i].want);
    }
    /* 4000 x 4 at 140 would need 1122 patches along its long side
     * (llama.cpp aborts on it: GGML_ASSERT in get_rows). */
    CHECK(tn_vision_image_tokens(v, 140, 4000, 4, &err) == TN_ERR_INVALID);
    CHECKF(strstr(err.message, "1122") && strstr(err.message, "1024"), "%s", err.message);
    /* One of them encoded: the plan's count of finite rows. */
    unsigned char *px = image(4000, 14, 7);
    float *rgb = to_float(px, 4000, 14);
    float *out = malloc((size_t)141 * 24 * sizeof *out);
    int n = -1;
    CHECKF(tn_vision_encode(v, rgb, 4000, 14, 70, out, &n, 2, &err) == TN_OK, "%s",
           err.message);
    CHECK(n == 141);
    bool finite = true;
    for (int i = 0; n == 141 && i < 141 * 24; i++)
        finite &= isfinite(out[i]) != 0;
    CHECK(finite);
    free(px), free(rgb), free(out);
    tn_vision_free(v);
}

int main(void) {
    const char *f32 = write_projector("f32", "g4v-f32.gguf");
    const char *f16 = write_projector("f16", "g4v-f16.gguf");
    test_reference(f32, "f32");
    test_reference(f16, "f16");
    test_budgets(f32);
    test_garbage(f32);
    test_extreme_aspect(write_projector_pos("f32", "g4v-wide.gguf", 1024));
    return tn_test_finish("vision-gemma4");
}
