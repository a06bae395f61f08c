/* tern-sampling.c: see tern-sampling.h. */
#include "tern-sampling.h"

#include <math.h>

void
tern_sampling_clear (TernSampling *s)
{
  s->temperature = -1;
  s->top_p = -1;
  s->top_k = -1;
  s->min_p = -1;
}

gboolean
tern_sampling_is_set (const TernSampling *s)
{
  return s->temperature >= 0 || s->top_p >= 0 || s->top_k >= 0 || s->min_p >= 0;
}

gboolean
tern_sampling_set (TernSampling *s,
                   const char   *name,
                   double        value)
{
  if (!isfinite (value) || value < 0)
    return FALSE;
  if (g_str_equal (name, "temperature") && value <= 100)
    s->temperature = value;
  else if (g_str_equal (name, "top_p") && value > 0 && value <= 1)
    s->top_p = value;
  else if (g_str_equal (name, "top_k") && value <= 100000 && value == floor (value))
    s->top_k = (int) value;
  else if (g_str_equal (name, "min_p") && value <= 1)
    s->min_p = value;
  else
    return FALSE;
  return TRUE;
}

gboolean
tern_sampling_from_gguf (const tn_gguf *gguf,
                         TernSampling  *out)
{
  static const struct { const char *key, *name; } keys[] = {
    { "general.sampling.temp", "temperature" },
    { "general.sampling.top_p", "top_p" },
    { "general.sampling.top_k", "top_k" },
    { "general.sampling.min_p", "min_p" },
  };
  gboolean any = FALSE;

  tern_sampling_clear (out);
  for (gsize i = 0; gguf != NULL && i < G_N_ELEMENTS (keys); i++)
    {
      double value;

      if (tn_gguf_get_float (gguf, keys[i].key, &value) == TN_OK)
        any |= tern_sampling_set (out, keys[i].name, value);
    }
  return any;
}

void
tern_sampling_resolve (gboolean            deterministic,
                       gboolean            use_suggested,
                       const TernSampling *suggested,
                       double              temperature,
                       double              top_p,
                       TernSampling       *out)
{
  out->temperature = deterministic ? 0 : temperature;
  out->top_p = deterministic ? 1 : top_p;
  out->top_k = 0;
  out->min_p = 0;
  if (deterministic || !use_suggested || suggested == NULL)
    return;
  if (suggested->temperature >= 0)
    out->temperature = suggested->temperature;
  if (suggested->top_p >= 0)
    out->top_p = suggested->top_p;
  if (suggested->top_k >= 0)
    out->top_k = suggested->top_k;
  if (suggested->min_p >= 0)
    out->min_p = suggested->min_p;
}
