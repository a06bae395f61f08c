/* A model file that shrinks while a load reads it (a re-download or a copy
 * over it, a sync tool): the next read of a page past its new end is a
 * SIGBUS. During the load's passes over the mapped file that is an ordinary
 * load error now (tn_guarded_read, engine/error.c), and the process goes on:
 * the next load of a good file works, nothing leaked (ASan), no descriptor
 * or temporary cache file is left. Each pass is cut into deterministically:
 * the engine's test hook runs inside the pass, armed, before it reads, and
 * truncates the file there. Outside those passes a SIGBUS still ends the
 * process, after tn_sigbus_say's message (checked in a child).
 *
 * Under ASan the test runs with ASAN_OPTIONS=handle_sigbus=0
 * (tests/meson.build): libtern hands an unguarded SIGBUS to the handler
 * that was there before its own, which is then the default action the
 * child expects, not ASan's report (exit 1). The guarded loads pass with
 * ASan's default too. */
#include "cpu/tn-cpu.h"
#include "tn-internal.h"
#include "tn-test.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The hook: truncates `path` to `size` in the first pass named `pass`. */
static struct {
    const char *pass;
    const char *path;
    off_t size;
    int fired;
    bool to_head; /* cut to the first page, not to half the file */
    bool to_zero; /* cut to nothing (the head too) */
} cut;

static void cut_hook(const char *pass, void *user) {
    (void)user;
    if (cut.fired || !cut.pass || strcmp(pass, cut.pass))
        return;
    cut.fired = 1;
    if (truncate(cut.path, cut.size) != 0)
        perror("truncate");
}

static off_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void expect_good_load(const char *path, const char *what) {
    tn_model *m = NULL;
    tn_error err = {0};
    int rc = tn_model_load(path, tn_model_default_params(), &m, &err);
    CHECKF(rc == TN_OK && m, "%s: the good file does not load after the fault: %s", what,
           err.message);
    tn_model_free(m);
}

/* Loads a fresh copy of `good` as `victim`, cut to half its size in the
 * pass `pass`: a TN_ERR_IO naming the file, then a good load. `keep`: the
 * victim was loaded before (a cache hit): not copied again. */
static void shrink_in(const char *good, const char *victim, const char *pass, const char *cache,
                      bool keep) {
    if (!keep && !tn_test_copy_file(good, victim)) {
        CHECKF(false, "%s: cannot copy %s", pass, good);
        return;
    }
    const int fds = tn_test_count_entries("/proc/self/fd", false);
    cut.pass = pass;
    cut.path = victim;
    /* Half, on a page boundary: the head (metadata, the first tensors)
     * stays readable, the tail faults. */
    cut.size = cut.to_zero ? 0 : cut.to_head ? 4096 : file_size(victim) / 2 / 4096 * 4096;
    cut.fired = 0;
    tn_model *m = NULL;
    tn_error err = {0};
    int rc = tn_model_load(victim, tn_model_default_params(), &m, &err);
    cut.pass = NULL;
    CHECKF(cut.fired, "%s: the pass never ran", pass);
    CHECKF(rc == TN_ERR_IO && !m, "%s: load gave %d (%s), expected TN_ERR_IO", pass, rc,
           err.message);
    CHECKF(strstr(err.message, "shrank while it was being read") && strstr(err.message, victim),
           "%s: message: %s", pass, err.message);
    tn_model_free(m);
    CHECKF(tn_test_count_entries("/proc/self/fd", false) == fds, "%s: %d descriptors before, %d after",
           pass, fds, tn_test_count_entries("/proc/self/fd", false));
    if (cache)
        CHECKF(tn_test_count_entries(cache, true) == 0, "%s: a temporary file is left in %s", pass,
               cache);
    expect_good_load(good, pass);
}

/* A load on another thread than main (the app's and the server's loads
 * run on a worker thread): the guard is that thread's. */
typedef struct thread_case {
    const char *good, *victim;
} thread_case;

static void *load_on_thread(void *arg) {
    const thread_case *tc = arg;
    shrink_in(tc->good, tc->victim, "repack", NULL, false);
    return NULL;
}

/* Guards nest: a pass under one guard may run another (a load pass that
 * reads a second file under its own guard). A fault in the outer guard's
 * file while the inner one is armed belongs to the outer guard: it must
 * reach it (the error names the outer file), not end the process as an
 * unguarded fault, nor be blamed on the inner guard's file. */
typedef struct nest_case {
    const char *outer_path, *inner_path;
    const volatile uint8_t *outer_map, *inner_map;
    size_t outer_size, inner_size;
    const char *cut_path; /* which file the inner pass truncates and reads */
    int inner_rc;         /* what the inner guard returned (when it did) */
    tn_error inner_err;
    bool inner_returned;
} nest_case;

static void nest_inner(void *arg) {
    nest_case *nc = arg;
    const bool outer = nc->cut_path == nc->outer_path;
    if (truncate(nc->cut_path, 4096) != 0)
        perror("truncate");
    const volatile uint8_t *p = outer ? nc->outer_map : nc->inner_map;
    const size_t size = outer ? nc->outer_size : nc->inner_size;
    uint8_t x = p[size - 1]; /* past the new end: SIGBUS */
    (void)x;
}

static void nest_outer(void *arg) {
    nest_case *nc = arg;
    const tn_read_span inner = {.base = (const void *)nc->inner_map, .size = nc->inner_size,
                                .path = nc->inner_path};
    nc->inner_rc = tn_guarded_read(&inner, 1, "nest-inner", nest_inner, nc, &nc->inner_err);
    nc->inner_returned = true;
}

static const volatile uint8_t *map_whole(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    *size = (size_t)file_size(path);
    void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    fclose(f); /* the mapping keeps the file */
    return p == MAP_FAILED ? NULL : p;
}

static void nested_guards(const char *good, const char *dir) {
    for (int which = 0; which < 2; which++) {
        char outer_path[512], inner_path[512];
        snprintf(outer_path, sizeof outer_path, "%s/nest-outer.gguf", dir);
        snprintf(inner_path, sizeof inner_path, "%s/nest-inner.gguf", dir);
        CHECK(tn_test_copy_file(good, outer_path) && tn_test_copy_file(good, inner_path));
        nest_case nc = {.outer_path = outer_path, .inner_path = inner_path};
        nc.outer_map = map_whole(outer_path, &nc.outer_size);
        nc.inner_map = map_whole(inner_path, &nc.inner_size);
        CHECK(nc.outer_map && nc.inner_map && nc.outer_size > 8192);
        if (!nc.outer_map || !nc.inner_map)
            return;
        nc.cut_path = which == 0 ? outer_path : inner_path;
        const tn_read_span outer = {.base = (const void *)nc.outer_map, .size = nc.outer_size,
                                    .path = outer_path};
        tn_error err = {0};
        int rc = tn_guarded_read(&outer, 1, "nest-outer", nest_outer, &nc, &err);
        if (which == 0) {
            /* The outer file: the outer guard's error; the inner call never
             * returned (its frame was jumped over). */
            CHECKF(rc == TN_ERR_IO && strstr(err.message, outer_path) && !nc.inner_returned,
                   "nested, outer file cut: rc %d, inner returned %d: %s", rc,
                   nc.inner_returned, err.message);
        } else {
            /* The inner file: the inner guard's error, the outer pass goes on. */
            CHECKF(rc == TN_OK && nc.inner_returned && nc.inner_rc == TN_ERR_IO &&
                       strstr(nc.inner_err.message, inner_path),
                   "nested, inner file cut: rc %d, inner rc %d: %s", rc, nc.inner_rc,
                   nc.inner_err.message);
        }
        munmap((void *)nc.outer_map, nc.outer_size);
        munmap((void *)nc.inner_map, nc.inner_size);
    }
}

/* Once a file is open its head (metadata, tensor infos) is read from a
 * copy: a file cut to nothing afterwards still shows every key, string and
 * tensor name, and the tokenizer (which reads the vocabulary's arrays)
 * still loads. They were read from the mapping: a SIGBUS. */
static void head_after_open(const char *good, const char *dir) {
    char victim[512];
    snprintf(victim, sizeof victim, "%s/head.gguf", dir);
    CHECK(tn_test_copy_file(good, victim));
    tn_gguf *g = NULL;
    tn_error err = {0};
    CHECKF(tn_gguf_open(victim, &g, &err) == TN_OK, "%s", err.message);
    if (!g)
        return;
    CHECK(truncate(victim, 0) == 0);
    uint64_t bytes = 0, sum = 0;
    for (int64_t i = 0; i < tn_gguf_n_kv(g); i++) {
        const tn_str k = tn_gguf_kv_key(g, i);
        for (uint64_t j = 0; j < k.len; j++)
            sum += (uint8_t)k.ptr[j];
        bytes += k.len;
        const tn_gguf_value *v = tn_gguf_kv_value(g, i);
        if (v->type == TN_GGUF_STRING)
            for (uint64_t j = 0; j < v->v.str.len; j++, bytes++)
                sum += (uint8_t)v->v.str.ptr[j];
        if (v->type == TN_GGUF_ARRAY && v->v.arr.type == TN_GGUF_STRING)
            for (uint64_t a = 0; a < v->v.arr.n; a++)
                for (uint64_t j = 0; j < v->v.arr.items[a].v.str.len; j++, bytes++)
                    sum += (uint8_t)v->v.arr.items[a].v.str.ptr[j];
        if (v->type == TN_GGUF_ARRAY && v->v.arr.data && v->v.arr.type != TN_GGUF_STRING &&
            v->v.arr.type != TN_GGUF_ARRAY)
            for (uint64_t j = 0; j < v->v.arr.n * tn_gguf_type_size(v->v.arr.type); j++, bytes++)
                sum += v->v.arr.data[j];
    }
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_str n = tn_gguf_tensor_at(g, i)->name;
        for (uint64_t j = 0; j < n.len; j++, bytes++)
            sum += (uint8_t)n.ptr[j];
    }
    CHECKF(bytes > 4096 && sum > 0, "the head: %llu bytes read", (unsigned long long)bytes);
    tn_tokenizer *tok = NULL;
    CHECKF(tn_tokenizer_load(g, &tok, &err) == TN_OK && tn_tokenizer_n_vocab(tok) > 256,
           "the tokenizer after the cut: %s", err.message);
    tn_tokenizer_free(tok);
    tn_gguf_close(g);
}

/* A vision projector (mmproj) cut short while its vectors are read. */
static void vision_shrink(const char *dir) {
    char good[512], victim[512];
    snprintf(good, sizeof good, "%s/mmproj-good.gguf", dir);
    snprintf(victim, sizeof victim, "%s/mmproj-victim.gguf", dir);
    for (int which = 0; which < 2; which++) {
        tn_error err = {0};
        tn_mkmodel_vision_params mp = tn_mkmodel_vision_default_params();
        mp.projector = which ? "gemma4v" : "gemma3";
        CHECKF(tn_mkmodel_vision(&mp, good, &err) == TN_OK, "%s", err.message);
        CHECK(tn_test_copy_file(good, victim));
        const int fds = tn_test_count_entries("/proc/self/fd", false);
        cut.pass = "vision";
        cut.path = victim;
        cut.size = 0;
        cut.fired = 0;
        tn_vision *v = NULL;
        int rc = tn_vision_load(victim, &v, &err);
        cut.pass = NULL;
        CHECKF(cut.fired, "vision %s: the pass never ran", mp.projector);
        CHECKF(rc == TN_ERR_IO && !v && strstr(err.message, "shrank while it was being read") &&
                   strstr(err.message, victim),
               "vision %s: gave %d: %s", mp.projector, rc, err.message);
        tn_vision_free(v);
        CHECKF(tn_test_count_entries("/proc/self/fd", false) == fds, "vision: descriptors %d -> %d", fds,
               tn_test_count_entries("/proc/self/fd", false));
        v = NULL;
        CHECKF(tn_vision_load(good, &v, &err) == TN_OK, "vision %s: the good file: %s",
               mp.projector, err.message);
        tn_vision_free(v);
    }
}

/* A vision projector cut short between two encodings (its matrices are
 * read from the mapping by the encoder and its pool's workers): the next
 * encoding fails with TN_ERR_IO naming the file, as does every later one
 * (the projector remembers), nothing leaks (the encoder's buffers are
 * freed after the guarded step), and a good projector encodes after. It
 * was a SIGBUS in the encoder's matrix products. */
static void vision_encode_shrink(const char *dir) {
    char good[512], victim[512];
    snprintf(good, sizeof good, "%s/mmproj-enc-good.gguf", dir);
    snprintf(victim, sizeof victim, "%s/mmproj-enc-victim.gguf", dir);
    enum { W = 96, H = 80 };
    float *rgb = malloc((size_t)W * H * 3 * sizeof *rgb);
    if (!rgb)
        return;
    for (int i = 0; i < W * H * 3; i++)
        rgb[i] = (float)(i * 37 % 256) / 255.0f;
    for (int which = 0; which < 2; which++) {
        tn_error err = {0};
        tn_mkmodel_vision_params mp = tn_mkmodel_vision_default_params();
        mp.projector = which ? "gemma4v" : "gemma3";
        CHECKF(tn_mkmodel_vision(&mp, good, &err) == TN_OK, "%s", err.message);
        CHECK(tn_test_copy_file(good, victim));
        tn_vision *v = NULL;
        CHECKF(tn_vision_load(victim, &v, &err) == TN_OK, "vision %s: %s", mp.projector,
               err.message);
        if (!v)
            continue;
        float *rows = NULL;
        int n = 0;
        const int budget = which ? 70 : 0;
        CHECKF(tn_vision_encode_new(v, rgb, W, H, budget, 2, &rows, &n, &err) == TN_OK && n > 0,
               "vision %s: the encoding before the cut: %s", mp.projector, err.message);
        free(rows);
        rows = NULL;
        /* what a server's health check asks (tn_vision_weights_check) */
        CHECKF(tn_vision_weights_check(v, &err) == TN_OK, "vision %s: before the cut: %s",
               mp.projector, err.message);
        CHECK(truncate(victim, 0) == 0);
        for (int again = 0; again < 2; again++) {
            int rc = tn_vision_encode_new(v, rgb, W, H, budget, 2 - again, &rows, &n, &err);
            CHECKF(rc == TN_ERR_IO && !rows && strstr(err.message, "shrank while it was being read") &&
                       strstr(err.message, victim),
                   "vision %s: encoding %d after the cut gave %d: %s", mp.projector, again, rc,
                   err.message);
            free(rows);
            rows = NULL;
        }
        err = (tn_error){0};
        int rc = tn_vision_weights_check(v, &err);
        CHECKF(rc == TN_ERR_IO && strstr(err.message, "shrank while it was being read") &&
                   strstr(err.message, victim),
               "vision %s: the check after the cut: %d: %s", mp.projector, rc, err.message);
        tn_vision_free(v);
        v = NULL;
        CHECKF(tn_vision_load(good, &v, &err) == TN_OK &&
                   tn_vision_encode_new(v, rgb, W, H, budget, 2, &rows, &n, &err) == TN_OK,
               "vision %s: the good file after the fault: %s", mp.projector, err.message);
        free(rows);
        tn_vision_free(v);
    }
    free(rgb);
}

/* Another process's cache file, found when ours is written (it finished
 * first), cut short while the load compares it with ours: ours is used
 * (no SIGBUS, no error: the model file is whole). The hook puts a copy of
 * a valid cache file in place during our write, and cuts it in the
 * comparison. */
static struct {
    char saved[600], place[600];
    int stage;
} theirs;

static void theirs_hook(const char *pass, void *user) {
    (void)user;
    if (theirs.stage == 0 && !strcmp(pass, "cache-write")) {
        theirs.stage = 1;
        if (!tn_test_copy_file(theirs.saved, theirs.place))
            perror("copy");
    } else if (theirs.stage == 1 && !strcmp(pass, "cache-theirs")) {
        theirs.stage = 2;
        if (truncate(theirs.place, 4096) != 0)
            perror("truncate");
    }
}

/* The one cache file in dir (its path into out), or false. */
static bool only_cache_file(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    if (!d)
        return false;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t l = strlen(e->d_name);
        if (l > 4 && !strcmp(e->d_name + l - 4, ".x16") && e->d_name[0] != '.') {
            snprintf(out, cap, "%s/%s", dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    return n == 1;
}

static void theirs_shrink(const char *good, const char *dir) {
    char victim[512], cache[512];
    snprintf(victim, sizeof victim, "%s/theirs.gguf", dir);
    snprintf(cache, sizeof cache, "%s/cache-theirs", dir);
    CHECK(tn_test_copy_file(good, victim));
    setenv("TERN_REPACK_CACHE", cache, 1);
    tn_model *m = NULL;
    tn_error err = {0};
    CHECKF(tn_model_load(victim, tn_model_default_params(), &m, &err) == TN_OK, "%s",
           err.message);
    tn_model_free(m);
    m = NULL;
    CHECK(only_cache_file(cache, theirs.place, sizeof theirs.place));
    snprintf(theirs.saved, sizeof theirs.saved, "%s/theirs.saved", dir);
    CHECK(rename(theirs.place, theirs.saved) == 0);
    theirs.stage = 0;
    tn_test_read_guard_hook(theirs_hook, NULL);
    int rc = tn_model_load(victim, tn_model_default_params(), &m, &err);
    tn_test_read_guard_hook(NULL, NULL);
    CHECKF(theirs.stage == 2, "theirs: stage %d (the comparison never ran?)", theirs.stage);
    CHECKF(rc == TN_OK && m, "theirs: gave %d: %s", rc, err.message);
    tn_model_free(m);
    setenv("TERN_REPACK_CACHE", "off", 1);
}

/* Waits for the child pid, checks that a SIGBUS ended it, and puts what it
 * wrote to errfile (its stderr) in text. */
static void child_ended_by_sigbus(pid_t pid, const char *what, const char *errfile, char *text,
                                  size_t cap) {
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
           "%s: status %#x, expected the end by SIGBUS", what, status);
    FILE *f = fopen(errfile, "r");
    size_t n = f ? fread(text, 1, cap - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
}

/* Outside a guarded pass a SIGBUS still ends the process, after
 * tn_sigbus_say's line (and after a guarded fault has been caught on this
 * thread: the handler's chain to the default action still works). */
static void unguarded_still_ends(const char *good, const char *dir) {
    char victim[512];
    snprintf(victim, sizeof victim, "%s/unguarded.gguf", dir);
    char errfile[512];
    snprintf(errfile, sizeof errfile, "%s/unguarded.err", dir);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *e = freopen(errfile, "w", stderr);
        (void)e;
        tn_sigbus_say("load-shrink: the unguarded fault says this");
        shrink_in(good, victim, "finite", NULL, false); /* a caught one first */
        tn_test_copy_file(good, victim);
        FILE *f = fopen(victim, "rb");
        const size_t size = (size_t)file_size(victim);
        const volatile uint8_t *p =
            f ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fileno(f), 0) : MAP_FAILED;
        if (p == MAP_FAILED)
            _exit(3);
        if (truncate(victim, 4096) != 0)
            _exit(4);
        uint8_t x = p[size - 1];
        (void)x;
        _exit(5); /* not reached: the SIGBUS ends the child */
    }
    char text[4096];
    child_ended_by_sigbus(pid, "the unguarded fault", errfile, text, sizeof text);
    CHECKF(strstr(text, "load-shrink: the unguarded fault says this\n") != NULL,
           "the unguarded fault's stderr: %s", text);
}

/* A SIGBUS sent by kill (si_code SI_USER) is no file shrinking under a
 * mapping: it ends the process as ever, without tn_sigbus_say's line
 * (which told the user a model file had been truncated). */
static void sent_sigbus_is_quiet(const char *dir) {
    char errfile[512];
    snprintf(errfile, sizeof errfile, "%s/sent.err", dir);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *e = freopen(errfile, "w", stderr);
        (void)e;
        tn_sigbus_say("load-shrink: a sent SIGBUS must not say this");
        kill(getpid(), SIGBUS);
        _exit(5); /* not reached */
    }
    char text[4096];
    child_ended_by_sigbus(pid, "a sent SIGBUS", errfile, text, sizeof text);
    CHECKF(strstr(text, "must not say this") == NULL, "a sent SIGBUS's stderr: %s", text);
}

/* The checksum of a new cache file, read back through the mapping of its
 * temporary file, with that file cut short under it (by another program:
 * the cache directory is not only Tern's): the load fails naming the
 * temporary file, which is gone after, and a good load follows. It was a
 * SIGBUS. */
static struct {
    const char *dir;
    int fired;
    char tmp[600];
} sum_cut;

static void sum_cut_hook(const char *pass, void *user) {
    (void)user;
    if (sum_cut.fired || strcmp(pass, "cache-checksum"))
        return;
    sum_cut.fired = 1;
    DIR *d = opendir(sum_cut.dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(sum_cut.tmp, sizeof sum_cut.tmp, "%s/%s", sum_cut.dir, e->d_name);
    if (d)
        closedir(d);
    if (!sum_cut.tmp[0] || truncate(sum_cut.tmp, 0) != 0)
        perror("truncate the temporary cache file");
}

static void checksum_shrink(const char *good, const char *victim, const char *dir) {
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache-sum", dir);
    setenv("TERN_REPACK_CACHE", cache, 1);
    CHECK(tn_test_copy_file(good, victim));
    sum_cut.dir = cache;
    sum_cut.fired = 0;
    sum_cut.tmp[0] = '\0';
    const int fds = tn_test_count_entries("/proc/self/fd", false);
    tn_test_read_guard_hook(sum_cut_hook, NULL);
    tn_model *m = NULL;
    tn_error err = {0};
    int rc = tn_model_load(victim, tn_model_default_params(), &m, &err);
    tn_test_read_guard_hook(cut_hook, NULL);
    CHECKF(sum_cut.fired && sum_cut.tmp[0], "cache-checksum: the pass never ran");
    CHECKF(rc == TN_ERR_IO && !m && strstr(err.message, "shrank while it was being read") &&
               sum_cut.tmp[0] && strstr(err.message, sum_cut.tmp),
           "cache-checksum: gave %d: %s", rc, err.message);
    tn_model_free(m);
    CHECKF(tn_test_count_entries("/proc/self/fd", false) == fds, "cache-checksum: descriptors %d -> %d",
           fds, tn_test_count_entries("/proc/self/fd", false));
    CHECKF(tn_test_count_entries(cache, true) == 0, "cache-checksum: a temporary file is left");
    expect_good_load(good, "cache-checksum");
    setenv("TERN_REPACK_CACHE", "off", 1);
}

/* tn_weight_row_f32 of an interleaved (X16) row longer than its 16 KiB
 * stack buffer (Q8_0, 16384 columns: 17408 bytes), the row as the file's
 * layout has it, and then from a mapping cut short under a guard (as a
 * decode step reads an embedding row): TN_ERR_IO, and nothing leaked
 * (ASan's leak check at exit: the row was gathered into a malloc'd buffer
 * that the guard's jump lost). */
typedef struct row_read {
    const tn_weight *w;
    float *out;
    int rc;
} row_read;

static void row_read_run(void *arg) {
    row_read *rr = arg;
    rr->rc = tn_weight_row_f32(rr->w, 3, rr->out);
}

static void long_row_shrink(const char *dir) {
    const int64_t rows = 16, cols = 16384;
    tn_weight w = {.type = TN_TYPE_Q8_0, .rows = rows, .cols = cols,
                   .row_bytes = tn_type_row_bytes(TN_TYPE_Q8_0, (uint64_t)cols)};
    CHECK(w.row_bytes > 16384);
    uint8_t *q = malloc((size_t)rows * w.row_bytes);
    float *src = malloc((size_t)cols * sizeof *src), *want = malloc((size_t)cols * sizeof *want),
          *got = malloc((size_t)cols * sizeof *got);
    if (!q || !src || !want || !got) {
        CHECK(false);
        goto out;
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++)
            src[c] = (float)((r * 7919 + c * 104729) % 2001 - 1000) / 1000.0f;
        CHECK(tn_quantize_row(w.type, src, q + (size_t)r * w.row_bytes, cols) == TN_OK);
    }
    w.data = q;
    const size_t size = tn_weight_repack_size(&w);
    if (size == 0) {
        fprintf(stderr, "load-shrink: no interleaved layout on this CPU: long row skipped\n");
        goto out;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/long-row.x16", dir);
    void *dst = aligned_alloc(64, (size + 63) / 64 * 64);
    tn_weight x;
    CHECK(dst && tn_weight_repack(&w, dst, size, &x) == TN_OK);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(dst, 1, size, f) == size);
    if (f)
        fclose(f);
    free(dst);
    size_t mapped = 0;
    const volatile uint8_t *map = map_whole(path, &mapped);
    CHECK(map && mapped == size);
    if (!map)
        goto out;
    x.data = (const void *)map;
    CHECK(tn_dequantize_row(w.type, q + 3 * w.row_bytes, want, cols) == TN_OK);
    CHECK(tn_weight_row_f32(&x, 3, got) == TN_OK);
    CHECKF(memcmp(want, got, (size_t)cols * sizeof *got) == 0,
           "the long interleaved row differs from the file's");
    CHECK(truncate(path, 0) == 0);
    const tn_read_span span = {.base = (const void *)map, .size = mapped, .path = path};
    row_read rr = {.w = &x, .out = got, .rc = -1};
    tn_error err = {0};
    int rc = tn_guarded_read(&span, 1, "long-row", row_read_run, &rr, &err);
    CHECKF(rc == TN_ERR_IO && strstr(err.message, path), "long row: gave %d: %s", rc,
           err.message);
    munmap((void *)map, mapped);
out:
    free(q);
    free(src);
    free(want);
    free(got);
}

int main(void) {
    const char *dir = tn_test_tmpdir();
    char good[512], victim[512], cache[512];
    snprintf(good, sizeof good, "%s/good.gguf", dir);
    snprintf(victim, sizeof victim, "%s/victim.gguf", dir);
    tn_mkmodel_params p = tn_test_tiny_model("llama", 5);
    tn_error err;
    if (tn_mkmodel(&p, good, &err) != TN_OK) {
        fprintf(stderr, "mkmodel: %s\n", err.message);
        return 1;
    }
    tn_test_read_guard_hook(cut_hook, NULL);

    /* The repack cache off: the NaN/Inf scan, then the private repack. */
    setenv("TERN_REPACK_CACHE", "off", 1);
    shrink_in(good, victim, "finite", NULL, false);
    shrink_in(good, victim, "repack", NULL, false);
    /* The f32 copy of a norm vector, made after its NaN/Inf scan: cut to
     * the first page (metadata only), so that the first vector's copy
     * itself reads past the end. It was unguarded: a truncation between
     * the scan and the copy ended the process (a SIGBUS in load_tensors,
     * seen by truncating a model under 'tern-cli run' at random times). */
    cut.to_head = true;
    shrink_in(good, victim, "convert", NULL, false);
    cut.to_head = false;

    /* A cache directory without a file for the model: the scan, then the
     * repack straight into the new cache file (its temporary file goes). */
    snprintf(cache, sizeof cache, "%s/cache-new", dir);
    setenv("TERN_REPACK_CACHE", cache, 1);
    shrink_in(good, victim, "finite", cache, false);
    shrink_in(good, victim, "cache-write", cache, false);

    /* A cache file made by a load of the victim as it is: the next load's
     * spot check of it against the model file. */
    snprintf(cache, sizeof cache, "%s/cache-hit", dir);
    setenv("TERN_REPACK_CACHE", cache, 1);
    CHECK(tn_test_copy_file(good, victim));
    tn_model *m = NULL;
    CHECKF(tn_model_load(victim, tn_model_default_params(), &m, &err) == TN_OK, "%s",
           err.message);
    CHECKF(m && !strcmp(tn_model_repack_source(m), "cache-new"), "source %s",
           m ? tn_model_repack_source(m) : "-");
    tn_model_free(m);
    shrink_in(good, victim, "cache-check", cache, true);

    setenv("TERN_REPACK_CACHE", "off", 1);
    thread_case tc = {.good = good, .victim = victim};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, load_on_thread, &tc) == 0 && pthread_join(th, NULL) == 0);
    shrink_in(good, victim, "finite", NULL, false); /* main's guard still works after */

    /* A DFlash drafter's norm vectors: the same f32 copy after the scan,
     * from its own file (drafter-dflash.c, tn_gguf_weight_to_f32). */
    {
        char dgood[512], dvictim[512];
        snprintf(dgood, sizeof dgood, "%s/dflash-good.gguf", dir);
        snprintf(dvictim, sizeof dvictim, "%s/dflash-victim.gguf", dir);
        tn_mkmodel_dflash_params dp = tn_mkmodel_dflash_default_params();
        dp.target = good;
        tn_model *target = NULL;
        CHECKF(tn_mkmodel_dflash(&dp, dgood, &err) == TN_OK, "mkmodel dflash: %s", err.message);
        CHECKF(tn_model_load(good, tn_model_default_params(), &target, &err) == TN_OK, "%s",
               err.message);
        CHECK(tn_test_copy_file(dgood, dvictim));
        const int fds = tn_test_count_entries("/proc/self/fd", false);
        cut.pass = "convert";
        cut.path = dvictim;
        cut.size = 4096; /* the head: the first vector's copy reads past it */
        cut.fired = 0;
        tn_drafter *d = NULL;
        int rc = target ? tn_drafter_new_dflash(target, dvictim, tn_drafter_default_params(), &d,
                                                &err)
                        : TN_ERR_INVALID;
        cut.pass = NULL;
        CHECKF(cut.fired, "dflash: the pass never ran");
        CHECKF(rc == TN_ERR_IO && !d, "dflash: gave %d (%s), expected TN_ERR_IO", rc,
               err.message);
        CHECKF(strstr(err.message, "shrank while it was being read") &&
                   strstr(err.message, dvictim),
               "dflash: message: %s", err.message);
        tn_drafter_free(d);
        CHECKF(tn_test_count_entries("/proc/self/fd", false) == fds, "dflash: descriptors %d -> %d", fds,
               tn_test_count_entries("/proc/self/fd", false));
        d = NULL;
        CHECKF(target && tn_drafter_new_dflash(target, dgood, tn_drafter_default_params(), &d,
                                               &err) == TN_OK,
               "dflash: the good file after the fault: %s", err.message);
        tn_drafter_free(d);
        tn_model_free(target);
    }

    /* The GGUF parse (header, metadata, tensor infos) and the copy of the
     * head: cut to nothing, so that its first read faults. */
    setenv("TERN_REPACK_CACHE", "off", 1);
    cut.to_zero = true;
    shrink_in(good, victim, "gguf-parse", NULL, false);
    cut.to_zero = false;
    vision_shrink(dir);
    vision_encode_shrink(dir);

    checksum_shrink(good, victim, dir);
    long_row_shrink(dir);

    tn_test_read_guard_hook(NULL, NULL);
    head_after_open(good, dir);
    theirs_shrink(good, dir);
    nested_guards(good, dir);
    /* The guards are all disarmed again: a guarded load still works. */
    tn_test_read_guard_hook(cut_hook, NULL);
    shrink_in(good, victim, "finite", NULL, false);
    tn_test_read_guard_hook(NULL, NULL);
    unguarded_still_ends(good, dir);
    sent_sigbus_is_quiet(dir);
    return tn_test_finish("load-shrink");
}
