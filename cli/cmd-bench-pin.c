/* tern-cli bench --pin: what pinning buys.
 *
 *   TTFT of the same request (20 tokens) against a short (10-token) and a
 *   long (900-token) pinned system prompt: with the pin restored by a KV
 *   truncation, the long one should cost only the extra attention rows
 *   (goal: within 1.1x of the short one). For scale, the TTFT of the same
 *   920 tokens without a pin (everything prefilled).
 *
 *   Pinning the long prompt: prefill time, against writing and loading its
 *   snapshot (loaded warm from the page cache, and cold after the file's
 *   pages were dropped with posix_fadvise).
 *
 * Token ids are taken from real text when the model has a tokenizer, so
 * the figures are those of a real prompt of that length. Medians over -r
 * repetitions, with min-max. */
#include "cli.h"
#include "tn-session.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli bench --pin -m MODEL [--short 10] [--long 900] [--request 20]\n"
              "                      [-n 16] [-c 1024] [-t N] [-r 5] [--ttft-only] [--json]\n\n"
              "TTFT of one request (--request tokens, then -n generated) against a --short and\n"
              "a --long pinned system prompt, and without a pin; the long prompt's prefill\n"
              "time against saving and loading its pin snapshot (warm and cold).\n"
              "--ttft-only: the two pinned TTFTs alone (skips the slow unpinned baseline and the\n"
              "snapshot part; their figures print as 0).\n"));
}

static const char *PROSE =
    "The harbour town woke slowly. Fishermen checked their nets while the bakery on the "
    "corner pushed the smell of bread into the narrow streets, and the ferry to the islands "
    "sounded its horn twice before leaving. In the library, a clerk sorted returned books by "
    "colour because nobody had told her not to, and the tide, indifferent to all of it, came "
    "in over the grey stones of the slipway. Visitors asked about the lighthouse, the museum "
    "of ropes and anchors, and where to buy a good map; the answers changed with the season. ";

static const char *REQUEST =
    "Could you summarise what happens in the town in the morning, in two sentences please? "
    "Keep it short and friendly.";

/* n token ids from text (repeated as needed), or synthetic ids. */
static int32_t *make_tokens(const tn_model *m, const char *text, int32_t n, int32_t salt) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids)
        return NULL;
    const tn_tokenizer *tok = tn_model_tokenizer(m);
    tn_tokens t = {0};
    if (tok)
        tn_tokenize(tok, text, strlen(text), 0, &t, NULL);
    const int32_t nv = tn_model_n_vocab(m);
    for (int32_t i = 0; i < n; i++)
        ids[i] = t.n ? t.ids[(size_t)i % t.n]
                     : (int32_t)((uint32_t)(i * 7919 + salt * 104729 + 17) % (uint32_t)nv);
    tn_tokens_free(&t);
    return ids;
}

typedef struct bench {
    const tn_model *model;
    int32_t n_ctx, threads, reps, n_gen;
    const int32_t *req;
    int32_t n_req;
} bench;

static tn_session *open_session(const bench *b, const char *cache, tn_error *err) {
    tn_session_params sp = tn_session_default_params();
    sp.warn = cli_engine_warning;
    sp.n_ctx = b->n_ctx;
    sp.n_threads = b->threads;
    sp.pin_cache_dir = cache;
    tn_session *s = NULL;
    return tn_session_new(b->model, sp, &s, err) == TN_OK ? s : NULL;
}

typedef struct ttft_result {
    cli_spread ttft, decode_tok_s;
} ttft_result;

/* One measured configuration: a session and the request it answers; up to
 * reps + 1 samples (blocks of (reps + 1) / 2). */
typedef struct arm {
    tn_session *s;
    const int32_t *req;
    int32_t n_req;
    int32_t *owned; /* the unpinned prompt */
    double *tt, *dt;
} arm;

/* pinned: pin the n_pin tokens, the request is b->req; else nothing is
 * pinned and the request is pin + b->req, all prefilled every time. */
static int arm_open(const bench *b, const int32_t *pin, int32_t n_pin, bool pinned, arm *a,
                    tn_error *err) {
    memset(a, 0, sizeof *a);
    a->s = open_session(b, "", err);
    a->tt = calloc((size_t)b->reps + 1, sizeof *a->tt);
    a->dt = calloc((size_t)b->reps + 1, sizeof *a->dt);
    if (!a->s || !a->tt || !a->dt)
        return a->s ? TN_ERR_NOMEM : TN_ERR_INVALID;
    if (pinned) {
        a->req = b->req;
        a->n_req = b->n_req;
        return tn_session_pin_tokens(a->s, pin, n_pin, NULL, NULL, err);
    }
    a->owned = malloc((size_t)(n_pin + b->n_req) * sizeof *a->owned);
    if (!a->owned)
        return TN_ERR_NOMEM;
    memcpy(a->owned, pin, (size_t)n_pin * sizeof *a->owned);
    memcpy(a->owned + n_pin, b->req, (size_t)b->n_req * sizeof *a->owned);
    a->req = a->owned;
    a->n_req = n_pin + b->n_req;
    return TN_OK;
}

static void arm_close(arm *a) {
    tn_session_free(a->s);
    free(a->owned);
    free(a->tt);
    free(a->dt);
}

/* TTFT of the request in each arm. Each session has its own thread pool,
 * whose workers spin for a while after a request: strict alternation would
 * let one arm's spinning workers slow the other down. So the arms run in
 * blocks, in the order A B B A (each block starts with an unmeasured
 * request), which also cancels a steady drift of the machine's load. */
static int measure_ttft(const bench *b, arm *arms, int n_arms, ttft_result *out, tn_error *err) {
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = b->n_gen;
    static const int abba[4] = {0, 1, 1, 0};
    const int n_blocks = n_arms == 2 ? 4 : 1;
    /* A single arm is the unpinned baseline: seconds per request, stable,
     * and its first request is as cold as any: two samples, no warm-up. */
    const int per_block = n_arms == 2 ? (b->reps + 1) / 2 : (b->reps < 2 ? b->reps : 2);
    int filled[2] = {0, 0};
    int rc = TN_OK;
    for (int blk = 0; blk < n_blocks && rc == TN_OK; blk++) {
        arm *a = &arms[n_arms == 2 ? abba[blk] : 0];
        int *f = &filled[n_arms == 2 ? abba[blk] : 0];
        const tn_prompt request = {
            .kind = TN_PROMPT_TOKENS, .tokens = a->req, .n_tokens = a->n_req};
        if (n_arms == 2)
            rc = tn_session_run(a->s, &request, &g, NULL, NULL, NULL, err);
        for (int r = 0; r < per_block && rc == TN_OK; r++) {
            tn_session_stats st;
            rc = tn_session_run(a->s, &request, &g, NULL, NULL, &st, err);
            a->tt[*f] = st.ttft_ms;
            a->dt[*f] = st.decode_tok_s;
            ++*f;
        }
    }
    for (int k = 0; k < n_arms && rc == TN_OK; k++) {
        out[k].ttft = cli_spread_of(arms[k].tt, filled[k]);
        out[k].decode_tok_s = cli_spread_of(arms[k].dt, filled[k]);
    }
    return rc;
}

typedef struct snap_result {
    double prefill_ms, save_ms, file_mib;
    cli_spread load_warm, load_cold;
} snap_result;

static void drop_page_cache(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static int measure_snapshot(const bench *b, const int32_t *pin, int32_t n_pin, const char *dir,
                            snap_result *out, tn_error *err) {
    tn_session *s = open_session(b, "", err);
    if (!s)
        return TN_ERR_INVALID;
    int rc = tn_session_pin_tokens(s, pin, n_pin, NULL, NULL, err);
    out->prefill_ms = tn_session_pin_info(s).prefill_ms;
    tn_pin_key key;
    if (rc == TN_OK)
        rc = tn_pin_key_compute(b->model, pin, n_pin, &key, err);
    if (rc == TN_OK) {
        const double t0 = 1e3 * cli_now_s();
        rc = tn_pin_store_save(dir, &key, tn_session_ctx(s), pin, n_pin, 0, err);
        out->save_ms = 1e3 * cli_now_s() - t0;
    }
    tn_session_free(s);
    if (rc != TN_OK)
        return rc;
    char *path = tn_pin_path(dir, &key);
    struct stat st;
    out->file_mib = path && stat(path, &st) == 0 ? (double)st.st_size / (1 << 20) : 0;
    s = open_session(b, dir, err);
    double *warm = calloc((size_t)b->reps, sizeof *warm);
    double *cold = calloc((size_t)b->reps, sizeof *cold);
    if (!s || !warm || !cold || !path)
        rc = s ? TN_ERR_NOMEM : TN_ERR_INVALID;
    for (int r = 0; r < 2 * b->reps && rc == TN_OK; r++) {
        const bool is_cold = r >= b->reps;
        if (is_cold)
            drop_page_cache(path);
        tn_session_unpin(s); /* an empty KV: the pin must come from the file */
        rc = tn_session_pin_tokens(s, pin, n_pin, NULL, NULL, err);
        tn_pin_info pi = tn_session_pin_info(s);
        if (rc == TN_OK && !pi.loaded_from_snapshot) {
            snprintf(err->message, sizeof err->message, "%s: the snapshot was not used", path);
            err->format = NULL;
            rc = TN_ERR_IO;
        }
        (is_cold ? cold : warm)[r % b->reps] = pi.prefill_ms;
    }
    if (rc == TN_OK) {
        out->load_warm = cli_spread_of(warm, b->reps);
        out->load_cold = cli_spread_of(cold, b->reps);
    }
    if (path)
        unlink(path);
    free(path);
    free(warm);
    free(cold);
    tn_session_free(s);
    return rc;
}

int cmd_bench_pin(int argc, char **argv) {
    const char *model_path = NULL;
    long n_short = 10, n_long = 900, n_req = 20, n_gen = 16, n_ctx = 1024, threads = 0, reps = 5;
    bool json = false, ttft_only = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--pin"))
            continue;
        if (!strcmp(a, "--ttft-only")) {
            ttft_only = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            json = true;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error(_("bench: option '%s' needs a value (see tern-cli bench --pin --help)"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model_path = v;
        else if (!strcmp(a, "--short"))
            ok = cli_parse_long(a, v, 1, 1 << 20, &n_short);
        else if (!strcmp(a, "--long"))
            ok = cli_parse_long(a, v, 1, 1 << 20, &n_long);
        else if (!strcmp(a, "--request"))
            ok = cli_parse_long(a, v, 1, 1 << 20, &n_req);
        else if (!strcmp(a, "-n"))
            ok = cli_parse_long(a, v, 1, 1 << 20, &n_gen);
        else if (!strcmp(a, "-c"))
            ok = cli_parse_long(a, v, 16, 1 << 22, &n_ctx);
        else if (!strcmp(a, "-t"))
            ok = cli_parse_long(a, v, 0, 1024, &threads);
        else if (!strcmp(a, "-r"))
            ok = cli_parse_long(a, v, 1, 1000, &reps);
        else {
            cli_error(_("bench: unknown option '%s' for --pin (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        if (!ok)
            return CLI_EXIT_USAGE;
    }
    if (!model_path) {
        cli_error(_("bench: --pin needs a model (-m MODEL.gguf)"));
        return CLI_EXIT_USAGE;
    }
    if (n_long + n_req + n_gen > n_ctx || n_short + n_req + n_gen > n_ctx) {
        cli_error(_("bench: a %ld-token pin, a %ld-token request and %ld answer tokens do not fit "
                    "in a context of %ld (raise -c)"),
                  n_long > n_short ? n_long : n_short, n_req, n_gen, n_ctx);
        return CLI_EXIT_USAGE;
    }
    tn_error err = {0};
    tn_model *model = NULL;
    if (tn_model_load(model_path, tn_model_default_params(), &model, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    if (n_ctx > tn_model_n_ctx_train(model)) {
        cli_error(_("bench: -c %ld is longer than the model's context (%d)"), n_ctx,
                  tn_model_n_ctx_train(model));
        tn_model_free(model);
        return CLI_EXIT_USAGE;
    }
    int32_t *pin_long = make_tokens(model, PROSE, (int32_t)n_long, 1);
    int32_t *pin_short = make_tokens(model, PROSE, (int32_t)n_short, 1);
    int32_t *req = make_tokens(model, REQUEST, (int32_t)n_req, 2);
    char dir[] = "/tmp/tern-bench-pin-XXXXXX";
    const char *tmp = mkdtemp(dir);
    int status = CLI_EXIT_OK;
    if (!pin_long || !pin_short || !req || !tmp) {
        cli_error(_("bench: out of memory or no temporary directory"));
        status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    bench b = {.model = model, .n_ctx = (int32_t)n_ctx, .threads = (int32_t)threads,
               .reps = (int32_t)reps, .n_gen = (int32_t)n_gen, .req = req,
               .n_req = (int32_t)n_req};
    ttft_result res[3];
    memset(res, 0, sizeof res);
    snap_result sn = {0};
    /* The short and long pins alternate; the unpinned baseline (slow: the
     * whole prompt every time) is measured on its own. */
    arm arms[3];
    int rc = arm_open(&b, pin_short, (int32_t)n_short, true, &arms[0], &err);
    if (rc == TN_OK)
        rc = arm_open(&b, pin_long, (int32_t)n_long, true, &arms[1], &err);
    else
        memset(&arms[1], 0, sizeof arms[1]);
    if (rc == TN_OK)
        rc = measure_ttft(&b, arms, 2, res, &err);
    arm_close(&arms[0]);
    arm_close(&arms[1]);
    if (rc == TN_OK && !ttft_only) {
        rc = arm_open(&b, pin_long, (int32_t)n_long, false, &arms[2], &err);
        if (rc == TN_OK)
            rc = measure_ttft(&b, &arms[2], 1, &res[2], &err);
        arm_close(&arms[2]);
    }
    const ttft_result rs = res[0], rl = res[1], rn = res[2];
    if (rc == TN_OK && !ttft_only)
        rc = measure_snapshot(&b, pin_long, (int32_t)n_long, tmp, &sn, &err);
    rmdir(tmp);
    if (rc != TN_OK) {
        cli_error("bench: %s", cli_engine_message(&err));
        status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    const double ratio = rl.ttft.median / rs.ttft.median;
    /* The fastest request of each pin: another tenant's load only ever adds
     * time, so on a shared machine this ratio moves far less than the
     * medians' (the goal is still judged on the medians). */
    const double ratio_fastest = rs.ttft.min > 0 ? rl.ttft.min / rs.ttft.min : 0;
    int nt = 0;
    {
        tn_ctx *probe = NULL;
        if (tn_ctx_new(model, 16, (int32_t)threads, &probe, NULL) == TN_OK)
            nt = tn_ctx_n_threads(probe);
        tn_ctx_free(probe);
    }
    if (json) {
        /* The name is the file's: a quote or a backslash in it must not
         * end the string. */
        fputs("{\"model\":", stdout);
        cli_json_string(stdout, tn_model_name(model), strlen(tn_model_name(model)));
        printf(",\"threads\":%d,\"n_ctx\":%ld,\"request_tokens\":%ld,"
               "\"generated_tokens\":%ld,\"reps\":%ld,"
               "\"short\":{\"pin_tokens\":%ld,\"ttft_ms\":%.3f,\"ttft_min\":%.3f,"
               "\"ttft_max\":%.3f,\"decode_tok_s\":%.2f},"
               "\"long\":{\"pin_tokens\":%ld,\"ttft_ms\":%.3f,\"ttft_min\":%.3f,"
               "\"ttft_max\":%.3f,\"decode_tok_s\":%.2f},"
               "\"ttft_ratio\":%.4f,\"ttft_ratio_fastest\":%.4f,\"no_pin_ttft_ms\":%.3f,"
               "\"pin_prefill_ms\":%.3f,\"snapshot_mib\":%.2f,\"snapshot_save_ms\":%.3f,"
               "\"snapshot_load_warm_ms\":%.3f,\"snapshot_load_cold_ms\":%.3f}\n",
               nt, n_ctx, n_req, n_gen, reps, n_short, rs.ttft.median,
               rs.ttft.min, rs.ttft.max, rs.decode_tok_s.median, n_long, rl.ttft.median,
               rl.ttft.min, rl.ttft.max, rl.decode_tok_s.median, ratio, ratio_fastest,
               rn.ttft.median,
               sn.prefill_ms, sn.file_mib, sn.save_ms, sn.load_warm.median, sn.load_cold.median);
    } else {
        printf("model: %s\n", tn_model_description(model));
        printf("threads %d, pinned context %ld, request %ld tokens, %ld generated, %ld reps "
               "per pin in A B B A blocks (median, min-max)\n",
               nt, n_ctx, n_req, n_gen, 2 * ((reps + 1) / 2));
        printf("TTFT, %4ld-token pin       %9.2f ms (%.2f-%.2f)  decode %.1f tok/s\n", n_short,
               rs.ttft.median, rs.ttft.min, rs.ttft.max, rs.decode_tok_s.median);
        printf("TTFT, %4ld-token pin       %9.2f ms (%.2f-%.2f)  decode %.1f tok/s\n", n_long,
               rl.ttft.median, rl.ttft.min, rl.ttft.max, rl.decode_tok_s.median);
        printf("ratio long / short         %9.3f    (goal <= 1.10: %s)\n", ratio,
               ratio <= 1.10 ? "met" : "NOT met");
        printf("  of the fastest requests  %9.3f\n", ratio_fastest);
        if (ttft_only)
            goto out;
        printf("TTFT, no pin (%ld tokens) %9.2f ms (%.2f-%.2f)\n", n_long + n_req,
               rn.ttft.median, rn.ttft.min, rn.ttft.max);
        printf("pin %ld tokens: prefill     %9.2f ms (%.0f tok/s)\n", n_long, sn.prefill_ms,
               sn.prefill_ms > 0 ? n_long * 1e3 / sn.prefill_ms : 0);
        printf("snapshot %.1f MiB: save    %9.2f ms (written, fsynced)\n", sn.file_mib,
               sn.save_ms);
        printf("  load, warm page cache    %9.2f ms (%.2f-%.2f)  %.1fx faster than prefill\n",
               sn.load_warm.median, sn.load_warm.min, sn.load_warm.max,
               sn.load_warm.median > 0 ? sn.prefill_ms / sn.load_warm.median : 0);
        printf("  load, cold (pages dropped)%8.2f ms (%.2f-%.2f)  %.1fx faster than prefill\n",
               sn.load_cold.median, sn.load_cold.min, sn.load_cold.max,
               sn.load_cold.median > 0 ? sn.prefill_ms / sn.load_cold.median : 0);
    }
out:
    free(pin_long);
    free(pin_short);
    free(req);
    tn_model_free(model);
    return status;
}
