/* What the commands share: option values, JSON output, timing figures. */
#include "cli.h"
#include "tn-text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

bool cli_pin_cache_check(const char *cmd, const char *dir) {
    if (!*dir) {
        cli_error(_("%s: --pin-cache wants a directory (--no-pin-cache: none)"), cmd);
        return false;
    }
    /* A missing one is made at the first snapshot (docs/SESSION.md); a
     * file, a FIFO or /dev/null was taken, and every request warned "Not a
     * directory" for the life of the server. So was a symbolic link that
     * leads nowhere (to itself, or to a path that cannot be made): it is
     * there, and no directory can be made in its place. */
    struct stat st;
    const bool link_there = lstat(dir, &st) == 0;
    if (stat(dir, &st) == 0 ? !S_ISDIR(st.st_mode)
                            : errno == ENOTDIR || errno == ELOOP || link_there) {
        cli_error(_("%s: --pin-cache %s is not a directory (give a directory, made if missing, or "
                    "--no-pin-cache)"),
                  cmd, dir);
        return false;
    }
    return true;
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

/* Columns of the UTF-8 character at s, its length in *n: two for the wide
 * characters of Chinese, Japanese and Korean (the zh_CN help), else one. */
static int char_columns(const unsigned char *s, size_t left, size_t *n) {
    const unsigned c = s[0];
    size_t k = c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (k > left)
        k = left;
    uint32_t cp = k == 1 ? c : c & (0x7fu >> k);
    for (size_t i = 1; i < k; i++)
        cp = cp << 6 | (s[i] & 0x3fu);
    *n = k;
    if (c >= 0x80 && c < 0xc0)
        return 0; /* a stray continuation byte */
    const bool wide = (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) ||
                      (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
                      (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
                      (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x20000 && cp <= 0x3fffd);
    return wide ? 2 : 1;
}

/* Where the rest of a broken line starts: under a usage line's command,
 * under an option's description ("  --seed S   the seed": the column after
 * the first gap of two spaces), else under the line's own indentation. */
static int continuation_indent(const char *line, size_t len) {
    size_t lead = 0;
    while (lead < len && line[lead] == ' ')
        lead++;
    /* "usage: tern-cli ...", "Aufruf: tern-cli ...": under the command's
     * options, as the usage lines that follow it. */
    for (size_t i = 0; i < 16 && i + 9 <= len && !lead; i++)
        if (!memcmp(line + i, "tern-cli ", 9))
            return (int)i + 2;
    for (size_t i = lead; i + 2 < len && i < 40; i++)
        if (line[i] != ' ' && line[i + 1] == ' ' && line[i + 2] == ' ') {
            size_t d = i + 1;
            while (d < len && line[d] == ' ')
                d++;
            if (d < 40 && d < len)
                return (int)d;
            break;
        }
    return lead ? (int)lead + 2 : 0;
}

static void write_wrapped_line(FILE *out, const char *line, size_t len) {
    const int indent = continuation_indent(line, len);
    size_t start = 0;
    int col0 = 0; /* the columns already taken: the indent of a continuation */
    for (;;) {
        int col = col0;
        size_t i = start, cut = 0, resume = 0;
        while (i < len) {
            size_t n;
            const int w = char_columns((const unsigned char *)line + i, len - i, &n);
            if (col + w > CLI_HELP_COLUMNS && cut)
                break;
            if (line[i] == ' ' && i > start && line[i - 1] != ' ' &&
                (int)i > (start ? 0 : indent)) {
                cut = i;
                resume = i + 1;
            } else if (w == 2 && i > start) {
                cut = i;
                resume = i;
            }
            col += w;
            i += n;
        }
        if (i >= len) {
            fwrite(line + start, 1, len - start, out);
            fputc('\n', out);
            return;
        }
        fwrite(line + start, 1, cut - start, out);
        fputc('\n', out);
        while (resume < len && line[resume] == ' ')
            resume++;
        if (resume >= len)
            return;
        fprintf(out, "%*s", indent, "");
        start = resume;
        col0 = indent;
    }
}

void cli_write_wrapped(FILE *out, const char *text, size_t len) {
    size_t start = 0;
    while (start < len) {
        const char *nl = memchr(text + start, '\n', len - start);
        const size_t end = nl ? (size_t)(nl - text) : len;
        if (end > start)
            write_wrapped_line(out, text + start, end - start);
        else
            fputc('\n', out);
        start = end + 1;
    }
}

void cli_print_help(void (*print)(FILE *out)) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        print(stdout); /* out of memory: unwrapped rather than nothing */
        return;
    }
    print(mem);
    if (fclose(mem) == 0)
        cli_write_wrapped(stdout, buf, len);
    else
        print(stdout);
    free(buf);
}

const char *cli_write_cause(int e) {
    /* The engine's wording, so that tern-cli's own files, mkmodel's models
     * and pin snapshots say the same; strerror's words pass gettext as they
     * are (no msgid matches them). */
    return _(tn_write_cause(e));
}
