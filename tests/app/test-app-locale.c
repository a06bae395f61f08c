/* The app in German (issue 26): with LANG=de_DE.UTF-8 and LANGUAGE=de, the
 * window's labels come from po/de.po (found in the build tree through
 * TERN_LOCALEDIR, as tern_i18n_init finds them) and an engine error reaches
 * the user in German (docs/TRANSLATING.md).
 *
 * No root is needed at test time: where de_DE.UTF-8 is not generated
 * (a fresh Debian has only C.UTF-8), setlocale fails, C.UTF-8 stays, and
 * gettext follows LANGUAGE=de, which it honours in any locale but C.
 *
 * With the argument "fr" (app-locale-fr), the widths at 360 px in French. */
#include "app-test.h"

#include <glib/gi18n.h>
#include <locale.h>
#include <string.h>

#include "tern-application.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-manager.h"
#include "tern-model-manager.h"
#endif
#include "tern-message-row.h"
#include "tern-preferences-window.h"
#include "tern-stats-bar.h"

static gboolean
save_shot (GtkWidget  *widget,
           const char *name)
{
  const char *out = g_getenv ("TERN_TEST_OUT");
  g_autofree char *path = g_build_filename (out != NULL && *out != '\0' ? out : g_get_tmp_dir (),
                                            name, NULL);

  return app_test_save_screenshot (widget, path);
}

/* German words are long: at a phone's width the window, its stats bar in
 * each phase, the Models panel and Preferences stay 360 px wide, nothing
 * in them cut (app-daily-widths checks the same in English). The stats
 * bar's "Vorverarbeitung" (Prefill) widened the window to 378 px for good
 * with the first answer; the Models panel's "Überprüfen" made it 374 px
 * and left the search entry 13 px ("S…"). */
static void
check_narrow (TernWindow *w,
              GSettings  *settings,
              const char *lang)
{
  TernStatsBar *bar = tern_window_get_stats_bar (w);
  TernStats live = { .phase = TERN_PHASE_PREFILL, .prefill_done = 1200, .prefill_total = 12000,
                     .prefill_tok_s = 1234 };
  int min = 0;

  /* GNOME's title buttons (only Close), not GTK's fallback of three: the
   * widths checked are the ones people see (as in app-daily). */
  g_object_set (gtk_settings_get_default (), "gtk-decoration-layout", "appmenu:close", NULL);
  gtk_window_set_default_size (GTK_WINDOW (w), 360, 700);
  spin_for (0.5);
  tern_stats_bar_set_context (bar, 16384, 16384, 1 << 30);
  for (int phase = 0; phase < 4; phase++)
    {
      if (phase == 0)
        tern_stats_bar_start (bar);
      else if (phase == 1)
        tern_stats_bar_update (bar, &live);
      else if (phase == 2)
        {
          live.phase = TERN_PHASE_PIN;
          spin_for (0.3);
          tern_stats_bar_update (bar, &live);
        }
      else
        {
          live.phase = TERN_PHASE_DECODE;
          live.decode_tok_s = 12.3;
          live.ttft_ms = 1234;
          live.generated_tokens = 345;
          spin_for (0.3);
          tern_stats_bar_update (bar, &live);
        }
      spin_for (0.2);
      gtk_widget_measure (GTK_WIDGET (bar), GTK_ORIENTATION_HORIZONTAL, -1, &min, NULL, NULL, NULL);
      CHECKF (min <= 350, "the stats bar in \"%s\" needs %d px", tern_stats_bar_get_phase (bar), min);
    }
  /* And the words an answer ends with, beside its summary. */
  for (int end = 0; end < 4; end++)
    {
      TernStats final = { .generated_tokens = 120, .decode_tok_s = 21.4, .ttft_ms = 310,
                          .prompt_tokens = 419, .prefill_tok_s = 812 };

      tern_stats_bar_finish (bar, &final, end == 1, end == 2 ? _("Failed") : end == 3 ? _("Cut off") : NULL);
      spin_for (0.2);
      gtk_widget_measure (GTK_WIDGET (bar), GTK_ORIENTATION_HORIZONTAL, -1, &min, NULL, NULL, NULL);
      CHECKF (min <= 350, "the stats bar in \"%s\" needs %d px", tern_stats_bar_get_phase (bar), min);
    }
  CHECKF (gtk_widget_get_width (GTK_WIDGET (w)) <= 361, "the window is %d px",
          gtk_widget_get_width (GTK_WIDGET (w)));
  tern_stats_bar_reset (bar);

#ifdef TERN_HAVE_MANAGER
  {
    GtkWidget *window = gtk_window_new ();
    g_autoptr(GString) cut = g_string_new (NULL);

    gtk_window_set_default_size (GTK_WINDOW (window), 360, 700);
    gtk_window_set_child (GTK_WINDOW (window), tern_model_manager_new (NULL, NULL, NULL));
    gtk_window_present (GTK_WINDOW (window));
    spin_for (0.8);
    CHECKF (gtk_widget_get_width (window) <= 361, "the Models panel is %d px wide",
            gtk_widget_get_width (window));
    /* The search entry's placeholder is a label too: in French "Chercher"
     * was cut ("Cherc…") beside "Importer…" and "Vérifier". */
    collect_cut_labels (window, cut);
    CHECKF (cut->len == 0, "the Models panel at 360 px: cut: %s", cut->str);
    {
      g_autofree char *name = g_strdup_printf ("locale-%s-360-models.png", lang);

      CHECK (save_shot (window, name));
    }
    gtk_window_destroy (GTK_WINDOW (window));
    spin_for (0.2);
  }
#endif

  {
    TernPreferencesWindow *prefs = app_test_preferences_narrow (GTK_WINDOW (w), settings, lang);

    {
      g_autofree char *name = g_strdup_printf ("locale-%s-360-preferences.png", lang);

      CHECK (save_shot (GTK_WIDGET (prefs), name));
    }
    gtk_window_destroy (GTK_WINDOW (prefs));
    spin_for (0.2);
  }
  {
    g_autofree char *name = g_strdup_printf ("locale-%s-360.png", lang);

    CHECK (save_shot (GTK_WIDGET (w), name));
  }
}

#ifdef TERN_HAVE_MANAGER
/* Sizes (the Models panel's, tern-cli models') in the language's units
 * and with its decimal separator. Here LC_NUMERIC is C.UTF-8 (the locale
 * is not generated, as on a fresh Debian) and glib's own catalog (glib20,
 * in libglib2.0-data, which is only recommended) may be there or not: the
 * French footer said "0 bytes utilisés", and sizes "2.5 Go". */
static void
check_sizes (const char *lang)
{
  static const struct {
    const char *lang;
    guint64 bytes;
    const char *want;
  } sizes[] = {
    { "de", 0, "0 Bytes" },
    { "de", 1, "1 Byte" },
    { "de", 999, "999 Bytes" },
    { "de", 1500, "1,5 kB" },
    { "de", 2500000000u, "2,5 GB" },
    { "de", 3100000000000u, "3,1 TB" },
    { "fr", 0, "0 octet" },
    { "fr", 1, "1 octet" },
    { "fr", 999, "999 octets" },
    { "fr", 1500, "1,5 ko" },
    { "fr", 610000000, "610,0 Mo" },
    { "fr", 2500000000u, "2,5 Go" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autofree char *text = NULL;
      g_autoptr(GString) plain = NULL;

      if (!g_str_equal (sizes[i].lang, lang))
        continue;
      text = tern_manager_format_size (sizes[i].bytes);
      /* A no-break space between number and unit, as GLib's. */
      plain = g_string_new (text);
      g_string_replace (plain, "\xc2\xa0", " ", 0);
      CHECKF (g_str_equal (plain->str, sizes[i].want), "%" G_GUINT64_FORMAT " bytes: \"%s\", not \"%s\"",
              sizes[i].bytes, text, sizes[i].want);
    }
}

/* The text of the first label under widget that has words in it. */
static const char *
label_with (GtkWidget  *widget,
            const char *words)
{
  GtkWidget *label = find_label_with (widget, words);

  return label != NULL ? gtk_label_get_text (GTK_LABEL (label)) : NULL;
}

/* The Models panel's footer over an empty models folder: "0 octet
 * utilisé dans DIR", not "0 bytes utilisés" (nor "0 octet utilisés": in
 * French 0 and 1 take the singular, the participle too). */
static void
check_footer (const char *tmp,
              const char *lang)
{
  g_autofree char *root = g_build_filename (tmp, "models", NULL);
  g_autofree char *shot = g_strdup_printf ("locale-%s-models-footer.png", lang);
  g_autoptr(GError) error = NULL;
  g_autoptr(TernModelStore) store = tern_model_store_new (root, &error);
  const char *want = g_str_equal (lang, "de") ? "0\xc2\xa0" "Bytes belegt in "
                                               : "0\xc2\xa0" "octet utilisé dans ";
  GtkWidget *window;
  const char *footer;

  CHECKF (store != NULL, "store: %s", error != NULL ? error->message : "");
  if (store == NULL)
    return;
  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 360, 700);
  gtk_window_set_child (GTK_WINDOW (window), tern_model_manager_new (NULL, store, NULL));
  gtk_window_present (GTK_WINDOW (window));
  spin_for (0.5);
  footer = label_with (window, tern_model_store_get_root (store));
  CHECKF (footer != NULL && g_str_has_prefix (footer, want), "the footer: \"%s\"",
          footer != NULL ? footer : "(none)");
  CHECK (save_shot (window, shot));
  gtk_window_destroy (GTK_WINDOW (window));
  spin_for (0.2);
}

/* The row that says own: where its first shown button is against its
 * description (in the row's coordinates). FALSE: no such row or button. */
static gboolean
row_button_bounds (GtkWidget       *window,
                   const char      *own,
                   GtkWidget      **button,
                   graphene_rect_t *d,
                   graphene_rect_t *b,
                   int             *row_height)
{
  GtkWidget *description = find_label_with (window, own);
  GtkWidget *row = description != NULL ? gtk_widget_get_ancestor (description, ADW_TYPE_PREFERENCES_ROW) : NULL;

  *button = row != NULL ? find_visible_widget_where (row, widget_is_of_type, GSIZE_TO_POINTER (GTK_TYPE_BUTTON))
                        : NULL;
  if (*button == NULL || !gtk_widget_compute_bounds (description, row, d)
      || !gtk_widget_compute_bounds (*button, row, b))
    return FALSE;
  *row_height = gtk_widget_get_height (row);
  return TRUE;
}

/* Under the description (narrow) or beside it. */
static gboolean
button_placed (const graphene_rect_t *d,
               const graphene_rect_t *b,
               gboolean               narrow)
{
  float bottom = d->origin.y + d->size.height;

  return narrow ? b->origin.y >= bottom : b->origin.y < bottom && b->origin.x >= d->origin.x + d->size.width;
}

/* At width, the row that says own: its first shown button under its
 * description (narrow) or beside it. At 360 px a German row kept
 * "Herunterladen" beside its words, which had half the row, some 250 px
 * tall a row. The panel moves its buttons after the layout that tells it
 * the width, and a layout of the whole catalog takes a while on a busy
 * computer: up to 10 s are given. Screenshot
 * locale-LANG-models-catalog-WIDTH.png. */
static void
check_row_buttons (GtkWidget  *window,
                   const char *own,
                   int         width,
                   const char *lang)
{
  g_autofree char *shot = g_strdup_printf ("locale-%s-models-catalog-%d.png", lang, width);
  gboolean narrow = width < 500;
  gint64 end = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  GtkWidget *button = NULL;
  graphene_rect_t d, b;
  int height = 0;
  gboolean found;

  gtk_window_set_default_size (GTK_WINDOW (window), width, 900);
  do
    {
      spin_for (0.2);
      found = row_button_bounds (window, own, &button, &d, &b, &height);
    }
  while ((!found || !button_placed (&d, &b, narrow)) && g_get_monotonic_time () < end);
  CHECKF (gtk_widget_get_width (window) <= width, "the Models panel is %d px wide at %d px",
          gtk_widget_get_width (window), width);
  CHECKF (found, "no row with a button that says \"%s\"", own);
  if (found)
    {
      fprintf (stderr, "%d px: \"%s\" at x %.0f y %.0f, the description %.0f to %.0f (right %.0f), "
               "the row %d px tall\n", width, gtk_button_get_label (GTK_BUTTON (button)), b.origin.x,
               b.origin.y, d.origin.y, d.origin.y + d.size.height, d.origin.x + d.size.width, height);
      CHECKF (button_placed (&d, &b, narrow), "at %d px the button (x %.0f, y %.0f) is not %s the description",
              width, b.origin.x, b.origin.y, narrow ? "under" : "beside");
    }
  CHECK (save_shot (window, shot));
}

/* The shipped catalog's words in the Models panel (the build tree's copy;
 * data/catalog/catalog-strings.h has their msgids): a family's description
 * under its name, a model's label and its description on its row (it was
 * the row's tooltip). They stayed English in every language. */
static void
check_catalog (const char *lang)
{
  static const struct {
    const char *lang;
    const char *family;
    const char *own;
    const char *label;
  } want[] = {
    { "de", "Qwen3 von Alibaba: Denken ein- oder ausschaltbar, Apache-2.0.",
      "Das kleinste Qwen3, 0.6B Parameter in Q8_0: schnelle kurze Antworten auf jedem Rechner, "
      "Denken ein- oder ausschaltbar.", "Gemma 3 4B (Vision)" },
    { "fr", "Qwen3 d’Alibaba : réflexion activable ou non, Apache-2.0.",
      "Le plus petit Qwen3, 0.6B paramètres en Q8_0 : des réponses courtes et rapides sur tout "
      "ordinateur, réflexion activable ou non.", "Gemma 3 4B (vision)" },
  };
  g_autofree char *shot = g_strdup_printf ("locale-%s-models-catalog.png", lang);
  GtkWidget *window;

  g_unsetenv ("TERN_CATALOG");
  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 720, 900);
  gtk_window_set_child (GTK_WINDOW (window), tern_model_manager_new (NULL, NULL, NULL));
  gtk_window_present (GTK_WINDOW (window));
  spin_for (0.8);
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      if (!g_str_equal (want[i].lang, lang))
        continue;
      CHECKF (label_with (window, want[i].family) != NULL, "no family description \"%s\"", want[i].family);
      CHECKF (find_label_showing (window, want[i].own), "no row that says \"%s\"", want[i].own);
      CHECKF (find_label_showing (window, want[i].label), "no row titled \"%s\"", want[i].label);
    }
  CHECKF (label_with (window, "Alibaba's Qwen3") == NULL, "the English description is still shown");
  CHECKF (label_with (window, "The smallest Qwen3, 0.6B parameters at Q8_0: quick short answers on any "
                              "computer, thinking on or off.") == NULL,
          "the English description is still on its row");
  CHECK (save_shot (window, shot));
  /* The descriptions wrap: at 360 px the window is no wider (a window
   * cannot be made narrower than what it holds); the buttons go under the
   * words there, and back beside them when the window is wide again. */
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    if (g_str_equal (want[i].lang, lang))
      {
        check_row_buttons (window, want[i].own, 360, lang);
        check_row_buttons (window, want[i].own, 640, lang);
        check_row_buttons (window, want[i].own, 990, lang);
        check_row_buttons (window, want[i].own, 360, lang);
      }
  gtk_window_destroy (GTK_WINDOW (window));
  spin_for (0.2);
}
#endif

/* The sizes the window itself shows, in the language's units and with its
 * decimal separator (LC_NUMERIC is C.UTF-8 here): g_format_size wrote
 * "45.0 kB" under German words, and the stats bar "1.4 GiB". */
static void
check_sizes_shown (TernWindow *w)
{
  g_autofree char *long_text = g_strnfill (45000, 'x');
  TernMessageRow *row = tern_message_row_new ("user", long_text);
  TernStatsBar *bar = tern_window_get_stats_bar (w);
  const char *label;
  const char *tip;

  g_object_ref_sink (row);
  tern_message_row_flush (row);
  label = gtk_button_get_label (GTK_BUTTON (tern_message_row_get_show_all_button (row)));
  CHECKF (label != NULL && strstr (label, "(45,0\xc2\xa0kB)") != NULL, "a long message's button: %s",
          label != NULL ? label : "(none)");
  g_object_unref (row);

  tern_stats_bar_set_context (bar, 10, 100, G_GUINT64_CONSTANT (1500000000));
  tip = tern_stats_bar_get_context_text (bar);
  CHECKF (tip != NULL && strstr (tip, " 1,5\xc2\xa0GB") != NULL, "the context's tooltip: %s",
          tip != NULL ? tip : "(none)");
  tern_stats_bar_set_context (bar, 0, 0, 0);
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
  g_autoptr(TernApplication) app = NULL;
  const char *locale_dir = g_getenv ("TERN_LOCALEDIR");
  const char *err;
  TernWindow *w;
  /* "fr": the same widths in French (app-locale-fr), without the German
   * words' checks. */
  const char *lang = argc > 1 ? argv[1] : "de";
  gboolean de = g_str_equal (lang, "de");
  g_autofree char *lang_env = g_strdup_printf ("%s_%c%c.UTF-8", lang, g_ascii_toupper (lang[0]),
                                               g_ascii_toupper (lang[1]));
  g_autofree char *test_name = g_strdup_printf ("app-locale%s%s", de ? "" : "-", de ? "" : lang);

  /* The user's environment, whatever the caller's: nothing overrides LANG. */
  g_unsetenv ("LC_ALL");
  g_unsetenv ("LC_MESSAGES");
  g_setenv ("LANG", lang_env, TRUE);
  g_setenv ("LANGUAGE", lang, TRUE);
  if (locale_dir == NULL || *locale_dir == '\0')
    tn_test_missing ("TERN_LOCALEDIR is not set (meson sets it to the build's po/)");
  {
    g_autofree char *mo = g_build_filename (locale_dir, lang, "LC_MESSAGES", "tern.mo", NULL);

    if (!g_file_test (mo, G_FILE_TEST_EXISTS))
      tn_test_missing ("the catalog LANG/LC_MESSAGES/tern.mo is not built");
  }

  if ((tmp = app_test_start ("tern-app-locale")) == NULL)
    return 1;
  tern_i18n_init ();
  fprintf (stderr, "locale: %s (LANGUAGE=%s)\n", setlocale (LC_MESSAGES, NULL), lang);

  /* gettext itself, then what the window shows. */
  if (de)
    CHECKF (g_str_equal (_("New Chat"), "Neuer Chat"), "%s", _("New Chat"));
  else
    CHECKF (!g_str_equal (_("New Chat"), "New Chat"), "%s", _("New Chat"));
#ifdef TERN_HAVE_MANAGER
  check_sizes (lang);
  check_footer (tmp, lang);
  check_catalog (lang);
#endif
  if ((app = app_test_application_new ()) == NULL)
    return 1;
  w = app_test_window_new (app, 0, 0);
  spin_for (0.5);
  /* From ui/tern-window.ui (GtkBuilder, translatable="yes"): the page shown
   * without a model, and the composer's button. */
  CHECK (g_str_equal (tern_window_get_page (w), "no-model"));
  if (!de)
    goto narrow;
  CHECKF (find_label_showing (GTK_WIDGET (w), "Kein Modell geladen"), "no German status page title");
  CHECKF (!find_label_showing (GTK_WIDGET (w), "No Model Loaded"), "the English title is still shown");

  /* An engine error: libtern's English format, rebuilt from its German
   * translation with the engine's arguments. */
  bad = g_build_filename (tmp, "kein-modell.gguf", NULL);
  {
    /* 1500 bytes: its size on the loading page is "1,5 kB". */
    g_autofree char *junk = g_strnfill (1500, 'j');

    memcpy (junk, "this is not GGUF", strlen ("this is not GGUF"));
    g_file_set_contents (bad, junk, -1, NULL);
  }
  activate (w, "load-model", g_variant_new_string (bad));
  {
    const char *line = adw_status_page_get_description (w->loading_page);

    CHECKF (line != NULL && strstr (line, "(1,5\xc2\xa0kB)") != NULL, "loading: %s",
            line != NULL ? line : "(none)");
  }
  CHECK (wait_for (w, not_loading, 30));
  err = tern_window_get_last_error (w);
  CHECKF (err != NULL && strstr (err, "keine GGUF-Datei") != NULL && strstr (err, bad) != NULL,
          "error: %s", err);
  fprintf (stderr, "engine error: %s\n", err);
  close_dialogs ();
  check_sizes_shown (w);
narrow:
  check_narrow (w, tern_application_get_settings (app), lang);

  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
  app_test_remove (tmp);
  return tn_test_finish (test_name);
}
