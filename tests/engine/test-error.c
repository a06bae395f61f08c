/* tn_error's format and arguments (engine/error.c): what lets the app and the
 * CLI show an engine message in the user's language (docs/TRANSLATING.md). */
#include "tn-test.h"

#include "tn-internal.h"
#include "tn-text.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void test_capture(void) {
    tn_error err = {0};
    const char *fmt = "%s: tensor '%s' has %" PRId64 " rows, %zu bytes, %.2f%% (%c) %*d|%-5u|";
    int rc = tn_fail(&err, TN_ERR_FORMAT, fmt, "m.gguf", "blk.3.attn_q.weight", (int64_t)-7,
                     (size_t)4096, 12.345, 'x', 4, 42, 9u);
    CHECK(rc == TN_ERR_FORMAT && err.code == TN_ERR_FORMAT);
    CHECKF(!strcmp(err.message, "m.gguf: tensor 'blk.3.attn_q.weight' has -7 rows, 4096 bytes, "
                                "12.35% (x)   42|9    |"),
           "%s", err.message);
    CHECK(err.format == fmt);
    CHECKF(err.n_args == 8, "%d", err.n_args);

    char out[TN_ERROR_MESSAGE_MAX];
    /* Untranslated (gettext gives the msgid back): the English message. */
    CHECK(!strcmp(tn_error_format(&err, fmt, out, sizeof out), err.message));
    CHECK(!strcmp(tn_error_format(&err, NULL, out, sizeof out), err.message));
    /* In order, and reordered by position; each argument as first printed. */
    tn_error_format(&err, "%s : «%s» %ld Zeilen, %zu Bytes, %.2f %% (%c) %*d|%u|", out, sizeof out);
    CHECKF(!strcmp(out, "m.gguf : «blk.3.attn_q.weight» -7 Zeilen, 4096 Bytes, 12.35 % (x)   42|9    |"),
           "%s", out);
    tn_error_format(&err, "%2$s in %1$s; %8$u %7$d", out, sizeof out);
    CHECKF(!strcmp(out, "blk.3.attn_q.weight in m.gguf; 9       42"), "%s", out);
    /* A translation that asks for an argument the message lacks: English. */
    tn_error_format(&err, "%9$s", out, sizeof out);
    CHECK(!strcmp(out, err.message));
    /* A small buffer is cut, never overrun. */
    char small[8];
    tn_error_format(&err, "%2$s", small, sizeof small);
    CHECK(!strcmp(small, "blk.3.a"));
}

static void test_newlines_and_clear(void) {
    tn_error err = {0};
    tn_fail(&err, TN_ERR_INVALID, "bad %s", "two\nlines");
    char out[64];
    tn_error_format(&err, "schlecht: %s", out, sizeof out);
    CHECKF(!strcmp(out, "schlecht: two lines"), "%s", out);
    tn_error_clear(&err);
    CHECK(err.format == NULL && err.message[0] == '\0');
    /* A message written by hand (no format) stays as written. */
    snprintf(err.message, sizeof err.message, "out of memory");
    CHECK(!strcmp(tn_error_format(&err, "x", out, sizeof out), "out of memory"));
}

/* A name from a file (an architecture, a tensor) that is not UTF-8: the
 * message and its captured argument are valid UTF-8, the bad bytes shown
 * as \xNN, a C1 control (U+009B, a terminal's CSI) as \u009b; valid UTF-8
 * stays as it is. They were copied raw: the CLI printed them so. */
static void test_not_utf8(void) {
    tn_error err = {0};
    tn_fail(&err, TN_ERR_UNSUPPORTED, "architecture '%.*s' is not supported", 7,
            "q\xff\xc2\x9bn\xc3\xa9");
    CHECKF(!strcmp(err.message, "architecture 'q\\xff\\u009bn\xc3\xa9' is not supported"), "%s",
           err.message);
    char out[128];
    tn_error_format(&err, "Architektur '%s' nicht", out, sizeof out);
    CHECKF(!strcmp(out, "Architektur 'q\\xff\\u009bn\xc3\xa9' nicht"), "%s", out);
    /* A sequence cut short at the end, and a lone continuation byte. */
    tn_fail(&err, TN_ERR_FORMAT, "key '%s'", "a\xe2\x82");
    CHECKF(!strcmp(err.message, "key 'a\\xe2\\x82'"), "%s", err.message);
    tn_fail(&err, TN_ERR_FORMAT, "key '%s'", "\x80z");
    CHECKF(!strcmp(err.message, "key '\\x80z'"), "%s", err.message);
}

/* A name with bidi controls and invisible characters ("Trojan Source"):
 * each shows as its escape in a name and an error's argument, so that the
 * line reads as it is; an answer's stream keeps them (Arabic, Hebrew). */
static void test_hidden(void) {
    /* U+202E, U+2066, U+200B, U+FEFF, U+061C, U+2028, a tag (U+E0041);
     * U+05D0 (Hebrew alef) and U+00E9 are text. */
    static const char name[] = "a\xe2\x80\xae" "b\xe2\x81\xa6" "c\xe2\x80\x8b" "d\xef\xbb\xbf"
                               "e\xd8\x9c" "f\xe2\x80\xa8" "g\xf3\xa0\x81\x81" "h\xd7\x90\xc3\xa9";
    static const char shown[] = "a\\u202eb\\u2066c\\u200bd\\ufeffe\\u061cf\\u2028g\\U000e0041h"
                                "\xd7\x90\xc3\xa9";
    char line[256];
    bool whole = false;
    tn_text_one_line(name, sizeof name - 1, line, sizeof line, TN_TEXT_ESCAPE_C0, &whole);
    CHECKF(whole && !strcmp(line, shown), "%s", line);
    /* 4 * n + 1 bytes hold any name: the longest escape fits. */
    static const char tags[] = "\xf3\xa0\x81\x81\xf3\xa0\x81\x81";
    char small[4 * (sizeof tags - 1) + 1];
    tn_text_one_line(tags, sizeof tags - 1, small, sizeof small, 0, &whole);
    CHECKF(whole && !strcmp(small, "\\U000e0041\\U000e0041"), "%s", small);
    tn_error err = {0};
    tn_fail(&err, TN_ERR_IO, "%s: cannot open", name);
    CHECKF(!strncmp(err.message, shown, strlen(shown)), "%s", err.message);
    char out[256];
    tn_error_format(&err, "%s: nicht", out, sizeof out);
    CHECKF(!strncmp(out, shown, strlen(shown)), "%s", out);
    CHECK(tn_text_hidden_char("\xe2\x80\xae", 3) == 0x202e);
    CHECK(tn_text_hidden_char("\xd7\x90", 2) == 0);
    CHECK(tn_text_hidden_char("a", 1) == 0);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(data, 1, n, f) == n);
        fclose(f);
    }
}

/* The GGUF reader's messages name their section in the format, not as an
 * argument: "the %s" filled with an English word could not be translated. */
static void test_gguf_sections(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/sections.gguf", tn_test_tmpdir());
    struct {
        const char *what;
        unsigned char bytes[40];
        size_t n;
        const char *format_has;
        int n_args;
    } cases[] = {
        /* magic, version 3, then 4 of n_tensors' 8 bytes */
        {"header", {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0}, 12, "inside the header (", 4},
        /* no tensors, one metadata entry whose key claims 200 bytes */
        {"metadata",
         {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 200, 0,
          0, 0, 0, 0, 0, 0, 'k', 'e', 'y', 0, 0, 0, 0, 0},
         40, "a string in the metadata claims", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].bytes, cases[i].n);
        tn_gguf *g = NULL;
        tn_error err = {0};
        int rc = tn_gguf_open(path, &g, &err);
        CHECKF(rc == TN_ERR_FORMAT && err.format && strstr(err.format, cases[i].format_has),
               "%s: rc %d, format '%s'", cases[i].what, rc, err.format ? err.format : "(null)");
        CHECKF(err.n_args == cases[i].n_args && !strcmp(err.args, path), "%s: %d arguments",
               cases[i].what, err.n_args);
        /* Every argument is the path or a number: no words to translate. */
        const char *a = err.args;
        for (int k = 1; k < err.n_args; k++) {
            a += strlen(a) + 1;
            CHECKF(strspn(a, "0123456789") == strlen(a), "%s: argument %d is '%s'",
                   cases[i].what, k, a);
        }
        tn_gguf_close(g);
    }
    remove(path);
}

/* A model without a tokenizer: the session's error is the model's own (its
 * format and path), not an English message wrapped in another format. */
static void test_tokenizer_failure(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/no-tokenizer.gguf", tn_test_tmpdir());
    tn_mkmodel_params p = tn_test_tiny_model("llama", 1);
    tn_error err = {0};
    CHECKF(tn_mkmodel(&p, path, &err) == TN_OK, "mkmodel: %s", err.message);
    tn_model_params mp = tn_model_default_params();
    mp.load_tokenizer = false;
    tn_model *m = NULL;
    if (tn_model_load(path, mp, &m, &err) != TN_OK) {
        CHECKF(false, "load: %s", err.message);
        return;
    }
    const tn_error *why = tn_model_tokenizer_failure(m);
    CHECK(why && why->format && !strcmp(why->format, "%s: tokenizer not loaded"));
    CHECK(why && !strcmp(tn_model_tokenizer_error(m), why->message));
    tn_session *s = NULL;
    if (tn_session_new(m, tn_session_default_params(), &s, &err) == TN_OK) {
        tn_error_clear(&err);
        int rc = tn_session_pin(s, "You are terse.", NULL, NULL, &err);
        CHECKF(rc == TN_ERR_UNSUPPORTED && err.code == TN_ERR_UNSUPPORTED, "pin: %d", rc);
        CHECKF(err.format && !strcmp(err.format, "%s: tokenizer not loaded"), "format '%s'",
               err.format ? err.format : "(null)");
        char out[TN_ERROR_MESSAGE_MAX];
        tn_error_format(&err, "%s: Tokenizer nicht geladen", out, sizeof out);
        const size_t n = strlen(path);
        CHECKF(!strncmp(out, path, n) && !strcmp(out + n, ": Tokenizer nicht geladen"), "'%s'",
               out);
        tn_session_free(s);
    } else {
        CHECKF(false, "session: %s", err.message);
    }
    tn_model_free(m);
    remove(path);
}

static int n_warnings;
static tn_error last_warning;

static void on_warning(const tn_error *w, void *user) {
    (void)user;
    n_warnings++;
    last_warning = *w;
}

/* Session warnings (tn_session_params.warn) are tn_errors too: a damaged pin
 * snapshot is reported with its format and the snapshot's path as argument,
 * so that the caller can show it translated. */
static void test_warning(void) {
    char path[4096], dir[4096], snapshot[8192] = "";
    snprintf(path, sizeof path, "%s/warning.gguf", tn_test_tmpdir());
    snprintf(dir, sizeof dir, "%s/warning-pins", tn_test_tmpdir());
    tn_mkmodel_params p = tn_test_tiny_model("llama", 2);
    tn_error err = {0};
    CHECKF(tn_mkmodel(&p, path, &err) == TN_OK, "mkmodel: %s", err.message);
    tn_model *m = NULL;
    if (tn_model_load(path, tn_model_default_params(), &m, &err) != TN_OK) {
        CHECKF(false, "load: %s", err.message);
        return;
    }
    const char *system = "You are a terse assistant for a hardware store. Answer in one "
                         "sentence, name the aisle, and never invent prices.";
    tn_session_params sp = tn_session_default_params();
    sp.n_ctx = 256;
    sp.n_threads = 1;
    sp.pin_cache_dir = dir;
    sp.warn = on_warning;
    for (int round = 0; round < 2; round++) {
        tn_session *s = NULL;
        if (tn_session_new(m, sp, &s, &err) != TN_OK) {
            CHECKF(false, "session: %s", err.message);
            break;
        }
        n_warnings = 0;
        CHECKF(tn_session_pin(s, system, NULL, NULL, &err) == TN_OK, "pin: %s", err.message);
        tn_session_free(s);
        if (round == 1)
            break;
        CHECKF(n_warnings == 0, "a first pin warned: %s", last_warning.message);
        /* The snapshot just written, its magic overwritten. */
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));)
            if (strstr(e->d_name, ".pin"))
                snprintf(snapshot, sizeof snapshot, "%s/%s", dir, e->d_name);
        if (d)
            closedir(d);
        FILE *f = snapshot[0] ? fopen(snapshot, "r+b") : NULL;
        CHECKF(f != NULL, "no snapshot in %s", dir);
        if (!f)
            break;
        fputs("NOTAPIN!", f);
        fclose(f);
    }
    CHECKF(n_warnings == 1, "%d warnings", n_warnings);
    CHECKF(last_warning.format &&
               !strcmp(last_warning.format, "%s: pin snapshot ignored (not a Tern pin snapshot); "
                                            "recomputing the pin"),
           "format '%s'", last_warning.format ? last_warning.format : "(null)");
    CHECKF(last_warning.n_args == 1 && !strcmp(last_warning.args, snapshot), "%d arguments",
           last_warning.n_args);
    char out[TN_ERROR_MESSAGE_MAX];
    tn_error_format(&last_warning, "%s: Anheft-Schnappschuss verworfen", out, sizeof out);
    const size_t n = strlen(snapshot);
    CHECKF(n > 0 && !strncmp(out, snapshot, n) &&
               !strcmp(out + n, ": Anheft-Schnappschuss verworfen"),
           "'%s'", out);
    tn_model_free(m);
    remove(snapshot);
    remove(dir);
    remove(path);
}

/* tn_text_stream: what a model's answer shows on a terminal. */
typedef struct shown {
    char s[512];
    size_t n;
    int calls;
} shown;

static void shown_write(const char *s, size_t n, void *user) {
    shown *o = user;
    CHECK(n > 0 && o->n + n < sizeof o->s);
    if (o->n + n < sizeof o->s) {
        memcpy(o->s + o->n, s, n);
        o->n += n;
        o->s[o->n] = '\0';
    }
    o->calls++;
}

/* s[0..n) pushed in pieces cut at the offsets cuts[0..n_cuts), then ended. */
static void stream_cut(const char *s, size_t n, const size_t *cuts, int n_cuts, shown *out) {
    tn_text_stream ts = {0};
    memset(out, 0, sizeof *out);
    size_t at = 0;
    for (int k = 0; k <= n_cuts; k++) {
        const size_t to = k < n_cuts ? cuts[k] : n;
        tn_text_stream_push(&ts, s + at, to - at, shown_write, out);
        at = to;
    }
    tn_text_stream_end(&ts, shown_write, out);
    CHECK(ts.n_held == 0);
}

/* The text shown whole, then cut at every offset, then one byte a piece:
 * the same every time (a character or a CR LF cut in two shows whole). */
static void check_stream(const char *s, size_t n, const char *want) {
    shown whole, cut;
    stream_cut(s, n, NULL, 0, &whole);
    CHECKF(whole.n == strlen(want) && !memcmp(whole.s, want, whole.n), "'%s' for '%s'", whole.s,
           want);
    for (size_t at = 0; at <= n; at++) {
        stream_cut(s, n, &at, 1, &cut);
        CHECKF(cut.n == whole.n && !memcmp(cut.s, whole.s, cut.n), "cut at %zu: '%s' for '%s'", at,
               cut.s, whole.s);
    }
    size_t each[64];
    CHECK(n <= 64);
    for (size_t k = 0; k < n && k < 64; k++)
        each[k] = k;
    stream_cut(s, n, each, (int)(n < 64 ? n : 64), &cut);
    CHECKF(cut.n == whole.n && !memcmp(cut.s, whole.s, cut.n), "byte by byte: '%s' for '%s'",
           cut.s, whole.s);
    /* Nothing a terminal obeys is left, but newline, tab and CR LF. */
    for (size_t k = 0; k < whole.n; k++) {
        const unsigned char c = (unsigned char)whole.s[k];
        const bool crlf = c == '\r' && k + 1 < whole.n && whole.s[k + 1] == '\n';
        CHECKF(c >= 0x20 || c == '\n' || c == '\t' || crlf, "control 0x%02x at %zu", c, k);
        CHECKF(c != 0x7f && !(c == 0xc2 && (unsigned char)whole.s[k + 1] < 0xa0), "at %zu", k);
    }
    /* Without newline, tab and CR, the same as tn_text_one_line shows a
     * name with its controls escaped; not with a bidi control, which an
     * answer keeps and a name shows escaped. */
    bool hidden = false;
    for (size_t k = 0, len; k < n; k += len ? len : 1) {
        len = tn_utf8_char_len(s + k, n - k);
        hidden = hidden || tn_text_hidden_char(s + k, len);
    }
    if (!hidden && !memchr(s, '\n', n) && !memchr(s, '\t', n) && !memchr(s, '\r', n)) {
        char line[512];
        tn_text_one_line(s, n, line, sizeof line, TN_TEXT_ESCAPE_C0, NULL);
        CHECKF(!strcmp(line, whole.s), "'%s' but tn_text_one_line '%s'", whole.s, line);
    }
}

static void test_stream(void) {
    /* A hostile answer: OSC 52 (the clipboard), a screen erase, a lone CR. */
    static const char hostile[] = "a\x1b]52;c;SGVsbG8=\x07" "b\x1b[2Jc\rd";
    check_stream(hostile, sizeof hostile - 1, "a\\x1b]52;c;SGVsbG8=\\x07b\\x1b[2Jc\\x0dd");
    /* Newlines, tabs and CR LF pass; so do characters of 2, 3 and 4 bytes. */
    static const char plain[] = "line\r\n\tnext \xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80 x\n";
    check_stream(plain, sizeof plain - 1, plain);
    /* C1 (U+009B is CSI), DEL, BS, NUL, bytes that are never UTF-8. */
    static const char c1[] = "\xc2\x9b" "31m\x7f\b\xff\xc0\xaf" "e";
    check_stream(c1, sizeof c1, "\\u009b31m\\x7f\\x08\\xff\\xc0\\xafe\\x00");
    /* A surrogate, a code point past U+10FFFF, a character cut short. */
    static const char bad[] = "\xed\xa0\x80" "x\xf4\x90\x80\x80" "y\xe2\x82" "z";
    check_stream(bad, sizeof bad - 1, "\\xed\\xa0\\x80x\\xf4\\x90\\x80\\x80y\\xe2\\x82z");
    /* What the answer's end leaves held: a character's start, a last CR. */
    check_stream("ok\xe2\x82", 4, "ok\\xe2\\x82");
    check_stream("ok\r", 3, "ok\\x0d");
    check_stream("\r\r\n", 3, "\\x0d\r\n");
    /* An answer's bidi controls and zero-width joiners are its text. */
    static const char rtl[] = "\xe2\x80\x8f\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xe2\x80\x8d!";
    check_stream(rtl, sizeof rtl - 1, rtl);
    /* Plain text goes out in one run, not a byte at a time. */
    shown out;
    stream_cut("a plain answer", 14, NULL, 0, &out);
    CHECK(out.calls == 1);
}

/* A GGUF that cannot be written (tn_gguf_writer_write; mkmodel's models):
 * a full disk, a used-up quota and a file past its size limit say so in
 * tn_write_cause's words, the cause inside the format, so that a
 * translation of it is whole (the cause was an argument, which stays
 * English inside a German sentence); any other errno in strerror's words.
 * tn_test_fail_writes fails the write (neither a full disk nor a quota
 * can be made without root). */
static void test_write_causes(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/cause.gguf", tn_test_tmpdir());
    const int errs[] = {ENOSPC, EDQUOT, EFBIG, EIO};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        const int e = errs[i];
        tn_gguf_writer *w = tn_gguf_writer_new();
        CHECK(w && tn_gguf_writer_set_str(w, "general.name", "cause") == TN_OK);
        tn_error err = {0};
        unlink(path);
        tn_test_fail_writes("/cause.gguf", e);
        const int rc = w ? tn_gguf_writer_write(w, path, &err) : TN_ERR_NOMEM;
        tn_test_fail_writes(NULL, 0);
        tn_gguf_writer_free(w);
        char want[4400];
        snprintf(want, sizeof want, "%s: cannot write: %s", path, tn_write_cause(e));
        CHECKF(rc == TN_ERR_IO && !strcmp(err.message, want), "errno %d: %d: %s", e, rc,
               err.message);
        CHECKF(access(path, F_OK) != 0, "errno %d: %s was left", e, path);
        if (e == EIO) {
            CHECKF(err.format && !strcmp(err.format, "%s: cannot write: %s"), "EIO: format %s",
                   err.format ? err.format : "(none)");
            continue;
        }
        /* the cause in the msgid; the path its one argument */
        CHECKF(err.format && strstr(err.format, tn_write_cause(e)) && err.n_args == 1,
               "errno %d: format '%s', %d arguments", e, err.format ? err.format : "(none)",
               err.n_args);
        char out[TN_ERROR_MESSAGE_MAX];
        tn_error_format(&err, "%s: Schreiben nicht möglich", out, sizeof out);
        snprintf(want, sizeof want, "%s: Schreiben nicht möglich", path);
        CHECKF(!strcmp(out, want), "errno %d translated: %s", e, out);
    }
}

int main(void) {
    test_capture();
    test_newlines_and_clear();
    test_not_utf8();
    test_hidden();
    test_gguf_sections();
    test_tokenizer_failure();
    test_warning();
    test_stream();
    test_write_causes();
    return tn_test_finish("error");
}
