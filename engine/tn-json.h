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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
