/* The compute-backend seam (engine/tn-backend.h, docs/BACKENDS.md):
 * selection by name, garbage names, a backend that refuses (the model runs
 * on the CPU and keeps the reason), a backend that computes but names no
 * arithmetic, a backend with some operations only (the CPU's fill the
 * gaps), and a forward pass that really goes through the table. */
#include "tn-internal.h"
#include "tn-model.h"
#include "tn-test.h"

#include <string.h>

/* ------------------------------------------------------ fake backends */

static int refuse_open(tn_backend *be, tn_error *err) {
    (void)be;
    return tn_fail(err, TN_ERR_UNSUPPORTED, "no device at %s", "/dev/nothing");
}
static const tn_backend_ops refusing = {.name = "refusing", .open = refuse_open};

static int nameless_calls;
static int nameless_matmul(const tn_backend *be, tn_cpu *pool, const tn_weight *w,
                           const float *x, int64_t n, float *y) {
    (void)be;
    nameless_calls++;
    return tn_matmul(pool, w, x, n, y);
}
static const tn_backend_ops nameless = {.name = "nameless", .matmul = nameless_matmul};

static int half_opened, half_closed;
static int half_open(tn_backend *be, tn_error *err) {
    (void)err;
    half_opened++;
    be->state = &half_opened;
    return TN_OK;
}
static void half_close(tn_backend *be) {
    half_closed += be->state == &half_opened;
}
static void half_arith(const tn_backend *be, char *buf, size_t size) {
    (void)be;
    snprintf(buf, size, "half/test");
}
static const tn_backend_ops half = {.name = "half",
                                    .open = half_open,
                                    .close = half_close,
                                    .arith_name = half_arith,
                                    .matmul = nameless_matmul};

/* ------------------------------------------------------------- checks */

static void selection(void) {
    CHECK(tn_backend_count() >= 1);
    CHECK(tn_backend_name(0) && !strcmp(tn_backend_name(0), "cpu"));
    CHECK(tn_backend_name(-1) == NULL && tn_backend_name(tn_backend_count()) == NULL);
    CHECK(tn_cpu_kernels() && *tn_cpu_kernels());

    const tn_backend_ops *table[] = {&tn_backend_cpu_ops, &refusing, &nameless, &half};
    tn_backend be;
    tn_error err = {0};

    /* Refused when asked for by name: the CPU, and the reason kept whole. */
    CHECK(tn_backend_open_from(&be, "refusing", table, 4, &err) == TN_OK);
    CHECK(!strcmp(be.run.name, "cpu") && be.run.matmul == tn_backend_cpu_ops.matmul &&
          be.run.matmul_group == tn_backend_cpu_ops.matmul_group);
    CHECK(be.refused_asked);
    CHECKF(!strcmp(be.refused_by, "refusing") && be.refusal.code == TN_ERR_UNSUPPORTED &&
               !strcmp(be.refusal.message, "no device at /dev/nothing"),
           "%s: %s", be.refused_by, be.refusal.message);
    tn_backend_close(&be);

    /* Computes without naming its arithmetic: refused before it opens. */
    CHECK(tn_backend_open_from(&be, "nameless", table, 4, &err) == TN_OK);
    CHECK(!strcmp(be.run.name, "cpu"));
    CHECKF(strstr(be.refusal.message, "does not name its arithmetic") != NULL, "%s",
           be.refusal.message);
    tn_backend_close(&be);

    /* "auto": the first that opens, the first refusal kept. */
    half_opened = half_closed = 0;
    CHECK(tn_backend_open_from(&be, "auto", table, 4, &err) == TN_OK);
    CHECK(!strcmp(be.run.name, "half") && half_opened == 1);
    CHECK(!strcmp(be.refused_by, "refusing") && !be.refused_asked);
    /* Its one operation is its own; every other is the CPU's. */
    CHECK(be.run.matmul == nameless_matmul && be.run.arith_name == half_arith);
    CHECK(be.run.attention == tn_backend_cpu_ops.attention &&
          be.run.kv_store == tn_backend_cpu_ops.kv_store &&
          be.run.kv_copy == tn_backend_cpu_ops.kv_copy &&
          be.run.parallel_for == tn_backend_cpu_ops.parallel_for &&
          be.run.weight_row == tn_backend_cpu_ops.weight_row &&
          be.run.prepare_weights == tn_backend_cpu_ops.prepare_weights);
    /* A group of products runs through its own matmul, never the CPU's
     * group (which would run the CPU's kernels on the backend's layout). */
    CHECK(be.run.matmul_group && be.run.matmul_group != tn_backend_cpu_ops.matmul_group);
    {
        float wd[6] = {1, 2, 3, 4, 5, 6}, x[3] = {1, -1, 2}, y[4] = {0};
        tn_weight w = {.type = TN_TYPE_F32, .rows = 2, .cols = 3, .row_bytes = 12, .data = wd};
        tn_matmul_item items[2] = {{.w = &w, .x = x, .n = 1, .y = y},
                                   {.w = &w, .x = x, .n = 1, .y = y + 2}};
        nameless_calls = 0;
        CHECK(be.run.matmul_group(&be, NULL, items, 2) == TN_OK);
        CHECKF(nameless_calls == 2 && y[0] == 5 && y[1] == 11 && y[2] == 5 && y[3] == 11,
               "%d calls, %g %g %g %g", nameless_calls, y[0], y[1], y[2], y[3]);
    }
    tn_backend_close(&be);
    CHECK(half_closed == 1);

    /* NULL, "" and the CPU by name: the CPU, nothing refused. */
    const char *cpu_names[] = {NULL, "", "cpu"};
    for (int i = 0; i < 3; i++) {
        CHECK(tn_backend_open_from(&be, cpu_names[i], table, 1, &err) == TN_OK);
        CHECK(!strcmp(be.run.name, "cpu") && be.refused_by[0] == 0);
        tn_backend_close(&be);
    }

    /* Garbage: no such backend, the message lists the names. */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    const char *bad[] = {"CPU", "xrt ", "auto,cpu", "\xff\xfe\x01", big, "cpu\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tn_error e = {0};
        CHECK(tn_backend_open_from(&be, bad[i], table, 4, &e) == TN_ERR_INVALID);
        CHECKF(strstr(e.message, "known: auto, cpu, refusing, nameless, half") != NULL, "%s",
               e.message);
        for (const char *c = e.message; *c; c++)
            CHECKF(*c >= 0x20 && *c < 0x7f, "byte 0x%02x in: %s", (unsigned char)*c, e.message);
        tn_backend_close(&be);
    }
}

static int counted_calls;
static int counted_matmul(const tn_backend *be, tn_cpu *pool, const tn_weight *w,
                          const float *x, int64_t n, float *y) {
    counted_calls++;
    return tn_backend_cpu_ops.matmul(be, pool, w, x, n, y);
}
/* Groups counted, their products through counted_matmul. */
static int counted_groups;
static int counted_group(const tn_backend *be, tn_cpu *pool, const tn_matmul_item *items,
                         int n) {
    counted_groups++;
    for (int i = 0; i < n; i++) {
        int rc = be->run.matmul(be, pool, items[i].w, items[i].x, items[i].n, items[i].y);
        if (rc != TN_OK)
            return rc;
    }
    return TN_OK;
}

static void model_level(void) {
    tn_mkmodel_params p = tn_test_tiny_model("qwen3", 3);
    char path[4096];
    snprintf(path, sizeof path, "%s/backend.gguf", tn_test_tmpdir());
    tn_error err = {0};
    CHECKF(tn_mkmodel(&p, path, &err) == TN_OK, "%s", err.message);

    /* Unknown names fail the load, with nothing left behind. */
    tn_model_params mp = tn_model_default_params();
    CHECK(mp.backend == NULL);
    tn_model *m = (tn_model *)&err;
    mp.backend = "no-such-backend";
    CHECK(tn_model_load(path, mp, &m, &err) == TN_ERR_INVALID && m == NULL);
    CHECKF(strstr(err.message, "unknown compute backend 'no-such-backend'") != NULL, "%s",
           err.message);

    /* NULL: TERN_BACKEND chooses. */
    setenv("TERN_BACKEND", "bogus", 1);
    CHECK(tn_model_load(path, tn_model_default_params(), &m, &err) == TN_ERR_INVALID && !m);
    CHECKF(strstr(err.message, "'bogus'") != NULL, "%s", err.message);
    setenv("TERN_BACKEND", "cpu", 1);
    CHECK(tn_model_load(path, tn_model_default_params(), &m, &err) == TN_OK && m);
    tn_model_free(m);
    unsetenv("TERN_BACKEND");

    mp.backend = "cpu";
    CHECKF(tn_model_load(path, mp, &m, &err) == TN_OK, "%s", err.message);
    if (!m)
        return;
    const char *who = "unset";
    CHECK(!strcmp(tn_model_backend(m), "cpu"));
    bool asked = true;
    CHECK(tn_model_backend_refusal(m, &who, &asked) == NULL && who == NULL && !asked);
    CHECK(strstr(tn_model_arithmetic(m), tn_cpu_kernels()) == tn_model_arithmetic(m));

    /* The same logits by name and by "auto", and through a wrapped table:
     * the forward pass calls the backend's matmul for every product. */
    tn_model *a = NULL;
    mp.backend = "auto";
    CHECK(tn_model_load(path, mp, &a, &err) == TN_OK);
    const int32_t V = tn_model_n_vocab(m);
    float *l1 = malloc(sizeof(float) * (size_t)V), *l2 = malloc(sizeof(float) * (size_t)V);
    int32_t toks[5] = {1, 7, 3, 9, 4};
    tn_ctx *c1 = NULL, *c2 = NULL;
    CHECK(a && l1 && l2);
    if (a && l1 && l2 && tn_ctx_new(m, 64, 2, &c1, &err) == TN_OK &&
        tn_ctx_new(a, 64, 1, &c2, &err) == TN_OK) {
        CHECK(!strcmp(tn_model_arithmetic(m), tn_model_arithmetic(a)));
        CHECK(tn_ctx_decode(c1, toks, 5, TN_LOGITS_LAST, l1, &err) == TN_OK);
        a->backend.run.matmul = counted_matmul;
        a->backend.run.matmul_group = counted_group;
        counted_calls = counted_groups = 0;
        CHECK(tn_ctx_decode(c2, toks, 5, TN_LOGITS_LAST, l2, &err) == TN_OK);
        /* Per layer: q, k, v, o, gate, up, down, with q/k/v and gate/up
         * each one group; then the LM head. */
        CHECKF(counted_calls == 2 * 7 + 1 && counted_groups == 2 * 2, "%d matmul calls, %d groups",
               counted_calls, counted_groups);
        CHECK(memcmp(l1, l2, sizeof(float) * (size_t)V) == 0);
    }
    tn_ctx_free(c1);
    tn_ctx_free(c2);
    free(l1);
    free(l2);
    tn_model_free(a);
    tn_model_free(m);
}

int main(void) {
    selection();
    model_level();
    return tn_test_finish("backend");
}
