/* tn_read_file: the one reader of whole files that a user or a request
 * names (docs/DESIGN.md, "Files a user names"). */
#include "tn-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tn_open_regular_file(const char *path, int *fd_out, uint64_t *size_out, tn_error *err) {
    tn_error_clear(err);
    if (!path || !fd_out)
        return tn_fail(err, TN_ERR_INVALID, "tn_open_regular_file: path or fd_out is NULL");
    *fd_out = -1;
    /* What the name is now, before anything is opened: opening a device
     * can act on it (a tape rewinds at close, a watchdog starts, a terminal
     * may become the process's controlling one), and a socket cannot be
     * opened at all ("No such device or address" would say nothing useful).
     * The name may change before open: fstat below decides on what was
     * opened. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return tn_fail(err, TN_ERR_IO, "%s is not a regular file (a FIFO, a device or a directory)",
                       path);
    /* O_NONBLOCK: opening a FIFO with no writer would block for ever; it is
     * refused below, once fstat says what was opened. O_NOCTTY: a terminal
     * swapped in after the stat does not become the controlling one. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        return tn_fail(err, e == ENOENT ? TN_ERR_NOT_FOUND : TN_ERR_IO, "%s: cannot open: %s",
                       path, strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tn_fail(err, TN_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tn_fail(err, TN_ERR_IO, "%s is not a regular file (a FIFO, a device or a directory)",
                       path);
    }
    *fd_out = fd;
    if (size_out)
        *size_out = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    return TN_OK;
}

int tn_read_file(const char *path, uint64_t max_bytes, char **out, size_t *out_len,
                 tn_error *err) {
    tn_error_clear(err);
    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!path || !out)
        return tn_fail(err, TN_ERR_INVALID, "tn_read_file: path or out is NULL");
    /* The buffer holds max_bytes + 1 (the NUL) and its length is a size_t. */
    if (max_bytes > (uint64_t)SIZE_MAX - 2)
        max_bytes = (uint64_t)SIZE_MAX - 2;
    int fd;
    uint64_t size;
    const int opened = tn_open_regular_file(path, &fd, &size, err);
    if (opened != TN_OK)
        return opened;
    if (size > max_bytes) {
        close(fd);
        return tn_fail(err, TN_ERR_OVERFLOW, "%s: %lld bytes, more than the %lld this takes", path,
                       (long long)size, (long long)max_bytes);
    }
    /* Read to the end, not to st_size: the file may have changed since
     * fstat, and /proc's files say 0. One byte of room past the size asks
     * the file whether it has more; max_bytes bounds it either way (the
     * buffer too, whatever st_size said). */
    uint64_t first = size < max_bytes ? size : max_bytes;
    size_t cap = (size_t)first + 1, len = 0;
    char *buf = malloc(cap + 1);
    int rc = buf ? TN_OK : tn_fail(err, TN_ERR_NOMEM, "%s: out of memory reading the file", path);
    while (rc == TN_OK) {
        if (len == cap) {
            if (len > max_bytes) {
                rc = tn_fail(err, TN_ERR_OVERFLOW, "%s: %lld bytes, more than the %lld this takes",
                             path, (long long)len, (long long)max_bytes);
                break;
            }
            size_t ncap = cap < max_bytes / 2 ? cap * 2 : (size_t)max_bytes + 1;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                rc = tn_fail(err, TN_ERR_NOMEM, "%s: out of memory reading the file", path);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = tn_fail(err, TN_ERR_IO, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (rc == TN_OK && len > max_bytes)
        rc = tn_fail(err, TN_ERR_OVERFLOW, "%s: %lld bytes, more than the %lld this takes", path,
                     (long long)len, (long long)max_bytes);
    if (rc != TN_OK) {
        free(buf);
        return rc;
    }
    buf[len] = '\0';
    *out = buf;
    if (out_len)
        *out_len = len;
    return TN_OK;
}
