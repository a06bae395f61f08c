/* The client's connection with every request framed (tern-framed.h). */
#include "tern-framed.h"
#include "tern-framing.h"

#include <stdbool.h>
#include <string.h>

/* ------------------------------------------------------------ input */

#define TERN_TYPE_FRAMED_INPUT (tern_framed_input_get_type())
G_DECLARE_FINAL_TYPE(TernFramedInput, tern_framed_input, TERN, FRAMED_INPUT, GInputStream)

struct _TernFramedInput {
    GInputStream parent;
    GInputStream *base; /* pollable */
    GByteArray *buf;    /* read from base, not yet given to the reader */
    size_t ready;       /* bytes at buf's start that are checked */
    tern_framer framer;
    int status; /* a refusal found after those: status and why */
    const char *why;
    bool refused; /* and told */
    bool eof;
    bool gone_told; /* the end between two requests, given as a line end */
    tern_framed_calls calls;
};

static void pollable_iface_init(GPollableInputStreamInterface *iface);

G_DEFINE_TYPE_WITH_CODE(TernFramedInput, tern_framed_input, G_TYPE_INPUT_STREAM,
                        G_IMPLEMENT_INTERFACE(G_TYPE_POLLABLE_INPUT_STREAM, pollable_iface_init))

/* The buffer let go of, not only emptied: libsoup 3.2 holds a connection
 * its client closed, and this stream with it, until the server stops (a
 * 16 KiB body kept its 16 KiB each, found by serve-soak). */
static void framed_empty(TernFramedInput *self) {
    g_byte_array_unref(self->buf);
    self->buf = g_byte_array_new();
    self->ready = 0;
}

/* What came after the checked bytes, framed as far as it goes. */
static void framed_scan(TernFramedInput *self) {
    while (!self->why && self->ready < self->buf->len) {
        size_t len;
        switch (tern_framer_step(&self->framer, (const char *)self->buf->data + self->ready,
                                 self->buf->len - self->ready, &len, &self->status,
                                 &self->why)) {
        case TERN_FRAMER_PASS:
            if (self->framer.drop_expect) {
                /* an expectation to ignore (tern_framing_ignores_expect):
                 * libsoup acts on any it sees */
                self->framer.drop_expect = false;
                const size_t kept =
                    tern_framing_drop_expect((char *)self->buf->data + self->ready, len);
                g_byte_array_remove_range(self->buf, (guint)(self->ready + kept),
                                          (guint)(len - kept));
                len = kept;
            }
            self->ready += len;
            break;
        case TERN_FRAMER_DROP:
            g_byte_array_remove_range(self->buf, (guint)self->ready, (guint)len);
            break;
        case TERN_FRAMER_REFUSE:
            break;
        case TERN_FRAMER_MORE:
            return;
        }
    }
}

/* More from base, only when every checked byte is taken: what the client
 * sends beyond waits in the socket, as it would without this stream. */
static gssize framed_fill(TernFramedInput *self, gboolean blocking, GCancellable *cancellable,
                          GError **error) {
    guint8 tmp[16384];
    const gssize r =
        blocking ? g_input_stream_read(self->base, tmp, sizeof tmp, cancellable, error)
                 : g_pollable_input_stream_read_nonblocking(G_POLLABLE_INPUT_STREAM(self->base),
                                                            tmp, sizeof tmp, cancellable, error);
    if (r == 0) {
        self->eof = true;
        framed_empty(self); /* a head not complete is not passed on */
    }
    if (r > 0) {
        g_byte_array_append(self->buf, tmp, (guint)r);
        framed_scan(self);
    }
    return r;
}

static gssize framed_read(TernFramedInput *self, void *buffer, gsize count, gboolean blocking,
                          GCancellable *cancellable, GError **error) {
    if (count == 0)
        return 0;
    for (;;) {
        if (self->ready) {
            const size_t n = MIN(count, self->ready);
            memcpy(buffer, self->buf->data, n);
            g_byte_array_remove_range(self->buf, 0, (guint)n);
            self->ready -= n;
            if (self->buf->len == 0)
                framed_empty(self);
            return (gssize)n;
        }
        if (self->why) {
            if (!self->refused) {
                self->refused = true;
                if (self->calls.refuse)
                    self->calls.refuse(self->status, self->why, self->framer.head_method,
                                       self->calls.data);
            }
            /* An error, not the end: the end of a chunked body would have
             * libsoup take what came of it for the whole body. */
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED,
                        "the request was refused: %s", self->why);
            return -1;
        }
        if (self->eof && self->framer.state != TERN_FRAMER_HEAD)
            return 0; /* within a request: libsoup's own error, and it closes */
        if (self->eof) {
            /* The client closed between two requests (or within a head,
             * never passed on). libsoup 3.2 reads the end before it
             * "starts" the next request, finishes that request without
             * its completion call, and so never disconnects: the
             * connection stayed in its list for good, 2.5 KB each
             * (docs/SERVER.md). Given a line end first, it starts the
             * request (read bytes); the error then interrupts it, and an
             * interrupted request disconnects, writing nothing (no 400
             * after the answer to a client that only half-closed). */
            if (!self->gone_told) {
                self->gone_told = true;
                *(char *)buffer = '\n';
                return 1;
            }
            g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED,
                                "the client closed the connection");
            return -1;
        }
        if (self->buf->len && self->framer.state == TERN_FRAMER_HEAD && self->calls.head_begun)
            /* asked each time libsoup waits for it: the request before
             * may have stopped its clock since */
            self->calls.head_begun(self->calls.data);
        GError *fill_error = NULL;
        if (framed_fill(self, blocking, cancellable, &fill_error) < 0) {
            /* A reset (a client closing with bytes of its answer unread,
             * or with SO_LINGER 0) is its end too: passed on as an error,
             * libsoup 3.2 kept the connection in its list as it did for
             * an end, ~2.5 KB each for good (docs/SERVER.md). Within a
             * request, libsoup's own error is right (it closes). */
            if (self->framer.state != TERN_FRAMER_HEAD ||
                g_error_matches(fill_error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK) ||
                g_error_matches(fill_error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
                g_propagate_error(error, fill_error);
                return -1;
            }
            g_error_free(fill_error);
            self->eof = true;
            framed_empty(self); /* a head not complete is not passed on */
        }
    }
}

static gssize framed_read_fn(GInputStream *stream, void *buffer, gsize count,
                             GCancellable *cancellable, GError **error) {
    return framed_read(TERN_FRAMED_INPUT(stream), buffer, count, TRUE, cancellable, error);
}

static gssize framed_read_nonblocking(GPollableInputStream *stream, void *buffer, gsize count,
                                      GError **error) {
    return framed_read(TERN_FRAMED_INPUT(stream), buffer, count, FALSE, NULL, error);
}

static gboolean framed_can_poll(GPollableInputStream *stream) {
    (void)stream;
    return TRUE;
}

static bool framed_has_answer(TernFramedInput *self) {
    return self->ready || self->why || self->eof;
}

static gboolean framed_is_readable(GPollableInputStream *stream) {
    TernFramedInput *self = TERN_FRAMED_INPUT(stream);
    return framed_has_answer(self) ||
           g_pollable_input_stream_is_readable(G_POLLABLE_INPUT_STREAM(self->base));
}

static GSource *framed_create_source(GPollableInputStream *stream, GCancellable *cancellable) {
    TernFramedInput *self = TERN_FRAMED_INPUT(stream);
    GSource *child =
        framed_has_answer(self)
            ? g_timeout_source_new(0)
            : g_pollable_input_stream_create_source(G_POLLABLE_INPUT_STREAM(self->base), NULL);
    GSource *s = g_pollable_source_new_full(stream, child, cancellable);
    g_source_unref(child);
    return s;
}

static void pollable_iface_init(GPollableInputStreamInterface *iface) {
    iface->can_poll = framed_can_poll;
    iface->is_readable = framed_is_readable;
    iface->create_source = framed_create_source;
    iface->read_nonblocking = framed_read_nonblocking;
}

static gboolean framed_input_close(GInputStream *stream, GCancellable *cancellable,
                                   GError **error) {
    (void)stream, (void)cancellable, (void)error;
    return TRUE; /* base is the connection's, closed with it */
}

static void tern_framed_input_finalize(GObject *object) {
    TernFramedInput *self = TERN_FRAMED_INPUT(object);
    g_object_unref(self->base);
    g_byte_array_unref(self->buf);
    G_OBJECT_CLASS(tern_framed_input_parent_class)->finalize(object);
}

static void tern_framed_input_class_init(TernFramedInputClass *klass) {
    G_OBJECT_CLASS(klass)->finalize = tern_framed_input_finalize;
    G_INPUT_STREAM_CLASS(klass)->read_fn = framed_read_fn;
    G_INPUT_STREAM_CLASS(klass)->close_fn = framed_input_close;
}

static void tern_framed_input_init(TernFramedInput *self) {
    self->buf = g_byte_array_new();
}

/* ------------------------------------------------------------ stream */

#define TERN_TYPE_FRAMED_STREAM (tern_framed_stream_get_type())
G_DECLARE_FINAL_TYPE(TernFramedStream, tern_framed_stream, TERN, FRAMED_STREAM, GIOStream)

struct _TernFramedStream {
    GIOStream parent;
    GIOStream *base;
    TernFramedInput *input;
};

G_DEFINE_TYPE(TernFramedStream, tern_framed_stream, G_TYPE_IO_STREAM)

static GInputStream *framed_get_input_stream(GIOStream *stream) {
    return G_INPUT_STREAM(TERN_FRAMED_STREAM(stream)->input);
}

static GOutputStream *framed_get_output_stream(GIOStream *stream) {
    return g_io_stream_get_output_stream(TERN_FRAMED_STREAM(stream)->base);
}

static gboolean framed_close(GIOStream *stream, GCancellable *cancellable, GError **error) {
    TernFramedStream *self = TERN_FRAMED_STREAM(stream);
    g_input_stream_close(G_INPUT_STREAM(self->input), NULL, NULL);
    /* Refused: libsoup lets go of the connection at once, but closing it
     * with the client's bytes unread would reset it, and the answer with
     * it; the caller closes it after they are read. The same when the
     * caller says so (an answer it wrote itself, bytes still unread). */
    if (self->input->refused ||
        (self->input->calls.closing && self->input->calls.closing(self->input->calls.data)))
        return TRUE;
    return g_io_stream_close(self->base, cancellable, error);
}

/* As GSocketConnection does: closing does not block, so no thread. */
static void framed_close_async(GIOStream *stream, int io_priority, GCancellable *cancellable,
                               GAsyncReadyCallback callback, gpointer user_data) {
    GTask *task = g_task_new(stream, cancellable, callback, user_data);
    g_task_set_priority(task, io_priority);
    GError *error = NULL;
    if (G_IO_STREAM_GET_CLASS(stream)->close_fn(stream, cancellable, &error))
        g_task_return_boolean(task, TRUE);
    else
        g_task_return_error(task, error);
    g_object_unref(task);
}

static gboolean framed_close_finish(GIOStream *stream, GAsyncResult *result, GError **error) {
    (void)stream;
    return g_task_propagate_boolean(G_TASK(result), error);
}

static void tern_framed_stream_dispose(GObject *object) {
    TernFramedStream *self = TERN_FRAMED_STREAM(object);
    G_OBJECT_CLASS(tern_framed_stream_parent_class)->dispose(object); /* closes */
    g_clear_object(&self->input);
    g_clear_object(&self->base);
}

static void tern_framed_stream_class_init(TernFramedStreamClass *klass) {
    G_OBJECT_CLASS(klass)->dispose = tern_framed_stream_dispose;
    GIOStreamClass *io = G_IO_STREAM_CLASS(klass);
    io->get_input_stream = framed_get_input_stream;
    io->get_output_stream = framed_get_output_stream;
    io->close_fn = framed_close;
    io->close_async = framed_close_async;
    io->close_finish = framed_close_finish;
}

static void tern_framed_stream_init(TernFramedStream *self) {
    (void)self;
}

GIOStream *tern_framed_new(GIOStream *base, const tern_framed_calls *calls) {
    TernFramedStream *self = g_object_new(TERN_TYPE_FRAMED_STREAM, NULL);
    self->base = g_object_ref(base);
    self->input = g_object_new(TERN_TYPE_FRAMED_INPUT, NULL);
    self->input->base = g_object_ref(g_io_stream_get_input_stream(base));
    self->input->calls = *calls;
    return G_IO_STREAM(self);
}

void tern_framed_forget(GIOStream *framed) {
    TernFramedStream *self = TERN_FRAMED_STREAM(framed);
    if (self->input) {
        memset(&self->input->calls, 0, sizeof self->input->calls);
        self->input->eof = true; /* its connection is closed */
        framed_empty(self->input);
    }
}
