/* Tool calls in a model's answer, back out as OpenAI tool_calls, and the
 * raw JSON text of a member of a request body (docs/SERVER.md, "Tool
 * calling"). */
#pragma once

#include "tern.h"

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stddef.h>

/* o[member]: a string (copied, g_free), or absent / null (*out NULL); false
 * with *why naming where.member when it is anything else. */
bool tern_json_optional_string(JsonObject *o, const char *member, const char *where, char **out,
                               char **why);

/* At most this many tools per request: each is rendered into every prompt. */
#define TERN_MAX_TOOLS 128

/* An OpenAI request's "tools" (an array of {"type": "function", "function":
 * {"name", "description", "parameters"}}) as tn_chat_tool entries, strings
 * owned (free with tern_tools_free, also after a refusal: *out then holds
 * the entries read so far, *n_out of them). raw: the array's own JSON text,
 * whose schemas are taken byte for byte (key order, number spellings);
 * NULL: json-glib's writing of them. False, with *why (g_free) naming the
 * field, for a shape that is not that; the schemas are not checked against
 * a template here (tn_chat_render does). */
bool tern_tools_parse(JsonNode *tools, const char *raw, tn_chat_tool **out, int *n_out,
                      char **why);
void tern_tools_free(tn_chat_tool *tools, int n);

/* One call the model made: the function's name and its arguments as the
 * JSON text the model wrote (an object's text, byte for byte, so that the
 * call sent back in the next request renders as it was generated). */
typedef struct tern_tool_call {
    char *name;
    char *arguments;
} tern_tool_call;

/* Splits a finished answer's content (its reasoning already taken out) in
 * the call format of chat kind `kind` (tn_chat_kind), the calls one after
 * the other, whitespace between them:
 *  - Qwen3: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>;
 *  - Gemma 4: <|tool_call>call:NAME{key:value,...}<tool_call|> in its own
 *    notation (strings between <|"|>), the arguments turned into compact
 *    JSON in the model's key order; a <|tool_response> after the last call
 *    is allowed;
 *  - gpt-oss: <|start|>assistant to=functions.NAME<|channel|>commentary
 *    json<|message|>ARGS<|call|>, as the session writes a harmony call when
 *    the request has tools (tn_harmony), ARGS any JSON, kept as written.
 * Returns the number of calls, with
 * *content the text before the first call (NULL when it is only
 * whitespace) and *calls the calls (free with tern_tool_calls_free).
 * Returns 0, and sets nothing, when the answer is no call or not one made
 * exactly that way (text after a call, a block that is not closed, a name
 * that is not a string, JSON that does not parse): then it is all plain
 * content. */
int tern_tool_calls_parse(int kind, const char *text, char **content, tern_tool_call **calls);
void tern_tool_calls_free(tern_tool_call *calls, int n);

/* The marker that opens a call in kind's answers; NULL when Tern does not
 * take calls out of its answers. */
const char *tern_tool_call_marker(int kind);

/* In JSON text p[0..n) that a parser has accepted, the value of member
 * `key` (the last one of that name, as json-glib and Python keep it) of the
 * object whose '{' is at `at`: its bytes [*start, *end). False when there is
 * none or the text is not what was expected. Keys are compared as read,
 * escapes and all (a key spelled "tool\u0073" is "tools"). */
bool tern_json_raw_member(const char *p, size_t n, size_t at, const char *key, size_t *start,
                          size_t *end);
/* The same for element `index` of the array whose '[' is at `at`. */
bool tern_json_raw_element(const char *p, size_t n, size_t at, size_t index, size_t *start,
                           size_t *end);
