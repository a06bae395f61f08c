/* A request's framing, read from its raw header bytes before libsoup has the
 * connection (docs/SERVER.md, "Hardening"): what libsoup would answer
 * wrongly, or not at all, is refused first. Plain C and GLib: the server
 * and its fuzz target (tests/fuzz/fuzz-framing.c) share it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int content_lengths;     /* Content-Length lines */
    uint64_t content_length; /* the last one's value */
    int transfer_encodings;  /* Transfer-Encoding lines (chunked or identity) */
    bool chunked;            /* one of them says chunked */
} tern_framing;

/* head: the request line and header lines, n bytes up to and including the
 * last header line's end. NULL when the framing is fine, else what is
 * wrong, with *status 400, or 501 for a transfer coding this server does
 * not know. out (may be NULL) gets what the scan saw. */
const char *tern_framing_problem(const char *head, size_t n, int *status, tern_framing *out);
