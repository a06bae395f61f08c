/* test-hostile.c: the downloader and the Hub client against servers that
 * lie or attack: a redirect from https to plain http, endless response
 * headers, a Content-Length the body does not keep, an answer that never
 * comes. The servers
 * (libsoup's, one of them over TLS with the certificate below, and a raw
 * socket one for answers libsoup's server would not send) run in a forked
 * process of their own (see server_main). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>
#include <string.h>
#include <glib-unix.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tern-hub.h"
#include "tern-manager-private.h"
#include "tern.h"

/* Made once for these tests (openssl req -x509, prime256v1, 100 years,
 * subjectAltName IP:127.0.0.1); it is its own certificate authority. */
static const char cert_pem[] =
  "-----BEGIN CERTIFICATE-----\n"
  "MIIBkDCCATagAwIBAgIUAb6Iwt32h8bHNGiEA4cLRrjbl5UwCgYIKoZIzj0EAwIw\n"
  "FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTIwNzAzNTkwOFoYDzIxMjYxMTEz\n"
  "MDM1OTA4WjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO\n"
  "PQMBBwNCAASjHpxz1Wnm69RWJNtAeDcEq+zKt8OTStfHnSd6NWX3drRmDS60Lr8d\n"
  "Sz6ZuefZSnH2eB2ZAG5fjk7kqROOWAveo2QwYjAdBgNVHQ4EFgQU2356fREcSFBc\n"
  "FpB8xPuDK036GLAwHwYDVR0jBBgwFoAU2356fREcSFBcFpB8xPuDK036GLAwDwYD\n"
  "VR0RBAgwBocEfwAAATAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUC\n"
  "ICyWn2JqhK2O/K3Gf/Ca7T+shKTieW4TTJCc/Zwky37tAiEA6C/cBwk4C2dB6iQ3\n"
  "J2kpaCwmYvs79jhANsGKzgv4QGA=\n"
  "-----END CERTIFICATE-----\n";
static const char key_pem[] =
  "-----BEGIN PRIVATE KEY-----\n"
  "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgM3FsGnGVth/c0Bvf\n"
  "eC8KMSLEiP1KphTDU73jdxzEh/qhRANCAASjHpxz1Wnm69RWJNtAeDcEq+zKt8OT\n"
  "StfHnSd6NWX3drRmDS60Lr8dSz6ZuefZSnH2eB2ZAG5fjk7kqROOWAve\n"
  "-----END PRIVATE KEY-----\n";

#define FILE_SIZE 100000

static char *tmp_root;
static int store_counter;
static guint8 good_data[FILE_SIZE];   /* what the https server serves */
static guint8 evil_data[FILE_SIZE];   /* what the plain http hop serves */
static char *evil_sha;

static guint16 https_port, http_port, raw_port;
static GMainContext *server_context;  /* the servers' process's */
static GMainLoop *server_loop;
static GPid server_pid;
static int server_stop = -1;  /* the servers' process ends when this closes */
/* Counted in the servers' process, read in the tests'. */
typedef struct {
  gint    http_hits;  /* requests the plain http server answered with content */
  guint64 raw_sent;   /* bytes of the raw server's answers written so far */
  gint    stalled;    /* requests the raw server holds without an answer */
} Shared;
static Shared *shared;

/* ---- the servers -------------------------------------------------------- */

static guint16
server_port (SoupServer *server)
{
  GSList *uris = soup_server_get_uris (server);
  guint16 port = (guint16) g_uri_get_port (uris->data);

  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);
  return port;
}

static void
redirect_to (SoupServerMessage *msg,
             const char        *scheme,
             guint16            port,
             const char        *path)
{
  g_autofree char *to = g_strdup_printf ("%s://127.0.0.1:%u%s", scheme, port, path);

  soup_server_message_set_redirect (msg, SOUP_STATUS_FOUND, to);
}

/* The real server: the file, and redirects from its https address. */
static void
on_https (SoupServer        *server,
          SoupServerMessage *msg,
          const char        *path,
          GHashTable        *query,
          gpointer           data)
{
  (void) server;
  (void) query;
  (void) data;
  if (g_str_equal (path, "/file"))
    {
      soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
      soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_STATIC,
                                        (const char *) good_data, FILE_SIZE);
    }
  else if (g_str_equal (path, "/to-http"))
    redirect_to (msg, "http", http_port, "/file");
  else if (g_str_equal (path, "/to-https"))
    redirect_to (msg, "https", https_port, "/file");
  else if (g_str_has_prefix (path, "/api/models/"))
    redirect_to (msg, "http", http_port, path);
  else
    soup_server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
}

/* The attacker's plain http: other bytes, vouched for by its own hash. */
static void
on_http (SoupServer        *server,
         SoupServerMessage *msg,
         const char        *path,
         GHashTable        *query,
         gpointer           data)
{
  (void) server;
  (void) query;
  (void) data;
  if (g_str_equal (path, "/file"))
    {
      g_autofree char *etag = g_strdup_printf ("\"%s\"", evil_sha);

      g_atomic_int_inc (&shared->http_hits);
      soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
      soup_message_headers_replace (soup_server_message_get_response_headers (msg), "X-Linked-Etag", etag);
      soup_server_message_set_response (msg, "application/octet-stream", SOUP_MEMORY_STATIC,
                                        (const char *) evil_data, FILE_SIZE);
    }
  else if (g_str_equal (path, "/to-https"))
    redirect_to (msg, "https", https_port, "/file");
  else if (g_str_has_prefix (path, "/api/models/"))
    {
      static const char answer[] = "{\"id\": \"o/r\", \"sha\": \"0123456789abcdef0123456789abcdef01234567\", "
                                   "\"siblings\": []}";

      g_atomic_int_inc (&shared->http_hits);
      soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
      soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_STATIC, answer,
                                        sizeof answer - 1);
    }
  else
    soup_server_message_set_status (msg, SOUP_STATUS_NOT_FOUND, NULL);
}

/* The raw server: answers no HTTP library would send. RAW_LIMIT caps what
 * one answer writes, so that a client that reads for ever still ends. */
#define RAW_LIMIT (256u << 20)

static gboolean
raw_write (GOutputStream *out,
           const void    *data,
           gsize          length)
{
  gsize written = 0;
  gboolean ok = g_output_stream_write_all (out, data, length, &written, NULL, NULL);

  __atomic_add_fetch (&shared->raw_sent, (guint64) written, __ATOMIC_RELAXED);
  return ok;
}

static gboolean
raw_printf (GOutputStream *out,
            const char    *format,
            ...) G_GNUC_PRINTF (2, 3);

static gboolean
raw_printf (GOutputStream *out,
            const char    *format,
            ...)
{
  va_list args;
  g_autofree char *text = NULL;

  va_start (args, format);
  text = g_strdup_vprintf (format, args);
  va_end (args);
  return raw_write (out, text, strlen (text));
}

/* A body of `declared` bytes by its Content-Length (none when 0, then the
 * end of the connection ends it) of which `sent` are sent. */
static void
raw_body (GOutputStream *out,
          gsize          declared,
          gsize          sent)
{
  if (declared > 0)
    raw_printf (out, "HTTP/1.1 200 OK\r\nContent-Length: %" G_GSIZE_FORMAT "\r\nConnection: close\r\n\r\n",
                declared);
  else
    raw_printf (out, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
  raw_write (out, good_data, sent);
}

static gboolean
on_raw (GThreadedSocketService *service,
        GSocketConnection      *connection,
        GObject                *source,
        gpointer                data)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (connection));
  GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (connection));
  char request[8192];
  gsize got = 0;
  char path[1024] = "";

  (void) service;
  (void) source;
  (void) data;
  while (got < sizeof request - 1)
    {
      gssize n = g_input_stream_read (in, request + got, sizeof request - 1 - got, NULL, NULL);

      if (n <= 0)
        return TRUE;
      got += (gsize) n;
      request[got] = '\0';
      if (strstr (request, "\r\n\r\n") != NULL)
        break;
    }
  if (sscanf (request, "GET %1023s ", path) != 1)
    return TRUE;

  if (g_str_has_prefix (path, "/stall"))
    {
      /* No answer at all, until the client hangs up. */
      g_atomic_int_inc (&shared->stalled);
      while (g_input_stream_read (in, request, sizeof request, NULL, NULL) > 0)
        ;
    }
  else if (g_str_has_prefix (path, "/endless-headers"))
    {
      /* Header lines of a kilobyte, for as long as the client reads. */
      char line[1000];

      memset (line, 'a', sizeof line);
      memcpy (line, "X-Filler: ", 10);
      line[sizeof line - 2] = '\r';
      line[sizeof line - 1] = '\n';
      raw_printf (out, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n");
      for (gsize n = 0; n < RAW_LIMIT && raw_write (out, line, sizeof line); n += sizeof line)
        ;
    }
  else if (g_str_has_prefix (path, "/huge-header"))
    {
      /* One header line with no end. */
      static char block[65536];

      memset (block, 'a', sizeof block);
      raw_printf (out, "HTTP/1.1 200 OK\r\nX-Big: ");
      for (gsize n = 0; n < RAW_LIMIT && raw_write (out, block, sizeof block); n += sizeof block)
        ;
    }
  else if (g_str_equal (path, "/cl-long"))
    raw_body (out, 1000, 2000);
  else if (g_str_equal (path, "/cl-short"))
    raw_body (out, 1000, 500);
  else if (g_str_equal (path, "/eof-2000"))
    raw_body (out, 0, 2000);
  else if (g_str_equal (path, "/eof-500"))
    raw_body (out, 0, 500);
  else
    raw_printf (out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
  return TRUE;
}

static gboolean
on_stop (int          fd,
         GIOCondition condition,
         gpointer     data)
{
  (void) fd;
  (void) condition;
  (void) data;
  g_main_loop_quit (server_loop);
  return G_SOURCE_REMOVE;
}

/* The servers' process: GnuTLS runs the TLS server's handshakes in GLib's
 * shared worker threads, which never end, and LeakSanitizer's exit scan
 * crashed on their dynamic TLS blocks ("Tracer caught signal 11"). Here
 * they end with the process, by _exit, which no leak scan follows. */
static void G_GNUC_NORETURN
server_main (int ready,
             int stop)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *pem = g_strconcat (cert_pem, key_pem, NULL);
  g_autoptr(GTlsCertificate) cert = NULL;
  g_autoptr(SoupServer) https = NULL;
  g_autoptr(SoupServer) http = NULL;
  g_autoptr(GSocketService) raw = NULL;
  guint16 ports[3];

  server_context = g_main_context_new ();
  server_loop = g_main_loop_new (server_context, FALSE);
  g_main_context_push_thread_default (server_context);
  cert = g_tls_certificate_new_from_pem (pem, -1, &error);
  g_assert_no_error (error);
  https = soup_server_new ("tls-certificate", cert, NULL);
  soup_server_add_handler (https, NULL, on_https, NULL, NULL);
  g_assert_true (soup_server_listen_local (https, 0, SOUP_SERVER_LISTEN_HTTPS | SOUP_SERVER_LISTEN_IPV4_ONLY,
                                           &error));
  g_assert_no_error (error);
  https_port = server_port (https);
  http = soup_server_new (NULL, NULL);
  soup_server_add_handler (http, NULL, on_http, NULL, NULL);
  g_assert_true (soup_server_listen_local (http, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
  g_assert_no_error (error);
  http_port = server_port (http);
  raw = g_threaded_socket_service_new (4);
  raw_port = g_socket_listener_add_any_inet_port (G_SOCKET_LISTENER (raw), NULL, &error);
  g_assert_no_error (error);
  g_signal_connect (raw, "run", G_CALLBACK (on_raw), NULL);
  g_socket_service_start (raw);
  {
    GSource *source = g_unix_fd_source_new (stop, G_IO_IN | G_IO_HUP | G_IO_ERR);

    g_source_set_callback (source, (GSourceFunc) (void (*) (void)) on_stop, NULL, NULL);
    g_source_attach (source, server_context);
    g_source_unref (source);
  }

  ports[0] = https_port;
  ports[1] = http_port;
  ports[2] = raw_port;
  g_assert_cmpint (write (ready, ports, sizeof ports), ==, (gssize) sizeof ports);
  close (ready);
  g_main_loop_run (server_loop);
  _exit (0);
}

/* Before any thread: the servers' process is a fork of this one. */
static void
start_servers (void)
{
  int ready[2], stop[2];
  guint16 ports[3];

  shared = mmap (NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  g_assert_true (shared != MAP_FAILED);
  g_assert_cmpint (pipe (ready), ==, 0);
  g_assert_cmpint (pipe (stop), ==, 0);
  server_pid = fork ();
  g_assert_cmpint (server_pid, >=, 0);
  if (server_pid == 0)
    {
      close (ready[0]);
      close (stop[1]);
      server_main (ready[1], stop[0]);
    }
  close (ready[1]);
  close (stop[0]);
  server_stop = stop[1];
  g_assert_cmpint (read (ready[0], ports, sizeof ports), ==, (gssize) sizeof ports);
  close (ready[0]);
  https_port = ports[0];
  http_port = ports[1];
  raw_port = ports[2];
}

static void
stop_servers (void)
{
  int status;

  close (server_stop);
  g_assert_cmpint (waitpid (server_pid, &status, 0), ==, server_pid);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

/* ---- pulls -------------------------------------------------------------- */

static guint64
plenty_of_space (const char *path,
                 gpointer    data)
{
  (void) path;
  (void) data;
  return G_GUINT64_CONSTANT (1) << 40;
}

/* Pulls tag "t:one", one file at url (size 0: the catalog gives none; no
 * sha256 in the catalog). Returns the installed bytes, or NULL with error. */
static GBytes *
pull_one (const char  *url,
          guint64      size,
          GError     **error)
{
  g_autofree char *root = g_strdup_printf ("%s/store-%d", tmp_root, ++store_counter);
  g_autofree char *size_json = size > 0 ? g_strdup_printf ("%" G_GUINT64_FORMAT, size) : g_strdup ("null");
  g_autofree char *json = g_strdup_printf (
    "{\"schema\": 1, \"packages\": {\"pkg\": {\"label\": \"pkg\", \"files\": [{\"name\": \"m.bin\", "
    "\"url\": \"%s\", \"size\": %s, \"sha256\": null}]}}, \"families\": [{\"id\": \"t\", \"label\": \"Test\", "
    "\"tags\": [{\"tag\": \"t:one\", \"label\": \"Test\", \"base\": \"pkg\", \"draft\": null, "
    "\"flags\": {\"single_turn\": false}, \"context_length\": 4096, \"min_app_version\": \"0.1.0\"}]}]}",
    url, size_json);
  g_autoptr(GError) local_error = NULL;
  g_autoptr(TernCatalog) catalog = tern_catalog_new_from_data (json, -1, "test-catalog.json", &local_error);
  g_autoptr(TernModelStore) store = NULL;
  g_autoptr(TernDownloader) dl = NULL;
  g_autofree char *path = NULL;
  g_autofree char *partial = NULL;
  char *data = NULL;
  gsize length = 0;

  g_assert_no_error (local_error);
  store = tern_model_store_new (root, &local_error);
  g_assert_no_error (local_error);
  dl = tern_downloader_new (store);
  tern_downloader_set_retry (dl, 2, 10, 20);
  tern_downloader_set_timeout (dl, 10);
  tern_downloader_set_free_space_func (dl, plenty_of_space, NULL, NULL);
  partial = g_strdup_printf ("%s/packages/pkg/m.bin%s", root, TERN_PARTIAL_SUFFIX);
  if (!tern_downloader_pull (dl, catalog, "t:one", NULL, error))
    {
      /* Nothing is installed after a failed pull. */
      g_assert_null (tern_model_store_get_path (store, "t:one", TERN_PACKAGE_ROLE_BASE));
      g_assert_cmpint (tern_model_store_get_state (store, "t:one", NULL), !=, TERN_MODEL_STATE_INSTALLED);
      return NULL;
    }
  path = tern_model_store_get_path (store, "t:one", TERN_PACKAGE_ROLE_BASE);
  g_assert_nonnull (path);
  g_assert_false (g_file_test (partial, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_get_contents (path, &data, &length, NULL));
  return g_bytes_new_take (data, length);
}

static void
assert_bytes (GBytes       *bytes,
              const guint8 *want,
              gsize         size)
{
  g_assert_nonnull (bytes);
  g_assert_cmpuint (g_bytes_get_size (bytes), ==, size);
  g_assert_true (memcmp (g_bytes_get_data (bytes, NULL), want, size) == 0);
}

/* ---- https to http ------------------------------------------------------ */

/* An https URL that a hostile mirror (or anyone on the path of the first,
 * plain, hop) redirects to http: followed, the file and the hash that
 * vouched for it came over plain http and were installed. */
static void
test_redirect_downgrade (void)
{
  g_autofree char *url = g_strdup_printf ("https://127.0.0.1:%u/to-http", https_port);
  g_autofree char *target = g_strdup_printf ("http://127.0.0.1:%u/file", http_port);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) got = NULL;
  gint hits = g_atomic_int_get (&shared->http_hits);

  got = pull_one (url, 0, &error);
  g_assert_null (got);
  g_assert_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP);
  g_assert_nonnull (strstr (error->message, "from https to plain http"));
  g_assert_nonnull (strstr (error->message, target));
  g_assert_cmpint (g_atomic_int_get (&shared->http_hits), ==, hits);
}

/* What stays allowed: https to https, and http up to https. */
static void
test_redirect_allowed (void)
{
  g_autofree char *same = g_strdup_printf ("https://127.0.0.1:%u/to-https", https_port);
  g_autofree char *up = g_strdup_printf ("http://127.0.0.1:%u/to-https", http_port);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) got = NULL;
  g_autoptr(GBytes) got_up = NULL;

  got = pull_one (same, 0, &error);
  g_assert_no_error (error);
  assert_bytes (got, good_data, FILE_SIZE);
  got_up = pull_one (up, FILE_SIZE, &error);
  g_assert_no_error (error);
  assert_bytes (got_up, good_data, FILE_SIZE);
}

/* The Hub client follows redirects through libsoup: the same refusal. */
static void
test_redirect_downgrade_hub (void)
{
  g_autofree char *endpoint = g_strdup_printf ("https://127.0.0.1:%u", https_port);
  g_autoptr(GError) error = NULL;
  g_autoptr(TernHubRepo) repo = NULL;
  gint hits = g_atomic_int_get (&shared->http_hits);

  g_setenv ("HF_ENDPOINT", endpoint, TRUE);
  g_unsetenv ("HF_TOKEN");
  repo = tern_hub_list_quants ("o/r", NULL, &error);
  g_unsetenv ("HF_ENDPOINT");
  g_assert_null (repo);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "from https to plain http"));
  g_assert_cmpint (g_atomic_int_get (&shared->http_hits), ==, hits);
}

/* ---- an answer that never comes ----------------------------------------- */

static void
on_resolved (GObject      *source,
             GAsyncResult *result,
             gpointer      data)
{
  GError **error = data;
  g_autoptr(TernCatalog) catalog = tern_hub_resolve_finish (result, NULL, error);

  (void) source;
  g_assert_null (catalog);
  g_assert_nonnull (*error);
}

static gboolean
flag_up (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Cancels, then runs the main context until the resolve's answer is in
 * *error; FALSE if none came within 20 s (a prompt answer takes far less:
 * the guard only turns a hang into a failure). */
static gboolean
cancel_answered (GCancellable  *cancellable,
                 GError       **error)
{
  gboolean gave_up = FALSE;
  guint guard;

  g_cancellable_cancel (cancellable);
  guard = g_timeout_add_seconds (20, flag_up, &gave_up);
  while (*error == NULL && !gave_up)
    g_main_context_iteration (NULL, TRUE);
  if (!gave_up)
    g_source_remove (guard);
  return !gave_up;
}

/* A certificate check that waits until the test lets it go: the worker is
 * held where no cancellable reaches it, as in the system resolver's
 * lookup of a name or a handshake's callbacks. */
typedef struct {
  GTlsDatabase  parent_instance;
  GTlsDatabase *inner;
} HeldDatabase;

typedef struct {
  GTlsDatabaseClass parent_class;
} HeldDatabaseClass;

G_DEFINE_TYPE (HeldDatabase, held_database, G_TYPE_TLS_DATABASE)

static GMutex held_lock;
static GCond held_cond;
static gboolean held_entered, held_released;
static GTlsDatabase *ca_database;

static GTlsCertificateFlags
held_verify_chain (GTlsDatabase            *database,
                   GTlsCertificate         *chain,
                   const gchar             *purpose,
                   GSocketConnectable      *identity,
                   GTlsInteraction         *interaction,
                   GTlsDatabaseVerifyFlags  flags,
                   GCancellable            *cancellable,
                   GError                 **error)
{
  HeldDatabase *self = (HeldDatabase *) database;

  g_mutex_lock (&held_lock);
  held_entered = TRUE;
  g_cond_broadcast (&held_cond);
  while (!held_released)
    g_cond_wait (&held_cond, &held_lock);
  g_mutex_unlock (&held_lock);
  return g_tls_database_verify_chain (self->inner, chain, purpose, identity, interaction, flags,
                                      cancellable, error);
}

static void
held_database_finalize (GObject *object)
{
  g_clear_object (&((HeldDatabase *) object)->inner);
  G_OBJECT_CLASS (held_database_parent_class)->finalize (object);
}

static void
held_database_class_init (HeldDatabaseClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = held_database_finalize;
  G_TLS_DATABASE_CLASS (klass)->verify_chain = held_verify_chain;
}

static void
held_database_init (HeldDatabase *self)
{
  (void) self;
}

/* The panel's Download resolves the reference first; its Cancel must end
 * the resolve there and then, as the search's and the quant listing's do,
 * not when the worker gets out of what holds it. Held in the certificate
 * check, the cancel was answered only once the check was let go; the
 * guard (far beyond a prompt answer) only turns that wait into a failure. */
static void
test_held_resolve_cancel (void)
{
  g_autofree char *endpoint = g_strdup_printf ("https://127.0.0.1:%u", https_port);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  HeldDatabase *held = g_object_new (held_database_get_type (), NULL);
  GError *error = NULL;
  gboolean gave_up;

  held->inner = g_object_ref (ca_database);
  held_entered = held_released = FALSE;
  tern_manager_test_set_tls_database (G_TLS_DATABASE (held));
  g_setenv ("HF_ENDPOINT", endpoint, TRUE);
  g_unsetenv ("HF_TOKEN");
  tern_hub_resolve_async ("hf.co/o/r:Q4_K_M", cancellable, on_resolved, &error);
  g_mutex_lock (&held_lock);
  while (!held_entered)
    g_cond_wait (&held_cond, &held_lock);
  g_mutex_unlock (&held_lock);
  gave_up = !cancel_answered (cancellable, &error);
  g_mutex_lock (&held_lock);
  held_released = TRUE;
  g_cond_broadcast (&held_cond);
  g_mutex_unlock (&held_lock);
  /* Not answered at once, it comes now that the worker is free. */
  while (error == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_unsetenv ("HF_ENDPOINT");
  tern_manager_test_set_tls_database (ca_database);
  g_object_unref (held);
  g_assert_false (gave_up);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
}

/* A request the server holds without an answer: the cancel reaches the
 * worker in libsoup, and the resolve says CANCELLED (the Hub deadline is
 * set far beyond the guard: only the cancel ends it). */
static void
test_stall_resolve_cancel (void)
{
  g_autofree char *endpoint = g_strdup_printf ("http://127.0.0.1:%u/stall", raw_port);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  GError *error = NULL;
  gboolean gave_up;
  gint before = g_atomic_int_get (&shared->stalled);

  g_setenv ("HF_ENDPOINT", endpoint, TRUE);
  g_unsetenv ("HF_TOKEN");
  tern_hub_set_deadline (600);
  tern_hub_resolve_async ("hf.co/o/r:Q4_K_M", cancellable, on_resolved, &error);
  /* Cancelled once the request is held: the worker waits in libsoup. */
  while (g_atomic_int_get (&shared->stalled) == before)
    g_usleep (10000);
  gave_up = !cancel_answered (cancellable, &error);
  g_unsetenv ("HF_ENDPOINT");
  g_assert_false (gave_up);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&error);
  tern_hub_set_deadline (60);
}

/* ---- endless headers ---------------------------------------------------- */

/* libsoup reads response headers into one buffer: a server that never
 * ends them must meet a limit (libsoup's), not fill the memory. What the
 * server got out before the client stopped reading tells. */
static void
test_endless_headers (void)
{
  static const char *const paths[] = { "/endless-headers", "/huge-header" };

  for (guint i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u%s", raw_port, paths[i]);
      g_autoptr(GError) error = NULL;
      g_autoptr(GBytes) got = NULL;
      gint64 start = g_get_monotonic_time ();
      gint64 sent;

      __atomic_store_n (&shared->raw_sent, 0, __ATOMIC_RELAXED);
      got = pull_one (url, 0, &error);
      sent = (gint64) __atomic_load_n (&shared->raw_sent, __ATOMIC_RELAXED);
      g_test_message ("%s: %s after %.1f s, %" G_GINT64_FORMAT " bytes sent", paths[i],
                      error != NULL ? error->message : "(no error)",
                      (g_get_monotonic_time () - start) / 1e6, sent);
      g_assert_null (got);
      g_assert_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_NETWORK);
      g_assert_nonnull (strstr (error->message, url));
      /* Two attempts, each stopped within the socket buffers' worth
       * beyond libsoup's limit; a client that read on got RAW_LIMIT. */
      g_assert_cmpint (sent, <, 32 << 20);
    }
}

/* The same for the Hub client (its own session). */
static void
test_endless_headers_hub (void)
{
  g_autofree char *endpoint = g_strdup_printf ("http://127.0.0.1:%u/endless-headers", raw_port);
  g_autoptr(GError) error = NULL;
  g_autoptr(TernHubRepo) repo = NULL;
  gint64 sent;

  __atomic_store_n (&shared->raw_sent, 0, __ATOMIC_RELAXED);
  g_setenv ("HF_ENDPOINT", endpoint, TRUE);
  g_unsetenv ("HF_TOKEN");
  repo = tern_hub_list_quants ("o/r", NULL, &error);
  g_unsetenv ("HF_ENDPOINT");
  sent = (gint64) __atomic_load_n (&shared->raw_sent, __ATOMIC_RELAXED);
  g_test_message ("hub: %s, %" G_GINT64_FORMAT " bytes sent", error != NULL ? error->message : "(no error)",
                  sent);
  g_assert_null (repo);
  g_assert_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_NETWORK);
  g_assert_cmpint (sent, <, 16 << 20);
}

/* ---- Content-Length against the body ------------------------------------- */

/* A body longer than its Content-Length: the answer is the declared bytes
 * (the rest is not part of it, by HTTP/1.1); with the catalog's size, a
 * declared length that differs fails the pull before a byte is written. */
static void
test_content_length_long (void)
{
  g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u/cl-long", raw_port);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) by_catalog = NULL;
  g_autoptr(GBytes) by_header = NULL;
  g_autoptr(GBytes) other = NULL;

  other = pull_one (url, 2000, &error);
  g_assert_null (other);
  g_assert_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_SIZE);
  g_clear_error (&error);
  by_catalog = pull_one (url, 1000, &error);
  g_assert_no_error (error);
  assert_bytes (by_catalog, good_data, 1000);
  by_header = pull_one (url, 0, &error);
  g_assert_no_error (error);
  assert_bytes (by_header, good_data, 1000);
}

/* A body that ends before its Content-Length (or, with no Content-Length,
 * before the catalog's size) is never installed; one longer than the
 * catalog's size neither. */
static void
test_content_length_short (void)
{
  static const struct {
    const char *path;
    guint64     size;
    gint        code;
  } cases[] = {
    { "/cl-short", 0, TERN_MANAGER_ERROR_NETWORK },
    { "/cl-short", 1000, TERN_MANAGER_ERROR_NETWORK },
    { "/eof-500", 1000, TERN_MANAGER_ERROR_NETWORK },
    { "/eof-2000", 1000, TERN_MANAGER_ERROR_SIZE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *url = g_strdup_printf ("http://127.0.0.1:%u%s", raw_port, cases[i].path);
      g_autoptr(GError) error = NULL;
      g_autoptr(GBytes) got = pull_one (url, cases[i].size, &error);

      g_test_message ("%s (catalog size %" G_GUINT64_FORMAT "): %s", cases[i].path, cases[i].size,
                      error != NULL ? error->message : "(installed)");
      g_assert_null (got);
      g_assert_error (error, TERN_MANAGER_ERROR, cases[i].code);
    }
}

int
main (int    argc,
      char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GTlsDatabase) database = NULL;
  g_autofree char *ca = NULL;
  guint64 state = 0x9E3779B97F4A7C15ull;
  const char *base = g_getenv ("TERN_TEST_TMP");
  int status;

  g_test_init (&argc, &argv, NULL);
  g_setenv ("TERN_ADOPT", "0", TRUE);
  /* A proxy from the environment would stand between us and 127.0.0.1. */
  g_unsetenv ("http_proxy");
  g_unsetenv ("https_proxy");
  g_unsetenv ("all_proxy");
  g_unsetenv ("HTTP_PROXY");
  g_unsetenv ("HTTPS_PROXY");
  g_unsetenv ("ALL_PROXY");
  if (base != NULL)
    g_mkdir_with_parents (base, 0755);
  tmp_root = g_build_filename (base != NULL ? base : g_get_tmp_dir (), "hostile-XXXXXX", NULL);
  g_assert_nonnull (g_mkdtemp (tmp_root));

  for (gsize i = 0; i < FILE_SIZE; i++)
    {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      good_data[i] = (guint8) (state >> 24);
      evil_data[i] = (guint8) (state >> 32);
    }
  evil_sha = g_compute_checksum_for_data (G_CHECKSUM_SHA256, evil_data, FILE_SIZE);

  if (!g_tls_backend_supports_tls (g_tls_backend_get_default ()))
    {
      g_printerr ("no TLS backend (glib-networking): skipped\n");
      return 77;
    }
  /* Still one thread (the TLS backend's module starts none): fork. */
  start_servers ();
  ca = g_build_filename (tmp_root, "ca.pem", NULL);
  g_assert_true (g_file_set_contents (ca, cert_pem, -1, &error));
  database = g_tls_file_database_new (ca, &error);
  g_assert_no_error (error);
  ca_database = database;
  tern_manager_test_set_tls_database (database);

  g_test_add_func ("/hostile/redirect/downgrade", test_redirect_downgrade);
  g_test_add_func ("/hostile/redirect/allowed", test_redirect_allowed);
  g_test_add_func ("/hostile/redirect/downgrade-hub", test_redirect_downgrade_hub);
  g_test_add_func ("/hostile/stall/resolve-cancel", test_stall_resolve_cancel);
  g_test_add_func ("/hostile/held/resolve-cancel", test_held_resolve_cancel);
  g_test_add_func ("/hostile/endless-headers", test_endless_headers);
  g_test_add_func ("/hostile/endless-headers-hub", test_endless_headers_hub);
  g_test_add_func ("/hostile/content-length/long", test_content_length_long);
  g_test_add_func ("/hostile/content-length/short", test_content_length_short);
  status = g_test_run ();

  stop_servers ();
  tern_manager_test_set_tls_database (NULL);
  tern_manager_remove_tree (tmp_root, NULL);
  g_free (tmp_root);
  g_free (evil_sha);
  return status;
}
