#include "cli.h"

#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_command;

static const cli_command commands[] = {
    {"run", cmd_run, N_("generate text: one prompt, a chat, or pinned serving")},
    {"perplexity", cmd_perplexity, N_("perplexity of a text, and the argmax at every position")},
    {"info", cmd_info, N_("print a GGUF file's metadata and tensors")},
    {"mkmodel", cmd_mkmodel, N_("write a random-weight GGUF model with a real tokenizer")},
    {"template", cmd_template, N_("print the prompt a model's chat template renders")},
    {"bench", cmd_bench, N_("measure pp/tg speed, verify cost and memory bandwidth")},
    {"bench-vision", cmd_bench_vision, N_("encode time per image of a vision projector")},
    {"tokenize", cmd_tokenize, N_("print the token ids of a text (--bench: encode speed)")},
    {"detokenize", cmd_detokenize, N_("print the text of token ids")},
    {"list", cmd_list, N_("the models of the catalog and which are installed")},
    {"pull", cmd_pull, N_("download a model of the catalog (resumable, verified)")},
    {"search", cmd_search, N_("search Hugging Face for GGUF models and list their quantizations")},
    {"remove", cmd_remove, N_("remove an installed model")},
    {"check", cmd_check, N_("verify the installed models' files again")},
    {"import", cmd_import, N_("add a local .gguf model file as local:NAME")},
    {"serve", cmd_serve, N_("an OpenAI-compatible local HTTP server for a model")},
    {"doctor", cmd_doctor, N_("check the CPU and the NPU: what runs, and how to fix what does not")},
};

/* Arguments in an error are often what the user typed or a file's name,
 * which may hold any byte: control characters other than newline and tab
 * become '?', so that an escape sequence cannot recolour or rewrite the
 * terminal (libtern's own messages are cleaned the same way, engine/error.c). */
void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    const int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    fputs("tern-cli: ", stderr);
    if (n >= 0 && text) {
        for (unsigned char *c = (unsigned char *)text; *c; c++)
            if ((*c < 0x20 && *c != '\n' && *c != '\t') || *c == 0x7f)
                *c = '?';
        fputs(text, stderr);
    } else {
        fputs(fmt, stderr); /* out of memory: the untranslated shape at least */
    }
    fputc('\n', stderr);
    free(text);
}

const char *cli_engine_message(const tn_error *err) {
    static _Thread_local char text[TN_ERROR_MESSAGE_MAX];
    /* libtern keeps the English format and its arguments: the message is
     * rebuilt from the format's translation (docs/TRANSLATING.md). */
    if (!err->format)
        return err->message;
    return tn_error_format(err, dgettext(GETTEXT_PACKAGE, err->format), text, sizeof text);
}

void cli_engine_warning(const tn_error *warning, void *user) {
    (void)user;
    fprintf(stderr, "tern: %s\n", cli_engine_message(warning));
}

const char *cli_engine_text(const char *english) {
    return english ? dgettext(GETTEXT_PACKAGE, english) : NULL;
}

void cli_backend_note(const tn_model *m) {
    const char *who = NULL;
    bool asked = false;
    const tn_error *why = tn_model_backend_refusal(m, &who, &asked);
    if (why && asked)
        /* Translators: "xrt: no NPU found; using cpu": a backend, why not, the one used */
        fprintf(stderr, _("%s: %s; using %s\n"), who, cli_engine_message(why),
                tn_model_backend(m));
}

void cli_i18n_init(void) {
    const char *dir = getenv("TERN_LOCALEDIR");
    /* Only the messages follow the user's locale: numbers stay as scripts and
     * JSON read them ("0.7", not "0,7", in arguments, figures and the
     * server's answers), and character classes and GLib's sizes stay plain
     * ASCII as before (the catalogs are bound to UTF-8 below). */
    setlocale(LC_MESSAGES, "");
    bindtextdomain(GETTEXT_PACKAGE, dir && *dir ? dir : LOCALEDIR);
    bind_textdomain_codeset(GETTEXT_PACKAGE, "UTF-8");
    textdomain(GETTEXT_PACKAGE);
}

static void usage(FILE *out) {
    fputs(_("usage: tern-cli COMMAND [OPTIONS]\n\ncommands:\n"), out);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, _(commands[i].summary));
    fputs(_("\n'tern-cli COMMAND --help' describes a command.\n"), out);
}

/* Output that never reached its file (a full disk, a closed standard output)
 * must not end in status 0: `tern-cli run -p ... > answer.txt` or
 * `tern-cli tokenize ... > ids.txt` would leave a cut file that a script
 * takes for the whole. Commands write through stdio, whose buffered writes
 * fail late, so the check is made here, after the last write (what streams,
 * such as run's answer, checks as it goes and stops: cli_stdout_error). */
static int check_stdout(int status) {
    const int e = cli_stdout_error();
    if (!e)
        return status;
    if (status == CLI_EXIT_OK)
        cli_error(_("cannot write the standard output: %s; the output is incomplete"), strerror(e));
    return status == CLI_EXIT_OK ? CLI_EXIT_BAD_INPUT : status;
}

int main(int argc, char **argv) {
    cli_i18n_init();
    /* Past a file size limit (ulimit -f), a write should fail with EFBIG
     * and be reported like a full disk, not kill the process silently. */
    signal(SIGXFSZ, SIG_IGN);
    tn_sigbus_say(_("tern-cli: a file in use (the model, or its repack cache) was truncated or "
                    "rewritten while it was read; stopped. Run again once the file is complete"));
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        cli_print_help(usage);
        return check_stdout(CLI_EXIT_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tern-cli %s\n", TN_VERSION_STRING);
        return check_stdout(CLI_EXIT_OK);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return check_stdout(commands[i].run(argc - 1, argv + 1));
    cli_error(_("unknown command '%s' (see 'tern-cli --help')"), argv[1]);
    return CLI_EXIT_USAGE;
}
