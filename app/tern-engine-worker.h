/* tern-engine-worker.h: the one thread that owns the engine.
 *
 * Every engine call (model loading, pinning, generation, snapshot I/O) runs on
 * the worker thread; the UI only queues requests and receives signals on the
 * main context. Each request gets an id (a generation number); signals carry
 * it so the UI applies only the result of the request it is waiting for.
 */
#pragma once

#include <gio/gio.h>

#include "tern-sampling.h"

#include "tern.h"

G_BEGIN_DECLS

typedef enum {
  TERN_PHASE_IDLE,
  TERN_PHASE_PIN,     /* prefilling the system prompt */
  TERN_PHASE_PREFILL, /* prefilling the request */
  TERN_PHASE_DECODE,
} TernPhase;

/* Figures of one request, live while it runs and final when it ends. */
typedef struct {
  TernPhase phase;
  int prefill_done;       /* tokens of the prefill done so far */
  int prefill_total;
  double elapsed_ms;      /* since the request started */
  int prompt_tokens;      /* tokens this request prefilled */
  double prefill_ms;
  double prefill_tok_s;
  int generated_tokens;
  double decode_ms;
  double decode_tok_s;
  double ttft_ms;         /* request start -> first token */
  int restored_tokens;    /* tokens reused from the pin or the conversation */
  double restore_ms;
  int drafted;           /* speculation: tokens proposed (final figures only) */
  int accepted;          /* speculation: tokens accepted (live: those delivered so far) */
  int verify_steps;      /* speculation: batched verifications (final figures only) */
  int kv_len;            /* rows in the KV cache; live too on a local model, else 0 */
  const char *stop_reason; /* static string; NULL while running */
  /* Final figures only: */
  int n_ctx;             /* the session's context size */
  int dropped_messages;  /* chat: oldest messages left out to fit the context */
  int error_code;        /* the engine's code (TN_ERR_*) when the request failed */
  int overflow_tokens;   /* the tokens of the message with the system prompt when it
                            does not fit the context (chat: when even it alone does
                            not), from the engine's overflow record (else 0) */
  gboolean overflow_at_least; /* overflow_tokens is a lower bound: the engine refused the
                                 text from its length, before encoding it */
} TernStats;

typedef struct {
  int n_pin;
  int n_ctx;
  int n_free;
  guint64 kv_bytes;      /* the KV cache of n_ctx rows */
  double prefill_ms;
  gboolean loaded_from_snapshot;
} TernPinState;

/* Speculation drafters, in the order of the settings' Drafter enum. */
typedef enum {
  TERN_DRAFTER_PROMPT_LOOKUP,
  TERN_DRAFTER_DRAFT_MODEL,  /* a smaller GGUF with the same vocabulary */
  TERN_DRAFTER_DFLASH,       /* a DFlash draft GGUF for the loaded model */
  TERN_DRAFTER_MTP,          /* a Gemma 4 MTP assistant GGUF (docs/MTP.md) */
} TernDrafterKind;

/* What a generation request uses; filled from the settings. */
typedef struct {
  double temperature;
  double top_p;
  gboolean deterministic;  /* greedy, whatever the rest says */
  gboolean model_sampling; /* the model's suggestion over temperature, top_p */
  guint64 seed;
  int max_tokens;
  gboolean thinking;
  gboolean speculate;    /* speculative decoding (the output does not change) */
  TernDrafterKind drafter; /* a file drafter runs only once prepared (below); else
                              prompt lookup */
  int draft_max;         /* tokens per draft; <= 0: the drafter's default */
  int image_tokens;      /* image token budget; <= 0: the projector's native count */
} TernGenSettings;

#define TERN_TYPE_ENGINE_WORKER (tern_engine_worker_get_type ())
G_DECLARE_FINAL_TYPE (TernEngineWorker, tern_engine_worker, TERN, ENGINE_WORKER, GObject)

TernEngineWorker *tern_engine_worker_new               (void);

/* An engine error's message in the user's language (docs/TRANSLATING.md). */
char             *tern_engine_error_text               (const tn_error        *err);
/* A chat's context overflow, its size into stats' overflow_tokens and
 * overflow_at_least; nothing for any other error. */
void              tern_engine_overflow_stats           (const tn_error        *err,
                                                        TernStats             *stats);

/* A file a user or a chat names, read whole through tn_read_file: only a
 * regular file of at most max bytes (a FIFO, a device or a directory is
 * refused without blocking or reading, docs/DESIGN.md "Files a user names").
 * TRUE with *out (g_free; NUL-terminated, *len bytes before the NUL; len may
 * be NULL), or FALSE with error set (G_IO_ERROR, the engine's message in the
 * user's language). */
gboolean          tern_read_file                       (const char            *path,
                                                        guint64                max,
                                                        char                 **out,
                                                        gsize                 *len,
                                                        GError               **error);

/* Session size for the next load: context rows and threads. n_ctx <= 0:
 * tern_context_auto for the model and this machine; threads <= 0: every
 * physical core. */
void              tern_engine_worker_set_session_size  (TernEngineWorker      *self,
                                                        int                    n_ctx,
                                                        int                    n_threads);

/* What the worker's signals carry: one event each, a boxed type, so that
 * handlers read named fields and a new field changes no signature. During
 * the emission the event and its strings are the worker's
 * (G_SIGNAL_TYPE_STATIC_SCOPE); a handler that keeps one copies it
 * (g_boxed_copy). Errors are in the user's language. */

/* "model-loaded": a load ended (error NULL: the model is in place). */
typedef struct {
  guint id;
  char *path;
  char *description;
  gboolean is_demo;
  char *error;
  char *english;          /* the error as the engine wrote it */
} TernModelLoadedEvent;

/* "load-progress": how far a model's load is, from 0 to 1 (the engine's
 * tn_model_params.progress: a hundred steps at most, each further on). */
typedef struct {
  guint id;               /* of the load */
  double fraction;
} TernLoadProgressEvent;

/* "token-count": the system prompt's tokens (-1: cannot count, remote). */
typedef struct {
  guint id;
  int n_tokens;
} TernTokenCountEvent;

/* "pinned": a system prompt's pin ended. */
typedef struct {
  guint id;
  TernPinState state;
  char *error;
  gboolean cancelled;
} TernPinnedEvent;

/* "update": text written since the last update (coalesced: at most one
 * pending), with the live figures. */
typedef struct {
  guint id;
  char *text;
  guint8 *drafted;        /* one flag per byte of text (1: from an accepted draft) */
  TernStats stats;
} TernUpdateEvent;

/* "finished": a request ended; its final figures. */
typedef struct {
  guint id;
  TernStats stats;
  char *error;
  gboolean cancelled;
} TernFinishedEvent;

/* "drafter-ready": a draft file was loaded, or refused (error). */
typedef struct {
  guint id;
  TernDrafterKind kind;
  char *error;
} TernDrafterReadyEvent;

/* "server-state": the local server started (url), stopped, or failed. */
typedef struct {
  gboolean running;
  char *url;
  char *error;
} TernServerStateEvent;

/* "vision", after each model-loaded: the projector is the one
 * *mmproj*.gguf beside the model, as tern-cli run finds it. */
typedef struct {
  guint id;               /* of the load */
  int native_tokens;      /* image tokens at the native size; -1: no vision */
  int extra_rows;         /* KV rows per image besides its tokens (its markers) */
  char *projector;        /* its path, or NULL */
  /* Why the projector beside the model cannot be used (it does not load, it
   * is another model's, the model has no image tokens); NULL otherwise. */
  char *unusable;
} TernVisionEvent;

/* "warning": something the user should know that is not an error. */
typedef struct {
  char *message;
} TernWarningEvent;

#define TERN_TYPE_MODEL_LOADED_EVENT (tern_model_loaded_event_get_type ())
#define TERN_TYPE_LOAD_PROGRESS_EVENT (tern_load_progress_event_get_type ())
#define TERN_TYPE_TOKEN_COUNT_EVENT (tern_token_count_event_get_type ())
#define TERN_TYPE_PINNED_EVENT (tern_pinned_event_get_type ())
#define TERN_TYPE_UPDATE_EVENT (tern_update_event_get_type ())
#define TERN_TYPE_FINISHED_EVENT (tern_finished_event_get_type ())
#define TERN_TYPE_DRAFTER_READY_EVENT (tern_drafter_ready_event_get_type ())
#define TERN_TYPE_SERVER_STATE_EVENT (tern_server_state_event_get_type ())
#define TERN_TYPE_VISION_EVENT (tern_vision_event_get_type ())
#define TERN_TYPE_WARNING_EVENT (tern_warning_event_get_type ())
GType tern_model_loaded_event_get_type (void) G_GNUC_CONST;
GType tern_load_progress_event_get_type (void) G_GNUC_CONST;
GType tern_token_count_event_get_type (void) G_GNUC_CONST;
GType tern_pinned_event_get_type (void) G_GNUC_CONST;
GType tern_update_event_get_type (void) G_GNUC_CONST;
GType tern_finished_event_get_type (void) G_GNUC_CONST;
GType tern_drafter_ready_event_get_type (void) G_GNUC_CONST;
GType tern_server_state_event_get_type (void) G_GNUC_CONST;
GType tern_vision_event_get_type (void) G_GNUC_CONST;
GType tern_warning_event_get_type (void) G_GNUC_CONST;

/* Each request returns its id; the signals above carry it (but
 * server-state and warning), so that the UI applies only the result of the
 * request it waits for. */
guint             tern_engine_worker_load_model        (TernEngineWorker      *self,
                                                        const char            *path);
/* Loads the demo model at path, writing a small random-weight model there
 * first when the file does not exist. */
guint             tern_engine_worker_load_demo         (TernEngineWorker      *self,
                                                        const char            *path);
/* Loads the draft file for kind (a draft model or a DFlash draft) against
 * the loaded model, replacing the drafter prepared before; prompt lookup
 * needs no file (path ignored). A load of another model drops it: prepare
 * again after model-loaded. Answers with drafter-ready, whose error is the
 * engine's message (missing file, another vocabulary, a draft that does not
 * fit the model). */
guint             tern_engine_worker_prepare_drafter   (TernEngineWorker      *self,
                                                        TernDrafterKind        kind,
                                                        const char            *path);
/* The local OpenAI-compatible server (server/tern-server.h) over the loaded
 * model, on 127.0.0.1 only: it runs on a thread of its own with its own
 * main context and sessions. The worker stops it before the model it
 * serves is replaced (a load: start it again after model-loaded) and when
 * the worker shuts down. port 0: any free port. api_key NULL or "": none.
 * Answers with server-state. FALSE when this build has no server. */
gboolean          tern_engine_worker_serve             (TernEngineWorker      *self,
                                                        int                    port,
                                                        const char            *api_key);
void              tern_engine_worker_stop_serving      (TernEngineWorker      *self);
/* Whether this build includes the server. */
gboolean          tern_engine_worker_can_serve         (void);
guint             tern_engine_worker_count_tokens      (TernEngineWorker      *self,
                                                        const char            *system_prompt);
guint             tern_engine_worker_pin               (TernEngineWorker      *self,
                                                        const char            *system_prompt);
guint             tern_engine_worker_ask               (TernEngineWorker      *self,
                                                        const char            *user_text,
                                                        const TernGenSettings *settings);
/* images: encoded image files (PNG, JPEG, WebP, GIF bytes) for a model with
 * a vision projector, in the order of the TN_IMAGE_MARKERs in the text (or,
 * without markers, before it); NULL or empty: none. */
guint             tern_engine_worker_ask_images        (TernEngineWorker      *self,
                                                        const char            *user_text,
                                                        GPtrArray             *images,
                                                        const TernGenSettings *settings);
/* roles and contents: n_messages each; the last is a user message. When
 * the conversation and room for an answer (max_tokens, at most half the
 * context) do not fit, the oldest turns are left out (the pinned system
 * prompt stays): finished's stats say how many messages
 * (dropped_messages). */
guint             tern_engine_worker_chat              (TernEngineWorker      *self,
                                                        const char * const    *roles,
                                                        const char * const    *contents,
                                                        guint                  n_messages,
                                                        const TernGenSettings *settings);
/* The same with images (GBytes, as above) for the markers of all user
 * messages, in order. */
guint             tern_engine_worker_chat_images       (TernEngineWorker      *self,
                                                        const char * const    *roles,
                                                        const char * const    *contents,
                                                        guint                  n_messages,
                                                        GPtrArray             *images,
                                                        const TernGenSettings *settings);
/* Generation on an OpenAI-compatible server instead of a local model
 * (docs/REMOTE.md): the server at url (api_key NULL or "": none), its model
 * id model. Answers with model-loaded (path "remote:URL#MODEL", description
 * "MODEL on URL (remote)", or the error sentence: unreachable, wrong key,
 * no such model) and vision (-1). From then on pin keeps the system
 * prompt, sent first in every request (the server's prefix cache reuses
 * it; finished's restored_tokens are the tokens it reports cached), ask
 * and chat stream from the server, cancel closes the connection, and
 * token-count answers -1. Loading a local model ends it. FALSE from
 * can_remote: this build has no remote client (no manager library). */
gboolean          tern_engine_worker_can_remote        (void);
guint             tern_engine_worker_use_remote        (TernEngineWorker      *self,
                                                        const char            *url,
                                                        const char            *api_key,
                                                        const char            *model);
/* Stops every request queued or running so far: the running one within one
 * decode step. */
void              tern_engine_worker_cancel            (TernEngineWorker      *self);
gboolean          tern_engine_worker_has_model         (TernEngineWorker      *self);
/* Stops the thread (cancelling what runs) and waits for it; also done on
 * dispose. */
void              tern_engine_worker_shutdown          (TernEngineWorker      *self);

/* What an image costs with the projector of the model last loaded, asked
 * from the main thread while the engine thread works (tn_vision is
 * immutable; the worker swaps it under a lock). budget is the preference:
 * snapped to one Gemma 4 takes, as the worker does at send. */
/* The budget "automatic" (the image-tokens preference at 0) stands for:
 * in flash mode, the smallest budget of a projector that takes several
 * (Gemma 4's 70, the seed's flash budget, as tern-cli --single-turn and
 * the server's single-turn requests); otherwise 0, the projector's most
 * (Gemma 4's 1120, Gemma 3's native 256). */
int               tern_engine_worker_auto_image_budget (TernEngineWorker      *self,
                                                        gboolean               flash);
/* The side to fit a picture to before encoding (tn_vision_input_side;
 * 0: unscaled, Gemma 4's and without a projector). */
int               tern_engine_worker_image_fit_side    (TernEngineWorker      *self,
                                                        int                    budget);
/* The tokens a picture of width x height pixels costs
 * (tn_vision_image_tokens): Gemma 4's follow its size. Negative, with
 * error set, when the projector refuses it (an aspect too extreme for the budget) or
 * there is none. */
int               tern_engine_worker_image_tokens      (TernEngineWorker      *self,
                                                        int                    budget,
                                                        int                    width,
                                                        int                    height,
                                                        GError               **error);

/* The sampling the loaded model suggests (tern-sampling.h; every field
 * below 0 when none), as of the last "model-loaded" without an error. */
const TernSampling *tern_engine_worker_get_suggested_sampling (TernEngineWorker *self);

/* Pictures encoded by the projector since the process started, encodings
 * reused from the worker's cache not counted (tests). */
guint tern_engine_worker_n_encoded (void);

G_END_DECLS
