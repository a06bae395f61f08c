/* JSON Schema's meaning of the subset tn_json_schema compiles, with
 * "anyOf", "oneOf" (exactly one branch), local "$ref"s and
 * "additionalProperties" as the spec reads it: absent (or true), an object
 * takes any key its "properties" do not name, with any value; false, none.
 * The checker writes only named keys either way, but a oneOf is judged by
 * this meaning: a value one branch writes may be valid against an open
 * branch too. The
 * validator that tests/engine/test-json-schema.c and
 * tests/fuzz/fuzz-json-schema.c hold the checker's finished documents to,
 * one copy for both. It reads the schema itself and
 * shares no code with engine/json-schema.c, so that a mistake in the
 * checker is not repeated here. Include it once per program. */
#ifndef TN_TEST_JSON_SCHEMA_VALID_H
#define TN_TEST_JSON_SCHEMA_VALID_H

#include "tn-json.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

static bool jsv_same_value(const tn_json *a, const tn_json *b) {
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case TN_JSON_NULL: return true;
    case TN_JSON_BOOL: return a->b == b->b;
    case TN_JSON_NUMBER: return a->v.num == b->v.num;
    case TN_JSON_STRING: return a->n == b->n && !memcmp(a->v.str, b->v.str, a->n);
    default: return false;
    }
}

static bool jsv_type_ok(const char *t, const tn_json *v) {
    if (!t)
        return false;
    if (!strcmp(t, "object"))
        return v->type == TN_JSON_OBJECT;
    if (!strcmp(t, "array"))
        return v->type == TN_JSON_ARRAY;
    if (!strcmp(t, "string"))
        return v->type == TN_JSON_STRING;
    if (!strcmp(t, "number"))
        return v->type == TN_JSON_NUMBER;
    if (!strcmp(t, "integer"))
        return v->type == TN_JSON_NUMBER && v->v.num == floor(v->v.num);
    if (!strcmp(t, "boolean"))
        return v->type == TN_JSON_BOOL;
    return !strcmp(t, "null") && v->type == TN_JSON_NULL;
}

static int jsv_hex(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The schema a "$ref" names: "#" or "#/$defs/NAME" ("#/definitions/NAME",
 * the fragment's %XX decoded first, then NAME's JSON pointer ~0 and ~1),
 * NULL for any other. */
static const tn_json *jsv_deref(const tn_json *root, const char *ref) {
    if (!ref || ref[0] != '#')
        return NULL;
    char frag[1100];
    size_t fn = 0;
    for (const char *p = ref + 1; *p; p++) {
        if (fn + 1 >= sizeof frag)
            return NULL;
        if (*p != '%') {
            frag[fn++] = *p;
            continue;
        }
        if (jsv_hex(p[1]) < 0 || jsv_hex(p[2]) < 0)
            return NULL;
        frag[fn++] = (char)(jsv_hex(p[1]) * 16 + jsv_hex(p[2]));
        p += 2;
    }
    frag[fn] = '\0';
    if (fn == 0)
        return root;
    const char *table = !strncmp(frag, "/$defs/", 7)          ? "$defs"
                        : !strncmp(frag, "/definitions/", 13) ? "definitions"
                                                              : NULL;
    if (!table || strlen(frag) != fn)
        return NULL;
    char name[1100];
    size_t n = 0;
    for (const char *p = frag + strlen(table) + 2; *p; p++) {
        if (n + 1 >= sizeof name || *p == '/')
            return NULL;
        if (*p == '~') {
            if (p[1] != '0' && p[1] != '1')
                return NULL;
            name[n++] = p[1] == '0' ? '~' : '/';
            p++;
        } else {
            name[n++] = *p;
        }
    }
    const tn_json *defs = tn_json_get(root, table);
    for (size_t i = 0; i < tn_json_count(defs); i++)
        if (defs->v.items[i].key_len == n && !memcmp(defs->v.items[i].key, name, n))
            return &defs->v.items[i];
    return NULL;
}

/* Whether v is valid against schema, a part of root. hops bounds the
 * $refs followed without going into v, which a schema that compiles
 * never exhausts. */
static bool jsv_valid_in(const tn_json *root, const tn_json *schema, const tn_json *v, int hops) {
    const tn_json *ref = tn_json_get(schema, "$ref");
    if (ref) {
        const tn_json *to = jsv_deref(root, tn_json_str(ref));
        return to && hops > 0 && jsv_valid_in(root, to, v, hops - 1);
    }
    const tn_json *any = tn_json_get(schema, "anyOf");
    if (any) {
        for (size_t i = 0; i < tn_json_count(any); i++)
            if (hops > 0 && jsv_valid_in(root, tn_json_at(any, i), v, hops - 1))
                return true;
        return false;
    }
    const tn_json *one = tn_json_get(schema, "oneOf");
    if (one) {
        size_t valid = 0;
        for (size_t i = 0; i < tn_json_count(one); i++)
            valid += hops > 0 && jsv_valid_in(root, tn_json_at(one, i), v, hops - 1);
        return valid == 1;
    }
    const tn_json *type = tn_json_get(schema, "type");
    if (type) {
        bool any = false;
        if (tn_json_is(type, TN_JSON_STRING))
            any = jsv_type_ok(tn_json_str(type), v);
        for (size_t i = 0; i < tn_json_count(type); i++)
            any |= jsv_type_ok(tn_json_str(tn_json_at(type, i)), v);
        if (!any)
            return false;
    }
    const tn_json *en = tn_json_get(schema, "enum");
    if (en) {
        bool any = false;
        for (size_t i = 0; i < tn_json_count(en); i++)
            any |= jsv_same_value(tn_json_at(en, i), v);
        if (!any)
            return false;
    }
    const tn_json *cn = tn_json_get(schema, "const");
    if (cn && !jsv_same_value(cn, v))
        return false;
    if (v->type == TN_JSON_OBJECT) {
        const tn_json *props = tn_json_get(schema, "properties");
        const tn_json *extra = tn_json_get(schema, "additionalProperties");
        for (size_t i = 0; i < v->n; i++) {
            const tn_json *m = &v->v.items[i];
            const tn_json *sub = NULL;
            for (size_t k = 0; k < tn_json_count(props); k++)
                if (props->v.items[k].key_len == m->key_len &&
                    !memcmp(props->v.items[k].key, m->key, m->key_len))
                    sub = &props->v.items[k];
            if (sub ? !jsv_valid_in(root, sub, m, 64)
                    : tn_json_is(extra, TN_JSON_BOOL) ? !extra->b
                    : extra && !jsv_valid_in(root, extra, m, 64))
                return false;
            for (size_t k = 0; k < i; k++)
                if (v->v.items[k].key_len == m->key_len &&
                    !memcmp(v->v.items[k].key, m->key, m->key_len))
                    return false;
        }
        const tn_json *req = tn_json_get(schema, "required");
        for (size_t r = 0; r < tn_json_count(req); r++) {
            const char *name = tn_json_str(tn_json_at(req, r));
            if (!name || !tn_json_get(v, name))
                return false;
        }
    }
    if (v->type == TN_JSON_ARRAY) {
        const tn_json *items = tn_json_get(schema, "items");
        for (size_t i = 0; i < v->n; i++)
            if (!jsv_valid_in(root, items, &v->v.items[i], 64))
                return false;
    }
    return true;
}

/* Whether v is valid against the schema root. */
static bool jsv_validates(const tn_json *root, const tn_json *v) {
    return jsv_valid_in(root, root, v, 64);
}

#endif
