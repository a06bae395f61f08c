#include "tn-internal.h"
#include "tn-text.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
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

uint32_t tn_text_hidden_char(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    uint32_t cp;
    if (len == 2 && (p[0] & 0xe0) == 0xc0)
        cp = (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
    else if (len == 3 && (p[0] & 0xf0) == 0xe0)
        cp = (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
    else if (len == 4 && (p[0] & 0xf8) == 0xf0)
        cp = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
             (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
    else
        return 0;
    const bool hidden = cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) ||
                        (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
                        (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff ||
                        (cp >= 0xe0000 && cp <= 0xe007f);
    return hidden ? cp : 0;
}

/* A name from a file (an architecture, a tensor, a key) may hold any bytes:
 * printed raw they made the CLI's message invalid UTF-8, which a terminal,
 * a log or a JSON body shows as garbage or refuses. */
size_t tn_text_one_line(const char *s, size_t n, char *out, size_t cap, unsigned flags, bool *whole) {
    size_t o = 0, i = 0;
    if (cap == 0)
        return 0;
    while (i < n) {
        const unsigned char *p = (const unsigned char *)s + i;
        const size_t len = tn_utf8_char_len(s + i, n - i);
        char piece[16];
        size_t k;
        uint32_t cp;
        if (len == 0 || (len == 1 && (flags & TN_TEXT_ESCAPE_C0) && (p[0] < 0x20 || p[0] == 0x7f))) {
            k = (size_t)snprintf(piece, sizeof piece, "\\x%02x", p[0]);
        } else if (len == 2 && p[0] == 0xc2 && p[1] < 0xa0) {
            k = (size_t)snprintf(piece, sizeof piece, "\\u%04x", p[1]);
        } else if ((cp = tn_text_hidden_char(s + i, len)) != 0) {
            k = (size_t)snprintf(piece, sizeof piece, cp > 0xffff ? "\\U%08x" : "\\u%04x",
                                 (unsigned)cp);
        } else if (len == 1) {
            piece[0] = (char)p[0];
            k = 1;
            one_line(piece, 1);
        } else {
            memcpy(piece, p, len);
            k = len;
        }
        if (o + k >= cap)
            break;
        memcpy(out + o, piece, k);
        o += k;
        i += len ? len : 1;
    }
    out[o] = '\0';
    if (whole)
        *whole = i == n;
    return o;
}

/* How many bytes a UTF-8 character starting with c has; 0 for a byte that
 * starts none (a continuation byte, C0, C1, F5..FF: never UTF-8). */
static size_t utf8_need(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
}

/* Whether c may be byte k (>= 1) of a character led by lead: the second
 * byte's range also rules out overlong forms, surrogates and code points
 * past U+10FFFF, as tn_utf8_decode does. */
static bool utf8_next_ok(unsigned char lead, size_t k, unsigned char c) {
    if ((c & 0xc0) != 0x80)
        return false;
    if (k == 1) {
        if (lead == 0xe0)
            return c >= 0xa0;
        if (lead == 0xed)
            return c < 0xa0;
        if (lead == 0xf0)
            return c >= 0x90;
        if (lead == 0xf4)
            return c < 0x90;
    }
    return true;
}

static void write_byte_escaped(unsigned char c, tn_text_write_fn write, void *user) {
    char e[5];
    snprintf(e, sizeof e, "\\x%02x", c);
    write(e, 4, user);
}

/* What is held, shown as it can be without the bytes that did not come. */
static void release_held(tn_text_stream *ts, tn_text_write_fn write, void *user) {
    for (size_t k = 0; k < ts->n_held; k++)
        write_byte_escaped(ts->held[k], write, user);
    ts->n_held = 0;
}

void tn_text_stream_push(tn_text_stream *ts, const char *s, size_t n, tn_text_write_fn write,
                         void *user) {
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* s[run..i) passes as it is, written in one go */
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = p[i];
        if (ts->n_held && ts->held[0] == '\r') {
            ts->n_held = 0;
            if (c == '\n') {
                write("\r\n", 2, user);
                run = i + 1;
                continue;
            }
            write_byte_escaped('\r', write, user);
        } else if (ts->n_held) {
            if (utf8_next_ok(ts->held[0], ts->n_held, c)) {
                ts->held[ts->n_held++] = c;
                if (ts->n_held == utf8_need(ts->held[0])) {
                    if (ts->held[0] == 0xc2 && ts->held[1] < 0xa0) {
                        /* U+0080..U+009F: a terminal may read U+009B as CSI. */
                        char e[7];
                        snprintf(e, sizeof e, "\\u%04x", ts->held[1]);
                        write(e, 6, user);
                    } else {
                        write((const char *)ts->held, ts->n_held, user);
                    }
                    ts->n_held = 0;
                }
                run = i + 1;
                continue;
            }
            release_held(ts, write, user);
        }
        if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f))
            continue;
        if (i > run)
            write(s + run, i - run, user);
        run = i + 1;
        if (c == '\r' || (c >= 0x80 && utf8_need(c))) {
            ts->held[0] = c;
            ts->n_held = 1;
        } else {
            write_byte_escaped(c, write, user);
        }
    }
    if (n > run)
        write(s + run, n - run, user);
}

void tn_text_stream_end(tn_text_stream *ts, tn_text_write_fn write, void *user) {
    release_held(ts, write, user);
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
        char clean[sizeof err->args];
        bool whole = false;
        const size_t c = tn_text_one_line(dst, (size_t)w, clean, room, 0, &whole);
        if (!whole) /* its escapes do not fit */
            goto fail;
        memcpy(dst, clean, c + 1);
        used += c + 1;
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
        err->overflow = (tn_overflow){0}; /* only a session's fit checks set it */
        char raw[sizeof err->message];
        vsnprintf(raw, sizeof raw, fmt, ap);
        /* One line of valid UTF-8: a message never carries a newline, an
         * escape or a byte that is not UTF-8 from its arguments. */
        tn_text_one_line(raw, strlen(raw), err->message, sizeof err->message, 0, NULL);
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

const char *tn_write_cause(int errnum) {
    switch (errnum) {
    case ENOSPC: return TN_N_("the disk is full");
#ifdef EDQUOT
    case EDQUOT: return TN_N_("the disk quota of this user is used up");
#endif
    case EFBIG:
        return TN_N_("the file is too large for this file system (or past this shell's limit, "
                     "ulimit -f)");
    default: return strerror(errnum);
    }
}

int tn_fail_write(tn_error *err, const char *path, int errnum) {
    /* Each sentence spells tn_write_cause's words out (test-error checks
     * that they agree): xgettext reads literals, not the switch above. */
    switch (errnum) {
    case ENOSPC: return tn_fail(err, TN_ERR_IO, "%s: cannot write: the disk is full", path);
#ifdef EDQUOT
    case EDQUOT:
        return tn_fail(err, TN_ERR_IO, "%s: cannot write: the disk quota of this user is used up",
                       path);
#endif
    case EFBIG:
        return tn_fail(err, TN_ERR_IO,
                       "%s: cannot write: the file is too large for this file system (or past "
                       "this shell's limit, ulimit -f)",
                       path);
    default: return tn_fail(err, TN_ERR_IO, "%s: cannot write: %s", path, strerror(errnum));
    }
}

static char fail_writes_suffix[256];
static int fail_writes_errno;

void tn_test_fail_writes(const char *suffix, int errnum) {
    snprintf(fail_writes_suffix, sizeof fail_writes_suffix, "%s", suffix ? suffix : "");
    fail_writes_errno = suffix ? errnum : 0;
}

int tn_test_write_errno(const char *path) {
    if (!fail_writes_errno || !path)
        return 0;
    const size_t n = strlen(path), k = strlen(fail_writes_suffix);
    return n >= k && !strcmp(path + n - k, fail_writes_suffix) ? fail_writes_errno : 0;
}

void tn_error_clear(tn_error *err) {
    if (err) {
        err->code = TN_OK;
        err->message[0] = '\0';
        err->format = NULL;
        err->n_args = 0;
        err->overflow = (tn_overflow){0};
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

/* ------------------------------------------------------------ SIGBUS
 *
 * Models and repack caches are read through mappings: a file truncated under
 * its mapping (cp or a re-download over it, rsync --inplace, a sync tool)
 * makes the next read of a page past its new end a SIGBUS. One handler,
 * installed once, serves two cases:
 *
 * - a load-time pass over a mapping (the parse, the NaN/Inf scan, the
 *   repack, the repack cache's checks) runs under tn_guarded_read, and a
 *   decode step and each slot of its pool tasks under tn_guarded_task
 *   (engine/forward.c): a fault at an address inside the mappings the guard
 *   named, on the thread that armed it, jumps back out of the pass (the
 *   slot), which then returns an ordinary error;
 * - any other SIGBUS (a thread without a guard, another mapping, a
 *   hardware error): tn_sigbus_say's message, then whatever handled SIGBUS
 *   before this one (the default: the process ends).
 *
 * The guard is thread-local, so a fault is only ever caught on the thread
 * whose pass it interrupts: the jump never crosses another thread's frames.
 * Guards nest on a thread (a pass inside a pass, a decode step's guard
 * around its pool tasks' guards): the innermost one whose spans hold the
 * faulting address takes it.
 * A guarded pass must own nothing that the jump would lose (no lock, no
 * allocation of its own: its caller allocates before and frees after). */

static char sigbus_message[512];
static volatile sig_atomic_t sigbus_len;
static struct sigaction sigbus_previous;
static pthread_once_t sigbus_once = PTHREAD_ONCE_INIT;

typedef struct read_guard {
    sigjmp_buf jump;
    const tn_read_span *spans;
    int n_spans;
    volatile sig_atomic_t hit; /* the span that faulted */
    struct read_guard *outer;  /* a guarded pass inside another */
    tn_error *err;
    volatile sig_atomic_t cancelled; /* left by tn_load_poll, not by a fault */
} read_guard;

/* Set (to a frame of tn_guarded_read) only while a pass runs. Written
 * before the first fault can happen, so the thread's TLS block is already
 * allocated when the handler reads it (no allocation in the handler). */
static __thread read_guard *volatile active_guard;

static void (*guard_hook)(const char *pass, void *user);
static void *guard_hook_user;

static void on_sigbus(int sig, siginfo_t *si, void *context) {
    /* Only async-signal-safe operations: reads of this thread's guard,
     * siglongjmp to a frame still live on this thread, write, sigaction,
     * raise. */
    /* Guards nest (a guarded pass that runs another): the innermost guard
     * whose spans hold the address takes the fault, so that a fault in an
     * outer pass's file while an inner pass is armed still reaches the
     * outer pass (whose jump abandons the inner frames, which own nothing
     * by the same contract). */
    if (si && si->si_code == BUS_ADRERR) {
        const uintptr_t a = (uintptr_t)si->si_addr;
        for (read_guard *g = active_guard; g; g = g->outer) {
            for (int i = 0; i < g->n_spans; i++) {
                const uintptr_t b = (uintptr_t)g->spans[i].base;
                if (a >= b && a - b < g->spans[i].size) {
                    g->hit = i;
                    /* The guards outside g stay armed; g and those inside
                     * it are gone (a second fault in g's pass is not
                     * caught by g again). */
                    active_guard = g->outer;
                    siglongjmp(g->jump, 1);
                }
            }
        }
    }
    /* Only a fault the kernel raised (si_code > 0) can be a file cut
     * short under its mapping; one sent by kill or sigqueue (SI_USER,
     * SI_QUEUE, ...: 0 or less) ends the process without that story. */
    if (sigbus_len > 0 && (!si || si->si_code > 0)) {
        ssize_t ignored = write(STDERR_FILENO, sigbus_message, (size_t)sigbus_len);
        (void)ignored;
    }
    if (sigbus_previous.sa_flags & SA_SIGINFO) {
        if (sigbus_previous.sa_sigaction) {
            sigbus_previous.sa_sigaction(sig, si, context);
            return;
        }
    } else if (sigbus_previous.sa_handler != SIG_DFL && sigbus_previous.sa_handler != SIG_IGN) {
        sigbus_previous.sa_handler(sig);
        return;
    }
    /* The default action, as before there was a handler: the signal stays
     * blocked until this returns, then ends the process (a fault would
     * also repeat at its instruction). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

static void sigbus_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, &sigbus_previous);
}

void tn_sigbus_say(const char *message) {
    if (!message)
        return;
    size_t n = strlen(message);
    if (n > sizeof sigbus_message - 2)
        n = sizeof sigbus_message - 2;
    sigbus_len = 0; /* the handler writes nothing while the text changes */
    memcpy(sigbus_message, message, n);
    one_line(sigbus_message, n);
    sigbus_message[n] = '\n';
    atomic_signal_fence(memory_order_seq_cst);
    sigbus_len = (sig_atomic_t)(n + 1);
    pthread_once(&sigbus_once, sigbus_install);
}

void tn_test_read_guard_hook(void (*hook)(const char *pass, void *user), void *user) {
    guard_hook = hook;
    guard_hook_user = user;
}

int tn_guarded_read(const tn_read_span *spans, int n_spans, const char *pass,
                    void (*fn)(void *arg), void *arg, tn_error *err) {
    pthread_once(&sigbus_once, sigbus_install);
    /* What the fault path needs lives in g, in memory: after the jump no
     * local kept in a register is read (-Wclobbered). */
    read_guard g = {.spans = spans, .n_spans = n_spans, .hit = -1, .outer = active_guard,
                    .err = err};
    /* No signal mask saved: that would cost a system call per pass. The
     * handler runs with SIGBUS blocked, so the fault path unblocks it. */
    if (sigsetjmp(g.jump, 0) == 0) {
        active_guard = &g;
        /* The compiler must not move the pass's reads of the mapping above
         * the arming, or below the disarming. */
        atomic_signal_fence(memory_order_seq_cst);
        if (guard_hook)
            guard_hook(pass, guard_hook_user);
        fn(arg);
        atomic_signal_fence(memory_order_seq_cst);
        active_guard = g.outer;
        return TN_OK;
    }
    active_guard = g.outer;
    if (g.cancelled)
        return tn_fail(g.err, TN_ERR_CANCELLED, "loading was cancelled");
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
    const int i = g.hit >= 0 && g.hit < g.n_spans ? (int)g.hit : 0;
    return tn_fail_shrank(g.err, g.n_spans > 0 ? g.spans[i].path : NULL);
}

/* The load running on this thread (tn_model_load): its caller's question
 * and whether the answer was yes already, and its progress. */
typedef tn_load_state load_cancel;

static __thread load_cancel this_load;

void tn_load_cancel_arm(bool (*cancelled)(void *user), void *user, tn_load_state *outer) {
    *outer = this_load;
    this_load = (load_cancel){.cancelled = cancelled, .user = user};
}

void tn_load_cancel_disarm(const tn_load_state *outer) { this_load = *outer; }

bool tn_load_cancelled(void) {
    if (!this_load.said_yes && this_load.cancelled)
        this_load.said_yes = this_load.cancelled(this_load.user);
    return this_load.said_yes;
}

void tn_load_progress_arm(void (*progress)(float fraction, void *user), void *user) {
    this_load.progress = progress;
    this_load.progress_user = user;
    this_load.done = this_load.total = 0;
    this_load.reported = 0.0f;
}

/* About a hundred calls a load at most: a caller may redraw on each. */
static void progress_report(void) {
    load_cancel *l = &this_load;
    if (!l->progress || l->total == 0)
        return;
    float f = l->done >= l->total ? 1.0f : (float)((double)l->done / (double)l->total);
    if (f > 0.99f)
        f = 0.99f; /* 1 is the end's alone: an estimate that was short stops here */
    if (f < l->reported + 0.01f)
        return;
    l->reported = f;
    l->progress(f, l->progress_user);
}

void tn_load_progress_expect(uint64_t remaining_bytes) {
    this_load.total = this_load.done + remaining_bytes;
    progress_report();
}

void tn_load_progress_expect_repack(uint64_t remaining_bytes, uint64_t repack_bytes) {
    this_load.repack_expected = repack_bytes;
    tn_load_progress_expect(remaining_bytes);
}

void tn_load_progress_repack_begins(uint64_t pass_bytes) {
    load_cancel *l = &this_load;
    l->total = l->total - (l->repack_expected < l->total ? l->repack_expected : l->total) +
               pass_bytes;
    l->repack_expected = 0;
    progress_report();
}

bool tn_load_progress_armed(void) { return this_load.progress != NULL; }

void tn_load_progress_add(uint64_t bytes) {
    this_load.done += bytes;
    progress_report();
}

void tn_load_progress_end(void) {
    if (this_load.progress && this_load.reported < 1.0f) {
        this_load.reported = 1.0f;
        this_load.progress(1.0f, this_load.progress_user);
    }
}

int tn_load_fail_cancelled(tn_error *err, const char *path) {
    return tn_fail(err, TN_ERR_CANCELLED, "%s: loading was cancelled", path ? path : "?");
}

void tn_load_poll(void) {
    read_guard *g = active_guard;
    if (!g || !tn_load_cancelled())
        return;
    g->cancelled = 1;
    active_guard = g->outer;
    siglongjmp(g->jump, 1);
}

int tn_fail_shrank(tn_error *err, const char *path) {
    return tn_fail(err, TN_ERR_IO,
                   "'%s' shrank while it was being read (it is being rewritten?): load it again "
                   "when it is complete",
                   path ? path : "?");
}

int tn_guarded_task(const tn_read_span *spans, int n_spans, void (*fn)(void *, int, int),
                    void *ctx, int ith, int nth) {
    /* tn_guarded_read without the hook and the message: this runs around
     * every slot of every pool task of a decode step, so it costs one
     * sigsetjmp that saves no signal mask (no system call) and two writes
     * of this thread's guard pointer. */
    read_guard g = {.spans = spans, .n_spans = n_spans, .hit = -1, .outer = active_guard};
    if (sigsetjmp(g.jump, 0) == 0) {
        active_guard = &g;
        atomic_signal_fence(memory_order_seq_cst);
        fn(ctx, ith, nth);
        atomic_signal_fence(memory_order_seq_cst);
        active_guard = g.outer;
        return -1;
    }
    active_guard = g.outer;
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
    return g.hit >= 0 && g.hit < g.n_spans ? (int)g.hit : 0;
}

void tn_read_guard_install(void) { pthread_once(&sigbus_once, sigbus_install); }
