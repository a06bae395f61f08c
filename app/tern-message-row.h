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
void            tern_message_row_set_stats  (TernMessageRow *self,
                                             const char     *stats);
void            tern_message_row_set_error  (TernMessageRow *self,
                                             const char     *error);
/* The last turn offers Edit (user) or Regenerate (assistant). */
void            tern_message_row_set_last   (TernMessageRow *self,
                                             gboolean        last);
/* Renders now instead of at the next frame. */
void            tern_message_row_flush      (TernMessageRow *self);

G_END_DECLS
