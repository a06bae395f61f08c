/* Unicode tables, UTF-8 decoding and NFC. The generator emits expectations
 * computed straight from Python's unicodedata (not from the compressed
 * tables); comparing against them makes a wrong table fail here. */
#define TN_UNICODE_TEST_SAMPLES
#include "tn-test.h"
#include "tn-unicode.h"
#include "unicode-data.h"

#include <string.h>
#include <time.h>

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static uint32_t decode1(const char *s, size_t len, size_t *adv) {
    return tn_utf8_decode(s, len, adv);
}

static void test_utf8(void) {
    size_t adv;
    CHECK(decode1("A", 1, &adv) == 'A' && adv == 1);
    CHECK(decode1("\xC3\xA9", 2, &adv) == 0xE9 && adv == 2);
    CHECK(decode1("\xE2\x82\xAC", 3, &adv) == 0x20AC && adv == 3);
    CHECK(decode1("\xF0\x9F\x98\x80", 4, &adv) == 0x1F600 && adv == 4);
    CHECK(decode1("\xF4\x8F\xBF\xBF", 4, &adv) == 0x10FFFF && adv == 4);
    CHECK(decode1("\xEF\xBF\xBD", 3, &adv) == 0xFFFD && adv == 3);
    CHECK(decode1("\0", 1, &adv) == 0 && adv == 1);

    /* Each of these is invalid at its first byte and must consume exactly 1. */
    static const struct { const char *s; size_t len; const char *why; } bad[] = {
        {"\x80", 1, "stray continuation"},
        {"\xBF\x80", 2, "stray continuation"},
        {"\xC0\x80", 2, "overlong NUL"},
        {"\xC1\xBF", 2, "overlong"},
        {"\xE0\x80\x80", 3, "overlong 3-byte"},
        {"\xE0\x9F\xBF", 3, "overlong 3-byte"},
        {"\xED\xA0\x80", 3, "surrogate D800"},
        {"\xED\xBF\xBF", 3, "surrogate DFFF"},
        {"\xF0\x8F\xBF\xBF", 4, "overlong 4-byte"},
        {"\xF4\x90\x80\x80", 4, "beyond U+10FFFF"},
        {"\xF5\x80\x80\x80", 4, "F5 lead"},
        {"\xFF", 1, "FF"},
        {"\xC3", 1, "truncated 2-byte"},
        {"\xE2\x82", 2, "truncated 3-byte"},
        {"\xF0\x9F\x98", 3, "truncated 4-byte"},
        {"\xC3\x41", 2, "bad continuation"},
        {"\xE2\x28\xA1", 3, "bad continuation"},
    };
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        uint32_t cp = decode1(bad[i].s, bad[i].len, &adv);
        CHECKF(cp == TN_UTF8_INVALID && adv == 1, "%s: cp %X adv %zu", bad[i].why, cp, adv);
    }
    CHECK(decode1("", 0, &adv) == TN_UTF8_INVALID && adv == 0);
    /* Truncation is judged by len, not by what lies beyond it. */
    CHECK(decode1("\xC3\xA9", 1, &adv) == TN_UTF8_INVALID && adv == 1);

    char buf[4];
    CHECK(tn_utf8_encode('A', buf) == 1 && buf[0] == 'A');
    CHECK(tn_utf8_encode(0xE9, buf) == 2 && !memcmp(buf, "\xC3\xA9", 2));
    CHECK(tn_utf8_encode(0x20AC, buf) == 3 && !memcmp(buf, "\xE2\x82\xAC", 3));
    CHECK(tn_utf8_encode(0x1F600, buf) == 4 && !memcmp(buf, "\xF0\x9F\x98\x80", 4));
    CHECK(tn_utf8_encode(0xD800, buf) == 0);
    CHECK(tn_utf8_encode(0x110000, buf) == 0);

    /* Round trip over every scalar value. */
    int bad_rt = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF)
            continue;
        size_t n = tn_utf8_encode(cp, buf);
        if (tn_utf8_decode(buf, n, &adv) != cp || adv != n)
            bad_rt++;
    }
    CHECKF(bad_rt == 0, "%d code points do not round-trip", bad_rt);

    CHECK(tn_utf8_valid("h\xC3\xA9llo", 6));
    CHECK(!tn_utf8_valid("h\xC3llo", 5));
    CHECK(!tn_utf8_valid("\xED\xA0\x80", 3));

    CHECK(tn_utf8_sequence_length('a') == 1);
    CHECK(tn_utf8_sequence_length(0xC3) == 2);
    CHECK(tn_utf8_sequence_length(0xE2) == 3);
    CHECK(tn_utf8_sequence_length(0xF0) == 4);
    CHECK(tn_utf8_sequence_length(0x80) == 0);
    CHECK(tn_utf8_sequence_length(0xC0) == 0);
    CHECK(tn_utf8_sequence_length(0xF8) == 0);

    CHECK(tn_utf8_incomplete_tail("abc", 3) == 0);
    CHECK(tn_utf8_incomplete_tail("ab\xC3", 3) == 1);
    CHECK(tn_utf8_incomplete_tail("ab\xC3\xA9", 4) == 0);
    CHECK(tn_utf8_incomplete_tail("\xF0\x9F\x98", 3) == 3);
    CHECK(tn_utf8_incomplete_tail("\xF0\x9F", 2) == 2);
    CHECK(tn_utf8_incomplete_tail("x\xE2\x82", 3) == 2);
    CHECK(tn_utf8_incomplete_tail("\xED\xA0", 2) == 0); /* would be a surrogate */
    CHECK(tn_utf8_incomplete_tail("\xE0\x80", 2) == 0); /* would be overlong */
    CHECK(tn_utf8_incomplete_tail("\x80\x80", 2) == 0);
    CHECK(tn_utf8_incomplete_tail("\xFF", 1) == 0);
    CHECK(tn_utf8_incomplete_tail("", 0) == 0);
}

static void test_utf8_char_len(void) {
    static const struct { const char *s; size_t n, want; const char *why; } cases[] = {
        {"A", 1, 1, "ASCII"},
        {"\0", 1, 1, "NUL is a character"},
        {"\x7F", 1, 1, "DEL"},
        {"\xC2\x80", 2, 2, "U+0080, the first 2-byte"},
        {"\xC2\x9B", 2, 2, "C1 CSI is valid UTF-8"},
        {"\xDF\xBF", 2, 2, "U+07FF"},
        {"\xE0\xA0\x80", 3, 3, "U+0800, the first 3-byte"},
        {"\xED\x9F\xBF", 3, 3, "U+D7FF, below the surrogates"},
        {"\xEE\x80\x80", 3, 3, "U+E000, above the surrogates"},
        {"\xEF\xBF\xBF", 3, 3, "U+FFFF"},
        {"\xF0\x90\x80\x80", 4, 4, "U+10000, the first 4-byte"},
        {"\xF4\x8F\xBF\xBF", 4, 4, "U+10FFFF"},
        {"\xC3\xA9xyz", 5, 2, "only the first character"},
        {"", 0, 0, "nothing left"},
        {"\x80", 1, 0, "stray continuation"},
        {"\xBF", 1, 0, "stray continuation"},
        {"\xC0\x80", 2, 0, "overlong NUL"},
        {"\xC1\xBF", 2, 0, "overlong 2-byte"},
        {"\xE0\x9F\xBF", 3, 0, "overlong 3-byte"},
        {"\xF0\x8F\xBF\xBF", 4, 0, "overlong 4-byte"},
        {"\xED\xA0\x80", 3, 0, "surrogate U+D800"},
        {"\xED\xBF\xBF", 3, 0, "surrogate U+DFFF"},
        {"\xF4\x90\x80\x80", 4, 0, "U+110000"},
        {"\xF5\x80\x80\x80", 4, 0, "F5 lead"},
        {"\xF7\xBF\xBF\xBF", 4, 0, "U+1FFFFF"},
        {"\xF8\x88\x80\x80\x80", 5, 0, "5-byte form"},
        {"\xFF", 1, 0, "FF"},
        {"\xC3", 1, 0, "truncated 2-byte"},
        {"\xE2\x82", 2, 0, "truncated 3-byte"},
        {"\xF0\x9F\x98", 3, 0, "truncated 4-byte"},
        {"\xF0\x9F\x98\x80", 3, 0, "cut short by n"},
        {"\xC3\x41", 2, 0, "bad continuation"},
        {"\xE2\x28\xA1", 3, 0, "bad continuation"},
        {"\xF0\x9F\x98\x41", 4, 0, "bad last continuation"},
    };
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        size_t got = tn_utf8_char_len(cases[i].s, cases[i].n);
        CHECKF(got == cases[i].want, "%s: %zu bytes, expected %zu", cases[i].why, got,
               cases[i].want);
    }

    /* Every lead and second byte, with a continuation, a non-continuation
     * and nothing for the third and fourth, at every length: the shared
     * check gives what the copies it replaced gave. */
    static const int tail[] = {0x80, 0xBF, 0x41};
    long differ = 0;
    for (int a = 0; a < 256; a++)
        for (int b = 0; b < 256; b++)
            for (size_t c = 0; c < N_ELEMS(tail); c++)
                for (size_t d = 0; d < N_ELEMS(tail); d++) {
                    const unsigned char seq[4] = {(unsigned char)a, (unsigned char)b,
                                                  (unsigned char)tail[c], (unsigned char)tail[d]};
                    for (size_t n = 1; n <= 4; n++)
                        if (tn_utf8_char_len((const char *)seq, n) != tn_test_utf8_len_reference(seq, n))
                            differ++;
                }
    CHECKF(differ == 0, "%ld byte sequences judged unlike the reference", differ);
}

static void test_samples(void) {
    int wrong = 0;
    for (size_t i = 0; i < N_ELEMS(tn_uc_samples); i++) {
        const tn_uc_sample *s = &tn_uc_samples[i];
        uint32_t f = tn_unicode_flags(s->cp);
        uint8_t c = tn_unicode_ccc(s->cp);
        uint32_t fold = tn_unicode_fold(s->cp);
        if (f != s->flags || c != s->ccc || fold != s->fold) {
            if (wrong++ < 10)
                fprintf(stderr, "U+%04X: flags %X ccc %u fold %X, expected %X %u %X\n", s->cp,
                        f, c, fold, s->flags, s->ccc, s->fold);
        }
    }
    CHECKF(wrong == 0, "%d of %zu sampled code points differ from unicodedata", wrong,
           N_ELEMS(tn_uc_samples));
    CHECK(N_ELEMS(tn_uc_samples) > 4000);
    CHECK(!strcmp(tn_unicode_version(), "14.0.0"));

    /* Exactly one general-category class per code point. */
    const uint32_t major = TN_UC_LETTER | TN_UC_NUMBER | TN_UC_PUNCT | TN_UC_SYMBOL |
                           TN_UC_MARK | TN_UC_CONTROL | TN_UC_SEPARATOR | TN_UC_FORMAT |
                           TN_UC_OTHER;
    int multi = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        uint32_t m = tn_unicode_flags(cp) & major;
        if (m == 0 || (m & (m - 1)))
            multi++;
    }
    CHECKF(multi == 0, "%d code points without exactly one category class", multi);
}

#define HAS(cp, flag) ((tn_unicode_flags(cp) & (flag)) != 0)

static void test_categories(void) {
    /* Letters across scripts. */
    CHECK(HAS('a', TN_UC_LETTER) && HAS('Z', TN_UC_LETTER | TN_UC_UPPER));
    CHECK(HAS(0x4E00, TN_UC_LETTER));   /* CJK 一 */
    CHECK(HAS(0x20000, TN_UC_LETTER));  /* CJK extension B */
    CHECK(HAS(0x3042, TN_UC_LETTER));   /* Hiragana あ */
    CHECK(HAS(0x0627, TN_UC_LETTER));   /* Arabic alef */
    CHECK(HAS(0x0915, TN_UC_LETTER));   /* Devanagari ka */
    CHECK(HAS(0xAC00, TN_UC_LETTER));   /* Hangul syllable */
    CHECK(HAS(0x05D0, TN_UC_LETTER));   /* Hebrew alef */
    CHECK(HAS(0x0416, TN_UC_LETTER | TN_UC_UPPER)); /* Cyrillic Ж */
    CHECK(HAS(0x02B0, TN_UC_LETTER));   /* modifier letter (Lm) */
    /* Marks are not letters: \p{L}+ stops at them. */
    CHECK(HAS(0x0301, TN_UC_MARK) && !HAS(0x0301, TN_UC_LETTER));
    CHECK(HAS(0x093F, TN_UC_MARK));     /* Devanagari vowel sign i (Mc) */
    CHECK(HAS(0x094D, TN_UC_MARK));     /* virama */
    CHECK(HAS(0x064B, TN_UC_MARK));     /* Arabic fathatan */
    CHECK(HAS(0x20DD, TN_UC_MARK));     /* enclosing circle (Me) */
    CHECK(HAS(0xFE0F, TN_UC_MARK));     /* variation selector 16 */
    CHECK(HAS(0x1F3FB, TN_UC_SYMBOL));  /* skin tone modifier is Sk */
    /* Numbers. */
    CHECK(HAS('7', TN_UC_NUMBER));
    CHECK(HAS(0x0661, TN_UC_NUMBER));   /* Arabic-Indic one */
    CHECK(HAS(0x0966, TN_UC_NUMBER));   /* Devanagari zero */
    CHECK(HAS(0x00BD, TN_UC_NUMBER));   /* ½ (No) */
    CHECK(HAS(0x2160, TN_UC_NUMBER));   /* Roman numeral one (Nl) */
    CHECK(HAS(0xFF11, TN_UC_NUMBER));   /* fullwidth 1 */
    CHECK(!HAS(0x4E00, TN_UC_NUMBER));
    /* Whitespace = White_Space. */
    static const uint32_t ws[] = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
                                  0x2000, 0x2005, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F,
                                  0x3000};
    for (size_t i = 0; i < N_ELEMS(ws); i++)
        CHECKF(HAS(ws[i], TN_UC_WHITESPACE), "U+%04X should be whitespace", ws[i]);
    static const uint32_t not_ws[] = {0x00, 0x08, 0x0E, 0x1C, 0x1F, 0x180E, 0x200B, 0x200C,
                                      0x200D, 0x2060, 0xFEFF, 'a', 0x3001};
    for (size_t i = 0; i < N_ELEMS(not_ws); i++)
        CHECKF(!HAS(not_ws[i], TN_UC_WHITESPACE), "U+%04X should not be whitespace",
               not_ws[i]);
    int n_ws = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        n_ws += HAS(cp, TN_UC_WHITESPACE);
    CHECKF(n_ws == 25, "%d White_Space code points, Unicode has 25", n_ws);
    CHECK(HAS(0x85, TN_UC_CONTROL) && HAS(0x3000, TN_UC_SEPARATOR));
    /* Punctuation and symbols. */
    CHECK(HAS('!', TN_UC_PUNCT) && HAS('_', TN_UC_PUNCT) && HAS('(', TN_UC_PUNCT));
    CHECK(HAS('+', TN_UC_SYMBOL) && HAS('$', TN_UC_SYMBOL) && HAS('^', TN_UC_SYMBOL));
    CHECK(HAS(0x3001, TN_UC_PUNCT));    /* ideographic comma */
    CHECK(HAS(0x060C, TN_UC_PUNCT));    /* Arabic comma */
    CHECK(HAS(0x0964, TN_UC_PUNCT));    /* Devanagari danda */
    CHECK(HAS(0x1F600, TN_UC_SYMBOL));  /* 😀 */
    CHECK(HAS(0x2764, TN_UC_SYMBOL));   /* ❤ */
    CHECK(HAS(0x20AC, TN_UC_SYMBOL));   /* € */
    /* Format and controls. */
    CHECK(HAS(0x200D, TN_UC_FORMAT));   /* ZWJ */
    CHECK(HAS(0x200B, TN_UC_FORMAT));   /* ZWSP */
    CHECK(HAS(0xFEFF, TN_UC_FORMAT));
    CHECK(HAS(0x00, TN_UC_CONTROL) && HAS(0x7F, TN_UC_CONTROL) && HAS(0x9F, TN_UC_CONTROL));
    CHECK(HAS(0xE000, TN_UC_OTHER));    /* private use */
    CHECK(HAS(0xD800, TN_UC_OTHER));    /* surrogate */
    CHECK(HAS(0x0378, TN_UC_OTHER));    /* unassigned */
    CHECK(HAS(0x10FFFF, TN_UC_OTHER));
    /* Out of range and the invalid marker classify like U+FFFD. */
    CHECK(tn_unicode_flags(TN_UTF8_INVALID) == tn_unicode_flags(0xFFFD));
    CHECK(tn_unicode_flags(0xFFFFFFFFu) == tn_unicode_flags(0xFFFD));
    CHECK(HAS(TN_UTF8_INVALID, TN_UC_SYMBOL));
    /* Combining classes. */
    CHECK(tn_unicode_ccc(0x0301) == 230 && tn_unicode_ccc(0x0323) == 220);
    CHECK(tn_unicode_ccc('a') == 0 && tn_unicode_ccc(0x094D) == 9);
    /* Simple case folding, including the non-ASCII members of ASCII classes. */
    CHECK(tn_unicode_fold('S') == 's' && tn_unicode_fold('s') == 's');
    CHECK(tn_unicode_fold(0x017F) == 's');  /* ſ */
    CHECK(tn_unicode_fold(0x212A) == 'k');  /* Kelvin */
    CHECK(tn_unicode_fold(0x212B) == 0xE5); /* Angstrom */
    CHECK(tn_unicode_fold(0x0130) == 0x0130); /* İ: only a full folding exists */
    CHECK(tn_unicode_fold(0x1E9E) == 0xDF); /* ẞ: status S */
    CHECK(tn_unicode_fold(0x03A3) == 0x03C3 && tn_unicode_fold(0x03C2) == 0x03C3);
    CHECK(tn_unicode_fold(0x0416) == 0x0436);
    CHECK(tn_unicode_fold(0x10400) == 0x10428); /* Deseret */
    /* Only s, k (and Kelvin/long s) leave ASCII among the letters of
     * 's 't 're 've 'm 'll 'd: everything folding to those is listed. */
    int to_contraction = 0;
    for (uint32_t cp = 0x80; cp < 0x110000; cp++) {
        uint32_t f = tn_unicode_fold(cp);
        if (f < 0x80 && strchr("strevmld", (int)f))
            to_contraction++;
    }
    CHECKF(to_contraction == 1, "%d non-ASCII code points fold to s/t/r/e/v/m/l/d",
           to_contraction);
}

static bool nfc_is(const char *in, size_t len, const char *want, size_t want_len) {
    char *out = NULL;
    size_t out_len = 0;
    int rc = tn_nfc(in, len, &out, &out_len);
    bool ok = rc == TN_OK && out && out_len == want_len && !memcmp(out, want, want_len) &&
              out[out_len] == '\0';
    free(out);
    return ok;
}

#define NFC_IS(in, want) nfc_is(in, sizeof(in) - 1, want, sizeof(want) - 1)

static void test_nfc(void) {
    CHECK(NFC_IS("", ""));
    CHECK(NFC_IS("hello, world", "hello, world"));
    CHECK(NFC_IS("e\xCC\x81", "\xC3\xA9"));                   /* e + U+0301 -> é */
    CHECK(NFC_IS("caf" "e\xCC\x81" "!", "caf\xC3\xA9!"));
    CHECK(NFC_IS("\xE1\x84\x80\xE1\x85\xA1", "\xEA\xB0\x80")); /* ᄀ + ᅡ -> 가 */
    CHECK(NFC_IS("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81")); /* + ᆨ -> 각 */
    CHECK(NFC_IS("\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81")); /* 가 + ᆨ -> 각 */
    /* Ordering: a + U+0302 (230) + U+0323 (220) -> ậ (U+1EAD) either way. */
    CHECK(NFC_IS("a\xCC\x82\xCC\xA3", "\xE1\xBA\xAD"));
    CHECK(NFC_IS("a\xCC\xA3\xCC\x82", "\xE1\xBA\xAD"));
    /* q has no precomposed form: the marks are just reordered (220 first). */
    CHECK(NFC_IS("q\xCC\x87\xCC\xA3", "q\xCC\xA3\xCC\x87"));
    /* Composition exclusions and singletons. */
    CHECK(NFC_IS("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC")); /* U+0958 -> U+0915 U+093C */
    CHECK(NFC_IS("\xE2\x84\xA6", "\xCE\xA9"));                 /* Ohm -> Omega */
    CHECK(NFC_IS("\xE2\x84\xAB", "\xC3\x85"));                 /* Angstrom -> Å */
    CHECK(NFC_IS("\xE0\xA4\x95\xE0\xA4\xBC", "\xE0\xA4\x95\xE0\xA4\xBC")); /* stays apart */
    /* Blocked: a mark of the same class between starter and mark. */
    CHECK(NFC_IS("a\xCC\x81\xCC\x80", "\xC3\xA1\xCC\x80"));
    /* Invalid bytes pass through and block composition. */
    CHECK(NFC_IS("a\xFF\xCC\x81", "a\xFF\xCC\x81"));
    CHECK(NFC_IS("\xC3" "e\xCC\x81", "\xC3\xC3\xA9"));
    /* NUL is a character like any other. */
    CHECK(nfc_is("a\0e\xCC\x81", 5, "a\0\xC3\xA9", 4));

    CHECK(tn_nfc_quick_check("plain ascii", 11));
    CHECK(tn_nfc_quick_check("\xC3\xA9", 2));
    CHECK(!tn_nfc_quick_check("e\xCC\x81", 3));
    CHECK(!tn_nfc_quick_check("\xE2\x84\xA6", 3));

    int wrong = 0;
    for (size_t i = 0; i < N_ELEMS(tn_uc_nfc_samples); i++) {
        const tn_uc_nfc_sample *s = &tn_uc_nfc_samples[i];
        if (!nfc_is(s->in, strlen(s->in), s->nfc, strlen(s->nfc))) {
            if (wrong++ < 10) {
                fprintf(stderr, "NFC sample %zu differs:", i);
                for (const char *p = s->in; *p; p++)
                    fprintf(stderr, " %02X", (unsigned char)*p);
                fputc('\n', stderr);
            }
        }
        /* The quick check may say "not sure", never a wrong "yes". */
        if (tn_nfc_quick_check(s->in, strlen(s->in)) && strcmp(s->in, s->nfc))
            wrong++;
    }
    CHECKF(wrong == 0, "%d of %zu NFC samples wrong", wrong, N_ELEMS(tn_uc_nfc_samples));

    /* NFC is idempotent and stable under concatenation with ASCII. */
    for (size_t i = 0; i < N_ELEMS(tn_uc_nfc_samples); i += 7) {
        const char *want = tn_uc_nfc_samples[i].nfc;
        CHECK(nfc_is(want, strlen(want), want, strlen(want)));
    }

    CHECK(tn_nfc(NULL, 3, &(char *){NULL}, &(size_t){0}) == TN_ERR_INVALID);
}

static void test_large(void) {
    /* A hostile run: 200k combining marks of alternating classes after one
     * base letter must stay fast (counting sort) and give the sorted run. */
    size_t n = 200000;
    size_t len = 1 + n * 2;
    char *in = malloc(len);
    if (!in) {
        CHECK(in != NULL);
        return;
    }
    in[0] = 'q';
    for (size_t i = 0; i < n; i++) {
        /* U+0301 (230) and U+0323 (220) */
        in[1 + 2 * i] = '\xCC';
        in[2 + 2 * i] = (i & 1) ? '\xA3' : '\x81';
    }
    clock_t t0 = clock();
    char *out = NULL;
    size_t out_len = 0;
    CHECK(tn_nfc(in, len, &out, &out_len) == TN_OK);
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECKF(s < 5.0, "NFC of %zu marks took %.2f s", n, s);
    if (out) {
        CHECK(out_len == len && out[0] == 'q');
        bool sorted = true;
        for (size_t i = 0; i < n && out_len == len; i++) {
            unsigned char want = i < n / 2 ? 0xA3 : 0x81;
            if ((unsigned char)out[2 + 2 * i] != want)
                sorted = false;
        }
        CHECK(sorted);
    }
    free(out);

    /* Random bytes: no crash, output is the input where it is invalid. */
    uint64_t st = 42;
    for (int round = 0; round < 200; round++) {
        char buf[64];
        size_t bl = tn_test_rand(&st) % sizeof buf;
        for (size_t i = 0; i < bl; i++) {
            uint64_t r = tn_test_rand(&st);
            /* Bias towards lead/continuation bytes and combining marks. */
            static const unsigned char pick[] = {0xCC, 0x81, 0xA3, 0xE1, 0x84, 0x85, 0xA1,
                                                 0xF0, 0x9F, 0xED, 0xA0, 'a', 'e', 0xFF};
            buf[i] = (char)((r & 1) ? pick[(r >> 1) % sizeof pick] : (r >> 8));
        }
        char *o = NULL;
        size_t ol = 0;
        CHECK(tn_nfc(buf, bl, &o, &ol) == TN_OK);
        /* Normalizing again changes nothing. */
        if (o)
            CHECK(nfc_is(o, ol, o, ol));
        free(o);
    }

    /* Throughput of the lookups the pre-tokenizer makes per character. */
    size_t text_len = 4 << 20;
    char *text = malloc(text_len);
    if (!text) {
        free(in);
        return;
    }
    static const char sample[] = "The quick brown fox \xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5"
                                 "\xD1\x82 \xE4\xB8\x96\xE7\x95\x8C 123, jumps!\n";
    for (size_t i = 0; i < text_len; i++)
        text[i] = sample[i % (sizeof sample - 1)];
    t0 = clock();
    uint64_t acc = 0;
    for (size_t i = 0; i < text_len;) {
        size_t adv;
        uint32_t cp = tn_utf8_decode(text + i, text_len - i, &adv);
        acc += tn_unicode_flags(cp);
        i += adv;
    }
    s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    fprintf(stderr, "decode + flags: %.0f MB/s (acc %llu)\n", text_len / 1e6 / (s > 0 ? s : 1e-9),
            (unsigned long long)acc);
    free(text);
    free(in);
}

int main(void) {
    test_utf8();
    test_utf8_char_len();
    test_samples();
    test_categories();
    test_nfc();
    test_large();
    return tn_test_finish("unicode");
}
