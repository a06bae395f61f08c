/* The server embedded the way the app embeds it (server/tern-server.h):
 * created on one thread, run on another with its own GMainContext, sharing
 * a model that the "app" keeps using in its own session at the same time;
 * quit from the creating thread; a quit before run; a quit after run
 * returned; a port in use reported by tern_server_new. The server's answer
 * must be the app session's answer to the same request, token for token. */
#include "tern-server.h"
#include "tn-test.h"

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>
#include <string.h>

#define SYSTEM "You are a terse assistant."
#define QUESTION "Name three birds."
#define MAX_TOKENS 12
#define APP_ROUNDS 10
#define HTTP_ROUNDS 10

static gpointer run_server(gpointer data) {
    tern_server_run(data);
    return NULL;
}

static bool collect(const char *piece, int32_t token, void *user) {
    (void)token;
    g_string_append(user, piece);
    return true;
}

/* The app's side: its own session on the shared model. NULL on failure
 * (no CHECK here: it runs on the app thread too, and the counters are the
 * main thread's). */
static char *app_answer(tn_session *s) {
    GString *out = g_string_new(NULL);
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = MAX_TOKENS;
    tn_error err = {0};
    int rc = tn_session_pin(s, SYSTEM, NULL, NULL, &err);
    if (rc == TN_OK)
        rc = tn_session_ask(s, QUESTION, &g, collect, out, NULL, &err);
    if (rc != TN_OK) {
        fprintf(stderr, "app ask: %s\n", err.message);
        g_string_free(out, TRUE);
        return NULL;
    }
    return g_string_free(out, FALSE);
}

typedef struct app_loop {
    tn_session *session;
    const char *expected;
    int mismatches;
} app_loop;

static gpointer app_thread(gpointer data) {
    app_loop *a = data;
    for (int i = 0; i < APP_ROUNDS; i++) {
        char *t = app_answer(a->session);
        if (!t || strcmp(t, a->expected))
            a->mismatches++;
        g_free(t);
    }
    return NULL;
}

/* POST body to url; the answer's content, or NULL (status in *status). */
static char *chat(SoupSession *http, const char *url, guint *status) {
    char *endpoint = g_strdup_printf("%s/chat/completions", url);
    SoupMessage *m = soup_message_new("POST", endpoint);
    g_free(endpoint);
    char *body = g_strdup_printf("{\"messages\":[{\"role\":\"system\",\"content\":\"%s\"},"
                                 "{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":%d}",
                                 SYSTEM, QUESTION, MAX_TOKENS);
    GBytes *b = g_bytes_new_take(body, strlen(body));
    soup_message_set_request_body_from_bytes(m, "application/json", b);
    g_bytes_unref(b);
    GError *e = NULL;
    GBytes *resp = soup_session_send_and_read(http, m, NULL, &e);
    *status = soup_message_get_status(m);
    char *content = NULL;
    if (!resp) {
        fprintf(stderr, "request failed: %s\n", e->message);
        g_error_free(e);
    } else {
        JsonParser *p = json_parser_new();
        gsize n;
        const char *data = g_bytes_get_data(resp, &n);
        if (*status == 200 && json_parser_load_from_data(p, data, (gssize)n, NULL)) {
            JsonObject *o = json_node_get_object(json_parser_get_root(p));
            JsonObject *c = json_array_get_object_element(json_object_get_array_member(o, "choices"), 0);
            content = g_strdup(
                json_object_get_string_member(json_object_get_object_member(c, "message"), "content"));
        } else {
            fprintf(stderr, "status %u: %.*s\n", *status, (int)n, data);
        }
        g_object_unref(p);
        g_bytes_unref(resp);
    }
    g_object_unref(m);
    return content;
}

int main(void) {
    char *path = g_build_filename(tn_test_tmpdir(), "tiny.gguf", NULL);
    g_setenv("XDG_CACHE_HOME", tn_test_tmpdir(), TRUE);
    tn_mkmodel_params mp = tn_test_tiny_model("llama", 5);
    mp.n_ctx = 1024;
    mp.n_threads = 1;
    tn_error err = {0};
    CHECKF(tn_mkmodel(&mp, path, &err) == TN_OK, "mkmodel: %s", err.message);
    tn_model *model = NULL;
    if (tn_model_load(path, tn_model_default_params(), &model, &err) != TN_OK) {
        fprintf(stderr, "load: %s\n", err.message);
        return 1;
    }

    tern_server_config cfg = {0};
    cfg.model_id = "tiny";
    cfg.n_threads = 1;
    GError *e = NULL;

    /* A quit before run: run returns at once. */
    tern_server *srv = tern_server_new(model, &cfg, &e);
    CHECKF(srv != NULL, "new: %s", e ? e->message : "");
    if (srv) {
        tern_server_quit(srv);
        GThread *t = g_thread_new("server", run_server, srv);
        g_thread_join(t);
        tern_server_free(srv);
    }

    /* The app's way: its own context for the server, run on a thread. */
    GMainContext *ctx = g_main_context_new();
    cfg.context = ctx;
    srv = tern_server_new(model, &cfg, &e);
    CHECKF(srv != NULL, "new: %s", e ? e->message : "");
    if (!srv)
        return tn_test_finish("serve-embed");
    int port = tern_server_port(srv);
    char *want_url = g_strdup_printf("http://127.0.0.1:%d/v1", port);
    CHECKF(port > 0 && !strcmp(tern_server_url(srv), want_url), "url %s, port %d",
           tern_server_url(srv), port);
    g_free(want_url);

    /* The same port again: refused by tern_server_new, with a message. */
    tern_server_config busy = cfg;
    busy.port = port;
    busy.context = NULL;
    tern_server *srv2 = tern_server_new(model, &busy, &e);
    CHECK(srv2 == NULL);
    CHECKF(e && strstr(e->message, "port"), "port in use: %s", e ? e->message : "(no error)");
    g_clear_error(&e);
    tern_server_free(srv2);

    GThread *server_thread = g_thread_new("server", run_server, srv);

    /* The app keeps using the model in its own session meanwhile. */
    tn_session *app = NULL;
    CHECKF(tn_session_new(model, tn_session_default_params(), &app, &err) == TN_OK, "session: %s",
           err.message);
    char *expected = app_answer(app);
    CHECK(expected && expected[0] != '\0');
    if (!expected)
        return tn_test_finish("serve-embed");
    app_loop loop = {app, expected, 0};
    GThread *app_t = g_thread_new("app", app_thread, &loop);

    SoupSession *http = soup_session_new();
    int same = 0;
    for (int i = 0; i < HTTP_ROUNDS; i++) {
        guint status = 0;
        char *got = chat(http, tern_server_url(srv), &status);
        CHECKF(status == 200, "status %u", status);
        if (got && !strcmp(got, expected))
            same++;
        else
            fprintf(stderr, "server answered '%s', the app's session '%s'\n", got ? got : "(none)",
                    expected);
        g_free(got);
    }
    g_thread_join(app_t);
    CHECKF(same == HTTP_ROUNDS, "%d of %d server answers equal the app session's", same,
           HTTP_ROUNDS);
    CHECKF(loop.mismatches == 0, "the app's answers changed %d times while the server ran",
           loop.mismatches);

    /* Quit from this thread while the server thread runs. */
    tern_server_quit(srv);
    tern_server_quit(srv); /* idempotent */
    g_thread_join(server_thread);
    tern_server_quit(srv); /* after run returned: nothing may fire later */
    tern_server_free(srv);
    while (g_main_context_iteration(ctx, FALSE))
        ;
    g_main_context_unref(ctx);

    g_object_unref(http);
    tn_session_free(app);
    g_free(expected);
    tn_model_free(model);
    g_free(path);
    return tn_test_finish("serve-embed");
}
