/* Single-thread CPU-time kernel bench: GB/s at B=1 (weights streamed from
 * DRAM: copies > 8x LLC), GFLOP/s at B=16.
 * kernels [TYPES [MODES [ROWSxCOLS [COPIES]]]] */
#include "cpu/tn-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
/* The copies in 2 MiB pages where the kernel has transparent huge pages
 * (madvise), as a model's repacked weights and bench --kernels' copies are
 * (engine/probe.c): in 4 KiB pages a TLB miss every 4 KiB holds the B = 1
 * rate from DRAM lower. */
static void *alloc_pages(size_t bytes) {
    const size_t hp = (size_t)2 << 20, n = (bytes + hp - 1) / hp * hp;
    void *p = aligned_alloc(hp, n);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}
int main(int argc, char **argv) {
    int rows = 6912, cols = 1152, copies = 48;
    const char *types = argc > 1 ? argv[1] : "q4_0,q8_0,q4_1,q5_0,q5_1";
    const char *modes = argc > 2 ? argv[2] : "scalar,avx2,avx512,x16";
    /* ROWSxCOLS (K-quants need COLS a multiple of 256, e.g. 8192x2048). */
    if (argc > 3 && sscanf(argv[3], "%dx%d", &rows, &cols) == 2 && rows * (int64_t)cols > 16000000)
        copies = 24;
    /* COPIES: 1 keeps a small matrix in L2, which shows the kernel's own
     * rate (its instructions), not the memory's. */
    if (argc > 4) copies = atoi(argv[4]) > 0 ? atoi(argv[4]) : copies;
    char tb[256]; strcpy(tb, types);
    float *x = malloc(sizeof(float) * 16 * cols), *y = malloc(sizeof(float) * 16 * rows);
    uint64_t s = 1;
    for (int i = 0; i < 16 * cols; i++) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; x[i] = ((float)(s >> 40) / (1 << 24) - 0.5f); }
    for (char *t = strtok(tb, ","); t; t = strtok(NULL, ",")) {
        uint32_t type = (uint32_t)tn_type_from_name(t);
        size_t rb = tn_type_row_bytes(type, cols), mb = rb * rows;
        uint8_t *d = alloc_pages(mb * copies);
        float *src = malloc(sizeof(float) * cols);
        for (int r = 0; r < 64; r++) { for (int k = 0; k < cols; k++) { s = s * 6364136223846793005ULL + 1442695040888963407ULL; src[k] = ((float)(s >> 40) / (1 << 24) - 0.5f) * 0.1f; } tn_quantize_row(type, src, d + r * rb, cols); }
        for (int r = 64; r < rows; r++) memcpy(d + r * rb, d + (r % 64) * rb, rb);
        for (int c = 1; c < copies; c++) memcpy(d + mb * c, d, mb);
        size_t rs = tn_weight_repack_size(&(tn_weight){.type = type, .rows = rows, .cols = cols, .data = d, .row_bytes = rb});
        uint8_t *xd = rs ? alloc_pages(((rs + 63) / 64 * 64) * copies) : NULL;
        tn_weight *xw = calloc(copies, sizeof *xw), *rw = calloc(copies, sizeof *rw);
        for (int c = 0; c < copies; c++) {
            rw[c] = (tn_weight){.type = type, .rows = rows, .cols = cols, .data = d + mb * c, .row_bytes = rb};
            if (xd) tn_weight_repack(&rw[c], xd + ((rs + 63) / 64 * 64) * c, rs, &xw[c]);
        }
        char mbuf[256]; strcpy(mbuf, modes);
        char *save;
        for (char *m = strtok_r(mbuf, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
            tn_isa isa = !strcmp(m, "scalar") ? TN_ISA_SCALAR : !strcmp(m, "avx2") ? TN_ISA_AVX2 : TN_ISA_AVX512;
            bool x16 = !strcmp(m, "x16");
            if (x16 && !xd) continue;
            tn_weight *ws = x16 ? xw : rw;
            for (int B = 1; B <= 16; B += 15) {
                int calls = B == 1 ? (isa == TN_ISA_SCALAR ? 8 : 96) : (isa == TN_ISA_SCALAR ? 2 : 24);
                if (copies == 1) /* each call is short: more of them */
                    calls *= 20;
                tn_matmul_isa(NULL, isa, &ws[0], x, B, y);
                double best = 1e9;
                for (int rep = 0; rep < 5; rep++) {
                    double t0 = now();
                    for (int i = 0; i < calls; i++) tn_matmul_isa(NULL, isa, &ws[i % copies], x, B, y);
                    double dt = (now() - t0) / calls;
                    if (dt < best) best = dt;
                }
                if (B == 1) printf("%-5s %-6s B=1  %7.3f ms  %6.1f GB/s\n", t, m, best * 1e3, mb / best / 1e9);
                else printf("%-5s %-6s B=16 %7.3f ms  %6.1f GFLOP/s\n", t, m, best * 1e3, 2.0 * rows * cols * B / best / 1e9);
                fflush(stdout);
            }
        }
        free(d); free(xd); free(src); free(xw); free(rw);
    }
    return 0;
}
