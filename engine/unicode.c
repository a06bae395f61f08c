/* UTF-8, general-category classes, case folding and NFC for the tokenizers.
 * The tables are generated (tools/gen-unicode.py -> unicode-data.h). */
#include "tn-unicode.h"

#include "tern.h"
#include "unicode-data.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ UTF-8 */

uint32_t tn_utf8_decode(const char *s, size_t len, size_t *adv) {
    const unsigned char *p = (const unsigned char *)s;
    if (len == 0) {
        *adv = 0;
        return TN_UTF8_INVALID;
    }
    uint32_t c0 = p[0];
    *adv = 1;
    if (c0 < 0x80)
        return c0;
    if (c0 < 0xC2) /* continuation byte, or C0/C1 (overlong two-byte forms) */
        return TN_UTF8_INVALID;
    if (c0 < 0xE0) {
        if (len < 2 || (p[1] & 0xC0) != 0x80)
            return TN_UTF8_INVALID;
        *adv = 2;
        return ((c0 & 0x1F) << 6) | (p[1] & 0x3F);
    }
    if (c0 < 0xF0) {
        if (len < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return TN_UTF8_INVALID;
        if (c0 == 0xE0 && p[1] < 0xA0) /* overlong */
            return TN_UTF8_INVALID;
        if (c0 == 0xED && p[1] >= 0xA0) /* surrogate */
            return TN_UTF8_INVALID;
        *adv = 3;
        return ((c0 & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    if (c0 < 0xF5) {
        if (len < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return TN_UTF8_INVALID;
        if (c0 == 0xF0 && p[1] < 0x90) /* overlong */
            return TN_UTF8_INVALID;
        if (c0 == 0xF4 && p[1] >= 0x90) /* beyond U+10FFFF */
            return TN_UTF8_INVALID;
        *adv = 4;
        return ((c0 & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
               ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    }
    return TN_UTF8_INVALID;
}

size_t tn_utf8_char_len(const char *s, size_t n) {
    size_t adv;
    return tn_utf8_decode(s, n, &adv) == TN_UTF8_INVALID ? 0 : adv;
}

size_t tn_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        if (cp >= 0xD800 && cp <= 0xDFFF)
            return 0;
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp < 0x110000) {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

size_t tn_utf8_sequence_length(unsigned char lead) {
    if (lead < 0x80)
        return 1;
    if (lead < 0xC2)
        return 0;
    if (lead < 0xE0)
        return 2;
    if (lead < 0xF0)
        return 3;
    if (lead < 0xF5)
        return 4;
    return 0;
}

/* Whether the second byte is allowed after this lead (the lead's own range
 * restrictions: no overlongs, surrogates or values past U+10FFFF). */
static bool second_byte_ok(unsigned char lead, unsigned char b) {
    if ((b & 0xC0) != 0x80)
        return false;
    switch (lead) {
    case 0xE0: return b >= 0xA0;
    case 0xED: return b < 0xA0;
    case 0xF0: return b >= 0x90;
    case 0xF4: return b < 0x90;
    default: return true;
    }
}

size_t tn_utf8_incomplete_tail(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    /* The lead byte of an incomplete sequence is at most 3 bytes back. */
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        unsigned char b = p[len - back];
        if ((b & 0xC0) == 0x80)
            continue; /* continuation: look further back */
        size_t need = tn_utf8_sequence_length(b);
        if (need <= back) /* complete, ASCII or an invalid lead */
            return 0;
        if (back >= 2 && !second_byte_ok(b, p[len - back + 1]))
            return 0;
        return back;
    }
    return 0;
}

bool tn_utf8_valid(const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t adv;
        if (tn_utf8_decode(s + i, len - i, &adv) == TN_UTF8_INVALID)
            return false;
        i += adv;
    }
    return true;
}

/* ------------------------------------------------------------- categories */

static inline const tn_uc_record *uc_record(uint32_t cp) {
    if (cp >= 0x110000)
        cp = 0xFFFD;
    uint32_t block = tn_uc_stage1[cp >> TN_UC_SHIFT];
    uint32_t low = cp & ((1u << TN_UC_SHIFT) - 1);
    return &tn_uc_records[tn_uc_stage2[(block << TN_UC_SHIFT) | low]];
}

uint32_t tn_unicode_flags(uint32_t cp) { return uc_record(cp)->flags; }

uint8_t tn_unicode_ccc(uint32_t cp) { return uc_record(cp)->ccc; }

uint32_t tn_unicode_fold(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    size_t lo = 0, hi = sizeof tn_uc_folds / sizeof tn_uc_folds[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tn_uc_folds[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < sizeof tn_uc_folds / sizeof tn_uc_folds[0] && tn_uc_folds[lo].cp == cp)
        return tn_uc_folds[lo].fold;
    return cp;
}

const char *tn_unicode_version(void) { return TN_UNICODE_DATA_VERSION; }

/* -------------------------------------------------------------------- NFC */

enum {
    HANGUL_S_BASE = 0xAC00,
    HANGUL_L_BASE = 0x1100,
    HANGUL_V_BASE = 0x1161,
    HANGUL_T_BASE = 0x11A7,
    HANGUL_L_COUNT = 19,
    HANGUL_V_COUNT = 21,
    HANGUL_T_COUNT = 28,
    HANGUL_N_COUNT = HANGUL_V_COUNT * HANGUL_T_COUNT,
    HANGUL_S_COUNT = HANGUL_L_COUNT * HANGUL_N_COUNT,
};

/* Invalid input bytes travel through normalization as these values (never
 * code points), so they come out unchanged. */
#define RAW_BYTE_BASE 0x110000u

#define NFC_NOT_YES (TN_UC_NFC_NO | TN_UC_NFC_MAYBE)

static bool ascii_word(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return (w & 0x8080808080808080ull) == 0;
}

bool tn_nfc_quick_check(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    uint8_t last_ccc = 0;
    while (i < len) {
        if (p[i] < 0x80) {
            while (i + 8 <= len && ascii_word(p + i))
                i += 8;
            while (i < len && p[i] < 0x80)
                i++;
            last_ccc = 0;
            continue;
        }
        size_t adv;
        uint32_t cp = tn_utf8_decode(s + i, len - i, &adv);
        i += adv;
        if (cp == TN_UTF8_INVALID) {
            last_ccc = 0; /* passes through unchanged, like a starter */
            continue;
        }
        const tn_uc_record *r = uc_record(cp);
        if (r->flags & NFC_NOT_YES)
            return false;
        if (r->ccc != 0 && last_ccc > r->ccc)
            return false;
        last_ccc = r->ccc;
    }
    return true;
}

typedef struct {
    char *data;
    size_t len, cap;
} byte_buf;

typedef struct {
    uint32_t *data;
    size_t len, cap;
} cp_buf;

static bool bytes_reserve(byte_buf *b, size_t extra) {
    if (b->cap - b->len > extra)
        return true;
    size_t want = b->cap ? b->cap : 64;
    while (want - b->len <= extra) {
        if (want > SIZE_MAX / 2)
            return false;
        want *= 2;
    }
    char *p = realloc(b->data, want);
    if (!p)
        return false;
    b->data = p;
    b->cap = want;
    return true;
}

static bool bytes_append(byte_buf *b, const char *s, size_t n) {
    if (!bytes_reserve(b, n))
        return false;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return true;
}

static bool cps_push(cp_buf *b, uint32_t cp) {
    if (b->len == b->cap) {
        size_t want = b->cap ? b->cap * 2 : 32;
        if (want > SIZE_MAX / sizeof(uint32_t))
            return false;
        uint32_t *p = realloc(b->data, want * sizeof(uint32_t));
        if (!p)
            return false;
        b->data = p;
        b->cap = want;
    }
    b->data[b->len++] = cp;
    return true;
}

static uint8_t ccc_of(uint32_t v) { return v >= RAW_BYTE_BASE ? 0 : uc_record(v)->ccc; }

static const tn_uc_decomp *find_decomp(uint32_t cp) {
    size_t lo = 0, hi = sizeof tn_uc_decomps / sizeof tn_uc_decomps[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tn_uc_decomps[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < sizeof tn_uc_decomps / sizeof tn_uc_decomps[0] && tn_uc_decomps[lo].cp == cp)
        return &tn_uc_decomps[lo];
    return NULL;
}

static bool decompose_into(cp_buf *b, uint32_t cp) {
    uint32_t s = cp - HANGUL_S_BASE;
    if (s < HANGUL_S_COUNT) {
        if (!cps_push(b, HANGUL_L_BASE + s / HANGUL_N_COUNT) ||
            !cps_push(b, HANGUL_V_BASE + (s % HANGUL_N_COUNT) / HANGUL_T_COUNT))
            return false;
        if (s % HANGUL_T_COUNT != 0 && !cps_push(b, HANGUL_T_BASE + s % HANGUL_T_COUNT))
            return false;
        return true;
    }
    if (cp < RAW_BYTE_BASE && (uc_record(cp)->flags & TN_UC_DECOMPOSES)) {
        const tn_uc_decomp *d = find_decomp(cp);
        if (d) {
            for (unsigned k = 0; k < d->len; k++)
                if (!cps_push(b, tn_uc_decomp_pool[d->offset + k]))
                    return false;
            return true;
        }
    }
    return cps_push(b, cp);
}

/* 0 when the pair does not compose. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    uint32_t l = a - HANGUL_L_BASE, v = b - HANGUL_V_BASE;
    if (l < HANGUL_L_COUNT && v < HANGUL_V_COUNT)
        return HANGUL_S_BASE + (l * HANGUL_V_COUNT + v) * HANGUL_T_COUNT;
    uint32_t s = a - HANGUL_S_BASE, t = b - HANGUL_T_BASE;
    if (s < HANGUL_S_COUNT && s % HANGUL_T_COUNT == 0 && t >= 1 && t < HANGUL_T_COUNT)
        return a + t;
    if (b >= RAW_BYTE_BASE || !(uc_record(b)->flags & TN_UC_NFC_MAYBE))
        return 0;
    size_t lo = 0, hi = sizeof tn_uc_comps / sizeof tn_uc_comps[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const tn_uc_comp *c = &tn_uc_comps[mid];
        if (c->first < a || (c->first == a && c->second < b))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < sizeof tn_uc_comps / sizeof tn_uc_comps[0] && tn_uc_comps[lo].first == a &&
        tn_uc_comps[lo].second == b)
        return tn_uc_comps[lo].composite;
    return 0;
}

/* Stable sort of a run of non-starters by combining class. Short runs (the
 * normal case) by insertion; long ones by counting sort, so a hostile run
 * of millions of marks stays linear. */
static bool sort_marks(uint32_t *run, size_t n, cp_buf *tmp) {
    if (n < 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t x = run[i];
            uint8_t cx = ccc_of(x);
            size_t j = i;
            while (j > 0 && ccc_of(run[j - 1]) > cx) {
                run[j] = run[j - 1];
                j--;
            }
            run[j] = x;
        }
        return true;
    }
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++)
        count[ccc_of(run[i]) + 1]++;
    for (int c = 1; c < 257; c++)
        count[c] += count[c - 1];
    tmp->len = 0;
    for (size_t i = 0; i < n; i++)
        if (!cps_push(tmp, 0))
            return false;
    for (size_t i = 0; i < n; i++)
        tmp->data[count[ccc_of(run[i])]++] = run[i];
    memcpy(run, tmp->data, n * sizeof(uint32_t));
    return true;
}

/* NFC of one segment: it starts at a character that cannot interact with
 * what precedes it, so segments normalize independently. */
static bool normalize_segment(const char *s, size_t len, byte_buf *out, cp_buf *cps,
                              cp_buf *tmp) {
    cps->len = 0;
    size_t i = 0;
    while (i < len) {
        size_t adv;
        uint32_t cp = tn_utf8_decode(s + i, len - i, &adv);
        if (cp == TN_UTF8_INVALID)
            cp = RAW_BYTE_BASE + (unsigned char)s[i];
        i += adv;
        if (!decompose_into(cps, cp))
            return false;
    }

    uint32_t *c = cps->data;
    size_t n = cps->len;
    for (size_t k = 0; k < n;) {
        if (ccc_of(c[k]) == 0) {
            k++;
            continue;
        }
        size_t end = k;
        while (end < n && ccc_of(c[end]) != 0)
            end++;
        if (end - k > 1 && !sort_marks(c + k, end - k, tmp))
            return false;
        k = end;
    }

    /* Canonical composition (UAX #15): a character composes with the last
     * starter unless a kept character of the same or higher class sits
     * between; last_class == 0 lets a starter right after the starter
     * compose with it (Hangul LV + T, U+0B47 + U+0B3E). */
    size_t w = 0;
    size_t starter = SIZE_MAX;
    int last_class = -1;
    for (size_t k = 0; k < n; k++) {
        uint32_t ch = c[k];
        int cls = ccc_of(ch);
        if (starter != SIZE_MAX && (last_class < cls || last_class == 0)) {
            uint32_t comp = compose_pair(c[starter], ch);
            if (comp) {
                c[starter] = comp;
                continue;
            }
        }
        if (cls == 0) {
            starter = w;
            last_class = 0;
        } else {
            last_class = cls;
        }
        c[w++] = ch;
    }

    if (!bytes_reserve(out, w * 4))
        return false;
    for (size_t k = 0; k < w; k++) {
        if (c[k] >= RAW_BYTE_BASE)
            out->data[out->len++] = (char)(c[k] - RAW_BYTE_BASE);
        else
            out->len += tn_utf8_encode(c[k], out->data + out->len);
    }
    return true;
}

int tn_nfc(const char *in, size_t len, char **out, size_t *out_len) {
    if (!out || !out_len || (!in && len))
        return TN_ERR_INVALID;
    *out = NULL;
    *out_len = 0;
    if (len == SIZE_MAX)
        return TN_ERR_NOMEM;
    if (tn_nfc_quick_check(in, len)) {
        char *copy = malloc(len + 1);
        if (!copy)
            return TN_ERR_NOMEM;
        if (len)
            memcpy(copy, in, len);
        copy[len] = '\0';
        *out = copy;
        *out_len = len;
        return TN_OK;
    }

    byte_buf res = {0};
    cp_buf cps = {0}, tmp = {0};
    bool ok = bytes_reserve(&res, len + len / 4 + 16);
    const unsigned char *p = (const unsigned char *)in;
    size_t seg = 0;      /* start of the current segment */
    bool dirty = false;  /* the segment needs normalizing, not just copying */
    uint8_t last_ccc = 0;
    size_t i = 0;
    while (ok && i < len) {
        size_t adv = 1;
        uint32_t cp = p[i] < 0x80 ? p[i] : tn_utf8_decode(in + i, len - i, &adv);
        uint32_t flags = 0;
        uint8_t ccc = 0;
        if (cp != TN_UTF8_INVALID) {
            const tn_uc_record *r = uc_record(cp);
            flags = r->flags;
            ccc = r->ccc;
        }
        bool boundary = ccc == 0 && !(flags & NFC_NOT_YES);
        if (boundary) {
            if (i > seg)
                ok = dirty ? normalize_segment(in + seg, i - seg, &res, &cps, &tmp)
                           : bytes_append(&res, in + seg, i - seg);
            seg = i;
            dirty = false;
        } else if ((flags & NFC_NOT_YES) || (ccc != 0 && last_ccc > ccc)) {
            dirty = true;
        }
        last_ccc = ccc;
        i += adv;
    }
    if (ok && len > seg)
        ok = dirty ? normalize_segment(in + seg, len - seg, &res, &cps, &tmp)
                   : bytes_append(&res, in + seg, len - seg);
    if (ok)
        ok = bytes_reserve(&res, 1);
    free(cps.data);
    free(tmp.data);
    if (!ok) {
        free(res.data);
        return TN_ERR_NOMEM;
    }
    res.data[res.len] = '\0';
    *out = res.data;
    *out_len = res.len;
    return TN_OK;
}
