/* tn_prompt and tn_session_run, the one entry every request goes through.
 *
 * - malformed prompts (NULL session or prompt, an unknown kind, a zeroed
 *   prompt, NULL arrays with counts, negative counts, fields of another
 *   kind, images on tokens) fail with TN_ERR_INVALID and a message naming
 *   the field, the stats zeroed and the session untouched (the KV holds the
 *   pin, byte for byte), and the session still answers as before;
 * - each kind answers exactly as the call it replaces (tn_session_ask,
 *   _ask_tokens, _chat, _ask_images, _chat_images): the same text, tokens,
 *   stats and errors; a marker without images set is plain text, as in
 *   tn_session_ask, while with images set it must match an image;
 * - image prompts that do not add up (marker count against image count, no
 *   user message, a wrong width, rows missing) are refused clearly.
 * On a Gemma 3 shaped random model with the real Gemma 3 vocabulary (its
 * image tokens), and on a synthetic-vocabulary model that takes no images.
 */
#include "tn-session.h"
#include "tn-test.h"

#include <string.h>

typedef struct answer {
    char text[4096];
    size_t len;
    int32_t tokens[64];
    int n;
} answer;

static bool collect(const char *piece, int32_t token, void *user) {
    answer *a = user;
    size_t n = strlen(piece);
    if (a->len + n < sizeof a->text) {
        memcpy(a->text + a->len, piece, n);
        a->len += n;
        a->text[a->len] = '\0';
    }
    if (token >= 0 && a->n < (int)(sizeof a->tokens / sizeof a->tokens[0]))
        a->tokens[a->n++] = token;
    return true;
}

static tn_gen_params gen12(void) {
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 12;
    return g;
}

static bool same_answer(const answer *a, const answer *b) {
    return a->n == b->n && !memcmp(a->tokens, b->tokens, (size_t)a->n * sizeof a->tokens[0]) &&
           !strcmp(a->text, b->text);
}

static bool same_stats(const tn_session_stats *a, const tn_session_stats *b) {
    return a->prompt_tokens == b->prompt_tokens && a->generated_tokens == b->generated_tokens &&
           a->restored_tokens == b->restored_tokens && a->kv_len == b->kv_len &&
           a->stop_reason == b->stop_reason;
}

/* A refused prompt: the code, the message, zeroed stats, the pin intact. */
static void refused(tn_session *s, const tn_prompt *p, int want_rc, const char *want,
                    const char *what) {
    const int32_t n_pin = tn_session_pin_info(s).n_pin;
    const uint64_t before = tn_test_pinned_rows_hash(s);
    tn_session_stats st;
    memset(&st, 0xab, sizeof st);
    tn_error err = {0};
    tn_gen_params g = gen12();
    int rc = tn_session_run(s, p, &g, NULL, NULL, &st, &err);
    CHECKF(rc == want_rc, "%s: rc %d, want %d (%s)", what, rc, want_rc, err.message);
    CHECKF(strstr(err.message, want) != NULL, "%s: message '%s', want '%s'", what, err.message,
           want);
    CHECKF(st.prompt_tokens == 0 && st.generated_tokens == 0 && st.stop_reason == TN_STOP_NONE,
           "%s: stats not zeroed", what);
    CHECKF(tn_ctx_kv_len(tn_session_ctx(s)) == n_pin, "%s: the KV holds %d rows, the pin %d",
           what, tn_ctx_kv_len(tn_session_ctx(s)), n_pin);
    CHECKF(tn_test_pinned_rows_hash(s) == before, "%s: the pinned rows changed", what);
}

static void malformed(tn_session *s) {
    tn_error err = {0};
    tn_gen_params g = gen12();
    CHECK(tn_session_run(NULL, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "hi"}, &g, NULL,
                         NULL, NULL, &err) == TN_ERR_INVALID);
    CHECKF(!strcmp(err.message, "tn_session_run: bad arguments"), "%s", err.message);
    refused(s, NULL, TN_ERR_INVALID, "tn_session_run: bad arguments", "NULL prompt");

    const int32_t toks[3] = {1, 2, 3};
    const tn_session_message msgs[1] = {{.role = "user", .content = "hi"}};
    float row[1] = {0};
    const tn_image_embd im = {row, 1, 1};
    refused(s, &(tn_prompt){0}, TN_ERR_INVALID, "tn_prompt.kind is 0; expected TN_PROMPT_TEXT",
            "zeroed prompt");
    refused(s, &(tn_prompt){.kind = (tn_prompt_kind)42, .text = "hi"}, TN_ERR_INVALID,
            "tn_prompt.kind is 42", "unknown kind");
    refused(s, &(tn_prompt){.kind = (tn_prompt_kind)-1, .text = "hi"}, TN_ERR_INVALID,
            "tn_prompt.kind is -1", "negative kind");
    /* NULL fields and negative counts. */
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT}, TN_ERR_INVALID,
            "tn_prompt.text is NULL; a TN_PROMPT_TEXT prompt needs its text", "text NULL");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TOKENS, .n_tokens = 3}, TN_ERR_INVALID,
            "tn_prompt.tokens is NULL with n_tokens = 3", "tokens NULL");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TOKENS, .tokens = toks, .n_tokens = -1},
            TN_ERR_INVALID, "tn_prompt.n_tokens is -1; a count cannot be negative",
            "n_tokens < 0");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .n_messages = 2}, TN_ERR_INVALID,
            "tn_prompt.messages is NULL with n_messages = 2", "messages NULL");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = msgs, .n_messages = -5},
            TN_ERR_INVALID, "tn_prompt.n_messages is -5; a count cannot be negative",
            "n_messages < 0");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "hi", .n_images = 1},
            TN_ERR_INVALID, "tn_prompt.images is NULL with n_images = 1", "images NULL");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "hi", .images = &im, .n_images = -1},
            TN_ERR_INVALID, "tn_prompt.n_images is -1; a count cannot be negative",
            "n_images < 0");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = msgs, .n_messages = 1,
                            .n_images = -2},
            TN_ERR_INVALID, "tn_prompt.n_images is -2; a count cannot be negative",
            "n_images < 0 without images");
    /* Fields of another kind: filled for one, labelled another. */
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .messages = msgs, .n_messages = 1},
            TN_ERR_INVALID, "tn_prompt.messages is set on a TN_PROMPT_TEXT prompt",
            "messages on text");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .text = "hi"}, TN_ERR_INVALID,
            "tn_prompt.text is set on a TN_PROMPT_MESSAGES prompt", "text on messages");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TOKENS, .text = "hi", .tokens = toks, .n_tokens = 3},
            TN_ERR_INVALID, "tn_prompt.text is set on a TN_PROMPT_TOKENS prompt",
            "text on tokens");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "hi", .n_tokens = 2}, TN_ERR_INVALID,
            "tn_prompt.n_tokens is set on a TN_PROMPT_TEXT prompt", "n_tokens on text");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = msgs, .n_messages = 1,
                            .tokens = toks},
            TN_ERR_INVALID, "tn_prompt.tokens is set on a TN_PROMPT_MESSAGES prompt",
            "tokens on messages");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TOKENS, .tokens = toks, .n_tokens = 3,
                            .images = &im, .n_images = 1},
            TN_ERR_INVALID, "a TN_PROMPT_TOKENS prompt takes no images", "images on tokens");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TOKENS, .tokens = toks, .n_tokens = 3,
                            .n_images = 1},
            TN_ERR_INVALID, "a TN_PROMPT_TOKENS prompt takes no images", "n_images on tokens");
    /* What the calls underneath check, reached through the prompt. */
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TOKENS, .tokens = toks, .n_tokens = 0},
            TN_ERR_INVALID, "the request is empty", "no tokens");
    const int32_t bad[2] = {1, 1 << 30};
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TOKENS, .tokens = bad, .n_tokens = 2},
            TN_ERR_INVALID, "is outside the vocabulary", "token out of range");
    const tn_session_message who[1] = {{.role = "narrator", .content = "hi"}};
    refused(s, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = who, .n_messages = 1},
            TN_ERR_INVALID, "message 0 has role 'narrator'", "bad role");
}

/* Each kind through tn_session_run against the call it stands for, on
 * fresh sessions pinned alike (chat keeps the KV between calls). */
static void pinned_pair(tn_model *m, tn_session **a, tn_session **b) {
    tn_error err = {0};
    *a = tn_test_session(m, 512);
    *b = tn_test_session(m, 512);
    CHECK(*a && tn_session_pin(*a, "You are terse.", NULL, NULL, &err) == TN_OK);
    CHECK(*b && tn_session_pin(*b, "You are terse.", NULL, NULL, &err) == TN_OK);
}

static void compare(tn_model *m, const tn_prompt *p, int (*old)(tn_session *, const tn_prompt *,
                                                                 answer *, tn_session_stats *,
                                                                 tn_error *),
                    const char *what) {
    tn_session *s1, *s2;
    pinned_pair(m, &s1, &s2);
    if (!s1 || !s2) {
        tn_session_free(s1);
        tn_session_free(s2);
        return;
    }
    answer a1 = {0}, a2 = {0};
    tn_session_stats st1, st2;
    tn_error e1 = {0}, e2 = {0};
    tn_gen_params g = gen12();
    int rc1 = old(s1, p, &a1, &st1, &e1);
    int rc2 = tn_session_run(s2, p, &g, collect, &a2, &st2, &e2);
    CHECKF(rc1 == rc2, "%s: rc %d, tn_session_run %d (%s / %s)", what, rc1, rc2, e1.message,
           e2.message);
    CHECKF(!strcmp(e1.message, e2.message), "%s: '%s', tn_session_run '%s'", what, e1.message,
           e2.message);
    CHECKF(rc1 != TN_OK || a1.n > 0, "%s: no answer to compare", what);
    CHECKF(same_answer(&a1, &a2), "%s: '%s', tn_session_run '%s'", what, a1.text, a2.text);
    CHECKF(same_stats(&st1, &st2), "%s: the stats differ", what);
    CHECKF(tn_test_pinned_rows_hash(s1) == tn_test_pinned_rows_hash(s2),
           "%s: the pinned rows differ", what);
    tn_session_free(s1);
    tn_session_free(s2);
}

static int old_ask(tn_session *s, const tn_prompt *p, answer *a, tn_session_stats *st,
                   tn_error *err) {
    tn_gen_params g = gen12();
    return tn_session_ask(s, p->text, &g, collect, a, st, err);
}
static int old_ask_tokens(tn_session *s, const tn_prompt *p, answer *a, tn_session_stats *st,
                          tn_error *err) {
    tn_gen_params g = gen12();
    return tn_session_ask_tokens(s, p->tokens, p->n_tokens, &g, collect, a, st, err);
}
static int old_chat(tn_session *s, const tn_prompt *p, answer *a, tn_session_stats *st,
                    tn_error *err) {
    tn_gen_params g = gen12();
    return tn_session_chat(s, p->messages, p->n_messages, &g, collect, a, st, err);
}
static int old_ask_images(tn_session *s, const tn_prompt *p, answer *a, tn_session_stats *st,
                          tn_error *err) {
    tn_gen_params g = gen12();
    return tn_session_ask_images(s, p->text, p->images, p->n_images, &g, collect, a, st, err);
}
static int old_chat_images(tn_session *s, const tn_prompt *p, answer *a, tn_session_stats *st,
                           tn_error *err) {
    tn_gen_params g = gen12();
    return tn_session_chat_images(s, p->messages, p->n_messages, p->images, p->n_images, &g,
                                  collect, a, st, err);
}

static void kinds(tn_model *m) {
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "Name a colour."}, old_ask, "text");
    /* Without images set a marker is what the user typed. */
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "What is " TN_IMAGE_MARKER "?"},
            old_ask, "typed marker");
    const int32_t toks[5] = {5, 6, 7, 8, 9};
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TOKENS, .tokens = toks, .n_tokens = 5},
            old_ask_tokens, "tokens");
    const tn_session_message conv[3] = {{.role = "user", .content = "Hello."},
                                        {.role = "assistant", .content = "Hi."},
                                        {.role = "user", .content = "Count to three."}};
    compare(m, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = conv, .n_messages = 3},
            old_chat, "messages");
    const tn_session_message typed[1] = {{.role = "user", .content = TN_IMAGE_MARKER " here"}};
    compare(m, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = typed, .n_messages = 1},
            old_chat, "typed marker in a message");
}

/* A Gemma 3 vocabulary: image prompts, good and bad. */
static void images(tn_model *m) {
    const int32_t E = tn_model_n_embd(m), N = 4;
    float *rows = tn_test_image_rows(N, E, 7);
    const tn_image_embd im[2] = {{rows, N, E}, {rows, 2, E}};
    const char *two = "Compare " TN_IMAGE_MARKER " with " TN_IMAGE_MARKER ".";
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = two, .images = im, .n_images = 2},
            old_ask_images, "text with images");
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "Describe.", .images = im,
                            .n_images = 1},
            old_ask_images, "an image without a marker");
    /* images set, none given, no marker: the plain ask. */
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "Describe.", .images = im},
            old_ask_images, "images set, zero of them");
    const tn_session_message conv[2] = {{.role = "user", .content = TN_IMAGE_MARKER "What?"},
                                        {.role = "user", .content = "And " TN_IMAGE_MARKER}};
    compare(m, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = conv, .n_messages = 2,
                            .images = im, .n_images = 2},
            old_chat_images, "messages with images");
    const tn_session_message plain[1] = {{.role = "user", .content = "What is it?"}};
    compare(m, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = plain, .n_messages = 1,
                            .images = im, .n_images = 1},
            old_chat_images, "messages, an image without a marker");

    tn_session *s = tn_test_session(m, 512);
    tn_error err = {0};
    if (!s || tn_session_pin(s, "You describe pictures.", NULL, NULL, &err) != TN_OK) {
        CHECKF(false, "pin: %s", err.message);
        tn_session_free(s);
        free(rows);
        return;
    }
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = two, .images = im, .n_images = 1},
            TN_ERR_INVALID, "the prompt has 2 image markers for 1 image", "2 markers, 1 image");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = TN_IMAGE_MARKER "?", .images = im,
                            .n_images = 2},
            TN_ERR_INVALID, "the prompt has 1 image marker for 2 images", "1 marker, 2 images");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = TN_IMAGE_MARKER "?", .images = im},
            TN_ERR_INVALID, "the prompt has 1 image marker for 0 images",
            "a marker, images set, none given");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = conv, .n_messages = 2,
                            .images = im, .n_images = 1},
            TN_ERR_INVALID, "the prompt has 2 image markers for 1 image", "chat: 2 markers");
    const tn_session_message none[1] = {{.role = "system", .content = "Look."}};
    refused(s, &(tn_prompt){.kind = TN_PROMPT_MESSAGES, .messages = none, .n_messages = 1,
                            .images = im, .n_images = 1},
            TN_ERR_INVALID, "images need a user message", "no user message");
    const tn_image_embd narrow = {rows, N, E / 2}, empty = {NULL, N, E}, zero = {rows, 0, E};
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "?", .images = &narrow,
                            .n_images = 1},
            TN_ERR_INVALID, "image 1: its embeddings are", "narrow image");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "?", .images = &empty,
                            .n_images = 1},
            TN_ERR_INVALID, "image 1 has no embeddings", "image rows NULL");
    refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "?", .images = &zero, .n_images = 1},
            TN_ERR_INVALID, "image 1 has no embeddings", "image of 0 rows");
    /* After all of that the session answers as a fresh one. */
    answer a = {0}, fresh = {0};
    tn_gen_params g = gen12();
    const tn_prompt ok = {.kind = TN_PROMPT_TEXT, .text = two, .images = im, .n_images = 2};
    CHECKF(tn_session_run(s, &ok, &g, collect, &a, NULL, &err) == TN_OK, "%s", err.message);
    tn_session *s2 = tn_test_session(m, 512);
    if (s2 && tn_session_pin(s2, "You describe pictures.", NULL, NULL, &err) == TN_OK)
        CHECK(tn_session_run(s2, &ok, &g, collect, &fresh, NULL, &err) == TN_OK);
    CHECKF(same_answer(&a, &fresh), "after the refusals '%s', fresh '%s'", a.text, fresh.text);
    tn_session_free(s2);
    tn_session_free(s);
    free(rows);
}

/* A model that takes no images: a marker is text without images set, and
 * with images set it is refused as tn_session_ask_images refuses it. */
static void no_images(tn_model *m) {
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = TN_IMAGE_MARKER "?"}, old_ask,
            "no vision: typed marker");
    float row[64] = {0};
    const tn_image_embd im = {row, 1, 64};
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = TN_IMAGE_MARKER "?", .images = &im},
            old_ask_images, "no vision: a marker, images set");
    compare(m, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "hi", .images = &im, .n_images = 1},
            old_ask_images, "no vision: an image");
    tn_session *s = tn_test_session(m, 512);
    if (s) {
        refused(s, &(tn_prompt){.kind = TN_PROMPT_TEXT, .text = "hi", .images = &im,
                                .n_images = 1},
                TN_ERR_UNSUPPORTED, "this model takes no images", "no vision");
        malformed(s);
    }
    tn_session_free(s);
}

int main(void) {
    char gemma[4200], plain[4200];
    tn_test_gemma3_model("gemma3.gguf", 31, gemma, sizeof gemma);
    snprintf(plain, sizeof plain, "%s/plain.gguf", tn_test_tmpdir());
    tn_error err = {0};
    tn_model *m = NULL;
    if (tn_model_load(gemma, tn_model_default_params(), &m, &err) == TN_OK) {
        tn_session *s = tn_test_session(m, 512);
        if (s && tn_session_pin(s, "You are terse.", NULL, NULL, &err) == TN_OK)
            malformed(s);
        tn_session_free(s);
        kinds(m);
        images(m);
    } else {
        CHECKF(false, "load: %s", err.message);
    }
    tn_model_free(m);

    tn_mkmodel_params q = tn_test_tiny_model("llama", 32);
    tn_model *pm = NULL;
    if (tn_mkmodel(&q, plain, &err) == TN_OK &&
        tn_model_load(plain, tn_model_default_params(), &pm, &err) == TN_OK) {
        kinds(pm);
        no_images(pm);
    } else {
        CHECKF(false, "plain model: %s", err.message);
    }
    tn_model_free(pm);
    return tn_test_finish("prompt");
}
