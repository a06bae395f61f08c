/* A streaming read over a buffer, split over the pool like a matmul: the
 * measured rate is what a memory-bound decode step can hope for. */
#include "tn-cpu-internal.h"

#include <immintrin.h>
#include <time.h>

typedef uint64_t v8u64 __attribute__((vector_size(64), aligned(8)));

/* Chunks are split as the matmul splits weight rows: a contiguous range per
 * slot, then what is left of the others' (a fixed half per thread would make
 * a descheduled thread's half the measurement and read lower than what
 * decode actually gets). */
#define READ_CHUNK ((size_t)64 << 10)

typedef struct {
    const uint8_t *buf;
    size_t bytes;
    tn_chunk_range *ranges; /* the pool's, one per slot */
    bool wide; /* AVX-512 loads: the kernels' own width reads 5-15 % faster here */
    uint64_t sums[512];
} read_job;

static uint64_t read_range(const uint8_t *p, size_t n) {
    /* Four independent sums keep several cache lines in flight. */
    v8u64 a = {0}, b = {0}, c = {0}, d = {0};
    size_t k = 0;
    for (; k + 256 <= n; k += 256) {
        a += *(const v8u64 *)(p + k);
        b += *(const v8u64 *)(p + k + 64);
        c += *(const v8u64 *)(p + k + 128);
        d += *(const v8u64 *)(p + k + 192);
    }
    uint64_t s = 0;
    for (; k < n; k++)
        s += p[k];
    a += b + c + d;
    for (int i = 0; i < 8; i++)
        s += a[i];
    return s;
}

__attribute__((target("avx512f"))) static uint64_t read_range_wide(const uint8_t *p, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    size_t k = 0;
    for (; k + 256 <= n; k += 256) {
        a = _mm512_add_epi64(a, _mm512_loadu_si512(p + k));
        b = _mm512_add_epi64(b, _mm512_loadu_si512(p + k + 64));
        c = _mm512_add_epi64(c, _mm512_loadu_si512(p + k + 128));
        d = _mm512_add_epi64(d, _mm512_loadu_si512(p + k + 192));
    }
    uint64_t s = (uint64_t)_mm512_reduce_add_epi64(
        _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
    for (; k < n; k++)
        s += p[k];
    return s;
}

static void read_task(void *ctx, int ith, int nth) {
    read_job *job = ctx;
    uint64_t s = 0;
    int step = 0;
    for (int64_t c; (c = tn_chunk_next(job->ranges, nth, ith, &step)) >= 0;) {
        const size_t off = (size_t)c * READ_CHUNK;
        const size_t n = job->bytes - off < READ_CHUNK ? job->bytes - off : READ_CHUNK;
        s += job->wide ? read_range_wide(job->buf + off, n) : read_range(job->buf + off, n);
    }
    if (ith < 512)
        job->sums[ith] = s; /* keeps the loads alive */
}

double tn_cpu_read_bandwidth(tn_cpu *cpu, const void *buf, size_t bytes) {
    if (!buf || bytes == 0)
        return 0;
    read_job job = {.buf = buf, .bytes = bytes};
    job.wide = tn_cpu_isa(cpu) == TN_ISA_AVX512;
    const int nth = tn_cpu_threads(cpu);
    tn_chunk_range one;
    job.ranges = cpu ? cpu->ranges : &one;
    tn_chunk_ranges_split(job.ranges, nth, (int64_t)((bytes + READ_CHUNK - 1) / READ_CHUNK));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tn_cpu_parallel(cpu, read_task, &job);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    volatile uint64_t sink = 0;
    for (int i = 0; i < nth && i < 512; i++)
        sink += job.sums[i];
    (void)sink;
    return s > 0 ? (double)bytes / s : 0;
}
