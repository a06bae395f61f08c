/* libFuzzer target for what a remote engine's server sends
 * (manager/tern-remote.c): the text/event-stream of a streamed chat answer,
 * and the body of an error status.
 *
 * The first input byte picks what runs; bit 0:
 *   0: the rest is a stream. It is fed three times: whole, cut where the
 *      input's header says (byte 1: how many cuts, 0..15, then two bytes
 *      each: an offset, taken modulo the stream's length), and one byte at
 *      a time. The piece callback stops the answer after (byte 0 >> 1) % 8
 *      pieces (0: never). Promises: the three feeds end alike (accepted or
 *      refused, the same message, the same text and thinking, done, stats);
 *      the text and thinking handed out are UTF-8; a refusal is one line
 *      of UTF-8 without control characters.
 *   1: the rest is an error body, answered with the status byte 1 picks
 *      (400, 401, 403, 404, 429, 500, 503), for a model or none, with a
 *      Retry-After of the body's first line or none (bits of byte 0).
 *      Promises: an error of the remote domain, one line of UTF-8 without
 *      control characters (the server's words are quoted, never pasted).
 * A remote server is whoever the user typed the address of: neither may
 * crash, leak or read out of bounds.
 *
 * Built from the manager's source with GLib, libsoup and json-glib (the
 * fuzz build leaves the manager out).
 *
 * Seeds: tests/fuzz/corpus/remote/.
 * Run:   build-fuzz/tests/fuzz/fuzz-remote tests/fuzz/corpus/remote
 */
#include "tern-remote.h"
#include "fuzz-promise.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    GString *content;
    GString *reasoning;
    int stop_after; /* 0: never */
    int pieces;
} got;

static gboolean on_piece(TernRemotePiece kind, const char *text, gsize len, gpointer user) {
    got *g = user;
    PROMISE(len > 0 && g_utf8_validate(text, (gssize)len, NULL));
    g_string_append_len(kind == TERN_REMOTE_PIECE_CONTENT ? g->content : g->reasoning, text,
                        (gssize)len);
    g->pieces++;
    return !(g->stop_after && g->pieces >= g->stop_after);
}

/* One line a user reads: UTF-8, no C0 control character, no DEL. */
static bool one_line(const char *m) {
    if (!g_utf8_validate(m, -1, NULL))
        return false;
    for (const unsigned char *p = (const unsigned char *)m; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

typedef struct {
    gboolean ok;
    gboolean done;
    char *message;
    TernRemoteStats st;
    got g;
} outcome;

/* Feeds data in pieces that end at cuts[0..n_cuts) (sorted) and at len. */
static void feed(const char *data, size_t len, const size_t *cuts, size_t n_cuts, int stop_after,
                 outcome *out) {
    GError *e = NULL;
    memset(out, 0, sizeof *out);
    out->g.content = g_string_new(NULL);
    out->g.reasoning = g_string_new(NULL);
    out->g.stop_after = stop_after;
    TernRemoteStream *s = tern_remote_stream_new("http://fuzz/v1", on_piece, &out->g);
    size_t at = 0;
    out->ok = TRUE;
    for (size_t i = 0; i <= n_cuts && out->ok; i++) {
        const size_t end = i < n_cuts ? cuts[i] : len;
        out->ok = tern_remote_stream_feed(s, data + at, end - at, &e);
        at = end;
    }
    PROMISE(out->ok == (e == NULL));
    if (e) {
        PROMISE(e->domain == TERN_REMOTE_ERROR);
        PROMISE(one_line(e->message));
        out->message = g_strdup(e->message);
        g_error_free(e);
    }
    out->done = tern_remote_stream_done(s);
    tern_remote_stream_stats(s, &out->st);
    tern_remote_stream_free(s);
}

static void outcome_clear(outcome *o) {
    g_free(o->message);
    g_string_free(o->g.content, TRUE);
    g_string_free(o->g.reasoning, TRUE);
}

static bool same_double(double a, double b) {
    return a == b || (a != a && b != b);
}

static void same(const outcome *a, const outcome *b) {
    PROMISE(a->ok == b->ok);
    PROMISE(g_strcmp0(a->message, b->message) == 0);
    PROMISE(a->done == b->done);
    PROMISE(g_string_equal(a->g.content, b->g.content));
    PROMISE(g_string_equal(a->g.reasoning, b->g.reasoning));
    PROMISE(a->st.prompt_tokens == b->st.prompt_tokens);
    PROMISE(a->st.cached_tokens == b->st.cached_tokens);
    PROMISE(a->st.completion_tokens == b->st.completion_tokens);
    PROMISE(same_double(a->st.prefill_tok_s, b->st.prefill_tok_s));
    PROMISE(same_double(a->st.decode_tok_s, b->st.decode_tok_s));
    PROMISE(a->st.timings == b->st.timings);
    PROMISE(strcmp(a->st.finish_reason, b->st.finish_reason) == 0);
}

static int compare_size(const void *a, const void *b) {
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void stream(const uint8_t *data, size_t size, int stop_after) {
    if (size < 1)
        return;
    size_t n_cuts = data[0] % 16, hdr = 1 + 2 * n_cuts;
    if (size < hdr)
        return;
    const char *text = (const char *)data + hdr;
    const size_t len = size - hdr;
    size_t cuts[16];
    for (size_t i = 0; i < n_cuts; i++)
        cuts[i] = len ? ((size_t)data[1 + 2 * i] << 8 | data[2 + 2 * i]) % (len + 1) : 0;
    qsort(cuts, n_cuts, sizeof cuts[0], compare_size);

    outcome whole, cut, bytes;
    feed(text, len, NULL, 0, stop_after, &whole);
    feed(text, len, cuts, n_cuts, stop_after, &cut);
    same(&whole, &cut);
    size_t *every = g_new(size_t, len ? len : 1);
    for (size_t i = 0; i < len; i++)
        every[i] = i + 1;
    feed(text, len, every, len ? len - 1 : 0, stop_after, &bytes);
    same(&whole, &bytes);
    g_free(every);
    outcome_clear(&whole);
    outcome_clear(&cut);
    outcome_clear(&bytes);
}

static void error_body(uint8_t flags, const uint8_t *data, size_t size) {
    static const guint statuses[] = {400, 401, 403, 404, 429, 500, 503};
    if (size < 1)
        return;
    const guint status = statuses[data[0] % G_N_ELEMENTS(statuses)];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    char *retry_after = NULL;
    if (flags & 4) {
        const char *nl = memchr(body, '\n', len);
        const size_t n = nl ? (size_t)(nl - body) : len;
        retry_after = g_strndup(body, n); /* a header: a C string */
        body += nl ? n + 1 : n;
        len -= nl ? n + 1 : n;
    }
    GError *e = NULL;
    /* The body as the client reads it: its own buffer, no NUL after it. */
    char *copy = g_memdup2(body, len);
    tern_remote_set_http_error(&e, "http://fuzz/v1", flags & 2 ? "fuzz-model" : NULL, status,
                               retry_after, len ? copy : NULL, len);
    PROMISE(e != NULL && e->domain == TERN_REMOTE_ERROR);
    PROMISE(one_line(e->message));
    g_error_free(e);
    g_free(copy);
    g_free(retry_after);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    if (data[0] & 1)
        error_body(data[0], data + 1, size - 1);
    else
        stream(data + 1, size - 1, (data[0] >> 1) % 8);
    return 0;
}
