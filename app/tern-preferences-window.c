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
  AdwEntryRow *demo_model_row;

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

static void
on_demo_model_apply (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "demo-model-path",
                         gtk_editable_get_text (GTK_EDITABLE (self->demo_model_row)));
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
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, demo_model_row);
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
  return self;
}
