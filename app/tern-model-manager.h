/* tern-model-manager.h: the Models panel: the models on this computer
 * first, then the catalog's by family, each with its size, state
 * (available, downloading, installed, broken) and whether it fits in memory;
 * flash variants inside their model's row; progress bars, Download / Cancel
 * / Remove / Use buttons, a search filter, the disk space they take, Import
 * (file chooser, or a .gguf dropped on the panel), Verify, and a notice with
 * Retry when the download server cannot be reached (docs/MODELS.md).
 * Searching also asks Hugging Face (after a pause in typing): the GGUF
 * repositories found are listed last, each opening on its quantizations with
 * their sizes, the memory hint and Download, which pulls what
 * `tern-cli pull hf.co/OWNER/REPO:QUANT` pulls.
 *
 * Signal "use-model" (const char *path, const char *tag): the user chose an
 * installed model; path is its GGUF file. The panel keeps downloading while
 * it is hidden. Needs the model manager (manager/, TERN_HAVE_MANAGER). */
#pragma once

#include <gtk/gtk.h>

#include "tern-manager.h"

G_BEGIN_DECLS

#define TERN_TYPE_MODEL_MANAGER (tern_model_manager_get_type ())
G_DECLARE_FINAL_TYPE (TernModelManager, tern_model_manager, TERN, MODEL_MANAGER, GtkBox)

/* NULL arguments: the default catalog (TERN_CATALOG or the installed one),
 * the default store ($XDG_DATA_HOME/tern/models), a new downloader. A
 * catalog or store that cannot be opened is shown in the panel. */
GtkWidget      *tern_model_manager_new            (TernCatalog      *catalog,
                                                   TernModelStore   *store,
                                                   TernDownloader   *downloader);
TernCatalog    *tern_model_manager_get_catalog    (TernModelManager *self);
TernModelStore *tern_model_manager_get_store      (TernModelManager *self);
TernDownloader *tern_model_manager_get_downloader (TernModelManager *self);

/* What the buttons do. */
void            tern_model_manager_download       (TernModelManager *self,
                                                   const char       *tag);
void            tern_model_manager_cancel         (TernModelManager *self,
                                                   const char       *tag);
/* Without asking (the Remove button asks first). */
gboolean        tern_model_manager_remove         (TernModelManager *self,
                                                   const char       *tag,
                                                   GError          **error);
/* Emits "use-model" when the tag is installed. */
gboolean        tern_model_manager_use            (TernModelManager *self,
                                                   const char       *tag);
/* Returns the new tag, or NULL with the error also shown in the panel. */
char           *tern_model_manager_import         (TernModelManager *self,
                                                   GFile            *file,
                                                   GError          **error);
/* What the offline notice's Retry button does: downloads again what failed
 * for want of a network. */
void            tern_model_manager_retry          (TernModelManager *self);
/* Verify, as its button does: hashes every installed file in a thread. */
void            tern_model_manager_verify         (TernModelManager *self);
void            tern_model_manager_set_filter     (TernModelManager *self,
                                                   const char       *text);

/* Lists the models of the servers in settings' "remote-connections" first,
 * marked remote; their Use buttons emit "use-model" with a remote reference
 * (tern-connections.h) as both path and tag. Called again: lists anew. */
void            tern_model_manager_set_settings   (TernModelManager *self,
                                                   GSettings        *settings);

/* For tests: the row of a tag (an AdwActionRow, or an AdwExpanderRow for a
 * model with a flash variant, whose own row is inside it), the message
 * line, the offline notice (NULL when hidden). */
GtkWidget      *tern_model_manager_get_row        (TernModelManager *self,
                                                   const char       *tag);
const char     *tern_model_manager_get_message    (TernModelManager *self);
const char     *tern_model_manager_get_offline_message (TernModelManager *self);
/* For tests: the Hugging Face search's row of a repository ("OWNER/REPO",
 * an AdwExpanderRow) or of a quantization found inside one (by its store
 * tag, "hf:owner--repo--q4_k_m"; listed once the repository's row was
 * opened), NULL when not shown; the sentence the search shows (searching,
 * nothing found, offline...), NULL when none; what its Retry button does.
 * tern_model_manager_download () takes a quantization's tag too. */
GtkWidget      *tern_model_manager_get_hub_row    (TernModelManager *self,
                                                   const char       *key);
const char     *tern_model_manager_get_hub_message (TernModelManager *self);
void            tern_model_manager_hub_retry      (TernModelManager *self);

/* A "Models" window over `parent` with one panel, made on the first call and
 * kept (closing hides it, so downloads go on); on_use_model is connected
 * swapped to "use-model" (callback (user_data, path, tag)) and the window
 * closes when a model is chosen. Returns the panel. */
TernModelManager *tern_model_manager_present      (GtkWindow        *parent,
                                                   GCallback         on_use_model,
                                                   gpointer          user_data);

/* Tests: a running download's row words (NULL before its first figures). */
char             *_tern_model_manager_progress_text (const TernDownloadProgress *progress);

G_END_DECLS
