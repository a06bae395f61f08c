/* Finding a widget in a tree, for the app tests (app-test.h includes it) and
 * the Models panel's (tests/manager/test-panel.c, which has a spin_for of its
 * own and so takes only this part). Every finder walks depth first, the
 * widget itself before its children, and returns the first widget its
 * predicate takes, or NULL. */
#ifndef WIDGET_FIND_H
#define WIDGET_FIND_H

#include <adwaita.h>

/* Whether widget is the one looked for; data is the finder's. */
typedef gboolean (*WidgetPredicate) (GtkWidget    *widget,
                                     gconstpointer data);

GtkWidget *find_widget_where (GtkWidget      *widget,
                              WidgetPredicate pred,
                              gconstpointer   data);
/* The same, passing over hidden widgets and everything under them (a
 * hidden stack page's button is not one a user can press). */
GtkWidget *find_visible_widget_where (GtkWidget      *widget,
                                      WidgetPredicate pred,
                                      gconstpointer   data);

/* The predicates behind the finders below. */
gboolean widget_is_of_type (GtkWidget *widget, gconstpointer type);  /* GSIZE_TO_POINTER (GType) */
gboolean widget_is_label_with (GtkWidget *widget, gconstpointer part);
gboolean widget_is_label_showing (GtkWidget *widget, gconstpointer text);
gboolean widget_is_mapped_label_with (GtkWidget *widget, gconstpointer part);
gboolean widget_is_label_with_class (GtkWidget *widget, gconstpointer css_class);
gboolean widget_is_button_labelled (GtkWidget *widget, gconstpointer label);
gboolean widget_is_button_by_tooltip (GtkWidget *widget, gconstpointer tooltip);
gboolean widget_is_action_row_titled (GtkWidget *widget, gconstpointer title);

/* The first widget of that type. */
GtkWidget *find_of_type (GtkWidget *widget,
                         GType      type);
/* A label whose text has part in it. */
GtkWidget *find_label_with (GtkWidget  *widget,
                            const char *part);
/* A label whose text is text (a button's label and a status page's title
 * are GtkLabels too). */
GtkWidget *find_label_showing (GtkWidget  *widget,
                               const char *text);
/* A mapped label whose text has part in it: one on screen. */
GtkWidget *find_mapped_label (GtkWidget  *widget,
                              const char *part);
/* A label with this CSS class (a row's failure sentence: tern-row-failure). */
GtkWidget *find_label_with_class (GtkWidget  *widget,
                                  const char *css_class);
/* The stats bar's label of figures, the one showing text; NULL when text
 * is empty (no figures yet), whatever empty labels there are. */
GtkLabel *find_figures_label (GtkWidget  *widget,
                              const char *text);
/* The button labelled label (as written, mnemonic included). */
GtkWidget *find_button_labelled (GtkWidget  *widget,
                                 const char *label);
/* The same, among the visible widgets only. */
GtkWidget *find_visible_button_labelled (GtkWidget  *widget,
                                         const char *label);
/* The button with this tooltip. */
GtkWidget *find_button_by_tooltip (GtkWidget  *widget,
                                   const char *tooltip);
/* The AdwActionRow titled title. */
AdwActionRow *find_action_row (GtkWidget  *widget,
                               const char *title);

#endif
