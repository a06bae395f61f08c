/* tn_read_file (engine/file-read.c): the one reader of whole files a user
 * names. A regular file comes back whole and NUL-terminated; a FIFO, a
 * device or a directory is refused unread (without blocking: meson's
 * timeout ends a run that hangs), a file over the maximum is refused before
 * it is read, with messages that name the file and the reason. */
#include "tn-test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[4096];

static void write_file(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(text, 1, n, f) == n);
        fclose(f);
    }
}

/* Reads path with max; checks the status and that the message holds every
 * word of `words` (NULL-terminated). Frees what was read. */
static void expect(const char *what, const char *path, uint64_t max, int want_rc,
                   const char *const *words) {
    tn_error err = {0};
    char *out = (char *)"untouched";
    size_t len = 12345;
    int rc = tn_read_file(path, max, &out, &len, &err);
    CHECKF(rc == want_rc, "%s: status %d (%s), expected %d", what, rc, err.message, want_rc);
    if (rc != TN_OK) {
        CHECKF(out == NULL && len == 0, "%s: out not cleared on failure", what);
        CHECKF(err.code == rc, "%s: err.code %d", what, err.code);
        for (int i = 0; words && words[i]; i++)
            CHECKF(strstr(err.message, words[i]) != NULL, "%s: '%s' not in: %s", what, words[i],
                   err.message);
    } else {
        free(out);
    }
}

static void test_regular(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/text.txt", dir);
    static const char text[] = "hello\0world\n"; /* a NUL inside is kept */
    write_file(path, text, sizeof text - 1);
    tn_error err = {0};
    char *out = NULL;
    size_t len = 0;
    CHECK(tn_read_file(path, 1 << 20, &out, &len, &err) == TN_OK);
    CHECKF(len == sizeof text - 1, "len %zu", len);
    CHECK(out && memcmp(out, text, sizeof text - 1) == 0 && out[len] == '\0');
    free(out);
    /* Exactly the maximum is allowed; one byte less is not. */
    out = NULL;
    CHECK(tn_read_file(path, sizeof text - 1, &out, NULL, &err) == TN_OK);
    free(out);
    expect("one byte over", path, sizeof text - 2, TN_ERR_OVERFLOW,
           (const char *const[]){path, "12 bytes, more than the 11 this takes", NULL});

    /* An empty file is "" (not NULL). */
    snprintf(path, sizeof path, "%s/empty.txt", dir);
    write_file(path, "", 0);
    out = NULL;
    len = 7;
    CHECK(tn_read_file(path, 0, &out, &len, &err) == TN_OK);
    CHECK(out && out[0] == '\0' && len == 0);
    free(out);
}

static void test_refused(void) {
    char path[4200];
    /* A FIFO with no writer: open() without O_NONBLOCK blocks for ever. */
    snprintf(path, sizeof path, "%s/fifo", dir);
    CHECK(mkfifo(path, 0600) == 0);
    const char *const not_regular[] = {"is not a regular file (a FIFO, a device or a directory)",
                                       NULL};
    expect("fifo", path, 1 << 20, TN_ERR_IO, (const char *const[]){path, not_regular[0], NULL});
    /* The same with a writer holding it open: read() would wait for data. */
    int w = open(path, O_RDWR | O_NONBLOCK);
    CHECK(w >= 0);
    expect("fifo with a writer", path, 1 << 20, TN_ERR_IO, not_regular);
    if (w >= 0)
        close(w);
    /* /dev/zero never ends; /dev/null is a device too. */
    expect("/dev/zero", "/dev/zero", 1 << 20, TN_ERR_IO, not_regular);
    expect("/dev/null", "/dev/null", 1 << 20, TN_ERR_IO, not_regular);
    expect("directory", dir, 1 << 20, TN_ERR_IO, not_regular);
    snprintf(path, sizeof path, "%s/missing.txt", dir);
    expect("missing", path, 1 << 20, TN_ERR_NOT_FOUND,
           (const char *const[]){path, "cannot open", NULL});
    /* A file of 3 GiB (sparse: no disk used) is refused by its size, before
     * any memory is taken for it. */
    snprintf(path, sizeof path, "%s/huge.bin", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)3 << 30) == 0);
    if (fd >= 0)
        close(fd);
    expect("huge", path, (uint64_t)64 << 20, TN_ERR_OVERFLOW,
           (const char *const[]){path, "3221225472 bytes, more than the 67108864 this takes",
                                 NULL});
    /* /proc's files say 0 bytes: read to the end, and bounded by what is read. */
    char *out = NULL;
    size_t len = 0;
    tn_error err = {0};
    CHECKF(tn_read_file("/proc/self/status", 1 << 20, &out, &len, &err) == TN_OK, "%s",
           err.message);
    CHECK(out && len > 0 && strstr(out, "Name:") != NULL);
    free(out);
    expect("/proc over the maximum", "/proc/self/status", 16, TN_ERR_OVERFLOW,
           (const char *const[]){"more than the 16 this takes", NULL});
}

/* A socket: open() cannot open one (ENXIO, "No such device or address",
 * which tells a user nothing), so its type is looked at before open. */
static void test_socket(void) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int n = snprintf(a.sun_path, sizeof a.sun_path, "%s/sock", dir);
    if (n <= 0 || (size_t)n >= sizeof a.sun_path)
        return; /* the scratch directory's name is too long for a socket */
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0);
    expect("socket", a.sun_path, 1 << 20, TN_ERR_IO,
           (const char *const[]){a.sun_path, "is not a regular file", NULL});
    if (s >= 0)
        close(s);
}

/* A file name may hold any byte but '/' and NUL: the message, shown by the
 * CLI on a terminal, in logs and in the app, stays one line with no control
 * character (an escape sequence would recolour or rewrite the terminal). */
static void test_odd_name(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/a\nb\tc\033[31md\a\x7f.txt", dir);
    write_file(path, "four", 4);
    tn_error err = {0};
    char *out = NULL;
    CHECK(tn_read_file(path, 3, &out, NULL, &err) == TN_ERR_OVERFLOW && out == NULL);
    for (const char *p = err.message; *p; p++)
        CHECKF((unsigned char)*p >= 0x20 && *p != 0x7f, "control character 0x%02x in: %s",
               (unsigned char)*p, err.message);
    CHECKF(strstr(err.message, "a b c?[31md??.txt: 4 bytes, more than the 3") != NULL, "%s",
           err.message);
    /* The arguments kept for the translated message are cleaned the same way. */
    CHECK(err.n_args > 0 && strchr(err.args, '\033') == NULL);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", tn_test_tmpdir());
    test_regular();
    test_refused();
    test_socket();
    test_odd_name();
    /* tn_read_file(path, max, NULL, ...) is a caller's mistake, not a crash. */
    tn_error err = {0};
    CHECK(tn_read_file(dir, 1, NULL, NULL, &err) == TN_ERR_INVALID);
    return tn_test_finish("file-read");
}
