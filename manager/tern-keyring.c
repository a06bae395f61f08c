/* tern-keyring.c: API keys in the Secret Service (tern-keyring.h). */
#include "tern-keyring.h"

#include "tern-manager-private.h"

#ifdef TERN_HAVE_LIBSECRET
#include <libsecret/secret.h>

/* One item per server address; the app and tern-cli share them. */
static const SecretSchema *
key_schema (void)
{
  static const SecretSchema schema = {
    .name = "io.github.tern.Tern.RemoteKey",
    .flags = SECRET_SCHEMA_NONE,
    .attributes = { { "url", SECRET_SCHEMA_ATTRIBUTE_STRING }, { NULL, 0 } },
  };
  return &schema;
}

/* A sibling schema: a lookup of the key by its url must never answer with
 * the password of the same address (libsecret matches the schema's name). */
static const SecretSchema *
password_schema (void)
{
  static const SecretSchema schema = {
    .name = "io.github.tern.Tern.RemotePassword",
    .flags = SECRET_SCHEMA_NONE,
    .attributes = { { "url", SECRET_SCHEMA_ATTRIBUTE_STRING }, { NULL, 0 } },
  };
  return &schema;
}

static void
explain (GError **error, GError *e)
{
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
               _("the system keyring is not available (%s); give the key through an environment "
                 "variable instead"),
               e->message);
  g_error_free (e);
}

gboolean
tern_keyring_built (void)
{
  return TRUE;
}

char *
tern_keyring_lookup (const char *url, GError **error)
{
  GError *e = NULL;
  char *key = secret_password_lookup_sync (key_schema (), NULL, &e, "url", url, NULL);

  if (e)
    explain (error, e);
  return key;
}

gboolean
tern_keyring_store (const char *url, const char *key, GError **error)
{
  GError *e = NULL;
  g_autofree char *label = g_strdup_printf (_("Tern: API key for %s"), url);

  if (!secret_password_store_sync (key_schema (), SECRET_COLLECTION_DEFAULT, label, key, NULL, &e,
                                   "url", url, NULL))
    {
      explain (error, e);
      return FALSE;
    }
  return TRUE;
}

gboolean
tern_keyring_clear (const char *url, GError **error)
{
  GError *e = NULL;

  secret_password_clear_sync (key_schema (), NULL, &e, "url", url, NULL);
  if (e)
    {
      explain (error, e);
      return FALSE;
    }
  return TRUE;
}

char *
tern_keyring_lookup_password (const char *url, GError **error)
{
  GError *e = NULL;
  char *password = secret_password_lookup_sync (password_schema (), NULL, &e, "url", url, NULL);

  if (e)
    explain (error, e);
  return password;
}

gboolean
tern_keyring_store_password (const char *url, const char *password, GError **error)
{
  GError *e = NULL;
  g_autofree char *label = g_strdup_printf (_("Tern: password for %s"), url);

  if (!secret_password_store_sync (password_schema (), SECRET_COLLECTION_DEFAULT, label, password,
                                   NULL, &e, "url", url, NULL))
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
                   _("the password in the address can only be kept in the system keyring, never "
                     "in the settings, and the keyring is not available (%s): start a keyring "
                     "service, or give the address without its password"),
                   e->message);
      g_error_free (e);
      return FALSE;
    }
  return TRUE;
}

gboolean
tern_keyring_clear_password (const char *url, GError **error)
{
  GError *e = NULL;

  secret_password_clear_sync (password_schema (), NULL, &e, "url", url, NULL);
  if (e)
    {
      explain (error, e);
      return FALSE;
    }
  return TRUE;
}

#else /* !TERN_HAVE_LIBSECRET */

static void
not_built (GError **error)
{
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
               _("this Tern was built without the system keyring (libsecret); give the key "
                 "through an environment variable instead"));
}

gboolean
tern_keyring_built (void)
{
  return FALSE;
}

char *
tern_keyring_lookup (const char *url, GError **error)
{
  (void) url;
  (void) error;
  return NULL;
}

gboolean
tern_keyring_store (const char *url, const char *key, GError **error)
{
  (void) url;
  (void) key;
  not_built (error);
  return FALSE;
}

gboolean
tern_keyring_clear (const char *url, GError **error)
{
  (void) url;
  (void) error;
  return TRUE;
}

char *
tern_keyring_lookup_password (const char *url, GError **error)
{
  (void) url;
  (void) error;
  return NULL;
}

gboolean
tern_keyring_store_password (const char *url, const char *password, GError **error)
{
  (void) url;
  (void) password;
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
               _("this Tern was built without the system keyring (libsecret), the only place it "
                 "keeps a password: give the address without its password"));
  return FALSE;
}

gboolean
tern_keyring_clear_password (const char *url, GError **error)
{
  (void) url;
  (void) error;
  return TRUE;
}

#endif
