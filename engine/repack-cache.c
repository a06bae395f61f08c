/* The on-disk cache of repacked weights (tn-repack-cache.h; docs/QUANT.md,
 * "The repack cache", has the format, the key and the threat model).
 *
 * One file per model file and CPU kind, DIR/<32 hex>.x16, little-endian:
 *
 *   0    magic "TERNX16\0"
 *   8    u32 format version (1)
 *   12   u32 n: matrices in the payload
 *   16   u8  key[32]        (below); a file for anything else is rebuilt
 *   48   u64 payload offset P (4096, or 2 MiB for a payload of 8 MiB or
 *            more, so that the payload can sit on 2 MiB boundaries)
 *   56   u64 payload bytes
 *   64   u64 the model file's size, 72 mtime s, 80 mtime ns, 88 inode,
 *   96   u64 device: what prune compares to find a cache whose model is
 *            gone or changed
 *   104  u64 payload checksum (tn_checksum64, seed 0x16)
 *   112  u32 path bytes L, 116 u32 reserved (0)
 *   120  u64 unused (0)
 *   128  n x {u64 offset in the payload, u64 bytes}
 *        L bytes: the model file's resolved path (no NUL)
 *        u64 checksum (tn_checksum64, seed 0) of every header byte before it
 *   P    the payload: what tn_weights_repack's storage holds, byte for byte
 *
 * The key is a SHA-256 over: this format's version, the CPU's kernel family
 * (tn_weight_repack_size depends on it), every part's identity (device,
 * inode, size, mtime, ctime), the GGUF tensor table (names, types, shapes,
 * offsets) and, for every matrix handed in, which tensor it is and its
 * shape. It is cheap (no weight byte is read): the weights themselves are
 * checked by repacking the first and last group of 16 rows of every matrix
 * from the file and comparing them with the cache's bytes at every load, so
 * that a layout changed by a newer Tern, or a file rewritten in place with
 * its old times, is caught and the cache rebuilt.
 *
 * Diagnostics are plain text (why[]): the cache never fails a load, it only
 * says on stderr why it fell back, so they are not translated messages. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tn-repack-cache.h"

#include "tn-internal.h"
#include "tn-session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define HUGE_2M ((size_t)2 << 20)
#define TMP_STALE_S (6 * 3600) /* a temp file older than this is a dead writer's */
#define DEFAULT_MAX_BYTES ((uint64_t)32 << 30)

static void why_set(tn_repack_cache_result *r, const char *fmt, ...) TN_PRINTF(2, 3);
static void why_set(tn_repack_cache_result *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ locations */

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
    }
    return s;
}

/* On by default since issue 23 (docs/QUANT.md, "Where"): unset (or empty),
 * at $XDG_CACHE_HOME/tern/repack else ~/.cache/tern/repack, with the
 * default's checks (its pages, room for experts). "1"/"on": the same place
 * without them; an absolute path: there, without them; "0"/"off": off.
 * Anything else (a relative path, "yes") is off: a variable someone set
 * and Tern does not understand must not make it write gigabytes into a
 * place nobody chose; `tern-cli doctor` says so. */
tn_repack_cache_setting tn_repack_cache_config(char **dir_out) {
    const char *e = getenv("TERN_REPACK_CACHE");
    tn_repack_cache_setting set = TN_REPACK_CACHE_DEFAULT;
    char *dir = NULL;
    if (e && e[0]) {
        if (!strcmp(e, "0") || !strcmp(e, "off"))
            set = TN_REPACK_CACHE_OFF_ASKED;
        else if (!strcmp(e, "1") || !strcmp(e, "on") || e[0] == '/')
            set = TN_REPACK_CACHE_ASKED;
        else
            set = TN_REPACK_CACHE_NOT_UNDERSTOOD;
    }
    if (set == TN_REPACK_CACHE_ASKED && e[0] == '/') {
        dir = strdup(e);
    } else if (set == TN_REPACK_CACHE_DEFAULT || set == TN_REPACK_CACHE_ASKED) {
        const char *xdg = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        if (xdg && xdg[0] == '/') /* the XDG spec: a relative value is ignored */
            dir = join(xdg, "/tern/repack");
        else if (home && home[0] == '/')
            dir = join(home, "/.cache/tern/repack");
    }
    if (dir_out)
        *dir_out = dir;
    else
        free(dir);
    return set;
}

char *tn_repack_cache_dir(void) {
    char *dir = NULL;
    tn_repack_cache_config(&dir);
    return dir;
}

/* ------------------------------------------------------------ pages */

/* Where the file system gives the page cache no 2 MiB folios (ext4 before
 * Linux 6.16, so Debian 12's 6.1) the mapped cache runs on 4 KiB pages,
 * and dense decode measured about a third slower than the private copy in
 * transparent huge pages (docs/PERFORMANCE.md, "Pages"). The default
 * setting checks, before it writes a file whose payload is 8 MiB or more
 * (the size from which it sits on 2 MiB boundaries, as the private copy
 * does), with a probe file of 4 MiB in the directory (probe_dir_pages),
 * and remembers the answer in DIR/pages, keyed by the directory's file
 * system and the kernel release, so that later loads do not check again.
 * Before, not after: checking the cache file itself meant writing a file
 * of about the model's size only to delete it where the pages are 4 KiB. */
#define PAGES_FILE "pages"

static tn_repack_pages forced_pages;

static int write_at(int fd, const void *data, size_t n, uint64_t off);

void tn_repack_cache_force_pages(tn_repack_pages v) { forced_pages = v; }

/* The marker's text up to the verdict, for dir's file system and this
 * kernel. */
static bool pages_key(const char *dir, char *out, size_t size) {
    struct stat st;
    struct statfs sf;
    struct utsname u;
    if (stat(dir, &st) != 0 || statfs(dir, &sf) != 0 || uname(&u) != 0)
        return false;
    snprintf(out, size, "tern repack pages 1\ndevice %llu\nfstype %llx\nkernel %s\npages ",
             (unsigned long long)st.st_dev, (unsigned long long)sf.f_type, u.release);
    return true;
}

tn_repack_pages tn_repack_cache_pages(const char *dir) {
    char key[512], path[PATH_MAX], buf[600];
    if (!dir || !pages_key(dir, key, sizeof key))
        return TN_REPACK_PAGES_UNKNOWN;
    snprintf(path, sizeof path, "%s/" PAGES_FILE, dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0)
        return TN_REPACK_PAGES_UNKNOWN;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    const size_t kl = strlen(key);
    if (k <= 0 || (size_t)k < kl || memcmp(buf, key, kl) != 0)
        return TN_REPACK_PAGES_UNKNOWN; /* another kernel or file system: check again */
    buf[k] = '\0';
    return !strcmp(buf + kl, "2m\n")   ? TN_REPACK_PAGES_2M
           : !strcmp(buf + kl, "4k\n") ? TN_REPACK_PAGES_4K
                                       : TN_REPACK_PAGES_UNKNOWN;
}

/* Best effort: without the marker the next load checks again. */
static void pages_record(const char *dir, tn_repack_pages v) {
    char key[512], path[PATH_MAX];
    if (tn_repack_cache_pages(dir) == v || !pages_key(dir, key, sizeof key))
        return;
    snprintf(path, sizeof path, "%s/" PAGES_FILE, dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    char text[600];
    const int n = snprintf(text, sizeof text, "%s%s\n", key, v == TN_REPACK_PAGES_4K ? "4k" : "2m");
    const bool bad = n <= 0 || write_at(fd, text, (size_t)n, 0) != 0;
    close(fd);
    if (bad)
        unlink(path);
}

/* Whether a private copy would get 2 MiB pages: not with TERN_THP=0, nor
 * with transparent huge pages "never" (or absent from the kernel). Then
 * the cache's pages cost nothing against it, and are not checked. */
static bool private_gets_huge_pages(void) {
    const char *thp = getenv("TERN_THP");
    if (thp && *thp == '0')
        return false;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
    char b[128] = "";
    if (!f)
        return false;
    if (!fgets(b, sizeof b, f))
        b[0] = '\0';
    fclose(f);
    return b[0] && !strstr(b, "[never]");
}

/* FilePmdMapped of the mapping that holds addr, from /proc/self/smaps
 * (read up to that mapping only): 1 when some of it is mapped in 2 MiB
 * pages, 0 when none, -1 when it cannot be told (no /proc, no THP in the
 * kernel: no such field). */
static int pmd_mapped(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -1;
    char line[4096];
    bool in = false;
    int res = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        long kb;
        if (line[strspn(line, "0123456789abcdef")] == '-' &&
            sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            if (in)
                break;
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        } else if (in && sscanf(line, "FilePmdMapped: %ld kB", &kb) == 1) {
            res = kb > 0;
            break;
        }
    }
    fclose(f);
    return res;
}

static void *map_file_as(int fd, uint64_t size, uint64_t payload_off, int prot);

/* The check: a probe file of 4 MiB written into dir (unnamed where the
 * file system has O_TMPFILE, else unlinked at once), synced and dropped
 * from the page cache, mapped as a cache file is (2 MiB aligned,
 * MADV_HUGEPAGE) and read again: on a file system with large folios the
 * read brings one 2 MiB folio that the kernel maps whole, which
 * FilePmdMapped of that mapping shows. The answer is the file system's
 * (it is what test-repack-cache's own probe compares with the verdict);
 * it costs a 4 MiB write and read once per directory, file system and
 * kernel. UNKNOWN when it cannot be told (no room, no smaps field). */
static tn_repack_pages probe_dir_pages(const char *dir) {
    if (forced_pages != TN_REPACK_PAGES_UNKNOWN)
        return forced_pages;
    const size_t size = 2 * HUGE_2M;
    int fd = -1;
#ifdef O_TMPFILE
    fd = open(dir, O_RDWR | O_TMPFILE | O_CLOEXEC, 0600);
#endif
    if (fd < 0) {
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof tmp, "%s/.pages-probe.XXXXXX", dir);
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
            return TN_REPACK_PAGES_UNKNOWN;
        unlink(tmp);
    }
    tn_repack_pages v = TN_REPACK_PAGES_UNKNOWN;
    uint8_t *block = calloc(1, HUGE_2M);
    bool ok = block && write_at(fd, block, HUGE_2M, 0) == 0 &&
              write_at(fd, block, HUGE_2M, HUGE_2M) == 0 && fdatasync(fd) == 0 &&
              posix_fadvise(fd, 0, (off_t)size, POSIX_FADV_DONTNEED) == 0;
    free(block);
    uint8_t *m = ok ? map_file_as(fd, size, 0, PROT_READ) : NULL;
    if (m) {
        (void)*(volatile const uint8_t *)m;
        const int pmd = pmd_mapped(m);
        v = pmd < 0 ? TN_REPACK_PAGES_UNKNOWN : pmd ? TN_REPACK_PAGES_2M : TN_REPACK_PAGES_4K;
        munmap(m, size);
    }
    close(fd);
    return v;
}

static void hex(const uint8_t *b, int n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static void sha_u64(tn_sha256 *c, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    tn_sha256_update(c, b, 8);
}

static void sha_bytes(tn_sha256 *c, const void *p, size_t n) {
    sha_u64(c, n);
    tn_sha256_update(c, p, n);
}

/* The name depends on where the model is and on the CPU kind, not on its
 * contents: a model replaced at the same path replaces its cache file
 * instead of leaving the old one behind. */
int tn_repack_cache_name(const char *model_path, char *out, size_t size) {
    char resolved[PATH_MAX];
    if (!model_path || size < 37)
        return TN_ERR_INVALID;
    const char *p = realpath(model_path, resolved) ? resolved : model_path;
    tn_sha256 c;
    tn_sha256_init(&c);
    sha_bytes(&c, "tern repack cache name", 22);
    sha_bytes(&c, p, strlen(p));
    const char *isa = tn_isa_name(tn_isa_best());
    sha_bytes(&c, isa, strlen(isa));
    uint8_t h[32];
    tn_sha256_final(&c, h);
    hex(h, 16, out);
    memcpy(out + 32, ".x16", 5);
    return TN_OK;
}

/* mkdir -p, 0700 (weights of the user's models are the user's business). */
static int make_dirs(const char *dir) {
    char *p = strdup(dir);
    if (!p)
        return ENOMEM;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            free(p);
            return e;
        }
        *s = saved;
        if (saved == '\0')
            break;
    }
    free(p);
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* ------------------------------------------------------------ the plan */

typedef struct entry {
    int w;          /* index in ws */
    uint64_t off;   /* in the payload */
    uint64_t bytes; /* tn_weight_repack_size */
} entry;

typedef struct plan {
    entry *e;
    int n;
    int *alias; /* tn_weights_aliases' of ws, taken before any repack */
    int file_only; /* ws[file_only..) go only into the file (experts), never private */
    uint64_t payload;     /* bytes, as tn_weights_repack's total */
    uint64_t payload_off; /* P */
    uint8_t key[32];
    char model[PATH_MAX];
    struct stat model_st; /* the first part's */
    size_t header_bytes;  /* up to and with the header checksum */
    uint64_t copy_out;    /* copied out of the mapped file after it (copy_out_bytes) */
} plan;

/* The tensor of g that holds p, or -1. */
static int64_t tensor_of(const tn_gguf *g, const void *p, uint64_t *within) {
    const int64_t nt = tn_gguf_n_tensors(g);
    for (int64_t t = 0; t < nt; t++) {
        const tn_gguf_tensor *ti = tn_gguf_tensor_at(g, t);
        const uint8_t *d = ti->data;
        if (d && (const uint8_t *)p >= d && (const uint8_t *)p < d + ti->nbytes) {
            *within = (uint64_t)((const uint8_t *)p - d);
            return t;
        }
    }
    return -1;
}

static void sha_stat(tn_sha256 *c, const struct stat *st) {
    sha_u64(c, (uint64_t)st->st_dev);
    sha_u64(c, (uint64_t)st->st_ino);
    sha_u64(c, (uint64_t)st->st_size);
    sha_u64(c, (uint64_t)st->st_mtim.tv_sec);
    sha_u64(c, (uint64_t)st->st_mtim.tv_nsec);
    /* ctime too: `cp -p` over the file (same inode, old mtime) moves it. */
    sha_u64(c, (uint64_t)st->st_ctim.tv_sec);
    sha_u64(c, (uint64_t)st->st_ctim.tv_nsec);
}

/* Where a payload of this many bytes begins in its file: at 2 MiB where
 * it is large enough for those pages, else at the next 4 KiB (the header
 * is never empty: a payload at 2 MiB is one this rule put there). */
static size_t payload_align(uint64_t payload) { return payload >= 4 * HUGE_2M ? HUGE_2M : 4096; }

/* Offsets as tn_weights_repack lays its storage out (checked against it
 * after a build: a plan that disagrees is never written), and the key. */
static bool make_plan(tn_weight *const *ws, int n, const tn_gguf *g, plan *p,
                      tn_repack_cache_result *r) {
    p->e = calloc((size_t)(n > 0 ? n : 1), sizeof *p->e);
    p->alias = malloc((size_t)(n > 0 ? n : 1) * sizeof *p->alias);
    bool mixed = false;
    if (!p->e || !p->alias || !tn_weights_aliases(ws, n, p->alias, &mixed)) {
        why_set(r, "out of memory");
        return false;
    }
    const char *path = tn_gguf_path(g);
    if (!realpath(path, p->model) || stat(p->model, &p->model_st) != 0) {
        why_set(r, "%s: cannot stat the model file: %s", path, strerror(errno));
        return false;
    }
    tn_sha256 c;
    tn_sha256_init(&c);
    sha_bytes(&c, "tern repack cache", 17);
    sha_u64(&c, TN_REPACK_CACHE_VERSION);
    const char *isa = tn_isa_name(tn_isa_best());
    sha_bytes(&c, isa, strlen(isa));
    const int32_t parts = tn_gguf_n_parts(g);
    sha_u64(&c, (uint64_t)parts);
    for (int32_t k = 0; k < parts; k++) {
        const char *pp = tn_gguf_part_path(g, k);
        struct stat st;
        if (!pp || stat(pp, &st) != 0) {
            why_set(r, "%s: cannot stat part %d of the model: %s", path, k + 1,
                    pp ? strerror(errno) : "unknown");
            return false;
        }
        sha_stat(&c, &st);
    }
    const int64_t nt = tn_gguf_n_tensors(g);
    sha_u64(&c, (uint64_t)nt);
    for (int64_t t = 0; t < nt; t++) {
        const tn_gguf_tensor *ti = tn_gguf_tensor_at(g, t);
        sha_bytes(&c, ti->name.ptr, (size_t)ti->name.len);
        sha_u64(&c, ti->type);
        sha_u64(&c, ti->n_dims);
        for (int d = 0; d < TN_MAX_DIMS; d++)
            sha_u64(&c, ti->ne[d]);
        sha_u64(&c, ti->offset);
        sha_u64(&c, ti->part);
        sha_u64(&c, ti->nbytes);
    }
    sha_u64(&c, (uint64_t)n);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const tn_weight *w = ws[i];
        uint64_t within = 0;
        const int64_t t = tensor_of(g, w->data, &within);
        if (t < 0 || w->layout != TN_LAYOUT_ROWS) {
            why_set(r, "%s: a matrix is not read from the file", path);
            return false;
        }
        if (mixed) {
            why_set(r, "%s: two matrices of different shapes share their data", path);
            return false;
        }
        const size_t size = p->alias[i] != i ? 0 : tn_weight_repack_size(w);
        sha_u64(&c, (uint64_t)t);
        sha_u64(&c, within);
        sha_u64(&c, w->type);
        sha_u64(&c, (uint64_t)w->rows);
        sha_u64(&c, (uint64_t)w->cols);
        sha_u64(&c, w->row_bytes);
        sha_u64(&c, size);
        if (!size)
            continue;
        p->e[p->n++] = (entry){.w = i, .off = off, .bytes = size};
        off += (size + 63) / 64 * 64;
    }
    tn_sha256_final(&c, p->key);
    p->payload = off;
    p->header_bytes = TN_REPACK_CACHE_FIXED + 16 * (size_t)p->n + strlen(p->model) + 8;
    const size_t align = payload_align(off);
    p->payload_off = (p->header_bytes + align - 1) / align * align;
    return true;
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static uint8_t *header_encode(const plan *p, uint64_t payload_checksum) {
    uint8_t *h = calloc(1, p->header_bytes);
    if (!h)
        return NULL;
    memcpy(h, TN_REPACK_CACHE_MAGIC, 8);
    put_u32(h + 8, TN_REPACK_CACHE_VERSION);
    put_u32(h + 12, (uint32_t)p->n);
    memcpy(h + 16, p->key, 32);
    put_u64(h + 48, p->payload_off);
    put_u64(h + 56, p->payload);
    put_u64(h + 64, (uint64_t)p->model_st.st_size);
    put_u64(h + 72, (uint64_t)p->model_st.st_mtim.tv_sec);
    put_u64(h + 80, (uint64_t)p->model_st.st_mtim.tv_nsec);
    put_u64(h + 88, (uint64_t)p->model_st.st_ino);
    put_u64(h + 96, (uint64_t)p->model_st.st_dev);
    put_u64(h + 104, payload_checksum);
    const size_t L = strlen(p->model);
    put_u32(h + 112, (uint32_t)L);
    uint8_t *q = h + TN_REPACK_CACHE_FIXED;
    for (int i = 0; i < p->n; i++, q += 16) {
        put_u64(q, p->e[i].off);
        put_u64(q + 8, p->e[i].bytes);
    }
    memcpy(q, p->model, L);
    q += L;
    put_u64(q, tn_checksum64(h, (size_t)(q - h), 0));
    return h;
}

/* ------------------------------------------------------------ reading */

typedef enum { FILE_OK, FILE_ABSENT, FILE_BAD, FILE_BLOCKED } file_state;

/* Opens path and checks its header against the plan. FILE_OK: *fd is open
 * and the size is right. FILE_BAD: something is there that is not this
 * cache (replace it). FILE_BLOCKED: something is there that a rename
 * cannot replace (a directory), or the file cannot be opened. */
static file_state open_valid(const char *path, const plan *p, int *fd_out, uint64_t *size_out,
                             tn_repack_cache_result *r) {
    *fd_out = -1;
    /* O_NONBLOCK: a FIFO put where the file belongs would block open() for
     * ever; O_NOFOLLOW: a symbolic link is not this cache's file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return FILE_ABSENT;
        if (e == ELOOP) {
            why_set(r, "%s: a symbolic link, not a cache file", path);
            return FILE_BAD;
        }
        if (e == EISDIR) {
            why_set(r, "%s: a directory is in the way", path);
            return FILE_BLOCKED;
        }
        why_set(r, "%s: cannot open: %s", path, strerror(e));
        /* A file we may not read can still be renamed over. */
        return e == EACCES || e == EPERM ? FILE_BAD : FILE_BLOCKED;
    }
    struct stat st;
    file_state bad = FILE_BAD;
    if (fstat(fd, &st) != 0) {
        why_set(r, "%s: cannot stat: %s", path, strerror(errno));
        bad = FILE_BLOCKED;
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        why_set(r, "%s: a directory is in the way", path);
        bad = FILE_BLOCKED;
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        why_set(r, "%s: not a regular file", path);
        goto fail;
    }
    /* Another user's file in our directory could hold any weights. */
    if (st.st_uid != geteuid()) {
        why_set(r, "%s: owned by another user", path);
        goto fail;
    }
    uint8_t fixed[TN_REPACK_CACHE_FIXED];
    if ((uint64_t)st.st_size < sizeof fixed || pread(fd, fixed, sizeof fixed, 0) != (ssize_t)sizeof fixed) {
        why_set(r, "%s: truncated (%lld bytes)", path, (long long)st.st_size);
        goto fail;
    }
    if (memcmp(fixed, TN_REPACK_CACHE_MAGIC, 8) != 0) {
        why_set(r, "%s: not a Tern repack cache file", path);
        goto fail;
    }
    if (tn_rd_u32(fixed + 8) != TN_REPACK_CACHE_VERSION) {
        why_set(r, "%s: format version %u, this Tern writes %u", path, tn_rd_u32(fixed + 8),
                TN_REPACK_CACHE_VERSION);
        goto fail;
    }
    if (memcmp(fixed + 16, p->key, 32) != 0) {
        why_set(r, "%s: made from another model file, or by another Tern or CPU", path);
        goto fail;
    }
    /* The key matches: the rest must be what this plan would write, byte
     * for byte (header) and in size (payload). */
    uint8_t *want = header_encode(p, tn_rd_u64(fixed + 104));
    uint8_t *have = want ? malloc(p->header_bytes) : NULL;
    bool same = want && have &&
                (uint64_t)st.st_size >= p->header_bytes &&
                pread(fd, have, p->header_bytes, 0) == (ssize_t)p->header_bytes &&
                memcmp(want, have, p->header_bytes) == 0;
    free(want);
    free(have);
    if (!same) {
        why_set(r, "%s: its header does not match the model", path);
        goto fail;
    }
    uint64_t expect = p->payload_off + p->payload;
    if ((uint64_t)st.st_size != expect) {
        why_set(r, "%s: %s (%lld bytes, expected %llu)", path,
                (uint64_t)st.st_size < expect ? "truncated" : "trailing bytes",
                (long long)st.st_size, (unsigned long long)expect);
        goto fail;
    }
    *fd_out = fd;
    *size_out = expect;
    return FILE_OK;
fail:
    close(fd);
    return bad;
}

/* A read-only shared mapping of the whole file; the payload (at P, a
 * multiple of 2 MiB when the payload is large) on a 2 MiB boundary, so
 * that the kernel can map page-cache folios of that size whole. */
static void *map_file_as(int fd, uint64_t size, uint64_t payload_off, int prot) {
    if (size > SIZE_MAX - HUGE_2M)
        return NULL;
    if (payload_off % HUGE_2M != 0) {
        void *m = mmap(NULL, (size_t)size, prot, MAP_SHARED, fd, 0);
        return m == MAP_FAILED ? NULL : m;
    }
    const size_t span = (size_t)size + HUGE_2M;
    uint8_t *res = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (res == MAP_FAILED)
        return NULL;
    uint8_t *at = (uint8_t *)(((uintptr_t)res + HUGE_2M - 1) & ~(uintptr_t)(HUGE_2M - 1));
    void *m = mmap(at, (size_t)size, prot, MAP_SHARED | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) {
        munmap(res, span);
        return NULL;
    }
    if (at > res)
        munmap(res, (size_t)(at - res));
    const size_t tail = (size_t)((res + span) - (at + size));
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *end = (uint8_t *)(((uintptr_t)(at + size) + page - 1) & ~(uintptr_t)(page - 1));
    if (tail && end < res + span)
        munmap(end, (size_t)((res + span) - end));
#ifdef MADV_HUGEPAGE
    /* A hint: where the file system keeps large folios, faults may then map
     * 2 MiB at once (docs/PERFORMANCE.md has what it measured). */
    madvise(at, (size_t)size, MADV_HUGEPAGE);
#endif
    return at;
}

static void *map_file(int fd, uint64_t size, uint64_t payload_off) {
    return map_file_as(fd, size, payload_off, PROT_READ);
}

void tn_repack_cache_unmap(void *map, size_t bytes) {
    if (map)
        munmap(map, bytes);
}

/* A pass over the model's mapping (and `extra`, a cache file's, when
 * given) under tn_guarded_read: a file truncated meanwhile fails the pass
 * with r->fault (TN_ERR_IO) instead of a SIGBUS. Without memory for the
 * list of spans the pass runs unguarded, as it did before. */
static int guarded(const tn_gguf *g, const tn_read_span *extra, const char *pass,
                   void (*fn)(void *), void *arg, tn_repack_cache_result *r) {
    int n = 0;
    tn_read_span *spans = tn_gguf_read_spans(g, &n);
    tn_read_span *all = spans && extra ? realloc(spans, ((size_t)n + 1) * sizeof *spans) : spans;
    if (!all) {
        free(spans);
        fn(arg);
        return TN_OK;
    }
    if (extra)
        all[n++] = *extra;
    int rc = tn_guarded_read(all, n, pass, fn, arg, &r->fault);
    free(all);
    return rc;
}

typedef struct repack_pass {
    tn_weight *const *ws;
    int n;
    const int *alias;
    uint8_t *buf;
    uint64_t pending; /* the progress of the piece being repacked */
    /* A new cache file (build_file): its descriptor, where buf begins in
     * it, what the pass will checksum and copy out after it (counted in the
     * progress from the start), and the payload sent to the disk so far.
     * fd < 0: private memory. */
    int fd;
    uint64_t buf_off, checksum_share;
    uint64_t sent;
} repack_pass;

/* What the new file's checksum counts in the load's progress: a quarter
 * of its bytes, since it reads them back at about four times the repack's
 * rate (an E4B-shaped Q4_0: 2.6 GB repacked in 1.7 s, summed in 0.45 s). */
#define CHECKSUM_SHARE(bytes) ((bytes) / 4)

/* What the copy of the dense matrices out of a mapped file (4 KiB pages,
 * small_pages) counts: a quarter of its bytes, as the checksum, since it
 * reads at memory speed what the repack just wrote. On a hit it is all
 * that is left of the load, so its weight there does not matter. */
#define COPY_SHARE(bytes) ((bytes) / 4)

/* What a new cache file's passes after its repack count in the load's
 * progress: its checksum, and the copy of copy_out bytes out of it. The
 * one sum for build_file's pass and for the estimates made before it
 * (tn_repack_cache_new_file_work). */
static uint64_t after_repack_share(uint64_t payload, uint64_t copy_out) {
    return CHECKSUM_SHARE(payload) + COPY_SHARE(copy_out);
}

/* A new cache file's written payload goes to the disk in pieces of this
 * size during the repack, so that the fsync at its end does not wait for
 * all of it (2.6 GB: 0.85 s of a load at 0.99 before). */
#define WRITEBACK_PIECE ((uint64_t)64 << 20)

/* What `rows` rows of matrix i count in the load's progress: their bytes,
 * but none where it shares an earlier one's (a tied LM head is not
 * repacked twice). */
static uint64_t repack_step_bytes(const repack_pass *rp, int i, int64_t rows) {
    const tn_weight *w = rp->ws[i];
    return rp->alias[i] == i && tn_weight_repack_size(w) > 0
               ? (uint64_t)w->row_bytes * (uint64_t)rows
               : 0;
}

/* The repack's pieces: a hundredth of the pass, as the bar moves in steps
 * of 1 %, so that no matrix holds it (an E4B-shaped Q4_0's LM head, 377 MB
 * whole, stood still for 0.21 s at 0.85: docs/PERFORMANCE.md), and 64 MiB
 * at most, as the other passes' pieces. */
#define REPACK_PIECE_MAX ((uint64_t)64 << 20)

static size_t repack_piece(uint64_t pass_bytes) {
    const uint64_t piece = pass_bytes / 100;
    return (size_t)(piece > REPACK_PIECE_MAX ? REPACK_PIECE_MAX : piece > 0 ? piece : 1);
}

/* The pieces are written one after another into buf, so the first
 * `final` bytes of it are final when the next begins: that part starts on
 * its way to the disk (asynchronously; the pages stay cached for the
 * checksum). Only whole pieces of the file, and never the 2 MiB (a large
 * folio, at most) that the next piece writes into, whose pages would then
 * wait for their writeback on its next store. After each piece rather
 * than each matrix: the LM head's 400 MB (E4B-shaped Q4_0), sent at once
 * after it, held the bar for 0.16 s. */
static void repack_writeback(repack_pass *rp, size_t final) {
    if (rp->fd < 0)
        return;
    const uint64_t end = (rp->buf_off + final) / HUGE_2M * HUGE_2M;
    if (end < rp->buf_off + rp->sent + WRITEBACK_PIECE)
        return;
    /* A hint: where it fails (a file system without it) the fsync does it all. */
    sync_file_range(rp->fd, (off64_t)(rp->buf_off + rp->sent),
                    (off64_t)(end - rp->buf_off - rp->sent), SYNC_FILE_RANGE_WRITE);
    rp->sent = end - rp->buf_off;
}

/* Each piece is a cancel point, and counts once it is repacked: counted
 * at its start, the last and largest matrix (the LM head) held the bar
 * near its end for the whole of its repack. */
static void repack_step(void *user, int i, int64_t rows, size_t final) {
    repack_pass *rp = user;
    tn_load_progress_add(rp->pending);
    repack_writeback(rp, final);
    rp->pending = repack_step_bytes(rp, i, rows);
    tn_load_poll();
}

static void repack_pass_run(void *arg) {
    repack_pass *rp = arg;
    uint64_t bytes = 0;
    for (int i = 0; i < rp->n; i++)
        bytes += repack_step_bytes(rp, i, rp->ws[i]->rows);
    tn_load_progress_repack_begins(bytes + rp->checksum_share);
    rp->pending = 0;
    tn_weights_repack_into(rp->ws, rp->n, rp->alias, true, rp->buf, repack_piece(bytes),
                           repack_step, rp);
    tn_load_progress_add(rp->pending);
}

/* tn_weights_repack of ws[0..n) with release_originals, its reads of the
 * model file guarded: every allocation is made before the pass and freed
 * here after a fault (the weights are then garbage: the load fails). */
static int repack_private(tn_weight *const *ws, int n, const tn_gguf *g, void **storage,
                          size_t *bytes, tn_repack_cache_result *r) {
    *storage = NULL;
    *bytes = 0;
    int *alias = malloc((size_t)(n > 0 ? n : 1) * sizeof *alias);
    if (!alias || !tn_weights_aliases(ws, n, alias, NULL)) {
        free(alias);
        return TN_ERR_NOMEM;
    }
    const size_t total = tn_weights_repack_bytes(ws, n, alias);
    uint8_t *buf = total ? tn_weights_storage_alloc(total) : NULL;
    if (total && !buf) {
        free(alias);
        return TN_ERR_NOMEM;
    }
    int rc = TN_OK;
    if (total) {
        repack_pass rp = {.ws = ws, .n = n, .alias = alias, .buf = buf, .fd = -1};
        rc = guarded(g, NULL, "repack", repack_pass_run, &rp, r);
    }
    free(alias);
    if (rc != TN_OK) {
        free(buf);
        return rc;
    }
    *storage = buf;
    *bytes = total;
    return TN_OK;
}

/* The first and the last group of 16 rows of every matrix, repacked again
 * from the file and compared with the cache's bytes: a layout changed by
 * another Tern, or weights changed without the file's times changing, show
 * here. */
static bool spot_checked(const plan *p, int i) {
    /* Experts (file-only) are thousands of matrices: one in 64 and the
     * last, which still sees another layout or a rewritten file, at a
     * read of a few MB of the model rather than 4 % of it. */
    return p->e[i].w < p->file_only || i % 64 == 0 || i == p->n - 1;
}

typedef struct spot_pass {
    tn_weight *const *ws;
    const plan *p;
    const uint8_t *payload;
    uint8_t *tmp; /* the caller's, tmp_size bytes */
    size_t tmp_size;
    int differs; /* the result: the first entry that differs, or -1 */
} spot_pass;

/* Reads the model file and the cache file: guarded (spot_check). */
static void spot_pass_run(void *arg) {
    spot_pass *sp = arg;
    const plan *p = sp->p;
    for (int i = 0; i < p->n && sp->differs < 0; i++) {
        if (!spot_checked(p, i))
            continue;
        const tn_weight *w = sp->ws[p->e[i].w];
        const size_t group = p->e[i].bytes / (size_t)((w->rows + 15) / 16);
        const int64_t last = (w->rows - 1) / 16 * 16;
        const int64_t firsts[2] = {0, last};
        bool ok = true;
        for (int k = 0; k < (last ? 2 : 1) && ok; k++) {
            const int64_t r0 = firsts[k];
            const uint8_t *cached = sp->payload + p->e[i].off + (size_t)(r0 / 16) * group;
            tn_weight sub = *w, out;
            sub.rows = w->rows - r0 < 16 ? w->rows - r0 : 16;
            sub.data = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
            ok = tn_weight_repack(&sub, sp->tmp, sp->tmp_size, &out) == TN_OK &&
                 memcmp(sp->tmp, cached, group) == 0;
        }
        if (!ok)
            sp->differs = i;
    }
}

/* 1: the cache agrees; 0: it differs, or no memory (why set); -1: a file
 * shrank while read (r->fault). map: the cache file's mapping, map_bytes
 * long; g: the model. */
static int spot_check(tn_weight *const *ws, const plan *p, const tn_gguf *g, const uint8_t *map,
                      size_t map_bytes, tn_repack_cache_result *r) {
    /* The scratch for the largest group is allocated before the guarded
     * pass, so that a fault in it loses nothing. */
    size_t tmp_size = 0;
    for (int i = 0; i < p->n; i++)
        if (spot_checked(p, i)) {
            const tn_weight *w = ws[p->e[i].w];
            const size_t group = p->e[i].bytes / (size_t)((w->rows + 15) / 16);
            if (group > tmp_size)
                tmp_size = group;
        }
    tmp_size = (tmp_size + 63) / 64 * 64;
    uint8_t *tmp = tmp_size ? aligned_alloc(64, tmp_size) : NULL;
    if (tmp_size && !tmp) {
        why_set(r, "out of memory");
        return 0;
    }
    spot_pass sp = {.ws = ws, .p = p, .payload = map + p->payload_off, .tmp = tmp,
                    .tmp_size = tmp_size, .differs = -1};
    const tn_read_span cache = {.base = map, .size = map_bytes, .path = r->path};
    int rc = guarded(g, &cache, "cache-check", spot_pass_run, &sp, r);
    free(tmp);
    if (rc != TN_OK)
        return -1;
    if (sp.differs >= 0)
        why_set(r, "%s: its weights differ from the model file's (a file changed in place, "
                   "or another layout)",
                r->path);
    return sp.differs < 0;
}

/* Points the weights into the payload, as tn_weights_repack would have. */
/* A matrix that shares its first holder's data takes its new place too. */
static void point_aliases(tn_weight *const *ws, int n, const plan *p) {
    for (int i = 0; i < n; i++) {
        const int a = p->alias[i];
        if (a != i && ws[a]->layout == TN_LAYOUT_X16)
            *ws[i] = *ws[a];
    }
}

static void point_weights(tn_weight *const *ws, int n, const plan *p, const uint8_t *payload) {
    for (int i = 0; i < p->n; i++) {
        tn_weight *w = ws[p->e[i].w];
        w->data = payload + p->e[i].off;
        w->layout = TN_LAYOUT_X16;
    }
    point_aliases(ws, n, p);
}

/* The file's pages of the originals, no longer read (as repack.c does). */
static void drop_pages(const void *p, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~((uintptr_t)ps - 1);
    if (e > a)
        madvise((void *)a, e - a, MADV_DONTNEED);
}

/* Maps a valid file (fd) and checks its weights: 1 with the weights
 * pointing into it, 0 when it cannot serve (why set), -1 when a file
 * shrank while the check read it (r->fault; nothing mapped). */
static int use_file(int fd, uint64_t size, tn_weight *const *ws, int n, const plan *p,
                    const tn_gguf *g, tn_repack_cache_result *r) {
    uint8_t *m = map_file(fd, size, p->payload_off);
    if (!m) {
        why_set(r, "%s: cannot map: %s", r->path, strerror(errno));
        return 0;
    }
    const int agree = spot_check(ws, p, g, m, (size_t)size, r);
    if (agree <= 0) {
        munmap(m, (size_t)size);
        return agree;
    }
    const void **orig = malloc((size_t)(p->n ? p->n : 1) * sizeof *orig);
    size_t *orig_bytes = malloc((size_t)(p->n ? p->n : 1) * sizeof *orig_bytes);
    for (int i = 0; orig && orig_bytes && i < p->n; i++) {
        orig[i] = ws[p->e[i].w]->data;
        orig_bytes[i] = ws[p->e[i].w]->row_bytes * (size_t)ws[p->e[i].w]->rows;
    }
    point_weights(ws, n, p, m + p->payload_off);
    for (int i = 0; orig && orig_bytes && i < p->n; i++)
        drop_pages(orig[i], orig_bytes[i]);
    free(orig);
    free(orig_bytes);
    r->map = m;
    r->map_bytes = (size_t)size;
    r->bytes = (size_t)p->payload;
    return 1;
}

/* ------------------------------------------------------------ writing */

/* Whether a file may reach `end` bytes under this process's file size
 * limit (ulimit -f, RLIMIT_FSIZE): a write or a posix_fallocate past it
 * raises SIGXFSZ, whose default action ends the process (with a core
 * dump) rather than failing the call, so every file this cache writes
 * (the probe, the markers, the cache file) is checked first and is an
 * error (EFBIG) instead, as no room is. */
static bool under_fsize_limit(uint64_t end) {
    struct rlimit rl;
    return getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
           end <= (uint64_t)rl.rlim_cur;
}

static int write_at(int fd, const void *data, size_t n, uint64_t off) {
    const uint8_t *q = data;
    if (!under_fsize_limit(off + n))
        return EFBIG;
    while (n > 0) {
        /* 64 MiB at a time: one call per chunk keeps a huge write
         * interruptible and its error prompt. */
        size_t k = n < ((size_t)64 << 20) ? n : ((size_t)64 << 20);
        ssize_t w = pwrite(fd, q, k, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return EIO;
        q += w;
        off += (uint64_t)w;
        n -= (size_t)w;
    }
    return 0;
}

/* Moves the weights from the private storage to the same bytes in m. */
static void move_to_map(tn_weight *const *ws, int n, const plan *p, const uint8_t *payload) {
    for (int i = 0; i < p->n; i++)
        ws[p->e[i].w]->data = payload + p->e[i].off;
    point_aliases(ws, n, p);
}

typedef struct compare_pass {
    const uint8_t *theirs;
    const void *ours;
    size_t n;
    bool differ;
} compare_pass;

static void compare_pass_run(void *arg) {
    compare_pass *cp = arg;
    cp->differ = memcmp(cp->theirs, cp->ours, cp->n) != 0;
}

/* Someone else's valid file at r->path with exactly these payload bytes,
 * mapped; NULL when there is none (or it differs: then it is replaced).
 * Their file is read under tn_guarded_read: one cut short under the
 * comparison (being rewritten) is not these bytes either, and ours, whole,
 * replaces it; no SIGBUS. */
static uint8_t *map_theirs(const plan *p, const void *storage, tn_repack_cache_result *r,
                           uint64_t *size) {
    int fd = -1;
    tn_repack_cache_result scratch = {0};
    if (open_valid(r->path, p, &fd, size, &scratch) != FILE_OK)
        return NULL;
    uint8_t *m = map_file(fd, *size, p->payload_off);
    close(fd);
    if (!m)
        return NULL;
    const tn_read_span theirs = {.base = m, .size = (size_t)*size, .path = r->path};
    compare_pass cp = {.theirs = m + p->payload_off, .ours = storage, .n = (size_t)p->payload,
                       .differ = true};
    if (tn_guarded_read(&theirs, 1, "cache-theirs", compare_pass_run, &cp, &scratch.fault) !=
            TN_OK ||
        cp.differ) {
        munmap(m, (size_t)*size);
        m = NULL;
    }
    return m;
}

/* The payload checksum of a new cache file, a guarded pass (build_file),
 * in pieces: each is counted in the load's progress and is a cancel point
 * (a 17 GB mixture's file takes seconds). */
typedef struct checksum_pass {
    const uint8_t *payload;
    size_t bytes;
    uint64_t sum;
} checksum_pass;

static void checksum_piece_done(void *user, size_t bytes) {
    (void)user;
    tn_load_progress_add(CHECKSUM_SHARE(bytes));
    tn_load_poll();
}

static void checksum_pass_run(void *arg) {
    checksum_pass *cs = arg;
    cs->sum = tn_checksum64_pieces(cs->payload, cs->bytes, 0x16, (size_t)64 << 20,
                                   checksum_piece_done, NULL);
}

/* Repacks straight into a temporary file in the directory (its space
 * reserved first, so that a full disk is an error here and never a SIGBUS
 * in the repack), syncs it and renames it into place, so a reader sees the
 * whole file or none. Two processes that build at once each write their
 * own temporary file; the second to finish finds the first's file valid and
 * maps that one instead (both then share it). Writing through the mapping
 * keeps a payload larger than memory (a mixture's experts) out of private
 * memory. Returns 0, with ws untouched, when the file cannot be made;
 * after the repack a failure keeps the (unlinked) temporary mapping as the
 * storage: outcome PRIVATE with why set; 1 then and on success. -1 when
 * the model file shrank under the repack, or the temporary file under its
 * checksum (r->fault): the temporary file is gone, nothing is mapped, the
 * weights are garbage. */
static int build_file(tn_weight *const *ws, int n, const plan *p, const tn_gguf *g,
                      const char *dir, tn_repack_cache_result *r) {
    const size_t tmp_size = strlen(dir) + 64;
    char *tmp = malloc(tmp_size);
    if (!tmp) {
        why_set(r, "out of memory");
        return 0;
    }
    snprintf(tmp, tmp_size, "%s/.%.32s.XXXXXX", dir, strrchr(r->path, '/') + 1);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        why_set(r, "%s: cannot write in the cache directory: %s", dir, tn_write_cause(errno));
        free(tmp);
        return 0;
    }
    uint64_t size = p->payload_off + p->payload;
    int e = size > (uint64_t)INT64_MAX || !under_fsize_limit(size)
                ? EFBIG
                : posix_fallocate(fd, 0, (off_t)size);
    if (!e)
        e = tn_test_write_errno(r->path); /* tn_test_fail_writes */
    uint8_t *m = e ? NULL : map_file_as(fd, size, p->payload_off, PROT_READ | PROT_WRITE);
    if (!m) {
        if (e)
            why_set(r, "%s: cannot reserve %llu bytes for the cache file: %s", dir,
                    (unsigned long long)size, tn_write_cause(e));
        else
            why_set(r, "%s: cannot map: %s", tmp, strerror(errno));
        unlink(tmp);
        close(fd);
        free(tmp);
        return 0;
    }
    uint8_t *payload = m + p->payload_off;
    /* The pass that reads the whole model: a truncation meanwhile fails
     * the load (the temporary file, its mapping and fd go here; nothing
     * else is held across the pass). */
    repack_pass rp = {.ws = ws,
                      .n = n,
                      .alias = p->alias,
                      .buf = payload,
                      .fd = fd,
                      .buf_off = p->payload_off,
                      .checksum_share = after_repack_share(p->payload, p->copy_out)};
    if (guarded(g, NULL, "cache-write", repack_pass_run, &rp, r) != TN_OK) {
        munmap(m, (size_t)size);
        unlink(tmp);
        close(fd);
        free(tmp);
        return -1;
    }
    const tn_repack_cache_outcome outcome = r->outcome;
    r->outcome = TN_REPACK_CACHE_PRIVATE;
    r->map = m;
    r->map_bytes = (size_t)size;
    r->bytes = (size_t)p->payload;
    bool agree = true;
    for (int i = 0; i < p->n && agree; i++) {
        const tn_weight *w = ws[p->e[i].w];
        agree = w->layout == TN_LAYOUT_X16 && (const uint8_t *)w->data == payload + p->e[i].off;
    }
    e = 0;
    if (!agree) {
        why_set(r, "%s: the repacked layout is not the planned one; not cached", r->path);
        e = -1;
    }
    /* From here on nothing may write the weights. */
    mprotect(m, (size_t)size, PROT_READ);
    uint8_t *h = NULL;
    if (!e) {
        /* The checksum reads the whole temporary file back through its
         * mapping: another program cutting it short meanwhile (it is ours,
         * but in a directory others may write) fails the load like a model
         * cut short, naming the temporary file, instead of a SIGBUS. */
        checksum_pass cs = {.payload = payload, .bytes = (size_t)p->payload};
        const tn_read_span span = {.base = m, .size = (size_t)size, .path = tmp};
        if (tn_guarded_read(&span, 1, "cache-checksum", checksum_pass_run, &cs, &r->fault) !=
            TN_OK) {
            /* The weights point into the file: gone with it. */
            r->outcome = outcome;
            r->map = NULL;
            r->map_bytes = 0;
            r->bytes = 0;
            munmap(m, (size_t)size);
            unlink(tmp);
            close(fd);
            free(tmp);
            return -1;
        }
        h = header_encode(p, cs.sum);
        e = h ? write_at(fd, h, p->header_bytes, 0) : ENOMEM;
        free(h);
        if (!e && fsync(fd) != 0)
            e = errno;
        if (e)
            why_set(r, "%s: cannot write the cache file: %s", tmp, tn_write_cause(e));
    }
    uint64_t theirs_size = size;
    uint8_t *theirs = NULL;
    if (!e && (theirs = map_theirs(p, payload, r, &theirs_size))) {
        move_to_map(ws, n, p, theirs + p->payload_off); /* another process finished first */
        munmap(m, (size_t)size);
        r->map = theirs;
        r->map_bytes = (size_t)theirs_size;
        r->outcome = TN_REPACK_CACHE_HIT;
        r->hit = r->in_file = true;
    } else if (!e && rename(tmp, r->path) != 0) {
        why_set(r, "%s: cannot rename into place: %s", r->path, strerror(errno));
    } else if (!e) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd); /* the rename is durable only once the directory is */
            close(dfd);
        }
        r->outcome = TN_REPACK_CACHE_WRITTEN;
        r->in_file = true;
    }
    if (r->outcome != TN_REPACK_CACHE_WRITTEN)
        unlink(tmp);
    else
        r->why[0] = '\0';
    if (r->outcome == TN_REPACK_CACHE_HIT)
        r->why[0] = '\0';
    close(fd);
    free(tmp);
    return 1;
}

/* The file (when write_ok), else the private repack of ws[0..file_only):
 * the file-only weights (experts) then stay in the model file's layout. */
static int build(tn_weight *const *ws, int n, const plan *p, const tn_gguf *g, const char *dir,
                 tn_repack_cache_result *r, bool write_ok) {
    const int built = write_ok && p->payload > 0 ? build_file(ws, n, p, g, dir, r) : 0;
    if (built > 0)
        return TN_OK;
    if (built < 0)
        return TN_ERR_IO; /* the model shrank: no private repack could read it either */
    void *storage = NULL;
    size_t got = 0;
    int rc = repack_private(ws, p->file_only, g, &storage, &got, r);
    if (rc != TN_OK)
        return rc;
    r->outcome = storage ? TN_REPACK_CACHE_PRIVATE : TN_REPACK_CACHE_OFF;
    r->storage = storage;
    r->bytes = got;
    return TN_OK; /* why was set by the caller */
}

static void plan_free(plan *p) {
    free(p->e);
    free(p->alias);
    p->e = NULL;
    p->alias = NULL;
    p->n = 0;
}

/* The plan again for ws[0..n) only (the dense matrices: the experts left
 * in the model file's rows). */
static bool replan(tn_weight *const *ws, int n, const tn_gguf *g, plan *p,
                   tn_repack_cache_result *r) {
    plan_free(p);
    *p = (plan){.file_only = n};
    return make_plan(ws, n, g, p, r);
}

/* Bytes of the payload before the first expert: the dense matrices come
 * first (plan order is ws order). */
static uint64_t plan_dense_bytes(const plan *p) {
    for (int i = 0; i < p->n; i++)
        if (p->e[i].w >= p->file_only)
            return p->e[i].off;
    return p->payload;
}

static uint64_t env_mb(const char *name, uint64_t dflt) {
    const char *e = getenv(name);
    char *end = NULL;
    unsigned long long mb = e ? strtoull(e, &end, 10) : 0;
    return e && end != e && !*end && mb < (1ull << 40) ? (uint64_t)mb << 20 : dflt;
}

static uint64_t max_bytes_default(void) {
    return env_mb("TERN_REPACK_CACHE_MAX_MB", DEFAULT_MAX_BYTES);
}

static void gib(uint64_t b, char *out, size_t size) {
    if (b >= ((uint64_t)1 << 30))
        snprintf(out, size, "%.1f GiB", (double)b / (double)((uint64_t)1 << 30));
    else
        snprintf(out, size, "%.1f MiB", (double)b / (double)((uint64_t)1 << 20));
}

/* The default setting writes a mixture's experts (a second file of about
 * the model's size: 18 GB for Qwen3-30B-A3B) only when the file system
 * keeps, after the write, max(10 % of its size, 4 GiB) free
 * ($TERN_REPACK_CACHE_MIN_FREE_MB instead when set) and the file fits in
 * $TERN_REPACK_CACHE_MAX_MB; otherwise the experts stay in the model
 * file's rows (docs/QUANT.md, "Experts"). */
/* The verdict on the room for a mixture's experts is said once: PATH.room
 * (beside the cache file PATH) holds the reason last said, "max" or "free".
 * A load that finds the same reason again says nothing (the experts stay
 * out all the same: the room is checked at every load, so more free space
 * later lets them in); a load with room removes the marker, so a later
 * lack of room is said again, as is a change of reason.
 * tn_repack_cache_clear and a cache file's removal take the marker too.
 * Best effort, like DIR/pages: without it the line is said again. True
 * when `reason` was said before for PATH; records it otherwise. */
#define ROOM_SUFFIX ".room"

static bool room_told(const char *cache_path, const char *reason) {
    char path[PATH_MAX + 80], buf[16];
    snprintf(path, sizeof path, "%s" ROOM_SUFFIX, cache_path);
    const size_t rl = strlen(reason);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd >= 0) {
        ssize_t k = read(fd, buf, sizeof buf);
        close(fd);
        if (k == (ssize_t)rl + 1 && memcmp(buf, reason, rl) == 0 && buf[rl] == '\n')
            return true;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        char line[16];
        const int n = snprintf(line, sizeof line, "%s\n", reason);
        const bool bad = write_at(fd, line, (size_t)n, 0) != 0;
        close(fd);
        if (bad)
            unlink(path);
    }
    return false;
}

static void room_forget(const char *cache_path) {
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s" ROOM_SUFFIX, cache_path);
    unlink(path);
}

/* dir, or where it does not exist yet (an estimate before prepare's
 * make_dirs) its nearest existing parent, whose file system it will be
 * on, into path; false when none exists. */
static bool existing_dir(const char *dir, char *path, size_t size) {
    snprintf(path, size, "%s", dir);
    struct stat st;
    while (stat(path, &st) != 0) {
        char *slash = strrchr(path, '/');
        if (!slash || (slash == path && !path[1]))
            return false;
        slash[slash == path] = '\0'; /* "/a": "/" */
    }
    return true;
}

typedef enum room {
    ROOM_YES,
    ROOM_OVER_MAX, /* the file would be larger than TERN_REPACK_CACHE_MAX_MB */
    ROOM_NOT_FREE, /* it would leave less than the space to keep free */
} room;

static void (*ask_hook)(const char *what, void *user);
static void *ask_hook_user;

void tn_repack_cache_ask_hook(void (*fn)(const char *what, void *user), void *user) {
    ask_hook = fn;
    ask_hook_user = user;
}

static void asked(const char *what) {
    if (ask_hook)
        ask_hook(what, ask_hook_user);
}

/* The rule on the room for a cache file of `need` bytes with a mixture's
 * experts in dir, for prepare's choice (room_for_experts) and for the
 * estimate made before it (experts_taken). The file system is asked once
 * per outlook (o NULL: now). *avail, *keep: what the file system has and
 * must keep free (ROOM_NOT_FREE). */
static room room_for(const char *dir, uint64_t need, tn_repack_cache_outlook *o,
                     uint64_t *avail, uint64_t *keep) {
    if (need > max_bytes_default())
        return ROOM_OVER_MAX;
    tn_repack_cache_outlook now = {0};
    if (!o)
        o = &now;
    if (!o->space_asked) {
        char path[PATH_MAX];
        struct statvfs sv;
        o->space_asked = true;
        if (existing_dir(dir, path, sizeof path)) {
            asked("statvfs");
            if (statvfs(path, &sv) == 0) {
                o->space_known = true;
                o->space_size = (uint64_t)sv.f_blocks * sv.f_frsize;
                o->space_avail = (uint64_t)sv.f_bavail * sv.f_frsize;
            }
        }
    }
    if (!o->space_known)
        return ROOM_YES; /* cannot tell: posix_fallocate still refuses a full disk */
    const uint64_t size = o->space_size;
    *avail = o->space_avail;
    const uint64_t tenth = size / 10, four = (uint64_t)4 << 30;
    *keep = env_mb("TERN_REPACK_CACHE_MIN_FREE_MB", tenth > four ? tenth : four);
    return *avail >= need && *avail - need >= *keep ? ROOM_YES : ROOM_NOT_FREE;
}

static bool room_for_experts(const char *dir, const plan *p, tn_repack_cache_outlook *o,
                             tn_repack_cache_result *r) {
    const uint64_t need = p->payload_off + p->payload, max = max_bytes_default();
    uint64_t avail = 0, keep = 0;
    const room verdict = room_for(dir, need, o, &avail, &keep);
    char a[32], b[32], c[32];
    gib(need, a, sizeof a);
    if (verdict == ROOM_OVER_MAX) {
        if (room_told(r->path, "max"))
            return false;
        gib(max, b, sizeof b);
        snprintf(r->note, sizeof r->note,
                 "%s: with this mixture's experts the cache file would take %s, more than "
                 "TERN_REPACK_CACHE_MAX_MB allows (%s): the experts are read from the model file "
                 "in its own layout (TERN_REPACK_CACHE=%s writes them anyway)",
                 dir, a, b, dir);
        return false;
    }
    if (verdict == ROOM_YES) {
        room_forget(r->path);
        return true;
    }
    if (room_told(r->path, "free"))
        return false;
    gib(avail, b, sizeof b);
    gib(keep, c, sizeof c);
    snprintf(r->note, sizeof r->note,
             "%s: %s free; with this mixture's experts the cache file (%s) would leave less "
             "than %s: the experts are read from the model file in its own layout "
             "(TERN_REPACK_CACHE=%s writes them anyway)",
             dir, b, a, c, dir);
    return false;
}

/* The line of the default setting that says the cache's pages are 4 KiB
 * and what the load did instead (`what`), when the verdict is this load's. */
static void say_small_pages(tn_repack_cache_result *r, const char *dir, const char *what) {
    snprintf(r->note, sizeof r->note,
             "%s: this kernel maps the files of this file system in 4 KiB pages, slower than "
             "the 2 MiB pages of a private copy: %s (remembered in %s/" PAGES_FILE
             "; TERN_REPACK_CACHE=%s uses the cache anyway)",
             dir, what, dir, dir);
}

/* The cache's pages are 4 KiB (default setting) and this load mapped a
 * file: the dense matrices, when a private copy of them gets 2 MiB pages
 * (dense_out), are copied out of the mapping into private memory, byte for
 * byte. A mixture's experts that the file holds stay there (the model file
 * is on the same file system, its pages as small, and the row kernels read
 * slower than X16: on another file system the load left them out of the
 * file before writing it). A file nothing reads from is unmapped. */

/* The bytes that copy takes out of a file mapped in these pages: the one
 * answer for the work (small_pages) and for what the load's progress
 * expects of it (build_file's pass, a hit's estimate), so that the bar's
 * total is the work done. 0: the mapping serves as it is. */
static uint64_t copy_out_of(bool payload_at_2m, uint64_t dense, tn_repack_pages pages) {
    return pages == TN_REPACK_PAGES_4K && payload_at_2m && dense >= TN_WEIGHTS_HUGE_MIN ? dense
                                                                                        : 0;
}

static uint64_t copy_out_bytes(const plan *p, tn_repack_pages pages) {
    return copy_out_of(p->payload_off % HUGE_2M == 0, plan_dense_bytes(p), pages);
}

typedef struct copy_pass {
    void *dst;
    const void *src;
    size_t n;
} copy_pass;

/* In pieces, each counted in the load's progress and a cancel point: on a
 * hit the copy reads the cache file from the disk, an E4B's 2.6 GB of
 * dense weights seconds of a load that otherwise only maps. 64 MiB as the
 * other passes, or a sixteenth of a smaller copy (1 MiB at least), so that
 * the bar moves in it when it is the whole of a hit's work. */
#define COPY_PIECE_MAX ((size_t)64 << 20)
#define COPY_PIECE_MIN ((size_t)1 << 20)

static void copy_pass_run(void *arg) {
    const copy_pass *cp = arg;
    size_t piece = cp->n / 16;
    piece = piece > COPY_PIECE_MAX   ? COPY_PIECE_MAX
            : piece < COPY_PIECE_MIN ? COPY_PIECE_MIN
                                     : piece;
    for (size_t i = 0; i < cp->n; i += piece) {
        const size_t k = cp->n - i < piece ? cp->n - i : piece;
        memcpy((uint8_t *)cp->dst + i, (const uint8_t *)cp->src + i, k);
        tn_load_progress_add(COPY_SHARE(k));
        tn_load_poll();
    }
}

/* The copy reads the cache file (another process's, on a hit) under
 * tn_guarded_read: a file cut short under it fails the load (TN_ERR_IO,
 * r->fault), and so does a cancel (TN_ERR_CANCELLED), with the copy freed
 * and the file unmapped, since the weights point into what is gone; a file
 * this load wrote is deleted on a cancel (its deferred NaN/Inf checks, if
 * any, never ran: the next load must not skip them). TN_OK otherwise.
 * say: the verdict is this load's (a note). */
static int small_pages(tn_weight *const *ws, int n_use, const plan *p, const char *dir,
                       tn_repack_cache_result *r, bool say) {
    const uint8_t *payload = (const uint8_t *)r->map + p->payload_off;
    const uint64_t dense = p->copy_out;
    const bool experts_mapped = n_use > p->file_only;
    void *buf = NULL;
    if (dense == 0)
        return TN_OK;
    /* What remains of a hit's load is this copy (a hit skips the deferred
     * checks); a new file's pass counted it from its start. */
    if (r->outcome == TN_REPACK_CACHE_HIT)
        tn_load_progress_expect(COPY_SHARE(dense));
    buf = tn_weights_storage_alloc((size_t)dense);
    if (!buf) {
        tn_load_progress_add(COPY_SHARE(dense));
        return TN_OK; /* no memory for the copy: the mapping serves */
    }
    const tn_read_span cache = {.base = r->map, .size = r->map_bytes, .path = r->path};
    copy_pass cp = {.dst = buf, .src = payload, .n = (size_t)dense};
    const int rc = tn_guarded_read(&cache, 1, "cache-copy", copy_pass_run, &cp, &r->fault);
    if (rc != TN_OK) {
        free(buf);
        tn_repack_cache_unmap(r->map, r->map_bytes);
        r->map = NULL;
        r->map_bytes = 0;
        r->in_file = false;
        if (rc == TN_ERR_CANCELLED && r->outcome == TN_REPACK_CACHE_WRITTEN)
            unlink(r->path);
        return rc == TN_ERR_CANCELLED ? rc : TN_ERR_IO;
    }
    for (int i = 0; i < p->n && p->e[i].w < p->file_only; i++)
        ws[p->e[i].w]->data = (const uint8_t *)buf + p->e[i].off;
    point_aliases(ws, n_use, p);
    if (!experts_mapped) {
        tn_repack_cache_unmap(r->map, r->map_bytes);
        r->map = NULL;
        r->map_bytes = 0;
        r->in_file = false;
        r->bytes = (size_t)dense;
        if (r->outcome == TN_REPACK_CACHE_WRITTEN)
            unlink(r->path); /* no load of the default setting would map it */
    }
    r->outcome = TN_REPACK_CACHE_PRIVATE;
    r->storage = buf;
    if (say)
        say_small_pages(r, dir,
                        experts_mapped ? "the dense weights are copied into this process's "
                                         "memory, the experts stay in the cache file (the model "
                                         "file's pages are as small)"
                                       : "the weights are kept in this process's memory");
    return TN_OK;
}

/* Whether the default setting's page check applies: only where a private
 * copy would have 2 MiB pages to lose (docs/QUANT.md, "Pages"). */
static bool pages_watched(bool dflt) {
    return dflt && (forced_pages != TN_REPACK_PAGES_UNKNOWN || private_gets_huge_pages());
}

/* A mixture's experts stay in the model file's rows, left out of the
 * cache's plan: its files are in 4 KiB pages and the model file is on
 * another file system, maybe in 2 MiB pages (on the same one its pages
 * are as small, and X16 reads faster than rows). */
static bool experts_left_out(const char *dir, tn_repack_pages pages, dev_t model_dev) {
    if (pages != TN_REPACK_PAGES_4K)
        return false;
    /* A directory not made yet (an estimate before prepare's make_dirs)
     * will be on its nearest existing parent's file system: asked of
     * itself, a new directory left the experts out of the estimate, and
     * the bar waited at 0.93 for the 16 s of their repack into the file. */
    char path[PATH_MAX];
    struct stat dst;
    if (!existing_dir(dir, path, sizeof path) || stat(path, &dst) != 0)
        return true;
    return dst.st_dev != model_dev;
}

/* In 4 KiB pages, with no experts to keep in it, a cache file would hold
 * only dense matrices that a private copy gets in 2 MiB pages: no file is
 * written. The one rule for prepare and for the estimate made before it. */
static bool no_file_in_small_pages(tn_repack_pages pages, bool experts_in_file, uint64_t dense) {
    return pages == TN_REPACK_PAGES_4K && !experts_in_file && dense >= TN_WEIGHTS_HUGE_MIN;
}

/* The pages of dir as prepare will see them, before anything is read:
 * the verdict it will read, or the one its check would give under the
 * test hook (a real check is not made before its time: a directory never
 * checked is UNKNOWN, as where the default's check does not apply). */
static tn_repack_pages pages_expected(const char *dir, bool dflt) {
    if (!pages_watched(dflt))
        return TN_REPACK_PAGES_UNKNOWN;
    const tn_repack_pages pages = tn_repack_cache_pages(dir);
    return pages == TN_REPACK_PAGES_UNKNOWN ? forced_pages : pages;
}

/* Whether prepare will take the experts into a new file in dir, as far
 * as it is known before anything is read: its pages (experts_left_out)
 * and, in the default setting, the room for a file of dense + experts
 * repacked bytes (its payload's offset taken as its alignment: the header
 * is smaller). Where a file of this model is there to map, prepare asks
 * for no room; the estimate's answer then only counts if the file fails
 * its check and is rebuilt, when prepare asks the same. */
static bool experts_taken(const char *dir, bool dflt, tn_repack_pages pages, dev_t model_dev,
                          uint64_t dense, uint64_t experts, tn_repack_cache_outlook *o) {
    if (experts_left_out(dir, pages, model_dev))
        return false;
    if (!dflt || experts == 0)
        return true;
    const uint64_t payload = dense + experts;
    uint64_t avail = 0, keep = 0;
    return room_for(dir, payload_align(payload) + payload, o, &avail, &keep) == ROOM_YES;
}

bool tn_repack_cache_takes_experts(const tn_gguf *g, uint64_t dense, uint64_t experts,
                                   tn_repack_cache_outlook *o) {
    char *dir = NULL;
    const bool dflt = tn_repack_cache_config(&dir) == TN_REPACK_CACHE_DEFAULT;
    bool takes = dir != NULL;
    struct stat st;
    if (takes && g && stat(tn_gguf_path(g), &st) == 0)
        takes = experts_taken(dir, dflt, pages_expected(dir, dflt), st.st_dev, dense, experts, o);
    free(dir);
    return takes;
}

uint64_t tn_repack_cache_new_file_work(const tn_gguf *g, uint64_t dense, uint64_t experts,
                                       tn_repack_cache_outlook *o) {
    char *dir = NULL;
    const bool dflt = tn_repack_cache_config(&dir) == TN_REPACK_CACHE_DEFAULT;
    uint64_t work = 0;
    struct stat st;
    if (dir && g && dense + experts > 0 && stat(tn_gguf_path(g), &st) == 0 &&
        !(o ? o->likely : tn_repack_cache_likely(g, dir))) {
        const tn_repack_pages pages = pages_expected(dir, dflt);
        if (!experts_taken(dir, dflt, pages, st.st_dev, dense, experts, o))
            experts = 0;
        if (!no_file_in_small_pages(pages, experts > 0, dense)) {
            const uint64_t payload = dense + experts;
            work = after_repack_share(
                payload, copy_out_of(payload_align(payload) == HUGE_2M, dense, pages));
        }
    }
    free(dir);
    return work;
}

int tn_repack_cache_prepare(tn_weight *const *ws, int n, int n_file_only, const tn_gguf *g,
                            const char *dir, tn_repack_cache_outlook *o,
                            tn_repack_cache_result *res) {
    *res = (tn_repack_cache_result){.outcome = TN_REPACK_CACHE_OFF};
    if (n_file_only < 0 || n_file_only > n)
        return TN_ERR_INVALID;
    char *own_dir = NULL;
    bool dflt = false; /* the default setting: its checks apply */
    if (!dir) {
        dflt = tn_repack_cache_config(&own_dir) == TN_REPACK_CACHE_DEFAULT;
        dir = own_dir;
    } else {
        o = NULL; /* the outlook is of the configured directory */
    }
    size_t any = 0;
    for (int i = 0; i < n && !any; i++)
        any = tn_weight_repack_size(ws[i]);
    if (!dir || !g || !any) {
        free(own_dir);
        int rc = repack_private(ws, n - n_file_only, g, &res->storage, &res->bytes, res);
        if (rc == TN_OK && res->storage)
            res->outcome = TN_REPACK_CACHE_PRIVATE; /* no why: nothing went wrong */
        return rc;
    }
    plan p = {.file_only = n - n_file_only};
    int rc = TN_OK;
    bool can_write = true;
    char name[40];
    if (!make_plan(ws, n, g, &p, res) || tn_repack_cache_name(p.model, name, sizeof name) != TN_OK) {
        rc = build(ws, n, &p, g, dir, res, false);
        goto out;
    }
    snprintf(res->path, sizeof res->path, "%s/%s", dir, name);
    int e = make_dirs(dir);
    if (e) {
        why_set(res, "%s: cannot create the cache directory: %s", dir, tn_write_cause(e));
        rc = build(ws, n, &p, g, dir, res, false);
        goto out;
    }
    /* The default setting's page check (docs/QUANT.md, "Pages"): only
     * where a private copy would have 2 MiB pages to lose. */
    const bool watch = pages_watched(dflt);
    tn_repack_pages pages = watch ? tn_repack_cache_pages(dir) : TN_REPACK_PAGES_UNKNOWN;
    bool fresh = false; /* the verdict is this load's: a note says it */
    if (watch && pages == TN_REPACK_PAGES_UNKNOWN && p.payload_off % HUGE_2M == 0) {
        pages = probe_dir_pages(dir);
        if (pages != TN_REPACK_PAGES_UNKNOWN) {
            pages_record(dir, pages);
            fresh = true;
        }
    }
    const bool dense_out = plan_dense_bytes(&p) >= TN_WEIGHTS_HUGE_MIN;
    int n_use = n; /* ws[0..n_use) go through the cache */
    const bool experts_out = n_file_only > 0 && experts_left_out(dir, pages, p.model_st.st_dev);
    if (experts_out) {
        /* The model file is on another file system, maybe in 2 MiB pages:
         * the experts stay in its rows. */
        n_use = p.file_only;
        if (!replan(ws, n_use, g, &p, res)) {
            rc = build(ws, n, &p, g, dir, res, false);
            goto out;
        }
        if (fresh && !dense_out)
            say_small_pages(res, dir, "the experts are read from the model file");
    }
    if (no_file_in_small_pages(pages, n_use > p.file_only, plan_dense_bytes(&p))) {
        /* Nothing this load would read from a cache file: no file is
         * written, the weights are repacked as with the cache off. */
        rc = build(ws, n, &p, g, dir, res, false);
        res->path[0] = '\0';
        if (rc == TN_OK && fresh)
            say_small_pages(res, dir,
                            experts_out ? "the weights are kept in this process's memory, the "
                                          "experts read from the model file"
                                        : "the weights are kept in this process's memory");
        goto out;
    }
    for (;;) {
        int fd = -1;
        uint64_t size = 0;
        p.copy_out = copy_out_bytes(&p, pages);
        switch (open_valid(res->path, &p, &fd, &size, res)) {
        case FILE_OK: {
            const int ok = use_file(fd, size, ws, n_use, &p, g, res);
            if (ok < 0) {
                close(fd);
                rc = TN_ERR_IO;
                goto out;
            }
            if (ok) {
                /* The file's time is its last use: pruning removes the oldest. */
                futimens(fd, NULL);
                close(fd);
                res->outcome = TN_REPACK_CACHE_HIT;
                res->hit = res->in_file = true;
                res->why[0] = '\0';
                goto mapped;
            }
            close(fd); /* spot check failed: rebuild it */
            break;
        }
        case FILE_ABSENT:
        case FILE_BAD:
            break;
        case FILE_BLOCKED:
            can_write = false;
            break;
        }
        if (!dflt || !can_write || n_use == p.file_only || room_for_experts(dir, &p, o, res))
            break;
        /* No room for the experts: the dense matrices alone (maybe a file
         * of them is there already). */
        n_use = p.file_only;
        if (!replan(ws, n_use, g, &p, res)) {
            rc = build(ws, n_use, &p, g, dir, res, false);
            goto out;
        }
        if (pages == TN_REPACK_PAGES_4K && dense_out) {
            /* In 4 KiB pages the dense matrices alone are kept private:
             * no file of them is written, or read. */
            rc = build(ws, n_use, &p, g, dir, res, false);
            res->path[0] = '\0';
            goto out;
        }
    }
    p.copy_out = copy_out_bytes(&p, pages);
    rc = build(ws, n_use, &p, g, dir, res, can_write);
    if (rc == TN_OK && res->outcome == TN_REPACK_CACHE_WRITTEN)
        tn_repack_cache_prune_dir(dir, 0, res->path, NULL);
mapped:
    if (rc == TN_OK &&
        (res->outcome == TN_REPACK_CACHE_HIT || res->outcome == TN_REPACK_CACHE_WRITTEN))
        rc = small_pages(ws, n_use, &p, dir, res, fresh);
out:
    plan_free(&p);
    free(own_dir);
    return rc;
}

void tn_repack_cache_outlook_init(tn_repack_cache_outlook *o, const tn_gguf *g) {
    *o = (tn_repack_cache_outlook){.likely = tn_repack_cache_likely(g, NULL)};
}

bool tn_repack_cache_likely(const tn_gguf *g, const char *dir) {
    asked("likely");
    char *own_dir = NULL;
    if (!dir)
        dir = own_dir = tn_repack_cache_dir();
    char model[PATH_MAX], name[40], path[PATH_MAX + 48];
    struct stat st;
    bool likely = false;
    if (dir && g && realpath(tn_gguf_path(g), model) && stat(model, &st) == 0 &&
        tn_repack_cache_name(model, name, sizeof name) == TN_OK) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        uint8_t h[TN_REPACK_CACHE_FIXED];
        struct stat cs;
        if (fd >= 0 && fstat(fd, &cs) == 0 && S_ISREG(cs.st_mode) && cs.st_uid == geteuid() &&
            pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h)
            likely = memcmp(h, TN_REPACK_CACHE_MAGIC, 8) == 0 &&
                     tn_rd_u32(h + 8) == TN_REPACK_CACHE_VERSION &&
                     tn_rd_u64(h + 64) == (uint64_t)st.st_size &&
                     tn_rd_u64(h + 72) == (uint64_t)st.st_mtim.tv_sec &&
                     tn_rd_u64(h + 80) == (uint64_t)st.st_mtim.tv_nsec &&
                     tn_rd_u64(h + 88) == (uint64_t)st.st_ino &&
                     tn_rd_u64(h + 96) == (uint64_t)st.st_dev;
        if (fd >= 0)
            close(fd);
    }
    free(own_dir);
    return likely;
}

/* ------------------------------------------------------------ housekeeping */

/* A cache file of dir (by name), as tn_repack_cache_list reports it. */
static bool read_entry(int dfd, const char *name, const char *full, tn_repack_cache_entry *e,
                       char *model, size_t model_size) {
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return false;
    *e = (tn_repack_cache_entry){.file = full, .model = "", .bytes = (uint64_t)st.st_size,
                                 .last_used = (int64_t)st.st_mtim.tv_sec, .stale = true};
    model[0] = '\0';
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
        return true;
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0)
        return true;
    uint8_t h[TN_REPACK_CACHE_FIXED];
    bool ok = pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
              !memcmp(h, TN_REPACK_CACHE_MAGIC, 8) &&
              tn_rd_u32(h + 8) == TN_REPACK_CACHE_VERSION;
    const uint32_t n = ok ? tn_rd_u32(h + 12) : 0, L = ok ? tn_rd_u32(h + 112) : 0;
    ok = ok && L > 0 && L < model_size &&
         pread(fd, model, L, (off_t)(TN_REPACK_CACHE_FIXED + 16 * (uint64_t)n)) == (ssize_t)L;
    close(fd);
    if (!ok) {
        model[0] = '\0';
        return true;
    }
    model[L] = '\0';
    e->model = model;
    struct stat ms;
    e->stale = stat(model, &ms) != 0 || (uint64_t)ms.st_size != tn_rd_u64(h + 64) ||
               (uint64_t)ms.st_mtim.tv_sec != tn_rd_u64(h + 72) ||
               (uint64_t)ms.st_mtim.tv_nsec != tn_rd_u64(h + 80) ||
               (uint64_t)ms.st_ino != tn_rd_u64(h + 88) || (uint64_t)ms.st_dev != tn_rd_u64(h + 96);
    return true;
}

static bool is_cache_name(const char *s) {
    size_t n = strlen(s);
    return n > 4 && s[0] != '.' && !strcmp(s + n - 4, ".x16");
}

/* "<32 hex>.x16.room": a room marker (room_told), the only name that
 * clearing takes beside the cache files: the directory may be one the user
 * named (TERN_REPACK_CACHE=DIR) that holds files of theirs. */
static bool is_room_name(const char *s) {
    if (strlen(s) != 32 + strlen(".x16" ROOM_SUFFIX) || strcmp(s + 32, ".x16" ROOM_SUFFIX) != 0)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* ".<32 hex>.XXXXXX": a writer's temporary file. */
static bool is_temp_name(const char *s) { return s[0] == '.' && strlen(s) == 40 && s[33] == '.'; }

typedef struct scan_item {
    char *file;
    uint64_t bytes;
    int64_t last_used;
} scan_item;

/* mode 0: list, 1: prune, 2: forget `model`, 3: clear. */
static int scan(const char *dir, int mode, uint64_t max_bytes, const char *keep,
                const char *model, tn_repack_cache_fn fn, void *user, uint64_t *freed) {
    if (freed)
        *freed = 0;
    char *own = NULL;
    if (!dir)
        dir = own = tn_repack_cache_dir();
    if (!dir)
        return TN_ERR_NOT_FOUND;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        free(own);
        return e == ENOENT ? TN_ERR_NOT_FOUND : TN_ERR_IO;
    }
    char resolved[PATH_MAX];
    if (model && !realpath(model, resolved))
        snprintf(resolved, sizeof resolved, "%s", model);
    scan_item *items = NULL;
    size_t n_items = 0, cap = 0;
    uint64_t total = 0;
    int rc = TN_OK;
    const time_t now = time(NULL);
    char full[PATH_MAX + 64], mpath[PATH_MAX];
    for (struct dirent *de; (de = readdir(d));) {
        snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
        if (is_temp_name(de->d_name)) {
            struct stat st;
            if (mode != 0 && fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                (mode == 3 || now - st.st_mtim.tv_sec > TMP_STALE_S) && unlink(full) == 0 && freed)
                *freed += (uint64_t)st.st_size;
            continue;
        }
        if (!is_cache_name(de->d_name)) {
            if (mode == 3 && is_room_name(de->d_name))
                unlink(full); /* a room verdict: cleared with the files */
            continue;
        }
        tn_repack_cache_entry e;
        if (!read_entry(dirfd(d), de->d_name, full, &e, mpath, sizeof mpath))
            continue;
        bool drop = mode == 3 || (mode == 1 && e.stale) ||
                    (mode == 2 && !strcmp(e.model, resolved));
        if (keep && !strcmp(full, keep))
            drop = false;
        if (mode == 0 && fn)
            fn(&e, user);
        if (drop) {
            if (unlink(full) == 0 && freed)
                *freed += e.bytes;
            room_forget(full);
            continue;
        }
        total += e.bytes;
        if (mode == 1 && !(keep && !strcmp(full, keep))) {
            if (n_items == cap) {
                cap = cap ? 2 * cap : 16;
                scan_item *ni = realloc(items, cap * sizeof *ni);
                if (!ni) {
                    rc = TN_ERR_NOMEM;
                    break;
                }
                items = ni;
            }
            items[n_items] = (scan_item){strdup(full), e.bytes, e.last_used};
            if (items[n_items].file)
                n_items++;
        }
    }
    closedir(d);
    if (mode == 3) {
        /* The page verdict too: clearing is how a user has it checked again.
         * Only when it is one (its first line): a file of the user's named
         * "pages" in a directory they named stays. */
        static const char magic[] = "tern repack pages 1\n";
        char head[sizeof magic - 1];
        snprintf(full, sizeof full, "%s/" PAGES_FILE, dir);
        int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
        const bool ours = fd >= 0 && read(fd, head, sizeof head) == (ssize_t)sizeof head &&
                          memcmp(head, magic, sizeof head) == 0;
        if (fd >= 0)
            close(fd);
        if (ours)
            unlink(full);
    }
    /* Least recently used first, until the rest fits. */
    while (rc == TN_OK && mode == 1 && total > max_bytes && n_items > 0) {
        size_t oldest = 0;
        for (size_t i = 1; i < n_items; i++)
            if (items[i].last_used < items[oldest].last_used)
                oldest = i;
        if (unlink(items[oldest].file) == 0) {
            room_forget(items[oldest].file);
            total -= items[oldest].bytes;
            if (freed)
                *freed += items[oldest].bytes;
        }
        free(items[oldest].file);
        items[oldest] = items[--n_items];
    }
    for (size_t i = 0; i < n_items; i++)
        free(items[i].file);
    free(items);
    free(own);
    return rc;
}

int tn_repack_cache_prune_dir(const char *dir, uint64_t max_bytes, const char *keep,
                              uint64_t *freed) {
    return scan(dir, 1, max_bytes ? max_bytes : max_bytes_default(), keep, NULL, NULL, NULL,
                freed);
}

int tn_repack_cache_list(const char *dir, tn_repack_cache_fn fn, void *user) {
    return scan(dir, 0, 0, NULL, NULL, fn, user, NULL);
}

int tn_repack_cache_prune(const char *dir, uint64_t max_bytes, uint64_t *freed) {
    return tn_repack_cache_prune_dir(dir, max_bytes, NULL, freed);
}

int tn_repack_cache_forget(const char *dir, const char *model_path, uint64_t *freed) {
    if (!model_path)
        return TN_ERR_INVALID;
    return scan(dir, 2, 0, NULL, model_path, NULL, NULL, freed);
}

int tn_repack_cache_clear(const char *dir, uint64_t *freed) {
    return scan(dir, 3, 0, NULL, NULL, NULL, NULL, freed);
}
