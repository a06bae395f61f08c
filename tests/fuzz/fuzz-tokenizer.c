/* libFuzzer target for the tokenizers, the detokenizer stream and the JSON
 * reader. Needs no vocabulary files and no network: small synthetic
 * vocabularies (one SentencePiece-style, with and without the prepended
 * "▁", and byte-level ones with the GPT-2 and Qwen2 split expressions) are
 * written to a temporary GGUF once and loaded back.
 *
 * The first input byte picks what runs, the rest is the text:
 *   mode % 8 = 0..3: encode with vocabulary (mode % 4), then decode and
 *                    check the promises: ids inside the vocabulary, the
 *                    bytes come back (byte fallback / byte-level are
 *                    lossless), the stream emits valid UTF-8 equal to the
 *                    decode whenever that is valid UTF-8;
 *   mode % 8 = 4..6: the text read as token ids (2 bytes each) for
 *                    vocabulary (mode % 4): decode and stream, no crash,
 *                    valid UTF-8 from the stream;
 *   mode % 8 = 7:    the text parsed as JSON.
 * Bit 3 of the mode byte turns on TN_TOKENIZE_SPECIAL.
 *
 * Seeds: tests/fuzz/corpus/tokenizer/.
 * Run:   build-fuzz/tests/fuzz/fuzz-tokenizer tests/fuzz/corpus/tokenizer
 */
#include "tern.h"
#include "tn-json.h"
#include "tn-tokenizer-internal.h"
#include "tn-unicode.h"
#include "fuzz-promise.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { V_SPM, V_SPM_NOPREFIX, V_GPT2, V_QWEN2, N_VOCABS };
static tn_gguf *ggufs[N_VOCABS];
static tn_tokenizer *toks[N_VOCABS];

/* ----------------------------------------------------- vocab builders */

typedef struct vb {
    char *tok[1024];
    float score[1024];
    int32_t type[1024];
    int n;
} vb;

static int add(vb *v, const char *text, int type, float score) {
    v->tok[v->n] = strdup(text);
    v->type[v->n] = type;
    v->score[v->n] = score;
    return v->n++;
}

static void vb_free(vb *v) {
    for (int i = 0; i < v->n; i++)
        free(v->tok[i]);
}

static void write_and_load(tn_gguf_writer *w, int which) {
    char path[] = "/tmp/tern-fuzz-vocab-XXXXXX";
    int fd = mkstemp(path);
    PROMISE(fd >= 0);
    close(fd);
    tn_error err;
    PROMISE(tn_gguf_writer_write(w, path, &err) == TN_OK);
    PROMISE(tn_gguf_open(path, &ggufs[which], &err) == TN_OK);
    unlink(path);
    if (tn_tokenizer_load(ggufs[which], &toks[which], &err) != TN_OK) {
        fprintf(stderr, "fuzz-tokenizer: %s\n", err.message);
        __builtin_trap();
    }
}

static void build_spm(int which, bool prefix) {
    static const char *pieces[] = {
        "\xE2\x96\x81", "a", "b", "c", "d", "e", "h", "i", "n", "o", "r", "s", "t", "x", "<", ">",
        "\xC3\xA9", "\xE6\x97\xA5", "\xE2\x96\x81t", "he", "\xE2\x96\x81the", "in",
        "\xE2\x96\x81" "a", "an", "\xE2\x96\x81" "an", "er", "on", "\xE2\x96\x81\xE2\x96\x81",
        "\xE2\x96\x81\xE2\x96\x81\xE2\x96\x81\xE2\x96\x81", "ab", "abab", "xx", "xxxx", "st",
        "\xE2\x96\x81st", "ion", "tion", ">\xE2\x96\x81<", "\xC3\xA9t", "\xE6\x97\xA5\xE6\x97\xA5",
    };
    vb v = {0};
    add(&v, "<unk>", TN_TOKEN_TYPE_UNKNOWN, 0);
    add(&v, "<s>", TN_TOKEN_TYPE_CONTROL, 0);
    add(&v, "</s>", TN_TOKEN_TYPE_CONTROL, 0);
    add(&v, "<start_of_turn>", TN_TOKEN_TYPE_CONTROL, 0);
    add(&v, "<end_of_turn>", TN_TOKEN_TYPE_CONTROL, 0);
    add(&v, "\n\n", TN_TOKEN_TYPE_USER_DEFINED, -1e9f);
    add(&v, "<think>", TN_TOKEN_TYPE_USER_DEFINED, -1e9f);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        add(&v, name, TN_TOKEN_TYPE_BYTE, -1e9f);
    }
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        add(&v, pieces[i], TN_TOKEN_TYPE_NORMAL, -(float)i);
    tn_gguf_writer *w = tn_gguf_writer_new();
    tn_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    tn_gguf_writer_set_str(w, "tokenizer.ggml.pre", "default");
    tn_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, v.n);
    tn_gguf_writer_set_arr(w, "tokenizer.ggml.scores", TN_GGUF_F32, v.score, v.n);
    tn_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TN_GGUF_I32, v.type, v.n);
    tn_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    tn_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    tn_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (!prefix)
        tn_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
    write_and_load(w, which);
    tn_gguf_writer_free(w);
    vb_free(&v);
}

static void build_bpe(int which, const char *pre) {
    /* Merges over the mapped characters ("Ġ" is the space). */
    static const char *merges[] = {
        "\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "a n", "e r", "\xC4\xA0 a", "o n",
        "\xC4\xA0 \xC4\xA0", "\xC4\xA0\xC4\xA0 \xC4\xA0\xC4\xA0", "1 2", "12 3", "a b", "ab ab",
        "x x", "xx xx", "\xC3\x83 \xC2\xA9", "' s", "\xC4\x8A \xC4\x8A",
    };
    vb v = {0};
    for (int b = 0; b < 256; b++) {
        char c[5] = {0};
        tn_utf8_encode(tn_gpt2_byte_to_cp((unsigned char)b), c);
        add(&v, c, TN_TOKEN_TYPE_NORMAL, 0);
    }
    const char *ms[sizeof merges / sizeof merges[0]];
    for (size_t i = 0; i < sizeof merges / sizeof merges[0]; i++) {
        char joined[64];
        const char *sp = strchr(merges[i], ' ');
        snprintf(joined, sizeof joined, "%.*s%s", (int)(sp - merges[i]), merges[i], sp + 1);
        add(&v, joined, TN_TOKEN_TYPE_NORMAL, 0);
        ms[i] = merges[i];
    }
    int eot = add(&v, "<|endoftext|>", TN_TOKEN_TYPE_CONTROL, 0);
    add(&v, "<|im_start|>", TN_TOKEN_TYPE_CONTROL, 0);
    int im_end = add(&v, "<|im_end|>", TN_TOKEN_TYPE_CONTROL, 0);
    add(&v, "<think>", TN_TOKEN_TYPE_USER_DEFINED, 0);
    tn_gguf_writer *w = tn_gguf_writer_new();
    tn_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    tn_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    tn_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, v.n);
    tn_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TN_GGUF_I32, v.type, v.n);
    tn_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", ms, sizeof ms / sizeof ms[0]);
    tn_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)eot);
    tn_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)im_end);
    write_and_load(w, which);
    tn_gguf_writer_free(w);
    vb_free(&v);
}

static void init_once(void) {
    if (toks[0])
        return;
    build_spm(V_SPM, true);
    build_spm(V_SPM_NOPREFIX, false);
    build_bpe(V_GPT2, "gpt-2");
    build_bpe(V_QWEN2, "qwen2");
}

/* ------------------------------------------------------------ checks */

static void check_stream(const tn_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
                         const tn_buf *whole) {
    tn_detok_stream st;
    tn_detok_stream_init(&st, tok, flags);
    tn_buf out = {0};
    tn_error err;
    for (size_t i = 0; i < n; i++)
        PROMISE(tn_detok_stream_push(&st, ids[i], &out, &err) == TN_OK);
    PROMISE(tn_detok_stream_flush(&st, &out, &err) == TN_OK);
    PROMISE(tn_utf8_valid(out.data ? out.data : "", out.len));
    /* Valid UTF-8 comes through the stream unchanged. */
    if (whole && tn_utf8_valid(whole->data, whole->len))
        PROMISE(out.len == whole->len && (!out.len || !memcmp(out.data, whole->data, out.len)));
    tn_buf_free(&out);
}

/* Length of the Qwen2 vocabulary's added token at s, 0 if none: "<think>"
 * always, the control tokens only when special tokens are parsed. */
static size_t qwen2_added_at(const char *s, size_t left, bool special) {
    static const char *const control[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    if (left >= 7 && !memcmp(s, "<think>", 7))
        return 7;
    for (size_t i = 0; special && i < sizeof control / sizeof control[0]; i++) {
        size_t n = strlen(control[i]);
        if (left >= n && !memcmp(s, control[i], n))
            return n;
    }
    return 0;
}

static void append_nfc(const char *s, size_t n, tn_buf *out) {
    char *nfc;
    size_t nfc_len;
    PROMISE(tn_nfc(s, n, &nfc, &nfc_len) == TN_OK);
    PROMISE(tn_buf_append(out, nfc, nfc_len) == TN_OK);
    free(nfc);
}

/* What Qwen2's decode(encode(text)) must give: added tokens are taken out
 * before normalization (as in HF tokenizers), so NFC applies to the text
 * between them, never across one ("<think>" then U+0338 stays two
 * characters, where NFC of the whole would compose ">" + U+0338). */
static void nfc_between_added(const char *text, size_t len, bool special, tn_buf *out) {
    size_t seg = 0;
    for (size_t i = 0; i < len;) {
        size_t n = qwen2_added_at(text + i, len - i, special);
        if (n == 0) {
            i++;
            continue;
        }
        append_nfc(text + seg, i - seg, out);
        PROMISE(tn_buf_append(out, text + i, n) == TN_OK);
        i += n;
        seg = i;
    }
    append_nfc(text + seg, len - seg, out);
}

static void run_encode(int which, const char *text, size_t len, unsigned flags) {
    const tn_tokenizer *tok = toks[which];
    tn_tokens ids = {0};
    tn_error err;
    PROMISE(tn_tokenize(tok, text, len, flags, &ids, &err) == TN_OK);
    int32_t n_vocab = tn_tokenizer_n_vocab(tok);
    for (size_t i = 0; i < ids.n; i++)
        PROMISE(ids.ids[i] >= 0 && ids.ids[i] < n_vocab);
    PROMISE(len == 0 || ids.n > 0);

    tn_buf dec = {0};
    PROMISE(tn_detokenize(tok, ids.ids, ids.n, TN_DETOKENIZE_SPECIAL, &dec, &err) == TN_OK);
    /* Lossless: byte fallback and byte-level keep every byte, except
     * where a normalization is part of the tokenizer ("▁" is a space for
     * SentencePiece; Qwen2 normalizes to NFC). The leading space rule of
     * prefix vocabularies applies after a leading control token too. */
    bool has_meta = memmem(text, len, "\xE2\x96\x81", 3) != NULL;
    /* With the prepended "▁", each text segment after an added token gets
     * one too: lossless only without added tokens in the text. */
    bool has_added = memmem(text, len, "\n\n", 2) || memmem(text, len, "<think>", 7) ||
                     ((flags & TN_TOKENIZE_SPECIAL) &&
                      (memmem(text, len, "<s>", 3) || memmem(text, len, "</s>", 4) ||
                       memmem(text, len, "<unk>", 5) || memmem(text, len, "_of_turn>", 9)));
    if (which == V_GPT2 || (which == V_SPM_NOPREFIX && !has_meta)) {
        PROMISE(dec.len == len && (!len || !memcmp(dec.data, text, len)));
    } else if (which == V_SPM && !has_meta && !has_added) {
        PROMISE(dec.len == len && (!len || !memcmp(dec.data, text, len)));
    } else if (which == V_QWEN2) {
        tn_buf want = {0};
        nfc_between_added(text, len, (flags & TN_TOKENIZE_SPECIAL) != 0, &want);
        PROMISE(dec.len == want.len && (!want.len || !memcmp(dec.data, want.data, want.len)));
        tn_buf_free(&want);
    }
    check_stream(tok, ids.ids, ids.n, TN_DETOKENIZE_SPECIAL, &dec);
    tn_buf_free(&dec);
    tn_tokens_free(&ids);
}

static void run_decode(int which, const uint8_t *data, size_t len) {
    const tn_tokenizer *tok = toks[which];
    int32_t n_vocab = tn_tokenizer_n_vocab(tok);
    size_t n = len / 2;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    for (size_t i = 0; i < n; i++)
        ids[i] = (int32_t)((data[2 * i] | (data[2 * i + 1] << 8)) % (unsigned)n_vocab);
    tn_buf dec = {0};
    tn_error err;
    PROMISE(tn_detokenize(tok, ids, n, 0, &dec, &err) == TN_OK);
    check_stream(tok, ids, n, 0, &dec);
    tn_buf_free(&dec);
    /* An id outside the vocabulary is refused, nothing appended. */
    if (n) {
        ids[0] = n_vocab + (int32_t)data[0];
        tn_buf bad = {0};
        PROMISE(tn_detokenize(tok, ids, n, 0, &bad, &err) == TN_ERR_INVALID && bad.len == 0);
        tn_buf_free(&bad);
    }
    free(ids);
}

static void run_json(const uint8_t *data, size_t len) {
    tn_json_doc *doc = NULL;
    tn_error err;
    int rc = tn_json_parse((const char *)data, len, "fuzz.json", &doc, &err);
    PROMISE((rc == TN_OK) == (doc != NULL));
    PROMISE(rc == TN_OK || rc == TN_ERR_FORMAT);
    if (doc) {
        /* Walk it: strings are NUL-terminated at their length. */
        const tn_json *stack[64];
        int sp = 0;
        stack[sp++] = tn_json_root(doc);
        while (sp) {
            const tn_json *v = stack[--sp];
            if (v->type == TN_JSON_STRING)
                PROMISE(v->v.str[v->n] == '\0' && tn_utf8_valid(v->v.str, v->n));
            if (v->key)
                PROMISE(v->key[v->key_len] == '\0');
            for (size_t i = 0; i < tn_json_count(v) && sp < 64; i++)
                stack[sp++] = tn_json_at(v, i);
        }
    }
    tn_json_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_once();
    if (size == 0)
        return 0;
    unsigned mode = data[0];
    const uint8_t *text = data + 1;
    size_t len = size - 1;
    unsigned what = mode % 8;
    if (what < 4)
        run_encode((int)what, (const char *)text, len, (mode & 8) ? TN_TOKENIZE_SPECIAL : 0);
    else if (what < 7)
        run_decode((int)(mode % 4), text, len);
    else
        run_json(text, len);
    return 0;
}
