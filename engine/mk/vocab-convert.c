/* Hugging Face tokenizer -> GGUF tokenizer metadata.
 *
 * Writes the keys GGUF files of each family carry (as llama.cpp's
 * convert_hf_to_gguf.py writes them):
 *   SentencePiece-style BPE (Llama 2 / Mistral, Gemma 3): model "llama",
 *     pre "default", tokens, scores, token_type, special ids, add_bos/eos,
 *     add_space_prefix = false where no "▁" is prepended (Gemma);
 *   byte-level BPE (GPT-2, Llama 3, Qwen2/3): model "gpt2", pre "gpt-2" /
 *     "llama-bpe" / "qwen2", tokens, token_type, merges, special ids.
 *
 * The tokenizer.json files of SentencePiece models are BPE models with a
 * merge list (converted from the SentencePiece model), without the original
 * scores. The GGUF "llama" tokenizer merges by score instead: the adjacent
 * pair whose concatenation is the highest-scoring token goes first. Giving
 * each token the score -(rank of the first merge that creates it) makes the
 * two agree: for these vocabularies every way of splitting a merged token
 * into two tokens is itself in the merge list (the SentencePiece converter
 * emits them all), so "some pair concatenates to T" and "a listed merge
 * produces T" are the same event, and the order of events is the merge
 * order. Tokens no merge creates (single characters, bytes, added tokens)
 * score below every merge. test-tokenizer checks the result against the
 * reference ids.
 */
#include "tern.h"
#include "tn-internal.h"
#include "tn-json.h"
#include "tn-tokenizer-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Ids beyond this are refused: no real vocabulary comes close, and a
 * hostile file must not make us allocate gigabytes. */
#define MAX_VOCAB (1 << 24)
#define SCORE_NOT_MERGED (-1e9f)

typedef struct conv {
    const char *path;     /* for messages */
    tn_error *err;

    int64_t n;            /* vocabulary size: highest id + 1 */
    const char **tokens;  /* [n] borrowed from the JSON documents or owned_strs */
    int32_t *types;       /* [n] */
    float *scores;        /* [n], SentencePiece style only */
    bool *is_added;       /* [n] */
    bool *is_special;     /* [n] added token marked special */

    char **owned_strs;    /* strings we built ("[PAD12]", joined merges) */
    size_t n_owned, cap_owned;

    tn_strmap by_text;    /* token text -> id */
} conv;

static void conv_free(conv *c) {
    free(c->tokens);
    free(c->types);
    free(c->scores);
    free(c->is_added);
    free(c->is_special);
    for (size_t i = 0; i < c->n_owned; i++)
        free(c->owned_strs[i]);
    free(c->owned_strs);
    tn_strmap_free(&c->by_text);
}

static char *conv_own(conv *c, char *s) {
    if (!s)
        return NULL;
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? c->cap_owned * 2 : 64;
        char **a = realloc(c->owned_strs, cap * sizeof *a);
        if (!a) {
            free(s);
            return NULL;
        }
        c->owned_strs = a;
        c->cap_owned = cap;
    }
    c->owned_strs[c->n_owned++] = s;
    return s;
}

static int nomem(conv *c) {
    return tn_fail(c->err, TN_ERR_NOMEM, "%s: out of memory converting the tokenizer", c->path);
}

static int conv_alloc(conv *c, int64_t n, bool with_scores) {
    c->n = n;
    c->tokens = calloc((size_t)n, sizeof *c->tokens);
    c->types = calloc((size_t)n, sizeof *c->types);
    c->is_added = calloc((size_t)n, sizeof *c->is_added);
    c->is_special = calloc((size_t)n, sizeof *c->is_special);
    if (with_scores)
        c->scores = calloc((size_t)n, sizeof *c->scores);
    if (!c->tokens || !c->types || !c->is_added || !c->is_special || (with_scores && !c->scores))
        return nomem(c);
    if (!tn_strmap_init(&c->by_text, (size_t)n))
        return nomem(c);
    return TN_OK;
}

/* Holes in the id range become "[PADn]", as llama.cpp's converter names
 * them, typed unused. */
static int fill_holes(conv *c) {
    for (int64_t i = 0; i < c->n; i++) {
        if (c->tokens[i])
            continue;
        char buf[32];
        snprintf(buf, sizeof buf, "[PAD%lld]", (long long)i);
        char *s = conv_own(c, strdup(buf));
        if (!s)
            return nomem(c);
        c->tokens[i] = s;
        c->types[i] = TN_TOKEN_TYPE_UNUSED;
        if (c->scores)
            c->scores[i] = SCORE_NOT_MERGED;
    }
    return TN_OK;
}

/* llama.cpp's converter treats some added tokens that are not flagged
 * special as control tokens anyway; do the same so GGUF readers agree. */
static bool looks_special(const char *s) {
    size_t n = strlen(s);
    if (!strcmp(s, "<pad>") || !strcmp(s, "<mask>") || !strcmp(s, "<2mass>") ||
        !strcmp(s, "[@BOS@]"))
        return true;
    if (n >= 4 && !strncmp(s, "<|", 2) && !strcmp(s + n - 2, "|>"))
        return true;
    /* fullwidth bars: "<｜" ... "｜>" (DeepSeek) */
    if (n >= 8 && !strncmp(s, "<\xEF\xBD\x9C", 4) && !strcmp(s + n - 4, "\xEF\xBD\x9C>"))
        return true;
    if (n >= 8 && !strncmp(s, "<unused", 7) && s[n - 1] == '>')
        return true;
    return false;
}

static bool is_byte_token(const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && strchr(hex, s[3]) && strchr(hex, s[4]) &&
           s[5] == '>';
}

static int check_text(conv *c, const tn_json *v, const char *what) {
    if (!tn_json_is(v, TN_JSON_STRING))
        return tn_fail(c->err, TN_ERR_FORMAT, "%s: %s is not a string", c->path, what);
    if (memchr(v->v.str, '\0', v->n))
        return tn_fail(c->err, TN_ERR_UNSUPPORTED, "%s: %s contains a NUL character", c->path,
                       what);
    return TN_OK;
}

/* ----------------------------------------------------------------- files */

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* dir + "/" + name, malloc'd. */
static char *join_path(const char *dir, size_t dir_len, const char *name) {
    size_t n = strlen(name);
    char *s = malloc(dir_len + 1 + n + 1);
    if (!s)
        return NULL;
    memcpy(s, dir, dir_len);
    s[dir_len] = '/';
    memcpy(s + dir_len + 1, name, n + 1);
    return s;
}

static size_t dir_len_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) : 0;
}

static char *sibling(const char *path, const char *name) {
    size_t dl = dir_len_of(path);
    if (dl == 0 && path[0] != '/')
        return join_path(".", 1, name);
    return join_path(path, dl ? dl : 1, name);
}

/* A chat template (.jinja) or vocab.bpe beside the tokenizer: through
 * tn_read_file, so a FIFO or a device there is refused instead of read. */
static int read_text_file(const char *path, char **out, size_t *out_len, tn_error *err) {
    return tn_read_file(path, (uint64_t)1 << 31, out, out_len, err);
}

/* ---------------------------------------------------- common metadata */

/* The number of token rows: the ids the tokenizer uses (used), padded up to
 * the model's vocab_size when a config.json beside the tokenizer gives one,
 * or to `want` (mkmodel's --vocab-size) when larger. llama.cpp's converter
 * pads the same way ("[PADn]", unused: fill_holes), which is how gpt-oss's
 * 200,019 tokens become the published file's 201,088 rows. */
static int padded_size(conv *c, const char *path, int64_t used, int64_t want, int64_t *out) {
    int64_t n = used > want ? used : want;
    char *cfg_path = sibling(path, "config.json");
    if (!cfg_path)
        return nomem(c);
    int rc = TN_OK;
    if (is_file(cfg_path)) {
        tn_json_doc *doc = NULL;
        if ((rc = tn_json_parse_file(cfg_path, &doc, c->err)) == TN_OK) {
            const tn_json *v = tn_json_get(tn_json_root(doc), "vocab_size");
            int64_t size;
            if (v && !tn_json_int(v, &size))
                rc = tn_fail(c->err, TN_ERR_FORMAT, "%s: vocab_size is not an integer", cfg_path);
            else if (v && size > n)
                n = size;
        }
        tn_json_free(doc);
    }
    free(cfg_path);
    if (rc == TN_OK && n >= MAX_VOCAB)
        rc = tn_fail(c->err, TN_ERR_FORMAT, "%s: %lld token rows; Tern takes at most %d", path,
                     (long long)n, MAX_VOCAB - 1);
    *out = n;
    return rc;
}

static const char *special_content(const tn_json *v) {
    /* A plain string, or an AddedToken object {"content": ..., ...}. */
    if (tn_json_is(v, TN_JSON_STRING))
        return tn_json_str(v);
    return tn_json_str(tn_json_get(v, "content"));
}

static int32_t find_token(conv *c, const char *text) {
    if (!text)
        return -1;
    return tn_strmap_get(&c->by_text, text, strlen(text));
}

typedef struct special_ids {
    int32_t bos, eos, unk, sep, pad, cls, mask;
} special_ids;

static int write_special_ids(conv *c, tn_gguf_writer *w, const special_ids *s) {
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(special_ids, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(special_ids, eos)},
        {"tokenizer.ggml.unknown_token_id", offsetof(special_ids, unk)},
        /* sic: the key GGUF files use is spelled this way */
        {"tokenizer.ggml.seperator_token_id", offsetof(special_ids, sep)},
        {"tokenizer.ggml.padding_token_id", offsetof(special_ids, pad)},
        {"tokenizer.ggml.cls_token_id", offsetof(special_ids, cls)},
        {"tokenizer.ggml.mask_token_id", offsetof(special_ids, mask)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int32_t id;
        memcpy(&id, (const char *)s + keys[i].off, sizeof id);
        if (id >= 0 && id < c->n) {
            int rc = tn_gguf_writer_set_u32(w, keys[i].key, (uint32_t)id);
            if (rc)
                return tn_fail(c->err, rc, "%s: cannot add %s", c->path, keys[i].key);
        }
    }
    return TN_OK;
}

/* tokenizer_config.json's chat_template: a string, or a list of
 * {"name", "template"} where "default" is the main one. A
 * chat_template.jinja file beside it (newer Hugging Face layout) is used
 * when the config has none. */
static int write_chat_template(conv *c, tn_gguf_writer *w, const tn_json *config,
                               const char *tokenizer_path) {
    const tn_json *t = tn_json_get(config, "chat_template");
    int rc = TN_OK;
    if (tn_json_is(t, TN_JSON_STRING)) {
        rc = tn_gguf_writer_set_strn(w, "tokenizer.chat_template", t->v.str, t->n);
    } else if (tn_json_is(t, TN_JSON_ARRAY)) {
        for (size_t i = 0; i < tn_json_count(t) && !rc; i++) {
            const tn_json *e = tn_json_at(t, i);
            const char *name = tn_json_str(tn_json_get(e, "name"));
            const tn_json *tmpl = tn_json_get(e, "template");
            if (!name || !tn_json_is(tmpl, TN_JSON_STRING))
                continue;
            if (!strcmp(name, "default")) {
                rc = tn_gguf_writer_set_strn(w, "tokenizer.chat_template", tmpl->v.str, tmpl->n);
            } else {
                char key[256];
                if ((size_t)snprintf(key, sizeof key, "tokenizer.chat_template.%s", name) >=
                    sizeof key)
                    continue;
                rc = tn_gguf_writer_set_strn(w, key, tmpl->v.str, tmpl->n);
            }
        }
    } else if (tokenizer_path) {
        char *jinja = sibling(tokenizer_path, "chat_template.jinja");
        if (!jinja)
            return nomem(c);
        if (is_file(jinja)) {
            char *text;
            size_t len;
            rc = read_text_file(jinja, &text, &len, c->err);
            if (!rc) {
                rc = tn_gguf_writer_set_strn(w, "tokenizer.chat_template", text, len);
                free(text);
            }
            free(jinja);
            return rc;
        }
        free(jinja);
    }
    if (rc)
        return tn_fail(c->err, rc, "%s: cannot add the chat template", c->path);
    return TN_OK;
}

static int write_tokens(conv *c, tn_gguf_writer *w) {
    int rc = tn_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", c->tokens, (uint64_t)c->n);
    if (!rc && c->scores)
        rc = tn_gguf_writer_set_arr(w, "tokenizer.ggml.scores", TN_GGUF_F32, c->scores,
                                    (uint64_t)c->n);
    if (!rc)
        rc = tn_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TN_GGUF_I32, c->types,
                                    (uint64_t)c->n);
    if (rc)
        return tn_fail(c->err, rc, "%s: cannot add the token list", c->path);
    return TN_OK;
}

/* ------------------------------------------------ tokenizer.json parts */

typedef enum family { FAMILY_SPM, FAMILY_BYTE_LEVEL } family;

static bool json_str_eq(const tn_json *v, const char *s) {
    const char *t = tn_json_str(v);
    return t && !strcmp(t, s);
}

/* Visits a normalizer / pre-tokenizer / decoder and its "Sequence"
 * children. */
typedef struct component_scan {
    bool byte_level;        /* a ByteLevel component */
    bool byte_level_regex;  /* ByteLevel with use_regex (the GPT-2 expression) */
    bool byte_fallback;     /* ByteFallback decoder */
    bool metaspace;         /* spaces become "▁" (Replace or Metaspace) */
    bool prepend_space;     /* "▁" prepended (Prepend normalizer or Metaspace) */
    bool nfc;
    const char *split_regex;/* a Split pre-tokenizer's regular expression */
    const char *unsupported;/* a component Tern does not implement */
} component_scan;

static void scan_component(const tn_json *v, component_scan *s, int depth) {
    if (!v || depth > 8 || tn_json_is(v, TN_JSON_NULL))
        return;
    const char *type = tn_json_str(tn_json_get(v, "type"));
    if (!type)
        return;
    if (!strcmp(type, "Sequence")) {
        const tn_json *kids = tn_json_get(v, "normalizers");
        if (!kids)
            kids = tn_json_get(v, "pretokenizers");
        if (!kids)
            kids = tn_json_get(v, "decoders");
        for (size_t i = 0; i < tn_json_count(kids); i++)
            scan_component(tn_json_at(kids, i), s, depth + 1);
    } else if (!strcmp(type, "ByteLevel")) {
        s->byte_level = true;
        /* use_regex defaults to true in Hugging Face tokenizers */
        if (tn_json_bool(tn_json_get(v, "use_regex"), true))
            s->byte_level_regex = true;
    } else if (!strcmp(type, "ByteFallback")) {
        s->byte_fallback = true;
    } else if (!strcmp(type, "Metaspace")) {
        s->metaspace = true;
        const char *scheme = tn_json_str(tn_json_get(v, "prepend_scheme"));
        if (scheme ? strcmp(scheme, "never") != 0
                   : tn_json_bool(tn_json_get(v, "add_prefix_space"), true))
            s->prepend_space = true;
    } else if (!strcmp(type, "Prepend")) {
        if (json_str_eq(tn_json_get(v, "prepend"), "\xE2\x96\x81"))
            s->prepend_space = true;
    } else if (!strcmp(type, "Replace")) {
        if (json_str_eq(tn_json_get(tn_json_get(v, "pattern"), "String"), " ") &&
            json_str_eq(tn_json_get(v, "content"), "\xE2\x96\x81"))
            s->metaspace = true;
    } else if (!strcmp(type, "NFC")) {
        s->nfc = true;
    } else if (!strcmp(type, "Split")) {
        const char *re = tn_json_str(tn_json_get(tn_json_get(v, "pattern"), "Regex"));
        const char *lit = tn_json_str(tn_json_get(tn_json_get(v, "pattern"), "String"));
        if (re)
            s->split_regex = re;
        else if (!lit || strcmp(lit, " ") != 0)
            s->unsupported = "Split";
        /* Splitting on " " after spaces became "▁" (Gemma) has no effect. */
    } else if (!strcmp(type, "Replace") || !strcmp(type, "Fuse") || !strcmp(type, "Strip") ||
               !strcmp(type, "BPEDecoder")) {
        /* decoders whose effect the GGUF tokenizer reproduces by itself */
    } else if (!strcmp(type, "NFKC") || !strcmp(type, "NFKD") || !strcmp(type, "NFD") ||
               !strcmp(type, "Lowercase") || !strcmp(type, "BertNormalizer") ||
               !strcmp(type, "Whitespace") || !strcmp(type, "WhitespaceSplit") ||
               !strcmp(type, "Digits") || !strcmp(type, "Punctuation") ||
               !strcmp(type, "BertPreTokenizer")) {
        s->unsupported = type;
    }
}

/* add_bos/add_eos from a TemplateProcessing post-processor, for configs
 * that do not say. */
static void template_adds(const tn_json *post, int *add_bos, int *add_eos) {
    const tn_json *single = NULL;
    const char *type = tn_json_str(tn_json_get(post, "type"));
    if (type && !strcmp(type, "TemplateProcessing")) {
        single = tn_json_get(post, "single");
    } else if (type && !strcmp(type, "Sequence")) {
        const tn_json *procs = tn_json_get(post, "processors");
        for (size_t i = 0; i < tn_json_count(procs) && !single; i++) {
            const tn_json *p = tn_json_at(procs, i);
            if (json_str_eq(tn_json_get(p, "type"), "TemplateProcessing"))
                single = tn_json_get(p, "single");
        }
    }
    size_t n = tn_json_count(single);
    if (!n)
        return;
    *add_bos = tn_json_get(tn_json_at(single, 0), "SpecialToken") != NULL;
    *add_eos = tn_json_get(tn_json_at(single, n - 1), "SpecialToken") != NULL;
}

/* merges: ["a b", ...] (older files) or [["a", "b"], ...]. Sets *a, *b
 * (borrowed or, for the string form, pointing into *scratch). */
static int merge_parts(conv *c, const tn_json *m, size_t index, char **scratch, size_t *scratch_cap,
                       const char **a, size_t *a_len, const char **b, size_t *b_len) {
    if (tn_json_is(m, TN_JSON_STRING)) {
        const char *s = m->v.str;
        const char *sp = memchr(s, ' ', m->n);
        /* A token may start with a space in the string form only if it is
         * the first part: split at the first space after position 0. */
        if (sp == s)
            sp = memchr(s + 1, ' ', m->n - 1);
        if (!sp || sp == s + m->n - 1)
            return tn_fail(c->err, TN_ERR_FORMAT, "%s: merge %zu (\"%.40s\") is not two tokens",
                           c->path, index, s);
        if ((size_t)m->n + 1 > *scratch_cap) {
            size_t cap = (size_t)m->n + 64;
            char *ns = realloc(*scratch, cap);
            if (!ns)
                return nomem(c);
            *scratch = ns;
            *scratch_cap = cap;
        }
        memcpy(*scratch, s, m->n + 1);
        size_t cut = (size_t)(sp - s);
        (*scratch)[cut] = '\0';
        *a = *scratch;
        *a_len = cut;
        *b = *scratch + cut + 1;
        *b_len = m->n - cut - 1;
        return TN_OK;
    }
    if (tn_json_count(m) == 2 && tn_json_is(tn_json_at(m, 0), TN_JSON_STRING) &&
        tn_json_is(tn_json_at(m, 1), TN_JSON_STRING)) {
        *a = tn_json_at(m, 0)->v.str;
        *a_len = tn_json_at(m, 0)->n;
        *b = tn_json_at(m, 1)->v.str;
        *b_len = tn_json_at(m, 1)->n;
        return TN_OK;
    }
    return tn_fail(c->err, TN_ERR_FORMAT, "%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]",
                   c->path, index);
}

/* SentencePiece style: score = -(rank of the first merge creating it). */
static int derive_scores(conv *c, const tn_json *merges) {
    for (int64_t i = 0; i < c->n; i++)
        c->scores[i] = SCORE_NOT_MERGED;
    char *scratch = NULL, *joined = NULL;
    size_t scratch_cap = 0, joined_cap = 0;
    int rc = TN_OK;
    size_t n = tn_json_count(merges);
    for (size_t r = 0; r < n && !rc; r++) {
        const char *a, *b;
        size_t al, bl;
        rc = merge_parts(c, tn_json_at(merges, r), r, &scratch, &scratch_cap, &a, &al, &b, &bl);
        if (rc)
            break;
        if (al + bl + 1 > joined_cap) {
            joined_cap = al + bl + 64;
            char *nj = realloc(joined, joined_cap);
            if (!nj) {
                rc = nomem(c);
                break;
            }
            joined = nj;
        }
        memcpy(joined, a, al);
        memcpy(joined + al, b, bl);
        int32_t id = tn_strmap_get(&c->by_text, joined, al + bl);
        if (id < 0) {
            rc = tn_fail(c->err, TN_ERR_FORMAT,
                         "%s: merge %zu (\"%s\" + \"%s\") makes a token that is not in the "
                         "vocabulary",
                         c->path, r, a, b);
            break;
        }
        if (c->scores[id] == SCORE_NOT_MERGED)
            c->scores[id] = -(float)r;
    }
    free(scratch);
    free(joined);
    return rc;
}

static int write_merges(conv *c, tn_gguf_writer *w, const tn_json *merges) {
    size_t n = tn_json_count(merges);
    char **strs = calloc(n ? n : 1, sizeof *strs);
    if (!strs)
        return nomem(c);
    char *scratch = NULL;
    size_t scratch_cap = 0;
    int rc = TN_OK;
    for (size_t r = 0; r < n && !rc; r++) {
        const char *a, *b;
        size_t al, bl;
        rc = merge_parts(c, tn_json_at(merges, r), r, &scratch, &scratch_cap, &a, &al, &b, &bl);
        if (rc)
            break;
        if (memchr(a, ' ', al) || memchr(b, ' ', bl) || memchr(a, '\0', al) ||
            memchr(b, '\0', bl)) {
            rc = tn_fail(c->err, TN_ERR_UNSUPPORTED,
                         "%s: merge %zu has a token with a space or NUL in it, which the GGUF "
                         "merge list cannot hold",
                         c->path, r);
            break;
        }
        /* What the loader (tokenizer.c) requires of each merge, refused
         * here rather than when the converted model is opened; Hugging
         * Face's own reader refuses such a file too. */
        if (al == 0 || bl == 0) {
            rc = tn_fail(c->err, TN_ERR_FORMAT, "%s: merge %zu has an empty token", c->path, r);
            break;
        }
        strs[r] = malloc(al + bl + 2);
        if (!strs[r]) {
            rc = nomem(c);
            break;
        }
        /* First the two joined (the token the merge makes), then "a b". */
        memcpy(strs[r], a, al);
        memcpy(strs[r] + al, b, bl);
        if (tn_strmap_get(&c->by_text, a, al) < 0 || tn_strmap_get(&c->by_text, b, bl) < 0 ||
            tn_strmap_get(&c->by_text, strs[r], al + bl) < 0) {
            rc = tn_fail(c->err, TN_ERR_FORMAT,
                         "%s: merge %zu (\"%.40s\" + \"%.40s\") names a token that is not in "
                         "the vocabulary",
                         c->path, r, a, b);
            break;
        }
        memmove(strs[r] + al + 1, strs[r] + al, bl);
        strs[r][al] = ' ';
        strs[r][al + 1 + bl] = '\0';
    }
    if (!rc) {
        rc = tn_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)strs,
                                        (uint64_t)n);
        if (rc)
            rc = tn_fail(c->err, rc, "%s: cannot add the merge list", c->path);
    }
    for (size_t r = 0; r < n; r++)
        free(strs[r]);
    free(strs);
    free(scratch);
    return rc;
}

static const char *pre_name_for(const component_scan *pre, conv *c, int *rc) {
    *rc = TN_OK;
    if (pre->split_regex) {
        if (!strcmp(pre->split_regex, tn_pretok_regex_qwen2))
            return "qwen2";
        if (!strcmp(pre->split_regex, tn_pretok_regex_llama3))
            return "llama-bpe";
        if (!strcmp(pre->split_regex, tn_pretok_regex_gpt2))
            return "gpt-2";
        if (!strcmp(pre->split_regex, tn_pretok_regex_gpt4o))
            return "gpt-4o";
        *rc = tn_fail(c->err, TN_ERR_UNSUPPORTED,
                      "%s: the pre-tokenizer's split expression is not one Tern knows "
                      "(GPT-2, Llama 3, Qwen2, GPT-4o): %.120s",
                      c->path, pre->split_regex);
        return NULL;
    }
    if (pre->byte_level_regex)
        return "gpt-2";
    *rc = tn_fail(c->err, TN_ERR_UNSUPPORTED,
                  "%s: byte-level tokenizer without a split expression Tern knows", c->path);
    return NULL;
}

static int convert_tokenizer_json(const char *path, int64_t vocab_size, tn_gguf_writer *w,
                                  int64_t *n_vocab, tn_error *err) {
    conv c = {.path = path, .err = err};
    tn_json_doc *doc = NULL, *cfg_doc = NULL;
    int rc = tn_json_parse_file(path, &doc, err);
    if (rc)
        return rc;

    /* tokenizer_config.json is optional: without it the tokens and merges
     * still convert, only the special ids and template are missing. */
    char *cfg_path = sibling(path, "tokenizer_config.json");
    if (!cfg_path) {
        rc = nomem(&c);
        goto out;
    }
    if (is_file(cfg_path) && (rc = tn_json_parse_file(cfg_path, &cfg_doc, err)))
        goto out;
    const tn_json *root = tn_json_root(doc);
    const tn_json *cfg = tn_json_root(cfg_doc);

    const tn_json *model = tn_json_get(root, "model");
    const char *model_type = tn_json_str(tn_json_get(model, "type"));
    const tn_json *vocab = tn_json_get(model, "vocab");
    const tn_json *merges = tn_json_get(model, "merges");
    if (!tn_json_is(root, TN_JSON_OBJECT) || !tn_json_is(model, TN_JSON_OBJECT)) {
        rc = tn_fail(err, TN_ERR_FORMAT, "%s: no \"model\" object: not a tokenizer.json", path);
        goto out;
    }
    if (!model_type) {
        /* Old files leave "type" out; a merge list means BPE. */
        model_type = merges ? "BPE" : "?";
    }
    if (strcmp(model_type, "BPE") != 0) {
        rc = tn_fail(err, TN_ERR_UNSUPPORTED,
                     "%s: tokenizer model \"%s\" is not supported (Tern reads BPE tokenizers)",
                     path, model_type);
        goto out;
    }
    if (!tn_json_is(vocab, TN_JSON_OBJECT) || !tn_json_is(merges, TN_JSON_ARRAY)) {
        rc = tn_fail(err, TN_ERR_FORMAT, "%s: the BPE model needs a \"vocab\" object and a "
                     "\"merges\" array", path);
        goto out;
    }

    component_scan norm = {0}, pre = {0}, dec = {0};
    scan_component(tn_json_get(root, "normalizer"), &norm, 0);
    scan_component(tn_json_get(root, "pre_tokenizer"), &pre, 0);
    scan_component(tn_json_get(root, "decoder"), &dec, 0);
    const char *unsupported = norm.unsupported ? norm.unsupported : pre.unsupported;
    if (unsupported) {
        rc = tn_fail(err, TN_ERR_UNSUPPORTED,
                     "%s: the tokenizer uses a \"%s\" step that Tern does not implement", path,
                     unsupported);
        goto out;
    }
    family fam;
    if (pre.byte_level || dec.byte_level) {
        fam = FAMILY_BYTE_LEVEL;
    } else if (norm.metaspace || pre.metaspace || dec.byte_fallback ||
               tn_json_bool(tn_json_get(model, "byte_fallback"), false)) {
        fam = FAMILY_SPM;
    } else {
        rc = tn_fail(err, TN_ERR_UNSUPPORTED,
                     "%s: neither a byte-level nor a SentencePiece-style BPE tokenizer", path);
        goto out;
    }
    if (fam == FAMILY_SPM && norm.nfc) {
        rc = tn_fail(err, TN_ERR_UNSUPPORTED,
                     "%s: NFC normalization in a SentencePiece-style tokenizer is not supported",
                     path);
        goto out;
    }
    const char *pre_name = "default";
    if (fam == FAMILY_BYTE_LEVEL && !(pre_name = pre_name_for(&pre, &c, &rc)))
        goto out;
    if (fam == FAMILY_BYTE_LEVEL && !strcmp(pre_name, "qwen2") && !norm.nfc) {
        /* Tern's qwen2 pre-tokenizer normalizes to NFC, as Qwen's
         * tokenizer.json asks; one without NFC would tokenize differently. */
        rc = tn_fail(err, TN_ERR_UNSUPPORTED,
                     "%s: Qwen2 split expression without NFC normalization is not supported",
                     path);
        goto out;
    }

    /* Vocabulary size: the highest id of the vocab and added tokens. */
    const tn_json *added = tn_json_get(root, "added_tokens");
    int64_t max_id = -1;
    for (size_t i = 0; i < tn_json_count(vocab); i++) {
        int64_t id;
        const tn_json *m = tn_json_at(vocab, i);
        if (!tn_json_int(m, &id) || id < 0 || id >= MAX_VOCAB) {
            rc = tn_fail(err, TN_ERR_FORMAT, "%s: vocab entry \"%.60s\" has no valid id", path,
                         m->key);
            goto out;
        }
        if (id > max_id)
            max_id = id;
    }
    for (size_t i = 0; i < tn_json_count(added); i++) {
        int64_t id;
        if (!tn_json_int(tn_json_get(tn_json_at(added, i), "id"), &id) || id < 0 ||
            id >= MAX_VOCAB) {
            rc = tn_fail(err, TN_ERR_FORMAT, "%s: added token %zu has no valid id", path, i);
            goto out;
        }
        if (id > max_id)
            max_id = id;
    }
    if (max_id < 0) {
        rc = tn_fail(err, TN_ERR_FORMAT, "%s: the vocabulary is empty", path);
        goto out;
    }
    if ((rc = padded_size(&c, path, max_id + 1, vocab_size, &vocab_size)))
        goto out;
    if ((rc = conv_alloc(&c, vocab_size, fam == FAMILY_SPM)))
        goto out;

    const char *unk_text = tn_json_str(tn_json_get(model, "unk_token"));
    for (size_t i = 0; i < tn_json_count(vocab); i++) {
        const tn_json *m = tn_json_at(vocab, i);
        int64_t id;
        tn_json_int(m, &id);
        if (memchr(m->key, '\0', m->key_len)) {
            rc = tn_fail(err, TN_ERR_UNSUPPORTED, "%s: token %lld contains a NUL character",
                         path, (long long)id);
            goto out;
        }
        if (c.tokens[id]) {
            rc = tn_fail(err, TN_ERR_FORMAT, "%s: tokens \"%.40s\" and \"%.40s\" share id %lld",
                         path, c.tokens[id], m->key, (long long)id);
            goto out;
        }
        c.tokens[id] = m->key;
        c.types[id] = TN_TOKEN_TYPE_NORMAL;
        if (fam == FAMILY_SPM && is_byte_token(m->key))
            c.types[id] = TN_TOKEN_TYPE_BYTE;
        if (unk_text && !strcmp(unk_text, m->key))
            c.types[id] = TN_TOKEN_TYPE_UNKNOWN;
        if (tn_strmap_put(&c.by_text, m->key, m->key_len, (int32_t)id) == INT32_MIN) {
            rc = nomem(&c);
            goto out;
        }
    }
    if (fam == FAMILY_SPM && (rc = derive_scores(&c, merges)))
        goto out;

    for (size_t i = 0; i < tn_json_count(added); i++) {
        const tn_json *a = tn_json_at(added, i);
        const tn_json *content = tn_json_get(a, "content");
        char what[64];
        snprintf(what, sizeof what, "added token %zu's content", i);
        if ((rc = check_text(&c, content, what)))
            goto out;
        int64_t id;
        tn_json_int(tn_json_get(a, "id"), &id);
        const char *text = content->v.str;
        bool special = tn_json_bool(tn_json_get(a, "special"), false);
        c.tokens[id] = text;
        c.is_added[id] = true;
        c.is_special[id] = special;
        if (unk_text && !strcmp(unk_text, text))
            c.types[id] = TN_TOKEN_TYPE_UNKNOWN;
        else if (special || looks_special(text))
            c.types[id] = TN_TOKEN_TYPE_CONTROL;
        else
            c.types[id] = TN_TOKEN_TYPE_USER_DEFINED;
        /* An added token beyond the base vocabulary is created by no merge. */
        if (c.scores && tn_strmap_get(&c.by_text, text, content->n) != id)
            c.scores[id] = SCORE_NOT_MERGED;
        if (tn_strmap_put(&c.by_text, text, content->n, (int32_t)id) == INT32_MIN) {
            rc = nomem(&c);
            goto out;
        }
    }
    if ((rc = fill_holes(&c)))
        goto out;

    /* Special ids, as llama.cpp's SpecialVocab finds them: the config's
     * *_token entries looked up by content. */
    special_ids ids = {-1, -1, -1, -1, -1, -1, -1};
    ids.bos = find_token(&c, special_content(tn_json_get(cfg, "bos_token")));
    ids.eos = find_token(&c, special_content(tn_json_get(cfg, "eos_token")));
    ids.unk = find_token(&c, special_content(tn_json_get(cfg, "unk_token")));
    ids.sep = find_token(&c, special_content(tn_json_get(cfg, "sep_token")));
    ids.pad = find_token(&c, special_content(tn_json_get(cfg, "pad_token")));
    ids.cls = find_token(&c, special_content(tn_json_get(cfg, "cls_token")));
    ids.mask = find_token(&c, special_content(tn_json_get(cfg, "mask_token")));
    if (ids.unk < 0 && unk_text)
        ids.unk = find_token(&c, unk_text);

    int add_bos = -1, add_eos = -1;
    template_adds(tn_json_get(root, "post_processor"), &add_bos, &add_eos);
    const tn_json *cb = tn_json_get(cfg, "add_bos_token");
    const tn_json *ce = tn_json_get(cfg, "add_eos_token");
    if (tn_json_is(cb, TN_JSON_BOOL))
        add_bos = cb->b;
    if (tn_json_is(ce, TN_JSON_BOOL))
        add_eos = ce->b;

    rc = tn_gguf_writer_set_str(w, "tokenizer.ggml.model", fam == FAMILY_SPM ? "llama" : "gpt2");
    if (!rc)
        rc = tn_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre_name);
    if (rc) {
        rc = tn_fail(err, rc, "%s: cannot add the tokenizer metadata", path);
        goto out;
    }
    if ((rc = write_tokens(&c, w)))
        goto out;
    if (fam == FAMILY_BYTE_LEVEL && (rc = write_merges(&c, w, merges)))
        goto out;
    if ((rc = write_special_ids(&c, w, &ids)))
        goto out;
    if (add_bos >= 0)
        rc = tn_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    if (!rc && add_eos >= 0)
        rc = tn_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", add_eos);
    /* llama.cpp assumes a prepended "▁" for SentencePiece vocabularies
     * unless told otherwise (Gemma). */
    if (!rc && fam == FAMILY_SPM && !(norm.prepend_space || pre.prepend_space))
        rc = tn_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
    if (rc) {
        rc = tn_fail(err, rc, "%s: cannot add the tokenizer flags", path);
        goto out;
    }
    if ((rc = write_chat_template(&c, w, cfg, path)))
        goto out;
    if (n_vocab)
        *n_vocab = c.n;
out:
    free(cfg_path);
    conv_free(&c);
    tn_json_free(doc);
    tn_json_free(cfg_doc);
    return rc;
}

/* ------------------------------------------------ GPT-2 encoder + merges */

static int convert_gpt2_files(const char *encoder_path, const char *bpe_path, int64_t vocab_size,
                              tn_gguf_writer *w, int64_t *n_vocab, tn_error *err) {
    conv c = {.path = encoder_path, .err = err};
    tn_json_doc *doc = NULL;
    char *bpe = NULL;
    size_t bpe_len = 0;
    int rc = tn_json_parse_file(encoder_path, &doc, err);
    if (rc)
        return rc;
    const tn_json *enc = tn_json_root(doc);
    if (!tn_json_is(enc, TN_JSON_OBJECT) || tn_json_count(enc) == 0) {
        rc = tn_fail(err, TN_ERR_FORMAT, "%s: expected an object of token -> id", encoder_path);
        goto out;
    }
    int64_t max_id = -1;
    for (size_t i = 0; i < tn_json_count(enc); i++) {
        int64_t id;
        const tn_json *m = tn_json_at(enc, i);
        if (!tn_json_int(m, &id) || id < 0 || id >= MAX_VOCAB) {
            rc = tn_fail(err, TN_ERR_FORMAT, "%s: entry \"%.60s\" has no valid id", encoder_path,
                         m->key);
            goto out;
        }
        if (id > max_id)
            max_id = id;
    }
    if ((rc = padded_size(&c, encoder_path, max_id + 1, vocab_size, &vocab_size)))
        goto out;
    if ((rc = conv_alloc(&c, vocab_size, false)))
        goto out;
    for (size_t i = 0; i < tn_json_count(enc); i++) {
        const tn_json *m = tn_json_at(enc, i);
        int64_t id;
        tn_json_int(m, &id);
        if (memchr(m->key, '\0', m->key_len)) {
            rc = tn_fail(err, TN_ERR_UNSUPPORTED, "%s: token %lld contains a NUL character",
                         encoder_path, (long long)id);
            goto out;
        }
        if (c.tokens[id]) {
            rc = tn_fail(err, TN_ERR_FORMAT, "%s: two tokens share id %lld", encoder_path,
                         (long long)id);
            goto out;
        }
        c.tokens[id] = m->key;
        /* GPT-2's only special token; the converter marks it control. */
        c.types[id] = !strcmp(m->key, "<|endoftext|>") ? TN_TOKEN_TYPE_CONTROL
                                                       : TN_TOKEN_TYPE_NORMAL;
        if (tn_strmap_put(&c.by_text, m->key, m->key_len, (int32_t)id) == INT32_MIN) {
            rc = nomem(&c);
            goto out;
        }
    }
    if ((rc = fill_holes(&c)))
        goto out;

    /* vocab.bpe: "#version: 0.2" then one "a b" merge per line. */
    c.path = bpe_path;
    if ((rc = read_text_file(bpe_path, &bpe, &bpe_len, err)))
        goto out;
    size_t n_lines = 0;
    for (size_t i = 0; i < bpe_len; i++)
        n_lines += bpe[i] == '\n';
    char **merges = calloc(n_lines + 1, sizeof *merges);
    if (!merges) {
        rc = nomem(&c);
        goto out;
    }
    size_t n_merges = 0, line_no = 0;
    for (char *p = bpe, *end = bpe + bpe_len; p < end && !rc;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *eol = nl ? nl : end;
        line_no++;
        char *line = p;
        size_t len = (size_t)(eol - p);
        if (len && line[len - 1] == '\r')
            len--;
        p = nl ? nl + 1 : end;
        line[len] = '\0';
        if (len == 0 || (line_no == 1 && !strncmp(line, "#version", 8)))
            continue;
        char *sp = strchr(line, ' ');
        if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' ') || memchr(line, '\0', len)) {
            rc = tn_fail(err, TN_ERR_FORMAT, "%s: line %zu is not a merge \"a b\"", bpe_path,
                         line_no);
            break;
        }
        merges[n_merges++] = line;
    }
    if (!rc) {
        c.path = encoder_path;
        rc = tn_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        if (!rc)
            rc = tn_gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2");
        if (rc)
            rc = tn_fail(err, rc, "%s: cannot add the tokenizer metadata", encoder_path);
    }
    if (!rc)
        rc = write_tokens(&c, w);
    if (!rc) {
        rc = tn_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges,
                                        n_merges);
        if (rc)
            rc = tn_fail(err, rc, "%s: cannot add the merge list", bpe_path);
    }
    free(merges);
    if (rc)
        goto out;
    /* GPT-2 uses <|endoftext|> for beginning, end and unknown alike. */
    int32_t eot = find_token(&c, "<|endoftext|>");
    special_ids ids = {eot, eot, eot, -1, -1, -1, -1};
    if ((rc = write_special_ids(&c, w, &ids)))
        goto out;
    if (n_vocab)
        *n_vocab = c.n;
out:
    conv_free(&c);
    tn_json_free(doc);
    free(bpe);
    return rc;
}

/* ------------------------------------------------------------------ API */

int tn_vocab_convert_hf(const char *path, tn_gguf_writer *w, int64_t *n_vocab, tn_error *err) {
    return tn_vocab_convert_hf_sized(path, 0, w, n_vocab, err);
}

int tn_vocab_convert_hf_sized(const char *path, int64_t vocab_size, tn_gguf_writer *w,
                              int64_t *n_vocab, tn_error *err) {
    if (!path || !w || vocab_size < 0)
        return tn_fail(err, TN_ERR_INVALID, "tn_vocab_convert_hf: no path or writer");
    if (n_vocab)
        *n_vocab = 0;
    if (is_dir(path)) {
        size_t dl = strlen(path);
        while (dl > 1 && path[dl - 1] == '/')
            dl--;
        char *tj = join_path(path, dl, "tokenizer.json");
        char *enc = join_path(path, dl, "encoder.json");
        char *bpe = join_path(path, dl, "vocab.bpe");
        int rc;
        if (!tj || !enc || !bpe)
            rc = tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
        else if (is_file(tj))
            rc = convert_tokenizer_json(tj, vocab_size, w, n_vocab, err);
        else if (is_file(enc) && is_file(bpe))
            rc = convert_gpt2_files(enc, bpe, vocab_size, w, n_vocab, err);
        else
            rc = tn_fail(err, TN_ERR_NOT_FOUND,
                         "%s: no tokenizer.json, nor encoder.json + vocab.bpe, in this folder",
                         path);
        free(tj);
        free(enc);
        free(bpe);
        return rc;
    }
    if (!is_file(path)) {
        /* A FIFO or a device named as the tokenizer is there, just not
         * readable as one: say so rather than "no such file". */
        struct stat st;
        if (stat(path, &st) == 0)
            return tn_fail(err, TN_ERR_IO,
                           "%s is not a regular file (a FIFO, a device or a directory)", path);
        return tn_fail(err, TN_ERR_IO, "%s: no such file", path);
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!strcmp(base, "encoder.json") || !strcmp(base, "vocab.bpe")) {
        char *enc = sibling(path, "encoder.json");
        char *bpe = sibling(path, "vocab.bpe");
        int rc;
        if (!enc || !bpe)
            rc = tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
        else if (!is_file(enc) || !is_file(bpe))
            rc = tn_fail(err, TN_ERR_NOT_FOUND,
                         "%s: a GPT-2 vocabulary needs encoder.json and vocab.bpe side by side",
                         path);
        else
            rc = convert_gpt2_files(enc, bpe, vocab_size, w, n_vocab, err);
        free(enc);
        free(bpe);
        return rc;
    }
    return convert_tokenizer_json(path, vocab_size, w, n_vocab, err);
}
