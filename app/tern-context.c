/* tern-context.c: see tern-context.h. */
#include "tern-context.h"

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
tern_context_physical_memory (void)
{
  long pages = sysconf (_SC_PHYS_PAGES);
  long size = sysconf (_SC_PAGESIZE);

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
  guint last_user = 0;
  guint first = 0;

  for (guint i = 0; i < n; i++)
    {
      total += tokens[i];
      if (g_strcmp0 (roles[i], "user") == 0)
        last_user = i;
    }
  while (total > n_ctx && first < last_user)
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
