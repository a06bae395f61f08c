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
/* The Hardware page (the doctor's report, engine/include/tn-doctor.h): the loaded
 * model's file for its decode bound, set before the window first shows; a
 * new check (measure_bandwidth: also the bandwidth and the decode bound),
 * how many reports arrived, and the last one as text (status word, line,
 * "  fix" lines). */
void tern_preferences_window_set_model_path (TernPreferencesWindow *self,
                                             const char            *path);
void tern_preferences_window_check_hardware (TernPreferencesWindow *self,
                                             gboolean               measure_bandwidth);
guint tern_preferences_window_get_hardware_reports (TernPreferencesWindow *self);
const char *tern_preferences_window_get_hardware_text (TernPreferencesWindow *self);

G_END_DECLS
