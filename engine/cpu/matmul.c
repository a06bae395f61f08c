/* Matrix products: instruction-set choice, work split and scratch.
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

/* ------------------------------------------------------ instruction sets */

const char *tn_isa_name(tn_isa isa) {
    switch (isa) {
    case TN_ISA_SCALAR:
        return "scalar";
    case TN_ISA_AVX2:
        return "avx2";
    case TN_ISA_AVX512:
        return "avx512";
    default:
        return "unknown";
    }
}

#if defined(TN_CPU_X86)
#include <cpuid.h>
/* clang 14's __builtin_cpu_supports does not know "f16c": ask CPUID (leaf 1, ECX bit 29). */
static bool cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

static bool cpu_has_uncached(tn_isa isa);

/* CPUID answers never change: asked once per family, then read on every
 * matmul. */
static bool cpu_has(tn_isa isa) {
    static atomic_int cache[TN_ISA_COUNT_]; /* 0 unknown, 1 no, 2 yes */
    if (isa < TN_ISA_SCALAR || isa >= TN_ISA_COUNT_)
        return false;
    int c = atomic_load_explicit(&cache[isa], memory_order_relaxed);
    if (c == 0) {
        c = cpu_has_uncached(isa) ? 2 : 1;
        atomic_store_explicit(&cache[isa], c, memory_order_relaxed);
    }
    return c == 2;
}

static bool cpu_has_uncached(tn_isa isa) {
#if defined(TN_CPU_X86)
    __builtin_cpu_init();
    switch (isa) {
    case TN_ISA_SCALAR:
        return true;
    case TN_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               cpu_has_f16c();
    case TN_ISA_AVX512:
        return cpu_has_uncached(TN_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
    default:
        return false;
    }
#else
    return isa == TN_ISA_SCALAR;
#endif
}

bool tn_isa_available(tn_isa isa) { return isa >= TN_ISA_SCALAR && isa < TN_ISA_COUNT_ && cpu_has(isa); }

bool tn_isa_has_avx512_bf16(void) {
#if defined(TN_CPU_X86) && defined(TN_CPU_AVX512_BF16)
    __builtin_cpu_init();
    return cpu_has(TN_ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

tn_isa tn_isa_best(void) {
    tn_isa best = TN_ISA_SCALAR;
    for (int i = TN_ISA_COUNT_ - 1; i > 0; i--)
        if (cpu_has((tn_isa)i)) {
            best = (tn_isa)i;
            break;
        }
    const char *cap = getenv("TERN_ISA");
    if (cap && *cap)
        for (int i = 0; i < TN_ISA_COUNT_; i++)
            if (!strcmp(cap, tn_isa_name((tn_isa)i)) && (tn_isa)i < best)
                best = (tn_isa)i;
    return best;
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
    atomic_llong *next; /* NULL: one thread walks every chunk */
} mm_job;

static void convert_task(void *ctx, int ith, int nth) {
    mm_job *job = ctx;
    const int64_t cols = job->mm.w->cols;
    for (int64_t b = ith; b < job->mm.n; b += nth)
        job->ops.convert(job->mm.x + b * cols, (uint8_t *)job->mm.act + b * job->mm.act_row, cols);
}

static void run_chunk(mm_job *job, void *thr, int64_t c) {
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

static void matmul_task(void *ctx, int ith, int nth) {
    mm_job *job = ctx;
    void *thr = job->mm.thr ? (uint8_t *)job->mm.thr + (size_t)ith * job->mm.thr_stride : NULL;
    if (!job->next) {
        for (int64_t c = ith; c < job->n_chunks; c += nth)
            run_chunk(job, thr, c);
        return;
    }
    for (;;) {
        int64_t c = atomic_fetch_add_explicit(job->next, 1, memory_order_relaxed);
        if (c >= job->n_chunks)
            break;
        run_chunk(job, thr, c);
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

int tn_matmul_isa(tn_cpu *cpu, tn_isa isa, const tn_weight *w, const float *x, int64_t n,
                  float *y) {
    int rc = check_weight(w);
    if (rc != TN_OK)
        return rc;
    if (n < 0 || (n > 0 && (!x || !y)))
        return TN_ERR_INVALID;
    if (!tn_isa_available(isa))
        return TN_ERR_UNSUPPORTED;
    if (n == 0 || w->rows == 0)
        return TN_OK;

    mm_job job;
    memset(&job, 0, sizeof job);
    get_ops(isa, w->type, w->layout, &job.ops);
    if (!job.ops.tile)
        return TN_ERR_UNSUPPORTED;
    const int nth = tn_cpu_threads(cpu);
    job.mm.w = w;
    job.mm.x = x;
    job.mm.y = y;
    job.mm.n = n;

    uint64_t act_bytes = 0, thr_bytes = 0;
    if (job.ops.convert) {
        job.mm.act_row = round_up(job.ops.act_bytes(w->cols), TN_CACHE_LINE);
        /* Rows a multiple of 4 KiB apart share L1 sets: 16 of them thrash an
         * 8-way cache. One line of padding spreads them. */
        if (job.mm.act_row % 4096 == 0)
            job.mm.act_row += TN_CACHE_LINE;
        if (!tn_mul_u64((uint64_t)n, job.mm.act_row, &act_bytes))
            return TN_ERR_NOMEM;
    }
    if (job.ops.thr_bytes) {
        job.mm.thr_stride = round_up(job.ops.thr_bytes(w->cols), TN_CACHE_LINE);
        if (!tn_mul_u64((uint64_t)nth, job.mm.thr_stride, &thr_bytes))
            return TN_ERR_NOMEM;
    }
    if (act_bytes > SIZE_MAX / 2 || thr_bytes > SIZE_MAX / 2)
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
    job.mm.act = act_bytes ? *act_p : NULL;
    job.mm.thr = thr_bytes ? *thr_p : NULL;

    if (job.ops.convert) {
        /* A decode step's single row is converted faster than the workers
         * wake up; a prompt's rows are spread over the pool. */
        if (n >= 4 && nth > 1)
            tn_cpu_parallel(cpu, convert_task, &job);
        else
            convert_task(&job, 0, 1);
    }

    /* Chunks of about 64 KiB of weights (they stay in L2 while the tiles of
     * a long batch pass), but at least four per thread so that a thread
     * slowed by other work on the machine does not hold the rest up. */
    int64_t chunk = (int64_t)(65536 / w->row_bytes);
    int64_t fair = (w->rows + (int64_t)nth * 4 - 1) / ((int64_t)nth * 4);
    if (chunk > fair)
        chunk = fair;
    if (chunk > 4)
        chunk = chunk / 4 * 4;
    if (job.ops.row_align > 1)
        chunk = (chunk + job.ops.row_align - 1) / job.ops.row_align * job.ops.row_align;
    if (chunk < 1)
        chunk = 1;
    job.chunk_rows = chunk;
    job.n_chunks = (w->rows + chunk - 1) / chunk;
    if (cpu && nth > 1) {
        atomic_store_explicit(&cpu->next_chunk, 0, memory_order_relaxed);
        job.next = &cpu->next_chunk;
    }
    tn_cpu_parallel(cpu, matmul_task, &job);

    free(act);
    free(thr);
    return TN_OK;
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
     * embedding): gather the row's blocks first. */
    uint8_t stack[16384];
    uint8_t *tmp = w->row_bytes <= sizeof stack ? stack : malloc(w->row_bytes);
    if (!tmp)
        return TN_ERR_NOMEM;
    rc = tn_dequantize_row(w->type, tn_weight_row_raw(w, r, tmp), out, w->cols);
    if (tmp != stack)
        free(tmp);
    return rc;
}
