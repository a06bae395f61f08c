/* tern-cli perplexity: how well a model predicts a text, in windows of N
 * tokens, computed as llama.cpp's perplexity tool does so that the figures
 * compare: the text is tokenized once (BOS as the file asks), cut into
 * consecutive windows of N tokens, the first token of each window replaced by
 * BOS when the vocabulary uses one, the KV cleared per window, and only the
 * second half of each window scored (those tokens have at least N/2 tokens of
 * context).
 *
 * --dump-top1 FILE writes, for every position of every window, the line
 * "POSITION TOKEN_ID LOGIT INPUT_ID": the teacher-forced argmax after that
 * token, its logit, and the token evaluated there, so that two engines can be
 * compared position by position, and a comparison can check that both were
 * fed the same ids (with BOS in front of a window, the tokens of the text
 * alone are shifted by one against what was evaluated). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli perplexity -m MODEL -f TEXT [--ctx N] [--chunks K] [-t THREADS]\n"
              "                           [--dump-top1 FILE]\n"
              "\n"
              "Perplexity of the model over TEXT in windows of N tokens (default 512),\n"
              "scoring the second half of each window, like llama.cpp's perplexity tool.\n"
              "  --chunks K          stop after K windows\n"
              "  --dump-top1 FILE    one line per position: POSITION TOKEN_ID LOGIT INPUT_ID\n"
              "                      (the teacher-forced argmax, its logit, and the token\n"
              "                      evaluated at that position: BOS first when the\n"
              "                      vocabulary asks for it)\n"));
}

static char *read_file(const char *path, size_t *len) {
    return cli_read_file(path, CLI_MAX_CORPUS_BYTES, len);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *text_path = NULL, *dump_path = NULL;
    long n_ctx = 512, chunks = 0, threads = 0;
    /* every option takes a value: step over option and value together */
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        }
        bool ok = true;
        if (!v) {
            cli_error(_("%s needs a value (see 'tern-cli perplexity --help')"), a);
            return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            text_path = v;
        } else if (!strcmp(a, "--dump-top1")) {
            dump_path = v;
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            /* A window scores its second half after the first token: 2
             * scored nothing ("-nan over 0 scored tokens", exit 0). */
            ok = cli_parse_long(a, v, 3, 1L << 20, &n_ctx);
        } else if (!strcmp(a, "--chunks")) {
            ok = cli_parse_long(a, v, 0, 1L << 30, &chunks);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            ok = cli_parse_long(a, v, 1, 1024, &threads);
        } else {
            cli_error(_("perplexity: unknown option '%s' (see 'tern-cli perplexity --help')"), a);
            return CLI_EXIT_USAGE;
        }
        if (!ok)
            return CLI_EXIT_USAGE;
    }
    if (!model || !text_path) {
        cli_error(_("perplexity: -m MODEL and -f TEXT are required"));
        return CLI_EXIT_USAGE;
    }

    tn_error err = {0};
    tn_model *m = NULL;
    tn_ctx *ctx = NULL;
    tn_tokens toks = {0};
    float *logits = NULL;
    FILE *dump = NULL;
    char *text = NULL;
    int status = CLI_EXIT_BAD_INPUT;
    size_t len = 0;

    if (cli_model_load(model, &m, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        goto out;
    }
    const tn_tokenizer *tok = tn_model_tokenizer(m);
    if (!tok) {
        cli_error("%s", cli_engine_message(tn_model_tokenizer_failure(m)));
        goto out;
    }
    if (!(text = read_file(text_path, &len)))
        goto out;
    if (tn_tokenize(tok, text, len, TN_TOKENIZE_ADD_BOS, &toks, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        goto out;
    }
    const size_t N = (size_t)n_ctx;
    size_t n_windows = toks.n / N;
    if (n_windows == 0) {
        cli_error(_("%s: the text is %zu tokens; windows of %zu need at least %zu (use a smaller "
                    "--ctx)"),
                  text_path, toks.n, N, N);
        goto out;
    }
    if (chunks > 0 && (size_t)chunks < n_windows)
        n_windows = (size_t)chunks;
    if (tn_ctx_new(m, (int32_t)N, (int32_t)threads, &ctx, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        goto out;
    }
    if (dump_path && !(dump = fopen(dump_path, "w"))) {
        cli_error(_("%s: cannot write: %s"), dump_path, strerror(errno));
        goto out;
    }
    const int32_t V = tn_model_n_vocab(m);
    const size_t rows = 64; /* logits of this many positions at a time */
    logits = malloc(sizeof(float) * rows * (size_t)V);
    int32_t *window = malloc(sizeof(int32_t) * N);
    if (!logits || !window) {
        free(window);
        cli_error(_("out of memory"));
        goto out;
    }
    const bool bos = tn_tokenizer_add_bos(tok) && tn_tokenizer_bos(tok) >= 0;
    const size_t first = N / 2;
    fprintf(stderr, "%s\n", tn_model_description(m));
    fprintf(stderr, _("perplexity: %zu tokens, %zu windows of %zu, scoring positions %zu..%zu "
                      "of each\n"),
            toks.n, n_windows, N, first + 1, N - 1);

    double nll = 0, nll2 = 0;
    size_t scored = 0;
    const double t0 = now_s();
    int rc = TN_OK;
    for (size_t w = 0; w < n_windows && rc == TN_OK; w++) {
        const size_t start = w * N;
        memcpy(window, toks.ids + start, sizeof(int32_t) * N);
        if (bos)
            window[0] = tn_tokenizer_bos(tok);
        tn_ctx_kv_truncate(ctx, 0);
        for (size_t r0 = 0; r0 < N && rc == TN_OK; r0 += rows) {
            const size_t n = N - r0 < rows ? N - r0 : rows;
            rc = tn_ctx_decode(ctx, window + r0, (int32_t)n, TN_LOGITS_ALL, logits, &err);
            for (size_t i = 0; rc == TN_OK && i < n; i++) {
                const float *row = logits + i * (size_t)V;
                const size_t pos = r0 + i;
                int32_t best = 0;
                for (int32_t t = 1; t < V; t++)
                    if (row[t] > row[best])
                        best = t;
                if (dump)
                    fprintf(dump, "%zu %d %.6f %d\n", start + pos, best, row[best],
                            window[pos]);
                if (pos < first || pos + 1 >= N)
                    continue;
                double z = 0;
                for (int32_t t = 0; t < V; t++)
                    z += exp((double)row[t] - row[best]);
                const double lp = (double)row[window[pos + 1]] - row[best] - log(z);
                nll -= lp;
                nll2 += lp * lp;
                scored++;
            }
        }
        if (rc == TN_OK) {
            fprintf(stderr, "[%zu]%.4f%s", w + 1, exp(nll / (double)scored),
                    w + 1 < n_windows ? "," : "\n");
            fflush(stderr);
        }
    }
    free(window);
    if (rc != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        goto out;
    }
    const double mean = nll / (double)scored;
    const double var = scored > 1 ? (nll2 / (double)scored - mean * mean) / (double)(scored - 1)
                                  : 0;
    const double ppl = exp(mean);
    const double secs = now_s() - t0;
    printf("perplexity: %.4f +/- %.4f over %zu scored tokens (%zu windows of %zu)\n", ppl,
           ppl * sqrt(var > 0 ? var : 0), scored, n_windows, N);
    fprintf(stderr, "%.1f s, %.1f tok/s\n", secs, (double)(n_windows * N) / secs);
    status = CLI_EXIT_OK;
out:
    if (dump) {
        /* The first failed write's errno is gone by the time fclose fails
         * (it said "write error" alone): a last flush finds it again. */
        errno = 0;
        const bool failed = fflush(dump) != 0 || ferror(dump);
        const int e = errno ? errno : EIO;
        if ((fclose(dump) != 0 || failed) && status == CLI_EXIT_OK) {
            cli_error(_("%s: cannot write: %s"), dump_path, cli_write_cause(e));
            status = CLI_EXIT_BAD_INPUT;
        }
    }
    free(logits);
    free(text);
    tn_tokens_free(&toks);
    tn_ctx_free(ctx);
    tn_model_free(m);
    return status;
}
