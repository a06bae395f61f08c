/* tern-preferences-window.c: every control bound to its GSettings key. */
#include "config.h"

#include <glib/gi18n.h>

#include "tern-preferences-window.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-connections.h"
#endif

struct _TernPreferencesWindow {
  AdwPreferencesWindow parent_instance;

  GtkSpinButton *temperature_spin;
  GtkSpinButton *top_p_spin;
  GtkSpinButton *seed_spin;
  GtkSpinButton *max_tokens_spin;
  GtkSwitch *thinking_switch;
  AdwComboRow *drafter_row;
  GtkSpinButton *draft_length_spin;
  GtkSpinButton *threads_spin;
  GtkSpinButton *context_spin;
  AdwEntryRow *demo_model_row;
  AdwActionRow *draft_model_row;
  GtkButton *draft_model_choose;
  GtkButton *draft_model_clear;
  AdwActionRow *dflash_row;
  GtkButton *dflash_choose;
  GtkButton *dflash_clear;
  AdwActionRow *server_row;
  GtkSwitch *server_switch;
  GtkSpinButton *server_port_spin;
  AdwEntryRow *server_key_row;

  GSettings *settings;
#ifdef TERN_HAVE_MANAGER
  /* Connections (docs/REMOTE.md): one row per server, rebuilt when the
   * list changes; tests run while the window lives. */
  AdwPreferencesGroup *connections_group;
  AdwEntryRow *connection_url_row;
  AdwPasswordEntryRow *connection_key_row;
  GtkLabel *connection_message;
  GPtrArray *connection_rows;
  GCancellable *cancellable;
#endif
};

G_DEFINE_FINAL_TYPE (TernPreferencesWindow, tern_preferences_window,
                     ADW_TYPE_PREFERENCES_WINDOW)

static void
on_drafter_selected (TernPreferencesWindow *self)
{
  g_settings_set_enum (self->settings, "default-drafter",
                       (int) adw_combo_row_get_selected (self->drafter_row));
}

/* The row shows the file's name; its tooltip the whole path. */
static void
show_path (TernPreferencesWindow *self,
           const char            *key)
{
  gboolean dflash = g_str_equal (key, "dflash-path");
  AdwActionRow *row = dflash ? self->dflash_row : self->draft_model_row;
  GtkWidget *clear = GTK_WIDGET (dflash ? self->dflash_clear : self->draft_model_clear);
  g_autofree char *path = g_settings_get_string (self->settings, key);

  if (*path == '\0')
    {
      adw_action_row_set_subtitle (row, dflash ? _("None chosen: a DFlash draft GGUF made for the loaded model")
                                               : _("None chosen: a smaller GGUF model with the same vocabulary"));
      gtk_widget_set_tooltip_text (GTK_WIDGET (row), NULL);
    }
  else
    {
      g_autofree char *name = g_path_get_basename (path);
      g_autofree char *escaped = g_markup_escape_text (name, -1);

      adw_action_row_set_subtitle (row, escaped);
      gtk_widget_set_tooltip_text (GTK_WIDGET (row), path);
    }
  gtk_widget_set_visible (clear, *path != '\0');
}

static void
on_path_changed (TernPreferencesWindow *self,
                 const char            *key)
{
  show_path (self, key);
}

static void
on_file_response (GtkNativeDialog *dialog,
                  int              response,
                  gpointer         data)
{
  TernPreferencesWindow *self = data;
  const char *key = g_object_get_data (G_OBJECT (dialog), "tern-key");

  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      g_autofree char *path = file ? g_file_get_path (file) : NULL;

      if (path != NULL)
        g_settings_set_string (self->settings, key, path);
    }
  g_object_unref (dialog);
  g_object_unref (self);
}

static void
choose_file (TernPreferencesWindow *self,
             const char            *key,
             const char            *title)
{
  GtkFileChooserNative *dialog;
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();
  g_autofree char *current = g_settings_get_string (self->settings, key);

  dialog = gtk_file_chooser_native_new (title, GTK_WINDOW (self), GTK_FILE_CHOOSER_ACTION_OPEN,
                                        _("_Choose"), _("_Cancel"));
  gtk_file_filter_set_name (filter, _("GGUF models"));
  gtk_file_filter_add_pattern (filter, "*.gguf");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
  if (*current != '\0')
    {
      g_autoptr(GFile) file = g_file_new_for_path (current);
      gtk_file_chooser_set_file (GTK_FILE_CHOOSER (dialog), file, NULL);
    }
  g_object_set_data (G_OBJECT (dialog), "tern-key", (gpointer) key);
  g_signal_connect (dialog, "response", G_CALLBACK (on_file_response), g_object_ref (self));
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

static void
on_draft_model_choose (TernPreferencesWindow *self)
{
  choose_file (self, "draft-model-path", _("Choose a Draft Model"));
}

static void
on_dflash_choose (TernPreferencesWindow *self)
{
  choose_file (self, "dflash-path", _("Choose a DFlash Draft"));
}

static void
on_draft_model_clear (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "draft-model-path", "");
}

static void
on_dflash_clear (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "dflash-path", "");
}

static void
on_server_key_apply (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "server-api-key",
                         gtk_editable_get_text (GTK_EDITABLE (self->server_key_row)));
}

void
tern_preferences_window_set_server_status (TernPreferencesWindow *self,
                                           const char            *status)
{
  g_autofree char *escaped = g_markup_escape_text (status ? status : "", -1);

  g_return_if_fail (TERN_IS_PREFERENCES_WINDOW (self));
  adw_action_row_set_subtitle (self->server_row, escaped);
}

static void
on_demo_model_apply (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "demo-model-path",
                         gtk_editable_get_text (GTK_EDITABLE (self->demo_model_row)));
}

#ifdef TERN_HAVE_MANAGER
/* ---- connections ----------------------------------------------------------- */

static void show_connections (TernPreferencesWindow *self);

static void
connection_message (TernPreferencesWindow *self,
                    const char            *text,
                    gboolean               is_error)
{
  gtk_label_set_text (self->connection_message, text ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (self->connection_message), text != NULL && *text != '\0');
  if (is_error)
    gtk_widget_add_css_class (GTK_WIDGET (self->connection_message), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (self->connection_message), "error");
}

static void
on_test_done (GObject      *source,
              GAsyncResult *result,
              gpointer      data)
{
  AdwActionRow *row = data;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) models = tern_connections_list_models_finish (result, &error);
  g_autofree char *text = NULL;
  g_autofree char *list = NULL;

  (void) source;
  /* The window closed meanwhile: its rows are gone. */
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_object_unref (row);
      return;
    }
  if (models == NULL)
    text = g_strdup (error->message);
  else
    {
      list = g_strjoinv (", ", models);
      /* Translators: "3 models: qwen3-32b, llama-70b, ..." */
      text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "Connected: %u model: %s",
                                           "Connected: %u models: %s", g_strv_length (models)),
                              g_strv_length (models), list);
    }
  {
    g_autofree char *escaped = g_markup_escape_text (text, -1);
    adw_action_row_set_subtitle (row, escaped);
  }
  if (models == NULL)
    gtk_widget_add_css_class (GTK_WIDGET (row), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (row), "error");
  g_object_unref (row);
}

static void
on_connection_test (GtkButton *button,
                    gpointer   data)
{
  TernPreferencesWindow *self = data;
  AdwActionRow *row = g_object_get_data (G_OBJECT (button), "tern-row");
  const char *url = g_object_get_data (G_OBJECT (row), "tern-url");

  adw_action_row_set_subtitle (row, _("Testing…"));
  tern_connections_list_models_async (url, self->cancellable, on_test_done, g_object_ref (row));
}

static void
on_connection_remove (GtkButton *button,
                      gpointer   data)
{
  TernPreferencesWindow *self = data;
  AdwActionRow *row = g_object_get_data (G_OBJECT (button), "tern-row");
  g_autofree char *url = g_strdup (g_object_get_data (G_OBJECT (row), "tern-url"));

  tern_connections_remove (self->settings, url);
}

static void
on_connection_add (TernPreferencesWindow *self)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *url = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->connection_url_row))));
  const char *key = gtk_editable_get_text (GTK_EDITABLE (self->connection_key_row));
  g_autofree char *added = NULL;

  if (*url == '\0')
    return;
  if (!tern_connections_add (self->settings, url, key, &added, &error))
    {
      connection_message (self, error->message, TRUE);
      return;
    }
  connection_message (self, NULL, FALSE);
  gtk_editable_set_text (GTK_EDITABLE (self->connection_url_row), "");
  gtk_editable_set_text (GTK_EDITABLE (self->connection_key_row), "");
  /* Test it right away: the row says whether address and key work. */
  for (guint i = 0; i < self->connection_rows->len; i++)
    {
      AdwActionRow *row = g_ptr_array_index (self->connection_rows, i);
      if (g_strcmp0 (g_object_get_data (G_OBJECT (row), "tern-url"), added) == 0)
        {
          adw_action_row_set_subtitle (row, _("Testing…"));
          tern_connections_list_models_async (added, self->cancellable, on_test_done,
                                              g_object_ref (row));
        }
    }
}

static void
show_connections (TernPreferencesWindow *self)
{
  g_auto(GStrv) urls = g_settings_get_strv (self->settings, "remote-connections");

  for (guint i = 0; i < self->connection_rows->len; i++)
    adw_preferences_group_remove (self->connections_group,
                                  g_ptr_array_index (self->connection_rows, i));
  g_ptr_array_set_size (self->connection_rows, 0);
  for (guint i = 0; urls[i] != NULL; i++)
    {
      GtkWidget *row = adw_action_row_new ();
      GtkWidget *test = gtk_button_new_with_mnemonic (_("_Test"));
      GtkWidget *remove = gtk_button_new_from_icon_name ("user-trash-symbolic");
      g_autofree char *escaped = g_markup_escape_text (urls[i], -1);

      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), escaped);
      adw_action_row_set_subtitle (ADW_ACTION_ROW (row), _("Not tested yet"));
      g_object_set_data_full (G_OBJECT (row), "tern-url", g_strdup (urls[i]), g_free);
      gtk_widget_set_valign (test, GTK_ALIGN_CENTER);
      gtk_widget_set_valign (remove, GTK_ALIGN_CENTER);
      gtk_widget_add_css_class (remove, "flat");
      gtk_widget_set_tooltip_text (remove, _("Remove this server and its key"));
      g_object_set_data (G_OBJECT (test), "tern-row", row);
      g_object_set_data (G_OBJECT (remove), "tern-row", row);
      g_signal_connect (test, "clicked", G_CALLBACK (on_connection_test), self);
      g_signal_connect (remove, "clicked", G_CALLBACK (on_connection_remove), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), test);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), remove);
      adw_preferences_group_add (self->connections_group, row);
      g_ptr_array_add (self->connection_rows, row);
    }
}

static void
add_connections_page (TernPreferencesWindow *self)
{
  AdwPreferencesPage *page = ADW_PREFERENCES_PAGE (adw_preferences_page_new ());
  AdwPreferencesGroup *add = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  GtkWidget *button = gtk_button_new_with_mnemonic (_("_Add"));
  GtkWidget *label = gtk_label_new (NULL);
  const gboolean env_key = g_getenv ("TERN_REMOTE_API_KEY") != NULL;

  adw_preferences_page_set_title (page, _("Connections"));
  adw_preferences_page_set_icon_name (page, "network-server-symbolic");
  adw_preferences_group_set_title (add, _("Remote Servers"));
  adw_preferences_group_set_description (
    add, _("OpenAI-compatible servers (vLLM, llama-server, Ollama, tern-cli serve) whose models "
           "the model picker lists beside the local ones. The pinned system prompt is sent first "
           "in every request, and the server's cached tokens show in the stats."));
  self->connection_url_row = ADW_ENTRY_ROW (adw_entry_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->connection_url_row),
                                 _("Server address, such as http://gpu-box:8000/v1"));
  self->connection_key_row = ADW_PASSWORD_ENTRY_ROW (adw_password_entry_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->connection_key_row),
                                 _("API key (optional)"));
  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (button, "suggested-action");
  adw_entry_row_add_suffix (self->connection_url_row, button);
  g_signal_connect_swapped (button, "clicked", G_CALLBACK (on_connection_add), self);
  g_signal_connect_swapped (self->connection_url_row, "entry-activated",
                            G_CALLBACK (on_connection_add), self);
  adw_preferences_group_add (add, GTK_WIDGET (self->connection_url_row));
  adw_preferences_group_add (add, GTK_WIDGET (self->connection_key_row));

  /* Where keys go, and when they cannot be kept. */
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_widget_add_css_class (label, "dim-label");
  gtk_widget_set_margin_top (label, 12);
  if (env_key)
    gtk_label_set_text (GTK_LABEL (label),
                        _("The API key comes from TERN_REMOTE_API_KEY in the environment."));
  else if (!tern_connections_keyring_built ())
    gtk_label_set_text (GTK_LABEL (label),
                        _("This build cannot keep API keys (no libsecret): only servers without "
                          "a key work, or set TERN_REMOTE_API_KEY."));
  else
    gtk_label_set_text (GTK_LABEL (label),
                        _("API keys are kept in the system keyring, never in the settings. Without "
                          "a keyring service (a bare session), adding a key fails: set "
                          "TERN_REMOTE_API_KEY instead."));
  adw_preferences_group_add (add, label);
  self->connection_message = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_wrap (self->connection_message, TRUE);
  gtk_label_set_xalign (self->connection_message, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->connection_message), FALSE);
  adw_preferences_group_add (add, GTK_WIDGET (self->connection_message));

  self->connections_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->connections_group, _("Servers"));
  adw_preferences_page_add (page, add);
  adw_preferences_page_add (page, self->connections_group);
  adw_preferences_window_add (ADW_PREFERENCES_WINDOW (self), page);

  self->connection_rows = g_ptr_array_new ();
  self->cancellable = g_cancellable_new ();
  show_connections (self);
  g_signal_connect_object (self->settings, "changed::remote-connections",
                           G_CALLBACK (show_connections), self, G_CONNECT_SWAPPED);
}

static void
tern_preferences_window_dispose (GObject *object)
{
  TernPreferencesWindow *self = TERN_PREFERENCES_WINDOW (object);

  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_pointer (&self->connection_rows, g_ptr_array_unref);
  G_OBJECT_CLASS (tern_preferences_window_parent_class)->dispose (object);
}
#endif

static void
tern_preferences_window_finalize (GObject *object)
{
  TernPreferencesWindow *self = TERN_PREFERENCES_WINDOW (object);

  g_clear_object (&self->settings);
  G_OBJECT_CLASS (tern_preferences_window_parent_class)->finalize (object);
}

static void
tern_preferences_window_class_init (TernPreferencesWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->finalize = tern_preferences_window_finalize;
#ifdef TERN_HAVE_MANAGER
  object_class->dispose = tern_preferences_window_dispose;
#endif
  gtk_widget_class_set_template_from_resource (
    widget_class, "/io/github/tern/Tern/ui/tern-preferences-window.ui");
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, temperature_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, top_p_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, seed_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, max_tokens_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, thinking_switch);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, drafter_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, draft_length_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, threads_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, context_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, demo_model_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, draft_model_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, draft_model_choose);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, draft_model_clear);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, dflash_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, dflash_choose);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, dflash_clear);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, server_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, server_switch);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, server_port_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, server_key_row);
}

static void
tern_preferences_window_init (TernPreferencesWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
}

TernPreferencesWindow *
tern_preferences_window_new (GtkWindow *parent,
                             GSettings *settings)
{
  TernPreferencesWindow *self = g_object_new (TERN_TYPE_PREFERENCES_WINDOW,
                                              "transient-for", parent, NULL);
  g_autofree char *demo = NULL;

  self->settings = g_object_ref (settings);
  g_settings_bind (settings, "temperature", self->temperature_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "top-p", self->top_p_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "seed", gtk_spin_button_get_adjustment (self->seed_spin), "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "max-tokens", self->max_tokens_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "thinking", self->thinking_switch, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "draft-length", self->draft_length_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "threads", self->threads_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "context-size", self->context_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  adw_combo_row_set_selected (self->drafter_row,
                              (guint) g_settings_get_enum (settings, "default-drafter"));
  g_signal_connect_swapped (self->drafter_row, "notify::selected",
                            G_CALLBACK (on_drafter_selected), self);
  demo = g_settings_get_string (settings, "demo-model-path");
  gtk_editable_set_text (GTK_EDITABLE (self->demo_model_row), demo);
  g_signal_connect_swapped (self->demo_model_row, "apply", G_CALLBACK (on_demo_model_apply),
                            self);
  g_settings_bind (settings, "server-enabled", self->server_switch, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "server-port", self->server_port_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  {
    g_autofree char *key = g_settings_get_string (settings, "server-api-key");
    gtk_editable_set_text (GTK_EDITABLE (self->server_key_row), key);
  }
  g_signal_connect_swapped (self->server_key_row, "apply", G_CALLBACK (on_server_key_apply),
                            self);
  show_path (self, "draft-model-path");
  show_path (self, "dflash-path");
  g_signal_connect_object (settings, "changed::draft-model-path", G_CALLBACK (on_path_changed),
                           self, G_CONNECT_SWAPPED);
  g_signal_connect_object (settings, "changed::dflash-path", G_CALLBACK (on_path_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_swapped (self->draft_model_choose, "clicked",
                            G_CALLBACK (on_draft_model_choose), self);
  g_signal_connect_swapped (self->dflash_choose, "clicked", G_CALLBACK (on_dflash_choose), self);
  g_signal_connect_swapped (self->draft_model_clear, "clicked",
                            G_CALLBACK (on_draft_model_clear), self);
  g_signal_connect_swapped (self->dflash_clear, "clicked", G_CALLBACK (on_dflash_clear), self);
#ifdef TERN_HAVE_MANAGER
  add_connections_page (self);
#endif
  return self;
}
