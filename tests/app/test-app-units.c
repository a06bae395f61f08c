/* test-app-units: the app's parts that need no display: Markdown to Pango
 * markup, chats to JSON and back, Markdown export, and the engine worker
 * (ordering, coalescing, cancelling, stale results dropped). */
#include "config.h"

#include <locale.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>

#include <glib/gstdio.h>

#include "tern.h"
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tern-chat.h"
#include "tern-context.h"
#include "tern-sampling.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-manager.h"
#include "tern-model-manager.h"
#include "tern-connections.h"
#include "tern-application.h"
#endif
#include "tern-engine-worker.h"
#include "tern-markdown.h"
#include "tern-throughput-plot.h"
#include "tn-test.h"


static void
test_markdown (void)
{
  struct { const char *md; const char *want; } cases[] = {
    { "Hello *world*", "Hello <i>world</i>\n" },
    { "**bold** and `a < b`", "<b>bold</b> and <tt>a &lt; b</tt>\n" },
    { "~~gone~~", "<s>gone</s>\n" },
    { "# Title", "<span weight=\"bold\" size=\"xx-large\">Title</span>\n" },
    { "- one\n- two", "• one\n• two\n" },
    { "1. a\n2. b", "1. a\n2. b\n" },
    { "[link](https://example.org/?a=1&b=2)",
      "<a href=\"https://example.org/?a=1&amp;b=2\">link</a>\n" },
    { "```c\nint x;\n```", "int x;\n" },
    { "a & b <c>", "a &amp; b &lt;c&gt;\n" },
  };

  /* What the user typed: as typed, escaped, valid UTF-8 (Pango refuses a
   * label with a bad byte whole). */
  {
    g_autofree char *plain = tern_markdown_plain_to_pango ("# log\n  *a* <b> & c\n\nend", -1);
    g_autofree char *bad = tern_markdown_plain_to_pango ("caf\xc3 \xff<x>", -1);
    g_autofree char *part = tern_markdown_plain_to_pango ("one\ntwo", 3);

    CHECKF (g_str_equal (plain, "# log\n  *a* &lt;b&gt; &amp; c\n\nend"), "plain: %s", plain);
    CHECKF (g_utf8_validate (bad, -1, NULL) && g_str_has_prefix (bad, "caf")
            && g_str_has_suffix (bad, "&lt;x&gt;") && pango_parse_markup (bad, -1, 0, NULL, NULL,
                                                                           NULL, NULL),
            "bad bytes: %s", bad);
    CHECKF (g_str_equal (part, "one"), "part: %s", part);
  }
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *got = tern_markdown_to_pango (cases[i].md);
      CHECKF (g_strcmp0 (got, cases[i].want) == 0, "%s\n  got:  %s  want: %s", cases[i].md, got,
              cases[i].want);
      /* Whatever the input, the markup must parse (links are GtkLabel's own
       * extension of Pango markup). */
      if (strstr (got, "<a ") == NULL)
        CHECKF (pango_parse_markup (got, -1, 0, NULL, NULL, NULL, NULL), "%s", got);
    }
  /* Half-streamed input (an open code fence, a dangling emphasis) still
   * gives valid markup. */
  {
    const char *partial[] = { "Some *emph", "```py\nprint(", "| a | b |\n|---|", "<b>", "[x](" };
    for (guint i = 0; i < G_N_ELEMENTS (partial); i++)
      {
        g_autofree char *got = tern_markdown_to_pango (partial[i]);
        CHECKF (pango_parse_markup (got, -1, 0, NULL, NULL, NULL, NULL), "%s -> %s", partial[i],
                got);
      }
  }
}

/* Tinted drafted tokens keep the Markdown structure: the same blocks and
 * tags as untinted, with spans only inside text, and valid markup. */
static void
test_markdown_tint (void)
{
  const char *cases[] = {
    "Hello **bold world** and `code`, *emph*.",
    "# Title\n\n- one\n- two & three\n\n```c\nint x = 1 < 2;\n```\n\nend",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "> quoted *text*\n\n1. first\n2. second",
    "ünïcode ✓ bytes",
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *md = cases[i];
      gsize len = strlen (md);
      g_autofree guint8 *all = g_malloc (len);
      g_autofree guint8 *alternate = g_malloc (len);
      g_autofree char *plain = tern_markdown_to_pango (md);
      g_autofree char *none = NULL;
      g_autofree char *tinted = NULL;
      g_autofree char *mixed = NULL;
      g_autofree char *plain_text = NULL;
      g_autofree char *mixed_text = NULL;

      memset (all, 1, len);
      /* Runs of 3 bytes on, 2 off: boundaries inside words, tags and
       * UTF-8 sequences. */
      for (gsize k = 0; k < len; k++)
        alternate[k] = (k % 5) < 3;
      none = tern_markdown_to_pango_tinted (md, NULL, "#112233");
      tinted = tern_markdown_to_pango_tinted (md, all, "#112233");
      mixed = tern_markdown_to_pango_tinted (md, alternate, "#112233");
      CHECKF (g_str_equal (none, plain), "%s", md);
      CHECKF (strstr (tinted, "<span foreground=\"#112233\">") != NULL, "%s -> %s", md, tinted);
      CHECKF (pango_parse_markup (tinted, -1, 0, NULL, NULL, NULL, NULL), "%s -> %s", md, tinted);
      CHECKF (pango_parse_markup (mixed, -1, 0, NULL, NULL, NULL, NULL), "%s -> %s", md, mixed);
      /* The text shown is the same with and without the tint (code
       * blocks come out as plain text untinted: compare where it parses). */
      if (pango_parse_markup (plain, -1, 0, NULL, &plain_text, NULL, NULL))
        {
          CHECK (pango_parse_markup (mixed, -1, 0, NULL, &mixed_text, NULL, NULL));
          CHECKF (g_strcmp0 (plain_text, mixed_text) == 0, "\n  %s\n  %s", plain_text,
                  mixed_text);
        }
      /* Structure survives: the same formatting tags appear. */
      if (strstr (plain, "<b>") != NULL)
        CHECKF (strstr (mixed, "<b>") != NULL, "%s", mixed);
      if (strstr (plain, "<tt>") != NULL)
        CHECKF (strstr (mixed, "<tt>") != NULL, "%s", mixed);
    }
}

static void
test_chat_json (const char *dir)
{
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autoptr(TernChat) back = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autofree char *md = NULL;
  g_autofree char *bad = g_build_filename (dir, "bad.json", NULL);
  TernStats st = { 0 };
  TernMessage *m;

  CHECK (g_str_equal (tern_chat_get_title (chat), "New Chat"));
  tern_chat_set_system_prompt (chat, "Be brief.\nBe kind.");
  tern_chat_set_model (chat, "test (qwen3)");
  tern_chat_append (chat, "user", "What is a tern?\nA bird?");
  m = tern_chat_append (chat, "assistant", "A seabird. \"Quotes\" and ünïcode ✓");
  st.generated_tokens = 12;
  st.decode_tok_s = 85.25;
  st.ttft_ms = 40;
  st.prompt_tokens = 9;
  st.prefill_ms = 12.5;
  st.restored_tokens = 30;
  st.stop_reason = "eog";
  tern_message_set_stats (m, &st);
  {
    /* "seabird" came from an accepted draft. */
    gsize len = strlen (m->text);
    g_autofree guint8 *mask = g_malloc0 (len);
    memset (mask + 2, 1, 7);
    tern_message_set_drafted (m, mask);
  }
  CHECK (g_str_equal (tern_chat_get_title (chat), "What is a tern? A bird?"));

  CHECKF (tern_chat_save (chat, dir, &error), "%s", error ? error->message : "");
  path = g_strdup_printf ("%s/%s.json", dir, tern_chat_get_id (chat));
  back = tern_chat_load (path, &error);
  CHECKF (back != NULL, "%s", error ? error->message : "");
  if (back != NULL)
    {
      TernMessage *b;
      CHECK (g_str_equal (tern_chat_get_id (back), tern_chat_get_id (chat)));
      CHECK (g_str_equal (tern_chat_get_mode (back), "chat"));
      CHECK (g_str_equal (tern_chat_get_system_prompt (back), "Be brief.\nBe kind."));
      CHECK (tern_chat_get_n_messages (back) == 2);
      b = tern_chat_get_message (back, 1);
      CHECK (g_str_equal (b->text, m->text));
      CHECK (b->has_stats && b->stats.generated_tokens == 12 && b->stats.decode_tok_s == 85.25);
      CHECK (g_strcmp0 (b->stop_reason, "eog") == 0);
      CHECK (b->drafted != NULL && b->drafted->len == strlen (b->text));
      if (b->drafted != NULL)
        for (guint k = 0; k < b->drafted->len; k++)
          CHECKF (b->drafted->data[k] == (k >= 2 && k < 9), "drafted[%u] = %u", k,
                  b->drafted->data[k]);
      CHECK (tern_chat_get_message (back, 0)->drafted == NULL);
    }
  /* Saving again replaces the file whole (no temporary left behind). */
  tern_chat_append (chat, "user", "More?");
  CHECK (tern_chat_save (chat, dir, NULL));
  {
    g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
    const char *name;
    int n = 0;
    while ((name = g_dir_read_name (d)) != NULL)
      n++;
    CHECKF (n == 1, "%d files in the chats folder", n);
  }

  md = tern_chat_to_markdown (chat);
  CHECK (strstr (md, "# What is a tern? A bird?") != NULL);
  CHECK (strstr (md, "> Be brief.\n> Be kind.") != NULL);
  CHECK (strstr (md, "## Assistant\n\nA seabird.") != NULL);
  CHECKF (strstr (md, "12 tokens · 85.2 tok/s · first token 40 ms") != NULL, "%s", md);

  /* Not a chat: a clear error naming the file. */
  g_file_set_contents (bad, "{\"format\": \"something else\"}", -1, NULL);
  g_clear_error (&error);
  CHECK (tern_chat_load (bad, &error) == NULL);
  CHECK (error != NULL && strstr (error->message, "bad.json") != NULL);
  g_clear_error (&error);
  g_file_set_contents (bad, "{ truncated", -1, NULL);
  CHECK (tern_chat_load (bad, &error) == NULL && error != NULL);
  g_unlink (bad);
  CHECK (tern_chat_delete_file (chat, dir, NULL));
  CHECK (!g_file_test (path, G_FILE_TEST_EXISTS));
}

/* A save whose chat file cannot be written (a full disk: here a file size
 * limit the new file is over) leaves the old file and every picture it
 * names. The pictures the new chat no longer uses were pruned before the
 * write, and a failed write left a chat naming pictures that were gone. */
static void
test_chat_save_fails_keeps_images (const char *dir)
{
  static const guint8 png_a[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 'k', 'a' };
  static const guint8 png_b[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 'k', 'b' };
  g_autoptr(GBytes) a = g_bytes_new_static (png_a, sizeof png_a);
  g_autoptr(GBytes) b = g_bytes_new_static (png_b, sizeof png_b);
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  struct rlimit old, low;
  void (*old_handler) (int);
  TernMessage *m;

  m = tern_chat_append (chat, "user", "Two pictures");
  m->images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_ptr_array_add (m->images, g_bytes_ref (a));
  g_ptr_array_add (m->images, g_bytes_ref (b));
  CHECKF (tern_chat_save (chat, dir, &error), "%s", error ? error->message : "");
  path = g_strdup_printf ("%s/%s.json", dir, tern_chat_get_id (chat));
  /* The second picture dropped: the next save would prune its file. */
  g_ptr_array_remove_index (m->images, 1);
  CHECK (getrlimit (RLIMIT_FSIZE, &old) == 0);
  low = old;
  low.rlim_cur = 8; /* under any chat file; the kept picture is not written again */
  old_handler = signal (SIGXFSZ, SIG_IGN); /* EFBIG, not the end of the test */
  CHECK (setrlimit (RLIMIT_FSIZE, &low) == 0);
  g_clear_error (&error);
  CHECK (!tern_chat_save (chat, dir, &error));
  /* The background save, the app's, too. */
  tern_chat_save_in_background (chat, dir, NULL, NULL);
  tern_chat_wait_saves ();
  CHECK (setrlimit (RLIMIT_FSIZE, &old) == 0);
  signal (SIGXFSZ, old_handler);
  {
    g_autoptr(TernChat) back = tern_chat_load (path, &error);
    TernMessage *u = back != NULL ? tern_chat_get_message (back, 0) : NULL;

    CHECKF (back != NULL, "%s", error ? error->message : "");
    CHECKF (u != NULL && u->images != NULL && u->images->len == 2 && u->images_missing == 0,
            "after a failed save the old chat has %u pictures, %u missing (want 2, 0)",
            u != NULL && u->images != NULL ? u->images->len : 0,
            u != NULL ? u->images_missing : 0);
  }
  /* Once the file is written, the unused picture goes. */
  CHECK (tern_chat_save (chat, dir, NULL));
  {
    g_autofree char *folder = g_strdup_printf ("%s/%s.images", dir, tern_chat_get_id (chat));
    g_autoptr(GDir) d = g_dir_open (folder, 0, NULL);
    int n = 0;
    while (d != NULL && g_dir_read_name (d) != NULL)
      n++;
    CHECKF (n == 1, "%d files in the images folder after the save that worked, want 1", n);
  }
}

/* Files that are not chats to read: a FIFO (which g_file_get_contents
 * waited on for ever, with the window's thread), /dev/zero (read until
 * memory ran out), a directory and a file over 64 MiB are refused unread,
 * each with an error naming the file and why. A FIFO in TERN_MEMINFO's
 * place leaves the free memory unknown (0) instead of hanging. meson's
 * timeout ends a run that hangs. */
static void
test_chat_not_files (const char *dir)
{
  g_autofree char *fifo = g_build_filename (dir, "fifo.json", NULL);
  g_autofree char *huge = g_build_filename (dir, "huge.json", NULL);
  const char *not_regular = "is not a regular file (a FIFO, a device or a directory)";
  struct { const char *path; const char *why; } cases[] = {
    { fifo, not_regular },
    { "/dev/zero", not_regular },
    { dir, not_regular },
    { huge, "67108865 bytes, more than the 67108864 this takes" },
  };
  int fd;

  g_mkdir_with_parents (dir, 0700);
  CHECK (mkfifo (fifo, 0600) == 0);
  fd = open (huge, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK (fd >= 0 && ftruncate (fd, (64 << 20) + 1) == 0); /* sparse: no disk used */
  if (fd >= 0)
    close (fd);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(TernChat) chat = tern_chat_load (cases[i].path, &error);

      CHECKF (chat == NULL && error != NULL, "%s: loaded", cases[i].path);
      if (error == NULL)
        continue;
      CHECKF (strstr (error->message, cases[i].path) != NULL && strstr (error->message, cases[i].why) != NULL,
              "%s: %s", cases[i].path, error->message);
    }

  g_setenv ("TERN_MEMINFO", fifo, TRUE);
  CHECK (tern_context_available_memory () == 0);
  g_setenv ("TERN_MEMINFO", "/dev/zero", TRUE);
  CHECK (tern_context_available_memory () == 0);
  g_unsetenv ("TERN_MEMINFO");
  /* The real one still reads (a /proc file says 0 bytes by its size). */
  CHECK (tern_context_available_memory () > 0);
  g_unlink (fifo);
  g_unlink (huge);
}

/* A background save that fails reports on the thread that asked for it,
 * in an iteration of its main context, never on the save's pool thread
 * (g_main_context_invoke_full ran it there whenever the main loop was
 * between iterations: a toast from a pool thread). The owner going away
 * first drops the report. */
static GThread *save_report_thread;
static char *save_report_message;

static void
save_report (GObject    *owner,
             const char *message)
{
  (void) owner;
  save_report_thread = g_thread_self ();
  g_free (save_report_message);
  save_report_message = g_strdup (message);
}

static void
test_chat_save_report (const char *dir)
{
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autofree char *file = g_build_filename (dir, "not-a-folder", NULL);
  g_autofree char *under = g_build_filename (file, "chats", NULL);
  g_autoptr(GObject) owner = g_object_new (G_TYPE_OBJECT, NULL);
  GMainContext *main_context = g_main_context_default ();
  gint64 until;

  g_mkdir_with_parents (dir, 0700);
  CHECK (g_file_set_contents (file, "x", 1, NULL));
  tern_chat_append (chat, "user", "Hello");
  /* The folder cannot be made (a file is in its path): the save fails. */
  tern_chat_save_in_background (chat, under, owner, save_report);
  tern_chat_wait_saves ();
  g_usleep (100 * 1000); /* the pool thread is done; nobody iterates the context */
  CHECKF (save_report_thread == NULL, "the report ran %s before an iteration",
          save_report_thread == g_thread_self () ? "on this thread" : "on the pool thread");
  until = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (save_report_thread == NULL && g_get_monotonic_time () < until)
    g_main_context_iteration (main_context, FALSE);
  CHECK (save_report_thread == g_thread_self ());
  CHECKF (save_report_message != NULL && strstr (save_report_message, under) != NULL,
          "report: %s", save_report_message ? save_report_message : "(none)");

  /* The owner gone before the report: nothing runs. */
  save_report_thread = NULL;
  tern_chat_save_in_background (chat, under, owner, save_report);
  tern_chat_wait_saves ();
  g_clear_object (&owner);
  until = g_get_monotonic_time () + 300 * 1000;
  while (g_get_monotonic_time () < until)
    g_main_context_iteration (main_context, FALSE);
  CHECK (save_report_thread == NULL);
  g_clear_pointer (&save_report_message, g_free);
  g_unlink (file);
}

/* Images are saved beside the chat, once per distinct picture, checked
 * against their names on reading, pruned when no message uses them, and
 * deleted with the chat; hostile names in a chat file are refused. */
static void
test_chat_images (const char *dir)
{
  static const guint8 png_a[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 'a', 'a' };
  static const guint8 jpg_b[] = { 0xFF, 0xD8, 0xFF, 0xE0, 'b', 'b', 'b' };
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autofree char *folder = NULL;
  g_autofree char *hash_a = NULL;
  g_autofree char *file_a = NULL;
  GBytes *a = g_bytes_new_static (png_a, sizeof png_a);
  GBytes *b = g_bytes_new_static (jpg_b, sizeof jpg_b);
  TernMessage *m;

  m = tern_chat_append (chat, "user", "Two pictures, one twice");
  m->images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_ptr_array_add (m->images, g_bytes_ref (a));
  g_ptr_array_add (m->images, g_bytes_ref (b));
  g_ptr_array_add (m->images, g_bytes_ref (a));
  tern_chat_append (chat, "assistant", "Seen.");
  CHECKF (tern_chat_save (chat, dir, &error), "%s", error ? error->message : "");
  path = g_strdup_printf ("%s/%s.json", dir, tern_chat_get_id (chat));
  folder = g_strdup_printf ("%s/%s.images", dir, tern_chat_get_id (chat));
  hash_a = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, a);
  file_a = g_strdup_printf ("%s/%s.png", folder, hash_a);
  CHECKF (g_file_test (file_a, G_FILE_TEST_IS_REGULAR), "%s missing", file_a);
  {
    g_autoptr(GDir) d = g_dir_open (folder, 0, NULL);
    int n = 0;
    while (d != NULL && g_dir_read_name (d) != NULL)
      n++;
    CHECKF (n == 2, "%d files in the images folder, want 2 (one per distinct image)", n);
  }
  {
    g_autoptr(TernChat) back = tern_chat_load (path, &error);
    TernMessage *u;

    CHECKF (back != NULL, "%s", error ? error->message : "");
    u = back != NULL ? tern_chat_get_message (back, 0) : NULL;
    CHECK (u != NULL && u->images != NULL && u->images->len == 3 && u->images_missing == 0);
    if (u != NULL && u->images != NULL && u->images->len == 3)
      {
        CHECK (g_bytes_equal (g_ptr_array_index (u->images, 0), a));
        CHECK (g_bytes_equal (g_ptr_array_index (u->images, 1), b));
        CHECK (g_bytes_equal (g_ptr_array_index (u->images, 2), a));
      }
  }
  /* A picture changed on disk is left out (its name no longer matches). */
  g_file_set_contents (file_a, "changed", -1, NULL);
  {
    g_autoptr(TernChat) back = tern_chat_load (path, &error);
    TernMessage *u = back != NULL ? tern_chat_get_message (back, 0) : NULL;

    CHECK (u != NULL && u->images != NULL && u->images->len == 1 && u->images_missing == 2);
    CHECK (u != NULL && g_str_equal (u->text, "Two pictures, one twice"));
  }
  /* The next save writes the changed picture again, and with the
   * message's second picture dropped, its unused file is pruned. */
  g_ptr_array_remove_index (m->images, 1);
  tern_chat_save_in_background (chat, dir, NULL, NULL);
  tern_chat_wait_saves ();
  {
    g_autofree char *data = NULL;
    gsize len = 0;
    CHECK (g_file_get_contents (file_a, &data, &len, NULL) && len == sizeof png_a
           && memcmp (data, png_a, len) == 0);
  }
  {
    g_autoptr(GDir) d = g_dir_open (folder, 0, NULL);
    int n = 0;
    while (d != NULL && g_dir_read_name (d) != NULL)
      n++;
    CHECKF (n == 1, "%d files in the images folder after an edit, want 1", n);
  }
  /* Hostile names: a path out of the folder, a wrong type, a non-list. */
  {
    static const char *const hostile[] = {
      "[\"../../../etc/passwd\"]",
      "[\"/etc/passwd\"]",
      "[5]",
      "\"abc.png\"",
      "[\"0000000000000000000000000000000000000000000000000000000000000000.png/..\"]",
    };
    g_autofree char *bad = g_build_filename (dir, "hostile.json", NULL);

    for (gsize i = 0; i < G_N_ELEMENTS (hostile); i++)
      {
        g_autofree char *json = g_strdup_printf (
          "{\"format\": \"tern-chat\", \"version\": 1, \"id\": \"hostile\", \"messages\": "
          "[{\"role\": \"user\", \"content\": \"hi\", \"images\": %s}]}", hostile[i]);
        g_autoptr(TernChat) back = NULL;

        g_file_set_contents (bad, json, -1, NULL);
        g_clear_error (&error);
        back = tern_chat_load (bad, &error);
        CHECKF (back == NULL && error != NULL && strstr (error->message, "images") != NULL,
                "images %s: %s", hostile[i], error ? error->message : "loaded");
      }
    g_unlink (bad);
  }
  /* What json-glib takes and JSON is not, refused at load with where and
   * what (tn_json_check): C's escapes (json-glib made bytes of them that
   * are no UTF-8, and the chat saved again could never be read: found by
   * fuzz-chatfile), bytes that are no UTF-8, a repeated key (json-glib kept
   * the last: a hand-edited chat lost a message's text without a word),
   * \u0000 (a message cut short) and nesting past a chat's 32 levels. */
  {
#define CHAT_HEAD "{\"format\": \"tern-chat\", \"version\": 1, \"id\": \"o\", "
    static const struct { const char *json, *where, *what; } strict[] = {
      { CHAT_HEAD "\"messages\": [{\"role\": \"user\", \"content\": \"a\\666b\"}]}",
        "line 1, column 93", "invalid escape '\\6'" },
      { CHAT_HEAD "\"title\": \"\\377\",\n\"messages\": []}", "line 1, column 60",
        "invalid escape '\\3'" },
      { CHAT_HEAD "\"title\": \"\\x41\",\n\"messages\": []}", "line 1, column 60",
        "invalid escape '\\x'" },
      { CHAT_HEAD "\"title\": \"\xc3\x28\", \"messages\": []}", "line 1, column 60",
        "invalid UTF-8 byte 0xC3" },
      { CHAT_HEAD "\"title\": \"\xc0\xaf\", \"messages\": []}", "line 1, column 60",
        "invalid UTF-8 byte 0xC0" },
      { CHAT_HEAD "\"title\": \"\\udc00\", \"messages\": []}", "line 1, column 60",
        "lone low surrogate" },
      { CHAT_HEAD "\"messages\": [\n{\"role\": \"user\", \"content\": \"mine\",\n"
        "  \"content\": \"theirs\"}]}", "line 3, column 3",
        "the key \"content\" appears more than once in the same object" },
      { CHAT_HEAD "\"messages\": [{\"role\": \"user\", \"content\": \"a\\u0000b\"}]}",
        "line 1, column 93", "NUL" },
      { CHAT_HEAD "\"messages\": [{\"role\": \"user\", \"content\": \"a\", \"x\": "
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]}", "line 1, column",
        "nesting deeper than 32 levels" },
      { CHAT_HEAD "\"created\": 1e999, \"messages\": []}", "line 1, column 61",
        "number too large" },
      { CHAT_HEAD "\"messages\": [", "line 1, column 63", "unexpected end of input" },
      { "", "line 1, column 1", "empty document" },
    };
#undef CHAT_HEAD
    g_autofree char *bad = g_build_filename (dir, "strict.json", NULL);

    for (gsize i = 0; i < G_N_ELEMENTS (strict); i++)
      {
        g_autoptr(TernChat) back = NULL;
        g_autofree char *where = g_strdup_printf ("strict.json: %s", strict[i].where);

        g_file_set_contents (bad, strict[i].json, -1, NULL);
        g_clear_error (&error);
        back = tern_chat_load (bad, &error);
        CHECKF (back == NULL && error != NULL && strstr (error->message, where) != NULL
                && strstr (error->message, strict[i].what) != NULL
                && g_str_has_suffix (error->message, "not a Tern chat"),
                "%s: %s", strict[i].json, error ? error->message : "loaded");
      }
    g_unlink (bad);
  }
  /* A FIFO in place of an image never blocks the load. */
  {
    g_autofree char *hash_b = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, b);
    g_autofree char *file_b = g_strdup_printf ("%s/%s.jpg", folder, hash_b);
    g_autoptr(TernChat) back = NULL;

    tern_chat_truncate (chat, 0);
    m = tern_chat_append (chat, "user", "a pipe");
    m->images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
    g_ptr_array_add (m->images, g_bytes_ref (b));
    CHECK (tern_chat_save (chat, dir, NULL));
    g_unlink (file_b);
    CHECK (mkfifo (file_b, 0600) == 0);
    back = tern_chat_load (path, &error);
    CHECK (back != NULL && tern_chat_get_message (back, 0)->images_missing == 1);
    g_unlink (file_b);
  }
  CHECK (tern_chat_delete_file (chat, dir, NULL));
  CHECK (!g_file_test (path, G_FILE_TEST_EXISTS) && !g_file_test (folder, G_FILE_TEST_EXISTS));
  g_bytes_unref (a);
  g_bytes_unref (b);
}

static char *
file_text (const char *path)
{
  char *data = NULL;

  if (!g_file_get_contents (path, &data, NULL, NULL))
    return NULL;
  return data;
}

/* A copy of a chat file that another tool made in the chats folder (a
 * sync conflict's "ID (conflicted copy).json", a backup under another
 * name) says the same "id" as the original. Known by that id, deleting the
 * copy deleted the original and its pictures, and a save of the copy
 * replaced the original's file (REPORT B, finding 2). Each file is now a
 * chat of its own, known by its file's name: the copy reads (with the
 * pictures it names), stays unchanged until it is changed, and neither a
 * save nor a delete of it touches the original's file or folder. */
static void
test_chat_copies (const char *dir)
{
  static const guint8 png[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 'c', 'p' };
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autoptr(GBytes) picture = g_bytes_new_static (png, sizeof png);
  g_autofree char *hash = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, picture);
  g_autofree char *id = NULL;
  g_autofree char *original = NULL;
  g_autofree char *original_text = NULL;
  g_autofree char *original_image = NULL;
  g_autofree char *conflict_id = NULL;
  g_autofree char *conflict = NULL;
  g_autofree char *backup = g_build_filename (dir, "old-backup.json", NULL);
  g_autofree char *backup_image = NULL;
  g_autoptr(TernChat) back = NULL;
  g_autoptr(TernChat) copy = NULL;
  g_autoptr(TernChat) stale = NULL;
  g_autoptr(GError) error = NULL;
  TernMessage *m;

  m = tern_chat_append (chat, "user", "my original conversation");
  m->images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  g_ptr_array_add (m->images, g_bytes_ref (picture));
  tern_chat_append (chat, "assistant", "important answer");
  CHECKF (tern_chat_save (chat, dir, &error), "%s", error ? error->message : "");
  id = g_strdup (tern_chat_get_id (chat));
  original = g_strdup_printf ("%s/%s.json", dir, id);
  original_image = g_strdup_printf ("%s/%s.images/%s.png", dir, id, hash);
  original_text = file_text (original);
  CHECK (original_text != NULL && g_file_test (original_image, G_FILE_TEST_IS_REGULAR));
  conflict_id = g_strdup_printf ("%s (conflicted copy 2026-12-05)", id);
  conflict = g_strdup_printf ("%s/%s.json", dir, conflict_id);
  CHECK (g_file_set_contents (conflict, original_text, -1, NULL));
  CHECK (g_file_set_contents (backup, original_text, -1, NULL));

  back = tern_chat_load (original, &error);
  copy = tern_chat_load (conflict, &error);
  stale = tern_chat_load (backup, &error);
  CHECKF (back != NULL && copy != NULL && stale != NULL, "%s", error ? error->message : "");
  if (back == NULL || copy == NULL || stale == NULL)
    return;
  /* Three chats, three ids: each its file's name. */
  CHECKF (g_str_equal (tern_chat_get_id (back), id), "original: %s", tern_chat_get_id (back));
  CHECKF (g_str_equal (tern_chat_get_id (copy), conflict_id), "copy: %s", tern_chat_get_id (copy));
  CHECKF (g_str_equal (tern_chat_get_id (stale), "old-backup"), "backup: %s",
          tern_chat_get_id (stale));
  /* The copy's picture is read from the folder its "id" names, and the
   * copy says so (the window saves it before that chat is deleted). */
  m = tern_chat_get_message (copy, 0);
  CHECK (m->images != NULL && m->images->len == 1 && m->images_missing == 0);
  CHECK (tern_chat_get_images_from (back) == NULL);
  CHECK (g_strcmp0 (tern_chat_get_images_from (copy), id) == 0);
  CHECK (g_strcmp0 (tern_chat_get_images_from (stale), id) == 0);
  {
    g_autofree char *now = file_text (conflict);
    CHECK (g_strcmp0 (now, original_text) == 0); /* read, not written */
  }

  /* Deleting the copy removes the copy, not the original or its picture. */
  CHECK (tern_chat_delete_file (copy, dir, NULL));
  CHECK (!g_file_test (conflict, G_FILE_TEST_EXISTS));
  {
    g_autofree char *now = file_text (original);
    CHECKF (g_strcmp0 (now, original_text) == 0, "the original after deleting the copy: %s",
            now ? now : "(gone)");
    CHECK (g_file_test (original_image, G_FILE_TEST_IS_REGULAR));
  }

  /* The stale backup continued: saved as itself, with its picture in its
   * own folder; the original's file and picture are as they were. */
  tern_chat_append (stale, "user", "an edit made in the copy");
  CHECKF (tern_chat_save (stale, dir, &error), "%s", error ? error->message : "");
  CHECK (tern_chat_get_images_from (stale) == NULL);
  {
    g_autofree char *now = file_text (original);
    g_autofree char *saved = file_text (backup);
    g_autoptr(TernChat) again = NULL;

    CHECKF (g_strcmp0 (now, original_text) == 0, "the original after saving the backup: %s",
            now ? now : "(gone)");
    CHECK (g_file_test (original_image, G_FILE_TEST_IS_REGULAR));
    CHECKF (saved != NULL && strstr (saved, "an edit made in the copy") != NULL
            && strstr (saved, "\"id\" : \"old-backup\"") != NULL, "%s", saved);
    backup_image = g_strdup_printf ("%s/old-backup.images/%s.png", dir, hash);
    CHECK (g_file_test (backup_image, G_FILE_TEST_IS_REGULAR));
    again = tern_chat_load (backup, &error);
    CHECKF (again != NULL, "%s", error ? error->message : "");
    if (again != NULL)
      {
        CHECK (g_str_equal (tern_chat_get_id (again), "old-backup"));
        CHECK (tern_chat_get_n_messages (again) == 3);
        m = tern_chat_get_message (again, 0);
        CHECK (m->images != NULL && m->images->len == 1 && m->images_missing == 0);
      }
  }
  /* Deleted, it takes its own folder only. */
  CHECK (tern_chat_delete_file (stale, dir, NULL));
  CHECK (!g_file_test (backup, G_FILE_TEST_EXISTS) && !g_file_test (backup_image, G_FILE_TEST_EXISTS));
  {
    g_autofree char *now = file_text (original);
    CHECK (g_strcmp0 (now, original_text) == 0);
    CHECK (g_file_test (original_image, G_FILE_TEST_IS_REGULAR));
  }
  /* A file name that could not be an id is refused like a bad "id". */
  {
    g_autofree char *hidden = g_build_filename (dir, ".json", NULL);
    g_autoptr(TernChat) odd = NULL;

    CHECK (g_file_set_contents (hidden, original_text, -1, NULL));
    g_clear_error (&error);
    odd = tern_chat_load (hidden, &error);
    CHECKF (odd == NULL && error != NULL && strstr (error->message, "bad chat id") != NULL, "%s",
            error ? error->message : "loaded");
    g_unlink (hidden);
  }
  CHECK (tern_chat_delete_file (back, dir, NULL));
}

/* "version" was written and never read: a newer Tern's chat (members this
 * one does not know) loaded without a word, and its next save dropped them
 * and said version 1 (REPORT B, finding 6). It is refused now with
 * G_IO_ERROR_NOT_SUPPORTED (the window leaves the file alone), before any
 * other member is looked at; 1 and absent read as before. */
static void
test_chat_version (const char *dir)
{
  static const char newer[] =
    "{\"format\": \"tern-chat\", \"version\": 2, \"id\": \"newer\", \"mode\": \"chat\",\n"
    " \"branches\": [{\"from\": 1, \"messages\": [{\"role\": \"assistant\", \"content\": \"kept\"}]}],\n"
    " \"messages\": [{\"role\": \"user\", \"content\": \"q\", \"attachments\": [{\"kind\": \"pdf\"}]},\n"
    "              {\"role\": \"assistant\", \"content\": \"a\"}]}\n";
  static const struct { const char *json; gboolean loads; int code; } cases[] = {
    { "{\"format\": \"tern-chat\", \"version\": 1, \"id\": \"v\", \"messages\": []}", TRUE, 0 },
    { "{\"format\": \"tern-chat\", \"id\": \"v\", \"messages\": []}", TRUE, 0 },
    { "{\"format\": \"tern-chat\", \"version\": 99, \"id\": \"v\", \"messages\": {\"a\": []}}",
      FALSE, G_IO_ERROR_NOT_SUPPORTED },
    { "{\"format\": \"tern-chat\", \"version\": 9999999999999, \"messages\": 5}", FALSE,
      G_IO_ERROR_NOT_SUPPORTED },
    { "{\"format\": \"tern-chat\", \"version\": \"2\", \"id\": \"v\", \"messages\": []}", FALSE,
      G_IO_ERROR_INVALID_DATA },
  };
  g_autofree char *path = g_build_filename (dir, "newer.json", NULL);
  g_autofree char *other = g_build_filename (dir, "v.json", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TernChat) chat = NULL;

  g_mkdir_with_parents (dir, 0700);
  CHECK (g_file_set_contents (path, newer, -1, NULL));
  chat = tern_chat_load (path, &error);
  CHECKF (chat == NULL, "a version 2 chat loaded (%u messages)",
          chat ? tern_chat_get_n_messages (chat) : 0);
  CHECKF (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED)
          && strstr (error->message, "newer.json") != NULL
          && strstr (error->message, "newer version of Tern") != NULL
          && strstr (error->message, "format 2") != NULL,
          "%s", error ? error->message : "(no error)");
  {
    g_autofree char *now = file_text (path);
    CHECK (g_strcmp0 (now, newer) == 0);
  }
  g_unlink (path);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) e = NULL;
      g_autoptr(TernChat) c = NULL;

      CHECK (g_file_set_contents (other, cases[i].json, -1, NULL));
      c = tern_chat_load (other, &e);
      if (cases[i].loads)
        CHECKF (c != NULL, "%s: %s", cases[i].json, e ? e->message : "");
      else
        CHECKF (c == NULL && g_error_matches (e, G_IO_ERROR, cases[i].code), "%s: %s",
                cases[i].json, e ? e->message : "loaded");
    }
  g_unlink (other);
}

static void
too_large_report (GObject    *owner,
                  const char *message)
{
  (void) owner;
  g_free (save_report_message);
  save_report_message = g_strdup (message);
}

/* Saves had no limit and loads refused over 64 MiB: a chat grown past it
 * was written, then set aside as *.corrupt at the next start (REPORT B,
 * finding 7). Now a save that would be larger than a load takes is refused
 * before anything is written (the file and its pictures stay as last
 * saved), in the foreground and in the background; one of exactly 64 MiB
 * saves and reads back. */
/* A chat of more messages than this version reads (100,000: docs/APP.md,
 * "A chat's memory") is refused before json-glib builds its tree (~1 KB
 * a message: a 64 MiB file of empty ones took 2.4 GB), its file left as it
 * is by the list (told, not set aside), and never written; one of exactly
 * as many is read. */
static void
test_chat_many_messages (const char *dir)
{
  const guint max = 100000;

  g_mkdir_with_parents (dir, 0700);
  for (guint extra = 0; extra < 2; extra++)
    {
      guint n = max + extra;
      g_autofree char *name = g_strdup_printf ("many-%u.json", n);
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autofree char *after = NULL;
      g_autoptr(GError) error = NULL;
      g_autoptr(GError) listed_error = NULL;
      g_autoptr(TernChat) chat = NULL;
      g_autoptr(TernChat) listed = NULL;
      GString *json = g_string_new ("{\"format\":\"tern-chat\",\"version\":1,\"id\":\"many\","
                                    "\"mode\":\"chat\",\"messages\":[");
      TernChatUnread unread = TERN_CHAT_UNREAD_BROKEN;

      for (guint i = 0; i < n; i++)
        g_string_append_printf (json, "%s{\"role\":\"%s\",\"content\":\"\"}", i ? "," : "",
                                i % 2 ? "assistant" : "user");
      g_string_append (json, "]}");
      CHECK (g_file_set_contents (path, json->str, (gssize) json->len, NULL));
      chat = tern_chat_load (path, &error);
      if (extra == 0)
        {
          CHECKF (chat != NULL && tern_chat_get_n_messages (chat) == n, "%u messages: %s", n,
                  error != NULL ? error->message : "read");
          g_unlink (path);
          g_string_free (json, TRUE);
          continue;
        }
      CHECKF (chat == NULL && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE)
                && strstr (error->message, path) != NULL && strstr (error->message, "100001") != NULL,
              "%u messages: %s", n, error != NULL ? error->message : "read");
      /* The list, an hour later (not a file being written): left as it is. */
      listed = tern_chat_load_listed (path, g_get_real_time () / G_USEC_PER_SEC + 3600, &unread,
                                      &listed_error);
      CHECKF (listed == NULL && unread == TERN_CHAT_UNREAD_KEEP, "listed: %s, %d",
              listed != NULL ? "read" : listed_error->message, (int) unread);
      after = file_text (path);
      CHECK (after != NULL && g_str_equal (after, json->str));
      g_unlink (path);
      g_string_free (json, TRUE);

      /* Never written: a chat of that many is refused by a save. */
      {
        g_autoptr(TernChat) big = tern_chat_new ("chat");
        g_autoptr(GError) save_error = NULL;

        /* Text in them: with none, every append looked for a title in
         * all the messages before it. */
        for (guint i = 0; i < n; i++)
          tern_chat_append (big, i % 2 ? "assistant" : "user", "ok");
        CHECKF (!tern_chat_save (big, dir, &save_error)
                  && g_error_matches (save_error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE),
                "saved: %s", save_error != NULL ? save_error->message : "written");
      }
    }
}

static void
test_chat_too_large (const char *dir)
{
  const gsize max = 64 << 20;
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autoptr(GError) error = NULL;
  g_autoptr(GObject) owner = g_object_new (G_TYPE_OBJECT, NULL);
  g_autofree char *path = NULL;
  g_autofree char *before = NULL;
  g_autofree char *big = NULL;
  g_autofree char *json = NULL;
  gsize base;
  TernMessage *m;
  gint64 until;

  tern_chat_append (chat, "user", "Hello");
  m = tern_chat_append (chat, "assistant", "");
  json = tern_chat_to_json (chat);
  base = strlen (json);
  g_clear_pointer (&json, g_free);
  CHECK (tern_chat_save (chat, dir, NULL));
  path = g_strdup_printf ("%s/%s.json", dir, tern_chat_get_id (chat));
  before = file_text (path);

  /* One byte over: refused, the file as it was. */
  big = g_malloc (max - base + 2);
  memset (big, 'x', max - base + 1);
  big[max - base + 1] = '\0';
  g_free (m->text);
  m->text = g_strdup (big);
  CHECK (!tern_chat_save (chat, dir, &error));
  CHECKF (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE)
          && strstr (error->message, path) != NULL
          && strstr (error->message, "too large to save") != NULL,
          "%s", error ? error->message : "(saved)");
  {
    g_autofree char *now = file_text (path);
    CHECK (g_strcmp0 (now, before) == 0);
  }
  /* The background save reports it and writes nothing. */
  g_clear_pointer (&save_report_message, g_free);
  tern_chat_save_in_background (chat, dir, owner, too_large_report);
  tern_chat_wait_saves ();
  until = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (save_report_message == NULL && g_get_monotonic_time () < until)
    g_main_context_iteration (NULL, FALSE);
  CHECKF (save_report_message != NULL && strstr (save_report_message, "too large to save") != NULL,
          "report: %s", save_report_message ? save_report_message : "(none)");
  {
    g_autofree char *now = file_text (path);
    CHECK (g_strcmp0 (now, before) == 0);
  }
  g_clear_pointer (&save_report_message, g_free);

  /* Exactly the limit: saved, and read back. */
  big[max - base] = '\0';
  g_free (m->text);
  m->text = g_strdup (big);
  g_clear_pointer (&big, g_free);
  g_clear_error (&error);
  CHECKF (tern_chat_save (chat, dir, &error), "%s", error ? error->message : "");
  {
    GStatBuf sb;
    g_autoptr(TernChat) back = NULL;

    CHECKF (g_stat (path, &sb) == 0 && (gsize) sb.st_size == max, "%" G_GINT64_FORMAT " bytes",
            (gint64) sb.st_size);
    back = tern_chat_load (path, &error);
    CHECKF (back != NULL, "%s", error ? error->message : "");
    CHECK (back != NULL && strlen (tern_chat_get_message (back, 1)->text) == max - base);
  }
  CHECK (tern_chat_delete_file (chat, dir, NULL));
}

static guint
count_json_files (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  guint n = 0;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    n += g_str_has_suffix (name, ".json");
  return n;
}

static char *
write_over (const char *dir,
            const char *id,
            const char *text)
{
  g_autofree char *name = g_strconcat (id, ".json", NULL);
  char *path = g_build_filename (dir, name, NULL);

  CHECK (g_file_set_contents (path, text, -1, NULL));
  return path;
}

/* Only loading looked at "version": a newer Tern's chat that a sync tool
 * put over the file of a chat open here was replaced by that chat's next
 * save (and its pictures' folder pruned to this chat's), and a delete
 * removed it. A save now looks first at the file it would replace: one
 * that is not this version's chat stays as it is, with its folder, and
 * the chat is saved under a new id (in the foreground and the background,
 * where saves asked before the chat took the id follow it to the one
 * copy); a delete leaves such a file alone. A file of this version's,
 * even with "version" past the first 4 KiB the save reads, is replaced
 * in place as before. */
static void
test_chat_newer_on_disk (const char *dir)
{
  static const char newer[] =
    "{\"format\": \"tern-chat\", \"version\": 2, \"id\": \"x\", \"mode\": \"chat\",\n"
    " \"branches\": [], \"messages\": [{\"role\": \"user\", \"content\": \"from the future\"}]}\n";
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autoptr(GObject) owner = g_object_new (G_TYPE_OBJECT, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *id0 = NULL;
  g_autofree char *path = NULL;
  g_autofree char *folder = NULL;
  g_autofree char *image = NULL;
  g_autofree char *late = NULL;
  gint64 until;

  g_mkdir_with_parents (dir, 0700);
  tern_chat_append (chat, "user", "Hello");
  tern_chat_append (chat, "assistant", "Hi");
  CHECKF (tern_chat_save (chat, dir, &error), "%s", error ? error->message : "");
  id0 = g_strdup (tern_chat_get_id (chat));

  /* In the foreground: the newer file and its picture stay; the chat,
   * with the message since, is in a file of its own. */
  path = write_over (dir, id0, newer);
  folder = g_strdup_printf ("%s/%s.images", dir, id0);
  image = g_strdup_printf ("%s/%064d.png", folder, 0);
  g_mkdir_with_parents (folder, 0700);
  CHECK (g_file_set_contents (image, "png", 3, NULL));
  tern_chat_append (chat, "user", "And then?");
  CHECKF (tern_chat_save (chat, dir, &error), "%s", error ? error->message : "");
  {
    g_autofree char *now = file_text (path);
    g_autofree char *copy = g_strdup_printf ("%s/%s.json", dir, tern_chat_get_id (chat));
    g_autoptr(TernChat) back = NULL;

    CHECKF (g_strcmp0 (now, newer) == 0, "the newer file now: %s", now ? now : "(gone)");
    CHECK (g_file_test (image, G_FILE_TEST_EXISTS));
    CHECKF (!g_str_equal (tern_chat_get_id (chat), id0), "still %s", id0);
    back = tern_chat_load (copy, &error);
    CHECKF (back != NULL && tern_chat_get_n_messages (back) == 3, "%s",
            error ? error->message : "");
    CHECK (back != NULL && g_str_equal (tern_chat_get_id (back), tern_chat_get_id (chat)));
  }
  /* Deleted: its own file goes, the newer one (and folder) stay. */
  CHECK (tern_chat_delete_file (chat, dir, NULL));
  CHECK (count_json_files (dir) == 1);
  {
    g_autoptr(TernChat) again = tern_chat_new ("chat");
    g_autofree char *again_path = NULL;

    /* A chat whose file is now the newer one, deleted: the file stays. */
    tern_chat_append (again, "user", "Hello");
    CHECK (tern_chat_save (again, dir, NULL));
    again_path = write_over (dir, tern_chat_get_id (again), newer);
    CHECK (tern_chat_delete_file (again, dir, NULL));
    {
      g_autofree char *now = file_text (again_path);
      CHECKF (g_strcmp0 (now, newer) == 0, "deleted: %s", now ? now : "(gone)");
    }
    g_unlink (again_path);
  }
  g_unlink (path);
  g_unlink (image);
  g_rmdir (folder);
  CHECK (count_json_files (dir) == 0);

  /* In the background, two saves asked before the first found the file
   * replaced (by one whose "version" comes after a long title: read
   * whole): one copy, which the chat is known by once they are done, and
   * a notice naming the file left alone. */
  g_clear_object (&chat);
  chat = tern_chat_new ("chat");
  tern_chat_append (chat, "user", "Hello");
  CHECK (tern_chat_save (chat, dir, NULL));
  g_free (id0);
  id0 = g_strdup (tern_chat_get_id (chat));
  {
    g_autofree char *pad = g_strnfill (8000, 'x');
    late = g_strdup_printf ("{\"format\": \"tern-chat\", \"title\": \"%s\", \"version\": 3, "
                            "\"id\": \"x\", \"messages\": []}", pad);
  }
  g_free (path);
  path = write_over (dir, id0, late);
  tern_chat_append (chat, "assistant", "Hi");
  tern_chat_save_in_background (chat, dir, owner, save_report);
  tern_chat_append (chat, "user", "More");
  tern_chat_save_in_background (chat, dir, owner, save_report);
  tern_chat_wait_saves ();
  CHECKF (!g_str_equal (tern_chat_get_id (chat), id0), "still %s after the saves", id0);
  {
    g_autofree char *now = file_text (path);
    g_autofree char *copy = g_strdup_printf ("%s/%s.json", dir, tern_chat_get_id (chat));
    g_autoptr(TernChat) back = tern_chat_load (copy, NULL);

    CHECK (g_strcmp0 (now, late) == 0);
    CHECKF (count_json_files (dir) == 2, "%u files", count_json_files (dir));
    CHECK (back != NULL && tern_chat_get_n_messages (back) == 3);
  }
  g_clear_pointer (&save_report_message, g_free);
  until = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  while (save_report_message == NULL && g_get_monotonic_time () < until)
    g_main_context_iteration (NULL, FALSE);
  CHECKF (save_report_message != NULL && strstr (save_report_message, path) != NULL
          && strstr (save_report_message, "newer Tern") != NULL
          && strstr (save_report_message, "is saved as a new chat") != NULL,
          "report: %s", save_report_message ? save_report_message : "(none)");
  /* Saved again: in its new file, in place. */
  tern_chat_append (chat, "assistant", "Done");
  CHECK (tern_chat_save (chat, dir, NULL));
  CHECKF (count_json_files (dir) == 2, "%u files", count_json_files (dir));
  g_clear_pointer (&save_report_message, g_free);

  /* Not a chat (cut off by a sync tool, another file): kept too. */
  {
    g_autofree char *id1 = g_strdup (tern_chat_get_id (chat));
    g_autofree char *cut = write_over (dir, id1, "{\"format\": \"tern-chat\", \"ver");
    g_autofree char *now = NULL;

    CHECK (tern_chat_save (chat, dir, NULL));
    now = file_text (cut);
    CHECK (g_strcmp0 (now, "{\"format\": \"tern-chat\", \"ver") == 0);
    CHECK (!g_str_equal (tern_chat_get_id (chat), id1));
    g_unlink (cut);
  }

  /* A "version" beyond a gint64: json-glib wraps it around 2^64 (this one
   * read as 2, a newer chat), and the first 4 KiB's reader saturated it to
   * G_MININT64, called it this version's, and replaced it. The load now
   * refuses such a number (TN_JSON_NO_HUGE_INTEGERS), and the save leaves
   * the file alone. */
  {
    static const char wrapped[] = "{\"format\": \"tern-chat\", \"version\": "
                                  "-18446744073709551614, \"id\": \"x\", \"messages\": []}";
    g_autofree char *id1 = g_strdup (tern_chat_get_id (chat));
    g_autofree char *there = write_over (dir, id1, wrapped);
    g_autofree char *now = NULL;
    g_autoptr(GError) load_error = NULL;
    g_autoptr(TernChat) back = tern_chat_load (there, &load_error);

    CHECKF (back == NULL && load_error != NULL
            && strstr (load_error->message, "whole number too large") != NULL,
            "the load: %s", load_error ? load_error->message : "(loaded)");
    CHECK (tern_chat_save (chat, dir, NULL));
    now = file_text (there);
    CHECKF (g_strcmp0 (now, wrapped) == 0, "replaced: %s", now ? now : "(gone)");
    CHECK (!g_str_equal (tern_chat_get_id (chat), id1));
    g_unlink (there);
  }

  /* 99999999999999999999 wrapped to -1: the load took it for a chat of
   * version 1 (any whole number past int64 anywhere in a chat was read
   * wrapped). Refused now, named. */
  {
    static const char huge[] = "{\"format\": \"tern-chat\", \"version\": "
                               "99999999999999999999, \"id\": \"x\", \"messages\": []}";
    g_autofree char *path = g_build_filename (dir, "huge-version.json", NULL);
    g_autoptr(GError) load_error = NULL;
    g_autoptr(TernChat) back = NULL;

    CHECK (g_file_set_contents (path, huge, -1, NULL));
    back = tern_chat_load (path, &load_error);
    CHECKF (back == NULL && load_error != NULL
            && strstr (load_error->message, "whole number too large") != NULL,
            "the load: %s", load_error ? load_error->message : "(loaded)");
    g_unlink (path);
  }

  /* A FIFO put in its place: not opened for writing, not waited on. */
  {
    g_autofree char *id1 = g_strdup (tern_chat_get_id (chat));
    g_autofree char *fifo = g_strdup_printf ("%s/%s.json", dir, id1);

    g_unlink (fifo);
    CHECK (mkfifo (fifo, 0600) == 0);
    CHECK (tern_chat_save (chat, dir, NULL));
    CHECK (!g_str_equal (tern_chat_get_id (chat), id1));
    CHECK (g_file_test (fifo, G_FILE_TEST_EXISTS) && !g_file_test (fifo, G_FILE_TEST_IS_REGULAR));
    g_unlink (fifo);
  }

  /* Out of descriptors when the save looks at its file: the save fails and
   * the chat keeps its id (it was given a new one, a copy of the chat at
   * every such failure); the next save, with descriptors, is the same
   * file's. Delete fails the same way and leaves the file. */
  {
    g_autofree char *id1 = g_strdup (tern_chat_get_id (chat));
    g_autofree char *mine = g_strdup_printf ("%s/%s.json", dir, id1);
    g_autoptr(GError) save_error = NULL;
    g_autoptr(GError) delete_error = NULL;
    struct rlimit old, low;
    int held[512], n_held = 0, fd;
    gboolean saved, deleted;

    CHECK (tern_chat_save (chat, dir, NULL) && g_file_test (mine, G_FILE_TEST_IS_REGULAR));
    CHECK (getrlimit (RLIMIT_NOFILE, &old) == 0);
    low = old;
    low.rlim_cur = MIN (old.rlim_cur, 256);
    CHECK (setrlimit (RLIMIT_NOFILE, &low) == 0);
    while (n_held < (int) G_N_ELEMENTS (held) && (fd = dup (2)) >= 0)
      held[n_held++] = fd;
    saved = tern_chat_save (chat, dir, &save_error);
    deleted = tern_chat_delete_file (chat, dir, &delete_error);
    while (n_held > 0)
      close (held[--n_held]);
    CHECK (setrlimit (RLIMIT_NOFILE, &old) == 0);
    CHECKF (!saved && save_error != NULL
            && strstr (save_error->message, "cannot look at the file") != NULL,
            "save without descriptors: %s", save_error ? save_error->message : "(saved)");
    CHECKF (!deleted && delete_error != NULL, "delete without descriptors: %s",
            delete_error ? delete_error->message : "(deleted)");
    CHECK (g_str_equal (tern_chat_get_id (chat), id1));
    CHECK (g_file_test (mine, G_FILE_TEST_IS_REGULAR));
    CHECK (tern_chat_save (chat, dir, NULL) && g_str_equal (tern_chat_get_id (chat), id1));
  }

  /* This version's, "version" past the first 4 KiB or absent: replaced. */
  {
    g_autofree char *id1 = g_strdup (tern_chat_get_id (chat));
    g_autofree char *pad = g_strnfill (8000, 'y');
    g_autofree char *own = g_strdup_printf ("{\"format\": \"tern-chat\", \"title\": \"%s\", "
                                            "\"version\": 1, \"id\": \"x\", \"messages\": []}",
                                            pad);
    g_autofree char *mine = write_over (dir, id1, own);
    g_autofree char *now = NULL;

    CHECK (tern_chat_save (chat, dir, NULL));
    CHECK (g_str_equal (tern_chat_get_id (chat), id1));
    g_clear_pointer (&mine, g_free);
    mine = write_over (dir, id1, "{\"format\":\"tern-chat\",\"id\":\"x\",\"messages\":[]}");
    CHECK (tern_chat_save (chat, dir, NULL));
    CHECK (g_str_equal (tern_chat_get_id (chat), id1));
    now = file_text (mine);
    CHECK (now != NULL && strstr (now, "Done") != NULL);
  }
  CHECK (tern_chat_delete_file (chat, dir, NULL));
  g_unlink (path);
}

/* A chat saved over HOSTILE (the file put at its path): FALSE if the file
 * was replaced, TRUE if it was left as it is and the chat took a new id. */
static gboolean
saved_aside (const char *dir,
             const char *hostile,
             gsize       len)
{
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autofree char *id = NULL;
  g_autofree char *path = NULL;
  g_autofree char *now = NULL;
  gsize now_len = 0;
  gboolean kept;

  tern_chat_append (chat, "user", "Hello");
  CHECK (tern_chat_save (chat, dir, NULL));
  id = g_strdup (tern_chat_get_id (chat));
  path = g_strdup_printf ("%s/%s.json", dir, id);
  CHECK (g_file_set_contents (path, hostile, (gssize) len, NULL));
  CHECK (tern_chat_save (chat, dir, NULL));
  kept = g_file_get_contents (path, &now, &now_len, NULL) && now_len == len
         && memcmp (now, hostile, len) == 0;
  CHECKF (kept == !g_str_equal (tern_chat_get_id (chat), id), "kept %d, id %s -> %s", kept, id,
          tern_chat_get_id (chat));
  if (kept)
    CHECK (tern_chat_delete_file (chat, dir, NULL));
  g_unlink (path);
  CHECKF (count_json_files (dir) == 0, "%u files left", count_json_files (dir));
  return kept;
}

/* The first 4 KiB of the file a save would replace were read by a reader
 * of their own, more lenient than the load's: a head that said
 * "format": "tern-chat" and a version of 1 was replaced even where the
 * load refuses it ("version" twice, "01", a bad escape or a whole number
 * past int64 before it). Every file here is refused by tern_chat_load and
 * now left as it is; chats of this version whose 4 KiB end in the middle
 * of a character, an escape, a number or a literal are still replaced in
 * place. */
static void
test_chat_strict_head (const char *dir)
{
  g_autofree char *pad = g_strnfill (6000, 'p');
  static const char *const heads[] = {
    "{\"format\": \"tern-chat\", \"version\": 1, \"version\": 1, \"id\": \"x\", ",
    "{\"format\": \"tern-chat\", \"version\": 01, \"id\": \"x\", ",
    "{\"format\": \"tern-chat\", \"version\": 1, \"format\": \"tern-chat\", ",
    "{\"format\": \"tern-chat\", \"version\": 1, \"n\": 99999999999999999999, ",
    "{\"draft\": \"a\\qb\", \"format\": \"tern-chat\", \"version\": 1, ",
    "{\"format\": \"tern-chat\", \"version\": 1, \"draft\": \"\\u0000\", ",
    "{\"format\": \"tern-chat\", \"version\": 1, \"draft\": \"\xff\", ",
    "{\"format\": \"tern-chat\", \"version\": 1, \"n\": 1e999, ",
    "{\"format\": \"tern-chat\", \"version\": 1, \"draft\": tru, ",
    "\xEF\xBB\xBF{\"format\": \"tern-chat\", \"version\": 1, ",
    "{\"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], "
    "\"format\": \"tern-chat\", \"version\": 1, ",
    "{\"format\": \"tern-chat\", \"version\": 2, ",
  };

  g_mkdir_with_parents (dir, 0700);
  for (gsize i = 0; i < G_N_ELEMENTS (heads); i++)
    {
      g_autofree char *text = g_strdup_printf ("%s\"title\": \"%s\", \"messages\": []}", heads[i],
                                               pad);
      g_autofree char *small = g_strdup_printf ("%s\"messages\": []}", heads[i]);
      g_autoptr(TernChat) back = NULL;

      CHECK (strlen (text) > 4096);
      /* As the load reads them: refused, or (version 2) a newer Tern's. */
      {
        g_autofree char *path = g_build_filename (dir, "probe.json", NULL);
        g_autoptr(GError) error = NULL;

        CHECK (g_file_set_contents (path, text, -1, NULL));
        back = tern_chat_load (path, &error);
        CHECKF (back == NULL, "loaded: %s", heads[i]);
        g_unlink (path);
      }
      CHECKF (saved_aside (dir, text, strlen (text)), "replaced (long): %s", heads[i]);
      CHECKF (saved_aside (dir, small, strlen (small)), "replaced (short): %s", heads[i]);
    }

  /* "version" again, the 4 KiB ending after its key, in its value or
   * after: the key read whole is enough. (Ending inside the key, the head
   * cannot tell, as for anything past it.) */
  for (int cut = 0; cut < 12; cut++)
    {
      static const char start[] = "{\"format\": \"tern-chat\", \"version\": 1, \"title\": \"";
      GString *text = g_string_new (start);

      while (text->len < 4096 - 8 + (gsize) cut - strlen ("\", \"version\": 1"))
        g_string_append_c (text, 't');
      g_string_append (text, "\", \"version\": 1, \"messages\": [], \"draft\": \"");
      g_string_append (text, pad);
      g_string_append (text, "\"}");
      CHECKF (saved_aside (dir, text->str, text->len), "replaced, cut at %d", cut);
      g_string_free (text, TRUE);
    }

  /* This version's chats, the 4 KiB ending inside a character, a \u
   * escape, a number or a literal: replaced in place. */
  for (int shift = 0; shift < 24; shift++)
    {
      g_autoptr(TernChat) chat = tern_chat_new ("chat");
      g_autofree char *id = NULL;
      g_autofree char *path = NULL;
      g_autofree char *now = NULL;
      GString *text = g_string_new ("{\"format\": \"tern-chat\", \"version\": 1, \"title\": \"");

      while (text->len < 4096 - 40 + (gsize) shift)
        g_string_append_c (text, 't');
      g_string_append (text, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\\u00e9\", \"created\": "
                             "1234567890, \"context_start\": 0, \"messages\": [], \"draft\": "
                             "\"\xE6\x97\xA5\xE6\x9C\xAC\", \"id\": \"x\"}");
      tern_chat_append (chat, "user", "Hello");
      CHECK (tern_chat_save (chat, dir, NULL));
      id = g_strdup (tern_chat_get_id (chat));
      path = g_strdup_printf ("%s/%s.json", dir, id);
      CHECK (g_file_set_contents (path, text->str, (gssize) text->len, NULL));
      {
        g_autoptr(TernChat) back = tern_chat_load (path, NULL);
        CHECKF (back != NULL, "shift %d: not loaded", shift);
      }
      CHECK (tern_chat_save (chat, dir, NULL));
      CHECKF (g_str_equal (tern_chat_get_id (chat), id), "shift %d: moved to %s", shift,
              tern_chat_get_id (chat));
      now = file_text (path);
      CHECK (now != NULL && strstr (now, "Hello") != NULL);
      CHECK (tern_chat_delete_file (chat, dir, NULL));
      CHECK (count_json_files (dir) == 0);
      g_string_free (text, TRUE);
    }
}

/* A newer Tern's chat, read as a stand-in for the list: titled by its
 * "title" (one line, cut to a list's length) or its file's name, no
 * messages, and never written: the save fails, the background save does
 * nothing, the delete fails; only the trash takes it, and only while the
 * file is still a newer Tern's. A name no chat could have is refused as
 * newer (left alone), not as corrupt (set aside). */
static void
test_chat_newer_listed (const char *dir)
{
  g_autofree char *long_title = g_strnfill (300, 'w');
  g_autofree char *text = g_strdup_printf ("{\"format\": \"tern-chat\", \"version\": 7, \"title\": "
                                           "\"  Line one\\nline two %s\", \"messages\": 5}",
                                           long_title);
  g_autofree char *path = g_build_filename (dir, "from-the-future.json", NULL);
  g_autofree char *dotted = g_build_filename (dir, ".json", NULL);
  g_autoptr(TernChat) chat = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *now = NULL;

  g_mkdir_with_parents (dir, 0700);
  CHECK (g_file_set_contents (path, text, -1, NULL));
  CHECK (tern_chat_load (path, &error) == NULL
         && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED));
  g_clear_error (&error);
  chat = tern_chat_load_or_newer (path, &error);
  CHECKF (chat != NULL && tern_chat_is_newer (chat), "%s", error ? error->message : "");
  if (chat == NULL)
    return;
  CHECK (g_str_equal (tern_chat_get_id (chat), "from-the-future"));
  CHECKF (g_str_has_prefix (tern_chat_get_title (chat), "Line one line two www")
          && g_str_has_suffix (tern_chat_get_title (chat), "…")
          && g_utf8_strlen (tern_chat_get_title (chat), -1) <= 48,
          "title '%s'", tern_chat_get_title (chat));
  CHECK (tern_chat_get_n_messages (chat) == 0 && tern_chat_get_updated (chat) > 0);
  tern_chat_set_draft (chat, "typed");
  CHECK (!tern_chat_save (chat, dir, &error)
         && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED));
  g_clear_error (&error);
  tern_chat_save_in_background (chat, dir, NULL, NULL);
  tern_chat_wait_saves ();
  CHECK (!tern_chat_delete_file (chat, dir, &error));
  g_clear_error (&error);
  now = file_text (path);
  CHECK (g_strcmp0 (now, text) == 0);
  CHECK (count_json_files (dir) == 1);
  /* No longer a newer Tern's chat there: not trashed. */
  CHECK (g_file_set_contents (path, "{\"format\": \"tern-chat\", \"messages\": []}", -1, NULL));
  CHECK (!tern_chat_trash_newer_file (chat, dir, &error)
         && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_EXISTS));
  g_clear_error (&error);
  CHECK (g_file_test (path, G_FILE_TEST_EXISTS));
  g_unlink (path);
  CHECK (tern_chat_trash_newer_file (chat, dir, NULL)); /* gone already */

  /* Untitled: its file's name. */
  {
    g_autoptr(TernChat) untitled = NULL;

    CHECK (g_file_set_contents (path, "{\"format\": \"tern-chat\", \"version\": 2, \"title\": 5}",
                                -1, NULL));
    untitled = tern_chat_load_or_newer (path, NULL);
    CHECK (untitled != NULL && g_str_equal (tern_chat_get_title (untitled), "from-the-future"));
    g_unlink (path);
  }
  CHECK (g_file_set_contents (dotted, "{\"format\": \"tern-chat\", \"version\": 2}", -1, NULL));
  CHECK (tern_chat_load_or_newer (dotted, &error) == NULL
         && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED));
  g_unlink (dotted);
}

/* DIR/NAME written with TEXT (LEN bytes, -1: a string), then sparse zeros
 * up to SIZE (0: none), last changed at MTIME (0: now). Its path. */
static char *
listed_file (const char *dir,
             const char *name,
             const char *text,
             gssize      len,
             goffset     size,
             time_t      mtime)
{
  char *path = g_build_filename (dir, name, NULL);

  CHECK (g_file_set_contents (path, text, len, NULL));
  if (size > 0)
    CHECK (truncate (path, size) == 0);
  if (mtime != 0)
    {
      struct timespec t[2] = { { mtime, 0 }, { mtime, 0 } };
      CHECK (utimensat (AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW) == 0);
    }
  return path;
}

/* Appends 1 MiB at a time to the file DATA names, up to 96 MiB. */
static gpointer
grow_file (gpointer data)
{
  const char *path = data;
  g_autofree char *chunk = g_malloc0 (1024 * 1024);
  FILE *f = fopen (path, "ab");

  for (int i = 0; f != NULL && i < 96; i++)
    {
      fwrite (chunk, 1, 1024 * 1024, f);
      fflush (f);
    }
  if (f != NULL)
    fclose (f);
  return NULL;
}

/* What the list does with a file it cannot read (tern_chat_load_listed):
 * set aside only this version's own broken files, left alone a while;
 * never a file it cannot judge. Each of these was set aside as *.corrupt
 * before, and the newer ones taken from the newer Tern. */
static void
test_chat_listed_unread (const char *dir)
{
  const time_t old = time (NULL) - 60;
  /* A minute on: files written now (their change time, which no one can
   * set back) and dated OLD are then left alone. */
  const gint64 now = (gint64) time (NULL) + 60;
  static const char newer_big[] = "{\"format\":\"tern-chat\",\"version\":2,\"title\":\"Big\","
                                  "\"messages\":[{\"role\":\"user\",\"content\":\"";
  static const char ours_big[] = "{\"format\":\"tern-chat\",\"version\":1,\"id\":\"x\",\"messages\":[";
  static const struct { const char *name; const char *text; const char *title; } newer[] = {
    /* past this version's reader: an escape it refuses, a key twice, deeper
     * than it reads, cut off by a sync tool */
    { "escape.json", "{\"format\":\"tern-chat\",\"version\":3,\"title\":\"Esc\",\"messages\":"
                     "[{\"role\":\"user\",\"content\":\"\\x41\"}]}", "Esc" },
    { "twice.json", "{\"format\":\"tern-chat\",\"version\":2,\"messages\":[{\"a\":1,\"a\":2}]}",
      "twice" },
    { "deep.json", "{\"format\":\"tern-chat\",\"version\":2,\"title\":\"Deep\",\"x\":"
                   "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
      "Deep" },
    { "cut.json", "{\"format\":\"tern-chat\",\"version\":2,\"title\":\"Cut\",\"messages\":[{\"ro",
      "Cut" },
    { "\xff\xfe.json", "{\"format\":\"tern-chat\",\"version\":2,\"messages\":[", NULL },
  };
  TernChatUnread unread;

  g_mkdir_with_parents (dir, 0700);
  /* A newer Tern's chat, larger than this version reads, or broken for its
   * reader: listed as newer, its file untouched, and it goes to the trash. */
  {
    g_autofree char *path = listed_file (dir, "big-newer.json", newer_big, -1,
                                         (goffset) 64 * 1024 * 1024 + 1, old);
    g_autoptr(GError) error = NULL;
    g_autoptr(TernChat) chat = tern_chat_load_listed (path, now, &unread, &error);
    struct stat sb;

    CHECKF (chat != NULL && tern_chat_is_newer (chat)
            && g_str_equal (tern_chat_get_title (chat), "Big"),
            "%s", error ? error->message : "");
    /* No messages, and the page says it is the size. */
    CHECK (chat == NULL || (tern_chat_get_n_messages (chat) == 0
                            && tern_chat_get_head_only (chat) == TERN_CHAT_HEAD_ONLY_LARGE));
    CHECK (stat (path, &sb) == 0 && sb.st_size == 64 * 1024 * 1024 + 1);
    g_unlink (path);
  }
  for (guint i = 0; i < G_N_ELEMENTS (newer); i++)
    {
      g_autofree char *path = listed_file (dir, newer[i].name, newer[i].text, -1, 0, old);
      g_autoptr(GError) error = NULL;
      g_autoptr(TernChat) chat = NULL;
      g_autofree char *after = NULL;

      /* Changed a moment ago: judged (and read whole, once complete)
       * when left alone. */
      CHECKF (tern_chat_load_listed (path, old + 1, &unread, &error) == NULL
              && unread == TERN_CHAT_UNREAD_BUSY, "%s: %d", newer[i].name, (int) unread);
      g_clear_error (&error);
      chat = tern_chat_load_listed (path, now, &unread, &error);

      CHECKF (chat != NULL && tern_chat_is_newer (chat), "%s: %s", newer[i].name,
              error ? error->message : "");
      /* Read from its head only: the page says the reader stopped there. */
      CHECKF (chat == NULL || tern_chat_get_head_only (chat) == TERN_CHAT_HEAD_ONLY_UNREAD,
              "%s: head only %d", newer[i].name, chat ? (int) tern_chat_get_head_only (chat) : -1);
      if (chat != NULL && newer[i].title != NULL)
        CHECKF (g_str_equal (tern_chat_get_title (chat), newer[i].title), "%s: title %s",
                newer[i].name, tern_chat_get_title (chat));
      /* A title for a label, whatever the file's name. */
      CHECK (chat == NULL || g_utf8_validate (tern_chat_get_title (chat), -1, NULL));
      after = file_text (path);
      CHECK (g_strcmp0 (after, newer[i].text) == 0);
      /* Never written. */
      CHECK (chat == NULL || !tern_chat_save (chat, dir, NULL));
      /* Delete moves it to the trash: small and broken, its head still
       * says a newer Tern's chat (file_on_disk), as when it was listed. */
      if (chat != NULL)
        {
          g_autofree char *base = g_path_get_basename (path);
          g_autofree char *trashed = g_build_filename (g_get_user_data_dir (), "Trash", "files",
                                                       base, NULL);
          g_autofree char *in_trash = NULL;

          g_clear_error (&error);
          CHECKF (tern_chat_trash_newer_file (chat, dir, &error), "%s: trash: %s",
                  newer[i].name, error ? error->message : "");
          CHECKF (!g_file_test (path, G_FILE_TEST_EXISTS), "%s: still there", newer[i].name);
          CHECKF (g_file_get_contents (trashed, &in_trash, NULL, NULL)
                  && g_str_equal (in_trash, newer[i].text), "%s: not in the trash as it was",
                  newer[i].name);
          g_unlink (trashed);
        }
      g_unlink (path);
    }
  /* Larger than this version reads but not saying newer (a later Tern may
   * read more in version 1): listed read-only by its file's name, never
   * read whole (200 MB), never written. */
  {
    g_autofree char *path = listed_file (dir, "big.json", ours_big, -1,
                                         (goffset) 200 * 1000 * 1000, old);
    g_autoptr(GError) error = NULL;
    gint64 start = g_get_monotonic_time ();
    g_autoptr(TernChat) chat = tern_chat_load_listed (path, now, &unread, &error);
    struct stat sb;

    CHECKF (chat != NULL && tern_chat_is_too_large (chat) && tern_chat_is_newer (chat)
            && tern_chat_get_n_messages (chat) == 0 && g_str_equal (tern_chat_get_title (chat), "big"),
            "%s", error ? error->message : "");
    CHECK (g_get_monotonic_time () - start < 2 * G_USEC_PER_SEC);
    CHECK (chat == NULL || !tern_chat_save (chat, dir, NULL));
    CHECK (stat (path, &sb) == 0 && sb.st_size == 200 * 1000 * 1000);
    g_unlink (path);
  }
  /* This version's broken file: set aside once left alone for a while;
   * changed a moment ago (a sync tool writing it, a clock a little ahead),
   * read again later. A 0-byte file the same. */
  {
    static const char *const texts[] = { "{\"format\":\"tern-chat\",\"id\":", "",
                                         "{\"format\":\"tern-chat\",\"version\":1,\"messages\":5}",
                                         "\xff not json at all" };

    for (guint i = 0; i < G_N_ELEMENTS (texts); i++)
      {
        g_autofree char *path = listed_file (dir, "ours.json", texts[i], -1, 0, old);
        g_autoptr(GError) error = NULL;

        CHECK (tern_chat_load_listed (path, now, &unread, &error) == NULL
               && unread == TERN_CHAT_UNREAD_BROKEN && error != NULL);
        g_clear_error (&error);
        CHECK (tern_chat_load_listed (path, old + 3, &unread, &error) == NULL
               && unread == TERN_CHAT_UNREAD_BUSY);
        g_clear_error (&error);
        CHECK (tern_chat_load_listed (path, old - 5, &unread, &error) == NULL
               && unread == TERN_CHAT_UNREAD_BUSY);
        g_clear_error (&error);
        CHECK (tern_chat_load_listed (path, old - 100, &unread, &error) == NULL
               && unread == TERN_CHAT_UNREAD_BROKEN);
        g_unlink (path);
      }
  }
  /* Written a moment ago with an old modification time (cp -p, rsync -t:
   * set back after each part written), maybe more to come: read again
   * later, not set aside. Its change time tells. */
  {
    g_autofree char *path = listed_file (dir, "kept-time.json", "{\"format\":\"tern-chat\",\"id\":",
                                         -1, 0, old - 3600);
    g_autoptr(GError) error = NULL;

    CHECKF (tern_chat_load_listed (path, (gint64) time (NULL), &unread, &error) == NULL
            && unread == TERN_CHAT_UNREAD_BUSY, "an old mtime, written now: %d", (int) unread);
    g_clear_error (&error);
    CHECK (tern_chat_load_listed (path, now, &unread, &error) == NULL
           && unread == TERN_CHAT_UNREAD_BROKEN);
    g_unlink (path);
  }
  /* Not a regular file, a link, a name gone: left (a FIFO without
   * blocking). */
  {
    g_autofree char *fifo = g_build_filename (dir, "fifo.json", NULL);
    g_autofree char *folder = g_build_filename (dir, "folder.json", NULL);
    g_autofree char *link = g_build_filename (dir, "link.json", NULL);
    g_autofree char *dangling = g_build_filename (dir, "dangling.json", NULL);
    g_autofree char *target = listed_file (dir, "target", "broken", -1, 0, old);
    g_autofree char *gone = g_build_filename (dir, "gone.json", NULL);
    const char *const keep[] = { fifo, folder, link, dangling };

    CHECK (mkfifo (fifo, 0600) == 0);
    CHECK (g_mkdir (folder, 0700) == 0);
    CHECK (symlink (target, link) == 0);
    CHECK (symlink ("/nonexistent/x.json", dangling) == 0);
    for (guint i = 0; i < G_N_ELEMENTS (keep); i++)
      {
        g_autoptr(GError) error = NULL;

        CHECKF (tern_chat_load_listed (keep[i], now, &unread, &error) == NULL
                && unread == TERN_CHAT_UNREAD_KEEP && error != NULL,
                "%s: %d", keep[i], (int) unread);
      }
    {
      g_autoptr(GError) error = NULL;

      CHECK (tern_chat_load_listed (gone, now, &unread, &error) == NULL
             && unread == TERN_CHAT_UNREAD_GONE);
    }
    g_unlink (fifo);
    g_rmdir (folder);
    g_unlink (link);
    g_unlink (dangling);
    g_unlink (target);
  }
  /* Growing while it is read (a copy under way, past 64 MiB): never set
   * aside, never a hang. */
  {
    g_autofree char *path = listed_file (dir, "growing.json", ours_big, -1, 0, 0);
    GThread *writer = g_thread_new ("grow", grow_file, path);

    for (int i = 0; i < 20; i++)
      {
        g_autoptr(GError) error = NULL;
        g_autoptr(TernChat) chat = tern_chat_load_listed (path, (gint64) time (NULL), &unread,
                                                          &error);

        CHECKF (chat == NULL ? unread == TERN_CHAT_UNREAD_BUSY : tern_chat_is_too_large (chat),
                "growing: %d", (int) unread);
      }
    g_thread_join (writer);
    CHECK (g_file_test (path, G_FILE_TEST_IS_REGULAR));
    g_unlink (path);
  }
  /* A good chat is read as before. */
  {
    g_autofree char *path = listed_file (dir, "fine.json",
                                         "{\"format\":\"tern-chat\",\"id\":\"fine\",\"messages\":"
                                         "[{\"role\":\"user\",\"content\":\"hi\"}]}", -1, 0, 0);
    g_autoptr(TernChat) chat = tern_chat_load_listed (path, now, &unread, NULL);

    CHECK (chat != NULL && !tern_chat_is_newer (chat) && tern_chat_get_n_messages (chat) == 1);
    g_unlink (path);
  }
}

/* The files the list leaves out are told once each (by name and kind),
 * not at every start while they remain: tern_chat_left_out_news. */
static void
test_chat_left_out (const char *dir)
{
  g_autofree char *chats = g_build_filename (dir, "chats", NULL);
  g_autofree char *state = g_build_filename (dir, "chats-left-out", NULL);
  static const char *const names[] = { "a.json", "b.json", "c.json", "new\nline\xff.json" };
  char *paths[G_N_ELEMENTS (names)] = { NULL };
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func (g_free);

  g_mkdir_with_parents (chats, 0700);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    paths[i] = g_build_filename (chats, names[i], NULL);
  CHECK (mkfifo (paths[0], 0600) == 0);
  CHECK (g_mkdir (paths[1], 0700) == 0);
  g_ptr_array_add (keys, tern_chat_left_out_key (chats, names[0]));
  g_ptr_array_add (keys, tern_chat_left_out_key (chats, names[1]));
  CHECK (g_str_equal (g_ptr_array_index (keys, 0), "fifo a.json"));
  CHECK (g_str_equal (g_ptr_array_index (keys, 1), "folder b.json"));
  /* The first start tells both; the next ones nothing, and do not write. */
  CHECK (tern_chat_left_out_news (state, keys, TRUE) == 2);
  CHECK (tern_chat_left_out_news (state, keys, TRUE) == 0);
  {
    GStatBuf before, after;

    CHECK (g_stat (state, &before) == 0);
    CHECK (tern_chat_left_out_news (state, keys, TRUE) == 0);
    CHECK (g_stat (state, &after) == 0 && after.st_ino == before.st_ino);
  }
  /* A new one is told, whatever its name's bytes; the others not. */
  CHECK (symlink ("/nonexistent", paths[2]) == 0);
  CHECK (g_mkdir (paths[3], 0700) == 0);
  g_ptr_array_add (keys, tern_chat_left_out_key (chats, names[2]));
  g_ptr_array_add (keys, tern_chat_left_out_key (chats, names[3]));
  CHECK (g_str_equal (g_ptr_array_index (keys, 2), "link c.json"));
  CHECK (tern_chat_left_out_news (state, keys, TRUE) == 2);
  CHECK (tern_chat_left_out_news (state, keys, TRUE) == 0);
  /* The same name as another kind is another file. */
  g_unlink (paths[0]);
  CHECK (g_mkdir (paths[0], 0700) == 0);
  g_free (g_ptr_array_index (keys, 0));
  g_ptr_array_index (keys, 0) = tern_chat_left_out_key (chats, names[0]);
  CHECK (tern_chat_left_out_news (state, keys, TRUE) == 1);
  /* Another look at one file (a retry) adds to the record, forgets none. */
  {
    g_autoptr(GPtrArray) one = g_ptr_array_new_with_free_func (g_free);
    g_autofree char *late = g_build_filename (chats, "late.json", NULL);

    CHECK (mkfifo (late, 0600) == 0);
    g_ptr_array_add (one, tern_chat_left_out_key (chats, "late.json"));
    CHECK (tern_chat_left_out_news (state, one, FALSE) == 1);
    CHECK (tern_chat_left_out_news (state, one, FALSE) == 0);
    CHECK (tern_chat_left_out_news (state, keys, FALSE) == 0);
    g_ptr_array_add (keys, g_ptr_array_steal_index (one, 0));
    CHECK (tern_chat_left_out_news (state, keys, TRUE) == 0);
    g_unlink (late);
    g_free (g_ptr_array_steal_index (keys, keys->len - 1));
  }
  /* Gone at a start: forgotten, and told again when it comes back. */
  {
    char *b = g_ptr_array_steal_index (keys, 1);

    CHECK (tern_chat_left_out_news (state, keys, TRUE) == 0);
    g_ptr_array_add (keys, b);
    CHECK (tern_chat_left_out_news (state, keys, TRUE) == 1);
  }
  /* Nothing left out: no record. */
  {
    g_autoptr(GPtrArray) none = g_ptr_array_new ();

    CHECK (tern_chat_left_out_news (state, none, TRUE) == 0);
    CHECK (!g_file_test (state, G_FILE_TEST_EXISTS));
    CHECK (tern_chat_left_out_news (state, keys, TRUE) == keys->len);
  }
  /* A record that cannot be read (a FIFO in its place): each told again,
   * without blocking. */
  g_unlink (state);
  CHECK (mkfifo (state, 0600) == 0);
  CHECK (tern_chat_left_out_news (state, keys, TRUE) == keys->len);
  CHECK (tern_chat_left_out_news (state, keys, TRUE) == 0);
  g_unlink (state);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    if (g_unlink (paths[i]) != 0)
      g_rmdir (paths[i]);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    g_free (paths[i]);
}

/* The plot's scale tops at a round figure just above the peak. */
static void
test_plot_scale (void)
{
  static const double peak[] = { 0, -3, 0.7, 1, 1.5, 2, 3, 7, 85, 100, 120, 1234, 6e4 };
  static const double top[] = { 0, 0, 1, 1, 2, 2, 5, 10, 100, 100, 200, 2000, 1e5 };

  for (gsize i = 0; i < G_N_ELEMENTS (peak); i++)
    CHECKF (fabs (tern_throughput_plot_scale_top (peak[i]) - top[i]) <= 1e-9 * top[i],
            "peak %g: top %g, want %g", peak[i], tern_throughput_plot_scale_top (peak[i]),
            top[i]);
  CHECK (tern_throughput_plot_scale_top (NAN) == 0);
  CHECK (tern_throughput_plot_scale_top (INFINITY) == 0);
}

/* ------------------------------------------------------------ the worker */

typedef struct {
  guint loaded_id;
  char *load_error;
  guint pinned_id;
  TernPinState pin;
  guint n_updates;
  guint n_stale_updates;
  GString *text;
  guint finished_id;
  TernStats final;
  gboolean cancelled;
  char *error;
  guint want_id;
  gboolean finished_before_update;
  /* Per request id (ids are small here), whatever the order of dispatch. */
  gboolean done[64];
  gboolean cancelled_of[64];
  GString *text_of[64];
} Probe;

static void
on_loaded (TernEngineWorker *w, const TernModelLoadedEvent *ev, Probe *p)
{
  (void) w;
  p->loaded_id = ev->id;
  g_free (p->load_error);
  p->load_error = g_strdup (ev->error);
}

static void
on_pinned (TernEngineWorker *w, const TernPinnedEvent *ev, Probe *p)
{
  (void) w;
  p->pinned_id = ev->id;
  p->pin = ev->state;
}

static void
on_update (TernEngineWorker *w, const TernUpdateEvent *ev, Probe *p)
{
  guint id = ev->id;
  const char *text = ev->text;

  (void) w;
  if (id < 64)
    {
      if (p->text_of[id] == NULL)
        p->text_of[id] = g_string_new (NULL);
      g_string_append (p->text_of[id], text);
    }
  if (id != p->want_id)
    {
      p->n_stale_updates++;
      return;
    }
  if (p->finished_id == id)
    p->finished_before_update = TRUE;
  p->n_updates++;
  g_string_append (p->text, text);
}

static void
on_finished (TernEngineWorker *w, const TernFinishedEvent *ev, Probe *p)
{
  guint id = ev->id;
  const TernStats *st = &ev->stats;
  const char *error = ev->error;
  gboolean cancelled = ev->cancelled;

  (void) w;
  if (id < 64)
    {
      p->done[id] = TRUE;
      p->cancelled_of[id] = cancelled;
    }
  if (id != p->want_id)
    return;
  p->finished_id = id;
  p->final = *st;
  p->cancelled = cancelled;
  g_free (p->error);
  p->error = g_strdup (error);
}

/* The signals' events are boxed: a copy owns its strings and flags, so a
 * handler may keep one past the emission. */
static void
test_events (void)
{
  char text[] = "abc";
  guint8 drafted[] = { 1, 0, 1 };
  char error[] = "out of memory";
  TernUpdateEvent update = { .id = 7, .text = text, .drafted = drafted };
  TernFinishedEvent finished = { .id = 8, .error = error, .cancelled = TRUE };
  TernModelLoadedEvent loaded = { .id = 9, .path = text, .error = NULL };
  TernUpdateEvent *u;
  TernFinishedEvent *f;
  TernModelLoadedEvent *l;

  update.stats.generated_tokens = 3;
  u = g_boxed_copy (TERN_TYPE_UPDATE_EVENT, &update);
  f = g_boxed_copy (TERN_TYPE_FINISHED_EVENT, &finished);
  l = g_boxed_copy (TERN_TYPE_MODEL_LOADED_EVENT, &loaded);
  /* The emitter's buffers change or go after the emission. */
  text[0] = 'X';
  drafted[0] = 9;
  error[0] = 'X';
  CHECK (u->id == 7 && u->stats.generated_tokens == 3);
  CHECKF (u->text != text && g_str_equal (u->text, "abc"), "%s", u->text);
  CHECK (u->drafted != drafted && u->drafted[0] == 1 && u->drafted[1] == 0 && u->drafted[2] == 1);
  CHECK (f->id == 8 && f->cancelled && g_str_equal (f->error, "out of memory"));
  CHECK (l->id == 9 && l->error == NULL && l->description == NULL
         && g_str_equal (l->path, "abc"));
  g_boxed_free (TERN_TYPE_UPDATE_EVENT, u);
  g_boxed_free (TERN_TYPE_FINISHED_EVENT, f);
  g_boxed_free (TERN_TYPE_MODEL_LOADED_EVENT, l);
}

/* A chat's overflow reaches the window's stats from the engine's record,
 * whatever the words of its message: a reworded message (the worker read
 * the size out of the English format's arguments) or none at all still
 * gives the size, and an overflow that is no context's gives none. */
static void
test_overflow_stats (void)
{
  static const struct {
    const char *name;
    const char *format;  /* the engine's message, as a caller sees it */
    const char *args[3];
    tn_overflow record;
    int want_tokens;
    gboolean want_at_least;
  } cases[] = {
    { "counted, reworded", "this conversation takes %d tokens, more than the %d there are",
      { "700", "512" }, { .needed = 700, .room = 512 }, 700, FALSE },
    { "from its length, reworded",
      "at least %2$zu tokens (%1$zu bytes as the template writes it) for a context of %3$d",
      { "300000", "40000", "512" }, { .needed = 40000, .room = 512, .at_least = TRUE },
      40000, TRUE },
    { "no words", NULL, { NULL }, { .needed = 600, .room = 512 }, 600, FALSE },
    { "a file, not the context", "%s: %lld bytes, more than the %lld this takes",
      { "a.json", "700", "512" }, { 0 }, 0, FALSE },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      tn_error err = { .code = TN_ERR_OVERFLOW, .format = cases[i].format,
                       .overflow = cases[i].record };
      TernStats st = { 0 };
      gsize at = 0;

      /* The arguments as libtern keeps them: NUL-separated. */
      for (; err.n_args < 3 && cases[i].args[err.n_args] != NULL; err.n_args++)
        at += g_strlcpy (err.args + at, cases[i].args[err.n_args], sizeof err.args - at) + 1;
      g_strlcpy (err.message, cases[i].format ? cases[i].format : "", sizeof err.message);
      tern_engine_overflow_stats (&err, &st);
      CHECKF (st.overflow_tokens == cases[i].want_tokens
              && st.overflow_at_least == cases[i].want_at_least,
              "%s: %d tokens (at least: %d), want %d (%d)", cases[i].name, st.overflow_tokens,
              st.overflow_at_least, cases[i].want_tokens, cases[i].want_at_least);
    }
}

static gboolean
wait_id (guint *field, guint id, double timeout_s)
{
  gint64 end = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);

  while (*field != id && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, FALSE) || (g_usleep (1000), TRUE);
  return *field == id;
}

static void
test_worker (const char *dir)
{
  g_autofree char *model = g_build_filename (dir, "worker-model.gguf", NULL);
  g_autoptr(TernEngineWorker) w = tern_engine_worker_new ();
  TernGenSettings gen = { .temperature = 0, .top_p = 1, .seed = 1, .max_tokens = 200 };
  Probe p = { .text = g_string_new (NULL) };
  tn_mkmodel_params mp = tn_mkmodel_default_params ();
  tn_error err = { 0 };
  guint id, first, second;
  g_autofree char *answer = NULL;

  mp.arch = "qwen3";
  mp.type = g_getenv ("TERN_TEST_TYPE") ? g_getenv ("TERN_TEST_TYPE") : "q8_0";
  mp.n_embd = 128;
  mp.n_layer = 2;
  mp.n_head = 4;
  mp.n_head_kv = 2;
  mp.head_dim = 32;
  mp.n_ff = 384;
  mp.n_threads = 1;
  CHECKF (tn_mkmodel (&mp, model, &err) == TN_OK, "%s", err.message);

  g_signal_connect (w, "model-loaded", G_CALLBACK (on_loaded), &p);
  g_signal_connect (w, "pinned", G_CALLBACK (on_pinned), &p);
  g_signal_connect (w, "update", G_CALLBACK (on_update), &p);
  g_signal_connect (w, "finished", G_CALLBACK (on_finished), &p);
  tern_engine_worker_set_session_size (w, 1024, 1);

  /* A file that is not a model: an error that names it. */
  id = tern_engine_worker_load_model (w, "/nonexistent/model.gguf");
  CHECK (wait_id (&p.loaded_id, id, 30));
  CHECKF (p.load_error != NULL && strstr (p.load_error, "/nonexistent/model.gguf"), "%s",
          p.load_error);

  id = tern_engine_worker_load_model (w, model);
  CHECK (wait_id (&p.loaded_id, id, 30));
  CHECKF (p.load_error == NULL, "%s", p.load_error);
  /* A made-up model outside the store suggests no sampling. */
  CHECK (!tern_sampling_is_set (tern_engine_worker_get_suggested_sampling (w)));
  id = tern_engine_worker_pin (w, "You are a test.");
  CHECK (wait_id (&p.pinned_id, id, 30));
  CHECKF (p.pin.n_pin > 0, "n_pin %d", p.pin.n_pin);

  /* Tokens arrive coalesced, in order, and all before "finished": with the
   * main loop busy elsewhere while the whole answer is generated, the engine
   * thread leaves one pending update (holding every token), not one per
   * token. */
  p.want_id = id = tern_engine_worker_ask (w, "Hello there", &gen);
  g_usleep (3 * G_USEC_PER_SEC);
  CHECK (wait_id (&p.finished_id, id, 60));
  CHECKF (p.error == NULL, "%s", p.error);
  CHECK (p.final.generated_tokens > 1);
  CHECKF (p.n_updates >= 1 && p.n_updates <= 2,
          "%u updates for %d tokens", p.n_updates, p.final.generated_tokens);
  CHECK (!p.finished_before_update);
  fprintf (stderr, "worker: %d tokens in %u main-loop updates (%.1f tok/s)\n",
           p.final.generated_tokens, p.n_updates, p.final.decode_tok_s);
  answer = g_strdup (p.text->str);

  /* A request cancelled before it starts, then one after it: the first
   * finishes cancelled without running, the second runs normally and gives
   * the same answer (nothing leaked from the first). */
  g_string_truncate (p.text, 0);
  first = tern_engine_worker_ask (w, "Hello there", &gen);
  tern_engine_worker_cancel (w);
  second = tern_engine_worker_ask (w, "Hello there", &gen);
  CHECK (first < 64 && second < 64);
  {
    gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
    while (!(p.done[first] && p.done[second]) && g_get_monotonic_time () < end)
      g_main_context_iteration (NULL, FALSE) || (g_usleep (1000), TRUE);
  }
  CHECK (p.done[first] && p.cancelled_of[first]);
  CHECK (p.text_of[first] == NULL || p.text_of[first]->len == 0);
  CHECK (p.done[second] && !p.cancelled_of[second]);
  CHECKF (p.text_of[second] != NULL && g_str_equal (p.text_of[second]->str, answer),
          "\n  %s\n  %s", p.text_of[second] ? p.text_of[second]->str : "(none)", answer);

  /* Seeds: 0 draws a new seed for every answer, so Regenerate samples
   * anew; any other seed gives the same answer again. */
  {
    TernGenSettings hot = { .temperature = 1.5, .top_p = 1, .max_tokens = 32 };
    char *sampled[4] = { NULL };

    for (int i = 0; i < 4; i++)
      {
        hot.seed = i < 2 ? 0 : 7;
        g_string_truncate (p.text, 0);
        p.want_id = id = tern_engine_worker_ask (w, "Hello there", &hot);
        CHECK (wait_id (&p.finished_id, id, 60));
        sampled[i] = g_strdup (p.text->str);
      }
    CHECKF (!g_str_equal (sampled[0], sampled[1]), "seed 0 twice: \"%s\"", sampled[0]);
    CHECKF (sampled[2][0] && g_str_equal (sampled[2], sampled[3]), "seed 7: \"%s\" \"%s\"",
            sampled[2], sampled[3]);
    for (int i = 0; i < 4; i++)
      g_free (sampled[i]);
  }

  /* Deterministic: hot sampling with a fresh seed each time still gives
   * the greedy answer, every time. */
  {
    TernGenSettings greedy = { .temperature = 0, .top_p = 1, .seed = 1, .max_tokens = 32 };
    TernGenSettings hot = { .temperature = 1.5, .top_p = 1, .seed = 0, .max_tokens = 32,
                            .deterministic = TRUE, .model_sampling = TRUE };
    char *got[3] = { NULL };

    for (int i = 0; i < 3; i++)
      {
        g_string_truncate (p.text, 0);
        p.want_id = id = tern_engine_worker_ask (w, "Hello there", i == 0 ? &greedy : &hot);
        CHECK (wait_id (&p.finished_id, id, 60));
        got[i] = g_strdup (p.text->str);
      }
    CHECKF (got[0][0] && g_str_equal (got[0], got[1]) && g_str_equal (got[1], got[2]),
            "greedy \"%s\", deterministic \"%s\", \"%s\"", got[0], got[1], got[2]);
    for (int i = 0; i < 3; i++)
      g_free (got[i]);
  }

  /* The same file where the store keeps Qwen3 0.6B: the shipped catalog's
   * sampling for it (data/catalog/models.json) is what the model suggests. */
  {
    g_autofree char *pkg = g_build_filename (dir, "packages", "qwen3-0.6b-q8_0", NULL);
    g_autofree char *stored = g_build_filename (pkg, "Qwen3-0.6B-Q8_0.gguf", NULL);
    const TernSampling *s;

    CHECK (g_mkdir_with_parents (pkg, 0755) == 0 && symlink (model, stored) == 0);
    id = tern_engine_worker_load_model (w, stored);
    CHECK (wait_id (&p.loaded_id, id, 30));
    CHECKF (p.load_error == NULL, "%s", p.load_error);
    s = tern_engine_worker_get_suggested_sampling (w);
#ifdef TERN_HAVE_MANAGER
    CHECKF (fabs (s->temperature - 0.6) < 1e-9 && fabs (s->top_p - 0.95) < 1e-9 && s->top_k == 20
            && s->min_p == 0, "%g %g %d %g", s->temperature, s->top_p, s->top_k, s->min_p);
#else
    CHECK (!tern_sampling_is_set (s));
#endif
  }

  for (guint i = 0; i < 64; i++)
    if (p.text_of[i] != NULL)
      g_string_free (p.text_of[i], TRUE);
  g_string_free (p.text, TRUE);
  g_free (p.error);
  g_free (p.load_error);
  /* Disposing the worker joins its thread; events still queued are dropped. */
  g_signal_handlers_disconnect_by_data (w, &p);
}

/* The automatic context and the turns that fit (app/tern-context.c). */
static void
test_context (void)
{
  const guint64 gib = 1024ull * 1024 * 1024;
  /* Llama 3.2 1B: 16 layers, 8 KV heads of 64, bf16 keys and values. */
  const guint64 kv_1b = 16 * 8 * 64 * 2 * 2;
  const char *roles[] = { "user", "assistant", "user", "assistant", "user" };
  const int tokens[] = { 100, 300, 100, 300, 50 };

  CHECK (tern_context_auto (131072, kv_1b, 24 * gib) == TERN_CONTEXT_AUTO_MAX);
  CHECK (tern_context_auto (8192, kv_1b, 24 * gib) == 8192);
  CHECK (tern_context_auto (0, kv_1b, 24 * gib) == TERN_CONTEXT_AUTO_MAX);
  /* 2 GiB of memory: a 256 MiB cache holds 8192 rows of 32 KiB. */
  CHECKF (tern_context_auto (131072, kv_1b, 2 * gib) == 8192, "%d",
          tern_context_auto (131072, kv_1b, 2 * gib));
  CHECK (tern_context_auto (131072, kv_1b, 1 * gib) == 4096);
  CHECK (tern_context_auto (131072, kv_1b, 1024 * 1024) == 512);  /* the floor */
  CHECK (tern_context_auto (300, kv_1b, 24 * gib) == 300);       /* a tiny model */
  CHECK (tern_context_auto (131072, 0, 0) == TERN_CONTEXT_AUTO_MAX);
  CHECK (tern_context_auto (10000, kv_1b, 24 * gib) % 256 == 0);

  /* Everything fits: 850 + 50 + 100 <= 1024. */
  CHECK (tern_context_first_kept (tokens, roles, 5, 50, 1024, 100) == 0);
  /* One turn must go (850 + 50 + 200 > 1024; 450 + 250 fits). */
  CHECK (tern_context_first_kept (tokens, roles, 5, 50, 1024, 200) == 2);
  /* Two turns: only the last message is left. */
  CHECK (tern_context_first_kept (tokens, roles, 5, 50, 600, 400) == 4);
  /* Never past the last user message, even when it alone does not fit. */
  CHECK (tern_context_first_kept (tokens, roles, 5, 50, 10, 400) == 4);
  CHECK (tern_context_first_kept (tokens, roles, 0, 50, 10, 400) == 0);
  /* Once turns must go, down to three quarters of the context, so that the
   * next turns fit and reuse the cache: seven messages of 100, 50 fixed,
   * 100 reserved (850) in 800 leave out two turns (450 <= 600), not one
   * (650, which the next turn would overflow again). Fitting exactly, none. */
  {
    const char *many_roles[] = { "user", "assistant", "user", "assistant", "user", "assistant", "user" };
    const int many_tokens[] = { 100, 100, 100, 100, 100, 100, 100 };

    CHECKF (tern_context_first_kept (many_tokens, many_roles, 7, 50, 800, 100) == 4, "%u",
            tern_context_first_kept (many_tokens, many_roles, 7, 50, 800, 100));
    CHECK (tern_context_first_kept (many_tokens, many_roles, 7, 50, 850, 100) == 0);
  }

  /* /proc/meminfo, and garbage in its place. */
  {
    const char *meminfo = "MemTotal:       16318480 kB\nMemFree:  1 kB\nMemAvailable:    8000000 kB\n";
    const char *bad[] = { "", "MemAvailable:", "MemAvailable: -5 kB\n", "MemAvailable: 12 MB\n",
                          "MemAvailable: 99999999999999999999999 kB\n", "MemAvailableX: 5 kB\n",
                          "MemAvailable: 18446744073709551615 kB\n", "\n\n\n:::", "MemAvailable: kB" };

    CHECK (tern_context_parse_meminfo (meminfo, "MemAvailable") == 8000000ull * 1024);
    CHECK (tern_context_parse_meminfo (meminfo, "MemTotal") == 16318480ull * 1024);
    CHECK (tern_context_parse_meminfo (meminfo, "SwapTotal") == 0);
    for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
      CHECKF (tern_context_parse_meminfo (bad[i], "MemAvailable") == 0, "%s", bad[i]);
  }

  /* The memory hint: 800 MB of file plus 16384 rows of 32 KiB (512 MiB). */
  {
    guint64 need = 0;
    int n_ctx = -1;

    CHECK (tern_context_fit (800000000, 131072, kv_1b, 24 * gib, 8 * gib, &need, &n_ctx) == TERN_CONTEXT_FIT_YES);
    CHECK (n_ctx == TERN_CONTEXT_AUTO_MAX);
    CHECK (need == 800000000 + (guint64) TERN_CONTEXT_AUTO_MAX * kv_1b);
    CHECK (tern_context_fit (800000000, 131072, kv_1b, 24 * gib, need, NULL, NULL) == TERN_CONTEXT_FIT_TIGHT);
    CHECK (tern_context_fit (800000000, 131072, kv_1b, 24 * gib, need - 1, NULL, NULL) == TERN_CONTEXT_FIT_NO);
    /* No KV figure: the file alone, no context. */
    CHECK (tern_context_fit (800000000, 131072, 0, 24 * gib, gib, &need, &n_ctx) == TERN_CONTEXT_FIT_YES);
    CHECK (need == 800000000 && n_ctx == 0);
    CHECK (tern_context_fit (800000000, 131072, kv_1b, 24 * gib, 0, NULL, NULL) == TERN_CONTEXT_FIT_UNKNOWN);
    CHECK (tern_context_fit (0, 131072, kv_1b, 24 * gib, gib, NULL, NULL) == TERN_CONTEXT_FIT_UNKNOWN);
  }
}

/* A GGUF with the given general.sampling.* keys (NULL value: absent;
 * "s:" prefix: written as a string, garbage). */
static const tn_gguf *
sampling_gguf (const char  *dir,
               const char  *name,
               const char  *temp,
               const char  *top_k,
               tn_gguf    **out)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  tn_gguf_writer *w = tn_gguf_writer_new ();
  tn_error err = { 0 };

  *out = NULL;
  tn_gguf_writer_set_str (w, "general.architecture", "llama");
  if (temp != NULL && g_str_has_prefix (temp, "s:"))
    tn_gguf_writer_set_str (w, "general.sampling.temp", temp + 2);
  else if (temp != NULL)
    tn_gguf_writer_set_f32 (w, "general.sampling.temp", (float) g_ascii_strtod (temp, NULL));
  if (top_k != NULL)
    tn_gguf_writer_set_i32 (w, "general.sampling.top_k", (int32_t) g_ascii_strtoll (top_k, NULL, 10));
  tn_gguf_writer_set_f32 (w, "general.sampling.top_p", 0.95f);
  if (tn_gguf_writer_write (w, path, &err) != TN_OK || tn_gguf_open (path, out, &err) != TN_OK)
    fprintf (stderr, "%s: %s\n", path, err.message);
  tn_gguf_writer_free (w);
  return *out;
}

/* The model's suggested sampling (GGUF keys, catalog entry) and the
 * Deterministic switch (app/tern-sampling.c). */
static void
test_sampling (const char *dir)
{
  TernSampling s, r;
  tn_gguf *g = NULL;

  /* Garbage values are not taken. */
  tern_sampling_clear (&s);
  CHECK (!tern_sampling_is_set (&s));
  CHECK (!tern_sampling_set (&s, "temperature", NAN));
  CHECK (!tern_sampling_set (&s, "temperature", -0.5));
  CHECK (!tern_sampling_set (&s, "temperature", 1e9));
  CHECK (!tern_sampling_set (&s, "top_p", 0));
  CHECK (!tern_sampling_set (&s, "top_p", 1.5));
  CHECK (!tern_sampling_set (&s, "top_k", 2.5));
  CHECK (!tern_sampling_set (&s, "min_p", INFINITY));
  CHECK (!tern_sampling_set (&s, "typical_p", 0.5));
  CHECK (!tern_sampling_is_set (&s));

  /* From the file: temp 0.6, top_p 0.95, top_k 20. */
  if (sampling_gguf (dir, "s1.gguf", "0.6", "20", &g) != NULL)
    {
      CHECK (tern_sampling_from_gguf (g, &s));
      CHECKF (fabs (s.temperature - 0.6) < 1e-6 && fabs (s.top_p - 0.95) < 1e-6 && s.top_k == 20
              && s.min_p < 0, "%g %g %d %g", s.temperature, s.top_p, s.top_k, s.min_p);
      tn_gguf_close (g);
    }
  else
    CHECK (FALSE);
  /* A string where a number belongs, a negative top_k: skipped, the rest kept. */
  if (sampling_gguf (dir, "s2.gguf", "s:hot", "-3", &g) != NULL)
    {
      CHECK (tern_sampling_from_gguf (g, &s));
      CHECK (s.temperature < 0 && s.top_k < 0 && fabs (s.top_p - 0.95) < 1e-6);
      tn_gguf_close (g);
    }
  else
    CHECK (FALSE);
  CHECK (!tern_sampling_from_gguf (NULL, &s));

  /* What a request uses. */
  tern_sampling_clear (&s);
  tern_sampling_set (&s, "temperature", 0.6);
  tern_sampling_set (&s, "top_k", 20);
  tern_sampling_resolve (FALSE, TRUE, &s, 0.8, 0.9, &r);
  CHECK (r.temperature == 0.6 && r.top_p == 0.9 && r.top_k == 20 && r.min_p == 0);
  tern_sampling_resolve (FALSE, FALSE, &s, 0.8, 0.9, &r);
  CHECK (r.temperature == 0.8 && r.top_p == 0.9 && r.top_k == 0 && r.min_p == 0);
  /* Deterministic: greedy, whatever the model or Preferences say. */
  tern_sampling_resolve (TRUE, TRUE, &s, 0.8, 0.9, &r);
  CHECK (r.temperature == 0 && r.top_p == 1 && r.top_k == 0 && r.min_p == 0);
  tern_sampling_resolve (TRUE, FALSE, NULL, 1.5, 0.5, &r);
  CHECK (r.temperature == 0 && r.top_p == 1);
  /* Nothing suggested: Preferences' values (greedy by default). */
  tern_sampling_clear (&s);
  tern_sampling_resolve (FALSE, TRUE, &s, 0, 1, &r);
  CHECK (r.temperature == 0 && r.top_p == 1 && r.top_k == 0);

#ifdef TERN_HAVE_MANAGER
  /* The catalog's "sampling", and garbage in it. */
  {
    static const char head[] =
      "{\"schema\": 1, \"packages\": {\"p\": {\"files\": [{\"name\": \"m.gguf\", "
      "\"url\": \"http://127.0.0.1:9/m.gguf\", \"size\": 4}]}}, \"families\": [{\"id\": \"f\", "
      "\"label\": \"F\", \"tags\": [{\"tag\": \"f:a\", \"label\": \"A\", \"base\": \"p\"%s}]}]}";
    struct { const char *sampling, *says; } bad[] = {
      { ", \"sampling\": \"hot\"", "must be an object" },
      { ", \"sampling\": {\"temp\": 1}", "unknown field 'temp'" },
      { ", \"sampling\": {\"temperature\": \"hot\"}", "must be a number" },
      { ", \"sampling\": {\"temperature\": -1}", "'temperature' is -1" },
      { ", \"sampling\": {\"top_p\": 0}", "must be above 0" },
      { ", \"sampling\": {\"top_p\": 1.5}", "'top_p' is 1.5" },
      { ", \"sampling\": {\"top_k\": 2.5}", "must be an integer" },
      { ", \"sampling\": {\"min_p\": [0]}", "must be a number" },
    };
    g_autofree char *good = g_strdup_printf (head, ", \"sampling\": {\"temperature\": 0.7, \"top_k\": 40}");
    g_autoptr(GError) error = NULL;
    g_autoptr(TernCatalog) catalog = tern_catalog_new_from_data (good, -1, "c.json", &error);
    const TernCatalogTag *tag;

    CHECKF (catalog != NULL, "%s", error ? error->message : "");
    if (catalog != NULL)
      {
        tag = tern_catalog_find_tag_for_file (catalog, "/store/packages/p/m.gguf");
        CHECK (tag != NULL && g_str_equal (tag->tag, "f:a"));
        CHECK (tag != NULL && tag->sampling.temperature == 0.7 && tag->sampling.top_k == 40
               && tag->sampling.top_p < 0 && tag->sampling.min_p < 0);
        CHECK (tern_catalog_find_tag_for_file (catalog, "/elsewhere/m.gguf") == NULL);
        CHECK (tern_catalog_find_tag_for_file (catalog, "m.gguf") == NULL);
        CHECK (tern_catalog_find_tag_for_file (catalog, "") == NULL);
      }
    /* The previous commit's per-package KV figure, fed garbage too. */
    {
      const char *kv[] = { "\"big\"", "0", "-5", "1.5", "[1]" };

      for (guint i = 0; i < G_N_ELEMENTS (kv); i++)
        {
          g_autofree char *json = g_strdup_printf ("{\"schema\": 1, \"packages\": {\"p\": {\"kv_bytes_per_token\": %s, "
                                                   "\"files\": [{\"name\": \"m.gguf\", \"url\": \"http://127.0.0.1:9/m.gguf\"}]}}, "
                                                   "\"families\": []}", kv[i]);
          g_autoptr(TernCatalog) c = NULL;

          g_clear_error (&error);
          c = tern_catalog_new_from_data (json, -1, "c.json", &error);
          CHECKF (c == NULL && error != NULL && strstr (error->message, "kv_bytes_per_token") != NULL,
                  "%s: %s", kv[i], error ? error->message : "(loaded)");
        }
    }
    for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
      {
        g_autofree char *json = g_strdup_printf (head, bad[i].sampling);
        g_autoptr(TernCatalog) c = NULL;

        g_clear_error (&error);
        c = tern_catalog_new_from_data (json, -1, "c.json", &error);
        CHECKF (c == NULL && error != NULL && strstr (error->message, bad[i].says) != NULL
                && strstr (error->message, "sampling") != NULL,
                "%s: %s", bad[i].sampling, error ? error->message : "(loaded)");
      }
  }
#endif
}

#ifdef TERN_HAVE_MANAGER
/* A download row's words. A server that breaks the connection after a few
 * bytes, retried, made a rate of a byte or so a second: the row said
 * "0% of 50.0 MB · 1 bytes/s · 581222:16 left" (a daily walk). */
static void
test_download_words (void)
{
  const double total = 50e6;
  TernDownloadProgress broken = { .done = 4, .total = (guint64) total, .rate = 1,
                                  .eta = (total - 4) / 1 };
  TernDownloadProgress going = { .done = 10000000, .total = (guint64) total, .rate = 5e6,
                                 .eta = (total - 10000000) / 5e6 };
  g_autofree char *slow = _tern_model_manager_progress_text (&broken);
  g_autofree char *fine = _tern_model_manager_progress_text (&going);

  CHECKF (slow != NULL && strstr (slow, " left") == NULL && strstr (slow, "0%") != NULL,
          "a crawl: %s", slow);
  CHECKF (fine != NULL && strstr (fine, " left") != NULL, "a download going: %s", fine);

  /* A time left over an hour is said in hours and minutes: the row said
   * "5940:00 left" for 99 hours, read as minutes and seconds. */
  static const struct { int hours, minutes, seconds; } longs[] = { { 1, 5, 30 }, { 99, 0, 0 }, { 12, 59, 59 } };
  for (gsize i = 0; i < G_N_ELEMENTS (longs); i++)
    {
      double eta = longs[i].hours * 3600.0 + longs[i].minutes * 60.0 + longs[i].seconds;
      TernDownloadProgress p = { .done = 1000, .total = (guint64) total, .rate = (total - 1000) / eta, .eta = eta };
      g_autofree char *text = _tern_model_manager_progress_text (&p);
      g_autofree char *want = g_strdup_printf ("%d h %02d min left", longs[i].hours, longs[i].minutes);
      g_autofree char *as_minutes = g_strdup_printf ("%d:%02d", (int) (eta / 60), (int) eta % 60);

      CHECKF (text != NULL && strstr (text, want) != NULL && strstr (text, as_minutes) == NULL,
              "%.0f s left: %s", eta, text);
    }
  /* Under an hour the minutes and seconds stay. */
  {
    TernDownloadProgress p = { .done = 1000, .total = (guint64) total, .rate = 1e5, .eta = 59 * 60 + 58 };
    g_autofree char *text = _tern_model_manager_progress_text (&p);
    CHECKF (text != NULL && strstr (text, "59:58 left") != NULL, "under an hour: %s", text);
  }
}
#endif

#ifdef TERN_HAVE_MANAGER
/* Adding a server is all or nothing. Its password was put in the keyring,
 * then its API key could not be, and the address was not added: the
 * password stayed in the keyring, for an address the user never saw added
 * (a daily walk). A password the address had before stays as it was. */
static void
test_connection_add_whole (void)
{
  g_autoptr(GSettings) settings = tern_settings_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *base = NULL;
  g_auto(GStrv) before = NULL;

  _tern_connections_use_test_keyring ();
  /* Where the stand-in keeps the password: learnt from an Add that works. */
  CHECK (tern_connections_add (settings, "http://alice:first@127.0.0.1:9", NULL, &base, &error));
  CHECKF (base != NULL && strstr (base, "first") == NULL, "added as %s", base);
  if (base == NULL)
    return;
  tern_connections_remove (settings, base);
  before = g_settings_get_strv (settings, "remote-connections");

  _tern_connections_test_keyring_refuse_keys (TRUE);
  for (int had = 0; had < 2; had++)
    {
      g_autofree char *normalised = NULL;
      g_autofree char *full = NULL;
      g_auto(GStrv) after = NULL;

      if (had)
        {
          _tern_connections_test_keyring_refuse_keys (FALSE);
          CHECK (tern_connections_add (settings, "http://alice:first@127.0.0.1:9", NULL, NULL, &error));
          _tern_connections_test_keyring_refuse_keys (TRUE);
          g_strfreev (before);
          before = g_settings_get_strv (settings, "remote-connections");
        }
      CHECK (!tern_connections_add (settings, "http://alice:second@127.0.0.1:9", "a key", &normalised,
                                    &error));
      CHECK (error != NULL && normalised == NULL);
      g_clear_error (&error);
      after = g_settings_get_strv (settings, "remote-connections");
      CHECK (g_strv_equal ((const char * const *) before, (const char * const *) after));
      full = tern_connections_get_url (base);
      CHECKF (strstr (full, "second") == NULL, "a failed Add left its password: %s", full);
      CHECKF ((strstr (full, "first") != NULL) == had, "the password before it: %s", full);
    }
  _tern_connections_test_keyring_refuse_keys (FALSE);
  tern_connections_remove (settings, base);
}
#endif

/* Taking the messages of a long chat from near its start (a message
 * edited, its answers taken back) and putting them back moves each message
 * a bounded number of times: they were moved one at a time from the
 * front of the array, every move shifting all those after it (quadratic
 * in the number taken). Counted in moves (tern_chat_move_work), not timed. */
static void
test_chat_take_work (void)
{
  const guint n = 200000;
  g_autoptr(TernChat) chat = tern_chat_new ("chat");
  g_autoptr(GPtrArray) taken = NULL;
  guint64 took, put;

  for (guint i = 0; i < n; i++)
    tern_chat_append (chat, i % 2 ? "assistant" : "user", i % 2 ? "an answer" : "a question");
  tern_chat_move_work = 0;
  taken = tern_chat_take_from (chat, 1);
  took = tern_chat_move_work;
  CHECK (taken->len == n - 1 && tern_chat_get_n_messages (chat) == 1);
  CHECK (g_strcmp0 (((TernMessage *) taken->pdata[0])->role, "assistant") == 0);
  tern_chat_move_work = 0;
  tern_chat_restore (chat, taken);
  put = tern_chat_move_work;
  CHECK (taken->len == 0 && tern_chat_get_n_messages (chat) == n);
  for (guint i = 0; i < n; i += n / 10)
    CHECKF (g_strcmp0 (tern_chat_get_message (chat, i)->role, i % 2 ? "assistant" : "user") == 0,
            "message %u is out of place", i);
  CHECKF (took <= 2 * (guint64) n && put <= 2 * (guint64) n,
          "%u messages moved %" G_GUINT64_FORMAT " times to take, %" G_GUINT64_FORMAT " to put back",
          n - 1, took, put);
}

/* Opening a chat works out its title a bounded number of times. The load
 * appended each message as the app does, and every append worked the
 * title out again: from the first message, copied whole (a first message
 * of 30 MB and many short answers after it never opened), and past every
 * message before the first one with words, when that first one is blank
 * (quadratic in the number of messages). Counted in messages and bytes
 * looked at (tern_chat_title_work), not timed. */
static void
test_chat_title_work (const char *dir)
{
  const guint n = 2000;
  const gsize first_len = 256 * 1024;
  g_autofree char *path = g_build_filename (dir, "title-work.json", NULL);

  g_mkdir_with_parents (dir, 0700);
  for (int blank = 0; blank < 2; blank++)
    {
      g_autoptr(GString) json = g_string_new ("{\"format\": \"tern-chat\", \"version\": 1, "
                                              "\"id\": \"title-work\", \"messages\": [");
      g_autofree char *first = g_malloc (first_len + 1);
      g_autofree char *want = NULL;
      g_autoptr(TernChat) chat = NULL;
      g_autoptr(GError) error = NULL;

      /* blank: spaces, which give no title; else one long word, cut */
      memset (first, blank ? ' ' : 'w', first_len);
      first[first_len] = '\0';
      g_string_append_printf (json, "{\"role\": \"user\", \"content\": \"%s\"}", first);
      for (guint i = 0; i < n; i++)
        g_string_append (json, ", {\"role\": \"assistant\", \"content\": \"\"}");
      g_string_append (json, "]}");
      CHECK (g_file_set_contents (path, json->str, (gssize) json->len, NULL));

      tern_chat_title_work = 0;
      chat = tern_chat_load (path, &error);
      CHECKF (chat != NULL, "%s", error ? error->message : "");
      if (chat == NULL)
        continue;
      CHECK (tern_chat_get_n_messages (chat) == n + 1);
      want = blank ? g_strdup ("New Chat") : g_strdup_printf ("%.47s…", first);
      CHECKF (g_str_equal (tern_chat_get_title (chat), want), "title %s", tern_chat_get_title (chat));
      CHECKF (tern_chat_title_work <= 4 * (first_len + n + 1),
              "%s first message: the title looked at %" G_GUINT64_FORMAT " messages and bytes "
              "for a chat of %u messages and %zu bytes", blank ? "blank" : "long",
              tern_chat_title_work, n + 1, first_len);
    }
  g_unlink (path);
}

/* Appending works the title out from a bounded number of messages. With
 * every user message empty (prompts of pictures alone, or blanks), each
 * append walked all the messages before it for one with words: a long
 * chat of them grew quadratic in its length. Counted in messages and
 * bytes looked at (tern_chat_title_work), not timed. */
static void
test_chat_append_title_work (void)
{
  const guint n = 4000;
  g_autoptr(TernChat) chat = tern_chat_new ("chat");

  tern_chat_title_work = 0;
  for (guint i = 0; i < n; i++)
    tern_chat_append (chat, i % 2 ? "assistant" : "user", i % 4 == 0 ? "" : i % 2 ? "an answer" : "  ");
  CHECKF (g_str_equal (tern_chat_get_title (chat), "New Chat"), "title %s", tern_chat_get_title (chat));
  CHECKF (tern_chat_title_work <= 8 * (guint64) n,
          "%u appends of empty prompts and answers: the title looked at %" G_GUINT64_FORMAT
          " messages and bytes", n, tern_chat_title_work);
  /* Words at last: they are the title, and taking them back gives the
   * chat its old one. */
  tern_chat_append (chat, "user", "Words at last");
  CHECKF (g_str_equal (tern_chat_get_title (chat), "Words at last"), "title %s",
          tern_chat_get_title (chat));
  tern_chat_append (chat, "user", "Later words");
  CHECKF (g_str_equal (tern_chat_get_title (chat), "Words at last"), "title %s",
          tern_chat_get_title (chat));
  tern_chat_truncate (chat, n);
  CHECKF (g_str_equal (tern_chat_get_title (chat), "New Chat"), "title after truncate %s",
          tern_chat_get_title (chat));
  tern_chat_truncate (chat, 1);
  tern_chat_append (chat, "user", "Fresh start");
  CHECKF (g_str_equal (tern_chat_get_title (chat), "Fresh start"), "title %s",
          tern_chat_get_title (chat));
  {
    g_autoptr(GPtrArray) taken = tern_chat_take_from (chat, 1);

    CHECKF (g_str_equal (tern_chat_get_title (chat), "New Chat"), "title after take %s",
            tern_chat_get_title (chat));
    tern_chat_restore (chat, taken);
    CHECKF (g_str_equal (tern_chat_get_title (chat), "Fresh start"), "title after restore %s",
            tern_chat_get_title (chat));
  }
}

int
main (void)
{
  g_autofree char *tmp = g_dir_make_tmp ("tern-app-units-XXXXXX", NULL);
  g_autofree char *chats = g_build_filename (tmp, "chats", NULL);
  g_autofree char *cmd = NULL;

  setlocale (LC_ALL, "C.UTF-8");
  g_setenv ("XDG_CACHE_HOME", tmp, TRUE);
  /* The trash of the chats moved there (tern_chat_trash_newer_file). */
  g_setenv ("XDG_DATA_HOME", tmp, TRUE);
  test_markdown ();
  test_markdown_tint ();
  test_chat_json (chats);
  test_chat_images (chats);
  test_chat_save_fails_keeps_images (chats);
  test_chat_not_files (chats);
  test_chat_save_report (tmp);
  test_chat_copies (chats);
  test_chat_version (chats);
  test_chat_too_large (chats);
  test_chat_many_messages (chats);
  test_chat_title_work (chats);
  test_chat_take_work ();
  test_chat_append_title_work ();
  {
    g_autofree char *newer = g_build_filename (tmp, "newer-on-disk", NULL);
    test_chat_newer_on_disk (newer);
  }
  {
    g_autofree char *heads = g_build_filename (tmp, "strict-head", NULL);
    test_chat_strict_head (heads);
  }
  {
    g_autofree char *newer = g_build_filename (tmp, "newer-listed", NULL);
    test_chat_newer_listed (newer);
  }
  {
    g_autofree char *unread = g_build_filename (tmp, "listed-unread", NULL);
    test_chat_listed_unread (unread);
  }
  {
    g_autofree char *left = g_build_filename (tmp, "left-out", NULL);
    test_chat_left_out (left);
  }
  test_plot_scale ();
#ifdef TERN_HAVE_MANAGER
  test_download_words ();
  test_connection_add_whole ();
#endif
  test_context ();
  test_sampling (tmp);
  test_events ();
  test_overflow_stats ();
  test_worker (tmp);

  cmd = g_strdup_printf ("rm -rf '%s'", tmp);
  if (system (cmd) != 0)
    fprintf (stderr, "could not remove %s\n", tmp);
  return tn_test_finish ("test-app-units");
}
