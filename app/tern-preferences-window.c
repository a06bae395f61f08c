/* tern-preferences-window.c: every control bound to its GSettings key. */
#include "config.h"

#include <glib/gi18n.h>

#include "tern-preferences-window.h"

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
  return self;
}
