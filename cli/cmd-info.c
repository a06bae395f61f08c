/* tern-cli info: what a GGUF file holds, and whether Tern can read it. */
#include "cli.h"
#include "tn-text.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Metadata comes from the file: control characters, C0 and C1 (U+0080..
 * U+009F, which terminals read as escape sequences: U+009B is CSI), bytes
 * that are not UTF-8, and the bidi controls and invisible characters that
 * would make a key's line read as another (tn_text_hidden_char) are printed
 * escaped, never raw. */
static void print_str(tn_str s, size_t max) {
    size_t n = s.len < max ? (size_t)s.len : max;
    const unsigned char *p = (const unsigned char *)s.ptr;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t len = tn_utf8_char_len((const char *)p + i, n - i);
        uint32_t cp;
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f || len == 0)
            printf("\\x%02x", c);
        else if (len == 2 && c == 0xc2 && p[i + 1] < 0xa0)
            printf("\\u%04x", p[i + 1]);
        else if ((cp = tn_text_hidden_char((const char *)p + i, len)) != 0)
            printf(cp > 0xffff ? "\\U%08" PRIx32 : "\\u%04" PRIx32, cp);
        else
            fwrite(p + i, 1, len, stdout);
        i += len ? len : 1;
    }
    if (s.len > max)
        printf("... (%" PRIu64 " bytes)", s.len);
}

static void print_value(const tn_gguf_value *v) {
    switch (v->type) {
    case TN_GGUF_U8: case TN_GGUF_U16: case TN_GGUF_U32: case TN_GGUF_U64:
        printf("%" PRIu64, v->v.u64);
        break;
    case TN_GGUF_I8: case TN_GGUF_I16: case TN_GGUF_I32: case TN_GGUF_I64:
        printf("%" PRId64, v->v.i64);
        break;
    case TN_GGUF_F32: case TN_GGUF_F64: printf("%g", v->v.f64); break;
    case TN_GGUF_BOOL: fputs(v->v.u64 ? "true" : "false", stdout); break;
    case TN_GGUF_STRING:
        putchar('"');
        print_str(v->v.str, 120);
        putchar('"');
        break;
    case TN_GGUF_ARRAY: {
        printf("[%" PRIu64 " items] ", v->v.arr.n);
        uint64_t show = v->v.arr.n < 4 ? v->v.arr.n : 4;
        for (uint64_t i = 0; i < show; i++) {
            if (i)
                fputs(", ", stdout);
            if (v->v.arr.items)
                print_value(&v->v.arr.items[i]);
            else if (v->v.arr.type == TN_GGUF_F32 || v->v.arr.type == TN_GGUF_F64)
                printf("%g", tn_gguf_arr_float(v, i));
            else
                printf("%" PRId64, tn_gguf_arr_int(v, i));
        }
        if (show < v->v.arr.n)
            fputs(", ...", stdout);
        break;
    }
    default: break;
    }
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool tensors = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf(_("usage: tern-cli info [--no-tensors] MODEL.gguf\n"));
            fputs(_("\nPrints the file's GGUF header, each metadata key with its value (long\n"
                    "strings and arrays cut short) and each tensor's name, type, shape and\n"
                    "bytes; --no-tensors leaves the tensors out. Text from the file shows its\n"
                    "control and invisible characters escaped (\\x1b, \\u202e).\n"),
                  stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(argv[i], "--no-tensors")) {
            tensors = false;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error(_("info: unknown option '%s'"), argv[i]);
            return CLI_EXIT_USAGE;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        cli_error(_("info: no file given (usage: tern-cli info MODEL.gguf)"));
        return CLI_EXIT_USAGE;
    }
    tn_gguf *g = NULL;
    tn_error err;
    if (tn_gguf_open(path, &g, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    /* The path as an error names it (the engine's messages, run): one
     * line, its controls and hidden characters escaped (cli_shown). */
    char *shown = cli_shown(path);
    printf("%s: GGUF v%u, %" PRIu64 " bytes, %" PRId64 " metadata keys, %" PRId64
           " tensors, alignment %" PRIu64,
           shown ? shown : "?", tn_gguf_version(g), tn_gguf_file_size(g), tn_gguf_n_kv(g),
           tn_gguf_n_tensors(g), tn_gguf_alignment(g));
    if (tn_gguf_n_parts(g) > 1)
        printf(", split in %d parts (bytes and tensors of all parts)", tn_gguf_n_parts(g));
    putchar('\n');
    free(shown);
    /* Stopped at the first write that failed (main says so). */
    for (int64_t i = 0; i < tn_gguf_n_kv(g) && !ferror(stdout); i++) {
        fputs("  ", stdout);
        print_str(tn_gguf_kv_key(g, i), 200);
        fputs(" = ", stdout);
        print_value(tn_gguf_kv_value(g, i));
        putchar('\n');
    }
    if (tensors) {
        for (int64_t i = 0; i < tn_gguf_n_tensors(g) && !ferror(stdout); i++) {
            const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
            fputs("  tensor ", stdout);
            print_str(t->name, 200);
            printf(" %s [", tn_type_name(t->type));
            for (uint32_t d = 0; d < t->n_dims; d++)
                printf("%s%" PRIu64, d ? ", " : "", t->ne[d]);
            printf("] %" PRIu64 " bytes\n", t->nbytes);
        }
    }
    tn_gguf_close(g);
    return CLI_EXIT_OK;
}
