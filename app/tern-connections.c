/* tern-connections.c: remote servers, their keys and model references. */
#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "tern-connections.h"
#include "tern-keyring.h"
#include "tern-remote.h"

#define REF_PREFIX "remote:"

/* The tests' keyring (no Secret Service under Xvfb): url -> secret, one
 * table per kind; NULL in the app. */
static GHashTable *test_keys;
static GHashTable *test_passwords;
static gboolean test_refuse_keys;

void
_tern_connections_use_test_keyring (void)
{
  if (test_keys == NULL)
    {
      test_keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      test_passwords = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
    }
}

void
_tern_connections_test_keyring_refuse_keys (gboolean refuse)
{
  test_refuse_keys = refuse;
}

static char *
lookup_secret (gboolean password, const char *url)
{
  if (test_keys != NULL)
    return g_strdup (g_hash_table_lookup (password ? test_passwords : test_keys, url));
  /* No Secret Service (a bare session, Xvfb): no key, which a server that
   * needs one answers with 401, said in words. */
  return password ? tern_keyring_lookup_password (url, NULL) : tern_keyring_lookup (url, NULL);
}

static gboolean
store_secret (gboolean password, const char *url, const char *secret, GError **error)
{
  if (test_keys != NULL)
    {
      if (!password && test_refuse_keys)
        {
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED, "the test keyring refuses keys");
          return FALSE;
        }
      g_hash_table_replace (password ? test_passwords : test_keys, g_strdup (url), g_strdup (secret));
      return TRUE;
    }
  return password ? tern_keyring_store_password (url, secret, error)
                  : tern_keyring_store (url, secret, error);
}

static void
clear_secret (gboolean password, const char *url)
{
  if (test_keys != NULL)
    g_hash_table_remove (password ? test_passwords : test_keys, url);
  else if (password)
    tern_keyring_clear_password (url, NULL);
  else
    tern_keyring_clear (url, NULL);
}

/* url with its password (as written, percent-encoding kept) taken out into
 * *password, or NULL when it has none. */
static char *
split_password (const char  *url,
                char       **password)
{
  const GUriFlags flags = G_URI_FLAGS_HAS_PASSWORD | G_URI_FLAGS_ENCODED;
  g_autoptr(GUri) uri = g_uri_parse (url, flags, NULL);
  g_autoptr(GUri) bare = NULL;

  *password = NULL;
  if (uri == NULL || g_uri_get_password (uri) == NULL || *g_uri_get_password (uri) == '\0')
    return g_strdup (url);
  *password = g_strdup (g_uri_get_password (uri));
  bare = g_uri_build_with_user (flags, g_uri_get_scheme (uri), g_uri_get_user (uri), NULL, NULL,
                                g_uri_get_host (uri), g_uri_get_port (uri), g_uri_get_path (uri),
                                g_uri_get_query (uri), g_uri_get_fragment (uri));
  return g_uri_to_string (bare);
}

gboolean
tern_connections_has_password (const char *url)
{
  g_autofree char *password = NULL;
  g_autofree char *bare = split_password (url, &password);

  return password != NULL;
}

char *
tern_connections_get_url (const char *url)
{
  const GUriFlags flags = G_URI_FLAGS_HAS_PASSWORD | G_URI_FLAGS_ENCODED;
  g_autoptr(GUri) uri = g_uri_parse (url, flags, NULL);
  g_autoptr(GUri) full = NULL;
  g_autofree char *password = NULL;
  char *out;

  /* Only an address with a user name can have a password put away. */
  if (uri == NULL || g_uri_get_user (uri) == NULL || g_uri_get_password (uri) != NULL
      || (password = lookup_secret (TRUE, url)) == NULL)
    return g_strdup (url);
  full = g_uri_build_with_user (flags, g_uri_get_scheme (uri), g_uri_get_user (uri), password,
                                NULL, g_uri_get_host (uri), g_uri_get_port (uri),
                                g_uri_get_path (uri), g_uri_get_query (uri),
                                g_uri_get_fragment (uri));
  out = g_uri_to_string (full);
  memset (password, 0, strlen (password));
  return out;
}

char *
tern_connections_get_key (const char *url)
{
  const char *env = g_getenv ("TERN_REMOTE_API_KEY");

  if (env != NULL && *env != '\0')
    return g_strdup (env);
  return lookup_secret (FALSE, url);
}

gboolean
tern_connections_keyring_built (void)
{
  return tern_keyring_built ();
}

static void
set_list (GSettings  *settings,
          char      **list)
{
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) next = NULL;

  for (guint i = 0; list[i] != NULL; i++)
    {
      gboolean seen = FALSE;
      for (guint j = 0; j < i && !seen; j++)
        seen = strcmp (list[i], list[j]) == 0;
      if (!seen)
        g_strv_builder_add (b, list[i]);
    }
  next = g_strv_builder_end (b);
  g_settings_set_strv (settings, "remote-connections", (const char * const *) next);
}

gboolean
tern_connections_add (GSettings   *settings,
                      const char  *url,
                      const char  *key,
                      char       **normalised,
                      GError     **error)
{
  g_auto(GStrv) list = g_settings_get_strv (settings, "remote-connections");
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) next = NULL;
  TernRemote *r = tern_remote_new (url, NULL, error);
  g_autofree char *password = NULL;
  g_autofree char *base = NULL;
  g_autofree char *before = NULL;

  if (r == NULL)
    return FALSE;
  /* The settings are a plain file (dconf): the password goes to the
   * keyring, or the address is not added (docs/REMOTE.md). */
  base = split_password (tern_remote_base_url (r), &password);
  tern_remote_free (r);
  if (password != NULL)
    {
      gboolean stored;

      /* Put back if the key cannot be stored: a failed Add leaves the
       * keyring as it was, not with a password for an address the user
       * never saw added. */
      before = lookup_secret (TRUE, base);
      stored = store_secret (TRUE, base, password, error);
      memset (password, 0, strlen (password));
      if (!stored)
        {
          if (before != NULL)
            memset (before, 0, strlen (before));
          return FALSE;
        }
    }
  if (key != NULL && *key != '\0' && !store_secret (FALSE, base, key, error))
    {
      if (password != NULL && before != NULL)
        store_secret (TRUE, base, before, NULL);
      else if (password != NULL)
        clear_secret (TRUE, base);
      if (before != NULL)
        memset (before, 0, strlen (before));
      return FALSE;
    }
  if (before != NULL)
    memset (before, 0, strlen (before));
  g_strv_builder_addv (b, (const char **) list);
  g_strv_builder_add (b, base);
  next = g_strv_builder_end (b);
  set_list (settings, next);
  if (normalised != NULL)
    *normalised = g_steal_pointer (&base);
  return TRUE;
}

void
tern_connections_migrate (GSettings *settings)
{
  g_auto(GStrv) list = g_settings_get_strv (settings, "remote-connections");
  gboolean changed = FALSE;

  /* Addresses saved with their password before it went to the keyring.
   * Without a keyring one stays as it was (Preferences says so): taking it
   * out would break the connection without a word. */
  for (guint i = 0; list[i] != NULL; i++)
    {
      g_autofree char *password = NULL;
      g_autofree char *bare = split_password (list[i], &password);
      g_autofree char *key = NULL;

      if (password == NULL)
        continue;
      if (store_secret (TRUE, bare, password, NULL))
        {
          /* The key was stored under the address as given. */
          key = lookup_secret (FALSE, list[i]);
          if (key != NULL && store_secret (FALSE, bare, key, NULL))
            clear_secret (FALSE, list[i]);
          g_free (list[i]);
          list[i] = g_steal_pointer (&bare);
          changed = TRUE;
        }
      memset (password, 0, strlen (password));
      if (key != NULL)
        memset (key, 0, strlen (key));
    }
  if (changed)
    set_list (settings, list);
}

void
tern_connections_remove (GSettings  *settings,
                         const char *url)
{
  g_auto(GStrv) list = g_settings_get_strv (settings, "remote-connections");
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) next = NULL;

  for (guint i = 0; list[i] != NULL; i++)
    if (strcmp (list[i], url) != 0)
      g_strv_builder_add (b, list[i]);
  next = g_strv_builder_end (b);
  g_settings_set_strv (settings, "remote-connections", (const char * const *) next);
  clear_secret (FALSE, url);
  clear_secret (TRUE, url);
}

char *
tern_remote_ref_new (const char *url,
                     const char *model)
{
  return g_strconcat (REF_PREFIX, url, "#", model, NULL);
}

gboolean
tern_remote_ref_parse (const char  *ref,
                       char       **url,
                       char       **model)
{
  const char *hash;

  /* A server address has no fragment (tern_remote_new refuses one): the
   * first '#' ends it. */
  if (ref == NULL || !g_str_has_prefix (ref, REF_PREFIX))
    return FALSE;
  ref += strlen (REF_PREFIX);
  hash = strchr (ref, '#');
  if (hash == NULL || hash == ref || hash[1] == '\0')
    return FALSE;
  *url = g_strndup (ref, (gsize) (hash - ref));
  *model = g_strdup (hash + 1);
  return TRUE;
}

static void
list_thread (GTask        *task,
             gpointer      source,
             gpointer      data,
             GCancellable *cancellable)
{
  const char *url = data;
  g_autofree char *key = tern_connections_get_key (url);
  g_autofree char *full = tern_connections_get_url (url);
  GError *error = NULL;
  TernRemote *r = tern_remote_new (full, key, &error);
  char **models = NULL;

  (void) source;
  if (r != NULL)
    models = tern_remote_list_models (r, cancellable, &error);
  tern_remote_free (r);
  if (key != NULL)
    memset (key, 0, strlen (key));
  memset (full, 0, strlen (full));
  if (models != NULL)
    g_task_return_pointer (task, models, (GDestroyNotify) g_strfreev);
  else
    g_task_return_error (task, error);
}

void
tern_connections_list_models_async (const char          *url,
                                    GCancellable        *cancellable,
                                    GAsyncReadyCallback  callback,
                                    gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);

  g_task_set_task_data (task, g_strdup (url), g_free);
  g_task_run_in_thread (task, list_thread);
}

char **
tern_connections_list_models_finish (GAsyncResult  *result,
                                     GError       **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}
