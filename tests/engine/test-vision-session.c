/* Images in the prompt: a synthetic Gemma 3 text model (real Gemma 3
 * vocabulary) and a synthetic vision projector made for it.
 *
 * - the image rows in the prompt are exactly what the budget gives (256, 64
 *   for a budget of 70, 1), and the rest of the prompt is the text the
 *   reference processor would tokenize ("\n\n<start_of_image>", the rows,
 *   "<end_of_image>\n\n" in place of the marker), counted independently;
 * - the same image gives identical embeddings and identical answers (A, B, A),
 *   in single-turn mode (the pin's KV rows bit-identical afterwards) and in
 *   chat, where a second turn reuses the image rows and answers as a fresh
 *   session does;
 * - the image span attends bidirectionally, text stays causal, and image rows
 *   enter the model unscaled (checked through the hidden-state capture);
 * - an image that does not fit the free context is refused with the counts
 *   in the message, and nothing changes; wrong widths, marker counts and a
 *   vocabulary without image tokens are refused clearly.
 */
#include "tn-test.h"
#include "tn-session.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static char g_model[4096], g_proj[4096];

typedef struct answer {
    char text[4096];
    size_t len;
} answer;

static bool collect(const char *piece, int32_t token, void *user) {
    (void)token;
    answer *a = user;
    size_t n = strlen(piece);
    if (a->len + n < sizeof a->text) {
        memcpy(a->text + a->len, piece, n);
        a->len += n;
        a->text[a->len] = '\0';
    }
    return true;
}

static tn_gen_params gen16(void) {
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 16;
    return g;
}

/* A smooth synthetic picture: the same seed gives the same pixels. */
static float *picture(int w, int h, uint64_t seed) {
    float *rgb = malloc((size_t)w * h * 3 * sizeof(float));
    uint64_t st = seed;
    float f[6];
    for (int i = 0; i < 6; i++)
        f[i] = 0.5f + 2.0f * (tn_test_randf(&st) + 1.0f);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                rgb[((size_t)y * w + x) * 3 + c] =
                    0.5f + 0.5f * sinf(f[c] * x / w * 6.28f + f[c + 3] * y / h * 6.28f);
    return rgb;
}

typedef struct image {
    float *embd;
    int n;
    tn_image_embd ie;
} image;

static bool encode(tn_vision *v, int threads, uint64_t seed, int budget, image *out) {
    const tn_vision_info *I = tn_vision_get_info(v);
    float *rgb = picture(40, 30, seed);
    out->embd = calloc((size_t)tn_vision_tokens(v, budget) * I->n_embd_text, sizeof(float));
    tn_error err = {0};
    int rc = tn_vision_encode(v, rgb, 40, 30, budget, out->embd, &out->n, threads, &err);
    CHECKF(rc == TN_OK, "encode: %s", err.message);
    free(rgb);
    out->ie = (tn_image_embd){out->embd, out->n, I->n_embd_text};
    return rc == TN_OK;
}

/* Tokens of the user turn (after a pinned system prompt, which Gemma 3
 * folds into the first user turn) the way the HF Gemma3Processor builds
 * them: the template renders <start_of_image> before the text, the
 * processor replaces it with the full image sequence, and the whole string
 * is tokenized; one placeholder here (the session expands it to the rows). */
static int32_t reference_turn_tokens(const tn_model *m, const char *user_text, int32_t *n_soft) {
    const tn_tokenizer *tok = tn_model_tokenizer(m);
    char text[1024];
    snprintf(text, sizeof text,
             "\n\n<start_of_image><image_soft_token><end_of_image>\n\n%s<end_of_turn>\n"
             "<start_of_turn>model\n",
             user_text);
    tn_tokens t = {0};
    tn_error err = {0};
    CHECK(tn_tokenize(tok, text, strlen(text), TN_TOKENIZE_SPECIAL, &t, &err) == TN_OK);
    const int32_t soft = tn_tokenizer_find(tok, "<image_soft_token>", 18);
    *n_soft = 0;
    for (size_t i = 0; i < t.n; i++)
        *n_soft += t.ids[i] == soft;
    int32_t n = (int32_t)t.n;
    tn_tokens_free(&t);
    return n;
}

static uint8_t *kv_bytes(tn_session *s, int32_t n, uint64_t *size) {
    tn_ctx *ctx = tn_session_ctx(s);
    *size = tn_ctx_kv_state_bytes(ctx, n);
    uint8_t *b = malloc(*size ? *size : 1);
    tn_error err = {0};
    CHECK(tn_ctx_kv_state_save(ctx, n, b, *size, &err) == TN_OK);
    return b;
}

static void budgets_and_repeats(tn_model *m, tn_vision *v, int threads) {
    tn_session *s = tn_test_session(m, 1024);
    if (!s)
        return;
    tn_error err = {0};
    CHECKF(tn_session_pin(s, "You describe pictures.", NULL, NULL, &err) == TN_OK, "%s",
           err.message);
    const int32_t n_pin = tn_session_pin_info(s).n_pin;
    uint64_t pin_size;
    uint8_t *pin_before = kv_bytes(s, n_pin, &pin_size);
    const char *q = "What is in this picture?";
    int32_t n_soft = 0;
    const int32_t ref1 = reference_turn_tokens(m, q, &n_soft);
    CHECK(n_soft == 1);

    const int budgets[3] = {256, 70, 1}, want[3] = {256, 64, 1};
    answer first[3];
    for (int b = 0; b < 3; b++) {
        image im = {0};
        if (!encode(v, threads, 5, budgets[b], &im))
            continue;
        CHECKF(im.n == want[b], "budget %d: %d image tokens, want %d", budgets[b], im.n,
               want[b]);
        tn_session_stats st;
        memset(&first[b], 0, sizeof first[b]);
        tn_gen_params g = gen16();
        int rc = tn_session_ask_images(s, q, &im.ie, 1, &g, collect, &first[b], &st, &err);
        CHECKF(rc == TN_OK, "ask, budget %d: %s", budgets[b], err.message);
        CHECKF(st.prompt_tokens == ref1 - 1 + want[b],
               "budget %d: %d prompt tokens, the reference processor gives %d", budgets[b],
               st.prompt_tokens, ref1 - 1 + want[b]);
        CHECK(tn_session_image_cost(s, im.n) == im.n + 2);
        CHECK(st.generated_tokens > 0);
        int32_t nk;
        tn_session_kv_tokens(s, &nk);
        CHECK(nk == n_pin && tn_ctx_kv_len(tn_session_ctx(s)) == n_pin);
        free(im.embd);
    }

    /* A, B, A: the same image twice gives the same embeddings and answer. */
    image a1 = {0}, a2 = {0}, b1 = {0};
    if (encode(v, threads, 5, 0, &a1) && encode(v, threads, 99, 0, &b1) &&
        encode(v, threads, 5, 0, &a2)) {
        CHECKF(!memcmp(a1.embd, a2.embd, (size_t)a1.n * a1.ie.n_embd * sizeof(float)),
               "the same image gave different embeddings");
        CHECK(memcmp(a1.embd, b1.embd, (size_t)a1.n * a1.ie.n_embd * sizeof(float)) != 0);
        answer ra = {0}, rb = {0}, ra2 = {0};
        tn_gen_params g = gen16();
        CHECK(tn_session_ask_images(s, q, &a1.ie, 1, &g, collect, &ra, NULL, &err) == TN_OK);
        CHECK(tn_session_ask_images(s, q, &b1.ie, 1, &g, collect, &rb, NULL, &err) == TN_OK);
        CHECK(tn_session_ask_images(s, q, &a2.ie, 1, &g, collect, &ra2, NULL, &err) == TN_OK);
        CHECKF(!strcmp(ra.text, ra2.text), "A, B, A: '%s' then '%s'", ra.text, ra2.text);
        CHECKF(!strcmp(ra.text, first[0].text), "the native budget answered '%s', then '%s'",
               first[0].text, ra.text);
        /* Two images with explicit markers, and the text in between. */
        const tn_image_embd two[2] = {a1.ie, b1.ie};
        tn_session_stats st;
        CHECKF(tn_session_ask_images(s, "Compare " TN_IMAGE_MARKER " with " TN_IMAGE_MARKER ".",
                                     two, 2, &g, NULL, NULL, &st, &err) == TN_OK,
               "two images: %s", err.message);
        CHECK(st.prompt_tokens > 2 * 256);
    }

    uint64_t size2;
    uint8_t *pin_after = kv_bytes(s, n_pin, &size2);
    CHECKF(size2 == pin_size && !memcmp(pin_before, pin_after, pin_size),
           "the pinned KV rows changed");
    free(pin_after);

    /* Refusals: nothing changes. */
    if (a1.embd) {
        tn_image_embd wrong = a1.ie;
        wrong.n_embd = a1.ie.n_embd + 1;
        CHECK(tn_session_ask_images(s, q, &wrong, 1, NULL, NULL, NULL, NULL, &err) ==
              TN_ERR_INVALID);
        CHECKF(strstr(err.message, "wide") != NULL, "%s", err.message);
        const tn_image_embd two[2] = {a1.ie, a1.ie};
        CHECK(tn_session_ask_images(s, "one " TN_IMAGE_MARKER, two, 2, NULL, NULL, NULL, NULL,
                                    &err) == TN_ERR_INVALID);
        CHECKF(strstr(err.message, "1 image marker for 2 images") != NULL, "%s", err.message);
        /* The placeholder typed in the text is text (message content never
         * becomes a control token), so this is one image and a question. */
        tn_session_stats st;
        CHECKF(tn_session_ask_images(s, "<image_soft_token>", &a1.ie, 1, NULL, NULL, NULL, &st,
                                     &err) == TN_OK && st.prompt_tokens > a1.ie.n_tokens + 5,
               "%s", err.message);
    }
    pin_after = kv_bytes(s, n_pin, &size2);
    CHECK(size2 == pin_size && !memcmp(pin_before, pin_after, pin_size));
    free(pin_after);
    free(pin_before);
    free(a1.embd);
    free(a2.embd);
    free(b1.embd);
    tn_session_free(s);
}

static void overflow(tn_model *m, tn_vision *v, int threads) {
    tn_session *s = tn_test_session(m, 200);
    if (!s)
        return;
    tn_error err = {0};
    CHECK(tn_session_pin(s, "You describe pictures.", NULL, NULL, &err) == TN_OK);
    const int32_t n_pin = tn_session_pin_info(s).n_pin;
    uint64_t pin_size, size2;
    uint8_t *before = kv_bytes(s, n_pin, &pin_size);
    image im = {0};
    if (encode(v, threads, 5, 0, &im)) {
        tn_session_stats st;
        int rc = tn_session_ask_images(s, "Describe it.", &im.ie, 1, NULL, NULL, NULL, &st, &err);
        CHECKF(rc == TN_ERR_OVERFLOW, "rc %d", rc);
        char want[128];
        snprintf(want, sizeof want, "(256 of them for 1 image); %d are free after the %d-token",
                 200 - n_pin, n_pin);
        CHECKF(strstr(err.message, want) != NULL, "message: %s", err.message);
        int n_req = 0;
        CHECKF(sscanf(err.message, "the message is %d tokens", &n_req) == 1 &&
                   err.overflow.needed == n_req && err.overflow.room == 200 - n_pin &&
                   !err.overflow.at_least,
               "record %lld of %lld (at least: %d); %s", (long long)err.overflow.needed,
               (long long)err.overflow.room, err.overflow.at_least, err.message);
        CHECK(st.prompt_tokens == 0 && st.generated_tokens == 0);
        uint8_t *after = kv_bytes(s, n_pin, &size2);
        CHECK(tn_ctx_kv_len(tn_session_ctx(s)) == n_pin);
        CHECK(size2 == pin_size && !memcmp(before, after, pin_size));
        free(after);
        /* The session still answers (a smaller budget fits). */
        image small = {0};
        if (encode(v, threads, 5, 70, &small)) {
            rc = tn_session_ask_images(s, "Describe it.", &small.ie, 1, NULL, NULL, NULL, &st,
                                       &err);
            CHECKF(rc == TN_OK, "budget 70 after the refusal: %s", err.message);
        }
        free(small.embd);
    }
    free(im.embd);
    free(before);
    tn_session_free(s);
}

static void chat(tn_model *m, tn_vision *v, int threads) {
    image im = {0};
    if (!encode(v, threads, 5, 70, &im))
        return;
    tn_error err = {0};
    tn_session *s = tn_test_session(m, 1024);
    answer a1 = {0}, a2 = {0}, fresh = {0};
    tn_gen_params g = gen16();
    /* Explicit markers: the image stays in the first message (without one
     * it would go before the last user message of each call). */
    tn_session_message turn1[1] = {{.role = "user", .content = TN_IMAGE_MARKER "What is this?"}};
    tn_session_stats st;
    CHECKF(tn_session_chat_images(s, turn1, 1, &im.ie, 1, &g, collect, &a1, &st, &err) == TN_OK,
           "chat: %s", err.message);
    /* The KV holds the image rows: exactly 64 placeholder rows. */
    int32_t nk;
    const int32_t *kv = tn_session_kv_tokens(s, &nk);
    const int32_t soft = tn_tokenizer_find(tn_model_tokenizer(m), "<image_soft_token>", 18);
    int32_t rows = 0;
    for (int32_t i = 0; i < nk; i++)
        rows += kv[i] == soft;
    CHECKF(rows == 64, "%d image rows in the KV", rows);
    const int32_t image_end = st.prompt_tokens; /* everything after it is the answer */

    tn_session_message turn2[3] = {{.role = "user", .content = TN_IMAGE_MARKER "What is this?"},
                                   {.role = "assistant", .content = a1.text},
                                   {.role = "user", .content = "And the colours?"}};
    CHECKF(tn_session_chat_images(s, turn2, 3, &im.ie, 1, &g, collect, &a2, &st, &err) == TN_OK,
           "chat turn 2: %s", err.message);
    CHECKF(st.restored_tokens >= image_end - 8, "turn 2 reused %d rows; the image ends near %d",
           st.restored_tokens, image_end);
    tn_session *s2 = tn_test_session(m, 1024);
    CHECK(tn_session_chat_images(s2, turn2, 3, &im.ie, 1, &g, collect, &fresh, NULL, &err) ==
          TN_OK);
    CHECKF(!strcmp(a2.text, fresh.text), "reused KV answered '%s', a fresh session '%s'",
           a2.text, fresh.text);
    /* Another image in the same place reuses nothing of the image. */
    image other = {0};
    if (encode(v, threads, 77, 70, &other)) {
        CHECK(tn_session_chat_images(s, turn2, 3, &other.ie, 1, &g, NULL, NULL, &st, &err) ==
              TN_OK);
        CHECKF(st.restored_tokens < image_end - 64, "a different image reused %d rows",
               st.restored_tokens);
    }
    free(other.embd);
    tn_session_free(s2);
    tn_session_free(s);
    free(im.embd);
}

/* The forward entry itself: rows enter unscaled; the span is bidirectional. */
static void forward_entry(tn_model *m) {
    const int32_t E = tn_model_n_embd(m), N = 6;
    float *rows = tn_test_image_rows(N, E, 3);
    tn_error err = {0};
    float *h[4];
    for (int run = 0; run < 4; run++) {
        const bool bidir = run < 2;
        tn_ctx *ctx = NULL;
        CHECK(tn_ctx_new(m, 64, 2, &ctx, &err) == TN_OK);
        const int32_t ids[2] = {0, 1};
        CHECK(tn_ctx_capture_hidden(ctx, ids, 2, &err) == TN_OK);
        int32_t bos = 2;
        CHECK(tn_ctx_decode(ctx, &bos, 1, TN_LOGITS_NONE, NULL, &err) == TN_OK);
        if (run % 2)
            rows[(size_t)(N - 1) * E] += 1.0f; /* change the last image row */
        CHECK(tn_ctx_decode_embd(ctx, rows, N, bidir, TN_LOGITS_NONE, NULL, &err) == TN_OK);
        if (run % 2)
            rows[(size_t)(N - 1) * E] -= 1.0f;
        int32_t n_rows;
        const float *cap = tn_ctx_hidden(ctx, &n_rows);
        CHECK(n_rows == N && tn_ctx_kv_len(ctx) == N + 1);
        /* id 0 (the embedding output) is the input row as given. */
        CHECK(!memcmp(cap, rows, (size_t)E * sizeof(float)));
        h[run] = malloc((size_t)E * sizeof(float));
        memcpy(h[run], cap + E, (size_t)E * sizeof(float)); /* row 0 after layer 0 */
        tn_ctx_free(ctx);
    }
    CHECKF(memcmp(h[0], h[1], (size_t)E * sizeof(float)) != 0,
           "bidirectional: the first image row does not see the last");
    CHECKF(!memcmp(h[2], h[3], (size_t)E * sizeof(float)),
           "causal: the first row saw a later one");
    for (int run = 0; run < 4; run++)
        free(h[run]);
    free(rows);
}

int main(void) {
    tn_test_gemma3_model("gemma3.gguf", 21, g_model, sizeof g_model);
    snprintf(g_proj, sizeof g_proj, "%s/mmproj.gguf", tn_test_tmpdir());
    tn_error err = {0};
    /* 128 px in 2-px patches: the native 64 x 64 patch grid and 256 tokens of
     * Gemma 3, on a tower small enough for a test. */
    tn_mkmodel_vision_params vp = tn_mkmodel_vision_default_params();
    vp.target = g_model;
    vp.image_size = 128;
    vp.patch_size = 2;
    vp.n_embd = 32;
    vp.n_ff = 64;
    vp.n_layer = 1;
    vp.n_head = 2;
    vp.seed = 4;
    CHECKF(tn_mkmodel_vision(&vp, g_proj, &err) == TN_OK, "mkmodel vision: %s", err.message);
    tn_model *m = NULL;
    tn_vision *v = NULL;
    CHECKF(tn_model_load(g_model, tn_model_default_params(), &m, &err) == TN_OK, "%s",
           err.message);
    CHECKF(tn_vision_load(g_proj, &v, &err) == TN_OK, "%s", err.message);
    int threads = 2;
    if (m && v) {
        CHECK(tn_vision_get_info(v)->n_image_tokens == 256);
        CHECK(tn_vision_get_info(v)->n_embd_text == tn_model_n_embd(m));
        forward_entry(m);
        budgets_and_repeats(m, v, threads);
        overflow(m, v, threads);
        chat(m, v, threads);
    }

    /* A vocabulary without image tokens: refused, clearly. */
    char plain[4200];
    snprintf(plain, sizeof plain, "%s/plain.gguf", tn_test_tmpdir());
    /* The same tiny model, llama with its synthetic vocabulary. */
    tn_mkmodel_params p = tn_test_tiny_model("llama", 21);
    tn_model *pm = NULL;
    if (tn_mkmodel(&p, plain, &err) == TN_OK &&
        tn_model_load(plain, tn_model_default_params(), &pm, &err) == TN_OK) {
        tn_session *s = tn_test_session(pm, 256);
        float row[64] = {0};
        tn_image_embd ie = {row, 1, 64};
        CHECK(tn_session_image_cost(s, 256) == -1);
        /* Without images the image calls are the plain ones. */
        answer a1 = {0}, a2 = {0};
        tn_gen_params g = gen16();
        CHECK(tn_session_ask_images(s, "hi", NULL, 0, &g, collect, &a1, NULL, &err) == TN_OK);
        CHECK(tn_session_ask(s, "hi", &g, collect, &a2, NULL, &err) == TN_OK);
        CHECK(!strcmp(a1.text, a2.text));
        tn_session_message hi[1] = {{.role = "user", .content = "hi"}};
        CHECK(tn_session_chat_images(s, hi, 1, NULL, 0, &g, NULL, NULL, NULL, &err) == TN_OK);
        CHECK(tn_session_ask_images(s, "hi", &ie, 1, NULL, NULL, NULL, NULL, &err) ==
              TN_ERR_UNSUPPORTED);
        CHECKF(strstr(err.message, "takes no images") != NULL, "%s", err.message);
        tn_session_free(s);
    } else {
        CHECKF(false, "plain model: %s", err.message);
    }
    tn_model_free(pm);
    tn_vision_free(v);
    tn_model_free(m);
    return tn_test_finish("vision-session");
}
