/* Sessions: the pinned system prompt restored exactly for every request.
 *
 * On small random-weight models written with tn_mkmodel (the synthetic
 * vocabulary with a ChatML template, and the real Qwen3 vocabulary when it
 * was fetched, thinking on and off; a Gemma 4, a qwen3moe mixture of
 * experts and a Gemma 4 with 26B-A4B's mixture on the synthetic vocabulary):
 *   - requests A, B, A, B, A (greedy and seeded sampling): every A identical,
 *     every B identical, each equal to the answer of a fresh session that
 *     pinned the same prompt, and again after the pin is reloaded from disk
 *     and after a multi-turn chat cut into the pinned rows;
 *   - after each request the KV holds exactly the pinned rows, and those
 *     rows are byte-identical to what pinning wrote;
 *   - the stop token never gets a KV row (checked in chat mode, where the
 *     KV keeps the answer, and during ask through the callback);
 *   - overflow and a too-long system prompt are refused with the exact
 *     message and nothing changed; cancellation changes nothing either;
 *   - damaged snapshots are ignored with a warning and recomputed; a model
 *     rewritten in place does not reuse its old pins;
 *   - chat reuses the common prefix and gives the answer of a fresh session;
 *     stop strings end the answer before the string.
 */
#include "tn-internal.h"
#include "tn-session.h"
#include "tn-test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OUT 256

typedef struct answer {
    int32_t tokens[MAX_OUT];
    int n;
    char text[4096];
    size_t text_len;
    int rc;
    tn_session_stats st;
} answer;

typedef struct collect {
    answer *a;
    tn_session *s;
    int32_t expect_kv; /* KV rows when the callback for token 0 runs; -1: no check */
    int kv_errors;
    int cancel_after;  /* tn_session_cancel after this many tokens; 0: never */
} collect;

static bool on_token(const char *piece, int32_t token, void *user) {
    collect *c = user;
    answer *a = c->a;
    if (token >= 0 && a->n < MAX_OUT) {
        /* While token i is handed out, rows are: pin + request + tokens 0..i-1. */
        if (c->expect_kv >= 0 && tn_ctx_kv_len(tn_session_ctx(c->s)) != c->expect_kv + a->n)
            c->kv_errors++;
        a->tokens[a->n++] = token;
    }
    size_t len = strlen(piece);
    if (a->text_len + len < sizeof a->text) {
        memcpy(a->text + a->text_len, piece, len);
        a->text_len += len;
        a->text[a->text_len] = '\0';
    }
    if (c->cancel_after > 0 && a->n >= c->cancel_after)
        tn_session_cancel(c->s);
    return true;
}

static bool same(const answer *x, const answer *y) {
    return x->n == y->n && !memcmp(x->tokens, y->tokens, (size_t)x->n * sizeof(int32_t)) &&
           x->text_len == y->text_len && !memcmp(x->text, y->text, x->text_len);
}

static int warnings;
static char last_warning[TN_ERROR_MESSAGE_MAX];

static tn_error last_warn; /* the warning as the engine gave it */

static void on_warn(const tn_error *w, void *user) {
    (void)user;
    warnings++;
    snprintf(last_warning, sizeof last_warning, "%s", w->message);
    last_warn = *w;
}

/* ------------------------------------------------------------- fixtures */

typedef struct fixture {
    const char *name;
    char model_path[4096];
    tn_model *model;
    char cache[4096];
} fixture;

static bool make_model(fixture *f, const char *name, const char *arch, const char *tokenizer,
                       uint64_t seed) {
    f->name = name;
    snprintf(f->model_path, sizeof f->model_path, "%s/%s.gguf", tn_test_tmpdir(), name);
    snprintf(f->cache, sizeof f->cache, "%s/cache-%s/tern/pins", tn_test_tmpdir(), name);
    tn_mkmodel_params p = tn_test_tiny_model(arch, seed);
    p.tokenizer = tokenizer;
    tn_error err = {0};
    int rc = tn_mkmodel(&p, f->model_path, &err);
    CHECKF(rc == TN_OK, "mkmodel %s: %s", name, err.message);
    if (rc != TN_OK)
        return false;
    tn_model_free(f->model);
    f->model = NULL;
    rc = tn_model_load(f->model_path, tn_model_default_params(), &f->model, &err);
    CHECKF(rc == TN_OK, "load %s: %s", name, err.message);
    return rc == TN_OK;
}

static tn_session *new_session(fixture *f, int32_t n_ctx, bool cache) {
    tn_session_params sp = tn_session_default_params();
    sp.n_ctx = n_ctx;
    sp.n_threads = 2;
    sp.pin_cache_dir = cache ? f->cache : "";
    sp.warn = on_warn;
    tn_session *s = NULL;
    tn_error err = {0};
    int rc = tn_session_new(f->model, sp, &s, &err);
    CHECKF(rc == TN_OK, "%s: session: %s", f->name, err.message);
    return s;
}

static int pin(tn_session *s, const char *system) {
    tn_error err = {0};
    int rc = tn_session_pin(s, system, NULL, NULL, &err);
    CHECKF(rc == TN_OK, "pin: %s", err.message);
    return rc;
}

static void ask(tn_session *s, const char *text, const tn_gen_params *g, answer *a) {
    memset(a, 0, sizeof *a);
    tn_pin_info pi = tn_session_pin_info(s);
    collect c = {.a = a, .s = s, .expect_kv = -1};
    tn_error err = {0};
    a->rc = tn_session_ask(s, text, g, on_token, &c, &a->st, &err);
    CHECKF(a->rc == TN_OK, "ask '%s': %s", text, err.message);
    /* Exact restore: the KV is the pin again, nothing more. */
    CHECKF(tn_ctx_kv_len(tn_session_ctx(s)) == pi.n_pin && a->st.kv_len == pi.n_pin,
           "after a request the KV holds %d rows, the pin %d",
           tn_ctx_kv_len(tn_session_ctx(s)), pi.n_pin);
    CHECK(a->st.restored_tokens == pi.n_pin);
    CHECK(a->st.generated_tokens == a->n);
}

static const char *SYSTEM =
    "You are a terse assistant for a hardware store. Answer in one sentence, name the aisle, "
    "and never invent prices.";
static const char *REQ_A = "Where are the wood screws?";
static const char *REQ_B = "Do you sell garden hoses, and how long are they?";

/* --------------------------------------------- A, B, A, B, A and friends */

static void abab(fixture *f, bool thinking, bool sampled) {
    const char *mode = sampled ? "seeded" : "greedy";
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 12;
    g.thinking = thinking;
    if (sampled) {
        g.sampler.temperature = 0.9f;
        g.sampler.top_k = 40;
        g.sampler.top_p = 0.95f;
        g.sampler.repeat_penalty = 1.1f;
        g.sampler.seed = 4242;
    }
    tn_session *s = new_session(f, 512, true);
    if (!s || pin(s, SYSTEM) != TN_OK) {
        tn_session_free(s);
        return;
    }
    const tn_pin_info pi = tn_session_pin_info(s);
    CHECK(pi.n_pin > 10 && pi.n_free == 512 - pi.n_pin);
    int32_t counted = 0;
    CHECK(tn_session_count_system_tokens(s, SYSTEM, &counted, NULL) == TN_OK &&
          counted == pi.n_pin);
    const uint64_t h0 = tn_test_pinned_rows_hash(s);

    answer r[5];
    const char *order[5] = {REQ_A, REQ_B, REQ_A, REQ_B, REQ_A};
    for (int i = 0; i < 5; i++) {
        ask(s, order[i], &g, &r[i]);
        CHECKF(tn_test_pinned_rows_hash(s) == h0, "%s %s think=%d: request %d changed the pinned rows",
               f->name, mode, thinking, i);
    }
    CHECK(r[0].n > 0 && r[1].n > 0);
    CHECKF(same(&r[0], &r[2]) && same(&r[0], &r[4]), "%s %s think=%d: the answers to A differ",
           f->name, mode, thinking);
    CHECKF(same(&r[1], &r[3]), "%s %s think=%d: the answers to B differ", f->name, mode,
           thinking);
    /* Not a test of the model, but of the test: A and B must be told apart. */
    CHECKF(!same(&r[0], &r[1]), "%s %s: A and B gave the same answer", f->name, mode);

    /* A fresh session (no snapshot) gives the same answers. */
    tn_session *fresh = new_session(f, 512, false);
    if (fresh && pin(fresh, SYSTEM) == TN_OK) {
        CHECK(!tn_session_pin_info(fresh).loaded_from_snapshot);
        answer x;
        ask(fresh, REQ_B, &g, &x);
        CHECKF(same(&x, &r[1]), "%s %s think=%d: a fresh session answers B differently",
               f->name, mode, thinking);
        ask(fresh, REQ_A, &g, &x);
        CHECKF(same(&x, &r[0]), "%s %s think=%d: a fresh session answers A differently",
               f->name, mode, thinking);
    }
    tn_session_free(fresh);

    /* A restart: the pin comes from disk, without prefill, and answers the same. */
    tn_session *again = new_session(f, 512, true);
    if (again && pin(again, SYSTEM) == TN_OK) {
        tn_pin_info p2 = tn_session_pin_info(again);
        CHECKF(p2.loaded_from_snapshot, "%s: the pin was not reloaded from disk", f->name);
        CHECK(p2.n_pin == pi.n_pin);
        CHECK(tn_test_pinned_rows_hash(again) == h0);
        answer x;
        ask(again, REQ_A, &g, &x);
        CHECKF(same(&x, &r[0]), "%s %s think=%d: after reloading the pin, A differs", f->name,
               mode, thinking);
        ask(again, REQ_B, &g, &x);
        CHECKF(same(&x, &r[1]), "%s %s think=%d: after reloading the pin, B differs", f->name,
               mode, thinking);
    }
    tn_session_free(again);

    /* Multi-turn chat with another system prompt cuts into the pinned rows;
     * the next request restores the pin and answers as before. */
    tn_session_message conv[2] = {{.role = "system", .content = "Another prompt entirely."},
                                  {.role = "user", .content = REQ_A}};
    answer c;
    memset(&c, 0, sizeof c);
    collect cc = {.a = &c, .s = s, .expect_kv = -1};
    tn_error err = {0};
    int rc = tn_session_chat(s, conv, 2, &g, on_token, &cc, NULL, &err);
    CHECKF(rc == TN_OK, "chat: %s", err.message);
    answer x;
    ask(s, REQ_A, &g, &x);
    CHECKF(same(&x, &r[0]), "%s %s think=%d: after a chat, A differs", f->name, mode, thinking);
    CHECK(tn_test_pinned_rows_hash(s) == h0);
    tn_session_free(s);
}

/* -------------------------------------------------- the stop token's row */

static void stop_token(fixture *f) {
    tn_session *s = new_session(f, 512, false);
    if (!s || pin(s, SYSTEM) != TN_OK) {
        tn_session_free(s);
        return;
    }
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 16;
    tn_session_message conv[1] = {{.role = "user", .content = REQ_B}};
    answer a;
    memset(&a, 0, sizeof a);
    collect c = {.a = &a, .s = s, .expect_kv = -1};
    tn_session_stats st;
    tn_error err = {0};
    int rc = tn_session_chat(s, conv, 1, &g, on_token, &c, &st, &err);
    CHECKF(rc == TN_OK, "chat: %s", err.message);
    const int32_t n_prompt = st.prompt_tokens + st.restored_tokens;
    /* Limit reached: the last token was sampled but not decoded. */
    CHECK(st.stop_reason == TN_STOP_LIMIT && a.n == 16);
    CHECKF(st.kv_len == n_prompt + 15, "kv %d, prompt %d", st.kv_len, n_prompt);
    /* Choose a stop token: the first answer token k >= 1 not seen before it. */
    int k = -1;
    for (int i = 1; i < a.n && k < 0; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen |= a.tokens[j] == a.tokens[i];
        if (!seen)
            k = i;
    }
    CHECK(k > 0);
    if (k > 0) {
        g.stop_tokens[0] = a.tokens[k];
        g.n_stop_tokens = 1;
        answer b;
        memset(&b, 0, sizeof b);
        collect cb = {.a = &b, .s = s, .expect_kv = n_prompt};
        rc = tn_session_chat(s, conv, 1, &g, on_token, &cb, &st, &err);
        CHECKF(rc == TN_OK, "chat: %s", err.message);
        CHECK(st.stop_reason == TN_STOP_EOG);
        CHECKF(b.n == k && !memcmp(b.tokens, a.tokens, (size_t)k * 4), "answer of %d tokens, %d",
               b.n, k);
        /* Every emitted token has its row; the stop token has none. */
        int32_t n_kv;
        const int32_t *kv = tn_session_kv_tokens(s, &n_kv);
        CHECKF(n_kv == n_prompt + k && st.kv_len == n_kv &&
                   tn_ctx_kv_len(tn_session_ctx(s)) == n_kv,
               "KV %d rows, expected %d", n_kv, n_prompt + k);
        CHECK(kv[n_kv - 1] == a.tokens[k - 1]);
        CHECK(cb.kv_errors == 0);
        /* The whole prompt was reused (all but its last row). */
        CHECK(st.restored_tokens == n_prompt - 1);

        /* The same through ask: during the answer the KV grows row by row;
         * after it, only the pin remains. */
        tn_session_reset(s);
        CHECK(tn_ctx_kv_len(tn_session_ctx(s)) == tn_session_pin_info(s).n_pin);
        memset(&b, 0, sizeof b);
        cb.kv_errors = 0;
        cb.expect_kv = -1;
        g.n_stop_tokens = 0;
        g.max_tokens = 6;
        /* first ask without a check to learn the request length */
        ask(s, REQ_A, &g, &b);
        cb.expect_kv = tn_session_pin_info(s).n_pin + b.st.prompt_tokens;
        memset(&b, 0, sizeof b);
        rc = tn_session_ask(s, REQ_A, &g, on_token, &cb, &st, &err);
        CHECK(rc == TN_OK && cb.kv_errors == 0 && b.n == 6);
        CHECK(st.kv_len == tn_session_pin_info(s).n_pin);
    }
    tn_session_free(s);
}

/* --------------------------------------------------- bias, constraint */

/* A logit bias reaches the session's answers (a ban changes the first
 * token, +100 forces one), and bad biases and constraints are refused
 * before anything runs. */
static void bias_and_constraint(fixture *f) {
    tn_session *s = new_session(f, 512, false);
    if (!s || pin(s, SYSTEM) != TN_OK) {
        tn_session_free(s);
        return;
    }
    const int32_t V = tn_model_n_vocab(f->model);
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 4;
    answer a, b;
    ask(s, REQ_A, &g, &a);
    CHECK(a.n == 4);
    tn_logit_bias bias[2] = {{.token = a.tokens[0], .bias = -100.0f}};
    g.logit_bias = bias;
    g.n_logit_bias = 1;
    ask(s, REQ_A, &g, &b);
    CHECKF(b.n > 0 && b.tokens[0] != a.tokens[0], "banned %d, got %d", a.tokens[0],
           b.n > 0 ? b.tokens[0] : -1);
    const int32_t forced = a.tokens[0] == 5 ? 6 : 5;
    bias[0] = (tn_logit_bias){.token = forced, .bias = 100.0f};
    ask(s, REQ_A, &g, &b);
    CHECKF(b.n == 4 && b.tokens[0] == forced && b.tokens[3] == forced, "forced %d, got %d",
           forced, b.n > 0 ? b.tokens[0] : -1);

    tn_error err = {0};
    tn_session_stats st;
    bias[0] = (tn_logit_bias){.token = V, .bias = 1.0f};
    CHECK(tn_session_ask(s, REQ_A, &g, NULL, NULL, &st, &err) == TN_ERR_INVALID);
    CHECK(st.prompt_tokens == 0); /* refused before the prefill */
    bias[0] = (tn_logit_bias){.token = 1, .bias = NAN};
    CHECK(tn_session_ask(s, REQ_A, &g, NULL, NULL, &st, &err) == TN_ERR_INVALID);
    g.n_logit_bias = TN_LOGIT_BIAS_MAX + 1;
    CHECK(tn_session_ask(s, REQ_A, &g, NULL, NULL, &st, &err) == TN_ERR_INVALID);
    g.n_logit_bias = 0;
    g.constrain = 7;
    CHECK(tn_session_ask(s, REQ_A, &g, NULL, NULL, &st, &err) == TN_ERR_INVALID);
    g.constrain = TN_CONSTRAIN_JSON_SCHEMA; /* without its schema */
    CHECK(tn_session_ask(s, REQ_A, &g, NULL, NULL, &st, &err) == TN_ERR_INVALID);
    /* A stop string or token would cut the JSON short. */
    g.constrain = TN_CONSTRAIN_JSON_OBJECT;
    g.stop[0] = ":";
    g.n_stop = 1;
    CHECK(tn_session_ask(s, REQ_A, &g, NULL, NULL, &st, &err) == TN_ERR_INVALID);
    CHECK(st.prompt_tokens == 0);
    g.n_stop = 0;
    g.stop_tokens[0] = 5;
    g.n_stop_tokens = 1;
    CHECK(tn_session_ask(s, REQ_A, &g, NULL, NULL, &st, &err) == TN_ERR_INVALID);
    CHECK(st.prompt_tokens == 0);
    g.n_stop_tokens = 0;
    /* The bias does not stay with the session. */
    g.constrain = TN_CONSTRAIN_NONE;
    ask(s, REQ_A, &g, &b);
    CHECK(b.n == 4 && !memcmp(a.tokens, b.tokens, 4 * sizeof *a.tokens));
    tn_session_free(s);
}

/* ------------------------------------------------------ early refusal */

/* Tokens a conversation of one user message takes: a chat in a roomy
 * session, its prompt counted (nothing is kept before it). -1: failed. */
static int32_t chat_tokens(fixture *f, const char *text) {
    tn_session *s = new_session(f, 2048, false);
    if (!s)
        return -1;
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 1;
    tn_session_message m = {.role = "user", .content = text};
    tn_session_stats st;
    tn_error err = {0};
    int rc = tn_session_chat(s, &m, 1, &g, NULL, NULL, &st, &err);
    CHECKF(rc == TN_OK, "%s: chat to count: %s", f->name, err.message);
    tn_session_free(s);
    return rc == TN_OK ? st.prompt_tokens : -1;
}

/* A conversation of exactly n tokens in an n-token context is taken, one
 * of n + 1 refused: the bound from the length never refuses what fits. */
static void fits_exactly(fixture *f, const char *what, const char *text) {
    const int32_t n = chat_tokens(f, text);
    if (n <= 0)
        return;
    for (int32_t extra = 0; extra < 2; extra++) {
        tn_session *s = new_session(f, n - extra, false);
        if (!s)
            return;
        tn_gen_params g = tn_gen_default_params();
        g.max_tokens = 1;
        tn_session_message m = {.role = "user", .content = text};
        tn_session_stats st;
        tn_error err = {0};
        int rc = tn_session_chat(s, &m, 1, &g, NULL, NULL, &st, &err);
        if (extra == 0)
            CHECKF(rc == TN_OK && st.prompt_tokens == n,
                   "%s: %s of %d tokens in a %d-token context: rc %d, %s", f->name, what, n, n,
                   rc, err.message);
        else
            /* Whether refused from its length or counted, it needs n: the
             * bound never exceeds the count and does not fit in n - 1. */
            CHECKF(rc == TN_ERR_OVERFLOW && err.overflow.needed == n && err.overflow.room == n - 1,
                   "%s: %s of %d tokens in a %d-token context: rc %d, record %lld of %lld", f->name,
                   what, n, n - 1, rc, (long long)err.overflow.needed,
                   (long long)err.overflow.room);
        tn_session_free(s);
    }
}

/* The text of the normal token with the longest text, repeated to about
 * len bytes: what brings the length's bound closest to the real count. */
static char *longest_token_text(const tn_model *m, size_t len) {
    const tn_tokenizer *tok = tn_model_tokenizer(m);
    const char *best = NULL;
    size_t best_len = 0;
    for (int32_t id = 0; id < tn_tokenizer_n_vocab(tok); id++) {
        size_t l = 0;
        const char *p = tn_token_piece(tok, id, &l);
        if (p && l > best_len && tn_token_type_of(tok, id) == TN_TOKEN_TYPE_NORMAL &&
            !memchr(p, '\0', l)) {
            best = p;
            best_len = l;
        }
    }
    char *out = malloc(len + best_len + 1);
    size_t at = 0;
    while (out && best && at < len) {
        memcpy(out + at, best, best_len);
        at += best_len;
    }
    if (out)
        out[at] = '\0';
    return out;
}

/* A message that cannot fit is refused from its length before a byte of it
 * is encoded (tn_tokenizer_bytes_seen, not a clock), by ask, chat and pin,
 * with its size, its least token count and the room. One case a row, each
 * named in its failures. */
typedef enum { EARLY_ASK, EARLY_CHAT, EARLY_PIN } early_kind;

typedef struct early_case {
    const char *name;
    early_kind kind;
    /* chat: MANY messages of "ok ok" (which add up to too much) instead of
     * "hello" and 1 MiB; not a byte of them may be encoded. */
    bool many;
    /* The message: its bytes (%zu), its least tokens (%zu), then n_room
     * numbers that say the room (early_room). */
    const char *format;
    int n_room;
} early_case;

enum { MANY = 20000 };

static const early_case early_cases[] = {
    {"a 1 MiB request", EARLY_ASK, false,
     "the message is %zu bytes as the template writes it, at least %zu tokens; %d are free "
     "after the %d-token system prompt",
     2},
    {"a 1 MiB conversation", EARLY_CHAT, false,
     "the conversation is %zu bytes as the template writes it, at least %zu tokens; the "
     "context holds %d",
     1},
    {"20000 short messages", EARLY_CHAT, true,
     "the conversation is %zu bytes as the template writes it, at least %zu tokens; the "
     "context holds %d",
     1},
    {"a 1 MiB system prompt", EARLY_PIN, false,
     "the system prompt is %zu bytes as the template writes it, at least %zu tokens; the "
     "pinned context holds %d",
     1},
};

/* The numbers a case's message gives for the room in an n_ctx-token
 * session with n_pin pinned rows, and the rows there are for the text. */
static int64_t early_room(const early_case *c, int n_ctx, int n_pin, int want[2]) {
    switch (c->kind) {
    case EARLY_ASK:
        want[0] = n_ctx - n_pin;
        want[1] = n_pin;
        return n_ctx - n_pin;
    case EARLY_CHAT: want[0] = n_ctx; return n_ctx;
    case EARLY_PIN: want[0] = n_ctx; return n_ctx - 1;
    }
    return -1;
}

static void early_refusal(fixture *f) {
    const size_t big = 1u << 20;
    const int n_ctx = 160;
    char *huge = malloc(big + 1);
    tn_session_message *many = calloc(MANY, sizeof *many);
    if (!huge || !many)
        goto out;
    memset(huge, 'a', big);
    huge[big] = '\0';
    for (int i = 0; i < MANY; i++)
        many[i] = (tn_session_message){.role = i % 2 ? "assistant" : "user", .content = "ok ok"};
    many[MANY - 1].role = "user";
    tn_session *s = new_session(f, n_ctx, false);
    if (!s || pin(s, SYSTEM) != TN_OK) {
        tn_session_free(s);
        goto out;
    }
    const int32_t n_pin = tn_session_pin_info(s).n_pin;
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 4;
    tn_error err = {0};

    for (size_t k = 0; k < sizeof early_cases / sizeof early_cases[0]; k++) {
        const early_case *c = &early_cases[k];
        tn_session_message conv[2] = {{.role = "user", .content = "hello"},
                                      {.role = "user", .content = huge}};
        const size_t sent = c->many ? (size_t)MANY * strlen("ok ok") : big;
        const uint64_t seen = tn_tokenizer_bytes_seen();
        int rc = TN_ERR_INVALID;
        switch (c->kind) {
        case EARLY_ASK: rc = tn_session_ask(s, huge, &g, NULL, NULL, NULL, &err); break;
        case EARLY_CHAT:
            rc = c->many ? tn_session_chat(s, many, MANY, &g, NULL, NULL, NULL, &err)
                         : tn_session_chat(s, conv, 2, &g, NULL, NULL, NULL, &err);
            break;
        case EARLY_PIN: rc = tn_session_pin(s, huge, NULL, NULL, &err); break;
        }
        const uint64_t encoded = tn_tokenizer_bytes_seen() - seen;
        CHECKF(rc == TN_ERR_OVERFLOW, "%s: %s gave %d", f->name, c->name, rc);
        CHECKF(c->many ? encoded == 0 : encoded < big, "%s: %s: %llu bytes encoded to refuse it",
               f->name, c->name, (unsigned long long)encoded);

        int want[2] = {0}, got[2] = {0};
        const int64_t room = early_room(c, n_ctx, n_pin, want);
        size_t bytes = 0, least = 0;
        const int n = sscanf(err.message, c->format, &bytes, &least, &got[0], &got[1]);
        CHECKF(n == 2 + c->n_room && bytes > sent && least > (uint64_t)room && got[0] == want[0] &&
                   got[1] == want[1],
               "%s: %s: %s", f->name, c->name, err.message);
        /* The same numbers beside the message, for a caller that must not
         * read them out of its words: a lower bound. */
        CHECKF(err.overflow.needed == (int64_t)least && err.overflow.room == room &&
                   err.overflow.at_least,
               "%s: %s: the record says %lld needed (at least: %d), room %lld; the message: %s",
               f->name, c->name, (long long)err.overflow.needed, err.overflow.at_least,
               (long long)err.overflow.room, err.message);
        /* Refused with nothing changed. */
        CHECKF(tn_session_pin_info(s).n_pin == n_pin && tn_ctx_kv_len(tn_session_ctx(s)) == n_pin,
               "%s: %s: %d pinned rows, %d in the KV after the refusal (%d before)", f->name,
               c->name, tn_session_pin_info(s).n_pin, tn_ctx_kv_len(tn_session_ctx(s)), n_pin);
    }

    /* Empty messages are not refused: the template alone fits. */
    tn_session_message empty[2] = {{.role = "user", .content = ""},
                                   {.role = "user", .content = ""}};
    int rc = tn_session_chat(s, empty, 2, &g, NULL, NULL, NULL, &err);
    CHECKF(rc == TN_OK, "%s: empty messages: %s", f->name, err.message);

    /* The edge, where the bound is closest to the count. */
    char *dense = longest_token_text(f->model, 300);
    if (dense)
        fits_exactly(f, "the longest token repeated", dense);
    free(dense);
    fits_exactly(f, "multi-byte text",
                 "\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\xf0\x9f\x98\x80 "
                 "\xea\xb0\x80\xe1\x84\x80\xe1\x85\xa1 \xe2\x84\xaa");
    fits_exactly(f, "one word", "hello");
    tn_session_free(s);
out:
    free(many);
    free(huge);
}

/* --------------------------------------------------- overflow, cancel */

static void overflow(fixture *f) {
    tn_session *s = new_session(f, 160, false);
    if (!s || pin(s, SYSTEM) != TN_OK) {
        tn_session_free(s);
        return;
    }
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 8;
    answer before;
    ask(s, REQ_A, &g, &before);
    const tn_pin_info pi = tn_session_pin_info(s);
    int32_t n_kv0;
    const int32_t *kv = tn_session_kv_tokens(s, &n_kv0);
    int32_t *kv0 = malloc((size_t)n_kv0 * 4 + 4);
    memcpy(kv0, kv, (size_t)n_kv0 * 4);
    const uint64_t h0 = tn_test_pinned_rows_hash(s);

    /* Under the lower bound (early_refusal) but over the room: encoded,
     * then refused with the exact count. The bound counts each byte as a
     * share of the longest token holding it, which for words is close to
     * their count (since session 49); single letters between spaces are
     * far more tokens than it promises. */
    char longtext[2000] = "";
    for (int i = 0; i < 150; i++) {
        const char letter[3] = {(char)('a' + i % 26), ' ', '\0'};
        strcat(longtext, letter);
    }
    answer a;
    memset(&a, 0, sizeof a);
    collect c = {.a = &a, .s = s, .expect_kv = -1};
    tn_error err = {0};
    tn_session_stats st;
    int rc = tn_session_ask(s, longtext, &g, on_token, &c, &st, &err);
    CHECKF(rc == TN_ERR_OVERFLOW, "a long request gave %d", rc);
    int msg = 0, free_ = 0, sys = 0;
    CHECKF(sscanf(err.message, "the message is %d tokens; %d are free after the %d-token system "
                               "prompt",
                  &msg, &free_, &sys) == 3,
           "message: %s", err.message);
    CHECKF(sys == pi.n_pin && free_ == 160 - pi.n_pin && msg > free_, "message: %s", err.message);
    char want[256];
    snprintf(want, sizeof want,
             "the message is %d tokens; %d are free after the %d-token system prompt", msg, free_,
             sys);
    CHECKF(!strcmp(err.message, want), "message: %s", err.message);
    CHECKF(err.overflow.needed == msg && err.overflow.room == free_ && !err.overflow.at_least,
           "ask: record %lld of %lld (at least: %d); %s", (long long)err.overflow.needed,
           (long long)err.overflow.room, err.overflow.at_least, err.message);
    CHECK(a.n == 0);

    /* The same text as a conversation, counted exactly too: it takes the
     * whole context, system prompt included. */
    {
        tn_session_message m = {.role = "user", .content = longtext};
        int conv = 0, holds = 0;
        rc = tn_session_chat(s, &m, 1, &g, NULL, NULL, NULL, &err);
        CHECKF(rc == TN_ERR_OVERFLOW &&
                   sscanf(err.message, "the conversation is %d tokens; the context holds %d", &conv,
                          &holds) == 2 &&
                   holds == 160 && conv > msg,
               "chat: rc %d, %s", rc, err.message);
        CHECKF(err.overflow.needed == conv && err.overflow.room == 160 && !err.overflow.at_least,
               "chat: record %lld of %lld (at least: %d); %s", (long long)err.overflow.needed,
               (long long)err.overflow.room, err.overflow.at_least, err.message);
    }

    /* A system prompt longer than the context: refused, the old pin stays. */
    char longsys[4000] = "";
    for (int i = 0; i < 40; i++)
        strcat(longsys, "Always be helpful and precise. ");
    rc = tn_session_pin(s, longsys, NULL, NULL, &err);
    CHECKF(rc == TN_ERR_OVERFLOW, "a long system prompt gave %d", rc);
    CHECKF(strstr(err.message, "the system prompt is") != NULL, "message: %s", err.message);
    CHECKF(err.overflow.needed > 159 && err.overflow.room == 159, "pin: record %lld of %lld; %s",
           (long long)err.overflow.needed, (long long)err.overflow.room, err.message);
    tn_pin_info p2 = tn_session_pin_info(s);
    CHECK(p2.n_pin == pi.n_pin && p2.prefill_ms == pi.prefill_ms);

    /* Nothing changed: the same KV, the same pinned rows, the same answer. */
    int32_t n_kv1;
    kv = tn_session_kv_tokens(s, &n_kv1);
    CHECK(n_kv1 == n_kv0 && !memcmp(kv, kv0, (size_t)n_kv0 * 4));
    CHECK(tn_test_pinned_rows_hash(s) == h0);
    answer after;
    ask(s, REQ_A, &g, &after);
    CHECK(same(&before, &after));

    /* Cancelled mid-answer from the callback: the pin is untouched. */
    memset(&a, 0, sizeof a);
    c.cancel_after = 2;
    rc = tn_session_ask(s, REQ_B, &g, on_token, &c, &st, &err);
    CHECKF(rc == TN_OK && st.stop_reason == TN_STOP_CANCELLED && a.n == 2,
           "cancel: rc %d, %s, %d tokens", rc, tn_stop_reason_name(st.stop_reason), a.n);
    CHECK(tn_ctx_kv_len(tn_session_ctx(s)) == pi.n_pin);
    ask(s, REQ_A, &g, &after);
    CHECK(same(&before, &after));
    free(kv0);
    tn_session_free(s);
}

static bool stop_progress(int32_t done, int32_t total, void *user) {
    (void)total;
    int *calls = user;
    ++*calls;
    return done < 64; /* cancel after the first chunk */
}

static void pin_cancel(fixture *f) {
    tn_session *s = new_session(f, 512, false);
    if (!s || pin(s, SYSTEM) != TN_OK) {
        tn_session_free(s);
        return;
    }
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 8;
    answer before, after;
    ask(s, REQ_A, &g, &before);
    const tn_pin_info pi = tn_session_pin_info(s);
    char longsys[4000] = "";
    for (int i = 0; i < 12; i++)
        strcat(longsys, "Answer briefly and mention the aisle. ");
    int calls = 0;
    tn_error err = {0};
    int rc = tn_session_pin(s, longsys, stop_progress, &calls, &err);
    CHECKF(rc == TN_ERR_CANCELLED && calls >= 1, "cancelled pin: %d after %d calls", rc, calls);
    tn_pin_info p2 = tn_session_pin_info(s);
    CHECK(p2.n_pin == pi.n_pin);
    /* The old pin answers as before (restored, since the KV was cut). */
    ask(s, REQ_A, &g, &after);
    CHECK(same(&before, &after));
    tn_session_free(s);
}

/* A pin's progress is of all its tokens, and its first report, before any
 * work, gives the rows it keeps: after an edit at the end of a long prompt
 * most of it is kept, and a speed counted from 0 read thousands of tokens
 * a second. */
typedef struct pin_reports {
    int n;
    int32_t first_done, first_total, last_done, last_total;
    bool rising;
} pin_reports;

static bool record_progress(int32_t done, int32_t total, void *user) {
    pin_reports *r = user;
    if (r->n == 0) {
        r->first_done = done;
        r->first_total = total;
    } else if (done < r->last_done || total != r->last_total) {
        r->rising = false;
    }
    r->last_done = done;
    r->last_total = total;
    r->n++;
    return true;
}

static void pin_progress_kept(fixture *f) {
    tn_session *s = new_session(f, 512, false);
    char longsys[4000] = "";
    for (int i = 0; i < 12; i++)
        strcat(longsys, "Answer briefly and mention the aisle. ");
    if (!s || pin(s, longsys) != TN_OK) {
        tn_session_free(s);
        return;
    }
    const int32_t n_a = tn_session_pin_info(s).n_pin;
    strcat(longsys, "And one more sentence at its end.");
    int32_t n_b = 0;
    tn_error err = {0};
    CHECKF(tn_session_count_system_tokens(s, longsys, &n_b, &err) == TN_OK, "%s", err.message);
    pin_reports r = {.rising = true};
    int rc = tn_session_pin(s, longsys, record_progress, &r, &err);
    CHECKF(rc == TN_OK, "%s", err.message);
    CHECKF(r.n >= 2 && r.first_total == n_b && r.first_done > n_a / 2 && r.first_done < n_b,
           "first report %d / %d (pins of %d then %d tokens)", r.first_done, r.first_total, n_a,
           n_b);
    CHECKF(r.rising && r.last_done == n_b && r.last_total == n_b, "last report %d / %d of %d",
           r.last_done, r.last_total, n_b);
    CHECK(tn_session_pin_info(s).n_pin == n_b);
    tn_session_free(s);
}

/* ------------------------------------------------------- snapshots */

static void damaged_snapshots(fixture *f) {
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 8;
    answer ref;
    char sys[512];
    snprintf(sys, sizeof sys, "%s Snapshot test.", SYSTEM);
    tn_session *s = new_session(f, 256, true);
    if (!s || pin(s, sys) != TN_OK) {
        tn_session_free(s);
        return;
    }
    CHECK(tn_session_pin_info(s).snapshot_saved);
    ask(s, REQ_A, &g, &ref);
    int32_t n_pin;
    const int32_t *pt = tn_session_pinned_tokens(s, &n_pin);
    tn_pin_key key;
    tn_pin_key_compute(f->model, pt, n_pin, &key, NULL);
    char *path = tn_pin_path(f->cache, &key);
    tn_session_free(s);

    for (int damage = 0; damage < 3; damage++) {
        FILE *fp = fopen(path, "r+b");
        CHECK(fp != NULL);
        if (!fp)
            break;
        fseek(fp, 0, SEEK_END);
        long size = ftell(fp);
        if (damage == 0 || damage == 1) {
            long off = damage == 0 ? size - 5 : 130; /* KV bytes; token bytes */
            fseek(fp, off, SEEK_SET);
            int ch = fgetc(fp);
            fseek(fp, off, SEEK_SET);
            fputc(ch ^ 0x10, fp);
            fclose(fp);
        } else {
            fclose(fp);
            CHECK(truncate(path, size - 100) == 0);
        }
        warnings = 0;
        s = new_session(f, 256, true);
        if (!s || pin(s, sys) != TN_OK) {
            tn_session_free(s);
            break;
        }
        tn_pin_info pi = tn_session_pin_info(s);
        CHECKF(!pi.loaded_from_snapshot && pi.snapshot_saved, "damage %d: loaded %d saved %d",
               damage, pi.loaded_from_snapshot, pi.snapshot_saved);
        CHECKF(warnings == 1 && strstr(last_warning, "ignored"), "damage %d: warning '%s'",
               damage, last_warning);
        /* Carried like an error (docs/TRANSLATING.md): its English format, the
         * msgid, with the reason inside it, and its arguments, which a
         * translation may reorder. */
        const char *want_format =
            damage < 2 ? "%s: pin snapshot ignored (damaged data: checksum mismatch); "
                         "recomputing the pin"
                       : "%s: pin snapshot ignored (truncated: %llu bytes, expected %llu); "
                         "recomputing the pin";
        CHECKF(last_warn.format && !strcmp(last_warn.format, want_format) &&
                   last_warn.code == TN_ERR_FORMAT,
               "damage %d: warning format '%s'", damage,
               last_warn.format ? last_warn.format : "(null)");
        char de[TN_ERROR_MESSAGE_MAX], want[TN_ERROR_MESSAGE_MAX];
        if (damage < 2) {
            tn_error_format(&last_warn, "%s: Schnappschuss verworfen", de, sizeof de);
            snprintf(want, sizeof want, "%s: Schnappschuss verworfen", path);
        } else {
            tn_error_format(&last_warn, "%1$s: %3$llu statt %2$llu Bytes", de, sizeof de);
            snprintf(want, sizeof want, "%s: %ld statt %ld Bytes", path, size, size - 100);
        }
        CHECKF(!strcmp(de, want), "damage %d: translated warning '%s', want '%s'", damage, de,
               want);
        answer x;
        ask(s, REQ_A, &g, &x);
        CHECKF(same(&x, &ref), "damage %d: a recomputed pin answers differently", damage);
        tn_session_free(s);
        /* Recomputed and saved again: the next start loads it. */
        s = new_session(f, 256, true);
        if (s && pin(s, sys) == TN_OK)
            CHECK(tn_session_pin_info(s).loaded_from_snapshot);
        tn_session_free(s);
    }
    free(path);
}

/* A snapshot cut short in place (by another program) while its rows are
 * copied into a session whose KV already holds a prefix of the pin (a
 * shorter pin before): the pin is refused with a warning (TN_ERR_IO, "it
 * shrank"), not a SIGBUS; the copy had overwritten some of the rows the
 * session kept, so the KV is recomputed from nothing, and the answers are
 * those of the pin computed afresh. The test hook cuts the file in the
 * copy's guarded pass (engine/pin-store.c, "pin-copy"). */
static const char *shrink_path;
static int shrink_fired;

static void shrink_hook(const char *pass, void *user) {
    (void)user;
    if (shrink_fired || !shrink_path || strcmp(pass, "pin-copy"))
        return;
    shrink_fired = 1;
    if (truncate(shrink_path, TN_PIN_HEADER_BYTES) != 0)
        perror("truncate");
}

static void snapshot_shrinks(fixture *f) {
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 8;
    char sys[512], longer[2048];
    snprintf(sys, sizeof sys, "%s Shrink test.", SYSTEM);
    snprintf(longer, sizeof longer, "%s Shrink test.", SYSTEM);
    for (int i = 0; i < 4; i++)
        strcat(longer, " Answer briefly and mention the aisle.");
    tn_session *s = new_session(f, 512, true);
    answer ref;
    if (!s || pin(s, longer) != TN_OK) {
        tn_session_free(s);
        return;
    }
    ask(s, REQ_A, &g, &ref);
    int32_t n_pin;
    const int32_t *pt = tn_session_pinned_tokens(s, &n_pin);
    tn_pin_key key;
    tn_pin_key_compute(f->model, pt, n_pin, &key, NULL);
    char *path = tn_pin_path(f->cache, &key);
    tn_session_free(s);
    s = new_session(f, 512, true);
    if (!s || pin(s, sys) != TN_OK) {
        tn_session_free(s);
        free(path);
        return;
    }
    warnings = 0;
    shrink_path = path;
    shrink_fired = 0;
    tn_test_read_guard_hook(shrink_hook, NULL);
    int rc = pin(s, longer);
    tn_test_read_guard_hook(NULL, NULL);
    shrink_path = NULL;
    CHECKF(rc == TN_OK && shrink_fired, "shrink: pin gave %d, the copy %s", rc,
           shrink_fired ? "was cut" : "never ran");
    tn_pin_info pi = tn_session_pin_info(s);
    CHECKF(!pi.loaded_from_snapshot && pi.snapshot_saved, "shrink: loaded %d saved %d",
           pi.loaded_from_snapshot, pi.snapshot_saved);
    CHECKF(warnings == 1 && strstr(last_warning, "shrank") && last_warn.code == TN_ERR_IO,
           "shrink: warning '%s'", last_warning);
    answer x;
    ask(s, REQ_A, &g, &x);
    CHECKF(same(&x, &ref), "shrink: the recomputed pin answers differently");
    tn_session_free(s);
    free(path);
}

/* The model file rewritten in place (other weights): old pins must not be
 * used. Runs last on a fixture: it replaces the model. */
static void model_replaced(fixture *f) {
    char sys[512];
    snprintf(sys, sizeof sys, "%s Replaced model test.", SYSTEM);
    tn_session *s = new_session(f, 256, true);
    if (s)
        pin(s, sys);
    tn_session_free(s);
    if (!make_model(f, f->name, "llama", NULL, 999))
        return;
    warnings = 0;
    s = new_session(f, 256, true);
    if (s && pin(s, sys) == TN_OK)
        CHECKF(!tn_session_pin_info(s).loaded_from_snapshot,
               "a pin of the old model file was loaded for the new one");
    tn_session_free(s);
}

/* ----------------------------------------------------------------- chat */

static void chat(fixture *f) {
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 10;
    tn_session *s = new_session(f, 512, false);
    tn_session *fresh = new_session(f, 512, false);
    if (!s || !fresh || pin(s, SYSTEM) != TN_OK || pin(fresh, SYSTEM) != TN_OK)
        goto out;
    tn_session_message conv[3] = {{.role = "user", .content = REQ_A},
                                  {.role = "assistant", .content = ""},
                                  {.role = "user", .content = REQ_B}};
    answer a1, a2, a3;
    memset(&a1, 0, sizeof a1);
    collect c = {.a = &a1, .s = s, .expect_kv = -1};
    tn_error err = {0};
    int rc = tn_session_chat(s, conv, 1, &g, on_token, &c, &a1.st, &err);
    CHECKF(rc == TN_OK, "chat: %s", err.message);
    /* The pinned system part was reused, not prefilled again. */
    CHECKF(a1.st.restored_tokens >= tn_session_pin_info(s).n_pin, "restored %d of pin %d",
           a1.st.restored_tokens, tn_session_pin_info(s).n_pin);
    conv[1].content = a1.text;
    memset(&a2, 0, sizeof a2);
    c.a = &a2;
    rc = tn_session_chat(s, conv, 3, &g, on_token, &c, &a2.st, &err);
    CHECKF(rc == TN_OK, "chat: %s", err.message);
    const int32_t first_len = a1.st.restored_tokens + a1.st.prompt_tokens;
    CHECKF(a2.st.restored_tokens >= first_len, "second turn reused %d tokens of %d",
           a2.st.restored_tokens, first_len);
    /* The same conversation in a fresh session: the same answer. */
    memset(&a3, 0, sizeof a3);
    collect c3 = {.a = &a3, .s = fresh, .expect_kv = -1};
    rc = tn_session_chat(fresh, conv, 3, &g, on_token, &c3, &a3.st, &err);
    CHECKF(rc == TN_OK, "chat: %s", err.message);
    CHECK(same(&a2, &a3));
    /* Regenerate: everything but the last row is reused; the same answer. */
    answer a4;
    memset(&a4, 0, sizeof a4);
    c.a = &a4;
    rc = tn_session_chat(s, conv, 3, &g, on_token, &c, &a4.st, &err);
    CHECK(rc == TN_OK && same(&a2, &a4));
    CHECK(a4.st.prompt_tokens == 1);

    /* A stop string: the answer ends before its first occurrence. */
    if (a1.text_len > 4) {
        tn_gen_params gs = g;
        char stop[3] = {a1.text[a1.text_len / 2], a1.text[a1.text_len / 2 + 1], 0};
        gs.stop[0] = stop;
        gs.n_stop = 1;
        const char *at = strstr(a1.text, stop);
        answer a5;
        memset(&a5, 0, sizeof a5);
        c.a = &a5;
        rc = tn_session_chat(s, conv, 1, &gs, on_token, &c, &a5.st, &err);
        CHECK(rc == TN_OK && a5.st.stop_reason == TN_STOP_STRING);
        CHECKF(a5.text_len == (size_t)(at - a1.text) && !memcmp(a5.text, a1.text, a5.text_len),
               "stop '%s': got '%s' of '%s'", stop, a5.text, a1.text);
    }
out:
    tn_session_free(s);
    tn_session_free(fresh);
}

/* ----------------------------------------------- raw tokens, bad input */

static void tokens_api(fixture *f) {
    tn_session *s = new_session(f, 64, false);
    if (!s)
        return;
    int32_t sys[20], req[8];
    for (int i = 0; i < 20; i++)
        sys[i] = 10 + i * 3;
    for (int i = 0; i < 8; i++)
        req[i] = 50 + i;
    tn_error err = {0};
    CHECK(tn_session_pin_tokens(s, sys, 20, NULL, NULL, &err) == TN_OK);
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 5;
    answer a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    collect c = {.a = &a, .s = s, .expect_kv = 28};
    CHECK(tn_session_ask_tokens(s, req, 8, &g, on_token, &c, &a.st, &err) == TN_OK);
    c.a = &b;
    CHECK(tn_session_ask_tokens(s, req, 8, &g, on_token, &c, &b.st, &err) == TN_OK);
    CHECK(same(&a, &b) && a.n == 5 && c.kv_errors == 0);
    /* Exactly full: allowed; one more: refused. */
    int32_t big[64];
    for (int i = 0; i < 64; i++)
        big[i] = 60 + i;
    CHECK(tn_session_ask_tokens(s, big, 44, &g, NULL, NULL, NULL, &err) == TN_OK);
    CHECK(tn_session_ask_tokens(s, big, 45, &g, NULL, NULL, NULL, &err) == TN_ERR_OVERFLOW);
    CHECK(!strcmp(err.message,
                  "the message is 45 tokens; 44 are free after the 20-token system prompt"));
    /* What a server's completion runs (its prompt tokenized): the record. */
    CHECKF(err.overflow.needed == 45 && err.overflow.room == 44 && !err.overflow.at_least,
           "tokens: record %lld of %lld (at least: %d)", (long long)err.overflow.needed,
           (long long)err.overflow.room, err.overflow.at_least);
    int32_t bad = tn_model_n_vocab(f->model);
    CHECK(tn_session_ask_tokens(s, &bad, 1, &g, NULL, NULL, NULL, &err) == TN_ERR_INVALID);
    /* Any other error leaves no record behind from the one before. */
    CHECKF(err.overflow.needed == 0 && err.overflow.room == 0 && !err.overflow.at_least,
           "an invalid token after an overflow: record %lld of %lld",
           (long long)err.overflow.needed, (long long)err.overflow.room);
    CHECK(tn_session_ask_tokens(s, req, 0, &g, NULL, NULL, NULL, &err) == TN_ERR_INVALID);
    CHECK(tn_session_pin_tokens(s, big, 64, NULL, NULL, &err) == TN_ERR_OVERFLOW);
    CHECKF(err.overflow.needed == 64 && err.overflow.room == 63 && !err.overflow.at_least,
           "pin tokens: record %lld of %lld (at least: %d)", (long long)err.overflow.needed,
           (long long)err.overflow.room, err.overflow.at_least);
    tn_gen_params bg = g;
    bg.n_stop = 1;
    bg.stop[0] = "";
    CHECK(tn_session_ask_tokens(s, req, 8, &bg, NULL, NULL, NULL, &err) == TN_ERR_INVALID);
    tn_session_message m = {.role = "robot", .content = "hi"};
    CHECK(tn_session_chat(s, &m, 1, &g, NULL, NULL, NULL, &err) == TN_ERR_INVALID);
    CHECK(tn_session_pin_info(s).n_pin == 20);
    tn_session_unpin(s);
    CHECK(tn_session_pin_info(s).n_pin == 0 && tn_ctx_kv_len(tn_session_ctx(s)) == 0);
    tn_session_free(s);
    tn_session_free(NULL);
    /* A context longer than the model's: refused. */
    tn_session_params sp = tn_session_default_params();
    sp.n_ctx = tn_model_n_ctx_train(f->model) + 1;
    tn_session *t = NULL;
    CHECK(tn_session_new(f->model, sp, &t, &err) == TN_ERR_INVALID && t == NULL);
    /* Nothing is pinned when a session is made: the message speaks of the
     * context asked for and says what fits, not of a pin. */
    char want[128];
    snprintf(want, sizeof want, "a context of %d tokens is longer than the model's %d",
             sp.n_ctx, tn_model_n_ctx_train(f->model));
    CHECKF(strstr(err.message, want) && strstr(err.message, "ask for") &&
               !strstr(err.message, "pinned"),
           "message: %s", err.message);
}

/* The tokenizer's arrays (tokens, scores, types) cut to their first
 * *(uint64_t *)keep entries: the embedding then has rows that are no token. */
static bool fewer_tokens(const char *key, tn_gguf_value *v, tn_gguf_writer *w, void *keep) {
    (void)w;
    if ((!strcmp(key, "tokenizer.ggml.tokens") || !strcmp(key, "tokenizer.ggml.scores") ||
         !strcmp(key, "tokenizer.ggml.token_type")) &&
        v->v.arr.n > *(uint64_t *)keep)
        v->v.arr.n = *(uint64_t *)keep;
    return false;
}

/* A tokenizer shorter than the embedding (the loader allows padded
 * embeddings): no answer holds an id past the last token, sampled or
 * greedy (one did, and the answer stopped at "token id 121 is outside the
 * vocabulary"). */
static void padded_embedding(fixture *f) {
    char path[4200];
    snprintf(path, sizeof path, "%s/fewer-tokens.gguf", tn_test_tmpdir());
    const int32_t rows = tn_model_n_vocab(f->model), keep = rows / 4;
    uint64_t n_keep = (uint64_t)keep;
    CHECK(tn_test_clone_gguf(f->model_path, path, fewer_tokens, &n_keep));
    tn_model *m = NULL;
    tn_error err = {0};
    int rc = tn_model_load(path, tn_model_default_params(), &m, &err);
    CHECKF(rc == TN_OK, "load: %s", err.message);
    if (rc != TN_OK)
        return;
    CHECK(tn_tokenizer_n_vocab(tn_model_tokenizer(m)) == keep && tn_model_n_vocab(m) == rows);
    fixture pf = *f;
    pf.model = m;
    tn_session *s = new_session(&pf, 512, false);
    int past = 0, generated = 0;
    for (int k = 0; s && k < 8; k++) {
        tn_gen_params g = tn_session_default_params().gen;
        g.max_tokens = 48;
        g.sampler.temperature = k % 2 ? 2.0f : 0.0f;
        g.sampler.seed = (uint64_t)k;
        answer a;
        memset(&a, 0, sizeof a);
        collect c = {.a = &a, .s = s, .expect_kv = -1};
        a.rc = tn_session_ask(s, k % 2 ? "tell me a story" : "hello there", &g, on_token, &c,
                              &a.st, &err);
        CHECKF(a.rc == TN_OK, "ask %d: %s", k, err.message);
        for (int i = 0; i < a.n; i++)
            past += a.tokens[i] >= keep;
        generated += a.n;
    }
    CHECKF(past == 0 && generated > 0, "%d of %d generated ids past the tokenizer's %d tokens",
           past, generated, keep);
    tn_session_free(s);
    tn_model_free(m);
}

int main(void) {
    fixture syn = {0};
    if (make_model(&syn, "synthetic", "llama", NULL, 9)) {
        for (int think = 0; think < 2; think++)
            for (int sampled = 0; sampled < 2; sampled++)
                abab(&syn, think, sampled);
        stop_token(&syn);
        bias_and_constraint(&syn);
        overflow(&syn);
        early_refusal(&syn);
        pin_cancel(&syn);
        pin_progress_kept(&syn);
        damaged_snapshots(&syn);
        snapshot_shrinks(&syn);
        chat(&syn);
        tokens_api(&syn);
        padded_embedding(&syn);
        model_replaced(&syn);
    }
    tn_model_free(syn.model);

    /* Gemma 4: snapshots of a KV cache where shared-KV layers own no rows
     * and sliding and full layers have different head sizes. */
    fixture g4 = {0};
    if (make_model(&g4, "gemma4", "gemma4", NULL, 13)) {
        abab(&g4, false, false);
        abab(&g4, false, true);
        chat(&g4);
    }
    tn_model_free(g4.model);

    /* qwen3moe: a mixture of experts (rows of a prefill grouped by expert,
     * a decode step reading 2 of 8) pins and restores like a dense model. */
    fixture moe = {0};
    if (make_model(&moe, "qwen3moe", "qwen3moe", NULL, 15)) {
        abab(&moe, false, false);
        abab(&moe, false, true);
        chat(&moe);
    }
    tn_model_free(moe.model);

    /* gpt-oss: attention sinks, biases, sliding and full layers, MXFP4
     * experts. */
    fixture oss = {0};
    if (make_model(&oss, "gpt-oss", "gpt-oss", NULL, 19)) {
        abab(&oss, false, false);
        abab(&oss, false, true);
        chat(&oss);
    }
    tn_model_free(oss.model);

    /* Gemma 4 26B-A4B's layers: the dense feed-forward beside a mixture. */
    fixture g4moe = {0};
    if (make_model(&g4moe, "gemma4moe", "gemma4moe", NULL, 17)) {
        abab(&g4moe, false, false);
        abab(&g4moe, false, true);
        chat(&g4moe);
    }
    tn_model_free(g4moe.model);

    const char *vocab = tn_test_vocab("qwen3");
    if (vocab) {
        char tokjson[4200];
        snprintf(tokjson, sizeof tokjson, "%s/tokenizer.json", vocab);
        fixture q = {0};
        if (make_model(&q, "qwen3", "qwen3", tokjson, 11)) {
            for (int think = 0; think < 2; think++)
                for (int sampled = 0; sampled < 2; sampled++)
                    abab(&q, think, sampled);
            stop_token(&q);
            overflow(&q);
            early_refusal(&q);
            chat(&q);
        }
        tn_model_free(q.model);
    } else {
        fprintf(stderr, "note: no qwen3 vocabulary (TERN_VOCAB_DIR); real-vocabulary part skipped\n");
    }
    return tn_test_finish("session");
}
