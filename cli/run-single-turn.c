/* tern-cli run --single-turn / --chat: the session API from the command line.
 *
 *   --single-turn   the system prompt (-s) is pinned once; every input line
 *                   is an independent request answered from exactly that
 *                   pinned state (the same line always gets the same answer)
 *   --chat          multi-turn: input lines are user turns of one
 *                   conversation; the KV keeps the common prefix
 *
 * Commands on an input line: /pin TEXT (pin another system prompt), /stats
 * (the last request's figures and the pin), /reset (forget the conversation),
 * /think on|off, /spec none|lookup|draft:PATH|dflash:PATH|mtp:PATH (speculation for the
 * next requests, without reloading the model), /help, /quit. With --json every request prints one JSON
 * object on one line (answer and stats, or the error). Ctrl-C stops the
 * answer being generated; at the prompt it quits. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct run_opts {
    const char *model;
    const char *system;
    const char *system_file;
    const char *prompt; /* -p: one request, then exit */
    const char *pin_cache;
    bool no_pin_cache;
    bool chat;
    bool json;
    bool quiet;
    bool think;
    long n_ctx;
    long threads;
    long max_tokens;
    double temp, top_p;
    long top_k;
    unsigned long long seed;
    bool seed_set; /* else every request draws a new seed */
    const char *stop[TN_SESSION_MAX_STOP];
    int n_stop;
    cli_spec spec; /* --spec / --draft-max (cli/spec-args.c) */
    cli_images img; /* --image / --image-tokens / --mmproj (cli/image-args.c) */
} run_opts;

static void usage(FILE *out) {
    fputs(_("usage: tern-cli run --single-turn -m MODEL -s SYSTEM [--think on|off] [--json]\n"
            "       tern-cli run --chat -m MODEL [-s SYSTEM] [--think on|off] [--json]\n"
            "options: [--system-file FILE] [-p REQUEST] [-n MAX_TOKENS] [-c CONTEXT]\n"
            "         [-t THREADS] [--temp T] [--top-k K] [--top-p P] [--seed N]\n"
            "         [--stop STRING]... [--pin-cache DIR | --no-pin-cache] [-q]\n"
            "         [--spec none|lookup|draft:PATH|dflash:PATH|mtp:PATH] [--draft-max K]\n"
            "         [--image PATH]... [--image-tokens N] [--mmproj PATH]\n\n"
            "--single-turn: SYSTEM is pinned once (prefilled, or loaded from the pin cache);\n"
            "each line of standard input is an independent request answered from exactly\n"
            "the pinned state. --chat: lines are the turns of one conversation.\n"
            "-p answers one request and exits. --json prints one JSON object per request.\n"
            "-c is the pinned context in tokens (default 1024): system prompt + request +\n"
            "answer. The pin cache defaults to $XDG_CACHE_HOME/tern/pins.\n"
            "Lines starting with '/': /pin TEXT, /stats, /reset, /think on|off,\n"
            "/spec none|lookup|draft:PATH|dflash:PATH|mtp:PATH, /help, /quit.\n"
            "Speculation gives the same tokens as without it (greedy), only faster.\n"
            "--seed N makes sampling (--temp > 0) reproducible; without it every request\n"
            "draws a new seed.\n"
            "--image: every request (--single-turn) or the first turn (--chat) asks about\n"
            "the image(s); the image tokens count against -c.\n"), out);
}

/* ------------------------------------------------------------- output */

typedef struct sink {
    bool json;
    tn_buf text; /* the answer, for --json and for chat history */
    bool failed; /* out of memory while collecting */
} sink;

static bool on_token(const char *piece, int32_t token, void *user) {
    (void)token;
    sink *k = user;
    size_t n = strlen(piece);
    /* A piece that cannot be written stops the answer (cli_stdout_error). */
    if (!k->json && n && !cli_answer_write(piece, n))
        return false;
    if (n && tn_buf_append(&k->text, piece, n) != TN_OK)
        k->failed = true;
    return true;
}

static bool on_progress(int32_t done, int32_t total, void *user) {
    (void)user;
    if (cli_live_figures()) {
        fputc('\r', stderr);
        fprintf(stderr, _("pinning: %d/%d tokens"), done, total);
    }
    if (done == total && cli_live_figures())
        fputs("\r\033[K", stderr);
    return true;
}

static void print_stats_line(FILE *f, const tn_session_stats *st) {
    fprintf(f,
            "[%d tokens, TTFT %.1f ms, prefill %d tokens at %.0f tok/s, decode %.1f tok/s, "
            "restored %d tokens in %.2f ms, stop: %s",
            st->generated_tokens, st->ttft_ms, st->prompt_tokens, st->prefill_tok_s,
            st->decode_tok_s, st->restored_tokens, st->restore_ms,
            tn_stop_reason_name(st->stop_reason));
    if (st->verify_steps)
        cli_spec_print_stats(f, st);
    fputs("]\n", f);
}

static void print_json_result(const char *request, const sink *k, const tn_session_stats *st,
                              int rc, const tn_error *err) {
    fputs("{\"request\":", stdout);
    cli_json_string(stdout, request, strlen(request));
    if (rc != TN_OK && rc != TN_ERR_CANCELLED) {
        fputs(",\"error\":", stdout);
        cli_json_string(stdout, err->message, strlen(err->message));
        fprintf(stdout, ",\"status\":\"%s\"}\n", tn_status_name(rc));
        fflush(stdout);
        return;
    }
    fputs(",\"answer\":", stdout);
    cli_json_string(stdout, k->text.data ? k->text.data : "", k->text.len);
    fprintf(stdout,
            ",\"stop\":\"%s\",\"prompt_tokens\":%d,\"generated_tokens\":%d,"
            "\"restored_tokens\":%d,\"restore_ms\":%.3f,\"prefill_ms\":%.3f,"
            "\"prefill_tok_s\":%.1f,\"ttft_ms\":%.3f,\"decode_ms\":%.3f,\"decode_tok_s\":%.2f,"
            "\"drafted\":%d,\"accepted\":%d,\"verify_steps\":%d,\"kv_len\":%d}\n",
            tn_stop_reason_name(st->stop_reason), st->prompt_tokens, st->generated_tokens,
            st->restored_tokens, st->restore_ms, st->prefill_ms, st->prefill_tok_s, st->ttft_ms,
            st->decode_ms, st->decode_tok_s, st->drafted, st->accepted, st->verify_steps,
            st->kv_len);
    fflush(stdout);
}

static void print_pin(const tn_session *s, FILE *f) {
    tn_pin_info pi = tn_session_pin_info(s);
    fprintf(f, _("pinned %d tokens of %d in %.1f ms%s; %d free for each request and answer\n"),
            pi.n_pin, pi.n_ctx, pi.prefill_ms,
            pi.loaded_from_snapshot ? " (loaded from the pin cache)" : "", pi.n_free);
}

/* ----------------------------------------------------------- options */

static bool parse_onoff(const char *opt, const char *s, bool *out) {
    if (!strcmp(s, "on") || !strcmp(s, "true") || !strcmp(s, "1")) {
        *out = true;
        return true;
    }
    if (!strcmp(s, "off") || !strcmp(s, "false") || !strcmp(s, "0")) {
        *out = false;
        return true;
    }
    cli_error(_("run: %s takes on or off, not '%s'"), opt, s);
    return false;
}

/* 0 ok, else an exit status. */
static int parse_args(int argc, char **argv, run_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return -1;
        }
        if (!strcmp(a, "--single-turn")) {
            o->chat = false;
            continue;
        }
        if (!strcmp(a, "--chat")) {
            o->chat = true;
            continue;
        }
        if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = true;
            continue;
        }
        if (!strcmp(a, "--no-pin-cache")) {
            o->no_pin_cache = true;
            continue;
        }
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
        if (i + 1 >= argc) {
            cli_error(_("run: option '%s' needs a value (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        long l;
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "-s") || !strcmp(a, "--system"))
            o->system = v;
        else if (!strcmp(a, "--system-file"))
            o->system_file = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
            o->prompt = v;
        else if (!strcmp(a, "--pin-cache")) {
            o->pin_cache = v;
            ok = cli_pin_cache_check("run", v);
        } else if (!strcmp(a, "--think"))
            ok = parse_onoff(a, v, &o->think);
        else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens"))
            ok = cli_parse_long(a, v, 0, 1 << 24, &o->max_tokens);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx"))
            ok = cli_parse_long(a, v, 16, 1 << 22, &o->n_ctx);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            ok = cli_parse_long(a, v, 0, 1024, &o->threads);
        else if (!strcmp(a, "--temp"))
            ok = cli_parse_double(a, v, 0, 100, &o->temp);
        else if (!strcmp(a, "--top-p"))
            ok = cli_parse_double(a, v, 0, 1, &o->top_p);
        else if (!strcmp(a, "--top-k"))
            ok = cli_parse_long(a, v, 0, 1 << 24, &o->top_k);
        else if (!strcmp(a, "--seed")) {
            ok = cli_parse_long(a, v, 0, 0x7fffffffL, &l);
            o->seed = (unsigned long long)l;
            o->seed_set = true;
        } else if (!strcmp(a, "--stop")) {
            if (o->n_stop == TN_SESSION_MAX_STOP || !v[0]) {
                cli_error(_("run: --stop takes a non-empty string, at most %d times"),
                          TN_SESSION_MAX_STOP);
                return CLI_EXIT_USAGE;
            }
            o->stop[o->n_stop++] = v;
        } else {
            cli_error(_("run: unknown option '%s' (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        if (!ok)
            return CLI_EXIT_USAGE;
    }
    if (!o->model) {
        cli_error(_("run: no model (-m MODEL.gguf)"));
        return CLI_EXIT_USAGE;
    }
    if (o->system && o->system_file) {
        cli_error(_("run: give the system prompt with -s or --system-file, not both"));
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static char *read_text_file(const char *path) {
    size_t len = 0;
    char *text = cli_read_file(path, CLI_MAX_PROMPT_BYTES, &len);
    if (!text)
        return NULL;
    /* The prompt goes on as a C string: a NUL would cut it there without a
     * word (a UTF-16 file kept its first letter only), as it would a line
     * of standard input, which is refused the same way. */
    if (memchr(text, '\0', len)) {
        cli_error(_("%s: the system prompt file contains a NUL byte (is it UTF-16? save it as "
                    "UTF-8 text)"),
                  path);
        free(text);
        return NULL;
    }
    /* A trailing newline ends the file, not the prompt. */
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
    return text;
}

/* ------------------------------------------------------------- the loop */

static tn_session *volatile g_session;
static volatile sig_atomic_t g_generating;

static void on_sigint(int sig) {
    (void)sig;
    if (g_generating && g_session) {
        tn_session_cancel(g_session); /* an atomic store: safe here */
        return;
    }
    _exit(130);
}

typedef struct chat_state {
    tn_session_message *msgs;
    char **owned;
    int32_t n, cap;
} chat_state;

static void chat_clear(chat_state *c) {
    for (int32_t i = 0; i < c->n; i++)
        free(c->owned[i]);
    c->n = 0;
}

static bool chat_push(chat_state *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        int32_t cap = c->cap ? 2 * c->cap : 16;
        tn_session_message *m = realloc(c->msgs, (size_t)cap * sizeof *m);
        if (!m)
            return false;
        c->msgs = m;
        char **o = realloc(c->owned, (size_t)cap * sizeof *o);
        if (!o)
            return false;
        c->owned = o;
        c->cap = cap;
    }
    char *copy = strdup(content);
    if (!copy)
        return false;
    c->owned[c->n] = copy;
    c->msgs[c->n] = (tn_session_message){.role = role, .content = copy};
    c->n++;
    return true;
}

typedef struct runner {
    const run_opts *o;
    tn_session *s;
    const tn_model *model;
    tn_drafter *drafter; /* owned; gen.drafter points at it (NULL: off) */
    tn_gen_params gen;
    tn_session_stats last;
    bool have_last;
    chat_state chat;
    int failures;
    cli_encoded enc; /* --image, encoded once */
} runner;

static int run_request(runner *r, const char *text) {
    sink k = {.json = r->o->json};
    if (!r->o->seed_set) {
        /* No --seed: a new seed per request, so asking again samples anew. */
        static unsigned long long n;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r->gen.sampler.seed = (unsigned long long)ts.tv_nsec ^
                              ((unsigned long long)ts.tv_sec << 20) ^
                              (++n * 0x9e3779b97f4a7c15ULL);
    }
    tn_session_stats st;
    tn_error err = {0};
    int rc;
    g_generating = 1;
    if (r->o->chat) {
        /* The images belong to the first user turn, marked in its text so
         * that they stay in place as the conversation grows. */
        bool first_user = true;
        for (int32_t i = 0; i < r->chat.n; i++)
            first_user = first_user && strcmp(r->chat.msgs[i].role, "user") != 0;
        tn_buf turn = {0};
        for (int i = 0; first_user && i < r->enc.n; i++)
            tn_buf_append_str(&turn, TN_IMAGE_MARKER);
        bool pushed = tn_buf_append_str(&turn, text) == TN_OK &&
                      chat_push(&r->chat, "user", turn.data);
        tn_buf_free(&turn);
        if (!pushed) {
            g_generating = 0;
            cli_error(_("out of memory"));
            return TN_ERR_NOMEM;
        }
        const tn_prompt prompt = cli_chat_prompt(r->chat.msgs, r->chat.n, &r->enc);
        rc = tn_session_run(r->s, &prompt, &r->gen, on_token, &k, &st, &err);
        if (rc == TN_OK && !k.failed)
            chat_push(&r->chat, "assistant", k.text.data ? k.text.data : "");
        else if (rc != TN_OK) /* the turn was not answered: drop it */
            free(r->chat.owned[--r->chat.n]);
    } else {
        const tn_prompt prompt = cli_text_prompt(text, &r->enc);
        rc = tn_session_run(r->s, &prompt, &r->gen, on_token, &k, &st, &err);
    }
    g_generating = 0;
    cli_answer_end();
    if (r->o->json) {
        print_json_result(text, &k, &st, rc, &err);
    } else {
        if (rc == TN_OK || rc == TN_ERR_CANCELLED)
            fputc('\n', stdout);
        const int e = cli_stdout_error();
        if (e) {
            cli_error(_("cannot write the standard output: %s; the answer stopped at token %d"),
                      strerror(e), st.generated_tokens);
            rc = TN_ERR_IO;
        } else if (rc != TN_OK && rc != TN_ERR_CANCELLED) {
            cli_error("%s", cli_engine_message(&err));
        } else if (!r->o->quiet) {
            print_stats_line(stderr, &st);
        }
    }
    if (rc == TN_OK || rc == TN_ERR_CANCELLED) {
        r->last = st;
        r->have_last = true;
    } else {
        r->failures++;
    }
    tn_buf_free(&k.text);
    return rc;
}

static int do_pin(runner *r, const char *system) {
    tn_error err = {0};
    g_generating = 1;
    int rc = tn_session_pin(r->s, system, on_progress, NULL, &err);
    g_generating = 0;
    if (rc != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return rc;
    }
    chat_clear(&r->chat);
    if (!r->o->quiet && !r->o->json)
        print_pin(r->s, stderr);
    return TN_OK;
}

/* Switches the drafter between requests; the model, the pin and the
 * conversation stay. A drafter that cannot be made leaves the old one on. */
static void set_spec(runner *r, const char *value, FILE *out) {
    char *argv[] = {"--spec", (char *)value};
    int i = 0;
    cli_spec spec = r->o->spec;
    if (cli_spec_parse_arg(&spec, 2, argv, &i) <= 0)
        return;
    tn_drafter *d = NULL;
    if (cli_spec_make(&spec, r->model, (int)r->o->threads, &d) != CLI_EXIT_OK)
        return;
    tn_drafter_free(r->drafter);
    r->drafter = d;
    r->gen.drafter = d;
    fprintf(out, _("speculation: %s\n"), cli_spec_on(&spec) ? value : "off");
}

/* Returns false to quit. */
static bool command(runner *r, char *line) {
    FILE *out = r->o->json ? stderr : stdout;
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit"))
        return false;
    if (!strcmp(line, "/help")) {
        fputs(_("/pin TEXT  pin another system prompt (empty: none)\n"
                     "/stats     figures of the last request and of the pin\n"
                     "/reset     forget the conversation (the pin stays)\n"
                     "/think on|off\n"
                     "/spec none|lookup|draft:PATH|dflash:PATH|mtp:PATH  speculation from now on\n"
                     "/quit\n"), out);
    } else if (!strncmp(line, "/pin", 4) && (line[4] == ' ' || line[4] == '\0')) {
        const char *text = line[4] ? line + 5 : "";
        do_pin(r, text);
    } else if (!strcmp(line, "/stats")) {
        print_pin(r->s, out);
        if (r->have_last)
            print_stats_line(out, &r->last);
    } else if (!strcmp(line, "/reset")) {
        tn_session_reset(r->s);
        chat_clear(&r->chat);
        fputs(_("conversation cleared\n"), out);
    } else if (!strncmp(line, "/spec ", 6)) {
        set_spec(r, line + 6, out);
    } else if (!strncmp(line, "/think ", 7)) {
        bool on;
        if (parse_onoff("/think", line + 7, &on))
            r->gen.thinking = on;
    } else {
        fprintf(stderr, _("unknown command '%s' (/help lists them)\n"), line);
    }
    fflush(out);
    return true;
}

int cmd_run_single_turn(int argc, char **argv) {
    run_opts o = {.think = true, .n_ctx = 1024, .max_tokens = 0, .temp = 0, .top_p = 1};
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    char *system_copy = NULL;
    if (o.system_file) {
        system_copy = read_text_file(o.system_file);
        if (!system_copy)
            return CLI_EXIT_BAD_INPUT;
        o.system = system_copy;
    }
    tn_error err = {0};
    tn_model *model = NULL;
    rc = cli_model_load(o.model, &model, &err);
    if (rc != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        free(system_copy);
        return CLI_EXIT_BAD_INPUT;
    }
    if (!o.quiet && !o.json)
        fprintf(stderr, _("model: %s\n"), tn_model_description(model));
    const char *template_warning = NULL;
    tn_model_chat_kind(model, &template_warning);
    if (template_warning && !o.quiet)
        fprintf(stderr, "tern: %s: %s\n", o.model, cli_engine_text(template_warning));

    tn_session_params sp = tn_session_default_params();

    sp.warn = cli_engine_warning;
    sp.n_ctx = (int32_t)o.n_ctx;
    sp.n_threads = (int32_t)o.threads;
    sp.pin_cache_dir = o.no_pin_cache ? "" : o.pin_cache;
    sp.gen.thinking = o.think;
    sp.gen.max_tokens = (int32_t)o.max_tokens;
    sp.gen.sampler.temperature = (float)o.temp;
    sp.gen.sampler.top_k = (int32_t)o.top_k;
    sp.gen.sampler.top_p = (float)o.top_p;
    sp.gen.sampler.seed = o.seed;
    for (int i = 0; i < o.n_stop; i++)
        sp.gen.stop[i] = o.stop[i];
    sp.gen.n_stop = o.n_stop;
    runner r = {.o = &o, .model = model};
    rc = cli_spec_make(&o.spec, model, (int)o.threads, &r.drafter);
    if (rc != CLI_EXIT_OK) {
        tn_model_free(model);
        free(system_copy);
        return rc;
    }
    sp.gen.drafter = r.drafter;
    sp.gen.draft_max = (int32_t)o.spec.draft_max;
    o.img.flash = true;
    rc = cli_images_encode(&o.img, o.model, model, sp.n_ctx, (int)o.threads,
                           o.quiet || o.json, &r.enc);
    if (rc != CLI_EXIT_OK) {
        tn_drafter_free(r.drafter);
        tn_model_free(model);
        free(system_copy);
        return rc;
    }
    rc = tn_session_new(model, sp, &r.s, &err);
    if (rc != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        cli_encoded_free(&r.enc);
        tn_drafter_free(r.drafter);
        tn_model_free(model);
        free(system_copy);
        return rc == TN_ERR_INVALID ? CLI_EXIT_USAGE : CLI_EXIT_BAD_INPUT;
    }
    r.gen = sp.gen; /* its stop strings point into argv, alive until the end */
    g_session = r.s;
    signal(SIGINT, on_sigint);

    int status = CLI_EXIT_OK;
    if (do_pin(&r, o.system) != TN_OK) {
        status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    if (o.prompt) {
        if (run_request(&r, o.prompt) != TN_OK)
            status = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    const bool interactive = isatty(STDIN_FILENO) && !o.json;
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (interactive) {
            fputs(o.chat ? "> " : "? ", stdout);
            fflush(stdout);
        }
        bool unreadable = false;
        ssize_t n = cli_read_line(&line, &cap, &unreadable);
        if (n < 0) {
            if (unreadable)
                r.failures++;
            break;
        }
        if (n == 0)
            continue;
        /* A NUL would cut the request there without a word. */
        if (memchr(line, '\0', (size_t)n)) {
            cli_error(_("this input line contains a NUL byte; it was not sent (the text after "
                      "the NUL would have been dropped)"));
            r.failures++;
            continue;
        }
        if (line[0] == '/') {
            if (!command(&r, line))
                break;
            continue;
        }
        run_request(&r, line);
        if (cli_stdout_error())
            break; /* said by run_request (--json: by main) */
    }
    free(line);
    if (r.failures)
        status = CLI_EXIT_BAD_INPUT;
out:
    signal(SIGINT, SIG_DFL);
    g_session = NULL;
    chat_clear(&r.chat);
    free(r.chat.msgs);
    free(r.chat.owned);
    tn_session_free(r.s);
    tn_drafter_free(r.drafter);
    cli_encoded_free(&r.enc);
    tn_model_free(model);
    free(system_copy);
    return status;
}
