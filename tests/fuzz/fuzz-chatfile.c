/* libFuzzer target for the app's chat files (app/tern-chat.c): what
 * tern_chat_load reads from ~/.local/share/tern/chats, or from a file the
 * user opens. The input is the file.
 * Promises: a chat or an error, never both or neither; a chat read is
 * saved, and the saved file reads back to the same messages (role, text,
 * picture count), id, mode, title and draft.
 * Built from the app's source with GLib, json-glib and the picture reader;
 * tern_read_file and tern_engine_error_text (the app's, in
 * tern-engine-worker.c, beside the engine worker) are given here on top of
 * libtern, as there (the English message: no catalog is bound).
 *
 * Seeds: tests/fuzz/corpus/chatfile/.
 * Run:   build-fuzz/tests/fuzz/fuzz-chatfile tests/fuzz/corpus/chatfile
 */
#include "tern-chat.h"
#include "tern.h"
#include "fuzz-promise.h"

#include <glib/gstdio.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

gboolean tern_read_file(const char *path, guint64 max, char **out, gsize *len, GError **error);
char *tern_engine_error_text(const tn_error *err);

char *tern_engine_error_text(const tn_error *err) {
    return g_strdup(err->message);
}

gboolean tern_read_file(const char *path, guint64 max, char **out, gsize *len, GError **error) {
    tn_error err = {0};
    char *data = NULL;
    size_t n = 0;
    *out = NULL;
    if (tn_read_file(path, max, &data, &n, &err) != TN_OK) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, err.message);
        return FALSE;
    }
    *out = data;
    if (len)
        *len = n;
    return TRUE;
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!work) {
        /* Memory-backed where there is one: the save below syncs. */
        const char *base = g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) ? "/dev/shm" : g_get_tmp_dir();
        char *tmpl = g_build_filename(base, "fuzz-chatfile-XXXXXX", NULL);
        work = g_mkdtemp(tmpl);
        if (!work)
            return 0;
    }
    char *in_dir = g_build_filename(work, "in", NULL);
    char *out_dir = g_build_filename(work, "out", NULL);
    char *path = g_build_filename(in_dir, "chat.json", NULL);
    g_mkdir_with_parents(in_dir, 0700);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, size, f);
        fclose(f);
    }
    GError *e = NULL;
    TernChat *chat = tern_chat_load(path, &e);
    PROMISE((chat == NULL) != (e == NULL));
    if (chat) {
        GError *se = NULL;
        PROMISE(tern_chat_save(chat, out_dir, &se));
        char *name = g_strconcat(tern_chat_get_id(chat), ".json", NULL);
        char *again_path = g_build_filename(out_dir, name, NULL);
        GError *le = NULL;
        TernChat *again = tern_chat_load(again_path, &le);
        if (!again)
            fprintf(stderr, "the saved chat does not read back: %s\n", le->message);
        PROMISE(again != NULL);
        PROMISE(!strcmp(tern_chat_get_id(again), tern_chat_get_id(chat)));
        PROMISE(g_strcmp0(tern_chat_get_mode(again), tern_chat_get_mode(chat)) == 0);
        PROMISE(g_strcmp0(tern_chat_get_title(again), tern_chat_get_title(chat)) == 0);
        PROMISE(g_strcmp0(tern_chat_get_draft(again), tern_chat_get_draft(chat)) == 0);
        PROMISE(tern_chat_get_n_messages(again) == tern_chat_get_n_messages(chat));
        for (guint i = 0; i < tern_chat_get_n_messages(chat); i++) {
            TernMessage *a = tern_chat_get_message(chat, i), *b = tern_chat_get_message(again, i);
            PROMISE(g_strcmp0(a->role, b->role) == 0);
            PROMISE(g_strcmp0(a->text, b->text) == 0);
            PROMISE((a->images ? a->images->len : 0) == (b->images ? b->images->len : 0));
        }
        g_object_unref(again);
        g_free(again_path);
        g_free(name);
        g_object_unref(chat);
    } else {
        g_error_free(e);
    }
    remove_tree(in_dir);
    remove_tree(out_dir);
    g_free(path);
    g_free(in_dir);
    g_free(out_dir);
    return 0;
}
