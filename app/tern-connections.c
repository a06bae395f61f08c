/* tern-connections.c: remote servers, their keys and model references. */
#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "tern-connections.h"
#include "tern-keyring.h"
#include "tern-remote.h"

#define REF_PREFIX "remote:"

char *
tern_connections_get_key (const char *url)
{
  const char *env = g_getenv ("TERN_REMOTE_API_KEY");

  if (env != NULL && *env != '\0')
    return g_strdup (env);
  /* No Secret Service (a bare session, Xvfb): no key, which a server that
   * needs one answers with 401, said in words. */
  return tern_keyring_lookup (url, NULL);
}

gboolean
tern_connections_keyring_built (void)
{
  return tern_keyring_built ();
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
  g_autofree char *base = NULL;

  if (r == NULL)
    return FALSE;
  base = g_strdup (tern_remote_base_url (r));
  tern_remote_free (r);
  if (key != NULL && *key != '\0' && !tern_keyring_store (base, key, error))
    return FALSE;
  g_strv_builder_addv (b, (const char **) list);
  if (!g_strv_contains ((const char * const *) list, base))
    g_strv_builder_add (b, base);
  next = g_strv_builder_end (b);
  g_settings_set_strv (settings, "remote-connections", (const char * const *) next);
  if (normalised != NULL)
    *normalised = g_steal_pointer (&base);
  return TRUE;
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
  tern_keyring_clear (url, NULL);
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
  GError *error = NULL;
  TernRemote *r = tern_remote_new (url, key, &error);
  char **models = NULL;

  (void) source;
  if (r != NULL)
    models = tern_remote_list_models (r, cancellable, &error);
  tern_remote_free (r);
  if (key != NULL)
    memset (key, 0, strlen (key));
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
