/* app-test.c: see app-test.h. */
#include "app-test.h"

/* Wakes the main loop now and then, so that a timeout is noticed. */
static gboolean
on_wake (gpointer data)
{
  (void) data;
  return G_SOURCE_CONTINUE;
}

gboolean
wait_for (TernWindow *w,
          Predicate   pred,
          double      timeout_s)
{
  gint64 end = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);
  guint wake = g_timeout_add (20, on_wake, NULL);
  gboolean ok;

  while (!(ok = pred (w)) && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (wake);
  return ok;
}

void
spin_for (double seconds)
{
  gint64 end = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);
  guint wake = g_timeout_add (10, on_wake, NULL);

  while (g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, TRUE);
  g_source_remove (wake);
}

gboolean
not_loading (TernWindow *w)
{
  return !tern_window_is_loading (w);
}

gboolean
idle_engine (TernWindow *w)
{
  return !tern_window_is_loading (w) && !tern_window_is_pinning (w)
         && !tern_window_is_generating (w);
}

gboolean
has_tokens (TernWindow *w)
{
  guint n = tern_window_get_n_rows (w);
  const char *text = n ? tern_window_get_row_text (w, n - 1) : NULL;

  return !tern_window_is_generating (w) || (text != NULL && *text != '\0');
}

void
activate (TernWindow *w,
          const char *action,
          GVariant   *param)
{
  CHECKF (g_action_group_get_action_enabled (G_ACTION_GROUP (w), action),
          "action win.%s is disabled", action);
  g_action_group_activate_action (G_ACTION_GROUP (w), action, param);
}
