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
 * And against a real SoupServer reading the same head (what it would
 * refuse while parsing it, with no hook for the server: a bare 400 for no
 * Host in HTTP/1.1, or a Host or target it cannot make a URI of): every
 * head the check passes reaches the server's handlers (got-headers), and
 * every one it refuses as libsoup's (tern_framing.target) libsoup refuses
 * so, with the same status.
 * And the check never reads outside the bytes it is given (ASan).
 *
 * Seeds: tests/fuzz/corpus/framing/.
 * Run:   build-fuzz/tests/fuzz/fuzz-framing tests/fuzz/corpus/framing
 */
#include "tern-framing.h"
#include "fuzz-promise.h"

#include <libsoup/soup.h>
#include <sanitizer/lsan_interface.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void on_got_headers(SoupServerMessage *msg, gpointer data) {
    (void)msg;
    *(bool *)data = true;
}

static void on_started(SoupServer *server, SoupServerMessage *msg, gpointer data) {
    (void)server;
    g_signal_connect(msg, "got-headers", G_CALLBACK(on_got_headers), data);
}

static void on_request(SoupServer *server, SoupServerMessage *msg, const char *path,
                       GHashTable *query, gpointer data) {
    (void)server, (void)path, (void)query, (void)data;
    soup_server_message_set_status(msg, 200, NULL);
}

/* The status a SoupServer answers the head (n bytes, its empty line
 * added) with when it refuses it while parsing, before any handler or
 * signal of the server's: 0 when it read the head through (got-headers). */
static guint libsoup_parse_refusal_leaky(const char *head, size_t n);

/* The reference server's allocations are not the code under test: libsoup
 * 3.2 has known leaks on heads it refuses (the path, tern-framing.c), so
 * this reference runs with leak detection off; tern_framing_problem, Tern's
 * own code, keeps it on. (A CI run's at-exit report of 16 KiB from g_malloc
 * was GLib's quark table outgrowing 2,048 entries and dropping its old
 * array: libsoup interns every method it reads, and methods of the
 * fuzzer's own reached this server until tern_framing_problem refused
 * them; docs/SERVER.md.) */
static guint libsoup_parse_refusal(const char *head, size_t n) {
    __lsan_disable();
    const guint status = libsoup_parse_refusal_leaky(head, n);
    __lsan_enable();
    return status;
}

static guint libsoup_parse_refusal_leaky(const char *head, size_t n) {
    static SoupServer *server;
    if (!server) {
        server = soup_server_new(NULL, NULL);
        soup_server_add_handler(server, NULL, on_request, NULL, NULL);
    }
    bool got = false;
    const gulong id = g_signal_connect(server, "request-started", G_CALLBACK(on_started), &got);
    GByteArray *bytes = g_byte_array_new();
    g_byte_array_append(bytes, (const guint8 *)head, (guint)n);
    g_byte_array_append(bytes, (const guint8 *)"\r\n", 2);
    GBytes *b = g_byte_array_free_to_bytes(bytes);
    GInputStream *in = g_memory_input_stream_new_from_bytes(b);
    GOutputStream *out = g_memory_output_stream_new_resizable();
    GIOStream *io = g_simple_io_stream_new(in, out);
    GSocketAddress *addr = g_inet_socket_address_new_from_string("127.0.0.1", 8080);
    guint status = 0;
    if (soup_server_accept_iostream(server, io, addr, addr, NULL)) {
        GMemoryOutputStream *mo = G_MEMORY_OUTPUT_STREAM(out);
        for (int i = 0; i < 10000; i++) {
            const char *d = g_memory_output_stream_get_data(mo);
            const gsize len = g_memory_output_stream_get_data_size(mo);
            if (d && len >= 12 && memmem(d, len, "\r\n\r\n", 4)) {
                status = (guint)strtoul(d + 9, NULL, 10);
                break;
            }
            g_main_context_iteration(NULL, FALSE);
        }
        g_io_stream_close(io, NULL, NULL);
        while (g_main_context_iteration(NULL, FALSE))
            ;
    }
    g_signal_handler_disconnect(server, id);
    g_object_unref(addr);
    g_object_unref(io);
    g_object_unref(in);
    g_object_unref(out);
    g_bytes_unref(b);
    return got ? 0 : status;
}

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
    if (why == NULL || f.target) {
        /* Expect lines as the framed stream leaves them. Not for the
         * check's other refusals: libsoup 3.2 leaks the path on a
         * framing it cannot read, which is why they are refused. */
        char *copy = g_strndup(head, n);
        const size_t m = tern_framing_ignores_expect(&f) ? tern_framing_drop_expect(copy, n) : n;
        /* As the framed stream passes it: the empty lines before it
         * dropped, and only where libsoup's reading of the stream ends the
         * head where this one does (the framer's, tern_framer_step, does
         * so; fuzz-framer holds it to that) */
        size_t lead = 0;
        while (lead < m && (copy[lead] == '\r' || copy[lead] == '\n'))
            lead++;
        if (!memmem(copy + lead, m - lead, "\n\n", 2) &&
            !memmem(copy + lead, m - lead, "\n\r\n", 3)) {
            const guint refused = libsoup_parse_refusal(copy + lead, m - lead);
            PROMISE(why ? refused == (guint)status : refused == 0);
        }
        g_free(copy);
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
