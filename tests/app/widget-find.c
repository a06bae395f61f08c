/* widget-find.c: see widget-find.h. */
#include "widget-find.h"

#include <string.h>

static GtkWidget *
walk (GtkWidget      *widget,
      gboolean        visible_only,
      WidgetPredicate pred,
      gconstpointer   data)
{
  if (visible_only && !gtk_widget_get_visible (widget))
    return NULL;
  if (pred (widget, data))
    return widget;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *found = walk (c, visible_only, pred, data);

      if (found != NULL)
        return found;
    }
  return NULL;
}

GtkWidget *
find_widget_where (GtkWidget      *widget,
                   WidgetPredicate pred,
                   gconstpointer   data)
{
  return walk (widget, FALSE, pred, data);
}

GtkWidget *
find_visible_widget_where (GtkWidget      *widget,
                           WidgetPredicate pred,
                           gconstpointer   data)
{
  return walk (widget, TRUE, pred, data);
}

gboolean
widget_is_of_type (GtkWidget    *widget,
                   gconstpointer type)
{
  return G_TYPE_CHECK_INSTANCE_TYPE (widget, (GType) GPOINTER_TO_SIZE (type));
}

gboolean
widget_is_label_with (GtkWidget    *widget,
                      gconstpointer part)
{
  return GTK_IS_LABEL (widget) && strstr (gtk_label_get_text (GTK_LABEL (widget)), part) != NULL;
}

gboolean
widget_is_label_showing (GtkWidget    *widget,
                         gconstpointer text)
{
  return GTK_IS_LABEL (widget) && g_strcmp0 (gtk_label_get_text (GTK_LABEL (widget)), text) == 0;
}

gboolean
widget_is_mapped_label_with (GtkWidget    *widget,
                             gconstpointer part)
{
  return widget_is_label_with (widget, part) && gtk_widget_get_mapped (widget);
}

gboolean
widget_is_label_with_class (GtkWidget    *widget,
                            gconstpointer css_class)
{
  return GTK_IS_LABEL (widget) && gtk_widget_has_css_class (widget, css_class);
}

gboolean
widget_is_button_labelled (GtkWidget    *widget,
                           gconstpointer label)
{
  return GTK_IS_BUTTON (widget) && g_strcmp0 (gtk_button_get_label (GTK_BUTTON (widget)), label) == 0;
}

gboolean
widget_is_button_by_tooltip (GtkWidget    *widget,
                             gconstpointer tooltip)
{
  return GTK_IS_BUTTON (widget) && g_strcmp0 (gtk_widget_get_tooltip_text (widget), tooltip) == 0;
}

gboolean
widget_is_action_row_titled (GtkWidget    *widget,
                             gconstpointer title)
{
  return ADW_IS_ACTION_ROW (widget)
         && g_strcmp0 (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)), title) == 0;
}

GtkWidget *
find_of_type (GtkWidget *widget,
              GType      type)
{
  return find_widget_where (widget, widget_is_of_type, GSIZE_TO_POINTER (type));
}

GtkWidget *
find_label_with (GtkWidget  *widget,
                 const char *part)
{
  return find_widget_where (widget, widget_is_label_with, part);
}

GtkWidget *
find_label_showing (GtkWidget  *widget,
                    const char *text)
{
  return find_widget_where (widget, widget_is_label_showing, text);
}

GtkWidget *
find_mapped_label (GtkWidget  *widget,
                   const char *part)
{
  return find_widget_where (widget, widget_is_mapped_label_with, part);
}

GtkWidget *
find_label_with_class (GtkWidget  *widget,
                       const char *css_class)
{
  return find_widget_where (widget, widget_is_label_with_class, css_class);
}

GtkLabel *
find_figures_label (GtkWidget  *widget,
                    const char *text)
{
  if (*text == '\0')
    return NULL;
  return GTK_LABEL (find_label_showing (widget, text));
}

GtkWidget *
find_button_labelled (GtkWidget  *widget,
                      const char *label)
{
  return find_widget_where (widget, widget_is_button_labelled, label);
}

GtkWidget *
find_visible_button_labelled (GtkWidget  *widget,
                              const char *label)
{
  return find_visible_widget_where (widget, widget_is_button_labelled, label);
}

GtkWidget *
find_button_by_tooltip (GtkWidget  *widget,
                        const char *tooltip)
{
  return find_widget_where (widget, widget_is_button_by_tooltip, tooltip);
}

AdwActionRow *
find_action_row (GtkWidget  *widget,
                 const char *title)
{
  return ADW_ACTION_ROW (find_widget_where (widget, widget_is_action_row_titled, title));
}
