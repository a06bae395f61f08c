/* tn_weights_repack's storage for a model-sized matrix: asked for in 2 MiB
 * pages (aligned to 2 MiB) unless TERN_THP=0, with the same bytes either
 * way, and products unchanged bit for bit. Whether the kernel actually gave
 * huge pages depends on its THP setting and on fragmentation, so that is
 * printed, not checked. */
#include "tn-test.h"

#include "cpu/tn-cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define ROWS 8192 /* Q4_0 8192 x 2048: 9.4 MB, above the 8 MiB threshold */
#define COLS 2048

/* kB of AnonHugePages in the mapping that holds p (/proc/self/smaps), or -1. */
static long huge_kb_at(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    bool in = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

int main(void) {
    uint64_t rng = 0x7a9e;
    const size_t rb = tn_type_row_bytes(TN_TYPE_Q4_0, COLS);
    uint8_t *data = malloc(rb * ROWS);
    float *src = malloc(sizeof(float) * COLS);
    float *x = malloc(sizeof(float) * 2 * COLS);
    float *y1 = malloc(sizeof(float) * 2 * ROWS), *y2 = malloc(sizeof(float) * 2 * ROWS);
    tn_cpu *cpu = tn_cpu_new(2);
    if (!data || !src || !x || !y1 || !y2 || !cpu) {
        CHECKF(0, "out of memory");
        goto out;
    }
    for (int r = 0; r < ROWS; r++) {
        for (int k = 0; k < COLS; k++)
            src[k] = 0.03f * tn_test_randf(&rng);
        CHECK(tn_quantize_row(TN_TYPE_Q4_0, src, data + (size_t)r * rb, COLS) == TN_OK);
    }
    for (int k = 0; k < 2 * COLS; k++)
        x[k] = tn_test_randf(&rng);
    const tn_weight orig = {.type = TN_TYPE_Q4_0, .rows = ROWS, .cols = COLS, .data = data,
                            .row_bytes = rb};
    if (tn_weight_repack_size(&orig) == 0) {
        fprintf(stderr, "no faster layout on this CPU: nothing is repacked\n");
        goto out;
    }

    tn_weight huge_w = orig, small_w = orig;
    tn_weight *one[1] = {&huge_w};
    void *huge = NULL, *small = NULL;
    size_t huge_bytes = 0, small_bytes = 0;
    unsetenv("TERN_THP");
    CHECK(tn_weights_repack(one, 1, false, &huge, &huge_bytes) == TN_OK);
    setenv("TERN_THP", "0", 1);
    one[0] = &small_w;
    CHECK(tn_weights_repack(one, 1, false, &small, &small_bytes) == TN_OK);
    unsetenv("TERN_THP");
    if (huge && small) {
        CHECKF((uintptr_t)huge % (2u << 20) == 0, "storage at %p is not 2 MiB aligned", huge);
        CHECK(huge_bytes == small_bytes && huge_bytes >= (size_t)8 << 20);
        CHECK(memcmp(huge, small, huge_bytes) == 0);
        CHECK(huge_w.layout == TN_LAYOUT_X16 && small_w.layout == TN_LAYOUT_X16);
        CHECK(tn_matmul(cpu, &huge_w, x, 2, y1) == TN_OK);
        CHECK(tn_matmul(cpu, &small_w, x, 2, y2) == TN_OK);
        CHECK(memcmp(y1, y2, sizeof(float) * 2 * ROWS) == 0);
        fprintf(stderr, "huge pages under the storage: %ld kB of %zu (TERN_THP=0: %ld kB)\n",
                huge_kb_at(huge), huge_bytes / 1024, huge_kb_at(small));
    }
    free(huge);
    free(small);
out:
    tn_cpu_free(cpu);
    free(data);
    free(src);
    free(x);
    free(y1);
    free(y2);
    return tn_test_finish("repack-pages");
}
