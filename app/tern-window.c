/* tern-window.c: the chat window.
 *
 * The window never touches the engine: it asks TernEngineWorker and applies
 * what comes back only when the request id is the one it waits for (a model
 * loaded after another was chosen, or tokens of a stopped answer, are
 * dropped).
 */
#include "config.h"

#include <math.h>

#include <glib/gi18n.h>

#include "tern.h"
#include "tern-application.h"
#include "tern-engine-worker.h"
#include "tern-message-row.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-model-manager.h"
#endif
#include "tern-window.h"

#define COUNT_DELAY_MS 300

struct _TernWindow {
  AdwApplicationWindow parent_instance;

  /* template */
  AdwToastOverlay *toast_overlay;
  AdwLeaflet *leaflet;
  GtkBox *sidebar;
  GtkListBox *chat_list;
  GtkBox *content;
  GtkButton *back_button;
  AdwWindowTitle *window_title;
  GtkBox *speculation_box;
  GtkToggleButton *speculation_toggle;
  GtkToggleButton *speculation_toggle_narrow;
  GtkDropDown *drafter_dropdown;
  AdwFlap *flap;
  GtkStack *main_stack;
  GtkStack *transcript_stack;
  GtkScrolledWindow *transcript_scroller;
  GtkBox *message_box;
  TernStatsBar *stats_bar;
  GtkTextView *composer;
  GtkStack *send_stack;
  TernPinEditor *pin_editor;
  GtkButton *attach_button;
  GtkBox *attachments_bar;
  GtkBox *attachments_box;
  GtkSpinButton *image_tokens_spin;
  GtkLabel *image_cost_label;
  GtkDropTarget *drop_target;
  GPtrArray *attachments;  /* GBytes of image files, for the next message */
  int vision_native;       /* image tokens at the native size; -1: no vision */
  int vision_extra;        /* KV rows an image adds besides its tokens */
  double prefill_tok_s;    /* measured on the last request */

  GSettings *settings;
  TernEngineWorker *worker;
  GListStore *chats;
  TernChat *chat;
  char *chats_dir;

  guint load_id;
  guint pin_id;
  guint count_id;
  guint gen_id;
  guint drafter_id;        /* the drafter being prepared */
  guint count_timeout;

  gboolean model_loaded;
  char *model_description;
  char *pin_text;          /* the text of the pin request in flight */
  char *last_error;
  guint streaming_index;   /* message index of the answer being generated */
  TernMessageRow *streaming_row;
  gboolean stick_to_bottom;
  GPtrArray *toasts;       /* shown or waiting */
  char *server_url;        /* while the local server runs */
  char *server_status;
  int server_port;         /* what the running (or starting) server was asked for */
  char *server_key;
  gboolean server_asked;
};

G_DEFINE_FINAL_TYPE (TernWindow, tern_window, ADW_TYPE_APPLICATION_WINDOW)

static void update_actions (TernWindow *self);
static void apply_server (TernWindow *self);
static void clear_attachments (TernWindow *self);

/* ---------------------------------------------------------------- helpers */

/* The overlay may still animate a dismissed toast; the reference kept in
 * self->toasts lasts as long as the window (dropping it at "dismissed" freed
 * a toast under libadwaita 1.2's hide animation). */
static void
on_toast_dismissed (AdwToast   *t,
                    TernWindow *self)
{
  (void) self;
  g_object_set_data (G_OBJECT (t), "tern-dismissed", GINT_TO_POINTER (1));
}

static void
toast (TernWindow *self,
       const char *text)
{
  AdwToast *t = adw_toast_new (text);

  adw_toast_set_timeout (t, 4);
  g_ptr_array_add (self->toasts, g_object_ref (t));
  g_signal_connect_object (t, "dismissed", G_CALLBACK (on_toast_dismissed), self, 0);
  adw_toast_overlay_add_toast (self->toast_overlay, t);
}

void
tern_window_dismiss_toasts (TernWindow *self)
{
  /* Dismissing one removes it from self->toasts: walk a copy. */
  g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func (g_object_unref);

  for (guint i = 0; i < self->toasts->len; i++)
    g_ptr_array_add (all, g_object_ref (g_ptr_array_index (self->toasts, i)));
  for (guint i = 0; i < all->len; i++)
    if (g_object_get_data (G_OBJECT (g_ptr_array_index (all, i)), "tern-dismissed") == NULL)
      adw_toast_dismiss (g_ptr_array_index (all, i));
}

static void
set_error (TernWindow *self,
           const char *message)
{
  g_free (self->last_error);
  self->last_error = g_strdup (message);
  if (message != NULL)
    toast (self, message);
}

static gboolean
is_generating (TernWindow *self)
{
  return self->gen_id != 0;
}

static char *
composer_text (TernWindow *self)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->composer);
  GtkTextIter start, end;

  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

static void
on_save_error (GObject    *owner,
               const char *message)
{
  set_error (TERN_WINDOW (owner), message);
}

static void
save_chat (TernWindow *self)
{
  if (self->chat == NULL || tern_chat_get_n_messages (self->chat) == 0)
    return;
  tern_chat_save_in_background (self->chat, self->chats_dir, G_OBJECT (self), on_save_error);
}

static TernMessageRow *
row_at (TernWindow *self,
        guint       index)
{
  GtkWidget *child = gtk_widget_get_first_child (GTK_WIDGET (self->message_box));

  for (guint i = 0; child != NULL && i < index; i++)
    child = gtk_widget_get_next_sibling (child);
  return child ? TERN_MESSAGE_ROW (child) : NULL;
}

static void
mark_last_rows (TernWindow *self)
{
  guint n = tern_chat_get_n_messages (self->chat);
  guint i = 0;

  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->message_box)); c;
       c = gtk_widget_get_next_sibling (c), i++)
    /* Edit goes with the last user message, Regenerate with the last answer. */
    tern_message_row_set_last (TERN_MESSAGE_ROW (c), !is_generating (self) && i + 2 >= n);
  gtk_stack_set_visible_child_name (self->transcript_stack, n ? "messages" : "empty");
}

static TernMessageRow *
add_row (TernWindow        *self,
         const TernMessage *m)
{
  TernMessageRow *row = tern_message_row_new (m->role, m->text);
  g_autofree char *stats = tern_message_format_stats (m);

  tern_message_row_set_stats (row, stats);
  tern_message_row_set_error (row, m->error);
  if (m->drafted != NULL && m->drafted->len == strlen (m->text))
    tern_message_row_set_drafted (row, m->drafted->data);
  tern_message_row_set_images (row, m->images);
  tern_message_row_set_tint (row, g_settings_get_boolean (self->settings, "tint-drafted"));
  gtk_box_append (self->message_box, GTK_WIDGET (row));
  self->stick_to_bottom = TRUE;
  return row;
}

static void
remove_rows_from (TernWindow *self,
                  guint       index)
{
  TernMessageRow *row;

  while ((row = row_at (self, index)) != NULL)
    gtk_box_remove (self->message_box, GTK_WIDGET (row));
}

static void
show_chat (TernWindow *self,
           TernChat   *chat)
{
  g_set_object (&self->chat, chat);
  remove_rows_from (self, 0);
  for (guint i = 0; i < tern_chat_get_n_messages (chat); i++)
    add_row (self, tern_chat_get_message (chat, i));
  mark_last_rows (self);
  update_actions (self);
}

static gboolean
chat_in_list (TernWindow *self,
              TernChat   *chat,
              guint      *position)
{
  return g_list_store_find (self->chats, chat, position);
}

static void
select_current_chat (TernWindow *self)
{
  guint pos;

  if (chat_in_list (self, self->chat, &pos))
    gtk_list_box_select_row (self->chat_list, gtk_list_box_get_row_at_index (self->chat_list,
                                                                             (int) pos));
}

static void
new_chat (TernWindow *self)
{
  g_autoptr(TernChat) chat = NULL;
  g_autofree char *mode = g_settings_get_string (self->settings, "mode");

  /* An empty chat at the top is reused rather than stacked. */
  if (self->chat != NULL && tern_chat_get_n_messages (self->chat) == 0)
    return;
  chat = tern_chat_new (mode);
  g_list_store_insert (self->chats, 0, chat);
  show_chat (self, chat);
  select_current_chat (self);
}

/* ------------------------------------------------------------ engine side */

/* The header's drafter list is in the order of TernDrafterKind. */
static const char *const drafter_nicks[] = { "prompt-lookup", "draft-model", "dflash" };

static TernDrafterKind
selected_drafter (TernWindow *self)
{
  guint i = gtk_drop_down_get_selected (self->drafter_dropdown);

  return i < G_N_ELEMENTS (drafter_nicks) ? (TernDrafterKind) i : TERN_DRAFTER_PROMPT_LOOKUP;
}

/* A draft model or a DFlash draft is a file loaded against the model in
 * use: the worker loads it now, and a refusal (no file chosen, a missing
 * file, another vocabulary) comes back as a toast with the engine's words,
 * and the choice goes back to prompt lookup. */
static void
prepare_drafter (TernWindow *self)
{
  TernDrafterKind kind = selected_drafter (self);
  g_autofree char *path = NULL;

  if (!self->model_loaded)
    return;
  if (kind == TERN_DRAFTER_DRAFT_MODEL)
    path = g_settings_get_string (self->settings, "draft-model-path");
  else if (kind == TERN_DRAFTER_DFLASH)
    path = g_settings_get_string (self->settings, "dflash-path");
  self->drafter_id = tern_engine_worker_prepare_drafter (self->worker, kind, path);
}

static void
on_drafter_selected (TernWindow *self)
{
  GAction *action = g_action_map_lookup_action (G_ACTION_MAP (self), "drafter");

  if (action != NULL)
    g_simple_action_set_state (G_SIMPLE_ACTION (action),
                               g_variant_new_string (drafter_nicks[selected_drafter (self)]));
  prepare_drafter (self);
}

static void
on_drafter_ready (TernWindow *self,
                  guint       id,
                  int         kind,
                  const char *error)
{
  (void) kind;
  if (id != self->drafter_id)
    return;
  self->drafter_id = 0;
  if (error != NULL)
    {
      set_error (self, error);
      gtk_drop_down_set_selected (self->drafter_dropdown, TERN_DRAFTER_PROMPT_LOOKUP);
    }
}

static void
on_draft_path_changed (TernWindow *self,
                       const char *key)
{
  TernDrafterKind kind = selected_drafter (self);

  if ((kind == TERN_DRAFTER_DRAFT_MODEL && g_str_equal (key, "draft-model-path"))
      || (kind == TERN_DRAFTER_DFLASH && g_str_equal (key, "dflash-path")))
    prepare_drafter (self);
}

static void
action_drafter (GSimpleAction *action,
                GVariant      *state,
                gpointer       data)
{
  TernWindow *self = data;
  const char *nick = g_variant_get_string (state, NULL);

  (void) action;
  for (guint i = 0; i < G_N_ELEMENTS (drafter_nicks); i++)
    if (g_str_equal (nick, drafter_nicks[i]))
      gtk_drop_down_set_selected (self->drafter_dropdown, i);
}

static TernGenSettings
gen_settings (TernWindow *self)
{
  TernGenSettings gen = {
    .temperature = g_settings_get_double (self->settings, "temperature"),
    .top_p = g_settings_get_double (self->settings, "top-p"),
    .seed = g_settings_get_uint (self->settings, "seed"),
    .max_tokens = g_settings_get_int (self->settings, "max-tokens"),
    .thinking = g_settings_get_boolean (self->settings, "thinking"),
    .speculate = g_settings_get_boolean (self->settings, "speculation"),
    .drafter = selected_drafter (self),
    .draft_max = g_settings_get_int (self->settings, "draft-length"),
    .image_tokens = gtk_spin_button_get_value_as_int (self->image_tokens_spin),
  };
  return gen;
}

static void
request_pin (TernWindow *self,
             const char *text)
{
  g_free (self->pin_text);
  self->pin_text = g_strdup (text);
  self->pin_id = tern_engine_worker_pin (self->worker, text);
  tern_pin_editor_set_pinning (self->pin_editor, TRUE);
  update_actions (self);
}

/* Requests go to the engine thread in order, so a pin queued here is in
 * place before the request queued after it. */
static void
ensure_pinned (TernWindow *self)
{
  g_autofree char *text = tern_pin_editor_get_text (self->pin_editor);

  if (self->pin_id != 0 && g_strcmp0 (self->pin_text, text) == 0)
    return;
  if (self->pin_id == 0 && !tern_pin_editor_is_stale (self->pin_editor)
      && tern_pin_editor_get_pinned_text (self->pin_editor) != NULL)
    return;
  request_pin (self, text);
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

static void
on_pin_editor_changed (TernWindow *self)
{
  g_clear_handle_id (&self->count_timeout, g_source_remove);
  self->count_timeout = g_timeout_add (COUNT_DELAY_MS, on_count_timeout, self);
}

static void
start_generation (TernWindow *self)
{
  TernGenSettings gen = gen_settings (self);
  g_autofree char *mode = g_settings_get_string (self->settings, "mode");
  g_autofree char *system_prompt = tern_pin_editor_get_text (self->pin_editor);
  guint n_before = tern_chat_get_n_messages (self->chat);
  TernMessage *answer;
  guint pos;

  ensure_pinned (self);
  tern_chat_set_mode (self->chat, mode);
  tern_chat_set_system_prompt (self->chat, system_prompt);
  tern_chat_set_model (self->chat, self->model_description);

  if (g_str_equal (mode, "chat"))
    {
      g_autofree const char **roles = g_new0 (const char *, n_before + 1);
      g_autoptr(GPtrArray) contents = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) images = g_ptr_array_new ();

      /* A message's images go where its markers are: before its text. */
      for (guint i = 0; i < n_before; i++)
        {
          TernMessage *m = tern_chat_get_message (self->chat, i);
          GString *content = g_string_new (NULL);

          roles[i] = m->role;
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
                                                     n_before, images, &gen);
    }
  else
    {
      TernMessage *last = tern_chat_get_message (self->chat, n_before - 1);
      self->gen_id = tern_engine_worker_ask_images (self->worker, last->text, last->images,
                                                    &gen);
    }

  answer = tern_chat_append (self->chat, "assistant", "");
  self->streaming_index = n_before;
  self->streaming_row = add_row (self, answer);
  tern_stats_bar_start (self->stats_bar);
  gtk_stack_set_visible_child_name (self->send_stack, "stop");

  if (!chat_in_list (self, self->chat, &pos))
    g_list_store_insert (self->chats, 0, self->chat);
  else if (pos != 0)
    {
      g_autoptr(TernChat) keep = g_object_ref (self->chat);
      g_list_store_remove (self->chats, pos);
      g_list_store_insert (self->chats, 0, keep);
    }
  select_current_chat (self);
  mark_last_rows (self);
  update_actions (self);
}

static void
send_text (TernWindow *self,
           const char *text)
{
  g_autofree char *trimmed = g_strstrip (g_strdup (text ? text : ""));

  TernMessage *m;

  if (!self->model_loaded || is_generating (self) || *trimmed == '\0')
    return;
  m = tern_chat_append (self->chat, "user", trimmed);
  if (self->attachments->len > 0)
    {
      m->images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
      for (guint i = 0; i < self->attachments->len; i++)
        g_ptr_array_add (m->images, g_bytes_ref (g_ptr_array_index (self->attachments, i)));
    }
  add_row (self, m);
  clear_attachments (self);
  start_generation (self);
}

static void
on_model_loaded (TernWindow *self,
                 guint       id,
                 const char *path,
                 const char *description,
                 gboolean    is_demo,
                 const char *error)
{
  g_autofree char *system_prompt = NULL;

  if (id != self->load_id)
    return;
  self->load_id = 0;
  if (error != NULL)
    {
      set_error (self, error);
      gtk_stack_set_visible_child_name (self->main_stack,
                                        self->model_loaded ? "chat" : "no-model");
      update_actions (self);
      return;
    }

  self->model_loaded = TRUE;
  g_free (self->model_description);
  self->model_description = g_strdup (description);
  adw_window_title_set_title (self->window_title, is_demo ? _("Demo Model") : _("Tern"));
  adw_window_title_set_subtitle (self->window_title, description);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->window_title), path);
  if (!is_demo)
    g_settings_set_string (self->settings, "last-model", path);
  gtk_stack_set_visible_child_name (self->main_stack, "chat");

  /* The pin belongs to the old model: pin the prompt again for this one. */
  tern_pin_editor_set_pinned (self->pin_editor, NULL, NULL);
  system_prompt = tern_pin_editor_get_text (self->pin_editor);
  request_count (self);
  request_pin (self, system_prompt);
  /* The old model's draft and server went with it. */
  if (selected_drafter (self) != TERN_DRAFTER_PROMPT_LOOKUP)
    prepare_drafter (self);
  if (g_settings_get_boolean (self->settings, "server-enabled"))
    apply_server (self);
  update_actions (self);
  gtk_widget_grab_focus (GTK_WIDGET (self->composer));
}

static void
on_token_count (TernWindow *self,
                guint       id,
                int         n_tokens)
{
  if (id == self->count_id)
    tern_pin_editor_set_token_count (self->pin_editor, n_tokens);
}

static void
on_pinned (TernWindow         *self,
           guint               id,
           const TernPinState *state,
           const char         *error,
           gboolean            cancelled)
{
  if (id != self->pin_id)
    return;
  self->pin_id = 0;
  tern_pin_editor_set_pinning (self->pin_editor, FALSE);
  if (error != NULL)
    {
      tern_pin_editor_set_error (self->pin_editor, error);
      set_error (self, error);
    }
  else if (!cancelled)
    {
      tern_pin_editor_set_pinned (self->pin_editor, self->pin_text, state);
      g_settings_set_string (self->settings, "system-prompt", self->pin_text);
    }
  g_clear_pointer (&self->pin_text, g_free);
  update_actions (self);
}

static void
on_update (TernWindow      *self,
           guint            id,
           const char      *text,
           const TernStats *live,
           const guint8    *drafted)
{
  if (id == self->pin_id && live->phase == TERN_PHASE_PIN)
    tern_pin_editor_set_progress (self->pin_editor, live->prefill_done, live->prefill_total);
  else if (id == self->gen_id && self->streaming_row != NULL)
    {
      tern_message_row_append_drafted (self->streaming_row, text, drafted);
      tern_stats_bar_update (self->stats_bar, live);
    }
}

static void
on_finished (TernWindow      *self,
             guint            id,
             const TernStats *stats,
             const char      *error,
             gboolean         cancelled)
{
  TernMessage *m;
  g_autofree char *figures = NULL;

  if (id != self->gen_id)
    return;
  self->gen_id = 0;

  m = tern_chat_get_message (self->chat, self->streaming_index);
  g_free (m->text);
  m->text = g_strdup (tern_message_row_get_text (self->streaming_row));
  tern_message_set_drafted (m, tern_message_row_get_drafted (self->streaming_row));
  m->cancelled = cancelled;
  g_free (m->error);
  m->error = g_strdup (error);
  tern_message_set_stats (m, stats);
  tern_chat_touch (self->chat);
  if (stats->prefill_tok_s > 0 && stats->prompt_tokens >= 8)
    self->prefill_tok_s = stats->prefill_tok_s;

  tern_message_row_flush (self->streaming_row);
  figures = tern_message_format_stats (m);
  tern_message_row_set_stats (self->streaming_row, figures);
  tern_message_row_set_error (self->streaming_row, error);
  tern_stats_bar_finish (self->stats_bar, stats, cancelled);
  self->streaming_row = NULL;
  if (error != NULL)
    set_error (self, error);

  gtk_stack_set_visible_child_name (self->send_stack, "send");
  save_chat (self);
  mark_last_rows (self);
  update_actions (self);
}

static void
on_engine_warning (TernWindow *self,
                   const char *message)
{
  toast (self, message);
}

/* ---------------------------------------------------------------- images */

/* Tokens an image costs under budget: the largest square grid within it, at
 * most the native one (tn_vision_tokens' rule). */
static int
image_tokens_for (int native,
                  int budget)
{
  int side = (int) (sqrt ((double) native) + 0.5);
  int k;

  if (native <= 0)
    return 0;
  if (budget <= 0 || budget >= native)
    return native;
  k = (int) sqrt ((double) budget);
  while ((k + 1) * (k + 1) <= budget)
    k++;
  while (k > 1 && k * k > budget)
    k--;
  return MIN (MAX (k, 1), side) * MIN (MAX (k, 1), side);
}

/* The cost preview: image tokens, and the prefill time they add at the
 * prefill speed last measured. */
static void
update_image_cost (TernWindow *self)
{
  guint n = self->attachments->len;
  int per = image_tokens_for (self->vision_native,
                              gtk_spin_button_get_value_as_int (self->image_tokens_spin));
  int rows = (int) n * (per + self->vision_extra);
  g_autofree char *text = NULL;

  gtk_widget_set_visible (GTK_WIDGET (self->attachments_bar), n > 0);
  if (n == 0)
    return;
  if (self->prefill_tok_s > 0)
    {
      double ms = 1000.0 * rows / self->prefill_tok_s;
      g_autofree char *time = ms < 1000 ? g_strdup_printf (_("%.0f ms"), ms)
                                        : g_strdup_printf (_("%.1f s"), ms / 1000);

      /* Translators: images attached, tokens each, total, and the prefill time
       * they add ("120 ms", "2.5 s") */
      text = g_strdup_printf (ngettext ("%u image · %d tokens each · %d tokens · about %s of prefill",
                                        "%u images · %d tokens each · %d tokens · about %s of prefill", n),
                              n, per, rows, time);
    }
  else
    text = g_strdup_printf (ngettext ("%u image · %d tokens each · %d tokens (prefill speed measured after the first answer)",
                                      "%u images · %d tokens each · %d tokens (prefill speed measured after the first answer)", n),
                            n, per, rows);
  gtk_label_set_text (self->image_cost_label, text);
}

static void
on_remove_attachment (GtkButton  *button,
                      TernWindow *self)
{
  GBytes *bytes = g_object_get_data (G_OBJECT (button), "tern-image");
  guint index;

  if (g_ptr_array_find (self->attachments, bytes, &index))
    g_ptr_array_remove_index (self->attachments, index);
  gtk_box_remove (self->attachments_box,
                  gtk_widget_get_parent (GTK_WIDGET (button)));
  update_image_cost (self);
}

/* Adds an image file's bytes to the next message, with a thumbnail. */
static gboolean
attach_image (TernWindow *self,
              GBytes     *bytes,
              const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  GtkWidget *overlay, *picture, *remove;

  if (self->vision_native < 0)
    {
      set_error (self, self->model_loaded
                         ? _("This model cannot read images: it has no vision projector (a *mmproj*.gguf file beside the model)")
                         : _("Load a model that can read images first"));
      return FALSE;
    }
  texture = gdk_texture_new_from_bytes (bytes, &error);
  if (texture == NULL)
    {
      g_autofree char *message = g_strdup_printf (_("%s: not an image Tern can read (%s)"),
                                                  name, error->message);
      set_error (self, message);
      return FALSE;
    }
  g_ptr_array_add (self->attachments, g_bytes_ref (bytes));

  overlay = gtk_overlay_new ();
  picture = gtk_picture_new_for_paintable (GDK_PAINTABLE (texture));
  gtk_widget_set_size_request (picture, 56, 56);
  gtk_picture_set_can_shrink (GTK_PICTURE (picture), TRUE);
  gtk_widget_set_tooltip_text (picture, name);
  gtk_accessible_update_property (GTK_ACCESSIBLE (picture), GTK_ACCESSIBLE_PROPERTY_LABEL, name,
                                  -1);
  gtk_overlay_set_child (GTK_OVERLAY (overlay), picture);
  remove = gtk_button_new_from_icon_name ("window-close-symbolic");
  gtk_widget_set_halign (remove, GTK_ALIGN_END);
  gtk_widget_set_valign (remove, GTK_ALIGN_START);
  gtk_widget_add_css_class (remove, "circular");
  gtk_widget_add_css_class (remove, "osd");
  gtk_widget_set_tooltip_text (remove, _("Remove Image"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (remove), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Remove Image"), -1);
  g_object_set_data_full (G_OBJECT (remove), "tern-image", g_bytes_ref (bytes),
                          (GDestroyNotify) g_bytes_unref);
  g_signal_connect (remove, "clicked", G_CALLBACK (on_remove_attachment), self);
  gtk_overlay_add_overlay (GTK_OVERLAY (overlay), remove);
  gtk_box_append (self->attachments_box, overlay);
  update_image_cost (self);
  return TRUE;
}

static gboolean
attach_file (TernWindow *self,
             GFile      *file)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *name = g_file_get_basename (file);
  g_autoptr(GBytes) bytes = NULL;

  if (self->vision_native < 0)
    return attach_image (self, NULL, name);
  /* Image files are small next to a model; read here, decoded on the worker. */
  bytes = g_file_load_bytes (file, NULL, NULL, &error);
  if (bytes == NULL)
    {
      set_error (self, error->message);
      return FALSE;
    }
  return attach_image (self, bytes, name);
}

static gboolean
attach_texture (TernWindow *self,
                GdkTexture *texture)
{
  g_autoptr(GBytes) png = NULL;

  if (self->vision_native < 0)
    return attach_image (self, NULL, _("Pasted image"));
  png = gdk_texture_save_to_png_bytes (texture);
  return attach_image (self, png, _("Pasted image"));
}

static void
clear_attachments (TernWindow *self)
{
  GtkWidget *child;

  g_ptr_array_set_size (self->attachments, 0);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->attachments_box))) != NULL)
    gtk_box_remove (self->attachments_box, child);
  update_image_cost (self);
}

/* Files from a file manager, or image data from another app. */
static gboolean
on_drop (GtkDropTarget *target,
         const GValue  *value,
         double         x,
         double         y,
         TernWindow    *self)
{
  gboolean any = FALSE;

  (void) target;
  (void) x;
  (void) y;
  if (G_VALUE_HOLDS (value, GDK_TYPE_FILE_LIST))
    {
      for (GSList *l = g_value_get_boxed (value); l != NULL; l = l->next)
        if (attach_file (self, l->data))
          any = TRUE;
        else
          break;
    }
  else if (G_VALUE_HOLDS (value, G_TYPE_FILE))
    any = attach_file (self, g_value_get_object (value));
  else if (G_VALUE_HOLDS (value, GDK_TYPE_TEXTURE))
    any = attach_texture (self, g_value_get_object (value));
  return any;
}

static void
on_paste_texture (GObject      *clipboard,
                  GAsyncResult *result,
                  gpointer      data)
{
  g_autoptr(TernWindow) self = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GdkTexture) texture = gdk_clipboard_read_texture_finish (GDK_CLIPBOARD (clipboard),
                                                                     result, &error);

  if (texture != NULL)
    attach_texture (self, texture);
  else
    set_error (self, error->message);
}

/* Ctrl+V with a picture on the clipboard attaches it; text pastes as usual. */
static gboolean
paste_image (TernWindow *self)
{
  GdkClipboard *clipboard = gtk_widget_get_clipboard (GTK_WIDGET (self));
  GdkContentFormats *formats = gdk_clipboard_get_formats (clipboard);

  if (!gdk_content_formats_contain_gtype (formats, GDK_TYPE_TEXTURE)
      || gdk_content_formats_contain_gtype (formats, G_TYPE_STRING))
    return FALSE;
  gdk_clipboard_read_texture_async (clipboard, NULL, on_paste_texture, g_object_ref (self));
  return TRUE;
}

static void
action_paste_image (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;

  (void) action;
  (void) param;
  if (!paste_image (self))
    toast (self, _("The clipboard holds no image"));
}

static void
on_add_image_response (GtkNativeDialog *dialog,
                       int              response,
                       TernWindow      *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GListModel) files = gtk_file_chooser_get_files (GTK_FILE_CHOOSER (dialog));

      for (guint i = 0; i < g_list_model_get_n_items (files); i++)
        {
          g_autoptr(GFile) file = g_list_model_get_item (files, i);
          if (!attach_file (self, file))
            break;
        }
    }
  g_object_unref (dialog);
}

static void
action_add_image (GSimpleAction *action,
                  GVariant      *param,
                  gpointer       data)
{
  TernWindow *self = data;
  GtkFileChooserNative *dialog;
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();

  (void) action;
  (void) param;
  if (self->vision_native < 0)
    {
      attach_image (self, NULL, "");
      return;
    }
  dialog = gtk_file_chooser_native_new (_("Add Images"), GTK_WINDOW (self),
                                        GTK_FILE_CHOOSER_ACTION_OPEN, _("_Add"), _("_Cancel"));
  gtk_file_chooser_set_select_multiple (GTK_FILE_CHOOSER (dialog), TRUE);
  gtk_file_filter_set_name (filter, _("Images (PNG, JPEG, WebP, GIF)"));
  gtk_file_filter_add_mime_type (filter, "image/png");
  gtk_file_filter_add_mime_type (filter, "image/jpeg");
  gtk_file_filter_add_mime_type (filter, "image/webp");
  gtk_file_filter_add_mime_type (filter, "image/gif");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
  g_signal_connect (dialog, "response", G_CALLBACK (on_add_image_response), self);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

static void
on_vision (TernWindow *self,
           guint       id,
           int         native_tokens,
           int         extra_rows,
           const char *projector)
{
  (void) id;
  (void) projector;
  self->vision_native = native_tokens;
  self->vision_extra = MAX (extra_rows, 0);
  clear_attachments (self);
  if (native_tokens > 0)
    gtk_spin_button_set_range (self->image_tokens_spin, 1, native_tokens);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->attach_button),
                               native_tokens > 0 ? _("Add Image… (or drop or paste one)")
                                                 : _("Add Image… (this model cannot read images)"));
}

GtkDropTarget *
tern_window_get_drop_target (TernWindow *self)
{
  return self->drop_target;
}

guint
tern_window_get_n_attachments (TernWindow *self)
{
  return self->attachments->len;
}

gboolean
tern_window_has_vision (TernWindow *self)
{
  return self->vision_native > 0;
}

const char *
tern_window_get_image_cost_text (TernWindow *self)
{
  return gtk_label_get_text (self->image_cost_label);
}

/* -------------------------------------------------------- local server */

enum { SIGNAL_SERVER_STATUS_CHANGED, N_WINDOW_SIGNALS };
static guint window_signals[N_WINDOW_SIGNALS];

static void
set_server_status (TernWindow *self,
                   const char *status)
{
  g_free (self->server_status);
  self->server_status = g_strdup (status);
  g_signal_emit (self, window_signals[SIGNAL_SERVER_STATUS_CHANGED], 0);
}

/* Starts, restarts (new port or key) or stops the server as the settings
 * say. It serves the loaded model, so it waits for one. */
static void
apply_server (TernWindow *self)
{
  if (!tern_engine_worker_can_serve ())
    {
      set_server_status (self, _("This build of Tern has no server"));
      return;
    }
  if (g_settings_get_boolean (self->settings, "server-enabled"))
    {
      g_autofree char *key = g_settings_get_string (self->settings, "server-api-key");

      int port = g_settings_get_int (self->settings, "server-port");

      if (!self->model_loaded)
        {
          set_server_status (self, _("Starts when a model is loaded"));
          return;
        }
      /* Settings written again with the same values change nothing. */
      if (self->server_asked && port == self->server_port
          && g_strcmp0 (key, self->server_key) == 0)
        return;
      self->server_asked = TRUE;
      self->server_port = port;
      g_free (self->server_key);
      self->server_key = g_strdup (key);
      /* The URL of a server being replaced is no longer good. */
      g_clear_pointer (&self->server_url, g_free);
      set_server_status (self, _("Starting…"));
      tern_engine_worker_serve (self->worker, port, key);
    }
  else
    {
      if (self->server_asked)
        tern_engine_worker_stop_serving (self->worker);
      self->server_asked = FALSE;
      g_clear_pointer (&self->server_url, g_free);
      set_server_status (self, _("Off"));
    }
}

static void
on_server_state (TernWindow *self,
                 gboolean    running,
                 const char *url,
                 const char *error)
{
  g_clear_pointer (&self->server_url, g_free);
  if (running)
    {
      g_autofree char *status = NULL;

      self->server_url = g_strdup (url);
      /* Translators: %s is the server's base URL, http://127.0.0.1:8080/v1 */
      status = g_strdup_printf (_("Serving the loaded model at %s"), url);
      set_server_status (self, status);
      toast (self, status);
    }
  else if (error != NULL)
    {
      /* A switch left on would claim a server that does not run. */
      self->server_asked = FALSE;
      set_error (self, error);
      g_settings_set_boolean (self->settings, "server-enabled", FALSE);
      set_server_status (self, error);
    }
  else
    {
      /* Stopped: asked to, or its model is being replaced (model-loaded
       * starts it again). */
      self->server_asked = FALSE;
      set_server_status (self, g_settings_get_boolean (self->settings, "server-enabled")
                                 ? _("Restarting with the new model…") : _("Off"));
    }
}

static void
on_server_setting_changed (TernWindow *self,
                           const char *key)
{
  /* The key takes effect when applied, not at each keystroke of its row. */
  (void) key;
  apply_server (self);
}

const char *
tern_window_get_server_url (TernWindow *self)
{
  return self->server_url;
}

const char *
tern_window_get_server_status (TernWindow *self)
{
  return self->server_status ? self->server_status : _("Off");
}

static void
on_tint_changed (TernWindow *self)
{
  gboolean tint = g_settings_get_boolean (self->settings, "tint-drafted");

  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->message_box)); c;
       c = gtk_widget_get_next_sibling (c))
    tern_message_row_set_tint (TERN_MESSAGE_ROW (c), tint);
}

/* The tint is the theme's accent colour, which differs in the dark style. */
static void
on_dark_changed (TernWindow *self)
{
  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->message_box)); c;
       c = gtk_widget_get_next_sibling (c))
    tern_message_row_refresh (TERN_MESSAGE_ROW (c));
}

/* ---------------------------------------------------------------- actions */

static void
set_enabled (TernWindow *self,
             const char *name,
             gboolean    enabled)
{
  GAction *action = g_action_map_lookup_action (G_ACTION_MAP (self), name);

  if (G_IS_SIMPLE_ACTION (action))
    g_simple_action_set_enabled (G_SIMPLE_ACTION (action), enabled);
}

static void
update_actions (TernWindow *self)
{
  gboolean generating = is_generating (self);
  gboolean ready = self->model_loaded && self->load_id == 0;
  guint n = self->chat ? tern_chat_get_n_messages (self->chat) : 0;
  TernMessage *last = n ? tern_chat_get_message (self->chat, n - 1) : NULL;

  set_enabled (self, "send", ready && !generating);
  set_enabled (self, "send-message", ready && !generating);
  set_enabled (self, "stop", generating || self->pin_id != 0);
  set_enabled (self, "pin", ready && self->pin_id == 0 && !generating);
  set_enabled (self, "regenerate", ready && !generating && last != NULL
               && g_str_equal (last->role, "assistant"));
  set_enabled (self, "edit-last", ready && !generating && last != NULL);
  set_enabled (self, "new-chat", !generating);
  set_enabled (self, "delete-chat", !generating && n > 0);
  set_enabled (self, "export-chat", n > 0);
  set_enabled (self, "export-chat-to", n > 0);
  set_enabled (self, "open-model", !generating);
  set_enabled (self, "load-model", !generating);
  set_enabled (self, "use-demo-model", !generating);
  gtk_widget_set_sensitive (GTK_WIDGET (self->chat_list), !generating);
}

void
tern_window_load_model (TernWindow *self,
                        const char *path)
{
  g_return_if_fail (TERN_IS_WINDOW (self));

  if (is_generating (self))
    return;
  tern_engine_worker_set_session_size (self->worker,
                                       g_settings_get_int (self->settings, "context-size"),
                                       g_settings_get_int (self->settings, "threads"));
  self->load_id = tern_engine_worker_load_model (self->worker, path);
  gtk_stack_set_visible_child_name (self->main_stack, "loading");
  update_actions (self);
}

void
tern_window_use_demo_model (TernWindow *self)
{
  g_autofree char *path = tern_demo_model_path (self->settings);

  g_return_if_fail (TERN_IS_WINDOW (self));
  if (is_generating (self))
    return;
  tern_engine_worker_set_session_size (self->worker,
                                       g_settings_get_int (self->settings, "context-size"),
                                       g_settings_get_int (self->settings, "threads"));
  self->load_id = tern_engine_worker_load_demo (self->worker, path);
  gtk_stack_set_visible_child_name (self->main_stack, "loading");
  update_actions (self);
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

static void
action_model_manager (GSimpleAction *action,
                      GVariant      *param,
                      gpointer       data)
{
  (void) action;
  (void) param;
#ifdef TERN_HAVE_MANAGER
  /* "use-model" (path, tag) reaches tern_window_load_model (self, path). */
  tern_model_manager_present (GTK_WINDOW (data), G_CALLBACK (tern_window_load_model), data);
#else
  toast (data, _("This build of Tern has no model manager"));
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
  request_pin (self, text);
}

static void
action_send (GSimpleAction *action,
             GVariant      *param,
             gpointer       data)
{
  TernWindow *self = data;
  g_autofree char *text = composer_text (self);
  g_autofree char *trimmed = g_strstrip (g_strdup (text));

  (void) action;
  (void) param;
  if (*trimmed == '\0' || is_generating (self))
    return;
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->composer), "", 0);
  send_text (self, trimmed);
}

static void
action_send_message (GSimpleAction *action,
                     GVariant      *param,
                     gpointer       data)
{
  (void) action;
  send_text (data, g_variant_get_string (param, NULL));
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

static void
action_regenerate (GSimpleAction *action,
                   GVariant      *param,
                   gpointer       data)
{
  TernWindow *self = data;
  guint n = tern_chat_get_n_messages (self->chat);

  (void) action;
  (void) param;
  if (n < 2 || is_generating (self)
      || !g_str_equal (tern_chat_get_message (self->chat, n - 1)->role, "assistant"))
    return;
  tern_chat_truncate (self->chat, n - 1);
  remove_rows_from (self, n - 1);
  start_generation (self);
}

static void
action_edit_last (GSimpleAction *action,
                  GVariant      *param,
                  gpointer       data)
{
  TernWindow *self = data;
  guint n = tern_chat_get_n_messages (self->chat);
  guint user_index = n;

  (void) action;
  (void) param;
  if (is_generating (self))
    return;
  for (guint i = n; i > 0; i--)
    if (g_str_equal (tern_chat_get_message (self->chat, i - 1)->role, "user"))
      {
        user_index = i - 1;
        break;
      }
  if (user_index == n)
    return;
  tern_window_set_composer_text (self, tern_chat_get_message (self->chat, user_index)->text);
  {
    /* Its images go back to the composer with its text. */
    TernMessage *m = tern_chat_get_message (self->chat, user_index);

    clear_attachments (self);
    for (guint i = 0; m->images != NULL && i < m->images->len; i++)
      attach_image (self, g_ptr_array_index (m->images, i), _("Image"));
  }
  tern_chat_truncate (self->chat, user_index);
  remove_rows_from (self, user_index);
  save_chat (self);
  mark_last_rows (self);
  update_actions (self);
  gtk_widget_grab_focus (GTK_WIDGET (self->composer));
}

static void
action_new_chat (GSimpleAction *action,
                 GVariant      *param,
                 gpointer       data)
{
  (void) action;
  (void) param;
  new_chat (data);
}

static void
action_delete_chat (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernWindow *self = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(TernChat) doomed = NULL;
  guint pos;

  (void) action;
  (void) param;
  if (is_generating (self) || self->chat == NULL)
    return;
  doomed = g_object_ref (self->chat);
  /* A save still on its way would bring the file back. */
  tern_chat_wait_saves ();
  if (!tern_chat_delete_file (doomed, self->chats_dir, &error))
    {
      set_error (self, error->message);
      return;
    }
  if (chat_in_list (self, doomed, &pos))
    g_list_store_remove (self->chats, pos);
  if (g_list_model_get_n_items (G_LIST_MODEL (self->chats)) > 0)
    {
      g_autoptr(TernChat) next = g_list_model_get_item (G_LIST_MODEL (self->chats), 0);
      show_chat (self, next);
      select_current_chat (self);
    }
  else
    {
      g_clear_object (&self->chat);
      new_chat (self);
    }
  toast (self, _("Chat deleted"));
}

gboolean
tern_window_export_markdown (TernWindow *self,
                             const char *path,
                             GError    **error)
{
  g_autofree char *markdown = tern_chat_to_markdown (self->chat);

  return g_file_set_contents_full (path, markdown, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644,
                                   error);
}

static void
export_to (TernWindow *self,
           const char *path)
{
  g_autoptr(GError) error = NULL;

  if (tern_window_export_markdown (self, path, &error))
    toast (self, _("Chat exported"));
  else
    set_error (self, error->message);
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
  toast (data, g_variant_get_string (param, NULL));
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
  { "regenerate", action_regenerate, NULL, NULL, NULL, { 0 } },
  { "edit-last", action_edit_last, NULL, NULL, NULL, { 0 } },
  { "new-chat", action_new_chat, NULL, NULL, NULL, { 0 } },
  { "delete-chat", action_delete_chat, NULL, NULL, NULL, { 0 } },
  { "export-chat", action_export_chat, NULL, NULL, NULL, { 0 } },
  { "export-chat-to", action_export_chat_to, "s", NULL, NULL, { 0 } },
  { "show-toast", action_show_toast, "s", NULL, NULL, { 0 } },
  { "add-image", action_add_image, NULL, NULL, NULL, { 0 } },
  { "paste-image", action_paste_image, NULL, NULL, NULL, { 0 } },
};

/* -------------------------------------------------------------- the rest */

static gboolean
on_composer_key (GtkEventControllerKey *controller,
                 guint                  keyval,
                 guint                  keycode,
                 GdkModifierType        state,
                 TernWindow            *self)
{
  (void) controller;
  (void) keycode;
  if ((keyval == GDK_KEY_Return || keyval == GDK_KEY_KP_Enter)
      && (state & (GDK_SHIFT_MASK | GDK_CONTROL_MASK | GDK_ALT_MASK)) == 0)
    {
      gtk_widget_activate_action (GTK_WIDGET (self), "win.send", NULL);
      return TRUE;
    }
  if ((keyval == GDK_KEY_v || keyval == GDK_KEY_V)
      && (state & (GDK_SHIFT_MASK | GDK_CONTROL_MASK | GDK_ALT_MASK)) == GDK_CONTROL_MASK)
    return paste_image (self);
  return FALSE;
}

static void
on_scroll_upper (GtkAdjustment *adj,
                 GParamSpec    *pspec,
                 TernWindow    *self)
{
  (void) pspec;
  if (self->stick_to_bottom)
    gtk_adjustment_set_value (adj, gtk_adjustment_get_upper (adj)
                                   - gtk_adjustment_get_page_size (adj));
}

static void
on_scroll_value (GtkAdjustment *adj,
                 TernWindow    *self)
{
  self->stick_to_bottom = gtk_adjustment_get_value (adj)
    >= gtk_adjustment_get_upper (adj) - gtk_adjustment_get_page_size (adj) - 4;
}

static GtkWidget *
create_chat_row (gpointer item,
                 gpointer data)
{
  GtkWidget *label = gtk_label_new (NULL);

  (void) data;
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
  gtk_widget_set_margin_top (label, 6);
  gtk_widget_set_margin_bottom (label, 6);
  g_object_bind_property (item, "title", label, "label", G_BINDING_SYNC_CREATE);
  return label;
}

static void
on_chat_row_activated (GtkListBox    *box,
                       GtkListBoxRow *row,
                       TernWindow    *self)
{
  g_autoptr(TernChat) chat = NULL;

  (void) box;
  if (is_generating (self))
    return;
  chat = g_list_model_get_item (G_LIST_MODEL (self->chats),
                                (guint) gtk_list_box_row_get_index (row));
  if (chat != self->chat)
    show_chat (self, chat);
  adw_leaflet_navigate (self->leaflet, ADW_NAVIGATION_DIRECTION_FORWARD);
}

/* A window too narrow for both shows the chat, not the list of chats. */
static void
on_folded (TernWindow *self)
{
  if (adw_leaflet_get_folded (self->leaflet))
    adw_leaflet_set_visible_child (self->leaflet, GTK_WIDGET (self->content));
}

static void
on_back_clicked (TernWindow *self)
{
  adw_leaflet_navigate (self->leaflet, ADW_NAVIGATION_DIRECTION_BACK);
}

static int
compare_updated (gconstpointer a,
                 gconstpointer b,
                 gpointer      data)
{
  gint64 ua = tern_chat_get_updated ((TernChat *) a);
  gint64 ub = tern_chat_get_updated ((TernChat *) b);

  (void) data;
  return ua < ub ? 1 : ua > ub ? -1 : 0;
}

static void
load_chats (TernWindow *self)
{
  g_autoptr(GDir) dir = g_dir_open (self->chats_dir, 0, NULL);
  const char *name;

  if (dir == NULL)
    return;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = NULL;
      g_autoptr(TernChat) chat = NULL;
      g_autoptr(GError) error = NULL;

      if (!g_str_has_suffix (name, ".json"))
        continue;
      path = g_build_filename (self->chats_dir, name, NULL);
      chat = tern_chat_load (path, &error);
      if (chat == NULL)
        g_warning ("%s", error->message);
      else
        g_list_store_append (self->chats, chat);
    }
  g_list_store_sort (self->chats, compare_updated, NULL);
}

static gboolean
on_close_request (TernWindow *self)
{
  /* A window closed mid-answer keeps what was generated so far. */
  if (is_generating (self))
    {
      tern_engine_worker_cancel (self->worker);
      if (self->streaming_row != NULL)
        {
          TernMessage *m = tern_chat_get_message (self->chat, self->streaming_index);
          g_free (m->text);
          m->text = g_strdup (tern_message_row_get_text (self->streaming_row));
          m->cancelled = TRUE;
        }
      save_chat (self);
    }
  /* Stop the engine thread now, while the window still exists. */
  tern_engine_worker_shutdown (self->worker);
  return FALSE;
}

static void
tern_window_dispose (GObject *object)
{
  TernWindow *self = TERN_WINDOW (object);

  g_clear_handle_id (&self->count_timeout, g_source_remove);
  if (self->worker != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->worker, self);
      tern_engine_worker_shutdown (self->worker);
      g_clear_object (&self->worker);
    }
  /* Quitting must not lose the last answer. */
  tern_chat_wait_saves ();
  gtk_widget_dispose_template (GTK_WIDGET (object), TERN_TYPE_WINDOW);
  G_OBJECT_CLASS (tern_window_parent_class)->dispose (object);
}

static void
tern_window_finalize (GObject *object)
{
  TernWindow *self = TERN_WINDOW (object);

  g_clear_object (&self->chat);
  g_clear_object (&self->chats);
  g_clear_object (&self->settings);
  g_free (self->chats_dir);
  g_free (self->model_description);
  g_free (self->pin_text);
  g_free (self->last_error);
  g_free (self->server_url);
  g_free (self->server_status);
  g_free (self->server_key);
  g_clear_pointer (&self->toasts, g_ptr_array_unref);
  g_clear_pointer (&self->attachments, g_ptr_array_unref);
  G_OBJECT_CLASS (tern_window_parent_class)->finalize (object);
}

static void
tern_window_class_init (TernWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tern_window_dispose;
  object_class->finalize = tern_window_finalize;

  window_signals[SIGNAL_SERVER_STATUS_CHANGED] =
    g_signal_new ("server-status-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 0);

  g_type_ensure (TERN_TYPE_PIN_EDITOR);
  g_type_ensure (TERN_TYPE_STATS_BAR);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tern/Tern/ui/tern-window.ui");
  gtk_widget_class_bind_template_child (widget_class, TernWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, leaflet);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, sidebar);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, chat_list);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, content);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, back_button);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, window_title);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, speculation_box);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, speculation_toggle);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, speculation_toggle_narrow);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, drafter_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, flap);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, main_stack);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, transcript_stack);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, transcript_scroller);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, message_box);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, stats_bar);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, composer);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, send_stack);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, pin_editor);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, attach_button);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, attachments_bar);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, attachments_box);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, image_tokens_spin);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, image_cost_label);
}

static void
tern_window_init (TernWindow *self)
{
  g_autoptr(GPropertyAction) show_pin = NULL;
  g_autoptr(GAction) mode = NULL;
  g_autoptr(GAction) tint = NULL;
  g_autofree char *system_prompt = NULL;
  GtkEventController *keys;
  GtkAdjustment *vadj;

  gtk_widget_init_template (GTK_WIDGET (self));

  self->settings = tern_settings_new ();
  self->toasts = g_ptr_array_new_with_free_func (g_object_unref);
  self->attachments = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  self->vision_native = -1;
  self->chats_dir = tern_chats_dir ();
  self->chats = g_list_store_new (TERN_TYPE_CHAT);
  self->worker = tern_engine_worker_new ();

  g_action_map_add_action_entries (G_ACTION_MAP (self), win_entries, G_N_ELEMENTS (win_entries),
                                   self);
  show_pin = g_property_action_new ("show-pin-panel", self->flap, "reveal-flap");
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (show_pin));
  mode = g_settings_create_action (self->settings, "mode");
  g_action_map_add_action (G_ACTION_MAP (self), mode);
  tint = g_settings_create_action (self->settings, "tint-drafted");
  g_action_map_add_action (G_ACTION_MAP (self), tint);

  g_settings_bind (self->settings, "window-width", self, "default-width", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-height", self, "default-height",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-maximized", self, "maximized",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "speculation", self->speculation_toggle, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "speculation", self->speculation_toggle_narrow, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_signal_connect_swapped (self->leaflet, "notify::folded", G_CALLBACK (on_folded), self);
  /* Only prompt lookup works without a draft file, whatever the default says. */
  /* The header starts at the default drafter; a file drafter is loaded with
   * the model (and refused there, with a toast, when its file is missing). */
  gtk_drop_down_set_selected (self->drafter_dropdown,
                              (guint) g_settings_get_enum (self->settings, "default-drafter"));
  {
    g_autoptr(GSimpleAction) drafter = g_simple_action_new_stateful (
      "drafter", G_VARIANT_TYPE_STRING,
      g_variant_new_string (drafter_nicks[selected_drafter (self)]));
    g_signal_connect (drafter, "change-state", G_CALLBACK (action_drafter), self);
    g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (drafter));
  }
  g_signal_connect_swapped (self->drafter_dropdown, "notify::selected",
                            G_CALLBACK (on_drafter_selected), self);
  g_signal_connect_object (self->settings, "changed::draft-model-path",
                           G_CALLBACK (on_draft_path_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::dflash-path",
                           G_CALLBACK (on_draft_path_changed), self, G_CONNECT_SWAPPED);

  g_signal_connect_swapped (self->worker, "model-loaded", G_CALLBACK (on_model_loaded), self);
  g_signal_connect_swapped (self->worker, "token-count", G_CALLBACK (on_token_count), self);
  g_signal_connect_swapped (self->worker, "pinned", G_CALLBACK (on_pinned), self);
  g_signal_connect_swapped (self->worker, "update", G_CALLBACK (on_update), self);
  g_signal_connect_swapped (self->worker, "finished", G_CALLBACK (on_finished), self);
  g_signal_connect_swapped (self->worker, "warning", G_CALLBACK (on_engine_warning), self);
  g_signal_connect_swapped (self->worker, "drafter-ready", G_CALLBACK (on_drafter_ready), self);
  g_signal_connect_swapped (self->worker, "server-state", G_CALLBACK (on_server_state), self);
  g_signal_connect_swapped (self->worker, "vision", G_CALLBACK (on_vision), self);
  g_settings_bind (self->settings, "image-tokens", self->image_tokens_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_signal_connect_swapped (self->image_tokens_spin, "value-changed",
                            G_CALLBACK (update_image_cost), self);
  {
    /* Anywhere on the chat: files from a file manager or image data. */
    GType types[] = { GDK_TYPE_FILE_LIST, G_TYPE_FILE, GDK_TYPE_TEXTURE };

    self->drop_target = gtk_drop_target_new (G_TYPE_INVALID, GDK_ACTION_COPY);
    gtk_drop_target_set_gtypes (self->drop_target, types, G_N_ELEMENTS (types));
    g_signal_connect (self->drop_target, "drop", G_CALLBACK (on_drop), self);
    gtk_widget_add_controller (GTK_WIDGET (self->content),
                               GTK_EVENT_CONTROLLER (self->drop_target));
  }
  g_signal_connect_object (self->settings, "changed::server-enabled",
                           G_CALLBACK (on_server_setting_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::server-port",
                           G_CALLBACK (on_server_setting_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::server-api-key",
                           G_CALLBACK (on_server_setting_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::tint-drafted", G_CALLBACK (on_tint_changed),
                           self, G_CONNECT_SWAPPED);
  g_signal_connect_object (adw_style_manager_get_default (), "notify::dark",
                           G_CALLBACK (on_dark_changed), self, G_CONNECT_SWAPPED);

  system_prompt = g_settings_get_string (self->settings, "system-prompt");
  tern_pin_editor_set_text (self->pin_editor, system_prompt);
  g_signal_connect_swapped (self->pin_editor, "changed", G_CALLBACK (on_pin_editor_changed),
                            self);

  keys = gtk_event_controller_key_new ();
  gtk_event_controller_set_propagation_phase (keys, GTK_PHASE_CAPTURE);
  g_signal_connect (keys, "key-pressed", G_CALLBACK (on_composer_key), self);
  gtk_widget_add_controller (GTK_WIDGET (self->composer), keys);

  vadj = gtk_scrolled_window_get_vadjustment (self->transcript_scroller);
  g_signal_connect (vadj, "notify::upper", G_CALLBACK (on_scroll_upper), self);
  g_signal_connect (vadj, "value-changed", G_CALLBACK (on_scroll_value), self);
  self->stick_to_bottom = TRUE;

  gtk_list_box_bind_model (self->chat_list, G_LIST_MODEL (self->chats), create_chat_row, NULL,
                           NULL);
  g_signal_connect (self->chat_list, "row-activated", G_CALLBACK (on_chat_row_activated), self);
  g_signal_connect_swapped (self->back_button, "clicked", G_CALLBACK (on_back_clicked), self);
  g_signal_connect (self, "close-request", G_CALLBACK (on_close_request), NULL);

  load_chats (self);
  new_chat (self);
  gtk_stack_set_visible_child_name (self->main_stack, "no-model");
  update_actions (self);
}

/* --------------------------------------------------------------- queries */

TernWindow *
tern_window_new (GtkApplication *application)
{
  return g_object_new (TERN_TYPE_WINDOW, "application", application, NULL);
}

gboolean
tern_window_has_model (TernWindow *self)
{
  return self->model_loaded;
}

gboolean
tern_window_is_loading (TernWindow *self)
{
  return self->load_id != 0;
}

gboolean
tern_window_is_pinning (TernWindow *self)
{
  return self->pin_id != 0;
}

gboolean
tern_window_is_preparing_drafter (TernWindow *self)
{
  return self->drafter_id != 0;
}

gboolean
tern_window_is_generating (TernWindow *self)
{
  return is_generating (self);
}

const char *
tern_window_get_page (TernWindow *self)
{
  return gtk_stack_get_visible_child_name (self->main_stack);
}

const char *
tern_window_get_model_description (TernWindow *self)
{
  return self->model_description;
}

const char *
tern_window_get_last_error (TernWindow *self)
{
  return self->last_error;
}

TernChat *
tern_window_get_chat (TernWindow *self)
{
  return self->chat;
}

GListModel *
tern_window_get_chats (TernWindow *self)
{
  return G_LIST_MODEL (self->chats);
}

TernPinEditor *
tern_window_get_pin_editor (TernWindow *self)
{
  return self->pin_editor;
}

TernStatsBar *
tern_window_get_stats_bar (TernWindow *self)
{
  return self->stats_bar;
}

GtkWidget *
tern_window_get_speculation_box (TernWindow *self)
{
  return GTK_WIDGET (self->speculation_box);
}

const char *
tern_window_get_row_text (TernWindow *self,
                          guint       index)
{
  TernMessageRow *row = row_at (self, index);

  return row ? tern_message_row_get_text (row) : NULL;
}

GtkWidget *
tern_window_get_row (TernWindow *self,
                     guint       index)
{
  return (GtkWidget *) row_at (self, index);
}

guint
tern_window_get_n_rows (TernWindow *self)
{
  guint n = 0;

  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->message_box)); c;
       c = gtk_widget_get_next_sibling (c))
    n++;
  return n;
}

void
tern_window_set_composer_text (TernWindow *self,
                               const char *text)
{
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->composer), text ? text : "", -1);
}

char *
tern_window_get_composer_text (TernWindow *self)
{
  return composer_text (self);
}
