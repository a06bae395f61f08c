/* GGUF reader (mmap, validated; tensor data read in place, the head copied)
 * and writer (spec layout, atomic).
 *
 * The reader treats the file as hostile: every count, length, dimension and
 * offset is checked against the bytes that remain before anything is
 * allocated or dereferenced, with overflow-checked arithmetic. */
#include "tn-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
/* Nested arrays deeper than this are refused (protects the stack). */
#define GGUF_MAX_DEPTH 8
/* Tensor names are at most 63 bytes in ggml (GGML_MAX_NAME); we accept
 * longer ones on read but never write them. */
#define GGUF_WRITE_MAX_NAME 63
#define GGUF_READ_MAX_NAME 4096

typedef struct gguf_kv {
    tn_str key;
    tn_gguf_value value;
} gguf_kv;

struct tn_gguf {
    const uint8_t *base;
    uint64_t size;
    bool mapped;
    char *path;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    gguf_kv *kvs;
    int64_t n_tensors;
    tn_gguf_tensor *tensors;
    /* open-addressing index of tensor names: slot -> tensor index + 1 */
    uint32_t *tensor_index;
    uint64_t tensor_index_cap;
    /* the same for metadata keys, only while parsing (duplicate check) */
    uint64_t *key_index;
    /* A split model (split.count > 1): parts 2..N, mapped; the tensors of
     * all parts are in `tensors`. total_size counts every part. */
    tn_gguf **parts;
    int32_t n_parts;
    uint64_t total_size;
    /* A mapped file's head (header, metadata, tensor infos: meta_bytes),
     * copied: every key, string, array and tensor name points in here, not
     * into the mapping, so that no read of the metadata after the open can
     * meet a file cut short under its mapping (a SIGBUS). NULL for an
     * in-memory GGUF. */
    uint8_t *meta;
    uint64_t meta_bytes;
};

/* ------------------------------------------------------------ small helpers */

size_t tn_gguf_type_size(tn_gguf_type t) {
    switch (t) {
    case TN_GGUF_U8: case TN_GGUF_I8: case TN_GGUF_BOOL: return 1;
    case TN_GGUF_U16: case TN_GGUF_I16: return 2;
    case TN_GGUF_U32: case TN_GGUF_I32: case TN_GGUF_F32: return 4;
    case TN_GGUF_U64: case TN_GGUF_I64: case TN_GGUF_F64: return 8;
    default: return 0;
    }
}

static const char *gguf_type_name(uint32_t t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    return t < TN_GGUF_TYPE_COUNT_ ? names[t] : "unknown";
}

bool tn_str_eq(tn_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

static bool str_eq2(tn_str a, tn_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* Prints a name from the file safely into messages (bounded, no control chars). */
static const char *printable(tn_str s, char *buf, size_t cap) {
    size_t o = 0;
    for (uint64_t i = 0; i < s.len && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        buf[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (s.len > 0 && o + 4 >= cap) {
        buf[o++] = '.'; buf[o++] = '.'; buf[o++] = '.';
    }
    buf[o] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ reader */

/* One message format per section rather than its name as an argument, so
 * that each message is translated as a whole (docs/TRANSLATING.md). */
typedef enum cursor_section {
    SECTION_HEADER,
    SECTION_METADATA, /* the only one with strings, arrays and typed values */
    SECTION_TENSOR_INFOS,
} cursor_section;

typedef struct cursor {
    const uint8_t *base;
    uint64_t pos;
    uint64_t size;
    const char *name;
    tn_error *err;
    cursor_section section; /* which section we are in, for messages */
} cursor;

static int truncated(cursor *c, uint64_t need) {
    const unsigned long long n = need, pos = c->pos, size = c->size;
    switch (c->section) {
    case SECTION_HEADER:
        return tn_fail(c->err, TN_ERR_FORMAT,
                       "%s: file ends inside the header (needs %llu more bytes at offset %llu, "
                       "file is %llu bytes; truncated download?)",
                       c->name, n, pos, size);
    case SECTION_METADATA:
        return tn_fail(c->err, TN_ERR_FORMAT,
                       "%s: file ends inside the metadata (needs %llu more bytes at offset %llu, "
                       "file is %llu bytes; truncated download?)",
                       c->name, n, pos, size);
    case SECTION_TENSOR_INFOS:
    default:
        return tn_fail(c->err, TN_ERR_FORMAT,
                       "%s: file ends inside the tensor infos (needs %llu more bytes at offset "
                       "%llu, file is %llu bytes; truncated download?)",
                       c->name, n, pos, size);
    }
}

static uint64_t remaining(const cursor *c) { return c->size - c->pos; }

static int rd_bytes(cursor *c, uint64_t n, const uint8_t **out) {
    if (n > remaining(c))
        return truncated(c, n - remaining(c));
    *out = c->base + c->pos;
    c->pos += n;
    return TN_OK;
}

static int rd_u32(cursor *c, uint32_t *v) {
    const uint8_t *p = NULL;
    int rc = rd_bytes(c, 4, &p);
    if (rc == TN_OK)
        *v = tn_rd_u32(p);
    return rc;
}

static int rd_u64(cursor *c, uint64_t *v) {
    const uint8_t *p = NULL;
    int rc = rd_bytes(c, 8, &p);
    if (rc == TN_OK)
        *v = tn_rd_u64(p);
    return rc;
}

static int rd_str(cursor *c, tn_str *s) {
    uint64_t len;
    int rc = rd_u64(c, &len);
    if (rc)
        return rc;
    if (len > remaining(c) && c->section == SECTION_TENSOR_INFOS)
        return tn_fail(c->err, TN_ERR_FORMAT,
                       "%s: a string in the tensor infos claims %llu bytes but only %llu remain "
                       "in the file (truncated or corrupt)",
                       c->name, (unsigned long long)len, (unsigned long long)remaining(c));
    if (len > remaining(c)) /* the header has no strings */
        return tn_fail(c->err, TN_ERR_FORMAT,
                       "%s: a string in the metadata claims %llu bytes but only %llu remain in "
                       "the file (truncated or corrupt)",
                       c->name, (unsigned long long)len, (unsigned long long)remaining(c));
    const uint8_t *p = NULL;
    rd_bytes(c, len, &p);
    s->ptr = (const char *)p;
    s->len = len;
    return TN_OK;
}

static void value_free(tn_gguf_value *v) {
    if (v->type == TN_GGUF_ARRAY && v->v.arr.items) {
        tn_gguf_value *items = (tn_gguf_value *)v->v.arr.items;
        if (v->v.arr.type == TN_GGUF_ARRAY)
            for (uint64_t i = 0; i < v->v.arr.n; i++)
                value_free(&items[i]);
        free(items);
        v->v.arr.items = NULL;
    }
}

static int rd_value(cursor *c, tn_gguf_type type, tn_gguf_value *v, int depth);

static int rd_array(cursor *c, tn_gguf_value *v, int depth) {
    uint32_t et;
    uint64_t n;
    int rc;
    if ((rc = rd_u32(c, &et)) || (rc = rd_u64(c, &n)))
        return rc;
    if (et >= TN_GGUF_TYPE_COUNT_)
        return tn_fail(c->err, TN_ERR_FORMAT, "%s: an array in the metadata has unknown element type %u",
                       c->name, et);
    if (depth >= GGUF_MAX_DEPTH)
        return tn_fail(c->err, TN_ERR_FORMAT, "%s: arrays nested deeper than %d levels in the metadata",
                       c->name, GGUF_MAX_DEPTH);
    v->type = TN_GGUF_ARRAY;
    v->v.arr.type = (tn_gguf_type)et;
    v->v.arr.n = n;
    v->v.arr.data = NULL;
    v->v.arr.items = NULL;
    size_t es = tn_gguf_type_size((tn_gguf_type)et);
    if (es) {
        uint64_t bytes;
        if (!tn_mul_u64(n, es, &bytes) || bytes > remaining(c))
            return tn_fail(c->err, TN_ERR_FORMAT,
                           "%s: an array of %llu %s values in the metadata does not fit in the "
                           "%llu bytes left in the file",
                           c->name, (unsigned long long)n, gguf_type_name(et),
                           (unsigned long long)remaining(c));
        rd_bytes(c, bytes, &v->v.arr.data);
        /* the spec makes any bool other than 0 or 1 invalid, in arrays too */
        if (et == TN_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (v->v.arr.data[i] > 1)
                    return tn_fail(c->err, TN_ERR_FORMAT,
                                   "%s: item %llu of a bool array in the metadata has value %u "
                                   "(not 0 or 1)",
                                   c->name, (unsigned long long)i, v->v.arr.data[i]);
        return TN_OK;
    }
    /* strings take at least 8 bytes each, arrays at least 12: bound n by the
     * remaining bytes before allocating anything */
    uint64_t min_each = et == TN_GGUF_STRING ? 8 : 12;
    if (n > remaining(c) / min_each && et == TN_GGUF_STRING)
        return tn_fail(c->err, TN_ERR_FORMAT,
                       "%s: an array of %llu strings in the metadata cannot fit in the %llu "
                       "bytes left in the file",
                       c->name, (unsigned long long)n, (unsigned long long)remaining(c));
    if (n > remaining(c) / min_each)
        return tn_fail(c->err, TN_ERR_FORMAT,
                       "%s: an array of %llu arrays in the metadata cannot fit in the %llu bytes "
                       "left in the file",
                       c->name, (unsigned long long)n, (unsigned long long)remaining(c));
    tn_gguf_value *items = calloc(n ? n : 1, sizeof *items);
    if (!items)
        return tn_fail(c->err, TN_ERR_NOMEM, "%s: out of memory reading an array of %llu items",
                       c->name, (unsigned long long)n);
    v->v.arr.items = items;
    v->v.arr.data = c->base + c->pos;
    for (uint64_t i = 0; i < n; i++) {
        rc = rd_value(c, (tn_gguf_type)et, &items[i], depth + 1);
        if (rc) {
            /* free what was read, including the failed item: a nested array
             * that failed part way still owns the items it allocated */
            v->v.arr.n = i + 1;
            return rc;
        }
    }
    return TN_OK;
}

static int rd_value(cursor *c, tn_gguf_type type, tn_gguf_value *v, int depth) {
    memset(v, 0, sizeof *v);
    v->type = type;
    if (type == TN_GGUF_STRING)
        return rd_str(c, &v->v.str);
    if (type == TN_GGUF_ARRAY)
        return rd_array(c, v, depth);
    size_t sz = tn_gguf_type_size(type);
    if (!sz)
        return tn_fail(c->err, TN_ERR_FORMAT, "%s: unknown value type %u in the metadata",
                       c->name, (unsigned)type);
    const uint8_t *p = NULL;
    int rc = rd_bytes(c, sz, &p);
    if (rc)
        return rc;
    switch (type) {
    case TN_GGUF_U8: v->v.u64 = p[0]; break;
    case TN_GGUF_I8: v->v.i64 = (int8_t)p[0]; break;
    case TN_GGUF_BOOL:
        if (p[0] > 1)
            return tn_fail(c->err, TN_ERR_FORMAT, "%s: a bool in the metadata has value %u (not 0 or 1)",
                           c->name, p[0]);
        v->v.u64 = p[0];
        break;
    case TN_GGUF_U16: v->v.u64 = tn_rd_u16(p); break;
    case TN_GGUF_I16: v->v.i64 = (int16_t)tn_rd_u16(p); break;
    case TN_GGUF_U32: v->v.u64 = tn_rd_u32(p); break;
    case TN_GGUF_I32: v->v.i64 = (int32_t)tn_rd_u32(p); break;
    case TN_GGUF_U64: v->v.u64 = tn_rd_u64(p); break;
    case TN_GGUF_I64: v->v.i64 = (int64_t)tn_rd_u64(p); break;
    case TN_GGUF_F32: {
        float f;
        memcpy(&f, p, 4);
        v->v.f64 = f;
        break;
    }
    case TN_GGUF_F64: memcpy(&v->v.f64, p, 8); break;
    default: break;
    }
    return TN_OK;
}

static void gguf_free_parsed(tn_gguf *g) {
    if (g->kvs) {
        for (int64_t i = 0; i < g->n_kv; i++)
            value_free(&g->kvs[i].value);
        free(g->kvs);
    }
    free(g->tensors);
    free(g->tensor_index);
    free(g->key_index);
}

void tn_gguf_close(tn_gguf *g) {
    if (!g)
        return;
    for (int32_t i = 0; i < g->n_parts; i++)
        tn_gguf_close(g->parts[i]);
    free(g->parts);
    gguf_free_parsed(g);
    free(g->meta);
    if (g->mapped && g->base)
        munmap((void *)g->base, g->size);
    free(g->path);
    free(g);
}

static const gguf_kv *find_kv(const tn_gguf *g, const char *key, int64_t upto) {
    for (int64_t i = 0; i < upto; i++)
        if (tn_str_eq(g->kvs[i].key, key))
            return &g->kvs[i];
    return NULL;
}

static int build_tensor_index(tn_gguf *g, tn_error *err) {
    uint64_t cap = 16;
    while (cap < (uint64_t)g->n_tensors * 2)
        cap <<= 1;
    g->tensor_index = calloc(cap, sizeof *g->tensor_index);
    if (!g->tensor_index)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory indexing %lld tensors", g->path,
                       (long long)g->n_tensors);
    g->tensor_index_cap = cap;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        tn_str name = g->tensors[i].name;
        uint64_t slot = tn_fnv1a(name.ptr, name.len) & (cap - 1);
        while (g->tensor_index[slot]) {
            const tn_gguf_tensor *other = &g->tensors[g->tensor_index[slot] - 1];
            if (str_eq2(other->name, name)) {
                char buf[96];
                return tn_fail(err, TN_ERR_FORMAT, "%s: tensor '%s' appears twice", g->path,
                               printable(name, buf, sizeof buf));
            }
            slot = (slot + 1) & (cap - 1);
        }
        g->tensor_index[slot] = (uint32_t)(i + 1);
    }
    return TN_OK;
}

static int parse(tn_gguf *g, tn_error *err) {
    cursor c = {.base = g->base, .pos = 0, .size = g->size, .name = g->path, .err = err,
                .section = SECTION_HEADER};
    const uint8_t *magic;
    int rc;
    if (g->size == 0)
        return tn_fail(err, TN_ERR_FORMAT, "%s: the file is empty (interrupted download?)",
                       g->path);
    /* a file of 1 to 3 bytes that starts like "GGUF" is a truncated one */
    if (memcmp(g->base, GGUF_MAGIC, g->size < 4 ? (size_t)g->size : 4) != 0)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: not a GGUF file (it does not start with the bytes \"GGUF\")", g->path);
    if ((rc = rd_bytes(&c, 4, &magic)))
        return rc;
    uint64_t n_tensors, n_kv;
    if ((rc = rd_u32(&c, &g->version)))
        return rc;
    if (g->version != 2 && g->version != 3)
        return tn_fail(err, TN_ERR_UNSUPPORTED,
                       "%s: GGUF version %u is not supported (Tern reads versions 2 and 3)",
                       g->path, g->version);
    if ((rc = rd_u64(&c, &n_tensors)) || (rc = rd_u64(&c, &n_kv)))
        return rc;
    /* Each metadata pair takes at least 8 (key len) + 4 (type) + 1 bytes, each
     * tensor info at least 8 + 4 + 8 + 4 + 8: bound the counts by the file. */
    if (n_kv > remaining(&c) / 13)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: header claims %llu metadata entries, more than the file can hold "
                       "(corrupt header)",
                       g->path, (unsigned long long)n_kv);
    if (n_tensors > remaining(&c) / 32 || n_tensors > UINT32_MAX - 1)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: header claims %llu tensors, more than the file can hold (corrupt "
                       "header)",
                       g->path, (unsigned long long)n_tensors);

    g->kvs = calloc(n_kv ? n_kv : 1, sizeof *g->kvs);
    if (!g->kvs)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", g->path);
    c.section = SECTION_METADATA;
    g->alignment = TN_GGUF_DEFAULT_ALIGNMENT;
    /* duplicate keys are found through a hash set: comparing every pair
     * would let a hostile file with millions of keys hang the reader */
    uint64_t key_cap = 16;
    while (key_cap < n_kv * 2)
        key_cap <<= 1;
    g->key_index = calloc(key_cap, sizeof *g->key_index);
    if (!g->key_index)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", g->path);
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kvs[i];
        uint32_t type;
        if ((rc = rd_str(&c, &kv->key)) || (rc = rd_u32(&c, &type)))
            return rc;
        char kbuf[96];
        if (type >= TN_GGUF_TYPE_COUNT_)
            return tn_fail(err, TN_ERR_FORMAT, "%s: metadata key '%s' has unknown type %u",
                           g->path, printable(kv->key, kbuf, sizeof kbuf), type);
        uint64_t slot = tn_fnv1a(kv->key.ptr, kv->key.len) & (key_cap - 1);
        for (; g->key_index[slot]; slot = (slot + 1) & (key_cap - 1))
            if (str_eq2(g->kvs[g->key_index[slot] - 1].key, kv->key))
                return tn_fail(err, TN_ERR_FORMAT, "%s: metadata key '%s' appears twice",
                               g->path, printable(kv->key, kbuf, sizeof kbuf));
        g->key_index[slot] = i + 1;
        /* Counted before the value is read, so that a partial value is
         * freed: also when a SIGBUS ends the parse inside it (open_file). */
        g->n_kv = (int64_t)i + 1;
        rc = rd_value(&c, (tn_gguf_type)type, &kv->value, 0);
        if (rc)
            return rc;
    }
    free(g->key_index);
    g->key_index = NULL;
    const gguf_kv *al = find_kv(g, "general.alignment", g->n_kv);
    if (al) {
        if (al->value.type != TN_GGUF_U32)
            return tn_fail(err, TN_ERR_FORMAT, "%s: general.alignment has type %s, not u32",
                           g->path, gguf_type_name(al->value.type));
        uint64_t a = al->value.v.u64;
        /* ggml needs a power of two, the spec a multiple of 8; both together
         * also keep every tensor's data aligned for direct f32/f64 loads */
        if (a < 8 || (a & (a - 1)) != 0)
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: general.alignment is %llu, not a power of two of at least 8",
                           g->path, (unsigned long long)a);
        g->alignment = a;
    }

    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", g->path);
    c.section = SECTION_TENSOR_INFOS;
    for (uint64_t i = 0; i < n_tensors; i++) {
        tn_gguf_tensor *t = &g->tensors[i];
        char nbuf[96];
        if ((rc = rd_str(&c, &t->name)) || (rc = rd_u32(&c, &t->n_dims)))
            return rc;
        g->n_tensors = (int64_t)i + 1;
        const char *tname = printable(t->name, nbuf, sizeof nbuf);
        if (t->name.len == 0 || t->name.len > GGUF_READ_MAX_NAME)
            return tn_fail(err, TN_ERR_FORMAT, "%s: tensor %llu has a name of %llu bytes",
                           g->path, (unsigned long long)i, (unsigned long long)t->name.len);
        if (t->n_dims == 0 || t->n_dims > TN_MAX_DIMS)
            return tn_fail(err, TN_ERR_FORMAT, "%s: tensor '%s' has %u dimensions (1 to %d allowed)",
                           g->path, tname, t->n_dims, TN_MAX_DIMS);
        uint64_t count = 1;
        for (int d = 0; d < TN_MAX_DIMS; d++)
            t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            if ((rc = rd_u64(&c, &t->ne[d])))
                return rc;
            if (t->ne[d] > (uint64_t)INT64_MAX || !tn_mul_u64(count, t->ne[d], &count) ||
                count > (uint64_t)INT64_MAX)
                return tn_fail(err, TN_ERR_FORMAT,
                               "%s: tensor '%s' has dimensions whose product overflows", g->path,
                               tname);
        }
        if ((rc = rd_u32(&c, &t->type)) || (rc = rd_u64(&c, &t->offset)))
            return rc;
        if (!tn_type_name(t->type) || tn_type_block_bytes(t->type) == 0)
            return tn_fail(err, TN_ERR_UNSUPPORTED,
                           "%s: tensor '%s' has unknown tensor type %u", g->path, tname, t->type);
        uint64_t bs = tn_type_block_size(t->type);
        if (t->ne[0] % bs != 0)
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: tensor '%s' has rows of %llu values, not a multiple of the %s block "
                           "size %llu",
                           g->path, tname, (unsigned long long)t->ne[0], tn_type_name(t->type),
                           (unsigned long long)bs);
        uint64_t rows = count / (t->ne[0] ? t->ne[0] : 1);
        if (t->ne[0] == 0)
            rows = 0;
        uint64_t row_bytes;
        if (!tn_mul_u64(t->ne[0] / bs, tn_type_block_bytes(t->type), &row_bytes) ||
            !tn_mul_u64(rows, row_bytes, &t->nbytes))
            return tn_fail(err, TN_ERR_FORMAT, "%s: tensor '%s' size overflows", g->path, tname);
        if (t->offset % g->alignment != 0)
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: tensor '%s' data offset %llu is not a multiple of the alignment "
                           "%llu",
                           g->path, tname, (unsigned long long)t->offset,
                           (unsigned long long)g->alignment);
    }
    g->meta_bytes = c.pos;
    /* the data section starts at the next multiple of the alignment */
    uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    if (!tn_add_u64(c.pos, pad, &g->data_offset))
        return tn_fail(err, TN_ERR_FORMAT, "%s: corrupt header", g->path);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        tn_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        char nbuf[96];
        if (!tn_add_u64(g->data_offset, t->offset, &start) || !tn_add_u64(start, t->nbytes, &end) ||
            end > g->size)
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: tensor '%s' ends past the end of the file (truncated download?)",
                           g->path, printable(t->name, nbuf, sizeof nbuf));
        t->data = g->base + start;
    }
    return build_tensor_index(g, err);
}

static int gguf_new(const char *name, tn_gguf **out, tn_error *err) {
    if (!name)
        name = "(memory)";
    tn_gguf *g = calloc(1, sizeof *g);
    if (!g)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", name);
    g->path = strdup(name);
    if (!g->path) {
        free(g);
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", name);
    }
    *out = g;
    return TN_OK;
}

int tn_gguf_open_memory(const void *data, size_t size, const char *name, tn_gguf **out,
                        tn_error *err) {
    tn_error_clear(err);
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_gguf_open_memory: out is NULL");
    *out = NULL;
    tn_gguf *g = NULL;
    int rc = gguf_new(name, &g, err);
    if (rc)
        return rc;
    g->base = data;
    g->size = size;
    if (!data && size)
        rc = tn_fail(err, TN_ERR_INVALID, "%s: no data", g->path);
    else
        rc = parse(g, err);
    if (rc) {
        tn_gguf_close(g);
        return rc;
    }
    *out = g;
    return TN_OK;
}

typedef struct parse_pass {
    tn_gguf *g;
    tn_error *err;
    int rc;
} parse_pass;

/* The parse of a mapped file, then the copy of its head (g->meta). */
static void parse_run(void *arg) {
    parse_pass *pp = arg;
    tn_gguf *g = pp->g;
    pp->rc = parse(g, pp->err);
    if (pp->rc != TN_OK)
        return;
    g->meta = malloc(g->meta_bytes ? (size_t)g->meta_bytes : 1);
    if (!g->meta) {
        pp->rc = tn_fail(pp->err, TN_ERR_NOMEM, "%s: out of memory", g->path);
        return;
    }
    memcpy(g->meta, g->base, (size_t)g->meta_bytes);
}

/* p, when it points into the head [from, from + n] (a string of length 0
 * may point at its end), at the same offset in to. */
static const void *moved(const void *p, const uint8_t *from, uint64_t n, const uint8_t *to) {
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)from;
    return p && a >= b && a - b <= n ? to + (a - b) : p;
}

static void value_move(tn_gguf_value *v, const uint8_t *from, uint64_t n, const uint8_t *to) {
    if (v->type == TN_GGUF_STRING) {
        v->v.str.ptr = moved(v->v.str.ptr, from, n, to);
    } else if (v->type == TN_GGUF_ARRAY) {
        v->v.arr.data = moved(v->v.arr.data, from, n, to);
        tn_gguf_value *items = (tn_gguf_value *)v->v.arr.items;
        for (uint64_t i = 0; items && i < v->v.arr.n; i++)
            value_move(&items[i], from, n, to);
    }
}

/* Points every key, string, array and tensor name of g into g->meta, the
 * copy of the head they were read from. Tensor data stays in the mapping. */
static void head_move(tn_gguf *g) {
    const uint8_t *from = g->base, *to = g->meta;
    const uint64_t n = g->meta_bytes;
    for (int64_t i = 0; i < g->n_kv; i++) {
        g->kvs[i].key.ptr = moved(g->kvs[i].key.ptr, from, n, to);
        value_move(&g->kvs[i].value, from, n, to);
    }
    for (int64_t i = 0; i < g->n_tensors; i++)
        g->tensors[i].name.ptr = moved(g->tensors[i].name.ptr, from, n, to);
}

static int open_file(const char *path, tn_gguf **out, tn_error *err) {
    /* A FIFO, a device, a socket or a directory is refused by name before
     * it is opened, and by descriptor after (engine/file-read.c). */
    int fd = -1;
    uint64_t size = 0;
    int rc = tn_open_regular_file(path, &fd, &size, err);
    if (rc != TN_OK)
        return rc;
    if (size == 0) {
        /* /proc's and /sys's files say 0 bytes whatever they hold, and
         * cannot be mapped: one that reads a byte (or fails to read, like
         * /proc/self/mem) is no interrupted download but no model either. */
        char byte;
        ssize_t n;
        do
            n = pread(fd, &byte, 1, 0);
        while (n < 0 && errno == EINTR);
        close(fd);
        if (n != 0)
            return tn_fail(err, TN_ERR_IO,
                           "%s is not a regular file on disk (its size reads as 0 but it is not "
                           "a zero-length file, like those of /proc and /sys); a model must be a "
                           "GGUF file",
                           path);
        return tn_fail(err, TN_ERR_FORMAT, "%s: the file is empty (interrupted download?)", path);
    }
    if (size > SIZE_MAX) {
        close(fd);
        return tn_fail(err, TN_ERR_OVERFLOW, "%s: too large to map on this system", path);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    /* sysfs says 4096 bytes for its files and refuses to map them (ENODEV):
     * "No such device" named no reason a user could act on. */
    if (map == MAP_FAILED && e == ENODEV)
        return tn_fail(err, TN_ERR_IO,
                       "%s is not a regular file on disk (its file system cannot map it, like "
                       "/sys); a model must be a GGUF file",
                       path);
    if (map == MAP_FAILED)
        return tn_fail(err, TN_ERR_IO, "%s: cannot map the file: %s", path, strerror(e));
    tn_gguf *g = NULL;
    rc = gguf_new(path, &g, err);
    if (rc) {
        munmap(map, (size_t)size);
        return rc;
    }
    g->base = map;
    g->size = size;
    g->mapped = true;
    /* The parse and the copy of the head read the mapping: a file cut short
     * meanwhile (a download or a copy over it) is a load error, not a
     * SIGBUS. What they allocate is g's at once, freed by tn_gguf_close. */
    const tn_read_span span = {.base = map, .size = (size_t)size, .path = g->path};
    parse_pass pp = {.g = g, .err = err, .rc = TN_OK};
    rc = tn_guarded_read(&span, 1, "gguf-parse", parse_run, &pp, err);
    if (rc == TN_OK)
        rc = pp.rc;
    if (rc == TN_OK)
        head_move(g);
    if (rc) {
        tn_gguf_close(g);
        return rc;
    }
    *out = g;
    return TN_OK;
}

/* split.no / split.count (u16 in llama.cpp's gguf-split; any integer here). */
static int split_keys(const tn_gguf *g, int64_t *no, int64_t *count, tn_error *err) {
    *no = 0;
    *count = 1;
    int rc = tn_gguf_get_int(g, "split.count", count);
    if (rc == TN_ERR_NOT_FOUND) {
        *count = 1;
        return TN_OK;
    }
    if (rc || *count < 1 || *count > 9999)
        return tn_fail(err, TN_ERR_FORMAT, "%s: split.count is not a number from 1 to 9999",
                       g->path);
    rc = tn_gguf_get_int(g, "split.no", no);
    if (rc == TN_ERR_NOT_FOUND && *count == 1)
        return TN_OK;
    if (rc || *no < 0 || *no >= *count)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: split.no is missing or not a part number below split.count (%lld)",
                       g->path, (long long)*count);
    return TN_OK;
}

/* "NAME-00001-of-00003.gguf" (llama.cpp's naming, the only one its loader
 * and the Hub's uploads use): the length of "NAME", or 0 when `path` is not
 * part `no` (0-based) of `count` under that naming. */
static size_t split_prefix_len(const char *path, int64_t no, int64_t count) {
    char tail[48];
    snprintf(tail, sizeof tail, "-%05lld-of-%05lld.gguf", (long long)no + 1, (long long)count);
    size_t n = strlen(path), t = strlen(tail);
    return n > t && strcmp(path + n - t, tail) == 0 ? n - t : 0;
}

/* The opened file is part 1 of a split model: maps parts 2..N beside it
 * and adds their tensors, so that the model reads as one file. */
static int join_parts(tn_gguf *g, int64_t count, tn_error *err) {
    size_t prefix = split_prefix_len(g->path, 0, count);
    if (prefix == 0)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: part 1 of a model split in %lld files, but its name does not end in "
                       "-00001-of-%05lld.gguf, so its other parts cannot be found",
                       g->path, (long long)count, (long long)count);
    g->parts = calloc((size_t)count - 1, sizeof *g->parts);
    if (!g->parts)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", g->path);
    int64_t n_total = g->n_tensors;
    for (int64_t k = 1; k < count; k++) {
        size_t cap = prefix + 32;
        char *part_path = malloc(cap);
        if (!part_path)
            return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", g->path);
        snprintf(part_path, cap, "%.*s-%05lld-of-%05lld.gguf", (int)prefix, g->path,
                 (long long)k + 1, (long long)count);
        tn_gguf *p = NULL;
        int rc = open_file(part_path, &p, err);
        if (rc == TN_ERR_NOT_FOUND)
            tn_fail(err, TN_ERR_NOT_FOUND,
                    "%s: part %lld of %lld of this split model is missing (%s); download every "
                    "part into the same folder",
                    g->path, (long long)k + 1, (long long)count, part_path);
        free(part_path);
        if (rc)
            return rc;
        g->parts[g->n_parts++] = p;
        int64_t no, n;
        if ((rc = split_keys(p, &no, &n, err)))
            return rc;
        if (n != count || no != k)
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: says it is part %lld of %lld, but it is named as part %lld of "
                           "%lld: the parts come from different models",
                           p->path, (long long)no + 1, (long long)n, (long long)k + 1,
                           (long long)count);
        if (!tn_add_u64(g->total_size, p->size, &g->total_size) ||
            p->n_tensors > (int64_t)UINT32_MAX - 1 - n_total)
            return tn_fail(err, TN_ERR_FORMAT, "%s: too many tensors in the parts", g->path);
        n_total += p->n_tensors;
    }
    int64_t declared;
    if (tn_gguf_get_int(g, "split.tensors.count", &declared) == TN_OK && declared != n_total)
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: split.tensors.count says %lld tensors, the %lld parts hold %lld",
                       g->path, (long long)declared, (long long)count, (long long)n_total);
    tn_gguf_tensor *all = realloc(g->tensors, (size_t)(n_total ? n_total : 1) * sizeof *all);
    if (!all)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", g->path);
    g->tensors = all;
    for (int32_t k = 0; k < g->n_parts; k++) {
        const tn_gguf *p = g->parts[k];
        for (int64_t i = 0; i < p->n_tensors; i++) {
            all[g->n_tensors] = p->tensors[i];
            all[g->n_tensors].part = (uint32_t)k + 1;
            g->n_tensors++;
        }
    }
    /* One index over all parts; a name in two parts is refused there. */
    free(g->tensor_index);
    g->tensor_index = NULL;
    g->tensor_index_cap = 0;
    return build_tensor_index(g, err);
}

int tn_gguf_open(const char *path, tn_gguf **out, tn_error *err) {
    tn_error_clear(err);
    if (!out || !path)
        return tn_fail(err, TN_ERR_INVALID, "tn_gguf_open: no path");
    *out = NULL;
    tn_gguf *g = NULL;
    int rc = open_file(path, &g, err);
    if (rc)
        return rc;
    g->total_size = g->size;
    int64_t no, count;
    rc = split_keys(g, &no, &count, err);
    if (rc == TN_OK && no != 0) {
        size_t prefix = split_prefix_len(path, no, count);
        if (prefix)
            rc = tn_fail(err, TN_ERR_INVALID,
                         "%s: part %lld of %lld of a split model: open its first part, "
                         "%.*s-00001-of-%05lld.gguf",
                         path, (long long)no + 1, (long long)count, (int)prefix, path,
                         (long long)count);
        else
            rc = tn_fail(err, TN_ERR_INVALID,
                         "%s: part %lld of %lld of a split model: open its first part", path,
                         (long long)no + 1, (long long)count);
    } else if (rc == TN_OK && count > 1) {
        rc = join_parts(g, count, err);
    }
    if (rc) {
        tn_gguf_close(g);
        return rc;
    }
    *out = g;
    return TN_OK;
}

const char *tn_gguf_path(const tn_gguf *g) { return g->path; }
uint32_t tn_gguf_version(const tn_gguf *g) { return g->version; }
uint64_t tn_gguf_alignment(const tn_gguf *g) { return g->alignment; }
uint64_t tn_gguf_file_size(const tn_gguf *g) { return g->total_size ? g->total_size : g->size; }
int32_t tn_gguf_n_parts(const tn_gguf *g) { return 1 + g->n_parts; }
const char *tn_gguf_part_path(const tn_gguf *g, int32_t k) {
    return k == 0 ? g->path : k > 0 && k <= g->n_parts ? g->parts[k - 1]->path : NULL;
}
uint64_t tn_gguf_data_offset(const tn_gguf *g) { return g->data_offset; }

tn_read_span *tn_gguf_read_spans(const tn_gguf *g, int *n) {
    *n = 0;
    if (!g)
        return NULL;
    tn_read_span *s = malloc(((size_t)g->n_parts + 1) * sizeof *s);
    if (!s)
        return NULL;
    /* An in-memory GGUF (tn_gguf_open_memory) cannot shrink: no span. */
    for (int32_t k = 0; k <= g->n_parts; k++) {
        const tn_gguf *p = k == 0 ? g : g->parts[k - 1];
        if (p->mapped && p->base)
            s[(*n)++] = (tn_read_span){.base = p->base, .size = (size_t)p->size, .path = p->path};
    }
    return s;
}
int tn_gguf_guarded_read(const tn_gguf *g, const char *pass, void (*fn)(void *arg), void *arg,
                         tn_error *err) {
    int n = 0;
    tn_read_span *spans = tn_gguf_read_spans(g, &n);
    int rc = TN_OK;
    if (spans && n > 0)
        rc = tn_guarded_read(spans, n, pass, fn, arg, err);
    else
        fn(arg); /* in memory (cannot shrink), or no memory for the list */
    free(spans);
    return rc;
}

int64_t tn_gguf_n_kv(const tn_gguf *g) { return g->n_kv; }

tn_str tn_gguf_kv_key(const tn_gguf *g, int64_t i) {
    tn_str none = {"", 0};
    return (i >= 0 && i < g->n_kv) ? g->kvs[i].key : none;
}

const tn_gguf_value *tn_gguf_kv_value(const tn_gguf *g, int64_t i) {
    return (i >= 0 && i < g->n_kv) ? &g->kvs[i].value : NULL;
}

const tn_gguf_value *tn_gguf_find(const tn_gguf *g, const char *key) {
    const gguf_kv *kv = find_kv(g, key, g->n_kv);
    return kv ? &kv->value : NULL;
}

static bool value_is_unsigned(tn_gguf_type t) {
    return t == TN_GGUF_U8 || t == TN_GGUF_U16 || t == TN_GGUF_U32 || t == TN_GGUF_U64;
}
static bool value_is_signed(tn_gguf_type t) {
    return t == TN_GGUF_I8 || t == TN_GGUF_I16 || t == TN_GGUF_I32 || t == TN_GGUF_I64;
}

int tn_gguf_get_int(const tn_gguf *g, const char *key, int64_t *out) {
    const tn_gguf_value *v = tn_gguf_find(g, key);
    if (!v)
        return TN_ERR_NOT_FOUND;
    if (value_is_signed(v->type)) {
        *out = v->v.i64;
        return TN_OK;
    }
    if (value_is_unsigned(v->type)) {
        if (v->v.u64 > (uint64_t)INT64_MAX)
            return TN_ERR_FORMAT;
        *out = (int64_t)v->v.u64;
        return TN_OK;
    }
    return TN_ERR_FORMAT;
}

int tn_gguf_get_float(const tn_gguf *g, const char *key, double *out) {
    const tn_gguf_value *v = tn_gguf_find(g, key);
    if (!v)
        return TN_ERR_NOT_FOUND;
    if (v->type == TN_GGUF_F32 || v->type == TN_GGUF_F64)
        *out = v->v.f64;
    else if (value_is_signed(v->type))
        *out = (double)v->v.i64;
    else if (value_is_unsigned(v->type))
        *out = (double)v->v.u64;
    else
        return TN_ERR_FORMAT;
    return TN_OK;
}

int tn_gguf_get_bool(const tn_gguf *g, const char *key, bool *out) {
    const tn_gguf_value *v = tn_gguf_find(g, key);
    if (!v)
        return TN_ERR_NOT_FOUND;
    if (v->type != TN_GGUF_BOOL)
        return TN_ERR_FORMAT;
    *out = v->v.u64 != 0;
    return TN_OK;
}

int tn_gguf_get_str(const tn_gguf *g, const char *key, tn_str *out) {
    const tn_gguf_value *v = tn_gguf_find(g, key);
    if (!v)
        return TN_ERR_NOT_FOUND;
    if (v->type != TN_GGUF_STRING)
        return TN_ERR_FORMAT;
    *out = v->v.str;
    return TN_OK;
}

/* A key with the wrong type must not read as a missing one ("not a model
 * file?") or as some other fault: the message names the type the file gave
 * and the one the reader wanted, so that whoever made the file can fix it.
 * One format per wanted type: the formats are the translations' ids. */
typedef enum want_type { WANT_INT, WANT_FLOAT, WANT_BOOL, WANT_STR } want_type;

static int wrong_type(const tn_gguf *g, const char *key, want_type want, tn_error *err) {
    const tn_gguf_value *v = tn_gguf_find(g, key);
    char have[32];
    if (v->type == TN_GGUF_ARRAY)
        snprintf(have, sizeof have, "array[%s]", gguf_type_name(v->v.arr.type));
    else
        snprintf(have, sizeof have, "%s", gguf_type_name(v->type));
    switch (want) {
    case WANT_INT:
        if (value_is_unsigned(v->type))
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: metadata key '%s' is %llu, more than any setting can be (at most "
                           "%lld)",
                           g->path, key, (unsigned long long)v->v.u64, (long long)INT64_MAX);
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: metadata key '%s' has type %s, expected an integer (u8 to i64)",
                       g->path, key, have);
    case WANT_FLOAT:
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: metadata key '%s' has type %s, expected a number (f32, f64 or an "
                       "integer)",
                       g->path, key, have);
    case WANT_BOOL:
        return tn_fail(err, TN_ERR_FORMAT, "%s: metadata key '%s' has type %s, expected bool",
                       g->path, key, have);
    case WANT_STR:
        break;
    }
    return tn_fail(err, TN_ERR_FORMAT, "%s: metadata key '%s' has type %s, expected string",
                   g->path, key, have);
}

int tn_gguf_read_int(const tn_gguf *g, const char *key, int64_t *out, tn_error *err) {
    int rc = tn_gguf_get_int(g, key, out);
    return rc == TN_ERR_FORMAT ? wrong_type(g, key, WANT_INT, err) : rc;
}

int tn_gguf_read_float(const tn_gguf *g, const char *key, double *out, tn_error *err) {
    int rc = tn_gguf_get_float(g, key, out);
    return rc == TN_ERR_FORMAT ? wrong_type(g, key, WANT_FLOAT, err) : rc;
}

static int float_in_range(const tn_gguf *g, const char *key, double v, double lo, double hi,
                          tn_error *err) {
    /* A key written as f32 cannot hold most bounds: 0.1 is 0.10000000149
     * there, 1e-12 is 9.99999996e-13. The nearest f32 to a bound is that
     * bound as the file gives it, and is taken. */
    const tn_gguf_value *val = tn_gguf_find(g, key);
    if (val && val->type == TN_GGUF_F32) {
        if (fabs(lo) <= FLT_MAX && (double)(float)lo < lo)
            lo = (float)lo;
        if (fabs(hi) <= FLT_MAX && (double)(float)hi > hi)
            hi = (float)hi;
    }
    if (!(v >= lo && v <= hi))
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: metadata key '%s' is %g; expected a number from %g to %g",
                       tn_gguf_path(g) ? tn_gguf_path(g) : "model", key, v, lo, hi);
    return TN_OK;
}

int tn_gguf_read_float_in(const tn_gguf *g, const char *key, double lo, double hi, double *out,
                          tn_error *err) {
    int rc = tn_gguf_read_float(g, key, out, err);
    return rc != TN_OK ? rc : float_in_range(g, key, *out, lo, hi, err);
}

int tn_gguf_read_float_or(const tn_gguf *g, const char *key, double def, double lo, double hi,
                          double *out, tn_error *err) {
    double v;
    int rc = tn_gguf_read_float(g, key, &v, err);
    if (rc == TN_ERR_NOT_FOUND || (rc == TN_OK && v == def)) {
        *out = def;
        return rc;
    }
    if (rc != TN_OK || (rc = float_in_range(g, key, v, lo, hi, err)) != TN_OK)
        return rc;
    *out = v;
    return TN_OK;
}

int tn_gguf_read_bool(const tn_gguf *g, const char *key, bool *out, tn_error *err) {
    int rc = tn_gguf_get_bool(g, key, out);
    return rc == TN_ERR_FORMAT ? wrong_type(g, key, WANT_BOOL, err) : rc;
}

int tn_gguf_read_str(const tn_gguf *g, const char *key, tn_str *out, tn_error *err) {
    int rc = tn_gguf_get_str(g, key, out);
    return rc == TN_ERR_FORMAT ? wrong_type(g, key, WANT_STR, err) : rc;
}

int64_t tn_gguf_arr_int(const tn_gguf_value *arr, uint64_t i) {
    if (!arr || arr->type != TN_GGUF_ARRAY || i >= arr->v.arr.n || !arr->v.arr.data)
        return 0;
    const uint8_t *p = arr->v.arr.data;
    switch (arr->v.arr.type) {
    case TN_GGUF_U8: case TN_GGUF_BOOL: return p[i];
    case TN_GGUF_I8: return (int8_t)p[i];
    case TN_GGUF_U16: return tn_rd_u16(p + 2 * i);
    case TN_GGUF_I16: return (int16_t)tn_rd_u16(p + 2 * i);
    case TN_GGUF_U32: return tn_rd_u32(p + 4 * i);
    case TN_GGUF_I32: return (int32_t)tn_rd_u32(p + 4 * i);
    case TN_GGUF_U64: return (int64_t)tn_rd_u64(p + 8 * i);
    case TN_GGUF_I64: return (int64_t)tn_rd_u64(p + 8 * i);
    case TN_GGUF_F32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return (f >= -9.2e18f && f <= 9.2e18f) ? (int64_t)f : 0;
    }
    case TN_GGUF_F64: {
        double d;
        memcpy(&d, p + 8 * i, 8);
        return (d >= -9.2e18 && d <= 9.2e18) ? (int64_t)d : 0;
    }
    default: return 0;
    }
}

double tn_gguf_arr_float(const tn_gguf_value *arr, uint64_t i) {
    if (!arr || arr->type != TN_GGUF_ARRAY || i >= arr->v.arr.n || !arr->v.arr.data)
        return 0.0;
    const uint8_t *p = arr->v.arr.data;
    if (arr->v.arr.type == TN_GGUF_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    if (arr->v.arr.type == TN_GGUF_F64) {
        double d;
        memcpy(&d, p + 8 * i, 8);
        return d;
    }
    if (arr->v.arr.type == TN_GGUF_U64)
        return (double)tn_rd_u64(p + 8 * i);
    return (double)tn_gguf_arr_int(arr, i);
}

int64_t tn_gguf_n_tensors(const tn_gguf *g) { return g->n_tensors; }

const tn_gguf_tensor *tn_gguf_tensor_at(const tn_gguf *g, int64_t i) {
    return (i >= 0 && i < g->n_tensors) ? &g->tensors[i] : NULL;
}

const tn_gguf_tensor *tn_gguf_find_tensor(const tn_gguf *g, const char *name) {
    if (!g->tensor_index_cap)
        return NULL;
    size_t n = strlen(name);
    uint64_t slot = tn_fnv1a(name, n) & (g->tensor_index_cap - 1);
    while (g->tensor_index[slot]) {
        const tn_gguf_tensor *t = &g->tensors[g->tensor_index[slot] - 1];
        if (t->name.len == n && memcmp(t->name.ptr, name, n) == 0)
            return t;
        slot = (slot + 1) & (g->tensor_index_cap - 1);
    }
    return NULL;
}

/* ------------------------------------------------------------------ writer */

typedef struct wkv {
    char *key;
    tn_gguf_value value; /* deep copy: strings/arrays owned by the writer */
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[TN_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset;
    tn_gguf_fill_fn fill;
    void *user;
    void *owned; /* data copied by add_tensor_data */
} wtensor;

struct tn_gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    int status; /* first error of a setter, reported by write */
};

tn_gguf_writer *tn_gguf_writer_new(void) { return calloc(1, sizeof(tn_gguf_writer)); }

/* Owned values: strings are malloc'ed (ptr cast away const); arrays own
 * `data` (fixed types) or `items` (strings/arrays). */
static void owned_value_free(tn_gguf_value *v) {
    if (v->type == TN_GGUF_STRING) {
        free((void *)v->v.str.ptr);
    } else if (v->type == TN_GGUF_ARRAY) {
        if (v->v.arr.items) {
            tn_gguf_value *items = (tn_gguf_value *)v->v.arr.items;
            for (uint64_t i = 0; i < v->v.arr.n; i++)
                owned_value_free(&items[i]);
            free(items);
        } else {
            free((void *)v->v.arr.data);
        }
    }
    memset(v, 0, sizeof *v);
}

void tn_gguf_writer_free(tn_gguf_writer *w) {
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        owned_value_free(&w->kvs[i].value);
    }
    free(w->kvs);
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].owned);
    }
    free(w->tensors);
    free(w);
}

static int copy_value(const tn_gguf_value *src, tn_gguf_value *dst, int depth) {
    memset(dst, 0, sizeof *dst);
    dst->type = src->type;
    if (src->type == TN_GGUF_STRING) {
        char *s = malloc(src->v.str.len + 1);
        if (!s)
            return TN_ERR_NOMEM;
        if (src->v.str.len)
            memcpy(s, src->v.str.ptr, src->v.str.len);
        s[src->v.str.len] = '\0';
        dst->v.str.ptr = s;
        dst->v.str.len = src->v.str.len;
        return TN_OK;
    }
    if (src->type != TN_GGUF_ARRAY) {
        if (src->type >= TN_GGUF_TYPE_COUNT_)
            return TN_ERR_INVALID;
        dst->v = src->v;
        return TN_OK;
    }
    if (depth >= GGUF_MAX_DEPTH || src->v.arr.type >= TN_GGUF_TYPE_COUNT_)
        return TN_ERR_INVALID;
    uint64_t n = src->v.arr.n;
    dst->v.arr.type = src->v.arr.type;
    size_t es = tn_gguf_type_size(src->v.arr.type);
    if (es) {
        uint64_t bytes;
        if (!tn_mul_u64(n, es, &bytes))
            return TN_ERR_INVALID;
        uint8_t *d = malloc(bytes ? bytes : 1);
        if (!d)
            return TN_ERR_NOMEM;
        if (bytes)
            memcpy(d, src->v.arr.data, bytes);
        dst->v.arr.data = d;
        dst->v.arr.n = n;
        return TN_OK;
    }
    tn_gguf_value *items = calloc(n ? n : 1, sizeof *items);
    if (!items)
        return TN_ERR_NOMEM;
    dst->v.arr.items = items;
    for (uint64_t i = 0; i < n; i++) {
        int rc = copy_value(&src->v.arr.items[i], &items[i], depth + 1);
        dst->v.arr.n = i + 1;
        if (rc)
            return rc;
    }
    dst->v.arr.n = n;
    return TN_OK;
}

int tn_gguf_writer_set_value(tn_gguf_writer *w, const char *key, const tn_gguf_value *v) {
    if (!w || !key || !v)
        return TN_ERR_INVALID;
    tn_gguf_value copy;
    int rc = copy_value(v, &copy, 0);
    if (rc) {
        owned_value_free(&copy);
        if (!w->status)
            w->status = rc;
        return rc;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (!strcmp(w->kvs[i].key, key)) {
            owned_value_free(&w->kvs[i].value);
            w->kvs[i].value = copy;
            return TN_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *k = realloc(w->kvs, cap * sizeof *k);
        if (!k) {
            owned_value_free(&copy);
            return w->status = TN_ERR_NOMEM;
        }
        w->kvs = k;
        w->cap_kv = cap;
    }
    char *kc = strdup(key);
    if (!kc) {
        owned_value_free(&copy);
        return w->status = TN_ERR_NOMEM;
    }
    w->kvs[w->n_kv].key = kc;
    w->kvs[w->n_kv].value = copy;
    w->n_kv++;
    return TN_OK;
}

#define SETTER(fn, ctype, gtype, field)                                 \
    int fn(tn_gguf_writer *w, const char *key, ctype v) {               \
        tn_gguf_value val;                                              \
        memset(&val, 0, sizeof val);                                    \
        val.type = gtype;                                               \
        val.v.field = v;                                                \
        return tn_gguf_writer_set_value(w, key, &val);                  \
    }
SETTER(tn_gguf_writer_set_u8, uint8_t, TN_GGUF_U8, u64)
SETTER(tn_gguf_writer_set_i8, int8_t, TN_GGUF_I8, i64)
SETTER(tn_gguf_writer_set_u16, uint16_t, TN_GGUF_U16, u64)
SETTER(tn_gguf_writer_set_i16, int16_t, TN_GGUF_I16, i64)
SETTER(tn_gguf_writer_set_u32, uint32_t, TN_GGUF_U32, u64)
SETTER(tn_gguf_writer_set_i32, int32_t, TN_GGUF_I32, i64)
SETTER(tn_gguf_writer_set_u64, uint64_t, TN_GGUF_U64, u64)
SETTER(tn_gguf_writer_set_i64, int64_t, TN_GGUF_I64, i64)
SETTER(tn_gguf_writer_set_f32, float, TN_GGUF_F32, f64)
SETTER(tn_gguf_writer_set_f64, double, TN_GGUF_F64, f64)
SETTER(tn_gguf_writer_set_bool, bool, TN_GGUF_BOOL, u64)
#undef SETTER

int tn_gguf_writer_set_strn(tn_gguf_writer *w, const char *key, const char *s, uint64_t len) {
    tn_gguf_value val;
    memset(&val, 0, sizeof val);
    val.type = TN_GGUF_STRING;
    val.v.str.ptr = s;
    val.v.str.len = len;
    return tn_gguf_writer_set_value(w, key, &val);
}

int tn_gguf_writer_set_str(tn_gguf_writer *w, const char *key, const char *s) {
    return tn_gguf_writer_set_strn(w, key, s ? s : "", s ? strlen(s) : 0);
}

int tn_gguf_writer_set_arr(tn_gguf_writer *w, const char *key, tn_gguf_type et, const void *data,
                           uint64_t n) {
    if (!tn_gguf_type_size(et))
        return TN_ERR_INVALID;
    /* Host layout -> the little-endian bytes the value tree carries; f32
     * arrays are given as float, which is already their file layout. */
    tn_gguf_value val;
    memset(&val, 0, sizeof val);
    val.type = TN_GGUF_ARRAY;
    val.v.arr.type = et;
    val.v.arr.n = n;
    val.v.arr.data = data;
    return tn_gguf_writer_set_value(w, key, &val);
}

int tn_gguf_writer_set_arr_str(tn_gguf_writer *w, const char *key, const char *const *strs,
                               uint64_t n) {
    if (!w || !key || (n && !strs))
        return TN_ERR_INVALID;
    tn_gguf_value *items = calloc(n ? n : 1, sizeof *items);
    if (!items)
        return w->status = TN_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        items[i].type = TN_GGUF_STRING;
        items[i].v.str.ptr = strs[i] ? strs[i] : "";
        items[i].v.str.len = strs[i] ? strlen(strs[i]) : 0;
    }
    tn_gguf_value val;
    memset(&val, 0, sizeof val);
    val.type = TN_GGUF_ARRAY;
    val.v.arr.type = TN_GGUF_STRING;
    val.v.arr.n = n;
    val.v.arr.items = items;
    int rc = tn_gguf_writer_set_value(w, key, &val);
    free(items);
    return rc;
}

static int add_tensor(tn_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                      const uint64_t *ne, tn_gguf_fill_fn fill, void *user, void *owned) {
    if (!w || !name || !ne || n_dims == 0 || n_dims > TN_MAX_DIMS || !*name ||
        strlen(name) > GGUF_WRITE_MAX_NAME || !tn_type_block_bytes(type))
        return TN_ERR_INVALID;
    uint64_t count = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (!tn_mul_u64(count, ne[d], &count) || count > (uint64_t)INT64_MAX)
            return TN_ERR_INVALID;
    if (ne[0] % tn_type_block_size(type))
        return TN_ERR_INVALID;
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name))
            return TN_ERR_INVALID;
    if (w->n_tensors == w->cap_tensors) {
        size_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        wtensor *t = realloc(w->tensors, cap * sizeof *t);
        if (!t)
            return TN_ERR_NOMEM;
        w->tensors = t;
        w->cap_tensors = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name)
        return TN_ERR_NOMEM;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < TN_MAX_DIMS; d++)
        t->ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
    uint64_t rows = ne[0] ? count / ne[0] : 0;
    t->nbytes = rows * tn_type_row_bytes(type, ne[0]);
    t->fill = fill;
    t->user = user;
    t->owned = owned;
    w->n_tensors++;
    return TN_OK;
}

int tn_gguf_writer_add_tensor(tn_gguf_writer *w, const char *name, uint32_t type,
                              uint32_t n_dims, const uint64_t *ne, tn_gguf_fill_fn fill,
                              void *user) {
    if (!fill)
        return TN_ERR_INVALID;
    int rc = add_tensor(w, name, type, n_dims, ne, fill, user, NULL);
    /* a refused tensor is the caller's to handle; only lost memory poisons the file */
    if (rc == TN_ERR_NOMEM && w && !w->status)
        w->status = rc;
    return rc;
}

int tn_gguf_writer_add_tensor_data(tn_gguf_writer *w, const char *name, uint32_t type,
                                   uint32_t n_dims, const uint64_t *ne, const void *data,
                                   uint64_t nbytes) {
    void *copy = malloc(nbytes ? nbytes : 1);
    if (!copy)
        return TN_ERR_NOMEM;
    if (nbytes)
        memcpy(copy, data, nbytes);
    int rc = add_tensor(w, name, type, n_dims, ne, NULL, NULL, copy);
    if (rc) {
        free(copy);
        if (rc == TN_ERR_NOMEM && w && !w->status)
            w->status = rc;
        return rc;
    }
    if (w->tensors[w->n_tensors - 1].nbytes != nbytes) {
        w->n_tensors--;
        free(w->tensors[w->n_tensors].name);
        free(copy);
        return TN_ERR_INVALID;
    }
    return TN_OK;
}

/* Buffered output with a running file position. */
typedef struct wout {
    FILE *f;
    uint64_t pos;
    bool failed;
    int errnum; /* the failed write's errno */
} wout;

static void put(wout *o, const void *p, size_t n) {
    if (o->failed || n == 0)
        return;
    errno = 0;
    if (fwrite(p, 1, n, o->f) != n) {
        o->failed = true;
        /* errno now, at the failing write: the flush and fsync after it
         * (or fclose) may set another, or none. */
        o->errnum = errno ? errno : EIO;
    }
    o->pos += n;
}
static void put_u32(wout *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(wout *o, uint64_t v) { put(o, &v, 8); }
static void put_str(wout *o, const char *s, uint64_t n) {
    put_u64(o, n);
    put(o, s, (size_t)n);
}
static void put_pad(wout *o, uint64_t align) {
    static const uint8_t zeros[64];
    uint64_t pad = (align - o->pos % align) % align;
    while (pad > 0) {
        size_t k = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
        put(o, zeros, k);
        pad -= k;
    }
}

static void put_value(wout *o, const tn_gguf_value *v, bool with_type);

static void put_scalar(wout *o, tn_gguf_type t, const tn_gguf_value *v) {
    switch (t) {
    case TN_GGUF_U8: case TN_GGUF_BOOL: { uint8_t x = (uint8_t)v->v.u64; put(o, &x, 1); break; }
    case TN_GGUF_I8: { int8_t x = (int8_t)v->v.i64; put(o, &x, 1); break; }
    case TN_GGUF_U16: { uint16_t x = (uint16_t)v->v.u64; put(o, &x, 2); break; }
    case TN_GGUF_I16: { int16_t x = (int16_t)v->v.i64; put(o, &x, 2); break; }
    case TN_GGUF_U32: { uint32_t x = (uint32_t)v->v.u64; put(o, &x, 4); break; }
    case TN_GGUF_I32: { int32_t x = (int32_t)v->v.i64; put(o, &x, 4); break; }
    case TN_GGUF_U64: put(o, &v->v.u64, 8); break;
    case TN_GGUF_I64: put(o, &v->v.i64, 8); break;
    case TN_GGUF_F32: { float x = (float)v->v.f64; put(o, &x, 4); break; }
    case TN_GGUF_F64: put(o, &v->v.f64, 8); break;
    default: break;
    }
}

static void put_value(wout *o, const tn_gguf_value *v, bool with_type) {
    if (with_type)
        put_u32(o, (uint32_t)v->type);
    if (v->type == TN_GGUF_STRING) {
        put_str(o, v->v.str.ptr, v->v.str.len);
    } else if (v->type == TN_GGUF_ARRAY) {
        put_u32(o, (uint32_t)v->v.arr.type);
        put_u64(o, v->v.arr.n);
        size_t es = tn_gguf_type_size(v->v.arr.type);
        if (es)
            put(o, v->v.arr.data, (size_t)(v->v.arr.n * es));
        else
            for (uint64_t i = 0; i < v->v.arr.n; i++)
                put_value(o, &v->v.arr.items[i], false);
    } else {
        put_scalar(o, v->type, v);
    }
}

/* 0 when general.alignment is set to something no reader accepts: writing
 * it would make a file that cannot be opened. */
static uint64_t writer_alignment(const tn_gguf_writer *w) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, "general.alignment")) {
            uint64_t a = w->kvs[i].value.v.u64;
            if (w->kvs[i].value.type != TN_GGUF_U32 || a < 8 || (a & (a - 1)))
                return 0;
            return a;
        }
    return TN_GGUF_DEFAULT_ALIGNMENT;
}

int tn_gguf_writer_write(tn_gguf_writer *w, const char *path, tn_error *err) {
    tn_error_clear(err);
    if (!w || !path)
        return tn_fail(err, TN_ERR_INVALID, "tn_gguf_writer_write: no writer or path");
    if (w->status)
        return tn_fail(err, w->status, "%s: an earlier metadata or tensor call failed (%s)", path,
                       tn_status_name(w->status));
    uint64_t align = writer_alignment(w);
    if (!align)
        return tn_fail(err, TN_ERR_INVALID,
                       "%s: general.alignment must be a u32 power of two of at least 8", path);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        off += w->tensors[i].nbytes;
        off += (align - off % align) % align;
    }

    /* The finished file is renamed over path: a FIFO or a device there (as
     * root, `mkmodel -o /dev/full` turned the device into a model file) would
     * be replaced, and a directory refused only after the whole write. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return tn_fail(err, TN_ERR_IO, "%s is not a regular file (a FIFO, a device or a directory)",
                       path);

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    snprintf(tmp, plen + 16, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return tn_fail_write(err, path, e);
    }
    fchmod(fd, 0644);
    wout o = {.f = fdopen(fd, "wb")};
    if (!o.f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return tn_fail(err, TN_ERR_IO, "%s: cannot write", path);
    }
    /* tn_test_fail_writes: the first write fails as a full disk would. */
    o.errnum = tn_test_write_errno(path);
    o.failed = o.errnum != 0;
    int rc = TN_OK;
    put(&o, GGUF_MAGIC, 4);
    put_u32(&o, 3);
    put_u64(&o, w->n_tensors);
    put_u64(&o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(&o, w->kvs[i].key, strlen(w->kvs[i].key));
        put_value(&o, &w->kvs[i].value, true);
    }
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        put_str(&o, t->name, strlen(t->name));
        put_u32(&o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(&o, t->ne[d]);
        put_u32(&o, t->type);
        put_u64(&o, t->offset);
    }
    put_pad(&o, align);
    uint64_t data_start = o.pos;
    void *buf = NULL;
    size_t buf_cap = 0;
    for (size_t i = 0; i < w->n_tensors && rc == TN_OK && !o.failed; i++) {
        const wtensor *t = &w->tensors[i];
        if (t->owned) {
            put(&o, t->owned, (size_t)t->nbytes);
        } else {
            if (t->nbytes > buf_cap) {
                void *nb = realloc(buf, (size_t)t->nbytes);
                if (!nb) {
                    rc = tn_fail(err, TN_ERR_NOMEM, "%s: out of memory for tensor '%s'", path,
                                 t->name);
                    break;
                }
                buf = nb;
                buf_cap = (size_t)t->nbytes;
            }
            memset(buf, 0, (size_t)t->nbytes);
            rc = t->fill(t->user, t->name, buf, t->nbytes, err);
            if (rc) {
                if (!err || !err->message[0])
                    tn_fail(err, rc, "%s: producing tensor '%s' failed", path, t->name);
                break;
            }
            put(&o, buf, (size_t)t->nbytes);
        }
        /* pad to the next aligned offset, after the last tensor too: ggml
         * (gguf.cpp) writes it and, when it loads the data, reads the whole
         * padded data section */
        uint64_t rel = o.pos - data_start;
        uint64_t pad = (align - rel % align) % align;
        static const uint8_t zeros[64];
        while (pad > 0) {
            size_t k = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
            put(&o, zeros, k);
            pad -= k;
        }
    }
    free(buf);
    if (rc == TN_OK && !o.failed) {
        errno = 0;
        if (fflush(o.f) != 0 || fsync(fileno(o.f)) != 0) {
            o.failed = true;
            o.errnum = errno ? errno : EIO;
        }
    }
    if (rc == TN_OK && o.failed)
        rc = tn_fail_write(err, path, o.errnum);
    errno = 0;
    if (fclose(o.f) != 0 && rc == TN_OK)
        rc = tn_fail_write(err, path, errno ? errno : EIO);
    if (rc == TN_OK && rename(tmp, path) != 0) {
        int e = errno;
        rc = tn_fail(err, TN_ERR_IO, "%s: cannot move the finished file into place: %s", path,
                     strerror(e));
    }
    if (rc != TN_OK)
        unlink(tmp);
    free(tmp);
    return rc;
}
