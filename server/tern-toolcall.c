/* Tool calls out of a model's answer, and raw member text of JSON bodies
 * (tern-toolcall.h). */
#include "tern-toolcall.h"

#include "tern.h"

#include <json-glib/json-glib.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ raw JSON */

static size_t skip_ws(const char *p, size_t n, size_t i) {
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    return i;
}

#define NONE SIZE_MAX /* ran off the end */

/* p[i] is '"': the index after the closing quote; NONE when there is none. */
static size_t skip_string(const char *p, size_t n, size_t i) {
    for (i++; i < n; i++) {
        if (p[i] == '\\')
            i++;
        else if (p[i] == '"')
            return i + 1;
    }
    return NONE;
}

/* The index after the value at i (after whitespace); NONE when it runs off
 * the end. Containers are skipped by counting brackets outside strings:
 * no recursion, whatever the nesting. */
static size_t skip_value(const char *p, size_t n, size_t i) {
    i = skip_ws(p, n, i);
    if (i >= n)
        return NONE;
    if (p[i] == '"')
        return skip_string(p, n, i);
    if (p[i] == '{' || p[i] == '[') {
        size_t depth = 0;
        while (i < n) {
            const char c = p[i];
            if (c == '"') {
                if ((i = skip_string(p, n, i)) == NONE)
                    return NONE;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return i + 1;
            i++;
        }
        return NONE;
    }
    const size_t from = i;
    while (i < n && !strchr(",]} \t\r\n", p[i]) && p[i])
        i++;
    return i > from ? i : NONE;
}

bool tern_json_raw_member(const char *p, size_t n, size_t at, const char *key, size_t *start,
                          size_t *end) {
    if (!p || at >= n || p[at] != '{')
        return false;
    const size_t klen = strlen(key);
    bool found = false;
    size_t i = at + 1;
    for (;;) {
        i = skip_ws(p, n, i);
        if (i < n && p[i] == '}')
            return found;
        if (i >= n || p[i] != '"')
            return false;
        const size_t ks = i + 1, after = skip_string(p, n, i);
        if (after == NONE)
            return false;
        const size_t ke = after - 1;
        i = skip_ws(p, n, after);
        if (i >= n || p[i] != ':')
            return false;
        const size_t vs = skip_ws(p, n, i + 1), ve = skip_value(p, n, vs);
        if (ve == NONE)
            return false;
        if (ke - ks == klen && !memcmp(p + ks, key, klen)) {
            *start = vs;
            *end = ve;
            found = true;
        }
        i = skip_ws(p, n, ve);
        if (i < n && p[i] == ',')
            i++;
        else if (!(i < n && p[i] == '}'))
            return false;
    }
}

bool tern_json_raw_element(const char *p, size_t n, size_t at, size_t index, size_t *start,
                           size_t *end) {
    if (!p || at >= n || p[at] != '[')
        return false;
    size_t i = at + 1;
    for (size_t k = 0;; k++) {
        i = skip_ws(p, n, i);
        if (i >= n || p[i] == ']')
            return false;
        const size_t ve = skip_value(p, n, i);
        if (ve == NONE)
            return false;
        if (k == index) {
            *start = i;
            *end = ve;
            return true;
        }
        i = skip_ws(p, n, ve);
        if (i < n && p[i] == ',')
            i++;
        else
            return false;
    }
}

/* ------------------------------------------------------------ calls */

#define QWEN3_OPEN "<tool_call>"
#define QWEN3_CLOSE "</tool_call>"

const char *tern_tool_call_marker(int kind) {
    return kind == TN_CHAT_QWEN3 ? QWEN3_OPEN : NULL;
}

void tern_tool_calls_free(tern_tool_call *calls, int n) {
    for (int i = 0; calls && i < n; i++) {
        g_free(calls[i].name);
        g_free(calls[i].arguments);
    }
    g_free(calls);
}

static bool only_space(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!g_ascii_isspace(p[i]))
            return false;
    return true;
}

/* The nesting a call's JSON may have: json-glib recurses once per level. */
#define CALL_MAX_DEPTH 128

/* One Qwen3 block's JSON, {"name": "...", "arguments": {...}}: the name and
 * the arguments' own text. Arguments that are a string holding JSON (some
 * fine-tunes write them so) are taken as that text. */
static bool qwen3_call(const char *p, size_t n, tern_tool_call *out) {
    const size_t at = skip_ws(p, n, 0);
    const size_t after = at < n && p[at] == '{' ? skip_value(p, n, at) : NONE;
    if (after == NONE || !only_space(p + after, n - after) ||
        !tn_json_depth_ok(p, n, CALL_MAX_DEPTH))
        return false;
    JsonParser *parser = json_parser_new();
    bool ok = json_parser_load_from_data(parser, p, (gssize)n, NULL);
    JsonNode *root = ok ? json_parser_get_root(parser) : NULL;
    JsonObject *o = root && JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonNode *name = o ? json_object_get_member(o, "name") : NULL;
    JsonNode *args = o ? json_object_get_member(o, "arguments") : NULL;
    ok = name && JSON_NODE_HOLDS_VALUE(name) && json_node_get_value_type(name) == G_TYPE_STRING &&
         *json_node_get_string(name);
    char *arguments = NULL;
    if (ok && args && JSON_NODE_HOLDS_OBJECT(args)) {
        size_t s, e;
        if (tern_json_raw_member(p, n, at, "arguments", &s, &e))
            arguments = g_strndup(p + s, e - s);
        else
            ok = false; /* spelled with escapes: not the model's own format */
    } else if (ok && args && JSON_NODE_HOLDS_VALUE(args) &&
               json_node_get_value_type(args) == G_TYPE_STRING) {
        const char *a = json_node_get_string(args);
        JsonParser *inner = json_parser_new();
        ok = tn_json_depth_ok(a, strlen(a), CALL_MAX_DEPTH) &&
             json_parser_load_from_data(inner, a, -1, NULL) && json_parser_get_root(inner) &&
             JSON_NODE_HOLDS_OBJECT(json_parser_get_root(inner));
        g_object_unref(inner);
        if (ok)
            arguments = g_strdup(a);
    } else if (ok && !args) {
        arguments = g_strdup("{}");
    } else {
        ok = false;
    }
    if (ok) {
        out->name = g_strdup(json_node_get_string(name));
        out->arguments = arguments;
    } else {
        g_free(arguments);
    }
    g_object_unref(parser);
    return ok;
}

static int parse_qwen3(const char *text, char **content, tern_tool_call **calls) {
    const char *first = strstr(text, QWEN3_OPEN);
    if (!first)
        return 0;
    GArray *got = g_array_new(FALSE, TRUE, sizeof(tern_tool_call));
    const char *p = first;
    bool ok = true;
    while (ok && *p) {
        const char *open = strstr(p, QWEN3_OPEN);
        if (!open) {
            ok = only_space(p, strlen(p));
            break;
        }
        if (!only_space(p, (size_t)(open - p))) {
            ok = false;
            break;
        }
        const char *body = open + strlen(QWEN3_OPEN);
        const char *close = strstr(body, QWEN3_CLOSE);
        tern_tool_call c = {0};
        if (!close || !qwen3_call(body, (size_t)(close - body), &c)) {
            ok = false;
            break;
        }
        g_array_append_val(got, c);
        p = close + strlen(QWEN3_CLOSE);
    }
    int n = (int)got->len;
    if (!ok || n == 0) {
        tern_tool_calls_free((tern_tool_call *)(void *)g_array_free(got, FALSE), n);
        return 0;
    }
    const size_t before = (size_t)(first - text);
    *content = only_space(text, before) ? NULL : g_strndup(text, before);
    *calls = (tern_tool_call *)(void *)g_array_free(got, FALSE);
    return n;
}

int tern_tool_calls_parse(int kind, const char *text, char **content, tern_tool_call **calls) {
    if (!text || !content || !calls)
        return 0;
    if (kind == TN_CHAT_QWEN3)
        return parse_qwen3(text, content, calls);
    return 0;
}
