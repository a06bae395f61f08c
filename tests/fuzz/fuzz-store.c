/* libFuzzer target for the model manager's two files of record
 * (manager/tern-catalog.c, manager/tern-model-store.c): the catalog of
 * models (data/catalog/models.json, or any file TERN_CATALOG names) and the
 * store's installed.json (written by Tern, but a file anyone may edit).
 *
 * The first input byte picks what the rest is; bit 0:
 *   0: a catalog (tern_catalog_new_from_data). Promises: a catalog or an
 *      error, never both or neither; an error of the manager's domain, one
 *      line of UTF-8 without control characters (the file's names are
 *      shown escaped); in a catalog, every tag is found by its name and
 *      by its model file's store path, every package of it by its id, and
 *      its sizes and support are asked without harm.
 *   1: installed.json, in a store of its own in a temporary folder
 *      (tern_model_store_new reads it from there). Promises: a store or an
 *      error, as above (its keys shown escaped); every tag listed answers
 *      its queries; removing the first tag writes a file that reads back
 *      (what Tern writes it reads), with the other tags, labels and model
 *      paths as they were.
 *
 * Built from the manager's source with GLib, libsoup and json-glib (the
 * fuzz build leaves the manager out).
 *
 * Seeds: tests/fuzz/corpus/store/.
 * Run:   build-fuzz/tests/fuzz/fuzz-store tests/fuzz/corpus/store
 */
#include "tern-catalog.h"
#include "tern-manager.h"
#include "tern-model-store.h"
#include "fuzz-promise.h"

#include <glib/gstdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One line a user reads: UTF-8, no C0 control character, no DEL. */
static bool one_line(const char *m) {
    if (!g_utf8_validate(m, -1, NULL))
        return false;
    for (const unsigned char *p = (const unsigned char *)m; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static void check_error(const GError *e) {
    PROMISE(e->domain == TERN_MANAGER_ERROR);
    if (!one_line(e->message))
        fprintf(stderr, "not one line: %s\n", e->message);
    PROMISE(one_line(e->message));
}

static void catalog(const char *data, size_t size) {
    GError *e = NULL;
    TernCatalog *c = tern_catalog_new_from_data(data, (gssize)size, "fuzz.json", &e);
    PROMISE((c == NULL) != (e == NULL));
    if (!c) {
        check_error(e);
        g_error_free(e);
        return;
    }
    GPtrArray *tags = tern_catalog_get_tags(c);
    for (guint i = 0; i < tags->len; i++) {
        const TernCatalogTag *t = tags->pdata[i];
        PROMISE(t->tag && t->family && t->packages[TERN_PACKAGE_ROLE_BASE] && t->requires);
        PROMISE(tern_catalog_find_tag(c, t->tag) == t);
        for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++) {
            const TernCatalogPackage *p = t->packages[r];
            if (!p)
                continue;
            PROMISE(tern_catalog_find_package(c, p->id) == p);
            PROMISE(p->files->len > 0);
            (void)tern_catalog_package_size(p);
        }
        (void)tern_catalog_tag_size(t);
        (void)tern_catalog_tag_size_known(t);
        char *why = tern_catalog_tag_unsupported_reason(t);
        PROMISE((why == NULL) == tern_catalog_tag_supported(t));
        g_free(why);
        const TernCatalogPackage *base = t->packages[TERN_PACKAGE_ROLE_BASE];
        const TernCatalogFile *f = base->files->pdata[0];
        char *path = g_build_filename("/fuzz/packages", base->id, f->name, NULL);
        const TernCatalogTag *by_file = tern_catalog_find_tag_for_file(c, path);
        PROMISE(!by_file || by_file->packages[TERN_PACKAGE_ROLE_BASE] == base);
        g_free(path);
    }
    g_object_unref(c);
}

static char *work;

static void remove_tree(const char *path) {
    GDir *d = g_dir_open(path, 0, NULL);
    if (d) {
        const char *name;
        while ((name = g_dir_read_name(d)) != NULL) {
            char *child = g_build_filename(path, name, NULL);
            remove_tree(child);
            g_free(child);
        }
        g_dir_close(d);
        g_rmdir(path);
    } else {
        g_unlink(path);
    }
}

/* libFuzzer ends with exit(): the store's folder goes with it, not left in
 * /dev/shm by every run of make test. */
static void remove_work(void) {
    if (work)
        remove_tree(work);
}

static char **tag_list(TernModelStore *s) {
    return tern_model_store_list_tags(s);
}

static void store(const char *data, size_t size) {
    if (!work) {
        /* Memory-backed where there is one: the store's writes sync. */
        const char *base =
            g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) ? "/dev/shm" : g_get_tmp_dir();
        char *tmpl = g_build_filename(base, "fuzz-store-XXXXXX", NULL);
        work = g_mkdtemp(tmpl);
        if (!work)
            return;
        atexit(remove_work);
    }
    char *state = g_build_filename(work, "installed.json", NULL);
    FILE *f = fopen(state, "wb");
    if (!f) {
        g_free(state);
        return;
    }
    fwrite(data, 1, size, f);
    fclose(f);

    GError *e = NULL;
    TernModelStore *s = tern_model_store_new(work, &e);
    PROMISE((s == NULL) != (e == NULL));
    if (!s) {
        check_error(e);
        g_error_free(e);
        g_unlink(state);
        g_free(state);
        return;
    }
    char **tags = tag_list(s);
    const guint n = g_strv_length(tags);
    char **labels = g_new0(char *, n + 1);
    char **paths = g_new0(char *, n + 1);
    for (guint i = 0; i < n; i++) {
        PROMISE(tern_model_store_has_tag(s, tags[i]));
        labels[i] = g_strdup(tern_model_store_get_label(s, tags[i]));
        (void)tern_model_store_get_state(s, tags[i], NULL);
        (void)tern_model_store_is_local(s, tags[i]);
        (void)tern_model_store_get_single_turn(s, tags[i]);
        (void)tern_model_store_get_tag_size(s, tags[i]);
        for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
            g_free(tern_model_store_get_path(s, tags[i], (TernPackageRole)r));
        paths[i] = tern_model_store_get_path(s, tags[i], TERN_PACKAGE_ROLE_BASE);
        gboolean on = FALSE;
        g_free(tern_model_store_get_draft_spec(s, tags[i], &on));
    }
    if (n > 0) {
        GError *re = NULL;
        guint64 freed = 0;
        const gboolean removed = tern_model_store_remove(s, tags[0], NULL, &freed, &re);
        if (!removed)
            fprintf(stderr, "removing %s: %s\n", tags[0], re->message);
        PROMISE(removed && re == NULL);
        GError *le = NULL;
        TernModelStore *again = tern_model_store_new(work, &le);
        if (!again)
            fprintf(stderr, "the store Tern wrote does not read back: %s\n", le->message);
        PROMISE(again != NULL);
        char **left = tag_list(again);
        PROMISE(g_strv_length(left) == n - 1);
        for (guint i = 1; i < n; i++) {
            PROMISE(g_strv_contains((const char *const *)left, tags[i]));
            PROMISE(g_strcmp0(tern_model_store_get_label(again, tags[i]), labels[i]) == 0);
            char *p = tern_model_store_get_path(again, tags[i], TERN_PACKAGE_ROLE_BASE);
            PROMISE(g_strcmp0(p, paths[i]) == 0);
            g_free(p);
        }
        g_strfreev(left);
        g_object_unref(again);
    }
    for (guint i = 0; i < n; i++) {
        g_free(labels[i]);
        g_free(paths[i]); /* NULL where a tag has no model file */
    }
    g_free(labels);
    g_free(paths);
    g_strfreev(tags);
    g_object_unref(s);
    g_unlink(state);
    g_free(state);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    if (data[0] & 1)
        store((const char *)data + 1, size - 1);
    else
        catalog((const char *)data + 1, size - 1);
    return 0;
}
