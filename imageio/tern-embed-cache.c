/* Encoded images kept for reuse: see tern-embed-cache.h. */
#include "tern-embed-cache.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  char *key;
  int budget;
  float *rows; /* [n_tokens][n_embd], malloc'd */
  int n_tokens;
  int n_embd;
} Entry;

struct _TernEmbedCache {
  GMutex lock;
  GQueue entries; /* of Entry, most recently used first */
  guint max_entries;
  gsize max_bytes;
};

static gsize
entry_bytes (const Entry *e)
{
  return (gsize) e->n_tokens * (gsize) e->n_embd * sizeof (float);
}

static void
entry_free (gpointer data)
{
  Entry *e = data;

  g_free (e->key);
  free (e->rows);
  g_free (e);
}

TernEmbedCache *
tern_embed_cache_new (guint max_entries,
                      gsize max_bytes)
{
  TernEmbedCache *cache = g_new0 (TernEmbedCache, 1);

  g_mutex_init (&cache->lock);
  g_queue_init (&cache->entries);
  cache->max_entries = MAX (max_entries, 1);
  cache->max_bytes = max_bytes;
  return cache;
}

void
tern_embed_cache_free (TernEmbedCache *cache)
{
  if (cache == NULL)
    return;
  g_queue_clear_full (&cache->entries, entry_free);
  g_mutex_clear (&cache->lock);
  g_free (cache);
}

/* The link of (key, budget), or NULL. Called with the lock held. */
static GList *
find (TernEmbedCache *cache,
      const char     *key,
      int             budget)
{
  for (GList *l = cache->entries.head; l != NULL; l = l->next)
    {
      const Entry *e = l->data;

      if (e->budget == budget && strcmp (e->key, key) == 0)
        return l;
    }
  return NULL;
}

float *
tern_embed_cache_get (TernEmbedCache *cache,
                      const char     *key,
                      int             budget,
                      int            *n_tokens)
{
  float *rows = NULL;
  GList *l;

  g_return_val_if_fail (cache != NULL && n_tokens != NULL, NULL);
  if (key == NULL)
    return NULL;
  g_mutex_lock (&cache->lock);
  l = find (cache, key, budget);
  if (l != NULL)
    {
      const Entry *e = l->data;

      rows = malloc (entry_bytes (e));
      if (rows != NULL)
        {
          memcpy (rows, e->rows, entry_bytes (e));
          *n_tokens = e->n_tokens;
        }
      g_queue_unlink (&cache->entries, l);
      g_queue_push_head_link (&cache->entries, l);
    }
  g_mutex_unlock (&cache->lock);
  return rows;
}

void
tern_embed_cache_put (TernEmbedCache *cache,
                      const char     *key,
                      int             budget,
                      const float    *rows,
                      int             n_tokens,
                      int             n_embd)
{
  Entry *e;
  gsize total;
  guint kept = 0;
  GList *l;

  g_return_if_fail (cache != NULL);
  if (key == NULL || rows == NULL || n_tokens <= 0 || n_embd <= 0)
    return;
  e = g_new0 (Entry, 1);
  e->budget = budget;
  e->n_tokens = n_tokens;
  e->n_embd = n_embd;
  total = entry_bytes (e);
  if (total > cache->max_bytes || (e->rows = malloc (total)) == NULL)
    {
      g_free (e);
      return;
    }
  memcpy (e->rows, rows, total);
  e->key = g_strdup (key);
  g_mutex_lock (&cache->lock);
  l = find (cache, key, budget);
  if (l != NULL)
    {
      entry_free (l->data);
      g_queue_delete_link (&cache->entries, l);
    }
  g_queue_push_head (&cache->entries, e);
  /* Past the newest, keep entries while both bounds allow. */
  l = cache->entries.head->next;
  kept = 1;
  while (l != NULL)
    {
      GList *next = l->next;
      Entry *o = l->data;

      if (kept < cache->max_entries && total + entry_bytes (o) <= cache->max_bytes)
        {
          total += entry_bytes (o);
          kept++;
        }
      else
        {
          g_queue_delete_link (&cache->entries, l);
          entry_free (o);
        }
      l = next;
    }
  g_mutex_unlock (&cache->lock);
}

void
tern_embed_cache_clear (TernEmbedCache *cache)
{
  g_return_if_fail (cache != NULL);
  g_mutex_lock (&cache->lock);
  g_queue_clear_full (&cache->entries, entry_free);
  g_queue_init (&cache->entries);
  g_mutex_unlock (&cache->lock);
}

guint
tern_embed_cache_size (TernEmbedCache *cache)
{
  guint n;

  g_return_val_if_fail (cache != NULL, 0);
  g_mutex_lock (&cache->lock);
  n = cache->entries.length;
  g_mutex_unlock (&cache->lock);
  return n;
}
