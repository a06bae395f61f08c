/* Which weight types' kernels prefetch in a context's decode steps, chosen
 * by measuring the model's own one-token decodes.
 *
 * The X16 kernels can request the weights ahead in software at one to three
 * activation rows, or leave that to the hardware prefetcher. Which is faster
 * depends on the host and on the weight type: on one Zen 4 VM Q4_K and Q6_K
 * stream a quarter to a third faster without it while Q3_K, whose unpacking
 * is heavier, loses 30-40 % at two threads; an earlier host measured Q4_K the
 * other way (docs/PERFORMANCE.md, "Choosing the decode prefetch per
 * context"). The prefetch is a hint and changes no bits, so a context can
 * simply try both on its first one-token decodes and keep, per type, the
 * faster.
 *
 * Samples alternate ABBA (every type with, every type without, without,
 * with, ...), so that a machine that speeds up or slows down, and the KV
 * cache growing under the steps, move both sides alike. Within a sample each
 * matrix product is timed and its time goes to its weight type (a group of
 * products of several types shares its time by bytes); per type, the median
 * over the samples of each side decides.
 */
#include "tn-internal.h"
#include "tn-model.h"

#include <stdlib.h>
#include <string.h>

/* The first one-token decodes after a load may still page weights in or
 * grow buffers: not counted. */
#define TUNE_SKIP 2
/* Leaving the default takes a measured 3 % gain at least: below that, noise. */
#define TUNE_MARGIN 0.97

void tn_decode_tune_init(tn_decode_tune *t) {
    memset(t, 0, sizeof *t);
    const char *e = getenv("TERN_DECODE_PREFETCH");
    if (e && *e) {
        t->state = TN_DECODE_TUNE_FORCED;
        t->mask = e[0] == '0' && e[1] == '\0' ? 0 : TN_DECODE_PREFETCH_ALL;
    } else {
        t->state = TN_DECODE_TUNE_MEASURING;
        t->mask = TN_DECODE_PREFETCH_ALL; /* until measured: the long-standing default */
    }
}

/* ABBA: sample i runs with the prefetch for i = 0, 3, 4, 7, 8, ... */
static bool sample_prefetches(int i) { return ((i ^ (i >> 1)) & 1) == 0; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values read with a stride (sorts a copy). */
static double median(const double *v, size_t stride, int n) {
    double c[TN_DECODE_TUNE_SAMPLES];
    for (int i = 0; i < n; i++)
        c[i] = v[(size_t)i * stride];
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    return n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
}

double tn_decode_tune_begin(tn_decode_tune *t, int32_t n_rows) {
    t->sampling = false;
    if (t->state == TN_DECODE_TUNE_MEASURING && n_rows == 1) {
        if (t->skipped < TUNE_SKIP)
            t->skipped++;
        else
            t->sampling = true;
    }
    /* Set on every call: another context (a draft model's) may have set its
     * own choice in between; the switch is process-wide. */
    if (t->sampling) {
        memset(t->step_type_ms, 0, sizeof t->step_type_ms);
        tn_cpu_set_decode_prefetch_mask(sample_prefetches(t->n) ? TN_DECODE_PREFETCH_ALL : 0);
        return tn_now_ms();
    }
    tn_cpu_set_decode_prefetch_mask(t->mask);
    return -1;
}

static double item_bytes(const tn_weight *w) {
    return (double)tn_type_row_bytes(w->type, (uint64_t)w->cols) * (double)w->rows;
}

double tn_decode_tune_mm_begin(const tn_decode_tune *t) { return t->sampling ? tn_now_ms() : -1; }

void tn_decode_tune_mm_end(tn_decode_tune *t, double started_ms, const tn_matmul_item *items,
                           int n) {
    if (started_ms < 0)
        return;
    const double ms = tn_now_ms() - started_ms;
    double total = 0;
    for (int i = 0; i < n; i++)
        total += item_bytes(items[i].w);
    for (int i = 0; i < n && total > 0; i++)
        if (items[i].w->type < TN_TYPE_COUNT_)
            t->step_type_ms[items[i].w->type] += ms * item_bytes(items[i].w) / total;
}

void tn_decode_tune_end(tn_decode_tune *t, double started_ms, bool ok) {
    if (started_ms < 0 || !t->sampling)
        return;
    t->sampling = false;
    if (!ok)
        return;
    const double ms = tn_now_ms() - started_ms;
    const int side = sample_prefetches(t->n) ? 0 : 1, slot = t->n / 2;
    t->ms[side][slot] = ms;
    memcpy(t->type_ms[side][slot], t->step_type_ms, sizeof t->step_type_ms);
    if (++t->n < 2 * TN_DECODE_TUNE_SAMPLES)
        return;
    const int S = TN_DECODE_TUNE_SAMPLES;
    t->ms_with = median(t->ms[0], 1, S);
    t->ms_without = median(t->ms[1], 1, S);
    uint64_t mask = TN_DECODE_PREFETCH_ALL;
    for (int type = 0; type < TN_TYPE_COUNT_; type++) {
        t->type_ms_with[type] = median(&t->type_ms[0][0][type], TN_TYPE_COUNT_, S);
        t->type_ms_without[type] = median(&t->type_ms[1][0][type], TN_TYPE_COUNT_, S);
        if (t->type_ms_without[type] > 0 &&
            t->type_ms_without[type] < TUNE_MARGIN * t->type_ms_with[type])
            mask &= ~((uint64_t)1 << type);
    }
    t->mask = mask;
    t->state = TN_DECODE_TUNE_CHOSEN;
}
