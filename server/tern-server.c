/* OpenAI-compatible server: HTTP side (the server's main context) and the
 * engine worker (one thread, owning every session). */
#include "tern-server.h"
#include "tern-reasoning.h"

#include <glib-unix.h>
#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cpu/tn-cpu.h"
#ifdef TERN_HAVE_IMAGEIO
#include "tern-image.h"
#endif

#define DEFAULT_QUEUE_MAX 16
#define DEFAULT_BODY_MAX (1024 * 1024)
/* With images: OpenAI's limit for one uploaded image, base64 in the body. */
#define DEFAULT_BODY_MAX_VISION (20 * 1024 * 1024)
/* Threads decoding images (PNG inflate, JPEG): off the HTTP context, and
 * off the engine worker so that a big image does not hold up the queue. */
#define DECODE_THREADS 2
/* Encoded images kept for reuse: a client sends a conversation's image again
 * with every turn, and encoding one costs far more than answering (seconds
 * to minutes on a CPU, docs/VISION.md), so the last few are kept. Gemma 3 4B:
 * 256 x 2560 floats, 2.6 MiB each. */
#define IMAGE_CACHE_SIZE 8
#define DEFAULT_PINS 4
/* OpenAI's default for the legacy completions endpoint: a raw continuation
 * of a base model may never reach an end token. */
#define DEFAULT_COMPLETION_MAX_TOKENS 16

typedef enum { JOB_CHAT, JOB_COMPLETION } job_kind;

/* tern.speculation: which drafter a request uses. */
typedef enum {
    SPEC_DEFAULT, /* the server's drafter (config.drafter), or none */
    SPEC_OFF,
    SPEC_LOOKUP,  /* prompt lookup: no model, always available */
    SPEC_SERVER,  /* the server's drafter; refused when it has none */
} spec_choice;

/* One image_url part. */
typedef struct job_image {
    char *uri;     /* the data: URI as sent; freed once decoded */
    char *where;   /* "messages[1].content[2]": names it in errors */
    char *key;     /* SHA-256 of the URI: the encoding cache's key (with the budget) */
    void *decoded; /* TernImage (imageio): pool thread -> worker, freed once encoded */
    float *cached; /* rows found in the encoding cache instead (a copy): not decoded */
} job_image;

/* An encoding kept for reuse (see IMAGE_CACHE_SIZE). */
typedef struct image_cache_entry {
    char *key; /* NULL: empty */
    int budget;
    float *rows; /* [n_tokens][n_embd] */
    int n_tokens, n_embd;
    guint64 used;
} image_cache_entry;

typedef struct job {
    gint refs;
    tern_server *server;
    SoupServerMessage *msg;
    job_kind kind;
    bool stream;
    bool include_usage;
    char id[40];
    gint64 created;

    /* The request, owned by the job. */
    char *pin_key;                /* which pinned session answers it (see slot_acquire) */
    char *system;                 /* the system message; NULL: none */
    char *user;                   /* single-turn: the only user message */
    char *prompt;                 /* completions: the raw prompt */
    bool echo;                    /* completions: the prompt comes first in the answer */
    tn_session_message *messages; /* a conversation: roles and contents */
    int n_messages;
    bool single_turn;
    tn_gen_params gen;
    char *stop_store[TN_SESSION_MAX_STOP];
    spec_choice spec;

    /* image_url parts, in the order of the TN_IMAGE_MARKERs put in their place. */
    job_image *images;
    int n_images;
    int text_markers;   /* TN_IMAGE_MARKERs the client wrote in text */
    int image_budget;   /* tern.image_tokens; 0: the projector's native count */
    GError *image_error;     /* decoding failed (decode thread), for images[image_error_at] */
    int image_error_at;
    double decode_ms;        /* decode thread */
    tn_image_embd *embd;     /* worker: the encoded images, rows owned */
    int32_t image_tokens;
    double encode_ms;
    int images_reused;       /* taken from the encoding cache */
    const char *error_code;  /* parsing: the OpenAI error code of a refusal, or NULL */

    /* Set by the server's context when the client is gone; read by the worker. */
    gint gone;

    /* Text generated but not yet written (worker -> server's context). */
    GMutex lock;
    GString *pending;
    bool flush_scheduled;
    GString *full; /* the whole answer (non-streaming) */
    bool role_sent;
    bool split_reasoning;   /* <think> blocks go to reasoning_content (reasoning_format) */
    tern_reasoning reasoning; /* the streaming splitter; server's context only */

    /* Filled by the worker when it is done. */
    int rc;
    tn_error err;
    tn_session_stats stats;
    const char *pin_source; /* "kept", "loaded", "prefilled", or NULL (raw) */
} job;

/* A session with one system prompt pinned. Worker thread only. */
typedef struct pin_slot {
    tn_session *session; /* NULL: not created yet */
    char *key;           /* the pin_key it holds; NULL: none yet */
    guint64 used;        /* LRU clock */
} pin_slot;

struct tern_server {
    tern_server_config cfg;
    char *host;
    char *api_key;
    char *cors;
    char *model_id;
    char *url;
    const tn_model *model;
    int32_t n_ctx;
    int port;
    GSocket *socket;      /* bound and listening since tern_server_new */
    GMainContext *context;
    GMainLoop *loop;
    GMutex quit_lock;
    GSource *quit_source; /* attached by tern_server_quit; destroyed by free */
    gint ran;

    /* The HTTP side: only inside tern_server_run, on its thread. */
    SoupServer *soup;
    int pending; /* queued + running jobs */
    guint64 n_served;    /* answers written */
    guint64 n_abandoned; /* clients gone before their answer was complete */
    guint64 next_id;

    /* Images: decoded by this pool (inside tern_server_run), encoded on the
     * worker with vision_cpu (worker only, made on first use). */
    GThreadPool *decode_pool;
    tn_cpu *vision_cpu;
    GMutex cache_lock; /* guards the cache: looked up by the decode threads,
                          filled by the worker */
    image_cache_entry cache[IMAGE_CACHE_SIZE];
    guint64 cache_clock;

    /* The engine side. */
    GAsyncQueue *queue;
    GThread *worker;
    gint stopping;
    pin_slot slots[TERN_SERVER_MAX_PINS]; /* worker only (slot 0 made by new) */
    tn_drafter *lookup;                   /* worker only, made on first use */
    guint64 clock;
    GMutex current_lock; /* guards the two below: the job running and its session */
    job *current;
    tn_session *current_session;
};

static job *job_ref(job *j) {
    g_atomic_int_inc(&j->refs);
    return j;
}

static void job_unref(job *j) {
    if (!g_atomic_int_dec_and_test(&j->refs))
        return;
    g_clear_object(&j->msg);
    g_free(j->pin_key);
    g_free(j->system);
    g_free(j->user);
    g_free(j->prompt);
    for (int i = 0; i < j->n_messages; i++) {
        g_free((char *)j->messages[i].role);
        g_free((char *)j->messages[i].content);
    }
    g_free(j->messages);
    for (int i = 0; i < TN_SESSION_MAX_STOP; i++)
        g_free(j->stop_store[i]);
    for (int i = 0; i < j->n_images; i++) {
        g_free(j->images[i].uri);
        g_free(j->images[i].where);
        g_free(j->images[i].key);
        g_free(j->images[i].cached);
#ifdef TERN_HAVE_IMAGEIO
        tern_image_free(j->images[i].decoded);
#endif
        if (j->embd)
            g_free((float *)j->embd[i].embd);
    }
    g_free(j->images);
    g_free(j->embd);
    g_clear_error(&j->image_error);
    g_mutex_clear(&j->lock);
    g_string_free(j->pending, TRUE);
    g_string_free(j->full, TRUE);
    tern_reasoning_clear(&j->reasoning);
    g_free(j);
}

bool tern_server_host_is_loopback(const char *host) {
    if (!host || !strcmp(host, "localhost"))
        return true;
    GInetAddress *a = g_inet_address_new_from_string(host);
    if (!a)
        return false;
    bool lo = g_inet_address_get_is_loopback(a);
    g_object_unref(a);
    return lo;
}

/* ------------------------------------------------------------ responses */

static char *json_to_text(JsonBuilder *b) {
    JsonNode *root = json_builder_get_root(b);
    JsonGenerator *g = json_generator_new();
    json_generator_set_root(g, root);
    char *s = json_generator_to_data(g, NULL);
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

static char *error_body(const char *message, const char *type, const char *param,
                        const char *code) {
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "message");
    json_builder_add_string_value(b, message);
    json_builder_set_member_name(b, "type");
    json_builder_add_string_value(b, type);
    json_builder_set_member_name(b, "param");
    if (param)
        json_builder_add_string_value(b, param);
    else
        json_builder_add_null_value(b);
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
    respond_json(srv, msg, status, error_body(m, type, param, code));
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

static bool job_abandoned(const job *j) {
    return g_atomic_int_get(&((job *)j)->gone) || g_atomic_int_get(&j->server->stopping);
}

/* Text for the client: streamed in chunks, or kept for the one answer. */
static void job_emit(job *j, const char *text) {
    g_mutex_lock(&j->lock);
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

static bool on_token(const char *piece, int32_t token, void *user) {
    job *j = user;
    (void)token;
    if (job_abandoned(j))
        return false;
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

static int run_completion(tern_server *srv, job *j, tn_session *session) {
    const tn_tokenizer *tok = tn_model_tokenizer(srv->model);
    if (!tok) {
        const char *why = tn_model_tokenizer_error(srv->model);
        g_snprintf(j->err.message, sizeof j->err.message, "the model has no usable tokenizer (%s)",
                   why && *why ? why : "none loaded");
        return TN_ERR_UNSUPPORTED;
    }
    /* A raw continuation: BOS when the vocabulary wants one, control tokens
     * in the prompt recognised (what llama.cpp's server does too). */
    tn_tokens t = {0};
    int rc = tn_tokenize(tok, j->prompt, strlen(j->prompt),
                         TN_TOKENIZE_SPECIAL | TN_TOKENIZE_ADD_BOS, &t, &j->err);
    if (rc == TN_OK && t.n == 0) {
        g_snprintf(j->err.message, sizeof j->err.message, "the prompt is empty");
        rc = TN_ERR_INVALID;
    }
    if (rc == TN_OK) {
        if (j->echo)
            job_emit(j, j->prompt);
        rc = tn_session_ask_tokens(session, t.ids, (int32_t)t.n, &j->gen, on_token, j,
                                   &j->stats, &j->err);
    }
    tn_tokens_free(&t);
    return rc;
}

#ifdef TERN_HAVE_IMAGEIO
/* A copy of the rows encoded for (key, budget), or NULL. */
static float *cache_get(tern_server *srv, const char *key, int budget) {
    float *rows = NULL;
    g_mutex_lock(&srv->cache_lock);
    for (int i = 0; i < IMAGE_CACHE_SIZE; i++) {
        image_cache_entry *e = &srv->cache[i];
        if (e->key && e->budget == budget && !strcmp(e->key, key)) {
            rows = g_try_malloc((gsize)e->n_tokens * (gsize)e->n_embd * sizeof(float));
            if (rows)
                memcpy(rows, e->rows, (size_t)e->n_tokens * (size_t)e->n_embd * sizeof(float));
            e->used = ++srv->cache_clock;
            break;
        }
    }
    g_mutex_unlock(&srv->cache_lock);
    return rows;
}

/* Keeps a copy of rows, replacing the least recently used entry. */
static void cache_put(tern_server *srv, const char *key, int budget, const float *rows,
                      int n_tokens, int n_embd) {
    const gsize bytes = (gsize)n_tokens * (gsize)n_embd * sizeof(float);
    float *copy = g_try_malloc(bytes);
    if (!copy || !key) {
        g_free(copy);
        return;
    }
    memcpy(copy, rows, bytes);
    g_mutex_lock(&srv->cache_lock);
    image_cache_entry *slot = &srv->cache[0];
    for (int i = 0; i < IMAGE_CACHE_SIZE; i++) {
        image_cache_entry *e = &srv->cache[i];
        if (!e->key || (e->budget == budget && !strcmp(e->key, key))) {
            slot = e;
            break;
        }
        if (e->used < slot->used)
            slot = e;
    }
    g_free(slot->key);
    g_free(slot->rows);
    *slot = (image_cache_entry){g_strdup(key), budget, copy, n_tokens, n_embd,
                                ++srv->cache_clock};
    g_mutex_unlock(&srv->cache_lock);
}
#endif

/* The job's decoded images into embeddings, on the worker (the engine's
 * CPU is busy with one thing at a time). Each decoded picture is freed as
 * soon as it is encoded. */
static int encode_images(tern_server *srv, job *j) {
#ifdef TERN_HAVE_IMAGEIO
    tn_vision *v = srv->cfg.vision;
    if (!srv->vision_cpu && !(srv->vision_cpu = tn_cpu_new(srv->cfg.n_threads))) {
        g_snprintf(j->err.message, sizeof j->err.message, "out of memory encoding an image");
        return TN_ERR_NOMEM;
    }
    const int n_embd = tn_vision_get_info(v)->n_embd_text;
    const int n_tok = tn_vision_tokens(v, j->image_budget);
    j->embd = g_new0(tn_image_embd, j->n_images);
    for (int i = 0; i < j->n_images; i++) {
        if (job_abandoned(j))
            return TN_ERR_CANCELLED;
        if (j->images[i].cached) {
            j->embd[i] = (tn_image_embd){j->images[i].cached, n_tok, n_embd};
            j->images[i].cached = NULL; /* now owned by embd */
            j->image_tokens += n_tok;
            j->images_reused++;
            continue;
        }
        TernImage *img = j->images[i].decoded;
        float *rows = g_try_malloc((gsize)n_tok * (gsize)n_embd * sizeof(float));
        int n = 0;
        tn_error e = {.message = "out of memory"};
        const gint64 t0 = g_get_monotonic_time();
        int rc = rows ? tn_vision_encode(v, img->rgb, img->width, img->height, j->image_budget,
                                         rows, &n, srv->vision_cpu, &e)
                      : TN_ERR_NOMEM;
        j->encode_ms += (double)(g_get_monotonic_time() - t0) / 1000.0;
        tern_image_free(img);
        j->images[i].decoded = NULL;
        if (rc != TN_OK) {
            g_free(rows);
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

static void run_job(tern_server *srv, job *j) {
    memset(&j->err, 0, sizeof j->err);
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
        /* Without images the _images calls are the plain ones. */
        if (j->kind == JOB_COMPLETION)
            j->rc = run_completion(srv, j, slot->session);
        else if (j->single_turn)
            j->rc = tn_session_ask_images(slot->session, j->user, j->embd, j->n_images, &j->gen,
                                          on_token, j, &j->stats, &j->err);
        else
            j->rc = tn_session_chat_images(slot->session, j->messages, j->n_messages, j->embd,
                                           j->n_images, &j->gen, on_token, j, &j->stats,
                                           &j->err);
    }
    set_current(srv, NULL, NULL);
    if (j->rc != TN_OK && job_abandoned(j))
        j->rc = TN_ERR_CANCELLED;

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
        run_job(srv, j);
        schedule(j, finish_job);
        job_unref(j);
    }
    return NULL;
}

/* ------------------------------------------------------------ output */

static void builder_choice_start(JsonBuilder *b) {
    json_builder_set_member_name(b, "choices");
    json_builder_begin_array(b);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, 0);
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

static const char *finish_reason(const job *j) {
    switch (j->stats.stop_reason) {
    case TN_STOP_LIMIT:
    case TN_STOP_CONTEXT_FULL:
        return "length";
    default:
        return "stop";
    }
}

static void sse_send(job *j, char *json) {
    SoupMessageBody *body = soup_server_message_get_response_body(j->msg);
    char *line = g_strdup_printf("data: %s\n\n", json);
    soup_message_body_append(body, SOUP_MEMORY_TAKE, line, strlen(line));
    g_free(json);
}

static void sse_delta(job *j, const char *role, const char *content, const char *finish) {
    JsonBuilder *b = json_builder_new();
    builder_head(b, j, j->kind == JOB_CHAT ? "chat.completion.chunk" : "text_completion");
    builder_choice_start(b);
    if (j->kind == JOB_CHAT) {
        json_builder_set_member_name(b, "delta");
        json_builder_begin_object(b);
        if (role) {
            member_string(b, "role", role);
        }
        if (content) {
            member_string(b, "content", content);
        }
        json_builder_end_object(b);
    } else {
        member_string(b, "text", content ? content : "");
    }
    json_builder_set_member_name(b, "logprobs");
    json_builder_add_null_value(b);
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

/* A chunk whose delta is {"reasoning_content": text}. */
static void sse_reasoning(job *j, const char *text) {
    JsonBuilder *b = json_builder_new();
    builder_head(b, j, "chat.completion.chunk");
    builder_choice_start(b);
    json_builder_set_member_name(b, "delta");
    json_builder_begin_object(b);
    member_string(b, "reasoning_content", text);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "logprobs");
    json_builder_add_null_value(b);
    json_builder_set_member_name(b, "finish_reason");
    json_builder_add_null_value(b);
    json_builder_end_object(b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    sse_send(j, json_to_text(b));
    g_object_unref(b);
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
        sse_delta(j, NULL, content->str, NULL);
    g_string_free(content, TRUE);
    g_string_free(reasoning, TRUE);
}

static void stream_pending(job *j) {
    g_mutex_lock(&j->lock);
    char *text = g_strdup(j->pending->str);
    g_string_truncate(j->pending, 0);
    j->flush_scheduled = false;
    g_mutex_unlock(&j->lock);
    if (!j->role_sent && j->kind == JOB_CHAT) {
        sse_delta(j, "assistant", "", NULL);
        j->role_sent = true;
    }
    if (j->split_reasoning)
        stream_split(j, text, false);
    else if (*text)
        sse_delta(j, NULL, text, NULL);
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
        respond_error(srv, j->msg, 400, "invalid_request_error", NULL, NULL, "%s",
                      j->err.message);
    else
        respond_error(srv, j->msg, 500, "server_error", NULL, NULL, "%s",
                      j->err.message[0] ? j->err.message : tn_status_name(j->rc));
}

static gboolean finish_job(gpointer data) {
    job *j = data;
    tern_server *srv = j->server;
    srv->pending--;
    if (g_atomic_int_get(&j->gone)) {
        srv->n_abandoned++;
        return G_SOURCE_REMOVE;
    }
    srv->n_served++;
    /* Stopped by the shutdown: a truncated answer must not look complete. */
    if (g_atomic_int_get(&srv->stopping) && j->rc == TN_OK &&
        (j->stats.stop_reason == TN_STOP_CALLBACK || j->stats.stop_reason == TN_STOP_CANCELLED))
        j->rc = TN_ERR_CANCELLED;
    if (j->rc == TN_ERR_CANCELLED)
        g_snprintf(j->err.message, sizeof j->err.message,
                   "the request was cancelled: the server is stopping");

    if (j->stream) {
        if (j->rc != TN_OK) {
            /* Nothing sent yet: the error goes in the stream as an event. */
            const char *code = j->rc == TN_ERR_OVERFLOW ? "context_length_exceeded" : NULL;
            if (j->rc == TN_ERR_CANCELLED)
                code = "cancelled";
            const bool client_error = j->rc == TN_ERR_OVERFLOW || j->rc == TN_ERR_INVALID;
            sse_send(j, error_body(j->err.message[0] ? j->err.message : tn_status_name(j->rc),
                                   client_error ? "invalid_request_error" : "server_error", NULL,
                                   code));
        } else {
            stream_pending(j);
            if (j->split_reasoning)
                stream_split(j, "", true);
            sse_delta(j, NULL, NULL, finish_reason(j));
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
    JsonBuilder *b = json_builder_new();
    builder_head(b, j, j->kind == JOB_CHAT ? "chat.completion" : "text_completion");
    builder_choice_start(b);
    if (j->kind == JOB_CHAT) {
        json_builder_set_member_name(b, "message");
        json_builder_begin_object(b);
        member_string(b, "role", "assistant");
        if (j->split_reasoning) {
            GString *content = g_string_new(NULL), *reasoning = g_string_new(NULL);
            tern_reasoning_feed(&j->reasoning, j->full->str, content, reasoning);
            tern_reasoning_finish(&j->reasoning, content, reasoning);
            member_string(b, "content", content->str);
            if (reasoning->len)
                member_string(b, "reasoning_content", reasoning->str);
            g_string_free(content, TRUE);
            g_string_free(reasoning, TRUE);
        } else {
            member_string(b, "content", j->full->str);
        }
        json_builder_end_object(b);
    } else {
        member_string(b, "text", j->full->str);
    }
    json_builder_set_member_name(b, "logprobs");
    json_builder_add_null_value(b);
    member_string(b, "finish_reason", finish_reason(j));
    json_builder_end_object(b);
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

/* True when the client of a waiting (paused) request closed its connection:
 * nothing is read from a paused message's socket, so a peek sees the end. */
static bool client_closed(SoupServerMessage *msg) {
    GSocket *sock = soup_server_message_get_socket(msg);
    if (!sock)
        return false;
    char c;
    ssize_t n = recv(g_socket_get_fd(sock), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* A streaming client that leaves is noticed when a write fails; one that
 * waits for a whole answer writes nothing, so the running request's
 * connection is looked at a few times a second. */
static gboolean watch_running(gpointer data) {
    tern_server *srv = data;
    g_mutex_lock(&srv->current_lock);
    job *j = srv->current ? job_ref(srv->current) : NULL;
    g_mutex_unlock(&srv->current_lock);
    if (j) {
        if (!j->stream && !g_atomic_int_get(&j->gone) && client_closed(j->msg))
            on_msg_finished(j->msg, j);
        job_unref(j);
    }
    return G_SOURCE_CONTINUE;
}

/* ------------------------------------------------------------ request parsing */

static int count_markers(const char *text) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, TN_IMAGE_MARKER)); p += strlen(TN_IMAGE_MARKER))
        n++;
    return n;
}

/* An image_url part of messages[index].content[part]: checked here, decoded
 * later off this context. false with *why (allocated) and j->error_code. */
static bool add_image(job *j, JsonObject *part, guint index, guint part_index, const char *role,
                      char **why) {
    tern_server *srv = j->server;
    if (strcmp(role, "user")) {
        *why = g_strdup_printf("messages[%u]: image_url parts go in user messages, not %s ones",
                               index, role);
        return false;
    }
    if (!srv->cfg.vision) {
        j->error_code = "model_not_vision";
        *why = g_strdup_printf("messages[%u]: the model '%s' takes no images here: the server "
                               "has no vision projector for it (tern-cli serve --mmproj PATH, or "
                               "the model's *mmproj*.gguf beside it)",
                               index, srv->model_id);
        return false;
    }
#ifndef TERN_HAVE_IMAGEIO
    *why = g_strdup_printf("messages[%u]: this server was built without image decoding "
                           "(gdk-pixbuf)", index);
    return false;
#endif
    if (j->n_images >= TERN_SERVER_MAX_IMAGES) {
        *why = g_strdup_printf("at most %d images per request", TERN_SERVER_MAX_IMAGES);
        return false;
    }
    /* {"url": ...} as OpenAI documents it; a bare string as some clients send.
     * "detail" is OpenAI's resolution hint: the budget is tern.image_tokens. */
    JsonNode *iu = json_object_get_member(part, "image_url");
    const char *url = NULL;
    if (iu && JSON_NODE_HOLDS_OBJECT(iu))
        url = json_object_get_string_member_with_default(json_node_get_object(iu), "url", NULL);
    else if (iu && JSON_NODE_HOLDS_VALUE(iu) && json_node_get_value_type(iu) == G_TYPE_STRING)
        url = json_node_get_string(iu);
    j->error_code = "invalid_image_url";
    if (!url) {
        *why = g_strdup_printf("messages[%u].content[%u]: image_url must be {\"url\": \"data:"
                               "image/png;base64,...\"}",
                               index, part_index);
        return false;
    }
    if (g_ascii_strncasecmp(url, "data:", 5)) {
        const bool remote =
            !g_ascii_strncasecmp(url, "http://", 7) || !g_ascii_strncasecmp(url, "https://", 8);
        *why = g_strdup_printf("messages[%u].content[%u]: %s; send the image itself as a "
                               "data: URI (data:image/png;base64,...)",
                               index, part_index,
                               remote ? "the server never fetches remote images"
                                      : "only data: URIs are accepted");
        return false;
    }
    j->error_code = NULL;
    if (!j->images)
        j->images = g_new0(job_image, TERN_SERVER_MAX_IMAGES);
    job_image *im = &j->images[j->n_images++];
    im->uri = g_strdup(url);
    im->where = g_strdup_printf("messages[%u].content[%u]", index, part_index);
    return true;
}

/* Text of messages[index]'s content: a string, or an array of parts (text;
 * image_url, which leaves TN_IMAGE_MARKER where it was). NULL with *why
 * (allocated) when refused. */
static char *content_text(job *j, JsonNode *node, guint index, const char *role, char **why) {
    if (!node || JSON_NODE_HOLDS_NULL(node))
        return g_strdup("");
    if (JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING) {
        j->text_markers += count_markers(json_node_get_string(node));
        return g_strdup(json_node_get_string(node));
    }
    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        *why = g_strdup_printf("messages[%u]: content must be a string or an array of content "
                               "parts", index);
        return NULL;
    }
    GString *s = g_string_new(NULL);
    JsonArray *a = json_node_get_array(node);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *p = json_array_get_element(a, i);
        if (!JSON_NODE_HOLDS_OBJECT(p)) {
            *why = g_strdup_printf("messages[%u]: a content part must be an object", index);
            g_string_free(s, TRUE);
            return NULL;
        }
        JsonObject *po = json_node_get_object(p);
        const char *type = json_object_get_string_member_with_default(po, "type", "");
        if (!strcmp(type, "image_url")) {
            if (!add_image(j, po, index, i, role, why)) {
                g_string_free(s, TRUE);
                return NULL;
            }
            g_string_append(s, TN_IMAGE_MARKER);
        } else if (!strcmp(type, "text")) {
            const char *t = json_object_get_string_member_with_default(po, "text", "");
            j->text_markers += count_markers(t);
            g_string_append(s, t);
        } else {
            *why = g_strdup_printf("messages[%u].content[%u]: content parts of type '%s' are not "
                                   "supported (text, image_url)",
                                   index, i, type);
            g_string_free(s, TRUE);
            return NULL;
        }
    }
    return g_string_free(s, FALSE);
}

static bool member_number(JsonObject *o, const char *name, double *out, const char **bad) {
    JsonNode *n = json_object_get_member(o, name);
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return false;
    if (!JSON_NODE_HOLDS_VALUE(n) || (json_node_get_value_type(n) != G_TYPE_INT64 &&
                                      json_node_get_value_type(n) != G_TYPE_DOUBLE)) {
        *bad = name;
        return false;
    }
    *out = json_node_get_double(n);
    return true;
}

/* A boolean member; false with *bad set when it is present but not one. */
static bool member_bool(JsonObject *o, const char *name, bool fallback, const char **bad) {
    JsonNode *n = json_object_get_member(o, name);
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return fallback;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN) {
        *bad = name;
        return fallback;
    }
    return json_node_get_boolean(n);
}

/* Fills the job's generation parameters; false with the offending parameter
 * in *param and a message in *why. */
static bool parse_gen(JsonObject *o, job *j, const char **param, char **why) {
    tn_gen_params *g = &j->gen;
    *g = tn_gen_default_params();
    /* OpenAI's default temperature is 1; a local server's callers mostly want
     * reproducible answers, so greedy unless asked (documented). */
    g->sampler.temperature = 0;
    const char *bad = NULL;
    double v;
    if (member_number(o, "temperature", &v, &bad)) {
        if (v < 0 || v > 2) {
            *param = "temperature";
            *why = g_strdup("temperature must be between 0 and 2");
            return false;
        }
        g->sampler.temperature = (float)v;
    }
    if (member_number(o, "top_p", &v, &bad)) {
        if (v <= 0 || v > 1) {
            *param = "top_p";
            *why = g_strdup("top_p must be in (0, 1]");
            return false;
        }
        g->sampler.top_p = (float)v;
    }
    if (member_number(o, "top_k", &v, &bad)) {
        if (v < 0 || v > INT32_MAX) {
            *param = "top_k";
            *why = g_strdup("top_k must be 0 (off) or more");
            return false;
        }
        g->sampler.top_k = (int32_t)v;
    }
    if (member_number(o, "min_p", &v, &bad)) {
        if (v < 0 || v > 1) {
            *param = "min_p";
            *why = g_strdup("min_p must be between 0 and 1");
            return false;
        }
        g->sampler.min_p = (float)v;
    }
    if (member_number(o, "presence_penalty", &v, &bad)) {
        if (v < -2 || v > 2) {
            *param = "presence_penalty";
            *why = g_strdup("presence_penalty must be between -2 and 2");
            return false;
        }
        g->sampler.presence_penalty = (float)v;
    }
    if (member_number(o, "frequency_penalty", &v, &bad)) {
        if (v < -2 || v > 2) {
            *param = "frequency_penalty";
            *why = g_strdup("frequency_penalty must be between -2 and 2");
            return false;
        }
        g->sampler.frequency_penalty = (float)v;
    }
    if (member_number(o, "seed", &v, &bad))
        g->sampler.seed = (uint64_t)(int64_t)v;
    else /* no seed: a new one per request, so a regenerated answer differs */
        g->sampler.seed = (uint64_t)g_random_int() << 32 | g_random_int();
    JsonNode *rf = json_object_get_member(o, "reasoning_format");
    if (rf && !JSON_NODE_HOLDS_NULL(rf)) {
        const char *f = JSON_NODE_HOLDS_VALUE(rf) && json_node_get_value_type(rf) == G_TYPE_STRING
                            ? json_node_get_string(rf)
                            : "";
        if (!strcmp(f, "none"))
            j->split_reasoning = false;
        else if (strcmp(f, "auto") && strcmp(f, "deepseek")) {
            *param = "reasoning_format";
            *why = g_strdup("reasoning_format must be \"auto\", \"deepseek\" or \"none\"");
            return false;
        }
    }
    g->max_tokens = j->kind == JOB_COMPLETION ? DEFAULT_COMPLETION_MAX_TOKENS : 0;
    const char *max_name = "max_tokens";
    bool has_max = member_number(o, max_name, &v, &bad);
    if (!has_max && !bad) {
        max_name = "max_completion_tokens";
        has_max = member_number(o, max_name, &v, &bad);
    }
    if (has_max) {
        if (v < 1) {
            *param = max_name;
            *why = g_strdup_printf("%s must be at least 1", max_name);
            return false;
        }
        g->max_tokens = v > INT32_MAX ? INT32_MAX : (int32_t)v;
    }
    if (member_number(o, "n", &v, &bad) && v != 1) {
        *param = "n";
        *why = g_strdup("only n = 1 is supported (one engine, one answer per request)");
        return false;
    }
    if (bad) {
        *param = bad;
        *why = g_strdup_printf("%s must be a number", bad);
        return false;
    }
    JsonNode *stop = json_object_get_member(o, "stop");
    if (stop && !JSON_NODE_HOLDS_NULL(stop)) {
        if (JSON_NODE_HOLDS_VALUE(stop) && json_node_get_value_type(stop) == G_TYPE_STRING) {
            j->stop_store[0] = g_strdup(json_node_get_string(stop));
            g->n_stop = 1;
        } else if (JSON_NODE_HOLDS_ARRAY(stop)) {
            JsonArray *a = json_node_get_array(stop);
            guint n = json_array_get_length(a);
            if (n > TN_SESSION_MAX_STOP) {
                *param = "stop";
                *why = g_strdup_printf("at most %d stop strings", TN_SESSION_MAX_STOP);
                return false;
            }
            for (guint i = 0; i < n; i++) {
                JsonNode *e = json_array_get_element(a, i);
                if (!JSON_NODE_HOLDS_VALUE(e) || json_node_get_value_type(e) != G_TYPE_STRING) {
                    *param = "stop";
                    *why = g_strdup("stop must be a string or an array of strings");
                    return false;
                }
                j->stop_store[g->n_stop++] = g_strdup(json_node_get_string(e));
            }
        } else {
            *param = "stop";
            *why = g_strdup("stop must be a string or an array of strings");
            return false;
        }
        for (int i = 0; i < g->n_stop; i++) {
            if (!*j->stop_store[i]) {
                *param = "stop";
                *why = g_strdup("a stop string must not be empty");
                return false;
            }
            g->stop[i] = j->stop_store[i];
        }
    }
    JsonNode *tern = json_object_get_member(o, "tern");
    if (tern && !JSON_NODE_HOLDS_NULL(tern)) {
        if (!JSON_NODE_HOLDS_OBJECT(tern)) {
            *param = "tern";
            *why = g_strdup("tern must be an object");
            return false;
        }
        JsonObject *t = json_node_get_object(tern);
        g->thinking = member_bool(t, "thinking", g->thinking, &bad);
        if (!member_bool(t, "single_turn", true, &bad))
            j->single_turn = false;
        if (bad) {
            *param = "tern";
            *why = g_strdup_printf("tern.%s must be true or false", bad);
            return false;
        }
        JsonNode *sp = json_object_get_member(t, "speculation");
        if (sp && !JSON_NODE_HOLDS_NULL(sp)) {
            const GType type = JSON_NODE_HOLDS_VALUE(sp) ? json_node_get_value_type(sp) : 0;
            const char *name = type == G_TYPE_STRING ? json_node_get_string(sp) : "";
            if (type == G_TYPE_BOOLEAN)
                j->spec = json_node_get_boolean(sp)
                              ? (j->server->cfg.drafter ? SPEC_SERVER : SPEC_LOOKUP)
                              : SPEC_OFF;
            else if (!strcmp(name, "none"))
                j->spec = SPEC_OFF;
            else if (!strcmp(name, "lookup"))
                j->spec = SPEC_LOOKUP;
            else if (!strcmp(name, "server"))
                j->spec = SPEC_SERVER;
            else {
                *param = "tern";
                *why = g_strdup("tern.speculation must be true, false, \"none\", \"lookup\" or "
                                "\"server\"");
                return false;
            }
            if (j->spec == SPEC_SERVER && !j->server->cfg.drafter) {
                *param = "tern";
                *why = g_strdup("tern.speculation \"server\": this server has no drafter "
                                "(tern-cli serve --spec draft:PATH or dflash:PATH)");
                return false;
            }
        }
        if (member_number(t, "image_tokens", &v, &bad)) {
            if (v < 1 || v > 65536 || v != (double)(int)v) {
                *param = "tern";
                *why = g_strdup("tern.image_tokens must be a whole number of tokens, 1..65536");
                return false;
            }
            j->image_budget = (int)v;
        } else if (bad) {
            *param = "tern";
            *why = g_strdup_printf("tern.%s must be a number", bad);
            return false;
        }
        if (member_number(t, "draft_max", &v, &bad)) {
            if (v < 1 || v > TN_SPEC_MAX_DRAFT) {
                *param = "tern";
                *why = g_strdup_printf("tern.draft_max must be 1..%d", TN_SPEC_MAX_DRAFT);
                return false;
            }
            g->draft_max = (int32_t)v;
        } else if (bad) {
            *param = "tern";
            *why = g_strdup_printf("tern.%s must be a number", bad);
            return false;
        }
    }
    return true;
}

static bool parse_chat(JsonObject *o, job *j, const char **param, char **why) {
    JsonNode *mn = json_object_get_member(o, "messages");
    if (!mn || !JSON_NODE_HOLDS_ARRAY(mn) || json_array_get_length(json_node_get_array(mn)) == 0) {
        *param = "messages";
        *why = g_strdup("messages must be a non-empty array");
        return false;
    }
    JsonArray *a = json_node_get_array(mn);
    guint n = json_array_get_length(a);
    j->messages = g_new0(tn_session_message, n);
    int n_user = 0, n_other = 0;
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(a, i);
        if (!JSON_NODE_HOLDS_OBJECT(e)) {
            *param = "messages";
            *why = g_strdup_printf("messages[%u] must be an object", i);
            return false;
        }
        JsonObject *m = json_node_get_object(e);
        const char *role = json_object_get_string_member_with_default(m, "role", "");
        if (!strcmp(role, "developer"))
            role = "system";
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
            strcmp(role, "tool")) {
            *param = "messages";
            *why = g_strdup_printf("messages[%u]: role '%s' is not supported (system, developer, "
                                   "user, assistant, tool)",
                                   i, role);
            return false;
        }
        char *text = content_text(j, json_object_get_member(m, "content"), i, role, why);
        if (!text) {
            *param = "messages";
            return false;
        }
        j->messages[j->n_messages].role = g_strdup(role);
        j->messages[j->n_messages].content = text;
        j->n_messages++;
        if (!strcmp(role, "system") && i == 0)
            j->system = g_strdup(text);
        else if (!strcmp(role, "user"))
            n_user++;
        else
            n_other++;
    }
    /* [system,] user: one independent request against the pin. */
    bool simple = n_user == 1 && n_other == 0 &&
                  !strcmp(j->messages[j->n_messages - 1].role, "user");
    if (simple)
        j->user = g_strdup(j->messages[j->n_messages - 1].content);
    j->single_turn = simple;
    /* A conversation runs in the session that pins its own system message
     * (none: the empty one), so that another request's system prompt never
     * leaks into it, and its rows follow that pin. */
    j->pin_key = g_strconcat("s", j->system ? j->system : "", NULL);
    if (j->n_images > 0 && j->text_markers > 0) {
        *param = "messages";
        *why = g_strdup("a text part contains " TN_IMAGE_MARKER ", which marks where images go: "
                        "remove it from the text");
        return false;
    }
    return parse_gen(o, j, param, why);
}

static bool parse_completion(JsonObject *o, job *j, const char **param, char **why) {
    JsonNode *p = json_object_get_member(o, "prompt");
    if (p && JSON_NODE_HOLDS_ARRAY(p) && json_array_get_length(json_node_get_array(p)) == 1)
        p = json_array_get_element(json_node_get_array(p), 0);
    if (!p || !JSON_NODE_HOLDS_VALUE(p) || json_node_get_value_type(p) != G_TYPE_STRING) {
        *param = "prompt";
        *why = g_strdup("prompt must be a string (or an array of one string)");
        return false;
    }
    j->prompt = g_strdup(json_node_get_string(p));
    j->pin_key = g_strdup("r");
    j->single_turn = true;
    if (!parse_gen(o, j, param, why))
        return false;
    const char *bad = NULL;
    j->echo = member_bool(o, "echo", false, &bad);
    double v;
    if (member_number(o, "best_of", &v, &bad) && v != 1) {
        *param = "best_of";
        *why = g_strdup("only best_of = 1 is supported (one engine, one answer per request)");
        return false;
    }
    const char *suffix = json_object_get_string_member_with_default(o, "suffix", NULL);
    if (suffix && *suffix) {
        *param = "suffix";
        *why = g_strdup("suffix (insertion) is not supported");
        return false;
    }
    if (bad) {
        *param = bad;
        *why = g_strdup_printf("%s has the wrong type", bad);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------ handlers */

/* A request ready for the engine (images decoded): to the worker's queue,
 * which takes the caller's reference. Streams get their headers now, after
 * the last chance of a plain error answer. */
static void enqueue(job *j) {
    tern_server *srv = j->server;
    if (j->stream) {
        add_common_headers(srv, j->msg);
        soup_server_message_set_status(j->msg, 200, NULL);
        SoupMessageHeaders *h = soup_server_message_get_response_headers(j->msg);
        soup_message_headers_set_encoding(h, SOUP_ENCODING_CHUNKED);
        soup_message_headers_replace(h, "Content-Type", "text/event-stream");
        soup_message_headers_replace(h, "Cache-Control", "no-cache");
    }
    g_async_queue_push(srv->queue, j);
}

#ifdef TERN_HAVE_IMAGEIO
/* Back on the server's context with the images decoded (or not): a client
 * error answers 400 now, as a plain JSON error even for a stream. */
static gboolean images_decoded(gpointer data) {
    job *j = data;
    tern_server *srv = j->server;
    if (!g_atomic_int_get(&j->gone) && client_closed(j->msg))
        on_msg_finished(j->msg, j);
    if (g_atomic_int_get(&j->gone)) {
        srv->pending--;
        srv->n_abandoned++;
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

/* Decode-pool thread: the data: URIs into pictures no larger than the
 * encoder will use (tn_vision_input_side for the request's budget). */
static void decode_images(gpointer data, gpointer pool_data) {
    job *j = data;
    tern_server *srv = pool_data;
    const TernImageOptions io = {.fit_side =
                                     tn_vision_input_side(srv->cfg.vision, j->image_budget)};
    const gint64 t0 = g_get_monotonic_time();
    for (int i = 0; i < j->n_images && !j->image_error && !job_abandoned(j); i++) {
        job_image *im = &j->images[i];
        im->key = g_compute_checksum_for_string(G_CHECKSUM_SHA256, im->uri, -1);
        im->cached = cache_get(srv, im->key, j->image_budget);
        if (!im->cached)
            im->decoded = tern_image_load_data_uri(im->uri, &io, &j->image_error);
        j->image_error_at = i;
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
    if (!h || g_ascii_strncasecmp(h, "Bearer ", 7))
        return false;
    const char *k = h + 7;
    size_t a = strlen(k), b = strlen(srv->api_key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < a && i < b; i++)
        diff |= (unsigned)(k[i] ^ srv->api_key[i]);
    return diff == 0;
}

static void handle_generate(tern_server *srv, SoupServerMessage *msg, job_kind kind) {
    SoupMessageBody *req = soup_server_message_get_request_body(msg);
    if ((size_t)req->length > srv->cfg.body_max) {
        respond_error(srv, msg, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body is %lld bytes; the limit is %zu", (long long)req->length,
                      srv->cfg.body_max);
        return;
    }
    GBytes *bytes = soup_message_body_flatten(req);
    gsize len = 0;
    const char *data = g_bytes_get_data(bytes, &len);
    JsonParser *parser = json_parser_new();
    GError *e = NULL;
    if (!json_parser_load_from_data(parser, data ? data : "", (gssize)len, &e) ||
        !json_parser_get_root(parser) || !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        respond_error(srv, msg, 400, "invalid_request_error", NULL, "invalid_json",
                      "the request body is not a JSON object%s%s", e ? ": " : "",
                      e ? e->message : "");
        g_clear_error(&e);
        g_object_unref(parser);
        g_bytes_unref(bytes);
        return;
    }
    g_bytes_unref(bytes);
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));

    JsonNode *model_node = json_object_get_member(o, "model");
    if (model_node && !JSON_NODE_HOLDS_NULL(model_node) &&
        (!JSON_NODE_HOLDS_VALUE(model_node) ||
         json_node_get_value_type(model_node) != G_TYPE_STRING)) {
        respond_error(srv, msg, 400, "invalid_request_error", "model", NULL,
                      "model must be a string");
        g_object_unref(parser);
        return;
    }
    const char *model = json_object_get_string_member_with_default(o, "model", NULL);
    if (model && strcmp(model, srv->model_id)) {
        respond_error(srv, msg, 404, "invalid_request_error", "model", "model_not_found",
                      "the model '%s' does not exist; this server serves '%s'", model,
                      srv->model_id);
        g_object_unref(parser);
        return;
    }

    job *j = g_new0(job, 1);
    j->refs = 1;
    j->server = srv;
    j->kind = kind;
    g_mutex_init(&j->lock);
    j->pending = g_string_new(NULL);
    j->full = g_string_new(NULL);
    tern_reasoning_init(&j->reasoning);
    j->split_reasoning = kind == JOB_CHAT;
    j->created = g_get_real_time() / G_USEC_PER_SEC;
    g_snprintf(j->id, sizeof j->id, "%s-%" G_GUINT64_FORMAT,
               kind == JOB_CHAT ? "chatcmpl" : "cmpl", ++srv->next_id);
    const char *bad = NULL;
    j->stream = member_bool(o, "stream", false, &bad);
    JsonNode *so = json_object_get_member(o, "stream_options");
    if (so && JSON_NODE_HOLDS_OBJECT(so))
        j->include_usage = member_bool(json_node_get_object(so), "include_usage", false, &bad);

    const char *param = bad;
    char *why = bad ? g_strdup_printf("%s must be true or false", bad) : NULL;
    bool ok = !bad && (kind == JOB_CHAT ? parse_chat(o, j, &param, &why)
                                        : parse_completion(o, j, &param, &why));
    g_object_unref(parser);
    if (!ok) {
        respond_error(srv, msg, 400, "invalid_request_error", param, j->error_code, "%s", why);
        g_free(why);
        job_unref(j);
        return;
    }
    if (g_atomic_int_get(&srv->stopping)) { /* while run drains its context */
        respond_error(srv, msg, 503, "server_error", NULL, "cancelled",
                      "the server is stopping");
        job_unref(j);
        return;
    }
    if (srv->pending >= srv->cfg.queue_max) {
        soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                     "Retry-After", "1");
        respond_error(srv, msg, 429, "rate_limit_exceeded", NULL, "queue_full",
                      "%d requests are already waiting or running; retry later", srv->pending);
        job_unref(j);
        return;
    }

    j->msg = g_object_ref(msg);
    g_signal_connect_data(msg, "finished", G_CALLBACK(on_msg_finished), job_ref(j),
                          (GClosureNotify)(void (*)(void))job_unref, 0);
    soup_server_message_pause(msg);
    srv->pending++;
#ifdef TERN_HAVE_IMAGEIO
    if (j->n_images > 0) {
        /* The pool takes our reference; images_decoded queues the job. */
        g_thread_pool_push(srv->decode_pool, j, NULL);
        return;
    }
#endif
    enqueue(j);
}

static void handle_models(tern_server *srv, SoupServerMessage *msg) {
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    member_string(b, "object", "list");
    json_builder_set_member_name(b, "data");
    json_builder_begin_array(b);
    json_builder_begin_object(b);
    member_string(b, "id", srv->model_id);
    member_string(b, "object", "model");
    member_int(b, "created", 0);
    member_string(b, "owned_by", "tern");
    member_string(b, "description", tn_model_description(srv->model));
    member_int(b, "context_length", srv->n_ctx);
    json_builder_end_object(b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    respond_json(srv, msg, 200, json_to_text(b));
    g_object_unref(b);
}

static void handle_health(tern_server *srv, SoupServerMessage *msg) {
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    member_string(b, "status", "ok");
    member_string(b, "model", srv->model_id);
    member_int(b, "queue", srv->pending);
    member_int(b, "served", (gint64)srv->n_served);
    member_int(b, "abandoned", (gint64)srv->n_abandoned);
    json_builder_end_object(b);
    respond_json(srv, msg, 200, json_to_text(b));
    g_object_unref(b);
}

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
        soup_message_headers_replace(h, "Access-Control-Allow-Headers",
                                     "Authorization, Content-Type");
        soup_message_headers_replace(h, "Access-Control-Max-Age", "600");
        soup_server_message_set_status(msg, 204, NULL);
        return;
    }
    if (!strcmp(path, "/health")) {
        if (strcmp(method, "GET"))
            respond_error(srv, msg, 405, "invalid_request_error", NULL, NULL,
                          "%s /health: use GET", method);
        else
            handle_health(srv, msg);
        return;
    }
    if (!authorized(srv, msg)) {
        soup_message_headers_replace(soup_server_message_get_response_headers(msg),
                                     "WWW-Authenticate", "Bearer");
        respond_error(srv, msg, 401, "invalid_request_error", NULL, "invalid_api_key",
                      "a valid API key is required (Authorization: Bearer KEY)");
        return;
    }
    if (!strcmp(path, "/v1/models")) {
        if (strcmp(method, "GET"))
            respond_error(srv, msg, 405, "invalid_request_error", NULL, NULL,
                          "%s /v1/models: use GET", method);
        else
            handle_models(srv, msg);
        return;
    }
    bool chat = !strcmp(path, "/v1/chat/completions");
    if (chat || !strcmp(path, "/v1/completions")) {
        if (strcmp(method, "POST"))
            respond_error(srv, msg, 405, "invalid_request_error", NULL, NULL, "%s %s: use POST",
                          method, path);
        else
            handle_generate(srv, msg, chat ? JOB_CHAT : JOB_COMPLETION);
        return;
    }
    respond_error(srv, msg, 404, "invalid_request_error", NULL, "not_found",
                  "no endpoint %s %s (GET /health, GET /v1/models, POST /v1/chat/completions, "
                  "POST /v1/completions)",
                  method, path);
}

/* Bodies over the limit are refused from their Content-Length, before they
 * are read. */
static void on_got_headers(SoupServerMessage *msg, gpointer data) {
    tern_server *srv = data;
    goffset len = soup_message_headers_get_content_length(
        soup_server_message_get_request_headers(msg));
    if (len > 0 && (size_t)len > srv->cfg.body_max)
        respond_error(srv, msg, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body is %lld bytes; the limit is %zu", (long long)len,
                      srv->cfg.body_max);
}

/* A body without Content-Length (chunked) is counted as it arrives. */
static void on_got_chunk(SoupServerMessage *msg, GBytes *chunk, gpointer data) {
    tern_server *srv = data;
    (void)chunk;
    SoupMessageBody *body = soup_server_message_get_request_body(msg);
    if ((size_t)body->length > srv->cfg.body_max && soup_server_message_get_status(msg) == 0) {
        respond_error(srv, msg, 413, "invalid_request_error", NULL, "request_too_large",
                      "the request body is over the limit of %zu bytes", srv->cfg.body_max);
        soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Connection",
                                     "close");
        /* The rest is read (HTTP/1 has no way to refuse it) but not kept. */
        soup_message_body_set_accumulate(body, FALSE);
    }
}

static void on_request_started(SoupServer *soup, SoupServerMessage *msg, gpointer data) {
    (void)soup;
    g_signal_connect(msg, "got-headers", G_CALLBACK(on_got_headers), data);
    g_signal_connect(msg, "got-chunk", G_CALLBACK(on_got_chunk), data);
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
    const char *h = !strcmp(srv->host, "localhost") ? "127.0.0.1" : srv->host;
    GInetAddress *ia = g_inet_address_new_from_string(h);
    if (!ia)
        return fail(error, G_IO_ERROR_INVALID_ARGUMENT,
                    "--host %s is not an IP address (use e.g. 127.0.0.1, ::1 or 0.0.0.0)",
                    srv->host);
    GSocketAddress *sa = g_inet_socket_address_new(ia, (guint16)srv->cfg.port);
    GError *e = NULL;
    srv->socket = g_socket_new(g_inet_address_get_family(ia), G_SOCKET_TYPE_STREAM,
                               G_SOCKET_PROTOCOL_TCP, &e);
    g_object_unref(ia);
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
    const bool v6 = strchr(h, ':') != NULL;
    srv->url = g_strdup_printf("http://%s%s%s:%d/v1", v6 ? "[" : "", h, v6 ? "]" : "", srv->port);
    return TRUE;
}

tern_server *tern_server_new(const tn_model *model, const tern_server_config *config,
                             GError **error) {
    tern_server *srv = g_new0(tern_server, 1);
    srv->cfg = *config;
    srv->cfg.context = NULL;
    srv->host = g_strdup(config->host ? config->host : "127.0.0.1");
    srv->api_key = config->api_key && *config->api_key ? g_strdup(config->api_key) : NULL;
    srv->cors = config->cors_origin ? g_strdup(config->cors_origin) : NULL;
    srv->model_id = g_strdup(config->model_id ? config->model_id : tn_model_name(model));
    srv->model = model;
    if (srv->cfg.queue_max <= 0)
        srv->cfg.queue_max = DEFAULT_QUEUE_MAX;
    if (srv->cfg.body_max == 0)
        srv->cfg.body_max = config->vision ? DEFAULT_BODY_MAX_VISION : DEFAULT_BODY_MAX;
    if (srv->cfg.pins_max <= 0)
        srv->cfg.pins_max = DEFAULT_PINS;
    if (srv->cfg.pins_max > TERN_SERVER_MAX_PINS)
        srv->cfg.pins_max = TERN_SERVER_MAX_PINS;
    g_mutex_init(&srv->current_lock);
    g_mutex_init(&srv->quit_lock);
    g_mutex_init(&srv->cache_lock);
    srv->queue = g_async_queue_new();
    srv->context = config->context ? g_main_context_ref(config->context) : g_main_context_new();
    srv->loop = g_main_loop_new(srv->context, FALSE);

    if (!tern_server_host_is_loopback(srv->host) && !srv->api_key) {
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

void tern_server_run(tern_server *srv) {
    if (g_atomic_int_exchange(&srv->ran, 1)) {
        g_warning("tern_server_run called twice");
        return;
    }
    g_main_context_push_thread_default(srv->context);
    srv->soup = soup_server_new("server-header", "tern/" TERN_VERSION " ", NULL);
    soup_server_add_handler(srv->soup, NULL, handle_any, srv, NULL);
    g_signal_connect(srv->soup, "request-started", G_CALLBACK(on_request_started), srv);
    GError *e = NULL;
    if (!soup_server_listen_socket(srv->soup, srv->socket, 0, &e)) {
        g_warning("cannot serve on %s: %s", srv->url, e->message);
        g_error_free(e);
    } else {
        srv->worker = g_thread_new("tern-engine", worker_main, srv);
#ifdef TERN_HAVE_IMAGEIO
        if (srv->cfg.vision)
            srv->decode_pool = g_thread_pool_new(decode_images, srv, DECODE_THREADS, FALSE, NULL);
#endif
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
        if (srv->decode_pool)
            g_thread_pool_free(srv->decode_pool, FALSE, TRUE);
        srv->decode_pool = NULL;
        while (g_main_context_iteration(srv->context, FALSE))
            ;
    }
    soup_server_disconnect(srv->soup);
    while (g_main_context_iteration(srv->context, FALSE))
        ;
    g_clear_object(&srv->soup);
    g_main_context_pop_thread_default(srv->context);
}

void tern_server_free(tern_server *srv) {
    if (!srv)
        return;
    stop_worker(srv); /* only when run did not return normally */
    if (srv->socket) {
        g_socket_close(srv->socket, NULL);
        g_object_unref(srv->socket);
    }
    tn_drafter_free(srv->lookup);
    tn_cpu_free(srv->vision_cpu);
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
    for (int i = 0; i < IMAGE_CACHE_SIZE; i++) {
        g_free(srv->cache[i].key);
        g_free(srv->cache[i].rows);
    }
    g_mutex_clear(&srv->cache_lock);
    g_mutex_clear(&srv->current_lock);
    g_mutex_clear(&srv->quit_lock);
    g_free(srv->host);
    g_free(srv->api_key);
    g_free(srv->cors);
    g_free(srv->model_id);
    g_free(srv->url);
    g_free(srv);
}
