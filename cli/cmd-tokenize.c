/* tern-cli tokenize / detokenize: a model's tokenizer from the command line,
 * and its encode throughput (--bench). */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void tokenize_usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli tokenize -m MODEL.gguf [--special] [--bos] [--json | --pieces]\n"
              "                         (TEXT... | --file FILE)\n"
              "       tern-cli tokenize -m MODEL.gguf --bench FILE [--seconds S]\n"
              "\n"
              "Prints the token ids of TEXT (the arguments joined by spaces) on one line.\n"
              "  --special   match control tokens such as <|im_start|> in the text\n"
              "              (otherwise they are plain text)\n"
              "  --bos       start with BOS when the vocabulary asks for it\n"
              "  --json      print a JSON array\n"
              "  --pieces    print one token per line: id, then its text as the vocabulary\n"
              "              spells it\n"
              "  --bench     encode FILE repeatedly on one thread for about S seconds\n"
              "              (default 2) and print the throughput in MB/s\n"));
}

static void detokenize_usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli detokenize -m MODEL.gguf [--special] IDS...\n"
              "\n"
              "Prints the text of the token ids, with no newline added: to a pipe or a file\n"
              "the exact bytes they decode to, on a terminal with every control character\n"
              "but newline and tab shown escaped (ESC as \\x1b). Control tokens (BOS,\n"
              "<|im_end|>, ...) give nothing unless --special renders them as their text;\n"
              "a SentencePiece vocabulary's leading space is removed. Ids may be separated\n"
              "by spaces or commas, or given as a JSON array.\n"));
}

static int load_tokenizer(const char *path, tn_gguf **g, tn_tokenizer **tok) {
    tn_error err = {0};
    if (tn_gguf_open(path, g, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    if (tn_tokenizer_load(*g, tok, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        tn_gguf_close(*g);
        *g = NULL;
        return CLI_EXIT_BAD_INPUT;
    }
    return CLI_EXIT_OK;
}

static char *read_file(const char *path, size_t *len) {
    return cli_read_file(path, CLI_MAX_CORPUS_BYTES, len);
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench(const tn_tokenizer *tok, const char *path, double seconds, unsigned flags) {
    size_t len = 0;
    char *text = read_file(path, &len);
    if (!text)
        return CLI_EXIT_BAD_INPUT;
    tn_tokens ids = {0};
    tn_error err = {0};
    int runs = 0;
    /* CPU time of this (single) thread is what the throughput is computed
     * from: on a busy machine wall time also counts time spent waiting. */
    double start = clock_s(CLOCK_MONOTONIC), cpu_start = clock_s(CLOCK_THREAD_CPUTIME_ID);
    double elapsed = 0;
    do {
        ids.n = 0;
        if (tn_tokenize(tok, text, len, flags, &ids, &err) != TN_OK) {
            cli_error("%s", cli_engine_message(&err));
            free(text);
            tn_tokens_free(&ids);
            return CLI_EXIT_BAD_INPUT;
        }
        runs++;
        elapsed = clock_s(CLOCK_MONOTONIC) - start;
    } while (elapsed < seconds || runs < 3);
    double cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    double mb = (double)len * runs / 1e6;
    printf("%s: %zu bytes -> %zu tokens (%.2f bytes/token), %d runs, %.2f s CPU "
           "(%.2f s wall): %.2f MB/s\n",
           path, len, ids.n, ids.n ? (double)len / (double)ids.n : 0.0, runs, cpu, elapsed,
           cpu > 0 ? mb / cpu : 0.0);
    free(text);
    tn_tokens_free(&ids);
    return CLI_EXIT_OK;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *bench_file = NULL;
    bool json = false, pieces = false;
    unsigned flags = 0;
    double seconds = 2.0;
    char **words = calloc((size_t)argc + 1, sizeof *words);
    int n_words = 0;
    if (!words) {
        cli_error(_("tokenize: out of memory"));
        return CLI_EXIT_BAD_INPUT;
    }
    int rc = CLI_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(tokenize_usage);
            free(words);
            return CLI_EXIT_OK;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_value) {
            model = argv[++i];
        } else if (!strcmp(a, "--file") && has_value) {
            file = argv[++i];
        } else if (!strcmp(a, "--bench") && has_value) {
            bench_file = argv[++i];
        } else if (!strcmp(a, "--seconds") && has_value) {
            if (!cli_parse_double("--seconds", argv[++i], 0, 3600, &seconds))
                goto done;
        } else if (!strcmp(a, "--special")) {
            flags |= TN_TOKENIZE_SPECIAL;
        } else if (!strcmp(a, "--bos")) {
            flags |= TN_TOKENIZE_ADD_BOS;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--pieces")) {
            pieces = true;
        } else if (!strcmp(a, "--")) {
            while (++i < argc)
                words[n_words++] = argv[i];
        } else if (a[0] == '-' && a[1]) {
            cli_error(_("tokenize: unknown or incomplete option '%s' (see --help)"), a);
            goto done;
        } else {
            words[n_words++] = argv[i];
        }
    }
    if (!model) {
        cli_error(_("tokenize: -m MODEL.gguf is required (see --help)"));
        goto done;
    }
    if (!bench_file && !file && n_words == 0) {
        cli_error(_("tokenize: no text (give TEXT or --file FILE)"));
        goto done;
    }
    if ((file || bench_file) && n_words) {
        cli_error(_("tokenize: give TEXT or a file, not both"));
        goto done;
    }
    tn_gguf *g = NULL;
    tn_tokenizer *tok = NULL;
    if ((rc = load_tokenizer(model, &g, &tok)))
        goto done;
    if (bench_file) {
        rc = bench(tok, bench_file, seconds, flags);
        tn_tokenizer_free(tok);
        tn_gguf_close(g);
        goto done;
    }
    char *text = NULL;
    size_t len = 0;
    if (file) {
        text = read_file(file, &len);
    } else {
        for (int i = 0; i < n_words; i++)
            len += strlen(words[i]) + 1;
        text = malloc(len + 1);
        if (text) {
            len = 0;
            for (int i = 0; i < n_words; i++) {
                size_t n = strlen(words[i]);
                if (i)
                    text[len++] = ' ';
                memcpy(text + len, words[i], n);
                len += n;
            }
        } else {
            cli_error(_("tokenize: out of memory"));
        }
    }
    tn_tokens ids = {0};
    tn_error err = {0};
    if (!text) {
        rc = CLI_EXIT_BAD_INPUT;
    } else if (tn_tokenize(tok, text, len, flags, &ids, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        rc = CLI_EXIT_BAD_INPUT;
    } else {
        rc = CLI_EXIT_OK;
        /* Stopped at the first write that failed (main says so): a corpus's
         * millions of ids would go on to nowhere. */
        if (pieces) {
            for (size_t i = 0; i < ids.n && !ferror(stdout); i++) {
                size_t n;
                const char *t = tn_token_text(tok, ids.ids[i], &n);
                printf("%d\t", ids.ids[i]);
                /* A token's text is the model file's: on a terminal it is
                 * shown, never obeyed (docs/TOKENIZER.md). */
                cli_model_text_write(t, n);
                putchar('\n');
            }
        } else {
            if (json)
                putchar('[');
            for (size_t i = 0; i < ids.n && !ferror(stdout); i++)
                printf("%s%d", i ? (json ? ", " : " ") : "", ids.ids[i]);
            printf(json ? "]\n" : "\n");
        }
    }
    free(text);
    tn_tokens_free(&ids);
    tn_tokenizer_free(tok);
    tn_gguf_close(g);
done:
    free(words);
    return rc;
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL;
    unsigned flags = 0;
    tn_tokens ids = {0};
    int rc = CLI_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(detokenize_usage);
            tn_tokens_free(&ids);
            return CLI_EXIT_OK;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) {
            model = argv[++i];
        } else if (!strcmp(a, "--special")) {
            flags |= TN_DETOKENIZE_SPECIAL;
        } else if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
            cli_error(_("detokenize: unknown or incomplete option '%s' (see --help)"), a);
            goto done;
        } else {
            /* Numbers separated by anything but digits and minus signs:
             * "1 2", "1,2", "[1, 2]". */
            for (const char *p = a; *p;) {
                if (*p == '-') {
                    cli_error(_("detokenize: '%s': token ids are not negative"), a);
                    rc = CLI_EXIT_BAD_INPUT;
                    goto done;
                }
                if (*p < '0' || *p > '9') {
                    if (*p != ' ' && *p != ',' && *p != '[' && *p != ']' && *p != '\t' &&
                        *p != '\n') {
                        cli_error(_("detokenize: '%s' is not a list of token ids"), a);
                        rc = CLI_EXIT_BAD_INPUT;
                        goto done;
                    }
                    p++;
                    continue;
                }
                errno = 0;
                char *end;
                unsigned long long v = strtoull(p, &end, 10);
                if (errno || v > INT32_MAX) {
                    cli_error(_("detokenize: token id '%.*s' is too large"), (int)(end - p), p);
                    rc = CLI_EXIT_BAD_INPUT;
                    goto done;
                }
                if (tn_tokens_push(&ids, (int32_t)v)) {
                    cli_error(_("detokenize: out of memory"));
                    rc = CLI_EXIT_BAD_INPUT;
                    goto done;
                }
                p = end;
            }
        }
    }
    if (!model) {
        cli_error(_("detokenize: -m MODEL.gguf is required (see --help)"));
        goto done;
    }
    tn_gguf *g = NULL;
    tn_tokenizer *tok = NULL;
    if ((rc = load_tokenizer(model, &g, &tok)))
        goto done;
    tn_buf out = {0};
    tn_error err = {0};
    if (tn_detokenize(tok, ids.ids, ids.n, flags, &out, &err) != TN_OK) {
        cli_error("%s: %s", model, cli_engine_message(&err));
        rc = CLI_EXIT_BAD_INPUT;
    } else {
        cli_model_text_write(out.data, out.len);
        rc = CLI_EXIT_OK;
    }
    tn_buf_free(&out);
    tn_tokenizer_free(tok);
    tn_gguf_close(g);
done:
    tn_tokens_free(&ids);
    return rc;
}
