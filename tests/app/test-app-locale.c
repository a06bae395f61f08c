/* The app in German (issue 26): with LANG=de_DE.UTF-8 and LANGUAGE=de, the
 * window's labels come from po/de.po (found in the build tree through
 * TERN_LOCALEDIR, as tern_i18n_init finds them) and an engine error reaches
 * the user in German (docs/TRANSLATING.md).
 *
 * No root is needed at test time: where de_DE.UTF-8 is not generated
 * (a fresh Debian has only C.UTF-8), setlocale fails, C.UTF-8 stays, and
 * gettext follows LANGUAGE=de, which it honours in any locale but C. */
#include "app-test.h"

#include <glib/gi18n.h>
#include <locale.h>
#include <string.h>

#include "tern-application.h"

/* Whether a label somewhere under widget shows text (a button's label, a
 * status page's title: all are GtkLabels). */
static gboolean
find_label (GtkWidget  *widget,
            const char *text)
{
  if (GTK_IS_LABEL (widget) && g_strcmp0 (gtk_label_get_text (GTK_LABEL (widget)), text) == 0)
    return TRUE;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL;
       c = gtk_widget_get_next_sibling (c))
    if (find_label (c, text))
      return TRUE;
  return FALSE;
}

static void
close_dialogs (void)
{
  GListModel *toplevels = gtk_window_get_toplevels ();

  for (guint i = g_list_model_get_n_items (toplevels); i > 0; i--)
    {
      g_autoptr(GtkWindow) other = g_list_model_get_item (toplevels, i - 1);

      if (ADW_IS_MESSAGE_DIALOG (other) && gtk_widget_get_visible (GTK_WIDGET (other)))
        {
          adw_message_dialog_response (ADW_MESSAGE_DIALOG (other), "close");
          gtk_window_close (other);
        }
    }
  spin_for (0.3);
}

int
main (int   argc,
      char *argv[])
{
  g_autofree char *tmp = NULL;
  g_autofree char *bad = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(TernApplication) app = NULL;
  const char *locale_dir = g_getenv ("TERN_LOCALEDIR");
  const char *err;
  TernWindow *w;

  (void) argc;
  (void) argv;
  /* The user's environment, whatever the caller's: nothing overrides LANG. */
  g_unsetenv ("LC_ALL");
  g_unsetenv ("LC_MESSAGES");
  g_setenv ("LANG", "de_DE.UTF-8", TRUE);
  g_setenv ("LANGUAGE", "de", TRUE);
  if (locale_dir == NULL || *locale_dir == '\0')
    tn_test_missing ("TERN_LOCALEDIR is not set (meson sets it to the build's po/)");
  {
    g_autofree char *mo = g_build_filename (locale_dir, "de", "LC_MESSAGES", "tern.mo", NULL);

    if (!g_file_test (mo, G_FILE_TEST_EXISTS))
      tn_test_missing ("the German catalog de/LC_MESSAGES/tern.mo is not built");
  }

  if ((tmp = app_test_start ("tern-app-locale")) == NULL)
    return 1;
  tern_i18n_init ();
  fprintf (stderr, "locale: %s (LANGUAGE=de)\n", setlocale (LC_MESSAGES, NULL));

  /* gettext itself, then what the window shows. */
  CHECKF (g_str_equal (_("New Chat"), "Neuer Chat"), "%s", _("New Chat"));
  app = tern_application_new (G_APPLICATION_NON_UNIQUE);
  if (!g_application_register (G_APPLICATION (app), NULL, &error))
    {
      fprintf (stderr, "register: %s\n", error->message);
      return 1;
    }
  w = tern_window_new (GTK_APPLICATION (app));
  gtk_window_present (GTK_WINDOW (w));
  spin_for (0.5);
  /* From ui/tern-window.ui (GtkBuilder, translatable="yes"): the page shown
   * without a model, and the composer's button. */
  CHECK (g_str_equal (tern_window_get_page (w), "no-model"));
  CHECKF (find_label (GTK_WIDGET (w), "Kein Modell geladen"), "no German status page title");
  CHECKF (!find_label (GTK_WIDGET (w), "No Model Loaded"), "the English title is still shown");

  /* An engine error: libtern's English format, rebuilt from its German
   * translation with the engine's arguments. */
  bad = g_build_filename (tmp, "kein-modell.gguf", NULL);
  g_file_set_contents (bad, "this is not GGUF", -1, NULL);
  activate (w, "load-model", g_variant_new_string (bad));
  CHECK (wait_for (w, not_loading, 30));
  err = tern_window_get_last_error (w);
  CHECKF (err != NULL && strstr (err, "keine GGUF-Datei") != NULL && strstr (err, bad) != NULL,
          "error: %s", err);
  fprintf (stderr, "engine error: %s\n", err);
  close_dialogs ();

  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
  app_test_remove (tmp);
  return tn_test_finish ("app-locale");
}
