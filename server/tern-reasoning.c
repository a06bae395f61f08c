/* The reasoning splitter (tern-reasoning.h). What llama.cpp's server and
 * vLLM do with Qwen3 / DeepSeek-R1 output: reasoning_content gets the
 * <think> block, content the reply. */
#include "tern-reasoning.h"

#include <string.h>

enum { START, THINK_LEAD, THINK, AFTER, CONTENT };

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

void tern_reasoning_init(tern_reasoning *r) {
    r->state = START;
    r->hold = g_string_new(NULL);
}

void tern_reasoning_clear(tern_reasoning *r) {
    if (r->hold)
        g_string_free(r->hold, TRUE);
    r->hold = NULL;
}

/* Length of the longest end of s (len bytes) that begins marker. */
static size_t partial_suffix(const char *s, size_t len, const char *marker) {
    const size_t m = strlen(marker);
    for (size_t k = len < m - 1 ? len : m - 1; k > 0; k--)
        if (!memcmp(s + len - k, marker, k))
            return k;
    return 0;
}

void tern_reasoning_feed(tern_reasoning *r, const char *text, GString *content,
                         GString *reasoning) {
    g_string_append(r->hold, text);
    for (;;) {
        char *h = r->hold->str;
        const size_t n = r->hold->len;
        if (r->state == START) {
            size_t ws = 0;
            while (ws < n && g_ascii_isspace(h[ws]))
                ws++;
            const size_t rest = n - ws, m = strlen(OPEN);
            if (rest >= m && !memcmp(h + ws, OPEN, m)) {
                g_string_erase(r->hold, 0, (gssize)(ws + m));
                r->state = THINK_LEAD;
                continue;
            }
            if (rest < m && !memcmp(h + ws, OPEN, rest))
                return; /* all whitespace, or a prefix of <think>: wait */
            r->state = CONTENT;
            continue;
        }
        if (r->state == THINK_LEAD || r->state == AFTER) {
            size_t nl = 0;
            while (nl < n && h[nl] == '\n')
                nl++;
            g_string_erase(r->hold, 0, (gssize)nl);
            if (r->hold->len == 0)
                return;
            r->state = r->state == THINK_LEAD ? THINK : CONTENT;
            continue;
        }
        if (r->state == THINK) {
            const char *end = g_strstr_len(h, (gssize)n, CLOSE);
            if (end) {
                g_string_append_len(reasoning, h, end - h);
                g_string_erase(r->hold, 0, (gssize)(end - h + strlen(CLOSE)));
                r->state = AFTER;
                continue;
            }
            const size_t keep = partial_suffix(h, n, CLOSE);
            g_string_append_len(reasoning, h, (gssize)(n - keep));
            g_string_erase(r->hold, 0, (gssize)(n - keep));
            return;
        }
        /* CONTENT */
        g_string_append_len(content, h, (gssize)n);
        g_string_truncate(r->hold, 0);
        return;
    }
}

void tern_reasoning_finish(tern_reasoning *r, GString *content, GString *reasoning) {
    if (r->state == THINK)
        g_string_append_len(reasoning, r->hold->str, (gssize)r->hold->len);
    else if (r->state == START || r->state == CONTENT)
        g_string_append_len(content, r->hold->str, (gssize)r->hold->len);
    g_string_truncate(r->hold, 0);
}
