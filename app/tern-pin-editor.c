/* tern-pin-editor.c */
#include "config.h"

#include <glib/gi18n.h>

#include "tern-pin-editor.h"

struct _TernPinEditor {
  GtkBox parent_instance;

  GtkTextView *text_view;
  GtkLabel *token_label;
  GtkButton *pin_button;
  GtkProgressBar *progress_bar;
  GtkImage *state_icon;
  GtkLabel *state_label;

  char *pinned_text;
  TernPinState state;
  gboolean has_state;
  gboolean pinning;
  char *error;
  int token_count;
};

G_DEFINE_FINAL_TYPE (TernPinEditor, tern_pin_editor, GTK_TYPE_BOX)

enum {
  SIGNAL_CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

gboolean
tern_pin_editor_is_stale (TernPinEditor *self)
{
  g_autofree char *text = tern_pin_editor_get_text (self);

  return self->has_state && g_strcmp0 (text, self->pinned_text) != 0;
}

static void
set_state (TernPinEditor *self,
           const char    *icon,
           const char    *css,
           const char    *text)
{
  gtk_image_set_from_icon_name (self->state_icon, icon);
  gtk_label_set_text (self->state_label, text);
  gtk_widget_remove_css_class (GTK_WIDGET (self->state_label), "success");
  gtk_widget_remove_css_class (GTK_WIDGET (self->state_label), "warning");
  gtk_widget_remove_css_class (GTK_WIDGET (self->state_label), "error");
  if (css != NULL)
    gtk_widget_add_css_class (GTK_WIDGET (self->state_label), css);
}

static void
update_state (TernPinEditor *self)
{
  /* The Pin button asks for attention only when pinning would change
   * something: nothing pinned yet, an edit since, or a failed pin. */
  if (!self->pinning && (!self->has_state || self->error != NULL || tern_pin_editor_is_stale (self)))
    gtk_widget_add_css_class (GTK_WIDGET (self->pin_button), "suggested-action");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (self->pin_button), "suggested-action");
  if (self->pinning)
    set_state (self, "content-loading-symbolic", NULL, _("Pinning…"));
  else if (self->error != NULL)
    set_state (self, "dialog-error-symbolic", "error", self->error);
  else if (!self->has_state)
    set_state (self, "dialog-information-symbolic", NULL,
               _("Not pinned yet: the first request prefills the system prompt."));
  else if (tern_pin_editor_is_stale (self))
    set_state (self, "dialog-warning-symbolic", "warning",
               _("Edited since it was pinned: pin again to use the new text."));
  else
    {
      g_autofree char *text = NULL;

      if (self->state.loaded_from_snapshot)
        text = g_strdup_printf (_("Pinned: %d tokens, loaded from snapshot in %.0f ms. %d tokens free."),
                                self->state.n_pin, self->state.prefill_ms, self->state.n_free);
      else
        text = g_strdup_printf (_("Pinned: %d tokens, prefilled in %.0f ms. %d tokens free."),
                                self->state.n_pin, self->state.prefill_ms, self->state.n_free);
      set_state (self, "view-pin-symbolic", "success", text);
    }
}

static void
on_buffer_changed (TernPinEditor *self)
{
  g_clear_pointer (&self->error, g_free);
  update_state (self);
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
}

char *
tern_pin_editor_get_text (TernPinEditor *self)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->text_view);
  GtkTextIter start, end;

  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

void
tern_pin_editor_set_text (TernPinEditor *self,
                          const char    *text)
{
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->text_view), text ? text : "", -1);
}

void
tern_pin_editor_set_token_count (TernPinEditor *self,
                                 int            n_tokens)
{
  g_autofree char *text = NULL;

  self->token_count = n_tokens;
  if (n_tokens < 0)
    {
      gtk_label_set_text (self->token_label, "");
      return;
    }
  text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%'d token", "%'d tokens", n_tokens),
                          n_tokens);
  gtk_label_set_text (self->token_label, text);
}

void
tern_pin_editor_set_pinning (TernPinEditor *self,
                             gboolean       pinning)
{
  self->pinning = pinning;
  gtk_widget_set_visible (GTK_WIDGET (self->progress_bar), pinning);
  if (pinning)
    {
      g_clear_pointer (&self->error, g_free);
      gtk_progress_bar_set_fraction (self->progress_bar, 0);
      gtk_progress_bar_set_text (self->progress_bar, NULL);
    }
  update_state (self);
}

void
tern_pin_editor_set_progress (TernPinEditor *self,
                              int            done,
                              int            total)
{
  g_autofree char *text = NULL;

  if (total <= 0)
    return;
  gtk_progress_bar_set_fraction (self->progress_bar, (double) done / total);
  /* Translators: prefill progress of the system prompt, in tokens */
  text = g_strdup_printf (_("%d of %d tokens"), done, total);
  gtk_progress_bar_set_text (self->progress_bar, text);
}

void
tern_pin_editor_set_pinned (TernPinEditor      *self,
                            const char         *text,
                            const TernPinState *state)
{
  g_free (self->pinned_text);
  self->pinned_text = g_strdup (text);
  self->has_state = state != NULL;
  if (state != NULL)
    self->state = *state;
  g_clear_pointer (&self->error, g_free);
  update_state (self);
}

void
tern_pin_editor_set_error (TernPinEditor *self,
                           const char    *message)
{
  g_free (self->error);
  self->error = g_strdup (message);
  update_state (self);
}

const char *
tern_pin_editor_get_pinned_text (TernPinEditor *self)
{
  return self->has_state ? self->pinned_text : NULL;
}

int
tern_pin_editor_get_token_count (TernPinEditor *self)
{
  return self->token_count;
}

const char *
tern_pin_editor_get_state_text (TernPinEditor *self)
{
  return gtk_label_get_text (self->state_label);
}

static void
tern_pin_editor_dispose (GObject *object)
{
  gtk_widget_dispose_template (GTK_WIDGET (object), TERN_TYPE_PIN_EDITOR);
  G_OBJECT_CLASS (tern_pin_editor_parent_class)->dispose (object);
}

static void
tern_pin_editor_finalize (GObject *object)
{
  TernPinEditor *self = TERN_PIN_EDITOR (object);

  g_free (self->pinned_text);
  g_free (self->error);
  G_OBJECT_CLASS (tern_pin_editor_parent_class)->finalize (object);
}

static void
tern_pin_editor_class_init (TernPinEditorClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tern_pin_editor_dispose;
  object_class->finalize = tern_pin_editor_finalize;

  signals[SIGNAL_CHANGED] =
    g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tern/Tern/ui/tern-pin-editor.ui");
  gtk_widget_class_bind_template_child (widget_class, TernPinEditor, text_view);
  gtk_widget_class_bind_template_child (widget_class, TernPinEditor, token_label);
  gtk_widget_class_bind_template_child (widget_class, TernPinEditor, pin_button);
  gtk_widget_class_bind_template_child (widget_class, TernPinEditor, progress_bar);
  gtk_widget_class_bind_template_child (widget_class, TernPinEditor, state_icon);
  gtk_widget_class_bind_template_child (widget_class, TernPinEditor, state_label);
}

static void
tern_pin_editor_init (TernPinEditor *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->token_count = -1;
  g_signal_connect_swapped (gtk_text_view_get_buffer (self->text_view), "changed",
                            G_CALLBACK (on_buffer_changed), self);
  update_state (self);
}

static gboolean
label_fits (GtkLabel *label)
{
  GtkWidget *widget = GTK_WIDGET (label);
  GtkWidget *root = GTK_WIDGET (gtk_widget_get_root (widget));
  graphene_rect_t bounds;
  int text_width;

  if (!gtk_widget_get_mapped (widget) || root == NULL)
    return TRUE; /* not shown: nothing is cut */
  if (pango_layout_is_ellipsized (gtk_label_get_layout (label)))
    return FALSE;
  pango_layout_get_pixel_size (gtk_label_get_layout (label), &text_width, NULL);
  if (text_width > gtk_widget_get_width (widget))
    return FALSE;
  if (!gtk_widget_compute_bounds (widget, root, &bounds))
    return FALSE;
  return bounds.origin.x >= 0 && bounds.origin.x + bounds.size.width <= gtk_widget_get_width (root);
}

gboolean
tern_pin_editor_state_fits (TernPinEditor *self)
{
  return label_fits (self->state_label) && label_fits (self->token_label);
}
