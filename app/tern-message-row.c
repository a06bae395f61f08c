/* tern-message-row.c */
#include "config.h"

#include <glib/gi18n.h>

#include "tern-markdown.h"
#include "tern-message-row.h"

struct _TernMessageRow {
  GtkBox parent_instance;

  GtkLabel *role_label;
  GtkButton *copy_button;
  GtkButton *edit_button;
  GtkButton *regenerate_button;
  GtkBox *content_box;
  GtkLabel *error_label;
  GtkLabel *stats_label;

  char *role;
  GString *text;
  guint render_tick;
  gint64 last_render_us;
};

/* A streaming answer is re-rendered at most this often: each render
 * re-shapes its last paragraph, and 20 a second reads as smooth. */
#define MIN_RENDER_INTERVAL_US (50 * 1000)

G_DEFINE_FINAL_TYPE (TernMessageRow, tern_message_row, GTK_TYPE_BOX)

static void render (TernMessageRow *self);

void
tern_message_row_flush (TernMessageRow *self)
{
  if (self->render_tick != 0)
    {
      gtk_widget_remove_tick_callback (GTK_WIDGET (self), self->render_tick);
      self->render_tick = 0;
    }
  render (self);
}

/* Markdown draws nothing for an answer of blank lines (a random-weight
 * model's favourite); say so rather than show an empty bubble. */
static void
render (TernMessageRow *self)
{
  tern_markdown_render (self->content_box, self->text->str);
  if (gtk_widget_get_first_child (GTK_WIDGET (self->content_box)) == NULL && self->text->len > 0)
    {
      GtkWidget *label = gtk_label_new (_("(only blank lines)"));

      gtk_label_set_xalign (GTK_LABEL (label), 0);
      gtk_widget_add_css_class (label, "dim-label");
      gtk_box_append (self->content_box, label);
    }
}

static gboolean
on_render_tick (GtkWidget     *widget,
                GdkFrameClock *clock,
                gpointer       data)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (widget);
  gint64 now = gdk_frame_clock_get_frame_time (clock);

  (void) data;
  if (now - self->last_render_us < MIN_RENDER_INTERVAL_US)
    return G_SOURCE_CONTINUE;
  self->render_tick = 0;
  self->last_render_us = now;
  render (self);
  return G_SOURCE_REMOVE;
}

/* However many token updates arrive in a frame, Markdown is parsed once. */
static void
queue_render (TernMessageRow *self)
{
  if (self->render_tick == 0)
    self->render_tick = gtk_widget_add_tick_callback (GTK_WIDGET (self), on_render_tick, NULL,
                                                      NULL);
}

const char *
tern_message_row_get_role (TernMessageRow *self)
{
  return self->role;
}

const char *
tern_message_row_get_text (TernMessageRow *self)
{
  return self->text->str;
}

void
tern_message_row_set_text (TernMessageRow *self,
                           const char     *text)
{
  g_string_assign (self->text, text ? text : "");
  queue_render (self);
}

void
tern_message_row_append (TernMessageRow *self,
                         const char     *text)
{
  if (text == NULL || *text == '\0')
    return;
  g_string_append (self->text, text);
  queue_render (self);
}

void
tern_message_row_set_stats (TernMessageRow *self,
                            const char     *stats)
{
  gtk_label_set_text (self->stats_label, stats ? stats : "");
  gtk_widget_set_visible (GTK_WIDGET (self->stats_label), stats != NULL && *stats);
}

void
tern_message_row_set_error (TernMessageRow *self,
                            const char     *error)
{
  gtk_label_set_text (self->error_label, error ? error : "");
  gtk_widget_set_visible (GTK_WIDGET (self->error_label), error != NULL && *error);
}

void
tern_message_row_set_last (TernMessageRow *self,
                           gboolean        last)
{
  gboolean user = g_strcmp0 (self->role, "user") == 0;

  gtk_widget_set_visible (GTK_WIDGET (self->edit_button), last && user);
  gtk_widget_set_visible (GTK_WIDGET (self->regenerate_button), last && !user);
}

static void
on_copy_clicked (TernMessageRow *self)
{
  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (self)), self->text->str);
  gtk_widget_activate_action (GTK_WIDGET (self), "win.show-toast", "s", _("Message copied"));
}

static void
tern_message_row_dispose (GObject *object)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (object);

  if (self->render_tick != 0)
    {
      gtk_widget_remove_tick_callback (GTK_WIDGET (self), self->render_tick);
      self->render_tick = 0;
    }
  gtk_widget_dispose_template (GTK_WIDGET (object), TERN_TYPE_MESSAGE_ROW);
  G_OBJECT_CLASS (tern_message_row_parent_class)->dispose (object);
}

static void
tern_message_row_finalize (GObject *object)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (object);

  g_free (self->role);
  g_string_free (self->text, TRUE);
  G_OBJECT_CLASS (tern_message_row_parent_class)->finalize (object);
}

static void
tern_message_row_class_init (TernMessageRowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tern_message_row_dispose;
  object_class->finalize = tern_message_row_finalize;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tern/Tern/ui/tern-message-row.ui");
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, role_label);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, copy_button);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, edit_button);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, regenerate_button);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, content_box);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, error_label);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, stats_label);
}

static void
tern_message_row_init (TernMessageRow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->text = g_string_new (NULL);
  g_signal_connect_swapped (self->copy_button, "clicked", G_CALLBACK (on_copy_clicked), self);
}

TernMessageRow *
tern_message_row_new (const char *role,
                      const char *text)
{
  TernMessageRow *self = g_object_new (TERN_TYPE_MESSAGE_ROW, NULL);
  gboolean user = g_strcmp0 (role, "user") == 0;

  self->role = g_strdup (role);
  gtk_label_set_text (self->role_label, user ? _("You") : _("Assistant"));
  gtk_widget_add_css_class (GTK_WIDGET (self), user ? "user" : "assistant");
  if (user)
    gtk_widget_add_css_class (GTK_WIDGET (self), "card");
  tern_message_row_set_text (self, text);
  tern_message_row_flush (self);
  return self;
}
