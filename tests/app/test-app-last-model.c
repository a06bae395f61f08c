/* What the app remembers as its last model (docs/APP.md, "What the app
 * remembers"): any local file the user opened, a demo model by its
 * tern.random_weights key too (what tern-cli mkmodel writes, whatever its
 * name), except the app's own demo file, the one "Use Demo Model" writes
 * (tern_demo_model_path), by whatever path it is opened. With the key, every
 * mkmodel file became a demo model, and the app, which kept no demo model as
 * its last one, forgot them all (the install test waited in vain).
 * - a mkmodel file named by the user: the title says "Demo Model", and
 *   last-model is the file;
 * - "Use Demo Model": last-model and last-model-tag stay the file's;
 * - the demo file opened by hand through a link and through "..": the same;
 * - a copy of the demo file, another file with the same bytes: remembered;
 * - a file whose name is not UTF-8 (a Latin-1 "é"): remembered (a string
 *   setting cannot hold it: GLib's critical, and the model was forgotten),
 *   opened again at the next start, and named in readable words, as
 *   when it is gone at the next start. */
#include "app-test.h"

#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "tern.h"
#include "tern-application.h"

static GSettings *settings;

static void
expect_last (const char *want,
             const char *tag,
             const char *when)
{
  g_autofree char *last = g_settings_get_string (settings, "last-model");
  g_autofree char *last_tag = g_settings_get_string (settings, "last-model-tag");

  CHECKF (g_str_equal (last, want), "%s: last-model is \"%s\", not \"%s\"", when, last, want);
  CHECKF (g_str_equal (last_tag, tag), "%s: last-model-tag is \"%s\", not \"%s\"", when, last_tag,
          tag);
}

static void
expect_title (TernWindow *w,
              const char *want,
              const char *when)
{
  const char *title = adw_window_title_get_title (w->window_title);

  CHECKF (g_str_equal (title, want), "%s: the title is \"%s\", not \"%s\"", when, title, want);
}

int
main (int   argc,
      char *argv[])
{
  g_autofree char *tmp = NULL;
  g_autofree char *mine = NULL;
  g_autofree char *demo = NULL;
  g_autofree char *link = NULL;
  g_autofree char *dotted = NULL;
  g_autofree char *copy = NULL;
  g_autofree char *bytes = NULL;
  g_autofree char *latin = NULL;
  gsize n_bytes = 0;
  g_autoptr(TernApplication) app = NULL;
  tn_mkmodel_params p;
  tn_error err = { 0 };
  TernWindow *w;

  (void) argc;
  (void) argv;
  if ((tmp = app_test_start ("tern-app-last-model")) == NULL)
    return 1;
  if ((app = app_test_application_new ()) == NULL)
    return 1;
  settings = tern_application_get_settings (app);
  g_settings_set_int (settings, "context-size", 1024);
  g_settings_set_int (settings, "threads", 1);
  w = app_test_window_new (app, 900, 700);
  spin_for (0.3);

  /* A model of the user's, written by mkmodel under a name of its own:
   * a demo model by its key, and the file reopened at start. */
  mine = g_build_filename (tmp, "My fine-tune.gguf", NULL);
  p = app_test_model_params ();
  p.name = "My fine-tune";
  CHECKF (tn_mkmodel (&p, mine, &err) == TN_OK, "mkmodel: %s", err.message);
  if (!app_test_load (w, mine, 120))
    goto out;
  expect_title (w, "Demo Model", "a mkmodel file");
  expect_last (mine, "", "a mkmodel file of the user's");

  /* As a tag of the Models window leaves them (test-app-speculation opens
   * one): the demo model must not take the tag from the file it keeps. */
  g_settings_set_string (settings, "last-model-tag", "qwen3:test");

  /* The app's own demo file, written at its default place on first use. */
  demo = tern_demo_model_path (settings);
  if (!app_test_load (w, NULL, 120))
    goto out;
  CHECKF (g_str_equal (tern_window_get_model_path (w), demo), "the demo model is %s, not %s",
          tern_window_get_model_path (w), demo);
  expect_title (w, "Demo Model", "Use Demo Model");
  expect_last (mine, "qwen3:test", "Use Demo Model");

  /* The same file opened by hand, spelt otherwise: still not remembered. */
  link = g_build_filename (tmp, "demo-link.gguf", NULL);
  CHECK (symlink (demo, link) == 0);
  if (!app_test_load (w, link, 120))
    goto out;
  expect_last (mine, "qwen3:test", "the demo file through a link");
  {
    g_autofree char *dir = g_path_get_dirname (demo);
    g_autofree char *base = g_path_get_basename (demo);

    dotted = g_build_filename (dir, "..", "tern", ".", base, NULL);
  }
  if (!app_test_load (w, dotted, 120))
    goto out;
  expect_last (mine, "qwen3:test", "the demo file through \"..\"");

  /* A copy of it is another file, the user's: remembered, and from disk. */
  copy = g_build_filename (tmp, "demo-copy.gguf", NULL);
  CHECK (g_file_get_contents (demo, &bytes, &n_bytes, NULL)
         && g_file_set_contents (copy, bytes, (gssize) n_bytes, NULL));
  if (!app_test_load (w, copy, 120))
    goto out;
  expect_title (w, "Demo Model", "a copy of the demo file");
  expect_last (copy, "", "a copy of the demo file");

  /* A name in Latin-1, as an old archive or a Windows share leaves it:
   * "mod\xe9l.gguf" is no UTF-8, and a GSettings string must be. */
  latin = g_build_filename (tmp, "mod\xe9l.gguf", NULL);
  CHECK (g_file_set_contents (latin, bytes, (gssize) n_bytes, NULL));
  tern_window_load_model (w, latin);
  CHECK (wait_for (w, not_loading, 120));
  CHECK (wait_for (w, idle_engine, 120));
  CHECKF (tern_window_has_model (w), "the Latin-1 name did not load: %s", tern_window_get_last_error (w));
  {
    g_autofree char *last = g_settings_get_string (settings, "last-model");
    g_autofree char *shown = g_filename_display_name (latin);
    /* docs/APP.md: a file: URI where the name is not UTF-8. */
    g_autofree char *remembered = g_str_has_prefix (last, "file:") ? g_filename_from_uri (last, NULL, NULL)
                                                                   : g_strdup (last);
    const char *tip = gtk_widget_get_tooltip_text (GTK_WIDGET (w->window_title));
    const char *sub = adw_window_title_get_subtitle (w->window_title);

    CHECKF (g_utf8_validate (last, -1, NULL), "last-model is not UTF-8");
    CHECKF (g_strcmp0 (remembered, latin) == 0, "last-model \"%s\" gives back \"%s\", not the file", last,
            remembered ? remembered : "(nothing)");
    CHECKF (tip != NULL && g_utf8_validate (tip, -1, NULL) && g_str_equal (tip, shown),
            "the title's tooltip is not \"%s\"", shown);
    CHECKF (sub != NULL && g_utf8_validate (sub, -1, NULL), "the subtitle is not UTF-8");
  }
  /* The next start: a fresh window opens it again. */
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
  g_application_activate (G_APPLICATION (app));
  w = TERN_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  CHECK (w != NULL);
  if (w == NULL)
    goto out;
  CHECK (wait_for (w, not_loading, 120));
  CHECK (wait_for (w, idle_engine, 120));
  CHECKF (g_strcmp0 (tern_window_get_model_path (w), latin) == 0, "the next start opened %s",
          tern_window_get_model_path (w) ? tern_window_get_model_path (w) : "nothing");

  /* Removed since: the next start names it readably, once. */
  CHECK (g_unlink (latin) == 0);
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
  g_application_activate (G_APPLICATION (app));
  spin_for (0.5);
  w = TERN_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  CHECK (w != NULL);
  if (w == NULL)
    goto out;
  {
    g_autofree char *left = g_settings_get_string (settings, "last-model");
    gboolean said = FALSE;

    for (guint i = 0; i < w->toasts->len; i++)
      said = said || strstr (_tern_window_toast_get_text (g_ptr_array_index (w->toasts, i)),
                             "mod\xef\xbf\xbdl.gguf was removed") != NULL;
    CHECKF (said, "no toast says that mod\xef\xbf\xbdl.gguf was removed");
    CHECKF (*left == '\0', "last-model is still \"%s\"", left);
  }

  /* A file: URI naming another host (hand-edited, or synced from another
   * machine) is not the local file of that name. */
  CHECK (g_file_set_contents (latin, bytes, (gssize) n_bytes, NULL));
  {
    g_autofree char *uri = g_filename_to_uri (latin, NULL, NULL);
    g_autofree char *elsewhere = g_strconcat ("file://elsewhere", uri + strlen ("file://"), NULL);

    g_settings_set_string (settings, "last-model", elsewhere);
  }
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
  g_application_activate (G_APPLICATION (app));
  spin_for (0.5);
  w = TERN_WINDOW (gtk_application_get_active_window (GTK_APPLICATION (app)));
  CHECK (w != NULL);
  if (w == NULL)
    goto out;
  CHECK (wait_for (w, not_loading, 120));
  CHECKF (tern_window_get_model_path (w) == NULL, "a file: URI of another host opened %s",
          tern_window_get_model_path (w));

out:
  return app_test_end (w, tmp, "test-app-last-model");
}
