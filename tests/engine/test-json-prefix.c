/* tn_json_prefix, the checker behind JSON-constrained answers: every prefix
 * of a valid JSON object is accepted, however the bytes are split, and an
 * invalid text is refused at the exact byte where it stops being the start
 * of one. */
#include "tn-test.h"

#include <string.h>

static const char *const valid[] = {
    "{}",
    " \t\r\n{ } \n",
    "{\"a\":1}",
    "{\"a\":0,\"b\":-0,\"c\":-0.5e+10,\"d\":1E-2,\"e\":12.250,\"f\":0e0,\"g\":9}",
    "{\"t\":true,\"f\":false,\"n\":null,\"l\":[true,false,null]}",
    "{\"a\":[],\"b\":{},\"c\":[[]],\"d\":[{}],\"e\":[1,[2,[3]],{\"x\":[]}]}",
    "{\"esc\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD834\\uDD1E\"}",
    "{\"lone\":\"\\ud800\",\"low\":\"\\uDC00x\"}",   /* lone surrogates are JSON syntax */
    "{\"utf8\":\"\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e\xef\xbf\xbf\xf4\x8f\xbf\xbf\"}",
    "{ \"k\" : [ 1 , 2 ] , \"\xe4\xb8\xad\" : { } }",
    "{\"\":\"\",\"a b\":\" }],:{[\"}",
    "{\"n\":[0,-1,1.5,-2.25e-3,3E+2,1e9]}",
};

/* The byte where each text stops being a prefix of a JSON object. */
static const struct {
    const char *text;
    size_t refused_at;
    const char *why;
} invalid[] = {
    {"[1]", 0, "the top level must be an object"},
    {"\"a\"", 0, "a string at the top"},
    {"x{}", 0, "a byte before the object"},
    {"{\"a\":01}", 6, "a leading zero"},
    {"{\"a\":-01}", 7, "a leading zero after the sign"},
    {"{\"a\":[1,]}", 8, "a trailing comma in an array"},
    {"{\"a\":1,}", 7, "a trailing comma in an object"},
    {"{,}", 1, "a comma first"},
    {"{\"a\":\"x\ny\"}", 7, "a bare newline in a string"},
    {"{\"a\":\"\x01\"}", 6, "a bare control character in a string"},
    {"{\"a\":\"\\x\"}", 7, "an escape JSON does not have"},
    {"{\"a\":\"\\u12G4\"}", 10, "a non-hex digit in \\u"},
    {"{\"a\":\"\xc0\x80\"}", 6, "an overlong lead byte"},
    {"{\"a\":\"\xed\xa0\x80\"}", 7, "a UTF-8 surrogate"},
    {"{\"a\":\"\xf4\x90\x80\x80\"}", 7, "beyond U+10FFFF"},
    {"{\"a\":\"\xe2\x82\"}", 8, "a character cut short"},
    {"{\"a\":\"\xff\"}", 6, "0xFF"},
    {"{\"a\":\"\x80\"}", 6, "a lone continuation byte"},
    {"{\"a\":tru e}", 8, "a broken literal"},
    {"{\"a\":nul}", 8, "a literal cut short"},
    {"{\"a\":-}", 6, "a sign without digits"},
    {"{\"a\":1.}", 7, "a point without digits"},
    {"{\"a\":1e}", 7, "an exponent without digits"},
    {"{\"a\":1e+}", 8, "an exponent sign without digits"},
    {"{\"a\":.5}", 5, "no digit before the point"},
    {"{\"a\":+1}", 5, "a plus sign"},
    {"{\"a\":1 2}", 7, "two values"},
    {"{\"a\" 1}", 5, "no colon"},
    {"{a:1}", 1, "a bare key"},
    {"{\"a\":1,\"b\"}", 10, "a key without a value"},
    {"{\"a\":1}x", 7, "text after the object"},
    {"{\"a\":1}{}", 7, "a second object"},
    {"{\"a\":[1}", 7, "a brace closing an array"},
    {"{\"a\":{\"b\":1]}", 11, "a bracket closing an object"},
    {"{\"a\":NaN}", 5, "NaN"},
    {"{\"a\":'x'}", 5, "single quotes"},
};

/* Feeds text split at every position given by the bits of split. */
static size_t feed_split(tn_json_prefix *p, const char *text, size_t n, uint64_t split) {
    size_t done = 0, start = 0;
    for (size_t i = 1; i <= n; i++) {
        if (i == n || (split >> (i % 64) & 1)) {
            const size_t got = tn_json_prefix_feed(p, text + start, i - start);
            done += got;
            if (got < i - start)
                return done;
            start = i;
        }
    }
    return done;
}

static void test_valid(void) {
    for (size_t d = 0; d < sizeof valid / sizeof *valid; d++) {
        const char *doc = valid[d];
        const size_t n = strlen(doc);
        size_t end = n; /* the byte after the closing brace */
        while (end > 0 && doc[end - 1] != '}')
            end--;
        tn_json_prefix p;
        tn_json_prefix_init(&p);
        bool every = true, complete_early = false;
        for (size_t i = 0; i < n; i++) {
            every &= tn_json_prefix_feed(&p, doc + i, 1) == 1;
            if (i + 1 < end && tn_json_prefix_complete(&p))
                complete_early = true;
        }
        CHECKF(every, "valid document %zu refused: %s", d, doc);
        CHECKF(!complete_early, "document %zu complete before its end", d);
        CHECKF(tn_json_prefix_complete(&p), "document %zu not complete: %s", d, doc);
        /* Split anywhere (a token may end inside an escape or a character). */
        uint64_t rng = 42 + d;
        for (int k = 0; k < 50; k++) {
            tn_json_prefix q;
            tn_json_prefix_init(&q);
            const uint64_t split = tn_test_rand(&rng);
            const size_t got = feed_split(&q, doc, n, split);
            CHECKF(got == n && tn_json_prefix_complete(&q),
                   "document %zu split %llx: %zu of %zu bytes", d, (unsigned long long)split, got,
                   n);
        }
    }
}

static void test_invalid(void) {
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        tn_json_prefix p;
        tn_json_prefix_init(&p);
        const size_t n = strlen(invalid[i].text);
        const size_t got = tn_json_prefix_feed(&p, invalid[i].text, n);
        CHECKF(got == invalid[i].refused_at, "%s: refused at %zu, expected %zu", invalid[i].why,
               got, invalid[i].refused_at);
        /* The refusal leaves the state where it was: the prefix goes on. */
        tn_json_prefix again;
        tn_json_prefix_init(&again);
        CHECK(tn_json_prefix_feed(&again, invalid[i].text, got) == got);
        CHECK(memcmp(&again, &p, sizeof p) == 0);
    }
}

static void test_depth(void) {
    char text[TN_JSON_PREFIX_MAX_DEPTH + 16];
    size_t n = 0;
    text[n++] = '{';
    text[n++] = '"';
    text[n++] = 'a';
    text[n++] = '"';
    text[n++] = ':';
    for (int d = 1; d < TN_JSON_PREFIX_MAX_DEPTH; d++) /* levels 2..64 */
        text[n++] = '[';
    tn_json_prefix p;
    tn_json_prefix_init(&p);
    CHECK(tn_json_prefix_feed(&p, text, n) == n);
    CHECK(p.depth == TN_JSON_PREFIX_MAX_DEPTH);
    CHECK(tn_json_prefix_feed(&p, "[", 1) == 0); /* level 65 */
    CHECK(tn_json_prefix_feed(&p, "{", 1) == 0);
    /* Closing all 64 levels again completes it. */
    for (int d = 1; d < TN_JSON_PREFIX_MAX_DEPTH; d++)
        CHECK(tn_json_prefix_feed(&p, "]", 1) == 1);
    CHECK(tn_json_prefix_feed(&p, "}", 1) == 1);
    CHECK(tn_json_prefix_complete(&p));
}

/* Whitespace runs outside strings are capped; inside them they are text. */
static void test_space(void) {
    char text[128];
    tn_json_prefix p;
    tn_json_prefix_init(&p);
    memset(text, ' ', TN_JSON_PREFIX_MAX_SPACE + 1);
    CHECK(tn_json_prefix_feed(&p, text, TN_JSON_PREFIX_MAX_SPACE + 1) ==
          TN_JSON_PREFIX_MAX_SPACE);
    CHECK(tn_json_prefix_feed(&p, "{\"a\":", 5) == 5); /* a token resets the run */
    memset(text, '\n', TN_JSON_PREFIX_MAX_SPACE);
    CHECK(tn_json_prefix_feed(&p, text, TN_JSON_PREFIX_MAX_SPACE) == TN_JSON_PREFIX_MAX_SPACE);
    CHECK(tn_json_prefix_feed(&p, "\t", 1) == 0);
    CHECK(tn_json_prefix_feed(&p, "\"", 1) == 1);
    memset(text, ' ', 100); /* in a string */
    CHECK(tn_json_prefix_feed(&p, text, 100) == 100);
    CHECK(tn_json_prefix_feed(&p, "\"}", 2) == 2);
    CHECK(tn_json_prefix_complete(&p));
    /* A number ended by whitespace counts it once. */
    tn_json_prefix_init(&p);
    CHECK(tn_json_prefix_feed(&p, "{\"a\":1 ", 7) == 7);
    CHECK(p.space == 1);
}

/* Against the engine's strict JSON reader: random edits of the valid
 * documents are whole objects to one exactly when they are to the other
 * (tn_json_check also refuses unpaired surrogate escapes, which JSON's
 * grammar allows: texts with \uD8.. to \uDF.. are left out). */
static void test_against_reader(void) {
    static const char alphabet[] = "{}[]:,\" \\\n0123456789-+.eEtrufalsn\x80\xc3\xa9\x01/bu";
    uint64_t rng = 7;
    int compared = 0, objects = 0;
    for (size_t d = 0; d < sizeof valid / sizeof *valid; d++) {
        const size_t n0 = strlen(valid[d]);
        for (int k = 0; k < 3000; k++) {
            char text[256];
            size_t n = n0 < sizeof text - 8 ? n0 : sizeof text - 8;
            memcpy(text, valid[d], n);
            for (int e = 0; e < 1 + (int)(tn_test_rand(&rng) % 3); e++) {
                const size_t at = (size_t)(tn_test_rand(&rng) % (n + 1));
                const char c = alphabet[tn_test_rand(&rng) % (sizeof alphabet - 1)];
                const int op = (int)(tn_test_rand(&rng) % 3);
                if (op == 0 && at < n) { /* replace */
                    text[at] = c;
                } else if (op == 1 && n + 1 < sizeof text) { /* insert */
                    memmove(text + at + 1, text + at, n - at);
                    text[at] = c;
                    n++;
                } else if (at < n) { /* delete */
                    memmove(text + at, text + at + 1, n - at - 1);
                    n--;
                }
            }
            bool surrogate = false;
            for (size_t i = 0; i + 3 < n; i++)
                if (text[i] == '\\' && text[i + 1] == 'u' &&
                    (text[i + 2] == 'd' || text[i + 2] == 'D') &&
                    strchr("89abcdefABCDEF", text[i + 3]))
                    surrogate = true;
            if (surrogate || memchr(text, '\0', n))
                continue;
            tn_json_prefix p;
            tn_json_prefix_init(&p);
            const bool ours = tn_json_prefix_feed(&p, text, n) == n && tn_json_prefix_complete(&p);
            size_t lead = 0;
            while (lead < n && strchr(" \t\r\n", text[lead]))
                lead++;
            const bool theirs = tn_json_check(text, n, NULL, 0, 0, NULL) == TN_OK && lead < n &&
                                text[lead] == '{';
            compared++;
            objects += theirs;
            CHECKF(ours == theirs, "document %zu edit %d: prefix checker %d, reader %d: %.*s", d,
                   k, ours, theirs, (int)n, text);
        }
    }
    CHECKF(objects > 100 && compared > 10000, "%d of %d edits were objects", objects, compared);
}

int main(void) {
    test_valid();
    test_invalid();
    test_depth();
    test_space();
    test_against_reader();
    return tn_test_finish("test-json-prefix");
}
