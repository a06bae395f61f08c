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

/* why: a translated sentence whose one %s is libsecret's own words. */
static void
explain_as (GError **error, GError *e, const char *why)
{
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, why, e->message);
  g_error_free (e);
}

/* What an unavailable keyring means for a key; a password, which has no
 * environment variable to fall back on, has its own sentence. */
#define KEY_UNAVAILABLE                                                                          \
  N_("the system keyring is not available (%s); give the key through an environment "            \
     "variable instead")

static void
explain (GError **error, GError *e)
{
  explain_as (error, e, _(KEY_UNAVAILABLE));
}

gboolean
tern_keyring_built (void)
{
  return TRUE;
}

/* The key and the password of an address are kept alike and differ only in
 * their schema, so both go through these three. */
static char *
lookup_in (const SecretSchema *schema, const char *url, GError **error)
{
  GError *e = NULL;
  char *secret = secret_password_lookup_sync (schema, NULL, &e, "url", url, NULL);

  if (e)
    explain (error, e);
  return secret;
}

/* unavailable: the sentence, with one %s, that says why it was not kept. */
static gboolean
store_in (const SecretSchema *schema, const char *label, const char *url, const char *secret,
          const char *unavailable, GError **error)
{
  GError *e = NULL;

  if (!secret_password_store_sync (schema, SECRET_COLLECTION_DEFAULT, label, secret, NULL, &e,
                                   "url", url, NULL))
    {
      explain_as (error, e, unavailable);
      return FALSE;
    }
  return TRUE;
}

static gboolean
clear_in (const SecretSchema *schema, const char *url, GError **error)
{
  GError *e = NULL;

  secret_password_clear_sync (schema, NULL, &e, "url", url, NULL);
  if (e)
    {
      explain (error, e);
      return FALSE;
    }
  return TRUE;
}

char *
tern_keyring_lookup (const char *url, GError **error)
{
  return lookup_in (key_schema (), url, error);
}

gboolean
tern_keyring_store (const char *url, const char *key, GError **error)
{
  g_autofree char *label = g_strdup_printf (_("Tern: API key for %s"), url);

  return store_in (key_schema (), label, url, key, _(KEY_UNAVAILABLE), error);
}

gboolean
tern_keyring_clear (const char *url, GError **error)
{
  return clear_in (key_schema (), url, error);
}

char *
tern_keyring_lookup_password (const char *url, GError **error)
{
  return lookup_in (password_schema (), url, error);
}

gboolean
tern_keyring_store_password (const char *url, const char *password, GError **error)
{
  g_autofree char *label = g_strdup_printf (_("Tern: password for %s"), url);

  return store_in (password_schema (), label, url, password,
                   _("the password in the address can only be kept in the system keyring, never "
                     "in the settings, and the keyring is not available (%s): start a keyring "
                     "service, or give the address without its password"),
                   error);
}

gboolean
tern_keyring_clear_password (const char *url, GError **error)
{
  return clear_in (password_schema (), url, error);
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

/* Without a keyring nothing is kept, a key no more than a password. */
char *
tern_keyring_lookup_password (const char *url, GError **error)
{
  return tern_keyring_lookup (url, error);
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
  return tern_keyring_clear (url, error);
}

#endif
