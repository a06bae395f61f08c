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

/* Seconds a Hub request (search, listing, resolve) has for its whole
 * answer (60). For tests. */
void         tern_hub_set_deadline (guint seconds);

/* ---- search (docs/MODELS.md, "Searching Hugging Face") ------------------ */

/* One repository a search found. */
typedef struct {
  char     *id;         /* "OWNER/REPO" */
  guint64   downloads;  /* the Hub's count (recent downloads); 0 when absent */
  guint64   likes;
  gboolean  gated;      /* the Hub marks it gated ("auto" or "manual"); only
                         * known when the Hub's answer says so */
} TernHubModel;

void tern_hub_model_free (TernHubModel *model);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TernHubModel, tern_hub_model_free)

/* Results asked for when limit is 0, and the most a search asks for. */
#define TERN_HUB_SEARCH_LIMIT_DEFAULT 20
#define TERN_HUB_SEARCH_LIMIT_MAX 100

/* The Hub's model search, GGUF repositories only, most downloaded first:
 * GET {HF_ENDPOINT}/api/models?search=QUERY&filter=gguf&sort=downloads&
 * direction=-1&limit=N, with $HF_TOKEN when set. Returns TernHubModel*
 * (empty when nothing matches). An unreachable Hub is
 * TERN_MANAGER_ERROR_OFFLINE; an answer that is not the documented list
 * (too big, too deep, not UTF-8, not JSON, not an array) is
 * TERN_MANAGER_ERROR_HTTP. Entries of the wrong shape are left out. */
GPtrArray   *tern_hub_search        (const char           *query,
                                     guint                 limit,
                                     GCancellable         *cancellable,
                                     GError              **error);
/* The same in a worker thread; the callback runs in the caller's
 * thread-default main context. */
void         tern_hub_search_async  (const char           *query,
                                     guint                 limit,
                                     GCancellable         *cancellable,
                                     GAsyncReadyCallback   callback,
                                     gpointer              user_data);
GPtrArray   *tern_hub_search_finish (GAsyncResult         *result,
                                     GError              **error);

/* One quantization of a repository: the GGUF files that one reference
 * downloads (every part of a split model), vision projectors left out. */
typedef struct {
  char    *name;     /* "Q4_K_M"; the file's name when the quantization
                      * alone does not tell its files from others */
  char    *ref;      /* hf.co/OWNER/REPO:QUANT, or the file's URL pinned to
                      * the commit; NULL when no reference picks exactly
                      * these files (they cannot be pulled one by one), or
                      * a file's name is one the store cannot keep */
  char    *tag;      /* the store's tag for ref (NULL with ref) */
  guint64  size;     /* all its files; 0 when the Hub gave no size for one */
  guint    n_files;  /* parts */
} TernHubQuant;

typedef struct {
  char      *id;           /* "OWNER/REPO" */
  char      *commit;       /* what main pointed to */
  gboolean   gated;
  GPtrArray *quants;       /* TernHubQuant*, smallest first */
  guint64    mmproj_size;  /* the vision projector a pull takes along; 0: none */
} TernHubRepo;

void tern_hub_repo_free (TernHubRepo *repo);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TernHubRepo, tern_hub_repo_free)

/* A repository's quantizations with their sizes, from the same listing
 * tern_hub_resolve reads (GET /api/models/OWNER/REPO/revision/main?blobs=true).
 * repo_id is "OWNER/REPO". Blocking; errors as tern_hub_resolve's. */
TernHubRepo *tern_hub_list_quants        (const char          *repo_id,
                                          GCancellable        *cancellable,
                                          GError             **error);
void         tern_hub_list_quants_async  (const char          *repo_id,
                                          GCancellable        *cancellable,
                                          GAsyncReadyCallback  callback,
                                          gpointer             user_data);
TernHubRepo *tern_hub_list_quants_finish (GAsyncResult        *result,
                                          GError             **error);

/* tern_hub_resolve in a worker thread (the panel's Download). */
void         tern_hub_resolve_async      (const char          *ref,
                                          GCancellable        *cancellable,
                                          GAsyncReadyCallback  callback,
                                          gpointer             user_data);
TernCatalog *tern_hub_resolve_finish     (GAsyncResult        *result,
                                          char               **tag,
                                          GError             **error);

/* ---- the answers alone (tests and fuzzers: no network) ----------------- */

/* What tern_hub_resolve, tern_hub_search and tern_hub_list_quants make of
 * the Hub's answer (the listing's or the search's JSON body, `length`
 * bytes), as if it had come with HTTP 200; errors as theirs. */
TernCatalog *tern_hub_resolve_from_answer     (const char  *ref,
                                               const char  *answer,
                                               gsize        length,
                                               char       **tag,
                                               GError     **error);
GPtrArray   *tern_hub_search_from_answer      (const char  *answer,
                                               gsize        length,
                                               guint        limit,
                                               GError     **error);
TernHubRepo *tern_hub_list_quants_from_answer (const char  *repo_id,
                                               const char  *answer,
                                               gsize        length,
                                               GError     **error);
/* The same for an answer that came with HTTP `status`, the reason phrase
 * `reason` and the Retry-After header `retry_after` (the server's words,
 * any bytes; each may be NULL). */
TernCatalog *tern_hub_resolve_from_response     (const char  *ref,
                                                 guint        status,
                                                 const char  *reason,
                                                 const char  *retry_after,
                                                 const char  *answer,
                                                 gsize        length,
                                                 char       **tag,
                                                 GError     **error);
GPtrArray   *tern_hub_search_from_response      (guint        status,
                                                 const char  *reason,
                                                 const char  *retry_after,
                                                 const char  *answer,
                                                 gsize        length,
                                                 guint        limit,
                                                 GError     **error);
TernHubRepo *tern_hub_list_quants_from_response (const char  *repo_id,
                                                 guint        status,
                                                 const char  *reason,
                                                 const char  *retry_after,
                                                 const char  *answer,
                                                 gsize        length,
                                                 GError     **error);

G_END_DECLS
