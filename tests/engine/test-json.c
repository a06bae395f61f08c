/* The strict JSON reader: values, escapes, numbers, every kind of malformed
 * input (clear error, never a crash), nesting limit, and the speed on the
 * largest file Tern reads (Gemma 3's 33 MB tokenizer.json). */
#include "tn-test.h"
#include "tn-json.h"

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static tn_json_doc *parse(const char *s, size_t len, int *rc, tn_error *err) {
    tn_json_doc *doc = NULL;
    *rc = tn_json_parse(s, len, "test.json", &doc, err);
    return doc;
}

static void check_values(void) {
    static const char text[] =
        " {\"null\": null, \"t\": true, \"f\": false,\n"
        "  \"int\": -42, \"zero\": 0, \"neg0\": -0, \"frac\": 0.1, \"exp\": 1e-7, \"EXP\": 2E+3,\n"
        "  \"big\": 123456789012345678901234567890, \"i53\": 9007199254740993,\n"
        "  \"str\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"u\": \"\\u00e9\\u20AC\\ud83d\\ude00\",\n"
        "  \"nul\": \"x\\u0000y\", \"utf8\": \"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\",\n"
        "  \"arr\": [1, [2, [3, []]], {}], \"obj\": {\"k\": \"v\"}, \"dup\": 1, \"dup\": 2,\n"
        "  \"\": \"empty key\"}\r\n\t ";
    int rc;
    tn_error err = {0};
    tn_json_doc *doc = parse(text, sizeof text - 1, &rc, &err);
    CHECKF(rc == TN_OK, "%s", err.message);
    if (!doc)
        return;
    const tn_json *r = tn_json_root(doc);
    CHECK(tn_json_is(r, TN_JSON_OBJECT));
    CHECK(tn_json_count(r) == 20);
    CHECK(tn_json_is(tn_json_get(r, "null"), TN_JSON_NULL));
    CHECK(tn_json_bool(tn_json_get(r, "t"), false) == true);
    CHECK(tn_json_bool(tn_json_get(r, "f"), true) == false);
    CHECK(tn_json_bool(tn_json_get(r, "missing"), true) == true);
    int64_t i = 0;
    CHECK(tn_json_int(tn_json_get(r, "int"), &i) && i == -42);
    CHECK(tn_json_int(tn_json_get(r, "zero"), &i) && i == 0);
    CHECK(signbit(tn_json_num(tn_json_get(r, "neg0"), 1)));
    CHECK(tn_json_num(tn_json_get(r, "frac"), 0) == 0.1);
    CHECK(tn_json_num(tn_json_get(r, "exp"), 0) == 1e-7);
    CHECK(tn_json_num(tn_json_get(r, "EXP"), 0) == 2000);
    CHECK(tn_json_int(tn_json_get(r, "EXP"), &i) && i == 2000);
    CHECK(!tn_json_int(tn_json_get(r, "frac"), &i));
    CHECK(!tn_json_int(tn_json_get(r, "big"), &i)); /* beyond int64 */
    CHECK(tn_json_num(tn_json_get(r, "big"), 0) == 123456789012345678901234567890.0);
    /* Correctly rounded, not accumulated digit by digit. */
    CHECK(tn_json_num(tn_json_get(r, "i53"), 0) == 9007199254740992.0);
    const tn_json *str = tn_json_get(r, "str");
    CHECK(str && str->n == 12 && !memcmp(tn_json_str(str), "a\"b\\c/d\b\f\n\r\t", 13));
    const tn_json *u = tn_json_get(r, "u");
    CHECK(u && u->n == 9 && !strcmp(tn_json_str(u), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
    const tn_json *nul = tn_json_get(r, "nul");
    CHECK(nul && nul->n == 3 && !memcmp(tn_json_str(nul), "x\0y", 4));
    CHECK(!strcmp(tn_json_str(tn_json_get(r, "utf8")), tn_json_str(u)));
    const tn_json *arr = tn_json_get(r, "arr");
    CHECK(tn_json_count(arr) == 3);
    CHECK(tn_json_int(tn_json_at(arr, 0), &i) && i == 1);
    const tn_json *deep = tn_json_at(tn_json_at(tn_json_at(arr, 1), 1), 1);
    CHECK(tn_json_is(deep, TN_JSON_ARRAY) && tn_json_count(deep) == 0);
    CHECK(tn_json_is(tn_json_at(arr, 2), TN_JSON_OBJECT) && tn_json_count(tn_json_at(arr, 2)) == 0);
    CHECK(tn_json_at(arr, 3) == NULL);
    CHECK(!strcmp(tn_json_str(tn_json_get(tn_json_get(r, "obj"), "k")), "v"));
    CHECK(tn_json_int(tn_json_get(r, "dup"), &i) && i == 1); /* the first wins */
    CHECK(!strcmp(tn_json_str(tn_json_get(r, "")), "empty key"));
    /* Lookups tolerate NULL and wrong types. */
    CHECK(tn_json_get(NULL, "x") == NULL);
    CHECK(tn_json_get(arr, "x") == NULL);
    CHECK(tn_json_str(arr) == NULL);
    CHECK(tn_json_count(str) == 0);
    tn_json_free(doc);
    tn_json_free(NULL);

    /* Scalars at the top level. */
    static const char *scalars[] = {"0", "-1.5e3", "\"x\"", "true", "null", " [ ] "};
    for (size_t k = 0; k < sizeof scalars / sizeof scalars[0]; k++) {
        doc = parse(scalars[k], strlen(scalars[k]), &rc, &err);
        CHECKF(rc == TN_OK, "'%s': %s", scalars[k], err.message);
        tn_json_free(doc);
    }
}

static void check_invalid(void) {
    static const struct {
        const char *text;
        const char *why;
    } bad[] = {
        {"", "empty"},
        {"   ", "only whitespace"},
        {"[1,]", "trailing comma"},
        {"{\"a\":1,}", "trailing comma in object"},
        {"[1 2]", "missing comma"},
        {"{\"a\" 1}", "missing colon"},
        {"{a: 1}", "unquoted key"},
        {"{1: 1}", "number key"},
        {"['a']", "single quotes"},
        {"[1] // c", "comment"},
        {"/* c */ 1", "comment first"},
        {"01", "leading zero"},
        {"-", "lone minus"},
        {"-a", "minus letter"},
        {"1.", "no fraction digits"},
        {".5", "no integer part"},
        {"1e", "no exponent digits"},
        {"1e+", "no exponent digits after sign"},
        {"+1", "plus sign"},
        {"NaN", "NaN"},
        {"Infinity", "Infinity"},
        {"tru", "truncated true"},
        {"nul", "truncated null"},
        {"True", "capitalized"},
        {"\"abc", "unterminated string"},
        {"\"a\\", "backslash at the end"},
        {"[1, 2", "unterminated array"},
        {"{\"a\": 1", "unterminated object"},
        {"1 2", "two values"},
        {"{} x", "text after the value"},
        {"\"a\tb\"", "raw tab in a string"},
        {"\"a\nb\"", "raw newline in a string"},
        {"\"\\x41\"", "invalid escape"},
        {"\"\\u12\"", "short \\u"},
        {"\"\\u12G4\"", "bad hex"},
        {"\"\\ud800\"", "lone high surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\\ud800\\u0041\"", "high surrogate then not a low one"},
        {"\"\\ud800x\"", "high surrogate then text"},
        {"\"\xff\"", "invalid UTF-8 byte"},
        {"\"\xc3\"", "truncated UTF-8"},
        {"\"\xc0\xaf\"", "overlong UTF-8"},
        {"\"\xed\xa0\x80\"", "UTF-8 encoded surrogate"},
        {"\"\xf4\x90\x80\x80\"", "beyond U+10FFFF"},
        {"\xEF\xBB\xBF{}", "byte order mark"},
        {"[\x01]", "control byte"},
        {"{\"a\":}", "missing value"},
        {"[,]", "lone comma"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc;
        tn_error err = {0};
        tn_json_doc *doc = parse(bad[k].text, strlen(bad[k].text), &rc, &err);
        CHECKF(rc == TN_ERR_FORMAT && !doc, "%s: accepted '%s'", bad[k].why, bad[k].text);
        CHECKF(strstr(err.message, "test.json: line ") != NULL, "%s: message '%s'", bad[k].why,
               err.message);
        tn_json_free(doc);
        /* The check without a tree is the same scanner: the same refusal,
         * word for word. */
        tn_error cerr = {0};
        CHECKF(tn_json_check(bad[k].text, strlen(bad[k].text), "test.json", 0, 0, &cerr) ==
                       TN_ERR_FORMAT &&
                   !strcmp(cerr.message, err.message),
               "%s: check said '%s', parse '%s'", bad[k].why, cerr.message, err.message);
    }
    /* Position in the message: line and column of the problem. */
    int rc;
    tn_error err = {0};
    tn_json_doc *doc = parse("{\n  \"a\": [1,\n   2,]\n}", 20, &rc, &err);
    CHECKF(rc == TN_ERR_FORMAT && strstr(err.message, "line 3, column 6"), "%s", err.message);
    tn_json_free(doc);
    /* An embedded NUL is a byte like any other: invalid outside strings. */
    doc = parse("[1]\0", 4, &rc, &err);
    CHECK(rc == TN_ERR_FORMAT);
    tn_json_free(doc);
    CHECK(tn_json_parse(NULL, 0, NULL, &doc, &err) == TN_ERR_FORMAT);
    CHECK(tn_json_parse("1", 1, "x", NULL, &err) == TN_ERR_INVALID);
    CHECK(tn_json_parse_file("/nonexistent/tokenizer.json", &doc, &err) == TN_ERR_NOT_FOUND);
    CHECK(strstr(err.message, "/nonexistent/tokenizer.json") != NULL);
    /* A device is refused unread (tn_read_file), not read without end. */
    CHECK(tn_json_parse_file("/dev/zero", &doc, &err) == TN_ERR_IO);
    CHECKF(strstr(err.message, "/dev/zero is not a regular file"), "%s", err.message);
}

static void check_depth(void) {
    for (int depth = TN_JSON_MAX_DEPTH - 1; depth <= TN_JSON_MAX_DEPTH + 1; depth++) {
        size_t n = (size_t)depth * 2;
        char *s = malloc(n);
        memset(s, '[', (size_t)depth);
        memset(s + depth, ']', (size_t)depth);
        int rc;
        tn_error err = {0};
        tn_json_doc *doc = parse(s, n, &rc, &err);
        if (depth <= TN_JSON_MAX_DEPTH)
            CHECKF(rc == TN_OK, "depth %d: %s", depth, err.message);
        else
            CHECKF(rc == TN_ERR_FORMAT && strstr(err.message, "nesting"), "depth %d: %s", depth,
                   err.message);
        tn_json_free(doc);
        free(s);
    }
    /* Far deeper than any stack could recurse: refused, not a crash. */
    size_t n = 1u << 20;
    char *s = malloc(n);
    memset(s, '[', n);
    int rc;
    tn_error err = {0};
    tn_json_doc *doc = parse(s, n, &rc, &err);
    CHECK(rc == TN_ERR_FORMAT && !doc);
    for (size_t i = 0; i < n; i += 2)
        s[i] = '{', s[i + 1] = '"';
    doc = parse(s, n, &rc, &err);
    CHECK(rc == TN_ERR_FORMAT && !doc);
    free(s);
}

/* Every prefix and many random corruptions of a valid document: a defined
 * result, never a crash (the sanitizers watch). */
static void check_mutations(void) {
    static const char text[] =
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"\\u00e9\": 2},"
        " \"merges\": [\"a b\", [\"a\", \"b\"]]}, \"n\": [-1.5e-3, 0, true, null, \"\\ud83d\\ude00\"]}";
    size_t len = sizeof text - 1;
    int rc;
    tn_error err = {0};
    tn_json_doc *doc = parse(text, len, &rc, &err);
    CHECKF(rc == TN_OK, "%s", err.message);
    tn_json_free(doc);
    int ok_prefixes = 0;
    for (size_t n = 0; n < len; n++) {
        char *copy = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
        memcpy(copy, text, n);
        doc = parse(copy, n, &rc, &err);
        ok_prefixes += rc == TN_OK;
        CHECK((rc == TN_OK) == (doc != NULL));
        tn_json_free(doc);
        free(copy);
    }
    CHECK(ok_prefixes == 0); /* no proper prefix of an object is a document */
    uint64_t rng = 7;
    char *copy = malloc(len);
    for (int round = 0; round < 20000; round++) {
        memcpy(copy, text, len);
        int flips = 1 + (int)(tn_test_rand(&rng) % 4);
        for (int f = 0; f < flips; f++)
            copy[tn_test_rand(&rng) % len] = (char)tn_test_rand(&rng);
        doc = parse(copy, len, &rc, &err);
        CHECK(rc == TN_OK || rc == TN_ERR_FORMAT);
        tn_json_free(doc);
    }
    free(copy);
}

/* Decimal separators follow the C locale whatever the process locale. */
static void check_locale(void) {
    const char *locales[] = {"de_DE.UTF-8", "fr_FR.UTF-8", "C.UTF-8"};
    for (size_t k = 0; k < 3; k++) {
        if (!setlocale(LC_NUMERIC, locales[k]))
            continue;
        int rc;
        tn_error err = {0};
        tn_json_doc *doc = parse("[1.25e0, 123456789012345678.5]", 30, &rc, &err);
        CHECK(rc == TN_OK);
        CHECK(tn_json_num(tn_json_at(tn_json_root(doc), 0), 0) == 1.25);
        CHECK(tn_json_num(tn_json_at(tn_json_root(doc), 1), 0) == 123456789012345678.5);
        tn_json_free(doc);
    }
    setlocale(LC_NUMERIC, "C");
}

static void check_big_file(void) {
    const char *dir = tn_test_vocab("gemma3");
    if (!dir) {
        fprintf(stderr, "gemma3 vocabulary not fetched: no timing of a large file\n");
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    tn_json_doc *doc = NULL;
    tn_error err = {0};
    int rc = tn_json_parse_file(path, &doc, &err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    CHECKF(rc == TN_OK, "%s", err.message);
    const tn_json *model = tn_json_get(tn_json_root(doc), "model");
    CHECK(tn_json_count(tn_json_get(model, "vocab")) == 262144);
    CHECK(tn_json_count(tn_json_get(model, "merges")) == 514906);
    fprintf(stderr, "gemma3 tokenizer.json (33 MB) parsed in %.3f s\n", s);
    /* Linear time: even under the sanitizers this is a few seconds. */
    CHECKF(s < 20, "parsing took %.1f s", s);
    tn_json_free(doc);
}

/* The pre-parse nesting scan for json-glib callers: brackets inside strings
 * (escaped quotes too) do not count, the limit is inclusive, and 100,000
 * levels are refused in linear time. */
static void check_depth_scan(void) {
    const char *three = "{\"a\":[{\"b\":1}]}";
    CHECK(tn_json_depth_ok(three, strlen(three), 3));
    CHECK(!tn_json_depth_ok(three, strlen(three), 2));
    const char *quoted = "[\"[[[[\\\"[[[[\", \"{{{{\"]";
    CHECK(tn_json_depth_ok(quoted, strlen(quoted), 1));
    const char *siblings = "[[1],[2],[3],{\"x\":{}}]";
    CHECK(tn_json_depth_ok(siblings, strlen(siblings), 3));
    CHECK(!tn_json_depth_ok(siblings, strlen(siblings), 2));
    CHECK(tn_json_depth_ok("", 0, 0) && tn_json_depth_ok("1", 1, 0) && !tn_json_depth_ok("[]", 2, 0));
    /* Unbalanced closers never make room for more openers. */
    const char *closers = "]]]]]]]][[";
    CHECK(tn_json_depth_ok(closers, strlen(closers), 2) &&
          !tn_json_depth_ok(closers, strlen(closers), 1));
    size_t n = 100000;
    char *deep = malloc(n);
    if (deep) {
        memset(deep, '[', n);
        CHECK(!tn_json_depth_ok(deep, n, 128));
        CHECK(tn_json_depth_ok(deep, n, (unsigned)n));
        free(deep);
    }
}

/* A number's text as written, for printing it exactly (chat.c's Gemma 4
 * tool arguments); NULL for anything else. */
static void check_number_text(void) {
    static const char text[] = "[123456789012345678901234567890, -0, 1.10, 2E+3, \"7\"]";
    int rc;
    tn_error err = {0};
    tn_json_doc *doc = parse(text, sizeof text - 1, &rc, &err);
    CHECKF(rc == TN_OK, "%s", err.message);
    const tn_json *a = tn_json_root(doc);
    static const char *const want[] = {"123456789012345678901234567890", "-0", "1.10", "2E+3"};
    for (size_t i = 0; i < 4; i++) {
        size_t len = 0;
        const char *t = tn_json_number_text(tn_json_at(a, i), text, sizeof text - 1, &len);
        CHECKF(t && len == strlen(want[i]) && !memcmp(t, want[i], len), "number %zu: %.*s", i,
               t ? (int)len : 4, t ? t : "NULL");
    }
    size_t len = 0;
    CHECK(!tn_json_number_text(tn_json_at(a, 4), text, sizeof text - 1, &len));
    CHECK(!tn_json_number_text(a, text, sizeof text - 1, &len));
    CHECK(!tn_json_number_text(tn_json_at(a, 1), text, 3, &len)); /* past the text given */
    CHECK(!tn_json_number_text(NULL, text, sizeof text - 1, &len));
    tn_json_free(doc);
}

/* tn_json_check, the pre-parse check for json-glib's callers: what
 * json-glib takes and should not (C's escapes, bytes that are no UTF-8,
 * numbers beyond a double), the caller's nesting limit, and the two
 * optional refusals. Each refusal says where and what. */
static int check_text(const char *s, size_t len, unsigned depth, unsigned flags, tn_error *err) {
    memset(err, 0, sizeof *err);
    return tn_json_check(s, len, "answer.json", depth, flags, err);
}

static void expect_refused(const char *s, size_t len, unsigned depth, unsigned flags,
                           const char *where, const char *what) {
    tn_error err;
    int rc = check_text(s, len, depth, flags, &err);
    CHECKF(rc == TN_ERR_FORMAT && err.code == TN_ERR_FORMAT, "'%.40s' accepted (%d)", s, rc);
    char head[64];
    snprintf(head, sizeof head, "answer.json: %s: ", where);
    CHECKF(strstr(err.message, head) == err.message && strstr(err.message, what),
           "'%.40s': message '%s' (wanted '%s' ... '%s')", s, err.message, head, what);
}

#define REFUSED(lit, depth, flags, where, what) \
    expect_refused(lit, sizeof lit - 1, depth, flags, where, what)

static void check_pre_parse(void) {
    const unsigned all = TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS;
    tn_error err;
    /* What json-glib turns into bytes of any value. */
    REFUSED("{\"name\": \"\\101\"}", 0, 0, "line 1, column 11", "invalid escape '\\1'");
    REFUSED("{\"name\": \"ok\\377\"}", 0, 0, "line 1, column 13", "invalid escape '\\3'");
    REFUSED("[\"\\x41\"]", 0, 0, "line 1, column 3", "invalid escape '\\x'");
    REFUSED("[\"\\0\"]", 0, 0, "line 1, column 3", "JSON has only");
    REFUSED("[\"a\xff\"]", 0, 0, "line 1, column 4", "invalid UTF-8 byte 0xFF");
    REFUSED("[\"\xc0\x80\"]", 0, 0, "line 1, column 3", "invalid UTF-8 byte 0xC0"); /* overlong NUL */
    REFUSED("[\"\xe0\x80\xaf\"]", 0, 0, "line 1, column 3", "invalid UTF-8"); /* overlong '/' */
    REFUSED("[\"\xed\xb0\x80\"]", 0, 0, "line 1, column 3", "invalid UTF-8"); /* a surrogate */
    REFUSED("[\"\\ud83d\"]", 0, 0, "line 1, column 3", "high surrogate");
    REFUSED("[\"\\ude00x\"]", 0, 0, "line 1, column 3", "lone low surrogate");
    REFUSED("{\"\\ud83d\": 1}", 0, 0, "line 1, column 3", "high surrogate"); /* in a key */
    /* Numbers: beyond a double is refused when asked, a long exact one
     * never. */
    REFUSED("{\"n\":\n 1e999}", 0, TN_JSON_NO_HUGE_NUMBERS, "line 2, column 2", "number too large");
    REFUSED("[-1.5E+400]", 0, all, "line 1, column 2", "number too large");
    CHECK(check_text("[-1.5E+400]", 11, 0, TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL, &err) == TN_OK);
    /* Whole numbers beyond int64, which json-glib wraps modulo 2^64 (a chat
     * file's "version": 99999999999999999999 read as -1): refused when asked,
     * the int64 range itself and non-integers kept. */
    {
        static const char *const huge[] = {"[9223372036854775808]", "[-9223372036854775809]",
                                           "{\"version\": 99999999999999999999}",
                                           "[18446744073709551617]"};
        static const char *const fine[] = {"[9223372036854775807]", "[-9223372036854775808]",
                                           "[12345678901234567890.5]", "[1e30]", "[-0]",
                                           "[999999999999999999]"};
        for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
            CHECKF(check_text(huge[i], strlen(huge[i]), 0, TN_JSON_NO_HUGE_INTEGERS, &err) ==
                           TN_ERR_FORMAT &&
                       strstr(err.message, "whole number too large"),
                   "%s: %s", huge[i], err.message);
            CHECKF(check_text(huge[i], strlen(huge[i]), 0, all, &err) == TN_OK, "%s: %s",
                   huge[i], err.message);
        }
        for (size_t i = 0; i < sizeof fine / sizeof *fine; i++)
            CHECKF(check_text(fine[i], strlen(fine[i]), 0, TN_JSON_NO_HUGE_INTEGERS, &err) ==
                       TN_OK,
                   "%s: %s", fine[i], err.message);
    }
    {
        char big[400];
        memset(big, '9', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        CHECKF(check_text(big, strlen(big) - 100, 0, all, &err) == TN_OK, "%s", err.message);
        CHECK(check_text(big, strlen(big), 0, all, &err) == TN_ERR_FORMAT &&
              strstr(err.message, "number too large"));
        CHECK(check_text(big, strlen(big), 0, 0, &err) == TN_OK);
        /* tn_json_parse takes it, as the tokenizer files always were. */
        tn_json_doc *doc = NULL;
        CHECK(tn_json_parse(big, strlen(big), "x", &doc, &err) == TN_OK);
        CHECK(isinf(tn_json_num(tn_json_root(doc), 0)));
        tn_json_free(doc);
    }
    CHECKF(check_text("[1e-999, 123456789012345678901234567890, -0]", 44, 0, all, &err) == TN_OK,
           "%s", err.message);
    /* Empty and truncated. */
    REFUSED("", 0, 0, "line 1, column 1", "empty document");
    REFUSED(" \n ", 0, 0, "line 2, column 2", "empty document");
    REFUSED("{\"a\": [1, 2", 0, 0, "line 1, column 7", "'[' is never closed");
    REFUSED("{\"a\": \"tex", 0, 0, "line 1, column 7", "unterminated string");
    REFUSED("{\"a\": tru", 0, 0, "line 1, column 7", "unexpected character 't'");
    REFUSED("{\"a\":", 0, 0, "line 1, column 6", "unexpected end of input");
    CHECK(tn_json_check(NULL, 0, NULL, 0, 0, &err) == TN_ERR_FORMAT &&
          !strncmp(err.message, "JSON: line 1, column 1: empty document", 38));
    CHECK(tn_json_check(NULL, 3, "x", 0, 0, &err) == TN_ERR_INVALID);
    /* The nesting limit: the caller's, inclusive; 0 is 64; never past 512. */
    char deep[2 * 600];
    for (unsigned d = 1; d <= 600; d++) {
        memset(deep, '[', d);
        memset(deep + d, ']', d);
        const unsigned limits[] = {0, 1, 32, 64, 512, 100000};
        for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
            unsigned lim = limits[k] ? limits[k] : TN_JSON_CHECK_DEPTH;
            if (lim > 512)
                lim = 512;
            int rc = check_text(deep, 2 * d, limits[k], 0, &err);
            if (d <= lim) {
                CHECKF(rc == TN_OK, "depth %u, limit %u: %s", d, limits[k], err.message);
            } else {
                char want[64];
                snprintf(want, sizeof want, "nesting deeper than %u levels", lim);
                CHECKF(rc == TN_ERR_FORMAT && strstr(err.message, want), "depth %u, limit %u: %s",
                       d, limits[k], err.message);
            }
        }
    }
    REFUSED("{\"a\": {\"b\": [[1]]}}", 3, 0, "line 1, column 14", "nesting deeper than 3 levels");
    {
        /* Far past any limit, in objects: refused, not a crash. */
        size_t n = 1u << 20;
        char *s = malloc(n);
        for (size_t i = 0; i + 5 <= n; i += 5)
            memcpy(s + i, "{\"a\":", 5);
        CHECK(check_text(s, n - n % 5, 100000, all, &err) == TN_ERR_FORMAT &&
              strstr(err.message, "nesting deeper than 512 levels"));
        free(s);
    }
    /* Duplicate keys: refused only when asked, naming the key and where its
     * second appearance is; "\u0061" is "a"; the same key in two objects,
     * or nested, is no repeat. */
    static const char dup[] = "{\"model\": \"x\",\n \"list\": [{\"a\": 1}, {\"a\": 2}],\n"
                              " \"\\u006dodel\": \"y\"}";
    CHECKF(check_text(dup, sizeof dup - 1, 0, TN_JSON_NO_NUL, &err) == TN_OK, "%s", err.message);
    REFUSED(dup, 0, TN_JSON_NO_DUPLICATE_KEYS, "line 3, column 2",
            "the key \"model\" appears more than once in the same object");
    check_text(dup, sizeof dup - 1, 0, all, &err);
    CHECKF(err.format && !strcmp(err.format, "%s: line %ld, column %ld: the key \"%s\" appears "
                                               "more than once in the same object") &&
               err.n_args == 4,
           "translatable: %s", err.format ? err.format : "(none)");
    static const char nested_ok[] = "{\"a\": {\"a\": {\"a\": 1}}, \"b\": [{\"a\": 1, \"b\": 2}]}";
    CHECKF(check_text(nested_ok, sizeof nested_ok - 1, 0, all, &err) == TN_OK, "%s", err.message);
    REFUSED("{\"a\": {\"x\": 1, \"y\": 2, \"x\": 3}}", 0, all, "line 1, column 24", "\"x\"");
    /* The first repeat in the text is the one named, whatever the order
     * of the keys. */
    REFUSED("{\"z\": 1, \"b\": 1, \"z\": 2, \"b\": 2}", 0, all, "line 1, column 18", "\"z\"");
    /* A key that differs only past a NUL, and a key cut short in the
     * message. */
    CHECK(check_text("{\"a\\u0000b\": 1, \"a\\u0000c\": 2}", 30, 0, TN_JSON_NO_DUPLICATE_KEYS,
                     &err) == TN_OK);
    {
        char s[420];
        char key[201];
        memset(key, 'k', 200);
        key[200] = '\0';
        snprintf(s, sizeof s, "{\"%s\":1,\"%s\":2}", key, key);
        CHECK(check_text(s, strlen(s), 0, all, &err) == TN_ERR_FORMAT &&
              strstr(err.message, "\"kkkkkkkkkk") && strstr(err.message, "...\" appears") &&
              strlen(err.message) < 200);
    }
    {
        /* 100,000 distinct keys, and then a repeat of one: n log n. */
        size_t n = 100000, cap = n * 12 + 32, at = 0;
        char *s = malloc(cap);
        s[at++] = '{';
        for (size_t i = 0; i < n; i++)
            at += (size_t)snprintf(s + at, cap - at, "\"%zu\":0,", i);
        at += (size_t)snprintf(s + at, cap - at, "\"77777\":1}");
        CHECK(check_text(s, at, 0, 0, &err) == TN_OK);
        CHECK(check_text(s, at, 0, all, &err) == TN_ERR_FORMAT && strstr(err.message, "\"77777\""));
        free(s);
    }
    /* NUL: refused only when asked, in a value or a key. */
    CHECK(check_text("[\"a\\u0000\"]", 11, 0, TN_JSON_NO_DUPLICATE_KEYS, &err) == TN_OK);
    REFUSED("[\"a\\u0000\"]", 0, TN_JSON_NO_NUL, "line 1, column 4", "NUL");
    REFUSED("{\"k\\u0000\": 1}", 0, all, "line 1, column 4", "NUL");
    /* A raw NUL byte is never JSON. */
    REFUSED("[\"a\0\"]", 0, 0, "line 1, column 4", "control character U+0000");
    /* Everything JSON has passes with every refusal asked for. */
    static const char good[] =
        "{\"s\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00 \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\","
        " \"n\": [0, -1, 1.5e300, 2E-3], \"b\": [true, false, null], \"o\": {}, \"e\": []}";
    CHECKF(check_text(good, sizeof good - 1, 0, all, &err) == TN_OK, "%s", err.message);
}

/* tn_json_check_head, the check of a file's first bytes (a chat's first
 * 4 KiB, before a save replaces it): every cut of a valid text is a valid
 * head, however it splits a string, a character, an escape, a number or a
 * literal, and the members read whole, closed, are a valid text; what a
 * head's bytes already break (a key twice, a leading zero, a bad escape,
 * an overlong character, a whole number past int64, a BOM) is refused
 * there, as tn_json_check refuses the whole text. */
static void check_head(void) {
    const unsigned all = TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS |
                         TN_JSON_NO_HUGE_INTEGERS;
    static const char *const valid[] = {
        "{\"format\": \"tern-chat\", \"version\": 1, \"t\": \"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"
        "\\u00e9\\n\", \"n\": [0, -12.5e+3, 99999999999999999999.5, true, false, null], "
        "\"o\": {\"a\": {\"b\": []}}, \"z\": 7}",
        "[1, \"x\", {\"k\": -0.0}]",
        "  {\"a\" : 1 ,\n \"b\":\"\" }  ",
        /* A key of an inner object again in the one around it (a chat's
         * message and its stats both have "drafted"): no repeat. */
        "{\"a\": {\"a\": 1, \"b\": {\"b\": [{\"a\": 2, \"id\": 3}]}}, \"id\": [{\"id\": 0}]}",
    };
    tn_error err;
    for (size_t k = 0; k < sizeof valid / sizeof *valid; k++) {
        const char *t = valid[k];
        size_t len = strlen(t);
        for (size_t n = 0; n <= len; n++) {
            size_t end = 99;
            memset(&err, 0, sizeof err);
            int rc = tn_json_check_head(t, n, "head", 0, all, &end, &err);
            CHECKF(rc == TN_OK, "'%s' cut at %zu: %s", t, n, err.message);
            CHECKF(end <= n, "members end %zu past the cut %zu", end, n);
            if (rc == TN_OK && end > 0) {
                char closed[512];
                memcpy(closed, t, end);
                closed[end] = '}';
                CHECKF(check_text(closed, end + 1, 0, all, &err) == TN_OK,
                       "'%.*s}' (cut at %zu): %s", (int)end, closed, n, err.message);
            }
        }
    }
    /* The members read whole at one cut. */
    {
        static const char t[] = "{\"format\": \"tern-chat\", \"version\": 1, \"id\": \"ab";
        size_t end = 0;
        CHECK(tn_json_check_head(t, sizeof t - 1, NULL, 0, all, &end, &err) == TN_OK);
        CHECKF(end == strlen("{\"format\": \"tern-chat\", \"version\": 1"), "end %zu", end);
        CHECK(tn_json_check_head(t, 20, NULL, 0, all, &end, &err) == TN_OK && end == 0);
    }
    static const struct {
        const char *text, *what;
    } broken[] = {
        {"{\"format\": \"tern-chat\", \"version\": 1, \"version\": 1, \"t\": \"abc", "more than once"},
        /* The repeat's value cut: the key read whole is enough. */
        {"{\"version\": 1, \"version\": 2", "more than once"},
        {"{\"version\": 1, \"version\": ", "more than once"},
        {"{\"o\": {\"a\": 1, \"a\": [", "more than once"},
        {"{\"version\": 01, \"t\": \"", "leading zero"},
        {"{\"t\": \"\\q\", \"format\": \"tern-chat\", \"version\": 1, \"x\": \"", "invalid escape"},
        {"{\"t\": \"\\u12G", "four hex digits"},
        {"{\"n\": 99999999999999999999, \"t\": \"", "whole number too large"},
        {"{\"n\": 1e999, \"t\": \"", "number too large"},
        {"{\"t\": \"\\u0000", "NUL"},
        {"{\"t\": \"\xE0\x80", "invalid UTF-8"},
        {"{\"t\": \"\xED\xA0", "invalid UTF-8"},
        {"{\"t\": \"\xC3\x41", "invalid UTF-8"},
        {"{\"t\": trux", "unexpected character"},
        {"{\"t\": 1,, ", "expected a string key"},
        {"\xEF\xBB\xBF{\"format\": \"tern-chat\"", "byte order mark"},
        {"{\"format\": \"tern-chat\"} x", "after the end"},
    };
    for (size_t k = 0; k < sizeof broken / sizeof *broken; k++) {
        size_t end = 99;
        memset(&err, 0, sizeof err);
        int rc = tn_json_check_head(broken[k].text, strlen(broken[k].text), "head", 0, all, &end,
                                    &err);
        CHECKF(rc == TN_ERR_FORMAT && end == 0 && strstr(err.message, broken[k].what),
               "'%s': %d, '%s'", broken[k].text, rc, err.message);
    }
    /* Nesting past the limit asked for, before the cut. */
    {
        size_t end = 99;
        CHECK(tn_json_check_head("{\"a\": [[[[[", 11, NULL, 4, all, &end, &err) == TN_ERR_FORMAT);
        CHECK(tn_json_check_head("{\"a\": [[[", 9, NULL, 4, all, &end, &err) == TN_OK);
    }
    /* A whole text's errors are unchanged: running out is one there. */
    REFUSED("{\"a\": tru", 0, 0, "line 1, column 7", "unexpected character 't'");
    REFUSED("{\"a\": 1", 0, 0, "line 1, column 1", "'{' is never closed");
    REFUSED("{\"a\" ", 0, 0, "line 1, column 6", "expected ':'");
}

/* Every lead byte past ASCII with every second byte, and the third and
 * fourth at the edges of the continuation range, in a string: accepted
 * exactly when the reference reads all four bytes as characters. */
static void check_utf8_bytes(void) {
    static const unsigned char tail[] = {0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xff};
    int wrong = 0;
    for (unsigned a = 0x80; a < 0x100; a++)
        for (unsigned b = 0; b < 0x100; b++)
            for (size_t c = 0; c < sizeof tail; c++)
                for (size_t d = 0; d < sizeof tail; d++) {
                    const unsigned char seq[4] = {(unsigned char)a, (unsigned char)b, tail[c],
                                                  tail[d]};
                    char text[6] = {'"', (char)seq[0], (char)seq[1], (char)seq[2], (char)seq[3], '"'};
                    bool want = true;
                    for (size_t i = 0; i < 4 && want;) {
                        if (seq[i] < 0x80) {
                            want = seq[i] >= 0x20 && seq[i] != '"' && seq[i] != '\\';
                            i++;
                        } else {
                            size_t n = tn_test_utf8_len_reference(seq + i, 4 - i);
                            want = n != 0;
                            i += n;
                        }
                    }
                    tn_error err = {0};
                    const bool got = tn_json_check(text, sizeof text, "t", 0, 0, &err) == TN_OK;
                    if (got != want && wrong++ < 5)
                        CHECKF(0, "%02X %02X %02X %02X: accepted %d, want %d (%s)", seq[0], seq[1],
                               seq[2], seq[3], got, want, err.message);
                }
    CHECKF(wrong == 0, "%d byte sequences judged otherwise than the reference", wrong);
}

/* json-glib 1.6 writes U+001F raw in strings: escaped after it, and a
 * file written before read with TN_JSON_RAW_UNIT_SEPARATOR. */
static void check_unit_separators(void) {
    char *plain = strdup("{\"a\": \"b\\n\"}");
    size_t n = 0;
    char *same = tn_json_escape_unit_separators(plain, &n);
    CHECK(same == plain && n == strlen(plain));
    free(same);
    char *raw = strdup("{\n  \"a\": \"x\x1fy\x1f\",\n  \"\x1f\": 1\n}");
    char *fixed = tn_json_escape_unit_separators(raw, &n);
    const char *want = "{\n  \"a\": \"x\\u001fy\\u001f\",\n  \"\\u001f\": 1\n}";
    CHECKF(fixed && !strcmp(fixed, want) && n == strlen(want), "'%s'", fixed ? fixed : "(null)");
    tn_error err;
    CHECK(fixed && check_text(fixed, n, 0, 0, &err) == TN_OK);
    free(fixed);
    CHECK(tn_json_escape_unit_separators(NULL, &n) == NULL);
    REFUSED("[\"a\x1f\"]", 0, 0, "line 1, column 4", "U+001F");
    CHECK(check_text("[\"a\x1f\"]", 6, 0, TN_JSON_RAW_UNIT_SEPARATOR, &err) == TN_OK);
    /* only U+001F: the others stay refused */
    REFUSED("[\"a\x1e\"]", 0, TN_JSON_RAW_UNIT_SEPARATOR, "line 1, column 4", "U+001E");
}

/* tn_json_check_count: the objects at one level, counted by the checking
 * pass itself (a chat file's messages, app/tern-chat.c), brackets in
 * strings and in keys not among them; nothing counted for a refused text. */
static void check_count(void) {
    static const struct {
        const char *text;
        unsigned level;
        uint64_t want; /* UINT64_MAX: refused */
    } cases[] = {
        {"{\"messages\": [{\"a\": 1}, {\"b\": \"{[{\"}, {}]}", 3, 3},
        {"{\"messages\": [{\"a\": {\"deeper\": {}}}, {}]}", 3, 2},
        {"{\"messages\": [{\"a\": {\"deeper\": {}}}, {}]}", 4, 1},
        {"{\"messages\": [], \"{\": {}}", 3, 0},
        {"{\"messages\": [], \"{\": {}}", 2, 1},
        {"{\"x\": {}}", 1, 1},
        {"[{}, {}, [{}]]", 2, 2},
        {"{\"messages\": [{}, {}, {}]}", 0, 0},
        {"{\"messages\": [{}, {}, {},]}", 3, UINT64_MAX},
        {"{\"messages\": [{}, {\"a\": 1, \"a\": 2}]}", 3, UINT64_MAX},
    };
    const unsigned flags = TN_JSON_NO_DUPLICATE_KEYS;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tn_error err = {0};
        uint64_t n = 12345;
        int rc = tn_json_check_count(cases[k].text, strlen(cases[k].text), NULL, 0, flags,
                                     cases[k].level, &n, &err);
        if (cases[k].want == UINT64_MAX)
            CHECKF(rc == TN_ERR_FORMAT && n == 0 &&
                       tn_json_check(cases[k].text, strlen(cases[k].text), NULL, 0, flags, &err) ==
                           TN_ERR_FORMAT,
                   "%s at level %u: rc %d, %llu counted", cases[k].text, cases[k].level, rc,
                   (unsigned long long)n);
        else
            CHECKF(rc == TN_OK && n == cases[k].want,
                   "%s at level %u: rc %d (%s), %llu counted, want %llu", cases[k].text,
                   cases[k].level, rc, err.message, (unsigned long long)n,
                   (unsigned long long)cases[k].want);
    }
}

int main(void) {
    check_count();
    check_unit_separators();
    check_utf8_bytes();
    check_head();
    check_number_text();
    check_depth_scan();
    check_values();
    check_invalid();
    check_depth();
    check_pre_parse();
    check_mutations();
    check_locale();
    check_big_file();
    return tn_test_finish("json");
}
