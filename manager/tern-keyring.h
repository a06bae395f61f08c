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

G_END_DECLS
