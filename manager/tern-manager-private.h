/* tern-manager-private.h: helpers shared inside the manager library. */
#pragma once

#include "tern-manager.h"

/* The manager's messages are in the app's translation domain: gi18n-lib's
 * _() names the domain, so they are translated in the CLI too, whatever its
 * textdomain () (docs/TRANSLATING.md). */
#ifndef GETTEXT_PACKAGE
#define GETTEXT_PACKAGE "tern"
#endif
#include <glib/gi18n-lib.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <inttypes.h>

#include "tern.h"

G_BEGIN_DECLS

/* A download in progress: FILE.partial, with what we know about the server's
 * copy (URL, ETag, advertised hash) in FILE.partial.json so that a restart
 * can resume it with a Range request. */
#define TERN_PARTIAL_SUFFIX ".partial"
#define TERN_PARTIAL_META_SUFFIX ".partial.json"

/* FILE.partial.json read as the downloader and the store both trust it
 * (docs/MODELS.md, "Resuming"): a regular file of at most 64 KiB, one
 * strict JSON object at most 4 deep, "url", "etag" and "sha256" strings or
 * null, "size" a whole number, "stopped" true or false, each of them may be null
 * or absent. NULL
 * otherwise (missing, a FIFO, too large, cut short, other types): such a
 * file is not one Tern wrote, and its partial starts afresh. */
JsonObject *tern_manager_read_partial_meta (const char *path);

/* Imported models are tags "local:NAME". */
#define TERN_LOCAL_FAMILY "local"
#define TERN_LOCAL_PREFIX "local:"

/* A plain file or directory name: [A-Za-z0-9._+-]+, not starting with '.',
 * at most 200 bytes. */
gboolean tern_manager_safe_name (const char *name);
gboolean tern_manager_valid_url (const char *url);
/* An engine error's message in the user's language (docs/TRANSLATING.md). */
char    *tern_manager_engine_message (const tn_error *err);
/* 64 hexadecimal digits (either case). */
gboolean tern_manager_is_sha256 (const char *text);
/* a + b, or G_MAXUINT64 where that would wrap: sums of catalog sizes
 * (each up to 2^63-1) must not come out small. */
static inline guint64
tern_manager_add_size (guint64 a,
                       guint64 b)
{
  return a > G_MAXUINT64 - b ? G_MAXUINT64 : a + b;
}

/* Writes `contents` to `path` atomically and durably: a temporary file in the
 * same directory, fsync, rename, fsync of the directory. */
gboolean tern_manager_write_file_atomic (const char  *path,
                                         const char  *contents,
                                         gsize        length,
                                         GError     **error);
/* fsync of a directory, so that a rename inside it survives a crash. */
void     tern_manager_sync_dir (const char *dir);

/* SHA-256 of a file's bytes, lowercase hex; NULL with an error on failure.
 * Checks `cancellable` between blocks. The _fd one stores the bytes hashed
 * so far in *hashed (atomically, after each MiB; NULL: not wanted), so that
 * another thread can show how far the check of a large file is. */
char    *tern_manager_sha256_file (const char    *path,
                                   guint64       *hashed,
                                   GCancellable  *cancellable,
                                   GError       **error);
char    *tern_manager_sha256_fd   (int            fd,
                                   const char    *name,
                                   guint64       *hashed,
                                   GCancellable  *cancellable,
                                   GError       **error);
/* Tests only: hook (hashed, user_data) runs in the hashing thread after each
 * MiB that tern_manager_sha256_fd hashes (a test slows the check down there
 * to watch it). NULL removes it. Set it while nothing hashes. */
void     tern_manager_test_set_hash_hook (void     (*hook) (guint64  hashed,
                                                            gpointer user_data),
                                          gpointer   user_data);

/* Tests only: every tern_manager_write_file_atomic of a path that ends in
 * `suffix` fails its write() with errsv (ENOSPC: a full disk, which needs
 * root to make). NULL removes it. Set it while nothing writes. */
void     tern_manager_test_fail_writes (const char *suffix,
                                        int         errsv);

/* Tests only: every session the manager makes from now on trusts the
 * certificate authorities of `database` instead of the system's (a test's
 * own https server). NULL: the system's again. */
void     tern_manager_test_set_tls_database (GTlsDatabase *database);
/* Gives a new session what tern_manager_test_set_tls_database asked for;
 * nothing otherwise. */
void     tern_manager_session_init (SoupSession *session);

/* A redirect from `from` to `to` leaves TLS (https to plain http): what a
 * network attacker or a hostile mirror would do to swap the bytes and the
 * hash that vouches for them. Never followed. */
gboolean tern_manager_redirect_downgrades (GUri *from,
                                          GUri *to);
/* Sets the error that refuses such a redirect from `from` to `to`. */
void     tern_manager_set_downgrade_error (GError    **error,
                                          const char *from,
                                          const char *to);
/* For a message whose redirects libsoup follows: one that
 * tern_manager_redirect_downgrades is not followed but ends the message
 * with the 3xx answer; tern_manager_refused_downgrade then says so. */
void     tern_manager_refuse_downgrades (SoupMessage *msg);
/* TRUE, with the error set, when msg ended at a refused redirect. */
gboolean tern_manager_refused_downgrade (SoupMessage *msg,
                                        GError     **error);

/* Deletes a directory and everything in it (no symlinks followed). */
gboolean tern_manager_remove_tree (const char  *path,
                                   GError     **error);

/* Free bytes for an unprivileged user on the file system holding `path`
 * (statvfs); G_MAXUINT64 when it cannot be told. */
guint64  tern_manager_free_space (const char *path);

/* A file on this machine whose bytes hash to sha256 (and are size bytes),
 * found in other tools' model folders (Hugging Face's cache, Ollama's blobs,
 * llama.cpp's cache, LM Studio's models) and verified by reading it; NULL
 * when there is none. TERN_ADOPT=0 turns the search off. */
char    *tern_manager_find_local_copy (const char   *sha256,
                                       guint64       size,
                                       GCancellable *cancellable);
/* Makes dest (which must not exist) the bytes of source: a reflink where the
 * file system can, else a hard link, else a symbolic link. */
gboolean tern_manager_link_copy (const char  *source,
                                 const char  *dest,
                                 GError     **error);

/* A proxy resolver for http_proxy / https_proxy / all_proxy / no_proxy
 * (either case), or NULL when none of them is set. */
GProxyResolver *tern_manager_proxy_resolver_from_env (void);

/* A failure to reach a server at all, as opposed to a transfer that broke
 * off: the machine is offline, the name does not resolve, nothing listens.
 * Such failures are TERN_MANAGER_ERROR_OFFLINE. */
gboolean tern_manager_unreachable (const GError *error);

/* `name` inside a one-line message: its control characters as \xNN (C0,
 * DEL) or \u00NN (C1), bytes that are not UTF-8 as \xNN, as `tern-cli info`
 * shows metadata. Names from a Hub's listing or a catalog are theirs to
 * choose: a newline in a file name started a line of their choosing in our
 * error, ESC or U+009B a terminal sequence. */
void     tern_manager_append_shown (GString    *out,
                                    const char *name);

/* What a busy server's Retry-After asks (RFC 9110: seconds or an HTTP
 * date; may be NULL), as the end of a sentence: "it asks to wait 30
 * seconds before trying again", or "try again in a moment" without one
 * (or with one of more than 64 bytes, which is no date). */
char    *tern_manager_wait_advice (const char *retry_after);

G_END_DECLS

G_BEGIN_DECLS

/* Store internals used by the downloader (same thread as the store). */

/* TRUE when the file is recorded as verified and not marked broken; size and
 * sha256 (may be NULL) get what was recorded. */
gboolean tern_model_store_lookup_file      (TernModelStore            *self,
                                            const char                *package_id,
                                            const char                *name,
                                            guint64                   *size,
                                            const char               **sha256);
/* The sha256 recorded for a file that is marked broken (NULL otherwise):
 * what its bytes should be when the catalog gives no hash. */
const char *tern_model_store_broken_file_sha256 (TernModelStore            *self,
                                                 const char                *package_id,
                                                 const char                *name);
/* Records a file that was verified and renamed into the package directory. */
gboolean tern_model_store_record_file      (TernModelStore            *self,
                                            const char                *package_id,
                                            const char                *name,
                                            guint64                    size,
                                            const char                *sha256,
                                            GError                   **error);
/* Marks the package installed: all of its catalog files must be recorded. */
gboolean tern_model_store_complete_package (TernModelStore            *self,
                                            const TernCatalogPackage  *package,
                                            GError                   **error);
/* Marks the tag installed: all of its packages must be installed. */
gboolean tern_model_store_add_tag          (TernModelStore            *self,
                                            const TernCatalogTag      *tag,
                                            GError                   **error);
/* Packages being downloaded in this process are never garbage-collected. */
void     tern_model_store_hold_package     (TernModelStore            *self,
                                            const char                *package_id);
void     tern_model_store_release_package  (TernModelStore            *self,
                                            const char                *package_id);
/* root/packages/PACKAGE/NAME */
char    *tern_model_store_get_file_path    (TernModelStore            *self,
                                            const char                *package_id,
                                            const char                *name);

/* The most transfers that ever ran at once (for tests of the limit). */
guint    tern_downloader_get_peak_transfers (TernDownloader           *self);

/* What a busy server's Retry-After asks (RFC 9110: seconds or an HTTP
 * date; may be NULL), as the end of a sentence: "it asks to wait 30
 * seconds before trying again", or "try again in a moment" without one
 * (or with one of more than 64 bytes, which is no date). */
char    *tern_manager_wait_advice (const char *retry_after);

G_END_DECLS
