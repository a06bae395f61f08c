/* Holding a download's or a verify's hash until a test has seen its progress.
 *
 * A test-sized file is hashed before any progress tick could show it, so
 * the manager's hash hook (tern_manager_test_set_hash_hook) is given
 * hash_hold_wait: after each MiB it waits until the test has shown that
 * figure (hash_hold_show), and at pause_at until the test releases it. */
#pragma once

#include <glib.h>

typedef struct {
  GMutex   lock;
  GCond    cond;
  guint64  shown;     /* the last figure the test has seen */
  guint64  pause_at;  /* hold here until released; G_MAXUINT64: nowhere */
  gboolean released;
} HashHold;

static inline void
hash_hold_init (HashHold *h,
                guint64   pause_at)
{
  g_mutex_init (&h->lock);
  g_cond_init (&h->cond);
  h->shown = 0;
  h->pause_at = pause_at;
  h->released = FALSE;
}

static inline void
hash_hold_clear (HashHold *h)
{
  g_cond_clear (&h->cond);
  g_mutex_clear (&h->lock);
}

/* The hook, in the hashing thread. A test that never shows the figure
 * fails on its own assertions after 20 s rather than hanging. */
static inline void
hash_hold_wait (guint64  hashed,
                gpointer data)
{
  HashHold *h = data;
  gint64 end = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  g_mutex_lock (&h->lock);
  while (h->shown < hashed || (hashed == h->pause_at && !h->released))
    if (!g_cond_wait_until (&h->cond, &h->lock, end))
      break;
  g_mutex_unlock (&h->lock);
}

static inline void
hash_hold_show (HashHold *h,
                guint64   figure)
{
  g_mutex_lock (&h->lock);
  h->shown = figure;
  g_cond_broadcast (&h->cond);
  g_mutex_unlock (&h->lock);
}

static inline void
hash_hold_release (HashHold *h)
{
  g_mutex_lock (&h->lock);
  h->released = TRUE;
  g_cond_broadcast (&h->cond);
  g_mutex_unlock (&h->lock);
}

/* For a second hash with the same hold: every figure passes until the
 * pause, which holds again. */
static inline void
hash_hold_rearm (HashHold *h)
{
  g_mutex_lock (&h->lock);
  h->shown = G_MAXUINT64;
  h->released = FALSE;
  g_mutex_unlock (&h->lock);
}
