/* libFuzzer target for the engine's own JSON reader (engine/json.c): what
 * reads the tokenizer.json, tokenizer_config.json and encoder.json a user
 * points the vocabulary converter at, and the tool schemas and call
 * arguments of chat.c. All of it is text others write.
 *
 * Input: the whole input is the JSON text (no prefix byte, so that any
 * JSON file is a seed as it is).
 *
 * Promises:
 *  - a refusal leaves no document and says where: a message with the
 *    line and the column;
 *  - an accepted text's tree is sound: every string and key is valid
 *    UTF-8 (a \u0000 escape included) with its NUL at [n]; every number's
 *    text (tn_json_number_text) lies inside the input and reads back
 *    (strtod) to the number's value; tn_json_int agrees with the value;
 *    tn_json_get finds the first member of each key; the text passes
 *    tn_json_depth_ok at TN_JSON_MAX_DEPTH (what the server checks before
 *    json-glib sees a body);
 *  - round trip: the tree written back as JSON (strings escaped, numbers
 *    as their input text) parses again, and writes back byte for byte the
 *    same, with the same numbers;
 *  - tn_json_check (the pre-parse check before json-glib: the same scanner
 *    without the tree) refuses what the parse refuses, with the same
 *    message; of what the parse accepts it refuses exactly: nesting past
 *    the depth asked (the first byte picks one), a number whose value is
 *    not finite (TN_JSON_NO_HUGE_NUMBERS), a repeated key in one object
 *    (TN_JSON_NO_DUPLICATE_KEYS), a NUL in a string or key
 *    (TN_JSON_NO_NUL), each with line and column.
 *
 * Seeds: tests/fuzz/corpus/json/.
 * Run:   build-fuzz/tests/fuzz/fuzz-json tests/fuzz/corpus/json
 */
#include "tn-json.h"
#include "tn-internal.h"
#include "fuzz-promise.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct out {
    char *p;
    size_t len, cap;
} out;

static void put(out *o, const char *s, size_t n) {
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        PROMISE(p != NULL);
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

/* A valid UTF-8 sequence (a NUL allowed: \u0000). */
static bool valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            k = 2, cp = c & 0x1F, min = 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 3, cp = c & 0x0F, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < k)
            return false;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k;
    }
    return true;
}

static void put_string(out *o, const char *s, size_t n) {
    PROMISE(s != NULL && s[n] == '\0');
    PROMISE(valid_utf8((const unsigned char *)s, n));
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(o, e, 2);
        } else if (c < 0x20) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", c);
            put(o, e, 6);
        } else {
            put(o, (const char *)&s[i], 1);
        }
    }
    put(o, "\"", 1);
}

/* Writes v as JSON; checks what it meets on the way. */
static void write_value(out *o, const tn_json *v, const char *in, size_t in_len, int depth) {
    PROMISE(depth < TN_JSON_MAX_DEPTH + 1);
    switch (v->type) {
    case TN_JSON_NULL:
        put(o, "null", 4);
        break;
    case TN_JSON_BOOL:
        PROMISE(tn_json_bool(v, !v->b) == v->b);
        put(o, v->b ? "true" : "false", v->b ? 4 : 5);
        break;
    case TN_JSON_NUMBER: {
        size_t len = 0;
        const char *t = tn_json_number_text(v, in, in_len, &len);
        PROMISE(t != NULL && t >= in && len <= in_len && (size_t)(t - in) <= in_len - len);
        char buf[2048];
        if (len < sizeof buf) {
            memcpy(buf, t, len);
            buf[len] = '\0';
            const double d = strtod(buf, NULL);
            const double num = tn_json_num(v, NAN);
            PROMISE(d == num || (isnan(d) && isnan(num)));
        }
        int64_t i64;
        if (tn_json_int(v, &i64))
            PROMISE((double)i64 == tn_json_num(v, NAN));
        put(o, t, len);
        break;
    }
    case TN_JSON_STRING:
        PROMISE(tn_json_str(v) == v->v.str);
        put_string(o, v->v.str, v->n);
        break;
    case TN_JSON_ARRAY:
    case TN_JSON_OBJECT: {
        const bool obj = v->type == TN_JSON_OBJECT;
        PROMISE(tn_json_count(v) == v->n);
        PROMISE(v->n == 0 || v->v.items != NULL);
        put(o, obj ? "{" : "[", 1);
        for (uint32_t i = 0; i < v->n; i++) {
            const tn_json *m = tn_json_at(v, i);
            PROMISE(m == &v->v.items[i]);
            if (i)
                put(o, ",", 1);
            if (obj) {
                put_string(o, m->key, m->key_len);
                /* The first member of this key, when the key has no NUL
                 * (tn_json_get takes a C string). */
                if (strlen(m->key) == m->key_len) {
                    const tn_json *f = tn_json_get(v, m->key);
                    PROMISE(f != NULL && f <= m && f->key_len == m->key_len &&
                            memcmp(f->key, m->key, m->key_len) == 0);
                }
                put(o, ":", 1);
            } else {
                PROMISE(m->key == NULL);
            }
            write_value(o, m, in, in_len, depth + 1);
        }
        put(o, obj ? "}" : "]", 1);
        break;
    }
    default:
        PROMISE(0);
    }
}

/* What tn_json_check refuses beyond the parse, read off the tree. */
typedef struct tree_facts {
    bool not_finite, repeated_key, nul;
    unsigned depth; /* containers nested, deepest */
} tree_facts;

static void facts_of(const tn_json *v, unsigned level, tree_facts *f) {
    if (v->type == TN_JSON_NUMBER && !isfinite(v->v.num))
        f->not_finite = true;
    if (v->type == TN_JSON_STRING && memchr(v->v.str, 0, v->n))
        f->nul = true;
    if (v->type != TN_JSON_ARRAY && v->type != TN_JSON_OBJECT)
        return;
    if (level + 1 > f->depth)
        f->depth = level + 1;
    for (uint32_t i = 0; i < v->n; i++) {
        const tn_json *m = &v->v.items[i];
        if (v->type == TN_JSON_OBJECT) {
            if (memchr(m->key, 0, m->key_len))
                f->nul = true;
            for (uint32_t j = 0; j < i; j++)
                if (v->v.items[j].key_len == m->key_len &&
                    !memcmp(v->v.items[j].key, m->key, m->key_len))
                    f->repeated_key = true;
        }
        facts_of(m, level + 1, f);
    }
}

static void promise_check(const char *text, size_t size, const tn_json_doc *doc,
                          const tn_error *parse_err) {
    tn_error err = {0};
    int rc = tn_json_check(text, size, "fuzz.json", TN_JSON_MAX_DEPTH, 0, &err);
    if (!doc) {
        PROMISE(rc == parse_err->code);
        PROMISE(rc == TN_ERR_NOMEM || !strcmp(err.message, parse_err->message));
        return;
    }
    tree_facts f = {0};
    facts_of(tn_json_root(doc), 0, &f);
    PROMISE(f.depth <= TN_JSON_MAX_DEPTH);
    PROMISE(rc == TN_OK);
    rc = tn_json_check(text, size, "fuzz.json", TN_JSON_MAX_DEPTH, TN_JSON_NO_HUGE_NUMBERS, &err);
    PROMISE((rc == TN_OK) == !f.not_finite);
    if (rc != TN_OK)
        PROMISE(rc == TN_ERR_FORMAT && strstr(err.message, "number too large"));
    const unsigned depth = size ? (unsigned char)text[0] % 9 : 1;
    rc = tn_json_check(text, size, "fuzz.json", depth, 0, &err);
    const unsigned limit = depth ? depth : TN_JSON_CHECK_DEPTH;
    PROMISE((rc == TN_OK) == (f.depth <= limit));
    if (rc != TN_OK)
        PROMISE(rc == TN_ERR_FORMAT && strstr(err.message, "nesting deeper than"));
    rc = tn_json_check(text, size, "fuzz.json", TN_JSON_MAX_DEPTH, TN_JSON_NO_DUPLICATE_KEYS,
                       &err);
    PROMISE((rc == TN_OK) == !f.repeated_key);
    if (rc != TN_OK)
        PROMISE(rc == TN_ERR_FORMAT && strstr(err.message, "line ") &&
                strstr(err.message, "appears more than once in the same object"));
    rc = tn_json_check(text, size, "fuzz.json", TN_JSON_MAX_DEPTH, TN_JSON_NO_NUL, &err);
    PROMISE((rc == TN_OK) == !f.nul);
    if (rc != TN_OK)
        PROMISE(rc == TN_ERR_FORMAT && strstr(err.message, "NUL character"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    tn_json_doc *doc = (tn_json_doc *)1;
    tn_error err = {0};
    int rc = tn_json_parse(text, size, "fuzz.json", &doc, &err);
    promise_check(text, size, rc == TN_OK ? doc : NULL, &err);
    if (rc != TN_OK) {
        PROMISE(doc == NULL);
        PROMISE(err.code == rc && strstr(err.message, "fuzz.json: ") == err.message);
        PROMISE(rc == TN_ERR_NOMEM || (strstr(err.message, "line ") && strstr(err.message, "column ")));
        tn_error_clear(&err);
        return 0;
    }
    PROMISE(doc != NULL);
    PROMISE(tn_json_depth_ok(text, size, TN_JSON_MAX_DEPTH));

    out a = {0};
    write_value(&a, tn_json_root(doc), text, size, 0);

    tn_json_doc *doc2 = NULL;
    rc = tn_json_parse(a.p, a.len, "again", &doc2, &err);
    PROMISE(rc == TN_OK);
    out b = {0};
    write_value(&b, tn_json_root(doc2), a.p, a.len, 0);
    PROMISE(a.len == b.len && memcmp(a.p, b.p, a.len) == 0);

    tn_json_free(doc2);
    tn_json_free(doc);
    free(a.p);
    free(b.p);
    return 0;
}
