/* tern-context.c: see tern-context.h. */
#include "tern-context.h"

#include "tern.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int
tern_context_auto (int     n_ctx_train,
                   guint64 kv_bytes_per_token,
                   guint64 mem_bytes)
{
  guint64 n = TERN_CONTEXT_AUTO_MAX;
  guint64 floor_n = 512;

  if (n_ctx_train > 0 && (guint64) n_ctx_train < n)
    n = (guint64) n_ctx_train;
  if (kv_bytes_per_token > 0 && mem_bytes > 0)
    n = MIN (n, mem_bytes / TERN_CONTEXT_MEMORY_DIVISOR / kv_bytes_per_token);
  n -= n % 256;
  if (n_ctx_train > 0 && (guint64) n_ctx_train < floor_n)
    floor_n = (guint64) n_ctx_train;
  return (int) MAX (n, floor_n);
}

guint64
tern_context_parse_meminfo (const char *text,
                            const char *key)
{
  size_t key_len = strlen (key);

  for (const char *line = text; line != NULL && *line != '\0';)
    {
      const char *end = strchr (line, '\n');

      if (strncmp (line, key, key_len) == 0 && line[key_len] == ':')
        {
          const char *p = line + key_len + 1;
          char *rest = NULL;
          guint64 kib;

          while (*p == ' ' || *p == '\t')
            p++;
          if (!g_ascii_isdigit (*p))
            return 0;
          errno = 0;
          kib = g_ascii_strtoull (p, &rest, 10);
          /* The kernel writes kB; anything else is not a figure to trust. */
          if (errno != 0 || rest == p || kib > G_MAXUINT64 / 1024)
            return 0;
          while (*rest == ' ')
            rest++;
          if (strncmp (rest, "kB", 2) != 0)
            return 0;
          return kib * 1024;
        }
      line = end ? end + 1 : NULL;
    }
  return 0;
}

/* TERN_MEMINFO stands in for /proc/meminfo so that tests can pick the
 * machine's memory. */
static guint64
read_meminfo (const char *key)
{
  const char *path = g_getenv ("TERN_MEMINFO");
  g_autofree char *text = NULL;

  /* tn_read_file reads /proc's files (0 bytes by their size) to their end,
   * and refuses a FIFO or a device named by TERN_MEMINFO instead of
   * blocking the window; 1 MiB is a hundred times /proc/meminfo. */
  if (tn_read_file (path && *path ? path : "/proc/meminfo", 1 << 20, &text, NULL, NULL) != TN_OK)
    return 0;
  return tern_context_parse_meminfo (text, key);
}

guint64
tern_context_available_memory (void)
{
  return read_meminfo ("MemAvailable");
}

TernContextFit
tern_context_fit (guint64  file_bytes,
                  int      n_ctx_train,
                  guint64  kv_bytes_per_token,
                  guint64  physical,
                  guint64  available,
                  guint64 *need,
                  int     *n_ctx)
{
  guint64 total = file_bytes;
  int ctx = 0;

  if (kv_bytes_per_token > 0)
    {
      ctx = tern_context_auto (n_ctx_train, kv_bytes_per_token, physical);
      total += kv_bytes_per_token * (guint64) ctx;
    }
  if (need != NULL)
    *need = total;
  if (n_ctx != NULL)
    *n_ctx = ctx;
  if (file_bytes == 0 || available == 0)
    return TERN_CONTEXT_FIT_UNKNOWN;
  if (total > available)
    return TERN_CONTEXT_FIT_NO;
  if (total > available - available / 4)
    return TERN_CONTEXT_FIT_TIGHT;
  return TERN_CONTEXT_FIT_YES;
}

guint64
tern_context_physical_memory (void)
{
  long pages = sysconf (_SC_PHYS_PAGES);
  long size = sysconf (_SC_PAGESIZE);

  if (g_getenv ("TERN_MEMINFO") != NULL)
    return read_meminfo ("MemTotal");
  return pages > 0 && size > 0 ? (guint64) pages * (guint64) size : 0;
}

guint
tern_context_first_kept (const int          *tokens,
                         const char * const *roles,
                         guint               n,
                         int                 fixed,
                         int                 n_ctx,
                         int                 reserve)
{
  gint64 total = (gint64) fixed + reserve;
  gint64 target = n_ctx;
  guint last_user = 0;
  guint first = 0;

  for (guint i = 0; i < n; i++)
    {
      total += tokens[i];
      if (g_strcmp0 (roles[i], "user") == 0)
        last_user = i;
    }
  /* Once turns must go, a quarter of the context more goes with them: the
   * turns after reuse the cache from the system prompt on, where leaving
   * out just enough made every later turn drop one more and prefill the
   * whole conversation again (a full context's worth, each turn). */
  if (total > n_ctx)
    target = (gint64) n_ctx - n_ctx / 4;
  while (total > target && first < last_user)
    {
      /* Drop the turn at first: its messages up to the next user message. */
      guint next = first + 1;

      while (next < last_user && g_strcmp0 (roles[next], "user") != 0)
        next++;
      for (guint i = first; i < next; i++)
        total -= tokens[i];
      first = next;
    }
  return first;
}
