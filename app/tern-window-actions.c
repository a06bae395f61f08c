/* tern-window-actions.c: the chat window's actions (win.*), as GNOME Text
 * Editor keeps editor-window-actions.c apart from its window: the
 * GActionEntry table, the handlers, and which actions are enabled in the
 * window's state (_tern_window_update_actions). The window's construction
 * and state stay in tern-window.c.
 */
#include "config.h"

#include <string.h>

#include <glib/gi18n.h>

#include "tern-composer.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-model-manager.h"
#endif
#include "tern-sampling.h"
#include "tern-window-private.h"

static void
action_paste_image (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;

  (void) action;
  (void) param;
  if (!tern_composer_paste_image (self->composer))
    _tern_window_toast (self, _("The clipboard holds no image"));
}

static void
action_add_image (GSimpleAction *action,
                  GVariant      *param,
                  gpointer       data)
{
  TernWindow *self = data;

  (void) action;
  (void) param;
  tern_composer_choose_images (self->composer, GTK_WINDOW (self));
}

static void
set_enabled (TernWindow *self,
             const char *name,
             gboolean    enabled)
{
  GAction *action = g_action_map_lookup_action (G_ACTION_MAP (self), name);

  if (G_IS_SIMPLE_ACTION (action))
    g_simple_action_set_enabled (G_SIMPLE_ACTION (action), enabled);
}

void
_tern_window_update_actions (TernWindow *self)
{
  gboolean generating = _tern_window_is_generating (self);
  gboolean ready = self->model_loaded && self->load_id == 0;
  guint n = self->chat ? tern_chat_get_n_messages (self->chat) : 0;
  TernMessage *last = n ? tern_chat_get_message (self->chat, n - 1) : NULL;
  /* A newer Tern's chat: nothing is written into it; it can be deleted. */
  gboolean newer = self->chat != NULL && tern_chat_is_newer (self->chat);

  /* Not while an attached image is still being decoded (a moment). */
  gboolean attaching = tern_composer_is_busy (self->composer);

  /* Off with nothing to send: it did nothing, and said nothing. */
  set_enabled (self, "send", ready && !generating && !attaching && !newer
                             && tern_composer_has_content (self->composer));
  set_enabled (self, "send-message", ready && !generating && !attaching && !newer);
  /* A saved chat read without a model says why it cannot go on. */
  tern_composer_set_send_tooltip (self->composer,
                                  newer ? _("Saved by a newer version of Tern: read-only here")
                                  : self->model_loaded ? _("Send (Enter)")
                                                       : _("Load a model to continue this chat"));
  set_enabled (self, "stop", generating || self->pin_id != 0);
  set_enabled (self, "cancel-load", self->load_id != 0);
  set_enabled (self, "pin", ready && self->pin_id == 0 && !generating && !newer);
  set_enabled (self, "regenerate", ready && !generating && !newer && last != NULL
               && g_str_equal (last->role, "assistant"));
  set_enabled (self, "edit-last", ready && !generating && !newer && last != NULL);
  set_enabled (self, "new-chat", !generating);
  set_enabled (self, "delete-chat", !generating && (n > 0 || newer));
  set_enabled (self, "remove-chat", !generating);
  set_enabled (self, "export-chat", n > 0);
  set_enabled (self, "export-chat-to", n > 0);
  set_enabled (self, "open-model", !generating);
  /* Greyed out (with a tooltip that says why) for a model without vision. */
  set_enabled (self, "add-image", tern_composer_has_vision (self->composer));
  set_enabled (self, "load-model", !generating);
  set_enabled (self, "use-demo-model", !generating);
  gtk_widget_set_sensitive (GTK_WIDGET (self->chat_list), !generating);
}

static void
action_cancel_load (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;

  (void) action;
  (void) param;
  if (self->load_id == 0)
    return;
  /* The worker drops the half-loaded model; the one in use stays. */
  tern_engine_worker_cancel (self->worker);
  _tern_window_end_loading (self);
  _tern_window_toast (self, _("Loading cancelled"));
  _tern_window_update_actions (self);
}

static void
on_open_response (GtkNativeDialog *dialog,
                  int              response,
                  TernWindow      *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      g_autofree char *path = g_file_get_path (file);

      if (path != NULL)
        tern_window_load_model (self, path);
    }
  g_object_unref (dialog);
}

static void
action_open_model (GSimpleAction *action,
                   GVariant      *param,
                   gpointer       data)
{
  TernWindow *self = data;
  GtkFileChooserNative *dialog;
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();

  (void) action;
  (void) param;
  dialog = gtk_file_chooser_native_new (_("Open GGUF File"), GTK_WINDOW (self),
                                        GTK_FILE_CHOOSER_ACTION_OPEN, _("_Open"), _("_Cancel"));
  gtk_file_filter_set_name (filter, _("GGUF models"));
  gtk_file_filter_add_pattern (filter, "*.gguf");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
  g_signal_connect (dialog, "response", G_CALLBACK (on_open_response), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

#ifdef TERN_HAVE_MANAGER
/* "use-model" (path, tag): the tag's drafters and flags come with it. */
static void
on_use_model (TernWindow *self,
              const char *path,
              const char *tag)
{
  tern_window_load_tag (self, path, tag, TRUE);
}
#endif

static void
action_model_manager (GSimpleAction *action,
                      GVariant      *param,
                      gpointer       data)
{
  (void) action;
  (void) param;
#ifdef TERN_HAVE_MANAGER
  tern_model_manager_set_settings (
    tern_model_manager_present (GTK_WINDOW (data), G_CALLBACK (on_use_model), data),
    TERN_WINDOW (data)->settings);
#else
  _tern_window_toast (data, _("This build of Tern has no model manager"));
#endif
}

static void
action_load_model (GSimpleAction *action,
                   GVariant      *param,
                   gpointer       data)
{
  (void) action;
  tern_window_load_model (data, g_variant_get_string (param, NULL));
}

static void
action_use_demo_model (GSimpleAction *action,
                       GVariant      *param,
                       gpointer       data)
{
  (void) action;
  (void) param;
  tern_window_use_demo_model (data);
}

static void
action_pin (GSimpleAction *action,
            GVariant      *param,
            gpointer       data)
{
  TernWindow *self = data;
  g_autofree char *text = tern_pin_editor_get_text (self->pin_editor);

  (void) action;
  (void) param;
  _tern_window_request_pin (self, text);
}

static void
action_send (GSimpleAction *action,
             GVariant      *param,
             gpointer       data)
{
  TernWindow *self = data;
  g_autofree char *text = tern_composer_get_text (self->composer);
  g_autofree char *trimmed = g_strstrip (g_strdup (text));

  (void) action;
  (void) param;
  if ((*trimmed == '\0' && tern_composer_get_n_images (self->composer) == 0)
      || _tern_window_is_generating (self) || tern_composer_is_busy (self->composer))
    return;
  tern_composer_set_text (self->composer, "");
  /* Sent: the chat's next save drops the draft kept on disk. */
  if (self->chat != NULL)
    tern_chat_set_draft (self->chat, NULL);
  _tern_window_send_text (self, trimmed);
}

static void
action_send_message (GSimpleAction *action,
                     GVariant      *param,
                     gpointer       data)
{
  (void) action;
  _tern_window_send_text (data, g_variant_get_string (param, NULL));
}

static void
action_stop (GSimpleAction *action,
             GVariant      *param,
             gpointer       data)
{
  TernWindow *self = data;

  (void) action;
  (void) param;
  tern_engine_worker_cancel (self->worker);
}

/* Why a new answer would be the old one again, under the settings the
 * request will be sent with; NULL when it samples afresh. */
static const char *
repeat_reason (TernWindow *self)
{
  TernSampling s;

  tern_sampling_resolve (g_settings_get_boolean (self->settings, "deterministic"),
                         g_settings_get_boolean (self->settings, "model-sampling"),
                         tern_engine_worker_get_suggested_sampling (self->worker),
                         g_settings_get_double (self->settings, "temperature"),
                         g_settings_get_double (self->settings, "top-p"), &s);
  if (g_settings_get_boolean (self->settings, "deterministic"))
    return _("Same answer: Deterministic is on in Preferences");
  if (s.temperature <= 0)
    return _("Same answer: at temperature 0 the model always gives it. Raise the temperature in Preferences for others");
  if (g_settings_get_uint (self->settings, "seed") != 0)
    return _("Same answer: Preferences fix the seed. Seed 0 gives a new answer each time");
  return NULL;
}

static void
action_regenerate (GSimpleAction *action,
                   GVariant      *param,
                   gpointer       data)
{
  TernWindow *self = data;
  guint n = tern_chat_get_n_messages (self->chat);

  (void) action;
  (void) param;
  if (n < 2 || _tern_window_is_generating (self) || tern_chat_is_newer (self->chat)
      || !g_str_equal (tern_chat_get_message (self->chat, n - 1)->role, "assistant"))
    return;
  /* The chat's system prompt is the removed answer's, not the one before
   * it: compared with that, a change the removed answer marked would be
   * lost, so the new answer keeps its mark (or the one an answer that
   * wrote nothing passed on). */
  self->regenerated_prompt_changed = self->regenerated_prompt_changed
                                     || tern_chat_get_message (self->chat, n - 1)->prompt_changed;
  self->regenerated_alone = self->regenerated_alone
                            || tern_chat_get_message (self->chat, n - 1)->alone;
  g_clear_pointer (&self->regenerated_text, g_free);
  self->regenerated_same_reason = repeat_reason (self);
  if (self->regenerated_same_reason != NULL)
    {
      self->regenerated_text = g_strdup (tern_chat_get_message (self->chat, n - 1)->text);
      self->regenerated_cancelled = tern_chat_get_message (self->chat, n - 1)->cancelled;
    }
  g_clear_pointer (&self->regenerated_taken, g_ptr_array_unref);
  self->regenerated_taken = tern_chat_take_from (self->chat, n - 1);
  _tern_window_remove_rows_from (self, n - 1);
  _tern_window_start_generation (self);
}

static void
forget_edit (TernWindow *self)
{
  g_clear_object (&self->edit_chat);
  g_clear_pointer (&self->edit_taken, g_ptr_array_unref);
  g_clear_pointer (&self->edit_put_text, g_free);
  g_clear_pointer (&self->edit_before_text, g_free);
  self->edit_put_images = 0;
  self->edit_before_images = 0;
  self->edit_toast = NULL;
}

static void
on_edit_toast_dismissed (AdwToast   *t,
                         TernWindow *self)
{
  if (t == self->edit_toast)
    forget_edit (self);
}

void
_tern_window_end_edit (TernWindow *self)
{
  AdwToast *t = self->edit_toast;

  forget_edit (self);
  if (t != NULL && g_object_get_data (G_OBJECT (t), "tern-dismissed") == NULL)
    adw_toast_dismiss (t);
}

void
_tern_window_composer_take (TernWindow  *self,
                            TernMessage *m)
{
  tern_window_set_composer_text (self, m->text);
  tern_composer_clear_images (self->composer);
  for (guint i = 0; m->images != NULL && i < m->images->len; i++)
    tern_composer_attach_bytes (self->composer, g_ptr_array_index (m->images, i), _("Image"));
}

void
_tern_window_composer_add (TernWindow  *self,
                           TernMessage *m)
{
  g_autofree char *held = NULL;
  GString *text;

  if (!tern_composer_has_content (self->composer))
    {
      _tern_window_composer_take (self, m);
      return;
    }
  /* What the user wrote stays, after a blank line: they choose what to
   * keep, rather than the app choosing for them (docs/APP.md, "Nothing typed
   * is written over"). */
  held = g_strstrip (tern_composer_get_text (self->composer));
  text = g_string_new (m->text);
  if (*held != '\0')
    g_string_append_printf (text, "%s%s", text->len > 0 ? "\n\n" : "", held);
  tern_window_set_composer_text (self, text->str);
  g_string_free (text, TRUE);
  for (guint i = 0; m->images != NULL && i < m->images->len; i++)
    tern_composer_attach_bytes (self->composer, g_ptr_array_index (m->images, i), _("Image"));
}

/* The composer still holds what Edit Last put there, unchanged. */
static gboolean
composer_as_edit_left (TernWindow *self)
{
  g_autofree char *now = tern_composer_get_text (self->composer);

  return self->edit_put_text != NULL && g_strcmp0 (now, self->edit_put_text) == 0
         && tern_composer_get_n_images (self->composer) == self->edit_put_images;
}

/* The composer back to what it held before Edit Last. */
static void
composer_before_edit (TernWindow *self)
{
  g_autoptr(GPtrArray) images = tern_composer_get_images (self->composer);

  tern_window_set_composer_text (self, self->edit_before_text ? self->edit_before_text : "");
  tern_composer_clear_images (self->composer);
  /* Its own pictures came first, the question's after them. */
  for (guint i = 0; i < self->edit_before_images && i < images->len; i++)
    tern_composer_attach_bytes (self->composer, g_ptr_array_index (images, i), _("Image"));
}

static void
action_edit_last (GSimpleAction *action,
                  GVariant      *param,
                  gpointer       data)
{
  TernWindow *self = data;
  guint n = tern_chat_get_n_messages (self->chat);
  guint user_index = n;
  g_autoptr(GPtrArray) earlier = NULL;

  (void) action;
  (void) param;
  if (_tern_window_is_generating (self) || tern_chat_is_newer (self->chat))
    return;
  for (guint i = n; i > 0; i--)
    if (g_str_equal (tern_chat_get_message (self->chat, i - 1)->role, "user"))
      {
        user_index = i - 1;
        break;
      }
  if (user_index == n)
    return;
  /* Its images go back to the composer with its text; but an edited
   * message refused for its length is there already, and taken back again
   * (its row's Edit Message) the question it was to replace wrote over it.
   * Anything else being written stays, after the question. What the
   * composer held is kept for Undo. */
  {
    gboolean had, keep;
    g_autofree char *before = NULL;
    guint before_images;

    /* Edit Last again (the question before), the composer as the last one
     * left it: the turn that one took goes with this one's, for one Undo,
     * and the composer is what it was before both. The turn was dropped,
     * and its question, in the composer, written over. */
    if (self->edit_taken != NULL && self->edit_chat == self->chat
        && n == self->edit_index && composer_as_edit_left (self))
      {
        earlier = g_steal_pointer (&self->edit_taken);
        composer_before_edit (self);
      }
    had = tern_composer_has_content (self->composer);
    keep = self->edit_draft_kept && had;
    before = tern_composer_get_text (self->composer);
    before_images = tern_composer_get_n_images (self->composer);

    self->edit_draft_kept = FALSE;
    /* The old question and answer stay recoverable until the toast goes. */
    forget_edit (self);
    if (!keep)
      {
        _tern_window_composer_add (self, tern_chat_get_message (self->chat, user_index));
        self->edit_put_text = tern_composer_get_text (self->composer);
        self->edit_put_images = tern_composer_get_n_images (self->composer);
        if (had)
          {
            self->edit_before_text = g_steal_pointer (&before);
            self->edit_before_images = before_images;
          }
      }
  }
  self->edit_taken = tern_chat_take_from (self->chat, user_index);
  if (earlier != NULL)
    g_ptr_array_extend_and_steal (self->edit_taken, g_steal_pointer (&earlier));
  self->edit_chat = g_object_ref (self->chat);
  self->edit_index = user_index;
  _tern_window_remove_rows_from (self, user_index);
  /* "Done" and its figures spoke of the answer taken back, the gauge of
   * the context it filled: they are the previous answer's now (none in a
   * chat emptied), and Undo brings them back. */
  _tern_window_show_last_figures (self);
  _tern_window_save_chat (self);
  _tern_window_mark_last_rows (self);
  _tern_window_update_actions (self);
  _tern_window_update_main_page (self);
  tern_composer_focus (self->composer);
  self->edit_toast = _tern_window_toast_new (self, _("Message taken back for editing"));
  adw_toast_set_timeout (self->edit_toast, 10);
  adw_toast_set_button_label (self->edit_toast, _("_Undo"));
  adw_toast_set_action_name (self->edit_toast, "win.undo-edit");
  _tern_window_keep_toast (self, self->edit_toast);
  g_signal_connect_object (self->edit_toast, "dismissed", G_CALLBACK (on_edit_toast_dismissed),
                           self, 0);
  _tern_window_add_toast (self, self->edit_toast);
}

/* Puts the taken messages back, while nothing was sent since. The
 * composer, as Edit Last left it, goes back to what it held before (the old
 * question is on its row again); anything else in it is the user's since
 * (an edit, the edited message Edit Message left there) and stays. */
static void
action_undo_edit (GSimpleAction *action,
                  GVariant      *param,
                  gpointer       data)
{
  TernWindow *self = data;

  (void) action;
  (void) param;
  if (self->edit_taken == NULL)
    return;
  if (_tern_window_is_generating (self) || self->edit_chat != self->chat
      || tern_chat_get_n_messages (self->chat) != self->edit_index)
    {
      _tern_window_toast (self, _("Too late to undo: the chat has changed since"));
      forget_edit (self);
      return;
    }
  tern_chat_restore (self->chat, self->edit_taken);
  if (composer_as_edit_left (self))
    composer_before_edit (self);
  forget_edit (self);
  _tern_window_show_chat (self, self->chat);
  _tern_window_show_last_figures (self);
  _tern_window_save_chat (self);
}

static void
action_new_chat (GSimpleAction *action,
                 GVariant      *param,
                 gpointer       data)
{
  (void) action;
  (void) param;
  _tern_window_new_chat (data);
}

static TernChat *
chat_by_id (TernWindow *self,
            const char *id,
            guint      *position)
{
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->chats)); i++)
    {
      g_autoptr(TernChat) chat = g_list_model_get_item (G_LIST_MODEL (self->chats), i);

      if (g_str_equal (tern_chat_get_id (chat), id))
        {
          if (position != NULL)
            *position = i;
          return chat; /* the list holds it */
        }
    }
  return NULL;
}

/* Undo is no longer offered: the deleted chat goes for good. */
static void
on_delete_toast_dismissed (AdwToast   *t,
                           TernWindow *self)
{
  const char *id = g_object_get_data (G_OBJECT (t), "tern-chat-id");

  if (id != NULL && self->deleted != NULL)
    g_hash_table_remove (self->deleted, id);
}

/* The chat DOOMED, whose file is gone, out of the list; the one after it
 * shown if it was the one shown. Its place in the list in *pos. */
static void
drop_chat (TernWindow *self,
           TernChat   *doomed,
           guint      *pos)
{
  *pos = 0;
  if (_tern_window_chat_in_list (self, doomed, pos))
    g_list_store_remove (self->chats, *pos);
  if (doomed == self->chat)
    {
      if (g_list_model_get_n_items (G_LIST_MODEL (self->chats)) > 0)
        {
          g_autoptr(TernChat) next =
            g_list_model_get_item (G_LIST_MODEL (self->chats),
                                   MIN (*pos, g_list_model_get_n_items (G_LIST_MODEL (self->chats)) - 1));
          _tern_window_show_chat (self, next);
        }
      else
        {
          g_clear_object (&self->chat);
          _tern_window_new_chat (self);
        }
    }
  else
    /* The row deleted was only selected (moved to with the arrows): the
     * highlight goes back to the chat shown, not to no row. */
    _tern_window_select_current_chat (self);
}

static void
on_delete_newer_response (AdwMessageDialog *dialog,
                          const char       *response,
                          TernWindow       *self)
{
  const char *id = g_object_get_data (G_OBJECT (dialog), "tern-chat-id");
  TernChat *chat = chat_by_id (self, id, NULL);
  g_autoptr(TernChat) doomed = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  guint pos;

  if (chat == NULL || !tern_chat_is_newer (chat) || !g_str_equal (response, "delete"))
    return;
  doomed = g_object_ref (chat);
  if (!tern_chat_trash_newer_file (doomed, self->chats_dir, &error))
    {
      _tern_window_set_error (self, error->message);
      return;
    }
  drop_chat (self, doomed, &pos);
  /* Translators: a chat was deleted; %s is its title */
  text = g_strdup_printf (_("“%s” moved to the trash"), tern_chat_get_title (doomed));
  _tern_window_toast (self, text);
}

/* A newer Tern's chat: this version cannot keep it in memory for an Undo
 * (it never read what the file holds) nor write it back, so the delete is
 * asked for first and the file goes to the trash, where the user can get
 * it back. */
static void
confirm_delete_newer (TernWindow *self,
                      TernChat   *chat)
{
  AdwMessageDialog *dialog;
  g_autofree char *body = NULL;

  if (tern_chat_is_too_large (chat))
    /* Translators: %s is a chat's title */
    body = g_strdup_printf (_("“%s” is larger than this version of Tern reads. Its file is moved "
                              "to the trash."),
                            tern_chat_get_title (chat));
  else
    /* Translators: %s is a chat's title */
    body = g_strdup_printf (_("“%s” was saved by a newer version of Tern, which this version "
                              "cannot read. Its file is moved to the trash."),
                            tern_chat_get_title (chat));
  dialog = ADW_MESSAGE_DIALOG (adw_message_dialog_new (GTK_WINDOW (self), _("Delete Chat?"), body));
  adw_message_dialog_add_responses (dialog, "cancel", _("_Cancel"), "delete",
                                    _("_Move to Trash"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "delete", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_default_response (dialog, "cancel");
  adw_message_dialog_set_close_response (dialog, "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "tern-chat-id", g_strdup (tern_chat_get_id (chat)),
                          g_free);
  g_signal_connect_object (dialog, "response", G_CALLBACK (on_delete_newer_response), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

/* Deletes the chat's file now (a crash must not bring it back) and keeps
 * the chat in memory while its toast offers Undo, which saves it again. */
void
_tern_window_delete_chat (TernWindow *self,
             TernChat   *chat)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(TernChat) doomed = g_object_ref (chat);
  g_autofree char *text = NULL;
  AdwToast *t;
  guint pos = 0;

  if (_tern_window_is_generating (self) && chat == self->chat)
    return;
  if (tern_chat_is_newer (chat))
    {
      confirm_delete_newer (self, chat);
      return;
    }
  /* A copy of this chat (a sync conflict's file) not saved since it was
   * read may have its pictures only in this chat's folder, which goes:
   * saved now, they are in its own. */
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->chats)); i++)
    {
      g_autoptr(TernChat) other = g_list_model_get_item (G_LIST_MODEL (self->chats), i);

      if (other != doomed
          && g_strcmp0 (tern_chat_get_images_from (other), tern_chat_get_id (doomed)) == 0)
        tern_chat_save_in_background (other, self->chats_dir, G_OBJECT (self),
                                      _tern_window_on_save_error);
    }
  /* A save still on its way would bring the file back. */
  tern_chat_wait_saves ();
  if (!tern_chat_delete_file (doomed, self->chats_dir, &error))
    {
      _tern_window_set_error (self, error->message);
      return;
    }
  drop_chat (self, doomed, &pos);
  if (tern_chat_get_n_messages (doomed) == 0)
    return; /* nothing worth an Undo */
  g_object_set_data (G_OBJECT (doomed), "tern-position", GUINT_TO_POINTER (pos));
  g_hash_table_replace (self->deleted, g_strdup (tern_chat_get_id (doomed)),
                        g_object_ref (doomed));
  /* Translators: a chat was deleted; %s is its title */
  text = g_strdup_printf (_("“%s” deleted"), tern_chat_get_title (doomed));
  t = _tern_window_toast_new (self, text);
  adw_toast_set_timeout (t, 8);
  adw_toast_set_button_label (t, _("_Undo"));
  adw_toast_set_action_name (t, "win.undo-delete");
  adw_toast_set_action_target_value (t, g_variant_new_string (tern_chat_get_id (doomed)));
  _tern_window_keep_toast (self, t);
  g_signal_connect_object (t, "dismissed", G_CALLBACK (on_delete_toast_dismissed), self, 0);
  g_object_set_data_full (G_OBJECT (t), "tern-chat-id", g_strdup (tern_chat_get_id (doomed)),
                          g_free);
  _tern_window_add_toast (self, t);
}

static void
action_delete_chat (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;

  (void) action;
  (void) param;
  if (self->chat != NULL)
    _tern_window_delete_chat (self, self->chat);
}

static void
action_remove_chat (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;
  TernChat *chat = chat_by_id (self, g_variant_get_string (param, NULL), NULL);

  (void) action;
  if (chat != NULL)
    _tern_window_delete_chat (self, chat);
}

static void
action_undo_delete (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;
  const char *id = g_variant_get_string (param, NULL);
  TernChat *chat = g_hash_table_lookup (self->deleted, id);
  guint pos, n = g_list_model_get_n_items (G_LIST_MODEL (self->chats));

  (void) action;
  if (chat == NULL)
    return;
  g_object_ref (chat);
  g_hash_table_remove (self->deleted, id);
  pos = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (chat), "tern-position"));
  g_list_store_insert (self->chats, MIN (pos, n), chat);
  tern_chat_save_in_background (chat, self->chats_dir, G_OBJECT (self), _tern_window_on_save_error);
  if (!_tern_window_is_generating (self))
    {
      _tern_window_show_chat (self, chat);
    }
  g_object_unref (chat);
}

static void
on_rename_response (AdwMessageDialog *dialog,
                    const char       *response,
                    TernWindow       *self)
{
  const char *id = g_object_get_data (G_OBJECT (dialog), "tern-chat-id");
  TernChat *chat = chat_by_id (self, id, NULL);
  GtkEditable *entry = GTK_EDITABLE (adw_message_dialog_get_extra_child (dialog));

  if (chat == NULL || !g_str_equal (response, "rename"))
    return;
  tern_chat_set_title (chat, gtk_editable_get_text (entry));
  if (tern_chat_get_n_messages (chat) > 0)
    tern_chat_save_in_background (chat, self->chats_dir, G_OBJECT (self), _tern_window_on_save_error);
}

void
_tern_window_rename_chat (TernWindow *self,
             TernChat   *chat)
{
  AdwMessageDialog *dialog;
  GtkWidget *entry;

  /* Its title is its file's, which is never written. */
  if (tern_chat_is_newer (chat))
    return;
  entry = gtk_entry_new ();
  dialog = ADW_MESSAGE_DIALOG (adw_message_dialog_new (GTK_WINDOW (self), _("Rename Chat"),
                                                       NULL));
  gtk_editable_set_text (GTK_EDITABLE (entry), tern_chat_get_title (chat));
  gtk_entry_set_activates_default (GTK_ENTRY (entry), TRUE);
  gtk_entry_set_placeholder_text (GTK_ENTRY (entry), _("Empty: named after the first message"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (entry), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Chat name"), -1);
  adw_message_dialog_set_extra_child (dialog, entry);
  adw_message_dialog_add_responses (dialog, "cancel", _("_Cancel"), "rename", _("_Rename"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "rename", ADW_RESPONSE_SUGGESTED);
  adw_message_dialog_set_default_response (dialog, "rename");
  adw_message_dialog_set_close_response (dialog, "cancel");
  g_object_set_data_full (G_OBJECT (dialog), "tern-chat-id", g_strdup (tern_chat_get_id (chat)),
                          g_free);
  g_signal_connect_object (dialog, "response", G_CALLBACK (on_rename_response), self, 0);
  gtk_window_present (GTK_WINDOW (dialog));
  gtk_widget_grab_focus (entry);
}

static void
action_rename_chat (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;
  TernChat *chat = chat_by_id (self, g_variant_get_string (param, NULL), NULL);

  (void) action;
  if (chat != NULL)
    _tern_window_rename_chat (self, chat);
}

static void
export_to (TernWindow *self,
           const char *path)
{
  g_autoptr(GError) error = NULL;

  if (tern_window_export_markdown (self, path, &error))
    _tern_window_toast (self, _("Chat exported"));
  else
    _tern_window_set_error (self, error->message);
}

static void
on_export_response (GtkNativeDialog *dialog,
                    int              response,
                    TernWindow      *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      g_autofree char *path = g_file_get_path (file);

      if (path != NULL)
        export_to (self, path);
    }
  g_object_unref (dialog);
}

static void
action_export_chat (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;
  GtkFileChooserNative *dialog;
  g_autofree char *name = NULL;

  (void) action;
  (void) param;
  dialog = gtk_file_chooser_native_new (_("Export Chat as Markdown"), GTK_WINDOW (self),
                                        GTK_FILE_CHOOSER_ACTION_SAVE, _("_Export"),
                                        _("_Cancel"));
  name = g_strdup_printf ("%s.md", tern_chat_get_title (self->chat));
  g_strdelimit (name, "/", '-');
  gtk_file_chooser_set_current_name (GTK_FILE_CHOOSER (dialog), name);
  g_signal_connect (dialog, "response", G_CALLBACK (on_export_response), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

static void
action_export_chat_to (GSimpleAction *action,
                       GVariant      *param,
                       gpointer       data)
{
  (void) action;
  export_to (data, g_variant_get_string (param, NULL));
}

static void
action_show_toast (GSimpleAction *action,
                   GVariant      *param,
                   gpointer       data)
{
  (void) action;
  _tern_window_toast (data, g_variant_get_string (param, NULL));
}

static const GActionEntry win_entries[] = {
  { "open-model", action_open_model, NULL, NULL, NULL, { 0 } },
  { "load-model", action_load_model, "s", NULL, NULL, { 0 } },
  { "model-manager", action_model_manager, NULL, NULL, NULL, { 0 } },
  { "use-demo-model", action_use_demo_model, NULL, NULL, NULL, { 0 } },
  { "pin", action_pin, NULL, NULL, NULL, { 0 } },
  { "send", action_send, NULL, NULL, NULL, { 0 } },
  { "send-message", action_send_message, "s", NULL, NULL, { 0 } },
  { "stop", action_stop, NULL, NULL, NULL, { 0 } },
  { "cancel-load", action_cancel_load, NULL, NULL, NULL, { 0 } },
  { "regenerate", action_regenerate, NULL, NULL, NULL, { 0 } },
  { "edit-last", action_edit_last, NULL, NULL, NULL, { 0 } },
  { "new-chat", action_new_chat, NULL, NULL, NULL, { 0 } },
  { "delete-chat", action_delete_chat, NULL, NULL, NULL, { 0 } },
  { "remove-chat", action_remove_chat, "s", NULL, NULL, { 0 } },
  { "rename-chat", action_rename_chat, "s", NULL, NULL, { 0 } },
  { "undo-delete", action_undo_delete, "s", NULL, NULL, { 0 } },
  { "undo-edit", action_undo_edit, NULL, NULL, NULL, { 0 } },
  { "export-chat", action_export_chat, NULL, NULL, NULL, { 0 } },
  { "export-chat-to", action_export_chat_to, "s", NULL, NULL, { 0 } },
  { "show-toast", action_show_toast, "s", NULL, NULL, { 0 } },
  { "add-image", action_add_image, NULL, NULL, NULL, { 0 } },
  { "paste-image", action_paste_image, NULL, NULL, NULL, { 0 } },
};

void
_tern_window_actions_init (TernWindow *self)
{
  g_action_map_add_action_entries (G_ACTION_MAP (self), win_entries, G_N_ELEMENTS (win_entries),
                                   self);
}
