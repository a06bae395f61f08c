/* The repack cache (engine/repack-cache.c, docs/QUANT.md): the first load
 * writes the X16 weights to a file, later loads map it; the logits are the
 * same bits with and without it. Whatever sits where the file belongs
 * (truncated file, wrong magic, another model's file, changed weights, a
 * symbolic link, a FIFO, a directory), an unwritable directory, two
 * processes writing at once: the load succeeds, rebuilds or repacks in
 * memory, and never crashes or hangs. Two processes on one model share the
 * file's pages (Pss < Rss). The cache lives in this test's scratch
 * directory, never in ~/.cache. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tn-internal.h"
#include "tn-repack-cache.h"
#include "tn-test.h"

#include <dirent.h>
#include <math.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char cache_dir[1024];

/* The caller's TERN_REPACK_CACHE (tests/meson.build: the build tree), put
 * back after each test that changes it: with it unset a load writes at the
 * default place. $HOME is a directory of the scratch tree that must never
 * come to exist (checked at the end): a load that ran with the default
 * place by mistake fails the test instead of writing into a real home
 * (root could create /nonexistent). */
static char *suite_cache;
static char never_home[1100];

static void restore_cache_env(void) {
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", never_home, 1);
    if (suite_cache)
        setenv("TERN_REPACK_CACHE", suite_cache, 1);
    else
        setenv("TERN_REPACK_CACHE", "0", 1);
}

static const int32_t toks[] = {1, 7, 42, 3, 60, 12};
#define NT ((int32_t)(sizeof toks / sizeof toks[0]))

/* Loads path; *src gets the repack source, logits (n_vocab floats, may be
 * NULL) those of the last of toks. False when the load or decode failed. */
static bool run(const char *path, char *src, size_t src_size, float *logits, char *cache_path,
                size_t cp_size) {
    tn_model *m = NULL;
    tn_ctx *ctx = NULL;
    tn_error err = {0};
    bool ok = tn_model_load(path, tn_model_default_params(), &m, &err) == TN_OK;
    CHECKF(ok, "load %s: %s", path, err.message);
    if (!ok)
        return false;
    snprintf(src, src_size, "%s", tn_model_repack_source(m));
    if (cache_path)
        snprintf(cache_path, cp_size, "%s", tn_model_repack_cache_path(m));
    if (logits) {
        ok = tn_ctx_new(m, 64, 2, &ctx, &err) == TN_OK &&
             tn_ctx_decode(ctx, toks, NT, TN_LOGITS_LAST, logits, &err) == TN_OK;
        CHECKF(ok, "decode %s: %s", path, err.message);
    }
    tn_ctx_free(ctx);
    tn_model_free(m);
    return ok;
}

static int n_vocab_of(const char *path) {
    tn_model *m = NULL;
    tn_error err = {0};
    if (tn_model_load(path, tn_model_default_params(), &m, &err) != TN_OK)
        return -1;
    int n = tn_model_n_vocab(m);
    tn_model_free(m);
    return n;
}

/* Files in dir: cache files (*.x16) and writers' temporary files (.*). */
static void count_files(const char *dir, int *caches, int *temps) {
    *caches = *temps = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (de->d_name[0] == '.' && n > 2)
            (*temps)++;
        else if (n > 4 && !strcmp(de->d_name + n - 4, ".x16"))
            (*caches)++;
    }
    closedir(d);
}

static uint64_t file_u64(const char *path, long at) {
    uint64_t v = 0;
    FILE *f = fopen(path, "rb");
    if (f && fseek(f, at, SEEK_SET) == 0 && fread(&v, 8, 1, f) == 1) {
    }
    if (f)
        fclose(f);
    return v;
}

static bool flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    int c = -1;
    bool ok = f && fseek(f, at, SEEK_SET) == 0 && (c = fgetc(f)) != EOF &&
              fseek(f, at, SEEK_SET) == 0 && fputc(c ^ 0x5a, f) != EOF;
    if (f && fclose(f) != 0)
        ok = false;
    return ok;
}

static ino_t inode_of(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_ino : 0;
}

/* Something put where the cache file belongs; the next load must succeed
 * with the same logits and end as `want` ("cache-new": rebuilt, "memory":
 * the directory entry could not be replaced). */
static void expect_after(const char *what, const char *model, const char *cpath, const float *ref,
                         int nv, const char *want) {
    char src[32], cp[1024];
    float *lg = malloc(sizeof(float) * (size_t)nv);
    if (!lg)
        return;
    bool ok = run(model, src, sizeof src, lg, cp, sizeof cp);
    CHECKF(ok && !strcmp(src, want), "%s: source %s, expected %s", what, src, want);
    CHECKF(ok && memcmp(lg, ref, sizeof(float) * (size_t)nv) == 0, "%s: other logits", what);
    free(lg);
    if (!strcmp(want, "cache-new")) {
        /* A second load uses what the first rebuilt. */
        ok = run(model, src, sizeof src, NULL, NULL, 0);
        CHECKF(ok && !strcmp(src, "cache"), "%s: after the rebuild, source %s", what, src);
        (void)cpath;
    }
}

/* Pss and Rss (kB) of the mappings of `file` in this process. */
static void pss_of(const char *name, long *rss, long *pss) {
    *rss = *pss = 0;
    char file[4096];
    if (!realpath(name, file))
        return;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return;
    char line[2048];
    bool in = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        long kb;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            size_t n = strlen(line), fl = strlen(file);
            in = n >= fl && !strcmp(line + n - fl, file);
        } else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1) {
            *rss += kb;
        } else if (in && sscanf(line, "Pss: %ld kB", &kb) == 1) {
            *pss += kb;
        }
    }
    fclose(f);
}

/* Two processes load the model at once into an empty cache: both succeed
 * with the reference logits, one file is left, no temporary file. */
static void concurrent_first_loads(const char *model, const float *ref, int nv) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/concurrent", cache_dir);
    setenv("TERN_REPACK_CACHE", dir, 1);
    int go[2];
    if (pipe(go) != 0) {
        CHECK(0);
        return;
    }
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            char c;
            close(go[1]);
            if (read(go[0], &c, 1) < 0)
                _exit(3);
            char src[32];
            float *lg = malloc(sizeof(float) * (size_t)nv);
            bool ok = lg && run(model, src, sizeof src, lg, NULL, 0) &&
                      memcmp(lg, ref, sizeof(float) * (size_t)nv) == 0;
            fprintf(stderr, "concurrent load %d: %s\n", k, ok ? src : "FAILED");
            _exit(ok && (!strcmp(src, "cache-new") || !strcmp(src, "cache")) ? 0 : 1);
        }
    }
    close(go[0]);
    if (write(go[1], "gg", 2) != 2)
        CHECK(0);
    close(go[1]);
    for (int k = 0; k < 2; k++) {
        int st = 0;
        CHECK(kids[k] > 0 && waitpid(kids[k], &st, 0) == kids[k]);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "concurrent load %d: status %d", k, st);
    }
    int caches, temps;
    count_files(dir, &caches, &temps);
    CHECKF(caches == 1 && temps == 0, "after two concurrent first loads: %d cache files, %d temps",
           caches, temps);
    char src[32];
    CHECK(run(model, src, sizeof src, NULL, NULL, 0) && !strcmp(src, "cache"));
    setenv("TERN_REPACK_CACHE", cache_dir, 1);
}

/* A child maps the cache and touches every page (a decode), then waits; the
 * parent does the same: each then holds the file's pages at about half
 * their Rss as Pss. */
static void shared_pages(const char *model, int nv) {
    int ready[2], done[2];
    if (pipe(ready) != 0 || pipe(done) != 0) {
        CHECK(0);
        return;
    }
    pid_t kid = fork();
    if (kid == 0) {
        close(ready[0]);
        close(done[1]);
        tn_model *m = NULL;
        tn_ctx *ctx = NULL;
        tn_error err = {0};
        float *lg = malloc(sizeof(float) * (size_t)nv);
        bool ok = lg && tn_model_load(model, tn_model_default_params(), &m, &err) == TN_OK &&
                  tn_ctx_new(m, 64, 1, &ctx, &err) == TN_OK &&
                  tn_ctx_decode(ctx, toks, NT, TN_LOGITS_LAST, lg, &err) == TN_OK;
        char c = ok ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(done[0], &c, 1) < 0)
            ok = false;
        tn_ctx_free(ctx);
        tn_model_free(m);
        free(lg);
        _exit(ok ? 0 : 1);
    }
    close(ready[1]);
    close(done[0]);
    char c = 'n';
    CHECK(kid > 0 && read(ready[0], &c, 1) == 1 && c == 'y');
    tn_model *m = NULL;
    tn_ctx *ctx = NULL;
    tn_error err = {0};
    float *lg = malloc(sizeof(float) * (size_t)nv);
    if (lg && tn_model_load(model, tn_model_default_params(), &m, &err) == TN_OK &&
        tn_ctx_new(m, 64, 1, &ctx, &err) == TN_OK &&
        tn_ctx_decode(ctx, toks, NT, TN_LOGITS_LAST, lg, &err) == TN_OK) {
        const char *file = tn_model_repack_cache_path(m);
        long rss, pss;
        pss_of(file, &rss, &pss);
        fprintf(stderr, "two processes on %s: this one's Rss %ld kB, Pss %ld kB\n", file, rss,
                pss);
        CHECKF(!strcmp(tn_model_repack_source(m), "cache"), "source %s",
               tn_model_repack_source(m));
        CHECKF(rss > 0 && pss * 10 < rss * 7, "the cache's pages are not shared: Rss %ld, Pss %ld",
               rss, pss);
    } else {
        CHECKF(0, "load: %s", err.message);
    }
    tn_ctx_free(ctx);
    tn_model_free(m);
    free(lg);
    c = 'x';
    if (write(done[1], &c, 1) != 1)
        CHECK(0);
    int st = 0;
    CHECK(kid > 0 && waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(ready[0]);
    close(done[1]);
}

static void count_entry(const tn_repack_cache_entry *e, void *user) {
    int *n = user;
    n[0]++;
    n[1] += e->stale;
}

/* list, forget, prune (stale files, temporary files, least recently used), clear. */
static void housekeeping(const char *model, const char *cpath) {
    char dir[1100], copy[1100], src[32], cp[1200];
    snprintf(dir, sizeof dir, "%s/house", cache_dir);
    snprintf(copy, sizeof copy, "%s/house-copy.gguf", tn_test_tmpdir());
    setenv("TERN_REPACK_CACHE", dir, 1);
    CHECK(tn_test_copy_file(model, copy));
    CHECK(run(model, src, sizeof src, NULL, NULL, 0) && !strcmp(src, "cache-new"));
    CHECK(run(copy, src, sizeof src, NULL, cp, sizeof cp) && !strcmp(src, "cache-new"));
    int n[2] = {0, 0};
    CHECK(tn_repack_cache_list(dir, count_entry, n) == TN_OK);
    CHECKF(n[0] == 2 && n[1] == 0, "list: %d files, %d stale", n[0], n[1]);
    /* The copy's model gone: its file is stale; prune removes it alone. */
    remove(copy);
    n[0] = n[1] = 0;
    CHECK(tn_repack_cache_list(dir, count_entry, n) == TN_OK);
    CHECKF(n[0] == 2 && n[1] == 1, "list after removing a model: %d files, %d stale", n[0], n[1]);
    /* A dead writer's temporary file (old) goes, a live one (new) stays. */
    char old_tmp[1200], new_tmp[1200];
    snprintf(old_tmp, sizeof old_tmp, "%s/.0123456789abcdef0123456789abcdef.AbCdEf", dir);
    snprintf(new_tmp, sizeof new_tmp, "%s/.0123456789abcdef0123456789abcdef.XyZxYz", dir);
    FILE *f = fopen(old_tmp, "w");
    if (f)
        fclose(f);
    f = fopen(new_tmp, "w");
    if (f)
        fclose(f);
    struct timespec past[2] = {{.tv_sec = time(NULL) - 86400}, {.tv_sec = time(NULL) - 86400}};
    CHECK(utimensat(AT_FDCWD, old_tmp, past, 0) == 0);
    uint64_t freed = 0;
    CHECK(tn_repack_cache_prune(dir, 0, &freed) == TN_OK);
    CHECKF(access(cp, F_OK) != 0, "prune left the stale %s", cp);
    CHECKF(access(old_tmp, F_OK) != 0 && access(new_tmp, F_OK) == 0,
           "prune: the old temporary file must go, the new one stay");
    CHECK(freed > 0);
    n[0] = n[1] = 0;
    CHECK(tn_repack_cache_list(dir, count_entry, n) == TN_OK);
    CHECKF(n[0] == 1 && n[1] == 0, "after prune: %d files, %d stale", n[0], n[1]);
    /* Least recently used first: the copy again, made older than the model's. */
    CHECK(tn_test_copy_file(model, copy));
    CHECK(run(copy, src, sizeof src, NULL, cp, sizeof cp) && !strcmp(src, "cache-new"));
    CHECK(utimensat(AT_FDCWD, cp, past, 0) == 0);
    struct stat st;
    CHECK(stat(cp, &st) == 0);
    CHECK(tn_repack_cache_prune(dir, (uint64_t)st.st_size + 1, &freed) == TN_OK);
    CHECKF(access(cp, F_OK) != 0 && freed == (uint64_t)st.st_size,
           "prune to one file's size: the least recently used must go");
    /* forget: before deleting the model. */
    CHECK(run(copy, src, sizeof src, NULL, cp, sizeof cp) && !strcmp(src, "cache-new"));
    CHECK(tn_repack_cache_forget(dir, copy, &freed) == TN_OK && freed > 0);
    CHECKF(access(cp, F_OK) != 0, "forget left %s", cp);
    n[0] = n[1] = 0;
    CHECK(tn_repack_cache_list(dir, count_entry, n) == TN_OK && n[0] == 1);
    CHECK(tn_repack_cache_clear(dir, &freed) == TN_OK && freed > 0);
    n[0] = n[1] = 0;
    CHECK(tn_repack_cache_list(dir, count_entry, n) == TN_OK && n[0] == 0);
    CHECK(tn_repack_cache_list("/nonexistent/tern-cache", count_entry, n) == TN_ERR_NOT_FOUND);
    remove(copy);
    remove(new_tmp);
    (void)cpath;
    setenv("TERN_REPACK_CACHE", cache_dir, 1);
}

static void one_model(const char *type, bool big) {
    char model[1100];
    const char *tmp = tn_test_tmpdir();
    snprintf(model, sizeof model, "%s/%s%s.gguf", tmp, type, big ? "-big" : "");
    snprintf(cache_dir, sizeof cache_dir, "%s/cache-%s%s", tmp, type, big ? "-big" : "");
    tn_mkmodel_params p = tn_test_tiny_model("llama", 21);
    p.type = type;
    if (strstr(type, "_k") || big) {
        p.n_embd = 256; /* K-quants: whole super-blocks */
        p.n_ff = 512;
        p.n_head = 4;
        p.head_dim = 64;
    }
    if (big) {
        p.n_ff = 2048; /* 11 MB of Q8_0: a payload on 2 MiB boundaries */
        p.n_layer = 6;
    }
    tn_error err = {0};
    CHECKF(tn_mkmodel(&p, model, &err) == TN_OK, "mkmodel %s: %s", type, err.message);
    const int nv = n_vocab_of(model);
    CHECK(nv > 0);
    if (nv <= 0)
        return;
    float *ref = malloc(sizeof(float) * (size_t)nv), *lg = malloc(sizeof(float) * (size_t)nv);
    char src[32], cpath[1024];
    /* The reference: no cache. */
    setenv("TERN_REPACK_CACHE", "0", 1);
    CHECK(run(model, src, sizeof src, ref, NULL, 0));
    if (!strcmp(src, "none")) {
        fprintf(stderr, "%s: no faster layout on this CPU: nothing to cache\n", type);
        free(ref);
        free(lg);
        return;
    }
    CHECKF(!strcmp(src, "memory"), "TERN_REPACK_CACHE=0: source %s", src);
    setenv("TERN_REPACK_CACHE", cache_dir, 1);
    CHECK(run(model, src, sizeof src, lg, cpath, sizeof cpath));
    CHECKF(!strcmp(src, "cache-new"), "first load: source %s", src);
    CHECK(memcmp(lg, ref, sizeof(float) * (size_t)nv) == 0);
    const ino_t ino = inode_of(cpath);
    CHECK(ino != 0);
    memset(lg, 0, sizeof(float) * (size_t)nv);
    CHECK(run(model, src, sizeof src, lg, NULL, 0));
    CHECKF(!strcmp(src, "cache"), "second load: source %s", src);
    CHECK(memcmp(lg, ref, sizeof(float) * (size_t)nv) == 0);
    CHECKF(inode_of(cpath) == ino, "the second load rewrote the cache file");
    const uint64_t payload_off = file_u64(cpath, 48), payload = file_u64(cpath, 56);
    CHECK(payload_off % 4096 == 0 && payload > 0);
    if (big)
        CHECKF(payload_off == (2u << 20), "payload at %llu", (unsigned long long)payload_off);
    fprintf(stderr, "%s: cache file %s: payload %llu bytes at %llu\n", type, cpath,
            (unsigned long long)payload, (unsigned long long)payload_off);
    if (big) {
        shared_pages(model, nv);
        free(ref);
        free(lg);
        return;
    }

    /* Garbage where the file belongs. */
    struct stat st;
    CHECK(stat(cpath, &st) == 0);
    CHECK(truncate(cpath, st.st_size / 2) == 0);
    expect_after("truncated", model, cpath, ref, nv, "cache-new");
    CHECK(truncate(cpath, 64) == 0);
    expect_after("truncated inside the header", model, cpath, ref, nv, "cache-new");
    CHECK(truncate(cpath, 0) == 0);
    expect_after("empty", model, cpath, ref, nv, "cache-new");
    CHECK(flip_byte(cpath, 0));
    expect_after("wrong magic", model, cpath, ref, nv, "cache-new");
    CHECK(flip_byte(cpath, 20));
    expect_after("wrong key", model, cpath, ref, nv, "cache-new");
    CHECK(flip_byte(cpath, 130));
    expect_after("damaged header table", model, cpath, ref, nv, "cache-new");
    /* The first group of a matrix: the spot check must see it. */
    CHECK(flip_byte(cpath, (long)payload_off + 100));
    expect_after("changed weights", model, cpath, ref, nv, "cache-new");
    CHECK(stat(cpath, &st) == 0);
    FILE *f = fopen(cpath, "ab");
    CHECK(f && fputc(0, f) != EOF);
    if (f)
        fclose(f);
    expect_after("trailing bytes", model, cpath, ref, nv, "cache-new");
    /* Random bytes of the right size. */
    f = fopen(cpath, "r+b");
    uint64_t rng = 77;
    for (long i = 0; f && i < (long)st.st_size; i++)
        fputc((int)(tn_test_rand(&rng) & 255), f);
    if (f)
        fclose(f);
    expect_after("garbage", model, cpath, ref, nv, "cache-new");
    /* Another model's cache file under this model's name. */
    char other[1100], other_cache[1100];
    snprintf(other, sizeof other, "%s/other-%s.gguf", tmp, type);
    snprintf(other_cache, sizeof other_cache, "%s/other", cache_dir);
    tn_mkmodel_params po = p;
    po.seed = 99;
    CHECK(tn_mkmodel(&po, other, &err) == TN_OK);
    setenv("TERN_REPACK_CACHE", other_cache, 1);
    char ocp[1024];
    CHECK(run(other, src, sizeof src, NULL, ocp, sizeof ocp) && !strcmp(src, "cache-new"));
    setenv("TERN_REPACK_CACHE", cache_dir, 1);
    CHECK(tn_test_copy_file(ocp, cpath));
    expect_after("another model's file", model, cpath, ref, nv, "cache-new");
    /* The model rewritten in place (new mtime): the old cache must not be used. */
    {
        float *lo = malloc(sizeof(float) * (size_t)nv);
        char backup[1200];
        snprintf(backup, sizeof backup, "%s.backup", model);
        CHECK(tn_test_copy_file(model, backup)); /* keep the original */
        CHECK(tn_test_copy_file(other, model));
        CHECK(run(model, src, sizeof src, lo, NULL, 0) && !strcmp(src, "cache-new"));
        setenv("TERN_REPACK_CACHE", "0", 1);
        CHECK(run(model, src, sizeof src, lg, NULL, 0));
        setenv("TERN_REPACK_CACHE", cache_dir, 1);
        CHECKF(lo && memcmp(lo, lg, sizeof(float) * (size_t)nv) == 0,
               "a model replaced in place ran with its old cache");
        CHECK(tn_test_copy_file(backup, model));
        remove(backup);
        expect_after("the model back", model, cpath, ref, nv, "cache-new");
        free(lo);
    }
    /* A symbolic link (to a valid file even) is not followed, but replaced. */
    char elsewhere[1200];
    snprintf(elsewhere, sizeof elsewhere, "%s.elsewhere", cpath);
    CHECK(rename(cpath, elsewhere) == 0 && symlink(elsewhere, cpath) == 0);
    expect_after("a symbolic link", model, cpath, ref, nv, "cache-new");
    CHECK(lstat(cpath, &st) == 0 && S_ISREG(st.st_mode));
    remove(elsewhere);
    /* A FIFO: opening it must not block. */
    CHECK(remove(cpath) == 0 && mkfifo(cpath, 0600) == 0);
    expect_after("a FIFO", model, cpath, ref, nv, "cache-new");
    /* A directory cannot be renamed over: repacked in memory, the
     * directory left alone. */
    CHECK(remove(cpath) == 0 && mkdir(cpath, 0700) == 0);
    expect_after("a directory in the way", model, cpath, ref, nv, "memory");
    CHECK(stat(cpath, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(rmdir(cpath) == 0);
    /* Owned by someone else (only root can make such a file). */
    if (geteuid() == 0) {
        CHECK(run(model, src, sizeof src, NULL, NULL, 0) && !strcmp(src, "cache-new"));
        CHECK(chown(cpath, 1, 1) == 0);
        expect_after("another user's file", model, cpath, ref, nv, "cache-new");
    }
    /* No place to write: the cache directory is a file, or read-only. */
    char blocked[1200];
    snprintf(blocked, sizeof blocked, "%s/a-file", cache_dir);
    f = fopen(blocked, "w");
    if (f)
        fclose(f);
    char below[1300];
    snprintf(below, sizeof below, "%s/below", blocked);
    setenv("TERN_REPACK_CACHE", below, 1);
    expect_after("the cache directory is a file", model, cpath, ref, nv, "memory");
    char ro[1200];
    snprintf(ro, sizeof ro, "%s/read-only", cache_dir);
    CHECK(mkdir(ro, 0700) == 0 || errno == EEXIST);
    if (geteuid() != 0) {
        CHECK(chmod(ro, 0500) == 0);
        setenv("TERN_REPACK_CACHE", ro, 1);
    } else {
        /* Root writes anywhere: a directory of /proc takes no files. */
        setenv("TERN_REPACK_CACHE", "/proc/self/fdinfo", 1);
    }
    expect_after("a read-only cache directory", model, cpath, ref, nv, "memory");
    chmod(ro, 0700);
    /* The cache off. */
    setenv("TERN_REPACK_CACHE", "off", 1);
    CHECK(run(model, src, sizeof src, lg, NULL, 0) && !strcmp(src, "memory"));
    CHECK(memcmp(lg, ref, sizeof(float) * (size_t)nv) == 0);
    setenv("TERN_REPACK_CACHE", cache_dir, 1);
    /* TERN_REPACK=0: nothing repacked, nothing cached. */
    setenv("TERN_REPACK", "0", 1);
    CHECK(run(model, src, sizeof src, NULL, NULL, 0) && !strcmp(src, "none"));
    unsetenv("TERN_REPACK");

    concurrent_first_loads(model, ref, nv);
    housekeeping(model, cpath);
    free(ref);
    free(lg);
}

/* Logits of the last of toks, decoded one token at a time (stepwise) or as
 * one batch, and the model's arithmetic string and repack source. */
static bool moe_logits(const char *path, bool stepwise, float *logits, char *arith, size_t as,
                       char *src, size_t ss) {
    tn_model *m = NULL;
    tn_ctx *ctx = NULL;
    tn_error err = {0};
    bool ok = tn_model_load(path, tn_model_default_params(), &m, &err) == TN_OK;
    CHECKF(ok, "load %s: %s", path, err.message);
    if (!ok)
        return false;
    snprintf(arith, as, "%s", tn_model_arithmetic(m));
    snprintf(src, ss, "%s", tn_model_repack_source(m));
    ok = tn_ctx_new(m, 64, 2, &ctx, &err) == TN_OK;
    for (int32_t i = 0; ok && i < (stepwise ? NT : 1); i++)
        ok = tn_ctx_decode(ctx, stepwise ? &toks[i] : toks, stepwise ? 1 : NT, TN_LOGITS_LAST,
                           logits, &err) == TN_OK;
    CHECKF(ok, "decode %s: %s", path, err.message);
    tn_ctx_free(ctx);
    tn_model_free(m);
    return ok;
}

/* A mixture's experts (issue 23): with the cache on they are repacked
 * straight into its file (never into private memory) and read from there
 * in the X16 layout ("/exp16" in the arithmetic); without a usable cache
 * they stay in the model file's rows, bit for bit as with the cache off. A
 * cache file made from an expert poisoned with NaN is refused and removed,
 * even when the expert check was put off because a cache file existed. */
static void moe_model(const char *type) {
    char model[1100];
    const char *tmp = tn_test_tmpdir();
    snprintf(model, sizeof model, "%s/moe-%s.gguf", tmp, type);
    snprintf(cache_dir, sizeof cache_dir, "%s/cache-moe-%s", tmp, type);
    tn_mkmodel_params p = tn_test_tiny_model("qwen3moe", 23);
    p.type = type;
    p.n_embd = 256; /* K-quants: whole super-blocks, rows and columns */
    p.n_ff = 512;
    p.n_ff_exp = 256;
    p.n_head = 4;
    p.head_dim = 64;
    tn_error err = {0};
    CHECKF(tn_mkmodel(&p, model, &err) == TN_OK, "mkmodel moe %s: %s", type, err.message);
    const int nv = n_vocab_of(model);
    CHECK(nv > 0);
    if (nv <= 0)
        return;
    const size_t lb = sizeof(float) * (size_t)nv;
    float *ref = malloc(lb), *lg = malloc(lb), *step = malloc(lb);
    char arith[96], src[32];
    setenv("TERN_REPACK_CACHE", "0", 1);
    CHECK(moe_logits(model, false, ref, arith, sizeof arith, src, sizeof src));
    if (!strcmp(src, "none")) {
        fprintf(stderr, "moe %s: no faster layout on this CPU: nothing to cache\n", type);
        goto out;
    }
    CHECKF(!strstr(arith, "exp16"), "cache off: arithmetic %s", arith);

    /* No usable directory: the dense matrices go private, the experts stay. */
    char blocked[1200];
    snprintf(blocked, sizeof blocked, "%s/moe-%s.gguf/cache", tmp, type); /* under a file */
    setenv("TERN_REPACK_CACHE", blocked, 1);
    CHECK(moe_logits(model, false, lg, arith, sizeof arith, src, sizeof src));
    CHECKF(!strcmp(src, "memory") && !strstr(arith, "exp16"), "unusable cache: %s, %s", src,
           arith);
    CHECKF(memcmp(lg, ref, lb) == 0, "unusable cache: the experts' logits changed");

    setenv("TERN_REPACK_CACHE", cache_dir, 1);
    CHECK(moe_logits(model, false, lg, arith, sizeof arith, src, sizeof src));
    CHECKF(!strcmp(src, "cache-new") && strstr(arith, "/exp16"), "first load: %s, %s", src,
           arith);
    /* Another kernel family for the experts: close to the rows' logits,
     * not the same bits (a pin keyed "/exp16" is not restored without). */
    float scale = 0, diff = 0;
    for (int i = 0; i < nv; i++) {
        scale = fmaxf(scale, fabsf(ref[i]));
        diff = fmaxf(diff, fabsf(lg[i] - ref[i]));
    }
    CHECKF(scale > 0 && diff <= 0.02f * scale, "X16 experts: logits off by %g (of %g)",
           (double)diff, (double)scale);
    /* Batch-invariant (speculation's verify relies on it): one token at a
     * time gives the batch's bits; and the mapped file gives the first
     * load's bits. */
    CHECK(moe_logits(model, true, step, arith, sizeof arith, src, sizeof src));
    CHECKF(!strcmp(src, "cache") && strstr(arith, "/exp16"), "second load: %s, %s", src, arith);
    CHECKF(memcmp(step, lg, lb) == 0, "X16 experts: stepwise logits differ from the batch's");
    int caches, temps;
    count_files(cache_dir, &caches, &temps);
    CHECKF(caches == 1 && temps == 0, "cache dir: %d files, %d temporary", caches, temps);

    /* An expert's scale turned NaN in place, the file's mtime put back:
     * the cache file still looks like this model's, so the expert check
     * waits for prepare; the key (ctime) differs, so the cache is rebuilt
     * from the poisoned weights, and then the check must refuse the model
     * and remove what it wrote. */
    tn_gguf *g = NULL;
    long pos = -1;
    /* The f16 scale at the start of the block in the middle of the tensor
     * (Q8_0: d; Q4_K: d, then dmin). */
    if (tn_gguf_open(model, &g, &err) == TN_OK) {
        const tn_gguf_tensor *t = tn_gguf_find_tensor(g, "blk.1.ffn_up_exps.weight");
        const size_t bsize = t ? tn_type_block_bytes(t->type) : 0;
        if (bsize)
            pos = (long)(tn_gguf_data_offset(g) + t->offset + (t->nbytes / 2) / bsize * bsize);
        tn_gguf_close(g);
    }
    struct stat before;
    CHECK(pos > 0 && stat(model, &before) == 0);
    const uint8_t nan16[2] = {0x00, 0x7e};
    FILE *f = fopen(model, "r+b");
    CHECK(f && fseek(f, pos, SEEK_SET) == 0 && fwrite(nan16, 1, 2, f) == 2);
    if (f)
        fclose(f);
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    CHECK(utimensat(AT_FDCWD, model, times, 0) == 0);
    tn_model *m = NULL;
    int rc = tn_model_load(model, tn_model_default_params(), &m, &err);
    CHECKF(rc == TN_ERR_FORMAT && strstr(err.message, "ffn_up_exps") && strstr(err.message, "NaN"),
           "poisoned expert behind a cache file: rc %d: %s", rc, rc ? err.message : "loaded");
    tn_model_free(m);
    count_files(cache_dir, &caches, &temps);
    CHECKF(caches == 0 && temps == 0, "after the refusal: %d cache files, %d temporary", caches,
           temps);
    m = NULL;
    rc = tn_model_load(model, tn_model_default_params(), &m, &err);
    CHECKF(rc == TN_ERR_FORMAT && strstr(err.message, "NaN"), "poisoned expert: rc %d", rc);
    tn_model_free(m);
out:
    restore_cache_env();
    free(ref);
    free(lg);
    free(step);
}

/* ------------------------------------------------ the default (issue 23) */

/* Where TERN_REPACK_CACHE puts the cache: unset or empty is the default
 * (on, at the XDG place); "1"/"on" the same place, asked for; an absolute
 * path there; "0"/"off" and anything else off. */
static void expect_dir(const char *value, const char *xdg, const char *home, const char *want,
                       tn_repack_cache_setting want_set) {
    if (value)
        setenv("TERN_REPACK_CACHE", value, 1);
    else
        unsetenv("TERN_REPACK_CACHE");
    if (xdg)
        setenv("XDG_CACHE_HOME", xdg, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    setenv("HOME", home, 1);
    char *dir = NULL;
    const tn_repack_cache_setting set = tn_repack_cache_config(&dir);
    char *dir2 = tn_repack_cache_dir();
    CHECKF(set == want_set, "TERN_REPACK_CACHE=%s: setting %d, expected %d",
           value ? value : "(unset)", (int)set, (int)want_set);
    CHECKF(want ? dir && !strcmp(dir, want) : !dir, "TERN_REPACK_CACHE=%s XDG_CACHE_HOME=%s: %s",
           value ? value : "(unset)", xdg ? xdg : "(unset)", dir ? dir : "(none)");
    CHECKF((!dir && !dir2) || (dir && dir2 && !strcmp(dir, dir2)),
           "tn_repack_cache_dir and tn_repack_cache_config disagree");
    free(dir);
    free(dir2);
}

static void default_dirs(void) {
    expect_dir(NULL, "/x/cache", "/h", "/x/cache/tern/repack", TN_REPACK_CACHE_DEFAULT);
    expect_dir("", "/x/cache", "/h", "/x/cache/tern/repack", TN_REPACK_CACHE_DEFAULT);
    expect_dir(NULL, NULL, "/h", "/h/.cache/tern/repack", TN_REPACK_CACHE_DEFAULT);
    /* The XDG spec: a relative XDG_CACHE_HOME is ignored. */
    expect_dir(NULL, "relative/cache", "/h", "/h/.cache/tern/repack", TN_REPACK_CACHE_DEFAULT);
    expect_dir(NULL, "relative/cache", "relative-home", NULL, TN_REPACK_CACHE_DEFAULT);
    expect_dir("1", "/x/cache", "/h", "/x/cache/tern/repack", TN_REPACK_CACHE_ASKED);
    expect_dir("on", NULL, "/h", "/h/.cache/tern/repack", TN_REPACK_CACHE_ASKED);
    expect_dir("/some/dir", "/x/cache", "/h", "/some/dir", TN_REPACK_CACHE_ASKED);
    expect_dir("0", "/x/cache", "/h", NULL, TN_REPACK_CACHE_OFF_ASKED);
    expect_dir("off", "/x/cache", "/h", NULL, TN_REPACK_CACHE_OFF_ASKED);
    expect_dir("yes", "/x/cache", "/h", NULL, TN_REPACK_CACHE_NOT_UNDERSTOOD);
    expect_dir("some/dir", "/x/cache", "/h", NULL, TN_REPACK_CACHE_NOT_UNDERSTOOD);
    restore_cache_env();
}

/* One load of the default setting's cases: the model, and what the last
 * load did and said. */
typedef struct dload {
    char model[1100];
    size_t lb;  /* bytes of logits: n_vocab floats */
    float *ref; /* the logits with the cache off */
    float *lg;  /* the last load's logits */
    char src[32], arith[96], path[1024];
    char text[8192]; /* what it wrote on stderr */
} dload;

static void load_as(dload *d, const char *what, const char *want_src, int exp16,
                    const float *ref);

/* Writes the model p at TMP/name and loads it with the cache off for
 * d->ref: false when that fails, or when this CPU has no faster layout
 * (nothing to cache; said). dload_end in either case. */
static bool dload_start(dload *d, const tn_mkmodel_params *p, const char *name) {
    *d = (dload){.lb = 0};
    snprintf(d->model, sizeof d->model, "%s/%s", tn_test_tmpdir(), name);
    tn_error err = {0};
    CHECKF(tn_mkmodel(p, d->model, &err) == TN_OK, "mkmodel %s: %s", name, err.message);
    const int nv = n_vocab_of(d->model);
    CHECK(nv > 0);
    if (nv <= 0)
        return false;
    d->lb = sizeof(float) * (size_t)nv;
    d->ref = malloc(d->lb);
    d->lg = malloc(d->lb);
    setenv("TERN_REPACK_CACHE", "0", 1);
    load_as(d, "cache off", d->src, 0, NULL);
    memcpy(d->ref, d->lg, d->lb);
    unsetenv("TERN_REPACK_CACHE");
    if (!strcmp(d->src, "none"))
        fprintf(stderr, "%s: no faster layout on this CPU: nothing to cache\n", name);
    return strcmp(d->src, "none") != 0;
}

/* Puts back what the default setting's cases change. */
static void dload_end(dload *d) {
    unsetenv("TERN_REPACK_CACHE_MIN_FREE_MB");
    unsetenv("TERN_REPACK_CACHE_MAX_MB");
    tn_repack_cache_force_pages(TN_REPACK_PAGES_UNKNOWN);
    restore_cache_env();
    free(d->ref);
    free(d->lg);
}

/* Loads d->model with stderr captured (and echoed) and decodes toks:
 * checks that the repack source is want_src, that the experts are read as
 * X16 ("/exp16" in the arithmetic) when exp16 is 1 and not when 0 (-1:
 * either), and, when ref, that the logits are ref's. */
static void load_as(dload *d, const char *what, const char *want_src, int exp16,
                    const float *ref) {
    char file[1200];
    snprintf(file, sizeof file, "%s/stderr.txt", tn_test_tmpdir());
    fflush(stderr);
    const int saved = dup(2);
    const int fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(saved >= 0 && fd >= 0 && dup2(fd, 2) >= 0);
    tn_model *m = NULL;
    tn_ctx *ctx = NULL;
    tn_error err = {0};
    bool ok = tn_model_load(d->model, tn_model_default_params(), &m, &err) == TN_OK;
    snprintf(d->src, sizeof d->src, "%s", ok ? tn_model_repack_source(m) : "(no load)");
    snprintf(d->arith, sizeof d->arith, "%s", ok ? tn_model_arithmetic(m) : "");
    snprintf(d->path, sizeof d->path, "%s", ok ? tn_model_repack_cache_path(m) : "");
    ok = ok && tn_ctx_new(m, 64, 2, &ctx, &err) == TN_OK &&
         tn_ctx_decode(ctx, toks, NT, TN_LOGITS_LAST, d->lg, &err) == TN_OK;
    tn_ctx_free(ctx);
    tn_model_free(m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t k = pread(fd, d->text, sizeof d->text - 1, 0);
    d->text[k > 0 ? k : 0] = '\0';
    close(fd);
    unlink(file);
    fputs(d->text, stderr);
    CHECKF(ok, "%s: load %s: %s", what, d->model, err.message);
    CHECKF(!strcmp(d->src, want_src), "%s: source %s, expected %s", what, d->src, want_src);
    if (exp16 >= 0)
        CHECKF((strstr(d->arith, "/exp16") != NULL) == (exp16 == 1), "%s: arithmetic %s", what,
               d->arith);
    if (ref)
        CHECKF(ok && memcmp(d->lg, ref, d->lb) == 0, "%s: other logits", what);
}

/* The last load said one "tern: repack cache:" line holding `words`, or
 * (words NULL) nothing about the cache. */
static void expect_said(const dload *d, const char *what, const char *words) {
    if (!words) {
        CHECKF(!strstr(d->text, "repack cache"), "%s: said %s", what, d->text);
        return;
    }
    const char *line = strstr(d->text, "tern: repack cache: ");
    CHECKF(line && strstr(line, words) && !strstr(line + 1, "tern: repack cache: "),
           "%s: no one line with '%s' on stderr", what, words);
}

static int count_caches(const char *dir) {
    int caches, temps;
    count_files(dir, &caches, &temps);
    return caches;
}

/* The kernel's own answer, found the way the engine should find it: a
 * fresh 8 MiB file in dir, its pages dropped, mapped 2 MiB aligned with
 * MADV_HUGEPAGE and read: 1 when smaps shows it PMD-mapped, 0 when not, -1
 * when it cannot be told (then the test skips that assertion). */
static int kernel_maps_huge(const char *dir) {
    char path[1300];
    snprintf(path, sizeof path, "%s/.probe-oracle", dir);
    const size_t huge = (size_t)2 << 20, size = 4 * huge;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    unlink(path);
    char *block = calloc(1, huge);
    bool ok = block != NULL;
    for (size_t off = 0; ok && off < size; off += huge)
        ok = pwrite(fd, block, huge, (off_t)off) == (ssize_t)huge;
    free(block);
    ok = ok && fsync(fd) == 0 && posix_fadvise(fd, 0, (off_t)size, POSIX_FADV_DONTNEED) == 0;
    uint8_t *res = ok ? mmap(NULL, size + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                      : MAP_FAILED;
    int verdict = -1;
    if (res != MAP_FAILED) {
        uint8_t *at = (uint8_t *)(((uintptr_t)res + huge - 1) & ~(uintptr_t)(huge - 1));
        if (mmap(at, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED) {
            madvise(at, size, MADV_HUGEPAGE);
            (void)*(volatile uint8_t *)(at + huge);
            FILE *f = fopen("/proc/self/smaps", "r");
            char line[4096];
            bool in = false;
            while (f && fgets(line, sizeof line, f)) {
                unsigned long lo, hi;
                long kb;
                if (line[strspn(line, "0123456789abcdef")] == '-' &&
                    sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
                    if (in)
                        break;
                    in = (uintptr_t)at >= lo && (uintptr_t)at < hi;
                } else if (in && sscanf(line, "FilePmdMapped: %ld kB", &kb) == 1) {
                    verdict = kb > 0;
                    break;
                }
            }
            if (f)
                fclose(f);
        }
        munmap(res, size + huge);
    }
    close(fd);
    return verdict;
}

static bool thp_not_never(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char b[128] = "";
    if (f) {
        if (!fgets(b, sizeof b, f))
            b[0] = '\0';
        fclose(f);
    }
    return b[0] && !strstr(b, "[never]");
}

/* The default setting on a dense model of 11 MB (a payload on 2 MiB
 * boundaries): where the cache's pages are 4 KiB (forced here) the load
 * keeps the weights private ("memory", the same logits), says so once on
 * stderr, writes no cache file (the pages are checked before: no file is
 * named) and remembers the verdict in DIR/pages, so that the next load
 * neither checks nor writes a file; asked for explicitly, the cache is
 * used anyway. Then the kernel's own check, where the page cache has 2
 * MiB folios: "cache-new", verdict 2 MiB; and in /dev/shm, when it is
 * another file system, the same against the test's own probe there. */
static void default_pages(void) {
    const char *tmp = tn_test_tmpdir();
    char xdg[1100], dir[1200];
    snprintf(xdg, sizeof xdg, "%s/xdg-pages", tmp);
    snprintf(dir, sizeof dir, "%s/tern/repack", xdg);
    tn_mkmodel_params p = tn_test_tiny_model("llama", 31);
    p.n_embd = 256;
    p.n_ff = 2048;
    p.n_head = 4;
    p.head_dim = 64;
    p.n_layer = 6;
    dload d;
    if (!dload_start(&d, &p, "pages-q8_0.gguf"))
        goto out;
    const float *ref = d.ref;
    setenv("XDG_CACHE_HOME", xdg, 1);

    tn_repack_cache_force_pages(TN_REPACK_PAGES_4K);
    load_as(&d, "4 KiB pages, default", "memory", -1, ref);
    expect_said(&d, "4 KiB pages", "4 KiB pages");
    expect_said(&d, "4 KiB pages", "this process's memory");
    CHECKF(!d.path[0], "4 KiB pages: a cache file was named (written?): %s", d.path);
    CHECKF(tn_repack_cache_pages(dir) == TN_REPACK_PAGES_4K, "4 KiB pages: verdict %d",
           (int)tn_repack_cache_pages(dir));
    CHECKF(count_caches(dir) == 0, "4 KiB pages: %d cache files left", count_caches(dir));
    /* The next load honours the verdict: it does not check (forced to say
     * 2 MiB, a check would use the cache) and writes nothing; silent. */
    tn_repack_cache_force_pages(TN_REPACK_PAGES_2M);
    load_as(&d, "4 KiB verdict remembered", "memory", -1, ref);
    expect_said(&d, "4 KiB verdict remembered", NULL);
    CHECKF(count_caches(dir) == 0, "4 KiB verdict remembered: %d cache files written",
           count_caches(dir));
    /* Asked for: used anyway, whatever the pages. */
    tn_repack_cache_force_pages(TN_REPACK_PAGES_4K);
    setenv("TERN_REPACK_CACHE", dir, 1);
    load_as(&d, "4 KiB pages, TERN_REPACK_CACHE=DIR", "cache-new", -1, ref);
    setenv("TERN_REPACK_CACHE", "1", 1);
    load_as(&d, "4 KiB pages, TERN_REPACK_CACHE=1", "cache", -1, NULL);
    unsetenv("TERN_REPACK_CACHE");
    /* The default ignores the file the explicit loads left. */
    load_as(&d, "4 KiB verdict, a file there", "memory", -1, NULL);
    /* Clearing the cache forgets the verdict: the next load checks again. */
    CHECK(tn_repack_cache_clear(dir, NULL) == TN_OK);
    CHECK(tn_repack_cache_pages(dir) == TN_REPACK_PAGES_UNKNOWN);
    tn_repack_cache_force_pages(TN_REPACK_PAGES_2M);
    load_as(&d, "2 MiB pages, default", "cache-new", -1, ref);
    CHECKF(tn_repack_cache_pages(dir) == TN_REPACK_PAGES_2M, "2 MiB pages: verdict %d",
           (int)tn_repack_cache_pages(dir));
    expect_said(&d, "2 MiB pages", NULL);
    /* A verdict made on another kernel or file system is not this one's. */
    {
        char marker[1300];
        snprintf(marker, sizeof marker, "%s/pages", dir);
        FILE *f = fopen(marker, "w");
        CHECK(f && fputs("tern repack pages 1\ndevice 1\nfstype 0\nkernel 0.0\npages 4k\n", f) >= 0);
        if (f)
            fclose(f);
        CHECK(tn_repack_cache_pages(dir) == TN_REPACK_PAGES_UNKNOWN);
    }

    /* The kernel's own check (no forcing), in a fresh directory of this
     * file system, then of /dev/shm (tmpfs: 4 KiB pages unless its huge
     * pages are on) when that is another one. */
    tn_repack_cache_force_pages(TN_REPACK_PAGES_UNKNOWN);
    struct stat a, b;
    const bool shm = stat(tmp, &a) == 0 && stat("/dev/shm", &b) == 0 && a.st_dev != b.st_dev &&
                     access("/dev/shm", W_OK) == 0;
    for (int where = 0; where < (shm ? 2 : 1); where++) {
        if (where == 0)
            snprintf(xdg, sizeof xdg, "%s/xdg-pages-real", tmp);
        else
            snprintf(xdg, sizeof xdg, "/dev/shm/tern-test-pages-%d", (int)getpid());
        snprintf(dir, sizeof dir, "%s/tern/repack", xdg);
        setenv("XDG_CACHE_HOME", xdg, 1);
        load_as(&d, "the kernel's check", d.src, -1, ref);
        const int huge = thp_not_never() && !getenv("TERN_THP") ? kernel_maps_huge(dir) : -1;
        const tn_repack_pages v = tn_repack_cache_pages(dir);
        fprintf(stderr, "pages: %s: the kernel maps %s; the load's verdict %s, source %s\n",
                where ? "/dev/shm" : "the test's file system",
                huge < 0 ? "(cannot tell)" : huge ? "2 MiB pages" : "4 KiB pages",
                v == TN_REPACK_PAGES_2M ? "2 MiB" : v == TN_REPACK_PAGES_4K ? "4 KiB" : "none",
                d.src);
        if (huge == 1)
            CHECKF(v == TN_REPACK_PAGES_2M && !strcmp(d.src, "cache-new"),
                   "the page cache has 2 MiB folios, but: verdict %d, source %s", (int)v, d.src);
        else if (huge == 0)
            CHECKF(v == TN_REPACK_PAGES_4K && !strcmp(d.src, "memory") && !d.path[0],
                   "the page cache has 4 KiB pages, but: verdict %d, source %s, file %s", (int)v,
                   d.src, d.path);
        else
            fprintf(stderr, "pages: SKIP the kernel's verdict (THP off or no smaps)\n");
        if (where == 1) {
            CHECK(tn_repack_cache_clear(dir, NULL) == TN_OK);
            char part[1300];
            rmdir(dir);
            snprintf(part, sizeof part, "%s/tern", xdg);
            rmdir(part);
            CHECKF(rmdir(xdg) == 0, "%s left behind", xdg);
        }
    }
out:
    dload_end(&d);
}

static void put_text(const char *dir, const char *name, const char *text) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0);
    if (f)
        fclose(f);
}

static bool exists_in(const char *dir, const char *name) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* TERN_REPACK_CACHE=DIR may name a directory that holds the user's own
 * files: clearing takes the cache's files only, a room marker by its
 * exact name (32 hex digits, ".x16.room") and DIR/pages by its first
 * line, never another "*.room" or a "pages" of the user's. */
static void clear_keeps_foreign_files(void) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/foreign", tn_test_tmpdir());
    CHECK(mkdir(dir, 0700) == 0);
    static const char ours[] = "0123456789abcdef0123456789abcdef.x16.room";
    put_text(dir, ours, "max\n");
    put_text(dir, "living.room", "a user's file\n");
    put_text(dir, "0123456789ABCDEF0123456789ABCDEF.x16.room", "not hex as tern writes it\n");
    put_text(dir, "pages", "a user's pages\n");
    CHECK(tn_repack_cache_clear(dir, NULL) == TN_OK);
    CHECKF(!exists_in(dir, ours), "clear left the room marker %s", ours);
    CHECKF(exists_in(dir, "living.room"), "clear deleted a user's living.room");
    CHECKF(exists_in(dir, "0123456789ABCDEF0123456789ABCDEF.x16.room"),
           "clear deleted a user's file named like a marker in capitals");
    CHECKF(exists_in(dir, "pages"), "clear deleted a user's file named pages");
    put_text(dir, "pages", "tern repack pages 1\ndevice 1\nfstype 0\nkernel 0.0\npages 4k\n");
    CHECK(tn_repack_cache_clear(dir, NULL) == TN_OK);
    CHECKF(!exists_in(dir, "pages"), "clear left the page verdict");
}

/* Loads d->model in a child process whose file size limit (ulimit -f,
 * RLIMIT_FSIZE) is `limit` bytes, its stderr on /dev/null (a device: no
 * limit), and decodes toks: true when the child exits by itself with
 * d->ref's logits. A write or a posix_fallocate past the limit raises
 * SIGXFSZ, whose default action ends the process. */
static bool load_under_fsize_limit(const dload *d, rlim_t limit, const char *what) {
    fflush(stderr);
    pid_t kid = fork();
    if (kid == 0) {
        struct rlimit rl;
        int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (nul < 0 || dup2(nul, 2) < 0 || getrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        rl.rlim_cur = limit;
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        tn_model *m = NULL;
        tn_ctx *ctx = NULL;
        float *lg = malloc(d->lb);
        bool ok = lg && tn_model_load(d->model, tn_model_default_params(), &m, NULL) == TN_OK &&
                  tn_ctx_new(m, 64, 2, &ctx, NULL) == TN_OK &&
                  tn_ctx_decode(ctx, toks, NT, TN_LOGITS_LAST, lg, NULL) == TN_OK;
        ok = ok && memcmp(lg, d->ref, d->lb) == 0;
        tn_ctx_free(ctx);
        tn_model_free(m);
        free(lg);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    const bool waited = kid > 0 && waitpid(kid, &status, 0) == kid;
    const bool ok = waited && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    CHECKF(ok, "%s: the loading process %s %d", what,
           waited && WIFSIGNALED(status) ? "was killed by signal" : "exited with",
           waited && WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return ok;
}

/* A file size limit below what the cache writes: the load goes on as
 * with no room (the same logits), it does not end by SIGXFSZ. A dense
 * model under ulimit -f 1024 (1 MiB): with the kernel's own check (the 4
 * MiB probe, when transparent huge pages are on), then with 2 MiB pages
 * forced (the cache file itself, 11 MB). A mixture without room for its
 * experts, whose dense matrices' file is there: under ulimit -f 0 only
 * the 4-byte "no room" marker is left to write. */
static void default_fsize_limit(void) {
    char xdg[1100], marker[1300];
    tn_mkmodel_params p = tn_test_tiny_model("llama", 43);
    p.n_embd = 256;
    p.n_ff = 2048;
    p.n_head = 4;
    p.head_dim = 64;
    p.n_layer = 6;
    dload d;
    if (dload_start(&d, &p, "fsize-q8_0.gguf")) {
        snprintf(xdg, sizeof xdg, "%s/xdg-fsize", tn_test_tmpdir());
        setenv("XDG_CACHE_HOME", xdg, 1);
        load_under_fsize_limit(&d, (rlim_t)1 << 20, "ulimit -f 1024, the kernel's check");
        tn_repack_cache_force_pages(TN_REPACK_PAGES_2M);
        load_under_fsize_limit(&d, (rlim_t)1 << 20, "ulimit -f 1024, 2 MiB pages");
    }
    dload_end(&d);

    tn_mkmodel_params q = tn_test_tiny_model("qwen3moe", 47);
    q.n_embd = 256;
    q.n_ff = 512;
    q.n_ff_exp = 256;
    q.n_head = 4;
    q.head_dim = 64;
    if (dload_start(&d, &q, "fsize-moe.gguf")) {
        snprintf(xdg, sizeof xdg, "%s/xdg-fsize-moe", tn_test_tmpdir());
        setenv("XDG_CACHE_HOME", xdg, 1);
        setenv("TERN_REPACK_CACHE_MAX_MB", "1", 1);
        load_as(&d, "moe, no room for the experts", "cache-new", 0, d.ref);
        snprintf(marker, sizeof marker, "%s.room", d.path);
        CHECKF(unlink(marker) == 0, "no marker %s", marker);
        load_under_fsize_limit(&d, 0, "ulimit -f 0, the room marker");
    }
    dload_end(&d);
}

/* A cache file that cannot be written for a full disk or a used-up quota
 * (tn_test_fail_writes: the reservation fails with that errno, as
 * posix_fallocate would; neither can be made without root): the load goes
 * on in memory, with the same logits, and its one line says the cause in
 * the words every file Tern writes uses (tn_write_cause), not strerror's
 * "No space left on device" or "Disk quota exceeded". */
static void default_write_causes(void) {
    char xdg[1100];
    tn_mkmodel_params p = tn_test_tiny_model("llama", 53);
    dload d;
    if (dload_start(&d, &p, "cause.gguf")) {
        snprintf(xdg, sizeof xdg, "%s/xdg-cause", tn_test_tmpdir());
        setenv("XDG_CACHE_HOME", xdg, 1);
        const int errs[] = {ENOSPC, EDQUOT};
        for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
            char what[64];
            snprintf(what, sizeof what, "a cache write failing with errno %d", errs[i]);
            tn_test_fail_writes("", errs[i]);
            load_as(&d, what, "memory", -1, d.ref);
            tn_test_fail_writes(NULL, 0);
            expect_said(&d, what, tn_write_cause(errs[i]));
        }
    }
    dload_end(&d);
}

/* The default setting writes a mixture's experts only with room to spare
 * (TERN_REPACK_CACHE_MIN_FREE_MB stands in for the file system's 10 % / 4
 * GiB, TERN_REPACK_CACHE_MAX_MB for the cache's size): without, they stay
 * in the model file's rows (no "/exp16"), the dense matrices still go to
 * the cache, and one line on stderr says why, once: the next load without
 * room is silent, a new reason (or a lack of room after room) is said
 * again; with room, they go in. A file that holds them is used whatever
 * the room. Asked for explicitly: written whatever the room. */
static void default_experts_room(void) {
    char xdg[1100], dir[1200];
    snprintf(xdg, sizeof xdg, "%s/xdg-room", tn_test_tmpdir());
    snprintf(dir, sizeof dir, "%s/tern/repack", xdg);
    tn_mkmodel_params p = tn_test_tiny_model("qwen3moe", 37);
    p.n_embd = 256;
    p.n_ff = 512;
    p.n_ff_exp = 256;
    p.n_head = 4;
    p.head_dim = 64;
    dload d;
    if (!dload_start(&d, &p, "room-moe.gguf"))
        goto out;
    const float *ref = d.ref;
    const char *model = d.model;
    setenv("XDG_CACHE_HOME", xdg, 1);
    const char *no_room = "1000000000000"; /* MiB: no file system has this much free */
    const char *from_rows = "experts are read from the model file";

    setenv("TERN_REPACK_CACHE_MIN_FREE_MB", no_room, 1);
    load_as(&d, "no room for the experts", "cache-new", 0, ref);
    expect_said(&d, "no room", "free");
    expect_said(&d, "no room", from_rows);
    load_as(&d, "no room, again", "cache", 0, ref);
    expect_said(&d, "no room, again: said once", NULL);
    /* Room: the file is rebuilt with the experts. */
    setenv("TERN_REPACK_CACHE_MIN_FREE_MB", "0", 1);
    load_as(&d, "room for the experts", "cache-new", 1, NULL);
    expect_said(&d, "room for the experts", NULL);
    /* A file with the experts is used even without room for another. */
    setenv("TERN_REPACK_CACHE_MIN_FREE_MB", no_room, 1);
    load_as(&d, "the experts' file, no room", "cache", 1, NULL);
    expect_said(&d, "the experts' file, no room", NULL);
    /* No room after room (the file gone): said again. */
    CHECK(tn_repack_cache_forget(dir, model, NULL) == TN_OK);
    load_as(&d, "no room after room", "cache-new", 0, ref);
    expect_said(&d, "no room after room", from_rows);
    /* The cache's size limit: 1 MiB holds no experts. Another reason:
     * said, then not again. */
    setenv("TERN_REPACK_CACHE_MIN_FREE_MB", "0", 1);
    setenv("TERN_REPACK_CACHE_MAX_MB", "1", 1);
    load_as(&d, "experts over TERN_REPACK_CACHE_MAX_MB", "cache", 0, ref);
    expect_said(&d, "over TERN_REPACK_CACHE_MAX_MB", "TERN_REPACK_CACHE_MAX_MB allows");
    load_as(&d, "over TERN_REPACK_CACHE_MAX_MB, again", "cache", 0, ref);
    expect_said(&d, "over TERN_REPACK_CACHE_MAX_MB, again: said once", NULL);
    /* Clearing the cache forgets what was said. */
    CHECK(tn_repack_cache_clear(dir, NULL) == TN_OK);
    load_as(&d, "over TERN_REPACK_CACHE_MAX_MB, cleared", "cache-new", 0, ref);
    expect_said(&d, "over TERN_REPACK_CACHE_MAX_MB, cleared", from_rows);
    unsetenv("TERN_REPACK_CACHE_MAX_MB");
    /* Asked for: the experts are written without looking at the room. */
    CHECK(tn_repack_cache_clear(dir, NULL) == TN_OK);
    setenv("TERN_REPACK_CACHE_MIN_FREE_MB", no_room, 1);
    setenv("TERN_REPACK_CACHE", dir, 1);
    load_as(&d, "TERN_REPACK_CACHE=DIR, no room", "cache-new", 1, NULL);
out:
    dload_end(&d);
}

/* A mixture whose dense matrices make 8 MiB (so that a private copy of
 * them gets 2 MiB pages) where the cache's pages are 4 KiB (forced): the
 * dense matrices are copied into private memory ("memory") and the
 * experts stay X16 in the cache file when the model file is on the same
 * file system (its pages are as small); on another file system (/dev/shm,
 * where it is one) they stay in the model file's rows and no file is
 * written. The logits are those of the explicit cache, or of the cache
 * off. */
static void default_experts_small_pages(void) {
    const char *tmp = tn_test_tmpdir();
    char xdg[1100], dir[1200];
    tn_mkmodel_params p = tn_test_tiny_model("qwen3moe", 41);
    p.n_embd = 1024;
    p.n_head = 8;
    p.n_head_kv = 2;
    p.head_dim = 128;
    p.n_ff = 512;
    p.n_ff_exp = 256;
    p.n_layer = 4;
    dload d;
    float *ref16 = NULL;
    if (!dload_start(&d, &p, "small-pages-moe.gguf"))
        goto out;
    const float *ref = d.ref;
    ref16 = malloc(d.lb);
    snprintf(dir, sizeof dir, "%s/explicit-small-pages", tmp);
    setenv("TERN_REPACK_CACHE", dir, 1);
    load_as(&d, "explicit cache", "cache-new", 1, NULL);
    memcpy(ref16, d.lg, d.lb);
    unsetenv("TERN_REPACK_CACHE");

    snprintf(xdg, sizeof xdg, "%s/xdg-small-pages", tmp);
    snprintf(dir, sizeof dir, "%s/tern/repack", xdg);
    setenv("XDG_CACHE_HOME", xdg, 1);
    /* The room for the experts is default_experts_room's: here any free
     * space will do, whatever the machine's disk holds. */
    setenv("TERN_REPACK_CACHE_MIN_FREE_MB", "0", 1);
    tn_repack_cache_force_pages(TN_REPACK_PAGES_4K);
    load_as(&d, "4 KiB pages, same file system", "memory", 1, ref16);
    CHECKF(d.path[0] && access(d.path, F_OK) == 0, "4 KiB pages: the experts' file is gone");
    expect_said(&d, "4 KiB pages, same file system", "experts stay in the cache file");
    load_as(&d, "4 KiB verdict, same file system", "memory", 1, ref16);
    expect_said(&d, "4 KiB verdict, same file system", NULL);

    /* Another file system: /dev/shm, when it is one. */
    struct stat a, b;
    snprintf(xdg, sizeof xdg, "/dev/shm/tern-test-repack-%d", (int)getpid());
    if (stat(tmp, &a) != 0 || stat("/dev/shm", &b) != 0 || a.st_dev == b.st_dev ||
        access("/dev/shm", W_OK) != 0) {
        fprintf(stderr, "small pages, moe: SKIP another file system (no /dev/shm)\n");
        goto out;
    }
    snprintf(dir, sizeof dir, "%s/tern/repack", xdg);
    setenv("XDG_CACHE_HOME", xdg, 1);
    load_as(&d, "4 KiB pages, another file system", "memory", 0, ref);
    expect_said(&d, "4 KiB pages, another file system", "experts read from the model file");
    CHECKF(!d.path[0] && count_caches(dir) == 0,
           "4 KiB pages, another file system: %d files written", count_caches(dir));
    tn_repack_cache_force_pages(TN_REPACK_PAGES_2M); /* the verdict is remembered */
    load_as(&d, "4 KiB verdict, another file system", "memory", 0, ref);
    CHECKF(count_caches(dir) == 0, "4 KiB verdict, another file system: %d files written",
           count_caches(dir));
    /* Nothing of this test stays in /dev/shm. */
    CHECK(tn_repack_cache_clear(dir, NULL) == TN_OK);
    DIR *dd = opendir(dir);
    for (struct dirent *de; dd && (de = readdir(dd));) {
        char f[1600];
        snprintf(f, sizeof f, "%s/%s", dir, de->d_name);
        if (de->d_name[0] != '.' || (de->d_name[1] && strcmp(de->d_name, "..")))
            unlink(f);
    }
    if (dd)
        closedir(dd);
    char part[1300];
    rmdir(dir);
    snprintf(part, sizeof part, "%s/tern", xdg);
    rmdir(part);
    CHECKF(rmdir(xdg) == 0, "%s left behind", xdg);
out:
    free(ref16);
    dload_end(&d);
}

int main(void) {
    /* Never the user's ~/.cache, whatever the caller's environment says. */
    snprintf(never_home, sizeof never_home, "%s/home-never-written", tn_test_tmpdir());
    const char *suite = getenv("TERN_REPACK_CACHE");
    suite_cache = suite && suite[0] == '/' ? strdup(suite) : NULL;
    restore_cache_env();
    default_dirs();
    default_pages();
    default_experts_room();
    default_experts_small_pages();
    default_fsize_limit();
    default_write_causes();
    clear_keeps_foreign_files();
    one_model("q8_0", false);
    one_model("q4_0", false);
    one_model("q4_k_m", false);
    one_model("q8_0", true);
    moe_model("q8_0");
    moe_model("q4_k_m");
    CHECKF(access(never_home, F_OK) != 0, "a load wrote at the default place, %s", never_home);
    free(suite_cache);
    return tn_test_finish("repack-cache");
}
