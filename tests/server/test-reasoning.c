/* The server's reasoning splitter (server/tern-reasoning.c): every answer
 * fed whole, in two chunks at every split point and byte by byte gives the
 * same content and reasoning_content. */
#include "tern-reasoning.h"
#include "tn-test.h"

#include <string.h>

static void split(const char *text, const size_t *cuts, size_t n_cuts, GString *content,
                  GString *reasoning) {
    tern_reasoning r;
    tern_reasoning_init(&r);
    size_t at = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        const size_t end = i < n_cuts ? cuts[i] : strlen(text);
        char *part = g_strndup(text + at, end - at);
        tern_reasoning_feed(&r, part, content, reasoning);
        g_free(part);
        at = end;
    }
    tern_reasoning_finish(&r, content, reasoning);
    tern_reasoning_clear(&r);
}

static void expect(const char *text, const char *want_content, const char *want_reasoning) {
    const size_t len = strlen(text);
    bool ok = true;
    for (size_t mode = 0; mode < len + 2; mode++) {
        GString *c = g_string_new(NULL), *r = g_string_new(NULL);
        size_t *cuts = g_new0(size_t, len + 1);
        size_t n = 0;
        if (mode == len + 1) { /* byte by byte */
            for (size_t i = 1; i < len; i++)
                cuts[n++] = i;
        } else if (mode > 0 && mode < len) {
            cuts[n++] = mode;
        }
        split(text, cuts, n, c, r);
        if (strcmp(c->str, want_content) || strcmp(r->str, want_reasoning)) {
            fprintf(stderr, "\"%s\" (split mode %zu): content \"%s\" reasoning \"%s\"\n", text,
                    mode, c->str, r->str);
            ok = false;
        }
        g_free(cuts);
        g_string_free(c, TRUE);
        g_string_free(r, TRUE);
        if (!ok)
            break;
    }
    CHECKF(ok, "split of \"%s\"", text);
}

int main(void) {
    expect("<think>\nLet me see.\n</think>\n\nBlue.", "Blue.", "Let me see.\n");
    expect("<think>\n\n</think>\n\nHi", "Hi", "");
    expect("\n<think>a</think>b", "b", "a");
    expect("Plain answer.", "Plain answer.", "");
    expect("Not <think>here</think>", "Not <think>here</think>", "");
    expect("<thin", "<thin", "");        /* ends as a prefix: content */
    expect("<think>unfinished </thi", "", "unfinished </thi");
    expect("<think>x</think>", "", "x");
    expect("<think>a < b </ c</think>\nok </think>", "ok </think>", "a < b </ c");
    expect("", "", "");
    return tn_test_finish("server-reasoning");
}
