/* A streaming read over a buffer, split over the pool like a matmul: the
 * measured rate is what a memory-bound decode step can hope for. */
#include "tn-cpu-internal.h"

#include <time.h>

typedef uint64_t v8u64 __attribute__((vector_size(64), aligned(8)));

typedef struct {
    const uint8_t *buf;
    size_t bytes;
    uint64_t sums[512];
} read_job;

static void read_task(void *ctx, int ith, int nth) {
    read_job *job = ctx;
    size_t share = job->bytes / (size_t)nth / 256 * 256;
    const uint8_t *p = job->buf + share * (size_t)ith;
    if (ith == nth - 1)
        share = job->bytes - share * (size_t)ith;
    /* Four independent sums keep several cache lines in flight. */
    v8u64 a = {0}, b = {0}, c = {0}, d = {0};
    size_t k = 0;
    for (; k + 256 <= share; k += 256) {
        a += *(const v8u64 *)(p + k);
        b += *(const v8u64 *)(p + k + 64);
        c += *(const v8u64 *)(p + k + 128);
        d += *(const v8u64 *)(p + k + 192);
    }
    uint64_t s = 0;
    for (; k < share; k++)
        s += p[k];
    a += b + c + d;
    for (int i = 0; i < 8; i++)
        s += a[i];
    job->sums[ith] = s; /* keeps the loads alive */
}

double tn_cpu_read_bandwidth(tn_cpu *cpu, const void *buf, size_t bytes) {
    if (!buf || bytes == 0)
        return 0;
    read_job job = {.buf = buf, .bytes = bytes};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tn_cpu_parallel(cpu, read_task, &job);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    volatile uint64_t sink = 0;
    for (int i = 0; i < tn_cpu_threads(cpu) && i < 512; i++)
        sink += job.sums[i];
    (void)sink;
    return s > 0 ? (double)bytes / s : 0;
}
