/* tern-conn.c: the server's connections, accepted by the server itself and
 * handed to libsoup through the framed stream (tern-framed.h) once the
 * client has sent something; their deadlines, their limit, and refusals
 * written before libsoup would answer (docs/SERVER.md). */
#include "tern-server-private.h"
#include "tern-framed.h"
#include "tern-framing.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#ifdef __linux__
#include <linux/sockios.h>
#include <linux/tcp.h> /* TCP_INFO's tcpi_bytes_acked (glibc's struct has none) */
#include <netinet/in.h>
#endif


/* The server accepts its connections itself and hands them to libsoup
 * (soup_server_accept_iostream) only once the client has sent something, so
 * that it knows every connection and can close it:
 *   - one closed before sending anything is closed here (libsoup 3.2 kept
 *     those open for ever);
 *   - one whose request does not arrive in full within --request-timeout
 *     (headers and body, from the connection's start: slowloris) is shut
 *     down, which ends libsoup's read;
 *   - at most conns_max are open at once (half the descriptors the process
 *     may have, less a margin for the model and the pin snapshots); beyond
 *     that a new connection is closed at once.
 * While a request waits or runs there is no deadline: the queue bounds it. */
typedef struct conn {
    tern_server *srv;
    char *key; /* the client's address and port: libsoup gives a message's
                  connection no socket when it was handed over as a stream */
    GSocket *sock;
    GSocketConnection *stream; /* once handed to libsoup, */
    GIOStream *framed;         /* through this (tern-framed.h) */
    GSource *wait;             /* before: waiting for the first bytes */
    gint64 deadline;           /* monotonic us; 0: none */
    gint64 since;              /* monotonic us: accepted, or its last request finished */
    gint64 shut;               /* when it was shut down for its deadline; 0: not */
    bool refused;              /* answered by conn_refuse: closed at its deadline */
    int busy;                  /* requests begun and not yet finished */
    gint64 drain_since;        /* its answer waiting for the client since (monotonic
                                  us; 0: none waits), when it had taken */
    guint64 drain_acked;       /* this many bytes of them all (TCP_INFO), */
    int drain_queue;           /* and this many waited; by the timeout after */
    guint64 drain_need;        /* drain_since it must have taken this many more */
} conn;

static void conn_free(gpointer data) {
    conn *c = data;
    if (c->framed) {
        tern_framed_forget(c->framed);
        g_object_unref(c->framed);
    }
    if (c->wait) {
        g_source_destroy(c->wait);
        g_source_unref(c->wait);
    }
    if (c->stream) {
        g_io_stream_close(G_IO_STREAM(c->stream), NULL, NULL);
        g_object_unref(c->stream);
    } else {
        g_socket_close(c->sock, NULL);
    }
    g_object_unref(c->sock);
    g_free(c->key);
    g_free(c);
}

static char *addr_key(GSocketAddress *a) {
    if (!a || !G_IS_INET_SOCKET_ADDRESS(a))
        return NULL;
    GInetSocketAddress *ia = G_INET_SOCKET_ADDRESS(a);
    char *ip = g_inet_address_to_string(g_inet_socket_address_get_address(ia));
    char *k = g_strdup_printf("%s %u", ip, g_inet_socket_address_get_port(ia));
    g_free(ip);
    return k;
}

static gint64 request_deadline(tern_server *srv) {
    return g_get_monotonic_time() + (gint64)srv->cfg.request_timeout_s * G_USEC_PER_SEC;
}

static conn *conn_of(tern_server *srv, SoupServerMessage *msg) {
    if (!srv->conns)
        return NULL;
    char *k = addr_key(soup_server_message_get_remote_address(msg));
    conn *c = k ? g_hash_table_lookup(srv->conns, k) : NULL;
    g_free(k);
    return c;
}

GSocket *tern_conn_socket(tern_server *srv, SoupServerMessage *msg) {
    conn *c = conn_of(srv, msg);
    return c ? c->sock : NULL;
}

static void conn_request_finished(SoupServerMessage *msg, gpointer data) {
    conn *c = conn_of(data, msg);
    if (c && c->busy > 0)
        c->busy--;
    if (c)
        c->since = g_get_monotonic_time();
}

void tern_conn_request_started(tern_server *srv, SoupServerMessage *msg) {
    conn *c = conn_of(srv, msg);
    if (c && !c->deadline)
        c->deadline = request_deadline(srv);
    if (c) {
        c->busy++;
        g_signal_connect(msg, "finished", G_CALLBACK(conn_request_finished), srv);
    }
}

/* The client closed its end (or the connection broke): nothing more can
 * come, and the answer, if any, is out. Only asked of idle connections. */
static bool conn_peer_closed(conn *c) {
    struct pollfd p = {.fd = g_socket_get_fd(c->sock), .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* The request is in: from here the queue and the engine bound it. */
void tern_conn_request_read(SoupServerMessage *msg, gpointer data) {
    conn *c = conn_of(data, msg);
    if (c && !c->refused)
        c->deadline = 0;
}

/* Request headers the server reads at most (libsoup's own limit is 64 KiB). */
#define MAX_HEADER_BYTES TERN_FRAMING_HEAD_MAX

/* An answer written here, before libsoup has the connection: the request's
 * framing is broken, so libsoup could not answer it (it answers nothing, or
 * waits for ever on "Content-Length: -1", and leaks on "5x"). The rest of
 * the request is read and dropped by the sweep, which then closes it. */
static void conn_refuse(conn *c, bool head, int status, const char *reason, const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);
static void conn_refuse(conn *c, bool head, int status, const char *reason, const char *fmt, ...) {
    if (c->refused)
        return; /* answered already (tern_conn_answer_now) */
    va_list ap;
    va_start(ap, fmt);
    char *m = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    char *body = tern_server_error_body(m, "invalid_request_error", NULL, NULL);
    char *lines = g_strdup_printf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                                  "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                                  status, reason, strlen(body));
    const int fd = g_socket_get_fd(c->sock);
    /* To a HEAD the same head, Content-Length included, and no body: its
     * client reads none (RFC 9110 9.3.2), and would take it for the start
     * of its next answer */
    if (send(fd, lines, strlen(lines), MSG_DONTWAIT | MSG_NOSIGNAL) > 0 && !head)
        send(fd, body, strlen(body), MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    g_free(lines);
    g_free(body);
    g_free(m);
    c->refused = true;
    c->deadline = g_get_monotonic_time() + G_USEC_PER_SEC;
}

/* The answer libsoup has for msg (its status and body are set), written now
 * on the connection, before the request's body, which libsoup would wait
 * for first; then the connection is closed like conn_refuse's, and
 * libsoup's own write of the answer fails. For a request whose framing is
 * in doubt, or whose body is over the limit. */
void tern_conn_answer_now(tern_server *srv, SoupServerMessage *msg) {
    conn *c = conn_of(srv, msg);
    if (!c || c->refused)
        return;
    const guint status = soup_server_message_get_status(msg);
    const char *reason = soup_server_message_get_reason_phrase(msg);
    GBytes *body = soup_message_body_flatten(soup_server_message_get_response_body(msg));
    GString *head = g_string_new(NULL);
    g_string_append_printf(head, "HTTP/1.1 %u %s\r\n", status,
                           reason ? reason : soup_status_get_phrase(status));
    SoupMessageHeadersIter it;
    const char *name, *value;
    soup_message_headers_iter_init(&it, soup_server_message_get_response_headers(msg));
    while (soup_message_headers_iter_next(&it, &name, &value))
        if (g_ascii_strcasecmp(name, "Content-Length") && g_ascii_strcasecmp(name, "Connection"))
            g_string_append_printf(head, "%s: %s\r\n", name, value);
    g_string_append_printf(head, "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                           g_bytes_get_size(body));
    if (g_strcmp0(soup_server_message_get_method(msg), "HEAD")) /* a HEAD's answer has none */
        g_string_append_len(head, g_bytes_get_data(body, NULL), (gssize)g_bytes_get_size(body));
    g_bytes_unref(body);
    const int fd = g_socket_get_fd(c->sock);
    (void)!send(fd, head->str, head->len, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    g_string_free(head, TRUE);
    c->refused = true;
    c->deadline = g_get_monotonic_time() + G_USEC_PER_SEC;
}

/* libsoup closes the connection (tern-framed.h): left open, its writing
 * side shut, while the client's bytes would be left unread (after an
 * answer written by conn_refuse or tern_conn_answer_now, or a request sent
 * behind one whose answer closes): closing it then resets it, and the
 * client may lose the answer. The sweep reads and drops them, then
 * closes it. */
static gboolean conn_closing(gpointer data) {
    conn *c = data;
    if (c->refused)
        return TRUE;
    if (g_socket_get_available_bytes(c->sock) <= 0)
        return FALSE;
    shutdown(g_socket_get_fd(c->sock), SHUT_WR);
    c->refused = true;
    c->deadline = g_get_monotonic_time() + G_USEC_PER_SEC;
    return TRUE;
}

/* The reason phrase of a refusal of the framing (tern-framing.h). */
static const char *refusal_reason(int status) {
    switch (status) {
    case 417:
        return "Expectation Failed";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Bad Request";
    }
}

/* A later request on a kept-alive connection (or the first, again) whose
 * head or chunked body is refused by the framed stream: answered as the
 * first is, after libsoup's answers to those before it. */
static void conn_framing_refused(int status, const char *why, gboolean head, gpointer data) {
    conn_refuse(data, head, status, refusal_reason(status), "%s", why);
}

/* A later request's head has begun: from here it has the request timeout,
 * as the first has from the connection's start (libsoup would start the
 * request's clock only once the framed stream passes it the whole head). */
static void conn_head_begun(gpointer data) {
    conn *c = data;
    if (!c->deadline)
        c->deadline = request_deadline(c->srv);
}

static gboolean conn_wait_more(gpointer data);

/* The connection's first bytes: nothing (closed), or the request's headers,
 * looked at (peeked, not read) before libsoup gets the connection. Headers
 * that come in pieces are looked at again 20 times a second until they are
 * complete or the deadline passes. */
static gboolean conn_first_bytes(GSocket *sock, GIOCondition cond, gpointer data) {
    conn *c = data;
    tern_server *srv = c->srv;
    (void)cond;
    /* On the stack: g_malloc's inline form has a NULL branch (size 0) that
     * GCC -O2 follows into memmem's nonnull argument. */
    char buf[MAX_HEADER_BYTES];
    ssize_t n = recv(g_socket_get_fd(sock), buf, MAX_HEADER_BYTES, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return G_SOURCE_CONTINUE;
    }
    g_source_unref(c->wait);
    c->wait = NULL;
    if (n <= 0) { /* closed (or failed) without a request */
        g_hash_table_remove(srv->conns, c->key);
        return G_SOURCE_REMOVE;
    }
    /* Empty lines before the request line are skipped, as libsoup skips
     * them: "\r\n\r\n" first was taken for the end of the headers, and the
     * request behind it went to libsoup unchecked (its 501 for
     * "Transfer-Encoding: gzip" leaked the path again). memmem, not
     * g_strstr_len, which stops at a NUL: headers with one were never
     * complete, and their client got no answer at all. */
    size_t lead = 0;
    while (lead < (size_t)n && (buf[lead] == '\r' || buf[lead] == '\n'))
        lead++;
    const char *end = memmem(buf + lead, (size_t)n - lead, "\r\n\r\n", 4);
    if (!end)
        end = memmem(buf + lead, (size_t)n - lead, "\n\n", 2);
    if (memchr(buf, '\0', end ? (size_t)(end - buf) : (size_t)n)) {
        conn_refuse(c, tern_framing_is_head(buf, (size_t)n), 400, "Bad Request",
                    "a NUL byte in the request's headers");
        return G_SOURCE_REMOVE;
    }
    if (!end && n == MAX_HEADER_BYTES) {
        conn_refuse(c, tern_framing_is_head(buf, (size_t)n), 431, "Request Header Fields Too Large",
                    "the request's headers are over %d bytes", MAX_HEADER_BYTES);
        return G_SOURCE_REMOVE;
    }
    struct pollfd pf = {.fd = g_socket_get_fd(sock), .events = POLLRDHUP};
    if (!end && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        /* gone with its request unfinished */
        g_hash_table_remove(srv->conns, c->key);
        return G_SOURCE_REMOVE;
    }
    if (!end) {
        c->wait = g_timeout_source_new(50);
        g_source_set_callback(c->wait, conn_wait_more, c, NULL);
        g_source_attach(c->wait, srv->context);
        return G_SOURCE_REMOVE;
    }
    int status;
    const char *why = tern_framing_problem(buf, (size_t)(end - buf) + 2, &status, NULL);
    if (why) {
        conn_refuse(c, tern_framing_is_head(buf, (size_t)n), status, refusal_reason(status), "%s",
                    why);
        return G_SOURCE_REMOVE;
    }
    /* This request and every later one on the connection reach libsoup
     * through the framed stream, which checks each head as above before
     * libsoup reads it (libsoup 3.2 leaks on the framing refused here). */
    c->stream = g_socket_connection_factory_create_connection(sock);
    const tern_framed_calls calls = {conn_framing_refused, conn_head_begun, conn_closing, c};
    c->framed = tern_framed_new(G_IO_STREAM(c->stream), &calls);
    GSocketAddress *local = g_socket_get_local_address(sock, NULL);
    GSocketAddress *remote = g_socket_get_remote_address(sock, NULL);
    if (!local || !remote ||
        !soup_server_accept_iostream(srv->soup, c->framed, local, remote, NULL))
        g_hash_table_remove(srv->conns, c->key);
    g_clear_object(&local);
    g_clear_object(&remote);
    return G_SOURCE_REMOVE;
}

static void conn_watch(conn *c) {
    c->wait = g_socket_create_source(c->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
    g_source_set_callback(c->wait, (GSourceFunc)(void (*)(void))conn_first_bytes, c, NULL);
    g_source_attach(c->wait, c->srv->context);
}

static gboolean conn_wait_more(gpointer data) {
    conn *c = data;
    g_source_unref(c->wait);
    conn_watch(c);
    return G_SOURCE_REMOVE;
}

static gboolean on_accept(GSocket *listener, GIOCondition cond, gpointer data);
static gboolean sweep_conns(gpointer data);

static void accept_start(tern_server *srv) {
    srv->accept_source = g_socket_create_source(srv->socket, G_IO_IN, NULL);
    g_source_set_callback(srv->accept_source, (GSourceFunc)(void (*)(void))on_accept, srv, NULL);
    g_source_attach(srv->accept_source, srv->context);
}

static gboolean accept_resume(gpointer data) {
    tern_server *srv = data;
    g_source_unref(srv->accept_source);
    accept_start(srv);
    return G_SOURCE_REMOVE;
}

static gboolean on_accept(GSocket *listener, GIOCondition cond, gpointer data) {
    tern_server *srv = data;
    (void)cond;
    for (int k = 0; k < 64; k++) {
        GError *e = NULL;
        GSocket *sock = g_socket_accept(listener, NULL, &e);
        if (!sock) {
            const bool again = g_error_matches(e, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK);
            g_error_free(e);
            if (again)
                return G_SOURCE_CONTINUE;
            /* Out of descriptors (EMFILE) or the like: the listener stays
             * readable, so wait a little instead of spinning. */
            g_source_unref(srv->accept_source);
            srv->accept_source = g_timeout_source_new(100);
            g_source_set_callback(srv->accept_source, accept_resume, srv, NULL);
            g_source_attach(srv->accept_source, srv->context);
            return G_SOURCE_REMOVE;
        }
        if ((int)g_hash_table_size(srv->conns) >= srv->conns_max)
            sweep_conns(srv); /* connections closed since the last sweep */
        if ((int)g_hash_table_size(srv->conns) >= srv->conns_max) {
            /* Full of clients that have not sent a whole request yet (slow
             * or idle ones, maybe an attack) or kept alive between requests:
             * the oldest of them makes room, so that they cannot lock the
             * others out for a whole timeout, or for ever (kept-alive ones
             * have no deadline). A request waiting or running is never cut. */
            conn *oldest = NULL;
            GHashTableIter it;
            gpointer key, value;
            g_hash_table_iter_init(&it, srv->conns);
            while (g_hash_table_iter_next(&it, &key, &value)) {
                conn *o = value;
                const bool idle = o->stream ? o->busy == 0 && !o->shut : !o->refused;
                if (idle && (!oldest || o->since < oldest->since))
                    oldest = o;
            }
            if (oldest)
                g_hash_table_remove(srv->conns, oldest->key);
        }
        if ((int)g_hash_table_size(srv->conns) >= srv->conns_max) {
            g_socket_close(sock, NULL);
            g_object_unref(sock);
            continue;
        }
        GSocketAddress *remote = g_socket_get_remote_address(sock, NULL);
        char *key = addr_key(remote);
        g_clear_object(&remote);
        if (!key) {
            g_socket_close(sock, NULL);
            g_object_unref(sock);
            continue;
        }
        conn *c = g_new0(conn, 1);
        c->srv = srv;
        c->key = key;
        c->sock = sock;
        c->deadline = request_deadline(srv);
        c->since = g_get_monotonic_time();
        conn_watch(c);
        /* A key still there is a connection closed, not yet swept. */
        g_hash_table_replace(srv->conns, c->key, c);
    }
    return G_SOURCE_CONTINUE;
}

/* A client must take what waits for it at a minimum rate: over each
 * request timeout while some of its answer is in the socket's send queue,
 * what it acknowledged (TCP_INFO) must grow by DRAIN_MIN, or by the
 * backlog the window began with if that was less. Taking none at all was
 * the old test, and one byte every few seconds passed it: 40 streams read
 * so held ~390 KB each (the kernel's queue and libsoup's copy of the
 * rest) for as long as their clients stayed. A client reading a token
 * stream, even over a slow link, is never more than a few KB behind, and
 * one that takes its answers promptly clears the backlog its window began
 * with within milliseconds. While the engine works nothing waits there,
 * and an empty queue ends the window. */
#define DRAIN_MIN (64 * 1024)

static bool conn_not_reading(tern_server *srv, conn *c, gint64 now) {
#ifdef SIOCOUTQ
    const int fd = g_socket_get_fd(c->sock);
    int q = 0;
    if (ioctl(fd, SIOCOUTQ, &q) != 0 || q <= 0) {
        c->drain_since = 0;
        return false;
    }
    /* The backlog alone says nothing: a client that reads every answer
     * and sends its next request at once, answers of one size (GET
     * /v1/models in a loop), was found with that answer's bytes not yet
     * acknowledged at look after look. What it acknowledged grows
     * whenever it takes any. */
    guint64 acked = 0;
    bool counted = false;
#ifdef TCP_INFO
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 &&
        tl >= offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked) {
        acked = ti.tcpi_bytes_acked;
        counted = true;
    }
#endif
    /* Without the count (a kernel before 4.1) a backlog that changed is
     * the only sign of a client taking some. */
    const bool drained = counted ? acked - c->drain_acked >= c->drain_need : q != c->drain_queue;
    if (!c->drain_since || drained) {
        c->drain_since = now;
        c->drain_acked = acked;
        c->drain_queue = q;
        c->drain_need = (guint64)MIN(q, DRAIN_MIN);
        return false;
    }
    return now > c->drain_since + (gint64)srv->cfg.request_timeout_s * G_USEC_PER_SEC;
#else
    (void)srv, (void)c, (void)now;
    return false;
#endif
}

/* Twice a second: forgets the connections libsoup closed, closes those
 * past their deadline. */
static gboolean sweep_conns(gpointer data) {
    tern_server *srv = data;
    const gint64 now = g_get_monotonic_time();
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, srv->conns);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        conn *c = value;
        if (g_socket_is_closed(c->sock) ||
            (c->stream && g_io_stream_is_closed(G_IO_STREAM(c->stream)))) {
            g_hash_table_iter_remove(&it);
        } else if ((!c->stream || c->refused) && c->deadline && now > c->deadline) {
            /* Never sent a whole request, or refused: what it sent is
             * dropped first, so that closing does not reset the answer
             * (libsoup let go of a refused one; see tern-framed.h). */
            char scratch[4096];
            for (int k = 0; k < 64 && recv(g_socket_get_fd(c->sock), scratch, sizeof scratch,
                                             MSG_DONTWAIT) > 0;
                 k++)
                ;
            g_hash_table_iter_remove(&it);
        } else if (c->shut && now > c->shut + 2 * G_USEC_PER_SEC) {
            g_hash_table_iter_remove(&it); /* shut down, but libsoup kept it */
        } else if (c->stream && !c->shut && c->deadline && now > c->deadline) {
            /* libsoup's read ends (EOF), it answers if it can and closes. */
            g_socket_shutdown(c->sock, TRUE, TRUE, NULL);
            c->shut = now;
        } else if (c->stream && !c->shut && conn_not_reading(srv, c, now)) {
            /* Its answer waits for a client that takes little or none of
             * it: dropped (the connection reset), as the kernel would hold
             * it (and libsoup the rest of a stream, the connection its
             * place under the cap) for as long as the client stays. */
            struct sockaddr unspec = {.sa_family = AF_UNSPEC};
            if (connect(g_socket_get_fd(c->sock), &unspec, sizeof unspec) != 0)
                g_socket_shutdown(c->sock, TRUE, TRUE, NULL);
            c->shut = now;
        } else if (c->stream && c->busy == 0 && conn_peer_closed(c)) {
            /* Kept alive, then closed by the client: libsoup 3.2 would
             * keep it for ever. Closing the stream ends libsoup's wait on
             * it (its next read fails and it lets the connection go). */
            g_hash_table_iter_remove(&it);
        }
    }
    return G_SOURCE_CONTINUE;
}

void tern_conns_start(tern_server *srv) {
    struct rlimit rl;
    int fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                  ? (int)MIN(rl.rlim_cur, 65536)
                  : 1024;
    srv->conns_max = CLAMP((fds - 64) / 2, 8, 4096);
    srv->conns = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, conn_free);
    g_socket_set_blocking(srv->socket, FALSE);
    accept_start(srv);
    srv->sweep_source = g_timeout_source_new(500);
    g_source_set_callback(srv->sweep_source, sweep_conns, srv, NULL);
    g_source_attach(srv->sweep_source, srv->context);
}

/* Stops accepting; the connections still open are closed (after libsoup's
 * own disconnect). */
void tern_conns_stop(tern_server *srv) {
    if (srv->accept_source) {
        g_source_destroy(srv->accept_source);
        g_clear_pointer(&srv->accept_source, g_source_unref);
    }
    if (srv->sweep_source) {
        g_source_destroy(srv->sweep_source);
        g_clear_pointer(&srv->sweep_source, g_source_unref);
    }
}

