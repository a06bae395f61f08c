/* tern-throughput-plot.c */
#include "config.h"

#include "tern-throughput-plot.h"

/* The newest samples shown; older ones scroll off to the left. */
#define MAX_SAMPLES 96

struct _TernThroughputPlot {
  GtkWidget parent_instance;
  double samples[MAX_SAMPLES];
  guint n_samples; /* total ever added; the ring holds the last MAX_SAMPLES */
};

G_DEFINE_FINAL_TYPE (TernThroughputPlot, tern_throughput_plot, GTK_TYPE_WIDGET)

void
tern_throughput_plot_add_sample (TernThroughputPlot *self,
                                 double              tokens_per_second)
{
  self->samples[self->n_samples % MAX_SAMPLES] = MAX (tokens_per_second, 0);
  self->n_samples++;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tern_throughput_plot_clear (TernThroughputPlot *self)
{
  self->n_samples = 0;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

guint
tern_throughput_plot_get_n_samples (TernThroughputPlot *self)
{
  return self->n_samples;
}

static void
tern_throughput_plot_snapshot (GtkWidget   *widget,
                               GtkSnapshot *snapshot)
{
  TernThroughputPlot *self = TERN_THROUGHPUT_PLOT (widget);
  int width = gtk_widget_get_width (widget);
  int height = gtk_widget_get_height (widget);
  guint n = MIN (self->n_samples, MAX_SAMPLES);
  guint first = self->n_samples - n;
  double peak = 0;
  float bar_width = (float) width / MAX_SAMPLES;
  GdkRGBA color, baseline;

  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_get_color (gtk_widget_get_style_context (widget), &color);
  G_GNUC_END_IGNORE_DEPRECATIONS
  baseline = color;
  baseline.alpha = 0.15f;
  color.alpha = 0.55f;

  gtk_snapshot_append_color (snapshot, &baseline,
                             &GRAPHENE_RECT_INIT (0, (float) height - 1, (float) width, 1));
  for (guint i = 0; i < n; i++)
    peak = MAX (peak, self->samples[(first + i) % MAX_SAMPLES]);
  if (peak <= 0)
    return;

  /* Right-aligned: the newest sample is at the right edge. */
  for (guint i = 0; i < n; i++)
    {
      double v = self->samples[(first + i) % MAX_SAMPLES];
      float h = (float) (v / peak * (height - 2));
      float x = width - (n - i) * bar_width;

      gtk_snapshot_append_color (snapshot, &color,
                                 &GRAPHENE_RECT_INIT (x, height - 1 - h, MAX (bar_width - 1, 1), h));
    }
}

static void
tern_throughput_plot_class_init (TernThroughputPlotClass *klass)
{
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  widget_class->snapshot = tern_throughput_plot_snapshot;
  gtk_widget_class_set_css_name (widget_class, "ternthroughputplot");
  gtk_widget_class_set_accessible_role (widget_class, GTK_ACCESSIBLE_ROLE_IMG);
}

static void
tern_throughput_plot_init (TernThroughputPlot *self)
{
  (void) self;
}
