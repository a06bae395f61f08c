/* tern-preferences-window.h */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define TERN_TYPE_PREFERENCES_WINDOW (tern_preferences_window_get_type ())
G_DECLARE_FINAL_TYPE (TernPreferencesWindow, tern_preferences_window, TERN, PREFERENCES_WINDOW,
                      AdwPreferencesWindow)

TernPreferencesWindow *tern_preferences_window_new (GtkWindow *parent,
                                                    GSettings *settings);

G_END_DECLS
