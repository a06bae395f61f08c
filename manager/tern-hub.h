/* tern-hub.h: Hugging Face repositories as models (docs/MODELS.md).
 *
 * A reference names a repository and a quantization,
 *   hf.co/OWNER/REPO[:QUANT]   (also huggingface.co/..., QUANT default Q4_K_M)
 * or one file,
 *   https://huggingface.co/OWNER/REPO/resolve/REV/FILE.gguf
 * and resolves, through the Hub's API, to a one-tag catalog: the files with
 * their sizes and LFS sha256, at the revision the branch pointed to when it
 * was resolved, plus the repository's vision projector (mmproj) when it has
 * one. The tag is then pulled like any catalog tag. */
#pragma once

#include "tern-catalog.h"

G_BEGIN_DECLS

/* TRUE when text is written as a Hub reference (no network). */
gboolean     tern_hub_is_ref  (const char *text);

/* The store's tag for a reference, e.g. "hf:owner--repo--q4_k_m"; NULL with
 * an error when the reference is malformed. No network. */
char        *tern_hub_tag_for_ref (const char  *ref,
                                   GError     **error);

/* Asks the Hub (base URL $HF_ENDPOINT, else https://huggingface.co; token
 * $HF_TOKEN for gated repositories) which files the reference means.
 * Returns the catalog and, in *tag, its tag. Blocking. */
TernCatalog *tern_hub_resolve (const char    *ref,
                               GCancellable  *cancellable,
                               char         **tag,
                               GError       **error);

/* "Bearer $HF_TOKEN" when url's host is the Hub's (or a mirror's named by
 * $HF_ENDPOINT) and a token is set, else NULL: the token goes to the Hub
 * alone, never to the CDN it redirects downloads to. */
char        *tern_hub_authorization_for (const char *url);

G_END_DECLS
