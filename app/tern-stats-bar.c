/* tern-stats-bar.c */
#include "config.h"

#include <glib/gi18n.h>

#include "tern-stats-bar.h"
#include "tern-throughput-plot.h"

/* One plot bar per this many microseconds of decoding, whatever the update
 * rate: the plot shows time, not callbacks. */
#define SAMPLE_INTERVAL_US (100 * 1000)

struct _TernStatsBar {
  GtkBox parent_instance;

  GtkLabel *phase_label;
  GtkProgressBar *prefill_bar;
  GtkLabel *figures_label;
  TernThroughputPlot *plot;

  gint64 last_sample_us;
  gint64 last_text_us;
};

/* Figures change faster than anyone reads them; a label that changes
 * width re-lays out its row, so four times a second is enough. */
#define TEXT_INTERVAL_US (250 * 1000)

G_DEFINE_FINAL_TYPE (TernStatsBar, tern_stats_bar, GTK_TYPE_BOX)

void
tern_stats_bar_start (TernStatsBar *self)
{
  tern_throughput_plot_clear (self->plot);
  self->last_sample_us = 0;
  self->last_text_us = 0;
  gtk_label_set_text (self->phase_label, _("Prefill"));
  gtk_label_set_text (self->figures_label, "");
  gtk_progress_bar_set_fraction (self->prefill_bar, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), TRUE);
}

void
tern_stats_bar_update (TernStatsBar    *self,
                       const TernStats *live)
{
  g_autofree char *text = NULL;
  gint64 now = g_get_monotonic_time ();
  gboolean show_text = now - self->last_text_us >= TEXT_INTERVAL_US;

  if (show_text)
    self->last_text_us = now;
  if (live->phase == TERN_PHASE_PREFILL || live->phase == TERN_PHASE_PIN)
    {
      gtk_label_set_text (self->phase_label,
                          live->phase == TERN_PHASE_PIN ? _("Pinning") : _("Prefill"));
      gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), TRUE);
      if (live->prefill_total > 0)
        gtk_progress_bar_set_fraction (self->prefill_bar,
                                       (double) live->prefill_done / live->prefill_total);
      /* Translators: prefill progress in tokens, and its speed */
      text = g_strdup_printf (_("%d / %d tokens · %.0f tok/s"), live->prefill_done,
                              live->prefill_total, live->prefill_tok_s);
    }
  else if (live->phase == TERN_PHASE_DECODE)
    {
      gtk_label_set_text (self->phase_label, _("Decode"));
      gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), FALSE);
      /* Translators: decode speed, time to first token, tokens so far */
      text = g_strdup_printf (_("%.1f tok/s · first token %.0f ms · %d tokens"),
                              live->decode_tok_s, live->ttft_ms, live->generated_tokens);
      if (live->accepted > 0)
        {
          char *with = g_strdup_printf (
            /* Translators: live figures, then how many tokens came from accepted drafts */
            _("%s · %d from drafts"), text, live->accepted);
          g_free (text);
          text = with;
        }
      if (live->decode_tok_s > 0 && now - self->last_sample_us >= SAMPLE_INTERVAL_US)
        {
          tern_throughput_plot_add_sample (self->plot, live->decode_tok_s);
          self->last_sample_us = now;
        }
    }
  if (text != NULL && show_text)
    gtk_label_set_text (self->figures_label, text);
}

void
tern_stats_bar_finish (TernStatsBar    *self,
                       const TernStats *final,
                       gboolean         cancelled)
{
  g_autofree char *text = NULL;

  gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), FALSE);
  gtk_label_set_text (self->phase_label, cancelled ? _("Stopped") : _("Done"));
  /* Translators: summary of an answer: decode speed, tokens, time to first
   * token, prompt tokens and prefill speed */
  text = g_strdup_printf (_("%.1f tok/s · %d tokens · first token %.0f ms · prompt %d tokens at %.0f tok/s"),
                          final->decode_tok_s, final->generated_tokens, final->ttft_ms,
                          final->prompt_tokens, final->prefill_tok_s);
  if (final->drafted > 0 && final->verify_steps > 0)
    {
      char *with = g_strdup_printf (
        /* Translators: speculative decoding: draft tokens kept of those proposed, and
         * kept per verification step */
        _("%s · %d/%d drafts accepted · %.2f per step"), text, final->accepted,
        final->drafted, (double) final->accepted / final->verify_steps);
      g_free (text);
      text = with;
    }
  gtk_label_set_text (self->figures_label, text);
  if (final->decode_tok_s > 0)
    tern_throughput_plot_add_sample (self->plot, final->decode_tok_s);
}

const char *
tern_stats_bar_get_text (TernStatsBar *self)
{
  return gtk_label_get_text (self->figures_label);
}

guint
tern_stats_bar_get_n_plot_samples (TernStatsBar *self)
{
  return tern_throughput_plot_get_n_samples (self->plot);
}

static void
tern_stats_bar_dispose (GObject *object)
{
  gtk_widget_dispose_template (GTK_WIDGET (object), TERN_TYPE_STATS_BAR);
  G_OBJECT_CLASS (tern_stats_bar_parent_class)->dispose (object);
}

static void
tern_stats_bar_class_init (TernStatsBarClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tern_stats_bar_dispose;
  g_type_ensure (TERN_TYPE_THROUGHPUT_PLOT);
  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tern/Tern/ui/tern-stats-bar.ui");
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, phase_label);
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, prefill_bar);
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, figures_label);
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, plot);
}

static void
tern_stats_bar_init (TernStatsBar *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  gtk_label_set_text (self->phase_label, _("Ready"));
}
