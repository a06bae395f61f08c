/* tern-stats-bar.h: live throughput under the transcript: prefill progress
 * and tok/s, decode tok/s, time to first token, and the plot. */
#pragma once

#include <gtk/gtk.h>

#include "tern-engine-worker.h"

G_BEGIN_DECLS

#define TERN_TYPE_STATS_BAR (tern_stats_bar_get_type ())
G_DECLARE_FINAL_TYPE (TernStatsBar, tern_stats_bar, TERN, STATS_BAR, GtkBox)

void        tern_stats_bar_start    (TernStatsBar    *self);
void        tern_stats_bar_update   (TernStatsBar    *self,
                                     const TernStats *live);
void        tern_stats_bar_finish   (TernStatsBar    *self,
                                     const TernStats *final,
                                     gboolean         cancelled);
const char *tern_stats_bar_get_text (TernStatsBar    *self);
guint       tern_stats_bar_get_n_plot_samples (TernStatsBar *self);

G_END_DECLS
