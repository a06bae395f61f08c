/* tern-cli list / pull / remove / check / import / search: the model manager from the
 * command line, and the resolver that lets `-m TAG` name an installed model.
 * Without the manager (built without libsoup/json-glib) the commands say so
 * and exit 2; the resolver then passes its argument through. */
#include "cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef TERN_HAVE_MANAGER

#include <glib-unix.h>
#include <json-glib/json-glib.h>

#include "tern-manager.h"
#include "tern-hub.h"

/* Options every model command takes. */
typedef struct {
    const char *command;
    const char *catalog;  /* --catalog PATH; else TERN_CATALOG; else the installed one */
    bool json;
    const char *name;     /* import --name */
    const char *arg;      /* the positional argument */
    bool help;
} models_opts;

static int parse_opts(int argc, char **argv, models_opts *o, bool want_arg, bool allow_json,
                      bool allow_name) {
    memset(o, 0, sizeof *o);
    o->command = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = true;
        } else if (!strcmp(a, "--catalog") || (allow_name && !strcmp(a, "--name"))) {
            if (i + 1 >= argc) {
                cli_error(_("%s: %s needs a value"), o->command, a);
                return CLI_EXIT_USAGE;
            }
            if (!strcmp(a, "--catalog"))
                o->catalog = argv[++i];
            else
                o->name = argv[++i];
        } else if (!strncmp(a, "--catalog=", 10)) {
            o->catalog = a + 10;
        } else if (allow_json && !strcmp(a, "--json")) {
            o->json = true;
        } else if (a[0] == '-' && a[1]) {
            cli_error(_("%s: unknown option '%s' (see 'tern-cli %s --help')"), o->command, a, o->command);
            return CLI_EXIT_USAGE;
        } else if (want_arg && !o->arg) {
            o->arg = a;
        } else {
            cli_error(_("%s: unexpected argument '%s'"), o->command, a);
            return CLI_EXIT_USAGE;
        }
    }
    /* An empty tag ('') is no tag: "remove:  is not installed" said nothing. */
    if (want_arg && (!o->arg || !*o->arg) && !o->help) {
        cli_error(_("%s: which model? (usage: tern-cli %s TAG; 'tern-cli list' shows them)"), o->command,
                  o->command);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

static TernCatalog *load_catalog(const models_opts *o, bool quiet) {
    g_autofree char *path = o->catalog ? g_strdup(o->catalog) : tern_catalog_default_path();
    g_autoptr(GError) error = NULL;
    TernCatalog *catalog = tern_catalog_new_from_file(path, &error);
    if (!catalog && !quiet)
        cli_error("%s: %s", o->command, error->message);
    return catalog;
}

static TernModelStore *open_store(const char *command) {
    g_autoptr(GError) error = NULL;
    TernModelStore *store = tern_model_store_new(NULL, &error);
    if (!store)
        cli_error("%s: %s", command, error->message);
    return store;
}

static char *size_text(guint64 bytes) {
    return bytes ? tern_manager_format_size(bytes) : g_strdup(_("size unknown"));
}

static char *tag_size_text(const TernCatalogTag *tag) {
    return tern_catalog_tag_size_known(tag) ? size_text(tern_catalog_tag_size(tag)) : size_text(0);
}

/* A state in the user's language, for `list`'s table; --json keeps
 * tern_model_state_to_string's English words, which scripts compare. */
static const char *state_word(TernModelState state) {
    switch (state) {
    case TERN_MODEL_STATE_AVAILABLE: return _("available");
    case TERN_MODEL_STATE_INSTALLED: return _("installed");
    /* Translators: tern-cli list's state of a model whose files `tern-cli check` found damaged */
    case TERN_MODEL_STATE_BROKEN: return _("broken");
    /* Translators: tern-cli list's state of a partly downloaded model (when its size is not known) */
    case TERN_MODEL_STATE_PARTIAL: return _("partial");
    default: return tern_model_state_to_string(state);
    }
}

/* "available", "partial 40%", "installed", "broken", "needs Tern 0.3", "needs mtp support". */
static char *state_text(TernModelStore *store, const TernCatalogTag *tag) {
    TernModelState state = tern_model_store_get_state(store, tag->tag, tag);
    if (state == TERN_MODEL_STATE_AVAILABLE && !tern_catalog_tag_supported(tag))
        return tern_catalog_tag_unsupported_reason(tag);
    if (state == TERN_MODEL_STATE_PARTIAL) {
        guint64 total = tern_catalog_tag_size(tag);
        guint64 missing = tern_model_store_get_missing_bytes(store, tag);
        if (total > 0 && missing <= total)
            return g_strdup_printf(_("partial %d%%"), (int)(100.0 * (double)(total - missing) / (double)total));
    }
    return g_strdup(state_word(state));
}

/* JSON is UTF-8 and a file name any bytes: a path that is not UTF-8 (an
 * imported Latin-1 "mod\xe9l.gguf") is written as its file: URI, as
 * installed.json keeps it (docs/MODELS.md); its raw byte made the whole
 * output invalid JSON. */
static void json_add_path(JsonBuilder *b, const char *member, char *path) {
    json_builder_set_member_name(b, member);
    if (path && g_utf8_validate(path, -1, NULL)) {
        json_builder_add_string_value(b, path);
    } else if (path) {
        g_autofree char *uri = g_filename_to_uri(path, NULL, NULL);
        g_autofree char *valid = uri ? NULL : g_utf8_make_valid(path, -1);
        json_builder_add_string_value(b, uri ? uri : valid);
    } else {
        json_builder_add_null_value(b);
    }
    g_free(path);
}

static void list_json_tag(JsonBuilder *b, TernModelStore *store, const TernCatalogTag *tag) {
    TernModelState state = tern_model_store_get_state(store, tag->tag, tag);
    bool installed = state == TERN_MODEL_STATE_INSTALLED || state == TERN_MODEL_STATE_BROKEN;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "tag");
    json_builder_add_string_value(b, tag->tag);
    json_builder_set_member_name(b, "family");
    json_builder_add_string_value(b, tag->family->id);
    json_builder_set_member_name(b, "label");
    json_builder_add_string_value(b, tag->label);
    json_builder_set_member_name(b, "description");
    if (tag->description)
        json_builder_add_string_value(b, tag->description);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, tern_model_state_to_string(state));
    json_builder_set_member_name(b, "installed");
    json_builder_add_boolean_value(b, installed);
    json_builder_set_member_name(b, "local");
    json_builder_add_boolean_value(b, false);
    json_builder_set_member_name(b, "size");
    /* JSON's integers are signed: a saturated sum stays positive. */
    json_builder_add_int_value(b, (gint64)MIN(tern_catalog_tag_size(tag), (guint64)G_MAXINT64));
    json_builder_set_member_name(b, "download_size");
    json_builder_add_int_value(b, installed ? 0 : (gint64)MIN(tern_model_store_get_missing_bytes(store, tag),
                                                                 (guint64)G_MAXINT64));
    json_builder_set_member_name(b, "supported");
    json_builder_add_boolean_value(b, tern_catalog_tag_supported(tag));
    json_builder_set_member_name(b, "min_app_version");
    if (tag->min_app_version)
        json_builder_add_string_value(b, tag->min_app_version);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "context_length");
    json_builder_add_int_value(b, tag->context_length);
    json_builder_set_member_name(b, "flags");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "vision");
    json_builder_add_boolean_value(b, tag->vision);
    json_builder_set_member_name(b, "thinking");
    json_builder_add_boolean_value(b, tag->thinking);
    json_builder_set_member_name(b, "single_turn");
    json_builder_add_boolean_value(b, tag->single_turn);
    json_builder_set_member_name(b, "speculation");
    json_builder_add_boolean_value(b, tag->speculation);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "draft_kind");
    if (tag->packages[TERN_PACKAGE_ROLE_DRAFT])
        json_builder_add_string_value(b, tern_draft_kind_to_string(tag->draft_kind));
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "requires");
    json_builder_begin_array(b);
    for (guint i = 0; tag->requires[i]; i++)
        json_builder_add_string_value(b, tag->requires[i]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "packages");
    json_builder_begin_object(b);
    for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++) {
        json_builder_set_member_name(b, tern_package_role_to_string((TernPackageRole)r));
        if (tag->packages[r])
            json_builder_add_string_value(b, tag->packages[r]->id);
        else
            json_builder_add_null_value(b);
    }
    json_builder_end_object(b);
    json_add_path(b, "path", tern_model_store_get_path(store, tag->tag, TERN_PACKAGE_ROLE_BASE));
    json_add_path(b, "draft_path", tern_model_store_get_path(store, tag->tag, TERN_PACKAGE_ROLE_DRAFT));
    json_add_path(b, "vision_path", tern_model_store_get_path(store, tag->tag, TERN_PACKAGE_ROLE_VISION));
    json_builder_end_object(b);
}

/* Installed tags the catalog does not know (imports, or a changed catalog). */
static void list_json_other(JsonBuilder *b, TernModelStore *store, const char *tag) {
    TernModelState state = tern_model_store_get_state(store, tag, NULL);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "tag");
    json_builder_add_string_value(b, tag);
    json_builder_set_member_name(b, "label");
    json_builder_add_string_value(b, tern_model_store_get_label(store, tag));
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, tern_model_state_to_string(state));
    json_builder_set_member_name(b, "installed");
    json_builder_add_boolean_value(b, true);
    json_builder_set_member_name(b, "local");
    json_builder_add_boolean_value(b, tern_model_store_is_local(store, tag));
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, (gint64)tern_model_store_get_tag_size(store, tag));
    json_builder_set_member_name(b, "download_size");
    json_builder_add_int_value(b, 0);
    json_add_path(b, "path", tern_model_store_get_path(store, tag, TERN_PACKAGE_ROLE_BASE));
    json_add_path(b, "draft_path", tern_model_store_get_path(store, tag, TERN_PACKAGE_ROLE_DRAFT));
    json_add_path(b, "vision_path", tern_model_store_get_path(store, tag, TERN_PACKAGE_ROLE_VISION));
    json_builder_end_object(b);
}

/* The columns a terminal gives S (UTF-8, as shown): an East Asian wide
 * character two (a translated state in Chinese, an imported model's tag),
 * a combining mark none. printf's %-*s counts bytes. */
static int text_columns(const char *s) {
    int n = 0;
    for (const char *c = s; *c;) {
        const gunichar u = g_utf8_get_char_validated(c, -1);
        if (u == (gunichar)-1 || u == (gunichar)-2) {
            n++; /* not UTF-8: a byte, one replacement glyph */
            c++;
            continue;
        }
        n += g_unichar_iszerowidth(u) ? 0 : g_unichar_iswide(u) ? 2 : 1;
        c = g_utf8_next_char(c);
    }
    return n;
}

/* S, then spaces up to WIDTH columns. */
static void print_padded(const char *s, int width) {
    fputs(s, stdout);
    printf("%*s", MAX(width - text_columns(s), 0), "");
}

/* Spaces up to WIDTH columns, then S: %12s counted bytes, and a size holds
 * a no-break space's two ("639,4 MB"), "Größe unbekannt" two more. */
static void print_right(const char *s, int width) {
    printf("%*s", MAX(width - text_columns(s), 0), "");
    fputs(s, stdout);
}

int cmd_list(int argc, char **argv) {
    models_opts o;
    int rc = parse_opts(argc, argv, &o, false, true, false);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o.help) {
        fputs(_("usage: tern-cli list [--json] [--catalog PATH]\n\n"
               "The models of the catalog and their state (available, partial, installed,\n"
               "broken), and the imported ones. --json: one object per model, with paths.\n"
               "The catalog: --catalog PATH, else $TERN_CATALOG, else the installed one.\n"
               "The store: $XDG_DATA_HOME/tern/models.\n"), stdout);
        return CLI_EXIT_OK;
    }
    g_autoptr(TernCatalog) catalog = load_catalog(&o, false);
    if (!catalog)
        return CLI_EXIT_BAD_INPUT;
    g_autoptr(TernModelStore) store = open_store(o.command);
    if (!store)
        return CLI_EXIT_BAD_INPUT;
    g_auto(GStrv) installed = tern_model_store_list_tags(store);

    if (o.json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        g_autoptr(JsonGenerator) gen = json_generator_new();
        json_builder_begin_array(b);
        GPtrArray *tags = tern_catalog_get_tags(catalog);
        for (guint i = 0; i < tags->len; i++)
            list_json_tag(b, store, tags->pdata[i]);
        for (char **t = installed; *t; t++)
            if (!tern_catalog_find_tag(catalog, *t))
                list_json_other(b, store, *t);
        json_builder_end_array(b);
        g_autoptr(JsonNode) root = json_builder_get_root(b);
        json_generator_set_root(gen, root);
        json_generator_set_pretty(gen, TRUE);
        /* strict JSON: a catalog's string may hold U+001F (tern.h) */
        char *text = tn_json_escape_unit_separators(json_generator_to_data(gen, NULL), NULL);
        if (!text) {
            cli_error(_("out of memory"));
            return CLI_EXIT_BAD_INPUT;
        }
        printf("%s\n", text);
        free(text);
        return CLI_EXIT_OK;
    }

    /* Columns as wide as their longest entry, so long tags keep them
     * aligned; measured as shown (an installed tag escaped, cli_shown). */
    GPtrArray *families = tern_catalog_get_families(catalog);
    int tag_width = 22;
    GPtrArray *all_tags = tern_catalog_get_tags(catalog);
    for (guint i = 0; i < all_tags->len; i++)
        tag_width = MAX(tag_width, text_columns(((const TernCatalogTag *)all_tags->pdata[i])->tag));
    for (char **t = installed; *t; t++) {
        g_autofree char *shown = cli_shown(*t);
        tag_width = MAX(tag_width, text_columns(shown ? shown : ""));
    }
    /* Sizes too: "size unknown" is longer in German ("Größe unbekannt"). */
    int size_width = 12;
    for (guint i = 0; i < all_tags->len; i++) {
        g_autofree char *size = tag_size_text(all_tags->pdata[i]);
        size_width = MAX(size_width, text_columns(size));
    }
    for (char **t = installed; *t; t++) {
        g_autofree char *size = size_text(tern_model_store_get_tag_size(store, *t));
        size_width = MAX(size_width, text_columns(size));
    }
    /* States are short but for "needs FEATURE support". */
    int state_width = 12;
    for (guint i = 0; i < all_tags->len; i++) {
        g_autofree char *state = state_text(store, all_tags->pdata[i]);
        state_width = MAX(state_width, text_columns(state));
    }
    for (guint f = 0; f < families->len; f++) {
        const TernCatalogFamily *family = families->pdata[f];
        /* Labels are a catalog file's words (--catalog names any): one
         * line each, that no ESC or U+202E in them can rewrite. */
        g_autofree char *family_label = cli_shown(family->label);
        /* The description in the user's language, the file's English when
         * it has no translation (another catalog); --json keeps the file's. */
        g_autofree char *about = family->description && *family->description
                                     ? cli_shown(tern_catalog_text(family->description))
                                     : NULL;
        printf("%s%s%s%s\n", f ? "\n" : "", family_label ? family_label : "", about ? " - " : "",
               about ? about : "");
        for (guint i = 0; i < family->tags->len; i++) {
            const TernCatalogTag *tag = family->tags->pdata[i];
            g_autofree char *size = tag_size_text(tag);
            g_autofree char *state = state_text(store, tag);
            g_autofree char *label = cli_shown(tern_catalog_text(tag->label));
            if (label && tern_model_store_get_state(store, tag->tag, tag) == TERN_MODEL_STATE_AVAILABLE &&
                tern_catalog_tag_size_known(tag) && tern_model_store_get_missing_bytes(store, tag) == 0) {
                /* Translators: tern-cli list: the name of a model whose files are all in the
                 * store already (installed models share them), "Qwen3 0.6B flash (nothing new
                 * to download)" */
                char *noted = g_strdup_printf(_("%s (nothing new to download)"), label);
                g_free(label);
                label = noted;
            }
            fputs("  ", stdout);
            print_padded(tag->tag, tag_width);
            fputc(' ', stdout);
            print_right(size, size_width);
            fputs("  ", stdout);
            print_padded(state, state_width);
            printf(" %s\n", label ? label : "");
            /* The model's own description under it: the family's alone said
             * nothing that told qwen3:0.6b from qwen3:30b-a3b. */
            g_autofree char *about_tag = tag->description && *tag->description
                                             ? cli_shown(tern_catalog_text(tag->description))
                                             : NULL;
            if (about_tag) {
                g_autofree char *line = g_strconcat("      ", about_tag, "\n", NULL);
                cli_write_wrapped(stdout, line, strlen(line));
            }
        }
    }
    bool header = false;
    for (char **t = installed; *t; t++) {
        if (tern_catalog_find_tag(catalog, *t))
            continue;
        if (!header)
            fputs(_("\nImported and other installed models\n"), stdout);
        header = true;
        g_autofree char *size = size_text(tern_model_store_get_tag_size(store, *t));
        g_autofree char *path = tern_model_store_get_path(store, *t, TERN_PACKAGE_ROLE_BASE);
        /* installed.json is a file anyone may have edited. */
        g_autofree char *tag = cli_shown(*t);
        g_autofree char *where = cli_shown(path ? path : "");
        fputs("  ", stdout);
        print_padded(tag ? tag : "", tag_width);
        fputc(' ', stdout);
        print_right(size, size_width);
        fputs("  ", stdout);
        print_padded(state_word(tern_model_store_get_state(store, *t, NULL)), state_width);
        printf(" %s\n", where ? where : "");
    }
    g_autofree char *usage = tern_manager_format_size(tern_model_store_get_disk_usage(store));
    printf(_("\n%s in %s\n"), usage, tern_model_store_get_root(store));
    return CLI_EXIT_OK;
}

/* One asynchronous manager call run to its end on a main context of its
 * own (pull, check): Ctrl-C and SIGTERM cancel it, so that it ends the way
 * it ends on any error (a pull keeps its partial file for the resume), and
 * an optional tick shows how far it is. */
typedef struct {
    GMainContext *context;
    GMainLoop *loop;
    GCancellable *cancellable;
    GSource *sources[3]; /* SIGINT, SIGTERM, the tick */
} async_run;

static gboolean on_stop_signal(gpointer data) {
    g_cancellable_cancel(((async_run *)data)->cancellable);
    return G_SOURCE_CONTINUE;
}

static void async_run_begin(async_run *r) {
    r->context = g_main_context_new();
    g_main_context_push_thread_default(r->context);
    r->loop = g_main_loop_new(r->context, FALSE);
    r->cancellable = g_cancellable_new();
    r->sources[0] = g_unix_signal_source_new(SIGINT);
    r->sources[1] = g_unix_signal_source_new(SIGTERM);
    r->sources[2] = NULL;
    for (int i = 0; i < 2; i++) {
        g_source_set_callback(r->sources[i], on_stop_signal, r, NULL);
        g_source_attach(r->sources[i], r->context);
    }
}

static void async_run_tick(async_run *r, guint interval_ms, GSourceFunc tick, gpointer data) {
    r->sources[2] = g_timeout_source_new(interval_ms);
    g_source_set_callback(r->sources[2], tick, data, NULL);
    g_source_attach(r->sources[2], r->context);
}

/* Until the call's callback says async_run_done. */
static void async_run_wait(async_run *r) {
    g_main_loop_run(r->loop);
}

static void async_run_done(async_run *r) {
    g_main_loop_quit(r->loop);
}

/* Stopped by Ctrl-C or SIGTERM: the shell's convention, 128 + SIGINT. */
static bool async_run_interrupted(const async_run *r, const GError *error) {
    return g_cancellable_is_cancelled(r->cancellable) &&
           g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
}

/* Objects made while the context was pushed (a downloader) are freed
 * before this, so that their sources go with the context. */
static void async_run_end(async_run *r) {
    for (int i = 0; i < 3; i++)
        if (r->sources[i]) {
            g_source_destroy(r->sources[i]);
            g_source_unref(r->sources[i]);
        }
    g_main_context_pop_thread_default(r->context);
    g_main_loop_unref(r->loop);
    g_main_context_unref(r->context);
    g_clear_object(&r->cancellable);
}

typedef struct {
    async_run *run;
    bool tty;
    int last_decile;
    bool ok;
    GError *error;
} pull_state;

static void on_progress(TernDownloader *dl, const char *tag, guint64 done, guint64 total, double rate,
                        double eta, gpointer data) {
    pull_state *st = data;
    if (total == 0)
        return;
    int percent = (int)(100.0 * (double)done / (double)total);
    g_autofree char *of = tern_manager_format_size(total);
    TernDownloadProgress now;
    /* The signal has no room for the check's figures; without them a large
     * file's check looked like a download stuck at "100%, 0:00 left". */
    if (st->tty && tern_downloader_get_progress(dl, tag, &now) && now.check_total > 0) {
        int checked = (int)(100.0 * (double)now.checked / (double)now.check_total);
        g_autofree char *words = g_strdup_printf(_("Checking the download: %d%%"), checked);
        fprintf(stderr, "\r%s: %s\033[K", tag, words);
    } else if (st->tty) {
        g_autofree char *speed = tern_manager_format_size((guint64)rate);
        /* As the app's row says it (tern_manager_format_time_left): 75
         * minutes read "75:00 left", as if a clock. */
        g_autofree char *eta_text = tern_manager_format_time_left(eta);
        /* The whole line is one sentence to translate: "of" and "left"
         * around a translated "1 h 05 min" were English in every language. */
        g_autofree char *line =
            eta_text
                /* Translators: a download's progress: "qwen3:0.6b: 45% of 610 MB, 5.1 MB/s, 1 h 05 min left" */
                ? g_strdup_printf(_("%s: %3d%% of %s, %s/s, %s left"), tag, percent, of, speed,
                                  eta_text)
                /* Translators: a download's progress: "qwen3:0.6b: 45% of 610 MB, 5.1 MB/s" */
                : g_strdup_printf(_("%s: %3d%% of %s, %s/s"), tag, percent, of, speed);
        fprintf(stderr, "\r%s\033[K", line);
    } else if (percent / 10 > st->last_decile) {
        /* Logs get a line per tenth, not a line per tick. */
        st->last_decile = percent / 10;
        /* Translators: a download's progress in a log: "qwen3:0.6b: 40% of 610 MB" */
        fprintf(stderr, _("%s: %d%% of %s\n"), tag, percent, of);
    }
}

static void on_waiting(TernDownloader *dl, const char *tag, const char *file, gpointer data) {
    pull_state *st = data;
    (void)dl;
    if (file == NULL)
        return;
    if (st->tty)
        fputc('\r', stderr);
    fprintf(stderr,
            _("%s: %s is being downloaded by another program (tern-cli or the Tern app); "
            "waiting for it to finish (Ctrl-C stops waiting)\n"),
            tag, file);
}

static void on_pulled(GObject *source, GAsyncResult *result, gpointer data) {
    pull_state *st = data;
    st->ok = tern_downloader_pull_finish(TERN_DOWNLOADER(source), result, &st->error);
    async_run_done(st->run);
}

int cmd_pull(int argc, char **argv) {
    models_opts o;
    int rc = parse_opts(argc, argv, &o, true, false, false);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o.help) {
        fputs(_("usage: tern-cli pull [--catalog PATH] TAG\n\n"
               "Downloads a model of the catalog (see 'tern-cli list') into\n"
               "$XDG_DATA_HOME/tern/models, verifying every file. An interrupted pull\n"
               "(Ctrl-C, a lost connection) resumes where it stopped when run again.\n"
               "TAG may also be a Hugging Face repository, hf.co/OWNER/REPO[:QUANT]\n"
               "(QUANT default Q4_K_M, any case), or a file's URL,\n"
               "https://huggingface.co/OWNER/REPO/resolve/REVISION/FILE.gguf; HF_TOKEN\n"
               "(gated repositories) and HF_ENDPOINT (a mirror) are honoured.\n"
               "Proxies: http_proxy, https_proxy, no_proxy.\n"), stdout);
        return CLI_EXIT_OK;
    }
    /* A Hub reference becomes a one-tag catalog, pinned to the commit the
     * revision names now; from there it is an ordinary pull. */
    g_autofree char *hub_tag = NULL;
    g_autoptr(TernCatalog) catalog = NULL;
    if (tern_hub_is_ref(o.arg)) {
        g_autoptr(GError) hub_error = NULL;
        catalog = tern_hub_resolve(o.arg, NULL, &hub_tag, &hub_error);
        if (!catalog) {
            cli_error(_("pull: %s"), hub_error->message);
            return CLI_EXIT_BAD_INPUT;
        }
        fprintf(stderr, _("%s is %s (%s)\n"), o.arg, hub_tag,
                tern_catalog_find_tag(catalog, hub_tag)->description);
        o.arg = hub_tag;
    } else {
        catalog = load_catalog(&o, false);
    }
    if (!catalog)
        return CLI_EXIT_BAD_INPUT;
    g_autoptr(TernModelStore) store = open_store(o.command);
    if (!store)
        return CLI_EXIT_BAD_INPUT;

    async_run run;
    async_run_begin(&run);
    TernDownloader *dl = tern_downloader_new(store);
    pull_state st = {&run, cli_live_figures(), -1, false, NULL};
    g_signal_connect(dl, "progress", G_CALLBACK(on_progress), &st);
    g_signal_connect(dl, "waiting", G_CALLBACK(on_waiting), &st);

    const TernCatalogTag *tag = tern_catalog_find_tag(catalog, o.arg);
    if (tag && tern_model_store_get_state(store, o.arg, tag) == TERN_MODEL_STATE_INSTALLED) {
        g_autofree char *path = tern_model_store_get_path(store, o.arg, TERN_PACKAGE_ROLE_BASE);
        printf(_("%s is already installed: %s\n"), o.arg, path);
    } else {
        /* A tag this Tern cannot use is refused by the pull: no promise first. */
        if (tag && !tern_catalog_tag_supported(tag))
            tag = NULL;
        if (tag && tern_catalog_tag_size_known(tag)) {
            g_autofree char *need = tern_manager_format_size(tern_model_store_get_missing_bytes(store, tag));
            fprintf(stderr, _("pulling %s (%s to download)\n"), o.arg, need);
        } else if (tag) {
            fprintf(stderr, _("pulling %s (size unknown until the server says)\n"), o.arg);
        }
        tern_downloader_pull_async(dl, catalog, o.arg, run.cancellable, on_pulled, &st);
        async_run_wait(&run);
        if (st.tty)
            fputc('\n', stderr);
    }

    g_object_unref(dl);
    bool interrupted = st.error && async_run_interrupted(&run, st.error);
    async_run_end(&run);

    if (st.error) {
        cli_error(_("pull: %s"), st.error->message);
        g_error_free(st.error);
        return interrupted ? 130 : CLI_EXIT_BAD_INPUT;
    }
    if (st.ok) {
        g_autofree char *path = tern_model_store_get_path(store, o.arg, TERN_PACKAGE_ROLE_BASE);
        printf(_("%s installed: %s\n"), o.arg, path);
    }
    return CLI_EXIT_OK;
}

int cmd_remove(int argc, char **argv) {
    models_opts o;
    int rc = parse_opts(argc, argv, &o, true, false, false);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o.help) {
        fputs(_("usage: tern-cli remove [--catalog PATH] TAG\n\n"
               "Removes an installed model and deletes its files, except files another\n"
               "installed model still uses. Also deletes a partial download of TAG.\n"
               "An imported model (local:NAME) is forgotten; its file is left alone.\n"), stdout);
        return CLI_EXIT_OK;
    }
    /* Removing needs no catalog; with one, partial downloads go too. */
    g_autoptr(TernCatalog) catalog = load_catalog(&o, true);
    g_autoptr(TernModelStore) store = open_store(o.command);
    if (!store)
        return CLI_EXIT_BAD_INPUT;
    g_autoptr(GError) error = NULL;
    guint64 freed = 0;
    g_autofree char *hub_tag = tern_hub_is_ref(o.arg) ? tern_hub_tag_for_ref(o.arg, NULL) : NULL;
    if (hub_tag)
        o.arg = hub_tag;
    const TernCatalogTag *tag = catalog ? tern_catalog_find_tag(catalog, o.arg) : NULL;
    if (!tern_model_store_remove(store, o.arg, tag, &freed, &error)) {
        cli_error(_("remove: %s"), error->message);
        return CLI_EXIT_BAD_INPUT;
    }
    g_autofree char *size = tern_manager_format_size(freed);
    printf(_("removed %s (%s freed)\n"), o.arg, size);
    /* Files that stay because other models share them: say which. */
    for (int r = 0; tag && r < TERN_PACKAGE_N_ROLES; r++) {
        if (!tag->packages[r])
            continue;
        g_auto(GStrv) users = tern_model_store_get_tags_using(store, tag->packages[r]->id);
        if (users && users[0]) {
            g_autofree char *names = g_strjoinv(", ", users);
            printf(_("kept %s: still used by %s\n"), tag->packages[r]->label, names);
        }
    }
    return CLI_EXIT_OK;
}

typedef struct {
    async_run *run;
    TernModelStore *store;
    bool live;  /* figures rewritten in place on stderr (cli_live_figures) */
    bool shown; /* one was: the line is cleared at the end */
    bool ok;
    GPtrArray *problems; /* also when they could not be recorded (!ok) */
    GError *error;
} check_state;

static gboolean on_check_tick(gpointer data) {
    check_state *st = data;
    guint64 done = 0, total = 0;
    /* Whether the thread has ended yet does not matter: the loop quits
     * when its result is in (a small check may end before the first
     * figure, which is then shown all the same). */
    tern_model_store_get_check_progress(st->store, &done, &total);
    if (total > 0) {
        g_autofree char *of = tern_manager_format_size(total);
        fputc('\r', stderr);
        fprintf(stderr, _("checking: %d %% of %s"), (int)(100.0 * (double)done / (double)total), of);
        fputs("\033[K", stderr);
        fflush(stderr);
        st->shown = true;
    }
    return G_SOURCE_CONTINUE;
}

static void on_checked(GObject *source, GAsyncResult *result, gpointer data) {
    check_state *st = data;
    st->ok = tern_model_store_check_finish(TERN_MODEL_STORE(source), result, &st->problems, &st->error);
    async_run_done(st->run);
}

int cmd_check(int argc, char **argv) {
    models_opts o;
    int rc = parse_opts(argc, argv, &o, false, false, false);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o.help) {
        fputs(_("usage: tern-cli check\n\n"
               "Reads every installed file again and compares its size and sha256 with\n"
               "what was verified at download; checks that imported models are still\n"
               "readable GGUF files. Exit status 2 when something is damaged or missing;\n"
               "'tern-cli pull TAG' then downloads just the damaged files.\n"), stdout);
        return CLI_EXIT_OK;
    }
    g_autoptr(TernModelStore) store = open_store(o.command);
    if (!store)
        return CLI_EXIT_BAD_INPUT;
    /* The hashing runs in a thread so that a terminal sees how far it is:
     * a large model's files take seconds, silent before. */
    async_run run;
    async_run_begin(&run);
    check_state st = {.run = &run, .store = store, .live = cli_live_figures()};
    tern_model_store_check_async(store, run.cancellable, on_checked, &st);
    if (st.live) {
        async_run_tick(&run, 200, on_check_tick, &st);
        on_check_tick(&st); /* at once: a check of seconds shows its figure from the start */
    }
    async_run_wait(&run);
    if (st.shown)
        fputs("\r\033[K", stderr);
    g_autoptr(GError) error = st.error;
    g_autoptr(GPtrArray) problems = st.problems;
    bool interrupted = !problems && async_run_interrupted(&run, error);
    async_run_end(&run);
    if (interrupted) {
        /* The marks are written only at the end: none changed. */
        cli_error(_("check: stopped before the end; no file was marked damaged or intact"));
        return 130;
    }
    for (guint i = 0; problems && i < problems->len; i++)
        cli_error(_("check: %s"), (const char *)problems->pdata[i]);
    if (!st.ok) {
        /* What it found is said above all the same: a full disk must not
         * hide a damaged file. */
        if (problems && problems->len > 0)
            cli_error(_("check: the damaged files above could not be marked as damaged: %s"), error->message);
        else
            cli_error(_("check: %s"), error->message);
        return CLI_EXIT_BAD_INPUT;
    }
    g_auto(GStrv) tags = tern_model_store_list_tags(store);
    guint n_tags = g_strv_length(tags);
    if (problems->len == 0) {
        printf(ngettext("%u installed model: all files intact\n", "%u installed models: all files intact\n",
                        n_tags),
               n_tags);
        return CLI_EXIT_OK;
    }
    for (char **t = tags; *t; t++)
        if (tern_model_store_get_state(store, *t, NULL) == TERN_MODEL_STATE_BROKEN)
            printf(_("%s is damaged: %s\n"), *t,
                   tern_model_store_is_local(store, *t) ? _("import it again or remove it")
                                                         : _("'tern-cli pull' it again"));
    return CLI_EXIT_BAD_INPUT;
}

int cmd_import(int argc, char **argv) {
    models_opts o;
    int rc = parse_opts(argc, argv, &o, true, false, true);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o.help) {
        fputs(_("usage: tern-cli import [--name NAME] MODEL.gguf\n\n"
               "Adds a GGUF model file as local:NAME after checking that it is readable.\n"
               "The file stays where it is; 'tern-cli remove local:NAME' forgets it.\n"), stdout);
        return CLI_EXIT_OK;
    }
    g_autoptr(TernModelStore) store = open_store(o.command);
    if (!store)
        return CLI_EXIT_BAD_INPUT;
    g_autoptr(GError) error = NULL;
    g_autofree char *tag = tern_model_store_import(store, o.arg, o.name, &error);
    if (!tag) {
        cli_error(_("import: %s"), error->message);
        return CLI_EXIT_BAD_INPUT;
    }
    /* The file name as info shows it: a byte that is not UTF-8 as "\xe9". */
    g_autofree char *shown = cli_shown(o.arg);
    printf(_("imported %s as %s\n"), shown ? shown : "?", tag);
    return CLI_EXIT_OK;
}

static const char *resolve_role(const char *arg, TernPackageRole role, char *buf, size_t cap,
                                bool quiet_when_absent) {
    g_autoptr(GError) error = NULL;
    g_autoptr(TernModelStore) store = tern_model_store_new(NULL, &error);
    if (!store) {
        cli_error("%s", error->message);
        return NULL;
    }
    /* hf.co/OWNER/REPO:QUANT names the tag its pull installed. */
    g_autofree char *hub_tag = tern_hub_is_ref(arg) ? tern_hub_tag_for_ref(arg, NULL) : NULL;
    if (hub_tag)
        arg = hub_tag;
    TernModelState state = tern_model_store_get_state(store, arg, NULL);
    if (state == TERN_MODEL_STATE_AVAILABLE) {
        if (!quiet_when_absent)
            cli_error(_("'%s' is neither a file nor an installed model ('tern-cli list' shows the "
                      "models, 'tern-cli pull %s' installs one)"), arg, arg);
        return NULL;
    }
    if (state == TERN_MODEL_STATE_BROKEN) {
        /* An imported file is the user's: pull has nothing to fetch it from
         * (it answered "no such model in the catalog"). */
        if (g_str_has_prefix(arg, "local:"))
            cli_error(_("%s is marked damaged: its file changed since it was imported. Put the "
                        "file back and run 'tern-cli check', or import it again ('tern-cli "
                        "import FILE')"),
                      arg);
        else
            cli_error(_("%s is damaged ('tern-cli check' says which file); 'tern-cli pull %s' "
                        "repairs it"),
                      arg, arg);
        return NULL;
    }
    g_autofree char *path = tern_model_store_get_path(store, arg, role);
    if (!path)
        return NULL;
    if (strlen(path) + 1 > cap) {
        cli_error(_("%s: the model's path is too long: %s"), arg, path);
        return NULL;
    }
    memcpy(buf, path, strlen(path) + 1);
    return buf;
}

/* tern-cli search: the Hub's search, as the Models panel shows it. */
int cmd_search(int argc, char **argv) {
    g_autoptr(GString) query = g_string_new(NULL);
    guint limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(_("usage: tern-cli search [--limit N] TEXT...\n"
                   "       tern-cli search hf.co/OWNER/REPO\n\n"
                   "Searches Hugging Face for GGUF models whose OWNER/REPO contains TEXT,\n"
                   "most downloaded first (at most N, default 20, up to 100). Given a\n"
                   "repository, lists its quantizations with their sizes and what\n"
                   "'tern-cli pull' takes for each. HF_ENDPOINT (a mirror) and HF_TOKEN are\n"
                   "honoured, as by pull.\n"), stdout);
            return CLI_EXIT_OK;
        } else if (!strcmp(a, "--limit")) {
            char *end = NULL;
            guint64 n = i + 1 < argc ? g_ascii_strtoull(argv[i + 1], &end, 10) : 0;
            if (i + 1 >= argc || end == argv[i + 1] || *end != '\0' || n == 0 || n > TERN_HUB_SEARCH_LIMIT_MAX) {
                cli_error(_("%s: --limit takes a number from 1 to %d"), argv[0], TERN_HUB_SEARCH_LIMIT_MAX);
                return CLI_EXIT_USAGE;
            }
            limit = (guint)n;
            i++;
        } else if (a[0] == '-' && a[1]) {
            cli_error(_("%s: unknown option '%s' (see 'tern-cli %s --help')"), argv[0], a, argv[0]);
            return CLI_EXIT_USAGE;
        } else {
            g_string_append_printf(query, "%s%s", query->len ? " " : "", a);
        }
    }
    if (query->len == 0) {
        cli_error(_("%s: search for what? (usage: tern-cli search TEXT)"), argv[0]);
        return CLI_EXIT_USAGE;
    }

    g_autoptr(GError) error = NULL;
    if (g_str_has_prefix(query->str, "hf.co/") || g_str_has_prefix(query->str, "huggingface.co/")) {
        const char *id = strchr(query->str, '/') + 1;
        g_autoptr(TernHubRepo) repo = tern_hub_list_quants(id, NULL, &error);
        if (!repo) {
            cli_error("%s: %s", argv[0], error->message);
            return CLI_EXIT_BAD_INPUT;
        }
        if (repo->quants->len == 0)
            printf(_("%s has no GGUF model files.\n"), repo->id);
        for (guint i = 0; i < repo->quants->len; i++) {
            const TernHubQuant *q = repo->quants->pdata[i];
            g_autofree char *size = size_text(q->size);
            printf("%-24s %10s  %s\n", q->name, size,
                   q->ref ? q->ref : _("(no reference picks just these files)"));
        }
        if (repo->mmproj_size > 0) {
            g_autofree char *size = size_text(repo->mmproj_size);
            printf(_("Each comes with the repository's vision projector (%s).\n"), size);
        }
        if (repo->gated)
            fputs(_("The repository is gated: accept its terms on Hugging Face and set HF_TOKEN.\n"), stdout);
        return CLI_EXIT_OK;
    }

    g_autoptr(GPtrArray) found = tern_hub_search(query->str, limit, NULL, &error);
    if (!found) {
        cli_error("%s: %s", argv[0], error->message);
        return CLI_EXIT_BAD_INPUT;
    }
    if (found->len == 0) {
        fprintf(stderr, _("No GGUF models on Hugging Face match '%s'.\n"), query->str);
        return CLI_EXIT_OK;
    }
    for (guint i = 0; i < found->len; i++) {
        const TernHubModel *m = found->pdata[i];
        printf("%-56s %12" G_GUINT64_FORMAT " %8" G_GUINT64_FORMAT "%s\n", m->id, m->downloads, m->likes,
               m->gated ? _("  gated") : "");
    }
    fputs(_("(repository, downloads last month, likes; 'tern-cli search hf.co/OWNER/REPO' lists "
            "its quantizations)\n"), stderr);
    return CLI_EXIT_OK;
}

#else /* !TERN_HAVE_MANAGER */

static int no_manager(const char *command) {
    cli_error(_("%s: this tern-cli was built without the model manager (it needs GLib, libsoup 3 "
              "and json-glib; see docs/MODELS.md)"), command);
    return CLI_EXIT_BAD_INPUT;
}

int cmd_list(int argc, char **argv) {
    (void)argc;
    return no_manager(argv[0]);
}

int cmd_pull(int argc, char **argv) {
    (void)argc;
    return no_manager(argv[0]);
}

int cmd_remove(int argc, char **argv) {
    (void)argc;
    return no_manager(argv[0]);
}

int cmd_check(int argc, char **argv) {
    (void)argc;
    return no_manager(argv[0]);
}

int cmd_import(int argc, char **argv) {
    (void)argc;
    return no_manager(argv[0]);
}

int cmd_search(int argc, char **argv) {
    (void)argc;
    return no_manager(argv[0]);
}

#endif

/* A file (anything with a '/', ending in .gguf, or existing) is itself;
 * otherwise an installed tag. A name that is there but cannot be followed
 * (a symlink loop, a dangling link, a directory that may not be searched)
 * is a file too: the loader then says why it cannot be opened, where the
 * tag lookup would say there is no such file. */
static bool looks_like_path(const char *arg) {
    size_t n = strlen(arg);
    if (strchr(arg, '/') || (n >= 5 && !strcmp(arg + n - 5, ".gguf")) || access(arg, F_OK) == 0)
        return true;
    struct stat st;
    return errno != ENOENT || lstat(arg, &st) == 0;
}

const char *cli_resolve_model(const char *arg, char *buf, size_t cap) {
    if (!arg || looks_like_path(arg))
        return arg;
#ifdef TERN_HAVE_MANAGER
    return resolve_role(arg, TERN_PACKAGE_ROLE_BASE, buf, cap, false);
#else
    (void)buf;
    (void)cap;
    return arg;
#endif
}

bool cli_resolve_model_argv(int argc, char **argv) {
    /* argv entries must outlive the command: one buffer for the process. */
    static char path[4096];
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "-m") && strcmp(argv[i], "--model"))
            continue;
        const char *resolved = cli_resolve_model(argv[i + 1], path, sizeof path);
        if (!resolved)
            return false;
        argv[i + 1] = (char *)resolved;
        i++;
    }
    return true;
}

void cli_tag_spec_argv(int *argc, char ***argv) {
    const char *tag = NULL;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp((*argv)[i], "--spec"))
            return; /* the user's choice, "none" included, wins */
        if ((!strcmp((*argv)[i], "-m") || !strcmp((*argv)[i], "--model")) && i + 1 < *argc)
            tag = (*argv)[i + 1];
    }
    if (!tag || looks_like_path(tag))
        return;
#ifdef TERN_HAVE_MANAGER
    g_autoptr(GError) error = NULL;
    g_autoptr(TernModelStore) store = tern_model_store_new(NULL, &error);
    if (!store)
        return; /* cli_resolve_model_argv reports it */
    g_autofree char *hub_tag = tern_hub_is_ref(tag) ? tern_hub_tag_for_ref(tag, NULL) : NULL;
    gboolean on = FALSE;
    /* argv entries must outlive the command: kept for the process. */
    static char *spec;
    static char **grown;
    g_free(spec);
    spec = tern_model_store_get_draft_spec(store, hub_tag ? hub_tag : tag, &on);
    if (!spec || !on)
        return;
    fprintf(stderr, _("%s speculates with its draft by default: --spec %s (--spec none turns it off)\n"),
            tag, spec);
    /* Right after the command's name, so that it is read as an option
     * whatever follows. */
    g_free(grown);
    grown = g_new0(char *, (size_t)*argc + 3);
    grown[0] = (*argv)[0];
    grown[1] = (char *)"--spec";
    grown[2] = spec;
    for (int i = 1; i < *argc; i++)
        grown[i + 2] = (*argv)[i];
    *argc += 2;
    *argv = grown;
#endif
}

const char *cli_resolve_draft(const char *arg, char *buf, size_t cap) {
    if (!arg || looks_like_path(arg))
        return NULL;
#ifdef TERN_HAVE_MANAGER
    return resolve_role(arg, TERN_PACKAGE_ROLE_DRAFT, buf, cap, true);
#else
    (void)buf;
    (void)cap;
    return NULL;
#endif
}
