/* Random-weight Gemma 3 vision projectors in the "mmproj" GGUF layout
 * (docs/VISION.md): the tests' encoder reference runs on them, and a full
 * Gemma-3-4B-shaped tower gives honest encode timings. */
#include "tn-mk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tn_mkmodel_vision_params tn_mkmodel_vision_default_params(void) {
    tn_mkmodel_vision_params p;
    memset(&p, 0, sizeof p);
    p.type = "f32";
    p.image_size = 224;
    p.patch_size = 14;
    p.n_embd = 64;
    p.n_ff = 128;
    p.n_layer = 2;
    p.n_head = 4;
    p.seed = 1;
    return p;
}

typedef enum vkind { V_MATRIX, V_NORM, V_BIAS, V_POS, V_BOUND, V_SCALE, V_QKNORM } vkind;

typedef struct vtensor {
    char name[64];
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[4];
    int64_t row_len, rows; /* as filled: rows of row_len values */
    vkind kind;
    uint64_t seed;
    float sign; /* V_BOUND: -1 for a lower bound, 1 for an upper */
} vtensor;

/* Norm weights near 1, small biases, position embeddings and matrices of
 * unit-variance-preserving scale; a row depends only on (seed, name, row). */
static int fill(void *user, const char *name, void *dst, uint64_t nbytes, tn_error *err) {
    const vtensor *t = user;
    const size_t row_bytes = tn_type_row_bytes(t->type, (uint64_t)t->row_len);
    if (row_bytes * (uint64_t)t->rows != nbytes)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel vision: size mismatch for %s", name);
    float *row = malloc((size_t)t->row_len * sizeof *row);
    if (!row)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    const float mat = sqrtf(3.0f / (float)t->row_len);
    int rc = TN_OK;
    for (int64_t r = 0; r < t->rows && rc == TN_OK; r++) {
        uint64_t s = tn_mk_row_state(t->seed, t->name, (uint64_t)r);
        for (int64_t i = 0; i < t->row_len; i++) {
            const float u = (float)tn_mk_uniform(&s);
            row[i] = t->kind == V_MATRIX ? u * mat
                     : t->kind == V_NORM ? 1.0f + 0.2f * u
                     : t->kind == V_BIAS ? 0.05f * u
                     : t->kind == V_POS  ? 0.5f * u
                     /* clamp bounds that cut the tails of unit-scale
                      * activations, so the clamps are exercised */
                     : t->kind == V_BOUND ? t->sign * (2.0f + 0.5f * u)
                     /* Q and K norms of d values near d^-1/4: the scores
                      * (scale 1) then have unit spread. Near 1, scores of
                      * spread sqrt(d) make every softmax an argmax, and a
                      * deep random tower amplifies rounding into chaos, so
                      * no two implementations could agree (measured: NMSE
                      * 5e-3 against llama.cpp at 16 layers of 64-value
                      * heads, 2e-7 at 2 layers). */
                     : t->kind == V_QKNORM ? (1.0f + 0.2f * u) / sqrtf(sqrtf((float)t->row_len))
                                          : 1.0f + 0.3f * u;
        }
        if (tn_quantize_row(t->type, row, (uint8_t *)dst + r * row_bytes, t->row_len) != TN_OK)
            rc = tn_fail(err, TN_ERR_UNSUPPORTED, "mkmodel vision: cannot write %s as %s", name,
                         tn_type_name(t->type));
    }
    free(row);
    return rc;
}

static vtensor *add(vtensor *ts, size_t *nt, const char *name, uint32_t type, vkind kind,
                    uint64_t seed, uint32_t n_dims, const uint64_t *ne) {
    vtensor *t = &ts[(*nt)++];
    /* Names are built from short literals; the explicit cut keeps an -O3 release
     * build's format-truncation warning (-Werror) quiet. */
    size_t len = strnlen(name, sizeof t->name - 1);
    memcpy(t->name, name, len);
    t->name[len] = '\0';
    t->type = type;
    t->n_dims = n_dims;
    t->kind = kind;
    t->seed = seed;
    t->row_len = (int64_t)ne[0];
    t->rows = 1;
    for (uint32_t d = 0; d < 4; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        if (d > 0)
            t->rows *= (int64_t)t->ne[d];
    }
    return t;
}

static int mk_gemma4v(const tn_mkmodel_vision_params *p, int type, const char *out_path,
                      tn_error *err);

int tn_mkmodel_vision(const tn_mkmodel_vision_params *pp, const char *out_path, tn_error *err) {
    if (!pp || !out_path)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel vision: needs parameters and an output");
    tn_mkmodel_vision_params p = *pp;
    const bool g4 = p.projector && !strcmp(p.projector, "gemma4v");
    if (p.projector && !g4 && strcmp(p.projector, "gemma3"))
        return tn_fail(err, TN_ERR_INVALID, "mkmodel vision: projector type '%s' is not one Tern "
                       "writes (gemma3 or gemma4v)", p.projector);
    if (g4 && p.patch_size <= 0)
        p.patch_size = 16;
    if (g4 && p.n_pos <= 0)
        p.n_pos = 64;
    const tn_mkmodel_vision_params d = tn_mkmodel_vision_default_params();
    if (!p.type)
        p.type = d.type;
#define DEF(f) if (p.f <= 0) p.f = d.f
    DEF(image_size); DEF(patch_size); DEF(n_embd); DEF(n_ff); DEF(n_layer); DEF(n_head);
#undef DEF
    if (p.target) {
        tn_gguf *g = NULL;
        int rc = tn_gguf_open(p.target, &g, err);
        if (rc != TN_OK)
            return rc;
        tn_str a;
        char key[96];
        int64_t width = 0;
        if (tn_gguf_get_str(g, "general.architecture", &a) == TN_OK && a.len < 64) {
            snprintf(key, sizeof key, "%.*s.embedding_length", (int)a.len, a.ptr);
            tn_gguf_get_int(g, key, &width);
        }
        tn_gguf_close(g);
        if (width <= 0)
            return tn_fail(err, TN_ERR_FORMAT, "%s: no embedding_length: not a text model",
                           p.target);
        p.n_embd_text = width;
    }
    if (p.n_embd_text <= 0)
        p.n_embd_text = 64;
    const int type = tn_type_from_name(p.type);
    if (type != TN_TYPE_F32 && type != TN_TYPE_F16)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel vision: --type must be f32 or f16, not '%s'",
                       p.type);
    if (g4)
        return mk_gemma4v(&p, type, out_path, err);
    const int64_t side = p.patch_size > 0 ? p.image_size / p.patch_size : 0;
    if (p.image_size % p.patch_size || side % 4 || p.n_embd % p.n_head || p.n_layer > 1000 ||
        p.n_embd > 16384 || p.n_ff > 65536 || p.n_embd_text > 65536 || side > 512)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel vision: image size %lld must be a multiple "
                       "of 4 patches of %lld, width %lld a multiple of %lld heads",
                       (long long)p.image_size, (long long)p.patch_size, (long long)p.n_embd,
                       (long long)p.n_head);
    const uint64_t E = (uint64_t)p.n_embd, F = (uint64_t)p.n_ff, T = (uint64_t)p.n_embd_text;
    const uint64_t ps = (uint64_t)p.patch_size;
    const size_t max_t = 8 + 16 * (size_t)p.n_layer;
    vtensor *ts = calloc(max_t, sizeof *ts);
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!ts || !w) {
        free(ts);
        tn_gguf_writer_free(w);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    size_t nt = 0;
    const uint64_t s = p.seed;
    add(ts, &nt, "v.patch_embd.weight", (uint32_t)type, V_MATRIX, s, 4,
        (uint64_t[]){ps, ps, 3, E});
    add(ts, &nt, "v.patch_embd.bias", TN_TYPE_F32, V_BIAS, s, 1, (uint64_t[]){E});
    add(ts, &nt, "v.position_embd.weight", TN_TYPE_F32, V_POS, s, 2,
        (uint64_t[]){E, (uint64_t)(side * side)});
    for (int64_t l = 0; l < p.n_layer; l++) {
        char n[64];
#define T2(part, kind, ne0, ne1) \
    (snprintf(n, sizeof n, "v.blk.%lld.%s", (long long)l, part), \
     add(ts, &nt, n, (uint32_t)type, kind, s, 2, (uint64_t[]){ne0, ne1}))
#define T1(part, kind, ne0) \
    (snprintf(n, sizeof n, "v.blk.%lld.%s", (long long)l, part), \
     add(ts, &nt, n, TN_TYPE_F32, kind, s, 1, (uint64_t[]){ne0}))
        T1("ln1.weight", V_NORM, E); T1("ln1.bias", V_BIAS, E);
        T2("attn_q.weight", V_MATRIX, E, E); T1("attn_q.bias", V_BIAS, E);
        T2("attn_k.weight", V_MATRIX, E, E); T1("attn_k.bias", V_BIAS, E);
        T2("attn_v.weight", V_MATRIX, E, E); T1("attn_v.bias", V_BIAS, E);
        T2("attn_out.weight", V_MATRIX, E, E); T1("attn_out.bias", V_BIAS, E);
        T1("ln2.weight", V_NORM, E); T1("ln2.bias", V_BIAS, E);
        T2("ffn_up.weight", V_MATRIX, E, F); T1("ffn_up.bias", V_BIAS, F);
        T2("ffn_down.weight", V_MATRIX, F, E); T1("ffn_down.bias", V_BIAS, E);
#undef T1
#undef T2
    }
    add(ts, &nt, "v.post_ln.weight", TN_TYPE_F32, V_NORM, s, 1, (uint64_t[]){E});
    add(ts, &nt, "v.post_ln.bias", TN_TYPE_F32, V_BIAS, s, 1, (uint64_t[]){E});
    add(ts, &nt, "mm.soft_emb_norm.weight", TN_TYPE_F32, V_NORM, s, 1, (uint64_t[]){E});
    /* HF's x @ W layout: E rows of T values (see engine/vision.c). */
    add(ts, &nt, "mm.input_projection.weight", (uint32_t)type, V_MATRIX, s, 2,
        (uint64_t[]){T, E});
    int rc = TN_OK;
    const float half[3] = {0.5f, 0.5f, 0.5f};
#define SET(x) if (rc == TN_OK) rc = (x)
    SET(tn_gguf_writer_set_str(w, "general.architecture", "clip"));
    SET(tn_gguf_writer_set_str(w, "general.name", "Tern Gemma 3 vision projector (random weights)"));
    SET(tn_gguf_writer_set_bool(w, "tern.random_weights", true));
    SET(tn_gguf_writer_set_u32(w, "general.alignment", TN_GGUF_DEFAULT_ALIGNMENT));
    SET(tn_gguf_writer_set_str(w, "clip.projector_type", "gemma3"));
    SET(tn_gguf_writer_set_bool(w, "clip.has_vision_encoder", true));
    SET(tn_gguf_writer_set_bool(w, "clip.has_text_encoder", false));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.image_size", (uint32_t)p.image_size));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.patch_size", (uint32_t)p.patch_size));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.embedding_length", (uint32_t)E));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.feed_forward_length", (uint32_t)F));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.block_count", (uint32_t)p.n_layer));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.attention.head_count", (uint32_t)p.n_head));
    SET(tn_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f));
    SET(tn_gguf_writer_set_arr(w, "clip.vision.image_mean", TN_GGUF_F32, half, 3));
    SET(tn_gguf_writer_set_arr(w, "clip.vision.image_std", TN_GGUF_F32, half, 3));
#undef SET
    if (rc != TN_OK)
        rc = tn_fail(err, rc, "mkmodel vision: cannot set metadata");
    for (size_t i = 0; i < nt && rc == TN_OK; i++)
        if ((rc = tn_gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne,
                                            fill, &ts[i])) != TN_OK)
            rc = tn_fail(err, rc, "mkmodel vision: cannot add tensor %s", ts[i].name);
    if (rc == TN_OK)
        rc = tn_gguf_writer_write(w, out_path, err);
    tn_gguf_writer_free(w);
    free(ts);
    return rc;
}

/* Gemma 4 (llama.cpp's converter, conversion/gemma.py Gemma4VisionAudioModel
 * and gguf-py's tensor map; read by tools/mtmd/clip.cpp): names, shapes and
 * types as published mmproj files have them. */
static int mk_gemma4v(const tn_mkmodel_vision_params *p, int type, const char *out_path,
                      tn_error *err) {
    const uint64_t E = (uint64_t)p->n_embd, F = (uint64_t)p->n_ff, T = (uint64_t)p->n_embd_text;
    const uint64_t ps = (uint64_t)p->patch_size, H = (uint64_t)p->n_head;
    if (p->n_embd % p->n_head || (p->n_embd / p->n_head) % 4 || p->n_layer > 1000 ||
        p->n_embd > 16384 || p->n_ff > 65536 || p->n_embd_text > 65536 || p->patch_size > 256 ||
        p->n_pos > 65536)
        return tn_fail(err, TN_ERR_INVALID, "mkmodel vision: width %lld must be a multiple of "
                       "%lld heads of a multiple of 4 values", (long long)p->n_embd,
                       (long long)p->n_head);
    const uint64_t d = E / H;
    const size_t max_t = 16 + 44 * (size_t)p->n_layer;
    vtensor *ts = calloc(max_t, sizeof *ts);
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (!ts || !w) {
        free(ts);
        tn_gguf_writer_free(w);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    size_t nt = 0;
    const uint64_t s = p->seed;
    const uint32_t ty = (uint32_t)type;
    add(ts, &nt, "v.patch_embd.weight", ty, V_MATRIX, s, 4, (uint64_t[]){ps, ps, 3, E});
    /* the converter forces the position tables to F32 */
    add(ts, &nt, "v.position_embd.weight", TN_TYPE_F32, V_POS, s, 3,
        (uint64_t[]){E, (uint64_t)p->n_pos, 2});
    char n[96];
    /* a Gemma4ClippableLinear: the weight and its four scalar bounds */
#define LIN(base, ne0, ne1)                                                                     \
    do {                                                                                        \
        static const char *const sfx[4] = {"input_min", "input_max", "output_min",             \
                                           "output_max"};                                       \
        snprintf(n, sizeof n, "%s.weight", base);                                               \
        add(ts, &nt, n, ty, V_MATRIX, s, 2, (uint64_t[]){ne0, ne1});                            \
        for (int b_ = 0; b_ < 4; b_++) {                                                        \
            snprintf(n, sizeof n, "%s.%s", base, sfx[b_]);                                      \
            add(ts, &nt, n, TN_TYPE_F32, V_BOUND, s, 1, (uint64_t[]){1})->sign =                \
                b_ % 2 ? 1.0f : -1.0f;                                                          \
        }                                                                                       \
    } while (0)
    for (int64_t l = 0; l < p->n_layer; l++) {
        char base[64];
#define B(part) (snprintf(base, sizeof base, "v.blk.%lld.%s", (long long)l, part), base)
#define V1(part, kind, ne0) add(ts, &nt, B(part), TN_TYPE_F32, kind, s, 1, (uint64_t[]){ne0})
        V1("ln1.weight", V_NORM, E);
        LIN(B("attn_q"), E, E);
        V1("attn_q_norm.weight", V_QKNORM, d);
        LIN(B("attn_k"), E, E);
        V1("attn_k_norm.weight", V_QKNORM, d);
        LIN(B("attn_v"), E, E);
        LIN(B("attn_out"), E, E);
        V1("attn_post_norm.weight", V_NORM, E);
        V1("ln2.weight", V_NORM, E);
        LIN(B("ffn_gate"), E, F);
        LIN(B("ffn_up"), E, F);
        LIN(B("ffn_down"), F, E);
        V1("ffn_post_norm.weight", V_NORM, E);
        V1("out_scale.weight", V_SCALE, 1);
#undef V1
#undef B
    }
#undef LIN
    add(ts, &nt, "v.std_bias", TN_TYPE_F32, V_BIAS, s, 1, (uint64_t[]){E});
    add(ts, &nt, "v.std_scale", TN_TYPE_F32, V_NORM, s, 1, (uint64_t[]){E});
    /* nn.Linear(E, T): T rows of E values, used as is (no transpose) */
    add(ts, &nt, "mm.input_projection.weight", ty, V_MATRIX, s, 2, (uint64_t[]){E, T});
    int rc = TN_OK;
    const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
#define SET(x) if (rc == TN_OK) rc = (x)
    SET(tn_gguf_writer_set_str(w, "general.architecture", "clip"));
    SET(tn_gguf_writer_set_str(w, "general.type", "mmproj"));
    SET(tn_gguf_writer_set_str(w, "general.name", "Tern Gemma 4 vision projector (random weights)"));
    SET(tn_gguf_writer_set_bool(w, "tern.random_weights", true));
    SET(tn_gguf_writer_set_u32(w, "general.alignment", TN_GGUF_DEFAULT_ALIGNMENT));
    SET(tn_gguf_writer_set_u32(w, "general.file_type", type == TN_TYPE_F16 ? 1 : 0));
    SET(tn_gguf_writer_set_bool(w, "clip.has_vision_encoder", true));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.projection_dim", (uint32_t)T));
    /* the converter writes 224 ("unused"): the grid follows the image */
    SET(tn_gguf_writer_set_u32(w, "clip.vision.image_size", 224));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.patch_size", (uint32_t)ps));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.embedding_length", (uint32_t)E));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.feed_forward_length", (uint32_t)F));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.block_count", (uint32_t)p->n_layer));
    SET(tn_gguf_writer_set_u32(w, "clip.vision.attention.head_count", (uint32_t)H));
    SET(tn_gguf_writer_set_arr(w, "clip.vision.image_mean", TN_GGUF_F32, zero, 3));
    SET(tn_gguf_writer_set_arr(w, "clip.vision.image_std", TN_GGUF_F32, one, 3));
    SET(tn_gguf_writer_set_str(w, "clip.vision.projector_type", "gemma4v"));
    SET(tn_gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f));
#undef SET
    if (rc != TN_OK)
        rc = tn_fail(err, rc, "mkmodel vision: cannot set metadata");
    for (size_t i = 0; i < nt && rc == TN_OK; i++)
        if ((rc = tn_gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne,
                                            fill, &ts[i])) != TN_OK)
            rc = tn_fail(err, rc, "mkmodel vision: cannot add tensor %s", ts[i].name);
    if (rc == TN_OK)
        rc = tn_gguf_writer_write(w, out_path, err);
    tn_gguf_writer_free(w);
    free(ts);
    return rc;
}
