/* Internals of the CPU backend: the pool object, the scratch it owns and the
 * kernel tables each instruction set provides. */
#ifndef TN_CPU_INTERNAL_H
#define TN_CPU_INTERNAL_H

#include "tn-cpu.h"

#include <math.h>
#include <stdatomic.h>
#include <pthread.h>

/* The most activation rows one kernel call handles; bigger batches are
 * split into tiles of this many rows. */
#define TN_MM_TILE 16

/* Cache-line sized padding keeps the pool's hot counters from sharing a
 * line with each other (false sharing costs more than the dispatch). */
#define TN_CACHE_LINE 64

#define TN_SLOT_BITS 10 /* up to 1023 threads */
#define TN_SLOT_MASK ((1u << TN_SLOT_BITS) - 1)

typedef struct tn_worker {
    tn_cpu *cpu;
    pthread_t thread;
    int ith;
} tn_worker;

/* The chunks [next, end) of one slot of a parallel section (a matmul's, the
 * bandwidth probe's read). Its owner takes them in order; a thread whose own
 * range is spent takes them too. */
typedef struct {
    _Alignas(TN_CACHE_LINE) atomic_llong next;
    int64_t end;
} tn_chunk_range;

/* Chunks [0, chunks) as n contiguous ranges of (almost) equal length. */
static inline void tn_chunk_ranges_split(tn_chunk_range *r, int n, int64_t chunks) {
    for (int i = 0; i < n; i++) {
        atomic_store_explicit(&r[i].next, chunks * i / n, memory_order_relaxed);
        r[i].end = chunks * (i + 1) / n;
    }
}

/* As tn_chunk_ranges_split, each slot's range cut in two: r[i] is slot i's
 * front half, r[n + i] its back half (2n entries). */
static inline void tn_chunk_ranges_split_halves(tn_chunk_range *r, int n, int64_t chunks) {
    for (int i = 0; i < n; i++) {
        const int64_t s = chunks * i / n, e = chunks * (i + 1) / n, m = s + (e - s + 1) / 2;
        atomic_store_explicit(&r[i].next, s, memory_order_relaxed);
        r[i].end = m;
        atomic_store_explicit(&r[n + i].next, m, memory_order_relaxed);
        r[n + i].end = e;
    }
}

/* The next chunk for the owner of ranges[own] (of n): from its own range,
 * then from what is left of the others' in turn; -1 when none is left.
 * *step starts at 0 and belongs to the caller. Within one range the chunks
 * come in increasing order. */
static inline int64_t tn_chunk_next(tn_chunk_range *ranges, int n, int own, int *step) {
    for (; *step < n; ++*step) {
        tn_chunk_range *r = &ranges[(own + *step) % n];
        const int64_t c = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
        if (c < r->end)
            return c;
    }
    return -1;
}

struct tn_cpu {
    int n_threads;
    tn_isa isa;
    tn_worker *workers; /* n_threads - 1 background threads */

    /* The task being run; written by the caller before `state` moves. */
    tn_task_fn fn;
    void *ctx;
    tn_task_wrap wrap; /* tn_cpu_set_task_wrap's, or NULL */
    void *wrap_arg;

    /* Dispatch state: generation << TN_SLOT_BITS | next unclaimed slot.
     * Threads (the caller included) claim slots 0..n-1 of a task with a
     * compare-and-swap, so a worker that the OS has not scheduled yet does
     * not hold the caller up: the caller runs that slot itself. */
    _Alignas(TN_CACHE_LINE) atomic_uint state;
    _Alignas(TN_CACHE_LINE) atomic_uint done; /* slots finished this generation */
    _Alignas(TN_CACHE_LINE) atomic_int sleepers; /* workers waiting on `state` */
    atomic_int caller_sleeping;
    atomic_bool stop;
    int64_t spin_ns;

    /* Scratch grown on demand by tn_matmul (on the calling thread, before
     * dispatch) and never shrunk: converted activations, then per-thread
     * buffers for the scalar path's dequantized rows. */
    void *act;
    size_t act_cap;
    void *thr;
    size_t thr_cap;

    /* A section's chunks, one contiguous range per slot, or two (front and
     * back halves) when a slot reads two streams (2 * n_threads entries, one
     * cache line each): tn_matmul's and the bandwidth probe's split. */
    tn_chunk_range *ranges;
};

/* One matmul as seen by a kernel. */
typedef struct tn_mm {
    const tn_weight *w;
    const float *x;   /* [n, cols] f32 activations */
    const void *act;  /* the activations converted by ops->convert, or NULL */
    size_t act_row;   /* bytes of one converted row */
    float *y;         /* [n, rows] */
    int64_t n;
    void *thr;        /* per-thread scratch, thr_stride bytes each */
    size_t thr_stride;
} tn_mm;

/* The kernels of one weight type on one instruction set. */
typedef struct tn_mm_ops {
    /* Activation conversion (quantization) of one row of `cols` values into
     * act_bytes(cols) bytes; NULL when the kernel reads f32 directly. Every
     * row is converted the same way whatever the batch: that is half of
     * batch invariance. */
    size_t (*act_bytes)(int64_t cols);
    void (*convert)(const float *x, void *dst, int64_t cols);
    /* Per-thread scratch bytes, 0 if none. */
    size_t (*thr_bytes)(int64_t cols);
    /* Chunks of rows handed to tile() start at a multiple of this (0 = 1). */
    int row_align;
    /* y[b][r] for r in [r0, r1), b in [b0, b0 + nb), nb <= TN_MM_TILE. The
     * other half: the arithmetic for (b, r) does not depend on nb, b0, r0
     * or r1. */
    void (*tile)(const tn_mm *mm, void *thr, int64_t r0, int64_t r1, int64_t b0, int nb);
    /* Optional, for one activation row (decode) and kernels that need no
     * scratch: tile() of rows [ra0, ra1) of a and [rb0, rb1) of b (the same
     * ops), the two ranges' weights read side by side. Two streams per core
     * keep DRAM busier than one while the kernel works on what has arrived
     * (docs/PERFORMANCE.md, "Two streams per thread"); every y comes out as
     * tile() computes it. */
    void (*tile_pair)(const tn_mm *a, int64_t ra0, int64_t ra1, const tn_mm *b, int64_t rb0,
                      int64_t rb1);
} tn_mm_ops;

/* From this many activation rows on (a verify step, a prompt) the X16
 * kernels use the batch prefetch mode of their weight type, below it the
 * one-row (decode) mode (tn_cpu_prefetch_mode). */
#define TN_X16_PREFETCH_MIN_ROWS 4

/* Kernel tables: fill ops for a weight type and layout and return true, or
 * return false (no kernel in that family). The scalar table takes every
 * type libtern can dequantize, in every layout. */
void tn_mm_ops_scalar(tn_mm_ops *ops, uint32_t type);
#if defined(TN_CPU_X86)
bool tn_mm_ops_avx2(tn_mm_ops *ops, uint32_t type, uint32_t layout);
bool tn_mm_ops_avx512(tn_mm_ops *ops, uint32_t type, uint32_t layout);
/* The X16 kernels of Q2_K, Q3_K and IQ4_XS (kernels-avx512-x16k.c); false
 * for other types. */
bool tn_mm_ops_avx512_x16k2(tn_mm_ops *ops, uint32_t type);
#if defined(TN_CPU_AVX512_BF16)
bool tn_mm_ops_avx512bf16(tn_mm_ops *ops, uint32_t type);
#endif
#endif

#if defined(TN_CPU_X86)
/* How many chunks ahead the 4-bit X16 kernels (Q4_0, IQ4_NL, MXFP4)
 * prefetch in the near mode (TN_X16_PREFETCH_NEAR_4BIT unless set; 1 to
 * 64): for
 * tools/cputime/ab-decode.c, which compares two distances step by step. */
void tn_cpu_set_4bit_near_chunks(int chunks);
#endif

/* Attention kernels (attention*.c): false when the family cannot run this
 * head size (then the scalar reference runs it, with the same result). */
void tn_attention_scalar(const tn_attn_tile *t, float *scratch);
#if defined(TN_CPU_X86)
bool tn_attention_avx2(const tn_attn_tile *t, float *scratch);
bool tn_attention_avx512(const tn_attn_tile *t, float *scratch);
#if defined(TN_CPU_AVX512_BF16)
bool tn_attention_avx512bf16(const tn_attn_tile *t, float *scratch);
/* True when this CPU's VDPBF16PS rounds like the reference's FMA pairs. */
bool tn_attention_avx512bf16_selftest(void);
#endif
#endif

/* A bf16 pair (two consecutive bf16, the first in the low half) as one
 * 32-bit word: how the kernels load a query or value pair. */
static inline uint32_t tn_attn_pair_at(const uint16_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 16;
}

/* a + x.hi * y.hi + x.lo * y.lo, in that order, each product an FMA: the
 * reference's pair (tn-cpu.h), and VDPBF16PS's arithmetic. */
static inline float tn_attn_dot_pair(float a, uint32_t x, uint32_t y) {
    a = fmaf(tn_bf16_to_f32((uint16_t)(x >> 16)), tn_bf16_to_f32((uint16_t)(y >> 16)), a);
    return fmaf(tn_bf16_to_f32((uint16_t)x), tn_bf16_to_f32((uint16_t)y), a);
}

/* A tile's view of chunk ch (positions j0 .. j0 + TN_ATTN_CHUNK - 1): the
 * offsets oa..oz (multiples of TN_ATTN_KB) of the chunk's blocks that some
 * query sees, and each query's visible positions u0[i]..u1[i] in the chunk
 * (u0 > u1: none). pmin, pmax: the tile's first and last visible position. */
typedef struct tn_attn_chunk {
    int64_t j0, oa, oz;
    int64_t u0[TN_ATTN_TILE], u1[TN_ATTN_TILE];
} tn_attn_chunk;

static inline void tn_attn_chunk_at(const tn_attn_tile *t, int64_t pmin, int64_t pmax, int64_t ch,
                                    tn_attn_chunk *c) {
    const int64_t j0 = ch * TN_ATTN_CHUNK, end = TN_ATTN_CHUNK - 1;
    c->j0 = j0;
    c->oa = (j0 > pmin ? 0 : pmin - j0) / TN_ATTN_KB * TN_ATTN_KB;
    c->oz = (pmax - j0 < end ? pmax - j0 : end) / TN_ATTN_KB * TN_ATTN_KB;
    for (int i = 0; i < t->n; i++) {
        c->u0[i] = 1;
        c->u1[i] = 0;
        if (t->first[i] > j0 + end || t->last[i] < j0)
            continue;
        c->u0[i] = t->first[i] > j0 ? t->first[i] - j0 : 0;
        c->u1[i] = t->last[i] - j0 < end ? t->last[i] - j0 : end;
    }
}

/* The pair (1, 1): tn_attn_dot_pair(a, x, TN_ATTN_PAIR_ONES) adds x's high
 * then low element to a, as one VDPBF16PS does for 8 lanes. */
#define TN_ATTN_PAIR_ONES 0x3f803f80u

/* The 32-bit mask that keeps the visible positions of value pair w of a
 * block whose visible positions are [u0, u1]: low half position 2w, high
 * half 2w + 1 (a hidden one may hold anything, NaN included). */
static inline uint32_t tn_attn_pair_keep(int64_t w, int64_t u0, int64_t u1) {
    return (2 * w >= u0 ? 0x0000ffffu : 0) | (2 * w + 1 <= u1 ? 0xffff0000u : 0);
}

/* The exponential of the attention kernels, 2^x for x <= 0 (0 below -125
 * and for -inf): the softmax's scale and log2(e) fold into the one FMA that
 * makes x from a raw score. n = round(x) by adding 1.5 * 2^23 (the sum's
 * low mantissa bits are then n, which shifted left by 23 is n in the
 * exponent field), r = x - n in [-0.5, 0.5], 2^r by a degree-4 polynomial
 * (coefficients fitted for the least maximum relative error, 3e-6: the
 * probabilities it makes are rounded to bf16, 2e-3, right after), and the
 * result's exponent raised by n with an integer add (x >= -125 keeps it
 * normal). Every operation is a correctly rounded float op (FMAs explicit)
 * or integer arithmetic, so each family computes the same bits. Five FMA
 * unit operations a score where the natural-base form took nine (session
 * 4); the attention kernel runs on those units. */
#define TN_EXP_LOG2E 1.44269504088896341f
#define TN_EXP2_SHIFT 12582912.0f /* 1.5 * 2^23 */
#define TN_EXP2_MIN -125.0f
#define TN_EXP2_C4 0.009582987055182457f
#define TN_EXP2_C3 0.0559048093855381f
#define TN_EXP2_C2 0.24024087190628052f
#define TN_EXP2_C1 0.6931243538856506f

/* 1 / the softmax denominator of query i of a tile: the sum l of its
 * probabilities (relative to its running maximum score m, c = scale *
 * log2 e), plus, with attention sinks, the sink's own term 2^(sink log2 e -
 * m c): the explicit fmaf and the double exp2 make it the same bits in
 * every family's file, whatever each compiler contracts. Without sinks
 * exactly 1 / l, as before sinks existed. */
static inline float tn_attn_inv_denom(const tn_attn_tile *t, int i, float l, float m, float c) {
    if (!t->has_sinks)
        return 1.0f / l;
    const float x = fmaf(t->sink[i], TN_EXP_LOG2E, -(m * c));
    return (float)(1.0 / ((double)l + exp2((double)x)));
}

/* SiLU's constants (tn-cpu.h, act.c): the clamp of z = -x, log2 e, the
 * rounding shift 1.5 * 2^23, ln 2 as a high part with 16 trailing zero bits
 * plus the rest, and the Taylor coefficients 1/k! of e^r rounded to float. */
#define TN_SILU_ZMIN -20.0f
#define TN_SILU_ZMAX 88.0f
#define TN_SILU_LOG2E 1.44269502f
#define TN_SILU_SHIFT 12582912.0f
#define TN_SILU_LN2_HI 0.693145751953125f
#define TN_SILU_LN2_LO 1.42860677e-06f
#define TN_SILU_C2 0.5f
#define TN_SILU_C3 0.166666672f
#define TN_SILU_C4 0.0416666679f
#define TN_SILU_C5 0.00833333377f
#define TN_SILU_C6 0.00138888892f
#define TN_SILU_C7 0.000198412701f
/* GELU-tanh's (tn-cpu.h, act.c): the clamp of x from below, z's
 * coefficients -2 sqrt(2 / pi) and -2 sqrt(2 / pi) * 0.044715 in double,
 * z's clamp, and the double rounding shift 1.5 * 2^52 with log2 e and ln 2
 * in double; the polynomial is SiLU's. */
#define TN_GELU_XMIN -10.0f
#define TN_GELU_K1 -1.5957691216057308
#define TN_GELU_K3 -0.07135481627260025
#define TN_GELU_ZMIN -20.0
#define TN_GELU_ZMAX 88.0
#define TN_GELU_LOG2E 1.4426950408889634
#define TN_GELU_LN2 0.6931471805599453
#define TN_GELU_SHIFT 6755399441055744.0
#if defined(TN_CPU_X86)
void tn_silu_mul_avx2(float *g, const float *u, int64_t n);
void tn_gelu_mul_avx2(float *g, const float *u, int64_t n);
void tn_softcap_avx2(float *v, int64_t n, float cap);
#endif

/* The X16 layout (repack.c): quant bytes of one block for 16 rows (0: the
 * type has no such layout), the f16 header of a pair of blocks (scales,
 * then mins where the type has them), and bytes of one group of 16 rows. */
size_t tn_x16_quant_bytes(uint32_t type);
size_t tn_x16_header_bytes(uint32_t type);
size_t tn_x16_group_bytes(uint32_t type, int64_t cols);
/* K-quants: bytes of one super-block's chunk for 16 rows (0: not a K-quant
 * with an X16 layout). */
size_t tn_x16_kq_chunk_bytes(uint32_t type);
/* Row r in the file's block format: a pointer into w (rows layout) or into
 * tmp (w->row_bytes bytes), gathered from an interleaved layout. */
const uint8_t *tn_weight_row_raw(const tn_weight *w, int64_t r, uint8_t *tmp);
/* An interleaved (X16) row in pieces: the columns of one block of the
 * gathered row (256 for K-quants, 32 otherwise), and blocks [b0, b0 + nb)
 * of row r gathered into tmp (nb blocks of w->row_bytes / (cols / that)
 * bytes each). tn_weight_row_f32 gathers a long row through a buffer on
 * its stack this way, so that nothing of its own is lost when a guarded
 * step (a file cut short under it) jumps out of it. */
int64_t tn_weight_row_block_cols(const tn_weight *w);
const uint8_t *tn_weight_row_raw_part(const tn_weight *w, int64_t r, int64_t b0, int64_t nb,
                                      uint8_t *tmp);

#endif
