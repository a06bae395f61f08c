/* The server's tool-call parser (server/tern-toolcall.c): Qwen3, Gemma 4
 * and gpt-oss answers with calls become content + calls (Qwen3's and
 * gpt-oss's arguments their own text, Gemma 4's turned into JSON); anything
 * not made exactly that way stays plain content; garbage, truncation and
 * nesting never crash; what the engine renders a call as in history parses
 * back to the same arguments.
 * And the raw member walker the request parser takes a schema's text with. */
#include "tern-toolcall.h"
#include "tern.h"
#include "tn-test.h"

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

/* Parses text as kind's answer; checks the content and the calls (name,
 * arguments pairs). */
static void expect_kind(int kind, const char *text, const char *want_content, int want_n,
                        const char *const *want) {
    char *content = (char *)"unset";
    tern_tool_call *calls = NULL;
    int n = tern_tool_calls_parse(kind, text, &content, &calls);
    bool ok = n == want_n;
    if (ok && n > 0) {
        ok = want_content ? content && !strcmp(content, want_content) : content == NULL;
        for (int i = 0; ok && i < n; i++)
            ok = !strcmp(calls[i].name, want[2 * i]) && !strcmp(calls[i].arguments, want[2 * i + 1]);
    }
    if (!ok) {
        fprintf(stderr, "\"%s\": %d calls (want %d), content \"%s\"\n", text, n, want_n,
                n > 0 && content ? content : "(none)");
        for (int i = 0; i < n; i++)
            fprintf(stderr, "  %s %s\n", calls[i].name, calls[i].arguments);
    }
    CHECKF(ok, "parse of \"%s\"", text);
    if (n > 0) {
        g_free(content);
        tern_tool_calls_free(calls, n);
    }
}

static void expect(const char *text, const char *want_content, int want_n,
                   const char *const *want) {
    expect_kind(TN_CHAT_QWEN3, text, want_content, want_n, want);
}

static void plain(const char *text) { expect(text, NULL, 0, NULL); }

/* Whether a call's arguments are what a client can read one way: strict
 * JSON with no repeated key, no \u0000, no number beyond a double. */
static bool strict_json(const char *text) {
    return text && tn_json_check(text, strlen(text), "arguments", 128,
                                 TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL |
                                     TN_JSON_NO_HUGE_NUMBERS,
                                 NULL) == TN_OK;
}

static void test_qwen3(void) {
    static const char *const weather[] = {"get_weather", "{\"city\": \"Paris\"}"};
    expect("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
           "</tool_call>",
           NULL, 1, weather);
    /* Text before the calls is content; whitespace around them is not. */
    expect("Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
           "{\"city\": \"Paris\"}}\n</tool_call>\n",
           "Let me check.\n", 1, weather);
    expect("  \n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\": \"Paris\"}}"
           "</tool_call>",
           NULL, 1, weather);
    /* The arguments' text is kept as written: spacing, key order, number
     * spellings, escapes. */
    static const char *const odd[] = {"f", "{ \"b\" : 1.0,\"a\":[1e2, \"\\u00e9\\\"}\"] }"};
    expect("<tool_call>\n{\"arguments\": { \"b\" : 1.0,\"a\":[1e2, \"\\u00e9\\\"}\"] }, "
           "\"name\": \"f\"}\n</tool_call>",
           NULL, 1, odd);
    static const char *const two[] = {"a", "{}", "b", "{\"x\": [1, {\"y\": null}]}"};
    expect("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
           "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, {\"y\": null}]}}\n"
           "</tool_call>",
           NULL, 2, two);
    /* Arguments written as a string of JSON, or left out. */
    static const char *const str[] = {"f", "{\"q\": 1}"};
    expect("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"q\\\": 1}\"}</tool_call>", NULL,
           1, str);
    static const char *const none[] = {"f", "{}"};
    expect("<tool_call>{\"name\": \"f\"}</tool_call>", NULL, 1, none);
    /* A name is a JSON string: escapes decoded, markup kept. */
    static const char *const uni[] = {"h\xc3\xa9llo <b>", "{\"s\": \"x\"}"};
    expect("<tool_call>{\"name\": \"h\\u00e9llo <b>\", \"arguments\": {\"s\": \"x\"}}"
           "</tool_call>",
           NULL, 1, uni);

    /* Not calls: plain content. */
    plain("");
    plain("Just an answer.");
    plain("I would use <tool_call> here.");
    plain("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");           /* not closed */
    plain("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call> and more"); /* after */
    plain("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>x<tool_call>"
          "{\"name\": \"g\"}</tool_call>");
    plain("<tool_call>\n{\"name\": 5, \"arguments\": {}}\n</tool_call>");
    plain("<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>");
    plain("<tool_call>\n{\"arguments\": {}}\n</tool_call>");
    plain("<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>");
    plain("<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>");
    plain("<tool_call>\n{\"name\": \"f\", \"arguments\": {}} {}\n</tool_call>");
    plain("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>");
    plain("<tool_call>\n[\"f\"]\n</tool_call>");
    plain("<tool_call></tool_call>");
    /* The first </tool_call> ends the block, even inside a string. */
    plain("<tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"</tool_call>\"}}"
          "</tool_call>");
    /* A key spelled with escapes is the same key, as any JSON reader takes
     * it (it was plain text while keys were compared as written). */
    static const char *const escaped[] = {"f", "{\"a\": 1}"};
    expect("<tool_call>{\"name\": \"f\", \"argum\\u0065nts\": {\"a\": 1}}</tool_call>", NULL, 1,
           escaped);
    /* Nested past the limit: plain, not a crash (json-glib recurses). */
    GString *deep = g_string_new("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ");
    for (int i = 0; i < 200000; i++)
        g_string_append_c(deep, '[');
    g_string_append(deep, "</tool_call>");
    plain(deep->str);
    g_string_free(deep, TRUE);
    /* What json-glib takes and JSON is not, or what has no one reading
     * (tern-toolcall.c, CALL_JSON_FLAGS): not a call, the answer stays
     * content. C's escapes ("\101" is "A" to json-glib, "\377" a byte
     * that is no UTF-8) in the arguments, the name, or arguments written
     * as a string of JSON; bytes that are no UTF-8; a lone surrogate; a
     * repeated key; \u0000 (the name was cut there); 1e999. */
    static const char *const not_json[] = {
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\\101\"}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\\377\"}}</tool_call>",
        "<tool_call>{\"name\": \"f\\101\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\\377\"}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": \\\"\\\\101\\\"}\"}"
        "</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\xff\"}}</tool_call>",
        "<tool_call>{\"name\": \"f\xc3\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\xed\xa0\x80\"}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\\ud800\"}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\\udc00x\"}}</tool_call>",
        "<tool_call>{\"name\": \"f\\ud800\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": \\\"\\\\ud800\\\"}\"}"
        "</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1, \"a\": 2}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"name\": \"g\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": {\"b\": 1, \"\\u0062\": 2}}}"
        "</tool_call>",
        "<tool_call>{\"name\": \"f\\u0000x\", \"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"x\\u0000\"}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1e999}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": -1e400}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\\x41\"}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 01}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1,]}}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"tab\there\"}}</tool_call>",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(not_json); i++)
        plain(not_json[i]);
    /* The same with JSON's own spellings: a call (the control case). */
    static const char *const spelled[] = {"f", "{\"a\": \"\\u0041\\ud83d\\ude00\", \"b\": 1e308}"};
    expect("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"\\u0041\\ud83d\\ude00\", "
           "\"b\": 1e308}}</tool_call>",
           NULL, 1, spelled);
    /* Nesting: 128 levels in all (the block's object, the arguments,
     * 126 arrays) are a call, 129 are not. */
    for (int extra = 0; extra < 2; extra++) {
        GString *d = g_string_new("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ");
        for (int i = 0; i < 126 + extra; i++)
            g_string_append_c(d, '[');
        for (int i = 0; i < 126 + extra; i++)
            g_string_append_c(d, ']');
        g_string_append(d, "}}</tool_call>");
        char *dc = NULL;
        tern_tool_call *dcalls = NULL;
        int dn = tern_tool_calls_parse(TN_CHAT_QWEN3, d->str, &dc, &dcalls);
        CHECKF(dn == (extra ? 0 : 1), "nesting %d: %d calls", 128 + extra, dn);
        if (dn > 0) {
            g_free(dc);
            tern_tool_calls_free(dcalls, dn);
        }
        g_string_free(d, TRUE);
    }

    /* Other kinds take no calls out of their answers. */
    char *c = NULL;
    tern_tool_call *calls = NULL;
    CHECK(tern_tool_calls_parse(TN_CHAT_GEMMA4, "<tool_call>{\"name\": \"f\"}</tool_call>", &c,
                                &calls) == 0);
    CHECK(tern_tool_call_marker(TN_CHAT_QWEN3) && !tern_tool_call_marker(TN_CHAT_CHATML));

    /* Garbage in a call: each parse gives calls or plain, never a crash. */
    static const char alphabet[] = "{}[]\":,0123456789 \\u<>/_tolcaname";
    uint32_t seed = 99;
    int parsed = 0;
    for (int t = 0; t < 5000; t++) {
        char g[128];
        size_t k = (size_t)snprintf(g, sizeof g,
                                    "<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": ");
        seed = seed * 1103515245u + 12345u;
        size_t len = (seed >> 16) % 6;
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            g[k++] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
        }
        snprintf(g + k, sizeof g - k, "}}</tool_call>");
        char *gc = NULL;
        tern_tool_call *gcalls = NULL;
        int n = tern_tool_calls_parse(TN_CHAT_QWEN3, g, &gc, &gcalls);
        if (n > 0) {
            parsed++;
            CHECK(strict_json(gcalls[0].arguments));
            g_free(gc);
            tern_tool_calls_free(gcalls, n);
        }
    }
    CHECKF(parsed > 0 && parsed < 5000, "garbage: %d of 5000 parsed", parsed);
}

static void raw(const char *json, const char *key, const char *want) {
    size_t s = 0, e = 0;
    bool ok = tern_json_raw_member(json, strlen(json), 0, key, &s, &e);
    CHECKF(want ? ok && e - s == strlen(want) && !memcmp(json + s, want, e - s) : !ok,
           "raw member %s of %s: %s \"%.*s\"", key, json, ok ? "found" : "none",
           ok ? (int)(e - s) : 0, ok ? json + s : "");
}

static void test_raw(void) {
    raw("{\"a\": 1, \"b\": {\"c\": [1, \"]}\"]}, \"d\": \"x\"}", "b",
        "{\"c\": [1, \"]}\"]}");
    raw("{\"a\":1.50}", "a", "1.50");
    raw("{ \"a\" : -0 , \"z\" : null }", "z", "null");
    raw("{\"a\": 1, \"a\": [2]}", "a", "[2]"); /* the last, as json-glib keeps it */
    raw("{\"k\\\"\": 1, \"k\": true}", "k", "true");
    /* Keys as read, escapes and all, the last of equal ones (json-glib's). */
    raw("{\"ab\": 1, \"a\\u0062\": 2}", "ab", "2");
    raw("{\"tool\\u0073\": [1], \"x\": 0}", "tools", "[1]");
    raw("{\"\\ud83d\\ude00\\n\\/\": 7}", "\xf0\x9f\x98\x80\n/", "7");
    raw("{\"a\\u0000b\": 5}", "a", "5");
    raw("{\"\\udc00\": 1}", "\xef\xbf\xbd", NULL);
    raw("{\"\\ud800x\": 1}", "x", NULL);
    raw("{\"a\\u00\": 1}", "a", NULL);
    raw("{}", "a", NULL);
    raw("{\"a\": 1", "a", NULL);
    raw("{\"a\": [1, 2}", "a", NULL);
    raw("{\"a\": \"unterminated}", "a", NULL);
    raw("[1]", "a", NULL);
    raw("{\"a\" 1}", "a", NULL);
    size_t s = 0, e = 0;
    const char arr[] = "[ {\"x\": 1} , [2, 3], \"s\" ]";
    CHECK(tern_json_raw_element(arr, strlen(arr), 0, 1, &s, &e) && e - s == 6 &&
          !memcmp(arr + s, "[2, 3]", 6));
    CHECK(tern_json_raw_element(arr, strlen(arr), 0, 2, &s, &e) && e - s == 3);
    CHECK(!tern_json_raw_element(arr, strlen(arr), 0, 3, &s, &e));
    CHECK(!tern_json_raw_element(arr, strlen(arr), 1, 0, &s, &e));
    /* Truncations of a document never read past its end (ASan watches). */
    const char doc[] = "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                       "\"parameters\": {\"a\": [1, {\"b\": \"\\\"]\"}]}}}]}";
    for (size_t cut = 0; cut <= strlen(doc); cut++) {
        char *t = g_strndup(doc, cut);
        size_t ts = 0, te = 0;
        bool ok = tern_json_raw_member(t, cut, 0, "tools", &ts, &te);
        CHECK(ok == (cut == strlen(doc)));
        g_free(t);
    }
}

/* True when JSON texts a and b hold the same value (object members in
 * any order). */
static bool same_json(const char *a, const char *b) {
    JsonParser *pa = json_parser_new(), *pb = json_parser_new();
    bool ok = json_parser_load_from_data(pa, a, -1, NULL) &&
              json_parser_load_from_data(pb, b, -1, NULL) &&
              json_node_equal(json_parser_get_root(pa), json_parser_get_root(pb));
    g_object_unref(pa);
    g_object_unref(pb);
    return ok;
}

/* A call rendered by the engine as it shows one in history (the template's
 * notation), cut out of the prompt from `open` to `close` inclusive,
 * parses back to the same name and arguments. */
static void round_trip(int kind, const char *name, const char *args, const char *open,
                       const char *close) {
    const tn_chat_tool_call call = {.id = "a", .name = name, .arguments = args};
    const tn_chat_message m[] = {{.role = TN_CHAT_ROLE_USER, .content = "U"},
                                 {.role = TN_CHAT_ROLE_ASSISTANT, .tool_calls = &call,
                                  .n_tool_calls = 1}};
    tn_chat_options o = tn_chat_default_options();
    o.add_generation_prompt = false;
    tn_buf b = {0};
    tn_error err = {0};
    bool ok = tn_chat_render((tn_chat_kind)kind, m, 2, &o, &b, &err) == TN_OK;
    const char *at = ok ? strstr(b.data, open) : NULL;
    const char *end = at ? strstr(at, close) : NULL;
    char *text = end ? g_strndup(at, (size_t)(end - at) + strlen(close)) : NULL;
    char *content = NULL;
    tern_tool_call *calls = NULL;
    int n = text ? tern_tool_calls_parse(kind, text, &content, &calls) : 0;
    CHECKF(n == 1 && !content && !strcmp(calls[0].name, name) &&
               same_json(calls[0].arguments, args),
           "round trip %s of %s: %d calls from \"%s\" (%s)", tn_chat_kind_name(kind), args, n,
           text ? text : "(none)", n > 0 ? calls[0].arguments : err.message);
    if (n > 0) {
        g_free(content);
        tern_tool_calls_free(calls, n);
    }
    g_free(text);
    tn_buf_free(&b);
}

/* Every prefix of text parses to no call or to want_n calls (the whole),
 * read within its bounds (ASan watches); only the whole gives calls. */
static void truncations(int kind, const char *text, int want_n) {
    const size_t len = strlen(text);
    int whole = 0, cut = 0;
    for (size_t k = 0; k <= len; k++) {
        char *t = g_strndup(text, k);
        char *content = NULL;
        tern_tool_call *calls = NULL;
        int n = tern_tool_calls_parse(kind, t, &content, &calls);
        if (n > 0) {
            g_free(content);
            tern_tool_calls_free(calls, n);
        }
        if (k == len)
            whole = n;
        else
            cut += n > 0;
        g_free(t);
    }
    CHECKF(whole == want_n && cut == 0, "truncations of %s: %d whole, %d cut parsed", text, whole,
           cut);
}

/* Random bytes from alphabet spliced into a call's arguments: calls or
 * plain content, never a crash; some parse, some not. */
static void garbage(int kind, const char *head, const char *tail, const char *alphabet,
                    uint32_t seed) {
    int parsed = 0;
    const size_t na = strlen(alphabet);
    for (int t = 0; t < 5000; t++) {
        GString *g = g_string_new(head);
        seed = seed * 1103515245u + 12345u;
        size_t len = (seed >> 16) % 8;
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            g_string_append_c(g, alphabet[(seed >> 16) % na]);
        }
        g_string_append(g, tail);
        char *gc = NULL;
        tern_tool_call *gcalls = NULL;
        int n = tern_tool_calls_parse(kind, g->str, &gc, &gcalls);
        if (n > 0) {
            parsed++;
            CHECK(gcalls[0].arguments && strict_json(gcalls[0].arguments) &&
                  g_utf8_validate(gcalls[0].name, -1, NULL));
            g_free(gc);
            tern_tool_calls_free(gcalls, n);
        }
        g_string_free(g, TRUE);
    }
    CHECKF(parsed > 0 && parsed < 5000, "garbage %s: %d of 5000 parsed", head, parsed);
}

/* Any bytes (but NUL: the answer is a C string) spliced into a call: calls
 * or plain content, never a crash or a leak (ASan watches); a call that
 * parses has a UTF-8 name and arguments a client can read one way. */
static void byte_garbage(int kind, const char *head, const char *tail, uint32_t seed) {
    for (int t = 0; t < 20000; t++) {
        GString *g = g_string_new(head);
        seed = seed * 1103515245u + 12345u;
        size_t len = (seed >> 16) % 12;
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            /* half the time a byte of JSON's syntax, else any byte */
            const char *syntax = "{}[]\":,\\u0a1e- ";
            char c = (seed >> 31) ? syntax[(seed >> 16) % strlen(syntax)]
                                  : (char)(1 + (seed >> 16) % 255);
            g_string_append_c(g, c);
        }
        g_string_append(g, tail);
        char *gc = NULL;
        tern_tool_call *gcalls = NULL;
        int n = tern_tool_calls_parse(kind, g->str, &gc, &gcalls);
        for (int i = 0; i < n; i++)
            CHECKF(strict_json(gcalls[i].arguments) && g_utf8_validate(gcalls[i].name, -1, NULL),
                   "byte garbage %s: call %d", head, i);
        if (n > 0) {
            g_free(gc);
            tern_tool_calls_free(gcalls, n);
        }
        g_string_free(g, TRUE);
    }
}

/* Qwen3 blocks under attack: cut anywhere, 1 MB strings (good, and C's
 * escapes a megabyte long), bytes anywhere. */
static void test_qwen3_attack(void) {
    truncations(TN_CHAT_QWEN3,
                "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": \"\\u00e9\"}]}}"
                "</tool_call>",
                1);
    for (int bad = 0; bad < 2; bad++) {
        GString *huge = g_string_new("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": \"");
        for (int i = 0; i < 1 << 18; i++)
            g_string_append(huge, bad ? "\\101" : "xy\\n");
        g_string_append(huge, "\"}}</tool_call>");
        char *content = NULL;
        tern_tool_call *calls = NULL;
        int n = tern_tool_calls_parse(TN_CHAT_QWEN3, huge->str, &content, &calls);
        CHECKF(n == (bad ? 0 : 1), "a 1 MB string%s: %d calls", bad ? " of \\101" : "", n);
        if (n > 0) {
            CHECK(strlen(calls[0].arguments) == (1u << 20) + 9);
            g_free(content);
            tern_tool_calls_free(calls, n);
        }
        g_string_free(huge, TRUE);
    }
    GString *name = g_string_new("<tool_call>{\"name\": \"");
    for (int i = 0; i < 1 << 20; i++)
        g_string_append_c(name, 'n');
    g_string_append(name, "\"}</tool_call>");
    char *content = NULL;
    tern_tool_call *calls = NULL;
    int n = tern_tool_calls_parse(TN_CHAT_QWEN3, name->str, &content, &calls);
    CHECK(n == 1 && strlen(calls[0].name) == 1u << 20);
    if (n > 0)
        tern_tool_calls_free(calls, n);
    g_string_free(name, TRUE);
    byte_garbage(TN_CHAT_QWEN3, "<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": \"",
                 "\"}}</tool_call>", 3);
    byte_garbage(TN_CHAT_QWEN3, "<tool_call>{\"name\": \"f\", \"arguments\": {\"k\": ",
                 "}}</tool_call>", 5);
    byte_garbage(TN_CHAT_QWEN3, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"k\\\": ",
                 "}\"}</tool_call>", 9);
}

#define G4Q "<|\"|>"

static void test_gemma4(void) {
    const int K = TN_CHAT_GEMMA4;
    CHECK(tern_tool_call_marker(K) && !strcmp(tern_tool_call_marker(K), "<|tool_call>"));
    static const char *const weather[] = {"get_weather", "{\"city\":\"Paris\",\"units\":\"metric\"}"};
    expect_kind(K, "<|tool_call>call:get_weather{city:" G4Q "Paris" G4Q ",units:" G4Q "metric" G4Q
                   "}<tool_call|>",
                NULL, 1, weather);
    /* Text (a thought block too) before the calls is content; whitespace
     * around them and the <|tool_response> Gemma 4 opens next are not. */
    static const char *const two[] = {"a", "{}", "b", "{\"x\":[1,{\"y\":null}],\"z\":null}"};
    expect_kind(K, "<|channel>thought\nhmm<channel|>Sure.\n<|tool_call>call:a{}<tool_call|>\n"
                   "<|tool_call>call:b{x:[1, {y:null}], z:None}<tool_call|><|tool_response>\n",
                "<|channel>thought\nhmm<channel|>Sure.\n", 2, two);
    /* Values: numbers as JSON spells them, booleans, nulls, nesting, empty
     * containers, strings taken as they are (quotes, backslashes, newlines,
     * control characters, markup, unicode escaped for JSON), keys between
     * <|"|> (any text), spacing after commas and colons. */
    static const char *const values[] = {
        "zoo", "{\"n\":-1.5e3,\"i\":0,\"t\":true,\"f\":false,\"e\":[],\"o\":{},"
               "\"s\":\"say \\\"hi\\\"\\n\\\\ <b>}\\t\\u0001 \u00e9\","
               "\"a b:c\":[[[]]],\"deep\":{\"k\":{\"l\":[true,\"x\"]}}}"};
    expect_kind(K, "<|tool_call>call:zoo{n:-1.5e3,i:0, t:true,f: false,e:[],o:{},s:" G4Q
                   "say \"hi\"\n\\ <b>}\t\x01 \xc3\xa9" G4Q "," G4Q "a b:c" G4Q
                   ":[[[]]],deep:{k:{l:[true," G4Q "x" G4Q "]}}}<tool_call|>",
                NULL, 1, values);
    /* Not calls: plain content. */
    static const char *const bad[] = {
        "<|tool_call>call:f{}",                              /* not closed */
        "<|tool_call>call:f{}<tool_call|> and more",         /* text after */
        "<|tool_call>call:f{}<tool_call|>x<|tool_call>call:g{}<tool_call|>",
        "<|tool_call>call:{a:1}<tool_call|>",                /* no name */
        "<|tool_call>call:f<b>{}<tool_call|>",
        "<|tool_call>call:f\n{}<tool_call|>",
        "<|tool_call>call:f<tool_call|>",                    /* no arguments */
        "<|tool_call>call:f[1]<tool_call|>",
        "<|tool_call>call:f{a:}<tool_call|>",
        "<|tool_call>call:f{a:1,}<tool_call|>",
        "<|tool_call>call:f{:1}<tool_call|>",
        "<|tool_call>call:f{a}<tool_call|>",
        "<|tool_call>call:f{a:1}}<tool_call|>",
        "<|tool_call>call:f{a:" G4Q "open}<tool_call|>",      /* unterminated string */
        "<|tool_call>call:f{a:inf}<tool_call|>",
        "<|tool_call>call:f{a:01}<tool_call|>",
        "<|tool_call>call:f{a:1.}<tool_call|>",
        "<|tool_call>call:f{a:truex}<tool_call|>",
        "<|tool_call>call:f{a:\"json\"}<tool_call|>",        /* JSON quotes are not Gemma's */
        "<|tool_call>call:f{a:[1 2]}<tool_call|>",
        "<|tool_call>call:f{a:1}<tool_call|><|tool_response>x",
        "<|tool_call>call:\xff{a:1}<tool_call|>",             /* not UTF-8 */
        "<|tool_call>call:f{a:" G4Q "\xc3" G4Q "}<tool_call|>",
        "<|tool_call>call:f{a:" G4Q "\xed\xa0\x80" G4Q "}<tool_call|>", /* a surrogate */
        "<|tool_call>call:f{a:1,a:2}<tool_call|>",          /* a repeated key */
        "<|tool_call>call:f{a:1," G4Q "a" G4Q ":2}<tool_call|>",
        "<|tool_call>call:f{o:{b:1,b:[]}}<tool_call|>",
        "<|tool_call>call:f{a:1e999}<tool_call|>",          /* beyond a double */
        "<|tool_call>call:f{a:[-2e400]}<tool_call|>",
        "<|tool_call>",
        "I would call <|tool_call> here",
        "<tool_call>{\"name\": \"f\"}</tool_call>",        /* Qwen3's */
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        expect_kind(K, bad[i], NULL, 0, NULL);
    /* Nested past the limit, and huge arguments. */
    GString *deep = g_string_new("<|tool_call>call:f{a:");
    for (int i = 0; i < 200000; i++)
        g_string_append_c(deep, '[');
    g_string_append(deep, "<tool_call|>");
    expect_kind(K, deep->str, NULL, 0, NULL);
    g_string_free(deep, TRUE);
    GString *huge = g_string_new("<|tool_call>call:f{a:" G4Q);
    for (int i = 0; i < 1 << 20; i++)
        g_string_append_c(huge, "x\"\n"[i % 3]);
    g_string_append(huge, G4Q "}<tool_call|>");
    char *content = NULL;
    tern_tool_call *calls = NULL;
    int n = tern_tool_calls_parse(K, huge->str, &content, &calls);
    CHECK(n == 1 && !content && strlen(calls[0].arguments) > (1u << 20) &&
          same_json(calls[0].arguments, calls[0].arguments));
    if (n > 0)
        tern_tool_calls_free(calls, n);
    g_string_free(huge, TRUE);
    truncations(K, "<|tool_call>call:f{a:" G4Q "x" G4Q ",b:[1,{c:None}]}<tool_call|>", 1);
    garbage(K, "<|tool_call>call:f{k:", "}<tool_call|>", "{}[]:,0123456789.eE+- tfnrulsNo<|\">_",
            7);
    byte_garbage(K, "<|tool_call>call:f{k:", "}<tool_call|>", 13);
    byte_garbage(K, "<|tool_call>call:f{k:" G4Q, G4Q "}<tool_call|>", 17);
    /* What the engine writes for a call in history parses back. */
    static const char *const args[] = {
        "{\"city\": \"Paris\", \"units\": \"metric\"}",
        "{}",
        "{\"s\": \"say \\\"hi\\\"\\n\\ttab \\\\ back <b>\", \"n\": -7, \"f\": 2.5, \"big\": 123456789012345,"
        " \"t\": true, \"no\": false, \"nil\": null, \"arr\": [1, \"two\", [3.5], {\"k\": \"v\"}, []],"
        " \"obj\": {\"b\": 1, \"A\": {\"y\": [true, null]}}, \"uni\": \"h\\u00e9llo \\u65e5\"}",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(args); i++)
        round_trip(K, "get_weather", args[i], "<|tool_call>", "<tool_call|>");
}

#define OSS_HEAD "<|start|>assistant to=functions."
#define OSS_MID "<|channel|>commentary json<|message|>"

static void test_gptoss(void) {
    const int K = TN_CHAT_GPTOSS;
    CHECK(tern_tool_call_marker(K) && !strcmp(tern_tool_call_marker(K), "<|start|>assistant to="));
    static const char *const weather[] = {"get_weather", "{\"city\":\"Paris\"}"};
    expect_kind(K, OSS_HEAD "get_weather" OSS_MID "{\"city\":\"Paris\"}<|call|>", NULL, 1,
                weather);
    /* A preamble before the call is content; the arguments are kept as
     * written (trimmed), whatever JSON they are; a header as the model
     * spells it (a constraint) is taken too. */
    static const char *const pre[] = {"f", "{ \"b\" : 1.0,\"a\":[1e2] }"};
    expect_kind(K, "Let me check. " OSS_HEAD "f" OSS_MID "\n { \"b\" : 1.0,\"a\":[1e2] } <|call|>\n",
                "Let me check. ", 1, pre);
    static const char *const other[] = {"f", "\"city=Paris\"", "g", "[1, 2]"};
    expect_kind(K, OSS_HEAD "f <|constrain|>json<|message|>\"city=Paris\"<|call|>" OSS_HEAD
                   "g" OSS_MID "[1, 2]<|call|>",
                NULL, 2, other);
    static const char *const bad[] = {
        OSS_HEAD "f" OSS_MID "{}",                             /* no <|call|>: cut off */
        OSS_HEAD "f" OSS_MID "{}<|call|> and more",
        OSS_HEAD "f" OSS_MID "{x: 1}<|call|>",                  /* not JSON */
        OSS_HEAD "f" OSS_MID "<|call|>",
        OSS_HEAD "f" OSS_MID "{} {}<|call|>",
        OSS_HEAD "f" OSS_MID "{\"s\": \"<|call|>\"}<|call|>", /* the first <|call|> ends it */
        OSS_HEAD OSS_MID "{}<|call|>",                          /* no name */
        OSS_HEAD "f\n" OSS_MID "{}<|call|>",
        OSS_HEAD "f" OSS_MID "\"\xff\"<|call|>",                /* not UTF-8 */
        OSS_HEAD "\xff" OSS_MID "{}<|call|>",
        /* What json-glib takes and JSON is not, or what has no one reading
         * (CALL_JSON_FLAGS) */
        OSS_HEAD "f" OSS_MID "{\"a\": \"\\101\"}<|call|>",
        OSS_HEAD "f" OSS_MID "\"\\377\"<|call|>",
        OSS_HEAD "f" OSS_MID "{\"a\": \"\\x41\"}<|call|>",
        OSS_HEAD "f" OSS_MID "{\"a\": \"\xed\xa0\x80\"}<|call|>",
        OSS_HEAD "f" OSS_MID "{\"a\": \"\\ud800\"}<|call|>",
        OSS_HEAD "f" OSS_MID "\"\\udc00\"<|call|>",
        OSS_HEAD "f" OSS_MID "{\"a\": 1, \"a\": 2}<|call|>",
        OSS_HEAD "f" OSS_MID "[{\"k\": 1, \"\\u006b\": 2}]<|call|>",
        OSS_HEAD "f" OSS_MID "{\"a\": \"\\u0000\"}<|call|>",
        OSS_HEAD "f" OSS_MID "{\"a\": 1e999}<|call|>",
        OSS_HEAD "f" OSS_MID "{\"a\": 01}<|call|>",
        OSS_HEAD "f" OSS_MID "{\"a\": [1,]}<|call|>",
        OSS_HEAD "f<|channel|>commentary json" OSS_HEAD "g" OSS_MID "{}<|call|>",
        "<|start|>assistant to=browser.search" OSS_MID "{}<|call|>", /* a built-in tool */
        "<|start|>assistant to=" OSS_MID "{}<|call|>",
        "<|start|>assistant to=functions",
        "I would call " OSS_HEAD "f here",
        "<|tool_call>call:f{}<tool_call|>",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        expect_kind(K, bad[i], NULL, 0, NULL);
    GString *deep = g_string_new(OSS_HEAD "f" OSS_MID "{\"a\": ");
    for (int i = 0; i < 200000; i++)
        g_string_append_c(deep, '[');
    g_string_append(deep, "<|call|>");
    expect_kind(K, deep->str, NULL, 0, NULL);
    g_string_free(deep, TRUE);
    GString *huge = g_string_new(OSS_HEAD "f" OSS_MID "{\"a\": \"");
    for (int i = 0; i < 1 << 20; i++)
        g_string_append_c(huge, 'x');
    g_string_append(huge, "\"}<|call|>");
    char *content = NULL;
    tern_tool_call *calls = NULL;
    int n = tern_tool_calls_parse(K, huge->str, &content, &calls);
    CHECK(n == 1 && !content && strlen(calls[0].arguments) == (1u << 20) + 9);
    if (n > 0)
        tern_tool_calls_free(calls, n);
    g_string_free(huge, TRUE);
    truncations(K, OSS_HEAD "f" OSS_MID "{\"a\": [1, {\"b\": null}]}<|call|>", 1);
    garbage(K, OSS_HEAD "f" OSS_MID "{\"k\": ", "}<|call|>", "{}[]\":,0123456789 tfnrul<|>",
            11);
    byte_garbage(K, OSS_HEAD "f" OSS_MID "{\"k\": \"", "\"}<|call|>", 19);
    byte_garbage(K, OSS_HEAD "f" OSS_MID "{\"k\": ", "}<|call|>", 23);
    static const char *const args[] = {
        "{\"city\": \"Paris\", \"units\": \"metric\"}",
        "{}",
        "[1, \"two\", {\"k\": null}]",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(args); i++)
        round_trip(K, "get_weather", args[i], OSS_HEAD, "<|call|>");
}

int main(void) {
    test_qwen3();
    test_qwen3_attack();
    test_gemma4();
    test_gptoss();
    test_raw();
    return tn_test_finish("serve-toolcall");
}
