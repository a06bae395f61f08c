/* Pre-tokenizer split expressions of byte-level BPE vocabularies, as
 * hand-written matchers: no regex library, but the same pieces the
 * expressions give under leftmost-first alternation with greedy,
 * backtracking quantifiers (Oniguruma / the Rust regex crate, which the
 * Hugging Face tokenizers use).
 *
 * GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Qwen2:   as Llama 3 with \p{N} (one digit per piece).
 * GPT-4o (o200k, gpt-oss):
 *          [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?|
 *          [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?|
 *          \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * Every code point falls into one of four classes here: letter, number,
 * whitespace, other; CR and LF are whitespace with a mark of their own.
 * Some alternative always matches, so the pieces partition the text.
 */
#include "tn-tokenizer-internal.h"
#include "tn-unicode.h"

const char tn_pretok_regex_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char tn_pretok_regex_llama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char tn_pretok_regex_qwen2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char tn_pretok_regex_gpt4o[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
    "\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}"
    "\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

enum { C_OTHER = 0, C_L = 1, C_N = 2, C_W = 4, C_CRLF = 8 };

/* ASCII classes, so plain text never reaches the Unicode tables. */
static const uint8_t ascii_class[128] = {
    ['\t'] = C_W, ['\n'] = C_W | C_CRLF, ['\v'] = C_W, ['\f'] = C_W, ['\r'] = C_W | C_CRLF,
    [' '] = C_W,
    ['0'] = C_N, ['1'] = C_N, ['2'] = C_N, ['3'] = C_N, ['4'] = C_N,
    ['5'] = C_N, ['6'] = C_N, ['7'] = C_N, ['8'] = C_N, ['9'] = C_N,
    ['A'] = C_L, ['B'] = C_L, ['C'] = C_L, ['D'] = C_L, ['E'] = C_L, ['F'] = C_L, ['G'] = C_L,
    ['H'] = C_L, ['I'] = C_L, ['J'] = C_L, ['K'] = C_L, ['L'] = C_L, ['M'] = C_L, ['N'] = C_L,
    ['O'] = C_L, ['P'] = C_L, ['Q'] = C_L, ['R'] = C_L, ['S'] = C_L, ['T'] = C_L, ['U'] = C_L,
    ['V'] = C_L, ['W'] = C_L, ['X'] = C_L, ['Y'] = C_L, ['Z'] = C_L,
    ['a'] = C_L, ['b'] = C_L, ['c'] = C_L, ['d'] = C_L, ['e'] = C_L, ['f'] = C_L, ['g'] = C_L,
    ['h'] = C_L, ['i'] = C_L, ['j'] = C_L, ['k'] = C_L, ['l'] = C_L, ['m'] = C_L, ['n'] = C_L,
    ['o'] = C_L, ['p'] = C_L, ['q'] = C_L, ['r'] = C_L, ['s'] = C_L, ['t'] = C_L, ['u'] = C_L,
    ['v'] = C_L, ['w'] = C_L, ['x'] = C_L, ['y'] = C_L, ['z'] = C_L,
};

/* Class of the code point at text[i] (i < len); its length in *adv. */
static inline unsigned class_at(const char *text, size_t len, size_t i, size_t *adv) {
    unsigned char c = (unsigned char)text[i];
    if (c < 0x80) {
        *adv = 1;
        return ascii_class[c];
    }
    uint32_t cp = tn_utf8_decode(text + i, len - i, adv);
    uint32_t f = tn_unicode_flags(cp);
    if (f & TN_UC_WHITESPACE)
        return C_W;
    if (f & TN_UC_LETTER)
        return C_L;
    if (f & TN_UC_NUMBER)
        return C_N;
    return C_OTHER;
}

/* End of the run of code points starting at i whose class has any bit of
 * `want` (want_none: whose class has none of `mask`). */
static size_t run_of(const char *text, size_t len, size_t i, unsigned want) {
    while (i < len) {
        size_t adv;
        if (!(class_at(text, len, i, &adv) & want))
            break;
        i += adv;
    }
    return i;
}

static size_t run_of_other(const char *text, size_t len, size_t i) {
    while (i < len) {
        size_t adv;
        if (class_at(text, len, i, &adv) != C_OTHER)
            break;
        i += adv;
    }
    return i;
}

/* 's 't 're 've 'm 'll 'd at text[0] == '\''; case-insensitive by simple
 * case folding when `fold`. Returns the length or 0. */
static size_t contraction(const char *text, size_t len, bool fold) {
    if (len < 2)
        return 0;
    uint32_t c[2];
    size_t pos = 1, n = 0;
    while (n < 2 && pos < len) {
        size_t adv;
        uint32_t cp = tn_utf8_decode(text + pos, len - pos, &adv);
        c[n++] = fold ? tn_unicode_fold(cp) : cp;
        pos += adv;
        if (n == 1) {
            if (c[0] == 's' || c[0] == 't' || c[0] == 'm' || c[0] == 'd')
                return pos;
            if (c[0] != 'r' && c[0] != 'v' && c[0] != 'l')
                return 0;
        }
    }
    if (n < 2)
        return 0;
    if ((c[0] == 'r' && c[1] == 'e') || (c[0] == 'v' && c[1] == 'e') ||
        (c[0] == 'l' && c[1] == 'l'))
        return pos;
    return 0;
}

/* \s+(?!\S) then \s+ at a whitespace run starting at 0. */
static size_t whitespace_tail(const char *text, size_t len) {
    size_t i = 0, last_start = 0, n_chars = 0;
    while (i < len) {
        size_t adv;
        if (!(class_at(text, len, i, &adv) & C_W))
            break;
        last_start = i;
        n_chars++;
        i += adv;
    }
    if (i == len)
        return i;         /* (?!\S) holds at the end of the text */
    if (n_chars >= 2)
        return last_start; /* give back one: the lookahead then sees whitespace */
    return i;              /* \s+ */
}

static size_t next_gpt2(const char *text, size_t len) {
    size_t adv0;
    unsigned c0 = class_at(text, len, 0, &adv0);
    if (text[0] == '\'') {
        size_t n = contraction(text, len, false);
        if (n)
            return n;
    }
    if (text[0] == ' ' && len > 1) {
        size_t adv1;
        unsigned c1 = class_at(text, len, 1, &adv1);
        if (c1 == C_L)
            return run_of(text, len, 1, C_L);
        if (c1 == C_N)
            return run_of(text, len, 1, C_N);
        if (c1 == C_OTHER)
            return run_of_other(text, len, 1);
    }
    if (c0 == C_L)
        return run_of(text, len, 0, C_L);
    if (c0 == C_N)
        return run_of(text, len, 0, C_N);
    if (c0 == C_OTHER)
        return run_of_other(text, len, 0);
    return whitespace_tail(text, len);
}

static size_t next_llama3(const char *text, size_t len, int max_digits) {
    size_t adv0;
    unsigned c0 = class_at(text, len, 0, &adv0);
    if (text[0] == '\'') {
        size_t n = contraction(text, len, true);
        if (n)
            return n;
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c0 == C_L)
        return run_of(text, len, 0, C_L);
    if (!(c0 & (C_CRLF | C_N)) && adv0 < len) {
        size_t adv1;
        if (class_at(text, len, adv0, &adv1) == C_L)
            return run_of(text, len, adv0, C_L);
    }
    /* \p{N}{1,max} */
    if (c0 == C_N) {
        size_t i = adv0;
        for (int k = 1; k < max_digits && i < len; k++) {
            size_t adv;
            if (class_at(text, len, i, &adv) != C_N)
                break;
            i += adv;
        }
        return i;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    size_t start = 0;
    if (text[0] == ' ' && len > 1) {
        size_t adv1;
        if (class_at(text, len, 1, &adv1) == C_OTHER)
            start = 1;
    }
    if (start == 1 || c0 == C_OTHER) {
        size_t i = run_of_other(text, len, start);
        while (i < len && (text[i] == '\r' || text[i] == '\n'))
            i++;
        return i;
    }
    /* c0 is whitespace. \s*[\r\n]+: up to and including the last CR/LF of
     * the whitespace run. */
    size_t i = 0, after_last_crlf = 0;
    while (i < len) {
        size_t adv;
        unsigned c = class_at(text, len, i, &adv);
        if (!(c & C_W))
            break;
        i += adv;
        if (c & C_CRLF)
            after_last_crlf = i;
    }
    if (after_last_crlf)
        return after_last_crlf;
    return whitespace_tail(text, len);
}

/* ---------------------------------------------------------------- GPT-4o
 *
 * Its letters split by case: the "upper" set [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
 * (G_UP) and the "lower" set [\p{Ll}\p{Lm}\p{Lo}\p{M}] (G_LO) share Lm, Lo
 * and the marks. Marks are neither \p{L} nor \p{N}, so they also belong to
 * [^\r\n\p{L}\p{N}] and [^\s\p{L}\p{N}]. */
enum { G_UP = 1, G_LO = 2, G_L = 4, G_N = 8, G_W = 16, G_CRLF = 32 };

static inline unsigned class_4o(const char *text, size_t len, size_t i, size_t *adv) {
    unsigned char c = (unsigned char)text[i];
    if (c < 0x80) {
        *adv = 1;
        if (c >= 'A' && c <= 'Z')
            return G_UP | G_L;
        if (c >= 'a' && c <= 'z')
            return G_LO | G_L;
        const unsigned a = ascii_class[c];
        return (a & C_N ? G_N : 0) | (a & C_W ? G_W : 0) | (a & C_CRLF ? G_CRLF : 0);
    }
    const uint32_t f = tn_unicode_flags(tn_utf8_decode(text + i, len - i, adv));
    if (f & TN_UC_WHITESPACE)
        return G_W;
    if (f & TN_UC_LETTER)
        return G_L | (f & TN_UC_UPPER ? G_UP : f & TN_UC_LOWER ? G_LO : G_UP | G_LO);
    if (f & TN_UC_MARK)
        return G_UP | G_LO;
    return f & TN_UC_NUMBER ? G_N : 0;
}

/* [^\r\n\p{L}\p{N}] */
static inline bool prefix_4o(unsigned c) { return !(c & (G_CRLF | G_L | G_N)); }

static size_t run_4o(const char *text, size_t len, size_t i, unsigned want) {
    while (i < len) {
        size_t adv;
        if (!(class_4o(text, len, i, &adv) & want))
            break;
        i += adv;
    }
    return i;
}

/* An optional contraction at text[i] (case-insensitive). */
static size_t contraction_4o(const char *text, size_t len, size_t i) {
    return i < len && text[i] == '\'' ? i + contraction(text + i, len - i, true) : i;
}

/* The first alternative from i (after any prefix): UP* LO+ contraction?,
 * with UP* backtracking to the longest length after which LO+ can start.
 * Returns the end, or 0 when it cannot match at i. */
static size_t upper_lower_4o(const char *text, size_t len, size_t i) {
    size_t up_end = i, last_lo = SIZE_MAX, last_lo_adv = 0;
    while (up_end < len) {
        size_t adv;
        const unsigned c = class_4o(text, len, up_end, &adv);
        if (!(c & G_UP))
            break;
        if (c & G_LO) {
            last_lo = up_end;
            last_lo_adv = adv;
        }
        up_end += adv;
    }
    size_t adv;
    if (up_end < len && (class_4o(text, len, up_end, &adv) & G_LO))
        return contraction_4o(text, len, run_4o(text, len, up_end, G_LO));
    /* LO+ starts at the last code point of the UP run that is also LO; the
     * ones after it are UP only, so it ends right after that one. */
    if (last_lo != SIZE_MAX)
        return contraction_4o(text, len, last_lo + last_lo_adv);
    return 0;
}

/* The second alternative from i: UP+ LO* contraction?, or 0. */
static size_t upper_4o(const char *text, size_t len, size_t i) {
    const size_t up_end = run_4o(text, len, i, G_UP);
    if (up_end == i)
        return 0;
    return contraction_4o(text, len, run_4o(text, len, up_end, G_LO));
}

static size_t next_gpt4o(const char *text, size_t len) {
    size_t adv0, e;
    const unsigned c0 = class_4o(text, len, 0, &adv0);
    const bool pfx = prefix_4o(c0) && adv0 < len;
    /* each alternative with the optional prefix first (greedy ?), then
     * without, before the next alternative */
    if ((pfx && (e = upper_lower_4o(text, len, adv0))) || (e = upper_lower_4o(text, len, 0)))
        return e;
    if ((pfx && (e = upper_4o(text, len, adv0))) || (e = upper_4o(text, len, 0)))
        return e;
    /* \p{N}{1,3} */
    if (c0 & G_N) {
        size_t i = adv0;
        for (int k = 1; k < 3 && i < len; k++) {
            size_t adv;
            if (!(class_4o(text, len, i, &adv) & G_N))
                break;
            i += adv;
        }
        return i;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n/]*' */
    const unsigned not_other = G_W | G_L | G_N;
    size_t start = 0, adv1;
    if (text[0] == ' ' && len > 1 && !(class_4o(text, len, 1, &adv1) & not_other))
        start = 1;
    if (start == 1 || !(c0 & not_other)) {
        size_t i = start;
        while (i < len) {
            size_t adv;
            if (class_4o(text, len, i, &adv) & not_other)
                break;
            i += adv;
        }
        while (i < len && (text[i] == '\r' || text[i] == '\n' || text[i] == '/'))
            i++;
        return i;
    }
    /* whitespace: \s*[\r\n]+ up to the last CR/LF of the run, else the tail */
    size_t i = 0, after_last_crlf = 0;
    while (i < len) {
        size_t adv;
        const unsigned c = class_4o(text, len, i, &adv);
        if (!(c & G_W))
            break;
        i += adv;
        if (c & G_CRLF)
            after_last_crlf = i;
    }
    if (after_last_crlf)
        return after_last_crlf;
    return whitespace_tail(text, len);
}

size_t tn_pretok_next(tn_pretok kind, const char *text, size_t len) {
    if (len == 0)
        return 0;
    switch (kind) {
    case TN_PRETOK_GPT2:
        return next_gpt2(text, len);
    case TN_PRETOK_LLAMA3:
        return next_llama3(text, len, 3);
    case TN_PRETOK_QWEN2:
        return next_llama3(text, len, 1);
    case TN_PRETOK_GPT4O:
        return next_gpt4o(text, len);
    case TN_PRETOK_NONE:
    default:
        return len;
    }
}

int tn_pretok_from_name(const char *name, size_t len) {
    static const struct {
        const char *name;
        tn_pretok kind;
    } names[] = {
        {"gpt-2", TN_PRETOK_GPT2},
        {"llama-bpe", TN_PRETOK_LLAMA3},
        {"llama3", TN_PRETOK_LLAMA3},
        {"llama-v3", TN_PRETOK_LLAMA3},
        {"smaug-bpe", TN_PRETOK_LLAMA3},
        {"qwen2", TN_PRETOK_QWEN2},
        {"deepseek-r1-qwen", TN_PRETOK_QWEN2},
        {"gpt-4o", TN_PRETOK_GPT4O},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i].name) == len && !memcmp(names[i].name, name, len))
            return (int)names[i].kind;
    return -1;
}
