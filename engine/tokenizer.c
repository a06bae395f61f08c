/* Tokenizers of GGUF vocabularies: SentencePiece-style BPE ("llama") and
 * byte-level BPE ("gpt2"). See tern.h and docs/TOKENIZER.md.
 *
 * Both merge with one engine: the text is a doubly linked list of symbols,
 * candidate merges of neighbours wait in a binary heap ordered by priority
 * (BPE: merge rank; SentencePiece: the merged token's score) and then by
 * position, and a popped candidate that no longer matches its neighbours is
 * dropped. That is O(n log n) for any input, where rescanning all pairs
 * after each merge would be quadratic on long words.
 */
#include "tern.h"
#include "tn-internal.h"
#include "tn-tokenizer-internal.h"
#include "tn-unicode.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KIND_G4: Gemma 4's "gemma4" vocabularies: BPE merges by rank over raw
 * UTF-8 where spaces are "▁", the text split only into runs of newlines and
 * runs of anything else, and <0xNN> byte tokens for characters without a
 * token (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4). */
enum { KIND_SPM = 1, KIND_BPE = 2, KIND_G4 = 3 };

/* "▁" (U+2581), SentencePiece's visible space. */
#define SPM_SPACE "\xE2\x96\x81"
#define SPM_SPACE_LEN 3

typedef struct trie_node {
    int32_t first_child;
    int32_t next_sibling;
    int32_t token; /* -1: no token ends here */
    uint8_t byte;
} trie_node;

struct tn_tokenizer {
    int kind;
    int32_t n_vocab;

    char *text_blob;     /* every token's text, NUL after each */
    uint32_t *text_off;  /* [n_vocab + 1] */
    char *piece_blob;    /* every token's decoded bytes, NUL after each */
    uint32_t *piece_off; /* [n_vocab + 1] */
    uint8_t *type;       /* [n_vocab] tn_token_type */
    uint8_t *eog;        /* [n_vocab] end of generation */
    float *score;        /* [n_vocab] SentencePiece only */
    tn_strmap by_text;

    int32_t byte_token[256]; /* SPM: <0xNN>; BPE: the byte's mapped character */

    /* SentencePiece */
    bool add_space_prefix;
    /* Chunking: a merge can only cross the boundary before a "▁" preceded
     * by character X if some token contains X followed by "▁". Those X are
     * listed here; everywhere else the text splits into independent chunks
     * (exactly the same result, much smaller heaps). */
    uint32_t *space_joiners;
    size_t n_space_joiners;
    bool chunking;

    /* byte-level BPE */
    tn_pairmap merges;
    tn_pretok pretok;
    bool nfc;
    bool ignore_merges; /* look the whole piece up before merging (Llama 3) */

    int32_t bos, eos, eot, unk, pad;
    bool add_bos, add_eos;

    /* tn_tokenizer_min_tokens: what one byte of text weighs at least, in
     * 2^-32 tokens; in a text NFC may change, what any byte weighs. */
    uint64_t min_weight[256];
    uint64_t nfc_weight;
    /* For that NFC rule: whether every added token is UTF-8 of NFC
     * boundary characters, and which bytes end one (nfc_min_weight). */
    bool added_plain;
    bool added_end[256];

    /* Added tokens matched in the text before splitting. */
    trie_node *trie;
    size_t n_trie, cap_trie;
    int32_t trie_root[256];
};

/* ------------------------------------------------------------ accessors */

int32_t tn_tokenizer_n_vocab(const tn_tokenizer *tok) { return tok ? tok->n_vocab : 0; }
const char *tn_tokenizer_model(const tn_tokenizer *tok) {
    return !tok                    ? NULL
           : tok->kind == KIND_SPM ? "llama"
           : tok->kind == KIND_G4  ? "gemma4"
                                   : "gpt2";
}
int32_t tn_tokenizer_bos(const tn_tokenizer *tok) { return tok ? tok->bos : -1; }
int32_t tn_tokenizer_eos(const tn_tokenizer *tok) { return tok ? tok->eos : -1; }
int32_t tn_tokenizer_eot(const tn_tokenizer *tok) { return tok ? tok->eot : -1; }
int32_t tn_tokenizer_unk(const tn_tokenizer *tok) { return tok ? tok->unk : -1; }
int32_t tn_tokenizer_pad(const tn_tokenizer *tok) { return tok ? tok->pad : -1; }
bool tn_tokenizer_add_bos(const tn_tokenizer *tok) { return tok && tok->add_bos && tok->bos >= 0; }

bool tn_tokenizer_add_space_prefix(const tn_tokenizer *tok) { return tok && tok->add_space_prefix; }

/* A token stands for a stretch of the text with every byte of that stretch
 * in the token's own bytes, so a byte b is part of a stretch no longer than
 * the longest token with b in it (min_weight: 1 / that length). Summed over
 * the text, each token's stretch weighs at most 1: the sum never exceeds
 * the count, whatever the text (docs/TOKENIZER.md, "Refusing early"). A
 * bound from the longest token alone was weak: Qwen's longest token is 128
 * spaces, which said nothing about a megabyte of "a". Where NFC may change
 * the text first, see nfc_min_weight below. */
typedef struct weight_sum {
    size_t whole;
    uint64_t frac; /* 2^-32 tokens, below 2^62 between calls */
} weight_sum;

static inline void weigh(weight_sum *w, uint64_t x) {
    w->frac += x;
    if (w->frac >> 62) {
        w->whole += (size_t)(w->frac >> 32);
        w->frac &= UINT32_MAX;
    }
}

#define NFC_NOT_YES (TN_UC_NFC_NO | TN_UC_NFC_MAYBE)

/* The bound for a text that fails the NFC quick check, which bpe_encode
 * normalizes first (each stretch between added tokens on its own). It
 * follows tn_nfc's own cut of the text into segments: a segment starts at
 * a boundary (a character of combining class 0 and NFC_Quick_Check Yes, or
 * a byte that is not UTF-8) and runs to the next one, and tn_nfc copies a
 * segment unchanged unless it is dirty (holds an NFC_QC No or Maybe
 * character, or combining classes out of order), normalizing only those,
 * each on its own: what a segment becomes depends on it alone.
 *
 * Why it is a lower bound. A clean segment's bytes come out as they went
 * in, so they keep their own weight, as in a text NFC leaves alone. A dirty
 * segment that no added token can cut (below) is normalized here as the
 * encoder will, and its output's bytes count their own weight: they are
 * bytes of the text the encoder splits, so the ordinary argument above
 * holds for them. "e\u0301" a million times is "\u00e9" a million times
 * to the encoder and here. A dirty segment an added token may cut counts
 * nfc_weight a byte, 1/(4 x the longest token): its NFC, cut or not, keeps
 * at least a third of its bytes (Kelvin sign to "K", three Hangul jamo to
 * one syllable are the steepest; test-tokenizer-bound checks it), each
 * output byte weighs at least 1/(the longest token), and a byte inside an
 * added token's match weighs at most 1 / that token's length either way.
 * nfc_weight is never above what the segment's own NFC would weigh, so the
 * first rule only ever raises the bound where the second would hold too.
 *
 * When an added token cannot cut a dirty segment: bpe_encode tries a match
 * at every byte. If every added token is UTF-8 made of boundary characters
 * only (tok->added_plain; all of Qwen's are ASCII), a match begins with a
 * lead byte, so at the start of one of the text's characters, and that
 * character, being its first, is a boundary: a segment start. Its
 * characters are the text's own, all boundaries, so of a dirty segment it
 * can cover the first character only, as its last; that character's last
 * byte is then an added token's last byte (tok->added_end). A segment
 * whose first character ends otherwise lies whole in one stretch, as one
 * of that stretch's segments, and is normalized exactly as here.
 *
 * Cutting the text at added tokens changes nothing for the rest: a
 * stretch's segments lie each within one of the whole text's, and the
 * parts of a clean one are clean (whether a character is a boundary, or
 * No or Maybe, is its own property; the first character after a cut has
 * its class compared with none; a character cut in two is bytes that are
 * not UTF-8, boundaries copied as they are). A stretch that passes the
 * quick check on its own and is copied whole holds no dirty segment.
 *
 * Segments are normalized in runs of up to NFC_RUN bytes (whole segments),
 * so the bound's memory stays small whatever the text; a run that cannot
 * be normalized (out of memory) counts nfc_weight a byte. Before, every
 * byte of a dirty segment counted nfc_weight: 16 MiB of "e\u0301" was "at
 * least 32,767 tokens" with Qwen3 (5,592,405 given), encoded in full before
 * a 40k context refused it; now at least 515,378 (docs/TOKENIZER.md,
 * "Refusing early"). */
#define NFC_RUN (64u << 10)

static void weigh_run(const tn_tokenizer *tok, const unsigned char *p, size_t len, bool dirty,
                      weight_sum *w) {
    if (dirty) {
        char *out = NULL;
        size_t n = 0;
        if (tn_nfc((const char *)p, len, &out, &n) == TN_OK) {
            for (size_t k = 0; k < n; k++)
                weigh(w, tok->min_weight[(unsigned char)out[k]]);
            free(out);
            return;
        }
        for (size_t k = 0; k < len; k++)
            weigh(w, tok->nfc_weight);
        return;
    }
    for (size_t k = 0; k < len; k++)
        weigh(w, tok->min_weight[p[k]]);
}

static void nfc_min_weight(const tn_tokenizer *tok, const unsigned char *p, size_t len,
                           weight_sum *w) {
    size_t run = 0, seg = 0, first_last = 0, i = 0;
    bool run_dirty = false, dirty = false;
    uint8_t last_ccc = 0;
    for (;;) {
        size_t adv = 1;
        bool boundary = true;
        uint8_t ccc = 0;
        if (i < len && p[i] >= 0x80) {
            const uint32_t cp = tn_utf8_decode((const char *)p + i, len - i, &adv);
            const uint32_t flags = cp == TN_UTF8_INVALID ? 0 : tn_unicode_flags(cp);
            ccc = cp == TN_UTF8_INVALID ? 0 : tn_unicode_ccc(cp);
            boundary = ccc == 0 && !(flags & NFC_NOT_YES);
            if (!boundary && ((flags & NFC_NOT_YES) || (ccc != 0 && last_ccc > ccc)))
                dirty = true;
        }
        if ((boundary || i >= len) && i > seg) {
            if (dirty && (!tok->added_plain || tok->added_end[p[first_last]])) {
                weigh_run(tok, p + run, seg - run, run_dirty, w);
                for (size_t k = seg; k < i; k++)
                    weigh(w, tok->nfc_weight);
                run = i;
                run_dirty = false;
            } else {
                run_dirty |= dirty;
                if (i - run >= NFC_RUN) {
                    weigh_run(tok, p + run, i - run, run_dirty, w);
                    run = i;
                    run_dirty = false;
                }
            }
            seg = i;
            dirty = false;
        }
        if (i >= len) {
            weigh_run(tok, p + run, len - run, run_dirty, w);
            return;
        }
        if (i == seg)
            first_last = i + adv - 1;
        last_ccc = ccc;
        i += adv;
    }
}

size_t tn_tokenizer_min_tokens(const tn_tokenizer *tok, const char *text, size_t len) {
    if (!tok || !text)
        return 0;
    const unsigned char *p = (const unsigned char *)text;
    weight_sum w = {0, 0};
    if (tok->nfc && !tn_nfc_quick_check(text, len))
        nfc_min_weight(tok, p, len, &w);
    else
        for (size_t i = 0; i < len; i++)
            weigh(&w, tok->min_weight[p[i]]);
    return w.whole + (size_t)(w.frac >> 32);
}

int32_t tn_tokenizer_find(const tn_tokenizer *tok, const char *text, size_t len) {
    if (!tok || (!text && len))
        return -1;
    return tn_strmap_get(&tok->by_text, text ? text : "", len);
}

int tn_token_type_of(const tn_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_vocab)
        return TN_TOKEN_TYPE_UNDEFINED;
    return tok->type[id];
}

bool tn_token_is_eog(const tn_tokenizer *tok, int32_t id) {
    return tok && id >= 0 && id < tok->n_vocab && tok->eog[id];
}

const char *tn_token_piece(const tn_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || id >= tok->n_vocab) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = tok->piece_off[id + 1] - tok->piece_off[id] - 1;
    return tok->piece_blob + tok->piece_off[id];
}

const char *tn_token_text(const tn_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || id >= tok->n_vocab) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = tok->text_off[id + 1] - tok->text_off[id] - 1;
    return tok->text_blob + tok->text_off[id];
}

static inline const char *text_of(const tn_tokenizer *tok, int32_t id, size_t *len) {
    *len = tok->text_off[id + 1] - tok->text_off[id] - 1;
    return tok->text_blob + tok->text_off[id];
}

/* Tokens a merge may produce and plain text may map to. */
static inline bool is_mergeable(const tn_tokenizer *tok, int32_t id) {
    uint8_t t = tok->type[id];
    return t == TN_TOKEN_TYPE_NORMAL || t == TN_TOKEN_TYPE_USER_DEFINED ||
           t == TN_TOKEN_TYPE_UNDEFINED;
}

/* Control-like tokens: produce no text unless asked, match in the input
 * only with TN_TOKENIZE_SPECIAL. */
static inline bool is_control(uint8_t t) {
    return t == TN_TOKEN_TYPE_CONTROL || t == TN_TOKEN_TYPE_UNKNOWN;
}

/* ---------------------------------------------------------------- tokens */

int tn_tokens_push(tn_tokens *t, int32_t id) {
    if (!t)
        return TN_ERR_INVALID;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        int32_t *ids = realloc(t->ids, cap * sizeof *ids);
        if (!ids)
            return TN_ERR_NOMEM;
        t->ids = ids;
        t->cap = cap;
    }
    t->ids[t->n++] = id;
    return TN_OK;
}

void tn_tokens_free(tn_tokens *t) {
    if (!t)
        return;
    free(t->ids);
    t->ids = NULL;
    t->n = t->cap = 0;
}

/* ------------------------------------------------------------------ load */

void tn_tokenizer_free(tn_tokenizer *tok) {
    if (!tok)
        return;
    free(tok->text_blob);
    free(tok->text_off);
    free(tok->piece_blob);
    free(tok->piece_off);
    free(tok->type);
    free(tok->eog);
    free(tok->score);
    free(tok->space_joiners);
    free(tok->trie);
    tn_strmap_free(&tok->by_text);
    tn_pairmap_free(&tok->merges);
    free(tok);
}

static int trie_new_node(tn_tokenizer *tok, uint8_t byte) {
    if (tok->n_trie == tok->cap_trie) {
        size_t cap = tok->cap_trie ? tok->cap_trie * 2 : 256;
        if (cap > INT32_MAX)
            return -1;
        trie_node *t = realloc(tok->trie, cap * sizeof *t);
        if (!t)
            return -1;
        tok->trie = t;
        tok->cap_trie = cap;
    }
    trie_node *n = &tok->trie[tok->n_trie];
    n->first_child = -1;
    n->next_sibling = -1;
    n->token = -1;
    n->byte = byte;
    return (int)tok->n_trie++;
}

static bool trie_insert(tn_tokenizer *tok, const char *s, size_t len, int32_t id) {
    const unsigned char *p = (const unsigned char *)s;
    int32_t node = tok->trie_root[p[0]];
    if (node < 0) {
        node = trie_new_node(tok, p[0]);
        if (node < 0)
            return false;
        tok->trie_root[p[0]] = node;
    }
    for (size_t i = 1; i < len; i++) {
        int32_t child = tok->trie[node].first_child;
        while (child >= 0 && tok->trie[child].byte != p[i])
            child = tok->trie[child].next_sibling;
        if (child < 0) {
            child = trie_new_node(tok, p[i]);
            if (child < 0)
                return false;
            tok->trie[child].next_sibling = tok->trie[node].first_child;
            tok->trie[node].first_child = child;
        }
        node = child;
    }
    /* Duplicate texts: the first id wins, as in the text lookup. */
    if (tok->trie[node].token < 0)
        tok->trie[node].token = id;
    return true;
}

static int32_t get_id(const tn_gguf *g, const char *key, int32_t n_vocab) {
    int64_t v;
    if (tn_gguf_get_int(g, key, &v) != TN_OK || v < 0 || v >= n_vocab)
        return -1;
    return (int32_t)v;
}

/* A tokenizer flag, fallback when absent. One of another type is an error:
 * a u32 add_bos_token was taken for an absent one without a word, and the
 * prompts then lacked (or gained) their BOS. */
static int get_flag(const tn_gguf *g, const char *key, bool fallback, bool *out, tn_error *err) {
    const int rc = tn_gguf_read_bool(g, key, out, err);
    if (rc == TN_ERR_NOT_FOUND) {
        *out = fallback;
        return TN_OK;
    }
    return rc;
}

/* Decoded bytes of one token into out (capacity >= text length + 1:
 * decoding never lengthens a token). Returns the length. */
static size_t decode_token(const tn_tokenizer *tok, int32_t id, char *out) {
    size_t len;
    const char *s = text_of(tok, id, &len);
    uint8_t t = tok->type[id];
    if (is_control(t)) {
        memcpy(out, s, len);
        return len;
    }
    /* Unused rows (a converter's "[PADn]" padding, reserved slots) decode to
     * nothing, as in llama.cpp's token_to_piece: a model that samples one
     * shows no made-up text. */
    if (t == TN_TOKEN_TYPE_UNUSED)
        return 0;
    if (tok->kind == KIND_SPM || tok->kind == KIND_G4) {
        if (t == TN_TOKEN_TYPE_BYTE && len == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
            unsigned v;
            if (sscanf(s + 3, "%2x", &v) == 1) {
                out[0] = (char)v;
                return 1;
            }
        }
        size_t o = 0;
        for (size_t i = 0; i < len;) {
            if (len - i >= SPM_SPACE_LEN && !memcmp(s + i, SPM_SPACE, SPM_SPACE_LEN)) {
                out[o++] = ' ';
                i += SPM_SPACE_LEN;
            } else {
                out[o++] = s[i++];
            }
        }
        return o;
    }
    if (t == TN_TOKEN_TYPE_USER_DEFINED) {
        memcpy(out, s, len);
        return len;
    }
    /* Byte-level: each character of the map is one byte. Characters
     * outside the map (a damaged vocabulary) pass through unchanged. */
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t adv;
        uint32_t cp = tn_utf8_decode(s + i, len - i, &adv);
        int b = cp == TN_UTF8_INVALID ? -1 : tn_gpt2_cp_to_byte(cp);
        if (b >= 0) {
            out[o++] = (char)b;
        } else {
            memcpy(out + o, s + i, adv);
            o += adv;
        }
        i += adv;
    }
    return o;
}

static int load_tokens(tn_tokenizer *tok, const tn_gguf *g, const char *path, tn_error *err) {
    const tn_gguf_value *tokens = tn_gguf_find(g, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != TN_GGUF_ARRAY || tokens->v.arr.type != TN_GGUF_STRING)
        return tn_fail(err, TN_ERR_FORMAT, "%s: tokenizer.ggml.tokens is missing or not a list "
                       "of strings", path);
    uint64_t n = tokens->v.arr.n;
    if (n == 0)
        return tn_fail(err, TN_ERR_FORMAT, "%s: the vocabulary is empty", path);
    if (n >= INT32_MAX)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: %llu tokens is too many", path,
                       (unsigned long long)n);
    tok->n_vocab = (int32_t)n;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += tokens->v.arr.items[i].v.str.len + 1;
    if (total >= UINT32_MAX)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: the token texts are too large", path);
    tok->text_blob = malloc(total);
    tok->piece_blob = malloc(total);
    tok->text_off = malloc((n + 1) * sizeof *tok->text_off);
    tok->piece_off = malloc((n + 1) * sizeof *tok->piece_off);
    tok->type = malloc(n);
    tok->eog = calloc(n, 1);
    if (!tok->text_blob || !tok->piece_blob || !tok->text_off || !tok->piece_off || !tok->type ||
        !tok->eog || !tn_strmap_init(&tok->by_text, n))
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory loading the vocabulary", path);
    uint32_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const tn_str *s = &tokens->v.arr.items[i].v.str;
        tok->text_off[i] = off;
        if (s->len)
            memcpy(tok->text_blob + off, s->ptr, s->len);
        tok->text_blob[off + s->len] = '\0';
        if (tn_strmap_put(&tok->by_text, tok->text_blob + off, s->len, (int32_t)i) == INT32_MIN)
            return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory loading the vocabulary", path);
        off += (uint32_t)s->len + 1;
    }
    tok->text_off[n] = off;

    const tn_gguf_value *types = tn_gguf_find(g, "tokenizer.ggml.token_type");
    if (types && (types->type != TN_GGUF_ARRAY || types->v.arr.n != n || !types->v.arr.data))
        return tn_fail(err, TN_ERR_FORMAT, "%s: tokenizer.ggml.token_type does not list one "
                       "integer per token", path);
    for (uint64_t i = 0; i < n; i++) {
        int64_t t = types ? tn_gguf_arr_int(types, i) : TN_TOKEN_TYPE_NORMAL;
        tok->type[i] = (t >= 0 && t <= TN_TOKEN_TYPE_BYTE) ? (uint8_t)t : TN_TOKEN_TYPE_NORMAL;
    }
    return TN_OK;
}

static int load_scores(tn_tokenizer *tok, const tn_gguf *g, const char *path, tn_error *err) {
    uint64_t n = (uint64_t)tok->n_vocab;
    tok->score = malloc(n * sizeof *tok->score);
    if (!tok->score)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory loading the vocabulary", path);
    const tn_gguf_value *scores = tn_gguf_find(g, "tokenizer.ggml.scores");
    if (scores && (scores->type != TN_GGUF_ARRAY || scores->v.arr.n != n || !scores->v.arr.data))
        return tn_fail(err, TN_ERR_FORMAT, "%s: tokenizer.ggml.scores does not list one number "
                       "per token", path);
    for (uint64_t i = 0; i < n; i++) {
        double s = scores ? tn_gguf_arr_float(scores, i) : 0.0;
        tok->score[i] = s == s ? (float)s : -1e30f; /* NaN would break the heap order */
    }
    return TN_OK;
}

static int load_merges(tn_tokenizer *tok, const tn_gguf *g, const char *path, tn_error *err) {
    const tn_gguf_value *merges = tn_gguf_find(g, "tokenizer.ggml.merges");
    if (!merges || merges->type != TN_GGUF_ARRAY || merges->v.arr.type != TN_GGUF_STRING)
        return tn_fail(err, TN_ERR_FORMAT, "%s: tokenizer.ggml.merges is missing or not a list "
                       "of strings", path);
    uint64_t n = merges->v.arr.n;
    if (n >= INT32_MAX)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "%s: too many merges", path);
    if (!tn_pairmap_init(&tok->merges, n))
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory loading the merges", path);
    char small[512];
    for (uint64_t r = 0; r < n; r++) {
        const tn_str *m = &merges->v.arr.items[r].v.str;
        /* "a b": split at the first space after the first byte. */
        const char *sp = m->len > 1 ? memchr(m->ptr + 1, ' ', m->len - 1) : NULL;
        if (!sp || sp == m->ptr + m->len - 1)
            return tn_fail(err, TN_ERR_FORMAT, "%s: merge %llu (\"%.*s\") is not two tokens",
                           path, (unsigned long long)r, (int)(m->len > 40 ? 40 : m->len),
                           m->ptr);
        size_t al = (size_t)(sp - m->ptr), bl = m->len - al - 1;
        int32_t a = tn_strmap_get(&tok->by_text, m->ptr, al);
        int32_t b = tn_strmap_get(&tok->by_text, sp + 1, bl);
        char *joined = al + bl <= sizeof small ? small : malloc(al + bl);
        if (!joined)
            return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory loading the merges", path);
        memcpy(joined, m->ptr, al);
        memcpy(joined + al, sp + 1, bl);
        int32_t ab = tn_strmap_get(&tok->by_text, joined, al + bl);
        if (joined != small)
            free(joined);
        if (a < 0 || b < 0 || ab < 0)
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: merge %llu (\"%.*s\") names a token that is not in the vocabulary",
                           path, (unsigned long long)r, (int)(m->len > 40 ? 40 : m->len), m->ptr);
        tn_pairmap_put(&tok->merges, a, b, (int32_t)r, ab);
    }
    return TN_OK;
}

/* End-of-turn tokens of the chat formats, by text. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "<|end_of_text|>", "<eos>", "</s>", "<turn|>",
    /* gpt-oss: <|return|> (its eos) ends an answer, <|call|> a tool call;
     * its <|end|> ends one message of an answer (the session goes on) */
    "<|return|>", "<|call|>",
    /* DeepSeek: "<｜end▁of▁sentence｜>" */
    "<\xEF\xBD\x9C\x65nd\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
};
/* Preference order for the end-of-turn id when the file names none. */
static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>",
                                        "<EOT>", "<turn|>"};

static int setup_specials(tn_tokenizer *tok, const tn_gguf *g) {
    int32_t n = tok->n_vocab;
    tok->bos = get_id(g, "tokenizer.ggml.bos_token_id", n);
    tok->eos = get_id(g, "tokenizer.ggml.eos_token_id", n);
    tok->unk = get_id(g, "tokenizer.ggml.unknown_token_id", n);
    tok->pad = get_id(g, "tokenizer.ggml.padding_token_id", n);
    tok->eot = get_id(g, "tokenizer.ggml.eot_token_id", n);
    int32_t eom = get_id(g, "tokenizer.ggml.eom_token_id", n);
    for (size_t i = 0; tok->eot < 0 && i < sizeof eot_texts / sizeof eot_texts[0]; i++) {
        int32_t id = tn_strmap_get(&tok->by_text, eot_texts[i], strlen(eot_texts[i]));
        if (id >= 0 && is_control(tok->type[id]))
            tok->eot = id;
    }
    if (tok->eot < 0)
        tok->eot = tok->eos;
    if (tok->eos >= 0)
        tok->eog[tok->eos] = 1;
    if (tok->eot >= 0)
        tok->eog[tok->eot] = 1;
    if (eom >= 0)
        tok->eog[eom] = 1;
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++) {
        int32_t id = tn_strmap_get(&tok->by_text, eog_texts[i], strlen(eog_texts[i]));
        if (id >= 0 && is_control(tok->type[id]))
            tok->eog[id] = 1;
    }
    /* Gemma 4 opens <|tool_response> (a user-defined token) right after its
     * calls, to be given the results: the answer ends there, as in
     * llama.cpp, so that the calls are the answer's end (the server's
     * tool-call parser). */
    int32_t tool_response = tn_strmap_get(&tok->by_text, "<|tool_response>", 16);
    if (tool_response >= 0 && tok->type[tool_response] != TN_TOKEN_TYPE_NORMAL)
        tok->eog[tool_response] = 1;

    for (int i = 0; i < 256; i++)
        tok->trie_root[i] = -1;
    for (int32_t id = 0; id < n; id++) {
        uint8_t t = tok->type[id];
        if (!is_control(t) && t != TN_TOKEN_TYPE_USER_DEFINED)
            continue;
        size_t len;
        const char *s = text_of(tok, id, &len);
        if (len && !trie_insert(tok, s, len, id))
            return TN_ERR_NOMEM;
    }
    return TN_OK;
}

static int setup_spm(tn_tokenizer *tok) {
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        tok->byte_token[b] = tn_strmap_get(&tok->by_text, name, 6);
    }
    /* Characters that some mergeable token has right before a "▁". */
    size_t cap = 0;
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        if (!is_mergeable(tok, id))
            continue;
        size_t len;
        const char *s = text_of(tok, id, &len);
        uint32_t prev = 0;
        bool have_prev = false;
        for (size_t i = 0; i < len;) {
            size_t adv;
            uint32_t cp = tn_utf8_decode(s + i, len - i, &adv);
            if (cp == 0x2581 && have_prev && prev != 0x2581) {
                bool known = false;
                for (size_t k = 0; k < tok->n_space_joiners && !known; k++)
                    known = tok->space_joiners[k] == prev;
                if (!known) {
                    if (tok->n_space_joiners == cap) {
                        cap = cap ? cap * 2 : 8;
                        uint32_t *a = realloc(tok->space_joiners, cap * sizeof *a);
                        if (!a)
                            return TN_ERR_NOMEM;
                        tok->space_joiners = a;
                    }
                    tok->space_joiners[tok->n_space_joiners++] = prev;
                }
            }
            prev = cp;
            have_prev = true;
            i += adv;
        }
    }
    /* A vocabulary that merges across spaces everywhere gains nothing. */
    tok->chunking = tok->n_space_joiners <= 64;
    return TN_OK;
}

static int setup_bpe(tn_tokenizer *tok) {
    for (int b = 0; b < 256; b++) {
        char buf[4];
        size_t n = tn_utf8_encode(tn_gpt2_byte_to_cp((unsigned char)b), buf);
        tok->byte_token[b] = tn_strmap_get(&tok->by_text, buf, n);
    }
    return TN_OK;
}

/* For tn_tokenizer_min_tokens: the longest stretch of text each byte can be
 * part of. A byte-level token stands for its decoded bytes; a SentencePiece
 * one also for its text, where "\u2581" may be written out; an added token
 * for its text, matched as it is. A byte with neither a token nor the
 * unknown token may be dropped and weighs nothing, as does a space that
 * SentencePiece turns into dropped bytes. */
static void set_min_weights(tn_tokenizer *tok) {
    uint32_t longest[256];
    uint32_t overall = 1;
    for (int b = 0; b < 256; b++)
        longest[b] = 1;
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        size_t tlen, plen;
        const unsigned char *t = (const unsigned char *)text_of(tok, id, &tlen);
        const unsigned char *p = (const unsigned char *)tok->piece_blob + tok->piece_off[id];
        plen = tok->piece_off[id + 1] - tok->piece_off[id] - 1;
        const bool as_text = tok->kind != KIND_BPE || tok->type[id] != TN_TOKEN_TYPE_NORMAL;
        const size_t n = as_text && tlen > plen ? tlen : plen;
        if (n <= 1)
            continue;
        const uint32_t c = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
        if (c > overall)
            overall = c;
        for (size_t i = 0; i < plen; i++)
            if (longest[p[i]] < c)
                longest[p[i]] = c;
        for (size_t i = 0; as_text && i < tlen; i++)
            if (longest[t[i]] < c)
                longest[t[i]] = c;
    }
    bool drops[256], drops_any = false;
    for (int b = 0; b < 256; b++) {
        drops[b] = tok->byte_token[b] < 0 && tok->unk < 0;
        drops_any |= drops[b];
    }
    if (tok->kind != KIND_BPE)
        drops[' '] |= drops[0xE2] || drops[0x96] || drops[0x81];
    for (int b = 0; b < 256; b++)
        tok->min_weight[b] = drops[b] ? 0 : (UINT64_C(1) << 32) / longest[b];
    tok->nfc_weight = drops_any ? 0 : (UINT64_C(1) << 32) / ((uint64_t)overall * 4);

    /* The added tokens bpe_encode may match (those in the trie). */
    tok->added_plain = true;
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        const uint8_t type = tok->type[id];
        size_t len;
        const char *s = text_of(tok, id, &len);
        if ((!is_control(type) && type != TN_TOKEN_TYPE_USER_DEFINED) || !len)
            continue;
        tok->added_end[(unsigned char)s[len - 1]] = true;
        for (size_t i = 0; i < len;) {
            size_t adv = 1;
            const uint32_t cp = tn_utf8_decode(s + i, len - i, &adv);
            if (cp == TN_UTF8_INVALID || tn_unicode_ccc(cp) != 0 ||
                (tn_unicode_flags(cp) & NFC_NOT_YES))
                tok->added_plain = false;
            i += adv;
        }
    }
}

int tn_tokenizer_load(const tn_gguf *g, tn_tokenizer **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_tokenizer_load: out is NULL");
    *out = NULL;
    if (!g)
        return tn_fail(err, TN_ERR_INVALID, "tn_tokenizer_load: no GGUF file");
    const char *path = tn_gguf_path(g);
    if (!path)
        path = "model";
    tn_str model;
    int rc = tn_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (rc == TN_ERR_NOT_FOUND)
        return tn_fail(err, TN_ERR_NOT_FOUND, "%s: the file has no tokenizer "
                       "(tokenizer.ggml.model is missing)", path);
    if (rc)
        return tn_fail(err, TN_ERR_FORMAT, "%s: tokenizer.ggml.model is not a string", path);
    int kind;
    if (tn_str_eq(model, "llama"))
        kind = KIND_SPM;
    else if (tn_str_eq(model, "gpt2"))
        kind = KIND_BPE;
    else if (tn_str_eq(model, "gemma4"))
        kind = KIND_G4;
    else
        return tn_fail(err, TN_ERR_UNSUPPORTED,
                       "%s: tokenizer type \"%.*s\" is not supported (Tern reads \"llama\", "
                       "\"gpt2\" and \"gemma4\" vocabularies)",
                       path, (int)(model.len > 40 ? 40 : model.len), model.ptr);

    tn_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory loading the tokenizer", path);
    tok->kind = kind;
    if ((rc = load_tokens(tok, g, path, err)))
        goto fail;
    if (kind == KIND_SPM) {
        if ((rc = load_scores(tok, g, path, err)))
            goto fail;
        if ((rc = get_flag(g, "tokenizer.ggml.add_space_prefix", true, &tok->add_space_prefix,
                           err)) ||
            (rc = get_flag(g, "tokenizer.ggml.add_bos_token", true, &tok->add_bos, err)))
            goto fail;
        if ((rc = setup_spm(tok)))
            goto nomem;
    } else if (kind == KIND_G4) {
        /* llama.cpp forces a BOS for Gemma 4 whatever the file says */
        tok->add_bos = true;
        tok->add_space_prefix = false;
        if ((rc = load_merges(tok, g, path, err)))
            goto fail;
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            tok->byte_token[b] = tn_strmap_get(&tok->by_text, name, 6);
        }
    } else {
        tn_str pre = {"default", 7};
        tn_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
        int kind_pre = tn_pretok_from_name(pre.ptr, pre.len);
        if (kind_pre < 0 && (tn_str_eq(pre, "default") || pre.len == 0))
            kind_pre = TN_PRETOK_GPT2;
        if (kind_pre < 0) {
            rc = tn_fail(err, TN_ERR_UNSUPPORTED,
                         "%s: pre-tokenizer \"%.*s\" is not supported (Tern knows gpt-2, "
                         "llama-bpe, qwen2 and gpt-4o)",
                         path, (int)(pre.len > 40 ? 40 : pre.len), pre.ptr);
            goto fail;
        }
        tok->pretok = (tn_pretok)kind_pre;
        tok->nfc = tok->pretok == TN_PRETOK_QWEN2;
        /* as the tokenizer.json files say (model.ignore_merges) */
        tok->ignore_merges = tok->pretok == TN_PRETOK_LLAMA3 || tok->pretok == TN_PRETOK_GPT4O;
        if ((rc = get_flag(g, "tokenizer.ggml.add_bos_token", tok->pretok == TN_PRETOK_LLAMA3,
                           &tok->add_bos, err)))
            goto fail;
        tok->add_space_prefix = false;
        if ((rc = load_merges(tok, g, path, err)))
            goto fail;
        if ((rc = setup_bpe(tok)))
            goto nomem;
    }
    if ((rc = get_flag(g, "tokenizer.ggml.add_eos_token", false, &tok->add_eos, err)))
        goto fail;
    if ((rc = setup_specials(tok, g)))
        goto nomem;

    /* Decoded pieces: never longer than the texts. */
    uint32_t off = 0;
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        tok->piece_off[id] = off;
        size_t len = decode_token(tok, id, tok->piece_blob + off);
        tok->piece_blob[off + len] = '\0';
        off += (uint32_t)len + 1;
    }
    tok->piece_off[tok->n_vocab] = off;
    set_min_weights(tok);
    *out = tok;
    return TN_OK;
nomem:
    rc = tn_fail(err, TN_ERR_NOMEM, "%s: out of memory loading the tokenizer", path);
fail:
    tn_tokenizer_free(tok);
    return rc;
}

/* ------------------------------------------------------------ the merger */

typedef struct sym {
    uint32_t start, len; /* bytes of the text being merged */
    int32_t prev, next;
    int32_t id;          /* -1: not a token (never merges) */
} sym;

typedef struct cand {
    float key;     /* lower first */
    int32_t left;  /* symbol index; ties: lower first */
    uint32_t len;  /* bytes of the merged pair, to detect stale candidates */
    int32_t result;
} cand;

/* Words repeat: within one call, a piece (byte-level) or chunk
 * (SentencePiece) seen before gets its ids from this cache instead of
 * being merged again. Exact, since a piece's ids depend on its bytes only. */
typedef struct cache_slot {
    uint64_t hash;
    uint32_t key_off, key_len; /* in cache_keys */
    uint32_t ids_off, n_ids;   /* in cache_ids */
} cache_slot;

#define CACHE_MAX_KEY 64
#define CACHE_MAX_SLOTS (1u << 17)

/* Recently looked-up pairs: natural text meets the same pairs over and
 * over, and the vocabulary's tables are far larger than the CPU caches. */
typedef struct pair_memo {
    uint64_t key;   /* tn_pair_key(left, right); 0: empty */
    float prio;
    int32_t result; /* -1: the pair does not merge */
} pair_memo;

#define PAIR_MEMO_SIZE 4096

typedef struct scratch {
    pair_memo *memo; /* [PAIR_MEMO_SIZE], allocated on first use */
    sym *syms;
    size_t cap_syms;
    cand *heap;
    size_t n_heap, cap_heap;
    char *buf;        /* normalized text */
    size_t cap_buf;
    char *buf2;
    size_t cap_buf2;

    cache_slot *cache;
    size_t cache_mask, cache_count;
    bool cache_full;
    char *cache_keys;
    size_t keys_len, keys_cap;
    int32_t *cache_ids;
    size_t ids_len, ids_cap;
} scratch;

static void scratch_free(scratch *s) {
    free(s->memo);
    free(s->syms);
    free(s->heap);
    free(s->buf);
    free(s->buf2);
    free(s->cache);
    free(s->cache_keys);
    free(s->cache_ids);
}

static bool reserve(void **p, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static inline bool cand_before(const cand *a, const cand *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static bool heap_push(scratch *s, cand c) {
    if (!reserve((void **)&s->heap, &s->cap_heap, s->n_heap + 1, sizeof(cand)))
        return false;
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_before(&c, &s->heap[parent]))
            break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = c;
    return true;
}

static cand heap_pop(scratch *s) {
    cand top = s->heap[0];
    cand last = s->heap[--s->n_heap];
    size_t n = s->n_heap, i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n)
            break;
        size_t best = l;
        if (l + 1 < n && cand_before(&s->heap[l + 1], &s->heap[l]))
            best = l + 1;
        if (!cand_before(&s->heap[best], &last))
            break;
        s->heap[i] = s->heap[best];
        i = best;
    }
    if (n)
        s->heap[i] = last;
    return top;
}

/* Candidate merge of symbols l and r (adjacent), if any. */
static bool try_pair(const tn_tokenizer *tok, scratch *s, const char *text, int32_t l,
                     int32_t r) {
    const sym *a = &s->syms[l], *b = &s->syms[r];
    if (a->id < 0 || b->id < 0)
        return true;
    cand c;
    uint64_t key = tn_pair_key(a->id, b->id);
    pair_memo *memo = &s->memo[tn_hash_u64(key) & (PAIR_MEMO_SIZE - 1)];
    if (memo->key != key) {
        memo->key = key;
        memo->result = -1;
        if (tok->kind == KIND_SPM) {
            /* The pair's text is contiguous in the chunk. */
            int32_t id = tn_strmap_get(&tok->by_text, text + a->start, a->len + b->len);
            if (id >= 0 && is_mergeable(tok, id)) {
                memo->prio = -tok->score[id];
                memo->result = id;
            }
        } else {
            const tn_pairmap_slot *m = tn_pairmap_get(&tok->merges, a->id, b->id);
            if (m) {
                memo->prio = (float)m->rank;
                memo->result = m->result;
            }
        }
    }
    if (memo->result < 0)
        return true;
    c.key = memo->prio;
    c.result = memo->result;
    c.left = l;
    c.len = a->len + b->len;
    return heap_push(s, c);
}

/* Merges the symbols s->syms[0..n) (linked in order) over text. */
static bool merge_all(const tn_tokenizer *tok, scratch *s, const char *text, int32_t n) {
    s->n_heap = 0;
    if (!s->memo && !(s->memo = calloc(PAIR_MEMO_SIZE, sizeof *s->memo)))
        return false;
    for (int32_t i = 0; i + 1 < n; i++)
        if (!try_pair(tok, s, text, i, i + 1))
            return false;
    while (s->n_heap) {
        cand c = heap_pop(s);
        sym *a = &s->syms[c.left];
        if (a->len == 0 || a->next < 0)
            continue;
        sym *b = &s->syms[a->next];
        if (a->len + b->len != c.len)
            continue;
        a->len = c.len;
        a->id = c.result;
        a->next = b->next;
        if (b->next >= 0)
            s->syms[b->next].prev = c.left;
        b->len = 0;
        if (a->prev >= 0 && !try_pair(tok, s, text, a->prev, c.left))
            return false;
        if (a->next >= 0 && !try_pair(tok, s, text, c.left, a->next))
            return false;
    }
    return true;
}

/* Bytes with no token of their own: byte tokens, else unknown, else dropped. */
static int push_bytes(const tn_tokenizer *tok, const char *p, size_t n, tn_tokens *out) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = tok->byte_token[(unsigned char)p[i]];
        if (id < 0)
            id = tok->unk;
        if (id >= 0 && tn_tokens_push(out, id))
            return TN_ERR_NOMEM;
    }
    return TN_OK;
}

static int emit_syms(const tn_tokenizer *tok, scratch *s, const char *text, tn_tokens *out) {
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) {
        const sym *y = &s->syms[i];
        if (y->id >= 0) {
            if (tn_tokens_push(out, y->id))
                return TN_ERR_NOMEM;
        } else if (push_bytes(tok, text + y->start, y->len, out)) {
            return TN_ERR_NOMEM;
        }
    }
    return TN_OK;
}

/* Appends the cached ids of p[0..len) to out; false on a miss. */
static bool cache_get(scratch *s, const char *p, size_t len, uint64_t hash, tn_tokens *out,
                      int *rc) {
    if (!s->cache || len > CACHE_MAX_KEY)
        return false;
    for (size_t i = (size_t)hash & s->cache_mask;; i = (i + 1) & s->cache_mask) {
        const cache_slot *c = &s->cache[i];
        if (!c->key_len)
            return false;
        if (c->hash == hash && c->key_len == len && !memcmp(s->cache_keys + c->key_off, p, len)) {
            if (!reserve((void **)&out->ids, &out->cap, out->n + c->n_ids, sizeof(int32_t))) {
                *rc = TN_ERR_NOMEM;
                return true;
            }
            if (c->n_ids)
                memcpy(out->ids + out->n, s->cache_ids + c->ids_off,
                       c->n_ids * sizeof(int32_t));
            out->n += c->n_ids;
            return true;
        }
    }
}

/* Remembers ids[from..from + n) for p[0..len). Best effort: a failure only
 * means no cache. n may be 0 with ids NULL: a vocabulary without byte
 * tokens or an unknown token drops what it has no piece for. */
static void cache_put(scratch *s, const char *p, size_t len, uint64_t hash, const int32_t *ids,
                      size_t from, size_t n) {
    if (len == 0 || len > CACHE_MAX_KEY || s->cache_full || n > UINT32_MAX)
        return;
    if (!s->cache) {
        s->cache = calloc(4096, sizeof *s->cache);
        if (!s->cache)
            return;
        s->cache_mask = 4095;
    }
    if ((s->cache_count + 1) * 2 > s->cache_mask + 1) {
        size_t cap = (s->cache_mask + 1) * 2;
        if (cap > CACHE_MAX_SLOTS) {
            s->cache_full = true;
            return;
        }
        cache_slot *slots = calloc(cap, sizeof *slots);
        if (!slots) {
            s->cache_full = true;
            return;
        }
        for (size_t j = 0; j <= s->cache_mask; j++) {
            if (!s->cache[j].key_len)
                continue;
            size_t i = (size_t)s->cache[j].hash & (cap - 1);
            while (slots[i].key_len)
                i = (i + 1) & (cap - 1);
            slots[i] = s->cache[j];
        }
        free(s->cache);
        s->cache = slots;
        s->cache_mask = cap - 1;
    }
    if (s->keys_len + len > UINT32_MAX || s->ids_len + n > UINT32_MAX ||
        !reserve((void **)&s->cache_keys, &s->keys_cap, s->keys_len + len, 1) ||
        !reserve((void **)&s->cache_ids, &s->ids_cap, s->ids_len + n, sizeof(int32_t))) {
        s->cache_full = true;
        return;
    }
    size_t i = (size_t)hash & s->cache_mask;
    while (s->cache[i].key_len)
        i = (i + 1) & s->cache_mask;
    cache_slot *c = &s->cache[i];
    c->hash = hash;
    c->key_off = (uint32_t)s->keys_len;
    c->key_len = (uint32_t)len;
    c->ids_off = (uint32_t)s->ids_len;
    c->n_ids = (uint32_t)n;
    memcpy(s->cache_keys + s->keys_len, p, len);
    s->keys_len += len;
    if (n)
        memcpy(s->cache_ids + s->ids_len, ids + from, n * sizeof(int32_t));
    s->ids_len += n;
    s->cache_count++;
}

/* The end of every merge-by-rank encoding: merge the n symbols of p, emit
 * their tokens, and remember them for the next time p comes. */
static int merge_emit_cache(const tn_tokenizer *tok, scratch *s, const char *p, size_t len,
                            int32_t n, uint64_t hash, tn_tokens *out, size_t n_before) {
    if (!merge_all(tok, s, p, n))
        return TN_ERR_NOMEM;
    int rc = emit_syms(tok, s, p, out);
    if (rc)
        return rc;
    cache_put(s, p, len, hash, out->ids, n_before, out->n - n_before);
    return TN_OK;
}

/* ------------------------------------------------------ SentencePiece BPE */

/* One chunk of normalized text: characters, merged by score. */
static int spm_chunk(const tn_tokenizer *tok, scratch *s, const char *text, size_t len,
                     tn_tokens *out) {
    if (len == 0)
        return TN_OK;
    uint64_t hash = len <= CACHE_MAX_KEY ? tn_hash_bytes(text, len) : 0;
    int rc = TN_OK;
    if (cache_get(s, text, len, hash, out, &rc))
        return rc;
    size_t n_before = out->n;
    if (!reserve((void **)&s->syms, &s->cap_syms, len, sizeof(sym)))
        return TN_ERR_NOMEM;
    int32_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t adv;
        tn_utf8_decode(text + i, len - i, &adv);
        sym *y = &s->syms[n];
        y->start = (uint32_t)i;
        y->len = (uint32_t)adv;
        y->prev = n - 1;
        y->next = n + 1;
        int32_t id = tn_strmap_get(&tok->by_text, text + i, adv);
        y->id = id >= 0 && is_mergeable(tok, id) ? id : -1;
        n++;
        i += adv;
    }
    s->syms[n - 1].next = -1;
    if (!merge_all(tok, s, text, n))
        return TN_ERR_NOMEM;
    if ((rc = emit_syms(tok, s, text, out)))
        return rc;
    cache_put(s, text, len, hash, out->ids, n_before, out->n - n_before);
    return TN_OK;
}

static bool is_space_joiner(const tn_tokenizer *tok, uint32_t cp) {
    for (size_t k = 0; k < tok->n_space_joiners; k++)
        if (tok->space_joiners[k] == cp)
            return true;
    return false;
}

/* Plain text between added tokens: spaces become "▁", one "▁" goes in
 * front where the vocabulary wants it, then the chunks merge. */
static int spm_encode(const tn_tokenizer *tok, scratch *s, const char *text, size_t len,
                      tn_tokens *out) {
    if (len == 0)
        return TN_OK;
    /* A space grows to three bytes. */
    if (len > (SIZE_MAX - SPM_SPACE_LEN) / SPM_SPACE_LEN ||
        len * SPM_SPACE_LEN + SPM_SPACE_LEN > UINT32_MAX)
        return TN_ERR_OVERFLOW;
    if (!reserve((void **)&s->buf, &s->cap_buf, len * SPM_SPACE_LEN + SPM_SPACE_LEN, 1))
        return TN_ERR_NOMEM;
    char *b = s->buf;
    size_t n = 0;
    if (tok->add_space_prefix) {
        memcpy(b, SPM_SPACE, SPM_SPACE_LEN);
        n = SPM_SPACE_LEN;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(b + n, SPM_SPACE, SPM_SPACE_LEN);
            n += SPM_SPACE_LEN;
        } else {
            b[n++] = text[i];
        }
    }
    if (!tok->chunking)
        return spm_chunk(tok, s, b, n, out);
    size_t chunk_start = 0;
    uint32_t prev = 0;
    bool have_prev = false;
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = tn_utf8_decode(b + i, n - i, &adv);
        if (cp == 0x2581 && have_prev && prev != 0x2581 && !is_space_joiner(tok, prev) &&
            i > chunk_start) {
            int rc = spm_chunk(tok, s, b + chunk_start, i - chunk_start, out);
            if (rc)
                return rc;
            chunk_start = i;
        }
        prev = cp;
        have_prev = true;
        i += adv;
    }
    return spm_chunk(tok, s, b + chunk_start, n - chunk_start, out);
}

/* ------------------------------------------------------- byte-level BPE */

static int bpe_piece(const tn_tokenizer *tok, scratch *s, const char *p, size_t len,
                     tn_tokens *out) {
    if (len == 1)
        return push_bytes(tok, p, 1, out);
    uint64_t hash = len <= CACHE_MAX_KEY ? tn_hash_bytes(p, len) : 0;
    int rc = TN_OK;
    if (cache_get(s, p, len, hash, out, &rc))
        return rc;
    size_t n_before = out->n;
    if (tok->ignore_merges) {
        /* Whole piece first (Llama 3's ignore_merges). */
        if (!reserve((void **)&s->buf2, &s->cap_buf2, len * 2, 1))
            return TN_ERR_NOMEM;
        size_t m = 0;
        for (size_t i = 0; i < len; i++)
            m += tn_utf8_encode(tn_gpt2_byte_to_cp((unsigned char)p[i]), s->buf2 + m);
        int32_t id = tn_strmap_get(&tok->by_text, s->buf2, m);
        if (id >= 0 && is_mergeable(tok, id))
            return tn_tokens_push(out, id);
    }
    if (len > INT32_MAX || !reserve((void **)&s->syms, &s->cap_syms, len, sizeof(sym)))
        return TN_ERR_NOMEM;
    int32_t n = (int32_t)len;
    for (int32_t i = 0; i < n; i++) {
        sym *y = &s->syms[i];
        y->start = (uint32_t)i;
        y->len = 1;
        y->prev = i - 1;
        y->next = i + 1 < n ? i + 1 : -1;
        y->id = tok->byte_token[(unsigned char)p[i]];
    }
    return merge_emit_cache(tok, s, p, len, n, hash, out, n_before);
}

static int bpe_encode(const tn_tokenizer *tok, scratch *s, const char *text, size_t len,
                      tn_tokens *out) {
    if (len == 0)
        return TN_OK;
    char *normalized = NULL;
    if (tok->nfc && !tn_nfc_quick_check(text, len)) {
        size_t nlen;
        int rc = tn_nfc(text, len, &normalized, &nlen);
        if (rc)
            return rc;
        text = normalized;
        len = nlen;
    }
    int rc = TN_OK;
    for (size_t pos = 0; pos < len && !rc;) {
        size_t n = tn_pretok_next(tok->pretok, text + pos, len - pos);
        if (n == 0 || n > len - pos)
            n = len - pos; /* cannot happen; never loop forever */
        rc = bpe_piece(tok, s, text + pos, n, out);
        pos += n;
    }
    free(normalized);
    return rc;
}

/* ---------------------------------------------------------------- encode */

/* Longest added token at text[0..len) that the flags allow; -1 if none. */
static int32_t match_added(const tn_tokenizer *tok, const char *text, size_t len,
                           size_t control_len, size_t *match_len) {
    const unsigned char *p = (const unsigned char *)text;
    int32_t node = tok->trie_root[p[0]];
    int32_t best = -1;
    size_t i = 1;
    while (node >= 0) {
        int32_t id = tok->trie[node].token;
        if (id >= 0 && (i <= control_len || !is_control(tok->type[id]))) {
            best = id;
            *match_len = i;
        }
        if (i >= len)
            break;
        int32_t child = tok->trie[node].first_child;
        while (child >= 0 && tok->trie[child].byte != p[i])
            child = tok->trie[child].next_sibling;
        node = child;
        i++;
    }
    return best;
}

/* ------------------------------------------------------------ Gemma 4 */

/* One run (newlines, or no newline) of "▁"-normalized text: a run of
 * newlines that is a token is that token; otherwise characters merged by
 * rank, and the bytes of a character without a token as <0xNN>. */
static int g4_piece(const tn_tokenizer *tok, scratch *s, const char *p, size_t len,
                    tn_tokens *out) {
    if (p[0] == '\n') {
        int32_t id = tn_strmap_get(&tok->by_text, p, len);
        if (id >= 0)
            return tn_tokens_push(out, id);
    }
    uint64_t hash = len <= CACHE_MAX_KEY ? tn_hash_bytes(p, len) : 0;
    int rc = TN_OK;
    if (cache_get(s, p, len, hash, out, &rc))
        return rc;
    size_t n_before = out->n;
    if (len > INT32_MAX || !reserve((void **)&s->syms, &s->cap_syms, len, sizeof(sym)))
        return TN_ERR_NOMEM;
    int32_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t adv;
        tn_utf8_decode(p + i, len - i, &adv);
        sym *y = &s->syms[n];
        y->start = (uint32_t)i;
        y->len = (uint32_t)adv;
        y->prev = n - 1;
        y->next = n + 1;
        int32_t id = tn_strmap_get(&tok->by_text, p + i, adv);
        y->id = id >= 0 && tok->type[id] != TN_TOKEN_TYPE_BYTE ? id : -1;
        n++;
        i += adv;
    }
    s->syms[n - 1].next = -1;
    return merge_emit_cache(tok, s, p, len, n, hash, out, n_before);
}

static int g4_encode(const tn_tokenizer *tok, scratch *s, const char *text, size_t len,
                     tn_tokens *out) {
    if (len == 0)
        return TN_OK;
    if (len > (SIZE_MAX - SPM_SPACE_LEN) / SPM_SPACE_LEN || len * SPM_SPACE_LEN > UINT32_MAX)
        return TN_ERR_OVERFLOW;
    if (!reserve((void **)&s->buf, &s->cap_buf, len * SPM_SPACE_LEN + 1, 1))
        return TN_ERR_NOMEM;
    char *b = s->buf;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(b + n, SPM_SPACE, SPM_SPACE_LEN);
            n += SPM_SPACE_LEN;
        } else {
            b[n++] = text[i];
        }
    }
    for (size_t i = 0; i < n;) {
        const bool nl = b[i] == '\n';
        size_t j = i + 1;
        while (j < n && (b[j] == '\n') == nl)
            j++;
        int rc = g4_piece(tok, s, b + i, j - i, out);
        if (rc)
            return rc;
        i = j;
    }
    return TN_OK;
}

static int encode_plain(const tn_tokenizer *tok, scratch *s, const char *text, size_t len,
                        tn_tokens *out) {
    return tok->kind == KIND_SPM  ? spm_encode(tok, s, text, len, out)
           : tok->kind == KIND_G4 ? g4_encode(tok, s, text, len, out)
                                  : bpe_encode(tok, s, text, len, out);
}

static atomic_uint_least64_t bytes_seen;

uint64_t tn_tokenizer_bytes_seen(void) {
    return atomic_load_explicit(&bytes_seen, memory_order_relaxed);
}

int tn_tokenize(const tn_tokenizer *tok, const char *text, size_t len, unsigned flags,
                tn_tokens *out, tn_error *err) {
    return tn_tokenize_spans(tok, text, len, flags, NULL, 0, out, err);
}

int tn_tokenize_spans(const tn_tokenizer *tok, const char *text, size_t len, unsigned flags,
                      const tn_text_span *plain, size_t n_plain, tn_tokens *out,
                      tn_error *err) {
    if (!tok || !out || (!text && len) || (n_plain && !plain))
        return tn_fail(err, TN_ERR_INVALID, "tn_tokenize: missing tokenizer, text or output");
    for (size_t k = 0; k < n_plain; k++)
        if (plain[k].start > len || plain[k].len > len - plain[k].start ||
            (k > 0 && plain[k].start < plain[k - 1].start + plain[k - 1].len))
            return tn_fail(err, TN_ERR_INVALID,
                           "tn_tokenize: plain span %zu is out of order or past the text", k);
    atomic_fetch_add_explicit(&bytes_seen, len, memory_order_relaxed);
    size_t n_before = out->n;
    scratch s = {0};
    int rc = TN_OK;
    if ((flags & TN_TOKENIZE_ADD_BOS) && tok->add_bos && tok->bos >= 0 &&
        tn_tokens_push(out, tok->bos))
        rc = TN_ERR_NOMEM;
    const bool allow_control = (flags & TN_TOKENIZE_SPECIAL) != 0;
    size_t seg = 0, k = 0; /* plain[k]: the first span that does not end at or before i */
    for (size_t i = 0; i < len && !rc;) {
        if (tok->trie_root[(unsigned char)text[i]] >= 0) {
            while (k < n_plain && plain[k].start + plain[k].len <= i)
                k++;
            /* How many bytes from i a control token may span: up to the
             * next plain span, none inside one. */
            size_t control_len = 0;
            if (allow_control)
                control_len = k == n_plain ? len - i : plain[k].start > i ? plain[k].start - i : 0;
            size_t mlen = 0;
            int32_t id = match_added(tok, text + i, len - i, control_len, &mlen);
            if (id >= 0) {
                rc = encode_plain(tok, &s, text + seg, i - seg, out);
                if (!rc && tn_tokens_push(out, id))
                    rc = TN_ERR_NOMEM;
                i += mlen;
                seg = i;
                continue;
            }
        }
        i++;
    }
    if (!rc)
        rc = encode_plain(tok, &s, text + seg, len - seg, out);
    scratch_free(&s);
    if (rc == TN_OK)
        return TN_OK;
    out->n = n_before;
    if (rc == TN_ERR_OVERFLOW)
        return tn_fail(err, rc, "tokenize: the text (%zu bytes) is too long", len);
    if (rc != TN_ERR_NOMEM)
        return tn_fail(err, rc, "tokenize: failed (%s)", tn_status_name(rc));
    return tn_fail(err, TN_ERR_NOMEM, "tokenize: out of memory (%zu bytes of text)", len);
}

/* ---------------------------------------------------------------- decode */

/* The bytes token id contributes under flags (NULL: nothing). */
static const char *piece_for(const tn_tokenizer *tok, int32_t id, unsigned flags, size_t *len) {
    if (is_control(tok->type[id]) && !(flags & TN_DETOKENIZE_SPECIAL)) {
        *len = 0;
        return NULL;
    }
    *len = tok->piece_off[id + 1] - tok->piece_off[id] - 1;
    return tok->piece_blob + tok->piece_off[id];
}

/* The bytes at the start of piece p (len > 0) that the text leaves out: the
 * leading space of a text's first token with text, where the vocabulary
 * prepends "▁"; nothing for ids that continue a text (a generated answer,
 * as llama.cpp's token_to_piece gives it). One rule for tn_detokenize and
 * the stream: docs/TOKENIZER.md, "The leading space". */
static size_t leading_drop(const tn_tokenizer *tok, unsigned flags, bool started, const char *p,
                           size_t len) {
    if (started || (flags & TN_DETOKENIZE_CONTINUATION) || !tok->add_space_prefix)
        return 0;
    return len && p[0] == ' ' ? 1 : 0;
}

int tn_detokenize(const tn_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
                  tn_buf *out, tn_error *err) {
    if (!tok || !out || (!ids && n))
        return tn_fail(err, TN_ERR_INVALID, "detokenize: missing tokenizer, ids or output");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tok->n_vocab)
            return tn_fail(err, TN_ERR_INVALID,
                           "detokenize: token id %ld is outside the vocabulary (0..%ld)",
                           (long)ids[i], (long)tok->n_vocab - 1);
    size_t len0 = out->len;
    bool started = false;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = piece_for(tok, ids[i], flags, &len);
        if (!len)
            continue;
        const size_t drop = leading_drop(tok, flags, started, p, len);
        p += drop;
        len -= drop;
        started = true;
        if (len && tn_buf_append(out, p, len)) {
            out->len = len0;
            if (out->data)
                out->data[len0] = '\0';
            return tn_fail(err, TN_ERR_NOMEM, "detokenize: out of memory");
        }
    }
    /* An empty result still leaves a NUL-terminated buffer. */
    if (!out->data && tn_buf_append(out, "", 0))
        return tn_fail(err, TN_ERR_NOMEM, "detokenize: out of memory");
    return TN_OK;
}

/* --------------------------------------------------------------- stream */

void tn_detok_stream_init(tn_detok_stream *s, const tn_tokenizer *tok, unsigned flags) {
    if (!s)
        return;
    memset(s, 0, sizeof *s);
    s->tok = tok;
    s->flags = flags;
}

static const char replacement_char[] = "\xEF\xBF\xBD";

/* Feeds bytes through the UTF-8 assembler, appending complete characters
 * (and U+FFFD for bytes that cannot form one) to out. */
static int stream_feed(tn_detok_stream *s, const char *p, size_t len, tn_buf *out) {
    size_t i = 0;
    while (i < len) {
        if (s->n_pending == 0) {
            /* Bulk: a run of complete, valid characters. */
            size_t j = i;
            while (j < len) {
                unsigned char c = (unsigned char)p[j];
                if (c < 0x80) {
                    j++;
                    continue;
                }
                size_t adv;
                uint32_t cp = tn_utf8_decode(p + j, len - j, &adv);
                if (cp == TN_UTF8_INVALID)
                    break;
                j += adv;
            }
            if (j > i && tn_buf_append(out, p + i, j - i))
                return TN_ERR_NOMEM;
            i = j;
            if (i >= len)
                break;
            /* An invalid byte, or the start of a character cut by the end. */
            size_t tail = tn_utf8_incomplete_tail(p + i, len - i);
            if (tail == len - i) {
                memcpy(s->pending, p + i, tail);
                s->n_pending = (uint8_t)tail;
                return TN_OK;
            }
            if (tn_buf_append(out, replacement_char, 3))
                return TN_ERR_NOMEM;
            i++;
            continue;
        }
        /* Completing a held-back character, one byte at a time. */
        char tmp[4];
        memcpy(tmp, s->pending, s->n_pending);
        tmp[s->n_pending] = p[i];
        size_t n = s->n_pending + 1u;
        size_t adv;
        uint32_t cp = tn_utf8_decode(tmp, n, &adv);
        if (cp != TN_UTF8_INVALID && adv == n) {
            if (tn_buf_append(out, tmp, n))
                return TN_ERR_NOMEM;
            s->n_pending = 0;
            i++;
        } else if (tn_utf8_incomplete_tail(tmp, n) == n && n < 4) {
            memcpy(s->pending, tmp, n);
            s->n_pending = (uint8_t)n;
            i++;
        } else {
            /* The held bytes cannot complete: one U+FFFD for them, then
             * this byte starts afresh. */
            if (tn_buf_append(out, replacement_char, 3))
                return TN_ERR_NOMEM;
            s->n_pending = 0;
        }
    }
    return TN_OK;
}

/* push and skip: started and dropped after id; the rest of its piece (what
 * the text gains) in *p, *len. */
static int stream_step(tn_detok_stream *s, int32_t id, const char **p, size_t *len,
                       tn_error *err) {
    if (id < 0 || id >= s->tok->n_vocab)
        return tn_fail(err, TN_ERR_INVALID, "detokenize: token id %ld is outside the vocabulary",
                       (long)id);
    *p = piece_for(s->tok, id, s->flags, len);
    /* A control token that is not rendered leaves out its whole text. */
    s->dropped = s->tok->piece_off[id + 1] - s->tok->piece_off[id] - 1 - *len;
    if (!*len)
        return TN_OK;
    const size_t drop = leading_drop(s->tok, s->flags, s->started, *p, *len);
    s->dropped += drop;
    *p += drop;
    *len -= drop;
    s->started = true;
    return TN_OK;
}

int tn_detok_stream_skip(tn_detok_stream *s, int32_t id, tn_error *err) {
    if (!s || !s->tok)
        return tn_fail(err, TN_ERR_INVALID, "detokenize: stream not initialized");
    const char *p = NULL;
    size_t len = 0;
    return stream_step(s, id, &p, &len, err);
}

int tn_detok_stream_push(tn_detok_stream *s, int32_t id, tn_buf *out, tn_error *err) {
    if (!s || !s->tok || !out)
        return tn_fail(err, TN_ERR_INVALID, "detokenize: stream not initialized");
    const char *p = NULL;
    size_t len = 0;
    int rc = stream_step(s, id, &p, &len, err);
    if (rc != TN_OK || !len)
        return rc;
    size_t len0 = out->len;
    if (stream_feed(s, p, len, out)) {
        out->len = len0;
        return tn_fail(err, TN_ERR_NOMEM, "detokenize: out of memory");
    }
    return TN_OK;
}

int tn_detok_stream_flush(tn_detok_stream *s, tn_buf *out, tn_error *err) {
    if (!s || !out)
        return tn_fail(err, TN_ERR_INVALID, "detokenize: stream not initialized");
    if (s->n_pending) {
        s->n_pending = 0;
        if (tn_buf_append(out, replacement_char, 3))
            return tn_fail(err, TN_ERR_NOMEM, "detokenize: out of memory");
    }
    return TN_OK;
}
