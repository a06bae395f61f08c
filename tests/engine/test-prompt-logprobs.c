/* The prompt's log-probabilities (tn_gen_params.prompt_logprobs, completions'
 * echo with logprobs) on a tiny random-weight model:
 *   - every entry equals, bit for bit, what a separate context reports when
 *     it decodes the same pin and prompt one token at a time (teacher
 *     forcing: the row after tokens 0..i-1 scores token i), top list too;
 *   - prompts of 1, rows - 1, rows, rows + 1 and 3 rows + 1 tokens (rows:
 *     the scoring step's rows), behind a pin and without one;
 *   - no_answer: the scores and no token; the KV is the pin again after;
 *   - speculation (prompt lookup) changes neither the scores nor the answer;
 *   - a conversation, or a prompt_top out of range, is refused by name.
 */
#include "tn-session.h"
#include "tn-test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOP 5
#define MAX_PROMPT 256

typedef struct entry {
    int32_t index, token;
    float logprob;
    int32_t n_top;
    tn_token_logprob top[TN_TOP_LOGPROBS_MAX];
} entry;

typedef struct scores {
    entry e[MAX_PROMPT];
    int n;
    int32_t answer[64];
    int n_answer;
} scores;

static void on_score(int32_t index, int32_t token, float logprob, const tn_token_logprob *top,
                     int32_t n_top, void *user) {
    scores *sc = user;
    if (sc->n >= MAX_PROMPT)
        return;
    entry *e = &sc->e[sc->n++];
    e->index = index;
    e->token = token;
    e->logprob = logprob;
    e->n_top = n_top;
    memcpy(e->top, top, (size_t)n_top * sizeof *top);
}

static bool on_token(const char *piece, int32_t token, void *user) {
    (void)piece;
    scores *sc = user;
    if (token >= 0 && sc->n_answer < 64)
        sc->answer[sc->n_answer++] = token;
    return true;
}

/* Teacher forcing through the context API: pin, then each prompt token
 * alone; ref[i] scores prompt[i] from the row of prompt[i - 1]. */
static bool reference(const tn_model *m, const int32_t *pin, int n_pin, const int32_t *prompt,
                      int n, entry *ref) {
    tn_ctx *ctx = NULL;
    tn_error err = {0};
    int rc = tn_ctx_new(m, 1024, 2, &ctx, &err);
    CHECKF(rc == TN_OK, "ctx: %s", err.message);
    if (rc != TN_OK)
        return false;
    const int32_t n_vocab = tn_model_n_vocab(m);
    float *logits = malloc((size_t)n_vocab * sizeof(float));
    if (n_pin > 0)
        rc = tn_ctx_decode(ctx, pin, n_pin, TN_LOGITS_NONE, NULL, &err);
    for (int i = 0; rc == TN_OK && i + 1 < n; i++) {
        rc = tn_ctx_decode(ctx, &prompt[i], 1, TN_LOGITS_LAST, logits, &err);
        if (rc == TN_OK) {
            entry *e = &ref[i + 1];
            e->index = i + 1;
            e->token = prompt[i + 1];
            const int got = tn_logprobs(logits, n_vocab, prompt[i + 1], TOP, &e->logprob, e->top,
                                        &err);
            e->n_top = got;
            if (got < 0)
                rc = got;
        }
    }
    CHECKF(rc == TN_OK, "reference decode: %s", err.message);
    free(logits);
    tn_ctx_free(ctx);
    return rc == TN_OK;
}

static bool same_entry(const entry *a, const entry *b) {
    if (a->index != b->index || a->token != b->token || a->n_top != b->n_top ||
        memcmp(&a->logprob, &b->logprob, sizeof(float)))
        return false;
    for (int k = 0; k < a->n_top; k++)
        if (a->top[k].token != b->top[k].token ||
            memcmp(&a->top[k].logprob, &b->top[k].logprob, sizeof(float)))
            return false;
    return true;
}

static int run(tn_session *s, const int32_t *prompt, int n, bool no_answer, tn_drafter *drafter,
               scores *sc, tn_session_stats *st) {
    memset(sc, 0, sizeof *sc);
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 6;
    g.prompt_logprobs = on_score;
    g.prompt_logprobs_user = sc;
    g.prompt_top = TOP;
    g.no_answer = no_answer;
    g.drafter = drafter;
    const tn_prompt p = {.kind = TN_PROMPT_TOKENS, .tokens = prompt, .n_tokens = n};
    tn_error err = {0};
    const int rc = tn_session_run(s, &p, &g, on_token, sc, st, &err);
    CHECKF(rc == TN_OK, "run of %d tokens: %s", n, err.message);
    return rc;
}

static void lengths(const tn_model *m, tn_session *s, const int32_t *pin, int n_pin,
                    const int32_t *prompt) {
    const int32_t n_vocab = tn_model_n_vocab(m);
    int32_t rows = TN_PROMPT_LOGITS_FLOATS / n_vocab;
    rows = rows < 1 ? 1 : rows > 64 ? 64 : rows;
    const int ns[] = {1, 2, (int)rows - 1, (int)rows, (int)rows + 1, 3 * (int)rows + 1};
    static entry ref[MAX_PROMPT];
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        const int n = ns[t];
        if (!reference(m, pin, n_pin, prompt, n, ref))
            return;
        for (int no_answer = 0; no_answer < 2; no_answer++) {
            static scores sc;
            tn_session_stats st;
            if (run(s, prompt, n, no_answer, NULL, &sc, &st) != TN_OK)
                continue;
            CHECKF(sc.n == n - 1, "pin %d, %d tokens: %d entries, expected %d", n_pin, n, sc.n,
                   n - 1);
            int bad = 0;
            for (int i = 0; i < sc.n && i + 1 < n; i++)
                bad += !same_entry(&sc.e[i], &ref[i + 1]);
            CHECKF(bad == 0, "pin %d, %d tokens: %d entries differ from teacher forcing", n_pin,
                   n, bad);
            CHECKF(st.prompt_tokens == n, "prompt_tokens %d, expected %d", st.prompt_tokens, n);
            if (no_answer) {
                CHECK(sc.n_answer == 0 && st.generated_tokens == 0);
                CHECK(st.stop_reason == TN_STOP_LIMIT);
            } else {
                CHECK(sc.n_answer > 0);
            }
            CHECK(tn_ctx_kv_len(tn_session_ctx(s)) == n_pin);
        }
    }
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/prompt-logprobs.gguf", tn_test_tmpdir());
    tn_mkmodel_params p = tn_test_tiny_model("llama", 31);
    tn_error err = {0};
    int rc = tn_mkmodel(&p, path, &err);
    CHECKF(rc == TN_OK, "mkmodel: %s", err.message);
    tn_model *m = NULL;
    if (rc == TN_OK)
        rc = tn_model_load(path, tn_model_default_params(), &m, &err);
    CHECKF(rc == TN_OK, "load: %s", err.message);
    if (rc != TN_OK)
        return tn_test_finish("prompt-logprobs");
    tn_session *s = tn_test_session(m, 1024);
    if (!s) {
        tn_model_free(m);
        return tn_test_finish("prompt-logprobs");
    }
    const int32_t n_vocab = tn_model_n_vocab(m);
    int32_t prompt[MAX_PROMPT];
    uint64_t seed = 7;
    /* A repeating stretch gives prompt lookup drafts to accept. */
    for (int i = 0; i < MAX_PROMPT; i++)
        prompt[i] = i % 40 < 20 ? (int32_t)(tn_test_rand(&seed) % (uint64_t)n_vocab)
                                : prompt[i - 20];

    lengths(m, s, NULL, 0, prompt);
    const int32_t pin[] = {3, 14, 15, 92, 65};
    rc = tn_session_pin_tokens(s, pin, 5, NULL, NULL, &err);
    CHECKF(rc == TN_OK, "pin: %s", err.message);
    if (rc == TN_OK)
        lengths(m, s, pin, 5, prompt);

    /* Speculation on and off: the same scores and the same answer. */
    tn_drafter *lookup = NULL;
    rc = tn_drafter_new_lookup(tn_drafter_default_params(), &lookup, &err);
    CHECKF(rc == TN_OK, "lookup: %s", err.message);
    static scores off, on;
    tn_session_stats st;
    if (rc == TN_OK && run(s, prompt, 120, false, NULL, &off, &st) == TN_OK &&
        run(s, prompt, 120, false, lookup, &on, &st) == TN_OK) {
        int bad = on.n != off.n;
        for (int i = 0; !bad && i < on.n; i++)
            bad += !same_entry(&on.e[i], &off.e[i]);
        CHECKF(bad == 0, "speculation changed the prompt's scores");
        CHECK(on.n_answer == off.n_answer &&
              !memcmp(on.answer, off.answer, (size_t)on.n_answer * sizeof(int32_t)));
    }
    tn_drafter_free(lookup);

    /* Refusals, by name, with nothing run. */
    tn_gen_params g = tn_gen_default_params();
    static scores sc;
    g.prompt_logprobs = on_score;
    g.prompt_logprobs_user = &sc;
    g.prompt_top = TN_TOP_LOGPROBS_MAX + 1;
    const tn_prompt tp = {.kind = TN_PROMPT_TOKENS, .tokens = prompt, .n_tokens = 4};
    memset(&err, 0, sizeof err);
    rc = tn_session_run(s, &tp, &g, on_token, &sc, NULL, &err);
    CHECKF(rc == TN_ERR_INVALID && strstr(err.message, "prompt_top"), "rc %d: %s", rc,
           err.message);
    g.prompt_top = 1;
    const tn_session_message msg[] = {{.role = "user", .content = "hi"}};
    const tn_prompt mp = {.kind = TN_PROMPT_MESSAGES, .messages = msg, .n_messages = 1};
    memset(&err, 0, sizeof err);
    rc = tn_session_run(s, &mp, &g, on_token, &sc, NULL, &err);
    CHECKF(rc == TN_ERR_INVALID && strstr(err.message, "single-turn"), "rc %d: %s", rc,
           err.message);
    CHECK(sc.n == 0);

    tn_session_free(s);
    tn_model_free(m);
    return tn_test_finish("prompt-logprobs");
}
