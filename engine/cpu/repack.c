/* The interleaved X16 layout (tn-cpu.h): made from, and read back into, the
 * file's row layout.
 *
 * For a group of 16 rows and a pair of 32-value blocks (k = 2kk, 2kk + 1):
 *   64 bytes      f16 scales: 16 rows of block 2kk, then 16 of block 2kk + 1
 *   2 x QB bytes  quants of block 2kk, then 2kk + 1, as 64-byte registers
 *                 whose 4-byte lane i belongs to row i:
 *     Q4_0 (QB = 256): register p = 0..3, lane i = qs[4p .. 4p + 3] of row i
 *                      (low nibbles: values 4p.., high: values 16 + 4p..)
 *     Q8_0 (QB = 512): register j = 0..7, lane i = qs[4j .. 4j + 3] of row i,
 *                      stored + 128 (as unsigned bytes) for VNNI
 * Missing rows (past the last) and a missing odd block are zero. */
#include "tn-cpu-internal.h"

#include "tn-quant.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

size_t tn_x16_quant_bytes(uint32_t type) {
    switch (type) {
    case TN_TYPE_Q4_0:
        return 256;
    case TN_TYPE_Q8_0:
        return 512;
    default:
        return 0;
    }
}

size_t tn_x16_group_bytes(uint32_t type, int64_t cols) {
    size_t qb = tn_x16_quant_bytes(type);
    int64_t npairs = (cols / 32 + 1) / 2;
    return qb ? (size_t)npairs * (64 + 2 * qb) : 0;
}

static bool x16_possible(const tn_weight *w) {
    return w && w->data && w->layout == TN_LAYOUT_ROWS && w->rows > 0 && w->cols > 0 &&
           w->cols % 32 == 0 && tn_x16_quant_bytes(w->type) &&
           w->row_bytes >= tn_type_row_bytes(w->type, (uint64_t)w->cols);
}

static bool repack_enabled(void) {
    const char *e = getenv("TERN_REPACK");
    return !(e && !strcmp(e, "0"));
}

size_t tn_weight_repack_size(const tn_weight *w) {
    if (!x16_possible(w) || tn_isa_best() < TN_ISA_AVX512 || !repack_enabled())
        return 0;
    return (size_t)((w->rows + 15) / 16) * tn_x16_group_bytes(w->type, w->cols);
}

int tn_weight_repack(const tn_weight *w, void *dst, size_t size, tn_weight *out) {
    if (!x16_possible(w))
        return TN_ERR_UNSUPPORTED;
    const size_t need = (size_t)((w->rows + 15) / 16) * tn_x16_group_bytes(w->type, w->cols);
    if (!dst || !out || size < need || ((uintptr_t)dst & 63))
        return TN_ERR_INVALID;
    memset(dst, 0, need);
    const bool q8 = w->type == TN_TYPE_Q8_0;
    const size_t qb = tn_x16_quant_bytes(w->type), bb = q8 ? 34 : 18, chunk = 64 + 2 * qb;
    const int64_t nblk = w->cols / 32;
    const size_t group = tn_x16_group_bytes(w->type, w->cols);
    for (int64_t r = 0; r < w->rows; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        uint8_t *g = (uint8_t *)dst + (size_t)(r / 16) * group;
        const int i = (int)(r % 16);
        for (int64_t k = 0; k < nblk; k++) {
            const uint8_t *blk = row + (size_t)k * bb;
            uint8_t *c = g + (size_t)(k / 2) * chunk;
            const int h = (int)(k % 2);
            memcpy(c + 32 * h + 2 * i, blk, 2);
            uint8_t *q = c + 64 + (size_t)h * qb;
            for (int reg = 0; reg < (q8 ? 8 : 4); reg++)
                for (int t = 0; t < 4; t++) {
                    uint8_t v = blk[2 + 4 * reg + t];
                    q[64 * reg + 4 * i + t] = q8 ? (uint8_t)(v ^ 0x80) : v;
                }
        }
    }
    *out = *w;
    out->data = dst;
    out->layout = TN_LAYOUT_X16;
    return TN_OK;
}

const uint8_t *tn_weight_row_raw(const tn_weight *w, int64_t r, uint8_t *tmp) {
    if (w->layout == TN_LAYOUT_ROWS)
        return (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    const bool q8 = w->type == TN_TYPE_Q8_0;
    const size_t qb = tn_x16_quant_bytes(w->type), bb = q8 ? 34 : 18, chunk = 64 + 2 * qb;
    const int64_t nblk = w->cols / 32;
    const uint8_t *g = (const uint8_t *)w->data + (size_t)(r / 16) * tn_x16_group_bytes(w->type, w->cols);
    const int i = (int)(r % 16);
    for (int64_t k = 0; k < nblk; k++) {
        uint8_t *blk = tmp + (size_t)k * bb;
        const uint8_t *c = g + (size_t)(k / 2) * chunk;
        const int h = (int)(k % 2);
        memcpy(blk, c + 32 * h + 2 * i, 2);
        const uint8_t *q = c + 64 + (size_t)h * qb;
        for (int reg = 0; reg < (q8 ? 8 : 4); reg++)
            for (int t = 0; t < 4; t++) {
                uint8_t v = q[64 * reg + 4 * i + t];
                blk[2 + 4 * reg + t] = q8 ? (uint8_t)(v ^ 0x80) : v;
            }
    }
    return tmp;
}

/* Drops the pages wholly inside [p, p + n) from this process: they are
 * file-backed and read-only, so a later read would just fault them in. */
static void release_pages(const void *p, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~((uintptr_t)ps - 1);
    if (e > a)
        madvise((void *)a, e - a, MADV_DONTNEED);
}

int tn_weights_repack(tn_weight *const *ws, int n, bool release_originals, void **storage,
                      size_t *bytes) {
    if (!storage || n < 0 || (n > 0 && !ws))
        return TN_ERR_INVALID;
    *storage = NULL;
    if (bytes)
        *bytes = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        bool dup = false;
        for (int j = 0; j < i && !dup; j++)
            dup = ws[j]->data == ws[i]->data;
        if (!dup)
            total += (tn_weight_repack_size(ws[i]) + 63) / 64 * 64;
    }
    if (total == 0)
        return TN_OK;
    /* A decode step streams every byte of this buffer once: in 4 KiB pages
     * that is a TLB miss, and a restart of the hardware prefetcher, every
     * 4 KiB. 2 MiB pages (transparent huge pages, asked for before the
     * first write faults the pages in) measured +16-26 % decode speed on
     * the 1B Q4_0 model (docs/PERFORMANCE.md). Small models keep 64-byte
     * alignment: a huge page would cost them up to 2 MiB of RSS. */
    const char *thp = getenv("TERN_THP");
    const size_t huge_page = (size_t)2 << 20;
    const bool huge = total >= 4 * huge_page && !(thp && *thp == '0');
    const size_t alloc = huge ? (total + huge_page - 1) / huge_page * huge_page : total;
    uint8_t *buf = aligned_alloc(huge ? huge_page : 64, alloc);
    if (!buf)
        return TN_ERR_NOMEM;
#ifdef MADV_HUGEPAGE
    if (huge)
        madvise(buf, alloc, MADV_HUGEPAGE); /* a hint: without THP it changes nothing */
#endif
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        tn_weight *w = ws[i];
        size_t size = tn_weight_repack_size(w);
        if (!size)
            continue;
        const void *orig = w->data;
        size_t orig_bytes = w->row_bytes * (size_t)w->rows;
        tn_weight out;
        if (tn_weight_repack(w, buf + off, size, &out) != TN_OK)
            continue;
        for (int j = i + 1; j < n; j++)
            if (ws[j]->data == orig && ws[j]->layout == TN_LAYOUT_ROWS &&
                ws[j]->type == w->type && ws[j]->rows == w->rows && ws[j]->cols == w->cols)
                *ws[j] = out;
        *w = out;
        if (release_originals)
            release_pages(orig, orig_bytes);
        off += (size + 63) / 64 * 64;
    }
    *storage = buf;
    if (bytes)
        *bytes = total;
    return TN_OK;
}
