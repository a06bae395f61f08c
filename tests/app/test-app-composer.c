/* The composer (app/tern-composer.c) with a Gemma 4 projector (issue 22:
 * an attachment "shows its token cost before sending"). Gemma 4's count
 * follows the picture's size: the cost line must show the count the engine
 * reports for the attached picture's size and the budget
 * (tn_vision_image_tokens), not Gemma 3's square grid, which the composer
 * used for every projector (for 200 x 130 at a budget of 70: 64 instead of
 * the engine's count). The picture is decoded once, off the main loop: the
 * worker finds it in the cache at send. Garbage is refused with a sentence
 * naming the file.
 *
 * The projector is what tern-cli mkmodel --arch gemma4-vision writes
 * (tn_mkmodel_vision with projector "gemma4v", the sizes of
 * tests/server/test-image-gemma4.py), beside a tiny Gemma 3 text model with
 * the real Gemma 3 vocabulary (TERN_VOCAB_DIR). */
#include "app-test.h"

#include <stdlib.h>
#include <string.h>

#include "tern.h"
#include "tern-application.h"
#include "tern-composer.h"
#include "tern-engine-worker.h"
#include "tern-image-cache.h"

static gboolean
write_png (const char *path,
           int         width,
           int         height)
{
  g_autoptr(GdkPixbuf) pixbuf = gdk_pixbuf_new (GDK_COLORSPACE_RGB, FALSE, 8, width, height);
  guchar *pixels = gdk_pixbuf_get_pixels (pixbuf);
  int stride = gdk_pixbuf_get_rowstride (pixbuf);

  for (int y = 0; y < height; y++)
    for (int x = 0; x < width; x++)
      {
        guchar *p = pixels + y * stride + x * 3;
        p[0] = (guchar) (x * 255 / MAX (width - 1, 1));
        p[1] = (guchar) (y * 255 / MAX (height - 1, 1));
        p[2] = 128;
      }
  return gdk_pixbuf_save (pixbuf, path, "png", NULL, NULL);
}

/* What the composer showed for every projector before: the largest square
 * grid within the budget, at most the native one. */
static int
square_rule (int native,
             int budget)
{
  int k = 1;

  if (budget <= 0 || budget >= native)
    return native;
  while ((k + 1) * (k + 1) <= budget)
    k++;
  return k * k;
}

/* The engine's count for a picture of w x h under budget. */
static int
engine_count (const char *mmproj,
              int         budget,
              int         w,
              int         h)
{
  tn_vision *v = NULL;
  tn_error err = { 0 };
  int n;

  if (tn_vision_load (mmproj, &v, &err) != TN_OK)
    {
      fprintf (stderr, "%s: %s\n", mmproj, err.message);
      return -1000;
    }
  n = tn_vision_image_tokens (v, budget, w, h, &err);
  tn_vision_free (v);
  return n;
}

static gboolean
attach (TernWindow *w,
        const char *path)
{
  g_autoptr(GFile) file = g_file_new_for_path (path);
  gboolean taken = tern_composer_attach_file (tern_window_get_composer (w), file);

  CHECK (wait_for (w, not_attaching, 30));
  return taken;
}

/* "N image(s) · P tokens each · T tokens ...": P and T, or FALSE. (Not
 * sscanf: glibc's stops at the middle dot, a multibyte character, in the
 * UTF-8 locale GTK sets.) */
static gboolean
parse_each (const char *text,
            int        *per,
            int        *total)
{
  static const char each[] = " tokens each · ";
  const char *p = strstr (text, " · ");
  char *end = NULL;

  if (p == NULL)
    return FALSE;
  *per = (int) strtol (p + strlen (" · "), &end, 10);
  if (end == NULL || strncmp (end, each, strlen (each)) != 0)
    return FALSE;
  *total = (int) strtol (end + strlen (each), &end, 10);
  return end != NULL && g_str_has_prefix (end, " tokens");
}

/* Whether a label under w shows a text holding `needle` (what the user
 * sees, not what was asked for: markup that does not parse shows nothing). */
static gboolean
is_visible_label_with (GtkWidget    *w,
                       gconstpointer needle)
{
  return widget_is_label_with (w, needle) && gtk_widget_get_visible (w);
}

static gboolean
label_shows (GtkWidget  *w,
             const char *needle)
{
  return find_widget_where (w, is_visible_label_with, needle) != NULL;
}

/* Refused: nothing attached, and an error that names the file. */
static void
check_refused (TernWindow *w,
               const char *path,
               gboolean    taken)
{
  g_autofree char *name = g_path_get_basename (path);
  const char *error = tern_window_get_last_error (w);

  CHECKF (tern_window_get_n_attachments (w) == 0, "%s: %u attached", name,
          tern_window_get_n_attachments (w));
  CHECKF (error != NULL && strstr (error, name) != NULL, "%s (taken %d): error %s", name, taken,
          error ? error : "(none)");
  fprintf (stderr, "refused %s: %s\n", name, error ? error : "(none)");
}

int
main (int   argc,
      char *argv[])
{
  g_autofree char *tmp = NULL;
  g_autofree char *gemma = NULL;
  g_autofree char *mmproj = NULL;
  g_autofree char *vocab = NULL;
  g_autofree char *wide = NULL;
  g_autofree char *small = NULL;
  g_autoptr(TernApplication) app = NULL;
  tn_mkmodel_params p = tn_test_tiny_model ("gemma3", 3);
  tn_mkmodel_vision_params vp = tn_mkmodel_vision_default_params ();
  tn_error err = { 0 };
  GSettings *settings;
  TernWindow *w;
  int c70, c140, c_small, per = 0, total = 0, extra;
  guint decoded, encoded;

  (void) argc;
  (void) argv;
  if ((tmp = app_test_start ("tern-app-composer")) == NULL)
    return 1;
  if (g_getenv ("TERN_VOCAB_DIR") == NULL)
    {
      fprintf (stderr, "TERN_VOCAB_DIR is not set (tools/fetch-vocab.sh)\n");
      CHECK (FALSE);
      return tn_test_finish ("app-composer");
    }
  vocab = g_build_filename (g_getenv ("TERN_VOCAB_DIR"), "gemma3", "tokenizer.json", NULL);
  /* A name with markup's characters: the loading page shows it as it is. */
  gemma = g_build_filename (tmp, "gemma & <co>.gguf", NULL);
  mmproj = g_build_filename (tmp, "mmproj-gemma-g4.gguf", NULL);
  p.tokenizer = vocab;
  p.n_threads = 1;
  CHECKF (tn_mkmodel (&p, gemma, &err) == TN_OK, "%s", err.message);
  vp.projector = "gemma4v";
  vp.target = gemma;
  vp.patch_size = 4;
  vp.n_embd = 32;
  vp.n_ff = 48;
  vp.n_layer = 1;
  vp.n_head = 2;
  vp.n_pos = 128;
  CHECKF (tn_mkmodel_vision (&vp, mmproj, &err) == TN_OK, "%s", err.message);

  if ((app = app_test_application_new ()) == NULL)
    return 1;
  settings = tern_application_get_settings (app);
  g_settings_set_int (settings, "image-tokens", 70);
  g_settings_set_string (settings, "mode", "flash");
  g_settings_set_int (settings, "max-tokens", 2);
  w = app_test_window_new (app, 0, 0);
  spin_for (0.3);

  activate (w, "load-model", g_variant_new_string (gemma));
  CHECKF (label_shows (GTK_WIDGET (w), "gemma & <co>.gguf"),
          "the loading page does not show the model's name");
  CHECK (wait_for (w, not_loading, 60));
  CHECK (wait_for (w, idle_engine, 60));
  spin_for (0.2);
  CHECKF (tern_window_has_vision (w), "no vision after loading %s (error: %s)", gemma,
          tern_window_get_last_error (w));
  if (!tern_window_has_vision (w))
    goto out;

  /* Garbage first. Text named .png: refused by its first bytes, at once. */
  {
    g_autofree char *text = g_build_filename (tmp, "notes.png", NULL);
    gboolean taken;

    g_file_set_contents (text, "not a picture\n", -1, NULL);
    taken = attach (w, text);
    CHECK (!taken);
    check_refused (w, text, taken);
  }
  /* A file name with markup's characters: the toast shows it as it is
   * (markup that does not parse would leave it empty). */
  {
    g_autofree char *odd = g_build_filename (tmp, "Tom & Jerry <1>.png", NULL);

    g_file_set_contents (odd, "not a picture\n", -1, NULL);
    tern_window_dismiss_toasts (w); /* one toast at a time: the others queue */
    spin_for (0.3);
    check_refused (w, odd, attach (w, odd));
    spin_for (0.3);
    CHECKF (label_shows (GTK_WIDGET (w), "Tom & Jerry <1>.png"),
            "no toast shows the refusal of 'Tom & Jerry <1>.png'");
    tern_window_dismiss_toasts (w);
  }
  /* A PNG signature over garbage: taken, then dropped when its decoding
   * (on a thread) fails. */
  {
    g_autofree char *fake = g_build_filename (tmp, "fake.png", NULL);
    char data[4096];
    gboolean taken;

    memcpy (data, "\x89PNG\r\n\x1a\n", 8);
    for (gsize i = 8; i < sizeof data; i++)
      data[i] = (char) (i * 131 + 7);
    g_file_set_contents (fake, data, sizeof data, NULL);
    taken = attach (w, fake);
    check_refused (w, fake, taken);
  }
  /* An empty file, and a PNG cut short. */
  {
    g_autofree char *empty = g_build_filename (tmp, "empty.png", NULL);
    g_autofree char *whole = g_build_filename (tmp, "whole.png", NULL);
    g_autofree char *cut = g_build_filename (tmp, "cut.png", NULL);
    g_autofree char *bytes = NULL;
    gsize len = 0;

    g_file_set_contents (empty, "", 0, NULL);
    check_refused (w, empty, attach (w, empty));
    CHECK (write_png (whole, 300, 200));
    CHECK (g_file_get_contents (whole, &bytes, &len, NULL));
    g_file_set_contents (cut, bytes, (gssize) len / 2, NULL);
    check_refused (w, cut, attach (w, cut));
  }
  /* An aspect Gemma 4 refuses at this budget (more than twice the budget
   * would be needed): refused with the engine's reason, at attach time. */
  {
    g_autofree char *thin = g_build_filename (tmp, "thin.png", NULL);
    int expect = engine_count (mmproj, 70, 4000, 2);

    CHECK (write_png (thin, 4000, 2));
    fprintf (stderr, "engine: 4000 x 2 at 70: %d\n", expect);
    CHECKF (expect < 0, "the engine takes 4000 x 2 at 70 (%d tokens): pick another size", expect);
    check_refused (w, thin, attach (w, thin));
  }

  /* A non-square picture: the engine's count, not the square grid's. */
  wide = g_build_filename (tmp, "wide.png", NULL);
  CHECK (write_png (wide, 200, 130));
  c70 = engine_count (mmproj, 70, 200, 130);
  c140 = engine_count (mmproj, 140, 200, 130);
  fprintf (stderr, "engine: 200 x 130 at 70: %d, at 140: %d; square rule at 70: %d\n", c70, c140,
           square_rule (1120, 70));
  CHECKF (c70 > 0 && c70 != square_rule (1120, 70),
          "the engine's count (%d) must differ from the square rule's for the test to tell", c70);
  CHECK (attach (w, wide));
  CHECK (tern_window_get_n_attachments (w) == 1);
  /* The thumbnail's remove button sits in its corner and leaves the
   * picture visible: the theme's circular button covered about a third of
   * it. It stays a button that takes the keyboard's focus. */
  {
    GtkWidget *remove = find_button_by_tooltip (GTK_WIDGET (w), "Remove Image");
    GtkWidget *picture = remove != NULL ? gtk_widget_get_prev_sibling (remove) : NULL;
    graphene_rect_t b, p;

    spin_for (0.3);
    CHECK (remove != NULL && GTK_IS_PICTURE (picture));
    if (remove != NULL && GTK_IS_PICTURE (picture))
      {
        CHECK (gtk_widget_compute_bounds (remove, picture, &b)
               && gtk_widget_compute_bounds (picture, picture, &p));
        fprintf (stderr, "remove button %.0f x %.0f at %.0f,%.0f on a %.0f x %.0f thumbnail\n",
                 b.size.width, b.size.height, b.origin.x, b.origin.y, p.size.width,
                 p.size.height);
        CHECKF (b.size.width * b.size.height <= p.size.width * p.size.height / 6,
                "the remove button (%.0f x %.0f) covers more than a sixth of the %.0f x %.0f "
                "thumbnail", b.size.width, b.size.height, p.size.width, p.size.height);
        CHECKF (b.origin.x >= p.size.width / 2 && b.origin.y + b.size.height <= p.size.height / 2,
                "the remove button at %.0f,%.0f is not in the thumbnail's top right corner",
                b.origin.x, b.origin.y);
        CHECK (gtk_widget_get_focusable (remove) && gtk_widget_get_sensitive (remove));
      }
  }
  fprintf (stderr, "cost at 70: %s\n", tern_window_get_image_cost_text (w));
  CHECKF (parse_each (tern_window_get_image_cost_text (w), &per, &total) && per == c70,
          "cost line \"%s\": the engine says %d tokens", tern_window_get_image_cost_text (w), c70);
  extra = total - per;
  CHECKF (extra >= 0 && extra < 16, "%d rows besides the image's tokens", extra);

  /* Another budget: the line follows, again with the engine's count. */
  g_settings_set_int (settings, "image-tokens", 140);
  spin_for (0.1);
  fprintf (stderr, "cost at 140: %s\n", tern_window_get_image_cost_text (w));
  CHECKF (parse_each (tern_window_get_image_cost_text (w), &per, &total) && per == c140
          && total == c140 + extra,
          "cost line \"%s\": the engine says %d tokens", tern_window_get_image_cost_text (w), c140);

  /* Auto (0): 70 in flash mode for a projector that takes several budgets
   * (the seed's flash budget), the projector's most in chat mode. */
  {
    int c_auto_chat = engine_count (mmproj, 0, 200, 130);

    g_settings_set_int (settings, "image-tokens", 0);
    spin_for (0.1);
    fprintf (stderr, "cost at auto, flash: %s\n", tern_window_get_image_cost_text (w));
    {
      g_autofree char *shot = g_build_filename (g_getenv ("TERN_SCREENSHOT_DIR") != NULL
                                                  ? g_getenv ("TERN_SCREENSHOT_DIR")
                                                  : tmp,
                                                "composer-auto.png", NULL);

      CHECK (app_test_save_screenshot (GTK_WIDGET (w), shot));
      fprintf (stderr, "screenshot: %s\n", shot);
    }
    CHECKF (parse_each (tern_window_get_image_cost_text (w), &per, &total) && per == c70,
            "auto in flash: \"%s\", the engine says %d at 70", tern_window_get_image_cost_text (w),
            c70);
    g_settings_set_string (settings, "mode", "chat");
    spin_for (0.1);
    fprintf (stderr, "cost at auto, chat: %s (engine at 0: %d)\n",
             tern_window_get_image_cost_text (w), c_auto_chat);
    CHECKF (c_auto_chat > 0 && c_auto_chat != c70, "the projector's most (%d) must differ from 70's (%d)",
            c_auto_chat, c70);
    CHECKF (parse_each (tern_window_get_image_cost_text (w), &per, &total) && per == c_auto_chat,
            "auto in chat: \"%s\", the engine says %d", tern_window_get_image_cost_text (w),
            c_auto_chat);
    g_settings_set_string (settings, "mode", "flash");
    g_settings_set_int (settings, "image-tokens", 140);
    spin_for (0.1);
  }

  /* A second picture, of another size: the line gives the sum of the
   * engine's counts ("tokens each" only when they are the same). */
  small = g_build_filename (tmp, "small.png", NULL);
  CHECK (write_png (small, 50, 40));
  c_small = engine_count (mmproj, 140, 50, 40);
  CHECK (attach (w, small));
  CHECK (tern_window_get_n_attachments (w) == 2);
  {
    int sum = c140 + c_small + 2 * extra;
    g_autofree char *want = c_small != c140
                              ? g_strdup_printf ("2 images · %d tokens", sum)
                              : g_strdup_printf ("2 images · %d tokens each · %d tokens", c140, sum);
    const char *got = tern_window_get_image_cost_text (w);

    fprintf (stderr, "engine: 50 x 40 at 140: %d; cost of two: %s\n", c_small, got);
    CHECKF (g_str_has_prefix (got, want) && (c_small == c140 || strstr (got, "each") == NULL),
            "\"%s\", want \"%s\"", got, want);
  }

  /* Sent: the worker finds both pictures decoded (no decode at send), and
   * the prompt holds their tokens. */
  decoded = tern_image_cache_n_decoded ();
  encoded = tern_engine_worker_n_encoded ();
  tern_window_set_composer_text (w, "What is in these pictures?");
  activate (w, "send", NULL);
  CHECK (tern_window_is_generating (w));
  CHECK (wait_for (w, not_generating, 120));
  CHECK (tern_window_get_n_attachments (w) == 0);
  CHECKF (tern_image_cache_n_decoded () == decoded, "%u decodes at send",
          tern_image_cache_n_decoded () - decoded);
  {
    TernChat *chat = tern_window_get_chat (w);
    guint n = tern_chat_get_n_messages (chat);
    TernMessage *m = n ? tern_chat_get_message (chat, n - 1) : NULL;

    CHECKF (m != NULL && m->error == NULL, "error: %s", m ? m->error : "(no answer)");
    CHECKF (m != NULL && m->stats.prompt_tokens >= c140 + c_small, "prompt %d tokens, images %d",
            m ? m->stats.prompt_tokens : -1, c140 + c_small);
    if (m != NULL)
      fprintf (stderr, "sent: prompt %d tokens (%d of them the images)\n", m->stats.prompt_tokens,
               c140 + c_small);
  }
  CHECKF (tern_engine_worker_n_encoded () - encoded == 2, "%u encodings for two pictures",
          tern_engine_worker_n_encoded () - encoded);

  /* The same picture sent again at the same budget reuses its encoding
   * (keyed by content and budget), in flash and in chat mode alike. */
  encoded = tern_engine_worker_n_encoded ();
  CHECK (attach (w, wide));
  tern_window_set_composer_text (w, "And this one again?");
  activate (w, "send", NULL);
  CHECK (wait_for (w, not_generating, 120));
  CHECKF (tern_engine_worker_n_encoded () == encoded, "%u encodings for a picture sent again",
          tern_engine_worker_n_encoded () - encoded);
  {
    TernChat *chat = tern_window_get_chat (w);
    guint n = tern_chat_get_n_messages (chat);
    TernMessage *m = n ? tern_chat_get_message (chat, n - 1) : NULL;

    CHECKF (m != NULL && m->error == NULL, "error: %s", m ? m->error : "(no answer)");
  }

  /* A pasted picture (a texture in memory): its PNG is written on the
   * decoding thread, not on the main loop (a 64-megapixel paste took
   * seconds there), and it is sent like an attached file. */
  {
    g_autoptr(GdkPixbuf) pb = gdk_pixbuf_new (GDK_COLORSPACE_RGB, FALSE, 8, 4000, 3000);
    g_autoptr(GdkTexture) texture = NULL;
    TernComposer *composer = tern_window_get_composer (w);
    g_autoptr(GPtrArray) images = NULL;
    gint64 t0;
    double ms;

    gdk_pixbuf_fill (pb, 0x50a030ff);
    texture = gdk_texture_new_for_pixbuf (pb);
    t0 = g_get_monotonic_time ();
    CHECK (tern_composer_attach_texture (composer, texture));
    ms = (g_get_monotonic_time () - t0) / 1000.0;
    fprintf (stderr, "attach_texture of 4000 x 3000: %.1f ms\n", ms);
    CHECKF (ms < 150, "attach_texture took %.0f ms on the main loop", ms);
    CHECK (wait_for (w, not_attaching, 60));
    CHECK (tern_window_get_n_attachments (w) == 1);
    images = tern_composer_get_images (composer);
    CHECK (images->len == 1 && g_ptr_array_index (images, 0) != NULL
           && g_strcmp0 (tern_image_sniff (g_bytes_get_data (g_ptr_array_index (images, 0), NULL),
                                           g_bytes_get_size (g_ptr_array_index (images, 0))),
                         "png") == 0);
    tern_window_set_composer_text (w, "And a pasted one?");
    activate (w, "send", NULL);
    CHECK (wait_for (w, not_generating, 120));
    {
      TernChat *chat = tern_window_get_chat (w);
      guint n = tern_chat_get_n_messages (chat);
      TernMessage *q = n >= 2 ? tern_chat_get_message (chat, n - 2) : NULL;
      TernMessage *m = n ? tern_chat_get_message (chat, n - 1) : NULL;

      CHECKF (m != NULL && m->error == NULL, "error: %s", m ? m->error : "(no answer)");
      CHECK (q != NULL && q->images != NULL && q->images->len == 1);
    }
  }

  /* What is being written stays with its chat: a picture and a question
   * started in one chat, then another chat opened, are not sent with the
   * other chat's question, and are there again on coming back (a paste
   * still being encoded too). */
  {
    TernComposer *composer = tern_window_get_composer (w);
    TernChat *first = tern_window_get_chat (w);
    GtkListBox *list = GTK_LIST_BOX (tern_window_get_chat_list (w));
    g_autoptr(GdkPixbuf) pb = gdk_pixbuf_new (GDK_COLORSPACE_RGB, FALSE, 8, 3000, 2000);
    g_autoptr(GdkTexture) texture = NULL;
    g_autofree char *text = NULL;
    guint pos = 0;

    gdk_pixbuf_fill (pb, 0x3060a0ff);
    texture = gdk_texture_new_for_pixbuf (pb);
    CHECK (attach (w, wide));
    tern_window_set_composer_text (w, "Half a question about the wide one");
    CHECK (tern_composer_attach_texture (composer, texture));
    CHECK (tern_window_get_n_attachments (w) == 2);
    activate (w, "new-chat", NULL);
    CHECK (tern_window_get_chat (w) != first);
    text = tern_window_get_composer_text (w);
    CHECKF (text != NULL && text[0] == '\0', "the new chat's composer holds \"%s\"", text);
    CHECKF (tern_window_get_n_attachments (w) == 0, "the new chat's composer holds %u pictures",
            tern_window_get_n_attachments (w));
    tern_window_set_composer_text (w, "Another chat's draft");

    CHECK (g_list_store_find (G_LIST_STORE (tern_window_get_chats (w)), first, &pos));
    g_signal_emit_by_name (list, "row-activated", gtk_list_box_get_row_at_index (list, (int) pos));
    CHECK (tern_window_get_chat (w) == first);
    g_clear_pointer (&text, g_free);
    text = tern_window_get_composer_text (w);
    CHECKF (g_strcmp0 (text, "Half a question about the wide one") == 0, "back: \"%s\"", text);
    CHECK (wait_for (w, not_attaching, 60));
    CHECKF (tern_window_get_n_attachments (w) == 2, "back: %u pictures",
            tern_window_get_n_attachments (w));

    /* and the other chat's draft is its own */
    g_signal_emit_by_name (list, "row-activated", gtk_list_box_get_row_at_index (list, 0));
    CHECK (tern_window_get_chat (w) != first);
    g_clear_pointer (&text, g_free);
    text = tern_window_get_composer_text (w);
    CHECKF (g_strcmp0 (text, "Another chat's draft") == 0, "other: \"%s\"", text);
    CHECK (tern_window_get_n_attachments (w) == 0);

    CHECK (g_list_store_find (G_LIST_STORE (tern_window_get_chats (w)), first, &pos));
    g_signal_emit_by_name (list, "row-activated", gtk_list_box_get_row_at_index (list, (int) pos));
    CHECK (tern_window_get_chat (w) == first);
    CHECK (wait_for (w, not_attaching, 60));
    activate (w, "send", NULL);
    CHECK (wait_for (w, not_generating, 120));
    {
      guint n = tern_chat_get_n_messages (first);
      TernMessage *q = n >= 2 ? tern_chat_get_message (first, n - 2) : NULL;
      TernMessage *m = n ? tern_chat_get_message (first, n - 1) : NULL;

      CHECKF (m != NULL && m->error == NULL, "error: %s", m ? m->error : "(no answer)");
      CHECKF (q != NULL && g_strcmp0 (q->text, "Half a question about the wide one") == 0
              && q->images != NULL && q->images->len == 2,
              "sent \"%s\" with %u pictures", q ? q->text : "(none)",
              q && q->images ? q->images->len : 0);
    }
  }

  /* Send is off with nothing to send (blanks are nothing), on with a
   * picture alone, which goes without a word ("what is this?"). */
  {
    TernChat *chat = tern_window_get_chat (w);
    guint before = tern_chat_get_n_messages (chat);

    CHECK (!g_action_group_get_action_enabled (G_ACTION_GROUP (w), "send"));
    tern_window_set_composer_text (w, "  \n\t ");
    CHECK (!g_action_group_get_action_enabled (G_ACTION_GROUP (w), "send"));
    g_action_group_activate_action (G_ACTION_GROUP (w), "send", NULL);  /* Enter, say */
    spin_for (0.1);
    CHECK (tern_chat_get_n_messages (chat) == before);
    CHECK (attach (w, wide));
    CHECK (g_action_group_get_action_enabled (G_ACTION_GROUP (w), "send"));
    tern_window_set_composer_text (w, "");
    CHECK (g_action_group_get_action_enabled (G_ACTION_GROUP (w), "send"));
    activate (w, "send", NULL);
    CHECK (wait_for (w, not_generating, 120));
    {
      guint n = tern_chat_get_n_messages (chat);
      TernMessage *q = n >= 2 ? tern_chat_get_message (chat, n - 2) : NULL;
      TernMessage *m = n ? tern_chat_get_message (chat, n - 1) : NULL;

      CHECKF (n == before + 2, "%u messages after a picture sent alone, %u before", n, before);
      CHECKF (m != NULL && m->error == NULL, "error: %s", m ? m->error : "(no answer)");
      CHECK (q != NULL && g_strcmp0 (q->role, "user") == 0 && q->images != NULL
             && q->images->len == 1 && g_strcmp0 (q->text, "") == 0);
    }
    CHECK (tern_window_get_n_attachments (w) == 0);
    CHECK (!g_action_group_get_action_enabled (G_ACTION_GROUP (w), "send"));
  }

  /* A picture file copied in a file manager (a file list on the
   * clipboard) pastes as that picture: Paste Image said "The clipboard
   * holds no image", and Ctrl+V pasted the file's path as text. */
  {
    g_autoptr(GFile) file = g_file_new_for_path (wide);
    GdkFileList *list = gdk_file_list_new_from_array (&file, 1);
    g_autofree char *text = NULL;

    gdk_clipboard_set (gtk_widget_get_clipboard (GTK_WIDGET (w)), GDK_TYPE_FILE_LIST, list);
    g_boxed_free (GDK_TYPE_FILE_LIST, list);
    tern_window_dismiss_toasts (w);
    activate (w, "paste-image", NULL);
    spin_for (0.3);
    CHECK (wait_for (w, not_attaching, 60));
    CHECKF (tern_window_get_n_attachments (w) == 1, "a copied picture file pasted: %u attached (%s)",
            tern_window_get_n_attachments (w), tern_window_get_last_error (w));
    tern_composer_clear_images (tern_window_get_composer (w));
    /* Ctrl+V in the text */
    tern_window_set_composer_text (w, "");
    tern_composer_focus (tern_window_get_composer (w));
    CHECK (tern_composer_paste_image (tern_window_get_composer (w)));
    spin_for (0.3);
    CHECK (wait_for (w, not_attaching, 60));
    text = tern_window_get_composer_text (w);
    CHECKF (tern_window_get_n_attachments (w) == 1 && g_strcmp0 (text, "") == 0,
            "Ctrl+V of a copied picture file: %u attached, text \"%s\"",
            tern_window_get_n_attachments (w), text);
    tern_composer_clear_images (tern_window_get_composer (w));
  }

  /* A model loaded with pictures attached: they were dropped without a
   * word, the text kept. A model that reads images keeps them (decoded
   * again for its projector); one that cannot takes them off and says so. */
  {
    g_autofree char *text_dir = g_build_filename (tmp, "text-only", NULL);
    g_autofree char *text_model = g_build_filename (text_dir, "qwen.gguf", NULL);
    tn_mkmodel_params q = app_test_model_params ();
    const char *error;

    CHECK (attach (w, wide));
    CHECK (attach (w, small));
    tern_window_set_composer_text (w, "About these two");
    activate (w, "load-model", g_variant_new_string (gemma));
    CHECK (wait_for (w, not_loading, 60));
    CHECK (wait_for (w, idle_engine, 60));
    CHECK (wait_for (w, not_attaching, 60));
    CHECKF (tern_window_get_n_attachments (w) == 2, "%u pictures after the model loaded again",
            tern_window_get_n_attachments (w));
    CHECKF (parse_each (tern_window_get_image_cost_text (w), &per, &total)
              || strstr (tern_window_get_image_cost_text (w), "2 images") != NULL,
            "cost line after the model loaded again: \"%s\"", tern_window_get_image_cost_text (w));

    g_mkdir_with_parents (text_dir, 0700);
    CHECKF (tn_mkmodel (&q, text_model, &err) == TN_OK, "%s", err.message);
    tern_window_dismiss_toasts (w);
    activate (w, "load-model", g_variant_new_string (text_model));
    CHECK (wait_for (w, not_loading, 60));
    CHECK (wait_for (w, idle_engine, 60));
    spin_for (0.3);
    CHECK (!tern_window_has_vision (w));
    CHECK (tern_window_get_n_attachments (w) == 0);
    error = tern_window_get_last_error (w);
    fprintf (stderr, "text-only model with 2 pictures attached: %s\n", error ? error : "(none)");
    CHECKF (error != NULL && strstr (error, "2 images were removed") != NULL
            && strstr (error, "cannot read images") != NULL,
            "no word of the 2 pictures taken off: last error \"%s\"", error ? error : "(none)");
    CHECKF (label_shows (GTK_WIDGET (w), "2 images were removed"),
            "no toast says the pictures were taken off");
    {
      g_autofree char *shot = g_build_filename (g_getenv ("TERN_SCREENSHOT_DIR") != NULL
                                                  ? g_getenv ("TERN_SCREENSHOT_DIR")
                                                  : tmp,
                                                "composer-model-switch.png", NULL);

      CHECK (app_test_save_screenshot (GTK_WIDGET (w), shot));
      fprintf (stderr, "screenshot: %s\n", shot);
    }
    {
      g_autofree char *text = tern_window_get_composer_text (w);

      CHECKF (g_strcmp0 (text, "About these two") == 0, "the text became \"%s\"", text);
    }

    /* In Chat, a question in words in this chat, whose earlier messages
     * have pictures: refused with "This model has no vision projector...:
     * it cannot read images", which read as if this message had one. The
     * refusal says where the pictures are and what to do. */
    g_settings_set_string (settings, "mode", "chat");
    tern_window_dismiss_toasts (w);
    tern_window_set_composer_text (w, "And in words?");
    activate (w, "send", NULL);
    CHECK (wait_for (w, not_generating, 120));
    {
      TernChat *chat = tern_window_get_chat (w);
      guint n = tern_chat_get_n_messages (chat);
      TernMessage *m = n ? tern_chat_get_message (chat, n - 1) : NULL;

      fprintf (stderr, "chat with pictures, text-only model: %s\n",
               m != NULL && m->error != NULL ? m->error : "(no error)");
      CHECKF (m != NULL && m->error != NULL && strstr (m->error, "Earlier messages") != NULL
              && strstr (m->error, "new chat") != NULL,
              "the refusal does not say the pictures are in earlier messages: %s",
              m != NULL && m->error != NULL ? m->error : "(no error)");
    }
    g_settings_set_string (settings, "mode", "flash");
  }

out:
  gtk_window_destroy (GTK_WINDOW (w));
  spin_for (0.2);
  app_test_remove (tmp);
  return tn_test_finish ("app-composer");
}
