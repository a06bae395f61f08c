/* tern-hub.c: Hugging Face references resolved into a one-tag catalog.
 *
 * The Hub answers GET /api/models/OWNER/REPO/revision/REV?blobs=true with
 * the commit the revision points to ("sha") and the repository's files
 * ("siblings": rfilename, size, lfs {sha256, size}). Resolving pins the
 * download URLs to that commit, so the files cannot change under a resumed
 * download, and the catalog carries each file's size and LFS sha256, so the
 * downloader verifies them as it does the shipped catalog's. */
#include "tern-hub.h"
#include "tern-manager-private.h"
#include "tern.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>

#define HUB_DEFAULT_ENDPOINT "https://huggingface.co"
#define HUB_DEFAULT_QUANT "Q4_K_M"
#define HUB_NAME_MAX 96
#define HUB_ANSWER_MAX (16u << 20)  /* a repository listing, not a model */
/* The listing nests 4 levels (answer, siblings, file, lfs); the model card
 * data beside it a few more. Deeper is refused before json-glib, whose
 * parser recurses once per level. */
#define HUB_ANSWER_MAX_DEPTH 64

typedef struct {
  char *base;      /* API and download origin, no trailing '/' */
  char *owner;
  char *repo;
  char *quant;     /* NULL when a file is named */
  char *revision;  /* "main" unless a URL names one */
  char *file;      /* path in the repository, or NULL */
} HubRef;

static void
hub_ref_clear (HubRef *ref)
{
  g_free (ref->base);
  g_free (ref->owner);
  g_free (ref->repo);
  g_free (ref->quant);
  g_free (ref->revision);
  g_free (ref->file);
  memset (ref, 0, sizeof *ref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (HubRef, hub_ref_clear)

static char *
hub_endpoint (void)
{
  const char *env = g_getenv ("HF_ENDPOINT");
  char *base = g_strdup (env != NULL && env[0] != '\0' ? env : HUB_DEFAULT_ENDPOINT);
  size_t n = strlen (base);

  while (n > 0 && base[n - 1] == '/')
    base[--n] = '\0';
  return base;
}

/* The Hub's names: letters, digits, '-', '_', '.', not starting with '.'. */
static gboolean
hub_name_ok (const char *name,
             gsize       max)
{
  gsize n = strlen (name);

  if (n == 0 || n > max || name[0] == '.' || strstr (name, "..") != NULL)
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!g_ascii_isalnum (name[i]) && !strchr ("-_.", name[i]))
      return FALSE;
  return TRUE;
}

gboolean
tern_hub_is_ref (const char *text)
{
  if (text == NULL)
    return FALSE;
  if (g_str_has_prefix (text, "hf.co/") || g_str_has_prefix (text, "huggingface.co/"))
    return TRUE;
  return (g_str_has_prefix (text, "https://") || g_str_has_prefix (text, "http://"))
         && (strstr (text, "/resolve/") != NULL || strstr (text, "/blob/") != NULL);
}

static gboolean
parse_ref (const char  *text,
           HubRef      *ref,
           GError     **error)
{
  const char *rest = NULL;

  memset (ref, 0, sizeof *ref);
  if (g_str_has_prefix (text, "hf.co/"))
    rest = text + strlen ("hf.co/");
  else if (g_str_has_prefix (text, "huggingface.co/"))
    rest = text + strlen ("huggingface.co/");

  if (rest != NULL)
    {
      g_auto(GStrv) parts = g_strsplit (rest, "/", -1);
      const char *colon;

      if (g_strv_length (parts) != 2)
        goto malformed;
      colon = strchr (parts[1], ':');
      ref->owner = g_strdup (parts[0]);
      ref->repo = colon ? g_strndup (parts[1], (gsize) (colon - parts[1])) : g_strdup (parts[1]);
      ref->quant = g_strdup (colon ? colon + 1 : HUB_DEFAULT_QUANT);
      ref->revision = g_strdup ("main");
      ref->base = hub_endpoint ();
      if (!hub_name_ok (ref->quant, 32))
        goto malformed;
    }
  else
    {
      g_autoptr(GUri) uri = g_uri_parse (text, G_URI_FLAGS_ENCODED, NULL);
      g_auto(GStrv) parts = NULL;
      g_autofree char *path = NULL;
      guint n;

      if (uri == NULL || g_uri_get_host (uri) == NULL || g_uri_get_query (uri) != NULL)
        goto malformed;
      path = g_uri_unescape_string (g_uri_get_path (uri), NULL);
      if (path == NULL || path[0] != '/')
        goto malformed;
      parts = g_strsplit (path + 1, "/", -1);
      n = g_strv_length (parts);
      /* OWNER/REPO/resolve/REV/FILE... */
      if (n < 5 || (!g_str_equal (parts[2], "resolve") && !g_str_equal (parts[2], "blob")))
        goto malformed;
      ref->owner = g_strdup (parts[0]);
      ref->repo = g_strdup (parts[1]);
      ref->revision = g_strdup (parts[3]);
      ref->file = g_strjoinv ("/", parts + 4);
      ref->base = g_uri_get_port (uri) > 0
                    ? g_strdup_printf ("%s://%s:%d", g_uri_get_scheme (uri), g_uri_get_host (uri), g_uri_get_port (uri))
                    : g_strdup_printf ("%s://%s", g_uri_get_scheme (uri), g_uri_get_host (uri));
      if (!hub_name_ok (ref->revision, 64) || !g_str_has_suffix (ref->file, ".gguf"))
        goto malformed;
      for (guint i = 4; i < n; i++)
        if (!hub_name_ok (parts[i], 200))
          goto malformed;
    }
  if (!hub_name_ok (ref->owner, HUB_NAME_MAX) || !hub_name_ok (ref->repo, HUB_NAME_MAX))
    goto malformed;
  return TRUE;

malformed:
  hub_ref_clear (ref);
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
               _("'%s' is not a Hugging Face reference: write hf.co/OWNER/REPO[:QUANT] "
               "or https://huggingface.co/OWNER/REPO/resolve/REVISION/FILE.gguf"), text);
  return FALSE;
}

/* Lowercase, and anything outside [a-z0-9._-] as '-': a catalog tag name. */
static void
append_tag_part (GString    *out,
                 const char *text)
{
  for (const char *p = text; *p; p++)
    {
      char c = g_ascii_tolower (*p);

      g_string_append_c (out, g_ascii_isalnum (c) || c == '.' || c == '_' || c == '-' ? c : '-');
    }
}

/* A catalog tag's NAME (after "hf:") is at most 64 bytes and starts with a
 * letter or a digit (tern-catalog.c); the Hub's names allow more (96 bytes
 * each for owner and repository, 200 for a file's, a leading '-' or '_').
 * A NAME that does not fit keeps what fits of its start and ends in 16 hex
 * digits of its SHA-256, so that two references still get two tags. */
#define HUB_TAG_NAME_MAX 64
#define HUB_TAG_HASH_LEN 16

static void
fit_tag_name (GString *tag,
              gsize    at)
{
  const char *name = tag->str + at;
  gsize n = tag->len - at;
  gsize skip = 0;
  g_autofree char *hash = NULL;

  if (n <= HUB_TAG_NAME_MAX && n > 0 && g_ascii_isalnum (name[0]))
    return;
  hash = g_compute_checksum_for_string (G_CHECKSUM_SHA256, name, (gssize) n);
  while (skip < n && !g_ascii_isalnum (name[skip]))
    skip++;
  g_string_erase (tag, (gssize) at, (gssize) skip);
  n -= skip;
  if (n > HUB_TAG_NAME_MAX - HUB_TAG_HASH_LEN - 1)
    g_string_truncate (tag, at + HUB_TAG_NAME_MAX - HUB_TAG_HASH_LEN - 1);
  if (tag->len > at)
    g_string_append_c (tag, '-');
  g_string_append_len (tag, hash, HUB_TAG_HASH_LEN);
}

static char *
tag_for (const HubRef *ref)
{
  GString *tag = g_string_new ("hf:");

  append_tag_part (tag, ref->owner);
  g_string_append (tag, "--");
  append_tag_part (tag, ref->repo);
  g_string_append (tag, "--");
  if (ref->file != NULL)
    {
      g_autofree char *base = g_path_get_basename (ref->file);

      base[strlen (base) - strlen (".gguf")] = '\0';
      append_tag_part (tag, base);
    }
  else
    append_tag_part (tag, ref->quant);
  fit_tag_name (tag, strlen ("hf:"));
  return g_string_free (tag, FALSE);
}

char *
tern_hub_tag_for_ref (const char  *ref_text,
                      GError     **error)
{
  g_auto(HubRef) ref = { 0 };

  if (!parse_ref (ref_text, &ref, error))
    return NULL;
  return tag_for (&ref);
}

char *
tern_hub_authorization_for (const char *url)
{
  const char *token = g_getenv ("HF_TOKEN");
  g_autofree char *endpoint = hub_endpoint ();
  g_autoptr(GUri) target = NULL;
  g_autoptr(GUri) hub = NULL;
  g_autofree char *trimmed = g_strstrip (g_strdup (token ? token : ""));

  if (trimmed[0] == '\0')
    return NULL;
  target = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);
  hub = g_uri_parse (endpoint, G_URI_FLAGS_ENCODED, NULL);
  if (target == NULL || g_uri_get_host (target) == NULL)
    return NULL;
  /* The scheme too: a redirect from https to http://huggingface.co (or to
   * the endpoint's host over http) would send the token in clear text. */
  if ((hub != NULL && g_uri_get_host (hub) != NULL
       && g_ascii_strcasecmp (g_uri_get_host (target), g_uri_get_host (hub)) == 0
       && g_uri_get_port (target) == g_uri_get_port (hub)
       && g_ascii_strcasecmp (g_uri_get_scheme (target), g_uri_get_scheme (hub)) == 0)
      || (g_ascii_strcasecmp (g_uri_get_host (target), "huggingface.co") == 0
          && g_ascii_strcasecmp (g_uri_get_scheme (target), "https") == 0))
    return g_strdup_printf ("Bearer %s", trimmed);
  return NULL;
}

/* One file of the repository, from the API's "siblings". */
typedef struct {
  char    *path;    /* rfilename */
  guint64  size;
  char    *sha256;  /* LFS oid; NULL for a file kept in git itself */
} HubFile;

static void
hub_file_free (HubFile *f)
{
  g_free (f->path);
  g_free (f->sha256);
  g_free (f);
}

static gboolean
is_gguf (const char *path)
{
  return g_str_has_suffix (path, ".gguf") || g_str_has_suffix (path, ".GGUF");
}

static gboolean
is_mmproj (const char *path)
{
  g_autofree char *lower = g_ascii_strdown (path, -1);

  return strstr (lower, "mmproj") != NULL;
}

/* "name-00002-of-00003.gguf": part 2 of 3; FALSE for a file in one piece. */
static gboolean
split_part (const char *path,
            guint      *part,
            guint      *count)
{
  size_t n = strlen (path);
  const char *s;

  /* "-NNNNN-of-NNNNN.gguf" is 20 characters. */
  if (n < 20)
    return FALSE;
  s = path + n - 20;
  if (s[0] != '-' || strncmp (s + 6, "-of-", 4) != 0 || g_ascii_strcasecmp (s + 15, ".gguf") != 0)
    return FALSE;
  for (int i = 1; i <= 5; i++)
    if (!g_ascii_isdigit (s[i]) || !g_ascii_isdigit (s[9 + i]))
      return FALSE;
  *part = (guint) g_ascii_strtoull (s + 1, NULL, 10);
  *count = (guint) g_ascii_strtoull (s + 10, NULL, 10);
  return *part >= 1 && *part <= *count;
}

/* The quantization as a whole word of the file name: "Q4_K" is in
 * "x-Q4_K.gguf" but not in "x-Q4_K_M.gguf". */
static gboolean
names_quant (const char *path,
             const char *quant)
{
  g_autofree char *base = g_path_get_basename (path);
  g_autofree char *upper = g_ascii_strup (base, -1);
  g_autofree char *q = g_ascii_strup (quant, -1);
  size_t qn = strlen (q);

  for (const char *p = strstr (upper, q); p != NULL; p = strstr (p + 1, q))
    {
      gboolean start = p == upper || !(g_ascii_isalnum (p[-1]) || p[-1] == '_');
      gboolean end = !(g_ascii_isalnum (p[qn]) || p[qn] == '_');

      if (start && end)
        return TRUE;
    }
  return FALSE;
}

/* The quantization a file name ends with ("Q4_K_M" of "x-Q4_K_M.gguf"), for
 * telling the user what the repository has. */
static char *
quant_of (const char *path)
{
  g_autofree char *base = g_path_get_basename (path);
  guint part, count;
  char *end, *start;

  if (split_part (base, &part, &count))
    base[strlen (base) - 20] = '\0';
  else if ((end = strrchr (base, '.')) != NULL)
    *end = '\0';
  start = MAX (strrchr (base, '-'), strrchr (base, '.'));
  return g_strdup (start ? start + 1 : base);
}

static char *
file_url (const HubRef *ref,
          const char   *commit,
          const char   *path)
{
  g_autofree char *escaped = g_uri_escape_string (path, "/", FALSE);

  return g_strdup_printf ("%s/%s/%s/resolve/%s/%s", ref->base, ref->owner, ref->repo, commit, escaped);
}

/* libsoup's 30 s time-out is for silence: a server that drips its answer a
 * byte every few seconds held `tern-cli search` (and the Models panel's
 * search) forever. The whole answer gets hub_deadline_s; a watchdog thread
 * cancels the request's own cancellable then. */
static guint hub_deadline_s = 60;

void
tern_hub_set_deadline (guint seconds)
{
  hub_deadline_s = seconds;
}

typedef struct {
  GMutex        lock;
  GCond         cond;
  gboolean      done;
  gboolean      fired;
  gint64        until;
  GCancellable *cancel;
} HubWatchdog;

static gpointer
hub_watchdog_main (gpointer data)
{
  HubWatchdog *w = data;

  g_mutex_lock (&w->lock);
  while (!w->done)
    if (!g_cond_wait_until (&w->cond, &w->lock, w->until) && !w->done)
      {
        w->fired = TRUE;
        g_cancellable_cancel (w->cancel);
        break;
      }
  g_mutex_unlock (&w->lock);
  return NULL;
}

static void
on_caller_cancelled (GCancellable *caller,
                     gpointer      own)
{
  (void) caller;
  g_cancellable_cancel (G_CANCELLABLE (own));
}

static GBytes *hub_get_within (const char    *url,
                               gsize          max,
                               GCancellable  *cancellable,
                               SoupMessage  **msg_out,
                               gboolean      *too_big,
                               GError       **error);

/* hub_get_within, given hub_deadline_s for the whole answer: after it, the
 * error is G_IO_ERROR_TIMED_OUT (the caller's own cancel stays CANCELLED). */
static GBytes *
hub_get (const char    *url,
         gsize          max,
         GCancellable  *cancellable,
         SoupMessage  **msg_out,
         gboolean      *too_big,
         GError       **error)
{
  g_autoptr(GCancellable) own = g_cancellable_new ();
  HubWatchdog w = { .until = g_get_monotonic_time () + (gint64) hub_deadline_s * G_TIME_SPAN_SECOND,
                    .cancel = own };
  gulong link = cancellable != NULL
                  ? g_cancellable_connect (cancellable, G_CALLBACK (on_caller_cancelled), own, NULL)
                  : 0;
  GThread *dog;
  GError *local_error = NULL;
  GBytes *body;

  g_mutex_init (&w.lock);
  g_cond_init (&w.cond);
  dog = g_thread_new ("tern-hub-deadline", hub_watchdog_main, &w);
  body = hub_get_within (url, max, own, msg_out, too_big, &local_error);
  g_mutex_lock (&w.lock);
  w.done = TRUE;
  g_cond_signal (&w.cond);
  g_mutex_unlock (&w.lock);
  g_thread_join (dog);
  if (cancellable != NULL)
    g_cancellable_disconnect (cancellable, link);
  if (local_error != NULL && w.fired && !g_cancellable_is_cancelled (cancellable))
    {
      g_clear_error (&local_error);
      g_set_error (&local_error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                   _("no whole answer within %u s"), hub_deadline_s);
    }
  g_mutex_clear (&w.lock);
  g_cond_clear (&w.cond);
  if (local_error != NULL)
    g_propagate_error (error, local_error);
  return body;
}

/* A GET to the Hub (or the mirror HF_ENDPOINT names) with the token when
 * the URL is the Hub's. The body is read only when the status is 200, and
 * at most max bytes of it: a larger answer (Content-Length or counted) sets
 * *too_big and returns NULL without an error. A request that failed to
 * complete returns NULL with the transport's error. */
static GBytes *
hub_get_within (const char    *url,
                gsize          max,
                GCancellable  *cancellable,
                SoupMessage  **msg_out,
                gboolean      *too_big,
                GError       **error)
{
  g_autoptr(SoupSession) session = NULL;
  g_autoptr(SoupMessage) msg = soup_message_new (SOUP_METHOD_GET, url);
  g_autoptr(GProxyResolver) proxy = tern_manager_proxy_resolver_from_env ();
  g_autofree char *auth = tern_hub_authorization_for (url);
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GByteArray) body = NULL;
  goffset length;

  *too_big = FALSE;
  *msg_out = NULL;
  if (msg == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, _("cannot request '%s'"), url);
      return NULL;
    }
  session = soup_session_new_with_options ("timeout", 30, NULL);
  tern_manager_session_init (session);
  if (proxy != NULL)
    soup_session_set_proxy_resolver (session, proxy);
  if (auth != NULL)
    soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", auth);
  soup_message_headers_replace (soup_message_get_request_headers (msg), "Accept", "application/json");
  tern_manager_refuse_downgrades (msg);
  stream = soup_session_send (session, msg, cancellable, error);
  if (stream == NULL)
    return NULL;
  if (tern_manager_refused_downgrade (msg, error))
    {
      g_input_stream_close (stream, NULL, NULL);
      return NULL;
    }
  *msg_out = g_object_ref (msg);
  if (soup_message_get_status (msg) != SOUP_STATUS_OK)
    {
      g_input_stream_close (stream, NULL, NULL);
      return g_bytes_new (NULL, 0);
    }
  length = soup_message_headers_get_content_length (soup_message_get_response_headers (msg));
  if (length > 0 && (guint64) length > max)
    {
      *too_big = TRUE;
      g_input_stream_close (stream, NULL, NULL);
      return NULL;
    }
  body = g_byte_array_sized_new (length > 0 ? (guint) length : 65536);
  for (;;)
    {
      guint8 buffer[65536];
      gssize n = g_input_stream_read (stream, buffer, sizeof buffer, cancellable, error);

      if (n < 0)
        {
          g_clear_object (msg_out);
          return NULL;
        }
      if (n == 0)
        break;
      if (body->len + (gsize) n > max)
        {
          /* Not read to the end: the connection is dropped, not drained. */
          *too_big = TRUE;
          g_input_stream_close (stream, NULL, NULL);
          return NULL;
        }
      g_byte_array_append (body, buffer, (guint) n);
    }
  g_input_stream_close (stream, NULL, NULL);
  return g_byte_array_free_to_bytes (g_steal_pointer (&body));
}

/* The body as JSON whose root has the type wanted, after tn_json_check:
 * json-glib takes C's escapes ("\\101") and makes bytes of them that need
 * not be UTF-8 (a hostile HF_ENDPOINT's labels in the Models panel), and
 * recurses once per level. A NUL would cut a name short. What the check
 * refuses goes to *why (the answer named as from), a message to show. */
static JsonNode *
hub_parse (GBytes       *body,
           guint         max_depth,
           JsonNodeType  want,
           const char   *from,
           char        **why)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  const char *data = g_bytes_get_data (body, NULL);
  gsize size = g_bytes_get_size (body);
  tn_error check = { 0 };
  JsonNode *root;

  if (tn_json_check (data, size, from, max_depth,
                     TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS | TN_JSON_NO_HUGE_INTEGERS,
                     &check) != TN_OK)
    {
      *why = tern_manager_engine_message (&check);
      return NULL;
    }
  if (!json_parser_load_from_data (parser, data, (gssize) size, NULL))
    return NULL;
  root = json_parser_get_root (parser);
  if (root == NULL || JSON_NODE_TYPE (root) != want)
    return NULL;
  return json_node_copy (root);
}

static JsonNode *api_answer (const HubRef  *ref,
                             GBytes        *body,
                             const char    *url,
                             GError       **error);

/* The server's reason phrase inside our sentence: it may be any bytes
 * (not UTF-8, ESC), which the Models panel and a terminal would take as
 * they are. */
static char *
shown_reason (const char *reason)
{
  GString *shown = g_string_new (NULL);

  tern_manager_append_shown (shown, reason != NULL ? reason : "");
  return g_string_free (shown, FALSE);
}

/* What the listing's answer with HTTP `status` comes to: its JSON object,
 * or the error that status means. with_token: HF_TOKEN was sent. */
static JsonNode *
api_response (const HubRef  *ref,
              guint          status,
              const char    *reason,
              const char    *retry_after,
              GBytes        *body,
              const char    *url,
              gboolean       with_token,
              GError       **error)
{
  if (status == SOUP_STATUS_UNAUTHORIZED || status == SOUP_STATUS_FORBIDDEN)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("%s/%s: HTTP %u: the repository is gated or private%s"), ref->owner, ref->repo, status,
                   /* Translators: the end of "OWNER/REPO: HTTP 403: the repository is gated or private" */
                   with_token ? _(" and this token (HF_TOKEN) has no access to it")
                        /* Translators: the end of "OWNER/REPO: HTTP 403: the repository is gated or private" */
                        : _(": accept its terms on the Hub, then set HF_TOKEN to an access token"));
      return NULL;
    }
  if (status == SOUP_STATUS_NOT_FOUND)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
                   _("%s/%s: no such repository or revision '%s' on %s"), ref->owner, ref->repo, ref->revision,
                   ref->base);
      return NULL;
    }
  if (status == 429 || (status == SOUP_STATUS_SERVICE_UNAVAILABLE && retry_after != NULL))
    {
      g_autofree char *wait = tern_manager_wait_advice (retry_after);

      /* Translators: the end is "it asks to wait 30 seconds before trying
       * again" or "try again in a moment" */
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP, _("%s/%s: the Hugging Face API at %s is busy (HTTP %u): %s"),
                   ref->owner, ref->repo, ref->base, status, wait);
      return NULL;
    }
  if (status != SOUP_STATUS_OK)
    {
      g_autofree char *said = shown_reason (reason);

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP, _("%s/%s: HTTP %u %s from %s"),
                   ref->owner, ref->repo, status, said, url);
      return NULL;
    }
  return api_answer (ref, body, url, error);
}

static JsonNode *
api_get (const HubRef  *ref,
         GCancellable  *cancellable,
         GError       **error)
{
  g_autofree char *url = g_strdup_printf ("%s/api/models/%s/%s/revision/%s?blobs=true", ref->base,
                                          ref->owner, ref->repo, ref->revision);
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GBytes) body = NULL;
  g_autofree char *auth = tern_hub_authorization_for (url);
  g_autoptr(GError) local_error = NULL;
  gboolean too_big;

  body = hub_get (url, HUB_ANSWER_MAX, cancellable, &msg, &too_big, &local_error);
  if (body == NULL && !too_big)
    {
      if (g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      g_set_error (error, TERN_MANAGER_ERROR,
                   tern_manager_unreachable (local_error) ? TERN_MANAGER_ERROR_OFFLINE : TERN_MANAGER_ERROR_NETWORK,
                   _("%s/%s: cannot reach the Hugging Face API at %s: %s"), ref->owner, ref->repo, ref->base,
                   local_error->message);
      return NULL;
    }
  return api_response (ref, msg != NULL ? soup_message_get_status (msg) : SOUP_STATUS_OK,
                       msg != NULL ? soup_message_get_reason_phrase (msg) : NULL,
                       msg != NULL ? soup_message_headers_get_one (soup_message_get_response_headers (msg),
                                                                   "Retry-After")
                                   : NULL,
                       body, url, auth != NULL, error);
}

/* The listing's answer as JSON: the object it documents, or NULL with an
 * error that says what it is instead. */
static JsonNode *
api_answer (const HubRef  *ref,
            GBytes        *body,
            const char    *url,
            GError       **error)
{
  g_autofree char *why = NULL;
  JsonNode *root;

  root = body != NULL ? hub_parse (body, HUB_ANSWER_MAX_DEPTH, JSON_NODE_OBJECT, url, &why) : NULL;
  if (root == NULL && why != NULL)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("%s/%s: the Hub's answer is not the JSON object it documents: %s"), ref->owner, ref->repo, why);
      return NULL;
    }
  if (root == NULL)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("%s/%s: the Hub's answer from %s is not the JSON object it documents"), ref->owner, ref->repo,
                   url);
      return NULL;
    }
  return root;
}

/* The siblings, type-checked: a missing or odd field is the Hub's mistake,
 * and a file with no usable name or size is skipped rather than guessed. */
static GPtrArray *
read_siblings (JsonObject *info)
{
  GPtrArray *files = g_ptr_array_new_with_free_func ((GDestroyNotify) hub_file_free);
  JsonNode *node = json_object_get_member (info, "siblings");
  JsonArray *siblings;

  if (node == NULL || !JSON_NODE_HOLDS_ARRAY (node))
    return files;
  siblings = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (siblings); i++)
    {
      JsonNode *s = json_array_get_element (siblings, i);
      JsonObject *o;
      JsonNode *name, *size, *lfs;
      HubFile *f;

      if (!JSON_NODE_HOLDS_OBJECT (s))
        continue;
      o = json_node_get_object (s);
      name = json_object_get_member (o, "rfilename");
      if (name == NULL || json_node_get_value_type (name) != G_TYPE_STRING)
        continue;
      f = g_new0 (HubFile, 1);
      f->path = g_strdup (json_node_get_string (name));
      size = json_object_get_member (o, "size");
      if (size != NULL && json_node_get_value_type (size) == G_TYPE_INT64 && json_node_get_int (size) > 0)
        f->size = (guint64) json_node_get_int (size);
      lfs = json_object_get_member (o, "lfs");
      if (lfs != NULL && JSON_NODE_HOLDS_OBJECT (lfs))
        {
          JsonObject *l = json_node_get_object (lfs);
          JsonNode *sha = json_object_get_member (l, "sha256");
          JsonNode *lsize = json_object_get_member (l, "size");

          if (sha != NULL && json_node_get_value_type (sha) == G_TYPE_STRING
              && tern_manager_is_sha256 (json_node_get_string (sha)))
            f->sha256 = g_ascii_strdown (json_node_get_string (sha), -1);
          if (f->size == 0 && lsize != NULL && json_node_get_value_type (lsize) == G_TYPE_INT64
              && json_node_get_int (lsize) > 0)
            f->size = (guint64) json_node_get_int (lsize);
        }
      g_ptr_array_add (files, f);
    }
  return files;
}

static gint
compare_paths (gconstpointer a,
               gconstpointer b)
{
  return g_strcmp0 ((*(HubFile * const *) a)->path, (*(HubFile * const *) b)->path);
}

/* Names listed in an error: a repository may hold thousands of GGUF files
 * (a hostile listing of 20000 made a 2 MB one-line message); the first few
 * say what is wrong, the count says the rest. */
#define HUB_NAMES_SHOWN 12

static void
names_add (GString    *names,
           guint      *n,
           const char *name)
{
  if (*n < HUB_NAMES_SHOWN)
    {
      if (*n)
        g_string_append (names, ", ");
      tern_manager_append_shown (names, name);
    }
  (*n)++;
}

static void
names_end (GString *names,
           guint    n)
{
  if (n > HUB_NAMES_SHOWN)
    g_string_append_printf (names, ", … +%u", n - HUB_NAMES_SHOWN);
}

/* The model's files: the one named, or those of the quantization (every
 * part of a split file). NULL with an error that lists what there is. */
static GPtrArray *
pick_model_files (const HubRef  *ref,
                  GPtrArray     *files,
                  GError       **error)
{
  g_autoptr(GPtrArray) picked = g_ptr_array_new ();
  g_autoptr(GString) have = g_string_new (NULL);
  g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  guint count = 0;
  guint n_have = 0;

  for (guint i = 0; i < files->len; i++)
    {
      HubFile *f = files->pdata[i];

      if (!is_gguf (f->path) || is_mmproj (f->path))
        continue;
      if (ref->file != NULL ? g_str_equal (f->path, ref->file) : names_quant (f->path, ref->quant))
        g_ptr_array_add (picked, f);
      else
        {
          char *q = quant_of (f->path);

          if (!g_hash_table_contains (seen, q))
            {
              names_add (have, &n_have, q);
              g_hash_table_add (seen, q);
            }
          else
            g_free (q);
        }
    }
  names_end (have, n_have);
  if (picked->len == 0)
    {
      if (ref->file != NULL)
        g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
                     _("%s/%s has no file %s at %s"), ref->owner, ref->repo, ref->file, ref->revision);
      else
        g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
                     _("%s/%s has no %s GGUF file%s%s"), ref->owner, ref->repo, ref->quant,
                     /* Translators: the end of "OWNER/REPO has no Q4_K_M GGUF file", before a list of files */
                     have->len ? _("; it has: ") : _(" (it has no GGUF files at all)"), have->str);
      return NULL;
    }
  g_ptr_array_sort (picked, compare_paths);

  /* A split model is every part of one set, and nothing else. */
  for (guint i = 0; i < picked->len; i++)
    {
      guint part, parts;
      HubFile *f = picked->pdata[i];

      if (split_part (f->path, &part, &parts))
        {
          if (count == 0)
            count = parts;
          if (parts != count || part != i + 1)
            count = G_MAXUINT;
        }
      else if (picked->len > 1)
        count = G_MAXUINT;
    }
  if (count == G_MAXUINT || (count > 0 && count != picked->len))
    {
      g_autoptr(GString) names = g_string_new (NULL);
      guint n_names = 0;

      for (guint i = 0; i < picked->len; i++)
        names_add (names, &n_names, ((HubFile *) picked->pdata[i])->path);
      names_end (names, n_names);
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
                   _("%s/%s: %s names more than one model (%s); name the file with its URL instead"),
                   ref->owner, ref->repo, ref->quant, names->str);
      return NULL;
    }
  return g_steal_pointer (&picked);
}

/* A path in the repository that a file's URL names as it is: every part a
 * name parse_ref takes. A listed "a/../b.gguf" made a URL that reads as
 * "b.gguf", another file or none. */
static gboolean
url_path_ok (const char *path)
{
  g_auto(GStrv) parts = g_strsplit (path, "/", -1);

  for (guint i = 0; parts[i] != NULL; i++)
    if (!hub_name_ok (parts[i], 200))
      return FALSE;
  return TRUE;
}

/* A file whose name the store can keep (the catalog's plain file name). */
static gboolean
storable_name (const char *path)
{
  g_autofree char *name = g_path_get_basename (path);

  return tern_manager_safe_name (name);
}

/* The vision projector: an F16 mmproj when there is one (what llama.cpp's
 * -hf takes too), else the first. One whose name the store cannot keep is
 * passed over: the catalog would refuse it, and the model with it. */
static HubFile *
pick_mmproj (GPtrArray *files)
{
  HubFile *best = NULL;

  for (guint i = 0; i < files->len; i++)
    {
      HubFile *f = files->pdata[i];

      if (!is_gguf (f->path) || !is_mmproj (f->path) || !storable_name (f->path))
        continue;
      if (best == NULL || (names_quant (f->path, "f16") && !names_quant (best->path, "f16")))
        best = f;
    }
  return best;
}

static char *
package_id (const HubRef *ref,
            const char   *commit,
            const char   *what)
{
  GString *id = g_string_new ("hf-");

  append_tag_part (id, ref->owner);
  g_string_append (id, "--");
  append_tag_part (id, ref->repo);
  g_string_append_printf (id, "-%.12s-", commit);
  append_tag_part (id, what);
  if (id->len > 200)
    g_string_truncate (id, 200);
  return g_string_free (id, FALSE);
}

static void
add_package (JsonBuilder  *b,
             const HubRef *ref,
             const char   *commit,
             const char   *id,
             const char   *label,
             GPtrArray    *files)
{
  json_builder_set_member_name (b, id);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "label");
  json_builder_add_string_value (b, label);
  json_builder_set_member_name (b, "files");
  json_builder_begin_array (b);
  for (guint i = 0; i < files->len; i++)
    {
      HubFile *f = files->pdata[i];
      g_autofree char *name = g_path_get_basename (f->path);
      g_autofree char *url = file_url (ref, commit, f->path);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "name");
      json_builder_add_string_value (b, name);
      json_builder_set_member_name (b, "url");
      json_builder_add_string_value (b, url);
      json_builder_set_member_name (b, "size");
      if (f->size > 0)
        json_builder_add_int_value (b, (gint64) f->size);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "sha256");
      if (f->sha256 != NULL)
        json_builder_add_string_value (b, f->sha256);
      else
        json_builder_add_null_value (b);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
}

static TernCatalog *resolve_answer (const HubRef  *ref,
                                    const char    *ref_text,
                                    JsonNode      *root,
                                    char         **tag_out,
                                    GError       **error);

TernCatalog *
tern_hub_resolve (const char    *ref_text,
                  GCancellable  *cancellable,
                  char         **tag_out,
                  GError       **error)
{
  g_auto(HubRef) ref = { 0 };
  g_autoptr(JsonNode) root = NULL;

  if (!parse_ref (ref_text, &ref, error))
    return NULL;
  root = api_get (&ref, cancellable, error);
  if (root == NULL)
    return NULL;
  return resolve_answer (&ref, ref_text, root, tag_out, error);
}

TernCatalog *
tern_hub_resolve_from_answer (const char  *ref_text,
                              const char  *answer,
                              gsize        length,
                              char       **tag_out,
                              GError     **error)
{
  return tern_hub_resolve_from_response (ref_text, SOUP_STATUS_OK, "OK", NULL, answer, length, tag_out, error);
}

TernCatalog *
tern_hub_resolve_from_response (const char  *ref_text,
                                guint        status,
                                const char  *reason,
                                const char  *retry_after,
                                const char  *answer,
                                gsize        length,
                                char       **tag_out,
                                GError     **error)
{
  g_auto(HubRef) ref = { 0 };
  g_autoptr(GBytes) body = g_bytes_new (answer, length);
  g_autoptr(JsonNode) root = NULL;

  if (!parse_ref (ref_text, &ref, error))
    return NULL;
  root = api_response (&ref, status, reason, retry_after, body, "answer", FALSE, error);
  if (root == NULL)
    return NULL;
  return resolve_answer (&ref, ref_text, root, tag_out, error);
}

/* The catalog of what the listing `root` says for the reference. */
static TernCatalog *
resolve_answer (const HubRef  *ref,
                const char    *ref_text,
                JsonNode      *root,
                char         **tag_out,
                GError       **error)
{
  g_autoptr(GPtrArray) files = NULL;
  g_autoptr(GPtrArray) model = NULL;
  g_autoptr(GPtrArray) vision = g_ptr_array_new ();
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) catalog_root = NULL;
  g_autofree char *tag = NULL;
  g_autofree char *json = NULL;
  g_autofree char *base_id = NULL;
  g_autofree char *vision_id = NULL;
  g_autofree char *label = NULL;
  g_autofree char *source = NULL;
  JsonNode *sha_node;
  const char *commit;
  HubFile *mmproj;
  TernCatalog *catalog;

  sha_node = json_object_get_member (json_node_get_object (root), "sha");
  if (sha_node == NULL || json_node_get_value_type (sha_node) != G_TYPE_STRING
      || !hub_name_ok (json_node_get_string (sha_node), 64))
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("%s/%s: the Hub's answer names no commit ('sha') for revision %s"), ref->owner, ref->repo,
                   ref->revision);
      return NULL;
    }
  commit = json_node_get_string (sha_node);
  files = read_siblings (json_node_get_object (root));
  model = pick_model_files (ref, files, error);
  if (model == NULL)
    return NULL;
  mmproj = pick_mmproj (files);
  if (mmproj != NULL)
    g_ptr_array_add (vision, mmproj);

  tag = tag_for (ref);
  base_id = package_id (ref, commit, ref->file ? ref->file : ref->quant);
  vision_id = mmproj ? package_id (ref, commit, "mmproj") : NULL;
  label = g_strdup_printf ("%s/%s %s", ref->owner, ref->repo,
                           ref->file ? ref->file : ref->quant);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "schema");
  json_builder_add_int_value (b, 1);
  json_builder_set_member_name (b, "packages");
  json_builder_begin_object (b);
  add_package (b, ref, commit, base_id, label, model);
  if (vision_id != NULL)
    {
      g_autofree char *vlabel = g_strdup_printf ("%s/%s vision projector", ref->owner, ref->repo);

      add_package (b, ref, commit, vision_id, vlabel, vision);
    }
  json_builder_end_object (b);
  json_builder_set_member_name (b, "families");
  json_builder_begin_array (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "id");
  json_builder_add_string_value (b, "hf");
  json_builder_set_member_name (b, "label");
  json_builder_add_string_value (b, "Hugging Face");
  json_builder_set_member_name (b, "tags");
  json_builder_begin_array (b);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "tag");
  json_builder_add_string_value (b, tag);
  json_builder_set_member_name (b, "label");
  json_builder_add_string_value (b, label);
  json_builder_set_member_name (b, "description");
  {
    /* In the user's language when made: this catalog is built here, its words
     * are in no po entry of models.json (tern-cli pull said it in English). */
    /* Translators: where a Hugging Face model comes from: "From hf.co/OWNER/REPO at
     * revision 1a2b3c..." (the commit) */
    g_autofree char *description = g_strdup_printf (_("From %s/%s/%s at revision %s"), ref->base,
                                                    ref->owner, ref->repo, commit);

    json_builder_add_string_value (b, description);
  }
  json_builder_set_member_name (b, "base");
  json_builder_add_string_value (b, base_id);
  json_builder_set_member_name (b, "vision");
  if (vision_id != NULL)
    json_builder_add_string_value (b, vision_id);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "flags");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "vision");
  json_builder_add_boolean_value (b, vision_id != NULL);
  json_builder_end_object (b);
  json_builder_end_object (b);
  json_builder_end_array (b);
  json_builder_end_object (b);
  json_builder_end_array (b);
  json_builder_end_object (b);

  catalog_root = json_builder_get_root (b);
  json_generator_set_root (gen, catalog_root);
  json = tn_json_escape_unit_separators (json_generator_to_data (gen, NULL), NULL);
  source = g_strdup_printf ("Hugging Face %s", ref_text);
  /* The catalog's own checks apply: a name the store cannot hold, a bad
   * URL or hash is refused here as it would be in a shipped catalog. */
  catalog = tern_catalog_new_from_data (json, -1, source, error);
  if (catalog != NULL && tag_out != NULL)
    *tag_out = g_steal_pointer (&tag);
  return catalog;
}

/* ---- search ----------------------------------------------------------------- */

/* A page of at most TERN_HUB_SEARCH_LIMIT_MAX entries of a few hundred bytes
 * each (tags included); a megabyte is ample, 8 is generous. */
#define HUB_SEARCH_MAX (8u << 20)
/* list, entry, tags, tag: 3 levels; room for what the Hub may add. */
#define HUB_SEARCH_MAX_DEPTH 16
/* The Hub matches substrings of repository names: more is never needed. */
#define HUB_QUERY_MAX 100

void
tern_hub_model_free (TernHubModel *model)
{
  if (model == NULL)
    return;
  g_free (model->id);
  g_free (model);
}

/* "OWNER/REPO" with both names as the Hub allows them. */
static gboolean
repo_id_ok (const char *id)
{
  const char *slash = id ? strchr (id, '/') : NULL;
  g_autofree char *owner = NULL;

  if (slash == NULL || strchr (slash + 1, '/') != NULL)
    return FALSE;
  owner = g_strndup (id, (gsize) (slash - id));
  return hub_name_ok (owner, HUB_NAME_MAX) && hub_name_ok (slash + 1, HUB_NAME_MAX);
}

static guint64
count_member (JsonObject *o,
              const char *name)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL || json_node_get_value_type (n) != G_TYPE_INT64 || json_node_get_int (n) < 0)
    return 0;
  return (guint64) json_node_get_int (n);
}

/* The Hub writes "gated": false, "auto" or "manual". */
static gboolean
gated_member (JsonObject *o)
{
  JsonNode *n = json_object_get_member (o, "gated");

  if (n == NULL || JSON_NODE_TYPE (n) != JSON_NODE_VALUE)
    return FALSE;
  if (json_node_get_value_type (n) == G_TYPE_BOOLEAN)
    return json_node_get_boolean (n);
  if (json_node_get_value_type (n) == G_TYPE_STRING)
    {
      const char *s = json_node_get_string (n);

      return s[0] != '\0' && g_ascii_strcasecmp (s, "false") != 0;
    }
  return FALSE;
}

static const char *
string_member (JsonObject *o,
               const char *name)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL || JSON_NODE_TYPE (n) != JSON_NODE_VALUE || json_node_get_value_type (n) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (n);
}

/* The query as the Hub gets it: trimmed, at most HUB_QUERY_MAX bytes cut at
 * a character's start. NULL when it is not UTF-8. */
static char *
clean_query (const char *query)
{
  g_autofree char *copy = NULL;
  char *end;

  if (query == NULL)
    return g_strdup ("");
  if (!g_utf8_validate (query, -1, NULL))
    return NULL;
  copy = g_strstrip (g_strdup (query));
  if (strlen (copy) > HUB_QUERY_MAX)
    {
      end = g_utf8_find_prev_char (copy, copy + HUB_QUERY_MAX + 1);
      *end = '\0';
    }
  return g_steal_pointer (&copy);
}

static GPtrArray *search_answer (GBytes      *body,
                                 guint        limit,
                                 const char  *url,
                                 const char  *base,
                                 GError     **error);

static GPtrArray *search_response (guint         status,
                                   const char   *reason,
                                   const char   *retry_after,
                                   GBytes       *body,
                                   guint         limit,
                                   const char   *url,
                                   const char   *base,
                                   GError      **error);

GPtrArray *
tern_hub_search_from_answer (const char  *answer,
                             gsize        length,
                             guint        limit,
                             GError     **error)
{
  return tern_hub_search_from_response (SOUP_STATUS_OK, "OK", NULL, answer, length, limit, error);
}

GPtrArray *
tern_hub_search_from_response (guint        status,
                               const char  *reason,
                               const char  *retry_after,
                               const char  *answer,
                               gsize        length,
                               guint        limit,
                               GError     **error)
{
  g_autoptr(GBytes) body = g_bytes_new (answer, length);

  return search_response (status, reason, retry_after, body,
                          limit ? MIN (limit, TERN_HUB_SEARCH_LIMIT_MAX) : TERN_HUB_SEARCH_LIMIT_DEFAULT,
                          "answer", "answer", error);
}

GPtrArray *
tern_hub_search (const char    *query,
                 guint          limit,
                 GCancellable  *cancellable,
                 GError       **error)
{
  g_autofree char *base = hub_endpoint ();
  g_autofree char *clean = clean_query (query);
  g_autofree char *escaped = NULL;
  g_autofree char *url = NULL;
  g_autoptr(SoupMessage) msg = NULL;
  g_autoptr(GBytes) body = NULL;
  g_autoptr(GError) local_error = NULL;
  gboolean too_big;

  if (clean == NULL)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
                   _("the search text is not valid UTF-8"));
      return NULL;
    }
  if (limit == 0)
    limit = TERN_HUB_SEARCH_LIMIT_DEFAULT;
  limit = MIN (limit, TERN_HUB_SEARCH_LIMIT_MAX);
  escaped = g_uri_escape_string (clean, NULL, FALSE);
  url = g_strdup_printf ("%s/api/models?search=%s&filter=gguf&sort=downloads&direction=-1&limit=%u", base,
                         escaped, limit);

  body = hub_get (url, HUB_SEARCH_MAX, cancellable, &msg, &too_big, &local_error);
  if (body == NULL && !too_big)
    {
      if (g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      g_set_error (error, TERN_MANAGER_ERROR,
                   tern_manager_unreachable (local_error) ? TERN_MANAGER_ERROR_OFFLINE : TERN_MANAGER_ERROR_NETWORK,
                   _("cannot reach the Hugging Face search at %s: %s"), base, local_error->message);
      return NULL;
    }
  if (too_big)
    g_clear_pointer (&body, g_bytes_unref);
  return search_response (msg != NULL ? soup_message_get_status (msg) : SOUP_STATUS_OK,
                          msg != NULL ? soup_message_get_reason_phrase (msg) : NULL,
                          msg != NULL ? soup_message_headers_get_one (soup_message_get_response_headers (msg),
                                                                      "Retry-After")
                                      : NULL,
                          body, limit, url, base, error);
}

/* What the search's answer with HTTP `status` comes to; body NULL: it was
 * larger than HUB_SEARCH_MAX. */
static GPtrArray *
search_response (guint         status,
                 const char   *reason,
                 const char   *retry_after,
                 GBytes       *body,
                 guint         limit,
                 const char   *url,
                 const char   *base,
                 GError      **error)
{
  if (status == SOUP_STATUS_UNAUTHORIZED || status == SOUP_STATUS_FORBIDDEN)
    {
      /* The Hub searches without a token; a refusal means the token sent is
       * not (or no longer) valid. */
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("the Hugging Face search at %s refused the request (HTTP %u): check the access token "
                     "in HF_TOKEN"), base, status);
      return NULL;
    }
  if (status == 429 || (status == SOUP_STATUS_SERVICE_UNAVAILABLE && retry_after != NULL))
    {
      g_autofree char *wait = tern_manager_wait_advice (retry_after);

      /* Translators: the end is "it asks to wait 30 seconds before trying
       * again" or "try again in a moment" */
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("the Hugging Face search at %s is busy (HTTP %u): %s"), base, status, wait);
      return NULL;
    }
  if (status != SOUP_STATUS_OK)
    {
      g_autofree char *said = shown_reason (reason);

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("the Hugging Face search at %s answered HTTP %u %s"), base, status, said);
      return NULL;
    }
  if (body == NULL)
    {
      g_autofree char *cap = tern_manager_format_size (HUB_SEARCH_MAX);

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("the Hugging Face search at %s answered with more than %s, which is not a list of "
                     "models"), base, cap);
      return NULL;
    }
  return search_answer (body, limit, url, base, error);
}

/* The models of a search's answer, at most `limit` of them. */
static GPtrArray *
search_answer (GBytes      *body,
               guint        limit,
               const char  *url,
               const char  *base,
               GError     **error)
{
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GPtrArray) models = NULL;
  g_autofree char *why = NULL;
  JsonArray *list;

  root = hub_parse (body, HUB_SEARCH_MAX_DEPTH, JSON_NODE_ARRAY, url, &why);
  if (root == NULL && why != NULL)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("the Hugging Face search did not answer with the list of models it documents: %s"), why);
      return NULL;
    }
  if (root == NULL)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("the Hugging Face search at %s did not answer with the list of models it documents"), base);
      return NULL;
    }

  models = g_ptr_array_new_with_free_func ((GDestroyNotify) tern_hub_model_free);
  list = json_node_get_array (root);
  for (guint i = 0; i < json_array_get_length (list) && models->len < limit; i++)
    {
      JsonNode *e = json_array_get_element (list, i);
      JsonObject *o;
      const char *id;
      TernHubModel *m;

      if (JSON_NODE_TYPE (e) != JSON_NODE_OBJECT)
        continue;
      o = json_node_get_object (e);
      id = string_member (o, "id");
      if (id == NULL)
        id = string_member (o, "modelId");
      /* A name the Hub would not give a repository cannot be pulled, nor
       * shown without doubt about what it is. */
      if (id == NULL || !repo_id_ok (id))
        continue;
      m = g_new0 (TernHubModel, 1);
      m->id = g_strdup (id);
      m->downloads = count_member (o, "downloads");
      m->likes = count_member (o, "likes");
      m->gated = gated_member (o);
      g_ptr_array_add (models, m);
    }
  return g_steal_pointer (&models);
}

typedef struct {
  char  *text;
  guint  limit;
} SearchArgs;

static void
search_args_free (SearchArgs *args)
{
  g_free (args->text);
  g_free (args);
}

static void
search_thread (GTask        *task,
               gpointer      source,
               gpointer      data,
               GCancellable *cancellable)
{
  SearchArgs *args = data;
  GError *error = NULL;
  GPtrArray *models = tern_hub_search (args->text, args->limit, cancellable, &error);

  (void) source;
  if (models == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, models, (GDestroyNotify) g_ptr_array_unref);
}

void
tern_hub_search_async (const char          *query,
                       guint                limit,
                       GCancellable        *cancellable,
                       GAsyncReadyCallback  callback,
                       gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);
  SearchArgs *args = g_new0 (SearchArgs, 1);

  args->text = g_strdup (query);
  args->limit = limit;
  g_task_set_source_tag (task, tern_hub_search_async);
  g_task_set_task_data (task, args, (GDestroyNotify) search_args_free);
  /* A new search replaces the old at once; its thread ends on its own. */
  g_task_set_return_on_cancel (task, TRUE);
  g_task_run_in_thread (task, search_thread);
}

GPtrArray *
tern_hub_search_finish (GAsyncResult  *result,
                        GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- a repository's quantizations -------------------------------------- */

static void
hub_quant_free (TernHubQuant *q)
{
  g_free (q->name);
  g_free (q->ref);
  g_free (q->tag);
  g_free (q);
}

void
tern_hub_repo_free (TernHubRepo *repo)
{
  if (repo == NULL)
    return;
  g_free (repo->id);
  g_free (repo->commit);
  g_clear_pointer (&repo->quants, g_ptr_array_unref);
  g_free (repo);
}

/* The files that one model is made of: one file, or the parts of one split
 * file, which share the name before "-NNNNN-of-NNNNN.gguf". */
static char *
set_key (const char *path)
{
  guint part, count;

  if (split_part (path, &part, &count))
    return g_strndup (path, strlen (path) - 20);
  return g_strdup (path);
}

/* The same files, neither holding one twice. A hash, not a search of b for
 * each of a: a split set may have 99,999 parts. */
static gboolean
same_files (GPtrArray *a,
            GPtrArray *b)
{
  g_autoptr(GHashTable) in_b = NULL;

  if (a->len != b->len)
    return FALSE;
  in_b = g_hash_table_new (NULL, NULL);
  for (guint i = 0; i < b->len; i++)
    g_hash_table_add (in_b, b->pdata[i]);
  for (guint i = 0; i < a->len; i++)
    if (!g_hash_table_contains (in_b, a->pdata[i]))
      return FALSE;
  return TRUE;
}

/* Adds f under each word of its file name (a run of letters, digits and
 * '_', in capitals): the names names_quant finds in it, each once. */
static void
index_words (GHashTable *by_word,
             HubFile    *f)
{
  g_autofree char *base = g_path_get_basename (f->path);
  g_autofree char *upper = g_ascii_strup (base, -1);

  for (const char *p = upper; *p;)
    {
      const char *start = p;
      char *word;
      GPtrArray *named;

      while (*p && (g_ascii_isalnum (*p) || *p == '_'))
        p++;
      if (p == start)
        {
          p++;
          continue;
        }
      word = g_strndup (start, (gsize) (p - start));
      named = g_hash_table_lookup (by_word, word);
      if (named == NULL)
        {
          named = g_ptr_array_new ();
          g_hash_table_insert (by_word, word, named);
        }
      else
        g_free (word);
      if (named->len == 0 || named->pdata[named->len - 1] != f)
        g_ptr_array_add (named, f);
    }
}

/* Every file's name one the store can keep (the catalog refuses others):
 * a reference to the set would only fail once pulled. */
static gboolean
storable (GPtrArray *set)
{
  for (guint i = 0; i < set->len; i++)
    if (!storable_name (((HubFile *) set->pdata[i])->path))
      return FALSE;
  return TRUE;
}

/* A split set with every part, numbered 1..N, once each. */
static gboolean
set_complete (GPtrArray *set)
{
  guint count = 0;
  g_autofree gboolean *seen = NULL;

  for (guint i = 0; i < set->len; i++)
    {
      guint part, parts;

      if (!split_part (((HubFile *) set->pdata[i])->path, &part, &parts))
        return set->len == 1;
      if (count == 0)
        {
          count = parts;
          seen = g_new0 (gboolean, count + 1);
        }
      if (parts != count || seen[part])
        return FALSE;
      seen[part] = TRUE;
    }
  return count == set->len;
}

static gint
compare_quants (gconstpointer a,
                gconstpointer b)
{
  const TernHubQuant *qa = *(TernHubQuant * const *) a;
  const TernHubQuant *qb = *(TernHubQuant * const *) b;

  /* Unknown sizes last. */
  if (qa->size != qb->size)
    return qa->size == 0 ? 1 : qb->size == 0 ? -1 : qa->size < qb->size ? -1 : 1;
  return g_ascii_strcasecmp (qa->name, qb->name);
}

/* The quantizations, each with the reference that pulls exactly its files:
 * hf.co/OWNER/REPO:QUANT when the pull's own choice by that name
 * (pick_model_files) is this set, else the single file's URL at the commit. */
static GPtrArray *
group_quants (const HubRef *ref,
              const char   *commit,
              GPtrArray    *files)
{
  GPtrArray *quants = g_ptr_array_new_with_free_func ((GDestroyNotify) hub_quant_free);
  g_autoptr(GHashTable) sets = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                      (GDestroyNotify) g_ptr_array_unref);
  g_autoptr(GPtrArray) order = g_ptr_array_new ();
  /* Which model files name each word: what pick_model_files would pick for
   * a quantization, found once for all sets. Asking it for each set read
   * the whole listing once per set: a hostile listing of 16 MiB (300,000
   * files) would have taken days. */
  g_autoptr(GHashTable) by_word = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                                         (GDestroyNotify) g_ptr_array_unref);

  for (guint i = 0; i < files->len; i++)
    {
      HubFile *f = files->pdata[i];
      char *key;
      GPtrArray *set;

      if (!is_gguf (f->path) || is_mmproj (f->path))
        continue;
      index_words (by_word, f);
      key = set_key (f->path);
      set = g_hash_table_lookup (sets, key);
      if (set == NULL)
        {
          set = g_ptr_array_new ();
          g_hash_table_insert (sets, key, set);
          g_ptr_array_add (order, key);
        }
      else
        g_free (key);
      g_ptr_array_add (set, f);
    }

  for (guint i = 0; i < order->len; i++)
    {
      GPtrArray *set = g_hash_table_lookup (sets, order->pdata[i]);
      HubFile *first = set->pdata[0];
      g_autofree char *quant = NULL;
      GPtrArray *picked = NULL;
      TernHubQuant *q;

      if (!set_complete (set))
        continue;  /* a part is missing: nothing could open it */
      g_ptr_array_sort (set, compare_paths);
      first = set->pdata[0];
      quant = quant_of (first->path);
      q = g_new0 (TernHubQuant, 1);
      q->n_files = set->len;
      for (guint j = 0; j < set->len; j++)
        {
          HubFile *f = set->pdata[j];

          if (f->size == 0)
            {
              q->size = 0;
              break;
            }
          q->size += f->size;
        }

      /* pick_model_files by this name: the files that have it as a word
       * (a name hub_name_ok takes and quant_of gives has no '-' or '.': it
       * is one word), which are this set (complete, so that its split
       * parts pass pick_model_files' own check). */
      if (hub_name_ok (quant, 32))
        {
          g_autofree char *word = g_ascii_strup (quant, -1);

          picked = g_hash_table_lookup (by_word, word);
        }
      if (picked != NULL && same_files (picked, set) && storable (set))
        {
          q->name = g_ascii_strup (quant, -1);
          q->ref = g_strdup_printf ("hf.co/%s/%s:%s", ref->owner, ref->repo, q->name);
        }
      else
        {
          g_autofree char *base = g_path_get_basename (order->pdata[i]);
          GString *shown = g_string_new (NULL);

          if (g_str_has_suffix (base, ".gguf") || g_str_has_suffix (base, ".GGUF"))
            base[strlen (base) - 5] = '\0';
          /* the listing's name, printed by tern-cli search and shown in
           * the Models panel: escaped as in messages */
          tern_manager_append_shown (shown, base);
          q->name = g_string_free (shown, FALSE);
          if (set->len == 1 && url_path_ok (first->path))
            q->ref = file_url (ref, commit, first->path);
        }
      if (q->ref != NULL)
        q->tag = tern_hub_tag_for_ref (q->ref, NULL);
      if (q->tag == NULL)
        g_clear_pointer (&q->ref, g_free);
      g_ptr_array_add (quants, q);
    }
  g_ptr_array_sort (quants, compare_quants);
  return quants;
}

/* The reference of a repository's main branch, "OWNER/REPO". */
static gboolean
repo_ref (const char  *repo_id,
          HubRef      *ref,
          GError     **error)
{
  if (repo_id == NULL || !repo_id_ok (repo_id))
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
                   _("'%s' is not a Hugging Face repository: write OWNER/REPO"), repo_id ? repo_id : "");
      return FALSE;
    }
  ref->base = hub_endpoint ();
  ref->owner = g_strndup (repo_id, (gsize) (strchr (repo_id, '/') - repo_id));
  ref->repo = g_strdup (strchr (repo_id, '/') + 1);
  ref->revision = g_strdup ("main");
  return TRUE;
}

static TernHubRepo *list_quants_answer (const HubRef  *ref,
                                        const char    *repo_id,
                                        JsonNode      *root,
                                        GError       **error);

TernHubRepo *
tern_hub_list_quants (const char    *repo_id,
                      GCancellable  *cancellable,
                      GError       **error)
{
  g_auto(HubRef) ref = { 0 };
  g_autoptr(JsonNode) root = NULL;

  if (!repo_ref (repo_id, &ref, error))
    return NULL;
  root = api_get (&ref, cancellable, error);
  if (root == NULL)
    return NULL;
  return list_quants_answer (&ref, repo_id, root, error);
}

TernHubRepo *
tern_hub_list_quants_from_answer (const char  *repo_id,
                                  const char  *answer,
                                  gsize        length,
                                  GError     **error)
{
  return tern_hub_list_quants_from_response (repo_id, SOUP_STATUS_OK, "OK", NULL, answer, length, error);
}

TernHubRepo *
tern_hub_list_quants_from_response (const char  *repo_id,
                                    guint        status,
                                    const char  *reason,
                                    const char  *retry_after,
                                    const char  *answer,
                                    gsize        length,
                                    GError     **error)
{
  g_auto(HubRef) ref = { 0 };
  g_autoptr(GBytes) body = g_bytes_new (answer, length);
  g_autoptr(JsonNode) root = NULL;

  if (!repo_ref (repo_id, &ref, error))
    return NULL;
  root = api_response (&ref, status, reason, retry_after, body, "answer", FALSE, error);
  if (root == NULL)
    return NULL;
  return list_quants_answer (&ref, repo_id, root, error);
}

/* The quantizations the listing `root` of repo_id holds. */
static TernHubRepo *
list_quants_answer (const HubRef  *ref,
                    const char    *repo_id,
                    JsonNode      *root,
                    GError       **error)
{
  g_autoptr(GPtrArray) files = NULL;
  g_autoptr(TernHubRepo) repo = NULL;
  const char *commit;
  HubFile *mmproj;

  commit = string_member (json_node_get_object (root), "sha");
  if (commit == NULL || !hub_name_ok (commit, 64))
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
                   _("%s/%s: the Hub's answer names no commit ('sha') for revision %s"), ref->owner, ref->repo,
                   ref->revision);
      return NULL;
    }
  files = read_siblings (json_node_get_object (root));
  repo = g_new0 (TernHubRepo, 1);
  repo->id = g_strdup (repo_id);
  repo->commit = g_strdup (commit);
  repo->gated = gated_member (json_node_get_object (root));
  repo->quants = group_quants (ref, commit, files);
  mmproj = pick_mmproj (files);
  repo->mmproj_size = mmproj ? mmproj->size : 0;
  return g_steal_pointer (&repo);
}

static void
list_quants_thread (GTask        *task,
                    gpointer      source,
                    gpointer      data,
                    GCancellable *cancellable)
{
  GError *error = NULL;
  TernHubRepo *repo = tern_hub_list_quants (data, cancellable, &error);

  (void) source;
  if (repo == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, repo, (GDestroyNotify) tern_hub_repo_free);
}

void
tern_hub_list_quants_async (const char          *repo_id,
                            GCancellable        *cancellable,
                            GAsyncReadyCallback  callback,
                            gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);

  g_task_set_source_tag (task, tern_hub_list_quants_async);
  g_task_set_task_data (task, g_strdup (repo_id), g_free);
  g_task_set_return_on_cancel (task, TRUE);
  g_task_run_in_thread (task, list_quants_thread);
}

TernHubRepo *
tern_hub_list_quants_finish (GAsyncResult  *result,
                             GError       **error)
{
  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

/* ---- resolving off the main thread -------------------------------------- */

typedef struct {
  TernCatalog *catalog;
  char        *tag;
} Resolved;

static void
resolved_free (Resolved *r)
{
  g_clear_object (&r->catalog);
  g_free (r->tag);
  g_free (r);
}

static void
resolve_thread (GTask        *task,
                gpointer      source,
                gpointer      data,
                GCancellable *cancellable)
{
  GError *error = NULL;
  Resolved *r = g_new0 (Resolved, 1);

  (void) source;
  r->catalog = tern_hub_resolve (data, cancellable, &r->tag, &error);
  if (r->catalog == NULL)
    {
      resolved_free (r);
      g_task_return_error (task, error);
    }
  else
    g_task_return_pointer (task, r, (GDestroyNotify) resolved_free);
}

void
tern_hub_resolve_async (const char          *ref,
                        GCancellable        *cancellable,
                        GAsyncReadyCallback  callback,
                        gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);

  g_task_set_source_tag (task, tern_hub_resolve_async);
  g_task_set_task_data (task, g_strdup (ref), g_free);
  /* The panel's Cancel is answered at once, as the search's and the quant
   * listing's are, whatever the worker waits on (a resolver, a handshake,
   * a full thread pool); its thread ends on its own. */
  g_task_set_return_on_cancel (task, TRUE);
  g_task_run_in_thread (task, resolve_thread);
}

TernCatalog *
tern_hub_resolve_finish (GAsyncResult  *result,
                         char         **tag,
                         GError       **error)
{
  Resolved *r;
  TernCatalog *catalog;

  g_return_val_if_fail (g_task_is_valid (result, NULL), NULL);
  r = g_task_propagate_pointer (G_TASK (result), error);
  if (r == NULL)
    return NULL;
  catalog = g_steal_pointer (&r->catalog);
  if (tag != NULL)
    *tag = g_steal_pointer (&r->tag);
  resolved_free (r);
  return catalog;
}
