/* A request's framing, read from its raw header bytes before libsoup has the
 * connection (docs/SERVER.md, "Hardening"): what libsoup would answer
 * wrongly, or not at all, is refused first. Plain C, GLib and libsoup's
 * header parser (no server): the server and its fuzz targets
 * (tests/fuzz/fuzz-framing.c) share it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int content_lengths;     /* Content-Length lines */
    uint64_t content_length; /* the last one's value */
    int transfer_encodings;  /* Transfer-Encoding lines (chunked or identity) */
    bool chunked;            /* one of them says chunked */
    int expects;             /* Expect lines */
    bool expect_other;       /* one of them is not exactly "100-continue" */
    int http_minor;          /* the request line's HTTP/1.x as libsoup reads it; -1: refused
                                (400), -2: another version (505) */
    bool target;             /* refused as libsoup refuses while parsing the head (no Host
                                in HTTP/1.1, one it cannot make a URI of), its status */
} tern_framing;

/* head: the request line and header lines, n bytes up to and including the
 * last header line's end. NULL when the framing is fine, else what is
 * wrong, with *status 400, 501 for a transfer coding this server does not
 * know, 505 for another HTTP version, or 417 for an expectation other than
 * 100-continue; and libsoup's own 400 for a head it would refuse while it
 * parses it (no Host in HTTP/1.1, a Host it cannot make a URI of). out (may be
 * NULL) gets what the scan saw. */
const char *tern_framing_problem(const char *head, size_t n, int *status, tern_framing *out);

/* Expect is ignored where RFC 9110 (10.1.1) says to, or where it asks for
 * nothing: in an HTTP/1.0 request, and in one without content (in a
 * request line libsoup reads: its head, without them, ends where it
 * did). libsoup
 * 3.2 would answer "HTTP/1.0 100 Continue" to the first, and the server
 * could not refuse the second on its head without closing the connection
 * (the client may or may not send a body). */
bool tern_framing_ignores_expect(const tern_framing *f);
/* Removes the Expect lines from a head that tern_framing_problem passed (n
 * bytes, with its empty line); returns its new length (the bytes after it
 * are left as they were). */
size_t tern_framing_drop_expect(char *head, size_t n);

/* Whether the request in buf[0..n) (empty lines before it skipped) is a
 * HEAD, its method as libsoup reads it (up to a blank): every answer to
 * one has no body (RFC 9110 9.3.2), refusals written before libsoup
 * would answer included. */
bool tern_framing_is_head(const char *buf, size_t n);

/* Request headers read at most (libsoup's own limit is 64 KiB too). */
#define TERN_FRAMING_HEAD_MAX 65536

/* Every request on a connection, framed as libsoup 3.2 frames it, so that
 * each head is checked before libsoup reads any of it (server/tern-framed.c
 * holds the bytes back until then): the head up to its empty line, then
 * the body by its Content-Length or by chunks, then the next head. What
 * libsoup would read in a way this does not follow (a chunk size that is
 * no plain hex number, bytes after a chunk's data, trailer fields) is
 * refused, not guessed at. */
typedef enum {
    TERN_FRAMER_HEAD,       /* before a request's head */
    TERN_FRAMER_BODY,       /* in a body of known length: left bytes to go */
    TERN_FRAMER_CHUNK_SIZE, /* before a chunk's size line */
    TERN_FRAMER_CHUNK,      /* in a chunk's data: left bytes to go */
    TERN_FRAMER_CHUNK_END,  /* the line end after a chunk's data */
    TERN_FRAMER_LAST,       /* the line end after the last chunk */
} tern_framer_state;

typedef struct {
    tern_framer_state state;
    uint64_t left;
    /* The head just passed has Expect lines the reader must not see
     * (tern_framing_ignores_expect): the framed stream drops them. */
    bool drop_expect;
    /* A head not yet whole: how far it was read (no NUL before pos), the
     * start of its line there. Read on from there, not again from its
     * start: a head sent a byte at a time cost the square of its length. */
    size_t pos, line;
    /* The request whose head or body is read is a HEAD: its refusal has
     * no body. */
    bool head_method;
} tern_framer;

typedef enum {
    TERN_FRAMER_MORE,   /* nothing can be said before more bytes come */
    TERN_FRAMER_PASS,   /* *len bytes at the start go to libsoup */
    TERN_FRAMER_DROP,   /* *len bytes at the start are dropped (empty lines before a request line) */
    TERN_FRAMER_REFUSE, /* *status (400, 417, 431, 501) and *why */
} tern_framer_verdict;

/* One step over buf[0..n), the bytes that follow those already passed or
 * dropped (after MORE, the same bytes and more); f (zeroed for a new
 * connection) moves on past what is passed. */
tern_framer_verdict tern_framer_step(tern_framer *f, const char *buf, size_t n, size_t *len,
                                     int *status, const char **why);
