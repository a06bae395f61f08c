/* tern-application.h */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

#define TERN_APP_ID "io.github.tern.Tern"

#define TERN_TYPE_APPLICATION (tern_application_get_type ())
G_DECLARE_FINAL_TYPE (TernApplication, tern_application, TERN, APPLICATION, AdwApplication)

TernApplication *tern_application_new          (GApplicationFlags flags);
GSettings       *tern_application_get_settings (TernApplication  *self);

/* The local server (Preferences > Local Server): its base URL while it
 * runs (else NULL), and a line for Preferences ("Serving at ...", an error,
 * "Off"). The window whose engine runs it sets them; the signal
 * "server-status-changed" tells the window's header and Preferences. */
void             tern_application_set_server_state  (TernApplication *self,
                                                     const char      *url,
                                                     const char      *status);
const char      *tern_application_get_server_url    (TernApplication *self);
const char      *tern_application_get_server_status (TernApplication *self);

/* The user's locale and the app's translations: from $TERN_LOCALEDIR when set
 * (the tests, `make run`: the build tree's po/), else the installed ones. */
void             tern_i18n_init                (void);

/* The app's settings; found in the build tree when Tern runs uninstalled. */
GSettings       *tern_settings_new             (void);
/* Where chats are saved: $XDG_DATA_HOME/tern/chats. */
char            *tern_chats_dir                (void);
/* The demo model: the demo-model-path setting, $TERN_DEMO_MODEL, or
 * $XDG_CACHE_HOME/tern/tern-demo-random-weights.gguf (written on first use). */
char            *tern_demo_model_path          (GSettings        *settings);
/* last-model: the file opened again at start, whatever bytes its name has
 * (docs/APP.md, "What the app remembers"). NULL: none, or a value that
 * names no file. */
char            *tern_last_model_get           (GSettings        *settings);
void             tern_last_model_set           (GSettings        *settings,
                                                const char       *path,
                                                const char       *tag);

G_END_DECLS
