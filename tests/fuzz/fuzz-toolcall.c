/* libFuzzer target for what the server reads byte by byte itself
 * (server/tern-toolcall.c): the tool calls taken out of a model's answer,
 * and the raw JSON text of a request body's members and elements.
 *
 * The first input byte picks what runs, the rest is the text:
 *   mode % 4 = 0..2: the text as an answer of Qwen3, Gemma 4 and gpt-oss
 *                    (tern_tool_calls_parse). Promises: a call has a name
 *                    (UTF-8) and arguments; Qwen3's and Gemma 4's arguments
 *                    are a JSON object (Gemma 4's written by Tern from its
 *                    own notation), gpt-oss's any JSON that parses; all
 *                    strict JSON (tn_json_check) with no repeated key, no
 *                    \u0000, no number beyond a double; the content before
 *                    the calls is a prefix of the answer.
 *   mode % 4 = 3:    the text as a request body. When json-glib accepts it,
 *                    every member of the root object (or element of the
 *                    root array) found by tern_json_raw_member/_element
 *                    parses again to what json-glib read there; a "tools"
 *                    array goes through tern_tools_parse with its raw text.
 *                    (Where json-glib's leniency takes text that Tern's
 *                    strict reader refuses, only the bounds are held.)
 * The model's answer is what a hostile prompt steers, the body what any
 * local client sends: neither may crash or read out of bounds.
 *
 * Seeds: tests/fuzz/corpus/toolcall/.
 * Run:   build-fuzz/tests/fuzz/fuzz-toolcall tests/fuzz/corpus/toolcall
 */
#include "tern-toolcall.h"
#include "tern.h"
#include "tn-json.h"
#include "fuzz-promise.h"

#include <json-glib/json-glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static JsonNode *parse(const char *text, size_t len) {
    g_autoptr(JsonParser) p = json_parser_new();
    if (!json_parser_load_from_data(p, text, (gssize)len, NULL))
        return NULL;
    JsonNode *root = json_parser_get_root(p);
    return root ? json_node_copy(root) : NULL;
}

static bool is_object_text(const char *text) {
    JsonNode *n = parse(text, strlen(text));
    const bool ok = n && JSON_NODE_HOLDS_OBJECT(n);
    if (n)
        json_node_unref(n);
    return ok;
}

static void answer(int kind, const char *text) {
    char *content = NULL;
    tern_tool_call *calls = NULL;
    const int n = tern_tool_calls_parse(kind, text, &content, &calls);
    PROMISE(n >= 0);
    if (n == 0) {
        PROMISE(!content && !calls);
        return;
    }
    PROMISE(calls != NULL);
    if (content)
        PROMISE(strncmp(text, content, strlen(content)) == 0);
    for (int i = 0; i < n; i++) {
        PROMISE(calls[i].name && calls[i].arguments);
        PROMISE(g_utf8_validate(calls[i].name, -1, NULL));
        PROMISE(tn_json_check(calls[i].arguments, strlen(calls[i].arguments), NULL, 128,
                              TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL |
                                  TN_JSON_NO_HUGE_NUMBERS,
                              NULL) == TN_OK);
        if (kind == TN_CHAT_GPTOSS) {
            JsonNode *a = parse(calls[i].arguments, strlen(calls[i].arguments));
            PROMISE(a != NULL);
            json_node_unref(a);
        } else {
            PROMISE(is_object_text(calls[i].arguments));
        }
    }
    g_free(content);
    tern_tool_calls_free(calls, n);
}

/* Where the root value's opening bracket is: after leading white space. */
static size_t root_at(const char *p, size_t n) {
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i;
}

/* json-glib also takes text that is not JSON (a number written "- .5",
 * say): there the slices are only held to the bounds. */
static void check_slice(const char *p, size_t s, size_t e, size_t n, JsonNode *want,
                        bool strict) {
    PROMISE(s < e && e <= n);
    if (!strict)
        return;
    JsonNode *got = parse(p + s, e - s);
    PROMISE(got != NULL);
    PROMISE(json_node_equal(got, want));
    json_node_unref(got);
}

static void body(const char *p, size_t n) {
    JsonNode *root = parse(p, n);
    if (!root)
        return;
    tn_json_doc *doc = NULL;
    const bool strict = tn_json_parse(p, n, "body", &doc, NULL) == 0;
    tn_json_free(doc);
    const size_t at = root_at(p, n);
    size_t s, e;
    if (JSON_NODE_HOLDS_OBJECT(root) && at < n && p[at] == '{') {
        JsonObject *o = json_node_get_object(root);
        GList *members = json_object_get_members(o);
        for (GList *m = members; m; m = m->next) {
            const char *key = m->data;
            /* Keys are matched as read, escapes and all: json-glib keeps
             * the last of two equal keys, as the scanner does ("ab" then
             * "a\u0062" gave the first one's bytes for the second's value:
             * found by this target in a 60 s run). */
            if (tern_json_raw_member(p, n, at, key, &s, &e))
                check_slice(p, s, e, n, json_object_get_member(o, key), strict);
        }
        g_list_free(members);
        JsonNode *tools = json_object_get_member(o, "tools");
        if (tools && tern_json_raw_member(p, n, at, "tools", &s, &e)) {
            char *raw = g_strndup(p + s, e - s);
            tn_chat_tool *out = NULL;
            int n_out = 0;
            char *why = NULL;
            if (!tern_tools_parse(tools, raw, &out, &n_out, &why))
                PROMISE(why != NULL);
            g_free(why);
            tern_tools_free(out, n_out);
            g_free(raw);
        }
    } else if (JSON_NODE_HOLDS_ARRAY(root) && at < n && p[at] == '[') {
        JsonArray *a = json_node_get_array(root);
        const guint len = json_array_get_length(a);
        for (guint i = 0; i <= len && i < 64; i++) {
            const bool found = tern_json_raw_element(p, n, at, i, &s, &e);
            PROMISE(!strict || found == (i < len));
            /* Past json-glib's last element only where it is lenient (the
             * promise above): bounds only, no element to ask it for. */
            if (found)
                check_slice(p, s, e, n, i < len ? json_array_get_element(a, i) : NULL,
                            strict && i < len);
        }
    }
    json_node_unref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const int mode = data[0] % 4;
    char *text = g_strndup((const char *)data + 1, size - 1);
    const size_t n = strlen(text); /* the server's texts are C strings */
    static const int kinds[3] = {TN_CHAT_QWEN3, TN_CHAT_GEMMA4, TN_CHAT_GPTOSS};
    if (mode < 3)
        answer(kinds[mode], text);
    else
        body(text, n);
    g_free(text);
    return 0;
}
