/* bench-chat-startup: what reading the chats at startup takes. The window
 * reads every chat in the folder whole (tern_chat_load_listed); this reads
 * a folder of CHATS chats of MESSAGES messages each the same way, ROUNDS
 * times, and prints the fastest and the median round, in CPU time (what
 * the reading costs, whatever else runs on the machine) and wall time:
 * the figures of docs/APP.md, "Chats at startup". Not a test: it prints
 * figures and judges nothing.
 *
 * usage: bench-chat-startup [CHATS [MESSAGES [ROUNDS]]]   (default: 200 1000 5)
 *
 * Each message has 100 bytes of text, user and assistant in turn. The
 * files are written once, before the first round: the rounds read them
 * from the page cache, as a second start does. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <glib/gstdio.h>

#include "tern-chat.h"

static int
by_value (const void *a,
          const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

static gboolean
write_chats (const char *dir,
             guint       n_chats,
             guint       n_messages,
             guint64    *bytes)
{
  *bytes = 0;
  for (guint c = 0; c < n_chats; c++)
    {
      g_autofree char *path = g_strdup_printf ("%s/chat-%04u.json", dir, c);
      g_autoptr(GError) error = NULL;
      GString *json = g_string_new (NULL);

      g_string_append_printf (json,
                              "{\"format\":\"tern-chat\",\"version\":1,\"id\":\"chat-%04u\","
                              "\"mode\":\"chat\",\"created\":1,\"updated\":1,\"messages\":[",
                              c);
      for (guint i = 0; i < n_messages; i++)
        g_string_append_printf (json,
                                "%s{\"role\":\"%s\",\"content\":\"%04u: a sentence of "
                                "text, about as long as a short answer is, {with} [brackets].\"}",
                                i ? "," : "", i % 2 ? "assistant" : "user", i % 10000);
      g_string_append (json, "]}");
      *bytes += json->len;
      if (!g_file_set_contents (path, json->str, (gssize) json->len, &error))
        {
          fprintf (stderr, "%s\n", error->message);
          g_string_free (json, TRUE);
          return FALSE;
        }
      g_string_free (json, TRUE);
    }
  return TRUE;
}

static double
cpu_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One start's reading: every chat, as the window's list reads them. The
 * wall time in *wall_ms; returns the CPU time. */
static double
read_all (const char *dir,
          guint       n_chats,
          guint      *n_read,
          double     *wall_ms)
{
  gint64 t0 = g_get_monotonic_time ();
  double c0 = cpu_ms ();

  *n_read = 0;
  for (guint c = 0; c < n_chats; c++)
    {
      g_autofree char *path = g_strdup_printf ("%s/chat-%04u.json", dir, c);
      g_autoptr(GError) error = NULL;
      TernChatUnread unread;
      TernChat *chat = tern_chat_load_listed (path, g_get_real_time () / G_USEC_PER_SEC, &unread,
                                              &error);

      if (chat != NULL)
        {
          *n_read += 1;
          g_object_unref (chat);
        }
    }
  *wall_ms = (double) (g_get_monotonic_time () - t0) / 1000.0;
  return cpu_ms () - c0;
}

int
main (int   argc,
      char *argv[])
{
  guint n_chats = argc > 1 ? (guint) g_ascii_strtoull (argv[1], NULL, 10) : 200;
  guint n_messages = argc > 2 ? (guint) g_ascii_strtoull (argv[2], NULL, 10) : 1000;
  guint rounds = argc > 3 ? (guint) g_ascii_strtoull (argv[3], NULL, 10) : 5;
  g_autofree char *dir = g_dir_make_tmp ("tern-bench-startup-XXXXXX", NULL);
  g_autofree double *ms = g_new0 (double, MAX (rounds, 1));
  g_autofree double *wall = g_new0 (double, MAX (rounds, 1));
  guint64 bytes = 0;
  guint n_read = 0;
  gboolean ok = dir != NULL && rounds > 0 && write_chats (dir, n_chats, n_messages, &bytes);

  for (guint r = 0; ok && r < rounds; r++)
    ms[r] = read_all (dir, n_chats, &n_read, &wall[r]);
  if (ok)
    {
      qsort (ms, rounds, sizeof *ms, by_value);
      qsort (wall, rounds, sizeof *wall, by_value);
      printf ("%u chats of %u messages (%.1f MB), %u read: CPU fastest %.0f ms, median %.0f ms; "
              "wall fastest %.0f ms, median %.0f ms (%u rounds)%s\n",
              n_chats, n_messages, bytes / 1e6, n_read, ms[0], ms[rounds / 2], wall[0],
              wall[rounds / 2], rounds,
#if defined(__SANITIZE_ADDRESS__)
              " [AddressSanitizer build]"
#else
              ""
#endif
              );
    }
  for (guint c = 0; dir != NULL && c < n_chats; c++)
    {
      g_autofree char *path = g_strdup_printf ("%s/chat-%04u.json", dir, c);

      g_unlink (path);
    }
  if (dir != NULL)
    g_rmdir (dir);
  return ok ? 0 : 1;
}
