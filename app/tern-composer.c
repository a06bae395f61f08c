/* tern-composer.c: the message being written and the images attached to it.
 *
 * An image is decoded once, on a GTask thread, into the shared cache
 * (tern-image-cache.h) fitted as the worker will want it at send
 * (tern_engine_worker_image_fit_side), so that the worker finds it there;
 * the same decode gives the thumbnail and the pixel size, and the size
 * gives the token count the engine reports (tern_engine_worker_image_tokens:
 * Gemma 4's count follows the image's size and aspect; Gemma 3's is the
 * square grid of the budget).
 */
#include "config.h"

#include <glib/gi18n.h>

#include "tern-application.h"
#include "tern-composer.h"
#include "tern-engine-worker.h"
#include "tern-image-cache.h"
#include "tern-image.h"

/* The composer's thumbnails are at most this many pixels a side (shown at
 * 56: sharp on a 2x display). */
#define THUMB_SIDE 112

typedef struct {
  guint serial;            /* finds it again when its decoding ends */
  GBytes *bytes;           /* the file, as sent and saved with the chat */
  GdkTexture *texture;     /* a paste whose PNG is not written yet: kept for
                            * a draft taken before then */
  char *name;
  gboolean ready;          /* decoded */
  int width, height;       /* of the decoded picture, as the encoder gets it */
  GtkWidget *tile;         /* in attachments_box */
  GtkWidget *picture;
} Attachment;

struct _TernComposer {
  GtkBox parent_instance;

  /* template */
  GtkBox *attachments_bar;
  GtkBox *attachments_box;
  GtkSpinButton *image_tokens_spin;
  GtkLabel *image_cost_label;
  GtkButton *attach_button;
  GtkTextView *text_view;
  GtkStack *send_stack;
  GtkButton *send_button;

  GSettings *settings;
  TernEngineWorker *worker;
  GtkDropTarget *drop_target;
  GPtrArray *attachments;  /* Attachment *, in the order they are sent */
  guint next_serial;
  guint n_pending;         /* attachments still decoding */
  gboolean has_model;
  char *no_vision; /* why a projector beside the model cannot be used; NULL: none there */
  int vision_native;       /* image tokens at the native size; -1: no vision */
  int vision_extra;        /* KV rows an image adds besides its tokens */
  gboolean has_content;    /* text other than blanks, or a picture */
  double prefill_tok_s;
};

G_DEFINE_FINAL_TYPE (TernComposer, tern_composer, GTK_TYPE_BOX)

enum { PROP_0, PROP_BUSY, PROP_HAS_CONTENT, N_PROPS };
static GParamSpec *props[N_PROPS];

enum { SIGNAL_ERROR, N_SIGNALS };
static guint signals[N_SIGNALS];

static void
attachment_free (Attachment *a)
{
  g_clear_pointer (&a->bytes, g_bytes_unref);
  g_clear_object (&a->texture);
  g_free (a->name);
  g_free (a);
}

static void
fail (TernComposer *self,
      const char   *message)
{
  g_signal_emit (self, signals[SIGNAL_ERROR], 0, message);
}

static const char *
no_vision_message (TernComposer *self)
{
  if (self->has_model && self->no_vision != NULL)
    return self->no_vision;
  return self->has_model
           ? _("This model cannot read images: it has no vision projector (a *mmproj*.gguf file beside the model)")
           : _("Load a model that can read images first");
}

static void
set_pending (TernComposer *self,
             guint         n)
{
  gboolean was = self->n_pending > 0;

  self->n_pending = n;
  if (was != (n > 0))
    g_object_notify_by_pspec (G_OBJECT (self), props[PROP_BUSY]);
}

/* Whether there is anything to send, notified when it changes: Send is
 * off with nothing written (it did nothing, silently). */
static void
update_has_content (TernComposer *self)
{
  gboolean has = self->attachments->len > 0;

  if (!has)
    {
      /* Walked in place, up to the first character that is not a blank:
       * this runs on every keystroke, and copying the text each time cost
       * as much as the text is long. */
      GtkTextIter it;

      gtk_text_buffer_get_start_iter (gtk_text_view_get_buffer (self->text_view), &it);
      for (; !gtk_text_iter_is_end (&it) && !has; gtk_text_iter_forward_char (&it))
        has = !g_unichar_isspace (gtk_text_iter_get_char (&it));
    }
  if (has != self->has_content)
    {
      self->has_content = has;
      g_object_notify_by_pspec (G_OBJECT (self), props[PROP_HAS_CONTENT]);
    }
}

/* ------------------------------------------------------------ the cost */

/* The tokens a, decoded, costs under the current budget; negative with
 * error set when the projector refuses its size. */
/* The budget the pictures are sent with: the preference, or, at 0
 * ("Auto"), what the worker says automatic means in the current mode. */
static int
effective_budget (TernComposer *self)
{
  int budget = gtk_spin_button_get_value_as_int (self->image_tokens_spin);
  g_autofree char *mode = NULL;

  if (budget > 0 || self->worker == NULL)
    return budget;
  mode = g_settings_get_string (self->settings, "mode");
  return tern_engine_worker_auto_image_budget (self->worker, g_strcmp0 (mode, "flash") == 0);
}

/* The spin shows "Auto" for 0 and reads it back. */
static gboolean
on_budget_output (GtkSpinButton *spin,
                  gpointer       user_data)
{
  (void) user_data;
  if (gtk_spin_button_get_value_as_int (spin) != 0)
    return FALSE;
  gtk_editable_set_text (GTK_EDITABLE (spin), C_("image budget", "Auto"));
  return TRUE;
}

static int
on_budget_input (GtkSpinButton *spin,
                 double        *new_value,
                 gpointer       user_data)
{
  const char *text = gtk_editable_get_text (GTK_EDITABLE (spin));

  (void) user_data;
  if (g_strcmp0 (text, C_("image budget", "Auto")) != 0 && g_ascii_strcasecmp (text, "auto") != 0)
    return FALSE;
  *new_value = 0;
  return TRUE;
}

static int
tokens_of (TernComposer  *self,
           Attachment    *a,
           GError       **error)
{
  if (self->worker == NULL)
    {
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_FAILED, no_vision_message (self));
      return -1;
    }
  return tern_engine_worker_image_tokens (self->worker, effective_budget (self), a->width,
                                          a->height, error);
}

/* The cost line: image tokens, and the prefill time they add at the
 * prefill speed last measured. */
static void
update_cost (TernComposer *self)
{
  guint n = 0;

  update_has_content (self);
  int first = -1, rows = 0;
  gboolean same = TRUE;
  g_autofree char *text = NULL;
  g_autofree char *time = NULL;

  gtk_widget_set_visible (GTK_WIDGET (self->attachments_bar), self->attachments->len > 0);
  for (guint i = 0; i < self->attachments->len; i++)
    {
      Attachment *a = g_ptr_array_index (self->attachments, i);
      g_autoptr(GError) error = NULL;
      int per;

      if (!a->ready)
        continue;
      per = tokens_of (self, a, &error);
      if (per < 0)
        {
          /* Possible after a change of budget (an aspect one budget takes
           * and another does not): the engine's words, for that image. */
          g_autofree char *line = g_strdup_printf ("%s: %s", a->name, error->message);

          gtk_label_set_text (self->image_cost_label, line);
          return;
        }
      if (first < 0)
        first = per;
      same = same && per == first;
      rows += per + self->vision_extra;
      n++;
    }
  if (n == 0)
    {
      gtk_label_set_text (self->image_cost_label, "");
      return;
    }
  if (self->prefill_tok_s > 0)
    {
      double ms = 1000.0 * rows / self->prefill_tok_s;

      time = ms < 1000 ? g_strdup_printf (_("%.0f ms"), ms) : g_strdup_printf (_("%.1f s"), ms / 1000);
    }
  if (same && time != NULL)
    /* Translators: images attached, tokens each, total, and the prefill time
     * they add ("120 ms", "2.5 s") */
    text = g_strdup_printf (ngettext ("%u image · %d tokens each · %d tokens · about %s of prefill",
                                      "%u images · %d tokens each · %d tokens · about %s of prefill", n),
                            n, first, rows, time);
  else if (same)
    text = g_strdup_printf (ngettext ("%u image · %d tokens each · %d tokens (prefill speed measured after the first answer)",
                                      "%u images · %d tokens each · %d tokens (prefill speed measured after the first answer)", n),
                            n, first, rows);
  else if (time != NULL)
    /* Translators: images of different sizes (Gemma 4 counts each by its
     * size): how many, their tokens in all, and the prefill time they add */
    text = g_strdup_printf (ngettext ("%u image · %d tokens · about %s of prefill",
                                      "%u images · %d tokens · about %s of prefill", n),
                            n, rows, time);
  else
    text = g_strdup_printf (ngettext ("%u image · %d tokens (prefill speed measured after the first answer)",
                                      "%u images · %d tokens (prefill speed measured after the first answer)", n),
                            n, rows);
  gtk_label_set_text (self->image_cost_label, text);
}

/* ----------------------------------------------------------- attaching */

static Attachment *
find_serial (TernComposer *self,
             guint         serial,
             guint        *index)
{
  for (guint i = 0; self->attachments != NULL && i < self->attachments->len; i++)
    {
      Attachment *a = g_ptr_array_index (self->attachments, i);

      if (a->serial == serial)
        {
          *index = i;
          return a;
        }
    }
  return NULL;
}

static void
remove_at (TernComposer *self,
           guint         index)
{
  Attachment *a = g_ptr_array_index (self->attachments, index);

  if (!a->ready)
    set_pending (self, self->n_pending - 1);
  gtk_box_remove (self->attachments_box, a->tile);
  g_ptr_array_remove_index (self->attachments, index);
}

static void
on_remove_clicked (GtkButton    *button,
                   TernComposer *self)
{
  guint serial = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (button), "tern-serial"));
  guint index;

  if (find_serial (self, serial, &index) != NULL)
    remove_at (self, index);
  update_cost (self);
}

typedef struct {
  GBytes *bytes;
  /* A pasted picture: encoded as PNG on the thread (bytes is NULL until
   * then); a 64-megapixel paste took seconds of the main loop. */
  GdkTexture *texture;
  char *name;
  int fit_side;
  /* results */
  int width, height;
  GBytes *thumb;           /* RGB8, thumb_w x thumb_h */
  int thumb_w, thumb_h;
} Decode;

static void
decode_free (Decode *d)
{
  g_clear_pointer (&d->bytes, g_bytes_unref);
  g_clear_object (&d->texture);
  g_free (d->name);
  g_clear_pointer (&d->thumb, g_bytes_unref);
  g_free (d);
}

/* Each dimension reduced on its own to at most side, by averaging the
 * source pixels each thumbnail pixel covers (the area filter the old
 * separate thumbnail decode used, gdk-pixbuf's BILINEAR when reducing). */
static GBytes *
thumbnail (const TernImage *img,
           int              side,
           int             *out_w,
           int             *out_h)
{
  int tw = MIN (img->width, side), th = MIN (img->height, side);
  guint8 *rgb = g_malloc ((gsize) tw * (gsize) th * 3);

  for (int y = 0; y < th; y++)
    {
      int y0 = (int) ((gint64) y * img->height / th);
      int y1 = MAX (y0 + 1, (int) ((gint64) (y + 1) * img->height / th));

      for (int x = 0; x < tw; x++)
        {
          int x0 = (int) ((gint64) x * img->width / tw);
          int x1 = MAX (x0 + 1, (int) ((gint64) (x + 1) * img->width / tw));
          double sum[3] = { 0, 0, 0 };
          double count = (double) (y1 - y0) * (double) (x1 - x0);

          for (int sy = y0; sy < y1; sy++)
            for (int sx = x0; sx < x1; sx++)
              {
                const float *p = img->rgb + ((gsize) sy * (gsize) img->width + (gsize) sx) * 3;

                sum[0] += p[0];
                sum[1] += p[1];
                sum[2] += p[2];
              }
          for (int c = 0; c < 3; c++)
            rgb[((gsize) y * (gsize) tw + (gsize) x) * 3 + (gsize) c] =
              (guint8) CLAMP (sum[c] / count * 255.0 + 0.5, 0.0, 255.0);
        }
    }
  *out_w = tw;
  *out_h = th;
  return g_bytes_new_take (rgb, (gsize) tw * (gsize) th * 3);
}

static void
decode_thread (GTask        *task,
               gpointer      source,
               gpointer      data,
               GCancellable *cancellable)
{
  Decode *d = data;
  GError *error = NULL;
  g_autoptr(TernCachedImage) cached = NULL;
  const TernImage *img;

  (void) source;
  (void) cancellable;
  if (d->bytes == NULL)
    d->bytes = gdk_texture_save_to_png_bytes (d->texture);
  cached = tern_image_cache_load (d->bytes, d->name, d->fit_side, &error);
  if (cached == NULL)
    {
      g_task_return_error (task, error);
      return;
    }
  img = tern_cached_image_get (cached);
  d->width = img->width;
  d->height = img->height;
  d->thumb = thumbnail (img, THUMB_SIDE, &d->thumb_w, &d->thumb_h);
  g_task_return_boolean (task, TRUE);
}

static void
on_decoded (GObject      *source,
            GAsyncResult *result,
            gpointer      data)
{
  TernComposer *self = TERN_COMPOSER (source);
  guint serial = GPOINTER_TO_UINT (data);
  Decode *d = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  Attachment *a;
  guint index;

  /* Removed, or the composer cleared (a new model, a send, its window
   * closed) while it decoded. */
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      if ((a = find_serial (self, serial, &index)) != NULL)
        {
          remove_at (self, index);
          update_cost (self);
          fail (self, error->message);
        }
      return;
    }
  if ((a = find_serial (self, serial, &index)) == NULL)
    return;
  if (a->bytes == NULL)
    a->bytes = g_bytes_ref (d->bytes);
  g_clear_object (&a->texture);
  a->width = d->width;
  a->height = d->height;
  a->ready = TRUE;
  set_pending (self, self->n_pending - 1);
  /* A size the projector refuses (Gemma 4: an aspect so extreme that the
   * picture would need more than twice the budget) is refused here, with
   * the engine's reason, rather than at send. */
  if (tokens_of (self, a, &error) < 0)
    {
      g_autofree char *message = g_strdup_printf ("%s: %s", a->name, error->message);

      remove_at (self, index);
      update_cost (self);
      fail (self, message);
      return;
    }
  texture = gdk_memory_texture_new (d->thumb_w, d->thumb_h, GDK_MEMORY_R8G8B8, d->thumb,
                                    (gsize) d->thumb_w * 3);
  gtk_picture_set_paintable (GTK_PICTURE (a->picture), GDK_PAINTABLE (texture));
  update_cost (self);
}

/* Takes bytes for the next message: checked at once as far as that is
 * cheap (the magic bytes), decoded on a thread. */
static gboolean attach (TernComposer *self,
                        GBytes       *bytes,
                        GdkTexture   *texture,
                        const char   *name);

gboolean
tern_composer_attach_bytes (TernComposer *self,
                            GBytes       *bytes,
                            const char   *name)
{
  g_return_val_if_fail (TERN_IS_COMPOSER (self), FALSE);

  return attach (self, bytes, NULL, name);
}

/* bytes, or (a pasted picture, a memory texture) texture, whose PNG the
 * decoding thread writes first. */
static gboolean
attach (TernComposer *self,
        GBytes       *bytes,
        GdkTexture   *texture,
        const char   *name)
{
  g_autoptr(GTask) task = NULL;
  Attachment *a;
  Decode *d;
  GtkWidget *remove;

  if (self->vision_native < 0 || (bytes == NULL && texture == NULL))
    {
      fail (self, no_vision_message (self));
      return FALSE;
    }
  /* Not a format Tern reads by its first bytes (text, SVG, an empty file):
   * the decoder's own refusal, which it gives before decoding anything, so
   * that nothing is shown. GTK's loaders would render an SVG or grey-fill a
   * JPEG cut short; only tern-image decodes. */
  if (bytes != NULL
      && tern_image_sniff (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes)) == NULL)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(TernImage) img = tern_image_load_bytes (g_bytes_get_data (bytes, NULL),
                                                        g_bytes_get_size (bytes), name, NULL,
                                                        &error);

      if (img == NULL)
        {
          fail (self, error->message);
          return FALSE;
        }
    }

  a = g_new0 (Attachment, 1);
  a->serial = ++self->next_serial;
  a->bytes = bytes != NULL ? g_bytes_ref (bytes) : NULL;
  a->texture = bytes == NULL && texture != NULL ? g_object_ref (texture) : NULL;
  a->name = g_strdup (name);
  a->tile = gtk_overlay_new ();
  a->picture = gtk_picture_new ();
  gtk_widget_set_size_request (a->picture, 56, 56);
  gtk_picture_set_can_shrink (GTK_PICTURE (a->picture), TRUE);
  gtk_widget_set_tooltip_text (a->picture, name);
  gtk_accessible_update_property (GTK_ACCESSIBLE (a->picture), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  name, -1);
  gtk_overlay_set_child (GTK_OVERLAY (a->tile), a->picture);
  remove = gtk_button_new_from_icon_name ("window-close-symbolic");
  gtk_widget_set_halign (remove, GTK_ALIGN_END);
  gtk_widget_set_valign (remove, GTK_ALIGN_START);
  gtk_widget_add_css_class (remove, "circular");
  gtk_widget_add_css_class (remove, "osd");
  gtk_widget_add_css_class (remove, "tern-attachment-remove");
  gtk_widget_set_tooltip_text (remove, _("Remove Image"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (remove), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Remove Image"), -1);
  g_object_set_data (G_OBJECT (remove), "tern-serial", GUINT_TO_POINTER (a->serial));
  g_signal_connect (remove, "clicked", G_CALLBACK (on_remove_clicked), self);
  gtk_overlay_add_overlay (GTK_OVERLAY (a->tile), remove);
  gtk_box_append (self->attachments_box, a->tile);
  g_ptr_array_add (self->attachments, a);
  set_pending (self, self->n_pending + 1);
  update_cost (self);

  d = g_new0 (Decode, 1);
  d->bytes = bytes != NULL ? g_bytes_ref (bytes) : NULL;
  d->texture = texture != NULL ? g_object_ref (texture) : NULL;
  d->name = g_strdup (name);
  d->fit_side = self->worker != NULL
                  ? tern_engine_worker_image_fit_side (self->worker, effective_budget (self))
                  : 0;
  task = g_task_new (self, NULL, on_decoded, GUINT_TO_POINTER (a->serial));
  g_task_set_task_data (task, d, (GDestroyNotify) decode_free);
  g_task_run_in_thread (task, decode_thread);
  return TRUE;
}

gboolean
tern_composer_attach_file (TernComposer *self,
                           GFile        *file)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *name = g_file_get_basename (file);
  g_autoptr(GBytes) bytes = NULL;
  g_autofree char *path = NULL;

  g_return_val_if_fail (TERN_IS_COMPOSER (self), FALSE);

  if (self->vision_native < 0)
    return tern_composer_attach_bytes (self, NULL, name);
  /* Only a regular file of a plausible size is read: a FIFO would block
   * the window, and a model dropped by mistake would be read whole. */
  {
    g_autoptr(GFileInfo) info = g_file_query_info (file,
                                                   G_FILE_ATTRIBUTE_STANDARD_TYPE ","
                                                   G_FILE_ATTRIBUTE_STANDARD_SIZE,
                                                   G_FILE_QUERY_INFO_NONE, NULL, &error);
    if (info == NULL)
      {
        fail (self, error->message);
        return FALSE;
      }
    if (g_file_info_get_file_type (info) != G_FILE_TYPE_REGULAR)
      {
        g_autofree char *message = g_strdup_printf (_("%s: not a regular file, so not an image Tern reads"),
                                                    name);
        fail (self, message);
        return FALSE;
      }
    if ((guint64) g_file_info_get_size (info) > TERN_IMAGE_MAX_JPEG_BYTES)
      {
        g_autofree char *message = g_strdup_printf (_("%s: too large for an image (over %u MiB)"),
                                                    name, TERN_IMAGE_MAX_JPEG_BYTES >> 20);
        fail (self, message);
        return FALSE;
      }
  }
  /* Image files are small next to a model: read here, decoded on a thread.
   * A local file through tern_read_file, which checks again what it opened:
   * a FIFO swapped in after the query is refused, not waited on. */
  path = g_file_get_path (file);
  if (path != NULL)
    {
      char *data = NULL;
      gsize len = 0;

      if (tern_read_file (path, TERN_IMAGE_MAX_JPEG_BYTES, &data, &len, &error))
        bytes = g_bytes_new_take (data, len);
    }
  else
    bytes = g_file_load_bytes (file, NULL, NULL, &error);
  if (bytes == NULL)
    {
      fail (self, error->message);
      return FALSE;
    }
  return tern_composer_attach_bytes (self, bytes, name);
}

gboolean
tern_composer_attach_texture (TernComposer *self,
                              GdkTexture   *texture)
{
  g_autoptr(GBytes) png = NULL;

  g_return_val_if_fail (TERN_IS_COMPOSER (self), FALSE);

  if (self->vision_native < 0)
    return tern_composer_attach_bytes (self, NULL, _("Pasted image"));
  /* A texture in memory is encoded on the decoding thread; another kind
   * (GL) only where it was made. */
  if (GDK_IS_MEMORY_TEXTURE (texture))
    return attach (self, NULL, texture, _("Pasted image"));
  png = gdk_texture_save_to_png_bytes (texture);
  return tern_composer_attach_bytes (self, png, _("Pasted image"));
}

void
tern_composer_clear_images (TernComposer *self)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));

  while (self->attachments->len > 0)
    remove_at (self, self->attachments->len - 1);
  update_cost (self);
}

GPtrArray *
tern_composer_get_images (TernComposer *self)
{
  GPtrArray *images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);

  g_return_val_if_fail (TERN_IS_COMPOSER (self), images);
  for (guint i = 0; i < self->attachments->len; i++)
    g_ptr_array_add (images,
                     g_bytes_ref (((Attachment *) g_ptr_array_index (self->attachments, i))->bytes));
  return images;
}

gboolean
tern_composer_has_content (TernComposer *self)
{
  g_return_val_if_fail (TERN_IS_COMPOSER (self), FALSE);
  return self->has_content;
}

gboolean
tern_composer_is_busy (TernComposer *self)
{
  g_return_val_if_fail (TERN_IS_COMPOSER (self), FALSE);
  return self->n_pending > 0;
}

/* Files from a file manager, or image data from another app. */
static gboolean
on_drop (GtkDropTarget *target,
         const GValue  *value,
         double         x,
         double         y,
         TernComposer  *self)
{
  gboolean any = FALSE;

  (void) target;
  (void) x;
  (void) y;
  if (G_VALUE_HOLDS (value, GDK_TYPE_FILE_LIST))
    {
      for (GSList *l = g_value_get_boxed (value); l != NULL; l = l->next)
        if (tern_composer_attach_file (self, l->data))
          any = TRUE;
        else
          break;
    }
  else if (G_VALUE_HOLDS (value, G_TYPE_FILE))
    any = tern_composer_attach_file (self, g_value_get_object (value));
  else if (G_VALUE_HOLDS (value, GDK_TYPE_TEXTURE))
    any = tern_composer_attach_texture (self, g_value_get_object (value));
  return any;
}

void
tern_composer_take_drops_on (TernComposer *self,
                             GtkWidget    *area)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));
  g_return_if_fail (self->drop_target == NULL);

  /* Anywhere on the chat: files from a file manager or image data. */
  GType types[] = { GDK_TYPE_FILE_LIST, G_TYPE_FILE, GDK_TYPE_TEXTURE };

  self->drop_target = gtk_drop_target_new (G_TYPE_INVALID, GDK_ACTION_COPY);
  gtk_drop_target_set_gtypes (self->drop_target, types, G_N_ELEMENTS (types));
  g_signal_connect_object (self->drop_target, "drop", G_CALLBACK (on_drop), self, 0);
  gtk_widget_add_controller (area, GTK_EVENT_CONTROLLER (self->drop_target));
}

static void
on_paste_texture (GObject      *clipboard,
                  GAsyncResult *result,
                  gpointer      data)
{
  g_autoptr(TernComposer) self = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GdkTexture) texture = gdk_clipboard_read_texture_finish (GDK_CLIPBOARD (clipboard),
                                                                     result, &error);

  if (texture != NULL)
    tern_composer_attach_texture (self, texture);
  else
    fail (self, error->message);
}

static void
on_paste_files (GObject      *clipboard,
                GAsyncResult *result,
                gpointer      data)
{
  g_autoptr(TernComposer) self = data;
  g_autoptr(GError) error = NULL;
  const GValue *value = gdk_clipboard_read_value_finish (GDK_CLIPBOARD (clipboard), result, &error);
  GSList *files = value != NULL ? g_value_get_boxed (value) : NULL;

  if (value == NULL)
    {
      fail (self, error->message);
      return;
    }
  /* A list that is not all local files (a link copied in a browser may
   * come as one) was text to the user: pasted as text. */
  for (GSList *l = files; l != NULL; l = l->next)
    if (!g_file_is_native (l->data))
      {
        g_signal_emit_by_name (self->text_view, "paste-clipboard");
        return;
      }
  for (GSList *l = files; l != NULL; l = l->next)
    if (!tern_composer_attach_file (self, l->data))
      break;
}

/* Ctrl+V with a picture on the clipboard attaches it; text pastes as usual. */
gboolean
tern_composer_paste_image (TernComposer *self)
{
  GdkClipboard *clipboard = gtk_widget_get_clipboard (GTK_WIDGET (self));
  GdkContentFormats *formats = gdk_clipboard_get_formats (clipboard);

  /* Files copied in a file manager (text/uri-list, with their paths as
   * text too): attached as the same files dropped would be. Paste Image
   * said the clipboard held no image, and Ctrl+V pasted the paths. */
  if (!gdk_content_formats_contain_gtype (formats, GDK_TYPE_TEXTURE)
      && gdk_content_formats_contain_gtype (formats, GDK_TYPE_FILE_LIST))
    {
      gdk_clipboard_read_value_async (clipboard, GDK_TYPE_FILE_LIST, G_PRIORITY_DEFAULT, NULL,
                                      on_paste_files, g_object_ref (self));
      return TRUE;
    }
  if (!gdk_content_formats_contain_gtype (formats, GDK_TYPE_TEXTURE)
      || gdk_content_formats_contain_gtype (formats, G_TYPE_STRING))
    return FALSE;
  gdk_clipboard_read_texture_async (clipboard, NULL, on_paste_texture, g_object_ref (self));
  return TRUE;
}

static void
on_choose_response (GtkNativeDialog *dialog,
                    int              response,
                    TernComposer    *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GListModel) files = gtk_file_chooser_get_files (GTK_FILE_CHOOSER (dialog));

      for (guint i = 0; i < g_list_model_get_n_items (files); i++)
        {
          g_autoptr(GFile) file = g_list_model_get_item (files, i);
          if (!tern_composer_attach_file (self, file))
            break;
        }
    }
  g_object_unref (dialog);
}

void
tern_composer_choose_images (TernComposer *self,
                             GtkWindow    *parent)
{
  GtkFileChooserNative *dialog;
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();

  g_return_if_fail (TERN_IS_COMPOSER (self));

  if (self->vision_native < 0)
    {
      tern_composer_attach_bytes (self, NULL, "");
      return;
    }
  dialog = gtk_file_chooser_native_new (_("Add Images"), parent, GTK_FILE_CHOOSER_ACTION_OPEN,
                                        _("_Add"), _("_Cancel"));
  gtk_file_chooser_set_select_multiple (GTK_FILE_CHOOSER (dialog), TRUE);
  gtk_file_filter_set_name (filter, _("Images (PNG, JPEG, WebP, GIF)"));
  gtk_file_filter_add_mime_type (filter, "image/png");
  gtk_file_filter_add_mime_type (filter, "image/jpeg");
  gtk_file_filter_add_mime_type (filter, "image/webp");
  gtk_file_filter_add_mime_type (filter, "image/gif");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
  g_signal_connect_object (dialog, "response", G_CALLBACK (on_choose_response), self, 0);
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

/* ------------------------------------------------------------- the rest */

/* The attached pictures as the drafts keep them (below): taken off the
 * composer, and put back on it (or, for a model that reads no images,
 * taken off with a sentence that says so). */
static GPtrArray *take_pictures (TernComposer *self);
static void       put_pictures  (TernComposer *self,
                                 GPtrArray    *pictures);

void
tern_composer_set_worker (TernComposer     *self,
                          TernEngineWorker *worker)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));
  g_set_object (&self->worker, worker);
}

void
tern_composer_set_vision (TernComposer *self,
                          gboolean      has_model,
                          int           native_tokens,
                          int           extra_rows,
                          const char   *projector,
                          const char   *unusable)
{
  g_autoptr(GPtrArray) pictures = NULL;

  g_return_if_fail (TERN_IS_COMPOSER (self));

  /* A model loaded with pictures attached dropped them without a word
   * (the text stayed): they are decoded again for the new projector. */
  pictures = take_pictures (self);
  self->has_model = has_model;
  g_clear_pointer (&self->no_vision, g_free);
  if (native_tokens <= 0 && projector != NULL && unusable != NULL)
    {
      g_autofree char *name = g_path_get_basename (projector);

      /* Translators: a projector file's name, and why it cannot be used */
      self->no_vision = g_strdup_printf (_("This model cannot read images: its vision projector %s cannot be used: %s"),
                                         name, unusable);
    }
  self->vision_native = native_tokens;
  self->vision_extra = MAX (extra_rows, 0);
  tern_composer_clear_images (self);
  if (native_tokens > 0)
    gtk_spin_button_set_range (self->image_tokens_spin, 0, native_tokens);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->attach_button),
                               native_tokens > 0 ? _("Add Image… (or drop or paste one)")
                                                 : no_vision_message (self));
  put_pictures (self, pictures);
}

gboolean
tern_composer_has_vision (TernComposer *self)
{
  g_return_val_if_fail (TERN_IS_COMPOSER (self), FALSE);
  return self->vision_native > 0;
}

void
tern_composer_set_prefill_speed (TernComposer *self,
                                 double        tok_s)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));
  self->prefill_tok_s = tok_s;
  update_cost (self);
}

int
tern_composer_get_image_budget (TernComposer *self)
{
  g_return_val_if_fail (TERN_IS_COMPOSER (self), 0);
  return effective_budget (self);
}

char *
tern_composer_get_text (TernComposer *self)
{
  GtkTextBuffer *buffer = gtk_text_view_get_buffer (self->text_view);
  GtkTextIter start, end;

  gtk_text_buffer_get_bounds (buffer, &start, &end);
  return gtk_text_buffer_get_text (buffer, &start, &end, FALSE);
}

void
tern_composer_set_text (TernComposer *self,
                        const char   *text)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));
  gtk_text_buffer_set_text (gtk_text_view_get_buffer (self->text_view), text ? text : "", -1);
}

void
tern_composer_focus (TernComposer *self)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));
  gtk_widget_grab_focus (GTK_WIDGET (self->text_view));
}

void
tern_composer_set_generating (TernComposer *self,
                              gboolean      generating)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));
  gtk_stack_set_visible_child_name (self->send_stack, generating ? "stop" : "send");
}

void
tern_composer_set_send_tooltip (TernComposer *self,
                                const char   *tooltip)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->send_button), tooltip);
}

GtkDropTarget *
tern_composer_get_drop_target (TernComposer *self)
{
  g_return_val_if_fail (TERN_IS_COMPOSER (self), NULL);
  return self->drop_target;
}

guint
tern_composer_get_n_images (TernComposer *self)
{
  g_return_val_if_fail (TERN_IS_COMPOSER (self), 0);
  return self->attachments->len;
}

const char *
tern_composer_get_cost_text (TernComposer *self)
{
  g_return_val_if_fail (TERN_IS_COMPOSER (self), NULL);
  return gtk_label_get_text (self->image_cost_label);
}

static gboolean
on_key (GtkEventControllerKey *controller,
        guint                  keyval,
        guint                  keycode,
        GdkModifierType        state,
        TernComposer          *self)
{
  (void) controller;
  (void) keycode;
  /* Ctrl+Enter sends too, as in most chat programs: it put a new line in
   * the message, which only Shift+Enter is said to do. */
  if ((keyval == GDK_KEY_Return || keyval == GDK_KEY_KP_Enter)
      && ((state & (GDK_SHIFT_MASK | GDK_CONTROL_MASK | GDK_ALT_MASK)) == 0
          || (state & (GDK_SHIFT_MASK | GDK_CONTROL_MASK | GDK_ALT_MASK)) == GDK_CONTROL_MASK))
    {
      gtk_widget_activate_action (GTK_WIDGET (self), "win.send", NULL);
      return TRUE;
    }
  if ((keyval == GDK_KEY_v || keyval == GDK_KEY_V)
      && (state & (GDK_SHIFT_MASK | GDK_CONTROL_MASK | GDK_ALT_MASK)) == GDK_CONTROL_MASK)
    return tern_composer_paste_image (self);
  return FALSE;
}

static void
tern_composer_get_property (GObject    *object,
                            guint       prop_id,
                            GValue     *value,
                            GParamSpec *pspec)
{
  TernComposer *self = TERN_COMPOSER (object);

  switch (prop_id)
    {
    case PROP_BUSY:
      g_value_set_boolean (value, self->n_pending > 0);
      break;
    case PROP_HAS_CONTENT:
      g_value_set_boolean (value, self->has_content);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tern_composer_dispose (GObject *object)
{
  TernComposer *self = TERN_COMPOSER (object);

  /* A decode still running finds no attachment when it ends. */
  if (self->attachments != NULL)
    g_ptr_array_set_size (self->attachments, 0);
  self->n_pending = 0;
  g_clear_object (&self->worker);
  g_clear_object (&self->settings);
  gtk_widget_dispose_template (GTK_WIDGET (object), TERN_TYPE_COMPOSER);
  G_OBJECT_CLASS (tern_composer_parent_class)->dispose (object);
}

static void
tern_composer_finalize (GObject *object)
{
  TernComposer *self = TERN_COMPOSER (object);

  g_clear_pointer (&self->attachments, g_ptr_array_unref);
  g_free (self->no_vision);
  G_OBJECT_CLASS (tern_composer_parent_class)->finalize (object);
}

static void
tern_composer_class_init (TernComposerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->get_property = tern_composer_get_property;
  object_class->dispose = tern_composer_dispose;
  object_class->finalize = tern_composer_finalize;

  props[PROP_BUSY] = g_param_spec_boolean ("busy", NULL, NULL, FALSE,
                                           G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_HAS_CONTENT] = g_param_spec_boolean ("has-content", NULL, NULL, FALSE,
                                                  G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);

  /* A refusal or a failure to decode, as a sentence for the user. */
  signals[SIGNAL_ERROR] =
    g_signal_new ("error", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 1, G_TYPE_STRING);

  gtk_widget_class_set_template_from_resource (widget_class,
                                               "/io/github/tern/Tern/ui/tern-composer.ui");
  gtk_widget_class_bind_template_child (widget_class, TernComposer, attachments_bar);
  gtk_widget_class_bind_template_child (widget_class, TernComposer, attachments_box);
  gtk_widget_class_bind_template_child (widget_class, TernComposer, image_tokens_spin);
  gtk_widget_class_bind_template_child (widget_class, TernComposer, image_cost_label);
  gtk_widget_class_bind_template_child (widget_class, TernComposer, attach_button);
  gtk_widget_class_bind_template_child (widget_class, TernComposer, text_view);
  gtk_widget_class_bind_template_child (widget_class, TernComposer, send_stack);
  gtk_widget_class_bind_template_child (widget_class, TernComposer, send_button);
}

static void
tern_composer_init (TernComposer *self)
{
  GtkEventController *keys;

  gtk_widget_init_template (GTK_WIDGET (self));

  self->attachments = g_ptr_array_new_with_free_func ((GDestroyNotify) attachment_free);
  self->vision_native = -1;
  self->settings = tern_settings_new ();
  g_settings_bind (self->settings, "image-tokens", self->image_tokens_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_signal_connect_swapped (self->image_tokens_spin, "value-changed", G_CALLBACK (update_cost),
                            self);
  g_signal_connect (self->image_tokens_spin, "output", G_CALLBACK (on_budget_output), NULL);
  g_signal_connect (self->image_tokens_spin, "input", G_CALLBACK (on_budget_input), NULL);
  /* "Auto" means another budget in flash mode than in chat. */
  g_signal_connect_swapped (self->settings, "changed::mode", G_CALLBACK (update_cost), self);

  g_signal_connect_swapped (gtk_text_view_get_buffer (self->text_view), "changed",
                            G_CALLBACK (update_has_content), self);

  keys = gtk_event_controller_key_new ();
  gtk_event_controller_set_propagation_phase (keys, GTK_PHASE_CAPTURE);
  g_signal_connect (keys, "key-pressed", G_CALLBACK (on_key), self);
  gtk_widget_add_controller (GTK_WIDGET (self->text_view), keys);
}

/* ------------------------------------------------------------ drafts */

typedef struct {
  GBytes *bytes;
  GdkTexture *texture;
  char *name;
} DraftPicture;

struct _TernComposerDraft {
  char *text;
  GPtrArray *pictures;     /* DraftPicture * */
};

static void
draft_picture_free (DraftPicture *p)
{
  g_clear_pointer (&p->bytes, g_bytes_unref);
  g_clear_object (&p->texture);
  g_free (p->name);
  g_free (p);
}

void
tern_composer_draft_free (TernComposerDraft *draft)
{
  if (draft == NULL)
    return;
  g_free (draft->text);
  g_ptr_array_unref (draft->pictures);
  g_free (draft);
}

static GPtrArray *
take_pictures (TernComposer *self)
{
  GPtrArray *pictures = g_ptr_array_new_with_free_func ((GDestroyNotify) draft_picture_free);

  for (guint i = 0; i < self->attachments->len; i++)
    {
      Attachment *a = g_ptr_array_index (self->attachments, i);
      DraftPicture *p = g_new0 (DraftPicture, 1);

      p->bytes = a->bytes != NULL ? g_bytes_ref (a->bytes) : NULL;
      p->texture = p->bytes == NULL && a->texture != NULL ? g_object_ref (a->texture) : NULL;
      p->name = g_strdup (a->name);
      if (p->bytes == NULL && p->texture == NULL)
        draft_picture_free (p);
      else
        g_ptr_array_add (pictures, p);
    }
  tern_composer_clear_images (self);
  return pictures;
}

static void
put_pictures (TernComposer *self,
              GPtrArray    *pictures)
{
  if (pictures == NULL || pictures->len == 0)
    return;
  if (self->vision_native < 0)
    {
      /* Translators: pictures that were attached to the message being
       * written, taken off because the model now loaded cannot read
       * images; the %s is the sentence that says why */
      g_autofree char *message = g_strdup_printf (ngettext ("%u image was removed from the message. %s",
                                                            "%u images were removed from the message. %s",
                                                            pictures->len),
                                                  pictures->len, no_vision_message (self));

      fail (self, message);
      return;
    }
  for (guint i = 0; i < pictures->len; i++)
    {
      DraftPicture *p = g_ptr_array_index (pictures, i);

      attach (self, p->bytes, p->bytes == NULL ? p->texture : NULL, p->name);
    }
}

TernComposerDraft *
tern_composer_take_draft (TernComposer *self)
{
  TernComposerDraft *draft;
  g_autofree char *text = NULL;

  g_return_val_if_fail (TERN_IS_COMPOSER (self), NULL);

  text = tern_composer_get_text (self);
  if ((text == NULL || text[0] == '\0') && self->attachments->len == 0)
    return NULL;
  draft = g_new0 (TernComposerDraft, 1);
  draft->text = g_steal_pointer (&text);
  draft->pictures = take_pictures (self);
  tern_composer_set_text (self, "");
  return draft;
}

void
tern_composer_restore_draft (TernComposer      *self,
                             TernComposerDraft *draft)
{
  g_return_if_fail (TERN_IS_COMPOSER (self));

  if (draft == NULL)
    return;
  tern_composer_clear_images (self);
  tern_composer_set_text (self, draft->text);
  /* A chat's draft with pictures, come back to under a model that reads
   * none: they went without a word too. */
  put_pictures (self, draft->pictures);
}
