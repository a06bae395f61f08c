/* tern-pin-editor.h: the pinned system prompt: its text, token count, the Pin
 * button with its progress, and the pin's state (stale once edited). */
#pragma once

#include <gtk/gtk.h>

#include "tern-engine-worker.h"

G_BEGIN_DECLS

#define TERN_TYPE_PIN_EDITOR (tern_pin_editor_get_type ())
G_DECLARE_FINAL_TYPE (TernPinEditor, tern_pin_editor, TERN, PIN_EDITOR, GtkBox)

/* Signal "changed": the text was edited. */
char       *tern_pin_editor_get_text         (TernPinEditor      *self);
void        tern_pin_editor_set_text         (TernPinEditor      *self,
                                              const char         *text);
/* -1: unknown (no model). */
void        tern_pin_editor_set_token_count  (TernPinEditor      *self,
                                              int                 n_tokens);
void        tern_pin_editor_set_pinning      (TernPinEditor      *self,
                                              gboolean            pinning);
void        tern_pin_editor_set_progress     (TernPinEditor      *self,
                                              int                 done,
                                              int                 total);
/* The pin now in the engine, for text; NULL state: nothing pinned. */
void        tern_pin_editor_set_pinned       (TernPinEditor      *self,
                                              const char         *text,
                                              const TernPinState *state);
void        tern_pin_editor_set_error        (TernPinEditor      *self,
                                              const char         *message);
gboolean    tern_pin_editor_is_stale         (TernPinEditor      *self);
/* The text the engine has pinned (NULL: none). */
const char *tern_pin_editor_get_pinned_text  (TernPinEditor      *self);
const char *tern_pin_editor_get_state_text   (TernPinEditor      *self);
/* -1 while unknown. */
int         tern_pin_editor_get_token_count  (TernPinEditor      *self);
/* Whether the state and token lines are shown whole inside the window (no
 * ellipsis, nothing cut off by the window's edge): for tests. */
gboolean    tern_pin_editor_state_fits       (TernPinEditor      *self);

G_END_DECLS
