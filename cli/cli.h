/* tern-cli subcommands. Each returns the process exit status:
 * 0 success, 1 usage error, 2 bad input (unreadable or invalid model, ...). */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include "tern.h"

#include <libintl.h>
#include <stdio.h>
#include <sys/types.h>

/* Translations (po/, docs/TRANSLATING.md): tern-cli is plain C, so gettext
 * comes from the C library; the files that include GLib's gi18n define the
 * same macros. Help texts, errors and progress are translated; figures, stats
 * lines and JSON stay as scripts read them. */
#ifndef _
#define _(s) gettext(s)
#endif
#ifndef N_
#define N_(s) s
#endif

#define CLI_EXIT_OK 0
#define CLI_EXIT_USAGE 1
#define CLI_EXIT_BAD_INPUT 2
/* The requested backend cannot run (doctor --backend, run/bench --no-fallback). */
#define CLI_EXIT_BACKEND 3
/* Stopped by Ctrl-C: 128 + SIGINT, the status a shell gives a command
 * that SIGINT ended, so that `tern-cli run ... && next` does not go on. */
#define CLI_EXIT_INTERRUPTED 130

int cmd_info(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* bench --pin (cli/cmd-bench-pin.c); run --single-turn / --chat (cli/run-single-turn.c) */
int cmd_bench_pin(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_run_single_turn(int argc, char **argv);
/* run --remote URL (cli/cmd-run-remote.c): on an OpenAI-compatible server. */
int cmd_run_remote(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
/* The model manager (cli/cmd-models.c): list, pull, remove, check, import. */
int cmd_list(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_remove(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_import(int argc, char **argv);
/* The OpenAI-compatible server (cli/cmd-serve.c, server/). */
int cmd_serve(int argc, char **argv);
/* The hardware doctor (cli/cmd-doctor.c, engine/doctor.c). */
int cmd_doctor(int argc, char **argv);
/* run and bench (cli/backend-args.c): removes --backend B and --no-fallback
 * from argv (*argc shrinks) and decides before the model loads. xrt cannot
 * run today: "xrt: REASON; using the CPU" on stderr, or with --no-fallback
 * the error and CLI_EXIT_BACKEND. 0 to go on, else the exit status. */
int cli_backend_take(int *argc, char **argv);
/* tn_model_load with the default parameters; on a terminal, stderr shows
 * how far the load is ("loading: 42 %", rewritten in place, gone when the
 * load ends), as a model of tens of gigabytes takes that long to check and
 * repack (cli/common.c). */
int cli_model_load(const char *path, tn_model **out, tn_error *err);
/* Whether stderr takes figures rewritten in place ("\r", "\033[K"): a
 * terminal, but not one that says it cannot move the cursor (TERM=dumb:
 * Emacs's shell, some log viewers), which gets none, as a pipe does. */
bool cli_live_figures(void);
#define CLI_BACKEND_USAGE                                                                \
    N_("  --backend B      auto (default), cpu or xrt (the NPU: it cannot run yet, and\n"   \
    "                   the CPU runs instead; 'tern-cli doctor' says why)\n"              \
    "  --no-fallback    with --backend xrt: fail instead of running on the CPU\n")
/* `-m ARG`: a path is returned as is; an installed tag ("qwen3:0.6b",
 * "local:NAME") becomes the path of its model file, copied into buf. NULL
 * (with a message printed) when ARG is neither. cli_resolve_draft: the
 * tag's draft model, NULL when it has none or ARG is a path. */
const char *cli_resolve_model(const char *arg, char *buf, size_t cap);
const char *cli_resolve_draft(const char *arg, char *buf, size_t cap);
/* run or serve -m TAG where TAG's catalog entry speculates by default (flags.
 * speculation) and argv has no --spec: adds "--spec KIND:PATH" for the
 * tag's draft (draft:, dflash: or mtp: by its draft_kind), says so on
 * stderr, and points *argv at the longer array. Call before
 * cli_resolve_model_argv (which replaces the tag by a path). */
void cli_tag_spec_argv(int *argc, char ***argv);
/* Replaces the value of every -m / --model in argv by cli_resolve_model's
 * answer; false (message printed) when one names neither a file nor an
 * installed model. */
bool cli_resolve_model_argv(int argc, char **argv);

/* Speculative decoding options (cli/spec-args.c): --spec none|lookup|
 * draft:PATH|dflash:PATH and --draft-max K, for run and bench. */
typedef struct cli_spec {
    const char *spec; /* NULL or "none": off */
    long draft_max;   /* 0: the drafter's default */
} cli_spec;
#define CLI_SPEC_USAGE                                                                  \
    N_("  --spec S         speculative decoding: none (default), lookup (n-grams of the\n"  \
    "                   prompt and output), draft:PATH (a smaller model with the same\n" \
    "                   vocabulary), dflash:PATH (a DFlash block draft for this model),\n" \
    "                   mtp:PATH (a Gemma 4 MTP assistant for this model)\n"           \
    "  --draft-max K    tokens per draft (default: lookup 10, draft 8, DFlash block-1,\n" \
    "                   MTP 3)\n")
/* argv[*i] is --spec or --draft-max: consumes it and its value (*i moves to
 * the value) and returns 1; another option: 0; a bad value: -1, printed. */
int cli_spec_parse_arg(cli_spec *s, int argc, char **argv, int *i);
bool cli_spec_on(const cli_spec *s);
/* The drafter for the target (*out NULL when off); 0, or an exit status
 * after printing the error. */
int cli_spec_make(const cli_spec *s, const tn_model *target, int n_threads, tn_drafter **out);
/* " | drafted D, accepted A (P%), M per verify step" and the JSON fields. */
void cli_spec_print_stats(FILE *f, const tn_session_stats *st);
void cli_spec_json_stats(FILE *f, const tn_session_stats *st);
/* mkmodel --arch dflash (cli/mkmodel-dflash.c); bench --spec (cli/bench-spec.c). */
int cmd_mkmodel_dflash(int argc, char **argv);
int cmd_mkmodel_mtp(int argc, char **argv); /* --arch gemma4-assistant */
/* mkmodel --arch gemma3-vision and bench-vision (cli/mkmodel-vision.c). */
int cmd_mkmodel_vision(int argc, char **argv);
int cmd_bench_vision(int argc, char **argv);
int cmd_bench_spec(int argc, char **argv);
/* bench --sampler (cli/bench-sampler.c). */
int cmd_bench_sampler(int argc, char **argv);

/* Images for vision prompts (cli/image-args.c): --image PATH (repeatable),
 * --image-tokens N (the budget; default the projector's native count) and
 * --mmproj PATH (default: the one *mmproj*.gguf next to the model). */
#define CLI_MAX_IMAGES 8
typedef struct cli_images {
    const char *paths[CLI_MAX_IMAGES];
    int n;
    long budget; /* 0: the default (Gemma 3: native; Gemma 4: 70 when flash, else 1120) */
    const char *mmproj;
    bool flash;  /* single-turn (flash) requests: Gemma 4's default budget is 70 */
} cli_images;
#define CLI_IMAGES_USAGE                                                                   \
    N_("  --image PATH     ask about an image (PNG, JPEG, WebP, GIF; repeatable); it goes\n"  \
    "                   before the text, or where the text says <__image__>\n"            \
    "  --image-tokens N image token budget (default: the model's, 256 for Gemma 3;\n"     \
    "                   Gemma 4: 70, 140, 280, 560 or 1120, default 70 with\n"            \
    "                   --single-turn, else 1120)\n"                                      \
    "  --mmproj PATH    the vision projector (default: the *mmproj*.gguf beside the\n"     \
    "                   model)\n")
/* Like cli_spec_parse_arg, for --image, --image-tokens and --mmproj. */
int cli_images_parse_arg(cli_images *ci, int argc, char **argv, int *i);
/* The images decoded and encoded for the model: images[n] own their rows. */
typedef struct cli_encoded {
    tn_image_embd *images;
    int n;
} cli_encoded;
/* The vision projector for m (cli/image-args.c): mmproj, else the one
 * *mmproj*.gguf beside model_path, loaded and checked to feed a model as
 * wide as m. required (run --image): none is an error. Not required (serve):
 * none, several, or a found one that does not load or fit leave *out NULL
 * with a note; a named mmproj must still work. 0, or an exit status after
 * printing why. */
int cli_vision_open(const char *mmproj, const char *model_path, const tn_model *m,
                    bool required, bool quiet, tn_vision **out);
/* 0 (nothing to do without --image), or an exit status after printing why.
 * n_ctx (0: unknown) bounds the images' tokens before any is encoded. */
int cli_images_encode(const cli_images *ci, const char *model_path, const tn_model *m,
                      int32_t n_ctx, int n_threads, bool quiet, cli_encoded *out);
void cli_encoded_free(cli_encoded *e);
/* The prompt of one turn (text) or a conversation (msgs), with the encoded
 * images set only when there are some: without --image a TN_IMAGE_MARKER
 * the user typed stays text (tn_prompt). */
static inline tn_prompt cli_text_prompt(const char *text, const cli_encoded *enc) {
    return (tn_prompt){.kind = TN_PROMPT_TEXT,
                       .text = text,
                       .images = enc->n > 0 ? enc->images : NULL,
                       .n_images = enc->n};
}
static inline tn_prompt cli_chat_prompt(const tn_session_message *msgs, int32_t n,
                                        const cli_encoded *enc) {
    return (tn_prompt){.kind = TN_PROMPT_MESSAGES,
                       .messages = msgs,
                       .n_messages = n,
                       .images = enc->n > 0 ? enc->images : NULL,
                       .n_images = enc->n};
}

/* One line of standard input for the chats (run, run --single-turn/--chat,
 * run --remote), without its line end (LF, CRLF): its length (0: an empty
 * line), or -1 at the end of input. An input that cannot be read (a
 * folder, a device that fails) is not the end of the conversation, which
 * would end it with status 0: it is said, and *failed is set. */
ssize_t cli_read_line(char **line, size_t *cap, bool *failed);
/* A file the user names (--tools, --system-file, -f, --file): the whole of
 * it through tn_read_file (a FIFO, a device, a directory or a file over max
 * is refused, never read), NUL-terminated, *len its length (len may be
 * NULL). NULL after printing why. */
char *cli_read_file(const char *path, uint64_t max, size_t *len);
/* The largest prompt file (a system prompt, a tools list): no model's
 * context holds more text than this. */
#define CLI_MAX_PROMPT_BYTES ((uint64_t)64 << 20)
/* The largest text to measure (perplexity -f, tokenize --file/--bench):
 * corpora such as wikitext-103's training text (~540 MB) fit. */
#define CLI_MAX_CORPUS_BYTES ((uint64_t)1 << 30)

/* --pin-cache DIR of `cmd` (serve, run --single-turn): false, with the
 * error printed, for an empty value or one that is not a directory (a
 * file, a FIFO, /dev/null: every pin would warn "Not a directory" for the
 * life of the process). A missing directory passes: it is made at the
 * first snapshot (docs/SESSION.md). */
bool cli_pin_cache_check(const char *cmd, const char *dir);
/* Prints "tern-cli: MESSAGE" on one line to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An engine error's message in the user's language (docs/TRANSLATING.md), in
 * a buffer of the calling thread, valid until its next call. */
const char *cli_engine_message(const tn_error *err);
/* tn_session_params.warn for tern-cli's sessions: the engine's warning as
 * "tern: MESSAGE" on stderr, in the user's language. */
void cli_engine_warning(const tn_error *warning, void *user);
/* A chat-template warning of the engine (tn_model_chat_kind,
 * tn_chat_template_detect: static English text, its own msgid) translated. */
const char *cli_engine_text(const char *english);
/* When the compute backend asked for by name (TERN_BACKEND) refused to
 * open (the model then runs on the CPU): "xrt: REASON; using cpu" on
 * stderr. Nothing otherwise, also not for one "auto" only tried. */
void cli_backend_note(const tn_model *m);
/* The user's LC_MESSAGES and tern-cli's translations ($TERN_LOCALEDIR, else
 * the installed ones). */
void cli_i18n_init(void);
/* Whether S starts as a decimal number does (a sign, then a digit, or a
 * '.' when real): no white space, no hex ("0x10"), no "inf" or "nan". The
 * parsers below and the commands' own take only such text. */
bool cli_number_text(const char *s, bool real);
/* OPT's value S as a decimal number within [lo, hi]; false (after printing
 * which option wants what) otherwise. */
bool cli_parse_long(const char *opt, const char *s, long lo, long hi, long *out);
bool cli_parse_double(const char *opt, const char *s, double lo, double hi, double *out);
/* S (n bytes) as a JSON string; invalid UTF-8 becomes U+FFFD, a C1 control
 * \u00NN. */
void cli_json_string(FILE *f, const char *s, size_t n);
/* A piece of a streamed answer (or of its thinking) on stdout, flushed
 * (false: it could not be written, see cli_stdout_error):
 * as it is to a pipe or a file; to a terminal with every control but
 * newline and tab shown escaped ("\x1b", tn_text_stream), a character cut
 * between pieces held until it is whole. cli_answer_end ends the answer
 * (shows what is held); call it before anything else goes to the terminal
 * (the stats line, the CLI's own "<think>"). */
bool cli_answer_write(const char *s, size_t n);
void cli_answer_end(void);

/* A command's --help, printed by `print` and written to stdout with every
 * line wider than CLI_HELP_COLUMNS broken at a space (or between two wide
 * characters), the rest indented under the line's first words: a terminal
 * would break it mid-word, and a translation may be longer than the
 * English that was wrapped by hand. */
#define CLI_HELP_COLUMNS 80

/* Why a file could not be written, in words a user can act on: a full disk
 * (ENOSPC), a used-up quota (EDQUOT), a file past what the file system or
 * ulimit -f allows (EFBIG); strerror's for any other errno. */
const char *cli_write_cause(int e);
void cli_print_help(void (*print)(FILE *out));
void cli_write_wrapped(FILE *out, const char *text, size_t len);
/* 0 while everything written to stdout so far reached it (flushed here);
 * else the errno of the first write that failed (EIO when stdio kept none),
 * from then on. cli_answer_write returns whether it is 0: a command that
 * streams stops at the first failed write, as what it would go on to
 * compute reaches no one (`tern-cli run -n 4000 > full-disk/answer`). */
int cli_stdout_error(void);
/* A whole text that a model file chose (a token's text, a detokenized or
 * rendered prompt: tokenize --pieces, detokenize, template) on stdout, by
 * cli_answer_write's rule: exact to a pipe or a file, on a terminal every
 * control but newline and tab shown escaped. Not flushed. */
void cli_model_text_write(const char *s, size_t n);
/* A name from a file or a server (a catalog's label, a state file's tag)
 * as one line to print: controls, bidi controls and invisible characters
 * escaped as tn_text_one_line shows them ("\x1b", "\u202e"). Freed by the
 * caller; NULL when out of memory. */
char *cli_shown(const char *s);
/* Monotonic seconds. */
double cli_now_s(void);
/* Median, min and max of v (n values; sorts v in place). */
typedef struct cli_spread {
    double median, min, max;
} cli_spread;
cli_spread cli_spread_of(double *v, int n);

#endif
