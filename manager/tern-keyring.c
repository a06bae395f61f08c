/* tern-keyring.c: API keys in the Secret Service (tern-keyring.h). */
#include "tern-keyring.h"

#include "tern-manager-private.h"

#define KEY_SCHEMA "io.github.tern.Tern.RemoteKey"
#define PASSWORD_SCHEMA "io.github.tern.Tern.RemotePassword"

#ifdef TERN_HAVE_LIBSECRET
#include <libsecret/secret.h>

/* One item per server address; the app and tern-cli share them. */
static const SecretSchema *
key_schema (void)
{
  static const SecretSchema schema = {
    .name = KEY_SCHEMA,
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
    .name = PASSWORD_SCHEMA,
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

static char *
real_lookup (const char *url, GError **error)
{
  return lookup_in (key_schema (), url, error);
}

static gboolean
real_store (const char *url, const char *key, GError **error)
{
  g_autofree char *label = g_strdup_printf (_("Tern: API key for %s"), url);

  return store_in (key_schema (), label, url, key, _(KEY_UNAVAILABLE), error);
}

static gboolean
real_clear (const char *url, GError **error)
{
  return clear_in (key_schema (), url, error);
}

static char *
real_lookup_password (const char *url, GError **error)
{
  return lookup_in (password_schema (), url, error);
}

static gboolean
real_store_password (const char *url, const char *password, GError **error)
{
  g_autofree char *label = g_strdup_printf (_("Tern: password for %s"), url);

  return store_in (password_schema (), label, url, password,
                   _("the password in the address can only be kept in the system keyring, never "
                     "in the settings, and the keyring is not available (%s): start a keyring "
                     "service, or give the address without its password"),
                   error);
}

static gboolean
real_clear_password (const char *url, GError **error)
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

static char *
real_lookup (const char *url, GError **error)
{
  (void) url;
  (void) error;
  return NULL;
}

static gboolean
real_store (const char *url, const char *key, GError **error)
{
  (void) url;
  (void) key;
  not_built (error);
  return FALSE;
}

static gboolean
real_clear (const char *url, GError **error)
{
  (void) url;
  (void) error;
  return TRUE;
}

/* Without a keyring nothing is kept, a key no more than a password. */
static char *
real_lookup_password (const char *url, GError **error)
{
  return real_lookup (url, error);
}

static gboolean
real_store_password (const char *url, const char *password, GError **error)
{
  (void) url;
  (void) password;
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
               _("this Tern was built without the system keyring (libsecret), the only place it "
                 "keeps a password: give the address without its password"));
  return FALSE;
}

static gboolean
real_clear_password (const char *url, GError **error)
{
  return real_clear (url, error);
}

#endif

char *
tern_keyring_address (const char *url)
{
  const GUriFlags flags = G_URI_FLAGS_HAS_PASSWORD | G_URI_FLAGS_ENCODED;
  g_autoptr (GUri) uri = url ? g_uri_parse (url, flags, NULL) : NULL;
  g_autoptr (GUri) bare = NULL;

  if (uri == NULL || g_uri_get_password (uri) == NULL)
    return g_strdup (url);
  bare = g_uri_build_with_user (flags, g_uri_get_scheme (uri), g_uri_get_user (uri), NULL, NULL,
                                g_uri_get_host (uri), g_uri_get_port (uri), g_uri_get_path (uri),
                                g_uri_get_query (uri), g_uri_get_fragment (uri));
  return g_uri_to_string (bare);
}

/* ------------------------------------------------------------ the tests' seam */

static TernKeyringTestHook test_hook;

void
_tern_keyring_set_test_hook (TernKeyringTestHook hook)
{
  test_hook = hook;
}

static char *
hooked_lookup (const char *schema, const char *url, GError **error)
{
  char *found = NULL;

  test_hook (TERN_KEYRING_TEST_LOOKUP, schema, NULL, url, NULL, &found, error);
  return found;
}

char *
tern_keyring_lookup (const char *url, GError **error)
{
  return test_hook ? hooked_lookup (KEY_SCHEMA, url, error) : real_lookup (url, error);
}

gboolean
tern_keyring_store (const char *url, const char *key, GError **error)
{
  g_autofree char *label = NULL;

  if (!test_hook)
    return real_store (url, key, error);
  label = g_strdup_printf (_("Tern: API key for %s"), url);
  return test_hook (TERN_KEYRING_TEST_STORE, KEY_SCHEMA, label, url, key, NULL, error);
}

gboolean
tern_keyring_clear (const char *url, GError **error)
{
  if (!test_hook)
    return real_clear (url, error);
  return test_hook (TERN_KEYRING_TEST_CLEAR, KEY_SCHEMA, NULL, url, NULL, NULL, error);
}

char *
tern_keyring_lookup_password (const char *url, GError **error)
{
  return test_hook ? hooked_lookup (PASSWORD_SCHEMA, url, error)
                   : real_lookup_password (url, error);
}

gboolean
tern_keyring_store_password (const char *url, const char *password, GError **error)
{
  g_autofree char *label = NULL;

  if (!test_hook)
    return real_store_password (url, password, error);
  label = g_strdup_printf (_("Tern: password for %s"), url);
  return test_hook (TERN_KEYRING_TEST_STORE, PASSWORD_SCHEMA, label, url, password, NULL, error);
}

gboolean
tern_keyring_clear_password (const char *url, GError **error)
{
  if (!test_hook)
    return real_clear_password (url, error);
  return test_hook (TERN_KEYRING_TEST_CLEAR, PASSWORD_SCHEMA, NULL, url, NULL, NULL, error);
}
