#include "cli.h"

#include <stdarg.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_command;

static const cli_command commands[] = {
    {"run", cmd_run, "generate text: one prompt, a chat, or pinned serving"},
    {"perplexity", cmd_perplexity, "perplexity of a text, and the argmax at every position"},
    {"info", cmd_info, "print a GGUF file's metadata and tensors"},
    {"mkmodel", cmd_mkmodel, "write a random-weight GGUF model with a real tokenizer"},
    {"template", cmd_template, "print the prompt a model's chat template renders"},
    {"bench", cmd_bench, "measure pp/tg speed, verify cost and memory bandwidth"},
    {"bench-vision", cmd_bench_vision, "encode time per image of a vision projector"},
    {"tokenize", cmd_tokenize, "print the token ids of a text (--bench: encode speed)"},
    {"detokenize", cmd_detokenize, "print the text of token ids"},
    {"list", cmd_list, "the models of the catalog and which are installed"},
    {"pull", cmd_pull, "download a model of the catalog (resumable, verified)"},
    {"remove", cmd_remove, "remove an installed model"},
    {"check", cmd_check, "verify the installed models' files again"},
    {"import", cmd_import, "add a local .gguf model file as local:NAME"},
    {"serve", cmd_serve, "an OpenAI-compatible local HTTP server for a model"},
};

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("tern-cli: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void usage(FILE *out) {
    fprintf(out, "usage: tern-cli COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'tern-cli COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tern-cli %s\n", TN_VERSION_STRING);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    cli_error("unknown command '%s' (see 'tern-cli --help')", argv[1]);
    return CLI_EXIT_USAGE;
}
