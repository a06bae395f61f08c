/* bench-chat-memory: what a chat of many small messages costs in memory
 * once read (tern_chat_load), and at the peak of reading it: the figures
 * of docs/APP.md, "A chat's memory". Not a test: it prints figures and
 * judges nothing.
 *
 * usage: bench-chat-memory [N...]   (default: 100000 1000000)
 *
 * For each N, a chat file of N messages of two bytes of text each, user
 * and assistant in turn, is written and read. "kept" is the heap still
 * allocated once it is read (the chat as the app holds it), per message;
 * "peak" is the rise of the process's peak resident memory while it was
 * read (the whole file, json-glib's tree and the chat), per message.
 * Under AddressSanitizer the heap is its allocator's count of the bytes
 * asked for (no redzones); the resident figures then include its shadow
 * memory and quarantine, so compare peaks within one kind of build. */
#include "config.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include <glib/gstdio.h>

#include "tern-chat.h"

#if defined(__SANITIZE_ADDRESS__)
/* sanitizer/allocator_interface.h's, which Debian's gcc does not ship. */
extern size_t __sanitizer_get_current_allocated_bytes (void);
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static guint64
heap_in_use (void)
{
#if SANITIZED
  return (guint64) __sanitizer_get_current_allocated_bytes ();
#else
  struct mallinfo2 mi = mallinfo2 ();

  return (guint64) mi.uordblks + (guint64) mi.hblkhd;
#endif
}

/* A field of /proc/self/status, in bytes (0 when it cannot be read). */
static guint64
status_bytes (const char *field)
{
  g_autofree char *status = NULL;
  const char *at;

  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL)
      || (at = strstr (status, field)) == NULL)
    return 0;
  return g_ascii_strtoull (at + strlen (field), NULL, 10) * 1024;
}

/* Sets the peak resident memory (VmHWM) back to the present. */
static void
reset_peak (void)
{
  FILE *f = fopen ("/proc/self/clear_refs", "w");

  if (f != NULL)
    {
      fputs ("5", f);
      fclose (f);
    }
}

static gboolean
measure (const char *dir,
         guint       n)
{
  g_autofree char *path = g_build_filename (dir, "bench.json", NULL);
  g_autoptr(GError) error = NULL;
  TernChat *chat;
  guint64 heap0, heap1, rss0, peak, rss1, file_size;

  {
    GString *json = g_string_new ("{\"format\":\"tern-chat\",\"version\":1,\"id\":\"bench\","
                                  "\"mode\":\"chat\",\"created\":1,\"updated\":1,\"messages\":[");

    for (guint i = 0; i < n; i++)
      g_string_append_printf (json, "%s{\"role\":\"%s\",\"content\":\"ok\"}", i ? "," : "",
                              i % 2 ? "assistant" : "user");
    g_string_append (json, "]}");
    file_size = json->len;
    if (!g_file_set_contents (path, json->str, (gssize) json->len, &error))
      {
        fprintf (stderr, "%s\n", error->message);
        g_string_free (json, TRUE);
        return FALSE;
      }
    g_string_free (json, TRUE);
  }
  malloc_trim (0);
  heap0 = heap_in_use ();
  rss0 = status_bytes ("VmRSS:");
  reset_peak ();
  chat = tern_chat_load (path, &error);
  peak = status_bytes ("VmHWM:");
  heap1 = heap_in_use ();
  rss1 = status_bytes ("VmRSS:");
  g_unlink (path);
  if (chat == NULL)
    {
      printf ("%u messages (%.1f MB file): not read: %s\n", n, file_size / 1e6, error->message);
      return TRUE;
    }
  printf ("%u messages (%.1f MB file): kept %.0f B/message (%.1f MB), peak RSS +%.1f MB "
          "(%.0f B/message), RSS after +%.1f MB%s\n",
          tern_chat_get_n_messages (chat), file_size / 1e6, (double) (heap1 - heap0) / n,
          (heap1 - heap0) / 1e6, (peak - rss0) / 1e6, (double) (peak - rss0) / n,
          ((double) rss1 - (double) rss0) / 1e6, SANITIZED ? " [AddressSanitizer build]" : "");
  fflush (stdout);
  g_object_unref (chat);
  return TRUE;
}

int
main (int   argc,
      char *argv[])
{
  g_autofree char *dir = g_dir_make_tmp ("tern-bench-chat-XXXXXX", NULL);
  gboolean ok = dir != NULL;

  for (int i = 1; ok && i < argc; i++)
    ok = measure (dir, (guint) g_ascii_strtoull (argv[i], NULL, 10));
  if (ok && argc < 2)
    ok = measure (dir, 100000) && measure (dir, 1000000);
  if (dir != NULL)
    g_rmdir (dir);
  return ok ? 0 : 1;
}
