/* The request's framing, from its raw header bytes (tern-framing.h). */
#include "tern-framing.h"
#include "tn-text.h"

#include <glib.h>
#include <libsoup/soup.h>
#include <string.h>

/* A decimal number as strtoul reads it: one too large for a version stays
 * too large. */
static unsigned long decimal(const char **p, const char *e) {
    unsigned long v = 0;
    for (; *p < e && **p >= '0' && **p <= '9'; (*p)++)
        v = v > 100000 ? v : v * 10 + (unsigned long)(**p - '0');
    return v;
}

/* The minor version soup_headers_parse_request reads in s[0..n) (the
 * request line on, empty lines before it skipped): its three fields apart
 * by blanks, then "HTTP/1.", a number (leading zeros read), 0 or 1, and
 * the line's end; -1 for a request line libsoup refuses 400 (no
 * "HTTP/D.D" version, or more after it), -2 for
 * one it refuses 505 (another version: HTTP/2.0, HTTP/1.2). */
static int request_minor(const char *s, size_t n) {
    const char *p = s, *e = s + n;
    for (int field = 0; field < 2; field++) {
        while (p < e && *p != ' ' && *p != '\t')
            p++;
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (p >= e)
            return -1;
    }
    if (e - p <= 8 || memcmp(p, "HTTP/", 5) || !g_ascii_isdigit(p[5]))
        return -1;
    p += 5;
    const unsigned long major = decimal(&p, e);
    if (e - p < 2 || *p != '.' || !g_ascii_isdigit(p[1]))
        return -1;
    p++;
    const unsigned long minor = decimal(&p, e);
    if (major != 1 || minor > 1)
        return -2;
    /* Then nothing but CRs and spaces to the line's end, or libsoup refuses
     * it 400 after all ("HTTP/1.1x", a tab after the version): that 400 was
     * its own, bare, and the check's http_minor a version libsoup never
     * took. */
    while (p < e && (*p == '\r' || *p == ' '))
        p++;
    return p < e && *p == '\n' ? (int)minor : -1;
}

/* Whether the request line's three fields start on its first line, s[0..n)
 * (empty lines before it skipped). soup_headers_parse_request splits the
 * fields at blanks only, so "GET\r\nExpect: / HTTP/1.0\r\n" is a request line
 * to libsoup, and a header line here: what the framing reads and drops
 * (an ignored Expect) is then not what libsoup reads (found by fuzz-framing). */
static bool fields_on_first_line(const char *s, size_t n) {
    const char *p = s, *e = s + n;
    for (int field = 0; field < 2; field++) {
        while (p < e && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
            p++;
        if (p >= e || *p == '\r' || *p == '\n')
            return false;
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        if (p >= e || *p == '\r' || *p == '\n')
            return false;
    }
    return true;
}

/* Whether the request line s[0..n) starts with a method HTTP defines (RFC
 * 9110 9.3, and PATCH): libsoup interns every method it reads
 * (g_intern_string, never freed), so a client sending requests with
 * methods of its own grew the server by each one's size, for good (10,000
 * 4 KB methods: 57 MB). Methods are case-sensitive. */
static bool method_known(const char *s, size_t n) {
    static const char *const known[] = {"GET",     "HEAD",  "POST",  "PUT",  "DELETE",
                                        "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    size_t len = 0;
    while (len < n && s[len] != ' ' && s[len] != '\t')
        len++;
    for (size_t k = 0; k < sizeof known / sizeof *known; k++)
        if (strlen(known[k]) == len && !memcmp(s, known[k], len))
            return true;
    return false;
}

/* An Expect header line, as libsoup names it (no blank before the colon). */
static bool expect_line(const char *line, size_t len) {
    return len >= 7 && !g_ascii_strncasecmp(line, "Expect:", 7);
}

/* Whether s[0..n) holds word, case aside. */
static bool holds_nocase(const char *s, size_t n, const char *word) {
    const size_t w = strlen(word);
    for (size_t i = 0; i + w <= n; i++)
        if (!g_ascii_strncasecmp(s + i, word, w))
            return true;
    return false;
}

/* Whether the Connection value s[0..n) lists name as one of its
 * comma-separated options, case aside. */
static bool lists_option(const char *s, size_t n, const char *name) {
    const size_t w = strlen(name);
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ','))
            i++;
        size_t j = i;
        while (j < n && s[j] != ',')
            j++;
        size_t e = j;
        while (e > i && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r'))
            e--;
        if (e - i == w && !g_ascii_strncasecmp(s + i, name, w))
            return true;
        i = j;
    }
    return false;
}

/* What libsoup 3.2 refuses after it parsed the head, where it has no hook
 * for the server and answers a bare 400 (parse_headers in
 * soup-server-message-io-http1.c): a Host with a '/', and a target it
 * cannot make a URI with a host of (an HTTP/1.1 request without Host, a
 * Host or absolute-form target whose port is no number or over 65535, an
 * IPv6 literal it cannot read). Read with libsoup's own parser and GLib's
 * URI parser, in libsoup's order, so that this refuses what libsoup
 * would, and nothing it would take but an HTTP/1.1 request's empty Host
 * (*ours; an HTTP/1.0 request may have none, an absolute-form target
 * makes Host irrelevant; two Host headers are refused before, by
 * tern_framing_problem). Expect lines are left out: libsoup's 417 for an
 * unknown one is tern_framing_problem's to give, or they are dropped. */
static const char *target_problem(const char *head, size_t n, int *status, bool *ours) {
    g_autofree char *copy = g_strndup(head, n);
    const size_t m = tern_framing_drop_expect(copy, n);
    SoupMessageHeaders *h = soup_message_headers_new(SOUP_MESSAGE_HEADERS_REQUEST);
    g_autofree char *method = NULL;
    g_autofree char *path = NULL;
    SoupHTTPVersion ver = SOUP_HTTP_1_1;
    const guint st = soup_headers_parse_request(copy, (int)m, h, &method, &path, &ver);
    const char *why = NULL;
    if (st != SOUP_STATUS_OK) {
        *status = (int)st;
        why = "the request's head is not one this server can read";
        soup_message_headers_unref(h);
        return why;
    }
    const char *host = soup_message_headers_get_one(h, "Host");
    GUri *uri = NULL;
    bool local = false; /* libsoup builds the URI from the server's address */
    if (host && strchr(host, '/')) {
        why = "the Host header holds a '/'";
    } else if (!strcmp(path, "*") && host) {
        g_autofree char *url = g_strdup_printf("http://%s/", host);
        uri = g_uri_parse(url, SOUP_HTTP_URI_FLAGS, NULL);
    } else if (!strcmp(method, "CONNECT")) {
        g_autofree char *url = g_strdup_printf("http://%s", path);
        uri = g_uri_parse(url, SOUP_HTTP_URI_FLAGS, NULL);
        if (uri && (g_uri_get_user(uri) || g_uri_get_password(uri) || g_uri_get_query(uri) ||
                    g_uri_get_fragment(uri) || g_uri_get_port(uri) <= 0 ||
                    strcmp(g_uri_get_path(uri), "/")))
            g_clear_pointer(&uri, g_uri_unref);
    } else if (*path != '/') {
        uri = g_uri_parse(path, SOUP_HTTP_URI_FLAGS, NULL);
    } else if (host) {
        g_autofree char *url = g_strdup_printf("http://%s%s", host, path);
        uri = g_uri_parse(url, SOUP_HTTP_URI_FLAGS, NULL);
    } else if (ver == SOUP_HTTP_1_0) {
        local = true;
    } else {
        why = "an HTTP/1.1 request must have a Host header";
    }
    if (!why && !local && (!uri || !g_uri_get_host(uri)))
        why = host && *path == '/'
                  ? "the Host header and the path do not make a valid URI (a port is a number "
                    "up to 65535)"
                  : "the request's target is not a URI with a host (a port is a number up to "
                    "65535)";
    if (!why && host && !*host && ver == SOUP_HTTP_1_1 && (*path == '/' || !strcmp(path, "*"))) {
        /* One libsoup takes (its URI "http:///path" has an empty host),
         * and the DNS-rebinding check let through as no Host. RFC 9112
         * 3.2 has a 400 for an invalid Host, and an "http" URI's host
         * must not be empty (RFC 9110 4.2.1); HTTP/1.0 may send none, or
         * an empty one (RFC 9112 3.3: the server's own name), and an
         * absolute-form target makes Host irrelevant. */
        why = "the Host header is empty: an HTTP/1.1 request names the server's host in it "
              "(Host: 127.0.0.1)";
        *ours = true;
    }
    if (uri)
        g_uri_unref(uri);
    soup_message_headers_unref(h);
    if (why)
        *status = 400;
    return why;
}

/* One Content-Length, a byte count, not together with a Transfer-Encoding
 * (a request smuggling trick); at most one Transfer-Encoding, "chunked" or
 * "identity" (libsoup 3.2 leaks the request's path on any other, "gzip" or
 * "chunked, chunked": fixed in libsoup 3.5.2). No folded (obs-fold) header
 * lines, which RFC 9112 lets a server refuse. */
const char *tern_framing_problem(const char *head, size_t n, int *status, tern_framing *out) {
    tern_framing f = {0};
    *status = 400;
    if (out)
        *out = f;
    /* The header lines: after the request line, which is no header
     * ("Content-Length: 12" as a request line counted as one, found by
     * fuzz-framing). */
    bool hop_framing = false; /* a Connection header names the framing */
    bool hop_checked = false; /* ... or a header the server's checks read */
    unsigned hosts = 0; /* Host header lines */
    size_t skip = 0; /* empty lines before the request line, which libsoup skips too */
    while (skip < n && (head[skip] == '\r' || head[skip] == '\n'))
        skip++;
    const char *first = memchr(head + skip, '\n', n - skip);
    for (const char *line = first ? first + 1 : head + n; line < head + n;) {
        const char *eol = memchr(line, '\n', (size_t)(head + n - line));
        if (!eol)
            break;
        const size_t len = (size_t)(eol - line);
        if (*line == ' ' || *line == '\t')
            /* obs-fold: libsoup joins it to the header above, which this
             * scan would not see ("Transfer-Encoding: chunked" then
             * " , gzip" reached libsoup's 501 and leaked the path) */
            return "a folded header line (obs-fold)";
        if (len >= 15 && !g_ascii_strncasecmp(line, "Content-Length:", 15)) {
            const char *v = line + 15, *e = eol;
            while (v < e && (*v == ' ' || *v == '\t'))
                v++;
            while (e > v && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
                e--;
            size_t digits = 0;
            uint64_t value = 0;
            while (v + digits < e && v[digits] >= '0' && v[digits] <= '9' && digits < 19)
                value = value * 10 + (uint64_t)(v[digits++] - '0');
            if (digits == 0 || v + digits != e || digits > 18)
                return "Content-Length is not a byte count";
            f.content_lengths++;
            f.content_length = value;
        } else if (len >= 18 && !g_ascii_strncasecmp(line, "Transfer-Encoding:", 18)) {
            const char *v = line + 18, *e = eol;
            while (v < e && (*v == ' ' || *v == '\t'))
                v++;
            while (e > v && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
                e--;
            const bool chunked = e - v == 7 && !g_ascii_strncasecmp(v, "chunked", 7);
            if (!chunked && !(e - v == 8 && !g_ascii_strncasecmp(v, "identity", 8))) {
                *status = 501;
                return "only Transfer-Encoding: chunked is supported";
            }
            f.transfer_encodings++;
            f.chunked |= chunked;
        } else if (len >= 11 && !g_ascii_strncasecmp(line, "Connection:", 11)) {
            /* libsoup drops the headers an HTTP/1.0 request's Connection
             * names (RFC 2616 14.10): "Connection: keep-alive,
             * Content-Length" had it read no body while this framing
             * passed one, read by libsoup as the next request, past these
             * checks. Any mention, on any version: no client means it. */
            hop_framing |= holds_nocase(line + 11, len - 11, "content-length") ||
                           holds_nocase(line + 11, len - 11, "transfer-encoding");
            /* dropped the same way, Host would pass the DNS-rebinding
             * check (no Host is allowed to HTTP/1.0), and Authorization,
             * Content-Type or Origin would be judged absent */
            static const char *const checked[] = {"host", "authorization", "content-type",
                                                  "origin"};
            for (size_t k = 0; k < sizeof checked / sizeof *checked; k++)
                hop_checked |= lists_option(line + 11, len - 11, checked[k]);
        } else if (len >= 5 && !g_ascii_strncasecmp(line, "Host:", 5)) {
            hosts++;
        } else if (expect_line(line, len)) {
            /* the value as libsoup trims it; anything but 100-continue (a
             * list, another expectation) is its 417, sent with an empty
             * body and the request's bytes left unread */
            const char *v = line + 7, *e = eol;
            while (v < e && (*v == ' ' || *v == '\t' || *v == '\r'))
                v++;
            while (e > v && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
                e--;
            f.expects++;
            f.expect_other |= !(e - v == 12 && !g_ascii_strncasecmp(v, "100-continue", 12));
        }
        line = eol + 1;
    }
    f.http_minor = request_minor(head + skip, n - skip);
    if (out)
        *out = f;
    if (!fields_on_first_line(head + skip, n - skip))
        return "the request line is not a method, a target and a version on one line";
    /* libsoup refuses these itself, as this does, but with an empty body
     * (its 505 an "HTTP/1.0 505"), no JSON error. */
    if (f.http_minor == -1)
        return "the request line's version is not HTTP/1.1 or HTTP/1.0";
    if (f.http_minor == -2) {
        *status = 505;
        return "HTTP version not supported: send HTTP/1.1 (or HTTP/1.0)";
    }
    if (!method_known(head + skip, n - skip)) {
        *status = 501;
        return "the method is not one HTTP defines (this server answers GET, HEAD, POST and "
               "OPTIONS)";
    }
    if (f.content_lengths > 1)
        return "more than one Content-Length";
    if (f.transfer_encodings > 1)
        return "more than one Transfer-Encoding";
    if (f.content_lengths && f.transfer_encodings)
        return "both Content-Length and Transfer-Encoding";
    /* RFC 9112 3.2 has a 400 for it. libsoup read the last, the
     * DNS-rebinding check all of them joined ("127.0.0.1, 127.0.0.1" is
     * no name it knows: 403), and a proxy in front may read the first. */
    if (hosts > 1)
        return "more than one Host header";
    if (hop_framing)
        return "a Connection header names Content-Length or Transfer-Encoding";
    if (hop_checked)
        return "a Connection header names Host, Authorization, Content-Type or Origin";
    /* HTTP/1.0 has no transfer codings: RFC 9112 6.1 has such a message's
     * framing treated as faulty (kept alive, where its body ends is the
     * reader's guess). */
    if (f.transfer_encodings && f.http_minor == 0)
        return "Transfer-Encoding in an HTTP/1.0 request";
    if (f.expect_other && f.http_minor == 1) {
        *status = 417;
        return "only Expect: 100-continue is supported";
    }
    /* Last, as libsoup reads them after the version, the header lines and
     * the expectation (its 417 first) */
    bool ours = false; /* refused here, libsoup would take it */
    const char *target = target_problem(head, n, status, &ours);
    if (target && !ours && out)
        out->target = true;
    return target;
}

bool tern_framing_ignores_expect(const tern_framing *f) {
    return f->expects > 0 && f->http_minor >= 0 &&
           (f->http_minor == 0 || (!f->chunked && f->content_length == 0));
}

size_t tern_framing_drop_expect(char *head, size_t n) {
    size_t skip = 0;
    while (skip < n && (head[skip] == '\r' || head[skip] == '\n'))
        skip++;
    const char *first = memchr(head + skip, '\n', n - skip);
    if (!first)
        return n;
    size_t in = (size_t)(first - head) + 1, out = in;
    while (in < n) {
        const char *eol = memchr(head + in, '\n', n - in);
        const size_t len = eol ? (size_t)(eol - (head + in)) + 1 : n - in;
        if (!expect_line(head + in, len)) {
            memmove(head + out, head + in, len);
            out += len;
        }
        in += len;
    }
    return out;
}

bool tern_framing_is_head(const char *buf, size_t n) {
    size_t i = 0;
    while (i < n && (buf[i] == '\r' || buf[i] == '\n'))
        i++;
    return n - i >= 5 && !memcmp(buf + i, "HEAD", 4) && (buf[i + 4] == ' ' || buf[i + 4] == '\t');
}

/* A chunk's size line, digits and extension, is read by libsoup into 128
 * bytes; a longer one is refused here before libsoup could cut it. */
#define CHUNK_LINE_MAX 100

/* A line end, CRLF or LF (libsoup reads lines up to the LF): its length, 0
 * when more bytes are needed, -1 when buf starts with something else. */
static int line_end(const char *buf, size_t n) {
    if (n == 0)
        return 0;
    if (buf[0] == '\n')
        return 1;
    if (buf[0] != '\r')
        return -1;
    if (n < 2)
        return 0;
    return buf[1] == '\n' ? 2 : -1;
}

static tern_framer_verdict refuse(int *status, const char **why, int s, const char *w) {
    *status = s;
    *why = w;
    return TERN_FRAMER_REFUSE;
}

static tern_framer_verdict head_step(tern_framer *f, const char *buf, size_t n, size_t *len,
                                     int *status, const char **why) {
    if (buf[0] == '\r' || buf[0] == '\n') {
        /* libsoup skips them too, but takes "\r\n\r\n\r\n" for a head of
         * its own: dropped here, libsoup sees the request line first */
        size_t k = 0;
        while (k < n && (buf[k] == '\r' || buf[k] == '\n'))
            k++;
        *len = k;
        return TERN_FRAMER_DROP;
    }
    f->head_method = tern_framing_is_head(buf, n);
    /* libsoup's end of the head: after the request line, the first line
     * that is "\n" or "\r\n", the latter only with 3 bytes before it */
    const size_t m = n < TERN_FRAMING_HEAD_MAX ? n : TERN_FRAMING_HEAD_MAX;
    size_t pos = f->pos, line = f->line, fields = 0, end = 0;
    while (pos < m) {
        const char *e = memchr(buf + pos, '\n', m - pos);
        const size_t stop = e ? (size_t)(e - buf) + 1 : m;
        if (memchr(buf + pos, '\0', stop - pos))
            return refuse(status, why, 400, "a NUL byte in the request's headers");
        pos = stop;
        if (!e)
            break;
        const size_t ll = pos - line;
        if (line > 0 && (ll == 1 || (ll == 2 && buf[line] == '\r' && line >= 3))) {
            fields = line;
            end = pos;
            break;
        }
        line = pos;
    }
    if (!end) {
        if (n >= TERN_FRAMING_HEAD_MAX)
            return refuse(status, why, 431, "the request's headers are over 65536 bytes");
        f->pos = pos;
        f->line = line;
        return TERN_FRAMER_MORE;
    }
    f->pos = f->line = 0;
    tern_framing fr;
    const char *w = tern_framing_problem(buf, fields, status, &fr);
    if (w) {
        *why = w;
        return TERN_FRAMER_REFUSE;
    }
    f->drop_expect = tern_framing_ignores_expect(&fr);
    if (fr.chunked) {
        f->state = TERN_FRAMER_CHUNK_SIZE;
    } else if (fr.content_lengths && fr.content_length > 0) {
        f->state = TERN_FRAMER_BODY;
        f->left = fr.content_length;
    }
    *len = end;
    return TERN_FRAMER_PASS;
}

static tern_framer_verdict chunk_size_step(tern_framer *f, const char *buf, size_t n, size_t *len,
                                           int *status, const char **why) {
    const size_t m = n < CHUNK_LINE_MAX ? n : CHUNK_LINE_MAX;
    const char *nl = memchr(buf, '\n', m);
    if (!nl) {
        if (n >= CHUNK_LINE_MAX)
            return refuse(status, why, 400, "a chunk's size line is over 100 bytes");
        return TERN_FRAMER_MORE;
    }
    const size_t ll = (size_t)(nl - buf) + 1;
    /* What libsoup reads with strtoul(line, NULL, 16), and nothing it
     * would read otherwise: no sign, no "0x", no blanks before */
    uint64_t size = 0;
    size_t i = 0, digits = 0;
    for (int v; i < ll && (v = tn_hex_digit((unsigned char)buf[i])) >= 0; i++) {
        /* Leading zeros are no digits of the size: RFC 9112 allows them,
         * strtoul reads them, and "00000000000000000005" was refused as
         * over 15 digits while main's server took it; the line's length
         * is bounded above (CHUNK_LINE_MAX). */
        if (size == 0 && v == 0)
            continue;
        if (++digits > 15)
            return refuse(status, why, 400, "a chunk's size is over 15 hex digits");
        size = size * 16 + (uint64_t)v;
    }
    if (i == 0)
        return refuse(status, why, 400, "a chunk's size is not a hex number");
    while (buf[i] == ' ' || buf[i] == '\t')
        i++;
    if (buf[i] == ';') /* an extension, ignored */
        while (buf[i] != '\r' && buf[i] != '\n' && buf[i] != '\0')
            i++;
    if (line_end(buf + i, ll - i) != (int)(ll - i))
        return refuse(status, why, 400, "a chunk's size line does not end after the size");
    f->state = size ? TERN_FRAMER_CHUNK : TERN_FRAMER_LAST;
    f->left = size;
    *len = ll;
    return TERN_FRAMER_PASS;
}

tern_framer_verdict tern_framer_step(tern_framer *f, const char *buf, size_t n, size_t *len,
                                     int *status, const char **why) {
    *len = 0;
    if (n == 0)
        return TERN_FRAMER_MORE;
    switch (f->state) {
    case TERN_FRAMER_HEAD:
        return head_step(f, buf, n, len, status, why);
    case TERN_FRAMER_BODY:
    case TERN_FRAMER_CHUNK:
        *len = n < f->left ? n : (size_t)f->left;
        f->left -= *len;
        if (f->left == 0)
            f->state = f->state == TERN_FRAMER_BODY ? TERN_FRAMER_HEAD : TERN_FRAMER_CHUNK_END;
        return TERN_FRAMER_PASS;
    case TERN_FRAMER_CHUNK_SIZE:
        return chunk_size_step(f, buf, n, len, status, why);
    case TERN_FRAMER_CHUNK_END:
    case TERN_FRAMER_LAST: {
        /* libsoup reads any line here; the next request would begin
         * inside what it took for the end of a chunk, or for a trailer
         * (libsoup 3.2 ends the body at the first trailer line) */
        const int e = line_end(buf, n);
        if (e < 0)
            return f->state == TERN_FRAMER_CHUNK_END
                       ? refuse(status, why, 400, "a chunk's data is longer than its size")
                       : refuse(status, why, 400,
                                "trailer fields after a chunked body are not supported");
        if (e == 0)
            return TERN_FRAMER_MORE;
        f->state = f->state == TERN_FRAMER_CHUNK_END ? TERN_FRAMER_CHUNK_SIZE : TERN_FRAMER_HEAD;
        *len = (size_t)e;
        return TERN_FRAMER_PASS;
    }
    }
    return refuse(status, why, 400, "the request's framing is lost");
}
