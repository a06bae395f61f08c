/* tern-window-engine.c: the chat window's side of the engine worker: what
 * it asks (load, pin, count, generate, with the settings of the moment) and
 * what it does with what comes back (a model loaded, the pinned prompt,
 * token counts, an answer's text and its end, warnings). Construction and
 * state stay in tern-window.c; see tern-window-private.h.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include <glib/gi18n.h>
#include <glib/gstdio.h>

#include "tern.h"
#include "tern-application.h"
#include "tern-composer.h"
#include "tern-engine-worker.h"
#include "tern-message-row.h"
#include "tern-window.h"
#include "tern-window-private.h"

/* The system prompt's token count is asked once its editing has paused this long. */
#define COUNT_DELAY_MS 300

static TernGenSettings
gen_settings (TernWindow *self)
{
  TernGenSettings gen = {
    .temperature = g_settings_get_double (self->settings, "temperature"),
    .top_p = g_settings_get_double (self->settings, "top-p"),
    .deterministic = g_settings_get_boolean (self->settings, "deterministic"),
    .model_sampling = g_settings_get_boolean (self->settings, "model-sampling"),
    .seed = g_settings_get_uint (self->settings, "seed"),
    .max_tokens = g_settings_get_int (self->settings, "max-tokens"),
    .thinking = g_settings_get_boolean (self->settings, "thinking"),
    .speculate = g_settings_get_boolean (self->settings, "speculation"),
    .drafter = _tern_window_selected_drafter (self),
    .draft_max = g_settings_get_int (self->settings, "draft-length"),
    .image_tokens = tern_composer_get_image_budget (self->composer),
  };
  return gen;
}

void
_tern_window_request_pin (TernWindow *self,
             const char *text)
{
  g_free (self->pin_text);
  self->pin_text = g_strdup (text);
  self->pin_id = tern_engine_worker_pin (self->worker, text);
  tern_pin_editor_set_pinning (self->pin_editor, TRUE);
  _tern_window_update_actions (self);
}

/* Requests go to the engine thread in order, so a pin queued here is in
 * place before the request queued after it. */
static void
ensure_pinned (TernWindow *self)
{
  g_autofree char *text = tern_pin_editor_get_text (self->pin_editor);

  if (self->pin_id != 0 && g_strcmp0 (self->pin_text, text) == 0)
    return;
  if (self->pin_id == 0 && !self->pin_failed && !tern_pin_editor_is_stale (self->pin_editor)
      && tern_pin_editor_get_pinned_text (self->pin_editor) != NULL)
    return;
  _tern_window_request_pin (self, text);
}

static void
request_count (TernWindow *self)
{
  g_autofree char *text = NULL;

  if (!self->model_loaded)
    return;
  text = tern_pin_editor_get_text (self->pin_editor);
  self->count_id = tern_engine_worker_count_tokens (self->worker, text);
}

static gboolean
on_count_timeout (gpointer data)
{
  TernWindow *self = data;

  self->count_timeout = 0;
  request_count (self);
  return G_SOURCE_REMOVE;
}

void
_tern_window_on_pin_editor_changed (TernWindow *self)
{
  g_clear_handle_id (&self->count_timeout, g_source_remove);
  self->count_timeout = g_timeout_add (COUNT_DELAY_MS, on_count_timeout, self);
}

void
_tern_window_start_generation (TernWindow *self)
{
  TernGenSettings gen = gen_settings (self);
  g_autofree char *mode = g_settings_get_string (self->settings, "mode");
  g_autofree char *system_prompt = tern_pin_editor_get_text (self->pin_editor);
  guint n_before = tern_chat_get_n_messages (self->chat);
  const char *previous_prompt = tern_chat_get_system_prompt (self->chat);
  /* The prompt an earlier answer of this chat was written from, and this
   * one will be: the same text pinned again is no change. */
  gboolean prompt_changed = g_str_equal (mode, "flash") && n_before > 1
                            && previous_prompt != NULL
                            && g_strcmp0 (previous_prompt, system_prompt) != 0;
  /* Flash after answers written in Chat mode: the turns above stay on
   * screen, and only this message is sent; the answer says so. */
  gboolean alone = g_str_equal (mode, "flash") && n_before > 1
                   && g_strcmp0 (tern_chat_get_mode (self->chat), "chat") == 0;
  TernMessage *answer;
  guint pos;

  ensure_pinned (self);
  self->edit_draft_kept = FALSE;
  tern_chat_set_mode (self->chat, mode);
  /* The chat's system prompt is the one its last answer was written from,
   * set when one is (on_finished): an answer refused after a failed pin
   * writes nothing from the new text. */
  g_free (self->streaming_prompt);
  self->streaming_prompt = g_strdup (system_prompt);
  tern_chat_set_model (self->chat, self->model_description);

  if (g_str_equal (mode, "chat"))
    {
      g_autofree const char **roles = g_new0 (const char *, n_before + 1);
      g_autoptr(GPtrArray) contents = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) images = g_ptr_array_new ();
      guint first = MIN (tern_chat_get_context_start (self->chat), n_before - 1);

      /* A message's images go where its markers are: before its text. */
      self->sent_start = first;
      for (guint i = first; i < n_before; i++)
        {
          TernMessage *m = tern_chat_get_message (self->chat, i);
          GString *content = g_string_new (NULL);

          roles[i - first] = m->role;
          for (guint k = 0; m->images != NULL && k < m->images->len; k++)
            {
              g_string_append (content, TN_IMAGE_MARKER);
              g_ptr_array_add (images, g_ptr_array_index (m->images, k));
            }
          g_string_append (content, m->text);
          g_ptr_array_add (contents, g_string_free (content, FALSE));
        }
      self->gen_id = tern_engine_worker_chat_images (self->worker, roles,
                                                     (const char * const *) contents->pdata,
                                                     n_before - first, images, &gen);
    }
  else
    {
      TernMessage *last = tern_chat_get_message (self->chat, n_before - 1);
      self->gen_id = tern_engine_worker_ask_images (self->worker, last->text, last->images,
                                                    &gen);
    }

  /* A chat saved by an earlier version may end in an answer that wrote
   * nothing with its mark still on it (carry_marks_of_empty_answers in
   * tern-chat.c): this answer, the next one written, takes it over. */
  if (n_before >= 2)
    {
      TernMessage *before = tern_chat_get_message (self->chat, n_before - 2);

      if (g_str_equal (before->role, "assistant") && before->prompt_changed
          && tern_message_wrote_nothing (before))
        self->regenerated_prompt_changed = TRUE;
    }
  answer = tern_chat_append (self->chat, "assistant", "");
  answer->prompt_changed = prompt_changed || self->regenerated_prompt_changed;
  self->streaming_carried = self->regenerated_prompt_changed;
  self->regenerated_prompt_changed = FALSE;
  answer->alone = alone || self->regenerated_alone;
  self->alone_carried = self->regenerated_alone;
  self->regenerated_alone = FALSE;
  self->streaming_index = n_before;
  self->streaming_row = _tern_window_add_row (self, answer);
  tern_stats_bar_start (self->stats_bar);
  tern_composer_set_generating (self->composer, TRUE);

  if (!_tern_window_chat_in_list (self, self->chat, &pos))
    g_list_store_insert (self->chats, 0, self->chat);
  else if (pos != 0)
    {
      g_autoptr(TernChat) keep = g_object_ref (self->chat);
      g_list_store_remove (self->chats, pos);
      g_list_store_insert (self->chats, 0, keep);
    }
  _tern_window_select_current_chat (self);
  _tern_window_mark_last_rows (self);
  _tern_window_update_actions (self);
}

void
_tern_window_send_text (TernWindow *self,
           const char *text)
{
  g_autofree char *trimmed = g_strstrip (g_strdup (text ? text : ""));

  TernMessage *m;

  /* Images still decoding would be left out: Send waits for them. A
   * picture may go alone ("what is this?"), without a word. */
  /* A newer Tern's chat is never written into (the send actions are off
   * for it; this is for every other way here). */
  if (!self->model_loaded || _tern_window_is_generating (self)
      || tern_chat_is_newer (self->chat)
      || (*trimmed == '\0' && tern_composer_get_n_images (self->composer) == 0)
      || tern_composer_is_busy (self->composer))
    return;
  m = tern_chat_append (self->chat, "user", trimmed);
  {
    g_autoptr(GPtrArray) images = tern_composer_get_images (self->composer);

    if (images->len > 0)
      m->images = g_steal_pointer (&images);
  }
  _tern_window_add_row (self, m);
  _tern_window_scroll_to_end (self);
  tern_composer_clear_images (self->composer);
  g_clear_pointer (&self->regenerated_text, g_free);
  _tern_window_start_generation (self);
}

/* An open error, in a dialog: a sentence that says what happened and what
 * to do, and the engine's message under Details. */
static void
show_load_error (TernWindow *self,
                 const char *path,
                 const char *error,
                 const char *english)
{
  g_autofree char *name = g_filename_display_basename (path ? path : "");
  g_autofree char *prefix = g_strconcat (path ? path : "", ": ", NULL);
  g_autofree char *reason = NULL;
  g_autofree char *body = NULL;
  const char *hint = NULL;
  g_autofree char *hint_owned = NULL;
  AdwMessageDialog *dialog;
  GtkWidget *expander, *details;

  /* The engine's message starts with the path: the body names the file once. */
  /* The engine's words name the file in its own bytes: a label wants UTF-8. */
  reason = g_utf8_make_valid (path != NULL && g_str_has_prefix (error, prefix) ? error + strlen (prefix)
                                                                               : error, -1);
  if (*reason != '\0')
    *reason = g_ascii_toupper (*reason);
  /* The kind of failure, from the engine's English message (error is in the
   * user's language). */
  if (english == NULL)
    english = error;
  if (strstr (english, "which Tern cannot run") != NULL)
    {
      GString *types = g_string_new (NULL);

      /* The types a matrix can have: the engine's own list. */
      for (guint t = 0; t < TN_TYPE_COUNT_; t++)
        if (tn_type_matrix_supported (t) && tn_type_name (t) != NULL)
          g_string_append_printf (types, "%s%s", types->len ? ", " : "", tn_type_name (t));
      /* Translators: %s lists tensor types ("f32, f16, q8_0") */
      hint_owned = g_strdup_printf (_("Tern runs models whose matrices are of these types: %s. Choose a file quantized to one of them."),
                                    types->str);
      g_string_free (types, TRUE);
      hint = hint_owned;
    }
  else if (strstr (english, "is not supported") != NULL || strstr (english, "does not support") != NULL)
    hint = _("Choose a model of a supported kind, or use the Models window to download one.");
  else if (strstr (english, "No such file") != NULL)
    hint = _("The file may have been moved or deleted.");
  else if (strstr (english, "is not a regular file") != NULL)
    {
      /* "PATH is not a regular file (...)": not damaged, and not a
       * download cut short (that hint, and the path again, were shown). */
      g_free (reason);
      reason = g_strdup (_("It is a folder, a FIFO or a device, not a file."));
      hint = _("Choose the model’s .gguf file itself.");
    }
  else
    hint = _("The file may be damaged or incomplete (an interrupted download?), or not a GGUF model.");
  /* Translators: a model file's name, the reason it could not be opened
   * (a sentence), and what to do */
  body = g_strdup_printf (_("“%s” could not be opened. %s\n\n%s"), name, reason, hint);
  dialog = ADW_MESSAGE_DIALOG (adw_message_dialog_new (GTK_WINDOW (self),
                                                       _("The Model Could Not Be Opened"), body));
  {
    g_autofree char *valid = g_utf8_make_valid (error, -1);

    details = gtk_label_new (valid);
  }
  gtk_label_set_wrap (GTK_LABEL (details), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (details), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_selectable (GTK_LABEL (details), TRUE);
  gtk_label_set_xalign (GTK_LABEL (details), 0);
  gtk_widget_add_css_class (details, "monospace");
  gtk_widget_add_css_class (details, "caption");
  expander = gtk_expander_new_with_mnemonic (_("_Details"));
  gtk_expander_set_child (GTK_EXPANDER (expander), details);
  adw_message_dialog_set_extra_child (dialog, expander);
  adw_message_dialog_add_response (dialog, "close", _("_Close"));
  adw_message_dialog_set_default_response (dialog, "close");
  adw_message_dialog_set_close_response (dialog, "close");
  gtk_window_present (GTK_WINDOW (dialog));
}

/* Whether path is the file "Use Demo Model" writes (tern_demo_model_path),
 * however either is spelt: the setting, $TERN_DEMO_MODEL and a file opened
 * by hand may name it through a link, "..", or a relative path. Any other
 * file is remembered, a demo model by its key too (tern-cli mkmodel's, a
 * user's own test model). */
static gboolean
is_app_demo_file (TernWindow *self,
                  const char *path)
{
  g_autofree char *demo = tern_demo_model_path (self->settings);
  g_autofree char *a = NULL;
  g_autofree char *b = NULL;
  GStatBuf sa, sb;

  if (g_stat (path, &sa) == 0 && g_stat (demo, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  /* One of them is gone since the load: only their spelling is left. */
  a = g_canonicalize_filename (path, NULL);
  b = g_canonicalize_filename (demo, NULL);
  return g_str_equal (a, b);
}

static void
on_model_loaded (TernWindow                 *self,
                 const TernModelLoadedEvent *ev)
{
  const char *path = ev->path;
  const char *description = ev->description;
  gboolean is_demo = ev->is_demo;
  const char *error = ev->error;
  g_autofree char *system_prompt = NULL;

  if (ev->id != self->load_id)
    return;
  _tern_window_end_loading (self);
  if (error != NULL)
    {
      g_free (self->last_error);
      self->last_error = g_strdup (error);
      show_load_error (self, path, error, ev->english);
      _tern_window_update_actions (self);
      return;
    }

  self->model_loaded = TRUE;
  tern_stats_bar_reset (self->stats_bar);
  g_free (self->model_description);
  self->model_description = g_strdup (description);
  g_free (self->model_path);
  self->model_path = g_strdup (path);
  adw_window_title_set_title (self->window_title, is_demo ? _("Demo Model") : _("Tern"));
  adw_window_title_set_subtitle (self->window_title, description);
  {
    /* A file name is bytes, a tooltip UTF-8 ("mod\xe9l.gguf"). */
    g_autofree char *shown = g_filename_display_name (path);

    gtk_widget_set_tooltip_text (GTK_WIDGET (self->window_title), shown);
  }
  /* A server is not reopened at start (it may be unreachable, or billed),
   * nor the app's own demo file: the local model stays the one reopened,
   * with its tag (docs/APP.md, "What the app remembers"). */
  if (!g_str_has_prefix (path, "remote:") && !is_app_demo_file (self, path))
    {
      TernModelOrigin *origin = self->loading_origin;

      tern_last_model_set (self->settings, path, origin != NULL ? origin->tag : NULL);
    }
  /* The old model's draft went with it: the new one's drafters. */
  _tern_window_speculation_model_loaded (self);
  gtk_stack_set_visible_child_name (self->main_stack, _tern_window_chat_page (self));

  /* The pin belongs to the old model: pin the prompt again for this one. */
  tern_pin_editor_set_pinned (self->pin_editor, NULL, NULL);
  system_prompt = tern_pin_editor_get_text (self->pin_editor);
  request_count (self);
  _tern_window_request_pin (self, system_prompt);
  /* The old model's server went with it. */
  if (g_settings_get_boolean (self->settings, "server-enabled"))
    _tern_window_apply_server (self);
  _tern_window_update_actions (self);
  tern_composer_focus (self->composer);
}

/* The spinner says something happens; from the engine's first report the
 * bar says how much is left (a 17 GB model reads for tens of seconds). */
static void
on_load_progress (TernWindow                  *self,
                  const TernLoadProgressEvent *ev)
{
  if (ev->id != self->load_id)
    return;
  gtk_spinner_stop (self->loading_spinner);
  gtk_widget_set_visible (GTK_WIDGET (self->loading_spinner), FALSE);
  gtk_progress_bar_set_fraction (self->loading_progress, ev->fraction);
  gtk_widget_set_visible (GTK_WIDGET (self->loading_progress), TRUE);
}

static void
on_token_count (TernWindow                *self,
                const TernTokenCountEvent *ev)
{
  if (ev->id == self->count_id)
    tern_pin_editor_set_token_count (self->pin_editor, ev->n_tokens);
}

static void
on_pinned (TernWindow            *self,
           const TernPinnedEvent *ev)
{
  const TernPinState *state = &ev->state;
  const char *error = ev->error;
  gboolean cancelled = ev->cancelled;

  if (ev->id != self->pin_id)
    return;
  self->pin_id = 0;
  tern_pin_editor_set_pinning (self->pin_editor, FALSE);
  /* An answer sent while pinning takes the stats bar over with its own
   * figures; with none, the bar no longer speaks of the pin. */
  if (self->streaming_row == NULL)
    {
      TernStats none = { 0 };

      tern_stats_bar_finish (self->stats_bar, &none, FALSE, _("Ready"));
    }
  if (error != NULL)
    {
      g_autofree char *detail = g_strdup (error);
      g_autofree char *sentence = NULL;

      self->pin_failed = TRUE;
      /* The engine's detail starts in lower case: under the prompt it is
       * the detail, and the toast, seen over the chat, says what failed. */
      *detail = g_ascii_toupper (*detail);
      tern_pin_editor_set_error (self->pin_editor, detail);
      /* Translators: %s is the engine's message */
      sentence = g_strdup_printf (_("The system prompt could not be pinned: %s"), error);
      _tern_window_set_error (self, sentence);
    }
  else if (!cancelled)
    {
      self->pin_failed = FALSE;
      self->n_ctx = state->n_ctx;
      self->n_pin = state->n_pin;
      self->kv_bytes = state->kv_bytes;
      _tern_window_update_context_gauge (self);
      tern_pin_editor_set_pinned (self->pin_editor, self->pin_text, state);
      g_settings_set_string (self->settings, "system-prompt", self->pin_text);
    }
  g_clear_pointer (&self->pin_text, g_free);
  _tern_window_update_actions (self);
}

static void
on_update (TernWindow            *self,
           const TernUpdateEvent *ev)
{
  const TernStats *live = &ev->stats;

  if (ev->id == self->pin_id && live->phase == TERN_PHASE_PIN)
    {
      tern_pin_editor_set_progress (self->pin_editor, live->prefill_done, live->prefill_total);
      /* A long prompt takes seconds to pin on a real model, and the panel
       * with its progress is often closed: the stats bar said "Ready", and
       * an answer sent meanwhile sat at an empty "Prefill" until it ended. */
      tern_stats_bar_update (self->stats_bar, live);
    }
  else if (ev->id == self->gen_id && self->streaming_row != NULL)
    {
      tern_message_row_append_drafted (self->streaming_row, ev->text, ev->drafted);
      /* The gauge stood still until the answer ended: it moves with the
       * prompt and each token, at the pace of the live figures. (kv_len is
       * 0 where the engine cannot say: a server's answer.) */
      if (tern_stats_bar_update (self->stats_bar, live) && live->kv_len > 0)
        tern_stats_bar_set_context (self->stats_bar, live->kv_len, self->n_ctx, self->kv_bytes);
    }
}

/* The engine's message, as a sentence that says what happened and what to
 * do; the engine's own words stay in it as the detail. */
static char *
human_error (TernWindow      *self,
             const TernStats *stats,
             const char      *error)
{
  g_autofree char *detail = g_strdup (error);
  gboolean chat = g_str_equal (tern_chat_get_mode (self->chat), "chat");

  /* The chat's first message: no earlier turn to speak of ("every earlier
   * turn is already left out" of a chat that had none). */
  if (stats->error_code == TN_ERR_OVERFLOW && chat && stats->overflow_tokens > 0
      && self->streaming_index <= 1)
    return stats->overflow_at_least
      /* Translators: the chat's first message is too long for the context */
      ? g_strdup_printf (_("This message does not fit in the %d-token context: with the system prompt it is at least %d tokens. Shorten it, or raise the context size in Preferences."),
                         stats->n_ctx, stats->overflow_tokens)
      /* Translators: the chat's first message is too long for the context */
      : g_strdup_printf (_("This message does not fit in the %d-token context: with the system prompt it is %d tokens. Shorten it, or raise the context size in Preferences."),
                         stats->n_ctx, stats->overflow_tokens);
  /* Every earlier turn is left out by then: the engine's detail said the
   * "conversation" was too long and to start a new chat, which cannot help. */
  if (stats->error_code == TN_ERR_OVERFLOW && chat && stats->overflow_tokens > 0
      && stats->overflow_at_least)
    return g_strdup_printf (_("This message does not fit in the %d-token context on its own: with the system prompt it is at least %d tokens, and every earlier turn is already left out. Shorten it, or raise the context size in Preferences."),
                            stats->n_ctx, stats->overflow_tokens);
  if (stats->error_code == TN_ERR_OVERFLOW && chat && stats->overflow_tokens > 0)
    return g_strdup_printf (_("This message does not fit in the %d-token context on its own: with the system prompt it is %d tokens, and every earlier turn is already left out. Shorten it, or raise the context size in Preferences."),
                            stats->n_ctx, stats->overflow_tokens);
  if (stats->error_code == TN_ERR_OVERFLOW)
    return chat
      ? g_strdup_printf (_("This message does not fit in the %d-token context, even with the earlier turns left out (%s). Shorten it, or raise the context size in Preferences."),
                         stats->n_ctx, detail)
      : g_strdup_printf (_("This message does not fit in the %d-token context (%s). Shorten it or the system prompt, or raise the context size in Preferences."),
                         stats->n_ctx, detail);
  if (*detail != '\0')
    *detail = g_ascii_toupper (*detail);
  /* Translators: %s is the engine's message */
  return g_strdup_printf (_("The answer failed. %s"), detail);
}

static void
on_finished (TernWindow              *self,
             const TernFinishedEvent *ev)
{
  const TernStats *stats = &ev->stats;
  const char *error = ev->error;
  gboolean cancelled = ev->cancelled;
  TernMessage *m;
  g_autofree char *figures = NULL;
  const char *outcome = NULL;
  gboolean overflow, row_stays, edit_refused;
  g_autofree char *refusal = NULL;

  if (ev->id != self->gen_id)
    return;
  self->gen_id = 0;

  m = tern_chat_get_message (self->chat, self->streaming_index);
  g_free (m->text);
  m->text = g_strdup (tern_message_row_get_text (self->streaming_row));
  tern_message_set_drafted (m, tern_message_row_get_drafted (self->streaming_row));
  m->cancelled = cancelled;
  g_free (m->error);
  if (error != NULL)
    {
      outcome = _("Failed");
      m->error = human_error (self, stats, error);
    }
  else if (!cancelled && g_strcmp0 (stats->stop_reason, "context full") == 0)
    {
      /* The answer ran into the end of the context: say so, never just stop. */
      outcome = _("Cut off");
      m->error = g_str_equal (tern_chat_get_mode (self->chat), "chat")
        ? g_strdup_printf (_("The answer was cut off: the %d-token context is full. The next message leaves out the oldest turns; a larger context can be set in Preferences."),
                           stats->n_ctx)
        : g_strdup_printf (_("The answer was cut off: the %d-token context is full after the system prompt and the message. A larger context can be set in Preferences."),
                           stats->n_ctx);
    }
  else
    {
      m->error = NULL;
      /* The row says "cut off by the Answer Length Limit": the bar said
       * "Done" beside it. */
      if (!cancelled && g_strcmp0 (stats->stop_reason, "limit") == 0)
        outcome = _("Cut off");
    }
  tern_message_set_stats (m, stats);
  const gboolean wrote_nothing = tern_message_wrote_nothing (m);
  /* Written from the prompt (a word, or an answer that ended of itself):
   * the next answer compares with it. An answer that wrote nothing
   * (refused after a failed pin, stopped before its first token) cannot
   * show that the prompt changed, nor that the turns above were left out:
   * the first one written does, and its notices are passed on. */
  if (!wrote_nothing)
    tern_chat_set_system_prompt (self->chat, self->streaming_prompt);
  else
    {
      if (m->prompt_changed)
        self->regenerated_prompt_changed = self->streaming_carried;
      if (m->alone && !self->alone_carried)
        tern_chat_set_mode (self->chat, "chat");
      if (m->alone)
        self->regenerated_alone = self->alone_carried;
      m->prompt_changed = m->alone = FALSE;
      tern_message_row_set_notice (self->streaming_row, NULL);
    }
  g_clear_pointer (&self->streaming_prompt, g_free);
  /* A message that failed before its first token (too long even alone)
   * left nothing out of an answer: moved on, the start dimmed the whole
   * conversation for good, and the message edited shorter went without it. */
  if (stats->dropped_messages > 0 && (error == NULL || stats->generated_tokens > 0))
    {
      g_autofree char *note = NULL;

      tern_chat_set_context_start (self->chat, self->sent_start + (guint) stats->dropped_messages);
      note = g_strdup_printf (ngettext ("The conversation outgrew the %d-token context: its oldest message is left out (the system prompt stays)",
                                        "The conversation outgrew the %d-token context: its %d oldest messages are left out (the system prompt stays)",
                                        (gulong) tern_chat_get_context_start (self->chat)),
                              stats->n_ctx, (int) tern_chat_get_context_start (self->chat));
      _tern_window_show_context_toast (self, note);
    }
  tern_chat_touch (self->chat);
  if (stats->prefill_tok_s > 0 && stats->prompt_tokens >= 8)
    tern_composer_set_prefill_speed (self->composer, stats->prefill_tok_s);

  tern_message_row_flush (self->streaming_row);
  figures = tern_message_format_stats (m);
  tern_message_row_set_stats (self->streaming_row, figures);
  tern_message_row_set_error (self->streaming_row, m->error);
  /* A message too long for the context stays too long until the user
   * changes something: a state, not news. A toast said it for four seconds
   * over the row that already did; the row keeps the sentence with its two
   * ways out, until the next message (docs/APP.md, "A message too long"). */
  /* A Regenerate that wrote nothing puts back the answer it was to
   * replace, and this row goes: the answer put back says it instead. */
  overflow = error != NULL && stats->error_code == TN_ERR_OVERFLOW;
  /* A message edited (Edit Last) and sent again that does not fit puts
   * back the turn it was to replace, as a Regenerate does: only Undo's ten
   * seconds brought it back. The edited text goes back to the composer. */
  edit_refused = overflow && wrote_nothing && self->regenerated_taken == NULL
                 && self->edit_taken != NULL && self->edit_chat == self->chat
                 && self->streaming_index == self->edit_index + 1;
  row_stays = !((self->regenerated_taken != NULL || edit_refused) && wrote_nothing);
  if (overflow && !row_stays && edit_refused)
    /* Translators: %s says why, and what to change */
    refusal = g_strdup_printf (_("The edited message is back in the composer: it was not sent, and the turn it was to replace is kept. %s"), m->error);
  else if (overflow && !row_stays)
    /* Translators: %s says why, and what to change */
    refusal = g_strdup_printf (_("No new answer could be written, so this one is kept. %s"), m->error);
  tern_message_row_set_fixes (self->streaming_row, overflow);
  tern_stats_bar_finish (self->stats_bar, stats, cancelled, outcome);
  self->streaming_row = NULL;
  _tern_window_update_tint_legend (self);
  /* The row that stays under the answer says what went wrong (cut off,
   * failed), or the answer put back does (a Regenerate too long): a toast
   * said it again word for word. A toast is for what has no row
   * (docs/APP.md, "Said once"). */
  /* A Regenerate refused after a failed pin tried the pin again, whose
   * toast says why: "The answer failed." and the same words came in a
   * second toast under it. */
  if (m->error != NULL && (row_stays || refusal != NULL || _tern_window_toast_ends (self, m->error)))
    {
      g_free (self->last_error);
      self->last_error = g_strdup (m->error);
    }
  else if (m->error != NULL)
    _tern_window_set_error (self, m->error);
  _tern_window_update_context_gauge (self);

  /* A stopped answer written again is the same answer from its start,
   * only longer. */
  if (self->regenerated_text != NULL && error == NULL && !cancelled
      && (g_str_equal (m->text, self->regenerated_text)
          || (self->regenerated_cancelled && *self->regenerated_text != '\0'
              && g_str_has_prefix (m->text, self->regenerated_text))))
    _tern_window_toast (self, self->regenerated_same_reason);
  g_clear_pointer (&self->regenerated_text, g_free);

  /* A Regenerate that wrote nothing leaves the answer it was to replace,
   * which was lost for an error (the toast above has it, or for a message
   * too long, the answer put back: a state the user changes, with its
   * ways out, like Send's). */
  if (self->regenerated_taken != NULL && wrote_nothing)
    {
      guint index = self->streaming_index;
      TernMessageRow *row = NULL;

      g_ptr_array_unref (tern_chat_take_from (self->chat, index));
      _tern_window_remove_rows_from (self, index);
      tern_chat_restore (self->chat, self->regenerated_taken);
      for (guint i = index; i < tern_chat_get_n_messages (self->chat); i++)
        row = _tern_window_add_row (self, tern_chat_get_message (self->chat, i));
      if (row != NULL && refusal != NULL)
        tern_message_row_set_refusal (row, refusal);
      /* Back with its own mark, if it had one: nothing is owed. */
      self->regenerated_prompt_changed = FALSE;
      self->regenerated_alone = FALSE;
      _tern_window_update_context_gauge (self);
    }
  g_clear_pointer (&self->regenerated_taken, g_ptr_array_unref);
  if (edit_refused)
    {
      guint index = self->edit_index;
      g_autoptr(GPtrArray) failed = tern_chat_take_from (self->chat, index);
      TernMessageRow *row = NULL;

      _tern_window_remove_rows_from (self, index);
      tern_chat_restore (self->chat, self->edit_taken);
      for (guint i = index; i < tern_chat_get_n_messages (self->chat); i++)
        row = _tern_window_add_row (self, tern_chat_get_message (self->chat, i));
      if (row != NULL && refusal != NULL)
        tern_message_row_set_refusal (row, refusal);
      /* The composer was emptied when it was sent, but what was typed
       * since is the user's too: it stays, after the edited message. */
      if (failed->len > 0)
        _tern_window_composer_add (self, g_ptr_array_index (failed, 0));
      self->edit_draft_kept = TRUE;
      /* Nothing is left for Undo to put back. */
      _tern_window_end_edit (self);
      _tern_window_update_context_gauge (self);
    }

  tern_composer_set_generating (self->composer, FALSE);
  _tern_window_save_chat (self);
  _tern_window_mark_last_rows (self);
  _tern_window_update_actions (self);
}

static void
on_engine_warning (TernWindow             *self,
                   const TernWarningEvent *ev)
{
  _tern_window_toast (self, ev->message);
}


void
_tern_window_engine_connect (TernWindow *self)
{
  g_signal_connect_swapped (self->worker, "model-loaded", G_CALLBACK (on_model_loaded), self);
  g_signal_connect_swapped (self->worker, "load-progress", G_CALLBACK (on_load_progress), self);
  g_signal_connect_swapped (self->worker, "token-count", G_CALLBACK (on_token_count), self);
  g_signal_connect_swapped (self->worker, "pinned", G_CALLBACK (on_pinned), self);
  g_signal_connect_swapped (self->worker, "update", G_CALLBACK (on_update), self);
  g_signal_connect_swapped (self->worker, "finished", G_CALLBACK (on_finished), self);
  g_signal_connect_swapped (self->worker, "warning", G_CALLBACK (on_engine_warning), self);
}
