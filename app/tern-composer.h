/* tern-composer.h: where the next message is written: its text, the images
 * attached to it (thumbnails, drops, the clipboard, the file chooser) and
 * what they cost, Send and Stop.
 *
 * An attached image is decoded once, on a thread (tern-image-cache.h, where
 * the worker finds it again at send); its pixel size gives its token count,
 * asked of the engine through the worker (Gemma 4's follows the size). */
#pragma once

#include <gtk/gtk.h>

#include "tern-engine-worker.h"

G_BEGIN_DECLS

#define TERN_TYPE_COMPOSER (tern_composer_get_type ())
G_DECLARE_FINAL_TYPE (TernComposer, tern_composer, TERN, COMPOSER, GtkBox)

/* The worker asked what an image costs and how to fit it. */
void           tern_composer_set_worker        (TernComposer     *self,
                                                TernEngineWorker *worker);
/* After each load: whether a model is loaded (for the refusal's words),
 * the projector's native token count (-1: no vision), the KV rows an
 * image adds besides its tokens, and, for a projector beside the model that
 * cannot be used, its path and why (else NULL). The attachments are
 * decoded again for the new projector, or, without one, taken off with an
 * "error" that says so. */
void           tern_composer_set_vision        (TernComposer     *self,
                                                gboolean          has_model,
                                                int               native_tokens,
                                                int               extra_rows,
                                                const char       *projector,
                                                const char       *unusable);
gboolean       tern_composer_has_vision        (TernComposer     *self);
/* The last measured prefill speed, for the cost line's time. */
void           tern_composer_set_prefill_speed (TernComposer     *self,
                                                double            tok_s);
/* The image token budget chosen (the image-tokens setting). */
int            tern_composer_get_image_budget  (TernComposer     *self);

char          *tern_composer_get_text          (TernComposer     *self);
void           tern_composer_set_text          (TernComposer     *self,
                                                const char       *text);
void           tern_composer_focus             (TernComposer     *self);
/* Stop in place of Send while an answer is written. */
void           tern_composer_set_generating    (TernComposer     *self,
                                                gboolean          generating);
void           tern_composer_set_send_tooltip  (TernComposer     *self,
                                                const char       *tooltip);

/* Attaching. Each refusal (no vision, not a regular file, too large, not
 * an image, an aspect the projector refuses) is emitted as "error" with a
 * sentence naming the file, and returns FALSE; TRUE means taken: a picture
 * whose decoding then fails is dropped again with an "error". */
gboolean       tern_composer_attach_bytes      (TernComposer     *self,
                                                GBytes           *bytes,
                                                const char       *name);
gboolean       tern_composer_attach_file       (TernComposer     *self,
                                                GFile            *file);
gboolean       tern_composer_attach_texture    (TernComposer     *self,
                                                GdkTexture       *texture);
/* Attaches the clipboard's picture; FALSE when it holds none (or text). */
gboolean       tern_composer_paste_image       (TernComposer     *self);
/* The file chooser for images, over parent. */
void           tern_composer_choose_images     (TernComposer     *self,
                                                GtkWindow        *parent);
/* Drops of files and image data anywhere on area attach them. */
void           tern_composer_take_drops_on     (TernComposer     *self,
                                                GtkWidget        *area);
/* Text other than blanks, or a picture ("has-content" notifies): something
 * to send. */
gboolean       tern_composer_has_content       (TernComposer     *self);
/* Images still being decoded ("busy" notifies): not ready to send. */
gboolean       tern_composer_is_busy           (TernComposer     *self);
/* The attached images' file bytes, in order (a new array of new refs). */
GPtrArray     *tern_composer_get_images        (TernComposer     *self);
void           tern_composer_clear_images      (TernComposer     *self);

/* What is being written in one chat, while another is shown: its text and
 * its pictures (the file's bytes, or a paste not yet encoded). */
typedef struct _TernComposerDraft TernComposerDraft;
/* Empties the composer into a draft; NULL when nothing was written. */
TernComposerDraft *tern_composer_take_draft    (TernComposer      *self);
/* Puts a draft back in place of what the composer holds (NULL: leaves it
 * as it is); its pictures are decoded again from the cache. Without vision
 * now (another model was loaded meanwhile) its pictures are dropped, as a
 * load drops attachments. */
void           tern_composer_restore_draft     (TernComposer      *self,
                                                TernComposerDraft *draft);
void           tern_composer_draft_free        (TernComposerDraft *draft);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TernComposerDraft, tern_composer_draft_free)
/* For tests (through tern-window-private.h). */
GtkDropTarget *tern_composer_get_drop_target   (TernComposer     *self);
guint          tern_composer_get_n_images      (TernComposer     *self);
const char    *tern_composer_get_cost_text     (TernComposer     *self);

G_END_DECLS
