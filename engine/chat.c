/* Chat templates, rendered natively.
 *
 * Each kind reproduces, byte for byte, what the model family's Jinja
 * template (as Hugging Face transformers renders it) produces for system /
 * user / assistant messages, except the leading bos_token, which the caller
 * adds as a token id (see tn_chat_kind_adds_bos). Where a template trims or
 * strips content, so does this file, with Python's str.strip() whitespace.
 * docs/CHAT-TEMPLATES.md has the templates side by side.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include "tern.h"
#include "tn-internal.h"
#include "tn-json.h"
#include "tn-unicode.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- kinds */

static const char *const kind_names[TN_CHAT_KIND_COUNT_] = {
    [TN_CHAT_CHATML] = "chatml",
    [TN_CHAT_LLAMA2] = "llama2",
    [TN_CHAT_MISTRAL] = "mistral",
    [TN_CHAT_MISTRAL_V1] = "mistral-v1",
    [TN_CHAT_MISTRAL_V3] = "mistral-v3",
    [TN_CHAT_LLAMA3] = "llama3",
    [TN_CHAT_LLAMA31] = "llama3.1",
    [TN_CHAT_QWEN3] = "qwen3",
    [TN_CHAT_GEMMA3] = "gemma3",
    [TN_CHAT_GEMMA4] = "gemma4",
    [TN_CHAT_GPTOSS] = "gpt-oss",
};

const char *tn_chat_kind_name(int kind) {
    if (kind < 0 || kind >= TN_CHAT_KIND_COUNT_)
        return NULL;
    return kind_names[kind];
}

int tn_chat_kind_from_name(const char *name) {
    if (!name)
        return -1;
    for (int k = 0; k < TN_CHAT_KIND_COUNT_; k++)
        if (!strcmp(name, kind_names[k]))
            return k;
    return -1;
}

bool tn_chat_kind_adds_bos(int kind) {
    return kind > 0 && kind < TN_CHAT_KIND_COUNT_ && kind != TN_CHAT_QWEN3 &&
           kind != TN_CHAT_GPTOSS;
}

bool tn_chat_kind_renders_tools(int kind) {
    return kind == TN_CHAT_QWEN3 || kind == TN_CHAT_GEMMA4 || kind == TN_CHAT_GPTOSS;
}

tn_chat_options tn_chat_default_options(void) {
    tn_chat_options o = {
        .add_generation_prompt = true,
        .enable_thinking = true,
        .date_string = NULL,
    };
    return o;
}

/* ----------------------------------------------------------- detection */

static bool contains(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle);
    return n <= len && memmem(hay, len, needle, n) != NULL;
}

tn_chat_kind tn_chat_template_detect(const char *jinja, size_t len, const char *arch,
                                     const char **warning) {
    const char *dummy;
    if (!warning)
        warning = &dummy;
    *warning = NULL;
    if (!jinja)
        len = 0;

    if (len > 0) {
        if (contains(jinja, len, "<|start|>") && contains(jinja, len, "<|channel|>"))
            return TN_CHAT_GPTOSS;
        if (contains(jinja, len, "<|im_start|>"))
            return contains(jinja, len, "enable_thinking") ? TN_CHAT_QWEN3 : TN_CHAT_CHATML;
        if (contains(jinja, len, "<|turn>"))
            return TN_CHAT_GEMMA4;
        if (contains(jinja, len, "<start_of_turn>"))
            return TN_CHAT_GEMMA3;
        if (contains(jinja, len, "<|start_header_id|>"))
            return contains(jinja, len, "Cutting Knowledge Date") ? TN_CHAT_LLAMA31
                                                                   : TN_CHAT_LLAMA3;
        if (contains(jinja, len, "[INST]")) {
            if (contains(jinja, len, "<<SYS>>"))
                return TN_CHAT_LLAMA2;
            /* The three Mistral generations differ in the spaces around the
             * markers: v1 writes ' [INST] ', v0.1/v0.2 '[INST] ' ... ' [/INST]',
             * v3 '[INST] ' ... '[/INST]'. */
            if (contains(jinja, len, "' [INST] '") || contains(jinja, len, "\" [INST] \""))
                return TN_CHAT_MISTRAL_V1;
            if (contains(jinja, len, " [/INST]"))
                return TN_CHAT_MISTRAL;
            return TN_CHAT_MISTRAL_V3;
        }
        *warning = TN_N_("unrecognised chat template: using ChatML (<|im_start|>), which may not "
                         "be the format this model was trained on");
        return TN_CHAT_CHATML;
    }

    if (arch) {
        if (!strcmp(arch, "llama")) {
            *warning = TN_N_("no chat template in the model: using Llama 2 [INST] for architecture "
                             "'llama'");
            return TN_CHAT_LLAMA2;
        }
        if (!strcmp(arch, "qwen3") || !strcmp(arch, "qwen3moe")) {
            *warning = TN_N_("no chat template in the model: using Qwen3 (ChatML with <think>) for "
                             "its architecture");
            return TN_CHAT_QWEN3;
        }
        if (!strcmp(arch, "qwen2") || !strcmp(arch, "qwen2moe")) {
            *warning =
                TN_N_("no chat template in the model: using ChatML for architecture 'qwen2'");
            return TN_CHAT_CHATML;
        }
        if (!strcmp(arch, "gemma4")) {
            *warning = TN_N_("no chat template in the model: using Gemma 4 <|turn> for its "
                             "architecture");
            return TN_CHAT_GEMMA4;
        }
        if (!strcmp(arch, "gpt-oss")) {
            *warning = TN_N_("no chat template in the model: using gpt-oss's harmony format for "
                             "its architecture");
            return TN_CHAT_GPTOSS;
        }
        if (!strncmp(arch, "gemma", 5)) {
            *warning = TN_N_("no chat template in the model: using Gemma 3 <start_of_turn> for its "
                             "architecture");
            return TN_CHAT_GEMMA3;
        }
    }
    *warning = TN_N_("no chat template in the model and an unfamiliar architecture: using ChatML "
                     "(<|im_start|>), which may not be the format this model was trained on");
    return TN_CHAT_CHATML;
}

/* ------------------------------------------------------------ strings */

/* A view into caller memory. */
typedef struct {
    const char *p;
    size_t n;
} view;

static view mkview(const char *s) {
    /* "" for NULL: an offset added to a null pointer, even 0, is undefined. */
    view v = {s ? s : "", s ? strlen(s) : 0};
    return v;
}

/* Python's str.isspace(): White_Space plus U+001C..U+001F. */
static bool py_space(uint32_t cp) {
    return (cp >= 0x1C && cp <= 0x1F) || (tn_unicode_flags(cp) & TN_UC_WHITESPACE);
}

/* Leading whitespace bytes. Invalid UTF-8 is not whitespace. */
static size_t lead_space(view v) {
    size_t i = 0;
    while (i < v.n) {
        size_t adv;
        uint32_t cp = tn_utf8_decode(v.p + i, v.n - i, &adv);
        if (cp == TN_UTF8_INVALID || !py_space(cp))
            break;
        i += adv;
    }
    return i;
}

/* Length of v without its trailing whitespace. Walks forward so multi-byte
 * whitespace (U+3000...) is recognised without decoding backwards. */
static size_t rstrip_len(view v) {
    size_t i = 0, end = 0;
    while (i < v.n) {
        size_t adv;
        uint32_t cp = tn_utf8_decode(v.p + i, v.n - i, &adv);
        i += adv;
        if (cp == TN_UTF8_INVALID || !py_space(cp))
            end = i;
    }
    return end;
}

static view py_strip(view v) {
    size_t l = lead_space(v);
    view r = {v.p + l, v.n - l};
    r.n = rstrip_len(r);
    return r;
}

static view lstrip_nl(view v) {
    while (v.n && v.p[0] == '\n') {
        v.p++;
        v.n--;
    }
    return v;
}

static view rstrip_nl(view v) {
    while (v.n && v.p[v.n - 1] == '\n')
        v.n--;
    return v;
}

static const char *find_last(view v, const char *needle) {
    size_t n = strlen(needle);
    if (n > v.n)
        return NULL;
    for (size_t i = v.n - n + 1; i-- > 0;)
        if (!memcmp(v.p + i, needle, n))
            return v.p + i;
    return NULL;
}

static const char *find_first(view v, const char *needle) {
    return memmem(v.p, v.n, needle, strlen(needle));
}

/* Output with sticky failure, so renderers read as straight-line text.
 * put/putv write the template's own markup; text/textv write message
 * content and, when spans is set, record where it lies, so that the
 * tokenizer matches control tokens in the markup only. */
typedef struct {
    tn_buf *out;
    int rc;
    tn_text_spans *spans; /* NULL: not recorded */
    int unsupported;      /* rc TN_ERR_UNSUPPORTED: what Tern cannot render (g4_why) */
} sink;

static void put(sink *s, const char *str) {
    if (s->rc == TN_OK)
        s->rc = tn_buf_append_str(s->out, str);
}

static void putv(sink *s, view v) {
    if (s->rc == TN_OK)
        s->rc = tn_buf_append(s->out, v.p, v.n);
}

static void textv(sink *s, view v) {
    const size_t at = s->out->len;
    putv(s, v);
    if (s->rc != TN_OK || !s->spans || v.n == 0)
        return;
    tn_text_spans *sp = s->spans;
    if (sp->n > 0 && sp->v[sp->n - 1].start + sp->v[sp->n - 1].len == at) {
        sp->v[sp->n - 1].len += v.n;
        return;
    }
    if (sp->n == sp->cap) {
        size_t cap = sp->cap ? sp->cap * 2 : 8;
        tn_text_span *nv = realloc(sp->v, cap * sizeof *nv);
        if (!nv) {
            s->rc = TN_ERR_NOMEM;
            return;
        }
        sp->v = nv;
        sp->cap = cap;
    }
    sp->v[sp->n++] = (tn_text_span){at, v.n};
}

static void text(sink *s, const char *str) { textv(s, mkview(str)); }

void tn_text_spans_free(tn_text_spans *sp) {
    if (!sp)
        return;
    free(sp->v);
    sp->v = NULL;
    sp->n = sp->cap = 0;
}

/* ----------------------------------------------------------- renderers */

#define BOS_TEXT "<s>"
#define EOS_TEXT "</s>"

static const char *role_name(tn_chat_role r) {
    switch (r) {
    case TN_CHAT_ROLE_SYSTEM: return "system";
    case TN_CHAT_ROLE_USER: return "user";
    case TN_CHAT_ROLE_ASSISTANT: return "assistant";
    case TN_CHAT_ROLE_TOOL: return "tool";
    }
    return "user";
}

/* The shared shape of a render: an optional leading system message, then
 * the rest. */
typedef struct {
    const tn_chat_message *msgs;
    size_t n;
    const char *system; /* NULL: none */
    size_t first;       /* index of the first non-leading-system message */
} convo;

static convo split_convo(const tn_chat_message *msgs, size_t n) {
    convo c = {msgs, n, NULL, 0};
    if (n > 0 && msgs[0].role == TN_CHAT_ROLE_SYSTEM) {
        c.system = msgs[0].content;
        c.first = 1;
    }
    return c;
}

static void chatml_turn(sink *s, const char *role, view content) {
    put(s, "<|im_start|>");
    put(s, role);
    put(s, "\n");
    textv(s, content);
    put(s, "<|im_end|>\n");
}

static void render_chatml(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    for (size_t i = 0; i < n; i++)
        chatml_turn(s, role_name(m[i].role), mkview(m[i].content));
    if (o->add_generation_prompt)
        put(s, "<|im_start|>assistant\n");
}

static bool is_tool_response(view v) {
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    return v.n >= sizeof open - 1 && v.n >= sizeof close - 1 &&
           !memcmp(v.p, open, sizeof open - 1) &&
           !memcmp(v.p + v.n - (sizeof close - 1), close, sizeof close - 1);
}

static void qwen3_generation_prompt(sink *s, const tn_chat_options *o) {
    put(s, "<|im_start|>assistant\n");
    if (!o->enable_thinking)
        put(s, "<think>\n\n</think>\n\n");
}

static void json_string(sink *s, view v);
static void py_json(sink *s, const tn_json *v, view src);

/* A tool as transformers' tojson filter writes the request's entry:
 * json.dumps(ensure_ascii=False) of {"type": "function", "function":
 * {"name", "description", "parameters"}}, the schema's members in its own
 * order (py_json). The schema was checked (check_tools): only memory can
 * fail here. */
static void tool_json(sink *s, const tn_chat_tool *t) {
    text(s, "{\"type\": \"function\", \"function\": {\"name\": ");
    json_string(s, mkview(t->name));
    if (t->description) {
        text(s, ", \"description\": ");
        json_string(s, mkview(t->description));
    }
    if (t->parameters && s->rc == TN_OK) {
        text(s, ", \"parameters\": ");
        tn_json_doc *doc = NULL;
        if (tn_json_parse(t->parameters, strlen(t->parameters), "parameters", &doc, NULL) !=
            TN_OK)
            s->rc = TN_ERR_NOMEM;
        else
            py_json(s, tn_json_root(doc), mkview(t->parameters));
        tn_json_free(doc);
    }
    text(s, "}}");
}

/* Qwen3's system turn with tools: the system message's content as it is,
 * then the "# Tools" block, one tojson line per tool. */
static void qwen3_tools(sink *s, const char *system, const tn_chat_options *o) {
    put(s, "<|im_start|>system\n");
    if (system) {
        text(s, system);
        put(s, "\n\n");
    }
    put(s, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
           "You are provided with function signatures within <tools></tools> XML tags:\n"
           "<tools>");
    for (size_t i = 0; i < o->n_tools; i++) {
        put(s, "\n");
        tool_json(s, &o->tools[i]);
    }
    put(s, "\n</tools>\n\nFor each function call, return a json object with function name and "
           "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
           "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n");
}

/* An assistant message's calls, after its content: each on a line of its
 * own (the first right after the content when there is none), the name and
 * the arguments as written (a string is not re-encoded; none: "{}"). */
static void qwen3_tool_calls(sink *s, const tn_chat_message *m, view content) {
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const tn_chat_tool_call *tc = &m->tool_calls[k];
        if (k > 0 || content.n > 0)
            put(s, "\n");
        put(s, "<tool_call>\n{\"name\": \"");
        text(s, tc->name);
        put(s, "\", \"arguments\": ");
        text(s, tc->arguments ? tc->arguments : "{}");
        put(s, "}\n</tool_call>");
    }
}

/* Qwen3: ChatML, but assistant turns before the last user query lose their
 * <think> block, and those after it keep (or get an empty) one. */
static void render_qwen3(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    if (o->n_tools > 0)
        qwen3_tools(s, n > 0 && m[0].role == TN_CHAT_ROLE_SYSTEM ? m[0].content : NULL, o);
    else if (n > 0 && m[0].role == TN_CHAT_ROLE_SYSTEM)
        chatml_turn(s, "system", mkview(m[0].content));

    size_t last_query = n ? n - 1 : 0;
    for (size_t i = n; i-- > 0;) {
        if (m[i].role == TN_CHAT_ROLE_USER && !is_tool_response(mkview(m[i].content))) {
            last_query = i;
            break;
        }
    }

    for (size_t i = 0; i < n; i++) {
        view c = mkview(m[i].content);
        if (m[i].role == TN_CHAT_ROLE_USER || (m[i].role == TN_CHAT_ROLE_SYSTEM && i > 0)) {
            chatml_turn(s, role_name(m[i].role), c);
            continue;
        }
        if (m[i].role == TN_CHAT_ROLE_TOOL) {
            /* A run of tool results shares one user turn. */
            if (i == 0 || m[i - 1].role != TN_CHAT_ROLE_TOOL)
                put(s, "<|im_start|>user");
            put(s, "\n<tool_response>\n");
            textv(s, c);
            put(s, "\n</tool_response>");
            if (i == n - 1 || m[i + 1].role != TN_CHAT_ROLE_TOOL)
                put(s, "<|im_end|>\n");
            continue;
        }
        if (m[i].role != TN_CHAT_ROLE_ASSISTANT)
            continue;
        view content = c;
        view reasoning = {"", 0};
        const char *end_think = find_first(c, "</think>");
        if (end_think) {
            const char *last_end = find_last(c, "</think>");
            size_t after = (size_t)(last_end + 8 - c.p);
            content = lstrip_nl((view){c.p + after, c.n - after});
            view before = rstrip_nl((view){c.p, (size_t)(end_think - c.p)});
            const char *open = find_last(before, "<think>");
            if (open) {
                size_t skip = (size_t)(open + 7 - before.p);
                before = (view){before.p + skip, before.n - skip};
            }
            reasoning = lstrip_nl(before);
        }
        put(s, "<|im_start|>assistant\n");
        if (i > last_query && (i == n - 1 || reasoning.n > 0)) {
            put(s, "<think>\n");
            textv(s, lstrip_nl(rstrip_nl(reasoning)));
            put(s, "\n</think>\n\n");
            textv(s, lstrip_nl(content));
        } else {
            textv(s, content);
        }
        qwen3_tool_calls(s, &m[i], content);
        put(s, "<|im_end|>\n");
    }
    if (o->add_generation_prompt)
        qwen3_generation_prompt(s, o);
}

static void llama3_turn(sink *s, const char *role, view content) {
    put(s, "<|start_header_id|>");
    put(s, role);
    put(s, "<|end_header_id|>\n\n");
    textv(s, py_strip(content));
    put(s, "<|eot_id|>");
}

static void render_llama3(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    for (size_t i = 0; i < n; i++)
        llama3_turn(s, role_name(m[i].role), mkview(m[i].content));
    if (o->add_generation_prompt)
        put(s, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void llama31_system(sink *s, const char *system, const tn_chat_options *o) {
    put(s, "<|start_header_id|>system<|end_header_id|>\n\n");
    put(s, "Cutting Knowledge Date: December 2023\n");
    put(s, "Today Date: ");
    put(s, o->date_string ? o->date_string : "26 Jul 2024");
    put(s, "\n\n");
    textv(s, py_strip(mkview(system)));
    put(s, "<|eot_id|>");
}

/* Python's json.dumps(str, ensure_ascii=False): quotes, the two-character
 * escapes, \u00XX for the other control characters, the rest as is. */
static void json_string(sink *s, view v) {
    textv(s, (view){"\"", 1});
    size_t run = 0;
    for (size_t i = 0; i < v.n; i++) {
        const unsigned char c = (unsigned char)v.p[i];
        char esc[8] = {0};
        switch (c) {
        case '"': memcpy(esc, "\\\"", 2); break;
        case '\\': memcpy(esc, "\\\\", 2); break;
        case '\n': memcpy(esc, "\\n", 2); break;
        case '\r': memcpy(esc, "\\r", 2); break;
        case '\t': memcpy(esc, "\\t", 2); break;
        case '\b': memcpy(esc, "\\b", 2); break;
        case '\f': memcpy(esc, "\\f", 2); break;
        default:
            if (c < 0x20)
                snprintf(esc, sizeof esc, "\\u%04x", c);
        }
        if (!esc[0])
            continue;
        textv(s, (view){v.p + run, i - run});
        textv(s, mkview(esc));
        run = i + 1;
    }
    textv(s, (view){v.p + run, v.n - run});
    textv(s, (view){"\"", 1});
}

static void render_llama31(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    convo c = split_convo(m, n);
    llama31_system(s, c.system, o);
    for (size_t i = c.first; i < n; i++) {
        if (m[i].role == TN_CHAT_ROLE_TOOL) {
            /* Tool results come back as "ipython". A string "is iterable"
             * in Jinja, so the template writes it through tojson: quoted
             * and escaped, as json.dumps(ensure_ascii=False). */
            put(s, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            json_string(s, mkview(m[i].content));
            put(s, "<|eot_id|>");
            continue;
        }
        llama3_turn(s, role_name(m[i].role), mkview(m[i].content));
    }
    if (o->add_generation_prompt)
        put(s, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* gpt-oss's harmony format, as its template (llama.cpp's
 * models/templates/openai-gpt-oss-120b.jinja) renders it: a fixed system
 * message (model identity, knowledge cutoff, the date, reasoning effort
 * medium, the valid channels), the system prompt, when not empty, as the
 * developer message's "# Instructions", then the turns (render_gptoss).
 * The template asks strftime_now for the date: a fixed one here, so that
 * pins stay valid (docs/CHAT-TEMPLATES.md). */
static void gptoss_declaration(sink *s, const tn_chat_tool *t);

static void gptoss_system(sink *s, const char *system, const tn_chat_options *o) {
    put(s, "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
           "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ");
    put(s, o->date_string ? o->date_string : "2025-08-05");
    put(s, "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel "
           "must be included for every message.");
    const size_t n_tools = o->n_tools;
    if (n_tools)
        put(s, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    put(s, "<|end|>");
    if ((!system || !*system) && !n_tools)
        return;
    put(s, "<|start|>developer<|message|>");
    if (system && *system) {
        put(s, "# Instructions\n\n");
        text(s, system);
        put(s, "\n\n");
    }
    if (n_tools) {
        put(s, "# Tools\n\n## functions\n\nnamespace functions {\n\n");
        for (size_t i = 0; i < n_tools; i++)
            gptoss_declaration(s, &o->tools[i]);
        put(s, "} // namespace functions");
    }
    put(s, "<|end|>");
}

static void gptoss_user(sink *s, view u) {
    put(s, "<|start|>user<|message|>");
    textv(s, u);
    put(s, "<|end|>");
}

void tn_harmony_init_ids(tn_harmony *h, int32_t start, int32_t channel, int32_t message,
                         int32_t end) {
    memset(h, 0, sizeof *h);
    h->start = start;
    h->channel = channel;
    h->message = message;
    h->end = end;
    h->call = -1;
    h->on = start >= 0 && channel >= 0 && message >= 0 && end >= 0;
}

void tn_harmony_init(tn_harmony *h, const tn_tokenizer *tok) {
    if (!tok) {
        tn_harmony_init_ids(h, -1, -1, -1, -1);
        return;
    }
    tn_harmony_init_ids(h, tn_tokenizer_find(tok, "<|start|>", 9),
                        tn_tokenizer_find(tok, "<|channel|>", 11),
                        tn_tokenizer_find(tok, "<|message|>", 11),
                        tn_tokenizer_find(tok, "<|end|>", 7));
    h->call = tn_tokenizer_find(tok, "<|call|>", 8);
}

void tn_harmony_stop(tn_harmony *h, int32_t token) {
    h->called = h->on && token >= 0 && token == h->call;
}

/* The end of an addressed message written whole. */
static int harmony_close_call(tn_harmony *h, tn_buf *out) {
    if (!h->in_call)
        return TN_OK;
    h->in_call = false;
    return tn_buf_append_str(out, "<|call|>");
}

bool tn_harmony_ends_message(const tn_harmony *h, int32_t token) {
    return h->on && token == h->end;
}

/* Header text: finds "to=" and keeps the recipient that follows it, up to
 * a space, a newline or a '<' (a control token's text: "to=functions.f
 * <|constrain|>json" and "to=functions.f<|constrain|>json" both name
 * functions.f; <|channel|> and <|message|> end it too). */
static void harmony_header(tn_harmony *h, const char *piece, size_t len) {
    static const char to[] = "to=";
    for (size_t i = 0; i < len; i++) {
        const char ch = piece[i];
        if (h->in_recipient) {
            if (ch == ' ' || ch == '\n' || ch == '<') {
                h->in_recipient = false;
            } else if (h->n_recipient + 1 < sizeof h->recipient) {
                h->recipient[h->n_recipient++] = ch;
                h->recipient[h->n_recipient] = '\0';
            }
            continue;
        }
        h->to_seen = ch == to[h->to_seen] ? h->to_seen + 1 : ch == 't';
        if (h->to_seen == 3) {
            h->to_seen = 0;
            h->in_recipient = true;
            h->n_recipient = 0;
            h->recipient[0] = '\0';
        }
    }
}

/* A call: addressed to anyone but the assistant. */
static bool harmony_addressed(const tn_harmony *h) {
    return h->n_recipient > 0 && strcmp(h->recipient, "assistant");
}

int tn_harmony_piece(tn_harmony *h, int32_t token, const char *piece, size_t len, tn_buf *out) {
    out->len = 0;
    int rc = tn_buf_append(out, "", 0);
    if (token == h->channel) {
        h->state = 2;
        h->n_name = 0;
        h->to_seen = 0;
        h->in_recipient = false;
    } else if (token == h->message) {
        const bool analysis =
            h->n_name >= 8 && !memcmp(h->name, "analysis", 8) && !harmony_addressed(h);
        if (rc == TN_OK && analysis != h->think_open)
            rc = tn_buf_append_str(out, analysis ? "<think>" : "</think>");
        h->think_open = analysis;
        if (rc == TN_OK && h->calls_as_text && harmony_addressed(h)) {
            rc = harmony_close_call(h, out);
            if (rc == TN_OK)
                rc = tn_buf_append_str(out, "<|start|>assistant to=");
            if (rc == TN_OK)
                rc = tn_buf_append_str(out, h->recipient);
            if (rc == TN_OK)
                rc = tn_buf_append_str(out, "<|channel|>commentary json<|message|>");
            h->in_call = true;
        }
        h->state = 0;
        h->to_seen = 0;
        h->in_recipient = false;
    } else if (token == h->end || token == h->start) {
        if (rc == TN_OK)
            rc = harmony_close_call(h, out);
        h->state = 1;
        h->to_seen = 0;
        h->in_recipient = false;
        h->n_recipient = 0;
        h->recipient[0] = '\0';
    } else if (h->state != 0) {
        /* A header: its role, channel name and recipient are not text. */
        if (h->state == 2)
            for (size_t i = 0; i < len && h->n_name < sizeof h->name; i++)
                h->name[h->n_name++] = piece[i];
        harmony_header(h, piece, len);
    } else if (len && rc == TN_OK) {
        rc = tn_buf_append(out, piece, len);
    }
    return rc;
}

int tn_harmony_finish(tn_harmony *h, const char *piece, size_t len, tn_buf *out) {
    out->len = 0;
    int rc = tn_buf_append(out, "", 0);
    if (rc == TN_OK && h->state == 0 && len)
        rc = tn_buf_append(out, piece, len);
    if (rc == TN_OK && h->in_call && h->called)
        rc = harmony_close_call(h, out);
    h->in_call = false;
    if (rc == TN_OK && h->think_open)
        rc = tn_buf_append_str(out, "</think>");
    h->think_open = false;
    return rc;
}

static void gemma3_open(sink *s, tn_chat_role role) {
    put(s, "<start_of_turn>");
    put(s, role == TN_CHAT_ROLE_ASSISTANT ? "model" : role_name(role));
    put(s, "\n");
}

static void render_gemma3(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    convo c = split_convo(m, n);
    for (size_t i = c.first; i < n; i++) {
        gemma3_open(s, m[i].role);
        if (i == c.first && c.system) {
            text(s, c.system);
            put(s, "\n\n");
        }
        textv(s, py_strip(mkview(m[i].content)));
        put(s, "<end_of_turn>\n");
    }
    if (o->add_generation_prompt)
        put(s, "<start_of_turn>model\n");
}

/* Gemma 4 (google-gemma-4-31B-it.jinja): an optional system turn that also
 * carries <|think|> when thinking is on, user turns trimmed, model turns with
 * their thought channels removed (strip_thinking) and trimmed, a model turn
 * right after another one (tool results between them do not count)
 * continuing it without a new header; the generation prompt opens a model
 * turn and, thinking off, an empty thought channel. */
static void gemma4_declaration(sink *s, const tn_chat_tool *t);

static void gemma4_system(sink *s, const char *system, bool thinking, const tn_chat_options *o) {
    const size_t n_tools = o ? o->n_tools : 0;
    if (!system && !thinking && !n_tools)
        return;
    put(s, "<|turn>system\n");
    if (thinking)
        put(s, "<|think|>\n");
    if (system)
        textv(s, py_strip(mkview(system)));
    for (size_t i = 0; i < n_tools; i++)
        gemma4_declaration(s, &o->tools[i]);
    put(s, "<turn|>\n");
}

/* strip_thinking: of each part split at "<channel|>", what comes before a
 * "<|channel>" in it (or all of it), the whole trimmed. */
static void gemma4_model_content(sink *s, view c) {
    tn_buf tmp = {0};
    sink t = {&tmp, TN_OK, NULL, 0};
    put(&t, "");
    static const char close[] = "<channel|>", open[] = "<|channel>";
    for (;;) {
        const char *end = find_first(c, close);
        view part = {c.p, end ? (size_t)(end - c.p) : c.n};
        const char *o = find_first(part, open);
        putv(&t, o ? (view){part.p, (size_t)(o - part.p)} : part);
        if (!end)
            break;
        size_t skip = (size_t)(end - c.p) + sizeof close - 1;
        c = (view){c.p + skip, c.n - skip};
    }
    if (t.rc != TN_OK)
        s->rc = t.rc;
    else
        textv(s, py_strip((view){tmp.data, tmp.len}));
    tn_buf_free(&tmp);
}

static void gemma4_generation_prompt(sink *s, bool thinking) {
    put(s, "<|turn>model\n");
    if (!thinking)
        put(s, "<|channel>thought\n<channel|>");
}

/* The template prints JSON values (the arguments of a call, after llama.cpp
 * and transformers have parsed them into Python objects) in its own syntax,
 * format_argument: strings between <|"|> with nothing escaped, objects with
 * their keys sorted by dictsort, numbers and None as Python's str() writes
 * them. These helpers reproduce those Python spellings. */

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;
static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* Python's repr(float): the shortest digits that read back as x, written
 * positionally when the decimal point falls within -4 < decpt <= 16
 * ("100000.0", "0.0001") and as "1e+16" / "1.5e-05" otherwise. */
static void py_float_repr(double x, char out[48]) {
    if (isnan(x)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(x)) {
        strcpy(out, x < 0 ? "-inf" : "inf");
        return;
    }
    if (x == 0) {
        strcpy(out, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    /* "%e" and strtod follow the process locale's decimal separator. */
    pthread_once(&c_locale_once, make_c_locale);
    locale_t old = c_locale ? uselocale(c_locale) : (locale_t)0;
    char e[48];
    for (int prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, x);
        if (strtod(e, NULL) == x)
            break;
    }
    if (old)
        uselocale(old);
    const char *p = e;
    const bool neg = *p == '-';
    if (neg)
        p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e' && nd < 20; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    const int exp10 = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    const int decpt = exp10 + 1;
    char *o = out;
    if (neg)
        *o++ = '-';
    if (decpt <= -4 || decpt > 16) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    if (decpt <= 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -decpt; i++)
            *o++ = '0';
        memcpy(o, digits, (size_t)nd);
        o += nd;
    } else if (decpt >= nd) {
        memcpy(o, digits, (size_t)nd);
        o += nd;
        for (int i = nd; i < decpt; i++)
            *o++ = '0';
        memcpy(o, ".0", 2);
        o += 2;
    } else {
        memcpy(o, digits, (size_t)decpt);
        o += decpt;
        *o++ = '.';
        memcpy(o, digits + decpt, (size_t)(nd - decpt));
        o += nd - decpt;
    }
    *o = '\0';
}

/* A JSON number as Python's json.loads + str() gives it back: integers
 * exactly as written (Python's are unbounded; "-0" is 0), the others
 * through a double. */
static void py_number(sink *s, const tn_json *v, view src) {
    size_t len = 0;
    const char *t = tn_json_number_text(v, src.p, src.n, &len);
    if (t && !memchr(t, '.', len) && !memchr(t, 'e', len) && !memchr(t, 'E', len)) {
        if (len == 2 && !memcmp(t, "-0", 2))
            textv(s, (view){"0", 1});
        else
            textv(s, (view){t, len});
        return;
    }
    char buf[48];
    py_float_repr(tn_json_num(v, 0), buf);
    text(s, buf);
}

/* Object members in dictsort order: by key, compared as Python compares
 * str.lower() (here: simple case folding, which is lower() but for a few
 * letters such as U+017F and final sigma), ties in the order of the object.
 * A key given twice counts once, at its first place, with its last value
 * (a Python dict). */
typedef struct {
    const tn_json *key; /* the member that names it */
    const tn_json *val;
    size_t first;
} member;

static int cmp_exact(const void *a, const void *b) {
    const member *x = a, *y = b;
    size_t n = x->key->key_len < y->key->key_len ? x->key->key_len : y->key->key_len;
    int c = memcmp(x->key->key, y->key->key, n);
    if (c)
        return c;
    if (x->key->key_len != y->key->key_len)
        return x->key->key_len < y->key->key_len ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

static uint32_t lower_cp(uint32_t cp) {
    if (cp < 0x80)
        return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    return tn_unicode_fold(cp);
}

static int cmp_folded(const void *a, const void *b) {
    const member *x = a, *y = b;
    const char *p = x->key->key, *q = y->key->key;
    size_t i = 0, j = 0, n = x->key->key_len, m = y->key->key_len;
    while (i < n && j < m) {
        size_t ai, bj;
        uint32_t ca = lower_cp(tn_utf8_decode(p + i, n - i, &ai));
        uint32_t cb = lower_cp(tn_utf8_decode(q + j, m - j, &bj));
        if (ca != cb)
            return ca < cb ? -1 : 1;
        i += ai;
        j += bj;
    }
    if ((i < n) != (j < m))
        return i < n ? 1 : -1;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int cmp_first(const void *a, const void *b) {
    const member *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* An object's members as a Python dict holds them, sorted by cmp: a key
 * given twice counts once, at its first place, with its last value; *out
 * malloc'd. TN_ERR_NOMEM or TN_OK. */
static int dict_members(const tn_json *obj, int (*cmp)(const void *, const void *), member **out,
                        size_t *n_out) {
    size_t n = tn_json_count(obj);
    *out = NULL;
    *n_out = 0;
    if (n == 0)
        return TN_OK;
    member *m = malloc(n * sizeof *m);
    if (!m)
        return TN_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        m[i] = (member){&obj->v.items[i], &obj->v.items[i], i};
    qsort(m, n, sizeof *m, cmp_exact);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && m[j].key->key_len == m[i].key->key_len &&
               !memcmp(m[j].key->key, m[i].key->key, m[i].key->key_len))
            j++;
        m[k++] = (member){m[i].key, m[j - 1].val, m[i].first};
        i = j;
    }
    qsort(m, k, sizeof *m, cmp);
    *out = m;
    *n_out = k;
    return TN_OK;
}

/* The members to print, in dictsort order. */
static int sorted_members(const tn_json *obj, member **out, size_t *n_out) {
    return dict_members(obj, cmp_folded, out, n_out);
}

/* format_argument(value, escape_keys): keys between <|"|> when escaped. */
static void gemma4_value(sink *s, const tn_json *v, view src, bool escape_keys) {
    if (s->rc != TN_OK)
        return;
    switch ((tn_json_type)v->type) {
    case TN_JSON_STRING:
        put(s, "<|\"|>");
        textv(s, (view){v->v.str, v->n});
        put(s, "<|\"|>");
        break;
    case TN_JSON_BOOL: text(s, v->b ? "true" : "false"); break;
    case TN_JSON_NULL: text(s, "None"); break;
    case TN_JSON_NUMBER: py_number(s, v, src); break;
    case TN_JSON_ARRAY:
        put(s, "[");
        for (uint32_t i = 0; i < v->n; i++) {
            if (i)
                put(s, ",");
            gemma4_value(s, &v->v.items[i], src, escape_keys);
        }
        put(s, "]");
        break;
    case TN_JSON_OBJECT: {
        member *m;
        size_t n;
        if (s->rc == TN_OK)
            s->rc = sorted_members(v, &m, &n);
        if (s->rc != TN_OK)
            return;
        put(s, "{");
        for (size_t i = 0; i < n; i++) {
            if (i)
                put(s, ",");
            if (escape_keys)
                put(s, "<|\"|>");
            textv(s, (view){m[i].key->key, m[i].key->key_len});
            if (escape_keys)
                put(s, "<|\"|>");
            put(s, ":");
            gemma4_value(s, m[i].val, src, escape_keys);
        }
        put(s, "}");
        free(m);
        break;
    }
    }
}

/* ------------------------------------------- Gemma 4 tool declarations */

/* The template's format_function_declaration and format_parameters
 * macros, over the schema as Python holds it (a dict: a key given twice
 * has its last value), in the same order and with the same Jinja quirks:
 * a missing member is Undefined (printed as nothing), truthiness decides
 * what is printed, types are upper-cased, a property that is not an object
 * is looked up like an empty one. Where the template would print Python's
 * str() of a list or an object, or upper-case non-ASCII text, Tern refuses
 * the schema (unsupported) rather than guess. */

/* What a Gemma 4 declaration cannot show (check_tools words each). */
enum g4_why {
    G4_STR_OF_CONTAINER = 1, /* Python's str() of a list or an object */
    G4_TYPE_LIST,            /* a type list that is not plain ASCII strings */
    G4_TYPE_OBJECT,          /* a type that is an object */
    G4_TYPE_NOT_ASCII,       /* upper() beyond ASCII */
    G4_REQUIRED_SCALAR,      /* a required that cannot be iterated */
    G4_ITEMS_TYPE,           /* an items type that is neither a string nor a list */
    G4_PROPERTIES,           /* properties that are not an object */
};

static void unsupported(sink *s, enum g4_why why) {
    if (s->rc != TN_OK)
        return;
    s->rc = TN_ERR_UNSUPPORTED;
    s->unsupported = why;
}

/* value[key] as Jinja sees it: the last member of that name; NULL
 * (Undefined) when value is not an object or has none. */
static const tn_json *dict_get(const tn_json *v, const char *key) {
    if (!v || v->type != TN_JSON_OBJECT)
        return NULL;
    const size_t n = strlen(key);
    const tn_json *found = NULL;
    for (uint32_t i = 0; i < v->n; i++)
        if (v->v.items[i].key_len == n && !memcmp(v->v.items[i].key, key, n))
            found = &v->v.items[i];
    return found;
}

/* Python's truthiness of a JSON value (Undefined: false). */
static bool truthy(const tn_json *v) {
    if (!v)
        return false;
    switch ((tn_json_type)v->type) {
    case TN_JSON_NULL: return false;
    case TN_JSON_BOOL: return v->b;
    case TN_JSON_NUMBER: return tn_json_num(v, 0) != 0;
    case TN_JSON_STRING:
    case TN_JSON_ARRAY:
    case TN_JSON_OBJECT: return v->n > 0;
    }
    return false;
}

/* {{ v }}: Python's str() of a scalar (a string as it is). */
static void py_str(sink *s, const tn_json *v, view src) {
    if (!v)
        return; /* Undefined prints nothing */
    switch ((tn_json_type)v->type) {
    case TN_JSON_STRING: textv(s, (view){v->v.str, v->n}); break;
    case TN_JSON_BOOL: text(s, v->b ? "True" : "False"); break;
    case TN_JSON_NULL: text(s, "None"); break;
    case TN_JSON_NUMBER: py_number(s, v, src); break;
    case TN_JSON_ARRAY:
    case TN_JSON_OBJECT:
        unsupported(s, G4_STR_OF_CONTAINER);
        break;
    }
}

/* Appends upper(text) for ASCII text; false for any other byte (Python's
 * Unicode upper() is not reproduced). */
static bool ascii_upper(tn_buf *b, view v) {
    for (size_t i = 0; i < v.n; i++) {
        const unsigned char c = (unsigned char)v.p[i];
        if (c >= 0x80)
            return false;
        const char u = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
        if (tn_buf_append(b, &u, 1) != TN_OK)
            return false;
    }
    return tn_buf_append(b, "", 0) == TN_OK;
}

/* v | upper into *b (NUL-terminated): str(v).upper(). A list of plain
 * ASCII strings is written as Python's str() of it ("['STRING', 'NULL']");
 * other lists and objects are unsupported. */
static void type_upper(sink *s, const tn_json *v, view src, tn_buf *b) {
    b->len = 0;
    bool ok = tn_buf_append(b, "", 0) == TN_OK;
    if (!ok || s->rc != TN_OK || !v)
        return;
    if (v->type == TN_JSON_ARRAY) {
        ok = tn_buf_append_str(b, "[") == TN_OK;
        for (uint32_t i = 0; ok && i < v->n; i++) {
            const tn_json *e = &v->v.items[i];
            ok = e->type == TN_JSON_STRING;
            for (uint32_t k = 0; ok && k < e->n; k++)
                ok = e->v.str[k] >= 0x20 && e->v.str[k] < 0x7f && e->v.str[k] != '\'' &&
                     e->v.str[k] != '\\';
            ok = ok && tn_buf_append_str(b, i ? ", '" : "'") == TN_OK &&
                 ascii_upper(b, (view){e->v.str, e->n}) && tn_buf_append_str(b, "'") == TN_OK;
        }
        if (!ok || tn_buf_append_str(b, "]") != TN_OK)
            unsupported(s, G4_TYPE_LIST);
        return;
    }
    if (v->type == TN_JSON_OBJECT) {
        unsupported(s, G4_TYPE_OBJECT);
        return;
    }
    tn_buf tmp = {0};
    sink t = {&tmp, TN_OK, NULL, 0};
    put(&t, "");
    py_str(&t, v, src);
    if (t.rc != TN_OK || !ascii_upper(b, (view){tmp.data, tmp.len}))
        unsupported(s, G4_TYPE_NOT_ASCII);
    tn_buf_free(&tmp);
}

/* {% for item in v %}<|"|>{{ item }}<|"|>{% if not loop.last %},{% endif %}:
 * a list's items, a string's characters, an object's keys. */
static void g4_items(sink *s, const tn_json *v, view src) {
    if (!v || s->rc != TN_OK)
        return;
    if (v->type == TN_JSON_ARRAY) {
        for (uint32_t i = 0; i < v->n; i++) {
            if (i)
                put(s, ",");
            put(s, "<|\"|>");
            py_str(s, &v->v.items[i], src);
            put(s, "<|\"|>");
        }
    } else if (v->type == TN_JSON_STRING) {
        for (size_t i = 0; i < v->n;) {
            size_t adv;
            tn_utf8_decode(v->v.str + i, v->n - i, &adv);
            if (adv == 0)
                adv = 1;
            if (i)
                put(s, ",");
            put(s, "<|\"|>");
            textv(s, (view){v->v.str + i, adv});
            put(s, "<|\"|>");
            i += adv;
        }
    } else if (v->type == TN_JSON_OBJECT) {
        member *m;
        size_t n;
        if ((s->rc = dict_members(v, cmp_first, &m, &n)) != TN_OK)
            return;
        for (size_t i = 0; i < n; i++) {
            if (i)
                put(s, ",");
            put(s, "<|\"|>");
            textv(s, (view){m[i].key->key, m[i].key->key_len});
            put(s, "<|\"|>");
        }
        free(m);
    } else {
        unsupported(s, G4_REQUIRED_SCALAR);
    }
}

/* The template's add_comma: a comma before every item but the first. */
static void g4_comma(sink *s, bool *add_comma) {
    if (*add_comma)
        put(s, ",");
    *add_comma = true;
}

static bool key_is(const member *m, const char *key) {
    return m->key->key_len == strlen(key) && !memcmp(m->key->key, key, m->key->key_len);
}

static void g4_parameters(sink *s, const tn_json *props, view src);

/* An array property's items: every member but nulls, in dictsort order. */
static void g4_items_schema(sink *s, const tn_json *items, view src) {
    member *m;
    size_t n;
    if (s->rc != TN_OK || (s->rc = sorted_members(items, &m, &n)) != TN_OK)
        return;
    put(s, "items:{");
    bool first = true;
    tn_buf up = {0};
    for (size_t i = 0; i < n && s->rc == TN_OK; i++) {
        const tn_json *iv = m[i].val;
        if (iv->type == TN_JSON_NULL)
            continue;
        if (!first)
            put(s, ",");
        first = false;
        if (key_is(&m[i], "properties")) {
            put(s, "properties:{");
            if (iv->type == TN_JSON_OBJECT)
                g4_parameters(s, iv, src);
            put(s, "}");
        } else if (key_is(&m[i], "required")) {
            put(s, "required:[");
            g4_items(s, iv, src);
            put(s, "]");
        } else if (key_is(&m[i], "type")) {
            put(s, "type:");
            if (iv->type == TN_JSON_STRING) {
                type_upper(s, iv, src, &up);
                put(s, "<|\"|>");
                text(s, up.data ? up.data : "");
                put(s, "<|\"|>");
            } else if (iv->type == TN_JSON_ARRAY) {
                /* item_value | map('upper') | list, then format_argument */
                put(s, "[");
                for (uint32_t k = 0; k < iv->n && s->rc == TN_OK; k++) {
                    if (k)
                        put(s, ",");
                    const tn_json *e = &iv->v.items[k];
                    if (e->type == TN_JSON_ARRAY) {
                        unsupported(s, G4_TYPE_LIST);
                        break;
                    }
                    type_upper(s, e, src, &up);
                    put(s, "<|\"|>");
                    text(s, up.data ? up.data : "");
                    put(s, "<|\"|>");
                }
                put(s, "]");
            } else {
                unsupported(s, G4_ITEMS_TYPE);
            }
        } else {
            textv(s, (view){m[i].key->key, m[i].key->key_len});
            put(s, ":");
            gemma4_value(s, iv, src, true);
        }
    }
    put(s, "}");
    tn_buf_free(&up);
    free(m);
}

/* format_parameters(properties): each property but the standard keys, in
 * dictsort order, as NAME:{description,enum|items,nullable,properties,
 * required,type}. */
static void g4_parameters(sink *s, const tn_json *props, view src) {
    static const char *const standard[] = {"description", "type", "properties", "required",
                                           "nullable"};
    member *m;
    size_t n;
    if (s->rc != TN_OK || (s->rc = sorted_members(props, &m, &n)) != TN_OK)
        return;
    bool found_first = false;
    tn_buf up = {0};
    for (size_t i = 0; i < n && s->rc == TN_OK; i++) {
        bool is_standard = false;
        for (size_t k = 0; k < sizeof standard / sizeof *standard; k++)
            is_standard |= key_is(&m[i], standard[k]);
        if (is_standard)
            continue;
        const tn_json *value = m[i].val;
        if (found_first)
            put(s, ",");
        found_first = true;
        textv(s, (view){m[i].key->key, m[i].key->key_len});
        put(s, ":{");
        bool add_comma = false;
        const tn_json *desc = dict_get(value, "description");
        if (truthy(desc)) {
            put(s, "description:<|\"|>");
            py_str(s, desc, src);
            put(s, "<|\"|>");
            add_comma = true;
        }
        type_upper(s, dict_get(value, "type"), src, &up);
        const char *type = up.data ? up.data : "";
        if (!strcmp(type, "STRING")) {
            const tn_json *e = dict_get(value, "enum");
            if (truthy(e)) {
                g4_comma(s, &add_comma);
                put(s, "enum:");
                gemma4_value(s, e, src, true);
            }
        } else if (!strcmp(type, "ARRAY")) {
            const tn_json *items = dict_get(value, "items");
            if (items && items->type == TN_JSON_OBJECT && items->n > 0) {
                g4_comma(s, &add_comma);
                g4_items_schema(s, items, src);
            }
        }
        if (truthy(dict_get(value, "nullable"))) {
            g4_comma(s, &add_comma);
            put(s, "nullable:true");
        }
        if (!strcmp(type, "OBJECT")) {
            const tn_json *p = dict_get(value, "properties");
            const tn_json *of = p && p->type == TN_JSON_OBJECT ? p : value;
            if (of && of->type == TN_JSON_OBJECT) {
                g4_comma(s, &add_comma);
                put(s, "properties:{");
                g4_parameters(s, of, src);
                put(s, "}");
            }
            const tn_json *req = dict_get(value, "required");
            if (truthy(req)) {
                g4_comma(s, &add_comma);
                put(s, "required:[");
                g4_items(s, req, src);
                put(s, "]");
            }
        }
        g4_comma(s, &add_comma);
        put(s, "type:<|\"|>");
        /* upper of the type, again: the nested renders reused the buffer */
        type_upper(s, dict_get(value, "type"), src, &up);
        text(s, up.data ? up.data : "");
        put(s, "<|\"|>}");
    }
    tn_buf_free(&up);
    free(m);
}

/* <|tool>declaration:NAME{description:<|"|>D<|"|>[,parameters:{...}]}<tool|>
 * (format_function_declaration; its parameters brace is closed only when
 * the schema has a type, as in the template). */
static void gemma4_declaration(sink *s, const tn_chat_tool *t) {
    put(s, "<|tool>declaration:");
    text(s, t->name);
    put(s, "{description:<|\"|>");
    if (t->description)
        text(s, t->description);
    put(s, "<|\"|>");
    tn_json_doc *doc = NULL;
    if (t->parameters && s->rc == TN_OK &&
        tn_json_parse(t->parameters, strlen(t->parameters), "parameters", &doc, NULL) != TN_OK)
        s->rc = TN_ERR_NOMEM; /* checked: only memory fails here */
    const tn_json *params = doc ? tn_json_root(doc) : NULL;
    const view src = mkview(t->parameters);
    if (s->rc == TN_OK && truthy(params)) {
        put(s, ",parameters:{");
        const tn_json *props = dict_get(params, "properties");
        if (truthy(props)) {
            if (props->type != TN_JSON_OBJECT) {
                unsupported(s, G4_PROPERTIES);
            } else {
                put(s, "properties:{");
                g4_parameters(s, props, src);
                put(s, "},");
            }
        }
        const tn_json *req = dict_get(params, "required");
        if (truthy(req)) {
            put(s, "required:[");
            g4_items(s, req, src);
            put(s, "],");
        }
        const tn_json *type = dict_get(params, "type");
        if (truthy(type)) {
            tn_buf up = {0};
            type_upper(s, type, src, &up);
            put(s, "type:<|\"|>");
            text(s, up.data ? up.data : "");
            put(s, "<|\"|>}");
            tn_buf_free(&up);
        }
    }
    tn_json_free(doc);
    put(s, "}<tool|>");
}

/* Parses a call's arguments (checked before rendering: only memory can
 * fail here). */
static int parse_arguments(const char *args, tn_json_doc **doc, tn_error *err) {
    return tn_json_parse(args, strlen(args), "arguments", doc, err);
}

/* Message i's call k must carry JSON arguments (Gemma 4's and gpt-oss's
 * templates both parse them): a clear error before anything renders. */
static int check_arguments(const tn_chat_tool_call *tc, size_t i, size_t k, tn_error *err) {
    tn_json_doc *doc = NULL;
    tn_error jerr;
    int rc = parse_arguments(tc->arguments, &doc, &jerr);
    tn_json_free(doc);
    if (rc == TN_ERR_NOMEM)
        return tn_fail(err, rc, "chat template: out of memory rendering the prompt");
    if (rc != TN_OK)
        return tn_fail(err, TN_ERR_INVALID,
                       "message %zu, tool call %zu (%s): the arguments are not valid JSON: %s",
                       i, k, tc->name, jerr.message);
    return TN_OK;
}

/* <|tool_call>call:NAME{ARGS}<tool_call|>: an object's members unbraced
 * (the braces are the template's), a string as it is, anything else
 * nothing; no arguments at all are "{}". */
static void gemma4_tool_call(sink *s, const tn_chat_tool_call *call) {
    put(s, "<|tool_call>call:");
    text(s, call->name);
    put(s, "{");
    if (call->arguments && s->rc == TN_OK) {
        tn_json_doc *doc = NULL;
        if (parse_arguments(call->arguments, &doc, NULL) != TN_OK) {
            s->rc = TN_ERR_NOMEM;
            return;
        }
        const tn_json *root = tn_json_root(doc);
        view src = mkview(call->arguments);
        if (root->type == TN_JSON_OBJECT) {
            member *m;
            size_t n;
            s->rc = sorted_members(root, &m, &n);
            for (size_t i = 0; s->rc == TN_OK && i < n; i++) {
                if (i)
                    put(s, ",");
                textv(s, (view){m[i].key->key, m[i].key->key_len});
                put(s, ":");
                gemma4_value(s, m[i].val, src, false);
            }
            free(m);
        } else if (root->type == TN_JSON_STRING) {
            textv(s, (view){root->v.str, root->n});
        }
        tn_json_free(doc);
    }
    put(s, "}<tool_call|>");
}

static bool same_id(const char *a, const char *b) {
    /* The template compares with ==: two missing ids (None) are equal. */
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The function name a tool result is shown under: that of the (last) call
 * of its assistant message whose id equals its tool_call_id, else its own
 * name; NULL when neither (the template then fails on None). */
static const char *gemma4_result_name(const tn_chat_message *call_msg,
                                      const tn_chat_message *result) {
    const char *name = result->name;
    for (size_t c = 0; c < call_msg->n_tool_calls; c++)
        if (same_id(call_msg->tool_calls[c].id, result->tool_call_id))
            name = call_msg->tool_calls[c].name;
    return name;
}

static void render_gemma4(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    convo c = split_convo(m, n);
    gemma4_system(s, c.system, o->enable_thinking, o);
    /* What the last message ended with, as the template's prev_message_type:
     * after a call or its results the model's turn stays open and there is
     * no generation prompt (the model goes on in the same turn). */
    enum { PREV_NONE, PREV_CALL, PREV_RESULT } prev = PREV_NONE;
    bool prev_model = false; /* the previous message that is not a tool result */
    for (size_t i = c.first; i < n; i++) {
        if (m[i].role == TN_CHAT_ROLE_TOOL)
            continue; /* written with the call it answers (checked) */
        const bool model = m[i].role == TN_CHAT_ROLE_ASSISTANT;
        prev = PREV_NONE;
        if (!(model && prev_model)) {
            put(s, "<|turn>");
            put(s, model ? "model" : role_name(m[i].role));
            put(s, "\n");
        }
        prev_model = model;
        bool results = false;
        if (m[i].n_tool_calls > 0) {
            for (size_t k = 0; k < m[i].n_tool_calls; k++)
                gemma4_tool_call(s, &m[i].tool_calls[k]);
            prev = PREV_CALL;
            for (size_t k = i + 1; k < n && m[k].role == TN_CHAT_ROLE_TOOL; k++) {
                put(s, "<|tool_response>response:");
                text(s, gemma4_result_name(&m[i], &m[k]));
                put(s, "{value:<|\"|>");
                text(s, m[k].content);
                put(s, "<|\"|>}<tool_response|>");
                results = true;
                prev = PREV_RESULT;
            }
        }
        if (model)
            gemma4_model_content(s, mkview(m[i].content));
        else
            textv(s, py_strip(mkview(m[i].content)));
        if (prev == PREV_CALL)
            put(s, "<|tool_response>");
        else if (!(results && !m[i].content[0]))
            put(s, "<turn|>\n");
    }
    if (o->add_generation_prompt && prev == PREV_NONE)
        gemma4_generation_prompt(s, o->enable_thinking);
}

/* Gemma 4's rules for tool use, checked before rendering: a result follows
 * the call it answers (the template drops one that does not), is linked to
 * a function name, and arguments are JSON (llama.cpp parses them first and
 * refuses a request whose arguments are not). */
static int gemma4_check_tools(const tn_chat_message *m, size_t n, tn_error *err) {
    size_t call_msg = SIZE_MAX; /* the assistant message a run of results follows */
    for (size_t i = 0; i < n; i++) {
        if (m[i].role == TN_CHAT_ROLE_TOOL) {
            if (call_msg == SIZE_MAX)
                return tn_fail(err, TN_ERR_INVALID,
                               "chat template gemma4: message %zu is a tool result that does not "
                               "follow an assistant message with tool calls; the template shows "
                               "results only right after the calls they answer",
                               i);
            if (!gemma4_result_name(&m[call_msg], &m[i]))
                return tn_fail(err, TN_ERR_INVALID,
                               "chat template gemma4: tool result %zu names no function: give "
                               "the id of the call it answers (tool_call_id) or the function's "
                               "name",
                               i);
            continue;
        }
        call_msg = m[i].n_tool_calls > 0 ? i : SIZE_MAX;
        for (size_t k = 0; k < m[i].n_tool_calls; k++) {
            const tn_chat_tool_call *tc = &m[i].tool_calls[k];
            if (!tc->arguments)
                continue;
            int rc = check_arguments(tc, i, k, err);
            if (rc != TN_OK)
                return rc;
        }
    }
    return TN_OK;
}

/* gpt-oss: what the template sees of an assistant message. The session
 * streams an answer's analysis as "<think>X</think>Y"; llama.cpp hands the
 * template X (its reasoning_content) as "thinking", when not empty, and Y
 * as "content", erasing the content of a message with tool calls that has
 * thinking. */
typedef struct {
    view thinking, content;
    bool has_thinking, has_content;
} oss_parts;

static oss_parts gptoss_parts(const tn_chat_message *m) {
    view c = mkview(m->content ? m->content : ""); /* none beside calls: "" */
    oss_parts p = {{"", 0}, c, false, true};
    const char *et = find_last(c, "</think>");
    if (et) {
        view t = {c.p, (size_t)(et - c.p)};
        if (t.n >= 7 && !memcmp(t.p, "<think>", 7))
            t = (view){t.p + 7, t.n - 7};
        p.thinking = t;
        p.has_thinking = t.n > 0;
        p.content = (view){et + 8, (size_t)(c.p + c.n - (et + 8))};
    }
    if (p.has_thinking && m->n_tool_calls > 0)
        p.has_content = false;
    return p;
}

/* The template raises on a field holding an analysis or final channel
 * header. */
static bool gptoss_has_channel(view v) {
    return find_first(v, "<|channel|>analysis<|message|>") ||
           find_first(v, "<|channel|>final<|message|>");
}

/* json.dumps(value, ensure_ascii=False), what transformers' tojson filter
 * writes for a call's arguments once llama.cpp has parsed them: ", " and
 * ": " between items, keys in the object's order (a key given twice once,
 * at its first place, with its last value), strings escaped as
 * json_string, numbers as Python reads and writes them (py_number; a
 * float that overflows is Infinity). All of it derives from content. */
static void py_json(sink *s, const tn_json *v, view src) {
    if (s->rc != TN_OK)
        return;
    switch ((tn_json_type)v->type) {
    case TN_JSON_STRING: json_string(s, (view){v->v.str, v->n}); break;
    case TN_JSON_BOOL: text(s, v->b ? "true" : "false"); break;
    case TN_JSON_NULL: text(s, "null"); break;
    case TN_JSON_NUMBER: {
        size_t len = 0;
        const char *t = tn_json_number_text(v, src.p, src.n, &len);
        const bool integer =
            t && !memchr(t, '.', len) && !memchr(t, 'e', len) && !memchr(t, 'E', len);
        const double d = tn_json_num(v, 0);
        if (!integer && isinf(d))
            text(s, d < 0 ? "-Infinity" : "Infinity");
        else
            py_number(s, v, src);
        break;
    }
    case TN_JSON_ARRAY:
        text(s, "[");
        for (uint32_t i = 0; i < v->n; i++) {
            if (i)
                text(s, ", ");
            py_json(s, &v->v.items[i], src);
        }
        text(s, "]");
        break;
    case TN_JSON_OBJECT: {
        member *m;
        size_t n;
        s->rc = dict_members(v, cmp_first, &m, &n);
        if (s->rc != TN_OK)
            return;
        text(s, "{");
        for (size_t i = 0; i < n; i++) {
            if (i)
                text(s, ", ");
            json_string(s, (view){m[i].key->key, m[i].key->key_len});
            text(s, ": ");
            py_json(s, m[i].val, src);
        }
        text(s, "}");
        free(m);
        break;
    }
    }
}

/* ------------------------------------------- gpt-oss tool declarations */

/* The template's render_tool_namespace and render_typescript_type macros
 * over the schema as Python holds it (a dict: a key given twice has its
 * last value, at its first place), with their Jinja quirks kept: a nested
 * object's member types follow a newline and 16 spaces, a oneOf variant's
 * default 20 spaces; has_object_variants is set inside a loop and so never
 * seen (oneOf always lists its variants); "required" is tested with Python's
 * `in` (a string: a substring test; an object: its keys); lists are joined
 * with Python's str() of each item. Where jinja2 raises (a description or a
 * default concatenated that is not a string, properties that cannot be
 * iterated as a dict, `in` on a number) or would print Python's str() of a
 * list or an object, Tern refuses the schema (gptoss_refusal). */
enum oss_why {
    OSS_NO_DESCRIPTION = 1, /* "// " + an undefined description */
    OSS_PROPERTIES,         /* properties that are not an object */
    OSS_DESCRIPTION,        /* a property's or variant's description that is not a string */
    OSS_DEFAULT,            /* an enum's or oneOf's default that is not a string */
    OSS_REQUIRED,           /* required that `in` cannot search */
    OSS_CONTAINER,          /* Python's str() of a list or an object */
    OSS_ITERATE,            /* an enum or oneOf that is not a list */
};

static void oss_unsupported(sink *s, enum oss_why why) {
    if (s->rc != TN_OK)
        return;
    s->rc = TN_ERR_UNSUPPORTED;
    s->unsupported = why;
}

static bool json_is_str(const tn_json *v, const char *str) {
    return v && v->type == TN_JSON_STRING && v->n == strlen(str) && !memcmp(v->v.str, str, v->n);
}

/* str(v) of a scalar; containers refused. */
static void oss_str(sink *s, const tn_json *v, view src) {
    if (v && (v->type == TN_JSON_ARRAY || v->type == TN_JSON_OBJECT))
        oss_unsupported(s, OSS_CONTAINER);
    else
        py_str(s, v, src);
}

/* list | join(sep): the items' str() between sep (a string or an object
 * would be iterated by character or key: refused). */
static void oss_join(sink *s, const tn_json *list, const char *sep, view src) {
    if (list->type != TN_JSON_ARRAY) {
        oss_unsupported(s, OSS_ITERATE);
        return;
    }
    for (uint32_t i = 0; i < list->n; i++) {
        if (i)
            text(s, sep);
        oss_str(s, &list->v.items[i], src);
    }
}

/* name in (required or []). */
static bool oss_required(sink *s, const tn_json *req, view name) {
    if (!truthy(req))
        return false;
    switch ((tn_json_type)req->type) {
    case TN_JSON_STRING: return name.n == 0 || memmem(req->v.str, req->n, name.p, name.n);
    case TN_JSON_ARRAY:
        for (uint32_t i = 0; i < req->n; i++) {
            const tn_json *e = &req->v.items[i];
            if (e->type == TN_JSON_STRING && e->n == name.n && !memcmp(e->v.str, name.p, name.n))
                return true;
        }
        return false;
    case TN_JSON_OBJECT:
        for (uint32_t i = 0; i < req->n; i++)
            if (req->v.items[i].key_len == name.n &&
                !memcmp(req->v.items[i].key, name.p, name.n))
                return true;
        return false;
    default: oss_unsupported(s, OSS_REQUIRED); return false;
    }
}

/* "// " + v: a string, or refused (TypeError) when truthy; nothing when not. */
static bool oss_comment(sink *s, const tn_json *v) {
    if (!truthy(v))
        return false;
    if (v->type != TN_JSON_STRING) {
        oss_unsupported(s, OSS_DESCRIPTION);
        return false;
    }
    put(s, "// ");
    textv(s, (view){v->v.str, v->n});
    return true;
}

static size_t utf8_chars(const char *p, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)p[i] & 0xC0) != 0x80;
    return k;
}

static void oss_type(sink *s, const tn_json *spec, view src);

/* An object's members as "{\nNAME?: \n                TYPE, ...}". */
static void oss_object(sink *s, const tn_json *spec, const tn_json *props, view src) {
    if (props->type != TN_JSON_OBJECT) {
        oss_unsupported(s, OSS_PROPERTIES);
        return;
    }
    member *m;
    size_t n;
    if (s->rc == TN_OK)
        s->rc = dict_members(props, cmp_first, &m, &n);
    if (s->rc != TN_OK)
        return;
    const tn_json *req = dict_get(spec, "required");
    put(s, "{\n");
    for (size_t i = 0; i < n && s->rc == TN_OK; i++) {
        const view name = {m[i].key->key, m[i].key->key_len};
        textv(s, name);
        if (!oss_required(s, req, name))
            put(s, "?");
        put(s, ": \n                ");
        oss_type(s, m[i].val, src);
        if (i + 1 < n)
            put(s, ", ");
    }
    put(s, "}");
    free(m);
}

/* array: its items' type + "[]" (the simple ones named, others rendered
 * and replaced by any[] when "object | object" or over 50 characters). */
static void oss_array(sink *s, const tn_json *spec, view src) {
    const tn_json *items = dict_get(spec, "items");
    if (!truthy(items)) {
        put(s, "any[]");
    } else {
        const tn_json *it = dict_get(items, "type");
        if (json_is_str(it, "string")) {
            put(s, "string[]");
        } else if (json_is_str(it, "number") || json_is_str(it, "integer")) {
            put(s, "number[]");
        } else if (json_is_str(it, "boolean")) {
            put(s, "boolean[]");
        } else {
            tn_buf inner = {0};
            sink sub = {&inner, TN_OK, NULL, 0};
            put(&sub, "");
            oss_type(&sub, items, src);
            if (sub.rc != TN_OK) {
                if (s->rc == TN_OK) {
                    s->rc = sub.rc;
                    s->unsupported = sub.unsupported;
                }
            } else if (!strcmp(inner.data, "object | object") ||
                       utf8_chars(inner.data, inner.len) > 50) {
                put(s, "any[]");
            } else {
                textv(s, (view){inner.data, inner.len});
                put(s, "[]");
            }
            tn_buf_free(&inner);
        }
    }
    if (truthy(dict_get(spec, "nullable")))
        put(s, " | null");
}

/* oneOf: each variant's type, its description and default after it. */
static void oss_one_of(sink *s, const tn_json *variants, view src) {
    if (variants->type != TN_JSON_ARRAY) {
        oss_unsupported(s, OSS_ITERATE);
        return;
    }
    for (uint32_t i = 0; i < variants->n && s->rc == TN_OK; i++) {
        const tn_json *v = &variants->v.items[i];
        oss_type(s, v, src);
        oss_comment(s, dict_get(v, "description"));
        const tn_json *def = dict_get(v, "default");
        if (def) {
            put(s, "                    // default: ");
            py_json(s, def, src);
        }
        if (i + 1 < variants->n)
            put(s, " | \n");
    }
}

/* render_typescript_type(spec). */
static void oss_type(sink *s, const tn_json *spec, view src) {
    if (s->rc != TN_OK)
        return;
    const tn_json *type = dict_get(spec, "type"), *one_of = dict_get(spec, "oneOf");
    if (json_is_str(type, "array")) {
        oss_array(s, spec, src);
    } else if (type && type->type == TN_JSON_ARRAY && type->n > 0) {
        oss_join(s, type, " | ", src);
    } else if (truthy(one_of)) {
        oss_one_of(s, one_of, src);
    } else if (json_is_str(type, "string")) {
        const tn_json *e = dict_get(spec, "enum");
        if (truthy(e)) {
            put(s, "\"");
            oss_join(s, e, "\" | \"", src);
            put(s, "\"");
        } else {
            put(s, "string");
            if (truthy(dict_get(spec, "nullable")))
                put(s, " | null");
        }
    } else if (json_is_str(type, "number") || json_is_str(type, "integer")) {
        put(s, "number");
    } else if (json_is_str(type, "boolean")) {
        put(s, "boolean");
    } else if (json_is_str(type, "object")) {
        const tn_json *props = dict_get(spec, "properties");
        if (truthy(props))
            oss_object(s, spec, props, src);
        else
            put(s, "object");
    } else {
        put(s, "any");
    }
}

/* One tool of render_tool_namespace: "// D\ntype NAME = (_: {...}) => any;\n\n". */
static void gptoss_declaration(sink *s, const tn_chat_tool *t) {
    if (!t->description) {
        oss_unsupported(s, OSS_NO_DESCRIPTION);
        return;
    }
    put(s, "// ");
    text(s, t->description);
    put(s, "\ntype ");
    text(s, t->name);
    put(s, " = ");
    tn_json_doc *doc = NULL;
    if (t->parameters && s->rc == TN_OK &&
        tn_json_parse(t->parameters, strlen(t->parameters), "parameters", &doc, NULL) != TN_OK)
        s->rc = TN_ERR_NOMEM; /* checked: only memory fails here */
    const tn_json *params = doc ? tn_json_root(doc) : NULL;
    const tn_json *props = truthy(params) ? dict_get(params, "properties") : NULL;
    const view src = mkview(t->parameters);
    if (s->rc == TN_OK && truthy(props)) {
        member *m = NULL;
        size_t n = 0;
        if (props->type != TN_JSON_OBJECT)
            oss_unsupported(s, OSS_PROPERTIES);
        else
            s->rc = dict_members(props, cmp_first, &m, &n);
        const tn_json *req = dict_get(params, "required");
        put(s, "(_: {\n");
        for (size_t i = 0; i < n && s->rc == TN_OK; i++) {
            const tn_json *spec = m[i].val;
            if (oss_comment(s, dict_get(spec, "description")))
                put(s, "\n");
            const view name = {m[i].key->key, m[i].key->key_len};
            textv(s, name);
            if (!oss_required(s, req, name))
                put(s, "?");
            put(s, ": ");
            oss_type(s, spec, src);
            const tn_json *def = dict_get(spec, "default");
            const bool is_enum = truthy(dict_get(spec, "enum"));
            if (def && (is_enum || truthy(dict_get(spec, "oneOf")))) {
                if (def->type != TN_JSON_STRING) {
                    oss_unsupported(s, OSS_DEFAULT);
                } else {
                    put(s, is_enum ? ", // default: " : "// default: ");
                    textv(s, (view){def->v.str, def->n});
                }
            } else if (def) {
                put(s, ", // default: ");
                py_json(s, def, src);
            }
            put(s, ",\n");
        }
        free(m);
        put(s, "}) => any;\n\n");
    } else {
        put(s, "() => any;\n\n");
    }
    tn_json_free(doc);
}

static void gptoss_analysis(sink *s, view v) {
    put(s, "<|start|>assistant<|channel|>analysis<|message|>");
    textv(s, v);
    put(s, "<|end|>");
}

/* The template, message by message (gptoss_check has refused what it
 * raises on): a message with tool calls shows its first call only ("we
 * assume max 1 tool call per message"), as
 * <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>ARGS<|call|>,
 * after its content or thinking in the analysis channel unless an answer
 * without calls follows later; a tool result is written from
 * functions.NAME, NAME that of the last call shown (a later answer without
 * calls forgets it), its content JSON-quoted; answers in the final
 * channel, the last one with its thinking and <|return|> when no
 * generation prompt follows. */
static void render_gptoss(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    convo c = split_convo(m, n);
    gptoss_system(s, c.system, o);
    const char *last_call = NULL;
    for (size_t i = c.first; i < n; i++) {
        if (m[i].role == TN_CHAT_ROLE_USER) {
            gptoss_user(s, mkview(m[i].content));
            continue;
        }
        if (m[i].role == TN_CHAT_ROLE_TOOL) {
            put(s, "<|start|>functions.");
            text(s, last_call ? last_call : "");
            put(s, " to=assistant<|channel|>commentary<|message|>");
            json_string(s, mkview(m[i].content));
            put(s, "<|end|>");
            continue;
        }
        if (m[i].role != TN_CHAT_ROLE_ASSISTANT)
            continue; /* a later system message: refused before */
        const oss_parts p = gptoss_parts(&m[i]);
        if (m[i].n_tool_calls > 0) {
            bool answer_later = false;
            for (size_t k = i + 1; k < n && !answer_later; k++)
                answer_later = m[k].role == TN_CHAT_ROLE_ASSISTANT && m[k].n_tool_calls == 0;
            if (!answer_later && p.has_content && p.content.n)
                gptoss_analysis(s, p.content);
            else if (!answer_later && p.has_thinking)
                gptoss_analysis(s, p.thinking);
            const tn_chat_tool_call *tc = &m[i].tool_calls[0];
            put(s, "<|start|>assistant to=functions.");
            text(s, tc->name);
            put(s, "<|channel|>commentary json<|message|>");
            tn_json_doc *doc = NULL;
            if (s->rc == TN_OK && parse_arguments(tc->arguments, &doc, NULL) != TN_OK)
                s->rc = TN_ERR_NOMEM; /* checked: only memory fails here */
            if (s->rc == TN_OK)
                py_json(s, tn_json_root(doc), mkview(tc->arguments));
            tn_json_free(doc);
            put(s, "<|call|>");
            last_call = tc->name;
        } else if (i + 1 == n && !o->add_generation_prompt) {
            if (p.has_thinking)
                gptoss_analysis(s, p.thinking);
            put(s, "<|start|>assistant<|channel|>final<|message|>");
            textv(s, p.content);
            put(s, "<|return|>");
        } else {
            put(s, "<|start|>assistant<|channel|>final<|message|>");
            textv(s, p.content);
            put(s, "<|end|>");
            last_call = NULL;
        }
    }
    if (o->add_generation_prompt)
        put(s, "<|start|>assistant");
}

/* What the gpt-oss template raises on, refused with its reason: a channel
 * header in an answer, a tool result with no call before it, a call
 * without arguments (tojson of nothing); and what llama.cpp refuses before
 * rendering: arguments that are not JSON. */
static int gptoss_check(const tn_chat_message *m, size_t n, tn_error *err) {
    convo c = split_convo(m, n);
    bool have_call = false;
    for (size_t i = c.first; i < n; i++) {
        if (m[i].role == TN_CHAT_ROLE_TOOL && !have_call)
            return tn_fail(err, TN_ERR_INVALID,
                           "chat template gpt-oss: message %zu is a tool result, but there was "
                           "no assistant message with a tool call before it (the template "
                           "names a result after the last call)",
                           i);
        if (m[i].role != TN_CHAT_ROLE_ASSISTANT)
            continue;
        const oss_parts p = gptoss_parts(&m[i]);
        if ((p.has_thinking && gptoss_has_channel(p.thinking)) ||
            (p.has_content && gptoss_has_channel(p.content)))
            return tn_fail(err, TN_ERR_INVALID,
                           "chat template gpt-oss: message %zu contains a <|channel|> header; "
                           "pass an answer's analysis as <think>...</think> and its final text "
                           "after it, without harmony's markup",
                           i);
        if (m[i].n_tool_calls == 0) {
            have_call = false;
            continue;
        }
        have_call = true;
        for (size_t k = 0; k < m[i].n_tool_calls; k++) {
            const tn_chat_tool_call *tc = &m[i].tool_calls[k];
            if (!tc->arguments) {
                if (k > 0)
                    continue; /* the template shows the first call only */
                return tn_fail(err, TN_ERR_INVALID,
                               "chat template gpt-oss: message %zu, tool call %zu (%s) has no "
                               "arguments; the template writes them as JSON (give \"{}\" for "
                               "none)",
                               i, k, tc->name);
            }
            int rc = check_arguments(tc, i, k, err);
            if (rc != TN_OK)
                return rc;
        }
    }
    return TN_OK;
}

/* Llama 2: the system block is glued to the first message's content and the
 * whole is strip()ped; every user turn but the first opens with BOS. */
static void render_llama2(sink *s, const tn_chat_message *m, size_t n) {
    convo c = split_convo(m, n);
    tn_buf tmp = {0};
    for (size_t i = c.first; i < n && s->rc == TN_OK; i++) {
        view content = mkview(m[i].content);
        if (i == c.first && c.system) {
            tmp.len = 0;
            sink t = {&tmp, TN_OK, NULL, 0};
            put(&t, "<<SYS>>\n");
            put(&t, c.system);
            put(&t, "\n<</SYS>>\n\n");
            putv(&t, content);
            if (t.rc != TN_OK) {
                s->rc = t.rc;
                break;
            }
            content = (view){tmp.data, tmp.len};
        }
        if (m[i].role == TN_CHAT_ROLE_USER) {
            if (i != c.first)
                put(s, BOS_TEXT);
            put(s, "[INST] ");
            /* The glued "<<SYS>>" block is plain text in Llama 2's
             * vocabulary, so it may count as content. */
            textv(s, py_strip(content));
            put(s, " [/INST]");
        } else if (m[i].role == TN_CHAT_ROLE_ASSISTANT) {
            put(s, " ");
            textv(s, py_strip(content));
            put(s, " " EOS_TEXT);
        }
    }
    tn_buf_free(&tmp);
}

/* The Mistral generations: where the system prompt goes and the spaces
 * around the markers differ. */
static void render_mistral(sink *s, tn_chat_kind kind, const tn_chat_message *m, size_t n) {
    convo c = split_convo(m, n);
    const char *open = kind == TN_CHAT_MISTRAL_V1 ? " [INST] " : "[INST] ";
    const char *close = kind == TN_CHAT_MISTRAL_V3 ? "[/INST]" : " [/INST]";
    size_t system_at = SIZE_MAX; /* the user message that carries the system prompt */
    if (c.system) {
        if (kind == TN_CHAT_MISTRAL_V3) {
            for (size_t i = n; i-- > c.first;)
                if (m[i].role == TN_CHAT_ROLE_USER) {
                    system_at = i;
                    break;
                }
        } else if (c.first < n && m[c.first].role == TN_CHAT_ROLE_USER) {
            system_at = c.first;
        }
    }
    for (size_t i = c.first; i < n; i++) {
        view content = mkview(m[i].content);
        if (m[i].role == TN_CHAT_ROLE_USER) {
            put(s, open);
            if (i == system_at) {
                text(s, c.system);
                put(s, "\n\n");
            }
            textv(s, content);
            put(s, close);
        } else if (m[i].role == TN_CHAT_ROLE_ASSISTANT) {
            if (kind == TN_CHAT_MISTRAL_V1) {
                put(s, " ");
                textv(s, content);
            } else if (kind == TN_CHAT_MISTRAL_V3) {
                put(s, " ");
                textv(s, py_strip(content));
            } else {
                textv(s, content);
            }
            put(s, EOS_TEXT);
        }
    }
}

/* Kinds whose templates render a "tool" message: Qwen3 as <tool_response>
 * in a user turn, Llama 3.1 as "ipython", ChatML, Llama 3 and Gemma 3 with
 * the role's own name, Gemma 4 inside the model turn that made the call,
 * gpt-oss from functions.NAME (NAME that of the call before it). Llama 2
 * drops other roles and the Mistral templates raise an exception (or want
 * tool call ids): refused there. */
static bool has_tool_role(tn_chat_kind kind) {
    return kind == TN_CHAT_CHATML || kind == TN_CHAT_QWEN3 || kind == TN_CHAT_LLAMA3 ||
           kind == TN_CHAT_LLAMA31 || kind == TN_CHAT_GEMMA3 || kind == TN_CHAT_GEMMA4 ||
           kind == TN_CHAT_GPTOSS;
}

static bool system_anywhere(tn_chat_kind kind) {
    return kind == TN_CHAT_CHATML || kind == TN_CHAT_QWEN3 || kind == TN_CHAT_LLAMA3 ||
           kind == TN_CHAT_LLAMA31 || kind == TN_CHAT_GEMMA4;
}

/* Why a Gemma 4 declaration is refused, one message per case. */
static int gemma4_refusal(int why, size_t i, const char *name, tn_error *err) {
    const int rc = TN_ERR_UNSUPPORTED;
    switch ((enum g4_why)why) {
    case G4_STR_OF_CONTAINER:
        return tn_fail(err, rc,
                       "chat template gemma4: tool %zu (%s): the schema has a list or an object "
                       "where the template prints Python's str() of it, which Tern does not "
                       "reproduce",
                       i, name);
    case G4_TYPE_LIST:
        return tn_fail(err, rc,
                       "chat template gemma4: tool %zu (%s): a type list may hold only plain "
                       "ASCII strings (the template prints Python's str() of it)",
                       i, name);
    case G4_TYPE_OBJECT:
        return tn_fail(err, rc, "chat template gemma4: tool %zu (%s): a type is an object", i,
                       name);
    case G4_TYPE_NOT_ASCII:
        return tn_fail(err, rc,
                       "chat template gemma4: tool %zu (%s): a type is not ASCII (the template "
                       "upper-cases it as Python does, which Tern does not reproduce)",
                       i, name);
    case G4_REQUIRED_SCALAR:
        return tn_fail(err, rc,
                       "chat template gemma4: tool %zu (%s): required is a number, a boolean or "
                       "null, which the template cannot iterate",
                       i, name);
    case G4_ITEMS_TYPE:
        return tn_fail(err, rc,
                       "chat template gemma4: tool %zu (%s): an items type is neither a string "
                       "nor a list of strings",
                       i, name);
    case G4_PROPERTIES:
        return tn_fail(err, rc,
                       "chat template gemma4: tool %zu (%s): properties is not an object (the "
                       "template raises)",
                       i, name);
    }
    return tn_fail(err, rc, "chat template gemma4: tool %zu (%s): Tern cannot render this schema",
                   i, name);
}

/* Why a gpt-oss declaration is refused: what jinja2 raises on with the
 * template, or would print as Python's str() of a container. */
static int gptoss_refusal(int why, size_t i, const char *name, tn_error *err) {
    const int rc = TN_ERR_UNSUPPORTED;
    switch ((enum oss_why)why) {
    case OSS_NO_DESCRIPTION:
        return tn_fail(err, rc,
                       "chat template gpt-oss: tool %zu (%s) has no description, which the "
                       "template writes as a comment (it raises without one); give one, even \"\"",
                       i, name);
    case OSS_PROPERTIES:
        return tn_fail(err, rc,
                       "chat template gpt-oss: tool %zu (%s): properties is not an object (the "
                       "template raises)",
                       i, name);
    case OSS_DESCRIPTION:
        return tn_fail(err, rc,
                       "chat template gpt-oss: tool %zu (%s): a description in the schema is "
                       "not a string (the template raises)",
                       i, name);
    case OSS_DEFAULT:
        return tn_fail(err, rc,
                       "chat template gpt-oss: tool %zu (%s): the default of an enum or oneOf "
                       "property is not a string (the template raises)",
                       i, name);
    case OSS_REQUIRED:
        return tn_fail(err, rc,
                       "chat template gpt-oss: tool %zu (%s): required is a number or a "
                       "boolean, which the template cannot search (it raises)",
                       i, name);
    case OSS_CONTAINER:
        return tn_fail(err, rc,
                       "chat template gpt-oss: tool %zu (%s): a type list or an enum holds a list "
                       "or an object, which the template prints as Python's str() of it; Tern "
                       "does not reproduce that",
                       i, name);
    case OSS_ITERATE:
        return tn_fail(err, rc,
                       "chat template gpt-oss: tool %zu (%s): an enum or oneOf is not a list",
                       i, name);
    }
    return tn_fail(err, rc,
                   "chat template gpt-oss: tool %zu (%s): Tern cannot render this schema", i,
                   name);
}

/* Tool definitions: refused by the kinds that cannot show them (a model
 * that is never told of its tools would answer as if it had none), and
 * checked where they render: a name, and parameters that are a JSON
 * object. */
static int check_tools(tn_chat_kind kind, const tn_chat_options *o, tn_error *err) {
    if (!o || o->n_tools == 0)
        return TN_OK;
    if (!tn_chat_kind_renders_tools(kind))
        return tn_fail(err, TN_ERR_UNSUPPORTED,
                       "chat template %s: Tern cannot show this model tool definitions (it "
                       "renders them for qwen3, gemma4 and gpt-oss only); send the request without "
                       "tools",
                       kind_names[kind]);
    if (!o->tools)
        return tn_fail(err, TN_ERR_INVALID, "chat template: no tools");
    for (size_t i = 0; i < o->n_tools; i++) {
        const tn_chat_tool *t = &o->tools[i];
        if (!t->name || !t->name[0])
            return tn_fail(err, TN_ERR_INVALID, "chat template: tool %zu has no function name", i);
        if (t->parameters) {
            tn_json_doc *doc = NULL;
            tn_error jerr;
            int rc =
                tn_json_parse(t->parameters, strlen(t->parameters), "parameters", &doc, &jerr);
            const bool object = rc == TN_OK && tn_json_root(doc)->type == TN_JSON_OBJECT;
            tn_json_free(doc);
            if (rc == TN_ERR_NOMEM)
                return tn_fail(err, rc, "chat template: out of memory rendering the prompt");
            if (rc != TN_OK)
                return tn_fail(err, TN_ERR_INVALID,
                               "tool %zu (%s): the parameters are not valid JSON: %s", i, t->name,
                               jerr.message);
            if (!object)
                return tn_fail(err, TN_ERR_INVALID,
                               "tool %zu (%s): the parameters must be a JSON object (a JSON "
                               "schema)",
                               i, t->name);
        }
        /* The dry renders run without parameters too: gpt-oss refuses a
         * tool without a description whatever its schema, and that refusal,
         * met first in the real render, was reported as running out of
         * memory. */
        if (kind == TN_CHAT_GEMMA4) {
            /* A dry render finds what Gemma 4's declaration cannot show. */
            tn_buf tmp = {0};
            sink d = {&tmp, TN_OK, NULL, 0};
            gemma4_declaration(&d, t);
            tn_buf_free(&tmp);
            if (d.rc == TN_ERR_UNSUPPORTED)
                return gemma4_refusal(d.unsupported, i, t->name, err);
            if (d.rc != TN_OK)
                return tn_fail(err, d.rc, "chat template: out of memory rendering the prompt");
        }
        if (kind == TN_CHAT_GPTOSS) {
            tn_buf tmp = {0};
            sink d = {&tmp, TN_OK, NULL, 0};
            gptoss_declaration(&d, t);
            tn_buf_free(&tmp);
            if (d.rc == TN_ERR_UNSUPPORTED)
                return gptoss_refusal(d.unsupported, i, t->name, err);
            if (d.rc != TN_OK)
                return tn_fail(err, d.rc, "chat template: out of memory rendering the prompt");
        }
    }
    return TN_OK;
}

/* The split renders serve pins, which hold no tools. */
static int no_tools(const tn_chat_options *o, tn_error *err) {
    if (o && o->n_tools > 0)
        return tn_fail(err, TN_ERR_INVALID,
                       "chat template: tool definitions need a whole conversation "
                       "(tn_chat_render), not a pinned system prompt and turn");
    return TN_OK;
}

static int check_args(tn_chat_kind kind, tn_buf *out, tn_error *err) {
    if ((int)kind < 0 || kind >= TN_CHAT_KIND_COUNT_)
        return tn_fail(err, TN_ERR_INVALID, "unknown chat template kind %d", (int)kind);
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "chat template: no output buffer");
    return TN_OK;
}

static int finish(sink *s, size_t start_len, size_t start_spans, tn_error *err) {
    if (s->rc == TN_OK)
        return TN_OK;
    if (s->spans)
        s->spans->n = start_spans;
    /* Leave the buffer as it was. */
    if (s->out->data) {
        s->out->len = start_len;
        s->out->data[start_len] = '\0';
    }
    return tn_fail(err, s->rc, "chat template: out of memory rendering the prompt");
}

int tn_chat_render(tn_chat_kind kind, const tn_chat_message *msgs, size_t n_msgs,
                   const tn_chat_options *opts, tn_buf *out, tn_error *err) {
    return tn_chat_render_spans(kind, msgs, n_msgs, opts, out, NULL, err);
}

int tn_chat_render_system(tn_chat_kind kind, const char *system, const tn_chat_options *opts,
                          tn_buf *out, tn_error *err) {
    return tn_chat_render_system_spans(kind, system, opts, out, NULL, err);
}

int tn_chat_render_turn(tn_chat_kind kind, bool has_system, const char *user,
                        const tn_chat_options *opts, tn_buf *out, tn_error *err) {
    return tn_chat_render_turn_spans(kind, has_system, user, opts, out, NULL, err);
}

int tn_chat_render_spans(tn_chat_kind kind, const tn_chat_message *msgs, size_t n_msgs,
                         const tn_chat_options *opts, tn_buf *out, tn_text_spans *content,
                         tn_error *err) {
    int rc = check_args(kind, out, err);
    if (rc != TN_OK)
        return rc;
    if (n_msgs && !msgs)
        return tn_fail(err, TN_ERR_INVALID, "chat template: no messages");
    size_t no_content = 0; /* assistant messages with calls and no content */
    for (size_t i = 0; i < n_msgs; i++) {
        if ((int)msgs[i].role < 0 || (int)msgs[i].role > TN_CHAT_ROLE_TOOL)
            return tn_fail(err, TN_ERR_INVALID, "chat template: message %zu has role %d", i,
                           (int)msgs[i].role);
        if (msgs[i].n_tool_calls > 0) {
            if (msgs[i].role != TN_CHAT_ROLE_ASSISTANT || !msgs[i].tool_calls)
                return tn_fail(err, TN_ERR_INVALID,
                               "chat template: message %zu has tool calls, which only an "
                               "assistant message makes",
                               i);
            for (size_t k = 0; k < msgs[i].n_tool_calls; k++)
                if (!msgs[i].tool_calls[k].name)
                    return tn_fail(err, TN_ERR_INVALID,
                                   "chat template: message %zu, tool call %zu has no function "
                                   "name",
                                   i, k);
        }
        if (!msgs[i].content) {
            if (msgs[i].n_tool_calls == 0)
                return tn_fail(err, TN_ERR_INVALID, "chat template: message %zu has no content",
                               i);
            no_content++;
        }
        if (msgs[i].role == TN_CHAT_ROLE_TOOL && !has_tool_role(kind))
            return tn_fail(err, TN_ERR_INVALID,
                           "chat template %s: message %zu is a tool result, and this template "
                           "has no tool role",
                           kind_names[kind], i);
        if (msgs[i].role == TN_CHAT_ROLE_SYSTEM && i > 0 && !system_anywhere(kind))
            return tn_fail(err, TN_ERR_INVALID,
                           "chat template %s: a system message may only come first",
                           kind_names[kind]);
    }
    rc = check_tools(kind, opts, err);
    if (rc != TN_OK)
        return rc;
    if (kind == TN_CHAT_GEMMA4) {
        rc = gemma4_check_tools(msgs, n_msgs, err);
        if (rc != TN_OK)
            return rc;
    }
    if (kind == TN_CHAT_GPTOSS) {
        rc = gptoss_check(msgs, n_msgs, err);
        if (rc != TN_OK)
            return rc;
    }
    /* A call without content renders as one with "" (what llama.cpp passes
     * the template for a null content). */
    tn_chat_message *copy = NULL;
    if (no_content) {
        copy = malloc(n_msgs * sizeof *copy);
        if (!copy)
            return tn_fail(err, TN_ERR_NOMEM, "chat template: out of memory rendering the prompt");
        memcpy(copy, msgs, n_msgs * sizeof *copy);
        for (size_t i = 0; i < n_msgs; i++)
            if (!copy[i].content)
                copy[i].content = "";
        msgs = copy;
    }
    tn_chat_options o = opts ? *opts : tn_chat_default_options();
    size_t start = out->len, start_spans = content ? content->n : 0;
    sink s = {out, TN_OK, content, 0};
    /* An empty render still leaves a NUL-terminated buffer. */
    put(&s, "");
    switch (kind) {
    case TN_CHAT_CHATML: render_chatml(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_QWEN3: render_qwen3(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_LLAMA3: render_llama3(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_LLAMA31: render_llama31(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_GEMMA3: render_gemma3(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_GEMMA4: render_gemma4(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_GPTOSS: render_gptoss(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_LLAMA2: render_llama2(&s, msgs, n_msgs); break;
    case TN_CHAT_MISTRAL:
    case TN_CHAT_MISTRAL_V1:
    case TN_CHAT_MISTRAL_V3: render_mistral(&s, kind, msgs, n_msgs); break;
    case TN_CHAT_KIND_COUNT_: break;
    }
    free(copy);
    return finish(&s, start, start_spans, err);
}

int tn_chat_render_system_spans(tn_chat_kind kind, const char *system,
                                const tn_chat_options *opts, tn_buf *out, tn_text_spans *content,
                                tn_error *err) {
    int rc = check_args(kind, out, err);
    if (rc == TN_OK)
        rc = no_tools(opts, err);
    if (rc != TN_OK)
        return rc;
    tn_chat_options o = opts ? *opts : tn_chat_default_options();
    size_t start = out->len, start_spans = content ? content->n : 0;
    sink s = {out, TN_OK, content, 0};
    put(&s, "");
    switch (kind) {
    case TN_CHAT_CHATML:
    case TN_CHAT_QWEN3:
        if (system)
            chatml_turn(&s, "system", mkview(system));
        break;
    case TN_CHAT_LLAMA3:
        if (system)
            llama3_turn(&s, "system", mkview(system));
        break;
    case TN_CHAT_LLAMA31: llama31_system(&s, system, &o); break;
    case TN_CHAT_GEMMA3:
        if (system) {
            gemma3_open(&s, TN_CHAT_ROLE_USER);
            text(&s, system);
            put(&s, "\n\n");
        }
        break;
    case TN_CHAT_GEMMA4:
        /* Gemma 4's thinking switch lives in the system turn, which a pin
         * fixes: pinned prompts are rendered with thinking off (the
         * template's default), whatever opts says (render_turn matches). */
        gemma4_system(&s, system, false, NULL);
        break;
    case TN_CHAT_GPTOSS: gptoss_system(&s, system, &o); break;
    case TN_CHAT_LLAMA2:
        /* strip() of the glued content cannot reach into the system block
         * while the user text has something that is not whitespace. */
        if (system) {
            put(&s, "[INST] <<SYS>>\n");
            text(&s, system);
            put(&s, "\n<</SYS>>\n\n");
        }
        break;
    case TN_CHAT_MISTRAL:
    case TN_CHAT_MISTRAL_V1:
    case TN_CHAT_MISTRAL_V3:
        if (system) {
            put(&s, kind == TN_CHAT_MISTRAL_V1 ? " [INST] " : "[INST] ");
            text(&s, system);
            put(&s, "\n\n");
        }
        break;
    case TN_CHAT_KIND_COUNT_: break;
    }
    return finish(&s, start, start_spans, err);
}

int tn_chat_render_turn_spans(tn_chat_kind kind, bool has_system, const char *user,
                              const tn_chat_options *opts, tn_buf *out, tn_text_spans *content,
                              tn_error *err) {
    int rc = check_args(kind, out, err);
    if (rc == TN_OK)
        rc = no_tools(opts, err);
    if (rc != TN_OK)
        return rc;
    if (!user)
        return tn_fail(err, TN_ERR_INVALID, "chat template: no user text");
    tn_chat_options o = opts ? *opts : tn_chat_default_options();
    view u = mkview(user);
    /* Llama 2's template strips the system block glued to the user text:
     * with nothing but white space after it, the strip reaches into the
     * block's "\n\n", which a pinned system part already holds. Refused
     * rather than rendered unlike the template (tests/fuzz/fuzz-chat.c). */
    if (kind == TN_CHAT_LLAMA2 && has_system && rstrip_len(u) == 0)
        return tn_fail(err, TN_ERR_INVALID,
                       "the message is empty: with a system prompt, Llama 2's chat template "
                       "needs some text in it");
    size_t start = out->len, start_spans = content ? content->n : 0;
    sink s = {out, TN_OK, content, 0};
    put(&s, "");
    switch (kind) {
    case TN_CHAT_CHATML:
        chatml_turn(&s, "user", u);
        put(&s, "<|im_start|>assistant\n");
        break;
    case TN_CHAT_QWEN3:
        chatml_turn(&s, "user", u);
        qwen3_generation_prompt(&s, &o);
        break;
    case TN_CHAT_LLAMA3:
    case TN_CHAT_LLAMA31:
        llama3_turn(&s, "user", u);
        put(&s, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case TN_CHAT_GEMMA3:
        if (!has_system)
            gemma3_open(&s, TN_CHAT_ROLE_USER);
        textv(&s, py_strip(u));
        put(&s, "<end_of_turn>\n<start_of_turn>model\n");
        break;
    case TN_CHAT_GEMMA4:
        (void)has_system; /* the system turn, if any, is closed already */
        put(&s, "<|turn>user\n");
        textv(&s, py_strip(u));
        put(&s, "<turn|>\n");
        gemma4_generation_prompt(&s, false); /* thinking off: see render_system */
        break;
    case TN_CHAT_GPTOSS:
        gptoss_user(&s, u);
        put(&s, "<|start|>assistant");
        break;
    case TN_CHAT_LLAMA2:
        if (has_system) {
            /* The template strips the glued "<<SYS>>...\n\n" + user: only
             * the user's trailing whitespace goes. */
            u.n = rstrip_len(u);
            textv(&s, u);
        } else {
            put(&s, "[INST] ");
            textv(&s, py_strip(u));
        }
        put(&s, " [/INST]");
        break;
    case TN_CHAT_MISTRAL:
    case TN_CHAT_MISTRAL_V1:
    case TN_CHAT_MISTRAL_V3:
        if (!has_system)
            put(&s, kind == TN_CHAT_MISTRAL_V1 ? " [INST] " : "[INST] ");
        textv(&s, u);
        put(&s, kind == TN_CHAT_MISTRAL_V3 ? "[/INST]" : " [/INST]");
        break;
    case TN_CHAT_KIND_COUNT_: break;
    }
    return finish(&s, start, start_spans, err);
}
