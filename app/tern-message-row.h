/* tern-message-row.h: one message of the transcript, its Markdown rendered
 * at most once per frame while it streams. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TERN_TYPE_MESSAGE_ROW (tern_message_row_get_type ())
G_DECLARE_FINAL_TYPE (TernMessageRow, tern_message_row, TERN, MESSAGE_ROW, GtkBox)

TernMessageRow *tern_message_row_new        (const char     *role,
                                             const char     *text);
const char     *tern_message_row_get_role   (TernMessageRow *self);
const char     *tern_message_row_get_text   (TernMessageRow *self);
void            tern_message_row_set_text   (TernMessageRow *self,
                                             const char     *text);
void            tern_message_row_append     (TernMessageRow *self,
                                             const char     *text);
/* drafted: one flag per byte of text (1: from an accepted speculative
 * draft), or NULL for none. */
void            tern_message_row_append_drafted (TernMessageRow *self,
                                                 const char     *text,
                                                 const guint8   *drafted);
/* The flags of the whole text, [strlen (text)]; NULL or all zero: none. */
void            tern_message_row_set_drafted (TernMessageRow *self,
                                              const guint8   *drafted);
/* Never NULL; one flag per byte of the text. */
const guint8   *tern_message_row_get_drafted (TernMessageRow *self);
/* Draws the drafted tokens in the accent colour (the view option). */
void            tern_message_row_set_tint   (TernMessageRow *self,
                                             gboolean        tint);
/* Renders again (the theme, and with it the tint colour, changed). */
void            tern_message_row_refresh    (TernMessageRow *self);
/* The markup of the rendered blocks, one per line: for tests. */
char           *tern_message_row_get_shown_markup (TernMessageRow *self);
void            tern_message_row_set_stats  (TernMessageRow *self,
                                             const char     *stats);
void            tern_message_row_set_error  (TernMessageRow *self,
                                             const char     *error);
/* The last turn offers Edit (user) or Regenerate (assistant). */
void            tern_message_row_set_last   (TernMessageRow *self,
                                             gboolean        last);
/* Under the error of an answer that failed for a state the user changes
 * (a message too long for the context): Edit Message and Preferences, as
 * long as the row is the last turn; the next message sent takes them away. */
void            tern_message_row_set_fixes  (TernMessageRow *self,
                                             gboolean        fixes);
/* Under an answer kept because the Regenerate meant to replace it was
 * refused for such a state: why, with those two buttons, in place of the
 * row's own error while it is the last turn; not saved (docs/APP.md,
 * "A message too long"). NULL takes it away. */
void            tern_message_row_set_refusal (TernMessageRow *self,
                                              const char     *refusal);
/* The box of those buttons while it is shown, else NULL: for tests. */
GtkWidget      *tern_message_row_get_fix_box (TernMessageRow *self);
/* Shows the images sent with the message (GBytes of image files). */
void            tern_message_row_set_images (TernMessageRow *self,
                                             GPtrArray      *images);
guint           tern_message_row_get_n_images (TernMessageRow *self);
/* For the tests: how many pictures the rows have decoded so far. */
guint           _tern_message_row_get_n_decoded (void);
/* The button that shows a long question whole; NULL when it is shown whole
 * (or short). */
GtkWidget      *tern_message_row_get_show_all_button (TernMessageRow *self);
/* A dim line above the message, centered ("System prompt changed"); NULL
 * removes it. */
void            tern_message_row_set_notice (TernMessageRow *self,
                                             const char     *notice);
/* NULL when there is none. */
const char     *tern_message_row_get_notice (TernMessageRow *self);
/* Renders now instead of at the next frame. */
void            tern_message_row_flush      (TernMessageRow *self);

G_END_DECLS
