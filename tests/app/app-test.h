/* What the app tests share: tn-test.h's checks, and driving the real window
 * through its main loop until it reaches a state. */
#ifndef APP_TEST_H
#define APP_TEST_H

#include <adwaita.h>

#include "tn-test.h"
#include "tern-window.h"

typedef gboolean (*Predicate) (TernWindow *w);

/* Runs the main loop until pred holds or timeout_s pass; pred's last answer. */
gboolean wait_for (TernWindow *w,
                   Predicate   pred,
                   double      timeout_s);
/* Runs the main loop for this long. */
void spin_for (double seconds);

gboolean not_loading (TernWindow *w);
/* Nothing loading, pinning or generating. */
gboolean idle_engine (TernWindow *w);
/* The answer being written has its first text (or is done). */
gboolean has_tokens (TernWindow *w);

/* Activates win.action, checking first that it is enabled. */
void activate (TernWindow *w,
               const char *action,
               GVariant   *param);

#endif
