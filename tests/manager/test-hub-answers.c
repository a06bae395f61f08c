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

/* The catalog takes a tag "hf:NAME" of at most 64 bytes, starting with a
 * letter or a digit; a reference with a long name (a file's URL in a
 * repository named after the model, as most are) resolved to a tag it
 * refused, and the pull failed (found by tests/fuzz/fuzz-hub). */
static void
test_long_names (void)
{
  static const char listing[] =
    "{\"sha\": \"cccccccccccccccccccccccccccccccccccccccc\", \"siblings\": ["
    "{\"rfilename\": \"Meta-Llama-3.1-8B-Instruct-abliterated-Q4_K_M.gguf\", \"size\": 1000},"
    "{\"rfilename\": \"Meta-Llama-3.1-8B-Instruct-abliterated-Q5_K_M.gguf\", \"size\": 1000}]}";
  static const char *const refs[] = {
    "https://huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-abliterated-GGUF/resolve/main/"
    "Meta-Llama-3.1-8B-Instruct-abliterated-Q4_K_M.gguf",
    "https://huggingface.co/bartowski/Meta-Llama-3.1-8B-Instruct-abliterated-GGUF/resolve/main/"
    "Meta-Llama-3.1-8B-Instruct-abliterated-Q5_K_M.gguf",
    "hf.co/bartowski/Meta-Llama-3.1-8B-Instruct-abliterated-GGUF:Q4_K_M",
    "hf.co/_owner/repo:Q4_K_M",
  };
  g_autofree char *first = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (refs); i++)
    {
      g_autoptr (GError) e = NULL;
      g_autofree char *tag = NULL;
      g_autofree char *want = tern_hub_tag_for_ref (refs[i], NULL);
      g_autoptr (TernCatalog) c = tern_hub_resolve_from_answer (refs[i], listing, strlen (listing),
                                                                &tag, &e);

      CHECK (c != NULL && g_strcmp0 (tag, want) == 0, "%s resolves: %s", refs[i],
             e ? e->message : "");
      CHECK (want && strlen (want) <= strlen ("hf:") + 64, "%s: tag %s fits", refs[i], want);
      if (i == 0)
        first = g_steal_pointer (&want);
      else if (i == 1)
        CHECK (g_strcmp0 (first, want) != 0, "two files, two tags (%s)", first);
    }
}

/* A projector whose name the store cannot keep was taken along, and the
 * catalog's check of its name failed the pull of the model itself (found
 * by tests/fuzz/fuzz-hub): another projector is taken, or none. */
static void
test_unstorable_projector (void)
{
  static const char listing[] =
    "{\"sha\": \"cccccccccccccccccccccccccccccccccccccccc\", \"siblings\": ["
    "{\"rfilename\": \"repo-Q4_K_M.gguf\", \"size\": 1000},"
    "{\"rfilename\": \"mmproj-@repo-f16.gguf\", \"size\": 300},"
    "{\"rfilename\": \"mmproj-repo-Q8_0.gguf\", \"size\": 200}]}";
  g_autoptr (GError) e = NULL;
  g_autofree char *tag = NULL;
  g_autoptr (TernCatalog) c = tern_hub_resolve_from_answer ("hf.co/owner/repo", listing,
                                                            strlen (listing), &tag, &e);
  const TernCatalogTag *t = c ? tern_catalog_find_tag (c, tag) : NULL;
  const TernCatalogPackage *v = t ? t->packages[TERN_PACKAGE_ROLE_VISION] : NULL;

  CHECK (c != NULL, "the model resolves: %s", e ? e->message : "");
  CHECK (v && !strcmp (((TernCatalogFile *) v->files->pdata[0])->name, "mmproj-repo-Q8_0.gguf"),
         "the projector the store can keep comes along");
}

/* A listed path with "..": its file's URL read back as another path (here
 * the other file's), so that two rows offered the same download (found by
 * tests/fuzz/fuzz-hub). Such a file is listed, not offered. */
static void
test_dot_segments (void)
{
  static const char listing[] =
    "{\"sha\": \"cccccccccccccccccccccccccccccccccccccccc\", \"siblings\": ["
    "{\"rfilename\": \"a/../b-Q4_K_M.gguf\", \"size\": 1000},"
    "{\"rfilename\": \"b-Q4_K_M.gguf\", \"size\": 2000}]}";
  g_autoptr (GError) e = NULL;
  g_autoptr (TernHubRepo) repo = tern_hub_list_quants_from_answer ("owner/repo", listing,
                                                                   strlen (listing), &e);
  g_autoptr (GHashTable) tags = g_hash_table_new (g_str_hash, g_str_equal);

  CHECK (repo != NULL && repo->quants->len == 2, "the listing reads: %s", e ? e->message : "");
  for (guint i = 0; repo && i < repo->quants->len; i++)
    {
      const TernHubQuant *q = repo->quants->pdata[i];

      if (q->ref == NULL)
        continue;
      CHECK (strstr (q->ref, "/../") == NULL, "%s: no dot segment offered", q->ref);
      CHECK (g_hash_table_add (tags, q->tag), "%s: a second row offers the same download", q->ref);
    }
  CHECK (g_hash_table_size (tags) == 1, "one of the two can be pulled by its URL (%u)",
         g_hash_table_size (tags));
}

/* The catalog's messages pasted the names they quote: a file named with a
 * newline and ESC in a Hub's listing (or a catalog) started a line, and a
 * terminal sequence, of its choosing in the error (found by
 * tests/fuzz/fuzz-hub). They are shown escaped, as the Hub's own are. */
static void
test_names_escaped (void)
{
  static const char listing[] =
    "{\"sha\": \"cccccccccccccccccccccccccccccccccccccccc\", \"siblings\": ["
    "{\"rfilename\": \"ev\\nil\\u001b[31m-Q4_K_M.gguf\", \"size\": 1000}]}";
  static const char catalog[] =
    "{\"schema\": 1, \"packages\": {\"p\": {\"label\": \"P\", \"files\": [{\"name\": "
    "\"a\\rb\\u009b.gguf\", \"url\": \"https://example.com/m.gguf\"}]}}, \"families\": []}";
  g_autoptr (GError) e = NULL;
  g_autoptr (GError) ce = NULL;
  g_autoptr (TernCatalog) c = tern_hub_resolve_from_answer ("hf.co/owner/repo", listing,
                                                            strlen (listing), NULL, &e);
  g_autoptr (TernCatalog) c2 = tern_catalog_new_from_data (catalog, -1, "models.json", &ce);

  CHECK (c == NULL && e && strstr (e->message, "ev\\x0ail\\x1b[31m-Q4_K_M.gguf")
           && !strchr (e->message, '\n') && !strchr (e->message, '\x1b'),
         "the listing's name is shown escaped: %s", e ? e->message : "");
  CHECK (c2 == NULL && ce && strstr (ce->message, "a\\x0db\\u009b.gguf")
           && !strchr (ce->message, '\r'),
         "the catalog's name is shown escaped: %s", ce ? ce->message : "");
}

/* The reason phrase of a status line is the server's (an HF_ENDPOINT
 * mirror's) bytes: pasted into the error, one that is not UTF-8 or holds
 * ESC went as it was into the Models panel and the terminal (found by
 * tests/fuzz/fuzz-hub reading statuses other than 200). */
static void
test_reason_escaped (void)
{
  static const char reason[] = "Bad \xff\x1b[31mGateway\r";
  g_autoptr (GError) le = NULL;
  g_autoptr (GError) re = NULL;
  g_autoptr (GError) se = NULL;
  g_autoptr (TernHubRepo) repo = tern_hub_list_quants_from_response ("owner/repo", 502, reason, NULL, "{}", 2, &le);
  g_autoptr (TernCatalog) c = tern_hub_resolve_from_response ("hf.co/owner/repo", 502, reason, NULL, "{}", 2, NULL,
                                                              &re);
  g_autoptr (GPtrArray) models = tern_hub_search_from_response (502, reason, NULL, "[]", 2, 10, &se);
  GError *errors[] = { le, re, se };

  CHECK (repo == NULL && c == NULL && models == NULL, "HTTP 502 gives no answer");
  for (guint i = 0; i < G_N_ELEMENTS (errors); i++)
    {
      const char *m = errors[i] ? errors[i]->message : "";

      CHECK (errors[i] && strstr (m, "HTTP 502") && g_utf8_validate (m, -1, NULL) && !strchr (m, '\x1b')
               && !strchr (m, '\r') && strstr (m, "Gateway"),
             "the reason phrase is shown escaped: %s", m);
    }
}

/* A Hub that limits its rate (429, or 503 with Retry-After) said only
 * "HTTP 429 Too Many Requests from URL": now it says when to come back,
 * as the remote engine does, with the header's bytes shown escaped. */
static void
test_busy (void)
{
  static const struct {
    guint status;
    const char *retry_after;
    const char *said;      /* in every message */
  } cases[] = {
    { 429, "30", "wait 30 seconds" },
    { 429, NULL, "try again in a moment" },
    { 503, "Wed, 21 Oct 2026 07:28:00 GMT", "wait until Wed, 21 Oct 2026 07:28:00 GMT" },
    { 429, "\x1b[31m soon\r", "wait until \\x1b[31m soon\\x0d" },
    { 429, " \v5", "wait until  \\x0b5" },
    { 429, "99999999999999999999", "wait until 99999999999999999999" },
    { 503, NULL, "HTTP 503 Busy" }, /* without Retry-After, any 5xx */
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) le = NULL;
      g_autoptr (GError) re = NULL;
      g_autoptr (GError) se = NULL;
      guint s = cases[i].status;
      const char *ra = cases[i].retry_after;
      g_autoptr (TernHubRepo) repo = tern_hub_list_quants_from_response ("owner/repo", s, "Busy", ra, "{}", 2, &le);
      g_autoptr (TernCatalog) c = tern_hub_resolve_from_response ("hf.co/owner/repo", s, "Busy", ra, "{}", 2, NULL,
                                                                  &re);
      g_autoptr (GPtrArray) models = tern_hub_search_from_response (s, "Busy", ra, "[]", 2, 10, &se);
      GError *errors[] = { le, re, se };

      CHECK (repo == NULL && c == NULL && models == NULL, "HTTP %u gives no answer", s);
      for (guint k = 0; k < G_N_ELEMENTS (errors); k++)
        {
          const char *m = errors[k] ? errors[k]->message : "";

          CHECK (errors[k] && strstr (m, cases[i].said) && g_utf8_validate (m, -1, NULL) && !strchr (m, '\x1b')
                   && !strchr (m, '\r') && !strchr (m, '\v'),
                 "HTTP %u, Retry-After %s: '%s' in: %s", s, ra ? ra : "(none)", cases[i].said, m);
        }
    }
}

/* A listing of many files: grouping asked pick_model_files once per set,
 * each time reading the whole listing (20,000 files took over two minutes
 * under ASan; a 16 MiB listing, days: found while fuzzing tern-hub.c, a
 * listing of 1,000 files fed to tests/fuzz/fuzz-hub took 51 s). The files
 * each word names are found once now. */
static void
test_many_files (void)
{
  const guint n = 20000;
  GString *listing = g_string_new ("{\"sha\": \"cccccccccccccccccccccccccccccccccccccccc\", \"siblings\": [");
  g_autoptr (GError) e = NULL;
  g_autoptr (TernHubRepo) repo = NULL;
  gint64 start;
  double seconds;
  guint with_ref = 0;

  for (guint i = 0; i < n; i++)
    g_string_append_printf (listing, "%s{\"rfilename\": \"m-Q%u.gguf\", \"size\": 5}", i ? "," : "", i);
  g_string_append (listing, "]}");
  start = g_get_monotonic_time ();
  repo = tern_hub_list_quants_from_answer ("owner/repo", listing->str, listing->len, &e);
  seconds = (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC;
  CHECK (repo != NULL && repo->quants->len == n, "%u quantizations listed: %s", n,
         e ? e->message : "");
  for (guint i = 0; repo && i < repo->quants->len; i++)
    with_ref += ((TernHubQuant *) repo->quants->pdata[i])->ref != NULL;
  CHECK (with_ref == n, "each by its name (%u)", with_ref);
  CHECK (seconds < 10, "%u files grouped in %.1f s", n, seconds);
  g_string_free (listing, TRUE);
}

int
main (void)
{
  g_unsetenv ("HF_ENDPOINT");
  test_offered_refs_resolve ();
  test_long_names ();
  test_unstorable_projector ();
  test_dot_segments ();
  test_names_escaped ();
  test_reason_escaped ();
  test_busy ();
  test_many_files ();
  printf ("%d checks, %d failed\n", n_checks, n_failed);
  return n_failed ? 1 : 0;
}
