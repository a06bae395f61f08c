/* OpenAI-compatible server: HTTP side (the server's main context: checks on
 * the head, handlers, answers and streams) and the engine worker (one
 * thread, owning every session). A request's body is read into its job in
 * tern-request.c; connections are accepted and timed in tern-conn.c. */
#include "tern-server-private.h"
#include "tern-toolcall.h"

#include <glib-unix.h>
#include <gio/gunixsocketaddress.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>


#define DEFAULT_QUEUE_MAX 16
#define DEFAULT_BODY_MAX (1024 * 1024)
/* With images: OpenAI's limit for one uploaded image, base64 in the body. */
#define DEFAULT_BODY_MAX_VISION (20 * 1024 * 1024)
/* Threads decoding images (PNG inflate, JPEG): off the HTTP context, and
 * off the engine worker so that a big image does not hold up the queue. */
#define DECODE_THREADS 2
/* Request bodies read (checked, parsed) at once, off the server's context:
 * two keep one 8 MB body from holding up every other request's, and the
 * bodies they hold are already bounded by the connections' cap. */
#define PARSE_THREADS 2
/* Encoded images kept for reuse: a client sends a conversation's image again
 * with every turn, and encoding one costs far more than answering (seconds
 * to minutes on a CPU, docs/VISION.md), so the last few are kept. Gemma 3 4B:
 * 256 x 2560 floats, 2.6 MiB each. */
#define IMAGE_CACHE_SIZE 8
/* and at most this many bytes of them (Gemma 4 31B at 1120 tokens: 23 MiB). */
#define IMAGE_CACHE_BYTES ((gsize)512 << 20)
#define DEFAULT_PINS 4
/* Seconds a client has from connecting to the end of its request's headers
 * and body (slowloris); --request-timeout. */
#define DEFAULT_REQUEST_TIMEOUT_S 30


static job *job_ref(job *j) {
    g_atomic_int_inc(&j->refs);
    return j;
}


#ifdef TERN_HAVE_IMAGEIO
/* Frees images[i]'s decoded picture and takes it out of the server's count. */
static void release_decoded(job *j, int i) {
    TernImage *img = j->images[i].decoded;
    if (!img)
        return;
    const guint64 px = (guint64)img->width * (guint64)img->height;
    tern_server *srv = j->server;
    g_mutex_lock(&srv->image_lock);
    srv->image_pixels_held -= px;
    j->image_pixels -= px;
    g_mutex_unlock(&srv->image_lock);
    tern_image_free(img);
    j->images[i].decoded = NULL;
}
#endif

static void job_unref(job *j) {
    if (!g_atomic_int_dec_and_test(&j->refs))
        return;
    g_atomic_int_dec_and_test(&j->server->jobs_alive);
    g_clear_object(&j->msg);
    for (int i = 0; i < j->n_images; i++) {
        free(j->images[i].cached);
#ifdef TERN_HAVE_IMAGEIO
        release_decoded(j, i);
#endif
        if (j->embd)
            free((void *)j->embd[i].embd);
    }
    tern_request_clear(j);
    if (j->body)
        g_bytes_unref(j->body);
    g_free(j->refusal_param);
    g_free(j->refusal_why);
    g_free(j->embd);
    g_clear_error(&j->image_error);
    g_mutex_clear(&j->lock);
    g_string_free(j->pending, TRUE);
    g_string_free(j->full, TRUE);
    if (j->lp_held)
        g_array_unref(j->lp_held);
    if (j->lp_ready)
        g_array_unref(j->lp_ready);
    if (j->lp_out)
        g_array_unref(j->lp_out);
    for (int i = 0; i < j->n_choices; i++) {
        g_string_free(j->choices[i].text, TRUE);
        if (j->choices[i].lp)
            g_array_unref(j->choices[i].lp);
    }
    g_free(j->choices);
    if (j->ends)
        g_ptr_array_unref(j->ends);
    tern_reasoning_clear(&j->reasoning);
    g_free(j);
}

tern_server_host tern_server_host_read(const char *host) {
    tern_server_host h = {0};
    h.text = !host || !strcmp(host, "localhost") ? "127.0.0.1" : host;
    GInetAddress *a = g_inet_address_new_from_string(h.text);
    if (!a)
        return h;
    h.address = true;
    h.loopback = g_inet_address_get_is_loopback(a);
    h.any = g_inet_address_get_is_any(a);
    h.v6 = g_inet_address_get_family(a) == G_SOCKET_FAMILY_IPV6;
    memcpy(h.bytes, g_inet_address_to_bytes(a), g_inet_address_get_native_size(a));
    g_object_unref(a);
    return h;
}

/* ------------------------------------------------------------ responses */

static char *json_to_text(JsonBuilder *b) {
    JsonNode *root = json_builder_get_root(b);
    JsonGenerator *g = json_generator_new();
    json_generator_set_root(g, root);
    char *s = tn_json_escape_unit_separators(json_generator_to_data(g, NULL), NULL);
    g_object_unref(g);
    json_node_unref(root);
    return s;
}

static void add_common_headers(tern_server *srv, SoupServerMessage *msg) {
    SoupMessageHeaders *h = soup_server_message_get_response_headers(msg);
    if (srv->cors) {
        soup_message_headers_replace(h, "Access-Control-Allow-Origin", srv->cors);
        soup_message_headers_replace(h, "Vary", "Origin");
    }
}

static void respond_json(tern_server *srv, SoupServerMessage *msg, guint status, char *body) {
    add_common_headers(srv, msg);
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_TAKE, body,
                                     strlen(body));
}

char *tern_server_error_body(const char *message, const char *type, const char *param,
                             const char *code) {
    /* A message or a member name can quote the request's bytes (a path,
     * a method, a key the scan stopped at): made valid UTF-8, or the error
     * was not JSON a client could read (GET /v1/models/%FF). */
    char *valid_message = g_utf8_make_valid(message, -1);
    char *valid_param = param ? g_utf8_make_valid(param, -1) : NULL;
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "message");
    json_builder_add_string_value(b, valid_message);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, type);
    json_builder_set_member_name(b, "param");
    if (valid_param)
        json_builder_add_string_value(b, valid_param);
    else
        json_builder_add_null_value(b);
    g_free(valid_message);
    g_free(valid_param);
    json_builder_set_member_name(b, "code");
    if (code)
        json_builder_add_string_value(b, code);
    else
        json_builder_add_null_value(b);
    json_builder_end_object(b);
    json_builder_end_object(b);
    char *s = json_to_text(b);
    g_object_unref(b);
    return s;
}

static void respond_error(tern_server *srv, SoupServerMessage *msg, guint status,
                          const char *type, const char *param, const char *code,
                          const char *fmt, ...) G_GNUC_PRINTF(7, 8);

static void respond_error(tern_server *srv, SoupServerMessage *msg, guint status,
                          const char *type, const char *param, const char *code,
                          const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    respond_json(srv, msg, status, tern_server_error_body(m, type, param, code));
    g_free(m);
}

/* ------------------------------------------------------------ engine side */

static void schedule(job *j, GSourceFunc fn) {
    GSource *src = g_idle_source_new();
    g_source_set_priority(src, G_PRIORITY_DEFAULT);
    g_source_set_callback(src, fn, job_ref(j), (GDestroyNotify)job_unref);
    g_source_attach(src, j->server->context);
    g_source_unref(src);
}

static gboolean flush_stream(gpointer data);
static const char *stop_finish(tn_stop_reason r);

static bool job_abandoned(const job *j) {
    return g_atomic_int_get(&((job *)j)->gone) || g_atomic_int_get(&j->server->stopping);
}

/* Moves the held log-probabilities to lp_ready (j->lock held): their
 * tokens' text is out. */
static void lp_release(job *j) {
    if (j->lp_held && j->lp_held->len) {
        g_array_append_vals(j->lp_ready, j->lp_held->data, j->lp_held->len);
        g_array_set_size(j->lp_held, 0);
    }
}

/* Text for the client: streamed in chunks, or kept for the one answer.
 * The log-probabilities of the tokens up to this text go with it. */
static void job_emit(job *j, const char *text) {
    g_mutex_lock(&j->lock);
    lp_release(j);
    if (j->stream) {
        g_string_append(j->pending, text);
        if (!j->flush_scheduled) {
            j->flush_scheduled = true;
            schedule(j, flush_stream);
        }
    } else {
        g_string_append(j->full, text);
    }
    g_mutex_unlock(&j->lock);
}

/* Characters a token adds to the text: its bytes that start one. */
static glong token_chars(const char *bytes, size_t len) {
    glong n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)bytes[i] & 0xc0) != 0x80;
    return n;
}

static bool on_token(const char *piece, int32_t token, void *user) {
    job *j = user;
    if (job_abandoned(j))
        return false;
    if (token >= 0)
        j->run_tokens++;
    /* A token's entry waits in lp_held until the engine releases text at
     * or after it (held-back bytes of a character, a possible stop string):
     * tokens that end inside a stop string never release any, and are
     * dropped with it (run_job). */
    if (j->logprobs >= 0 && token >= 0) {
        job_logprob e = {.token = token};
        tn_error err;
        const int n = tn_session_token_logprobs(j->lp_session, j->logprobs, &e.logprob, e.top,
                                                &err);
        e.n_top = n > 0 ? n : 0;
        if (n < 0) /* cannot happen inside the callback; an entry still marks the token */
            e.logprob = -INFINITY;
        /* The bytes of its piece the text leaves out (a control token's
         * text), from the engine's detokenizer: text_offset skips them. */
        const tn_tokenizer *tok = tn_model_tokenizer(j->server->model);
        size_t len = 0;
        const char *p = tok ? tn_token_piece(tok, token, &len) : NULL;
        const size_t dropped = tn_session_token_dropped(j->lp_session);
        e.trimmed = p ? (int)token_chars(p, dropped < len ? dropped : len) : 0;
        g_array_append_val(j->lp_held, e);
    }
    if (piece && *piece)
        job_emit(j, piece);
    if (j->server->cfg.token_delay_ms > 0)
        g_usleep((gulong)j->server->cfg.token_delay_ms * 1000);
    return true;
}

/* Prefill progress (pin and request): a client that left, or a stopping
 * server, cancels it between chunks. */
static bool on_progress(int32_t done, int32_t total, void *user) {
    (void)done;
    (void)total;
    return !job_abandoned(user);
}

static gboolean finish_job(gpointer data);

static void set_current(tern_server *srv, job *j, tn_session *s) {
    g_mutex_lock(&srv->current_lock);
    srv->current = j;
    srv->current_session = s;
    g_mutex_unlock(&srv->current_lock);
}

static tn_session_params session_params(const tern_server *srv) {
    tn_session_params sp = tn_session_default_params();
    if (srv->cfg.n_ctx > 0)
        sp.n_ctx = srv->cfg.n_ctx;
    sp.n_threads = srv->cfg.n_threads;
    sp.pin_cache_dir = srv->cfg.pin_cache_dir;
    sp.pin_cache_max_bytes = srv->cfg.pin_cache_max_bytes;
    sp.warn = srv->cfg.warn;
    sp.warn_user = srv->cfg.warn_user;
    return sp;
}

/* The session whose pin is the job's key: kept from an earlier request (a
 * truncation restores it), or the least recently used one re-pinned (from
 * the on-disk snapshot when there is one, else by prefilling). The key is
 * "s" + the system prompt for chat, "r" for raw completions (nothing
 * pinned). */
static int slot_acquire(tern_server *srv, job *j, pin_slot **out, double *pin_ms,
                        int32_t *pin_prefilled, tn_error *err) {
    *pin_ms = 0;
    *pin_prefilled = 0;
    pin_slot *hit = NULL, *lru = NULL, *empty = NULL;
    for (int i = 0; i < srv->cfg.pins_max; i++) {
        pin_slot *s = &srv->slots[i];
        if (!s->session) {
            if (!empty)
                empty = s;
        } else if (s->key && !strcmp(s->key, j->pin_key)) {
            hit = s;
            break;
        } else if (!lru || s->used < lru->used) {
            lru = s;
        }
    }
    if (hit) {
        hit->used = ++srv->clock;
        j->pin_source = "kept";
        *out = hit;
        return TN_OK;
    }
    pin_slot *s = empty ? empty : lru;
    if (!s->session) {
        tn_error e = {0};
        if (tn_session_new(srv->model, session_params(srv), &s->session, &e) != TN_OK) {
            /* Out of memory for one more KV cache: re-pin an existing one. */
            g_warning("another pinned session could not be made (%s); reusing one", e.message);
            s->session = NULL;
            if (!lru) {
                *err = e;
                return TN_ERR_NOMEM;
            }
            s = lru;
        }
    }
    set_current(srv, j, s->session);
    const gint64 t0 = g_get_monotonic_time();
    int rc;
    if (j->pin_key[0] == 'r')
        rc = tn_session_pin_tokens(s->session, NULL, 0, on_progress, j, err);
    else
        rc = tn_session_pin(s->session, j->pin_key + 1, on_progress, j, err);
    *pin_ms = (double)(g_get_monotonic_time() - t0) / 1000.0;
    if (rc != TN_OK) /* the slot's previous pin is still its pin */
        return job_abandoned(j) ? TN_ERR_CANCELLED : rc;
    tn_pin_info info = tn_session_pin_info(s->session);
    *pin_prefilled = info.loaded_from_snapshot ? 0 : info.n_pin;
    j->pin_source = info.loaded_from_snapshot ? "loaded" : "prefilled";
    g_free(s->key);
    s->key = g_strdup(j->pin_key);
    s->used = ++srv->clock;
    *out = s;
    return TN_OK;
}

/* A prompt token's trimmed characters (job_logprob.trimmed): what of its
 * piece the echoed text does not hold (docs/TOKENIZER.md, "The leading
 * space"). A prompt sent as ids is echoed as their text, as the engine's
 * detokenizer makes it: its stream says what each token left out (a control
 * token, the leading space SentencePiece prepends). A prompt sent as text is
 * echoed as sent, so its tokens are found in it one after another: the BOS
 * the tokenizer added holds none of it, a control token written in the text
 * all of its piece, and the "▁" SentencePiece (Llama 2) puts in front of
 * the text, and again after every control token in it, none. */
/* A token tn_tokenize matches in a text as written: the text after it is
 * encoded apart, with a dummy prefix of its own. */
static bool added_token(const tn_tokenizer *tok, int32_t token) {
    const int t = tn_token_type_of(tok, token);
    return t == TN_TOKEN_TYPE_CONTROL || t == TN_TOKEN_TYPE_UNKNOWN ||
           t == TN_TOKEN_TYPE_USER_DEFINED;
}

static int prompt_token_trimmed(job *j, int32_t token) {
    const tn_tokenizer *tok = tn_model_tokenizer(j->server->model);
    size_t len = 0;
    const char *p = tok ? tn_token_piece(tok, token, &len) : NULL;
    if (!p)
        return 0;
    if (j->lp_prompt_ids) {
        /* Only dropped is wanted: the stream builds no text (one allocation
         * per prompt token before). */
        if (tn_detok_stream_skip(&j->lp_prompt, token, NULL) != TN_OK)
            return 0;
        const size_t dropped = j->lp_prompt.dropped;
        return (int)token_chars(p, dropped < len ? dropped : len);
    }
    const char *at = j->lp_echo + j->lp_echo_at;
    const size_t left = j->lp_echo_len - j->lp_echo_at;
    const bool first = j->lp_echo_first;
    j->lp_echo_first = false;
    if (first && j->lp_echo_bos)
        return (int)token_chars(p, len);
    /* The dummy "▁" the tokenizer put in front of the text or after a
     * control token in it: the next piece that starts with a space has it. */
    if (j->lp_echo_prefix && len > 0 && p[0] == ' ' && len - 1 <= left &&
        !memcmp(at, p + 1, len - 1)) {
        j->lp_echo_at += len - 1;
        j->lp_echo_prefix = false;
        return 1;
    }
    if (len <= left && !memcmp(at, p, len)) {
        j->lp_echo_at += len;
        j->lp_echo_prefix = tn_tokenizer_add_space_prefix(tok) && added_token(tok, token);
        return 0;
    }
    return (int)token_chars(p, len); /* not in the text */
}

/* The echoed prompt with its log-probabilities: the entries wait in
 * lp_held, and the last one releases them with the prompt's text, so that
 * a stream's first chunk carries the prompt and its entries together. */
typedef struct prompt_scores {
    job *j;
    const char *text;
    int32_t n;
} prompt_scores;

static void on_prompt_logprob(int32_t index, int32_t token, float logprob,
                              const tn_token_logprob *top, int32_t n_top, void *user) {
    prompt_scores *ps = user;
    job *j = ps->j;
    job_logprob e = {.token = token, .logprob = logprob, .n_top = n_top};
    memcpy(e.top, top, (size_t)n_top * sizeof *top);
    e.trimmed = prompt_token_trimmed(j, token);
    g_array_append_val(j->lp_held, e);
    if (index == ps->n - 1)
        job_emit(j, ps->text);
}

/* A text prompt that cannot fit, refused from its length before it is
 * encoded (as the session does with messages, docs/SESSION.md): a body at
 * the cap took seconds to encode only to be refused. True with the refusal
 * in j->err. */
static bool prompt_cannot_fit(job *j, const tn_tokenizer *tok, tn_session *session,
                              const char *text) {
    const size_t len = strlen(text);
    const size_t at_least =
        tn_tokenizer_min_tokens(tok, text, len) + (tn_tokenizer_add_bos(tok) ? 1 : 0);
    const int32_t n_pin = tn_session_pin_info(session).n_pin;
    const int32_t room = tn_session_n_ctx(session) - n_pin;
    if (at_least <= (size_t)(room > 0 ? room : 0))
        return false;
    if (n_pin > 0)
        g_snprintf(j->err.message, sizeof j->err.message,
                   "the prompt is %zu bytes, at least %zu tokens; %d are free after the "
                   "%d-token system prompt",
                   len, at_least, room, n_pin);
    else
        g_snprintf(j->err.message, sizeof j->err.message,
                   "the prompt is %zu bytes, at least %zu tokens; the context holds %d", len,
                   at_least, room);
    return true;
}

/* encoded: the text prompt's tokens when prompts_fit kept them (NULL or
 * empty: encoded here). */
static int run_completion(tern_server *srv, job *j, tn_session *session,
                          const tn_tokens *encoded) {
    const tn_tokenizer *tok = tn_model_tokenizer(srv->model);
    if (!tok) {
        const char *why = tn_model_tokenizer_error(srv->model);
        g_snprintf(j->err.message, sizeof j->err.message, "the model has no usable tokenizer (%s)",
                   why && *why ? why : "none loaded");
        return TN_ERR_UNSUPPORTED;
    }
    tn_tokens own = {0};
    const tn_tokens *t = &own;
    int rc = TN_OK;
    j->run_tokens = 0;
    if (j->prompt) {
        const size_t len = strlen(j->prompt);
        if (prompt_cannot_fit(j, tok, session, j->prompt))
            return TN_ERR_OVERFLOW;
        /* A raw continuation: BOS when the vocabulary wants one, control
         * tokens in the prompt recognised (what llama.cpp's server does too). */
        if (encoded && encoded->ids) {
            t = encoded;
        } else {
            /* Counted by serve-prompts (G_MESSAGES_DEBUG): a prompt of
             * several is encoded once, by prompts_fit, never again here. */
            g_debug("%s: a prompt of %zu bytes encoded for its run", j->id, len);
            rc = tn_tokenize(tok, j->prompt, len, TN_TOKENIZE_SPECIAL | TN_TOKENIZE_ADD_BOS,
                             &own, &j->err);
        }
        /* Only here does "" meet a vocabulary without BOS: the answer names
         * the member, as a refusal while parsing does. */
        if (rc == TN_OK && t->n == 0) {
            g_snprintf(j->err.message, sizeof j->err.message, "the prompt is empty");
            rc = TN_ERR_INVALID;
        }
        if (rc == TN_ERR_INVALID)
            j->err_param = "prompt";
    }
    /* Token ids are the prompt as sent: no BOS added; the echo is their text. */
    const int32_t *ids = j->prompt ? t->ids : j->prompt_ids;
    const int32_t n = j->prompt ? (int32_t)t->n : j->n_prompt_ids;
    tn_buf echo = {0};
    if (rc == TN_OK && j->echo && !j->prompt)
        rc = tn_detokenize(tok, ids, (size_t)n, 0, &echo, &j->err);
    const char *echo_text = j->prompt ? j->prompt : echo.data ? echo.data : "";
    prompt_scores ps = {j, echo_text, n};
    tn_gen_params gen = j->gen;
    if (rc == TN_OK && j->echo && j->logprobs >= 0) {
        /* The first token has no row before it: OpenAI's null. */
        job_logprob first = {.token = ids[0], .none = true};
        j->lp_offset = 0;
        tn_detok_stream_init(&j->lp_prompt, tok, 0);
        j->lp_prompt_ids = !j->prompt;
        j->lp_echo = echo_text;
        j->lp_echo_len = strlen(echo_text);
        j->lp_echo_at = 0;
        j->lp_echo_first = true;
        j->lp_echo_prefix = tn_tokenizer_add_space_prefix(tok);
        j->lp_echo_bos = j->prompt && tn_tokenizer_add_bos(tok) && n > 0 &&
                         ids[0] == tn_tokenizer_bos(tok);
        first.trimmed = prompt_token_trimmed(j, ids[0]);
        g_array_append_val(j->lp_held, first);
        if (n == 1)
            job_emit(j, echo_text);
        gen.prompt_logprobs = on_prompt_logprob;
        gen.prompt_logprobs_user = &ps;
        gen.prompt_top = j->logprobs;
    } else if (rc == TN_OK && j->echo) {
        j->lp_offset = g_utf8_strlen(echo_text, -1); /* text_offset counts it */
        job_emit(j, echo_text);
    }
    if (rc == TN_OK) {
        const tn_prompt prompt = {.kind = TN_PROMPT_TOKENS, .tokens = ids, .n_tokens = n};
        rc = tn_session_run(session, &prompt, &gen, on_token, j, &j->stats, &j->err);
    }
    tn_buf_free(&echo);
    tn_tokens_free(&own);
    return rc;
}

/* Tokens whose text is still held at the end of an answer: one that ended
 * on a stop string cut them away with it; otherwise their text was flushed
 * (or they have none, like a token of an unfinished character). */
static void lp_settle(job *j) {
    if (!j->lp_held)
        return;
    g_mutex_lock(&j->lock);
    if (j->stats.stop_reason == TN_STOP_STRING)
        g_array_set_size(j->lp_held, 0);
    else
        lp_release(j);
    g_mutex_unlock(&j->lock);
}

/* A prompt of n tokens (BOS included) that its session's context cannot
 * hold, as its run would refuse it, and with the same message. True with
 * the refusal in j->err. */
static bool prompt_over_context(job *j, tn_session *session, int i, int64_t n) {
    const int32_t n_pin = tn_session_pin_info(session).n_pin;
    const int32_t n_ctx = tn_session_n_ctx(session);
    if (n <= n_ctx - n_pin)
        return false;
    if (n_pin > 0)
        g_snprintf(j->err.message, sizeof j->err.message,
                   "prompt[%d]: the message is %" G_GINT64_FORMAT
                   " tokens; %d are free after the %d-token system prompt",
                   i, (gint64)n, n_ctx - n_pin, n_pin);
    else
        g_snprintf(j->err.message, sizeof j->err.message,
                   "prompt[%d]: the message is %" G_GINT64_FORMAT " tokens; the context holds %d",
                   i, (gint64)n, n_ctx);
    return true;
}

/* The prompts' tokens in all, under TERN_COMPLETION_PROMPTS_TOKENS_MAX
 * before any is run: parsing counted the text prompts' from below only.
 * Each text prompt's tokens are kept for its run (run_prompts frees them);
 * a prompt's own errors, but for its size, are left to run_completion.
 * The first prompt that cannot fit the context ends the count: the ones
 * after it would be encoded, and the ones before it run, for nothing but
 * the 400 (docs/SERVER.md, "Several prompts"). */
static int prompts_fit(tern_server *srv, job *j, tn_session *session) {
    const tn_tokenizer *tok = tn_model_tokenizer(srv->model);
    gint64 total = 0;
    for (int i = 0; i < j->n_prompts; i++) {
        job_prompt_in *in = &j->prompts[i];
        if (!in->text || !tok) {
            if (prompt_over_context(j, session, i, in->n_ids))
                return TN_ERR_OVERFLOW;
            total += in->n_ids;
            continue;
        }
        /* One that a lone request would have refused from its length is
         * refused so, before any is run: encoding it here cost what that
         * early refusal saves (seconds for a megabyte, the worker held). */
        if (prompt_cannot_fit(j, tok, session, in->text)) {
            char why[sizeof j->err.message];
            g_snprintf(why, sizeof why, "prompt[%d]: %s", i, j->err.message);
            g_strlcpy(j->err.message, why, sizeof j->err.message);
            return TN_ERR_OVERFLOW;
        }
        tn_error e;
        g_debug("%s: prompt[%d] encoded for the prompts' bound", j->id, i);
        if (tn_tokenize(tok, in->text, strlen(in->text),
                        TN_TOKENIZE_SPECIAL | TN_TOKENIZE_ADD_BOS, &in->tokens, &e) != TN_OK)
            tn_tokens_free(&in->tokens);
        else if (prompt_over_context(j, session, i, (int64_t)in->tokens.n))
            return TN_ERR_OVERFLOW;
        else
            total += (gint64)in->tokens.n;
        if (job_abandoned(j))
            return TN_ERR_CANCELLED;
    }
    if (total <= TERN_COMPLETION_PROMPTS_TOKENS_MAX)
        return TN_OK;
    g_snprintf(j->err.message, sizeof j->err.message,
               "the %d prompts hold %" G_GINT64_FORMAT " tokens; one request may hold at most "
               "%d: send fewer prompts",
               j->n_prompts, total, TERN_COMPLETION_PROMPTS_TOKENS_MAX);
    j->err_param = "prompt";
    return TN_ERR_INVALID;
}

static void choice_end_free(gpointer data) {
    job_choice_end *e = data;
    g_free(e->text);
    if (e->lp)
        g_array_unref(e->lp);
    g_free(e);
}

/* A streamed choice of several is over (j->lock held): the text and
 * log-probabilities it left unsent go with its end, so that the next
 * prompt's (its echo first) cannot be sent under its index. The last
 * choice's end is finish_job's. */
static void end_choice(job *j, const char *finish) {
    job_choice_end *e = g_new0(job_choice_end, 1);
    e->text = g_strdup(j->pending->str);
    g_string_truncate(j->pending, 0);
    if (j->lp_ready) {
        e->lp = j->lp_ready;
        j->lp_ready = g_array_new(FALSE, FALSE, sizeof(job_logprob));
    }
    e->finish = finish;
    if (!j->ends)
        j->ends = g_ptr_array_new_with_free_func(choice_end_free);
    g_ptr_array_add(j->ends, e);
    if (!j->flush_scheduled) {
        j->flush_scheduled = true;
        schedule(j, flush_stream);
    }
}

/* Several prompts: each answered as run_completion answers it alone (the
 * session back at its pin, the echo's offsets and the statistics from
 * zero), one after another, each answer kept in j->choices; j->stats ends
 * as their sum. A client that leaves stops the ones not yet run. */
static int run_prompts(tern_server *srv, job *j, tn_session *session) {
    j->choices = g_new0(job_choice, j->n_prompts);
    tn_session_stats sum = {0};
    int rc = prompts_fit(srv, j, session);
    for (int i = 0; i < j->n_prompts && rc == TN_OK; i++) {
        if (job_abandoned(j)) {
            rc = TN_ERR_CANCELLED;
            break;
        }
        const job_prompt_in *in = &j->prompts[i];
        j->prompt = in->text;
        j->prompt_ids = in->ids;
        j->n_prompt_ids = in->n_ids;
        memset(&j->stats, 0, sizeof j->stats);
        j->lp_offset = 0;
        rc = run_completion(srv, j, session, &in->tokens);
        tn_tokens_free(&j->prompts[i].tokens);
        /* Stopped by its client leaving or the server stopping, not by the
         * model: the choice was cut, and must not end as if it were whole
         * (a finish_reason "stop" on a stream's last chunk). */
        if (rc == TN_OK && (j->stats.stop_reason == TN_STOP_CALLBACK ||
                            j->stats.stop_reason == TN_STOP_CANCELLED))
            rc = TN_ERR_CANCELLED;
        j->prompt = NULL; /* the list owns them */
        j->prompt_ids = NULL;
        j->n_prompt_ids = 0;
        if (rc != TN_OK) {
            char why[sizeof j->err.message];
            g_snprintf(why, sizeof why, "prompt[%d]: %s", i, j->err.message);
            g_strlcpy(j->err.message, why, sizeof j->err.message);
            break;
        }
        lp_settle(j);
        job_choice *c = &j->choices[j->n_choices++];
        g_mutex_lock(&j->lock);
        c->text = j->full; /* empty when streamed */
        j->full = g_string_new(NULL);
        if (j->stream && i < j->n_prompts - 1)
            end_choice(j, stop_finish(j->stats.stop_reason));
        else if (j->lp_ready && !j->stream) {
            c->lp = j->lp_ready;
            j->lp_ready = g_array_new(FALSE, FALSE, sizeof(job_logprob));
        }
        g_mutex_unlock(&j->lock);
        c->lp_offset = j->lp_offset;
        c->stats = j->stats;
        const tn_session_stats *st = &j->stats;
        if (i == 0)
            sum.ttft_ms = st->ttft_ms;
        sum.prompt_tokens += st->prompt_tokens;
        sum.prefill_ms += st->prefill_ms;
        sum.generated_tokens += st->generated_tokens;
        sum.decode_ms += st->decode_ms;
        sum.restored_tokens += st->restored_tokens;
        sum.restore_ms += st->restore_ms;
        sum.drafted += st->drafted;
        sum.accepted += st->accepted;
        sum.verify_steps += st->verify_steps;
        sum.kv_len = st->kv_len;
        sum.stop_reason = st->stop_reason;
    }
    for (int i = 0; i < j->n_prompts; i++) /* those not run */
        tn_tokens_free(&j->prompts[i].tokens);
    sum.prefill_tok_s = sum.prefill_ms > 0 ? sum.prompt_tokens * 1e3 / sum.prefill_ms : 0;
    sum.decode_tok_s = sum.decode_ms > 0 ? sum.generated_tokens * 1e3 / sum.decode_ms : 0;
    if (rc == TN_OK || rc == TN_ERR_CANCELLED) /* an error keeps the failed prompt's */
        j->stats = sum;
    return rc;
}

#ifdef TERN_HAVE_IMAGEIO
/* A copy of the rows encoded for (key, budget) (malloc'd, as
 * tn_vision_encode_new's rows: a job frees both with free()), or NULL;
 * *n_tokens gets their count. */
static float *cache_get(tern_server *srv, const char *key, int budget, int *n_tokens) {
    return tern_embed_cache_get(srv->encodings, key, budget, n_tokens);
}

static void cache_put(tern_server *srv, const char *key, int budget, const float *rows,
                      int n_tokens, int n_embd) {
    tern_embed_cache_put(srv->encodings, key, budget, rows, n_tokens, n_embd);
}
#endif

/* The job's decoded images into embeddings, on the worker (the engine's
 * CPU is busy with one thing at a time). Each decoded picture is freed as
 * soon as it is encoded. */
static int encode_images(tern_server *srv, job *j) {
#ifdef TERN_HAVE_IMAGEIO
    tn_vision *v = srv->cfg.vision;
    const int n_embd = tn_vision_get_info(v)->n_embd_text;
    j->embd = g_new0(tn_image_embd, j->n_images);
    for (int i = 0; i < j->n_images; i++) {
        if (job_abandoned(j))
            return TN_ERR_CANCELLED;
        if (j->images[i].cached) {
            const int n_tok = j->images[i].cached_n;
            j->embd[i] = (tn_image_embd){j->images[i].cached, n_tok, n_embd};
            j->images[i].cached = NULL; /* now owned by embd */
            j->image_tokens += n_tok;
            j->images_reused++;
            continue;
        }
        TernImage *img = j->images[i].decoded;
        tn_error e = {0};
        /* Gemma 4's count follows the image's size; a refusal (an aspect
         * too extreme for the budget) is reported like an encoding error. */
        float *rows = NULL;
        int n = 0;
        const gint64 t0 = g_get_monotonic_time();
        int rc = tn_vision_encode_new(v, img->rgb, img->width, img->height, j->image_budget,
                                      srv->cfg.n_threads, &rows, &n, &e);
        j->encode_ms += (double)(g_get_monotonic_time() - t0) / 1000.0;
        release_decoded(j, i);
        if (rc != TN_OK) {
            g_snprintf(j->err.message, sizeof j->err.message, "%s: %s", j->images[i].where,
                       e.message);
            return rc;
        }
        j->embd[i] = (tn_image_embd){rows, n, n_embd};
        j->image_tokens += n;
        cache_put(srv, j->images[i].key, j->image_budget, rows, n, n_embd);
    }
    return TN_OK;
#else
    (void)srv;
    g_snprintf(j->err.message, sizeof j->err.message, "this server was built without images");
    return TN_ERR_UNSUPPORTED;
#endif
}

/* A chat job's prompt: a [system,] user request runs single-turn against
 * the pin, anything else as a conversation. Images are set only when the
 * request has some: with images set a marker takes an image's place, and a
 * user who typed "<__image__>" in a request without images got a 500 ("this
 * model takes no images") or a 400. With images a typed marker is refused
 * when the request is read. */
static tn_prompt job_prompt(const job *j) {
    const tn_image_embd *images = j->n_images > 0 ? j->embd : NULL;
    if (j->single_turn)
        return (tn_prompt){
            .kind = TN_PROMPT_TEXT, .text = j->user, .images = images, .n_images = j->n_images};
    return (tn_prompt){.kind = TN_PROMPT_MESSAGES,
                       .messages = j->messages,
                       .n_messages = j->n_messages,
                       .images = images,
                       .n_images = j->n_images};
}

static void run_job(tern_server *srv, job *j) {
    memset(&j->err, 0, sizeof j->err);
    j->err_param = NULL;
    memset(&j->stats, 0, sizeof j->stats);
    if (job_abandoned(j)) {
        j->rc = TN_ERR_CANCELLED;
        return;
    }
    j->gen.progress = on_progress;
    j->gen.progress_user = j;
    pin_slot *slot = NULL;
    double pin_ms = 0;
    int32_t pin_prefilled = 0;
    j->rc = TN_OK;
    if (j->spec == SPEC_DEFAULT || j->spec == SPEC_SERVER) {
        j->gen.drafter = srv->cfg.drafter;
    } else if (j->spec == SPEC_LOOKUP) {
        if (!srv->lookup)
            j->rc = tn_drafter_new_lookup(tn_drafter_default_params(), &srv->lookup, &j->err);
        j->gen.drafter = srv->lookup;
    }
    if (j->rc == TN_OK && j->n_images > 0)
        j->rc = encode_images(srv, j);
    if (j->rc == TN_OK)
        j->rc = slot_acquire(srv, j, &slot, &pin_ms, &pin_prefilled, &j->err);
    if (j->rc == TN_OK) {
        set_current(srv, j, slot->session);
        j->lp_session = slot->session;
        if (j->kind == JOB_COMPLETION && j->n_prompts > 1) {
            j->rc = run_prompts(srv, j, slot->session);
        } else if (j->kind == JOB_COMPLETION) {
            j->rc = run_completion(srv, j, slot->session, NULL);
        } else {
            const tn_prompt prompt = job_prompt(j);
            j->rc = tn_session_run(slot->session, &prompt, &j->gen, on_token, j, &j->stats,
                                   &j->err);
        }
    }
    set_current(srv, NULL, NULL);
    j->lp_session = NULL;
    if (j->rc != TN_OK && job_abandoned(j))
        j->rc = TN_ERR_CANCELLED;
    lp_settle(j);

    /* Pinning in this request is part of its cost: a prefilled pin counts as
     * prompt tokens prefilled now, not as restored ones, and delays the first
     * token. */
    tn_session_stats *st = &j->stats;
    if (pin_ms > 0) {
        int32_t moved = pin_prefilled < st->restored_tokens ? pin_prefilled : st->restored_tokens;
        st->restored_tokens -= moved;
        st->prompt_tokens += moved;
        if (moved > 0) {
            st->prefill_ms += pin_ms;
            st->prefill_tok_s = st->prefill_ms > 0 ? st->prompt_tokens * 1e3 / st->prefill_ms : 0;
        }
        if (st->generated_tokens > 0)
            st->ttft_ms += pin_ms;
    }
    /* Encoding the images delays the first token too. */
    if (st->generated_tokens > 0)
        st->ttft_ms += j->encode_ms;
}

static gpointer worker_main(gpointer data) {
    tern_server *srv = data;
    for (;;) {
        job *j = g_async_queue_pop(srv->queue);
        if (j == (job *)srv) /* the stop sentinel */
            break;
        g_atomic_int_set(&j->taken, 1);
        g_debug("%s: taken by the worker", j->id);
        run_job(srv, j);
        schedule(j, finish_job);
        job_unref(j);
    }
    return NULL;
}

/* ------------------------------------------------------------ output */

static void builder_choice_start(JsonBuilder *b, int index) {
    json_builder_set_member_name(b, "choices");
    json_builder_begin_array(b);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, index);
}

/* One "name": value member: the usage object alone has twenty. */
static void member_int(JsonBuilder *b, const char *name, gint64 v) {
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, v);
}

static void member_double(JsonBuilder *b, const char *name, double v) {
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, v);
}

static void member_string(JsonBuilder *b, const char *name, const char *v) {
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, v);
}

static void builder_head(JsonBuilder *b, job *j, const char *object) {
    json_builder_begin_object(b);
    member_string(b, "id", j->id);
    member_string(b, "object", object);
    member_int(b, "created", j->created);
    member_string(b, "model", j->server->model_id);
}

static void builder_usage(JsonBuilder *b, job *j) {
    const tn_session_stats *st = &j->stats;
    json_builder_set_member_name(b, "usage");
    json_builder_begin_object(b);
    /* The whole prompt: what was prefilled plus what was restored. */
    int64_t prompt = (int64_t)st->prompt_tokens + st->restored_tokens;
    member_int(b, "prompt_tokens", prompt);
    member_int(b, "completion_tokens", st->generated_tokens);
    member_int(b, "total_tokens", prompt + st->generated_tokens);
    /* Rows reused from the pin or the conversation already in the KV. */
    json_builder_set_member_name(b, "prompt_tokens_details");
    json_builder_begin_object(b);
    member_int(b, "cached_tokens", st->restored_tokens);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "timings");
    json_builder_begin_object(b);
    member_double(b, "ttft_ms", st->ttft_ms);
    member_int(b, "prefill_tokens", st->prompt_tokens);
    member_double(b, "prefill_tok_s", st->prefill_tok_s);
    member_double(b, "decode_tok_s", st->decode_tok_s);
    member_int(b, "restored_tokens", st->restored_tokens);
    json_builder_set_member_name(b, "pin");
    if (j->pin_source && j->kind == JOB_CHAT)
        json_builder_add_string_value(b, j->pin_source);
    else
        json_builder_add_null_value(b);
    member_int(b, "drafted_tokens", st->drafted);
    member_int(b, "accepted_tokens", st->accepted);
    member_int(b, "verify_steps", st->verify_steps);
    /* Image rows are in prompt_tokens (and prefill_tokens) too. */
    member_int(b, "image_tokens", j->image_tokens);
    member_double(b, "image_decode_ms", j->decode_ms);
    member_double(b, "image_encode_ms", j->encode_ms);
    member_int(b, "images_reused", j->images_reused);
    json_builder_end_object(b);
    json_builder_end_object(b);
}

static const char *stop_finish(tn_stop_reason r) {
    switch (r) {
    case TN_STOP_LIMIT:
    case TN_STOP_CONTEXT_FULL:
        return "length";
    default:
        return "stop";
    }
}

static const char *finish_reason(const job *j) {
    return stop_finish(j->stats.stop_reason);
}

/* ------------------------------------------------------------ logprobs */

/* OpenAI's floor for a token the model gives no chance (JSON has no -inf). */
#define LOGPROB_FLOOR -9999.0

static void member_logprob(JsonBuilder *b, const char *name, float lp) {
    member_double(b, name, isfinite(lp) && lp > LOGPROB_FLOOR ? (double)lp : LOGPROB_FLOOR);
}

/* A token's bytes (tn_token_piece: what it adds to the text), and its text
 * for "token": the bytes when they are UTF-8, else OpenAI's rendering of a
 * piece of a character, "bytes:\xe6\x88" (g_free it). */
static char *token_string(const job *j, int32_t token, const char **bytes, size_t *len) {
    const tn_tokenizer *tok = tn_model_tokenizer(j->server->model);
    const char *p = tok ? tn_token_piece(tok, token, len) : NULL;
    if (!p) {
        p = "";
        *len = 0;
    }
    *bytes = p;
    if (g_utf8_validate_len(p, *len, NULL))
        return g_strndup(p, *len);
    GString *s = g_string_new("bytes:");
    for (size_t i = 0; i < *len; i++)
        g_string_append_printf(s, "\\x%02x", (unsigned char)p[i]);
    return g_string_free(s, FALSE);
}

/* {"token", "logprob", "bytes"} of chat's logprobs.content. */
static void builder_token_entry(JsonBuilder *b, const job *j, int32_t token, float lp) {
    const char *bytes;
    size_t len;
    char *text = token_string(j, token, &bytes, &len);
    member_string(b, "token", text);
    g_free(text);
    member_logprob(b, "logprob", lp);
    json_builder_set_member_name(b, "bytes");
    json_builder_begin_array(b);
    for (size_t i = 0; i < len; i++)
        json_builder_add_int_value(b, (unsigned char)bytes[i]);
    json_builder_end_array(b);
}

/* "logprobs" of a choice: chat's {"content": [...]}, the legacy
 * completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
 * (offsets in characters of the answer's text, from *offset on). */
static void builder_logprobs(JsonBuilder *b, const job *j, const job_logprob *e, guint n,
                             glong *offset) {
    json_builder_set_member_name(b, "logprobs");
    json_builder_begin_object(b);
    if (j->kind == JOB_CHAT) {
        json_builder_set_member_name(b, "content");
        json_builder_begin_array(b);
        for (guint i = 0; i < n; i++) {
            json_builder_begin_object(b);
            builder_token_entry(b, j, e[i].token, e[i].logprob);
            json_builder_set_member_name(b, "top_logprobs");
            json_builder_begin_array(b);
            for (int k = 0; k < e[i].n_top; k++) {
                json_builder_begin_object(b);
                builder_token_entry(b, j, e[i].top[k].token, e[i].top[k].logprob);
                json_builder_end_object(b);
            }
            json_builder_end_array(b);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
        return;
    }
    const char *bytes;
    size_t len;
    json_builder_set_member_name(b, "tokens");
    json_builder_begin_array(b);
    for (guint i = 0; i < n; i++) {
        char *text = token_string(j, e[i].token, &bytes, &len);
        json_builder_add_string_value(b, text);
        g_free(text);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "token_logprobs");
    json_builder_begin_array(b);
    for (guint i = 0; i < n; i++) {
        const float lp = e[i].logprob;
        if (e[i].none)
            json_builder_add_null_value(b);
        else
            json_builder_add_double_value(
                b, isfinite(lp) && lp > LOGPROB_FLOOR ? (double)lp : LOGPROB_FLOOR);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "top_logprobs");
    json_builder_begin_array(b);
    for (guint i = 0; i < n; i++) {
        if (e[i].none) {
            json_builder_add_null_value(b);
            continue;
        }
        json_builder_begin_object(b);
        for (int k = 0; k < e[i].n_top; k++) {
            char *text = token_string(j, e[i].top[k].token, &bytes, &len);
            member_logprob(b, text, e[i].top[k].logprob);
            g_free(text);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "text_offset");
    json_builder_begin_array(b);
    for (guint i = 0; i < n; i++) {
        json_builder_add_int_value(b, *offset);
        char *text = token_string(j, e[i].token, &bytes, &len);
        *offset += token_chars(bytes, len) - e[i].trimmed;
        g_free(text);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

static void sse_send(job *j, char *json) {
    SoupMessageBody *body = soup_server_message_get_response_body(j->msg);
    char *line = g_strdup_printf("data: %s\n\n", json);
    soup_message_body_append(body, SOUP_MEMORY_TAKE, line, strlen(line));
    g_free(json);
}

/* A chat chunk up to its open "delta" object. */
static JsonBuilder *chunk_delta_begin(job *j) {
    JsonBuilder *b = json_builder_new();
    builder_head(b, j, "chat.completion.chunk");
    builder_choice_start(b, j->sse_index);
    json_builder_set_member_name(b, "delta");
    json_builder_begin_object(b);
    return b;
}

/* The rest of a chunk after its delta (or text), sent. A chunk of text,
 * reasoning or calls carries the log-probabilities of the tokens released
 * since the last one (the role's and the finish's chunks none). */
static void chunk_finish_send(job *j, JsonBuilder *b, const char *finish, bool carry) {
    if (carry && j->lp_out && j->lp_out->len) {
        builder_logprobs(b, j, (const job_logprob *)(void *)j->lp_out->data, j->lp_out->len,
                         &j->sse_offset);
        g_array_set_size(j->lp_out, 0);
    } else {
        json_builder_set_member_name(b, "logprobs");
        json_builder_add_null_value(b);
    }
    json_builder_set_member_name(b, "finish_reason");
    if (finish)
        json_builder_add_string_value(b, finish);
    else
        json_builder_add_null_value(b);
    json_builder_end_object(b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    sse_send(j, json_to_text(b));
    g_object_unref(b);
}

static void sse_delta(job *j, const char *role, const char *content, const char *finish) {
    JsonBuilder *b;
    if (j->kind == JOB_CHAT) {
        b = chunk_delta_begin(j);
        if (role)
            member_string(b, "role", role);
        if (content)
            member_string(b, "content", content);
        json_builder_end_object(b);
    } else {
        b = json_builder_new();
        builder_head(b, j, "text_completion");
        builder_choice_start(b, j->sse_index);
        member_string(b, "text", content ? content : "");
        j->sse_open = !finish;
    }
    chunk_finish_send(j, b, finish, !role && !finish);
}

/* A stream's status and headers go out with its first text, not when it is
 * queued: a request that fails before then (the prompt does not fit, the
 * server stops) still gets its HTTP error status and a JSON body. HTTP/1.0
 * has no chunked encoding: its stream ends when the connection closes. */
static void stream_start(job *j) {
    if (j->headers_sent)
        return;
    j->headers_sent = true;
    add_common_headers(j->server, j->msg);
    soup_server_message_set_status(j->msg, 200, NULL);
    SoupMessageHeaders *h = soup_server_message_get_response_headers(j->msg);
    const bool http10 = soup_server_message_get_http_version(j->msg) == SOUP_HTTP_1_0;
    soup_message_headers_set_encoding(h, http10 ? SOUP_ENCODING_EOF : SOUP_ENCODING_CHUNKED);
    if (http10) /* the stream ends with the connection, kept-alive or not */
        soup_message_headers_remove(h, "Connection");
    soup_message_headers_replace(h, "Content-Type", "text/event-stream");
    soup_message_headers_replace(h, "Cache-Control", "no-cache");
    /* Events written are not kept in the message. */
    soup_message_body_set_accumulate(soup_server_message_get_response_body(j->msg), FALSE);
}

/* A chunk whose delta is {"reasoning_content": text}. */
static void sse_reasoning(job *j, const char *text) {
    JsonBuilder *b = chunk_delta_begin(j);
    member_string(b, "reasoning_content", text);
    json_builder_end_object(b);
    chunk_finish_send(j, b, NULL, true);
}

/* Calls taken out of an answer's content (tern_tool_calls_parse): none
 * when the request has no tools or said tool_choice "none", or when the
 * answer was cut off by the length limit. */
static int answer_calls(job *j, const char *content, char **rest, tern_tool_call **calls) {
    if (j->n_tools == 0 || j->tool_choice_none || !strcmp(finish_reason(j), "length"))
        return 0;
    return tern_tool_calls_parse(j->chat_kind, content, rest, calls);
}

/* "tool_calls": [{"id", "type": "function", "function": {"name",
 * "arguments"}}], with "index" in a stream's delta. */
static void builder_tool_calls(JsonBuilder *b, job *j, const tern_tool_call *calls, int n,
                               bool stream) {
    json_builder_set_member_name(b, "tool_calls");
    json_builder_begin_array(b);
    for (int i = 0; i < n; i++) {
        json_builder_begin_object(b);
        if (stream)
            member_int(b, "index", i);
        char *id = g_strdup_printf("call_%s_%d", j->id, i);
        member_string(b, "id", id);
        g_free(id);
        member_string(b, "type", "function");
        json_builder_set_member_name(b, "function");
        json_builder_begin_object(b);
        member_string(b, "name", calls[i].name);
        member_string(b, "arguments", calls[i].arguments);
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

/* A chunk whose delta holds the calls, whole. */
static void sse_tool_calls(job *j, const tern_tool_call *calls, int n) {
    JsonBuilder *b = chunk_delta_begin(j);
    builder_tool_calls(b, j, calls, n, true);
    json_builder_end_object(b);
    chunk_finish_send(j, b, NULL, true);
}

/* Streams content. With tools, a call's marker and all after it are held
 * for stream_calls, and so is what may yet become a marker (with the
 * whitespace before it): a client never sees half a call as text. */
static void stream_content(job *j, const char *text) {
    const char *marker =
        j->tool_text && !j->tool_choice_none ? tern_tool_call_marker(j->chat_kind) : NULL;
    if (!marker) {
        if (*text)
            sse_delta(j, NULL, text, NULL);
        return;
    }
    GString *t = j->tool_text;
    g_string_append(t, text);
    if (j->in_calls)
        return;
    const char *m = strstr(t->str, marker);
    size_t send;
    if (m) {
        send = (size_t)(m - t->str);
        j->in_calls = true;
    } else {
        const size_t ml = strlen(marker);
        size_t keep = 0;
        for (size_t k = MIN(ml - 1, t->len); k > 0 && !keep; k--)
            if (!memcmp(t->str + t->len - k, marker, k))
                keep = k;
        send = t->len - keep;
    }
    while (send > 0 && g_ascii_isspace(t->str[send - 1]))
        send--;
    if (send > 0) {
        char *out = g_strndup(t->str, send);
        sse_delta(j, NULL, out, NULL);
        g_free(out);
        g_string_erase(t, 0, (gssize)send);
    }
}

/* The end of a stream's content: the held calls as a tool_calls delta, or
 * as text when they are not calls after all; the finish_reason to send. */
static const char *stream_calls(job *j) {
    const char *finish = finish_reason(j);
    if (!j->tool_text || !j->tool_text->len)
        return finish;
    char *rest = NULL;
    tern_tool_call *calls = NULL;
    int n = j->in_calls ? answer_calls(j, j->tool_text->str, &rest, &calls) : 0;
    if (n > 0 && !rest) {
        sse_tool_calls(j, calls, n);
        finish = "tool_calls";
    } else {
        sse_delta(j, NULL, j->tool_text->str, NULL);
    }
    g_free(rest);
    tern_tool_calls_free(calls, n);
    g_string_truncate(j->tool_text, 0);
    return finish;
}

/* Streams text through the reasoning splitter; last: the answer ended. */
static void stream_split(job *j, const char *text, bool last) {
    GString *content = g_string_new(NULL), *reasoning = g_string_new(NULL);
    tern_reasoning_feed(&j->reasoning, text, content, reasoning);
    if (last)
        tern_reasoning_finish(&j->reasoning, content, reasoning);
    if (reasoning->len)
        sse_reasoning(j, reasoning->str);
    if (content->len)
        stream_content(j, content->str);
    g_string_free(content, TRUE);
    g_string_free(reasoning, TRUE);
}

/* The tokens still held in lp_out (their text was none, or held back) on
 * a chunk of their own, then the choice's last chunk. */
static void stream_finish(job *j, const char *finish) {
    if (j->lp_out && j->lp_out->len)
        sse_delta(j, NULL, "", NULL);
    sse_delta(j, NULL, NULL, finish);
}

static void stream_pending(job *j) {
    stream_start(j);
    g_mutex_lock(&j->lock);
    char *text = g_strdup(j->pending->str);
    g_string_truncate(j->pending, 0);
    j->flush_scheduled = false;
    GPtrArray *ends = j->ends;
    j->ends = NULL;
    GArray *ready = NULL;
    if (j->lp_ready && j->lp_ready->len) {
        ready = g_array_copy(j->lp_ready);
        g_array_set_size(j->lp_ready, 0);
    }
    g_mutex_unlock(&j->lock);
    /* Choices of several the worker ended: each one's rest and its
     * finish_reason under its index, then the next one's from its start. */
    for (guint i = 0; ends && i < ends->len; i++) {
        const job_choice_end *e = g_ptr_array_index(ends, i);
        if (e->lp && e->lp->len)
            g_array_append_vals(j->lp_out, e->lp->data, e->lp->len);
        stream_content(j, e->text);
        stream_finish(j, e->finish);
        j->sse_index++;
        j->sse_offset = 0;
    }
    if (ends)
        g_ptr_array_unref(ends);
    if (ready) {
        g_array_append_vals(j->lp_out, ready->data, ready->len);
        g_array_unref(ready);
    }
    if (!j->role_sent && j->kind == JOB_CHAT) {
        sse_delta(j, "assistant", "", NULL);
        j->role_sent = true;
    }
    if (j->split_reasoning)
        stream_split(j, text, false);
    else
        stream_content(j, text);
    g_free(text);
}

static gboolean flush_stream(gpointer data) {
    job *j = data;
    if (g_atomic_int_get(&j->gone))
        return G_SOURCE_REMOVE;
    stream_pending(j);
    soup_server_message_unpause(j->msg);
    return G_SOURCE_REMOVE;
}

static void respond_engine_error(job *j) {
    tern_server *srv = j->server;
    if (j->rc == TN_ERR_OVERFLOW)
        respond_error(srv, j->msg, 400, "invalid_request_error",
                      j->kind == JOB_CHAT ? "messages" : "prompt", "context_length_exceeded",
                      "%s", j->err.message);
    else if (j->rc == TN_ERR_CANCELLED)
        respond_error(srv, j->msg, 503, "server_error", NULL, "cancelled", "%s",
                      j->err.message);
    else if (j->rc == TN_ERR_INVALID)
        respond_error(srv, j->msg, 400, "invalid_request_error", j->err_param, NULL, "%s",
                      j->err.message);
    else
        respond_error(srv, j->msg, 500, "server_error", NULL, NULL, "%s",
                      j->err.message[0] ? j->err.message : tn_status_name(j->rc));
}

/* The end of a request whose client left while it waited, ran or had its
 * images decoded, as drop_waiting_gone, watch_running or images_decoded saw
 * it (a look at the socket), not libsoup: its place in the queue goes back,
 * it counts as abandoned, and its message, still paused, is answered. Left
 * paused, libsoup kept the connection, the body and this job for good, and
 * a few hundred timed-out clients filled the connection cap until nobody
 * was answered. An answer lets libsoup finish it: the write fails on a
 * closed socket and the connection goes; a client that only shut down its
 * sending side (nc -N) reads why. A message libsoup finished itself is
 * gone already (on_msg_done). */
static void drop_abandoned(job *j) {
    static const char client_closed_message[] =
        "the client closed its side of the connection before the answer; keep it open until "
        "the answer has come";
    j->server->pending--;
    j->server->n_abandoned++;
    if (!j->msg)
        return;
    if (j->stream && j->headers_sent) {
        /* Its status went out with its first text: why it ends is an
         * event, and the body's end lets libsoup finish the message. */
        sse_send(j, tern_server_error_body(client_closed_message, "invalid_request_error", NULL,
                                           "client_closed"));
        SoupMessageBody *body = soup_server_message_get_response_body(j->msg);
        static const char done[] = "data: [DONE]\n\n";
        soup_message_body_append(body, SOUP_MEMORY_STATIC, done, strlen(done));
        soup_message_body_complete(body);
        soup_server_message_unpause(j->msg);
        return;
    }
    respond_error(j->server, j->msg, 400, "invalid_request_error", NULL, "client_closed", "%s",
                  client_closed_message);
    soup_message_headers_replace(soup_server_message_get_response_headers(j->msg), "Connection",
                                 "close");
    soup_server_message_unpause(j->msg);
}

/* One choice of an answer not streamed, the one prompt's or each of
 * several: its index, its "text" (completions; chat's "message" is
 * message, built by the caller), its log-probabilities (lp NULL: none asked
 * for; offsets from lp_offset) and its finish_reason. */
static void builder_choice(JsonBuilder *b, const job *j, int index, const char *text,
                           JsonNode *message, const GArray *lp, glong lp_offset,
                           const char *finish) {
    json_builder_begin_object(b);
    member_int(b, "index", index);
    if (message) {
        json_builder_set_member_name(b, "message");
        json_builder_add_value(b, message);
    } else {
        member_string(b, "text", text);
    }
    if (lp) {
        builder_logprobs(b, j, (const job_logprob *)(void *)lp->data, lp->len, &lp_offset);
    } else {
        json_builder_set_member_name(b, "logprobs");
        json_builder_add_null_value(b);
    }
    member_string(b, "finish_reason", finish);
    json_builder_end_object(b);
}

/* The answer to several prompts: one choice each, index as OpenAI numbers
 * them (prompt-major; n is 1), usage summed (run_prompts). */
static void respond_choices(job *j) {
    JsonBuilder *b = json_builder_new();
    builder_head(b, j, "text_completion");
    json_builder_set_member_name(b, "choices");
    json_builder_begin_array(b);
    for (int i = 0; i < j->n_choices; i++) {
        const job_choice *c = &j->choices[i];
        builder_choice(b, j, i, c->text->str, NULL, c->lp, c->lp_offset,
                       stop_finish(c->stats.stop_reason));
    }
    json_builder_end_array(b);
    builder_usage(b, j);
    json_builder_end_object(b);
    respond_json(j->server, j->msg, 200, json_to_text(b));
    g_object_unref(b);
}

static gboolean finish_job(gpointer data) {
    job *j = data;
    tern_server *srv = j->server;
    if (g_queue_remove(&srv->waiting, j))
        job_unref(j); /* the list's; the source still holds one */
    if (g_atomic_int_get(&j->gone)) {
        drop_abandoned(j);
        return G_SOURCE_REMOVE;
    }
    srv->pending--;
    srv->n_served++;
    /* Stopped by the shutdown: a truncated answer must not look complete. */
    if (g_atomic_int_get(&srv->stopping) && j->rc == TN_OK &&
        (j->stats.stop_reason == TN_STOP_CALLBACK || j->stats.stop_reason == TN_STOP_CANCELLED))
        j->rc = TN_ERR_CANCELLED;
    if (j->rc == TN_ERR_CANCELLED)
        g_snprintf(j->err.message, sizeof j->err.message,
                   "the request was cancelled: the server is stopping");

    /* Several prompts streamed: the choices that were answered before one
     * failed or the server stopped go out whole before the error, and so
     * does what the failed one had generated once its chunks have begun
     * (docs/SERVER.md, "Several prompts"): the error event says it was cut. */
    g_mutex_lock(&j->lock);
    const bool ended = j->ends && j->ends->len;
    g_mutex_unlock(&j->lock);
    if (j->stream && j->rc != TN_OK && (ended || (j->n_prompts > 1 && j->headers_sent)))
        stream_pending(j);
    if (j->stream && j->rc != TN_OK && !j->headers_sent) {
        respond_engine_error(j);
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }
    if (j->stream) {
        if (j->rc != TN_OK) {
            /* Text already sent: the error goes in the stream as an event. */
            const char *code = j->rc == TN_ERR_OVERFLOW ? "context_length_exceeded" : NULL;
            if (j->rc == TN_ERR_CANCELLED)
                code = "cancelled";
            const bool client_error = j->rc == TN_ERR_OVERFLOW || j->rc == TN_ERR_INVALID;
            const char *why = j->err.message[0] ? j->err.message : tn_status_name(j->rc);
            /* A choice of several whose chunks began and whose last chunk
             * (the one with its finish_reason) never comes: the error
             * names it, as the next prompts are not run. */
            char *cut = j->n_prompts > 1 && j->sse_open
                            ? g_strdup_printf("%s; choice %d was cut after %d tokens", why,
                                              j->sse_index, j->run_tokens)
                            : g_strdup(why);
            sse_send(j, tern_server_error_body(
                            cut, client_error ? "invalid_request_error" : "server_error",
                            j->err_param, code));
            g_free(cut);
        } else {
            stream_pending(j);
            if (j->split_reasoning)
                stream_split(j, "", true);
            const char *finish = stream_calls(j);
            /* Tokens whose text was held (a call's marker that was none,
             * an answer ending in them) carry on a chunk of their own. */
            stream_finish(j, finish);
            if (j->include_usage) {
                JsonBuilder *b = json_builder_new();
                builder_head(b, j,
                             j->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion");
                json_builder_set_member_name(b, "choices");
                json_builder_begin_array(b);
                json_builder_end_array(b);
                builder_usage(b, j);
                json_builder_end_object(b);
                sse_send(j, json_to_text(b));
                g_object_unref(b);
            }
        }
        SoupMessageBody *body = soup_server_message_get_response_body(j->msg);
        static const char done[] = "data: [DONE]\n\n";
        soup_message_body_append(body, SOUP_MEMORY_STATIC, done, strlen(done));
        soup_message_body_complete(body);
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }

    if (j->rc != TN_OK) {
        respond_engine_error(j);
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }
    if (j->n_prompts > 1) {
        respond_choices(j);
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }
    int n_calls = 0;
    JsonNode *message = NULL;
    if (j->kind == JOB_CHAT) {
        JsonBuilder *m = json_builder_new();
        json_builder_begin_object(m);
        member_string(m, "role", "assistant");
        GString *content = g_string_new(NULL), *reasoning = g_string_new(NULL);
        if (j->split_reasoning) {
            tern_reasoning_feed(&j->reasoning, j->full->str, content, reasoning);
            tern_reasoning_finish(&j->reasoning, content, reasoning);
        } else {
            g_string_assign(content, j->full->str);
        }
        char *rest = NULL;
        tern_tool_call *calls = NULL;
        n_calls = answer_calls(j, content->str, &rest, &calls);
        json_builder_set_member_name(m, "content");
        if (n_calls > 0 && !rest)
            json_builder_add_null_value(m);
        else
            json_builder_add_string_value(m, n_calls > 0 ? rest : content->str);
        if (reasoning->len)
            member_string(m, "reasoning_content", reasoning->str);
        if (n_calls > 0)
            builder_tool_calls(m, j, calls, n_calls, false);
        g_free(rest);
        tern_tool_calls_free(calls, n_calls);
        g_string_free(content, TRUE);
        g_string_free(reasoning, TRUE);
        json_builder_end_object(m);
        message = json_builder_get_root(m);
        g_object_unref(m);
    }
    JsonBuilder *b = json_builder_new();
    builder_head(b, j, j->kind == JOB_CHAT ? "chat.completion" : "text_completion");
    json_builder_set_member_name(b, "choices");
    json_builder_begin_array(b);
    builder_choice(b, j, 0, j->full->str, message, j->logprobs >= 0 ? j->lp_ready : NULL,
                   j->lp_offset, n_calls > 0 ? "tool_calls" : finish_reason(j));
    json_builder_end_array(b);
    builder_usage(b, j);
    json_builder_end_object(b);
    respond_json(srv, j->msg, 200, json_to_text(b));
    g_object_unref(b);
    soup_server_message_unpause(j->msg);
    return G_SOURCE_REMOVE;
}

/* The client went away (or the response is complete): stop its generation at
 * the next token. */
static void on_msg_finished(SoupServerMessage *msg, gpointer data) {
    job *j = data;
    (void)msg;
    g_atomic_int_set(&j->gone, 1);
    g_mutex_lock(&j->server->current_lock);
    if (j->server->current == j && j->server->current_session)
        tn_session_cancel(j->server->current_session);
    g_mutex_unlock(&j->server->current_lock);
}

/* The message's "finished": the answer is written or the client is gone.
 * The job lets go of the message then: each held a reference to the other
 * (the job its message, the message this handler's closure), so neither was
 * ever freed, and every request kept ~6.5 KB plus its body (issue 17). Once
 * libsoup drops the message, the closure's job reference goes with it. */
static void on_msg_done(SoupServerMessage *msg, gpointer data) {
    job *j = data;
    on_msg_finished(msg, j);
    g_clear_object(&j->msg);
}

/* True when the client of a waiting (paused) or running request closed its
 * connection (or half-closed it: it sends nothing more). A peek saw the end
 * only with nothing before it: a client that pipelined a second request
 * and then closed left that request's bytes unread (nothing is read from a
 * paused message's socket), and its first request held its place until
 * the worker ran it for nobody. Linux reports the peer's FIN (POLLRDHUP)
 * with bytes still unread; a client that pipelined and stays has sent no
 * FIN. */
static bool client_closed(tern_server *srv, SoupServerMessage *msg) {
    GSocket *sock = soup_server_message_get_socket(msg);
    if (!sock)
        sock = tern_conn_socket(srv, msg);
    if (!sock || g_socket_is_closed(sock))
        return sock != NULL;
#ifdef POLLRDHUP
    struct pollfd p = {.fd = g_socket_get_fd(sock), .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
#else
    char c;
    ssize_t n = recv(g_socket_get_fd(sock), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
#endif
}

/* Waiting jobs whose client left (or whose message libsoup finished), out
 * of the queue now rather than when the worker reaches them: until then
 * each held a queue slot (a new request was refused 429 behind them), its
 * socket and its body, for as long as the requests before it ran. The
 * queue's lock decides the race with the worker: a job it took already
 * is left to watch_running and finish_job. At most max jobs are looked
 * at, from the list's head; those that stay go to its tail, so that the
 * next call looks at the next ones (the list's order is no one else's:
 * the worker's is the queue's). */
static guint drop_waiting_gone(tern_server *srv, guint max) {
    const guint n = MIN(max, srv->waiting.length);
    guint k = 0;
    for (; k < n && srv->waiting.head; k++) {
        GList *l = g_queue_pop_head_link(&srv->waiting);
        job *j = l->data;
        /* One the worker took is watch_running's to look at: looked at
         * here too, its socket was asked twice every 100 ms, for a job the
         * queue could not give back anyway. */
        if (g_atomic_int_get(&j->taken) ||
            (!g_atomic_int_get(&j->gone) && !(j->msg && client_closed(srv, j->msg))) ||
            !g_async_queue_remove(srv->queue, j) /* the worker has it */) {
            g_queue_push_tail_link(&srv->waiting, l);
            continue;
        }
        g_debug("%s: its client left while it waited; dropped from the queue", j->id);
        g_list_free_1(l);
        if (!g_atomic_int_get(&j->gone))
            on_msg_finished(j->msg, j);
        drop_abandoned(j);
        job_unref(j); /* the queue's */
        job_unref(j); /* the list's */
    }
    return k; /* the waiting jobs looked at */
}

/* A request that would be refused 429 looks at this many waiting jobs for
 * clients that left, not at all of them: with a large --queue each refusal
 * cost a look at every socket, and a storm of them the square of the
 * queue. watch_running looks at every one a few times a second, so a
 * queue full of clients that left refuses a live one for that long at
 * most. */
#define GONE_LOOKS_PER_REFUSAL 16

/* The running request's connection, looked at a few times a second,
 * streamed or not. A stream's client was once left to the next write to
 * notice, but a stream writes nothing while its text is held back (a
 * possible stop string, a character's first bytes, a tool call, the
 * whitespace before one): a client that left then kept the engine for
 * the rest of its max_tokens, every other one waiting. A slow reader
 * sent no FIN: it is not gone (docs/SERVER.md, "Disconnects"). */
static gboolean watch_running(gpointer data) {
    tern_server *srv = data;
    g_mutex_lock(&srv->current_lock);
    job *j = srv->current ? job_ref(srv->current) : NULL;
    g_mutex_unlock(&srv->current_lock);
    if (j) {
        if (!g_atomic_int_get(&j->gone) && j->msg && client_closed(srv, j->msg))
            on_msg_finished(j->msg, j);
        job_unref(j);
    }
    drop_waiting_gone(srv, G_MAXUINT);
    return G_SOURCE_CONTINUE;
}


/* ------------------------------------------------------------ request checks */

/* The body of a JSON endpoint must say it is JSON: a browser sends text/plain
 * and form bodies cross-site without asking (no preflight), application/json
 * only after a CORS preflight, which this server refuses unless --cors. */
static bool content_type_json(SoupServerMessage *msg) {
    const char *t = soup_message_headers_get_content_type(
        soup_server_message_get_request_headers(msg), NULL);
    return t && !g_ascii_strcasecmp(t, "application/json");
}

/* The Host a request names must be this server's: loopback names, or the
 * host it was started on. A web page whose name an attacker re-points at
 * 127.0.0.1 (DNS rebinding) sends its own name and is refused. A wildcard
 * host (0.0.0.0, ::) answers to any name: it needs an API key, which a web
 * page does not have. HTTP/1.0 clients may send no Host. */
static bool host_allowed(tern_server *srv, const char *value) {
    if (!value || !*value)
        return true;
    if (srv->bound.any)
        return true;
    char *h;
    if (value[0] == '[') {
        const char *end = strchr(value, ']');
        if (!end || (end[1] && end[1] != ':'))
            return false;
        h = g_strndup(value + 1, (gsize)(end - value - 1));
    } else {
        const char *colon = strchr(value, ':');
        h = colon ? g_strndup(value, (gsize)(colon - value)) : g_strdup(value);
    }
    const gsize len = strlen(h);
    if (len > 0 && h[len - 1] == '.')
        h[len - 1] = '\0';
    bool ok = !g_ascii_strcasecmp(h, srv->host) || !g_ascii_strcasecmp(h, "localhost") ||
              g_str_has_suffix(h, ".localhost");
    if (!ok) {
        GInetAddress *a = g_inet_address_new_from_string(h);
        ok = a && g_inet_address_get_is_loopback(a);
        g_clear_object(&a);
    }
    g_free(h);
    return ok;
}

/* Request headers a browser may send cross-site with --cors: those of the
 * openai SDK (x-stainless-*, openai-*) and the AI SDK besides the usual. */
static bool cors_header_allowed(const char *name) {
    static const char *const plain[] = {"authorization", "content-type", "accept",
                                        "accept-language", "user-agent", "cache-control"};
    for (size_t i = 0; i < G_N_ELEMENTS(plain); i++)
        if (!g_ascii_strcasecmp(name, plain[i]))
            return true;
    return !g_ascii_strncasecmp(name, "x-stainless-", 12) ||
           !g_ascii_strncasecmp(name, "openai-", 7);
}

/* Access-Control-Allow-Headers for a preflight: the requested headers that
 * are allowed (a browser fails the preflight if one it asked for is
 * missing). */
static char *cors_allow_headers(SoupServerMessage *msg) {
    const char *req = soup_message_headers_get_list(soup_server_message_get_request_headers(msg),
                                                    "Access-Control-Request-Headers");
    GString *out = g_string_new("Authorization, Content-Type");
    if (req) {
        char **names = g_strsplit(req, ",", -1);
        for (char **n = names; *n; n++) {
            char *name = g_strstrip(*n);
            if (*name && cors_header_allowed(name) && g_ascii_strcasecmp(name, "authorization") &&
                g_ascii_strcasecmp(name, "content-type"))
                g_string_append_printf(out, ", %s", name);
        }
        g_strfreev(names);
    }
    return g_string_free(out, FALSE);
}

/* ------------------------------------------------------------ handlers */

/* A request ready for the engine (images decoded): to the worker's queue,
 * which takes the caller's reference. Streams get their headers with their
 * first text (stream_start). */
static void enqueue(job *j) {
    g_queue_push_tail(&j->server->waiting, job_ref(j));
    g_async_queue_push(j->server->queue, j);
}

#ifdef TERN_HAVE_IMAGEIO
/* Back on the server's context with the images decoded (or not): a client
 * error answers 400 now, as a plain JSON error even for a stream. */
static gboolean images_decoded(gpointer data) {
    job *j = data;
    tern_server *srv = j->server;
    if (!g_atomic_int_get(&j->gone) && client_closed(srv, j->msg))
        on_msg_finished(j->msg, j);
    if (g_atomic_int_get(&j->gone)) {
        drop_abandoned(j);
        return G_SOURCE_REMOVE;
    }
    if (g_atomic_int_get(&srv->stopping)) {
        srv->pending--;
        srv->n_served++;
        respond_error(srv, j->msg, 503, "server_error", NULL, "cancelled",
                      "the request was cancelled: the server is stopping");
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }
    if (j->image_error && j->images_busy) {
        srv->pending--;
        srv->n_served++;
        respond_error(srv, j->msg, 503, "server_error", "messages", "images_busy", "%s: %s",
                      j->images[j->image_error_at].where, j->image_error->message);
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }
    if (j->image_error) {
        const GError *e = j->image_error;
        const char *code = "invalid_image";
        if (e->domain == TERN_IMAGE_ERROR && e->code == TERN_IMAGE_ERROR_UNSUPPORTED)
            code = "invalid_image_format";
        else if (e->domain == TERN_IMAGE_ERROR && e->code == TERN_IMAGE_ERROR_TOO_LARGE)
            code = "image_too_large";
        srv->pending--;
        srv->n_served++;
        respond_error(srv, j->msg, 400, "invalid_request_error", "messages", code, "%s: %s",
                      j->images[j->image_error_at].where, e->message);
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }
    enqueue(job_ref(j));
    return G_SOURCE_REMOVE;
}

/* Counts images[i]'s decoded picture against the server's budget, or
 * refuses it (j->image_error): a request whose own pictures exceed the
 * budget can never run (400); one that meets other requests' pictures may
 * later (503). A Gemma 4 projector takes pictures whole (for its
 * arithmetic to be llama.cpp's), 12 bytes a pixel until encoded: sixteen
 * 8000 x 8000 PNGs of 195 KB each were 12 GiB. */
static void hold_decoded(tern_server *srv, job *j, int i) {
    const TernImage *img = j->images[i].decoded;
    const guint64 px = (guint64)img->width * (guint64)img->height;
    const guint64 max = srv->cfg.image_pixels_max;
    g_mutex_lock(&srv->image_lock);
    const guint64 others = srv->image_pixels_held - j->image_pixels;
    const bool fits = srv->image_pixels_held + px <= max;
    if (fits) {
        srv->image_pixels_held += px;
        j->image_pixels += px;
    }
    g_mutex_unlock(&srv->image_lock);
    if (fits)
        return;
    tern_image_free(j->images[i].decoded);
    j->images[i].decoded = NULL;
    j->images_busy = others > 0 && j->image_pixels + px <= max;
    if (j->images_busy)
        g_set_error(&j->image_error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                    "other requests' images (%.1f megapixels) are waiting to be encoded, and "
                    "this one's would pass the server's %.1f; retry later",
                    (double)others / 1e6, (double)max / 1e6);
    else
        g_set_error(&j->image_error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                    "the request's images hold %.1f megapixels once decoded, more than the "
                    "server's %.1f: send them smaller, or fewer",
                    (double)(j->image_pixels + px) / 1e6, (double)max / 1e6);
}

/* Decode-pool thread: the data: URIs into pictures no larger than the
 * encoder will use (tn_vision_input_side for the request's budget). */
static void decode_images(gpointer data, gpointer pool_data) {
    job *j = data;
    tern_server *srv = pool_data;
    /* Gemma 4 in a single-turn (flash) request: the seed's 70 tokens. */
    if (!j->image_budget && j->single_turn &&
        tn_vision_get_info(srv->cfg.vision)->kind == TN_VISION_GEMMA4)
        j->image_budget = 70;
    const TernImageOptions io = {.fit_side =
                                     tn_vision_input_side(srv->cfg.vision, j->image_budget)};
    const gint64 t0 = g_get_monotonic_time();
    for (int i = 0; i < j->n_images && !j->image_error && !job_abandoned(j); i++) {
        job_image *im = &j->images[i];
        im->key = g_compute_checksum_for_string(G_CHECKSUM_SHA256, im->uri, -1);
        im->cached = cache_get(srv, im->key, j->image_budget, &im->cached_n);
        if (!im->cached)
            im->decoded = tern_image_load_data_uri(im->uri, &io, &j->image_error);
        j->image_error_at = i;
        if (im->decoded)
            hold_decoded(srv, j, i);
        g_clear_pointer(&im->uri, g_free);
    }
    j->decode_ms = (double)(g_get_monotonic_time() - t0) / 1000.0;
    schedule(j, images_decoded);
    job_unref(j);
}
#endif

static bool authorized(tern_server *srv, SoupServerMessage *msg) {
    if (!srv->api_key)
        return true;
    const char *h = soup_message_headers_get_one(soup_server_message_get_request_headers(msg),
                                                 "Authorization");
    /* credentials = auth-scheme 1*SP token68 (RFC 9110 11.4), the scheme
     * in any case: "Bearer  KEY" (two spaces) is the same key, and was
     * refused. */
    if (!h || g_ascii_strncasecmp(h, "Bearer ", 7))
        return false;
    const char *k = h + 7;
    while (*k == ' ')
        k++;
    size_t a = strlen(k), b = strlen(srv->api_key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < a && i < b; i++)
        diff |= (unsigned)(k[i] ^ srv->api_key[i]);
    return diff == 0;
}

/* No room for one more generation: the server is stopping (503), or the
 * queue is full (429, Retry-After). Asked on the head, so that a full
 * queue's answer costs no parse of the body, and again once the body is in. */
static bool refused_busy(tern_server *srv, SoupServerMessage *msg) {
    if (g_atomic_int_get(&srv->stopping)) { /* while run drains its context */
        respond_error(srv, msg, 503, "server_error", NULL, "cancelled",
                      "the server is stopping");
        return true;
    }
    /* Clients that left while waiting give their places back first: the
     * periodic look (watch_running) may not have come yet. A few of them
     * each time (GONE_LOOKS_PER_REFUSAL). */
    guint looked = 0;
    if (srv->pending >= srv->cfg.queue_max)
        looked = drop_waiting_gone(srv, GONE_LOOKS_PER_REFUSAL);
    if (srv->pending >= srv->cfg.queue_max) {
        /* serve-load counts these: the bound above is what keeps a storm of
         * refusals linear in the queue. */
        g_debug("refused 429 after looking at %u of the %u waiting requests", looked,
                srv->waiting.length);
        soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                     "Retry-After", "1");
        respond_error(srv, msg, 429, "rate_limit_exceeded", NULL, "queue_full",
                      "%d requests are already waiting or running; retry later", srv->pending);
        return true;
    }
    return false;
}

/* A request's body as it arrives, kept by the server rather than by
 * libsoup. libsoup keeps each piece it reads as a GBytes of its own in a
 * list, ~150 bytes of bookkeeping a piece: a body sent in 1-byte chunks
 * ("1\r\nx\r\n", a million of them for a 1 MiB body) held 150 MB until
 * the request was answered or timed out, and eight such clients at once
 * nearly 1 GB (serve-body). One array per request, grown as it fills. */
typedef struct {
    GByteArray *data; /* NULL: not kept (not a generation request, or too long) */
    gsize seen;       /* bytes of body read so far, kept or not */
} request_body;

#define REQUEST_BODY_KEY "tern-request-body"

static void request_body_free(request_body *rb) {
    if (rb->data)
        g_byte_array_unref(rb->data);
    g_free(rb);
}

/* libsoup keeps none of the body; the server keeps a generation request's
 * (expect: its Content-Length, or -1 when none or not kept). */
static void request_body_keep(SoupServerMessage *msg, goffset expect) {
    soup_message_body_set_accumulate(soup_server_message_get_request_body(msg), FALSE);
    request_body *rb = g_new0(request_body, 1);
    /* Sized from Content-Length up to 1 MiB only: a client that claims 20
     * MiB (the limit with images) and sends nothing must not make the
     * server reserve it, 480 connections at a time; past it, it grows. */
    if (expect != -1)
        rb->data = g_byte_array_sized_new(expect > 0 ? (guint)MIN(expect, (goffset)1 << 20) : 0);
    g_object_set_data_full(G_OBJECT(msg), REQUEST_BODY_KEY, rb,
                           (GDestroyNotify)request_body_free);
}

/* A refusal found while reading the body (parse-pool thread): answered
 * back on the server's context (body_parsed). */
static void refuse_parse(job *j, int status, const char *param, const char *code,
                         const char *fmt, ...) G_GNUC_PRINTF(5, 6);
static void refuse_parse(job *j, int status, const char *param, const char *code,
                         const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    j->refusal_why = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    j->refusal = status;
    j->refusal_param = g_strdup(param);
    j->error_code = code;
}

/* The body read into the job: checked (tern_request_scan_body, the
 * strict JSON check), parsed and its members taken (tern_request_parse_*),
 * or refused (j->refusal). Parse-pool thread: all of it grows with the
 * body (8 MB of JSON is seconds under ASan), and on the server's context
 * it held up every other connection, /health's included. It touches the
 * job, and of the server only what does not change while it runs (its
 * model, config, id). */
static void parse_request(job *j) {
    tern_server *srv = j->server;
    gsize len = 0;
    const char *data = g_bytes_get_data(j->body, &len);
    len--; /* the NUL handle_generate added */
    tern_body_scan sc;
    tern_request_scan_body(data ? data : "", len, &sc);
    if (sc.problem) {
        const char *param = sc.member[0] ? sc.member : NULL;
        if (!strcmp(sc.problem, "depth"))
            refuse_parse(j, 400, param, "invalid_json",
                         "%s%sthe request body is nested deeper than %d levels",
                         param ? param : "", param ? ": " : "", MAX_JSON_DEPTH);
        else if (!strcmp(sc.problem, "values"))
            refuse_parse(j, 400, param, "invalid_json",
                         "%s%sthe request body holds more than %d JSON values (objects, "
                         "arrays, strings, numbers); no request needs that many",
                         param ? param : "", param ? ": " : "", MAX_JSON_VALUES);
        else if (!strcmp(sc.problem, "nul"))
            refuse_parse(j, 400, param, NULL,
                         "%s%sa string holds a NUL character (\\u0000), which the model's "
                         "text cannot: remove it",
                         param ? param : "", param ? ": " : "");
        else
            refuse_parse(j, 400, param, NULL,
                         "%s%sa whole number outside -2^63 .. 2^63-1 (a signed 64-bit integer)",
                         param ? param : "", param ? ": " : "");
        return;
    }
    /* Strict JSON: json-glib takes C's escapes ("\\666", "\\x41": bytes
     * that are no UTF-8 reached the prompt, and an unknown model's name came
     * back in the error's JSON as such) and bytes that are no UTF-8. A
     * repeated key and a number beyond a double stay allowed: a tool's
     * schema is the client's text, rendered into the prompt as the
     * model's template renders it (tests/server/test-tooldefs.py sends
     * both, as llama.cpp's reference records have them). */
    tn_error check = {0};
    if (tn_json_check(data ? data : "", len, "request body", MAX_JSON_DEPTH, 0, &check) !=
        TN_OK) {
        refuse_parse(j, 400, NULL, "invalid_json", "%s", check.message);
        return;
    }
    if (job_abandoned(j)) /* the client left during the check: not parsed for nobody */
        return;
    JsonParser *parser = json_parser_new();
    GError *e = NULL;
    if (!json_parser_load_from_data(parser, data ? data : "", (gssize)len, &e) ||
        !json_parser_get_root(parser) || !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        refuse_parse(j, 400, NULL, "invalid_json", "the request body is not a JSON object%s%s",
                     e ? ": " : "", e ? e->message : "");
        g_clear_error(&e);
        g_object_unref(parser);
        return;
    }
    /* The text of "tools", for its schemas' own bytes (schema_text), and
     * of a json_schema response_format's schema: the engine compiles the
     * client's text, which json-glib would hand back with a repeated key
     * gone (the engine refuses one) and its numbers respelled. */
    {
        size_t at = 0, ts = 0, te = 0, rs = 0, re = 0;
        while (at < len && g_ascii_isspace(data[at]))
            at++;
        if (tern_json_raw_member(data, len, at, "tools", &ts, &te))
            j->raw_tools = g_strndup(data + ts, te - ts);
        if (tern_json_raw_member(data, len, at, "response_format", &rs, &re) &&
            tern_json_raw_member(data, len, rs, "json_schema", &rs, &re) &&
            tern_json_raw_member(data, len, rs, "schema", &rs, &re))
            j->raw_schema = g_strndup(data + rs, re - rs);
    }
    g_clear_pointer(&j->body, g_bytes_unref);
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));

    JsonNode *model_node = json_object_get_member(o, "model");
    if (model_node && !JSON_NODE_HOLDS_NULL(model_node) &&
        (!JSON_NODE_HOLDS_VALUE(model_node) ||
         json_node_get_value_type(model_node) != G_TYPE_STRING)) {
        refuse_parse(j, 400, "model", NULL, "model must be a string");
        g_object_unref(parser);
        return;
    }
    const char *model = json_object_get_string_member_with_default(o, "model", NULL);
    if (model && strcmp(model, srv->model_id)) {
        refuse_parse(j, 404, "model", "model_not_found",
                     "the model '%s' does not exist; this server serves '%s'", model,
                     srv->model_id);
        g_object_unref(parser);
        return;
    }

    const char *bad = NULL;
    j->stream = tern_request_member_bool(o, "stream", false, &bad);
    char *why = bad ? g_strdup_printf("%s must be true or false", bad) : NULL;
    JsonNode *so = json_object_get_member(o, "stream_options");
    if (!bad && so && JSON_NODE_HOLDS_OBJECT(so)) {
        j->include_usage =
            tern_request_member_bool(json_node_get_object(so), "include_usage", false, &bad);
        if (bad)
            why = g_strdup("stream_options.include_usage must be true or false");
    } else if (!bad && so && !JSON_NODE_HOLDS_NULL(so)) {
        bad = "stream_options";
        why = g_strdup("stream_options must be an object ({\"include_usage\": true})");
    }
    if (bad && strcmp(bad, "stream"))
        bad = "stream_options";
    /* OpenAI's answer too: options for a stream that will not be one were
     * taken and ignored. */
    if (!bad && so && !JSON_NODE_HOLDS_NULL(so) && !j->stream) {
        bad = "stream_options";
        why = g_strdup("stream_options is only allowed when stream is true");
    }
    const char *param = bad;
    bool ok = !bad && (j->kind == JOB_CHAT ? tern_request_parse_chat(o, j, &param, &why)
                                           : tern_request_parse_completion(o, j, &param, &why));
    if (!ok) {
        j->refusal = 400;
        j->refusal_param = g_strdup(param);
        j->refusal_why = why;
    } else {
        g_free(why);
    }
    g_object_unref(parser);
}

/* Parse-pool thread: the job's body read (parse_request), then back to
 * the server's context (body_parsed). Takes the pusher's reference. */
static gboolean body_parsed(gpointer data);
static void parse_body(gpointer data, gpointer pool_data) {
    job *j = data;
    (void)pool_data;
    /* Not for a message already finished (on_msg_done) nor at a stop:
     * body_parsed answers neither. A client that closed is only seen by
     * body_parsed (client_closed asks the connections' table, the
     * context's), so its body is parsed for nothing: bounded as any
     * other body is, by the connections' cap. */
    if (!job_abandoned(j))
        parse_request(j);
    g_clear_pointer(&j->body, g_bytes_unref);
    schedule(j, body_parsed);
    job_unref(j);
}

/* Back on the server's context with the body read into the job: refused,
 * or queued (for the worker, or first the decode pool with images). */
static gboolean body_parsed(gpointer data) {
    job *j = data;
    tern_server *srv = j->server;
    if (!g_atomic_int_get(&j->gone) && j->msg && client_closed(srv, j->msg))
        on_msg_finished(j->msg, j);
    if (g_atomic_int_get(&j->gone)) {
        /* Not counted in pending yet: drop_abandoned's answer, and the count. */
        srv->pending++;
        drop_abandoned(j);
        return G_SOURCE_REMOVE;
    }
    if (j->refusal) {
        respond_error(srv, j->msg, j->refusal, "invalid_request_error", j->refusal_param,
                      j->error_code, "%s", j->refusal_why);
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }
    if (refused_busy(srv, j->msg)) { /* it filled while the body came, or the server stops */
        soup_server_message_unpause(j->msg);
        return G_SOURCE_REMOVE;
    }
    if (j->logprobs >= 0) {
        j->lp_held = g_array_new(FALSE, FALSE, sizeof(job_logprob));
        j->lp_ready = g_array_new(FALSE, FALSE, sizeof(job_logprob));
        j->lp_out = g_array_new(FALSE, FALSE, sizeof(job_logprob));
    }
    srv->pending++;
#ifdef TERN_HAVE_IMAGEIO
    if (j->n_images > 0) {
        /* The pool takes this reference; images_decoded queues the job. */
        g_thread_pool_push(srv->decode_pool, job_ref(j), NULL);
        return G_SOURCE_REMOVE;
    }
#endif
    enqueue(job_ref(j));
    return G_SOURCE_REMOVE;
}

/* A generation request whose whole body is in: its body goes to the parse
 * pool (parse_body), the message paused until body_parsed answers or
 * queues it, so that the context goes on with the other connections. */
static void handle_generate(tern_server *srv, SoupServerMessage *msg, job_kind kind) {
    request_body *rb = g_object_get_data(G_OBJECT(msg), REQUEST_BODY_KEY);
    if (!rb || !rb->data || rb->seen > srv->cfg.body_max) {
        /* not reached: on_got_chunk answers 413 as the body passes the limit */
        respond_error(srv, msg, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body is over the limit of %zu bytes", srv->cfg.body_max);
        return;
    }
    /* NUL-terminated, as libsoup's flattened body was */
    g_byte_array_append(rb->data, (const guint8 *)"", 1);

    job *j = g_new0(job, 1);
    j->refs = 1;
    j->server = srv;
    g_atomic_int_inc(&srv->jobs_alive);
    j->kind = kind;
    g_mutex_init(&j->lock);
    j->pending = g_string_new(NULL);
    j->full = g_string_new(NULL);
    j->logprobs = -1;
    tern_reasoning_init(&j->reasoning);
    j->split_reasoning = kind == JOB_CHAT;
    j->chat_kind = tn_model_chat_kind(srv->model, NULL);
    j->created = g_get_real_time() / G_USEC_PER_SEC;
    g_snprintf(j->id, sizeof j->id, "%s-%s%" G_GUINT64_FORMAT,
               kind == JOB_CHAT ? "chatcmpl" : "cmpl", srv->id_base, ++srv->next_id);
    j->body = g_byte_array_free_to_bytes(g_steal_pointer(&rb->data));

    j->msg = g_object_ref(msg);
    g_signal_connect_data(msg, "finished", G_CALLBACK(on_msg_done), job_ref(j),
                          (GClosureNotify)(void (*)(void))job_unref, 0);
    soup_server_message_pause(msg);
    /* The pool takes our reference. */
    g_thread_pool_push(srv->parse_pool, j, NULL);
}

static void builder_model(JsonBuilder *b, tern_server *srv) {
    json_builder_begin_object(b);
    member_string(b, "id", srv->model_id);
    member_string(b, "object", "model");
    member_int(b, "created", srv->started);
    member_string(b, "owned_by", "tern");
    member_string(b, "description", tn_model_description(srv->model));
    member_int(b, "context_length", srv->n_ctx);
    json_builder_end_object(b);
}

/* GET /v1/models, or GET /v1/models/{id} with id. */
static void handle_models(tern_server *srv, SoupServerMessage *msg, const char *id) {
    if (id && strcmp(id, srv->model_id)) {
        respond_error(srv, msg, 404, "invalid_request_error", "model", "model_not_found",
                      "the model '%s' does not exist; this server serves '%s'", id,
                      srv->model_id);
        return;
    }
    JsonBuilder *b = json_builder_new();
    if (id) {
        builder_model(b, srv);
    } else {
        json_builder_begin_object(b);
        member_string(b, "object", "list");
        json_builder_set_member_name(b, "data");
        json_builder_begin_array(b);
        builder_model(b, srv);
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    respond_json(srv, msg, 200, json_to_text(b));
    g_object_unref(b);
}

/* A model whose file was cut short under it fails every request from then
 * on (docs/MODEL.md), a drafter's every request that drafts, a projector's
 * every request with an image: "ok" told a health checker (a load
 * balancer, a container's check, systemd) to keep sending them, so it is a
 * 503 with the reason, and whoever restarts the server does so. */
static void handle_health(tern_server *srv, SoupServerMessage *msg) {
    tn_error e = {0};
    /* the drafter given with --spec too: every request that drafts fails */
    const bool broken = tn_model_weights_check(srv->model, &e) != TN_OK ||
                        tn_drafter_weights_check(srv->cfg.drafter, &e) != TN_OK ||
                        tn_vision_weights_check(srv->cfg.vision, &e) != TN_OK;
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    member_string(b, "status", broken ? "error" : "ok");
    if (broken)
        member_string(b, "message", e.message);
    member_string(b, "model", srv->model_id);
    member_int(b, "queue", srv->pending);
    member_int(b, "served", (gint64)srv->n_served);
    member_int(b, "abandoned", (gint64)srv->n_abandoned);
    /* Decoded pictures waiting to be encoded, against
     * TERN_SERVER_IMAGE_MEGAPIXELS: what a 503 images_busy met. */
    g_mutex_lock(&srv->image_lock);
    const guint64 held = srv->image_pixels_held;
    g_mutex_unlock(&srv->image_lock);
    member_int(b, "image_pixels", (gint64)held);
    json_builder_end_object(b);
    respond_json(srv, msg, broken ? 503 : 200, json_to_text(b));
    g_object_unref(b);
}

typedef enum {
    ROUTE_NONE,
    ROUTE_HEALTH,
    ROUTE_MODELS, /* also /v1/models/{id} */
    ROUTE_CHAT,
    ROUTE_COMPLETIONS,
} route;

/* The endpoint of a path: /v1/... and the same without /v1 (clients given
 * the server's address without it). *rest: the id of /v1/models/{id}. */
static route route_of(const char *path, const char **rest) {
    *rest = NULL;
    if (!strcmp(path, "/health"))
        return ROUTE_HEALTH;
    if (g_str_has_prefix(path, "/v1/"))
        path += 3;
    if (!strcmp(path, "/chat/completions"))
        return ROUTE_CHAT;
    if (!strcmp(path, "/completions"))
        return ROUTE_COMPLETIONS;
    if (!strcmp(path, "/models"))
        return ROUTE_MODELS;
    if (g_str_has_prefix(path, "/models/") && path[8]) {
        *rest = path + 8;
        return ROUTE_MODELS;
    }
    return ROUTE_NONE;
}

/* 405, with the Allow header RFC 9110 (15.5.6) requires: the methods the
 * endpoint takes, and OPTIONS where the CORS preflight answers it. */
static void refuse_method(tern_server *srv, SoupServerMessage *msg, const char *allow,
                          const char *fmt, ...) G_GNUC_PRINTF(4, 5);
static void refuse_method(tern_server *srv, SoupServerMessage *msg, const char *allow,
                          const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    char *methods = g_strconcat(allow, srv->cors ? ", OPTIONS" : "", NULL);
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Allow",
                                 methods);
    respond_error(srv, msg, 405, "invalid_request_error", NULL, NULL, "%s", m);
    g_free(methods);
    g_free(m);
}

/* What is refused on a request's head alone, before its body: a method an
 * endpoint does not take (405), no valid API key (401), no endpoint (404).
 * Looked at when the head is in (on_got_headers), not after the body:
 * a client that sent Expect: 100-continue gets the refusal instead of
 * 100 Continue, and does not send a body for nothing. */
static void refuse_on_head(tern_server *srv, SoupServerMessage *msg, route r) {
    const char *method = soup_server_message_get_method(msg);
    const char *path = g_uri_get_path(soup_server_message_get_uri(msg));
    if (!strcmp(method, "OPTIONS") && srv->cors)
        return; /* a preflight: no key */
    /* HEAD is GET without the body (RFC 9110 9.3.2): uptime checkers and
     * load balancers send it, and got 405. The handlers answer it as GET;
     * libsoup (3.2) then writes the headers, Content-Length from the body
     * included, and not the body (serve-http checks both). */
    const bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (r == ROUTE_HEALTH) {
        if (!get)
            refuse_method(srv, msg, "GET, HEAD", "%s /health: use GET", method);
        return; /* no key needed */
    }
    if (!authorized(srv, msg)) {
        soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                     "WWW-Authenticate", "Bearer");
        respond_error(srv, msg, 401, "invalid_request_error", NULL, "invalid_api_key",
                      "a valid API key is required (Authorization: Bearer KEY)");
    } else if (r == ROUTE_MODELS && !get) {
        refuse_method(srv, msg, "GET, HEAD", "%s %s: use GET", method, path);
    } else if ((r == ROUTE_CHAT || r == ROUTE_COMPLETIONS) && strcmp(method, "POST")) {
        refuse_method(srv, msg, "POST", "%s %s: use POST", method, path);
    } else if (r == ROUTE_NONE) {
        respond_error(srv, msg, 404, "invalid_request_error", NULL, "not_found",
                      "no endpoint %s %s (GET /health, GET /v1/models, GET /v1/models/{id}, "
                      "POST /v1/chat/completions, POST /v1/completions)",
                      method, path);
    }
}

/* The whole request is in, and its head was not refused (libsoup calls no
 * handler for a request with a status): the endpoint answers. */
static void handle_any(SoupServer *soup, SoupServerMessage *msg, const char *path,
                       GHashTable *query, gpointer data) {
    tern_server *srv = data;
    (void)soup;
    (void)query;
    const char *method = soup_server_message_get_method(msg);

    if (!strcmp(method, "OPTIONS") && srv->cors) {
        add_common_headers(srv, msg);
        SoupMessageHeaders *h = soup_server_message_get_response_headers(msg);
        soup_message_headers_replace(h, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        char *allow = cors_allow_headers(msg);
        soup_message_headers_replace(h, "Access-Control-Allow-Headers", allow);
        g_free(allow);
        soup_message_headers_replace(h, "Access-Control-Max-Age", "600");
        soup_server_message_set_status(msg, 204, NULL);
        return;
    }
    const char *rest = NULL;
    const route r = route_of(path, &rest);
    if (r == ROUTE_HEALTH)
        handle_health(srv, msg);
    else if (r == ROUTE_MODELS)
        handle_models(srv, msg, rest); /* libsoup decoded the path */
    else if (r == ROUTE_CHAT || r == ROUTE_COMPLETIONS)
        handle_generate(srv, msg, r == ROUTE_CHAT ? JOB_CHAT : JOB_COMPLETION);
    else
        refuse_on_head(srv, msg, r); /* not reached: refused on its head */
}


/* The JSON body of an answer libsoup gave itself (below, with on_request_read). */
static void libsoup_refusal_body(tern_server *srv, SoupServerMessage *msg);

/* Before the body is read: the Host (403), a Content-Length that is not a
 * number (400), the Content-Type of a JSON endpoint (415), a body over the
 * limit from its Content-Length (413), then the method, the API key and
 * the endpoint (refuse_on_head), and a full queue (429). libsoup still reads the body of a request
 * refused here before it answers (it is not kept), except after
 * Expect: 100-continue, see below. */
static void on_got_headers(SoupServerMessage *msg, gpointer data) {
    tern_server *srv = data;
    SoupMessageHeaders *req = soup_server_message_get_request_headers(msg);
    /* Range is ignored (RFC 9110 14.2 lets a server): libsoup 3.2 answered
     * a GET's 200 with a multipart/byteranges 206, one part per range,
     * overlapping ones kept (CVE-2025-32907, fixed in libsoup 3.6.5), on
     * the main loop. "Range: bytes=0-,0-,..." in a 64 KiB head made a
     * 3.8 MB answer to GET /v1/models and held the loop, every client's,
     * for 1-2 s (under AddressSanitizer) a request. No endpoint here has
     * an answer worth a part of. */
    soup_message_headers_remove(req, "Range");
    if (soup_server_message_get_status(msg) != 0) {
        /* libsoup refused it on its head itself (a target it cannot decode,
         * "%00" or "..%2F", or not http: 400), and reads its body before
         * the answer, as for the refusals below: dropped, not kept, and
         * over --max-body not waited for. Kept, it was held whole, past the
         * limit and without an API key (300 MiB sent to "POST /%00" held
         * 800 MB of the server's memory). After Expect: 100-continue
         * libsoup answered without reading the body and kept the
         * connection, so the body the client may send anyway was read as
         * the next request, past the framed stream's checks (which counted
         * it as this one's body): a request hidden in it reached libsoup's
         * leaking 501. Both are answered now and closed, as the refusals
         * below are (the framed stream leaves Expect only where a body
         * follows). */
        soup_message_body_set_accumulate(soup_server_message_get_request_body(msg), FALSE);
        const goffset len = soup_message_headers_get_content_length(req);
        if ((len > 0 && (size_t)len > srv->cfg.body_max) ||
            (soup_message_headers_get_expectations(req) & SOUP_EXPECTATION_CONTINUE)) {
            libsoup_refusal_body(srv, msg);
            soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                         "Connection", "close");
            tern_conn_answer_now(srv, msg);
        }
        return;
    }
    /* HTTP/1.0 keep-alive (RFC 9112, 9.3; ApacheBench's -k asks for it):
     * libsoup keeps a 1.0 connection only when the answer says so, and
     * closed it after the first answer, so the client's next request was
     * reset. Its answers have a Content-Length; a stream (close-delimited,
     * stream_start) and a refusal that closes take the header off. */
    if (soup_server_message_get_http_version(msg) == SOUP_HTTP_1_0 &&
        soup_message_headers_header_contains(req, "Connection", "keep-alive"))
        soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                     "Connection", "keep-alive");
    const char *host = soup_message_headers_get_list(req, "Host");
    const char *cl = soup_message_headers_get_list(req, "Content-Length");
    const size_t digits = cl ? strspn(cl, "0123456789") : 0;
    /* The host libsoup took: the Host header's, or an absolute-form
     * target's ("GET http://evil.example/v1/models", which wins over Host). */
    const char *uri_host = g_uri_get_host(soup_server_message_get_uri(msg));
    g_autofree char *target_host =
        uri_host && strchr(uri_host, ':') ? g_strdup_printf("[%s]", uri_host) : g_strdup(uri_host);
    if (!host_allowed(srv, host) || !host_allowed(srv, target_host)) {
        respond_error(srv, msg, 403, "invalid_request_error", NULL, "invalid_host",
                      "this server does not answer to the host name '%s' (use 127.0.0.1 or "
                      "localhost)",
                      host_allowed(srv, host) ? target_host : host);
    } else if (cl && (digits == 0 || cl[digits] || digits > 18)) {
        /* the framed stream refuses these before libsoup reads them, on
         * every request of a connection: not reached, kept in case */
        respond_error(srv, msg, 400, "invalid_request_error", NULL, NULL,
                      "Content-Length '%s' is not a byte count", cl);
    } else if (cl && soup_message_headers_get_one(req, "Transfer-Encoding")) {
        /* the same: libsoup would read the body as chunked */
        respond_error(srv, msg, 400, "invalid_request_error", NULL, NULL,
                      "both Content-Length and Transfer-Encoding");
    }
    if (soup_server_message_get_status(msg) == 400) {
        /* the request's framing is in doubt, so is the next one's: answered
         * now, as libsoup would only after a body it may wait for for ever
         * ("Content-Length: -1" on a kept-alive connection's second request) */
        soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                     "Connection", "close");
        tern_conn_answer_now(srv, msg);
    }
    /* A body over the limit would be waited for before any answer: the
     * refusal (403, 415, 413) goes at once. */
    const goffset len = soup_message_headers_get_content_length(req);
    const bool too_long = len > 0 && (size_t)len > srv->cfg.body_max;
    const char *rest;
    const route r = route_of(g_uri_get_path(soup_server_message_get_uri(msg)), &rest);
    if (soup_server_message_get_status(msg) == 0 && (r == ROUTE_CHAT || r == ROUTE_COMPLETIONS) &&
        !strcmp(soup_server_message_get_method(msg), "POST") && !content_type_json(msg)) {
        const char *t = soup_message_headers_get_one(req, "Content-Type");
        respond_error(srv, msg, 415, "invalid_request_error", NULL, "unsupported_media_type",
                      "the body must be JSON, sent with Content-Type: application/json (not "
                      "%s)",
                      t ? t : "none");
    }
    if (soup_server_message_get_status(msg) == 0 && too_long)
        /* Not after the body: "Content-Length: 999999999999999999" and a
         * body that never comes got no answer, closed at the timeout. */
        respond_error(srv, msg, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body is %lld bytes; the limit is %zu", (long long)len,
                      srv->cfg.body_max);
    if (soup_server_message_get_status(msg) == 0)
        refuse_on_head(srv, msg, r);
    if (soup_server_message_get_status(msg) == 0 && (r == ROUTE_CHAT || r == ROUTE_COMPLETIONS))
        refused_busy(srv, msg);
    if (soup_server_message_get_status(msg) == 0) {
        request_body_keep(msg, r == ROUTE_CHAT || r == ROUTE_COMPLETIONS ? len : -1);
        return;
    }
    soup_message_body_set_accumulate(soup_server_message_get_request_body(msg), FALSE);
    /* After Expect: 100-continue (the framed stream leaves it only on an
     * HTTP/1.1 request with a body) libsoup sends 100 Continue when no
     * status is set here; with one, it sends that answer instead, reads
     * no body, and keeps the connection: the body the client may still
     * send (RFC 9110 lets it) was read as the next request, past the
     * framed stream's checks (which counted it as this one's body). So
     * the refusal is answered now, and the connection closed after it. */
    if (too_long || (soup_message_headers_get_expectations(req) & SOUP_EXPECTATION_CONTINUE))
        tern_conn_answer_now(srv, msg);
}

/* A body without Content-Length (chunked) is counted as it arrives, and
 * kept (request_body_keep) until it passes the limit. */
static void on_got_chunk(SoupServerMessage *msg, GBytes *chunk, gpointer data) {
    tern_server *srv = data;
    request_body *rb = g_object_get_data(G_OBJECT(msg), REQUEST_BODY_KEY);
    if (!rb)
        return;
    gsize n = 0;
    const guint8 *bytes = g_bytes_get_data(chunk, &n);
    rb->seen += n;
    if (rb->seen > srv->cfg.body_max) {
        /* The rest is read (HTTP/1 has no way to refuse it) but not kept. */
        g_clear_pointer(&rb->data, g_byte_array_unref);
        if (soup_server_message_get_status(msg) == 0)
            respond_error(srv, msg, 413, "invalid_request_error", NULL, "request_too_large",
                          "the request body is over the limit of %zu bytes",
                          srv->cfg.body_max);
    } else if (rb->data) {
        g_byte_array_append(rb->data, bytes, (guint)n);
    }
}


static void on_request_started(SoupServer *soup, SoupServerMessage *msg, gpointer data) {
    (void)soup;
    /* Kept-alive connections stay (clients reuse them); with libsoup 3.2
     * (Debian 12) one the client closed was never closed on the server,
     * so the sweep closes idle ones whose client hung up (issue 17). */
    g_signal_connect(msg, "got-headers", G_CALLBACK(on_got_headers), data);
    g_signal_connect(msg, "got-chunk", G_CALLBACK(on_got_chunk), data);
    g_signal_connect(msg, "got-body", G_CALLBACK(tern_conn_request_read), data);
    tern_conn_request_started(data, msg);
}

/* libsoup refuses some requests itself, before any check of this server's
 * (a request line it cannot read, an HTTP version other than 1.0 and 1.1:
 * 505; a Host port or a path it cannot make a URI of, "%00" or "..%2F": 400):
 * a status and an empty body, where every other error is the documented
 * JSON. It calls no handler for them, but "request-read" still comes
 * (before the answer is written), so the body is given then; answered on
 * the head (after Expect: 100-continue, or over --max-body) it comes too
 * late, and on_got_headers gives it. */
static void libsoup_refusal_body(tern_server *srv, SoupServerMessage *msg) {
    const guint status = soup_server_message_get_status(msg);
    if (status < 400 || soup_server_message_get_response_body(msg)->length > 0)
        return;
    if (status == SOUP_STATUS_HTTP_VERSION_NOT_SUPPORTED)
        respond_error(srv, msg, status, "invalid_request_error", NULL, NULL,
                      "HTTP version not supported: send HTTP/1.1 (or 1.0)");
    else
        respond_error(srv, msg, status, "invalid_request_error", NULL, NULL,
                      "the request was refused as it was read (%u %s): its request line, "
                      "target, Host or framing is malformed",
                      status, soup_status_get_phrase(status));
}

static void on_request_read(SoupServer *soup, SoupServerMessage *msg, gpointer data) {
    (void)soup;
    libsoup_refusal_body(data, msg);
}

/* ------------------------------------------------------------ lifecycle */

static gboolean quit_now(gpointer data) {
    tern_server *srv = data;
    g_main_loop_quit(srv->loop);
    return G_SOURCE_REMOVE;
}

static gboolean on_signal(gpointer data) {
    tern_server_quit(data);
    return G_SOURCE_CONTINUE;
}

static gboolean fail(GError **error, GIOErrorEnum code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean fail(GError **error, GIOErrorEnum code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, G_IO_ERROR, code, m);
    g_free(m);
    return FALSE;
}

static gboolean bind_socket(tern_server *srv, GError **error) {
    const tern_server_host *h = &srv->bound;
    if (!h->address)
        return fail(error, G_IO_ERROR_INVALID_ARGUMENT,
                    "--host %s is not an IP address (use e.g. 127.0.0.1, ::1 or 0.0.0.0)",
                    srv->host);
    GInetAddress *ia = g_inet_address_new_from_bytes(
        h->bytes, h->v6 ? G_SOCKET_FAMILY_IPV6 : G_SOCKET_FAMILY_IPV4);
    GSocketAddress *sa = g_inet_socket_address_new(ia, (guint16)srv->cfg.port);
    GError *e = NULL;
    srv->socket = g_socket_new(g_inet_address_get_family(ia), G_SOCKET_TYPE_STREAM,
                               G_SOCKET_PROTOCOL_TCP, &e);
    g_object_unref(ia);
    /* GLib's backlog is 10: 200 clients connecting at once waited up to
     * 4.6 s (the kernel dropped their SYNs and they resent them). The
     * connection cap (tern-conn.c) still bounds what is accepted. */
    if (srv->socket)
        g_socket_set_listen_backlog(srv->socket, SOMAXCONN);
    gboolean ok = srv->socket && g_socket_bind(srv->socket, sa, TRUE, &e) &&
                  g_socket_listen(srv->socket, &e);
    g_object_unref(sa);
    if (!ok) {
        fail(error, (GIOErrorEnum)e->code, "cannot listen on %s port %d: %s", srv->host, srv->cfg.port,
             e->message);
        g_error_free(e);
        return FALSE;
    }
    GSocketAddress *local = g_socket_get_local_address(srv->socket, NULL);
    if (local) {
        srv->port = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(local));
        g_object_unref(local);
    }
    srv->url = g_strdup_printf("http://%s%s%s:%d/v1", h->v6 ? "[" : "", h->text, h->v6 ? "]" : "",
                               srv->port);
    return TRUE;
}

tern_server *tern_server_new(const tn_model *model, const tern_server_config *config,
                             GError **error) {
    tern_server *srv = g_new0(tern_server, 1);
    srv->cfg = *config;
    srv->cfg.context = NULL;
    srv->host = g_strdup(config->host ? config->host : "127.0.0.1");
    srv->bound = tern_server_host_read(srv->host);
    srv->api_key = config->api_key && *config->api_key ? g_strdup(config->api_key) : NULL;
    srv->cors = config->cors_origin ? g_strdup(config->cors_origin) : NULL;
    srv->model_id = g_strdup(config->model_id ? config->model_id : tn_model_name(model));
    srv->model = model;
    if (srv->cfg.queue_max <= 0)
        srv->cfg.queue_max = DEFAULT_QUEUE_MAX;
    if (srv->cfg.body_max == 0)
        srv->cfg.body_max = config->vision ? DEFAULT_BODY_MAX_VISION : DEFAULT_BODY_MAX;
    /* a body is kept in a GByteArray (request_body), whose length is a guint */
    if (srv->cfg.body_max > G_MAXUINT - 1)
        srv->cfg.body_max = G_MAXUINT - 1;
    if (srv->cfg.pins_max <= 0)
        srv->cfg.pins_max = DEFAULT_PINS;
    if (srv->cfg.pins_max > TERN_SERVER_MAX_PINS)
        srv->cfg.pins_max = TERN_SERVER_MAX_PINS;
    if (srv->cfg.request_timeout_s <= 0)
        srv->cfg.request_timeout_s = DEFAULT_REQUEST_TIMEOUT_S;
    srv->cfg.pin_cache_dir = NULL; /* the copy below, if any */
    srv->pin_cache_dir = g_strdup(config->pin_cache_dir);
    srv->cfg.pin_cache_dir = srv->pin_cache_dir;
    srv->started = g_get_real_time() / G_USEC_PER_SEC;
    /* Ids "chatcmpl-<16 random hex digits><count>": unique across runs,
     * which clients that store answers rely on. */
    g_snprintf(srv->id_base, sizeof srv->id_base, "%08x%08x", g_random_int(), g_random_int());
    g_mutex_init(&srv->current_lock);
    g_mutex_init(&srv->quit_lock);
#ifdef TERN_HAVE_IMAGEIO
    g_mutex_init(&srv->image_lock);
    if (srv->cfg.image_pixels_max == 0) {
        const char *e = g_getenv("TERN_SERVER_IMAGE_MEGAPIXELS");
        const guint64 mib = e && *e ? g_ascii_strtoull(e, NULL, 10) : 0;
        srv->cfg.image_pixels_max = (mib > 0 && mib < (1u << 20) ? mib : 128) << 20;
    }
    srv->encodings = tern_embed_cache_new(IMAGE_CACHE_SIZE, IMAGE_CACHE_BYTES);
#endif
    srv->queue = g_async_queue_new();
    srv->context = config->context ? g_main_context_ref(config->context) : g_main_context_new();
    srv->loop = g_main_loop_new(srv->context, FALSE);

    if (srv->api_key && srv->api_key[strspn(srv->api_key, " \t\r\n\v\f")] == '\0') {
        /* Likely an unset variable in a script ("--api-key \"$KEY \""): a
         * key anyone can guess. */
        fail(error, G_IO_ERROR_INVALID_ARGUMENT,
             "--api-key is only blanks: give a real key (or none on a loopback host)");
        tern_server_free(srv);
        return NULL;
    }
    if (!srv->bound.loopback && !srv->api_key) {
        fail(error, G_IO_ERROR_INVALID_ARGUMENT,
             "--host %s is reachable from other machines: give --api-key KEY too", srv->host);
        tern_server_free(srv);
        return NULL;
    }
    /* The first session now: a context the model cannot take is reported
     * before anything listens. */
    tn_error err = {0};
    if (tn_session_new(model, session_params(srv), &srv->slots[0].session, &err) != TN_OK) {
        fail(error, G_IO_ERROR_FAILED, "%s", err.message);
        tern_server_free(srv);
        return NULL;
    }
    srv->n_ctx = tn_session_n_ctx(srv->slots[0].session);
    if (config->vision) {
        const int wide = tn_vision_get_info(config->vision)->n_embd_text;
        if (wide != tn_model_n_embd(model)) {
            fail(error, G_IO_ERROR_INVALID_ARGUMENT,
                 "the vision projector feeds a text model %d wide; %s is %d wide (a projector "
                 "for another model)",
                 wide, tn_model_description(model), tn_model_n_embd(model));
            tern_server_free(srv);
            return NULL;
        }
        if (tn_session_image_cost(srv->slots[0].session, 1) < 0) {
            fail(error, G_IO_ERROR_INVALID_ARGUMENT,
                 "%s takes no images (its vocabulary has no image start/end tokens), so a vision "
                 "projector cannot be used with it",
                 tn_model_description(model));
            tern_server_free(srv);
            return NULL;
        }
    }
    if (!bind_socket(srv, error)) {
        tern_server_free(srv);
        return NULL;
    }
    return srv;
}

int tern_server_port(const tern_server *server) {
    return server->port;
}

const char *tern_server_url(const tern_server *server) {
    return server->url;
}

void tern_server_quit(tern_server *srv) {
    if (!srv)
        return;
    /* A source rather than g_main_loop_quit: it also stops a loop that has
     * not started running yet. */
    g_mutex_lock(&srv->quit_lock);
    if (!srv->quit_source) {
        srv->quit_source = g_idle_source_new();
        g_source_set_priority(srv->quit_source, G_PRIORITY_HIGH);
        g_source_set_callback(srv->quit_source, quit_now, srv, NULL);
        g_source_attach(srv->quit_source, srv->context);
    }
    g_mutex_unlock(&srv->quit_lock);
}

/* Cancels the running generation, lets the worker drain the queue (every
 * waiting job ends as cancelled), then delivers their answers. */
static void stop_worker(tern_server *srv) {
    if (!srv->worker)
        return;
    g_atomic_int_set(&srv->stopping, 1);
    g_mutex_lock(&srv->current_lock);
    if (srv->current_session)
        tn_session_cancel(srv->current_session);
    g_mutex_unlock(&srv->current_lock);
    g_async_queue_push(srv->queue, srv);
    g_thread_join(srv->worker);
    srv->worker = NULL;
}

/* libsoup keeps a connection alive after an answer only while the server
 * has a listener of its own (soup_server's "priv->listeners"), and this
 * server accepts its connections itself (tern-conn.c). So it gets
 * one that nobody can reach: an abstract Unix socket with a random name.
 * Without it every answer closed its connection and clients could not
 * reuse any. */
static void keepalive_anchor(tern_server *srv) {
    char name[48];
    g_snprintf(name, sizeof name, "tern-keepalive-%08x%08x", g_random_int(), g_random_int());
    GError *e = NULL;
    GSocket *sock = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, &e);
    GSocketAddress *addr = g_unix_socket_address_new_with_type(name, -1, G_UNIX_SOCKET_ADDRESS_ABSTRACT);
    if (!sock || !g_socket_bind(sock, addr, FALSE, &e) || !g_socket_listen(sock, &e) ||
        !soup_server_listen_socket(srv->soup, sock, 0, &e))
        g_message("connections will not be kept alive: %s", e ? e->message : "no socket");
    g_clear_error(&e);
    g_clear_object(&addr);
    g_clear_object(&sock); /* the server keeps its own reference */
}

static gboolean set_flag(gpointer data) {
    *(gboolean *)data = TRUE;
    return G_SOURCE_REMOVE;
}

/* The answers given at the stop (a stream's "cancelled" event and [DONE],
 * the 503s) are written by the loop, not when they are queued: a loop run
 * only while something was ready cut the connections first, those
 * messages never finished and their jobs leaked ("1 requests' state is
 * still allocated"). Up to STOP_FLUSH_MS for them (a client that does not
 * read is not waited for longer). */
#define STOP_FLUSH_MS 500
static void flush_answers(tern_server *srv) {
    gboolean late = FALSE;
    GSource *t = g_timeout_source_new(STOP_FLUSH_MS);
    g_source_set_callback(t, set_flag, &late, NULL);
    g_source_attach(t, srv->context);
    while (g_main_context_iteration(srv->context, FALSE))
        ;
    while (!late && g_atomic_int_get(&srv->jobs_alive) > 0)
        g_main_context_iteration(srv->context, TRUE);
    g_source_destroy(t);
    g_source_unref(t);
}

void tern_server_run(tern_server *srv) {
    if (g_atomic_int_exchange(&srv->ran, 1)) {
        g_warning("tern_server_run called twice");
        return;
    }
    g_main_context_push_thread_default(srv->context);
    srv->soup = soup_server_new("server-header", "tern/" TN_VERSION_STRING " ", NULL);
    soup_server_add_handler(srv->soup, NULL, handle_any, srv, NULL);
    g_signal_connect(srv->soup, "request-started", G_CALLBACK(on_request_started), srv);
    g_signal_connect(srv->soup, "request-read", G_CALLBACK(on_request_read), srv);
    keepalive_anchor(srv);
    tern_conns_start(srv);
    {
        srv->worker = g_thread_new("tern-engine", worker_main, srv);
#ifdef TERN_HAVE_IMAGEIO
        if (srv->cfg.vision)
            srv->decode_pool = g_thread_pool_new(decode_images, srv, DECODE_THREADS, FALSE, NULL);
#endif
        srv->parse_pool = g_thread_pool_new(parse_body, srv, PARSE_THREADS, FALSE, NULL);
        GSource *sig[2] = {NULL, NULL};
        if (srv->cfg.handle_signals) {
            sig[0] = g_unix_signal_source_new(SIGINT);
            sig[1] = g_unix_signal_source_new(SIGTERM);
            for (int i = 0; i < 2; i++) {
                g_source_set_callback(sig[i], on_signal, srv, NULL);
                g_source_attach(sig[i], srv->context);
            }
        }
        GSource *watch = g_timeout_source_new(100);
        g_source_set_callback(watch, watch_running, srv, NULL);
        g_source_attach(watch, srv->context);
        g_main_loop_run(srv->loop);
        g_source_destroy(watch);
        g_source_unref(watch);
        for (int i = 0; i < 2; i++)
            if (sig[i]) {
                g_source_destroy(sig[i]);
                g_source_unref(sig[i]);
            }
        stop_worker(srv);
        /* Decodes still running see the stop and hand their jobs back; the
         * context then answers them 503. */
        /* Bodies still being read see the stop and hand their jobs back
         * unread; the context answers them 503. Before the decode pool's
         * end: body_parsed runs on the context, which waits until then. */
        g_thread_pool_free(srv->parse_pool, FALSE, TRUE);
        srv->parse_pool = NULL;
        if (srv->decode_pool)
            g_thread_pool_free(srv->decode_pool, FALSE, TRUE);
        srv->decode_pool = NULL;
        flush_answers(srv);
        /* Empty unless an answer was not written in time (then
         * tern_server_free warns): finish_job takes each job out. */
        g_queue_clear_full(&srv->waiting, (GDestroyNotify)job_unref);
    }
    tern_conns_stop(srv);
    soup_server_disconnect(srv->soup);
    g_clear_pointer(&srv->conns, g_hash_table_unref);
    g_clear_object(&srv->soup);
    g_main_context_pop_thread_default(srv->context);
}

void tern_server_free(tern_server *srv) {
    if (!srv)
        return;
    stop_worker(srv); /* only when run did not return normally */
    /* A job still here was leaked (a reference cycle, issue 17): LeakSanitizer
     * cannot tell, GLib's signal tables still point at it. */
    const int alive = g_atomic_int_get(&srv->jobs_alive);
    if (alive > 0)
        g_warning("%d requests' state is still allocated after the server stopped (a leak)",
                  alive);
    if (srv->socket) {
        g_socket_close(srv->socket, NULL);
        g_object_unref(srv->socket);
    }
    tn_drafter_free(srv->lookup);
    for (int i = 0; i < TERN_SERVER_MAX_PINS; i++) {
        tn_session_free(srv->slots[i].session);
        g_free(srv->slots[i].key);
    }
    /* A quit after run returned left its source in a context that may
     * outlive us. */
    if (srv->quit_source) {
        g_source_destroy(srv->quit_source);
        g_source_unref(srv->quit_source);
    }
    g_main_loop_unref(srv->loop);
    g_main_context_unref(srv->context);
    g_async_queue_unref(srv->queue);
#ifdef TERN_HAVE_IMAGEIO
    tern_embed_cache_free(srv->encodings);
    g_mutex_clear(&srv->image_lock);
#endif
    g_mutex_clear(&srv->current_lock);
    g_mutex_clear(&srv->quit_lock);
    g_free(srv->host);
    g_free(srv->api_key);
    g_free(srv->cors);
    g_free(srv->model_id);
    g_free(srv->url);
    g_free(srv->pin_cache_dir);
    g_free(srv);
}
