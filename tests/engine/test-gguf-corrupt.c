/* The GGUF reader against damaged and hostile files.
 *
 * A valid file is made with the writer (every metadata type, string arrays,
 * nested arrays, five tensors of different types), then truncated at every
 * length and at every section boundary, mutated at random, and patched by
 * hand at the fields whose layout we know, to reach each check of the
 * reader. Every failure must come back as an error code with a one-line
 * message that names the file and says what is wrong; nothing may crash,
 * read out of bounds or leak (the suite runs under ASan/UBSan/LSan).
 *
 * Each buffer handed to tn_gguf_open_memory is a fresh allocation of exactly
 * its length, so that AddressSanitizer sees any read past its end.
 */
#include "tn-test.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME "bad.gguf" /* the name the reader must put in its messages */

/* ------------------------------------------------------------ byte buffers */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void b_put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort();
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void b_u8(bytes *b, uint8_t v) { b_put(b, &v, 1); }
static void b_u32(bytes *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(bytes *b, uint64_t v) { b_put(b, &v, 8); }
static void b_str(bytes *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}
static void b_header(bytes *b, uint64_t n_tensors, uint64_t n_kv) {
    b_put(b, "GGUF", 4);
    b_u32(b, 3);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
static void b_pad(bytes *b, size_t align) {
    while (b->n % align)
        b_u8(b, 0);
}

static void put_u32_at(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, 4); }
static void put_u64_at(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }
static uint64_t get_u64_at(const uint8_t *p, size_t off) {
    uint64_t v;
    memcpy(&v, p + off, 8);
    return v;
}

static uint8_t *dup_exact(const uint8_t *p, size_t n) {
    uint8_t *d = malloc(n ? n : 1);
    if (!d)
        abort();
    if (n)
        memcpy(d, p, n);
    return d;
}

/* Offset of the first occurrence of a string's bytes; the valid file uses
 * names that occur once. */
static size_t find_at(const uint8_t *p, size_t n, const char *s) {
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(p + i, s, k) == 0)
            return i;
    fprintf(stderr, "'%s' not found in the test file\n", s);
    abort();
}

/* ------------------------------------------------------------ expectations */

static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static bool one_line(const char *s) { return !strchr(s, '\n') && !strchr(s, '\r'); }

/* Opens a copy of p[0..n) and expects failure with `code` (0: any error code)
 * and a message naming the file and containing `word` (NULL: any). */
static void expect_fail(const char *what, const uint8_t *p, size_t n, int code, const char *word) {
    uint8_t *copy = dup_exact(p, n);
    tn_gguf *g = (tn_gguf *)(uintptr_t)1;
    tn_error err;
    memset(&err, 'x', sizeof err);
    int rc = tn_gguf_open_memory(copy, n, NAME, &g, &err);
    CHECKF(rc != TN_OK, "%s: a damaged file was accepted", what);
    if (rc == TN_OK) {
        tn_gguf_close(g);
    } else {
        CHECKF(g == NULL, "%s: handle not cleared on failure", what);
        CHECKF(err.code == rc, "%s: err.code %d != rc %d", what, err.code, rc);
        CHECKF(code == 0 || rc == code, "%s: code %d (%s), expected %d (%s): %s", what, rc,
               tn_status_name(rc), code, tn_status_name(code), err.message);
        CHECKF(strncmp(err.message, NAME ": ", strlen(NAME) + 2) == 0,
               "%s: message does not start with the file name: %s", what, err.message);
        CHECKF(strlen(err.message) > strlen(NAME) + 10, "%s: message too short: %s", what,
               err.message);
        CHECKF(one_line(err.message), "%s: message is not one line", what);
        CHECKF(!word || contains(err.message, word), "%s: message lacks '%s': %s", what, word,
               err.message);
    }
    free(copy);
}

/* Same, for a file that must still open (returns nothing: closes it). */
static void expect_ok(const char *what, const uint8_t *p, size_t n) {
    uint8_t *copy = dup_exact(p, n);
    tn_gguf *g = NULL;
    tn_error err;
    int rc = tn_gguf_open_memory(copy, n, NAME, &g, &err);
    CHECKF(rc == TN_OK && g, "%s: a valid file was refused: %s", what,
           rc ? err.message : "(no handle)");
    tn_gguf_close(g);
    free(copy);
}

/* ------------------------------------------------------ the valid test file */

/* Tensor names share a length so that one can be patched into another. */
static const char *const tensor_names[] = {"tensor.aa", "tensor.bb", "tensor.cc", "tensor.dd",
                                           "tensor.ee"};
#define N_TENSORS 5
static const uint32_t tensor_types[N_TENSORS] = {TN_TYPE_F32, TN_TYPE_Q8_0, TN_TYPE_F16,
                                                 TN_TYPE_Q4_0, TN_TYPE_Q4_K};
static const uint32_t tensor_ndims[N_TENSORS] = {2, 2, 1, 3, 2};
static const uint64_t tensor_ne[N_TENSORS][4] = {
    {8, 3, 1, 1}, {64, 2, 1, 1}, {16, 1, 1, 1}, {32, 1, 2, 1}, {256, 1, 1, 1}};

static const char *const tokens[] = {"<s>", "hello", "", "w\xc3\xb6rld", "</s>"};
static const uint32_t ints[] = {1, 2, 3, 4, 5};
static const bool flags[] = {true, false, true};
static const float floats[] = {0.5f, -1.0f};

static uint64_t tensor_bytes(int i) {
    uint64_t rows = 1;
    for (int d = 1; d < 4; d++)
        rows *= tensor_ne[i][d];
    return rows * tn_type_row_bytes(tensor_types[i], tensor_ne[i][0]);
}

static uint8_t tensor_byte(int t, uint64_t j) { return (uint8_t)(t * 37 + j * 11 + 5); }

static tn_gguf_value val_arr_items(tn_gguf_type et, const tn_gguf_value *items, uint64_t n) {
    tn_gguf_value x;
    memset(&x, 0, sizeof x);
    x.type = TN_GGUF_ARRAY;
    x.v.arr.type = et;
    x.v.arr.n = n;
    x.v.arr.items = items;
    return x;
}
static tn_gguf_value val_arr_data(tn_gguf_type et, const void *data, uint64_t n) {
    tn_gguf_value x;
    memset(&x, 0, sizeof x);
    x.type = TN_GGUF_ARRAY;
    x.v.arr.type = et;
    x.v.arr.n = n;
    x.v.arr.data = data;
    return x;
}
static tn_gguf_value val_str(const char *s) {
    tn_gguf_value x;
    memset(&x, 0, sizeof x);
    x.type = TN_GGUF_STRING;
    x.v.str.ptr = s;
    x.v.str.len = strlen(s);
    return x;
}

/* Writes the valid file (alignment 0: no general.alignment key, so the
 * default 32) and returns its bytes. */
static uint8_t *make_valid(uint32_t alignment, size_t *len, char *path, size_t path_cap) {
    tn_gguf_writer *w = tn_gguf_writer_new();
    CHECK(w != NULL);
    int rc = 0;
    rc |= tn_gguf_writer_set_str(w, "general.architecture", "llama");
    if (alignment)
        rc |= tn_gguf_writer_set_u32(w, "general.alignment", alignment);
    rc |= tn_gguf_writer_set_u8(w, "t.u8", 200);
    rc |= tn_gguf_writer_set_i8(w, "t.i8", -100);
    rc |= tn_gguf_writer_set_u16(w, "t.u16", 60000);
    rc |= tn_gguf_writer_set_i16(w, "t.i16", -30000);
    rc |= tn_gguf_writer_set_u32(w, "t.u32", 4000000000u);
    rc |= tn_gguf_writer_set_i32(w, "t.i32", -2000000000);
    rc |= tn_gguf_writer_set_f32(w, "t.f32", 1.5f);
    rc |= tn_gguf_writer_set_bool(w, "t.bool", true);
    rc |= tn_gguf_writer_set_u64(w, "t.u64", (1ULL << 63) + 5);
    rc |= tn_gguf_writer_set_i64(w, "t.i64", -(1LL << 62));
    rc |= tn_gguf_writer_set_f64(w, "t.f64", 2.25);
    rc |= tn_gguf_writer_set_str(w, "t.str_empty", "");
    rc |= tn_gguf_writer_set_arr_str(w, "t.tokens", tokens, 5);
    rc |= tn_gguf_writer_set_arr(w, "t.ints", TN_GGUF_U32, ints, 5);
    rc |= tn_gguf_writer_set_arr(w, "t.flags", TN_GGUF_BOOL, flags, 3);
    rc |= tn_gguf_writer_set_arr(w, "t.floats", TN_GGUF_F32, floats, 2);
    rc |= tn_gguf_writer_set_arr(w, "t.empty_arr", TN_GGUF_U8, NULL, 0);
    /* [[1, 2], [3], []] (fixed-size inner arrays carry raw data) and
     * [["a", "bc"], ["d"]] (string arrays carry items) */
    static const int32_t d1[2] = {1, 2}, d2[1] = {3};
    tn_gguf_value inner[3] = {val_arr_data(TN_GGUF_I32, d1, 2), val_arr_data(TN_GGUF_I32, d2, 1),
                              val_arr_data(TN_GGUF_I32, NULL, 0)};
    tn_gguf_value nested = val_arr_items(TN_GGUF_ARRAY, inner, 3);
    rc |= tn_gguf_writer_set_value(w, "t.nested", &nested);
    tn_gguf_value s1[2] = {val_str("a"), val_str("bc")}, s2[1] = {val_str("d")};
    tn_gguf_value sinner[2] = {val_arr_items(TN_GGUF_STRING, s1, 2),
                               val_arr_items(TN_GGUF_STRING, s2, 1)};
    tn_gguf_value nested_str = val_arr_items(TN_GGUF_ARRAY, sinner, 2);
    rc |= tn_gguf_writer_set_value(w, "t.nested_str", &nested_str);
    rc |= tn_gguf_writer_set_i32(w, "t.dup_a", 1);
    rc |= tn_gguf_writer_set_i32(w, "t.dup_b", 2);
    CHECKF(rc == 0, "metadata setters failed");

    for (int t = 0; t < N_TENSORS; t++) {
        uint64_t nb = tensor_bytes(t);
        uint8_t *data = malloc(nb);
        for (uint64_t j = 0; j < nb; j++)
            data[j] = tensor_byte(t, j);
        rc = tn_gguf_writer_add_tensor_data(w, tensor_names[t], tensor_types[t], tensor_ndims[t],
                                            tensor_ne[t], data, nb);
        CHECKF(rc == TN_OK, "add tensor %s: %d", tensor_names[t], rc);
        free(data);
    }
    snprintf(path, path_cap, "%s/valid-%u.gguf", tn_test_tmpdir(), alignment);
    tn_error err;
    rc = tn_gguf_writer_write(w, path, &err);
    CHECKF(rc == TN_OK, "write %s: %s", path, rc ? err.message : "");
    tn_gguf_writer_free(w);

    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        exit(1);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)size);
    CHECK(fread(p, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return p;
}

/* --------------------------------------------- the valid file reads back */

static bool str_is(tn_str s, const char *c) { return tn_str_eq(s, c); }

static void check_valid(const char *what, tn_gguf *g, uint64_t alignment) {
    CHECKF(tn_gguf_version(g) == 3, "%s: version", what);
    CHECKF(tn_gguf_alignment(g) == alignment, "%s: alignment %llu", what,
           (unsigned long long)tn_gguf_alignment(g));
    CHECKF(tn_gguf_data_offset(g) % alignment == 0, "%s: data section not aligned", what);
    CHECKF(tn_gguf_n_kv(g) == 22 + (alignment != 32), "%s: n_kv %lld", what,
           (long long)tn_gguf_n_kv(g));
    CHECKF(tn_gguf_n_tensors(g) == N_TENSORS, "%s: n_tensors", what);

    int64_t iv = 0;
    double fv = 0;
    bool bv = false;
    tn_str sv = {0};
    CHECK(tn_gguf_get_str(g, "general.architecture", &sv) == TN_OK && str_is(sv, "llama"));
    CHECK(tn_gguf_get_int(g, "t.u8", &iv) == TN_OK && iv == 200);
    CHECK(tn_gguf_get_int(g, "t.i8", &iv) == TN_OK && iv == -100);
    CHECK(tn_gguf_get_int(g, "t.u16", &iv) == TN_OK && iv == 60000);
    CHECK(tn_gguf_get_int(g, "t.i16", &iv) == TN_OK && iv == -30000);
    CHECK(tn_gguf_get_int(g, "t.u32", &iv) == TN_OK && iv == 4000000000LL);
    CHECK(tn_gguf_get_int(g, "t.i32", &iv) == TN_OK && iv == -2000000000LL);
    CHECK(tn_gguf_get_float(g, "t.f32", &fv) == TN_OK && fv == 1.5);
    CHECK(tn_gguf_get_bool(g, "t.bool", &bv) == TN_OK && bv);
    const tn_gguf_value *v = tn_gguf_find(g, "t.u64");
    CHECK(v && v->type == TN_GGUF_U64 && v->v.u64 == (1ULL << 63) + 5);
    CHECK(tn_gguf_get_int(g, "t.u64", &iv) == TN_ERR_FORMAT); /* does not fit an int64 */
    CHECK(tn_gguf_get_int(g, "t.i64", &iv) == TN_OK && iv == -(1LL << 62));
    CHECK(tn_gguf_get_float(g, "t.f64", &fv) == TN_OK && fv == 2.25);
    CHECK(tn_gguf_get_str(g, "t.str_empty", &sv) == TN_OK && sv.len == 0);
    CHECK(tn_gguf_get_str(g, "t.u8", &sv) == TN_ERR_FORMAT);
    CHECK(tn_gguf_get_int(g, "t.missing", &iv) == TN_ERR_NOT_FOUND);
    if (alignment != 32) {
        v = tn_gguf_find(g, "general.alignment");
        CHECK(v && v->type == TN_GGUF_U32 && v->v.u64 == alignment);
    }

    v = tn_gguf_find(g, "t.tokens");
    CHECKF(v && v->type == TN_GGUF_ARRAY && v->v.arr.type == TN_GGUF_STRING && v->v.arr.n == 5,
           "%s: t.tokens", what);
    if (v && v->v.arr.items)
        for (int i = 0; i < 5; i++)
            CHECKF(str_is(v->v.arr.items[i].v.str, tokens[i]), "%s: token %d", what, i);
    v = tn_gguf_find(g, "t.ints");
    CHECK(v && v->v.arr.type == TN_GGUF_U32 && v->v.arr.n == 5);
    for (uint64_t i = 0; v && i < 5; i++)
        CHECK(tn_gguf_arr_int(v, i) == (int64_t)ints[i]);
    v = tn_gguf_find(g, "t.flags");
    CHECK(v && v->v.arr.type == TN_GGUF_BOOL && v->v.arr.n == 3 && tn_gguf_arr_int(v, 0) == 1 &&
          tn_gguf_arr_int(v, 1) == 0 && tn_gguf_arr_int(v, 2) == 1);
    v = tn_gguf_find(g, "t.floats");
    CHECK(v && v->v.arr.n == 2 && tn_gguf_arr_float(v, 0) == 0.5 &&
          tn_gguf_arr_float(v, 1) == -1.0);
    v = tn_gguf_find(g, "t.empty_arr");
    CHECK(v && v->type == TN_GGUF_ARRAY && v->v.arr.type == TN_GGUF_U8 && v->v.arr.n == 0);
    v = tn_gguf_find(g, "t.nested");
    CHECKF(v && v->v.arr.type == TN_GGUF_ARRAY && v->v.arr.n == 3 && v->v.arr.items,
           "%s: t.nested", what);
    if (v && v->v.arr.items && v->v.arr.n == 3) {
        const tn_gguf_value *in = v->v.arr.items;
        CHECK(in[0].v.arr.type == TN_GGUF_I32 && in[0].v.arr.n == 2 &&
              tn_gguf_arr_int(&in[0], 0) == 1 && tn_gguf_arr_int(&in[0], 1) == 2);
        CHECK(in[1].v.arr.n == 1 && tn_gguf_arr_int(&in[1], 0) == 3);
        CHECK(in[2].v.arr.n == 0);
    }
    v = tn_gguf_find(g, "t.nested_str");
    CHECK(v && v->v.arr.type == TN_GGUF_ARRAY && v->v.arr.n == 2 && v->v.arr.items);
    if (v && v->v.arr.items && v->v.arr.n == 2) {
        const tn_gguf_value *in = v->v.arr.items;
        CHECK(in[0].v.arr.type == TN_GGUF_STRING && in[0].v.arr.n == 2 &&
              str_is(in[0].v.arr.items[0].v.str, "a") && str_is(in[0].v.arr.items[1].v.str, "bc"));
        CHECK(in[1].v.arr.n == 1 && str_is(in[1].v.arr.items[0].v.str, "d"));
    }

    for (int t = 0; t < N_TENSORS; t++) {
        const tn_gguf_tensor *ti = tn_gguf_tensor_at(g, t);
        CHECK(ti != NULL);
        if (!ti)
            continue;
        CHECKF(str_is(ti->name, tensor_names[t]), "%s: tensor %d name", what, t);
        CHECK(tn_gguf_find_tensor(g, tensor_names[t]) == ti);
        CHECK(ti->type == tensor_types[t] && ti->n_dims == tensor_ndims[t]);
        for (int d = 0; d < 4; d++)
            CHECK(ti->ne[d] == tensor_ne[t][d]);
        CHECKF(ti->nbytes == tensor_bytes(t), "%s: %s nbytes %llu", what, tensor_names[t],
               (unsigned long long)ti->nbytes);
        CHECKF(ti->offset % alignment == 0, "%s: %s offset %llu not aligned", what,
               tensor_names[t], (unsigned long long)ti->offset);
        bool same = true;
        for (uint64_t j = 0; j < ti->nbytes; j++)
            same = same && ((const uint8_t *)ti->data)[j] == tensor_byte(t, j);
        CHECKF(same, "%s: %s data differs", what, tensor_names[t]);
    }
    CHECK(tn_gguf_find_tensor(g, "tensor.zz") == NULL);
    CHECK(tn_gguf_find_tensor(g, "tensor.a") == NULL);
    CHECK(tn_gguf_tensor_at(g, N_TENSORS) == NULL && tn_gguf_tensor_at(g, -1) == NULL);
}

/* ------------------------------------------------------------- truncation */

/* End of the furthest tensor's data: every shorter prefix must fail, every
 * longer one (that cuts only the final padding) still opens. */
static size_t data_end(tn_gguf *g, const uint8_t *base) {
    size_t end = 0;
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        size_t e = (size_t)((const uint8_t *)t->data - base) + (size_t)t->nbytes;
        if (e > end)
            end = e;
    }
    return end;
}

static void truncate_everywhere(const char *what, const uint8_t *p, size_t n, size_t end) {
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        char label[128];
        snprintf(label, sizeof label, "%s cut to %zu of %zu bytes", what, len, n);
        int before = tn_test_failures;
        if (len < end)
            expect_fail(label, p, len, TN_ERR_FORMAT, NULL);
        else
            expect_ok(label, p, len);
        if (tn_test_failures != before && ++bad > 10) {
            fprintf(stderr, "%s: stopping after 10 failing lengths\n", what);
            return;
        }
    }
}

/* Cuts at each field boundary the handle tells us about, and checks that
 * the message says where the file ends. */
static void truncate_at_boundaries(const char *what, tn_gguf *g, const uint8_t *p, size_t n) {
    char label[160];
    /* header fields */
    static const size_t header_cuts[] = {1, 3, 4, 6, 8, 12, 16, 20};
    for (size_t i = 0; i < sizeof header_cuts / sizeof header_cuts[0]; i++) {
        snprintf(label, sizeof label, "%s cut in the header at %zu", what, header_cuts[i]);
        expect_fail(label, p, header_cuts[i], TN_ERR_FORMAT, "header");
    }
    expect_fail("empty", p, 0, TN_ERR_FORMAT, "empty");
    /* metadata: before each key's length, inside the key, at its type, at
     * its value */
    for (int64_t i = 0; i < tn_gguf_n_kv(g); i++) {
        tn_str key = tn_gguf_kv_key(g, i);
        size_t k = (size_t)((const uint8_t *)key.ptr - p);
        size_t cuts[] = {k - 8, k - 1, k + (size_t)key.len / 2, k + (size_t)key.len,
                         k + (size_t)key.len + 4, k + (size_t)key.len + 5};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            snprintf(label, sizeof label, "%s cut in metadata key %lld at %zu", what,
                     (long long)i, cuts[c]);
            expect_fail(label, p, cuts[c], TN_ERR_FORMAT, "metadata");
        }
    }
    /* tensor infos: each field of each tensor */
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        size_t k = (size_t)((const uint8_t *)t->name.ptr - p);
        size_t dims = k + (size_t)t->name.len + 4;
        size_t cuts[] = {k - 8, k, k + (size_t)t->name.len, dims, dims + 8 * t->n_dims,
                         dims + 8 * t->n_dims + 4, dims + 8 * t->n_dims + 11};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            snprintf(label, sizeof label, "%s cut in tensor info %lld at %zu", what,
                     (long long)i, cuts[c]);
            expect_fail(label, p, cuts[c], TN_ERR_FORMAT, "tensor");
        }
    }
    /* data: at the start of the section, and inside each tensor */
    size_t d0 = (size_t)tn_gguf_data_offset(g);
    snprintf(label, sizeof label, "%s cut at the data section", what);
    expect_fail(label, p, d0, TN_ERR_FORMAT, "ends past the end of the file");
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        size_t s = (size_t)((const uint8_t *)t->data - p);
        size_t cuts[] = {s, s + 1, s + (size_t)t->nbytes - 1};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            if (cuts[c] >= n)
                continue;
            snprintf(label, sizeof label, "%s cut in the data of %.*s at %zu", what,
                     (int)t->name.len, t->name.ptr, cuts[c]);
            /* the first tensor whose data is cut is the one named */
            expect_fail(label, p, cuts[c], TN_ERR_FORMAT, "ends past the end of the file");
        }
    }
    /* the message names the tensor whose data is missing */
    const tn_gguf_tensor *last = tn_gguf_tensor_at(g, tn_gguf_n_tensors(g) - 1);
    size_t cut = (size_t)((const uint8_t *)last->data - p) + (size_t)last->nbytes - 1;
    snprintf(label, sizeof label, "%s cut in the last tensor", what);
    char word[64];
    snprintf(word, sizeof word, "'%.*s'", (int)last->name.len, last->name.ptr);
    expect_fail(label, p, cut, TN_ERR_FORMAT, word);
}

/* Truncated files through tn_gguf_open (the mmap path). */
static void truncate_files(const uint8_t *p, size_t n, size_t end) {
    const size_t cuts[] = {1, 4, 10, 24, n / 3, n / 2, end - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/cut-%zu.gguf", tn_test_tmpdir(), cuts[i]);
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(p, 1, cuts[i], f) == cuts[i]);
        if (f)
            fclose(f);
        tn_gguf *g = NULL;
        tn_error err;
        int rc = tn_gguf_open(path, &g, &err);
        CHECKF(rc == TN_ERR_FORMAT && !g, "%s: rc %d", path, rc);
        CHECKF(contains(err.message, path), "message does not name %s: %s", path, err.message);
        tn_gguf_close(g);
        unlink(path);
    }
}

/* ---------------------------------------------------------- random damage */

static void mutate_randomly(const uint8_t *p, size_t n, int rounds) {
    uint64_t rng = 12345;
    uint8_t *copy = malloc(n);
    for (int r = 0; r < rounds; r++) {
        memcpy(copy, p, n);
        int k = 1 + (int)(tn_test_rand(&rng) % 4);
        for (int j = 0; j < k; j++) {
            size_t at = (size_t)(tn_test_rand(&rng) % n);
            switch (tn_test_rand(&rng) % 3) {
            case 0: copy[at] = (uint8_t)tn_test_rand(&rng); break;
            case 1: copy[at] ^= (uint8_t)(1u << (tn_test_rand(&rng) % 8)); break;
            default: /* a large value over an 8-byte field */
                if (at + 8 <= n)
                    put_u64_at(copy, at, tn_test_rand(&rng) >> (tn_test_rand(&rng) % 64));
            }
        }
        size_t len = (tn_test_rand(&rng) % 4 == 0) ? (size_t)(tn_test_rand(&rng) % (n + 1)) : n;
        uint8_t *exact = dup_exact(copy, len);
        tn_gguf *g = NULL;
        tn_error err;
        int rc = tn_gguf_open_memory(exact, len, NAME, &g, &err);
        if (rc == TN_OK) {
            /* whatever was accepted must lie inside the buffer */
            for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
                const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
                const uint8_t *d = t->data;
                CHECKF(d >= exact && t->nbytes <= len && (size_t)(d - exact) <= len - t->nbytes,
                       "mutation %d: tensor %lld outside the file", r, (long long)i);
            }
            tn_gguf_close(g);
        } else {
            CHECKF(g == NULL && strncmp(err.message, NAME ": ", strlen(NAME) + 2) == 0 &&
                       one_line(err.message) && strlen(err.message) > strlen(NAME) + 10,
                   "mutation %d: bad message: %s", r, err.message);
        }
        free(exact);
    }
    free(copy);
}

/* ------------------------------------------------------- targeted patches */

static void patched(const char *what, const uint8_t *p, size_t n, size_t off, const void *v,
                    size_t vn, int code, const char *word) {
    uint8_t *c = dup_exact(p, n);
    memcpy(c + off, v, vn);
    expect_fail(what, c, n, code, word);
    free(c);
}
static void patched_u32(const char *what, const uint8_t *p, size_t n, size_t off, uint32_t v,
                        int code, const char *word) {
    patched(what, p, n, off, &v, 4, code, word);
}
static void patched_u64(const char *what, const uint8_t *p, size_t n, size_t off, uint64_t v,
                        int code, const char *word) {
    patched(what, p, n, off, &v, 8, code, word);
}

typedef struct tinfo_at {
    size_t name, n_dims, dims, type, offset;
} tinfo_at;

static tinfo_at tensor_fields(const uint8_t *p, size_t n, int t) {
    tinfo_at a;
    a.name = find_at(p, n, tensor_names[t]);
    a.n_dims = a.name + strlen(tensor_names[t]);
    a.dims = a.n_dims + 4;
    a.type = a.dims + 8 * tensor_ndims[t];
    a.offset = a.type + 4;
    return a;
}

/* Offset of a key's type field; its value follows 4 bytes later. */
static size_t key_type_at(const uint8_t *p, size_t n, const char *key) {
    /* the key is preceded by its u64 length: search for both so that
     * "t.u8" does not match inside another key */
    size_t k = strlen(key);
    for (size_t i = 8; i + k <= n; i++)
        if (get_u64_at(p, i - 8) == k && memcmp(p + i, key, k) == 0)
            return i + k;
    fprintf(stderr, "key '%s' not found\n", key);
    abort();
}

static void targeted(const uint8_t *p, size_t n, uint64_t alignment) {
    char label[160];
    if (n < 256)
        abort(); /* the valid file is larger; tells the compiler the patches fit */
    /* magic and version */
    patched("magic GGUX", p, n, 0, "GGUX", 4, TN_ERR_FORMAT, "not a GGUF file");
    patched("magic ggml", p, n, 0, "lmgg", 4, TN_ERR_FORMAT, "not a GGUF file");
    expect_fail("text file", (const uint8_t *)"hello, world\n", 13, TN_ERR_FORMAT,
                "not a GGUF file");
    const uint32_t versions[] = {0, 1, 4, 99, 0x03000000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        snprintf(label, sizeof label, "version %u", versions[i]);
        patched_u32(label, p, n, 4, versions[i], TN_ERR_UNSUPPORTED, "version");
    }

    /* header counts near 2^64 */
    const uint64_t huge[] = {UINT64_MAX, UINT64_MAX - 1, 1ULL << 63, (1ULL << 32) + 1,
                             UINT32_MAX, 1ULL << 40, n};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        snprintf(label, sizeof label, "n_tensors %llu", (unsigned long long)huge[i]);
        patched_u64(label, p, n, 8, huge[i], TN_ERR_FORMAT, "tensors");
        snprintf(label, sizeof label, "n_kv %llu", (unsigned long long)huge[i]);
        patched_u64(label, p, n, 16, huge[i], TN_ERR_FORMAT, "metadata");
    }
    /* one tensor more or fewer than the infos hold */
    patched_u64("n_tensors + 1", p, n, 8, N_TENSORS + 1, 0, NULL);

    /* string lengths: a key, a value, a tensor name, a string in an array */
    size_t arch = key_type_at(p, n, "general.architecture");
    size_t arch_len = arch - strlen("general.architecture") - 8;
    const uint64_t big_len[] = {UINT64_MAX, UINT64_MAX - 7, 1ULL << 63, n, n - arch_len};
    for (size_t i = 0; i < sizeof big_len / sizeof big_len[0]; i++) {
        snprintf(label, sizeof label, "key length %llu", (unsigned long long)big_len[i]);
        patched_u64(label, p, n, arch_len, big_len[i], TN_ERR_FORMAT, "string");
        snprintf(label, sizeof label, "string value length %llu", (unsigned long long)big_len[i]);
        patched_u64(label, p, n, arch + 4, big_len[i], TN_ERR_FORMAT, "remain");
        tinfo_at ta = tensor_fields(p, n, 2);
        snprintf(label, sizeof label, "tensor name length %llu", (unsigned long long)big_len[i]);
        patched_u64(label, p, n, ta.name - 8, big_len[i], TN_ERR_FORMAT, NULL);
        size_t hello = find_at(p, n, "hello");
        snprintf(label, sizeof label, "string in an array, length %llu",
                 (unsigned long long)big_len[i]);
        patched_u64(label, p, n, hello - 8, big_len[i], TN_ERR_FORMAT, "string");
    }
    {
        tinfo_at ta = tensor_fields(p, n, 1);
        patched_u64("empty tensor name", p, n, ta.name - 8, 0, TN_ERR_FORMAT, NULL);
    }

    /* array counts near 2^64, including counts whose byte size wraps */
    size_t ints_at = key_type_at(p, n, "t.ints") + 4 + 4; /* type, elem type */
    const uint64_t big_n[] = {UINT64_MAX, (1ULL << 62), (1ULL << 62) + 1, 1ULL << 63, n};
    for (size_t i = 0; i < sizeof big_n / sizeof big_n[0]; i++) {
        snprintf(label, sizeof label, "u32 array count %llu", (unsigned long long)big_n[i]);
        patched_u64(label, p, n, ints_at, big_n[i], TN_ERR_FORMAT, "does not fit");
    }
    size_t tok_at = key_type_at(p, n, "t.tokens") + 4 + 4;
    const uint64_t big_s[] = {UINT64_MAX, 1ULL << 61, n / 8};
    for (size_t i = 0; i < sizeof big_s / sizeof big_s[0]; i++) {
        snprintf(label, sizeof label, "string array count %llu", (unsigned long long)big_s[i]);
        patched_u64(label, p, n, tok_at, big_s[i], TN_ERR_FORMAT, "cannot fit");
    }
    /* one string more than present: the next key is read as a string */
    patched_u64("string array count + 1", p, n, tok_at, 6, 0, NULL);
    size_t nest_at = key_type_at(p, n, "t.nested") + 4 + 4;
    patched_u64("nested array count 2^64-1", p, n, nest_at, UINT64_MAX, TN_ERR_FORMAT, "fit");
    patched_u64("inner array count 2^64-1", p, n, nest_at + 8 + 4, UINT64_MAX, TN_ERR_FORMAT,
                "fit");
    /* a u64 array whose byte size wraps to exactly 0 */
    {
        uint8_t *c = dup_exact(p, n);
        put_u32_at(c, ints_at - 4, TN_GGUF_U64);
        put_u64_at(c, ints_at, 1ULL << 61);
        expect_fail("u64 array of 2^61 items", c, n, TN_ERR_FORMAT, "does not fit");
        free(c);
    }

    /* unknown metadata types */
    size_t u8_type = key_type_at(p, n, "t.u8");
    const uint32_t bad_types[] = {13, 14, 100, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        snprintf(label, sizeof label, "metadata type %u", bad_types[i]);
        patched_u32(label, p, n, u8_type, bad_types[i], TN_ERR_FORMAT, "unknown type");
        snprintf(label, sizeof label, "array element type %u", bad_types[i]);
        patched_u32(label, p, n, ints_at - 4, bad_types[i], TN_ERR_FORMAT,
                    "unknown element type");
    }

    /* bools other than 0 or 1, scalar and in an array */
    size_t bool_at = key_type_at(p, n, "t.bool") + 4;
    const uint8_t bad_bools[] = {2, 0x80, 0xff};
    for (size_t i = 0; i < sizeof bad_bools; i++) {
        snprintf(label, sizeof label, "bool %u", bad_bools[i]);
        patched(label, p, n, bool_at, &bad_bools[i], 1, TN_ERR_FORMAT, "not 0 or 1");
        snprintf(label, sizeof label, "bool array item %u", bad_bools[i]);
        patched(label, p, n, key_type_at(p, n, "t.flags") + 4 + 4 + 8 + 1, &bad_bools[i], 1,
                TN_ERR_FORMAT, "not 0 or 1");
    }

    /* duplicate keys and tensor names (same length, patched in place) */
    patched("duplicate key", p, n, find_at(p, n, "t.dup_b"), "t.dup_a", 7, TN_ERR_FORMAT,
            "'t.dup_a' appears twice");
    patched("duplicate tensor", p, n, find_at(p, n, "tensor.cc"), "tensor.aa", 9, TN_ERR_FORMAT,
            "'tensor.aa' appears twice");
    patched("duplicate of the last tensor", p, n, find_at(p, n, "tensor.ee"), "tensor.dd", 9,
            TN_ERR_FORMAT, "twice");

    /* n_dims 0 and above 4 */
    for (int t = 0; t < N_TENSORS; t++) {
        tinfo_at ta = tensor_fields(p, n, t);
        const uint32_t bad_dims[] = {0, 5, 64, 0xffffffffu};
        for (size_t i = 0; i < sizeof bad_dims / sizeof bad_dims[0]; i++) {
            snprintf(label, sizeof label, "%s n_dims %u", tensor_names[t], bad_dims[i]);
            patched_u32(label, p, n, ta.n_dims, bad_dims[i], TN_ERR_FORMAT, "dimensions");
        }
    }

    /* dimension products that overflow, and sizes that overflow */
    {
        tinfo_at ta = tensor_fields(p, n, 0); /* f32 [8, 3] */
        const uint64_t pairs[][2] = {{1ULL << 32, 1ULL << 32},
                                     {1ULL << 62, 4},
                                     {UINT64_MAX, 1},
                                     {1ULL << 63, 1},
                                     {3, 1ULL << 63},
                                     {(1ULL << 62) + 1, 1}, /* elements fit, bytes wrap to 4 */
                                     {1ULL << 62, 1},       /* bytes wrap to 0 */
                                     {1ULL << 61, 2}};
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            uint8_t *c = dup_exact(p, n);
            put_u64_at(c, ta.dims, pairs[i][0]);
            put_u64_at(c, ta.dims + 8, pairs[i][1]);
            snprintf(label, sizeof label, "dims [%llu, %llu]", (unsigned long long)pairs[i][0],
                     (unsigned long long)pairs[i][1]);
            expect_fail(label, c, n, TN_ERR_FORMAT, "overflows");
            free(c);
        }
        tinfo_at tq = tensor_fields(p, n, 4); /* q4_K [256, 1] */
        uint8_t *c = dup_exact(p, n);
        put_u64_at(c, tq.dims, 1ULL << 62);
        put_u64_at(c, tq.dims + 8, 2);
        expect_fail("q4_K [2^62, 2]", c, n, TN_ERR_FORMAT, "overflows");
        free(c);
        tinfo_at td = tensor_fields(p, n, 3); /* q4_0 [32, 1, 2] */
        c = dup_exact(p, n);
        put_u64_at(c, td.dims + 8, 1ULL << 40);
        put_u64_at(c, td.dims + 16, 1ULL << 40);
        expect_fail("3-d product 2^85", c, n, TN_ERR_FORMAT, "overflows");
        free(c);
        /* a big but representable tensor: fails on the file size, not on math */
        c = dup_exact(p, n);
        put_u64_at(c, td.dims + 16, 1ULL << 30);
        expect_fail("3-d tensor of 2^35 values", c, n, TN_ERR_FORMAT,
                    "ends past the end of the file");
        free(c);
    }
    /* a row that is not whole blocks */
    {
        tinfo_at ta = tensor_fields(p, n, 1); /* q8_0 [64, 2] */
        patched_u64("q8_0 row of 48", p, n, ta.dims, 48, TN_ERR_FORMAT, "block size");
    }

    /* unknown tensor types */
    {
        tinfo_at ta = tensor_fields(p, n, 2);
        const uint32_t bad[] = {4, 5, 31, 36, 40, 1000, 0xffffffffu};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            snprintf(label, sizeof label, "tensor type %u", bad[i]);
            patched_u32(label, p, n, ta.type, bad[i], TN_ERR_UNSUPPORTED, "unknown tensor type");
        }
    }

    /* offsets past the end, overflowing, and misaligned */
    for (int t = 0; t < N_TENSORS; t++) {
        tinfo_at ta = tensor_fields(p, n, t);
        uint64_t off = get_u64_at(p, ta.offset);
        const uint64_t past[] = {n - n % alignment + alignment, 1ULL << 40,
                                 UINT64_MAX - (alignment - 1), UINT64_MAX + 1 - 2 * alignment};
        for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
            snprintf(label, sizeof label, "%s offset %llu", tensor_names[t],
                     (unsigned long long)past[i]);
            patched_u64(label, p, n, ta.offset, past[i], TN_ERR_FORMAT,
                        "ends past the end of the file");
        }
        const uint64_t skew[] = {1, alignment / 2, alignment - 1, 8};
        for (size_t i = 0; i < sizeof skew / sizeof skew[0]; i++) {
            snprintf(label, sizeof label, "%s offset %llu + %llu", tensor_names[t],
                     (unsigned long long)off, (unsigned long long)skew[i]);
            patched_u64(label, p, n, ta.offset, off + skew[i], TN_ERR_FORMAT, "alignment");
        }
    }
    /* an aligned offset that overlaps another tensor is allowed (read-only
     * mapping, nothing is unsafe), as long as it stays inside the file */
    {
        tinfo_at ta = tensor_fields(p, n, 2);
        uint8_t *c = dup_exact(p, n);
        put_u64_at(c, ta.offset, 0);
        expect_ok("overlapping offsets", c, n);
        free(c);
    }

    /* general.alignment: wrong type (same size, patched), zero, not a power
     * of two, below 8 */
    if (alignment != 32) {
        size_t at = key_type_at(p, n, "general.alignment");
        patched_u32("alignment as i32", p, n, at, TN_GGUF_I32, TN_ERR_FORMAT, "alignment");
        patched_u32("alignment as f32", p, n, at, TN_GGUF_F32, TN_ERR_FORMAT, "alignment");
        const uint32_t bad[] = {0, 1, 2, 4, 48, 100, 0x80000001u};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            snprintf(label, sizeof label, "alignment %u", bad[i]);
            patched_u32(label, p, n, at + 4, bad[i], TN_ERR_FORMAT, "alignment");
        }
        /* a larger power of two moves the data section: the tensors then
         * end past the end of the file */
        patched_u32("alignment 2^31", p, n, at + 4, 0x80000000u, TN_ERR_FORMAT, "alignment");
    }
}

/* Files built from scratch: what the writer cannot produce. */
static void handmade(void) {
    bytes b = {0};
    char label[128];

    /* general.alignment as a u64 and as a string */
    b_header(&b, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, TN_GGUF_U64);
    b_u64(&b, 64);
    expect_fail("alignment as u64", b.p, b.n, TN_ERR_FORMAT, "general.alignment has type u64");
    b.n = 0;
    b_header(&b, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, TN_GGUF_STRING);
    b_str(&b, "32");
    expect_fail("alignment as string", b.p, b.n, TN_ERR_FORMAT, "general.alignment has type");

    /* arrays nested to the limit open; one level more does not */
    for (int depth = 1; depth <= 10; depth++) {
        b.n = 0;
        b_header(&b, 0, 1);
        b_str(&b, "t.deep");
        b_u32(&b, TN_GGUF_ARRAY);
        for (int d = 1; d < depth; d++) {
            b_u32(&b, TN_GGUF_ARRAY);
            b_u64(&b, 1);
        }
        b_u32(&b, TN_GGUF_U8);
        b_u64(&b, 1);
        b_u8(&b, 7);
        snprintf(label, sizeof label, "arrays nested %d deep", depth);
        if (depth <= 8) {
            tn_gguf *g = NULL;
            tn_error err;
            uint8_t *c = dup_exact(b.p, b.n);
            int rc = tn_gguf_open_memory(c, b.n, NAME, &g, &err);
            CHECKF(rc == TN_OK, "%s: %s", label, rc ? err.message : "");
            if (rc == TN_OK) {
                const tn_gguf_value *v = tn_gguf_find(g, "t.deep");
                for (int d = 1; v && d < depth; d++)
                    v = v->v.arr.n == 1 && v->v.arr.items ? &v->v.arr.items[0] : NULL;
                CHECKF(v && v->v.arr.type == TN_GGUF_U8 && tn_gguf_arr_int(v, 0) == 7,
                       "%s: innermost value", label);
            }
            tn_gguf_close(g);
            free(c);
        } else {
            expect_fail(label, b.p, b.n, TN_ERR_FORMAT, "nested deeper than");
        }
    }
    /* a million levels: refused at the limit, without deep recursion */
    b.n = 0;
    b_header(&b, 0, 1);
    b_str(&b, "t.abyss");
    b_u32(&b, TN_GGUF_ARRAY);
    for (int d = 0; d < 1000000; d++) {
        b_u32(&b, TN_GGUF_ARRAY);
        b_u64(&b, 1);
    }
    expect_fail("arrays nested a million deep", b.p, b.n, TN_ERR_FORMAT, "nested deeper than");

    /* a nested array that fails part way must free what it read */
    b.n = 0;
    b_header(&b, 0, 1);
    b_str(&b, "t.partial");
    b_u32(&b, TN_GGUF_ARRAY);
    b_u32(&b, TN_GGUF_ARRAY);
    b_u64(&b, 2);
    b_u32(&b, TN_GGUF_STRING);
    b_u64(&b, 3);
    b_str(&b, "a");
    b_u64(&b, 1000); /* the second string claims more than the file has */
    for (int i = 0; i < 6; i++)
        b_u64(&b, 0);
    expect_fail("nested array failing part way", b.p, b.n, TN_ERR_FORMAT, "remain");

    /* many keys: duplicate detection stays fast (a hash, not all pairs),
     * and finds a duplicate however far apart the two are */
    for (int dup = 0; dup < 2; dup++) {
        const uint64_t many = 200000;
        b.n = 0;
        b_header(&b, 0, many);
        for (uint64_t i = 0; i < many; i++) {
            char key[32];
            snprintf(key, sizeof key, "k.%llu", (unsigned long long)(dup && i == many - 1 ? 0 : i));
            b_str(&b, key);
            b_u32(&b, TN_GGUF_U8);
            b_u8(&b, 1);
        }
        if (dup) {
            expect_fail("200000 keys, the last repeats the first", b.p, b.n, TN_ERR_FORMAT,
                        "'k.0' appears twice");
        } else {
            uint8_t *c = dup_exact(b.p, b.n);
            tn_gguf *g = NULL;
            tn_error err;
            int rc = tn_gguf_open_memory(c, b.n, NAME, &g, &err);
            CHECKF(rc == TN_OK && tn_gguf_n_kv(g) == (int64_t)many, "200000 keys: %s",
                   rc ? err.message : "");
            tn_gguf_close(g);
            free(c);
        }
    }

    /* zero tensors, zero keys: valid */
    b.n = 0;
    b_header(&b, 0, 0);
    expect_ok("empty GGUF", b.p, b.n);
    /* a header that claims one key and has none */
    b.n = 0;
    b_header(&b, 0, 1);
    expect_fail("one key claimed, none present", b.p, b.n, TN_ERR_FORMAT, NULL);

    /* a tensor with zero elements is valid and has no data */
    b.n = 0;
    b_header(&b, 1, 0);
    b_str(&b, "w.empty");
    b_u32(&b, 2);
    b_u64(&b, 0);
    b_u64(&b, 5);
    b_u32(&b, TN_TYPE_F32);
    b_u64(&b, 0);
    b_pad(&b, 32);
    expect_ok("zero-element tensor", b.p, b.n);

    /* GGUF v2 (u64 counts like v3) is read */
    b.n = 0;
    b_header(&b, 0, 1);
    put_u32_at(b.p, 4, 2);
    b_str(&b, "general.architecture");
    b_u32(&b, TN_GGUF_STRING);
    b_str(&b, "llama");
    expect_ok("GGUF v2", b.p, b.n);

    free(b.p);
}

/* tn_gguf_open on things that are not GGUF files. */
static void open_paths(void) {
    char path[4200];
    tn_gguf *g = (tn_gguf *)(uintptr_t)1;
    tn_error err;
    int rc;

    snprintf(path, sizeof path, "%s/does-not-exist.gguf", tn_test_tmpdir());
    rc = tn_gguf_open(path, &g, &err);
    CHECKF(rc == TN_ERR_NOT_FOUND && !g && contains(err.message, path) &&
               contains(err.message, "No such file"),
           "missing file: %d %s", rc, err.message);

    rc = tn_gguf_open(tn_test_tmpdir(), &g, &err);
    CHECKF(rc != TN_OK && !g && contains(err.message, tn_test_tmpdir()) &&
               contains(err.message, "directory"),
           "directory: %d %s", rc, err.message);

    snprintf(path, sizeof path, "%s/empty.gguf", tn_test_tmpdir());
    FILE *f = fopen(path, "wb");
    if (f)
        fclose(f);
    rc = tn_gguf_open(path, &g, &err);
    CHECKF(rc == TN_ERR_FORMAT && !g && contains(err.message, path) &&
               contains(err.message, "empty"),
           "empty file: %d %s", rc, err.message);
    unlink(path);

    /* procfs files are regular files that say 0 bytes: no interrupted
     * download, and no model (one that cannot be read, and one that can). */
    static const char *const procfs[] = {"/proc/self/mem", "/proc/self/status",
                                         /* sysfs: 4096 bytes that cannot be mapped */
                                         "/sys/kernel/mm/transparent_hugepage/enabled"};
    for (size_t i = 0; i < sizeof procfs / sizeof procfs[0]; i++) {
        if (access(procfs[i], R_OK) != 0) /* no sysfs in this container */
            continue;
        rc = tn_gguf_open(procfs[i], &g, &err);
        CHECKF(rc == TN_ERR_IO && !g && contains(err.message, procfs[i]) &&
                   contains(err.message, "not a regular file on disk") &&
                   !contains(err.message, "empty") && !contains(err.message, "download"),
               "%s: %d %s", procfs[i], rc, err.message);
    }

    snprintf(path, sizeof path, "%s/fifo.gguf", tn_test_tmpdir());
    if (mkfifo(path, 0600) == 0) {
        rc = tn_gguf_open(path, &g, &err); /* must not block */
        CHECKF(rc != TN_OK && !g && contains(err.message, "not a regular file"), "fifo: %d %s",
               rc, err.message);
        unlink(path);
    }

    /* A device, or a symlink to one, is refused (by its name, before open:
     * engine/file-read.c). */
    rc = tn_gguf_open("/dev/zero", &g, &err);
    CHECKF(rc != TN_OK && !g && contains(err.message, "not a regular file"), "device: %d %s", rc,
           err.message);
    snprintf(path, sizeof path, "%s/null.gguf", tn_test_tmpdir());
    if (symlink("/dev/null", path) == 0) {
        rc = tn_gguf_open(path, &g, &err);
        CHECKF(rc != TN_OK && !g && contains(err.message, "not a regular file"),
               "symlink to a device: %d %s", rc, err.message);
        unlink(path);
    }

    rc = tn_gguf_open_memory(NULL, 0, NAME, &g, &err);
    CHECKF(rc == TN_ERR_FORMAT && !g && contains(err.message, "empty"), "no bytes: %s",
           err.message);
    rc = tn_gguf_open_memory(NULL, 10, NAME, &g, &err);
    CHECKF(rc == TN_ERR_INVALID && !g, "NULL data: %d", rc);
    /* errors are optional */
    CHECK(tn_gguf_open_memory("GGUF", 4, NAME, &g, NULL) == TN_ERR_FORMAT && !g);
    tn_gguf_close(NULL);
}

/* The writer refuses to make a file the reader would refuse. */
static void writer_refuses_bad_alignment(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/bad-alignment.gguf", tn_test_tmpdir());
    for (int variant = 0; variant < 4; variant++) {
        tn_gguf_writer *w = tn_gguf_writer_new();
        switch (variant) {
        case 0: tn_gguf_writer_set_u32(w, "general.alignment", 4); break;
        case 1: tn_gguf_writer_set_u32(w, "general.alignment", 48); break;
        case 2: tn_gguf_writer_set_u32(w, "general.alignment", 0); break;
        default: tn_gguf_writer_set_u64(w, "general.alignment", 64); break;
        }
        tn_error err;
        int rc = tn_gguf_writer_write(w, path, &err);
        CHECKF(rc == TN_ERR_INVALID && contains(err.message, "general.alignment"),
               "writer, alignment variant %d: rc %d %s", variant, rc, rc ? err.message : "");
        tn_gguf_writer_free(w);
        struct stat st;
        CHECKF(stat(path, &st) != 0, "writer, alignment variant %d: a file was left", variant);
        unlink(path);
    }
}

/* The committed fuzz seeds must stay valid files. */
static void check_seed_corpus(void) {
    const char *root = getenv("TERN_SOURCE_ROOT");
    if (!root || !*root)
        return;
    static const char *const seeds[] = {"model-small.gguf", "all-types-align64.gguf",
                                        "metadata-only.gguf", "zero-size-tensor.gguf",
                                        "nested-arrays.gguf"};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/gguf/%s", root, seeds[i]);
        tn_gguf *g = NULL;
        tn_error err;
        int rc = tn_gguf_open(path, &g, &err);
        CHECKF(rc == TN_OK, "seed %s: %s", seeds[i], rc ? err.message : "");
        tn_gguf_close(g);
    }
}

int main(void) {
    const uint32_t alignments[] = {0, 64};
    for (size_t a = 0; a < 2; a++) {
        char path[4200], what[64];
        size_t n = 0;
        uint8_t *p = make_valid(alignments[a], &n, path, sizeof path);
        uint64_t alignment = alignments[a] ? alignments[a] : 32;
        snprintf(what, sizeof what, "align-%llu file", (unsigned long long)alignment);

        /* the valid file, through both entry points */
        tn_gguf *g = NULL;
        tn_error err;
        int rc = tn_gguf_open(path, &g, &err);
        CHECKF(rc == TN_OK, "%s: %s", path, rc ? err.message : "");
        if (rc != TN_OK)
            return tn_test_finish("gguf-corrupt");
        check_valid(what, g, alignment);
        CHECK(tn_gguf_file_size(g) == n && strcmp(tn_gguf_path(g), path) == 0);
        tn_gguf_close(g);

        uint8_t *exact = dup_exact(p, n);
        rc = tn_gguf_open_memory(exact, n, NAME, &g, &err);
        CHECKF(rc == TN_OK, "%s in memory: %s", what, rc ? err.message : "");
        if (rc != TN_OK)
            return tn_test_finish("gguf-corrupt");
        check_valid(what, g, alignment);
        size_t end = data_end(g, exact);
        CHECKF(n - end < alignment && n % alignment == 0,
               "%s: %zu bytes after the last tensor's data of %zu; file not padded to the "
               "alignment",
               what, n - end, n);

        truncate_at_boundaries(what, g, exact, n);
        tn_gguf_close(g);
        free(exact);
        truncate_everywhere(what, p, n, end);
        truncate_files(p, n, end);
        targeted(p, n, alignment);
        mutate_randomly(p, n, 3000);
        free(p);
        unlink(path);
    }
    handmade();
    open_paths();
    writer_refuses_bad_alignment();
    check_seed_corpus();
    rmdir(tn_test_tmpdir());
    return tn_test_finish("gguf-corrupt");
}
