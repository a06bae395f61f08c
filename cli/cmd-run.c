/* tern-cli run: generate text with a model.
 *
 *   -p PROMPT        one answer to PROMPT (with the model's chat template and
 *                    -s SYSTEM), streamed to stdout; a stats line on stderr
 *   --raw            PROMPT as-is: no template, BOS as the file asks, control
 *                    tokens written in the text are matched (<|im_start|>...)
 *   --json           one JSON object {"text","tokens","stats"} per answer
 *   (no -p)          interactive multi-turn chat on stdin, one line per turn
 *                    (also when stdin is not a terminal); EOF ends it
 *
 * Templated answers go through the session API (the same path as the app);
 * --raw drives the inference context directly, or, with --spec, a session
 * with nothing pinned (its decode loop is where drafts are verified). Ctrl-C stops the answer being
 * generated; at the prompt it quits. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    const char *model;
    const char *system;
    const char *prompt;
    long n_predict;
    long n_ctx;
    long threads;
    double temp, top_p, min_p, repeat_penalty;
    long top_k;
    unsigned long long seed;
    bool seed_set;
    bool raw;
    bool json;
    bool think;
    cli_spec spec; /* --spec / --draft-max (cli/spec-args.c) */
    cli_images img; /* --image / --image-tokens / --mmproj (cli/image-args.c) */
} opts;

static void usage(FILE *out) {
    fputs(_("usage: tern-cli run -m MODEL [-s SYSTEM] [-p PROMPT] [-n N] [--temp T] [--seed S]\n"
            "                    [-t THREADS] [-c CONTEXT] [--raw] [--json]\n"
            "                    [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R]\n"
            "                    [--think on|off] [--image PATH [--image-tokens N] [--mmproj P]]\n"
            "       tern-cli run --single-turn | --chat ...   (pinned serving; see --help there)\n"
            "       tern-cli run --remote URL ...   (on a server; see --help there)\n"
            "\n"
            "With -p: answers PROMPT and exits. Without -p: a multi-turn chat, one line of\n"
            "standard input per turn, until end of input.\n"
            "  -s SYSTEM        system prompt\n"
            "  -n N             at most N tokens per answer (default 512; 0: until the end\n"
            "                   of the turn or of the context)\n"
            "  -c CONTEXT       context size in tokens (default: the model's, at most 4096)\n"
            "  -t THREADS       default: the physical cores\n"
            "  --temp T         0 (default) is greedy; above 0 samples with top-k 40,\n"
            "                   top-p 0.95 and min-p 0.05 unless given\n"
            "  --seed S         seed of the sampler (default: random, printed in the stats)\n"
            "  --raw            the prompt as-is: no chat template, BOS as the file asks;\n"
            "                   without -p the whole standard input is the prompt; --spec\n"
            "                   works here too (code completion is where drafts pay most)\n"
            "  --json           print one JSON object per answer:\n"
            "                   {\"text\", \"tokens\": [...], \"stats\": {...}}\n"
            "  --think on|off   Qwen3 thinking (default on)\n"), out);
    fputs(_(CLI_SPEC_USAGE), out);
    fputs(_(CLI_IMAGES_USAGE), out);
    fputs(_(CLI_BACKEND_USAGE), out);
    fputs(_("A stats line (prompt tokens, prefill tok/s, generated tokens, decode tok/s,\n"
            "time to first token) goes to standard error after each answer.\n"), out);
}

/* 0 ok, else the exit status. */
static int parse_args(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 512;
    o->top_k = -1;
    o->top_p = -1;
    o->min_p = -1;
    o->repeat_penalty = 1.0;
    o->think = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int spec = cli_spec_parse_arg(&o->spec, argc, argv, &i);
        if (spec < 0)
            return CLI_EXIT_USAGE;
        if (spec > 0)
            continue;
        const int image = cli_images_parse_arg(&o->img, argc, argv, &i);
        if (image < 0)
            return CLI_EXIT_USAGE;
        if (image > 0)
            continue;
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true, takes = true;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_print_help(usage);
            return -1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            o->model = v;
        } else if (!strcmp(a, "-s") || !strcmp(a, "--system")) {
            o->system = v;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            o->prompt = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            ok = cli_parse_long(a, v, 0, 1L << 30, &o->n_predict);
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            ok = cli_parse_long(a, v, 1, 1L << 30, &o->n_ctx);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            ok = cli_parse_long(a, v, 1, 1024, &o->threads);
        } else if (!strcmp(a, "--temp")) {
            ok = cli_parse_double(a, v, 0, 100, &o->temp);
        } else if (!strcmp(a, "--top-k")) {
            ok = cli_parse_long(a, v, 0, 1L << 30, &o->top_k);
        } else if (!strcmp(a, "--top-p")) {
            ok = cli_parse_double(a, v, 0, 1, &o->top_p);
        } else if (!strcmp(a, "--min-p")) {
            ok = cli_parse_double(a, v, 0, 1, &o->min_p);
        } else if (!strcmp(a, "--repeat-penalty")) {
            ok = cli_parse_double(a, v, 0.01, 100, &o->repeat_penalty);
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            o->seed = v ? strtoull(v, &end, 10) : 0;
            /* strtoull takes "-1" (as 2^64-1) and leading spaces. */
            ok = v && v[0] >= '0' && v[0] <= '9' && !errno && end != v && !*end;
            if (!ok)
                cli_error(_("--seed needs a non-negative integer, got '%s'"), v ? v : "");
            o->seed_set = true;
        } else if (!strcmp(a, "--think")) {
            ok = v && (!strcmp(v, "on") || !strcmp(v, "off"));
            if (!ok)
                cli_error(_("--think needs on or off"));
            o->think = ok && !strcmp(v, "on");
        } else if (!strcmp(a, "--raw")) {
            o->raw = true;
            takes = false;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
            takes = false;
        } else {
            cli_error(_("run: unknown option '%s' (see 'tern-cli run --help')"), a);
            return CLI_EXIT_USAGE;
        }
        if (takes && !v) {
            cli_error(_("%s needs a value"), a);
            return CLI_EXIT_USAGE;
        }
        if (!ok)
            return CLI_EXIT_USAGE;
        if (takes)
            i++;
    }
    if (!o->model) {
        cli_error(_("run: -m MODEL is required (see 'tern-cli run --help')"));
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static tn_sampler_params sampler_params(const opts *o) {
    tn_sampler_params p = tn_sampler_default_params();
    p.temperature = (float)o->temp;
    if (o->temp > 0) {
        p.top_k = o->top_k >= 0 ? (int32_t)o->top_k : 40;
        p.top_p = o->top_p >= 0 ? (float)o->top_p : 0.95f;
        p.min_p = o->min_p >= 0 ? (float)o->min_p : 0.05f;
    }
    p.repeat_penalty = (float)o->repeat_penalty;
    p.seed = o->seed;
    return p;
}

/* ---------------------------------------------------------------- output */

/* What one answer produced, for the stream, --json and the chat history. */
typedef struct answer {
    bool json;
    tn_buf text;
    tn_tokens tokens;
    bool oom;
} answer;

static void answer_clear(answer *a) {
    tn_buf_free(&a->text);
    tn_tokens_free(&a->tokens);
    a->oom = false;
}

static bool on_piece(const char *piece, int32_t token, void *user) {
    answer *a = user;
    size_t n = strlen(piece);
    /* A piece that cannot be written stops the answer (cli_stdout_error). */
    if (n && !a->json && !cli_answer_write(piece, n))
        return false;
    if (n && tn_buf_append(&a->text, piece, n) != TN_OK)
        a->oom = true;
    if (token >= 0 && tn_tokens_push(&a->tokens, token) != TN_OK)
        a->oom = true;
    return true;
}

/* An answer that stopped because stdout took no more: said with how far it
 * got, and no stats line (they would describe an answer no one received).
 * True when so. */
static bool output_failed(const tn_session_stats *st) {
    const int e = cli_stdout_error();
    if (!e)
        return false;
    cli_error(_("cannot write the standard output: %s; the answer stopped at token %d"),
              strerror(e), st->generated_tokens);
    return true;
}

static void print_stats(const opts *o, const tn_session_stats *st) {
    fprintf(stderr,
            "\n[prompt %d tokens, prefill %.1f tok/s | generated %d tokens, decode %.1f tok/s | "
            "TTFT %.1f ms | stop: %s%s",
            st->prompt_tokens, st->prefill_tok_s, st->generated_tokens, st->decode_tok_s,
            st->ttft_ms, tn_stop_reason_name(st->stop_reason),
            o->temp > 0 || cli_spec_on(&o->spec) ? "" : "]\n");
    if (cli_spec_on(&o->spec))
        cli_spec_print_stats(stderr, st);
    if (!(o->temp > 0) && cli_spec_on(&o->spec))
        fputs("]\n", stderr);
    if (o->temp > 0)
        fprintf(stderr, " | seed %llu]\n", o->seed);
}

static void print_json(const opts *o, const answer *a, const tn_session_stats *st) {
    fputs("{\"text\":", stdout);
    cli_json_string(stdout, a->text.data ? a->text.data : "", a->text.len);
    fputs(",\"tokens\":[", stdout);
    for (size_t i = 0; i < a->tokens.n; i++)
        fprintf(stdout, "%s%d", i ? "," : "", a->tokens.ids[i]);
    fprintf(stdout,
            "],\"stats\":{\"prompt_tokens\":%d,\"prefill_ms\":%.3f,\"prefill_tok_s\":%.2f,"
            "\"generated_tokens\":%d,\"decode_ms\":%.3f,\"decode_tok_s\":%.2f,"
            "\"ttft_ms\":%.3f,\"stop\":\"%s\",\"seed\":%llu",
            st->prompt_tokens, st->prefill_ms, st->prefill_tok_s, st->generated_tokens,
            st->decode_ms, st->decode_tok_s, st->ttft_ms, tn_stop_reason_name(st->stop_reason),
            o->seed);
    if (cli_spec_on(&o->spec))
        cli_spec_json_stats(stdout, st);
    fputs("}}\n", stdout);
    fflush(stdout);
}

static void finish_answer(const opts *o, const answer *a, const tn_session_stats *st) {
    if (o->json) {
        print_json(o, a, st);
    } else {
        print_stats(o, st);
    }
}

/* ---------------------------------------------------------------- ctrl-c */

static volatile sig_atomic_t g_generating;
static volatile sig_atomic_t g_interrupted; /* Ctrl-C stopped an answer */
static tn_session *volatile g_session;
/* A raw prompt that cannot fit, told from its length before it is
 * encoded: 8 MiB of one letter took 20 s to encode only to be refused. */
static bool too_long(const opts *o, const tn_model *m, const char *prompt, size_t prompt_len) {
    const size_t at_least = tn_tokenizer_min_tokens(tn_model_tokenizer(m), prompt, prompt_len);
    if (at_least < (size_t)o->n_ctx)
        return false;
    cli_error(_("%s: the prompt is %zu bytes, at least %zu tokens; the context holds %ld (use -c "
                "to enlarge it)"),
              tn_model_path(m), prompt_len, at_least, o->n_ctx);
    return true;
}

static tn_ctx *volatile g_ctx;

static void on_sigint(int sig) {
    (void)sig;
    if (g_generating) {
        g_interrupted = 1;
        /* Atomic stores: safe in a signal handler. */
        if (g_session)
            tn_session_cancel(g_session);
        if (g_ctx)
            tn_ctx_cancel(g_ctx);
        return;
    }
    _exit(130);
}

/* ------------------------------------------------------------- raw mode */

static char *read_all(FILE *f, size_t *len) {
    tn_buf b = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (tn_buf_append(&b, chunk, got) != TN_OK) {
            tn_buf_free(&b);
            return NULL;
        }
    /* A read error is not the end of the prompt: a closed standard input or
     * a directory there gave an empty prompt and an answer to nothing. */
    if (ferror(f)) {
        const int e = errno;
        tn_buf_free(&b);
        errno = e;
        return NULL;
    }
    if (!b.data && tn_buf_append(&b, "", 0) != TN_OK)
        return NULL;
    *len = b.len;
    return b.data;
}

static int run_raw(const opts *o, const tn_model *m, const char *prompt, size_t prompt_len) {
    const tn_tokenizer *tok = tn_model_tokenizer(m);
    tn_error err = {0};
    tn_tokens in = {0};
    answer a = {.json = o->json};
    tn_ctx *ctx = NULL;
    tn_sampler *smp = NULL;
    float *logits = NULL;
    int status = CLI_EXIT_BAD_INPUT;
    tn_session_stats st;
    memset(&st, 0, sizeof st);

    if (too_long(o, m, prompt, prompt_len))
        goto out;
    if (tn_tokenize(tok, prompt, prompt_len, TN_TOKENIZE_SPECIAL | TN_TOKENIZE_ADD_BOS, &in,
                    &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        goto out;
    }
    if (in.n == 0) {
        cli_error(_("the prompt is empty (and the model adds no BOS)"));
        goto out;
    }
    if (tn_ctx_new(m, (int32_t)o->n_ctx, (int32_t)o->threads, &ctx, &err) != TN_OK ||
        tn_sampler_new(tn_model_n_vocab(m), sampler_params(o), &smp, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        goto out;
    }
    const int32_t n_ctx = tn_ctx_n_ctx(ctx);
    if (in.n >= (size_t)n_ctx) {
        cli_error(_("%s: the prompt is %zu tokens; the context holds %d (use -c to enlarge it)"),
                  tn_model_path(m), in.n, n_ctx);
        goto out;
    }
    logits = malloc(sizeof(float) * (size_t)tn_model_n_vocab(m));
    if (!logits) {
        cli_error(_("out of memory"));
        goto out;
    }
    for (size_t i = 0; i < in.n; i++)
        tn_sampler_accept(smp, in.ids[i]);

    g_ctx = ctx;
    g_generating = 1;
    const double t0 = 1e3 * cli_now_s();
    int rc = tn_ctx_decode(ctx, in.ids, (int32_t)in.n, TN_LOGITS_LAST, logits, &err);
    const double t1 = 1e3 * cli_now_s();
    st.prompt_tokens = (int32_t)in.n;
    st.prefill_ms = t1 - t0;
    st.prefill_tok_s = in.n / ((t1 - t0) / 1e3);
    tn_detok_stream ds;
    /* The answer continues the prompt: its first token keeps its leading
     * space, as llama.cpp prints it (docs/TOKENIZER.md, "The leading space"). */
    tn_detok_stream_init(&ds, tok, TN_DETOKENIZE_CONTINUATION);
    tn_buf piece = {0};
    double t_first = 0;
    st.stop_reason = TN_STOP_LIMIT;
    while (rc == TN_OK) {
        if (o->n_predict > 0 && st.generated_tokens >= o->n_predict)
            break;
        int32_t next = tn_sampler_sample(smp, logits);
        if (st.generated_tokens == 0) {
            t_first = 1e3 * cli_now_s();
            st.ttft_ms = t_first - t0;
        }
        if (tn_token_is_eog(tok, next)) {
            st.stop_reason = TN_STOP_EOG;
            break;
        }
        st.generated_tokens++;
        piece.len = 0;
        rc = tn_detok_stream_push(&ds, next, &piece, &err);
        if (rc != TN_OK)
            break;
        /* piece.len is 0 while a character's bytes are held back; its data
         * then still holds the last piece, which must not be printed again. */
        if (!on_piece(piece.len ? piece.data : "", next, &a))
            break;
        tn_sampler_accept(smp, next);
        if (tn_ctx_kv_len(ctx) >= n_ctx) {
            st.stop_reason = TN_STOP_CONTEXT_FULL;
            break;
        }
        rc = tn_ctx_decode(ctx, &next, 1, TN_LOGITS_LAST, logits, &err);
    }
    g_generating = 0;
    g_ctx = NULL;
    piece.len = 0;
    if (tn_detok_stream_flush(&ds, &piece, NULL) == TN_OK && piece.len)
        on_piece(piece.data, -1, &a);
    tn_buf_free(&piece);
    cli_answer_end();
    if (st.generated_tokens > 1) {
        st.decode_ms = 1e3 * cli_now_s() - t_first;
        st.decode_tok_s = (st.generated_tokens - 1) / (st.decode_ms / 1e3);
    }
    if (rc == TN_ERR_CANCELLED) {
        st.stop_reason = TN_STOP_CANCELLED;
        rc = TN_OK;
    }
    if (rc != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        goto out;
    }
    if (output_failed(&st))
        goto out;
    finish_answer(o, &a, &st);
    status = CLI_EXIT_OK;
out:
    free(logits);
    tn_sampler_free(smp);
    tn_ctx_free(ctx);
    tn_tokens_free(&in);
    answer_clear(&a);
    return status;
}

/* Raw completion with speculation: the same tokens as run_raw, through a
 * session with nothing pinned, whose decode loop verifies drafts (greedy
 * output is bitwise the same; sampled output has the same distribution). */
static int report(const opts *o, int rc, const tn_error *err, answer *a,
                  const tn_session_stats *st);

static int run_raw_spec(const opts *o, const tn_model *m, const char *prompt, size_t prompt_len) {
    tn_error err = {0};
    tn_tokens in = {0};
    if (too_long(o, m, prompt, prompt_len))
        return CLI_EXIT_BAD_INPUT;
    if (tn_tokenize(tn_model_tokenizer(m), prompt, prompt_len,
                    TN_TOKENIZE_SPECIAL | TN_TOKENIZE_ADD_BOS, &in, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    if (in.n == 0) {
        cli_error(_("the prompt is empty (and the model adds no BOS)"));
        return CLI_EXIT_BAD_INPUT;
    }
    tn_drafter *drafter = NULL;
    int status = cli_spec_make(&o->spec, m, (int)o->threads, &drafter);
    if (status != CLI_EXIT_OK) {
        tn_tokens_free(&in);
        return status;
    }
    tn_session_params sp = tn_session_default_params();
    sp.warn = cli_engine_warning;
    sp.n_ctx = (int32_t)o->n_ctx;
    sp.n_threads = (int32_t)o->threads;
    sp.pin_cache_dir = "";
    sp.gen.sampler = sampler_params(o);
    sp.gen.max_tokens = (int32_t)o->n_predict;
    sp.gen.drafter = drafter;
    sp.gen.draft_max = (int32_t)o->spec.draft_max;
    tn_session *s = NULL;
    if (tn_session_new(m, sp, &s, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        status = CLI_EXIT_BAD_INPUT;
    } else if (in.n >= (size_t)sp.n_ctx) {
        cli_error(_("%s: the prompt is %zu tokens; the context holds %d (use -c to enlarge it)"),
                  tn_model_path(m), in.n, sp.n_ctx);
        status = CLI_EXIT_BAD_INPUT;
    } else {
        answer a = {.json = o->json};
        tn_session_stats st;
        g_session = s;
        g_generating = 1;
        const tn_prompt prompt = {
            .kind = TN_PROMPT_TOKENS, .tokens = in.ids, .n_tokens = (int32_t)in.n};
        int rc = tn_session_run(s, &prompt, NULL, on_piece, &a, &st, &err);
        g_generating = 0;
        g_session = NULL;
        status = report(o, rc, &err, &a, &st);
        answer_clear(&a);
    }
    tn_session_free(s);
    tn_drafter_free(drafter);
    tn_tokens_free(&in);
    return status;
}

/* ------------------------------------------------------- templated modes */

typedef struct chat {
    tn_session_message *msgs;
    int32_t n, cap;
} chat;

static bool chat_push(chat *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        int32_t cap = c->cap ? 2 * c->cap : 16;
        tn_session_message *m = realloc(c->msgs, sizeof *m * (size_t)cap);
        if (!m)
            return false;
        c->msgs = m;
        c->cap = cap;
    }
    char *copy = strdup(content);
    if (!copy)
        return false;
    /* The whole message: fields left out (tool calls) must read as none. */
    c->msgs[c->n] = (tn_session_message){.role = role, .content = copy};
    c->n++;
    return true;
}

static void chat_free(chat *c) {
    for (int32_t i = 0; i < c->n; i++)
        free((char *)c->msgs[i].content);
    free(c->msgs);
}

/* Status of one request: 0, or 2 for input the model cannot take (a prompt
 * longer than the context); other failures too. */
static int report(const opts *o, int rc, const tn_error *err, answer *a,
                  const tn_session_stats *st) {
    cli_answer_end();
    if (rc == TN_ERR_CANCELLED && st->generated_tokens == 0) {
        fputs(_("\n[cancelled]\n"), stderr);
        return CLI_EXIT_OK;
    }
    if (rc != TN_OK) {
        if (!o->json && a->text.len)
            fputc('\n', stdout);
        cli_error("%s", cli_engine_message(err));
        return CLI_EXIT_BAD_INPUT;
    }
    if (a->oom) {
        cli_error(_("out of memory"));
        return CLI_EXIT_BAD_INPUT;
    }
    if (output_failed(st))
        return CLI_EXIT_BAD_INPUT;
    finish_answer(o, a, st);
    return CLI_EXIT_OK;
}

static int run_session(const opts *o, const tn_model *m) {
    tn_error err = {0};
    tn_session_params sp = tn_session_default_params();
    sp.warn = cli_engine_warning;
    sp.n_ctx = (int32_t)o->n_ctx;
    sp.n_threads = (int32_t)o->threads;
    sp.pin_cache_dir = ""; /* one-shot and chat runs keep nothing on disk */
    sp.gen.sampler = sampler_params(o);
    sp.gen.max_tokens = (int32_t)o->n_predict;
    sp.gen.thinking = o->think;
    tn_drafter *drafter = NULL;
    int spec_rc = cli_spec_make(&o->spec, m, (int)o->threads, &drafter);
    if (spec_rc != CLI_EXIT_OK)
        return spec_rc;
    sp.gen.drafter = drafter;
    sp.gen.draft_max = (int32_t)o->spec.draft_max;
    cli_encoded enc;
    int img_rc = cli_images_encode(&o->img, o->model, m, sp.n_ctx, (int)o->threads, o->json,
                                   &enc);
    if (img_rc != CLI_EXIT_OK) {
        tn_drafter_free(drafter);
        return img_rc;
    }
    tn_session *s = NULL;
    if (tn_session_new(m, sp, &s, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        tn_drafter_free(drafter);
        cli_encoded_free(&enc);
        return CLI_EXIT_BAD_INPUT;
    }
    g_session = s;
    int status = CLI_EXIT_OK;
    answer a = {.json = o->json};
    tn_session_stats st;

    if (o->prompt) {
        int rc = tn_session_pin(s, o->system, NULL, NULL, &err);
        if (rc == TN_OK) {
            g_generating = 1;
            const tn_prompt prompt = cli_text_prompt(o->prompt, &enc);
            rc = tn_session_run(s, &prompt, NULL, on_piece, &a, &st, &err);
            g_generating = 0;
        } else {
            memset(&st, 0, sizeof st);
        }
        status = report(o, rc, &err, &a, &st);
    } else {
        chat c = {0};
        bool tty = isatty(STDIN_FILENO);
        if (!o->json)
            fprintf(stderr, "%s\n", tn_model_description(m));
        if (o->system && !chat_push(&c, "system", o->system))
            status = CLI_EXIT_BAD_INPUT;
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        /* A --json answer that could not be written ends the chat too
         * (main says so). */
        while (status == CLI_EXIT_OK && !cli_stdout_error()) {
            if (tty)
                fputs("> ", stderr);
            bool unreadable = false;
            if ((len = cli_read_line(&line, &cap, &unreadable)) < 0) {
                if (unreadable)
                    status = CLI_EXIT_BAD_INPUT;
                break;
            }
            if (len == 0)
                continue;
            /* A NUL would end the turn there: the rest of the line lost
             * without a word. */
            if (memchr(line, '\0', (size_t)len)) {
                cli_error(_("this input line contains a NUL byte; it was not sent (the text "
                          "after the NUL would have been dropped)"));
                status = CLI_EXIT_BAD_INPUT;
                break;
            }
            /* The images belong to the first user turn, marked there so
             * that they stay in place as the conversation grows. */
            bool first_user = true;
            for (int32_t k = 0; k < c.n; k++)
                first_user = first_user && strcmp(c.msgs[k].role, "user") != 0;
            tn_buf turn = {0};
            for (int k = 0; first_user && k < enc.n; k++)
                tn_buf_append_str(&turn, TN_IMAGE_MARKER);
            bool pushed = tn_buf_append_str(&turn, line) == TN_OK &&
                          chat_push(&c, "user", turn.data);
            tn_buf_free(&turn);
            if (!pushed) {
                status = CLI_EXIT_BAD_INPUT;
                break;
            }
            answer_clear(&a);
            g_generating = 1;
            const tn_prompt prompt = cli_chat_prompt(c.msgs, c.n, &enc);
            int rc = tn_session_run(s, &prompt, NULL, on_piece, &a, &st, &err);
            g_generating = 0;
            status = report(o, rc, &err, &a, &st);
            if (status == CLI_EXIT_OK &&
                !chat_push(&c, "assistant", a.text.data ? a.text.data : ""))
                status = CLI_EXIT_BAD_INPUT;
        }
        free(line);
        chat_free(&c);
    }
    g_session = NULL;
    answer_clear(&a);
    tn_session_free(s);
    tn_drafter_free(drafter);
    cli_encoded_free(&enc);
    return status;
}

int cmd_run(int argc, char **argv) {
    const int backend = cli_backend_take(&argc, argv); /* cli/backend-args.c */
    if (backend)
        return backend;
    /* -m then names a model of the server, not one installed here. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--remote"))
            return cmd_run_remote(argc, argv);
    /* -m TAG: an installed model, with its draft when it speculates by
     * default (cli/cmd-models.c). */
    cli_tag_spec_argv(&argc, &argv);
    if (!cli_resolve_model_argv(argc, argv))
        return CLI_EXIT_BAD_INPUT;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--single-turn") || !strcmp(argv[i], "--chat"))
            return cmd_run_single_turn(argc, argv);
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!o.seed_set) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        o.seed = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 20);
    }

    tn_error err = {0};
    tn_model *m = NULL;
    if (cli_model_load(o.model, &m, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    cli_backend_note(m);
    if (!tn_model_tokenizer(m)) {
        cli_error("%s", cli_engine_message(tn_model_tokenizer_failure(m)));
        tn_model_free(m);
        return CLI_EXIT_BAD_INPUT;
    }
    if (o.n_ctx == 0)
        o.n_ctx = tn_model_n_ctx_train(m) < 4096 ? tn_model_n_ctx_train(m) : 4096;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);

    int status;
    if (o.raw && o.img.n > 0) {
        cli_error(_("run: --image works with templated prompts, not with --raw"));
        tn_model_free(m);
        return CLI_EXIT_USAGE;
    }
    if (o.raw) {
        size_t len = 0;
        char *text = NULL;
        if (o.prompt) {
            len = strlen(o.prompt);
        } else {
            text = read_all(stdin, &len);
            if (!text && ferror(stdin)) {
                cli_error(_("cannot read the standard input: %s"), strerror(errno));
                tn_model_free(m);
                return CLI_EXIT_BAD_INPUT;
            }
            if (!text) {
                cli_error(_("cannot read the prompt from standard input"));
                tn_model_free(m);
                return CLI_EXIT_BAD_INPUT;
            }
        }
        status = cli_spec_on(&o.spec) ? run_raw_spec(&o, m, o.prompt ? o.prompt : text, len)
                                      : run_raw(&o, m, o.prompt ? o.prompt : text, len);
        free(text);
    } else {
        status = run_session(&o, m);
    }
    tn_model_free(m);
    /* One answer (-p, or --raw's whole input) that Ctrl-C stopped: what it
     * wrote and its figures are printed, and the status says it was
     * stopped. In a chat Ctrl-C stops one answer and the chat goes on. */
    if (status == CLI_EXIT_OK && g_interrupted && (o.raw || o.prompt))
        status = CLI_EXIT_INTERRUPTED;
    return status;
}
