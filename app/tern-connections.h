/* tern-connections.h: the remote servers of Preferences > Connections
 * (docs/REMOTE.md): their addresses in GSettings ("remote-connections"),
 * their API keys in the system keyring, and the reference a remote model
 * goes by where a local one has its path ("remote:URL#MODEL"). */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

/* The API key for url: $TERN_REMOTE_API_KEY when set (a session without a
 * keyring, the tests), else the keyring's; NULL when there is none. */
char     *tern_connections_get_key   (const char  *url);
/* The address to connect to: url with the password the keyring keeps for
 * it put back (url itself when none); g_free. */
char     *tern_connections_get_url   (const char  *url);
/* Whether url still carries its password (an old setting that could not be
 * moved to the keyring). */
gboolean  tern_connections_has_password (const char *url);
/* Adds url (normalised as the client does: ".../v1", without a password)
 * and stores key (NULL or "": none) and the password in url, if any, in the
 * keyring; FALSE with the sentence to show, nothing stored in the settings,
 * when they cannot be kept there. */
gboolean  tern_connections_add       (GSettings   *settings,
                                      const char  *url,
                                      const char  *key,
                                      char       **normalised,
                                      GError     **error);
void      tern_connections_remove    (GSettings   *settings,
                                      const char  *url);
/* At start: moves the passwords of addresses saved with one into the
 * keyring and rewrites them without; leaves them where it cannot. */
void      tern_connections_migrate   (GSettings   *settings);
/* Tests only: keys and passwords kept in this process, not the keyring. */
void      _tern_connections_use_test_keyring (void);
/* Tests only: the test keyring refuses API keys (a keyring that fails). */
void      _tern_connections_test_keyring_refuse_keys (gboolean refuse);
/* Whether keys can be kept: FALSE when built without libsecret. */
gboolean  tern_connections_keyring_built (void);

char     *tern_remote_ref_new        (const char  *url,
                                      const char  *model);
/* TRUE when ref is a remote model's reference; url and model newly
 * allocated. */
gboolean  tern_remote_ref_parse      (const char  *ref,
                                      char       **url,
                                      char       **model);

/* In a thread: the model ids of url (g_strfreev), or NULL with the error
 * sentence. */
void      tern_connections_list_models_async  (const char          *url,
                                               GCancellable        *cancellable,
                                               GAsyncReadyCallback  callback,
                                               gpointer             user_data);
char    **tern_connections_list_models_finish (GAsyncResult        *result,
                                               GError             **error);

G_END_DECLS
