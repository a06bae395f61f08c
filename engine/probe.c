/* Machine probes for tern-cli bench (tern.h, "probes"): the CPU backend's
 * threads, kernel families and matrix products, measured without a model,
 * so that no caller needs engine/cpu/. */
#include "cpu/tn-cpu.h"
#include "tn-internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct tn_probe {
    tn_cpu *cpu;
};

struct tn_probe_matrix {
    tn_weight w;    /* copy 0 */
    uint8_t *data;  /* copies of the matrix, `stride` bytes apart */
    size_t stride;
    int copies;
};

tn_probe *tn_probe_new(int n_threads) {
    tn_probe *p = calloc(1, sizeof *p);
    if (p && !(p->cpu = tn_cpu_new(n_threads))) {
        free(p);
        p = NULL;
    }
    return p;
}

void tn_probe_free(tn_probe *p) {
    if (!p)
        return;
    tn_cpu_free(p->cpu);
    free(p);
}

int tn_probe_threads(const tn_probe *p) { return tn_cpu_threads(p->cpu); }

double tn_probe_read_bandwidth(tn_probe *p, const void *buf, size_t bytes) {
    return tn_cpu_read_bandwidth(p->cpu, buf, bytes);
}

int tn_cpu_kernels_count(void) { return TN_ISA_COUNT_; }

const char *tn_cpu_kernels_name(int i) {
    return i >= 0 && i < TN_ISA_COUNT_ ? tn_isa_name((tn_isa)i) : NULL;
}

bool tn_cpu_kernels_available(int i) {
    return i >= 0 && i < TN_ISA_COUNT_ && tn_isa_available((tn_isa)i);
}

int tn_cpu_kernels_best(void) { return (int)tn_isa_best(); }

int tn_probe_set_kernels(tn_probe *p, int i) {
    if (i < 0 || i >= TN_ISA_COUNT_)
        return TN_ERR_INVALID;
    return tn_cpu_set_isa(p->cpu, (tn_isa)i);
}

int tn_probe_set_prefetch(tn_probe *p, bool batch, tn_prefetch_mode mode) {
    (void)p;
    if ((int)mode < 0 || mode >= TN_PREFETCH_MODES)
        return TN_ERR_INVALID;
    uint8_t all[TN_TYPE_COUNT_];
    memset(all, mode, sizeof all);
    tn_cpu_set_prefetch_modes(batch ? NULL : all, batch ? all : NULL);
    return TN_OK;
}

int tn_probe_decode_prefetch_forced(void) { return tn_cpu_decode_prefetch_env(); }

int tn_probe_set_decode_streams(tn_probe *p, int streams) {
    (void)p;
    if (streams != 1 && streams != 2)
        return TN_ERR_INVALID;
    uint8_t all[TN_TYPE_COUNT_];
    memset(all, streams, sizeof all);
    tn_cpu_set_decode_streams(all);
    return TN_OK;
}

int tn_probe_decode_streams_forced(void) { return tn_cpu_decode_streams_env(); }

/* The copies in 2 MiB pages, as a model's repacked weights are
 * (engine/cpu/repack.c): in 4 KiB pages a TLB miss every 4 KiB held
 * the B = 1 rates a fifth below what the same kernels reach in a model. */
static uint8_t *probe_alloc(size_t bytes) {
    const size_t huge_page = (size_t)2 << 20;
    const size_t alloc = (bytes + huge_page - 1) / huge_page * huge_page;
    uint8_t *buf = aligned_alloc(huge_page, alloc);
#ifdef MADV_HUGEPAGE
    if (buf)
        madvise(buf, alloc, MADV_HUGEPAGE); /* a hint: without THP it changes nothing */
#endif
    return buf;
}

/* 64 distinct random rows repeated; each copy in the layout a model load
 * would use on this CPU (TERN_REPACK=0: the file's rows). */
int tn_probe_matrix_new(uint32_t type, int64_t rows, int64_t cols, size_t min_bytes,
                        uint64_t *seed, tn_probe_matrix **out) {
    *out = NULL;
    size_t rb = tn_type_row_bytes(type, (uint64_t)cols);
    if (!rb || rows <= 0 || (uint64_t)rows > SIZE_MAX / rb)
        return TN_ERR_INVALID;
    tn_probe_matrix *m = calloc(1, sizeof *m);
    if (!m)
        return TN_ERR_NOMEM;
    const size_t bytes = rb * (size_t)rows;
    m->copies = (int)((min_bytes + bytes - 1) / bytes);
    if (m->copies < 1)
        m->copies = 1;
    if (m->copies > 512)
        m->copies = 512;
    m->data = probe_alloc(bytes * (size_t)m->copies);
    float *src = malloc(sizeof(float) * (size_t)cols);
    if (!m->data || !src) {
        free(src);
        tn_probe_matrix_free(m);
        return TN_ERR_NOMEM;
    }
    int distinct = rows < 64 ? (int)rows : 64;
    for (int r = 0; r < distinct; r++) {
        for (int64_t k = 0; k < cols; k++) {
            *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
            src[k] = ((float)(*seed >> 40) / (float)(1 << 24) - 0.5f) * 0.1f;
        }
        tn_quantize_row(type, src, m->data + (size_t)r * rb, cols);
    }
    for (int64_t r = distinct; r < rows; r++)
        memcpy(m->data + (size_t)r * rb, m->data + (size_t)(r % distinct) * rb, rb);
    for (int c = 1; c < m->copies; c++)
        memcpy(m->data + bytes * (size_t)c, m->data, bytes);
    free(src);
    m->stride = bytes;
    m->w = (tn_weight){.type = type, .rows = rows, .cols = cols, .data = m->data, .row_bytes = rb};
    size_t rsize = tn_weight_repack_size(&m->w);
    if (rsize > 0) {
        size_t stride = (rsize + 63) / 64 * 64;
        uint8_t *rp = probe_alloc(stride * (size_t)m->copies);
        if (!rp) { /* time the file's layout then */
            *out = m;
            return TN_OK;
        }
        tn_weight rw = m->w;
        for (int c = 0; c < m->copies; c++) {
            tn_weight wc = m->w;
            wc.data = m->data + bytes * (size_t)c;
            tn_weight_repack(&wc, rp + stride * (size_t)c, rsize, &rw);
        }
        free(m->data);
        m->data = rp;
        m->stride = stride;
        m->w = rw;
        m->w.data = rp;
    }
    *out = m;
    return TN_OK;
}

void tn_probe_matrix_free(tn_probe_matrix *m) {
    if (!m)
        return;
    free(m->data);
    free(m);
}

int tn_probe_matrix_copies(const tn_probe_matrix *m) { return m->copies; }
size_t tn_probe_matrix_bytes(const tn_probe_matrix *m) { return m->stride; }
const char *tn_probe_matrix_layout(const tn_probe_matrix *m) {
    return m->w.layout == TN_LAYOUT_X16 ? "x16" : "rows";
}

int tn_probe_matmul(tn_probe *p, const tn_probe_matrix *m, int copy, const float *x, int64_t n,
                    float *y) {
    if (copy < 0 || copy >= m->copies)
        return TN_ERR_INVALID;
    tn_weight w = m->w;
    w.data = m->data + m->stride * (size_t)copy;
    return tn_matmul(p->cpu, &w, x, n, y);
}
