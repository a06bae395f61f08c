/* tern-cli doctor: what this machine can run, line by line (engine/doctor.c),
 * and whether the requested backend can run (the exit status). */
#include "cli.h"

#include "tn-doctor.h"
#include "tn-xrt.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out) {
    fputs(_("usage: tern-cli doctor [-m MODEL] [--backend auto|cpu|xrt] [--quick]\n"
            "                       [--xclbins DIR]\n"
            "\n"
            "Checks what Tern needs on this machine and prints one line per check: OK,\n"
            "or the problem and its fix. The CPU: its model, the kernel family, the memory\n"
            "bandwidth and, with -m, the model's decode bound. The NPU (XRT backend): the\n"
            "device node and who may open it, the amdxdna driver and firmware, the kernel,\n"
            "the memlock limit, XRT and whether it sees the device, the kernel manifest.\n"
            "\n"
            "  -m MODEL         a model file or installed tag: its decode bound, and the\n"
            "                   memory the NPU would pin for it\n"
            "  --backend B      the backend to check for the exit status (default auto)\n"
            "  --quick          skip the bandwidth measurement (seconds, up to 1 GiB)\n"
            "  --xclbins DIR    the kernel manifest's folder (default: Tern's own)\n"
            "\n"
            "Exit status: 0 when the requested backend can run (auto: always, as the CPU\n"
            "does), 3 when it cannot, 1 for a usage error, 2 when the model does not load.\n"
            "$TERN_DOCTOR_ROOT makes the checks read a fake device tree instead of / (the\n"
            "tests' trees: docs/DOCTOR.md).\n"),
          out);
}

/* Tern's xclbins folder: $TERN_XCLBIN_DIR, else PREFIX/share/tern/xclbins
 * beside the installed executable (PREFIX/bin), else BUILD/xclbins beside
 * BUILD/cli (a build tree: xclbins/meson.build copies the manifest there).
 * NULL when none exists. */
static const char *xclbin_dir(char *buf, size_t cap) {
    const char *env = getenv("TERN_XCLBIN_DIR");
    if (env && *env)
        return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    static const char *const rel[] = {"/../share/tern/xclbins", "/../xclbins"};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        snprintf(buf, cap, "%s%s", exe, rel[i]);
        char manifest[PATH_MAX + 64];
        snprintf(manifest, sizeof manifest, "%s/manifest.json", buf);
        if (access(manifest, F_OK) == 0) {
            char *real = realpath(buf, NULL); /* "BUILD/xclbins", not "BUILD/cli/../xclbins" */
            if (real)
                snprintf(buf, cap, "%s", real);
            free(real);
            return buf;
        }
    }
    return NULL;
}

static const char *status_word(int status) {
    switch (status) {
    case TN_DOCTOR_OK:
        return _("OK");
    case TN_DOCTOR_FAIL:
        return _("FAIL");
    default:
        return _("INFO");
    }
}

/* Terminal columns of a UTF-8 string: CJK characters take two. */
static int columns(const char *s) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xc0) == 0x80)
            continue;
        n += *p >= 0xe1 ? 2 : 1; /* 3- and 4-byte sequences start at U+1000 */
    }
    return n;
}

int cmd_doctor(int argc, char **argv) {
    const char *model_arg = NULL, *backend = "auto", *xclbins = NULL;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--quick")) {
            quick = true;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--backend") ||
                   !strcmp(a, "--xclbins")) {
            if (i + 1 >= argc) {
                cli_error(_("doctor: %s needs a value"), a);
                return CLI_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--backend"))
                backend = v;
            else if (!strcmp(a, "--xclbins"))
                xclbins = v;
            else
                model_arg = v;
        } else {
            cli_error(_("doctor: unknown option '%s' (see 'tern-cli doctor --help')"), a);
            return CLI_EXIT_USAGE;
        }
    }
    if (strcmp(backend, "auto") && strcmp(backend, "cpu") && strcmp(backend, "xrt")) {
        cli_error(_("doctor: --backend must be auto, cpu or xrt, not '%s'"), backend);
        return CLI_EXIT_USAGE;
    }

    /* The file is enough (sizes and names): no load, no repacked copy. */
    tn_gguf *model = NULL;
    if (model_arg) {
        char buf[4096];
        const char *path = cli_resolve_model(model_arg, buf, sizeof buf);
        if (!path)
            return CLI_EXIT_BAD_INPUT;
        tn_error err;
        memset(&err, 0, sizeof err);
        if (tn_gguf_open(path, &model, &err) != TN_OK) {
            cli_error("%s", cli_engine_message(&err));
            return CLI_EXIT_BAD_INPUT;
        }
    }

    char dirbuf[PATH_MAX + 32];
    const char *root = getenv("TERN_DOCTOR_ROOT");
    if (root && !*root)
        root = NULL;
    tn_doctor_params p = {
        .root = root,
        .xclbin_dir = xclbins ? xclbins : xclbin_dir(dirbuf, sizeof dirbuf),
        .model = model,
        .measure_bandwidth = !quick,
    };
    tn_doctor_report *r = calloc(1, sizeof *r);
    if (!r) {
        cli_error(_("doctor: out of memory"));
        tn_gguf_close(model);
        return CLI_EXIT_BAD_INPUT;
    }
    tn_doctor_run(&p, r);

    /* The status words in one column as wide as the widest translation. */
    int width = 0;
    for (int st = TN_DOCTOR_OK; st <= TN_DOCTOR_FAIL; st++)
        if (columns(status_word(st)) > width)
            width = columns(status_word(st));
    int group = -1;
    for (int i = 0; i < r->n_lines; i++) {
        const tn_doctor_line *l = &r->lines[i];
        if (l->group != group) {
            group = l->group;
            puts(group == TN_DOCTOR_CPU ? _("CPU backend") : _("NPU (XRT backend)"));
        }
        const char *word = status_word(l->status);
        printf("  %s%*s  %s\n", word, width - columns(word), "", cli_engine_message(&l->text));
        if (l->fix.message[0])
            printf("  %*s  %s %s\n", width, "", _("fix:"), cli_engine_message(&l->fix));
    }

    int rc = CLI_EXIT_OK;
    tn_error why;
    memset(&why, 0, sizeof why);
    /* The backend's own open decides, as run's --backend does. */
    bool xrt_runs = tn_xrt_open(root, p.xclbin_dir, NULL, &why) == TN_OK && r->npu_ok;
    if (!strcmp(backend, "xrt")) {
        if (xrt_runs) {
            printf(_("backend xrt: can run\n"));
        } else {
            printf(_("backend xrt: cannot run: %s\n"), cli_engine_message(&why));
            rc = CLI_EXIT_BACKEND;
        }
    } else if (!r->cpu_ok) {
        printf(_("backend cpu: cannot run\n"));
        rc = CLI_EXIT_BACKEND;
    } else if (!strcmp(backend, "cpu") || !xrt_runs) {
        if (!strcmp(backend, "auto"))
            printf(_("backend auto: the CPU (xrt: %s)\n"), cli_engine_message(&why));
        else
            printf(_("backend cpu: can run\n"));
    } else {
        printf(_("backend auto: xrt\n"));
    }
    free(r);
    tn_gguf_close(model);
    return rc;
}
