/* tern-throughput-plot.c: the speed of a chat's answers as bars, prefill
 * and decode told apart, under a scale the user can read. */
#include "config.h"

#include <math.h>

#include <glib/gi18n.h>

#include "tern-throughput-plot.h"

/* The newest samples kept; those that fit (one per BAR_PX) are shown, older
 * ones scroll off to the left. */
#define MAX_SAMPLES 256
#define BAR_PX 2

typedef struct {
  float tokens_per_second;
  gboolean prefill;
} Sample;

struct _TernThroughputPlot {
  GtkWidget parent_instance;
  Sample samples[MAX_SAMPLES];
  guint n_samples; /* total ever added; the ring holds the last MAX_SAMPLES */
  guint n_prefill; /* of those, prefill samples */
};

G_DEFINE_FINAL_TYPE (TernThroughputPlot, tern_throughput_plot, GTK_TYPE_WIDGET)

void
tern_throughput_plot_add_sample (TernThroughputPlot *self,
                                 double              tokens_per_second,
                                 gboolean            prefill)
{
  Sample *s = &self->samples[self->n_samples % MAX_SAMPLES];

  s->tokens_per_second = (float) (isfinite (tokens_per_second) ? MAX (tokens_per_second, 0) : 0);
  s->prefill = prefill;
  self->n_samples++;
  self->n_prefill += prefill != FALSE;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

void
tern_throughput_plot_clear (TernThroughputPlot *self)
{
  self->n_samples = 0;
  self->n_prefill = 0;
  gtk_widget_queue_draw (GTK_WIDGET (self));
}

guint
tern_throughput_plot_get_n_samples (TernThroughputPlot *self)
{
  return self->n_samples;
}

guint
tern_throughput_plot_get_n_prefill_samples (TernThroughputPlot *self)
{
  return self->n_prefill;
}

/* The top of the scale: the peak rounded up to 1, 2 or 5 times a power of
 * ten, so the label reads as a round figure ("200 tok/s"). */
double
tern_throughput_plot_scale_top (double peak)
{
  double p, m;

  if (!(peak > 0) || !isfinite (peak))
    return 0;
  p = pow (10, floor (log10 (peak)));
  m = peak / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static guint
n_visible (TernThroughputPlot *self)
{
  int width = gtk_widget_get_width (GTK_WIDGET (self));
  guint fit = width > 0 ? (guint) width / BAR_PX : MAX_SAMPLES;

  return MIN (MIN (self->n_samples, MAX_SAMPLES), MAX (fit, 1));
}

/* Scaled to the decode speeds when there are any: prefill runs 10-50 times
 * faster and would flatten them; its bars are then cut at the top. */
double
tern_throughput_plot_get_scale_top (TernThroughputPlot *self)
{
  guint n = n_visible (self);
  guint first = self->n_samples - n;
  double peak = 0, decode_peak = 0;

  for (guint i = 0; i < n; i++)
    {
      const Sample *s = &self->samples[(first + i) % MAX_SAMPLES];

      peak = MAX (peak, s->tokens_per_second);
      if (!s->prefill)
        decode_peak = MAX (decode_peak, s->tokens_per_second);
    }
  return tern_throughput_plot_scale_top (decode_peak > 0 ? decode_peak : peak);
}

static void
tern_throughput_plot_snapshot (GtkWidget   *widget,
                               GtkSnapshot *snapshot)
{
  TernThroughputPlot *self = TERN_THROUGHPUT_PLOT (widget);
  int width = gtk_widget_get_width (widget);
  int height = gtk_widget_get_height (widget);
  guint n = n_visible (self);
  guint first = self->n_samples - n;
  double top = tern_throughput_plot_get_scale_top (self);
  float bar_width = BAR_PX;
  /* The widget's colour (the accent, ui/style.css): decode bars strong,
   * prefill bars pale. */
  GdkRGBA color, baseline, prefill;
  g_autofree char *label = NULL;
  PangoLayout *layout;
  PangoAttrList *attrs;
  int text_h = 0;

  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_get_color (gtk_widget_get_style_context (widget), &color);
  G_GNUC_END_IGNORE_DEPRECATIONS
  baseline = color;
  baseline.alpha = 0.15f;
  prefill = color;
  prefill.alpha = 0.25f;
  color.alpha = 0.7f;

  /* Without a sample the plot draws nothing: a lone baseline read as a
   * stray line beside "Ready". */
  if (top <= 0)
    return;
  gtk_snapshot_append_color (snapshot, &baseline,
                             &GRAPHENE_RECT_INIT (0, (float) height - 1, (float) width, 1));

  /* The scale: its top as a figure, and a faint line at that height. */
  /* Translators: the top of the speed plot's scale, in tokens per second */
  label = g_strdup_printf (_("%.0f tok/s"), top);
  layout = gtk_widget_create_pango_layout (widget, label);
  attrs = pango_attr_list_new ();
  pango_attr_list_insert (attrs, pango_attr_scale_new (PANGO_SCALE_X_SMALL));
  pango_layout_set_attributes (layout, attrs);
  pango_attr_list_unref (attrs);
  pango_layout_get_pixel_size (layout, NULL, &text_h);
  gtk_snapshot_append_color (snapshot, &baseline,
                             &GRAPHENE_RECT_INIT (0, (float) text_h, (float) width, 1));
  gtk_snapshot_append_layout (snapshot, layout, &color);
  g_object_unref (layout);

  /* Right-aligned: the newest sample is at the right edge. */
  for (guint i = 0; i < n; i++)
    {
      const Sample *s = &self->samples[(first + i) % MAX_SAMPLES];
      float room = (float) (height - 1 - text_h);
      float h = (float) MIN (s->tokens_per_second / top, 1.0) * room;
      float x = width - (n - i) * bar_width;

      gtk_snapshot_append_color (snapshot, s->prefill ? &prefill : &color,
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
