/* How a context's kernels request their weights ahead (tn_prefetch_mode:
 * none, near into L1, far into L2), per weight type, chosen by measuring the
 * model's own steps.
 *
 * Which mode is fastest depends on the host and the weight type. One Zen 4
 * VM streamed Q4_K and Q6_K a quarter to a third faster with no software
 * prefetch at one row, while Q3_K, whose unpacking is heavier, lost 30-40 %
 * without; on another, Q4_K ran 30 % faster two groups ahead into L1 than
 * eight ahead into L2, and a 16-row verify step 15 % faster, while the host
 * before measured the opposite (docs/PERFORMANCE.md, "Three prefetch
 * modes"). The prefetch is a hint and changes no bits, so a context simply
 * tries the modes on its first steps and keeps, per type, the fastest.
 *
 * Two classes, each measured on its own steps: one-token decodes (after two
 * it leaves out) for the decode modes, steps of 4 to 32 rows (verify steps,
 * short prompts; per row) for the batch modes. Within a class the modes
 * take turns in blocks that go forward and back (ABCCBA), so that a machine
 * that speeds up or slows down, and the KV cache growing under the steps,
 * move every mode alike. Within a sample each matrix product is timed and
 * its time goes to its weight type (a group of products of several types
 * shares its time by bytes); per type, the medians decide, and a mode
 * leaves the default only where it also won most blocks.
 *
 * The one-token decodes that follow then measure, in the same way, how many
 * weight streams each thread reads (1 or 2, tn_cpu_decode_streams): two
 * made an E4B-shaped Q4_0 decode 10-20 % faster and one IQ4_XS product 8 %
 * slower on the same host.
 */
#include "tn-internal.h"
#include "tn-model.h"

#include <stdlib.h>
#include <string.h>

/* The first one-token decodes after a load may still page weights in or
 * grow buffers: not counted. */
#define TUNE_SKIP 2
/* Leaving the default takes a measured 3 % gain at least, below that noise,
 * and the mode faster than the default in 6 of the 8 blocks (each block
 * holds one sample of every mode, side by side in time): on a shared VM a
 * median of eight can move 5 % on two or three lucky samples. */
#define TUNE_MARGIN 0.97
#define TUNE_MIN_WINS 6
/* Batch samples: steps of this many rows. Longer prompts reuse each weight
 * load over so many rows that the prefetch hardly shows; they are left out
 * (and run in the chosen batch modes). */
#define TUNE_BATCH_MIN 4
#define TUNE_BATCH_MAX 32

static void class_init(tn_prefetch_tune *c, bool batch, int forced) {
    memset(c, 0, sizeof *c);
    for (uint32_t type = 0; type < TN_TYPE_COUNT_; type++)
        c->def[type] = (uint8_t)tn_cpu_default_prefetch_mode(batch, type);
    memcpy(c->mode, c->def, sizeof c->mode);
    if (batch) { /* no software prefetch at all lost 25-30 % of a verify step: not tried */
        c->modes[c->n_modes++] = TN_PREFETCH_NEAR;
        c->modes[c->n_modes++] = TN_PREFETCH_FAR;
    } else {
        c->modes[c->n_modes++] = TN_PREFETCH_FAR;
        c->modes[c->n_modes++] = TN_PREFETCH_NEAR;
        c->modes[c->n_modes++] = TN_PREFETCH_NONE;
    }
    c->state = TN_DECODE_TUNE_MEASURING;
    if (!batch && forced >= 0) {
        c->state = TN_DECODE_TUNE_FORCED;
        memset(c->mode, forced, sizeof c->mode);
    }
}

/* The stream counts are the class's modes: its arrays are indexed by the
 * count (1 or 2), which fits those sized for the prefetch modes. */
_Static_assert(TN_PREFETCH_MODES > 2, "stream counts index the tune arrays");

static void streams_init(tn_prefetch_tune *c, int forced) {
    memset(c, 0, sizeof *c);
    memset(c->def, 2, sizeof c->def);
    memcpy(c->mode, c->def, sizeof c->mode);
    c->modes[c->n_modes++] = 2;
    c->modes[c->n_modes++] = 1;
    c->state = TN_DECODE_TUNE_MEASURING;
    if (forced > 0) {
        c->state = TN_DECODE_TUNE_FORCED;
        memset(c->mode, forced, sizeof c->mode);
    }
}

void tn_decode_tune_init(tn_decode_tune *t) {
    memset(t, 0, sizeof *t);
    const int forced = tn_cpu_decode_prefetch_env();
    class_init(&t->one_row, false, forced);
    class_init(&t->batch, true, forced);
    streams_init(&t->streams, tn_cpu_decode_streams_env());
}

/* Sample n runs in the class's mode (n % k) in blocks of k that go forward
 * and back (ABBA for two, ABCCBA for three), so that a machine that speeds
 * up or slows down, and the KV cache growing under the steps, move every
 * mode alike. Each block holds one sample of each mode. */
static int sample_mode_index(const tn_prefetch_tune *c, int n) {
    const int k = c->n_modes, pos = n % k;
    return (n / k) % 2 ? k - 1 - pos : pos;
}

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
    t->sampling = NULL;
    /* One-token steps measure the prefetch modes first, then the stream
     * counts in the modes chosen. */
    tn_prefetch_tune *c = NULL;
    if (n_rows == 1)
        c = t->one_row.state == TN_DECODE_TUNE_MEASURING ? &t->one_row : &t->streams;
    else if (n_rows >= TUNE_BATCH_MIN && n_rows <= TUNE_BATCH_MAX)
        c = &t->batch;
    if (c && c->state == TN_DECODE_TUNE_MEASURING) {
        if (c != &t->batch && t->one_token_skipped < TUNE_SKIP)
            t->one_token_skipped++;
        else
            t->sampling = c;
    }
    /* Set on every call: another context (a draft model's) may have set its
     * own choice in between; the modes are process-wide. */
    uint8_t trial[TN_TYPE_COUNT_];
    if (t->sampling) {
        memset(trial, c->modes[sample_mode_index(c, c->n)], sizeof trial);
        memset(t->step_type_ms, 0, sizeof t->step_type_ms);
        t->rows = n_rows;
    }
    tn_cpu_set_prefetch_modes(t->sampling == &t->one_row ? trial : t->one_row.mode,
                              t->sampling == &t->batch ? trial : t->batch.mode);
    tn_cpu_set_decode_streams(t->sampling == &t->streams ? trial : t->streams.mode);
    return t->sampling ? tn_now_ms() : -1;
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

/* Per type: the mode with the lowest median, where it beats the type's
 * default by the margin. */
static void choose(tn_prefetch_tune *c) {
    const int S = TN_DECODE_TUNE_SAMPLES;
    for (int i = 0; i < c->n_modes; i++) {
        const int m = c->modes[i];
        c->med[m] = median(c->ms[m], 1, S);
        for (int type = 0; type < TN_TYPE_COUNT_; type++)
            c->type_med[m][type] = median(&c->type_ms[m][0][type], TN_TYPE_COUNT_, S);
    }
    for (uint32_t type = 0; type < TN_TYPE_COUNT_; type++) {
        const int def = c->def[type];
        int best = def;
        for (int i = 0; i < c->n_modes; i++) {
            const int m = c->modes[i];
            int wins = 0;
            for (int k = 0; k < S; k++)
                wins += c->type_ms[m][k][type] < c->type_ms[def][k][type];
            c->wins[m][type] = (uint8_t)wins;
            if (m != def && wins >= TUNE_MIN_WINS && c->type_med[m][type] > 0 &&
                c->type_med[m][type] < TUNE_MARGIN * c->type_med[def][type] &&
                (best == def || c->type_med[m][type] < c->type_med[best][type]))
                best = m;
        }
        c->mode[type] = (uint8_t)best;
    }
    c->state = TN_DECODE_TUNE_CHOSEN;
}

void tn_decode_tune_end(tn_decode_tune *t, double started_ms, bool ok) {
    tn_prefetch_tune *c = t->sampling;
    t->sampling = NULL;
    if (started_ms < 0 || !c || !ok)
        return;
    /* batch steps per row: their row counts differ */
    const double per = c == &t->batch ? 1.0 / t->rows : 1.0;
    const int m = c->modes[sample_mode_index(c, c->n)], slot = c->n / c->n_modes;
    c->ms[m][slot] = (tn_now_ms() - started_ms) * per;
    for (int type = 0; type < TN_TYPE_COUNT_; type++)
        c->type_ms[m][slot][type] = t->step_type_ms[type] * per;
    if (++c->n == c->n_modes * TN_DECODE_TUNE_SAMPLES)
        choose(c);
}

static void report(const tn_prefetch_tune *c, tn_prefetch_tuning *out) {
    memset(out, 0, sizeof *out);
    out->state = c->state;
    out->samples = c->n;
    memcpy(out->mode, c->mode, sizeof out->mode);
    for (int i = 0; i < c->n_modes; i++)
        out->tried[c->modes[i]] = true;
    if (c->state != TN_DECODE_TUNE_CHOSEN)
        return;
    memcpy(out->ms, c->med, sizeof out->ms);
    memcpy(out->type_ms, c->type_med, sizeof out->type_ms);
    memcpy(out->wins, c->wins, sizeof out->wins);
}

void tn_decode_tune_report(const tn_decode_tune *t, tn_decode_tuning *out) {
    report(&t->one_row, &out->decode);
    report(&t->batch, &out->batch);
    report(&t->streams, &out->streams);
}
