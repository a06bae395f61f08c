/* tern-cli serve: the OpenAI-compatible local server (server/, issue 11).
 * Without the server (built without libsoup/json-glib) it says so, exit 2. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef TERN_HAVE_SERVER

#include "tern-server.h"

static void usage(FILE *f) {
    fputs(_("usage: tern-cli serve -m MODEL [options]\n"
            "An OpenAI-compatible HTTP server: GET /health, GET /v1/models,\n"
            "POST /v1/chat/completions, POST /v1/completions (see docs/SERVER.md).\n"
            "  -m, --model M      a .gguf file or an installed tag\n"
            "  --host H           address to listen on (default 127.0.0.1; any other\n"
            "                     than loopback needs --api-key)\n"
            "  --port N           port (default 8080; 0: any free port, printed)\n"
            "  --api-key KEY      require 'Authorization: Bearer KEY'\n"
            "  --cors ORIGIN      allow browser requests from ORIGIN (default: none)\n"
            "  -c, --ctx N        context size of the session (default 1024)\n"
            "  -t, --threads N    engine threads (default: physical cores)\n"
            "  --queue N          requests waiting or running before 429 (default 16)\n"
            "  --max-body BYTES   largest request body (default 1048576; 20971520 when\n"
            "                     a vision projector is loaded)\n"
            "  --pins N           system prompts kept pinned at once, each with its own\n"
            "                     KV cache of --ctx tokens (default 4)\n"
            "  --spec S           speculative decoding for every request unless it says\n"
            "                     otherwise: none (default), lookup, draft:PATH,\n"
            "                     dflash:PATH or mtp:PATH (a Gemma 4 assistant)\n"
            "                     (\"tern\":{\"speculation\":...} per request)\n"
            "  --draft-max N      tokens per draft (default: the drafter's)\n"
            "  --mmproj PATH      vision projector: chat requests may carry images\n"
            "                     (image_url data: URIs); default: the one *mmproj*.gguf\n"
            "                     beside the model, if any\n"
            "  --request-timeout S  seconds a client has to send its request's headers\n"
            "                     and body (default 30)\n"
            "  --pin-cache DIR    where pinned system prompts' snapshots go (default\n"
            "                     $XDG_CACHE_HOME/tern/pins, i.e. ~/.cache/tern/pins)\n"
            "  --pin-cache-max SIZE  their total size, oldest removed beyond it (bytes,\n"
            "                     or with K, M, G; default 4G)\n"
            "  --no-pin-cache     write and read no snapshots\n"),
          f);
}

/* BYTES, or with a K, M or G suffix (powers of 1024). */
static bool parse_size(const char *s, uint64_t *out) {
    char *end;
    if (!cli_number_text(s, false) || *s == '-' || *s == '+')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return false;
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end || v == 0 || v > (1ULL << 50) >> shift)
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

static bool parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    if (!cli_number_text(s, false))
        return false;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

int cmd_serve(int argc, char **argv) {
    tern_server_config cfg = {0};
    cfg.port = 8080;
    cfg.handle_signals = true;
    cfg.warn = cli_engine_warning;
    const char *model_arg = NULL;
    const char *mmproj = NULL;
    cli_spec spec = {0};
    /* -m TAG that speculates by default: its draft for every request. */
    cli_tag_spec_argv(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int spec_arg = cli_spec_parse_arg(&spec, argc, argv, &i);
        if (spec_arg < 0)
            return CLI_EXIT_USAGE;
        if (spec_arg > 0)
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--no-pin-cache")) {
            cfg.pin_cache_dir = "";
            continue;
        }
        static const char *const with_value[] = {"-m", "--model", "--host", "--port", "--api-key",
                                                 "--cors", "-c", "--ctx", "-t", "--threads",
                                                 "--queue", "--max-body", "--pins",
                                                 "--mmproj", "--debug-token-delay",
                                                 "--request-timeout", "--pin-cache",
                                                 "--pin-cache-max"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            known = known || !strcmp(a, with_value[k]);
        if (!known) {
            cli_error(_("serve: unknown option '%s' (see 'tern-cli serve --help')"), a);
            return CLI_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            cli_error(_("serve: %s needs a value"), a);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        long n = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            model_arg = v;
        } else if (!strcmp(a, "--host")) {
            cfg.host = v;
        } else if (!strcmp(a, "--api-key")) {
            cfg.api_key = v;
        } else if (!strcmp(a, "--cors")) {
            cfg.cors_origin = v;
        } else if (!strcmp(a, "--mmproj")) {
            mmproj = v;
        } else if (!strcmp(a, "--pin-cache")) {
            if (!cli_pin_cache_check("serve", v))
                return CLI_EXIT_USAGE;
            cfg.pin_cache_dir = v;
        } else if (!strcmp(a, "--pin-cache-max")) {
            if (!parse_size(v, &cfg.pin_cache_max_bytes)) {
                cli_error(_("serve: --pin-cache-max wants a size from 1 to 1048576G (bytes, or with K, M, "
                            "G), not '%s'"),
                          v);
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--request-timeout")) {
            if (!parse_long(v, 1, 86400, &n)) {
                cli_error(_("serve: --request-timeout wants 1..86400 seconds, not '%s'"), v);
                return CLI_EXIT_USAGE;
            }
            cfg.request_timeout_s = (int)n;
        } else if (!strcmp(a, "--port")) {
            if (!parse_long(v, 0, 65535, &n)) {
                cli_error(_("serve: --port wants 0..65535, not '%s'"), v);
                return CLI_EXIT_USAGE;
            }
            cfg.port = (int)n;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            if (!parse_long(v, 16, 1 << 20, &n)) {
                cli_error(_("serve: %s wants a number of tokens (16..1048576), not '%s'"), a, v);
                return CLI_EXIT_USAGE;
            }
            cfg.n_ctx = (int32_t)n;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!parse_long(v, 1, 1024, &n)) {
                cli_error(_("serve: %s wants 1..1024, not '%s'"), a, v);
                return CLI_EXIT_USAGE;
            }
            cfg.n_threads = (int32_t)n;
        } else if (!strcmp(a, "--queue")) {
            if (!parse_long(v, 1, 100000, &n)) {
                cli_error(_("serve: --queue wants 1..100000, not '%s'"), v);
                return CLI_EXIT_USAGE;
            }
            cfg.queue_max = (int)n;
        } else if (!strcmp(a, "--max-body")) {
            if (!parse_long(v, 1024, 1L << 30, &n)) {
                cli_error(_("serve: --max-body wants 1024..1073741824 bytes, not '%s'"), v);
                return CLI_EXIT_USAGE;
            }
            cfg.body_max = (size_t)n;
        } else if (!strcmp(a, "--pins")) {
            if (!parse_long(v, 1, TERN_SERVER_MAX_PINS, &n)) {
                cli_error(_("serve: --pins wants 1..%d, not '%s'"), TERN_SERVER_MAX_PINS, v);
                return CLI_EXIT_USAGE;
            }
            cfg.pins_max = (int)n;
        } else { /* --debug-token-delay MS: tests (queue bound, disconnects) */
            if (!parse_long(v, 0, 10000, &n)) {
                cli_error(_("serve: --debug-token-delay wants 0..10000 ms, not '%s'"), v);
                return CLI_EXIT_USAGE;
            }
            cfg.token_delay_ms = (int)n;
        }
    }
    if (!model_arg) {
        cli_error(_("serve: which model? (-m FILE.gguf or an installed tag)"));
        return CLI_EXIT_USAGE;
    }
    if (cfg.api_key && cfg.api_key[strspn(cfg.api_key, " \t\r\n\v\f")] == '\0') {
        cli_error(_("serve: --api-key is empty or only blanks (an unset variable?): give a real "
                  "key, or leave --api-key out on a loopback host"));
        return CLI_EXIT_USAGE;
    }
    /* Before the key's rule: "999.1.1.1 is reachable from other machines"
     * sent the user after a key for a typo. */
    const tern_server_host host = tern_server_host_read(cfg.host);
    if (!host.address) {
        cli_error(_("serve: --host %s is not an IP address (use e.g. 127.0.0.1, ::1 or 0.0.0.0)"),
                  cfg.host);
        return CLI_EXIT_USAGE;
    }
    if (!host.loopback && (!cfg.api_key || !*cfg.api_key)) {
        cli_error(_("serve: --host %s is reachable from other machines: give --api-key KEY too"),
                  cfg.host);
        return CLI_EXIT_USAGE;
    }
    char buf[4096];
    const char *path = cli_resolve_model(model_arg, buf, sizeof buf);
    if (!path)
        return CLI_EXIT_BAD_INPUT;

    /* The id clients name: the tag as given, or the file name without .gguf.
     * JSON is UTF-8 and a file name any bytes: a Latin-1 "mod\xe9l.gguf" put
     * its raw byte in every answer, which clients refused; GLib's display
     * name ("mod\ufffdl") is UTF-8. */
    char *id = NULL;
    if (!strchr(model_arg, '/') && !g_str_has_suffix(model_arg, ".gguf")) {
        id = g_utf8_make_valid(model_arg, -1);
    } else {
        id = g_filename_display_basename(model_arg);
        if (g_str_has_suffix(id, ".gguf"))
            id[strlen(id) - 5] = '\0';
    }
    cfg.model_id = id;

    tn_model *model = NULL;
    tn_error err = {0};
    if (cli_model_load(path, &model, &err) != TN_OK) {
        cli_error(_("serve: %s"), cli_engine_message(&err));
        g_free(id);
        return CLI_EXIT_BAD_INPUT;
    }
    cli_backend_note(model);
    /* The projector: named, or the one beside the model (none: text only). */
    tn_vision *vision = NULL;
    int vision_rc = cli_vision_open(mmproj, path, model, false, false, &vision);
    if (vision_rc != CLI_EXIT_OK) {
        tn_model_free(model);
        g_free(id);
        return vision_rc;
    }
    cfg.vision = vision;
    tn_drafter *drafter = NULL;
    int spec_rc = cli_spec_make(&spec, model, cfg.n_threads, &drafter);
    if (spec_rc != CLI_EXIT_OK) {
        tn_vision_free(vision);
        tn_model_free(model);
        g_free(id);
        return spec_rc;
    }
    cfg.drafter = drafter;
    GError *e = NULL;
    tern_server *srv = tern_server_new(model, &cfg, &e);
    if (!srv) {
        cli_error(_("serve: %s"), e->message);
        g_error_free(e);
        tn_drafter_free(drafter);
        tn_vision_free(vision);
        tn_model_free(model);
        g_free(id);
        return CLI_EXIT_BAD_INPUT;
    }
    printf(_("tern-cli serve: %s as '%s' on %s\n"), tn_model_description(model), id,
           tern_server_url(srv));
    if (vision)
        printf(_("images: on, %d tokens each unless a request sets tern.image_tokens\n"),
               tn_vision_tokens(vision, 0));
    printf(_("port %d\n"), tern_server_port(srv));
    fflush(stdout);
    tern_server_run(srv);
    tern_server_free(srv);
    tn_drafter_free(drafter);
    tn_vision_free(vision);
    tn_model_free(model);
    g_free(id);
    fputs(_("tern-cli serve: stopped\n"), stderr);
    return CLI_EXIT_OK;
}

#else

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error(_("serve: this tern-cli was built without the server (it needs GLib, libsoup 3 and "
              "json-glib; see tools/ensure-deps.sh manager)"));
    return CLI_EXIT_BAD_INPUT;
}

#endif
