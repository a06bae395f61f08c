/* test-app-walk: what a walk through the app's daily flow by hand found
 * wanting (session 49), one part per meson test (the part's name is the
 * argument):
 *   prompt-kept  a system prompt typed into the panel and never pinned is
 *                there again when the window is opened again
 *   overflow-narrow  (second argument: de, fr) a message too long for the
 *                context at 360 px: its two ways out fit the window, and
 *                the context gauge is translated (session 50)
 *   too-long-alone  a first message too long for the context says so
 *                without speaking of earlier turns (session 50)
 *   models-narrow  (second argument: de, fr) a model on this computer in
 *                the Models panel at 360 px keeps room for its words
 *   units        (second argument: de, fr) the speed plot's scale is in the
 *                stats bar's unit (session 50)
 *   cut-off      (second argument optional: de, fr) an answer cut off says
 *                so once, on its row, and the stats bar agrees with the
 *                row in its outcome and its words (session 50)
 *   default-prompt  (second argument: de, fr) the default system prompt is
 *                in the user's language; a user's own is kept (session 50)
 *   subtitle     (second argument: de, fr) the header's model line is in
 *                the user's language (session 50)
 *   freed        (second argument: de, es, fr) "Removed X (0 bytes freed)"
 *                agrees with any size (session 50)
 *   menu-narrow  (second argument optional: de, es, fr, zh_CN) the main
 *                menu, drafters offered, fits a 360 px window (session 51)
 *   numbers      (second argument: de, es, fr) counts of tokens in the
 *                locale's grouping ("16.384" in German) and their plurals,
 *                under a locale generated with localedef into LOCPATH
 *                (session 51)
 *   tour         (second argument: es, zh_CN) the daily flow at 360 and
 *                990 px, its screens and texts saved; Chinese punctuation,
 *                Spanish words, the drafter menu's one word for drafters,
 *                the header's title whole at 990 px, a 360 px window
 *                as narrow after a chat (session 51)
 * The parts with a language run in de, fr, es and zh_CN.
 * Screenshots go to TERN_TEST_OUT. Exit 77 when no display can be had.
 */
#include "config.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

#include <adwaita.h>
#include <glib/gi18n.h>

#include "tern.h"
#include "tern-application.h"
#include "tern-chat.h"
#include "tern-composer.h"
#include "tern-message-row.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-manager.h"
#include "tern-model-manager.h"
#endif
#include "tern-stats-bar.h"
#include "tern-pin-editor.h"
#include "tern-window.h"
#include "tern-window-private.h"
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

static const char *lang = "en";

/* A window `width` px wide with the app tests' model loaded in a 256-token
 * context, the system prompt panel closed; NULL after a failed check. */
static TernWindow *
open_with_model (Fixture *f,
                 int      width)
{
  g_autofree char *model = g_build_filename (f->tmp, "walk-model.gguf", NULL);
  tn_mkmodel_params p = app_test_model_params ();
  tn_error err = { 0 };
  TernWindow *w;

  p.n_ctx = 32768;
  p.tokenizer = NULL;
  if (tn_mkmodel (&p, model, &err) != TN_OK)
    {
      fprintf (stderr, "mkmodel: %s\n", err.message);
      CHECK (FALSE);
      return NULL;
    }
  g_settings_set_int (f->settings, "threads", 1);
  g_settings_set_int (f->settings, "context-size", 256);
  w = open_window (f);
  gtk_window_set_default_size (GTK_WINDOW (w), width, 720);
  activate (w, "load-model", g_variant_new_string (model));
  CHECK (wait_for (w, not_loading, 120));
  CHECK (wait_for (w, idle_engine, 120));
  CHECK (tern_window_has_model (w));
  g_action_group_change_action_state (G_ACTION_GROUP (w), "show-pin-panel",
                                      g_variant_new_boolean (FALSE));
  if (!tern_window_has_model (w))
    {
      gtk_window_destroy (GTK_WINDOW (w));
      return NULL;
    }
  return w;
}

/* The ways out of a message too long for the context (Edit Message,
 * Preferences) at a phone's width in the language asked for: side by side
 * at their natural width, German's "Nachricht bearbeiten" and
 * "Einstellungen" made the window 388 px wide for good (French 371 px).
 * And the context gauge beside them is in that language (French's was
 * "31 / 256 ctx"). */
static void
part_overflow_narrow (Fixture *f)
{
  g_autofree char *name = g_strdup_printf ("walk-overflow-narrow-%s.png", lang);
  g_autofree char *path = g_build_filename (out_dir, name, NULL);
  TernWindow *w;
  TernChat *chat;
  GtkWidget *row, *fixes, *gauge;
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GString) cut = g_string_new (NULL);
  guint n;

  if ((w = open_with_model (f, 360)) == NULL)
    return;
  activate (w, "new-chat", NULL);
  g_action_group_activate_action (G_ACTION_GROUP (w), "mode", g_variant_new_string ("flash"));
  for (int i = 0; i < 200; i++)
    g_string_append (text, "seabird ");
  tern_window_set_composer_text (w, text->str);
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 300));
  chat = tern_window_get_chat (w);
  n = tern_chat_get_n_messages (chat);
  row = n > 0 ? tern_window_get_row (w, n - 1) : NULL;
  fixes = row != NULL ? tern_message_row_get_fix_box (TERN_MESSAGE_ROW (row)) : NULL;
  CHECKF (fixes != NULL, "no ways out under the failed answer (%u messages)", n);
  /* The engine's detail inside the app's sentence continues it: German's
   * read "(Die Nachricht hat 1415 Token; ...)" mid-sentence. */
  if (n > 0 && tern_chat_get_message (chat, n - 1)->error != NULL)
    {
      const char *error = tern_chat_get_message (chat, n - 1)->error;

      CHECKF (strstr (error, "(Die ") == NULL && strstr (error, "(Der ") == NULL
              && strstr (error, "(Le ") == NULL && strstr (error, "(La ") == NULL,
              "%s: %s", lang, error);
    }
  spin_for (1.0);
  CHECKF (gtk_widget_get_width (GTK_WIDGET (w)) <= 361, "%s: the window is %d px wide", lang,
          gtk_widget_get_width (GTK_WIDGET (w)));
  if (fixes != NULL)
    {
      guint buttons = 0;

      for (GtkWidget *c = gtk_widget_get_first_child (fixes); c != NULL; c = gtk_widget_get_next_sibling (c))
        if (GTK_IS_BUTTON (c))
          {
            graphene_rect_t b;

            buttons++;
            CHECKF (gtk_widget_get_mapped (c) && gtk_widget_compute_bounds (c, GTK_WIDGET (w), &b)
                    && b.origin.x >= 0 && b.origin.x + b.size.width <= gtk_widget_get_width (GTK_WIDGET (w)),
                    "%s: \"%s\" is not inside the window", lang, gtk_button_get_label (GTK_BUTTON (c)));
          }
      CHECK (buttons == 2);
      collect_cut_labels (fixes, cut);
      CHECKF (cut->len == 0, "%s: cut off: %s", lang, cut->str);
    }
  gauge = find_label_with (GTK_WIDGET (tern_window_get_stats_bar (w)), " / 256");
  CHECKF (gauge != NULL, "%s: no context gauge", lang);
  if (gauge != NULL && !g_str_equal (lang, "en"))
    CHECKF (!g_str_has_suffix (gtk_label_get_text (GTK_LABEL (gauge)), " ctx"),
            "%s: the gauge says \"%s\"", lang, gtk_label_get_text (GTK_LABEL (gauge)));
  CHECK (app_test_save_screenshot (GTK_WIDGET (w), path));
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
}

/* A first message too long for the context, in Chat: the sentence said
 * "every earlier turn is already left out" of a chat that had none. */
static void
part_too_long_alone (Fixture *f)
{
  g_autofree char *path = g_build_filename (out_dir, "walk-too-long-alone.png", NULL);
  g_autoptr(GString) text = g_string_new (NULL);
  TernWindow *w;
  TernChat *chat;
  TernMessage *m;

  if ((w = open_with_model (f, 800)) == NULL)
    return;
  activate (w, "new-chat", NULL);
  g_action_group_activate_action (G_ACTION_GROUP (w), "mode", g_variant_new_string ("chat"));
  for (int i = 0; i < 200; i++)
    g_string_append (text, "seabird ");
  tern_window_set_composer_text (w, text->str);
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 300));
  chat = tern_window_get_chat (w);
  m = tern_chat_get_n_messages (chat) == 2 ? tern_chat_get_message (chat, 1) : NULL;
  CHECKF (m != NULL && m->error != NULL && strstr (m->error, "256-token context") != NULL,
          "error: %s", m != NULL && m->error != NULL ? m->error : "(none)");
  CHECKF (m != NULL && m->error != NULL && strstr (m->error, "earlier turn") == NULL,
          "a first message: %s", m != NULL && m->error != NULL ? m->error : "(none)");
  /* With turns before it, they are named. */
  tern_window_dismiss_toasts (w);
  activate (w, "new-chat", NULL);
  tern_window_set_composer_text (w, "Hello");
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 300));
  tern_window_set_composer_text (w, text->str);
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 300));
  chat = tern_window_get_chat (w);
  m = tern_chat_get_n_messages (chat) == 4 ? tern_chat_get_message (chat, 3) : NULL;
  CHECKF (m != NULL && m->error != NULL && strstr (m->error, "every earlier turn is already left out") != NULL,
          "after a turn: %s", m != NULL && m->error != NULL ? m->error : "(none)");
  CHECK (app_test_save_screenshot (GTK_WIDGET (w), path));
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
}

#ifdef TERN_HAVE_MANAGER
/* A model on this computer in the Models panel at 360 px: Remove and Use
 * side by side left its title and subtitle some 75 px in German, eleven
 * lines with words cut in two ("herunterge-laden"). The words get at
 * least as much of the row as the buttons. */
static void
part_models_narrow (Fixture *f)
{
  g_autofree char *name = g_strdup_printf ("walk-models-narrow-%s.png", lang);
  g_autofree char *path = g_build_filename (out_dir, name, NULL);
  g_autofree char *model = g_build_filename (f->tmp, "seabird.gguf", NULL);
  g_autofree char *root = g_build_filename (f->tmp, "store", NULL);
  g_autofree char *tag = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(TernCatalog) catalog = NULL;
  g_autoptr(TernModelStore) store = NULL;
  g_autoptr(TernDownloader) dl = NULL;
  tn_mkmodel_params p = app_test_model_params ();
  tn_error err = { 0 };
  GtkWidget *window, *row, *remove, *title;
  TernModelManager *panel;

  p.tokenizer = NULL;
  CHECKF (tn_mkmodel (&p, model, &err) == TN_OK, "mkmodel: %s", err.message);
  catalog = tern_catalog_new_from_data ("{\"schema\": 1, \"packages\": {}, \"families\": []}", -1,
                                        "empty.json", &error);
  CHECKF (catalog != NULL, "catalog: %s", error ? error->message : "");
  store = tern_model_store_new (root, &error);
  CHECKF (store != NULL, "store: %s", error ? error->message : "");
  if (catalog == NULL || store == NULL)
    return;
  tag = tern_model_store_import (store, model, "Seabird 7B Instruct", &error);
  CHECKF (tag != NULL, "import: %s", error ? error->message : "");
  if (tag == NULL)
    return;
  dl = tern_downloader_new (store);
  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 360, 720);
  panel = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));
  spin_for (1.0);
  CHECKF (gtk_widget_get_width (window) <= 361, "%s: the panel is %d px wide", lang,
          gtk_widget_get_width (window));
  row = tern_model_manager_get_row (panel, tag);
  remove = row != NULL ? find_button_labelled (row, _("_Remove")) : NULL;
  title = row != NULL ? find_label_with (row, adw_preferences_row_get_title (ADW_PREFERENCES_ROW (row))) : NULL;
  CHECKF (remove != NULL && gtk_widget_get_mapped (remove) && title != NULL, "%s: row %p, remove %p, "
          "title %p", tag, (void *) row, (void *) remove, (void *) title);
  if (remove != NULL && title != NULL)
    {
      GtkWidget *buttons = gtk_widget_get_parent (remove);

      fprintf (stderr, "%s: the title is %d px wide, the buttons %d px\n", lang,
               gtk_widget_get_width (title), gtk_widget_get_width (buttons));
      CHECKF (gtk_widget_get_width (title) >= gtk_widget_get_width (buttons),
              "%s: the title has %d px, its buttons %d px", lang, gtk_widget_get_width (title),
              gtk_widget_get_width (buttons));
    }
  CHECK (app_test_save_screenshot (window, path));
  gtk_window_destroy (GTK_WINDOW (window));
  spin_for (0.2);
}
#endif

/* The speed plot's scale is in the stats bar's unit: in French it read
 * "10000 tok/s" beside "2647.5 jetons/s" (German "Token/s"). */
static void
part_units (Fixture *f)
{
  g_autofree char *name = g_strdup_printf ("walk-units-%s.png", lang);
  g_autofree char *path = g_build_filename (out_dir, name, NULL);
  /* The unit as the plot writes its scale: what follows the figure. */
  g_autofree char *scale = g_strdup_printf (_("%.0f tok/s"), 100.0);
  const char *unit = strchr (scale, ' ') != NULL ? strchr (scale, ' ') + 1 : scale;
  TernWindow *w;
  const char *figures;

  if ((w = open_with_model (f, 1000)) == NULL)
    return;
  activate (w, "new-chat", NULL);
  tern_window_set_composer_text (w, "What do terns eat?");
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 300));
  spin_for (0.5);
  figures = tern_stats_bar_get_text (tern_window_get_stats_bar (w));
  CHECKF (tern_stats_bar_get_n_plot_samples (tern_window_get_stats_bar (w)) > 0, "%s: nothing plotted",
          lang);
  CHECKF (strstr (figures, unit) != NULL, "%s: the plot's scale is in \"%s\", the figures beside it "
          "say \"%s\"", lang, unit, figures);
  CHECK (app_test_save_screenshot (GTK_WIDGET (w), path));
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
}

/* Toasts showing or queued whose text is `text`. */
static guint
toasts_saying (TernWindow *w,
               const char *text)
{
  guint n = 0;

  for (guint i = 0; i < w->toasts->len; i++)
    {
      AdwToast *t = g_ptr_array_index (w->toasts, i);

      n += g_object_get_data (G_OBJECT (t), "tern-dismissed") == NULL
           && g_strcmp0 (_tern_window_toast_get_text (t), text) == 0;
    }
  return n;
}

/* What a translated " · %d WORD" says after its number ("reused"). */
static const char *
word_after_number (const char *format)
{
  /* "%'d": a count in the locale's grouping (docs/APP.md, "Counts"). */
  const char *g = strstr (format, "%'d");
  const char *d = g != NULL ? g + 1 : strstr (format, "%d");

  return d != NULL ? d + 2 + (d[2] == ' ') : format;
}

/* The texts of the labels under widget, one a line. */
static void
collect_label_texts (GtkWidget *widget,
                     GString   *out)
{
  if (GTK_IS_LABEL (widget) && gtk_widget_get_visible (widget))
    g_string_append_printf (out, "%s\n", gtk_label_get_text (GTK_LABEL (widget)));
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    collect_label_texts (c, out);
}

/* The decimal separators between digits in text ("." or ","), each once. */
static void
collect_separators (const char *text,
                    GString    *seps)
{
  for (const char *p = text; p != NULL && *p != '\0'; p++)
    if ((*p == '.' || *p == ',') && p > text && g_ascii_isdigit (p[-1]) && g_ascii_isdigit (p[1])
        && strchr (seps->str, *p) == NULL)
      g_string_append_c (seps, *p);
}

/* An answer cut off: at the Answer Length Limit the row said so and the
 * stats bar "Done" beside it; at the end of the context the row's sentence
 * came again, word for word, in a toast. The bar and the row named the
 * tokens not computed again "cached" and "reused". */
static void
part_cut_off (Fixture *f)
{
  g_autofree char *name = g_strdup_printf ("walk-cut-off-%s.png", lang);
  g_autofree char *path = g_build_filename (out_dir, name, NULL);
  const char *word = word_after_number (_(" · %'d reused"));
  g_autoptr(GString) text = g_string_new (NULL);
  g_autofree char *figures = NULL;
  TernWindow *w;
  TernChat *chat;
  TernMessage *m;
  const char *bar;

  g_settings_set_int (f->settings, "max-tokens", 8);
  if ((w = open_with_model (f, 1000)) == NULL)
    return;
  activate (w, "new-chat", NULL);
  g_action_group_activate_action (G_ACTION_GROUP (w), "mode", g_variant_new_string ("flash"));
  tern_window_set_composer_text (w, "What do terns eat?");
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 300));
  spin_for (0.3);
  chat = tern_window_get_chat (w);
  m = tern_chat_get_message (chat, tern_chat_get_n_messages (chat) - 1);
  figures = tern_message_format_stats (m);
  CHECKF (strstr (figures, _("cut off by the Answer Length Limit")) != NULL,
          "%s: the row says \"%s\"", lang, figures);
  CHECKF (g_strcmp0 (tern_stats_bar_get_phase (tern_window_get_stats_bar (w)), _("Cut off")) == 0,
          "%s: the row says cut off, the bar \"%s\"", lang,
          tern_stats_bar_get_phase (tern_window_get_stats_bar (w)));
  /* In the row's word: German's bar said "Gekürzt" beside the row's
   * "abgeschnitten", French's "Tronquée" beside "coupée". */
  {
    g_autofree char *phase = g_utf8_casefold (_("Cut off"), -1);
    g_autofree char *row = g_utf8_casefold (figures, -1);
    /* Chinese marks the bar's state done with 已 ("已截断"), a word the
     * row's "因…而截断" has no place for: the verb is the word. */
    const char *word = g_str_has_prefix (phase, "已") ? phase + strlen ("已") : phase;

    CHECKF (strstr (row, word) != NULL, "%s: the bar says \"%s\", the row \"%s\"", lang, phase,
            figures);
  }
  /* The bar's whole summary (its label may show a short form). */
  bar = tern_stats_bar_get_figures_tooltip (tern_window_get_stats_bar (w));
  CHECKF (m->stats.restored_tokens > 0, "%s: no tokens reused (%d)", lang, m->stats.restored_tokens);
  CHECKF (strstr (figures, word) != NULL && strstr (bar, word) != NULL,
          "%s: the row says \"%s\", the bar \"%s\": one word (\"%s\") for the tokens reused", lang,
          figures, bar, word);
  /* One decimal separator on the screen: German's read "4003.9 Token/s"
   * in the bar beside the context's "131,1 kB". */
  {
    const char *gauge = tern_stats_bar_get_context_text (tern_window_get_stats_bar (w));
    g_autoptr(GString) row = g_string_new (NULL);
    g_autoptr(GString) seps = g_string_new (NULL);
    GtkWidget *last = tern_window_get_row (w, tern_chat_get_n_messages (chat) - 1);

    CHECKF (gauge != NULL, "%s: no context gauge", lang);
    CHECK (last != NULL);
    if (last != NULL)
      collect_label_texts (last, row);
    collect_separators (gauge, seps);
    collect_separators (bar, seps);
    collect_separators (row->str, seps);
    CHECKF (seps->len == 1, "%s: the separators \"%s\" in \"%s\", \"%s\" and \"%s\"", lang, seps->str,
            bar, row->str, gauge ? gauge : "");
  }

  /* Cut off by the end of the 256-token context (random weights may end
   * an answer of themselves first: a few tries). */
  g_settings_set_int (f->settings, "max-tokens", 4096);
  g_string_append (text, "Seabirds");
  for (int tries = 0; tries < 8; tries++)
    {
      g_string_append (text, " and terns");
      tern_window_dismiss_toasts (w);
      activate (w, "new-chat", NULL);
      tern_window_set_composer_text (w, text->str);
      activate (w, "send", NULL);
      CHECK (wait_for (w, not_generating, 300));
      spin_for (0.3);
      chat = tern_window_get_chat (w);
      m = tern_chat_get_message (chat, tern_chat_get_n_messages (chat) - 1);
      if (g_strcmp0 (m->stats.stop_reason, "context full") == 0)
        break;
    }
  CHECKF (m->error != NULL && g_strcmp0 (m->stats.stop_reason, "context full") == 0,
          "%s: stop %s, error %s", lang, m->stats.stop_reason, m->error ? m->error : "(none)");
  if (m->error != NULL)
    CHECKF (toasts_saying (w, m->error) == 0, "%s: the row's \"%s\" is in a toast too", lang,
            m->error);
  CHECKF (g_strcmp0 (tern_stats_bar_get_phase (tern_window_get_stats_bar (w)), _("Cut off")) == 0,
          "%s: the bar says \"%s\"", lang, tern_stats_bar_get_phase (tern_window_get_stats_bar (w)));
  CHECK (app_test_save_screenshot (GTK_WIDGET (w), path));
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
}

/* The default system prompt was English in every language; a user's own
 * prompt, English or not, is never changed. */
static void
part_default_prompt (Fixture *f)
{
  static const char *english = "You are a helpful assistant.";
  TernWindow *w = open_window (f);
  g_autofree char *shown = tern_pin_editor_get_text (tern_window_get_pin_editor (w));

  CHECKF (shown != NULL && *shown != '\0' && g_strcmp0 (shown, english) != 0,
          "%s: the default prompt is \"%s\"", lang, shown ? shown : "(none)");
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
  g_clear_pointer (&shown, g_free);
  g_settings_set_string (f->settings, "system-prompt", english);
  w = open_window (f);
  shown = tern_pin_editor_get_text (tern_window_get_pin_editor (w));
  CHECKF (g_strcmp0 (shown, english) == 0, "%s: the user's own prompt became \"%s\"", lang, shown);
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
}

/* The header's model line was the engine's English "(qwen3, 499.7K params,
 * Q8_0) - demo model, random weights" in every language. */
static void
part_subtitle (Fixture *f)
{
  g_autofree char *name = g_strdup_printf ("walk-subtitle-%s.png", lang);
  g_autofree char *path = g_build_filename (out_dir, name, NULL);
  TernWindow *w;
  const char *subtitle;

  if ((w = open_with_model (f, 1000)) == NULL)
    return;
  subtitle = adw_window_title_get_subtitle (w->window_title);
  /* (The model's own name, general.name, is "Tern demo model (random
   * weights)": the file's words, not the app's.) */
  CHECKF (subtitle != NULL && strstr (subtitle, " params, ") == NULL
          && !g_str_has_suffix (subtitle, " - demo model, random weights"),
          "%s: the header says \"%s\"", lang, subtitle ? subtitle : "(none)");
  CHECK (app_test_save_screenshot (GTK_WIDGET (w), path));
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
}

#ifdef TERN_HAVE_MANAGER
/* "0 octet libérés": the size's number decides its unit's form, and the
 * sentence around it has to agree with any. */
static void
part_freed (Fixture *f)
{
  static const guint64 sizes[] = { 0, 1, 2, 1500000000 };
  static const char *const wrong[] = { "octet libérés", "byte liberados", "Byte werden" };

  (void) f;
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autofree char *size = tern_manager_format_size (sizes[i]);
      g_autofree char *removed = g_strdup_printf (_("Removed %s (%s freed)."), "seabird", size);
      g_autofree char *loaded = g_strdup_printf (_("Removed %s. It is still loaded: its %s are freed when another model is loaded or Tern is closed."),
                                                 "seabird", size);

      for (guint j = 0; j < G_N_ELEMENTS (wrong); j++)
        {
          CHECKF (strstr (removed, wrong[j]) == NULL, "%s: \"%s\"", lang, removed);
          CHECKF (strstr (loaded, wrong[j]) == NULL, "%s: \"%s\"", lang, loaded);
        }
      fprintf (stderr, "%s\n%s\n", removed, loaded);
    }
}
#endif

/* ---- tour (session 51): the daily flow in one language, screen by screen */

/* Labels and tooltips under widget, one a line (hidden pages included). */
static void
collect_texts (GtkWidget *widget,
               GString   *out)
{
  const char *tip = gtk_widget_get_tooltip_text (widget);

  if (GTK_IS_LABEL (widget) && *gtk_label_get_text (GTK_LABEL (widget)) != '\0')
    g_string_append_printf (out, "%s\n", gtk_label_get_text (GTK_LABEL (widget)));
  if (tip != NULL)
    g_string_append_printf (out, "%s\n", tip);
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    collect_texts (c, out);
}

static gboolean
is_han (gunichar c)
{
  return (c >= 0x4e00 && c <= 0x9fff) || c == 0x201c || c == 0x201d;
}

/* Whether bad lists line already (the same text at two widths). */
static gboolean
line_listed (GString    *bad,
             const char *line)
{
  g_autofree char *listed = g_strdup_printf ("  %s\n", line);

  return strstr (bad->str, listed) != NULL;
}

/* Chinese sentences take full-width punctuation: "已连接:%u 个模型:%s" and
 * "API 密钥(可选)" read as half-translated beside "首选项：" elsewhere. A
 * mnemonic's "(_A)" is GNOME's usual ASCII. Appends the lines at fault. */
static void
collect_ascii_punctuation (const char *text,
                           GString    *bad)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++)
    {
      gunichar prev = 0, before_space = 0;
      gboolean wrong = FALSE;

      for (const char *p = lines[i]; *p != '\0'; p = g_utf8_next_char (p))
        {
          gunichar c = g_utf8_get_char (p);
          gunichar next = g_utf8_get_char (g_utf8_next_char (p));

          /* A mnemonic's "(_A)" shows as "(A)". */
          gboolean mnemonic = c == '(' && next < 128 && g_ascii_isalnum ((char) next)
                              && g_utf8_get_char (g_utf8_next_char (g_utf8_next_char (p))) == ')';

          /* "内存足够 (至少 4.0 MB；…)": a parenthesis a space away too. */
          if (c != 0 && c < 128 && strchr (",:;?(", (int) c) != NULL
              && (is_han (prev) || (is_han (next) && c != '(') || (c == '(' && prev == ' ' && is_han (before_space)))
              && !mnemonic)
            wrong = TRUE;
          before_space = c == ' ' ? prev : 0;
          prev = c;
        }
      if (wrong && !line_listed (bad, lines[i]))
        g_string_append_printf (bad, "  %s\n", lines[i]);
    }
}

/* What a user of this language reads as a wrong word: English left in
 * Spanish ("la búsqueda en el prompt" beside "la indicación del sistema"). */
static void
collect_stray_words (const char *text,
                     GString    *bad)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);

  if (!g_str_equal (lang, "es"))
    return;
  for (guint i = 0; lines[i] != NULL; i++)
    if (strstr (lines[i], " prompt") != NULL && !line_listed (bad, lines[i]))
      g_string_append_printf (bad, "  %s\n", lines[i]);
}

static void
tour_shot (GtkWidget  *widget,
           int         width,
           const char *what,
           GString    *texts)
{
  g_autofree char *name = g_strdup_printf ("tour-%s-%d-%s.png", lang, width, what);
  g_autofree char *path = g_build_filename (out_dir, name, NULL);

  spin_for (0.5);
  g_string_append_printf (texts, "== %s at %d px\n", what, width);
  collect_texts (widget, texts);
  CHECKF (app_test_save_screenshot (widget, path), "%s", path);
}

static void
tour_width (Fixture *f,
            int      width,
            GString *texts)
{
  g_autoptr(GString) longer = g_string_new (NULL);
  TernWindow *w = open_window (f);
  TernPreferencesWindow *prefs;
  g_autoptr(GPtrArray) pages = g_ptr_array_new ();
  static const char *const turns[] = { "What do terns eat?", "And where do they nest?",
                                       "How far do they fly?" };

  gtk_window_set_default_size (GTK_WINDOW (w), width, 720);
  tour_shot (GTK_WIDGET (w), width, "start", texts);
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);

  g_settings_set_int (f->settings, "max-tokens", 4096);
  if ((w = open_with_model (f, width)) == NULL)
    return;
  activate (w, "new-chat", NULL);
  g_action_group_activate_action (G_ACTION_GROUP (w), "mode", g_variant_new_string ("chat"));
  for (guint i = 0; i < G_N_ELEMENTS (turns); i++)
    {
      tern_window_set_composer_text (w, turns[i]);
      activate (w, "send", NULL);
      CHECK (wait_for (w, not_generating, 300));
    }
  tour_shot (GTK_WIDGET (w), width, "chat", texts);
  /* Three turns at a phone's width leave the window that wide: Spanish's
   * stats bar said "Decodificación" while the answers were written, and
   * the window grew to 380 px for good. */
  CHECKF (width > 360 || gtk_widget_get_width (GTK_WIDGET (w)) <= 361,
          "%s: after a chat the window is %d px wide at %d px", lang,
          gtk_widget_get_width (GTK_WIDGET (w)), width);
  /* At a laptop's width the header's title is whole: Spanish's "Modelo de
   * demostración" read "Modelo de de…". */
  if (width >= 990)
    {
      const char *title = adw_window_title_get_title (w->window_title);
      GtkWidget *label = find_label_with (GTK_WIDGET (w->window_title), title);

      CHECKF (label != NULL && !pango_layout_is_ellipsized (gtk_label_get_layout (GTK_LABEL (label))),
              "%s: the header's title \"%s\" is cut at %d px", lang, title, width);
    }

  for (int i = 0; i < 200; i++)
    g_string_append (longer, "seabird ");
  tern_window_set_composer_text (w, longer->str);
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 300));
  tour_shot (GTK_WIDGET (w), width, "too-long", texts);

  /* A picture on a model without vision. */
  {
    g_autofree char *png = g_build_filename (f->tmp, "tern.png", NULL);
    g_autoptr(GdkPixbuf) pixbuf = gdk_pixbuf_new (GDK_COLORSPACE_RGB, FALSE, 8, 8, 8);
    g_autoptr(GFile) file = g_file_new_for_path (png);

    gdk_pixbuf_fill (pixbuf, 0x3070a0ff);
    CHECK (gdk_pixbuf_save (pixbuf, png, "png", NULL, NULL));
    CHECK (!tern_composer_attach_file (tern_window_get_composer (w), file));
    tour_shot (GTK_WIDGET (w), width, "image-refused", texts);
  }
  tern_window_dismiss_toasts (w);

  g_settings_set_int (f->settings, "max-tokens", 8);
  activate (w, "new-chat", NULL);
  g_action_group_activate_action (G_ACTION_GROUP (w), "mode", g_variant_new_string ("flash"));
  tern_window_set_composer_text (w, "What do terns eat?");
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 300));
  tour_shot (GTK_WIDGET (w), width, "cut-off", texts);
  g_settings_set_int (f->settings, "max-tokens", 4096);

  prefs = tern_preferences_window_new (GTK_WINDOW (w), f->settings);
  gtk_window_set_default_size (GTK_WINDOW (prefs), width, 800);
  gtk_window_present (GTK_WINDOW (prefs));
  spin_for (0.8);
  collect_pages (GTK_WIDGET (prefs), pages);
  for (guint i = 0; i < pages->len; i++)
    {
      g_autofree char *what = g_strdup_printf ("preferences-%u", i);

      adw_preferences_window_set_visible_page (ADW_PREFERENCES_WINDOW (prefs), pages->pdata[i]);
      tour_shot (GTK_WIDGET (prefs), width, what, texts);
    }
  gtk_window_destroy (GTK_WINDOW (prefs));
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);

#ifdef TERN_HAVE_MANAGER
  /* The Models panel with a catalog whose one model is at a dead address. */
  {
    static const char catalog_json[] =
      "{\"schema\": 1, \"packages\": {\"p\": {\"files\": [{\"name\": \"m.gguf\", "
      "\"url\": \"http://127.0.0.1:9/m.gguf\", \"size\": 4000000}]}}, \"families\": [{\"id\": \"seabird\", "
      "\"label\": \"Seabird\", \"tags\": [{\"tag\": \"seabird:7b\", \"label\": \"7B\", \"base\": \"p\"}]}]}";
    g_autofree char *root = g_strdup_printf ("%s/store-%d", f->tmp, width);
    g_autoptr(GError) error = NULL;
    g_autoptr(TernCatalog) catalog = tern_catalog_new_from_data (catalog_json, -1, "c.json", &error);
    g_autoptr(TernModelStore) store = NULL;
    g_autoptr(TernDownloader) dl = NULL;
    GtkWidget *window;
    TernModelManager *panel;

    CHECKF (catalog != NULL, "catalog: %s", error ? error->message : "");
    store = tern_model_store_new (root, &error);
    CHECKF (store != NULL, "store: %s", error ? error->message : "");
    if (catalog == NULL || store == NULL)
      return;
    dl = tern_downloader_new (store);
    window = gtk_window_new ();
    gtk_window_set_default_size (GTK_WINDOW (window), width, 720);
    panel = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
    gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
    gtk_window_present (GTK_WINDOW (window));
    spin_for (1.0);
    tour_shot (window, width, "models", texts);
    tern_model_manager_download (panel, "seabird:7b");
    spin_for (3.0);
    tour_shot (window, width, "models-failed", texts);
    gtk_window_destroy (GTK_WINDOW (window));
    spin_for (0.2);
  }
#endif
}

/* The whole daily flow at a phone's width and a laptop's, screenshots and
 * the texts shown (tour-LANG-texts.txt) for a reader of the language; and
 * what such a reader found wrong, checked. */
static void
part_tour (Fixture *f)
{
  g_autoptr(GString) texts = g_string_new (NULL);
  g_autoptr(GString) bad = g_string_new (NULL);
  g_autofree char *name = g_strdup_printf ("tour-%s-texts.txt", lang);
  g_autofree char *path = g_build_filename (out_dir, name, NULL);
  /* The drafter menu's four entries name the drafter with one word. */
  static const char *const drafters[] = { N_("Drafter: Draft _Model"), N_("Drafter: D_Flash"),
                                          N_("Drafter: M_TP Assistant"), N_("Drafter: Prompt _Lookup") };
  g_autofree char *first = NULL;

  tour_width (f, 360, texts);
  tour_width (f, 990, texts);
  /* The bar's words for how an answer ended speak of one answer: Spanish's
   * read "Detenido" (masculine) beside "Cortada" (feminine, la respuesta),
   * and the row's "detenido" beside "cortada por el Límite…". */
  if (g_str_equal (lang, "es"))
    {
      const char *stopped = _("Stopped"), *cut = _("Cut off"), *row_stopped = _("stopped");
      const char *row_cut = _("cut off by the Answer Length Limit");
      const char *space = strchr (row_cut, ' ');

      CHECKF (g_str_has_suffix (stopped, "a") == g_str_has_suffix (cut, "a")
              && g_str_has_suffix (row_stopped, "a") == (space != NULL && space[-1] == 'a'),
              "es: \"%s\" beside \"%s\", \"%s\" beside \"%s\"", stopped, cut, row_stopped, row_cut);
    }
  CHECK (g_file_set_contents (path, texts->str, -1, NULL));
  if (g_str_equal (lang, "zh_CN"))
    collect_ascii_punctuation (texts->str, bad);
  collect_stray_words (texts->str, bad);
  CHECKF (bad->len == 0, "%s: what a reader of the language trips on:\n%s", lang, bad->str);
  for (guint i = 0; i < G_N_ELEMENTS (drafters); i++)
    {
      const char *t = _(drafters[i]);
      const char *colon = g_utf8_strchr (t, -1, g_utf8_get_char (g_str_equal (lang, "zh_CN") ? "：" : ":"));
      g_autofree char *head = colon != NULL ? g_strndup (t, colon - t) : g_strdup (t);

      if (first == NULL)
        first = g_strdup (head);
      CHECKF (g_str_equal (first, head), "%s: \"%s\" beside \"%s\"", lang, t, _(drafters[0]));
    }
}

static gboolean
is_main_menu_button (GtkWidget    *widget,
                     gconstpointer data)
{
  return GTK_IS_MENU_BUTTON (widget) && g_strcmp0 (gtk_widget_get_tooltip_text (widget), data) == 0;
}

/* The main menu at 360 px, a model loaded (its drafters in the menu): the
 * Spanish one needed some 454 px ("Generador de borradores: búsqueda en
 * la indicación"), wider than the window. walk-menu-narrow-LANG.png. */
static void
part_menu_narrow (Fixture *f)
{
  g_autofree char *name = g_strdup_printf ("walk-menu-narrow-%s.png", lang);
  g_autofree char *path = g_build_filename (out_dir, name, NULL);
  TernWindow *w = open_with_model (f, 360);
  GtkWidget *button, *popover, *box;
  int min = 0, width;

  if (w == NULL)
    return;
  spin_for (0.5);
  width = gtk_widget_get_width (GTK_WIDGET (w));
  button = find_widget_where (GTK_WIDGET (w), is_main_menu_button, _("Main Menu"));
  CHECKF (button != NULL, "%s: no main menu button", lang);
  if (button == NULL)
    return;
  gtk_menu_button_popup (GTK_MENU_BUTTON (button));
  spin_for (0.8);
  popover = GTK_WIDGET (gtk_menu_button_get_popover (GTK_MENU_BUTTON (button)));
  CHECKF (popover != NULL && gtk_widget_get_mapped (popover), "%s: the main menu is not shown", lang);
  if (popover == NULL)
    return;
  /* The menu's box as drawn: the popover's surface has its shadow and
   * arrow around it (24 px each side). */
  box = gtk_widget_get_parent (gtk_popover_get_child (GTK_POPOVER (popover)));
  gtk_widget_measure (box, GTK_ORIENTATION_HORIZONTAL, -1, &min, NULL, NULL, NULL);
  fprintf (stderr, "%s: the window %d px, the main menu %d px (needs %d; its surface %d)\n", lang, width,
           gtk_widget_get_width (box), min, gtk_widget_get_width (popover));
  CHECKF (width <= 360, "%s: the window is %d px wide", lang, width);
  CHECKF (min <= width && gtk_widget_get_width (box) <= width,
          "%s: the main menu needs %d px (is %d) in a %d px window", lang, min, gtk_widget_get_width (box), width);
  CHECK (app_test_save_screenshot (popover, path));
  gtk_menu_button_popdown (GTK_MENU_BUTTON (button));
  spin_for (0.2);
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
}

/* A locale of the language, its digits grouped: a fresh Debian has only
 * C.UTF-8, so localedef (libc-bin) makes it from the locales package's
 * sources into a folder of ours, and LOCPATH points there before the first
 * setlocale. FALSE: it could not be made (the reason printed). */
static gboolean
make_locale (const char *lang_env,
             char      **dir)
{
  g_autofree char *source = g_strndup (lang_env, strcspn (lang_env, "."));
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int status = 0;

  *dir = g_dir_make_tmp ("tern-locale-XXXXXX", &error);
  if (*dir == NULL)
    {
      fprintf (stderr, "no folder for the locale: %s\n", error->message);
      return FALSE;
    }
  out = g_build_filename (*dir, lang_env, NULL);
  {
    const char *argv[] = { "localedef", "-i", source, "-f", "UTF-8", out, NULL };

    if (!g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, &err, &status, &error)
        || !g_spawn_check_wait_status (status, error == NULL ? &error : NULL))
      {
        fprintf (stderr, "localedef -i %s (Debian: libc-bin and locales): %s %s\n", source,
                 error != NULL ? error->message : "", err != NULL ? err : "");
        return FALSE;
      }
  }
  g_setenv ("LOCPATH", *dir, TRUE);
  return TRUE;
}

/* Counts of tokens in the user's grouping: the Models panel said "mit
 * einem Kontext von 16384 Token" and a reply's figures "Eingabe 16384
 * Token" with German numbers set; and " · prompt %d tokens" had no
 * singular ("indicación de 1 tokens"). */
static void
part_numbers (Fixture *f)
{
  static const struct {
    const char *lang;
    const char *many;  /* 16384 tokens prompted in 250 ms */
    const char *one;   /* 1 token */
    const char *context;  /* the Models panel's words before the context's size */
    const char *gauge;    /* the context gauge's tooltip: 1200 of 16384 in use */
  } want[] = {
    { "de", " · Eingabe 16.384 Token in 250 ms", " · Eingabe 1 Token in 250 ms", "Kontext von ",
      "Kontext: 1.200 von 16.384 Token belegt" },
    { "es", " · indicación de 16.384 tokens en 250 ms", " · indicación de 1 token en 250 ms", "contexto de ",
      "Contexto: 1.200 de 16.384 tokens en uso" },
    { "fr", " · invite de 16\xe2\x80\xaf" "384 jetons en 250 ms", " · invite de 1 jeton en 250 ms", "contexte de ",
      "Contexte : 1\xe2\x80\xaf" "200 jetons sur 16\xe2\x80\xaf" "384 utilisés" },
  };
  TernMessage m = { .role = (char *) "assistant", .text = (char *) "", .has_stats = TRUE };

  (void) f;
  fprintf (stderr, "LC_NUMERIC: %s\n", setlocale (LC_NUMERIC, NULL));
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_autofree char *many = NULL;
      g_autofree char *one = NULL;

      if (!g_str_equal (want[i].lang, lang))
        continue;
      m.stats.generated_tokens = 20000;
      m.stats.prompt_tokens = 16384;
      m.stats.prefill_ms = 250;
      many = tern_message_format_stats (&m);
      CHECKF (strstr (many, want[i].many) != NULL, "16384 tokens: \"%s\", not \"%s\"", many, want[i].many);
      m.stats.prompt_tokens = 1;
      one = tern_message_format_stats (&m);
      CHECKF (strstr (one, want[i].one) != NULL, "1 token: \"%s\", not \"%s\"", one, want[i].one);
      fprintf (stderr, "%s\n%s\n", many, one);
      {
        TernStatsBar *bar = g_object_ref_sink (g_object_new (TERN_TYPE_STATS_BAR, NULL));
        const char *tip;

        tern_stats_bar_set_context (bar, 1200, 16384, 1 << 30);
        tip = tern_stats_bar_get_context_text (bar);
        CHECKF (tip != NULL && strstr (tip, want[i].gauge) != NULL, "the context's tooltip: \"%s\", not \"%s\"",
                tip != NULL ? tip : "(none)", want[i].gauge);
        g_object_unref (bar);
      }
#ifdef TERN_HAVE_MANAGER
      /* The shipped catalog's rows: each says what context the app would
       * give its model, in its grouping (whatever the memory here allows:
       * no four digits in a row). */
      {
        GtkWidget *window = gtk_window_new ();
        GtkWidget *label;
        const char *text, *at;
        int digits = 0, longest = 0;

        g_unsetenv ("TERN_CATALOG");
        gtk_window_set_default_size (GTK_WINDOW (window), 720, 900);
        gtk_window_set_child (GTK_WINDOW (window), tern_model_manager_new (NULL, NULL, NULL));
        gtk_window_present (GTK_WINDOW (window));
        spin_for (1.0);
        label = find_label_with (window, want[i].context);
        text = label != NULL ? gtk_label_get_text (GTK_LABEL (label)) : NULL;
        CHECKF (text != NULL, "no row says \"%s\"", want[i].context);
        at = text != NULL ? strstr (text, want[i].context) + strlen (want[i].context) : NULL;
        for (; at != NULL && *at != '\0' && *at != ';'; at++)
          {
            digits = g_ascii_isdigit (*at) ? digits + 1 : 0;
            longest = MAX (longest, digits);
          }
        fprintf (stderr, "the Models panel: %s\n", text != NULL ? text : "(none)");
        CHECKF (text != NULL && longest > 0 && longest <= 3, "the context's size is not grouped: %s", text);
        gtk_window_destroy (GTK_WINDOW (window));
        spin_for (0.2);
      }
#endif
    }
}

int
main (int   argc,
      char *argv[])
{
  Fixture f = { 0 };
  g_autofree char *locale_dir = NULL;
  const char *part = argc > 1 ? argv[1] : "";
  g_autofree char *name = g_strdup_printf ("test-app-walk-%s", part);

  /* A language (app-locale's way): LANGUAGE is honoured in any locale
   * but C, so no generated de_DE.UTF-8 is needed. */
  if (argc > 2)
    {
      g_autofree char *lang_env = NULL;

      lang = argv[2];
      /* "zh_CN" names its country already. */
      lang_env = strchr (lang, '_') != NULL ? g_strdup_printf ("%s.UTF-8", lang)
                 : g_strdup_printf ("%s_%c%c.UTF-8", lang, g_ascii_toupper (lang[0]),
                                    g_ascii_toupper (lang[1]));
      g_unsetenv ("LC_ALL");
      g_unsetenv ("LC_MESSAGES");
      g_setenv ("LANG", lang_env, TRUE);
      g_setenv ("LANGUAGE", lang, TRUE);
      if (g_str_equal (part, "numbers") && !make_locale (lang_env, &locale_dir))
        {
          fprintf (stderr, "failed: no %s locale to test with\n", lang_env);
          return 1;
        }
    }
  if ((f.tmp = app_test_start (name)) == NULL)
    return 1;
  if (argc > 2)
    tern_i18n_init ();
  out_dir = g_getenv ("TERN_TEST_OUT");
  if (out_dir == NULL || *out_dir == '\0')
    out_dir = f.tmp;
  if ((f.app = app_test_application_new ()) == NULL)
    return 1;
  f.settings = tern_application_get_settings (f.app);
  g_object_set (gtk_settings_get_default (), "gtk-decoration-layout", "appmenu:close", NULL);

  if (g_str_equal (part, "prompt-kept"))
    part_prompt_kept (&f);
  else if (g_str_equal (part, "too-long-alone"))
    part_too_long_alone (&f);
#ifdef TERN_HAVE_MANAGER
  else if (g_str_equal (part, "models-narrow"))
    part_models_narrow (&f);
#endif
  else if (g_str_equal (part, "units"))
    part_units (&f);
  else if (g_str_equal (part, "overflow-narrow"))
    part_overflow_narrow (&f);
  else if (g_str_equal (part, "cut-off"))
    part_cut_off (&f);
  else if (g_str_equal (part, "default-prompt"))
    part_default_prompt (&f);
  else if (g_str_equal (part, "subtitle"))
    part_subtitle (&f);
  else if (g_str_equal (part, "tour"))
    part_tour (&f);
  else if (g_str_equal (part, "numbers"))
    part_numbers (&f);
  else if (g_str_equal (part, "menu-narrow"))
    part_menu_narrow (&f);
#ifdef TERN_HAVE_MANAGER
  else if (g_str_equal (part, "freed"))
    part_freed (&f);
#endif
  else
    {
      fprintf (stderr, "unknown part '%s'\n", part);
      CHECK (FALSE);
    }
  g_clear_object (&f.app);
  app_test_remove (f.tmp);
  g_free (f.tmp);
  if (locale_dir != NULL)
    app_test_remove (locale_dir);
  return tn_test_finish (name);
}
