/* Speculative decoding on the command line: --spec and --draft-max, shared by
 * tern-cli run and tern-cli bench. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool starts(const char *s, const char *prefix) {
    return !strncmp(s, prefix, strlen(prefix));
}

int cli_spec_parse_arg(cli_spec *s, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const bool spec = !strcmp(a, "--spec"), dmax = !strcmp(a, "--draft-max");
    if (!spec && !dmax)
        return 0;
    if (*i + 1 >= argc) {
        cli_error(_("%s needs a value (see --help)"), a);
        return -1;
    }
    const char *v = argv[++*i];
    if (spec) {
        if (strcmp(v, "none") && strcmp(v, "lookup") &&
            !((starts(v, "draft:") || starts(v, "dflash:") || starts(v, "mtp:")) &&
              strchr(v, ':')[1])) {
            cli_error(_("--spec needs none, lookup, draft:PATH, dflash:PATH or mtp:PATH, not "
                        "'%s'"),
                      v);
            return -1;
        }
        s->spec = v;
        return 1;
    }
    long n;
    if (!cli_parse_long("--draft-max", v, 1, TN_SPEC_MAX_DRAFT, &n))
        return -1;
    s->draft_max = n;
    return 1;
}

bool cli_spec_on(const cli_spec *s) { return s->spec && strcmp(s->spec, "none"); }

int cli_spec_make(const cli_spec *s, const tn_model *target, int n_threads, tn_drafter **out) {
    *out = NULL;
    if (!cli_spec_on(s))
        return CLI_EXIT_OK;
    tn_drafter_params p = tn_drafter_default_params();
    p.draft_max = (int32_t)s->draft_max;
    p.n_threads = n_threads;
    tn_error err = {0};
    int rc;
    if (!strcmp(s->spec, "lookup"))
        rc = tn_drafter_new_lookup(p, out, &err);
    else if (starts(s->spec, "draft:"))
        rc = tn_drafter_new_model(target, s->spec + 6, p, out, &err);
    else if (starts(s->spec, "mtp:"))
        rc = tn_drafter_new_mtp(target, s->spec + 4, p, out, &err);
    else
        rc = tn_drafter_new_dflash(target, s->spec + 7, p, out, &err);
    if (rc != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return rc == TN_ERR_INVALID && !strcmp(s->spec, "lookup") ? CLI_EXIT_USAGE
                                                                  : CLI_EXIT_BAD_INPUT;
    }
    return CLI_EXIT_OK;
}

void cli_spec_print_stats(FILE *f, const tn_session_stats *st) {
    fprintf(f, " | drafted %d, accepted %d (%.0f%%), %.2f per verify step", st->drafted,
            st->accepted, st->drafted ? 100.0 * st->accepted / st->drafted : 0.0,
            st->verify_steps ? (double)st->accepted / st->verify_steps : 0.0);
}

void cli_spec_json_stats(FILE *f, const tn_session_stats *st) {
    fprintf(f, ",\"drafted\":%d,\"accepted\":%d,\"verify_steps\":%d", st->drafted, st->accepted,
            st->verify_steps);
}
