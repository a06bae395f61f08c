/* tern-model-store.h: the models installed on this machine, under
 * $XDG_DATA_HOME/tern/models/ (or another root):
 *
 *   packages/PACKAGE/FILE            verified files, one directory per package
 *   packages/PACKAGE/FILE.partial    a download in progress (resumable)
 *   installed.json                   which tags, packages and files are installed,
 *                                    with their sizes and sha256; written atomically
 *
 * A package shared by several tags is stored once and deleted only when the
 * last installed tag that uses it is removed. A package is installed only
 * when all of its files are there and verified; a tag only when all of its
 * packages are. Imported models ("local:NAME") are recorded by path; the
 * file itself stays where it is and is never deleted by the store.
 *
 * Mutations lock the root (flock) and re-read installed.json first, so that
 * the app and tern-cli working on the same store do not lose each other's
 * changes. Signal "changed" follows every change. */
#pragma once

#include <gio/gio.h>

#include "tern-catalog.h"

G_BEGIN_DECLS

typedef enum {
  TERN_MODEL_STATE_AVAILABLE,  /* in the catalog, not installed */
  TERN_MODEL_STATE_PARTIAL,    /* not installed; some of it is on disk (resumable) */
  TERN_MODEL_STATE_INSTALLED,
  TERN_MODEL_STATE_BROKEN,     /* installed, but `check` found a file missing or damaged */
} TernModelState;

const char *tern_model_state_to_string (TernModelState state);

#define TERN_TYPE_MODEL_STORE (tern_model_store_get_type ())
G_DECLARE_FINAL_TYPE (TernModelStore, tern_model_store, TERN, MODEL_STORE, GObject)

/* $XDG_DATA_HOME/tern/models */
char           *tern_model_store_default_root (void);

/* root NULL: the default. Creates the directory; reads installed.json. */
TernModelStore *tern_model_store_new  (const char      *root,
                                       GError         **error);
const char     *tern_model_store_get_root (TernModelStore *self);
/* Re-reads installed.json (another process may have changed it). */
gboolean        tern_model_store_reload (TernModelStore  *self,
                                         GError         **error);

/* Installed tags, catalog and local ones, sorted; free with g_strfreev. */
char          **tern_model_store_list_tags (TernModelStore *self);
gboolean        tern_model_store_has_tag   (TernModelStore *self,
                                            const char     *tag);
gboolean        tern_model_store_is_local  (TernModelStore *self,
                                            const char     *tag);
/* The label recorded at install time; NULL when not installed. */
const char     *tern_model_store_get_label (TernModelStore *self,
                                            const char     *tag);
/* State of a tag: catalog_tag may be NULL (then only the store is asked:
 * AVAILABLE means "not installed"). */
TernModelState  tern_model_store_get_state (TernModelStore       *self,
                                            const char           *tag,
                                            const TernCatalogTag *catalog_tag);
/* The model file of an installed tag's package in that role (the first file
 * of the package); for a local tag, the imported file (base only). NULL when
 * the tag is not installed or has no package in that role. */
char           *tern_model_store_get_path  (TernModelStore  *self,
                                            const char      *tag,
                                            TernPackageRole  role);
/* How to speculate with an installed tag's draft, as tern-cli's --spec
 * takes it: "draft:PATH", "dflash:PATH" or "mtp:PATH" by the catalog's
 * draft_kind; *on_by_default (may be NULL) is the tag's flags.speculation.
 * NULL when the tag is not installed or has no draft. */
char           *tern_model_store_get_draft_spec (TernModelStore *self,
                                                 const char     *tag,
                                                 gboolean       *on_by_default);
/* An installed catalog tag's flags.single_turn (flash: a pinned system
 * prompt, one question at a time); FALSE for a local or unknown tag. */
gboolean        tern_model_store_get_single_turn (TernModelStore *self,
                                                  const char     *tag);
/* Bytes of an installed tag's distinct packages (or the imported file). */
guint64         tern_model_store_get_tag_size (TernModelStore *self,
                                               const char     *tag);

gboolean        tern_model_store_has_package  (TernModelStore *self,
                                               const char     *package_id);
/* How many installed tags use the package. */
guint           tern_model_store_get_package_refcount (TernModelStore *self,
                                                       const char     *package_id);
/* The installed tags that use the package, sorted (free with g_strfreev). */
char          **tern_model_store_get_tags_using     (TernModelStore *self,
                                                     const char     *package_id);
/* The package's directory (whether or not it exists). */
char           *tern_model_store_get_package_dir (TernModelStore *self,
                                                  const char     *package_id);
/* Bytes a pull of the tag still has to download (catalog sizes less what
 * is installed, verified or already in .partial files). */
guint64         tern_model_store_get_missing_bytes (TernModelStore       *self,
                                                    const TernCatalogTag *tag);
/* Whether the user stopped the tag's download (its partial files keep
 * the mark across restarts, docs/APP.md); the downloader drops the mark
 * when the download resumes. Setting it marks each partial file that has
 * its downloader's record; FALSE with an error when one cannot be written. */
gboolean        tern_model_store_get_download_stopped (TernModelStore       *self,
                                                       const TernCatalogTag *tag);
gboolean        tern_model_store_set_download_stopped (TernModelStore       *self,
                                                       const TernCatalogTag *tag,
                                                       gboolean              stopped,
                                                       GError              **error);
/* Everything under packages/ (installed files and partial downloads). */
guint64         tern_model_store_get_disk_usage (TernModelStore *self);

/* Removes an installed tag, then deletes every package of it (and any partial
 * download of them) that no installed tag uses any more. catalog_tag (may be
 * NULL) lets a tag that was never completed have its partial downloads
 * deleted. A local tag is forgotten; its file is left alone. `freed` (may be
 * NULL) gets the bytes deleted. Error TERN_MANAGER_ERROR_UNKNOWN_TAG when
 * there was nothing to remove. */
gboolean        tern_model_store_remove (TernModelStore       *self,
                                         const char           *tag,
                                         const TernCatalogTag *catalog_tag,
                                         guint64              *freed,
                                         GError              **error);

/* Re-verifies every installed file (size and sha256) and every imported
 * model (readable GGUF). Marks what fails as broken (the tag's state becomes
 * BROKEN; pulling the tag again downloads only the broken files) and clears
 * the mark of what passes. `problems` (may be NULL) gets one line per
 * problem, naming the file, whenever the check ran to its end. Returns
 * FALSE when the check could not run, or when its marks could not be
 * written (installed.json on a full disk): *problems is set then too, so
 * that the user is still told what is damaged. */
gboolean        tern_model_store_check (TernModelStore  *self,
                                        GCancellable    *cancellable,
                                        GPtrArray      **problems,
                                        GError         **error);
/* The same with the hashing in a thread; finish is as
 * tern_model_store_check's return and `problems` (char*, possibly empty). */
void            tern_model_store_check_async  (TernModelStore      *self,
                                               GCancellable        *cancellable,
                                               GAsyncReadyCallback  callback,
                                               gpointer             user_data);
gboolean        tern_model_store_check_finish (TernModelStore  *self,
                                               GAsyncResult    *result,
                                               GPtrArray      **problems,
                                               GError         **error);
/* While a check runs (from any thread): bytes of the installed files it
 * hashes (*total) and of those hashed so far (*done); FALSE when none
 * runs. A large model's files take seconds to hash. */
gboolean        tern_model_store_get_check_progress (TernModelStore *self,
                                                     guint64        *done,
                                                     guint64        *total);

/* Adds a local .gguf as "local:NAME" after checking it with the GGUF reader
 * (and that it names an architecture). name NULL: from general.name or the
 * file name. Importing the same file again returns its existing tag.
 * Returns the tag. */
char           *tern_model_store_import (TernModelStore  *self,
                                         const char      *path,
                                         const char      *name,
                                         GError         **error);

G_END_DECLS
