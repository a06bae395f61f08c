/* The remote client's stream decoder and error sentences
 * (manager/tern-remote.c) without a network: a valid stream cut at every
 * byte gives the same answer; random bytes, mutated streams, overlong lines
 * and deep nesting end in an error or in nothing, never in a crash (the
 * test runs under AddressSanitizer); HTTP statuses become the sentences the
 * user reads. */
#include "tern-remote.h"

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

typedef struct
{
  GString *content;
  GString *reasoning;
  int      stop_after; /* stop when this many pieces came; 0: never */
  int      pieces;
} Got;

static gboolean
on_piece (TernRemotePiece kind, const char *text, gsize len, gpointer user)
{
  Got *g = user;

  g_string_append_len (kind == TERN_REMOTE_PIECE_CONTENT ? g->content : g->reasoning, text,
                       (gssize) len);
  g->pieces++;
  return !(g->stop_after && g->pieces >= g->stop_after);
}

static void
got_init (Got *g)
{
  memset (g, 0, sizeof *g);
  g->content = g_string_new (NULL);
  g->reasoning = g_string_new (NULL);
}

static void
got_free (Got *g)
{
  g_string_free (g->content, TRUE);
  g_string_free (g->reasoning, TRUE);
}

/* Feeds `data` in pieces of the given cut points; returns the feed result. */
static gboolean
feed_cut (const char *data, gsize len, gsize cut1, gsize cut2, Got *g, TernRemoteStats *st,
          gboolean *done, GError **error)
{
  TernRemoteStream *s = tern_remote_stream_new ("http://test/v1", on_piece, g);
  gboolean ok = tern_remote_stream_feed (s, data, cut1, error)
                && tern_remote_stream_feed (s, data + cut1, cut2 - cut1, error)
                && tern_remote_stream_feed (s, data + cut2, len - cut2, error);

  tern_remote_stream_stats (s, st);
  *done = tern_remote_stream_done (s);
  tern_remote_stream_free (s);
  return ok;
}

static const char valid[] =
  ": keep-alive\n\n"
  "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
  "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm \\u00e9\"}}]}\r\n\r\n"
  "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\r"
  "event: message\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo \\u4e16\\u754c\"}}]}\n\n"
  "data:{\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
  "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":31,\"completion_tokens\":3,"
  "\"prompt_tokens_details\":{\"cached_tokens\":24},\"timings\":{\"prefill_tok_s\":700.5,"
  "\"decode_tok_s\":42.25,\"restored_tokens\":24}}}\n\n"
  "data: [DONE]\n\n"
  "data: {\"choices\":[{\"delta\":{\"content\":\"after the end\"}}]}\n\n";

static void
test_valid_every_cut (void)
{
  const gsize len = strlen (valid);
  int bad = 0;

  for (gsize c1 = 0; c1 <= len; c1++)
    for (gsize c2 = c1; c2 <= len; c2 += 1 + (c2 % 37))
      {
        Got g;
        TernRemoteStats st;
        gboolean done;
        g_autoptr (GError) e = NULL;

        got_init (&g);
        if (!feed_cut (valid, len, c1, c2, &g, &st, &done, &e) || !done
            || strcmp (g.content->str, "Hello 世界") || strcmp (g.reasoning->str, "hmm é")
            || st.prompt_tokens != 31 || st.cached_tokens != 24 || st.completion_tokens != 3
            || st.timings != TERN_REMOTE_TIMINGS_TERN || st.decode_tok_s != 42.25
            || strcmp (st.finish_reason, "stop"))
          {
            if (bad++ < 3)
              fprintf (stderr, "cut %zu/%zu: content '%s' reasoning '%s' %s\n", c1, c2,
                       g.content->str, g.reasoning->str, e ? e->message : "");
          }
        got_free (&g);
      }
  CHECK (bad == 0, "a valid stream cut anywhere decodes the same (%d cuts differ)", bad);
}

static void
test_llama_timings (void)
{
  const char *d = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],"
                  "\"timings\":{\"cache_n\":100,\"prompt_n\":20,\"prompt_ms\":40,\"predicted_n\":9,"
                  "\"predicted_ms\":90}}\n\n";
  Got g;
  TernRemoteStats st;
  gboolean done;
  g_autoptr (GError) e = NULL;

  got_init (&g);
  CHECK (feed_cut (d, strlen (d), 0, 0, &g, &st, &done, &e), "llama-server chunk: %s",
         e ? e->message : "");
  CHECK (st.timings == TERN_REMOTE_TIMINGS_LLAMA_SERVER && st.cached_tokens == 100
           && st.prompt_tokens == 120 && st.prefill_tok_s == 500 && st.decode_tok_s == 100
           && st.completion_tokens == 1,
         "llama-server timings: cached %" G_GINT64_FORMAT " prompt %" G_GINT64_FORMAT
         " prefill %.1f decode %.1f",
         st.cached_tokens, st.prompt_tokens, st.prefill_tok_s, st.decode_tok_s);
  got_free (&g);
}

static void
expect_error (const char *what, const char *data, gsize len, const char *words)
{
  Got g;
  TernRemoteStats st;
  gboolean done;
  g_autoptr (GError) e = NULL;
  gboolean ok;

  got_init (&g);
  ok = feed_cut (data, len, len / 2, len / 2, &g, &st, &done, &e);
  CHECK (!ok && e && strstr (e->message, words), "%s: %s", what, e ? e->message : "no error");
  got_free (&g);
}

static void
test_hostile (void)
{
  g_autofree char *huge = g_malloc (3u << 20);
  g_autofree char *deep = g_malloc (400002);
  const char *bad_utf8 = "data: {\"choices\":[{\"delta\":{\"content\":\"\xc3\x28\"}}]}\n\n";

  memset (huge, 'a', 3u << 20);
  memcpy (huge, "data: ", 6);
  expect_error ("an overlong line", huge, 3u << 20, "longer than");
  /* Many short data lines in one event add up too. */
  {
    GString *many = g_string_new (NULL);
    for (int i = 0; i < 300000; i++)
      g_string_append (many, "data: xxxxx\n");
    expect_error ("an overlong event", many->str, many->len, "longer than");
    g_string_free (many, TRUE);
  }
  memcpy (deep, "data: ", 6);
  memset (deep + 6, '[', 200000);
  memset (deep + 200006, ']', 199994);
  deep[400000] = '\n';
  deep[400001] = '\n';
  expect_error ("deep nesting", deep, 400002, "not a JSON object");
  expect_error ("not JSON", "data: {\"choices\": [\n\n", 21, "not a JSON object");
  expect_error ("a JSON string", "data: \"text\"\n\n", 14, "not a JSON object");
  expect_error ("invalid UTF-8", bad_utf8, strlen (bad_utf8), "not UTF-8");
  /* C's escapes, which json-glib took ("\\101" as "A", "\\377" as a byte
   * that is no UTF-8): not JSON (tn_json_check). */
  {
    const char *octal = "data: {\"choices\":[{\"delta\":{\"content\":\"\\101\\102\"}}]}\n\n";
    const char *hex = "data: {\"choices\":[{\"delta\":{\"content\":\"\\x41\"}}]}\n\n";
    expect_error ("an octal escape", octal, strlen (octal), "not a JSON object");
    expect_error ("a hex escape", hex, strlen (hex), "not a JSON object");
  }
  {
    const char *ev = "data: {\"error\":{\"message\":\"out\\nof memory\"}}\n\n";
    const char *str = "data: {\"error\":\"quota\"}\n\n";
    expect_error ("an error event", ev, strlen (ev), "stopped the answer with an error: out of memory");
    expect_error ("an error string", str, strlen (str), "error: quota");
  }
}

static void
test_stop (void)
{
  Got g;
  TernRemoteStats st;
  gboolean done;
  g_autoptr (GError) e = NULL;

  got_init (&g);
  g.stop_after = 2;
  CHECK (feed_cut (valid, strlen (valid), 0, 0, &g, &st, &done, &e), "stop: %s",
         e ? e->message : "");
  CHECK (g.pieces == 2 && !strcmp (st.finish_reason, "cancelled") && !strcmp (g.content->str, "Hel"),
         "the callback stops the stream: %d pieces, finish '%s', content '%s'", g.pieces,
         st.finish_reason, g.content->str);
  got_free (&g);
}

/* Random bytes from an alphabet that makes SSE and JSON structure likely. */
static void
test_random (void)
{
  static const char *words[] = {
    "data: ", "data:", "\n", "\r", "\n\n", "{", "}", "[", "]", "\"", ":", ",", "choices", "delta",
    "content", "reasoning_content", "usage", "timings", "prompt_tokens", "cache_n", "1e308",
    "-1", "0", "null", "true", "[DONE]", "\"x\"", "\\u0000", "\\ud800", "\xff", "\xc3", " ",
    "finish_reason", "error", "message", "prompt_ms", "predicted_n", "9999999999999999999",
  };
  GRand *rand = g_rand_new_with_seed (1234);
  int ok = 0, failed = 0;

  for (int iter = 0; iter < 3000; iter++)
    {
      GString *s = g_string_new (NULL);
      int n = g_rand_int_range (rand, 1, 120);
      Got g;
      TernRemoteStats st;
      gboolean done;
      GError *e = NULL;

      for (int i = 0; i < n; i++)
        g_string_append (s, words[g_rand_int_range (rand, 0, G_N_ELEMENTS (words))]);
      if (iter % 3 == 0)
        {
          /* A valid stream with bytes flipped. */
          g_string_assign (s, valid);
          for (int k = g_rand_int_range (rand, 1, 6); k > 0; k--)
            s->str[g_rand_int_range (rand, 0, (gint32) s->len)] = (char) g_rand_int_range (rand, 0, 256);
        }
      got_init (&g);
      gsize c1 = (gsize) g_rand_int_range (rand, 0, (gint32) s->len + 1);
      if (feed_cut (s->str, s->len, c1, c1, &g, &st, &done, &e))
        ok++;
      else
        {
          failed++;
          CHECK (e && e->message[0] && g_utf8_validate (e->message, -1, NULL),
                 "a failure has a readable message");
        }
      CHECK (g_utf8_validate (g.content->str, (gssize) g.content->len, NULL),
             "only UTF-8 reaches the caller");
      g_clear_error (&e);
      got_free (&g);
      g_string_free (s, TRUE);
    }
  CHECK (ok > 0 && failed > 0, "random input: %d decoded, %d refused (both expected)", ok, failed);
  g_rand_free (rand);
}

static void
expect_http (guint status, const char *retry, const char *body, const char *model, int code,
             const char *words)
{
  g_autoptr (GError) e = NULL;

  tern_remote_set_http_error (&e, "http://h/v1", model, status, retry, body, body ? strlen (body) : 0);
  CHECK (e && e->domain == TERN_REMOTE_ERROR && e->code == code && strstr (e->message, words),
         "HTTP %u: %s", status, e ? e->message : "no error");
}

static void
test_http_errors (void)
{
  expect_http (401, NULL, "{\"error\":{\"message\":\"Invalid API Key\"}}", "m", TERN_REMOTE_ERROR_AUTH,
               "refused the API key (HTTP 401 (Invalid API Key))");
  expect_http (403, NULL, NULL, "m", TERN_REMOTE_ERROR_AUTH, "HTTP 403");
  expect_http (429, "12", NULL, "m", TERN_REMOTE_ERROR_BUSY, "wait 12 seconds");
  expect_http (429, NULL, NULL, "m", TERN_REMOTE_ERROR_BUSY, "try again in a moment");
  expect_http (429, "soon\x01\n", NULL, "m", TERN_REMOTE_ERROR_BUSY, "until soon");
  expect_http (429, "99999999999999999999999", NULL, "m", TERN_REMOTE_ERROR_BUSY, "until 9999");
  /* g_ascii_strtoull skips leading white space: such a value is quoted,
   * its control characters escaped (tern_manager_wait_advice, the Hub's
   * too), never pasted as sent (found by tests/fuzz/fuzz-remote). */
  expect_http (429, "\v\f\r5", NULL, "m", TERN_REMOTE_ERROR_BUSY, "until \\x0b\\x0c\\x0d5 before");
  expect_http (503, "+5", NULL, "m", TERN_REMOTE_ERROR_BUSY, "until +5 before");
  expect_http (503, "5", NULL, "m", TERN_REMOTE_ERROR_BUSY, "busy (HTTP 503)");
  expect_http (503, NULL, NULL, "m", TERN_REMOTE_ERROR_HTTP, "answered HTTP 503");
  expect_http (404, NULL, "{\"message\":\"The model `m` does not exist.\",\"code\":404}", "m",
               TERN_REMOTE_ERROR_MODEL, "has no model 'm'");
  expect_http (404, NULL, "<html>Not Found</html>", "m", TERN_REMOTE_ERROR_HTTP, "has no chat endpoint");
  expect_http (500, NULL, "{\"error\":{\"message\":[1]}}", "m", TERN_REMOTE_ERROR_HTTP, "answered HTTP 500");
  expect_http (502, NULL, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "m", TERN_REMOTE_ERROR_HTTP,
               "HTTP 502 ([[[[");
}

static void
test_urls (void)
{
  const char *bad[] = { NULL, "", "gpu:8000", "ftp://h/", "http://", "http:///v1", "http://h/?q", "http://h/#f" };
  g_autoptr (GError) e = NULL;
  TernRemote *r;

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      r = tern_remote_new (bad[i], NULL, &e);
      CHECK (!r && e && e->code == TERN_REMOTE_ERROR_URL, "bad URL '%s' refused", bad[i] ? bad[i] : "(null)");
      tern_remote_free (r);
      g_clear_error (&e);
    }
  r = tern_remote_new ("http://h:8000", "k", &e);
  CHECK (r && !strcmp (tern_remote_base_url (r), "http://h:8000/v1"), "/v1 is added");
  tern_remote_free (r);
  r = tern_remote_new ("https://h/v1///", NULL, &e);
  CHECK (r && !strcmp (tern_remote_base_url (r), "https://h/v1"), "trailing slashes go");
  tern_remote_free (r);
  r = tern_remote_new ("http://h/v1", "a\r\nX-Injected: 1", &e);
  CHECK (!r && e, "a key with a line break is refused");
  tern_remote_free (r);
}

int
main (void)
{
  test_valid_every_cut ();
  test_llama_timings ();
  test_hostile ();
  test_stop ();
  test_random ();
  test_http_errors ();
  test_urls ();
  printf ("%d checks, %d failed\n", n_checks, n_failed);
  return n_failed ? 1 : 0;
}
