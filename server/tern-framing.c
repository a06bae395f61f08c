/* The request's framing, from its raw header bytes (tern-framing.h). */
#include "tern-framing.h"

#include <glib.h>
#include <string.h>

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
        }
        line = eol + 1;
    }
    if (out)
        *out = f;
    if (f.content_lengths > 1)
        return "more than one Content-Length";
    if (f.transfer_encodings > 1)
        return "more than one Transfer-Encoding";
    if (f.content_lengths && f.transfer_encodings)
        return "both Content-Length and Transfer-Encoding";
    return NULL;
}
