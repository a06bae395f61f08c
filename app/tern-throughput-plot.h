/* tern-throughput-plot.h: a live bar plot of a chat's prefill and decode
 * speeds with a scale, drawn with GtkSnapshot. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

#define TERN_TYPE_THROUGHPUT_PLOT (tern_throughput_plot_get_type ())
G_DECLARE_FINAL_TYPE (TernThroughputPlot, tern_throughput_plot, TERN, THROUGHPUT_PLOT, GtkWidget)

/* prefill: a prefill speed (drawn in blue), else a decode speed. */
void   tern_throughput_plot_add_sample  (TernThroughputPlot *self,
                                         double              tokens_per_second,
                                         gboolean            prefill);
void   tern_throughput_plot_clear       (TernThroughputPlot *self);
guint  tern_throughput_plot_get_n_samples (TernThroughputPlot *self);
guint  tern_throughput_plot_get_n_prefill_samples (TernThroughputPlot *self);
/* The figure at the top of the scale (0: nothing drawn yet). */
double tern_throughput_plot_get_scale_top (TernThroughputPlot *self);
/* peak rounded up to 1, 2 or 5 times a power of ten (0 for peak <= 0). */
double tern_throughput_plot_scale_top   (double              peak);

G_END_DECLS
