/* The header's speculation control follows the loaded model (issue 19,
 * app/tern-window-speculation.c):
 * - a Gemma 4 tag of the store with an MTP assistant, used from the Models
 *   window, lists exactly lookup + MTP and opens in flash mode with
 *   speculation on and MTP chosen; the answer is the one without
 *   speculation, with drafts proposed; the tint has a legend with a tooltip;
 * - reopened at start (no flags), the same tag keeps the mode and the switch;
 * - a model from disk with no draft file set lists only lookup; a file set
 *   in Preferences adds its drafter; a file that does not fit the model is
 *   refused with the engine's words, dropped from the list and the choice
 *   goes back to lookup, with the chat and the settings as they were;
 * - a tag without a draft lists only lookup and opens in chat mode; a
 *   Hugging Face download keeps the mode.
 * The models are what tern-cli mkmodel writes (random weights): a small
 * gemma4 target and its gemma4-assistant, a qwen3 model and its draft. */
#include "app-test.h"

#include <stdlib.h>
#include <string.h>

#include <glib/gstdio.h>

#include "tern.h"
#include "tern-application.h"
#include "tern-preferences-window.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-model-manager.h"
#endif

#define MTP_TAG "gemma4:test-mtp-flash"
#define PLAIN_TAG "gemma4:test"
#define HUB_TAG "hf:someone--gemma-test--q8_0"

static GSettings *
settings_of (TernWindow *w)
{
  return tern_application_get_settings (
    TERN_APPLICATION (gtk_window_get_application (GTK_WINDOW (w))));
}

static gboolean
drafter_settled (TernWindow *w)
{
  return !tern_window_is_preparing_drafter (w);
}

static gboolean
loaded_and_idle (TernWindow *w)
{
  return !tern_window_is_loading (w) && idle_engine (w) && drafter_settled (w);
}

static char *
drafter_state (TernWindow *w)
{
  g_autoptr(GVariant) state = g_action_group_get_action_state (G_ACTION_GROUP (w), "drafter");

  return g_variant_dup_string (state, NULL);
}

/* The header's drafters, "a b c". */
static char *
drafters (TernWindow *w)
{
  g_auto(GStrv) nicks = tern_window_get_drafters (w);

  return g_strjoinv (" ", nicks);
}

static void
expect_drafters (TernWindow *w,
                 const char *want,
                 const char *when)
{
  g_autofree char *have = drafters (w);
  GtkDropDown *dd = GTK_DROP_DOWN (gtk_widget_get_template_child (GTK_WIDGET (w), TERN_TYPE_WINDOW,
                                                                 "drafter_dropdown"));
  guint n_words = 1;

  for (const char *p = want; *p; p++)
    n_words += *p == ' ';
  CHECKF (g_str_equal (have, want), "%s: drafters '%s', want '%s'", when, have, want);
  /* What the header shows and what the main menu lists (the switch first). */
  CHECKF (g_list_model_get_n_items (gtk_drop_down_get_model (dd)) == n_words,
          "%s: the list holds %u entries", when, g_list_model_get_n_items (gtk_drop_down_get_model (dd)));
  CHECKF (g_menu_model_get_n_items (G_MENU_MODEL (w->speculation_menu)) == (gint) n_words + 1,
          "%s: the menu section holds %d items", when,
          g_menu_model_get_n_items (G_MENU_MODEL (w->speculation_menu)));
}

static void
expect_state (TernWindow *w,
              const char *want,
              const char *when)
{
  g_autofree char *state = drafter_state (w);

  CHECKF (g_str_equal (state, want), "%s: drafter %s, want %s (last error: %s)", when, state, want,
          tern_window_get_last_error (w));
}

static void
choose_drafter (TernWindow *w,
                const char *nick)
{
  g_action_group_change_action_state (G_ACTION_GROUP (w), "drafter", g_variant_new_string (nick));
  CHECK (wait_for (w, drafter_settled, 60));
}

static TernMessage *
last_message (TernWindow *w)
{
  TernChat *chat = tern_window_get_chat (w);
  guint n = chat ? tern_chat_get_n_messages (chat) : 0;

  return n ? tern_chat_get_message (chat, n - 1) : NULL;
}

static char *
send_and_wait (TernWindow *w,
               const char *text)
{
  TernMessage *m;

  activate (w, "new-chat", NULL);
  tern_window_set_composer_text (w, text);
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 120));
  CHECK (wait_for (w, idle_engine, 60));
  m = last_message (w);
  return m ? g_strdup (m->text) : NULL;
}

static char *
write_model (const char *path,
             const char *arch,
             int         n_embd,
             uint64_t    seed)
{
  tn_mkmodel_params p = tn_mkmodel_default_params ();
  tn_error err = { 0 };

  p.arch = arch;
  p.type = "q8_0";
  p.n_embd = n_embd;
  p.n_layer = 2;
  p.n_head = 2;
  p.n_head_kv = 1;
  p.head_dim = 32;
  p.n_ff = 2 * n_embd;
  p.n_ctx = 2048;
  p.seed = seed;
  p.n_threads = 1;
  if (g_str_equal (arch, "gemma4"))
    {
      /* As tests/engine/test-spec.c: sliding, sliding, full; the last three
       * layers of six reuse the KV of earlier ones. */
      p.n_layer = 6;
      p.swa_period = 3;
      p.n_shared_kv = 3;
      p.head_dim = 64;
      p.head_dim_swa = 32;
      p.n_embd_per_layer = 32;
      p.double_wide_ffn = true;
      p.tied_output = true;
      p.sliding_window = 16;
    }
  if (tn_mkmodel (&p, path, &err) != TN_OK)
    {
      fprintf (stderr, "mkmodel %s: %s\n", path, err.message);
      return NULL;
    }
  return g_strdup (path);
}

static char *
write_assistant (const char *target,
                 const char *path)
{
  tn_mkmodel_mtp_params p = tn_mkmodel_mtp_default_params ();
  tn_error err = { 0 };

  p.target = target;
  p.n_embd = 32;
  p.n_layer = 2;
  p.n_head = 2;
  p.n_ff = 64;
  p.seed = 41;
  if (tn_mkmodel_mtp (&p, path, &err) != TN_OK)
    {
      fprintf (stderr, "mkmodel gemma4-assistant: %s\n", err.message);
      return NULL;
    }
  return g_strdup (path);
}

static guint64
file_size (const char *path)
{
  GStatBuf sb;

  return g_stat (path, &sb) == 0 ? (guint64) sb.st_size : 0;
}

/* The store as a pull of the two tags would leave it ($XDG_DATA_HOME/tern/
 * models, manager/tern-model-store.h): the base package, the assistant's
 * package, the MTP flash tag over both and the plain tag over the base.
 * Returns the base's model file. */
static char *
make_store (const char *data_dir,
            char      **assistant_out)
{
  g_autofree char *root = g_build_filename (data_dir, "tern", "models", NULL);
  g_autofree char *base_dir = g_build_filename (root, "packages", "g4-base", NULL);
  g_autofree char *mtp_dir = g_build_filename (root, "packages", "g4-mtp", NULL);
  g_autofree char *base = g_build_filename (base_dir, "target.gguf", NULL);
  g_autofree char *head = g_build_filename (mtp_dir, "mtp.gguf", NULL);
  g_autofree char *state_path = g_build_filename (root, "installed.json", NULL);
  g_autofree char *state = NULL;
  g_autofree char *made_base = NULL;
  g_autofree char *made_head = NULL;

  g_mkdir_with_parents (base_dir, 0700);
  g_mkdir_with_parents (mtp_dir, 0700);
  made_base = write_model (base, "gemma4", 64, 61);
  made_head = made_base ? write_assistant (base, head) : NULL;
  if (made_head == NULL)
    return NULL;
  state = g_strdup_printf (
    "{\"schema\": 1,\n"
    " \"tags\": {\n"
    "  \"" MTP_TAG "\": {\"label\": \"Gemma 4 test, flash with MTP\", \"base\": \"g4-base\","
    " \"draft\": \"g4-mtp\", \"vision\": null, \"thinking\": false, \"single_turn\": true,"
    " \"draft_kind\": \"mtp\", \"speculation\": true, \"context_length\": 2048},\n"
    "  \"" PLAIN_TAG "\": {\"label\": \"Gemma 4 test\", \"base\": \"g4-base\", \"draft\": null,"
    " \"vision\": null, \"thinking\": false, \"single_turn\": false, \"context_length\": 2048},\n"
    "  \"" HUB_TAG "\": {\"label\": \"someone/gemma-test Q8_0\", \"base\": \"g4-base\","
    " \"draft\": null, \"vision\": null, \"thinking\": false, \"single_turn\": false,"
    " \"context_length\": 2048}},\n"
    " \"packages\": {\n"
    "  \"g4-base\": {\"complete\": true, \"files\": [{\"name\": \"target.gguf\", \"size\": %"
    G_GUINT64_FORMAT ", \"sha256\": null}]},\n"
    "  \"g4-mtp\": {\"complete\": true, \"files\": [{\"name\": \"mtp.gguf\", \"size\": %"
    G_GUINT64_FORMAT ", \"sha256\": null}]}},\n"
    " \"local\": {}}\n",
    file_size (base), file_size (head));
  if (!g_file_set_contents (state_path, state, -1, NULL))
    return NULL;
  *assistant_out = g_steal_pointer (&made_head);
  return g_steal_pointer (&made_base);
}

#ifdef TERN_HAVE_MANAGER
/* The Models window's Use button on an installed tag: what reaches the
 * window is what "use-model" carries (the tag's model file and the tag). */
static void
use_tag (TernWindow *w,
         const char *tag)
{
  TernModelManager *panel;

  g_action_group_activate_action (G_ACTION_GROUP (w), "model-manager", NULL);
  spin_for (0.2);
  /* The panel is made on the first call and kept: this is the same one. */
  panel = tern_model_manager_present (GTK_WINDOW (w), NULL, NULL);
  CHECKF (tern_model_manager_use (panel, tag), "the Models window cannot use %s", tag);
  CHECK (wait_for (w, loaded_and_idle, 120));
}

static void
test_mtp_tag (TernWindow *w,
              const char *out_dir)
{
  GSettings *settings = settings_of (w);
  const char *prompt = "one two three four five six, one two three four five six,";
  g_autofree char *plain = NULL;
  g_autofree char *drafted = NULL;
  g_autofree char *mode = NULL;
  TernMessage *m;
  const char *legend;

  /* Whatever was set before, the tag's flags decide. */
  g_settings_set_boolean (settings, "speculation", FALSE);
  g_settings_set_string (settings, "mode", "chat");
  use_tag (w, MTP_TAG);
  CHECK (tern_window_has_model (w));
  CHECKF (g_strcmp0 (tern_window_get_model_tag (w), MTP_TAG) == 0, "tag %s",
          tern_window_get_model_tag (w));
  expect_drafters (w, "prompt-lookup mtp", MTP_TAG);
  expect_state (w, "mtp", MTP_TAG);
  mode = g_settings_get_string (settings, "mode");
  CHECKF (g_str_equal (mode, "flash"), "%s opened in %s mode", MTP_TAG, mode);
  CHECK (g_settings_get_boolean (settings, "speculation"));
  CHECK (tern_window_get_last_error (w) == NULL);
  {
    g_autofree char *last_tag = g_settings_get_string (settings, "last-model-tag");
    CHECKF (g_str_equal (last_tag, MTP_TAG), "last-model-tag %s", last_tag);
  }

  /* The assistant drafts; the answer is the one without it. */
  g_settings_set_double (settings, "temperature", 0.0);
  g_settings_set_int (settings, "max-tokens", 48);
  g_settings_set_boolean (settings, "speculation", FALSE);
  plain = send_and_wait (w, prompt);
  g_settings_set_boolean (settings, "speculation", TRUE);
  g_settings_set_boolean (settings, "tint-drafted", TRUE);
  drafted = send_and_wait (w, prompt);
  m = last_message (w);
  CHECKF (plain != NULL && *plain != '\0', "empty answer");
  CHECKF (g_strcmp0 (plain, drafted) == 0, "\n  plain: %s\n  MTP:   %s", plain, drafted);
  CHECKF (m != NULL && m->stats.drafted > 0, "MTP drafted %d", m ? m->stats.drafted : -1);
  if (m != NULL)
    fprintf (stderr, "MTP tag: %d drafted, %d accepted, %d checks\n", m->stats.drafted,
             m->stats.accepted, m->stats.verify_steps);

  /* The tint says what it is. */
  legend = tern_stats_bar_get_tint_legend (tern_window_get_stats_bar (w));
  CHECKF (legend != NULL && strstr (legend, "<span foreground=\"#") != NULL
          && strstr (legend, "accepted drafts") != NULL, "legend: %s", legend);
  CHECK (tern_stats_bar_get_tint_legend_tooltip (tern_window_get_stats_bar (w)) != NULL
         && strstr (tern_stats_bar_get_tint_legend_tooltip (tern_window_get_stats_bar (w)),
                    "drafter") != NULL);
  if (out_dir != NULL)
    {
      g_autofree char *shot = g_build_filename (out_dir, "tern-speculation-mtp.png", NULL);

      tern_window_dismiss_toasts (w);
      spin_for (0.5);
      CHECK (app_test_save_screenshot (GTK_WIDGET (w), shot));
    }
  g_settings_set_boolean (settings, "speculation", FALSE);
  g_settings_set_boolean (settings, "tint-drafted", FALSE);
  legend = tern_stats_bar_get_tint_legend (tern_window_get_stats_bar (w));
  CHECKF (legend == NULL, "legend with the tint off: %s", legend);
}

/* At start the last tag comes back with its drafters, not its flags. */
static void
test_reopened_tag (TernWindow *w,
                   const char *base)
{
  GSettings *settings = settings_of (w);
  g_autofree char *mode = NULL;

  g_settings_set_string (settings, "mode", "chat");
  g_settings_set_boolean (settings, "speculation", FALSE);
  tern_window_load_tag (w, base, MTP_TAG, FALSE);
  CHECK (wait_for (w, loaded_and_idle, 120));
  expect_drafters (w, "prompt-lookup mtp", "reopened");
  mode = g_settings_get_string (settings, "mode");
  CHECKF (g_str_equal (mode, "chat"), "reopened in %s mode", mode);
  CHECK (!g_settings_get_boolean (settings, "speculation"));
}

#endif

static void
test_disk_model (TernWindow *w,
                 const char *dir,
                 const char *assistant)
{
  GSettings *settings = settings_of (w);
  g_autofree char *path = g_build_filename (dir, "disk.gguf", NULL);
  g_autofree char *draft_path = g_build_filename (dir, "disk-draft.gguf", NULL);
  g_autofree char *model = write_model (path, "qwen3", 128, 7);
  g_autofree char *draft = write_model (draft_path, "qwen3", 64, 8);
  g_autofree char *before = NULL;
  guint n_messages;

  CHECK (model != NULL && draft != NULL);
  if (model == NULL || draft == NULL)
    return;
  g_settings_set_string (settings, "draft-model-path", "");
  g_settings_set_string (settings, "dflash-path", "");
  g_settings_set_string (settings, "mtp-path", "");
  tern_window_load_model (w, model);
  CHECK (wait_for (w, loaded_and_idle, 120));
  CHECK (tern_window_get_model_tag (w) == NULL);
  {
    g_autofree char *last_tag = g_settings_get_string (settings, "last-model-tag");
    CHECKF (*last_tag == '\0', "last-model-tag %s after a file from disk", last_tag);
  }
  /* The tag's assistant went with its model. */
  expect_drafters (w, "prompt-lookup", "from disk, no files");
  expect_state (w, "prompt-lookup", "from disk, no files");

  /* A drafter not listed says why. */
  choose_drafter (w, "dflash");
  CHECKF (tern_window_get_last_error (w) != NULL
          && strstr (tern_window_get_last_error (w), "Preferences") != NULL,
          "error: %s", tern_window_get_last_error (w));
  expect_state (w, "prompt-lookup", "dflash without a file");

  /* A file set in Preferences adds its drafter; a missing one does not. */
  g_settings_set_string (settings, "dflash-path", "/nonexistent/dflash.gguf");
  expect_drafters (w, "prompt-lookup", "a missing file");
  choose_drafter (w, "dflash");
  CHECKF (tern_window_get_last_error (w) != NULL
          && strstr (tern_window_get_last_error (w), "/nonexistent/dflash.gguf") != NULL,
          "error: %s", tern_window_get_last_error (w));
  g_settings_set_string (settings, "dflash-path", "");
  g_settings_set_string (settings, "draft-model-path", draft);
  expect_drafters (w, "prompt-lookup draft-model", "draft model set");
  before = g_strdup (tern_window_get_last_error (w));
  choose_drafter (w, "draft-model");
  expect_state (w, "draft-model", "draft model chosen");
  CHECKF (g_strcmp0 (tern_window_get_last_error (w), before) == 0, "draft model: %s",
          tern_window_get_last_error (w));

  /* A file that does not fit (a Gemma 4 assistant for a Qwen3 model):
   * refused with the engine's words, dropped, back to lookup; the chat and
   * the settings stay. */
  g_free (send_and_wait (w, "hello"));
  n_messages = tern_chat_get_n_messages (tern_window_get_chat (w));
  g_settings_set_string (settings, "mtp-path", assistant);
  expect_drafters (w, "prompt-lookup draft-model mtp", "MTP set");
  expect_state (w, "draft-model", "MTP set");
  g_clear_pointer (&before, g_free);
  before = g_strdup (tern_window_get_last_error (w));
  choose_drafter (w, "mtp");
  CHECKF (tern_window_get_last_error (w) != NULL
          && g_strcmp0 (tern_window_get_last_error (w), before) != 0,
          "no refusal: %s", tern_window_get_last_error (w));
  fprintf (stderr, "a Gemma 4 assistant for a Qwen3 model: %s\n", tern_window_get_last_error (w));
  expect_state (w, "prompt-lookup", "MTP refused");
  expect_drafters (w, "prompt-lookup draft-model", "MTP refused");
  {
    g_autofree char *kept = g_settings_get_string (settings, "mtp-path");
    CHECKF (g_str_equal (kept, assistant), "mtp-path %s", kept);
  }
  CHECK (tern_chat_get_n_messages (tern_window_get_chat (w)) == n_messages);

  /* Clearing a file removes its drafter. */
  g_settings_set_string (settings, "draft-model-path", "");
  expect_drafters (w, "prompt-lookup", "draft model cleared");
  g_settings_set_string (settings, "mtp-path", "");
}

/* Preferences' draft files for models from disk: one group that says what
 * they are for, a row per drafter with the file's name, a Choose button and
 * a Forget button that clears it (and the header follows); the default
 * drafter can be any of the four. */
static void
test_preferences (TernWindow *w,
                  const char *assistant)
{
  GSettings *settings = settings_of (w);
  TernPreferencesWindow *prefs = tern_preferences_window_new (GTK_WINDOW (w), settings);
  GtkWidget *row = GTK_WIDGET (gtk_widget_get_template_child (GTK_WIDGET (prefs), TERN_TYPE_PREFERENCES_WINDOW, "mtp_row"));
  GtkWidget *clear = GTK_WIDGET (gtk_widget_get_template_child (GTK_WIDGET (prefs), TERN_TYPE_PREFERENCES_WINDOW, "mtp_clear"));
  GtkWidget *choose = GTK_WIDGET (gtk_widget_get_template_child (GTK_WIDGET (prefs), TERN_TYPE_PREFERENCES_WINDOW, "mtp_choose"));
  GObject *combo = gtk_widget_get_template_child (GTK_WIDGET (prefs), TERN_TYPE_PREFERENCES_WINDOW,
                                                  "drafter_row");
  GtkWidget *group = row ? gtk_widget_get_ancestor (row, ADW_TYPE_PREFERENCES_GROUP) : NULL;
  g_autofree char *base = g_path_get_basename (assistant);

  CHECK (row != NULL && clear != NULL && choose != NULL && group != NULL && combo != NULL);
  if (row == NULL || clear == NULL || choose == NULL || group == NULL || combo == NULL)
    return;
  gtk_window_present (GTK_WINDOW (prefs));
  spin_for (0.2);
  CHECKF (g_strcmp0 (adw_preferences_group_get_title (ADW_PREFERENCES_GROUP (group)),
                     "Draft Files for Models Opened From Disk") == 0,
          "group: %s", adw_preferences_group_get_title (ADW_PREFERENCES_GROUP (group)));
  CHECK (strstr (adw_preferences_group_get_description (ADW_PREFERENCES_GROUP (group)),
                 "Models window") != NULL);
  CHECKF (g_list_model_get_n_items (adw_combo_row_get_model (ADW_COMBO_ROW (combo))) == 4,
          "default drafter: %u choices",
          g_list_model_get_n_items (adw_combo_row_get_model (ADW_COMBO_ROW (combo))));

  g_settings_set_string (settings, "mtp-path", assistant);
  spin_for (0.1);
  CHECKF (g_strcmp0 (adw_action_row_get_subtitle (ADW_ACTION_ROW (row)), base) == 0, "row: %s",
          adw_action_row_get_subtitle (ADW_ACTION_ROW (row)));
  CHECK (gtk_widget_get_visible (clear) && gtk_widget_get_visible (choose));
  {
    g_autofree char *have = drafters (w);
    CHECKF (strstr (have, "mtp") != NULL, "drafters with the MTP file set: %s", have);
  }
  g_signal_emit_by_name (clear, "clicked");
  spin_for (0.1);
  {
    g_autofree char *path = g_settings_get_string (settings, "mtp-path");
    g_autofree char *have = drafters (w);

    CHECKF (*path == '\0', "mtp-path after Forget: %s", path);
    CHECKF (strstr (have, "mtp") == NULL, "drafters after Forget: %s", have);
  }
  CHECK (!gtk_widget_get_visible (clear));
  CHECK (strstr (adw_action_row_get_subtitle (ADW_ACTION_ROW (row)), "None chosen") != NULL);
  gtk_window_destroy (GTK_WINDOW (prefs));
  spin_for (0.1);
}

#ifdef TERN_HAVE_MANAGER
static void
test_plain_tag (TernWindow *w)
{
  GSettings *settings = settings_of (w);
  g_autofree char *mode = NULL;

  g_settings_set_string (settings, "mode", "flash");
  g_settings_set_string (settings, "draft-model-path", "");
  use_tag (w, PLAIN_TAG);
  expect_drafters (w, "prompt-lookup", PLAIN_TAG);
  mode = g_settings_get_string (settings, "mode");
  CHECKF (g_str_equal (mode, "chat"), "%s opened in %s mode", PLAIN_TAG, mode);

  /* A Hub download has no flash sibling: the mode stays as it was. */
  g_settings_set_string (settings, "mode", "flash");
  use_tag (w, HUB_TAG);
  expect_drafters (w, "prompt-lookup", HUB_TAG);
  g_free (mode);
  mode = g_settings_get_string (settings, "mode");
  CHECKF (g_str_equal (mode, "flash"), "%s opened in %s mode", HUB_TAG, mode);
}
#endif

/* Closing the window while a draft model loads stops that load: the window
 * waits for the engine thread, which used to read the whole draft model
 * first (gigabytes for a 1B draft). Closes w. */
static void
test_close_while_drafting (TernWindow *w,
                           const char *dir)
{
  GSettings *settings = settings_of (w);
  g_autofree char *model_path = g_build_filename (dir, "close-target.gguf", NULL);
  g_autofree char *draft_path = g_build_filename (dir, "close-draft.gguf", NULL);
  g_autofree char *model = write_model (model_path, "qwen3", 128, 7);
  g_autofree char *draft = write_model (draft_path, "qwen3", 64, 8);

  CHECK (model != NULL && draft != NULL);
  if (model == NULL || draft == NULL)
    return;
  g_settings_set_string (settings, "dflash-path", "");
  g_settings_set_string (settings, "mtp-path", "");
  g_settings_set_string (settings, "draft-model-path", "");
  tern_window_load_model (w, model);
  CHECK (wait_for (w, loaded_and_idle, 120));
  g_settings_set_string (settings, "draft-model-path", draft);
  expect_drafters (w, "prompt-lookup draft-model", "close: draft model set");
  app_test_slow_start ();
  g_action_group_change_action_state (G_ACTION_GROUP (w), "drafter",
                                      g_variant_new_string ("draft-model"));
  CHECK (wait_for (w, app_test_slow_under_way, 60));
  app_test_slow_stop ();
  gtk_window_close (GTK_WINDOW (w));
  CHECKF (app_test_slow_after_stop () <= 1,
          "closing while a draft model loads: %d of its passes started after the close (%d before)",
          app_test_slow_after_stop (), app_test_slow_passes () - app_test_slow_after_stop ());
  app_test_slow_end ();
  g_settings_set_string (settings, "draft-model-path", "");
}

int
main (int   argc,
      char *argv[])
{
  g_autofree char *tmp = NULL;
  g_autofree char *data_dir = NULL;
  g_autofree char *base = NULL;
  g_autofree char *assistant = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(TernApplication) app = NULL;
  const char *out_dir = g_getenv ("TERN_TEST_OUT");
  TernWindow *w;

  (void) argc;
  (void) argv;
  if ((tmp = app_test_start ("tern-app-speculation")) == NULL)
    return 1;
  data_dir = g_build_filename (tmp, "data", NULL);
  base = make_store (data_dir, &assistant);
  CHECK (base != NULL);
  if (base == NULL)
    return tn_test_finish ("test-app-speculation");

  app = tern_application_new (G_APPLICATION_NON_UNIQUE);
  if (!g_application_register (G_APPLICATION (app), NULL, &error))
    {
      fprintf (stderr, "register: %s\n", error->message);
      return 1;
    }
  g_settings_set_int (tern_application_get_settings (app), "context-size", 1024);
  g_settings_set_int (tern_application_get_settings (app), "threads", 1);
  w = tern_window_new (GTK_APPLICATION (app));
  gtk_window_set_default_size (GTK_WINDOW (w), 1100, 760);
  gtk_window_present (GTK_WINDOW (w));
  spin_for (0.3);

  /* No model yet, no draft file set. */
  expect_drafters (w, "prompt-lookup", "no model");

#ifdef TERN_HAVE_MANAGER
  test_mtp_tag (w, out_dir && *out_dir ? out_dir : NULL);
  test_reopened_tag (w, base);
  test_disk_model (w, tmp, assistant);
  test_preferences (w, assistant);
  test_plain_tag (w);
#else
  (void) out_dir;
  fprintf (stderr, "no model manager in this build: only the disk model's checks\n");
  test_disk_model (w, tmp, assistant);
  test_preferences (w, assistant);
#endif

  test_close_while_drafting (w, tmp);
  spin_for (0.2);
  app_test_remove (tmp);
  return tn_test_finish ("test-app-speculation");
}
