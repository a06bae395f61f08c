/* tern-server-private.h: what the server's parts share (tern-server.c: HTTP
 * and the engine worker; tern-request.c: a request's body read into a job).
 * Not installed; nothing outside server/ includes it. */
#pragma once

#include "tern-server.h"
#include "tern-reasoning.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <stdbool.h>

#ifdef TERN_HAVE_IMAGEIO
#include "tern-embed-cache.h"
#include "tern-image.h"
#endif

/* OpenAI's default for the legacy completions endpoint: a raw continuation
 * of a base model may never reach an end token. */
#define DEFAULT_COMPLETION_MAX_TOKENS 16
/* JSON nesting a request may have: json-glib parses recursively, one stack
 * frame per level, so a body of 100,000 '[' (200 KB) overflowed the stack.
 * Real requests nest 5 or 6 deep (tools' JSON schemas a few more). */
#define MAX_JSON_DEPTH 128
/* Values in one request body (scan_body). A chat of thousands of turns
 * and tools with large schemas stay far below it; json-glib's tree of this
 * many costs tens of MB. */
#define MAX_JSON_VALUES 200000

/* Completions with several prompts (docs/SERVER.md, "Several prompts"):
 * at most this many in one request, and at most this many tokens in all,
 * their prompts' and (prompts x max_tokens) their answers'. */
#define TERN_COMPLETION_PROMPTS_MAX 64
#define TERN_COMPLETION_PROMPTS_TOKENS_MAX 262144

typedef enum { JOB_CHAT, JOB_COMPLETION } job_kind;

/* One prompt of several: its text, or its token ids. */
typedef struct job_prompt_in {
    char *text;
    int32_t *ids;
    int32_t n_ids;
    /* worker: text's tokens, encoded once for the prompts' bound
     * (prompts_fit) and kept for its run; empty until then, or where
     * encoding failed (run_completion encodes it again and says why). */
    tn_tokens tokens;
} job_prompt_in;

/* The answer to one prompt of several, kept while the next one runs. */
typedef struct job_choice {
    GString *text;
    GArray *lp;      /* job_logprob; NULL without logprobs */
    glong lp_offset; /* text_offset of its first entry after the echo */
    tn_session_stats stats;
} job_choice;

/* A streamed choice of several that the worker has ended: its text and
 * log-probabilities not yet sent when it ended, and its finish_reason. */
typedef struct job_choice_end {
    char *text;
    GArray *lp; /* job_logprob; NULL without logprobs */
    const char *finish;
} job_choice_end;

/* tern.speculation: which drafter a request uses. */
typedef enum {
    SPEC_DEFAULT, /* the server's drafter (config.drafter), or none */
    SPEC_OFF,
    SPEC_LOOKUP,  /* prompt lookup: no model, always available */
    SPEC_SERVER,  /* the server's drafter; refused when it has none */
} spec_choice;

/* One image_url part. */
typedef struct job_image {
    char *uri;     /* the data: URI as sent; freed once decoded */
    char *where;   /* "messages[1].content[2]": names it in errors */
    char *key;     /* SHA-256 of the URI: the encoding cache's key (with the budget) */
    void *decoded; /* TernImage (imageio): pool thread -> worker, freed once encoded */
    float *cached; /* rows found in the encoding cache instead (a copy): not decoded */
    int cached_n;  /* their token count (Gemma 4's follows the image's size) */
} job_image;

/* One generated token's log-probability and its top alternatives. */
typedef struct job_logprob {
    int32_t token;
    float logprob;
    int n_top;
    /* Characters at the start of the token's piece that the answer's text
     * does not hold (tn_session_token_dropped: a control token's text; an
     * answer keeps every leading space); text_offset skips them. */
    int trimmed;
    bool none; /* the prompt's first token: null logprob and top_logprobs */
    tn_token_logprob top[TN_TOP_LOGPROBS_MAX];
} job_logprob;

typedef struct job {
    gint refs;
    tern_server *server;
    SoupServerMessage *msg;
    job_kind kind;
    bool stream;
    bool include_usage;
    char id[64];
    gint64 created;

    /* The request, owned by the job. */
    char *pin_key;                /* which pinned session answers it (see slot_acquire) */
    char *system;                 /* the system message; NULL: none */
    char *user;                   /* single-turn: the only user message */
    char *prompt;                 /* completions: the raw prompt (NULL: prompt_ids) */
    int32_t *prompt_ids;          /* completions: the prompt as token ids */
    int32_t n_prompt_ids;
    /* completions, several prompts (n_prompts > 1; else prompt or
     * prompt_ids): the worker points prompt and prompt_ids at each in turn
     * and keeps each answer in choices. */
    job_prompt_in *prompts;
    int n_prompts;
    job_choice *choices;
    int n_choices;  /* answered so far */
    /* Streamed, several prompts: the choices the worker ended and the
     * server's context has not yet sent (job_choice_end, under lock), and
     * the index and next text_offset of the choice being sent (server's
     * context only: the worker starts the next prompt meanwhile). */
    GPtrArray *ends;
    int sse_index;
    glong sse_offset;
    bool sse_open;      /* a chunk of choice sse_index is out: its end is not */
    int32_t run_tokens; /* worker: tokens generated for the prompt running */
    bool echo;                    /* completions: the prompt comes first in the answer */
    tn_session_message *messages; /* a conversation: roles and contents */
    int n_messages;
    bool single_turn;
    tn_gen_params gen;
    char *stop_store[TN_SESSION_MAX_STOP];
    tn_logit_bias *logit_bias; /* gen.logit_bias points here */
    tn_json_schema *schema;    /* gen.schema points here */
    /* logprobs: alternatives per token (chat top_logprobs, completions
     * logprobs); -1: none asked for. */
    int logprobs;
    spec_choice spec;

    /* image_url parts, in the order of the TN_IMAGE_MARKERs put in their place. */
    job_image *images;
    int n_images;
    int text_markers;   /* TN_IMAGE_MARKERs the client wrote in text */
    int image_budget;   /* tern.image_tokens; 0: the projector's native count */
    GError *image_error;     /* decoding failed (decode thread), for images[image_error_at] */
    int image_error_at;
    bool images_busy;        /* image_error: other requests' images fill the budget */
    guint64 image_pixels;    /* of images[].decoded, counted in srv->image_pixels_held */
    double decode_ms;        /* decode thread */
    tn_image_embd *embd;     /* worker: the encoded images, rows owned */
    int32_t image_tokens;
    double encode_ms;
    int images_reused;       /* taken from the encoding cache */
    const char *error_code;  /* parsing: the OpenAI error code of a refusal, or NULL */
    /* The body, from the server's context to a parse-pool thread, which
     * reads it into the job (parse_body) and lets it go; a refusal is
     * answered back on the context: its status (0: none), param and text. */
    GBytes *body;
    int refusal;
    char *refusal_param;
    char *refusal_why;

    /* Tool definitions (request "tools"), strings owned; gen.tools points here. */
    tn_chat_tool *tools;
    int n_tools;
    char *raw_tools;        /* parsing: the body's "tools" text, for the schemas' own text */
    char *raw_schema;       /* parsing: response_format.json_schema.schema as sent */
    bool tool_choice_none;  /* "none": the answer is never taken as calls */
    int chat_kind;          /* the model's template (tn_chat_kind), for its call format */
    /* Streams with tools: content is sent up to a call's marker, the rest
     * held (server's context only). */
    GString *tool_text;     /* held: a possible marker's start, or the calls */
    bool in_calls;          /* the marker was seen */

    /* Set by the server's context when the client is gone; read by the worker. */
    gint gone;
    /* Set by the worker when it takes the job off the queue: from then on
     * watch_running looks at its client, not drop_waiting_gone. */
    gint taken;

    /* Text generated but not yet written (worker -> server's context). */
    GMutex lock;
    GString *pending;
    bool flush_scheduled;
    GString *full; /* the whole answer (non-streaming) */
    bool role_sent;
    bool headers_sent; /* streams: the 200 and its headers are out (at the first text) */
    bool split_reasoning;   /* <think> blocks go to reasoning_content (reasoning_format) */
    tern_reasoning reasoning; /* the streaming splitter; server's context only */

    /* Log-probabilities (job_logprob), one per token, following its text:
     * lp_held (worker) until the engine releases text after the token,
     * then lp_ready (under lock, with the text in pending or full), then,
     * streamed, lp_out (server's context) until a chunk carries them. */
    tn_session *lp_session; /* worker: the session generating */
    GArray *lp_held;
    GArray *lp_ready;
    GArray *lp_out;
    glong lp_offset;        /* completions streamed: text_offset of the next token */
    /* worker, echo with logprobs: the prompt's detokenizer, which says what
     * the echoed text leaves out of each prompt token (see run_completion) */
    tn_detok_stream lp_prompt;
    bool lp_prompt_ids;     /* the prompt came as ids: its echo is their text */
    /* worker, echo with logprobs of a text prompt: the echoed text (the
     * prompt), how many of its bytes the prompt's tokens so far spell, and
     * whether the next token is the first, a BOS the tokenizer added */
    const char *lp_echo;
    size_t lp_echo_len;
    size_t lp_echo_at;
    bool lp_echo_first;
    bool lp_echo_bos;
    bool lp_echo_prefix; /* a dummy "▁" is due (tn_tokenizer_add_space_prefix) */

    /* Filled by the worker when it is done. */
    int rc;
    tn_error err;
    const char *err_param; /* the request member err is about, when the worker knows it */
    tn_session_stats stats;
    const char *pin_source; /* "kept", "loaded", "prefilled", or NULL (raw) */
} job;

/* A session with one system prompt pinned. Worker thread only. */
typedef struct pin_slot {
    tn_session *session; /* NULL: not created yet */
    char *key;           /* the pin_key it holds; NULL: none yet */
    guint64 used;        /* LRU clock */
} pin_slot;

struct tern_server {
    tern_server_config cfg;
    char *host;
    tern_server_host bound; /* host, read (its text points into it) */
    char *api_key;
    char *cors;
    char *model_id;
    char *url;
    char *pin_cache_dir;
    const tn_model *model;
    int32_t n_ctx;
    int port;
    GSocket *socket;      /* bound and listening since tern_server_new */
    GMainContext *context;
    GMainLoop *loop;
    GMutex quit_lock;
    GSource *quit_source; /* attached by tern_server_quit; destroyed by free */
    gint ran;

    /* The HTTP side: only inside tern_server_run, on its thread. */
    SoupServer *soup;
    int pending; /* queued + running jobs */
    guint64 n_served;    /* answers written */
    guint64 n_abandoned; /* clients gone before their answer was complete */
    guint64 next_id;
    char id_base[20];    /* random per run: ids unique across restarts */
    gint64 started;      /* unix time: /v1/models' created */

    /* Connections, accepted by the server itself (tern-conn.c). */
    GHashTable *conns;   /* remote "address:port" -> conn */
    GSource *accept_source;
    GSource *sweep_source;
    int conns_max;
    gint jobs_alive; /* requests' jobs allocated: 0 again once run returns */

    /* Images: decoded by this pool (inside tern_server_run), encoded on the
     * worker with cfg.n_threads threads. */
    GThreadPool *decode_pool;
    GThreadPool *parse_pool; /* bodies read into jobs off the context (parse_body) */
#ifdef TERN_HAVE_IMAGEIO
    /* Encodings kept for reuse (see IMAGE_CACHE_SIZE): looked up by the
     * decode threads, filled by the worker (it locks itself). */
    TernEmbedCache *encodings;
    /* Pixels of decoded images not yet encoded, all requests (cfg.image_pixels_max):
     * decode threads add, the worker and job_free take away. */
    GMutex image_lock;
    guint64 image_pixels_held;
#endif

    /* Jobs given to the queue and not yet finished (finish_job), one
     * reference each: the queue itself cannot be looked through, and a
     * waiting job whose client left is taken back out of it
     * (drop_waiting_gone). HTTP side only. */
    GQueue waiting;

    /* The engine side. */
    GAsyncQueue *queue;
    GThread *worker;
    gint stopping;
    pin_slot slots[TERN_SERVER_MAX_PINS]; /* worker only (slot 0 made by new) */
    tn_drafter *lookup;                   /* worker only, made on first use */
    guint64 clock;
    GMutex current_lock; /* guards the two below: the job running and its session */
    job *current;
    tn_session *current_session;
};

/* What tern_request_scan_body found wrong, and in which top-level member
 * ("messages"). */
typedef struct tern_body_scan {
    const char *problem; /* NULL: nothing; else "nul", "depth", "values" or "range" */
    char member[48];
} tern_body_scan;

/* The first look at a generation request's body, before json-glib's (see
 * tern-request.c); here rather than in tern-server.c so that fuzz-request
 * starts where the server does. */
void tern_request_scan_body(const char *p, size_t n, tern_body_scan *sc);

/* The body of a chat (or completions) request, read into j. On a refusal,
 * false with the offending parameter in *param (or NULL) and the reason in
 * *why (g_free it); j->error_code may name the OpenAI error code. */
bool tern_request_parse_chat(JsonObject *o, job *j, const char **param, char **why);
bool tern_request_parse_completion(JsonObject *o, job *j, const char **param, char **why);
/* Frees what the two above fill in j (its messages, tools, stop strings,
 * the images' texts and the images array), so that the server's job and the
 * request fuzzer free the same fields; the caller first frees what it hung
 * on each image (decoded pictures, embeddings). */
void tern_request_clear(job *j);
/* A boolean member: fallback when absent or null; fallback with *bad = name
 * when it is something else. */
bool tern_request_member_bool(JsonObject *o, const char *name, bool fallback, const char **bad);

/* tern-server.c: an OpenAI-style error body ({"error": {...}}), g_free it. */
char *tern_server_error_body(const char *message, const char *type, const char *param,
                             const char *code);

/* tern-conn.c: the connections (docs/SERVER.md, "Kept-alive connections"). */
/* Starts accepting on srv->socket (in srv->context), and the sweep that
 * enforces deadlines; tern_conns_stop stops both and closes what is open. */
void tern_conns_start(tern_server *srv);
void tern_conns_stop(tern_server *srv);
/* The socket of msg's connection, or NULL. */
GSocket *tern_conn_socket(tern_server *srv, SoupServerMessage *msg);
/* A request began on its connection: its deadline runs (--request-timeout). */
void tern_conn_request_started(tern_server *srv, SoupServerMessage *msg);
/* Its request is whole ("got-body", data: the server): the deadline ends. */
void tern_conn_request_read(SoupServerMessage *msg, gpointer data);
/* msg's answer (status and body set) written now, before a body libsoup
 * would wait for, then the connection closed. */
void tern_conn_answer_now(tern_server *srv, SoupServerMessage *msg);
