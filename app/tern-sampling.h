/* tern-sampling.h: which sampling a generation uses. A model may suggest
 * its own (its model card's values): the GGUF's general.sampling.* keys,
 * else its catalog entry's "sampling" (docs/MODELS.md); Preferences decide
 * whether suggestions are followed, and "Deterministic" overrides both with
 * greedy decoding, the same answer every time. Plain arithmetic. */
#pragma once

#include <glib.h>

#include "tern.h"

G_BEGIN_DECLS

/* A field below 0 is not given. */
typedef struct {
  double temperature;
  double top_p;
  int    top_k;
  double min_p;
} TernSampling;

/* Nothing given. */
void     tern_sampling_clear     (TernSampling       *s);
gboolean tern_sampling_is_set    (const TernSampling *s);
/* Sets a field when the value is a sensible one (temperature 0..100, top_p
 * in (0, 1], top_k 0..100000, min_p 0..1, finite); else leaves it unset.
 * Returns whether it was taken. */
gboolean tern_sampling_set       (TernSampling       *s,
                                  const char         *name,  /* "temperature", "top_p", "top_k", "min_p" */
                                  double              value);
/* The GGUF's general.sampling.temp, .top_p, .top_k, .min_p (llama.cpp's
 * keys); values of the wrong type or out of range are skipped. Returns
 * whether any was taken. */
gboolean tern_sampling_from_gguf (const tn_gguf      *gguf,
                                  TernSampling       *out);
/* What a request uses: greedy (temperature 0, nothing else) when
 * deterministic; else `temperature` and `top_p` (Preferences), with the
 * model's suggestion over them when use_suggested and it has one. top_k
 * and min_p are 0 (off) unless suggested. */
void     tern_sampling_resolve   (gboolean            deterministic,
                                  gboolean            use_suggested,
                                  const TernSampling *suggested,
                                  double              temperature,
                                  double              top_p,
                                  TernSampling       *out);

G_END_DECLS
