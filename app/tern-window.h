/* tern-window.h: the chat window. */
#pragma once

#include <adwaita.h>

#include "tern-chat.h"
#include "tern-pin-editor.h"
#include "tern-stats-bar.h"

G_BEGIN_DECLS

#define TERN_TYPE_WINDOW (tern_window_get_type ())
G_DECLARE_FINAL_TYPE (TernWindow, tern_window, TERN, WINDOW, AdwApplicationWindow)

TernWindow    *tern_window_new                   (GtkApplication *application);
/* Loads a GGUF file (on the engine thread); also the action win.load-model. */
void           tern_window_load_model            (TernWindow     *self,
                                                  const char     *path);
/* A model of the store (the Models window's Use): path is its tag's model
 * file. The header then offers the drafters the tag's packages bring, and
 * with apply_flags the tag's flags set the mode (flash or chat) and turn
 * speculation on with its drafter (flags.speculation). A tag that is not
 * installed with path as its model loads path as a file from disk. */
void           tern_window_load_tag              (TernWindow     *self,
                                                  const char     *path,
                                                  const char     *tag,
                                                  gboolean        apply_flags);
void           tern_window_use_demo_model        (TernWindow     *self);
/* At start: the model loaded last is gone (its file removed), said in a
 * toast that stays until dismissed, rather than the start page alone. */
void           tern_window_say_model_gone        (TernWindow     *self,
                                                  const char     *path);
gboolean       tern_window_export_markdown       (TernWindow     *self,
                                                  const char     *path,
                                                  GError        **error);

/* The local server, as the application holds it
 * (tern_application_get_server_url, _get_server_status, and its signal
 * "server-status-changed"): its base URL while it runs (else NULL), and a
 * line for Preferences ("Serving at ...", an error, or "Off"). */
const char    *tern_window_get_server_url        (TernWindow     *self);
const char    *tern_window_get_server_status     (TernWindow     *self);

/* The loaded model's file; NULL before one loads. */
const char    *tern_window_get_model_path        (TernWindow     *self);

/* The test-only getters are in tern-window-private.h. */

G_END_DECLS
