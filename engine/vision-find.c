/* Which vision projectors sit beside a model: one rule for tern-cli run,
 * tern-cli serve and the app, the way the ecosystem ships them (llama.cpp,
 * LM Studio, Ollama imports put a "*mmproj*.gguf" next to the model). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strcasestr */
#endif
#include "tern.h"
#include "tn-internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_projector_name(const char *name) {
    const size_t n = strlen(name);
    return strcasestr(name, "mmproj") && n >= 5 && !strcasecmp(name + n - 5, ".gguf");
}

static char *path_in(const char *dir, const char *name) {
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    return p;
}

int tn_vision_projectors_beside(const char *model_path, char **first, char **second,
                                tn_error *err) {
    if (first)
        *first = NULL;
    if (second)
        *second = NULL;
    if (!model_path || !*model_path)
        return tn_fail(err, TN_ERR_INVALID, "no model path to look beside");
    const char *slash = strrchr(model_path, '/');
    char *dir = slash ? strndup(model_path, (size_t)(slash - model_path) + (slash == model_path))
                      : strdup(".");
    if (!dir)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    if (!d) {
        const int saved = errno;
        tn_fail(err, TN_ERR_IO, "%s: cannot look for a vision projector there (%s)", dir,
                strerror(saved));
        free(dir);
        return TN_ERR_IO;
    }
    /* The first two in name order, not the directory's: the same files give
     * the same answer and the same message on every file system. */
    int found = 0;
    char *lo = NULL, *hi = NULL;
    int rc = TN_OK;
    for (struct dirent *e; rc == TN_OK && (e = readdir(d));) {
        if (!is_projector_name(e->d_name))
            continue;
        found++;
        char *name = strdup(e->d_name);
        if (!name) {
            rc = TN_ERR_NOMEM;
        } else if (!lo || strcmp(name, lo) < 0) {
            free(hi);
            hi = lo;
            lo = name;
        } else if (!hi || strcmp(name, hi) < 0) {
            free(hi);
            hi = name;
        } else {
            free(name);
        }
    }
    closedir(d);
    if (rc == TN_OK && first && lo && !(*first = path_in(dir, lo)))
        rc = TN_ERR_NOMEM;
    if (rc == TN_OK && second && hi && !(*second = path_in(dir, hi)))
        rc = TN_ERR_NOMEM;
    free(lo);
    free(hi);
    free(dir);
    if (rc != TN_OK) {
        if (first) {
            free(*first);
            *first = NULL;
        }
        return tn_fail(err, rc, "out of memory");
    }
    return found;
}
