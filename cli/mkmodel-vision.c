/* tern-cli mkmodel --arch gemma3-vision (a random-weight Gemma 3 vision
 * projector) and tern-cli bench-vision (encode time per image at a token
 * budget); docs/VISION.md. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool number(const char *opt, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    /* strtoll skips white space: " 5" is no number given on purpose. */
    long long v = cli_number_text(s, false) ? strtoll(s, &end, 10) : 0;
    if (!cli_number_text(s, false) || errno || end == s || *end || v < lo || v > hi) {
        cli_error(_("%s needs a whole number from %lld to %lld, not '%s'"), opt, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

int cmd_mkmodel_vision(int argc, char **argv) {
    tn_mkmodel_vision_params p = tn_mkmodel_vision_default_params();
    const char *out = NULL;
    bool patch_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf(_("usage: tern-cli mkmodel --arch gemma3-vision|gemma4-vision -o OUT.gguf\n"
                     "         [--target TEXT.gguf] [--type f32|f16] [--image-size 224]\n"
                     "         [--patch 14|16] [--embd 64] [--ff 128] [--layers 2] [--heads 4]\n"
                     "         [--text-embd 64] [--positions 64] [--seed S]\n\n"
                     "Writes a Gemma 3 or Gemma 4 vision projector (mmproj layout,\n"
                     "docs/VISION.md) with random weights; --target takes the text width from\n"
                     "a model; --positions: rows of Gemma 4's position tables.\n"));
            return CLI_EXIT_OK;
        }
        if (i + 1 >= argc) {
            cli_error(_("mkmodel: option '%s' needs a value (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        long long n = 0;
        if (!strcmp(a, "--arch")) {
            p.projector = !strcmp(v, "gemma4-vision") ? "gemma4v" : "gemma3";
            continue;
        }
        if (!strcmp(a, "--target")) {
            p.target = v;
            continue;
        }
        if (!strcmp(a, "--type")) {
            p.type = v;
            continue;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = v;
            continue;
        }
        static const char *opts[] = {"--image-size", "--patch", "--embd", "--ff", "--layers",
                                     "--heads", "--text-embd", "--positions", "--seed"};
        int64_t *dst[] = {&p.image_size, &p.patch_size, &p.n_embd, &p.n_ff, &p.n_layer,
                          &p.n_head, &p.n_embd_text, &p.n_pos, NULL};
        size_t k = 0;
        while (k < sizeof opts / sizeof opts[0] && strcmp(a, opts[k]))
            k++;
        if (k == sizeof opts / sizeof opts[0]) {
            cli_error(_("mkmodel: unknown option '%s' (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        if (!number(a, v, 1, 1LL << 40, &n))
            return CLI_EXIT_USAGE;
        patch_given |= dst[k] == &p.patch_size;
        if (dst[k])
            *dst[k] = n;
        else
            p.seed = (uint64_t)n;
    }
    if (p.projector && !strcmp(p.projector, "gemma4v") && !patch_given)
        p.patch_size = 16; /* Gemma 4's */
    if (!out) {
        cli_error(_("mkmodel: no output file (-o OUT.gguf)"));
        return CLI_EXIT_USAGE;
    }
    tn_error err;
    if (tn_mkmodel_vision(&p, out, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return err.code == TN_ERR_INVALID ? CLI_EXIT_USAGE : CLI_EXIT_BAD_INPUT;
    }
    return CLI_EXIT_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int cmd_bench_vision(int argc, char **argv) {
    const char *path = NULL;
    long long threads = 2, reps = 1, budgets[8];
    int n_budgets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf(_("usage: tern-cli bench-vision MMPROJ.gguf [--budget N]... [-t THREADS] [-r REPS]\n"
                     "Encode time of one synthetic image per token budget (default: native, 70).\n"));
            return CLI_EXIT_OK;
        }
        if (a[0] != '-') {
            path = a;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error(_("bench-vision: option '%s' needs a value"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--budget") && n_budgets < 8) {
            if (!number(a, v, 0, 1 << 20, &budgets[n_budgets++]))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-t")) {
            if (!number(a, v, 1, 1024, &threads))
                return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-r")) {
            if (!number(a, v, 1, 1000, &reps))
                return CLI_EXIT_USAGE;
        } else {
            cli_error(_("bench-vision: unknown option '%s'"), a);
            return CLI_EXIT_USAGE;
        }
    }
    if (!path) {
        cli_error(_("bench-vision: no projector file (see --help)"));
        return CLI_EXIT_USAGE;
    }
    if (!n_budgets) {
        budgets[n_budgets++] = 0;
        budgets[n_budgets++] = 70;
    }
    tn_error err;
    tn_vision *v = NULL;
    if (tn_vision_load(path, &v, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    const tn_vision_info *I = tn_vision_get_info(v);
    const int S = I->image_size;
    float *rgb = malloc((size_t)S * S * 3 * sizeof *rgb);
    float *out = malloc((size_t)I->n_image_tokens * I->n_embd_text * sizeof *out);
    int rc = CLI_EXIT_OK;
    if (!rgb || !out) {
        cli_error(_("bench-vision: out of memory"));
        rc = CLI_EXIT_BAD_INPUT;
    }
    for (int64_t i = 0; rc == CLI_EXIT_OK && i < (int64_t)S * S * 3; i++)
        rgb[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    printf("%s: %d px, patch %d, width %d, %d layers, %d heads, %d threads (%s)\n", path, S,
           I->patch_size, I->n_embd, I->n_layer, I->n_head, (int)threads,
           tn_cpu_kernels());
    for (int b = 0; rc == CLI_EXIT_OK && b < n_budgets; b++) {
        double best = 1e30;
        int n = 0;
        for (long long r = 0; r < reps && rc == CLI_EXIT_OK; r++) {
            const double t0 = now_s();
            if (tn_vision_encode(v, rgb, S, S, (int)budgets[b], out, &n, (int)threads, &err) != TN_OK) {
                cli_error("%s", cli_engine_message(&err));
                rc = CLI_EXIT_BAD_INPUT;
            }
            const double dt = now_s() - t0;
            if (dt < best)
                best = dt;
        }
        if (rc == CLI_EXIT_OK)
            printf("budget %lld -> %d tokens: %.3f s per image\n", budgets[b], n, best);
    }
    free(rgb);
    free(out);
    tn_vision_free(v);
    return rc;
}
