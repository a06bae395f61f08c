/* Matrix products: work split and scratch (the instruction sets: isa.c).
 *
 * Batch invariance lives here as much as in the kernels: work is split over
 * output rows only (never over the reduction), every activation row is
 * converted by the same function whatever the batch, and a kernel computes
 * output (b, r) with the same instructions in the same order whichever tile,
 * chunk or thread it falls in. So the chunk schedule is free to be dynamic:
 * threads take chunks of rows from a shared counter, which keeps both cores
 * busy on a machine where other work steals one now and then. */
#include "tn-cpu-internal.h"

#include "tn-internal.h"

#include <stdlib.h>
#include <string.h>

/* [0]: one to three activation rows, [1]: four and more; per weight type. */
static _Atomic uint8_t prefetch_modes[2][TN_TYPE_COUNT_];
static atomic_bool prefetch_modes_set = false; /* defaults and environment applied */

tn_prefetch_mode tn_cpu_default_prefetch_mode(bool batch, uint32_t type) {
    /* The modes each family used before they were measured per context:
     * far at one row (Q8_0 none); at several rows the Q4_0 family near (a 16-row verify
     * step 25-30 % faster than none), the K-quants far. */
    if (!batch) /* Q8_0's stream, twice the bytes per instruction, measured the same */
        return type == TN_TYPE_Q8_0 ? TN_PREFETCH_NONE : TN_PREFETCH_FAR;
    switch (type) {
    case TN_TYPE_Q2_K: case TN_TYPE_Q3_K: case TN_TYPE_Q4_K: case TN_TYPE_Q5_K:
    case TN_TYPE_Q6_K: case TN_TYPE_IQ4_XS:
        return TN_PREFETCH_FAR;
    default:
        return TN_PREFETCH_NEAR;
    }
}

int tn_cpu_decode_prefetch_env(void) {
    const char *e = getenv("TERN_DECODE_PREFETCH");
    if (!e || !*e)
        return -1;
    if (strcmp(e, "0") == 0 || strcmp(e, "none") == 0)
        return TN_PREFETCH_NONE;
    return strcmp(e, "near") == 0 ? TN_PREFETCH_NEAR : TN_PREFETCH_FAR;
}

static void prefetch_modes_init(void) {
    if (atomic_load_explicit(&prefetch_modes_set, memory_order_acquire))
        return;
    const int forced = tn_cpu_decode_prefetch_env();
    for (uint32_t t = 0; t < TN_TYPE_COUNT_; t++) {
        atomic_store_explicit(&prefetch_modes[0][t],
                              (uint8_t)(forced >= 0 ? forced : (int)tn_cpu_default_prefetch_mode(false, t)),
                              memory_order_relaxed);
        atomic_store_explicit(&prefetch_modes[1][t], (uint8_t)tn_cpu_default_prefetch_mode(true, t),
                              memory_order_relaxed);
    }
    atomic_store_explicit(&prefetch_modes_set, true, memory_order_release);
}

tn_prefetch_mode tn_cpu_prefetch_mode(int nb, uint32_t type) {
    prefetch_modes_init();
    if (type >= TN_TYPE_COUNT_)
        return TN_PREFETCH_FAR;
    return (tn_prefetch_mode)atomic_load_explicit(&prefetch_modes[nb >= TN_X16_PREFETCH_MIN_ROWS][type],
                                                  memory_order_relaxed);
}

void tn_cpu_set_prefetch_modes(const uint8_t one_row[TN_TYPE_COUNT_],
                               const uint8_t batch[TN_TYPE_COUNT_]) {
    prefetch_modes_init();
    for (int t = 0; t < TN_TYPE_COUNT_; t++) {
        if (one_row)
            atomic_store_explicit(&prefetch_modes[0][t], one_row[t], memory_order_relaxed);
        if (batch)
            atomic_store_explicit(&prefetch_modes[1][t], batch[t], memory_order_relaxed);
    }
}

void tn_cpu_get_prefetch_modes(uint8_t one_row[TN_TYPE_COUNT_], uint8_t batch[TN_TYPE_COUNT_]) {
    prefetch_modes_init();
    for (int t = 0; t < TN_TYPE_COUNT_; t++) {
        one_row[t] = atomic_load_explicit(&prefetch_modes[0][t], memory_order_relaxed);
        batch[t] = atomic_load_explicit(&prefetch_modes[1][t], memory_order_relaxed);
    }
}

tn_isa tn_cpu_isa(const tn_cpu *cpu) { return cpu ? cpu->isa : tn_isa_best(); }

int tn_cpu_set_isa(tn_cpu *cpu, tn_isa isa) {
    if (!cpu)
        return TN_ERR_INVALID;
    if (!tn_isa_available(isa))
        return TN_ERR_UNSUPPORTED;
    cpu->isa = isa;
    return TN_OK;
}

/* The kernels a family uses for a type and layout: its own, else the next
 * family down's (an AVX-512 machine runs the AVX2 kernel of a type that has
 * no AVX-512 one), else the scalar reference. */
static void get_ops(tn_isa isa, uint32_t type, uint32_t layout, tn_mm_ops *ops) {
    memset(ops, 0, sizeof *ops);
#if defined(TN_CPU_X86)
    if (isa >= TN_ISA_AVX512 && tn_mm_ops_avx512(ops, type, layout))
        return;
    memset(ops, 0, sizeof *ops);
    if (isa >= TN_ISA_AVX2 && tn_mm_ops_avx2(ops, type, layout))
        return;
    memset(ops, 0, sizeof *ops);
#else
    (void)isa;
    (void)layout;
#endif
    tn_mm_ops_scalar(ops, type);
}

bool tn_matmul_has_kernel(tn_isa isa, uint32_t type) {
    tn_mm_ops ops;
    memset(&ops, 0, sizeof ops);
    switch (isa) {
    case TN_ISA_SCALAR:
        tn_mm_ops_scalar(&ops, type);
        return ops.tile != NULL;
#if defined(TN_CPU_X86)
    case TN_ISA_AVX2:
        return tn_mm_ops_avx2(&ops, type, TN_LAYOUT_ROWS);
    case TN_ISA_AVX512:
        return tn_mm_ops_avx512(&ops, type, TN_LAYOUT_ROWS);
#endif
    default:
        return false;
    }
}

/* ------------------------------------------------------------- the driver */

typedef struct mm_job {
    tn_mm mm;
    tn_mm_ops ops;
    int64_t chunk_rows;
    int64_t n_chunks;
} mm_job;

/* Products handed to the threads at once (tn_matmul_group); a longer group
 * runs as several sections. */
#define MM_GROUP_MAX 64

typedef struct mm_group {
    mm_job jobs[MM_GROUP_MAX];
    int n;
    /* jobs[j]'s chunks are [first[j], first[j + 1]) of the section's; its
     * rows to convert [conv[j], conv[j + 1]) (none when it shares another
     * job's activations or reads f32). */
    int64_t first[MM_GROUP_MAX + 1];
    int64_t conv[MM_GROUP_MAX + 1];
    tn_chunk_range *ranges; /* one per slot; NULL: a single thread runs all */
    bool paired; /* ranges holds two halves per slot, read side by side (tile_pair) */
} mm_group;

static void convert_task(void *ctx, int ith, int nth) {
    mm_group *g = ctx;
    int j = 0;
    for (int64_t f = ith; f < g->conv[g->n]; f += nth) {
        while (f >= g->conv[j + 1])
            j++;
        const mm_job *job = &g->jobs[j];
        const int64_t b = f - g->conv[j], cols = job->mm.w->cols;
        job->ops.convert(job->mm.x + b * cols, (uint8_t *)job->mm.act + b * job->mm.act_row, cols);
    }
}

static void run_chunk(const mm_job *job, void *thr, int64_t c) {
    const int64_t r0 = c * job->chunk_rows;
    int64_t r1 = r0 + job->chunk_rows;
    if (r1 > job->mm.w->rows)
        r1 = job->mm.w->rows;
    /* Tiles of activations inside a chunk of weight rows: the chunk stays
     * in cache while every tile of a long prompt passes over it. */
    for (int64_t b0 = 0; b0 < job->mm.n; b0 += TN_MM_TILE) {
        int64_t nb = job->mm.n - b0;
        if (nb > TN_MM_TILE)
            nb = TN_MM_TILE;
        job->ops.tile(&job->mm, thr, r0, r1, b0, (int)nb);
    }
}

int tn_cpu_decode_streams_env(void) {
    const char *e = getenv("TERN_TWO_STREAMS");
    if (!e || !*e)
        return -1;
    return strcmp(e, "0") == 0 ? 1 : 2;
}

/* Weight streams per thread at one activation row, per weight type: 2 runs
 * tile_pair where the type has one. */
static _Atomic uint8_t decode_streams[TN_TYPE_COUNT_];
static atomic_bool decode_streams_set = false; /* default and environment applied */

static void decode_streams_init(void) {
    if (atomic_load_explicit(&decode_streams_set, memory_order_acquire))
        return;
    const int forced = tn_cpu_decode_streams_env();
    for (uint32_t t = 0; t < TN_TYPE_COUNT_; t++)
        atomic_store_explicit(&decode_streams[t], (uint8_t)(forced > 0 ? forced : 2),
                              memory_order_relaxed);
    atomic_store_explicit(&decode_streams_set, true, memory_order_release);
}

int tn_cpu_decode_streams(uint32_t type) {
    decode_streams_init();
    return type < TN_TYPE_COUNT_ ? atomic_load_explicit(&decode_streams[type], memory_order_relaxed)
                                 : 1;
}

void tn_cpu_set_decode_streams(const uint8_t streams[TN_TYPE_COUNT_]) {
    decode_streams_init();
    for (int t = 0; t < TN_TYPE_COUNT_; t++)
        atomic_store_explicit(&decode_streams[t], streams[t] == 1 ? 1 : 2, memory_order_relaxed);
}

/* The job that section chunk c belongs to; *j is a hint (the last one). */
static const mm_job *job_at(const mm_group *g, int64_t c, int *j) {
    if (c < g->first[*j])
        *j = 0;
    while (c >= g->first[*j + 1])
        ++*j;
    return &g->jobs[*j];
}

static void *thread_scratch(const mm_job *job, int ith) {
    return job->mm.thr ? (uint8_t *)job->mm.thr + (size_t)ith * job->mm.thr_stride : NULL;
}

static void chunk_rows(const mm_job *job, int64_t c, int64_t *r0, int64_t *r1) {
    *r0 = c * job->chunk_rows;
    *r1 = *r0 + job->chunk_rows < job->mm.w->rows ? *r0 + job->chunk_rows : job->mm.w->rows;
}

/* Decode (every product one activation row, tile_pair): each slot's range
 * is two halves read side by side, chunk i of the front with chunk i of the
 * back, each half in order; a thread that finishes its own halves takes
 * what is left of the others'. */
static void matmul_task_paired(mm_group *g, tn_chunk_range *ranges, int ith, int nth) {
    int step_a = 0, step_b = 0, ja = 0, jb = 0;
    for (;;) {
        const int64_t ca = tn_chunk_next(ranges, nth, ith, &step_a);
        const int64_t cb = tn_chunk_next(ranges + nth, nth, ith, &step_b);
        if (ca < 0 && cb < 0)
            break;
        const mm_job *a = ca >= 0 ? job_at(g, ca, &ja) : NULL;
        const mm_job *b = cb >= 0 ? job_at(g, cb, &jb) : NULL;
        int64_t ra0 = 0, ra1 = 0, rb0 = 0, rb1 = 0;
        if (a)
            chunk_rows(a, ca - g->first[ja], &ra0, &ra1);
        if (b)
            chunk_rows(b, cb - g->first[jb], &rb0, &rb1);
        if (a && b && a->ops.tile_pair == b->ops.tile_pair) {
            a->ops.tile_pair(&a->mm, ra0, ra1, &b->mm, rb0, rb1);
            continue;
        }
        if (a)
            a->ops.tile(&a->mm, thread_scratch(a, ith), ra0, ra1, 0, 1);
        if (b)
            b->ops.tile(&b->mm, thread_scratch(b, ith), rb0, rb1, 0, 1);
    }
}

/* Each slot owns a contiguous range of the section's chunks and takes them
 * in order: its weights are one stream, which the hardware prefetcher
 * follows and the kernels' own prefetch runs ahead in (with chunks handed
 * out alternately, the prefetch past a chunk's end fetched the other
 * thread's next chunk, and every claim moved one shared cache line between
 * the cores). A thread that finishes its range then takes what is left of
 * the others', so one slowed by other work on the machine holds no one up. */
static void matmul_task(void *ctx, int ith, int nth) {
    mm_group *g = ctx;
    tn_chunk_range all[2];
    tn_chunk_range *ranges = g->ranges;
    if (!ranges) { /* one thread */
        nth = 1;
        ranges = all;
        if (g->paired)
            tn_chunk_ranges_split_halves(all, 1, g->first[g->n]);
        else
            tn_chunk_ranges_split(all, 1, g->first[g->n]);
    }
    if (g->paired) {
        matmul_task_paired(g, ranges, ith, nth);
        return;
    }
    int step = 0, j = 0;
    for (int64_t c; (c = tn_chunk_next(ranges, nth, ith, &step)) >= 0;) {
        const mm_job *job = job_at(g, c, &j);
        run_chunk(job, thread_scratch(job, ith), c - g->first[j]);
    }
}

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

/* Grows a scratch buffer; contents are not kept. */
static bool grow(void **buf, size_t *cap, size_t need) {
    if (need <= *cap)
        return true;
    size_t cap2 = round_up(need + need / 4, TN_CACHE_LINE);
    void *p = aligned_alloc(TN_CACHE_LINE, cap2);
    if (!p)
        return false;
    free(*buf);
    *buf = p;
    *cap = cap2;
    return true;
}

static int check_weight(const tn_weight *w) {
    if (!w || !w->data || w->rows < 0 || w->cols <= 0)
        return TN_ERR_INVALID;
    if (!tn_type_supported(w->type))
        return TN_ERR_UNSUPPORTED;
    size_t bs = tn_type_block_size(w->type);
    if (!bs || w->cols % (int64_t)bs != 0)
        return TN_ERR_INVALID;
    size_t rb = tn_type_row_bytes(w->type, (uint64_t)w->cols);
    if (!rb || w->row_bytes < rb)
        return TN_ERR_INVALID;
    if (w->layout != TN_LAYOUT_ROWS &&
        (w->layout != TN_LAYOUT_X16 || !tn_x16_group_bytes(w->type, w->cols) || w->row_bytes != rb))
        return TN_ERR_INVALID;
    return TN_OK;
}

/* One section: items[0..n) with n <= MM_GROUP_MAX, already checked. */
static int run_group(tn_cpu *cpu, tn_isa isa, const tn_matmul_item *items, int n) {
    mm_group g; /* 9 KiB: filled as far as used, not cleared per product */
    g.n = 0;
    g.ranges = NULL;
    g.paired = true;
    const int nth = tn_cpu_threads(cpu);
    uint64_t act_bytes = 0, thr_stride = 0, rows_total = 0;
    int64_t conv_rows = 0;
    for (int i = 0; i < n; i++) {
        const tn_matmul_item *it = &items[i];
        if (it->n == 0 || it->w->rows == 0)
            continue;
        mm_job *job = &g.jobs[g.n];
        *job = (mm_job){0};
        get_ops(isa, it->w->type, it->w->layout, &job->ops);
        if (!job->ops.tile)
            return TN_ERR_UNSUPPORTED;
        job->mm.w = it->w;
        job->mm.x = it->x;
        job->mm.y = it->y;
        job->mm.n = it->n;
        g.conv[g.n] = conv_rows;
        if (job->ops.convert) {
            job->mm.act_row = round_up(job->ops.act_bytes(it->w->cols), TN_CACHE_LINE);
            /* Rows a multiple of 4 KiB apart share L1 sets: 16 of them
             * thrash an 8-way cache. One line of padding spreads them. */
            if (job->mm.act_row % 4096 == 0)
                job->mm.act_row += TN_CACHE_LINE;
            const mm_job *prev = g.n > 0 ? &g.jobs[g.n - 1] : NULL;
            /* q/k/v, gate/up: products of one input convert it once. */
            job->mm.act = NULL;
            if (prev && prev->mm.x == it->x && prev->mm.n == it->n &&
                prev->mm.w->cols == it->w->cols && prev->ops.convert == job->ops.convert &&
                prev->mm.act_row == job->mm.act_row) {
                job->mm.act = prev->mm.act; /* an offset until the buffer exists */
            } else {
                uint64_t bytes;
                if (!tn_mul_u64((uint64_t)it->n, job->mm.act_row, &bytes) ||
                    act_bytes + bytes < act_bytes)
                    return TN_ERR_NOMEM;
                job->mm.act = (void *)(uintptr_t)act_bytes;
                act_bytes += bytes;
                conv_rows += it->n;
            }
        }
        if (job->ops.thr_bytes) {
            uint64_t s = round_up(job->ops.thr_bytes(it->w->cols), TN_CACHE_LINE);
            thr_stride = s > thr_stride ? s : thr_stride;
        }
        rows_total += (uint64_t)it->w->rows;
        /* a group in which any type runs one stream runs in one stream */
        if (it->n != 1 || !job->ops.tile_pair || tn_cpu_decode_streams(it->w->type) < 2)
            g.paired = false;
        g.n++;
    }
    g.conv[g.n] = conv_rows;
    if (g.n == 0)
        return TN_OK;
    uint64_t thr_bytes = 0;
    if (!tn_mul_u64((uint64_t)nth, thr_stride, &thr_bytes) || act_bytes > SIZE_MAX / 2 ||
        thr_bytes > SIZE_MAX / 2)
        return TN_ERR_NOMEM;

    void *act = NULL, *thr = NULL;
    size_t act_cap = 0, thr_cap = 0;
    void **act_p = cpu ? &cpu->act : &act;
    size_t *act_cap_p = cpu ? &cpu->act_cap : &act_cap;
    void **thr_p = cpu ? &cpu->thr : &thr;
    size_t *thr_cap_p = cpu ? &cpu->thr_cap : &thr_cap;
    if ((act_bytes && !grow(act_p, act_cap_p, (size_t)act_bytes)) ||
        (thr_bytes && !grow(thr_p, thr_cap_p, (size_t)thr_bytes))) {
        free(act);
        free(thr);
        return TN_ERR_NOMEM;
    }

    /* Chunks of about 64 KiB of weights (they stay in L2 while the tiles of
     * a long batch pass), but at least four per thread over the section so
     * that a thread slowed by other work on the machine does not hold the
     * rest up. */
    const int64_t fair = (int64_t)((rows_total + (uint64_t)nth * 4 - 1) / ((uint64_t)nth * 4));
    int64_t chunks = 0;
    for (int j = 0; j < g.n; j++) {
        mm_job *job = &g.jobs[j];
        if (job->ops.convert)
            job->mm.act = (uint8_t *)*act_p + (uintptr_t)job->mm.act;
        job->mm.thr = thr_bytes ? *thr_p : NULL;
        job->mm.thr_stride = (size_t)thr_stride;
        int64_t chunk = (int64_t)(65536 / job->mm.w->row_bytes);
        if (chunk > fair)
            chunk = fair;
        if (chunk > 4)
            chunk = chunk / 4 * 4;
        if (job->ops.row_align > 1)
            chunk = (chunk + job->ops.row_align - 1) / job->ops.row_align * job->ops.row_align;
        if (chunk < 1)
            chunk = 1;
        job->chunk_rows = chunk;
        job->n_chunks = (job->mm.w->rows + chunk - 1) / chunk;
        g.first[j] = chunks;
        chunks += job->n_chunks;
    }
    g.first[g.n] = chunks;

    /* A decode step's rows are converted faster than the workers wake up; a
     * prompt's rows are spread over the pool. */
    if (conv_rows >= 4 && nth > 1)
        tn_cpu_parallel(cpu, convert_task, &g);
    else if (conv_rows > 0)
        convert_task(&g, 0, 1);

    if (cpu && nth > 1) {
        if (g.paired)
            tn_chunk_ranges_split_halves(cpu->ranges, nth, chunks);
        else
            tn_chunk_ranges_split(cpu->ranges, nth, chunks);
        g.ranges = cpu->ranges; /* published by the dispatch's store */
    }
    tn_cpu_parallel(cpu, matmul_task, &g);

    free(act);
    free(thr);
    return TN_OK;
}

int tn_matmul_group_isa(tn_cpu *cpu, tn_isa isa, const tn_matmul_item *items, int n) {
    if (n < 0 || (n > 0 && !items))
        return TN_ERR_INVALID;
    for (int i = 0; i < n; i++) {
        int rc = check_weight(items[i].w);
        if (rc != TN_OK)
            return rc;
        if (items[i].n < 0 || (items[i].n > 0 && (!items[i].x || !items[i].y)))
            return TN_ERR_INVALID;
    }
    if (!tn_isa_available(isa))
        return TN_ERR_UNSUPPORTED;
    for (int i = 0; i < n; i += MM_GROUP_MAX) {
        int rc = run_group(cpu, isa, items + i, n - i < MM_GROUP_MAX ? n - i : MM_GROUP_MAX);
        if (rc != TN_OK)
            return rc;
    }
    return TN_OK;
}

int tn_matmul_group(tn_cpu *cpu, const tn_matmul_item *items, int n) {
    return tn_matmul_group_isa(cpu, tn_cpu_isa(cpu), items, n);
}

int tn_matmul_isa(tn_cpu *cpu, tn_isa isa, const tn_weight *w, const float *x, int64_t n,
                  float *y) {
    const tn_matmul_item item = {.w = w, .x = x, .n = n, .y = y};
    return tn_matmul_group_isa(cpu, isa, &item, 1);
}

int tn_matmul(tn_cpu *cpu, const tn_weight *w, const float *x, int64_t n, float *y) {
    return tn_matmul_isa(cpu, tn_cpu_isa(cpu), w, x, n, y);
}

int tn_weight_row_f32(const tn_weight *w, int64_t r, float *out) {
    int rc = check_weight(w);
    if (rc != TN_OK)
        return rc;
    if (!out || r < 0 || r >= w->rows)
        return TN_ERR_INVALID;
    if (w->layout == TN_LAYOUT_ROWS)
        return tn_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes,
                                 out, w->cols);
    /* An embedding lookup in an interleaved matrix (an LM head tied to the
     * embedding): gather the row's blocks, then dequantize them, as many
     * blocks at a time as this buffer holds. No heap buffer: a decode
     * step runs this under its guard (engine/forward.c), whose jump on a
     * file cut short under the read would lose one (16 KiB and more for a
     * long row, once per model). */
    uint8_t stack[16384];
    const int64_t bc = tn_weight_row_block_cols(w), nblk = w->cols / bc;
    const size_t bb = nblk > 0 ? w->row_bytes / (size_t)nblk : 0;
    if (nblk <= 0 || bb == 0 || bb > sizeof stack || nblk * bc != w->cols)
        return TN_ERR_INVALID;
    const int64_t per = (int64_t)(sizeof stack / bb);
    for (int64_t b0 = 0; b0 < nblk && rc == TN_OK; b0 += per) {
        const int64_t nb = nblk - b0 < per ? nblk - b0 : per;
        rc = tn_dequantize_row(w->type, tn_weight_row_raw_part(w, r, b0, nb, stack),
                               out + b0 * bc, nb * bc);
    }
    return rc;
}
