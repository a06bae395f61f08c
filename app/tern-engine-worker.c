/* tern-engine-worker.c: one GThread owns libtern.
 *
 * The pattern is GNOME Text Editor's editor-document-statistics.c: requests go
 * in through a GAsyncQueue; results come back with g_main_context_invoke_full
 * holding a GWeakRef on the worker object, so a window closed while the engine
 * is busy simply drops them. Tokens are coalesced: the engine thread appends
 * to a buffer under a mutex and posts a callback only when none is pending, so
 * however fast the model decodes, the main loop sees at most one update per
 * iteration instead of one idle per token.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <glib/gi18n.h>

#include "tern.h"
#include "tern-context.h"
#include "tern-engine-worker.h"
#include "tern-size.h"
#include "tern-sampling.h"
#ifdef TERN_HAVE_SERVER
#include "tern-server.h"
#endif
#ifdef TERN_HAVE_MANAGER
#include "tern-connections.h"
#include "tern-manager.h"
#include "tern-remote.h"
#endif
#ifdef TERN_HAVE_IMAGEIO
#include "tern-embed-cache.h"
#include "tern-image.h"
#include "tern-image-cache.h"
#endif

typedef enum {
  REQ_LOAD,
  REQ_LOAD_DEMO,
  REQ_COUNT,
  REQ_DRAFTER,
  REQ_SERVE,
  REQ_SERVE_STOP,
  REQ_PIN,
  REQ_ASK,
  REQ_CHAT,
  REQ_REMOTE,
  REQ_QUIT,
} RequestKind;

typedef struct {
  RequestKind kind;
  guint id;
  char *text;              /* path, system prompt or user text */
  GStrv roles;
  GStrv contents;
  TernGenSettings gen;
  int n_ctx;
  int n_threads;
  TernDrafterKind drafter;
  int port;
  char *api_key;
  char *model;       /* REQ_REMOTE: the server's model id (text: its URL) */
  GPtrArray *images; /* GBytes */
} Request;

/* Shared by the object (main thread) and the engine thread; refcounted so
 * that events in flight outlive a disposed worker object. */
typedef struct {
  GMainContext *context;
  GWeakRef owner;
  GAsyncQueue *requests;

  /* Every request with an id <= cancel_upto is cancelled. */
  gint cancel_upto;
  /* The window is going: a draft model's load stops too (a Stop during an
   * answer must not cancel one queued behind it, so cancel_upto does not). */
  gint quitting;
  /* Only the newest token-count request is worth running. */
  gint latest_count;

  GMutex lock;
  tn_session *running_session; /* the session a cancel must reach */
  GCancellable *running_remote; /* the remote request a cancel must reach */
  GString *pending_text;
  /* One flag per byte of pending_text: 1 where the token came from an
   * accepted speculative draft (the app can tint those). */
  GByteArray *pending_drafted;
  TernStats live;
  guint live_id;
  gboolean update_pending;
  /* The engine thread's projector, for the main thread's questions about
   * an image's cost (tn_vision is immutable once loaded, and callable from
   * any thread); replaced and freed only under the lock. */
  const tn_vision *vision;
} Shared;

struct _TernEngineWorker {
  GObject parent_instance;
  Shared *shared;
  GThread *thread;
  guint next_id;
  int n_ctx;
  int n_threads;
  gboolean has_model;
  TernSampling suggested; /* the loaded model's, as the engine thread found it */
};

G_DEFINE_FINAL_TYPE (TernEngineWorker, tern_engine_worker, G_TYPE_OBJECT)

enum {
  SIGNAL_MODEL_LOADED,
  SIGNAL_LOAD_PROGRESS,
  SIGNAL_TOKEN_COUNT,
  SIGNAL_PINNED,
  SIGNAL_UPDATE,
  SIGNAL_FINISHED,
  SIGNAL_WARNING,
  SIGNAL_DRAFTER_READY,
  SIGNAL_SERVER_STATE,
  SIGNAL_VISION,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
request_free (Request *req)
{
  g_free (req->text);
  if (req->api_key != NULL)
    memset (req->api_key, 0, strlen (req->api_key));
  g_free (req->api_key);
  g_free (req->model);
  g_clear_pointer (&req->images, g_ptr_array_unref);
  g_strfreev (req->roles);
  g_strfreev (req->contents);
  g_free (req);
}

static void
shared_clear (gpointer data)
{
  Shared *shared = data;

  g_weak_ref_clear (&shared->owner);
  g_async_queue_unref (shared->requests);
  g_main_context_unref (shared->context);
  g_string_free (shared->pending_text, TRUE);
  g_byte_array_unref (shared->pending_drafted);
  g_clear_object (&shared->running_remote);
  g_mutex_clear (&shared->lock);
}

static Shared *
shared_ref (Shared *shared)
{
  return g_atomic_rc_box_acquire (shared);
}

static void
shared_unref (Shared *shared)
{
  g_atomic_rc_box_release_full (shared, shared_clear);
}

static gboolean
is_cancelled (Shared *shared,
              guint   id)
{
  return (gint) id <= g_atomic_int_get (&shared->cancel_upto);
}

/* ------------------------------------------------------------- events out */

/* The signals' payloads (tern-engine-worker.h): copies own their strings. */

static gpointer
model_loaded_event_copy (gpointer data)
{
  const TernModelLoadedEvent *e = data;
  TernModelLoadedEvent *c = g_memdup2 (e, sizeof *e);

  c->path = g_strdup (e->path);
  c->description = g_strdup (e->description);
  c->error = g_strdup (e->error);
  c->english = g_strdup (e->english);
  return c;
}

static void
model_loaded_event_free (gpointer data)
{
  TernModelLoadedEvent *e = data;

  g_free (e->path);
  g_free (e->description);
  g_free (e->error);
  g_free (e->english);
  g_free (e);
}

G_DEFINE_BOXED_TYPE (TernModelLoadedEvent, tern_model_loaded_event, model_loaded_event_copy,
                     model_loaded_event_free)

static gpointer
load_progress_event_copy (gpointer data)
{
  return g_memdup2 (data, sizeof (TernLoadProgressEvent));
}

G_DEFINE_BOXED_TYPE (TernLoadProgressEvent, tern_load_progress_event, load_progress_event_copy,
                     g_free)

static gpointer
token_count_event_copy (gpointer data)
{
  return g_memdup2 (data, sizeof (TernTokenCountEvent));
}

G_DEFINE_BOXED_TYPE (TernTokenCountEvent, tern_token_count_event, token_count_event_copy, g_free)

static gpointer
pinned_event_copy (gpointer data)
{
  const TernPinnedEvent *e = data;
  TernPinnedEvent *c = g_memdup2 (e, sizeof *e);

  c->error = g_strdup (e->error);
  return c;
}

static void
pinned_event_free (gpointer data)
{
  TernPinnedEvent *e = data;

  g_free (e->error);
  g_free (e);
}

G_DEFINE_BOXED_TYPE (TernPinnedEvent, tern_pinned_event, pinned_event_copy, pinned_event_free)

static gpointer
update_event_copy (gpointer data)
{
  const TernUpdateEvent *e = data;
  TernUpdateEvent *c = g_memdup2 (e, sizeof *e);

  c->text = g_strdup (e->text);
  c->drafted = e->drafted != NULL && e->text != NULL
                 ? g_memdup2 (e->drafted, strlen (e->text)) : NULL;
  return c;
}

static void
update_event_free (gpointer data)
{
  TernUpdateEvent *e = data;

  g_free (e->text);
  g_free (e->drafted);
  g_free (e);
}

G_DEFINE_BOXED_TYPE (TernUpdateEvent, tern_update_event, update_event_copy, update_event_free)

static gpointer
finished_event_copy (gpointer data)
{
  const TernFinishedEvent *e = data;
  TernFinishedEvent *c = g_memdup2 (e, sizeof *e);

  c->error = g_strdup (e->error);
  return c;
}

static void
finished_event_free (gpointer data)
{
  TernFinishedEvent *e = data;

  g_free (e->error);
  g_free (e);
}

G_DEFINE_BOXED_TYPE (TernFinishedEvent, tern_finished_event, finished_event_copy,
                     finished_event_free)

static gpointer
drafter_ready_event_copy (gpointer data)
{
  const TernDrafterReadyEvent *e = data;
  TernDrafterReadyEvent *c = g_memdup2 (e, sizeof *e);

  c->error = g_strdup (e->error);
  return c;
}

static void
drafter_ready_event_free (gpointer data)
{
  TernDrafterReadyEvent *e = data;

  g_free (e->error);
  g_free (e);
}

G_DEFINE_BOXED_TYPE (TernDrafterReadyEvent, tern_drafter_ready_event, drafter_ready_event_copy,
                     drafter_ready_event_free)

static gpointer
server_state_event_copy (gpointer data)
{
  const TernServerStateEvent *e = data;
  TernServerStateEvent *c = g_memdup2 (e, sizeof *e);

  c->url = g_strdup (e->url);
  c->error = g_strdup (e->error);
  return c;
}

static void
server_state_event_free (gpointer data)
{
  TernServerStateEvent *e = data;

  g_free (e->url);
  g_free (e->error);
  g_free (e);
}

G_DEFINE_BOXED_TYPE (TernServerStateEvent, tern_server_state_event, server_state_event_copy,
                     server_state_event_free)

static gpointer
vision_event_copy (gpointer data)
{
  const TernVisionEvent *e = data;
  TernVisionEvent *c = g_memdup2 (e, sizeof *e);

  c->projector = g_strdup (e->projector);
  c->unusable = g_strdup (e->unusable);
  return c;
}

static void
vision_event_free (gpointer data)
{
  TernVisionEvent *e = data;

  g_free (e->projector);
  g_free (e->unusable);
  g_free (e);
}

G_DEFINE_BOXED_TYPE (TernVisionEvent, tern_vision_event, vision_event_copy, vision_event_free)

static gpointer
warning_event_copy (gpointer data)
{
  const TernWarningEvent *e = data;
  TernWarningEvent *c = g_memdup2 (e, sizeof *e);

  c->message = g_strdup (e->message);
  return c;
}

static void
warning_event_free (gpointer data)
{
  TernWarningEvent *e = data;

  g_free (e->message);
  g_free (e);
}

G_DEFINE_BOXED_TYPE (TernWarningEvent, tern_warning_event, warning_event_copy, warning_event_free)

typedef struct {
  Shared *shared;
  guint signal;
  guint id;
  char *path;
  char *description;
  char *error;
  char *english;         /* model-loaded: the engine's message, untranslated */
  gboolean flag;
  int n;
  double fraction;       /* load-progress */
  TernStats stats;
  TernPinState pin;
  TernSampling sampling; /* model-loaded: the model's suggestion */
} Event;

static void
event_free (gpointer data)
{
  Event *ev = data;

  shared_unref (ev->shared);
  g_free (ev->path);
  g_free (ev->description);
  g_free (ev->error);
  g_free (ev->english);
  g_free (ev);
}

/* Takes what the engine thread buffered and emits one update. */
static void
flush_update (Shared           *shared,
              TernEngineWorker *owner)
{
  g_autofree char *text = NULL;
  g_autoptr(GByteArray) drafted = NULL;
  TernStats live;
  guint id;

  g_mutex_lock (&shared->lock);
  if (!shared->update_pending)
    {
      g_mutex_unlock (&shared->lock);
      return;
    }
  text = g_strndup (shared->pending_text->str, shared->pending_text->len);
  g_string_truncate (shared->pending_text, 0);
  drafted = g_byte_array_sized_new (shared->pending_drafted->len + 1);
  g_byte_array_append (drafted, shared->pending_drafted->data, shared->pending_drafted->len);
  g_byte_array_set_size (shared->pending_drafted, 0);
  live = shared->live;
  id = shared->live_id;
  shared->update_pending = FALSE;
  g_mutex_unlock (&shared->lock);

  {
    TernUpdateEvent e = { .id = id, .text = text, .drafted = drafted->data, .stats = live };

    g_signal_emit (owner, signals[SIGNAL_UPDATE], 0, &e);
  }
}

static gboolean
update_dispatch (gpointer data)
{
  Shared *shared = data;
  g_autoptr(TernEngineWorker) owner = g_weak_ref_get (&shared->owner);

  if (owner != NULL)
    flush_update (shared, owner);
  else
    {
      g_mutex_lock (&shared->lock);
      shared->update_pending = FALSE;
      g_mutex_unlock (&shared->lock);
    }
  return G_SOURCE_REMOVE;
}

static gboolean
event_dispatch (gpointer data)
{
  Event *ev = data;
  g_autoptr(TernEngineWorker) owner = g_weak_ref_get (&ev->shared->owner);

  if (owner == NULL)
    return G_SOURCE_REMOVE;

  switch (ev->signal)
    {
    case SIGNAL_MODEL_LOADED:
      if (ev->error == NULL)
        {
          owner->has_model = TRUE;
          owner->suggested = ev->sampling;
        }
      {
        TernModelLoadedEvent e = { .id = ev->id, .path = ev->path, .description = ev->description,
                                   .is_demo = ev->flag, .error = ev->error,
                                   .english = ev->english };

        g_signal_emit (owner, signals[SIGNAL_MODEL_LOADED], 0, &e);
      }
      break;
    case SIGNAL_LOAD_PROGRESS:
      {
        TernLoadProgressEvent e = { .id = ev->id, .fraction = ev->fraction };

        g_signal_emit (owner, signals[SIGNAL_LOAD_PROGRESS], 0, &e);
      }
      break;
    case SIGNAL_TOKEN_COUNT:
      {
        TernTokenCountEvent e = { .id = ev->id, .n_tokens = ev->n };

        g_signal_emit (owner, signals[SIGNAL_TOKEN_COUNT], 0, &e);
      }
      break;
    case SIGNAL_PINNED:
      flush_update (ev->shared, owner);
      {
        TernPinnedEvent e = { .id = ev->id, .state = ev->pin, .error = ev->error,
                              .cancelled = ev->flag };

        g_signal_emit (owner, signals[SIGNAL_PINNED], 0, &e);
      }
      break;
    case SIGNAL_FINISHED:
      /* The last tokens must land before "finished". */
      flush_update (ev->shared, owner);
      {
        TernFinishedEvent e = { .id = ev->id, .stats = ev->stats, .error = ev->error,
                                .cancelled = ev->flag };

        g_signal_emit (owner, signals[SIGNAL_FINISHED], 0, &e);
      }
      break;
    case SIGNAL_WARNING:
      {
        TernWarningEvent e = { .message = ev->error };

        g_signal_emit (owner, signals[SIGNAL_WARNING], 0, &e);
      }
      break;
    case SIGNAL_VISION:
      {
        TernVisionEvent e = { .id = ev->id, .native_tokens = ev->n,
                              .extra_rows = (int) ev->pin.n_pin, .projector = ev->path,
                              .unusable = ev->error };

        g_signal_emit (owner, signals[SIGNAL_VISION], 0, &e);
      }
      break;
    case SIGNAL_SERVER_STATE:
      {
        TernServerStateEvent e = { .running = ev->flag, .url = ev->path, .error = ev->error };

        g_signal_emit (owner, signals[SIGNAL_SERVER_STATE], 0, &e);
      }
      break;
    case SIGNAL_DRAFTER_READY:
      {
        TernDrafterReadyEvent e = { .id = ev->id, .kind = (TernDrafterKind) ev->n,
                                    .error = ev->error };

        g_signal_emit (owner, signals[SIGNAL_DRAFTER_READY], 0, &e);
      }
      break;
    default:
      g_assert_not_reached ();
    }
  return G_SOURCE_REMOVE;
}

static Event *
event_new (Shared *shared,
           guint   signal,
           guint   id)
{
  Event *ev = g_new0 (Event, 1);

  ev->shared = shared_ref (shared);
  ev->signal = signal;
  ev->id = id;
  tern_sampling_clear (&ev->sampling);
  return ev;
}

static void
event_post (Event *ev)
{
  g_main_context_invoke_full (ev->shared->context, G_PRIORITY_DEFAULT, event_dispatch, ev,
                              event_free);
}

/* Engine thread: publish the live figures (and text) of request id. */
static void
post_live (Shared          *shared,
           guint            id,
           const TernStats *live,
           const char      *piece,
           gboolean         drafted)
{
  gboolean post = FALSE;

  g_mutex_lock (&shared->lock);
  if (shared->live_id != id)
    {
      g_string_truncate (shared->pending_text, 0);
      g_byte_array_set_size (shared->pending_drafted, 0);
    }
  shared->live_id = id;
  shared->live = *live;
  if (piece != NULL)
    {
      gsize len = strlen (piece);
      guint old = shared->pending_drafted->len;

      g_string_append_len (shared->pending_text, piece, (gssize) len);
      g_byte_array_set_size (shared->pending_drafted, old + (guint) len);
      memset (shared->pending_drafted->data + old, drafted ? 1 : 0, len);
    }
  if (!shared->update_pending)
    {
      shared->update_pending = TRUE;
      post = TRUE;
    }
  g_mutex_unlock (&shared->lock);

  if (post)
    g_main_context_invoke_full (shared->context, G_PRIORITY_DEFAULT, update_dispatch,
                                shared_ref (shared), (GDestroyNotify) shared_unref);
}

/* ------------------------------------------------------- the engine thread */

typedef struct {
  Shared *shared;
  tn_model *model;
  tn_session *session;
  /* Made once per loaded model (a drafter must not outlive its target) and
   * handed to the requests that ask for speculation. */
  tn_drafter *lookup;
  /* The file drafter last prepared for this model (NULL: none). */
  tn_drafter *chosen;
  TernDrafterKind chosen_kind;
#ifdef TERN_HAVE_SERVER
  /* The local server over model, and the thread that runs it. */
  tern_server *server;
  GThread *server_thread;
#endif
  int n_ctx;
  char *model_id; /* the file name without .gguf, as tern-cli serve names it */
  TernSampling suggested; /* the loaded model's own sampling (tern-sampling.h) */
  /* Why the last pin of this session failed; NULL once one succeeds. The
   * session keeps the previous pin, and an answer written from it would be
   * taken for one written from the prompt the user just set. */
  char *pin_error;
  tn_vision *vision; /* the projector beside the model; NULL: none */
#ifdef TERN_HAVE_IMAGEIO
  /* Encodings of recent pictures for this projector, keyed by the file's
   * sha256 and the budget (docs/VISION.md): a picture sent again, or kept
   * in a chat that is sent turn after turn, is encoded once. Made on first
   * use. */
  TernEmbedCache *encodings;
#endif
#ifdef TERN_HAVE_MANAGER
  /* Remote mode (docs/REMOTE.md): generation on a server; the local model,
   * if any, stays loaded but unused until the next load. */
  TernRemote *remote;
  char *remote_model;
  char *remote_pin; /* the system prompt, sent first in every request */
#endif
} Engine;

typedef struct {
  Engine *engine;
  guint id;
  gint64 start_us;
  gint64 first_token_us;
  TernStats live;
  /* The engine's figures being filled: it sets restored_tokens before the
   * prefill starts, so the live kv_len counts the rows kept from the pin or
   * the conversation. NULL where there is no local session (remote). */
  const tn_session_stats *st;
  /* A pin's first report gives the rows it keeps (tn_session_pin): its
   * speed counts from there, or an edit at the end of a long prompt read
   * as thousands of tokens a second. -1: no report yet. */
  int32_t pin_kept;
} RunState;

static double
ms_since (gint64 start_us)
{
  return (g_get_monotonic_time () - start_us) / 1000.0;
}

static bool
on_progress (int32_t done,
             int32_t total,
             void   *user)
{
  RunState *run = user;

  if (is_cancelled (run->engine->shared, run->id))
    return false;
  run->live.prefill_done = done;
  run->live.prefill_total = total;
  if (run->st != NULL)
    run->live.kv_len = run->st->restored_tokens + done;
  run->live.elapsed_ms = ms_since (run->start_us);
  if (run->live.phase == TERN_PHASE_PIN && run->pin_kept < 0)
    run->pin_kept = done;
  if (run->live.elapsed_ms > 0)
    run->live.prefill_tok_s = (done - (run->live.phase == TERN_PHASE_PIN ? run->pin_kept : 0))
                              / (run->live.elapsed_ms / 1000.0);
  post_live (run->engine->shared, run->id, &run->live, NULL, FALSE);
  return true;
}

static bool
on_token (const char *piece,
          int32_t     token,
          void       *user)
{
  RunState *run = user;
  gint64 now = g_get_monotonic_time ();
  gboolean drafted = token >= 0 && tn_session_token_drafted (run->engine->session);

  if (is_cancelled (run->engine->shared, run->id))
    return false;
  if (drafted)
    run->live.accepted++;

  run->live.generated_tokens++;
  if (run->st != NULL)
    run->live.kv_len = run->st->restored_tokens + run->live.prefill_total
                       + run->live.generated_tokens;
  run->live.elapsed_ms = (now - run->start_us) / 1000.0;
  if (run->first_token_us == 0)
    {
      run->first_token_us = now;
      run->live.phase = TERN_PHASE_DECODE;
      run->live.ttft_ms = run->live.elapsed_ms;
      run->live.prefill_done = run->live.prefill_total;
    }
  else
    {
      run->live.decode_ms = (now - run->first_token_us) / 1000.0;
      if (run->live.decode_ms > 0)
        run->live.decode_tok_s = (run->live.generated_tokens - 1) / (run->live.decode_ms / 1000.0);
    }
  /* A random or badly converted model can emit bytes that are not UTF-8;
   * GTK and JSON need valid text. */
  if (g_utf8_validate (piece, -1, NULL))
    post_live (run->engine->shared, run->id, &run->live, piece, drafted);
  else
    {
      g_autofree char *valid = g_utf8_make_valid (piece, -1);
      post_live (run->engine->shared, run->id, &run->live, valid, drafted);
    }
  return true;
}

static void
on_engine_warning (const tn_error *warning,
                   void           *user)
{
  Engine *engine = user;
  Event *ev = event_new (engine->shared, SIGNAL_WARNING, 0);

  /* A warning is carried like an error: shown in the user's language. */
  ev->error = tern_engine_error_text (warning);
  event_post (ev);
}

static void
set_running_session (Engine     *engine,
                     tn_session *session)
{
  g_mutex_lock (&engine->shared->lock);
  engine->shared->running_session = session;
  g_mutex_unlock (&engine->shared->lock);
}

char *
tern_engine_error_text (const tn_error *err)
{
  char text[TN_ERROR_MESSAGE_MAX];

  /* libtern keeps the English format and its arguments: the message is
   * rebuilt in the user's language from the format's translation (the engine's
   * formats are in tern.pot, docs/TRANSLATING.md). */
  if (err->format == NULL)
    return g_strdup (err->message);
  return g_strdup (tn_error_format (err, g_dgettext (GETTEXT_PACKAGE, err->format), text,
                                    sizeof text));
}

void
tern_engine_overflow_stats (const tn_error *err,
                            TernStats      *stats)
{
  /* From libtern's record (tern.h, tn_error.overflow), never from the
   * message: its words change and are translated, and a reworded one lost
   * the size. at_least: refused from its length before it was encoded. */
  if (err->code != TN_ERR_OVERFLOW || err->overflow.needed <= 0)
    return;
  stats->overflow_tokens = (int) MIN (err->overflow.needed, (gint64) G_MAXINT);
  stats->overflow_at_least = err->overflow.at_least;
}

gboolean
tern_read_file (const char  *path,
                guint64      max,
                char       **out,
                gsize       *len,
                GError     **error)
{
  tn_error err = { 0 };
  char *data = NULL;
  size_t n = 0;
  int rc = tn_read_file (path, max, &data, &n, &err);

  *out = NULL;
  if (rc != TN_OK)
    {
      g_autofree char *text = tern_engine_error_text (&err);

      g_set_error_literal (error, G_IO_ERROR,
                           rc == TN_ERR_NOT_FOUND ? G_IO_ERROR_NOT_FOUND
                           : rc == TN_ERR_OVERFLOW ? G_IO_ERROR_INVALID_DATA
                           : rc == TN_ERR_NOMEM ? G_IO_ERROR_NO_SPACE
                                                : G_IO_ERROR_FAILED,
                           text);
      return FALSE;
    }
  /* libtern's buffer comes from malloc, which g_free releases (GLib >= 2.46). */
  *out = data;
  if (len != NULL)
    *len = n;
  return TRUE;
}

/* A message of the app's own in place of the engine's (already translated). */
static void
set_error (tn_error   *err,
           int         code,
           const char *message)
{
  err->code = code;
  err->format = NULL;
  g_snprintf (err->message, sizeof err->message, "%s", message);
}

/* A small random-weight model with the synthetic vocabulary: written in well
 * under a second, so "Use demo model" works even without the build's demo. */
static int
make_demo_model (const char *path,
                 tn_error   *err)
{
  g_autofree char *dir = g_path_get_dirname (path);
  tn_mkmodel_params p = tn_mkmodel_default_params ();

  if (g_mkdir_with_parents (dir, 0755) != 0)
    {
      int saved = errno;
      g_autofree char *message = g_strdup_printf ("%s: %s", dir, g_strerror (saved));

      set_error (err, TN_ERR_IO, message);
      return TN_ERR_IO;
    }
  p.arch = "qwen3";
  p.type = "q8_0";
  p.n_embd = 256;
  p.n_layer = 4;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim = 64;
  p.n_ff = 768;
  p.n_ctx = 4096;
  p.tokenizer = NULL;
  p.seed = 42;
  p.n_threads = 1;
  return tn_mkmodel (&p, path, err);
}

#ifdef TERN_HAVE_SERVER
static gpointer
server_thread (gpointer data)
{
  /* Its own main context, pushed by tern_server_run for its whole life. */
  tern_server_run (data);
  return NULL;
}
#endif

/* Stops the server (if any) and waits for its thread; it serves model, so
 * this comes before any change of model. */
static void
stop_server (Engine  *engine,
             gboolean announce)
{
#ifdef TERN_HAVE_SERVER
  if (engine->server == NULL)
    return;
  tern_server_quit (engine->server);
  g_thread_join (g_steal_pointer (&engine->server_thread));
  g_clear_pointer (&engine->server, tern_server_free);
  if (announce)
    event_post (event_new (engine->shared, SIGNAL_SERVER_STATE, 0));
#else
  (void) engine;
  (void) announce;
#endif
}

static void
handle_serve (Engine  *engine,
              Request *req)
{
  Event *ev = event_new (engine->shared, SIGNAL_SERVER_STATE, req->id);

  stop_server (engine, FALSE);
#ifdef TERN_HAVE_SERVER
  if (engine->model == NULL)
    ev->error = g_strdup (_("Load a model first: the server serves the loaded model"));
  else
    {
      tern_server_config cfg = { 0 };
      g_autoptr(GError) error = NULL;

      cfg.host = "127.0.0.1"; /* loopback only: the app offers no other */
      cfg.port = req->port;
      cfg.api_key = req->api_key != NULL && *req->api_key ? req->api_key : NULL;
      cfg.n_ctx = engine->n_ctx;
      cfg.model_id = engine->model_id;
      cfg.n_threads = req->n_threads;
      /* Shared with the app's own image requests: encoding only reads it.
       * A new model stops the server before its projector goes. */
      cfg.vision = engine->vision;
      /* Each kept pin is a whole KV cache beside the app's own session. */
      cfg.pins_max = 2;
      engine->server = tern_server_new (engine->model, &cfg, &error);
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE))
        /* The socket's own words ("cannot listen on 127.0.0.1 port 8080:
         * Error binding to address 127.0.0.1:8080: Address already in
         * use") were cut before their point in the toast. */
        ev->error = g_strdup_printf (_("Port %d is in use by another program. Choose another port, "
                                       "or 0 for a free one."), req->port);
      else if (engine->server == NULL)
        ev->error = g_strdup (error != NULL ? error->message : _("The server could not start"));
      else
        {
          engine->server_thread = g_thread_new ("tern-server", server_thread, engine->server);
          ev->flag = TRUE;
          ev->path = g_strdup (tern_server_url (engine->server));
        }
    }
#else
  (void) req;
  ev->error = g_strdup (_("This build of Tern has no server"));
#endif
  event_post (ev);
}

/* The one projector beside the model (tn_vision_projectors_beside, the
 * rule tern-cli run follows); NULL when there is none, more than one, or the
 * directory cannot be read: the model then runs text only. */
static char *
find_projector (const char *model_path)
{
  char *first = NULL, *second = NULL;
  int found = tn_vision_projectors_beside (model_path, &first, &second, NULL);
  char *projector = found == 1 ? g_strdup (first) : NULL;

  free (first);
  free (second);
  return projector;
}

/* At most this many encodings are kept, and at most this many bytes of
 * rows (a 1120-token Gemma 4 picture is about 11 MiB at 2,560 wide). */
#define ENCODINGS_MAX 16
#define ENCODINGS_MAX_BYTES ((gsize) 256 << 20)

static guint encodings_made; /* for tests: tern_engine_worker_n_encoded */

guint
tern_engine_worker_n_encoded (void)
{
  return g_atomic_int_get (&encodings_made);
}

/* Puts v in place of the projector (NULL: none), freeing the old one once
 * the main thread can no longer be asking it. */
static void
set_vision (Engine    *engine,
            tn_vision *v)
{
  g_mutex_lock (&engine->shared->lock);
  engine->shared->vision = v;
  g_mutex_unlock (&engine->shared->lock);
  tn_vision_free (engine->vision);
  engine->vision = v;
#ifdef TERN_HAVE_IMAGEIO
  /* They were the old projector's; none is kept once there is none. */
  if (v == NULL)
    g_clear_pointer (&engine->encodings, tern_embed_cache_free);
  else if (engine->encodings != NULL)
    tern_embed_cache_clear (engine->encodings);
#endif
}

static bool quitting (void *user);

/* Loads the projector for the model just loaded and tells the UI what an
 * image costs (or that images are refused). */
static void
load_vision (Engine     *engine,
             guint       id,
             const char *model_path)
{
  Event *ev = event_new (engine->shared, SIGNAL_VISION, id);
  g_autofree char *projector = find_projector (model_path);
  tn_error err = { 0 };
  tn_vision *v = NULL;

  set_vision (engine, NULL);
  ev->n = -1;
#ifdef TERN_HAVE_IMAGEIO
  /* A projector that is there but cannot be used says why: the attach
   * button said there was none beside the model, which the user could see
   * was wrong. */
  if (projector != NULL)
    {
      /* As the drafters' loads: the window closing stops it. */
      tn_vision_params vp = tn_vision_default_params ();

      vp.cancelled = quitting;
      vp.cancelled_user = engine->shared;
      if (tn_vision_load_with (projector, vp, &v, &err) != TN_OK)
        {
          g_autofree char *text = tern_engine_error_text (&err);
          g_autofree char *prefix = g_strconcat (projector, ": ", NULL);

          /* The tooltip names the file already. */
          ev->error = g_strdup (g_str_has_prefix (text, prefix) ? text + strlen (prefix) : text);
        }
      else if (tn_vision_get_info (v)->n_embd_text != tn_model_n_embd (engine->model))
        /* Translators: the widths of a projector's output and of the model's embeddings */
        ev->error = g_strdup_printf (_("it was made for another model (its rows are %d wide, this model’s %d)"),
                                     (int) tn_vision_get_info (v)->n_embd_text,
                                     (int) tn_model_n_embd (engine->model));
      else if (!tn_model_takes_images (engine->model))
        ev->error = g_strdup (_("this model’s vocabulary has no image tokens"));
      ev->path = g_strdup (projector);
    }
  if (ev->path != NULL && ev->error == NULL)
    {
      set_vision (engine, v);
      ev->n = tn_vision_tokens (v, 0);
      ev->pin.n_pin = tn_session_image_cost (engine->session, 1) - 1;
    }
  else
    tn_vision_free (v);
#else
  (void) projector;
  (void) err;
  (void) v;
#endif
  event_post (ev);
}

/* ------------------------------------------------------------ remote mode */

static gboolean
is_remote (Engine *engine)
{
#ifdef TERN_HAVE_MANAGER
  return engine->remote != NULL;
#else
  (void) engine;
  return FALSE;
#endif
}

static void
end_remote (Engine *engine)
{
#ifdef TERN_HAVE_MANAGER
  g_clear_pointer (&engine->remote, tern_remote_free);
  g_clear_pointer (&engine->remote_model, g_free);
  g_clear_pointer (&engine->remote_pin, g_free);
#else
  (void) engine;
#endif
}

#ifdef TERN_HAVE_MANAGER
static void
set_running_remote (Engine       *engine,
                    GCancellable *cancellable)
{
  g_mutex_lock (&engine->shared->lock);
  g_set_object (&engine->shared->running_remote, cancellable);
  g_mutex_unlock (&engine->shared->lock);
}

/* Switches to the server: its model list must name the model, so that a
 * wrong address, key or model shows now rather than at the first answer. */
static void
handle_remote (Engine  *engine,
               Request *req)
{
  Event *ev = event_new (engine->shared, SIGNAL_MODEL_LOADED, req->id);
  g_autoptr(GError) error = NULL;
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_auto(GStrv) models = NULL;
  TernRemote *remote;
  /* The address comes with the password the keyring keeps for it
   * (tern_connections_get_url); the model's reference goes to the window,
   * its title and settings, without. */
  g_autofree char *shown = tern_remote_url_shown (req->text);

  ev->path = tern_remote_ref_new (shown, req->model);
  remote = tern_remote_new (req->text, req->api_key, &error);
  if (remote != NULL && !is_cancelled (engine->shared, req->id))
    {
      set_running_remote (engine, cancellable);
      models = tern_remote_list_models (remote, cancellable, &error);
      set_running_remote (engine, NULL);
    }
  if (models != NULL && !g_strv_contains ((const char * const *) models, req->model))
    g_set_error (&error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_MODEL,
                 _("%s has no model '%s': pick one of the models it lists"),
                 tern_remote_shown_url (remote), req->model);
  if (models == NULL && error == NULL)
    g_set_error_literal (&error, G_IO_ERROR, G_IO_ERROR_CANCELLED, _("Loading was cancelled"));
  if (error != NULL)
    {
      tern_remote_free (remote);
      ev->error = g_strdup (error->message);
      ev->english = g_strdup (error->message);
      event_post (ev);
      return;
    }
  end_remote (engine);
  engine->remote = remote;
  engine->remote_model = g_strdup (req->model);
  /* Translators: "MODEL on http://host:8000/v1 (remote)" */
  ev->description = g_strdup_printf (_("%s on %s (remote)"), req->model, tern_remote_shown_url (remote));
  event_post (ev);
  /* Images go to the server's own projector, not through this client yet. */
  ev = event_new (engine->shared, SIGNAL_VISION, req->id);
  ev->n = -1;
  event_post (ev);
}

static void
handle_remote_pin (Engine  *engine,
                   Request *req)
{
  Event *ev = event_new (engine->shared, SIGNAL_PINNED, req->id);

  /* Nothing to compute here: the server caches the prefix when the first
   * request arrives, and its usage says how much it reused. */
  g_free (engine->remote_pin);
  engine->remote_pin = g_strdup (req->text);
  ev->flag = is_cancelled (engine->shared, req->id);
  event_post (ev);
}

typedef struct {
  RunState *run;
  gboolean  in_think;
} RemoteRun;

static gboolean
on_remote_piece (TernRemotePiece kind,
                 const char     *text,
                 gsize           len,
                 gpointer        user)
{
  RemoteRun *rr = user;
  g_autoptr(GString) piece = g_string_new (NULL);

  /* The thinking arrives apart (reasoning_content); the chat shows it in
   * the <think> block the local engine streams. */
  if (kind == TERN_REMOTE_PIECE_REASONING && !rr->in_think)
    g_string_append (piece, "<think>");
  else if (kind == TERN_REMOTE_PIECE_CONTENT && rr->in_think)
    g_string_append (piece, "</think>");
  g_string_append_len (piece, text, (gssize) len);
  rr->in_think = kind == TERN_REMOTE_PIECE_REASONING;
  return on_token (piece->str, -1, rr->run);
}

/* A message for a remote server: the image markers of its text (where a
 * local model reads an image) come out, and as many of the request's images
 * as it had markers go with it as image parts, in order. A question with
 * images but no markers (flash mode) takes them all. */
static void
append_remote_message (GArray                *msgs,
                       GPtrArray             *texts,
                       const char            *role,
                       const char            *content,
                       const TernRemoteImage *images,
                       guint                  n_images,
                       guint                 *next_image,
                       gboolean               take_all)
{
  g_auto(GStrv) pieces = g_strsplit (content != NULL ? content : "", TN_IMAGE_MARKER, -1);
  guint markers = g_strv_length (pieces) - 1;
  char *text = g_strjoinv ("", pieces);
  TernRemoteMessage m = { role, text, NULL, 0 };

  if (take_all && markers == 0)
    markers = n_images - *next_image;
  markers = MIN (markers, n_images - *next_image);
  if (markers > 0)
    {
      m.images = images + *next_image;
      m.n_images = markers;
      *next_image += markers;
    }
  g_ptr_array_add (texts, text);
  g_array_append_val (msgs, m);
}

static void
handle_remote_generate (Engine  *engine,
                        Request *req)
{
  Event *ev = event_new (engine->shared, SIGNAL_FINISHED, req->id);
  RunState run = { .engine = engine, .id = req->id, .start_us = g_get_monotonic_time () };
  RemoteRun rr = { .run = &run };
  g_autoptr(GArray) msgs = g_array_new (FALSE, FALSE, sizeof (TernRemoteMessage));
  g_autoptr(GPtrArray) texts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GError) error = NULL;
  guint n_images = req->images != NULL ? req->images->len : 0, next_image = 0;
  g_autofree TernRemoteImage *images = g_new0 (TernRemoteImage, n_images ? n_images : 1);
  TernRemoteParams p;
  TernRemoteStats st;
  gboolean ok;

  if (is_cancelled (engine->shared, req->id))
    {
      ev->flag = TRUE;
      event_post (ev);
      return;
    }
  if (engine->remote_pin != NULL && *engine->remote_pin != '\0')
    {
      TernRemoteMessage m = { "system", engine->remote_pin, NULL, 0 };
      g_array_append_val (msgs, m);
    }
  for (guint i = 0; i < n_images; i++)
    {
      /* Attachments were checked by their magic bytes when attached. */
      GBytes *bytes = g_ptr_array_index (req->images, i);
      const char *format = tern_image_sniff (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
      g_autofree char *mime = g_strconcat ("image/", format != NULL ? format : "png", NULL);

      images[i].bytes = bytes;
      images[i].mime = g_intern_string (mime);
    }
  if (req->kind == REQ_ASK)
    append_remote_message (msgs, texts, "user", req->text, images, n_images, &next_image, TRUE);
  else
    for (guint i = 0; req->roles[i] != NULL; i++)
      append_remote_message (msgs, texts, req->roles[i], req->contents[i], images, n_images,
                             &next_image, FALSE);
  tern_remote_params_init (&p);
  /* A server's model suggests through the server; here only Deterministic
   * and Preferences' values. */
  p.temperature = req->gen.deterministic ? 0 : req->gen.temperature;
  p.top_p = req->gen.deterministic ? 1 : req->gen.top_p;
  p.max_tokens = req->gen.max_tokens;
  p.seed_set = req->gen.seed != 0;
  p.seed = req->gen.seed;
  /* Only "off" is sent: on is every server's default, and a server that
   * knows neither switch (OpenAI itself) may refuse unknown fields. */
  p.thinking = req->gen.thinking ? -1 : 0;

  run.live.phase = TERN_PHASE_PREFILL;
  post_live (engine->shared, req->id, &run.live, NULL, FALSE);
  set_running_remote (engine, cancellable);
  if (is_cancelled (engine->shared, req->id))
    g_cancellable_cancel (cancellable);
  ok = tern_remote_chat (engine->remote, engine->remote_model, (const TernRemoteMessage *) msgs->data,
                         msgs->len, &p, on_remote_piece, &rr, &st, cancellable, &error);
  set_running_remote (engine, NULL);
  if (rr.in_think)
    on_token ("</think>", -1, &run);

  /* The server's figures where it gave them; the live ones otherwise. */
  ev->stats = run.live;
  ev->stats.phase = TERN_PHASE_IDLE;
  if (st.prompt_tokens >= 0)
    {
      ev->stats.restored_tokens = (int) MAX (st.cached_tokens, 0);
      ev->stats.prompt_tokens = (int) (st.prompt_tokens - ev->stats.restored_tokens);
    }
  ev->stats.prefill_done = ev->stats.prefill_total = ev->stats.prompt_tokens;
  ev->stats.generated_tokens = (int) st.completion_tokens;
  if (st.prefill_tok_s > 0)
    ev->stats.prefill_tok_s = st.prefill_tok_s;
  if (st.decode_tok_s > 0)
    ev->stats.decode_tok_s = st.decode_tok_s;
  ev->stats.ttft_ms = st.ttft_ms;
  ev->stats.prefill_ms = st.ttft_ms;
  ev->stats.elapsed_ms = ms_since (run.start_us);
  ev->stats.stop_reason = g_str_equal (st.finish_reason, "length") ? "limit"
                          : g_str_equal (st.finish_reason, "stop") ? "eog" : "none";
  if (!ok && (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
              || is_cancelled (engine->shared, req->id)))
    ev->flag = TRUE;
  else if (!ok)
    {
      ev->error = g_strdup (error->message);
      ev->stats.error_code = TN_ERR_IO;
    }
  else if (g_str_equal (st.finish_reason, "cancelled"))
    ev->flag = TRUE;
  event_post (ev);
}
#endif

/* The header's line for a model, in the user's language: the engine's
 * tn_model_description is English for the CLI and the logs ("(qwen3,
 * 499.7K params, Q8_0) - demo model, random weights"). */
static char *
describe_model (const tn_model *model)
{
  const double n = (double) tn_model_n_params (model);
  g_autofree char *params = NULL;
  g_autofree char *shown = NULL;
  /* A file without general.name is named by its file name, in its own
   * bytes, which the header's label shows as UTF-8. */
  g_autofree char *name = g_utf8_make_valid (tn_model_name (model), -1);

  if (n >= 1e9)
    /* Translators: a model's size: billions of parameters ("1.00B") */
    params = g_strdup_printf (_("%.2fB parameters"), n / 1e9);
  else if (n >= 1e6)
    /* Translators: a model's size: millions of parameters ("270.4M") */
    params = g_strdup_printf (_("%.1fM parameters"), n / 1e6);
  else
    /* Translators: a model's size: thousands of parameters ("499.7K") */
    params = g_strdup_printf (_("%.1fK parameters"), n / 1e3);
  shown = tern_app_localize_decimals (params);
  return tn_model_is_demo (model)
    /* Translators: the header's line for a model with random weights (a
     * demo): its name, its architecture ("qwen3"), its size ("499.7K
     * parameters") and its weights' type ("Q8_0") */
    ? g_strdup_printf (_("%s (%s, %s, %s) - demo model, random weights"), name,
                       tn_arch_name (tn_model_arch (model)), shown, tn_model_quant_name (model))
    /* Translators: the header's line for a model: its name, its
     * architecture ("qwen3"), its size ("1.00B parameters") and its
     * weights' type ("Q4_K_M") */
    : g_strdup_printf (_("%s (%s, %s, %s)"), name,
                       tn_arch_name (tn_model_arch (model)), shown, tn_model_quant_name (model));
}

/* The model's suggested sampling: its file's general.sampling.* keys, else
 * the catalog entry of the store's file it is (tern-sampling.h). */
static void
suggest_sampling (TernSampling *out,
                  tn_model     *model,
                  const char   *path)
{
  if (tern_sampling_from_gguf (tn_model_gguf (model), out))
    return;
#ifdef TERN_HAVE_MANAGER
  {
    g_autofree char *catalog_path = tern_catalog_default_path ();
    g_autoptr(TernCatalog) catalog = tern_catalog_new_from_file (catalog_path, NULL);
    const TernCatalogTag *tag = catalog ? tern_catalog_find_tag_for_file (catalog, path) : NULL;

    if (tag != NULL)
      {
        tern_sampling_set (out, "temperature", tag->sampling.temperature);
        tern_sampling_set (out, "top_p", tag->sampling.top_p);
        tern_sampling_set (out, "top_k", (double) tag->sampling.top_k);
        tern_sampling_set (out, "min_p", tag->sampling.min_p);
      }
  }
#else
  (void) path;
#endif
}

/* A load's question (tn_model_params.cancelled): the loading page's
 * Cancel, or the window closing, stops a long load within a fraction of a
 * second instead of after it (a 4 GB model: 3-4 s from a fast disk, far
 * more from a slow one). */
typedef struct
{
  Shared *shared;
  guint   id;
} LoadCancel;

static bool
load_cancelled (void *user)
{
  const LoadCancel *lc = user;

  return is_cancelled (lc->shared, lc->id);
}

/* The loading page's bar (tn_model_params.progress). */
static void
load_progress (float  fraction,
               void  *user)
{
  const LoadCancel *lc = user;
  Event *ev = event_new (lc->shared, SIGNAL_LOAD_PROGRESS, lc->id);

  ev->fraction = fraction;
  event_post (ev);
}

static bool
quitting (void *user)
{
  return g_atomic_int_get (&((Shared *) user)->quitting) != 0;
}

static void
handle_load (Engine  *engine,
             Request *req)
{
  Event *ev = event_new (engine->shared, SIGNAL_MODEL_LOADED, req->id);
  tn_error err = { 0 };
  tn_model *model = NULL;
  tn_session *session = NULL;
  tn_drafter *lookup = NULL;
  tn_session_params sp = tn_session_default_params ();
  tn_model_params mp;
  LoadCancel lc = { engine->shared, req->id };

  ev->path = g_strdup (req->text);

  /* Cancelled (the loading page's Cancel): the model in use stays. */
  if (is_cancelled (engine->shared, req->id))
    goto cancelled;
  if (req->kind == REQ_LOAD_DEMO && !g_file_test (req->text, G_FILE_TEST_EXISTS)
      && make_demo_model (req->text, &err) != TN_OK)
    goto fail;

  mp = tn_model_default_params ();
  mp.cancelled = load_cancelled;
  mp.cancelled_user = &lc;
  mp.progress = load_progress;
  mp.progress_user = &lc;
  if (tn_model_load (req->text, mp, &model, &err) != TN_OK)
    {
      if (err.code == TN_ERR_CANCELLED)
        goto cancelled;
      goto fail;
    }

  /* No size chosen: what the model was trained for, within memory. */
  sp.n_ctx = req->n_ctx > 0 ? req->n_ctx
                            : tern_context_auto (tn_model_n_ctx_train (model),
                                                 tn_model_kv_bytes_per_token (model),
                                                 tern_context_physical_memory ());
  sp.n_threads = req->n_threads;
  sp.warn = on_engine_warning;
  sp.warn_user = engine;
  if (tn_session_new (model, sp, &session, &err) != TN_OK)
    goto fail;
  if (tn_drafter_new_lookup (tn_drafter_default_params (), &lookup, &err) != TN_OK)
    goto fail;
  if (is_cancelled (engine->shared, req->id))
    goto cancelled;

  /* The new model is in place before the old one goes; what uses the old
   * one goes first: the server, the drafters, the projector. */
  stop_server (engine, TRUE);
  set_vision (engine, NULL);
  tn_drafter_free (engine->chosen);
  engine->chosen = NULL;
  tn_drafter_free (engine->lookup);
  tn_session_free (engine->session);
  tn_model_free (engine->model);
  engine->model = model;
  engine->session = session;
  g_clear_pointer (&engine->pin_error, g_free);
  engine->lookup = lookup;
  engine->n_ctx = sp.n_ctx;
  g_free (engine->model_id);
  engine->model_id = g_path_get_basename (req->text);
  if (g_str_has_suffix (engine->model_id, ".gguf"))
    engine->model_id[strlen (engine->model_id) - 5] = '\0';
  suggest_sampling (&engine->suggested, model, req->text);
  ev->sampling = engine->suggested;

  ev->description = describe_model (model);
  ev->flag = tn_model_is_demo (model);
  end_remote (engine);
  event_post (ev);
  load_vision (engine, req->id, req->text);
  return;

cancelled:
  set_error (&err, TN_ERR_CANCELLED, _("Loading was cancelled"));
fail:
  tn_drafter_free (lookup);
  tn_session_free (session);
  tn_model_free (model);
  ev->error = err.message[0] ? tern_engine_error_text (&err) : g_strdup (_("The model could not be loaded"));
  ev->english = g_strdup (err.message[0] ? err.message : "The model could not be loaded");
  event_post (ev);
}

static void
handle_drafter (Engine  *engine,
                Request *req)
{
  Event *ev = event_new (engine->shared, SIGNAL_DRAFTER_READY, req->id);
  tn_drafter_params dp = tn_drafter_default_params ();
  tn_drafter *d = NULL;
  tn_error err = { 0 };
  int rc = TN_OK;

  ev->n = req->drafter;
  tn_drafter_free (engine->chosen);
  engine->chosen = NULL;
  dp.n_threads = req->n_threads;
  dp.cancelled = quitting;
  dp.cancelled_user = engine->shared;
  /* Remote: speculation is the server's (docs/REMOTE.md). */
  if (req->drafter == TERN_DRAFTER_PROMPT_LOOKUP || is_remote (engine))
    ;
  else if (engine->model == NULL)
    ev->error = g_strdup (_("No model is loaded"));
  else if (req->text == NULL || *req->text == '\0')
    ev->error = g_strdup (req->drafter == TERN_DRAFTER_DFLASH
                            ? _("No DFlash draft file is chosen: choose one in Preferences")
                          : req->drafter == TERN_DRAFTER_MTP
                            ? _("No MTP assistant file is chosen: choose one in Preferences")
                            : _("No draft model file is chosen: choose one in Preferences"));
  else
    {
      if (req->drafter == TERN_DRAFTER_DFLASH)
        rc = tn_drafter_new_dflash (engine->model, req->text, dp, &d, &err);
      else if (req->drafter == TERN_DRAFTER_MTP)
        rc = tn_drafter_new_mtp (engine->model, req->text, dp, &d, &err);
      else
        rc = tn_drafter_new_model (engine->model, req->text, dp, &d, &err);
      if (rc != TN_OK)
        ev->error = err.message[0] ? tern_engine_error_text (&err)
                                   : g_strdup (_("The draft file could not be loaded"));
      else
        {
          engine->chosen = d;
          engine->chosen_kind = req->drafter;
        }
    }
  event_post (ev);
}

static void
handle_count (Engine  *engine,
              Request *req)
{
  Event *ev;
  tn_error err = { 0 };
  int32_t n = -1;

  if ((gint) req->id != g_atomic_int_get (&engine->shared->latest_count))
    return; /* a newer count is queued */

  ev = event_new (engine->shared, SIGNAL_TOKEN_COUNT, req->id);
  /* Remote: the server's tokenizer is not here. */
  if (engine->session == NULL || is_remote (engine)
      || tn_session_count_system_tokens (engine->session, req->text, &n, &err) != TN_OK)
    n = -1;
  ev->n = n;
  event_post (ev);
}

static void
fill_pin_state (TernPinState *state,
                tn_session   *session)
{
  tn_pin_info info = tn_session_pin_info (session);

  state->n_pin = info.n_pin;
  state->n_ctx = info.n_ctx;
  state->n_free = info.n_free;
  state->kv_bytes = tn_model_kv_bytes_per_token (tn_session_model (session)) * (guint64) info.n_ctx;
  state->prefill_ms = info.prefill_ms;
  state->loaded_from_snapshot = info.loaded_from_snapshot;
}

static void
handle_pin (Engine  *engine,
            Request *req)
{
  Event *ev = event_new (engine->shared, SIGNAL_PINNED, req->id);
  RunState run = { .engine = engine, .id = req->id, .start_us = g_get_monotonic_time (),
                   .pin_kept = -1 };
  tn_error err = { 0 };

  run.live.phase = TERN_PHASE_PIN;
  if (engine->session == NULL)
    ev->error = g_strdup (_("No model is loaded"));
  else if (is_cancelled (engine->shared, req->id))
    ev->flag = TRUE;
  else
    {
      int rc;

      set_running_session (engine, engine->session);
      rc = tn_session_pin (engine->session, req->text, on_progress, &run, &err);
      set_running_session (engine, NULL);
      if (rc == TN_ERR_CANCELLED)
        ev->flag = TRUE;
      else if (rc != TN_OK)
        ev->error = tern_engine_error_text (&err);
      /* A cancelled pin leaves the session as it was, and so its record. */
      if (rc != TN_ERR_CANCELLED)
        {
          g_free (engine->pin_error);
          engine->pin_error = g_strdup (ev->error);
        }
    }
  if (engine->session != NULL)
    fill_pin_state (&ev->pin, engine->session);
  event_post (ev);
}

static void
copy_stats (TernStats                *out,
            const tn_session_stats   *st)
{
  out->phase = TERN_PHASE_IDLE;
  out->prompt_tokens = st->prompt_tokens;
  out->prefill_done = st->prompt_tokens;
  out->prefill_total = st->prompt_tokens;
  out->prefill_ms = st->prefill_ms;
  out->prefill_tok_s = st->prefill_tok_s;
  out->generated_tokens = st->generated_tokens;
  out->decode_ms = st->decode_ms;
  out->decode_tok_s = st->decode_tok_s;
  out->ttft_ms = st->ttft_ms;
  out->restored_tokens = st->restored_tokens;
  out->restore_ms = st->restore_ms;
  out->drafted = st->drafted;
  out->accepted = st->accepted;
  out->verify_steps = st->verify_steps;
  out->kv_len = st->kv_len;
  out->stop_reason = tn_stop_reason_name (st->stop_reason);
}

/* Gemma 4 takes five budgets: the preference (any number, for Gemma 3's
 * square grids) becomes the largest of them within it, at least 70. */
static int
snap_budget (const tn_vision *v,
             int              budget)
{
  const int *list = NULL;
  int n_list = v != NULL ? tn_vision_budgets (v, &list) : 0;
  int pick;

  if (n_list == 0 || budget <= 0)
    return budget;
  pick = list[0];
  for (int k = 0; k < n_list; k++)
    if (list[k] <= budget)
      pick = list[k];
  return pick;
}

/* Decodes and encodes the request's images for the projector (on this
 * thread: it owns the engine). */
static int
encode_images (Engine        *engine,
               Request       *req,
               tn_image_embd *out,
               tn_error      *err)
{
#ifdef TERN_HAVE_IMAGEIO
  int budget = req->gen.image_tokens;
  int n_embd;
  int rc = TN_OK;

  if (engine->vision == NULL)
    {
      guint n = req->contents != NULL ? g_strv_length (req->contents) : 0;

      /* A chat's pictures all in earlier messages (sent under a model
       * that read them): the plain refusal read as if this message had
       * one, and said nothing of how to go on. */
      if (n > 0 && strstr (req->contents[n - 1], TN_IMAGE_MARKER) == NULL)
        set_error (err, TN_ERR_INVALID,
                   _("Earlier messages of this chat have images, and this model cannot read them (it has no vision projector, a *mmproj*.gguf file beside it): start a new chat, switch to Flash (it sends only the last message), or load a model that reads images"));
      else
        set_error (err, TN_ERR_INVALID,
                   _("This model has no vision projector (*mmproj*.gguf beside it): it cannot read images"));
      return TN_ERR_INVALID;
    }
  budget = snap_budget (engine->vision, budget);
  n_embd = tn_vision_get_info (engine->vision)->n_embd_text;
  for (guint i = 0; i < req->images->len && rc == TN_OK; i++)
    {
      GBytes *bytes = g_ptr_array_index (req->images, i);
      g_autoptr(GError) error = NULL;
      g_autofree char *name = g_strdup_printf (_("image %u"), i + 1);
      /* The composer decoded it when it was attached (with the fitting
       * asked of tern_engine_worker_image_fit_side), and so did an earlier
       * turn for the images of the conversation. */
      g_autoptr(TernCachedImage) cached =
        tern_image_cache_load (bytes, name, tn_vision_input_side (engine->vision, budget),
                               &error);
      const TernImage *img = cached != NULL ? tern_cached_image_get (cached) : NULL;
      const char *sha256;
      float *rows = NULL;

      if (img == NULL)
        {
          rc = TN_ERR_INVALID;
          set_error (err, rc, error->message);
          break;
        }
      out[i].n_embd = n_embd;
      sha256 = tern_cached_image_get_sha256 (cached);
      if (engine->encodings == NULL)
        engine->encodings = tern_embed_cache_new (ENCODINGS_MAX, ENCODINGS_MAX_BYTES);
      rows = tern_embed_cache_get (engine->encodings, sha256, budget, &out[i].n_tokens);
      if (rows != NULL)
        {
          out[i].embd = rows;
          continue;
        }
      /* Gemma 4's count follows the image's size: tn_vision_encode_new counts. */
      rc = tn_vision_encode_new (engine->vision, img->rgb, img->width, img->height, budget,
                                 req->n_threads, &rows, &out[i].n_tokens, err);
      out[i].embd = rows;
      if (rc == TN_OK)
        {
          g_atomic_int_inc (&encodings_made);
          tern_embed_cache_put (engine->encodings, sha256, budget, rows, out[i].n_tokens, n_embd);
        }
    }
  return rc;
#else
  (void) engine;
  (void) req;
  (void) out;
  set_error (err, TN_ERR_INVALID, _("This build of Tern cannot read images (no gdk-pixbuf)"));
  return TN_ERR_INVALID;
#endif
}

static guint
count_markers (const char *text)
{
  guint n = 0;

  for (const char *p = text; p != NULL && (p = strstr (p, TN_IMAGE_MARKER)) != NULL;
       p += strlen (TN_IMAGE_MARKER))
    n++;
  return n;
}

/* The first message of a conversation that leaves room for the answer once
 * the oldest turns are dropped (tern_context_first_kept), from the tokens
 * of each message's text plus its framing; images count their rows. */
static guint
first_turn_that_fits (Engine  *engine,
                      Request *req)
{
  const tn_tokenizer *tok = tn_model_tokenizer (engine->model);
  guint n = g_strv_length (req->roles);
  g_autofree int *counts = g_new0 (int, n ? n : 1);
  tn_pin_info pin = tn_session_pin_info (engine->session);
  int image_rows = 0;
  int reserve;

  if (tok == NULL || n == 0)
    return 0;
  if (req->images != NULL && req->images->len > 0 && engine->vision != NULL)
    image_rows = tn_session_image_cost (engine->session,
                                        tn_vision_tokens (engine->vision,
                                                          snap_budget (engine->vision,
                                                                       req->gen.image_tokens)));
  /* Room for a whole answer, but never more than half the context: a long
   * answer limit must not push every earlier turn out. */
  reserve = req->gen.max_tokens > 0 ? MIN (req->gen.max_tokens, engine->n_ctx / 2)
                                    : engine->n_ctx / 4;
  {
    /* A token is at least a byte: a conversation whose bytes fit needs no
     * tokenizing (the common case, at no cost to the time to first token). */
    guint64 bound = (guint64) pin.n_pin + TERN_CONTEXT_MESSAGE_FRAMING + (guint64) reserve;

    for (guint i = 0; i < n; i++)
      bound += strlen (req->contents[i]) + TERN_CONTEXT_MESSAGE_FRAMING
               + (guint64) count_markers (req->contents[i]) * (guint64) image_rows;
    if (bound <= (guint64) engine->n_ctx)
      return 0;
  }
  for (guint i = 0; i < n; i++)
    {
      tn_tokens t = { 0 };
      tn_error err = { 0 };

      if (tn_tokenize (tok, req->contents[i], strlen (req->contents[i]), 0, &t, &err) == TN_OK)
        counts[i] = (int) MIN (t.n, (size_t) G_MAXINT / 2);
      tn_tokens_free (&t);
      counts[i] += TERN_CONTEXT_MESSAGE_FRAMING + (int) count_markers (req->contents[i]) * image_rows;
    }
  return tern_context_first_kept (counts, (const char * const *) req->roles, n,
                                  pin.n_pin + TERN_CONTEXT_MESSAGE_FRAMING, engine->n_ctx,
                                  reserve);
}

static void
handle_generate (Engine  *engine,
                 Request *req)
{
  Event *ev = event_new (engine->shared, SIGNAL_FINISHED, req->id);
  RunState run = { .engine = engine, .id = req->id, .start_us = g_get_monotonic_time () };
  tn_gen_params gen = tn_gen_default_params ();
  tn_session_stats st = { 0 };
  tn_error err = { 0 };
  tn_image_embd *images = NULL;
  guint n_images;
  int rc;

  if (engine->session == NULL)
    {
      ev->error = g_strdup (_("No model is loaded"));
      event_post (ev);
      return;
    }
  if (is_cancelled (engine->shared, req->id))
    {
      ev->flag = TRUE;
      event_post (ev);
      return;
    }
  if (engine->pin_error != NULL)
    {
      /* Translators: %s is the engine's message */
      ev->error = g_strdup_printf (_("The system prompt could not be pinned: %s"), engine->pin_error);
      event_post (ev);
      return;
    }

  {
    TernSampling s;

    tern_sampling_resolve (req->gen.deterministic, req->gen.model_sampling, &engine->suggested,
                           req->gen.temperature, req->gen.top_p, &s);
    gen.sampler.temperature = (float) s.temperature;
    gen.sampler.top_p = (float) s.top_p;
    gen.sampler.top_k = s.top_k;
    gen.sampler.min_p = (float) s.min_p;
  }
  /* Seed 0: a new one per answer, so Regenerate gives new text. */
  gen.sampler.seed = req->gen.seed ? req->gen.seed
                                   : (guint64) g_random_int () << 32 | g_random_int ();
  gen.max_tokens = req->gen.max_tokens;
  gen.thinking = req->gen.thinking;
  if (req->gen.speculate)
    {
      gen.drafter = engine->chosen != NULL && engine->chosen_kind == req->gen.drafter
                      ? engine->chosen : engine->lookup;
      gen.draft_max = req->gen.draft_max;
    }
  gen.progress = on_progress;
  gen.progress_user = &run;
  run.st = &st;

  run.live.phase = TERN_PHASE_PREFILL;
  post_live (engine->shared, req->id, &run.live, NULL, FALSE);

  n_images = req->images != NULL ? req->images->len : 0;
  images = g_new0 (tn_image_embd, n_images ? n_images : 1);
  if (n_images > 0 && encode_images (engine, req, images, &err) != TN_OK)
    {
      rc = err.code ? err.code : TN_ERR_INVALID;
      goto done;
    }

  set_running_session (engine, engine->session);
  /* Images set only when the request has some: without them a marker the
   * user typed is text. */
  if (req->kind == REQ_ASK)
    {
      const tn_prompt prompt = { .kind = TN_PROMPT_TEXT,
                                 .text = req->text,
                                 .images = n_images > 0 ? images : NULL,
                                 .n_images = (int32_t) n_images };

      rc = tn_session_run (engine->session, &prompt, &gen, on_token, &run, &st, &err);
    }
  else
    {
      guint n = g_strv_length (req->roles);
      g_autofree tn_session_message *msgs = g_new0 (tn_session_message, n ? n : 1);
      guint first = first_turn_that_fits (engine, req), skip = 0;

      for (guint i = 0; i < n; i++)
        {
          msgs[i].role = req->roles[i];
          msgs[i].content = req->contents[i];
        }
      /* The estimate may fall short: while the engine finds the
       * conversation too long, the oldest turn goes too. */
      for (;;)
        {
          guint next = first + 1;

          skip = 0;
          for (guint i = 0; i < first; i++)
            skip += count_markers (req->contents[i]);
          skip = MIN (skip, n_images);
          memset (&st, 0, sizeof st);
          {
            /* Images set even when the dropped turns took them all: the
             * markers left must still match the images left. */
            const tn_prompt prompt = { .kind = TN_PROMPT_MESSAGES,
                                       .messages = msgs + first,
                                       .n_messages = (int32_t) (n - first),
                                       .images = n_images > 0 ? images + skip : NULL,
                                       .n_images = (int32_t) (n_images - skip) };

            rc = tn_session_run (engine->session, &prompt, &gen, on_token, &run, &st, &err);
          }
          if (rc != TN_ERR_OVERFLOW || st.generated_tokens > 0)
            break;
          while (next < n && g_strcmp0 (req->roles[next], "user") != 0)
            next++;
          if (next >= n)
            break; /* only the last user message is left: it alone is too long */
          first = next;
        }
      ev->stats.dropped_messages = (int) first;
    }
  set_running_session (engine, NULL);

done:
  for (guint i = 0; i < n_images; i++)
    free ((void *) images[i].embd); /* tn_vision_encode_new's rows */
  g_free (images);

  {
    int dropped = ev->stats.dropped_messages;

    copy_stats (&ev->stats, &st);
    ev->stats.dropped_messages = dropped;
  }
  ev->stats.n_ctx = engine->n_ctx;
  ev->stats.error_code = rc;
  ev->stats.elapsed_ms = ms_since (run.start_us);
  if (rc == TN_ERR_CANCELLED || st.stop_reason == TN_STOP_CANCELLED
      || st.stop_reason == TN_STOP_CALLBACK || is_cancelled (engine->shared, req->id))
    ev->flag = TRUE;
  else if (rc != TN_OK)
    ev->error = tern_engine_error_text (&err);
  /* The engine's own advice ("start a new chat") is wrong here: every
   * earlier turn is already left out. The window says so with the size. */
  /* In Flash too: the context gauge shows what a message too long needs
   * (docs/APP.md, "Gauge"). */
  if (rc == TN_ERR_OVERFLOW)
    tern_engine_overflow_stats (&err, &ev->stats);
  event_post (ev);
}

static gpointer
engine_thread (gpointer data)
{
  Engine engine = { .shared = data };
  /* g_main_context_invoke_full() runs the function right away, on the
   * calling thread, when the target context is that thread's default and
   * nobody holds it. Without a context of its own, this thread's default is
   * the main one, and UI signals would fire here whenever the main loop was
   * between iterations. */
  GMainContext *own = g_main_context_new ();

  g_main_context_push_thread_default (own);
  tern_sampling_clear (&engine.suggested);
  for (;;)
    {
      Request *req = g_async_queue_pop (engine.shared->requests);
      gboolean quit = req->kind == REQ_QUIT;

      switch (req->kind)
        {
        case REQ_LOAD:
        case REQ_LOAD_DEMO:
          handle_load (&engine, req);
          break;
        case REQ_COUNT:
          handle_count (&engine, req);
          break;
        case REQ_DRAFTER:
          handle_drafter (&engine, req);
          break;
        case REQ_SERVE:
          handle_serve (&engine, req);
          break;
        case REQ_SERVE_STOP:
          stop_server (&engine, TRUE);
          break;
#ifdef TERN_HAVE_MANAGER
        case REQ_REMOTE:
          handle_remote (&engine, req);
          break;
        case REQ_PIN:
          if (is_remote (&engine))
            handle_remote_pin (&engine, req);
          else
            handle_pin (&engine, req);
          break;
        case REQ_ASK:
        case REQ_CHAT:
          if (is_remote (&engine))
            handle_remote_generate (&engine, req);
          else
            handle_generate (&engine, req);
          break;
#else
        case REQ_PIN:
          handle_pin (&engine, req);
          break;
        case REQ_ASK:
        case REQ_CHAT:
          handle_generate (&engine, req);
          break;
#endif
        case REQ_QUIT:
        default:
          break;
        }
      request_free (req);
      if (quit)
        break;
    }

  stop_server (&engine, FALSE);
  end_remote (&engine);
  g_free (engine.model_id);
  g_free (engine.pin_error);
  set_vision (&engine, NULL);
  tn_drafter_free (engine.chosen);
  tn_drafter_free (engine.lookup);
  tn_session_free (engine.session);
  tn_model_free (engine.model);
  shared_unref (engine.shared);
  g_main_context_pop_thread_default (own);
  g_main_context_unref (own);
  return NULL;
}

/* ------------------------------------------------------------ main thread */

static guint
push (TernEngineWorker *self,
      Request          *req)
{
  g_return_val_if_fail (self->thread != NULL, 0);

  guint id = ++self->next_id;

  req->id = id;
  req->n_ctx = self->n_ctx;
  req->n_threads = self->n_threads;
  if (req->kind == REQ_COUNT)
    g_atomic_int_set (&self->shared->latest_count, (gint) id);
  /* From here on the engine thread owns req. */
  g_async_queue_push (self->shared->requests, req);
  return id;
}

static Request *
request_new (RequestKind  kind,
             const char  *text)
{
  Request *req = g_new0 (Request, 1);

  req->kind = kind;
  req->text = g_strdup (text);
  return req;
}

void
tern_engine_worker_set_session_size (TernEngineWorker *self,
                                     int               n_ctx,
                                     int               n_threads)
{
  g_return_if_fail (TERN_IS_ENGINE_WORKER (self));
  self->n_ctx = n_ctx;
  self->n_threads = n_threads;
}

guint
tern_engine_worker_load_model (TernEngineWorker *self,
                               const char       *path)
{
  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  return push (self, request_new (REQ_LOAD, path));
}

guint
tern_engine_worker_load_demo (TernEngineWorker *self,
                              const char       *path)
{
  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  return push (self, request_new (REQ_LOAD_DEMO, path));
}

guint
tern_engine_worker_prepare_drafter (TernEngineWorker *self,
                                    TernDrafterKind   kind,
                                    const char       *path)
{
  Request *req;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  req = request_new (REQ_DRAFTER, path);
  req->drafter = kind;
  return push (self, req);
}

gboolean
tern_engine_worker_can_serve (void)
{
#ifdef TERN_HAVE_SERVER
  return TRUE;
#else
  return FALSE;
#endif
}

gboolean
tern_engine_worker_serve (TernEngineWorker *self,
                          int               port,
                          const char       *api_key)
{
  Request *req;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), FALSE);
  if (!tern_engine_worker_can_serve ())
    return FALSE;
  req = request_new (REQ_SERVE, NULL);
  req->port = port;
  req->api_key = g_strdup (api_key);
  push (self, req);
  return TRUE;
}

void
tern_engine_worker_stop_serving (TernEngineWorker *self)
{
  g_return_if_fail (TERN_IS_ENGINE_WORKER (self));
  push (self, request_new (REQ_SERVE_STOP, NULL));
}

guint
tern_engine_worker_count_tokens (TernEngineWorker *self,
                                 const char       *system_prompt)
{
  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  return push (self, request_new (REQ_COUNT, system_prompt));
}

guint
tern_engine_worker_pin (TernEngineWorker *self,
                        const char       *system_prompt)
{
  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  return push (self, request_new (REQ_PIN, system_prompt));
}

guint
tern_engine_worker_ask (TernEngineWorker      *self,
                        const char            *user_text,
                        const TernGenSettings *settings)
{
  Request *req;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  req = request_new (REQ_ASK, user_text);
  req->gen = *settings;
  return push (self, req);
}

static Request *
chat_request_new (const char * const    *roles,
                  const char * const    *contents,
                  guint                  n_messages,
                  const TernGenSettings *settings)
{
  Request *req = request_new (REQ_CHAT, NULL);

  req->roles = g_new0 (char *, n_messages + 1);
  req->contents = g_new0 (char *, n_messages + 1);
  for (guint i = 0; i < n_messages; i++)
    {
      req->roles[i] = g_strdup (roles[i]);
      req->contents[i] = g_strdup (contents[i]);
    }
  req->gen = *settings;
  return req;
}

static GPtrArray *
copy_images (GPtrArray *images)
{
  GPtrArray *copy = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);

  for (guint i = 0; images != NULL && i < images->len; i++)
    g_ptr_array_add (copy, g_bytes_ref (g_ptr_array_index (images, i)));
  return copy;
}

guint
tern_engine_worker_ask_images (TernEngineWorker      *self,
                               const char            *user_text,
                               GPtrArray             *images,
                               const TernGenSettings *settings)
{
  Request *req;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  req = request_new (REQ_ASK, user_text);
  req->gen = *settings;
  req->images = copy_images (images);
  return push (self, req);
}

guint
tern_engine_worker_chat_images (TernEngineWorker      *self,
                                const char * const    *roles,
                                const char * const    *contents,
                                guint                  n_messages,
                                GPtrArray             *images,
                                const TernGenSettings *settings)
{
  Request *req;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  req = chat_request_new (roles, contents, n_messages, settings);
  req->images = copy_images (images);
  return push (self, req);
}

guint
tern_engine_worker_chat (TernEngineWorker      *self,
                         const char * const    *roles,
                         const char * const    *contents,
                         guint                  n_messages,
                         const TernGenSettings *settings)
{
  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  return push (self, chat_request_new (roles, contents, n_messages, settings));
}

gboolean
tern_engine_worker_can_remote (void)
{
#ifdef TERN_HAVE_MANAGER
  return TRUE;
#else
  return FALSE;
#endif
}

guint
tern_engine_worker_use_remote (TernEngineWorker *self,
                               const char       *url,
                               const char       *api_key,
                               const char       *model)
{
  Request *req;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  g_return_val_if_fail (url != NULL && model != NULL, 0);
  req = request_new (REQ_REMOTE, url);
  req->api_key = g_strdup (api_key);
  req->model = g_strdup (model);
  return push (self, req);
}

void
tern_engine_worker_cancel (TernEngineWorker *self)
{
  g_return_if_fail (TERN_IS_ENGINE_WORKER (self));

  g_atomic_int_set (&self->shared->cancel_upto, (gint) self->next_id);
  g_mutex_lock (&self->shared->lock);
  if (self->shared->running_session != NULL)
    tn_session_cancel (self->shared->running_session);
  if (self->shared->running_remote != NULL)
    g_cancellable_cancel (self->shared->running_remote);
  g_mutex_unlock (&self->shared->lock);
}

gboolean
tern_engine_worker_has_model (TernEngineWorker *self)
{
  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), FALSE);
  return self->has_model;
}

void
tern_engine_worker_shutdown (TernEngineWorker *self)
{
  g_return_if_fail (TERN_IS_ENGINE_WORKER (self));

  if (self->thread == NULL)
    return;
  g_atomic_int_set (&self->shared->quitting, 1);
  tern_engine_worker_cancel (self);
  push (self, request_new (REQ_QUIT, NULL));
  g_thread_join (g_steal_pointer (&self->thread));
}

static void
tern_engine_worker_dispose (GObject *object)
{
  TernEngineWorker *self = TERN_ENGINE_WORKER (object);

  tern_engine_worker_shutdown (self);
  G_OBJECT_CLASS (tern_engine_worker_parent_class)->dispose (object);
}

static void
tern_engine_worker_finalize (GObject *object)
{
  TernEngineWorker *self = TERN_ENGINE_WORKER (object);

  g_clear_pointer (&self->shared, shared_unref);
  G_OBJECT_CLASS (tern_engine_worker_parent_class)->finalize (object);
}

static void
tern_engine_worker_class_init (TernEngineWorkerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = tern_engine_worker_dispose;
  object_class->finalize = tern_engine_worker_finalize;

  /* One boxed event each (tern-engine-worker.h), the emitter's for the
   * emission: handlers copy what they keep. */
  signals[SIGNAL_MODEL_LOADED] =
    g_signal_new ("model-loaded", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_MODEL_LOADED_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_LOAD_PROGRESS] =
    g_signal_new ("load-progress", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                  NULL, G_TYPE_NONE, 1, TERN_TYPE_LOAD_PROGRESS_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_TOKEN_COUNT] =
    g_signal_new ("token-count", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_TOKEN_COUNT_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_PINNED] =
    g_signal_new ("pinned", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_PINNED_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_UPDATE] =
    g_signal_new ("update", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_UPDATE_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_FINISHED] =
    g_signal_new ("finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_FINISHED_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_DRAFTER_READY] =
    g_signal_new ("drafter-ready", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_DRAFTER_READY_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_VISION] =
    g_signal_new ("vision", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_VISION_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_SERVER_STATE] =
    g_signal_new ("server-state", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_SERVER_STATE_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
  signals[SIGNAL_WARNING] =
    g_signal_new ("warning", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, TERN_TYPE_WARNING_EVENT | G_SIGNAL_TYPE_STATIC_SCOPE);
}

static void
tern_engine_worker_init (TernEngineWorker *self)
{
  Shared *shared = g_atomic_rc_box_new0 (Shared);

  shared->context = g_main_context_ref_thread_default ();
  g_weak_ref_init (&shared->owner, self);
  shared->requests = g_async_queue_new_full ((GDestroyNotify) request_free);
  shared->pending_text = g_string_new (NULL);
  shared->pending_drafted = g_byte_array_new ();
  g_mutex_init (&shared->lock);
  self->shared = shared;
  tern_sampling_clear (&self->suggested);
  self->thread = g_thread_new ("tern-engine", engine_thread, shared_ref (shared));
}

int
tern_engine_worker_image_fit_side (TernEngineWorker *self,
                                   int               budget)
{
  int side = 0;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  g_mutex_lock (&self->shared->lock);
  if (self->shared->vision != NULL)
    side = tn_vision_input_side (self->shared->vision, snap_budget (self->shared->vision, budget));
  g_mutex_unlock (&self->shared->lock);
  return side;
}

int
tern_engine_worker_auto_image_budget (TernEngineWorker *self,
                                      gboolean          flash)
{
  const int *list = NULL;
  int n_list = 0;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), 0);
  g_mutex_lock (&self->shared->lock);
  if (self->shared->vision != NULL)
    n_list = tn_vision_budgets (self->shared->vision, &list);
  g_mutex_unlock (&self->shared->lock);
  return flash && n_list > 0 ? list[0] : 0;
}

int
tern_engine_worker_image_tokens (TernEngineWorker  *self,
                                 int                budget,
                                 int                width,
                                 int                height,
                                 GError           **error)
{
  tn_error err = { 0 };
  int n;

  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), -1);
  g_mutex_lock (&self->shared->lock);
  if (self->shared->vision != NULL)
    n = tn_vision_image_tokens (self->shared->vision, snap_budget (self->shared->vision, budget),
                                width, height, &err);
  else
    {
      set_error (&err, TN_ERR_INVALID,
                 _("This model has no vision projector (*mmproj*.gguf beside it): it cannot read images"));
      n = TN_ERR_INVALID;
    }
  g_mutex_unlock (&self->shared->lock);
  if (n < 0)
    {
      g_autofree char *text = tern_engine_error_text (&err);

      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, text);
    }
  return n;
}

const TernSampling *
tern_engine_worker_get_suggested_sampling (TernEngineWorker *self)
{
  g_return_val_if_fail (TERN_IS_ENGINE_WORKER (self), NULL);
  return &self->suggested;
}

TernEngineWorker *
tern_engine_worker_new (void)
{
  return g_object_new (TERN_TYPE_ENGINE_WORKER, NULL);
}
