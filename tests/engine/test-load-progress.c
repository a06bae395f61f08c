/* A load's progress (tn_model_params.progress): the app's loading page
 * shows it as a bar, so it must move in steps, only forward, reach 1 once
 * and only on success, and its first estimate must be close enough that
 * the bar neither leaps nor waits at its end (docs/MODEL.md, "Load
 * progress"). With the repack cache off, writing a new cache file and
 * mapping one; on a dense model, Gemma 4 (per-layer embeddings: checked,
 * never repacked) and a mixture (experts: repacked only into a cache file). */
#include "tn-internal.h"
#include "tn-repack-cache.h"
#include "tn-test.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_REPORTS 1000

typedef struct reports {
    float f[MAX_REPORTS];
    int n;
    int yes_at; /* cancel at this question (0: never) */
    int asked;
    int at_repack; /* reports before the first repack pass began (-1: none began) */
    const char *nested; /* a model loaded from inside the third report (NULL: none) */
    int nested_rc;      /* its load's result */
    struct reports *inner; /* its reports */
    float q[MAX_REPORTS];  /* the last report at each question since the repack began */
    int n_q;
    uint64_t checked, repacked; /* the loaded model's weight and repacked bytes */
    int at_checksum;            /* reports before a new cache file's checksum began (-1: none) */
    bool yes_in_checksum;       /* cancel at the first question of the checksum */
    int at_copy;   /* reports before the copy out of a 4 KiB-pages file began (-1: none) */
    int asked_in_copy; /* questions since it began */
    float copy_q[MAX_REPORTS]; /* the last report at each of those questions */
    bool yes_in_copy;  /* cancel at its first question */
} reports;

/* The engine's test hook runs at the start of each guarded pass. */
static reports *watched;

static void pass_hook(const char *pass, void *user) {
    (void)user;
    if (watched && watched->at_repack < 0 &&
        (!strcmp(pass, "repack") || !strcmp(pass, "cache-write")))
        watched->at_repack = watched->n;
    if (watched && watched->at_checksum < 0 && !strcmp(pass, "cache-checksum"))
        watched->at_checksum = watched->n;
    if (watched && watched->at_copy < 0 && !strcmp(pass, "cache-copy"))
        watched->at_copy = watched->n;
}

static int load(const char *path, reports *r);

static void on_progress(float fraction, void *user) {
    reports *r = user;
    if (r->n < MAX_REPORTS)
        r->f[r->n] = fraction;
    r->n++;
    if (r->nested && r->n == 3) {
        reports *outer_watched = watched;
        r->nested_rc = load(r->nested, r->inner);
        watched = outer_watched;
    }
}

/* yes_at < 0: yes once the nested load is done. */
static bool on_question(void *user) {
    reports *r = user;
    r->asked++;
    if (r->at_repack >= 0 && r->n_q < MAX_REPORTS)
        r->q[r->n_q++] = r->n > 0 && r->n <= MAX_REPORTS ? r->f[r->n - 1] : 0.0f;
    if (r->at_copy >= 0 && r->asked_in_copy < MAX_REPORTS)
        r->copy_q[r->asked_in_copy++] = r->n > 0 && r->n <= MAX_REPORTS ? r->f[r->n - 1] : 0.0f;
    if (r->yes_in_checksum)
        return r->at_checksum >= 0;
    if (r->yes_in_copy)
        return r->at_copy >= 0;
    if (r->yes_at < 0)
        return r->nested && r->inner->n > 0 && r->n > 3;
    return r->yes_at > 0 && r->asked >= r->yes_at;
}

static int load(const char *path, reports *r) {
    tn_model_params mp = tn_model_default_params();
    mp.progress = on_progress;
    mp.progress_user = r;
    mp.cancelled = on_question;
    mp.cancelled_user = r;
    tn_model *m = NULL;
    tn_error err = {0};
    r->at_repack = -1;
    r->at_checksum = -1;
    r->at_copy = -1;
    r->asked_in_copy = 0;
    watched = r;
    const int rc = tn_model_load(path, mp, &m, &err);
    watched = NULL;
    if (m) {
        r->checked = tn_model_weight_bytes(m);
        r->repacked = tn_model_repacked_bytes(m);
    }
    tn_model_free(m);
    return rc;
}

/* A whole load: reports in (0, 1], each above the one before, 1 once and
 * last; where the load makes passes (`passes`), at least a few steps
 * and none larger than `max_step` (a leap means an estimate was wrong). */
static void whole(const char *label, const char *path, bool passes, float max_step) {
    reports r = {0};
    CHECKF(load(path, &r) == TN_OK, "%s: the load failed", label);
    CHECKF(r.n >= 1 && r.n <= 101, "%s: %d reports", label, r.n);
    if (r.n < 1 || r.n > MAX_REPORTS)
        return;
    float before = 0.0f, step = 0.0f;
    for (int i = 0; i < r.n; i++) {
        CHECKF(r.f[i] > before && r.f[i] <= 1.0f, "%s: report %d is %g after %g", label, i, r.f[i],
               before);
        if (r.f[i] - before > step)
            step = r.f[i] - before;
        before = r.f[i];
    }
    CHECKF(r.f[r.n - 1] == 1.0f, "%s: the last report is %g", label, r.f[r.n - 1]);
    if (passes) {
        CHECKF(r.n >= 6, "%s: only %d reports", label, r.n);
        CHECKF(step <= max_step, "%s: a step of %.3f (at most %.2f)", label, step, max_step);
    }
    /* Where this CPU repacks: every weight is checked before the repack
     * reads the ones it rewrites (an expert's too, where they go into a
     * cache file), so the bar is then at the checks' share of the bytes,
     * give or take a report's step and the embedding's and the norms' part
     * of the estimate. A first estimate without the repack, or without the
     * experts going into a cache file, would be near the end there and
     * wait through the repack. */
    if (passes && r.at_repack >= 0) {
        const float at = r.at_repack > 0 ? r.f[r.at_repack - 1] : 0.0f;
        const double want = (double)r.checked / (double)(r.checked + r.repacked);
        CHECKF(at > want - 0.1 && at < want + 0.1,
               "%s: %.2f done when the repack began, %.2f of the bytes read", label, at, want);
        CHECKF(r.n - r.at_repack >= 5, "%s: %d reports during the repack", label,
               r.n - r.at_repack);
    }
    /* Writing a new cache file, the checksum that reads it back (a
     * quarter of its bytes) is in the total from the first estimate on:
     * the bar is at the checks' share of all the work when the repack
     * begins. A first estimate without it reached the checks' share of
     * the checks and the repack alone there, and stood still at that
     * figure while the repack caught up with the larger total (a 4.4 GB
     * mixture: 0.51 from 2.4 s to 4.9 s). The payload is the repacked
     * bytes (Q4_0's X16 layout is as large as its rows); a report's step
     * and the norms' part of the estimate are the slack. */
    if (passes && r.at_repack >= 0 && r.at_checksum >= 0) {
        const float at = r.at_repack > 0 ? r.f[r.at_repack - 1] : 0.0f;
        const double want = (double)r.checked / ((double)r.checked + (double)r.repacked * 5 / 4);
        fprintf(stderr, "load-progress: %s: %.3f when the repack began, %.3f of the work\n",
                label, at, want);
        CHECKF(at > want - 0.025 && at < want + 0.025,
               "%s: %.3f done when the repack began, %.3f of the work (its checksum counted)",
               label, at, want);
    }
    /* A new cache file's checksum reads the repacked bytes back (counted
     * as a quarter of them): the bar is short of its end when it begins,
     * not held at 0.99 through it. */
    if (passes && r.at_checksum >= 0) {
        const float at = r.at_checksum > 0 ? r.f[r.at_checksum - 1] : 0.0f;
        const double share =
            (double)r.repacked / 4 / ((double)r.checked + (double)r.repacked * 5 / 4);
        CHECKF(at < 1.0 - share / 2, "%s: %.2f done when the checksum began (its share %.2f)",
               label, at, share);
    }
    fprintf(stderr, "load-progress: %s: %d reports, largest step %.3f, repack from report %d:",
            label, r.n, step, r.at_repack);
    for (int i = 0; i < r.n && i < MAX_REPORTS; i++)
        fprintf(stderr, " %.2f", r.f[i]);
    fprintf(stderr, "\n");
}

/* Cancelled at every third question: it never says 1. */
static void cancelled(const char *label, const char *path) {
    for (int k = 1; k < 200; k += 3) {
        reports r = {.yes_at = k};
        const int rc = load(path, &r);
        if (rc == TN_OK)
            break;
        CHECKF(rc == TN_ERR_CANCELLED, "%s: yes at %d gave %d", label, k, rc);
        for (int i = 0; i < r.n && i < MAX_REPORTS; i++)
            CHECKF(r.f[i] < 1.0f, "%s: cancelled at question %d, report %d was 1", label, k, i);
    }
}

/* A weight with a NaN halfway through the file: the load fails there,
 * its reports below 1 and rising. */
static void damaged(const char *dir, const char *clean) {
    char path[512];
    snprintf(path, sizeof path, "%s/damaged.gguf", dir);
    tn_error err = {0};
    tn_gguf *g = NULL;
    CHECKF(tn_gguf_open(clean, &g, &err) == TN_OK, "%s", err.message);
    if (!g)
        return;
    const tn_gguf_tensor *t = tn_gguf_find_tensor(g, "blk.5.ffn_up.weight");
    const long pos = t ? (long)(tn_gguf_data_offset(g) + t->offset) : -1;
    tn_gguf_close(g);
    const uint16_t nan16 = 0x7e00; /* the first Q4_0 block's scale */
    FILE *f = pos >= 0 && tn_test_copy_file(clean, path) ? fopen(path, "r+b") : NULL;
    bool ok = f && fseek(f, pos, SEEK_SET) == 0 && fwrite(&nan16, 2, 1, f) == 1;
    if (f && fclose(f) != 0)
        ok = false;
    CHECKF(ok, "cannot write %s", path);
    setenv("TERN_REPACK_CACHE", "off", 1);
    reports r = {0};
    CHECKF(load(path, &r) == TN_ERR_FORMAT, "the damaged model loaded");
    CHECKF(r.n >= 3, "the damaged model: %d reports before its NaN", r.n);
    float before = 0.0f;
    for (int i = 0; i < r.n && i < MAX_REPORTS; i++) {
        CHECKF(r.f[i] > before && r.f[i] < 1.0f, "the damaged model: report %d is %g after %g",
               i, r.f[i], before);
        before = r.f[i];
    }
    remove(path);
}

/* The repack's matrices count once they are repacked: when the last one,
 * the LM head (a tenth of this one-layer model's work), begins, the bar
 * is not yet near its end. Counted at their start, it said 0.99 there and
 * waited through the largest matrix (3 s of a 22 s E4B load, ASan build).
 * The questions since the repack began: one at each piece's start, then
 * the load's last. */
static void counted_when_done(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/one-layer.gguf", dir);
    tn_mkmodel_params p = tn_test_tiny_model("llama", 25);
    p.type = "q4_0";
    p.n_layer = 1;
    p.n_embd = 256;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 64;
    p.n_ff = 256;
    tn_error err = {0};
    if (tn_mkmodel(&p, path, &err) != TN_OK) {
        CHECKF(false, "mkmodel one-layer: %s", err.message);
        return;
    }
    setenv("TERN_REPACK_CACHE", "off", 1);
    reports r = {0};
    CHECKF(load(path, &r) == TN_OK, "one-layer: the load failed");
    if (r.at_repack >= 0) { /* this CPU repacks */
        fprintf(stderr, "load-progress: one-layer: at the repack's questions:");
        for (int i = 0; i < r.n_q; i++)
            fprintf(stderr, " %.2f", r.q[i]);
        fprintf(stderr, "\n");
        /* Every matrix here is a tenth of the repack or so, the LM head
         * too: repacked in pieces, the bar moves within each, by about a
         * report's 1 % at a time. Counted whole, it moved by a matrix at a
         * time (an E4B-shaped Q4_0's LM head: 0.21 s without a report). The
         * report that the pass's start may move (its estimate replaced)
         * and the final 1 are not the repack's steps. */
        float step = 0.0f;
        for (int i = r.at_repack + 1; i < r.n - 1 && i < MAX_REPORTS; i++)
            if (r.f[i] - r.f[i - 1] > step)
                step = r.f[i] - r.f[i - 1];
        CHECKF(step <= 0.03f, "one-layer: a step of %.3f in the repack (pieces of 1 %%)", step);
        CHECKF(r.n_q >= 30, "one-layer: %d questions during the repack (one a piece)", r.n_q);
        fprintf(stderr, "load-progress: one-layer: largest step in the repack %.3f\n", step);
    }
    remove(path);
}

/* A progress callback that loads another model on the same thread: each
 * load reports its own progress to its end, and the outer one can still
 * be cancelled afterwards. */
static void nested(const char *outer_path, const char *inner_path) {
    setenv("TERN_REPACK_CACHE", "off", 1);
    reports inner = {0};
    reports r = {.nested = inner_path, .inner = &inner};
    CHECKF(load(outer_path, &r) == TN_OK, "nested: the outer load failed");
    CHECKF(r.nested_rc == TN_OK, "nested: the inner load gave %d", r.nested_rc);
    CHECKF(inner.n > 0 && inner.n <= MAX_REPORTS && inner.f[inner.n - 1] == 1.0f,
           "nested: the inner load's %d reports do not end with 1", inner.n);
    CHECKF(r.n > 3 && r.n <= MAX_REPORTS && r.f[r.n - 1] == 1.0f,
           "nested: the outer load's %d reports do not end with 1 (the last %g)", r.n,
           r.n > 0 && r.n <= MAX_REPORTS ? r.f[r.n - 1] : -1.0f);
    reports inner2 = {0};
    reports c = {.nested = inner_path, .inner = &inner2, .yes_at = -1};
    const int rc = load(outer_path, &c);
    CHECKF(rc == TN_ERR_CANCELLED, "nested: the outer load, cancelled after the inner, gave %d",
           rc);
    for (int i = 0; i < c.n && i < MAX_REPORTS; i++)
        CHECKF(c.f[i] < 1.0f, "nested: cancelled, report %d was 1", i);
}

/* A load cancelled during a new cache file's checksum (a 17 GB mixture's
 * takes seconds) stops there: the unfinished file goes, and none is put
 * in its place. */
static void cancelled_in_checksum(const char *label, const char *path, const char *cache) {
    tn_test_empty_dir(cache);
    reports r = {.yes_in_checksum = true};
    const int rc = load(path, &r);
    CHECKF(r.at_checksum >= 0, "%s: no checksum pass", label);
    CHECKF(rc == TN_ERR_CANCELLED, "%s: cancelled in the checksum, the load gave %d", label, rc);
    int left = 0;
    DIR *d = opendir(cache);
    for (struct dirent *e; d && (e = readdir(d));)
        left += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "pages");
    if (d)
        closedir(d);
    CHECKF(left == 0, "%s: %d files left in the cache after a cancel in its checksum", label,
           left);
}

/* The default setting in 4 KiB pages (forced) with the cache directory on
 * another file system than the model (/dev/shm, where it is one): the
 * experts stay in the model file's rows, and the first estimate must know
 * it from the start. Asked apart from the cache's choice, it counted their
 * repack (most of this model's bytes) and the bar leapt when the repack
 * began. The first load checks the pages, the second reads the verdict.
 * The mixture of small_pages: a payload under 8 MiB is never checked. */
static void small_pages_elsewhere(const char *dir, const char *path) {
    char xdg[512], cache[600];
    snprintf(xdg, sizeof xdg, "/dev/shm/tern-test-load-progress-%d", (int)getpid());
    snprintf(cache, sizeof cache, "%s/tern/repack", xdg);
    struct stat a, b;
    if (stat(dir, &a) != 0 || stat("/dev/shm", &b) != 0 || a.st_dev == b.st_dev ||
        access("/dev/shm", W_OK) != 0) {
        fprintf(stderr, "load-progress: small pages elsewhere: SKIP (no other file system)\n");
        return;
    }
    setenv("XDG_CACHE_HOME", xdg, 1);
    whole("small pages elsewhere, checked", path, true, 0.2f);
    whole("small pages elsewhere, verdict", path, true, 0.2f);
    CHECK(tn_repack_cache_clear(cache, NULL) == TN_OK);
    tn_test_empty_dir(cache);
    char part[700];
    rmdir(cache);
    snprintf(part, sizeof part, "%s/tern", xdg);
    rmdir(part);
    rmdir(xdg);
}

/* Reports in (0, 1], each above the one before, 1 once and last (or
 * never, for a load that failed). */
static void rising(const char *label, const reports *r, bool ok) {
    float before = 0.0f;
    for (int i = 0; i < r->n && i < MAX_REPORTS; i++) {
        CHECKF(r->f[i] > before && r->f[i] <= 1.0f && (r->f[i] == 1.0f) == (ok && i == r->n - 1),
               "%s: report %d of %d is %g after %g", label, i, r->n, r->f[i], before);
        before = r->f[i];
    }
    CHECKF(!ok || (r->n > 0 && r->n <= MAX_REPORTS && r->f[r->n - 1] == 1.0f),
           "%s: %d reports, the last not 1", label, r->n);
}

/* The repack cache's default setting where its file system maps files in
 * 4 KiB pages (forced): a mixture's experts go into its file, and the
 * dense matrices are copied out of that file's mapping into private
 * memory, on the load that writes the file and on every load that maps it
 * (an E4B-shaped model's 2.6 GB from the disk). That copy is counted in
 * the progress, from the first estimate on (the bar is short of its end
 * by about the copy's share when it begins, not at 0.99 then), and it is
 * a cancel point: a load cancelled there fails, says no 1, and leaves the
 * cache as it was (the file of an earlier load stays and maps next time;
 * one this load wrote goes, as after a cancel in its checksum). Silent
 * and uncancellable before: a hit reported nothing but its final 1. */
static void small_pages(const char *dir) {
    char path[512], xdg[512], cache[600];
    snprintf(path, sizeof path, "%s/small-pages.gguf", dir);
    snprintf(xdg, sizeof xdg, "%s/xdg-small-pages", dir);
    snprintf(cache, sizeof cache, "%s/tern/repack", xdg);
    /* Dense matrices of 8 MiB and more: a private copy of them would get
     * 2 MiB pages (test-repack-cache's default_experts_small_pages). */
    tn_mkmodel_params p = tn_test_tiny_model("qwen3moe", 41);
    p.n_embd = 1024;
    p.n_head = 8;
    p.n_head_kv = 2;
    p.head_dim = 128;
    p.n_ff = 512;
    p.n_ff_exp = 256;
    p.n_layer = 4;
    tn_error err = {0};
    if (tn_mkmodel(&p, path, &err) != TN_OK) {
        CHECKF(false, "mkmodel small-pages: %s", err.message);
        return;
    }
    unsetenv("TERN_REPACK_CACHE");
    setenv("XDG_CACHE_HOME", xdg, 1);
    setenv("TERN_REPACK_CACHE_MIN_FREE_MB", "0", 1);
    tn_repack_cache_force_pages(TN_REPACK_PAGES_4K);
    tn_test_empty_dir(cache);

    /* Cancelled in the copy after writing the file: no file stays. */
    reports c = {.yes_in_copy = true};
    int rc = load(path, &c);
    if (c.at_repack < 0 && rc == TN_OK) {
        fprintf(stderr, "load-progress: small pages: SKIP (this CPU does not repack)\n");
        goto out;
    }
    CHECKF(c.at_copy >= 0, "small pages, new file: no copy pass");
    CHECKF(rc == TN_ERR_CANCELLED, "small pages, new file: cancelled in the copy, gave %d", rc);
    rising("small pages, new file, cancelled", &c, false);
    char file[1200];
    char name[40];
    char model[PATH_MAX];
    CHECK(realpath(path, model) && tn_repack_cache_name(model, name, sizeof name) == TN_OK);
    snprintf(file, sizeof file, "%s/%s", cache, name);
    CHECKF(access(file, F_OK) != 0, "small pages: a cancel in the copy left the new file");

    /* Writing the file, then copying: the copy's share is in the total
     * when it begins. The cache directory is not there yet (a first
     * load): whether the experts go into the file is still known from
     * the start, from its parent's file system. */
    tn_test_empty_dir(cache);
    rmdir(cache);
    reports w = {0};
    CHECKF(load(path, &w) == TN_OK, "small pages, new file: the load failed");
    /* When the repack begins the bar is at the checks' share of all the
     * work: the repack, its checksum (a quarter of the payload) and the
     * copy (a quarter of the dense part of it, under the payload). Asked
     * of the missing directory itself, the experts were left out of the
     * estimate: the bar was near its end and waited through their repack. */
    if (w.at_repack >= 0 && w.at_repack <= MAX_REPORTS) {
        const float at = w.at_repack > 0 ? w.f[w.at_repack - 1] : 0.0f;
        const double c = (double)w.checked, x = (double)w.repacked;
        const double lo = c / (c + x * 6 / 4), hi = c / (c + x * 5 / 4);
        CHECKF(at > lo - 0.025 && at < hi + 0.025,
               "small pages, new file: %.3f done when the repack began, %.3f-%.3f of the work",
               at, lo, hi);
        fprintf(stderr, "load-progress: small pages, new file: %.3f when the repack began, "
                "%.3f-%.3f of the work\n", at, lo, hi);
    }
    rising("small pages, new file", &w, true);
    CHECKF(w.at_copy >= 0, "small pages, new file: no copy pass");
    CHECKF(access(file, F_OK) == 0, "small pages: no cache file written");
    if (w.at_copy >= 0 && w.at_copy <= MAX_REPORTS) {
        const float at = w.at_copy > 0 ? w.f[w.at_copy - 1] : 0.0f;
        /* Without the copy in the total the bar reached its end with the
         * checksum and waited there (0.99) through the copy. */
        CHECKF(at < 0.985f, "small pages, new file: %.2f done when the copy began", at);
        fprintf(stderr, "load-progress: small pages, new file: copy from report %d at %.2f:",
                w.at_copy, at);
        for (int i = 0; i < w.n && i < MAX_REPORTS; i++)
            fprintf(stderr, " %.2f", w.f[i]);
        fprintf(stderr, "\n");
    }

    /* A hit: the copy is the load's work, counted and cancellable. */
    reports h = {0};
    CHECKF(load(path, &h) == TN_OK, "small pages, hit: the load failed");
    rising("small pages, hit", &h, true);
    CHECKF(h.at_copy >= 0, "small pages, hit: no copy pass");
    CHECKF(h.asked_in_copy >= 1, "small pages, hit: no question during the copy");
    /* Each piece is counted before its question: the bar moves in the
     * copy, not only at the load's end (0.99, then 1). Before, the only
     * question after the copy began was the load's last. */
    const float before_copy = h.at_copy > 0 && h.at_copy <= MAX_REPORTS ? h.f[h.at_copy - 1] : 0;
    int moving = 0;
    for (int i = 0; i < h.asked_in_copy; i++)
        moving += h.copy_q[i] > before_copy && h.copy_q[i] < 0.99f;
    CHECKF(h.asked_in_copy >= 4 && moving >= 2,
           "small pages, hit: %d questions after the copy began, %d with the bar between %.2f "
           "and 0.99",
           h.asked_in_copy, moving, before_copy);
    fprintf(stderr, "load-progress: small pages, hit: %d reports, copy from %d:", h.n, h.at_copy);
    for (int i = 0; i < h.n && i < MAX_REPORTS; i++)
        fprintf(stderr, " %.2f", h.f[i]);
    fprintf(stderr, "\n");
    reports hc = {.yes_in_copy = true};
    rc = load(path, &hc);
    CHECKF(rc == TN_ERR_CANCELLED && hc.asked_in_copy == 1,
           "small pages, hit: cancelled in the copy, gave %d after %d questions in it", rc,
           hc.asked_in_copy);
    rising("small pages, hit, cancelled", &hc, false);
    CHECKF(access(file, F_OK) == 0, "small pages: a cancel in a hit's copy removed the file");
    cancelled("small pages, hit", path);
    reports again = {0};
    CHECKF(load(path, &again) == TN_OK, "small pages: the load after the cancels failed");
    CHECKF(again.at_copy >= 0 && again.at_repack < 0,
           "small pages: the load after the cancels did not map the file (repack from %d)",
           again.at_repack);
    small_pages_elsewhere(dir, path);
out:
    tn_repack_cache_force_pages(TN_REPACK_PAGES_UNKNOWN);
    tn_test_empty_dir(cache);
    unsetenv("TERN_REPACK_CACHE_MIN_FREE_MB");
    unsetenv("XDG_CACHE_HOME");
    remove(path);
}

/* The default setting with no room on the disk for a file with the
 * experts (the space it must keep free: more than any disk has): the
 * experts stay in the model file's rows, a file of the dense matrices is
 * written, and the first estimate must know it. Counting the experts'
 * repack there (most of this model's bytes), the bar was far short of the
 * checks' share when the repack began, then leapt. 2 MiB pages (forced),
 * so that the room alone decides. */
static void no_room(const char *dir, const char *path) {
    char xdg[512], cache[600];
    snprintf(xdg, sizeof xdg, "%s/xdg-no-room", dir);
    snprintf(cache, sizeof cache, "%s/tern/repack", xdg);
    unsetenv("TERN_REPACK_CACHE");
    setenv("XDG_CACHE_HOME", xdg, 1);
    setenv("TERN_REPACK_CACHE_MIN_FREE_MB", "1000000000", 1); /* a petabyte */
    tn_repack_cache_force_pages(TN_REPACK_PAGES_2M);
    tn_test_empty_dir(cache);
    whole("experts, no room", path, true, 0.2f);
    /* The file written holds the dense matrices alone: mapped, the
     * experts are still the model file's rows. */
    reports r = {0};
    CHECKF(load(path, &r) == TN_OK, "no room: the second load failed");
    CHECKF(r.at_repack < 0, "no room: the second load repacked (from report %d)", r.at_repack);
    tn_repack_cache_force_pages(TN_REPACK_PAGES_UNKNOWN);
    unsetenv("TERN_REPACK_CACHE_MIN_FREE_MB");
    unsetenv("XDG_CACHE_HOME");
    tn_test_empty_dir(cache);
}

/* What a load asks of the repack cache before reading: whether a file of
 * the model is there (its header read), and the file system's free space
 * for the room rule on experts. Asked once per load, whatever the load's
 * estimates and prepare then decide; asked apart, it was 2 header reads
 * and up to 3 statvfs calls a load. In the default setting (the only one
 * with the room rule), 2 MiB pages (forced): a first load that writes the
 * file, a second that maps it, and one with no room for the experts. */
typedef struct asks {
    int likely, statvfs;
} asks;

static void count_ask(const char *what, void *user) {
    asks *a = user;
    if (!strcmp(what, "likely"))
        a->likely++;
    else if (!strcmp(what, "statvfs"))
        a->statvfs++;
}

static void asks_once(const char *dir, const char *path) {
    char xdg[512], cache[600];
    snprintf(xdg, sizeof xdg, "%s/xdg-asks", dir);
    snprintf(cache, sizeof cache, "%s/tern/repack", xdg);
    unsetenv("TERN_REPACK_CACHE");
    setenv("XDG_CACHE_HOME", xdg, 1);
    tn_repack_cache_force_pages(TN_REPACK_PAGES_2M);
    tn_test_empty_dir(cache);
    static const char *const label[] = {"new file", "file mapped", "no room"};
    for (int k = 0; k < 3; k++) {
        setenv("TERN_REPACK_CACHE_MIN_FREE_MB", k == 2 ? "1000000000" : "0", 1);
        if (k == 2)
            tn_test_empty_dir(cache);
        asks a = {0};
        reports r = {0};
        tn_repack_cache_ask_hook(count_ask, &a);
        const int rc = load(path, &r);
        tn_repack_cache_ask_hook(NULL, NULL);
        CHECKF(rc == TN_OK, "asks, %s: the load gave %d", label[k], rc);
        CHECKF(a.likely == 1, "asks, %s: the cache file's header was read %d times", label[k],
               a.likely);
        /* A load that writes a file with experts must ask it (the rule
         * still applies); one that maps a file may. */
        CHECKF(k == 1 ? a.statvfs <= 1 : a.statvfs == 1,
               "asks, %s: the file system was asked %d times", label[k], a.statvfs);
    }
    tn_repack_cache_force_pages(TN_REPACK_PAGES_UNKNOWN);
    unsetenv("TERN_REPACK_CACHE_MIN_FREE_MB");
    unsetenv("XDG_CACHE_HOME");
    tn_test_empty_dir(cache);
}

static void run(const char *label, tn_mkmodel_params p, const char *dir) {
    char path[512], cache[512], name[128];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, label);
    tn_error err = {0};
    if (tn_mkmodel(&p, path, &err) != TN_OK) {
        CHECKF(false, "mkmodel %s: %s", label, err.message);
        return;
    }
    /* Without a repack the passes are the checks alone, and the estimate
     * is exact: steps are tensors. With one, the repack's estimate may
     * differ from what prepare finds by the token embedding's share
     * (tied or not) and small matrices: a fifth at most. */
    setenv("TERN_REPACK_CACHE", "off", 1);
    snprintf(name, sizeof name, "%s, cache off", label);
    whole(name, path, true, 0.2f);
    cancelled(name, path);
    snprintf(cache, sizeof cache, "%s/cache-%s", dir, label);
    setenv("TERN_REPACK_CACHE", cache, 1);
    tn_test_empty_dir(cache);
    snprintf(name, sizeof name, "%s, new cache file", label);
    cancelled_in_checksum(name, path, cache);
    tn_test_empty_dir(cache);
    whole(name, path, true, 0.2f);
    /* A cache file maps: the load may go to 1 at once. */
    snprintf(name, sizeof name, "%s, cache file mapped", label);
    whole(name, path, false, 1.0f);
    cancelled(name, path);
    tn_test_empty_dir(cache);
    rmdir(cache);
}

int main(void) {
    const char *dir = tn_test_tmpdir();
    tn_test_read_guard_hook(pass_hook, NULL);
    /* Large enough for tens of reports: 8 layers of 256-wide Q4_0. */
    tn_mkmodel_params dense = tn_test_tiny_model("llama", 21);
    dense.type = "q4_0";
    dense.n_layer = 8;
    dense.n_embd = 256;
    dense.n_head = 4;
    dense.n_head_kv = 2;
    dense.head_dim = 64;
    dense.n_ff = 1024;
    run("dense", dense, dir);
    run("gemma4", tn_test_tiny_model("gemma4", 22), dir);
    run("gemma4moe", tn_test_tiny_model("gemma4moe", 23), dir);
    /* Experts most of the file, as in Qwen3-30B-A3B: whether they are
     * repacked (into a cache file) or not (cache off) decides the split. */
    tn_mkmodel_params moe = tn_test_tiny_model("gemma4moe", 24);
    moe.n_expert = 32;
    moe.n_ff_exp = 128;
    run("experts", moe, dir);
    char path[512], inner[512];
    snprintf(path, sizeof path, "%s/experts.gguf", dir);
    no_room(dir, path);
    asks_once(dir, path);
    snprintf(path, sizeof path, "%s/dense.gguf", dir);
    snprintf(inner, sizeof inner, "%s/gemma4.gguf", dir);
    damaged(dir, path);
    counted_when_done(dir);
    nested(path, inner);
    small_pages(dir);
    /* Nothing asked for: nothing reported, and the load is as before. */
    tn_model *m = NULL;
    tn_error err = {0};
    setenv("TERN_REPACK_CACHE", "off", 1);
    CHECKF(tn_model_load(path, tn_model_default_params(), &m, &err) == TN_OK, "%s", err.message);
    tn_model_free(m);
    return tn_test_finish("load-progress");
}
