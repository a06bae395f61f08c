/* Schema-constrained JSON output (tern.h, tn_json_schema): a JSON Schema
 * in the subset OpenAI's strict structured outputs use is compiled into a
 * table of nodes, and a pushdown checker walks the answer's bytes against
 * it. Every keyword outside the subset is refused by name at compile time:
 * a schema that is only partly enforced would pass answers off as
 * following it (docs/SERVER.md, "Structured output").
 *
 * The checker's state is a fixed-size value (one frame per open
 * container) so that trying a token is a copy and a walk over its bytes,
 * as with tn_json_prefix. Object keys and enum values are matched against
 * sorted tables of their JSON-encoded texts: the names a key's bytes so far
 * can still become are a contiguous range, narrowed byte by byte. The
 * checker never accepts a byte after which no valid document can follow:
 * every node has at least one value, every open key or literal range is
 * non-empty and holds an unused name, and ',' in an object needs a
 * property left to write. */
#include "tn-internal.h"
#include "tn-json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    T_OBJECT = 1 << 0,
    T_ARRAY = 1 << 1,
    T_STRING = 1 << 2,
    T_NUMBER = 1 << 3,
    T_INTEGER = 1 << 4,
    T_BOOLEAN = 1 << 5,
    T_NULL = 1 << 6,
};

typedef struct sc_node {
    uint8_t types; /* T_*; ignored when lits is set */
    bool lits;     /* enum or const: the value is one of lit0..lit0+n_lit */
    uint32_t lit0, n_lit;
    uint32_t prop0, n_prop; /* object: properties sorted by encoded name */
    uint64_t required;      /* bit i: property prop0 + i */
    uint32_t items;         /* array: the items' node */
} sc_node;

/* An encoded text in the pool: a property name (node: its value's schema)
 * or an enum value (node unused). */
typedef struct sc_str {
    uint32_t off, len;
    uint32_t node;
} sc_str;

struct tn_json_schema {
    sc_node *nodes;
    uint32_t n_nodes, cap_nodes;
    sc_str *props;
    uint32_t n_props, cap_props;
    sc_str *lits;
    uint32_t n_lits, cap_lits;
    char *pool;
    size_t pool_len, cap_pool;
};

/* Longest encoded property name or enum value. */
#define SC_MAX_TEXT 1024
/* Digits a number may have in each part: json-glib reads a whole number
 * beyond int64 wrapped and a double beyond its range as infinity. */
#define SC_MAX_INT_DIGITS 18
#define SC_MAX_FRAC_DIGITS 18
#define SC_MAX_EXP_DIGITS 2

/* ------------------------------------------------------------- compiling */

typedef struct compiler {
    tn_json_schema *s;
    const char *text;
    size_t text_len;
    tn_error *err;
    char path[256]; /* JSON pointer of the node being compiled, for messages */
} compiler;

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t size) {
    if (need <= *cap)
        return true;
    uint32_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, (size_t)n * size);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

static bool pool_add(tn_json_schema *s, const char *b, size_t n) {
    if (s->pool_len + n > s->cap_pool) {
        size_t cap = s->cap_pool ? s->cap_pool * 2 : 1024;
        while (cap < s->pool_len + n)
            cap *= 2;
        char *q = realloc(s->pool, cap);
        if (!q)
            return false;
        s->pool = q;
        s->cap_pool = cap;
    }
    memcpy(s->pool + s->pool_len, b, n);
    s->pool_len += n;
    return true;
}

/* A string as the checker expects it written: quoted, '"' and '\\'
 * escaped, control characters as \u00XX, everything else as it is. */
static bool pool_add_string(tn_json_schema *s, const char *str, size_t n) {
    if (!pool_add(s, "\"", 1))
        return false;
    for (size_t i = 0; i < n; i++) {
        const uint8_t c = (uint8_t)str[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            if (!pool_add(s, esc, 2))
                return false;
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            if (!pool_add(s, esc, 6))
                return false;
        } else if (!pool_add(s, (const char *)&str[i], 1)) {
            return false;
        }
    }
    return pool_add(s, "\"", 1);
}

static int str_cmp(const tn_json_schema *s, const sc_str *a, const sc_str *b) {
    const uint32_t n = a->len < b->len ? a->len : b->len;
    const int c = memcmp(s->pool + a->off, s->pool + b->off, n);
    if (c)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* Insertion sort: tables are short (TN_JSON_SCHEMA_MAX_PROPERTIES,
 * TN_JSON_SCHEMA_MAX_ENUM) and qsort has no context argument in C11. */
static void sort_strs(const tn_json_schema *s, sc_str *a, uint32_t n) {
    for (uint32_t i = 1; i < n; i++) {
        sc_str x = a[i];
        uint32_t j = i;
        while (j > 0 && str_cmp(s, &a[j - 1], &x) > 0) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

static void path_push(compiler *c, size_t *mark, const char *seg, size_t n) {
    *mark = strlen(c->path);
    size_t at = *mark;
    if (at + 1 < sizeof c->path)
        c->path[at++] = '/';
    for (size_t i = 0; i < n && at + 3 < sizeof c->path; i++) {
        if (seg[i] == '~' || seg[i] == '/') { /* RFC 6901 */
            c->path[at++] = '~';
            c->path[at++] = seg[i] == '~' ? '0' : '1';
        } else {
            c->path[at++] = seg[i];
        }
    }
    c->path[at] = '\0';
}

static int unsupported(compiler *c, const char *keyword) {
    return tn_fail(c->err, TN_ERR_INVALID, "\"%s\" is not supported (schema at #%s)", keyword,
                   c->path);
}

static int parse_types(compiler *c, const tn_json *t, uint8_t *types) {
    static const struct {
        const char *name;
        uint8_t bit;
    } names[] = {
        {"object", T_OBJECT},   {"array", T_ARRAY},     {"string", T_STRING}, {"number", T_NUMBER},
        {"integer", T_INTEGER}, {"boolean", T_BOOLEAN}, {"null", T_NULL},
    };
    const size_t n = tn_json_is(t, TN_JSON_ARRAY) ? tn_json_count(t) : 1;
    *types = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = tn_json_str(tn_json_is(t, TN_JSON_ARRAY) ? tn_json_at(t, i) : t);
        uint8_t bit = 0;
        for (size_t k = 0; name && k < sizeof names / sizeof names[0]; k++)
            if (!strcmp(name, names[k].name))
                bit = names[k].bit;
        if (!bit || (*types & bit))
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"type\" must be one of object, array, string, number, integer, "
                           "boolean and null, or an array of distinct ones (schema at #%s)",
                           c->path);
        *types |= bit;
    }
    if (!*types)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "\"type\" must be one of object, array, string, number, integer, "
                       "boolean and null, or an array of distinct ones (schema at #%s)",
                       c->path);
    return TN_OK;
}

/* One enum or const value into the literal table, if the node's type (when
 * it has one) allows it. */
static int add_literal(compiler *c, const tn_json *v, uint8_t types, bool *taken) {
    tn_json_schema *s = c->s;
    const uint32_t off = (uint32_t)s->pool_len;
    uint8_t kind;
    switch (v->type) {
    case TN_JSON_STRING: kind = T_STRING; break;
    case TN_JSON_NUMBER: {
        const double x = tn_json_num(v, 0);
        kind = x == floor(x) ? T_NUMBER | T_INTEGER : T_NUMBER;
        break;
    }
    case TN_JSON_BOOL: kind = T_BOOLEAN; break;
    case TN_JSON_NULL: kind = T_NULL; break;
    default:
        return tn_fail(c->err, TN_ERR_INVALID,
                       "\"enum\" and \"const\" values must be strings, numbers, booleans or "
                       "null (schema at #%s)",
                       c->path);
    }
    *taken = types == 0 || (types & kind);
    if (!*taken)
        return TN_OK;
    bool ok;
    if (v->type == TN_JSON_STRING) {
        ok = pool_add_string(s, tn_json_str(v), v->n);
    } else if (v->type == TN_JSON_NUMBER) {
        size_t n = 0;
        const char *t = tn_json_number_text(v, c->text, c->text_len, &n);
        ok = t && pool_add(s, t, n);
    } else if (v->type == TN_JSON_BOOL) {
        ok = pool_add(s, v->b ? "true" : "false", v->b ? 4 : 5);
    } else {
        ok = pool_add(s, "null", 4);
    }
    if (!ok || !grow((void **)&s->lits, &s->cap_lits, s->n_lits + 1, sizeof *s->lits))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    const uint32_t len = (uint32_t)(s->pool_len - off);
    if (len > SC_MAX_TEXT)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "a property name or enum value is longer than %d bytes (schema at #%s)",
                       SC_MAX_TEXT, c->path);
    s->lits[s->n_lits++] = (sc_str){off, len, 0};
    return TN_OK;
}

static int compile_node(compiler *c, const tn_json *v, int depth, uint32_t *out);

static int compile_object(compiler *c, const tn_json *v, uint32_t self, int depth) {
    tn_json_schema *s = c->s;
    const tn_json *props = tn_json_get(v, "properties");
    const tn_json *required = tn_json_get(v, "required");
    const tn_json *additional = tn_json_get(v, "additionalProperties");
    if (additional && !(tn_json_is(additional, TN_JSON_BOOL) && !additional->b))
        return tn_fail(c->err, TN_ERR_INVALID,
                       "only \"additionalProperties\": false is supported (schema at #%s)",
                       c->path);
    if (props && !tn_json_is(props, TN_JSON_OBJECT))
        return tn_fail(c->err, TN_ERR_INVALID,
                       "\"properties\" must be an object of schemas (schema at #%s)", c->path);
    const size_t n = tn_json_count(props);
    if (n > TN_JSON_SCHEMA_MAX_PROPERTIES)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "an object schema has at most %d properties (schema at #%s)",
                       TN_JSON_SCHEMA_MAX_PROPERTIES, c->path);
    /* The property table is contiguous per object: the children are
     * compiled first (they add their own), then this object's names. */
    uint32_t kids[TN_JSON_SCHEMA_MAX_PROPERTIES];
    for (size_t i = 0; i < n; i++) {
        const tn_json *m = &props->v.items[i];
        size_t mark;
        char saved[sizeof c->path];
        memcpy(saved, c->path, sizeof saved);
        path_push(c, &mark, "properties", 10);
        path_push(c, &mark, m->key, m->key_len);
        int rc = compile_node(c, m, depth + 1, &kids[i]);
        memcpy(c->path, saved, sizeof saved);
        if (rc != TN_OK)
            return rc;
    }
    const uint32_t prop0 = s->n_props;
    if (!grow((void **)&s->props, &s->cap_props, s->n_props + (uint32_t)n, sizeof *s->props))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const tn_json *m = &props->v.items[i];
        const uint32_t off = (uint32_t)s->pool_len;
        if (!pool_add_string(s, m->key, m->key_len))
            return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
        const uint32_t len = (uint32_t)(s->pool_len - off);
        if (len > SC_MAX_TEXT)
            return tn_fail(c->err, TN_ERR_INVALID,
                           "a property name or enum value is longer than %d bytes (schema at "
                           "#%s)",
                           SC_MAX_TEXT, c->path);
        s->props[s->n_props++] = (sc_str){off, len, kids[i]};
    }
    if (n > 1)
        sort_strs(s, s->props + prop0, (uint32_t)n);
    sc_node *node = &s->nodes[self];
    node->prop0 = prop0;
    node->n_prop = (uint32_t)n;
    if (required) {
        /* More names than properties can only repeat them: refused, so that
         * checking them costs at most TN_JSON_SCHEMA_MAX_PROPERTIES^2. */
        if (!tn_json_is(required, TN_JSON_ARRAY) ||
            tn_json_count(required) > TN_JSON_SCHEMA_MAX_PROPERTIES)
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"required\" must be an array of names from \"properties\" (schema "
                           "at #%s)",
                           c->path);
        for (size_t r = 0; r < tn_json_count(required); r++) {
            const tn_json *name = tn_json_at(required, r);
            bool found = false;
            for (size_t i = 0; tn_json_is(name, TN_JSON_STRING) && i < n; i++) {
                const tn_json *m = &props->v.items[i];
                if (m->key_len == name->n && !memcmp(m->key, tn_json_str(name), name->n)) {
                    /* Its place in the sorted table. */
                    for (uint32_t k = 0; k < n; k++)
                        if (s->props[prop0 + k].node == kids[i])
                            node->required |= (uint64_t)1 << k;
                    found = true;
                }
            }
            if (!found)
                return tn_fail(c->err, TN_ERR_INVALID,
                               "\"required\" must be an array of names from \"properties\" "
                               "(schema at #%s)",
                               c->path);
        }
    }
    for (uint32_t k = 1; k < n; k++)
        if (!str_cmp(s, &s->props[prop0 + k - 1], &s->props[prop0 + k]))
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"properties\" must be an object of schemas (schema at #%s)", c->path);
    return TN_OK;
}

/* Keywords that only annotate: they change no answer. */
static bool annotation(const char *key) {
    static const char *const names[] = {"title",    "description", "$comment",
                                        "examples", "default",     "$schema"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(key, names[i]))
            return true;
    return false;
}

static int compile_node(compiler *c, const tn_json *v, int depth, uint32_t *out) {
    tn_json_schema *s = c->s;
    if (!tn_json_is(v, TN_JSON_OBJECT))
        return tn_fail(c->err, TN_ERR_INVALID, "a schema must be a JSON object (schema at #%s)",
                       c->path);
    if (depth > TN_JSON_SCHEMA_MAX_DEPTH)
        return tn_fail(c->err, TN_ERR_INVALID, "the schema nests deeper than %d levels (at #%s)",
                       TN_JSON_SCHEMA_MAX_DEPTH, c->path);
    for (size_t i = 0; i < v->n; i++) {
        const char *key = v->v.items[i].key;
        if (strcmp(key, "type") && strcmp(key, "properties") && strcmp(key, "required") &&
            strcmp(key, "additionalProperties") && strcmp(key, "items") && strcmp(key, "enum") &&
            strcmp(key, "const") && !annotation(key))
            return unsupported(c, key);
    }
    if (s->n_nodes >= TN_JSON_SCHEMA_MAX_NODES)
        return tn_fail(c->err, TN_ERR_INVALID, "the schema has more than %d subschemas",
                       TN_JSON_SCHEMA_MAX_NODES);
    if (!grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1, sizeof *s->nodes))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    const uint32_t self = s->n_nodes++;
    memset(&s->nodes[self], 0, sizeof s->nodes[self]);
    *out = self;

    const tn_json *type = tn_json_get(v, "type");
    const tn_json *en = tn_json_get(v, "enum");
    const tn_json *cn = tn_json_get(v, "const");
    uint8_t types = 0;
    if (type) {
        int rc = parse_types(c, type, &types);
        if (rc != TN_OK)
            return rc;
    } else if (!en && !cn) {
        return tn_fail(c->err, TN_ERR_INVALID,
                       "a schema needs a \"type\", an \"enum\" or a \"const\" (schema at #%s)",
                       c->path);
    }
    s->nodes[self].types = types;
    if (en && cn)
        return unsupported(c, "const");
    if (en || cn) {
        if (en && (!tn_json_is(en, TN_JSON_ARRAY) || tn_json_count(en) == 0 ||
                   tn_json_count(en) > TN_JSON_SCHEMA_MAX_ENUM))
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"enum\" must be an array of 1 to %d values (schema at #%s)",
                           TN_JSON_SCHEMA_MAX_ENUM, c->path);
        if (s->n_lits + (en ? tn_json_count(en) : 1) > TN_JSON_SCHEMA_MAX_LITERALS)
            return tn_fail(c->err, TN_ERR_INVALID, "the schema has more than %d enum values in all",
                           TN_JSON_SCHEMA_MAX_LITERALS);
        const uint32_t lit0 = s->n_lits;
        const size_t n = en ? tn_json_count(en) : 1;
        for (size_t i = 0; i < n; i++) {
            bool taken;
            int rc = add_literal(c, en ? tn_json_at(en, i) : cn, types, &taken);
            if (rc != TN_OK)
                return rc;
        }
        sc_str *l = s->lits + lit0;
        uint32_t k = s->n_lits - lit0, w = 0;
        sort_strs(s, l, k);
        for (uint32_t i = 0; i < k; i++) /* the same value twice: once */
            if (w == 0 || str_cmp(s, &l[w - 1], &l[i]))
                l[w++] = l[i];
        s->n_lits = lit0 + w;
        if (w == 0)
            return tn_fail(c->err, TN_ERR_INVALID,
                           "no value of the schema's \"type\" is in its \"enum\" or \"const\" "
                           "(schema at #%s)",
                           c->path);
        s->nodes[self].lits = true;
        s->nodes[self].lit0 = lit0;
        s->nodes[self].n_lit = w;
    }
    /* Keywords of the other types are compiled too, so that every
     * keyword anywhere in the schema is checked. */
    int rc = compile_object(c, v, self, depth);
    if (rc != TN_OK)
        return rc;
    const tn_json *items = tn_json_get(v, "items");
    if (items) {
        size_t mark;
        char saved[sizeof c->path];
        memcpy(saved, c->path, sizeof saved);
        path_push(c, &mark, "items", 5);
        uint32_t it = 0;
        rc = compile_node(c, items, depth + 1, &it);
        memcpy(c->path, saved, sizeof saved);
        if (rc != TN_OK)
            return rc;
        s->nodes[self].items = it;
    } else if ((types & T_ARRAY) && !s->nodes[self].lits) {
        return tn_fail(c->err, TN_ERR_INVALID, "an array schema needs \"items\" (schema at #%s)",
                       c->path);
    }
    return TN_OK;
}

void tn_json_schema_free(tn_json_schema *s) {
    if (!s)
        return;
    free(s->nodes);
    free(s->props);
    free(s->lits);
    free(s->pool);
    free(s);
}

int tn_json_schema_compile(const char *text, size_t len, tn_json_schema **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "no schema");
    *out = NULL;
    if (!text)
        return tn_fail(err, TN_ERR_INVALID, "no schema");
    if (len > TN_JSON_SCHEMA_MAX_TEXT)
        return tn_fail(err, TN_ERR_INVALID, "the schema is %zu bytes; at most %d", len,
                       TN_JSON_SCHEMA_MAX_TEXT);
    /* Duplicate keys would leave it open which one is meant; a number
     * json-glib cannot hold would not be the one the answer is held to. */
    int rc = tn_json_check(text, len, "JSON schema", TN_JSON_SCHEMA_MAX_DEPTH * 2 + 4,
                           TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS |
                               TN_JSON_NO_HUGE_INTEGERS,
                           err);
    if (rc != TN_OK)
        return rc;
    tn_json_doc *doc = NULL;
    rc = tn_json_parse(text, len, "JSON schema", &doc, err);
    if (rc != TN_OK)
        return rc;
    tn_json_schema *s = calloc(1, sizeof *s);
    if (!s) {
        tn_json_free(doc);
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    }
    compiler c = {.s = s, .text = text, .text_len = len, .err = err};
    uint32_t root = 0;
    rc = compile_node(&c, tn_json_root(doc), 1, &root);
    if (rc == TN_OK && (s->nodes[root].lits || s->nodes[root].types != T_OBJECT))
        rc = tn_fail(err, TN_ERR_INVALID,
                     "the schema's top level must be \"type\": \"object\" (no enum or const)");
    tn_json_free(doc);
    if (rc != TN_OK) {
        tn_json_schema_free(s);
        return rc;
    }
    *out = s;
    return TN_OK;
}

/* ------------------------------------------------------------- checking */

enum {
    M_START,
    M_DONE,
    M_OBJ_FIRST, /* after '{': a key or '}' */
    M_KEY,       /* after ',' in an object: a key */
    M_KEYSTR,    /* in a key: lo..hi the names it can still be */
    M_COLON,
    M_ARR_FIRST, /* after '[': a value or ']' */
    M_VALUE,     /* a value of node cur */
    M_AFTER,     /* after a value in a container */
    M_STR, /* a string's body: tn_json_lex_string's sub-states from here */
    M_ESC = M_STR + TN_JSON_LEX_ESC,
    M_HEX = M_STR + TN_JSON_LEX_HEX,
    M_UTF8 = M_STR + TN_JSON_LEX_UTF8,
    M_NUM_MINUS, /* a number: tn_json_lex_number's sub-states from here */
    M_NUM_ZERO = M_NUM_MINUS + TN_JSON_LEX_NUM_ZERO,
    M_NUM_INT = M_NUM_MINUS + TN_JSON_LEX_NUM_INT,
    M_NUM_DOT = M_NUM_MINUS + TN_JSON_LEX_NUM_DOT,
    M_NUM_FRAC = M_NUM_MINUS + TN_JSON_LEX_NUM_FRAC,
    M_NUM_E = M_NUM_MINUS + TN_JSON_LEX_NUM_E,
    M_NUM_ESIGN = M_NUM_MINUS + TN_JSON_LEX_NUM_ESIGN,
    M_NUM_EXP = M_NUM_MINUS + TN_JSON_LEX_NUM_EXP,
    M_WORD, /* true, false or null */
    M_LIT,  /* an enum value: lo..hi the ones it can still be */
};

static const char *const words[] = {"true", "false", "null"};

void tn_json_schema_init(tn_json_schema_state *st, const tn_json_schema *s) {
    memset(st, 0, sizeof *st);
    st->schema = s;
    st->mode = M_START;
}

bool tn_json_schema_complete(const tn_json_schema_state *st) { return st->mode == M_DONE; }

static inline bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Bits lo..hi-1 of a property table relative to its first entry. */
static uint64_t range_mask(uint32_t lo, uint32_t hi) {
    const uint32_t n = hi - lo;
    return (n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1)) << lo;
}

/* Narrows lo..hi (texts sharing their first off bytes, sorted) to those
 * whose byte off is c: a contiguous run, found by binary search. */
static bool narrow(const tn_json_schema *s, const sc_str *t, uint32_t *lo, uint32_t *hi,
                   uint32_t off, uint8_t c) {
    uint32_t a = *lo, b = *hi;
    /* first with key >= c (a text of length off has the lowest key) */
    while (a < b) {
        const uint32_t m = a + (b - a) / 2;
        const int k = t[m].len > off ? (uint8_t)s->pool[t[m].off + off] : -1;
        if (k < c)
            a = m + 1;
        else
            b = m;
    }
    uint32_t e = a;
    b = *hi;
    while (e < b) {
        const uint32_t m = e + (b - e) / 2;
        const int k = t[m].len > off ? (uint8_t)s->pool[t[m].off + off] : -1;
        if (k <= c)
            e = m + 1;
        else
            b = m;
    }
    if (a == e)
        return false;
    *lo = a;
    *hi = e;
    return true;
}

static const sc_node *top_node(const tn_json_schema_state *st) {
    return &st->schema->nodes[st->node[st->depth - 1]];
}

static bool push(tn_json_schema_state *st, uint32_t node, bool object) {
    if (st->depth >= TN_JSON_SCHEMA_MAX_DEPTH)
        return false;
    st->node[st->depth] = (uint16_t)node;
    st->used[st->depth] = 0;
    if (object)
        st->objects |= (uint32_t)1 << st->depth;
    else
        st->objects &= ~((uint32_t)1 << st->depth);
    st->depth++;
    st->mode = object ? M_OBJ_FIRST : M_ARR_FIRST;
    return true;
}

static void pop(tn_json_schema_state *st) {
    st->depth--;
    st->mode = st->depth == 0 ? M_DONE : M_AFTER;
}

static bool value_start(tn_json_schema_state *st, uint32_t node, uint8_t c) {
    const tn_json_schema *s = st->schema;
    const sc_node *n = &s->nodes[node];
    st->cur = (uint16_t)node;
    if (n->lits) {
        uint32_t lo = n->lit0, hi = n->lit0 + n->n_lit;
        if (!narrow(s, s->lits, &lo, &hi, 0, c))
            return false;
        st->lo_i = lo;
        st->hi_i = hi;
        st->off = 1;
        st->mode = M_LIT;
        if (hi - lo == 1 && s->lits[lo].len == 1)
            st->mode = M_AFTER;
        return true;
    }
    switch (c) {
    case '{': return (n->types & T_OBJECT) && push(st, node, true);
    case '[': return (n->types & T_ARRAY) && push(st, node, false);
    case '"': st->mode = M_STR; return (n->types & T_STRING) != 0;
    case 't':
    case 'f':
    case 'n':
        if (!(n->types & (c == 'n' ? T_NULL : T_BOOLEAN)))
            return false;
        st->mode = M_WORD;
        st->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        st->aux = 1;
        return true;
    default: {
        uint8_t sub;
        if (!(n->types & (T_NUMBER | T_INTEGER)) ||
            !tn_json_lex_number_start(c, &sub, &st->digits))
            return false;
        st->mode = (uint8_t)(M_NUM_MINUS + sub);
        return true;
    }
    }
}

static bool integer_only(const tn_json_schema_state *st) {
    return !(st->schema->nodes[st->cur].types & T_NUMBER);
}

static bool step(tn_json_schema_state *st, uint8_t c) {
    const tn_json_schema *s = st->schema;
    switch (st->mode) {
    case M_START:
        if (is_ws(c))
            return true;
        return c == '{' && push(st, 0, true);
    case M_DONE: return is_ws(c);
    case M_OBJ_FIRST:
    case M_KEY: {
        if (is_ws(c))
            return true;
        const sc_node *n = top_node(st);
        if (c == '}' && st->mode == M_OBJ_FIRST) {
            if (n->required & ~st->used[st->depth - 1])
                return false;
            pop(st);
            return true;
        }
        if (c != '"' || n->n_prop == 0)
            return false;
        st->lo_i = 0;
        st->hi_i = n->n_prop;
        st->off = 1; /* past the stored opening quote */
        st->mode = M_KEYSTR;
        return true;
    }
    case M_KEYSTR: {
        /* The table's names are stored quoted: the closing quote is
         * matched like any other byte, and ends the key when it matches. */
        const sc_node *n = top_node(st);
        const sc_str *t = s->props + n->prop0;
        const uint64_t used = st->used[st->depth - 1];
        uint32_t lo = st->lo_i, hi = st->hi_i;
        if (!narrow(s, t, &lo, &hi, st->off, c) || !(range_mask(lo, hi) & ~used))
            return false;
        st->lo_i = lo;
        st->hi_i = hi;
        st->off++;
        /* A whole name ends with its unescaped closing quote, which no
         * other name continues: it is alone in the range. */
        if (t[lo].len == st->off) {
            st->used[st->depth - 1] |= (uint64_t)1 << lo;
            st->cur = (uint16_t)t[lo].node;
            st->mode = M_COLON;
        }
        return true;
    }
    case M_COLON:
        if (is_ws(c))
            return true;
        if (c != ':')
            return false;
        st->mode = M_VALUE;
        return true;
    case M_ARR_FIRST:
        if (is_ws(c))
            return true;
        if (c == ']') {
            pop(st);
            return true;
        }
        return value_start(st, top_node(st)->items, c);
    case M_VALUE: return is_ws(c) || value_start(st, st->cur, c);
    case M_AFTER: {
        if (is_ws(c))
            return true;
        const sc_node *n = top_node(st);
        const bool is_obj = (st->objects >> (st->depth - 1)) & 1u;
        if (c == ',') {
            if (is_obj) {
                if (!(range_mask(0, n->n_prop) & ~st->used[st->depth - 1]))
                    return false;
                st->mode = M_KEY;
                return true;
            }
            st->cur = (uint16_t)n->items;
            st->mode = M_VALUE;
            return true;
        }
        if (c == (is_obj ? '}' : ']')) {
            if (is_obj && (n->required & ~st->used[st->depth - 1]))
                return false;
            pop(st);
            return true;
        }
        return false;
    }
    case M_STR:
    case M_ESC:
    case M_HEX:
    case M_UTF8: {
        uint8_t sub = (uint8_t)(st->mode - M_STR);
        const int r = tn_json_lex_string(&sub, &st->aux, &st->lo, &st->hi, &st->hex, c);
        if (r == TN_JSON_LEX_BAD)
            return false;
        st->mode = r == TN_JSON_LEX_END ? M_AFTER : (uint8_t)(M_STR + sub);
        return true;
    }
    case M_NUM_MINUS:
    case M_NUM_ZERO:
    case M_NUM_INT:
    case M_NUM_DOT:
    case M_NUM_FRAC:
    case M_NUM_E:
    case M_NUM_ESIGN:
    case M_NUM_EXP: {
        const tn_json_lex_num_rules rules = {SC_MAX_INT_DIGITS, SC_MAX_FRAC_DIGITS,
                                             SC_MAX_EXP_DIGITS, integer_only(st)};
        uint8_t sub = (uint8_t)(st->mode - M_NUM_MINUS);
        const int r = tn_json_lex_number(&sub, &st->digits, &rules, c);
        if (r == TN_JSON_LEX_BAD)
            return false;
        if (r == TN_JSON_LEX_END) {
            st->mode = M_AFTER; /* the number ended: c belongs to what follows */
            return step(st, c);
        }
        st->mode = (uint8_t)(M_NUM_MINUS + sub);
        return true;
    }
    case M_WORD: {
        const char *w = words[st->lit];
        if (c != (uint8_t)w[st->aux])
            return false;
        if (w[++st->aux] == '\0')
            st->mode = M_AFTER;
        return true;
    }
    case M_LIT: {
        uint32_t lo = st->lo_i, hi = st->hi_i;
        if (narrow(s, s->lits, &lo, &hi, st->off, c)) {
            st->lo_i = lo;
            st->hi_i = hi;
            st->off++;
            if (hi - lo == 1 && s->lits[lo].len == st->off)
                st->mode = M_AFTER;
            return true;
        }
        /* A number equal to what was written, which another one in the
         * range continues ("1" of 1 and 12), ends at a byte of what follows. */
        if (s->lits[st->lo_i].len != st->off)
            return false;
        st->mode = M_AFTER;
        return step(st, c);
    }
    default: return false;
    }
}

static bool in_string(const tn_json_schema_state *st) {
    if (st->mode >= M_STR && st->mode <= M_UTF8)
        return true;
    if (st->mode == M_KEYSTR)
        return true;
    return st->mode == M_LIT && st->schema->pool[st->schema->lits[st->lo_i].off] == '"';
}

size_t tn_json_schema_feed(tn_json_schema_state *st, const char *bytes, size_t n) {
    if (!st->schema)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t c = (uint8_t)bytes[i];
        const bool space = is_ws(c) && !in_string(st);
        if (space && st->space >= TN_JSON_SCHEMA_MAX_SPACE)
            return i;
        tn_json_schema_state q = *st;
        if (!step(&q, c))
            return i;
        q.space = space ? q.space + 1 : 0;
        *st = q;
    }
    return n;
}
