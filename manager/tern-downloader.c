/* tern-downloader.c: resumable, verified downloads of catalog packages.
 *
 * Shape: a pull (one tag, a GTask) subscribes to package jobs; a package job
 * owns one transfer per missing file; transfers run in a GThreadPool of
 * max-concurrent threads with libsoup's blocking API (allowed from any thread
 * since libsoup 3.2) and report back to the creator's main context. Store
 * updates and signals happen only there. */
#include "tern-manager-private.h"
#include "tern.h"
#include "tern-hub.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROGRESS_INTERVAL_MS 200
#define READ_BLOCK (256 * 1024)
/* How often a download of unknown size looks at the free space. */
#define UNSIZED_SPACE_CHECK (16u << 20)
#define MAX_REDIRECTS 10
/* A transfer that moves fewer than MIN_RATE_BYTES in MIN_RATE_SECONDS is
 * stalled (curl's --speed-limit / --speed-time): a server that sends a byte
 * every 20 s never trips the 30 s time-out. About 1 KiB/s: a poor mobile
 * link (20 KB/s) has twenty times that. */
#define MIN_RATE_BYTES (64u << 10)
#define MIN_RATE_SECONDS 60

typedef struct _PackageJob PackageJob;
typedef struct _Pull Pull;

struct _TernDownloader {
  GObject            parent_instance;
  TernModelStore    *store;
  GMainContext      *context;
  SoupSession       *session;     /* made at the first pull */
  GThreadPool       *pool;
  GHashTable        *jobs;        /* package id -> PackageJob* (running) */
  GHashTable        *pulls;       /* tag -> Pull* (running) */
  GPtrArray         *winding;     /* Pull* cancelled, replaced in pulls by a
                                   * new pull of their tag, not yet returned */
  GSource           *progress_source;

  guint              max_concurrent;
  guint              max_attempts;
  guint              initial_delay_ms;
  guint              max_delay_ms;
  guint              timeout_s;
  guint              min_rate_bytes;
  guint              min_rate_seconds;  /* 0: no minimum */
  TernFreeSpaceFunc  free_space;
  gpointer           free_space_data;
  GDestroyNotify     free_space_destroy;

  guint64            bytes_received;  /* atomic */
  gint               active;          /* atomic: transfers running now */
  gint               peak;            /* atomic: the most that ever ran at once */
};

G_DEFINE_FINAL_TYPE (TernDownloader, tern_downloader, G_TYPE_OBJECT)

enum {
  SIGNAL_PROGRESS,
  SIGNAL_WAITING,
  SIGNAL_PULL_FINISHED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

/* One file to fetch. Fields above `done` are set before the thread starts
 * and not changed after; the result fields are written by the thread and
 * read in the main context once it has reported back. */
typedef struct {
  PackageJob     *job;          /* strong */
  char           *name;
  char           *url;
  char           *dest;
  char           *partial;
  char           *meta;
  char           *root;         /* for the free-space check */
  guint64         size;         /* 0: unknown until the server says */
  char           *expected_sha; /* from the catalog, may be NULL */
  char           *broken_sha;   /* recorded for the file that check found
                                 * damaged at dest; NULL when none */
  GCancellable   *cancellable;  /* the job's */
  SoupSession    *session;
  TernDownloader *downloader;   /* borrowed: the job keeps it alive */

  guint64         done;         /* atomic: bytes in the partial file */
  gboolean        waiting;      /* atomic: another program is downloading it */
  guint64         known_size;   /* atomic: size once known */
  guint64         check_size;   /* atomic: bytes of the file whose sha256 is
                                 * being checked; 0 when none is */
  guint64         checked;      /* atomic: bytes of it hashed so far */

  GError         *error;
  char           *sha256;       /* verified hash */
  guint64         final_size;
  /* The thread's own: where the slow stretch began when an attempt ended
   * stalled (below the minimum rate), G_MAXUINT64 otherwise. */
  guint64         stalled_from;
} Transfer;

struct _PackageJob {
  gint                      ref_count;
  TernDownloader           *downloader;  /* strong */
  TernCatalog              *catalog;     /* strong: package points into it */
  const TernCatalogPackage *package;
  GPtrArray                *transfers;   /* Transfer* */
  guint                     pending;
  GPtrArray                *pulls;       /* Pull* subscribers (borrowed) */
  GCancellable             *cancellable;
  GError                   *error;
  gboolean                  finished;
};

struct _Pull {
  TernDownloader       *downloader;  /* borrowed: the task holds it */
  GTask                *task;        /* strong until returned */
  char                 *tag;
  TernCatalog          *catalog;     /* strong */
  const TernCatalogTag *catalog_tag;
  GPtrArray            *jobs;        /* PackageJob* (strong) */
  gulong                cancel_id;
  gboolean              cancel_asked;  /* tern_downloader_cancel: runs in an idle */
  gboolean              cancelled;
  gboolean              kept_elsewhere;  /* cancelled, left a partial file to another pull */
  gint64                last_time;
  guint64               last_done;
  double                rate;
  char                 *waiting_for;  /* the file we last said we wait for */
};

static void pull_maybe_finish (Pull *pull);

/* ---- package jobs ------------------------------------------------------- */

static void
transfer_free (Transfer *t)
{
  g_free (t->name);
  g_free (t->url);
  g_free (t->dest);
  g_free (t->partial);
  g_free (t->meta);
  g_free (t->root);
  g_free (t->expected_sha);
  g_free (t->broken_sha);
  g_clear_object (&t->cancellable);
  g_clear_object (&t->session);
  g_clear_error (&t->error);
  g_free (t->sha256);
  g_free (t);
}

static PackageJob *
package_job_ref (PackageJob *job)
{
  g_atomic_int_inc (&job->ref_count);
  return job;
}

static void
package_job_unref (PackageJob *job)
{
  if (!g_atomic_int_dec_and_test (&job->ref_count))
    return;
  g_ptr_array_unref (job->transfers);
  g_ptr_array_unref (job->pulls);
  g_clear_object (&job->cancellable);
  g_clear_error (&job->error);
  g_object_unref (job->catalog);
  g_object_unref (job->downloader);
  g_free (job);
}

static void
package_job_finish (PackageJob *job)
{
  TernDownloader *self = job->downloader;
  g_autoptr(GPtrArray) pulls = NULL;

  job->finished = TRUE;
  if (job->error == NULL && !tern_model_store_complete_package (self->store, job->package, &job->error))
    g_prefix_error (&job->error, "%s: ", job->package->id);
  tern_model_store_release_package (self->store, job->package->id);
  if (g_hash_table_lookup (self->jobs, job->package->id) == job)
    g_hash_table_remove (self->jobs, job->package->id);

  pulls = g_ptr_array_copy (job->pulls, NULL, NULL);
  for (guint i = 0; i < pulls->len; i++)
    pull_maybe_finish (pulls->pdata[i]);
}

static gboolean
transfer_reported (gpointer data)
{
  Transfer *t = data;
  PackageJob *job = t->job;
  TernDownloader *self = job->downloader;

  if (t->error == NULL)
    {
      if (!tern_model_store_record_file (self->store, job->package->id, t->name, t->final_size,
                                         t->sha256, &t->error))
        g_prefix_error (&t->error, "%s: ", t->name);
    }
  if (t->error != NULL && job->error == NULL)
    {
      job->error = g_error_copy (t->error);
      /* One file failing dooms the package: stop its other files (their
       * partial downloads stay for the next attempt). */
      g_cancellable_cancel (job->cancellable);
    }
  if (--job->pending == 0)
    package_job_finish (job);
  /* The reference the transfer held while it ran. */
  t->job = NULL;
  package_job_unref (job);
  return G_SOURCE_REMOVE;
}

static guint64 resumable_bytes (Transfer *t);

static PackageJob *
package_job_new (TernDownloader           *self,
                 TernCatalog              *catalog,
                 const TernCatalogPackage *package)
{
  PackageJob *job = g_new0 (PackageJob, 1);

  job->ref_count = 1;
  job->downloader = g_object_ref (self);
  job->catalog = g_object_ref (catalog);
  job->package = package;
  job->transfers = g_ptr_array_new_with_free_func ((GDestroyNotify) transfer_free);
  job->pulls = g_ptr_array_new ();
  job->cancellable = g_cancellable_new ();

  for (guint i = 0; i < package->files->len; i++)
    {
      TernCatalogFile *file = package->files->pdata[i];
      Transfer *t;

      if (tern_model_store_lookup_file (self->store, package->id, file->name, NULL, NULL))
        continue;
      t = g_new0 (Transfer, 1);
      t->name = g_strdup (file->name);
      t->url = g_strdup (file->url);
      t->dest = tern_model_store_get_file_path (self->store, package->id, file->name);
      t->partial = g_strconcat (t->dest, TERN_PARTIAL_SUFFIX, NULL);
      t->meta = g_strconcat (t->dest, TERN_PARTIAL_META_SUFFIX, NULL);
      t->root = g_strdup (tern_model_store_get_root (self->store));
      t->size = file->size;
      t->known_size = file->size;
      t->expected_sha = g_strdup (file->sha256);
      t->broken_sha = g_strdup (tern_model_store_broken_file_sha256 (self->store, package->id, file->name));
      t->cancellable = g_object_ref (job->cancellable);
      t->downloader = self;
      t->done = resumable_bytes (t);
      g_ptr_array_add (job->transfers, t);
    }
  job->pending = job->transfers->len;
  tern_model_store_hold_package (self->store, package->id);
  return job;
}

/* ---- one transfer, in a pool thread ------------------------------------- */

static guint64
free_space_of (TernDownloader *self,
               const char     *path)
{
  if (self->free_space != NULL)
    return self->free_space (path, self->free_space_data);
  return tern_manager_free_space (path);
}

typedef enum {
  ATTEMPT_OK,
  ATTEMPT_RETRY,  /* transient: try again after a delay */
  ATTEMPT_FAIL,   /* permanent */
} AttemptResult;

typedef struct {
  char    *etag;        /* the server's strong ETag, for If-Range */
  char    *advertised;  /* sha256 the server advertised */
  guint64  size;        /* the whole file's size by the answer that began it; 0: unknown */
} PartialMeta;

static void
partial_meta_clear (PartialMeta *meta)
{
  g_clear_pointer (&meta->etag, g_free);
  g_clear_pointer (&meta->advertised, g_free);
  meta->size = 0;
}

/* FILE.partial.json: what the bytes in FILE.partial are a prefix of. A meta
 * file that cannot be read, or is for another URL, means a fresh start. */
static gboolean
read_meta (Transfer    *t,
           PartialMeta *meta)
{
  g_autoptr(JsonObject) object = tern_manager_read_partial_meta (t->meta);

  if (object == NULL
      || g_strcmp0 (json_object_get_string_member_with_default (object, "url", ""), t->url) != 0)
    return FALSE;
  meta->etag = g_strdup (json_object_get_string_member_with_default (object, "etag", NULL));
  meta->advertised = g_strdup (json_object_get_string_member_with_default (object, "sha256", NULL));
  if (meta->advertised != NULL && !tern_manager_is_sha256 (meta->advertised))
    g_clear_pointer (&meta->advertised, g_free);
  /* Absent in the meta files of earlier versions: unknown. */
  meta->size = (guint64) MAX (json_object_get_int_member_with_default (object, "size", 0), 0);
  return TRUE;
}

/* Whether the length bytes of FILE.partial may be resumed: its meta is for
 * this URL (read into meta), it is no longer than the file, and the hash the
 * server advertised then is the one expected now. Read by the attempt and by
 * the progress a pull starts from, which must agree. */
static gboolean
partial_resumable (Transfer    *t,
                   guint64      length,
                   PartialMeta *meta)
{
  return read_meta (t, meta) && !(t->size > 0 && length > t->size)
         && !(t->expected_sha && meta->advertised
              && g_ascii_strcasecmp (t->expected_sha, meta->advertised) != 0);
}

/* The bytes of FILE.partial that the transfer's first attempt will keep,
 * by the same rules (a meta for this URL and hash, no more than the file):
 * the pull's progress starts there. It started at 0 until the transfer's
 * thread had opened the file, and a resumed row said "0% of 2.0 MB" for a
 * moment; the first rate counted the kept bytes as downloaded at once. */
static guint64
resumable_bytes (Transfer *t)
{
  PartialMeta meta = { NULL, NULL, 0 };
  struct stat st;
  guint64 kept = 0;

  if (lstat (t->partial, &st) != 0 || !S_ISREG (st.st_mode) || st.st_size <= 0)
    return 0;
  if (partial_resumable (t, (guint64) st.st_size, &meta))
    kept = (guint64) st.st_size;
  partial_meta_clear (&meta);
  return kept;
}

static gboolean
write_meta (Transfer    *t,
            PartialMeta *meta,
            GError     **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autofree char *text = NULL;
  g_autoptr(GError) local_error = NULL;
  struct stat st;
  gsize length;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "url");
  json_builder_add_string_value (b, t->url);
  json_builder_set_member_name (b, "etag");
  if (meta->etag)
    json_builder_add_string_value (b, meta->etag);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "sha256");
  if (meta->advertised)
    json_builder_add_string_value (b, meta->advertised);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "size");
  if (meta->size > 0 && meta->size <= G_MAXINT64)
    json_builder_add_int_value (b, (gint64) meta->size);
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  text = tn_json_escape_unit_separators (json_generator_to_data (gen, NULL), &length);
  /* As installed.json is written: a full disk says so (the row's
   * no-space sentence), not "cannot write to the models folder". */
  if (tern_manager_write_file_atomic (t->meta, text, length, &local_error))
    return TRUE;
  if (lstat (t->meta, &st) == 0 && !S_ISREG (st.st_mode))
    {
      /* A folder there: GLib's words were a failed g_rename(). */
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
                   _("%s is not a regular file; downloads are written there: move it away and pull again"),
                   t->meta);
      return FALSE;
    }
  g_propagate_error (error, g_steal_pointer (&local_error));
  return FALSE;
}

/* "\"abc\"" -> "abc"; NULL for weak validators, which If-Range may not use. */
static char *
strong_etag (const char *header)
{
  if (header == NULL || g_str_has_prefix (header, "W/"))
    return NULL;
  return g_strdup (header);
}

static char *
etag_as_sha256 (const char *header)
{
  g_autofree char *value = NULL;
  size_t n;

  if (header == NULL)
    return NULL;
  if (g_str_has_prefix (header, "W/"))
    header += 2;
  value = g_strdup (header);
  n = strlen (value);
  if (n >= 2 && value[0] == '"' && value[n - 1] == '"')
    {
      memmove (value, value + 1, n - 2);
      value[n - 2] = '\0';
    }
  if (!tern_manager_is_sha256 (value))
    return NULL;
  return g_ascii_strdown (value, -1);
}

static gboolean
retryable_status (guint status)
{
  return status == SOUP_STATUS_REQUEST_TIMEOUT || status == 429
      || status >= 500;
}

static gboolean
retryable_error (const GError *error)
{
  if (error->domain == G_IO_ERROR)
    return error->code != G_IO_ERROR_CANCELLED && error->code != G_IO_ERROR_NOT_SUPPORTED
        && error->code != G_IO_ERROR_INVALID_ARGUMENT;
  if (error->domain == G_RESOLVER_ERROR)
    return TRUE;
  if (error->domain == SOUP_SESSION_ERROR)
    return error->code == SOUP_SESSION_ERROR_PARSING || error->code == SOUP_SESSION_ERROR_ENCODING;
  return FALSE;  /* TLS certificate errors and the like will not go away */
}

static gboolean
set_file_size (int         fd,
               guint64     size,
               Transfer   *t,
               GError    **error)
{
  if (ftruncate (fd, (off_t) size) != 0 || lseek (fd, (off_t) size, SEEK_SET) < 0)
    {
      int errsv = errno;

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, "%s: %s", t->partial,
                   _(tn_write_cause (errsv)));
      return FALSE;
    }
  __atomic_store_n (&t->done, size, __ATOMIC_RELAXED);
  return TRUE;
}

static gboolean
write_all (int         fd,
           const char *data,
           gsize       length,
           Transfer   *t,
           GError    **error)
{
  while (length > 0)
    {
      ssize_t n = write (fd, data, length);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;

          g_set_error (error, TERN_MANAGER_ERROR,
                       errsv == ENOSPC || errsv == EDQUOT ? TERN_MANAGER_ERROR_NO_SPACE
                                                          : TERN_MANAGER_ERROR_IO,
                       _("%s: cannot write: %s"), t->partial, _(tn_write_cause (errsv)));
          return FALSE;
        }
      data += n;
      length -= (gsize) n;
    }
  return TRUE;
}

/* Sends GET for url with Range from `offset`, following redirects by hand so
 * that the headers of every hop can be read: Hugging Face advertises the
 * file's sha256 (X-Linked-Etag) on the redirect, not on the CDN's answer. */
static GInputStream *
send_request (Transfer     *t,
              guint64       offset,
              const char   *if_range,
              SoupMessage **out_msg,
              char        **advertised,
              guint64      *advertised_size,
              GError      **error)
{
  g_autofree char *url = g_strdup (t->url);

  *out_msg = NULL;
  for (int hop = 0; hop <= MAX_REDIRECTS; hop++)
    {
      g_autoptr(SoupMessage) msg = soup_message_new (SOUP_METHOD_GET, url);
      SoupMessageHeaders *request, *response;
      GInputStream *stream;
      const char *linked, *linked_size, *location;
      guint status;

      if (msg == NULL)
        {
          g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP, _("%s: cannot request '%s'"),
                       t->name, url);
          return NULL;
        }
      soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
      request = soup_message_get_request_headers (msg);
      soup_message_headers_replace (request, "Accept-Encoding", "identity");
      {
        /* Gated repositories: the token on the Hub's own hops only. */
        g_autofree char *auth = tern_hub_authorization_for (url);

        if (auth != NULL)
          soup_message_headers_replace (request, "Authorization", auth);
      }
      if (offset > 0)
        {
          soup_message_headers_set_range (request, (goffset) offset, -1);
          if (if_range != NULL)
            soup_message_headers_replace (request, "If-Range", if_range);
        }

      stream = soup_session_send (t->session, msg, t->cancellable, error);
      if (stream == NULL)
        return NULL;
      response = soup_message_get_response_headers (msg);
      linked = soup_message_headers_get_one (response, "X-Linked-Etag");
      linked_size = soup_message_headers_get_one (response, "X-Linked-Size");
      if (linked != NULL && *advertised == NULL)
        *advertised = etag_as_sha256 (linked);
      if (linked_size != NULL && *advertised_size == 0)
        *advertised_size = g_ascii_strtoull (linked_size, NULL, 10);

      status = soup_message_get_status (msg);
      location = soup_message_headers_get_one (response, "Location");
      if (SOUP_STATUS_IS_REDIRECTION (status) && status != SOUP_STATUS_NOT_MODIFIED && location != NULL)
        {
          g_autoptr(GUri) next = g_uri_parse_relative (soup_message_get_uri (msg), location,
                                                       SOUP_HTTP_URI_FLAGS, NULL);

          g_input_stream_close (stream, NULL, NULL);
          g_object_unref (stream);
          if (next == NULL)
            {
              g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                           _("%s: %s redirects to an invalid URL '%s'"), t->name, url, location);
              return NULL;
            }
          /* file://, ftp://, http:///x and the like: never followed
           * (libsoup would assert on some and speak HTTP to the others'
           * ports). */
          if ((g_ascii_strcasecmp (g_uri_get_scheme (next), "http") != 0
               && g_ascii_strcasecmp (g_uri_get_scheme (next), "https") != 0)
              || g_uri_get_host (next) == NULL || g_uri_get_host (next)[0] == '\0')
            {
              g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                           _("%s: %s redirects to '%s', which is not an http:// or https:// URL"),
                           t->name, url, location);
              return NULL;
            }
          if (tern_manager_redirect_downgrades (soup_message_get_uri (msg), next))
            {
              g_autofree char *to = g_uri_to_string (next);

              tern_manager_set_downgrade_error (error, url, to);
              g_prefix_error (error, "%s: ", t->name);
              return NULL;
            }
          g_free (url);
          url = g_uri_to_string (next);
          continue;
        }
      *out_msg = g_steal_pointer (&msg);
      return stream;
    }
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP, _("%s: %s: too many redirects"),
               t->name, t->url);
  return NULL;
}

/* The sha256 of a complete file of size bytes, shown as the check phase
 * meanwhile: a 17 GB model takes about 11 s to hash, during which the last
 * download tick ("100%, 0:00 left") looked stuck. */
static char *
transfer_check (Transfer    *t,
                int          fd,
                const char  *name,
                guint64      size,
                GError     **error)
{
  char *sha;

  __atomic_store_n (&t->checked, 0, __ATOMIC_RELAXED);
  __atomic_store_n (&t->check_size, size, __ATOMIC_RELEASE);
  sha = tern_manager_sha256_fd (fd, name, &t->checked, t->cancellable, error);
  __atomic_store_n (&t->check_size, 0, __ATOMIC_RELAXED);
  return sha;
}

/* A size no one gave (the catalog's is null and the body is chunked): the
 * disk is watched as it fills, and the download stopped while the reserve
 * is still free, rather than at the last byte the system had. What it
 * wrote is deleted: it cannot be resumed to a known end. */
static gboolean
unsized_space_left (Transfer  *t,
                    int        fd,
                    guint64    offset,
                    GError   **error)
{
  guint64 free_bytes = free_space_of (t->downloader, t->root);
  g_autofree char *done = NULL;
  g_autofree char *have = NULL;

  if (free_bytes >= TERN_DOWNLOADER_FREE_SPACE_RESERVE)
    return TRUE;
  done = tern_manager_format_size (offset);
  have = tern_manager_format_size (free_bytes);
  set_file_size (fd, 0, t, NULL);
  unlink (t->partial);
  unlink (t->meta);
  __atomic_store_n (&t->done, 0, __ATOMIC_RELAXED);
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_NO_SPACE,
               _("%s: neither the catalog nor the server gives its size, and after %s "
                 "only %s are free in %s: stopped before the disk fills, and what "
                 "was downloaded was deleted"),
               t->name, done, have, t->root);
  return FALSE;
}

static AttemptResult
attempt (Transfer *t,
         int       fd,
         GError  **error)
{
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GInputStream) stream = NULL;
  g_autofree char *advertised = NULL;
  g_autofree char *buffer = NULL;
  g_autoptr(GError) local_error = NULL;
  PartialMeta meta = { NULL, NULL, 0 };
  guint64 advertised_size = 0;
  guint64 offset, expected_size;
  guint64 resumed_at = 0;  /* > 0: the bytes before came from an earlier answer */
  const char *expected_sha;
  struct stat st;
  guint status;
  AttemptResult result = ATTEMPT_FAIL;
  guint min_bytes = t->downloader->min_rate_bytes;
  guint min_seconds = t->downloader->min_rate_seconds;
  gint64 window_start;
  guint64 window_offset;

  t->stalled_from = G_MAXUINT64;

  if (fstat (fd, &st) != 0)
    {
      int errsv = errno;

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, "%s: %s", t->partial,
                   g_strerror (errsv));
      return ATTEMPT_FAIL;
    }
  offset = (guint64) st.st_size;
  /* Resume only bytes we know the origin of. */
  if (offset > 0 && !partial_resumable (t, offset, &meta))
    {
      partial_meta_clear (&meta);
      if (!set_file_size (fd, 0, t, error))
        return ATTEMPT_FAIL;
      offset = 0;
    }
  /* A complete partial left by an interrupted verification: ask for its
   * last byte again so that the server's headers (hash, ETag) are seen. */
  if (offset > 0 && t->size > 0 && offset == t->size)
    {
      if (!set_file_size (fd, offset - 1, t, error))
        goto out;
      offset--;
    }
  __atomic_store_n (&t->done, offset, __ATOMIC_RELAXED);

  stream = send_request (t, offset, offset > 0 ? meta.etag : NULL, &msg, &advertised,
                         &advertised_size, &local_error);
  if (stream == NULL)
    {
      /* Ours (a redirect refused) already name the file and the URL. */
      if (g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED)
          || local_error->domain == TERN_MANAGER_ERROR)
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          goto out;
        }
      g_set_error (error, TERN_MANAGER_ERROR,
                   tern_manager_unreachable (local_error) ? TERN_MANAGER_ERROR_OFFLINE : TERN_MANAGER_ERROR_NETWORK,
                   "%s: %s: %s", t->name, t->url, local_error->message);
      result = retryable_error (local_error) ? ATTEMPT_RETRY : ATTEMPT_FAIL;
      goto out;
    }

  status = soup_message_get_status (msg);
  /* 416 to a request without Range (offset 0) is just an error: there is
   * no partial to start over from, and asking again will not change it. */
  if (status != SOUP_STATUS_OK && status != SOUP_STATUS_PARTIAL_CONTENT
      && (status != SOUP_STATUS_REQUESTED_RANGE_NOT_SATISFIABLE || offset == 0))
    {
      /* The reason phrase is the server's bytes: shown escaped, as the
       * Hub's are (not UTF-8, or ESC, it went as it was to the Models
       * panel and the terminal). */
      const char *reason = soup_message_get_reason_phrase (msg);
      GString *said = g_string_new (NULL);

      tern_manager_append_shown (said, reason != NULL ? reason : "");
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP, _("%s: HTTP %u %s from %s"),
                   t->name, status, said->str, t->url);
      g_string_free (said, TRUE);
      result = retryable_status (status) ? ATTEMPT_RETRY : ATTEMPT_FAIL;
      goto out;
    }
  if (status == SOUP_STATUS_REQUESTED_RANGE_NOT_SATISFIABLE)
    {
      /* Our partial is not a prefix of what the server has (or the file
       * shrank): start over. */
      if (!set_file_size (fd, 0, t, error))
        goto out;
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("%s: HTTP 416 for a resume at byte %" PRIu64 "; starting over"), t->name,
                   offset);
      result = ATTEMPT_RETRY;
      goto out;
    }

  {
    /* Asked for identity; the decoder is off, so compressed bytes would be
     * stored as they came and fail as a wrong size or hash, which blames
     * the wrong thing. */
    const char *coding = soup_message_headers_get_one (soup_message_get_response_headers (msg),
                                                       "Content-Encoding");

    if (coding != NULL && *coding != '\0' && g_ascii_strcasecmp (coding, "identity") != 0)
      {
        g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                     _("%s: %s sent the file compressed (Content-Encoding: %s) although asked not to"),
                     t->name, t->url, coding);
        goto out;
      }
  }

  /* X-Linked-Etag is, by Hugging Face's documentation, the file's sha256; a
   * plain ETag merely may look like one (a CDN's own 64-digit hash would
   * too): only a fallback when the catalog has no hash, never a reason to
   * refuse a file the catalog vouches for. */
  if (advertised == NULL && t->expected_sha == NULL)
    advertised = etag_as_sha256 (soup_message_headers_get_one (soup_message_get_response_headers (msg),
                                                               "ETag"));
  expected_sha = t->expected_sha ? t->expected_sha : advertised;
  if (t->expected_sha != NULL && advertised != NULL && g_ascii_strcasecmp (t->expected_sha, advertised) != 0)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CHECKSUM,
                   _("%s: the server offers a different file (sha256 %s) than the catalog names (sha256 %s) at %s"),
                   t->name, advertised, t->expected_sha, t->url);
      goto out;
    }

  if (status == SOUP_STATUS_PARTIAL_CONTENT)
    {
      goffset start = 0, end = 0, total = 0;

      if (!soup_message_headers_get_content_range (soup_message_get_response_headers (msg),
                                                   &start, &end, &total)
          || (guint64) start != offset)
        {
          /* A range we did not ask for: do not splice it in. */
          if (!set_file_size (fd, 0, t, error))
            goto out;
          g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                       _("%s: the server answered a resume at byte %" PRIu64
                       " with another range; starting over"), t->name, offset);
          result = ATTEMPT_RETRY;
          goto out;
        }
      /* A total other than the first answer's is another file too: with
       * no sha256 anywhere, its tail was appended to the old file's head
       * and installed; with the catalog's size, the pull failed, blaming
       * the catalog. */
      if ((advertised != NULL && meta.advertised != NULL
           && g_ascii_strcasecmp (advertised, meta.advertised) != 0)
          || (total > 0 && meta.size > 0 && (guint64) total != meta.size))
        {
          /* The file on the server changed since the partial was started. */
          if (!set_file_size (fd, 0, t, error))
            goto out;
          g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                       _("%s: the file on the server changed since the download began; starting over"),
                       t->name);
          result = ATTEMPT_RETRY;
          goto out;
        }
      expected_size = total > 0 ? (guint64) total : 0;
      resumed_at = offset;
    }
  else
    {
      SoupMessageHeaders *response = soup_message_get_response_headers (msg);

      /* 200: the whole file (the server ignored Range, or If-Range did not
       * match because the file changed). */
      if (offset > 0)
        {
          if (!set_file_size (fd, 0, t, error))
            goto out;
          offset = 0;
        }
      expected_size = 0;
      if (soup_message_headers_get_encoding (response) == SOUP_ENCODING_CONTENT_LENGTH)
        {
          goffset length = soup_message_headers_get_content_length (response);

          /* "-5" or more digits than 64 bits hold: not a size to compare
           * with the catalog's or to ask the disk for ("needs 18.4 EB"). */
          if (length < 0)
            {
              g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                           _("%s: %s answered with an invalid Content-Length '%s'"), t->name, t->url,
                           soup_message_headers_get_one (response, "Content-Length"));
              goto out;
            }
          expected_size = (guint64) length;
        }
    }
  if (expected_size == 0)
    expected_size = advertised_size;
  if (t->size > 0 && expected_size > 0 && expected_size != t->size)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_SIZE,
                   _("%s: the server's file has %" PRIu64 " bytes, the catalog says %" PRIu64),
                   t->name, expected_size, t->size);
      goto out;
    }
  if (t->size == 0 && expected_size > 0)
    {
      guint64 free_bytes = free_space_of (t->downloader, t->root);

      t->size = expected_size;
      __atomic_store_n (&t->known_size, expected_size, __ATOMIC_RELAXED);
      if (free_bytes < expected_size - offset
          || free_bytes - (expected_size - offset) < TERN_DOWNLOADER_FREE_SPACE_RESERVE)
        {
          g_autofree char *need = tern_manager_format_size (expected_size - offset);
          g_autofree char *have = tern_manager_format_size (free_bytes);

          g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_NO_SPACE,
                       _("%s: needs %s but only %s are free in %s"), t->name, need, have, t->root);
          goto out;
        }
    }

  g_free (meta.etag);
  meta.etag = strong_etag (soup_message_headers_get_one (soup_message_get_response_headers (msg), "ETag"));
  if (meta.advertised == NULL || (advertised != NULL && offset == 0))
    {
      g_free (meta.advertised);
      meta.advertised = g_strdup (advertised);
    }
  if (meta.size == 0 || offset == 0)
    meta.size = expected_size;
  if (!write_meta (t, &meta, error))
    goto out;

  /* Also before the first byte: with less free than the bytes between two
   * looks, the disk was filled to its last byte (ENOSPC) and the partial
   * left there, filling it still. */
  if (t->size == 0 && !unsized_space_left (t, fd, offset, error))
    goto out;
  buffer = g_malloc (READ_BLOCK);
  window_start = g_get_monotonic_time ();
  window_offset = offset;
  for (;;)
    {
      gssize n = g_input_stream_read (stream, buffer, READ_BLOCK, t->cancellable, &local_error);
      gint64 now = g_get_monotonic_time ();

      if (n < 0)
        {
          if (g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            {
              g_propagate_error (error, g_steal_pointer (&local_error));
              goto out;
            }
          g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_NETWORK,
                       _("%s: the download broke off at byte %" PRIu64 ": %s"), t->name, offset,
                       local_error->message);
          result = retryable_error (local_error) ? ATTEMPT_RETRY : ATTEMPT_FAIL;
          goto out;
        }
      if (n == 0)
        break;
      if (t->size > 0 && offset + (guint64) n > t->size)
        {
          set_file_size (fd, 0, t, NULL);
          g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_SIZE,
                       _("%s: the server sent more than the %" PRIu64 " bytes expected"), t->name,
                       t->size);
          goto out;
        }
      if (!write_all (fd, buffer, (gsize) n, t, error))
        goto out;
      offset += (guint64) n;
      if (t->size == 0 && (offset - (guint64) n) / UNSIZED_SPACE_CHECK != offset / UNSIZED_SPACE_CHECK
          && !unsized_space_left (t, fd, offset, error))
        goto out;
      __atomic_store_n (&t->done, offset, __ATOMIC_RELAXED);
      __atomic_add_fetch (&t->downloader->bytes_received, (guint64) n, __ATOMIC_RELAXED);
      /* Looked at as bytes come: a read returns at the latest after the
       * time-out, so a trickle is caught within a window and a time-out. */
      if (min_seconds > 0 && now - window_start >= (gint64) min_seconds * G_USEC_PER_SEC)
        {
          if (offset - window_offset < min_bytes)
            {
              g_autofree char *least = tern_manager_format_size (min_bytes);

              g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_NETWORK,
                           _("%s: less than %s arrived in %u seconds (at byte %" PRIu64
                             "): the connection counts as stalled"),
                           t->name, least, min_seconds, offset);
              t->stalled_from = window_offset;
              result = ATTEMPT_RETRY;
              goto out;
            }
          window_start = now;
          window_offset = offset;
        }
    }
  g_input_stream_close (stream, NULL, NULL);

  if (t->size > 0 && offset < t->size)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_NETWORK,
                   _("%s: the connection closed at byte %" PRIu64 " of %" PRIu64),
                   t->name, offset, t->size);
      result = ATTEMPT_RETRY;
      goto out;
    }

  /* Complete: make it durable, then check every byte on disk. */
  if (fsync (fd) != 0)
    {
      int errsv = errno;

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, _("%s: cannot sync: %s"), t->partial,
                   _(tn_write_cause (errsv)));
      goto out;
    }
  g_free (t->sha256);
  t->sha256 = transfer_check (t, fd, t->partial, offset, error);
  if (t->sha256 == NULL)
    goto out;
  if (expected_sha == NULL)
    expected_sha = meta.advertised;
  if (expected_sha != NULL && g_ascii_strcasecmp (t->sha256, expected_sha) != 0 && resumed_at > 0)
    {
      /* The bytes kept from before may be what is wrong (a partial file
       * damaged by a crash, another file once served at this URL): the
       * server's word is only tested by a download from the start. */
      if (!set_file_size (fd, 0, t, error))
        goto out;
      unlink (t->meta);
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CHECKSUM,
                   _("%s: sha256 %s, expected %s, after resuming at byte %" PRIu64 "; starting over"),
                   t->name, t->sha256, expected_sha, resumed_at);
      result = ATTEMPT_RETRY;
      goto out;
    }
  if (expected_sha != NULL && g_ascii_strcasecmp (t->sha256, expected_sha) != 0)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CHECKSUM,
                   _("%s: sha256 %s, expected %s: the bytes downloaded from %s are wrong; "
                   "they were deleted (nothing was installed)"), t->name, t->sha256, expected_sha, t->url);
      unlink (t->partial);
      unlink (t->meta);
      __atomic_store_n (&t->done, 0, __ATOMIC_RELAXED);
      goto out;
    }
  if (rename (t->partial, t->dest) != 0)
    {
      int errsv = errno;

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, _("%s: cannot rename into place: %s"),
                   t->dest, g_strerror (errsv));
      goto out;
    }
  {
    g_autofree char *dir = g_path_get_dirname (t->dest);

    tern_manager_sync_dir (dir);
  }
  unlink (t->meta);
  t->final_size = offset;
  result = ATTEMPT_OK;

out:
  partial_meta_clear (&meta);
  return result;
}

/* Sleeps for ms, or less when cancelled. */
static void
backoff_sleep (GCancellable *cancellable,
               guint         ms)
{
  GPollFD pfd;

  if (!g_cancellable_make_pollfd (cancellable, &pfd))
    {
      g_usleep ((gulong) ms * 1000);
      return;
    }
  g_poll (&pfd, 1, (gint) ms);
  g_cancellable_release_fd (cancellable);
}

/* The file at t->dest is complete: another program downloaded it while we
 * waited, or a crash came between the rename and the store's record. It is
 * taken as ours only when its bytes match the catalog's sha256 (or, with no
 * hash in the catalog, the one recorded for it when check marked it broken;
 * else as they are: the program that wrote it checked what the server
 * advertised). TRUE: settled, adopted or failed (t->error);
 * FALSE: it did not match and was deleted, so download it again. */
static gboolean
transfer_adopt (Transfer *t)
{
  /* O_NONBLOCK: the caller saw a regular file, but a FIFO put there since
   * must not block the download in open(); fstat refuses it below. */
  int fd = open (t->dest, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  char *sha;

  if (fd < 0 || fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      if (fd >= 0)
        close (fd);
      return FALSE;
    }
  sha = transfer_check (t, fd, t->dest, (guint64) st.st_size, &t->error);
  close (fd);
  if (sha == NULL)
    return t->error != NULL;
  /* Without a hash in the catalog, a file that check found damaged must
   * have its recorded bytes again: taking it as it is would record the
   * damage as the truth ("installed", then "all files intact"). */
  if ((t->expected_sha != NULL && g_ascii_strcasecmp (sha, t->expected_sha) != 0)
      || (t->expected_sha == NULL && t->broken_sha != NULL && g_ascii_strcasecmp (sha, t->broken_sha) != 0))
    {
      g_free (sha);
      unlink (t->dest);
      return FALSE;
    }
  g_free (t->sha256);
  t->sha256 = sha;
  t->final_size = (guint64) st.st_size;
  __atomic_store_n (&t->known_size, t->final_size, __ATOMIC_RELAXED);
  __atomic_store_n (&t->done, t->final_size, __ATOMIC_RELAXED);
  return TRUE;
}

/* A regular file at path itself: not a symbolic link to one, which
 * transfer_adopt (O_NOFOLLOW) never takes; asking g_file_test, which
 * follows links, made transfer_open_partial loop for ever over a link. */
static gboolean
is_regular_no_follow (const char *path)
{
  struct stat st;

  return lstat (path, &st) == 0 && S_ISREG (st.st_mode);
}

/* Makes a package's folder: its parents as needed, then the folder itself,
 * which may exist. g_mkdir_with_parents asks "exists?" then "a folder?": a
 * cancelled pull of the same package removing the empty folder between the
 * two read as "Not a directory" and failed the pull that had replaced it.
 * Returns 0, or -1 with errno set. */
static int
make_package_dir (const char *dir)
{
  g_autofree char *parent = g_path_get_dirname (dir);

  if (g_mkdir_with_parents (parent, 0755) != 0)
    return -1;
  if (mkdir (dir, 0755) != 0 && errno != EEXIST)
    return -1;
  return 0;
}

#define OPEN_ADOPTED (-2)
#define WAIT_POLL_MS 200

/* Opens t->partial and takes its exclusive lock, which says "a download is
 * writing this file" to every other downloader and to the store's remove.
 * When another program holds it, waits (t->waiting tells the progress tick)
 * instead of failing: tags that share a package share its download. Once
 * the lock is ours the file must still be the one named t->partial: while
 * we waited it may have been renamed into place (then t->dest is adopted
 * after a check, OPEN_ADOPTED) or deleted by a remove (then start afresh).
 * Returns the locked fd, OPEN_ADOPTED, or -1 with t->error set. */
static int
transfer_open_partial (Transfer   *t,
                       const char *dir)
{
  for (;;)
    {
      struct stat by_fd, by_name;
      int fd;

      if (g_cancellable_set_error_if_cancelled (t->cancellable, &t->error))
        break;
      if (is_regular_no_follow (t->dest) && !g_file_test (t->partial, G_FILE_TEST_EXISTS))
        {
          if (transfer_adopt (t))
            {
              __atomic_store_n (&t->waiting, FALSE, __ATOMIC_RELAXED);
              return t->error != NULL ? -1 : OPEN_ADOPTED;
            }
          if (t->error != NULL)
            break;
        }
      /* A folder removed after this (or a file in its place) fails the
       * open below: ENOENT looks again, ENOTDIR says so. */
      if (make_package_dir (dir) != 0)
        {
          int errsv = errno;

          g_set_error (&t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, "%s: %s", dir,
                       g_strerror (errsv));
          break;
        }
      fd = open (t->partial, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0)
        {
          int errsv = errno;

          if (errsv == ENOENT)
            continue;  /* a remove took the folder between mkdir and open */
          if (errsv == ELOOP || errsv == ENXIO)
            {
              /* O_NOFOLLOW met a symbolic link; ENXIO: a socket. */
              g_set_error (&t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
                           _("%s is not a regular file; downloads are written there: move it away and pull again"),
                           t->partial);
              break;
            }
          g_set_error (&t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, "%s: %s", t->partial,
                       g_strerror (errsv));
          break;
        }
      if (flock (fd, LOCK_EX | LOCK_NB) != 0)
        {
          close (fd);
          __atomic_store_n (&t->waiting, TRUE, __ATOMIC_RELAXED);
          backoff_sleep (t->cancellable, WAIT_POLL_MS);
          continue;
        }
      if (fstat (fd, &by_fd) != 0 || by_fd.st_nlink == 0 || stat (t->partial, &by_name) != 0
          || by_name.st_ino != by_fd.st_ino || by_name.st_dev != by_fd.st_dev)
        {
          close (fd);  /* that file is gone or renamed: look again */
          continue;
        }
      if (!S_ISREG (by_fd.st_mode))
        {
          /* A FIFO opens O_RDWR without blocking, then fails as "cannot
           * seek": say what is wrong instead. */
          close (fd);
          g_set_error (&t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
                       _("%s is not a regular file; downloads are written there: move it away and pull again"),
                       t->partial);
          break;
        }
      if (is_regular_no_follow (t->dest))
        {
          /* The other program finished just before we made this partial. */
          unlink (t->partial);
          close (fd);
          continue;
        }
      __atomic_store_n (&t->waiting, FALSE, __ATOMIC_RELAXED);
      return fd;
    }
  __atomic_store_n (&t->waiting, FALSE, __ATOMIC_RELAXED);
  return -1;
}

/* A file the user already has (another tool's cache) instead of a download:
 * only when the catalog gives its hash and size, and no download of it has
 * begun here. TRUE when t->dest now holds it. */
static gboolean
transfer_adopt_local (Transfer   *t,
                      const char *dir)
{
  g_autofree char *found = NULL;

  if (t->expected_sha == NULL || t->size == 0 || g_file_test (t->dest, G_FILE_TEST_EXISTS)
      || g_file_test (t->partial, G_FILE_TEST_EXISTS))
    return FALSE;
  found = tern_manager_find_local_copy (t->expected_sha, t->size, t->cancellable);
  if (found == NULL || make_package_dir (dir) != 0 || !tern_manager_link_copy (found, t->dest, NULL))
    return FALSE;
  g_debug ("%s: adopted %s", t->dest, found);
  tern_manager_sync_dir (dir);
  g_free (t->sha256);
  t->sha256 = g_ascii_strdown (t->expected_sha, -1);
  t->final_size = t->size;
  __atomic_store_n (&t->done, t->size, __ATOMIC_RELAXED);
  return TRUE;
}

static void
transfer_run (Transfer *t)
{
  TernDownloader *self = t->downloader;
  g_autofree char *dir = g_path_get_dirname (t->dest);
  guint delay = self->initial_delay_ms;
  guint failures = 0;
  guint64 furthest = 0;
  gboolean first = TRUE;
  gboolean started_over = FALSE;
  int fd;

  if (transfer_adopt_local (t, dir))
    return;
  fd = transfer_open_partial (t, dir);
  if (fd < 0)
    return;  /* adopted (t->error unset) or failed */
  if (lseek (fd, 0, SEEK_END) < 0)
    {
      g_set_error (&t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, _("%s: cannot seek"), t->partial);
      close (fd);
      return;
    }

  for (;;)
    {
      AttemptResult result;

      g_clear_error (&t->error);
      result = attempt (t, fd, &t->error);
      if (result != ATTEMPT_RETRY)
        break;
      /* Unreachable on the first try: offline, most likely. Backing off for
       * half a minute would only delay saying so; the user retries. Later
       * failures of a transfer that got through once are retried. */
      if (first && g_error_matches (t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_OFFLINE))
        break;
      first = FALSE;
      /* A resumed download whose hash did not match starts over (attempt):
       * the fresh download is progress from byte 0, however far the damaged
       * one had got (a flaky link gave up on it before it passed that
       * point). Once only: a server whose every answer is wrong is not
       * retried for ever. */
      if (!started_over && g_error_matches (t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CHECKSUM))
        {
          started_over = TRUE;
          furthest = 0;
        }
      /* Progress resets the count: a flaky link that keeps moving gets there.
       * Progress means bytes beyond the furthest this transfer ever got: a
       * server that answers each resume so that the partial starts over
       * (another range, 416, a changed file) and then breaks off again
       * would otherwise be retried for ever, downloading the same bytes. */
      /* A stalled attempt's trickle is no progress (a server that sends
       * a few bytes a minute would be retried for ever): only what came
       * before its slow stretch counts. */
      {
        guint64 done = __atomic_load_n (&t->done, __ATOMIC_RELAXED);

        if (MIN (done, t->stalled_from) > furthest)
          {
            failures = 0;
            delay = self->initial_delay_ms;
          }
        furthest = MAX (furthest, done);
      }
      if (++failures >= self->max_attempts)
        {
          g_prefix_error (&t->error, _("gave up after %u attempts: "), failures);
          break;
        }
      backoff_sleep (t->cancellable, delay);
      delay = MIN (delay * 2, self->max_delay_ms);
      if (g_cancellable_is_cancelled (t->cancellable))
        {
          g_clear_error (&t->error);
          g_cancellable_set_error_if_cancelled (t->cancellable, &t->error);
          break;
        }
    }
  /* Keep a partial only when it is worth resuming: bytes known to be wrong
   * or no bytes at all leave nothing behind. */
  if (t->error != NULL)
    {
      struct stat st;

      if (g_error_matches (t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CHECKSUM)
          || g_error_matches (t->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_SIZE)
          || (fstat (fd, &st) == 0 && st.st_size == 0))
        {
          unlink (t->partial);
          unlink (t->meta);
          rmdir (dir);  /* only if empty */
        }
    }
  close (fd);
}

/* Runs func (data) in an iteration of context, whichever thread asks: the
 * reports of pool threads, and cancellations that may come from inside a
 * signal emission or a walk of the pulls. */
static void
post_to_context (GMainContext   *context,
                 gint            priority,
                 GSourceFunc     func,
                 gpointer        data,
                 GDestroyNotify  destroy,
                 const char     *name)
{
  GSource *source = g_idle_source_new ();

  g_source_set_priority (source, priority);
  g_source_set_callback (source, func, data, destroy);
  g_source_set_static_name (source, name);
  g_source_attach (source, context);
  g_source_unref (source);
}

static void
pool_func (gpointer data,
           gpointer user_data)
{
  Transfer *t = data;

  (void) user_data;
  {
    gint now = g_atomic_int_add (&t->downloader->active, 1) + 1;
    gint peak = g_atomic_int_get (&t->downloader->peak);

    while (now > peak && !g_atomic_int_compare_and_exchange (&t->downloader->peak, peak, now))
      peak = g_atomic_int_get (&t->downloader->peak);
  }
  transfer_run (t);
  g_atomic_int_add (&t->downloader->active, -1);
  /* Always as a source of the creator's context, never
   * g_main_context_invoke_full: that runs the function right here when the
   * context is this thread's default (a pool thread's is the main one) and
   * nobody holds it, as when the creator is between iterations. A pull
   * then finished on this thread while its creator was still setting it
   * up, and used it after it was freed (test-manager, http-errors, under
   * load). */
  post_to_context (t->downloader->context, G_PRIORITY_DEFAULT, transfer_reported, t, NULL,
                   "[tern] transfer reported");
}

/* ---- pulls -------------------------------------------------------------- */

static void
pull_free (Pull *pull)
{
  for (guint i = 0; i < pull->jobs->len; i++)
    g_ptr_array_remove (((PackageJob *) pull->jobs->pdata[i])->pulls, pull);
  g_ptr_array_unref (pull->jobs);
  g_free (pull->tag);
  g_free (pull->waiting_for);
  g_object_unref (pull->catalog);
  g_free (pull);
}

/* The pull's bytes downloaded of its files' sizes; with checked and
 * check_total (NULL: not wanted), those hashed of the files being checked
 * now (0 of 0 when none is). */
static void
pull_totals (Pull    *pull,
             guint64 *done,
             guint64 *total,
             guint64 *checked,
             guint64 *check_total)
{
  guint64 hashed = 0, hashing = 0;

  *done = *total = 0;
  for (guint i = 0; i < pull->jobs->len; i++)
    {
      PackageJob *job = pull->jobs->pdata[i];

      for (guint j = 0; j < job->transfers->len; j++)
        {
          Transfer *t = job->transfers->pdata[j];
          guint64 size = __atomic_load_n (&t->known_size, __ATOMIC_RELAXED);
          guint64 got = __atomic_load_n (&t->done, __ATOMIC_RELAXED);
          guint64 check_size = __atomic_load_n (&t->check_size, __ATOMIC_ACQUIRE);

          *total += size;
          *done += size > 0 ? MIN (got, size) : got;
          if (check_size > 0)
            {
              hashing += check_size;
              hashed += MIN (__atomic_load_n (&t->checked, __ATOMIC_RELAXED), check_size);
            }
        }
    }
  if (checked != NULL)
    *checked = hashed;
  if (check_total != NULL)
    *check_total = hashing;
}

static void
emit_progress (TernDownloader *self,
               Pull           *pull)
{
  TernDownloadProgress progress;

  tern_downloader_get_progress (self, pull->tag, &progress);
  g_signal_emit (self, signals[SIGNAL_PROGRESS], 0, pull->tag, progress.done, progress.total,
                 progress.rate, progress.eta);
}

/* "waiting" (tag, file) when a file of the pull starts waiting for another
 * program's download of it, and (tag, NULL) when no file waits any more. */
static void
emit_waiting (TernDownloader *self,
              Pull           *pull)
{
  const char *name = NULL;

  for (guint i = 0; name == NULL && i < pull->jobs->len; i++)
    {
      PackageJob *job = pull->jobs->pdata[i];

      for (guint j = 0; name == NULL && j < job->transfers->len; j++)
        {
          Transfer *t = job->transfers->pdata[j];

          if (__atomic_load_n (&t->waiting, __ATOMIC_RELAXED))
            name = t->name;
        }
    }
  if (g_strcmp0 (name, pull->waiting_for) == 0)
    return;
  g_free (pull->waiting_for);
  pull->waiting_for = g_strdup (name);
  g_signal_emit (self, signals[SIGNAL_WAITING], 0, pull->tag, name);
}

static gboolean
progress_tick (gpointer data)
{
  TernDownloader *self = data;
  g_autoptr(GList) pulls = g_hash_table_get_values (self->pulls);
  gint64 now = g_get_monotonic_time ();

  for (GList *l = pulls; l != NULL; l = l->next)
    {
      Pull *pull = l->data;
      guint64 done, total;
      double dt = (now - pull->last_time) / 1e6;

      pull_totals (pull, &done, &total, NULL, NULL);
      if (dt > 0)
        {
          double instant = done >= pull->last_done ? (done - pull->last_done) / dt : 0;

          /* About a two-second memory at five samples a second. */
          pull->rate = pull->rate == 0 ? instant : 0.9 * pull->rate + 0.1 * instant;
        }
      pull->last_time = now;
      pull->last_done = done;
      emit_waiting (self, pull);
      emit_progress (self, pull);
    }
  return G_SOURCE_CONTINUE;
}

static void
update_progress_source (TernDownloader *self)
{
  if (g_hash_table_size (self->pulls) > 0 && self->progress_source == NULL)
    {
      self->progress_source = g_timeout_source_new (PROGRESS_INTERVAL_MS);
      g_source_set_callback (self->progress_source, progress_tick, self, NULL);
      g_source_set_static_name (self->progress_source, "[tern] download progress");
      g_source_attach (self->progress_source, self->context);
    }
  else if (g_hash_table_size (self->pulls) == 0 && self->progress_source != NULL)
    {
      g_source_destroy (self->progress_source);
      g_clear_pointer (&self->progress_source, g_source_unref);
    }
}

static void
pull_return (Pull   *pull,
             GError *error)
{
  TernDownloader *self = pull->downloader;
  g_autoptr(GTask) task = g_steal_pointer (&pull->task);

  emit_progress (self, pull);
  /* Never from inside the cancellable's handler: see pull_cancelled. */
  if (pull->cancel_id != 0)
    g_cancellable_disconnect (g_task_get_cancellable (task), pull->cancel_id);
  if (g_hash_table_lookup (self->pulls, pull->tag) == pull)
    g_hash_table_remove (self->pulls, pull->tag);  /* frees pull */
  else
    g_ptr_array_remove_fast (self->winding, pull);  /* frees pull */
  update_progress_source (self);
  g_signal_emit (self, signals[SIGNAL_PULL_FINISHED], 0, g_task_get_task_data (task),
                 error ? error->message : NULL, error);
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

static void
pull_maybe_finish (Pull *pull)
{
  TernDownloader *self = pull->downloader;
  GError *error = NULL;

  for (guint i = 0; i < pull->jobs->len; i++)
    if (!((PackageJob *) pull->jobs->pdata[i])->finished)
      return;

  if (pull->cancelled)
    {
      guint64 done, total;

      /* Say what is true: an empty partial file is not kept (transfer_run);
       * one another pull still wanted went on for it. */
      pull_totals (pull, &done, &total, NULL, NULL);
      error = g_error_new (G_IO_ERROR, G_IO_ERROR_CANCELLED,
                           done > 0 || pull->kept_elsewhere ? _("%s: download cancelled (the partial files are kept: pulling again resumes)")
                                    : _("%s: download cancelled before any data arrived (nothing was kept)"),
                           pull->tag);
    }
  for (guint i = 0; error == NULL && i < pull->jobs->len; i++)
    {
      PackageJob *job = pull->jobs->pdata[i];

      if (job->error != NULL)
        {
          /* A package's error names its file; the user asked for a tag. */
          error = g_error_copy (job->error);
          if (!g_str_has_prefix (error->message, pull->tag))
            g_prefix_error (&error, "%s: ", pull->tag);
        }
    }
  if (error == NULL)
    tern_model_store_add_tag (self->store, pull->catalog_tag, &error);
  pull_return (pull, error);
}

/* The pull of task, running or winding down; NULL once it has returned. */
static Pull *
pull_of_task (TernDownloader *self,
              GTask          *task)
{
  Pull *pull = g_hash_table_lookup (self->pulls, g_task_get_task_data (task));

  if (pull != NULL && pull->task == task)
    return pull;
  for (guint i = 0; i < self->winding->len; i++)
    if (((Pull *) self->winding->pdata[i])->task == task)
      return self->winding->pdata[i];
  return NULL;
}

/* Whether the pull is on its way out: cancelled, or asked to be (the cancel
 * itself runs in an idle of the creator's context, see pull_cancelled). */
static gboolean
pull_cancelling (Pull *pull)
{
  GCancellable *cancellable = pull->task != NULL ? g_task_get_cancellable (pull->task) : NULL;

  return pull->cancelled || pull->cancel_asked
         || (cancellable != NULL && g_cancellable_is_cancelled (cancellable));
}

/* In the creator's context: stop what only this pull wanted; wait for that to
 * wind down (so its partial files are closed when the pull returns), and
 * leave packages that other pulls still want running. */
static gboolean
pull_cancel_in_context (gpointer data)
{
  GTask *task = data;
  Pull *pull = pull_of_task (TERN_DOWNLOADER (g_task_get_source_object (task)), task);

  if (pull == NULL || pull->cancelled)
    return G_SOURCE_REMOVE;
  pull->cancelled = TRUE;
  for (guint i = 0; i < pull->jobs->len;)
    {
      PackageJob *job = pull->jobs->pdata[i];
      gboolean wanted_elsewhere = FALSE;

      for (guint p = 0; p < job->pulls->len; p++)
        {
          Pull *other = job->pulls->pdata[p];

          wanted_elsewhere |= other != pull && !other->cancelled;
        }
      if (wanted_elsewhere)
        {
          for (guint j = 0; j < job->transfers->len; j++)
            pull->kept_elsewhere |= __atomic_load_n (&((Transfer *) job->transfers->pdata[j])->done,
                                                     __ATOMIC_RELAXED) > 0;
          g_ptr_array_remove (job->pulls, pull);
          g_ptr_array_remove_index (pull->jobs, i);  /* drops the pull's reference */
          continue;
        }
      g_cancellable_cancel (job->cancellable);
      i++;
    }
  pull_maybe_finish (pull);
  return G_SOURCE_REMOVE;
}

/* Runs in whatever thread cancelled, possibly inside the emission of the
 * cancellable's signal, where disconnecting would deadlock: always defer. */
static void
pull_cancelled (GCancellable *cancellable,
                gpointer      data)
{
  GTask *task = data;
  TernDownloader *self = g_task_get_source_object (task);

  (void) cancellable;
  post_to_context (self->context, G_PRIORITY_DEFAULT_IDLE, pull_cancel_in_context,
                   g_object_ref (task), g_object_unref, "[tern] cancel pull");
}

static void
ensure_session (TernDownloader *self)
{
  g_autoptr(GProxyResolver) proxy = NULL;
  g_autofree char *agent = NULL;

  if (self->session != NULL)
    return;
  agent = g_strdup_printf ("Tern/%s ", tern_manager_app_version ());
  self->session = soup_session_new_with_options ("timeout", self->timeout_s, "user-agent", agent,
                                                 "max-conns-per-host", 4, NULL);
  tern_manager_session_init (self->session);
  /* Ranges count bytes of the file as stored, not of a compressed encoding. */
  soup_session_remove_feature_by_type (self->session, SOUP_TYPE_CONTENT_DECODER);
  proxy = tern_manager_proxy_resolver_from_env ();
  if (proxy != NULL)
    soup_session_set_proxy_resolver (self->session, proxy);
}

void
tern_downloader_pull_async (TernDownloader      *self,
                            TernCatalog         *catalog,
                            const char          *tag,
                            GCancellable        *cancellable,
                            GAsyncReadyCallback  callback,
                            gpointer             user_data)
{
  g_autoptr(GTask) task = NULL;
  const TernCatalogTag *ctag;
  g_autoptr(GPtrArray) jobs = NULL;
  guint64 missing;
  Pull *pull, *old;

  g_return_if_fail (TERN_IS_DOWNLOADER (self));
  g_return_if_fail (TERN_IS_CATALOG (catalog));
  g_return_if_fail (tag != NULL);

  task = g_task_new (self, cancellable, callback, user_data);
  g_task_set_source_tag (task, tern_downloader_pull_async);
  /* Our cancelled error says what was kept; and a pull that completed just
   * as it was cancelled did complete. */
  g_task_set_check_cancellable (task, FALSE);
  g_task_set_task_data (task, g_strdup (tag), g_free);

  ctag = tern_catalog_find_tag (catalog, tag);
  if (ctag == NULL)
    {
      g_task_return_new_error (task, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
                               _("%s: no such model in the catalog %s ('tern-cli list' shows them)"), tag,
                               tern_catalog_get_path (catalog));
      return;
    }
  if (tern_catalog_tag_missing_feature (ctag) != NULL)
    {
      /* Refused before a byte moves: the files could not run here. */
      g_autofree char *have = g_strjoinv (", ", (char **) tern_catalog_features ());

      g_task_return_new_error (task, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_APP_TOO_OLD,
                               _("%s needs the engine's %s support, which this Tern (%s) does not have "
                                 "yet (it has: %s)"), tag, tern_catalog_tag_missing_feature (ctag),
                               tern_manager_app_version (), have);
      return;
    }
  if (!tern_catalog_tag_supported (ctag))
    {
      g_task_return_new_error (task, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_APP_TOO_OLD,
                               _("%s needs Tern %s or newer (this is %s)"), tag, ctag->min_app_version,
                               tern_manager_app_version ());
      return;
    }
  /* A pull of the tag that is being cancelled does not count: it is only
   * winding down, and this pull takes its place (below). */
  old = g_hash_table_lookup (self->pulls, tag);
  if (old != NULL && !pull_cancelling (old))
    {
      g_task_return_new_error (task, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_BUSY,
                               _("%s is already being downloaded"), tag);
      return;
    }
  if (g_task_return_error_if_cancelled (task))
    return;

  /* Refuse before any byte moves when it cannot fit. */
  missing = tern_model_store_get_missing_bytes (self->store, ctag);
  if (missing > 0)
    {
      guint64 free_bytes = free_space_of (self, tern_model_store_get_root (self->store));

      if (free_bytes < missing || free_bytes - missing < TERN_DOWNLOADER_FREE_SPACE_RESERVE)
        {
          g_autofree char *need = tern_manager_format_size (missing);
          g_autofree char *have = tern_manager_format_size (free_bytes);
          g_autofree char *reserve = tern_manager_format_size (TERN_DOWNLOADER_FREE_SPACE_RESERVE);

          g_task_return_new_error (task, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_NO_SPACE,
                                   _("%s: not enough disk space: the download needs %s (plus %s to spare) "
                                   "but only %s are free in %s"),
                                   tag, need, reserve, have, tern_model_store_get_root (self->store));
          return;
        }
    }

  ensure_session (self);
  jobs = g_ptr_array_new ();
  for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
    {
      const TernCatalogPackage *package = ctag->packages[r];
      PackageJob *job;

      if (package == NULL || tern_model_store_has_package (self->store, package->id))
        continue;
      job = g_hash_table_lookup (self->jobs, package->id);
      /* A job winding down after a cancel (or a failed file) would end
       * this pull with its error: start a fresh one, whose transfers wait
       * for the old ones' locks on the partial files, then resume them. */
      if (job != NULL && g_cancellable_is_cancelled (job->cancellable))
        job = NULL;
      if (job != NULL && g_ptr_array_find (jobs, job, NULL))
        continue;
      if (job == NULL)
        {
          job = package_job_new (self, catalog, package);
          /* replace: the key of a job still winding down may be its own
           * catalog's string, gone once that job is. */
          g_hash_table_replace (self->jobs, package->id, job);
          for (guint i = 0; i < job->transfers->len; i++)
            {
              Transfer *t = job->transfers->pdata[i];

              t->job = package_job_ref (job);
              t->session = g_object_ref (self->session);
              g_thread_pool_push (self->pool, t, NULL);
            }
          /* Every file was already verified: only the bookkeeping is left. */
          if (job->pending == 0)
            package_job_finish (job);
        }
      else
        package_job_ref (job);
      g_ptr_array_add (jobs, job);  /* the pull's reference */
    }

  pull = g_new0 (Pull, 1);
  pull->downloader = self;
  pull->task = g_steal_pointer (&task);
  pull->tag = g_strdup (tag);
  pull->catalog = g_object_ref (catalog);
  pull->catalog_tag = ctag;
  pull->jobs = g_ptr_array_new_with_free_func ((GDestroyNotify) package_job_unref);
  pull->last_time = g_get_monotonic_time ();
  for (guint i = 0; i < jobs->len; i++)
    {
      PackageJob *job = jobs->pdata[i];

      g_ptr_array_add (pull->jobs, job);
      g_ptr_array_add (job->pulls, pull);
    }
  pull_totals (pull, &pull->last_done, &missing, NULL, NULL);
  /* A cancelled pull of the tag still winding down (a cancel, then a pull
   * at once: "tern-cli pull" after Ctrl-C, the API) leaves the table for
   * self->winding, and returns from there with its cancelled error once
   * its transfers have closed their partial files. Its package jobs were
   * handled above as those of a cancelled sibling tag are: a job the
   * cancel has reached is not joined, this pull's own transfers wait for
   * the old ones' locks on the partial files (one writer of a partial file
   * and its meta at a time) and resume them; a job the cancel has not
   * reached yet is joined, and the cancel then leaves it running for this
   * pull. */
  old = g_hash_table_lookup (self->pulls, tag);
  if (old != NULL)
    {
      g_hash_table_steal (self->pulls, tag);
      g_ptr_array_add (self->winding, old);
    }
  g_hash_table_insert (self->pulls, pull->tag, pull);
  update_progress_source (self);
  if (cancellable != NULL)
    pull->cancel_id = g_cancellable_connect (cancellable, G_CALLBACK (pull_cancelled), pull->task, NULL);

  pull_maybe_finish (pull);
}

gboolean
tern_downloader_pull_finish (TernDownloader  *self,
                             GAsyncResult    *result,
                             GError         **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

typedef struct {
  gboolean  done;
  gboolean  ok;
  GError   *error;
} SyncPull;

static void
sync_pull_done (GObject      *source,
                GAsyncResult *result,
                gpointer      data)
{
  SyncPull *sync = data;

  sync->ok = tern_downloader_pull_finish (TERN_DOWNLOADER (source), result, &sync->error);
  sync->done = TRUE;
}

gboolean
tern_downloader_pull (TernDownloader  *self,
                      TernCatalog     *catalog,
                      const char      *tag,
                      GCancellable    *cancellable,
                      GError         **error)
{
  SyncPull sync = { FALSE, FALSE, NULL };

  tern_downloader_pull_async (self, catalog, tag, cancellable, sync_pull_done, &sync);
  while (!sync.done)
    g_main_context_iteration (self->context, TRUE);
  if (sync.error != NULL)
    g_propagate_error (error, sync.error);
  return sync.ok;
}

/* ---- object ------------------------------------------------------------- */

gboolean
tern_downloader_is_pulling (TernDownloader *self,
                            const char     *tag)
{
  g_return_val_if_fail (TERN_IS_DOWNLOADER (self), FALSE);
  return tag != NULL && g_hash_table_contains (self->pulls, tag);
}

gboolean
tern_downloader_get_progress (TernDownloader       *self,
                              const char           *tag,
                              TernDownloadProgress *progress)
{
  Pull *pull;

  g_return_val_if_fail (TERN_IS_DOWNLOADER (self), FALSE);
  pull = tag ? g_hash_table_lookup (self->pulls, tag) : NULL;
  memset (progress, 0, sizeof *progress);
  progress->eta = -1;
  if (pull == NULL)
    return FALSE;
  pull_totals (pull, &progress->done, &progress->total, &progress->checked, &progress->check_total);
  progress->rate = pull->rate;
  if (pull->rate > 1 && progress->total >= progress->done)
    progress->eta = (progress->total - progress->done) / pull->rate;
  return TRUE;
}

void
tern_downloader_cancel (TernDownloader *self,
                        const char     *tag)
{
  Pull *pull;

  g_return_if_fail (TERN_IS_DOWNLOADER (self));
  pull = tag ? g_hash_table_lookup (self->pulls, tag) : NULL;
  if (pull == NULL || pull->task == NULL)
    return;
  /* Said now: a pull of the tag asked for before the cancel has run takes
   * this one's place instead of being refused as a second pull. */
  pull->cancel_asked = TRUE;
  if (g_task_get_cancellable (pull->task) != NULL)
    g_cancellable_cancel (g_task_get_cancellable (pull->task));
  else
    /* Deferred like a cancellable's: the caller may be a "progress"
     * handler, in the middle of walking the pulls. */
    post_to_context (self->context, G_PRIORITY_DEFAULT_IDLE, pull_cancel_in_context,
                     g_object_ref (pull->task), g_object_unref, "[tern] cancel pull");
}

guint64
tern_downloader_get_bytes_received (TernDownloader *self)
{
  return __atomic_load_n (&self->bytes_received, __ATOMIC_RELAXED);
}

guint
tern_downloader_get_peak_transfers (TernDownloader *self)
{
  return (guint) g_atomic_int_get (&self->peak);
}

TernModelStore *
tern_downloader_get_store (TernDownloader *self)
{
  g_return_val_if_fail (TERN_IS_DOWNLOADER (self), NULL);
  return self->store;
}

void
tern_downloader_set_max_concurrent (TernDownloader *self,
                                    guint           n)
{
  g_return_if_fail (TERN_IS_DOWNLOADER (self));
  self->max_concurrent = MAX (n, 1);
  g_thread_pool_set_max_threads (self->pool, (gint) self->max_concurrent, NULL);
}

void
tern_downloader_set_retry (TernDownloader *self,
                           guint           max_attempts,
                           guint           initial_delay_ms,
                           guint           max_delay_ms)
{
  g_return_if_fail (TERN_IS_DOWNLOADER (self));
  self->max_attempts = MAX (max_attempts, 1);
  self->initial_delay_ms = initial_delay_ms;
  self->max_delay_ms = MAX (max_delay_ms, initial_delay_ms);
}

void
tern_downloader_set_timeout (TernDownloader *self,
                             guint           seconds)
{
  g_return_if_fail (TERN_IS_DOWNLOADER (self));
  self->timeout_s = seconds;
  if (self->session != NULL)
    soup_session_set_timeout (self->session, seconds);
}

void
tern_downloader_set_min_rate (TernDownloader *self,
                              guint           bytes,
                              guint           seconds)
{
  g_return_if_fail (TERN_IS_DOWNLOADER (self));
  self->min_rate_bytes = bytes;
  self->min_rate_seconds = seconds;
}

void
tern_downloader_set_free_space_func (TernDownloader    *self,
                                     TernFreeSpaceFunc  func,
                                     gpointer           user_data,
                                     GDestroyNotify     destroy)
{
  g_return_if_fail (TERN_IS_DOWNLOADER (self));
  if (self->free_space_destroy != NULL)
    self->free_space_destroy (self->free_space_data);
  self->free_space = func;
  self->free_space_data = user_data;
  self->free_space_destroy = destroy;
}

static void
tern_downloader_dispose (GObject *object)
{
  TernDownloader *self = TERN_DOWNLOADER (object);

  /* Jobs and pulls hold references: by now none is running. */
  if (self->pool != NULL)
    {
      g_thread_pool_free (self->pool, TRUE, TRUE);
      self->pool = NULL;
    }
  if (self->progress_source != NULL)
    {
      g_source_destroy (self->progress_source);
      g_clear_pointer (&self->progress_source, g_source_unref);
    }
  if (self->session != NULL)
    soup_session_abort (self->session);
  g_clear_object (&self->session);
  G_OBJECT_CLASS (tern_downloader_parent_class)->dispose (object);
}

static void
tern_downloader_finalize (GObject *object)
{
  TernDownloader *self = TERN_DOWNLOADER (object);

  tern_downloader_set_free_space_func (self, NULL, NULL, NULL);
  g_hash_table_unref (self->jobs);
  g_hash_table_unref (self->pulls);
  g_ptr_array_unref (self->winding);
  g_clear_object (&self->store);
  g_main_context_unref (self->context);
  G_OBJECT_CLASS (tern_downloader_parent_class)->finalize (object);
}

static void
tern_downloader_class_init (TernDownloaderClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = tern_downloader_dispose;
  object_class->finalize = tern_downloader_finalize;

  signals[SIGNAL_PROGRESS] =
    g_signal_new ("progress", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 5, G_TYPE_STRING, G_TYPE_UINT64, G_TYPE_UINT64, G_TYPE_DOUBLE,
                  G_TYPE_DOUBLE);
  /* (tag, file name): the file is being downloaded by another program and
   * this pull waits for it; (tag, NULL): it no longer waits. */
  signals[SIGNAL_WAITING] =
    g_signal_new ("waiting", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_STRING);
  signals[SIGNAL_PULL_FINISHED] =
    g_signal_new ("pull-finished", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 3, G_TYPE_STRING, G_TYPE_STRING, G_TYPE_ERROR | G_SIGNAL_TYPE_STATIC_SCOPE);
}

static void
tern_downloader_init (TernDownloader *self)
{
  self->context = g_main_context_ref_thread_default ();
  self->jobs = g_hash_table_new (g_str_hash, g_str_equal);
  self->pulls = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) pull_free);
  self->winding = g_ptr_array_new_with_free_func ((GDestroyNotify) pull_free);
  self->max_concurrent = 2;
  self->max_attempts = 5;
  self->initial_delay_ms = 1000;
  self->max_delay_ms = 30000;
  self->timeout_s = 30;
  self->min_rate_bytes = MIN_RATE_BYTES;
  self->min_rate_seconds = MIN_RATE_SECONDS;
  self->pool = g_thread_pool_new (pool_func, self, (gint) self->max_concurrent, FALSE, NULL);
}

TernDownloader *
tern_downloader_new (TernModelStore *store)
{
  TernDownloader *self;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (store), NULL);
  self = g_object_new (TERN_TYPE_DOWNLOADER, NULL);
  self->store = g_object_ref (store);
  return self;
}
