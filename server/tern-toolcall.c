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

/* Whether the key written in p[ks, ke) (between its quotes) is `key` as
 * json-glib reads it: a body's "tool\u0073" is its "tools", and json-glib
 * keeps the last of the two; compared as written, the first one's bytes
 * went with the second one's value. A key with escapes is read by
 * json-glib itself, so that every escape, surrogate pair and \u0000 (which
 * ends its C string) means here what it means in the parsed body. */
static bool key_is(const char *p, size_t ks, size_t ke, const char *key, size_t klen) {
    if (!memchr(p + ks, '\\', ke - ks))
        return ke - ks == klen && !memcmp(p + ks, key, klen);
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    if (!json_parser_load_from_data(parser, p + ks - 1, (gssize)(ke - ks + 2), NULL))
        return false;
    const char *read = json_node_get_string(json_parser_get_root(parser));
    return read && strlen(read) == klen && !memcmp(read, key, klen);
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
        if (key_is(p, ks, ke, key, klen)) {
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

/* ------------------------------------------------------------ tools */

bool tern_json_optional_string(JsonObject *o, const char *member, const char *where, char **out,
                       char **why) {
    JsonNode *n = json_object_get_member(o, member);
    *out = NULL;
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return true;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) {
        *why = g_strdup_printf("%s.%s must be a string", where, member);
        return false;
    }
    *out = g_strdup(json_node_get_string(n));
    return true;
}

/* tools[index].function.parameters as text: raw's own bytes (so that the
 * template sees the schema's key order and number spellings, as
 * transformers would), else json-glib's writing of it. */
static char *schema_text(const char *raw, guint index, JsonNode *node) {
    const size_t n = raw ? strlen(raw) : 0;
    size_t at = n ? skip_ws(raw, n, 0) : 0;
    size_t ts, te, fs, fe, ps, pe;
    if (raw && at < n && tern_json_raw_element(raw, n, at, index, &ts, &te) && raw[ts] == '{' &&
        tern_json_raw_member(raw, n, ts, "function", &fs, &fe) && raw[fs] == '{' &&
        tern_json_raw_member(raw, n, fs, "parameters", &ps, &pe) && raw[ps] == '{')
        return g_strndup(raw + ps, pe - ps);
    JsonGenerator *g = json_generator_new();
    json_generator_set_root(g, node);
    char *text = tn_json_escape_unit_separators(json_generator_to_data(g, NULL), NULL);
    g_object_unref(g);
    return text;
}

bool tern_tools_parse(JsonNode *tools, const char *raw, tn_chat_tool **out, int *n_out,
                      char **why) {
    *out = NULL;
    *n_out = 0;
    if (!tools || !JSON_NODE_HOLDS_ARRAY(tools)) {
        *why = g_strdup("tools must be an array of {\"type\": \"function\", \"function\": "
                        "{\"name\", \"description\", \"parameters\"}}");
        return false;
    }
    JsonArray *a = json_node_get_array(tools);
    const guint n = json_array_get_length(a);
    if (n > TERN_MAX_TOOLS) {
        *why = g_strdup_printf("tools: %u tools; at most %d per request", n, TERN_MAX_TOOLS);
        return false;
    }
    if (n == 0)
        return true;
    *out = g_new0(tn_chat_tool, n);
    for (guint i = 0; i < n; i++) {
        char *at = g_strdup_printf("tools[%u]", i);
        char *fn_at = g_strdup_printf("tools[%u].function", i);
        JsonNode *e = json_array_get_element(a, i);
        JsonObject *t = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
        JsonNode *fn = t ? json_object_get_member(t, "function") : NULL;
        JsonObject *f = fn && JSON_NODE_HOLDS_OBJECT(fn) ? json_node_get_object(fn) : NULL;
        JsonNode *pn = f ? json_object_get_member(f, "parameters") : NULL;
        char *type = NULL, *name = NULL, *desc = NULL, *params = NULL;
        bool ok = true;
        if (!t) {
            *why = g_strdup_printf("%s must be an object", at);
            ok = false;
        } else if (!tern_json_optional_string(t, "type", at, &type, why)) {
            ok = false;
        } else if (!type || strcmp(type, "function")) {
            *why = g_strdup_printf("%s.type must be \"function\"", at);
            ok = false;
        } else if (!f) {
            *why = g_strdup_printf("%s must be an object", fn_at);
            ok = false;
        } else if (!tern_json_optional_string(f, "name", fn_at, &name, why) ||
                   !tern_json_optional_string(f, "description", fn_at, &desc, why)) {
            ok = false;
        } else if (!name || !*name) {
            *why = g_strdup_printf("%s.name is required", fn_at);
            ok = false;
        } else if (pn && !JSON_NODE_HOLDS_NULL(pn) && !JSON_NODE_HOLDS_OBJECT(pn)) {
            *why = g_strdup_printf("%s.parameters must be an object (a JSON schema)", fn_at);
            ok = false;
        } else if (pn && JSON_NODE_HOLDS_OBJECT(pn)) {
            params = schema_text(raw, i, pn);
        }
        (*out)[i] = (tn_chat_tool){.name = name, .description = desc, .parameters = params};
        *n_out = (int)i + 1;
        g_free(type);
        g_free(at);
        g_free(fn_at);
        if (!ok)
            return false;
    }
    return true;
}

void tern_tools_free(tn_chat_tool *tools, int n) {
    for (int i = 0; tools && i < n; i++) {
        g_free((char *)tools[i].name);
        g_free((char *)tools[i].description);
        g_free((char *)tools[i].parameters);
    }
    g_free(tools);
}

/* ------------------------------------------------------------ calls */

#define QWEN3_OPEN "<tool_call>"
#define QWEN3_CLOSE "</tool_call>"

#define GEMMA4_OPEN "<|tool_call>call:"
#define GEMMA4_CLOSE "<tool_call|>"
#define GEMMA4_QUOTE "<|\"|>"
/* What the session writes for a gpt-oss call (tn_harmony with tools): the
 * harmony message as the template shows a call in history. */
#define OSS_OPEN "<|start|>assistant to="
#define OSS_FUNCTIONS "functions."
#define OSS_MESSAGE "<|message|>"
#define OSS_CALL "<|call|>"

const char *tern_tool_call_marker(int kind) {
    switch (kind) {
    case TN_CHAT_QWEN3: return QWEN3_OPEN;
    case TN_CHAT_GEMMA4: return "<|tool_call>";
    case TN_CHAT_GPTOSS: return OSS_OPEN;
    default: return NULL;
    }
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

/* What a call's JSON must be besides strict JSON. The model wrote it for a
 * client to act on, and the client reads it with whatever parser it has: a
 * repeated key has no one meaning (json-glib, Python and JavaScript keep
 * the last, a cJSON lookup finds the first, serde refuses it in a struct),
 * \u0000 ends a C string (json-glib cut the name there), and a number
 * beyond a double is refused by Go's and Rust's parsers. A client's own
 * schemas may carry the first and the last (the server's body check allows
 * them); the model's arguments have no such reason. */
#define CALL_JSON_FLAGS (TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS)

/* Whether n bytes at p are JSON a call may carry: tn_json_check, before
 * json-glib, which takes C's escapes ("\101"; "\377", a byte that is no
 * UTF-8, then reached clients in the name or in arguments given as a
 * string), a lone low surrogate, "01" and raw control characters in
 * strings, and recurses once per level. Arguments are passed on as the
 * model wrote them: what json-glib let through went to clients as invalid
 * JSON. A call that is not stays the answer's text, as any call not
 * written the model's way does. */
static bool call_json_ok(const char *p, size_t n) {
    return tn_json_check(p, n, "tool call", CALL_MAX_DEPTH, CALL_JSON_FLAGS, NULL) == TN_OK;
}

/* One Qwen3 block's JSON, {"name": "...", "arguments": {...}}: the name and
 * the arguments' own text. Arguments that are a string holding JSON (some
 * fine-tunes write them so) are taken as that text. */
static bool qwen3_call(const char *p, size_t n, tern_tool_call *out) {
    const size_t at = skip_ws(p, n, 0);
    const size_t after = at < n && p[at] == '{' ? skip_value(p, n, at) : NONE;
    if (after == NONE || !only_space(p + after, n - after) || !call_json_ok(p, n))
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
            ok = false; /* json-glib read a member the scanner did not: refused */
    } else if (ok && args && JSON_NODE_HOLDS_VALUE(args) &&
               json_node_get_value_type(args) == G_TYPE_STRING) {
        const char *a = json_node_get_string(args);
        JsonParser *inner = json_parser_new();
        ok = call_json_ok(a, strlen(a)) && json_parser_load_from_data(inner, a, -1, NULL) &&
             json_parser_get_root(inner) &&
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

/* ------------------------------------------------------------ Gemma 4 */

/* Gemma 4 writes a call's arguments in its own notation (the template's
 * format_argument, what engine/chat.c renders a call in history with):
 * {key:value,...} with bare keys (or keys between <|"|>), strings between
 * <|"|> and <|"|> taken as they are, numbers, true, false, null (None as
 * Python prints it), lists [a,b]. g4_value turns one value into JSON text;
 * false on anything else. */
typedef struct {
    const char *p;
    size_t n, i;
} g4_in;

static bool g4_lit(g4_in *in, const char *lit) {
    const size_t k = strlen(lit);
    if (in->n - in->i < k || memcmp(in->p + in->i, lit, k))
        return false;
    in->i += k;
    return true;
}

static void g4_ws(g4_in *in) { in->i = skip_ws(in->p, in->n, in->i); }

/* A JSON string for p[0..n): quotes, backslashes and control characters
 * escaped. */
static void json_quote(GString *out, const char *p, size_t n) {
    g_string_append_c(out, '"');
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\')
            g_string_append_printf(out, "\\%c", c);
        else if (c == '\n')
            g_string_append(out, "\\n");
        else if (c == '\t')
            g_string_append(out, "\\t");
        else if (c == '\r')
            g_string_append(out, "\\r");
        else if (c < 0x20 || c == 0x7f)
            g_string_append_printf(out, "\\u%04x", c);
        else
            g_string_append_c(out, (char)c);
    }
    g_string_append_c(out, '"');
}

/* <|"|>TEXT<|"|>: TEXT as a JSON string. */
static bool g4_string(g4_in *in, GString *out) {
    if (!g4_lit(in, GEMMA4_QUOTE))
        return false;
    const char *end = g_strstr_len(in->p + in->i, (gssize)(in->n - in->i), GEMMA4_QUOTE);
    if (!end)
        return false;
    json_quote(out, in->p + in->i, (size_t)(end - (in->p + in->i)));
    in->i = (size_t)(end - in->p) + strlen(GEMMA4_QUOTE);
    return true;
}

/* A JSON number as RFC 8259 spells it. */
static bool g4_number(g4_in *in, GString *out) {
    const char *p = in->p;
    size_t i = in->i;
    const size_t from = i;
    if (i < in->n && p[i] == '-')
        i++;
    if (i >= in->n || !g_ascii_isdigit(p[i]))
        return false;
    if (p[i] == '0')
        i++;
    else
        while (i < in->n && g_ascii_isdigit(p[i]))
            i++;
    if (i < in->n && p[i] == '.') {
        if (++i >= in->n || !g_ascii_isdigit(p[i]))
            return false;
        while (i < in->n && g_ascii_isdigit(p[i]))
            i++;
    }
    if (i < in->n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < in->n && (p[i] == '+' || p[i] == '-'))
            i++;
        if (i >= in->n || !g_ascii_isdigit(p[i]))
            return false;
        while (i < in->n && g_ascii_isdigit(p[i]))
            i++;
    }
    g_string_append_len(out, p + from, (gssize)(i - from));
    in->i = i;
    return true;
}

static bool g4_value(g4_in *in, GString *out, int depth);

/* {key:value,...}: keys bare (up to ':', without '}') or quoted. */
static bool g4_object(g4_in *in, GString *out, int depth) {
    if (!g4_lit(in, "{"))
        return false;
    g_string_append_c(out, '{');
    g4_ws(in);
    if (g4_lit(in, "}")) {
        g_string_append_c(out, '}');
        return true;
    }
    for (bool first = true;; first = false) {
        if (!first)
            g_string_append_c(out, ',');
        if (in->i < in->n && !strncmp(in->p + in->i, GEMMA4_QUOTE, strlen(GEMMA4_QUOTE))) {
            if (!g4_string(in, out))
                return false;
        } else {
            const size_t from = in->i;
            while (in->i < in->n && in->p[in->i] != ':' && in->p[in->i] != '}')
                in->i++;
            if (in->i == from)
                return false;
            json_quote(out, in->p + from, in->i - from);
        }
        if (!g4_lit(in, ":"))
            return false;
        g_string_append_c(out, ':');
        g4_ws(in);
        if (!g4_value(in, out, depth + 1))
            return false;
        g4_ws(in);
        if (g4_lit(in, "}")) {
            g_string_append_c(out, '}');
            return true;
        }
        if (!g4_lit(in, ","))
            return false;
        g4_ws(in);
    }
}

static bool g4_array(g4_in *in, GString *out, int depth) {
    if (!g4_lit(in, "["))
        return false;
    g_string_append_c(out, '[');
    g4_ws(in);
    if (g4_lit(in, "]")) {
        g_string_append_c(out, ']');
        return true;
    }
    for (bool first = true;; first = false) {
        if (!first)
            g_string_append_c(out, ',');
        if (!g4_value(in, out, depth + 1))
            return false;
        g4_ws(in);
        if (g4_lit(in, "]")) {
            g_string_append_c(out, ']');
            return true;
        }
        if (!g4_lit(in, ","))
            return false;
        g4_ws(in);
    }
}

static bool g4_value(g4_in *in, GString *out, int depth) {
    if (depth > CALL_MAX_DEPTH || in->i >= in->n)
        return false;
    const char c = in->p[in->i];
    if (c == '<')
        return g4_string(in, out);
    if (c == '{')
        return g4_object(in, out, depth);
    if (c == '[')
        return g4_array(in, out, depth);
    static const char *const lits[][2] = {
        {"true", "true"}, {"false", "false"}, {"null", "null"}, {"None", "null"}};
    for (size_t k = 0; k < G_N_ELEMENTS(lits); k++)
        if (g4_lit(in, lits[k][0])) {
            g_string_append(out, lits[k][1]);
            return true;
        }
    return g4_number(in, out);
}

/* One call: NAME{ARGS}<tool_call|> at in (after "<|tool_call>call:"). */
static bool gemma4_call(g4_in *in, tern_tool_call *out) {
    const size_t from = in->i;
    while (in->i < in->n && !strchr("{<\n", in->p[in->i]))
        in->i++;
    if (in->i == from || in->i >= in->n || in->p[in->i] != '{')
        return false;
    const size_t name_end = in->i;
    GString *args = g_string_new(NULL);
    /* The arguments are JSON of our making from the model's notation: the
     * check finds what that notation lets through (bytes that are no
     * UTF-8, a repeated key, 1e999). */
    bool ok = g4_object(in, args, 0) && g4_lit(in, GEMMA4_CLOSE) &&
              g_utf8_validate(in->p + from, (gssize)(name_end - from), NULL) &&
              call_json_ok(args->str, args->len);
    if (ok) {
        out->name = g_strndup(in->p + from, name_end - from);
        out->arguments = g_string_free(args, FALSE);
    } else {
        g_string_free(args, TRUE);
    }
    return ok;
}

/* <|tool_call>call:NAME{ARGS}<tool_call|>, one or more, whitespace between
 * them; after the last, whitespace and perhaps the <|tool_response> that
 * Gemma 4 opens next (the session ends the answer at it). */
static int parse_gemma4(const char *text, char **content, tern_tool_call **calls) {
    const char *first = strstr(text, GEMMA4_OPEN);
    if (!first)
        return 0;
    GArray *got = g_array_new(FALSE, TRUE, sizeof(tern_tool_call));
    g4_in in = {text, strlen(text), (size_t)(first - text)};
    bool ok = true;
    for (;;) {
        g4_ws(&in);
        if (in.i >= in.n)
            break;
        if (!g4_lit(&in, GEMMA4_OPEN)) {
            ok = g4_lit(&in, "<|tool_response>") && only_space(in.p + in.i, in.n - in.i);
            break;
        }
        tern_tool_call c = {0};
        if (!gemma4_call(&in, &c)) {
            ok = false;
            break;
        }
        g_array_append_val(got, c);
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

/* ------------------------------------------------------------ gpt-oss */

/* <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>ARGS<|call|>:
 * NAME up to a space or a '<', the rest of the header free up to
 * <|message|> (on one line, no other message in it), ARGS JSON (any value,
 * as the template writes whatever tojson gives) kept as written, trimmed. */
static const char *oss_call(const char *p, tern_tool_call *out) {
    p += strlen(OSS_OPEN);
    if (strncmp(p, OSS_FUNCTIONS, strlen(OSS_FUNCTIONS)))
        return NULL; /* another recipient (a built-in tool): not a function */
    p += strlen(OSS_FUNCTIONS);
    const size_t name_len = strcspn(p, " <\n");
    if (name_len == 0)
        return NULL;
    const char *msg = strstr(p + name_len, OSS_MESSAGE);
    const char *nl = strchr(p + name_len, '\n');
    const char *next = strstr(p + name_len, OSS_OPEN);
    if (!msg || (nl && nl < msg) || (next && next < msg))
        return NULL;
    const char *args = msg + strlen(OSS_MESSAGE);
    const char *end = strstr(args, OSS_CALL);
    if (!end)
        return NULL;
    size_t a = 0, b = (size_t)(end - args);
    while (a < b && g_ascii_isspace(args[a]))
        a++;
    while (b > a && g_ascii_isspace(args[b - 1]))
        b--;
    /* One value and nothing else (json-glib took "{} {}"): the strict
     * check is the whole check here, the text is passed on as written. */
    if (a == b || !call_json_ok(args + a, b - a) || !g_utf8_validate(p, (gssize)name_len, NULL))
        return NULL;
    out->name = g_strndup(p, name_len);
    out->arguments = g_strndup(args + a, b - a);
    return end + strlen(OSS_CALL);
}

static int parse_gptoss(const char *text, char **content, tern_tool_call **calls) {
    const char *first = strstr(text, OSS_OPEN);
    if (!first)
        return 0;
    GArray *got = g_array_new(FALSE, TRUE, sizeof(tern_tool_call));
    const char *p = first;
    bool ok = true;
    for (;;) {
        while (g_ascii_isspace(*p))
            p++;
        if (!*p)
            break;
        tern_tool_call c = {0};
        const char *after = strncmp(p, OSS_OPEN, strlen(OSS_OPEN)) ? NULL : oss_call(p, &c);
        if (!after) {
            ok = false;
            break;
        }
        g_array_append_val(got, c);
        p = after;
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
    switch (kind) {
    case TN_CHAT_QWEN3: return parse_qwen3(text, content, calls);
    case TN_CHAT_GEMMA4: return parse_gemma4(text, content, calls);
    case TN_CHAT_GPTOSS: return parse_gptoss(text, content, calls);
    default: return 0;
    }
}
