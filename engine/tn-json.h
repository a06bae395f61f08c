/* A small strict JSON reader (RFC 8259) for the files Tern imports:
 * Hugging Face tokenizer.json / tokenizer_config.json, GPT-2 encoder.json.
 *
 * The whole document is parsed into an immutable tree owned by a tn_json_doc.
 * Strict means: no comments, no trailing commas, no leading zeros, no BOM,
 * strings must be valid UTF-8 and \u escapes must pair their surrogates.
 * Nesting is limited (TN_JSON_MAX_DEPTH) so hostile input cannot exhaust the
 * stack; every failure is reported with the line and column.
 */
#ifndef TN_JSON_H
#define TN_JSON_H

#include "tern.h"
#include "tn-text.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TN_JSON_MAX_DEPTH 512

typedef enum tn_json_type {
    TN_JSON_NULL = 0,
    TN_JSON_BOOL,
    TN_JSON_NUMBER,
    TN_JSON_STRING,
    TN_JSON_ARRAY,
    TN_JSON_OBJECT,
} tn_json_type;

/* One value. Object members are values whose `key` is set; an object's
 * members and an array's items are stored contiguously in `v.items`. */
typedef struct tn_json tn_json;
struct tn_json {
    uint8_t type;     /* tn_json_type */
    bool b;           /* TN_JSON_BOOL */
    uint32_t n;       /* string: bytes (without the NUL); array/object: count;
                         number: where its text starts in the input (internal:
                         tn_json_number_text) */
    union {
        double num;          /* TN_JSON_NUMBER */
        const char *str;     /* TN_JSON_STRING: NUL-terminated, may hold \0 */
        const tn_json *items;
    } v;
    const char *key;  /* object members only: NUL-terminated */
    uint32_t key_len;
};

typedef struct tn_json_doc tn_json_doc;

/* Parses `len` bytes. `name` (a file name) prefixes error messages. */
int tn_json_parse(const char *text, size_t len, const char *name, tn_json_doc **out,
                  tn_error *err);
/* Reads and parses a file. */
int tn_json_parse_file(const char *path, tn_json_doc **out, tn_error *err);
void tn_json_free(tn_json_doc *doc);

const tn_json *tn_json_root(const tn_json_doc *doc);

/* Lookups that accept NULL and values of the wrong type (they return NULL
 * or the fallback), so callers can chain them without checks in between. */
const tn_json *tn_json_get(const tn_json *obj, const char *key);   /* first member */
const tn_json *tn_json_at(const tn_json *arr, size_t i);
size_t tn_json_count(const tn_json *v);                            /* 0 unless array/object */
const char *tn_json_str(const tn_json *v);                         /* NULL unless string */
bool tn_json_is(const tn_json *v, tn_json_type type);
bool tn_json_bool(const tn_json *v, bool fallback);
double tn_json_num(const tn_json *v, double fallback);
/* An integral number in [INT64_MIN, INT64_MAX] into *out; false otherwise. */
bool tn_json_int(const tn_json *v, int64_t *out);
/* A number's text as written in the input that was parsed (input, input_len:
 * that same text), *len its length: to print 12345678901234567890 or 1.10
 * as given rather than through a double. NULL unless a number (or past
 * 4 GiB into the input). */
const char *tn_json_number_text(const tn_json *v, const char *input, size_t input_len,
                                size_t *len);

/* ------------------------------------------------ incremental lexing */

/* The pieces of JSON text that the incremental checkers (json-prefix.c,
 * json-schema.c) read byte by byte alike: a string's body after its
 * opening quote, and a number. Each step reads one byte c in a sub-state
 * (the caller keeps it as mode - its first mode of that piece) and says
 * what became of it: TN_JSON_LEX_BAD (the text cannot go on with c; the
 * caller's state may be half-changed: callers step a copy), _MORE (c was
 * taken) or _END. The limits are the caller's; here is only JSON's
 * grammar (RFC 8259) and UTF-8's (RFC 3629), defined once so that the two
 * checkers cannot drift apart. */
enum { TN_JSON_LEX_BAD, TN_JSON_LEX_MORE, TN_JSON_LEX_END };

/* A string's sub-states, in this order. */
enum { TN_JSON_LEX_STR, TN_JSON_LEX_ESC, TN_JSON_LEX_HEX, TN_JSON_LEX_UTF8 };

/* One byte of a string's body. _END: c was the closing quote (taken).
 * aux counts hex digits or UTF-8 continuation bytes still due, lo..hi the
 * range of the next continuation byte. With hex (not NULL) a \u escape's
 * value is gathered and surrogate escapes (paired or not) and \u0000 are
 * refused: the strict readers answers meet refuse the unpaired ones, and
 * json-glib cuts a string at NUL. */
static inline int tn_json_lex_string(uint8_t *sub, uint8_t *aux, uint8_t *lo, uint8_t *hi,
                                     uint16_t *hex, uint8_t c) {
    switch (*sub) {
    case TN_JSON_LEX_STR:
        if (c == '"')
            return TN_JSON_LEX_END;
        if (c == '\\') {
            *sub = TN_JSON_LEX_ESC;
            return TN_JSON_LEX_MORE;
        }
        if (c < 0x20)
            return TN_JSON_LEX_BAD; /* control characters must be escaped */
        if (c < 0x80)
            return TN_JSON_LEX_MORE;
        /* The lead byte sets the range of the first continuation byte, so
         * that overlong forms, UTF-16 surrogates and code points beyond
         * U+10FFFF are refused where they start (RFC 3629's table). */
        *lo = 0x80;
        *hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            *aux = 1;
        else if (c >= 0xE0 && c <= 0xEF)
            *aux = 2;
        else if (c >= 0xF0 && c <= 0xF4)
            *aux = 3;
        else
            return TN_JSON_LEX_BAD;
        if (c == 0xE0)
            *lo = 0xA0;
        else if (c == 0xED)
            *hi = 0x9F;
        else if (c == 0xF0)
            *lo = 0x90;
        else if (c == 0xF4)
            *hi = 0x8F;
        *sub = TN_JSON_LEX_UTF8;
        return TN_JSON_LEX_MORE;
    case TN_JSON_LEX_UTF8:
        if (c < *lo || c > *hi)
            return TN_JSON_LEX_BAD;
        *lo = 0x80;
        *hi = 0xBF;
        if (--*aux == 0)
            *sub = TN_JSON_LEX_STR;
        return TN_JSON_LEX_MORE;
    case TN_JSON_LEX_ESC:
        if (c == 'u') {
            *sub = TN_JSON_LEX_HEX;
            *aux = 4;
            if (hex)
                *hex = 0;
            return TN_JSON_LEX_MORE;
        }
        if (c == 0 || !strchr("\"\\/bfnrt", c))
            return TN_JSON_LEX_BAD;
        *sub = TN_JSON_LEX_STR;
        return TN_JSON_LEX_MORE;
    case TN_JSON_LEX_HEX: {
        const int h = tn_hex_digit(c);
        if (h < 0)
            return TN_JSON_LEX_BAD;
        --*aux;
        if (hex) {
            *hex = (uint16_t)(*hex << 4 | h);
            if (*aux == 2 && *hex >= 0xD8 && *hex <= 0xDF)
                return TN_JSON_LEX_BAD;
            if (*aux == 0 && *hex == 0)
                return TN_JSON_LEX_BAD;
        }
        if (*aux == 0)
            *sub = TN_JSON_LEX_STR;
        return TN_JSON_LEX_MORE;
    }
    default: return TN_JSON_LEX_BAD;
    }
}

/* A number's sub-states, in this order. */
enum {
    TN_JSON_LEX_NUM_MINUS, /* "-": a digit must follow */
    TN_JSON_LEX_NUM_ZERO,  /* a leading 0: no digit may follow */
    TN_JSON_LEX_NUM_INT,
    TN_JSON_LEX_NUM_DOT, /* "1.": a digit must follow */
    TN_JSON_LEX_NUM_FRAC,
    TN_JSON_LEX_NUM_E,     /* "1e": a sign or digit */
    TN_JSON_LEX_NUM_ESIGN, /* "1e+": a digit */
    TN_JSON_LEX_NUM_EXP,
};

/* The two pieces' modes in a checker's own mode enum (json-prefix.c and
 * json-schema.c write TN_JSON_LEX_MODES among theirs): M_STR and
 * M_NUM_MINUS start them, and a sub-state is its offset from there, so
 * that a mode is one byte and the step is mode - M_STR (or -
 * M_NUM_MINUS). Defined once beside the sub-states, so that one edit
 * keeps both checkers in step with them. */
#define TN_JSON_LEX_MODES                                                                          \
    M_STR,                                                                                         \
    M_ESC = M_STR + TN_JSON_LEX_ESC,                                                               \
    M_HEX = M_STR + TN_JSON_LEX_HEX,                                                               \
    M_UTF8 = M_STR + TN_JSON_LEX_UTF8,                                                             \
    M_NUM_MINUS,                                                                                   \
    M_NUM_ZERO = M_NUM_MINUS + TN_JSON_LEX_NUM_ZERO,                                               \
    M_NUM_INT = M_NUM_MINUS + TN_JSON_LEX_NUM_INT,                                                 \
    M_NUM_DOT = M_NUM_MINUS + TN_JSON_LEX_NUM_DOT,                                                 \
    M_NUM_FRAC = M_NUM_MINUS + TN_JSON_LEX_NUM_FRAC,                                               \
    M_NUM_E = M_NUM_MINUS + TN_JSON_LEX_NUM_E,                                                     \
    M_NUM_ESIGN = M_NUM_MINUS + TN_JSON_LEX_NUM_ESIGN,                                             \
    M_NUM_EXP = M_NUM_MINUS + TN_JSON_LEX_NUM_EXP

/* What a number may be: digits at most in its integer, fraction and
 * exponent parts (0: any number of them), and whether '.' and 'e' end it
 * (an integer). */
typedef struct tn_json_lex_num_rules {
    uint8_t int_digits, frac_digits, exp_digits;
    bool integer_only;
} tn_json_lex_num_rules;

/* The sub-state a number starting with c is in, digits the digits its
 * current part has; false when no number starts with c. */
static inline bool tn_json_lex_number_start(uint8_t c, uint8_t *sub, uint8_t *digits) {
    if (c != '-' && !(c >= '0' && c <= '9'))
        return false;
    *sub = c == '-' ? TN_JSON_LEX_NUM_MINUS : c == '0' ? TN_JSON_LEX_NUM_ZERO : TN_JSON_LEX_NUM_INT;
    *digits = 1;
    return true;
}

/* One byte of a number. _END: the number ended before c, which is not
 * taken and belongs to what follows (a number in a container always ends
 * at such a byte). */
static inline int tn_json_lex_number(uint8_t *sub, uint8_t *digits, const tn_json_lex_num_rules *r,
                                     uint8_t c) {
    const bool digit = c >= '0' && c <= '9';
    switch (*sub) {
    case TN_JSON_LEX_NUM_MINUS:
        if (c == '0')
            *sub = TN_JSON_LEX_NUM_ZERO;
        else if (c >= '1' && c <= '9')
            *sub = TN_JSON_LEX_NUM_INT;
        else
            return TN_JSON_LEX_BAD;
        *digits = 1;
        return TN_JSON_LEX_MORE;
    case TN_JSON_LEX_NUM_ZERO:
    case TN_JSON_LEX_NUM_INT:
    case TN_JSON_LEX_NUM_FRAC:
        if (digit && *sub != TN_JSON_LEX_NUM_ZERO) {
            const uint8_t cap = *sub == TN_JSON_LEX_NUM_FRAC ? r->frac_digits : r->int_digits;
            if (cap && *digits >= cap)
                return TN_JSON_LEX_BAD;
            if (*digits < UINT8_MAX)
                ++*digits;
            return TN_JSON_LEX_MORE;
        }
        if (!r->integer_only) {
            if (c == '.' && *sub != TN_JSON_LEX_NUM_FRAC) {
                *sub = TN_JSON_LEX_NUM_DOT;
                return TN_JSON_LEX_MORE;
            }
            if (c == 'e' || c == 'E') {
                *sub = TN_JSON_LEX_NUM_E;
                return TN_JSON_LEX_MORE;
            }
        }
        return TN_JSON_LEX_END;
    case TN_JSON_LEX_NUM_DOT:
        if (!digit)
            return TN_JSON_LEX_BAD;
        *sub = TN_JSON_LEX_NUM_FRAC;
        *digits = 1;
        return TN_JSON_LEX_MORE;
    case TN_JSON_LEX_NUM_E:
        if (c == '+' || c == '-') {
            *sub = TN_JSON_LEX_NUM_ESIGN;
            return TN_JSON_LEX_MORE;
        }
        if (!digit)
            return TN_JSON_LEX_BAD;
        *sub = TN_JSON_LEX_NUM_EXP;
        *digits = 1;
        return TN_JSON_LEX_MORE;
    case TN_JSON_LEX_NUM_ESIGN:
        if (!digit)
            return TN_JSON_LEX_BAD;
        *sub = TN_JSON_LEX_NUM_EXP;
        *digits = 1;
        return TN_JSON_LEX_MORE;
    case TN_JSON_LEX_NUM_EXP:
        if (digit) {
            if (r->exp_digits && *digits >= r->exp_digits)
                return TN_JSON_LEX_BAD;
            if (*digits < UINT8_MAX)
                ++*digits;
            return TN_JSON_LEX_MORE;
        }
        return TN_JSON_LEX_END;
    default: return TN_JSON_LEX_BAD;
    }
}

#endif
