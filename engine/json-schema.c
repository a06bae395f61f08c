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
 * can still become are a contiguous range, narrowed byte by byte. A $ref
 * is resolved at compile time to the node it names (so a recursive schema
 * is a graph of nodes). An anyOf whose branches can start alike is
 * rewritten into branches that cannot (scalar types and enums merged,
 * objects into one union node), so that a value's first byte picks the
 * one node it follows; a union's frame keeps the object branches still
 * open, and a key or an enum value that one branch lacks closes it. The
 * checker never accepts a byte after which no valid document can follow:
 * every node has at least one value that fits the levels left (an object
 * is opened, a property started, only if so), every open key or literal
 * range is non-empty and holds an unused name, and ',' in an object needs
 * a property left to write. A oneOf is followed as an anyOf where its
 * branches are shown apart (no value can match two of them: "exactly
 * one" then holds), and refused where they may overlap. A schema whose
 * shortest value somewhere a document reaches passes SC_MAX_SHORTEST
 * bytes is refused, naming the subschema: the answer could not end. */
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

/* How a value can start: its first byte tells them apart. */
enum {
    K_OBJECT = 1 << 0,
    K_ARRAY = 1 << 1,
    K_STRING = 1 << 2,
    K_NUMBER = 1 << 3,
    K_TRUE = 1 << 4,
    K_FALSE = 1 << 5,
    K_NULL = 1 << 6,
};

/* A $ref not yet resolved: none, the root ("#"), or else the index of a
 * definition in the compiler's table. */
#define SC_REF_NONE (-1)
#define SC_REF_ROOT (-2)
/* min_depth of a schema no finite document within the depth bound fits. */
#define SC_NO_END 255

typedef struct sc_node {
    uint8_t types; /* T_*; ignored when lits is set */
    bool lits;     /* enum or const: the value is one of lit0..lit0+n_lit */
    uint32_t lit0, n_lit;
    uint32_t prop0, n_prop;    /* object: properties sorted by encoded name */
    uint64_t required;         /* bit i: property prop0 + i */
    uint32_t items;            /* array: the items' node */
    uint32_t any0, n_any;      /* anyOf: its branches' nodes, any0.. in branches */
    uint32_t where, where_len; /* its JSON pointer in the pool, for messages */
    int32_t ref;               /* $ref before it is resolved (SC_REF_*) */
    uint8_t kinds;             /* K_*: the bytes a value of it can start with */
    /* Containers a value of it opens at the least (SC_NO_END: none fits
     * the depth bound), and the same for it written as an object: a $ref
     * can recurse, and the checker opens only what it can close. */
    uint8_t min_depth, obj_depth;
    /* An anyOf of objects followed in lockstep (merge_objects): its entry
     * in unions, plus one; 0 for none. */
    uint16_t uni;
    /* An enum of such a union's property whose values tell its branches
     * apart: each value's node field is the mask of the branches it keeps. */
    bool narrows;
    bool one; /* a oneOf: its branches are checked apart before it is followed as an anyOf */
    /* An object whose schema says "additionalProperties": false: only then
     * does JSON Schema refuse it a key that is not in its properties. */
    bool closed;
    /* Bytes of the shortest value, and of the shortest written as an
     * object, within the levels min_depth and obj_depth (the most any
     * place that lets it start can ask of it); SC_LEN_NONE: none. */
    uint32_t min_len, obj_len;
} sc_node;

/* The branches of an anyOf of objects, over one table of all their
 * property names (the union node's): bit i of props and required is the
 * node's property prop0 + i. A frame of it keeps the branches still open
 * in tn_json_schema_state.live. */
typedef struct sc_union {
    uint32_t n;
    uint32_t node[TN_JSON_SCHEMA_MAX_ANY];
    uint64_t props[TN_JSON_SCHEMA_MAX_ANY], required[TN_JSON_SCHEMA_MAX_ANY];
} sc_union;

#define SC_LEN_NONE UINT32_MAX
/* The longest shortest value a schema may have: a longer one is an
 * answer that max_tokens cuts off rather than one the model can finish
 * (docs/SERVER.md, "Structured output"). */
#define SC_MAX_SHORTEST (64 * 1024)

/* An encoded text in the pool: a property name (node: its value's schema)
 * or an enum value (node: in a narrowing enum, the mask of the union's
 * branches that allow it; else 0). */
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
    uint32_t *branches; /* anyOf's branches, each a node */
    uint32_t n_branches, cap_branches;
    sc_union *unions;
    uint32_t n_unions, cap_unions;
    char *pool;
    size_t pool_len, cap_pool;
    uint32_t root;
    bool recursive; /* a $ref: a property's value may not fit the depth left */
};

/* Longest encoded property name or enum value. */
#define SC_MAX_TEXT 1024
/* Digits a number may have in each part: json-glib reads a whole number
 * beyond int64 wrapped and a double beyond its range as infinity. */
#define SC_MAX_INT_DIGITS 18
#define SC_MAX_FRAC_DIGITS 18
#define SC_MAX_EXP_DIGITS 2

/* ------------------------------------------------------------- compiling */

/* A definition's table ("$defs" or "definitions") and name, and its index
 * in the compiler's defs. */
struct def_key {
    const char *table, *name;
    size_t len;
    uint32_t i;
};

typedef struct compiler {
    tn_json_schema *s;
    const char *text;
    size_t text_len;
    tn_error *err;
    /* The top level's "$defs" and "definitions" members, one table, and
     * the node each compiled to. */
    const tn_json **defs;
    const char **def_table;
    uint32_t *def_node;
    uint32_t n_defs;
    struct def_key *def_sorted; /* defs by table and name, for parse_ref's search */
    /* A oneOf's "discriminator" and its node, checked against the branches
     * once every $ref is resolved. */
    struct disc_at {
        const tn_json *disc;
        uint32_t node;
    } * disc;
    uint32_t n_disc, cap_disc;
    uint32_t apart_budget; /* steps left to tell oneOf branches apart, all of them */
    uint32_t lit_budget;   /* and enum values left to compare */
    bool apart_cut;        /* a look for the pair at hand stopped at a bound */
    char path[256];        /* JSON pointer of the node being compiled, for messages */
    /* The pairs of property schemas the look is inside (apart_props):
     * taken as apart when met again, deeper in the value. */
    uint32_t assumed[4 * TN_JSON_SCHEMA_MAX_DEPTH + 2][2];
    uint32_t n_assumed;
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
    node->closed = additional != NULL;
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

/* An annotation of the type JSON Schema's meta-schema gives it: a strict
 * validator refuses "description": 5, and a schema it refuses is not the
 * one the client meant. */
static int check_annotation(compiler *c, const tn_json *m) {
    const char *key = m->key;
    if (!strcmp(key, "examples")) {
        if (!tn_json_is(m, TN_JSON_ARRAY))
            return tn_fail(c->err, TN_ERR_INVALID, "\"examples\" must be an array (schema at #%s)",
                           c->path);
    } else if (strcmp(key, "default") && !tn_json_is(m, TN_JSON_STRING)) {
        return tn_fail(c->err, TN_ERR_INVALID, "\"%s\" must be a string (schema at #%s)", key,
                       c->path);
    }
    return TN_OK;
}

static bool is_defs(const char *key) {
    return !strcmp(key, "$defs") || !strcmp(key, "definitions");
}

static int new_node(compiler *c, uint32_t *out) {
    tn_json_schema *s = c->s;
    if (s->n_nodes >= TN_JSON_SCHEMA_MAX_NODES)
        return tn_fail(c->err, TN_ERR_INVALID, "the schema has more than %d subschemas",
                       TN_JSON_SCHEMA_MAX_NODES);
    if (!grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1, sizeof *s->nodes))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    *out = s->n_nodes++;
    memset(&s->nodes[*out], 0, sizeof s->nodes[*out]);
    s->nodes[*out].ref = SC_REF_NONE;
    /* Where it is, for a refusal found once the whole schema is compiled
     * (empty there: merge_any's nodes take their anyOf's). */
    const size_t n = strlen(c->path);
    s->nodes[*out].where = (uint32_t)s->pool_len;
    s->nodes[*out].where_len = (uint32_t)n;
    if (n && !pool_add(s, c->path, n))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    return TN_OK;
}

/* Node to is named as node from is in messages. */
static void copy_where(tn_json_schema *s, uint32_t to, uint32_t from) {
    s->nodes[to].where = s->nodes[from].where;
    s->nodes[to].where_len = s->nodes[from].where_len;
}

/* The order of def_sorted: by table, then by name's bytes. */
static int def_cmp(const char *ta, const char *a, size_t na, const char *tb, const char *b,
                   size_t nb) {
    const int t = strcmp(ta, tb);
    if (t)
        return t;
    const int k = memcmp(a, b, na < nb ? na : nb);
    if (k)
        return k;
    return na < nb ? -1 : na > nb;
}

static int def_order(const void *x, const void *y) {
    const struct def_key *a = x, *b = y;
    return def_cmp(a->table, a->name, a->len, b->table, b->name, b->len);
}

/* A "$ref": "#" (the whole schema) or "#/$defs/NAME" ("#/definitions/NAME",
 * a definition of the top level). The part after '#' is a URI fragment
 * holding a JSON pointer (RFC 6901, section 6): its %XX escapes are
 * decoded first, then the pointer's ~1 ('/') and ~0 ('~'), so that
 * "#/$defs/a%20b" names "a b" and "%7E1" a '/' within the name. */
static int parse_ref(compiler *c, const tn_json *ref, int32_t *out) {
    const char *r = tn_json_str(ref);
    if (!r)
        return tn_fail(c->err, TN_ERR_INVALID, "\"$ref\" must be a string (schema at #%s)",
                       c->path);
    char frag[SC_MAX_TEXT + 16];
    size_t fn = 0;
    bool fits = r[0] == '#';
    for (const char *p = r + 1; fits && *p; p++) {
        char ch = *p;
        if (ch == '%') {
            const int hi = tn_hex_digit((unsigned char)p[1]);
            const int lo = hi < 0 ? -1 : tn_hex_digit((unsigned char)p[2]);
            if (lo < 0)
                return tn_fail(c->err, TN_ERR_INVALID,
                               "\"$ref\": \"%.200s\" has a '%%' not followed by two hex digits "
                               "(schema at #%s)",
                               r, c->path);
            ch = (char)(hi * 16 + lo);
            p += 2;
        }
        if (fn == sizeof frag)
            fits = false;
        else
            frag[fn++] = ch;
    }
    if (fits && fn == 0) {
        *out = SC_REF_ROOT;
        return TN_OK;
    }
    for (uint32_t t = 0; fits && t < 2; t++) {
        const char *prefix = t == 0 ? "/$defs/" : "/definitions/";
        const size_t pn = strlen(prefix);
        if (fn < pn || memcmp(frag, prefix, pn))
            continue;
        char name[SC_MAX_TEXT + 1];
        size_t n = 0;
        bool ok = true;
        for (size_t i = pn; i < fn && ok; i++) {
            char ch = frag[i];
            if (ch == '~') {
                ch = i + 1 < fn && frag[i + 1] == '0'   ? '~'
                     : i + 1 < fn && frag[i + 1] == '1' ? '/'
                                                        : 0;
                if (ch)
                    i++;
                else
                    ok = false;
            } else if (ch == '/') {
                ok = false; /* deeper into a definition */
            }
            if (ok && n >= SC_MAX_TEXT)
                ok = false;
            else if (ok)
                name[n++] = ch;
        }
        uint32_t lo = 0, hi = ok ? c->n_defs : 0;
        while (lo < hi) {
            const uint32_t m = lo + (hi - lo) / 2;
            const struct def_key *d = &c->def_sorted[m];
            const int k =
                def_cmp(d->table, d->name, d->len, t == 0 ? "$defs" : "definitions", name, n);
            if (k == 0) {
                *out = (int32_t)d->i;
                return TN_OK;
            }
            if (k < 0)
                lo = m + 1;
            else
                hi = m;
        }
        if (ok)
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"$ref\": \"%.200s\" names no schema of the top level's \"%s\" "
                           "(schema at #%s)",
                           r, t == 0 ? "$defs" : "definitions", c->path);
        break;
    }
    return tn_fail(c->err, TN_ERR_INVALID,
                   "\"$ref\": \"%.200s\" is not supported: only \"#\" and "
                   "\"#/$defs/NAME\" (or \"#/definitions/NAME\") of this schema (schema at #%s)",
                   r, c->path);
}

/* {"$ref": ...}, {"anyOf": [...]} or {"oneOf": [...]}, with annotations
 * only beside it (and a oneOf's "discriminator", an OpenAPI annotation
 * that Pydantic writes, checked against the branches in check_disc). */
static int compile_ref_any(compiler *c, const tn_json *v, int depth, uint32_t *out) {
    tn_json_schema *s = c->s;
    const tn_json *ref = tn_json_get(v, "$ref");
    const char *what = ref ? "$ref" : tn_json_get(v, "anyOf") ? "anyOf" : "oneOf";
    const bool one = !strcmp(what, "oneOf");
    for (size_t i = 0; i < v->n; i++) {
        const char *key = v->v.items[i].key;
        if (!strcmp(key, what) || annotation(key) || (depth == 1 && is_defs(key)) ||
            (one && !strcmp(key, "discriminator")))
            continue;
        return tn_fail(c->err, TN_ERR_INVALID,
                       "\"%s\" beside \"%s\" is not supported (schema at #%s)", key, what, c->path);
    }
    uint32_t self;
    int rc = new_node(c, &self);
    if (rc != TN_OK)
        return rc;
    *out = self;
    if (ref) {
        int32_t r = SC_REF_NONE;
        rc = parse_ref(c, ref, &r);
        if (rc != TN_OK)
            return rc;
        s->nodes[self].ref = r;
        s->recursive = true;
        return TN_OK;
    }
    const tn_json *any = tn_json_get(v, what);
    const size_t n = tn_json_count(any);
    if (!tn_json_is(any, TN_JSON_ARRAY) || n == 0 || n > TN_JSON_SCHEMA_MAX_ANY)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "\"%s\" must be an array of 1 to %d schemas (schema at #%s)", what,
                       TN_JSON_SCHEMA_MAX_ANY, c->path);
    const tn_json *disc = tn_json_get(v, "discriminator");
    if (disc) {
        if (!grow((void **)&c->disc, &c->cap_disc, c->n_disc + 1, sizeof *c->disc))
            return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
        c->disc[c->n_disc++] = (struct disc_at){disc, self};
    }
    s->nodes[self].one = one;
    uint32_t kids[TN_JSON_SCHEMA_MAX_ANY];
    for (size_t i = 0; i < n; i++) {
        size_t mark;
        char saved[sizeof c->path], idx[24];
        memcpy(saved, c->path, sizeof saved);
        path_push(c, &mark, what, strlen(what));
        const int k = snprintf(idx, sizeof idx, "%zu", i);
        path_push(c, &mark, idx, (size_t)k);
        rc = compile_node(c, tn_json_at(any, i), depth + 1, &kids[i]);
        memcpy(c->path, saved, sizeof saved);
        if (rc != TN_OK)
            return rc;
    }
    if (!grow((void **)&s->branches, &s->cap_branches, s->n_branches + (uint32_t)n,
              sizeof *s->branches))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    s->nodes[self].any0 = s->n_branches;
    s->nodes[self].n_any = (uint32_t)n;
    memcpy(s->branches + s->n_branches, kids, n * sizeof *kids);
    s->n_branches += (uint32_t)n;
    return TN_OK;
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
        if (annotation(key)) {
            int rc = check_annotation(c, &v->v.items[i]);
            if (rc != TN_OK)
                return rc;
        } else if (is_defs(key) && depth != 1) {
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"%s\" is supported only at the schema's top level (schema at #%s)",
                           key, c->path);
        }
    }
    if (tn_json_get(v, "$ref") || tn_json_get(v, "anyOf") || tn_json_get(v, "oneOf"))
        return compile_ref_any(c, v, depth, out);
    for (size_t i = 0; i < v->n; i++) {
        const char *key = v->v.items[i].key;
        if (strcmp(key, "type") && strcmp(key, "properties") && strcmp(key, "required") &&
            strcmp(key, "additionalProperties") && strcmp(key, "items") && strcmp(key, "enum") &&
            strcmp(key, "const") && !annotation(key) && !(depth == 1 && is_defs(key)))
            return unsupported(c, key);
    }
    uint32_t self;
    int rc0 = new_node(c, &self);
    if (rc0 != TN_OK)
        return rc0;
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

/* The top level's "$defs" and "definitions", collected before anything
 * is compiled (a $ref names them from anywhere), then compiled once each. */
static int collect_defs(compiler *c, const tn_json *root) {
    size_t total = 0;
    for (int t = 0; t < 2; t++) {
        const char *name = t == 0 ? "$defs" : "definitions";
        const tn_json *d = tn_json_get(root, name);
        if (d && !tn_json_is(d, TN_JSON_OBJECT))
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"%s\" must be an object of schemas (schema at #)", name);
        total += tn_json_count(d);
    }
    if (total > TN_JSON_SCHEMA_MAX_NODES)
        return tn_fail(c->err, TN_ERR_INVALID, "the schema has more than %d subschemas",
                       TN_JSON_SCHEMA_MAX_NODES);
    if (total == 0)
        return TN_OK;
    c->defs = calloc(total, sizeof *c->defs);
    c->def_table = calloc(total, sizeof *c->def_table);
    c->def_node = calloc(total, sizeof *c->def_node);
    c->def_sorted = calloc(total, sizeof *c->def_sorted);
    if (!c->defs || !c->def_table || !c->def_node || !c->def_sorted)
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    for (int t = 0; t < 2; t++) {
        const char *name = t == 0 ? "$defs" : "definitions";
        const tn_json *d = tn_json_get(root, name);
        for (size_t i = 0; i < tn_json_count(d); i++) {
            c->def_sorted[c->n_defs] =
                (struct def_key){name, d->v.items[i].key, d->v.items[i].key_len, c->n_defs};
            c->defs[c->n_defs] = &d->v.items[i];
            c->def_table[c->n_defs++] = name;
        }
    }
    /* Names are unique in each table (duplicate keys are refused). */
    qsort(c->def_sorted, c->n_defs, sizeof *c->def_sorted, def_order);
    return TN_OK;
}

static int compile_defs(compiler *c) {
    for (uint32_t i = 0; i < c->n_defs; i++) {
        size_t mark;
        c->path[0] = '\0';
        path_push(c, &mark, c->def_table[i], strlen(c->def_table[i]));
        path_push(c, &mark, c->defs[i]->key, c->defs[i]->key_len);
        int rc = compile_node(c, c->defs[i], 2, &c->def_node[i]);
        if (rc != TN_OK)
            return rc;
    }
    c->path[0] = '\0';
    return TN_OK;
}

static int ref_cycle(compiler *c, int32_t ref) {
    if (ref == SC_REF_ROOT)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "\"$ref\": \"#\" leads back to itself before any value is written");
    return tn_fail(c->err, TN_ERR_INVALID,
                   "\"$ref\" to #/%s/%.200s leads back to itself before any value is written",
                   c->def_table[ref], c->defs[ref]->key);
}

/* Every $ref replaced by the node it leads to: a chain of them ends at a
 * schema, or is a cycle that writes nothing and would never end. */
static int resolve_refs(compiler *c) {
    tn_json_schema *s = c->s;
    /* Each chain is walked once: the nodes on it all lead where it ends,
     * and a later chain stops at the first node already resolved. */
    uint32_t *to = malloc((size_t)s->n_nodes * sizeof *to);
    uint32_t *path = malloc((size_t)s->n_nodes * sizeof *path);
    if (!to || !path) {
        free(to);
        free(path);
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    }
    const uint32_t open = UINT32_MAX - 1, unknown = UINT32_MAX;
    for (uint32_t i = 0; i < s->n_nodes; i++)
        to[i] = s->nodes[i].ref == SC_REF_NONE ? i : unknown;
    int rc = TN_OK;
    for (uint32_t i = 0; i < s->n_nodes && rc == TN_OK; i++) {
        uint32_t t = i, n_path = 0;
        while (to[t] == unknown) {
            to[t] = open;
            path[n_path++] = t;
            const int32_t r = s->nodes[t].ref;
            t = r == SC_REF_ROOT ? s->root : c->def_node[r];
            if (to[t] == open) {
                rc = ref_cycle(c, r);
                break;
            }
        }
        const uint32_t end = rc == TN_OK ? to[t] : t;
        for (uint32_t k = 0; k < n_path; k++)
            to[path[k]] = end;
    }
    free(path);
    if (rc == TN_OK) {
        for (uint32_t i = 0; i < s->n_nodes; i++)
            s->nodes[i].items = to[s->nodes[i].items];
        for (uint32_t i = 0; i < s->n_props; i++)
            s->props[i].node = to[s->props[i].node];
        for (uint32_t i = 0; i < s->n_branches; i++)
            s->branches[i] = to[s->branches[i]];
        for (uint32_t i = 0; i < c->n_defs; i++) /* for a discriminator's mapping */
            c->def_node[i] = to[c->def_node[i]];
        s->root = to[s->root];
    }
    free(to);
    return rc;
}

/* Two nodes that take the same values, as far as a bounded look finds:
 * the same node, or the same keywords over such nodes. */
static bool same_node(const tn_json_schema *s, uint32_t a, uint32_t b, uint32_t *budget) {
    if (a == b)
        return true;
    if (*budget == 0)
        return false;
    (*budget)--;
    const sc_node *x = &s->nodes[a], *y = &s->nodes[b];
    if (x->lits != y->lits || x->n_any != y->n_any || x->uni || y->uni || x->narrows || y->narrows)
        return false;
    if (x->lits) {
        if (x->n_lit != y->n_lit)
            return false;
        for (uint32_t i = 0; i < x->n_lit; i++)
            if (str_cmp(s, &s->lits[x->lit0 + i], &s->lits[y->lit0 + i]))
                return false;
        return true;
    }
    if (x->n_any) {
        for (uint32_t i = 0; i < x->n_any; i++)
            if (!same_node(s, s->branches[x->any0 + i], s->branches[y->any0 + i], budget))
                return false;
        return true;
    }
    if (x->types != y->types)
        return false;
    if ((x->types & T_ARRAY) && !same_node(s, x->items, y->items, budget))
        return false;
    if (x->types & T_OBJECT) {
        if (x->n_prop != y->n_prop || x->required != y->required)
            return false;
        for (uint32_t i = 0; i < x->n_prop; i++) {
            const sc_str *p = &s->props[x->prop0 + i], *q = &s->props[y->prop0 + i];
            if (str_cmp(s, p, q) || !same_node(s, p->node, q->node, budget))
                return false;
        }
    }
    return true;
}

/* An anyOf's JSON pointer, for "%.*s" in its messages. */
#define ANY_WHERE(s, i)                                                                            \
    (int)(s)->nodes[i].where_len, (s)->nodes[i].where_len ? (s)->pool + (s)->nodes[i].where : ""

/* A number literal that is a whole number (1.0 and 1e2 are integers to
 * JSON Schema), read from its text: its digits past the point, once the
 * exponent has moved it, are all zeros. No strtod: the locale may write
 * the point as a comma. */
static bool lit_integer(const tn_json_schema *s, const sc_str *l) {
    const char *t = s->pool + l->off, *end = t + l->len;
    if (t < end && *t == '-')
        t++;
    long point = 0, last = 0, n = 0; /* digits before the point, up to the last nonzero one */
    bool frac = false;
    for (; t < end && ((*t >= '0' && *t <= '9') || *t == '.'); t++) {
        if (*t == '.') {
            frac = true;
            continue;
        }
        n++;
        if (!frac)
            point++;
        if (*t != '0')
            last = n;
    }
    long exp = 0;
    if (t < end && (*t == 'e' || *t == 'E')) {
        const bool neg = ++t < end && *t == '-';
        if (t < end && (*t == '-' || *t == '+'))
            t++;
        for (; t < end && exp < 100000; t++)
            exp = exp * 10 + (*t - '0');
        if (neg)
            exp = -exp;
    }
    return last <= point + exp;
}

/* A new literal node of the n texts in t (sorted here, each once; a text
 * met twice keeps the union of its node fields, the masks of a narrowing
 * enum). */
static int new_lits(compiler *c, sc_str *t, uint32_t n, bool narrows, uint32_t *out) {
    tn_json_schema *s = c->s;
    sort_strs(s, t, n);
    uint32_t w = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (w && !str_cmp(s, &t[w - 1], &t[i]))
            t[w - 1].node |= t[i].node;
        else
            t[w++] = t[i];
    }
    if (s->n_lits + w > TN_JSON_SCHEMA_MAX_LITERALS)
        return tn_fail(c->err, TN_ERR_INVALID, "the schema has more than %d enum values in all",
                       TN_JSON_SCHEMA_MAX_LITERALS);
    int rc = new_node(c, out);
    if (rc != TN_OK)
        return rc;
    if (!grow((void **)&s->lits, &s->cap_lits, s->n_lits + w, sizeof *s->lits))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    sc_node *l = &s->nodes[*out];
    l->lits = true;
    l->narrows = narrows;
    l->lit0 = s->n_lits;
    l->n_lit = w;
    memcpy(s->lits + s->n_lits, t, w * sizeof *t);
    s->n_lits += w;
    return TN_OK;
}

/* One entry of the names of a union's branches: a property of branch b. */
typedef struct un_name {
    sc_str p;
    uint32_t b;
    bool required;
} un_name;

/* The object branches obj[0..n) of anyOf self as one union node, whose
 * frame follows all of them until a key or an enum value leaves one. A
 * property they share must have the same schema in each (its value then
 * tells them nothing) or be an enum or const in each (its value keeps
 * the branches that allow it). */
static int merge_objects(compiler *c, uint32_t self, const uint32_t *obj, uint32_t n,
                         uint32_t *out) {
    tn_json_schema *s = c->s;
    if (n > TN_JSON_SCHEMA_MAX_ANY)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "\"anyOf\" is supported with at most %d object branches in all (schema at "
                       "#%.*s)",
                       TN_JSON_SCHEMA_MAX_ANY, ANY_WHERE(s, self));
    uint32_t total = 0;
    for (uint32_t b = 0; b < n; b++)
        total += s->nodes[obj[b]].n_prop;
    un_name *all = malloc((total ? total : 1) * sizeof *all);
    sc_str *lits = NULL;
    if (!all)
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    uint32_t k = 0;
    for (uint32_t b = 0; b < n; b++) {
        const sc_node *o = &s->nodes[obj[b]];
        for (uint32_t i = 0; i < o->n_prop; i++)
            all[k++] = (un_name){s->props[o->prop0 + i], b, (o->required >> i) & 1};
    }
    /* By name, branch order kept among equal names (insertion sort). */
    for (uint32_t i = 1; i < k; i++) {
        const un_name x = all[i];
        uint32_t j = i;
        while (j > 0 && str_cmp(s, &all[j - 1].p, &x.p) > 0) {
            all[j] = all[j - 1];
            j--;
        }
        all[j] = x;
    }
    sc_union u = {.n = n};
    memcpy(u.node, obj, n * sizeof *obj);
    sc_str names[TN_JSON_SCHEMA_MAX_PROPERTIES];
    uint32_t n_names = 0, budget = 1 << 14;
    int rc = TN_OK;
    for (uint32_t i = 0; i < k && rc == TN_OK;) {
        uint32_t e = i + 1;
        while (e < k && !str_cmp(s, &all[i].p, &all[e].p))
            e++;
        if (n_names == TN_JSON_SCHEMA_MAX_PROPERTIES) {
            rc = tn_fail(c->err, TN_ERR_INVALID,
                         "the object branches of an \"anyOf\" have more than %d property names "
                         "in all (schema at #%.*s)",
                         TN_JSON_SCHEMA_MAX_PROPERTIES, ANY_WHERE(s, self));
            break;
        }
        bool same = true, enums = true;
        uint32_t n_lit = 0;
        for (uint32_t j = i; j < e; j++) {
            const sc_node *v = &s->nodes[all[j].p.node];
            same = same && same_node(s, all[i].p.node, all[j].p.node, &budget);
            enums = enums && v->lits && !v->narrows;
            n_lit += v->lits ? v->n_lit : 0;
        }
        uint32_t value = all[i].p.node;
        if (!same && enums) {
            lits = malloc(n_lit * sizeof *lits);
            if (!lits) {
                rc = tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
                break;
            }
            uint32_t m = 0;
            for (uint32_t j = i; j < e; j++) {
                const sc_node *v = &s->nodes[all[j].p.node];
                for (uint32_t l = 0; l < v->n_lit; l++) {
                    lits[m] = s->lits[v->lit0 + l];
                    lits[m++].node = (uint32_t)1 << all[j].b;
                }
            }
            rc = new_lits(c, lits, m, true, &value);
            if (rc == TN_OK)
                copy_where(s, value, self);
            free(lits);
            lits = NULL;
        } else if (!same) {
            rc = tn_fail(c->err, TN_ERR_INVALID,
                         "the object branches of an \"anyOf\" must give a property they share "
                         "the same schema, or an enum or const in each; they differ at %.*s "
                         "(schema at #%.*s)",
                         (int)all[i].p.len, s->pool + all[i].p.off, ANY_WHERE(s, self));
        }
        for (uint32_t j = i; j < e; j++) {
            u.props[all[j].b] |= (uint64_t)1 << n_names;
            if (all[j].required)
                u.required[all[j].b] |= (uint64_t)1 << n_names;
        }
        names[n_names] = all[i].p;
        names[n_names++].node = value;
        i = e;
    }
    free(all);
    if (rc != TN_OK)
        return rc;
    if (s->n_unions >= UINT16_MAX - 1)
        return tn_fail(c->err, TN_ERR_INVALID, "the schema has more than %d subschemas",
                       TN_JSON_SCHEMA_MAX_NODES);
    rc = new_node(c, out);
    if (rc != TN_OK)
        return rc;
    if (!grow((void **)&s->props, &s->cap_props, s->n_props + n_names, sizeof *s->props) ||
        !grow((void **)&s->unions, &s->cap_unions, s->n_unions + 1, sizeof *s->unions))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    copy_where(s, *out, self);
    sc_node *un = &s->nodes[*out];
    un->types = T_OBJECT;
    un->prop0 = s->n_props;
    un->n_prop = n_names;
    un->uni = (uint16_t)(s->n_unions + 1);
    memcpy(s->props + s->n_props, names, n_names * sizeof *names);
    s->n_props += n_names;
    s->unions[s->n_unions++] = u;
    return TN_OK;
}

/* A copy of node i that takes only its values of the types keep. */
static int restrict_types(compiler *c, uint32_t i, uint8_t keep, uint32_t *out) {
    tn_json_schema *s = c->s;
    if (s->nodes[i].types == keep)
        return *out = i, TN_OK;
    int rc = new_node(c, out);
    if (rc != TN_OK)
        return rc;
    s->nodes[*out] = s->nodes[i];
    s->nodes[*out].types = keep;
    return TN_OK;
}

/* An anyOf whose branches can start alike, rewritten into at most four
 * that cannot: the scalar types of all branches (number takes integer in),
 * the enum and const values no such type takes, the objects (one, or a
 * union followed in lockstep) and the arrays (one: arrays of different
 * items are refused). The values it takes are the same. */
static int merge_any(compiler *c, uint32_t self) {
    tn_json_schema *s = c->s;
    /* The branches, those of an anyOf among them in its place (an anyOf
     * left as it was can hold one: Optional[Union[A, B]]), depth first. */
    enum { FLAT = TN_JSON_SCHEMA_MAX_ANY * TN_JSON_SCHEMA_MAX_ANY };
    uint32_t flat[FLAT], n_flat = 0, todo[FLAT], n_todo = 0;
    for (uint32_t b = s->nodes[self].n_any; b-- > 0;)
        todo[n_todo++] = s->branches[s->nodes[self].any0 + b];
    while (n_todo) {
        const uint32_t j = todo[--n_todo];
        const sc_node *bj = &s->nodes[j];
        if (n_flat == FLAT || (bj->n_any && n_todo + bj->n_any > FLAT))
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"anyOf\" is supported with at most %d object branches in all "
                           "(schema at #%.*s)",
                           TN_JSON_SCHEMA_MAX_ANY, ANY_WHERE(s, self));
        if (bj->n_any)
            for (uint32_t k = bj->n_any; k-- > 0;)
                todo[n_todo++] = s->branches[bj->any0 + k];
        else
            flat[n_flat++] = j;
    }
    const uint8_t scalars = T_STRING | T_NUMBER | T_INTEGER | T_BOOLEAN | T_NULL;
    uint8_t ty = 0;
    uint32_t n_lit = 0, obj[TN_JSON_SCHEMA_MAX_ANY * TN_JSON_SCHEMA_MAX_ANY], n_obj = 0;
    uint32_t arr = UINT32_MAX, budget = 1 << 14;
    for (uint32_t f = 0; f < n_flat; f++) {
        const sc_node *n = &s->nodes[flat[f]];
        if (n->lits) {
            n_lit += n->n_lit;
            continue;
        }
        ty |= n->types & scalars;
        if (n->types & T_OBJECT) {
            bool dup = false;
            for (uint32_t o = 0; o < n_obj && !dup; o++)
                dup = same_node(s, obj[o], flat[f], &budget);
            if (!dup)
                obj[n_obj++] = flat[f];
        }
        if (n->types & T_ARRAY) {
            if (arr != UINT32_MAX && !same_node(s, arr, flat[f], &budget))
                return tn_fail(c->err, TN_ERR_INVALID,
                               "\"anyOf\" is not supported where two branches are arrays of "
                               "different \"items\" (schema at #%.*s)",
                               ANY_WHERE(s, self));
            arr = flat[f];
        }
    }
    if (ty & T_NUMBER)
        ty &= (uint8_t)~T_INTEGER;
    sc_str *lits = malloc((n_lit ? n_lit : 1) * sizeof *lits);
    if (!lits)
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    uint32_t m = 0;
    for (uint32_t f = 0; f < n_flat; f++) {
        const sc_node *n = &s->nodes[flat[f]];
        for (uint32_t l = 0; n->lits && l < n->n_lit; l++) {
            const sc_str *x = &s->lits[n->lit0 + l];
            const char first = s->pool[x->off];
            const bool taken = first == '"'                   ? (ty & T_STRING)
                               : first == 't' || first == 'f' ? (ty & T_BOOLEAN)
                               : first == 'n'                 ? (ty & T_NULL)
                                                              : (ty & (T_NUMBER | T_INTEGER));
            if (taken && (ty & T_INTEGER) && first != '"' && first != 't' && first != 'f' &&
                first != 'n' && !lit_integer(s, x)) {
                free(lits);
                return tn_fail(c->err, TN_ERR_INVALID,
                               "\"anyOf\" is not supported where an \"integer\" branch meets a "
                               "number with a fraction in an \"enum\" or \"const\" (schema at "
                               "#%.*s)",
                               ANY_WHERE(s, self));
            }
            if (!taken) {
                lits[m] = *x;
                lits[m++].node = 0;
            }
        }
    }
    uint32_t out[4], n_out = 0;
    int rc = TN_OK;
    if (ty) {
        rc = new_node(c, &out[n_out]);
        if (rc == TN_OK) {
            copy_where(s, out[n_out], self);
            s->nodes[out[n_out++]].types = ty;
        }
    }
    if (rc == TN_OK && m) {
        rc = new_lits(c, lits, m, false, &out[n_out]);
        if (rc == TN_OK)
            copy_where(s, out[n_out++], self);
    }
    free(lits);
    if (rc == TN_OK && n_obj == 1)
        rc = restrict_types(c, obj[0], T_OBJECT, &out[n_out++]);
    else if (rc == TN_OK && n_obj > 1)
        rc = merge_objects(c, self, obj, n_obj, &out[n_out++]);
    if (rc == TN_OK && arr != UINT32_MAX)
        rc = restrict_types(c, arr, T_ARRAY, &out[n_out++]);
    if (rc != TN_OK)
        return rc;
    if (!grow((void **)&s->branches, &s->cap_branches, s->n_branches + n_out, sizeof *s->branches))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    memcpy(s->branches + s->n_branches, out, n_out * sizeof *out);
    s->nodes[self].any0 = s->n_branches;
    s->nodes[self].n_any = n_out;
    s->n_branches += n_out;
    return TN_OK;
}

/* The kinds of value each node starts with. An anyOf whose branches can
 * start alike is rewritten (merge_any) so that they cannot, and a value's
 * first byte picks its branch. A node in progress met again is an anyOf
 * that is its own branch. */
static int node_kinds(compiler *c, uint32_t i, uint8_t *state, uint32_t *order, uint32_t *n_order) {
    tn_json_schema *s = c->s;
    if (state[i] == 2)
        return TN_OK;
    if (state[i] == 1)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "an \"anyOf\" has itself for a branch (through \"$ref\"): it would "
                       "never write a value");
    state[i] = 1;
    uint8_t k = 0;
    if (s->nodes[i].n_any) {
        bool alike = false;
        for (uint32_t b = 0; b < s->nodes[i].n_any; b++) {
            const uint32_t j = s->branches[s->nodes[i].any0 + b];
            int rc = node_kinds(c, j, state, order, n_order);
            if (rc != TN_OK)
                return rc;
            alike = alike || (k & s->nodes[j].kinds);
            k |= s->nodes[j].kinds;
        }
        if (alike) {
            int rc = merge_any(c, i);
            /* The new branches: kinds and their place before i in order. */
            for (uint32_t b = 0; rc == TN_OK && b < s->nodes[i].n_any; b++)
                rc = node_kinds(c, s->branches[s->nodes[i].any0 + b], state, order, n_order);
            if (rc != TN_OK)
                return rc;
        }
    } else if (s->nodes[i].uni) {
        const sc_union *u = &s->unions[s->nodes[i].uni - 1];
        for (uint32_t b = 0; b < u->n; b++) {
            int rc = node_kinds(c, u->node[b], state, order, n_order);
            if (rc != TN_OK)
                return rc;
        }
        k = K_OBJECT;
    } else if (s->nodes[i].lits) {
        const sc_node *n = &s->nodes[i];
        for (uint32_t l = 0; l < n->n_lit; l++) {
            const char f = s->pool[s->lits[n->lit0 + l].off];
            k |= f == '"'   ? K_STRING
                 : f == 't' ? K_TRUE
                 : f == 'f' ? K_FALSE
                 : f == 'n' ? K_NULL
                            : K_NUMBER;
        }
    } else {
        const uint8_t t = s->nodes[i].types;
        k |= t & T_OBJECT ? K_OBJECT : 0;
        k |= t & T_ARRAY ? K_ARRAY : 0;
        k |= t & T_STRING ? K_STRING : 0;
        k |= t & (T_NUMBER | T_INTEGER) ? K_NUMBER : 0;
        k |= t & T_BOOLEAN ? K_TRUE | K_FALSE : 0;
        k |= t & T_NULL ? K_NULL : 0;
    }
    s->nodes[i].kinds = k;
    state[i] = 2;
    order[(*n_order)++] = i;
    return TN_OK;
}

static uint32_t len_add(uint32_t a, uint32_t b) {
    return a > SC_LEN_NONE - 1 - b ? SC_LEN_NONE - 1 : a + b;
}

static uint32_t len_min(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* min_depth and obj_depth, a level at a time, with the shortest value
 * (min_len, obj_len) within as many levels: a node needs at most d
 * levels when it has a scalar value (0), is an array (1: an empty one),
 * an object whose required values need at most d - 1, or an anyOf with
 * a branch (a union with an object branch) that needs at most d.
 * Branches come before their anyOf or union in order. The shortest
 * value only shrinks as levels are added: min_len and obj_len, taken at
 * the first level that fits, are the longest any place that lets the
 * value start can ask for. */
static int node_depths(compiler *c, const uint32_t *order, uint32_t n_order) {
    tn_json_schema *s = c->s;
    uint32_t *prev = malloc((size_t)s->n_nodes * sizeof *prev);
    uint32_t *len = malloc((size_t)s->n_nodes * sizeof *len);
    uint32_t *obj = malloc((size_t)s->n_nodes * sizeof *obj);
    if (!prev || !len || !obj) {
        free(prev);
        free(len);
        free(obj);
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        s->nodes[i].min_depth = s->nodes[i].obj_depth = SC_NO_END;
        s->nodes[i].min_len = s->nodes[i].obj_len = SC_LEN_NONE;
        prev[i] = len[i] = obj[i] = SC_LEN_NONE;
    }
    for (int d = 0; d <= TN_JSON_SCHEMA_MAX_DEPTH; d++) {
        for (uint32_t o = 0; o < n_order; o++) {
            const uint32_t i = order[o];
            sc_node *n = &s->nodes[i];
            uint32_t l = SC_LEN_NONE, ol = SC_LEN_NONE;
            if (n->n_any) {
                for (uint32_t b = 0; b < n->n_any; b++)
                    l = len_min(l, len[s->branches[n->any0 + b]]);
            } else if (n->uni) {
                const sc_union *u = &s->unions[n->uni - 1];
                for (uint32_t b = 0; b < u->n; b++)
                    ol = len_min(ol, obj[u->node[b]]);
            } else if (n->lits) {
                for (uint32_t k = 0; k < n->n_lit; k++)
                    l = len_min(l, s->lits[n->lit0 + k].len);
            } else {
                l = n->types & (T_NUMBER | T_INTEGER)                         ? 1
                    : n->types & T_STRING || (d >= 1 && (n->types & T_ARRAY)) ? 2
                    : n->types & (T_BOOLEAN | T_NULL)                         ? 4
                                                                              : SC_LEN_NONE;
                if ((n->types & T_OBJECT) && d >= 1) {
                    uint32_t r = 0;
                    ol = 2;
                    for (uint32_t k = 0; k < n->n_prop && ol != SC_LEN_NONE; k++) {
                        if (!((n->required >> k) & 1))
                            continue;
                        const sc_str *p = &s->props[n->prop0 + k];
                        ol = prev[p->node] == SC_LEN_NONE
                                 ? SC_LEN_NONE
                                 : len_add(len_add(ol, p->len + 1 + (r > 0)), prev[p->node]);
                        r++;
                    }
                }
            }
            l = len_min(l, ol);
            len[i] = l;
            obj[i] = ol;
            if (l != SC_LEN_NONE && n->min_depth == SC_NO_END) {
                n->min_depth = (uint8_t)d;
                n->min_len = l;
            }
            if (ol != SC_LEN_NONE && n->obj_depth == SC_NO_END) {
                n->obj_depth = (uint8_t)d;
                n->obj_len = ol;
            }
        }
        memcpy(prev, len, (size_t)s->n_nodes * sizeof *prev);
    }
    free(prev);
    free(len);
    free(obj);
    return TN_OK;
}

void tn_json_schema_free(tn_json_schema *s) {
    if (!s)
        return;
    free(s->nodes);
    free(s->props);
    free(s->lits);
    free(s->branches);
    free(s->unions);
    free(s->pool);
    free(s);
}

/* ------------------------------------------------------------- oneOf */

/* A number literal's value as the validator compares it (a double, read
 * by the JSON reader: strtod would follow the locale's decimal point):
 * LIT_NUMBER, or LIT_OTHER for a string, true, false or null, or
 * LIT_UNREAD where reading failed (out of memory). */
enum { LIT_OTHER, LIT_NUMBER, LIT_UNREAD };
static int lit_value(const tn_json_schema *s, const sc_str *l, double *out) {
    const char f = s->pool[l->off];
    if (f != '-' && (f < '0' || f > '9'))
        return LIT_OTHER;
    tn_error err;
    tn_json_doc *d = NULL;
    if (tn_json_parse(s->pool + l->off, l->len, "enum", &d, &err) != TN_OK)
        return LIT_UNREAD;
    *out = tn_json_num(tn_json_root(d), 0);
    tn_json_free(d);
    return LIT_NUMBER;
}

/* Literal l is a value of a schema of types t (no enum of its own). A
 * number that cannot be read is taken to be one: the answer is then a
 * refusal, never a wrong acceptance. */
static bool lit_in_types(const tn_json_schema *s, const sc_str *l, uint8_t t) {
    const char f = s->pool[l->off];
    if (f == '"')
        return t & T_STRING;
    if (f == 't' || f == 'f')
        return t & T_BOOLEAN;
    if (f == 'n')
        return t & T_NULL;
    if (t & T_NUMBER)
        return true;
    double x = 0;
    return (t & T_INTEGER) && (lit_value(s, l, &x) != LIT_NUMBER || x == floor(x));
}

#define APART_DEPTH (4 * TN_JSON_SCHEMA_MAX_DEPTH)
/* The look's budgets, for the whole schema: steps, and enum values
 * compared (a value read weighing 64). */
#define APART_STEPS (1 << 14)
#define APART_LITS (1 << 20)

static bool apart(compiler *c, uint32_t a, uint32_t b, int depth);

/* apart, for the values a and b give one property of two objects. A
 * pair met again below itself is taken as apart: the look is a proof by
 * induction on the size of a value, and a property's value is smaller
 * than the object that holds it, so a value both take would have a
 * smaller one inside it that both take, down to one that none can be.
 * This shows apart two schemas that recurse in step and differ where the
 * chain ends (X: {"a": X or 1} and Y: {"a": Y or 2}). Only what the pair
 * is inside counts: nothing is kept once it is left, so a pair found to
 * overlap there leaves no apart answer behind it. */
static bool apart_props(compiler *c, uint32_t a, uint32_t b, int depth) {
    for (uint32_t i = 0; i < c->n_assumed; i++)
        if ((c->assumed[i][0] == a && c->assumed[i][1] == b) ||
            (c->assumed[i][0] == b && c->assumed[i][1] == a))
            return true;
    if (c->n_assumed == sizeof c->assumed / sizeof c->assumed[0]) {
        c->apart_cut = true;
        return false;
    }
    c->assumed[c->n_assumed][0] = a;
    c->assumed[c->n_assumed][1] = b;
    c->n_assumed++;
    const bool r = apart(c, a, b, depth);
    c->n_assumed--;
    return r;
}

/* No value is valid against both nodes a and b, as far as a bounded look
 * can show (false: they may share one, or the look ran out). Refs are
 * resolved; no anyOf is merged yet. Objects are apart when one requires a
 * property whose values there are apart (the distinct consts of a
 * discriminated union), or when neither can write a value the other
 * takes. The values judged are those the checker writes (only keys of
 * their own properties) and the meaning is JSON Schema's, where an object
 * without "additionalProperties": false takes any other key: a value of x
 * fails y when y requires a key x does not have, or when x requires one
 * that y does not have and y is closed. Reading an absent
 * additionalProperties as false here, as the checker does when writing,
 * would pass {"a": 1, "b": 2} as one branch's value where JSON Schema
 * finds it valid against {"required": ["b"]} as well. */
static bool apart(compiler *c, uint32_t a, uint32_t b, int depth) {
    const tn_json_schema *s = c->s;
    if (a == b)
        return false;
    if (depth > APART_DEPTH || c->apart_budget == 0) {
        c->apart_cut = true;
        return false;
    }
    c->apart_budget--;
    const sc_node *x = &s->nodes[a], *y = &s->nodes[b];
    if (x->uni || y->uni)
        return false;
    if (x->n_any || y->n_any) {
        const sc_node *u = x->n_any ? x : y;
        const uint32_t other = x->n_any ? b : a;
        for (uint32_t i = 0; i < u->n_any; i++)
            if (!apart(c, s->branches[u->any0 + i], other, depth + 1))
                return false;
        return true;
    }
    if (x->lits && y->lits) {
        /* Each value read once (a read weighs as 64 comparisons), then
         * every pair compared: bounded by lit_budget, all oneOfs together. */
        const uint64_t cost = (uint64_t)x->n_lit * y->n_lit + 64 * ((uint64_t)x->n_lit + y->n_lit);
        if (cost > c->lit_budget) {
            c->apart_cut = true;
            return false;
        }
        c->lit_budget -= (uint32_t)cost;
        double *u = malloc(((size_t)x->n_lit + y->n_lit) * sizeof *u);
        uint8_t *ku = malloc((size_t)x->n_lit + y->n_lit);
        bool ok = u && ku;
        for (uint32_t i = 0; ok && i < x->n_lit + y->n_lit; i++) {
            u[i] = 0;
            ku[i] = (uint8_t)lit_value(
                s, &s->lits[i < x->n_lit ? x->lit0 + i : y->lit0 + i - x->n_lit], &u[i]);
        }
        for (uint32_t i = 0; ok && i < x->n_lit; i++)
            for (uint32_t j = 0; ok && j < y->n_lit; j++) {
                const uint32_t v = x->n_lit + j;
                if (!str_cmp(s, &s->lits[x->lit0 + i], &s->lits[y->lit0 + j]))
                    ok = false;
                else if (ku[i] != LIT_OTHER && ku[v] != LIT_OTHER &&
                         (ku[i] == LIT_UNREAD || ku[v] == LIT_UNREAD || u[i] == u[v]))
                    ok = false; /* 1 and 1.0 */
            }
        free(u);
        free(ku);
        return ok;
    }
    if (x->lits || y->lits) {
        const sc_node *l = x->lits ? x : y, *t = x->lits ? y : x;
        for (uint32_t i = 0; i < l->n_lit; i++)
            if (lit_in_types(s, &s->lits[l->lit0 + i], t->types))
                return false;
        return true;
    }
    const uint8_t nums = T_NUMBER | T_INTEGER;
    if ((x->types & y->types & (T_STRING | T_BOOLEAN | T_NULL | T_ARRAY)) ||
        ((x->types & nums) && (y->types & nums)))
        return false; /* [] is an array of any items */
    if (!(x->types & y->types & T_OBJECT))
        return true;
    bool x_fails_y = false, y_fails_x = false;
    for (uint32_t i = 0, j = 0; i < x->n_prop || j < y->n_prop;) {
        const int k = i == x->n_prop ? 1
                      : j == y->n_prop
                          ? -1
                          : str_cmp(s, &s->props[x->prop0 + i], &s->props[y->prop0 + j]);
        const bool rx = k <= 0 && ((x->required >> i) & 1);
        const bool ry = k >= 0 && ((y->required >> j) & 1);
        if (k < 0 && rx) {
            y_fails_x = true;
            x_fails_y |= y->closed;
        } else if (k > 0 && ry) {
            x_fails_y = true;
            y_fails_x |= x->closed;
        } else if (k == 0 && (rx || ry) &&
                   apart_props(c, s->props[x->prop0 + i].node, s->props[y->prop0 + j].node,
                               depth + 1)) {
            /* The one requiring it writes a value the other refuses; the
             * other leaves it out (refused) or writes its own (refused). */
            return true;
        }
        if (x_fails_y && y_fails_x)
            return true;
        i += k <= 0;
        j += k >= 0;
    }
    return false;
}

/* A oneOf taken as an anyOf is exact only where no value is valid against
 * two branches: "exactly one" then holds of every value either takes.
 * Where two may overlap, the refusal names them (docs/SERVER.md); where
 * the look stopped at one of its bounds first, it says so, as the two may
 * well be apart (enums too long to compare within the budget, or more
 * steps than it has). */
static int check_one_of(compiler *c, uint32_t i) {
    tn_json_schema *s = c->s;
    const sc_node *n = &s->nodes[i];
    for (uint32_t a = 0; a < n->n_any; a++)
        for (uint32_t b = a + 1; b < n->n_any; b++) {
            c->apart_cut = false;
            if (apart(c, s->branches[n->any0 + a], s->branches[n->any0 + b], 0))
                continue;
            if (c->apart_cut)
                return tn_fail(c->err, TN_ERR_INVALID,
                               "\"oneOf\" branches %u and %u could not be shown apart within "
                               "the bounds of the search (%d steps, %d levels, %d enum value "
                               "comparisons), and a value must match exactly one: make them "
                               "simpler to tell apart (a required property with a different "
                               "const in each, or different types) or write \"anyOf\" (schema "
                               "at #%.*s)",
                               a, b, APART_STEPS, APART_DEPTH, APART_LITS, ANY_WHERE(s, i));
            return tn_fail(c->err, TN_ERR_INVALID,
                           "\"oneOf\" branches %u and %u may both take one value, and a "
                           "value must match exactly one: give them a required property "
                           "with a different const in each, or different types, or write "
                           "\"anyOf\" (schema at #%.*s)",
                           a, b, ANY_WHERE(s, i));
        }
    return TN_OK;
}

/* An anyOf or oneOf that has itself for a branch (through "$ref", and
 * other anyOf and oneOf between) never writes a value, and a oneOf's
 * meaning would hang on itself: whether a value matches exactly one
 * branch is asked of the oneOf again. Found before check_one_of, which
 * would otherwise call the pair overlapping, or cut short. */
static int branch_cycle(compiler *c, uint32_t i, uint8_t *state) {
    tn_json_schema *s = c->s;
    if (state[i] == 2)
        return TN_OK;
    if (state[i] == 1) {
        if (!s->nodes[i].one)
            return tn_fail(c->err, TN_ERR_INVALID,
                           "an \"anyOf\" has itself for a branch (through \"$ref\"): it would "
                           "never write a value");
        return tn_fail(c->err, TN_ERR_INVALID,
                       "a \"oneOf\" has itself for a branch (through \"$ref\"): whether a value "
                       "matches exactly one of its branches would depend on itself (schema at "
                       "#%.*s)",
                       ANY_WHERE(s, i));
    }
    state[i] = 1;
    for (uint32_t b = 0; b < s->nodes[i].n_any; b++) {
        const int rc = branch_cycle(c, s->branches[s->nodes[i].any0 + b], state);
        if (rc != TN_OK)
            return rc;
    }
    state[i] = 2;
    return TN_OK;
}

/* The string value node l (an enum or const) takes, encoded as the pool
 * holds it, in lits l0..l0+n; UINT32_MAX for none. */
static uint32_t find_lit(const tn_json_schema *s, const sc_node *l, const char *enc, size_t len) {
    for (uint32_t k = 0; k < l->n_lit; k++) {
        const sc_str *x = &s->lits[l->lit0 + k];
        if (x->len == len && !memcmp(s->pool + x->off, enc, len))
            return k;
    }
    return UINT32_MAX;
}

/* A oneOf's "discriminator" ({"propertyName": P, "mapping": {VALUE:
 * "$ref"}}, OpenAPI's, Pydantic's) changes no answer: it is taken where it
 * agrees with the branches, each an object requiring P as a string enum
 * or const, and each mapping sends a value to the branch that has it. */
static int check_disc(compiler *c, const tn_json *d, uint32_t i) {
    tn_json_schema *s = c->s;
    const sc_node *n = &s->nodes[i];
    /* parse_ref's messages name the oneOf. */
    snprintf(c->path, sizeof c->path, "%.*s", ANY_WHERE(s, i));
    const tn_json *pn = tn_json_get(d, "propertyName");
    const tn_json *map = tn_json_get(d, "mapping");
    bool shape = tn_json_is(d, TN_JSON_OBJECT) && tn_json_is(pn, TN_JSON_STRING) &&
                 (!map || tn_json_is(map, TN_JSON_OBJECT));
    for (size_t k = 0; shape && k < d->n; k++)
        shape = !strcmp(d->v.items[k].key, "propertyName") || !strcmp(d->v.items[k].key, "mapping");
    for (size_t k = 0; shape && k < tn_json_count(map); k++)
        shape = tn_json_is(&map->v.items[k], TN_JSON_STRING);
    if (!shape)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "\"discriminator\" must be an object of a \"propertyName\" string and a "
                       "\"mapping\" of strings (schema at #%.*s)",
                       ANY_WHERE(s, i));
    /* P and the mapping's values encoded as the pool holds names, past its
     * end: they are dropped when the check is done. */
    const size_t mark = s->pool_len;
    if (!pool_add_string(s, tn_json_str(pn), pn->n))
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    const sc_str key = {(uint32_t)mark, (uint32_t)(s->pool_len - mark), 0};
    uint32_t tag[TN_JSON_SCHEMA_MAX_ANY]; /* each branch's node of P's values */
    int rc = TN_OK;
    for (uint32_t b = 0; b < n->n_any && rc == TN_OK; b++) {
        const sc_node *o = &s->nodes[s->branches[n->any0 + b]];
        tag[b] = UINT32_MAX;
        for (uint32_t k = 0; !o->lits && !o->n_any && o->types == T_OBJECT && k < o->n_prop; k++) {
            const sc_str *p = &s->props[o->prop0 + k];
            if (!str_cmp(s, p, &key) && ((o->required >> k) & 1) && s->nodes[p->node].lits)
                tag[b] = p->node;
        }
        for (uint32_t k = 0; tag[b] != UINT32_MAX && k < s->nodes[tag[b]].n_lit; k++)
            if (s->pool[s->lits[s->nodes[tag[b]].lit0 + k].off] != '"')
                tag[b] = UINT32_MAX;
        if (tag[b] == UINT32_MAX)
            rc = tn_fail(c->err, TN_ERR_INVALID,
                         "\"discriminator\": branch %u does not require \"%.200s\" as a string "
                         "const or enum (schema at #%.*s)",
                         b, tn_json_str(pn), ANY_WHERE(s, i));
    }
    for (size_t k = 0; k < tn_json_count(map) && rc == TN_OK; k++) {
        const tn_json *m = &map->v.items[k];
        int32_t r = SC_REF_NONE;
        rc = parse_ref(c, m, &r);
        if (rc != TN_OK)
            break;
        const uint32_t to = r == SC_REF_ROOT ? s->root : c->def_node[r];
        s->pool_len = mark + key.len;
        if (!pool_add_string(s, m->key, m->key_len)) {
            rc = tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
            break;
        }
        const char *enc = s->pool + mark + key.len;
        const size_t len = s->pool_len - mark - key.len;
        bool found = false;
        for (uint32_t b = 0; b < n->n_any && !found; b++)
            found = s->branches[n->any0 + b] == to &&
                    find_lit(s, &s->nodes[tag[b]], enc, len) != UINT32_MAX;
        if (!found)
            rc = tn_fail(c->err, TN_ERR_INVALID,
                         "\"discriminator\": its \"mapping\" sends \"%.200s\" to \"%.200s\", not "
                         "a branch whose \"%.200s\" takes that value (schema at #%.*s)",
                         m->key, tn_json_str(m), tn_json_str(pn), ANY_WHERE(s, i));
    }
    s->pool_len = mark;
    c->path[0] = '\0';
    return rc;
}

/* The nodes a document can reach from the top level: what the 64 KiB
 * bound is about (a definition no $ref names writes nothing). */
static int reachable(compiler *c, uint8_t *seen) {
    tn_json_schema *s = c->s;
    uint32_t *stack = malloc((size_t)s->n_nodes * sizeof *stack);
    if (!stack)
        return tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    uint32_t n = 0;
    seen[s->root] = 1;
    stack[n++] = s->root;
    while (n) {
        const sc_node *x = &s->nodes[stack[--n]];
        uint32_t next[TN_JSON_SCHEMA_MAX_ANY + 1], m = 0;
        const bool obj = x->uni || (!x->lits && !x->n_any && (x->types & T_OBJECT));
        for (uint32_t k = 0; k < x->n_any; k++)
            next[m++] = s->branches[x->any0 + k];
        for (uint32_t k = 0; x->uni && k < s->unions[x->uni - 1].n; k++)
            next[m++] = s->unions[x->uni - 1].node[k];
        if (!x->lits && !x->n_any && (x->types & T_ARRAY))
            next[m++] = x->items;
        for (uint32_t k = 0; k < m; k++)
            if (!seen[next[k]]) {
                seen[next[k]] = 1;
                stack[n++] = next[k];
            }
        for (uint32_t k = 0; obj && k < x->n_prop; k++) {
            const uint32_t p = s->props[x->prop0 + k].node;
            if (!seen[p]) {
                seen[p] = 1;
                stack[n++] = p;
            }
        }
    }
    free(stack);
    return TN_OK;
}

/* After every node is compiled: refs resolved, anyOf checked, depths. */
static int finish(compiler *c) {
    tn_json_schema *s = c->s;
    int rc = resolve_refs(c);
    /* Before merge_any rewrites their branches. */
    c->apart_budget = APART_STEPS;
    c->lit_budget = APART_LITS;
    uint8_t *seen = rc == TN_OK ? calloc(s->n_nodes, 1) : NULL;
    if (rc == TN_OK && !seen)
        rc = tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < s->n_nodes && rc == TN_OK; i++)
        rc = branch_cycle(c, i, seen);
    free(seen);
    for (uint32_t i = 0; i < s->n_nodes && rc == TN_OK; i++)
        if (s->nodes[i].one)
            rc = check_one_of(c, i);
    for (uint32_t i = 0; i < c->n_disc && rc == TN_OK; i++)
        rc = check_disc(c, c->disc[i].disc, c->disc[i].node);
    if (rc != TN_OK)
        return rc;
    /* Room for the nodes merge_any adds, up to the bound on all. */
    uint8_t *state = calloc(TN_JSON_SCHEMA_MAX_NODES, 1);
    uint32_t *order = malloc(TN_JSON_SCHEMA_MAX_NODES * sizeof *order);
    uint32_t n_order = 0;
    if (!state || !order)
        rc = tn_fail(c->err, TN_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < s->n_nodes && rc == TN_OK; i++)
        if (s->nodes[i].ref == SC_REF_NONE)
            rc = node_kinds(c, i, state, order, &n_order);
    if (rc == TN_OK)
        rc = node_depths(c, order, n_order);
    /* The innermost subschema a document reaches whose shortest value is
     * over the bound: the one to name (those around it are over only
     * because they hold it). */
    if (rc == TN_OK) {
        memset(state, 0, TN_JSON_SCHEMA_MAX_NODES);
        rc = reachable(c, state);
    }
    uint32_t over = SC_LEN_NONE, over_at = 0;
    for (uint32_t o = 0; o < n_order && rc == TN_OK; o++) {
        const sc_node *n = &s->nodes[order[o]];
        const uint32_t lens[2] = {n->min_len, n->obj_len};
        for (int k = 0; k < 2 && state[order[o]]; k++)
            if (lens[k] != SC_LEN_NONE && lens[k] > SC_MAX_SHORTEST && lens[k] < over) {
                over = lens[k];
                over_at = order[o];
            }
    }
    free(state);
    free(order);
    if (rc != TN_OK)
        return rc;
    const sc_node *root = &s->nodes[s->root];
    if (root->lits || root->n_any || root->types != T_OBJECT)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "the schema's top level must be \"type\": \"object\" (no enum, const or "
                       "anyOf)");
    if (root->obj_depth > TN_JSON_SCHEMA_MAX_DEPTH)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "the schema has no document within %d levels of nesting: a \"$ref\" "
                       "recurses through required properties",
                       TN_JSON_SCHEMA_MAX_DEPTH);
    if (over != SC_LEN_NONE)
        return tn_fail(c->err, TN_ERR_INVALID,
                       "a value of the schema at #%.*s needs at least %u bytes, more than %d: "
                       "required properties multiply through nesting or \"$ref\", and the answer "
                       "would be cut off",
                       ANY_WHERE(s, over_at), over, SC_MAX_SHORTEST);
    return TN_OK;
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
    rc = collect_defs(&c, tn_json_root(doc));
    if (rc == TN_OK)
        rc = compile_node(&c, tn_json_root(doc), 1, &s->root);
    if (rc == TN_OK)
        rc = compile_defs(&c);
    if (rc == TN_OK)
        rc = finish(&c);
    free(c.defs);
    free(c.def_table);
    free(c.def_node);
    free(c.def_sorted);
    free(c.disc);
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
    /* A string's body, then a number: M_STR.., M_NUM_MINUS.. (tn-json.h). */
    TN_JSON_LEX_MODES,
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

/* The properties of object n, frame depth - 1, not yet written and whose
 * values fit in the levels left: only a $ref's recursion can leave one
 * that does not fit. */
static uint64_t open_props(const tn_json_schema_state *st, const sc_node *n) {
    const tn_json_schema *s = st->schema;
    uint64_t m = range_mask(0, n->n_prop);
    if (n->uni) { /* the names of the branches still open */
        const sc_union *u = &s->unions[n->uni - 1];
        const uint8_t live = st->live[st->depth - 1];
        m = 0;
        for (uint32_t b = 0; b < u->n; b++)
            if ((live >> b) & 1)
                m |= u->props[b];
    }
    m &= ~st->used[st->depth - 1];
    if (s->recursive)
        for (uint32_t k = 0; k < n->n_prop; k++)
            if (st->depth + s->nodes[s->props[n->prop0 + k].node].min_depth >
                TN_JSON_SCHEMA_MAX_DEPTH)
                m &= ~((uint64_t)1 << k);
    return m;
}

static const sc_node *top_node(const tn_json_schema_state *st) {
    return &st->schema->nodes[st->node[st->depth - 1]];
}

/* Object n, the top frame, may close: its required properties (one open
 * branch's, for a union) are written. */
static bool closable(const tn_json_schema_state *st, const sc_node *n) {
    const uint64_t used = st->used[st->depth - 1];
    if (!n->uni)
        return !(n->required & ~used);
    const sc_union *u = &st->schema->unions[n->uni - 1];
    for (uint32_t b = 0; b < u->n; b++)
        if (((st->live[st->depth - 1] >> b) & 1) && !(u->required[b] & ~used))
            return true;
    return false;
}

/* An enum of a union's property: some value in lo..hi keeps a branch of
 * the top frame open. */
static bool lits_live(const tn_json_schema_state *st, uint32_t lo, uint32_t hi) {
    const uint8_t live = st->live[st->depth - 1];
    for (uint32_t i = lo; i < hi; i++)
        if (st->schema->lits[i].node & live)
            return true;
    return false;
}

/* The value lits[i] of node cur is written: a narrowing enum leaves the
 * top frame the branches that allow it. */
static bool lit_done(tn_json_schema_state *st, uint32_t i) {
    const tn_json_schema *s = st->schema;
    if (!s->nodes[st->cur].narrows)
        return true;
    const uint8_t keep = (uint8_t)(st->live[st->depth - 1] & s->lits[i].node);
    st->live[st->depth - 1] = keep;
    return keep != 0;
}

static bool push(tn_json_schema_state *st, uint32_t node, bool object) {
    if (st->depth >= TN_JSON_SCHEMA_MAX_DEPTH)
        return false;
    st->node[st->depth] = (uint16_t)node;
    st->used[st->depth] = 0;
    st->live[st->depth] = 0;
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

/* The kind of value that starts with c (K_*), 0 for none. */
static uint8_t kind_of(uint8_t c) {
    switch (c) {
    case '{': return K_OBJECT;
    case '[': return K_ARRAY;
    case '"': return K_STRING;
    case 't': return K_TRUE;
    case 'f': return K_FALSE;
    case 'n': return K_NULL;
    default: return c == '-' || (c >= '0' && c <= '9') ? K_NUMBER : 0;
    }
}

static bool value_start(tn_json_schema_state *st, uint32_t node, uint8_t c) {
    const tn_json_schema *s = st->schema;
    const sc_node *n = &s->nodes[node];
    if (n->n_any) {
        /* The branches start apart (node_kinds): c picks one, or none. */
        const uint8_t k = kind_of(c);
        for (uint32_t b = 0; b < n->n_any; b++)
            if (s->nodes[s->branches[n->any0 + b]].kinds & k)
                return value_start(st, s->branches[n->any0 + b], c);
        return false;
    }
    st->cur = (uint16_t)node;
    if (n->lits) {
        uint32_t lo = n->lit0, hi = n->lit0 + n->n_lit;
        if (!narrow(s, s->lits, &lo, &hi, 0, c) || (n->narrows && !lits_live(st, lo, hi)))
            return false;
        st->lo_i = lo;
        st->hi_i = hi;
        st->off = 1;
        st->mode = M_LIT;
        if (hi - lo == 1 && s->lits[lo].len == 1) {
            st->mode = M_AFTER;
            return lit_done(st, lo);
        }
        return true;
    }
    switch (c) {
    case '{': {
        /* Opened only when its required values fit in the levels left (a
         * union's branches, each). */
        if (!(n->types & T_OBJECT) || st->depth + n->obj_depth > TN_JSON_SCHEMA_MAX_DEPTH)
            return false;
        uint8_t live = 0;
        if (n->uni) {
            const sc_union *u = &s->unions[n->uni - 1];
            for (uint32_t b = 0; b < u->n; b++)
                if (st->depth + s->nodes[u->node[b]].obj_depth <= TN_JSON_SCHEMA_MAX_DEPTH)
                    live |= (uint8_t)(1u << b);
        }
        if (!push(st, node, true))
            return false;
        st->live[st->depth - 1] = live;
        return true;
    }
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
        if (!(n->types & (T_NUMBER | T_INTEGER)) || !tn_json_lex_number_start(c, &sub, &st->digits))
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
        return c == '{' && push(st, s->root, true);
    case M_DONE: return is_ws(c);
    case M_OBJ_FIRST:
    case M_KEY: {
        if (is_ws(c))
            return true;
        const sc_node *n = top_node(st);
        if (c == '}' && st->mode == M_OBJ_FIRST) {
            if (!closable(st, n))
                return false;
            pop(st);
            return true;
        }
        if (c != '"' || !open_props(st, n))
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
        uint32_t lo = st->lo_i, hi = st->hi_i;
        if (!narrow(s, t, &lo, &hi, st->off, c) || !(range_mask(lo, hi) & open_props(st, n)))
            return false;
        st->lo_i = lo;
        st->hi_i = hi;
        st->off++;
        /* A whole name ends with its unescaped closing quote, which no
         * other name continues: it is alone in the range. */
        if (t[lo].len == st->off) {
            st->used[st->depth - 1] |= (uint64_t)1 << lo;
            if (n->uni) { /* the branches without the name close */
                const sc_union *u = &s->unions[n->uni - 1];
                uint8_t keep = 0;
                for (uint32_t b = 0; b < u->n; b++)
                    if ((u->props[b] >> lo) & 1)
                        keep |= (uint8_t)(1u << b);
                st->live[st->depth - 1] &= keep;
            }
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
                if (!open_props(st, n))
                    return false;
                st->mode = M_KEY;
                return true;
            }
            st->cur = (uint16_t)n->items;
            st->mode = M_VALUE;
            return true;
        }
        if (c == (is_obj ? '}' : ']')) {
            if (is_obj && !closable(st, n))
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
            if (s->nodes[st->cur].narrows && !lits_live(st, lo, hi))
                return false;
            st->lo_i = lo;
            st->hi_i = hi;
            st->off++;
            if (hi - lo == 1 && s->lits[lo].len == st->off) {
                st->mode = M_AFTER;
                return lit_done(st, lo);
            }
            return true;
        }
        /* A number equal to what was written, which another one in the
         * range continues ("1" of 1 and 12), ends at a byte of what follows. */
        if (s->lits[st->lo_i].len != st->off || !lit_done(st, st->lo_i))
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
