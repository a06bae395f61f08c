/* The server's tool-call parser (server/tern-toolcall.c): Qwen3 answers
 * with calls become content + calls with the arguments' own text; anything
 * not made exactly that way stays plain content; garbage never crashes.
 * And the raw member walker the request parser takes a schema's text with. */
#include "tern-toolcall.h"
#include "tern.h"
#include "tn-test.h"

#include <string.h>

/* Parses text; checks the content and the calls (name, arguments pairs). */
static void expect(const char *text, const char *want_content, int want_n,
                   const char *const *want) {
    char *content = (char *)"unset";
    tern_tool_call *calls = NULL;
    int n = tern_tool_calls_parse(TN_CHAT_QWEN3, text, &content, &calls);
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

static void plain(const char *text) { expect(text, NULL, 0, NULL); }

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
    plain("<tool_call>{\"name\": \"f\", \"argum\\u0065nts\": {\"a\": 1}}</tool_call>");
    /* Nested past the limit: plain, not a crash (json-glib recurses). */
    GString *deep = g_string_new("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ");
    for (int i = 0; i < 200000; i++)
        g_string_append_c(deep, '[');
    g_string_append(deep, "</tool_call>");
    plain(deep->str);
    g_string_free(deep, TRUE);

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

int main(void) {
    test_qwen3();
    test_raw();
    return tn_test_finish("serve-toolcall");
}
