/* tern-keyring.h: API keys of remote servers in the system keyring (the
 * Secret Service, through libsecret), never in settings files. Optional at
 * build time (libsecret-1) and at run time (a session without a Secret
 * Service, such as a test under Xvfb, has none): tern_keyring_available says
 * which, and the other calls then fail with a message that says so. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* FALSE when built without libsecret; a running Secret Service is found out
 * only by the calls below. */
gboolean tern_keyring_built (void);
/* The key stored for this server address; NULL with no error when there is
 * none, NULL with an error when the keyring cannot be asked. */
char    *tern_keyring_lookup (const char *url, GError **error);
gboolean tern_keyring_store  (const char *url, const char *key, GError **error);
gboolean tern_keyring_clear  (const char *url, GError **error);

/* The password of an address that carries one (https://user:password@host),
 * kept apart from the key under url, the address without its password, so
 * that the address itself can go into the settings (docs/REMOTE.md). The
 * same contract as the key's calls; a failed store says that the password
 * cannot be kept. */
char    *tern_keyring_lookup_password (const char *url, GError **error);
gboolean tern_keyring_store_password  (const char *url, const char *password, GError **error);
gboolean tern_keyring_clear_password  (const char *url, GError **error);

/* The address an item is kept under: url without the password it may carry
 * (https://user:password@host/v1 -> https://user@host/v1, the user kept, as
 * the app keys them), so that no item's attributes or label hold a password
 * in clear; url itself when it has none or is no URI. g_free. */
char    *tern_keyring_address (const char *url);

/* Tests only (no Secret Service runs under a test): with a hook set, each
 * lookup, store and clear above goes to it instead, with the item's schema
 * name, its label (store only, else NULL), its url attribute and its secret
 * (store only); a lookup puts what it finds in *found. NULL puts the
 * keyring back. */
typedef enum
{
  TERN_KEYRING_TEST_LOOKUP,
  TERN_KEYRING_TEST_STORE,
  TERN_KEYRING_TEST_CLEAR,
} TernKeyringTestOp;
typedef gboolean (*TernKeyringTestHook) (TernKeyringTestOp op, const char *schema,
                                         const char *label, const char *url, const char *secret,
                                         char **found, GError **error);
void     _tern_keyring_set_test_hook (TernKeyringTestHook hook);

G_END_DECLS
