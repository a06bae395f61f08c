/* What the commands share: option values, JSON output, timing figures. */
#include "cli.h"
#include "tn-text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The cursor goes back to the line's start after the figure: a notice the
 * engine writes meanwhile (the repack cache's "tern: ...") then covers it
 * instead of being glued to it. */
static void on_load_progress(float fraction, void *user) {
    (void)user;
    fputc('\r', stderr);
    fprintf(stderr, _("loading: %d %%"), (int)(fraction * 100.0f));
    fputc('\r', stderr);
    fflush(stderr);
}

bool cli_live_figures(void) {
    const char *term = getenv("TERM");
    return isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb"));
}

int cli_model_load(const char *path, tn_model **out, tn_error *err) {
    tn_model_params mp = tn_model_default_params();
    const bool tty = cli_live_figures();
    if (tty)
        mp.progress = on_load_progress;
    const int rc = tn_model_load(path, mp, out, err);
    if (tty)
        fputs("\r\033[K", stderr); /* what follows (an error, the answer) starts clean */
    return rc;
}

bool cli_number_text(const char *s, bool real) {
    /* strtol and strtod skip leading white space and strtod reads hex
     * ("0x10" is 16), "inf" and "nan": a value the user did not mean to
     * give (a quoted " 5", a pasted 0x10) must not pass as a number. */
    if (!s || !*s)
        return false;
    const char *p = s + (*s == '-' || *s == '+');
    if (!(*p >= '0' && *p <= '9') && !(real && *p == '.'))
        return false;
    return !real || !strpbrk(s, "xXpP");
}

bool cli_parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = cli_number_text(s, false) ? strtol(s, &end, 10) : 0;
    if (!cli_number_text(s, false) || errno || end == s || *end || v < lo || v > hi) {
        cli_error(_("%s needs a whole number from %ld to %ld, not '%s'"), opt, lo, hi, s ? s : "");
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_double(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = cli_number_text(s, true) ? strtod(s, &end) : 0;
    if (!cli_number_text(s, true) || errno || end == s || *end || !(v >= lo && v <= hi)) {
        cli_error(_("%s needs a number from %g to %g, not '%s'"), opt, lo, hi, s ? s : "");
        return false;
    }
    *out = v;
    return true;
}

ssize_t cli_read_line(char **line, size_t *cap, bool *failed) {
    errno = 0;
    ssize_t len = getline(line, cap, stdin);
    if (len < 0) {
        if (ferror(stdin)) {
            cli_error(_("cannot read the standard input: %s"), strerror(errno ? errno : EIO));
            *failed = true;
        }
        return -1;
    }
    while (len > 0 && ((*line)[len - 1] == '\n' || (*line)[len - 1] == '\r'))
        (*line)[--len] = '\0';
    return len;
}

char *cli_read_file(const char *path, uint64_t max, size_t *len) {
    tn_error err = {0};
    char *text = NULL;
    size_t n = 0;
    if (tn_read_file(path, max, &text, &n, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return NULL;
    }
    if (len)
        *len = n;
    return text;
}

/* Bytes that are not UTF-8 (a model's byte tokens or a request line can hold
 * any) become U+FFFD, so that the output stays valid JSON. A C1 control
 * (U+0080..U+009F) is escaped as JSON allows, the same string to a parser:
 * --json on a terminal then gives it no CSI (U+009B) to obey. */
void cli_json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t len = tn_utf8_char_len(s + i, n - i);
            if (len == 0) {
                fputs("\\ufffd", f);
            } else if (len == 2 && c == 0xc2 && (unsigned char)s[i + 1] < 0xa0) {
                fprintf(f, "\\u%04x", (unsigned char)s[i + 1]);
                i++;
            } else {
                fwrite(s + i, 1, len, f);
                i += len - 1;
            }
        } else if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* One answer streams at a time, on the main thread. */
static tn_text_stream g_answer;

static void answer_write(const char *s, size_t n, void *user) {
    fwrite(s, 1, n, user);
}

/* A pipe or a file gets the bytes the model produced (a script wants them,
 * and a terminal that shows them later is the user's own choice); a
 * terminal only what cannot drive it: an answer is text from a model or a
 * server, which a prompt injection or a hostile server can fill with
 * escape sequences that set the clipboard (OSC 52) or the window title,
 * rewrite earlier lines or hide text. */
static bool stdout_is_terminal(void) {
    static int terminal = -1;
    if (terminal < 0)
        terminal = isatty(STDOUT_FILENO);
    return terminal;
}

/* errno of the first write to stdout that failed (EIO when stdio kept
 * none), 0 while none has. Kept from the moment of the failure: a later
 * flush of an empty buffer succeeds and says nothing. */
static int g_stdout_errno;

int cli_stdout_error(void) {
    if (g_stdout_errno)
        return g_stdout_errno;
    errno = 0;
    const bool flushed = fflush(stdout) == 0;
    const int e = errno;
    if (!flushed || ferror(stdout))
        g_stdout_errno = e ? e : EIO;
    return g_stdout_errno;
}

bool cli_answer_write(const char *s, size_t n) {
    if (stdout_is_terminal())
        tn_text_stream_push(&g_answer, s, n, answer_write, stdout);
    else
        fwrite(s, 1, n, stdout);
    return cli_stdout_error() == 0;
}

/* Not flushed: tokenize --pieces writes one per token, and a pipe wants
 * them buffered. */
void cli_model_text_write(const char *s, size_t n) {
    if (stdout_is_terminal()) {
        tn_text_stream ts = {0};
        tn_text_stream_push(&ts, s, n, answer_write, stdout);
        tn_text_stream_end(&ts, answer_write, stdout);
    } else {
        fwrite(s, 1, n, stdout);
    }
}

void cli_answer_end(void) {
    tn_text_stream_end(&g_answer, answer_write, stdout);
    fflush(stdout);
}

char *cli_shown(const char *s) {
    const size_t n = strlen(s);
    char *out = malloc(4 * n + 1); /* every byte's escape fits */
    if (out)
        tn_text_one_line(s, n, out, 4 * n + 1, TN_TEXT_ESCAPE_C0, NULL);
    return out;
}

double cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

cli_spread cli_spread_of(double *v, int n) {
    cli_spread s = {0, 0, 0};
    if (n <= 0)
        return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.min = v[0];
    s.max = v[n - 1];
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return s;
}
