/* A client's connection as libsoup reads it: a request at a time, each
 * request's head checked (tern-framing.h) before libsoup reads any of it,
 * on every request of a kept-alive connection, not only the first. */
#pragma once

#include <gio/gio.h>

typedef struct {
    /* A head (or a chunk line) was refused: called once, when the reader
     * has taken every byte before it, so that the answer written here
     * follows libsoup's answers to the requests before. The read then
     * fails and a close leaves base open: the caller closes it once the
     * answer is out. head: the refused request is a HEAD (an answer
     * without a body). */
    void (*refuse)(int status, const char *why, gboolean head, gpointer data);
    /* The reader waits for the rest of a head that has begun (libsoup
     * does not know of a request before it has its whole head). */
    void (*head_begun)(gpointer data);
    /* libsoup closes the connection: true when the caller closes base
     * itself, later (closed now with bytes the client sent unread, the
     * connection is reset, and the answer before may be lost). */
    gboolean (*closing)(gpointer data);
    gpointer data;
} tern_framed_calls;

GIOStream *tern_framed_new(GIOStream *base, const tern_framed_calls *calls);
/* No more calls: data is gone, and base closed (libsoup may hold the
 * stream much longer: what it has buffered is let go of). */
void tern_framed_forget(GIOStream *framed);
