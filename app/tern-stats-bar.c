/* tern-stats-bar.c */
#include "config.h"

#include <glib/gi18n.h>
#include <string.h>

#include "tern-size.h"
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
  GtkBox *context_box;
  GtkLevelBar *context_level;
  GtkLabel *context_label;
  GtkLabel *context_short_label;
  GtkLabel *legend_label;

  gint64 last_sample_us;
  gint64 last_text_us;
  TernPhase text_phase;     /* of the figures shown */
  gboolean prefill_sampled; /* this answer has a prefill bar */
  /* A finished answer's summary, whole and short (show_summary); NULL
   * while none is shown. */
  char *summary;
  char *summary_short;
  char *summary_shortest; /* without the drafts' figures (NULL: none) */
  int summary_width;        /* of the figures when it was last chosen */
  guint summary_idle;
};

/* Figures change faster than anyone reads them; a label that changes
 * width re-lays out its row, so four times a second is enough. */
#define TEXT_INTERVAL_US (250 * 1000)

G_DEFINE_FINAL_TYPE (TernStatsBar, tern_stats_bar, GTK_TYPE_BOX)

/* The plot shows a chat's answers one after another: it starts again only
 * for another chat or another model. The phase too: "Done" after New Chat
 * spoke of the chat left, as the cleared figures no longer did. */
static void
forget_summary (TernStatsBar *self)
{
  g_clear_pointer (&self->summary, g_free);
  g_clear_pointer (&self->summary_short, g_free);
  g_clear_pointer (&self->summary_shortest, g_free);
  g_clear_handle_id (&self->summary_idle, g_source_remove);
  self->summary_width = 0;
}

void
tern_stats_bar_reset (TernStatsBar *self)
{
  forget_summary (self);
  tern_throughput_plot_clear (self->plot);
  gtk_label_set_text (self->phase_label, _("Ready"));
  gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), FALSE);
  gtk_label_set_text (self->figures_label, "");
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->figures_label), NULL);
}

void
tern_stats_bar_start (TernStatsBar *self)
{
  forget_summary (self);
  self->prefill_sampled = FALSE;
  self->last_sample_us = 0;
  self->last_text_us = 0;
  self->text_phase = TERN_PHASE_IDLE;
  gtk_label_set_text (self->phase_label, _("Prefill"));
  gtk_label_set_text (self->figures_label, "");
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->figures_label), NULL);
  gtk_progress_bar_set_fraction (self->prefill_bar, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), TRUE);
}

/* The figures, wrapped at spaces (never inside a word: a number broken
 * read "120" over "0 / …"), never at the slash of a unit: "tok/s" read
 * "tok/" on one line and "s" on the next; nor between a number and the
 * word after it: "3853" ended a line and "tok/s" began the next. */
static PangoAttrList *
figures_breaks (const char *text)
{
  PangoAttrList *attrs = pango_attr_list_new ();

  for (const char *slash = strchr (text, '/'); slash != NULL && slash[1] != '\0'; slash = strchr (slash + 1, '/'))
    {
      /* Breaks strictly inside the range go: the one after the slash. */
      PangoAttribute *attr = pango_attr_allow_breaks_new (FALSE);

      attr->start_index = (guint) (slash - text);
      attr->end_index = (guint) (g_utf8_next_char (slash + 1) - text);
      pango_attr_list_insert (attrs, attr);
    }
  for (const char *space = strchr (text, ' '); space != NULL; space = strchr (space + 1, ' '))
    if (space > text && g_ascii_isdigit (space[-1]) && space[1] != '\0'
        && g_unichar_isalpha (g_utf8_get_char_validated (space + 1, -1)))
      {
        /* The break after the space, before the unit's first letter. */
        PangoAttribute *attr = pango_attr_allow_breaks_new (FALSE);

        attr->start_index = (guint) (space - text);
        attr->end_index = (guint) (g_utf8_next_char (space + 1) - text);
        pango_attr_list_insert (attrs, attr);
      }
  return attrs;
}

static void
set_figures (TernStatsBar *self,
             const char   *text)
{
  g_autofree char *shown = tern_app_localize_decimals (text);
  g_autoptr(PangoAttrList) attrs = figures_breaks (shown);

  gtk_label_set_text (self->figures_label, shown);
  gtk_label_set_attributes (self->figures_label, attrs);
}

static void
set_figures_tooltip (TernStatsBar *self,
                     const char   *text)
{
  g_autofree char *shown = tern_app_localize_decimals (text);

  gtk_widget_set_tooltip_text (GTK_WIDGET (self->figures_label), shown);
}

/* Whether text, broken as set_figures breaks it, holds in the two lines the
 * label has at its present width (before the first allocation, taken as
 * yes). The live figures change four times a second, so a window made
 * narrower or wider is followed at once. */
static gboolean
figures_fit (TernStatsBar *self,
             const char   *text)
{
  GtkWidget *label = GTK_WIDGET (self->figures_label);
  int width = gtk_widget_get_width (label);
  g_autoptr(PangoLayout) layout = NULL;
  g_autoptr(PangoAttrList) attrs = NULL;

  if (width <= 0)
    return TRUE;
  layout = gtk_widget_create_pango_layout (label, text);
  attrs = figures_breaks (text);
  pango_layout_set_attributes (layout, attrs);
  pango_layout_set_wrap (layout, PANGO_WRAP_WORD);
  pango_layout_set_width (layout, width * PANGO_SCALE);
  return pango_layout_get_line_count (layout) <= gtk_label_get_lines (self->figures_label);
}

/* A count of tokens with its plural ("1 token"), for every place the bar
 * gives one: a translation may have other plurals than English. */
static char *
token_count (int n)
{
  return g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%'d token", "%'d tokens", n), n);
}

gboolean
tern_stats_bar_update (TernStatsBar    *self,
                       const TernStats *live)
{
  g_autofree char *text = NULL;
  g_autofree char *full = NULL; /* the figures whole, where text is short */
  g_autofree char *count = NULL;
  gint64 now = g_get_monotonic_time ();
  /* A new phase shows at once: its first figures were held back for a
   * quarter second, and "Decode" stood over the prefill's "0 / 0 tokens",
   * or "Pinning" over nothing when a pin came soon after another. Decoding
   * from its second token: one token has no speed ("0.0 tok/s"). */
  gboolean show_text = now - self->last_text_us >= TEXT_INTERVAL_US
                       || (live->phase != self->text_phase
                           && (live->phase != TERN_PHASE_DECODE || live->decode_tok_s > 0));

  if (show_text)
    {
      self->last_text_us = now;
      self->text_phase = live->phase;
    }
  if (live->phase == TERN_PHASE_PREFILL || live->phase == TERN_PHASE_PIN)
    {
      gtk_label_set_text (self->phase_label,
                          live->phase == TERN_PHASE_PIN ? _("Pinning") : _("Prefill"));
      gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), TRUE);
      if (live->prefill_total > 0)
        gtk_progress_bar_set_fraction (self->prefill_bar,
                                       (double) live->prefill_done / live->prefill_total);
      /* A prompt almost all cached reports its progress before it has a
       * total: "Prefill" alone, not "0 / 0 tokens · 0 tok/s". */
      if (live->prefill_total <= 0)
        text = g_strdup ("");
      else
        /* Translators: prefill progress in tokens, and its speed; the plural
         * goes with the second number, the prompt's tokens */
        text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%d / %d token · %.0f tok/s",
                                             "%d / %d tokens · %.0f tok/s", live->prefill_total),
                                live->prefill_done, live->prefill_total, live->prefill_tok_s);
      if (live->prefill_tok_s > 0 && now - self->last_sample_us >= SAMPLE_INTERVAL_US)
        {
          tern_throughput_plot_add_sample (self->plot, live->prefill_tok_s, TRUE);
          self->last_sample_us = now;
          self->prefill_sampled = TRUE;
        }
    }
  else if (live->phase == TERN_PHASE_DECODE)
    {
      gtk_label_set_text (self->phase_label, _("Decode"));
      gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), FALSE);
      /* A prefill shorter than a sample still shows as one bar. */
      if (!self->prefill_sampled && live->prefill_tok_s > 0)
        {
          tern_throughput_plot_add_sample (self->plot, live->prefill_tok_s, TRUE);
          self->prefill_sampled = TRUE;
        }
      /* The count is a plural of its own: the first token read "1 tokens". */
      count = token_count (live->generated_tokens);
      /* Translators: decode speed, time to first token, then the tokens so
       * far ("12 tokens", translated on its own) */
      text = g_strdup_printf (_("%.1f tok/s · first token %.0f ms · %s"),
                              live->decode_tok_s, live->ttft_ms, count);
      if (live->accepted > 0)
        {
          char *with = g_strdup_printf (
            /* Translators: live figures, then how many tokens came from accepted drafts */
            _("%s · %d from drafts"), text, live->accepted);
          g_free (text);
          text = with;
        }
      /* At a phone's width, with drafts, the figures took three lines and
       * were cut after two ("· 120 fr…"), with no tooltip: there the time
       * to the first token, which no longer changes (the summary gives it
       * again), makes way for the figures that do; the tooltip has them
       * all. */
      if (show_text && !figures_fit (self, text))
        {
          full = g_steal_pointer (&text);
          /* Translators: decode speed, then the tokens so far ("12 tokens",
           * translated on its own): the live figures where the window is too
           * narrow for the time to the first token as well */
          text = g_strdup_printf (_("%.1f tok/s · %s"), live->decode_tok_s, count);
          if (live->accepted > 0)
            {
              char *with = g_strdup_printf (_("%s · %d from drafts"), text, live->accepted);
              g_free (text);
              text = with;
            }
        }
      if (live->decode_tok_s > 0 && now - self->last_sample_us >= SAMPLE_INTERVAL_US)
        {
          tern_throughput_plot_add_sample (self->plot, live->decode_tok_s, FALSE);
          self->last_sample_us = now;
        }
    }
  if (text != NULL && show_text)
    {
      forget_summary (self);
      set_figures (self, text);
      set_figures_tooltip (self, full);
      return TRUE;
    }
  return FALSE;
}

/* A finished answer's summary where its two lines hold it, else its speed
 * and tokens: at 360 px it was cut after two lines ("first token 310 ms ·
 * prom…"), and a tooltip is out of reach on a touch screen. The summary is
 * whole under the answer itself, and in the tooltip. Chosen again when the
 * figures' width changes (layout_allocate). */
static void
show_summary (TernStatsBar *self)
{
  const char *text = self->summary;

  if (text == NULL)
    return;
  self->summary_width = gtk_widget_get_width (GTK_WIDGET (self->figures_label));
  if (self->summary_short != NULL && !figures_fit (self, self->summary))
    text = self->summary_short;
  if (text == self->summary_short && self->summary_shortest != NULL && !figures_fit (self, text))
    text = self->summary_shortest;
  if (g_strcmp0 (gtk_label_get_text (self->figures_label), text) != 0)
    set_figures (self, text);
}

static gboolean
show_summary_idle (gpointer data)
{
  TernStatsBar *self = data;

  self->summary_idle = 0;
  show_summary (self);
  return G_SOURCE_REMOVE;
}

void
tern_stats_bar_finish (TernStatsBar    *self,
                       const TernStats *final,
                       gboolean         cancelled,
                       const char      *outcome)
{
  g_autofree char *text = NULL;
  g_autofree char *count = NULL;
  g_autofree char *prompt = NULL;

  forget_summary (self);
  gtk_widget_set_visible (GTK_WIDGET (self->prefill_bar), FALSE);
  self->text_phase = TERN_PHASE_IDLE;
  gtk_label_set_text (self->phase_label, outcome ? outcome : cancelled ? _("Stopped") : _("Done"));
  /* Stopped before the first token too (during the prefill, or the pin
   * an answer waited for: seconds with a real model), where the bar read
   * "0.0 tok/s · 0 tokens · first token 0 ms". */
  if ((outcome != NULL || cancelled) && final->generated_tokens == 0)
    {
      /* Nothing ran: no speed to report ("0.0 tok/s" read as a result). */
      gtk_label_set_text (self->figures_label, "");
      gtk_widget_set_tooltip_text (GTK_WIDGET (self->figures_label), NULL);
      return;
    }
  count = token_count (final->generated_tokens);
  prompt = token_count (final->prompt_tokens);
  if (final->decode_tok_s > 0)
    /* Translators: summary of an answer: decode speed, tokens ("12 tokens",
     * translated on its own), time to first token, prompt tokens (the same)
     * and prefill speed */
    text = g_strdup_printf (_("%.1f tok/s · %s · first token %.0f ms · prompt %s at %.0f tok/s"),
                            final->decode_tok_s, count, final->ttft_ms, prompt,
                            final->prefill_tok_s);
  else
    /* One token has no speed: an answer stopped after its first read
     * "0.0 tok/s · 1 token", as if that were a result. */
    /* Translators: summary of an answer of one token, which has no decode
     * speed: the tokens ("1 token"), time to first token, prompt tokens and
     * prefill speed */
    text = g_strdup_printf (_("%s · first token %.0f ms · prompt %s at %.0f tok/s"),
                            count, final->ttft_ms, prompt, final->prefill_tok_s);
  if (final->restored_tokens > 0)
    {
      /* The pin, the conversation, or a server's prefix cache (remote):
       * prompt tokens that were not computed again. */
      char *with = g_strdup_printf (
        /* Translators: prompt tokens reused instead of computed again */
        _("%s · %d reused"), text, final->restored_tokens);
      g_free (text);
      text = with;
    }
  /* Where it is too long: the speed and the tokens, the live figures'
   * short form, with the drafts' figures while they fit (what speculation
   * gained is what its user looks at the bar for). */
  if (final->decode_tok_s > 0)
    /* Translators: decode speed, then the tokens ("12 tokens") */
    self->summary_short = g_strdup_printf (_("%.1f tok/s · %s"), final->decode_tok_s, count);
  else
    self->summary_short = g_strdup (count);
  if (final->drafted > 0 && final->verify_steps > 0)
    {
      /* Translators: speculative decoding: of the tokens guessed ahead, how
       * many the model kept, and how many it kept per check on average;
       * the plural goes with the second number, the tokens guessed */
      const char *kept = g_dngettext (GETTEXT_PACKAGE,
                                      "%s · %d of %d guessed token kept (%.1f per check)",
                                      "%s · %d of %d guessed tokens kept (%.1f per check)",
                                      final->drafted);
      const double per_check = (double) final->accepted / final->verify_steps;
      char *with = g_strdup_printf (kept, text, final->accepted, final->drafted, per_check);

      g_free (text);
      text = with;
      self->summary_shortest = self->summary_short;
      self->summary_short = g_strdup_printf (kept, self->summary_shortest, final->accepted,
                                             final->drafted, per_check);
    }
  self->summary = g_strdup (text);
  set_figures (self, text);
  show_summary (self);
  set_figures_tooltip (self, text);
  if (!self->prefill_sampled && final->prefill_tok_s > 0)
    tern_throughput_plot_add_sample (self->plot, final->prefill_tok_s, TRUE);
  self->prefill_sampled = TRUE;
  if (final->decode_tok_s > 0)
    tern_throughput_plot_add_sample (self->plot, final->decode_tok_s, FALSE);
}

/* ------------------------------------------------------------- layout
 *
 * A box's, but the figures come before the plot. As a GtkBox, every part
 * shared the spare width, and at 360 px the figures had some 40 px: a
 * number broke inside itself ("120" over "0 / …"). Here the figures get
 * first the width that holds them in two lines (about half their line,
 * at most twice their least width, so that the plot stays beside an
 * answer's long summary in a middling window); the plot, whole, where
 * that leaves room for it, else it is left out; then the others their
 * natural widths, as the box gave them; what is left goes to the figures,
 * the one part that expands. Where the box gave every part its natural
 * width (the default window), the widths are the box's. */

#define MAX_PARTS 8

typedef struct {
  GtkWidget *child;
  int        min, nat, width;
} Part;

static guint
layout_parts (TernStatsBar *self,
              int           width,
              Part         *parts,
              gboolean     *plot_shown)
{
  GtkWidget *widget = GTK_WIDGET (self);
  GtkWidget *figures = gtk_widget_get_parent (GTK_WIDGET (self->figures_label));
  GtkWidget *plot = GTK_WIDGET (self->plot);
  GtkRequestedSize sizes[MAX_PARTS];
  guint n = 0, n_sizes = 0;
  int plot_nat = 0, spare = width, target;
  Part *fig = NULL;

  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL && n < MAX_PARTS;
       c = gtk_widget_get_next_sibling (c))
    {
      Part *p;

      if (!gtk_widget_should_layout (c))
        continue;
      if (c == plot)
        {
          gtk_widget_measure (c, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &plot_nat, NULL, NULL);
          continue;
        }
      p = &parts[n++];
      p->child = c;
      gtk_widget_measure (c, GTK_ORIENTATION_HORIZONTAL, -1, &p->min, &p->nat, NULL, NULL);
      p->width = p->min;
      spare -= p->min;
      if (c == figures)
        fig = p;
    }
  *plot_shown = FALSE;
  if (width < 0)
    {
      /* Natural widths, for a height not asked for a given width. */
      for (guint i = 0; i < n; i++)
        parts[i].width = parts[i].nat;
      return n;
    }
  if (fig != NULL)
    {
      target = MIN (fig->nat, MAX (fig->min, MIN (fig->nat / 2 + 24, 2 * fig->min)));
      fig->width += CLAMP (target - fig->min, 0, MAX (spare, 0));
      spare -= fig->width - fig->min;
    }
  if (gtk_widget_should_layout (plot) && spare >= plot_nat)
    {
      *plot_shown = TRUE;
      spare -= plot_nat;
    }
  for (guint i = 0; i < n; i++)
    {
      sizes[n_sizes].data = &parts[i];
      sizes[n_sizes].minimum_size = parts[i].width;
      sizes[n_sizes].natural_size = MAX (parts[i].nat, parts[i].width);
      n_sizes++;
    }
  if (spare > 0)
    spare = gtk_distribute_natural_allocation (spare, n_sizes, sizes);
  for (guint i = 0; i < n_sizes; i++)
    ((Part *) sizes[i].data)->width = sizes[i].minimum_size;
  if (fig != NULL && spare > 0)
    fig->width += spare;
  return n;
}

static GtkSizeRequestMode
layout_request_mode (GtkWidget *widget)
{
  (void) widget;
  return GTK_SIZE_REQUEST_HEIGHT_FOR_WIDTH;
}

static void
layout_measure (GtkWidget      *widget,
                GtkOrientation  orientation,
                int             for_size,
                int            *minimum,
                int            *natural,
                int            *minimum_baseline,
                int            *natural_baseline)
{
  TernStatsBar *self = TERN_STATS_BAR (widget);
  Part parts[MAX_PARTS];
  gboolean plot_shown;
  guint n;

  *minimum = *natural = 0;
  *minimum_baseline = *natural_baseline = -1;
  if (orientation == GTK_ORIENTATION_HORIZONTAL)
    {
      /* The least width leaves the plot out; the natural one has it. */
      int plot_nat = 0;

      n = layout_parts (self, -1, parts, &plot_shown);
      for (guint i = 0; i < n; i++)
        {
          *minimum += parts[i].min;
          *natural += parts[i].nat;
        }
      if (gtk_widget_should_layout (GTK_WIDGET (self->plot)))
        gtk_widget_measure (GTK_WIDGET (self->plot), orientation, -1, NULL, &plot_nat, NULL, NULL);
      *natural += plot_nat;
      return;
    }
  n = layout_parts (self, for_size, parts, &plot_shown);
  for (guint i = 0; i < n; i++)
    {
      int min, nat;

      gtk_widget_measure (parts[i].child, orientation, for_size < 0 ? -1 : parts[i].width,
                          &min, &nat, NULL, NULL);
      *minimum = MAX (*minimum, min);
      *natural = MAX (*natural, nat);
    }
  if (plot_shown || (for_size < 0 && gtk_widget_should_layout (GTK_WIDGET (self->plot))))
    {
      int min, nat;

      gtk_widget_measure (GTK_WIDGET (self->plot), orientation, -1, &min, &nat, NULL, NULL);
      *minimum = MAX (*minimum, min);
      *natural = MAX (*natural, nat);
    }
}

static void
layout_allocate (GtkWidget *widget,
                 int        width,
                 int        height,
                 int        baseline)
{
  TernStatsBar *self = TERN_STATS_BAR (widget);
  GtkWidget *plot = GTK_WIDGET (self->plot);
  gboolean rtl = gtk_widget_get_direction (widget) == GTK_TEXT_DIR_RTL;
  Part parts[MAX_PARTS];
  gboolean plot_shown;
  guint n = layout_parts (self, width, parts, &plot_shown);
  int x = 0;

  (void) baseline;
  for (guint i = 0; i < n; i++)
    {
      GtkAllocation a = { rtl ? width - x - parts[i].width : x, 0, parts[i].width, height };

      gtk_widget_size_allocate (parts[i].child, &a, -1);
      x += parts[i].width;
    }
  /* Set from an idle: a label's text changed while the bar is allocated
   * would resize it in the middle of its allocation. */
  if (self->summary != NULL && self->summary_idle == 0
      && gtk_widget_get_width (GTK_WIDGET (self->figures_label)) != self->summary_width)
    self->summary_idle = g_idle_add (show_summary_idle, self);
  gtk_widget_set_child_visible (plot, plot_shown);
  if (plot_shown)
    {
      int plot_nat;
      GtkAllocation a;

      gtk_widget_measure (plot, GTK_ORIENTATION_HORIZONTAL, -1, NULL, &plot_nat, NULL, NULL);
      a = (GtkAllocation) { rtl ? 0 : width - plot_nat, 0, plot_nat, height };
      gtk_widget_size_allocate (plot, &a, -1);
    }
}

/* A count of tokens in the short form of the gauge: whole up to 1023, else
 * in thousands of 1024 ("4k", "1.5k"), as context sizes are named (a
 * 4096-token context is "4k"). Cut down, never rounded up: a context nearly
 * full must not read as full. */
static char *
compact_tokens (int n)
{
  if (n < 1024)
    return g_strdup_printf ("%d", n);
  if (n < 10 * 1024 && n % 1024 != 0)
    return g_strdup_printf ("%.1fk", (n * 10 / 1024) / 10.0);
  return g_strdup_printf ("%dk", n / 1024);
}

void
tern_stats_bar_set_context (TernStatsBar *self,
                            int           used,
                            int           n_ctx,
                            guint64       kv_bytes)
{
  g_autofree char *text = NULL;
  g_autofree char *tip = NULL;
  g_autofree char *kv = NULL;
  g_autofree char *short_used = NULL;
  g_autofree char *short_ctx = NULL;
  double fraction;
  gboolean over;

  gtk_widget_set_visible (GTK_WIDGET (self->context_box), n_ctx > 0);
  if (n_ctx <= 0)
    return;
  /* More than the context holds (a message too long, an answer kept from
   * a larger context): the figure as it is. Capped, it read "512 / 512",
   * a chat exactly full, where it does not fit at all. */
  used = MAX (used, 0);
  over = used > n_ctx;
  fraction = MIN ((double) used / n_ctx, 1.0);
  gtk_level_bar_set_value (self->context_level, fraction);
  /* Translators: the context gauge: tokens in use of the context size, short
   * (where the status bar has no room for it, "539 / 4k" stands in) */
  text = g_strdup_printf (_("%d / %d ctx"), used, n_ctx);
  gtk_label_set_text (self->context_label, text);
  short_used = compact_tokens (used);
  short_ctx = compact_tokens (n_ctx);
  g_free (text);
  text = g_strdup_printf ("%s / %s", short_used, short_ctx);
  gtk_label_set_text (self->context_short_label, text);
  kv = tern_app_format_size (kv_bytes);
  if (over)
    /* Translators: the context gauge's tooltip when the chat needs more
     * than the context holds: tokens needed, context size, the memory its
     * KV cache takes */
    tip = g_strdup_printf (_("Context: the chat does not fit. It needs at least %'d tokens and the context holds %'d. The KV cache of this context takes %s. Edit the last message, or raise the context size in Preferences."),
                           used, n_ctx, kv);
  else
    /* Translators: the context gauge's tooltip: tokens used, context size, the
     * memory its KV cache takes; %'d groups the digits as the locale does */
    tip = g_strdup_printf (_("Context: %'d of %'d tokens in use (%.0f %%). The KV cache of this context takes %s. When it is full, Chat leaves out the oldest turns; the context size is set in Preferences."),
                           used, n_ctx, 100.0 * fraction, kv);
  if (over)
    {
      gtk_widget_add_css_class (GTK_WIDGET (self->context_label), "error");
      gtk_widget_add_css_class (GTK_WIDGET (self->context_short_label), "error");
    }
  else
    {
      gtk_widget_remove_css_class (GTK_WIDGET (self->context_label), "error");
      gtk_widget_remove_css_class (GTK_WIDGET (self->context_short_label), "error");
    }
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->context_box), tip);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->context_level),
                                  GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, tip, -1);
}

void
tern_stats_bar_set_tint_legend (TernStatsBar *self,
                                gboolean      shown)
{
  GdkRGBA rgba = { 0.21f, 0.52f, 0.89f, 1.0f };
  g_autofree char *escaped = NULL;
  g_autofree char *markup = NULL;

  gtk_widget_set_visible (GTK_WIDGET (self->legend_label), shown);
  if (!shown)
    return;
  /* The colour the message rows tint with: the theme's accent. */
  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_lookup_color (gtk_widget_get_style_context (GTK_WIDGET (self)),
                                  "accent_color", &rgba);
  G_GNUC_END_IGNORE_DEPRECATIONS
  /* Translators: the legend of the tint of drafted tokens, after a square
   * of that colour; short (the status bar must fit a narrow window) */
  escaped = g_markup_escape_text (_("from accepted drafts"), -1);
  markup = g_strdup_printf ("<span foreground=\"#%02x%02x%02x\">\u25a0</span> %s",
                            (int) (CLAMP (rgba.red, 0, 1) * 255 + 0.5),
                            (int) (CLAMP (rgba.green, 0, 1) * 255 + 0.5),
                            (int) (CLAMP (rgba.blue, 0, 1) * 255 + 0.5), escaped);
  gtk_label_set_markup (self->legend_label, markup);
}

const char *
tern_stats_bar_get_tint_legend (TernStatsBar *self)
{
  return gtk_widget_get_visible (GTK_WIDGET (self->legend_label))
           ? gtk_label_get_label (self->legend_label) : NULL;
}

const char *
tern_stats_bar_get_figures_tooltip (TernStatsBar *self)
{
  return gtk_widget_get_tooltip_text (GTK_WIDGET (self->figures_label));
}

const char *
tern_stats_bar_get_tint_legend_tooltip (TernStatsBar *self)
{
  return gtk_widget_get_tooltip_text (GTK_WIDGET (self->legend_label));
}

const char *
tern_stats_bar_get_context_text (TernStatsBar *self)
{
  return gtk_widget_get_visible (GTK_WIDGET (self->context_box))
           ? gtk_widget_get_tooltip_text (GTK_WIDGET (self->context_box)) : NULL;
}

double
tern_stats_bar_get_context_fraction (TernStatsBar *self)
{
  return gtk_level_bar_get_value (self->context_level);
}

const char *
tern_stats_bar_get_phase (TernStatsBar *self)
{
  return gtk_label_get_text (self->phase_label);
}

const char *
tern_stats_bar_get_text (TernStatsBar *self)
{
  return gtk_label_get_text (self->figures_label);
}

guint
tern_stats_bar_get_n_plot_prefill_samples (TernStatsBar *self)
{
  return tern_throughput_plot_get_n_prefill_samples (self->plot);
}

double
tern_stats_bar_get_plot_scale_top (TernStatsBar *self)
{
  return tern_throughput_plot_get_scale_top (self->plot);
}

guint
tern_stats_bar_get_n_plot_samples (TernStatsBar *self)
{
  return tern_throughput_plot_get_n_samples (self->plot);
}

static void
tern_stats_bar_dispose (GObject *object)
{
  forget_summary (TERN_STATS_BAR (object));
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
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, context_box);
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, context_level);
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, context_label);
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, context_short_label);
  gtk_widget_class_bind_template_child (widget_class, TernStatsBar, legend_label);
}

static void
tern_stats_bar_init (TernStatsBar *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  gtk_widget_set_layout_manager (GTK_WIDGET (self),
                                 gtk_custom_layout_new (layout_request_mode, layout_measure,
                                                        layout_allocate));
  gtk_label_set_text (self->phase_label, _("Ready"));
  /* Full is a warning, not an achievement: no "full" colour at the top. */
  gtk_level_bar_remove_offset_value (self->context_level, GTK_LEVEL_BAR_OFFSET_FULL);
  gtk_level_bar_add_offset_value (self->context_level, GTK_LEVEL_BAR_OFFSET_LOW, 0.75);
  gtk_level_bar_add_offset_value (self->context_level, GTK_LEVEL_BAR_OFFSET_HIGH, 0.9);
}
