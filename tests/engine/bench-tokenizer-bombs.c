/* meson test --benchmark tokenizer-bombs: hostile prompts (one character
 * repeated, long runs of spaces, digits, marks, invalid bytes, ...) through
 * every fetched vocabulary at 1 MiB and 8 MiB, each in a child process so
 * that its peak RSS is its own. Prints one line per case: encode and decode
 * time, tokens, the peak RSS over the loaded tokenizer's, and the 8 MiB /
 * 1 MiB time ratio (linear work gives about 8). docs/TOKENIZER.md lists
 * the results.
 *
 *   bench-tokenizer-bombs [--sizes 1,8] [--only PATTERN] [GEMMA4.gguf]
 *
 * A Gemma 4 vocabulary is read from a model file given on the command line
 * (none is fetched). Llama 3's pre-tokenizer runs over the Qwen3 vocabulary
 * as "llama3*" (no Llama 3 vocabulary is fetched either). */
#include "tn-test.h"

#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct pattern {
    const char *name;
    const char *unit; /* repeated to the size */
    size_t unit_len;  /* 0: strlen */
    const char *head; /* once in front, or NULL */
} pattern;

static const pattern patterns[] = {
    {"a", "a", 0, NULL},
    {"0", "0", 0, NULL},
    {"e-acute", "\xC3\xA9", 0, NULL},
    {"emoji", "\xF0\x9F\x98\x80", 0, NULL},
    {"cjk", "\xE4\xB8\xAD", 0, NULL},
    {"fffd", "\xEF\xBF\xBD", 0, NULL},
    {"mark", "\xCC\x81", 0, "a"},
    {"marks-2ccc", "\xCC\x81\xCC\xA3", 0, "a"}, /* ccc 230, 220: NFC reorders */
    {"space", " ", 0, NULL},
    {"newline", "\n", 0, NULL},
    {"tab-space", "\t ", 0, NULL},
    {"crlf", "\r\n", 0, NULL},
    {"digits", "0123456789", 0, NULL},
    {"apostrophes", "'s'''s", 0, NULL},
    {"scripts", "a\xD0\x96\xE4\xB8\xAD\xCE\xB1", 0, NULL},
    {"invalid-ff", "\xFF", 0, NULL},
    {"invalid-80", "\x80", 0, NULL},
    {"cut-c3", "\xC3", 0, NULL},
    {"astral", "\xF0\x9D\x94\xB8", 0, NULL}, /* U+1D538, a letter */
    {"nul", "\0", 1, NULL},
    {"word-x", "xq", 0, NULL},
    {"upper", "A", 0, NULL},
    {"lo-upper", "\xC2\xAA" "AAAAAAA", 0, NULL}, /* gpt-4o: Lo then Lu */
    {"punct-space", " !", 0, NULL},
    {"space-nl", "  \n", 0, NULL},
    {"ws-then-a", "                               a", 0, NULL},
    {"added-prefix", "<|im_sta", 0, NULL},
    {"added-prefix-g", "<start_of_tur", 0, NULL},
    {"random-word", NULL, 0, NULL}, /* random lowercase letters, no spaces */
    {"random-bytes", NULL, 0, NULL},
};

typedef struct vocab {
    const char *name;
    char path[4096];
    bool ok;
} vocab;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool convert(vocab *v, const char *src_name, const char *pre) {
    const char *dir = tn_test_vocab(src_name);
    if (!dir)
        return false;
    char src[4096];
    snprintf(src, sizeof src, "%s/tokenizer.json", dir);
    snprintf(v->path, sizeof v->path, "%s/%s.gguf", tn_test_tmpdir(), v->name);
    tn_error err = {0};
    tn_gguf_writer *w = tn_gguf_writer_new();
    int64_t n = 0;
    int rc = w ? tn_vocab_convert_hf(src, w, &n, &err) : TN_ERR_NOMEM;
    if (!rc && pre)
        rc = tn_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (!rc)
        rc = tn_gguf_writer_write(w, v->path, &err);
    tn_gguf_writer_free(w);
    if (rc)
        fprintf(stderr, "%s: %s\n", v->name, err.message);
    return rc == TN_OK;
}

static char *make_input(const pattern *p, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return NULL;
    uint64_t seed = 42;
    if (!p->unit) {
        const bool letters = !strcmp(p->name, "random-word");
        for (size_t i = 0; i < size; i++) {
            uint64_t r = tn_test_rand(&seed);
            s[i] = letters ? (char)('a' + r % 26) : (char)(r & 0xff);
        }
        s[size] = '\0';
        return s;
    }
    size_t o = 0;
    if (p->head) {
        size_t hl = strlen(p->head);
        memcpy(s, p->head, hl);
        o = hl;
    }
    const size_t ul = p->unit_len ? p->unit_len : strlen(p->unit);
    while (o + ul <= size) {
        memcpy(s + o, p->unit, ul);
        o += ul;
    }
    while (o < size) /* pad with ASCII so that the size is exact */
        s[o++] = 'z';
    s[size] = '\0';
    return s;
}

/* In a child: load, encode, decode; writes "enc_s dec_s n_tokens". */
static int run_case(const vocab *v, const pattern *p, size_t size, int fd) {
    tn_error err = {0};
    tn_gguf *g = NULL;
    tn_tokenizer *tok = NULL;
    if (tn_gguf_open(v->path, &g, &err) || tn_tokenizer_load(g, &tok, &err)) {
        fprintf(stderr, "%s: %s\n", v->name, err.message);
        return 1;
    }
    char *text = size ? make_input(p, size) : NULL;
    if (size && !text)
        return 1;
    double enc = 0, dec = 0;
    size_t n = 0;
    if (size) {
        tn_tokens t = {0};
        double t0 = now();
        int rc = tn_tokenize(tok, text, size, 0, &t, &err);
        double t1 = now();
        if (rc) {
            fprintf(stderr, "%s %s: %s\n", v->name, p->name, err.message);
            return 1;
        }
        tn_buf b = {0};
        rc = tn_detokenize(tok, t.ids, t.n, 0, &b, &err);
        double t2 = now();
        if (rc) {
            fprintf(stderr, "%s %s: %s\n", v->name, p->name, err.message);
            return 1;
        }
        enc = t1 - t0;
        dec = t2 - t1;
        n = t.n;
        tn_buf_free(&b);
        tn_tokens_free(&t);
    }
    char line[128];
    int len = snprintf(line, sizeof line, "%.6f %.6f %zu\n", enc, dec, n);
    if (write(fd, line, (size_t)len) != len)
        return 1;
    free(text);
    tn_tokenizer_free(tok);
    tn_gguf_close(g);
    return 0;
}

/* Forks run_case; the child's numbers and its peak RSS in KiB. */
static bool measure(const vocab *v, const pattern *p, size_t size, double *enc, double *dec,
                    size_t *n, long *rss_kib) {
    int fds[2];
    if (pipe(fds))
        return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        close(fds[0]);
        _exit(run_case(v, p, size, fds[1]));
    }
    close(fds[1]);
    char line[128] = {0};
    ssize_t got = read(fds[0], line, sizeof line - 1);
    close(fds[0]);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) ||
        got <= 0)
        return false;
    *rss_kib = ru.ru_maxrss;
    return sscanf(line, "%lf %lf %zu", enc, dec, n) == 3;
}

int main(int argc, char **argv) {
    size_t sizes[4] = {1, 8};
    size_t n_sizes = 2;
    const char *only = NULL, *gemma4 = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            n_sizes = 0;
            for (char *s = argv[++i]; *s && n_sizes < 4;) {
                sizes[n_sizes++] = strtoul(s, &s, 10);
                if (*s == ',')
                    s++;
            }
        } else {
            gemma4 = argv[i];
        }
    }
    vocab vocabs[] = {{"gemma3", "", false}, {"qwen3", "", false}, {"llama3*", "", false},
                      {"gptoss", "", false}, {"gemma4", "", false}};
    vocabs[0].ok = convert(&vocabs[0], "gemma3", NULL);
    vocabs[1].ok = convert(&vocabs[1], "qwen3", NULL);
    vocabs[2].ok = convert(&vocabs[2], "qwen3", "llama-bpe");
    vocabs[3].ok = convert(&vocabs[3], "gptoss", NULL);
    if (gemma4) {
        snprintf(vocabs[4].path, sizeof vocabs[4].path, "%s", gemma4);
        vocabs[4].ok = true;
    }
    printf("%-8s %-15s %4s %9s %9s %9s %9s %6s\n", "vocab", "input", "MiB", "encode_s",
           "decode_s", "tokens", "rss_MiB+", "x8/x1");
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        const vocab *v = &vocabs[vi];
        if (!v->ok)
            continue;
        double e0, d0;
        size_t n0;
        long base = 0;
        if (!measure(v, &patterns[0], 0, &e0, &d0, &n0, &base)) {
            fprintf(stderr, "%s: failed to load\n", v->name);
            continue;
        }
        for (size_t pi = 0; pi < sizeof patterns / sizeof patterns[0]; pi++) {
            const pattern *p = &patterns[pi];
            if (only && strcmp(only, p->name))
                continue;
            double first = 0;
            for (size_t si = 0; si < n_sizes; si++) {
                double enc, dec;
                size_t n;
                long rss;
                if (!measure(v, p, sizes[si] << 20, &enc, &dec, &n, &rss)) {
                    printf("%-8s %-15s %4zu FAILED\n", v->name, p->name, sizes[si]);
                    continue;
                }
                if (si == 0)
                    first = enc;
                printf("%-8s %-15s %4zu %9.3f %9.3f %9zu %9.1f", v->name, p->name, sizes[si],
                       enc, dec, n, (double)(rss - base) / 1024.0);
                if (si > 0 && first > 0)
                    printf(" %6.1f", enc / first);
                printf("\n");
                fflush(stdout);
            }
        }
    }
    return 0;
}
