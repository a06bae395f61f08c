/* tern-window.c: the chat window.
 *
 * The window never touches the engine: it asks TernEngineWorker and applies
 * what comes back only when the request id is the one it waits for (a model
 * loaded after another was chosen, or tokens of a stopped answer, are
 * dropped).
 *
 * Here: construction and state. The actions (win.*) are in
 * tern-window-actions.c, the requests to the engine worker and what is done
 * with its answers in tern-window-engine.c, the drafters in
 * tern-window-speculation.c, the composer in tern-composer.c; the instance
 * struct and what the window files share in tern-window-private.h.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>

#include <glib/gi18n.h>

#include "tern.h"
#include "tern-application.h"
#include "tern-composer.h"
#include "tern-engine-worker.h"
#include "tern-message-row.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-model-manager.h"
#include "tern-connections.h"
#endif
#include "tern-size.h"
#include "tern-window.h"
#include "tern-window-private.h"

G_DEFINE_FINAL_TYPE (TernWindow, tern_window, ADW_TYPE_APPLICATION_WINDOW)

/* ---------------------------------------------------------------- helpers */

/* libadwaita before 1.3 (Debian 12 has 1.2.2) frees a toast's record when
 * its hide animation (300 ms) ends and then runs its show animation's
 * "done" on the freed record, if the show animation is still going: a toast
 * shown while another hides (the next one in the queue) shows in 500 ms, so
 * dismissing it within its first 200 ms crashed the app a frame or two
 * later, fixed upstream in 1.3 (commit 1674ebc9, "Prevent show_done from
 * firing after hide_done"). Two deletions then a double click on "Undo" did
 * it. So a dismissal that may come that early is held back: the emission
 * stops before it reaches the overlay (connected after us, at
 * adw_toast_overlay_add_toast) and is repeated once the toast has been up
 * TOAST_SHOW_GUARD_MS, which leaves the 500 ms show animation 500 ms to end
 * before the 300 ms hide one. The toast stays on screen that long. (At 300
 * ms, a margin of 100 ms, the crash came back once in some ten runs of
 * app-daily-context on a loaded machine, in the same place: the animations
 * run on frame times, which a slow frame can move by that much.) */
#define TOAST_SHOW_GUARD_MS 800
/* The show animation ends on a frame, not on the clock: a window that drew
 * no frame for a second (a loaded machine, a long screenshot, a chat saved
 * on a slow disk) ended it only on its next frame, in the same frame as a
 * hide animation started after the guard's wall-clock time, and libadwaita
 * ran the hide's "done" first (tick callbacks run newest first): the record
 * freed, then the show's "done" on it (app-remote, app-daily-context, in
 * adw_animation_skip). So the guard is counted on the frame clock, and a
 * dismissal waits for a frame drawn past it, when the show animation has
 * ended whatever the frames' pace. While held, it is tried again this
 * often. */
#define TOAST_RETRY_MS 50

/* The time of the window's frame clock, on which libadwaita's animations
 * run (0 before it has one: an unmapped overlay animates nothing). */
static gint64
toast_frame_time (TernWindow *self)
{
  GdkFrameClock *clock = gtk_widget_get_frame_clock (GTK_WIDGET (self));

  return clock != NULL ? gdk_frame_clock_get_frame_time (clock) : 0;
}

static gboolean
toast_guard_needed (void)
{
  return adw_get_major_version () == 1 && adw_get_minor_version () < 3;
}

static gboolean
repeat_toast_dismissal (gpointer data)
{
  AdwToast *t = data;

  g_object_set_data (G_OBJECT (t), "tern-dismissal-held", NULL);
  /* Not adw_toast_dismiss: the toast's own handler, which ran first the
   * first time, has already forgotten its overlay, and that call would do
   * nothing. The overlay's handler is still connected. */
  g_signal_emit_by_name (t, "dismissed");
  return G_SOURCE_REMOVE;
}

/* The overlay may still animate a dismissed toast: the reference kept in
 * self->toasts lasts until a later toast is added at least
 * TOAST_FORGET_MS after the dismissal (dropping it at "dismissed" freed a
 * toast under libadwaita 1.2's hide animation), so that a long session's
 * toasts do not pile up. */
/* Whether the overlay shows T (or hides it): its title is then in the
 * overlay's toast widget. One queued has no animation to outlive, and its
 * dismissal starts none: held as well, each in a queue of five waited for
 * the one before it. */
static gboolean
toast_on_screen (AdwToast *t)
{
  GtkWidget *title = adw_toast_get_custom_title (t);

  return title == NULL || gtk_widget_get_parent (title) != NULL;
}

void
_tern_window_on_toast_dismissed (AdwToast   *t,
                    TernWindow *self)
{
  gint64 now = g_get_monotonic_time ();
  gboolean on_screen = toast_on_screen (t);

  if (toast_guard_needed () && on_screen && g_object_get_data (G_OBJECT (t), "tern-dismissed") == NULL)
    {
      /* A toast starts showing when it is added, or when the one before it
       * is dismissed: not before the later of those, which this takes. */
      const gint64 *added = g_object_get_data (G_OBJECT (t), "tern-added-ft");
      gint64 safe = MAX (added != NULL ? *added : 0, self->toast_dismissed_ft) +
                    TOAST_SHOW_GUARD_MS * G_TIME_SPAN_MILLISECOND;

      if (self->toast_frame_ft < safe)
        {
          g_signal_stop_emission_by_name (t, "dismissed");
          /* Checked again when repeated: a toast shown in the meantime
           * (the one before it dismissed) moves "safe" on. */
          if (g_object_get_data (G_OBJECT (t), "tern-dismissal-held") == NULL)
            {
              g_object_set_data (G_OBJECT (t), "tern-dismissal-held", GINT_TO_POINTER (1));
              g_timeout_add_full (G_PRIORITY_DEFAULT, TOAST_RETRY_MS, repeat_toast_dismissal,
                                  g_object_ref (t), g_object_unref);
            }
          return;
        }
    }
  g_object_set_data (G_OBJECT (t), "tern-dismissed", GINT_TO_POINTER (1));
  if (g_object_get_data (G_OBJECT (t), "tern-dismissed-us") == NULL)
    {
      gint64 *at = g_new (gint64, 1);

      *at = now;
      g_object_set_data_full (G_OBJECT (t), "tern-dismissed-us", at, g_free);
    }
  /* The next toast in the queue starts showing now. */
  if (on_screen)
    self->toast_dismissed_ft = toast_frame_time (self);
}

/* Long after the overlay's hide animation (300 ms) */
#define TOAST_FORGET_MS 2000

/* Every toast the window shows goes through here before
 * adw_toast_overlay_add_toast, so that our "dismissed" handler runs before
 * the overlay's: its time noted, kept until TOAST_FORGET_MS after its
 * dismissal (the toasts dismissed that long ago go now). */
void
_tern_window_keep_toast (TernWindow *self,
                         AdwToast   *t)
{
  gint64 *added = g_new (gint64, 1);
  gint64 *added_ft = g_new (gint64, 1);

  *added = g_get_monotonic_time ();
  *added_ft = toast_frame_time (self);
  g_object_set_data_full (G_OBJECT (t), "tern-added-ft", added_ft, g_free);
  for (guint i = self->toasts->len; i-- > 0;)
    {
      const gint64 *gone = g_object_get_data (g_ptr_array_index (self->toasts, i),
                                              "tern-dismissed-us");

      if (gone != NULL && *added - *gone > TOAST_FORGET_MS * G_TIME_SPAN_MILLISECOND)
        g_ptr_array_remove_index (self->toasts, i);
    }
  g_object_set_data_full (G_OBJECT (t), "tern-added-us", added, g_free);
  g_ptr_array_add (self->toasts, g_object_ref (t));
  g_signal_connect_object (t, "dismissed", G_CALLBACK (_tern_window_on_toast_dismissed), self, 0);
}

/* The toast overlay covers the window, so a toast sat on the composer,
 * hiding what was being typed (and, on a narrow window, the Send button).
 * On the chat page its bottom margin is raised by the height of the stats
 * bar and the composer (follow_toast_lift keeps it so): a rule for this
 * window's overlay (named for it), which the toasts queued behind it take
 * too. 12 px is libadwaita's own margin around a toast. */
/* The overlay centres a toast in the window, so a toast also lay over the
 * chat list and over the system prompt panel beside the chat, where the user
 * may be typing. Side margins as wide as those keep it over the chat column
 * (where the panel is folded over the chat, the toast stays over the whole). */
static void
chat_column_sides (TernWindow *self,
                   int        *left,
                   int        *right)
{
  graphene_rect_t column;
  int width = gtk_widget_get_width (GTK_WIDGET (self->toast_overlay));

  *left = *right = 0;
  if (!gtk_widget_get_mapped (GTK_WIDGET (self->main_stack))
      || !gtk_widget_compute_bounds (GTK_WIDGET (self->main_stack),
                                     GTK_WIDGET (self->toast_overlay), &column))
    return;
  *left = MAX (0, (int) column.origin.x);
  *right = MAX (0, width - (int) (column.origin.x + column.size.width));
}

static void
lift_toasts (TernWindow *self)
{
  int lift = 0, left, right;

  if (g_strcmp0 (gtk_stack_get_visible_child_name (self->main_stack), "chat") == 0
      && gtk_widget_get_mapped (GTK_WIDGET (self->composer)))
    lift = gtk_widget_get_height (GTK_WIDGET (self->stats_bar))
           + gtk_widget_get_height (GTK_WIDGET (self->composer))
           /* (0 while it is hidden) */
           + gtk_widget_get_height (GTK_WIDGET (self->jump_revealer));
  chat_column_sides (self, &left, &right);
  if (lift == self->toast_lift_px && left == self->toast_left_px && right == self->toast_right_px)
    return;
  self->toast_lift_px = lift;
  self->toast_left_px = left;
  self->toast_right_px = right;
  {
    /* Moved over the column, not narrowed to it by side margins: margins
     * count in the toast's least width, which the overlay asks of the
     * window, so that with the sidebar or the system prompt panel open the
     * window could not be narrowed past the toast (435 px, 776 with the
     * panel, app-daily-narrow). A transform moves the toast
     * and where its buttons take clicks, and is no part of any size; the
     * label's width already fits the column (toast_chars_for), and the
     * overlay centres the toast in its whole width. */
    g_autofree char *css = g_strdup_printf ("#%s > toast { margin-bottom: %dpx; "
                                            "margin-left: 12px; margin-right: 12px; "
                                            "transform: translateX(%dpx); }",
                                            gtk_widget_get_name (GTK_WIDGET (self->toast_overlay)),
                                            lift + 12, (left - right) / 2);
    G_GNUC_BEGIN_IGNORE_DEPRECATIONS
    gtk_css_provider_load_from_data (self->toast_lift, css, -1);
    G_GNUC_END_IGNORE_DEPRECATIONS
  }
}

/* The height of the toast on screen (while it hides too), 0 when none. */
static int
toast_height (TernWindow *self)
{
  int height = 0;

  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->toast_overlay)); c != NULL;
       c = gtk_widget_get_next_sibling (c))
    if (g_strcmp0 (gtk_widget_get_css_name (c), "toast") == 0 && gtk_widget_get_mapped (c))
      height = MAX (height, gtk_widget_get_height (c));
  return height;
}

/* Lifted above the composer, a toast lay over the bottom of the transcript:
 * the answer just written ended under it, its figures hidden until the
 * toast went. While one is up, the transcript ends that much lower (the
 * toast's height and its 12 px margin below the toast's own), so that its
 * end, which the view follows, is above the toast. */
static void
pad_transcript (TernWindow *self,
                int         toast)
{
  int margin = self->transcript_margin_px + (toast > 0 ? toast + 12 : 0);

  if (gtk_widget_get_margin_bottom (GTK_WIDGET (self->message_box)) != margin)
    gtk_widget_set_margin_bottom (GTK_WIDGET (self->message_box), margin);
}

static gboolean
any_toast_up (TernWindow *self)
{
  for (guint i = 0; i < self->toasts->len; i++)
    if (g_object_get_data (g_ptr_array_index (self->toasts, i), "tern-dismissed") == NULL)
      return TRUE;
  return FALSE;
}

static void refit_toasts (TernWindow *self);

/* The composer grows as lines are typed, and the stats bar can wrap when
 * the window narrows: while a toast is up its lift follows them frame by
 * frame (measured when it was added only, a toast sat on the lines typed
 * after it). lift_toasts changes nothing while the heights stay. */
static gboolean
follow_toast_lift (GtkWidget     *widget,
                   GdkFrameClock *clock,
                   gpointer       data)
{
  TernWindow *self = TERN_WINDOW (widget);
  int toast = toast_height (self);

  (void) data;
  /* Frames drawn: the toasts' show animations have ended up to here. */
  self->toast_frame_ft = gdk_frame_clock_get_frame_time (clock);
  pad_transcript (self, toast);
  if (!any_toast_up (self) && toast == 0)
    {
      self->toast_lift_tick = 0;
      return G_SOURCE_REMOVE;
    }
  lift_toasts (self);
  refit_toasts (self);
  return G_SOURCE_CONTINUE;
}

void
_tern_window_add_toast (TernWindow *self,
                        AdwToast   *t)
{
  lift_toasts (self);
  adw_toast_overlay_add_toast (self->toast_overlay, t);
  if (self->toast_lift_tick == 0)
    self->toast_lift_tick = gtk_widget_add_tick_callback (GTK_WIDGET (self), follow_toast_lift,
                                                          NULL, NULL);
}

/* Plain text for a libadwaita property read as Pango markup (a toast's
 * title, a status page's description): the text can hold a file name, a
 * chat title or a model's token, and "Tom & Jerry.png" failed to parse,
 * leaving it empty with a Gtk-WARNING. A name may also be invalid UTF-8,
 * which Pango refuses. */
static char *
plain_as_markup (const char *text)
{
  g_autofree char *valid = g_utf8_make_valid (text != NULL ? text : "", -1);

  return g_markup_escape_text (valid, -1);
}

/* libadwaita's own toast title is one line cut with "…": the advice at the
 * end of a long message ("Shorten it, or raise the context size in
 * Preferences.") was never seen. The title shown is a label that wraps
 * instead, up to a height that still leaves the window its composer. */
#define TOAST_MAX_LINES 8

/* The toast overlay sizes a toast for its natural width and gives it only
 * that height, even when the window is narrower and the text takes more
 * lines there (libadwaita 1.2): a label as wide as the chat column allows. */
static int
toast_chars_for (TernWindow *self,
                 GtkWidget  *label)
{
  int left, right, width;
  PangoContext *context = gtk_widget_get_pango_context (label);
  PangoFontMetrics *metrics = pango_context_get_metrics (context, NULL, NULL);
  int char_width = pango_font_metrics_get_approximate_char_width (metrics);

  pango_font_metrics_unref (metrics);
  chat_column_sides (self, &left, &right);
  width = gtk_widget_get_width (GTK_WIDGET (self->toast_overlay)) - left - right;

  /* Around the text: the toast's margins and padding, its close button. */
  width -= 120;
  if (width <= 0 || char_width <= 0)
    return 56;
  return CLAMP (width * PANGO_SCALE / char_width, 16, 56);
}

/* A toast up while the window narrows: its label kept the width it was
 * made for, and the overlay gave it that width's height, so that at 360 px
 * the lines above and below were cut off. Fitted again when the chat
 * column's width changes. */
static void
refit_toasts (TernWindow *self)
{
  int left, right, width;

  chat_column_sides (self, &left, &right);
  width = gtk_widget_get_width (GTK_WIDGET (self->toast_overlay)) - left - right;
  if (width == self->toast_fit_px)
    return;
  self->toast_fit_px = width;
  for (guint i = 0; i < self->toasts->len; i++)
    {
      GtkWidget *label = adw_toast_get_custom_title (g_ptr_array_index (self->toasts, i));

      if (GTK_IS_LABEL (label))
        gtk_label_set_max_width_chars (GTK_LABEL (label), toast_chars_for (self, label));
    }
}

AdwToast *
_tern_window_toast_new (TernWindow *self,
                        const char *text)
{
  g_autofree char *valid = g_utf8_make_valid (text != NULL ? text : "", -1);
  GtkWidget *label = gtk_label_new (valid);
  AdwToast *t;

  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_lines (GTK_LABEL (label), TOAST_MAX_LINES);
  gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
  gtk_widget_add_css_class (label, "heading");
  gtk_label_set_max_width_chars (GTK_LABEL (label), toast_chars_for (self, label));
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_widget_set_hexpand (label, TRUE);
  /* No title beside it: libadwaita 1.2 drops the title when a custom one
   * is set. */
  t = g_object_new (ADW_TYPE_TOAST, "custom-title", label, NULL);
  g_object_set_data_full (G_OBJECT (t), "tern-text", g_steal_pointer (&valid), g_free);
  return t;
}

const char *
_tern_window_toast_get_text (AdwToast *toast)
{
  return g_object_get_data (G_OBJECT (toast), "tern-text");
}

static void
toast_set_text (AdwToast   *toast,
                const char *text)
{
  GtkWidget *label = adw_toast_get_custom_title (toast);

  g_object_set_data_full (G_OBJECT (toast), "tern-text",
                          g_utf8_make_valid (text != NULL ? text : "", -1), g_free);
  gtk_label_set_text (GTK_LABEL (label), _tern_window_toast_get_text (toast));
}

/* A plain toast (no button) showing or queued that says TEXT, or NULL. One
 * whose dismissal is held back (_tern_window_on_toast_dismissed) is no
 * longer the overlay's to show again. */
static AdwToast *
plain_toast_saying (TernWindow *self,
                    const char *text)
{
  g_autofree char *valid = g_utf8_make_valid (text != NULL ? text : "", -1);

  for (guint i = self->toasts->len; i-- > 0;)
    {
      AdwToast *t = g_ptr_array_index (self->toasts, i);

      if (g_object_get_data (G_OBJECT (t), "tern-dismissed") == NULL
          && g_object_get_data (G_OBJECT (t), "tern-dismissal-held") == NULL
          && adw_toast_get_button_label (t) == NULL
          && g_strcmp0 (_tern_window_toast_get_text (t), valid) == 0)
        return t;
    }
  return NULL;
}

void
_tern_window_toast (TernWindow *self,
       const char *text)
{
  AdwToast *t = plain_toast_saying (self, text);

  /* The same words again (an image refused twice in a row) showed the
   * same toast twice, one after the other. Added again, the toast on
   * screen starts its time again, and one queued comes next. */
  if (t != NULL)
    {
      _tern_window_add_toast (self, g_object_ref (t));
      return;
    }
  t = _tern_window_toast_new (self, text);
  adw_toast_set_timeout (t, 4);
  _tern_window_keep_toast (self, t);
  _tern_window_add_toast (self, t);
}

static void
on_context_toast_dismissed (AdwToast   *t,
                            TernWindow *self)
{
  if (t == self->context_toast)
    self->context_toast = NULL;
}

/* Once a chat is past its context, every turn leaves out more of it: one
 * toast per turn queued behind the last (4 s each), and a minute after the
 * last turn they still came, each with an older count, over other chats.
 * The one still up (or waiting) goes; the new one has the current count. */
static void
dismiss_context_toast (TernWindow *self)
{
  AdwToast *old = self->context_toast;

  self->context_toast = NULL;
  g_clear_handle_id (&self->context_toast_wait, g_source_remove);
  if (old != NULL && g_object_get_data (G_OBJECT (old), "tern-dismissed") == NULL)
    adw_toast_dismiss (old);
}

/* T's widget is on screen, hiding included (its title is unparented only
 * some time after). */
static gboolean
toast_showing (AdwToast *t)
{
  GtkWidget *title = adw_toast_get_custom_title (t);

  return title != NULL && gtk_widget_get_mapped (title);
}

/* Adds the context's toast, as one that starts showing now. */
static void
add_context_toast (TernWindow *self)
{
  gint64 *added_ft = g_new (gint64, 1);

  /* The dismissal guard counts from when it starts showing. */
  *added_ft = toast_frame_time (self);
  g_object_set_data_full (G_OBJECT (self->context_toast), "tern-added-ft", added_ft, g_free);
  g_set_object (&self->context_toast_shown, self->context_toast);
  _tern_window_add_toast (self, self->context_toast);
}

static gboolean
add_waiting_context_toast (gpointer data)
{
  TernWindow *self = data;

  if (self->context_toast_shown != NULL && toast_showing (self->context_toast_shown))
    return G_SOURCE_CONTINUE;
  self->context_toast_wait = 0;
  if (self->context_toast != NULL
      && g_object_get_data (G_OBJECT (self->context_toast), "tern-dismissed") == NULL)
    add_context_toast (self);
  return G_SOURCE_REMOVE;
}

void
_tern_window_show_context_toast (TernWindow *self,
                                 const char *text)
{
  /* The toast still up (or waiting) takes the new count. Dismissing it and
   * adding another at every turn crashed libadwaita 1.2 within some 40
   * quick turns of a chat past its context (a toast record freed under a
   * running animation, as TOAST_SHOW_GUARD_MS describes; the guard did not
   * cover this churn). */
  if (self->context_toast != NULL
      && g_object_get_data (G_OBJECT (self->context_toast), "tern-dismissed") == NULL)
    {
      toast_set_text (self->context_toast, text);
      return;
    }
  dismiss_context_toast (self);
  self->context_toast = _tern_window_toast_new (self, text);
  adw_toast_set_timeout (self->context_toast, 4);
  _tern_window_keep_toast (self, self->context_toast);
  g_signal_connect_object (self->context_toast, "dismissed",
                           G_CALLBACK (on_context_toast_dismissed), self, 0);
  /* The one before still hiding (its time up, 300 ms to go): the new one
   * came up over it, two toasts on screen at once. It waits until the old
   * one is gone, and takes new words meanwhile, as one up does. */
  if (self->context_toast_shown != NULL && toast_showing (self->context_toast_shown))
    self->context_toast_wait = g_timeout_add (TOAST_RETRY_MS, add_waiting_context_toast, self);
  else
    add_context_toast (self);
}

/* For the tests: the app itself never dismisses a toast. Every toast not
 * yet dismissed is; the main loop runs until each dismissal has reached the
 * overlay (those _tern_window_on_toast_dismissed holds back included), for
 * at most 5 s. */
static gboolean
toast_dismissed (gpointer t)
{
  return g_object_get_data (G_OBJECT (t), "tern-dismissed") != NULL;
}

void
tern_window_dismiss_toasts (TernWindow *self)
{
  g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func (g_object_unref);
  gint64 deadline = g_get_monotonic_time () + 5 * G_TIME_SPAN_SECOND;
  gboolean pending;

  for (guint i = 0; i < self->toasts->len; i++)
    if (!toast_dismissed (g_ptr_array_index (self->toasts, i)))
      g_ptr_array_add (all, g_object_ref (g_ptr_array_index (self->toasts, i)));
  for (guint i = 0; i < all->len; i++)
    adw_toast_dismiss (g_ptr_array_index (all, i));
  do
    {
      pending = FALSE;
      for (guint i = 0; i < all->len && !pending; i++)
        pending = !toast_dismissed (g_ptr_array_index (all, i));
      if (pending)
        {
          g_main_context_iteration (NULL, FALSE);
          g_usleep (2 * G_TIME_SPAN_MILLISECOND);
        }
    }
  while (pending && g_get_monotonic_time () < deadline);
}

gboolean
_tern_window_toast_ends (TernWindow *self,
                         const char *message)
{
  for (guint i = 0; message != NULL && i < self->toasts->len; i++)
    {
      AdwToast *t = g_ptr_array_index (self->toasts, i);
      const char *text = _tern_window_toast_get_text (t);

      if (!toast_dismissed (t) && text != NULL && *text != '\0' && g_str_has_suffix (message, text))
        return TRUE;
    }
  return FALSE;
}

void
_tern_window_set_error (TernWindow *self,
           const char *message)
{
  g_free (self->last_error);
  self->last_error = g_strdup (message);
  if (message != NULL)
    _tern_window_toast (self, message);
}

gboolean
_tern_window_is_generating (TernWindow *self)
{
  return self->gen_id != 0;
}

void
_tern_window_on_save_error (GObject    *owner,
               const char *message)
{
  _tern_window_set_error (TERN_WINDOW (owner), message);
}

void
_tern_window_save_chat (TernWindow *self)
{
  if (self->chat == NULL || tern_chat_get_n_messages (self->chat) == 0)
    return;
  tern_chat_save_in_background (self->chat, self->chats_dir, G_OBJECT (self), _tern_window_on_save_error);
}

/* The row of message `index`; NULL when it is not drawn (yet). */
static TernMessageRow *
row_at (TernWindow *self,
        guint       index)
{
  GtkWidget *child = gtk_widget_get_first_child (GTK_WIDGET (self->message_box));

  if (index < self->first_row)
    return NULL;
  for (guint i = self->first_row; child != NULL && i < index; i++)
    child = gtk_widget_get_next_sibling (child);
  return child ? TERN_MESSAGE_ROW (child) : NULL;
}

void
_tern_window_mark_last_rows (TernWindow *self)
{
  guint n = tern_chat_get_n_messages (self->chat);
  guint i = self->first_row;

  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->message_box)); c;
       c = gtk_widget_get_next_sibling (c), i++)
    /* Edit goes with the last user message, Regenerate with the last answer. */
    {
      tern_message_row_set_last (TERN_MESSAGE_ROW (c), !_tern_window_is_generating (self) && i + 2 >= n);
      /* Left out of the model's context: shown dimmed, never sent again. */
      if (i < tern_chat_get_context_start (self->chat))
        {
          gtk_widget_add_css_class (c, "tern-out-of-context");
          gtk_widget_set_tooltip_text (c, _("No longer in the model’s context: the conversation outgrew it"));
        }
      else if (gtk_widget_has_css_class (c, "tern-out-of-context"))
        {
          gtk_widget_remove_css_class (c, "tern-out-of-context");
          gtk_widget_set_tooltip_text (c, NULL);
        }
    }
  gtk_stack_set_visible_child_name (self->transcript_stack, n ? "messages" : "empty");
}

static TernMessageRow *
message_row_new (TernWindow        *self,
                 const TernMessage *m)
{
  TernMessageRow *row = tern_message_row_new (m->role, m->text);
  g_autofree char *stats = tern_message_format_stats (m);

  if (m->images_missing > 0 && (stats == NULL || *stats == '\0'))
    {
      g_free (stats);
      stats = g_strdup_printf (ngettext ("%u image of this message is missing from the chat’s folder",
                                         "%u images of this message are missing from the chat’s folder",
                                         m->images_missing),
                               m->images_missing);
    }
  tern_message_row_set_stats (row, stats);
  tern_message_row_set_error (row, m->error);
  /* Flash answers stand alone: one written from a re-pinned, different
   * system prompt may answer the same question differently, and nothing
   * else in the transcript would say why. */
  /* An answer that wrote nothing shows no mark: the next one written has
   * it (a file of an earlier version may still hold it here). */
  gboolean marked = !tern_message_wrote_nothing (m);

  if (marked && m->prompt_changed && m->alone)
    tern_message_row_set_notice (row, _("System prompt changed · Flash: the turns above were not sent"));
  else if (marked && m->prompt_changed)
    tern_message_row_set_notice (row, _("System prompt changed"));
  /* Switched from Chat to Flash: the transcript above stays, unsent. */
  else if (marked && m->alone)
    tern_message_row_set_notice (row, _("Flash: the turns above were not sent"));
  if (m->drafted != NULL && m->drafted->len == strlen (m->text))
    tern_message_row_set_drafted (row, m->drafted->data);
  tern_message_row_set_images (row, m->images);
  tern_message_row_set_tint (row, g_settings_get_boolean (self->settings, "tint-drafted"));
  return row;
}

TernMessageRow *
_tern_window_add_row (TernWindow        *self,
                      const TernMessage *m)
{
  TernMessageRow *row = message_row_new (self, m);

  gtk_box_append (self->message_box, GTK_WIDGET (row));
  return row;
}

void
_tern_window_remove_rows_from (TernWindow *self,
                  guint       index)
{
  TernMessageRow *row;

  if (index < self->first_row)
    {
      GtkWidget *child;

      while ((child = gtk_widget_get_first_child (GTK_WIDGET (self->message_box))) != NULL)
        gtk_box_remove (self->message_box, child);
      self->first_row = index;
      return;
    }
  while ((row = row_at (self, index)) != NULL)
    gtk_box_remove (self->message_box, GTK_WIDGET (row));
}

/* The context in use: what the last answer of this chat left in the KV
 * (chat) or needed (flash), else the pinned system prompt. */
void
_tern_window_update_context_gauge (TernWindow *self)
{
  int used = self->n_pin;
  guint n = self->chat ? tern_chat_get_n_messages (self->chat) : 0;

  for (guint i = n; i > tern_chat_get_context_start (self->chat); i--)
    {
      TernMessage *m = tern_chat_get_message (self->chat, i - 1);

      /* A message too long for the context: what it needs, past the
       * context's size. Passed over, the gauge read the turns before it,
       * as if the chat fitted (a Regenerate refused for the same reason
       * read its kept answer's use, capped: "512 / 512"). */
      if (m->has_stats && m->error != NULL && m->stats.generated_tokens == 0
          && m->stats.error_code == TN_ERR_OVERFLOW && m->stats.overflow_tokens > 0)
        {
          used = MAX (used, m->stats.overflow_tokens);
          break;
        }
      /* An answer cut off at the end of the context has an error and
       * filled the context: passed over, the gauge showed the answer
       * before it beside "the context is full". */
      if (m->has_stats && (m->error == NULL || m->stats.generated_tokens > 0))
        {
          used = MAX (used, m->stats.restored_tokens + m->stats.prompt_tokens
                              + m->stats.generated_tokens);
          break;
        }
    }
  tern_stats_bar_set_context (self->stats_bar, used, self->n_ctx, self->kv_bytes);
}

/* The stats bar as the chat now stands: the figures of its last answer
 * that ran, or none. After Edit Last it still read the figures of the
 * answer taken back, and the gauge the context that answer had filled. */
void
_tern_window_show_last_figures (TernWindow *self)
{
  guint n = self->chat ? tern_chat_get_n_messages (self->chat) : 0;

  tern_stats_bar_reset (self->stats_bar);
  for (guint i = n; i > 0; i--)
    {
      TernMessage *m = tern_chat_get_message (self->chat, i - 1);
      const char *outcome = NULL;

      if (!g_str_equal (m->role, "assistant") || !m->has_stats)
        continue;
      if (m->error != NULL)
        outcome = g_strcmp0 (m->stop_reason, "context full") == 0 ? _("Cut off") : _("Failed");
      /* As on_finished: the row says cut off by the Answer Length Limit. */
      else if (!m->cancelled && g_strcmp0 (m->stop_reason, "limit") == 0)
        outcome = _("Cut off");
      tern_stats_bar_finish (self->stats_bar, &m->stats, m->cancelled, outcome);
      break;
    }
  _tern_window_update_context_gauge (self);
}

/* A saved chat can be read without a model: the transcript shows as soon
 * as the chat has messages; the start page only stands in for an empty
 * chat. (The loading page stays while a model loads.) */
void
_tern_window_update_main_page (TernWindow *self)
{
  if (self->load_id != 0)
    return;
  gtk_stack_set_visible_child_name (self->main_stack, _tern_window_chat_page (self));
}

/* The text being written in a saved chat goes to its file, so that it is
 * there again after the window is closed (pictures stay in memory only:
 * they are saved with the message they are sent with). A chat with no
 * message has no file, and keeps its text for as long as the window. */
static void
keep_draft (TernWindow *self,
            TernChat   *chat)
{
  g_autofree char *text = tern_composer_get_text (self->composer);

  /* A chat out of the list is one just deleted (its Undo toast up): the
   * text stays with it in memory, for Undo's save. Saved here, its file
   * came back (the chat too, at the next start), or, where the delete had
   * left a file Tern cannot read, a copy under a new id. */
  if (chat != NULL && tern_chat_set_draft (chat, text) && tern_chat_get_n_messages (chat) > 0
      && _tern_window_chat_in_list (self, chat, NULL))
    tern_chat_save_in_background (chat, self->chats_dir, G_OBJECT (self), _tern_window_on_save_error);
}

/* A long chat opens with its last TRANSCRIPT_BATCH messages drawn, and the
 * ones before come a batch at a time as the view nears the top: each
 * message is a row of some 40 widgets, and a 600-message chat drew 23,000
 * of them before it showed anything (3-5 s of a frozen window; APP.md). */
#define TRANSCRIPT_BATCH 40

static void stop_drawing_earlier (TernWindow *self);

/* The main page for the chat shown once no model is loading: a newer
 * Tern's chat shows its messages when this version read them (read-only:
 * the actions that write are off), else it is explained, not opened. */
const char *
_tern_window_chat_page (TernWindow *self)
{
  gboolean has_messages = self->chat != NULL && tern_chat_get_n_messages (self->chat) > 0;

  if (self->chat != NULL && tern_chat_is_newer (self->chat) && !has_messages)
    {
      /* One page for both kinds of chat this version cannot read. */
      if (tern_chat_is_too_large (self->chat))
        {
          adw_status_page_set_title (self->newer_page, _("Too Large to Open"));
          adw_status_page_set_description (self->newer_page,
                                           _("This chat’s file is larger than this version of "
                                             "Tern reads (64 MiB). It is left exactly as it is: "
                                             "open it with a newer Tern, or delete it."));
        }
      else
        {
          TernChatHeadOnly head_only = tern_chat_get_head_only (self->chat);
          const char *text;

          /* Read from its head only: why its messages cannot be shown. */
          if (head_only == TERN_CHAT_HEAD_ONLY_LARGE)
            text = _("This chat was saved by a newer version of Tern and its file is larger "
                     "than this version reads (64 MiB), so its messages cannot be shown here. "
                     "It is left exactly as it is: open it with the newer Tern, or update this "
                     "one.");
          else if (head_only == TERN_CHAT_HEAD_ONLY_UNREAD)
            text = _("This chat was saved by a newer version of Tern, and this version can "
                     "read only its beginning (its title), not its messages. It is left "
                     "exactly as it is: open it with the newer Tern, or update this one.");
          else
            text = _("This chat was saved by a newer version of Tern, in a format this "
                     "version cannot read. It is left exactly as it is: open it with the "
                     "newer Tern, or update this one.");
          adw_status_page_set_title (self->newer_page, _("Saved by a Newer Tern"));
          adw_status_page_set_description (self->newer_page, text);
        }
      return "newer";
    }
  return self->model_loaded || has_messages ? "chat" : "no-model";
}

/* Where the window is, for the next start (open_last_chat): written as
 * the user moves, so that a crash or a logout keeps it too. */
static void
remember_chat (TernWindow *self)
{
  g_autofree char *last = g_settings_get_string (self->settings, "last-chat");
  const char *id = self->chat != NULL ? tern_chat_get_id (self->chat) : "";

  if (!g_str_equal (last, id))
    g_settings_set_string (self->settings, "last-chat", id);
}

/* The chat the window showed when it closed, as GNOME's apps come back
 * where the user was: a new chat at every start lost the user's place.
 * FALSE (a new chat, then) when it is no longer listed: deleted, not
 * readable by this version, or a new chat never written to (not saved). */
static gboolean
open_last_chat (TernWindow *self)
{
  g_autofree char *id = g_settings_get_string (self->settings, "last-chat");
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->chats));

  if (*id == '\0')
    return FALSE;
  for (guint i = 0; i < n; i++)
    {
      g_autoptr(TernChat) chat = g_list_model_get_item (G_LIST_MODEL (self->chats), i);

      if (g_str_equal (tern_chat_get_id (chat), id))
        {
          _tern_window_show_chat (self, chat);
          return TRUE;
        }
    }
  return FALSE;
}

void
_tern_window_show_chat (TernWindow *self,
           TernChat   *chat)
{
  if (chat != self->chat)
    {
      const char *mode = tern_chat_get_mode (chat);

      tern_stats_bar_reset (self->stats_bar);
      /* It spoke of the chat left. */
      dismiss_context_toast (self);
      self->edit_draft_kept = FALSE;
      /* What was being written stays with its chat, as in a mail client:
       * a picture attached for one chat was sent with the next one's
       * question. Kept in memory, for as long as the window is open. */
      if (self->chat != NULL)
        {
          keep_draft (self, self->chat);
          g_object_set_data_full (G_OBJECT (self->chat), "tern-draft",
                                  tern_composer_take_draft (self->composer),
                                  (GDestroyNotify) tern_composer_draft_free);
        }
      {
        g_autoptr(TernComposerDraft) draft = g_object_steal_data (G_OBJECT (chat), "tern-draft");

        if (draft != NULL)
          tern_composer_restore_draft (self->composer, draft);
        else
          tern_composer_set_text (self->composer,
                                  tern_chat_get_draft (chat) ? tern_chat_get_draft (chat) : "");
      }
      /* A chat goes on in the mode it was written in: a multi-turn chat
       * sent in Flash would lose its history, and be saved as a Flash one. */
      if (tern_chat_get_n_messages (chat) > 0 && mode != NULL
          && (g_str_equal (mode, "chat") || g_str_equal (mode, "flash")))
        {
          g_autofree char *current = g_settings_get_string (self->settings, "mode");

          if (!g_str_equal (current, mode))
            g_settings_set_string (self->settings, "mode", mode);
        }
    }
  /* What was owed to the chat left is not owed to this one. */
  if (chat != self->chat)
    {
      self->regenerated_prompt_changed = FALSE;
      self->regenerated_alone = FALSE;
    }
  g_set_object (&self->chat, chat);
  remember_chat (self);
  /* The list's highlight names the chat shown, however it was opened. */
  _tern_window_select_current_chat (self);
  _tern_window_remove_rows_from (self, 0);
  stop_drawing_earlier (self);
  self->first_row = tern_chat_get_n_messages (chat) > TRANSCRIPT_BATCH
                      ? tern_chat_get_n_messages (chat) - TRANSCRIPT_BATCH
                      : 0;
  for (guint i = self->first_row; i < tern_chat_get_n_messages (chat); i++)
    _tern_window_add_row (self, tern_chat_get_message (chat, i));
  _tern_window_mark_last_rows (self);
  _tern_window_scroll_to_end (self);
  _tern_window_update_context_gauge (self);
  _tern_window_update_tint_legend (self);
  _tern_window_update_actions (self);
  _tern_window_update_main_page (self);
}

gboolean
_tern_window_chat_in_list (TernWindow *self,
              TernChat   *chat,
              guint      *position)
{
  return g_list_store_find (self->chats, chat, position);
}

void
_tern_window_select_current_chat (TernWindow *self)
{
  guint pos;

  if (_tern_window_chat_in_list (self, self->chat, &pos))
    gtk_list_box_select_row (self->chat_list, gtk_list_box_get_row_at_index (self->chat_list,
                                                                             (int) pos));
}

void
_tern_window_new_chat (TernWindow *self)
{
  g_autoptr(TernChat) chat = NULL;
  g_autofree char *mode = g_settings_get_string (self->settings, "mode");

  /* An empty chat is reused rather than stacked: the current one, or one
   * further down the list (moved to the top). */
  /* (A newer Tern's chat has none that this version read: not empty.) */
  if (self->chat != NULL && tern_chat_get_n_messages (self->chat) == 0
      && !tern_chat_is_newer (self->chat))
    return;
  for (guint i = 0; i < g_list_model_get_n_items (G_LIST_MODEL (self->chats)); i++)
    {
      g_autoptr(TernChat) other = g_list_model_get_item (G_LIST_MODEL (self->chats), i);

      if (tern_chat_get_n_messages (other) == 0 && !tern_chat_is_newer (other))
        {
          g_list_store_remove (self->chats, i);
          g_list_store_insert (self->chats, 0, other);
          _tern_window_show_chat (self, other);
          return;
        }
    }
  chat = tern_chat_new (mode);
  g_list_store_insert (self->chats, 0, chat);
  _tern_window_show_chat (self, chat);
}

/* ---------------------------------------------------------------- images */

/* The composer's refusals and failures (tern-composer.h). */
static void
on_composer_error (TernWindow *self,
                   const char *message)
{
  _tern_window_set_error (self, message);
}

static void
on_vision (TernWindow            *self,
           const TernVisionEvent *ev)
{
  tern_composer_set_vision (self->composer, self->model_loaded, ev->native_tokens,
                            ev->extra_rows, ev->projector, ev->unusable);
  _tern_window_update_actions (self);
}

GtkDropTarget *
tern_window_get_drop_target (TernWindow *self)
{
  return tern_composer_get_drop_target (self->composer);
}

guint
tern_window_get_n_attachments (TernWindow *self)
{
  return tern_composer_get_n_images (self->composer);
}

gboolean
tern_window_is_attaching (TernWindow *self)
{
  return tern_composer_is_busy (self->composer);
}

gboolean
tern_window_has_vision (TernWindow *self)
{
  return tern_composer_has_vision (self->composer);
}

const char *
tern_window_get_image_cost_text (TernWindow *self)
{
  return tern_composer_get_cost_text (self->composer);
}

TernComposer *
tern_window_get_composer (TernWindow *self)
{
  return self->composer;
}

/* -------------------------------------------------------- local server */

/* The server runs on this window's engine thread, so the window starts and
 * stops it; its state belongs to the application, which tells the header
 * and Preferences. */
static TernApplication *
application (TernWindow *self)
{
  GtkApplication *app = gtk_window_get_application (GTK_WINDOW (self));

  return TERN_IS_APPLICATION (app) ? TERN_APPLICATION (app) : NULL;
}

static void
set_server_status (TernWindow *self,
                   const char *url,
                   const char *status)
{
  if (application (self) != NULL)
    tern_application_set_server_state (application (self), url, status);
}

/* The header says so while the server runs (others may be using it). */
static void
on_server_status_changed (TernWindow *self)
{
  const char *url = tern_window_get_server_url (self);

  if (self->server_indicator == NULL) /* disposed */
    return;
  gtk_widget_set_visible (GTK_WIDGET (self->server_indicator), url != NULL);
  if (url != NULL)
    gtk_widget_set_tooltip_text (GTK_WIDGET (self->server_indicator),
                                 tern_window_get_server_status (self));
}

/* Starts, restarts (new port or key) or stops the server as the settings
 * say. It serves the loaded model, so it waits for one. */
void
_tern_window_apply_server (TernWindow *self)
{
  if (!tern_engine_worker_can_serve ())
    {
      set_server_status (self, NULL, _("This build of Tern has no server"));
      return;
    }
  if (g_settings_get_boolean (self->settings, "server-enabled"))
    {
      g_autofree char *key = g_settings_get_string (self->settings, "server-api-key");

      int port = g_settings_get_int (self->settings, "server-port");

      if (!self->model_loaded)
        {
          set_server_status (self, NULL, _("Starts when a model is loaded"));
          return;
        }
      /* Settings written again with the same values change nothing. */
      if (self->server_asked && port == self->server_port
          && g_strcmp0 (key, self->server_key) == 0)
        return;
      self->server_asked = TRUE;
      self->server_port = port;
      g_free (self->server_key);
      self->server_key = g_strdup (key);
      /* The URL of a server being replaced is no longer good. */
      set_server_status (self, NULL, _("Starting…"));
      tern_engine_worker_serve (self->worker, port, key);
    }
  else
    {
      if (self->server_asked)
        tern_engine_worker_stop_serving (self->worker);
      self->server_asked = FALSE;
      set_server_status (self, NULL, _("Off"));
    }
}

static void
on_server_state (TernWindow                 *self,
                 const TernServerStateEvent *ev)
{
  const char *url = ev->url;
  const char *error = ev->error;

  if (ev->running)
    {
      g_autofree char *status = NULL;

      /* Translators: %s is the server's base URL, http://127.0.0.1:8080/v1 */
      status = g_strdup_printf (_("Serving the loaded model at %s"), url);
      set_server_status (self, url, status);
      _tern_window_toast (self, status);
    }
  else if (error != NULL)
    {
      /* A switch left on would claim a server that does not run. */
      self->server_asked = FALSE;
      _tern_window_set_error (self, error);
      g_settings_set_boolean (self->settings, "server-enabled", FALSE);
      set_server_status (self, NULL, error);
    }
  else
    {
      /* Stopped: asked to, or its model is being replaced (model-loaded
       * starts it again). */
      self->server_asked = FALSE;
      set_server_status (self, NULL,
                         g_settings_get_boolean (self->settings, "server-enabled")
                           ? _("Restarting with the new model…") : _("Off"));
    }
}

static void
on_server_setting_changed (TernWindow *self,
                           const char *key)
{
  /* The key takes effect when applied, not at each keystroke of its row. */
  (void) key;
  _tern_window_apply_server (self);
}

/* "application" is not a construct property: it is set after init. */
static void
on_application_set (TernWindow *self)
{
  if (application (self) == NULL)
    return;
  g_signal_connect_object (application (self), "server-status-changed",
                           G_CALLBACK (on_server_status_changed), self, G_CONNECT_SWAPPED);
  on_server_status_changed (self);
}

const char *
tern_window_get_server_url (TernWindow *self)
{
  return application (self) ? tern_application_get_server_url (application (self)) : NULL;
}

const char *
tern_window_get_server_status (TernWindow *self)
{
  return application (self) ? tern_application_get_server_status (application (self)) : _("Off");
}

/* The legend says what the tint means wherever a tint can be seen: the
 * tint on, and speculation on or an answer of this chat with drafted
 * tokens. */
void
_tern_window_update_tint_legend (TernWindow *self)
{
  gboolean shown = FALSE;

  if (self->stats_bar == NULL) /* disposed */
    return;
  if (g_settings_get_boolean (self->settings, "tint-drafted"))
    {
      shown = g_settings_get_boolean (self->settings, "speculation");
      for (guint i = 0; !shown && self->chat != NULL && i < tern_chat_get_n_messages (self->chat); i++)
        {
          TernMessage *m = tern_chat_get_message (self->chat, i);

          shown = m->drafted != NULL && memchr (m->drafted->data, 1, m->drafted->len) != NULL;
        }
    }
  tern_stats_bar_set_tint_legend (self->stats_bar, shown);
}

static void
on_tint_changed (TernWindow *self)
{
  gboolean tint = g_settings_get_boolean (self->settings, "tint-drafted");

  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->message_box)); c;
       c = gtk_widget_get_next_sibling (c))
    tern_message_row_set_tint (TERN_MESSAGE_ROW (c), tint);
  _tern_window_update_tint_legend (self);
}

/* The tint is the theme's accent colour, which differs in the dark style. */
static void
on_dark_changed (TernWindow *self)
{
  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->message_box)); c;
       c = gtk_widget_get_next_sibling (c))
    tern_message_row_refresh (TERN_MESSAGE_ROW (c));
  _tern_window_update_tint_legend (self);
}

static void
show_loading (TernWindow *self,
              const char *path)
{
  g_autofree char *name = g_filename_display_basename (path);
  g_autofree char *line = NULL;
  GStatBuf sb;

  g_free (self->loading_path);
  self->loading_path = g_strdup (path);
  /* Its size says how long to expect before the engine's first progress
   * report (on_load_progress). */
  if (g_stat (path, &sb) == 0 && sb.st_size > 0)
    {
      g_autofree char *size = tern_app_format_size ((guint64) sb.st_size);
      /* Translators: a model file's name and size */
      line = g_strdup_printf (_("%s (%s)"), name, size);
    }
  {
    g_autofree char *markup = plain_as_markup (line ? line : name);

    adw_status_page_set_description (self->loading_page, markup);
  }
  gtk_widget_set_visible (GTK_WIDGET (self->loading_progress), FALSE);
  gtk_progress_bar_set_fraction (self->loading_progress, 0.0);
  gtk_widget_set_visible (GTK_WIDGET (self->loading_spinner), TRUE);
  gtk_spinner_start (self->loading_spinner);
  gtk_stack_set_visible_child_name (self->main_stack, "loading");
  _tern_window_update_actions (self);
}

void
_tern_window_end_loading (TernWindow *self)
{
  self->load_id = 0;
  gtk_spinner_stop (self->loading_spinner);
  _tern_window_update_main_page (self);
}

/* Loads path, whose drafters and flags come with origin (taken). */
static void
load_model (TernWindow      *self,
            const char      *path,
            TernModelOrigin *origin)
{
  if (_tern_window_is_generating (self))
    {
      /* Open With, the Models window's Use: said, not dropped without a
       * word (the window's own Open is greyed out meanwhile). */
      g_autofree char *name = g_filename_display_basename (path);
      g_autofree char *note =
        g_strdup_printf (_("“%s” was not opened: an answer is being written. Stop it, then open the model again."),
                         name);

      _tern_model_origin_free (origin);
      _tern_window_toast (self, note);
      return;
    }
  _tern_window_set_loading_origin (self, origin);
#ifdef TERN_HAVE_MANAGER
  {
    g_autofree char *url = NULL;
    g_autofree char *model = NULL;

    /* A model of a server (Preferences > Connections, docs/REMOTE.md). */
    if (tern_remote_ref_parse (path, &url, &model))
      {
        g_autofree char *key = tern_connections_get_key (url);
        g_autofree char *full = tern_connections_get_url (url);

        self->load_id = tern_engine_worker_use_remote (self->worker, full, key, model);
        if (key != NULL)
          memset (key, 0, strlen (key));
        memset (full, 0, strlen (full));
        show_loading (self, path);
        return;
      }
  }
#endif
  tern_engine_worker_set_session_size (self->worker,
                                       g_settings_get_int (self->settings, "context-size"),
                                       g_settings_get_int (self->settings, "threads"));
  self->load_id = tern_engine_worker_load_model (self->worker, path);
  show_loading (self, path);
}

void
tern_window_load_model (TernWindow *self,
                        const char *path)
{
  g_return_if_fail (TERN_IS_WINDOW (self));
  load_model (self, path, _tern_model_origin_new (path, NULL, FALSE));
}

void
tern_window_load_tag (TernWindow *self,
                      const char *path,
                      const char *tag,
                      gboolean    apply_flags)
{
  g_return_if_fail (TERN_IS_WINDOW (self));
  load_model (self, path, _tern_model_origin_new (path, tag, apply_flags));
}

void
tern_window_say_model_gone (TernWindow *self,
                            const char *path)
{
  g_autofree char *name = g_filename_display_basename (path);
  g_autofree char *text = NULL;
  AdwToast *t;

  g_return_if_fail (TERN_IS_WINDOW (self));
  /* Translators: at start, the model used last is no longer on disk; %s is
   * its file name */
  text = g_strdup_printf (_("The model %s was removed; pick another."), name);
  t = _tern_window_toast_new (self, text);
  /* Said once, at start: it stays until read and dismissed. */
  adw_toast_set_timeout (t, 0);
  _tern_window_keep_toast (self, t);
  _tern_window_add_toast (self, t);
}

void
tern_window_use_demo_model (TernWindow *self)
{
  g_autofree char *path = tern_demo_model_path (self->settings);

  g_return_if_fail (TERN_IS_WINDOW (self));
  if (_tern_window_is_generating (self))
    return;
  _tern_window_set_loading_origin (self, _tern_model_origin_new (path, NULL, FALSE));
  tern_engine_worker_set_session_size (self->worker,
                                       g_settings_get_int (self->settings, "context-size"),
                                       g_settings_get_int (self->settings, "threads"));
  self->load_id = tern_engine_worker_load_demo (self->worker, path);
  show_loading (self, path);
}

/* The chat of the list's selected row (the keyboard's), else NULL. */
static TernChat *
selected_chat (TernWindow *self)
{
  GtkListBoxRow *row = gtk_list_box_get_selected_row (self->chat_list);
  g_autoptr(TernChat) chat = NULL;

  if (row == NULL)
    return NULL;
  chat = g_list_model_get_item (G_LIST_MODEL (self->chats), (guint) gtk_list_box_row_get_index (row));
  return chat; /* the list holds it */
}

static gboolean
on_chat_list_key (GtkEventControllerKey *controller,
                  guint                  keyval,
                  guint                  keycode,
                  GdkModifierType        state,
                  TernWindow            *self)
{
  TernChat *chat = selected_chat (self);

  (void) controller;
  (void) keycode;
  if ((keyval == GDK_KEY_Tab || keyval == GDK_KEY_KP_Tab || keyval == GDK_KEY_ISO_Left_Tab)
      && (state & (GDK_CONTROL_MASK | GDK_ALT_MASK)) == 0)
    {
      /* Tab leaves the list, as in GNOME's own sidebars; the arrows move
       * between chats. GTK 4.8's list box takes Tab row by row: with fifty
       * chats, fifty presses to reach the composer. With the list
       * unfocusable for a moment, the window's focus chain goes on from
       * the list as a whole, and no row is scrolled to on the way. */
      gboolean back = keyval == GDK_KEY_ISO_Left_Tab || (state & GDK_SHIFT_MASK) != 0;
      gboolean moved;

      gtk_widget_set_can_focus (GTK_WIDGET (self->chat_list), FALSE);
      moved = gtk_widget_child_focus (GTK_WIDGET (self), back ? GTK_DIR_TAB_BACKWARD
                                                              : GTK_DIR_TAB_FORWARD);
      gtk_widget_set_can_focus (GTK_WIDGET (self->chat_list), TRUE);
      return moved;
    }
  if (chat == NULL || (state & (GDK_CONTROL_MASK | GDK_ALT_MASK | GDK_SHIFT_MASK)) != 0)
    return FALSE;
  if (keyval == GDK_KEY_Delete || keyval == GDK_KEY_KP_Delete)
    {
      _tern_window_delete_chat (self, chat);
      return TRUE;
    }
  if (keyval == GDK_KEY_F2)
    {
      _tern_window_rename_chat (self, chat);
      return TRUE;
    }
  return FALSE;
}

/* The context menu of the chat at (x, y) of the list. */
static void
popup_chat_menu (TernWindow *self,
                 double      x,
                 double      y)
{
  GtkListBoxRow *row = gtk_list_box_get_row_at_y (self->chat_list, (int) y);
  g_autoptr(TernChat) chat = NULL;
  g_autoptr(GMenu) menu = g_menu_new ();
  g_autoptr(GMenuItem) rename = NULL;
  g_autoptr(GMenuItem) remove = NULL;
  const char *id;

  if (row == NULL)
    return;
  chat = g_list_model_get_item (G_LIST_MODEL (self->chats), (guint) gtk_list_box_row_get_index (row));
  id = tern_chat_get_id (chat);
  rename = g_menu_item_new (_("_Rename…"), NULL);
  g_menu_item_set_action_and_target_value (rename, "win.rename-chat", g_variant_new_string (id));
  remove = g_menu_item_new (tern_chat_is_newer (chat) ? _("_Delete…") : _("_Delete"), NULL);
  g_menu_item_set_action_and_target_value (remove, "win.remove-chat", g_variant_new_string (id));
  /* A newer Tern's chat keeps the title in its file. */
  if (!tern_chat_is_newer (chat))
    g_menu_append_item (menu, rename);
  g_menu_append_item (menu, remove);
  gtk_popover_menu_set_menu_model (GTK_POPOVER_MENU (self->chat_menu), G_MENU_MODEL (menu));
  gtk_popover_set_pointing_to (GTK_POPOVER (self->chat_menu),
                               &(GdkRectangle) { (int) x, (int) y, 1, 1 });
  gtk_popover_popup (GTK_POPOVER (self->chat_menu));
}

static void
on_chat_list_pressed (GtkGestureClick *gesture,
                      int              n_press,
                      double           x,
                      double           y,
                      TernWindow      *self)
{
  (void) n_press;
  gtk_gesture_set_state (GTK_GESTURE (gesture), GTK_EVENT_SEQUENCE_CLAIMED);
  popup_chat_menu (self, x, y);
}

static void
on_chat_list_long_press (GtkGestureLongPress *gesture,
                         double               x,
                         double               y,
                         TernWindow          *self)
{
  gtk_gesture_set_state (GTK_GESTURE (gesture), GTK_EVENT_SEQUENCE_CLAIMED);
  popup_chat_menu (self, x, y);
}

gboolean
tern_window_export_markdown (TernWindow *self,
                             const char *path,
                             GError    **error)
{
  g_autofree char *markdown = tern_chat_to_markdown (self->chat);

  return g_file_set_contents_full (path, markdown, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644,
                                   error);
}

/* -------------------------------------------------------------- the rest */

/* Following the end of the transcript. Setting the scroll position when
 * the adjustment's upper bound changes is too early: the rows' heights are
 * still being measured (a saved chat opened at its end showed a blank pane
 * until scrolled), and the allocation that follows may move it again. So a
 * frame callback puts the end in view after each layout, as long as the
 * user has not scrolled away, and stops once the end has stayed in view for
 * a few frames; growth (a streamed token, the figures of a finished answer,
 * a taller composer) starts it again. */
#define SETTLED_FRAMES 3

static gboolean
at_end (GtkAdjustment *adj)
{
  return gtk_adjustment_get_value (adj)
         >= gtk_adjustment_get_upper (adj) - gtk_adjustment_get_page_size (adj) - 2;
}

static void
update_jump_button (TernWindow *self)
{
  GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment (self->transcript_scroller);

  gtk_revealer_set_reveal_child (self->jump_revealer,
                                 !self->stick_to_bottom && !at_end (adj));
}

/* A scroll position set by the window, which on_scroll_value must not
 * take for the user's. */
static void
scroll_by_us (TernWindow    *self,
              GtkAdjustment *adj,
              double         value)
{
  self->scrolling = TRUE;
  gtk_adjustment_set_value (adj, value);
  self->scrolling = FALSE;
}

static gboolean
on_follow_tick (GtkWidget     *widget,
                GdkFrameClock *clock,
                gpointer       data)
{
  TernWindow *self = data;
  GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment (self->transcript_scroller);
  double end = gtk_adjustment_get_upper (adj) - gtk_adjustment_get_page_size (adj);

  (void) widget;
  (void) clock;
  if (!self->stick_to_bottom)
    {
      self->follow_tick = 0;
      return G_SOURCE_REMOVE;
    }
  if (gtk_adjustment_get_value (adj) < end - 0.5)
    {
      scroll_by_us (self, adj, end);
      self->settled_frames = 0;
    }
  else if (++self->settled_frames >= SETTLED_FRAMES)
    {
      self->follow_tick = 0;
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
follow_end (TernWindow *self)
{
  self->settled_frames = 0;
  if (self->stick_to_bottom && self->follow_tick == 0)
    self->follow_tick = gtk_widget_add_tick_callback (GTK_WIDGET (self->transcript_scroller),
                                                      on_follow_tick, self, NULL);
}

static void maybe_draw_earlier (TernWindow *self);

/* Where the anchor row's top is in the transcript (the message box's
 * coordinates, which the scroll value moves through); FALSE when it has
 * no place (gone, or not laid out). */
static gboolean
anchor_row_y (TernWindow *self,
              double     *y)
{
  graphene_point_t p;

  if (self->anchor_row == NULL
      || !gtk_widget_compute_point (self->anchor_row, GTK_WIDGET (self->message_box),
                                    &GRAPHENE_POINT_INIT (0, 0), &p))
    return FALSE;
  *y = p.y;
  return TRUE;
}

static void
set_anchor_row (TernWindow *self,
                GtkWidget  *row)
{
  if (self->anchor_row != NULL)
    g_object_remove_weak_pointer (G_OBJECT (self->anchor_row), (gpointer *) &self->anchor_row);
  self->anchor_row = row;
  if (row != NULL)
    g_object_add_weak_pointer (G_OBJECT (row), (gpointer *) &self->anchor_row);
}

/* A batch drawn above the view moves what the view shows down by its
 * height, which is known only once the new rows are measured (over a few
 * layouts). The row that was first stays where it was in the view; the
 * end of the transcript is no reference, since an answer may be growing
 * there. */
static gboolean
on_anchor_tick (GtkWidget     *widget,
                GdkFrameClock *clock,
                gpointer       data)
{
  TernWindow *self = data;
  GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment (self->transcript_scroller);
  double y, want;

  (void) widget;
  (void) clock;
  if (!anchor_row_y (self, &y))
    {
      self->anchor_tick = 0;
      set_anchor_row (self, NULL);
      return G_SOURCE_REMOVE;
    }
  want = y - self->anchor_offset;
  if (fabs (gtk_adjustment_get_value (adj) - want) > 0.5)
    {
      scroll_by_us (self, adj, want);
      self->anchor_frames = 0;
    }
  else if (++self->anchor_frames >= SETTLED_FRAMES)
    {
      self->anchor_tick = 0;
      set_anchor_row (self, NULL);
      /* Short messages: the batch may not have filled the page above. */
      maybe_draw_earlier (self);
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static gboolean
draw_earlier_rows (gpointer data)
{
  TernWindow *self = data;
  GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment (self->transcript_scroller);
  guint from;

  self->earlier_idle = 0;
  if (self->chat == NULL || self->first_row == 0
      || self->first_row > tern_chat_get_n_messages (self->chat))
    return G_SOURCE_REMOVE;
  from = self->first_row > TRANSCRIPT_BATCH ? self->first_row - TRANSCRIPT_BATCH : 0;
  if (self->anchor_tick == 0)
    {
      double y;

      set_anchor_row (self, gtk_widget_get_first_child (GTK_WIDGET (self->message_box)));
      if (!anchor_row_y (self, &y))
        y = 0;
      self->anchor_offset = y - gtk_adjustment_get_value (adj);
    }
  for (guint i = self->first_row; i > from; i--)
    gtk_box_prepend (self->message_box,
                     GTK_WIDGET (message_row_new (self, tern_chat_get_message (self->chat, i - 1))));
  self->first_row = from;
  _tern_window_mark_last_rows (self);
  self->anchor_frames = 0;
  if (self->anchor_tick == 0)
    self->anchor_tick = gtk_widget_add_tick_callback (GTK_WIDGET (self->transcript_scroller),
                                                      on_anchor_tick, self, NULL);
  return G_SOURCE_REMOVE;
}

/* Within a page of the top, the batch before is drawn (after this layout:
 * the tree is not changed while it is being measured), and no other until
 * it has landed: until then the view is not yet where it will be. */
static void
maybe_draw_earlier (TernWindow *self)
{
  GtkAdjustment *adj = gtk_scrolled_window_get_vadjustment (self->transcript_scroller);

  /* A view on its way to the end is not near the top. A long chat opened
   * from one shorter than the view has its first layout with the position
   * still at the short chat's 0: a batch drawn then doubled the rows drawn
   * at open, and had its idle come before the follow's frame, its anchor,
   * taken at the top, would have held the view there against the follow
   * (docs/APP.md). Once the follow lands, the next value-changed asks
   * again. */
  if (self->stick_to_bottom && !at_end (adj))
    return;
  if (self->first_row > 0 && self->earlier_idle == 0 && self->anchor_tick == 0
      && gtk_adjustment_get_value (adj) < gtk_adjustment_get_page_size (adj))
    self->earlier_idle = g_idle_add (draw_earlier_rows, self);
}

static void
stop_drawing_earlier (TernWindow *self)
{
  g_clear_handle_id (&self->earlier_idle, g_source_remove);
  if (self->anchor_tick != 0)
    {
      gtk_widget_remove_tick_callback (GTK_WIDGET (self->transcript_scroller), self->anchor_tick);
      self->anchor_tick = 0;
    }
  set_anchor_row (self, NULL);
}

/* Whether to follow the end is the user's decision, taken from their own
 * scroll only. A layout that shortens the transcript (a toast's padding
 * gone, an answer's text replaced, the window taller) clamps the position,
 * and value-changed comes then too: read as the user's, a clamp that landed
 * on the end turned following back on for a user who had scrolled up, and
 * the next growth moved their view to the end (app-daily-scroll, 1 run in
 * 3 under load). GtkAdjustment (gtk_adjustment_configure) emits a clamp's
 * value-changed with its new bounds already set and announces them only
 * after it: a value-changed that comes with bounds not yet announced is the
 * layout's. */
static void
on_scroll_bounds (GtkAdjustment *adj,
                  GParamSpec    *pspec,
                  TernWindow    *self)
{
  (void) pspec;
  self->seen_upper = gtk_adjustment_get_upper (adj);
  self->seen_page = gtk_adjustment_get_page_size (adj);
  follow_end (self);
  update_jump_button (self);
  maybe_draw_earlier (self);
}

static void
on_scroll_value (GtkAdjustment *adj,
                 TernWindow    *self)
{
  double was = self->seen_value;
  gboolean clamp = gtk_adjustment_get_upper (adj) != self->seen_upper
                   || gtk_adjustment_get_page_size (adj) != self->seen_page;

  self->seen_value = gtk_adjustment_get_value (adj);
  /* Only the user's scrolling decides whether to follow: away from the end
   * stops it, back to the end resumes it. Up is away, however little and
   * whatever the bounds say: they may be a layout behind (an answer's
   * figures just added), and within at_end's 2 px of their end the first
   * small step of a touchpad was taken back by the next frame. A position
   * set down onto the very end is no step away from it. */
  if (!clamp && !self->scrolling)
    {
      double y;

      self->stick_to_bottom = at_end (adj)
                              && (self->seen_value >= was
                                  || self->seen_value >= gtk_adjustment_get_upper (adj)
                                                           - gtk_adjustment_get_page_size (adj) - 0.5);
      if (self->stick_to_bottom)
        follow_end (self);
      /* The user's own scrolling while a batch lands is kept. */
      if (self->anchor_tick != 0 && anchor_row_y (self, &y))
        self->anchor_offset = y - gtk_adjustment_get_value (adj);
    }
  update_jump_button (self);
  maybe_draw_earlier (self);
}

void
_tern_window_scroll_to_end (TernWindow *self)
{
  self->stick_to_bottom = TRUE;
  follow_end (self);
  update_jump_button (self);
}

static void
on_jump_clicked (TernWindow *self)
{
  _tern_window_scroll_to_end (self);
  tern_composer_focus (self->composer);
}

static GtkWidget *
create_chat_row (gpointer item,
                 gpointer data)
{
  GtkWidget *label = gtk_label_new (NULL);
  GtkWidget *box, *note;

  (void) data;
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_ellipsize (GTK_LABEL (label), PANGO_ELLIPSIZE_END);
  gtk_widget_set_margin_top (label, 6);
  gtk_widget_set_margin_bottom (label, 6);
  g_object_bind_property (item, "title", label, "label", G_BINDING_SYNC_CREATE);
  if (!tern_chat_is_newer (TERN_CHAT (item)))
    return label;
  /* Listed, so that the user knows it is there, and marked: it opens to a
   * page that says why it cannot be read here. */
  gtk_widget_set_margin_bottom (label, 0);
  note = gtk_label_new (tern_chat_is_too_large (TERN_CHAT (item))
                       ? _("Too large for this version of Tern")
                       : _("Saved by a newer version of Tern"));
  gtk_label_set_xalign (GTK_LABEL (note), 0);
  gtk_label_set_ellipsize (GTK_LABEL (note), PANGO_ELLIPSIZE_END);
  gtk_widget_set_margin_bottom (note, 6);
  gtk_widget_add_css_class (note, "caption");
  gtk_widget_add_css_class (note, "dim-label");
  box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 2);
  gtk_box_append (GTK_BOX (box), label);
  gtk_box_append (GTK_BOX (box), note);
  return box;
}

static void
on_chat_row_activated (GtkListBox    *box,
                       GtkListBoxRow *row,
                       TernWindow    *self)
{
  g_autoptr(TernChat) chat = NULL;

  (void) box;
  if (_tern_window_is_generating (self))
    return;
  chat = g_list_model_get_item (G_LIST_MODEL (self->chats),
                                (guint) gtk_list_box_row_get_index (row));
  if (chat != self->chat)
    _tern_window_show_chat (self, chat);
  adw_leaflet_navigate (self->leaflet, ADW_NAVIGATION_DIRECTION_FORWARD);
}

/* A window too narrow for both shows the chat, not the list of chats. */
static void
on_folded (TernWindow *self)
{
  if (adw_leaflet_get_folded (self->leaflet))
    adw_leaflet_set_visible_child (self->leaflet, GTK_WIDGET (self->content));
}

static void
on_back_clicked (TernWindow *self)
{
  adw_leaflet_navigate (self->leaflet, ADW_NAVIGATION_DIRECTION_BACK);
}

static int
compare_updated (gconstpointer a,
                 gconstpointer b,
                 gpointer      data)
{
  gint64 ua = tern_chat_get_updated ((TernChat *) a);
  gint64 ub = tern_chat_get_updated ((TernChat *) b);

  (void) data;
  return ua < ub ? 1 : ua > ub ? -1 : 0;
}

/* g_ptr_array_sort's comparison of two of its strings (pointers to them). */
static int
compare_names (gconstpointer a,
               gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The most times a file changed a moment ago is read again (a minute of
 * TERN_CHAT_QUIET_SECONDS apart): one that never stops changing is then
 * left as it is, unread, until the next start. */
#define CHATS_BUSY_TRIES 6

static void read_chat_files (TernWindow *self,
                             GPtrArray  *names,
                             gboolean    again);

/* The toast for chat files the list left out (unless TOAST is FALSE: the
 * user was told of each already), and the log line naming the first of
 * them (always). */
static void
say_unlisted (TernWindow *self,
              const char *message,
              const char *first,
              gboolean    toast)
{
  g_message ("%s (the first: %s)", message, first);
  if (toast)
    _tern_window_set_error (self, message);
}

/* The record of the files left out that the user was told of: beside the
 * chats folder, not in it (a folder synced between machines would carry
 * it, and each machine's user is told on that machine). */
static char *
left_out_state (TernWindow *self)
{
  g_autofree char *parent = g_path_get_dirname (self->chats_dir);

  return g_build_filename (parent, "chats-left-out", NULL);
}

static gboolean
on_chats_busy_timeout (gpointer data)
{
  TernWindow *self = data;
  g_autoptr(GPtrArray) names = g_steal_pointer (&self->chats_busy);

  self->chats_busy_timeout = 0;
  self->chats_busy_tries++;
  read_chat_files (self, names, TRUE);
  return G_SOURCE_REMOVE;
}

static gboolean
chat_listed (TernWindow *self,
             const char *name)
{
  guint n = g_list_model_get_n_items (G_LIST_MODEL (self->chats));

  for (guint i = 0; i < n; i++)
    {
      g_autoptr(TernChat) chat = g_list_model_get_item (G_LIST_MODEL (self->chats), i);
      const char *id = tern_chat_get_id (chat);
      gsize len = strlen (id);

      if (strncmp (name, id, len) == 0 && g_str_equal (name + len, ".json"))
        return TRUE;
    }
  return FALSE;
}

/* Reads the chat files NAMES (in the chats folder, in this order) into the
 * list: at the start, or AGAIN, those that were changing then. */
static void
read_chat_files (TernWindow *self,
                 GPtrArray  *names,
                 gboolean    again)
{
  g_autofree char *first_error = NULL;
  g_autofree char *first_newer = NULL;
  g_autofree char *first_kept = NULL;
  g_autofree char *first_large = NULL;
  guint n_bad = 0, n_newer = 0, n_kept = 0, n_large = 0;
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      g_autofree char *path = NULL;
      g_autoptr(TernChat) chat = NULL;
      g_autoptr(GError) error = NULL;
      TernChatUnread unread;

      if (again && chat_listed (self, name))
        continue;
      path = g_build_filename (self->chats_dir, name, NULL);
      /* A newer Tern's chat (the folder synced with it) is listed, marked
       * and never written: left out, the user did not know it was there.
       * Not set aside either (that Tern would no longer find it), nor is
       * any file this version cannot judge (tern_chat_load_listed). */
      chat = tern_chat_load_listed (path, now, &unread, &error);
      if (chat != NULL)
        {
          if (tern_chat_is_too_large (chat))
            {
              if (n_large++ == 0)
                first_large = g_strdup (path);
            }
          else if (tern_chat_is_newer (chat) && n_newer++ == 0)
            first_newer = g_strdup (path);
          if (again)
            g_list_store_insert_sorted (self->chats, chat, compare_updated, NULL);
          else
            g_list_store_append (self->chats, chat);
          continue;
        }
      if (unread == TERN_CHAT_UNREAD_GONE)
        continue;
      if (unread == TERN_CHAT_UNREAD_BUSY && self->chats_busy_tries < CHATS_BUSY_TRIES)
        {
          g_message ("%s: changed a moment ago, read again in %d s (%s)", path,
                     TERN_CHAT_QUIET_SECONDS, error != NULL ? error->message : "");
          if (self->chats_busy == NULL)
            self->chats_busy = g_ptr_array_new_with_free_func (g_free);
          g_ptr_array_add (self->chats_busy, g_strdup (name));
          continue;
        }
      /* Not this version's to judge (not a regular file, a link, not
       * readable; one larger than it reads is listed, above), or still
       * changing after a minute: left exactly as it is, and said. */
      if (unread == TERN_CHAT_UNREAD_KEEP || unread == TERN_CHAT_UNREAD_BUSY)
        {
          g_message ("%s", error != NULL ? error->message : path);
          /* (A newer Tern's chat under a name no chat could have, ".json",
           * only in the log, as before.) */
          if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED))
            continue;
          if (n_kept++ == 0)
            first_kept = g_strdup (error != NULL ? error->message : path);
          g_ptr_array_add (kept, tern_chat_left_out_key (self->chats_dir, name));
          continue;
        }
      /* This version's to judge, quiet, and broken: moved aside, not
       * deleted (the user may want it back); not left in place, where it
       * would fail again at every start. */
      if (n_bad++ == 0)
        first_error = g_strdup (error->message);
      {
        g_autofree char *aside = g_strconcat (path, ".corrupt", NULL);

        if (g_file_test (aside, G_FILE_TEST_EXISTS))
          {
            g_free (aside);
            aside = g_strdup_printf ("%s.%" G_GINT64_FORMAT ".corrupt", path,
                                     g_get_real_time ());
          }
        if (g_rename (path, aside) != 0)
          g_warning ("%s: %s", aside, g_strerror (errno));
      }
    }
  if (self->chats_busy != NULL && self->chats_busy_timeout == 0)
    self->chats_busy_timeout = g_timeout_add_seconds (TERN_CHAT_QUIET_SECONDS,
                                                      on_chats_busy_timeout, self);
  if (!again)
    g_list_store_sort (self->chats, compare_updated, NULL);
  if (n_newer > 0)
    g_message ("%u saved chat(s) from a newer version of Tern, listed read-only (the first: %s)",
               n_newer, first_newer);
  if (n_large > 0)
    g_message ("%u saved chat(s) larger than this version of Tern reads, listed read-only (the first: %s)",
               n_large, first_large);
  /* Told once of each (its name and kind), not at every start while it
   * remains; the log says it each time. At the start the record becomes
   * this start's files, so one taken away and put back is told again. */
  {
    g_autofree char *state = left_out_state (self);
    guint n_new = tern_chat_left_out_news (state, kept, !again);

    if (n_kept > 0)
      {
        g_autofree char *message =
          g_strdup_printf (ngettext ("%u saved chat cannot be read by this version of Tern: it is left as it is in %s",
                                     "%u saved chats cannot be read by this version of Tern: they are left as they are in %s",
                                     n_kept),
                           n_kept, self->chats_dir);
        say_unlisted (self, message, first_kept, n_new > 0);
      }
  }
  if (n_bad > 0)
    {
      g_autofree char *message =
        g_strdup_printf (ngettext ("%u saved chat could not be read: it was set aside as *.corrupt in %s",
                                   "%u saved chats could not be read: they were set aside as *.corrupt in %s",
                                   n_bad),
                         n_bad, self->chats_dir);
      say_unlisted (self, message, first_error, TRUE);
    }
}

static void
load_chats (TernWindow *self)
{
  g_autoptr(GDir) dir = g_dir_open (self->chats_dir, 0, NULL);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  const char *entry;

  if (dir == NULL)
    return;
  /* In the order of their names, not the folder's (which is arbitrary):
   * the file the log names as the first of several is the same at every
   * start, and the first in a listing of the folder. */
  while ((entry = g_dir_read_name (dir)) != NULL)
    if (g_str_has_suffix (entry, ".json"))
      g_ptr_array_add (names, g_strdup (entry));
  g_ptr_array_sort (names, compare_names);
  read_chat_files (self, names, FALSE);
}

static gboolean
on_close_request (TernWindow *self)
{
  /* What was being written is kept with its chat (saved below when an
   * answer is cut short, else now). */
  if (_tern_window_is_generating (self))
    {
      if (self->chat != NULL)
        {
          g_autofree char *text = tern_composer_get_text (self->composer);

          tern_chat_set_draft (self->chat, text);
        }
    }
  else
    keep_draft (self, self->chat);
  /* The system prompt as the panel holds it, pinned or not: only a pin
   * kept it, so a prompt typed and not yet sent was gone at the next start
   * (the message's draft was kept). The next model loaded pins it. */
  {
    g_autofree char *prompt = tern_pin_editor_get_text (self->pin_editor);

    g_settings_set_string (self->settings, "system-prompt", prompt);
  }
  /* A window closed mid-answer keeps what was generated so far. */
  if (_tern_window_is_generating (self))
    {
      tern_engine_worker_cancel (self->worker);
      if (self->streaming_row != NULL)
        {
          TernMessage *m = tern_chat_get_message (self->chat, self->streaming_index);
          g_free (m->text);
          m->text = g_strdup (tern_message_row_get_text (self->streaming_row));
          m->cancelled = TRUE;
          /* As on_finished: the prompt of an answer that wrote something. */
          if (!tern_message_wrote_nothing (m))
            tern_chat_set_system_prompt (self->chat, self->streaming_prompt);
          else
            m->prompt_changed = m->alone = FALSE;
          /* As on_finished: a Regenerate that wrote nothing leaves the
           * answer it was to replace. */
          if (tern_message_wrote_nothing (m) && self->regenerated_taken != NULL)
            {
              g_ptr_array_unref (tern_chat_take_from (self->chat, self->streaming_index));
              tern_chat_restore (self->chat, self->regenerated_taken);
            }
        }
      _tern_window_save_chat (self);
    }
  /* Its id as it is now: a save may have given it a new one. */
  remember_chat (self);
  /* Stop the engine thread now, while the window still exists. */
  tern_engine_worker_shutdown (self->worker);
  return FALSE;
}

/* The system prompt panel: the user's choice is remembered; until there is
 * one, it opens only in a window wide enough for it beside the transcript
 * (1200 px). In a narrow window it covers the chat (AdwFlap folds it into
 * an overlay), so it does not open there at start. */
#define PIN_PANEL_AUTO_WIDTH 1200
#define PIN_PANEL_MIN_WIDTH 700

static void
action_show_pin_panel (GSimpleAction *action,
                       GVariant      *state,
                       gpointer       data)
{
  TernWindow *self = data;
  gboolean open = g_variant_get_boolean (state);

  g_simple_action_set_state (action, state);
  g_settings_set_boolean (self->settings, "pin-panel-open", open);
  adw_flap_set_reveal_flap (self->flap, open);
}

static void
on_flap_revealed (TernWindow *self)
{
  GAction *action = g_action_map_lookup_action (G_ACTION_MAP (self), "show-pin-panel");

  /* Closed by AdwFlap itself (folding, Escape, a swipe): the toggle follows. */
  if (action != NULL)
    g_simple_action_set_state (G_SIMPLE_ACTION (action),
                               g_variant_new_boolean (adw_flap_get_reveal_flap (self->flap)));
}

static void
on_first_map (TernWindow *self)
{
  g_autoptr(GVariant) chosen = g_settings_get_user_value (self->settings, "pin-panel-open");
  int width = 0, height = 0;
  gboolean open;

  g_signal_handlers_disconnect_by_func (self, on_first_map, NULL);
  /* Both pointers: GTK 4.8 writes both. */
  gtk_window_get_default_size (GTK_WINDOW (self), &width, &height);
  if (gtk_window_is_maximized (GTK_WINDOW (self)) || width <= 0)
    width = gtk_widget_get_width (GTK_WIDGET (self));
  if (chosen != NULL)
    open = g_variant_get_boolean (chosen) && width >= PIN_PANEL_MIN_WIDTH;
  else
    open = width >= PIN_PANEL_AUTO_WIDTH;
  adw_flap_set_reveal_flap (self->flap, open);
}

static void
update_mode_button (TernWindow *self)
{
  g_autofree char *mode = g_settings_get_string (self->settings, "mode");

  gtk_menu_button_set_label (self->mode_menu_button,
                             g_str_equal (mode, "chat") ? _("Chat") : _("Flash"));
}

static void
tern_window_dispose (GObject *object)
{
  TernWindow *self = TERN_WINDOW (object);

  g_clear_handle_id (&self->count_timeout, g_source_remove);
  g_clear_handle_id (&self->chats_busy_timeout, g_source_remove);
  g_clear_handle_id (&self->context_toast_wait, g_source_remove);
  g_clear_object (&self->context_toast_shown);
  g_clear_pointer (&self->chats_busy, g_ptr_array_unref);
  if (self->toast_lift != NULL)
    {
      gtk_style_context_remove_provider_for_display (gtk_widget_get_display (GTK_WIDGET (self)),
                                                     GTK_STYLE_PROVIDER (self->toast_lift));
      g_clear_object (&self->toast_lift);
    }
  stop_drawing_earlier (self);
  if (self->follow_tick != 0)
    {
      gtk_widget_remove_tick_callback (GTK_WIDGET (self->transcript_scroller), self->follow_tick);
      self->follow_tick = 0;
    }
  if (self->worker != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->worker, self);
      tern_engine_worker_shutdown (self->worker);
      g_clear_object (&self->worker);
      /* The server ran on that engine thread: it is gone with it. */
      if (self->server_asked)
        {
          self->server_asked = FALSE;
          set_server_status (self, NULL, _("Off"));
        }
    }
  /* Quitting must not lose the last answer. */
  tern_chat_wait_saves ();
  g_clear_pointer (&self->chat_menu, gtk_widget_unparent);
  gtk_widget_dispose_template (GTK_WIDGET (object), TERN_TYPE_WINDOW);
  G_OBJECT_CLASS (tern_window_parent_class)->dispose (object);
}

static void
tern_window_finalize (GObject *object)
{
  TernWindow *self = TERN_WINDOW (object);

  g_clear_object (&self->chat);
  g_clear_object (&self->chats);
  g_clear_object (&self->settings);
  g_free (self->chats_dir);
  g_free (self->model_path);
  g_free (self->model_description);
  g_free (self->loading_path);
  g_free (self->pin_text);
  g_free (self->regenerated_text);
  g_free (self->streaming_prompt);
  g_clear_pointer (&self->regenerated_taken, g_ptr_array_unref);
  g_free (self->last_error);
  g_free (self->server_key);
  g_clear_pointer (&self->origin, _tern_model_origin_free);
  g_clear_pointer (&self->loading_origin, _tern_model_origin_free);
  g_clear_pointer (&self->toasts, g_ptr_array_unref);
  g_clear_pointer (&self->deleted, g_hash_table_unref);
  g_clear_object (&self->edit_chat);
  g_clear_pointer (&self->edit_taken, g_ptr_array_unref);
  g_free (self->edit_put_text);
  g_free (self->edit_before_text);
  G_OBJECT_CLASS (tern_window_parent_class)->finalize (object);
}

static void
tern_window_class_init (TernWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tern_window_dispose;
  object_class->finalize = tern_window_finalize;


  g_type_ensure (TERN_TYPE_COMPOSER);
  g_type_ensure (TERN_TYPE_PIN_EDITOR);
  g_type_ensure (TERN_TYPE_STATS_BAR);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tern/Tern/ui/tern-window.ui");
  gtk_widget_class_bind_template_child (widget_class, TernWindow, toast_overlay);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, leaflet);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, sidebar);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, chat_list);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, content);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, back_button);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, window_title);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, speculation_box);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, speculation_toggle);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, speculation_toggle_narrow);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, mode_menu_button);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, server_indicator);
  /* Not used here; bound so that tests find them (gtk_widget_get_template_child). */
  gtk_widget_class_bind_template_child_full (widget_class, "mode_squeezer", FALSE, 0);
  gtk_widget_class_bind_template_child_full (widget_class, "speculation_squeezer", FALSE, 0);
  gtk_widget_class_bind_template_child_full (widget_class, "flash_toggle", FALSE, 0);
  gtk_widget_class_bind_template_child_full (widget_class, "chat_toggle", FALSE, 0);
  gtk_widget_class_bind_template_child_full (widget_class, "pin_toggle", FALSE, 0);
  gtk_widget_class_bind_template_child_full (widget_class, "menu_button", FALSE, 0);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, drafter_dropdown);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, speculation_menu);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, flap);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, main_stack);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, loading_page);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, newer_page);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, loading_spinner);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, loading_progress);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, transcript_stack);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, transcript_scroller);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, jump_revealer);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, jump_button);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, message_box);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, stats_bar);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, composer);
  gtk_widget_class_bind_template_child (widget_class, TernWindow, pin_editor);
}

static void
tern_window_init (TernWindow *self)
{
  g_autoptr(GAction) mode = NULL;
  g_autoptr(GAction) tint = NULL;
  g_autofree char *system_prompt = NULL;
  GtkAdjustment *vadj;

  gtk_widget_init_template (GTK_WIDGET (self));

  self->settings = tern_settings_new ();
  self->toasts = g_ptr_array_new_with_free_func (g_object_unref);
  {
    static guint windows;
    g_autofree char *name = g_strdup_printf ("tern-toasts-%u", ++windows);

    gtk_widget_set_name (GTK_WIDGET (self->toast_overlay), name);
    self->toast_lift = gtk_css_provider_new ();
    self->toast_lift_px = -1;
    self->toast_left_px = self->toast_right_px = -1;
    self->transcript_margin_px = gtk_widget_get_margin_bottom (GTK_WIDGET (self->message_box));
    gtk_style_context_add_provider_for_display (gtk_widget_get_display (GTK_WIDGET (self)),
                                                GTK_STYLE_PROVIDER (self->toast_lift),
                                                GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
  }
  self->chats_dir = tern_chats_dir ();
  self->chats = g_list_store_new (TERN_TYPE_CHAT);
  self->worker = tern_engine_worker_new ();

  _tern_window_actions_init (self);
  {
    g_autoptr(GSimpleAction) show_pin = g_simple_action_new_stateful ("show-pin-panel", NULL,
                                                                      g_variant_new_boolean (FALSE));
    g_autoptr(GAction) speculation = g_settings_create_action (self->settings, "speculation");

    g_signal_connect (show_pin, "change-state", G_CALLBACK (action_show_pin_panel), self);
    g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (show_pin));
    g_action_map_add_action (G_ACTION_MAP (self), speculation);
  }
  g_signal_connect_swapped (self->flap, "notify::reveal-flap", G_CALLBACK (on_flap_revealed), self);
  g_signal_connect (self, "map", G_CALLBACK (on_first_map), NULL);
  g_signal_connect_object (self->settings, "changed::mode", G_CALLBACK (update_mode_button), self,
                           G_CONNECT_SWAPPED);
  update_mode_button (self);
  mode = g_settings_create_action (self->settings, "mode");
  g_action_map_add_action (G_ACTION_MAP (self), mode);
  tint = g_settings_create_action (self->settings, "tint-drafted");
  g_action_map_add_action (G_ACTION_MAP (self), tint);

  g_settings_bind (self->settings, "window-width", self, "default-width", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-height", self, "default-height",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "window-maximized", self, "maximized",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "speculation", self->speculation_toggle, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (self->settings, "speculation", self->speculation_toggle_narrow, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_signal_connect_swapped (self->leaflet, "notify::folded", G_CALLBACK (on_folded), self);
  _tern_window_speculation_init (self);

  _tern_window_engine_connect (self);
  g_signal_connect_swapped (self->worker, "server-state", G_CALLBACK (on_server_state), self);
  g_signal_connect_swapped (self->worker, "vision", G_CALLBACK (on_vision), self);
  tern_composer_set_worker (self->composer, self->worker);
  g_signal_connect_object (self->composer, "error", G_CALLBACK (on_composer_error), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->composer, "notify::busy", G_CALLBACK (_tern_window_update_actions), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_object (self->composer, "notify::has-content",
                           G_CALLBACK (_tern_window_update_actions), self, G_CONNECT_SWAPPED);
  tern_composer_take_drops_on (self->composer, GTK_WIDGET (self->content));
  g_signal_connect (self, "notify::application", G_CALLBACK (on_application_set), NULL);
  g_signal_connect_object (self->settings, "changed::server-enabled",
                           G_CALLBACK (on_server_setting_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::server-port",
                           G_CALLBACK (on_server_setting_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::server-api-key",
                           G_CALLBACK (on_server_setting_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::tint-drafted", G_CALLBACK (on_tint_changed),
                           self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->settings, "changed::speculation",
                           G_CALLBACK (_tern_window_update_tint_legend), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (adw_style_manager_get_default (), "notify::dark",
                           G_CALLBACK (on_dark_changed), self, G_CONNECT_SWAPPED);

  system_prompt = g_settings_get_string (self->settings, "system-prompt");
  tern_pin_editor_set_text (self->pin_editor, system_prompt);
  g_signal_connect_swapped (self->pin_editor, "changed",
                            G_CALLBACK (_tern_window_on_pin_editor_changed), self);

  vadj = gtk_scrolled_window_get_vadjustment (self->transcript_scroller);
  g_signal_connect (vadj, "notify::upper", G_CALLBACK (on_scroll_bounds), self);
  g_signal_connect (vadj, "notify::page-size", G_CALLBACK (on_scroll_bounds), self);
  g_signal_connect (vadj, "value-changed", G_CALLBACK (on_scroll_value), self);
  g_signal_connect_swapped (self->jump_button, "clicked", G_CALLBACK (on_jump_clicked), self);
  self->stick_to_bottom = TRUE;

  gtk_list_box_bind_model (self->chat_list, G_LIST_MODEL (self->chats), create_chat_row, NULL,
                           NULL);
  g_signal_connect (self->chat_list, "row-activated", G_CALLBACK (on_chat_row_activated), self);
  self->deleted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  self->chat_menu = gtk_popover_menu_new_from_model (NULL);
  gtk_popover_set_has_arrow (GTK_POPOVER (self->chat_menu), FALSE);
  gtk_widget_set_halign (self->chat_menu, GTK_ALIGN_START);
  gtk_widget_set_parent (self->chat_menu, GTK_WIDGET (self->chat_list));
  {
    GtkGesture *click = gtk_gesture_click_new ();
    GtkGesture *press = gtk_gesture_long_press_new ();
    GtkEventController *list_keys = gtk_event_controller_key_new ();

    gtk_gesture_single_set_button (GTK_GESTURE_SINGLE (click), GDK_BUTTON_SECONDARY);
    g_signal_connect (click, "pressed", G_CALLBACK (on_chat_list_pressed), self);
    gtk_widget_add_controller (GTK_WIDGET (self->chat_list), GTK_EVENT_CONTROLLER (click));
    gtk_gesture_single_set_touch_only (GTK_GESTURE_SINGLE (press), TRUE);
    g_signal_connect (press, "pressed", G_CALLBACK (on_chat_list_long_press), self);
    gtk_widget_add_controller (GTK_WIDGET (self->chat_list), GTK_EVENT_CONTROLLER (press));
    g_signal_connect (list_keys, "key-pressed", G_CALLBACK (on_chat_list_key), self);
    gtk_widget_add_controller (GTK_WIDGET (self->chat_list), list_keys);
  }
  g_signal_connect_swapped (self->back_button, "clicked", G_CALLBACK (on_back_clicked), self);
  g_signal_connect (self, "close-request", G_CALLBACK (on_close_request), NULL);

  load_chats (self);
  if (!open_last_chat (self))
    _tern_window_new_chat (self);
  _tern_window_update_main_page (self);
  _tern_window_update_actions (self);
}

/* --------------------------------------------------------------- queries */

TernWindow *
tern_window_new (GtkApplication *application)
{
  return g_object_new (TERN_TYPE_WINDOW, "application", application, NULL);
}

gboolean
tern_window_has_model (TernWindow *self)
{
  return self->model_loaded;
}

gboolean
tern_window_is_loading (TernWindow *self)
{
  return self->load_id != 0;
}

gboolean
tern_window_is_pinning (TernWindow *self)
{
  return self->pin_id != 0;
}

gboolean
tern_window_is_preparing_drafter (TernWindow *self)
{
  return self->drafter_id != 0;
}

gboolean
tern_window_is_generating (TernWindow *self)
{
  return _tern_window_is_generating (self);
}

const char *
tern_window_get_page (TernWindow *self)
{
  return gtk_stack_get_visible_child_name (self->main_stack);
}

const char *
tern_window_get_newer_text (TernWindow *self)
{
  return adw_status_page_get_description (self->newer_page);
}

const char *
tern_window_get_model_description (TernWindow *self)
{
  return self->model_description;
}

const char *
tern_window_get_model_path (TernWindow *self)
{
  return self->model_path;
}

const char *
tern_window_get_last_error (TernWindow *self)
{
  return self->last_error;
}

TernChat *
tern_window_get_chat (TernWindow *self)
{
  return self->chat;
}

GListModel *
tern_window_get_chats (TernWindow *self)
{
  return G_LIST_MODEL (self->chats);
}

GtkWidget *
tern_window_get_transcript_scroller (TernWindow *self)
{
  return GTK_WIDGET (self->transcript_scroller);
}

GtkWidget *
tern_window_get_jump_button (TernWindow *self)
{
  return gtk_revealer_get_reveal_child (self->jump_revealer) ? GTK_WIDGET (self->jump_button)
                                                             : NULL;
}

GtkWidget *
tern_window_get_chat_list (TernWindow *self)
{
  return GTK_WIDGET (self->chat_list);
}

TernPinEditor *
tern_window_get_pin_editor (TernWindow *self)
{
  return self->pin_editor;
}

TernStatsBar *
tern_window_get_stats_bar (TernWindow *self)
{
  return self->stats_bar;
}

GtkWidget *
tern_window_get_speculation_box (TernWindow *self)
{
  return GTK_WIDGET (self->speculation_box);
}

const char *
tern_window_get_row_text (TernWindow *self,
                          guint       index)
{
  TernMessageRow *row = row_at (self, index);

  return row ? tern_message_row_get_text (row) : NULL;
}

GtkWidget *
tern_window_get_row (TernWindow *self,
                     guint       index)
{
  return (GtkWidget *) row_at (self, index);
}

guint
tern_window_get_n_rows (TernWindow *self)
{
  guint n = 0;

  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->message_box)); c;
       c = gtk_widget_get_next_sibling (c))
    n++;
  return n;
}

gboolean
tern_window_transcript_is_settled (TernWindow *self)
{
  return self->earlier_idle == 0 && self->anchor_tick == 0;
}

void
tern_window_set_composer_text (TernWindow *self,
                               const char *text)
{
  tern_composer_set_text (self->composer, text);
}

char *
tern_window_get_composer_text (TernWindow *self)
{
  return tern_composer_get_text (self->composer);
}
