/* Matrix-product kernels: every instruction-set family against a double
 * precision oracle and against the scalar reference, with an NMSE bound per
 * type; and batch invariance, bit for bit: output row i computed alone, in
 * batches of 2..16 at every position, and in a 512-row batch on 1, 2 and 3
 * threads. */
#include "tn-test.h"

#include "cpu/tn-cpu.h"
#include "tn-internal.h"
#include "tn-quant.h"

#include <float.h>
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

typedef struct {
    uint32_t type;
    /* NMSE bounds of tn_matmul against the exact product of the dequantized
     * weights with the f32 activations: the scalar path (f32 products and
     * sums only), and the SIMD paths, whose integer kernels first quantize
     * activations to 8 bits (about 1.5e-5 for uniform data) and whose
     * AVX-512 BF16 kernel rounds activations to bf16 (about 1e-5). */
    double nmse_scalar;
    double nmse_simd;
} type_case;

static const type_case cases[] = {
    {TN_TYPE_F32, 1e-10, 1e-10},  {TN_TYPE_F16, 1e-10, 1e-10},  {TN_TYPE_BF16, 1e-10, 1e-4},
    {TN_TYPE_Q8_0, 1e-10, 1e-4},  {TN_TYPE_Q4_0, 1e-10, 1e-4},  {TN_TYPE_Q4_1, 1e-10, 1e-4},
    {TN_TYPE_Q5_0, 1e-10, 1e-4},  {TN_TYPE_Q5_1, 1e-10, 1e-4},  {TN_TYPE_Q4_K, 1e-10, 1e-4},
    {TN_TYPE_Q5_K, 1e-10, 1e-4},  {TN_TYPE_Q6_K, 1e-10, 1e-4},
    {TN_TYPE_Q2_K, 1e-10, 1e-4},  {TN_TYPE_Q3_K, 1e-10, 1e-4},  {TN_TYPE_IQ4_NL, 1e-10, 1e-4},
    {TN_TYPE_IQ4_XS, 1e-10, 1e-4}, {TN_TYPE_MXFP4, 1e-10, 1e-4},
};

#define ROWS 37  /* odd: chunks and tiles end mid-way */
#define COLS 512 /* two K-quant super-blocks */
#define BIG 512  /* a prompt-sized batch */

static uint64_t rng = 0x5eed;

typedef struct {
    tn_weight w;
    void *data;
    float *deq; /* [ROWS, COLS] the weights as the kernels must see them */
} matrix;

/* The weights' values: random (real-looking), or a pattern that drives
 * every quant to one end of its range, where an integer kernel's partial
 * sums are largest (an int16 or int32 that overflows shows there). */
enum { W_RANDOM, W_ALL_MIN, W_ALL_MAX, W_SIGNS };
static int weight_pattern = W_RANDOM;

/* False (reported, nothing left allocated) when out of memory. */
static bool make_matrix(matrix *m, uint32_t type) {
    memset(m, 0, sizeof *m);
    size_t rb = tn_type_row_bytes(type, COLS);
    float *src = malloc(sizeof(float) * COLS);
    m->data = malloc(rb * ROWS);
    m->deq = malloc(sizeof(float) * ROWS * COLS);
    if (!src || !m->data || !m->deq) {
        CHECKF(0, "%s: out of memory for a test matrix", tn_type_name(type));
        free(src);
        free(m->data);
        free(m->deq);
        memset(m, 0, sizeof *m);
        return false;
    }
    for (int r = 0; r < ROWS; r++) {
        /* Per-row scale and an occasional outlier, like real weights. */
        float scale = 0.02f * (1.0f + (float)(r % 5));
        for (int k = 0; k < COLS; k++)
            src[k] = weight_pattern == W_RANDOM    ? scale * tn_test_randf(&rng)
                     : weight_pattern == W_ALL_MIN ? -scale
                     : weight_pattern == W_ALL_MAX ? scale
                                                   : (k / 16 + r) % 2 ? scale : -scale;
        if (weight_pattern == W_RANDOM)
            src[(r * 7) % COLS] *= 8.0f;
        CHECK(tn_quantize_row(type, src, (uint8_t *)m->data + (size_t)r * rb, COLS) == TN_OK);
        CHECK(tn_dequantize_row(type, (uint8_t *)m->data + (size_t)r * rb, m->deq + r * COLS,
                                COLS) == TN_OK);
    }
    free(src);
    m->w = (tn_weight){.type = type, .rows = ROWS, .cols = COLS, .data = m->data, .row_bytes = rb};
    return true;
}

static void free_matrix(matrix *m) {
    free(m->data);
    free(m->deq);
}

static double nmse(const float *y, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)y[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

static void oracle(const matrix *m, const float *x, int64_t n, double *ref) {
    for (int64_t b = 0; b < n; b++)
        for (int r = 0; r < ROWS; r++) {
            double s = 0;
            for (int k = 0; k < COLS; k++)
                s += (double)m->deq[r * COLS + k] * x[b * COLS + k];
            ref[b * ROWS + r] = s;
        }
}

static bool same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Accuracy and batch invariance of one weight matrix (in one layout) on
 * every kernel family this CPU has. scalar_big keeps the scalar result
 * across calls (the scalar path reads both layouts the same way). */
static void check_weight(const type_case *tc, const char *layout, const tn_weight *w,
                         const float *x, const double *ref, float *scalar_big, tn_cpu *pools[3]) {
    const char *tname = tn_type_name(tc->type);
    float *big = malloc(sizeof(float) * BIG * ROWS);
    float *big2 = malloc(sizeof(float) * BIG * ROWS);
    float *single = malloc(sizeof(float) * BIG * ROWS);
    float *batch = malloc(sizeof(float) * 16 * ROWS);
    if (!big || !big2 || !single || !batch) {
        CHECKF(0, "%s: out of memory", tname);
        goto out;
    }
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        if (!tn_isa_available((tn_isa)isa))
            continue;
        const char *iname = tn_isa_name((tn_isa)isa);
        for (int t = 0; t < 3; t++)
            CHECK(tn_cpu_set_isa(pools[t], (tn_isa)isa) == TN_OK);

        /* Accuracy of the whole 512-row batch. */
        CHECK(tn_matmul(pools[1], w, x, BIG, big) == TN_OK);
        double e = nmse(big, ref, (int64_t)BIG * ROWS);
        double bound = isa == TN_ISA_SCALAR ? tc->nmse_scalar : tc->nmse_simd;
        CHECKF(e <= bound, "%s/%s/%s: NMSE %.3g against the exact product exceeds %.3g", iname,
               tname, layout, e, bound);
        if (isa == TN_ISA_SCALAR) {
            if (!strcmp(layout, "rows"))
                memcpy(scalar_big, big, sizeof(float) * BIG * ROWS);
            else
                CHECKF(same_bits(big, scalar_big, (size_t)BIG * ROWS),
                       "scalar/%s: the %s layout changes the scalar result", tname, layout);
        } else {
            double es = 0, den = 0;
            for (int64_t i = 0; i < (int64_t)BIG * ROWS; i++) {
                double d = (double)big[i] - scalar_big[i];
                es += d * d;
                den += (double)scalar_big[i] * scalar_big[i];
            }
            es /= den;
            CHECKF(es <= tc->nmse_simd,
                   "%s/%s/%s: NMSE %.3g against the scalar path exceeds %.3g", iname, tname,
                   layout, es, tc->nmse_simd);
            if (getenv("TERN_TEST_VERBOSE"))
                fprintf(stderr, "%s/%s/%s: NMSE %.3g (exact), %.3g (scalar)\n", iname, tname,
                        layout, e, es);
        }

        /* Thread count: 1, 2, 3 threads give the same bits. */
        CHECK(tn_matmul(pools[0], w, x, BIG, big2) == TN_OK);
        CHECKF(same_bits(big, big2, (size_t)BIG * ROWS), "%s/%s/%s: 1 and 2 threads differ",
               iname, tname, layout);
        CHECK(tn_matmul(pools[2], w, x, BIG, big2) == TN_OK);
        CHECKF(same_bits(big, big2, (size_t)BIG * ROWS), "%s/%s/%s: 2 and 3 threads differ",
               iname, tname, layout);
        CHECK(tn_matmul_isa(NULL, (tn_isa)isa, w, x, BIG, big2) == TN_OK);
        CHECKF(same_bits(big, big2, (size_t)BIG * ROWS),
               "%s/%s/%s: no pool and 2 threads differ", iname, tname, layout);

        /* Every row alone (a decode step) equals its row of the 512 batch. */
        for (int b = 0; b < BIG; b++)
            CHECK(tn_matmul(pools[b % 3], w, x + (size_t)b * COLS, 1, single + b * ROWS) ==
                  TN_OK);
        CHECKF(same_bits(big, single, (size_t)BIG * ROWS),
               "%s/%s/%s: a row alone differs from the same row in a 512-row batch", iname,
               tname, layout);

        /* In every prefetch mode (a hint; TERN_DECODE_PREFETCH, a context's
         * measured choice), one to three rows and a 16-row batch give the
         * same bits. */
        uint8_t one_was[TN_TYPE_COUNT_], batch_was[TN_TYPE_COUNT_];
        tn_cpu_get_prefetch_modes(one_was, batch_was);
        bool prefetch_ok = true;
        int bad_mode = -1;
        for (int mode = 0; mode < TN_PREFETCH_MODES; mode++) {
            uint8_t all[TN_TYPE_COUNT_];
            memset(all, mode, sizeof all);
            tn_cpu_set_prefetch_modes(all, all);
            CHECK(tn_cpu_prefetch_mode(1, w->type) == (tn_prefetch_mode)mode &&
                  tn_cpu_prefetch_mode(16, w->type) == (tn_prefetch_mode)mode);
            bool ok = true;
            for (int nb = 1; nb <= 3; nb++) {
                CHECK(tn_matmul(pools[1], w, x + (size_t)nb * COLS, nb, batch) == TN_OK);
                ok &= same_bits(batch, single + (size_t)nb * ROWS, (size_t)nb * ROWS);
            }
            CHECK(tn_matmul(pools[1], w, x, 16, batch) == TN_OK);
            ok &= same_bits(batch, single, (size_t)16 * ROWS);
            if (!ok && bad_mode < 0)
                bad_mode = mode;
            prefetch_ok &= ok;
        }
        tn_cpu_set_prefetch_modes(one_was, batch_was);
        CHECKF(prefetch_ok, "%s/%s/%s: prefetch mode %d changes the result", iname, tname, layout,
               bad_mode);

        /* Batches of 2..16 (a verify step) starting anywhere: each row sits
         * at every position of some batch. */
        bool batches_ok = true;
        for (int nb = 2; nb <= 16; nb++)
            for (int start = 0; start < 40; start += 1 + nb / 3) {
                CHECK(tn_matmul(pools[(start + nb) % 3], w, x + (size_t)start * COLS, nb,
                                batch) == TN_OK);
                if (!same_bits(batch, single + (size_t)start * ROWS, (size_t)nb * ROWS)) {
                    if (batches_ok)
                        CHECKF(0, "%s/%s/%s: batch of %d at row %d differs from rows alone",
                               iname, tname, layout, nb, start);
                    batches_ok = false;
                }
            }
        CHECK(batches_ok);
    }
out:
    free(big);
    free(big2);
    free(single);
    free(batch);
}

static void test_type(const type_case *tc, const float *x, tn_cpu *pools[3]) {
    const char *tname = tn_type_name(tc->type);
    matrix m;
    if (!make_matrix(&m, tc->type))
        return;
    double *ref = malloc(sizeof(double) * BIG * ROWS);
    float *scalar_big = malloc(sizeof(float) * BIG * ROWS);
    if (!ref || !scalar_big) {
        CHECKF(0, "%s: out of memory", tname);
        goto out;
    }
    oracle(&m, x, BIG, ref);
    check_weight(tc, "rows", &m.w, x, ref, scalar_big, pools);

    /* The interleaved layout, where this CPU has kernels for it. */
    size_t size = tn_weight_repack_size(&m.w);
    if (size > 0) {
        void *buf = aligned_alloc(64, (size + 63) / 64 * 64);
        tn_weight rw;
        CHECK(buf != NULL);
        if (buf) {
            CHECK(tn_weight_repack(&m.w, buf, size - 1, &rw) == TN_ERR_INVALID);
            CHECK(tn_weight_repack(&m.w, buf, size, &rw) == TN_OK);
            CHECK(rw.layout == TN_LAYOUT_X16 && rw.data == buf);
            CHECK(tn_weight_repack(&rw, buf, size, &rw) == TN_ERR_UNSUPPORTED);
            float row[COLS];
            bool rows_ok = true;
            for (int r = 0; r < ROWS; r++) {
                CHECK(tn_weight_row_f32(&rw, r, row) == TN_OK);
                rows_ok = rows_ok && same_bits(row, m.deq + r * COLS, COLS);
            }
            CHECKF(rows_ok, "%s: rows read back from the interleaved layout differ", tname);
            check_weight(tc, "x16", &rw, x, ref, scalar_big, pools);
            free(buf);
        }
    }
out:
    free(ref);
    free(scalar_big);
    free_matrix(&m);
}

/* One weight matrix at the ends of its range (weight_pattern) against
 * activations x: every family, in both layouts, at each pass size a kernel
 * has (1, 2, 4, 8, 16 rows and a prompt's 512), within the type's bound of
 * the exact product: cheaper than test_type, which also checks batch
 * invariance on these. */
static void test_extremes(const type_case *tc, const float *x, tn_cpu *cpu) {
    const char *tname = tn_type_name(tc->type);
    matrix m;
    if (!make_matrix(&m, tc->type))
        return;
    double *ref = malloc(sizeof(double) * BIG * ROWS);
    float *y = malloc(sizeof(float) * BIG * ROWS);
    size_t size = tn_weight_repack_size(&m.w);
    void *buf = size ? aligned_alloc(64, (size + 63) / 64 * 64) : NULL;
    tn_weight ws[2] = {m.w};
    const int nw = buf && tn_weight_repack(&m.w, buf, size, &ws[1]) == TN_OK ? 2 : 1;
    if (!ref || !y) {
        CHECKF(0, "%s: out of memory", tname);
        goto out;
    }
    oracle(&m, x, BIG, ref);
    static const int ns[] = {1, 2, 4, 8, 16, BIG};
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        if (!tn_isa_available((tn_isa)isa))
            continue;
        for (int l = 0; l < nw; l++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                CHECK(tn_matmul_isa(cpu, (tn_isa)isa, &ws[l], x, ns[k], y) == TN_OK);
                const double e = nmse(y, ref, (int64_t)ns[k] * ROWS);
                const double bound = isa == TN_ISA_SCALAR ? tc->nmse_scalar : tc->nmse_simd;
                CHECKF(e <= bound, "%s/%s/%s, weights pattern %d, %d rows: NMSE %.3g exceeds %.3g",
                       tn_isa_name((tn_isa)isa), tname, l ? "x16" : "rows", weight_pattern,
                       ns[k], e, bound);
            }
    }
out:
    free(ref);
    free(y);
    free(buf);
    free_matrix(&m);
}

/* tn_matmul_group: every item's result bit for bit as its own tn_matmul,
 * in every family and pool, over more items than one section takes, with
 * items that share an input (one conversion), items of no rows, and types
 * of different activation formats side by side. */
static void test_group(const float *x, tn_cpu *pools[3]) {
    enum { N_ITEMS = 70 };
    const uint32_t types[] = {TN_TYPE_Q4_0, TN_TYPE_Q4_K, TN_TYPE_Q6_K, TN_TYPE_F16,
                              TN_TYPE_Q8_0, TN_TYPE_Q5_0};
    enum { N_TYPES = sizeof types / sizeof types[0] };
    matrix ms[N_TYPES];
    tn_weight ws[2 * N_TYPES]; /* rows, then X16 where the type has it */
    void *bufs[N_TYPES] = {0};
    int nw = 0;
    for (int t = 0; t < N_TYPES; t++) {
        if (!make_matrix(&ms[t], types[t])) {
            for (int u = 0; u < t; u++)
                free_matrix(&ms[u]);
            return;
        }
        ws[nw++] = ms[t].w;
        size_t size = tn_weight_repack_size(&ms[t].w);
        if (size > 0 && (bufs[t] = aligned_alloc(64, (size + 63) / 64 * 64)) &&
            tn_weight_repack(&ms[t].w, bufs[t], size, &ws[nw]) == TN_OK)
            nw++;
    }
    CHECK(nw > N_TYPES);
    tn_matmul_item items[N_ITEMS];
    float *ys = calloc((size_t)N_ITEMS * 17 * ROWS, sizeof(float));
    float *want = calloc((size_t)N_ITEMS * 17 * ROWS, sizeof(float));
    CHECK(ys && want);
    uint64_t r = 0x9e37;
    for (int i = 0; i < N_ITEMS && ys; i++) {
        static const int64_t ns[] = {1, 1, 5, 17, 0, 2};
        items[i] = (tn_matmul_item){.w = &ws[tn_splitmix64(&r) % (uint64_t)nw],
                                    .x = x + (size_t)i * COLS,
                                    .n = ns[tn_splitmix64(&r) % 6],
                                    .y = ys + (size_t)i * 17 * ROWS};
        const uint64_t how = i > 0 ? tn_splitmix64(&r) % 3 : 0;
        if (how == 1) { /* a run on one input, as q/k/v or a decode step's experts */
            items[i].x = items[i - 1].x;
            items[i].n = items[i - 1].n;
        } else if (how == 2) { /* the same shape on another input: its own conversion */
            items[i].w = items[i - 1].w;
            items[i].n = items[i - 1].n;
        }
        if (items[i].n == 0)
            items[i].x = NULL;
    }
    for (tn_isa isa = TN_ISA_SCALAR; isa < TN_ISA_COUNT_ && ys && want; isa++) {
        if (!tn_isa_available(isa))
            continue;
        for (int i = 0; i < N_ITEMS; i++)
            if (items[i].n)
                CHECK(tn_matmul_isa(pools[1], isa, items[i].w, items[i].x, items[i].n,
                                    want + (size_t)i * 17 * ROWS) == TN_OK);
        for (int p = 0; p < 3; p++) {
            memset(ys, 0xff, sizeof(float) * N_ITEMS * 17 * ROWS);
            CHECK(tn_matmul_group_isa(pools[p], isa, items, N_ITEMS) == TN_OK);
            int bad = -1;
            for (int i = 0; i < N_ITEMS && bad < 0; i++)
                if (items[i].n && !same_bits(ys + (size_t)i * 17 * ROWS,
                                             want + (size_t)i * 17 * ROWS,
                                             (size_t)items[i].n * ROWS))
                    bad = i;
            CHECKF(bad < 0, "group (%s, %d threads): item %d (%s) differs from its own product",
                   tn_isa_name(isa), tn_cpu_threads(pools[p]), bad,
                   bad >= 0 ? tn_type_name(items[bad].w->type) : "");
        }
    }
    /* Garbage: a bad item anywhere refuses the group before any product. */
    CHECK(tn_matmul_group(pools[1], NULL, 2) == TN_ERR_INVALID);
    CHECK(tn_matmul_group(pools[1], items, -1) == TN_ERR_INVALID);
    CHECK(tn_matmul_group(pools[1], items, 0) == TN_OK);
    if (ys) {
        tn_matmul_item bad[3] = {items[0], items[1], items[2]};
        bad[0].n = bad[1].n = bad[2].n = 1;
        bad[0].x = bad[1].x = bad[2].x = x;
        bad[2].x = NULL;
        ys[0] = 12345.0f;
        CHECK(tn_matmul_group(pools[1], bad, 3) == TN_ERR_INVALID && ys[0] == 12345.0f);
        bad[2] = bad[1];
        tn_weight wrong = *bad[1].w;
        wrong.cols = COLS - 1;
        bad[2].w = &wrong;
        CHECK(tn_matmul_group(pools[1], bad, 3) != TN_OK && ys[0] == 12345.0f);
    }
    free(ys);
    free(want);
    for (int t = 0; t < N_TYPES; t++) {
        free(bufs[t]);
        free_matrix(&ms[t]);
    }
}

/* Decode groups (every item one activation row), which the pool reads as
 * two streams per thread (tile_pair): each item's row bit for bit as the
 * first row of its own two-row product, for every type with an interleaved
 * layout, with shapes whose chunks hold different numbers of 16-row groups
 * (a pair's longer side finishes alone), different widths side by side (no
 * pair), and types mixed. */
static void test_pairs(tn_cpu *pools[3]) {
    static const struct { int rows, cols; } shapes[] = {{37, 512}, {700, 512}, {2100, 256},
                                                        {90, 1024}, {16, 512}};
    enum { N_SHAPES = sizeof shapes / sizeof shapes[0], N_ITEMS = 9, MAXC = 1024 };
    static const uint32_t types[] = {TN_TYPE_Q4_0, TN_TYPE_Q8_0, TN_TYPE_IQ4_NL, TN_TYPE_Q4_1,
                                     TN_TYPE_Q5_0, TN_TYPE_Q5_1, TN_TYPE_Q4_K, TN_TYPE_Q5_K,
                                     TN_TYPE_Q6_K, TN_TYPE_Q2_K, TN_TYPE_Q3_K, TN_TYPE_IQ4_XS,
                                     TN_TYPE_MXFP4};
    enum { N_TYPES = sizeof types / sizeof types[0] };
    /* items: shape index per item (3 and 0 differ in width from 1) */
    static const int item_shape[N_ITEMS] = {0, 1, 1, 2, 3, 1, 4, 0, 2};
    tn_weight ws[N_TYPES][N_SHAPES];
    void *raw[N_TYPES][N_SHAPES] = {{0}}, *packed[N_TYPES][N_SHAPES] = {{0}};
    bool have[N_TYPES] = {0};
    float *src = malloc(sizeof(float) * MAXC), *x = malloc(sizeof(float) * 2 * N_ITEMS * MAXC);
    float *ys = malloc(sizeof(float) * N_ITEMS * 2100), *want = malloc(sizeof(float) * 2 * 2100);
    CHECK(src && x && ys && want);
    if (!src || !x || !ys || !want)
        goto out;
    for (int i = 0; i < N_ITEMS * MAXC; i++)
        x[i] = tn_test_randf(&rng);
    for (int t = 0; t < N_TYPES; t++) {
        have[t] = true;
        for (int s = 0; s < N_SHAPES && have[t]; s++) {
            const int rows = shapes[s].rows, cols = shapes[s].cols;
            const size_t rb = tn_type_row_bytes(types[t], (uint64_t)cols);
            uint8_t *d = raw[t][s] = malloc(rb * (size_t)rows);
            CHECK(d != NULL);
            if (!d) {
                have[t] = false;
                break;
            }
            for (int r = 0; r < rows; r++) {
                for (int k = 0; k < cols; k++)
                    src[k] = 0.05f * tn_test_randf(&rng);
                CHECK(tn_quantize_row(types[t], src, d + (size_t)r * rb, cols) == TN_OK);
            }
            tn_weight w = {.type = types[t], .rows = rows, .cols = cols, .data = d, .row_bytes = rb};
            const size_t size = tn_weight_repack_size(&w);
            have[t] = size > 0 && (packed[t][s] = aligned_alloc(64, (size + 63) / 64 * 64)) &&
                      tn_weight_repack(&w, packed[t][s], size, &ws[t][s]) == TN_OK;
        }
    }
    for (int mixed = 0; mixed < 2; mixed++)
        for (int t = 0; t < N_TYPES; t++) {
            if (!have[t])
                continue;
            tn_matmul_item items[N_ITEMS];
            for (int i = 0; i < N_ITEMS; i++) {
                /* mixed: every other item of the next type that has the layout */
                int u = t;
                if (mixed && i % 2)
                    for (int v = 1; v < N_TYPES; v++)
                        if (have[(t + v) % N_TYPES]) {
                            u = (t + v) % N_TYPES;
                            break;
                        }
                items[i] = (tn_matmul_item){.w = &ws[u][item_shape[i]],
                                            .x = x + (size_t)(i == 2 ? 1 : i) * MAXC, /* 1, 2 share one */
                                            .n = 1,
                                            .y = ys + (size_t)i * 2100};
            }
            for (tn_isa isa = TN_ISA_SCALAR; isa < TN_ISA_COUNT_; isa++) {
                if (!tn_isa_available(isa))
                    continue;
                /* and with the item type in one stream (a mixed group
                 * then runs in one stream whole) */
                for (int p = 0; p < 6; p++) {
                    uint8_t streams[TN_TYPE_COUNT_];
                    memset(streams, 2, sizeof streams);
                    if (p >= 3)
                        streams[types[t]] = 1;
                    tn_cpu_set_decode_streams(streams);
                    memset(ys, 0xff, sizeof(float) * N_ITEMS * 2100);
                    CHECK(tn_matmul_group_isa(pools[p % 3], isa, items, N_ITEMS) == TN_OK);
                    int bad = -1;
                    for (int i = 0; i < N_ITEMS && bad < 0; i++) {
                        const int cols = (int)items[i].w->cols;
                        float *x2 = x + (size_t)N_ITEMS * MAXC; /* two copies of the row */
                        memcpy(x2, items[i].x, sizeof(float) * cols);
                        memcpy(x2 + cols, items[i].x, sizeof(float) * cols);
                        CHECK(tn_matmul_isa(pools[1], isa, items[i].w, x2, 2, want) == TN_OK);
                        if (!same_bits(ys + (size_t)i * 2100, want, (size_t)items[i].w->rows))
                            bad = i;
                    }
                    CHECKF(bad < 0, "pairs (%s, %s%s%s, %d threads): item %d (%s, %lld rows) differs "
                           "from its own product", tn_isa_name(isa), tn_type_name(types[t]),
                           mixed ? " mixed" : "", p >= 3 ? ", one stream" : "",
                           tn_cpu_threads(pools[p % 3]), bad,
                           bad >= 0 ? tn_type_name(items[bad].w->type) : "",
                           bad >= 0 ? (long long)items[bad].w->rows : 0LL);
                }
            }
        }
    uint8_t two[TN_TYPE_COUNT_];
    memset(two, 2, sizeof two);
    tn_cpu_set_decode_streams(two);
out:
    for (int t = 0; t < N_TYPES; t++)
        for (int s = 0; s < N_SHAPES; s++) {
            free(raw[t][s]);
            free(packed[t][s]);
        }
    free(src);
    free(x);
    free(ys);
    free(want);
}

static void test_errors(tn_cpu *cpu) {
    float x[256] = {0}, y[4];
    uint8_t data[4 * 256 * 4] = {0};
    tn_weight w = {.type = 16 /* iq2_xxs */, .rows = 1, .cols = 256, .data = data, .row_bytes = 66};
    CHECK(tn_matmul(cpu, &w, x, 1, y) == TN_ERR_UNSUPPORTED);
    w = (tn_weight){.type = TN_TYPE_Q4_0, .rows = 1, .cols = 100, .data = data, .row_bytes = 64};
    CHECK(tn_matmul(cpu, &w, x, 1, y) == TN_ERR_INVALID); /* not whole blocks */
    w = (tn_weight){.type = TN_TYPE_Q4_0, .rows = 1, .cols = 256, .data = data, .row_bytes = 8};
    CHECK(tn_matmul(cpu, &w, x, 1, y) == TN_ERR_INVALID); /* rows overlap */
    w.row_bytes = tn_type_row_bytes(TN_TYPE_Q4_0, 256);
    CHECK(tn_matmul(cpu, &w, x, -1, y) == TN_ERR_INVALID);
    CHECK(tn_matmul(cpu, &w, x, 0, y) == TN_OK);
    CHECK(tn_matmul(cpu, NULL, x, 1, y) == TN_ERR_INVALID);
    CHECK(tn_weight_row_f32(&w, 1, y) == TN_ERR_INVALID);
    CHECK(tn_cpu_set_isa(cpu, TN_ISA_COUNT_) == TN_ERR_UNSUPPORTED);
    CHECK(tn_cpu_set_isa(cpu, TN_ISA_SCALAR) == TN_OK);
}

static void test_weight_row(void) {
    matrix m;
    if (!make_matrix(&m, TN_TYPE_Q6_K))
        return;
    float row[COLS];
    CHECK(tn_weight_row_f32(&m.w, 5, row) == TN_OK);
    CHECK(same_bits(row, m.deq + 5 * COLS, COLS));
    free_matrix(&m);
}

/* tn_weights_repack over a model's list: shared data repacked once, types
 * without a faster layout left alone, products unchanged bit for bit
 * against a matrix repacked on its own. */
static void test_weights_repack(tn_cpu *cpu, const float *x) {
    matrix a, b;
    if (!make_matrix(&a, TN_TYPE_Q4_0))
        return;
    if (!make_matrix(&b, TN_TYPE_F16)) { /* F16 has no faster layout */
        free_matrix(&a);
        return;
    }
    tn_weight w1 = a.w, w2 = a.w, w3 = b.w;
    tn_weight *list[3] = {&w1, &w3, &w2};
    void *storage = (void *)1;
    size_t bytes = 1;
    CHECK(tn_weights_repack(list, 3, false, &storage, &bytes) == TN_OK);
    size_t one = tn_weight_repack_size(&a.w);
    if (one == 0) {
        CHECK(storage == NULL && bytes == 0 && w1.layout == TN_LAYOUT_ROWS);
    } else {
        CHECK(storage != NULL && bytes == (one + 63) / 64 * 64);
        CHECK(w1.layout == TN_LAYOUT_X16 && w2.layout == TN_LAYOUT_X16 && w1.data == w2.data);
        CHECK(w3.layout == TN_LAYOUT_ROWS && w3.data == b.w.data);
        void *solo = aligned_alloc(64, (one + 63) / 64 * 64);
        tn_weight ws;
        float y1[4 * ROWS], y2[4 * ROWS];
        if (solo && tn_weight_repack(&a.w, solo, one, &ws) == TN_OK) {
            CHECK(tn_matmul(cpu, &w2, x, 4, y1) == TN_OK);
            CHECK(tn_matmul(cpu, &ws, x, 4, y2) == TN_OK);
            CHECK(same_bits(y1, y2, 4 * ROWS));
        }
        free(solo);
    }
    free(storage);

    /* Aliases: the first holder of the same matrix; a shorter view of the
     * same data is a matrix of its own, and is reported as mixed. */
    tn_weight v0 = a.w, v1 = b.w, v2 = a.w, v3 = a.w, v4 = a.w;
    v3.rows = ROWS - 1;
    tn_weight *views[5] = {&v0, &v1, &v2, &v3, &v4};
    int alias[5] = {-1, -1, -1, -1, -1};
    bool mixed = false;
    CHECK(tn_weights_aliases(views, 5, alias, &mixed));
    CHECKF(alias[0] == 0 && alias[1] == 1 && alias[2] == 0 && alias[3] == 3 && alias[4] == 0 &&
               mixed,
           "aliases %d %d %d %d %d, mixed %d", alias[0], alias[1], alias[2], alias[3], alias[4],
           mixed);
    views[3] = &v2;
    CHECK(tn_weights_aliases(views, 5, alias, &mixed) && !mixed && alias[3] == 0);
    free_matrix(&a);
    free_matrix(&b);
}

typedef struct pieces_seen {
    size_t group; /* the X16 bytes of 16 rows */
    int calls, final_wrong;
    int64_t rows, largest;
} pieces_seen;

static void count_piece(void *user, int i, int64_t rows, size_t final) {
    pieces_seen *p = user;
    (void)i;
    /* Before each piece, the rows of those before it are written for good. */
    if (final != (size_t)(p->rows / 16) * p->group)
        p->final_wrong++;
    p->calls++;
    p->rows += rows;
    if (rows > p->largest)
        p->largest = rows;
}

/* A load repacks a matrix in pieces of rows (each counted in its
 * progress): every family's bytes, in pieces of one group of 16 rows and
 * of two (ROWS is odd: the last piece is a partial group), are the same as
 * repacked whole, and the pieces announced cover its rows once. */
static void test_repack_pieces(void) {
    static const uint32_t types[] = {TN_TYPE_Q4_0, TN_TYPE_Q8_0, TN_TYPE_IQ4_NL, TN_TYPE_Q4_1,
                                     TN_TYPE_Q5_0, TN_TYPE_Q5_1, TN_TYPE_Q4_K, TN_TYPE_Q5_K,
                                     TN_TYPE_Q6_K, TN_TYPE_Q2_K, TN_TYPE_Q3_K, TN_TYPE_IQ4_XS,
                                     TN_TYPE_MXFP4};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        matrix m;
        if (!make_matrix(&m, types[t]))
            return;
        const size_t size = tn_weight_repack_size(&m.w);
        if (size == 0) { /* no repack on this CPU */
            free_matrix(&m);
            return;
        }
        const size_t alloc = (size + 63) / 64 * 64;
        uint8_t *whole = aligned_alloc(64, alloc), *cut = aligned_alloc(64, alloc);
        tn_weight rw;
        if (whole && cut && tn_weight_repack(&m.w, whole, size, &rw) == TN_OK) {
            const int64_t per[2] = {16, 32};
            for (int k = 0; k < 2; k++) {
                tn_weight w = m.w, *list[1] = {&w};
                const int alias[1] = {0};
                pieces_seen seen = {.group = size / ((ROWS + 15) / 16)};
                memset(cut, 0xa5, alloc); /* the repack must write every byte */
                tn_weights_repack_into(list, 1, alias, false, cut,
                                       (size_t)per[k] * m.w.row_bytes, count_piece, &seen);
                const int want = (int)((ROWS + per[k] - 1) / per[k]);
                CHECKF(w.layout == TN_LAYOUT_X16 && w.data == cut && !memcmp(cut, whole, size),
                       "%s: repacked in pieces of %d rows, not the bytes of a whole repack",
                       tn_type_name(types[t]), (int)per[k]);
                CHECKF(seen.calls == want && seen.rows == ROWS && seen.largest == per[k] &&
                           seen.final_wrong == 0,
                       "%s: pieces of %d rows: %d of them (want %d), %d rows, largest %d, "
                       "%d with the wrong bytes written before them",
                       tn_type_name(types[t]), (int)per[k], seen.calls, want, (int)seen.rows,
                       (int)seen.largest, seen.final_wrong);
            }
        } else {
            CHECKF(0, "%s: no memory or no repack for the pieces' test", tn_type_name(types[t]));
        }
        free(whole);
        free(cut);
        free_matrix(&m);
    }
}

/* Rows of an odd number of 32-value blocks (the X16 layout pairs blocks
 * and pads the last pair) and a row count that leaves a partial group of
 * 16: every family and layout against the scalar reference of the file's
 * rows, and the rows read back from the interleaved layout. */
static void test_odd_blocks(tn_cpu *cpu, const float *x) {
    static const uint32_t types[] = {TN_TYPE_Q4_0, TN_TYPE_Q8_0, TN_TYPE_Q4_1, TN_TYPE_Q5_0,
                                     TN_TYPE_Q5_1, TN_TYPE_MXFP4, TN_TYPE_IQ4_NL};
    enum { R = 21, C = 96, NB = 5 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti];
        const size_t rb = tn_type_row_bytes(type, C);
        uint8_t data[R * 3 * 40];
        float src[C], deq[R * C], ref[NB * R], y[NB * R];
        for (int r = 0; r < R; r++) {
            for (int k = 0; k < C; k++)
                src[k] = 0.05f * tn_test_randf(&rng) + (r % 3 == 0 ? 0.02f : 0.0f);
            CHECK(tn_quantize_row(type, src, data + (size_t)r * rb, C) == TN_OK);
            CHECK(tn_dequantize_row(type, data + (size_t)r * rb, deq + r * C, C) == TN_OK);
        }
        tn_weight w = {.type = type, .rows = R, .cols = C, .data = data, .row_bytes = rb};
        CHECK(tn_matmul_isa(cpu, TN_ISA_SCALAR, &w, x, NB, ref) == TN_OK);
        size_t size = tn_weight_repack_size(&w);
        void *buf = size ? aligned_alloc(64, (size + 63) / 64 * 64) : NULL;
        tn_weight rw = w;
        if (buf && tn_weight_repack(&w, buf, size, &rw) == TN_OK) {
            float row[C];
            for (int r = 0; r < R; r++) {
                CHECK(tn_weight_row_f32(&rw, r, row) == TN_OK);
                CHECKF(same_bits(row, deq + r * C, C), "%s: odd blocks, row %d read back",
                       tn_type_name(type), r);
            }
        }
        for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
            if (!tn_isa_available((tn_isa)isa))
                continue;
            for (int l = 0; l < 2; l++) {
                const tn_weight *wl = l ? &rw : &w;
                CHECK(tn_matmul_isa(cpu, (tn_isa)isa, wl, x, NB, y) == TN_OK);
                double num = 0, den = 0;
                for (int i = 0; i < NB * R; i++) {
                    num += ((double)y[i] - ref[i]) * ((double)y[i] - ref[i]);
                    den += (double)ref[i] * ref[i];
                }
                CHECKF(num <= 1e-4 * den, "%s/%s/%s, odd blocks: NMSE %.3g against scalar",
                       tn_isa_name((tn_isa)isa), tn_type_name(type), l ? "x16" : "rows",
                       num / den);
                for (int b = 0; b < NB; b++) {
                    float one[R];
                    CHECK(tn_matmul_isa(cpu, (tn_isa)isa, wl, x + b * C, 1, one) == TN_OK);
                    CHECKF(same_bits(one, y + b * R, R), "%s/%s, odd blocks: row %d alone differs",
                           tn_isa_name((tn_isa)isa), tn_type_name(type), b);
                }
            }
        }
        free(buf);
    }
}

/* MXFP4 against ggml's arithmetic (ggml-cpu: quantize_row_q8_0, then
 * ggml_vec_dot_mxfp4_q8_0 or its repacked gemv): each activation block of
 * 32 to int8 with q = rint(x * (127 / amax)) (f32, to nearest even), its
 * scale amax / 127 STORED AS FP16; per block the exact integer sum of
 * level x q times fp16 scale x E8M0 half-scale. The SIMD families must
 * give that up to f32 accumulation: |y - ref| <= 2e-6 * S, S the sum of
 * the blocks' |terms| (at most ~14 f32 roundings of u = 6e-8 on the way).
 * An f32 activation scale instead of fp16 moves each block by up to 4.9e-4
 * of itself (about 6e-5 S per output), and one quant off by one moves it
 * by about 1e-3 S: either fails here. Block magnitudes span 1e-4..3e3 so
 * that the scales' fp16 rounding varies; one block is all zero. The
 * scalar reference (f32 activations, unrounded) is not held to this. */
static double f16_round(double d) {
    if (d == 0)
        return 0;
    int e;
    frexp(d, &e); /* d = m 2^e, m in [0.5, 1); fp16: 11 bits, quantum at least 2^-24 */
    const int q = e - 11 < -24 ? -24 : e - 11;
    return ldexp(nearbyint(ldexp(d, -q)), q);
}

static void test_mxfp4_ggml(tn_cpu *cpu) {
    enum { R = 24, C = 512, NB = 6, NBLK = C / 32 };
    const size_t rb = tn_type_row_bytes(TN_TYPE_MXFP4, C);
    uint8_t *w = malloc(rb * R);
    float *x = malloc(sizeof(float) * NB * C), *y = malloc(sizeof(float) * NB * R);
    double *ref = malloc(sizeof(double) * NB * R), *mag = malloc(sizeof(double) * NB * R);
    void *packed = NULL;
    if (!w || !x || !y || !ref || !mag) {
        CHECKF(0, "mxfp4 ggml: out of memory");
        goto out;
    }
    for (int r = 0; r < R; r++) {
        float src[C];
        for (int k = 0; k < C; k++)
            src[k] = 0.03f * (1.0f + (float)(r % 4)) * tn_test_randf(&rng);
        CHECK(tn_quantize_row(TN_TYPE_MXFP4, src, w + (size_t)r * rb, C) == TN_OK);
    }
    for (int b = 0; b < NB; b++)
        for (int k = 0; k < C; k++) {
            const int blk = k / 32;
            const float e10 = -4.0f + 7.5f * (float)((b * 7 + blk * 5) % 23) / 22.0f;
            const float scale = (b * NBLK + blk) % 17 == 5 ? 0.0f : powf(10.0f, e10);
            x[b * C + k] = scale * tn_test_randf(&rng);
        }
    for (int b = 0; b < NB; b++) {
        int8_t q[C];
        double dx[NBLK];
        for (int blk = 0; blk < NBLK; blk++) {
            const float *v = x + b * C + blk * 32;
            float amax = 0;
            for (int i = 0; i < 32; i++)
                amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
            const float id = amax > 0 ? 127.0f / amax : 0.0f;
            for (int i = 0; i < 32; i++)
                q[blk * 32 + i] = (int8_t)nearbyintf(v[i] * id);
            dx[blk] = f16_round((double)(amax / 127.0f));
        }
        for (int r = 0; r < R; r++) {
            const tn_block_mxfp4 *wb = (const tn_block_mxfp4 *)(w + (size_t)r * rb);
            double sum = 0, abs_sum = 0;
            for (int blk = 0; blk < NBLK; blk++) {
                int32_t isum = 0;
                for (int j = 0; j < 16; j++) {
                    isum += tn_mxfp4_values[wb[blk].qs[j] & 15] * q[blk * 32 + j];
                    isum += tn_mxfp4_values[wb[blk].qs[j] >> 4] * q[blk * 32 + j + 16];
                }
                const double term = (double)isum * dx[blk] * (double)tn_e8m0_half(wb[blk].e);
                sum += term;
                abs_sum += fabs(term);
            }
            ref[b * R + r] = sum;
            mag[b * R + r] = abs_sum;
        }
    }
    tn_weight wt[2] = {{.type = TN_TYPE_MXFP4, .rows = R, .cols = C, .data = w, .row_bytes = rb}};
    /* And the X16 layout (the experts' through the repack cache), in the
     * family that has X16 kernels (the others run the scalar reference on
     * it, which is not held to this). */
    const size_t size = tn_weight_repack_size(&wt[0]);
    packed = size ? aligned_alloc(64, (size + 63) / 64 * 64) : NULL;
    const int nl = packed && tn_weight_repack(&wt[0], packed, size, &wt[1]) == TN_OK ? 2 : 1;
    for (int isa = 1; isa < TN_ISA_COUNT_; isa++) {
        if (!tn_isa_available((tn_isa)isa))
            continue;
        for (int l = 0; l < (isa == TN_ISA_AVX512 ? nl : 1); l++) {
            CHECK(tn_matmul_isa(cpu, (tn_isa)isa, &wt[l], x, NB, y) == TN_OK);
            int bad = 0;
            double worst = 0;
            for (int i = 0; i < NB * R; i++) {
                const double e = fabs((double)y[i] - ref[i]) / (mag[i] > 0 ? mag[i] : 1);
                worst = e > worst ? e : worst;
                bad += e > 2e-6;
            }
            CHECKF(bad == 0,
                   "%s/mxfp4/%s: %d of %d products differ from ggml's arithmetic (worst %.3g of S)",
                   tn_isa_name((tn_isa)isa), l ? "x16" : "rows", bad, NB * R, worst);
            if (getenv("TERN_TEST_VERBOSE"))
                fprintf(stderr, "%s/mxfp4/%s against ggml's arithmetic: worst %.3g of S\n",
                        tn_isa_name((tn_isa)isa), l ? "x16" : "rows", worst);
        }
    }
out:
    free(packed);
    free(w);
    free(x);
    free(y);
    free(ref);
    free(mag);
}

/* MXFP4's E8M0 scales at their edges, exactly: e = 0 and 1 are the
 * denormal half-scales 2^-128 and 2^-127, e = 2 the smallest normal one,
 * then ordinary ones. With activations that are integers up to 127 (each
 * block's largest 127, so their int8 quants are the values themselves,
 * scale 1) every product is an integer times a power of two that f32 holds
 * exactly: each family and layout must give the exact sum, bit for bit. A
 * scale decoded one binade off, or a denormal flushed to zero, fails. */
static void test_mxfp4_e8m0_exact(tn_cpu *cpu) {
    enum { R = 19, C = 96, NB = 3, NBLK = C / 32 };
    static const uint8_t es[] = {0, 1, 2, 3, 100, 127, 130, 0, 1};
    const size_t rb = tn_type_row_bytes(TN_TYPE_MXFP4, C);
    uint8_t w[R * NBLK * sizeof(tn_block_mxfp4)];
    float x[NB * C], y[NB * R], want[NB * R];
    for (int r = 0; r < R; r++)
        for (int blk = 0; blk < NBLK; blk++) {
            tn_block_mxfp4 *b = (tn_block_mxfp4 *)(w + (size_t)r * rb) + blk;
            b->e = es[r % (int)sizeof es]; /* one scale a row: every partial sum exact */
            for (int j = 0; j < 16; j++)
                b->qs[j] = (uint8_t)(tn_test_rand(&rng) & 0xff);
        }
    for (int b = 0; b < NB; b++)
        for (int k = 0; k < C; k++)
            x[b * C + k] = k % 32 == 0 ? 127.0f : (float)((int)(tn_test_rand(&rng) % 255) - 127);
    for (int b = 0; b < NB; b++)
        for (int r = 0; r < R; r++) {
            const tn_block_mxfp4 *wb = (const tn_block_mxfp4 *)(w + (size_t)r * rb);
            double sum = 0;
            for (int blk = 0; blk < NBLK; blk++) {
                int32_t isum = 0;
                for (int j = 0; j < 16; j++) {
                    isum += tn_mxfp4_values[wb[blk].qs[j] & 15] * (int32_t)x[b * C + blk * 32 + j];
                    isum += tn_mxfp4_values[wb[blk].qs[j] >> 4] *
                            (int32_t)x[b * C + blk * 32 + j + 16];
                }
                sum += (double)isum * (double)tn_e8m0_half(wb[blk].e);
            }
            want[b * R + r] = (float)sum;
            CHECKF((double)want[b * R + r] == sum, "mxfp4 e8m0: reference row %d not exact", r);
        }
    tn_weight wt[2] = {{.type = TN_TYPE_MXFP4, .rows = R, .cols = C, .data = w, .row_bytes = rb}};
    const size_t size = tn_weight_repack_size(&wt[0]);
    void *packed = size ? aligned_alloc(64, (size + 63) / 64 * 64) : NULL;
    const int nl = packed && tn_weight_repack(&wt[0], packed, size, &wt[1]) == TN_OK ? 2 : 1;
    for (int isa = 1; isa < TN_ISA_COUNT_; isa++) {
        if (!tn_isa_available((tn_isa)isa))
            continue;
        for (int l = 0; l < nl; l++)
            for (int n = 1; n <= NB; n++) {
                CHECK(tn_matmul_isa(cpu, (tn_isa)isa, &wt[l], x, n, y) == TN_OK);
                CHECKF(same_bits(y, want, (size_t)n * R),
                       "%s/mxfp4/%s, %d rows: E8M0 edge scales not exact", tn_isa_name((tn_isa)isa),
                       l ? "x16" : "rows", n);
            }
    }
    free(packed);
}

/* ------------------------------------------------------------ attention
 *
 * tn_attention_tile: every family against the scalar reference BITWISE
 * (they perform the same float operations in the same order; bound 0), a
 * query's result the same alone or anywhere in a tile of any size (batch
 * invariance), and the reference against an exact double-precision softmax
 * of the same bf16 queries, keys and values with an NMSE bound of 4e-6: the
 * probabilities are rounded to bf16 (unit roundoff u = 2^-9) before they
 * weigh the values, which moves each output by at most u relative to the
 * spread of the values it averages, so NMSE <= u^2 = 3.8e-6 (the f32 sums
 * and the 2-ulp exp add far less). The positions after the last filled
 * one, in the same key block and value pair, hold NaN (like stale cache
 * rows) and must not reach any result. One query is tiny (3e-38 per
 * dimension): its products are below the smallest normal float, so the
 * flush-to-zero rule is exercised too. */
#define ATT_POS (2 * TN_ATTN_CHUNK + 100) /* three softmax chunks, the last partial */

static double bf(uint16_t b) { return (double)tn_bf16_to_f32(b); }

/* sink: NULL, or the query's attention-sink logit (one more softmax term
 * that weighs no value). */
static double attn_exact(const uint16_t *q, const uint16_t *k, const uint16_t *v, int32_t D,
                         int64_t first, int64_t last, float scale, int32_t d_out,
                         const float *sink) {
    double mx = -INFINITY, sum = 0, acc = 0;
    for (int64_t j = first; j <= last; j++) {
        double s = 0;
        for (int32_t d = 0; d < D; d++)
            s += bf(q[d]) * bf(k[tn_attn_k_index(j, d, D)]);
        mx = fmax(mx, s * scale);
    }
    for (int64_t j = first; j <= last; j++) {
        double s = 0;
        for (int32_t d = 0; d < D; d++)
            s += bf(q[d]) * bf(k[tn_attn_k_index(j, d, D)]);
        const double e = exp(s * scale - mx);
        sum += e;
        acc += e * bf(v[tn_attn_v_index(j, d_out, D)]);
    }
    if (sink)
        sum += exp((double)*sink - mx);
    return acc / sum;
}

/* The largest scaled score of a query (to place its sink near it). */
static double attn_max(const uint16_t *q, const uint16_t *k, int32_t D, int64_t first,
                       int64_t last, float scale) {
    double mx = -INFINITY;
    for (int64_t j = first; j <= last; j++) {
        double s = 0;
        for (int32_t d = 0; d < D; d++)
            s += bf(q[d]) * bf(k[tn_attn_k_index(j, d, D)]);
        mx = fmax(mx, s * scale);
    }
    return mx;
}

/* The AVX-512 kernel without BF16 (its FMA pairs stand in for VDPBF16PS):
 * tn_attention_tile prefers the BF16 one wherever it exists, so it is
 * called directly here, under the flush-to-zero mode tn_attention_tile
 * sets. Weak: builds without the AVX-512 library do not have it. */
bool tn_attention_avx512(const tn_attn_tile *t, float *scratch) __attribute__((weak));

static void attention_avx512_fma(const tn_attn_tile *t, float *scratch) {
#if defined(__x86_64__)
    const unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    const bool ran = tn_attention_avx512(t, scratch);
    _mm_setcsr(csr);
    CHECK(ran);
#else
    (void)t;
    (void)scratch;
#endif
}

/* sinks: every query gets an attention-sink logit, from 3 below to 3 above
 * its largest score (gpt-oss): the same bitwise rule across families and
 * tiles, and the exact softmax with the sink as one more term. */
static void test_attention_dim(int32_t D, bool sinks) {
    const int NQ = 13;
    const size_t kv = (size_t)(ATT_POS + TN_ATTN_KB) * (size_t)D;
    uint16_t *k = malloc(kv * sizeof *k), *v = malloc(kv * sizeof *v);
    uint16_t *q = malloc((size_t)NQ * D * sizeof *q);
    float *ref = malloc((size_t)NQ * D * sizeof *ref), *out = malloc((size_t)NQ * D * sizeof *out);
    float *scratch = malloc(tn_attention_scratch_floats(D) * sizeof *scratch);
    int64_t first[13], last[13];
    CHECK(k && v && q && ref && out && scratch);
    if (!k || !v || !q || !ref || !out || !scratch)
        goto done;
    for (size_t i = 0; i < kv; i++) {
        k[i] = tn_bf16_from_f32(NAN);
        v[i] = tn_bf16_from_f32(NAN);
    }
    /* Keys drift upward with the position, so the running maximum grows
     * (and the rescaling runs) many times; a few large outliers. */
    for (int64_t j = 0; j < ATT_POS; j++)
        for (int32_t d = 0; d < D; d++) {
            k[tn_attn_k_index(j, d, D)] = tn_bf16_from_f32(
                tn_test_randf(&rng) + (float)j / ATT_POS + (j % 97 == 5 ? 3.0f : 0.0f));
            v[tn_attn_v_index(j, d, D)] = tn_bf16_from_f32(tn_test_randf(&rng));
        }
    for (int i = 0; i < NQ * D; i++)
        q[i] = tn_bf16_from_f32((tn_test_randf(&rng) * 0.5f + 0.25f) * (i / D == 4 ? 3e-38f : 1.0f));
    for (int i = 0; i < NQ; i++) {
        last[i] = (int64_t)((137 * i + 11) % ATT_POS);
        if (i == 0)
            last[i] = 0;
        if (i == 1)
            last[i] = ATT_POS - 1;
        /* Sliding windows of 300 and 40 positions: most start inside one
         * chunk and end in the next. */
        first[i] = 0;
        if (i % 3 == 2)
            first[i] = last[i] > 300 ? last[i] - 300 : last[i] > 40 ? last[i] - 40 : 0;
    }
    const float scale = 1.0f / sqrtf((float)D);
    float sinkv[13];
    for (int i = 0; i < NQ; i++)
        sinkv[i] = (float)attn_max(q + (size_t)i * D, k, D, first[i], last[i], scale) +
                   1.5f * (float)(i % 5 - 2);
    double num = 0, den = 0;
    for (int i = 0; i < NQ; i++) {
        tn_attn_tile t = {.head_dim = D, .n = 1, .k = k, .v = v, .scale = scale,
                          .has_sinks = sinks};
        t.sink[0] = sinkv[i];
        t.q[0] = q + (size_t)i * D;
        t.out[0] = ref + (size_t)i * D;
        t.first[0] = first[i];
        t.last[0] = last[i];
        tn_attention_tile(TN_ISA_SCALAR, &t, scratch);
        for (int32_t d = 0; d < D; d++) {
            const double e = attn_exact(q + (size_t)i * D, k, v, D, first[i], last[i], scale, d,
                                        sinks ? &sinkv[i] : NULL);
            CHECKF(isfinite(ref[(size_t)i * D + d]), "D=%d query %d: non-finite output", D, i);
            num += (ref[(size_t)i * D + d] - e) * (ref[(size_t)i * D + d] - e);
            den += e * e;
        }
    }
    const double nmse = num / den;
    fprintf(stderr, "attention D=%d%s: scalar vs exact NMSE %.2e\n", D, sinks ? " (sinks)" : "",
            nmse);
    CHECKF(nmse < 4e-6, "D=%d%s: attention NMSE %.3e above 4e-6", D, sinks ? " (sinks)" : "", nmse);

    /* The families, then (isa == TN_ISA_COUNT_) the AVX-512 FMA kernel. */
    for (int isa = TN_ISA_SCALAR + 1; isa <= TN_ISA_COUNT_; isa++) {
        const bool fma512 = isa == TN_ISA_COUNT_;
        if (fma512 ? !tn_attention_avx512 || !tn_isa_available(TN_ISA_AVX512) || D % 16 != 0
                   : !tn_isa_available((tn_isa)isa))
            continue;
        /* Tiles of every size, starting at every query (wrapping round). */
        for (int n = 1; n <= TN_ATTN_TILE; n++)
            for (int start = 0; start < NQ; start++) {
                tn_attn_tile t = {.head_dim = D, .n = n, .k = k, .v = v, .scale = scale,
                                  .has_sinks = sinks};
                for (int j = 0; j < n; j++) {
                    const int i = (start + j) % NQ;
                    t.sink[j] = sinkv[i];
                    t.q[j] = q + (size_t)i * D;
                    t.out[j] = out + (size_t)i * D;
                    t.first[j] = first[i];
                    t.last[j] = last[i];
                }
                memset(out, 0, (size_t)NQ * D * sizeof *out);
                if (fma512)
                    attention_avx512_fma(&t, scratch);
                else
                    tn_attention_tile((tn_isa)isa, &t, scratch);
                for (int j = 0; j < n; j++) {
                    const int i = (start + j) % NQ;
                    CHECKF(!memcmp(out + (size_t)i * D, ref + (size_t)i * D, (size_t)D * 4),
                           "attention %s D=%d%s: query %d in a tile of %d at %d differs from "
                           "the scalar reference alone",
                           fma512 ? "avx512 (fma)" : tn_isa_name((tn_isa)isa), D,
                           sinks ? " (sinks)" : "", i, n, j);
                }
            }
    }
done:
    free(k);
    free(v);
    free(q);
    free(ref);
    free(out);
    free(scratch);
}

static void test_attention(void) {
    /* 64 and 256: the SIMD kernels' main loops; 40: AVX2 only (not a
     * multiple of 16); 36: the scalar reference everywhere. */
    const int32_t dims[] = {64, 40, 36, 256};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        test_attention_dim(dims[i], false);
    /* gpt-oss's attention sinks: its head size, AVX2's, the scalar's */
    for (size_t i = 0; i < 3; i++)
        test_attention_dim(dims[i], true);
}

/* ------------------------------------------------------------ SiLU
 *
 * tn_silu_mul (whatever family this CPU runs) against the scalar reference
 * bitwise, at every length 0..40 (the SIMD tail) and on values from -100 to
 * 100 plus 0, -0, infinities and NaN; and the reference against SiLU in
 * double precision: at most 2e-7 relative error (measured 1.2e-7, two float ulps) where
 * the result is above 1e-35 (below, x < -80, only its sign and tininess
 * count). */
static void test_silu(void) {
    enum { N = 4096 };
    float *x = malloc(N * sizeof *x), *u = malloc(N * sizeof *u), *g = malloc(N * sizeof *g);
    CHECK(x && u && g);
    if (!x || !u || !g)
        goto done;
    for (int i = 0; i < N; i++) {
        x[i] = 100.0f * tn_test_randf(&rng) * (i % 3 == 0 ? 1.0f : 0.1f);
        u[i] = 1.0f + tn_test_randf(&rng);
    }
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = INFINITY;
    x[3] = -INFINITY;
    x[4] = NAN;
    x[5] = 88.5f;
    x[6] = -88.5f;
    x[7] = 20.5f;
    x[8] = -20.5f;
    double worst = 0;
    for (int i = 0; i < N; i++) {
        const float r = tn_silu_ref(x[i]);
        if (i == 4) {
            CHECKF(isnan(r), "silu(NaN) = %g", r);
            continue;
        }
        if (!isfinite(x[i]))
            continue;
        const double e = (double)x[i] / (1.0 + exp(-(double)x[i]));
        if (fabs(e) >= 1e-35) /* past the clamp at z = 88 only the sign is kept */
            worst = fmax(worst, fabs((double)r - e) / fabs(e));
    }
    fprintf(stderr, "silu: reference vs double, max relative error %.2e\n", worst);
    CHECKF(worst <= 2e-7, "silu: relative error %.3g above 2e-7", worst);
    CHECKF(tn_silu_ref(INFINITY) == INFINITY, "silu(inf) = %g", tn_silu_ref(INFINITY));
    bool same = true;
    for (int len = 0; len <= 40 && same; len++)
        for (int start = 0; start + len <= N && same; start += 97 + len) {
            memcpy(g, x + start, (size_t)len * sizeof *g);
            tn_silu_mul(g, u + start, len);
            for (int i = 0; i < len; i++) {
                const float r = tn_silu_ref(x[start + i]) * u[start + i];
                if (memcmp(&r, &g[i], 4) && !(isnan(r) && isnan(g[i]))) {
                    CHECKF(0, "silu: length %d, value %d (x = %a): %a, reference %a", len, i,
                           x[start + i], g[i], r);
                    same = false;
                    break;
                }
            }
        }
    memcpy(g, x, N * sizeof *g);
    tn_silu_mul(g, u, N);
    for (int i = 0; i < N && same; i++) {
        const float r = tn_silu_ref(x[i]) * u[i];
        same = !memcmp(&r, &g[i], 4) || (isnan(r) && isnan(g[i]));
    }
    CHECKF(same, "silu: the whole array differs from the reference");
done:
    free(x);
    free(u);
    free(g);
}

/* ------------------------------------------------------------ GELU, tanh
 *
 * tn_gelu_mul and tn_softcap (whatever family this CPU runs) against the
 * scalar references bitwise, at every length 0..40 (the SIMD tail) and on
 * the whole array: values in [-12, 12] and [-120, 120], special values
 * (zeros, infinities, NaN, the clamps and their neighbours, subnormals,
 * FLT_MAX). The references against double: GELU within 2e-7 relative for
 * every x >= -10 (below, a tiny non-positive value), tanh within 2.5e-7, over
 * a sweep of a million float bit patterns of both signs. */
static bool same_float(float a, float b) { return !memcmp(&a, &b, 4) || (isnan(a) && isnan(b)); }

static double gelu_double(double x) {
    const double z = -2.0 * sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(z));
}

static float sweep_value(uint32_t i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}

static void test_gelu_tanh(void) {
    enum { N = 4096, NSPECIAL = 28 };
    float *x = malloc(N * sizeof *x), *u = malloc(N * sizeof *u), *g = malloc(N * sizeof *g);
    CHECK(x && u && g);
    if (!x || !u || !g)
        goto done;
    for (int i = 0; i < N; i++) {
        x[i] = (i % 3 == 0 ? 120.0f : 12.0f) * tn_test_randf(&rng);
        u[i] = 1.0f + tn_test_randf(&rng);
    }
    const float special[NSPECIAL] = {
        0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, -10.0f, nextafterf(-10.0f, 0.0f),
        nextafterf(-10.0f, -20.0f), -9.3f, 3.9f, 4.1f, 10.0f, -1e-30f, 1e-30f, 0x1p-140f,
        -0x1p-149f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, 1e20f, -1e20f, 0.5f, -0.5f,
        0x1p-13f, -3.0f, 9.1f};
    for (int i = 0; i < NSPECIAL; i++)
        x[i * 37] = special[i]; /* spread over SIMD lanes and tail positions */

    /* Accuracy of the references. */
    double worst_g = 0, worst_t = 0;
    float at_g = 0, at_t = 0;
    bool tail_ok = true;
    for (int sgn = 0; sgn < 2; sgn++)
        for (uint32_t b = 0; b < 0x7f800000u; b += 4099) {
            const float v = sweep_value(b | (uint32_t)sgn << 31);
            const float r = tn_gelu_ref(v);
            /* Subnormal results are checked to their spacing, 2^-149. */
            if (v >= -10.0f) {
                const double e = gelu_double(v);
                if (fabs(e) < FLT_MIN) {
                    tail_ok = tail_ok && fabs((double)r - e) <= 0x1p-149;
                } else if (fabs((double)r - e) / fabs(e) > worst_g) {
                    worst_g = fabs((double)r - e) / fabs(e);
                    at_g = v;
                }
            } else {
                tail_ok = tail_ok && r <= 0 && r >= -1.5e-37f;
            }
            const float t = tn_tanh_ref(v);
            const double et = tanh((double)v);
            if (fabs(et) < FLT_MIN) {
                tail_ok = tail_ok && fabs((double)t - et) <= 0x1p-149;
            } else if (fabs((double)t - et) / fabs(et) > worst_t) {
                worst_t = fabs((double)t - et) / fabs(et);
                at_t = v;
            }
        }
    fprintf(stderr, "gelu: reference vs double, max relative error %.2e (x = %a)\n", worst_g, at_g);
    fprintf(stderr, "tanh: reference vs double, max relative error %.2e (y = %a)\n", worst_t, at_t);
    CHECKF(worst_g <= 2e-7, "gelu: relative error %.3g above 2e-7 at %a", worst_g, at_g);
    CHECKF(worst_t <= 2.5e-7, "tanh: relative error %.3g above 2.5e-7 at %a", worst_t, at_t);
    CHECKF(tail_ok, "gelu below -10 not tiny and non-positive, or a subnormal result off");

    /* Special values of the references. */
    const float gz = tn_gelu_ref(0.0f), gnz = tn_gelu_ref(-0.0f);
    CHECKF(gz == 0 && !signbit(gz) && gnz == 0 && signbit(gnz), "gelu(+-0) = %g, %g", gz, gnz);
    CHECKF(tn_gelu_ref(INFINITY) == INFINITY, "gelu(inf) = %g", tn_gelu_ref(INFINITY));
    const float gni = tn_gelu_ref(-INFINITY);
    CHECKF(gni <= 0 && gni >= -1.5e-37f, "gelu(-inf) = %g", gni);
    CHECKF(isnan(tn_gelu_ref(NAN)), "gelu(NaN) = %g", tn_gelu_ref(NAN));
    CHECKF(tn_gelu_ref(FLT_MAX) == FLT_MAX, "gelu(FLT_MAX) = %g", tn_gelu_ref(FLT_MAX));
    CHECKF(tn_gelu_ref(0x1p-140f) == 0x1p-141f, "gelu(2^-140) = %a", tn_gelu_ref(0x1p-140f));
    const float tz = tn_tanh_ref(0.0f), tnz = tn_tanh_ref(-0.0f);
    CHECKF(tz == 0 && !signbit(tz) && tnz == 0 && signbit(tnz), "tanh(+-0) = %g, %g", tz, tnz);
    CHECKF(tn_tanh_ref(INFINITY) == 1.0f && tn_tanh_ref(-INFINITY) == -1.0f, "tanh(+-inf) = %g, %g",
           tn_tanh_ref(INFINITY), tn_tanh_ref(-INFINITY));
    CHECKF(tn_tanh_ref(-FLT_MAX) == -1.0f, "tanh(-FLT_MAX) = %g", tn_tanh_ref(-FLT_MAX));
    CHECKF(isnan(tn_tanh_ref(NAN)), "tanh(NaN) = %g", tn_tanh_ref(NAN));
    CHECKF(tn_tanh_ref(0x1p-149f) == 0x1p-149f, "tanh(2^-149) = %a", tn_tanh_ref(0x1p-149f));

    /* The fast paths against the references, bit for bit. */
    const float cap = 30.0f;
    bool same_g = true, same_t = true;
    for (int len = 0; len <= 40 && (same_g || same_t); len++)
        for (int start = 0; start + len <= N; start += 37 + len) {
            memcpy(g, x + start, (size_t)len * sizeof *g);
            tn_gelu_mul(g, u + start, len);
            for (int i = 0; i < len && same_g; i++) {
                const float r = tn_gelu_ref(x[start + i]) * u[start + i];
                if (!same_float(r, g[i])) {
                    CHECKF(0, "gelu: length %d, value %d (x = %a): %a, reference %a", len, i,
                           x[start + i], g[i], r);
                    same_g = false;
                }
            }
            memcpy(g, x + start, (size_t)len * sizeof *g);
            tn_softcap(g, len, cap);
            for (int i = 0; i < len && same_t; i++) {
                const float r = cap * tn_tanh_ref(x[start + i] / cap);
                if (!same_float(r, g[i])) {
                    CHECKF(0, "softcap: length %d, value %d (v = %a): %a, reference %a", len, i,
                           x[start + i], g[i], r);
                    same_t = false;
                }
            }
        }
    CHECK(same_g && same_t);
    memcpy(g, x, N * sizeof *g);
    tn_gelu_mul(g, u, N);
    for (int i = 0; i < N && same_g; i++)
        same_g = same_float(tn_gelu_ref(x[i]) * u[i], g[i]);
    CHECKF(same_g, "gelu: the whole array differs from the reference");
    /* Over the sweep too, with u = 1 (the product is then exact). */
    for (int i = 0; i < N; i++)
        u[i] = 1.0f;
    for (int sgn = 0; sgn < 2 && same_g && same_t; sgn++)
        for (uint32_t b = 0; b < 0x7f800000u && same_g && same_t; b += N * 977u) {
            for (int i = 0; i < N; i++)
                x[i] = sweep_value((b + (uint32_t)i * 977u) | (uint32_t)sgn << 31);
            memcpy(g, x, N * sizeof *g);
            tn_gelu_mul(g, u, N);
            for (int i = 0; i < N && same_g; i++)
                same_g = same_float(tn_gelu_ref(x[i]), g[i]);
            memcpy(g, x, N * sizeof *g);
            tn_softcap(g, N, 1.0f);
            for (int i = 0; i < N && same_t; i++)
                same_t = same_float(tn_tanh_ref(x[i]), g[i]);
        }
    CHECKF(same_g && same_t, "gelu/tanh: the sweep differs from the reference (gelu %d, tanh %d)",
           same_g, same_t);
done:
    free(x);
    free(u);
    free(g);
}

int main(void) {
    tn_cpu *pools[3] = {tn_cpu_new(1), tn_cpu_new(2), tn_cpu_new(3)};
    CHECK(pools[0] && pools[1] && pools[2]);
    if (!pools[0] || !pools[1] || !pools[2])
        return tn_test_finish("kernels");
    CHECK(tn_cpu_threads(pools[2]) == 3);
    fprintf(stderr, "best instruction set here: %s%s\n", tn_isa_name(tn_isa_best()),
            tn_isa_has_avx512_bf16() ? " (with BF16)" : "");

    float *x = malloc(sizeof(float) * BIG * COLS);
    CHECK(x != NULL);
    if (x) {
        for (int i = 0; i < BIG * COLS; i++)
            x[i] = tn_test_randf(&rng);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            test_type(&cases[i], x, pools);
        /* The extremes: every activation at the top of its 8-bit range
         * (one value), then alternating in sign per 16, against weights at
         * the ends of theirs. */
        float *ones = malloc(sizeof(float) * BIG * COLS);
        CHECK(ones != NULL);
        for (int xp = 0; ones && xp < 2; xp++) {
            for (int i = 0; i < BIG * COLS; i++)
                ones[i] = xp == 0 || (i / 16) % 2 ? 1.0f : -1.0f;
            for (weight_pattern = W_ALL_MIN; weight_pattern <= W_SIGNS; weight_pattern++)
                for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                    if (tn_type_block_size(cases[i].type) > 1)
                        test_extremes(&cases[i], ones, pools[1]);
        }
        weight_pattern = W_RANDOM;
        free(ones);
        test_weights_repack(pools[1], x);
        test_repack_pieces();
        test_odd_blocks(pools[1], x);
        test_mxfp4_ggml(pools[1]);
        test_mxfp4_e8m0_exact(pools[1]);
        test_group(x, pools);
        test_pairs(pools);
        free(x);
    }
    test_errors(pools[0]);
    test_weight_row();
    test_attention();
    test_silu();
    test_gelu_tanh();
    for (int t = 0; t < 3; t++)
        tn_cpu_free(pools[t]);
    return tn_test_finish("kernels");
}
