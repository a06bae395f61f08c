/* CPU compute for libtern: a persistent thread pool and the matrix products
 * of the forward pass.
 *
 * Batch invariance (docs/DESIGN.md): the result for one activation row
 * depends only on that row and the weights -- never on how many rows are in
 * the batch, where the row sits, or how many threads run. Work is split over
 * output rows (and heads), never over the reduction dimension, and the 1-row
 * path and every row of an N-row batch use the same arithmetic in the same
 * order. If a kernel quantizes activations (e.g. to q8 blocks), it quantizes
 * every row the same way whatever the batch.
 */
#ifndef TN_CPU_H
#define TN_CPU_H

#include <string.h>

#include "tern.h"

typedef struct tn_cpu tn_cpu;

/* A task run on every thread of the pool: ith in [0, nth). */
typedef void (*tn_task_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0 picks the number of physical cores. The calling thread is
 * one of the workers. NULL on allocation failure. */
tn_cpu *tn_cpu_new(int n_threads);
void tn_cpu_free(tn_cpu *cpu);
int tn_cpu_threads(const tn_cpu *cpu);
/* Runs fn(ctx, ith, nth) on all threads and returns when every one is done.
 * cpu == NULL runs fn(ctx, 0, 1) on the caller. */
void tn_cpu_parallel(tn_cpu *cpu, tn_task_fn fn, void *ctx);

/* What every slot of the tasks that follow runs through, on whichever
 * thread claims it (the caller's own slots included): wrap(arg, fn, ctx,
 * ith, nth) calls fn(ctx, ith, nth) once (a decode step guards its reads
 * of the mapped model file this way, engine/forward.c). NULL: the slots
 * run directly. Set by the thread that dispatches, between tasks. */
typedef void (*tn_task_wrap)(void *arg, tn_task_fn fn, void *ctx, int ith, int nth);
void tn_cpu_set_task_wrap(tn_cpu *cpu, tn_task_wrap wrap, void *arg);

/* A weight matrix as stored in the file: `rows` rows of `cols` values of
 * `type`, row r at data + r * row_bytes. */
typedef struct tn_weight {
    uint32_t type; /* tn_type */
    int64_t rows;  /* output features */
    int64_t cols;  /* input features (reduction length) */
    const void *data;
    size_t row_bytes;
    uint32_t layout; /* tn_layout; 0 (zeroed struct) = rows as in the file */
} tn_weight;

/* How a weight matrix is laid out in memory.
 *   TN_LAYOUT_ROWS  as in the GGUF file: row r at data + r * row_bytes
 *   TN_LAYOUT_X16   groups of 16 rows interleaved block by block, so that
 *                   one 512-bit register holds the same four values of 16
 *                   rows: integer dot products then need no horizontal sums
 *                   and each weight byte feeds up to 16 activation rows at
 *                   full width. Same bytes as the file (the last group is
 *                   padded to 16 rows); made by tn_weight_repack. */
typedef enum tn_layout {
    TN_LAYOUT_ROWS = 0,
    TN_LAYOUT_X16 = 1,
} tn_layout;

/* Bytes of the faster layout of w for this CPU (tn_isa_best()), or 0 when w
 * is best used in place (type without such a kernel, or no AVX-512 VNNI).
 * Repacking costs one copy of the matrix in anonymous memory; the caller
 * may then drop the file's pages of the original. */
size_t tn_weight_repack_size(const tn_weight *w);
/* Writes that layout into dst (64-byte aligned, size bytes) and describes
 * it in *out (out->data = dst). tn_matmul and tn_weight_row_f32 accept
 * either layout. A model repacks all or none of its matrices once at load:
 * the two layouts round differently (as two kernel families do), while for
 * one layout the batch-invariance guarantee holds as stated above.
 * TN_ERR_UNSUPPORTED when there is no such layout for w. */
int tn_weight_repack(const tn_weight *w, void *dst, size_t size, tn_weight *out);
/* Repacks, in place, every matrix of ws[0..n) that has a faster layout on
 * this CPU: one 64-byte aligned allocation holds them all (*storage, to
 * free() when the weights are dropped; NULL when nothing was repacked).
 * Entries with the same data (an LM head tied to the embedding) share one
 * copy; tn_weight_row_f32 reads the new layout. release_originals: the
 * originals are read-only file mappings (mmap of the GGUF) whose pages can
 * be dropped from this process (madvise), as they are not read again; never
 * pass true for heap memory. TERN_REPACK=0 in the environment turns
 * repacking off. *storage of 8 MiB or more is asked for in 2 MiB
 * transparent huge pages (madvise; a decode step streams all of it, and 4
 * KiB pages cost about a sixth of the decode speed); TERN_THP=0 keeps 4 KiB
 * pages. *bytes (optional) gets the size of *storage. TN_ERR_NOMEM leaves
 * every weight as it was. */
int tn_weights_repack(tn_weight *const *ws, int n, bool release_originals, void **storage,
                      size_t *bytes);
/* alias[i] (n entries): the first j <= i whose matrix is ws[i]'s (the same
 * data, type, layout and shape; i itself when none before it), found by
 * one sort rather than a scan per matrix: a mixture has tens of thousands.
 * *mixed (may be NULL): two matrices share data with different types or
 * shapes. False when out of memory. */
bool tn_weights_aliases(tn_weight *const *ws, int n, int *alias, bool *mixed);
/* The parts of tn_weights_repack, for a caller that provides the memory (the
 * repack cache writes straight into its file's mapping): the bytes it
 * needs, and the repack into buf (64-byte aligned, that many bytes), each
 * matrix at the next multiple of 64 in ws order, a matrix and its aliases
 * (tn_weights_aliases, taken before either call) sharing one copy. */
size_t tn_weights_repack_bytes(tn_weight *const *ws, int n, const int *alias);
/* Storage for `total` bytes of repacked weights as tn_weights_repack takes
 * it (free()): from TN_WEIGHTS_HUGE_MIN bytes on 2 MiB aligned and asked
 * for in transparent huge pages (unless TERN_THP=0), else 64-byte aligned.
 * The repack cache copies weights into it when its mapping would be slower
 * (engine/repack-cache.c). NULL when out of memory. */
#define TN_WEIGHTS_HUGE_MIN ((size_t)8 << 20)
void *tn_weights_storage_alloc(size_t total);
/* A matrix is repacked in pieces of at most piece_bytes of its rows (0:
 * whole; whole groups of 16 rows, one at least), with the same bytes as
 * whole. before_each(user, i, rows, final) (NULL: none) runs before each
 * piece of matrix ws[i], `rows` of its rows (all of them, once, for one
 * that is not repacked), when the first `final` bytes of buf are written
 * for good: a load's cancel point (tn_load_poll), which may jump out of
 * the pass between two pieces, its progress, and the new cache file's
 * writeback. */
void tn_weights_repack_into(tn_weight *const *ws, int n, const int *alias,
                            bool release_originals, uint8_t *buf, size_t piece_bytes,
                            void (*before_each)(void *user, int i, int64_t rows, size_t final),
                            void *user);

/* y[b * w->rows + r] = sum_k W[r][k] * x[b * w->cols + k] for b < n.
 * Batch-invariant as described above. May use scratch memory owned by cpu
 * (grown on demand, never freed on the hot path). Returns TN_OK, or
 * TN_ERR_UNSUPPORTED for a weight type without a kernel, TN_ERR_NOMEM. */
int tn_matmul(tn_cpu *cpu, const tn_weight *w, const float *x, int64_t n, float *y);

/* One product of a group: y[b * w->rows + r] = W x[b] for b < n. */
typedef struct tn_matmul_item {
    const tn_weight *w;
    const float *x;
    int64_t n;
    float *y;
} tn_matmul_item;

/* The products of items[0..n), each exactly as tn_matmul computes it (the
 * same kernels; a row's result never depends on how rows are chunked), but
 * with the threads handed work once for all of them rather than once per
 * product: a mixture's experts at decode are many small products, each
 * shorter than a hand-off is worth. Consecutive items that read the same
 * input (same x, n and width) share one activation conversion. No item's y
 * may overlap another item's x or y. */
int tn_matmul_group(tn_cpu *cpu, const tn_matmul_item *items, int n);

/* Row r of a weight matrix as f32 (embedding lookup). */
int tn_weight_row_f32(const tn_weight *w, int64_t r, float *out);

/* ------------------------------------------------ instruction set choice
 *
 * A pool uses one kernel family for every call and every batch size; the
 * best one the CPU has is chosen from CPUID when the pool is made. Results
 * differ (within the stated error bounds) between families, never between
 * batch sizes or thread counts of one family. TERN_ISA=scalar|avx2|avx512 in
 * the environment caps the choice (for benchmarks and bug reports). */
typedef enum tn_isa {
    TN_ISA_SCALAR = 0, /* portable C, the reference */
    TN_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    TN_ISA_AVX512 = 2, /* AVX-512 F/BW/VL/DQ + VNNI (+ BF16 when present) */
    TN_ISA_COUNT_ = 3,
} tn_isa;

const char *tn_isa_name(tn_isa isa);
/* The best family this CPU (and this build) can run. */
tn_isa tn_isa_best(void);
bool tn_isa_available(tn_isa isa);
/* True when the AVX-512 family uses the CPU's BF16 dot product. */
bool tn_isa_has_avx512_bf16(void);
tn_isa tn_cpu_isa(const tn_cpu *cpu);
/* TN_ERR_UNSUPPORTED when this CPU or build cannot run isa. */
int tn_cpu_set_isa(tn_cpu *cpu, tn_isa isa);

/* How the X16 kernels of each weight type request their weights ahead in
 * software (tn_prefetch_mode, tern.h): one mode per type for one to three
 * activation rows (decode) and one for four rows and more (a verify step, a
 * prompt). Which is fastest depends on the host and the type: one host
 * streams Q4_K's decode 30 % faster two groups ahead into L1, another 40 %
 * faster eight groups ahead into L2, and Q6_K faster with no software
 * prefetch at all (docs/PERFORMANCE.md, "Three prefetch modes"). Process-
 * wide: a context sets its own choice before each of its steps
 * (engine/decode-tune.c). Hints only: the arithmetic is the same in every
 * mode. Until set: tn_cpu_default_prefetch_mode, or what
 * TERN_DECODE_PREFETCH forces for decode. */
tn_prefetch_mode tn_cpu_default_prefetch_mode(bool batch, uint32_t type);
/* TERN_DECODE_PREFETCH as set: -1 unset or empty, else the decode mode it
 * forces ("0" or "none": none; "near": near; any other value: far). One
 * reading for the kernels' default and a context's choice. */
int tn_cpu_decode_prefetch_env(void);
tn_prefetch_mode tn_cpu_prefetch_mode(int nb, uint32_t type);
/* Every type's modes; NULL leaves that side as it is. */
void tn_cpu_set_prefetch_modes(const uint8_t one_row[TN_TYPE_COUNT_],
                               const uint8_t batch[TN_TYPE_COUNT_]);
void tn_cpu_get_prefetch_modes(uint8_t one_row[TN_TYPE_COUNT_], uint8_t batch[TN_TYPE_COUNT_]);
/* Weight streams per thread in a one-row product (decode), per weight type:
 * 2 reads two halves of each thread's rows side by side (tile_pair), which
 * overlaps the arithmetic of one with the memory wait of the other; 1 reads
 * them as one stream. Which is faster depends on the host and the type (an
 * E4B-shaped Q4_0 decode gained 10-20 %, one IQ4_XS product lost 8 %:
 * docs/PERFORMANCE.md, "Two streams per thread"), so a context measures it
 * per type (engine/decode-tune.c). The same bits either way. Process-wide,
 * as the prefetch modes; 2 until set, or what TERN_TWO_STREAMS forces. A
 * product group runs two streams only where every one of its types does. */
int tn_cpu_decode_streams(uint32_t type);
void tn_cpu_set_decode_streams(const uint8_t streams[TN_TYPE_COUNT_]);
/* TERN_TWO_STREAMS as set: -1 unset or empty, 1 for "0", else 2. */
int tn_cpu_decode_streams_env(void);
/* As tn_matmul, with an explicit family (cpu may be NULL): for tests. */
int tn_matmul_isa(tn_cpu *cpu, tn_isa isa, const tn_weight *w, const float *x, int64_t n,
                  float *y);
int tn_matmul_group_isa(tn_cpu *cpu, tn_isa isa, const tn_matmul_item *items, int n);
/* True when tn_matmul has a kernel of this family for the type (else the
 * scalar path runs it). */
bool tn_matmul_has_kernel(tn_isa isa, uint32_t type);

/* ------------------------------------------------------------ SiLU
 *
 * g[i] = silu(g[i]) * u[i], silu(x) = x / (1 + e^-x), for the gated
 * feed-forward. One arithmetic for every instruction set (act.c): e^z with z
 * = -x clamped to [-20, 88] (outside, 1 + e^z is 1, or e^z huge: silu(x) is
 * then x, or 0 within 6e-37), n = round(z log2 e) by the shift constant, r =
 * z - n ln 2 in two FMAs, a degree-7 polynomial by FMAs, 2^n by an integer
 * add into the exponent; then a division and a product, each correctly
 * rounded. The scalar reference and the AVX2 kernel agree bit for bit
 * (tested), so the family does not enter the result. Its name,
 * TN_ACT_ARITHMETIC, is part of the model's arithmetic string: every row
 * past layer 0 depends on it, so pins made with another are recomputed. */
#define TN_ACT_ARITHMETIC "silu1/gelu1"
float tn_silu_ref(float x);
void tn_silu_mul(float *g, const float *u, int64_t n);

/* ------------------------------------------------------------ GELU, tanh
 *
 * g[i] = gelu(g[i]) * u[i] with GELU's tanh form, gelu(x) = x / 2 (1 +
 * tanh(sqrt(2 / pi) (x + 0.044715 x^3))) = x / (1 + e^z), z = -2 sqrt(2 /
 * pi) (x + 0.044715 x^3): no 1 + tanh to cancel where x < 0. One arithmetic
 * for every instruction set (act.c), named "gelu1" in TN_ACT_ARITHMETIC: x
 * clamped to >= -10 (NaN kept; below, gelu is under 1.5e-37 in magnitude
 * and the result is gelu(-10) = -1.2e-37), z computed in double (x^2, times
 * the x^3 coefficient, plus the x coefficient, times x; a float z would
 * carry |z| * 2^-23 of relative error into e^z, 1e-5 at z = 80), clamped
 * to [-20, 88] (NaN -> -20), n = round(z log2 e) by the shift 1.5 * 2^52, r
 * = z - n ln 2 (double product and difference), r rounded to float, SiLU's
 * degree-7 polynomial, 2^n by an integer add into the exponent, then a float
 * division and a product. Relative error against GELU in double at most
 * 2e-7 for every x >= -10 (test `kernels`; measured 1.5e-7). llama.cpp's
 * CPU GELU reads a table indexed by x rounded to f16.
 *
 * v[i] = cap * tanh(v[i] / cap), the final logit softcap: y = v / cap
 * (correctly rounded division), w = e^(-2|y|) - 1 from z = -2|y| clamped to
 * >= -20 (where tanh rounds to 1), n, r as SiLU's (float, two FMAs), the
 * polynomial without its constant term times r (e^r - 1 without
 * cancellation), w = fma(2^n, e^r - 1, 2^n - 1); tanh|y| = -w / (2 + w),
 * the sign of y copied on, NaN returned as it came; then times cap. Relative
 * error of tanh against double at most 2.5e-7 (test `kernels`; measured
 * 1.7e-7). The scalar references and the AVX2 kernels agree bit for bit
 * (tested), so no family enters the result. */
float tn_gelu_ref(float x);
void tn_gelu_mul(float *g, const float *u, int64_t n);
float tn_tanh_ref(float y);
void tn_softcap(float *v, int64_t n, float cap);

/* ------------------------------------------------------------ attention
 *
 * Causal attention of a tile of query vectors against the keys and values
 * of ONE KV head: every query of a GQA group and of the rows of a batch that
 * read the same head share each key/value block while it is in L1.
 *
 * Keys, values and queries are bf16 (the cache holds bf16: half the bytes of
 * f32, and AVX512_BF16's VDPBF16PS does 32 multiply-adds per instruction, an
 * f32 FMA 16). Dimensions and positions go in pairs, the pair's two bf16 in
 * one 32-bit lane, low half first:
 *   keys, per block of TN_ATTN_KB positions: [head_dim / 2][16][2]
 *     (lane u of a register = key u, the pair = dimensions 2e and 2e + 1);
 *   values, per pair of positions: [head_dim][2]
 *     (lane d = dimension d, the pair = positions 2w and 2w + 1);
 *   a query: [head_dim], so its dimension pairs are 32-bit words.
 *
 * The arithmetic of one query is fixed and independent of the tile, of the
 * other queries and of the instruction set. A pair's contribution is two
 * FMAs, the pair's HIGH element first (VDPBF16PS's order on the CPUs that
 * have it; engine/cpu/attention.c checks it at run time), then the low one.
 * A score: the dimension pairs in order (unscaled: scale > 0 keeps the
 * maximum where it is). Chunks of TN_ATTN_CHUNK positions aligned to
 * position 0 in increasing order; online softmax per chunk, with c = scale
 * * log2 e rounded to float (running max of the scores, rescaling by
 * 2^(old max * c - new max * c) only when it grows: a long chunk makes the
 * rescaling rare, and lets the SIMD kernels keep the value accumulators in
 * registers for a whole chunk); a probability is 2^fma(score, c, -(max * c)), 2^x a
 * fixed polynomial with FMAs (tn-cpu-internal.h); probabilities are rounded
 * to bf16 (round to nearest even) before they weigh values or enter the
 * denominator, which is 8 partial sums (sum j takes positions 2j + 1 then 2j
 * of every 16, as VDPBF16PS adds a pair) added in a fixed tree at the end;
 * values accumulate one pair of positions at a time,
 * in order, over the pairs that hold a visible position (the other position
 * of a pair, when not visible, counts as probability 0 and value 0: stale
 * rows may hold anything). Everything runs with denormals flushed to zero
 * (MXCSR FTZ and DAZ, as VDPBF16PS always does). The scalar reference does
 * the same operations with fmaf, so the AVX2, AVX-512 (with or without BF16)
 * and scalar paths agree BITWISE (tested), and a query's output is the same
 * whatever else is in its tile: batch invariance, and pins that do not
 * depend on the kernel family. head_dim must be even. */
/* Names the arithmetic above in the model's arithmetic string: pins (whose
 * rows past layer 0 depend on it) made with another are recomputed. Change
 * it with any change to the attention's bits. */
#define TN_ATTN_ARITHMETIC "attn2"
#define TN_ATTN_KB 16 /* positions per key block */
#define TN_ATTN_TILE 8 /* queries per call at most */
#define TN_ATTN_CHUNK 256 /* positions per softmax step (a multiple of TN_ATTN_KB) */

typedef struct tn_attn_tile {
    int32_t head_dim;
    int32_t n;                       /* queries, 1..TN_ATTN_TILE */
    const uint16_t *q[TN_ATTN_TILE]; /* head_dim bf16 each */
    float *out[TN_ATTN_TILE];        /* head_dim values each */
    int64_t first[TN_ATTN_TILE];     /* visible positions [first, last] */
    int64_t last[TN_ATTN_TILE];
    const uint16_t *k;               /* the head's key blocks (position 0 first) */
    const uint16_t *v;               /* the head's value pairs (positions 0 and 1 first) */
    float scale;                     /* multiplies q.k; > 0 */
    /* Attention sinks (gpt-oss): when has_sinks, query i's softmax has one
     * more logit, sink[i] (in the units of scale * q.k), that weighs no
     * value: its denominator gains e^(sink - scale * max score), computed
     * at the end as tn_attn_inv_denom does (tn-cpu-internal.h), the same
     * for every family. A zeroed tile has none. */
    bool has_sinks;
    float sink[TN_ATTN_TILE];
} tn_attn_tile;

/* Floats of scratch tn_attention_tile needs (per thread). */
size_t tn_attention_scratch_floats(int32_t head_dim);
/* Runs the tile with the family's kernel (any family: the results are the
 * same bits; the family only sets the speed). scratch: see above. */
void tn_attention_tile(tn_isa isa, const tn_attn_tile *t, float *scratch);
/* Offset, in bf16, of key (pos, d) in a head's key blocks. */
static inline size_t tn_attn_k_index(int64_t pos, int32_t d, int32_t head_dim) {
    return (size_t)(pos / TN_ATTN_KB) * TN_ATTN_KB * (size_t)head_dim +
           (size_t)(d / 2) * (2 * TN_ATTN_KB) + (size_t)(pos % TN_ATTN_KB) * 2 + (size_t)(d & 1);
}
/* Offset, in bf16, of value (pos, d) in a head's value pairs. */
static inline size_t tn_attn_v_index(int64_t pos, int32_t d, int32_t head_dim) {
    return (size_t)(pos / 2) * 2 * (size_t)head_dim + (size_t)d * 2 + (size_t)(pos & 1);
}
/* f32 -> bf16 for the KV cache: tn_fp32_to_bf16's rounding (nearest even),
 * except that a denormal becomes a zero of its sign (the attention runs
 * with denormals flushed). */
static inline uint16_t tn_bf16_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0)
        return (uint16_t)((u >> 16) & 0x8000u);
    return tn_fp32_to_bf16(f);
}
/* tn_bf16_to_fp32, inline for the attention kernels' inner loops. */
static inline float tn_bf16_to_f32(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Reads buf[0, bytes) once on every thread of the pool (each its own
 * contiguous share, like the weights of a decode step) and returns the rate
 * in bytes per second. Make bytes many times the last-level cache. */
double tn_cpu_read_bandwidth(tn_cpu *cpu, const void *buf, size_t bytes);

/* Whether this CPU and build have the SHA extensions (with SSSE3 and
 * SSE4.1), and SHA-256's compression of n_blocks 64-byte blocks into h
 * with them (engine/cpu/sha256-shani.c; only when tn_cpu_has_sha()). */
bool tn_cpu_has_sha(void);
/* SHA-256's round constants (engine/pin-store.c, beside the scalar code). */
extern const uint32_t tn_sha256_k[64];
void tn_sha256_blocks_shani(uint32_t h[8], const uint8_t *p, size_t n_blocks);

#endif
