/* Wall time of tn_matmul on a pool of N threads, the product as a model
 * runs it (activation conversion, the pool's dispatch and its split of the
 * chunks), over COPIES copies of one repacked weight so that the weights
 * come from DRAM. Prints the distribution of the per-call times: this VM's
 * memory rate moves within seconds, so compare two builds by alternating
 * runs, not by one figure.
 * pool ROWS COLS B CALLS TYPE THREADS [COPIES]   (PF=0|1|2: every type's
 * prefetch mode, none, near or far; unset: the defaults) */
#define TN_CPU_X86
#include "cpu/tn-cpu.h"
#include "cpu/tn-cpu-internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: pool ROWS COLS B CALLS TYPE THREADS [COPIES]\n");
        return 2;
    }
    const int rows = atoi(argv[1]), cols = atoi(argv[2]), B = atoi(argv[3]), calls = atoi(argv[4]);
    const int type = tn_type_from_name(argv[5]), nth = atoi(argv[6]);
    const int copies = argc > 7 ? atoi(argv[7]) : 40;
    if (type < 0 || rows < 1 || cols < 256 || cols % 256 || B < 1 || calls < 4 || copies < 1) {
        fprintf(stderr, "pool: bad arguments (COLS a multiple of 256, CALLS >= 4)\n");
        return 2;
    }
    const size_t rb = tn_type_row_bytes((uint32_t)type, cols);
    uint8_t *d = aligned_alloc(64, (rb * rows + 63) / 64 * 64);
    float *src = malloc(sizeof(float) * cols), *x = malloc(sizeof(float) * B * cols);
    float *y = malloc(sizeof(float) * B * rows);
    double *ts = malloc(sizeof(double) * calls);
    uint64_t s = 1;
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            src[k] = ((float)(s >> 40) / (1 << 24) - 0.5f) * 0.1f;
        }
        tn_quantize_row((uint32_t)type, src, d + (size_t)r * rb, cols);
    }
    for (int i = 0; i < B * cols; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = ((float)(s >> 40) / (1 << 24) - 0.5f);
    }
    tn_weight w = {.type = (uint32_t)type, .rows = rows, .cols = cols, .data = d, .row_bytes = rb};
    size_t rs = tn_weight_repack_size(&w);
    const bool repack = rs > 0;
    if (!repack)
        rs = rb * rows;
    rs = (rs + 63) / 64 * 64;
    uint8_t *big = aligned_alloc(2 << 20, (rs * copies + (2 << 20) - 1) / (2 << 20) * (2 << 20));
    tn_weight *ws = malloc(sizeof *ws * copies);
    for (int c = 0; c < copies; c++) {
        if (repack) {
            tn_weight_repack(&w, big + rs * c, rs, &ws[c]);
        } else {
            memcpy(big + rs * c, d, rb * rows);
            ws[c] = w;
            ws[c].data = big + rs * c;
        }
    }
    if (getenv("PF")) {
        uint8_t modes[TN_TYPE_COUNT_];
        memset(modes, atoi(getenv("PF")), sizeof modes);
        tn_cpu_set_prefetch_modes(modes, modes);
    }
    tn_cpu *cpu = tn_cpu_new(nth);
    tn_matmul(cpu, &ws[0], x, B, y);
    for (int rep = 0; rep < 3; rep++) {
        const double t00 = now();
        for (int i = 0; i < calls; i++) {
            const double t0 = now();
            tn_matmul(cpu, &ws[i % copies], x, B, y);
            ts[i] = now() - t0;
        }
        const double avg = (now() - t00) / calls;
        qsort(ts, calls, sizeof *ts, cmp_double);
        const double flop = 2.0 * rows * cols * B, med = ts[calls / 2];
        printf("%s %dx%d B=%d threads %d: us per call min %.1f p25 %.1f median %.1f p75 %.1f avg %.1f;"
               " median %.1f GB/s of weights, %.0f GFLOP/s\n",
               argv[5], rows, cols, B, tn_cpu_threads(cpu), ts[0] * 1e6, ts[calls / 4] * 1e6, med * 1e6,
               ts[calls * 3 / 4] * 1e6, avg * 1e6, (double)tn_type_row_bytes((uint32_t)type, cols) * rows / med / 1e9,
               flop / med / 1e9);
    }
    tn_cpu_free(cpu);
    free(ws); free(big); free(ts); free(y); free(x); free(src); free(d);
    return 0;
}
