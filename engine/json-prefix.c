/* The incremental JSON-object checker that constrained sampling runs on
 * every candidate token's bytes (tern.h, tn_json_prefix): a pushdown
 * automaton whose stack is one bit per level, so that trying a token is a
 * copy of a few bytes and a walk over its text. Top-level numbers and
 * literals never occur (the value is an object), so a number always ends
 * at a byte that belongs to what follows it, and is re-read there. */
#include "tn-internal.h"
#include "tn-json.h"

enum {
    M_START,     /* before the object */
    M_DONE,      /* after it */
    M_OBJ_FIRST, /* after '{': a key or '}' */
    M_KEY,       /* after ',' in an object: a key */
    M_COLON,     /* after a key */
    M_ARR_FIRST, /* after '[': a value or ']' */
    M_VALUE,     /* after ':' or ',' in an array */
    M_AFTER,     /* after a value in a container: ',' or its closing bracket */
    /* A string's body, then a number: M_STR.., M_NUM_MINUS.. (tn-json.h). */
    TN_JSON_LEX_MODES,
    M_LIT,
};

static const char *const literals[] = {"true", "false", "null"};

void tn_json_prefix_init(tn_json_prefix *p) {
    memset(p, 0, sizeof *p);
    p->mode = M_START;
}

bool tn_json_prefix_complete(const tn_json_prefix *p) { return p->mode == M_DONE; }

static inline bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

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
    case 't':
    case 'f':
    case 'n':
        p->mode = M_LIT;
        p->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        p->aux = 1;
        return true;
    default: {
        uint8_t sub, digits;
        if (!tn_json_lex_number_start(c, &sub, &digits))
            return false;
        p->mode = (uint8_t)(M_NUM_MINUS + sub);
        return true;
    }
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
    case M_ESC:
    case M_HEX:
    case M_UTF8: {
        uint8_t sub = (uint8_t)(p->mode - M_STR);
        const int r = tn_json_lex_string(&sub, &p->aux, &p->lo, &p->hi, NULL, c);
        if (r == TN_JSON_LEX_BAD)
            return false;
        if (r == TN_JSON_LEX_END)
            p->mode = p->key ? M_COLON : M_AFTER;
        else
            p->mode = (uint8_t)(M_STR + sub);
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
        static const tn_json_lex_num_rules any = {0, 0, 0, false};
        uint8_t sub = (uint8_t)(p->mode - M_NUM_MINUS), digits = 0;
        const int r = tn_json_lex_number(&sub, &digits, &any, c);
        if (r == TN_JSON_LEX_BAD)
            return false;
        if (r == TN_JSON_LEX_END) {
            p->mode = M_AFTER; /* the number ended: c belongs to what follows */
            return step(p, c);
        }
        p->mode = (uint8_t)(M_NUM_MINUS + sub);
        return true;
    }
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
