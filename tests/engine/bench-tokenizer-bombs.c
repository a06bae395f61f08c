/* meson test --benchmark tokenizer-bombs: hostile prompts (one character
 * repeated, long runs of spaces, digits, marks, invalid bytes, ...) through
 * every fetched vocabulary at 1 MiB and 8 MiB, each in a child process so
 * that its peak RSS is its own. Prints one line per case: encode and decode
 * wall time, tokens, the peak RSS over the loaded tokenizer's, the encoding's
 * CPU time, and that over the first size's (8 MiB / 1 MiB: linear work gives
 * about 8). docs/TOKENIZER.md lists the results.
 *
 *   bench-tokenizer-bombs [--sizes 1,8] [--only PATTERN] [GEMMA4.gguf]
 *
 * --sizes takes MiB, or KiB with a "k" suffix: "1k,10k,100k,1024k" shows
 * how the time grows with the length (the last column: the encoding's CPU
 * time over the first size's; linear work grows as the size does).
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
    {"random-cjk", NULL, 0, NULL},   /* random CJK ideographs, one word */
    {"random-emoji", NULL, 0, NULL}, /* random emoji, one word */
    {"base64", NULL, 0, NULL},       /* random base64 text, one word */
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

/* The process's CPU time: on a shared machine wall time mostly measures
 * waiting for a core. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *make_input(const pattern *p, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return NULL;
    uint64_t seed = 42;
    if (!p->unit && (!strcmp(p->name, "random-cjk") || !strcmp(p->name, "random-emoji"))) {
        /* U+4E00..U+9FFF (3 bytes) or U+1F300..U+1F5FF (4 bytes) */
        const bool cjk = !strcmp(p->name, "random-cjk");
        size_t o = 0;
        while (o + (cjk ? 3 : 4) <= size) {
            uint32_t c =
                (uint32_t)(tn_test_rand(&seed) % (cjk ? 0x5200 : 0x300)) + (cjk ? 0x4E00 : 0x1F300);
            if (cjk) {
                s[o++] = (char)(0xE0 | (c >> 12));
            } else {
                s[o++] = (char)(0xF0 | (c >> 18));
                s[o++] = (char)(0x80 | ((c >> 12) & 0x3F));
            }
            s[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
            s[o++] = (char)(0x80 | (c & 0x3F));
        }
        while (o < size)
            s[o++] = 'z';
        s[size] = '\0';
        return s;
    }
    if (!p->unit && !strcmp(p->name, "base64")) {
        static const char b64[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (size_t i = 0; i < size; i++)
            s[i] = b64[tn_test_rand(&seed) % 64];
        s[size] = '\0';
        return s;
    }
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

/* In a child: load, encode, decode; writes "enc_s dec_s n_tokens enc_cpu_s". */
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
    double enc = 0, dec = 0, enc_cpu = 0;
    size_t n = 0;
    if (size) {
        tn_tokens t = {0};
        double c0 = cpu_now(), t0 = now();
        int rc = tn_tokenize(tok, text, size, 0, &t, &err);
        double t1 = now();
        enc_cpu = cpu_now() - c0;
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
    int len = snprintf(line, sizeof line, "%.6f %.6f %zu %.6f\n", enc, dec, n, enc_cpu);
    if (write(fd, line, (size_t)len) != len)
        return 1;
    free(text);
    tn_tokenizer_free(tok);
    tn_gguf_close(g);
    return 0;
}

/* Forks run_case; the child's numbers and its peak RSS in KiB. */
static bool measure(const vocab *v, const pattern *p, size_t size, double *enc, double *dec,
                    size_t *n, long *rss_kib, double *enc_cpu) {
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
    return sscanf(line, "%lf %lf %zu %lf", enc, dec, n, enc_cpu) == 4;
}

int main(int argc, char **argv) {
    size_t sizes[8] = {1024, 8192}; /* KiB */
    size_t n_sizes = 2;
    const char *only = NULL, *gemma4 = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            n_sizes = 0;
            for (char *s = argv[++i]; *s && n_sizes < 8;) {
                size_t v = strtoul(s, &s, 10);
                if (*s == 'k')
                    s++;
                else
                    v *= 1024;
                sizes[n_sizes++] = v;
                if (*s == ',')
                    s++;
            }
        } else {
            gemma4 = argv[i];
        }
    }
    vocab vocabs[] = {{"llama2", "", false}, {"gemma3", "", false}, {"qwen3", "", false},
                      {"llama3*", "", false}, {"gptoss", "", false}, {"gemma4", "", false}};
    vocabs[0].ok = convert(&vocabs[0], "llama2", NULL);
    vocabs[1].ok = convert(&vocabs[1], "gemma3", NULL);
    vocabs[2].ok = convert(&vocabs[2], "qwen3", NULL);
    vocabs[3].ok = convert(&vocabs[3], "qwen3", "llama-bpe");
    vocabs[4].ok = convert(&vocabs[4], "gptoss", NULL);
    if (gemma4) {
        snprintf(vocabs[5].path, sizeof vocabs[5].path, "%s", gemma4);
        vocabs[5].ok = true;
    }
    printf("%-8s %-15s %5s %9s %9s %9s %9s %9s %7s\n", "vocab", "input", "KiB", "encode_s",
           "decode_s", "tokens", "rss_MiB+", "enc_cpu", "cpu/1st");
    for (size_t vi = 0; vi < sizeof vocabs / sizeof vocabs[0]; vi++) {
        const vocab *v = &vocabs[vi];
        if (!v->ok)
            continue;
        double e0, d0, c0;
        size_t n0;
        long base = 0;
        if (!measure(v, &patterns[0], 0, &e0, &d0, &n0, &base, &c0)) {
            fprintf(stderr, "%s: failed to load\n", v->name);
            continue;
        }
        for (size_t pi = 0; pi < sizeof patterns / sizeof patterns[0]; pi++) {
            const pattern *p = &patterns[pi];
            if (only && strcmp(only, p->name))
                continue;
            double first = 0;
            for (size_t si = 0; si < n_sizes; si++) {
                double enc, dec, cpu;
                size_t n;
                long rss;
                if (!measure(v, p, sizes[si] << 10, &enc, &dec, &n, &rss, &cpu)) {
                    printf("%-8s %-15s %5zu FAILED\n", v->name, p->name, sizes[si]);
                    continue;
                }
                if (si == 0)
                    first = cpu;
                printf("%-8s %-15s %5zu %9.4f %9.4f %9zu %9.1f", v->name, p->name, sizes[si], enc,
                       dec, n, (double)(rss - base) / 1024.0);
                printf(" %9.4f", cpu);
                if (si > 0 && first > 0)
                    printf(" %7.1f", cpu / first);
                printf("\n");
                fflush(stdout);
            }
        }
    }
    return 0;
}
