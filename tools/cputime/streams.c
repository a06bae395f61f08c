/* What DRAM gives one core when it reads S streams at once: each of T
 * threads reads its share of a 1 GiB buffer (2 MiB pages) as S equal parts,
 * 256 bytes from each part in turn, with plain AVX-512 loads and adds (no
 * other work). GB/s of wall time, best of six passes, summed over threads.
 * streams S T   (S: 1, 2, 4 or 8; T threads)
 * Build: gcc -O2 -mavx512f -mavx512bw -pthread tools/cputime/streams.c -o /tmp/streams
 * docs/PERFORMANCE.md, "Two streams per thread (session 22)". */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int n_streams, n_threads;
static size_t total;
static uint8_t *buf;
static pthread_barrier_t barrier;

typedef struct {
    int ith;
    double gbs;
    __m512i sink;
} worker;

__attribute__((noinline)) static __m512i read_streams(const uint8_t *p, size_t n, int s) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    const size_t part = n / (size_t)s / 256 * 256;
    for (size_t k = 0; k < part; k += 256)
        for (int j = 0; j < s; j++) {
            const uint8_t *q = p + (size_t)j * part + k;
            a0 = _mm512_add_epi32(a0, _mm512_load_si512(q));
            a1 = _mm512_add_epi32(a1, _mm512_load_si512(q + 64));
            a2 = _mm512_add_epi32(a2, _mm512_load_si512(q + 128));
            a3 = _mm512_add_epi32(a3, _mm512_load_si512(q + 192));
        }
    return _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
}

static void *run(void *arg) {
    worker *w = arg;
    const size_t share = total / (size_t)n_threads / 4096 * 4096;
    const uint8_t *p = buf + share * (size_t)w->ith;
    double best = 0;
    for (int pass = 0; pass < 6; pass++) {
        pthread_barrier_wait(&barrier);
        const double t0 = now();
        w->sink = _mm512_add_epi32(w->sink, read_streams(p, share, n_streams));
        const double gbs = (double)share / (now() - t0) / 1e9;
        pthread_barrier_wait(&barrier);
        if (gbs > best)
            best = gbs;
    }
    w->gbs = best;
    return NULL;
}

int main(int argc, char **argv) {
    n_streams = argc > 1 ? atoi(argv[1]) : 1;
    n_threads = argc > 2 ? atoi(argv[2]) : 1;
    if (n_streams < 1 || n_streams > 8 || n_threads < 1 || n_threads > 64) {
        fprintf(stderr, "usage: streams S T   (1 <= S <= 8, 1 <= T <= 64)\n");
        return 2;
    }
    total = (size_t)1 << 30;
    buf = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    madvise(buf, total, MADV_HUGEPAGE);
    memset(buf, 1, total);
    pthread_barrier_init(&barrier, NULL, (unsigned)n_threads);
    pthread_t tid[64];
    worker ws[64];
    memset(ws, 0, sizeof ws);
    for (int i = 0; i < n_threads; i++) {
        ws[i].ith = i;
        pthread_create(&tid[i], NULL, run, &ws[i]);
    }
    double sum = 0;
    for (int i = 0; i < n_threads; i++) {
        pthread_join(tid[i], NULL);
        sum += ws[i].gbs;
    }
    printf("%d stream(s) per thread, %d thread(s): %.1f GB/s\n", n_streams, n_threads, sum);
    return 0;
}
