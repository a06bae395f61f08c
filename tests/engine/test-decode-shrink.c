/* A model file cut short while a session generates (a re-download or a copy
 * over it, a sync tool): the kernels' next read of a page past the new end
 * is a SIGBUS, on the calling thread or on a pool worker. The step fails
 * with TN_ERR_IO naming the file instead (engine/forward.c, "a model file
 * cut short under a step"), every later step of the model fails the same
 * way, and the process goes on: a good model loads and runs after it.
 *
 * TERN_REPACK=0 keeps the weights in the file's layout, read from the
 * mapping by every matrix product; with the repack cache on they are read
 * from the cache's file, which is cut instead. Two threads: the worker's
 * slots and the caller's fault alike. Under ASan the test runs with
 * ASAN_OPTIONS=handle_sigbus=0, as load-shrink (tests/meson.build). */
#include "tn-internal.h"
#include "tn-test.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static off_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static bool shrank_message(const tn_error *err, const char *path) {
    return strstr(err->message, "shrank while it was being read") &&
           strstr(err->message, path);
}

static int32_t prompt[] = {1, 5, 9, 13, 2, 7};

/* One step of a fresh context: its rc (err filled). */
static int one_step(const tn_model *m, tn_error *err) {
    tn_ctx *ctx = NULL;
    int rc = tn_ctx_new(m, 64, 2, &ctx, err);
    if (rc != TN_OK)
        return rc;
    float *logits = malloc((size_t)tn_model_n_vocab(m) * sizeof *logits);
    rc = logits ? tn_ctx_decode(ctx, prompt, 6, TN_LOGITS_LAST, logits, err) : TN_ERR_NOMEM;
    free(logits);
    tn_ctx_free(ctx);
    return rc;
}

/* Loads victim (a copy of good), cuts `cut_path` to `size` bytes, and
 * checks the next steps: TN_ERR_IO naming cut_path, on the same context
 * and on a new one; then good still runs. */
static void cut_between_steps(const char *good, const char *victim, const char *what,
                              off_t size, bool cut_cache) {
    CHECK(tn_test_copy_file(good, victim));
    tn_model *m = NULL;
    tn_error err = {0};
    CHECKF(tn_model_load(victim, tn_model_default_params(), &m, &err) == TN_OK, "%s: %s", what,
           err.message);
    if (!m)
        return;
    char cut_path[600];
    snprintf(cut_path, sizeof cut_path, "%s",
             cut_cache ? tn_model_repack_cache_path(m) : victim);
    CHECKF(cut_path[0], "%s: no cache file (source %s)", what, tn_model_repack_source(m));
    tn_ctx *ctx = NULL;
    CHECK(tn_ctx_new(m, 64, 2, &ctx, &err) == TN_OK);
    float *logits = malloc((size_t)tn_model_n_vocab(m) * sizeof *logits);
    CHECK(logits && ctx);
    if (!logits || !ctx) {
        free(logits);
        tn_ctx_free(ctx);
        tn_model_free(m);
        return;
    }
    CHECKF(tn_ctx_decode(ctx, prompt, 3, TN_LOGITS_LAST, logits, &err) == TN_OK, "%s: %s", what,
           err.message);
    /* what a server's health check asks (tn_model_weights_check) */
    CHECKF(tn_model_weights_check(m, &err) == TN_OK, "%s: before the cut: %s", what,
           err.message);
    CHECK(truncate(cut_path, size) == 0);
    int rc = tn_ctx_decode(ctx, prompt + 3, 1, TN_LOGITS_LAST, logits, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, cut_path), "%s: step gave %d: %s", what, rc,
           err.message);
    err = (tn_error){0};
    rc = tn_model_weights_check(m, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, cut_path), "%s: the check after it: %d: %s",
           what, rc, err.message);
    rc = tn_ctx_decode(ctx, prompt + 4, 1, TN_LOGITS_LAST, logits, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, cut_path), "%s: next step gave %d: %s", what,
           rc, err.message);
    rc = one_step(m, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, cut_path), "%s: a new context gave %d: %s",
           what, rc, err.message);
    free(logits);
    tn_ctx_free(ctx);
    tn_model_free(m);
    m = NULL;
    CHECKF(tn_model_load(good, tn_model_default_params(), &m, &err) == TN_OK, "%s: good: %s",
           what, err.message);
    rc = m ? one_step(m, &err) : TN_ERR_INVALID;
    CHECKF(rc == TN_OK, "%s: the good model after the fault: %s", what, err.message);
    tn_model_free(m);
}

/* The file's offset where the first tensor after token_embd starts, so that
 * a cut there leaves the embedding rows whole (the serial lookup reads
 * them) and takes every layer's weights (read by the pool's tasks). */
static off_t after_embedding(const char *path) {
    tn_gguf *g = NULL;
    tn_error err = {0};
    if (tn_gguf_open(path, &g, &err) != TN_OK)
        return -1;
    const tn_gguf_tensor *e = tn_gguf_find_tensor(g, "token_embd.weight");
    uint64_t end = e ? tn_gguf_data_offset(g) + e->offset + e->nbytes : 0;
    uint64_t first_other = UINT64_MAX;
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        const uint64_t at = tn_gguf_data_offset(g) + t->offset;
        if (t != e && at >= end && at < first_other)
            first_other = at;
    }
    tn_gguf_close(g);
    if (!e || first_other == UINT64_MAX)
        return -1;
    return (off_t)((end + 4095) / 4096 * 4096);
}

/* A session generating when the file is cut from another thread, at a
 * random moment and to a random size: each ask either finishes (the cut
 * came after its last read) or fails with the message; never a SIGBUS. */
typedef struct cutter {
    const char *path;
    off_t size;
    unsigned delay_us;
} cutter;

static void *cut_later(void *arg) {
    const cutter *c = arg;
    usleep(c->delay_us);
    if (truncate(c->path, c->size) != 0)
        perror("truncate");
    return NULL;
}

static void cut_while_generating(const char *good, const char *victim, int rounds) {
    uint64_t seed = 0x5eed;
    int faults = 0;
    const off_t full = file_size(good);
    for (int r = 0; r < rounds; r++) {
        CHECK(tn_test_copy_file(good, victim));
        tn_model *m = NULL;
        tn_error err = {0};
        CHECKF(tn_model_load(victim, tn_model_default_params(), &m, &err) == TN_OK, "%s",
               err.message);
        if (!m)
            return;
        tn_session_params sp = tn_session_default_params();
        sp.n_ctx = 256;
        sp.n_threads = 2;
        tn_session *s = NULL;
        CHECKF(tn_session_new(m, sp, &s, &err) == TN_OK, "%s", err.message);
        tn_gen_params gp = tn_gen_default_params();
        gp.max_tokens = 64;
        cutter c = {.path = victim,
                    .size = (off_t)(tn_test_rand(&seed) % (uint64_t)full),
                    .delay_us = (unsigned)(tn_test_rand(&seed) % 20000)};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, cut_later, &c) == 0);
        int rc = s ? tn_session_ask_tokens(s, prompt, 6, &gp, NULL, NULL, NULL, &err)
                   : TN_ERR_INVALID;
        pthread_join(th, NULL);
        CHECKF(rc == TN_OK || (rc == TN_ERR_IO && shrank_message(&err, victim)),
               "round %d (cut to %lld after %u us): %d: %s", r, (long long)c.size, c.delay_us, rc,
               err.message);
        faults += rc == TN_ERR_IO;
        /* Again, after the cut: it fails cleanly or (a cut past every byte
         * a step reads) works. */
        rc = s ? tn_session_ask_tokens(s, prompt, 6, &gp, NULL, NULL, NULL, &err)
               : TN_ERR_INVALID;
        CHECKF(rc == TN_OK || (rc == TN_ERR_IO && shrank_message(&err, victim)),
               "round %d, the ask after: %d: %s", r, rc, err.message);
        faults += rc == TN_ERR_IO;
        tn_session_free(s);
        tn_model_free(m);
    }
    CHECKF(faults > 0, "no ask of %d rounds met the cut file", rounds);
    fprintf(stderr, "decode-shrink: %d rounds, %d asks failed cleanly\n", rounds, faults);
}

/* A drafter's file cut short between two asks (DFlash and MTP run their
 * own passes over it on their own pools): the next ask with the drafter
 * fails with TN_ERR_IO naming the drafter's file, as does every later one
 * (the drafter remembers, as a model does), and the process goes on: the
 * target generates without it, and a good drafter works after. It was a
 * SIGBUS in the drafter's matrix products. */
static int new_drafter(bool mtp, const tn_model *target, const char *path, tn_drafter **d,
                       tn_error *err) {
    tn_drafter_params dp = tn_drafter_default_params();
    dp.n_threads = 2;
    return mtp ? tn_drafter_new_mtp(target, path, dp, d, err)
               : tn_drafter_new_dflash(target, path, dp, d, err);
}

static int ask_with(tn_session *s, tn_drafter *d, tn_error *err) {
    tn_gen_params gp = tn_gen_default_params();
    gp.max_tokens = 12;
    gp.drafter = d;
    tn_session_reset(s);
    return tn_session_ask_tokens(s, prompt, 6, &gp, NULL, NULL, NULL, err);
}

static void drafter_cut(const char *dir, bool mtp) {
    const char *what = mtp ? "mtp" : "dflash";
    char target_path[512], dgood[512], dvictim[512];
    snprintf(target_path, sizeof target_path, "%s/%s-target.gguf", dir, what);
    snprintf(dgood, sizeof dgood, "%s/%s-good.gguf", dir, what);
    snprintf(dvictim, sizeof dvictim, "%s/%s-victim.gguf", dir, what);
    tn_mkmodel_params p = tn_test_tiny_model(mtp ? "gemma4" : "llama", 11);
    tn_error err = {0};
    CHECKF(tn_mkmodel(&p, target_path, &err) == TN_OK, "%s target: %s", what, err.message);
    int rc;
    if (mtp) {
        tn_mkmodel_mtp_params mp = tn_mkmodel_mtp_default_params();
        mp.target = target_path;
        mp.n_embd = p.n_embd / 2;
        mp.n_layer = 2;
        mp.n_head = 2;
        mp.n_ff = 64;
        mp.seed = 41;
        rc = tn_mkmodel_mtp(&mp, dgood, &err);
    } else {
        tn_mkmodel_dflash_params dp = tn_mkmodel_dflash_default_params();
        dp.target = target_path;
        dp.seed = 31;
        rc = tn_mkmodel_dflash(&dp, dgood, &err);
    }
    CHECKF(rc == TN_OK, "mkmodel %s: %s", what, err.message);
    CHECK(tn_test_copy_file(dgood, dvictim));
    tn_model *m = NULL;
    CHECKF(tn_model_load(target_path, tn_model_default_params(), &m, &err) == TN_OK, "%s: %s",
           what, err.message);
    tn_session_params sp = tn_session_default_params();
    sp.n_ctx = 256;
    sp.n_threads = 2;
    tn_session *s = NULL;
    tn_drafter *d = NULL;
    if (!m || tn_session_new(m, sp, &s, &err) != TN_OK ||
        new_drafter(mtp, m, dvictim, &d, &err) != TN_OK) {
        CHECKF(false, "%s: setup: %s", what, err.message);
        goto out;
    }
    rc = ask_with(s, d, &err);
    CHECKF(rc == TN_OK, "%s: the ask before the cut: %s", what, err.message);
    CHECKF(tn_drafter_weights_check(d, &err) == TN_OK, "%s: the check before the cut: %s", what,
           err.message);
    CHECK(truncate(dvictim, 4096) == 0);
    rc = ask_with(s, d, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, dvictim), "%s: the ask after the cut: %d: %s",
           what, rc, err.message);
    err = (tn_error){0};
    rc = tn_drafter_weights_check(d, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, dvictim), "%s: the check after it: %d: %s",
           what, rc, err.message);
    rc = ask_with(s, d, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, dvictim), "%s: the next ask: %d: %s", what,
           rc, err.message);
    rc = ask_with(s, NULL, &err);
    CHECKF(rc == TN_OK, "%s: the target without the drafter: %s", what, err.message);
    tn_drafter_free(d);
    d = NULL;
    rc = new_drafter(mtp, m, dgood, &d, &err);
    if (rc == TN_OK)
        rc = ask_with(s, d, &err);
    CHECKF(rc == TN_OK, "%s: a good drafter after the fault: %s", what, err.message);
out:
    tn_drafter_free(d);
    tn_session_free(s);
    tn_model_free(m);
}

/* A vision projector cut short between two encodings (tern-cli serve
 * --mmproj, the app's image prompts): the next encoding fails with
 * TN_ERR_IO naming the file, and so does every later one. With one thread
 * the encoding had no pool, so the matrix products' scratch was the
 * product's own and the fault's jump out of the step skipped its free
 * (757,760 bytes with this projector, found by LeakSanitizer at the end of
 * this test): with one thread and with two. */
static void projector_cut(const char *dir, int threads) {
    char good[512], victim[512];
    snprintf(good, sizeof good, "%s/mmproj-good.gguf", dir);
    snprintf(victim, sizeof victim, "%s/mmproj-victim-%d.gguf", dir, threads);
    tn_mkmodel_vision_params mp = tn_mkmodel_vision_default_params();
    mp.seed = 5;
    tn_error err = {0};
    CHECKF(tn_mkmodel_vision(&mp, good, &err) == TN_OK, "mkmodel vision: %s", err.message);
    CHECK(tn_test_copy_file(good, victim));
    tn_vision *v = NULL;
    CHECKF(tn_vision_load(victim, &v, &err) == TN_OK, "projector: %s", err.message);
    if (!v)
        return;
    const tn_vision_info *I = tn_vision_get_info(v);
    const int W = 40, H = 30;
    float *rgb = malloc((size_t)W * H * 3 * sizeof *rgb);
    float *out = malloc((size_t)I->n_image_tokens * (size_t)I->n_embd_text * sizeof *out);
    CHECK(rgb && out);
    if (!rgb || !out)
        goto out;
    for (int i = 0; i < W * H * 3; i++)
        rgb[i] = (float)(i % 97) / 96.0f;
    int n = 0;
    int rc = tn_vision_encode(v, rgb, W, H, 0, out, &n, threads, &err);
    CHECKF(rc == TN_OK && n == I->n_image_tokens, "%d threads: the encoding before the cut: %s",
           threads, err.message);
    CHECK(truncate(victim, 0) == 0);
    rc = tn_vision_encode(v, rgb, W, H, 0, out, &n, threads, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, victim),
           "%d threads: the encoding after the cut: %d: %s", threads, rc, err.message);
    err = (tn_error){0};
    rc = tn_vision_weights_check(v, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, victim),
           "%d threads: the check after it: %d: %s", threads, rc, err.message);
    rc = tn_vision_encode(v, rgb, W, H, 0, out, &n, threads, &err);
    CHECKF(rc == TN_ERR_IO && shrank_message(&err, victim), "%d threads: the next encoding: %d: %s",
           threads, rc, err.message);
out:
    free(rgb);
    free(out);
    tn_vision_free(v);
}

int main(void) {
    const char *dir = tn_test_tmpdir();
    char good[512], victim[512], cache[512];
    snprintf(good, sizeof good, "%s/good.gguf", dir);
    snprintf(victim, sizeof victim, "%s/victim.gguf", dir);
    tn_mkmodel_params p = tn_test_tiny_model("llama", 7);
    p.n_embd = 128;
    p.n_ff = 512;
    p.n_layer = 4;
    tn_error err;
    if (tn_mkmodel(&p, good, &err) != TN_OK) {
        fprintf(stderr, "mkmodel: %s\n", err.message);
        return 1;
    }

    /* The file's own layout: every product reads the mapping. */
    setenv("TERN_REPACK", "0", 1);
    setenv("TERN_REPACK_CACHE", "off", 1);
    /* Cut to the first page: the embedding lookup itself (a serial read,
     * the step's guard on the calling thread) faults. */
    cut_between_steps(good, victim, "embedding cut", 4096, false);
    /* Cut after the embedding table: the layers' products (the pool's
     * tasks, on the worker and the caller) fault. */
    const off_t at = after_embedding(good);
    CHECKF(at > 0 && at < file_size(good), "no tensor after token_embd (%lld)", (long long)at);
    if (at > 0)
        cut_between_steps(good, victim, "layers cut", at, false);

    /* Repacked through the cache: the weights are read from its file. */
    unsetenv("TERN_REPACK");
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("TERN_REPACK_CACHE", cache, 1);
    cut_between_steps(good, victim, "cache file cut", 4096, true);

    setenv("TERN_REPACK", "0", 1);
    setenv("TERN_REPACK_CACHE", "off", 1);
    drafter_cut(dir, false);
    drafter_cut(dir, true);
    projector_cut(dir, 1);
    projector_cut(dir, 2);
    const char *rounds = getenv("TERN_TEST_SHRINK_ROUNDS");
    cut_while_generating(good, victim, rounds && *rounds ? atoi(rounds) : 12);
    return tn_test_finish("decode-shrink");
}
