/* The forward pass of llama, qwen3, qwen3moe, gemma3, gemma4 and gpt-oss models, and the KV
 * cache.
 *
 * Batch invariance (docs/DESIGN.md) is the rule every line here keeps: a
 * row's result depends only on its token, its position and the KV rows before
 * it. Weight products, attention and the KV cache's layout belong to the
 * model's backend (tn-backend.h, docs/BACKENDS.md; batch-invariant by
 * contract): this file says what to compute, the backend how. Everything
 * else is a per-row operation with one fixed order of arithmetic, and work
 * is split over rows and heads, never over a reduction. So a
 * 1-token decode, any row of an N-token prefill or verification, and any
 * thread count give bit-identical logits.
 */
#include "tn-internal.h"
#include "tn-model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- row ops */

/* Eight independent partial sums in a fixed order: vectorizable, and the
 * same arithmetic wherever the row comes from. */
float tn_dot_f32(const float *a, const float *b, int32_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* y = x / rms(x) * w; y may alias x. The mean of squares is accumulated in
 * double, as ggml does, so long rows lose nothing. */
void tn_rmsnorm(float *y, const float *x, const float *w, int32_t n, float eps) {
    double ss = 0;
    for (int32_t i = 0; i < n; i++)
        ss += (double)(x[i] * x[i]);
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int32_t i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

/* Rotates the first n_rot values of one head by the angles of cs
 * ([n_rot / 2][2] cos, sin). */
static void rope_apply(float *v, const float *cs, int32_t n_rot, tn_rope_kind kind) {
    const int32_t half = n_rot / 2;
    for (int32_t i = 0; i < half; i++) {
        const int32_t i0 = kind == TN_ROPE_ADJACENT ? 2 * i : i;
        const int32_t i1 = kind == TN_ROPE_ADJACENT ? 2 * i + 1 : i + half;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * c - x1 * s;
        v[i1] = x0 * s + x1 * c;
    }
}

/* cos and sin of pos * scale * base^(-2i / n_rot) / freq[i], in double so
 * that large positions keep their precision.
 *
 * With YaRN (hp->yarn_orig_ctx > 0, gpt-oss), as ggml's rope_yarn: pair i
 * turns by a mix of the scaled angle and the unscaled one, all scaled
 * below the correction range [lo, hi] of pair indices, none above it,
 * linearly between (ext_factor 1); lo and hi are where a pair makes 32
 * and 1 turns over the original context (ggml_rope_yarn_corr_dims, floored
 * and ceiled); cos and sin are multiplied by yarn_mscale. */
static void rope_angles(float *cs, int64_t pos, int32_t n_rot, float base, float scale,
                        const float *freqs, const tn_hparams *hp) {
    float lo = 0, hi = 0;
    const bool yarn = hp->yarn_orig_ctx > 0;
    if (yarn) {
        const float two_pi = 6.28318530717958647692f, lb = 2.0f * logf(base);
        const float n_ctx = (float)hp->yarn_orig_ctx, nd = (float)n_rot;
        lo = floorf(nd * logf(n_ctx / (32.0f * two_pi)) / lb);
        hi = ceilf(nd * logf(n_ctx / (1.0f * two_pi)) / lb);
        lo = lo > 0 ? lo : 0;
        hi = hi < nd - 1 ? hi : nd - 1;
    }
    for (int32_t i = 0; i < n_rot / 2; i++) {
        double inv = pow((double)base, -2.0 * i / n_rot) * (double)scale;
        if (freqs)
            inv /= (double)freqs[i];
        if (yarn) {
            double extrap = pow((double)base, -2.0 * i / n_rot);
            if (freqs)
                extrap /= (double)freqs[i];
            const float y = ((float)i - lo) / (hi - lo > 0.001f ? hi - lo : 0.001f);
            const double mix = 1.0 - (y < 0 ? 0.0 : y > 1 ? 1.0 : (double)y);
            inv = inv * (1.0 - mix) + extrap * mix;
        }
        const double theta = (double)pos * inv;
        const float ms = yarn ? hp->yarn_mscale : 1.0f;
        cs[2 * i] = (float)cos(theta) * ms;
        cs[2 * i + 1] = (float)sin(theta) * ms;
    }
}

/* -------------------------------------------------------------- context */

static void *xcalloc(size_t n, size_t size, bool *ok) {
    void *p = calloc(n ? n : 1, size);
    if (!p)
        *ok = false;
    return p;
}

/* The KV cache, keys then values, in one mapping of anonymous memory (so
 * it is zero and resident only where written), on 2 MiB pages when each
 * half spans at least four of them (transparent huge pages, asked for before
 * the first write). Attention sweeps each head's rows in order once per
 * tile; with 4 KiB pages that is a TLB miss and a restart of the hardware
 * prefetcher every 4 KiB (as for the repacked weights, engine/cpu/repack.c).
 * half: the bytes of each half, rounded up to the page size on return. */
static uint8_t *kv_map(size_t *half) {
    const size_t huge = (size_t)2 << 20;
    const char *thp = getenv("TERN_THP");
    const bool use_huge = *half >= 4 * huge && !(thp && *thp == '0');
    const size_t align = use_huge ? huge : 4096;
    if (*half > SIZE_MAX / 4)
        return NULL;
    const size_t len = 2 * ((*half + align - 1) / align * align);
    const size_t span = len + (use_huge ? huge : 0);
    uint8_t *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (p + span > a + len)
        munmap(a + len, (size_t)(p + span - (a + len)));
#ifdef MADV_HUGEPAGE
    if (use_huge)
        madvise(a, len, MADV_HUGEPAGE); /* a hint: without THP it changes nothing */
#endif
    *half = len / 2;
    return a;
}

void tn_ctx_free(tn_ctx *ctx) {
    if (!ctx)
        return;
    tn_cpu_free(ctx->cpu);
    if (ctx->k_cache)
        munmap(ctx->k_cache, 2 * ctx->kv_half_bytes);
    free(ctx->x);
    free(ctx->xn);
    free(ctx->q);
    free(ctx->qb);
    free(ctx->k);
    free(ctx->v);
    free(ctx->att);
    free(ctx->o);
    free(ctx->gate);
    free(ctx->up);
    free(ctx->rope_cs);
    free(ctx->scores);
    free(ctx->cap_ids);
    free(ctx->cap);
    free(ctx->kv_off);
    free(ctx->ple);
    free(ctx->ple_row);
    free(ctx->plg);
    free(ctx->moe_logits);
    free(ctx->moe_sel);
    free(ctx->moe_w);
    free(ctx->moe_list);
    free(ctx->moe_count);
    free(ctx->moe_at);
    free(ctx->moe_in);
    free(ctx->moe_y);
    free(ctx->moe_mats);
    free(ctx->moe_items);
    free(ctx->moe_dense);
    free(ctx);
}

/* Floats of ctx->gate and ctx->up for `rows` rows: a dense layer's rows, or
 * a mixture's K experts' rows for each (moe_ffn runs them in one pass). */
static size_t ff_floats(const tn_hparams *hp, size_t rows) {
    size_t f = (size_t)hp->n_ff, fx = (size_t)hp->n_expert_used * (size_t)hp->n_ff_exp;
    return rows * (fx > f ? fx : f);
}

/* The mixture-of-experts scratch for `rows` rows (nothing for a dense
 * model). False when out of memory; the old buffers are then kept. */
static bool moe_scratch(tn_ctx *ctx, int32_t rows) {
    const tn_hparams *hp = &ctx->model->hp;
    if (hp->n_expert == 0)
        return true;
    const size_t U = (size_t)rows, NE = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used;
    const size_t E = (size_t)hp->n_embd;
    bool ok = true;
    float *logits = xcalloc(U * NE, sizeof(float), &ok);
    int32_t *sel = xcalloc(U * K, sizeof(int32_t), &ok);
    float *w = xcalloc(U * K, sizeof(float), &ok);
    int32_t *list = xcalloc(U * K, sizeof(int32_t), &ok);
    int32_t *at = xcalloc(U * K, sizeof(int32_t), &ok);
    int32_t *count = xcalloc(NE + 1, sizeof(int32_t), &ok);
    float *in = xcalloc(U * K * E, sizeof(float), &ok);
    float *y = xcalloc(U * K * E, sizeof(float), &ok);
    float *dense = hp->moe_dense ? xcalloc(U * E, sizeof(float), &ok) : NULL;
    tn_weight *mats = xcalloc(3 * NE, sizeof(tn_weight), &ok);
    tn_matmul_item *items = xcalloc(2 * NE, sizeof(tn_matmul_item), &ok);
    if (!ok) {
        free(logits), free(sel), free(w), free(list), free(at), free(count), free(in), free(y);
        free(dense), free(mats), free(items);
        return false;
    }
    free(ctx->moe_logits), free(ctx->moe_sel), free(ctx->moe_w), free(ctx->moe_list);
    free(ctx->moe_at), free(ctx->moe_count), free(ctx->moe_in), free(ctx->moe_y);
    free(ctx->moe_dense), free(ctx->moe_mats), free(ctx->moe_items);
    ctx->moe_dense = dense;
    ctx->moe_logits = logits;
    ctx->moe_sel = sel;
    ctx->moe_w = w;
    ctx->moe_list = list;
    ctx->moe_at = at;
    ctx->moe_count = count;
    ctx->moe_in = in;
    ctx->moe_y = y;
    ctx->moe_mats = mats;
    ctx->moe_items = items;
    return true;
}

int tn_ctx_new(const tn_model *model, int32_t n_ctx, int32_t n_threads, tn_ctx **out,
               tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_new: out is NULL");
    *out = NULL;
    if (!model)
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_new: model is NULL");
    const tn_hparams *hp = &model->hp;
    if (n_ctx <= 0)
        n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    /* Per position: the KV width of every layer that owns KV memory. */
    uint64_t row = 0;
    for (int32_t il = 0; il < hp->n_layer; il++)
        if (model->layers[il].kv_layer == il)
            row += (uint64_t)model->layers[il].n_head_kv * (uint64_t)model->layers[il].head_dim;
    const uint64_t kv_rows = ((uint64_t)n_ctx + TN_ATTN_KB - 1) / TN_ATTN_KB * TN_ATTN_KB;
    uint64_t kv_elems;
    if (!tn_mul_u64(row, kv_rows, &kv_elems) || kv_elems > SIZE_MAX / sizeof(uint16_t) / 2)
        return tn_fail(err, TN_ERR_OVERFLOW, "%s: a context of %d tokens does not fit in memory",
                       model->path, n_ctx);
    tn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    ctx->model = model;
    ctx->n_ctx = n_ctx;
    ctx->kv_rows = (int32_t)kv_rows;
    atomic_init(&ctx->cancel, false);
    tn_decode_tune_init(&ctx->decode_tune);
    tn_read_guard_install(); /* the steps' guards need the handler */
    ctx->cpu = tn_backend_pool_new(&model->backend, n_threads);
    if (!ctx->cpu) {
        tn_ctx_free(ctx);
        return tn_fail(err, TN_ERR_NOMEM, "cannot start the CPU thread pool");
    }
    ctx->n_threads = tn_cpu_threads(ctx->cpu);
    bool ok = true;
    ctx->kv_off = xcalloc((size_t)hp->n_layer, sizeof *ctx->kv_off, &ok);
    if (!ok) {
        tn_ctx_free(ctx);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    size_t off = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const tn_layer *L = &model->layers[il];
        if (L->kv_layer != il) {
            ctx->kv_off[il] = ctx->kv_off[L->kv_layer];
            continue;
        }
        ctx->kv_off[il] = off;
        off += (size_t)L->n_head_kv * (size_t)L->head_dim * (size_t)kv_rows;
    }
    size_t half = (size_t)kv_elems * sizeof(uint16_t);
    uint8_t *kv = kv_map(&half);
    if (kv) {
        ctx->kv_half_bytes = half;
        ctx->k_cache = (uint16_t *)(void *)kv;
        ctx->v_cache = (uint16_t *)(void *)(kv + half);
    } else {
        tn_ctx_free(ctx);
        return tn_fail(err, TN_ERR_NOMEM,
                       "cannot allocate the KV cache: %d tokens need %.1f MiB (try a smaller "
                       "context)",
                       n_ctx, 2.0 * (double)kv_elems * sizeof(uint16_t) / (1 << 20));
    }
    const size_t U = TN_UBATCH, E = (size_t)hp->n_embd;
    const size_t QD = (size_t)hp->n_head * (size_t)hp->max_head_dim;
    const size_t KD = (size_t)hp->max_kv_dim;
    const size_t LP = (size_t)hp->n_layer * (size_t)hp->n_embd_per_layer;
    ctx->x = xcalloc(U * E, sizeof(float), &ok);
    ctx->xn = xcalloc(U * E, sizeof(float), &ok);
    ctx->q = xcalloc(U * QD, sizeof(float), &ok);
    ctx->qb = xcalloc(U * QD, sizeof(uint16_t), &ok);
    ctx->k = xcalloc(U * KD, sizeof(float), &ok);
    ctx->v = xcalloc(U * KD, sizeof(float), &ok);
    ctx->att = xcalloc(U * QD, sizeof(float), &ok);
    ctx->o = xcalloc(U * E, sizeof(float), &ok);
    ctx->gate = xcalloc(ff_floats(hp, U), sizeof(float), &ok);
    ctx->up = xcalloc(ff_floats(hp, U), sizeof(float), &ok);
    ctx->rope_cs = xcalloc(2 * U * (size_t)hp->max_rot, sizeof(float), &ok);
    ctx->scores = xcalloc((size_t)ctx->n_threads * tn_attention_scratch_floats(hp->max_head_dim),
                          sizeof(float), &ok);
    if (LP > 0) {
        ctx->ple = xcalloc(U * LP, sizeof(float), &ok);
        ctx->ple_row = xcalloc(LP, sizeof(float), &ok);
        ctx->plg = xcalloc(U * (size_t)hp->n_embd_per_layer, sizeof(float), &ok);
    }
    ctx->ub_rows = TN_UBATCH;
    ok = ok && moe_scratch(ctx, TN_UBATCH);
    if (!ok) {
        tn_ctx_free(ctx);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for the inference scratch");
    }
    *out = ctx;
    return TN_OK;
}

const tn_model *tn_ctx_model(const tn_ctx *ctx) { return ctx->model; }
int32_t tn_ctx_n_ctx(const tn_ctx *ctx) { return ctx->n_ctx; }
int32_t tn_ctx_n_threads(const tn_ctx *ctx) { return ctx->n_threads; }
int32_t tn_ctx_kv_len(const tn_ctx *ctx) { return ctx->kv_len; }

int tn_ctx_kv_truncate(tn_ctx *ctx, int32_t n) {
    if (!ctx || n < 0 || n > ctx->kv_len)
        return TN_ERR_INVALID;
    /* Rows from n on are dead: the next decode overwrites them before any
     * query can read them (attention only reads rows < its position + 1). */
    ctx->kv_len = n;
    return TN_OK;
}

void tn_ctx_cancel(tn_ctx *ctx) {
    if (ctx)
        atomic_store(&ctx->cancel, true);
}
void tn_ctx_cancel_reset(tn_ctx *ctx) {
    if (ctx)
        atomic_store(&ctx->cancel, false);
}
bool tn_ctx_cancelled(const tn_ctx *ctx) {
    return ctx && atomic_load(&((tn_ctx *)ctx)->cancel);
}

int tn_ctx_capture_hidden(tn_ctx *ctx, const int32_t *ids, int32_t n_ids, tn_error *err) {
    if (!ctx || n_ids < 0 || (n_ids > 0 && !ids))
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_capture_hidden: bad arguments");
    for (int32_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] > ctx->model->hp.n_layer)
            return tn_fail(err, TN_ERR_INVALID,
                           "hidden-state layer %d is outside 0..%d (0 = embeddings)", ids[i],
                           ctx->model->hp.n_layer);
    int32_t *copy = NULL;
    if (n_ids > 0) {
        copy = malloc((size_t)n_ids * sizeof *copy);
        if (!copy)
            return tn_fail(err, TN_ERR_NOMEM, "out of memory");
        memcpy(copy, ids, (size_t)n_ids * sizeof *copy);
    }
    free(ctx->cap_ids);
    free(ctx->cap);
    ctx->cap_ids = copy;
    ctx->n_cap = n_ids;
    ctx->cap = NULL;
    ctx->cap_rows = 0;
    ctx->cap_alloc = 0;
    return TN_OK;
}

const float *tn_ctx_hidden(const tn_ctx *ctx, int32_t *n_rows) {
    if (n_rows)
        *n_rows = ctx && ctx->n_cap > 0 ? ctx->cap_rows : 0;
    return ctx && ctx->n_cap > 0 ? ctx->cap : NULL;
}

/* ------------------------------------------------------ KV state bytes */

uint64_t tn_ctx_kv_state_bytes(const tn_ctx *ctx, int32_t n) {
    if (!ctx || n < 0 || n > ctx->n_ctx)
        return 0;
    return (uint64_t)n * tn_model_kv_bytes_per_token(ctx->model);
}

/* Copies rows [0, n) of every (layer, kv head), K then V, to or from buf,
 * where each head's rows are [n][head_dim] bf16 (the snapshot format,
 * whatever the cache's own layout). */
static void kv_blocks(const tn_ctx *ctx, int32_t n, void *buf, bool save) {
    const tn_model *m = ctx->model;
    uint16_t *p = buf;
    for (int which = 0; which < 2; which++) {
        uint16_t *cache = which == 0 ? ctx->k_cache : ctx->v_cache;
        /* Layers that own KV memory, in order (shared-KV layers have none);
         * each with its own head count and size. */
        for (int64_t b = 0; b < (int64_t)m->hp.n_layer * m->hp.max_kv_dim; b++) {
            const int32_t il = (int32_t)(b / m->hp.max_kv_dim), kvh = (int32_t)(b % m->hp.max_kv_dim);
            const tn_layer *L = &m->layers[il];
            if (L->kv_layer != il || kvh >= L->n_head_kv)
                continue;
            const int32_t D = L->head_dim;
            const size_t block = (size_t)n * (size_t)D;
            uint16_t *rows = cache + ctx->kv_off[il] + (size_t)kvh * (size_t)ctx->kv_rows * (size_t)D;
            m->backend.run.kv_copy(&m->backend, rows, which == 1, n, D, p, save);
            p += block;
        }
    }
}

int tn_ctx_kv_state_save(const tn_ctx *ctx, int32_t n, void *dst, uint64_t size, tn_error *err) {
    if (!ctx || !dst || n < 0 || n > ctx->kv_len)
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_kv_state_save: bad arguments");
    if (size != tn_ctx_kv_state_bytes(ctx, n))
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_kv_state_save: buffer of %llu bytes, need %llu",
                       (unsigned long long)size,
                       (unsigned long long)tn_ctx_kv_state_bytes(ctx, n));
    kv_blocks(ctx, n, dst, true);
    return TN_OK;
}

int tn_ctx_kv_state_load(tn_ctx *ctx, int32_t n, const void *src, uint64_t size, tn_error *err) {
    if (!ctx || !src || n < 0 || n > ctx->n_ctx)
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_kv_state_load: bad arguments");
    if (size != tn_ctx_kv_state_bytes(ctx, n))
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_kv_state_load: %llu bytes, expected %llu",
                       (unsigned long long)size,
                       (unsigned long long)tn_ctx_kv_state_bytes(ctx, n));
    kv_blocks(ctx, n, (void *)src, false);
    ctx->kv_len = n;
    return TN_OK;
}

/* --------------------------------------------------------- the forward */

typedef struct ubatch {
    tn_ctx *ctx;
    const tn_layer *layer;
    int32_t il;
    int32_t n;     /* rows */
    int64_t pos0;  /* position of row 0 */
    int64_t see_to; /* rows at positions below this see every key below it: an image
                       span attends bidirectionally (Gemma 3); 0: causal */
    int32_t ff;    /* width of the feed-forward rows in ctx->gate and ctx->up (task_glu) */
} ubatch;

/* Layer il's KV head kvh: a shared-KV layer gets its source layer's. */
static uint16_t *kv_head_rows(const tn_ctx *ctx, uint16_t *cache, int32_t il, int32_t kvh) {
    return cache + ctx->kv_off[il] +
           (size_t)kvh * (size_t)ctx->kv_rows * (size_t)ctx->model->layers[il].head_dim;
}

const uint16_t *tn_ctx_kv_head(const tn_ctx *ctx, bool values, int32_t il, int32_t kvh) {
    return kv_head_rows(ctx, values ? ctx->v_cache : ctx->k_cache, il, kvh);
}

/* QK-norm and rope of every head of every row, then the keys and values go
 * into the cache. One item = one (row, head). */
static void task_qk(void *p, int ith, int nth) {
    const ubatch *ub = p;
    tn_ctx *ctx = ub->ctx;
    const tn_hparams *hp = &ctx->model->hp;
    const tn_layer *L = ub->layer;
    const int32_t D = L->head_dim, H = hp->n_head;
    /* A shared-KV layer computes only queries: its keys and values are
     * another layer's, already in the cache. */
    const int32_t KV = L->kv_layer == ub->il ? L->n_head_kv : 0;
    const int64_t items = (int64_t)ub->n * (H + KV);
    const float *cs_all = ctx->rope_cs + (L->swa ? (size_t)ctx->ub_rows * (size_t)hp->max_rot : 0);
    for (int64_t it = ith; it < items; it += nth) {
        const int32_t i = (int32_t)(it / (H + KV)), h = (int32_t)(it % (H + KV));
        const float *cs = cs_all + (size_t)i * (size_t)hp->max_rot;
        if (h < H) {
            float *q = ctx->q + ((size_t)i * H + (size_t)h) * D;
            if (hp->qk_norm)
                tn_rmsnorm(q, q, L->q_norm, D, hp->norm_eps);
            rope_apply(q, cs, L->n_rot, hp->rope_kind);
            uint16_t *qb = ctx->qb + ((size_t)i * H + (size_t)h) * D;
            for (int32_t d = 0; d < D; d++)
                qb[d] = tn_bf16_from_f32(q[d]);
        } else {
            const int32_t kvh = h - H;
            float *k = ctx->k + ((size_t)i * KV + (size_t)kvh) * D;
            float *v = ctx->v + ((size_t)i * KV + (size_t)kvh) * D;
            if (hp->qk_norm)
                tn_rmsnorm(k, k, L->k_norm, D, hp->norm_eps);
            if (hp->v_norm)
                tn_rmsnorm(v, v, ctx->model->ones, D, hp->norm_eps);
            rope_apply(k, cs, L->n_rot, hp->rope_kind);
            const int64_t pos = ub->pos0 + i;
            const tn_backend *be = &ctx->model->backend;
            be->run.kv_store(be, kv_head_rows(ctx, ctx->k_cache, ub->il, kvh),
                             kv_head_rows(ctx, ctx->v_cache, ub->il, kvh), pos, k, v, D);
        }
    }
}

/* Causal attention. One item = one KV head and a tile of up to
 * TN_ATTN_TILE of its queries (the heads of its GQA group for consecutive
 * rows), so that a block of keys and values is read once for all of them;
 * each query's arithmetic is fixed by the backend's attention and does not
 * depend on the tile (engine/cpu/tn-cpu.h): work is split over heads and rows,
 * never over the positions a query attends to. */
static void task_attention(void *p, int ith, int nth) {
    const ubatch *ub = p;
    tn_ctx *ctx = ub->ctx;
    const tn_hparams *hp = &ctx->model->hp;
    const tn_layer *L = ub->layer;
    const int32_t D = L->head_dim, H = hp->n_head, KV = L->n_head_kv, group = H / KV;
    const int32_t window = L->swa ? hp->sliding_window : 0;
    float *scratch = ctx->scores + (size_t)ith * tn_attention_scratch_floats(D);
    const tn_backend *be = &ctx->model->backend;
    const int64_t per_head = (int64_t)ub->n * group;
    const int64_t tiles = (per_head + TN_ATTN_TILE - 1) / TN_ATTN_TILE;
    /* When the heads divide evenly, each thread takes whole heads and reads
     * only their keys and values from memory (attention over a 900-token
     * pin 5 % faster); else tiles go round, which also balances the unequal
     * work of causal rows within a head. */
    const bool by_head = KV % nth == 0;
    const int64_t it0 = by_head ? (int64_t)(KV / nth) * tiles * ith : ith;
    const int64_t it1 = by_head ? (int64_t)(KV / nth) * tiles * (ith + 1) : (int64_t)KV * tiles;
    const int64_t step = by_head ? 1 : nth;
    for (int64_t it = it0; it < it1; it += step) {
        const int32_t g = (int32_t)(it / tiles);
        tn_attn_tile t = {.head_dim = D,
                          .k = kv_head_rows(ctx, ctx->k_cache, ub->il, g),
                          .v = kv_head_rows(ctx, ctx->v_cache, ub->il, g),
                          .scale = hp->attn_scale};
        const int64_t q0 = (it % tiles) * TN_ATTN_TILE;
        for (int64_t qi = q0; qi < per_head && qi < q0 + TN_ATTN_TILE; qi++) {
            const int32_t i = (int32_t)(qi / group), h = g * group + (int32_t)(qi % group);
            const int64_t qpos = ub->pos0 + i;
            t.q[t.n] = ctx->qb + ((size_t)i * H + (size_t)h) * D;
            t.out[t.n] = ctx->att + ((size_t)i * H + (size_t)h) * D;
            if (L->sinks) {
                t.has_sinks = true;
                t.sink[t.n] = L->sinks[h];
            }
            t.first[t.n] = window > 0 && qpos - window + 1 > 0 ? qpos - window + 1 : 0;
            t.last[t.n] = qpos < ub->see_to ? ub->see_to - 1 : qpos; /* image span */
            t.n++;
        }
        be->run.attention(be, &t, scratch);
    }
}

/* gate = act(gate) * up, element-wise: contiguous chunks per thread. */
static void task_glu(void *p, int ith, int nth) {
    const ubatch *ub = p;
    tn_ctx *ctx = ub->ctx;
    const tn_hparams *hp = &ctx->model->hp;
    const int64_t total = (int64_t)ub->n * ub->ff;
    const int64_t chunk = (total + nth - 1) / nth;
    const int64_t lo = chunk * ith, hi = lo + chunk < total ? lo + chunk : total;
    float *g = ctx->gate;
    const float *u = ctx->up;
    if (hp->oai) /* ggml_swiglu_oai, alpha 1.702 and limit 7 (llama.cpp's constants) */
        for (int64_t e = lo; e < hi; e++) {
            const float x = g[e] < 7.0f ? g[e] : 7.0f;
            const float y = u[e] < -7.0f ? -7.0f : u[e] > 7.0f ? 7.0f : u[e];
            g[e] = x / (1.0f + expf(1.702f * -x)) * (y + 1.0f);
        }
    else if (hi <= lo)
        return;
    else if (hp->gelu)
        tn_gelu_mul(g + lo, u + lo, hi - lo);
    else
        tn_silu_mul(g + lo, u + lo, hi - lo);
}

static void capture(tn_ctx *ctx, int32_t id, int32_t row0, int32_t n) {
    const int32_t E = ctx->model->hp.n_embd;
    for (int32_t c = 0; c < ctx->n_cap; c++) {
        if (ctx->cap_ids[c] != id)
            continue;
        for (int32_t i = 0; i < n; i++)
            memcpy(ctx->cap + ((size_t)(row0 + i) * ctx->n_cap + (size_t)c) * E,
                   ctx->x + (size_t)i * E, (size_t)E * sizeof(float));
    }
}

/* Runs fn on every thread of the context, through the backend. */
static void parallel(tn_ctx *ctx, tn_task_fn fn, void *arg) {
    const tn_backend *be = &ctx->model->backend;
    be->run.parallel_for(be, ctx->cpu, fn, arg);
}

static int matmul(tn_ctx *ctx, const tn_weight *w, const float *x, int32_t n, float *y,
                  tn_error *err) {
    const tn_backend *be = &ctx->model->backend;
    const double t0 = tn_decode_tune_mm_begin(&ctx->decode_tune);
    int rc = be->run.matmul(be, ctx->cpu, w, x, n, y);
    tn_decode_tune_mm_end(&ctx->decode_tune, t0, &(tn_matmul_item){.w = w}, 1);
    if (rc != TN_OK) {
        const char *t = tn_type_name(w->type);
        return tn_fail(err, rc, "%s: matrix product of %s weights failed (%s)",
                       ctx->model->path, t ? t : "?", tn_status_name(rc));
    }
    return TN_OK;
}

/* Independent products in one hand-off to the threads (tn-backend.h). */
static int matmul_group(tn_ctx *ctx, const tn_matmul_item *items, int n, tn_error *err) {
    const tn_backend *be = &ctx->model->backend;
    const double t0 = tn_decode_tune_mm_begin(&ctx->decode_tune);
    int rc = be->run.matmul_group(be, ctx->cpu, items, n);
    tn_decode_tune_mm_end(&ctx->decode_tune, t0, items, n);
    if (rc != TN_OK) {
        const char *t = n > 0 ? tn_type_name(items[0].w->type) : NULL;
        return tn_fail(err, rc, "%s: matrix product of %s weights failed (%s)",
                       ctx->model->path, t ? t : "?", tn_status_name(rc));
    }
    return TN_OK;
}

/* True when some capture wants the last layer's output of every row. */
static bool captures_last_layer(const tn_ctx *ctx) {
    for (int32_t c = 0; c < ctx->n_cap; c++)
        if (ctx->cap_ids[c] == ctx->model->hp.n_layer)
            return true;
    return false;
}

/* Gemma 4's per-layer inputs of n rows into ctx->ple [n][n_layer][P]
 * (src/models/gemma4.cpp, project_per_layer_inputs): the scaled embedding
 * projected by per_layer_model_proj and scaled by 1/sqrt(n_embd), each
 * layer's slice RMS-normed by per_layer_proj_norm, plus the token's row of
 * per_layer_token_embd times sqrt(P), all times 1/sqrt(2). That table row
 * is read from the mapped file (row 0 for embedding input, as llama.cpp). */
static int per_layer_inputs(tn_ctx *ctx, const int32_t *tokens, int32_t n, tn_error *err) {
    const tn_model *m = ctx->model;
    const tn_hparams *hp = &m->hp;
    const int32_t P = hp->n_embd_per_layer, NL = hp->n_layer;
    const size_t LP = (size_t)NL * (size_t)P;
    int rc = matmul(ctx, &m->pl_model_proj, ctx->x, n, ctx->ple, err);
    if (rc != TN_OK)
        return rc;
    const float proj_scale = 1.0f / sqrtf((float)hp->n_embd), tok_scale = sqrtf((float)P);
    const float in_scale = 1.0f / sqrtf(2.0f);
    for (int32_t i = 0; i < n; i++) {
        const int32_t tok = tokens ? tokens[i] : 0;
        rc = m->backend.run.weight_row(&m->backend, &m->pl_tok_embd, tok, ctx->ple_row);
        if (rc != TN_OK)
            return tn_fail(err, rc, "%s: cannot read per-layer embedding row %d", m->path, tok);
        float *r = ctx->ple + (size_t)i * LP;
        for (size_t e = 0; e < LP; e++)
            r[e] *= proj_scale;
        for (int32_t il = 0; il < NL; il++) {
            float *s = r + (size_t)il * P;
            const float *t = ctx->ple_row + (size_t)il * P;
            tn_rmsnorm(s, s, m->pl_proj_norm, P, hp->norm_eps);
            for (int32_t e = 0; e < P; e++)
                s[e] = (s[e] + t[e] * tok_scale) * in_scale;
        }
    }
    return TN_OK;
}

/* The per-layer input's block at the end of Gemma 4 layer il, on rows
 * [0, n) of ctx->x (whose per-layer inputs are rows skip.. of ctx->ple):
 * x += post_norm(proj(gelu(inp_gate x) * input)). */
static int per_layer_block(tn_ctx *ctx, const tn_layer *L, int32_t il, int32_t n, int32_t skip,
                           tn_error *err) {
    const tn_hparams *hp = &ctx->model->hp;
    const int32_t P = hp->n_embd_per_layer, E = hp->n_embd;
    const size_t LP = (size_t)hp->n_layer * (size_t)P;
    int rc = matmul(ctx, &L->pl_gate, ctx->x, n, ctx->plg, err);
    if (rc != TN_OK)
        return rc;
    for (int32_t i = 0; i < n; i++) {
        float *g = ctx->plg + (size_t)i * P;
        const float *in = ctx->ple + (size_t)(i + skip) * LP + (size_t)il * P;
        tn_gelu_mul(g, in, P);
    }
    if ((rc = matmul(ctx, &L->pl_proj, ctx->plg, n, ctx->o, err)))
        return rc;
    for (int32_t i = 0; i < n; i++) {
        float *o = ctx->o + (size_t)i * E, *x = ctx->x + (size_t)i * E;
        tn_rmsnorm(o, o, L->pl_post_norm, E, hp->norm_eps);
        for (int32_t e = 0; e < E; e++)
            x[e] += o[e];
    }
    return TN_OK;
}

/* gpt-oss: the biases of the q, k and v projections of rows [0, n), before
 * rope (llama.cpp's build_qkv adds them right after each product). */
static void add_qkv_bias(tn_ctx *ctx, const tn_layer *L, int32_t il, int32_t n) {
    const size_t QD = (size_t)ctx->model->hp.n_head * (size_t)L->head_dim;
    const size_t KD = (size_t)L->n_head_kv * (size_t)L->head_dim;
    for (int32_t i = 0; i < n; i++) {
        float *q = ctx->q + (size_t)i * QD;
        for (size_t e = 0; e < QD; e++)
            q[e] += L->bq[e];
        if (L->kv_layer != il)
            continue;
        float *k = ctx->k + (size_t)i * KD, *v = ctx->v + (size_t)i * KD;
        for (size_t e = 0; e < KD; e++) {
            k[e] += L->bk[e];
            v[e] += L->bv[e];
        }
    }
}

/* gpt-oss's routing of one row (llama.cpp's build_moe_ffn with
 * LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, norm_w false): the K
 * largest logits p[NE] (with the router bias already added; best first, of
 * equal ones the lower index, NaNs last), their weights a softmax over
 * those K logits alone (max, exp and sum in slot order). */
static void moe_route_topk_softmax(const float *p, int32_t NE, int32_t K, int32_t *sel,
                                   float *w) {
    bool taken[512] = {false}; /* NE <= 512 (the loader's bound) */
    for (int32_t k = 0; k < K; k++) {
        int32_t best = -1;
        for (int32_t e = 0; e < NE; e++)
            if (!taken[e] && (best < 0 || p[e] > p[best] || (isnan(p[best]) && !isnan(p[e]))))
                best = e;
        taken[best] = true;
        sel[k] = best;
        w[k] = p[best];
    }
    float mx = w[0];
    for (int32_t k = 1; k < K; k++)
        mx = w[k] > mx ? w[k] : mx;
    float sum = 0;
    for (int32_t k = 0; k < K; k++)
        sum += (w[k] = expf(w[k] - mx));
    const float inv = 1.0f / sum;
    for (int32_t k = 0; k < K; k++)
        w[k] *= inv;
}

/* Softmax over one row's router logits p[NE] (in place), the K most probable
 * experts (best first; of equal ones the lower index, and a NaN row still
 * yields K distinct valid experts), their probabilities normalized to sum 1
 * (the sum clamped below at 2^-14, as llama.cpp's build_moe_ffn does with
 * norm_w, which qwen3moe sets). A function of the row alone. */
static void moe_route(float *p, int32_t NE, int32_t K, int32_t *sel, float *w) {
    float mx = p[0];
    for (int32_t e = 1; e < NE; e++)
        mx = p[e] > mx ? p[e] : mx;
    float sum = 0;
    for (int32_t e = 0; e < NE; e++)
        sum += (p[e] = expf(p[e] - mx));
    const float inv = 1.0f / sum;
    for (int32_t e = 0; e < NE; e++)
        p[e] *= inv;
    for (int32_t k = 0; k < K; k++) {
        int32_t best = -1;
        for (int32_t e = 0; e < NE; e++)
            if (p[e] != -2.0f && (best < 0 || p[e] > p[best]))
                best = e;
        sel[k] = best;
        w[k] = p[best];
        p[best] = -2.0f; /* taken: below every probability */
    }
    float ws = 0;
    for (int32_t k = 0; k < K; k++)
        ws += w[k];
    ws = ws > 6.103515625e-5f ? ws : 6.103515625e-5f;
    for (int32_t k = 0; k < K; k++)
        w[k] /= ws;
}

static tn_weight expert(const tn_experts *x, int32_t e) {
    tn_weight w = x->first;
    w.data = (const uint8_t *)x->first.data + (size_t)e * x->stride;
    return w;
}

/* The mixture-of-experts feed-forward of rows [0, n): ctx->xn in (the
 * experts' input), router_in [n][n_embd] the router's input (qwen3moe: the
 * same rows; it may be ctx->moe_in, read before the gathering reuses it),
 * ctx->o out. Each row routes to K experts; the rows are then grouped by
 * expert, so that each chosen expert's three matrices are read once for all
 * its rows (a decode step reads only the K experts of its token). A
 * product's result for one row does not depend on the rows beside it
 * (tn-backend.h), and a row's K outputs are summed in its own slot order,
 * so the output is batch-invariant like every other sublayer. */
static int moe_ffn(tn_ctx *ctx, const tn_layer *L, const ubatch *ub0, int32_t n,
                   const float *router_in, tn_error *err) {
    const tn_hparams *hp = &ctx->model->hp;
    const int32_t E = hp->n_embd, NE = hp->n_expert, K = hp->n_expert_used;
    int rc = matmul(ctx, &L->ffn_gate_inp, router_in, n, ctx->moe_logits, err);
    if (rc != TN_OK)
        return rc;
    /* TERN_DEBUG_ROUTER: every row's router logits (biased) on stderr, to
     * compare routings with llama.cpp's (tools/compare/router-compare.sh). */
    const bool dump = getenv("TERN_DEBUG_ROUTER") != NULL;
    for (int32_t i = 0; i < n; i++) {
        float *p = ctx->moe_logits + (size_t)i * NE;
        if (hp->oai)
            for (int32_t e = 0; e < NE; e++)
                p[e] += L->gate_inp_b[e];
        if (dump) {
            fprintf(stderr, "router %d %lld", (int)ub0->il, (long long)(ub0->pos0 + i));
            for (int32_t e = 0; e < NE; e++)
                fprintf(stderr, " %.6f", (double)p[e]);
            fputc('\n', stderr);
        }
        if (hp->oai) {
            moe_route_topk_softmax(p, NE, K, ctx->moe_sel + (size_t)i * K,
                                   ctx->moe_w + (size_t)i * K);
        } else {
            moe_route(p, NE, K, ctx->moe_sel + (size_t)i * K, ctx->moe_w + (size_t)i * K);
        }
    }
    /* Group (row, slot) pairs by expert: a scan per expert costs NE * n * K
     * compares, nothing beside the products. */
    int32_t len = 0;
    for (int32_t e = 0; e < NE; e++) {
        ctx->moe_count[e] = len;
        for (int32_t j = 0; j < n * K; j++)
            if (ctx->moe_sel[j] == e) {
                ctx->moe_at[j] = len;
                ctx->moe_list[len++] = j;
            }
    }
    ctx->moe_count[NE] = len;
    /* The chosen experts' gate and up products in one hand-off to the
     * threads, then one GLU over all their rows, then every down product in
     * one more: three sections a layer rather than four per chosen expert,
     * whose matrices at decode are too small to pay for their own. A
     * decode step's K experts read the token's row where it is. */
    const size_t FX = (size_t)hp->n_ff_exp;
    if (n > 1)
        for (int32_t g = 0; g < len; g++)
            memcpy(ctx->moe_in + (size_t)g * E, ctx->xn + (size_t)(ctx->moe_list[g] / K) * E,
                   (size_t)E * sizeof(float));
    tn_matmul_item *items = ctx->moe_items;
    int n_items = 0;
    for (int32_t e = 0; e < NE; e++) {
        const int32_t start = ctx->moe_count[e], c = ctx->moe_count[e + 1] - start;
        if (c == 0)
            continue;
        tn_weight *m = ctx->moe_mats + 3 * (n_items / 2);
        m[0] = expert(&L->gate_exps, e);
        m[1] = expert(&L->up_exps, e);
        m[2] = expert(&L->down_exps, e);
        const float *x = n > 1 ? ctx->moe_in + (size_t)start * E : ctx->xn;
        items[n_items++] = (tn_matmul_item){.w = &m[0], .x = x, .n = c,
                                            .y = ctx->gate + (size_t)start * FX};
        items[n_items++] = (tn_matmul_item){.w = &m[1], .x = x, .n = c,
                                            .y = ctx->up + (size_t)start * FX};
    }
    if ((rc = matmul_group(ctx, items, n_items, err)))
        return rc;
    if (L->gate_exps_b) /* gpt-oss: biases after each product, as ggml_add_id */
        for (int32_t g = 0; g < len; g++) {
            const int32_t e = ctx->moe_sel[ctx->moe_list[g]];
            const float *bg = L->gate_exps_b + (size_t)e * FX, *bu = L->up_exps_b + (size_t)e * FX;
            float *gr = ctx->gate + (size_t)g * FX, *ur = ctx->up + (size_t)g * FX;
            for (size_t f = 0; f < FX; f++) {
                gr[f] += bg[f];
                ur[f] += bu[f];
            }
        }
    ubatch ub = *ub0;
    ub.ff = hp->n_ff_exp;
    ub.n = len;
    parallel(ctx, task_glu, &ub);
    n_items = 0;
    for (int32_t e = 0; e < NE; e++) {
        const int32_t start = ctx->moe_count[e], c = ctx->moe_count[e + 1] - start;
        if (c == 0)
            continue;
        items[n_items] = (tn_matmul_item){.w = &ctx->moe_mats[3 * n_items + 2],
                                          .x = ctx->gate + (size_t)start * FX, .n = c,
                                          .y = ctx->moe_y + (size_t)start * E};
        n_items++;
    }
    if ((rc = matmul_group(ctx, items, n_items, err)))
        return rc;
    if (L->down_exps_s || L->down_exps_b)
        for (int32_t g = 0; g < len; g++) {
            const int32_t e = ctx->moe_sel[ctx->moe_list[g]];
            float *yr = ctx->moe_y + (size_t)g * E;
            if (L->down_exps_s) /* before the routing weight, as ggml's build_lora_mm_id */
                for (int32_t d = 0; d < E; d++)
                    yr[d] *= L->down_exps_s[e];
            if (L->down_exps_b) /* gpt-oss: also before the routing weight */
                for (int32_t d = 0; d < E; d++)
                    yr[d] += L->down_exps_b[(size_t)e * (size_t)E + (size_t)d];
        }
    for (int32_t i = 0; i < n; i++) {
        float *o = ctx->o + (size_t)i * E;
        const float *w = ctx->moe_w + (size_t)i * K;
        const int32_t *at = ctx->moe_at + (size_t)i * K;
        const float *y = ctx->moe_y + (size_t)at[0] * E;
        for (int32_t d = 0; d < E; d++)
            o[d] = w[0] * y[d];
        for (int32_t k = 1; k < K; k++) {
            y = ctx->moe_y + (size_t)at[k] * E;
            for (int32_t d = 0; d < E; d++)
                o[d] += w[k] * y[d];
        }
    }
    return TN_OK;
}

/* The dense gated feed-forward of rows [0, n): ctx->xn in, ctx->o out. */
static int dense_ffn(tn_ctx *ctx, const tn_layer *L, const ubatch *ub0, int32_t n,
                     tn_error *err) {
    const tn_matmul_item gate_up[2] = {{.w = &L->ffn_gate, .x = ctx->xn, .n = n, .y = ctx->gate},
                                       {.w = &L->ffn_up, .x = ctx->xn, .n = n, .y = ctx->up}};
    int rc = matmul_group(ctx, gate_up, 2, err);
    if (rc)
        return rc;
    ubatch ub = *ub0;
    ub.ff = L->n_ff;
    parallel(ctx, task_glu, &ub);
    return matmul(ctx, &L->ffn_down, ctx->gate, n, ctx->o, err);
}

/* Gemma 4 26B-A4B's feed-forward of rows [0, n) (src/models/gemma4.cpp, the
 * is_moe_layer branch): ctx->x (the residual after attention) and ctx->xn
 * (its ffn_norm) in, ctx->o out, before post_ffw_norm:
 *   post_ffw_norm_1(dense(ffn_norm(x)))
 *   + post_ffw_norm_2(experts(pre_ffw_norm_2(x), routed by
 *                     ffn_gate_inp (rmsnorm(x) / sqrt(n_embd) * ffn_gate_inp.scale)))
 * with the experts' GELU-tanh gate, softmax top-K routing and normalized
 * weights as qwen3moe (llama.cpp passes norm_w true, scale 1). */
static int g4_moe_ffn(tn_ctx *ctx, const tn_layer *L, const ubatch *ub, int32_t n,
                      tn_error *err) {
    const tn_model *m = ctx->model;
    const tn_hparams *hp = &m->hp;
    const int32_t E = hp->n_embd;
    int rc = dense_ffn(ctx, L, ub, n, err);
    if (rc != TN_OK)
        return rc;
    const float inv_sqrt_e = 1.0f / sqrtf((float)E);
    for (int32_t i = 0; i < n; i++) {
        const size_t r = (size_t)i * E;
        const float *x = ctx->x + r;
        tn_rmsnorm(ctx->moe_dense + r, ctx->o + r, L->post_ffw_norm_1, E, hp->norm_eps);
        tn_rmsnorm(ctx->xn + r, x, L->pre_ffw_norm_2, E, hp->norm_eps);
        float *ri = ctx->moe_in + r;
        tn_rmsnorm(ri, x, m->ones, E, hp->norm_eps);
        for (int32_t e = 0; e < E; e++)
            ri[e] = ri[e] * inv_sqrt_e * L->router_s[e];
    }
    if ((rc = moe_ffn(ctx, L, ub, n, ctx->moe_in, err)))
        return rc;
    for (int32_t i = 0; i < n; i++) {
        float *o = ctx->o + (size_t)i * E;
        const float *d = ctx->moe_dense + (size_t)i * E;
        tn_rmsnorm(o, o, L->post_ffw_norm_2, E, hp->norm_eps);
        for (int32_t e = 0; e < E; e++)
            o[e] = d[e] + o[e];
    }
    return TN_OK;
}

/* Runs rows [row0, row0 + n) of a decode (n <= ctx->ub_rows) through every
 * layer; leaves the final residual stream in ctx->x. The input rows are the
 * embeddings of tokens, or (tokens NULL) the given embd rows [n][n_embd],
 * used as they are: image embeddings are already in the model's input space,
 * so Gemma's sqrt(n_embd) scale of token embeddings does not apply to them
 * (as in HF Gemma3 and llama.cpp). bidir: the rows attend to each other
 * both ways (one image span).
 *
 * Only the last out_rows rows' final states are wanted (logits): the last
 * layer's attention, output projection and feed-forward run for those rows
 * alone (its keys and values are still written for all, they come before
 * the attention), which saves 1/n_layer of a prefill. Their arithmetic is
 * that of a full pass (batch invariance), so the logits are the same bits.
 * *out_first: where the wanted rows start in ctx->x afterwards. */
static int forward_ubatch(tn_ctx *ctx, const int32_t *tokens, const float *embd, int32_t n,
                          int64_t pos0, int32_t row0, bool bidir, int32_t out_rows,
                          int32_t *out_first, tn_error *err) {
    const tn_model *m = ctx->model;
    const tn_hparams *hp = &m->hp;
    const int32_t E = hp->n_embd;
    int rc;

    /* The caller's rows are the last out_rows; keeping more is always right. */
    *out_first = n - out_rows;
    if (bidir || captures_last_layer(ctx))
        out_rows = n;
    for (int32_t i = 0; i < n; i++) {
        float *x = ctx->x + (size_t)i * E;
        if (!tokens) {
            memcpy(x, embd + (size_t)i * E, (size_t)E * sizeof(float));
            continue;
        }
        rc = m->backend.run.weight_row(&m->backend, &m->tok_embd, tokens[i], x);
        if (rc != TN_OK)
            return tn_fail(err, rc, "%s: cannot read embedding row %d", m->path, tokens[i]);
        if (hp->embd_scale != 1.0f)
            for (int32_t e = 0; e < E; e++)
                x[e] *= hp->embd_scale;
    }
    capture(ctx, 0, row0, n);
    if (hp->n_embd_per_layer > 0 && (rc = per_layer_inputs(ctx, tokens, n, err)))
        return rc;

    /* Gemma 4's rope_freqs are the full-attention layers' alone (its
     * proportional rope); Llama's apply everywhere (it has no sliding layers). */
    const float *freqs_swa = hp->arch == TN_ARCH_GEMMA4 ? NULL : m->rope_freqs;
    const size_t R = (size_t)hp->max_rot, half_table = (size_t)ctx->ub_rows * R;
    for (int32_t i = 0; i < n; i++) {
        rope_angles(ctx->rope_cs + (size_t)i * R, pos0 + i, hp->n_rot, hp->rope_base,
                    hp->rope_scale, m->rope_freqs, hp);
        if (hp->sliding_window > 0)
            rope_angles(ctx->rope_cs + half_table + (size_t)i * R, pos0 + i, hp->n_rot_swa,
                        hp->rope_base_swa, hp->rope_scale_swa, freqs_swa, hp);
    }
    int32_t ple_skip = 0; /* rows dropped before the last layer (per-layer inputs) */

    for (int32_t il = 0; il < hp->n_layer; il++) {
        if (atomic_load(&ctx->cancel))
            return tn_fail(err, TN_ERR_CANCELLED, "cancelled");
        const tn_layer *L = &m->layers[il];
        /* Gemma 4 opens an image span on its sliding layers only; the
         * full-attention layers stay causal (llama.cpp's
         * LLAMA_NON_CAUSAL_TYPE_SWA_ONLY, HF use_bidirectional_attention
         * "vision"). */
        const bool open = bidir && (hp->arch != TN_ARCH_GEMMA4 || L->swa);
        ubatch ub = {.ctx = ctx, .layer = L, .il = il, .n = n, .pos0 = pos0,
                     .see_to = open ? pos0 + n : 0};

        for (int32_t i = 0; i < n; i++)
            tn_rmsnorm(ctx->xn + (size_t)i * E, ctx->x + (size_t)i * E, L->attn_norm, E,
                       hp->norm_eps);
        /* A shared-KV layer projects only queries; a Gemma 4 layer without
         * attn_v takes its values from the raw key projection. */
        tn_matmul_item qkv[3] = {{.w = &L->wq, .x = ctx->xn, .n = n, .y = ctx->q}};
        int n_qkv = 1;
        if (L->kv_layer == il) {
            qkv[n_qkv++] = (tn_matmul_item){.w = &L->wk, .x = ctx->xn, .n = n, .y = ctx->k};
            if (!L->v_is_k)
                qkv[n_qkv++] = (tn_matmul_item){.w = &L->wv, .x = ctx->xn, .n = n, .y = ctx->v};
        }
        if ((rc = matmul_group(ctx, qkv, n_qkv, err)))
            return rc;
        if (L->kv_layer == il && L->v_is_k)
            memcpy(ctx->v, ctx->k,
                   (size_t)n * (size_t)L->n_head_kv * (size_t)L->head_dim * sizeof(float));
        if (hp->oai)
            add_qkv_bias(ctx, L, il, n);
        parallel(ctx, task_qk, &ub);
        if (il == hp->n_layer - 1 && out_rows < n) {
            if (out_rows == 0)
                return TN_OK;
            const int32_t skip = n - out_rows;
            const size_t QD = (size_t)hp->n_head * (size_t)L->head_dim;
            ple_skip = skip;
            memmove(ctx->qb, ctx->qb + (size_t)skip * QD, (size_t)out_rows * QD * sizeof *ctx->qb);
            memmove(ctx->x, ctx->x + (size_t)skip * E, (size_t)out_rows * E * sizeof *ctx->x);
            n = out_rows;
            pos0 += skip;
            *out_first = 0;
            ub.n = n;
            ub.pos0 = pos0;
        }
        parallel(ctx, task_attention, &ub);
        if ((rc = matmul(ctx, &L->wo, ctx->att, n, ctx->o, err)))
            return rc;
        for (int32_t i = 0; i < n; i++) {
            float *o = ctx->o + (size_t)i * E, *x = ctx->x + (size_t)i * E;
            if (L->bo)
                for (int32_t e = 0; e < E; e++)
                    o[e] += L->bo[e];
            if (hp->post_norms)
                tn_rmsnorm(o, o, L->post_attn_norm, E, hp->norm_eps);
            for (int32_t e = 0; e < E; e++)
                x[e] += o[e];
            tn_rmsnorm(ctx->xn + (size_t)i * E, x, L->ffn_norm, E, hp->norm_eps);
        }
        if (hp->moe_dense)
            rc = g4_moe_ffn(ctx, L, &ub, n, err);
        else if (hp->n_expert > 0)
            rc = moe_ffn(ctx, L, &ub, n, ctx->xn, err);
        else
            rc = dense_ffn(ctx, L, &ub, n, err);
        if (rc != TN_OK)
            return rc;
        for (int32_t i = 0; i < n; i++) {
            float *o = ctx->o + (size_t)i * E, *x = ctx->x + (size_t)i * E;
            if (hp->post_norms)
                tn_rmsnorm(o, o, L->post_ffw_norm, E, hp->norm_eps);
            for (int32_t e = 0; e < E; e++)
                x[e] += o[e];
        }
        if (hp->n_embd_per_layer > 0 && (rc = per_layer_block(ctx, L, il, n, ple_skip, err)))
            return rc;
        if (L->out_scale != 1.0f)
            for (size_t e = 0; e < (size_t)n * (size_t)E; e++)
                ctx->x[e] *= L->out_scale;
        capture(ctx, il + 1, row0, n);
    }
    return TN_OK;
}

/* Logits of rows [first, first + n) of ctx->x into out[n][n_vocab]. */
typedef struct {
    float *v;
    int64_t n;
    float cap;
} softcap_job;

/* v = cap * tanh(v / cap), element-wise (tn_softcap): contiguous chunks
 * per thread. */
static void task_softcap(void *p, int ith, int nth) {
    const softcap_job *job = p;
    const int64_t chunk = (job->n + nth - 1) / nth;
    const int64_t lo = chunk * ith, hi = lo + chunk < job->n ? lo + chunk : job->n;
    if (hi > lo)
        tn_softcap(job->v + lo, hi - lo, job->cap);
}

static int output_rows(tn_ctx *ctx, int32_t first, int32_t n, float *out, tn_error *err) {
    const tn_model *m = ctx->model;
    const tn_hparams *hp = &m->hp;
    const int32_t E = hp->n_embd;
    for (int32_t i = 0; i < n; i++)
        tn_rmsnorm(ctx->xn + (size_t)i * E, ctx->x + (size_t)(first + i) * E, m->output_norm, E,
                   hp->norm_eps);
    int rc = matmul(ctx, &m->output, ctx->xn, n, out, err);
    if (rc != TN_OK)
        return rc;
    if (hp->final_softcap > 0) {
        /* On every thread: 262,144 tanh a token for Gemma's vocabulary
         * (libm's tanhf were 2-3 % of a decode step on one thread while
         * the others waited). Element-wise, one arithmetic in every lane
         * (tn_softcap): the same bits however it is split. */
        softcap_job job = {.v = out, .n = (int64_t)n * hp->n_vocab, .cap = hp->final_softcap};
        parallel(ctx, task_softcap, &job);
    }
    /* An embedding padded past the tokenizer's last token (the loader
     * allows it): those rows are no token, and a sampled one ended the
     * answer half way ("token id 121 is outside the vocabulary"). Masked
     * here, where every reader of logits (sampler, speculation, logprobs,
     * perplexity) takes them from. */
    const int32_t live = m->tokenizer ? tn_tokenizer_n_vocab(m->tokenizer) : hp->n_vocab;
    for (int32_t i = 0; live < hp->n_vocab && i < n; i++)
        for (int32_t t = live; t < hp->n_vocab; t++)
            out[(size_t)i * hp->n_vocab + t] = -INFINITY;
    return TN_OK;
}

/* Grows the per-pass scratch to `rows` rows (an image span that must run as
 * one pass). The contents need not survive: every pass rewrites them. */
static int grow_scratch(tn_ctx *ctx, int32_t rows, tn_error *err) {
    if (rows <= ctx->ub_rows)
        return TN_OK;
    const tn_hparams *hp = &ctx->model->hp;
    const size_t U = (size_t)rows, E = (size_t)hp->n_embd;
    const size_t QD = (size_t)hp->n_head * (size_t)hp->max_head_dim;
    const size_t KD = (size_t)hp->max_kv_dim;
    const size_t LP = (size_t)hp->n_layer * (size_t)hp->n_embd_per_layer;
    const size_t P = (size_t)hp->n_embd_per_layer;
    float **bufs[] = {&ctx->x, &ctx->xn, &ctx->q, &ctx->k, &ctx->v, &ctx->att, &ctx->o,
                      &ctx->gate, &ctx->up, &ctx->rope_cs, &ctx->ple, &ctx->plg};
    const size_t sizes[] = {U * E, U * E, U * QD, U * KD, U * KD, U * QD, U * E,
                            ff_floats(hp, U), ff_floats(hp, U), 2 * U * (size_t)hp->max_rot,
                            U * LP, U * P};
    for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; b++) {
        float *p = calloc(sizes[b] ? sizes[b] : 1, sizeof(float));
        if (!p)
            return tn_fail(err, TN_ERR_NOMEM, "out of memory for a %d-row image span", rows);
        free(*bufs[b]);
        *bufs[b] = p;
    }
    if (LP == 0) { /* no per-layer inputs: those two stay unallocated */
        free(ctx->ple);
        free(ctx->plg);
        ctx->ple = ctx->plg = NULL;
    }
    uint16_t *qb = calloc(U * QD, sizeof *qb);
    if (!qb)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for a %d-row image span", rows);
    free(ctx->qb);
    ctx->qb = qb;
    if (!moe_scratch(ctx, rows))
        return tn_fail(err, TN_ERR_NOMEM, "out of memory for a %d-row image span", rows);
    ctx->ub_rows = rows;
    return TN_OK;
}

/* The checks and the micro-batch loop shared by token and embedding input.
 * span: rows per pass (TN_UBATCH, or all n for a bidirectional span). */
static int decode_rows_run(tn_ctx *ctx, const int32_t *tokens, const float *embd, int32_t n,
                           bool bidir, tn_logits_mode mode, float *logits, tn_error *err) {
    const tn_hparams *hp = &ctx->model->hp;
    if (n > ctx->n_ctx - ctx->kv_len)
        return tn_fail(err, TN_ERR_OVERFLOW,
                       "%d tokens do not fit in the context: %d of %d are used, %d are free", n,
                       ctx->kv_len, ctx->n_ctx, ctx->n_ctx - ctx->kv_len);
    if (atomic_load(&ctx->cancel))
        return tn_fail(err, TN_ERR_CANCELLED, "cancelled");
    const int32_t span = bidir ? n : TN_UBATCH;
    int rc = grow_scratch(ctx, span, err);
    if (rc != TN_OK)
        return rc;

    if (ctx->n_cap > 0) {
        if (n > ctx->cap_alloc) {
            float *cap = realloc(ctx->cap, (size_t)n * (size_t)ctx->n_cap * (size_t)hp->n_embd *
                                               sizeof(float));
            if (!cap)
                return tn_fail(err, TN_ERR_NOMEM, "out of memory for hidden states");
            ctx->cap = cap;
            ctx->cap_alloc = n;
        }
        ctx->cap_rows = 0;
    }

    const int64_t pos0 = ctx->kv_len;
    for (int32_t r0 = 0; r0 < n; r0 += span) {
        const int32_t u = n - r0 < span ? n - r0 : span;
        const bool last = r0 + u == n;
        const int32_t out_rows =
            mode == TN_LOGITS_ALL ? u : mode == TN_LOGITS_LAST && last ? 1 : 0;
        int32_t first = 0;
        rc = forward_ubatch(ctx, tokens ? tokens + r0 : NULL,
                            tokens ? NULL : embd + (size_t)r0 * (size_t)hp->n_embd, u, pos0 + r0,
                            r0, bidir, out_rows, &first, err);
        if (rc == TN_OK && mode == TN_LOGITS_ALL)
            rc = output_rows(ctx, first, u, logits + (size_t)r0 * (size_t)hp->n_vocab, err);
        if (rc == TN_OK && mode == TN_LOGITS_LAST && last)
            rc = output_rows(ctx, first + out_rows - 1, 1, logits, err);
        if (rc != TN_OK)
            return rc;
    }
    ctx->kv_len += n;
    if (ctx->n_cap > 0)
        ctx->cap_rows = n;
    return TN_OK;
}

/* ------------------------------------------ a model file cut short under a step
 *
 * The weights are read from the mapped model file (and the repack cache's
 * file) by the kernels, on the calling thread and on the pool's workers. A
 * file truncated or rewritten in place under a generating session makes
 * such a read a SIGBUS, which would end the process. Instead every slot of
 * every pool task runs under tn_guarded_task on whichever thread claims it
 * (tn_cpu_set_task_wrap): a fault ends that slot, is recorded in the
 * step's flag, and the slot counts as done, so the barrier completes as
 * ever and no thread is left waiting. The serial reads between the
 * parallel regions (an embedding row, Gemma 4's per-layer row) are covered
 * by one guard around the whole step on the calling thread, the outer
 * guard of the caller's own slots. The step then returns TN_ERR_IO, and
 * the model remembers it: its weights are gone, so every later step of any
 * of its contexts fails at once with the same error. A slot cut short and
 * a step abandoned own nothing that is lost: the scratch they write is
 * the context's, allocated before; no kernel takes a lock. Cost: one
 * sigsetjmp without the signal mask (no system call) per slot and per
 * step. */
typedef struct step_guard {
    const tn_read_span *spans;
    int n_spans;
    atomic_int hit; /* the first span a slot faulted in, or -1 */
} step_guard;

static void guarded_slot(void *arg, tn_task_fn fn, void *ctx, int ith, int nth) {
    step_guard *sg = arg;
    const int hit = tn_guarded_task(sg->spans, sg->n_spans, fn, ctx, ith, nth);
    if (hit >= 0) {
        int none = -1;
        atomic_compare_exchange_strong(&sg->hit, &none, hit);
    }
}

int tn_guarded_step(tn_cpu *cpu, const tn_read_span *spans, int n_spans,
                    void (*fn)(void *arg, int ith, int nth), void *arg) {
    step_guard sg = {.spans = spans, .n_spans = n_spans};
    atomic_init(&sg.hit, -1);
    if (cpu)
        tn_cpu_set_task_wrap(cpu, guarded_slot, &sg);
    int hit = tn_guarded_task(spans, n_spans, fn, arg, 0, 1);
    if (cpu)
        tn_cpu_set_task_wrap(cpu, NULL, NULL);
    return hit >= 0 ? hit : atomic_load(&sg.hit);
}

typedef struct step_call {
    tn_ctx *ctx;
    const int32_t *tokens;
    const float *embd;
    int32_t n;
    bool bidir;
    tn_logits_mode mode;
    float *logits;
    tn_error *err;
    int rc;
} step_call;

static void step_run(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    step_call *c = arg;
    c->rc = decode_rows_run(c->ctx, c->tokens, c->embd, c->n, c->bidir, c->mode, c->logits,
                            c->err);
}

/* The flag is written by a step (below) through a model shared read-only
 * otherwise, allocated writable: the cast is sound. */
int tn_model_weights_check(const tn_model *m, tn_error *err) {
    const int broken = m ? atomic_load(&((tn_model *)m)->read_fault) : 0;
    if (broken > 0 && broken <= m->n_read_spans)
        return tn_fail_shrank(err, m->read_spans[broken - 1].path);
    return TN_OK;
}

static int decode_rows_guarded(tn_ctx *ctx, const int32_t *tokens, const float *embd, int32_t n,
                               bool bidir, tn_logits_mode mode, float *logits, tn_error *err) {
    /* The model is the context's owner's, shared read-only but for this
     * flag (allocated writable: the cast is sound). */
    tn_model *m = (tn_model *)ctx->model;
    const int gone = tn_model_weights_check(m, err);
    if (gone != TN_OK)
        return gone;
    step_call c = {.ctx = ctx, .tokens = tokens, .embd = embd, .n = n, .bidir = bidir,
                   .mode = mode, .logits = logits, .err = err, .rc = TN_OK};
    if (m->n_read_spans == 0) { /* an in-memory model cannot shrink */
        step_run(&c, 0, 1);
        return c.rc;
    }
    const int32_t kv_len = ctx->kv_len;
    const int hit = tn_guarded_step(ctx->cpu, m->read_spans, m->n_read_spans, step_run, &c);
    if (hit < 0)
        return c.rc;
    /* A slot that faulted does not stop the step, which may have run to
     * its end: none of its rows count (as for any failed step: the caller,
     * a session, keeps its mirror of the KV by the rows that succeeded). */
    ctx->kv_len = kv_len;
    ctx->cap_rows = 0;
    int none = 0;
    atomic_compare_exchange_strong(&m->read_fault, &none, hit + 1);
    return tn_fail_shrank(err, m->read_spans[hit].path);
}

/* decode_rows_run with this context's decode prefetch (decode-tune.c),
 * guarded against a model file cut short. */
static int decode_rows(tn_ctx *ctx, const int32_t *tokens, const float *embd, int32_t n,
                       bool bidir, tn_logits_mode mode, float *logits, tn_error *err) {
    /* only token decodes are samples: an image span is another kind of step */
    const double t0 = tn_decode_tune_begin(&ctx->decode_tune, tokens ? n : 0);
    const int rc = decode_rows_guarded(ctx, tokens, embd, n, bidir, mode, logits, err);
    tn_decode_tune_end(&ctx->decode_tune, t0, rc == TN_OK);
    return rc;
}

void tn_ctx_decode_tuning(const tn_ctx *ctx, tn_decode_tuning *out) {
    tn_decode_tune_report(&ctx->decode_tune, out);
}

static int check_decode_args(tn_ctx *ctx, const void *in, int32_t n, tn_logits_mode mode,
                             const float *logits, tn_error *err) {
    if (!ctx || n < 0 || (n > 0 && !in) || mode < TN_LOGITS_NONE || mode > TN_LOGITS_ALL)
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_decode: bad arguments");
    if (mode != TN_LOGITS_NONE && !logits)
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_decode: logits requested into NULL");
    if (n == 0 && mode != TN_LOGITS_NONE)
        return tn_fail(err, TN_ERR_INVALID, "tn_ctx_decode: logits of zero tokens");
    return TN_OK;
}

int tn_ctx_decode(tn_ctx *ctx, const int32_t *tokens, int32_t n, tn_logits_mode mode,
                  float *logits, tn_error *err) {
    int rc = check_decode_args(ctx, tokens, n, mode, logits, err);
    if (rc != TN_OK || n == 0)
        return rc;
    const tn_hparams *hp = &ctx->model->hp;
    if (n > ctx->n_ctx - ctx->kv_len) /* before reading n tokens (decode_rows says why) */
        return decode_rows(ctx, tokens, NULL, n, false, mode, logits, err);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return tn_fail(err, TN_ERR_INVALID, "token %d is outside the vocabulary (0..%d)",
                           tokens[i], hp->n_vocab - 1);
    return decode_rows(ctx, tokens, NULL, n, false, mode, logits, err);
}

int tn_ctx_decode_embd(tn_ctx *ctx, const float *embd, int32_t n, bool bidirectional,
                       tn_logits_mode mode, float *logits, tn_error *err) {
    int rc = check_decode_args(ctx, embd, n, mode, logits, err);
    if (rc != TN_OK || n == 0)
        return rc;
    return decode_rows(ctx, NULL, embd, n, bidirectional, mode, logits, err);
}
