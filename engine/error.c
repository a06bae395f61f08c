#include "tn-internal.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* One line of text a terminal, a log or a GTK label shows as it is: a
 * newline or a tab from an argument (a file name may hold any byte but '/'
 * and NUL) becomes a space, and any other control character a '?', so that
 * an escape sequence in a name cannot recolour or rewrite the terminal or
 * forge a log line. */
static void one_line(char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\n' || c == '\r' || c == '\t')
            s[i] = ' ';
        else if (c < 0x20 || c == 0x7f)
            s[i] = '?';
    }
}

/* Prints each argument of fmt with its own conversion into err->args, so that
 * a caller can put them into a translated format (tn_error_format). ap is
 * consumed as vsnprintf would. n_args is -1 for what cannot be captured (a
 * conversion libtern does not use, or arguments past args' size): the
 * caller then shows the English message. */
static void capture_args(tn_error *err, const char *fmt, va_list ap) {
    size_t used = 0;
    err->n_args = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%')
            continue;
        if (p[1] == '%') {
            p++;
            continue;
        }
        /* The conversion without a position ("%2$s" is never passed to libtern's
         * own printf calls), with * widths replaced by their values. */
        char spec[48];
        size_t n = 0;
        spec[n++] = '%';
        p++;
        while (*p && strchr("-+ #0'", *p) && n < 20)
            spec[n++] = *p++;
        for (int part = 0; part < 2; part++) {
            if (part == 1) {
                if (*p != '.')
                    break;
                spec[n++] = *p++;
            }
            if (*p == '*') {
                n += (size_t)snprintf(spec + n, sizeof spec - n, "%d", va_arg(ap, int));
                p++;
            } else {
                while (*p >= '0' && *p <= '9' && n < 40)
                    spec[n++] = *p++;
            }
        }
        char len[3] = {0};
        size_t nl = 0;
        while (*p && strchr("hlLqjzt", *p) && nl < 2)
            len[nl++] = *p++;
        memcpy(spec + n, len, nl);
        n += nl;
        if (!*p || n + 2 > sizeof spec)
            goto fail;
        char conv = *p;
        spec[n++] = conv;
        spec[n] = '\0';

        char *dst = err->args + used;
        size_t room = sizeof err->args - used;
        int w;
        switch (conv) {
        case 'd':
        case 'i':
            if (!strcmp(len, "l"))
                w = snprintf(dst, room, spec, va_arg(ap, long));
            else if (!strcmp(len, "ll") || !strcmp(len, "q"))
                w = snprintf(dst, room, spec, va_arg(ap, long long));
            else if (!strcmp(len, "z"))
                w = snprintf(dst, room, spec, va_arg(ap, ssize_t));
            else if (!strcmp(len, "j"))
                w = snprintf(dst, room, spec, va_arg(ap, intmax_t));
            else if (!strcmp(len, "t"))
                w = snprintf(dst, room, spec, va_arg(ap, ptrdiff_t));
            else
                w = snprintf(dst, room, spec, va_arg(ap, int));
            break;
        case 'u':
        case 'o':
        case 'x':
        case 'X':
            if (!strcmp(len, "l"))
                w = snprintf(dst, room, spec, va_arg(ap, unsigned long));
            else if (!strcmp(len, "ll") || !strcmp(len, "q"))
                w = snprintf(dst, room, spec, va_arg(ap, unsigned long long));
            else if (!strcmp(len, "z"))
                w = snprintf(dst, room, spec, va_arg(ap, size_t));
            else if (!strcmp(len, "j"))
                w = snprintf(dst, room, spec, va_arg(ap, uintmax_t));
            else if (!strcmp(len, "t"))
                w = snprintf(dst, room, spec, va_arg(ap, ptrdiff_t));
            else
                w = snprintf(dst, room, spec, va_arg(ap, unsigned));
            break;
        case 'c':
            if (nl)
                goto fail;
            w = snprintf(dst, room, spec, va_arg(ap, int));
            break;
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G':
        case 'a':
        case 'A':
            if (!strcmp(len, "L"))
                w = snprintf(dst, room, spec, va_arg(ap, long double));
            else
                w = snprintf(dst, room, spec, va_arg(ap, double));
            break;
        case 's':
            if (nl)
                goto fail;
            w = snprintf(dst, room, spec, va_arg(ap, const char *));
            break;
        case 'p':
            w = snprintf(dst, room, spec, va_arg(ap, void *));
            break;
        default:
            goto fail;
        }
        if (w < 0 || (size_t)w >= room)
            goto fail;
        one_line(dst, (size_t)w);
        used += (size_t)w + 1;
        err->n_args++;
    }
    return;
fail:
    err->n_args = -1;
}

int tn_vfail(tn_error *err, int code, const char *fmt, va_list ap) {
    if (err) {
        va_list aq;
        va_copy(aq, ap);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        /* One line: a message never carries a newline from its arguments. */
        one_line(err->message, strlen(err->message));
        err->format = fmt;
        capture_args(err, fmt, aq);
        va_end(aq);
    }
    return code;
}

int tn_fail(tn_error *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tn_vfail(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void tn_error_clear(tn_error *err) {
    if (err) {
        err->code = TN_OK;
        err->message[0] = '\0';
        err->format = NULL;
        err->n_args = 0;
    }
}

static void put(char *out, size_t cap, size_t *n, const char *s, size_t len) {
    if (*n + 1 >= cap)
        return;
    if (len > cap - 1 - *n)
        len = cap - 1 - *n;
    memcpy(out + *n, s, len);
    *n += len;
    out[*n] = '\0';
}

const char *tn_error_format(const tn_error *err, const char *translated, char *out, size_t cap) {
    if (!out || cap == 0)
        return "";
    out[0] = '\0';
    if (!err)
        return out;
    const char *english = err->message;
    if (!translated || !err->format || err->n_args < 0 || translated == err->format)
        goto english;

    const char *arg[TN_ERROR_MESSAGE_MAX / 2];
    const char *a = err->args;
    for (int i = 0; i < err->n_args; i++) {
        arg[i] = a;
        a += strlen(a) + 1;
    }
    size_t n = 0;
    int next = 0;
    for (const char *p = translated; *p;) {
        const char *pct = strchr(p, '%');
        if (!pct) {
            put(out, cap, &n, p, strlen(p));
            break;
        }
        put(out, cap, &n, p, (size_t)(pct - p));
        p = pct + 1;
        if (*p == '%') {
            put(out, cap, &n, "%", 1);
            p++;
            continue;
        }
        /* The translator's position ("%2$s") picks the argument; the rest of
         * the conversion was applied when the argument was printed. */
        int index = next;
        const char *q = p;
        int pos = 0;
        while (*q >= '0' && *q <= '9' && pos < 1000)
            pos = pos * 10 + (*q++ - '0');
        if (*q == '$' && pos > 0) {
            index = pos - 1;
            p = q + 1;
        }
        while (*p && strchr("-+ #0'123456789.*hlLqjzt", *p))
            p++;
        if (!*p || !strchr("diouxXceEfFgGaAsp", *p) || index < 0 || index >= err->n_args)
            goto english;
        p++;
        put(out, cap, &n, arg[index], strlen(arg[index]));
        next = index + 1;
    }
    one_line(out, n);
    return out;
english:
    snprintf(out, cap, "%s", english);
    return out;
}

const char *tn_status_name(int status) {
    switch (status) {
    case TN_OK: return "ok";
    case TN_ERR_IO: return "i/o error";
    case TN_ERR_FORMAT: return "bad format";
    case TN_ERR_UNSUPPORTED: return "unsupported";
    case TN_ERR_INVALID: return "invalid argument";
    case TN_ERR_NOMEM: return "out of memory";
    case TN_ERR_OVERFLOW: return "does not fit";
    case TN_ERR_CANCELLED: return "cancelled";
    case TN_ERR_NOT_FOUND: return "not found";
    default: return "unknown error";
    }
}

static char sigbus_message[512];
static size_t sigbus_len;

static void on_sigbus(int sig) {
    /* write() and signal() only: async-signal-safe. */
    ssize_t ignored = write(STDERR_FILENO, sigbus_message, sigbus_len);
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}

void tn_sigbus_say(const char *message) {
    if (!message)
        return;
    size_t n = strlen(message);
    if (n > sizeof sigbus_message - 2)
        n = sizeof sigbus_message - 2;
    memcpy(sigbus_message, message, n);
    one_line(sigbus_message, n);
    sigbus_message[n] = '\n';
    sigbus_len = n + 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGBUS, &sa, NULL);
}
