/* tern-remote.c: a client for OpenAI-compatible servers (docs/REMOTE.md).
 *
 * The stream is Server-Sent Events: "data: {json}" lines, a blank line ending
 * each event, "data: [DONE]" at the end. Every server sends a little more
 * than OpenAI documents, and this reads all of it:
 *   - usage {prompt_tokens, completion_tokens, prompt_tokens_details
 *     {cached_tokens}} in the last chunk (stream_options.include_usage);
 *   - llama-server: "timings" {prompt_n, prompt_ms, predicted_n, predicted_ms,
 *     cache_n, prompt_per_second, predicted_per_second} beside it;
 *   - tern-cli serve: usage.timings {prefill_tokens, prefill_tok_s,
 *     decode_tok_s, restored_tokens, ...} (server/tern-server.c);
 *   - delta.reasoning_content (llama-server, Tern, vLLM) or delta.reasoning
 *     (newer vLLM): the thinking, kept apart from the answer;
 *   - {"error": ...} as an event when a server fails after the first bytes.
 * A server is not trusted: lines and events are capped, JSON nesting is
 * checked before json-glib (whose parser recurses once per level), and any
 * member may be missing or of the wrong type. */
#include "tern-remote.h"

#include "tern-manager-private.h"
#include "tn-text.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <stdlib.h>
#include <string.h>

/* A chunk is a few hundred bytes; a line longer than this is not an SSE
 * stream from a chat server, and buffering it whole would let a server take
 * all our memory. */
#define REMOTE_MAX_LINE (1u << 20)
/* A chunk nests 5 levels (chunk, choices, choice, delta, ...); a plain JSON
 * answer or an error body a few more. */
#define REMOTE_MAX_DEPTH 32
/* /v1/models, an error body or a non-streamed answer. */
#define REMOTE_MAX_BODY (16u << 20)
#define REMOTE_MAX_QUOTE 300

G_DEFINE_QUARK (tern-remote-error-quark, tern_remote_error)

struct _TernRemote
{
  char        *base;  /* ".../v1", no trailing '/' */
  char        *shown; /* base for messages: a password in it hidden */
  guint        timeout_s; /* the longest wait for a read: TERN_REMOTE_TIMEOUT */
  char        *key;
  SoupSession *session;
};

/* ------------------------------------------------------------- helpers */

/* A server's words inside our sentence: one line, printable, short. */
static char *
quote_text (const char *text, gsize len)
{
  GString *s = g_string_new (NULL);
  const char *end = text + len, *p = text;

  while (p < end && s->len < REMOTE_MAX_QUOTE)
    {
      gunichar c = g_utf8_get_char_validated (p, end - p);
      if (c == (gunichar) -1 || c == (gunichar) -2)
        {
          g_string_append_c (s, '?');
          p++;
          continue;
        }
      if (c < 0x20 || c == 0x7f)
        g_string_append_c (s, ' ');
      else
        g_string_append_unichar (s, c);
      p = g_utf8_next_char (p);
    }
  if (p < end)
    g_string_append (s, "...");
  return g_string_free (s, FALSE);
}

static JsonNode *
parse_json (const char *data, gsize len)
{
  g_autoptr (JsonParser) parser = NULL;

  /* Strict JSON first: json-glib takes C's escapes ("\\101") and makes
   * bytes of them that need not be UTF-8, and recurses once per level. */
  if (len > REMOTE_MAX_BODY
      || tn_json_check (data, len, "answer", REMOTE_MAX_DEPTH, TN_JSON_NO_HUGE_NUMBERS,
                         NULL) != TN_OK)
    return NULL;
  parser = json_parser_new_immutable ();
  if (!json_parser_load_from_data (parser, data, (gssize) len, NULL))
    return NULL;
  return json_node_ref (json_parser_get_root (parser));
}

static JsonObject *
member_object (JsonObject *o, const char *name)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  return n && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
}

static const char *
member_string (JsonObject *o, const char *name)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  return n && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
           ? json_node_get_string (n) : NULL;
}

/* A finite number, or FALSE. */
static gboolean
member_number (JsonObject *o, const char *name, double *out)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  GType t;
  double v;

  if (!n || !JSON_NODE_HOLDS_VALUE (n))
    return FALSE;
  t = json_node_get_value_type (n);
  if (t == G_TYPE_INT64)
    v = (double) json_node_get_int (n);
  else if (t == G_TYPE_DOUBLE)
    v = json_node_get_double (n);
  else
    return FALSE;
  if (!(v >= -1e15 && v <= 1e15))
    return FALSE;
  *out = v;
  return TRUE;
}

/* A count: a whole number >= 0. */
static gboolean
member_count (JsonObject *o, const char *name, gint64 *out)
{
  double v;

  if (!member_number (o, name, &v) || v < 0)
    return FALSE;
  *out = (gint64) v;
  return TRUE;
}

/* The text of an HTML page (a proxy's or a web server's error page): the
 * markup out, runs of white space folded, so that the sentence quotes
 * "502 Bad Gateway nginx", not "<html>\r\n<head><title>...". Entities
 * stay as written. */
static char *
html_text (const char *body, gsize len)
{
  GString *s = g_string_new (NULL);
  gboolean in_tag = FALSE, space = FALSE;

  for (gsize i = 0; i < len && s->len < REMOTE_MAX_QUOTE; i++)
    {
      char c = body[i];
      if (c == '<')
        in_tag = TRUE;
      else if (c == '>' && in_tag)
        {
          in_tag = FALSE;
          space = TRUE;
        }
      else if (in_tag)
        continue;
      else if (g_ascii_isspace (c))
        space = TRUE;
      else
        {
          if (space && s->len)
            g_string_append_c (s, ' ');
          space = FALSE;
          g_string_append_c (s, c);
        }
    }
  return g_string_free (s, FALSE);
}

/* The message of an error body: OpenAI, Tern and llama-server say
 * {"error": {"message"}}, vLLM {"message"}, some proxies {"error": "text"}. */
static char *
error_body_message (const char *body, gsize len)
{
  g_autoptr (JsonNode) root = body && len ? parse_json (body, len) : NULL;
  JsonObject *o = root && JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  const char *m = NULL;

  if (o)
    {
      JsonObject *e = member_object (o, "error");
      m = e ? member_string (e, "message") : member_string (o, "error");
      if (!m)
        m = member_string (o, "message");
      if (!m)
        m = member_string (o, "detail");
    }
  if (m && *m)
    return quote_text (m, strlen (m));
  if (body && len && !o)
    {
      gsize skip = 0;

      while (skip < len && g_ascii_isspace (body[skip]))
        skip++;
      if (skip < len && body[skip] == '<')
        {
          g_autofree char *text = html_text (body + skip, len - skip);
          return *text ? quote_text (text, MIN (strlen (text), 200)) : NULL;
        }
      return quote_text (body, MIN (len, 200));
    }
  return NULL;
}

void
tern_remote_set_http_error (GError     **error,
                            const char  *where,
                            const char  *model,
                            guint        status,
                            const char  *retry_after,
                            const char  *body,
                            gsize        body_len)
{
  g_autofree char *said = error_body_message (body, body_len);
  g_autofree char *because = said ? g_strdup_printf (" (%s)", said) : g_strdup ("");

  if (status == 401 || status == 403)
    {
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_AUTH,
                   _("%s refused the API key (HTTP %u%s): check the key of this connection, or set one "
                     "if the server needs it"),
                   where, status, because);
      return;
    }
  if (status == 429 || (status == 503 && retry_after))
    {
      g_autofree char *wait = tern_manager_wait_advice (retry_after);

      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_BUSY,
                   _("%s is busy (HTTP %u%s): %s"), where, status, because, wait);
      return;
    }
  if (status == 404 && model)
    {
      /* vLLM and Ollama answer 404 for an unknown model; a 404 that does not
       * mention a model is a wrong URL. */
      if (said && strstr (said, "odel"))
        g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_MODEL,
                     _("%s has no model '%s'%s: pick one of the models it lists"), where, model,
                     because);
      else
        g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_HTTP,
                     _("%s has no chat endpoint (HTTP 404%s): is the address that of an "
                       "OpenAI-compatible server, such as http://host:8000/v1?"),
                     where, because);
      return;
    }
  g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_HTTP, _("%s answered HTTP %u%s"), where,
               status, because);
}

/* ------------------------------------------------------------ the stream */

struct _TernRemoteStream
{
  char               *where;
  TernRemotePieceFunc piece_func;
  gpointer            user_data;
  GString            *line;   /* the line being read, without its newline */
  GString            *data;   /* the data lines of the event being read */
  gboolean            has_data;
  gboolean            skip_lf; /* the last line ended with CR: a LF next is part of it */
  gboolean            done;   /* [DONE] or a finish_reason */
  gboolean            dead;   /* failed or stopped: takes nothing more */
  gboolean            stopped;
  gint64              pieces;
  TernRemoteStats     st;
};

TernRemoteStream *
tern_remote_stream_new (const char *where, TernRemotePieceFunc piece_func, gpointer user_data)
{
  TernRemoteStream *s = g_new0 (TernRemoteStream, 1);

  s->where = g_strdup (where);
  s->piece_func = piece_func;
  s->user_data = user_data;
  s->line = g_string_new (NULL);
  s->data = g_string_new (NULL);
  s->st.prompt_tokens = -1;
  s->st.cached_tokens = -1;
  s->st.completion_tokens = -1;
  return s;
}

void
tern_remote_stream_free (TernRemoteStream *s)
{
  if (!s)
    return;
  g_free (s->where);
  g_string_free (s->line, TRUE);
  g_string_free (s->data, TRUE);
  g_free (s);
}

gboolean
tern_remote_stream_done (TernRemoteStream *s)
{
  return s->done;
}

static void
read_usage (TernRemoteStream *s, JsonObject *chunk)
{
  JsonObject *usage = member_object (chunk, "usage");
  JsonObject *details = member_object (usage, "prompt_tokens_details");
  JsonObject *tern = member_object (usage, "timings");
  JsonObject *llama = member_object (chunk, "timings");
  gint64 n;
  double v;

  if (usage)
    {
      if (member_count (usage, "prompt_tokens", &n))
        s->st.prompt_tokens = n;
      if (member_count (usage, "completion_tokens", &n))
        s->st.completion_tokens = n;
      if (member_count (details, "cached_tokens", &n))
        s->st.cached_tokens = n;
    }
  if (tern && member_number (tern, "decode_tok_s", &v) && v >= 0)
    {
      s->st.decode_tok_s = v;
      if (member_number (tern, "prefill_tok_s", &v) && v >= 0)
        s->st.prefill_tok_s = v;
      if (s->st.cached_tokens < 0 && member_count (tern, "restored_tokens", &n))
        s->st.cached_tokens = n;
      s->st.timings = TERN_REMOTE_TIMINGS_TERN;
    }
  if (llama)
    {
      double pn = 0, pms = 0, gn = 0, gms = 0;
      gboolean any = FALSE;

      /* llama-server sends timings with every chunk, the last one whole. */
      if (member_number (llama, "prompt_n", &pn) && member_number (llama, "prompt_ms", &pms)
          && pn >= 0 && pms > 0)
        {
          s->st.prefill_tok_s = pn / (pms / 1e3);
          any = TRUE;
        }
      if (member_number (llama, "predicted_n", &gn) && member_number (llama, "predicted_ms", &gms)
          && gn > 0 && gms > 0)
        {
          s->st.decode_tok_s = gn / (gms / 1e3);
          any = TRUE;
        }
      if (member_count (llama, "cache_n", &n))
        {
          s->st.cached_tokens = n;
          if (pn >= 0 && s->st.prompt_tokens < 0)
            s->st.prompt_tokens = n + (gint64) pn;
        }
      if (any)
        s->st.timings = TERN_REMOTE_TIMINGS_LLAMA_SERVER;
    }
}

static gboolean
emit (TernRemoteStream *s, TernRemotePiece kind, const char *text, GError **error)
{
  gsize len = text ? strlen (text) : 0;

  if (!len)
    return TRUE;
  if (!g_utf8_validate (text, (gssize) len, NULL))
    {
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                   _("%s sent text that is not UTF-8"), s->where);
      return FALSE;
    }
  s->pieces++;
  if (s->piece_func && !s->piece_func (kind, text, len, s->user_data))
    {
      s->stopped = TRUE;
      g_strlcpy (s->st.finish_reason, "cancelled", sizeof s->st.finish_reason);
    }
  return TRUE;
}

/* One chunk: a chat.completion.chunk, or a whole chat.completion when a
 * server ignored stream: true. */
static gboolean
handle_chunk (TernRemoteStream *s, JsonObject *chunk, GError **error)
{
  JsonObject *err = member_object (chunk, "error");
  JsonNode *choices;

  if (err || member_string (chunk, "error"))
    {
      const char *m = err ? member_string (err, "message") : member_string (chunk, "error");
      g_autofree char *q = m ? quote_text (m, strlen (m)) : g_strdup ("?");
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_SERVER,
                   _("%s stopped the answer with an error: %s"), s->where, q);
      return FALSE;
    }
  read_usage (s, chunk);
  choices = json_object_get_member (chunk, "choices");
  if (choices && JSON_NODE_HOLDS_ARRAY (choices) && json_array_get_length (json_node_get_array (choices)))
    {
      JsonNode *c0 = json_array_get_element (json_node_get_array (choices), 0);
      JsonObject *choice = JSON_NODE_HOLDS_OBJECT (c0) ? json_node_get_object (c0) : NULL;
      JsonObject *delta = member_object (choice, "delta");
      const char *reasoning, *fin;

      if (!delta)
        delta = member_object (choice, "message");
      reasoning = member_string (delta, "reasoning_content");
      if (!reasoning)
        reasoning = member_string (delta, "reasoning");
      if (!emit (s, TERN_REMOTE_PIECE_REASONING, reasoning, error)
          || (!s->stopped && !emit (s, TERN_REMOTE_PIECE_CONTENT, member_string (delta, "content"), error)))
        return FALSE;
      fin = member_string (choice, "finish_reason");
      if (fin && *fin && !s->stopped)
        {
          g_strlcpy (s->st.finish_reason, fin, sizeof s->st.finish_reason);
          s->done = TRUE;
        }
    }
  return TRUE;
}

static gboolean
dispatch (TernRemoteStream *s, GError **error)
{
  g_autoptr (JsonNode) root = NULL;
  const char *d = s->data->str;
  gsize n = s->data->len;

  s->has_data = FALSE;
  while (n && g_ascii_isspace (*d))
    d++, n--;
  while (n && g_ascii_isspace (d[n - 1]))
    n--;
  if (n == 6 && !memcmp (d, "[DONE]", 6))
    {
      s->done = TRUE;
      s->dead = TRUE;
      return TRUE;
    }
  if (n == 0)
    return TRUE;
  if (!g_utf8_validate (d, (gssize) n, NULL))
    {
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                   _("%s sent text that is not UTF-8"), s->where);
      return FALSE;
    }
  root = parse_json (d, n);
  if (!root || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_autofree char *q = quote_text (d, MIN (n, 80));
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                   _("%s sent a stream event that is not a JSON object: \"%s\""), s->where, q);
      return FALSE;
    }
  return handle_chunk (s, json_node_get_object (root), error);
}

/* One line of the event stream (the SSE format of the HTML standard). */
static gboolean
handle_line (TernRemoteStream *s, GError **error)
{
  const char *l = s->line->str;
  gsize n = s->line->len;
  gboolean ok = TRUE;

  if (n == 0)
    {
      if (s->has_data)
        ok = dispatch (s, error);
      g_string_truncate (s->data, 0);
    }
  else if (n >= 5 && !memcmp (l, "data:", 5))
    {
      gsize skip = n > 5 && l[5] == ' ' ? 6 : 5;
      if (s->has_data)
        g_string_append_c (s->data, '\n');
      if (s->data->len + (n - skip) > REMOTE_MAX_LINE)
        {
          g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                       _("%s sent a stream event longer than %u bytes"), s->where, REMOTE_MAX_LINE);
          ok = FALSE;
        }
      else
        {
          g_string_append_len (s->data, l + skip, (gssize) (n - skip));
          s->has_data = TRUE;
        }
    }
  /* Comments (":"), "event:", "id:" and "retry:" lines carry nothing we use. */
  g_string_truncate (s->line, 0);
  return ok;
}

gboolean
tern_remote_stream_feed (TernRemoteStream *s, const char *data, gsize len, GError **error)
{
  for (gsize i = 0; i < len && !s->dead && !s->stopped; i++)
    {
      char c = data[i];
      if (s->skip_lf)
        {
          s->skip_lf = FALSE;
          if (c == '\n')
            continue;
        }
      if (c == '\n' || c == '\r')
        {
          s->skip_lf = c == '\r';
          if (!handle_line (s, error))
            {
              s->dead = TRUE;
              return FALSE;
            }
          continue;
        }
      if (s->line->len >= REMOTE_MAX_LINE)
        {
          g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                       _("%s sent a stream line longer than %u bytes"), s->where, REMOTE_MAX_LINE);
          s->dead = TRUE;
          return FALSE;
        }
      g_string_append_c (s->line, c);
    }
  return TRUE;
}

void
tern_remote_stream_stats (TernRemoteStream *s, TernRemoteStats *stats)
{
  *stats = s->st;
  if (stats->completion_tokens < 0)
    stats->completion_tokens = s->pieces;
}

/* ------------------------------------------------------------ the client */

TernRemote *
tern_remote_new (const char *base_url, const char *api_key, GError **error)
{
  g_autoptr (GUri) uri = NULL;
  g_autofree char *agent = NULL;
  TernRemote *r;
  const char *scheme, *timeout;
  guint64 timeout_s = 600;
  gsize n;

  if (base_url)
    uri = g_uri_parse (base_url, G_URI_FLAGS_NONE, NULL);
  scheme = uri ? g_uri_get_scheme (uri) : NULL;
  if (!scheme || (g_ascii_strcasecmp (scheme, "http") && g_ascii_strcasecmp (scheme, "https"))
      || !g_uri_get_host (uri) || !*g_uri_get_host (uri) || g_uri_get_query (uri)
      || g_uri_get_fragment (uri))
    {
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_URL,
                   _("'%s' is not a server address: give an http:// or https:// URL such as "
                     "http://gpu-box:8000/v1"),
                   base_url ? base_url : "");
      return NULL;
    }
  if (api_key && strpbrk (api_key, "\r\n"))
    {
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_AUTH,
                   _("the API key contains a line break; copy the key alone"));
      return NULL;
    }
  /* A big model's prefill can take minutes before the first byte: 10
   * minutes by default; TERN_REMOTE_TIMEOUT for a slower server (or a
   * test). A value that is not a number of seconds is refused, not
   * replaced by the default without a word. */
  timeout = g_getenv ("TERN_REMOTE_TIMEOUT");
  if (timeout && *timeout
      && !g_ascii_string_to_unsigned (timeout, 10, 1, 86400, &timeout_s, NULL))
    {
      g_autofree char *q = quote_text (timeout, strlen (timeout));
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_URL,
                   _("TERN_REMOTE_TIMEOUT=%s is not a number of seconds from 1 to 86400; unset "
                     "it for the default, 600"),
                   q);
      return NULL;
    }
  r = g_new0 (TernRemote, 1);
  r->timeout_s = (guint) timeout_s;
  r->base = g_strdup (base_url);
  n = strlen (r->base);
  while (n > 0 && r->base[n - 1] == '/')
    r->base[--n] = '\0';
  /* The API lives under /v1; "http://host:8000" is how people write it. */
  if (!g_str_has_suffix (r->base, "/v1"))
    {
      char *with = g_strconcat (r->base, "/v1", NULL);
      g_free (r->base);
      r->base = with;
    }
  r->shown = tern_remote_url_shown (r->base);
  r->key = api_key && *api_key ? g_strdup (api_key) : NULL;
  agent = g_strdup_printf ("tern/%s", tern_manager_app_version ());
  r->session = soup_session_new_with_options ("timeout", r->timeout_s, "idle-timeout", 60,
                                              "user-agent", agent, NULL);
  return r;
}

void
tern_remote_free (TernRemote *r)
{
  if (!r)
    return;
  g_free (r->base);
  g_free (r->shown);
  if (r->key)
    {
      memset (r->key, 0, strlen (r->key));
      g_free (r->key);
    }
  g_clear_object (&r->session);
  g_free (r);
}

const char *
tern_remote_base_url (TernRemote *r)
{
  return r->base;
}

/* "http://user:password@proxy/v1" works (libsoup answers a Basic
 * challenge with it), but every message names the address: the password
 * would go to the terminal, logs and bug reports. */
char *
tern_remote_url_shown (const char *url)
{
  g_autoptr (GUri) norm = url ? g_uri_parse (url, G_URI_FLAGS_HAS_PASSWORD, NULL) : NULL;

  return norm && g_uri_get_password (norm) ? g_uri_to_string_partial (norm, G_URI_HIDE_PASSWORD)
                                           : g_strdup (url);
}

const char *
tern_remote_shown_url (TernRemote *r)
{
  return r->shown;
}

static SoupMessage *
new_message (TernRemote *r, const char *method, const char *path)
{
  g_autofree char *url = g_strconcat (r->base, path, NULL);
  SoupMessage *msg = soup_message_new (method, url);

  /* A redirect is not followed: libsoup turns a 301/302 POST into a GET
   * (a chat request that arrives without its body, at a host the user did
   * not name), and the prompt and key belong to the address given. The
   * answer says where the server points instead (status_error). */
  if (msg)
    soup_message_add_flags (msg, SOUP_MESSAGE_NO_REDIRECT);
  if (msg && r->key)
    {
      g_autofree char *auth = g_strconcat ("Bearer ", r->key, NULL);
      soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", auth);
    }
  return msg;
}

static void
set_send_error (TernRemote *r, GError *e, GError **error)
{
  if (g_error_matches (e, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_propagate_error (error, e);
      return;
    }
  if (g_error_matches (e, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
    {
      /* Connected (or a firewall that drops the packets), then silence:
       * "cannot reach ... is the server running?" would send the user to
       * look at the wrong thing. */
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_UNREACHABLE,
                   _("%s did not answer within %u seconds: it may be overloaded, stuck, or still "
                     "reading a very long prompt (TERN_REMOTE_TIMEOUT sets how long to wait)"),
                   r->shown, r->timeout_s);
      g_error_free (e);
      return;
    }
  g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_UNREACHABLE,
               _("cannot reach %s: %s (is the server running, and is the address right?)"), r->shown,
               e->message);
  g_error_free (e);
}

/* An answer other than 200 as an error: a redirect names where it points
 * (it is not followed, new_message), any other status is
 * tern_remote_set_http_error's. */
static void
status_error (TernRemote *r, SoupMessage *msg, const char *model, GBytes *body, GError **error)
{
  SoupMessageHeaders *h = soup_message_get_response_headers (msg);
  guint status = soup_message_get_status (msg);

  if (status >= 300 && status < 400)
    {
      const char *to = soup_message_headers_get_one (h, "Location");
      g_autofree char *q = to && *to ? quote_text (to, strlen (to)) : NULL;

      if (q)
        g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_HTTP,
                     _("%s redirects to %s (HTTP %u), which is not followed: if that is the "
                       "server, use its address instead"),
                     r->shown, q, status);
      else
        g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_HTTP,
                     _("%s answered HTTP %u, a redirect without a Location: is the address "
                       "that of an OpenAI-compatible server, such as http://host:8000/v1?"),
                     r->shown, status);
      return;
    }
  tern_remote_set_http_error (error, r->shown, model, status,
                              soup_message_headers_get_one (h, "Retry-After"),
                              body ? g_bytes_get_data (body, NULL) : NULL,
                              body ? g_bytes_get_size (body) : 0);
}

/* The whole body, at most REMOTE_MAX_BODY bytes. */
static GBytes *
read_body (GInputStream *in, GCancellable *cancellable, GError **error)
{
  g_autoptr (GByteArray) buf = g_byte_array_new ();
  char chunk[16384];

  for (;;)
    {
      gssize got = g_input_stream_read (in, chunk, sizeof chunk, cancellable, error);
      if (got < 0)
        return NULL;
      if (got == 0)
        break;
      if (buf->len + (gsize) got > REMOTE_MAX_BODY)
        {
          g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                       _("the answer is larger than %u MiB"), REMOTE_MAX_BODY >> 20);
          return NULL;
        }
      g_byte_array_append (buf, (guint8 *) chunk, (guint) got);
    }
  return g_byte_array_free_to_bytes (g_steal_pointer (&buf));
}

/* An id is printed (tern-cli's --list-models, "MODEL on URL") and shown:
 * one with a control character (C0, DEL, C1: a terminal escape that clears
 * or retitles the terminal) is nobody's model name, nor one with a bidi
 * control or an invisible character (tn_text_hidden_char), which makes the
 * line read as another or two ids look the same. The id is sent back as
 * it is, so it is left out rather than shown escaped. */
static gboolean
printable_id (const char *id)
{
  for (const char *p = id; *p; p = g_utf8_next_char (p))
    if (g_unichar_iscntrl (g_utf8_get_char (p))
        || tn_text_hidden_char (p, (size_t) (g_utf8_next_char (p) - p)))
      return FALSE;
  return TRUE;
}

char **
tern_remote_list_models (TernRemote *r, GCancellable *cancellable, GError **error)
{
  g_autoptr (SoupMessage) msg = new_message (r, "GET", "/models");
  g_autoptr (GInputStream) in = NULL;
  g_autoptr (GBytes) body = NULL;
  g_autoptr (JsonNode) root = NULL;
  g_autoptr (GPtrArray) ids = g_ptr_array_new_with_free_func (g_free);
  GError *e = NULL;
  JsonObject *o;
  JsonNode *data;
  guint status;

  if (!msg)
    {
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_URL, _("'%s' is not a server address"),
                   r->shown);
      return NULL;
    }
  in = soup_session_send (r->session, msg, cancellable, &e);
  if (!in)
    {
      set_send_error (r, e, error);
      return NULL;
    }
  body = read_body (in, cancellable, &e);
  if (!body)
    {
      if (g_error_matches (e, G_IO_ERROR, G_IO_ERROR_CANCELLED) || e->domain == TERN_REMOTE_ERROR)
        g_propagate_error (error, e);
      else
        {
          g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_DISCONNECTED,
                       _("the connection to %s broke while reading its model list: %s"), r->shown,
                       e->message);
          g_error_free (e);
        }
      return NULL;
    }
  status = soup_message_get_status (msg);
  if (status != 200)
    {
      status_error (r, msg, NULL, body, error);
      return NULL;
    }
  root = parse_json (g_bytes_get_data (body, NULL), g_bytes_get_size (body));
  o = root && JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
  /* Ollama's /api/tags says "models"; its /v1/models and all others "data". */
  data = o ? json_object_get_member (o, "data") : NULL;
  if (!data || !JSON_NODE_HOLDS_ARRAY (data))
    {
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                   _("%s/models is not an OpenAI model list ({\"data\": [{\"id\": ...}]})"), r->shown);
      return NULL;
    }
  for (guint i = 0; i < json_array_get_length (json_node_get_array (data)); i++)
    {
      JsonNode *m = json_array_get_element (json_node_get_array (data), i);
      const char *id = JSON_NODE_HOLDS_OBJECT (m) ? member_string (json_node_get_object (m), "id") : NULL;
      if (id && *id && g_utf8_validate (id, -1, NULL) && strlen (id) <= 512 && printable_id (id))
        g_ptr_array_add (ids, g_strdup (id));
    }
  g_ptr_array_add (ids, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&ids), FALSE);
}

void
tern_remote_params_init (TernRemoteParams *p)
{
  memset (p, 0, sizeof *p);
  p->temperature = -1;
  p->top_p = -1;
  p->top_k = -1;
  p->min_p = -1;
  p->repeat_penalty = 0;
  p->thinking = -1;
}

static char *
request_body (const char *model, const TernRemoteMessage *msgs, gsize n, const TernRemoteParams *p)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "model");
  json_builder_add_string_value (b, model);
  json_builder_set_member_name (b, "messages");
  json_builder_begin_array (b);
  for (gsize i = 0; i < n; i++)
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "role");
      json_builder_add_string_value (b, msgs[i].role);
      json_builder_set_member_name (b, "content");
      if (msgs[i].n_images == 0)
        json_builder_add_string_value (b, msgs[i].content ? msgs[i].content : "");
      else
        {
          /* [image_url..., text]: images before the question, where a
           * local run puts them (the servers keep the parts' order). */
          json_builder_begin_array (b);
          for (gsize k = 0; k < msgs[i].n_images; k++)
            {
              const TernRemoteImage *im = &msgs[i].images[k];
              gsize len;
              const guchar *data = g_bytes_get_data (im->bytes, &len);
              g_autofree char *b64 = g_base64_encode (data, len);
              g_autofree char *url = g_strconcat ("data:", im->mime, ";base64,", b64, NULL);

              json_builder_begin_object (b);
              json_builder_set_member_name (b, "type");
              json_builder_add_string_value (b, "image_url");
              json_builder_set_member_name (b, "image_url");
              json_builder_begin_object (b);
              json_builder_set_member_name (b, "url");
              json_builder_add_string_value (b, url);
              json_builder_end_object (b);
              json_builder_end_object (b);
            }
          json_builder_begin_object (b);
          json_builder_set_member_name (b, "type");
          json_builder_add_string_value (b, "text");
          json_builder_set_member_name (b, "text");
          json_builder_add_string_value (b, msgs[i].content ? msgs[i].content : "");
          json_builder_end_object (b);
          json_builder_end_array (b);
        }
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_set_member_name (b, "stream");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_set_member_name (b, "stream_options");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "include_usage");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_end_object (b);
  if (p->max_tokens > 0)
    {
      json_builder_set_member_name (b, "max_tokens");
      json_builder_add_int_value (b, p->max_tokens);
    }
  if (p->temperature >= 0)
    {
      json_builder_set_member_name (b, "temperature");
      json_builder_add_double_value (b, p->temperature);
    }
  if (p->top_p >= 0)
    {
      json_builder_set_member_name (b, "top_p");
      json_builder_add_double_value (b, p->top_p);
    }
  if (p->top_k >= 0)
    {
      json_builder_set_member_name (b, "top_k");
      json_builder_add_int_value (b, p->top_k);
    }
  if (p->min_p >= 0)
    {
      json_builder_set_member_name (b, "min_p");
      json_builder_add_double_value (b, p->min_p);
    }
  if (p->repeat_penalty > 0)
    {
      json_builder_set_member_name (b, "repeat_penalty");
      json_builder_add_double_value (b, p->repeat_penalty);
    }
  if (p->seed_set)
    {
      json_builder_set_member_name (b, "seed");
      /* JSON numbers are doubles to most servers: keep the seed exact. */
      json_builder_add_int_value (b, (gint64) (p->seed & ((1ull << 53) - 1)));
    }
  if (p->thinking >= 0)
    {
      /* Tern's own switch, and the template switch of vLLM and llama-server
       * (Qwen3's enable_thinking); each server ignores the other's. */
      json_builder_set_member_name (b, "tern");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "thinking");
      json_builder_add_boolean_value (b, p->thinking > 0);
      json_builder_end_object (b);
      json_builder_set_member_name (b, "chat_template_kwargs");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "enable_thinking");
      json_builder_add_boolean_value (b, p->thinking > 0);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return tn_json_escape_unit_separators (json_generator_to_data (gen, NULL), NULL);
}

typedef struct {
  TernRemotePieceFunc fn;
  gpointer            user;
  gint64              t0;
  gint64              t_first;
  gint64              t_last;
  gint64              n;
} Clock;

static gboolean
clock_piece (TernRemotePiece kind, const char *text, gsize len, gpointer user)
{
  Clock *c = user;
  gint64 now = g_get_monotonic_time ();

  if (!c->t_first)
    c->t_first = now;
  c->t_last = now;
  c->n++;
  return c->fn ? c->fn (kind, text, len, c->user) : TRUE;
}

static void
finish_stats (TernRemoteStream *s, const Clock *c, TernRemoteStats *stats)
{
  if (!stats)
    return;
  tern_remote_stream_stats (s, stats);
  stats->total_ms = (g_get_monotonic_time () - c->t0) / 1e3;
  stats->ttft_ms = c->t_first ? (c->t_first - c->t0) / 1e3 : 0;
  if (stats->timings == TERN_REMOTE_TIMINGS_NONE && c->n > 0)
    {
      /* No server figures: the arrival of pieces, which is what the user
       * sees (network and batching included). */
      gint64 fresh = stats->prompt_tokens - MAX (stats->cached_tokens, 0);
      if (stats->prompt_tokens > 0 && fresh > 0 && c->t_first > c->t0)
        stats->prefill_tok_s = fresh / ((c->t_first - c->t0) / 1e6);
      if (stats->completion_tokens > 1 && c->t_last > c->t_first)
        stats->decode_tok_s = (stats->completion_tokens - 1) / ((c->t_last - c->t_first) / 1e6);
      stats->timings = TERN_REMOTE_TIMINGS_CLIENT;
    }
}

gboolean
tern_remote_chat (TernRemote              *r,
                  const char              *model,
                  const TernRemoteMessage *messages,
                  gsize                    n_messages,
                  const TernRemoteParams  *params,
                  TernRemotePieceFunc      piece_func,
                  gpointer                 user_data,
                  TernRemoteStats         *stats,
                  GCancellable            *cancellable,
                  GError                 **error)
{
  g_autoptr (SoupMessage) msg = new_message (r, "POST", "/chat/completions");
  g_autoptr (GInputStream) in = NULL;
  g_autoptr (GBytes) req = NULL;
  g_autofree char *where = NULL;
  TernRemoteParams defaults;
  TernRemoteStream *s;
  Clock clock = { piece_func, user_data, g_get_monotonic_time (), 0, 0, 0 };
  GError *e = NULL;
  gboolean ok = FALSE;
  const char *ctype;
  guint status;
  char buf[16384];

  if (stats)
    {
      memset (stats, 0, sizeof *stats);
      stats->prompt_tokens = stats->cached_tokens = -1;
    }
  if (!params)
    {
      tern_remote_params_init (&defaults);
      params = &defaults;
    }
  if (!msg)
    {
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_URL, _("'%s' is not a server address"),
                   r->shown);
      return FALSE;
    }
  for (gsize i = 0; i < n_messages; i++)
    for (gsize k = 0; k < messages[i].n_images; k++)
      if (g_bytes_get_size (messages[i].images[k].bytes) > TERN_REMOTE_MAX_IMAGE_BYTES)
        {
          g_autofree char *size = tern_manager_format_size (g_bytes_get_size (messages[i].images[k].bytes));

          g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_IMAGE,
                       _("An image of %s is larger than %d MiB, more than servers accept; "
                         "send a smaller copy"),
                       size, TERN_REMOTE_MAX_IMAGE_BYTES >> 20);
          return FALSE;
        }
  {
    char *text = request_body (model, messages, n_messages, params);
    req = g_bytes_new_take (text, strlen (text));
  }
  soup_message_set_request_body_from_bytes (msg, "application/json", req);
  soup_message_headers_replace (soup_message_get_request_headers (msg), "Accept", "text/event-stream");
  in = soup_session_send (r->session, msg, cancellable, &e);
  if (!in)
    {
      set_send_error (r, e, error);
      return FALSE;
    }
  status = soup_message_get_status (msg);
  if (status != 200)
    {
      g_autoptr (GBytes) body = read_body (in, cancellable, NULL);
      status_error (r, msg, model, body, error);
      return FALSE;
    }
  where = g_strdup (r->shown);
  s = tern_remote_stream_new (where, clock_piece, &clock);
  ctype = soup_message_headers_get_content_type (soup_message_get_response_headers (msg), NULL);
  if (ctype && !g_ascii_strcasecmp (ctype, "application/json"))
    {
      /* A server that ignored stream: true: one chat.completion. */
      g_autoptr (GBytes) body = read_body (in, cancellable, &e);
      g_autoptr (JsonNode) root = body ? parse_json (g_bytes_get_data (body, NULL), g_bytes_get_size (body)) : NULL;
      if (!body)
        g_propagate_error (error, e);
      /* Without "choices" it is some other JSON (a model list, a proxy's
       * status page): taking it for an empty answer would end "successfully"
       * with nothing said. An {"error"} body is handle_chunk's. */
      else if (!root || !JSON_NODE_HOLDS_OBJECT (root)
               || !(json_object_has_member (json_node_get_object (root), "choices")
                    || json_object_has_member (json_node_get_object (root), "error")))
        g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                     _("%s answered with JSON that is not a chat completion"), r->shown);
      else if (handle_chunk (s, json_node_get_object (root), error))
        ok = TRUE;
      finish_stats (s, &clock, stats);
      tern_remote_stream_free (s);
      return ok;
    }
  if (ctype && g_ascii_strcasecmp (ctype, "text/event-stream"))
    {
      /* A web page or a proxy's answer: nothing in it is the stream, and
       * reading on would end in a misleading "closed mid-answer". */
      g_autofree char *q = quote_text (ctype, strlen (ctype));
      g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_PROTOCOL,
                   _("%s answered with %s, not an event stream: is the address that of an "
                     "OpenAI-compatible server, such as http://host:8000/v1?"),
                   r->shown, q);
      finish_stats (s, &clock, stats);
      tern_remote_stream_free (s);
      return FALSE;
    }
  for (;;)
    {
      gssize got = g_input_stream_read (in, buf, sizeof buf, cancellable, &e);
      if (got < 0)
        {
          if (g_error_matches (e, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            {
              g_propagate_error (error, e);
              g_strlcpy (s->st.finish_reason, "cancelled", sizeof s->st.finish_reason);
            }
          else if (g_error_matches (e, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
            {
              g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_DISCONNECTED,
                           _("%s sent nothing for %u seconds in the middle of the answer; the "
                             "text so far is kept"),
                           r->shown, r->timeout_s);
              g_error_free (e);
            }
          else
            {
              g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_DISCONNECTED,
                           _("the connection to %s broke in the middle of the answer (%s); the text "
                             "so far is kept"),
                           r->shown, e->message);
              g_error_free (e);
            }
          break;
        }
      if (got == 0)
        {
          /* The end of the body. An event cut short is dropped (the SSE
           * rule); one whole but for its blank line still counts. */
          if (!s->dead && (s->line->len || s->has_data))
            {
              GError *ignored = NULL;
              if (!tern_remote_stream_feed (s, "\n\n", 2, &ignored))
                g_error_free (ignored);
            }
          if (s->done || s->stopped)
            ok = TRUE;
          else
            g_set_error (error, TERN_REMOTE_ERROR, TERN_REMOTE_ERROR_DISCONNECTED,
                         _("%s closed the connection in the middle of the answer; the text so far "
                           "is kept"),
                         r->shown);
          break;
        }
      if (!tern_remote_stream_feed (s, buf, (gsize) got, error))
        break;
      if (s->stopped || (s->dead && s->done))
        {
          ok = TRUE;
          break;
        }
    }
  finish_stats (s, &clock, stats);
  tern_remote_stream_free (s);
  return ok;
}
