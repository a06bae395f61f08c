/* The Hugging Face Hub's answers read without a network
 * (tern_hub_*_from_answer in manager/tern-hub.c): what a repository's
 * listing offers must be what a pull of it can install. */
#include "tern-hub.h"

#include <stdio.h>
#include <string.h>

static int n_checks, n_failed;

#define CHECK(cond, ...)                                                                \
  do                                                                                    \
    {                                                                                   \
      n_checks++;                                                                       \
      if (!(cond))                                                                      \
        {                                                                               \
          n_failed++;                                                                   \
          fprintf (stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                         \
          fprintf (stderr, __VA_ARGS__);                                                \
          fputc ('\n', stderr);                                                         \
        }                                                                               \
    }                                                                                   \
  while (0)

/* A file whose name the store cannot keep ('`' is not in a plain file
 * name) was offered as hf.co/OWNER/REPO:Q8_0, whose pull then failed in
 * the catalog's check of that name (found by tests/fuzz/fuzz-hub). */
static void
test_offered_refs_resolve (void)
{
  static const char listing[] =
    "{\"sha\": \"cccccccccccccccccccccccccccccccccccccccc\", \"siblings\": ["
    "{\"rfilename\": \"repo-Q4_K_M.gguf\", \"size\": 1000},"
    "{\"rfilename\": \"re`o-Q8_0.gguf\", \"size\": 2000},"
    "{\"rfilename\": \"dir/repo-Q6_K-00001-of-00002.gguf\", \"size\": 10},"
    "{\"rfilename\": \"dir/repo-Q6_K-00002-of-00002.gguf\", \"size\": 11}]}";
  g_autoptr (GError) e = NULL;
  g_autoptr (TernHubRepo) repo = tern_hub_list_quants_from_answer ("owner/repo", listing,
                                                                   strlen (listing), &e);
  guint with_ref = 0;

  CHECK (repo != NULL, "the listing reads: %s", e ? e->message : "");
  if (repo == NULL)
    return;
  CHECK (repo->quants->len == 3, "three quantizations (%u)", repo->quants->len);
  for (guint i = 0; i < repo->quants->len; i++)
    {
      const TernHubQuant *q = repo->quants->pdata[i];
      g_autoptr (GError) re = NULL;
      g_autofree char *tag = NULL;
      g_autoptr (TernCatalog) c = NULL;

      if (q->ref == NULL)
        continue;
      with_ref++;
      c = tern_hub_resolve_from_answer (q->ref, listing, strlen (listing), &tag, &re);
      CHECK (c != NULL && g_strcmp0 (tag, q->tag) == 0, "%s (offered for %s) resolves: %s",
             q->ref, q->name, re ? re->message : "");
    }
  CHECK (with_ref == 2, "two quantizations can be pulled (%u)", with_ref);
}

int
main (void)
{
  g_unsetenv ("HF_ENDPOINT");
  test_offered_refs_resolve ();
  printf ("%d checks, %d failed\n", n_checks, n_failed);
  return n_failed ? 1 : 0;
}
