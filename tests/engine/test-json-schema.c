/* tn_json_schema, the checker behind json_schema answers: valid documents
 * are taken however they are split, invalid ones refused at the byte where
 * they stop being the start of a valid one, every keyword outside the
 * subset is refused by name, hostile schemas cost bounded time, and no
 * accepted prefix is a dead end: random walks over the accepted bytes
 * always finish in a document the strict reader takes and that a
 * validator independent of the checker (tests/json-schema-valid.h) finds
 * valid. */
#include "tn-test.h"
#include "tn-json.h"
#include "../json-schema-valid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tn_json_schema *compile(const char *schema) {
    tn_error err;
    memset(&err, 0, sizeof err);
    tn_json_schema *s = NULL;
    const int rc = tn_json_schema_compile(schema, strlen(schema), &s, &err);
    CHECKF(rc == TN_OK, "%s: %s", schema, err.message);
    return rc == TN_OK ? s : NULL;
}

static size_t feed_split(tn_json_schema_state *st, const char *text, size_t n, uint64_t split) {
    size_t done = 0, start = 0;
    for (size_t i = 1; i <= n; i++) {
        if (i == n || (split >> (i % 64) & 1)) {
            const size_t got = tn_json_schema_feed(st, text + start, i - start);
            done += got;
            if (got < i - start)
                return done;
            start = i;
        }
    }
    return done;
}

static const char *const people =
    "{\"type\":\"object\",\"title\":\"p\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"age\":{\"type\":\"integer\"},"
    "\"height\":{\"type\":\"number\"},"
    "\"alive\":{\"type\":\"boolean\"},"
    "\"nick\":{\"type\":[\"string\",\"null\"]},"
    "\"color\":{\"enum\":[\"red\",\"green\",\"blue\",null,1,12,-1.5]},"
    "\"kind\":{\"const\":\"person\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"a\",\"ab\",\"b\"]}},"
    "\"pet\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"string\"},"
    "\"na\":{\"type\":\"integer\"}},\"required\":[\"n\"],\"additionalProperties\":false},"
    "\"q\\\"x\":{\"type\":\"null\"}"
    "},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";

static const char *const valid[] = {
    "{\"name\":\"x\",\"age\":3}",
    " {\"age\":-12 , \"name\" : \"\\u00e9\\n\xc3\xa9\"}\n",
    "{\"name\":\"\",\"age\":0,\"height\":-0.5e+10,\"alive\":true,\"nick\":null}",
    "{\"nick\":\"n\",\"name\":\"a\",\"age\":1,\"color\":\"green\",\"kind\":\"person\"}",
    "{\"name\":\"a\",\"age\":1,\"color\":1}",
    "{\"name\":\"a\",\"age\":1,\"color\":12}",
    "{\"name\":\"a\",\"age\":1,\"color\":-1.5,\"tags\":[]}",
    "{\"name\":\"a\",\"age\":1,\"color\":null,\"tags\":[\"ab\",\"a\",\"b\"]}",
    "{\"pet\":{\"na\":2,\"n\":\"rex\"},\"name\":\"a\",\"age\":1}",
    "{\"name\":\"a\",\"age\":1,\"q\\\"x\":null}",
    "{\"name\":\"a\",\"age\":123456789012345678,\"height\":1E99}",
};

/* The byte where each text stops being a prefix of a valid document. */
static const struct {
    const char *text;
    size_t refused_at;
    const char *why;
} invalid[] = {
    {"[]", 0, "the top level is an object"},
    {"{}", 1, "required keys missing"},
    {"{\"nam\":", 5, "a key that is only a prefix of a name"},
    {"{\"namex\"", 6, "a key longer than any name"},
    {"{\"zzz\"", 2, "an unknown key"},
    {"{\"name\":\"a\",\"name\"", 14, "a key twice"},
    {"{\"name\":1", 8, "a number for a string"},
    {"{\"age\":1.5", 8, "a fraction for an integer"},
    {"{\"age\":1e3", 8, "an exponent for an integer"},
    {"{\"age\":\"1\"", 7, "a string for an integer"},
    {"{\"alive\":null", 9, "null for a boolean"},
    {"{\"nick\":true", 8, "a boolean for string or null"},
    {"{\"color\":\"yellow\"", 10, "a string outside the enum"},
    {"{\"color\":13", 10, "a number outside the enum"},
    {"{\"color\":1.", 10, "a number that continues no enum value"},
    {"{\"color\":true", 9, "a boolean outside the enum"},
    {"{\"kind\":\"persons\"", 15, "const, then more"},
    {"{\"tags\":[\"c\"", 10, "an item outside its enum"},
    {"{\"tags\":{", 8, "an object for an array"},
    {"{\"pet\":{}", 8, "the pet's required key"},
    {"{\"name\":\"a\",\"age\":1}}", 20, "text after the document"},
    {"{\"name\":\"a\",\"age\":1,}", 20, "a trailing comma"},
    {"{\"name\":\"\\ud800\"", 12, "a surrogate escape"},
    {"{\"name\":\"\\u0000\"", 14, "an escaped NUL"},
    {"{\"age\":1234567890123456789", 25, "19 integer digits"},
    {"{\"height\":1e100", 14, "three exponent digits"},
    {"{\"name\":\"a\nb\"", 10, "a raw newline in a string"},
    {"{\"pet\":{\"n\":\"a\",\"na\":1,", 22, "a comma with no property left"},
};

static void test_valid(tn_json_schema *s) {
    for (size_t d = 0; d < sizeof valid / sizeof *valid; d++) {
        const char *doc = valid[d];
        const size_t n = strlen(doc);
        tn_json_schema_state st;
        tn_json_schema_init(&st, s);
        const size_t got = tn_json_schema_feed(&st, doc, n);
        CHECKF(got == n, "valid document %zu refused at %zu: %s", d, got, doc);
        CHECKF(tn_json_schema_complete(&st), "document %zu not complete: %s", d, doc);
        uint64_t rng = 7 + d;
        for (int k = 0; k < 50; k++) {
            tn_json_schema_state q;
            tn_json_schema_init(&q, s);
            const size_t g = feed_split(&q, doc, n, tn_test_rand(&rng));
            CHECKF(g == n && tn_json_schema_complete(&q), "document %zu split: %zu of %zu", d, g,
                   n);
        }
    }
}

static void test_invalid(tn_json_schema *s) {
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        tn_json_schema_state st;
        tn_json_schema_init(&st, s);
        const size_t n = strlen(invalid[i].text);
        const size_t got = tn_json_schema_feed(&st, invalid[i].text, n);
        CHECKF(got == invalid[i].refused_at, "%s: refused at %zu, expected %zu", invalid[i].why,
               got, invalid[i].refused_at);
        CHECKF(!tn_json_schema_complete(&st) || got == n || invalid[i].refused_at == 20,
               "%s: complete", invalid[i].why);
    }
}

/* Every keyword outside the subset is refused, and named. */
static void test_unsupported(void) {
    static const char *const keywords[] = {
        "pattern",
        "format",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "multipleOf",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "uniqueItems",
        "allOf",
        "not",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "if",
        "prefixItems",
        "contains",
        "dependentRequired",
        "unevaluatedProperties",
        "nullable",
        "x-anything",
    };
    for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++) {
        char schema[512];
        snprintf(schema, sizeof schema,
                 "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"%s\":1}}}",
                 keywords[i]);
        tn_error err;
        memset(&err, 0, sizeof err);
        tn_json_schema *s = NULL;
        const int rc = tn_json_schema_compile(schema, strlen(schema), &s, &err);
        char want[128];
        snprintf(want, sizeof want, "\"%s\" is not supported (schema at #/properties/a)",
                 keywords[i]);
        CHECKF(rc != TN_OK && !s && strstr(err.message, want), "%s: %s", keywords[i],
               rc == TN_OK ? "accepted" : err.message);
        tn_json_schema_free(s);
    }
}

static void expect_refused(const char *schema, size_t len, const char *words) {
    tn_error err;
    memset(&err, 0, sizeof err);
    tn_json_schema *s = NULL;
    const int rc = tn_json_schema_compile(schema, len, &s, &err);
    CHECKF(rc != TN_OK && !s && strstr(err.message, words), "want \"%s\", got: %s", words,
           rc == TN_OK ? "accepted" : err.message);
    tn_json_schema_free(s);
}

#define REFUSED(schema, words) expect_refused(schema, strlen(schema), words)

static void test_hostile(void) {
    REFUSED("[1]", "must be a JSON object");
    REFUSED("\"x\"", "must be a JSON object");
    REFUSED("{\"type\":\"string\"}", "top level");
    REFUSED("{\"type\":\"object\",\"additionalProperties\":true}", "additionalProperties");
    REFUSED("{\"type\":\"object\",\"properties\":[]}", "\"properties\" must be");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{}}}", "needs a \"type\"");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"str\"}}}", "\"type\" must be");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"null\",\"null\"]}}}",
            "\"type\" must be");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\"}}}", "needs \"items\"");
    REFUSED("{\"type\":\"object\",\"required\":[\"a\"]}", "\"required\" must be");
    /* A name repeated past the bound (a megabyte of them cost 0.36 s). */
    char req[1024];
    size_t m;
    m = (size_t)sprintf(req, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}},"
                             "\"required\":[");
    for (int i = 0; i < TN_JSON_SCHEMA_MAX_PROPERTIES + 1; i++)
        m += (size_t)sprintf(req + m, "%s\"a\"", i ? "," : "");
    m += (size_t)sprintf(req + m, "]}");
    expect_refused(req, m, "\"required\" must be");
    sprintf(req, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}},"
                 "\"required\":[\"a\",\"a\"]}");
    tn_json_schema *twice = compile(req); /* repeated within the bound: once */
    tn_json_schema_free(twice);
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"enum\":[1.5]}}}",
            "no value of the schema");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[]}}}", "\"enum\" must be");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[[1]]}}}",
            "must be strings, numbers");
    REFUSED("{\"type\":\"object\",\"a\":1,\"a\":2}", "JSON schema");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1e999}}}", "JSON schema");

    /* Nesting: an object per level, far deeper than allowed. */
    const int levels = 2000;
    char *deep = malloc((size_t)levels * 64 + 64);
    size_t n = 0;
    for (int i = 0; i < levels; i++)
        n += (size_t)sprintf(deep + n, "{\"type\":\"object\",\"properties\":{\"a\":");
    n += (size_t)sprintf(deep + n, "{\"type\":\"null\"}");
    for (int i = 0; i < levels; i++)
        n += (size_t)sprintf(deep + n, "}}");
    expect_refused(deep, n, "JSON schema"); /* the reader's depth bound */
    n = 0;
    for (int i = 0; i < TN_JSON_SCHEMA_MAX_DEPTH + 1; i++)
        n += (size_t)sprintf(deep + n, "{\"type\":\"object\",\"properties\":{\"a\":");
    n += (size_t)sprintf(deep + n, "{\"type\":\"null\"}");
    for (int i = 0; i < TN_JSON_SCHEMA_MAX_DEPTH + 1; i++)
        n += (size_t)sprintf(deep + n, "}}");
    expect_refused(deep, n, "nests deeper");
    free(deep);

    /* 100,000 properties; an enum of 100,000 values; a schema over the size. */
    const int many = 100000;
    char *big = malloc((size_t)many * 40 + 128);
    n = (size_t)sprintf(big, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < many; i++)
        n += (size_t)sprintf(big + n, "%s\"p%d\":{\"type\":\"null\"}", i ? "," : "", i);
    n += (size_t)sprintf(big + n, "}}");
    expect_refused(big, n, "; at most"); /* over the size bound */
    n = (size_t)sprintf(big, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < TN_JSON_SCHEMA_MAX_PROPERTIES + 1; i++)
        n += (size_t)sprintf(big + n, "%s\"p%d\":{\"type\":\"null\"}", i ? "," : "", i);
    n += (size_t)sprintf(big + n, "}}");
    expect_refused(big, n, "at most 64 properties");
    n = (size_t)sprintf(big, "{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[");
    for (int i = 0; i < many; i++)
        n += (size_t)sprintf(big + n, "%s%d", i ? "," : "", i);
    n += (size_t)sprintf(big + n, "]}}}");
    expect_refused(big, n, "\"enum\" must be an array of 1 to 1024");
    free(big);
    const size_t huge = (size_t)TN_JSON_SCHEMA_MAX_TEXT + 1;
    char *pad = malloc(huge);
    memset(pad, ' ', huge);
    memcpy(pad, "{\"type\":\"object\"}", 17);
    expect_refused(pad, huge, "at most");
    free(pad);
    /* Many enums under the per-enum bound: the total bound. */
    char *lits = malloc(1 << 20);
    n = (size_t)sprintf(lits, "{\"type\":\"object\",\"properties\":{");
    for (int p = 0; p < 8; p++) {
        n += (size_t)sprintf(lits + n, "%s\"e%d\":{\"type\":\"array\",\"items\":{\"enum\":[",
                             p ? "," : "", p);
        for (int i = 0; i < 1000; i++)
            n += (size_t)sprintf(lits + n, "%s%d", i ? "," : "", i);
        n += (size_t)sprintf(lits + n, "]}}");
    }
    n += (size_t)sprintf(lits + n, "}}");
    expect_refused(lits, n, "enum values in all");
    free(lits);
    /* Annotations of the wrong type, as a strict validator refuses them. */
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\",\"description\":5}}}",
            "\"description\" must be a string (schema at #/properties/a)");
    REFUSED("{\"type\":\"object\",\"title\":[]}", "\"title\" must be a string (schema at #)");
    REFUSED("{\"type\":\"object\",\"$comment\":{}}", "\"$comment\" must be a string");
    REFUSED("{\"type\":\"object\",\"$schema\":1}", "\"$schema\" must be a string");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\",\"examples\":null}}}",
            "\"examples\" must be an array (schema at #/properties/a)");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"null\"}],"
            "\"title\":true}}}",
            "\"title\" must be a string (schema at #/properties/a)");
    tn_json_schema *annotated = compile(
        "{\"type\":\"object\",\"title\":\"t\",\"description\":\"d\",\"$comment\":\"c\","
        "\"examples\":[{}],\"default\":{\"x\":[1]},\"$schema\":\"https://json-schema.org/draft/"
        "2020-12/schema\",\"properties\":{\"a\":{\"type\":\"null\",\"default\":5}}}");
    tn_json_schema_free(annotated);
    /* The size bound on the text as sent: at it, taken; one byte past, not. */
    const size_t at = (size_t)TN_JSON_SCHEMA_MAX_TEXT;
    char *edge = malloc(at + 1);
    static const char head[] = "{\"type\":\"object\",", tail[] = "\"properties\":{}}";
    memset(edge, ' ', at + 1);
    memcpy(edge, head, strlen(head));
    for (int past = 0; past <= 1; past++) {
        const size_t n_edge = at + (size_t)past;
        memcpy(edge + n_edge - strlen(tail), tail, strlen(tail));
        tn_error e;
        memset(&e, 0, sizeof e);
        tn_json_schema *s = NULL;
        const int rc = tn_json_schema_compile(edge, n_edge, &s, &e);
        CHECKF(past ? rc != TN_OK && strstr(e.message, "is 1048577 bytes; at most 1048576")
                    : rc == TN_OK,
               "a schema of %zu bytes: %s", n_edge, rc == TN_OK ? "taken" : e.message);
        tn_json_schema_free(s);
        memset(edge + n_edge - strlen(tail), ' ', strlen(tail));
    }
    free(edge);
    tn_json_schema *s = NULL;
    CHECK(tn_json_schema_compile(NULL, 0, &s, NULL) != TN_OK && !s);
}

/* The validator the walks are judged by reads "additionalProperties" as
 * JSON Schema does: absent or true, an object takes keys its "properties"
 * do not name; false, it does not; a schema, keys whose values it takes.
 * Read as false when absent, it found {"a": "x", "b": "y"} valid against
 * exactly one of two open branches that each take it, and a oneOf that
 * lets such a value through went unseen. */
static void test_validator(void) {
    static const char open1[] = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                                "\"null\"}}",
                      pair[] = "{\"type\":\"object\",\"properties\":{\"u\":{\"oneOf\":[{"
                               "\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                               "\"string\"}},\"required\":[\"a\"]},{\"type\":\"object\","
                               "\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":"
                               "[\"b\"]}]}}}";
    char closed[256], extra_true[256], extra_schema[256];
    snprintf(closed, sizeof closed, "%s,\"additionalProperties\":false}", open1);
    snprintf(extra_true, sizeof extra_true, "%s,\"additionalProperties\":true}", open1);
    snprintf(extra_schema, sizeof extra_schema,
             "%s,\"additionalProperties\":{\"type\":\"string\"}}", open1);
    char open_obj[256];
    snprintf(open_obj, sizeof open_obj, "%s}", open1);
    const struct {
        const char *schema, *value;
        bool valid;
    } cases[] = {
        {"{\"type\":\"object\"}", "{\"x\":1}", true},
        {open_obj, "{\"a\":null,\"b\":[1]}", true},
        {open_obj, "{\"a\":1}", false},
        {extra_true, "{\"b\":{}}", true},
        {closed, "{\"a\":null}", true},
        {closed, "{\"a\":null,\"b\":1}", false},
        {extra_schema, "{\"a\":null,\"b\":\"s\"}", true},
        {extra_schema, "{\"b\":1}", false},
        {pair, "{\"u\":{\"a\":\"x\"}}", true},
        {pair, "{\"u\":{\"b\":\"y\",\"c\":0}}", true},
        {pair, "{\"u\":{\"a\":\"x\",\"b\":\"y\"}}", false}, /* both branches */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tn_json_doc *sd = NULL, *vd = NULL;
        tn_error err;
        memset(&err, 0, sizeof err);
        CHECK(tn_json_parse(cases[i].schema, strlen(cases[i].schema), "schema", &sd, &err) ==
              TN_OK);
        CHECK(tn_json_parse(cases[i].value, strlen(cases[i].value), "value", &vd, &err) == TN_OK);
        if (sd && vd)
            CHECKF(jsv_validates(tn_json_root(sd), tn_json_root(vd)) == cases[i].valid,
                   "%s against %s: the validator says %s", cases[i].value, cases[i].schema,
                   cases[i].valid ? "invalid" : "valid");
        tn_json_free(sd);
        tn_json_free(vd);
    }
}

/* Random walks: from every prefix some byte goes on (unless complete), and
 * a walk that turns to finishing ends in a valid document. */
static void walk(const char *schema_text, tn_json_schema *s, uint64_t seed, int walks) {
    tn_json_doc *sdoc = NULL;
    tn_error err;
    memset(&err, 0, sizeof err);
    CHECK(tn_json_parse(schema_text, strlen(schema_text), "schema", &sdoc, &err) == TN_OK);
    uint64_t rng = seed;
    /* Scalars before containers: a recursive schema ends soonest so. */
    static const char finish[] = "\"}]0:,tfn{[";
    enum { CAP = 1 << 16 };
    char *doc = malloc(CAP);
    int completed = 0;
    for (int w = 0; w < walks; w++) {
        tn_json_schema_state st;
        tn_json_schema_init(&st, s);
        size_t n = 0;
        const size_t wander = tn_test_rand(&rng) % 400;
        bool dead = false;
        while (!tn_json_schema_complete(&st) && n < CAP - 1) {
            uint8_t ok[256];
            int n_ok = 0;
            for (int c = 0; c < 256; c++) {
                tn_json_schema_state q = st;
                char b = (char)c;
                if (tn_json_schema_feed(&q, &b, 1) == 1)
                    ok[n_ok++] = (uint8_t)c;
            }
            if (n_ok == 0) {
                dead = true;
                break;
            }
            int pick = -1;
            if (n >= wander) { /* finishing: closing bytes first, whitespace last */
                for (const char *f = finish; *f && pick < 0; f++)
                    for (int i = 0; i < n_ok; i++)
                        if (ok[i] == (uint8_t)*f)
                            pick = ok[i];
                for (int i = 0; i < n_ok && pick < 0; i++)
                    if (ok[i] != ' ' && ok[i] != '\t' && ok[i] != '\n' && ok[i] != '\r')
                        pick = ok[i];
                if (pick < 0)
                    pick = ok[0];
            } else {
                pick = ok[tn_test_rand(&rng) % (uint64_t)n_ok];
            }
            char b = (char)pick;
            CHECK(tn_json_schema_feed(&st, &b, 1) == 1);
            doc[n++] = b;
        }
        CHECKF(!dead, "walk %d: a dead end after %zu bytes: %.*s", w, n, (int)n, doc);
        CHECKF(tn_json_schema_complete(&st), "walk %d never finished: %.*s", w,
               (int)(n < 200 ? n : 200), doc + (n < 200 ? 0 : n - 200));
        if (dead || !tn_json_schema_complete(&st))
            break;
        completed++;
        tn_json_doc *d = NULL;
        const int rc = tn_json_check(doc, n, "walk", 64,
                                     TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL |
                                         TN_JSON_NO_HUGE_NUMBERS | TN_JSON_NO_HUGE_INTEGERS,
                                     &err);
        CHECKF(rc == TN_OK, "walk %d: %s: %.*s", w, err.message, (int)n, doc);
        if (rc == TN_OK && tn_json_parse(doc, n, "walk", &d, &err) == TN_OK) {
            CHECKF(jsv_validates(tn_json_root(sdoc), tn_json_root(d)), "walk %d invalid: %.*s", w,
                   (int)n, doc);
            tn_json_free(d);
        }
    }
    CHECK(completed == walks);
    free(doc);
    tn_json_free(sdoc);
}

/* A Pydantic model as its model_json_schema() writes it: nested models in
 * "$defs", Optional[X] as anyOf [X, null], a list of a $ref'd model. */
static const char *const order =
    "{\"$defs\":{\"Item\":{\"properties\":{\"name\":{\"title\":\"Name\",\"type\":\"string\"},"
    "\"qty\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],\"default\":null,"
    "\"title\":\"Qty\"}},\"required\":[\"name\",\"qty\"],\"title\":\"Item\",\"type\":\"object\","
    "\"additionalProperties\":false},"
    "\"Address\":{\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"],"
    "\"title\":\"Address\",\"type\":\"object\"}},"
    "\"properties\":{\"owner\":{\"type\":\"string\"},"
    "\"address\":{\"anyOf\":[{\"$ref\":\"#/$defs/Address\"},{\"type\":\"null\"}],"
    "\"default\":null},"
    "\"items\":{\"items\":{\"$ref\":\"#/$defs/Item\"},\"title\":\"Items\",\"type\":\"array\"},"
    "\"tag\":{\"anyOf\":[{\"enum\":[\"a\",\"b\"]},{\"type\":\"integer\"},{\"const\":true}]}},"
    "\"required\":[\"owner\",\"address\",\"items\"],\"title\":\"Order\",\"type\":\"object\","
    "\"additionalProperties\":false}";

/* A recursive model: a tree, the top level a $ref. */
static const char *const tree =
    "{\"$defs\":{\"Node\":{\"type\":\"object\",\"properties\":{\"value\":{\"type\":"
    "\"integer\"},\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Node\"}}},"
    "\"required\":[\"value\",\"children\"],\"additionalProperties\":false}},"
    "\"$ref\":\"#/$defs/Node\"}";

/* The top level recursing: a list whose last link is null, and an
 * optional child. */
static const char *const list =
    "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":"
    "[{\"$ref\":\"#\"},{\"type\":\"null\"}]},\"child\":{\"$ref\":\"#\"}},\"required\":[\"v\","
    "\"next\"]}";

static void expect_doc(tn_json_schema *s, const char *doc, size_t refused_at) {
    tn_json_schema_state st;
    tn_json_schema_init(&st, s);
    const size_t n = strlen(doc);
    const size_t got = tn_json_schema_feed(&st, doc, n);
    CHECKF(got == refused_at, "%s: taken up to %zu, expected %zu", doc, got, refused_at);
    if (refused_at == n)
        CHECKF(tn_json_schema_complete(&st), "%s: not complete", doc);
}

#define WHOLE(s, doc) expect_doc(s, doc, strlen(doc))

static void test_any_ref(void) {
    tn_json_schema *s = compile(order);
    if (s) {
        const char *ok = "{\"owner\":\"x\",\"address\":{\"city\":\"B\"},\"items\":[{\"name\":"
                         "\"n\",\"qty\":null},{\"qty\":2,\"name\":\"m\"}],\"tag\":\"b\"}";
        WHOLE(s, ok);
        WHOLE(s, "{\"address\":null,\"items\":[],\"owner\":\"\",\"tag\":true}");
        WHOLE(s, "{\"tag\":-3,\"address\":null,\"items\":[],\"owner\":\"\"}");
        expect_doc(s, "{\"address\":[", 11);         /* neither branch is an array */
        expect_doc(s, "{\"address\":{\"town\"", 13); /* Address has no "town" */
        expect_doc(s, "{\"address\":{}", 12);        /* Address requires "city" */
        expect_doc(s, "{\"items\":[{\"name\":\"n\",\"qty\":1.5", 29);
        expect_doc(s, "{\"items\":[null", 10);
        expect_doc(s, "{\"tag\":\"c\"", 8);
        expect_doc(s, "{\"tag\":false", 7);
        walk(order, s, 11, 500);
        tn_json_schema_free(s);
    }
    s = compile(tree);
    if (s) {
        const char *ok = "{\"value\":1,\"children\":[{\"children\":[],\"value\":2},{\"value\":3,"
                         "\"children\":[{\"value\":4,\"children\":[]}]}]}";
        WHOLE(s, ok);
        expect_doc(s, "{\"value\":1,\"children\":[{}", 24);
        walk(tree, s, 12, 500);
        tn_json_schema_free(s);
    }
    s = compile(list);
    if (s) {
        /* 15 links open: the 16th level's "next" can only be null, and
         * its optional "child" cannot be written. */
        char doc[1024];
        size_t n = 0;
        for (int i = 0; i < TN_JSON_SCHEMA_MAX_DEPTH - 1; i++)
            n += (size_t)snprintf(doc + n, sizeof doc - n, "{\"v\":%d,\"next\":", i);
        const size_t deep = n;
        n += (size_t)snprintf(doc + n, sizeof doc - n, "{\"v\":0,\"next\":{");
        expect_doc(s, doc, n - 1);
        n = deep + (size_t)snprintf(doc + deep, sizeof doc - deep, "{\"v\":0,\"c");
        expect_doc(s, doc, n - 1);
        n = deep + (size_t)snprintf(doc + deep, sizeof doc - deep, "{\"v\":0,\"next\":null}");
        for (int i = 0; i < TN_JSON_SCHEMA_MAX_DEPTH - 1; i++)
            doc[n++] = '}';
        doc[n] = '\0';
        expect_doc(s, doc, n);
        walk(list, s, 13, 500);
        tn_json_schema_free(s);
    }

    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/properties/b\"},"
            "\"b\":{\"type\":\"null\"}}}",
            "\"$ref\": \"#/properties/b\" is not supported");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":"
            "\"https://example.com/s.json\"}}}",
            "\"$ref\": \"https://example.com/s.json\" is not supported");
    REFUSED("{\"type\":\"object\",\"$defs\":{\"A\":{\"type\":\"object\",\"properties\":{\"b\":"
            "{\"type\":\"null\"}}}},\"properties\":{\"a\":{\"$ref\":\"#/$defs/A/properties/b\"}}}",
            "is not supported: only");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/B\"}}}",
            "\"$ref\": \"#/$defs/B\" names no schema of the top level's \"$defs\" (schema at "
            "#/properties/a)");
    REFUSED("{\"type\":\"object\",\"$defs\":{\"A\":{\"$ref\":\"#/$defs/B\"},\"B\":{\"$ref\":"
            "\"#/$defs/A\"}},\"properties\":{\"a\":{\"$ref\":\"#/$defs/A\"}}}",
            "leads back to itself");
    REFUSED("{\"$ref\":\"#\"}", "leads back to itself");
    REFUSED("{\"type\":\"object\",\"$defs\":{\"A\":{\"type\":\"null\"}},\"properties\":{\"a\":"
            "{\"$ref\":\"#/$defs/A~\"}}}",
            "is not supported: only");
    tn_json_schema *escaped = compile(
        "{\"type\":\"object\",\"$defs\":{\"a/b~\":{\"type\":\"null\"}},\"properties\":{\"a\":"
        "{\"$ref\":\"#/$defs/a~1b~0\"}},\"required\":[\"a\"]}");
    if (escaped)
        WHOLE(escaped, "{\"a\":null}");
    tn_json_schema_free(escaped);
    REFUSED("{\"type\":\"object\",\"definitions\":{\"A\":{\"anyOf\":[{\"type\":\"null\"},"
            "{\"$ref\":\"#/definitions/A\"}]}},\"properties\":{\"a\":{\"$ref\":"
            "\"#/definitions/A\"}}}",
            "has itself for a branch");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#\"}},\"required\":[\"a\"]}",
            "no document within 16 levels");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"array\","
            "\"items\":{\"type\":\"null\"}},{\"type\":\"array\",\"items\":{\"type\":"
            "\"string\"}}]}}}",
            "arrays of different \"items\" (schema at #/properties/a)");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"integer\"},"
            "{\"enum\":[1.5]}]}}}",
            "meets a number with a fraction");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"anyOf\":"
            "[{\"type\":\"string\"}]}}}",
            "\"type\" beside \"anyOf\" is not supported (schema at #/properties/a)");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#\",\"items\":"
            "{\"type\":\"null\"}}}}",
            "\"items\" beside \"$ref\" is not supported");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[]}}}",
            "\"anyOf\" must be an array of 1 to 8 schemas");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":{}}}}",
            "\"anyOf\" must be an array of 1 to 8 schemas");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[1]}}}",
            "must be a JSON object (schema at #/properties/a/anyOf/0)");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":1}}}",
            "\"$ref\" must be a string");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\",\"$defs\":{}}}}",
            "\"$defs\" is supported only at the schema's top level (schema at #/properties/a)");
    REFUSED("{\"type\":\"object\",\"definitions\":[]}", "\"definitions\" must be an object");
    REFUSED("{\"type\":\"object\",\"$defs\":{\"A\":{\"type\":\"string\",\"pattern\":\"x\"}}}",
            "\"pattern\" is not supported (schema at #/$defs/A)");
    REFUSED("{\"anyOf\":[{\"type\":\"object\"},{\"type\":\"null\"}]}", "top level");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"allOf\":[{\"type\":\"null\"}]}}}",
            "\"allOf\" is not supported (schema at #/properties/a)");
    /* Nullable as a type list, as before. */
    tn_json_schema *nullable =
        compile("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"object\",\"null\"],"
                "\"properties\":{\"b\":{\"type\":\"integer\"}}}},\"required\":[\"a\"]}");
    if (nullable) {
        WHOLE(nullable, "{\"a\":null}");
        WHOLE(nullable, "{\"a\":{\"b\":1}}");
        tn_json_schema_free(nullable);
    }
}

/* anyOf whose branches can start alike: what Pydantic writes for
 * Union[int, float], Literal["a", "b"] | Literal["c"], Union[A, B] of
 * two models (discriminated by a "kind" const, or not) and
 * Optional[Union[A, B]]. */
static const char *const unions =
    "{\"$defs\":{\"A\":{\"type\":\"object\",\"title\":\"A\",\"properties\":{\"kind\":{\"const\":"
    "\"a\",\"type\":\"string\"},\"x\":{\"type\":\"integer\"},\"note\":{\"type\":\"string\"}},"
    "\"required\":[\"kind\",\"x\"],\"additionalProperties\":false},"
    "\"B\":{\"type\":\"object\",\"title\":\"B\",\"properties\":{\"kind\":{\"enum\":[\"b\"]},"
    "\"y\":{\"type\":\"string\"},\"note\":{\"title\":\"Note\",\"type\":\"string\"}},"
    "\"required\":[\"kind\",\"y\"],\"additionalProperties\":false},"
    "\"P\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
    "\"integer\"}},\"required\":[\"name\",\"age\"]},"
    "\"Q\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"email\":{"
    "\"type\":\"string\"}},\"required\":[\"name\"]}},"
    "\"type\":\"object\",\"properties\":{"
    "\"num\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]},"
    "\"lit\":{\"anyOf\":[{\"enum\":[\"a\",\"b\"]},{\"enum\":[\"c\",\"a\"]},{\"type\":\"null\"}]},"
    "\"str\":{\"anyOf\":[{\"type\":\"string\"},{\"enum\":[\"x\",1,true]}]},"
    "\"ab\":{\"anyOf\":[{\"$ref\":\"#/$defs/A\"},{\"$ref\":\"#/$defs/B\"}]},"
    "\"pq\":{\"anyOf\":[{\"$ref\":\"#/$defs/P\"},{\"$ref\":\"#/$defs/Q\"}]},"
    "\"opt\":{\"anyOf\":[{\"anyOf\":[{\"$ref\":\"#/$defs/A\"},{\"$ref\":\"#/$defs/B\"}]},"
    "{\"type\":\"null\"}],\"default\":null}},"
    "\"required\":[\"num\",\"ab\"],\"additionalProperties\":false}";

static void test_unions(void) {
    tn_json_schema *s = compile(unions);
    if (!s)
        return;
    WHOLE(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":2}}");
    WHOLE(s, "{\"num\":-1.5e3,\"ab\":{\"y\":\"s\",\"kind\":\"b\",\"note\":\"n\"}}");
    WHOLE(s, "{\"ab\":{\"note\":\"n\",\"x\":0,\"kind\":\"a\"},\"num\":0.25,\"lit\":\"c\"}");
    WHOLE(s, "{\"num\":1,\"ab\":{\"kind\":\"b\",\"y\":\"\"},\"lit\":null,\"str\":\"zz\"}");
    WHOLE(s, "{\"num\":1,\"ab\":{\"kind\":\"b\",\"y\":\"\"},\"str\":1,\"opt\":null}");
    WHOLE(s, "{\"num\":1,\"ab\":{\"kind\":\"b\",\"y\":\"\"},\"str\":true,\"opt\":{\"kind\":\"a\","
             "\"x\":1}}");
    WHOLE(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":1},\"pq\":{\"name\":\"n\",\"email\":\"e\"}}");
    WHOLE(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":1},\"pq\":{\"name\":\"n\"}}");
    WHOLE(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":1},\"pq\":{\"age\":3,\"name\":\"n\"}}");
    /* The first key or value that only one branch has decides. */
    expect_doc(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"y", 27);
    expect_doc(s, "{\"num\":1,\"ab\":{\"x\":1,\"kind\":\"b", 29);
    expect_doc(s, "{\"num\":1,\"ab\":{\"y\":\"\",\"kind\":\"a", 30);
    expect_doc(s, "{\"num\":1,\"ab\":{\"kind\":\"a\"}", 25); /* A requires "x" */
    expect_doc(s, "{\"num\":1,\"ab\":{\"kind\":\"c", 23);
    expect_doc(s, "{\"num\":1,\"ab\":{\"x\":1,\"y", 22);    /* no branch has both */
    expect_doc(s, "{\"num\":1,\"ab\":{\"note\":\"\"}", 24); /* both require "kind" */
    expect_doc(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":1},\"pq\":{\"age\":3,\"email", 48);
    expect_doc(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":1},\"pq\":{\"age\":3}", 46);
    expect_doc(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":1},\"lit\":\"d", 40);
    expect_doc(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":1},\"str\":2", 39);
    expect_doc(s, "{\"num\":1,\"ab\":{\"kind\":\"a\",\"x\":1},\"str\":f", 39);
    expect_doc(s, "{\"num\":\"", 7);
    walk(unions, s, 21, 600);
    tn_json_schema_free(s);

    /* An anyOf kept as it was (its branches start apart) inside one that
     * is merged keeps all its values. */
    static const char *const nested =
        "{\"type\":\"object\",\"properties\":{\"d\":{\"anyOf\":[{\"anyOf\":[{\"anyOf\":[{"
        "\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"null\"}},\"required\":[\"x\"]},"
        "{\"type\":\"null\"}]},{\"type\":\"string\"}]},{\"type\":\"null\"}]}},\"required\":"
        "[\"d\"]}";
    s = compile(nested);
    if (s) {
        WHOLE(s, "{\"d\":{\"x\":null}}");
        WHOLE(s, "{\"d\":null}");
        WHOLE(s, "{\"d\":\"s\"}");
        expect_doc(s, "{\"d\":1", 5);
        walk(nested, s, 22, 200);
        tn_json_schema_free(s);
    }

    /* Whole numbers of an enum (1.0, 15e-1 is not one, 150e-1 is) are the
     * integer branch's; the rest of the enum stays. */
    s = compile("{\"type\":\"object\",\"properties\":{\"i\":{\"anyOf\":[{\"type\":"
                "\"integer\"},{\"enum\":[1.0,150e-1,\"x\"]}]}},\"required\":[\"i\"]}");
    if (s) {
        WHOLE(s, "{\"i\":15}");
        WHOLE(s, "{\"i\":\"x\"}");
        expect_doc(s, "{\"i\":1.", 6);
        tn_json_schema_free(s);
    }
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"integer\"},"
            "{\"enum\":[15e-1]}]}}}",
            "meets a number with a fraction");

    /* Shared properties that disagree otherwise than in an enum or const
     * value cannot be followed in lockstep: refused by name. */
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"object\","
            "\"properties\":{\"v\":{\"type\":\"string\"}}},{\"type\":\"object\",\"properties\":"
            "{\"v\":{\"type\":\"integer\"}}}]}}}",
            "\"v\" (schema at #/properties/a)");
}

/* Pydantic v2's model_json_schema() of a discriminated union, as its own
 * tests write it out: Pet = Annotated[Union[Cat, Dog, Lizard],
 * Field(discriminator="pet_type")], and Model(pet: Sequence[Pet], n: int). */
static const char *const pets =
    "{\"$defs\":{\"Cat\":{\"properties\":{\"pet_type\":{\"const\":\"cat\",\"title\":\"Pet "
    "Type\"},\"meows\":{\"title\":\"Meows\",\"type\":\"integer\"}},\"required\":[\"pet_type\","
    "\"meows\"],\"title\":\"Cat\",\"type\":\"object\"},"
    "\"Dog\":{\"properties\":{\"pet_type\":{\"const\":\"dog\",\"title\":\"Pet Type\"},"
    "\"barks\":{\"title\":\"Barks\",\"type\":\"number\"}},\"required\":[\"pet_type\","
    "\"barks\"],\"title\":\"Dog\",\"type\":\"object\"},"
    "\"Lizard\":{\"properties\":{\"pet_type\":{\"enum\":[\"reptile\",\"lizard\"],\"title\":"
    "\"Pet Type\",\"type\":\"string\"},\"scales\":{\"title\":\"Scales\",\"type\":\"boolean\"}},"
    "\"required\":[\"pet_type\",\"scales\"],\"title\":\"Lizard\",\"type\":\"object\"}},"
    "\"properties\":{\"pet\":{\"items\":{\"discriminator\":{\"mapping\":{\"cat\":"
    "\"#/$defs/Cat\",\"dog\":\"#/$defs/Dog\",\"lizard\":\"#/$defs/Lizard\",\"reptile\":"
    "\"#/$defs/Lizard\"},\"propertyName\":\"pet_type\"},\"oneOf\":[{\"$ref\":\"#/$defs/Cat\"},"
    "{\"$ref\":\"#/$defs/Dog\"},{\"$ref\":\"#/$defs/Lizard\"}]},\"title\":\"Pet\",\"type\":"
    "\"array\"},\"n\":{\"title\":\"N\",\"type\":\"integer\"}},\"required\":[\"pet\",\"n\"],"
    "\"title\":\"Model\",\"type\":\"object\"}";

/* oneOf: taken where no value can match two branches (then it is anyOf
 * exactly), refused by name where two may overlap. */
static void test_one_of(void) {
    tn_json_schema *s = compile(pets);
    if (s) {
        WHOLE(s, "{\"pet\":[{\"pet_type\":\"cat\",\"meows\":3},{\"barks\":1.5,\"pet_type\":"
                 "\"dog\"},{\"pet_type\":\"lizard\",\"scales\":true}],\"n\":1}");
        WHOLE(s, "{\"n\":0,\"pet\":[]}");
        expect_doc(s, "{\"pet\":[{\"pet_type\":\"cat\",\"b", 27); /* a Cat does not bark */
        expect_doc(s, "{\"pet\":[{\"pet_type\":\"cow", 22);
        expect_doc(s, "{\"pet\":[{\"pet_type\":\"dog\"}", 25); /* Dog requires "barks" */
        expect_doc(s, "{\"pet\":[{\"meows\":1,\"pet_type\":\"d", 31);
        walk(pets, s, 31, 500);
        tn_json_schema_free(s);
    }
    /* The same union as one property, not a list of them. */
    static const char *const pet =
        "{\"$defs\":{\"Cat\":{\"properties\":{\"pet_type\":{\"const\":\"cat\",\"title\":\"Pet "
        "Type\"}},\"required\":[\"pet_type\"],\"title\":\"Cat\",\"type\":\"object\"},\"Dog\":{"
        "\"properties\":{\"pet_type\":{\"const\":\"dog\",\"title\":\"Pet Type\"}},\"required\":"
        "[\"pet_type\"],\"title\":\"Dog\",\"type\":\"object\"},\"Lizard\":{\"properties\":{"
        "\"pet_type\":{\"enum\":[\"reptile\",\"lizard\"],\"title\":\"Pet Type\"}},\"required\":"
        "[\"pet_type\"],\"title\":\"Lizard\",\"type\":\"object\"}},\"properties\":{\"pet\":{"
        "\"discriminator\":{\"mapping\":{\"cat\":\"#/$defs/Cat\",\"dog\":\"#/$defs/Dog\","
        "\"lizard\":\"#/$defs/Lizard\",\"reptile\":\"#/$defs/Lizard\"},\"propertyName\":"
        "\"pet_type\"},\"oneOf\":[{\"$ref\":\"#/$defs/Cat\"},{\"$ref\":\"#/$defs/Dog\"},{\"$ref\":"
        "\"#/$defs/Lizard\"}],\"title\":\"Pet\"}},\"required\":[\"pet\"],\"title\":\"Model\","
        "\"type\":\"object\"}";
    s = compile(pet);
    if (s) {
        WHOLE(s, "{\"pet\":{\"pet_type\":\"reptile\"}}");
        expect_doc(s, "{\"pet\":{}", 8);
        walk(pet, s, 32, 200);
        tn_json_schema_free(s);
    }
    /* Branches of different types, enums of different values (1 and 1.0
     * are one value), objects one of which requires a key the other lacks. */
    static const char *const apart =
        "{\"type\":\"object\",\"properties\":{\"t\":{\"oneOf\":[{\"type\":\"string\"},{\"type\":"
        "[\"integer\",\"null\"]},{\"type\":\"array\",\"items\":{\"type\":\"null\"}}]},\"e\":{"
        "\"oneOf\":[{\"enum\":[1,\"a\"]},{\"enum\":[2,\"b\"]},{\"type\":\"integer\",\"enum\":"
        "[3]},{\"type\":\"number\",\"enum\":[1.5]}]},\"o\":{\"oneOf\":[{\"type\":\"object\","
        "\"properties\":{\"x\":{\"type\":\"null\"}},\"required\":[\"x\"]},{\"type\":\"object\","
        "\"properties\":{\"y\":{\"type\":\"null\"}},\"additionalProperties\":false}]}},"
        "\"required\":[\"t\",\"e\",\"o\"]}";
    s = compile(apart);
    if (s) {
        WHOLE(s, "{\"t\":\"s\",\"e\":1.5,\"o\":{\"x\":null}}");
        WHOLE(s, "{\"t\":null,\"e\":\"b\",\"o\":{}}");
        WHOLE(s, "{\"t\":[null],\"e\":3,\"o\":{\"y\":null}}");
        expect_doc(s, "{\"t\":true", 5);
        expect_doc(s, "{\"t\":1,\"e\":4", 11);
        expect_doc(s, "{\"t\":1,\"e\":2,\"o\":{\"x\":null,", 26); /* no branch has x and y */
        walk(apart, s, 33, 500);
        tn_json_schema_free(s);
    }
    /* Eight enums of 45 numbers each, none shared: every pair compared
     * (a budget per pair of values refused it before). */
    char *many = malloc(8192);
    CHECK(many != NULL);
    if (!many)
        return;
    size_t n = (size_t)sprintf(many, "{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[");
    for (int b = 0; b < 8; b++) {
        n += (size_t)sprintf(many + n, "%s{\"enum\":[", b ? "," : "");
        for (int i = 0; i < 45; i++)
            n += (size_t)sprintf(many + n, "%s%d.5", i ? "," : "", b * 45 + i);
        n += (size_t)sprintf(many + n, "]}");
    }
    sprintf(many + n, "]}},\"required\":[\"a\"]}");
    s = compile(many);
    if (s) {
        WHOLE(s, "{\"a\":359.5}");
        expect_doc(s, "{\"a\":360", 7);
        tn_json_schema_free(s);
    }
    free(many);
    /* Apart, but past the search's bounds: eight enums of 500 numbers each
     * (the enum budget). Said so, not called overlapping. */
    char *long_enums = malloc(65536);
    CHECK(long_enums != NULL);
    if (long_enums) {
        n = (size_t)sprintf(long_enums,
                            "{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[");
        for (int b = 0; b < 8; b++) {
            n += (size_t)sprintf(long_enums + n, "%s{\"enum\":[", b ? "," : "");
            for (int i = 0; i < 500; i++)
                n += (size_t)sprintf(long_enums + n, "%s%d.5", i ? "," : "", b * 500 + i);
            n += (size_t)sprintf(long_enums + n, "]}");
        }
        n += (size_t)sprintf(long_enums + n, "]}},\"required\":[\"a\"]}");
        expect_refused(long_enums, n,
                       "\"oneOf\" branches 0 and 4 could not be shown apart within the bounds "
                       "of the search"); /* 0 to 3 spent the enum budget */
        free(long_enums);
    }
    /* Two objects that recurse in step, told apart only at the end of the
     * chain: a value both took would hold a smaller one both take, down
     * to 1 or 2. Shown apart (session 51; before, the look stopped at its
     * depth bound), the refusal is then the one that holds: the objects
     * are followed in lockstep, which "a" of two schemas prevents. */
    static const char *const in_step =
        "{\"type\":\"object\",\"$defs\":{\"X\":{\"type\":\"object\",\"properties\":{"
        "\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/X\"},{\"const\":1}]}},\"required\":"
        "[\"a\"],\"additionalProperties\":false},\"Y\":{\"type\":\"object\","
        "\"properties\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/Y\"},{\"const\":2}]}},"
        "\"required\":[\"a\"],\"additionalProperties\":false}},\"properties\":{\"u\":"
        "{\"oneOf\":[{\"$ref\":\"#/$defs/X\"},{\"$ref\":\"#/$defs/Y\"}]}},\"required\":"
        "[\"u\"]}";
    expect_refused(in_step, strlen(in_step),
                   "the object branches of an \"anyOf\" must give a property they share the "
                   "same schema, or an enum or const in each; they differ at \"a\" (schema at "
                   "#/properties/u)");
    /* The same pair ending alike shares {"a": 1}: refused. */
    REFUSED("{\"type\":\"object\",\"$defs\":{\"X\":{\"type\":\"object\",\"properties\":{"
            "\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/X\"},{\"const\":1}]}},\"required\":"
            "[\"a\"],\"additionalProperties\":false},\"Y\":{\"type\":\"object\","
            "\"properties\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/Y\"},{\"enum\":[2,1.0]}]}},"
            "\"required\":[\"a\"],\"additionalProperties\":false}},\"properties\":{\"u\":"
            "{\"oneOf\":[{\"$ref\":\"#/$defs/X\"},{\"$ref\":\"#/$defs/Y\"}]}}}",
            "\"oneOf\" branches 0 and 1 may both take one value");
    /* A oneOf that is its own branch has no meaning to check: named as
     * such, not as two overlapping branches (nor as an anyOf). So is an
     * anyOf that is its own branch below a oneOf. */
    REFUSED("{\"type\":\"object\",\"$defs\":{\"S\":{\"oneOf\":[{\"type\":\"integer\"},"
            "{\"$ref\":\"#/$defs/S\"}]}},\"properties\":{\"a\":{\"$ref\":\"#/$defs/S\"}}}",
            "a \"oneOf\" has itself for a branch (through \"$ref\"): whether a value matches "
            "exactly one of its branches would depend on itself (schema at #/$defs/S)");
    REFUSED("{\"type\":\"object\",\"$defs\":{\"S\":{\"oneOf\":[{\"$ref\":\"#/$defs/S\"}]}},"
            "\"properties\":{\"a\":{\"$ref\":\"#/$defs/S\"}}}",
            "a \"oneOf\" has itself for a branch");
    REFUSED("{\"type\":\"object\",\"$defs\":{\"A\":{\"anyOf\":[{\"type\":\"null\"},"
            "{\"$ref\":\"#/$defs/A\"}]}},\"properties\":{\"a\":{\"oneOf\":[{\"type\":"
            "\"integer\"},{\"$ref\":\"#/$defs/A\"}]}}}",
            "an \"anyOf\" has itself for a branch");
    /* Overlaps: integer within number; a value in two enums (1 is 1.0);
     * the empty array; two objects that {"name": ""} satisfies both. */
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[{\"type\":\"number\"},"
            "{\"type\":\"integer\"}]}}}",
            "\"oneOf\" branches 0 and 1 may both take one value");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[{\"enum\":[\"x\",1.0]},"
            "{\"type\":\"null\"},{\"const\":1}]}}}",
            "\"oneOf\" branches 0 and 2 may both take one value");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[{\"type\":\"array\",\"items\":"
            "{\"type\":\"null\"}},{\"type\":\"array\",\"items\":{\"type\":\"string\"}}]}}}",
            "(schema at #/properties/a)");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[{\"type\":\"object\","
            "\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},"
            "\"required\":[\"name\"]},{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
            "\"string\"},\"email\":{\"type\":\"string\"}},\"required\":[\"name\"]}]}}}",
            "\"oneOf\" branches 0 and 1 may both take one value");
    /* A key one branch requires and the other lacks tells them apart only
     * where the other says "additionalProperties": false: absent, JSON
     * Schema lets it take any other key, so {"a":"x","b":"y"} (which the
     * first branch may write) is valid against both. */
    REFUSED("{\"type\":\"object\",\"properties\":{\"u\":{\"oneOf\":[{\"type\":\"object\","
            "\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"string\"}},"
            "\"required\":[\"a\"]},{\"type\":\"object\",\"properties\":{\"b\":{\"type\":"
            "\"string\"}},\"required\":[\"b\"]}]}},\"required\":[\"u\"]}",
            "\"oneOf\" branches 0 and 1 may both take one value");
    /* {} is any object to JSON Schema, {"x": null} too. */
    REFUSED("{\"type\":\"object\",\"properties\":{\"u\":{\"oneOf\":[{\"type\":\"object\"},"
            "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"null\"}},\"required\":"
            "[\"x\"]}]}}}",
            "\"oneOf\" branches 0 and 1 may both take one value");
    static const char *const closed =
        "{\"type\":\"object\",\"properties\":{\"u\":{\"oneOf\":[{\"type\":\"object\","
        "\"properties\":{\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"string\"}},"
        "\"required\":[\"a\"]},{\"type\":\"object\",\"properties\":{\"b\":{\"type\":"
        "\"string\"}},\"required\":[\"b\"],\"additionalProperties\":false}]}},"
        "\"required\":[\"u\"]}";
    s = compile(closed);
    if (s) {
        WHOLE(s, "{\"u\":{\"a\":\"x\",\"b\":\"y\"}}");
        WHOLE(s, "{\"u\":{\"b\":\"y\"}}");
        walk(closed, s, 34, 200);
        tn_json_schema_free(s);
    }
    /* Each requires a key the other does not have: apart, closed or not. */
    s = compile("{\"type\":\"object\",\"properties\":{\"u\":{\"oneOf\":[{\"type\":"
                "\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":"
                "[\"a\"]},{\"type\":\"object\",\"properties\":{\"b\":{\"type\":"
                "\"string\"}},\"required\":[\"b\"]}]}}}");
    tn_json_schema_free(s);
    /* A tree whose oneOf recurses: each branch requires a key the other,
     * closed, refuses, so no value takes both, whatever "kids" holds; told
     * apart without looking into the $ref. (At the top level it is refused
     * as not "type": "object".) */
    static const char *const tree =
        "{\"type\":\"object\",\"$defs\":{\"T\":{\"oneOf\":[{\"type\":\"object\","
        "\"properties\":{\"leaf\":{\"type\":\"integer\"}},\"required\":[\"leaf\"],"
        "\"additionalProperties\":false},{\"type\":\"object\",\"properties\":{\"kids\":{"
        "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/T\"}}},\"required\":[\"kids\"],"
        "\"additionalProperties\":false}]}},\"properties\":{\"t\":{\"$ref\":\"#/$defs/T\"}},"
        "\"required\":[\"t\"]}";
    s = compile(tree);
    if (s) {
        WHOLE(s, "{\"t\":{\"kids\":[{\"leaf\":1},{\"kids\":[]},{\"kids\":[{\"leaf\":-2}]}]}}");
        WHOLE(s, "{\"t\":{\"leaf\":0}}");
        expect_doc(s, "{\"t\":{\"kids\":[],", 15); /* a node is a leaf or has kids */
        expect_doc(s, "{\"t\":{\"kids\":[{\"leaf\":1,", 23);
        walk(tree, s, 35, 300);
        tn_json_schema_free(s);
    }
    /* The same with the tree one level down, where the oneOf is a
     * property's, and the kids optional: still told apart by "leaf". */
    static const char *const tree2 =
        "{\"type\":\"object\",\"$defs\":{\"T\":{\"oneOf\":[{\"type\":\"object\",\"properties\":"
        "{\"leaf\":{\"type\":\"string\"}},\"required\":[\"leaf\"],\"additionalProperties\":"
        "false},{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\",\"items\":"
        "{\"$ref\":\"#/$defs/T\"}},\"name\":{\"type\":\"string\"}},\"required\":[\"name\"],"
        "\"additionalProperties\":false}]}},\"properties\":{\"t\":{\"$ref\":\"#/$defs/T\"}},"
        "\"required\":[\"t\"]}";
    s = compile(tree2);
    if (s) {
        WHOLE(s, "{\"t\":{\"name\":\"r\",\"kids\":[{\"leaf\":\"x\"},{\"name\":\"\"}]}}");
        walk(tree2, s, 36, 300);
        tn_json_schema_free(s);
    }
    /* Recursive and overlapping: the first branch may write {"kids": [],
     * "leaf": 1}, which the second, open, takes too. Still refused. */
    REFUSED("{\"$defs\":{\"T\":{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"leaf\":"
            "{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":"
            "\"#/$defs/T\"}}},\"required\":[\"leaf\"]},{\"type\":\"object\","
            "\"properties\":{\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/T\"}}},"
            "\"required\":[\"kids\"]}]}},\"$ref\":\"#/$defs/T\"}",
            "\"oneOf\" branches 0 and 1 may both take one value");
    /* The discriminator must agree with the branches. */
    char *bad = malloc(strlen(pet) + 64);
    CHECK(bad != NULL);
    if (!bad)
        return;
    const char *from = strstr(pet, "\"dog\":\"#/$defs/Dog\"");
    sprintf(bad, "%.*s\"dog\":\"#/$defs/Cat\"%s", (int)(from - pet), pet,
            from + strlen("\"dog\":\"#/$defs/Dog\""));
    expect_refused(bad, strlen(bad),
                   "its \"mapping\" sends \"dog\" to \"#/$defs/Cat\", not a branch whose "
                   "\"pet_type\" takes that value (schema at #/properties/pet)");
    from = strstr(pet, "\"propertyName\":\"pet_type\"");
    sprintf(bad, "%.*s\"propertyName\":\"kind\"%s", (int)(from - pet), pet,
            from + strlen("\"propertyName\":\"pet_type\""));
    expect_refused(bad, strlen(bad), "branch 0 does not require \"kind\"");
    free(bad);
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[{\"type\":\"null\"}],"
            "\"discriminator\":\"x\"}}}",
            "\"discriminator\" must be an object");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[{\"type\":\"null\"}],"
            "\"anyOf\":[{\"type\":\"null\"}]}}}",
            "\"oneOf\" beside \"anyOf\" is not supported (schema at #/properties/a)");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\",\"discriminator\":"
            "{\"propertyName\":\"k\"}}}}",
            "\"discriminator\" is not supported (schema at #/properties/a)");
    REFUSED("{\"type\":\"object\",\"properties\":{\"a\":{\"oneOf\":[]}}}",
            "\"oneOf\" must be an array of 1 to 8 schemas");
}

/* A $ref is a URI fragment: %XX decoded, then JSON pointer's ~1 and ~0. */
static void test_ref_escapes(void) {
    static const char *const esc =
        "{\"type\":\"object\",\"$defs\":{\"a b\":{\"type\":\"null\"},\"c/d~\":{\"type\":"
        "\"string\"},\"\xc3\xa9\":{\"type\":\"boolean\"}},\"definitions\":{\"X\":{\"type\":"
        "\"integer\"}},\"properties\":{\"a\":{\"$ref\":\"#/$defs/a%20b\"},\"c\":{\"$ref\":"
        "\"#/%24defs/c%7E1d%7e0\"},\"e\":{\"$ref\":\"#/$defs/%C3%A9\"},\"x\":{\"$ref\":"
        "\"#/definitions/%58\"}},\"required\":[\"a\",\"c\",\"e\",\"x\"]}";
    tn_json_schema *s = compile(esc);
    if (s) {
        WHOLE(s, "{\"a\":null,\"c\":\"\",\"e\":true,\"x\":1}");
        expect_doc(s, "{\"a\":1", 5);
        walk(esc, s, 41, 200);
        tn_json_schema_free(s);
    }
    REFUSED("{\"type\":\"object\",\"$defs\":{\"a\":{\"type\":\"null\"}},\"properties\":{\"a\":"
            "{\"$ref\":\"#/$defs/%6\"}}}",
            "\"$ref\": \"#/$defs/%6\" has a '%' not followed by two hex digits (schema at "
            "#/properties/a)");
    REFUSED("{\"type\":\"object\",\"$defs\":{\"a\":{\"type\":\"null\"}},\"properties\":{\"a\":"
            "{\"$ref\":\"#/$defs/%zza\"}}}",
            "has a '%' not followed by two hex digits");
    /* %2F is a '/' of the pointer: a path into a definition. */
    REFUSED("{\"type\":\"object\",\"$defs\":{\"a/b\":{\"type\":\"null\"}},\"properties\":{\"a\":"
            "{\"$ref\":\"#/$defs/a%2Fb\"}}}",
            "is not supported: only");
    REFUSED("{\"type\":\"object\",\"$defs\":{\"a\":{\"type\":\"null\"}},\"properties\":{\"a\":"
            "{\"$ref\":\"#/$defs/b%20\"}}}",
            "\"$ref\": \"#/$defs/b%20\" names no schema of the top level's \"$defs\"");
}

/* A schema whose shortest document is longer than any answer should be:
 * four required properties at each of seven levels write 4^7 empty
 * objects, 147,449 bytes; six levels write 36,857. */
static void test_shortest(void) {
    for (int levels = 6; levels <= 7; levels++) {
        char text[4096];
        size_t n = (size_t)snprintf(text, sizeof text, "{\"$defs\":{");
        for (int i = 0; i < levels; i++)
            n += (size_t)snprintf(
                text + n, sizeof text - n,
                "%s\"D%d\":{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":"
                "\"#/$defs/D%d\"},\"b\":{\"$ref\":\"#/$defs/D%d\"},\"c\":{\"$ref\":"
                "\"#/$defs/D%d\"},\"d\":{\"$ref\":\"#/$defs/D%d\"}},\"required\":"
                "[\"a\",\"b\",\"c\",\"d\"]}",
                i ? "," : "", i, i + 1, i + 1, i + 1, i + 1);
        n += (size_t)snprintf(text + n, sizeof text - n,
                              ",\"D%d\":{\"type\":\"object\"}},\"type\":\"object\",\"properties\":"
                              "{\"top\":{\"$ref\":\"#/$defs/D0\"}}}",
                              levels);
        if (levels == 6) {
            tn_json_schema *s = compile(text);
            tn_json_schema_free(s);
        } else {
            /* Named: the innermost subschema over the bound. */
            expect_refused(text, n, "the schema at #/$defs/D0 needs at least 147449 bytes");
            /* Definitions no document reaches write nothing: not counted. */
            static const char *const used = "\"properties\":{\"top\":{\"$ref\":\"#/$defs/D0\"}}";
            char *at = strstr(text, used);
            memcpy(at, "\"properties\":{\"top\":{\"type\":\"null\"      }}", strlen(used));
            tn_json_schema *s = compile(text);
            tn_json_schema_free(s);
        }
    }
    /* Inline, in a branch: four required values of 36,857 bytes each. */
    char text[4096];
    size_t n = (size_t)snprintf(text, sizeof text, "{\"$defs\":{");
    for (int i = 1; i < 7; i++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "%s\"D%d\":{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":"
                              "\"#/$defs/D%d\"},\"b\":{\"$ref\":\"#/$defs/D%d\"},\"c\":{\"$ref\":"
                              "\"#/$defs/D%d\"},\"d\":{\"$ref\":\"#/$defs/D%d\"}},\"required\":"
                              "[\"a\",\"b\",\"c\",\"d\"]}",
                              i > 1 ? "," : "", i, i + 1, i + 1, i + 1, i + 1);
    n += (size_t)snprintf(
        text + n, sizeof text - n,
        ",\"D7\":{\"type\":\"object\"}},\"type\":\"object\",\"properties\":{\"items\":{"
        "\"anyOf\":[{\"type\":\"null\"},{\"type\":\"string\"},{\"type\":\"object\","
        "\"properties\":{\"a\":{\"$ref\":\"#/$defs/D1\"},\"b\":{\"$ref\":\"#/$defs/D1\"},"
        "\"c\":{\"$ref\":\"#/$defs/D1\"},\"d\":{\"$ref\":\"#/$defs/D1\"}},\"required\":"
        "[\"a\",\"b\",\"c\",\"d\"]}]}}}");
    expect_refused(text, n, "the schema at #/properties/items/anyOf/2 needs at least 147449");
}

/* A long chain of $refs is followed to its end (each chain is walked
 * once, and each name found by a binary search). */
static void test_ref_chain(void) {
    enum { CHAIN = 4000 };
    char *chain = malloc(CHAIN * 64 + 256);
    size_t n = (size_t)sprintf(chain, "{\"$defs\":{");
    for (int i = 0; i < CHAIN; i++)
        n += (size_t)sprintf(chain + n, "%s\"R%d\":{\"$ref\":\"#/$defs/R%d\"}", i ? "," : "", i,
                             i + 1);
    n += (size_t)sprintf(chain + n,
                         ",\"R%d\":{\"type\":\"null\"}},\"type\":\"object\","
                         "\"properties\":{\"a\":{\"$ref\":\"#/$defs/R0\"}},"
                         "\"required\":[\"a\"]}",
                         CHAIN);
    tn_json_schema *s = compile(chain);
    if (s) {
        WHOLE(s, "{\"a\":null}");
        expect_doc(s, "{\"a\":1", 5);
        tn_json_schema_free(s);
    }
    free(chain);
}

/* oneOf as a property: random oneOfs of branches chosen to fool the check
 * that tells them apart (integer beside 1.0 or 1e0, -0 beside 0, "\u0061"
 * beside "a", keys written with escapes, objects told apart by a required
 * key or a const, $refs and their cycles, nested anyOf and oneOf, enums of
 * null and booleans). Every oneOf that compiles is walked, and each value
 * the checker lets through must match exactly one branch by the
 * independent validator; those refused are counted, not judged. Seeded:
 * TERN_SCHEMA_SEED and TERN_SCHEMA_CASES change them for a longer run. */
static void test_one_of_random(void) {
    static const char *const branch[] = {
        "{\"type\":\"integer\"}",
        "{\"type\":\"number\"}",
        "{\"const\":1}",
        "{\"const\":1.0}",
        "{\"enum\":[1e0,2]}",
        "{\"enum\":[-0]}",
        "{\"enum\":[0,0.5]}",
        "{\"type\":\"integer\",\"enum\":[3,1.5]}",
        "{\"const\":\"a\"}",
        "{\"const\":\"\\u0061\"}",
        "{\"enum\":[\"a\\/\",\"\\u00e9\"]}",
        "{\"enum\":[\"a/\",\"b\"]}",
        "{\"enum\":[\"\\u00c3\\u00a9\",\"\\u0000\"]}",
        "{\"enum\":[null]}",
        "{\"enum\":[null,true]}",
        "{\"enum\":[false,\"true\"]}",
        "{\"type\":\"boolean\"}",
        "{\"type\":\"null\"}",
        "{\"type\":\"string\"}",
        "{\"type\":[\"string\",\"null\"]}",
        "{\"type\":[\"integer\",\"boolean\"]}",
        "{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}",
        "{\"type\":\"object\"}",
        "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},\"v\":{\"type\":\"string\"}},"
        "\"required\":[\"k\"]}",
        "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"\\u0061\"}},\"required\":[\"k\"]}",
        "{\"type\":\"object\",\"properties\":{\"\\u006b\":{\"const\":\"b\"}},\"required\":[\"k\"]}",
        "{\"type\":\"object\",\"properties\":{\"k\":{\"enum\":[\"a\",\"b\"]},\"v\":{\"type\":"
        "\"integer\"}}}",
        "{\"type\":\"object\",\"properties\":{\"k\":{\"enum\":[1]}},\"required\":[\"k\"]}",
        "{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"number\"}},\"required\":[\"k\"]}",
        "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"string\"}},\"required\":[\"v\"],"
        "\"additionalProperties\":false}",
        "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"string\"},\"w\":{\"type\":"
        "\"null\"}},\"required\":[\"w\"]}",
        "{\"type\":[\"object\",\"null\"],\"properties\":{\"w\":{\"type\":\"null\"}},\"required\":"
        "[\"w\"]}",
        /* Closed, and open with only optional keys: the extra keys JSON
         * Schema lets an open branch take. */
        "{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"}},\"additionalProperties\":"
        "false}",
        "{\"type\":\"object\",\"properties\":{\"w\":{\"type\":\"null\"},\"x\":{\"type\":"
        "\"integer\"}},\"required\":[\"x\"],\"additionalProperties\":false}",
        "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"},\"v\":{\"type\":"
        "\"string\"}}}",
        "{\"type\":\"object\",\"properties\":{\"o\":{\"oneOf\":[{\"const\":1},{\"const\":2}]}},"
        "\"required\":[\"o\"]}",
        "{\"type\":\"object\",\"properties\":{\"o\":{\"anyOf\":[{\"const\":2},{\"type\":"
        "\"string\"}]}},\"required\":[\"o\"]}",
        "{\"anyOf\":[{\"type\":\"integer\"},{\"const\":\"a\"}]}",
        "{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/K\"}]}",
        "{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}",
        "{\"oneOf\":[{\"const\":1.5},{\"type\":\"boolean\"}]}",
        "{\"$ref\":\"#/$defs/K\"}",
        "{\"$ref\":\"#/$defs/L\"}",
        "{\"$ref\":\"#/$defs/R\"}",
        "{\"$ref\":\"#/$defs/S\"}",
        "{\"$ref\":\"#/$defs/%4B\"}",
    };
    static const char defs[] =
        "\"$defs\":{\"K\":{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"}},"
        "\"required\":[\"k\"]},"
        "\"L\":{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"},\"v\":{\"type\":"
        "\"string\"}},\"required\":[\"k\"]},"
        "\"R\":{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"r\"},\"n\":{\"$ref\":"
        "\"#/$defs/R\"}},\"required\":[\"k\"]},"
        "\"S\":{\"oneOf\":[{\"type\":\"integer\"},{\"$ref\":\"#/$defs/S2\"}]},"
        "\"S2\":{\"anyOf\":[{\"enum\":[\"s\"]},{\"$ref\":\"#/$defs/K\"}]}}";
    const size_t n_branch = sizeof branch / sizeof branch[0];
    const char *e = getenv("TERN_SCHEMA_SEED");
    const uint64_t seed = e ? strtoull(e, NULL, 0) : 4949;
    e = getenv("TERN_SCHEMA_CASES");
    const int cases = e ? atoi(e) : 600;
    uint64_t rng = seed;
    int compiled = 0, refused = 0;
    const int failed_before = tn_test_failures;
    char text[8192];
    for (int k = 0; k < cases; k++) {
        size_t n = (size_t)snprintf(text, sizeof text,
                                    "{\"type\":\"object\",%s,\"properties\":{\"a\":{\"oneOf\":[",
                                    defs);
        const int m = 2 + (int)(tn_test_rand(&rng) % 3);
        for (int b = 0; b < m; b++)
            n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", b ? "," : "",
                                  branch[tn_test_rand(&rng) % n_branch]);
        snprintf(text + n, sizeof text - n, "]}},\"required\":[\"a\"]}");
        tn_error err;
        memset(&err, 0, sizeof err);
        tn_json_schema *s = NULL;
        if (tn_json_schema_compile(text, strlen(text), &s, &err) != TN_OK) {
            refused++;
            continue;
        }
        compiled++;
        walk(text, s, seed + 51 + (uint64_t)k, 20);
        tn_json_schema_free(s);
        if (tn_test_failures > failed_before) {
            fprintf(stderr, "oneOf schema: %s\n", text);
            break;
        }
    }
    fprintf(stderr, "random oneOf, seed %llu: %d compiled and walked, %d refused\n",
            (unsigned long long)seed, compiled, refused);
    CHECK(compiled > cases / 6 && refused > cases / 6);
}

int main(void) {
    test_validator();
    tn_json_schema *s = compile(people);
    if (s) {
        test_valid(s);
        test_invalid(s);
        walk(people, s, 1, 3000);
        tn_json_schema_free(s);
    }
    static const char *const more[] = {
        "{\"type\":\"object\"}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":"
        "\"array\",\"items\":{\"type\":[\"integer\",\"null\",\"boolean\"]}}}},\"required\":[\"a\"]"
        "}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[0,1,10,100,-1,\"\",\"\\u0001\"]},"
        "\"b\":{\"enum\":[1]},\"ab\":{\"const\":false},\"abc\":{\"type\":\"number\"}},"
        "\"required\":[\"a\",\"b\",\"ab\",\"abc\"]}",
    };
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
        tn_json_schema *m = compile(more[i]);
        if (m)
            walk(more[i], m, 100 + i, 1000);
        tn_json_schema_free(m);
    }
    test_unsupported();
    test_hostile();
    test_any_ref();
    test_unions();
    test_one_of();
    test_one_of_random();
    test_ref_escapes();
    test_shortest();
    test_ref_chain();
    return tn_test_finish("json-schema");
}
