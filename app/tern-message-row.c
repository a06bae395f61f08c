/* tern-message-row.c */
#include "config.h"

#include <string.h>

#include <glib/gi18n.h>

#include "tern-markdown.h"
#include "tern-message-row.h"
#include "tern-size.h"

struct _TernMessageRow {
  GtkBox parent_instance;

  GtkLabel *role_label;
  GtkButton *copy_button;
  GtkButton *edit_button;
  GtkButton *regenerate_button;
  GtkBox *content_box;
  GtkLabel *error_label;
  GtkBox *fix_box;
  GtkLabel *stats_label;
  GtkButton *show_all_button;
  GtkLabel *notice_label;      /* NULL until there is a notice */

  char *role;
  GString *text;
  GByteArray *drafted; /* one flag per byte of text */
  GtkWidget *images_box;
  gboolean tint;
  guint render_tick;
  gint64 last_render_us;
  GtkAdjustment *transcript_adj; /* the scrolled transcript's, while mapped */
  gboolean drawn_on_screen;
  gboolean show_all;            /* a long question shown whole, on request */
  gboolean last;                /* the last turn (tern_message_row_set_last) */
  gboolean fixes;               /* the ways out of its error, while last */
  char *error;                  /* the message's own error, else NULL */
  char *refusal;                /* why a new answer was refused, while last */
};

/* A streaming answer is re-rendered at most this often: each render
 * re-shapes its last paragraph, and 20 a second reads as smooth. */
#define MIN_RENDER_INTERVAL_US (50 * 1000)

G_DEFINE_FINAL_TYPE (TernMessageRow, tern_message_row, GTK_TYPE_BOX)

static void render (TernMessageRow *self);

void
tern_message_row_flush (TernMessageRow *self)
{
  if (self->render_tick != 0)
    {
      gtk_widget_remove_tick_callback (GTK_WIDGET (self), self->render_tick);
      self->render_tick = 0;
    }
  render (self);
}

/* Markdown draws nothing for an answer of blank lines (a random-weight
 * model's favourite); say so rather than show an empty bubble. */
static gboolean
has_drafted (TernMessageRow *self)
{
  return self->drafted->len > 0 && memchr (self->drafted->data, 1, self->drafted->len) != NULL;
}

/* The theme's accent, so that the tint reads in light and dark styles. */
static void
tint_color (TernMessageRow *self,
            char            out[8])
{
  GdkRGBA rgba = { 0.21f, 0.52f, 0.89f, 1.0f };

  G_GNUC_BEGIN_IGNORE_DEPRECATIONS
  gtk_style_context_lookup_color (gtk_widget_get_style_context (GTK_WIDGET (self)),
                                  "accent_color", &rgba);
  G_GNUC_END_IGNORE_DEPRECATIONS
  g_snprintf (out, 8, "#%02x%02x%02x", (int) (CLAMP (rgba.red, 0, 1) * 255 + 0.5),
              (int) (CLAMP (rgba.green, 0, 1) * 255 + 0.5),
              (int) (CLAMP (rgba.blue, 0, 1) * 255 + 0.5));
}

/* A question this long (a pasted log or file) is shown cut at about
 * LONG_PREVIEW bytes, with a button for the rest: laid out whole, as
 * Markdown labels, a megabyte froze the window for 4-7 s when it was sent
 * and again whenever its chat was opened. The copy button, Edit and the
 * chat file keep the whole text. */
#define LONG_MESSAGE (32 * 1024)
#define LONG_PREVIEW (4 * 1024)

/* The first LONG_PREVIEW-odd bytes of text, ended at a line where one is
 * near, else at a character. */
static gsize
preview_length (const char *text)
{
  const char *end = g_utf8_find_prev_char (text, text + LONG_PREVIEW + 1);
  const char *nl = g_strrstr_len (text, end - text, "\n");

  return nl != NULL && nl - text >= LONG_PREVIEW / 2 ? (gsize) (nl - text) : (gsize) (end - text);
}

static void
render (TernMessageRow *self)
{
  gboolean user = g_strcmp0 (self->role, "user") == 0;
  gboolean cut = !self->show_all && user && self->text->len > LONG_MESSAGE;

  gtk_widget_set_visible (GTK_WIDGET (self->show_all_button), cut);
  if (cut)
    {
      g_autofree char *preview = g_strndup (self->text->str, preview_length (self->text->str));
      g_autofree char *size = tern_app_format_size (self->text->len);
      g_autofree char *label = g_strdup_printf (_("Show the Whole Message (%s)"), size);

      gtk_button_set_label (self->show_all_button, label);
      tern_markdown_render_plain (self->content_box, preview);
    }
  /* What the user typed is shown as typed: as Markdown, a pasted log's
   * lines ran into one paragraph and its "#" lines became headings. */
  else if (user)
    tern_markdown_render_plain (self->content_box, self->text->str);
  else if (self->tint && has_drafted (self))
    {
      char color[8];

      tint_color (self, color);
      tern_markdown_render_tinted (self->content_box, self->text->str, self->drafted->data,
                                   color);
    }
  else
    tern_markdown_render (self->content_box, self->text->str);
  if (gtk_widget_get_first_child (GTK_WIDGET (self->content_box)) == NULL && self->text->len > 0)
    {
      GtkWidget *label = gtk_label_new (_("(only blank lines)"));

      gtk_label_set_xalign (GTK_LABEL (label), 0);
      gtk_widget_add_css_class (label, "dim-label");
      gtk_box_append (self->content_box, label);
    }
}

static gboolean
on_render_tick (GtkWidget     *widget,
                GdkFrameClock *clock,
                gpointer       data)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (widget);
  gint64 now = gdk_frame_clock_get_frame_time (clock);

  (void) data;
  if (now - self->last_render_us < MIN_RENDER_INTERVAL_US)
    return G_SOURCE_CONTINUE;
  self->render_tick = 0;
  self->last_render_us = now;
  render (self);
  return G_SOURCE_REMOVE;
}

/* However many token updates arrive in a frame, Markdown is parsed once. */
static void
queue_render (TernMessageRow *self)
{
  if (self->render_tick == 0)
    self->render_tick = gtk_widget_add_tick_callback (GTK_WIDGET (self), on_render_tick, NULL,
                                                      NULL);
}

const char *
tern_message_row_get_role (TernMessageRow *self)
{
  return self->role;
}

const char *
tern_message_row_get_text (TernMessageRow *self)
{
  return self->text->str;
}

void
tern_message_row_set_text (TernMessageRow *self,
                           const char     *text)
{
  g_string_assign (self->text, text ? text : "");
  g_byte_array_set_size (self->drafted, (guint) self->text->len);
  if (self->text->len > 0)
    memset (self->drafted->data, 0, self->text->len);
  queue_render (self);
}

void
tern_message_row_append_drafted (TernMessageRow *self,
                                 const char     *text,
                                 const guint8   *drafted)
{
  gsize len;

  if (text == NULL || *text == '\0')
    return;
  len = strlen (text);
  g_string_append_len (self->text, text, (gssize) len);
  if (drafted != NULL)
    g_byte_array_append (self->drafted, drafted, (guint) len);
  else
    {
      guint old = self->drafted->len;
      g_byte_array_set_size (self->drafted, old + (guint) len);
      memset (self->drafted->data + old, 0, len);
    }
  queue_render (self);
}

void
tern_message_row_append (TernMessageRow *self,
                         const char     *text)
{
  tern_message_row_append_drafted (self, text, NULL);
}

void
tern_message_row_set_drafted (TernMessageRow *self,
                              const guint8   *drafted)
{
  g_byte_array_set_size (self->drafted, (guint) self->text->len);
  if (self->text->len == 0)
    ;
  else if (drafted != NULL)
    memcpy (self->drafted->data, drafted, self->text->len);
  else
    memset (self->drafted->data, 0, self->text->len);
  queue_render (self);
}

const guint8 *
tern_message_row_get_drafted (TernMessageRow *self)
{
  static const guint8 none[1] = { 0 };

  return self->drafted->len ? self->drafted->data : none;
}

/* The pictures of a message are shown at most this big (twice the 160 x 120
 * they are laid out in, for a scale of 2). */
#define PICTURE_SIDE 320
/* As imageio's TERN_IMAGE_DEFAULT_MAX_PIXELS: no picture a user could
 * attach is larger. */
#define PICTURE_MAX_PIXELS (64u * 1024u * 1024u)

static void
on_size_prepared (GdkPixbufLoader *loader,
                  int              width,
                  int              height,
                  gpointer         data)
{
  gboolean *too_large = data;

  if (width <= 0 || height <= 0 || (guint64) width * (guint64) height > PICTURE_MAX_PIXELS)
    {
      *too_large = TRUE;
      /* A size of 0 makes the loader stop here, before it allocates (and
       * clears) the pixels the header claims: returning alone let a PNG
       * whose header said 70000 x 70000 take 14 GiB of memory. */
      gdk_pixbuf_loader_set_size (loader, 0, 0);
      return;
    }
  if (width > PICTURE_SIDE || height > PICTURE_SIDE)
    {
      double scale = (double) PICTURE_SIDE / MAX (width, height);

      gdk_pixbuf_loader_set_size (loader, MAX (1, (int) (width * scale + 0.5)),
                                  MAX (1, (int) (height * scale + 0.5)));
    }
}

/* A thread: the picture's bytes, decoded and reduced. A 64-megapixel photo
 * took seconds on the main loop (gdk_texture_new_from_bytes), each time a
 * chat with it was shown, and its row then held 256 MiB of texture. */
static void
decode_picture (GTask        *task,
                gpointer      source,
                gpointer      data,
                GCancellable *cancellable)
{
  GBytes *bytes = data;
  g_autoptr(GdkPixbufLoader) loader = gdk_pixbuf_loader_new ();
  gboolean too_large = FALSE;
  const guint8 *p = g_bytes_get_data (bytes, NULL);
  gsize len = g_bytes_get_size (bytes);
  GError *error = NULL;
  GdkPixbuf *pixbuf;

  (void) source;
  (void) cancellable;
  g_signal_connect (loader, "size-prepared", G_CALLBACK (on_size_prepared), &too_large);
  for (gsize off = 0; off < len && !too_large && error == NULL; off += 64 * 1024)
    gdk_pixbuf_loader_write (loader, p + off, MIN (len - off, 64 * 1024), &error);
  /* A failed write closed the loader already (closing twice is a critical). */
  if (error == NULL)
    gdk_pixbuf_loader_close (loader, too_large ? NULL : &error);
  pixbuf = gdk_pixbuf_loader_get_pixbuf (loader);
  if (error != NULL || too_large || pixbuf == NULL)
    {
      g_clear_error (&error);
      g_task_return_pointer (task, NULL, NULL);
      return;
    }
  /* A photo's EXIF orientation, as imageio applies it for the model and
   * the composer's thumbnail (the loader only records it): a phone's
   * portrait photo was shown on its side once sent. */
  g_task_return_pointer (task, gdk_pixbuf_apply_embedded_orientation (pixbuf), g_object_unref);
}

/* The pictures are decoded two at a time, on threads of their own. On
 * GIO's shared pool, a reopened chat with many big photos decoded up to ten
 * at once (each whole, 256 MiB for a 64-megapixel one, before it is
 * reduced: GBs of memory), and held every thread of the pool that GIO's
 * own asynchronous calls use meanwhile. */
#define PICTURE_THREADS 2

static guint n_decoded;  /* atomic: pictures decoded, for the tests */

guint
_tern_message_row_get_n_decoded (void)
{
  return (guint) g_atomic_int_get (&n_decoded);
}

/* A picture gone before its turn (its chat left, closed or deleted) is not
 * decoded: the chat shown next waited behind every picture of the chats
 * clicked through. */
static void
decode_in_pool (gpointer data,
                gpointer user_data)
{
  GTask *task = data;

  (void) user_data;
  if (!g_task_return_error_if_cancelled (task))
    {
      g_atomic_int_inc (&n_decoded);
      decode_picture (task, NULL, g_task_get_task_data (task), NULL);
    }
  g_object_unref (task);
}

static void
cancel_and_unref (gpointer data)
{
  g_cancellable_cancel (data);
  g_object_unref (data);
}

static GThreadPool *
picture_pool (void)
{
  static gsize once;
  static GThreadPool *pool;

  if (g_once_init_enter (&once))
    {
      pool = g_thread_pool_new (decode_in_pool, NULL, PICTURE_THREADS, FALSE, NULL);
      g_once_init_leave (&once, 1);
    }
  return pool;
}

static void
on_picture_decoded (GObject      *source,
                    GAsyncResult *result,
                    gpointer      data)
{
  GWeakRef *ref = data;
  g_autoptr(GdkPixbuf) pixbuf = g_task_propagate_pointer (G_TASK (result), NULL);
  g_autoptr(GtkWidget) picture = g_weak_ref_get (ref);

  (void) source;
  g_weak_ref_clear (ref);
  g_free (ref);
  if (picture == NULL)
    return;
  if (pixbuf == NULL)
    {
      /* Not a picture after all: as before, it is not shown. */
      GtkWidget *box = gtk_widget_get_parent (picture);

      if (box != NULL)
        gtk_box_remove (GTK_BOX (box), picture);
      return;
    }
  {
    g_autoptr(GdkTexture) texture = gdk_texture_new_for_pixbuf (pixbuf);

    gtk_picture_set_paintable (GTK_PICTURE (picture), GDK_PAINTABLE (texture));
  }
}

void
tern_message_row_set_images (TernMessageRow *self,
                             GPtrArray      *images)
{
  if (self->images_box != NULL)
    {
      gtk_box_remove (GTK_BOX (self), self->images_box);
      self->images_box = NULL;
    }
  if (images == NULL || images->len == 0)
    return;
  self->images_box = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  for (guint i = 0; i < images->len; i++)
    {
      GtkWidget *picture = gtk_picture_new ();
      g_autoptr(GTask) task = NULL;
      g_autoptr(GCancellable) cancellable = NULL;
      GWeakRef *ref = g_new0 (GWeakRef, 1);

      gtk_widget_set_size_request (picture, 160, 120);
      gtk_picture_set_can_shrink (GTK_PICTURE (picture), TRUE);
      gtk_widget_add_css_class (picture, "card");
      gtk_accessible_update_property (GTK_ACCESSIBLE (picture), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                      _("Image sent with the message"), -1);
      gtk_box_append (GTK_BOX (self->images_box), picture);
      /* The picture is filled in when decoded (a weak reference: the
       * row may be gone by then; widgets are not finalized off the main
       * thread, where the task may drop its last reference). */
      g_weak_ref_init (ref, picture);
      cancellable = g_cancellable_new ();
      /* cancelled when the picture is finalized */
      g_object_set_data_full (G_OBJECT (picture), "tern-decode", g_object_ref (cancellable),
                              cancel_and_unref);
      task = g_task_new (NULL, cancellable, on_picture_decoded, ref);
      g_task_set_source_tag (task, tern_message_row_set_images);
      g_task_set_task_data (task, g_bytes_ref (g_ptr_array_index (images, i)),
                            (GDestroyNotify) g_bytes_unref);
      g_thread_pool_push (picture_pool (), g_object_ref (task), NULL);
    }
  gtk_box_insert_child_after (GTK_BOX (self), self->images_box,
                              gtk_widget_get_first_child (GTK_WIDGET (self)));
}

guint
tern_message_row_get_n_images (TernMessageRow *self)
{
  guint n = 0;

  if (self->images_box == NULL)
    return 0;
  for (GtkWidget *c = gtk_widget_get_first_child (self->images_box); c;
       c = gtk_widget_get_next_sibling (c))
    n++;
  return n;
}

void
tern_message_row_set_tint (TernMessageRow *self,
                           gboolean        tint)
{
  if (self->tint == !!tint)
    return;
  self->tint = !!tint;
  if (has_drafted (self))
    queue_render (self);
}

void
tern_message_row_refresh (TernMessageRow *self)
{
  if (has_drafted (self))
    queue_render (self);
}

static void
collect_markup (GtkWidget *widget,
                GString   *s)
{
  if (GTK_IS_LABEL (widget) && gtk_label_get_use_markup (GTK_LABEL (widget)))
    {
      g_string_append (s, gtk_label_get_label (GTK_LABEL (widget)));
      g_string_append_c (s, '\n');
    }
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    collect_markup (c, s);
}

char *
tern_message_row_get_shown_markup (TernMessageRow *self)
{
  GString *s = g_string_new (NULL);

  collect_markup (GTK_WIDGET (self->content_box), s);
  return g_string_free (s, FALSE);
}

void
tern_message_row_set_stats (TernMessageRow *self,
                            const char     *stats)
{
  gtk_label_set_text (self->stats_label, stats ? stats : "");
  gtk_widget_set_visible (GTK_WIDGET (self->stats_label), stats != NULL && *stats);
}

/* A refusal, while there is one, says more than the row's own error: it
 * is what the user just did. */
static void
show_error (TernMessageRow *self)
{
  const char *shown = self->refusal != NULL ? self->refusal : self->error;

  gtk_label_set_text (self->error_label, shown ? shown : "");
  gtk_widget_set_visible (GTK_WIDGET (self->error_label), shown != NULL && *shown);
}

void
tern_message_row_set_error (TernMessageRow *self,
                            const char     *error)
{
  g_free (self->error);
  self->error = g_strdup (error);
  show_error (self);
}

void
tern_message_row_set_refusal (TernMessageRow *self,
                              const char     *refusal)
{
  g_return_if_fail (TERN_IS_MESSAGE_ROW (self));

  g_free (self->refusal);
  self->refusal = g_strdup (refusal);
  show_error (self);
  tern_message_row_set_fixes (self, refusal != NULL);
}

void
tern_message_row_set_last (TernMessageRow *self,
                           gboolean        last)
{
  gboolean user = g_strcmp0 (self->role, "user") == 0;

  gtk_widget_set_visible (GTK_WIDGET (self->edit_button), last && user);
  gtk_widget_set_visible (GTK_WIDGET (self->regenerate_button), last && !user);
  self->last = last;
  /* The next message sent (or written again) is a new state: these ways
   * out were for this one only. */
  if (!last)
    {
      self->fixes = FALSE;
      /* A refused Regenerate spoke of this turn as the last one. */
      if (self->refusal != NULL)
        {
          g_clear_pointer (&self->refusal, g_free);
          show_error (self);
        }
    }
  gtk_widget_set_visible (GTK_WIDGET (self->fix_box), self->fixes && self->last);
}

void
tern_message_row_set_fixes (TernMessageRow *self,
                            gboolean        fixes)
{
  g_return_if_fail (TERN_IS_MESSAGE_ROW (self));

  self->fixes = fixes;
  gtk_widget_set_visible (GTK_WIDGET (self->fix_box), self->fixes && self->last);
}

GtkWidget *
tern_message_row_get_fix_box (TernMessageRow *self)
{
  g_return_val_if_fail (TERN_IS_MESSAGE_ROW (self), NULL);
  return gtk_widget_get_visible (GTK_WIDGET (self->fix_box)) ? GTK_WIDGET (self->fix_box) : NULL;
}

static void
on_copy_clicked (TernMessageRow *self)
{
  /* An answer refused before its first word shows only its error: that is
   * what is copied (it emptied the clipboard, and said "Message copied"). */
  const char *shown = self->text->len > 0 ? self->text->str : self->error ? self->error : "";

  if (*shown == '\0')
    return;
  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (self)), shown);
  gtk_widget_activate_action (GTK_WIDGET (self), "win.show-toast", "s", _("Message copied"));
}

/* Off-screen rows are not drawn. GTK 4.8 snapshots every widget of the
 * transcript, and the cairo renderer then shapes and culls every glyph of
 * it, on or off screen, at every frame: drawing cost grew with the whole
 * conversation (10 000 glyphs a frame after ten answers of the
 * responsiveness test) instead of with the window. */
#define ON_SCREEN_SLACK_PX 64

static gboolean
is_on_screen (TernMessageRow *self)
{
  GtkWidget *viewport = gtk_widget_get_ancestor (GTK_WIDGET (self), GTK_TYPE_VIEWPORT);
  GtkWidget *content;
  GtkAdjustment *adj;
  graphene_rect_t bounds;
  double value, page;

  if (viewport == NULL || (content = gtk_viewport_get_child (GTK_VIEWPORT (viewport))) == NULL
      || (adj = gtk_scrollable_get_vadjustment (GTK_SCROLLABLE (viewport))) == NULL
      || !gtk_widget_compute_bounds (GTK_WIDGET (self), content, &bounds))
    return TRUE;
  value = gtk_adjustment_get_value (adj);
  page = gtk_adjustment_get_page_size (adj);
  if (page <= 0)
    return TRUE;
  /* Bounds relative to the scrolled content do not move with the scroll. */
  return bounds.origin.y < value + page + ON_SCREEN_SLACK_PX
         && bounds.origin.y + bounds.size.height > value - ON_SCREEN_SLACK_PX;
}

static void
tern_message_row_snapshot (GtkWidget   *widget,
                           GtkSnapshot *snapshot)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (widget);

  self->drawn_on_screen = is_on_screen (self);
  if (self->drawn_on_screen)
    GTK_WIDGET_CLASS (tern_message_row_parent_class)->snapshot (widget, snapshot);
}

/* A row's drawing is cached while the transcript scrolls: a row that comes
 * into view (or leaves it) must ask to be drawn again. */
static void
on_transcript_moved (TernMessageRow *self)
{
  if (is_on_screen (self) != self->drawn_on_screen)
    gtk_widget_queue_draw (GTK_WIDGET (self));
}

static void
tern_message_row_map (GtkWidget *widget)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (widget);
  GtkWidget *viewport;

  GTK_WIDGET_CLASS (tern_message_row_parent_class)->map (widget);
  viewport = gtk_widget_get_ancestor (widget, GTK_TYPE_VIEWPORT);
  if (viewport != NULL && self->transcript_adj == NULL)
    {
      self->transcript_adj = gtk_scrollable_get_vadjustment (GTK_SCROLLABLE (viewport));
      if (self->transcript_adj != NULL)
        {
          g_object_ref (self->transcript_adj);
          g_signal_connect_object (self->transcript_adj, "value-changed",
                                   G_CALLBACK (on_transcript_moved), self, G_CONNECT_SWAPPED);
          g_signal_connect_object (self->transcript_adj, "changed",
                                   G_CALLBACK (on_transcript_moved), self, G_CONNECT_SWAPPED);
        }
    }
}

static void
tern_message_row_unmap (GtkWidget *widget)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (widget);

  if (self->transcript_adj != NULL)
    {
      g_signal_handlers_disconnect_by_data (self->transcript_adj, self);
      g_clear_object (&self->transcript_adj);
    }
  GTK_WIDGET_CLASS (tern_message_row_parent_class)->unmap (widget);
}

static void
tern_message_row_dispose (GObject *object)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (object);

  if (self->render_tick != 0)
    {
      gtk_widget_remove_tick_callback (GTK_WIDGET (self), self->render_tick);
      self->render_tick = 0;
    }
  gtk_widget_dispose_template (GTK_WIDGET (object), TERN_TYPE_MESSAGE_ROW);
  G_OBJECT_CLASS (tern_message_row_parent_class)->dispose (object);
}

static void
tern_message_row_finalize (GObject *object)
{
  TernMessageRow *self = TERN_MESSAGE_ROW (object);

  g_free (self->role);
  g_free (self->error);
  g_free (self->refusal);
  g_string_free (self->text, TRUE);
  g_byte_array_unref (self->drafted);
  G_OBJECT_CLASS (tern_message_row_parent_class)->finalize (object);
}

static void
tern_message_row_class_init (TernMessageRowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tern_message_row_dispose;
  object_class->finalize = tern_message_row_finalize;
  widget_class->snapshot = tern_message_row_snapshot;
  widget_class->map = tern_message_row_map;
  widget_class->unmap = tern_message_row_unmap;

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tern/Tern/ui/tern-message-row.ui");
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, role_label);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, copy_button);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, edit_button);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, regenerate_button);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, content_box);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, error_label);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, fix_box);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, stats_label);
  gtk_widget_class_bind_template_child (widget_class, TernMessageRow, show_all_button);
}

static void
on_show_all_clicked (TernMessageRow *self)
{
  self->show_all = TRUE;
  render (self);
}

void
tern_message_row_set_notice (TernMessageRow *self,
                             const char     *notice)
{
  if (notice == NULL)
    {
      if (self->notice_label != NULL)
        gtk_widget_set_visible (GTK_WIDGET (self->notice_label), FALSE);
      return;
    }
  if (self->notice_label == NULL)
    {
      self->notice_label = GTK_LABEL (gtk_label_new (NULL));
      gtk_label_set_wrap (self->notice_label, TRUE);
      gtk_label_set_justify (self->notice_label, GTK_JUSTIFY_CENTER);
      gtk_widget_add_css_class (GTK_WIDGET (self->notice_label), "caption");
      gtk_widget_add_css_class (GTK_WIDGET (self->notice_label), "dim-label");
      gtk_widget_set_margin_bottom (GTK_WIDGET (self->notice_label), 6);
      gtk_box_prepend (GTK_BOX (self), GTK_WIDGET (self->notice_label));
    }
  gtk_label_set_text (self->notice_label, notice);
  gtk_widget_set_visible (GTK_WIDGET (self->notice_label), TRUE);
}

const char *
tern_message_row_get_notice (TernMessageRow *self)
{
  return self->notice_label != NULL && gtk_widget_get_visible (GTK_WIDGET (self->notice_label))
           ? gtk_label_get_text (self->notice_label)
           : NULL;
}

GtkWidget *
tern_message_row_get_show_all_button (TernMessageRow *self)
{
  return gtk_widget_get_visible (GTK_WIDGET (self->show_all_button))
           ? GTK_WIDGET (self->show_all_button)
           : NULL;
}

static void
tern_message_row_init (TernMessageRow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  self->text = g_string_new (NULL);
  self->drafted = g_byte_array_new ();
  g_signal_connect_swapped (self->copy_button, "clicked", G_CALLBACK (on_copy_clicked), self);
  g_signal_connect_swapped (self->show_all_button, "clicked", G_CALLBACK (on_show_all_clicked),
                            self);
  /* The ways out of an error (Edit Message, Preferences) side by side at
   * their natural width made the window wider than a phone's 360 px in
   * German (388 px) and French (371 px): their words wrap instead. */
  for (GtkWidget *c = gtk_widget_get_first_child (GTK_WIDGET (self->fix_box)); c != NULL;
       c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *label = GTK_IS_BUTTON (c) ? gtk_button_get_child (GTK_BUTTON (c)) : NULL;

      if (GTK_IS_LABEL (label))
        {
          gtk_label_set_wrap (GTK_LABEL (label), TRUE);
          gtk_label_set_justify (GTK_LABEL (label), GTK_JUSTIFY_CENTER);
        }
    }
}

TernMessageRow *
tern_message_row_new (const char *role,
                      const char *text)
{
  TernMessageRow *self = g_object_new (TERN_TYPE_MESSAGE_ROW, NULL);
  gboolean user = g_strcmp0 (role, "user") == 0;

  self->role = g_strdup (role);
  gtk_label_set_text (self->role_label, user ? _("You") : _("Assistant"));
  gtk_widget_add_css_class (GTK_WIDGET (self), user ? "user" : "assistant");
  if (user)
    gtk_widget_add_css_class (GTK_WIDGET (self), "card");
  tern_message_row_set_text (self, text);
  tern_message_row_flush (self);
  return self;
}
