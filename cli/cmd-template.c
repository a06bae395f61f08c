/* tern-cli template: the exact prompt a model's chat template renders. */
#include "cli.h"

#ifdef TERN_HAVE_SERVER
#include "tern-toolcall.h"
#endif

#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli template (-m MODEL.gguf | --kind NAME) [--system TEXT]\n"
              "                         [--think on|off] --user TEXT [--assistant TEXT --user TEXT]...\n"
              "                         [--tools FILE.json] [--no-generation-prompt] [--no-bos] [-v]\n"
              "\n"
              "Prints the prompt exactly as the chat template renders it, with no newline\n"
              "added. The template is recognised from the model's tokenizer.chat_template\n"
              "(or its architecture); --kind forces one of:"));
    for (int k = 0; k < TN_CHAT_KIND_COUNT_; k++)
        fprintf(out, " %s", tn_chat_kind_name(k));
    fprintf(out,
            _(".\n"
              "Messages are rendered in the order given. When the template starts with the\n"
              "BOS token its text is printed first (read from the model; --no-bos omits it):\n"
              "Tern adds it as a token id, not as text. -v names the template on stderr.\n"
              "--tools reads an OpenAI request's \"tools\" array (or a request body that has\n"
              "one) and renders the tool definitions as the template shows them.\n"));
}

#ifdef TERN_HAVE_SERVER
/* The tools of FILE: a "tools" array, or an object (a request body) with
 * one, each schema taken as its own text. CLI_EXIT_OK or an error said. */
static int read_tools(const char *path, tn_chat_tool **tools, int *n) {
    size_t len = 0;
    GError *e = NULL;
    /* Not g_file_get_contents: it would wait for ever on a FIFO and read
     * /dev/zero until memory ran out. */
    char *text = cli_read_file(path, CLI_MAX_PROMPT_BYTES, &len);
    if (!text)
        return CLI_EXIT_BAD_INPUT;
    int rc = CLI_EXIT_BAD_INPUT;
    JsonParser *parser = json_parser_new();
    char *why = NULL;
    /* Strict JSON before json-glib, as the server checks a request's body:
     * json-glib takes C's escapes ("\\101" became "A" in a tool's name,
     * "\\377" a byte that is no UTF-8), a lone low surrogate, "01", a byte
     * order mark, and recurses once per level. A repeated key and a number beyond a double stay allowed
     * as the server allows them (a client's schema, rendered as its text);
     * \\u0000 does not, as the server's body scan refuses it: a name or a
     * description is a C string, cut there. */
    tn_error check = {0};
    if (tn_json_check(text, len, path, 128, TN_JSON_NO_NUL, &check) != TN_OK) {
        cli_error(_("template: %s"), cli_engine_message(&check));
    } else if (!json_parser_load_from_data(parser, text, (gssize)len, &e)) {
        cli_error(_("template: %s is not JSON: %s"), path, e->message);
        g_error_free(e);
    } else {
        JsonNode *root = json_parser_get_root(parser);
        JsonNode *node = root;
        const char *raw = text;
        char *member = NULL;
        if (root && JSON_NODE_HOLDS_OBJECT(root)) {
            node = json_object_get_member(json_node_get_object(root), "tools");
            size_t at = 0, s = 0, end = 0;
            while (at < len && strchr(" \t\r\n", text[at]))
                at++;
            if (tern_json_raw_member(text, len, at, "tools", &s, &end))
                member = g_strndup(text + s, end - s);
            raw = member;
        }
        if (!tern_tools_parse(node, raw, tools, n, &why))
            cli_error(_("template: %s: %s"), path, why);
        else
            rc = CLI_EXIT_OK;
        g_free(member);
    }
    g_free(why);
    g_object_unref(parser);
    free(text);
    return rc;
}
#endif

/* Text of the BOS token, or NULL when the model does not say. */
static const char *bos_text(const tn_gguf *g, size_t *len) {
    int64_t id;
    if (tn_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &id) != TN_OK || id < 0)
        return NULL;
    const tn_gguf_value *tokens = tn_gguf_find(g, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != TN_GGUF_ARRAY || tokens->v.arr.type != TN_GGUF_STRING ||
        (uint64_t)id >= tokens->v.arr.n || !tokens->v.arr.items)
        return NULL;
    const tn_gguf_value *t = &tokens->v.arr.items[id];
    *len = (size_t)t->v.str.len;
    return t->v.str.ptr;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *kind_name = NULL, *system = NULL, *tools_path = NULL;
    tn_chat_tool *tools = NULL;
    int n_tools = 0;
    bool think = true, gen = true, with_bos = true, verbose = false;
    tn_chat_message *msgs = calloc((size_t)argc + 1, sizeof *msgs);
    size_t n = 0;
    int n_user = 0;
    int rc = CLI_EXIT_USAGE;
    tn_gguf *g = NULL;
    tn_buf out = {0};
    if (!msgs) {
        cli_error(_("template: out of memory"));
        return CLI_EXIT_BAD_INPUT;
    }

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            rc = CLI_EXIT_OK;
            goto done;
        } else if (!strcmp(a, "--no-generation-prompt")) {
            gen = false;
        } else if (!strcmp(a, "--no-bos")) {
            with_bos = false;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--kind") ||
                   !strcmp(a, "--system") || !strcmp(a, "--think") || !strcmp(a, "--user") ||
                   !strcmp(a, "--assistant") || !strcmp(a, "--tools")) {
            if (!has_value) {
                cli_error(_("template: %s needs a value"), a);
                goto done;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
                model = v;
            } else if (!strcmp(a, "--kind")) {
                kind_name = v;
            } else if (!strcmp(a, "--tools")) {
                tools_path = v;
            } else if (!strcmp(a, "--system")) {
                if (n > 0 || system) {
                    cli_error(_("template: --system must come once, before the messages"));
                    goto done;
                }
                system = v;
                msgs[n++] = (tn_chat_message){.role = TN_CHAT_ROLE_SYSTEM, .content = v};
            } else if (!strcmp(a, "--think")) {
                if (!strcmp(v, "on")) {
                    think = true;
                } else if (!strcmp(v, "off")) {
                    think = false;
                } else {
                    cli_error(_("template: --think takes 'on' or 'off', not '%s'"), v);
                    goto done;
                }
            } else if (!strcmp(a, "--user")) {
                msgs[n++] = (tn_chat_message){.role = TN_CHAT_ROLE_USER, .content = v};
                n_user++;
            } else {
                msgs[n++] = (tn_chat_message){.role = TN_CHAT_ROLE_ASSISTANT, .content = v};
            }
        } else {
            cli_error(_("template: unexpected argument '%s' (see 'tern-cli template --help')"), a);
            goto done;
        }
    }
    if (!model && !kind_name) {
        cli_error(_("template: give a model (-m MODEL.gguf) or a template (--kind NAME)"));
        goto done;
    }
    if (n_user == 0) {
        cli_error(_("template: no --user message given"));
        goto done;
    }

    tn_chat_kind kind = TN_CHAT_CHATML;
    const char *warning = NULL;
    tn_error err;
    if (kind_name) {
        int k = tn_chat_kind_from_name(kind_name);
        if (k < 0) {
            cli_error(_("template: unknown template kind '%s' (see 'tern-cli template --help')"),
                      kind_name);
            goto done;
        }
        kind = (tn_chat_kind)k;
    }
    if (model) {
        if (tn_gguf_open(model, &g, &err) != TN_OK) {
            cli_error("%s", cli_engine_message(&err));
            rc = CLI_EXIT_BAD_INPUT;
            goto done;
        }
        if (!kind_name) {
            tn_str tmpl = {NULL, 0}, arch = {NULL, 0};
            char arch_buf[64] = "";
            if (tn_gguf_get_str(g, "general.architecture", &arch) == TN_OK &&
                arch.len < sizeof arch_buf) {
                memcpy(arch_buf, arch.ptr, (size_t)arch.len);
                arch_buf[arch.len] = '\0';
            }
            if (tn_gguf_get_str(g, "tokenizer.chat_template", &tmpl) != TN_OK)
                tmpl.len = 0;
            kind = tn_chat_template_detect(tmpl.ptr, (size_t)tmpl.len,
                                           arch_buf[0] ? arch_buf : NULL, &warning);
        }
    }
    if (warning)
        cli_error("%s: %s", model, cli_engine_text(warning));

    tn_chat_options opts = tn_chat_default_options();
    opts.add_generation_prompt = gen;
    opts.enable_thinking = think;
    if (tools_path) {
#ifdef TERN_HAVE_SERVER
        if ((rc = read_tools(tools_path, &tools, &n_tools)) != CLI_EXIT_OK)
            goto done;
        rc = CLI_EXIT_USAGE;
        opts.tools = tools;
        opts.n_tools = (size_t)n_tools;
#else
        cli_error(_("template: --tools needs a build with json-glib (the server's)"));
        rc = CLI_EXIT_BAD_INPUT;
        goto done;
#endif
    }
    if (tn_chat_kind_adds_bos(kind) && with_bos && g) {
        size_t len = 0;
        const char *bos = bos_text(g, &len);
        if (bos && tn_buf_append(&out, bos, len) != TN_OK) {
            cli_error(_("template: out of memory"));
            rc = CLI_EXIT_BAD_INPUT;
            goto done;
        }
    }
    if (tn_chat_render(kind, msgs, n, &opts, &out, &err) != TN_OK) {
        cli_error("template: %s", cli_engine_message(&err));
        rc = CLI_EXIT_BAD_INPUT;
        goto done;
    }
    /* One sentence per case, so that each is translated whole. */
    if (verbose && kind_name && tn_chat_kind_adds_bos(kind))
        fprintf(stderr, _("tern-cli: template %s (forced); the BOS token goes first\n"),
                tn_chat_kind_name(kind));
    else if (verbose && kind_name)
        fprintf(stderr, _("tern-cli: template %s (forced)\n"), tn_chat_kind_name(kind));
    else if (verbose && tn_chat_kind_adds_bos(kind))
        fprintf(stderr, _("tern-cli: template %s (from the model); the BOS token goes first\n"),
                tn_chat_kind_name(kind));
    else if (verbose)
        fprintf(stderr, _("tern-cli: template %s (from the model)\n"), tn_chat_kind_name(kind));
    /* The BOS token's text is the model file's (and the messages hold
     * whatever the arguments did): on a terminal shown, never obeyed. */
    cli_model_text_write(out.data, out.len);
    /* A write that failed is main's to say (check_stdout): failing here
     * made it exit 2 without a word. */
    rc = CLI_EXIT_OK;

done:
#ifdef TERN_HAVE_SERVER
    tern_tools_free(tools, n_tools);
#else
    (void)tools;
    (void)n_tools;
#endif
    tn_buf_free(&out);
    tn_gguf_close(g);
    free(msgs);
    return rc;
}
