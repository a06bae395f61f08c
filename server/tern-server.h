/* An OpenAI-compatible HTTP server over one libtern session (issue 11).
 *
 * The SoupServer runs on the thread that calls tern_server_run() (its
 * GMainContext is the thread-default one); one engine worker thread owns the
 * session. Handlers parse and validate a request, then queue it (FIFO,
 * bounded: beyond the bound 429 with Retry-After); the worker answers the
 * jobs one at a time and hands text back to the main context, which writes
 * it (SSE chunks or one JSON body). */
#ifndef TERN_SERVER_H
#define TERN_SERVER_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "tern.h"

typedef struct tern_server_config {
    const char *host;        /* NULL: 127.0.0.1 */
    int port;                /* 0: an ephemeral port */
    const char *api_key;     /* NULL: no key (refused for a non-loopback host) */
    const char *cors_origin; /* NULL: no CORS headers */
    const char *model_id;    /* the id /v1/models lists and requests must name */
    int queue_max;           /* requests waiting or running; <= 0: 16 */
    size_t body_max;         /* request body bytes; 0: 1 MiB */
    int32_t n_ctx;           /* <= 0: the session's default */
    int32_t n_threads;       /* <= 0: physical cores */
    int token_delay_ms;      /* tests only: a pause after every token */
} tern_server_config;

typedef struct tern_server tern_server;

/* True for 127.0.0.0/8, ::1 and "localhost". */
bool tern_server_host_is_loopback(const char *host);

/* Creates the session and starts listening. NULL with *error set (a
 * non-loopback host without a key, a port in use, a session failure). The
 * model must outlive the server. */
tern_server *tern_server_new(const tn_model *model, const tern_server_config *config,
                             GError **error);
/* The port actually bound (useful with port 0). */
int tern_server_port(const tern_server *server);
/* Serves until SIGINT/SIGTERM or tern_server_quit(); then stops the engine
 * (the running generation is cancelled, waiting requests get 503). */
void tern_server_run(tern_server *server);
void tern_server_quit(tern_server *server);
void tern_server_free(tern_server *server);

#endif
