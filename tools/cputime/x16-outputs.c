/* Writes the AVX-512 products of every X16 type, B = 1..16 activation rows,
 * as raw float bytes to stdout: built against two libraries (before and
 * after a kernel change), `cmp` of the two outputs says whether every
 * result bit stayed the same (docs/PERFORMANCE.md, session 14).
 *   x16-outputs > a.bin; (other build) x16-outputs > b.bin; cmp a.bin b.bin */
#include "cpu/tn-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static uint64_t s = 88172645463325252ull;
static float rnd(void) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(s >> 40) / (1 << 24) - 0.5f;
}
int main(void) {
    static const char *types[] = {"q4_0", "q8_0", "q4_1", "q5_0", "q5_1", "iq4_nl",
                                  "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs"};
    /* Rows not a multiple of 16 (the last group's masked store); the second
     * shape runs the one-row kernels over many chunks (the prefetch). */
    static const int shapes[][2] = {{50, 512}, {40, 2048}, {17, 4096}};
    size_t total = 0;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++) {
            const uint32_t type = (uint32_t)tn_type_from_name(types[t]);
            const int rows = shapes[sh][0], cols = shapes[sh][1];
            const size_t rb = tn_type_row_bytes(type, cols);
            uint8_t *d = malloc(rb * rows);
            float *src = malloc(sizeof(float) * cols), *x = malloc(sizeof(float) * 16 * cols),
                  *y = malloc(sizeof(float) * 16 * rows);
            for (int r = 0; r < rows; r++) {
                const float scale = 0.02f + 0.01f * (r % 7);
                for (int k = 0; k < cols; k++)
                    src[k] = rnd() * scale + (r % 3 == 0 ? 0.01f : 0.0f);
                tn_quantize_row(type, src, d + (size_t)r * rb, cols);
            }
            for (int i = 0; i < 16 * cols; i++)
                x[i] = rnd() * (i % 97 == 0 ? 40.0f : 1.0f);
            tn_weight w = {.type = type, .rows = rows, .cols = cols, .data = d, .row_bytes = rb}, xw;
            const size_t rs = tn_weight_repack_size(&w);
            if (!rs) {
                fprintf(stderr, "%s: no X16 layout\n", types[t]);
                return 1;
            }
            uint8_t *xd = aligned_alloc(64, (rs + 63) / 64 * 64);
            if (tn_weight_repack(&w, xd, rs, &xw) != 0) {
                fprintf(stderr, "%s: repack failed\n", types[t]);
                return 1;
            }
            for (int B = 1; B <= 16; B++) {
                memset(y, 0, sizeof(float) * 16 * rows);
                if (tn_matmul_isa(NULL, TN_ISA_AVX512, &xw, x, B, y) != 0) {
                    fprintf(stderr, "%s: matmul failed\n", types[t]);
                    return 1;
                }
                fwrite(y, sizeof(float), (size_t)B * rows, stdout);
                total += (size_t)B * rows;
            }
            free(d); free(src); free(x); free(y); free(xd);
        }
    fprintf(stderr, "%zu floats\n", total);
    return 0;
}
