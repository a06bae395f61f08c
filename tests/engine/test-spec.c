/* Speculative decoding: lossless, per request, with defined edge cases.
 *
 * On tiny random-weight models written with tn_mkmodel (synthetic vocabulary):
 *   greedy-ARCH  for each weight type, many prompts (random ones, and
 *                repetitive ones on which the lookup drafter proposes long
 *                blocks), every drafter (lookup, a draft model, the target
 *                itself as draft model, an oracle replaying the plain answer,
 *                a corrupted oracle, random guesses, empty drafts; DFlash drafts
 *                in both of llama.cpp's shapes: the default one, and two
 *                Gemma-style layers with a d2t reduced vocabulary) gives
 *                BITWISE the tokens, stop reason and final KV of
 *                plain decoding, in flash mode (the pinned rows' bytes never
 *                change) and in multi-turn chat; the drafter is switched per
 *                request in one session; answers stopped by max_tokens, a stop
 *                token, a stop string or a full context in the middle of an
 *                accepted block end exactly where plain decoding ends;
 *   sampling     the joint distribution of the first three tokens with
 *                speculation (several drafters, temperature 1, top-k 4) matches
 *                the exact distribution computed from the target's logits
 *                (chi-square goodness of fit; false-alarm rate 1e-4 per
 *                comparison, fixed seeds, so a pass is reproducible); the
 *                rejection rule alone is checked the same way on made-up p, q;
 *   api          incompatible draft models (a token differs, the sizes differ)
 *                fail naming the first differing token; a drafter returning
 *                too many tokens, a token outside the vocabulary or an error
 *                fails the request with the KV back at the pin; drafts asked
 *                near a full context are cut to the free rows; stats and the
 *                per-token "drafted" flags agree; the lookup drafter's
 *                proposals on known histories;
 *   dflash       the DFlash drafter's features and drafts (Qwen3 targets);
 *   mtp          the Gemma 4 MTP assistant (llama.cpp's gemma4-assistant): its
 *                keys and tensors, no drafts outside a request, drafts in one,
 *                refusals of truncated, garbage and mismatched files; it also
 *                runs in the greedy-gemma4 suite (flash, chat, toggling);
 *   sampling-mtp the sampled distribution with the assistant (chi-square);
 *   dflash-layout  llama.cpp's layout for a gemma4 target: the window and
 *                per-layer pattern, softcapping, embedding scale and tokenizer
 *                carried over; d2t drafts only name mapped ids; truncated and
 *                mismatched files fail with one line naming file and problem;
 *   sweep        random cases of every architecture, drafter, sampler setting,
 *                pin, stop and mode against plain decoding (below; not in
 *                "all": TERN_SPEC_SWEEP=N runs N cases).
 */
#include "tn-internal.h"
#include "tn-session.h"
#include "tn-spec.h"
#include "tn-test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 512

/* ------------------------------------------------------------- helpers */

typedef struct answer {
    int32_t tokens[MAX_OUT];
    uint8_t drafted[MAX_OUT]; /* tn_session_token_drafted() inside the callback */
    /* tn_session_token_logprobs() inside the callback: with speculation
     * they come from the verification rows and must equal plain decoding's
     * bit for bit (same_answer) */
    float logprob[MAX_OUT];
    tn_token_logprob top[MAX_OUT][3];
    int logprob_errors;
    int n;
    char text[8192];
    size_t text_len;
    int rc;
    tn_session_stats st;
    char error[TN_ERROR_MESSAGE_MAX];
} answer;

typedef struct collect {
    answer *a;
    tn_session *s;
} collect;

/* > 0: on_token stops the answer once it has this many tokens (the sweep). */
static int cb_stop_after;

static bool on_token(const char *piece, int32_t token, void *user) {
    collect *c = user;
    answer *a = c->a;
    if (token >= 0 && a->n < MAX_OUT) {
        a->drafted[a->n] = tn_session_token_drafted(c->s);
        tn_error err = {0};
        if (tn_session_token_logprobs(c->s, 3, &a->logprob[a->n], a->top[a->n], &err) != 3)
            a->logprob_errors++;
        a->tokens[a->n++] = token;
    } else if (token < 0) { /* held-back text only: no token, no row */
        tn_token_logprob top[3];
        tn_error err = {0};
        if (tn_session_token_logprobs(c->s, 3, NULL, top, &err) != TN_ERR_INVALID)
            a->logprob_errors++;
    }
    size_t len = strlen(piece);
    if (a->text_len + len < sizeof a->text) {
        memcpy(a->text + a->text_len, piece, len);
        a->text_len += len;
        a->text[a->text_len] = '\0';
    }
    return !(cb_stop_after > 0 && a->n >= cb_stop_after);
}

static bool same_answer(const answer *x, const answer *y) {
    return x->rc == y->rc && x->n == y->n &&
           !memcmp(x->tokens, y->tokens, (size_t)x->n * sizeof(int32_t)) &&
           !memcmp(x->logprob, y->logprob, (size_t)x->n * sizeof x->logprob[0]) &&
           !memcmp(x->top, y->top, (size_t)x->n * sizeof x->top[0]) &&
           x->logprob_errors == 0 && y->logprob_errors == 0 &&
           x->text_len == y->text_len && !memcmp(x->text, y->text, x->text_len) &&
           x->st.stop_reason == y->st.stop_reason && x->st.kv_len == y->st.kv_len;
}

static void print_tokens(const char *label, const answer *a) {
    fprintf(stderr, "  %s (%d, stop %s):", label, a->n, tn_stop_reason_name(a->st.stop_reason));
    for (int i = 0; i < a->n && i < 40; i++)
        fprintf(stderr, " %d%s", a->tokens[i], a->drafted[i] ? "*" : "");
    fputc('\n', stderr);
}

/* Stats and flags agree with each other and with what the callback saw. */
static void check_stats(const char *what, tn_session *s, const answer *a) {
    int32_t nf = -1;
    const uint8_t *flags = tn_session_drafted_flags(s, &nf);
    CHECKF(nf == a->n, "%s: %d flags for %d tokens", what, nf, a->n);
    int drafted = 0;
    for (int i = 0; i < a->n && i < nf; i++) {
        CHECKF(flags[i] == a->drafted[i], "%s: flag %d differs from the callback's", what, i);
        drafted += a->drafted[i];
    }
    CHECKF(a->st.accepted <= a->st.drafted && drafted <= a->st.accepted,
           "%s: drafted %d, accepted %d, delivered from drafts %d", what, a->st.drafted,
           a->st.accepted, drafted);
    CHECKF(a->st.drafted == 0 || a->st.verify_steps > 0, "%s: drafts without a verify step", what);
}

static const char *tmp_path(const char *name) {
    static char buf[8][4096];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 4096, "%s/%s", tn_test_tmpdir(), name);
    return p;
}

/* A tokenizer.json for make_model (NULL: the synthetic vocabulary). */
static const char *mk_tokenizer;

static tn_model *make_model(const char *file, const char *arch, const char *type, int64_t embd,
                            int64_t layers, uint64_t seed, float logit_scale) {
    tn_mkmodel_params p = tn_mkmodel_default_params();
    p.tokenizer = mk_tokenizer;
    /* gemma4moe: the gemma4 model below with 26B-A4B's mixture beside each
     * dense feed-forward (8 experts, 2 per token) */
    const bool g4moe = !strcmp(arch, "gemma4moe");
    if (g4moe)
        arch = "gemma4";
    p.arch = arch;
    p.type = type;
    p.n_embd = embd;
    p.n_layer = layers;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.head_dim = 32;
    p.n_ff = 2 * embd;
    p.n_ctx = 2048;
    p.sliding_window = 16; /* gemma3: short enough to matter in these contexts */
    if (!strcmp(arch, "qwen3moe") || !strcmp(arch, "gpt-oss") || g4moe) {
        /* 8 experts, 2 per token: verify batches group rows by expert */
        p.n_expert = 8;
        p.n_expert_used = 2;
        p.n_ff_exp = embd;
    }
    if (!strcmp(arch, "gemma4")) {
        /* sliding, sliding, full, ...: the last three layers of six reuse
         * layers 1 and 2's KV; full layers with twice the head size and a
         * proportional rope; per-layer inputs; double-wide shared FFNs */
        p.n_layer = layers > 1 ? 6 : 3;
        p.swa_period = 3;
        p.n_shared_kv = layers > 1 ? 3 : 0;
        p.head_dim = 64;
        p.head_dim_swa = 32;
        p.n_embd_per_layer = 32;
        p.double_wide_ffn = true;
        p.tied_output = true;
    }
    p.seed = seed;
    p.n_threads = 2;
    if (logit_scale > 0)
        p.logit_scale = logit_scale;
    tn_error err = {0};
    const char *path = tmp_path(file);
    int rc = tn_mkmodel(&p, path, &err);
    CHECKF(rc == TN_OK, "mkmodel %s: %s", file, err.message);
    if (rc != TN_OK)
        return NULL;
    tn_model *m = NULL;
    rc = tn_model_load(path, tn_model_default_params(), &m, &err);
    CHECKF(rc == TN_OK, "load %s: %s", file, err.message);
    return m;
}

static void ask(tn_session *s, const int32_t *req, int32_t n_req, const tn_gen_params *g,
                answer *a) {
    memset(a, 0, sizeof *a);
    collect c = {.a = a, .s = s};
    tn_error err = {0};
    a->rc = tn_session_ask_tokens(s, req, n_req, g, on_token, &c, &a->st, &err);
    snprintf(a->error, sizeof a->error, "%s", a->rc == TN_OK ? "" : err.message);
}

/* ------------------------------------------------------ custom drafters */

/* Replays a known continuation: proposes expected[n..] when the history is
 * expected[0..n). corrupt_every > 0 changes every that-many-th proposed token
 * (partial acceptance). */
typedef struct oracle {
    int32_t expected[2048];
    int32_t n_expected;
    int corrupt_every;
    int32_t n_vocab;
    int calls, mismatched;
} oracle;

static int32_t oracle_propose(void *self, const int32_t *h, int32_t n, int32_t max, int32_t *draft,
                              tn_error *err) {
    (void)err;
    oracle *o = self;
    o->calls++;
    if (n > o->n_expected || memcmp(h, o->expected, (size_t)n * sizeof *h) != 0) {
        o->mismatched++;
        return 0;
    }
    int32_t nd = 0;
    for (; nd < max && n + nd < o->n_expected; nd++) {
        draft[nd] = o->expected[n + nd];
        if (o->corrupt_every > 0 && (n + nd) % o->corrupt_every == 0)
            draft[nd] = (draft[nd] + 1) % o->n_vocab;
    }
    return nd;
}

static void oracle_set(oracle *o, const int32_t *pin, int32_t n_pin, const int32_t *req,
                       int32_t n_req, const answer *a) {
    o->n_expected = 0;
    for (int32_t i = 0; i < n_pin; i++)
        o->expected[o->n_expected++] = pin[i];
    for (int32_t i = 0; i < n_req; i++)
        o->expected[o->n_expected++] = req[i];
    for (int i = 0; i < a->n && o->n_expected < 2048; i++)
        o->expected[o->n_expected++] = a->tokens[i];
}

/* Random guesses (mostly rejected). */
typedef struct noise {
    uint64_t state;
    int32_t n_vocab;
    int32_t fixed_len; /* > 0: always this many (may exceed max: a broken drafter) */
    int32_t bad_token; /* >= 0: propose this id (outside the vocabulary) */
    bool fail;
} noise;

static int32_t noise_propose(void *self, const int32_t *h, int32_t n, int32_t max, int32_t *draft,
                             tn_error *err) {
    (void)h;
    (void)n;
    noise *z = self;
    if (z->fail)
        return tn_fail(err, TN_ERR_IO, "the test drafter failed on purpose");
    int32_t nd = z->fixed_len > 0 ? z->fixed_len : max;
    for (int32_t i = 0; i < nd && i < TN_SPEC_MAX_DRAFT; i++)
        draft[i] = z->bad_token >= 0 ? z->bad_token
                                     : (int32_t)(tn_test_rand(&z->state) % (uint64_t)z->n_vocab);
    return nd;
}

static int32_t empty_propose(void *self, const int32_t *h, int32_t n, int32_t max, int32_t *draft,
                             tn_error *err) {
    (void)self, (void)h, (void)n, (void)max, (void)draft, (void)err;
    return 0;
}

static tn_drafter *custom(int32_t (*fn)(void *, const int32_t *, int32_t, int32_t, int32_t *,
                                        tn_error *),
                          void *self, int32_t draft_max) {
    tn_drafter_ops ops = {.propose = fn};
    tn_drafter *d = NULL;
    tn_error err = {0};
    int rc = tn_drafter_new_custom(&ops, self, draft_max, &d, &err);
    CHECKF(rc == TN_OK, "custom drafter: %s", err.message);
    return d;
}

/* ------------------------------------------------------------ prompts */

enum { N_PROMPTS = 6 };

/* Random prompts, and repetitive ones (a phrase repeated, a counting
 * pattern) on which the lookup drafter finds long matches. */
static int32_t make_prompt(int which, int32_t n_vocab, int32_t *out) {
    uint64_t st = 1000 + (uint64_t)which;
    int32_t n = 0;
    switch (which % 3) {
    case 0: /* random */
        n = 6 + which;
        for (int32_t i = 0; i < n; i++)
            out[i] = 5 + (int32_t)(tn_test_rand(&st) % (uint64_t)(n_vocab - 5));
        break;
    case 1: { /* a phrase three times */
        int32_t phrase[7];
        for (int i = 0; i < 7; i++)
            phrase[i] = 5 + (int32_t)(tn_test_rand(&st) % (uint64_t)(n_vocab - 5));
        for (int r = 0; r < 3; r++)
            for (int i = 0; i < 7; i++)
                out[n++] = phrase[i];
        break;
    }
    default: /* a counting pattern */
        for (int32_t i = 0; i < 24; i++)
            out[n++] = 300 + (i % 5) * 3 + (i / 10);
        break;
    }
    return n;
}

/* ------------------------------------------------ greedy equality tests */

typedef struct drafters {
    tn_drafter *lookup, *lookup_short, *model, *self_model, *oracle, *corrupt, *noise, *empty;
    tn_drafter *dflash;
    tn_drafter *dflash_alt; /* reduced vocabulary (d2t), Gemma-style layers, two layers */
    tn_drafter *mtp;        /* a Gemma 4 MTP assistant (gemma4 targets only) */
    oracle oracle_state, corrupt_state;
    noise noise_state;
} drafters;

static void drafters_free(drafters *d) {
    tn_drafter_free(d->lookup);
    tn_drafter_free(d->lookup_short);
    tn_drafter_free(d->model);
    tn_drafter_free(d->self_model);
    tn_drafter_free(d->oracle);
    tn_drafter_free(d->corrupt);
    tn_drafter_free(d->noise);
    tn_drafter_free(d->empty);
    tn_drafter_free(d->dflash);
    tn_drafter_free(d->dflash_alt);
    tn_drafter_free(d->mtp);
}

static tn_drafter *dflash_for(const tn_model *target, const char *tag);
static tn_drafter *dflash_alt_for(const tn_model *target, const char *tag);
static tn_drafter *mtp_for(const tn_model *target, const char *tag);

static void drafters_make(drafters *d, const tn_model *target, const char *target_path,
                          const char *draft_path, const char *tag) {
    memset(d, 0, sizeof *d);
    const int32_t V = tn_model_n_vocab(target);
    tn_error err = {0};
    tn_drafter_params p = tn_drafter_default_params();
    p.n_threads = 2;
    CHECKF(tn_drafter_new_lookup(p, &d->lookup, &err) == TN_OK, "lookup: %s", err.message);
    p.draft_max = 3;
    p.ngram_min = 1;
    p.ngram_max = 2;
    CHECKF(tn_drafter_new_lookup(p, &d->lookup_short, &err) == TN_OK, "lookup: %s", err.message);
    p = tn_drafter_default_params();
    p.n_threads = 2;
    p.n_ctx = 512;
    int rc = tn_drafter_new_model(target, draft_path, p, &d->model, &err);
    CHECKF(rc == TN_OK, "draft model: %s", err.message);
    p.draft_max = 12;
    rc = tn_drafter_new_model(target, target_path, p, &d->self_model, &err);
    CHECKF(rc == TN_OK, "target as draft model: %s", err.message);
    d->oracle_state.n_vocab = d->corrupt_state.n_vocab = V;
    d->corrupt_state.corrupt_every = 5;
    d->oracle = custom(oracle_propose, &d->oracle_state, 16);
    d->corrupt = custom(oracle_propose, &d->corrupt_state, 9);
    d->noise_state = (noise){.state = 7, .n_vocab = V, .bad_token = -1};
    d->noise = custom(noise_propose, &d->noise_state, 4);
    d->empty = custom(empty_propose, NULL, 8);
    d->dflash = dflash_for(target, tag);
    d->dflash_alt = dflash_alt_for(target, tag);
    d->mtp = mtp_for(target, tag);
}

/* Runs req with every drafter and compares with the plain answer. */
static void compare_all(const char *what, tn_session *s, drafters *d, const int32_t *req,
                        int32_t n_req, tn_gen_params g, const answer *plain) {
    int32_t n_pin;
    const int32_t *pin = tn_session_pinned_tokens(s, &n_pin);
    oracle_set(&d->oracle_state, pin, n_pin, req, n_req, plain);
    oracle_set(&d->corrupt_state, pin, n_pin, req, n_req, plain);
    struct {
        const char *name;
        tn_drafter *dr;
        int32_t draft_max;
    } runs[] = {
        {"lookup", d->lookup, 0},         {"lookup-short", d->lookup_short, 0},
        {"draft model", d->model, 0},     {"target as draft", d->self_model, 0},
        {"oracle", d->oracle, 0},         {"oracle B=4", d->oracle, 3},
        {"corrupted oracle", d->corrupt, 0}, {"noise", d->noise, 0},
        {"empty", d->empty, 0},           {"dflash", d->dflash, 0},
        {"dflash d2t gemma-layers", d->dflash_alt, 0},
        {"mtp", d->mtp, 0},               {"mtp K=6", d->mtp, 6},
    };
    const uint64_t h0 = tn_test_pinned_rows_hash(s);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        if (!runs[i].dr)
            continue;
        tn_gen_params gs = g;
        gs.drafter = runs[i].dr;
        gs.draft_max = runs[i].draft_max;
        answer a;
        ask(s, req, n_req, &gs, &a);
        const bool ok = same_answer(&a, plain);
        CHECKF(ok, "%s: %s: speculative answer differs from plain decoding (%s)", what,
               runs[i].name, a.error);
        if (!ok) {
            print_tokens("plain", plain);
            print_tokens(runs[i].name, &a);
            for (int t = 0; t < a.n && t < plain->n; t++)
                if (a.logprob[t] != plain->logprob[t]) {
                    fprintf(stderr, "  token %d: logprob %.9g, plain %.9g\n", t, a.logprob[t],
                            plain->logprob[t]);
                    break;
                }
        }
        check_stats(runs[i].name, s, &a);
        CHECKF(tn_ctx_kv_len(tn_session_ctx(s)) == n_pin, "%s: %s: KV %d rows after, pin %d",
               what, runs[i].name, tn_ctx_kv_len(tn_session_ctx(s)), n_pin);
        if (!strcmp(runs[i].name, "oracle") && plain->n > 2)
            CHECKF(a.st.accepted == a.st.drafted && a.st.accepted > 0,
                   "%s: oracle: drafted %d, accepted %d", what, a.st.drafted, a.st.accepted);
        if (!strcmp(runs[i].name, "empty"))
            CHECK(a.st.drafted == 0 && a.st.verify_steps == 0);
    }
    CHECKF(tn_test_pinned_rows_hash(s) == h0, "%s: the pinned rows changed", what);
}

static void greedy_model(const char *arch, const char *type, int64_t embd, uint64_t seed) {
    char tag[64], file[96], dfile[96];
    snprintf(tag, sizeof tag, "%s-%s-%lld", arch, type, (long long)embd);
    snprintf(file, sizeof file, "target-%s.gguf", tag);
    snprintf(dfile, sizeof dfile, "draft-%s.gguf", tag);
    tn_model *m = make_model(file, arch, type, embd, 2, seed, 0);
    tn_model *dm = make_model(dfile, arch, "q8_0", 64, 1, seed + 100, 0);
    if (!m || !dm) {
        tn_model_free(m);
        tn_model_free(dm);
        return;
    }
    tn_model_free(dm); /* only its file is needed */
    const int32_t V = tn_model_n_vocab(m);
    drafters d;
    drafters_make(&d, m, tmp_path(file), tmp_path(dfile), tag);
    tn_session *s = tn_test_session(m, 384);
    if (!s) {
        drafters_free(&d);
        tn_model_free(m);
        return;
    }
    int32_t pin[16];
    uint64_t st = seed;
    for (int i = 0; i < 16; i++)
        pin[i] = 5 + (int32_t)(tn_test_rand(&st) % (uint64_t)(V - 5));
    tn_error err = {0};
    CHECKF(tn_session_pin_tokens(s, pin, 16, NULL, NULL, &err) == TN_OK, "pin: %s", err.message);

    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 40;
    for (int p = 0; p < N_PROMPTS; p++) {
        int32_t req[64];
        const int32_t n_req = make_prompt(p, V, req);
        answer plain;
        ask(s, req, n_req, &g, &plain);
        CHECKF(plain.rc == TN_OK && plain.n > 0, "%s: plain answer: %s", tag, plain.error);
        /* Greedy: each token is its row's most likely one, so the row read
         * is the row sampled. */
        CHECKF(plain.logprob_errors == 0, "%s: %d logprob calls failed", tag,
               plain.logprob_errors);
        for (int i = 0; i < plain.n; i++)
            CHECKF(plain.top[i][0].token == plain.tokens[i] &&
                       plain.top[i][0].logprob == plain.logprob[i] && plain.logprob[i] <= 0 &&
                       plain.top[i][1].logprob <= plain.top[i][0].logprob,
                   "%s prompt %d: token %d (%d): logprob %g, top %d %g", tag, p, i,
                   plain.tokens[i], plain.logprob[i], plain.top[i][0].token,
                   plain.top[i][0].logprob);
        char what[128];
        snprintf(what, sizeof what, "%s prompt %d", tag, p);
        compare_all(what, s, &d, req, n_req, g, &plain);

        if (p == 1 && plain.n > 12) {
            /* Stops in the middle of accepted blocks: max_tokens ... */
            tn_gen_params gl = g;
            gl.max_tokens = 7;
            answer pl;
            ask(s, req, n_req, &gl, &pl);
            snprintf(what, sizeof what, "%s prompt %d max_tokens 7", tag, p);
            compare_all(what, s, &d, req, n_req, gl, &pl);
            /* ... a stop token ... */
            tn_gen_params gt = g;
            gt.stop_tokens[0] = plain.tokens[9];
            gt.n_stop_tokens = 1;
            ask(s, req, n_req, &gt, &pl);
            CHECK(pl.st.stop_reason == TN_STOP_EOG && pl.n <= 9);
            snprintf(what, sizeof what, "%s prompt %d stop token", tag, p);
            compare_all(what, s, &d, req, n_req, gt, &pl);
            /* ... and a stop string (the text of tokens 5..6). */
            if (plain.text_len > 0) {
                answer full;
                ask(s, req, n_req, &g, &full);
                char stop[32] = "";
                if (full.text_len > 12) {
                    memcpy(stop, full.text + full.text_len / 2, 3);
                    stop[3] = '\0';
                    tn_gen_params gs = g;
                    gs.stop[0] = stop;
                    gs.n_stop = 1;
                    ask(s, req, n_req, &gs, &pl);
                    snprintf(what, sizeof what, "%s prompt %d stop string", tag, p);
                    compare_all(what, s, &d, req, n_req, gs, &pl);
                }
            }
        }
    }

    /* A context that fills up in the middle of a block: no limit. */
    {
        tn_session *small = tn_test_session(m, 16 + 24 + 30);
        if (small && tn_session_pin_tokens(small, pin, 16, NULL, NULL, &err) == TN_OK) {
            int32_t req[64];
            const int32_t n_req = make_prompt(2, V, req);
            tn_gen_params gf = g;
            gf.max_tokens = 0;
            answer pl;
            ask(small, req, n_req, &gf, &pl);
            CHECKF(pl.st.stop_reason == TN_STOP_CONTEXT_FULL || pl.st.stop_reason == TN_STOP_EOG,
                   "%s: context: stop %s", tag, tn_stop_reason_name(pl.st.stop_reason));
            compare_all("small context", small, &d, req, n_req, gf, &pl);
        }
        tn_session_free(small);
    }

    /* Switching per request in one session: none, lookup, model, none, ... */
    {
        int32_t req[64];
        const int32_t n_req = make_prompt(4, V, req);
        answer base;
        ask(s, req, n_req, &g, &base);
        tn_drafter *order[] = {d.lookup, NULL,          d.model, d.lookup,
                               NULL,     d.self_model, d.dflash, d.dflash_alt,
                               d.mtp,    NULL,         d.mtp};
        for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
            tn_gen_params gs = g;
            gs.drafter = order[i];
            answer a;
            ask(s, req, n_req, &gs, &a);
            CHECKF(same_answer(&a, &base), "%s: toggle step %zu (%s) differs", tag, i,
                   tn_drafter_name(order[i]));
        }
    }
    tn_session_free(s);
    drafters_free(&d);
    tn_model_free(m);
}

/* Multi-turn chat through the text API (synthetic ChatML vocabulary). */
static void greedy_chat(const char *arch) {
    tn_model *m = make_model("chat.gguf", arch, "q8_0", 64, 2, 77, 0);
    if (!m)
        return;
    drafters d;
    drafters_make(&d, m, tmp_path("chat.gguf"), tmp_path("chat.gguf"), "chat");
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 24;
    const char *u1 = "the the the cat sat on the mat, the cat sat on the mat";
    const char *u2 = "and then? and then? and then?";
    /* Reference: plain decoding in a fresh session. */
    answer r1, r2;
    int32_t n_ref = 0, ref_kv[1024];
    {
        tn_session *s = tn_test_session(m, 512);
        collect c = {.a = &r1, .s = s};
        memset(&r1, 0, sizeof r1);
        tn_session_message msgs[3] = {{.role = "user", .content = u1},
                                      {.role = "assistant", .content = NULL},
                                      {.role = "user", .content = u2}};
        tn_error err = {0};
        r1.rc = tn_session_chat(s, msgs, 1, &g, on_token, &c, &r1.st, &err);
        CHECKF(r1.rc == TN_OK, "chat: %s", err.message);
        msgs[1].content = r1.text;
        memset(&r2, 0, sizeof r2);
        c.a = &r2;
        r2.rc = tn_session_chat(s, msgs, 3, &g, on_token, &c, &r2.st, &err);
        CHECKF(r2.rc == TN_OK, "chat 2: %s", err.message);
        const int32_t *kv = tn_session_kv_tokens(s, &n_ref);
        memcpy(ref_kv, kv, (size_t)n_ref * sizeof *kv);
        tn_session_free(s);
    }
    tn_drafter *list[] = {d.lookup, d.model,      d.self_model, d.noise,
                          d.dflash, d.dflash_alt, d.mtp};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        if (!list[i])
            continue;
        tn_session *s = tn_test_session(m, 512);
        if (!s)
            continue;
        tn_gen_params gs = g;
        gs.drafter = list[i];
        answer a1, a2;
        memset(&a1, 0, sizeof a1);
        memset(&a2, 0, sizeof a2);
        collect c = {.a = &a1, .s = s};
        tn_session_message msgs[3] = {{.role = "user", .content = u1},
                                      {.role = "assistant", .content = r1.text},
                                      {.role = "user", .content = u2}};
        tn_error err = {0};
        a1.rc = tn_session_chat(s, msgs, 1, &gs, on_token, &c, &a1.st, &err);
        c.a = &a2;
        /* The second turn alternates: speculation off for one drafter in two. */
        tn_gen_params g2 = i % 2 ? g : gs;
        a2.rc = tn_session_chat(s, msgs, 3, &g2, on_token, &c, &a2.st, &err);
        CHECKF(same_answer(&a1, &r1) && same_answer(&a2, &r2), "chat %s: %s differs",
               arch, tn_drafter_name(list[i]));
        int32_t n_kv;
        const int32_t *kv = tn_session_kv_tokens(s, &n_kv);
        CHECKF(n_kv == n_ref && !memcmp(kv, ref_kv, (size_t)n_kv * sizeof *kv) &&
                   tn_ctx_kv_len(tn_session_ctx(s)) == n_kv,
               "chat %s: %s: the KV after the conversation differs", arch,
               tn_drafter_name(list[i]));
        tn_session_free(s);
    }
    drafters_free(&d);
    tn_model_free(m);
}

static void greedy_suite(const char *arch) {
    static const char *const types[] = {"q8_0", "q4_0", "f16"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        greedy_model(arch, types[i], 64, 11 + i);
    /* K-quants need 256-wide rows; the Q4_K_M mix runs Q4_K and Q6_K (both
     * X16 on AVX-512: verify batches and decode share their kernels). */
    greedy_model(arch, "q4_k_m", 256, 21);
    if (!strcmp(arch, "gpt-oss")) /* as published: MXFP4 experts, Q8_0 elsewhere */
        greedy_model(arch, "mxfp4", 64, 31);
    greedy_chat(arch);
}

/* ------------------------------------------------------------- sampling */

/* Upper 1 - alpha quantile of chi-square with df degrees of freedom
 * (Wilson-Hilferty; z is the normal quantile of alpha). */
static double chi2_quantile(int df, double z) {
    const double k = df, a = 2.0 / (9.0 * k);
    const double c = 1.0 - a + z * sqrt(a);
    return k * c * c * c;
}
#define Z_1E4 3.719 /* alpha = 1e-4 */

/* Chi-square goodness of fit of counts[n] (total N) against probs[n],
 * merging categories whose expected count is below 5 into one. Returns the
 * statistic, *df the degrees of freedom. */
static double chi2_fit(const int *counts, const double *probs, int n, int N, int *df) {
    double stat = 0, rest_e = 0;
    int rest_o = 0, cats = 0;
    for (int i = 0; i < n; i++) {
        const double e = probs[i] * N;
        if (e < 5) {
            rest_e += e;
            rest_o += counts[i];
            continue;
        }
        stat += (counts[i] - e) * (counts[i] - e) / e;
        cats++;
    }
    if (rest_e > 0) {
        stat += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
        cats++;
    } else if (rest_o > 0) {
        stat = INFINITY; /* tokens that cannot occur */
    }
    *df = cats - 1;
    return stat;
}

/* The rejection rule alone, on made-up distributions. */
static void sampling_rule(void) {
    enum { V = 6, N = 200000 };
    const float p[V] = {0.30f, 0.25f, 0.20f, 0.15f, 0.10f, 0.0f};
    const float q[V] = {0.05f, 0.05f, 0.40f, 0.10f, 0.20f, 0.20f};
    tn_sampler *smp = NULL;
    tn_sampler_params sp = tn_sampler_default_params();
    sp.temperature = 1.0f;
    sp.seed = 99;
    CHECK(tn_sampler_new(V, sp, &smp, NULL) == TN_OK);
    if (!smp)
        return;
    float scratch[V];
    for (int mode = 0; mode < 2; mode++) {
        int counts[V] = {0};
        int accepted = 0;
        uint64_t st = 5;
        for (int i = 0; i < N; i++) {
            int32_t d;
            if (mode == 0) { /* draft drawn from q */
                double u = (tn_test_rand(&st) >> 11) * (1.0 / 9007199254740992.0), cum = 0;
                d = V - 1;
                for (int t = 0; t < V; t++)
                    if (u < (cum += q[t])) {
                        d = t;
                        break;
                    }
            } else { /* deterministic draft, one-hot q */
                d = i % V;
            }
            int32_t out = -1;
            if (tn_spec_accept_or_resample(p, mode == 0 ? q : NULL, V, d, smp, scratch, &out)) {
                out = d;
                accepted++;
            }
            CHECK(out >= 0 && out < V);
            counts[out]++;
        }
        double probs[V];
        for (int t = 0; t < V; t++)
            probs[t] = p[t];
        int df;
        const double x2 = chi2_fit(counts, probs, V, N, &df);
        CHECKF(x2 < chi2_quantile(df, Z_1E4), "rejection rule (%s q): chi-square %.2f, df %d",
               mode == 0 ? "sampled" : "one-hot", x2, df);
        CHECK(counts[5] == 0); /* p = 0: never emitted, whatever the draft */
        /* Acceptance rate: sum min(p, q) for drawn drafts, mean p(d) for fixed ones. */
        double expect = 0;
        for (int t = 0; t < V; t++)
            expect += mode == 0 ? fmin(p[t], q[t]) : p[t] / V;
        CHECKF(fabs((double)accepted / N - expect) < 0.01, "acceptance %.4f, expected %.4f",
               (double)accepted / N, expect);
    }
    tn_sampler_free(smp);
}

/* Exact joint distribution of the first three tokens, from the target's
 * logits, for the sampler settings sp. */
typedef struct joint {
    int32_t tok[3][64]; /* tokens of each category */
    double prob[64];
    int n;
} joint;

static void exact_joint(const tn_model *m, const int32_t *ctx_tokens, int32_t n,
                        tn_sampler_params sp, joint *J) {
    tn_ctx *c = NULL;
    tn_error err = {0};
    const int32_t V = tn_model_n_vocab(m);
    CHECK(tn_ctx_new(m, 256, 2, &c, &err) == TN_OK);
    tn_sampler *smp = NULL;
    CHECK(tn_sampler_new(V, sp, &smp, &err) == TN_OK);
    float *logits = malloc((size_t)V * sizeof *logits);
    float *p1 = malloc((size_t)V * sizeof *p1), *p2 = malloc((size_t)V * sizeof *p2),
          *p3 = malloc((size_t)V * sizeof *p3);
    J->n = 0;
    if (c && smp && logits && p1 && p2 && p3 &&
        tn_ctx_decode(c, ctx_tokens, n, TN_LOGITS_LAST, logits, &err) == TN_OK) {
        tn_sampler_probs(smp, logits, p1);
        for (int32_t a = 0; a < V; a++) {
            if (p1[a] <= 0)
                continue;
            tn_ctx_kv_truncate(c, n);
            tn_ctx_decode(c, &a, 1, TN_LOGITS_LAST, logits, &err);
            tn_sampler_probs(smp, logits, p2);
            for (int32_t b = 0; b < V; b++) {
                if (p2[b] <= 0)
                    continue;
                tn_ctx_kv_truncate(c, n + 1);
                tn_ctx_decode(c, &b, 1, TN_LOGITS_LAST, logits, &err);
                tn_sampler_probs(smp, logits, p3);
                for (int32_t cc = 0; cc < V; cc++) {
                    if (p3[cc] <= 0 || J->n >= 64)
                        continue;
                    J->tok[0][J->n] = a;
                    J->tok[1][J->n] = b;
                    J->tok[2][J->n] = cc;
                    J->prob[J->n++] = (double)p1[a] * p2[b] * p3[cc];
                }
            }
        }
    }
    free(logits);
    free(p1);
    free(p2);
    free(p3);
    tn_sampler_free(smp);
    tn_ctx_free(c);
}

/* Proposes the second most likely continuation of the exact tables: an
 * honest but often wrong deterministic drafter. */
typedef struct table_drafter {
    const joint *J;
    int32_t n_prefix; /* history length before the first generated token */
} table_drafter;

static int32_t table_propose(void *self, const int32_t *h, int32_t n, int32_t max, int32_t *draft,
                             tn_error *err) {
    (void)err;
    table_drafter *t = self;
    const int32_t pos = n - t->n_prefix; /* generated tokens so far, incl. the last */
    if (pos != 1 || max < 1)
        return 0;
    /* Among the categories that start with h[n-1], the second best b. */
    double best = -1, second = -1;
    int32_t bb = -1, sb = -1;
    for (int i = 0; i < t->J->n; i++) {
        if (t->J->tok[0][i] != h[n - 1])
            continue;
        const double pr = t->J->prob[i];
        const int32_t b = t->J->tok[1][i];
        if (b == bb || b == sb)
            continue;
        if (pr > best) {
            second = best, sb = bb;
            best = pr, bb = b;
        } else if (pr > second) {
            second = pr, sb = b;
        }
    }
    if (sb < 0)
        return 0;
    draft[0] = sb;
    if (max >= 2)
        draft[1] = (sb + 7) % 600; /* an arbitrary guess for the third token */
    return max >= 2 ? 2 : 1;
}

static void sampling_model(void) {
    tn_model *m = make_model("sampling.gguf", "llama", "q8_0", 32, 1, 5, 2.0f);
    /* The same weights quantized to 4 bits: a draft close to the target but
     * not equal, so q != p and both branches of the rule are taken. */
    tn_model *dm = make_model("sampling-draft.gguf", "llama", "q4_0", 32, 1, 5, 2.0f);
    if (!m || !dm) {
        tn_model_free(m);
        tn_model_free(dm);
        return;
    }
    tn_model_free(dm);
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 3;
    g.sampler.temperature = 1.0f;
    g.sampler.top_k = 4;
    const int32_t pin[4] = {1, 40, 41, 42};
    const int32_t req[5] = {300, 301, 302, 300, 301};
    int32_t all[9];
    memcpy(all, pin, sizeof pin);
    memcpy(all + 4, req, sizeof req);
    joint J;
    exact_joint(m, all, 9, g.sampler, &J);
    CHECKF(J.n >= 8 && J.n <= 64, "joint distribution with %d categories", J.n);
    double total = 0;
    for (int i = 0; i < J.n; i++)
        total += J.prob[i];
    CHECKF(fabs(total - 1) < 1e-4, "exact joint sums to %f", total);

    tn_drafter_params dp = tn_drafter_default_params();
    dp.n_threads = 2;
    dp.n_ctx = 64;
    dp.draft_max = 2;
    tn_drafter *other = NULL, *self = NULL, *lookup = NULL;
    tn_error err = {0};
    CHECKF(tn_drafter_new_model(m, tmp_path("sampling-draft.gguf"), dp, &other, &err) == TN_OK,
           "draft: %s", err.message);
    CHECKF(tn_drafter_new_model(m, tmp_path("sampling.gguf"), dp, &self, &err) == TN_OK,
           "self draft: %s", err.message);
    dp.ngram_min = 1;
    CHECK(tn_drafter_new_lookup(dp, &lookup, &err) == TN_OK);
    table_drafter td = {.J = &J, .n_prefix = 9};
    tn_drafter *table = custom(table_propose, &td, 2);
    tn_drafter *dfl = dflash_for(m, "sampling");
    tn_drafter *dfl_alt = dflash_alt_for(m, "sampling"); /* -inf outside its d2t rows */

    tn_session *s = tn_test_session(m, 64);
    if (!s || tn_session_pin_tokens(s, pin, 4, NULL, NULL, &err) != TN_OK) {
        CHECK(0);
    } else {
        struct {
            const char *name;
            tn_drafter *d;
        } runs[] = {{"plain", NULL},           {"draft model", other}, {"target as draft", self},
                    {"lookup", lookup},        {"second best", table}, {"dflash", dfl},
                    {"dflash d2t", dfl_alt}};
        const int N = 3000;
        for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
            if (r > 0 && !runs[r].d)
                continue;
            int counts[65] = {0};
            int drafted = 0, accepted = 0;
            for (int i = 0; i < N; i++) {
                tn_gen_params gs = g;
                gs.drafter = runs[r].d;
                gs.sampler.seed = 1000003ULL * (r + 1) + (uint64_t)i;
                answer a;
                ask(s, req, 5, &gs, &a);
                drafted += a.st.drafted;
                accepted += a.st.accepted;
                int cat = 64;
                for (int k = 0; a.n == 3 && k < J.n; k++)
                    if (J.tok[0][k] == a.tokens[0] && J.tok[1][k] == a.tokens[1] &&
                        J.tok[2][k] == a.tokens[2])
                        cat = k;
                counts[cat]++;
            }
            CHECKF(counts[64] == 0, "%s: %d answers outside the support", runs[r].name,
                   counts[64]);
            int df;
            const double x2 = chi2_fit(counts, J.prob, J.n, N - counts[64], &df);
            const double limit = chi2_quantile(df, Z_1E4);
            CHECKF(x2 < limit, "%s: chi-square %.1f over %d categories (limit %.1f)",
                   runs[r].name, x2, df + 1, limit);
            /* The first two tokens alone: fewer categories, more power where
             * the drafts of position 2 act. */
            int pc[64] = {0}, n_pairs = 0, pair_of[64];
            double pp[64] = {0};
            for (int k = 0; k < J.n; k++) {
                int q = 0;
                while (q < n_pairs && !(J.tok[0][pair_of[q]] == J.tok[0][k] &&
                                        J.tok[1][pair_of[q]] == J.tok[1][k]))
                    q++;
                if (q == n_pairs)
                    pair_of[n_pairs++] = k;
                pp[q] += J.prob[k];
                pc[q] += counts[k];
            }
            int df2;
            const double x2b = chi2_fit(pc, pp, n_pairs, N - counts[64], &df2);
            CHECKF(x2b < chi2_quantile(df2, Z_1E4),
                   "%s: first two tokens: chi-square %.1f over %d categories (limit %.1f)",
                   runs[r].name, x2b, df2 + 1, chi2_quantile(df2, Z_1E4));
            fprintf(stderr, "sampling %-16s chi2 %6.1f (df %2d, limit %.1f); first two %5.1f "
                            "(df %d, limit %.1f); drafted %d, accepted %d\n",
                    runs[r].name, x2, df, limit, x2b, df2, chi2_quantile(df2, Z_1E4), drafted,
                    accepted);
            if (runs[r].d == self)
                CHECKF(accepted == drafted && drafted > 0,
                       "target as its own draft: q == p, every draft must be accepted (%d/%d)",
                       accepted, drafted);
            if (runs[r].d == other)
                CHECKF(accepted > drafted / 4 && accepted < drafted,
                       "4-bit draft: %d of %d accepted", accepted, drafted);
            if (runs[r].d == table)
                CHECKF(accepted > 0 && accepted < drafted,
                       "second-best drafter: %d of %d accepted", accepted, drafted);
        }
    }
    tn_session_free(s);
    tn_drafter_free(other);
    tn_drafter_free(self);
    tn_drafter_free(lookup);
    tn_drafter_free(table);
    tn_drafter_free(dfl);
    tn_drafter_free(dfl_alt);
    tn_model_free(m);
}

/* ---------------------------------------------------------------- api */

/* Copies a GGUF, replacing token `change` of tokenizer.ggml.tokens (when
 * >= 0) and appending `extra` tokens. */
typedef struct {
    int64_t change;
    int extra;
} vocab_edit;

static bool vocab_edit_kv(const char *key, tn_gguf_value *v, tn_gguf_writer *w, void *user) {
    const vocab_edit *e = user;
    if (strcmp(key, "tokenizer.ggml.tokens") != 0)
        return false;
    const uint64_t n = v->v.arr.n, all = n + (uint64_t)e->extra;
    char **strs = calloc(all, sizeof *strs);
    for (uint64_t t = 0; strs && t < all; t++) {
        if (t < n) {
            tn_str s = v->v.arr.items[t].v.str;
            strs[t] = (int64_t)t == e->change ? strdup("<changed>") : strndup(s.ptr, s.len);
        } else {
            strs[t] = strdup("<extra>");
        }
    }
    /* Written here, or (on a failure) not at all: the copy then lacks its
     * tokens and the test's load fails. */
    if (strs)
        tn_gguf_writer_set_arr_str(w, key, (const char *const *)strs, all);
    for (uint64_t t = 0; strs && t < all; t++)
        free(strs[t]);
    free(strs);
    return true;
}

static bool clone_vocab(const char *src, const char *dst, int64_t change, int extra) {
    vocab_edit e = {change, extra};
    return tn_test_clone_gguf(src, dst, vocab_edit_kv, &e);
}

/* Copies a GGUF with one integer key set to value (u32). */
typedef struct {
    const char *key;
    uint32_t value;
} set_int;

static bool set_int_edit(const char *key, tn_gguf_value *v, tn_gguf_writer *w, void *user) {
    const set_int *si = user;
    (void)v;
    return !strcmp(key, si->key) && tn_gguf_writer_set_u32(w, key, si->value) == TN_OK;
}

static bool clone_set_int(const char *src, const char *dst, const char *key, uint32_t value) {
    set_int si = {key, value};
    return tn_test_clone_gguf(src, dst, set_int_edit, &si);
}

static void api_vocab(void) {
    tn_model *m = make_model("api.gguf", "llama", "q8_0", 64, 1, 3, 0);
    if (!m)
        return;
    tn_drafter_params p = tn_drafter_default_params();
    p.n_threads = 1;
    tn_drafter *d = NULL;
    tn_error err = {0};
    CHECK(clone_vocab(tmp_path("api.gguf"), tmp_path("api-changed.gguf"), 123, 0));
    int rc = tn_drafter_new_model(m, tmp_path("api-changed.gguf"), p, &d, &err);
    CHECKF(rc == TN_ERR_INVALID && d == NULL && strstr(err.message, "token 123 is '<changed>'") &&
               strstr(err.message, "api-changed.gguf"),
           "changed token: %d %s", rc, err.message);
    CHECK(clone_vocab(tmp_path("api.gguf"), tmp_path("api-longer.gguf"), -1, 3));
    rc = tn_drafter_new_model(m, tmp_path("api-longer.gguf"), p, &d, &err);
    const int32_t V = tn_model_n_vocab(m);
    char want[64];
    snprintf(want, sizeof want, "from token %d on ('<extra>'", V);
    CHECKF(rc == TN_ERR_INVALID && d == NULL && strstr(err.message, want),
           "longer vocabulary: %d %s", rc, err.message);
    rc = tn_drafter_new_model(m, tmp_path("no-such-file.gguf"), p, &d, &err);
    CHECKF(rc != TN_OK && d == NULL && strstr(err.message, "no-such-file.gguf"),
           "missing draft: %s", err.message);
    /* A real vocabulary against the synthetic one, when fetched. */
    const char *qwen = tn_test_vocab("qwen3");
    if (qwen) {
        char tok[4200];
        snprintf(tok, sizeof tok, "%s/tokenizer.json", qwen);
        tn_mkmodel_params mp = tn_mkmodel_default_params();
        mp.arch = "qwen3";
        mp.n_embd = 64;
        mp.n_layer = 1;
        mp.n_head = 2;
        mp.n_head_kv = 1;
        mp.head_dim = 32;
        mp.n_ff = 64;
        mp.tokenizer = tok;
        mp.n_threads = 2;
        if (tn_mkmodel(&mp, tmp_path("qwen-vocab.gguf"), &err) == TN_OK) {
            rc = tn_drafter_new_model(m, tmp_path("qwen-vocab.gguf"), p, &d, &err);
            CHECKF(rc == TN_ERR_INVALID && strstr(err.message, "token 0 is"),
                   "qwen vocabulary: %s", err.message);
        }
    }
    /* The draft model with a mismatched target at request time. */
    tn_model *other = make_model("api-other.gguf", "llama", "q8_0", 96, 1, 4, 0);
    rc = tn_drafter_new_model(m, tmp_path("api.gguf"), p, &d, &err);
    CHECKF(rc == TN_OK, "self draft: %s", err.message);
    if (other && d) {
        tn_session *s = tn_test_session(other, 64);
        tn_gen_params g = tn_gen_default_params();
        g.max_tokens = 4;
        g.drafter = d;
        const int32_t req[3] = {10, 11, 12};
        answer a;
        ask(s, req, 3, &g, &a);
        CHECKF(a.rc == TN_ERR_INVALID && strstr(a.error, "was made for"), "other target: %s",
               a.error);
        tn_session_free(s);
    }
    tn_drafter_free(d);
    tn_model_free(other);
    tn_model_free(m);
}

static void api_edges(void) {
    tn_model *m = make_model("edges.gguf", "qwen3", "q8_0", 64, 1, 8, 0);
    if (!m)
        return;
    const int32_t V = tn_model_n_vocab(m);
    tn_session *s = tn_test_session(m, 48);
    const int32_t pin[4] = {1, 20, 21, 22};
    const int32_t req[6] = {300, 301, 302, 300, 301, 302};
    tn_error err = {0};
    if (!s || tn_session_pin_tokens(s, pin, 4, NULL, NULL, &err) != TN_OK) {
        CHECK(0);
        tn_session_free(s);
        tn_model_free(m);
        return;
    }
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 10;
    answer plain, a;
    ask(s, req, 6, &g, &plain);
    CHECK(plain.rc == TN_OK);

    /* Too many tokens, a token outside the vocabulary, an error: the request
     * fails with the drafter's message and the KV is the pin again. */
    noise z = {.state = 1, .n_vocab = V, .fixed_len = 5, .bad_token = -1};
    tn_drafter *d = custom(noise_propose, &z, 4);
    tn_gen_params gs = g;
    gs.drafter = d;
    ask(s, req, 6, &gs, &a);
    CHECKF(a.rc == TN_ERR_INVALID && strstr(a.error, "returned 5 tokens; at most 4"),
           "too many: %s", a.error);
    CHECK(tn_ctx_kv_len(tn_session_ctx(s)) == 4);
    z.fixed_len = 0;
    z.bad_token = V + 5;
    ask(s, req, 6, &gs, &a);
    char want[96];
    snprintf(want, sizeof want, "proposed token %d, outside the vocabulary (0..%d)", V + 5, V - 1);
    CHECKF(a.rc == TN_ERR_INVALID && strstr(a.error, want), "bad token: %s", a.error);
    z.bad_token = -1;
    z.fail = true;
    ask(s, req, 6, &gs, &a);
    CHECKF(a.rc == TN_ERR_IO && strstr(a.error, "failed on purpose"), "drafter error: %s",
           a.error);
    CHECK(tn_ctx_kv_len(tn_session_ctx(s)) == 4);
    z.fail = false;
    /* Afterwards the same session answers as before. */
    ask(s, req, 6, &g, &a);
    CHECK(same_answer(&a, &plain));

    /* Drafts near a full context are cut to the free rows: with 48 rows a
     * drafter always asked for 16 never gets a longer block than fits. */
    tn_gen_params gf = g;
    gf.max_tokens = 0;
    answer full;
    ask(s, req, 6, &gf, &full);
    oracle o = {.n_vocab = V};
    oracle_set(&o, pin, 4, req, 6, &full);
    tn_drafter *od = custom(oracle_propose, &o, 16);
    gf.drafter = od;
    ask(s, req, 6, &gf, &a);
    CHECKF(same_answer(&a, &full) && a.st.accepted == a.st.drafted,
           "near the end of the context: %s", a.error);
    CHECKF(full.st.stop_reason == TN_STOP_CONTEXT_FULL || full.st.stop_reason == TN_STOP_EOG,
           "stop %s", tn_stop_reason_name(full.st.stop_reason));
    /* Every drafted token was asked for within the free rows: drafted <=
     * generated, and the oracle never proposed past the end. */
    CHECK(a.st.drafted <= a.n);
    check_stats("oracle to the end", s, &a);
    int from_drafts = 0;
    for (int i = 0; i < a.n; i++)
        from_drafts += a.drafted[i];
    CHECKF(from_drafts > a.n / 2, "oracle: %d of %d tokens from drafts", from_drafts, a.n);

    /* Draft max from the request overrides the drafter's. */
    gf.draft_max = 2;
    ask(s, req, 6, &gf, &a);
    CHECKF(same_answer(&a, &full) && a.st.drafted <= 2 * a.st.verify_steps,
           "draft_max 2: drafted %d in %d steps", a.st.drafted, a.st.verify_steps);

    tn_drafter_free(d);
    tn_drafter_free(od);
    tn_session_free(s);
    tn_model_free(m);

    /* Constructors refuse nonsense. */
    tn_drafter *x = NULL;
    tn_drafter_params p = tn_drafter_default_params();
    p.ngram_min = 4;
    p.ngram_max = 2;
    CHECK(tn_drafter_new_lookup(p, &x, &err) == TN_ERR_INVALID && x == NULL);
    tn_drafter_ops none = {0};
    CHECK(tn_drafter_new_custom(&none, NULL, 4, &x, &err) == TN_ERR_INVALID && x == NULL);
    tn_drafter_free(NULL);
    tn_drafter_reset(NULL);
    CHECK(!strcmp(tn_drafter_name(NULL), "none"));
}

static void api_lookup(void) {
    int32_t draft[16];
    /* "a b c d a b" -> "c d a b c d ..." (the period continues into the draft). */
    const int32_t h1[] = {1, 2, 3, 4, 1, 2};
    int32_t n = tn_lookup_propose(h1, 6, 1, 3, 6, draft);
    const int32_t want1[] = {3, 4, 1, 2, 3, 4};
    CHECK(n == 6 && !memcmp(draft, want1, sizeof want1));
    /* The longest n-gram wins over a more recent shorter one. */
    const int32_t h2[] = {7, 8, 9, 5, 6, 8, 9, 10, 7, 8, 9};
    n = tn_lookup_propose(h2, 11, 1, 3, 2, draft);
    CHECK(n == 2 && draft[0] == 5 && draft[1] == 6);
    /* The most recent occurrence among equals. */
    const int32_t h3[] = {1, 2, 3, 1, 2, 4, 1, 2};
    n = tn_lookup_propose(h3, 8, 2, 2, 1, draft);
    CHECK(n == 1 && draft[0] == 4);
    /* Nothing to find, nothing asked, too short. */
    const int32_t h4[] = {1, 2, 3, 4, 5};
    CHECK(tn_lookup_propose(h4, 5, 1, 3, 4, draft) == 0);
    CHECK(tn_lookup_propose(h1, 6, 1, 3, 0, draft) == 0);
    CHECK(tn_lookup_propose(h1, 1, 1, 3, 4, draft) == 0);
    /* One token repeated: a long draft of it. */
    const int32_t h5[] = {9, 9, 9};
    n = tn_lookup_propose(h5, 3, 2, 4, 10, draft);
    CHECK(n == 10 && draft[0] == 9 && draft[9] == 9);
}

/* --------------------------------------------------------------- DFlash */

static const char *dflash_file(const tn_model *target, const char *tag, int32_t block) {
    static char path[4096];
    char name[128];
    snprintf(name, sizeof name, "dflash-%s-b%d.gguf", tag, block);
    snprintf(path, sizeof path, "%s", tmp_path(name));
    tn_mkmodel_dflash_params p = tn_mkmodel_dflash_default_params();
    p.target = tn_model_path(target);
    p.block_size = block;
    p.seed = 31;
    tn_error err = {0};
    int rc = tn_mkmodel_dflash(&p, path, &err);
    CHECKF(rc == TN_OK, "mkmodel dflash %s: %s", tag, err.message);
    return rc == TN_OK ? path : NULL;
}

/* The other shape of llama.cpp's layout: two Gemma-style layers (post
 * norms, GELU, shared K/V, layer scale, partial rope) and a head of half the
 * target's vocabulary mapped back through d2t. */
static tn_drafter *dflash_alt_for(const tn_model *target, const char *tag) {
    char name[128];
    snprintf(name, sizeof name, "dflash-alt-%s.gguf", tag);
    const char *path = tmp_path(name);
    tn_mkmodel_dflash_params p = tn_mkmodel_dflash_default_params();
    p.target = tn_model_path(target);
    p.n_layer = 2;
    p.block_size = 8;
    p.draft_vocab = tn_model_n_vocab(target) / 2;
    p.gemma_layers = true;
    p.seed = 37;
    tn_error err = {0};
    int rc = tn_mkmodel_dflash(&p, path, &err);
    CHECKF(rc == TN_OK, "mkmodel dflash alt %s: %s", tag, err.message);
    tn_drafter_params dp = tn_drafter_default_params();
    dp.n_threads = 2;
    tn_drafter *d = NULL;
    if (rc == TN_OK) {
        rc = tn_drafter_new_dflash(target, path, dp, &d, &err);
        CHECKF(rc == TN_OK, "dflash alt %s: %s", tag, err.message);
    }
    return d;
}

static tn_drafter *dflash_for(const tn_model *target, const char *tag) {
    const char *path = dflash_file(target, tag, 16);
    if (!path)
        return NULL;
    tn_drafter_params p = tn_drafter_default_params();
    p.n_threads = 2;
    tn_drafter *d = NULL;
    tn_error err = {0};
    int rc = tn_drafter_new_dflash(target, path, p, &d, &err);
    CHECKF(rc == TN_OK, "dflash %s: %s", tag, err.message);
    return d;
}

/* Hidden states of every row of tokens[0..n) from a fresh context, one
 * decode of `chunk` rows at a time. */
static float *hidden_of(const tn_model *m, const tn_drafter *d, const int32_t *tokens, int32_t n,
                        int32_t chunk) {
    const size_t row = (size_t)d->n_hidden_ids * (size_t)tn_model_n_embd(m);
    float *all = malloc((size_t)n * row * sizeof *all);
    tn_ctx *c = NULL;
    if (!all || tn_ctx_new(m, 256, 2, &c, NULL) != TN_OK ||
        tn_ctx_capture_hidden(c, d->hidden_ids, d->n_hidden_ids, NULL) != TN_OK) {
        free(all);
        tn_ctx_free(c);
        return NULL;
    }
    for (int32_t done = 0; done < n; done += chunk) {
        const int32_t k = n - done < chunk ? n - done : chunk;
        int32_t rows = 0;
        CHECK(tn_ctx_decode(c, tokens + done, k, TN_LOGITS_NONE, NULL, NULL) == TN_OK);
        const float *h = tn_ctx_hidden(c, &rows);
        CHECK(h && rows == k);
        if (h && rows == k)
            memcpy(all + (size_t)done * row, h, (size_t)k * row * sizeof *h);
    }
    tn_ctx_free(c);
    return all;
}

static int32_t propose(tn_drafter *d, const int32_t *h, int32_t n, int32_t max, int32_t *draft) {
    bool has_q;
    tn_error err = {0};
    int32_t nd = d->hooks.propose_q(d->self, h, n, max, draft, NULL, &has_q, &err);
    CHECKF(nd >= 0, "propose: %s", err.message);
    return nd;
}

static void dflash_suite(void) {
    tn_model *m = make_model("df-target.gguf", "qwen3", "q8_0", 64, 3, 41, 0);
    tn_model *wide = make_model("df-wide.gguf", "qwen3", "q8_0", 96, 3, 42, 0);
    tn_model *deep = make_model("df-deep.gguf", "qwen3", "q8_0", 64, 8, 43, 0);
    if (!m || !wide || !deep)
        goto out;
    tn_error err = {0};
    tn_drafter_params p = tn_drafter_default_params();
    p.n_threads = 2;

    /* Writing and loading: the layout's keys, the default block and layers. */
    const char *path = dflash_file(m, "suite", 16);
    tn_gguf *g = NULL;
    if (path && tn_gguf_open(path, &g, &err) == TN_OK) {
        tn_str arch;
        CHECK(tn_gguf_get_str(g, "general.architecture", &arch) == TN_OK &&
              tn_str_eq(arch, "dflash"));
        int64_t v = 0;
        CHECK(tn_gguf_get_int(g, "dflash.block_size", &v) == TN_OK && v == 16);
        bool causal = true;
        CHECK(tn_gguf_get_bool(g, "dflash.attention.causal", &causal) == TN_OK && !causal);
        CHECK(tn_gguf_get_int(g, "tokenizer.ggml.mask_token_id", &v) == TN_OK);
        const tn_gguf_value *t = tn_gguf_find(g, "dflash.target_layers");
        CHECK(t && t->type == TN_GGUF_ARRAY && t->v.arr.n == 1 && tn_gguf_arr_int(t, 0) == 2);
        CHECK(tn_gguf_find_tensor(g, "fc.weight") && tn_gguf_find_tensor(g, "enc.output_norm.weight") &&
              tn_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") &&
              tn_gguf_find_tensor(g, "output_norm.weight") &&
              !tn_gguf_find_tensor(g, "token_embd.weight") && !tn_gguf_find_tensor(g, "output.weight"));
        tn_gguf_close(g);
    }
    tn_drafter *d = NULL;
    CHECKF(path && tn_drafter_new_dflash(m, path, p, &d, &err) == TN_OK, "load: %s", err.message);
    if (d) {
        CHECK(!strcmp(tn_drafter_name(d), "dflash") && tn_drafter_block_size(d) == 16 &&
              tn_drafter_draft_max(d) == 15 && d->n_hidden_ids == 1 && d->hidden_ids[0] == 2);
    }

    /* Five layers spread over a deeper target: ids 2 .. L - 2. */
    tn_mkmodel_dflash_params dp = tn_mkmodel_dflash_default_params();
    dp.target = tn_model_path(deep);
    dp.block_size = 4;
    CHECK(tn_mkmodel_dflash(&dp, tmp_path("df-deep-draft.gguf"), &err) == TN_OK);
    tn_drafter *dd = NULL;
    CHECKF(tn_drafter_new_dflash(deep, tmp_path("df-deep-draft.gguf"), p, &dd, &err) == TN_OK,
           "deep: %s", err.message);
    if (dd) {
        const int32_t want[5] = {2, 3, 4, 5, 6};
        CHECK(dd->n_hidden_ids == 5 && !memcmp(dd->hidden_ids, want, sizeof want));
        CHECK(tn_drafter_block_size(dd) == 4 && tn_drafter_draft_max(dd) == 3);
    }

    /* Refused: another width, a layer the target lacks, not a DFlash file, a
     * different vocabulary, a mask token outside it. */
    tn_drafter *x = NULL;
    int rc = tn_drafter_new_dflash(wide, path, p, &x, &err);
    CHECKF(rc == TN_ERR_INVALID && !x && strstr(err.message, "is 64 wide but the target") &&
               strstr(err.message, "df-wide.gguf"),
           "width: %s", err.message);
    rc = tn_drafter_new_dflash(m, tmp_path("df-deep-draft.gguf"), p, &x, &err);
    CHECKF(rc == TN_ERR_INVALID && !x && strstr(err.message, "target layer 4 does not exist") &&
               strstr(err.message, "0 (embeddings) .. 3"),
           "layer ids: %s", err.message);
    rc = tn_drafter_new_dflash(m, tn_model_path(m), p, &x, &err);
    CHECKF(rc == TN_ERR_UNSUPPORTED && !x && strstr(err.message, "not a DFlash draft"),
           "not dflash: %s", err.message);
    if (path) {
        CHECK(clone_vocab(path, tmp_path("df-vocab.gguf"), 200, 0));
        rc = tn_drafter_new_dflash(m, tmp_path("df-vocab.gguf"), p, &x, &err);
        CHECKF(rc == TN_ERR_INVALID && !x && strstr(err.message, "token 200 is '<changed>'"),
               "vocabulary: %s", err.message);
        CHECK(clone_set_int(path, tmp_path("df-mask.gguf"), "tokenizer.ggml.mask_token_id",
                            100000));
        rc = tn_drafter_new_dflash(m, tmp_path("df-mask.gguf"), p, &x, &err);
        CHECKF(rc == TN_ERR_INVALID && !x && strstr(err.message, "mask token 100000"),
               "mask: %s", err.message);
        CHECK(clone_set_int(path, tmp_path("df-block.gguf"), "dflash.block_size", 1000));
        rc = tn_drafter_new_dflash(m, tmp_path("df-block.gguf"), p, &x, &err);
        CHECKF(rc == TN_ERR_FORMAT && !x && strstr(err.message, "dflash.block_size"),
               "block: %s", err.message);
    }
    dp.target = tn_model_path(m);
    dp.target_layers[0] = 9;
    dp.n_target_layers = 1;
    CHECK(tn_mkmodel_dflash(&dp, tmp_path("df-bad.gguf"), &err) == TN_ERR_INVALID);

    if (d) {
        /* Features do not depend on how the target's rows were batched, nor
         * on where they came from: a drafter fed by the session (pin
         * backfilled in a scratch context, request prefilled in chunks,
         * verification rows) drafts exactly as one fed in one go. */
        const int32_t V = tn_model_n_vocab(m);
        int32_t hist[96];
        uint64_t st = 3;
        for (int i = 0; i < 40; i++)
            hist[i] = 5 + (int32_t)(tn_test_rand(&st) % (uint64_t)(V - 5));
        tn_drafter *a = NULL, *b = NULL;
        CHECK(tn_drafter_new_dflash(m, path, p, &a, &err) == TN_OK);
        CHECK(tn_drafter_new_dflash(m, path, p, &b, &err) == TN_OK);
        float *h1 = a && b ? hidden_of(m, a, hist, 39, 39) : NULL;
        float *h7 = a && b ? hidden_of(m, a, hist, 39, 7) : NULL;
        if (h1 && h7) {
            CHECK(!memcmp(h1, h7, (size_t)39 * 64 * sizeof(float)));
            CHECK(a->hooks.observe(a->self, 0, hist, 39, h1, &err) == TN_OK);
            CHECK(b->hooks.observe(b->self, 0, hist, 20, h7, &err) == TN_OK);
            CHECK(b->hooks.observe(b->self, 20, hist + 20, 19, h7 + 20 * 64, &err) == TN_OK);
            /* A gap is ignored; an overlap rewrites. */
            CHECK(b->hooks.observe(b->self, 30, hist + 30, 9, h7 + 30 * 64, &err) == TN_OK);
            int32_t da[16], db[16];
            const int32_t na = propose(a, hist, 40, 15, da), nb = propose(b, hist, 40, 15, db);
            CHECK(na == 15 && nb == 15 && !memcmp(da, db, sizeof da[0] * 15));
            for (int i = 0; i < na; i++)
                CHECK(da[i] >= 0 && da[i] < V);
            /* Shorter blocks when asked for fewer tokens. */
            CHECK(propose(a, hist, 40, 3, da) == 3);
            /* A history that differs at 10: only 10 rows of context remain. */
            int32_t other[40];
            memcpy(other, hist, sizeof other);
            other[10] = (other[10] + 1) % V;
            CHECK(a->hooks.known(a->self, other, 39) == 10);
            CHECK(propose(a, other, 40, 5, da) == 5);
        }
        free(h1);
        free(h7);

        /* Through a session: pin (no drafter), then a request with DFlash. */
        tn_session *s = tn_test_session(m, 256);
        const int32_t pin[12] = {1, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
        const int32_t req[10] = {300, 301, 302, 303, 304, 300, 301, 302, 303, 304};
        if (s && tn_session_pin_tokens(s, pin, 12, NULL, NULL, &err) == TN_OK) {
            tn_gen_params g = tn_gen_default_params();
            g.max_tokens = 30;
            answer plain, spec;
            ask(s, req, 10, &g, &plain);
            g.drafter = b;
            tn_drafter_reset(b);
            ask(s, req, 10, &g, &spec);
            CHECKF(same_answer(&plain, &spec), "dflash session: %s", spec.error);
            CHECK(spec.st.drafted > 0 && spec.st.verify_steps > 0);
            CHECKF(tn_ctx_hidden(tn_session_ctx(s), NULL) == NULL,
                   "capture must be off after the request");
            /* The drafter's features now cover pin + request + answer (minus
             * the last token): compare its drafts with a fresh drafter fed
             * from one decode. */
            int32_t full[128], n = 0;
            memcpy(full, pin, sizeof pin);
            n = 12;
            memcpy(full + n, req, sizeof req);
            n += 10;
            for (int i = 0; i < plain.n && n < 60; i++)
                full[n++] = plain.tokens[i];
            const int32_t known = b->hooks.known(b->self, full, n - 1);
            CHECKF(known == n - 1, "after the request the drafter knows %d of %d rows", known,
                   n - 1);
            tn_drafter *c = NULL;
            CHECK(tn_drafter_new_dflash(m, path, p, &c, &err) == TN_OK);
            float *hc = c ? hidden_of(m, c, full, n - 1, 64) : NULL;
            if (hc && c->hooks.observe(c->self, 0, full, n - 1, hc, &err) == TN_OK) {
                int32_t db[16], dc[16];
                CHECK(propose(b, full, n, 15, db) == 15 && propose(c, full, n, 15, dc) == 15 &&
                      !memcmp(db, dc, 15 * sizeof db[0]));
            }
            free(hc);
            tn_drafter_free(c);
            /* A second request reuses the backfilled pin (nothing to redo) and
             * still matches. */
            ask(s, req, 10, &g, &spec);
            CHECK(same_answer(&plain, &spec));
        }
        tn_session_free(s);
        tn_drafter_free(a);
        tn_drafter_free(b);
    }
    tn_drafter_free(d);
    tn_drafter_free(dd);
out:
    tn_model_free(m);
    tn_model_free(wide);
    tn_model_free(deep);
}

/* ------------------------------------------- llama.cpp's dflash layout */

/* One change to a GGUF copy: drop a key or tensor, set a key, add or
 * replace a tensor. */
typedef struct edit {
    const char *drop;     /* key or tensor name */
    const char *key;      /* set (added or replaced) */
    tn_gguf_value val;
    const char *tensor;   /* added or replaced */
    uint32_t type, n_dims;
    uint64_t ne[2];
    const void *data;
    uint64_t nbytes;
} edit;

static bool clone_edit_kv(const char *key, tn_gguf_value *v, tn_gguf_writer *w, void *user) {
    (void)v, (void)w;
    const edit *e = user;
    return (e->drop && !strcmp(key, e->drop)) || (e->key && !strcmp(key, e->key));
}
static bool clone_edit_set_key(tn_gguf_writer *w, void *user) {
    const edit *e = user;
    return !e->key || tn_gguf_writer_set_value(w, e->key, &e->val) == TN_OK;
}
static bool clone_edit_tensor(tn_test_tensor_copy *t, tn_gguf_writer *w, void *user) {
    (void)w;
    const edit *e = user;
    return (e->drop && !strcmp(t->name, e->drop)) || (e->tensor && !strcmp(t->name, e->tensor));
}
static bool clone_edit_add_tensor(tn_gguf_writer *w, void *user) {
    const edit *e = user;
    return !e->tensor || tn_gguf_writer_add_tensor_data(w, e->tensor, e->type, e->n_dims, e->ne,
                                                        e->data, e->nbytes) == TN_OK;
}
static bool clone_edit(const char *src, const char *dst, const edit *e) {
    const tn_test_gguf_edits edits = {.kv = clone_edit_kv,
                                      .after_kv = clone_edit_set_key,
                                      .tensor = clone_edit_tensor,
                                      .after_tensors = clone_edit_add_tensor,
                                      .user = (void *)e};
    return tn_test_clone_gguf_edited(src, dst, &edits);
}

/* Loading the edited copy fails with rc and a message holding `word`. */
typedef int (*drafter_ctor)(const tn_model *, const char *, tn_drafter_params, tn_drafter **,
                            tn_error *);

static void refused_by(drafter_ctor make, const tn_model *m, const char *src, const edit *e,
                       int rc_want, const char *word) {
    const char *dst = tmp_path("dfg4-edited.gguf");
    CHECKF(clone_edit(src, dst, e), "cannot write the edited copy for '%s'", word);
    tn_drafter_params p = tn_drafter_default_params();
    p.n_threads = 2;
    tn_drafter *x = NULL;
    tn_error err = {0};
    const int rc = make(m, dst, p, &x, &err);
    CHECKF(rc == rc_want && !x && strstr(err.message, word) && strstr(err.message, dst),
           "edited draft (%s): rc %d (%s), want %d", word, rc, err.message, rc_want);
    tn_drafter_free(x);
}

static void refused(const tn_model *m, const char *src, const edit *e, int rc_want,
                    const char *word) {
    refused_by(tn_drafter_new_dflash, m, src, e, rc_want, word);
}

/* Every float a drafter reads goes through the engine's one range check:
 * denormal, NaN, infinite, negative or huge, the key is refused with its
 * value and the range. */
static void floats_refused(drafter_ctor make, const tn_model *m, const char *src,
                           const char *const *keys, size_t n_keys) {
    static const float values[] = {1e-44f, NAN, INFINITY, -1.0f, 1e30f};
    for (size_t k = 0; k < n_keys; k++)
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
            edit e = {.key = keys[k], .val = {.type = TN_GGUF_F32, .v.f64 = values[i]}};
            char says[256];
            snprintf(says, sizeof says, "metadata key '%s' is %g; expected a number from ",
                     keys[k], (double)values[i]);
            refused_by(make, m, src, &e, TN_ERR_FORMAT, says);
        }
}

/* The whole file at path (*size bytes), or NULL. */
static char *read_all(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    char *bytes = NULL;
    *size = 0;
    if (f && !fseek(f, 0, SEEK_END) && (*size = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
        (bytes = malloc((size_t)*size)) && fread(bytes, 1, (size_t)*size, f) != (size_t)*size) {
        free(bytes);
        bytes = NULL;
    }
    if (f)
        fclose(f);
    return bytes;
}

/* make refuses the first cuts[c] bytes of a draft (each cut inside its size
 * bytes), written to tmp_path(file), with an error naming that file. */
static void refuses_cuts(drafter_ctor make, const tn_model *m, tn_drafter_params dp,
                         const char *bytes, long size, const long *cuts, size_t n_cuts,
                         const char *file) {
    for (size_t c = 0; c < n_cuts; c++) {
        if (cuts[c] < 0 || cuts[c] >= size)
            continue;
        const char *cut = tmp_path(file);
        FILE *o = fopen(cut, "wb");
        CHECK(o && fwrite(bytes, 1, (size_t)cuts[c], o) == (size_t)cuts[c]);
        if (o)
            fclose(o);
        tn_drafter *x = NULL;
        tn_error err = {0};
        const int rc = make(m, cut, dp, &x, &err);
        CHECKF(rc != TN_OK && !x && err.message[0] && strstr(err.message, cut),
               "cut at %ld of %ld: rc %d (%s)", cuts[c], size, rc, err.message);
        tn_drafter_free(x);
    }
}

/* Writes a draft; the path lives in out (tmp_path's buffers rotate). */
static const char *dflash_write(const tn_model *target, const char *file,
                                tn_mkmodel_dflash_params p, char out[4096]) {
    snprintf(out, 4096, "%s", tmp_path(file));
    p.target = tn_model_path(target);
    tn_error err = {0};
    const int rc = tn_mkmodel_dflash(&p, out, &err);
    CHECKF(rc == TN_OK, "mkmodel dflash %s: %s", file, err.message);
    return rc == TN_OK ? out : NULL;
}

static void dflash_layout_suite(void) {
    tn_model *m = make_model("dfg4-target.gguf", "gemma4", "q8_0", 64, 2, 51, 0);
    tn_model *q = make_model("dfg4-qwen.gguf", "qwen3", "q8_0", 64, 3, 52, 0);
    if (!m || !q)
        goto out;
    const int32_t V = tn_model_n_vocab(m);
    tn_error err = {0};
    tn_drafter_params dp = tn_drafter_default_params();
    dp.n_threads = 2;

    /* What a draft for a gemma4 target carries over: the window and the
     * target's per-layer pattern, softcapping, the scaled embedding, the
     * whole tokenizer; ids below the target's layer count (llama.cpp has no
     * input for a layer past the last). */
    tn_mkmodel_dflash_params p = tn_mkmodel_dflash_default_params();
    p.n_layer = 4;
    static char path_buf[4096], d2t_buf[4096];
    const char *path = dflash_write(m, "dfg4-default.gguf", p, path_buf);
    tn_gguf *g = NULL, *tg = NULL;
    if (path && tn_gguf_open(path, &g, &err) == TN_OK &&
        tn_gguf_open(tn_model_path(m), &tg, &err) == TN_OK) {
        int64_t v = 0;
        double f = 0;
        CHECK(tn_gguf_get_int(g, "dflash.attention.sliding_window", &v) == TN_OK && v == 16);
        const tn_gguf_value *pat = tn_gguf_find(g, "dflash.attention.sliding_window_pattern");
        const tn_gguf_value *tpat = tn_gguf_find(tg, "gemma4.attention.sliding_window_pattern");
        CHECK(pat && tpat && pat->v.arr.type == TN_GGUF_BOOL && pat->v.arr.n == 4);
        for (uint64_t i = 0; pat && tpat && i < 4; i++)
            CHECKF(tn_gguf_arr_int(pat, i) == tn_gguf_arr_int(tpat, i % tpat->v.arr.n),
                   "pattern of draft layer %d", (int)i);
        CHECK(pat && tn_gguf_arr_int(pat, 2) == 0 && tn_gguf_arr_int(pat, 0) == 1);
        CHECK(tn_gguf_get_float(g, "dflash.final_logit_softcapping", &f) == TN_OK && f == 30.0);
        CHECK(tn_gguf_get_float(g, "dflash.embedding_scale", &f) == TN_OK && f == 8.0);
        const tn_gguf_value *ids = tn_gguf_find(g, "dflash.target_layers");
        for (uint64_t i = 0; ids && i < ids->v.arr.n; i++)
            CHECK(tn_gguf_arr_int(ids, i) < tn_model_n_layer(m));
        int n_tok_keys = 0;
        for (int64_t i = 0; i < tn_gguf_n_kv(tg); i++) {
            tn_str k = tn_gguf_kv_key(tg, i);
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
            if (strncmp(key, "tokenizer.", 10) || !strcmp(key, "tokenizer.ggml.mask_token_id"))
                continue;
            n_tok_keys++;
            CHECKF(tn_gguf_find(g, key), "the draft lacks the target's %s", key);
        }
        CHECK(n_tok_keys >= 2);
        CHECK(!tn_gguf_find_tensor(g, "d2t") && tn_gguf_find_tensor(g, "blk.3.attn_v.weight"));
    }
    tn_gguf_close(g);
    tn_gguf_close(tg);
    g = tg = NULL;
    tn_drafter *d = NULL;
    CHECKF(path && tn_drafter_new_dflash(m, path, dp, &d, &err) == TN_OK, "load: %s", err.message);

    /* The reduced vocabulary: drafts only ever name ids d2t maps to. */
    p = tn_mkmodel_dflash_default_params();
    p.draft_vocab = V / 3;
    p.gemma_layers = true;
    p.n_layer = 3;
    const char *d2t_path = dflash_write(m, "dfg4-d2t.gguf", p, d2t_buf);
    int64_t *map = NULL;
    long data_end = 0; /* the end of the last tensor's bytes: the rest is padding */
    if (d2t_path && tn_gguf_open(d2t_path, &g, &err) == TN_OK) {
        for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
            const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
            const long end = (long)(tn_gguf_data_offset(g) + t->offset + t->nbytes);
            data_end = end > data_end ? end : data_end;
        }
        const tn_gguf_tensor *t = tn_gguf_find_tensor(g, "d2t");
        const tn_gguf_tensor *o = tn_gguf_find_tensor(g, "output.weight");
        CHECK(t && t->type == 27 && t->n_dims == 1 && t->ne[0] == (uint64_t)(V / 3));
        CHECK(o && o->ne[0] == 64 && o->ne[1] == (uint64_t)(V / 3));
        CHECK(!tn_gguf_find_tensor(g, "blk.0.attn_v.weight") &&
              tn_gguf_find_tensor(g, "blk.0.post_attention_norm.weight") &&
              tn_gguf_find_tensor(g, "blk.0.post_ffw_norm.weight") &&
              tn_gguf_find_tensor(g, "blk.0.layer_output_scale.weight") &&
              tn_gguf_find_tensor(g, "rope_freqs.weight"));
        if (t && (map = malloc(t->nbytes)))
            memcpy(map, t->data, t->nbytes);
    }
    tn_gguf_close(g);
    g = NULL;
    tn_drafter *r = NULL;
    CHECKF(d2t_path && tn_drafter_new_dflash(m, d2t_path, dp, &r, &err) == TN_OK, "d2t: %s",
           err.message);
    if (d && r && map) {
        int32_t hist[48];
        uint64_t st = 9;
        for (int i = 0; i < 48; i++)
            hist[i] = 5 + (int32_t)(tn_test_rand(&st) % (uint64_t)(V - 5));
        float *h = hidden_of(m, r, hist, 47, 47);
        float *hd = hidden_of(m, d, hist, 47, 16);
        if (h && hd) {
            CHECK(r->hooks.observe(r->self, 0, hist, 47, h, &err) == TN_OK);
            CHECK(d->hooks.observe(d->self, 0, hist, 47, hd, &err) == TN_OK);
            int32_t draft[16];
            const int32_t n = propose(r, hist, 48, 15, draft);
            CHECK(n == 15);
            for (int32_t i = 0; i < n; i++) {
                bool in = false;
                for (int32_t k = 0; k < V / 3 && !in; k++)
                    in = map[k] == draft[i];
                CHECKF(in, "draft %d (token %d) is not a d2t row", i, draft[i]);
            }
            CHECK(propose(d, hist, 48, 15, draft) == 15);
        }
        free(h);
        free(hd);
    }
    free(map);
    tn_drafter_free(d);
    tn_drafter_free(r);

    /* Made for another target: a gemma4 draft on a qwen3 target of the same
     * width loads only when its ids and vocabulary fit, and refuses
     * otherwise with the file named. */
    {
        tn_drafter *x = NULL;
        const int rc = path ? tn_drafter_new_dflash(q, path, dp, &x, &err) : TN_ERR_INVALID;
        CHECKF(rc == TN_ERR_INVALID && !x, "gemma4 draft on a qwen3 target: %s", err.message);
        tn_drafter_free(x);
    }

    /* Truncated anywhere: an error, never a crash. */
    if (d2t_path) {
        long size = 0;
        char *bytes = read_all(d2t_path, &size);
        CHECK(bytes != NULL);
        if (bytes) {
            const long cuts[] = {0,         3,         8,           24,          100, size / 7,
                                 size / 3,  size / 2,  data_end - 4096, data_end - 9,
                                 data_end - 1};
            refuses_cuts(tn_drafter_new_dflash, m, dp, bytes, size, cuts,
                         sizeof cuts / sizeof cuts[0], "dfg4-cut.gguf");
        }
        free(bytes);
    }

    /* Mismatched or unsupported contents: one line naming the problem. */
    if (d2t_path && path) {
        const int64_t n_map = V / 3;
        int64_t *bad = calloc((size_t)n_map, sizeof *bad);
        for (int64_t i = 0; bad && i < n_map; i++)
            bad[i] = i;
        if (bad) {
            edit e = {.tensor = "d2t", .type = 27, .n_dims = 1, .ne = {(uint64_t)n_map, 1},
                      .data = bad, .nbytes = (uint64_t)n_map * 8};
            bad[5] = V + 3;
            refused(m, d2t_path, &e, TN_ERR_INVALID, "outside the target's vocabulary");
            bad[5] = 4;
            refused(m, d2t_path, &e, TN_ERR_INVALID, "an earlier row already maps to");
            bad[5] = 5;
            e.type = TN_TYPE_F32; /* same bytes, twice the rows */
            e.ne[0] = (uint64_t)n_map * 2;
            refused(m, d2t_path, &e, TN_ERR_FORMAT, "'d2t' must be one i64");
            e.type = 27;
            e.ne[0] = (uint64_t)n_map - 1; /* fewer ids than head rows */
            e.nbytes = (uint64_t)(n_map - 1) * 8;
            refused(m, d2t_path, &e, TN_ERR_FORMAT, "output.weight");
        }
        free(bad);
        edit drop_head = {.drop = "output.weight"};
        refused(m, d2t_path, &drop_head, TN_ERR_FORMAT, "output.weight");
        edit act = {.key = "dflash.hidden_activation",
                    .val = {.type = TN_GGUF_STRING, .v.str = {"relu2", 5}}};
        refused(m, d2t_path, &act, TN_ERR_UNSUPPORTED, "relu2");
        uint8_t flags[3] = {1, 0, 1};
        edit pat = {.key = "dflash.attention.sliding_window_pattern",
                    .val = {.type = TN_GGUF_ARRAY,
                            .v.arr = {.type = TN_GGUF_BOOL, .n = 3, .data = flags}}};
        refused(m, path, &pat, TN_ERR_FORMAT, "one flag per layer (4)");
        const uint32_t sect[4] = {8, 4, 4, 4};
        edit mrope = {.key = "dflash.rope.dimension_sections",
                      .val = {.type = TN_GGUF_ARRAY,
                              .v.arr = {.type = TN_GGUF_U32, .n = 4, .data = (const uint8_t *)sect}}};
        refused(m, path, &mrope, TN_ERR_UNSUPPORTED, "dimension_sections");
        static const char *const floats[] = {
            "dflash.attention.layer_norm_rms_epsilon", "dflash.rope.freq_base",
            "dflash.final_logit_softcapping",          "dflash.embedding_scale",
            "dflash.logit_scale",                      "dflash.attention.scale"};
        floats_refused(tn_drafter_new_dflash, m, path, floats, sizeof floats / sizeof floats[0]);
        const float w1[64 * 8] = {0};
        edit dspark = {.tensor = "markov_w1.weight", .type = TN_TYPE_F32, .n_dims = 2,
                       .ne = {8, 64}, .data = w1, .nbytes = sizeof w1};
        refused(m, path, &dspark, TN_ERR_UNSUPPORTED, "DSpark");
        edit rot = {.key = "dflash.rope.dimension_count", .val = {.type = TN_GGUF_U32, .v.i64 = 7}};
        refused(m, path, &rot, TN_ERR_FORMAT, "dimension_count");
        edit no_v = {.drop = "blk.1.attn_k.weight"};
        refused(m, path, &no_v, TN_ERR_FORMAT, "blk.1.attn_k.weight");
        float freqs[32]; /* head size 64 rotated whole: 32 divisors */
        for (int i = 0; i < 32; i++)
            freqs[i] = i == 1 ? -1.0f : 1.0f;
        edit neg = {.tensor = "rope_freqs.weight", .type = TN_TYPE_F32, .n_dims = 1,
                    .ne = {32, 1}, .data = freqs, .nbytes = sizeof freqs};
        refused(m, d2t_path, &neg, TN_ERR_FORMAT, "rope_freqs.weight");
    }
out:
    tn_model_free(m);
    tn_model_free(q);
}


/* ------------------------------------------------------------------ mtp */

static bool is_gemma4(const tn_model *m) {
    tn_str a = {0};
    return tn_gguf_get_str(tn_model_gguf(m), "general.architecture", &a) == TN_OK &&
           tn_str_eq(a, "gemma4");
}

/* An assistant for target (half or twice its width: they must differ),
 * path in out (tmp_path's buffers rotate). */
static const char *mtp_write(const tn_model *target, const char *file, char out[4096]) {
    snprintf(out, 4096, "%s", tmp_path(file));
    tn_mkmodel_mtp_params p = tn_mkmodel_mtp_default_params();
    p.target = tn_model_path(target);
    const int32_t E = tn_model_n_embd(target);
    p.n_embd = E >= 64 ? E / 2 : 2 * E;
    p.n_layer = 2;
    p.n_head = 2;
    p.n_ff = 64;
    p.seed = 41;
    tn_error err = {0};
    const int rc = tn_mkmodel_mtp(&p, out, &err);
    CHECKF(rc == TN_OK, "mkmodel gemma4-assistant %s: %s", file, err.message);
    return rc == TN_OK ? out : NULL;
}

static tn_drafter *mtp_for(const tn_model *target, const char *tag) {
    if (!is_gemma4(target))
        return NULL;
    char name[128], buf[4096];
    snprintf(name, sizeof name, "mtp-%s.gguf", tag);
    const char *path = mtp_write(target, name, buf);
    if (!path)
        return NULL;
    tn_drafter_params p = tn_drafter_default_params();
    p.n_threads = 2;
    tn_drafter *d = NULL;
    tn_error err = {0};
    const int rc = tn_drafter_new_mtp(target, path, p, &d, &err);
    CHECKF(rc == TN_OK, "mtp %s: %s", tag, err.message);
    return d;
}

/* The assistant's layout (llama.cpp's gemma4-assistant keys and tensors),
 * its behaviour at the edges, and files that must be refused with one line
 * naming the file and the problem. */
static void mtp_suite(void) {
    tn_model *m = make_model("mtp-target.gguf", "gemma4", "q8_0", 64, 2, 61, 0);
    tn_model *q = make_model("mtp-qwen.gguf", "qwen3", "q8_0", 64, 2, 62, 0);
    tn_model *wide = make_model("mtp-wide.gguf", "gemma4", "q8_0", 128, 2, 63, 0);
    char buf[4096];
    const char *path = m ? mtp_write(m, "mtp-layout.gguf", buf) : NULL;
    if (!m || !q || !wide || !path)
        goto out;
    tn_drafter_params dp = tn_drafter_default_params();
    dp.n_threads = 2;
    tn_error err = {0};

    /* The keys llama.cpp's loader reads, with the target's shapes. */
    tn_gguf *g = NULL;
    if (tn_gguf_open(path, &g, &err) == TN_OK) {
        static const char *const keys[] = {
            "gemma4-assistant.embedding_length_out", "gemma4-assistant.nextn_predict_layers",
            "gemma4-assistant.attention.key_length_swa",
            "gemma4-assistant.attention.value_length_swa",
            "gemma4-assistant.attention.sliding_window",
            "gemma4-assistant.attention.sliding_window_pattern",
            "gemma4-assistant.rope.freq_base_swa", "tokenizer.ggml.tokens"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            CHECKF(tn_gguf_find(g, keys[i]), "the assistant lacks %s", keys[i]);
        int64_t v = 0;
        CHECK(tn_gguf_get_int(g, "gemma4-assistant.embedding_length_out", &v) == TN_OK && v == 64);
        static const char *const tensors[] = {"token_embd.weight", "nextn.pre_projection.weight",
                                              "nextn.post_projection.weight", "rope_freqs.weight",
                                              "blk.1.layer_output_scale.weight"};
        for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
            CHECKF(tn_gguf_find_tensor(g, tensors[i]), "the assistant lacks %s", tensors[i]);
        CHECK(!tn_gguf_find_tensor(g, "blk.0.attn_k.weight")); /* it reads the target's KV */
        tn_gguf_close(g);
    }

    tn_drafter *d = NULL;
    CHECKF(tn_drafter_new_mtp(m, path, dp, &d, &err) == TN_OK, "load: %s", err.message);
    if (d) {
        CHECK(!strcmp(tn_drafter_name(d), "mtp") && tn_drafter_draft_max(d) == 3);
        /* Outside a request it has no target memory to read: no drafts. */
        int32_t hist[4] = {5, 6, 7, 8}, draft[8];
        CHECK(d->ops.propose(d->self, hist, 4, 3, draft, &err) == 0);
        /* In a request: drafts of the asked length, verified, lossless. */
        tn_session *s = tn_test_session(m, 256);
        if (s) {
            int32_t req[64];
            const int32_t n_req = make_prompt(0, tn_model_n_vocab(m), req);
            tn_gen_params g0 = tn_gen_default_params();
            g0.max_tokens = 20;
            answer plain, a;
            ask(s, req, n_req, &g0, &plain);
            tn_gen_params gs = g0;
            gs.drafter = d;
            gs.draft_max = 4;
            ask(s, req, n_req, &gs, &a);
            CHECKF(same_answer(&a, &plain), "mtp: %s", a.error);
            CHECKF(a.st.verify_steps > 0 && a.st.drafted >= a.st.verify_steps,
                   "mtp: drafted %d in %d steps", a.st.drafted, a.st.verify_steps);
            /* After the request the drafter is unbound again. */
            CHECK(d->ops.propose(d->self, hist, 4, 3, draft, &err) == 0);
            tn_session_free(s);
        }
        tn_drafter_free(d);
    }

    /* Made for another target. */
    {
        tn_drafter *x = NULL;
        int rc = tn_drafter_new_mtp(q, path, dp, &x, &err);
        CHECKF(rc == TN_ERR_INVALID && !x && strstr(err.message, "Gemma 4 models only"),
               "assistant on a qwen3 target: %s", err.message);
        rc = tn_drafter_new_mtp(wide, path, dp, &x, &err);
        CHECKF(rc == TN_ERR_INVALID && !x && strstr(err.message, "64 wide") &&
                   strstr(err.message, path),
               "assistant on a wider gemma4 target: %s", err.message);
        tn_drafter_free(x);
    }

    /* Truncated anywhere, or garbage: an error, never a crash. */
    {
        long size = 0;
        char *bytes = read_all(path, &size);
        CHECK(bytes != NULL);
        if (bytes) {
            /* size - 40: inside the last tensors (each 32-aligned), past any padding */
            const long cuts[] = {0, 3, 8, 24, 100, size / 7, size / 3, size / 2, size - 4096,
                                 size - 40};
            refuses_cuts(tn_drafter_new_mtp, m, dp, bytes, size, cuts,
                         sizeof cuts / sizeof cuts[0], "mtp-cut.gguf");
            /* The header kept, the rest random bytes. */
            uint64_t st = 99;
            for (long i = 64; i < size; i++)
                bytes[i] = (char)tn_test_rand(&st);
            const char *junk = tmp_path("mtp-junk.gguf");
            FILE *o = fopen(junk, "wb");
            CHECK(o && fwrite(bytes, 1, (size_t)size, o) == (size_t)size);
            if (o)
                fclose(o);
            tn_drafter *x = NULL;
            const int rc = tn_drafter_new_mtp(m, junk, dp, &x, &err);
            CHECKF(rc != TN_OK && !x && strstr(err.message, junk), "garbage: rc %d (%s)", rc,
                   err.message);
            tn_drafter_free(x);
        }
        free(bytes);
    }

    /* Mismatched or malformed contents. */
    edit arch = {.key = "general.architecture",
                 .val = {.type = TN_GGUF_STRING, .v.str = {"gemma4", 6}}};
    refused_by(tn_drafter_new_mtp, m, path, &arch, TN_ERR_UNSUPPORTED, "not a Gemma 4 assistant");
    static const char *const floats[] = {"gemma4-assistant.attention.layer_norm_rms_epsilon",
                                         "gemma4-assistant.rope.freq_base",
                                         "gemma4-assistant.rope.freq_base_swa"};
    floats_refused(tn_drafter_new_mtp, m, path, floats, sizeof floats / sizeof floats[0]);
    edit out48 = {.key = "gemma4-assistant.embedding_length_out",
                  .val = {.type = TN_GGUF_U32, .v.i64 = 48}};
    refused_by(tn_drafter_new_mtp, m, path, &out48, TN_ERR_INVALID, "48 wide");
    edit same = {.key = "gemma4-assistant.embedding_length_out",
                 .val = {.type = TN_GGUF_U32, .v.i64 = 32}};
    refused_by(tn_drafter_new_mtp, m, path, &same, TN_ERR_FORMAT, "embedding_length_out");
    edit nextn = {.key = "gemma4-assistant.nextn_predict_layers",
                  .val = {.type = TN_GGUF_U32, .v.i64 = 1}};
    refused_by(tn_drafter_new_mtp, m, path, &nextn, TN_ERR_FORMAT, "nextn_predict_layers");
    edit vlen = {.key = "gemma4-assistant.attention.value_length_swa",
                 .val = {.type = TN_GGUF_U32, .v.i64 = 16}};
    refused_by(tn_drafter_new_mtp, m, path, &vlen, TN_ERR_FORMAT, "equal key and value");
    edit kv = {.key = "gemma4-assistant.attention.head_count_kv",
               .val = {.type = TN_GGUF_U32, .v.i64 = 2}};
    refused_by(tn_drafter_new_mtp, m, path, &kv, TN_ERR_INVALID, "made for another model");
    edit dswa = {.key = "gemma4-assistant.attention.key_length_swa",
                 .val = {.type = TN_GGUF_U32, .v.i64 = 16}};
    refused_by(tn_drafter_new_mtp, m, path, &dswa, TN_ERR_FORMAT, "dimension_count_swa");
    uint8_t flags[3] = {1, 0, 1};
    edit pat = {.key = "gemma4-assistant.attention.sliding_window_pattern",
                .val = {.type = TN_GGUF_ARRAY,
                        .v.arr = {.type = TN_GGUF_BOOL, .n = 3, .data = flags}}};
    refused_by(tn_drafter_new_mtp, m, path, &pat, TN_ERR_FORMAT, "one flag per layer (2)");
    edit no_pat = {.drop = "gemma4-assistant.attention.sliding_window_pattern"};
    refused_by(tn_drafter_new_mtp, m, path, &no_pat, TN_ERR_FORMAT, "sliding_window_pattern");
    edit no_pre = {.drop = "nextn.pre_projection.weight"};
    refused_by(tn_drafter_new_mtp, m, path, &no_pre, TN_ERR_FORMAT,
               "nextn.pre_projection.weight");
    edit no_scale = {.drop = "blk.1.layer_output_scale.weight"};
    refused_by(tn_drafter_new_mtp, m, path, &no_scale, TN_ERR_FORMAT,
               "blk.1.layer_output_scale.weight");
    const float wq[32 * 8] = {0};
    edit shape = {.tensor = "blk.0.attn_q.weight", .type = TN_TYPE_F32, .n_dims = 2,
                  .ne = {32, 8}, .data = wq, .nbytes = sizeof wq};
    refused_by(tn_drafter_new_mtp, m, path, &shape, TN_ERR_FORMAT, "blk.0.attn_q.weight");
    float freqs[32]; /* full heads of 64: 32 divisors */
    for (int i = 0; i < 32; i++)
        freqs[i] = i == 3 ? 0.0f : 1.0f;
    edit rf = {.tensor = "rope_freqs.weight", .type = TN_TYPE_F32, .n_dims = 1, .ne = {32, 1},
               .data = freqs, .nbytes = sizeof freqs};
    refused_by(tn_drafter_new_mtp, m, path, &rf, TN_ERR_FORMAT, "rope_freqs.weight");
    float norm[32];
    for (int i = 0; i < 32; i++)
        norm[i] = i == 7 ? NAN : 1.0f;
    edit nan = {.tensor = "output_norm.weight", .type = TN_TYPE_F32, .n_dims = 1, .ne = {32, 1},
                .data = norm, .nbytes = sizeof norm};
    refused_by(tn_drafter_new_mtp, m, path, &nan, TN_ERR_FORMAT, "NaN");
out:
    tn_model_free(m);
    tn_model_free(q);
    tn_model_free(wide);
}

/* Sampling with the assistant keeps the target's distribution: the joint
 * of the first three tokens, chi-square as sampling_model. */
static void sampling_mtp(void) {
    tn_model *m = make_model("sampling-g4.gguf", "gemma4", "q8_0", 32, 1, 9, 2.0f);
    tn_drafter *d = m ? mtp_for(m, "sampling") : NULL;
    tn_session *s = m ? tn_test_session(m, 64) : NULL;
    tn_error err = {0};
    const int32_t pin[4] = {1, 40, 41, 42};
    const int32_t req[5] = {300, 301, 302, 300, 301};
    if (!m || !d || !s || tn_session_pin_tokens(s, pin, 4, NULL, NULL, &err) != TN_OK) {
        CHECKF(0, "sampling mtp: setup failed (%s)", err.message);
        goto out;
    }
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 3;
    g.sampler.temperature = 1.0f;
    g.sampler.top_k = 4;
    int32_t all[9];
    memcpy(all, pin, sizeof pin);
    memcpy(all + 4, req, sizeof req);
    joint J;
    exact_joint(m, all, 9, g.sampler, &J);
    CHECKF(J.n >= 8 && J.n <= 64, "joint distribution with %d categories", J.n);
    const int N = 3000;
    int counts[65] = {0}, drafted = 0, accepted = 0;
    for (int i = 0; i < N; i++) {
        tn_gen_params gs = g;
        gs.drafter = d;
        gs.draft_max = 2;
        gs.sampler.seed = 7000003ULL + (uint64_t)i;
        answer a;
        ask(s, req, 5, &gs, &a);
        drafted += a.st.drafted;
        accepted += a.st.accepted;
        int cat = 64;
        for (int k = 0; a.n == 3 && k < J.n; k++)
            if (J.tok[0][k] == a.tokens[0] && J.tok[1][k] == a.tokens[1] &&
                J.tok[2][k] == a.tokens[2])
                cat = k;
        counts[cat]++;
    }
    CHECKF(counts[64] == 0, "mtp: %d answers outside the support", counts[64]);
    int df;
    const double x2 = chi2_fit(counts, J.prob, J.n, N - counts[64], &df);
    const double limit = chi2_quantile(df, Z_1E4);
    CHECKF(x2 < limit, "mtp: chi-square %.1f over %d categories (limit %.1f)", x2, df + 1, limit);
    /* Seed 9: no end-of-generation token in the support (the exact joint
     * assumes three tokens), and some drafts are kept, so both branches of
     * the rejection rule are taken. */
    CHECKF(drafted > 0 && accepted > 0 && accepted < drafted,
           "mtp: %d of %d drafts accepted in %d sampled requests", accepted, drafted, N);
    fprintf(stderr, "sampling %-16s chi2 %6.1f (df %2d, limit %.1f); drafted %d, accepted %d\n",
            "mtp", x2, df, limit, drafted, accepted);
out:
    tn_session_free(s);
    tn_drafter_free(d);
    tn_model_free(m);
}

/* ------------------------------------------------------ randomized sweep */

/* "speculation on == off" attacked at random: each case draws an
 * architecture, a drafter, draft_max 1..16, sampler settings (temperature
 * 0, 0.7 or 1.5; top-k, top-p, min-p, penalties; a seed), a pin of 0..40
 * tokens restored from a snapshot or prefilled, requests and answers that
 * cross the 16-row sliding window, max_tokens, stop tokens and stop strings
 * that end in the middle of a draft, the token callback saying stop
 * there, flash requests or chat turns (thinking on or off) with
 * prefix reuse, and 1 or 2 threads for each side. Greedy, and sampling
 * whose filters leave one token (top-k 1), must give plain decoding's
 * tokens, stop reason and KV bit for bit; other sampling is the target's
 * distribution, not its tokens (sampling-* checks that), so there the
 * speculative answer must be the same on 1 and 2 threads. Each case also
 * decodes its answer in random chunks with every row's logits and compares
 * them with one-token decodes bit for bit (the verify batch's premise).
 * TERN_SPEC_SWEEP=N runs N cases (default 24: three per architecture),
 * TERN_SPEC_SWEEP_SEED another sequence; a failure names its case, and
 * TERN_SPEC_SWEEP_CASE=I runs case I alone. */

/* A built-in drafter whose proposals are replaced by an oracle's where it
 * knows the answer: DFlash and MTP run every hook (features observed, the
 * target's KV bound) as usual, but on random weights their own drafts are
 * almost never accepted, so without this their state after accepted blocks
 * would go untested. Its drafts are deterministic (no q). */
typedef struct sw_wrap {
    tn_drafter *inner;
    oracle *o;
} sw_wrap;

static int sw_wrap_begin(void *self, const tn_sampler_params *sp, tn_error *err) {
    tn_drafter *in = ((sw_wrap *)self)->inner;
    return in->hooks.begin ? in->hooks.begin(in->self, sp, err) : TN_OK;
}

static int32_t sw_wrap_propose_q(void *self, const int32_t *h, int32_t n, int32_t max,
                                 int32_t *draft, float *q, bool *has_q, tn_error *err) {
    (void)q;
    sw_wrap *w = self;
    tn_drafter *in = w->inner;
    int32_t nd = in->hooks.propose_q
                     ? in->hooks.propose_q(in->self, h, n, max, draft, NULL, has_q, err)
                     : in->ops.propose(in->self, h, n, max, draft, err);
    if (nd < 0)
        return nd;
    int32_t known[TN_SPEC_MAX_DRAFT];
    const int32_t no = oracle_propose(w->o, h, n, max, known, err);
    for (int32_t i = 0; i < no; i++)
        draft[i] = known[i];
    *has_q = false;
    return no > nd ? no : nd;
}

static int sw_wrap_observe(void *self, int32_t pos0, const int32_t *tokens, int32_t n,
                           const float *hidden, tn_error *err) {
    tn_drafter *in = ((sw_wrap *)self)->inner;
    return in->hooks.observe ? in->hooks.observe(in->self, pos0, tokens, n, hidden, err) : TN_OK;
}

static int32_t sw_wrap_known(void *self, const int32_t *h, int32_t n) {
    tn_drafter *in = ((sw_wrap *)self)->inner;
    return in->hooks.known ? in->hooks.known(in->self, h, n) : 0;
}

static void sw_wrap_bind(void *self, tn_ctx *ctx) {
    tn_drafter *in = ((sw_wrap *)self)->inner;
    if (in->hooks.bind)
        in->hooks.bind(in->self, ctx);
}

static void sw_wrap_accepted(void *self, int32_t n) {
    tn_drafter *in = ((sw_wrap *)self)->inner;
    if (in->ops.accepted)
        in->ops.accepted(in->self, n);
}

static tn_drafter *sw_wrap_new(tn_drafter *inner, oracle *o) {
    if (!inner)
        return NULL;
    sw_wrap *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->inner = inner;
    w->o = o;
    const tn_drafter_ops ops = {.accepted = sw_wrap_accepted, .free = free};
    const tn_drafter_hooks hooks = {.begin = sw_wrap_begin,
                                    .propose_q = sw_wrap_propose_q,
                                    .observe = sw_wrap_observe,
                                    .known = sw_wrap_known,
                                    .bind = sw_wrap_bind};
    tn_drafter *d = NULL;
    tn_error err = {0};
    int rc =
        tn_drafter_wrap(inner->name, &ops, &hooks, w, inner->draft_max, inner->target, &d, &err);
    if (rc == TN_OK) {
        d->block_size = inner->block_size;
        rc = tn_drafter_set_hidden_ids(d, inner->hidden_ids, inner->n_hidden_ids, &err);
    }
    CHECKF(rc == TN_OK, "wrapped drafter: %s", err.message);
    return d;
}

enum { SW_ARCHES = 8, SW_DRAFTERS = 12 };
/* qwen3-vocab: Qwen3's real vocabulary and chat template (when fetched) */
static const char *const sw_arches[SW_ARCHES] = {"llama",    "qwen3",     "gemma3",  "gemma4",
                                                 "qwen3moe", "gemma4moe", "gpt-oss", "qwen3-vocab"};
static const char *const sw_dnames[SW_DRAFTERS] = {
    "lookup",           "lookup-short", "draft-model", "target-as-draft", "oracle",
    "corrupted-oracle", "noise",        "dflash",      "dflash-d2t",      "mtp",
    "dflash+oracle",    "mtp+oracle"};

typedef struct sw_target {
    tn_model *m;
    drafters d;
    tn_drafter *wrap_dflash, *wrap_mtp;
    bool tried;
} sw_target;

typedef struct sw_counts {
    int cases, compared, greedy, onehot, sampled, chat, flash, restored, prefilled;
    int drafted, accepted, with_accept, logit_rows;
} sw_counts;

static sw_target sw_t[SW_ARCHES];
static sw_counts sw_by_arch[SW_ARCHES], sw_by_drafter[SW_DRAFTERS];
static int sw_failures;
static int sw_stops[TN_STOP_CANCELLED + 1]; /* the compared answers' stop reasons */

static sw_target *sw_get(int a) {
    sw_target *t = &sw_t[a];
    if (t->tried)
        return t->m ? t : NULL;
    t->tried = true;
    const bool real = !strcmp(sw_arches[a], "qwen3-vocab");
    char tok[4200];
    if (real) {
        const char *dir = tn_test_vocab("qwen3");
        if (!dir)
            return NULL;
        snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
        mk_tokenizer = tok;
    }
    const char *arch = real ? "qwen3" : sw_arches[a];
    char file[96], dfile[96];
    snprintf(file, sizeof file, "sweep-%s.gguf", sw_arches[a]);
    snprintf(dfile, sizeof dfile, "sweep-draft-%s.gguf", sw_arches[a]);
    t->m = make_model(file, arch, "q8_0", 64, 2, 500 + (uint64_t)a, 0);
    tn_model *dm = make_model(dfile, arch, "q8_0", 64, 1, 600 + (uint64_t)a, 0);
    mk_tokenizer = NULL;
    tn_model_free(dm); /* only its file is needed */
    if (!t->m || !dm) {
        tn_model_free(t->m);
        t->m = NULL;
        return NULL;
    }
    char tag[64];
    snprintf(tag, sizeof tag, "sweep-%s", sw_arches[a]);
    drafters_make(&t->d, t->m, tmp_path(file), tmp_path(dfile), tag);
    t->wrap_dflash = sw_wrap_new(t->d.dflash, &t->d.oracle_state);
    t->wrap_mtp = sw_wrap_new(t->d.mtp, &t->d.oracle_state);
    return t;
}

static tn_drafter *sw_drafter(sw_target *t, int which) {
    const drafters *d = &t->d;
    tn_drafter *list[SW_DRAFTERS] = {d->lookup,     d->lookup_short, d->model,       d->self_model,
                                     d->oracle,     d->corrupt,      d->noise,       d->dflash,
                                     d->dflash_alt, d->mtp,          t->wrap_dflash, t->wrap_mtp};
    return list[which];
}

/* Random tokens, a phrase repeated, a counting pattern: concatenated. */
static int32_t sw_tokens(uint64_t *st, int32_t V, int32_t max, int32_t *out) {
    const int32_t want = 1 + (int32_t)(tn_test_rand(st) % (uint64_t)max);
    int32_t n = 0;
    while (n < want) {
        const int kind = (int)(tn_test_rand(st) % 3);
        const int32_t len = 1 + (int32_t)(tn_test_rand(st) % 12);
        int32_t phrase[12];
        for (int i = 0; i < len; i++)
            phrase[i] = 5 + (int32_t)(tn_test_rand(st) % (uint64_t)(V - 5));
        const int reps = kind == 1 ? 2 + (int)(tn_test_rand(st) % 3) : 1;
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < len && n < want; i++, n++)
                out[n] = kind == 2 ? 300 + (n % 5) * 3 : phrase[i];
    }
    return n;
}

static const char *const sw_words[] = {"the", "cat", "sat", "on", "mat", "and",  "then",
                                       "a",   "dog", "ran", "to", "it",  "said", "why"};

static void sw_text(uint64_t *st, int words, char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    const size_t nw = sizeof sw_words / sizeof sw_words[0];
    for (int i = 0; i < words; i++) {
        /* repeats give lookup something to find */
        const char *w = sw_words[tn_test_rand(st) % (i > 3 && tn_test_rand(st) % 2 ? 4 : nw)];
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? " " : "", w);
        if (o >= cap - 1)
            break;
    }
}

/* Every row of the answer decoded in random chunks with every row's logits
 * equals the one-token decode of that row, bit for bit. */
static int sw_logits(const tn_model *m, const int32_t *prefix, int32_t n_prefix, const int32_t *ans,
                     int32_t n_ans, int threads_a, int threads_b, uint64_t *st, const char *what) {
    if (n_ans < 2)
        return 0;
    const int32_t V = tn_model_n_vocab(m);
    tn_ctx *a = NULL, *b = NULL;
    float *la = malloc((size_t)V * 17 * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    int rows = 0;
    if (!la || !lb || tn_ctx_new(m, 256, threads_a, &a, NULL) != TN_OK ||
        tn_ctx_new(m, 256, threads_b, &b, NULL) != TN_OK || n_prefix + n_ans > 256)
        goto out;
    CHECK(tn_ctx_decode(a, prefix, n_prefix, TN_LOGITS_NONE, NULL, NULL) == TN_OK);
    CHECK(tn_ctx_decode(b, prefix, n_prefix, TN_LOGITS_NONE, NULL, NULL) == TN_OK);
    for (int32_t done = 0; done < n_ans;) {
        int32_t k = 1 + (int32_t)(tn_test_rand(st) % 17);
        if (k > n_ans - done)
            k = n_ans - done;
        CHECK(tn_ctx_decode(a, ans + done, k, TN_LOGITS_ALL, la, NULL) == TN_OK);
        for (int32_t i = 0; i < k; i++) {
            CHECK(tn_ctx_decode(b, ans + done + i, 1, TN_LOGITS_LAST, lb, NULL) == TN_OK);
            const float *r = la + (size_t)i * (size_t)V;
            if (memcmp(r, lb, (size_t)V * sizeof *lb) != 0) {
                int32_t j = 0;
                while (j < V && r[j] == lb[j])
                    j++;
                CHECKF(false,
                       "%s: row %d of a %d-row batch (%d threads) differs from the one-token "
                       "decode (%d threads): logit %d %.9g vs %.9g",
                       what, done + i, k, threads_a, threads_b, j, j < V ? r[j] : 0.0,
                       j < V ? lb[j] : 0.0);
                sw_failures++;
                goto out;
            }
            rows++;
        }
        done += k;
    }
out:
    tn_ctx_free(a);
    tn_ctx_free(b);
    free(la);
    free(lb);
    return rows;
}

static tn_session *sw_session(const tn_model *m, int32_t n_ctx, int threads, const char *pins) {
    tn_session_params sp = tn_test_session_params(n_ctx, threads);
    sp.pin_cache_dir = pins;
    tn_session *s = NULL;
    tn_error err = {0};
    CHECKF(tn_session_new(m, sp, &s, &err) == TN_OK, "session: %s", err.message);
    return s;
}

/* Every KV row's bytes (the pinned ones after a flash request). */
static uint64_t sw_kv_hash(tn_session *s) {
    tn_ctx *c = tn_session_ctx(s);
    const int32_t n = tn_ctx_kv_len(c);
    const uint64_t bytes = tn_ctx_kv_state_bytes(c, n);
    void *buf = malloc(bytes ? bytes : 1);
    uint64_t h = 0;
    if (buf && tn_ctx_kv_state_save(c, n, buf, bytes, NULL) == TN_OK)
        h = tn_checksum64(buf, bytes, 0) ^ (uint64_t)n;
    free(buf);
    return h;
}

static void sw_report(const char *what, const answer *x, const answer *y, const char *lx,
                      const char *ly) {
    sw_failures++;
    CHECKF(false, "%s: %s and %s differ (%s%s)", what, lx, ly, x->error, y->error);
    print_tokens(lx, x);
    print_tokens(ly, y);
}

static void sw_case(uint64_t seed, int idx) {
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + (uint64_t)idx * 7919u + 1;
    tn_test_rand(&st);
    const int a =
        getenv("TERN_SPEC_SWEEP") ? (int)(tn_test_rand(&st) % SW_ARCHES) : idx % SW_ARCHES;
    sw_target *t = sw_get(a);
    if (!t)
        return;
    const int32_t V = tn_model_n_vocab(t->m);
    int dk;
    tn_drafter *dr;
    do {
        dk = (int)(tn_test_rand(&st) % SW_DRAFTERS);
        dr = sw_drafter(t, dk);
    } while (!dr);

    tn_gen_params g = tn_gen_default_params();
    const float temps[3] = {0.0f, 0.7f, 1.5f};
    g.sampler.temperature = temps[tn_test_rand(&st) % 3];
    const int32_t ks[4] = {0, 1, 5, 40};
    g.sampler.top_k = ks[tn_test_rand(&st) % 4];
    const float ps[3] = {1.0f, 0.9f, 0.5f}, mps[3] = {0.0f, 0.05f, 0.2f};
    g.sampler.top_p = ps[tn_test_rand(&st) % 3];
    g.sampler.min_p = mps[tn_test_rand(&st) % 3];
    if (tn_test_rand(&st) % 2) {
        g.sampler.repeat_penalty = 1.0f + (float)(tn_test_rand(&st) % 4) * 0.1f;
        g.sampler.presence_penalty = (float)(tn_test_rand(&st) % 3) * 0.25f;
        g.sampler.frequency_penalty = (float)(tn_test_rand(&st) % 3) * 0.25f;
        g.sampler.penalty_last_n = (int32_t)(tn_test_rand(&st) % 3) * 32;
    }
    g.sampler.seed = tn_test_rand(&st);
    g.max_tokens = 1 + (int32_t)(tn_test_rand(&st) % 60);
    const int32_t draft_max = 1 + (int32_t)(tn_test_rand(&st) % 16);
    const bool greedy = g.sampler.temperature <= 0;
    const bool onehot = !greedy && g.sampler.top_k == 1;
    const bool exact = greedy || onehot;
    const int th_plain = 1 + (int)(tn_test_rand(&st) % 2),
              th_spec = 1 + (int)(tn_test_rand(&st) % 2);
    const bool chat = tn_test_rand(&st) % 3 == 0;
    /* a context that fills up in the middle of a draft */
    const bool small = !chat && tn_test_rand(&st) % 6 == 0;
    const int32_t n_ctx = small ? 64 + (int32_t)(tn_test_rand(&st) % 64) : 384;
    if (small)
        g.max_tokens = 0;
    const bool spec_first = tn_test_rand(&st) % 2; /* which side prefills the pin */
    /* none, none, a stop token, a stop string, the callback saying stop */
    const int stop_kind = (int)(tn_test_rand(&st) % 5);
    cb_stop_after = stop_kind == 4 ? 1 + (int)(tn_test_rand(&st) % 20) : 0;
    g.thinking = tn_test_rand(&st) % 2;
    char what[160];
    snprintf(what, sizeof what, "sweep case %d (%s, %s, K=%d, T=%.1f top-k %d, %s, threads %d/%d)",
             idx, sw_arches[a], sw_dnames[dk], draft_max, (double)g.sampler.temperature,
             g.sampler.top_k, chat ? "chat" : "flash", th_plain, th_spec);

    char pins[4096];
    snprintf(pins, sizeof pins, "%s", tmp_path("sweep-pins"));
    tn_session *sp = NULL, *ss = NULL, *s2 = NULL;
    if (spec_first) {
        ss = sw_session(t->m, n_ctx, th_spec, pins);
        sp = sw_session(t->m, n_ctx, th_plain, pins);
    } else {
        sp = sw_session(t->m, n_ctx, th_plain, pins);
        ss = sw_session(t->m, n_ctx, th_spec, pins);
    }
    if (!exact)
        s2 = sw_session(t->m, n_ctx, th_spec == 1 ? 2 : 1, pins);
    sw_counts *ca = &sw_by_arch[a], *cd = &sw_by_drafter[dk];
    int32_t pin[48], n_pin = 0;
    char sys[512];
    sys[0] = '\0';
    tn_error err = {0};
    if (!sp || !ss || (!exact && !s2))
        goto out;
    if (tn_test_rand(&st) % 4 != 0) {
        if (chat)
            sw_text(&st, 1 + (int)(tn_test_rand(&st) % 20), sys, sizeof sys);
        else
            n_pin = sw_tokens(&st, V, 40, pin);
    }
    tn_session *order[3] = {spec_first ? ss : sp, spec_first ? sp : ss, s2};
    for (int i = 0; i < 3; i++) {
        if (!order[i] || (!n_pin && !sys[0]))
            continue;
        const int rc = chat ? tn_session_pin(order[i], sys, NULL, NULL, &err)
                            : tn_session_pin_tokens(order[i], pin, n_pin, NULL, NULL, &err);
        CHECKF(rc == TN_OK, "%s: pin: %s", what, err.message);
        if (rc != TN_OK)
            goto out;
    }
    if (n_pin || sys[0]) {
        const bool restored = tn_session_pin_info(ss).loaded_from_snapshot;
        ca->restored += restored, cd->restored += restored;
        ca->prefilled += !restored, cd->prefilled += !restored;
    }

    const int turns = 1 + (int)(tn_test_rand(&st) % 3);
    tn_session_message msgs[8];
    char utext[4][512];
    static answer ap, as, a2;
    int nm = 0;
    for (int turn = 0; turn < turns; turn++) {
        int32_t req[128];
        int32_t n_req = 0;
        if (chat) {
            sw_text(&st, 1 + (int)(tn_test_rand(&st) % 30), utext[turn], sizeof utext[turn]);
            msgs[nm++] = (tn_session_message){.role = "user", .content = utext[turn]};
        } else {
            n_req = sw_tokens(&st, V, 60, req);
        }
        tn_gen_params gp = g;
        if ((stop_kind == 2 || stop_kind == 3) && exact) {
            /* stop where plain decoding's answer would be mid-draft */
            answer full;
            tn_gen_params gf = g;
            gf.max_tokens = 40;
            if (chat) {
                collect c = {.a = &full, .s = sp};
                memset(&full, 0, sizeof full);
                full.rc = tn_session_chat(sp, msgs, nm, &gf, on_token, &c, &full.st, &err);
            } else {
                ask(sp, req, n_req, &gf, &full);
            }
            if (full.rc == TN_OK && full.n > 3) {
                const int at = 1 + (int)(tn_test_rand(&st) % (uint64_t)(full.n - 1));
                if (stop_kind == 2) {
                    gp.stop_tokens[0] = full.tokens[at];
                    gp.n_stop_tokens = 1;
                } else if (full.text_len > 4) {
                    static char stop[8];
                    const size_t off = tn_test_rand(&st) % (full.text_len - 2);
                    memcpy(stop, full.text + off, 2);
                    stop[2] = '\0';
                    if (stop[0] && stop[1]) {
                        gp.stop[0] = stop;
                        gp.n_stop = 1;
                    }
                }
            }
        }
        tn_gen_params gq = gp;
        /* the drafter changes between requests of one session now and then */
        if (turn > 0 && tn_test_rand(&st) % 3 == 0) {
            dk = (int)(tn_test_rand(&st) % (SW_DRAFTERS + 1));
            dr = dk < SW_DRAFTERS ? sw_drafter(t, dk) : NULL;
            if (!dr)
                dk = 0, dr = t->d.lookup;
            cd = &sw_by_drafter[dk];
        }
        gq.drafter = dr;
        gq.draft_max = draft_max;
        if (chat) {
            collect c = {.a = &ap, .s = sp};
            memset(&ap, 0, sizeof ap);
            ap.rc = tn_session_chat(sp, msgs, nm, &gp, on_token, &c, &ap.st, &err);
            snprintf(ap.error, sizeof ap.error, "%s", ap.rc == TN_OK ? "" : err.message);
            /* the oracles replay the conversation as plain decoding left it */
            int32_t nk = 0;
            const int32_t *kv = tn_session_kv_tokens(sp, &nk);
            oracle_set(&t->d.oracle_state, kv, nk, NULL, 0, &(answer){.n = 0});
            oracle_set(&t->d.corrupt_state, kv, nk, NULL, 0, &(answer){.n = 0});
            c = (collect){.a = &as, .s = ss};
            memset(&as, 0, sizeof as);
            t->d.noise_state.state = 7; /* the same guesses on both thread counts */
            as.rc = tn_session_chat(ss, msgs, nm, &gq, on_token, &c, &as.st, &err);
            snprintf(as.error, sizeof as.error, "%s", as.rc == TN_OK ? "" : err.message);
            if (s2) {
                c = (collect){.a = &a2, .s = s2};
                memset(&a2, 0, sizeof a2);
                t->d.noise_state.state = 7;
                a2.rc = tn_session_chat(s2, msgs, nm, &gq, on_token, &c, &a2.st, &err);
                snprintf(a2.error, sizeof a2.error, "%s", a2.rc == TN_OK ? "" : err.message);
            }
        } else {
            ask(sp, req, n_req, &gp, &ap);
            oracle_set(&t->d.oracle_state, pin, n_pin, req, n_req, &ap);
            oracle_set(&t->d.corrupt_state, pin, n_pin, req, n_req, &ap);
            t->d.noise_state.state = 7; /* the same guesses on both thread counts */
            ask(ss, req, n_req, &gq, &as);
            t->d.noise_state.state = 7;
            if (s2)
                ask(s2, req, n_req, &gq, &a2);
        }
        if (ap.rc == TN_ERR_OVERFLOW && as.rc == TN_ERR_OVERFLOW && !strcmp(ap.error, as.error))
            break; /* the request outgrew the context, refused alike */
        CHECKF(ap.rc == TN_OK && as.rc == TN_OK, "%s: turn %d: %s%s", what, turn, ap.error,
               as.error);
        if (ap.rc != TN_OK || as.rc != TN_OK) {
            sw_failures++;
            break;
        }
        ca->compared++, cd->compared++;
        if (as.st.stop_reason <= TN_STOP_CANCELLED)
            sw_stops[as.st.stop_reason]++;
        ca->drafted += as.st.drafted, cd->drafted += as.st.drafted;
        ca->accepted += as.st.accepted, cd->accepted += as.st.accepted;
        ca->with_accept += as.st.accepted > 0, cd->with_accept += as.st.accepted > 0;
        check_stats(what, ss, &as);
        char w2[256];
        snprintf(w2, sizeof w2, "%s turn %d", what, turn);
        if (exact) {
            if (!same_answer(&ap, &as)) {
                sw_report(w2, &ap, &as, "plain", "speculative");
                break;
            }
        } else if (!same_answer(&as, &a2)) {
            sw_report(w2, &as, &a2, "speculative", "speculative, other thread count");
            break;
        }
        if (chat) {
            int32_t np, ns;
            const int32_t *kp = tn_session_kv_tokens(exact ? sp : ss, &np);
            const int32_t *ks2 = tn_session_kv_tokens(exact ? ss : s2, &ns);
            if (np != ns || memcmp(kp, ks2, (size_t)np * sizeof *kp) != 0 ||
                sw_kv_hash(exact ? sp : ss) != sw_kv_hash(exact ? ss : s2)) {
                sw_failures++;
                CHECKF(false, "%s: the KV after the turn differs (%d vs %d rows)", w2, np, ns);
                break;
            }
            /* the next turn's history: the answer as the session saw it */
            static char replies[4][8192];
            snprintf(replies[turn], sizeof replies[turn], "%s", exact ? ap.text : as.text);
            msgs[nm++] = (tn_session_message){.role = "assistant", .content = replies[turn]};
        } else {
            CHECKF(tn_ctx_kv_len(tn_session_ctx(ss)) == n_pin, "%s: KV %d rows after, pin %d", w2,
                   tn_ctx_kv_len(tn_session_ctx(ss)), n_pin);
            /* the pin restored from a snapshot or prefilled: the same bytes */
            if (sw_kv_hash(sp) != sw_kv_hash(ss)) {
                sw_failures++;
                CHECKF(false, "%s: the pinned rows differ between the two sessions", w2);
                break;
            }
            /* batch invariance on this answer's rows */
            int32_t pre[200];
            int32_t np = 0;
            for (int32_t i = 0; i < n_pin; i++)
                pre[np++] = pin[i];
            for (int32_t i = 0; i < n_req; i++)
                pre[np++] = req[i];
            const int rows = sw_logits(t->m, pre, np, as.tokens, as.n, th_spec, th_plain, &st, w2);
            ca->logit_rows += rows, cd->logit_rows += rows;
        }
    }
    ca->cases++, cd->cases++;
    ca->greedy += greedy, cd->greedy += greedy;
    ca->onehot += onehot, cd->onehot += onehot;
    ca->sampled += !exact, cd->sampled += !exact;
    ca->chat += chat, cd->chat += chat;
    ca->flash += !chat, cd->flash += !chat;
out:
    cb_stop_after = 0;
    tn_session_free(sp);
    tn_session_free(ss);
    tn_session_free(s2);
}

static void sw_print(const char *name, const sw_counts *c) {
    fprintf(stderr,
            "  %-17s cases %4d (greedy %4d, top-k 1 %3d, sampled %4d; flash %4d, chat %4d; pin "
            "restored %4d, prefilled %4d) answers %5d, with accepted drafts %5d, drafted %6d, "
            "accepted %6d, logit rows %6d\n",
            name, c->cases, c->greedy, c->onehot, c->sampled, c->flash, c->chat, c->restored,
            c->prefilled, c->compared, c->with_accept, c->drafted, c->accepted, c->logit_rows);
}

static void sweep(void) {
    const char *n_env = getenv("TERN_SPEC_SWEEP"), *seed_env = getenv("TERN_SPEC_SWEEP_SEED");
    const char *one = getenv("TERN_SPEC_SWEEP_CASE");
    const int n = n_env ? atoi(n_env) : 3 * SW_ARCHES;
    if (!tn_test_vocab("qwen3"))
        fprintf(stderr, "sweep: no Qwen3 vocabulary fetched: qwen3-vocab cases skipped\n");
    const uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : 1;
    for (int i = 0; i < n; i++) {
        if (one && atoi(one) != i)
            continue;
        sw_case(seed, i);
    }
    fprintf(stderr, "sweep: seed %llu, %d cases, %d failures\n", (unsigned long long)seed, n,
            sw_failures);
    fprintf(stderr, "  stops:");
    for (int r = 1; r <= TN_STOP_CANCELLED; r++)
        fprintf(stderr, " %s %d", tn_stop_reason_name((tn_stop_reason)r), sw_stops[r]);
    fputc('\n', stderr);
    for (int a = 0; a < SW_ARCHES; a++)
        sw_print(sw_arches[a], &sw_by_arch[a]);
    for (int d = 0; d < SW_DRAFTERS; d++)
        sw_print(sw_dnames[d], &sw_by_drafter[d]);
    for (int a = 0; a < SW_ARCHES; a++) {
        tn_drafter_free(sw_t[a].wrap_dflash);
        tn_drafter_free(sw_t[a].wrap_mtp);
        drafters_free(&sw_t[a].d);
        tn_model_free(sw_t[a].m);
    }
}
/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    const bool all = !strcmp(what, "all");
    if (all || !strcmp(what, "greedy-llama"))
        greedy_suite("llama");
    if (all || !strcmp(what, "greedy-qwen3"))
        greedy_suite("qwen3");
    if (all || !strcmp(what, "greedy-gemma3"))
        greedy_suite("gemma3");
    if (all || !strcmp(what, "greedy-gemma4"))
        greedy_suite("gemma4");
    if (all || !strcmp(what, "greedy-qwen3moe"))
        greedy_suite("qwen3moe");
    if (all || !strcmp(what, "greedy-gemma4moe"))
        greedy_suite("gemma4moe");
    if (all || !strcmp(what, "greedy-gptoss"))
        greedy_suite("gpt-oss");
    if (all || !strcmp(what, "sampling")) {
        sampling_rule();
        sampling_model();
    }
    if (all || !strcmp(what, "sampling-mtp"))
        sampling_mtp();
    if (all || !strcmp(what, "mtp"))
        mtp_suite();
    if (all || !strcmp(what, "dflash"))
        dflash_suite();
    if (all || !strcmp(what, "dflash-layout"))
        dflash_layout_suite();
    if (all || !strcmp(what, "api")) {
        api_lookup();
        api_vocab();
        api_edges();
    }
    if (!strcmp(what, "sweep")) /* not in "all": its own test */
        sweep();
    return tn_test_finish("test-spec");
}
