/* Single-thread CPU-time bench of one X16 tile kernel alone: the
 * activations are converted once, outside the timing, so the figure is the
 * kernel's (tools/cputime/kernels.c converts them in every call). Weights
 * in one copy: with ROWSxCOLS small enough they stay in L2.
 * tile [ROWS [COLS [B [CALLS [TYPE]]]]]   (default 256 4096 16 500 q6_K) */
#define TN_CPU_X86 /* declares tn_mm_ops_avx512 */
#include "cpu/tn-cpu.h"
#include "cpu/tn-cpu-internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    const int rows = argc > 1 ? atoi(argv[1]) : 256, cols = argc > 2 ? atoi(argv[2]) : 4096;
    const int B = argc > 3 ? atoi(argv[3]) : 16, calls = argc > 4 ? atoi(argv[4]) : 500;
    const char *tname = argc > 5 ? argv[5] : "q6_K";
    const int type = tn_type_from_name(tname);
    if (type < 0 || rows < 16 || rows % 16 || cols < 256 || cols % 256 || B < 1 || B > 16 || calls < 1) {
        fprintf(stderr, "usage: tile [ROWS (multiple of 16) [COLS (of 256) [B (1-16) [CALLS [TYPE]]]]]\n");
        return 2;
    }
    const size_t rb = tn_type_row_bytes((uint32_t)type, cols);
    uint8_t *d = aligned_alloc(64, (rb * rows + 63) / 64 * 64);
    float *src = malloc(sizeof(float) * cols), *x = malloc(sizeof(float) * 16 * cols), *y = malloc(sizeof(float) * 16 * rows);
    uint64_t s = 1;
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < cols; k++) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; src[k] = ((float)(s >> 40) / (1 << 24) - 0.5f) * 0.1f; }
        tn_quantize_row((uint32_t)type, src, d + (size_t)r * rb, cols);
    }
    for (int i = 0; i < 16 * cols; i++) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; x[i] = ((float)(s >> 40) / (1 << 24) - 0.5f); }
    tn_weight w = {.type = (uint32_t)type, .rows = rows, .cols = cols, .data = d, .row_bytes = rb}, xw;
    const size_t rs = tn_weight_repack_size(&w);
    tn_mm_ops ops;
    memset(&ops, 0, sizeof ops);
    uint8_t *xd = rs ? aligned_alloc(64, (rs + 63) / 64 * 64) : NULL;
    if (!xd || tn_weight_repack(&w, xd, rs, &xw) != TN_OK || !tn_mm_ops_avx512(&ops, (uint32_t)type, TN_LAYOUT_X16) || !ops.convert) {
        fprintf(stderr, "%s: no AVX-512 X16 kernel here\n", tname);
        return 1;
    }
    const size_t ab = ops.act_bytes(cols);
    uint8_t *act = aligned_alloc(64, (ab * 16 + 63) / 64 * 64);
    for (int b = 0; b < 16; b++) ops.convert(x + (size_t)b * cols, act + ab * b, cols);
    const size_t tb = ops.thr_bytes ? ops.thr_bytes(cols) : 0;
    void *thr = tb ? aligned_alloc(64, (tb + 63) / 64 * 64) : NULL;
    tn_mm mm = {.w = &xw, .x = x, .act = act, .act_row = ab, .y = y, .n = B, .thr = thr, .thr_stride = tb};
    ops.tile(&mm, thr, 0, rows, 0, B);
    double best = 1e9;
    for (int rep = 0; rep < 7; rep++) {
        const double t0 = now();
        for (int i = 0; i < calls; i++) ops.tile(&mm, thr, 0, rows, 0, B);
        const double dt = (now() - t0) / calls;
        if (dt < best) best = dt;
    }
    printf("%s %dx%d B=%d %.2f us %.1f GFLOP/s\n", tname, rows, cols, B, best * 1e6, 2.0 * rows * cols * B / best / 1e9);
    free(d); free(src); free(x); free(y); free(xd); free(act); free(thr);
    return 0;
}
