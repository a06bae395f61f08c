/* libFuzzer target for the chat formats (engine/chat.c): what a client's
 * messages, tool definitions and tool calls become in a prompt, the
 * template recognised from a model file's text, and gpt-oss's harmony
 * filter over a model's answer. All of it is text others write.
 *
 * Input: byte 0 the kind (% the number of kinds), byte 1 flags (bit 0
 * thinking, bit 1 the generation prompt, bit 2 the first field is a tool's
 * JSON schema, bit 3 harmony writes calls as text), then fields separated
 * by 0x1e. A message field's first byte is its role (% 4; bit 2: the
 * message carries a tool call whose name and arguments are the rest,
 * separated by 0x1d), the rest its content.
 *
 * Promises:
 *  - a render that succeeds ends NUL-terminated and records its content
 *    spans in order, without overlap, inside the text;
 *  - the pinning split: render_system(A) + render_turn(true, B) renders
 *    byte for byte what render([system A, user B]) with the generation
 *    prompt renders, and one succeeds exactly when the other does (flash
 *    serving depends on it: docs/CHAT-TEMPLATES.md; for Gemma 4 with
 *    thinking off, as pins are);
 *  - tn_chat_template_detect gives a kind in range for any text;
 *  - the harmony filter runs any token stream to its end.
 *
 * Seeds: tests/fuzz/corpus/chat/.
 * Run:   build-fuzz/tests/fuzz/fuzz-chat tests/fuzz/corpus/chat
 */
#include "tern.h"
#include "tn-internal.h"
#include "fuzz-promise.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_FIELDS = 16 };

static void check_render(int rc, const tn_buf *out, const tn_text_spans *spans) {
    if (rc != TN_OK)
        return;
    PROMISE(out->len == 0 || out->data[out->len] == '\0');
    size_t at = 0;
    for (size_t i = 0; i < spans->n; i++) {
        PROMISE(spans->v[i].start >= at);
        PROMISE(spans->v[i].len <= out->len && spans->v[i].start <= out->len - spans->v[i].len);
        at = spans->v[i].start + spans->v[i].len;
    }
}

/* render([system A, user B]) against render_system(A) + render_turn(B). */
static void check_split(tn_chat_kind kind, const char *a, const char *b,
                        const tn_chat_options *opts) {
    tn_chat_message m[2] = {{.role = TN_CHAT_ROLE_SYSTEM, .content = a},
                            {.role = TN_CHAT_ROLE_USER, .content = b}};
    tn_chat_options o = *opts;
    o.add_generation_prompt = true;
    o.tools = NULL;
    o.n_tools = 0;
    /* Gemma 4's thinking switch lives in the system turn: pinned prompts
     * are rendered with thinking off (docs/CHAT-TEMPLATES.md). */
    if (kind == TN_CHAT_GEMMA4)
        o.enable_thinking = false;
    tn_buf whole = {0}, split = {0};
    tn_error err = {0};
    int rw = tn_chat_render(kind, m, 2, &o, &whole, &err);
    tn_error_clear(&err);
    int rs = tn_chat_render_system(kind, a, &o, &split, &err);
    tn_error_clear(&err);
    if (rs == TN_OK)
        rs = tn_chat_render_turn(kind, true, b, &o, &split, &err);
    /* The one refusal of a split that renders whole: Llama 2 with only
     * white space after the system block (its strip would reach into the
     * pinned part), said as such. */
    if (kind == TN_CHAT_LLAMA2 && rw == TN_OK && rs == TN_ERR_INVALID &&
        strncmp(err.message, "the message is empty", 20) == 0) {
        for (const char *c = b; *c; c++)
            PROMISE(!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z'));
        rw = rs;
    }
    tn_error_clear(&err);
    PROMISE((rw == TN_OK) == (rs == TN_OK));
    if (rw == TN_OK)
        PROMISE(whole.len == split.len && memcmp(whole.data, split.data, whole.len) == 0);
    tn_buf_free(&whole);
    tn_buf_free(&split);
}

static void harmony(const uint8_t *p, size_t n, bool calls_as_text) {
    tn_harmony h;
    tn_harmony_init_ids(&h, 1, 2, 3, 4);
    h.calls_as_text = calls_as_text;
    h.call = 5;
    tn_buf piece = {0};
    size_t i = 0;
    while (i < n) {
        /* A byte below 6 is that control token (0: <|return|>, stops), else
         * a text piece of up to 4 bytes. */
        if (p[i] < 6) {
            if (p[i] == 0) {
                tn_harmony_stop(&h, 0);
                break;
            }
            PROMISE(tn_harmony_piece(&h, p[i], "", 0, &piece) == TN_OK);
            i++;
            continue;
        }
        size_t len = 1 + p[i] % 4;
        if (len > n - i)
            len = n - i;
        PROMISE(tn_harmony_piece(&h, 100, (const char *)p + i, len, &piece) == TN_OK);
        i += len;
    }
    PROMISE(tn_harmony_finish(&h, "", 0, &piece) == TN_OK);
    PROMISE(memchr(h.recipient, '\0', sizeof h.recipient) != NULL);
    tn_buf_free(&piece);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    const tn_chat_kind kind = (tn_chat_kind)(data[0] % TN_CHAT_KIND_COUNT_);
    const uint8_t flags = data[1];
    /* One copy, cut into NUL-terminated fields at each 0x1e. */
    char *text = malloc(size - 1);
    if (!text)
        return 0;
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';
    char *field[MAX_FIELDS];
    size_t n_fields = 0;
    for (char *f = text; f && n_fields < MAX_FIELDS;) {
        field[n_fields++] = f;
        char *sep = memchr(f, 0x1e, strlen(f));
        if (sep)
            *sep++ = '\0';
        f = sep;
    }

    {
        static const char *const archs[] = {"llama", "qwen3", "qwen2", "gemma3", "gpt-oss"};
        const char *warning = NULL;
        const tn_chat_kind k =
            tn_chat_template_detect(field[0], strlen(field[0]), archs[flags % 5], &warning);
        PROMISE((int)k >= 0 && k < TN_CHAT_KIND_COUNT_);
    }

    tn_chat_options opts = tn_chat_default_options();
    opts.enable_thinking = flags & 1;
    opts.add_generation_prompt = flags & 2;
    size_t first = 0;
    tn_chat_tool tool = {.name = "get_weather", .description = "The weather in a city."};
    if ((flags & 4) && n_fields > 1) {
        tool.parameters = field[0];
        opts.tools = &tool;
        opts.n_tools = 1;
        first = 1;
    }

    tn_chat_message msgs[MAX_FIELDS];
    tn_chat_tool_call calls[MAX_FIELDS];
    size_t n_msgs = 0;
    for (size_t i = first; i < n_fields; i++) {
        const uint8_t r = (uint8_t)field[i][0];
        tn_chat_message *m = &msgs[n_msgs++];
        memset(m, 0, sizeof *m);
        m->role = (tn_chat_role)(r % 4);
        m->content = field[i][0] ? field[i] + 1 : field[i];
        if ((r & 4) && m->role == TN_CHAT_ROLE_ASSISTANT) {
            char *sep = strchr(field[i] + 1, 0x1d);
            tn_chat_tool_call *c = &calls[i];
            memset(c, 0, sizeof *c);
            c->id = "call_0";
            c->name = field[i][0] ? field[i] + 1 : "f";
            if (sep) {
                *sep = '\0';
                c->arguments = sep + 1;
            }
            m->content = NULL;
            m->tool_calls = c;
            m->n_tool_calls = 1;
        }
        if (m->role == TN_CHAT_ROLE_TOOL)
            m->name = "get_weather";
    }

    tn_buf out = {0};
    tn_text_spans spans = {0};
    tn_error err = {0};
    const int rc = tn_chat_render_spans(kind, msgs, n_msgs, &opts, &out, &spans, &err);
    check_render(rc, &out, &spans);
    tn_error_clear(&err);
    tn_buf_free(&out);
    tn_text_spans_free(&spans);

    if (n_fields >= 2 && !(flags & 4))
        check_split(kind, field[0], field[1], &opts);

    harmony(data + 2, size - 2, flags & 8);
    free(text);
    return 0;
}
