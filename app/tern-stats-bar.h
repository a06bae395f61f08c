/* tern-stats-bar.h: live throughput under the transcript: prefill progress
 * and tok/s, decode tok/s, time to first token, and the plot. */
#pragma once

#include <gtk/gtk.h>

#include "tern-engine-worker.h"

G_BEGIN_DECLS

#define TERN_TYPE_STATS_BAR (tern_stats_bar_get_type ())
G_DECLARE_FINAL_TYPE (TernStatsBar, tern_stats_bar, TERN, STATS_BAR, GtkBox)

/* Another chat or model: the plot and the figures start again. */
void        tern_stats_bar_reset    (TernStatsBar    *self);
/* An answer begins (the plot keeps the chat's earlier answers). */
void        tern_stats_bar_start    (TernStatsBar    *self);
/* TRUE when it showed the figures: they are held to a few times a second,
 * and the context gauge is redrawn with them (never more often). */
gboolean    tern_stats_bar_update   (TernStatsBar    *self,
                                     const TernStats *live);
/* outcome: NULL for an answer that ended normally (or was stopped: cancelled),
 * else a short word for the phase label ("Failed", "Cut off"). */
void        tern_stats_bar_finish   (TernStatsBar    *self,
                                     const TernStats *final,
                                     gboolean         cancelled,
                                     const char      *outcome);
const char *tern_stats_bar_get_text (TernStatsBar    *self);
const char *tern_stats_bar_get_phase (TernStatsBar   *self);
/* The context gauge: tokens in use of n_ctx, and the KV cache's bytes
 * (n_ctx <= 0 hides it). */
void        tern_stats_bar_set_context (TernStatsBar *self,
                                        int           used,
                                        int           n_ctx,
                                        guint64       kv_bytes);
const char *tern_stats_bar_get_context_text (TernStatsBar *self);
/* The legend of the tint of tokens from accepted drafts (a square of the
 * message rows' tint colour and a few words, with a tooltip that says what
 * it means); shown again after the theme changes, for its colour. */
void        tern_stats_bar_set_tint_legend (TernStatsBar *self,
                                            gboolean      shown);
/* Its markup while shown, else NULL; its tooltip. */
const char *tern_stats_bar_get_tint_legend (TernStatsBar *self);
const char *tern_stats_bar_get_tint_legend_tooltip (TernStatsBar *self);
/* The final figures' tooltip (the line whole, however narrow the bar); NULL
 * while an answer is written. */
const char *tern_stats_bar_get_figures_tooltip (TernStatsBar *self);
double      tern_stats_bar_get_context_fraction (TernStatsBar *self);
guint       tern_stats_bar_get_n_plot_samples (TernStatsBar *self);
guint       tern_stats_bar_get_n_plot_prefill_samples (TernStatsBar *self);
double      tern_stats_bar_get_plot_scale_top (TernStatsBar *self);

G_END_DECLS
