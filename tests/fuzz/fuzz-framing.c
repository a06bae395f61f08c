/* libFuzzer target for the server's framing check (server/tern-framing.c),
 * against libsoup's own reading of the same header bytes.
 *
 * The input is what a client sends first: its headers are taken up to the
 * blank line, as the server does (nothing without one, nothing with a NUL:
 * those are answered before this check). When the check passes them and
 * libsoup 3 parses them (soup_headers_parse_request), both must read the
 * same framing, or a request could be cut where the check did not look:
 *   - libsoup reads chunked: the check saw one Transfer-Encoding, chunked;
 *   - libsoup reads a Content-Length L: the check saw one, of L, and no
 *     Transfer-Encoding;
 *   - the check saw one Content-Length and no Transfer-Encoding: libsoup
 *     reads that length;
 *   - libsoup reads the version the check read (HTTP/1.0 or not), and,
 *     with the Expect lines dropped where the server drops them
 *     (tern_framing_ignores_expect), sees no expectation but 100-continue
 *     (libsoup's own 417), and none where they were dropped.
 * And the check never reads outside the bytes it is given (ASan).
 *
 * Seeds: tests/fuzz/corpus/framing/.
 * Run:   build-fuzz/tests/fuzz/fuzz-framing tests/fuzz/corpus/framing
 */
#include "tern-framing.h"
#include "fuzz-promise.h"

#include <libsoup/soup.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *buf = (const char *)data;
    const char *end = memmem(buf, size, "\r\n\r\n", 4);
    if (!end)
        end = memmem(buf, size, "\n\n", 2);
    if (!end || memchr(buf, '\0', (size_t)(end - buf)))
        return 0;
    const size_t n = (size_t)(end - buf) + 2;
    /* The check's bytes in a buffer of their own: a read past n is caught. */
    char *head = malloc(n);
    if (!head)
        return 0;
    memcpy(head, buf, n);
    int status = 0;
    tern_framing f;
    const char *why = tern_framing_problem(head, n, &status, &f);
    PROMISE(why == NULL || status == 400 || status == 501 || status == 417 || status == 505);
    if (why && f.http_minor < 0 && (status == 505 || strstr(why, "version is not HTTP/1"))) {
        /* a version refused here (not a refusal before it, such as a request
         * line over two lines) is one libsoup refuses, with the same status */
        SoupMessageHeaders *h = soup_message_headers_new(SOUP_MESSAGE_HEADERS_REQUEST);
        const guint st = soup_headers_parse_request(head, (int)n, h, NULL, NULL, NULL);
        PROMISE(st == (guint)(f.http_minor == -2 ? 505 : 400) && st == (guint)status);
        soup_message_headers_unref(h);
    }
    if (why == NULL) {
        char *copy = g_strndup(head, n);
        size_t m = n;
        const bool dropped = tern_framing_ignores_expect(&f);
        if (dropped)
            m = tern_framing_drop_expect(copy, n);
        SoupMessageHeaders *h = soup_message_headers_new(SOUP_MESSAGE_HEADERS_REQUEST);
        char *method = NULL, *path = NULL;
        SoupHTTPVersion ver;
        const guint st = soup_headers_parse_request(copy, (int)m, h, &method, &path, &ver);
        PROMISE(st != SOUP_STATUS_EXPECTATION_FAILED);
        if (st == SOUP_STATUS_OK) {
            PROMISE(f.http_minor == (ver == SOUP_HTTP_1_0 ? 0 : 1));
            const SoupExpectation ex = soup_message_headers_get_expectations(h);
            PROMISE(ex == (dropped || !f.expects ? 0 : SOUP_EXPECTATION_CONTINUE));
            const SoupEncoding enc = soup_message_headers_get_encoding(h);
            if (enc == SOUP_ENCODING_CHUNKED)
                PROMISE(f.transfer_encodings == 1 && f.chunked && f.content_lengths == 0);
            if (enc == SOUP_ENCODING_CONTENT_LENGTH)
                PROMISE(f.content_lengths == 1 && f.transfer_encodings == 0 &&
                        (uint64_t)soup_message_headers_get_content_length(h) == f.content_length);
            if (f.content_lengths == 1 && f.transfer_encodings == 0)
                PROMISE(enc == SOUP_ENCODING_CONTENT_LENGTH &&
                        (uint64_t)soup_message_headers_get_content_length(h) == f.content_length);
        }
        g_free(method);
        g_free(path);
        soup_message_headers_unref(h);
        g_free(copy);
    }
    free(head);
    return 0;
}
