/* app-test.c: see app-test.h. */
#include "app-test.h"
#include "tn-internal.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>

char *
app_test_start (const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *pattern = g_strdup_printf ("%s-XXXXXX", name);
  g_autofree char *data_dir = NULL;
  g_autofree char *cache_dir = NULL;
  char *dir;

  setlocale (LC_ALL, "C.UTF-8");
  dir = g_dir_make_tmp (pattern, &error);
  if (dir == NULL)
    {
      fprintf (stderr, "%s: %s\n", name, error->message);
      return NULL;
    }
  data_dir = g_build_filename (dir, "data", NULL);
  cache_dir = g_build_filename (dir, "cache", NULL);
  g_setenv ("XDG_DATA_HOME", data_dir, TRUE);
  g_setenv ("XDG_CACHE_HOME", cache_dir, TRUE);
  g_setenv ("XDG_CONFIG_HOME", dir, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);
  g_setenv ("GTK_A11Y", "none", TRUE);
  if (!gtk_init_check ())
    {
      fprintf (stderr, "%s: no display; skipped\n", name);
      exit (77);
    }
  adw_init ();
  return dir;
}

void
app_test_remove (const char *dir)
{
  g_autofree char *cmd = NULL;

  if (dir == NULL || g_getenv ("TERN_TEST_KEEP") != NULL)
    return;
  /* rm -r: the scratch tree holds only what the test wrote. */
  cmd = g_strdup_printf ("rm -rf '%s'", dir);
  if (system (cmd) != 0)
    fprintf (stderr, "could not remove %s\n", dir);
}

TernApplication *
app_test_application_new (void)
{
  g_autoptr(GError) error = NULL;
  TernApplication *app = tern_application_new (G_APPLICATION_NON_UNIQUE);

  if (!g_application_register (G_APPLICATION (app), NULL, &error))
    {
      fprintf (stderr, "register: %s\n", error->message);
      g_object_unref (app);
      return NULL;
    }
  return app;
}

TernWindow *
app_test_window_new (TernApplication *app,
                     int              width,
                     int              height)
{
  TernWindow *w = tern_window_new (GTK_APPLICATION (app));

  if (width > 0 && height > 0)
    gtk_window_set_default_size (GTK_WINDOW (w), width, height);
  gtk_window_present (GTK_WINDOW (w));
  return w;
}

gboolean
app_test_load (TernWindow *w,
               const char *path,
               double      timeout_s)
{
  if (path != NULL)
    activate (w, "load-model", g_variant_new_string (path));
  else
    tern_window_use_demo_model (w);
  CHECK (wait_for (w, not_loading, timeout_s));
  CHECK (wait_for (w, idle_engine, timeout_s));
  CHECKF (tern_window_has_model (w), "%s did not load: %s", path ? path : "the demo model",
          tern_window_get_last_error (w));
  return tern_window_has_model (w);
}

int
app_test_end (TernWindow *w,
              const char *dir,
              const char *name)
{
  if (w != NULL)
    {
      gtk_window_destroy (GTK_WINDOW (w));
      spin_for (0.2);
    }
  app_test_remove (dir);
  return tn_test_finish (name);
}

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
not_generating (TernWindow *w)
{
  return !tern_window_is_generating (w);
}

gboolean
not_attaching (TernWindow *w)
{
  return !tern_window_is_attaching (w);
}

tn_mkmodel_params
app_test_model_params (void)
{
  tn_mkmodel_params p = tn_mkmodel_default_params ();

  p.arch = "qwen3";
  p.type = "q8_0";
  p.n_embd = 128;
  p.n_layer = 2;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim = 32;
  p.n_ff = 384;
  p.seed = 7;
  p.n_threads = 1;
  return p;
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

static gboolean
transition_running (GtkWidget *widget)
{
  if (GTK_IS_STACK (widget) && gtk_stack_get_transition_running (GTK_STACK (widget)))
    return TRUE;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL;
       c = gtk_widget_get_next_sibling (c))
    if (transition_running (c))
      return TRUE;
  return FALSE;
}

static gboolean
save_screenshot_once (GtkWidget  *widget,
                      const char *path)
{
  int width = gtk_widget_get_width (widget);
  int height = gtk_widget_get_height (widget);
  g_autoptr(GtkSnapshot) snapshot = NULL;
  g_autoptr(GskRenderNode) node = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  GdkPaintable *paintable;

  if (width <= 0 || height <= 0 || gtk_widget_get_native (widget) == NULL)
    return FALSE;
  paintable = gtk_widget_paintable_new (widget);
  snapshot = gtk_snapshot_new ();
  gdk_paintable_snapshot (paintable, snapshot, width, height);
  g_object_unref (paintable);
  node = gtk_snapshot_free_to_node (g_steal_pointer (&snapshot));
  if (node == NULL)
    return FALSE;
  texture = gsk_renderer_render_texture (gtk_native_get_renderer (gtk_widget_get_native (widget)),
                                         node, &GRAPHENE_RECT_INIT (0, 0, width, height));
  return texture != NULL && gdk_texture_save_to_png (texture, path);
}

gboolean
app_test_save_screenshot (GtkWidget  *widget,
                          const char *path)
{
  for (int i = 0; i < 50 && transition_running (widget); i++)
    spin_for (0.1);
  for (int i = 0; i < 50; i++)
    {
      if (save_screenshot_once (widget, path))
        {
          fprintf (stderr, "screenshot: %s\n", path);
          return TRUE;
        }
      spin_for (0.1);
    }
  fprintf (stderr, "screenshot %s: the widget is %d x %d after 5 s\n", path,
           gtk_widget_get_width (widget), gtk_widget_get_height (widget));
  return FALSE;
}

static struct
{
  gint passes;
  gint stopped;
  gint after_stop;
} slow;

static void
slow_pass (const char *pass,
           void       *user)
{
  (void) pass;
  (void) user;
  g_atomic_int_inc (&slow.passes);
  if (g_atomic_int_get (&slow.stopped))
    g_atomic_int_inc (&slow.after_stop);
  g_usleep (20000);
}

void
app_test_slow_start (void)
{
  g_atomic_int_set (&slow.passes, 0);
  g_atomic_int_set (&slow.stopped, 0);
  g_atomic_int_set (&slow.after_stop, 0);
  tn_test_read_guard_hook (slow_pass, NULL);
}

void
app_test_slow_stop (void)
{
  g_atomic_int_set (&slow.stopped, 1);
}

void
app_test_slow_end (void)
{
  tn_test_read_guard_hook (NULL, NULL);
}

int
app_test_slow_passes (void)
{
  return g_atomic_int_get (&slow.passes);
}

int
app_test_slow_after_stop (void)
{
  return g_atomic_int_get (&slow.after_stop);
}

gboolean
app_test_slow_under_way (TernWindow *w)
{
  (void) w;
  return g_atomic_int_get (&slow.passes) >= 3;
}

void
collect_cut_labels (GtkWidget *widget,
                    GString   *out)
{
  if (!gtk_widget_get_mapped (widget))
    return;
  /* A label cut in its middle is a path (the Models panel's folder), which
   * shows both its ends at any width by design. */
  if (GTK_IS_LABEL (widget) && gtk_label_get_ellipsize (GTK_LABEL (widget)) != PANGO_ELLIPSIZE_NONE
      && gtk_label_get_ellipsize (GTK_LABEL (widget)) != PANGO_ELLIPSIZE_MIDDLE
      && pango_layout_is_ellipsized (gtk_label_get_layout (GTK_LABEL (widget))))
    g_string_append_printf (out, "[%s] ", gtk_label_get_text (GTK_LABEL (widget)));
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    collect_cut_labels (c, out);
}

TernPreferencesWindow *
app_test_preferences_narrow (GtkWindow  *parent,
                             GSettings  *settings,
                             const char *what)
{
  TernPreferencesWindow *prefs = tern_preferences_window_new (parent, settings);
  g_autoptr(GPtrArray) pages = g_ptr_array_new ();

  gtk_window_set_default_size (GTK_WINDOW (prefs), 360, 800);
  gtk_window_present (GTK_WINDOW (prefs));
  spin_for (0.8);
  CHECKF (gtk_widget_get_width (GTK_WIDGET (prefs)) <= 361, "%s: Preferences are %d px wide", what,
          gtk_widget_get_width (GTK_WIDGET (prefs)));
  collect_pages (GTK_WIDGET (prefs), pages);
  CHECK (pages->len >= 2);
  for (guint i = 0; i < pages->len; i++)
    {
      g_autoptr(GString) cut = g_string_new (NULL);

      adw_preferences_window_set_visible_page (ADW_PREFERENCES_WINDOW (prefs), pages->pdata[i]);
      spin_for (0.5);
      collect_cut_labels (GTK_WIDGET (prefs), cut);
      CHECKF (cut->len == 0, "%s: Preferences at 360 px, page %s: cut: %s", what,
              adw_preferences_page_get_title (pages->pdata[i]), cut->str);
    }
  if (pages->len > 0)
    adw_preferences_window_set_visible_page (ADW_PREFERENCES_WINDOW (prefs), pages->pdata[0]);
  return prefs;
}

void
collect_pages (GtkWidget *widget,
               GPtrArray *out)
{
  if (ADW_IS_PREFERENCES_PAGE (widget))
    g_ptr_array_add (out, widget);
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    collect_pages (c, out);
}
