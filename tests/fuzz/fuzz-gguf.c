/* libFuzzer target for the GGUF reader.
 *
 * Opens the input with tn_gguf_open_memory, then walks everything the
 * handle exposes: every key, every value (recursively into arrays, touching
 * the first and last byte of every string and element), every tensor
 * (first and last byte of its data) and a name lookup for each tensor.
 * Besides the sanitizers' own reports, it traps when an accepted file
 * breaks one of the reader's promises (data inside the input, offsets
 * aligned, sizes consistent with shape and type, names found again).
 *
 * Seeds: tests/fuzz/corpus/gguf/ (written by make-gguf-corpus).
 * Run:   build-fuzz/tests/fuzz/fuzz-gguf -max_len=65536 tests/fuzz/corpus/gguf
 */
#include "tern.h"
#include "fuzz-promise.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t *in_lo, *in_hi; /* the input buffer */
static volatile uint8_t sink;

static void touch(const void *p, uint64_t n) {
    if (n == 0)
        return;
    const uint8_t *b = p;
    PROMISE(b >= in_lo && b < in_hi && n <= (uint64_t)(in_hi - b));
    sink ^= b[0];
    sink ^= b[n - 1];
}

static void walk(const tn_gguf_value *v, int depth) {
    PROMISE(depth <= 64);
    switch (v->type) {
    case TN_GGUF_STRING:
        touch(v->v.str.ptr, v->v.str.len);
        break;
    case TN_GGUF_BOOL:
        PROMISE(v->v.u64 <= 1);
        break;
    case TN_GGUF_ARRAY: {
        uint64_t n = v->v.arr.n;
        size_t es = tn_gguf_type_size(v->v.arr.type);
        if (es) {
            touch(v->v.arr.data, n * es);
            if (n) {
                sink ^= (uint8_t)tn_gguf_arr_int(v, 0);
                sink ^= (uint8_t)tn_gguf_arr_int(v, n - 1);
                sink ^= (uint8_t)(tn_gguf_arr_float(v, n - 1) > 0.0);
            }
            if (v->v.arr.type == TN_GGUF_BOOL)
                for (uint64_t i = 0; i < n; i++)
                    PROMISE(v->v.arr.data[i] <= 1);
        } else {
            PROMISE(v->v.arr.type == TN_GGUF_STRING || v->v.arr.type == TN_GGUF_ARRAY);
            PROMISE(n == 0 || v->v.arr.items);
            for (uint64_t i = 0; i < n; i++) {
                PROMISE(v->v.arr.items[i].type == v->v.arr.type);
                walk(&v->v.arr.items[i], depth + 1);
            }
        }
        /* out of range reads answer 0 */
        PROMISE(tn_gguf_arr_int(v, n) == 0);
        break;
    }
    default:
        PROMISE((unsigned)v->type < TN_GGUF_TYPE_COUNT_);
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tn_gguf *g = NULL;
    tn_error err;
    int rc = tn_gguf_open_memory(data, size, "fuzz.gguf", &g, &err);
    if (rc != TN_OK) {
        PROMISE(g == NULL && err.code == rc);
        PROMISE(strncmp(err.message, "fuzz.gguf: ", 11) == 0);
        PROMISE(!strchr(err.message, '\n'));
        return 0;
    }
    in_lo = data;
    in_hi = data + size;

    uint64_t align = tn_gguf_alignment(g);
    PROMISE(align >= 8 && (align & (align - 1)) == 0);
    PROMISE(tn_gguf_data_offset(g) % align == 0);

    for (int64_t i = 0; i < tn_gguf_n_kv(g); i++) {
        tn_str key = tn_gguf_kv_key(g, i);
        touch(key.ptr, key.len);
        const tn_gguf_value *v = tn_gguf_kv_value(g, i);
        PROMISE(v != NULL);
        walk(v, 0);
        /* a key without NUL bytes is found again, and finds this value
         * (keys are unique) */
        if (key.len < 256 && !memchr(key.ptr, 0, key.len)) {
            char name[256];
            memcpy(name, key.ptr, key.len);
            name[key.len] = '\0';
            PROMISE(tn_gguf_find(g, name) == v);
            /* the typed getters answer OK or "another type", never "absent" */
            int64_t iv;
            double fv;
            bool bv;
            tn_str sv;
            PROMISE(tn_gguf_get_int(g, name, &iv) != TN_ERR_NOT_FOUND);
            PROMISE(tn_gguf_get_float(g, name, &fv) != TN_ERR_NOT_FOUND);
            PROMISE(tn_gguf_get_bool(g, name, &bv) != TN_ERR_NOT_FOUND);
            if (tn_gguf_get_str(g, name, &sv) == TN_OK)
                touch(sv.ptr, sv.len);
        }
    }
    PROMISE(tn_gguf_kv_value(g, tn_gguf_n_kv(g)) == NULL);

    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        PROMISE(t != NULL);
        touch(t->name.ptr, t->name.len);
        PROMISE(t->n_dims >= 1 && t->n_dims <= TN_MAX_DIMS);
        PROMISE(t->offset % align == 0);
        /* the size follows from shape and type, computed here in 128 bits */
        size_t bs = tn_type_block_size(t->type), bb = tn_type_block_bytes(t->type);
        PROMISE(bs && bb && t->ne[0] % bs == 0);
        unsigned __int128 bytes = (unsigned __int128)(t->ne[0] / bs) * bb;
        for (int d = 1; d < TN_MAX_DIMS; d++)
            bytes *= t->ne[d];
        PROMISE(bytes == t->nbytes);
        const uint8_t *d = t->data;
        PROMISE(d >= data && t->nbytes <= size && (uint64_t)(d - data) <= size - t->nbytes);
        PROMISE((uint64_t)(d - data) == tn_gguf_data_offset(g) + t->offset);
        touch(d, t->nbytes);
        if (t->name.len < 256 && !memchr(t->name.ptr, 0, t->name.len)) {
            char name[256];
            memcpy(name, t->name.ptr, t->name.len);
            name[t->name.len] = '\0';
            PROMISE(tn_gguf_find_tensor(g, name) == t);
        }
    }
    PROMISE(tn_gguf_tensor_at(g, tn_gguf_n_tensors(g)) == NULL);
    tn_gguf_close(g);
    return 0;
}
