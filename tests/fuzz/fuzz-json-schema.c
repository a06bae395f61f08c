/* libFuzzer target for tn_json_schema (engine/json-schema.c): the schema
 * compiler and the checker that json_schema answers are sampled through. A
 * schema it wrongly compiles is enforced other than it reads; a byte the
 * checker wrongly accepts lets a model write an answer that breaks the
 * schema, or walk into a prefix no text completes.
 *
 * Input: the schema, a NUL byte, then the text. Without a NUL, the first
 * byte picks one of the schemas below and the rest is the text (so that
 * most runs exercise the checker on schemas that compile).
 *
 * Promises:
 *  (a) compiling any bytes ends in a schema or an error with a message,
 *      never a crash, a leak or unbounded time (the sanitizers and
 *      libFuzzer's limits watch those);
 *  (b) a refused byte leaves the state byte for byte as it was, and the
 *      bytes taken, fed again in one call or in pieces, end in the same
 *      state;
 *  (c) once complete, only whitespace is taken;
 *  (d) from every state reached some byte is taken (no dead end), and
 *      finishing from it (closing bytes first, checked by the checker
 *      itself) ends, within a bound, in a complete text that the strict
 *      reader accepts (with the flags json-glib needs) and that the
 *      validator in tests/json-schema-valid.h, which reads the schema
 *      itself, finds valid.
 *
 * Seeds: tests/fuzz/corpus/json-schema/.
 * Run:   build-fuzz/tests/fuzz/fuzz-json-schema tests/fuzz/corpus/json-schema
 */
#include "tn-json.h"
#include "tn-internal.h"
#include "fuzz-promise.h"
#include "../json-schema-valid.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
    "\"integer\"},\"h\":{\"type\":\"number\"},\"ok\":{\"type\":\"boolean\"},\"n\":{\"type\":"
    "[\"string\",\"null\"]},\"c\":{\"enum\":[\"red\",\"re\",1,12,-1.5,null,true]},\"k\":{"
    "\"const\":\"x\\\"y\"},\"t\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}},\"required\":"
    "[\"name\",\"age\"],\"additionalProperties\":false}",
    "{\"type\":\"object\"}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"array\",\"items\":{\"type\":[\"integer\",\"null\",\"boolean\",\"string\"]}}},\"ab\":{"
    "\"type\":\"object\",\"properties\":{\"\":{\"enum\":[\"\",\"\\n\"]}},\"required\":[\"\"]}},"
    "\"required\":[\"a\",\"ab\"]}",
    /* anyOf and $defs/$ref: Optional[model], a list of a model, a tree
     * recursing through an optional property and an array. */
    "{\"$defs\":{\"N\":{\"type\":\"object\",\"properties\":{\"v\":{\"anyOf\":[{\"type\":"
    "\"integer\"},{\"type\":\"null\"},{\"enum\":[\"x\",\"y\"]},{\"const\":true}]},\"k\":{"
    "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/N\"}},\"p\":{\"anyOf\":[{\"$ref\":"
    "\"#/$defs/N\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"k\"]}},\"type\":\"object\","
    "\"properties\":{\"n\":{\"$ref\":\"#/$defs/N\"},\"r\":{\"$ref\":\"#\"},\"l\":{\"anyOf\":"
    "[{\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/S\"}},{\"type\":\"string\"}]}},"
    "\"required\":[\"n\"],\"definitions\":{\"S\":{\"anyOf\":[{\"type\":\"number\"},"
    "{\"type\":\"object\",\"properties\":{\"q\":{\"$ref\":\"#/definitions/S\"}},\"required\":"
    "[\"q\"]},{\"type\":\"null\"}]}}}",
    /* anyOf whose branches start alike: Union[int, float], enums and a
     * string, Optional[Union[A, B]] of two models told apart by a "kind"
     * const or by their keys, a union whose branch recurses. */
    "{\"$defs\":{\"A\":{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},"
    "\"x\":{\"type\":\"integer\"},\"s\":{\"type\":\"string\"},\"n\":{\"enum\":[1,12,\"u\"]}},"
    "\"required\":[\"kind\",\"x\"]},\"B\":{\"type\":\"object\",\"properties\":{\"kind\":{"
    "\"enum\":[\"b\",\"a2\"]},\"y\":{\"type\":\"string\"},\"s\":{\"type\":\"string\"},\"n\":"
    "{\"enum\":[12,2]},\"r\":{\"anyOf\":[{\"$ref\":\"#/$defs/A\"},{\"$ref\":\"#/$defs/B\"}]}},"
    "\"required\":[\"kind\"]}},\"type\":\"object\",\"properties\":{\"u\":{\"anyOf\":[{"
    "\"anyOf\":[{\"$ref\":\"#/$defs/A\"},{\"$ref\":\"#/$defs/B\"}]},{\"type\":\"null\"}]},"
    "\"num\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"number\"},{\"const\":\"n\"}]},"
    "\"e\":{\"anyOf\":[{\"enum\":[\"x\",\"xy\"]},{\"enum\":[\"y\",\"x\",true]},{\"type\":"
    "[\"boolean\",\"null\"]}]},\"t\":{\"anyOf\":[{\"type\":\"string\"},{\"enum\":[\"s\",3]},"
    "{\"type\":\"array\",\"items\":{\"type\":\"null\"}}]}},\"required\":[\"u\",\"num\"]}",
    "{\"type\":\"object\",\"properties\":{\"p\":{\"anyOf\":[{\"type\":\"object\","
    "\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},"
    "\"required\":[\"name\",\"age\"]},{\"type\":\"object\",\"properties\":{\"name\":{"
    "\"type\":\"string\"},\"email\":{\"type\":\"string\"}},\"required\":[\"name\"]},{"
    "\"type\":[\"object\",\"integer\"],\"properties\":{}}]}},\"required\":[\"p\"]}",
};

static bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* (d): finishes text[0..n) from st into text (room: cap), checked. */
static void finish_and_check(const char *schema, size_t schema_len, tn_json_schema_state st,
                             uint8_t *text, size_t n, size_t cap) {
    /* Scalars before containers: a recursive schema ends soonest so. */
    static const char order[] = "\"}]0:,tfn{[";
    while (!tn_json_schema_complete(&st)) {
        PROMISE(n < cap);
        int pick = -1;
        for (const char *o = order; *o && pick < 0; o++) {
            tn_json_schema_state q = st;
            if (tn_json_schema_feed(&q, o, 1) == 1)
                pick = (uint8_t)*o;
        }
        for (int c = 0; c < 256 && pick < 0; c++) {
            tn_json_schema_state q = st;
            const char b = (char)c;
            if (!is_ws((uint8_t)c) && tn_json_schema_feed(&q, &b, 1) == 1)
                pick = c;
        }
        PROMISE(pick >= 0); /* no dead end */
        const char b = (char)pick;
        PROMISE(tn_json_schema_feed(&st, &b, 1) == 1);
        text[n++] = (uint8_t)pick;
    }
    tn_error err;
    memset(&err, 0, sizeof err);
    PROMISE(tn_json_check((const char *)text, n, NULL, 64,
                          TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS |
                              TN_JSON_NO_HUGE_INTEGERS,
                          &err) == TN_OK);
    tn_json_doc *sd = NULL, *dd = NULL;
    PROMISE(tn_json_parse(schema, schema_len, NULL, &sd, &err) == TN_OK);
    PROMISE(tn_json_parse((const char *)text, n, NULL, &dd, &err) == TN_OK);
    PROMISE(jsv_validates(tn_json_root(sd), tn_json_root(dd)));
    tn_json_free(sd);
    tn_json_free(dd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192)
        return 0;
    const uint8_t *nul = memchr(data, 0, size);
    const char *schema;
    size_t schema_len;
    const uint8_t *in;
    size_t n_in;
    if (nul) {
        schema = (const char *)data;
        schema_len = (size_t)(nul - data);
        in = nul + 1;
        n_in = size - schema_len - 1;
    } else {
        schema = schemas[data[0] % (sizeof schemas / sizeof *schemas)];
        schema_len = strlen(schema);
        in = data + 1;
        n_in = size - 1;
    }
    tn_error err;
    memset(&err, 0, sizeof err);
    tn_json_schema *s = NULL;
    if (tn_json_schema_compile(schema, schema_len, &s, &err) != TN_OK) { /* (a) */
        PROMISE(!s && err.message[0]);
        return 0;
    }
    PROMISE(s);
    enum { ROOM = 1 << 16 };
    uint8_t *kept = malloc(n_in + 1);
    uint8_t *text = malloc(ROOM);
    PROMISE(kept && text);
    tn_json_schema_state st;
    tn_json_schema_init(&st, s);
    size_t n_kept = 0;
    for (size_t i = 0; i < n_in; i++) {
        const tn_json_schema_state before = st;
        const bool was_complete = tn_json_schema_complete(&st);
        const size_t got = tn_json_schema_feed(&st, (const char *)in + i, 1);
        if (got == 0) {
            PROMISE(memcmp(&before, &st, sizeof st) == 0); /* (b) */
            continue;
        }
        if (was_complete)
            PROMISE(is_ws(in[i]) && tn_json_schema_complete(&st)); /* (c) */
        kept[n_kept++] = in[i];
        PROMISE(st.space <= TN_JSON_SCHEMA_MAX_SPACE);
        if (n_in <= 256 || i + 1 == n_in) { /* (d) */
            memcpy(text, kept, n_kept);
            finish_and_check(schema, schema_len, st, text, n_kept, ROOM);
        }
    }
    /* (b) again, in one call and in pieces split where the input says. */
    tn_json_schema_state q;
    tn_json_schema_init(&q, s);
    PROMISE(tn_json_schema_feed(&q, (const char *)kept, n_kept) == n_kept);
    PROMISE(memcmp(&q, &st, sizeof st) == 0);
    tn_json_schema_init(&q, s);
    for (size_t at = 0; at < n_kept;) {
        const size_t piece = 1 + (size_t)(kept[at] % 7);
        const size_t take = piece < n_kept - at ? piece : n_kept - at;
        PROMISE(tn_json_schema_feed(&q, (const char *)kept + at, take) == take);
        at += take;
    }
    PROMISE(memcmp(&q, &st, sizeof st) == 0);
    if (n_kept == 0) {
        memcpy(text, kept, 0);
        finish_and_check(schema, schema_len, st, text, 0, ROOM);
    }
    free(kept);
    free(text);
    tn_json_schema_free(s);
    return 0;
}
