/* What the app tests share: tn-test.h's checks, and driving the real window
 * through its main loop until it reaches a state. */
#ifndef APP_TEST_H
#define APP_TEST_H

#include <adwaita.h>

#include "tn-test.h"
#include "tern-application.h"
#include "tern-preferences-window.h"
#include "tern-window-private.h"
#include "widget-find.h"

typedef gboolean (*Predicate) (TernWindow *w);

/* Before GLib caches the user folders: a fresh scratch folder for everything
 * the app writes (data/ and cache/ in it, the configuration in it), settings
 * in memory, no accessibility bus; then GTK and libadwaita. Returns the
 * folder, or NULL after saying why; exits 77 when there is no display. */
char *app_test_start (const char *name);
/* Removes the scratch folder (unless TERN_TEST_KEEP is set). */
void app_test_remove (const char *dir);

/* The app as the tests run it: not unique, registered, its settings in
 * memory (app_test_start); NULL after saying why. */
TernApplication *app_test_application_new (void);
/* A window of app's, presented, of this default size (0 x 0: the window's
 * own default). */
TernWindow *app_test_window_new (TernApplication *app,
                                 int              width,
                                 int              height);
/* Loads path as win.load-model does (the demo model when path is NULL),
 * then checks that the load ended and the engine went idle within
 * timeout_s each, and that the model is in place (three checks): whether
 * it is. */
gboolean app_test_load (TernWindow *w,
                        const char *path,
                        double      timeout_s);
/* The end of a test: destroys w unless it is NULL and lets the main loop
 * finish with it, removes the scratch folder, and returns tn_test_finish's
 * verdict for name. */
int app_test_end (TernWindow *w,
                  const char *dir,
                  const char *name);

/* Runs the main loop until pred holds or timeout_s pass; pred's last answer. */
gboolean wait_for (TernWindow *w,
                   Predicate   pred,
                   double      timeout_s);
/* Runs the main loop for this long. */
void spin_for (double seconds);

gboolean not_loading (TernWindow *w);
gboolean not_generating (TernWindow *w);
/* Attached images are decoded on a thread: done with all of them. */
gboolean not_attaching (TernWindow *w);
/* Nothing loading, pinning or generating. */
gboolean idle_engine (TernWindow *w);
/* The answer being written has its first text (or is done). */
gboolean has_tokens (TernWindow *w);

/* The app tests' model: a small qwen3 (Q8_0, 128 wide, 2 layers of 4
 * heads sharing 2 KV heads, a feed-forward of 384), seed 7, written on one
 * thread. */
tn_mkmodel_params app_test_model_params (void);

/* Saves what widget shows as a PNG at path: first waits (up to 5 s) for
 * stack crossfades below it to end, since a stack between two pages draws
 * both, then retries (up to 5 s) until the widget is mapped and drawn, as
 * a loaded machine may not have drawn a new window yet. */
gboolean app_test_save_screenshot (GtkWidget  *widget,
                                   const char *path);

/* A slow disk, made with the engine's test hook (tn_test_read_guard_hook):
 * every guarded pass over a file the engine loads (one per tensor's NaN/Inf
 * check, the repack) waits 20 ms first, on the engine's thread, and the
 * passes that start after app_test_slow_stop are counted. _start resets the
 * counts and installs the hook, _end removes it. */
void     app_test_slow_start (void);
void     app_test_slow_stop (void);
void     app_test_slow_end (void);
int      app_test_slow_passes (void);
int      app_test_slow_after_stop (void);
/* A predicate: three passes have begun (the load is under way). */
gboolean app_test_slow_under_way (TernWindow *w);

/* Labels under widget drawn cut off with an ellipsis (mapped ones; not
 * those cut in the middle, a path's by design), as one string
 * "[text] [text] " ("" when none), appended to out. */
void collect_cut_labels (GtkWidget *widget,
                         GString   *out);
/* The AdwPreferencesPages under widget, appended to out. */
void collect_pages (GtkWidget *widget,
                    GPtrArray *out);

/* Preferences over parent at a phone's width (360 px): checks that the
 * window stays that wide and that no page has a label cut off (failures
 * name where: "what", then the page), and leaves it presented on its first
 * page for the caller to look at and destroy. */
TernPreferencesWindow *app_test_preferences_narrow (GtkWindow  *parent,
                                                    GSettings  *settings,
                                                    const char *what);

/* Activates win.action, checking first that it is enabled. */
void activate (TernWindow *w,
               const char *action,
               GVariant   *param);

#endif
