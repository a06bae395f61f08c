/* The incremental JSON-object checker that constrained sampling runs on
 * every candidate token's bytes (tern.h, tn_json_prefix): a pushdown
 * automaton whose stack is one bit per level, so that trying a token is a
 * copy of a few bytes and a walk over its text. Top-level numbers and
 * literals never occur (the value is an object), so a number always ends
 * at a byte that belongs to what follows it, and is re-read there. */
#include "tn-internal.h"
#include "tn-text.h"

enum {
    M_START,     /* before the object */
    M_DONE,      /* after it */
    M_OBJ_FIRST, /* after '{': a key or '}' */
    M_KEY,       /* after ',' in an object: a key */
    M_COLON,     /* after a key */
    M_ARR_FIRST, /* after '[': a value or ']' */
    M_VALUE,     /* after ':' or ',' in an array */
    M_AFTER,     /* after a value in a container: ',' or its closing bracket */
    M_STR,
    M_ESC,
    M_HEX,
    M_UTF8,
    M_NUM_MINUS, /* "-": a digit must follow */
    M_NUM_ZERO,  /* a leading 0: no digit may follow */
    M_NUM_INT,
    M_NUM_DOT,   /* "1.": a digit must follow */
    M_NUM_FRAC,
    M_NUM_E,     /* "1e": a sign or digit */
    M_NUM_ESIGN, /* "1e+": a digit */
    M_NUM_EXP,
    M_LIT,
};

static const char *const literals[] = {"true", "false", "null"};

void tn_json_prefix_init(tn_json_prefix *p) {
    memset(p, 0, sizeof *p);
    p->mode = M_START;
}

bool tn_json_prefix_complete(const tn_json_prefix *p) { return p->mode == M_DONE; }

static inline bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static inline bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static bool top_is_object(const tn_json_prefix *p) {
    return (p->stack >> (p->depth - 1)) & 1u;
}

static bool push(tn_json_prefix *p, bool object) {
    if (p->depth >= TN_JSON_PREFIX_MAX_DEPTH)
        return false;
    if (object)
        p->stack |= (uint64_t)1 << p->depth;
    else
        p->stack &= ~((uint64_t)1 << p->depth);
    p->depth++;
    p->mode = object ? M_OBJ_FIRST : M_ARR_FIRST;
    return true;
}

static void pop(tn_json_prefix *p) {
    p->depth--;
    p->mode = p->depth == 0 ? M_DONE : M_AFTER;
}

static bool value_start(tn_json_prefix *p, uint8_t c) {
    switch (c) {
    case '{':
        return push(p, true);
    case '[':
        return push(p, false);
    case '"':
        p->mode = M_STR;
        p->key = false;
        return true;
    case '-':
        p->mode = M_NUM_MINUS;
        return true;
    case '0':
        p->mode = M_NUM_ZERO;
        return true;
    case 't':
    case 'f':
    case 'n':
        p->mode = M_LIT;
        p->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        p->aux = 1;
        return true;
    default:
        if (c >= '1' && c <= '9') {
            p->mode = M_NUM_INT;
            return true;
        }
        return false;
    }
}

/* One byte on p; false (p then half-changed: callers step a copy) when it
 * cannot continue the text. */
static bool step(tn_json_prefix *p, uint8_t c) {
    switch (p->mode) {
    case M_START:
        if (is_ws(c))
            return true;
        return c == '{' && push(p, true);
    case M_DONE:
        return is_ws(c);
    case M_OBJ_FIRST:
    case M_KEY:
        if (is_ws(c))
            return true;
        if (c == '}' && p->mode == M_OBJ_FIRST) {
            pop(p);
            return true;
        }
        if (c != '"')
            return false;
        p->mode = M_STR;
        p->key = true;
        return true;
    case M_COLON:
        if (is_ws(c))
            return true;
        if (c != ':')
            return false;
        p->mode = M_VALUE;
        return true;
    case M_ARR_FIRST:
        if (is_ws(c))
            return true;
        if (c == ']') {
            pop(p);
            return true;
        }
        return value_start(p, c);
    case M_VALUE:
        return is_ws(c) || value_start(p, c);
    case M_AFTER:
        if (is_ws(c))
            return true;
        if (c == ',') {
            p->mode = top_is_object(p) ? M_KEY : M_VALUE;
            return true;
        }
        if (c == (top_is_object(p) ? '}' : ']')) {
            pop(p);
            return true;
        }
        return false;
    case M_STR:
        if (c == '"') {
            p->mode = p->key ? M_COLON : M_AFTER;
            return true;
        }
        if (c == '\\') {
            p->mode = M_ESC;
            return true;
        }
        if (c < 0x20)
            return false; /* control characters must be escaped */
        if (c < 0x80)
            return true;
        /* The lead byte sets the range of the first continuation byte, so
         * that overlong forms, UTF-16 surrogates and code points beyond
         * U+10FFFF are refused where they start (RFC 3629's table). */
        p->lo = 0x80;
        p->hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            p->aux = 1;
        else if (c >= 0xE0 && c <= 0xEF)
            p->aux = 2;
        else if (c >= 0xF0 && c <= 0xF4)
            p->aux = 3;
        else
            return false;
        if (c == 0xE0)
            p->lo = 0xA0;
        else if (c == 0xED)
            p->hi = 0x9F;
        else if (c == 0xF0)
            p->lo = 0x90;
        else if (c == 0xF4)
            p->hi = 0x8F;
        p->mode = M_UTF8;
        return true;
    case M_UTF8:
        if (c < p->lo || c > p->hi)
            return false;
        p->lo = 0x80;
        p->hi = 0xBF;
        if (--p->aux == 0)
            p->mode = M_STR;
        return true;
    case M_ESC:
        if (c == 'u') {
            p->mode = M_HEX;
            p->aux = 4;
            return true;
        }
        if (!strchr("\"\\/bfnrt", c) || c == 0)
            return false;
        p->mode = M_STR;
        return true;
    case M_HEX:
        if (tn_hex_digit(c) < 0)
            return false;
        if (--p->aux == 0)
            p->mode = M_STR;
        return true;
    case M_NUM_MINUS:
        if (c == '0')
            p->mode = M_NUM_ZERO;
        else if (c >= '1' && c <= '9')
            p->mode = M_NUM_INT;
        else
            return false;
        return true;
    case M_NUM_ZERO:
    case M_NUM_INT:
    case M_NUM_FRAC:
        if (is_digit(c) && p->mode != M_NUM_ZERO)
            return true;
        if (c == '.' && p->mode != M_NUM_FRAC) {
            p->mode = M_NUM_DOT;
            return true;
        }
        if (c == 'e' || c == 'E') {
            p->mode = M_NUM_E;
            return true;
        }
        p->mode = M_AFTER; /* the number ended: c belongs to what follows */
        return step(p, c);
    case M_NUM_DOT:
        if (!is_digit(c))
            return false;
        p->mode = M_NUM_FRAC;
        return true;
    case M_NUM_E:
        if (c == '+' || c == '-') {
            p->mode = M_NUM_ESIGN;
            return true;
        }
        if (!is_digit(c))
            return false;
        p->mode = M_NUM_EXP;
        return true;
    case M_NUM_ESIGN:
        if (!is_digit(c))
            return false;
        p->mode = M_NUM_EXP;
        return true;
    case M_NUM_EXP:
        if (is_digit(c))
            return true;
        p->mode = M_AFTER;
        return step(p, c);
    case M_LIT: {
        const char *lit = literals[p->lit];
        if (c != (uint8_t)lit[p->aux])
            return false;
        if (lit[++p->aux] == '\0')
            p->mode = M_AFTER;
        return true;
    }
    default:
        return false;
    }
}

size_t tn_json_prefix_feed(tn_json_prefix *p, const char *bytes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const uint8_t c = (uint8_t)bytes[i];
        const bool space = is_ws(c) && !(p->mode >= M_STR && p->mode <= M_UTF8);
        if (space && p->space >= TN_JSON_PREFIX_MAX_SPACE)
            return i;
        tn_json_prefix q = *p;
        if (!step(&q, c))
            return i;
        q.space = space ? q.space + 1 : 0;
        *p = q;
    }
    return n;
}
