/* tern-cli mkmodel --arch dflash: a random-weight DFlash draft for a target
 * (docs/DFLASH.md). */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli mkmodel --arch dflash --target TARGET.gguf -o OUT.gguf\n"
              "         [--type q8_0] [--layers 1] [--heads N] [--kv-heads N] [--head-dim N]\n"
              "         [--ff N] [--block-size 16] [--target-layers 2,5,8] [--mask-token ID]\n"
              "         [--draft-vocab N] [--sliding-window N] [--gemma-layers] [--seed S]\n\n"
              "Writes a DFlash block draft for TARGET in the layout llama.cpp's 'dflash'\n"
              "architecture reads (docs/DFLASH.md): its width, vocabulary and hidden-state\n"
              "ids fit TARGET; heads and FFN width default to TARGET's; --target-layers are\n"
              "hidden-state ids (0 = embeddings, i = output of layer i-1), default five\n"
              "spread over the layers. TARGET's softcapping, sliding window and per-layer\n"
              "pattern carry over (--sliding-window N: that window on every layer, 0: none).\n"
              "--draft-vocab N: the draft's own head of N rows with a d2t map to TARGET's ids.\n"
              "--gemma-layers: post norms, GELU, shared K/V, layer scale, partial rope.\n"
              "The weights are random: drafts are accepted about as often as chance allows.\n"));
}

static bool number(const char *opt, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    /* strtoll skips white space: " 5" is no number given on purpose. */
    long long v = cli_number_text(s, false) ? strtoll(s, &end, 10) : 0;
    if (!cli_number_text(s, false) || errno || end == s || *end || v < lo || v > hi) {
        cli_error(_("mkmodel: %s needs a whole number from %lld to %lld, not '%s'"), opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

int cmd_mkmodel_dflash(int argc, char **argv) {
    tn_mkmodel_dflash_params p = tn_mkmodel_dflash_default_params();
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--gemma-layers")) {
            p.gemma_layers = true;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error(_("mkmodel: option '%s' needs a value (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        long long n = 0;
        if (!strcmp(a, "--arch")) {
            continue; /* dflash: how we got here */
        } else if (!strcmp(a, "--target")) {
            p.target = v;
        } else if (!strcmp(a, "--type")) {
            p.type = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
        } else if (!strcmp(a, "--target-layers")) {
            p.n_target_layers = 0;
            for (const char *s = v; *s;) {
                char *end;
                errno = 0;
                long id = strtol(s, &end, 10);
                if (errno || end == s || id < 0 || id > 4096 || (*end && *end != ',') ||
                    p.n_target_layers == 16) {
                    cli_error(_("mkmodel: --target-layers needs up to 16 comma-separated ids "
                                "(0 = embeddings), not '%s'"),
                              v);
                    return CLI_EXIT_USAGE;
                }
                p.target_layers[p.n_target_layers++] = (int32_t)id;
                s = *end ? end + 1 : end;
            }
        } else {
            static const char *opts[] = {"--layers",     "--heads",       "--kv-heads",
                                         "--head-dim",   "--ff",          "--block-size",
                                         "--mask-token", "--draft-vocab", "--sliding-window",
                                         "--seed"};
            size_t k = 0;
            while (k < sizeof opts / sizeof opts[0] && strcmp(a, opts[k]))
                k++;
            if (k == sizeof opts / sizeof opts[0]) {
                cli_error(_("mkmodel: unknown option '%s' for --arch dflash (see --help)"), a);
                return CLI_EXIT_USAGE;
            }
            const bool seed = k == sizeof opts / sizeof opts[0] - 1;
            if (!number(a, v, 0, seed ? (long long)INT64_MAX : (1LL << 31) - 1, &n))
                return CLI_EXIT_USAGE;
            int64_t *dst[] = {&p.n_layer,     &p.n_head,         &p.n_head_kv,
                              &p.head_dim,    &p.n_ff,           &p.block_size,
                              &p.mask_token,  &p.draft_vocab,    &p.sliding_window,
                              NULL};
            if (seed)
                p.seed = (uint64_t)n;
            else
                *dst[k] = n;
            if (dst[k] == &p.sliding_window && n == 0)
                p.sliding_window = -1; /* 0 on the command line: no window */
        }
    }
    if (!p.target || !out) {
        cli_error(_("mkmodel: --arch dflash needs --target TARGET.gguf and -o OUT.gguf"));
        return CLI_EXIT_USAGE;
    }
    tn_error err = {0};
    int rc = tn_mkmodel_dflash(&p, out, &err);
    if (rc != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return rc == TN_ERR_INVALID ? CLI_EXIT_USAGE : CLI_EXIT_BAD_INPUT;
    }
    return CLI_EXIT_OK;
}

/* tern-cli mkmodel --arch gemma4-assistant: a random-weight MTP assistant
 * for a gemma4 target (docs/MTP.md). */
static void usage_mtp(FILE *out) {
    fprintf(out,
            _("usage: tern-cli mkmodel --arch gemma4-assistant --target TARGET.gguf -o OUT.gguf\n"
              "         [--type q8_0] [--embd N] [--layers N] [--heads N] [--ff N] [--seed S]\n\n"
              "Writes a Gemma 4 MTP assistant for the gemma4 model TARGET in the layout\n"
              "llama.cpp's 'gemma4-assistant' architecture reads (docs/MTP.md): TARGET's\n"
              "width, head sizes, key/value heads, window, rope and tokenizer; the\n"
              "assistant's own width (default 256), layers (default 4: sliding ones, then\n"
              "one full), heads (default 4) and FFN width (default 4 x width).\n"
              "The weights are random: drafts are accepted about as often as chance allows.\n"));
}

int cmd_mkmodel_mtp(int argc, char **argv) {
    tn_mkmodel_mtp_params p = tn_mkmodel_mtp_default_params();
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage_mtp);
            return CLI_EXIT_OK;
        }
        if (i + 1 >= argc) {
            cli_error(_("mkmodel: option '%s' needs a value (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        long long n = 0;
        if (!strcmp(a, "--arch")) {
            continue; /* gemma4-assistant: how we got here */
        } else if (!strcmp(a, "--target")) {
            p.target = v;
        } else if (!strcmp(a, "--type")) {
            p.type = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
        } else if (!strcmp(a, "--seed")) {
            if (!number(a, v, 0, (long long)INT64_MAX, &n))
                return CLI_EXIT_USAGE;
            p.seed = (uint64_t)n;
        } else {
            static const char *opts[] = {"--embd", "--layers", "--heads", "--ff"};
            int64_t *dst[] = {&p.n_embd, &p.n_layer, &p.n_head, &p.n_ff};
            size_t k = 0;
            while (k < sizeof opts / sizeof opts[0] && strcmp(a, opts[k]))
                k++;
            if (k == sizeof opts / sizeof opts[0]) {
                cli_error(_("mkmodel: unknown option '%s' for --arch gemma4-assistant (see "
                            "--help)"),
                          a);
                return CLI_EXIT_USAGE;
            }
            if (!number(a, v, 1, (1LL << 31) - 1, &n))
                return CLI_EXIT_USAGE;
            *dst[k] = n;
        }
    }
    if (!p.target || !out) {
        cli_error(_("mkmodel: --arch gemma4-assistant needs --target TARGET.gguf and -o "
                    "OUT.gguf"));
        return CLI_EXIT_USAGE;
    }
    tn_error err = {0};
    int rc = tn_mkmodel_mtp(&p, out, &err);
    if (rc != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return rc == TN_ERR_INVALID ? CLI_EXIT_USAGE : CLI_EXIT_BAD_INPUT;
    }
    return CLI_EXIT_OK;
}
