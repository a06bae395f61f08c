/* tern-downloader.h: downloads catalog tags into a TernModelStore.
 *
 * A pull of a tag downloads the files of its packages that the store does not
 * have yet, each to FILE.partial; the file is synced, its sha256 checked
 * (against the catalog, else against the hash the server advertises: Hugging
 * Face's X-Linked-Etag for large files), then renamed into place. Packages
 * and then the tag are marked installed only when everything is there.
 *
 * - Resume: an interrupted transfer continues with an HTTP Range request
 *   (If-Range with the server's ETag), within the pull or after a restart;
 *   a server that ignores Range (200) is read from the start again.
 * - Retries: network errors, time-outs and 5xx/408/429 are retried with
 *   exponential backoff; other 4xx, wrong sizes and wrong hashes are not.
 *   Attempts that got further into the file than any before do not count
 *   against the limit.
 * - At most max-concurrent (2) files at once over all pulls; a package wanted
 *   by two pulls at once is downloaded once.
 * - One pull of a tag at a time ("already being downloaded"), except that a
 *   pull cancelled and still winding down gives way to a new pull of its tag:
 *   the new one resumes the partial files once the old transfers have closed
 *   them (or goes on with the transfer the cancel had not reached yet), and
 *   the old one still returns its cancelled error ("pull-finished" for it
 *   then comes while the new one runs).
 * - Refused before anything is downloaded when the free space of the store's
 *   file system is less than what is missing plus a reserve.
 * - Proxies: http_proxy / https_proxy / all_proxy / no_proxy from the
 *   environment, else the system's GProxyResolver.
 *
 * Signals (emitted in the thread-default main context of the creator):
 *   "progress" (const char *tag, guint64 done, guint64 total, double
 *              bytes_per_second, double seconds_left [-1: unknown]): five
 *              times a second; tern_downloader_get_progress then gives
 *              the check's figures too
 *   "pull-finished" (const char *tag, const char *error_message [NULL: ok],
 *                    const GError *error [NULL: ok]): the error is the one
 *                    the pull returns next, so that a listener knows the
 *                    kind of failure at once (a row said "failed" first,
 *                    then what failed, when the answer came) */
#pragma once

#include <gio/gio.h>

#include "tern-catalog.h"
#include "tern-model-store.h"

G_BEGIN_DECLS

#define TERN_TYPE_DOWNLOADER (tern_downloader_get_type ())
G_DECLARE_FINAL_TYPE (TernDownloader, tern_downloader, TERN, DOWNLOADER, GObject)

/* Free bytes on the file system holding `path`. Called from the creator's
 * thread and from download threads: must be thread-safe. */
typedef guint64 (*TernFreeSpaceFunc) (const char *path,
                                      gpointer    user_data);

typedef struct {
  guint64 done;     /* bytes of the files this pull downloads, incl. resumed ones */
  guint64 total;
  double  rate;     /* bytes per second, smoothed */
  double  eta;      /* seconds; -1 when unknown */
  /* The check after a file's last byte (or of a file found already in
   * place): its sha256 is computed from the disk, about 15 s for 17 GB,
   * while done stays where the download ended. check_total is the bytes of
   * the pull's files being checked now, checked how many of them are hashed
   * so far; both 0 when no file of the pull is being checked. */
  guint64 checked;
  guint64 check_total;
} TernDownloadProgress;

/* Space kept free beyond what a pull needs. */
#define TERN_DOWNLOADER_FREE_SPACE_RESERVE (64u << 20)

TernDownloader *tern_downloader_new (TernModelStore *store);
TernModelStore *tern_downloader_get_store (TernDownloader *self);

/* Settings; the network ones (timeout) apply from the first pull on. */
void     tern_downloader_set_max_concurrent  (TernDownloader    *self,
                                              guint              n);
/* Attempts per file without progress; delays double from initial to max. */
void     tern_downloader_set_retry           (TernDownloader    *self,
                                              guint              max_attempts,
                                              guint              initial_delay_ms,
                                              guint              max_delay_ms);
/* Seconds without any byte moving before a connection counts as failed. */
void     tern_downloader_set_timeout         (TernDownloader    *self,
                                              guint              seconds);
/* Fewer than `bytes` in `seconds` (the body's, counted as it comes) is a
 * stalled transfer: retried and resumed as a dropped connection is, the
 * trickle not counting as progress. Default 64 KiB in 60 s (about 1 KiB/s);
 * seconds 0: no minimum. Tests set a short window. */
void     tern_downloader_set_min_rate        (TernDownloader    *self,
                                              guint              bytes,
                                              guint              seconds);
/* NULL restores statvfs. */
void     tern_downloader_set_free_space_func (TernDownloader    *self,
                                              TernFreeSpaceFunc  func,
                                              gpointer           user_data,
                                              GDestroyNotify     destroy);

void     tern_downloader_pull_async  (TernDownloader      *self,
                                      TernCatalog         *catalog,
                                      const char          *tag,
                                      GCancellable        *cancellable,
                                      GAsyncReadyCallback  callback,
                                      gpointer             user_data);
gboolean tern_downloader_pull_finish (TernDownloader      *self,
                                      GAsyncResult        *result,
                                      GError             **error);
/* Blocks, iterating the thread-default main context, until the pull ends. */
gboolean tern_downloader_pull        (TernDownloader      *self,
                                      TernCatalog         *catalog,
                                      const char          *tag,
                                      GCancellable        *cancellable,
                                      GError             **error);

gboolean tern_downloader_is_pulling   (TernDownloader       *self,
                                       const char           *tag);
gboolean tern_downloader_get_progress (TernDownloader       *self,
                                       const char           *tag,
                                       TernDownloadProgress *progress);
/* Cancels a running pull of the tag (its partial files are kept). The pull
 * returns once its transfers have wound down; a pull of the tag asked for
 * before that takes its place. */
void     tern_downloader_cancel       (TernDownloader       *self,
                                       const char           *tag);

/* Body bytes received from servers since the downloader was made. */
guint64  tern_downloader_get_bytes_received (TernDownloader *self);

G_END_DECLS
