/* Strict JSON reader; see tn-json.h.
 *
 * One scanner for both tn_json_parse and tn_json_check: the check is the
 * parse without the tree (no arena, a container's items not kept), so what
 * the app, the manager and the server refuse before json-glib is exactly
 * what the engine's own reader refuses.
 *
 * One pass over the input. Decoded strings go to one buffer sized to the
 * input (a decoded string plus its NUL is never longer than its quoted
 * source), so the 33 MB Gemma 3 tokenizer.json costs one allocation for its
 * text. Values are collected on a scratch stack while their container is
 * open and copied into an arena, contiguously, when it closes.
 */
#include "tn-json.h"
#include "tn-internal.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    tn_json items[];
} arena_chunk;

struct tn_json_doc {
    tn_json root;
    char *strings;       /* all decoded strings and keys */
    arena_chunk *chunks; /* all arrays of items */
};

typedef struct parser {
    const char *src;
    const char *p;
    const char *end;
    const char *name;
    tn_error *err;
    int status;

    char *str_out;        /* next free byte in doc->strings */
    tn_json_doc *doc;

    tn_json *stack;       /* items of the containers being parsed */
    size_t stack_len, stack_cap;

    bool build;           /* false: tn_json_check, no tree */
    unsigned max_depth;
    unsigned flags;       /* TN_JSON_NO_* */

    /* tn_json_check_head: the text is the start of a longer one, so that
     * running out of it is not an error (RAN_OUT), only what the bytes
     * there break is; members_end: just past the root object's last
     * member read whole. */
    bool head;
    const char *members_end;

    /* tn_json_check_count: objects count_level levels deep (0: none). */
    unsigned count_level;
    uint64_t n_counted;
} parser;

/* ps->status of a head that ends before its document does (internal: no
 * TN_ERR_* is negative and this large). */
#define RAN_OUT (-1000)

/* ------------------------------------------------------------- errors */

static void line_col(const parser *ps, const char *at, long *line, long *col) {
    long l = 1, c = 1;
    for (const char *q = ps->src; q < at && q < ps->end; q++) {
        if (*q == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)*q & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

TN_PRINTF(3, 4)
static int fail_at(parser *ps, const char *at, const char *fmt, ...) {
    if (ps->status)
        return ps->status;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    long line, col;
    line_col(ps, at, &line, &col);
    ps->status = tn_fail(ps->err, TN_ERR_FORMAT, "%s: line %ld, column %ld: %s (invalid JSON)",
                         ps->name, line, col, what);
    return ps->status;
}

/* The input ends where the text needs more: an error for a whole text
 * (fail_at with what), RAN_OUT for a head. Only where every byte after
 * could still make valid JSON: a head that is already wrong fails. */
static int ran_out(parser *ps, const char *at, const char *what) {
    if (!ps->head)
        return fail_at(ps, at, "%s", what);
    if (!ps->status)
        ps->status = RAN_OUT;
    return ps->status;
}

static int fail_nomem(parser *ps) {
    if (!ps->status)
        ps->status = tn_fail(ps->err, TN_ERR_NOMEM, "%s: out of memory while parsing JSON",
                             ps->name);
    return ps->status;
}

/* -------------------------------------------------------------- arena */

static tn_json *arena_alloc(parser *ps, size_t n) {
    arena_chunk *c = ps->doc->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 4096 ? n : 4096;
        c = malloc(sizeof *c + cap * sizeof(tn_json));
        if (!c)
            return NULL;
        c->used = 0;
        c->cap = cap;
        /* A big dedicated chunk goes behind the current one so the
         * current one's free space stays usable for small containers. */
        if (ps->doc->chunks && n > 4096) {
            c->next = ps->doc->chunks->next;
            ps->doc->chunks->next = c;
        } else {
            c->next = ps->doc->chunks;
            ps->doc->chunks = c;
        }
    }
    tn_json *out = c->items + c->used;
    c->used += n;
    return out;
}

static tn_json *stack_push(parser *ps) {
    if (ps->stack_len == ps->stack_cap) {
        size_t cap = ps->stack_cap ? ps->stack_cap * 2 : 256;
        tn_json *s = realloc(ps->stack, cap * sizeof *s);
        if (!s)
            return NULL;
        ps->stack = s;
        ps->stack_cap = cap;
    }
    tn_json *v = &ps->stack[ps->stack_len++];
    memset(v, 0, sizeof *v);
    return v;
}

/* ------------------------------------------------------------ scanning */

static void skip_ws(parser *ps) {
    const char *p = ps->p;
    while (p < ps->end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    ps->p = p;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static char *put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* Whether the bytes p..end (fewer than the sequence needs) begin a valid
 * UTF-8 sequence: a head cut in the middle of a character. */
static bool utf8_prefix_ok(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n || (size_t)(end - p) >= n)
        return false;
    for (const unsigned char *q = p + 1; q < end; q++)
        if ((*q & 0xC0) != 0x80)
            return false;
    if (end - p >= 2) {
        /* The second byte's range: no overlong forms, no surrogates, nothing past U+10FFFF. */
        unsigned char d = p[1];
        if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F) || (c == 0xF0 && d < 0x90) ||
            (c == 0xF4 && d > 0x8F))
            return false;
    }
    return true;
}

/* Parses the string at ps->p (on the opening quote) into the string
 * buffer; returns its start, length in *len_out. */
static const char *parse_string(parser *ps, uint32_t *len_out) {
    const char *start = ps->p;
    const unsigned char *p = (const unsigned char *)ps->p + 1;
    const unsigned char *end = (const unsigned char *)ps->end;
    char *out0 = ps->str_out, *o = out0;
    for (;;) {
        /* Plain ASCII run: the common case, copied byte by byte without
         * further checks. */
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            *o++ = (char)*p++;
        if (p >= end) {
            ran_out(ps, start, "unterminated string");
            return NULL;
        }
        unsigned char c = *p;
        if (c == '"') {
            p++;
            break;
        }
        if (c == 0x1f && (ps->flags & TN_JSON_RAW_UNIT_SEPARATOR)) {
            *o++ = (char)*p++;
            continue;
        }
        if (c < 0x20) {
            fail_at(ps, (const char *)p, "control character U+%04X inside a string (must be escaped)",
                    c);
            return NULL;
        }
        if (c >= 0x80) {
            /* The engine's one UTF-8 check (c is no ASCII: n is 0 or 2..4). */
            size_t n = tn_utf8_char_len((const char *)p, (size_t)(end - p));
            if (!n && ps->head && utf8_prefix_ok(p, end)) {
                ran_out(ps, start, "");
                return NULL;
            }
            if (!n) {
                fail_at(ps, (const char *)p, "invalid UTF-8 byte 0x%02X in a string", c);
                return NULL;
            }
            memcpy(o, p, n);
            o += n;
            p += n;
            continue;
        }
        /* backslash */
        if (end - p < 2) {
            ran_out(ps, start, "unterminated string");
            return NULL;
        }
        char e = (char)p[1];
        p += 2;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            if (ps->head && end - p < 4) {
                /* Cut in its digits: fine while those there are hex. */
                char digits[4] = {'0', '0', '0', '0'};
                memcpy(digits, p, (size_t)(end - p));
                if (hex4(digits) >= 0) {
                    ran_out(ps, start, "");
                    return NULL;
                }
            }
            int hi = end - p >= 4 ? hex4((const char *)p) : -1;
            if (hi < 0) {
                fail_at(ps, (const char *)p - 2, "\\u must be followed by four hex digits");
                return NULL;
            }
            p += 4;
            uint32_t cp = (uint32_t)hi;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                fail_at(ps, (const char *)p - 6, "lone low surrogate \\u%04X", cp);
                return NULL;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                int lo = (end - p >= 6 && p[0] == '\\' && p[1] == 'u') ? hex4((const char *)p + 2)
                                                                       : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    fail_at(ps, (const char *)p - 6,
                            "high surrogate \\u%04X not followed by a low surrogate", cp);
                    return NULL;
                }
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            }
            if (cp == 0 && (ps->flags & TN_JSON_NO_NUL)) {
                /* A C string (GLib's, a GTK label's) would end there and
                 * silently lose the rest. */
                fail_at(ps, (const char *)p - 6, "\\u0000 (a NUL character) inside a string");
                return NULL;
            }
            o = put_utf8(o, cp);
            break;
        }
        default:
            /* Named apart because json-glib takes C's "\101" and "\x41" and
             * makes bytes of them that need not be UTF-8. */
            fail_at(ps, (const char *)p - 2,
                    "invalid escape '\\%c' (JSON has only \\\" \\\\ \\/ \\b \\f \\n \\r "
                    "\\t \\uXXXX)",
                    (e >= 0x20 && e < 0x7F) ? e : '?');
            return NULL;
        }
    }
    *o++ = '\0';
    ps->str_out = o;
    ps->p = (const char *)p;
    *len_out = (uint32_t)(o - out0 - 1);
    return out0;
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

static int parse_number(parser *ps, tn_json *v) {
    const char *s = ps->p, *p = s, *end = ps->end;
    bool neg = false, integral = true;
    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    if (p >= end)
        return ran_out(ps, s, "invalid number");
    if (*p < '0' || *p > '9')
        return fail_at(ps, s, "invalid number");
    const char *digits = p;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9')
            return fail_at(ps, s, "number with a leading zero");
    } else {
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    size_t n_int_digits = (size_t)(p - digits);
    if (p < end && *p == '.') {
        integral = false;
        p++;
        if (p >= end)
            return ran_out(ps, p, "a digit must follow the decimal point");
        if (*p < '0' || *p > '9')
            return fail_at(ps, p, "a digit must follow the decimal point");
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        integral = false;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end)
            return ran_out(ps, p, "a digit must follow the exponent");
        if (*p < '0' || *p > '9')
            return fail_at(ps, p, "a digit must follow the exponent");
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    /* A head that ends on a number may end inside it ("1" of "12.5"):
     * nothing about its size is known yet. */
    if (ps->head && p >= end)
        return ran_out(ps, s, "");
    ps->p = p;
    v->type = TN_JSON_NUMBER;
    /* Where the text is, for tn_json_number_text. */
    v->n = (size_t)(s - ps->src) < UINT32_MAX ? (uint32_t)(s - ps->src) : UINT32_MAX;
    if (integral && (ps->flags & TN_JSON_NO_HUGE_INTEGERS) && n_int_digits >= 19) {
        /* Same length as the limit compares as text: no leading zeros. */
        const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
        if (n_int_digits > 19 || memcmp(digits, limit, 19) > 0)
            return fail_at(ps, s,
                           "whole number too large (beyond a 64-bit integer, "
                           "-9223372036854775808 to 9223372036854775807)");
    }
    if (integral && n_int_digits <= 15) {
        /* Exact in a double: no need for strtod. */
        int64_t x = 0;
        for (const char *q = digits; q < p; q++)
            x = x * 10 + (*q - '0');
        v->v.num = neg ? -(double)x : (double)x;
        return 0;
    }
    /* strtod in the C locale, whatever the process locale says about the
     * decimal separator. */
    pthread_once(&c_locale_once, make_c_locale);
    size_t n = (size_t)(p - s);
    char small[64];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf)
        return fail_nomem(ps);
    memcpy(buf, s, n);
    buf[n] = '\0';
    v->v.num = c_locale ? strtod_l(buf, NULL, c_locale) : strtod(buf, NULL);
    if (buf != small)
        free(buf);
    if ((ps->flags & TN_JSON_NO_HUGE_NUMBERS) && !isfinite(v->v.num))
        return fail_at(ps, s, "number too large (beyond what a double holds, about 1.8e308)");
    return 0;
}

/* false: not the word; a head cut inside it sets RAN_OUT. */
static bool literal(parser *ps, const char *word, size_t n) {
    size_t have = (size_t)(ps->end - ps->p);
    if (ps->head && have < n && memcmp(ps->p, word, have) == 0)
        ran_out(ps, ps->p, "");
    if (have < n || memcmp(ps->p, word, n) != 0)
        return false;
    ps->p += n;
    return true;
}

static int parse_value(parser *ps, tn_json *v, int depth);

static int key_order(const void *a, const void *b) {
    const tn_json *x = a, *y = b;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    int c = memcmp(x->key, y->key, x->key_len);
    if (c)
        return c;
    return x->n < y->n ? -1 : x->n > y->n;
}

/* The members stack[base..] of one object, each with its key's offset in
 * `n`: sorted, so that a hostile object of 100,000 keys costs n log n, and
 * the repeat reported is the first one in the text. */
static int check_duplicates(parser *ps, size_t base) {
    size_t n = ps->stack_len - base;
    if (n < 2)
        return 0;
    tn_json *m = ps->stack + base;
    qsort(m, n, sizeof *m, key_order);
    const tn_json *dup = NULL;
    for (size_t i = 1; i < n; i++)
        if (m[i].key_len == m[i - 1].key_len && !memcmp(m[i].key, m[i - 1].key, m[i].key_len) &&
            (!dup || m[i].n < dup->n))
            dup = &m[i];
    if (!dup)
        return 0;
    /* The key as far as it prints: up to its first NUL, cut short on a
     * character boundary. */
    char key[64];
    size_t k = strnlen(dup->key, dup->key_len);
    if (k >= sizeof key) {
        k = sizeof key - 4;
        while (k && ((unsigned char)dup->key[k] & 0xC0) == 0x80)
            k--;
        memcpy(key + k, "...", 4);
    } else {
        key[k] = '\0';
    }
    memcpy(key, dup->key, k);
    long line, col;
    line_col(ps, ps->src + dup->n, &line, &col);
    ps->status = tn_fail(ps->err, TN_ERR_FORMAT,
                         "%s: line %ld, column %ld: the key \"%s\" appears more than once in "
                         "the same object",
                         ps->name, line, col, key);
    return ps->status;
}

/* A head ran out inside an object whose members from stack[base] were
 * read (keep_keys: kept), key (NULL: none) the one whose value it cut:
 * a key twice among them is an error whatever comes after. */
static int head_ran_out(parser *ps, size_t base, bool keep_keys, const char *key, uint32_t key_len,
                        const char *key_at, const char *at, const char *what) {
    if (ran_out(ps, at, what) != RAN_OUT || !keep_keys)
        return ps->status;
    if (key) {
        tn_json *slot = stack_push(ps);
        if (!slot) {
            ps->status = 0;
            return fail_nomem(ps);
        }
        slot->key = key;
        slot->key_len = key_len;
        slot->n = (uint32_t)(key_at - ps->src);
    }
    /* check_duplicates reports a repeat over the RAN_OUT. */
    if (check_duplicates(ps, base))
        return ps->status;
    /* This object's keys are done with: left on the stack, they counted
     * among the members of the object around it, whose own check then
     * took {"a": {"a": 1, "b": ... for "a" twice. */
    ps->stack_len = base;
    return RAN_OUT;
}

static int parse_container(parser *ps, tn_json *v, int depth, bool is_object) {
    const char *open = ps->p;
    if ((unsigned)depth >= ps->max_depth)
        return fail_at(ps, open, "nesting deeper than %u levels", ps->max_depth);
    if (is_object && (unsigned)depth + 1 == ps->count_level)
        ps->n_counted++;
    ps->p++;
    size_t base = ps->stack_len;
    /* Without a tree, keys matter only until their object closes. */
    char *str_base = ps->str_out;
    const bool keep_keys = ps->build || (is_object && (ps->flags & TN_JSON_NO_DUPLICATE_KEYS));
    char close = is_object ? '}' : ']';
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
    } else {
        for (;;) {
            skip_ws(ps);
            const char *key = NULL, *key_at = ps->p;
            uint32_t key_len = 0;
            if (is_object) {
                if (ps->p >= ps->end)
                    return head_ran_out(ps, base, keep_keys, NULL, 0, key_at, ps->p,
                                        "expected a string key");
                if (*ps->p != '"')
                    return fail_at(ps, ps->p, "expected a string key");
                key = parse_string(ps, &key_len);
                if (!key)
                    return ps->status == RAN_OUT ? head_ran_out(ps, base, keep_keys, NULL, 0, key_at, key_at, "")
                                                 : ps->status;
                skip_ws(ps);
                if (ps->p >= ps->end)
                    return head_ran_out(ps, base, keep_keys, key, key_len, key_at, ps->p,
                                        "expected ':' after an object key");
                if (*ps->p != ':')
                    return fail_at(ps, ps->p, "expected ':' after an object key");
                ps->p++;
                skip_ws(ps);
            }
            tn_json item;
            memset(&item, 0, sizeof item);
            if (parse_value(ps, &item, depth + 1))
                return ps->status == RAN_OUT
                           ? head_ran_out(ps, base, keep_keys && is_object, key, key_len, key_at,
                                          key_at, "")
                           : ps->status;
            if (ps->head && depth == 0 && is_object)
                ps->members_end = ps->p;
            if (keep_keys) {
                tn_json *slot = stack_push(ps);
                if (!slot)
                    return fail_nomem(ps);
                if (ps->build) {
                    item.key = key;
                    item.key_len = key_len;
                    *slot = item;
                } else {
                    slot->key = key;
                    slot->key_len = key_len;
                    slot->n = (uint32_t)(key_at - ps->src);
                }
            }
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            if (ps->p < ps->end && *ps->p == close) {
                ps->p++;
                break;
            }
            if (ps->p >= ps->end) {
                char what[32];
                snprintf(what, sizeof what, "'%c' is never closed", is_object ? '{' : '[');
                return head_ran_out(ps, base, keep_keys && is_object, NULL, 0, open, open, what);
            }
            return fail_at(ps, ps->p, "expected ',' or '%c'", close);
        }
    }
    if (!ps->build) {
        v->type = is_object ? TN_JSON_OBJECT : TN_JSON_ARRAY;
        if (keep_keys && check_duplicates(ps, base))
            return ps->status;
        ps->stack_len = base;
        ps->str_out = str_base;
        return 0;
    }
    size_t n = ps->stack_len - base;
    v->type = is_object ? TN_JSON_OBJECT : TN_JSON_ARRAY;
    v->n = (uint32_t)n;
    v->v.items = NULL;
    if (n) {
        tn_json *items = arena_alloc(ps, n);
        if (!items)
            return fail_nomem(ps);
        memcpy(items, ps->stack + base, n * sizeof *items);
        v->v.items = items;
    }
    ps->stack_len = base;
    return 0;
}

static int parse_value(parser *ps, tn_json *v, int depth) {
    if (ps->p >= ps->end)
        return ran_out(ps, ps->p, "unexpected end of input, expected a value");
    char c = *ps->p;
    switch (c) {
    case '{':
        return parse_container(ps, v, depth, true);
    case '[':
        return parse_container(ps, v, depth, false);
    case '"': {
        uint32_t len;
        const char *s = parse_string(ps, &len);
        if (!s)
            return ps->status;
        if (!ps->build)
            ps->str_out = (char *)s;
        v->type = TN_JSON_STRING;
        v->v.str = s;
        v->n = len;
        return 0;
    }
    case 't':
        if (!literal(ps, "true", 4))
            break;
        v->type = TN_JSON_BOOL;
        v->b = true;
        return 0;
    case 'f':
        if (!literal(ps, "false", 5))
            break;
        v->type = TN_JSON_BOOL;
        v->b = false;
        return 0;
    case 'n':
        if (!literal(ps, "null", 4))
            break;
        v->type = TN_JSON_NULL;
        return 0;
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return parse_number(ps, v);
        break;
    }
    if (ps->status)
        return ps->status; /* a head cut in a literal */
    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7F)
        return fail_at(ps, ps->p, "unexpected character '%c'", c);
    return fail_at(ps, ps->p, "unexpected byte 0x%02X", (unsigned char)c);
}

/* ---------------------------------------------------------------- API */

/* The document in ps->src..ps->end, whole; ps->status is the result. */
static void scan_document(parser *ps, tn_json *root) {
    if (ps->end - ps->src >= 3 && memcmp(ps->src, "\xEF\xBB\xBF", 3) == 0) {
        fail_at(ps, ps->p, "the text starts with a byte order mark");
        return;
    }
    skip_ws(ps);
    if (ps->p >= ps->end) {
        ran_out(ps, ps->p, "empty document");
    } else if (!parse_value(ps, root, 0)) {
        skip_ws(ps);
        if (ps->p < ps->end)
            fail_at(ps, ps->p, "unexpected text after the end of the document");
    }
}

/* What both entry points refuse before scanning. */
static int check_text(const char *text, size_t len, const char *name, tn_error *err) {
    if (!text && len)
        return tn_fail(err, TN_ERR_INVALID, "%s: no text", name);
    if (len >= UINT32_MAX)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: JSON text of %zu bytes is too large",
                       name, len);
    return TN_OK;
}

int tn_json_parse(const char *text, size_t len, const char *name, tn_json_doc **out,
                  tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_json_parse: out is NULL");
    *out = NULL;
    if (!name)
        name = "JSON";
    int rc = check_text(text, len, name, err);
    if (rc != TN_OK)
        return rc;
    tn_json_doc *doc = calloc(1, sizeof *doc);
    if (!doc)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory while parsing JSON", name);
    doc->strings = malloc(len + 1);
    if (!doc->strings) {
        free(doc);
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory while parsing JSON", name);
    }
    parser ps = {
        .src = text ? text : "",
        .p = text ? text : "",
        .end = (text ? text : "") + len,
        .name = name,
        .err = err,
        .str_out = doc->strings,
        .doc = doc,
        .build = true,
        .max_depth = TN_JSON_MAX_DEPTH,
    };
    scan_document(&ps, &doc->root);
    free(ps.stack);
    if (ps.status) {
        tn_json_free(doc);
        return ps.status;
    }
    *out = doc;
    return TN_OK;
}

static int check(const char *text, size_t len, const char *name, unsigned max_depth, unsigned flags,
                 bool head, size_t *members_end, unsigned count_level, uint64_t *n_counted,
                 tn_error *err) {
    if (n_counted)
        *n_counted = 0;
    if (!name)
        name = "JSON";
    int rc = check_text(text, len, name, err);
    if (rc != TN_OK)
        return rc;
    /* The scanner recurses once per level: TN_JSON_MAX_DEPTH bounds the
     * stack whatever the caller asks. */
    if (max_depth == 0)
        max_depth = TN_JSON_CHECK_DEPTH;
    if (max_depth > TN_JSON_MAX_DEPTH)
        max_depth = TN_JSON_MAX_DEPTH;
    /* Keys are decoded to be compared ("a" and "\u0061" are the same key);
     * one buffer the input's size holds the keys of every open object. */
    char *strings = malloc(len + 1);
    if (!strings)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory while parsing JSON", name);
    parser ps = {
        .src = text ? text : "",
        .p = text ? text : "",
        .end = (text ? text : "") + len,
        .name = name,
        .err = err,
        .str_out = strings,
        .build = false,
        .max_depth = max_depth,
        .flags = flags & (TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS |
                          TN_JSON_NO_HUGE_INTEGERS | TN_JSON_RAW_UNIT_SEPARATOR),
        .head = head,
        .count_level = count_level,
    };
    tn_json root;
    memset(&root, 0, sizeof root);
    scan_document(&ps, &root);
    free(ps.stack);
    free(strings);
    if (members_end)
        *members_end = ps.members_end ? (size_t)(ps.members_end - ps.src) : 0;
    rc = ps.status && ps.status != RAN_OUT ? ps.status : TN_OK;
    if (n_counted && rc == TN_OK)
        *n_counted = ps.n_counted;
    return rc;
}

int tn_json_check(const char *text, size_t len, const char *name, unsigned max_depth,
                  unsigned flags, tn_error *err) {
    return check(text, len, name, max_depth, flags, false, NULL, 0, NULL, err);
}

int tn_json_check_count(const char *text, size_t len, const char *name, unsigned max_depth,
                        unsigned flags, unsigned level, uint64_t *n_objects, tn_error *err) {
    return check(text, len, name, max_depth, flags, false, NULL, level, n_objects, err);
}

int tn_json_check_head(const char *text, size_t len, const char *name, unsigned max_depth,
                       unsigned flags, size_t *members_end, tn_error *err) {
    size_t end = 0;
    int rc = check(text, len, name, max_depth, flags, true, &end, 0, NULL, err);
    if (members_end)
        *members_end = rc == TN_OK ? end : 0;
    return rc;
}

char *tn_json_escape_unit_separators(char *text, size_t *len) {
    if (!text)
        return NULL;
    size_t n = 0, raw = 0;
    for (; text[n]; n++)
        raw += text[n] == 0x1f;
    if (raw == 0) {
        if (len)
            *len = n;
        return text;
    }
    char *out = malloc(n + raw * 5 + 1); /* "\u001f" is 6 bytes for 1 */
    if (!out) {
        free(text);
        return NULL;
    }
    char *o = out;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)text[i];
        if (c == 0x1f)
            o += sprintf(o, "\\u%04x", c);
        else
            *o++ = (char)c;
    }
    *o = '\0';
    free(text);
    if (len)
        *len = (size_t)(o - out);
    return out;
}

int tn_json_parse_file(const char *path, tn_json_doc **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_json_parse_file: out is NULL");
    *out = NULL;
    /* tokenizer.json, config.json: files a user points the converter at, so
     * read as any named file is (a FIFO or a device refused); the parser's
     * offsets are 32-bit, which bounds the size. */
    char *buf = NULL;
    size_t len = 0;
    int rc = tn_read_file(path, UINT32_MAX - 1, &buf, &len, err);
    if (rc == TN_OK)
        rc = tn_json_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

void tn_json_free(tn_json_doc *doc) {
    if (!doc)
        return;
    arena_chunk *c = doc->chunks;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc->strings);
    free(doc);
}

const tn_json *tn_json_root(const tn_json_doc *doc) { return doc ? &doc->root : NULL; }

const tn_json *tn_json_get(const tn_json *obj, const char *key) {
    if (!obj || obj->type != TN_JSON_OBJECT || !key)
        return NULL;
    size_t klen = strlen(key);
    for (uint32_t i = 0; i < obj->n; i++) {
        const tn_json *m = &obj->v.items[i];
        if (m->key_len == klen && memcmp(m->key, key, klen) == 0)
            return m;
    }
    return NULL;
}

const tn_json *tn_json_at(const tn_json *arr, size_t i) {
    if (!arr || (arr->type != TN_JSON_ARRAY && arr->type != TN_JSON_OBJECT) || i >= arr->n)
        return NULL;
    return &arr->v.items[i];
}

size_t tn_json_count(const tn_json *v) {
    if (!v || (v->type != TN_JSON_ARRAY && v->type != TN_JSON_OBJECT))
        return 0;
    return v->n;
}

const char *tn_json_str(const tn_json *v) {
    return v && v->type == TN_JSON_STRING ? v->v.str : NULL;
}

bool tn_json_depth_ok(const char *data, size_t len, unsigned max_depth) {
    unsigned depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = data[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return false;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return true;
}

const char *tn_json_number_text(const tn_json *v, const char *input, size_t input_len,
                                size_t *len) {
    if (!v || v->type != TN_JSON_NUMBER || !input || v->n >= input_len || !len)
        return NULL;
    const char *p = input + v->n, *end = input + input_len, *q = p;
    while (q < end && ((*q >= '0' && *q <= '9') || *q == '-' || *q == '+' || *q == '.' ||
                       *q == 'e' || *q == 'E'))
        q++;
    *len = (size_t)(q - p);
    return *len ? p : NULL;
}

bool tn_json_is(const tn_json *v, tn_json_type type) { return v && v->type == type; }

bool tn_json_bool(const tn_json *v, bool fallback) {
    return v && v->type == TN_JSON_BOOL ? v->b : fallback;
}

double tn_json_num(const tn_json *v, double fallback) {
    return v && v->type == TN_JSON_NUMBER ? v->v.num : fallback;
}

bool tn_json_int(const tn_json *v, int64_t *out) {
    if (!v || v->type != TN_JSON_NUMBER)
        return false;
    double d = v->v.num;
    /* -2^63 is exact; 2^63 is the first value that does not fit. */
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != floor(d))
        return false;
    *out = (int64_t)d;
    return true;
}
