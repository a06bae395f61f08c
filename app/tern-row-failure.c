/* tern-row-failure.c: a row's failure sentence, alone in the error style.
 *
 * With the error style on a whole row, its title, its size and "Fits in
 * memory…" were red with the failure, and a row's words could no longer be
 * told from what went wrong. */
#include "tern-row-failure.h"

#define FAILURE_KEY "tern-row-failure"

GtkWidget *
tern_row_find_subtitle_label (GtkWidget *widget)
{
  if (GTK_IS_LABEL (widget) && gtk_widget_has_css_class (widget, "subtitle"))
    return widget;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *found = tern_row_find_subtitle_label (c);

      if (found != NULL)
        return found;
    }
  return NULL;
}

GtkWidget *
tern_row_set_failure (GtkWidget  *row,
                      GtkBox     *fallback,
                      const char *sentence)
{
  GtkWidget *label = g_object_get_data (G_OBJECT (row), FAILURE_KEY);

  if (label == NULL)
    {
      GtkWidget *subtitle = tern_row_find_subtitle_label (row);
      GtkWidget *box = subtitle != NULL ? gtk_widget_get_parent (subtitle) : NULL;

      label = gtk_label_new (NULL);
      gtk_label_set_wrap (GTK_LABEL (label), TRUE);
      gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
      gtk_label_set_xalign (GTK_LABEL (label), 0);
      gtk_widget_add_css_class (label, "caption");
      gtk_widget_add_css_class (label, "error");
      gtk_widget_add_css_class (label, FAILURE_KEY);
      gtk_widget_set_visible (label, FALSE);
      if (GTK_IS_BOX (box))
        gtk_box_insert_child_after (GTK_BOX (box), label, subtitle);
      else if (fallback != NULL)
        gtk_box_append (fallback, label);
      else if (ADW_IS_ACTION_ROW (row))
        adw_action_row_add_suffix (ADW_ACTION_ROW (row), label);
      else
        adw_expander_row_add_action (ADW_EXPANDER_ROW (row), label);
      /* The row owns it (a child of its tree): no reference kept here. */
      g_object_set_data (G_OBJECT (row), FAILURE_KEY, label);
    }
  gtk_label_set_text (GTK_LABEL (label), sentence != NULL ? sentence : "");
  gtk_widget_set_visible (label, sentence != NULL && *sentence != '\0');
  return label;
}
