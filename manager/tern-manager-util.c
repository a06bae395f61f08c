/* tern-manager-util.c: small helpers of the model manager. */
#include "tern-manager-private.h"

#include "tern.h" /* TN_VERSION_STRING, tn_repack_cache_forget */
#include "tn-text.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <locale.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

G_DEFINE_QUARK (tern-manager-error-quark, tern_manager_error)

const char *
tern_manager_app_version (void)
{
  return TN_VERSION_STRING;
}

static guint64
next_version_part (const char **p)
{
  guint64 value = 0;

  while (**p && **p != '.')
    {
      if (g_ascii_isdigit (**p) && value < G_MAXUINT64 / 10)
        value = value * 10 + (guint64) (**p - '0');
      (*p)++;
    }
  if (**p == '.')
    (*p)++;
  return value;
}

int
tern_manager_version_compare (const char *a,
                              const char *b)
{
  const char *pa = a ? a : "";
  const char *pb = b ? b : "";

  while (*pa || *pb)
    {
      guint64 va = next_version_part (&pa);
      guint64 vb = next_version_part (&pb);

      if (va != vb)
        return va < vb ? -1 : 1;
    }
  return 0;
}

/* The decimal separator of a size: the one of LC_NUMERIC where the user
 * has set a locale for numbers, else the one of the language the words are
 * in (a translation). LANGUAGE=fr with numbers in the C locale (a locale
 * not generated, the tests' C.UTF-8, tern-cli, which sets LC_MESSAGES
 * only) gave "2.5 Go". */
const char *
tern_manager_decimal_separator (void)
{
  const char *numeric = setlocale (LC_NUMERIC, NULL);
  const struct lconv *conv = localeconv ();

  if (numeric != NULL && !g_str_equal (numeric, "C") && !g_str_equal (numeric, "POSIX")
      && !g_str_has_prefix (numeric, "C.") && conv != NULL && conv->decimal_point != NULL
      && *conv->decimal_point != '\0')
    return conv->decimal_point;
  /* Translators: the decimal separator in sizes ("2.5 GB"), used where the
   * locale's numbers are not set: "," in French, German and Spanish */
  return C_("decimal separator", ".");
}

char *
tern_manager_format_size (guint64 bytes)
{
  /* Not g_format_size: its words come from GLib's catalog (glib20, in
   * Debian's libglib2.0-data, which is only recommended, so often not
   * there) and its decimal point from LC_NUMERIC alone; and the bytes
   * were no word of any catalog here: the French Models footer said
   * "0 bytes utilisés". The units are this program's own words. */
  static const guint64 steps[] = { G_GUINT64_CONSTANT (1000), G_GUINT64_CONSTANT (1000000),
                                   G_GUINT64_CONSTANT (1000000000), G_GUINT64_CONSTANT (1000000000000),
                                   G_GUINT64_CONSTANT (1000000000000000),
                                   G_GUINT64_CONSTANT (1000000000000000000) };
  /* Translators: units of sizes (1000 bytes, 1000 kB...), "ko", "Mo", "Go"
   * in French */
  static const char *const units[] = { NC_("size unit", "kB"), NC_("size unit", "MB"),
                                       NC_("size unit", "GB"), NC_("size unit", "TB"),
                                       NC_("size unit", "PB"), NC_("size unit", "EB") };
  /* A no-break space between number and unit, as GLib's; a plain one on
   * a terminal that is not UTF-8 (LC_ALL=C), which would show two stray
   * bytes. */
  const char *space = g_get_charset (NULL) ? "\xc2\xa0" : " ";
  char number[G_ASCII_DTOSTR_BUF_SIZE];
  const char *unit;
  guint i = 0;

  if (bytes < 1000)
    {
      g_snprintf (number, sizeof number, "%" G_GUINT64_FORMAT, bytes);
      /* Translators: the unit of a size under 1 kB ("0 bytes", "1 byte") */
      unit = g_dngettext (GETTEXT_PACKAGE, "byte", "bytes", (unsigned long) bytes);
    }
  else
    {
      char *dot;

      while (i + 1 < G_N_ELEMENTS (steps) && bytes >= steps[i + 1])
        i++;
      g_ascii_formatd (number, sizeof number, "%.1f", (double) bytes / (double) steps[i]);
      unit = g_dpgettext2 (GETTEXT_PACKAGE, "size unit", units[i]);
      if ((dot = strchr (number, '.')) != NULL)
        {
          *dot = '\0';
          return g_strconcat (number, tern_manager_decimal_separator (), dot + 1, space, unit, NULL);
        }
    }
  return g_strconcat (number, space, unit, NULL);
}

char *
tern_manager_format_time_left (double seconds)
{
  if (!(seconds >= 0) || seconds > 99.0 * 3600)
    return NULL;
  if (seconds >= 3600)
    /* Translators: a download's time left, hours then minutes: "1 h 05 min" */
    return g_strdup_printf (_("%d h %02d min"), (int) (seconds / 3600), (int) seconds % 3600 / 60);
  return g_strdup_printf ("%d:%02d", (int) (seconds / 60), (int) seconds % 60);
}

gboolean
tern_manager_safe_name (const char *name)
{
  size_t n;

  if (name == NULL || name[0] == '\0' || name[0] == '.')
    return FALSE;
  n = strlen (name);
  if (n > 200)
    return FALSE;
  for (size_t i = 0; i < n; i++)
    if (!g_ascii_isalnum (name[i]) && !strchr ("._+-", name[i]))
      return FALSE;
  return TRUE;
}

gboolean
tern_manager_valid_url (const char *url)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_ENCODED, NULL);
  const char *scheme;

  if (uri == NULL)
    return FALSE;
  scheme = g_uri_get_scheme (uri);
  if (g_ascii_strcasecmp (scheme, "http") != 0 && g_ascii_strcasecmp (scheme, "https") != 0)
    return FALSE;
  return g_uri_get_host (uri) != NULL && g_uri_get_host (uri)[0] != '\0';
}

gboolean
tern_manager_is_sha256 (const char *text)
{
  if (text == NULL || strlen (text) != 64)
    return FALSE;
  for (int i = 0; i < 64; i++)
    if (!g_ascii_isxdigit (text[i]))
      return FALSE;
  return TRUE;
}

void
tern_manager_sync_dir (const char *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd >= 0)
    {
      (void) fsync (fd);
      close (fd);
    }
}

static gboolean
io_error (GError    **error,
          int         errsv,
          const char *what,
          const char *path)
{
  g_set_error (error, TERN_MANAGER_ERROR,
               errsv == ENOSPC || errsv == EDQUOT ? TERN_MANAGER_ERROR_NO_SPACE
                                                  : TERN_MANAGER_ERROR_IO,
               "%s: %s: %s", path, what, _(tn_write_cause (errsv)));
  return FALSE;
}

static char *fail_writes_suffix;
static int fail_writes_errno;

void
tern_manager_test_fail_writes (const char *suffix,
                               int         errsv)
{
  g_free (fail_writes_suffix);
  fail_writes_suffix = g_strdup (suffix);
  fail_writes_errno = errsv;
}

gboolean
tern_manager_write_file_atomic (const char  *path,
                                const char  *contents,
                                gsize        length,
                                GError     **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *tmp = g_strdup_printf ("%s.tmp-XXXXXX", path);
  gsize written = 0;
  int fd;

  fd = g_mkstemp_full (tmp, O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0)
    return io_error (error, errno, _("cannot create a temporary file"), tmp);
  while (written < length)
    {
      ssize_t n = write (fd, contents + written, length - written);

      if (n >= 0 && fail_writes_suffix != NULL && g_str_has_suffix (path, fail_writes_suffix))
        {
          n = -1;
          errno = fail_writes_errno;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int errsv = errno;

          close (fd);
          unlink (tmp);
          /* The file's own name: the temporary one is gone already. */
          return io_error (error, errsv, _("cannot write"), path);
        }
      written += (gsize) n;
    }
  if (fsync (fd) != 0 || close (fd) != 0)
    {
      int errsv = errno;

      unlink (tmp);
      return io_error (error, errsv, _("cannot sync"), path);
    }
  if (rename (tmp, path) != 0)
    {
      int errsv = errno;

      unlink (tmp);
      return io_error (error, errsv, _("cannot rename into place"), path);
    }
  tern_manager_sync_dir (dir);
  return TRUE;
}

/* Tests only: production sessions keep libsoup's default, the system's
 * certificate authorities. */
static GTlsDatabase *test_tls_database;

void
tern_manager_test_set_tls_database (GTlsDatabase *database)
{
  g_set_object (&test_tls_database, database);
}

void
tern_manager_session_init (SoupSession *session)
{
  if (test_tls_database != NULL)
    soup_session_set_tls_database (session, test_tls_database);
}

gboolean
tern_manager_redirect_downgrades (GUri *from,
                                  GUri *to)
{
  return g_ascii_strcasecmp (g_uri_get_scheme (from), "https") == 0
         && g_ascii_strcasecmp (g_uri_get_scheme (to), "https") != 0;
}

void
tern_manager_set_downgrade_error (GError    **error,
                                  const char *from,
                                  const char *to)
{
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP,
               _("%s redirected from https to plain http (%s); refusing to follow it: over plain http "
                 "anyone on the way can change what arrives. Ask the server's owner for an address "
                 "that stays on https"), from, to);
}

#define REFUSED_KEY "tern-refused-downgrade"

/* Runs before libsoup decides to follow the answer's Location. */
static void
on_got_headers_refuse_downgrade (SoupMessage *msg,
                                 gpointer     data)
{
  const char *location;
  g_autoptr(GUri) next = NULL;

  (void) data;
  if (!SOUP_STATUS_IS_REDIRECTION (soup_message_get_status (msg)))
    return;
  location = soup_message_headers_get_one (soup_message_get_response_headers (msg), "Location");
  if (location == NULL)
    return;
  next = g_uri_parse_relative (soup_message_get_uri (msg), location, SOUP_HTTP_URI_FLAGS, NULL);
  if (next == NULL || !tern_manager_redirect_downgrades (soup_message_get_uri (msg), next))
    return;
  soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
  g_object_set_data_full (G_OBJECT (msg), REFUSED_KEY, g_uri_to_string (next), g_free);
}

void
tern_manager_refuse_downgrades (SoupMessage *msg)
{
  g_signal_connect (msg, "got-headers", G_CALLBACK (on_got_headers_refuse_downgrade), NULL);
}

gboolean
tern_manager_refused_downgrade (SoupMessage *msg,
                                GError     **error)
{
  const char *to = g_object_get_data (G_OBJECT (msg), REFUSED_KEY);
  g_autofree char *from = NULL;

  if (to == NULL)
    return FALSE;
  from = g_uri_to_string (soup_message_get_uri (msg));
  tern_manager_set_downgrade_error (error, from, to);
  return TRUE;
}

/* Tests only (tern_manager_test_set_hash_hook): a hash of a test-sized file
 * is over before anyone could see it being made. */
static void (*hash_hook) (guint64 hashed, gpointer user_data);
static gpointer hash_hook_data;

void
tern_manager_test_set_hash_hook (void     (*hook) (guint64  hashed,
                                                   gpointer user_data),
                                 gpointer   user_data)
{
  hash_hook_data = user_data;
  g_atomic_pointer_set (&hash_hook, hook);
}

char *
tern_manager_sha256_fd (int            fd,
                        const char    *name,
                        guint64       *hashed,
                        GCancellable  *cancellable,
                        GError       **error)
{
  /* The engine's SHA-256 (the SHA extensions where the CPU has them): GLib's
   * GChecksum hashed about 0.38 GB/s (this 1.9), so a downloaded 17 GB
   * model sat at 100 % for about 45 s while it was checked. */
  tn_sha256 checksum;
  uint8_t digest[32];
  char hex[65];
  g_autofree guchar *buffer = g_malloc (1 << 20);
  off_t offset = 0;

  tn_sha256_init (&checksum);
  for (;;)
    {
      ssize_t n = pread (fd, buffer, 1 << 20, offset);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          io_error (error, errno, _("cannot read"), name);
          return NULL;
        }
      if (n == 0)
        break;
      tn_sha256_update (&checksum, buffer, (size_t) n);
      offset += n;
      /* Atomic: another thread shows it while this one hashes. */
      if (hashed != NULL)
        __atomic_store_n (hashed, (guint64) offset, __ATOMIC_RELAXED);
      {
        void (*hook) (guint64, gpointer) = g_atomic_pointer_get (&hash_hook);

        if (G_UNLIKELY (hook != NULL))
          hook ((guint64) offset, hash_hook_data);
      }
      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return NULL;
    }
  tn_sha256_final (&checksum, digest);
  for (int i = 0; i < 32; i++)
    g_snprintf (hex + 2 * i, 3, "%02x", digest[i]);
  return g_strdup (hex);
}

char *
tern_manager_sha256_file (const char    *path,
                          guint64       *hashed,
                          GCancellable  *cancellable,
                          GError       **error)
{
  char *sha;
  tn_error open_error = { 0 };
  int fd;

  /* A FIFO or a device where a model file belongs would block open() or
   * never end: only a regular file is hashed. */
  if (tn_open_regular_file (path, &fd, NULL, &open_error) != TN_OK)
    {
      g_autofree char *why = tern_manager_engine_message (&open_error);

      g_set_error_literal (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, why);
      return NULL;
    }
  sha = tern_manager_sha256_fd (fd, path, hashed, cancellable, error);
  close (fd);
  return sha;
}

gboolean
tern_manager_remove_tree (const char  *path,
                          GError     **error)
{
  struct stat st;
  DIR *dir;
  struct dirent *entry;

  if (lstat (path, &st) != 0)
    return errno == ENOENT ? TRUE : io_error (error, errno, _("cannot read"), path);
  if (!S_ISDIR (st.st_mode))
    {
      /* A deleted model's repacked weights (docs/QUANT.md, "The repack
       * cache") would otherwise wait for the next prune. */
      if (g_str_has_suffix (path, ".gguf"))
        tn_repack_cache_forget (NULL, path, NULL);
      return unlink (path) == 0 || errno == ENOENT ? TRUE : io_error (error, errno, _("cannot delete"), path);
    }

  dir = opendir (path);
  if (dir == NULL)
    return io_error (error, errno, _("cannot list"), path);
  while ((entry = readdir (dir)) != NULL)
    {
      g_autofree char *child = NULL;

      if (g_str_equal (entry->d_name, ".") || g_str_equal (entry->d_name, ".."))
        continue;
      child = g_build_filename (path, entry->d_name, NULL);
      if (!tern_manager_remove_tree (child, error))
        {
          closedir (dir);
          return FALSE;
        }
    }
  closedir (dir);
  if (rmdir (path) != 0 && errno != ENOENT)
    return io_error (error, errno, _("cannot delete"), path);
  return TRUE;
}

guint64
tern_manager_free_space (const char *path)
{
  struct statvfs st;

  if (statvfs (path, &st) != 0)
    return G_MAXUINT64;
  return (guint64) st.f_bavail * (guint64) st.f_frsize;
}

static const char *
env_either_case (const char *lower)
{
  g_autofree char *upper = g_ascii_strup (lower, -1);
  const char *value = g_getenv (lower);

  if (value == NULL || *value == '\0')
    value = g_getenv (upper);
  return value != NULL && *value != '\0' ? value : NULL;
}

GProxyResolver *
tern_manager_proxy_resolver_from_env (void)
{
  const char *http = env_either_case ("http_proxy");
  const char *https = env_either_case ("https_proxy");
  const char *all = env_either_case ("all_proxy");
  const char *no_proxy = env_either_case ("no_proxy");
  g_auto(GStrv) ignore = NULL;
  g_autoptr(GPtrArray) hosts = NULL;
  GProxyResolver *resolver;

  if (http == NULL && https == NULL && all == NULL)
    return NULL;

  hosts = g_ptr_array_new_with_free_func (g_free);
  if (no_proxy != NULL)
    {
      ignore = g_strsplit (no_proxy, ",", -1);
      for (char **p = ignore; *p; p++)
        {
          char *host = g_strstrip (*p);

          /* "*" is curl's "no proxy for anything". */
          if (g_str_equal (host, "*"))
            return NULL;
          if (*host != '\0')
            g_ptr_array_add (hosts, g_strdup (host));
        }
    }
  g_ptr_array_add (hosts, NULL);

  resolver = g_simple_proxy_resolver_new (all, (char **) hosts->pdata);
  if (http != NULL)
    g_simple_proxy_resolver_set_uri_proxy (G_SIMPLE_PROXY_RESOLVER (resolver), "http", http);
  if (https != NULL)
    g_simple_proxy_resolver_set_uri_proxy (G_SIMPLE_PROXY_RESOLVER (resolver), "https", https);
  return resolver;
}

gboolean
tern_manager_unreachable (const GError *error)
{
  if (error == NULL)
    return FALSE;
  if (error->domain == G_RESOLVER_ERROR)
    return TRUE;
  return error->domain == G_IO_ERROR
         && (error->code == G_IO_ERROR_CONNECTION_REFUSED || error->code == G_IO_ERROR_NETWORK_UNREACHABLE
             || error->code == G_IO_ERROR_HOST_UNREACHABLE || error->code == G_IO_ERROR_HOST_NOT_FOUND);
}

char *
tern_manager_engine_message (const tn_error *err)
{
  char text[TN_ERROR_MESSAGE_MAX];

  if (err->format == NULL)
    return g_strdup (err->message);
  return g_strdup (tn_error_format (err, g_dgettext (GETTEXT_PACKAGE, err->format), text,
                                    sizeof text));
}

char *
tern_manager_wait_advice (const char *retry_after)
{
  char *end = NULL;
  guint64 secs = retry_after ? g_ascii_strtoull (retry_after, &end, 10) : 0;

  /* Digits alone: g_ascii_strtoull also skips leading white space
   * (vertical tab, form feed, CR), which would reach our sentence as the
   * server wrote it. */
  if (retry_after && g_ascii_isdigit (retry_after[0]) && end && *end == '\0' && secs <= 86400 * 7)
    /* Translators: %s is a number of seconds */
    return g_strdup_printf (_("it asks to wait %s seconds before trying again"), retry_after);
  /* An HTTP date is 29 bytes: anything much longer is not one. */
  if (retry_after && *retry_after && strlen (retry_after) <= 64)
    {
      g_autoptr(GString) shown = g_string_new (NULL);

      tern_manager_append_shown (shown, retry_after);
      /* Translators: %s is the time the server gave (an HTTP date) */
      return g_strdup_printf (_("it asks to wait until %s before trying again"), shown->str);
    }
  return g_strdup (_("try again in a moment"));
}

void
tern_manager_append_shown (GString    *out,
                           const char *name)
{
  size_t n = strlen (name);
  g_autofree char *shown = g_malloc (4 * n + 1); /* every byte's escape fits */

  tn_text_one_line (name, n, shown, 4 * n + 1, TN_TEXT_ESCAPE_C0, NULL);
  g_string_append (out, shown);
}

/* A member absent, null or of one type: json-glib's
 * get_*_member_with_default warn (a critical) on an array or an object
 * and quietly read another scalar type as 0 or NULL. */
static gboolean
member_is (JsonObject *object,
           const char *name,
           GType       type)
{
  JsonNode *node = json_object_get_member (object, name);

  return node == NULL || JSON_NODE_HOLDS_NULL (node)
         || (JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == type);
}

JsonObject *
tern_manager_read_partial_meta (const char *path)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *data = NULL;
  gsize length;
  JsonNode *root;
  JsonObject *object;

  /* Flat members only: anything deeper is not ours (and json-glib would
   * recurse on it), nor is what only json-glib reads (C's escapes, a
   * repeated "url" of which it keeps the last). tn_read_file refuses a
   * FIFO or a device without blocking, and a large file before reading. */
  if (tn_read_file (path, 65536, &data, &length, NULL) != TN_OK
      || tn_json_check (data, length, path, 4,
                        TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS
                        | TN_JSON_NO_HUGE_INTEGERS,
                        NULL) != TN_OK
      || !json_parser_load_from_data (parser, data, (gssize) length, NULL))
    return NULL;
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  object = json_node_get_object (root);
  if (!member_is (object, "url", G_TYPE_STRING)
      || !member_is (object, "etag", G_TYPE_STRING)
      || !member_is (object, "sha256", G_TYPE_STRING)
      || !member_is (object, "size", G_TYPE_INT64)
      || !member_is (object, "stopped", G_TYPE_BOOLEAN))
    return NULL;
  return json_object_ref (object);
}
