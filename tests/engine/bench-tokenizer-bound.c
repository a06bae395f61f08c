/* meson test --benchmark tokenizer-bound: what the early refusal of a long
 * prompt costs against what encoding it costs, for text NFC changes nearly
 * everywhere, through the Qwen3 vocabulary (the one that normalizes).
 * Prints, per text, the bound (tn_tokenizer_min_tokens) and its CPU time,
 * then the real count and the encoding's CPU time. docs/TOKENIZER.md
 * ("Refusing early") lists the results.
 *
 *   bench-tokenizer-bound [MiB]      (default 16)
 *
 * CPU time, not wall time: on a shared machine wall time mostly measures
 * waiting for a core. */
#include "tn-test.h"

#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 16;
    const char *dir = tn_test_vocab("qwen3");
    if (!dir || !mib) {
        fprintf(stderr, "bench-tokenizer-bound: no qwen3 vocabulary in TERN_VOCAB_DIR\n");
        return 77;
    }
    char src[4096], path[4096];
    snprintf(src, sizeof src, "%s/tokenizer.json", dir);
    snprintf(path, sizeof path, "%s/bench-bound-qwen3.gguf", tn_test_tmpdir());
    tn_error err = {0};
    tn_gguf_writer *w = tn_gguf_writer_new();
    int64_t n_vocab = 0;
    int rc = w ? tn_vocab_convert_hf(src, w, &n_vocab, &err) : TN_ERR_NOMEM;
    if (!rc)
        rc = tn_gguf_writer_write(w, path, &err);
    tn_gguf_writer_free(w);
    tn_gguf *g = NULL;
    tn_tokenizer *tok = NULL;
    if (!rc)
        rc = tn_gguf_open(path, &g, &err);
    if (!rc)
        rc = tn_tokenizer_load(g, &tok, &err);
    if (rc) {
        fprintf(stderr, "bench-tokenizer-bound: %s\n", err.message);
        tn_gguf_close(g);
        return 1;
    }
    static const struct {
        const char *what, *unit;
    } units[] = {
        {"e + combining acute", "e\xCC\x81"},
        {"Hangul jamo L V T", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"},
        {"a mix", "a\xCC\x88o\xCC\x82\xCC\x81\xE1\x84\x80\xE1\x85\xB3\xE1\x86\xAF"
                  "\xE2\x84\xAA\xE3\x81\x8B\xE3\x82\x99"},
    };
    const size_t size = mib << 20;
    char *buf = malloc(size);
    if (!buf)
        return 1;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        const size_t k = strlen(units[u].unit);
        size_t n = 0;
        while (n + k <= size) {
            memcpy(buf + n, units[u].unit, k);
            n += k;
        }
        double t0 = cpu_now();
        const size_t bound = tn_tokenizer_min_tokens(tok, buf, n);
        double t1 = cpu_now();
        tn_tokens t = {0};
        rc = tn_tokenize(tok, buf, n, 0, &t, &err);
        double t2 = cpu_now();
        printf("%zu MiB of %s: bound %zu tokens in %.3f s CPU; encoded: %zu tokens in %.2f s "
               "CPU%s\n",
               mib, units[u].what, bound, t1 - t0, t.n, t2 - t1, rc ? " (failed)" : "");
        fflush(stdout);
        tn_tokens_free(&t);
    }
    free(buf);
    tn_tokenizer_free(tok);
    tn_gguf_close(g);
    return 0;
}
