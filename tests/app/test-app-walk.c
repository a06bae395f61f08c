/* test-app-walk: what a walk through the app's daily flow by hand found
 * wanting (session 49), one part per meson test (the part's name is the
 * argument):
 *   prompt-kept  a system prompt typed into the panel and never pinned is
 *                there again when the window is opened again
 * Screenshots go to TERN_TEST_OUT. Exit 77 when no display can be had.
 */
#include "config.h"

#include <stdio.h>

#include <adwaita.h>

#include "tern-application.h"
#include "tern-pin-editor.h"
#include "tern-window.h"
#include "app-test.h"

static const char *out_dir;

typedef struct {
  char *tmp;
  TernApplication *app;
  GSettings *settings;
} Fixture;

static TernWindow *
open_window (Fixture *f)
{
  TernWindow *w = tern_window_new (GTK_APPLICATION (f->app));

  gtk_window_set_default_size (GTK_WINDOW (w), 1280, 800);
  gtk_window_present (GTK_WINDOW (w));
  spin_for (0.3);
  return w;
}

/* The panel's text was saved only by a pin (a model loaded, the prompt
 * pinned): typed with no model, or edited and not yet sent, it was the
 * previous pinned text (or the default) at the next start. */
static void
part_prompt_kept (Fixture *f)
{
  static const char *typed = "You answer in one short sentence, in the manner of a ship's log.";
  TernWindow *w = open_window (f);
  g_autofree char *shown = NULL;
  g_autofree char *path = g_build_filename (out_dir, "walk-prompt-kept.png", NULL);

  g_action_group_change_action_state (G_ACTION_GROUP (w), "show-pin-panel",
                                      g_variant_new_boolean (TRUE));
  tern_pin_editor_set_text (tern_window_get_pin_editor (w), typed);
  spin_for (0.2);
  gtk_window_close (GTK_WINDOW (w));
  spin_for (0.3);

  w = open_window (f);
  shown = tern_pin_editor_get_text (tern_window_get_pin_editor (w));
  CHECKF (g_strcmp0 (shown, typed) == 0, "the panel holds \"%s\", not the prompt typed before "
          "the window was closed", shown);
  CHECK (app_test_save_screenshot (GTK_WIDGET (w), path));
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
}

int
main (int   argc,
      char *argv[])
{
  g_autoptr(GError) error = NULL;
  Fixture f = { 0 };
  const char *part = argc > 1 ? argv[1] : "";
  g_autofree char *name = g_strdup_printf ("test-app-walk-%s", part);

  if ((f.tmp = app_test_start (name)) == NULL)
    return 1;
  out_dir = g_getenv ("TERN_TEST_OUT");
  if (out_dir == NULL || *out_dir == '\0')
    out_dir = f.tmp;
  f.app = tern_application_new (G_APPLICATION_NON_UNIQUE);
  if (!g_application_register (G_APPLICATION (f.app), NULL, &error))
    {
      fprintf (stderr, "register: %s\n", error->message);
      return 1;
    }
  f.settings = tern_application_get_settings (f.app);
  g_object_set (gtk_settings_get_default (), "gtk-decoration-layout", "appmenu:close", NULL);

  if (g_str_equal (part, "prompt-kept"))
    part_prompt_kept (&f);
  else
    {
      fprintf (stderr, "unknown part '%s'\n", part);
      CHECK (FALSE);
    }
  g_clear_object (&f.app);
  app_test_remove (f.tmp);
  g_free (f.tmp);
  return tn_test_finish (name);
}
