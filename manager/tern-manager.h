/* tern-manager.h: the model manager: a catalog of downloadable models
 * (TernCatalog), the models installed on this machine (TernModelStore) and
 * the downloader that fills the store (TernDownloader).
 *
 * Threading: every object here belongs to the thread (GMainContext) that made
 * it; the downloader does its network and disk work in its own threads and
 * reports back to that context. Nothing in here exits or aborts on bad input:
 * errors come back as GError with a message that names the file, URL or
 * catalog field at fault. */
#pragma once

#include <glib.h>

#include "tern-catalog.h"
#include "tern-downloader.h"
#include "tern-model-store.h"

G_BEGIN_DECLS

#define TERN_MANAGER_ERROR (tern_manager_error_quark ())
GQuark tern_manager_error_quark (void);

typedef enum {
  TERN_MANAGER_ERROR_CATALOG,      /* the catalog file is unreadable or invalid */
  TERN_MANAGER_ERROR_UNKNOWN_TAG,  /* no such tag in the catalog or the store */
  TERN_MANAGER_ERROR_APP_TOO_OLD,  /* the tag needs a newer Tern */
  TERN_MANAGER_ERROR_STATE,        /* the installed-state file is unreadable or invalid */
  TERN_MANAGER_ERROR_HTTP,         /* the server answered with an error status */
  TERN_MANAGER_ERROR_NETWORK,      /* connection failed, dropped or timed out */
  TERN_MANAGER_ERROR_CHECKSUM,     /* the bytes are not the ones the catalog/server promised */
  TERN_MANAGER_ERROR_SIZE,         /* the server's size disagrees with the catalog */
  TERN_MANAGER_ERROR_NO_SPACE,     /* not enough free disk space */
  TERN_MANAGER_ERROR_BUSY,         /* already being downloaded (here or by another process) */
  TERN_MANAGER_ERROR_IMPORT,       /* the file to import is not a readable GGUF model */
  TERN_MANAGER_ERROR_IO,           /* reading or writing the store failed */
  TERN_MANAGER_ERROR_OFFLINE,      /* the server cannot be reached at all: no
                                    * network, name not found, refused */
} TernManagerError;

/* The version of Tern this library was built for ("0.1.0"). */
const char *tern_manager_app_version (void);

/* Compares dotted numeric versions ("0.10.2" > "0.9"); missing parts are 0.
 * Returns <0, 0, >0. Non-numeric parts compare as 0. */
int tern_manager_version_compare (const char *a,
                                  const char *b);

/* "1.5 GB", "610.0 MB", "12.0 kB", "512 bytes" (SI units, as file managers
 * show), in the words of the user's language ("1,5 Go" in French) with its
 * decimal separator: LC_NUMERIC's where one is set, else the translation's. */
char *tern_manager_format_size (guint64 bytes);
/* The decimal separator tern_manager_format_size writes. */
const char *tern_manager_decimal_separator (void);

/* A download's time left, for the app's row and tern-cli pull: "1:58"
 * (minutes and seconds) under an hour, "1 h 05 min" from an hour on
 * ("75:00" reads as a clock); NULL when there is nothing true to say
 * (negative: unknown; over 99 hours: a retried connection crawling at a
 * byte a second gave "581222:16"). */
char *tern_manager_format_time_left (double seconds);

G_END_DECLS
