/* An OpenAI-compatible HTTP server over one shared model (issue 11).
 *
 * Threads and ownership:
 *   - tern_server_new() may be called on any thread. It checks the
 *     configuration, creates the first engine session and binds the
 *     listening socket, so that a bad host, a port in use or a model that
 *     does not fit are reported right there, and tern_server_port() /
 *     tern_server_url() are known before anything runs.
 *   - tern_server_run() blocks: it runs the HTTP side (libsoup) in the
 *     server's GMainContext, which it pushes as the thread-default context
 *     of the calling thread, and starts one engine worker thread that owns
 *     the sessions. Call it once, on a thread of your own (an app) or on the
 *     main thread (tern-cli). Every libsoup object lives and dies inside
 *     tern_server_run, on that thread.
 *   - tern_server_quit() may be called from any thread, at any time (also
 *     before tern_server_run starts, or from a signal-safe GLib source):
 *     tern_server_run then cancels the running generation, answers the
 *     waiting requests with 503 and returns.
 *   - tern_server_free() may be called from any thread once tern_server_run
 *     has returned (join its thread first), or when it was never called.
 *   - tern_server_port(), tern_server_url() and tern_server_host_read()
 *     are safe from any thread at any time between new and free.
 *
 * The model: the server only reads it (tn_model is immutable after load), so
 * an app may keep using the same `const tn_model *` in its own sessions on
 * its own threads while the server runs. It must outlive the server. The
 * server's sessions are its own: nothing an app pins or asks is seen by the
 * server, nor the reverse. Both compute on the CPU at the same time when both
 * are busy (set n_threads to share the cores).
 *
 * Requests: handlers parse and validate a request, then queue it (FIFO,
 * bounded: beyond the bound 429 with Retry-After); the worker answers the
 * jobs one at a time and hands text back to the server's context, which
 * writes it (SSE chunks or one JSON body). Recently used system prompts stay
 * pinned in a bounded set of sessions (least recently used replaced). */
#ifndef TERN_SERVER_H
#define TERN_SERVER_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "tern.h"

#define TERN_SERVER_MAX_PINS 16
/* image_url parts in one request */
#define TERN_SERVER_MAX_IMAGES 16

typedef struct tern_server_config {
    const char *host;        /* NULL: 127.0.0.1 */
    int port;                /* 0: an ephemeral port */
    const char *api_key;     /* NULL: no key (refused for a non-loopback host) */
    const char *cors_origin; /* NULL: no CORS headers */
    const char *model_id;    /* the id /v1/models lists and requests must name;
                                NULL: the model's name */
    int queue_max;           /* requests waiting or running; <= 0: 16 */
    size_t body_max;         /* request body bytes; 0: 1 MiB, or 20 MiB with a
                                vision projector (images come base64 in the body) */
    int32_t n_ctx;           /* per session; <= 0: the session's default (1024) */
    int32_t n_threads;       /* <= 0: physical cores */
    int pins_max;            /* system prompts kept pinned at once, each in its own
                                session with its own KV cache of n_ctx rows;
                                <= 0: 4; at most TERN_SERVER_MAX_PINS */
    GMainContext *context;   /* where the HTTP side runs; NULL: the server makes
                                its own. Referenced. tern_server_run pushes it as
                                its thread's default, so no other thread may run it
                                meanwhile (never the app's main context). */
    bool handle_signals;     /* SIGINT/SIGTERM quit the server (tern-cli; an app
                                leaves this false and calls tern_server_quit) */
    tn_drafter *drafter;     /* speculative decoding by default and for
                                "tern":{"speculation":"server"}; NULL: none (requests
                                may still ask for prompt lookup). Used only on the
                                server's worker thread: not one another thread
                                uses too. Not owned; must outlive the server. */
    tn_vision *vision;       /* the model's vision projector: user messages may carry
                                image_url parts (base64 data: URIs), decoded on a
                                thread of the server's own and encoded on its worker.
                                NULL: such parts get 400. It must feed a model as wide
                                as this one, whose vocabulary has image markers (else
                                tern_server_new fails). The server only reads it (an
                                encode keeps its scratch per call), so an app may pass
                                the projector it uses itself. Not owned; must outlive
                                the server. */
    uint64_t image_pixels_max; /* decoded images held at once, over all requests (a
                                Gemma 4 projector sees them whole: 12 bytes a pixel
                                until the worker encodes them); beyond it a request
                                gets 400 (its own images) or 503 (other requests');
                                0: TERN_SERVER_IMAGE_MEGAPIXELS from the environment
                                (MiB of pixels), else 128 Mi pixels */
    int request_timeout_s;   /* a client has this long from connecting to the end of its
                                request's headers and body (slow or unfinished requests
                                are cut: slowloris); <= 0: 30 */
    const char *pin_cache_dir; /* where pin snapshots go: NULL: the engine's default
                                ($XDG_CACHE_HOME/tern/pins); "": none written or read */
    uint64_t pin_cache_max_bytes; /* the snapshots' total size (least recently used
                                     evicted beyond it); 0: the engine's default (4 GiB) */
    int token_delay_ms;      /* tests only: a pause after every token */
    tn_session_warn_cb warn; /* the sessions' warnings (a pin snapshot ignored as
                                damaged, ...), called on the server's worker thread;
                                NULL: the engine prints them to stderr in English.
                                tern-cli serve passes cli_engine_warning (in the
                                user's language, docs/TRANSLATING.md). */
    void *warn_user;
} tern_server_config;

typedef struct tern_server tern_server;

/* --host, read once for every use of it: what it binds and who reaches it. */
typedef struct {
    bool address;     /* an IPv4 or IPv6 address, or "localhost": what --host binds */
    bool loopback;    /* 127.0.0.0/8, ::1 and "localhost": this machine only */
    bool any;         /* 0.0.0.0 or ::, every interface: answers to any Host */
    bool v6;          /* an IPv6 address (in brackets in a URL) */
    guint8 bytes[16]; /* the address in network order (4 of them for IPv4) */
    const char *text; /* the address bound, as text: the host given ("localhost"
                         is 127.0.0.1); points into it, or a constant */
} tern_server_host;

/* host: NULL is the default, 127.0.0.1. */
tern_server_host tern_server_host_read(const char *host);

/* Checks the configuration, creates the first session and binds the socket.
 * NULL with *error set (a non-loopback host without a key, a key that is only
 * blanks, a host that is
 * not an address, a port in use, a session failure). Nothing is served
 * until tern_server_run. */
tern_server *tern_server_new(const tn_model *model, const tern_server_config *config,
                             GError **error);
/* The port actually bound (useful with port 0). */
int tern_server_port(const tern_server *server);
/* The OpenAI base URL clients use, "http://127.0.0.1:8080/v1" (IPv6 hosts in
 * brackets); owned by the server. */
const char *tern_server_url(const tern_server *server);
/* Serves until tern_server_quit() (or SIGINT/SIGTERM with handle_signals);
 * then stops the engine: the running generation is cancelled, waiting
 * requests get 503. Once per server. */
void tern_server_run(tern_server *server);
/* Any thread, any time; idempotent. */
void tern_server_quit(tern_server *server);
void tern_server_free(tern_server *server);

#endif
