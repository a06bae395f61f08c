/* --backend auto|cpu|xrt and --no-fallback for run and bench, decided before
 * the model loads: the forward pass has one backend today (the CPU), and the
 * XRT backend's open (engine/xrt) says why it cannot run. */
#include "cli.h"

#include "tn-xrt.h"

#include <string.h>

int cli_backend_take(int *argc, char **argv) {
    const char *backend = "auto";
    bool strict = false;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--backend")) {
            if (i + 1 >= *argc) {
                cli_error(_("--backend needs a value: auto, cpu or xrt"));
                return CLI_EXIT_USAGE;
            }
            backend = argv[++i];
            continue;
        }
        if (!strcmp(a, "--no-fallback")) {
            strict = true;
            continue;
        }
        argv[out++] = argv[i];
    }
    *argc = out;
    argv[out] = NULL;
    if (strcmp(backend, "auto") && strcmp(backend, "cpu") && strcmp(backend, "xrt")) {
        cli_error(_("--backend must be auto, cpu or xrt, not '%s'"), backend);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(backend, "xrt"))
        return 0; /* auto: the CPU, as long as the XRT backend cannot run */
    tn_error err;
    memset(&err, 0, sizeof err);
    if (tn_xrt_open(NULL, NULL, NULL, &err) == TN_OK)
        return 0;
    if (strict) {
        cli_error(_("xrt: %s"), cli_engine_message(&err));
        return CLI_EXIT_BACKEND;
    }
    fprintf(stderr, _("tern-cli: xrt: %s; using the CPU\n"), cli_engine_message(&err));
    return 0;
}
