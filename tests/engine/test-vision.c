/* The Gemma 3 vision encoder against a naive double-precision reference
 * written here from the published architecture (SigLIP ViT, 4x4 average
 * pool, RMSNorm, projection), on synthetic projectors from tn_mkmodel_vision;
 * determinism, the token budget, and bad inputs. */
#include "tn-test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Relative tolerance: max |got - ref| <= TOL * max(1, max |ref|). f32 weights
 * and f32 accumulation over widths <= 128 stay near 1e-6 (measured). */
#define TOL 1e-4

static int64_t key(const tn_gguf *g, const char *k) {
    int64_t v = 0;
    tn_gguf_get_int(g, k, &v);
    return v;
}

static void src_index(int i, int dst_n, int src_n, int *i0, int *i1, double *f) {
    double x = (i + 0.5) * src_n / dst_n - 0.5;
    if (x < 0)
        x = 0;
    int a = (int)x;
    if (a > src_n - 1)
        a = src_n - 1;
    *i0 = a;
    *i1 = a + 1 < src_n ? a + 1 : a;
    *f = x - a;
}

static void ln(double *x, const double *w, const double *b, int64_t n, double eps, double *y) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; i++)
        m += x[i];
    m /= n;
    for (int64_t i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    v /= n;
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] - m) / sqrt(v + eps) * w[i] + b[i];
}

/* y[r][o] = b[o] + sum_i W[o][i] x[r][i] */
static void lin(const double *W, const double *b, const double *x, int64_t rows, int64_t in,
                int64_t outn, double *y) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < outn; o++) {
            double acc = b ? b[o] : 0;
            for (int64_t i = 0; i < in; i++)
                acc += W[o * in + i] * x[r * in + i];
            y[r * outn + o] = acc;
        }
}

/* The reference encoder: k x k output tokens. Returns [k*k][T] doubles. */
static double *reference(const char *path, const float *rgb, int w, int h, int k, int64_t *T_out) {
    tn_gguf *g = NULL;
    if (tn_gguf_open(path, &g, NULL) != TN_OK)
        return NULL;
    const int64_t isz = key(g, "clip.vision.image_size"), ps = key(g, "clip.vision.patch_size");
    const int64_t E = key(g, "clip.vision.embedding_length");
    const int64_t F = key(g, "clip.vision.feed_forward_length");
    const int64_t L = key(g, "clip.vision.block_count");
    const int64_t H = key(g, "clip.vision.attention.head_count");
    double eps = 0;
    tn_gguf_get_float(g, "clip.vision.attention.layer_norm_epsilon", &eps);
    const tn_gguf_value *mean = tn_gguf_find(g, "clip.vision.image_mean");
    const tn_gguf_value *stdv = tn_gguf_find(g, "clip.vision.image_std");
    const int64_t T = (int64_t)tn_gguf_find_tensor(g, "mm.input_projection.weight")->ne[0];
    const int nat = (int)(isz / ps), gs = k * 4, S = gs * (int)ps;
    const int64_t P = (int64_t)gs * gs, K = 3 * ps * ps, D = E / H;
    double *pix = calloc((size_t)(P * K), sizeof *pix);
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) {
            int y0, y1, x0, x1;
            double fy, fx;
            src_index(y, S, h, &y0, &y1, &fy);
            src_index(x, S, w, &x0, &x1, &fx);
            for (int c = 0; c < 3; c++) {
#define PX(yy, xx) ((double)rgb[((int64_t)(yy) * w + (xx)) * 3 + c])
                double val = (PX(y0, x0) * (1 - fx) + PX(y0, x1) * fx) * (1 - fy) +
                             (PX(y1, x0) * (1 - fx) + PX(y1, x1) * fx) * fy;
#undef PX
                val = (val - tn_gguf_arr_float(mean, (uint64_t)c)) / tn_gguf_arr_float(stdv, (uint64_t)c);
                pix[((y / ps) * gs + x / ps) * K + c * ps * ps + (y % ps) * ps + x % ps] = val;
            }
        }
    double *pw = tn_test_tensor(g, "v.patch_embd.weight", NULL), *pb = tn_test_tensor(g, "v.patch_embd.bias", NULL);
    double *pos = tn_test_tensor(g, "v.position_embd.weight", NULL);
    double *x = malloc((size_t)(P * E) * sizeof *x);
    lin(pw, pb, pix, P, K, E, x);
    for (int gy = 0; gy < gs; gy++)
        for (int gx = 0; gx < gs; gx++) {
            int y0, y1, x0, x1;
            double fy, fx;
            src_index(gy, gs, nat, &y0, &y1, &fy);
            src_index(gx, gs, nat, &x0, &x1, &fx);
            for (int64_t i = 0; i < E; i++) {
#define PE(yy, xx) pos[((int64_t)(yy) * nat + (xx)) * E + i]
                x[(gy * gs + gx) * E + i] += (PE(y0, x0) * (1 - fx) + PE(y0, x1) * fx) * (1 - fy) +
                                             (PE(y1, x0) * (1 - fx) + PE(y1, x1) * fx) * fy;
#undef PE
            }
        }
    free(pw), free(pb), free(pos), free(pix);
    double *t = malloc((size_t)(P * E) * sizeof *t), *q = malloc((size_t)(P * E) * sizeof *q);
    double *kk = malloc((size_t)(P * E) * sizeof *kk), *vv = malloc((size_t)(P * E) * sizeof *vv);
    double *a = malloc((size_t)(P * E) * sizeof *a), *u = malloc((size_t)(P * F) * sizeof *u);
    double *s = malloc((size_t)P * sizeof *s);
    for (int64_t l = 0; l < L; l++) {
        char n[64];
#define LT(part) (snprintf(n, sizeof n, "v.blk.%lld.%s", (long long)l, part), tn_test_tensor(g, n, NULL))
        double *l1w = LT("ln1.weight"), *l1b = LT("ln1.bias"), *l2w = LT("ln2.weight"),
               *l2b = LT("ln2.bias"), *qw = LT("attn_q.weight"), *qb = LT("attn_q.bias"),
               *kw = LT("attn_k.weight"), *kb = LT("attn_k.bias"), *vw = LT("attn_v.weight"),
               *vb = LT("attn_v.bias"), *ow = LT("attn_out.weight"), *ob = LT("attn_out.bias"),
               *uw = LT("ffn_up.weight"), *ub = LT("ffn_up.bias"), *dw = LT("ffn_down.weight"),
               *db = LT("ffn_down.bias");
#undef LT
        for (int64_t r = 0; r < P; r++)
            ln(x + r * E, l1w, l1b, E, eps, t + r * E);
        lin(qw, qb, t, P, E, E, q);
        lin(kw, kb, t, P, E, E, kk);
        lin(vw, vb, t, P, E, E, vv);
        for (int64_t hh = 0; hh < H; hh++)
            for (int64_t i = 0; i < P; i++) {
                double mx = -1e300, sum = 0;
                for (int64_t j = 0; j < P; j++) {
                    double d = 0;
                    for (int64_t z = 0; z < D; z++)
                        d += q[i * E + hh * D + z] * kk[j * E + hh * D + z];
                    s[j] = d / sqrt((double)D);
                    if (s[j] > mx)
                        mx = s[j];
                }
                for (int64_t j = 0; j < P; j++)
                    sum += (s[j] = exp(s[j] - mx));
                for (int64_t z = 0; z < D; z++) {
                    double acc = 0;
                    for (int64_t j = 0; j < P; j++)
                        acc += s[j] * vv[j * E + hh * D + z];
                    a[i * E + hh * D + z] = acc / sum;
                }
            }
        lin(ow, ob, a, P, E, E, q);
        for (int64_t i = 0; i < P * E; i++)
            x[i] += q[i];
        for (int64_t r = 0; r < P; r++)
            ln(x + r * E, l2w, l2b, E, eps, t + r * E);
        lin(uw, ub, t, P, E, F, u);
        for (int64_t i = 0; i < P * F; i++)
            u[i] = 0.5 * u[i] * (1 + tanh(sqrt(2 / M_PI) * (u[i] + 0.044715 * u[i] * u[i] * u[i])));
        lin(dw, db, u, P, F, E, q);
        for (int64_t i = 0; i < P * E; i++)
            x[i] += q[i];
        free(l1w), free(l1b), free(l2w), free(l2b), free(qw), free(qb), free(kw), free(kb);
        free(vw), free(vb), free(ow), free(ob), free(uw), free(ub), free(dw), free(db);
    }
    double *plw = tn_test_tensor(g, "v.post_ln.weight", NULL), *plb = tn_test_tensor(g, "v.post_ln.bias", NULL);
    double *sn = tn_test_tensor(g, "mm.soft_emb_norm.weight", NULL);
    double *proj = tn_test_tensor(g, "mm.input_projection.weight", NULL); /* [E][T] */
    for (int64_t r = 0; r < P; r++)
        ln(x + r * E, plw, plb, E, eps, t + r * E);
    double *out = calloc((size_t)(k * k * T), sizeof *out);
    for (int ty = 0; ty < k; ty++)
        for (int tx = 0; tx < k; tx++) {
            double ss = 0;
            for (int64_t i = 0; i < E; i++) {
                double m = 0;
                for (int dy = 0; dy < 4; dy++)
                    for (int dx = 0; dx < 4; dx++)
                        m += t[((ty * 4 + dy) * gs + tx * 4 + dx) * E + i];
                q[i] = m / 16;
                ss += q[i] * q[i];
            }
            for (int64_t i = 0; i < E; i++)
                q[i] = q[i] / sqrt(ss / E + eps) * sn[i];
            for (int64_t o = 0; o < T; o++) {
                double acc = 0;
                for (int64_t i = 0; i < E; i++)
                    acc += q[i] * proj[i * T + o];
                out[(ty * k + tx) * T + o] = acc;
            }
        }
    free(plw), free(plb), free(sn), free(proj);
    free(x), free(t), free(q), free(kk), free(vv), free(a), free(u), free(s);
    tn_gguf_close(g);
    *T_out = T;
    return out;
}

static void compare(const char *what, const float *got, const double *ref, int64_t n) {
    double maxref = 1, maxdiff = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(ref[i]) > maxref)
            maxref = fabs(ref[i]);
        if (!(fabs(got[i] - ref[i]) <= maxdiff))
            maxdiff = isnan(got[i]) ? INFINITY : fabs(got[i] - ref[i]);
    }
    printf("%s: max |diff| %.3g (max |ref| %.3g)\n", what, maxdiff, maxref);
    CHECKF(maxdiff <= TOL * maxref, "%s: max diff %g > %g", what, maxdiff, TOL * maxref);
}

/* A copy of src's metadata and tensors, with one key left out, keys
 * changed by edit (after the copy: a key set again replaces the copied one),
 * one tensor left out or the projector type replaced. */
static int rewrite_full(const char *src, const char *dst, const char *drop_tensor,
                        const char *ptype, const char *drop_key,
                        void (*edit)(tn_gguf_writer *w)) {
    tn_gguf *g = NULL;
    if (tn_gguf_open(src, &g, NULL) != TN_OK)
        return -1;
    tn_gguf_writer *w = tn_gguf_writer_new();
    char key_buf[256];
    for (int64_t i = 0; i < tn_gguf_n_kv(g); i++) {
        tn_str k = tn_gguf_kv_key(g, i);
        snprintf(key_buf, sizeof key_buf, "%.*s", (int)k.len, k.ptr);
        if (drop_key && !strcmp(key_buf, drop_key))
            continue;
        tn_gguf_writer_set_value(w, key_buf, tn_gguf_kv_value(g, i));
    }
    if (ptype)
        tn_gguf_writer_set_str(w, "clip.projector_type", ptype);
    if (edit)
        edit(w);
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        snprintf(key_buf, sizeof key_buf, "%.*s", (int)t->name.len, t->name.ptr);
        if (drop_tensor && !strcmp(key_buf, drop_tensor))
            continue;
        tn_gguf_writer_add_tensor_data(w, key_buf, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    int rc = tn_gguf_writer_write(w, dst, NULL);
    tn_gguf_writer_free(w);
    tn_gguf_close(g);
    return rc;
}

static int rewrite(const char *src, const char *dst, const char *drop_tensor, const char *ptype) {
    return rewrite_full(src, dst, drop_tensor, ptype, NULL, NULL);
}

static void nan_mean(tn_gguf_writer *w) {
    const float m[3] = {0.5f, NAN, 0.5f};
    tn_gguf_writer_set_arr(w, "clip.vision.image_mean", TN_GGUF_F32, m, 3);
}

static void nan_std(tn_gguf_writer *w) {
    const float m[3] = {0.5f, 0.5f, NAN};
    tn_gguf_writer_set_arr(w, "clip.vision.image_std", TN_GGUF_F32, m, 3);
}

/* Finite and positive, yet a pixel divided by 1e-30 (or 3e38 taken from
 * it) overflows the tower: every image token came out NaN and the model
 * answered <pad>. */
static void tiny_std(tn_gguf_writer *w) {
    const float m[3] = {0.5f, 1e-30f, 0.5f};
    tn_gguf_writer_set_arr(w, "clip.vision.image_std", TN_GGUF_F32, m, 3);
}

static void huge_mean(tn_gguf_writer *w) {
    const float m[3] = {3e38f, 0.5f, 0.5f};
    tn_gguf_writer_set_arr(w, "clip.vision.image_mean", TN_GGUF_F32, m, 3);
}

/* Gemma 3 takes exactly three values (Gemma 4 reads the first three). */
static void four_means(tn_gguf_writer *w) {
    const float m[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    tn_gguf_writer_set_arr(w, "clip.vision.image_mean", TN_GGUF_F32, m, 4);
}

/* A denormal epsilon: positive and below 1, so it once loaded, and then
 * added nothing to a layer norm's variance (a zero row divides by zero). */
static void denormal_eps(tn_gguf_writer *w) {
    tn_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-44f);
}

/* The range's own ends written as f32, as converters write them: 0.1f
 * is 0.10000000149 and 1e-12f 9.99999996e-13, each the nearest a file can
 * hold, so the range takes them; the next f32 out is refused. */
static void eps_at_max(tn_gguf_writer *w) {
    tn_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", 0.1f);
}

static void eps_at_min(tn_gguf_writer *w) {
    tn_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-12f);
}

static void eps_past_max(tn_gguf_writer *w) {
    tn_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", nextafterf(0.1f, 1.0f));
}

static void eps_past_min(tn_gguf_writer *w) {
    tn_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", nextafterf(1e-12f, 0.0f));
}

static void huge_patch(tn_gguf_writer *w) {
    tn_gguf_writer_set_u32(w, "clip.vision.patch_size", 4096);
}

static void audio_only(tn_gguf_writer *w) {
    tn_gguf_writer_set_bool(w, "clip.has_vision_encoder", false);
    tn_gguf_writer_set_bool(w, "clip.has_audio_encoder", true);
    tn_gguf_writer_set_str(w, "clip.projector_type", "gemma4a");
}

/* Gemma 4 E2B/E4B's mmproj: both encoders, one type key per modality. */
static void mixed_gemma3(tn_gguf_writer *w) {
    tn_gguf_writer_set_bool(w, "clip.has_audio_encoder", true);
    tn_gguf_writer_set_str(w, "clip.vision.projector_type", "gemma3");
    tn_gguf_writer_set_str(w, "clip.audio.projector_type", "gemma4a");
}

static void mixed_gemma4(tn_gguf_writer *w) {
    tn_gguf_writer_set_bool(w, "clip.has_audio_encoder", true);
    tn_gguf_writer_set_str(w, "clip.vision.projector_type", "gemma4v");
    tn_gguf_writer_set_str(w, "clip.audio.projector_type", "gemma4a");
}

static void unified_gemma4(tn_gguf_writer *w) {
    tn_gguf_writer_set_str(w, "clip.vision.projector_type", "gemma4uv");
}

/* Keys present with the wrong type: named as such, not as missing or false. */
static void ptype_u32(tn_gguf_writer *w) {
    tn_gguf_writer_set_u32(w, "clip.projector_type", 3);
}

static void has_vision_u32(tn_gguf_writer *w) {
    tn_gguf_writer_set_u32(w, "clip.has_vision_encoder", 1);
}

/* Projector files that must be refused with a message naming the reason,
 * and a mixed-modality file whose image half Tern reads. */
static void hostile_projectors(const char *path, const char *dir) {
    char bad[512];
    tn_error err;
    tn_vision *vb = NULL;
    struct {
        const char *file, *drop_key;
        void (*edit)(tn_gguf_writer *w);
        int want;
        const char *says;
        const char *never; /* a misleading message it once gave */
    } cases[] = {
        {"ptype-u32.gguf", NULL, ptype_u32, TN_ERR_FORMAT,
         "metadata key 'clip.projector_type' has type u32, expected string",
         "no clip.projector_type"},
        {"has-vision-u32.gguf", NULL, has_vision_u32, TN_ERR_FORMAT,
         "metadata key 'clip.has_vision_encoder' has type u32, expected bool", "is not true"},
        {"nan-mean.gguf", NULL, nan_mean, TN_ERR_FORMAT, "image_mean must be finite", NULL},
        {"nan-std.gguf", NULL, nan_std, TN_ERR_FORMAT, "image_std must be positive", NULL},
        {"tiny-std.gguf", NULL, tiny_std, TN_ERR_FORMAT,
         "image_mean and image_std scale a pixel to", NULL},
        {"huge-mean.gguf", NULL, huge_mean, TN_ERR_FORMAT,
         "image_mean and image_std scale a pixel to", NULL},
        /* The metadata readers Gemma 3 shares with Gemma 4 (tn_vision_key_*):
         * Gemma 3's own rules. No image_mean is Gemma 3's 0.5. */
        {"four-means.gguf", NULL, four_means, TN_ERR_FORMAT,
         "clip.vision.image_mean must be an array of 3 floats", NULL},
        {"no-mean.gguf", "clip.vision.image_mean", NULL, TN_OK, NULL, NULL},
        {"no-eps.gguf", "clip.vision.attention.layer_norm_epsilon", NULL, TN_ERR_FORMAT,
         "missing or bad clip.vision.attention.layer_norm_epsilon", NULL},
        {"denormal-eps.gguf", NULL, denormal_eps, TN_ERR_FORMAT,
         "metadata key 'clip.vision.attention.layer_norm_epsilon' is 9.80909e-45; expected a "
         "number from 1e-12 to 0.1",
         NULL},
        {"eps-at-max.gguf", NULL, eps_at_max, TN_OK, NULL, NULL},
        {"eps-at-min.gguf", NULL, eps_at_min, TN_OK, NULL, NULL},
        {"eps-past-max.gguf", NULL, eps_past_max, TN_ERR_FORMAT,
         "metadata key 'clip.vision.attention.layer_norm_epsilon' is", NULL},
        {"eps-past-min.gguf", NULL, eps_past_min, TN_ERR_FORMAT,
         "metadata key 'clip.vision.attention.layer_norm_epsilon' is", NULL},
        {"no-layers.gguf", "clip.vision.block_count", NULL, TN_ERR_FORMAT,
         "missing or mistyped key 'clip.vision.block_count' (expected a whole number in [1, "
         "1024])",
         NULL},
        {"huge-patch.gguf", NULL, huge_patch, TN_ERR_FORMAT,
         "bad value for 'clip.vision.patch_size' (expected a whole number in [1, 1024])", NULL},
        {"audio.gguf", NULL, audio_only, TN_ERR_UNSUPPORTED, "audio projector", NULL},
        /* Gemma 3 tensors under Gemma 4's type: read as Gemma 4 (test
         * vision-gemma4 loads real ones), refused on the first shape. */
        {"mixed-gemma4.gguf", "clip.projector_type", mixed_gemma4, TN_ERR_FORMAT,
         "mm.input_projection.weight", NULL},
        {"unified-gemma4.gguf", "clip.projector_type", unified_gemma4, TN_ERR_UNSUPPORTED,
         "unified", NULL},
        {"mixed-gemma3.gguf", "clip.projector_type", mixed_gemma3, TN_OK, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(bad, sizeof bad, "%s/%s", dir, cases[i].file);
        CHECK(rewrite_full(path, bad, NULL, NULL, cases[i].drop_key, cases[i].edit) == TN_OK);
        vb = NULL;
        int rc = tn_vision_load(bad, &vb, &err);
        CHECKF(rc == cases[i].want, "%s: rc %d, want %d (%s)", cases[i].file, rc, cases[i].want,
               rc ? err.message : "loaded");
        if (cases[i].says)
            CHECKF(rc != TN_OK && strstr(err.message, cases[i].says), "%s: %s", cases[i].file,
                   rc ? err.message : "loaded");
        if (cases[i].never)
            CHECKF(rc != TN_OK && !strstr(err.message, cases[i].never), "%s: %s", cases[i].file,
                   err.message);
        CHECK((rc == TN_OK) == (vb != NULL));
        tn_vision_free(vb);
    }
}

/* The projectors beside a model: the rule (name holds "mmproj", ends in
 * ".gguf", any case), the count, the first two in name order, and an
 * unreadable directory as an error, not as "none". */
static void projectors_beside(const char *tmp) {
    char dir[512], model[600], f[700];
    snprintf(dir, sizeof dir, "%s/beside", tmp);
    mkdir(dir, 0755);
    snprintf(model, sizeof model, "%s/model.gguf", dir);
    char *first = (char *)"x", *second = (char *)"x";
    tn_error err = {0};
    CHECK(tn_vision_projectors_beside(model, &first, &second, &err) == 0 && !first && !second);
    /* Not projectors: the wrong ending, a partial download, no "mmproj". */
    const char *others[] = {"mmproj.txt", "b-mmproj.gguf.part", "vision.gguf", "model.gguf"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        snprintf(f, sizeof f, "%s/%s", dir, others[i]);
        CHECK(tn_test_copy_file("/dev/null", f));
    }
    CHECK(tn_vision_projectors_beside(model, &first, &second, &err) == 0 && !first && !second);
    snprintf(f, sizeof f, "%s/c-MMPROJ-f16.GGUF", dir);
    CHECK(tn_test_copy_file("/dev/null", f));
    CHECK(tn_vision_projectors_beside(model, &first, NULL, &err) == 1);
    CHECKF(first && !strcmp(first, f), "%s", first ? first : "(none)");
    free(first);
    snprintf(f, sizeof f, "%s/b-mmproj.gguf", dir);
    CHECK(tn_test_copy_file("/dev/null", f));
    snprintf(f, sizeof f, "%s/d-mmproj.gguf", dir);
    CHECK(tn_test_copy_file("/dev/null", f));
    CHECK(tn_vision_projectors_beside(model, &first, &second, &err) == 3);
    CHECKF(first && strstr(first, "/beside/b-mmproj.gguf"), "%s", first ? first : "(none)");
    CHECKF(second && strstr(second, "/beside/c-MMPROJ-f16.GGUF"), "%s", second ? second : "(none)");
    free(first);
    free(second);
    /* A model path without a directory looks in the current one. */
    char cwd[512];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK(chdir(dir) == 0);
    CHECK(tn_vision_projectors_beside("model.gguf", &first, NULL, &err) == 3);
    CHECKF(first && !strcmp(first, "./b-mmproj.gguf"), "%s", first ? first : "(none)");
    free(first);
    CHECK(chdir(cwd) == 0);
    /* A directory that is not there, or not a directory. */
    snprintf(model, sizeof model, "%s/missing/model.gguf", dir);
    CHECK(tn_vision_projectors_beside(model, &first, &second, &err) == TN_ERR_IO && !first &&
          !second);
    CHECKF(strstr(err.message, "/missing: cannot look for a vision projector there"), "%s",
           err.message);
    CHECK(tn_vision_projectors_beside("", &first, &second, &err) == TN_ERR_INVALID);
    CHECK(tn_vision_projectors_beside(NULL, NULL, NULL, NULL) == TN_ERR_INVALID);
}

int main(void) {
    const char *dir = tn_test_tmpdir();
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/mmproj.gguf", dir);
    tn_error err;
    tn_mkmodel_vision_params mp = tn_mkmodel_vision_default_params();
    mp.n_embd_text = 48;
    mp.seed = 7;
    CHECKF(tn_mkmodel_vision(&mp, path, &err) == TN_OK, "%s", err.message);
    tn_vision *v = NULL;
    CHECKF(tn_vision_load(path, &v, &err) == TN_OK, "%s", err.message);
    if (!v)
        return tn_test_finish("vision");
    const tn_vision_info *I = tn_vision_get_info(v);
    CHECK(I->image_size == 224 && I->patch_size == 14 && I->n_embd == 64 && I->n_layer == 2);
    CHECK(I->n_embd_text == 48);
    CHECK(I->n_image_tokens == 16); /* 16 x 16 patches pooled 4 x 4 */
    const int threads = 2;

    /* A smooth image plus noise, not at the native size (resampling runs). */
    const int W = 150, H = 100;
    float *rgb = malloc((size_t)W * H * 3 * sizeof *rgb);
    uint64_t st = 99;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                rgb[(y * W + x) * 3 + c] =
                    0.5f + 0.3f * sinf(0.05f * (float)(x * (c + 1)) + 0.07f * (float)y) +
                    0.15f * tn_test_randf(&st);
    const int T = I->n_embd_text;
    float *out = malloc((size_t)I->n_image_tokens * T * sizeof *out);
    float *out2 = malloc((size_t)I->n_image_tokens * T * sizeof *out2);
    int n = -1;
    CHECKF(tn_vision_encode(v, rgb, W, H, 0, out, &n, threads, &err) == TN_OK, "%s", err.message);
    CHECK(n == 16);
    int64_t Tr = 0;
    double *ref = reference(path, rgb, W, H, 4, &Tr);
    CHECK(ref && Tr == T);
    if (ref)
        compare("native 16 tokens", out, ref, (int64_t)n * T);
    free(ref);
    /* Same image twice: bit-identical embeddings. */
    CHECK(tn_vision_encode(v, rgb, W, H, 0, out2, &n, threads, &err) == TN_OK);
    CHECK(memcmp(out, out2, (size_t)16 * T * sizeof *out) == 0);
    /* tn_vision_encode_new (the CLI's, the server's and the app's one step)
     * counts, allocates and gives the same rows; a refused budget leaves
     * nothing allocated and says why. */
    float *fresh = NULL;
    int n_fresh = -1;
    CHECKF(tn_vision_encode_new(v, rgb, W, H, 0, threads, &fresh, &n_fresh, &err) == TN_OK,
           "%s", err.message);
    CHECK(fresh && n_fresh == n && memcmp(out, fresh, (size_t)16 * T * sizeof *out) == 0);
    free(fresh);
    fresh = (float *)&n_fresh;
    CHECK(tn_vision_encode_new(v, rgb, 0, H, 0, threads, &fresh, &n_fresh, &err) != TN_OK &&
          fresh == NULL && n_fresh == 0 && err.message[0]);
    CHECK(tn_vision_encode_new(NULL, rgb, W, H, 0, threads, &fresh, &n_fresh, &err) != TN_OK);
    CHECK(tn_vision_encode_new(v, rgb, W, H, 0, threads, NULL, &n_fresh, &err) != TN_OK);
    /* One thread (the caller) gives the same result as the pool of two. */
    CHECK(tn_vision_encode(v, rgb, W, H, 0, out2, &n, 1, &err) == TN_OK);
    CHECK(memcmp(out, out2, (size_t)16 * T * sizeof *out) == 0);
    /* The scalar attention (the reference the matrix-kernel path replaced)
     * agrees with it within float rounding, and with the double reference. */
    setenv("TERN_VISION_ATTENTION", "scalar", 1);
    CHECK(tn_vision_encode(v, rgb, W, H, 0, out2, &n, threads, &err) == TN_OK);
    unsetenv("TERN_VISION_ATTENTION");
    double worst = 0, mag = 0;
    for (int64_t i = 0; i < (int64_t)16 * T; i++) {
        worst = fmax(worst, fabs((double)out[i] - out2[i]));
        mag = fmax(mag, fabs((double)out[i]));
    }
    CHECKF(worst <= 1e-5 * fmax(1.0, mag), "scalar vs matrix attention: max |diff| %g", worst);
    ref = reference(path, rgb, W, H, 4, &Tr);
    if (ref)
        compare("native 16 tokens, scalar attention", out2, ref, (int64_t)16 * T);
    free(ref);

    /* A budget of 5 -> 2 x 2 tokens: an 8 x 8 patch grid, interpolated positions. */
    CHECKF(tn_vision_encode(v, rgb, W, H, 5, out, &n, threads, &err) == TN_OK, "%s", err.message);
    CHECK(n == 4);
    ref = reference(path, rgb, W, H, 2, &Tr);
    if (ref)
        compare("budget 5 -> 4 tokens", out, ref, (int64_t)4 * T);
    free(ref);
    /* A budget of 10 -> 3 x 3 tokens (12 x 12 patches). */
    CHECK(tn_vision_encode(v, rgb, W, H, 10, out, &n, threads, &err) == TN_OK);
    CHECK(n == 9);
    ref = reference(path, rgb, W, H, 3, &Tr);
    if (ref)
        compare("budget 10 -> 9 tokens", out, ref, (int64_t)9 * T);
    free(ref);

    /* The budget is respected exactly: k*k tokens, k = floor(sqrt(budget)) <= native. */
    static const int budgets[] = {-3, 0, 1, 2, 3, 4, 8, 9, 15, 16, 17, 70, 256};
    static const int expect[] = {16, 16, 1, 1, 1, 4, 4, 9, 9, 16, 16, 16, 16};
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        CHECKF(tn_vision_tokens(v, budgets[i]) == expect[i], "budget %d -> %d", budgets[i],
               tn_vision_tokens(v, budgets[i]));
        if (budgets[i] >= 1 && budgets[i] <= 4) {
            n = -1;
            CHECK(tn_vision_encode(v, rgb, W, H, budgets[i], out, &n, threads, &err) == TN_OK);
            CHECK(n == expect[i] && n <= budgets[i]);
        }
    }

    /* Bad inputs. */
    CHECK(tn_vision_encode(v, rgb, 0, H, 0, out, &n, threads, &err) == TN_ERR_INVALID);
    CHECK(strstr(err.message, "0 x 100") != NULL);
    CHECK(tn_vision_encode(v, rgb, 65537, 1, 0, out, &n, threads, &err) == TN_ERR_INVALID);
    CHECKF(strstr(err.message, "65537 x 1") && strstr(err.message, "too large"), "%s",
           err.message);
    CHECK(tn_vision_encode(v, NULL, W, H, 0, out, &n, threads, &err) == TN_ERR_INVALID);
    snprintf(bad, sizeof bad, "%s/llava.gguf", dir);
    CHECK(rewrite(path, bad, NULL, "llava") == TN_OK);
    tn_vision *vb = NULL;
    CHECK(tn_vision_load(bad, &vb, &err) == TN_ERR_UNSUPPORTED && vb == NULL);
    CHECKF(strstr(err.message, "llava") && strstr(err.message, "gemma3"), "%s", err.message);
    snprintf(bad, sizeof bad, "%s/missing.gguf", dir);
    CHECK(rewrite(path, bad, "v.blk.1.ffn_down.weight", NULL) == TN_OK);
    CHECK(tn_vision_load(bad, &vb, &err) == TN_ERR_FORMAT && vb == NULL);
    CHECKF(strstr(err.message, "v.blk.1.ffn_down.weight") != NULL, "%s", err.message);
    snprintf(bad, sizeof bad, "%s/no-such-file.gguf", dir);
    CHECK(tn_vision_load(bad, &vb, &err) != TN_OK && vb == NULL);
    tn_vision_free(NULL);
    hostile_projectors(path, dir);
    projectors_beside(dir);

    free(rgb), free(out), free(out2);
    tn_vision_free(v);
    return tn_test_finish("vision");
}
