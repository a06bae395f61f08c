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
#include "tn-unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ tn_buf */

void tn_buf_free(tn_buf *b) {
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int tn_buf_append(tn_buf *b, const char *s, size_t n) {
    if (!b || (!s && n))
        return TN_ERR_INVALID;
    if (n > SIZE_MAX - b->len - 1)
        return TN_ERR_NOMEM;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : cap * 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return TN_ERR_NOMEM;
        b->data = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return TN_OK;
}

int tn_buf_append_str(tn_buf *b, const char *s) {
    if (!s)
        return TN_ERR_INVALID;
    return tn_buf_append(b, s, strlen(s));
}

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
    return kind > 0 && kind < TN_CHAT_KIND_COUNT_ && kind != TN_CHAT_QWEN3;
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
    view v = {s, s ? strlen(s) : 0};
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

/* Qwen3: ChatML, but assistant turns before the last user query lose their
 * <think> block, and those after it keep (or get an empty) one. */
static void render_qwen3(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    if (n > 0 && m[0].role == TN_CHAT_ROLE_SYSTEM)
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

/* Gemma 4 (google-gemma-4-31B-it.jinja, without tools): an optional system
 * turn that also carries <|think|> when thinking is on, user turns trimmed,
 * model turns with their thought channels removed (strip_thinking) and
 * trimmed, a model turn right after another one continuing it without a new
 * header; the generation prompt opens a model turn and, thinking off, an
 * empty thought channel. */
static void gemma4_system(sink *s, const char *system, bool thinking) {
    if (!system && !thinking)
        return;
    put(s, "<|turn>system\n");
    if (thinking)
        put(s, "<|think|>\n");
    if (system)
        textv(s, py_strip(mkview(system)));
    put(s, "<turn|>\n");
}

/* strip_thinking: of each part split at "<channel|>", what comes before a
 * "<|channel>" in it (or all of it), the whole trimmed. */
static void gemma4_model_content(sink *s, view c) {
    tn_buf tmp = {0};
    sink t = {&tmp, TN_OK, NULL};
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

static void render_gemma4(sink *s, const tn_chat_message *m, size_t n, const tn_chat_options *o) {
    convo c = split_convo(m, n);
    gemma4_system(s, c.system, o->enable_thinking);
    for (size_t i = c.first; i < n; i++) {
        const bool model = m[i].role == TN_CHAT_ROLE_ASSISTANT;
        if (!(model && i > c.first && m[i - 1].role == TN_CHAT_ROLE_ASSISTANT)) {
            put(s, "<|turn>");
            put(s, model ? "model" : role_name(m[i].role));
            put(s, "\n");
        }
        if (model)
            gemma4_model_content(s, mkview(m[i].content));
        else
            textv(s, py_strip(mkview(m[i].content)));
        put(s, "<turn|>\n");
    }
    if (o->add_generation_prompt)
        gemma4_generation_prompt(s, o->enable_thinking);
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
            sink t = {&tmp, TN_OK, NULL};
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
 * the role's own name. Llama 2 drops other roles and the Mistral templates
 * raise an exception (or want tool call ids): refused there. */
static bool has_tool_role(tn_chat_kind kind) {
    return kind == TN_CHAT_CHATML || kind == TN_CHAT_QWEN3 || kind == TN_CHAT_LLAMA3 ||
           kind == TN_CHAT_LLAMA31 || kind == TN_CHAT_GEMMA3;
}

static bool system_anywhere(tn_chat_kind kind) {
    return kind == TN_CHAT_CHATML || kind == TN_CHAT_QWEN3 || kind == TN_CHAT_LLAMA3 ||
           kind == TN_CHAT_LLAMA31 || kind == TN_CHAT_GEMMA4;
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
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].content)
            return tn_fail(err, TN_ERR_INVALID, "chat template: message %zu has no content", i);
        if ((int)msgs[i].role < 0 || (int)msgs[i].role > TN_CHAT_ROLE_TOOL)
            return tn_fail(err, TN_ERR_INVALID, "chat template: message %zu has role %d", i,
                           (int)msgs[i].role);
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
    tn_chat_options o = opts ? *opts : tn_chat_default_options();
    size_t start = out->len, start_spans = content ? content->n : 0;
    sink s = {out, TN_OK, content};
    /* An empty render still leaves a NUL-terminated buffer. */
    put(&s, "");
    switch (kind) {
    case TN_CHAT_CHATML: render_chatml(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_QWEN3: render_qwen3(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_LLAMA3: render_llama3(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_LLAMA31: render_llama31(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_GEMMA3: render_gemma3(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_GEMMA4: render_gemma4(&s, msgs, n_msgs, &o); break;
    case TN_CHAT_LLAMA2: render_llama2(&s, msgs, n_msgs); break;
    case TN_CHAT_MISTRAL:
    case TN_CHAT_MISTRAL_V1:
    case TN_CHAT_MISTRAL_V3: render_mistral(&s, kind, msgs, n_msgs); break;
    case TN_CHAT_KIND_COUNT_: break;
    }
    return finish(&s, start, start_spans, err);
}

int tn_chat_render_system_spans(tn_chat_kind kind, const char *system,
                                const tn_chat_options *opts, tn_buf *out, tn_text_spans *content,
                                tn_error *err) {
    int rc = check_args(kind, out, err);
    if (rc != TN_OK)
        return rc;
    tn_chat_options o = opts ? *opts : tn_chat_default_options();
    size_t start = out->len, start_spans = content ? content->n : 0;
    sink s = {out, TN_OK, content};
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
        gemma4_system(&s, system, false);
        break;
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
    if (rc != TN_OK)
        return rc;
    if (!user)
        return tn_fail(err, TN_ERR_INVALID, "chat template: no user text");
    tn_chat_options o = opts ? *opts : tn_chat_default_options();
    view u = mkview(user);
    size_t start = out->len, start_spans = content ? content->n : 0;
    sink s = {out, TN_OK, content};
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
