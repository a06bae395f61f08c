/* A load cancelled while it runs (tn_model_params.cancelled): the app's
 * Cancel on the loading page, or its window closed, stops a multi-second
 * load of a large model instead of waiting for its end (docs/MODEL.md,
 * "Cancelling a load").
 *
 * Every point at which a load asks is tried: the question is answered "no"
 * k-1 times, then "yes", for k = 1, 2, ... until a load runs to its end
 * without a yes. Each cancelled load must fail with TN_ERR_CANCELLED and
 * the message, own nothing (ASan's leak check, the descriptors), leave no
 * temporary file in the repack cache, and keep a complete cache file; the
 * load after it must give the same logits as a load never cancelled. With
 * the repack cache off, writing a new cache file, and mapping one. */
#include "tn-internal.h"
#include "tn-test.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NT 6

typedef struct asker {
    int asked;
    int yes_at; /* the question answered yes (1-based); 0: never */
} asker;

static bool answer(void *user) {
    asker *a = user;
    a->asked++;
    return a->yes_at > 0 && a->asked >= a->yes_at;
}

/* The engine's test hook runs at the start of each guarded pass (the
 * load's reads of the file): none may start after the yes. */
static const asker *watched;
static int passes_after_yes;

static void pass_hook(const char *pass, void *user) {
    (void)pass;
    (void)user;
    if (watched && watched->yes_at > 0 && watched->asked >= watched->yes_at)
        passes_after_yes++;
}

static bool first_logits(tn_model *m, float *out, int32_t n_vocab) {
    const int32_t toks[NT] = {1, 5, 9, 2, 7, 3};
    tn_ctx *ctx = NULL;
    tn_error err = {0};
    bool ok = tn_ctx_new(m, 64, 1, &ctx, &err) == TN_OK &&
              tn_ctx_decode(ctx, toks, NT, TN_LOGITS_LAST, out, &err) == TN_OK;
    (void)n_vocab;
    tn_ctx_free(ctx);
    return ok;
}

/* Cancels the load of `path` at every question in turn; `cache`: the
 * repack cache's directory (NULL: off), emptied before each load when
 * `fresh` (each load writes the cache file), else holding a complete file
 * made first (each load maps it: it must stay). Returns the number of
 * questions a whole load asks. */
static int sweep(const char *label, const char *path, const char *cache, bool fresh,
                 const float *want, int32_t n_vocab) {
    const bool cache_file_kept = cache && !fresh;
    setenv("TERN_REPACK_CACHE", cache ? cache : "off", 1);
    char cache_file[600] = "";
    if (cache_file_kept) {
        tn_model *m = NULL;
        tn_error err = {0};
        CHECKF(tn_model_load(path, tn_model_default_params(), &m, &err) == TN_OK, "%s: %s",
               label, err.message);
        if (m)
            snprintf(cache_file, sizeof cache_file, "%s", tn_model_repack_cache_path(m));
        tn_model_free(m);
        CHECKF(cache_file[0], "%s: no cache file was made", label);
    }
    float *got = malloc((size_t)n_vocab * sizeof *got);
    int k = 1, cancelled = 0, left_a_file = 0;
    for (;; k++) {
        if (cache && fresh)
            tn_test_empty_dir(cache);
        const int fds = tn_test_count_entries("/proc/self/fd", false);
        asker a = {.yes_at = k};
        tn_model_params mp = tn_model_default_params();
        mp.cancelled = answer;
        mp.cancelled_user = &a;
        tn_model *m = NULL;
        tn_error err = {0};
        watched = &a;
        passes_after_yes = 0;
        int rc = tn_model_load(path, mp, &m, &err);
        watched = NULL;
        if (rc == TN_OK) {
            /* It asked k-1 times and was never told yes: the last point. */
            CHECKF(a.asked == k - 1, "%s: a load that ran to its end asked %d times, not %d",
                   label, a.asked, k - 1);
            CHECKF(first_logits(m, got, n_vocab) &&
                       memcmp(got, want, (size_t)n_vocab * sizeof *got) == 0,
                   "%s: the logits after %d cancelled loads differ", label, cancelled);
            tn_model_free(m);
            break;
        }
        cancelled++;
        CHECKF(rc == TN_ERR_CANCELLED && !m, "%s, yes at question %d: gave %d (%s)", label, k,
               rc, err.message);
        CHECKF(strstr(err.message, "loading was cancelled") && strstr(err.message, path),
               "%s, yes at question %d: message '%s'", label, k, err.message);
        CHECKF(passes_after_yes == 0, "%s: after the yes at question %d, %d passes began", label,
               k, passes_after_yes);
        /* Told yes, it stops at once: no further question. */
        CHECKF(a.asked == k, "%s: after the yes at question %d it asked %d times", label, k,
               a.asked);
        CHECKF(tn_test_count_entries("/proc/self/fd", false) == fds,
               "%s, yes at question %d: %d descriptors before, %d after", label, k, fds,
               tn_test_count_entries("/proc/self/fd", false));
        if (cache)
            CHECKF(tn_test_count_entries(cache, true) == 0,
                   "%s, yes at question %d: a temporary file is left in %s", label, k, cache);
        /* The file is complete only after the last pass: a load told yes
         * at its very last question keeps it (it is valid), no other. */
        if (cache && fresh && tn_test_count_entries(cache, false) > 0)
            left_a_file++;
        if (cache_file_kept) {
            struct stat st;
            CHECKF(stat(cache_file, &st) == 0,
                   "%s, yes at question %d: the complete cache file %s is gone", label, k,
                   cache_file);
        }
        if (k > 10000) {
            CHECKF(false, "%s: still cancelled after 10000 questions", label);
            break;
        }
    }
    CHECKF(left_a_file <= 1, "%s: %d cancelled loads left a cache file", label, left_a_file);
    free(got);
    fprintf(stderr, "load-cancel: %s: %d questions, %d cancelled loads\n", label, k - 1,
            cancelled);
    return k - 1;
}

/* The loads beside a model's: a DFlash or MTP drafter's, a vision
 * projector's. Each asks its question (tn_drafter_params.cancelled,
 * tn_vision_params.cancelled) as the model's load does: before it reads,
 * at each tensor it reads and at its end. */
typedef struct side_load {
    const char *label;
    const char *path;
    const tn_model *target; /* a drafter's; NULL: a projector */
    bool mtp;
} side_load;

static int side_load_run(const side_load *s, asker *a, tn_error *err) {
    if (!s->target) {
        tn_vision_params vp = tn_vision_default_params();
        vp.cancelled = answer;
        vp.cancelled_user = a;
        tn_vision *v = NULL;
        const int rc = tn_vision_load_with(s->path, vp, &v, err);
        CHECKF((rc == TN_OK) == (v != NULL), "%s: gave %d and %s projector", s->label, rc,
               v ? "a" : "no");
        tn_vision_free(v);
        return rc;
    }
    tn_drafter_params dp = tn_drafter_default_params();
    dp.cancelled = answer;
    dp.cancelled_user = a;
    dp.n_threads = 1;
    tn_drafter *d = NULL;
    const int rc = s->mtp ? tn_drafter_new_mtp(s->target, s->path, dp, &d, err)
                          : tn_drafter_new_dflash(s->target, s->path, dp, &d, err);
    CHECKF((rc == TN_OK) == (d != NULL), "%s: gave %d and %s drafter", s->label, rc,
           d ? "a" : "no");
    tn_drafter_free(d);
    return rc;
}

/* Every question answered yes in turn: each such load fails with
 * TN_ERR_CANCELLED and the message, reads nothing after the yes, and
 * leaves no descriptor open (ASan: no memory). Before, none of these
 * loads asked at all. */
static void side_sweep(const side_load *s, int n_tensors) {
    const int fds = tn_test_count_entries("/proc/self/fd", false);
    int k = 1;
    for (;; k++) {
        asker a = {.yes_at = k};
        tn_error err = {0};
        watched = &a;
        passes_after_yes = 0;
        const int rc = side_load_run(s, &a, &err);
        watched = NULL;
        if (rc == TN_OK) {
            CHECKF(a.asked == k - 1, "%s: asked %d times, %d the time before", s->label, a.asked,
                   k - 1);
            break;
        }
        CHECKF(rc == TN_ERR_CANCELLED, "%s: yes at %d gave %d (%s)", s->label, k, rc,
               err.message);
        CHECKF(strstr(err.message, "loading was cancelled") && strstr(err.message, s->path),
               "%s: yes at %d: \"%s\"", s->label, k, err.message);
        CHECKF(passes_after_yes == 0, "%s: yes at %d: %d reads after it", s->label, k,
               passes_after_yes);
        CHECKF(tn_test_count_entries("/proc/self/fd", false) == fds,
               "%s: yes at %d left a descriptor open", s->label, k);
        if (k > 10000) {
            CHECKF(false, "%s: still cancelled after 10000 questions", s->label);
            break;
        }
    }
    CHECKF(k - 1 >= 2 + n_tensors, "%s: only %d questions (%d tensors at least)", s->label,
           k - 1, n_tensors);
    fprintf(stderr, "load-cancel: %s: %d questions\n", s->label, k - 1);
}

static void side_loads(const char *dir) {
    char target_path[512], g4_path[512], df[512], mtp[512], v3[512], v4[512];
    snprintf(target_path, sizeof target_path, "%s/side-target.gguf", dir);
    snprintf(g4_path, sizeof g4_path, "%s/side-gemma4.gguf", dir);
    snprintf(df, sizeof df, "%s/side-dflash.gguf", dir);
    snprintf(mtp, sizeof mtp, "%s/side-mtp.gguf", dir);
    snprintf(v3, sizeof v3, "%s/side-mmproj-gemma3.gguf", dir);
    snprintf(v4, sizeof v4, "%s/side-mmproj-gemma4v.gguf", dir);
    tn_error err = {0};
    tn_mkmodel_params p = tn_test_tiny_model("llama", 11);
    tn_mkmodel_params p4 = tn_test_tiny_model("gemma4", 11);
    tn_mkmodel_dflash_params dp = tn_mkmodel_dflash_default_params();
    dp.target = target_path;
    dp.seed = 31;
    tn_mkmodel_mtp_params mp = tn_mkmodel_mtp_default_params();
    mp.target = g4_path;
    mp.n_embd = p4.n_embd / 2;
    mp.n_layer = 2;
    mp.n_head = 2;
    mp.n_ff = 64;
    mp.seed = 41;
    tn_mkmodel_vision_params vp3 = tn_mkmodel_vision_default_params();
    tn_mkmodel_vision_params vp4 = tn_mkmodel_vision_default_params();
    vp4.projector = "gemma4v";
    if (tn_mkmodel(&p, target_path, &err) != TN_OK || tn_mkmodel(&p4, g4_path, &err) != TN_OK ||
        tn_mkmodel_dflash(&dp, df, &err) != TN_OK || tn_mkmodel_mtp(&mp, mtp, &err) != TN_OK ||
        tn_mkmodel_vision(&vp3, v3, &err) != TN_OK || tn_mkmodel_vision(&vp4, v4, &err) != TN_OK) {
        CHECKF(false, "side loads: mkmodel: %s", err.message);
        return;
    }
    setenv("TERN_REPACK_CACHE", "off", 1);
    tn_model *target = NULL, *g4 = NULL;
    CHECKF(tn_model_load(target_path, tn_model_default_params(), &target, &err) == TN_OK, "%s",
           err.message);
    CHECKF(tn_model_load(g4_path, tn_model_default_params(), &g4, &err) == TN_OK, "%s",
           err.message);
    if (target)
        side_sweep(&(side_load){.label = "DFlash", .path = df, .target = target}, 3);
    if (g4)
        side_sweep(&(side_load){.label = "MTP", .path = mtp, .target = g4, .mtp = true}, 3);
    side_sweep(&(side_load){.label = "projector gemma3", .path = v3}, 3);
    side_sweep(&(side_load){.label = "projector gemma4v", .path = v4}, 3);
    tn_model_free(target);
    tn_model_free(g4);
}

/* The app's way: another thread sets a flag while the load runs. */
typedef struct flag_load {
    const char *path;
    atomic_bool stop;
    atomic_int asked;
    int rc;
} flag_load;

static bool flag_says(void *user) {
    flag_load *f = user;
    atomic_fetch_add(&f->asked, 1);
    return atomic_load(&f->stop);
}

static void *load_with_flag(void *arg) {
    flag_load *f = arg;
    tn_model_params mp = tn_model_default_params();
    mp.cancelled = flag_says;
    mp.cancelled_user = f;
    tn_model *m = NULL;
    tn_error err = {0};
    f->rc = tn_model_load(f->path, mp, &m, &err);
    tn_model_free(m);
    return NULL;
}

int main(void) {
    const char *dir = tn_test_tmpdir();
    char path[512], cache[512];
    snprintf(path, sizeof path, "%s/cancel.gguf", dir);
    tn_mkmodel_params p = tn_test_tiny_model("llama", 11);
    tn_error err = {0};
    if (tn_mkmodel(&p, path, &err) != TN_OK) {
        fprintf(stderr, "mkmodel: %s\n", err.message);
        return 1;
    }
    setenv("TERN_REPACK_CACHE", "off", 1);
    tn_test_read_guard_hook(pass_hook, NULL);
    tn_model *m = NULL;
    if (tn_model_load(path, tn_model_default_params(), &m, &err) != TN_OK) {
        fprintf(stderr, "load: %s\n", err.message);
        return 1;
    }
    const int32_t n_vocab = tn_model_n_vocab(m);
    float *want = malloc((size_t)n_vocab * sizeof *want);
    CHECK(want && first_logits(m, want, n_vocab));
    const uint64_t repacked = tn_model_repacked_bytes(m);
    tn_model_free(m);

    /* Beyond the few points between the load's steps, the passes ask:
     * the NaN/Inf check once per tensor at least, and the repack once per
     * matrix when this CPU repacks. */
    const int off = sweep("cache off", path, NULL, false, want, n_vocab);
    CHECKF(off > 3 + 2 * p.n_layer, "cache off: only %d questions for %d layers", off, (int)
           p.n_layer);

    snprintf(cache, sizeof cache, "%s/cache", dir);
    /* Each cancelled load writes no cache file; the one that runs to its
     * end writes it. */
    const int fresh = sweep("new cache file", path, cache, true, want, n_vocab);
    if (repacked > 0) {
        CHECKF(fresh > off - 1, "new cache file: %d questions, %d with the cache off", fresh, off);
        CHECKF(tn_test_count_entries(cache, false) >= 1, "new cache file: none in %s", cache);
    }
    /* A complete cache file is mapped: cancelled loads keep it. */
    if (repacked > 0)
        sweep("cache file mapped", path, cache, false, want, n_vocab);

    /* Told from another thread, already before the first question. */
    setenv("TERN_REPACK_CACHE", "off", 1);
    flag_load f = {.path = path, .rc = 1};
    atomic_store(&f.stop, true);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, load_with_flag, &f) == 0 && pthread_join(th, NULL) == 0);
    CHECKF(f.rc == TN_ERR_CANCELLED && atomic_load(&f.asked) == 1,
           "flag set before: gave %d after %d questions", f.rc, atomic_load(&f.asked));
    /* Never set: the question costs the load nothing else. */
    f = (flag_load){.path = path, .rc = 1};
    CHECK(pthread_create(&th, NULL, load_with_flag, &f) == 0 && pthread_join(th, NULL) == 0);
    CHECKF(f.rc == TN_OK && atomic_load(&f.asked) == off, "flag never set: gave %d after %d",
           f.rc, atomic_load(&f.asked));
    /* A draft model's load asks through tn_drafter_params (the app's
     * window closing while one loads). */
    {
        tn_model *target = NULL;
        CHECKF(tn_model_load(path, tn_model_default_params(), &target, &err) == TN_OK, "%s",
               err.message);
        asker a = {.yes_at = 5};
        tn_drafter_params dp = tn_drafter_default_params();
        dp.cancelled = answer;
        dp.cancelled_user = &a;
        tn_drafter *d = NULL;
        int rc = target ? tn_drafter_new_model(target, path, dp, &d, &err) : TN_ERR_INVALID;
        CHECKF(rc == TN_ERR_CANCELLED && !d && a.asked == 5,
               "draft model: gave %d (%s) after %d questions", rc, err.message, a.asked);
        tn_drafter_free(d);
        d = NULL;
        a = (asker){0};
        rc = target ? tn_drafter_new_model(target, path, dp, &d, &err) : TN_ERR_INVALID;
        CHECKF(rc == TN_OK && d && a.asked == off, "draft model, never told yes: %d (%s), %d",
               rc, err.message, a.asked);
        tn_drafter_free(d);
        tn_model_free(target);
    }
    side_loads(dir);
    /* A load without the question on the same thread after one with it. */
    CHECKF(tn_model_load(path, tn_model_default_params(), &m, &err) == TN_OK, "%s", err.message);
    tn_model_free(m);
    free(want);
    return tn_test_finish("load-cancel");
}
