/* tern-remote.h: a client for OpenAI-compatible servers (vLLM, llama.cpp's
 * llama-server, Ollama, tern-cli serve), so that the app and tern-cli can use
 * a bigger machine as their engine (docs/REMOTE.md).
 *
 * The calls block: run them in a worker thread (the app) or the main thread
 * of a command (tern-cli). A TernRemote belongs to the thread that made it;
 * its GCancellable may be cancelled from any thread. Nothing here aborts on
 * what a server sends: a hostile or broken answer ends in a GError whose
 * message says what went wrong in words a user can act on, and the text
 * already streamed stays with the caller. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

#define TERN_REMOTE_ERROR (tern_remote_error_quark ())
GQuark tern_remote_error_quark (void);

typedef enum {
  TERN_REMOTE_ERROR_URL,           /* the address is not an http(s) URL */
  TERN_REMOTE_ERROR_UNREACHABLE,   /* no connection could be made */
  TERN_REMOTE_ERROR_AUTH,          /* 401/403: no key or the wrong one */
  TERN_REMOTE_ERROR_MODEL,         /* the server has no such model */
  TERN_REMOTE_ERROR_BUSY,          /* 429 (or 503 with Retry-After) */
  TERN_REMOTE_ERROR_HTTP,          /* another error status */
  TERN_REMOTE_ERROR_PROTOCOL,      /* the answer is not what the API documents */
  TERN_REMOTE_ERROR_DISCONNECTED,  /* the stream ended before the answer did */
  TERN_REMOTE_ERROR_SERVER,        /* the server reported an error mid-stream */
  TERN_REMOTE_ERROR_IMAGE,         /* an image too large to send */
} TernRemoteError;

typedef struct _TernRemote TernRemote;

/* base_url: "http://host:8000" or ".../v1"; api_key: NULL or "" for none. */
TernRemote *tern_remote_new      (const char  *base_url,
                                  const char  *api_key,
                                  GError     **error);
void        tern_remote_free     (TernRemote  *remote);
/* The API root requests go to ("http://host:8000/v1"). */
const char *tern_remote_base_url (TernRemote  *remote);
/* The same for messages: a password in it (user:password@) hidden, as in
 * every error this client sets. */
const char *tern_remote_shown_url (TernRemote  *remote);
/* Any server address as shown to the user: its password hidden
 * ("http://user@proxy/v1"); g_free. */
char       *tern_remote_url_shown (const char  *url);

/* GET /v1/models: the model ids, a NULL-terminated array (g_strfreev). */
char      **tern_remote_list_models (TernRemote    *remote,
                                     GCancellable  *cancellable,
                                     GError       **error);

/* An image of a user message, sent as the file's own bytes in a data: URL
 * (an `image_url` part, as OpenAI's API, vLLM, llama-server and Tern's
 * server take them); the server fits it to its model. */
typedef struct {
  GBytes     *bytes;
  const char *mime;     /* "image/png", ...: the caller checked the bytes'
                         * magic (tern_image_sniff in imageio/) */
} TernRemoteImage;

/* The largest image sent: OpenAI's own limit per image, and below the
 * request limits of the servers Tern talks to. */
#define TERN_REMOTE_MAX_IMAGE_BYTES (20 * 1024 * 1024)

typedef struct {
  const char            *role;     /* "system", "user", "assistant" */
  const char            *content;
  const TernRemoteImage *images;   /* NULL: none */
  gsize                  n_images;
} TernRemoteMessage;


typedef struct {
  int      max_tokens;      /* 0: the server's default */
  double   temperature;     /* < 0: the server's default */
  double   top_p;           /* < 0: unset */
  int      top_k;           /* < 0: unset (vLLM, llama-server and Tern take it) */
  double   min_p;           /* < 0: unset */
  double   repeat_penalty;  /* <= 0: unset */
  gboolean seed_set;
  guint64  seed;
  int      thinking;        /* -1: the server's default, 0 off, 1 on */
} TernRemoteParams;

void tern_remote_params_init (TernRemoteParams *params);

typedef enum {
  TERN_REMOTE_PIECE_CONTENT,
  TERN_REMOTE_PIECE_REASONING,  /* reasoning_content: thinking, shown apart */
} TernRemotePiece;

/* One piece of the answer as it arrives; FALSE stops the answer (the stats
 * then say finish "cancelled"). */
typedef gboolean (*TernRemotePieceFunc) (TernRemotePiece  kind,
                                         const char      *text,
                                         gsize            len,
                                         gpointer         user_data);

/* Where the throughput figures came from, best first. */
typedef enum {
  TERN_REMOTE_TIMINGS_NONE,
  TERN_REMOTE_TIMINGS_CLIENT,        /* measured here, from the arrival of pieces */
  TERN_REMOTE_TIMINGS_TERN,          /* usage.timings of tern-cli serve */
  TERN_REMOTE_TIMINGS_LLAMA_SERVER,  /* the "timings" object of llama-server */
} TernRemoteTimings;

typedef struct {
  gint64            prompt_tokens;      /* -1: not reported */
  gint64            cached_tokens;      /* prompt tokens the server reused; -1: not reported */
  gint64            completion_tokens;  /* reported, else the pieces counted */
  double            prefill_tok_s;      /* 0: unknown */
  double            decode_tok_s;       /* 0: unknown */
  double            ttft_ms;            /* request sent to first piece, measured here */
  double            total_ms;
  TernRemoteTimings timings;
  char              finish_reason[32];  /* "stop", "length", "cancelled", ... or "" */
} TernRemoteStats;

/* POST /v1/chat/completions with stream: true. Pieces go to piece_func as
 * they arrive; stats (optional) is filled on success and on failure alike,
 * with what was known by then. Cancelling `cancellable` ends the answer with
 * G_IO_ERROR_CANCELLED. */
gboolean tern_remote_chat (TernRemote               *remote,
                           const char               *model,
                           const TernRemoteMessage  *messages,
                           gsize                     n_messages,
                           const TernRemoteParams   *params,
                           TernRemotePieceFunc       piece_func,
                           gpointer                  user_data,
                           TernRemoteStats          *stats,
                           GCancellable             *cancellable,
                           GError                  **error);

/* The stream decoder on its own (what tern_remote_chat feeds the response
 * body to), for the tests: bytes in any cut, events out. `where` names the
 * server in messages. */
typedef struct _TernRemoteStream TernRemoteStream;

TernRemoteStream *tern_remote_stream_new    (const char           *where,
                                             TernRemotePieceFunc   piece_func,
                                             gpointer              user_data);
void              tern_remote_stream_free   (TernRemoteStream     *stream);
/* FALSE with an error on a bad event or an overlong line; the stream is then
 * finished and takes nothing more. */
gboolean          tern_remote_stream_feed   (TernRemoteStream     *stream,
                                             const char           *data,
                                             gsize                 len,
                                             GError              **error);
/* TRUE once [DONE] or a finish_reason was seen. */
gboolean          tern_remote_stream_done   (TernRemoteStream     *stream);
/* The usage and timings the events carried; completion_tokens falls back to
 * the pieces counted. The clock fields are left to the caller. */
void              tern_remote_stream_stats  (TernRemoteStream     *stream,
                                             TernRemoteStats      *stats);

/* What a status the server answered means, for `model` at `where`: the
 * sentence tern_remote_chat reports (body: the answer's bytes, may be NULL;
 * retry_after: the header, may be NULL). */
void tern_remote_set_http_error (GError     **error,
                                 const char  *where,
                                 const char  *model,
                                 guint        status,
                                 const char  *retry_after,
                                 const char  *body,
                                 gsize        body_len);

G_END_DECLS
