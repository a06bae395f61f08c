/* GGUF writer -> reader round trips: every metadata type (nested arrays
 * included), every tensor type, alignment, and the spec's byte layout. */
#include "tn-test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t all_types[] = {
    TN_TYPE_F32, TN_TYPE_F16, TN_TYPE_BF16, TN_TYPE_Q8_0, TN_TYPE_Q4_0, TN_TYPE_Q4_1,
    TN_TYPE_Q5_0, TN_TYPE_Q5_1, TN_TYPE_Q4_K, TN_TYPE_Q5_K, TN_TYPE_Q6_K,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void test_metadata_round_trip(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/meta.gguf", tn_test_tmpdir());
    tn_gguf_writer *w = tn_gguf_writer_new();
    CHECK(w != NULL);
    CHECK(tn_gguf_writer_set_u8(w, "t.u8", 250) == TN_OK);
    CHECK(tn_gguf_writer_set_i8(w, "t.i8", -120) == TN_OK);
    CHECK(tn_gguf_writer_set_u16(w, "t.u16", 65000) == TN_OK);
    CHECK(tn_gguf_writer_set_i16(w, "t.i16", -32000) == TN_OK);
    CHECK(tn_gguf_writer_set_u32(w, "t.u32", 4000000000u) == TN_OK);
    CHECK(tn_gguf_writer_set_i32(w, "t.i32", -2000000000) == TN_OK);
    CHECK(tn_gguf_writer_set_u64(w, "t.u64", 18000000000000000000ull) == TN_OK);
    CHECK(tn_gguf_writer_set_i64(w, "t.i64", -9000000000000000000ll) == TN_OK);
    CHECK(tn_gguf_writer_set_f32(w, "t.f32", 0.15625f) == TN_OK);
    CHECK(tn_gguf_writer_set_f64(w, "t.f64", -1.0e300) == TN_OK);
    CHECK(tn_gguf_writer_set_bool(w, "t.bool", true) == TN_OK);
    CHECK(tn_gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo \xe2\x96\x81 world") == TN_OK);
    CHECK(tn_gguf_writer_set_str(w, "t.empty", "") == TN_OK);
    /* a string holding a NUL byte */
    CHECK(tn_gguf_writer_set_strn(w, "t.nul", "a\0b", 3) == TN_OK);
    int32_t ints[5] = {1, -2, 3, -4, 2147483647};
    CHECK(tn_gguf_writer_set_arr(w, "t.arr_i32", TN_GGUF_I32, ints, 5) == TN_OK);
    float floats[3] = {0.5f, -1.25f, 1e-3f};
    CHECK(tn_gguf_writer_set_arr(w, "t.arr_f32", TN_GGUF_F32, floats, 3) == TN_OK);
    uint8_t bools[4] = {1, 0, 0, 1};
    CHECK(tn_gguf_writer_set_arr(w, "t.arr_bool", TN_GGUF_BOOL, bools, 4) == TN_OK);
    CHECK(tn_gguf_writer_set_arr(w, "t.arr_empty", TN_GGUF_U64, NULL, 0) == TN_OK);
    const char *strs[] = {"<s>", "", "\xe2\x96\x81the", "a b"};
    CHECK(tn_gguf_writer_set_arr_str(w, "t.arr_str", strs, 4) == TN_OK);
    /* nested: [[1, 2], ["x"], []] */
    uint16_t inner_a[2] = {1, 2};
    tn_gguf_value sx = {.type = TN_GGUF_STRING};
    sx.v.str.ptr = "x";
    sx.v.str.len = 1;
    tn_gguf_value items[3];
    memset(items, 0, sizeof items);
    items[0].type = TN_GGUF_ARRAY;
    items[0].v.arr.type = TN_GGUF_U16;
    items[0].v.arr.n = 2;
    items[0].v.arr.data = (const uint8_t *)inner_a;
    items[1].type = TN_GGUF_ARRAY;
    items[1].v.arr.type = TN_GGUF_STRING;
    items[1].v.arr.n = 1;
    items[1].v.arr.items = &sx;
    items[2].type = TN_GGUF_ARRAY;
    items[2].v.arr.type = TN_GGUF_I8;
    items[2].v.arr.n = 0;
    tn_gguf_value nested = {.type = TN_GGUF_ARRAY};
    nested.v.arr.type = TN_GGUF_ARRAY;
    nested.v.arr.n = 3;
    nested.v.arr.items = items;
    CHECK(tn_gguf_writer_set_value(w, "t.nested", &nested) == TN_OK);
    /* replacing a key keeps one entry */
    CHECK(tn_gguf_writer_set_u32(w, "t.replace", 1) == TN_OK);
    CHECK(tn_gguf_writer_set_u32(w, "t.replace", 2) == TN_OK);
    tn_error err;
    CHECKF(tn_gguf_writer_write(w, path, &err) == TN_OK, "%s", err.message);
    tn_gguf_writer_free(w);

    tn_gguf *g = NULL;
    CHECKF(tn_gguf_open(path, &g, &err) == TN_OK, "%s", err.message);
    if (!g)
        return;
    CHECK(tn_gguf_version(g) == 3);
    CHECK(tn_gguf_n_tensors(g) == 0);
    CHECK(tn_gguf_n_kv(g) == 21);
    CHECK(tn_str_eq(tn_gguf_kv_key(g, 0), "t.u8"));
    const tn_gguf_value *v;
    int64_t i64;
    double f;
    bool b;
    tn_str s;
    CHECK((v = tn_gguf_find(g, "t.u8")) && v->type == TN_GGUF_U8 && v->v.u64 == 250);
    CHECK((v = tn_gguf_find(g, "t.i8")) && v->type == TN_GGUF_I8 && v->v.i64 == -120);
    CHECK((v = tn_gguf_find(g, "t.u16")) && v->type == TN_GGUF_U16 && v->v.u64 == 65000);
    CHECK((v = tn_gguf_find(g, "t.i16")) && v->type == TN_GGUF_I16 && v->v.i64 == -32000);
    CHECK(tn_gguf_get_int(g, "t.u32", &i64) == TN_OK && i64 == 4000000000ll);
    CHECK(tn_gguf_get_int(g, "t.i32", &i64) == TN_OK && i64 == -2000000000);
    CHECK((v = tn_gguf_find(g, "t.u64")) && v->type == TN_GGUF_U64 &&
          v->v.u64 == 18000000000000000000ull);
    /* does not fit an int64: refused rather than wrapped */
    CHECK(tn_gguf_get_int(g, "t.u64", &i64) == TN_ERR_FORMAT);
    CHECK(tn_gguf_get_int(g, "t.i64", &i64) == TN_OK && i64 == -9000000000000000000ll);
    CHECK(tn_gguf_get_float(g, "t.f32", &f) == TN_OK && f == 0.15625);
    CHECK(tn_gguf_get_float(g, "t.f64", &f) == TN_OK && f == -1.0e300);
    CHECK(tn_gguf_get_bool(g, "t.bool", &b) == TN_OK && b);
    CHECK(tn_gguf_get_str(g, "t.str", &s) == TN_OK && tn_str_eq(s, "h\xc3\xa9llo \xe2\x96\x81 world"));
    CHECK(tn_gguf_get_str(g, "t.empty", &s) == TN_OK && s.len == 0);
    CHECK(tn_gguf_get_str(g, "t.nul", &s) == TN_OK && s.len == 3 && !memcmp(s.ptr, "a\0b", 3));
    CHECK(tn_gguf_get_str(g, "t.u8", &s) == TN_ERR_FORMAT);
    CHECK(tn_gguf_get_int(g, "t.missing", &i64) == TN_ERR_NOT_FOUND);
    v = tn_gguf_find(g, "t.arr_i32");
    CHECK(v && v->type == TN_GGUF_ARRAY && v->v.arr.type == TN_GGUF_I32 && v->v.arr.n == 5);
    for (int k = 0; v && k < 5; k++)
        CHECK(tn_gguf_arr_int(v, (uint64_t)k) == ints[k]);
    v = tn_gguf_find(g, "t.arr_f32");
    for (int k = 0; v && k < 3; k++)
        CHECK(tn_gguf_arr_float(v, (uint64_t)k) == (double)floats[k]);
    v = tn_gguf_find(g, "t.arr_bool");
    CHECK(v && v->v.arr.type == TN_GGUF_BOOL && tn_gguf_arr_int(v, 0) == 1 && tn_gguf_arr_int(v, 1) == 0);
    v = tn_gguf_find(g, "t.arr_empty");
    CHECK(v && v->v.arr.n == 0 && v->v.arr.type == TN_GGUF_U64);
    v = tn_gguf_find(g, "t.arr_str");
    CHECK(v && v->v.arr.type == TN_GGUF_STRING && v->v.arr.n == 4);
    for (int k = 0; v && k < 4; k++)
        CHECK(v->v.arr.items[k].type == TN_GGUF_STRING && tn_str_eq(v->v.arr.items[k].v.str, strs[k]));
    v = tn_gguf_find(g, "t.nested");
    CHECK(v && v->v.arr.type == TN_GGUF_ARRAY && v->v.arr.n == 3);
    if (v && v->v.arr.n == 3) {
        const tn_gguf_value *a0 = &v->v.arr.items[0], *a1 = &v->v.arr.items[1],
                            *a2 = &v->v.arr.items[2];
        CHECK(a0->v.arr.type == TN_GGUF_U16 && a0->v.arr.n == 2 && tn_gguf_arr_int(a0, 1) == 2);
        CHECK(a1->v.arr.type == TN_GGUF_STRING && a1->v.arr.n == 1 &&
              tn_str_eq(a1->v.arr.items[0].v.str, "x"));
        CHECK(a2->v.arr.type == TN_GGUF_I8 && a2->v.arr.n == 0);
    }
    CHECK(tn_gguf_get_int(g, "t.replace", &i64) == TN_OK && i64 == 2);
    tn_gguf_close(g);

    /* the exact bytes of the header, per the specification */
    size_t size;
    uint8_t *raw = read_file(path, &size);
    CHECK(raw && size > 24);
    if (raw) {
        CHECK(!memcmp(raw, "GGUF", 4));
        uint32_t ver;
        uint64_t nt, nkv, klen;
        memcpy(&ver, raw + 4, 4);
        memcpy(&nt, raw + 8, 8);
        memcpy(&nkv, raw + 16, 8);
        memcpy(&klen, raw + 24, 8);
        CHECK(ver == 3 && nt == 0 && nkv == 21 && klen == 4);
        CHECK(!memcmp(raw + 32, "t.u8", 4));
        uint32_t type;
        memcpy(&type, raw + 36, 4);
        CHECK(type == TN_GGUF_U8 && raw[40] == 250);
        free(raw);
    }
}

static void test_tensor_round_trip(uint64_t alignment) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tensors-%llu.gguf", tn_test_tmpdir(), (unsigned long long)alignment);
    tn_gguf_writer *w = tn_gguf_writer_new();
    if (alignment != TN_GGUF_DEFAULT_ALIGNMENT)
        CHECK(tn_gguf_writer_set_u32(w, "general.alignment", (uint32_t)alignment) == TN_OK);
    uint64_t seed = 42 + alignment;
    void *blobs[N_TYPES];
    size_t sizes[N_TYPES];
    for (size_t k = 0; k < N_TYPES; k++) {
        uint64_t ne[2] = {512, 3 + k % 3};
        float *src = malloc(ne[0] * ne[1] * sizeof *src);
        for (uint64_t i = 0; i < ne[0] * ne[1]; i++)
            src[i] = tn_test_randf(&seed) * 3.0f;
        sizes[k] = tn_type_row_bytes(all_types[k], ne[0]) * ne[1];
        blobs[k] = malloc(sizes[k]);
        for (uint64_t r = 0; r < ne[1]; r++)
            CHECK(tn_quantize_row(all_types[k], src + r * ne[0],
                                  (uint8_t *)blobs[k] + r * (sizes[k] / ne[1]), (int64_t)ne[0]) == TN_OK);
        char name[64];
        snprintf(name, sizeof name, "t.%s", tn_type_name(all_types[k]));
        CHECK(tn_gguf_writer_add_tensor_data(w, name, all_types[k], 2, ne, blobs[k], sizes[k]) == TN_OK);
        free(src);
    }
    /* a 3-D and a 1-D tensor */
    uint64_t ne3[3] = {32, 2, 3};
    float cube[192];
    for (int i = 0; i < 192; i++)
        cube[i] = (float)i;
    CHECK(tn_gguf_writer_add_tensor_data(w, "cube", TN_TYPE_F32, 3, ne3, cube, sizeof cube) == TN_OK);
    uint64_t ne1[1] = {7};
    float vec[7] = {1, 2, 3, 4, 5, 6, 7};
    CHECK(tn_gguf_writer_add_tensor_data(w, "vec", TN_TYPE_F32, 1, ne1, vec, sizeof vec) == TN_OK);
    /* refused: duplicate name, rows not whole blocks, size mismatch */
    CHECK(tn_gguf_writer_add_tensor_data(w, "vec", TN_TYPE_F32, 1, ne1, vec, sizeof vec) != TN_OK);
    uint64_t bad[1] = {33};
    CHECK(tn_gguf_writer_add_tensor_data(w, "bad", TN_TYPE_Q8_0, 1, bad, vec, 4) != TN_OK);
    CHECK(tn_gguf_writer_add_tensor_data(w, "bad2", TN_TYPE_F32, 1, ne1, vec, 4) != TN_OK);
    tn_error err;
    CHECKF(tn_gguf_writer_write(w, path, &err) == TN_OK, "%s", err.message);
    tn_gguf_writer_free(w);

    tn_gguf *g = NULL;
    CHECKF(tn_gguf_open(path, &g, &err) == TN_OK, "%s", err.message);
    if (!g)
        goto done;
    CHECK(tn_gguf_alignment(g) == alignment);
    CHECK(tn_gguf_data_offset(g) % alignment == 0);
    CHECK(tn_gguf_n_tensors(g) == (int64_t)N_TYPES + 2);
    for (size_t k = 0; k < N_TYPES; k++) {
        char name[64];
        snprintf(name, sizeof name, "t.%s", tn_type_name(all_types[k]));
        const tn_gguf_tensor *t = tn_gguf_find_tensor(g, name);
        CHECKF(t != NULL, "%s missing", name);
        if (!t)
            continue;
        CHECK(t->type == all_types[k] && t->n_dims == 2 && t->ne[0] == 512 && t->ne[1] == 3 + k % 3);
        CHECK(t->ne[2] == 1 && t->ne[3] == 1);
        CHECK(t->nbytes == sizes[k]);
        CHECK(t->offset % alignment == 0);
        CHECK(((uintptr_t)t->data - (uintptr_t)tn_gguf_tensor_at(g, 0)->data) % alignment == 0);
        CHECKF(!memcmp(t->data, blobs[k], sizes[k]), "%s data differs", name);
    }
    const tn_gguf_tensor *c = tn_gguf_find_tensor(g, "cube");
    CHECK(c && c->n_dims == 3 && c->ne[2] == 3 && !memcmp(c->data, cube, sizeof cube));
    const tn_gguf_tensor *vv = tn_gguf_find_tensor(g, "vec");
    CHECK(vv && vv->n_dims == 1 && vv->ne[0] == 7 && vv->ne[1] == 1 && !memcmp(vv->data, vec, sizeof vec));
    CHECK(tn_gguf_find_tensor(g, "nope") == NULL);
    CHECK(tn_gguf_find_tensor(g, "bad") == NULL);
    tn_gguf_close(g);
done:
    for (size_t k = 0; k < N_TYPES; k++)
        free(blobs[k]);
}

/* Data produced by a callback at write time, as mkmodel does. */
static int fill_ramp(void *user, const char *name, void *dst, uint64_t nbytes, tn_error *err) {
    (void)name;
    (void)err;
    int *calls = user;
    (*calls)++;
    float *f = dst;
    for (uint64_t i = 0; i < nbytes / 4; i++)
        f[i] = (float)i * 0.5f;
    return TN_OK;
}

int tn_fail_for_test(tn_error *err, const char *name);

static int fill_fails(void *user, const char *name, void *dst, uint64_t nbytes, tn_error *err) {
    (void)user;
    (void)dst;
    (void)nbytes;
    return tn_fail_for_test(err, name);
}

int tn_fail_for_test(tn_error *err, const char *name) {
    if (err) {
        err->code = TN_ERR_IO;
        snprintf(err->message, sizeof err->message, "cannot make %s", name);
    }
    return TN_ERR_IO;
}

static void test_fill_callback(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/fill.gguf", tn_test_tmpdir());
    tn_gguf_writer *w = tn_gguf_writer_new();
    int calls = 0;
    uint64_t ne[2] = {64, 4};
    CHECK(tn_gguf_writer_add_tensor(w, "ramp", TN_TYPE_F32, 2, ne, fill_ramp, &calls) == TN_OK);
    tn_error err;
    CHECK(tn_gguf_writer_write(w, path, &err) == TN_OK);
    CHECK(calls == 1);
    tn_gguf_writer_free(w);
    tn_gguf *g = NULL;
    CHECK(tn_gguf_open(path, &g, &err) == TN_OK);
    const tn_gguf_tensor *t = g ? tn_gguf_find_tensor(g, "ramp") : NULL;
    CHECK(t && ((const float *)t->data)[255] == 127.5f);
    tn_gguf_close(g);

    /* a failing producer leaves the previous file untouched and no temp file */
    w = tn_gguf_writer_new();
    CHECK(tn_gguf_writer_add_tensor(w, "x", TN_TYPE_F32, 2, ne, fill_fails, NULL) == TN_OK);
    CHECK(tn_gguf_writer_write(w, path, &err) == TN_ERR_IO);
    CHECK(strstr(err.message, "cannot make x") != NULL);
    tn_gguf_writer_free(w);
    g = NULL;
    CHECK(tn_gguf_open(path, &g, &err) == TN_OK && tn_gguf_find_tensor(g, "ramp") != NULL);
    tn_gguf_close(g);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp- >/dev/null", tn_test_tmpdir());
    CHECK(system(cmd) != 0); /* grep found no leftover temporary file */
}

/* The size the reader gives each metadata type is the C size of the
 * value the spec stores (the hostile-model test and the fuzzer rely on it to
 * build and walk arrays), and 0 for the variable-size and unknown types. */
static void test_type_sizes(void) {
    CHECK(tn_gguf_type_size(TN_GGUF_U8) == sizeof(uint8_t));
    CHECK(tn_gguf_type_size(TN_GGUF_I8) == sizeof(int8_t));
    CHECK(tn_gguf_type_size(TN_GGUF_BOOL) == 1);
    CHECK(tn_gguf_type_size(TN_GGUF_U16) == sizeof(uint16_t));
    CHECK(tn_gguf_type_size(TN_GGUF_I16) == sizeof(int16_t));
    CHECK(tn_gguf_type_size(TN_GGUF_U32) == sizeof(uint32_t));
    CHECK(tn_gguf_type_size(TN_GGUF_I32) == sizeof(int32_t));
    CHECK(tn_gguf_type_size(TN_GGUF_F32) == sizeof(float));
    CHECK(tn_gguf_type_size(TN_GGUF_U64) == sizeof(uint64_t));
    CHECK(tn_gguf_type_size(TN_GGUF_I64) == sizeof(int64_t));
    CHECK(tn_gguf_type_size(TN_GGUF_F64) == sizeof(double));
    CHECK(tn_gguf_type_size(TN_GGUF_STRING) == 0);
    CHECK(tn_gguf_type_size(TN_GGUF_ARRAY) == 0);
    CHECK(tn_gguf_type_size(TN_GGUF_TYPE_COUNT_) == 0);
    CHECK(tn_gguf_type_size((tn_gguf_type)1000) == 0);
}

int main(void) {
    test_type_sizes();
    test_metadata_round_trip();
    test_tensor_round_trip(32);
    test_tensor_round_trip(64);
    test_tensor_round_trip(256);
    test_fill_callback();
    tn_gguf_close(NULL);
    tn_gguf_writer_free(NULL);
    return tn_test_finish("test-gguf");
}
