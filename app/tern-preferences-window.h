/* tern-preferences-window.h */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define TERN_TYPE_PREFERENCES_WINDOW (tern_preferences_window_get_type ())
G_DECLARE_FINAL_TYPE (TernPreferencesWindow, tern_preferences_window, TERN, PREFERENCES_WINDOW,
                      AdwPreferencesWindow)

TernPreferencesWindow *tern_preferences_window_new (GtkWindow *parent,
                                                    GSettings *settings);
/* The local server's state line under its switch. */
void tern_preferences_window_set_server_status (TernPreferencesWindow *self,
                                                const char            *status);

G_END_DECLS
