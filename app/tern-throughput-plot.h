/* tern-throughput-plot.h: a small live bar plot of decode tok/s, drawn with
 * GtkSnapshot. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TERN_TYPE_THROUGHPUT_PLOT (tern_throughput_plot_get_type ())
G_DECLARE_FINAL_TYPE (TernThroughputPlot, tern_throughput_plot, TERN, THROUGHPUT_PLOT, GtkWidget)

void  tern_throughput_plot_add_sample  (TernThroughputPlot *self,
                                        double              tokens_per_second);
void  tern_throughput_plot_clear       (TernThroughputPlot *self);
guint tern_throughput_plot_get_n_samples (TernThroughputPlot *self);

G_END_DECLS
