/* tern-embed-cache.h: encoded images kept for reuse, shared by the server
 * and the app (docs/VISION.md). Encoding a picture costs far more than
 * answering about it (seconds to minutes on a CPU), and a chat sends the
 * pictures of earlier turns again with every turn, so the encodings of the
 * last few are kept, keyed by the caller's content key (a sha256) and the
 * budget. Bounded by entries and by bytes; the least recently used goes
 * first. Thread-safe. A miss only costs an encoding: the result never
 * depends on what is cached.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _TernEmbedCache TernEmbedCache;

TernEmbedCache *tern_embed_cache_new   (guint            max_entries,
                                        gsize            max_bytes);
void            tern_embed_cache_free  (TernEmbedCache  *cache);

/* A copy of the rows kept for (key, budget), malloc'd (free() it, like
 * tn_vision_encode_new's rows), with their count in *n_tokens; NULL when
 * none is kept (or out of memory). */
float          *tern_embed_cache_get   (TernEmbedCache  *cache,
                                        const char      *key,
                                        int              budget,
                                        int             *n_tokens);
/* Keeps a copy of rows ([n_tokens][n_embd]) for (key, budget), replacing
 * an entry of the same key and budget; one larger than max_bytes alone is
 * not kept. */
void            tern_embed_cache_put   (TernEmbedCache  *cache,
                                        const char      *key,
                                        int              budget,
                                        const float     *rows,
                                        int              n_tokens,
                                        int              n_embd);
/* Forgets everything (the projector changed). */
void            tern_embed_cache_clear (TernEmbedCache  *cache);
guint           tern_embed_cache_size  (TernEmbedCache  *cache);

G_END_DECLS
