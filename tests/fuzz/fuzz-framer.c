/* libFuzzer target for the server's framing of every request on a
 * connection (tern_framer_step in server/tern-framing.c, which the framed
 * stream, server/tern-framed.c, runs over what a client sends).
 *
 * The input is a byte stream from a client. It is framed twice, whole and
 * in pieces of 1 to 64 bytes (their sizes drawn from the input's first
 * byte), as the server frames what arrives in reads of any size: both must
 * pass the same bytes and refuse at the same place for the same reason.
 * What is passed must be what libsoup 3.2 reads the same way (its server
 * first dropping the headers an HTTP/1.0 request's Connection names):
 *   - a head ends where libsoup's reading of it line by line (8 KiB at a
 *     time, soup_message_io_data_read_headers) ends it;
 *   - when libsoup parses the head (soup_headers_parse_request), a chunked
 *     one is followed by chunks, one with a Content-Length by that many
 *     bytes, any other by the next head;
 *   - a chunk's size line is read by libsoup into 128 bytes, and
 *     strtoul(line, NULL, 16) of it is the size that follows;
 *   - a head whose Expect lines the framed stream drops (drop_expect) is
 *     still a head to libsoup without them, and has no expectation; any
 *     other has none but 100-continue (never libsoup's own 417).
 * And no step reads outside the bytes it is given (ASan), and every PASS or
 * DROP takes at least one byte.
 *
 * Seeds: tests/fuzz/corpus/framer/.
 * Run:   build-fuzz/tests/fuzz/fuzz-framer tests/fuzz/corpus/framer
 */
#include "tern-framing.h"
#include "fuzz-promise.h"

#include <libsoup/soup.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    GString *passed;
    int status;
    const char *why;
    size_t refused_at; /* bytes of the input taken before the refusal */
} outcome;

/* Where libsoup ends a head that starts at buf (a request line, not an
 * empty line): its length with the empty line, 0 if not within n. */
static size_t soup_head_end(const uint8_t *buf, size_t n) {
    size_t len = 0; /* bytes read so far */
    while (len < n) {
        const size_t old_len = len;
        /* read_line: up to and with the LF, at most 8192 bytes */
        size_t piece = 0;
        bool got_lf = false;
        while (piece < 8192 && len + piece < n) {
            if (buf[len + piece++] == '\n') {
                got_lf = true;
                break;
            }
        }
        if (!got_lf && piece < 8192)
            return 0; /* more bytes needed */
        len += piece;
        if (got_lf) {
            if (piece == 1 && old_len >= 2 && buf[len - 2] == '\n')
                return len;
            if (piece == 2 && old_len >= 3 && !memcmp(buf + len - 3, "\n\r\n", 3))
                return len;
        }
    }
    return 0;
}

static void check_head(const char *head, size_t n, const tern_framer *after) {
    PROMISE(soup_head_end((const uint8_t *)head, n) == n);
    char *copy = g_strndup(head, n);
    if (after->drop_expect) {
        /* as the framed stream passes it on */
        n = tern_framing_drop_expect(copy, n);
        copy[n] = '\0';
        PROMISE(soup_head_end((const uint8_t *)copy, n) == n);
    }
    SoupMessageHeaders *h = soup_message_headers_new(SOUP_MESSAGE_HEADERS_REQUEST);
    char *method = NULL, *path = NULL;
    SoupHTTPVersion ver;
    const guint st = soup_headers_parse_request(copy, (int)n, h, &method, &path, &ver);
    PROMISE(st != SOUP_STATUS_EXPECTATION_FAILED);
    /* libsoup's server drops the headers an HTTP/1.0 request's Connection
     * names ("Connection: keep-alive, Content-Length" left it no body). */
    if (st == SOUP_STATUS_OK && ver == SOUP_HTTP_1_0)
        soup_message_headers_clean_connection_headers(h);
    if (st == SOUP_STATUS_OK) {
        if (after->drop_expect)
            PROMISE(soup_message_headers_get_expectations(h) == 0);
        const SoupEncoding enc = soup_message_headers_get_encoding(h);
        if (enc == SOUP_ENCODING_CHUNKED) {
            PROMISE(after->state == TERN_FRAMER_CHUNK_SIZE);
        } else if (enc == SOUP_ENCODING_CONTENT_LENGTH &&
                   soup_message_headers_get_content_length(h) > 0) {
            PROMISE(after->state == TERN_FRAMER_BODY &&
                    after->left == (uint64_t)soup_message_headers_get_content_length(h));
        } else {
            PROMISE(after->state == TERN_FRAMER_HEAD);
        }
    }
    g_free(method);
    g_free(path);
    soup_message_headers_unref(h);
    g_free(copy);
}

static void check_size_line(const char *line, size_t n, const tern_framer *after) {
    PROMISE(n < 128 && line[n - 1] == '\n');
    char *copy = g_strndup(line, n);
    const unsigned long size = strtoul(copy, NULL, 16);
    g_free(copy);
    PROMISE(size == after->left);
    PROMISE(after->state == (size ? TERN_FRAMER_CHUNK : TERN_FRAMER_LAST));
}

/* Frames data, handed over in pieces of the sizes next_piece draws. */
static outcome frame(const uint8_t *data, size_t size, uint32_t seed, bool whole) {
    outcome o = {g_string_new(NULL), 0, NULL, 0};
    tern_framer f = {0};
    GByteArray *buf = g_byte_array_new();
    size_t taken = 0;   /* of data */
    size_t dropped = 0; /* of data, before buf's start */
    while (!o.why) {
        if (taken == size)
            break;
        size_t piece = size - taken;
        if (!whole) {
            seed = seed * 1103515245u + 12345u;
            piece = MIN(piece, 1 + (seed >> 16) % 64);
        }
        g_byte_array_append(buf, data + taken, (guint)piece);
        taken += piece;
        for (;;) {
            size_t len = 0;
            int status = 0;
            const char *why = NULL;
            const tern_framer before = f;
            /* its own copy, so that a read past n is caught */
            char *view = g_memdup2(buf->data, buf->len ? buf->len : 1);
            const tern_framer_verdict v =
                tern_framer_step(&f, view, buf->len, &len, &status, &why);
            if (v == TERN_FRAMER_PASS || v == TERN_FRAMER_DROP) {
                PROMISE(len > 0 && len <= buf->len);
                if (v == TERN_FRAMER_PASS && before.state == TERN_FRAMER_HEAD)
                    check_head(view, len, &f);
                if (v == TERN_FRAMER_PASS && before.state == TERN_FRAMER_CHUNK_SIZE)
                    check_size_line(view, len, &f);
                if (v == TERN_FRAMER_DROP)
                    PROMISE(before.state == TERN_FRAMER_HEAD);
                if (v == TERN_FRAMER_PASS)
                    g_string_append_len(o.passed, view, (gssize)len);
                g_byte_array_remove_range(buf, 0, (guint)len);
                dropped += len;
                g_free(view);
                continue;
            }
            g_free(view);
            if (v == TERN_FRAMER_REFUSE) {
                PROMISE(why &&
                        (status == 400 || status == 417 || status == 431 || status == 501 ||
                         status == 505));
                o.status = status;
                o.why = why;
                o.refused_at = dropped;
            }
            break;
        }
    }
    g_byte_array_unref(buf);
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const uint32_t seed = data[0];
    outcome a = frame(data + 1, size - 1, seed, true);
    outcome b = frame(data + 1, size - 1, seed, false);
    PROMISE(a.passed->len == b.passed->len &&
            !memcmp(a.passed->str, b.passed->str, a.passed->len));
    PROMISE(a.status == b.status && a.why == b.why && a.refused_at == b.refused_at);
    g_string_free(a.passed, TRUE);
    g_string_free(b.passed, TRUE);
    return 0;
}
