/* tern-cli mkmodel: random-weight GGUF models with real shapes and tokenizers. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli mkmodel --arch llama|qwen3|qwen3moe|gemma3|gemma4|gpt-oss --type TYPE\n"
              "         --embd N"
              " --layers N --heads N --kv-heads N --head-dim N --ff N [--ctx N] [--window N]\n"
              "         [--tokenizer PATH/tokenizer.json | --vocab-gguf FILE.gguf] [--seed S]\n"
              "         [--tied] [--name NAME] [--logit-scale X] [-t THREADS] [--row-pool N]\n"
              "         [--vocab-size N] -o OUT.gguf\n"
              "       gemma4: [--preset gemma4-e2b|gemma4-e4b|gemma4-26b-a4b|gemma4-31b]\n"
              "         [--head-dim-swa N] [--kv-heads-full N] [--per-layer N] [--shared-kv N]\n"
              "         [--swa-period N] [--k-eq-v] [--double-wide] [--untied]"
              "   (tied unless --untied)\n"
              "         [--experts N --experts-used K --expert-ff N]   (the 26B-A4B layout)\n"
              "       qwen3moe: [--preset qwen3-30b-a3b] --experts N --experts-used K\n"
              "         --expert-ff N\n"
              "       gpt-oss: [--preset gpt-oss-20b] --experts N --experts-used K --expert-ff N\n"
              "         [--window N]   (always untied)\n"
              "       tern-cli mkmodel --arch dflash --target TARGET.gguf -o OUT.gguf ...\n"
              "         (a DFlash draft for TARGET; see 'tern-cli mkmodel --arch dflash --help')\n"
              "       tern-cli mkmodel --arch gemma4-assistant --target TARGET.gguf -o OUT.gguf\n"
              "         (an MTP assistant; see 'tern-cli mkmodel --arch gemma4-assistant --help')\n\n"
              "TYPE: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs,\n"
              "      or the mixes q4_k_m q5_k_m, or mxfp4 (experts MXFP4, other matrices Q8_0,\n"
              "      as llama-quantize's MXFP4_MOE). Without --tokenizer the model gets a tiny\n"
              "      synthetic vocabulary. --vocab-size pads --tokenizer's vocabulary to N rows\n"
              "      with unused [PADn] tokens, as llama.cpp's converter does (gpt-oss: 201088).\n"
              "The weights are random: the model's output is meaningless.\n"));
    fputs(_("\n"
            "  --name NAME      general.name; default: the architecture, size and type,\n"
            "                   such as \"Random llama 1B-shape (Q4_0)\"\n"
            "  --seed S         the seed of the random weights (default 1)\n"
            "  --logit-scale X  the spread (standard deviation) of the logits, 0.001 to\n"
            "                   999 (default 10): peaked, so that greedy decoding is\n"
            "                   well defined\n"
            "  -t THREADS       threads that generate and quantize the weights\n"
            "                   (default: every core)\n"
            "  --row-pool N     quantize only N random rows per tensor and fill the rest\n"
            "                   with copies of them: full-size files in minutes, for\n"
            "                   memory and speed figures only (the rows are not\n"
            "                   independent; see docs/MKMODEL.md)\n"
            "  --vocab-size N   pad the vocabulary of --tokenizer to N rows (above)\n"),
          out);
}

/* The parameters of the shape, the embedding's rows left out (the
 * vocabulary's size is known only once the tokenizer is read): what tells
 * one random model from another in the app's model list. */
static double shape_params(const tn_mkmodel_params *p) {
    const double embd = (double)p->n_embd, q = (double)p->n_head * (double)p->head_dim;
    const double kv = (double)p->n_head_kv * (double)p->head_dim;
    double per_layer = embd * q * 2 + embd * kv * 2; /* q, o; k, v */
    const bool experts_only = p->arch && (!strcmp(p->arch, "qwen3moe") ||
                                          !strcmp(p->arch, "gpt-oss"));
    if (!experts_only)
        per_layer += 3.0 * embd * (double)p->n_ff;
    if (p->n_expert > 0)
        per_layer += (double)p->n_expert * (3.0 * embd * (double)p->n_ff_exp + embd);
    double total = per_layer * (double)p->n_layer;
    if (p->vocab_size > 0)
        total += (double)p->vocab_size * embd * (p->tied_output ? 1 : 2);
    return total;
}

/* "Random llama 1B-shape (Q4_0)": the default general.name. What makes the
 * file a demo model is tern.random_weights (engine/mk/mkmodel.c); files of
 * older versions are known by this exact form (docs/MODEL.md, "Demo models"),
 * so it stays as it is. */
static void default_name(const tn_mkmodel_params *p, char *name, size_t size) {
    const double n = shape_params(p);
    char count[32], type[32];
    /* 973 M weights (Llama 3.2 1B's layers) read "1B", as models are named. */
    const double unit = n >= 0.95e9 ? 1e9 : n >= 0.95e6 ? 1e6 : 1e3;
    const char *suffix = unit == 1e9 ? "B" : unit == 1e6 ? "M" : "K";
    const double v = n / unit;
    if (v < 9.95 && v - (double)(long)(v + 0.05) > 0.05)
        snprintf(count, sizeof count, "%.1f%s", v, suffix);
    else
        snprintf(count, sizeof count, "%.0f%s", v, suffix);
    size_t k = 0;
    for (const char *c = p->type ? p->type : ""; *c && k + 1 < sizeof type; c++)
        type[k++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    type[k] = '\0';
    snprintf(name, size, "Random %s %s-shape (%s)", p->arch ? p->arch : "", count, type);
}

static bool parse_i64(const char *opt, const char *s, int64_t *out) {
    char *end;
    errno = 0;
    /* strtoll skips white space: " 5" is no number given on purpose. */
    long long v = cli_number_text(s, false) ? strtoll(s, &end, 10) : 0;
    if (!cli_number_text(s, false) || errno || end == s || *end) {
        cli_error(_("mkmodel: %s needs a whole number, not '%s'"), opt, s);
        return false;
    }
    *out = v;
    return true;
}

int cmd_mkmodel(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++) /* DFlash drafts: cli/mkmodel-dflash.c */
        if (!strcmp(argv[i], "--arch") && !strcmp(argv[i + 1], "dflash"))
            return cmd_mkmodel_dflash(argc, argv);
        else if (!strcmp(argv[i], "--arch") && !strcmp(argv[i + 1], "gemma4-assistant"))
            return cmd_mkmodel_mtp(argc, argv);
        else if (!strcmp(argv[i], "--arch") && (!strcmp(argv[i + 1], "gemma3-vision") ||
                                                 !strcmp(argv[i + 1], "gemma4-vision")))
            return cmd_mkmodel_vision(argc, argv); /* cli/mkmodel-vision.c */
    tn_mkmodel_params p = tn_mkmodel_default_params();
    const char *out = NULL;
    bool have[7] = {0};
    bool untied = false;
    /* A preset first, so that any other option overrides its values. */
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--preset") && tn_mkmodel_preset(&p, argv[i + 1]) != TN_OK) {
            cli_error(_("mkmodel: unknown preset '%s' (use gemma4-e2b, gemma4-e4b, "
                        "gemma4-26b-a4b, gemma4-31b, qwen3-30b-a3b or gpt-oss-20b)"),
                      argv[i + 1]);
            return CLI_EXIT_USAGE;
        }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--tied")) {
            p.tied_output = true;
            continue;
        }
        if (!strcmp(a, "--untied") || !strcmp(a, "--k-eq-v") || !strcmp(a, "--double-wide")) {
            untied |= !strcmp(a, "--untied");
            p.k_eq_v |= !strcmp(a, "--k-eq-v");
            p.double_wide_ffn |= !strcmp(a, "--double-wide");
            continue;
        }
        if (i + 1 >= argc) {
            cli_error(_("mkmodel: option '%s' needs a value (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        int64_t n = 0;
        if (!strcmp(a, "--arch")) {
            p.arch = v;
        } else if (!strcmp(a, "--type")) {
            p.type = v;
        } else if (!strcmp(a, "--tokenizer")) {
            p.tokenizer = v;
        } else if (!strcmp(a, "--vocab-gguf")) {
            p.vocab_gguf = v;
        } else if (!strcmp(a, "--preset")) {
            continue; /* applied above */
        } else if (!strcmp(a, "--name")) {
            p.name = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
        } else if (!strcmp(a, "--logit-scale")) {
            /* strtof took "0x10", "inf" and "nan"; the engine wants a scale
             * in (0, 1000) (engine/mk/mkmodel.c). */
            double scale;
            if (!cli_parse_double(a, v, 0.001, 999, &scale))
                return CLI_EXIT_USAGE;
            p.logit_scale = (float)scale;
        } else {
            static const char *opts[] = {"--embd", "--layers", "--heads", "--kv-heads",
                                         "--head-dim", "--ff", "--ctx", "--window", "--seed",
                                         "-t", "--head-dim-swa", "--kv-heads-full",
                                         "--per-layer", "--shared-kv", "--swa-period",
                                         "--experts", "--experts-used", "--expert-ff",
                                         "--row-pool", "--vocab-size"};
            int64_t *dst[] = {&p.n_embd, &p.n_layer, &p.n_head, &p.n_head_kv, &p.head_dim,
                              &p.n_ff, &p.n_ctx, &p.sliding_window, NULL, NULL,
                              &p.head_dim_swa, &p.n_head_kv_full, &p.n_embd_per_layer,
                              &p.n_shared_kv, &p.swa_period, &p.n_expert,
                              &p.n_expert_used, &p.n_ff_exp, &p.row_pool, &p.vocab_size};
            size_t k = 0;
            while (k < sizeof opts / sizeof opts[0] && strcmp(a, opts[k]))
                k++;
            if (k == sizeof opts / sizeof opts[0]) {
                cli_error(_("mkmodel: unknown option '%s' (see --help)"), a);
                return CLI_EXIT_USAGE;
            }
            if (!parse_i64(a, v, &n))
                return CLI_EXIT_USAGE;
            if (k < 6)
                have[k] = true;
            if (dst[k])
                *dst[k] = n;
            else if (k == 8)
                p.seed = (uint64_t)n;
            else
                p.n_threads = (int)n;
        }
    }
    if (p.arch && !strcmp(p.arch, "gemma4"))
        p.tied_output = !untied; /* the published Gemma 4 models are tied */
    else if (untied)
        p.tied_output = false;
    if (!out) {
        cli_error(_("mkmodel: no output file (-o OUT.gguf)"));
        return CLI_EXIT_USAGE;
    }
    char name[160];
    if (!p.name) {
        default_name(&p, name, sizeof name);
        p.name = name;
    }
    tn_error err;
    if (tn_mkmodel(&p, out, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return err.code == TN_ERR_INVALID ? CLI_EXIT_USAGE : CLI_EXIT_BAD_INPUT;
    }
    (void)have;
    return CLI_EXIT_OK;
}
