/* tern-image-cache.h: decoded pictures, shared by the composer (which
 * decodes an image when it is attached, for its thumbnail and its size) and
 * the engine worker (which encodes it when it is sent), so that a picture
 * is decoded once, off the main loop.
 *
 * Keyed by the file's bytes and the fitting asked for (the projector's
 * input side under the budget: tn_vision_input_side). Bounded: the least
 * recently used pictures go first. A miss only costs a decode; the result
 * never depends on what is cached. Thread-safe.
 */
#pragma once

#include <glib.h>

#include "tern-image.h"

G_BEGIN_DECLS

typedef struct _TernCachedImage TernCachedImage;

/* The decoded picture of bytes fitted to fit_side (0: unscaled), from the
 * cache or decoded now (tern_image_load_bytes, with name in its messages)
 * and kept. A new reference, or NULL with error set. Decodes on the calling
 * thread: not for the main loop. */
TernCachedImage *tern_image_cache_load      (GBytes           *bytes,
                                             const char       *name,
                                             int               fit_side,
                                             GError          **error);
const TernImage *tern_cached_image_get      (TernCachedImage  *image);
/* The sha256 of the file's bytes, hex, computed once when decoded. */
const char      *tern_cached_image_get_sha256 (TernCachedImage *image);
TernCachedImage *tern_cached_image_ref      (TernCachedImage  *image);
void             tern_cached_image_unref    (TernCachedImage  *image);

/* Empties the cache (tests; memory pressure). */
void             tern_image_cache_clear     (void);
/* Pictures decoded since the process started, cache hits not counted
 * (tests check that an attached image is not decoded again at send). */
guint            tern_image_cache_n_decoded (void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TernCachedImage, tern_cached_image_unref)

G_END_DECLS
