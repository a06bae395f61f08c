/* tern-cli bench --spec: what speculative decoding buys on this machine.
 *
 *   1. plain greedy decoding of N tokens after a P-token prompt (tokens/s);
 *      its output is kept for the oracle;
 *   2. the verify-cost curve: the time of one B-row decode over a 1-row
 *      decode, c(B), at the context position decoding runs at. A step that
 *      verifies B rows emits (accepted + 1) tokens, so speculation pays once
 *      the mean accepted length per step exceeds c(B) - 1 (drafting cost
 *      aside): the break-even acceptance length;
 *   3. the ORACLE drafter, which replays the plain run's output (every draft
 *      accepted), at B = 4, 8, 16 rows per step (B - 1 drafted tokens): the
 *      most this engine's verification can give;
 *   4. each drafter asked for (--spec lookup | draft:PATH | dflash:PATH | mtp:PATH, or
 *      all of those given): tokens/s, acceptance, mean accepted length.
 * Every speculative run is checked to produce the plain run's tokens.
 * Figures are medians over -r repetitions. */
#include "cli.h"
#include "tn-session.h" /* tn_session_ctx: the thread count in use */

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli bench --spec oracle|lookup|draft:PATH|dflash:PATH|mtp:PATH[,...] -m MODEL\n"
              "                      [-p 64] [-n 128] [-t N] [-r 3] [--blocks 4,8,16]\n"
              "                      [--draft-max K]\n\n"
              "Plain greedy decoding, then the same request with speculation. 'oracle' replays\n"
              "the plain output (acceptance 100%%): the most verification can give. Also prints\n"
              "the verify-cost curve c(B) = time(B-row decode) / time(1-row decode) and the\n"
              "break-even acceptance length c(B) - 1 for each B of --blocks (B = rows per\n"
              "verify step = drafted tokens + 1, as DFlash counts its block).\n"
              "-p: prompt tokens (random ids, fixed seed); -n: tokens generated;\n"
              "-t: threads (default: physical cores); -r: repetitions (median).\n"));
}

/* ----------------------------------------------------------- the oracle */

typedef struct oracle {
    const int32_t *seq; /* prompt then the plain output */
    int32_t n;
} oracle;

static int32_t oracle_propose(void *self, const int32_t *history, int32_t n_history,
                              int32_t max_draft, int32_t *draft, tn_error *err) {
    (void)err;
    const oracle *o = self;
    if (n_history > o->n || memcmp(history, o->seq, (size_t)n_history * sizeof *history))
        return 0;
    int32_t k = 0;
    for (; k < max_draft && n_history + k < o->n; k++)
        draft[k] = o->seq[n_history + k];
    return k;
}

/* ---------------------------------------------------------------- runs */

typedef struct run_result {
    double tok_s;    /* tokens after the first / decode time (median) */
    int32_t drafted, accepted, steps;
    bool same;       /* the plain run's tokens */
    int rc;
} run_result;

typedef struct collect {
    int32_t *tokens;
    int32_t n, cap;
} collect;

static bool on_token(const char *piece, int32_t token, void *user) {
    (void)piece;
    collect *c = user;
    if (token >= 0 && c->n < c->cap)
        c->tokens[c->n++] = token;
    return true;
}

static run_result measure(tn_session *s, const int32_t *prompt, int32_t n_prompt, int32_t n_gen,
                          tn_drafter *d, int32_t draft_max, int reps, const int32_t *expect,
                          int32_t n_expect, int32_t *out, int32_t *n_out) {
    run_result r = {.same = true};
    double *v = calloc((size_t)reps, sizeof *v);
    int32_t *tokens = malloc((size_t)n_gen * sizeof *tokens);
    if (!v || !tokens) {
        r.rc = TN_ERR_NOMEM;
        free(v);
        free(tokens);
        return r;
    }
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = n_gen;
    g.drafter = d;
    g.draft_max = draft_max;
    const tn_prompt request = {.kind = TN_PROMPT_TOKENS, .tokens = prompt, .n_tokens = n_prompt};
    for (int rep = 0; rep < reps; rep++) {
        collect c = {.tokens = tokens, .cap = n_gen};
        tn_session_stats st;
        tn_error err = {0};
        if (d)
            tn_drafter_reset(d);
        r.rc = tn_session_run(s, &request, &g, on_token, &c, &st, &err);
        if (r.rc != TN_OK) {
            cli_error("%s", cli_engine_message(&err));
            break;
        }
        v[rep] = st.decode_ms > 0 && c.n > 1 ? (c.n - 1) * 1e3 / st.decode_ms : 0;
        r.drafted = st.drafted;
        r.accepted = st.accepted;
        r.steps = st.verify_steps;
        if (expect && (c.n != n_expect || memcmp(c.tokens, expect, (size_t)c.n * sizeof *expect)))
            r.same = false;
        if (out && rep == 0) {
            memcpy(out, c.tokens, (size_t)c.n * sizeof *out);
            *n_out = c.n;
        }
    }
    if (r.rc == TN_OK)
        r.tok_s = cli_spread_of(v, reps).median;
    free(v);
    free(tokens);
    return r;
}

/* c(B): median time of decoding B rows after `ctx_tokens`, over 1 row. */
static int verify_curve(const tn_model *m, const int32_t *ctx_tokens, int32_t n_ctx_tokens,
                        int threads, int reps, int32_t max_b, double *cost) {
    tn_ctx *ctx = NULL;
    tn_error err = {0};
    const int32_t V = tn_model_n_vocab(m);
    float *logits = malloc((size_t)(max_b + 1) * (size_t)V * sizeof *logits);
    double *v = calloc((size_t)reps, sizeof *v);
    int rc = logits && v ? tn_ctx_new(m, n_ctx_tokens + max_b + 1, threads, &ctx, &err)
                         : TN_ERR_NOMEM;
    if (rc == TN_OK)
        rc = tn_ctx_decode(ctx, ctx_tokens, n_ctx_tokens, TN_LOGITS_NONE, NULL, &err);
    for (int32_t b = 1; rc == TN_OK && b <= max_b; b++) {
        /* warm-up, then reps timed runs of the same rows */
        for (int rep = -1; rc == TN_OK && rep < reps; rep++) {
            const double t0 = cli_now_s();
            rc = tn_ctx_decode(ctx, ctx_tokens, b, b > 1 ? TN_LOGITS_ALL : TN_LOGITS_LAST, logits,
                               &err);
            const double t = cli_now_s() - t0;
            if (rep >= 0)
                v[rep] = t;
            if (rc == TN_OK)
                rc = tn_ctx_kv_truncate(ctx, n_ctx_tokens);
        }
        if (rc == TN_OK)
            cost[b] = cli_spread_of(v, reps).median;
    }
    if (rc != TN_OK)
        cli_error("bench: %s", err.message[0] ? cli_engine_message(&err) : tn_status_name(rc));
    tn_ctx_free(ctx);
    free(logits);
    free(v);
    return rc;
}

/* --------------------------------------------------------------- main */

int cmd_bench_spec(int argc, char **argv) {
    const char *model_path = NULL, *specs = NULL, *blocks_s = "4,8,16";
    long n_prompt = 64, n_gen = 128, threads = 0, reps = 3, draft_max = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        }
        if (i + 1 >= argc) {
            cli_error(_("bench: option '%s' needs a value (see 'tern-cli bench --spec x --help')"),
                      a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(a, "--spec"))
            specs = v;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model_path = v;
        else if (!strcmp(a, "--blocks"))
            blocks_s = v;
        else if (!strcmp(a, "-p"))
            ok = cli_parse_long(a, v, 1, 1 << 16, &n_prompt);
        else if (!strcmp(a, "-n"))
            ok = cli_parse_long(a, v, 2, 1 << 16, &n_gen);
        else if (!strcmp(a, "-t"))
            ok = cli_parse_long(a, v, 1, 512, &threads);
        else if (!strcmp(a, "-r"))
            ok = cli_parse_long(a, v, 1, 1000, &reps);
        else if (!strcmp(a, "--draft-max"))
            ok = cli_parse_long(a, v, 1, TN_SPEC_MAX_DRAFT, &draft_max);
        else {
            cli_error(_("bench: unknown option '%s' with --spec (see 'tern-cli bench --spec x "
                        "--help')"),
                      a);
            return CLI_EXIT_USAGE;
        }
        if (!ok)
            return CLI_EXIT_USAGE;
    }
    if (!model_path || !specs) {
        cli_error(_("bench: --spec needs -m MODEL"));
        return CLI_EXIT_USAGE;
    }
    int32_t blocks[16];
    int n_blocks = 0;
    int32_t max_b = 1;
    /* At least one size (an empty list measured nothing), each a plain
     * number (strtol skips white space), at most as many as blocks holds
     * (the rest were dropped without a word). */
    const char *at = blocks_s;
    do {
        char *end = NULL;
        const bool number = cli_number_text(at, false);
        long b = number ? strtol(at, &end, 10) : 0;
        if (!number || n_blocks == 16 || b < 2 || b > TN_SPEC_MAX_DRAFT + 1 ||
            (*end && *end != ',')) {
            cli_error(_("bench: --blocks needs comma-separated block sizes from 2 to %d, not '%s'"),
                      TN_SPEC_MAX_DRAFT + 1, blocks_s);
            return CLI_EXIT_USAGE;
        }
        blocks[n_blocks++] = (int32_t)b;
        if (b > max_b)
            max_b = (int32_t)b;
        at = *end ? end + 1 : end;
    } while (*at);

    tn_error err = {0};
    tn_model *m = NULL;
    if (tn_model_load(model_path, tn_model_default_params(), &m, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    int status = CLI_EXIT_OK;
    const int32_t V = tn_model_n_vocab(m);
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    int32_t *plain = malloc((size_t)n_gen * sizeof *plain);
    /* + max_b: the verify curve's context is at least max_b rows long. */
    int32_t *seq = malloc((size_t)(n_prompt + n_gen + max_b) * sizeof *seq);
    double *cost = calloc((size_t)max_b + 1, sizeof *cost);
    tn_session *s = NULL;
    tn_session_params sp = tn_session_default_params();
    sp.warn = cli_engine_warning;
    sp.n_ctx = (int32_t)(n_prompt + n_gen + TN_SPEC_MAX_DRAFT + 2);
    sp.n_threads = (int32_t)threads;
    sp.pin_cache_dir = "";
    if (!prompt || !plain || !seq || !cost) {
        cli_error(_("out of memory"));
        status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    if (sp.n_ctx > tn_model_n_ctx_train(m)) {
        cli_error(_("%s: -p %ld and -n %ld need %d tokens of context; the model has %d"),
                  model_path, n_prompt, n_gen, sp.n_ctx, tn_model_n_ctx_train(m));
        status = CLI_EXIT_USAGE;
        goto out;
    }
    if (tn_session_new(m, sp, &s, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    uint64_t st = 0x5eed;
    for (long i = 0; i < n_prompt; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        prompt[i] = (int32_t)((st >> 33) % (uint64_t)V);
    }
    const int n_threads = tn_ctx_n_threads(tn_session_ctx(s));
    printf("model %s\n", tn_model_description(m));
    printf("prompt %ld tokens, %ld generated, %d threads, median of %ld\n\n", n_prompt, n_gen,
           n_threads, reps);

    /* 1. plain */
    int32_t n_plain = 0;
    run_result base = measure(s, prompt, (int32_t)n_prompt, (int32_t)n_gen, NULL, 0, (int)reps,
                              NULL, 0, plain, &n_plain);
    if (base.rc != TN_OK || n_plain < 2) {
        if (base.rc == TN_OK)
            cli_error(_("bench: the model stopped after %d tokens; nothing to measure"), n_plain);
        status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    printf("%-28s %8.2f tok/s\n", "plain decoding", base.tok_s);

    /* 2. verify-cost curve, at the position decoding runs at */
    memcpy(seq, prompt, (size_t)n_prompt * sizeof *seq);
    memcpy(seq + n_prompt, plain, (size_t)n_plain * sizeof *seq);
    const int32_t n_curve =
        (int32_t)(n_prompt + n_plain / 2 > max_b ? n_prompt + n_plain / 2 : max_b);
    /* A prompt and answer shorter than the largest block (-p 1 -n 2 under
     * blocks of 16) were read past their end: the prompt's tokens again
     * fill the rest, as any tokens cost the same to verify. */
    for (int32_t k = (int32_t)(n_prompt + n_plain); k < n_curve; k++)
        seq[k] = prompt[k % n_prompt];
    if (verify_curve(m, seq, n_curve, n_threads, (int)reps, max_b, cost) != TN_OK) {
        status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    printf("\nverify cost c(B) = time(B rows) / time(1 row), at position %ld:\n",
           n_prompt + n_plain / 2);
    printf("  %3s %10s %8s %12s %12s\n", "B", "ms", "c(B)", "B / c(B)", "break-even");
    for (int32_t b = 1; b <= max_b; b++) {
        const double c = cost[b] / cost[1];
        printf("  %3d %10.2f %8.2f %12.2f %12.2f\n", b, cost[b] * 1e3, c, b / c, c - 1);
    }
    printf("  B / c(B): the speedup when every draft is accepted; break-even: the mean\n"
           "  accepted length per step where speculation starts to pay (drafting cost aside)\n");

    /* 3. the oracle */
    oracle orc = {.seq = seq, .n = (int32_t)n_prompt + n_plain};
    tn_drafter_ops ops = {.propose = oracle_propose};
    tn_drafter *od = NULL;
    if (tn_drafter_new_custom(&ops, &orc, TN_SPEC_MAX_DRAFT, &od, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    printf("\n%-28s %8s %8s %9s %8s %10s\n", "drafter", "tok/s", "speedup", "accepted",
           "per step", "same out");
    for (int i = 0; i < n_blocks; i++) {
        run_result r = measure(s, prompt, (int32_t)n_prompt, (int32_t)n_gen, od, blocks[i] - 1,
                               (int)reps, plain, n_plain, NULL, NULL);
        if (r.rc != TN_OK) {
            status = CLI_EXIT_BAD_INPUT;
            break;
        }
        char name[64];
        snprintf(name, sizeof name, "oracle B=%d (break-even %.2f)", blocks[i],
                 cost[blocks[i]] / cost[1] - 1);
        printf("%-28s %8.2f %7.2fx %8.0f%% %8.2f %10s\n", name, r.tok_s, r.tok_s / base.tok_s,
               r.drafted ? 100.0 * r.accepted / r.drafted : 0.0,
               r.steps ? (double)r.accepted / r.steps : 0.0, r.same ? "yes" : "NO");
        if (!r.same)
            status = CLI_EXIT_BAD_INPUT;
    }
    tn_drafter_free(od);

    /* 4. the drafters asked for */
    char *list = strdup(specs);
    for (char *save = NULL, *one = list ? strtok_r(list, ",", &save) : NULL;
         one && status == CLI_EXIT_OK; one = strtok_r(NULL, ",", &save)) {
        if (!strcmp(one, "oracle"))
            continue;
        cli_spec cs = {.spec = one, .draft_max = draft_max};
        tn_drafter *d = NULL;
        int rc = cli_spec_make(&cs, m, n_threads, &d);
        if (rc != CLI_EXIT_OK || !d) {
            if (rc == CLI_EXIT_OK)
                cli_error(_("bench: unknown drafter '%s' (oracle, lookup, draft:PATH, dflash:PATH, mtp:PATH)"),
                          one);
            status = rc != CLI_EXIT_OK ? rc : CLI_EXIT_USAGE;
            break;
        }
        run_result r = measure(s, prompt, (int32_t)n_prompt, (int32_t)n_gen, d, (int32_t)draft_max,
                               (int)reps, plain, n_plain, NULL, NULL);
        if (r.rc == TN_OK) {
            char name[64];
            snprintf(name, sizeof name, "%s K=%d", tn_drafter_name(d),
                     draft_max > 0 ? (int)draft_max : tn_drafter_draft_max(d));
            printf("%-28s %8.2f %7.2fx %8.0f%% %8.2f %10s\n", name, r.tok_s,
                   r.tok_s / base.tok_s, r.drafted ? 100.0 * r.accepted / r.drafted : 0.0,
                   r.steps ? (double)r.accepted / r.steps : 0.0, r.same ? "yes" : "NO");
            /* Its own break-even, drafting cost included: the time of one
             * target decode (verify step or plain, with the drafter's
             * proposal before it) in plain tokens. A decode yields one token
             * plus its accepted drafts, so this cost minus one is the mean
             * accepted length at which this drafter starts to pay. */
            const int32_t decodes = n_plain - 1 - r.accepted;
            if (decodes > 0 && r.tok_s > 0) {
                const double cost_dec = (n_plain - 1) / r.tok_s * base.tok_s / decodes;
                printf(_("  one decode with this drafter costs %.2f plain ones: break-even %.2f "
                         "accepted per decode\n"),
                       cost_dec, cost_dec - 1);
            }
            if (!r.same)
                status = CLI_EXIT_BAD_INPUT;
        } else {
            status = CLI_EXIT_BAD_INPUT;
        }
        tn_drafter_free(d);
    }
    free(list);
    if (status == CLI_EXIT_BAD_INPUT)
        cli_error(_("bench: a speculative run failed or gave other tokens than plain decoding"));
out:
    tn_session_free(s);
    tn_model_free(m);
    free(prompt);
    free(plain);
    free(seq);
    free(cost);
    return status;
}
