/* tern-image-cache.c: see tern-image-cache.h. */
#include "config.h"

#include "tern-image-cache.h"

/* Enough for the images of a message and of the turns before it (Gemma 4
 * decodes at full size: a 12-megapixel photo is 144 MiB of floats), without
 * holding on to every picture of a long session. */
#define CACHE_MAX_BYTES (512u * 1024u * 1024u)
#define CACHE_MAX_ENTRIES 32u

struct _TernCachedImage {
  TernImage *image;
  /* Of the file's bytes, computed once when decoded: the worker keys the
   * picture's encodings by it, and Chat sends every earlier picture again
   * at each turn. */
  char *sha256;
};

typedef struct {
  GBytes *bytes;
  int fit_side;
  TernCachedImage *image;
  gsize size;
} Entry;

static GMutex cache_lock;
static GQueue cache = G_QUEUE_INIT; /* Entry *, most recently used first */
static gsize cache_bytes;
static guint n_decoded;

static void
cached_image_clear (gpointer data)
{
  TernCachedImage *c = data;

  tern_image_free (c->image);
  g_free (c->sha256);
}

TernCachedImage *
tern_cached_image_ref (TernCachedImage *image)
{
  return g_atomic_rc_box_acquire (image);
}

void
tern_cached_image_unref (TernCachedImage *image)
{
  g_atomic_rc_box_release_full (image, cached_image_clear);
}

const TernImage *
tern_cached_image_get (TernCachedImage *image)
{
  return image->image;
}

const char *
tern_cached_image_get_sha256 (TernCachedImage *image)
{
  return image->sha256;
}

static void
entry_free (Entry *e)
{
  g_bytes_unref (e->bytes);
  tern_cached_image_unref (e->image);
  g_free (e);
}

/* Under cache_lock. */
static GList *
find (GBytes *bytes,
      int     fit_side)
{
  for (GList *l = cache.head; l != NULL; l = l->next)
    {
      Entry *e = l->data;

      if (e->fit_side == fit_side && (e->bytes == bytes || g_bytes_equal (e->bytes, bytes)))
        return l;
    }
  return NULL;
}

TernCachedImage *
tern_image_cache_load (GBytes      *bytes,
                       const char  *name,
                       int          fit_side,
                       GError     **error)
{
  TernImageOptions options = { .fit_side = MAX (fit_side, 0) };
  TernCachedImage *found = NULL;
  TernImage *img;
  Entry *e;
  GList *l;

  g_return_val_if_fail (bytes != NULL, NULL);

  g_mutex_lock (&cache_lock);
  if ((l = find (bytes, options.fit_side)) != NULL)
    {
      g_queue_unlink (&cache, l);
      g_queue_push_head_link (&cache, l);
      found = tern_cached_image_ref (((Entry *) l->data)->image);
    }
  g_mutex_unlock (&cache_lock);
  if (found != NULL)
    return found;

  /* Decoded outside the lock: another thread may decode the same picture
   * meanwhile; the second one to finish replaces the first's entry. */
  img = tern_image_load_bytes (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), name,
                               &options, error);
  if (img == NULL)
    return NULL;
  found = g_atomic_rc_box_new0 (TernCachedImage);
  found->image = img;
  found->sha256 = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);

  e = g_new0 (Entry, 1);
  e->bytes = g_bytes_ref (bytes);
  e->fit_side = options.fit_side;
  e->image = tern_cached_image_ref (found);
  e->size = (gsize) img->width * (gsize) img->height * 3 * sizeof (float);
  g_mutex_lock (&cache_lock);
  n_decoded++;
  if ((l = find (bytes, options.fit_side)) != NULL)
    {
      cache_bytes -= ((Entry *) l->data)->size;
      entry_free (l->data);
      g_queue_delete_link (&cache, l);
    }
  g_queue_push_head (&cache, e);
  cache_bytes += e->size;
  /* The picture just decoded stays even when it alone is over the bound:
   * it is about to be used. */
  while (cache.length > 1 && (cache_bytes > CACHE_MAX_BYTES || cache.length > CACHE_MAX_ENTRIES))
    {
      Entry *old = g_queue_pop_tail (&cache);

      cache_bytes -= old->size;
      entry_free (old);
    }
  g_mutex_unlock (&cache_lock);
  return found;
}

void
tern_image_cache_clear (void)
{
  Entry *e;

  g_mutex_lock (&cache_lock);
  while ((e = g_queue_pop_head (&cache)) != NULL)
    entry_free (e);
  cache_bytes = 0;
  g_mutex_unlock (&cache_lock);
}

guint
tern_image_cache_n_decoded (void)
{
  guint n;

  g_mutex_lock (&cache_lock);
  n = n_decoded;
  g_mutex_unlock (&cache_lock);
  return n;
}
