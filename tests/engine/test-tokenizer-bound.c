/* tn_tokenizer_min_tokens against the real count, as a property: random
 * texts built from pieces chosen to trouble the bound (runs of whitespace,
 * "▁" written out, NUL and invalid bytes, code points of every plane,
 * combining marks, Hangul jamo, NFC singletons, long runs that NFC keeps
 * with a mark or a singleton among them, the vocabulary's own token
 * texts and pieces, control tokens with and without TN_TOKENIZE_SPECIAL,
 * cuts in the middle of a character), over every fetched vocabulary. The
 * bound must never exceed the count: a prompt that fits would be refused
 * (docs/TOKENIZER.md, "Refusing early").
 *
 * Seeded and counted, not timed: TERN_BOUND_SEED and TERN_BOUND_CASES (per
 * vocabulary) change them for a longer run. */
#include "tn-test.h"
#include "tn-tokenizer-internal.h"
#include "tn-unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next(uint64_t *s) {
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t below(uint64_t *s, uint32_t n) { return n ? (uint32_t)(next(s) % n) : 0; }

typedef struct text {
    char *p;
    size_t n, cap;
} text;

static void put(text *t, const void *p, size_t n) {
    if (t->n + n > t->cap) {
        t->cap = (t->n + n) * 2 + 64;
        t->p = realloc(t->p, t->cap);
        if (!t->p)
            abort();
    }
    memcpy(t->p + t->n, p, n);
    t->n += n;
}

/* A code point written as UTF-8 without asking whether it is one (lone
 * surrogates included). */
static void put_cp(text *t, uint32_t cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 63));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | cp >> 12);
        b[1] = (char)(0x80 | ((cp >> 6) & 63));
        b[2] = (char)(0x80 | (cp & 63));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | cp >> 18);
        b[1] = (char)(0x80 | ((cp >> 12) & 63));
        b[2] = (char)(0x80 | ((cp >> 6) & 63));
        b[3] = (char)(0x80 | (cp & 63));
        n = 4;
    }
    put(t, b, n);
}

/* Code points whose NFC is shorter, or that compose with what precedes. */
static const uint32_t nfc_changers[] = {
    0x212A, 0x212B, 0x2126, 0x1FEF, 0x037E, 0x0387, 0x1FFD, 0x0340, 0x0341, 0x0343, 0x0344,
    0x0374, 0x1F71, 0x1FBE, 0x2000, 0x2001, 0x0958, 0xFB1D, 0xF900, 0xFA10, 0x2F800, 0x2FA1D,
    0x0301, 0x0300, 0x0308, 0x0313, 0x0345, 0x030A, 0x0327, 0x0323, 0x0302, 0x05B4, 0x093C,
    0x0B3E, 0x0B47, 0x0CD5, 0x0DCA, 0x1B35, 0x3099, 0x309A, 0x304B, 0x00C5, 0x0041, 0x03B1,
    0x03C9, 0xAC00, 0xD7A3};

static void put_fragment(text *t, const tn_tokenizer *tok, uint64_t *s) {
    static const char ws[] = {' ', ' ', ' ', '\n', '\t', '\r', '\v', '\f'};
    int32_t n_vocab = tn_tokenizer_n_vocab(tok);
    switch (below(s, 19)) {
    case 0: /* a word */
    case 1:
        for (uint32_t i = 0, n = 1 + below(s, 12); i < n; i++) {
            char c = (char)('a' + below(s, 26));
            put(t, &c, 1);
        }
        break;
    case 2: /* whitespace, one kind or mixed */
    {
        const uint32_t n = 1 + (below(s, 4) ? below(s, 8) : below(s, 400));
        const bool mixed = below(s, 2);
        char c = ws[below(s, sizeof ws)];
        for (uint32_t i = 0; i < n; i++) {
            if (mixed)
                c = ws[below(s, sizeof ws)];
            put(t, &c, 1);
        }
        break;
    }
    case 3: /* "▁" written out, between spaces or not */
        for (uint32_t i = 0, n = 1 + below(s, 40); i < n; i++) {
            const bool mark = below(s, 3) != 0;
            put(t, mark ? "\xE2\x96\x81" : " ", mark ? 3 : 1);
        }
        break;
    case 4: /* NUL, invalid and stray bytes */
        for (uint32_t i = 0, n = 1 + below(s, 6); i < n; i++) {
            char c = below(s, 3) ? (char)(0x80 + below(s, 128)) : (char)below(s, 32);
            put(t, &c, 1);
        }
        break;
    case 5: /* a code point of any plane, surrogates and non-characters too */
    {
        static const uint32_t top[] = {0x80, 0x800, 0x10000, 0x110000};
        put_cp(t, below(s, top[below(s, 4)]));
        break;
    }
    case 6: /* NFC singletons, combining marks, composing pairs */
    case 7:
        for (uint32_t i = 0, n = 1 + below(s, 6); i < n; i++)
            put_cp(t, nfc_changers[below(s, sizeof nfc_changers / sizeof nfc_changers[0])]);
        break;
    case 8: /* Hangul jamo: L V T, in and out of order */
        for (uint32_t i = 0, n = 1 + below(s, 8); i < n; i++) {
            uint32_t k = below(s, 3);
            put_cp(t, k == 0 ? 0x1100 + below(s, 19) : k == 1 ? 0x1161 + below(s, 21)
                                                             : 0x11A8 + below(s, 27));
        }
        break;
    case 9: /* a token's text as written (control and user-defined too) */
    case 10: {
        size_t len;
        const char *p = tn_token_text(tok, (int32_t)below(s, (uint32_t)n_vocab), &len);
        if (p)
            put(t, p, len);
        break;
    }
    case 11: /* a token's decoded bytes, or many of them: the tightest case */
    case 12: {
        size_t len;
        const char *p = tn_token_piece(tok, (int32_t)below(s, (uint32_t)n_vocab), &len);
        for (uint32_t r = 0, reps = below(s, 2) ? 1 : 1 + below(s, 64); p && r < reps; r++)
            put(t, p, len);
        break;
    }
    case 13: /* the text so far, again */
        if (t->n && t->n < 4096) {
            size_t from = below(s, (uint32_t)t->n);
            size_t n = 1 + below(s, (uint32_t)(t->n - from));
            char *copy = malloc(n);
            if (!copy)
                abort();
            memcpy(copy, t->p + from, n);
            for (uint32_t r = 0, reps = 1 + below(s, 4); r < reps; r++)
                put(t, copy, n);
            free(copy);
        }
        break;
    case 14: /* punctuation and digits, which pre-tokenizers split apart */
        for (uint32_t i = 0, n = 1 + below(s, 10); i < n; i++) {
            static const char pd[] = "0123456789.,;:!?'\"()[]{}<>|/\\-_=+*&^%$#@~`";
            put(t, &pd[below(s, sizeof pd - 1)], 1);
        }
        break;
    case 15: /* a run of what NFC keeps as it is, with a few of what it changes among
                it: the bound keeps the own weight of the first, up to the segment
                before a mark or a singleton */
    {
        static const uint32_t kept[] = {'a', 'z', ' ', '.', 0x00E9, 0x00C5, 0x03B1, 0x0439,
                                        0x4E00, 0x9FA5, 0xAC00, 0xD7A3, 0x3042, 0x1F600};
        for (uint32_t i = 0, n = 1 + below(s, 200); i < n; i++) {
            if (below(s, 24) == 0)
                put_cp(t, nfc_changers[below(s, sizeof nfc_changers / sizeof nfc_changers[0])]);
            else if (below(s, 2))
                put_cp(t, 0x4E00 + below(s, 0x5000));
            else
                put_cp(t, kept[below(s, sizeof kept / sizeof kept[0])]);
        }
        break;
    }
    case 17: /* an added token, then what NFC joins to its last character: the
                match cuts the segment, which then normalizes in two parts */
    {
        for (int tries = 0; tries < 64; tries++) {
            const int32_t id = (int32_t)below(s, (uint32_t)n_vocab);
            const int type = tn_token_type_of(tok, id);
            if (type != TN_TOKEN_TYPE_CONTROL && type != TN_TOKEN_TYPE_USER_DEFINED &&
                type != TN_TOKEN_TYPE_UNKNOWN)
                continue;
            size_t len;
            const char *p = tn_token_text(tok, id, &len);
            if (p)
                put(t, p, len);
            break;
        }
        static const uint32_t joiners[] = {0x0301, 0x0308, 0x0327, 0x0345, 0x1161, 0x11A8,
                                           0x3099, 0x0B3E, 0x0CD5, 0x212A};
        for (uint32_t i = 0, n = 1 + below(s, 4); i < n; i++)
            put_cp(t, joiners[below(s, sizeof joiners / sizeof joiners[0])]);
        break;
    }
    case 18: /* a long run NFC changes nearly everywhere: letters with marks,
                Hangul jamo, singletons, mixed or one repeated */
    {
        static const char *const units[] = {"e\xCC\x81", "a\xCC\x88\xCC\x81",
                                            "\xE1\x84\x80\xE1\x85\xA1",
                                            "\xE1\x84\x92\xE1\x85\xB3\xE1\x86\xAF",
                                            "\xE2\x84\xAA", "\xCE\xB1\xCC\x94\xCD\x85",
                                            "\xE3\x81\x8B\xE3\x82\x99", "\xEF\xA4\x80"};
        const size_t n_units = sizeof units / sizeof units[0];
        const bool one = below(s, 2);
        const uint32_t u0 = below(s, (uint32_t)n_units);
        for (uint32_t i = 0, n = 1 + below(s, 600); i < n; i++) {
            const char *u = units[one ? u0 : below(s, (uint32_t)n_units)];
            put(t, u, strlen(u));
        }
        break;
    }
    default: /* one character repeated */
    {
        text one = {0};
        put_cp(&one, below(s, 2) ? 'a' + below(s, 26) : 0x4E00 + below(s, 0x5000));
        for (uint32_t i = 0, n = 1 + below(s, 300); i < n; i++)
            put(t, one.p, one.n);
        free(one.p);
        break;
    }
    }
}

/* One text against the bound under each flag; false on a counterexample. */
static bool check_one(const char *name, const tn_tokenizer *tok, const char *p, size_t n,
                      unsigned flags, uint64_t seed, size_t k) {
    tn_tokens t = {0};
    tn_error err = {0};
    int rc = tn_tokenize(tok, p, n, flags, &t, &err);
    CHECKF(rc == TN_OK, "%s: tokenize: %s", name, err.message);
    const size_t n_bos = (flags & TN_TOKENIZE_ADD_BOS) && tn_tokenizer_add_bos(tok) ? 1 : 0;
    const size_t real = t.n - n_bos;
    const size_t bound = tn_tokenizer_min_tokens(tok, p, n);
    tn_tokens_free(&t);
    if (rc || bound <= real)
        return true;
    CHECKF(0, "%s: seed %llu case %zu flags %u: at least %zu tokens promised, %zu given for %zu bytes",
           name, (unsigned long long)seed, k, flags, bound, real, n);
    fprintf(stderr, "  text (hex):");
    for (size_t i = 0; i < n && i < 400; i++)
        fprintf(stderr, "%s%02x", i % 32 ? "" : "\n  ", (unsigned char)p[i]);
    fprintf(stderr, "\n");
    return false;
}

/* The fetched vocabulary converted to GGUF and loaded back, as
 * test-tokenizer does. */
static tn_tokenizer *load(const char *name, tn_gguf **g) {
    const char *dir = tn_test_vocab(name);
    char src[4096], out[4096];
    snprintf(src, sizeof src, strcmp(name, "gpt2") ? "%s/tokenizer.json" : "%s", dir);
    snprintf(out, sizeof out, "%s/bound-%s.gguf", tn_test_tmpdir(), name);
    tn_error err = {0};
    tn_gguf_writer *w = tn_gguf_writer_new();
    CHECK(w != NULL);
    int64_t n_vocab = 0;
    int rc = tn_vocab_convert_hf_sized(src, 0, w, &n_vocab, &err);
    CHECKF(rc == TN_OK, "%s: convert: %s", name, err.message);
    if (!rc) {
        rc = tn_gguf_writer_write(w, out, &err);
        CHECKF(rc == TN_OK, "%s: write: %s", name, err.message);
    }
    tn_gguf_writer_free(w);
    if (rc)
        return NULL;
    tn_tokenizer *tok = NULL;
    rc = tn_gguf_open(out, g, &err);
    CHECKF(rc == TN_OK, "%s: open: %s", name, err.message);
    if (!rc) {
        rc = tn_tokenizer_load(*g, &tok, &err);
        CHECKF(rc == TN_OK, "%s: load: %s", name, err.message);
    }
    return tok;
}

static void check_vocab(const char *name, uint64_t seed, size_t cases) {
    tn_gguf *g = NULL;
    tn_tokenizer *tok = load(name, &g);
    if (!tok) {
        tn_gguf_close(g);
        return;
    }
    uint64_t s = seed ^ tn_hash_bytes(name, strlen(name));
    size_t failures = 0;
    text t = {0};
    for (size_t k = 0; k < cases && failures < 5; k++) {
        t.n = 0;
        for (uint32_t i = 0, n = 1 + below(&s, 24); i < n; i++)
            put_fragment(&t, tok, &s);
        /* A cut anywhere: mid-character, mid-token, mid-run. */
        size_t from = 0, len = t.n;
        if (t.n && below(&s, 4) == 0) {
            from = below(&s, (uint32_t)t.n);
            len = below(&s, (uint32_t)(t.n - from + 1));
        }
        static const unsigned flag_sets[] = {0, TN_TOKENIZE_SPECIAL, TN_TOKENIZE_ADD_BOS,
                                             TN_TOKENIZE_SPECIAL | TN_TOKENIZE_ADD_BOS};
        const unsigned flags = flag_sets[below(&s, 4)];
        if (!check_one(name, tok, t.p ? t.p + from : "", len, flags, seed, k))
            failures++;
    }
    free(t.p);
    fprintf(stderr, "%s: %zu texts, seed %llu, %zu above the count\n", name, cases,
            (unsigned long long)seed, failures);
    tn_tokenizer_free(tok);
    tn_gguf_close(g);
}

/* The bound's NFC rule counts a byte of text that NFC may change as
 * 1/(4 x the longest token), sound while NFC keeps at least a third of
 * such bytes: every code point alone (the singletons, Kelvin sign to "K"
 * the steepest), Hangul jamo L V and L V T (9 bytes to 3), and each
 * combining mark of U+0300..U+036F after every Latin, Greek and Cyrillic
 * letter, one or two of them. */
static size_t nfc_len(const char *p, size_t n) {
    char *out = NULL;
    size_t len = 0;
    CHECK(tn_nfc(p, n, &out, &len) == TN_OK);
    free(out);
    return len;
}

static void check_nfc_third(void) {
    size_t worst_in = 1, worst_out = 1;
    char b[16];
    for (uint32_t cp = 1; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp < 0xE000)
            continue;
        const size_t n = tn_utf8_encode(cp, b);
        const size_t m = nfc_len(b, n);
        if (m * worst_in < worst_out * n) {
            worst_in = n;
            worst_out = m;
        }
    }
    for (uint32_t l = 0; l < 19; l++)
        for (uint32_t v = 0; v < 21; v++)
            for (uint32_t t = 0; t < 28; t++) {
                size_t n = tn_utf8_encode(0x1100 + l, b);
                n += tn_utf8_encode(0x1161 + v, b + n);
                if (t)
                    n += tn_utf8_encode(0x11A7 + t, b + n);
                const size_t m = nfc_len(b, n);
                if (m * worst_in < worst_out * n) {
                    worst_in = n;
                    worst_out = m;
                }
            }
    for (uint32_t base = 0x41; base < 0x500; base++)
        for (uint32_t m1 = 0x300; m1 < 0x370; m1++)
            for (uint32_t m2 = 0; m2 < 0x370; m2 += m2 ? 1 : 0x300) {
                size_t n = tn_utf8_encode(base, b);
                n += tn_utf8_encode(m1, b + n);
                if (m2)
                    n += tn_utf8_encode(m2, b + n);
                const size_t m = nfc_len(b, n);
                if (m * worst_in < worst_out * n) {
                    worst_in = n;
                    worst_out = m;
                }
            }
    fprintf(stderr, "NFC: at worst %zu bytes to %zu\n", worst_in, worst_out);
    CHECKF(worst_out * 3 >= worst_in, "NFC made %zu bytes %zu: less than a third", worst_in,
           worst_out);
}

/* The bound must also be worth having where NFC changes nearly every
 * character: once each byte of such a text weighed 1/512 of a token with
 * Qwen3 (1/(4 x its longest token)), and 16 MiB of "e\u0301" under a raised
 * --max-body was encoded in full before a 40k context refused it.
 * A sixteenth of the real count is asked of the NFC vocabulary (each byte
 * still weighs 1 / the longest token holding it: about a tenth of the count
 * here, as the vocabularies that do not normalize get); the others
 * do not normalize, and the figures are printed for them. */
static void check_nfc_heavy(const char *name, const tn_tokenizer *tok) {
    static const struct {
        const char *what, *unit;
    } units[] = {
        {"e + combining acute", "e\xCC\x81"},
        {"Hangul jamo L V T", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"},
        {"Hangul jamo L V", "\xE1\x84\x92\xE1\x85\xA1"},
        {"a mix", "a\xCC\x88o\xCC\x82\xCC\x81\xE1\x84\x80\xE1\x85\xB3\xE1\x86\xAF"
                  "\xE2\x84\xAA\xE3\x81\x8B\xE3\x82\x99"},
    };
    const size_t size = 256u << 10;
    char *buf = malloc(size);
    CHECK(buf != NULL);
    if (!buf)
        return;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        const size_t k = strlen(units[u].unit);
        size_t n = 0;
        while (n + k <= size) {
            memcpy(buf + n, units[u].unit, k);
            n += k;
        }
        tn_tokens t = {0};
        tn_error err = {0};
        CHECKF(tn_tokenize(tok, buf, n, 0, &t, &err) == TN_OK, "%s: tokenize: %s", name,
               err.message);
        const size_t bound = tn_tokenizer_min_tokens(tok, buf, n);
        fprintf(stderr, "%s: %zu KiB of %s: at least %zu tokens, %zu given\n", name, n >> 10,
                units[u].what, bound, t.n);
        CHECKF(bound <= t.n, "%s: %s: at least %zu tokens promised, %zu given", name,
               units[u].what, bound, t.n);
        if (!strcmp(name, "qwen3"))
            CHECKF(bound >= t.n / 16,
                   "%s: %zu KiB of %s: at least %zu tokens promised, under a sixteenth of the "
                   "%zu given: a context that holds as many takes it for possible and "
                   "encodes it in full",
                   name, n >> 10, units[u].what, bound, t.n);
        tn_tokens_free(&t);
    }
    free(buf);
}

int main(void) {
    check_nfc_third();
    const char *e = getenv("TERN_BOUND_SEED");
    const uint64_t seed = e ? strtoull(e, NULL, 0) : 49;
    e = getenv("TERN_BOUND_CASES");
    const size_t cases = e ? strtoull(e, NULL, 0) : 10000;
    static const char *const names[] = {"llama2", "gemma3", "qwen3", "gpt2", "gptoss"};
    int missing = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!tn_test_vocab(names[i])) {
            fprintf(stderr, "tokenizer-bound: no %s vocabulary, skipped\n", names[i]);
            missing++;
            continue;
        }
        check_vocab(names[i], seed, cases);
        tn_gguf *g = NULL;
        tn_tokenizer *tok = load(names[i], &g);
        if (tok)
            check_nfc_heavy(names[i], tok);
        tn_tokenizer_free(tok);
        tn_gguf_close(g);
    }
    if (missing) {
        tn_test_finish("tokenizer-bound (without some vocabularies)");
        tn_test_missing("vocabularies missing in TERN_VOCAB_DIR (tools/fetch-vocab.sh)");
    }
    return tn_test_finish("tokenizer-bound");
}
