/* tern-window-private.h: what tests read and drive in the chat window
 * (tests/app), apart from the window's API in tern-window.h, as GNOME Text
 * Editor keeps its -private.h. Not for the rest of the app. */
#pragma once

#include "tern-composer.h"
#include "tern-window.h"

G_BEGIN_DECLS

/* Images for the next message: the drop target on the chat (files, file
 * lists, textures), how many are attached, whether the model can read them,
 * and the cost preview line. */
GtkDropTarget *tern_window_get_drop_target       (TernWindow     *self);
/* Attached, decoded or still decoding (tern_window_is_attaching). */
guint          tern_window_get_n_attachments     (TernWindow     *self);
gboolean       tern_window_is_attaching          (TernWindow     *self);
TernComposer  *tern_window_get_composer          (TernWindow     *self);
gboolean       tern_window_has_vision            (TernWindow     *self);
const char    *tern_window_get_image_cost_text   (TernWindow     *self);

/* Closes the toasts shown or waiting (tests take screenshots). Only for
 * toasts that have been on screen a while: dismissing one while its show
 * animation runs crashed libadwaita 1.2 in the tests. */
void           tern_window_dismiss_toasts        (TernWindow     *self);

/* State. */
gboolean       tern_window_has_model             (TernWindow     *self);
gboolean       tern_window_is_loading            (TernWindow     *self);
gboolean       tern_window_is_pinning            (TernWindow     *self);
gboolean       tern_window_is_generating         (TernWindow     *self);
/* A draft model or DFlash draft chosen in the header is being loaded. */
gboolean       tern_window_is_preparing_drafter  (TernWindow     *self);
/* "no-model", "loading" or "chat". */
const char    *tern_window_get_page              (TernWindow     *self);
const char    *tern_window_get_model_description (TernWindow     *self);
const char    *tern_window_get_last_error        (TernWindow     *self);
TernChat      *tern_window_get_chat              (TernWindow     *self);
GListModel    *tern_window_get_chats             (TernWindow     *self);
/* The transcript's GtkScrolledWindow, and its "jump to the end" button
 * while it is offered (the user scrolled up), else NULL. */
GtkWidget     *tern_window_get_transcript_scroller (TernWindow   *self);
GtkWidget     *tern_window_get_jump_button       (TernWindow     *self);
/* The sidebar's list of chats (a GtkListBox). */
GtkWidget     *tern_window_get_chat_list         (TernWindow     *self);
TernPinEditor *tern_window_get_pin_editor        (TernWindow     *self);
TernStatsBar  *tern_window_get_stats_bar         (TernWindow     *self);
/* The speculation toggle and drafter choice (one linked box). */
GtkWidget     *tern_window_get_speculation_box   (TernWindow     *self);
/* The text the transcript shows for message index (the rendered rows). */
const char    *tern_window_get_row_text          (TernWindow     *self,
                                                  guint           index);
guint          tern_window_get_n_rows            (TernWindow     *self);
/* The transcript row of message index (NULL past the end). */
GtkWidget     *tern_window_get_row               (TernWindow     *self,
                                                  guint           index);
void           tern_window_set_composer_text     (TernWindow     *self,
                                                  const char     *text);
char          *tern_window_get_composer_text     (TernWindow     *self);

G_END_DECLS
