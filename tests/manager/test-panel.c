/* The Models panel (app/tern-model-manager.c) on a display (tests/app/
 * xvfb-run.sh): rows by family with their state, the search filter, Use,
 * Remove, Import; the GNOME HIG's rules (no row of blue buttons, flash
 * variants inside their model's row, installed models first), the memory
 * hint against a stand-in /proc/meminfo (TERN_MEMINFO), and an unreachable
 * server said in one sentence with Retry. The Hugging Face search against
 * tests/manager/http-server.py's Hub: typed text asked once after a pause,
 * repositories found, opened on their quantizations with sizes and the
 * memory hint, one downloaded, one failed (a models folder that is a
 * file), nothing found, offline and Retry. Downloads from its file server
 * that stop: a cancel halfway, listed at once among the models on this
 * computer; a 404 and a wrong sha256, each one sentence on its row with
 * the details in the tooltip, the row red but not its buttons. */
#include <adwaita.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <fcntl.h>
#include <libsoup/soup.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hash-hold.h"
#include "tern-manager-private.h"
#include "tern-model-manager.h"
#include "tern.h"
#include "widget-find.h"

static char *tmp_root;

/* Port 9 (discard) has no listener: connections are refused, as when the
 * machine is offline. Beta comes before Alpha in the file, so that Alpha
 * listed first means "installed first". */
static const char catalog_json[] =
  "{\"schema\": 1, \"packages\": {"
  "  \"p-small\": {\"kv_bytes_per_token\": 32768,"
  "     \"files\": [{\"name\": \"small.gguf\", \"url\": \"http://127.0.0.1:9/small.gguf\", \"size\": 4}]},"
  "  \"p-big\": {\"files\": [{\"name\": \"big.gguf\", \"url\": \"http://127.0.0.1:9/big.gguf\", \"size\": 5}]},"
  "  \"p-huge\": {\"kv_bytes_per_token\": 131072,"
  "     \"files\": [{\"name\": \"huge.gguf\", \"url\": \"http://127.0.0.1:9/huge.gguf\", \"size\": 8000000000}]}},"
  " \"families\": ["
  "  {\"id\": \"beta\", \"label\": \"Beta\", \"tags\": ["
  "    {\"tag\": \"beta:big\", \"label\": \"Beta Big\", \"base\": \"p-big\"},"
  "    {\"tag\": \"beta:huge\", \"label\": \"Beta Huge\", \"base\": \"p-huge\", \"context_length\": 131072}]},"
  "  {\"id\": \"alpha\", \"label\": \"Alpha\", \"tags\": ["
  "    {\"tag\": \"alpha:small\", \"label\": \"Alpha Small\", \"base\": \"p-small\", \"context_length\": 131072},"
  "    {\"tag\": \"alpha:small-flash\", \"label\": \"Alpha Small flash\", \"base\": \"p-small\","
  "     \"flags\": {\"single_turn\": true}}]}]}";

static void
spin (gboolean *done)
{
  while (!*done)
    g_main_context_iteration (NULL, TRUE);
}

static gboolean
time_up (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Lets GTK lay out and draw. */
static void
spin_for (guint ms)
{
  gboolean done = FALSE;

  g_timeout_add (ms, time_up, &done);
  spin (&done);
}

/* The panel as drawn, to TERN_TEST_OUT/NAME, for a person to look at
 * (data/screenshots/); not compared with anything. */
static void
save_picture (GtkWidget  *window,
              const char *name)
{
  const char *dir = g_getenv ("TERN_TEST_OUT");
  g_autofree char *path = NULL;
  g_autoptr(GtkSnapshot) snapshot = gtk_snapshot_new ();
  g_autoptr(GskRenderNode) node = NULL;
  g_autoptr(GdkTexture) texture = NULL;
  GdkPaintable *paintable = gtk_widget_paintable_new (window);
  int width = gtk_widget_get_width (window);
  int height = gtk_widget_get_height (window);

  if (dir != NULL && *dir != '\0' && width > 0 && height > 0)
    {
      gdk_paintable_snapshot (paintable, snapshot, width, height);
      node = gtk_snapshot_to_node (snapshot);
      if (node != NULL)
        texture = gsk_renderer_render_texture (gtk_native_get_renderer (GTK_NATIVE (window)), node,
                                               &GRAPHENE_RECT_INIT (0, 0, width, height));
      path = g_build_filename (dir, name, NULL);
      if (texture != NULL && gdk_texture_save_to_png (texture, path))
        g_test_message ("picture: %s", path);
    }
  g_object_unref (paintable);
}

/* A row's failure sentence: the label of its own under the subtitle
 * (tern-row-failure), NULL when there is none. */
static GtkWidget *
failure_label (GtkWidget *widget)
{
  return find_label_with_class (widget, "tern-row-failure");
}

/* What a row says under its title: the subtitle, and the failure sentence
 * when one is shown. Valid until the next call. */
static const char *
row_words (GtkWidget *row)
{
  static char *words;
  GtkWidget *failure = failure_label (row);
  const char *sub = ADW_IS_EXPANDER_ROW (row) ? adw_expander_row_get_subtitle (ADW_EXPANDER_ROW (row))
                                              : adw_action_row_get_subtitle (ADW_ACTION_ROW (row));

  g_free (words);
  if (failure != NULL && gtk_widget_get_visible (failure))
    words = g_strconcat (sub != NULL ? sub : "", "\n", gtk_label_get_text (GTK_LABEL (failure)), NULL);
  else
    words = g_strdup (sub != NULL ? sub : "");
  return words;
}

static const char *
subtitle (TernModelManager *panel,
          const char       *tag)
{
  GtkWidget *row = tern_model_manager_get_row (panel, tag);

  g_assert_nonnull (row);
  return row_words (row);
}

/* Widgets under `widget` (itself included) with the error style. */
static guint
count_error_styled (GtkWidget *widget)
{
  guint n = gtk_widget_get_visible (widget) && gtk_widget_has_css_class (widget, "error");

  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    n += count_error_styled (c);
  return n;
}

/* Visible widgets with the suggested-action style under `widget`. */
static guint
count_suggested (GtkWidget *widget)
{
  guint n = 0;

  if (!gtk_widget_get_visible (widget))
    return 0;
  if (gtk_widget_has_css_class (widget, "suggested-action"))
    n++;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    n += count_suggested (c);
  return n;
}

/* The position of a tag's group among the panel's groups, top first. */
static int
group_position (TernModelManager *panel,
                const char       *tag)
{
  GtkWidget *row = tern_model_manager_get_row (panel, tag);
  GtkWidget *group = gtk_widget_get_ancestor (row, ADW_TYPE_PREFERENCES_GROUP);
  int i = 0;

  g_assert_nonnull (group);
  for (GtkWidget *w = gtk_widget_get_first_child (gtk_widget_get_parent (group)); w != NULL;
       w = gtk_widget_get_next_sibling (w), i++)
    if (w == group)
      return i;
  g_assert_not_reached ();
  return -1;
}

typedef struct {
  char *path;
  char *tag;
} UseLog;

static void
on_use_model (TernModelManager *panel,
              const char       *path,
              const char       *tag,
              UseLog           *log)
{
  (void) panel;
  g_free (log->path);
  g_free (log->tag);
  log->path = g_strdup (path);
  log->tag = g_strdup (tag);
}

static void
on_pull_finished (TernDownloader *dl,
                  const char     *tag,
                  const char     *message,
                  const GError   *error,
                  gboolean       *done)
{
  (void) dl;
  (void) tag;
  (void) message;
  (void) error;
  *done = TRUE;
}

/* Installs the tag's package as the downloader would, without a network. */
static void
install_by_hand (TernModelStore *store,
                 TernCatalog    *catalog,
                 const char     *tag_name)
{
  const TernCatalogTag *tag = tern_catalog_find_tag (catalog, tag_name);
  const TernCatalogPackage *package = tag->packages[TERN_PACKAGE_ROLE_BASE];
  const TernCatalogFile *file = package->files->pdata[0];
  g_autofree char *path = tern_model_store_get_file_path (store, package->id, file->name);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (path, "GGUF", 4, NULL));
  g_assert_true (tern_model_store_record_file (store, package->id, file->name, 4, NULL, &error));
  g_assert_true (tern_model_store_complete_package (store, package, &error));
  g_assert_true (tern_model_store_add_tag (store, tag, &error));
  g_assert_no_error (error);
}

static char *
write_gguf (const char *name)
{
  g_autofree char *path = g_build_filename (tmp_root, name, NULL);
  tn_gguf_writer *w = tn_gguf_writer_new ();
  uint64_t ne[1] = { 4 };
  float data[4] = { 0 };
  tn_error err;

  g_assert_cmpint (tn_gguf_writer_set_str (w, "general.architecture", "llama"), ==, TN_OK);
  g_assert_cmpint (tn_gguf_writer_add_tensor_data (w, "token_embd.weight", 0, 1, ne, data, sizeof data), ==,
                   TN_OK);
  g_assert_cmpint (tn_gguf_writer_write (w, path, &err), ==, TN_OK);
  tn_gguf_writer_free (w);
  return g_steal_pointer (&path);
}

static void
test_panel (void)
{
  g_autofree char *root = g_build_filename (tmp_root, "store", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TernCatalog) catalog = tern_catalog_new_from_data (catalog_json, -1, "panel.json", &error);
  g_autoptr(TernModelStore) store = tern_model_store_new (root, &error);
  /* The downloader's own retry settings: an unreachable server must not
   * cost its back-off of 1 + 2 + 4 + 8 s before the panel says so. */
  g_autoptr(TernDownloader) dl = tern_downloader_new (store);
  g_autofree char *model = write_gguf ("mine.gguf");
  g_autoptr(GFile) model_file = g_file_new_for_path (model);
  g_autofree char *tag = NULL;
  TernModelManager *panel;
  GtkWidget *window;
  UseLog use = { NULL, NULL };
  gboolean finished = FALSE;
  gint64 start;

  g_assert_no_error (error);

  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 640, 900);
  panel = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));
  g_signal_connect (panel, "use-model", G_CALLBACK (on_use_model), &use);

  /* Everything available; the flash tag shares the small package. */
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small"), "alpha:small · 4\xc2\xa0" "bytes · available"));
  g_assert_nonnull (strstr (subtitle (panel, "beta:big"), "available"));
  g_assert_false (tern_model_manager_use (panel, "alpha:small"));
  /* Nothing installed: the catalog's order. */
  g_assert_cmpint (group_position (panel, "beta:big"), <, group_position (panel, "alpha:small"));

  /* GNOME HIG: at most one suggested action in a view, not a blue Download
   * on every row. */
  g_assert_cmpuint (count_suggested (GTK_WIDGET (panel)), <=, 1);

  /* The flash variant is an option inside its model's row, not a row of
   * its own beside it. */
  g_assert_true (ADW_IS_EXPANDER_ROW (tern_model_manager_get_row (panel, "alpha:small")));
  g_assert_true (gtk_widget_is_ancestor (tern_model_manager_get_row (panel, "alpha:small-flash"),
                                         tern_model_manager_get_row (panel, "alpha:small")));
  g_assert_false (ADW_IS_EXPANDER_ROW (tern_model_manager_get_row (panel, "beta:big")));

  /* The memory hint (TERN_MEMINFO: 16 GiB, 4 GiB available): 4 bytes plus
   * 16384 tokens of 32 KiB of KV fit; 8 GB plus 2 GiB of KV do not. */
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small"), "Fits in memory (about "));
  /* (g_format_size may put a no-break space before the unit.) */
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small"), "with a 16384-token context; 4.3"));
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small"), "GB free)"));
  g_assert_nonnull (strstr (subtitle (panel, "beta:huge"), "Likely too big for the free memory (about 10.1"));
  /* No KV figure in the catalog: the file alone, as a lower bound. */
  g_assert_nonnull (strstr (subtitle (panel, "beta:big"), "Fits in memory (at least 5\xc2\xa0" "bytes; 4.3"));

  /* Installing one makes its sibling need nothing new, and lists it first. */
  install_by_hand (store, catalog, "alpha:small");
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small"), "installed"));
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small-flash"), "nothing new to download"));
  g_assert_cmpint (group_position (panel, "alpha:small"), ==, 0);
  g_assert_cmpint (group_position (panel, "alpha:small"), <, group_position (panel, "beta:big"));
  g_assert_true (gtk_widget_is_ancestor (tern_model_manager_get_row (panel, "alpha:small-flash"),
                                         tern_model_manager_get_row (panel, "alpha:small")));
  g_assert_true (tern_model_manager_use (panel, "alpha:small"));
  g_assert_cmpstr (use.tag, ==, "alpha:small");
  g_assert_true (g_str_has_suffix (use.path, "/packages/p-small/small.gguf"));

  /* The filter hides what does not match, by tag, label or family. */
  tern_model_manager_set_filter (panel, "beta");
  g_assert_false (gtk_widget_get_visible (tern_model_manager_get_row (panel, "alpha:small")));
  g_assert_true (gtk_widget_get_visible (tern_model_manager_get_row (panel, "beta:big")));
  /* Only the variant matches: its model is shown, opened on it. */
  tern_model_manager_set_filter (panel, "SMALL flash");
  g_assert_true (gtk_widget_get_visible (tern_model_manager_get_row (panel, "alpha:small-flash")));
  g_assert_true (gtk_widget_get_visible (tern_model_manager_get_row (panel, "alpha:small")));
  g_assert_true (adw_expander_row_get_expanded (ADW_EXPANDER_ROW (tern_model_manager_get_row (panel, "alpha:small"))));
  g_assert_false (gtk_widget_get_visible (tern_model_manager_get_row (panel, "beta:big")));
  tern_model_manager_set_filter (panel, NULL);
  g_assert_true (gtk_widget_get_visible (tern_model_manager_get_row (panel, "alpha:small")));

  /* Import: a row among the models on this computer; a bad file is reported. */
  tag = tern_model_manager_import (panel, model_file, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (tag, ==, "local:mine");
  g_assert_nonnull (tern_model_manager_get_row (panel, "local:mine"));
  g_assert_cmpint (group_position (panel, "local:mine"), ==, group_position (panel, "alpha:small"));
  g_assert_nonnull (strstr (tern_model_manager_get_message (panel), "local:mine"));
  {
    g_autofree char *junk = g_build_filename (tmp_root, "junk.gguf", NULL);
    g_autoptr(GFile) junk_file = g_file_new_for_path (junk);
    g_autofree char *none = NULL;

    g_assert_true (g_file_set_contents (junk, "nope", -1, NULL));
    none = tern_model_manager_import (panel, junk_file, &error);
    g_assert_null (none);
    g_assert_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IMPORT);
    g_clear_error (&error);
    g_assert_nonnull (strstr (tern_model_manager_get_message (panel), junk));
  }
  g_assert_true (tern_model_manager_use (panel, "local:mine"));
  g_assert_cmpstr (use.path, ==, model);
  adw_expander_row_set_expanded (ADW_EXPANDER_ROW (tern_model_manager_get_row (panel, "alpha:small")), TRUE);
  /* Opened, the model shows its flash variant's row (once the expander's
   * revealer has started, which a loaded machine may delay). */
  for (int i = 0; i < 100 && !gtk_widget_get_mapped (tern_model_manager_get_row (panel, "alpha:small-flash")); i++)
    spin_for (50);
  g_assert_true (gtk_widget_get_mapped (tern_model_manager_get_row (panel, "alpha:small-flash")));
  spin_for (500);
  save_picture (window, "manager-list.png");

  /* Remove: the imported row goes, its file stays. */
  g_assert_true (tern_model_manager_remove (panel, "local:mine", &error));
  g_assert_no_error (error);
  g_assert_null (tern_model_manager_get_row (panel, "local:mine"));
  g_assert_true (g_file_test (model, G_FILE_TEST_EXISTS));
  /* And the panel says so: it said "Removed local:mine (0 bytes freed).",
   * as if a file had gone (a walk through the app, session 50). */
  {
    const char *said = tern_model_manager_get_message (panel);

    if (said == NULL || strstr (said, "freed") != NULL || strstr (said, "not deleted") == NULL)
      g_error ("removing an imported model, the panel says \"%s\"", said ? said : "(nothing)");
  }

  /* Offline (nothing listens on the catalog's port): at once, one sentence
   * and Retry; no URL, no resolver's words on the row. */
  g_signal_connect (dl, "pull-finished", G_CALLBACK (on_pull_finished), &finished);
  g_assert_null (tern_model_manager_get_offline_message (panel));
  start = g_get_monotonic_time ();
  tern_model_manager_download (panel, "beta:big");
  spin (&finished);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
  spin_for (50);
  g_assert_nonnull (tern_model_manager_get_offline_message (panel));
  g_assert_nonnull (strstr (tern_model_manager_get_offline_message (panel), "cannot reach the download server"));
  g_assert_null (strstr (subtitle (panel, "beta:big"), "http"));
  g_assert_null (strstr (subtitle (panel, "beta:big"), "127.0.0.1"));
  g_assert_false (gtk_widget_has_css_class (tern_model_manager_get_row (panel, "beta:big"), "error"));
  g_assert_false (tern_model_store_has_tag (store, "beta:big"));
  g_assert_cmpuint (count_suggested (GTK_WIDGET (panel)), <=, 1);
  spin_for (400);
  save_picture (window, "manager-offline.png");

  /* Retry downloads it again, and says so again when it fails again. */
  finished = FALSE;
  tern_model_manager_retry (panel);
  g_assert_null (tern_model_manager_get_offline_message (panel));
  g_assert_true (tern_downloader_is_pulling (dl, "beta:big"));
  spin (&finished);
  spin_for (50);
  g_assert_nonnull (tern_model_manager_get_offline_message (panel));
  /* ... in words that show it tried (the same sentence looked as though
   * Retry had done nothing). */
  g_assert_nonnull (strstr (tern_model_manager_get_offline_message (panel), "still cannot reach"));
  g_assert_nonnull (strstr (tern_model_manager_get_offline_message (panel), "tried again at"));

  gtk_window_destroy (GTK_WINDOW (window));
  g_free (use.path);
  g_free (use.tag);
}

/* ---- Hugging Face search ---------------------------------------------------- */

static GSubprocess *hub_server;
static char *hub_url;

/* The test Hub (tests/manager/http-server.py) over small files of its own. */
static void
start_hub (void)
{
  const char *python = g_getenv ("TERN_PYTHON");
  const char *source = g_getenv ("TERN_SOURCE_ROOT");
  g_autofree char *script = g_build_filename (source ? source : ".", "tests", "manager", "http-server.py", NULL);
  g_autofree char *served = g_build_filename (tmp_root, "served", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(GDataInputStream) out = NULL;
  g_autofree char *line = NULL;
  const struct { const char *name; gsize size; } files[] = {
    { "a.bin", 3000 }, { "b.bin", 2000 }, { "c.bin", 6500 }, { "d.bin", 2000 }, { "e.bin", 6500 } };

  g_assert_cmpint (g_mkdir_with_parents (served, 0755), ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_autofree char *path = g_build_filename (served, files[i].name, NULL);
      g_autofree char *data = g_malloc (files[i].size);

      for (gsize j = 0; j < files[i].size; j++)
        data[j] = (char) (j * 7 + i);
      g_assert_true (g_file_set_contents (path, data, (gssize) files[i].size, NULL));
    }
  hub_server = g_subprocess_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE, &error,
                                 python && *python ? python : "python3", script, served, NULL);
  g_assert_no_error (error);
  out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (hub_server));
  line = g_data_input_stream_read_line (out, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (line);
  hub_url = g_strdup_printf ("http://127.0.0.1:%s", line);
}

static void
stop_hub (void)
{
  /* Closing its stdin ends it. */
  g_output_stream_close (g_subprocess_get_stdin_pipe (hub_server), NULL, NULL);
  g_subprocess_wait (hub_server, NULL, NULL);
  g_clear_object (&hub_server);
  g_clear_pointer (&hub_url, g_free);
}

/* The search requests the test Hub has seen, as their query strings. */
static GPtrArray *
hub_searches (void)
{
  g_autoptr(SoupSession) session = soup_session_new ();
  g_autofree char *url = g_strdup_printf ("%s/_log", hub_url);
  g_autoptr(SoupMessage) msg = soup_message_new ("GET", url);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) body = soup_session_send_and_read (session, msg, NULL, &error);
  g_autoptr(JsonParser) parser = json_parser_new ();
  GPtrArray *found = g_ptr_array_new_with_free_func (g_free);
  JsonArray *requests;

  g_assert_no_error (error);
  g_assert_true (json_parser_load_from_data (parser, g_bytes_get_data (body, NULL),
                                             (gssize) g_bytes_get_size (body), &error));
  requests = json_object_get_array_member (json_node_get_object (json_parser_get_root (parser)), "requests");
  for (guint i = 0; i < json_array_get_length (requests); i++)
    {
      JsonObject *r = json_array_get_object_element (requests, i);

      if (g_strcmp0 (json_object_get_string_member (r, "mode"), "search") == 0)
        g_ptr_array_add (found, g_strdup (json_object_get_string_member (r, "query")));
    }
  return found;
}

/* The empty page's sentence, when the panel shows it. */
static const char *
empty_page_text (TernModelManager *panel)
{
  GtkStack *stack = GTK_STACK (find_of_type (GTK_WIDGET (panel), GTK_TYPE_STACK));
  GtkWidget *page;

  if (g_strcmp0 (gtk_stack_get_visible_child_name (stack), "no-results") != 0)
    return NULL;
  page = gtk_stack_get_visible_child (stack);
  return adw_status_page_get_description (ADW_STATUS_PAGE (page));
}

static const char *
row_subtitle (GtkWidget *row)
{
  return row_words (row);
}

/* Spins until cond holds, 20 s at most (a loaded machine, ASan). */
#define WAIT_FOR(cond) \
  G_STMT_START { \
    for (int wait_i_ = 0; wait_i_ < 1000 && !(cond); wait_i_++) \
      spin_for (20); \
    if (!(cond)) \
      g_error ("%s:%d: still not %s after 20 s", __FILE__, __LINE__, #cond); \
  } G_STMT_END

static void
type_text (GtkEditable *entry,
           const char  *text)
{
  gtk_editable_set_text (entry, text);
}

static void
test_hub_search (void)
{
  g_autofree char *root = g_build_filename (tmp_root, "hub-store", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TernCatalog) catalog = tern_catalog_new_from_data (catalog_json, -1, "panel.json", &error);
  g_autoptr(TernModelStore) store = tern_model_store_new (root, &error);
  g_autoptr(TernDownloader) dl = tern_downloader_new (store);
  g_autoptr(GPtrArray) searches = NULL;
  TernModelManager *panel;
  GtkEditable *entry;
  GtkWidget *window, *row;
  gboolean finished = FALSE;
  const char *q4 = "hf:tern-test--tiny-chat-7b-gguf--q4_k_m";
  const char *q2 = "hf:tern-test--tiny-chat-7b-gguf--q2_k";
  const char *f16 = "hf:tern-test--tiny-chat-7b-gguf--f16";

  g_assert_no_error (error);
  start_hub ();
  g_setenv ("HF_ENDPOINT", hub_url, TRUE);
  g_unsetenv ("HF_TOKEN");

  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 640, 900);
  panel = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));
  entry = GTK_EDITABLE (find_of_type (GTK_WIDGET (panel), GTK_TYPE_SEARCH_ENTRY));
  g_assert_nonnull (entry);

  /* Typing: the Hub is asked once, after the pause, for the whole word. */
  type_text (entry, "t");
  spin_for (40);
  type_text (entry, "ti");
  spin_for (40);
  type_text (entry, "tin");
  spin_for (40);
  type_text (entry, "tiny");
  WAIT_FOR (tern_model_manager_get_hub_row (panel, "tern-test/Tiny-Chat-7B-GGUF") != NULL);
  searches = hub_searches ();
  g_assert_cmpuint (searches->len, ==, 1);
  g_assert_nonnull (strstr (searches->pdata[0], "search=tiny&"));
  g_assert_nonnull (strstr (searches->pdata[0], "filter=gguf"));
  g_clear_pointer (&searches, g_ptr_array_unref);
  /* No catalog model matches, yet the list (with the Hub's group) shows. */
  g_assert_null (empty_page_text (panel));
  g_assert_null (tern_model_manager_get_hub_message (panel));
  row = tern_model_manager_get_hub_row (panel, "tern-test/Tiny-Chat-7B-GGUF");
  g_assert_true (gtk_widget_get_mapped (row));
  g_assert_nonnull (strstr (row_subtitle (row), "downloads last month"));
  g_assert_null (strstr (row_subtitle (row), "gated"));
  g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, "tern-test/Tiny-Chat-70B-GGUF")),
                            "gated"));

  /* Opened: its quantizations, smallest first, with sizes (split parts
   * summed, the projector left out) and whether each fits (4 GiB free). */
  adw_expander_row_set_expanded (ADW_EXPANDER_ROW (row), TRUE);
  WAIT_FOR (tern_model_manager_get_hub_row (panel, q4) != NULL);
  g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q2)), "3.0"));
  g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q2)), "Fits in memory (at least"));
  g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q4)), "4.7"));
  g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q4)),
                            "Likely too big for the free memory"));
  g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, f16)), "15.2"));
  g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, f16)), "2 files"));
  g_assert_null (tern_model_manager_get_hub_row (panel, "hf:tern-test--tiny-chat-7b-gguf--mmproj"));
  g_assert_cmpuint (count_suggested (GTK_WIDGET (panel)), <=, 1);
  for (int i = 0; i < 100 && !gtk_widget_get_mapped (tern_model_manager_get_hub_row (panel, q4)); i++)
    spin_for (50);
  spin_for (500);
  save_picture (window, "manager-search.png");

  /* Download: what `tern-cli pull hf.co/test/repo:Q4_K_M` pulls. */
  type_text (entry, "test/repo");
  WAIT_FOR (tern_model_manager_get_hub_row (panel, "test/repo") != NULL);
  adw_expander_row_set_expanded (ADW_EXPANDER_ROW (tern_model_manager_get_hub_row (panel, "test/repo")), TRUE);
  WAIT_FOR (tern_model_manager_get_hub_row (panel, "hf:test--repo--q4_k_m") != NULL);
  g_signal_connect (dl, "pull-finished", G_CALLBACK (on_pull_finished), &finished);
  tern_model_manager_download (panel, "hf:test--repo--q4_k_m");
  spin (&finished);
  spin_for (50);
  g_assert_cmpint (tern_model_store_get_state (store, "hf:test--repo--q4_k_m", NULL), ==, TERN_MODEL_STATE_INSTALLED);
  {
    g_autofree char *path = tern_model_store_get_path (store, "hf:test--repo--q4_k_m", TERN_PACKAGE_ROLE_BASE);
    g_autofree char *data = NULL;
    gsize length = 0;

    g_assert_true (g_str_has_suffix (path, "/repo-Q4_K_M.gguf"));
    g_assert_true (g_file_get_contents (path, &data, &length, NULL));
    g_assert_cmpuint (length, ==, 3000);  /* a.bin */
  }
  WAIT_FOR (tern_model_manager_get_hub_row (panel, "hf:test--repo--q4_k_m") != NULL
            && strstr (row_subtitle (tern_model_manager_get_hub_row (panel, "hf:test--repo--q4_k_m")), "installed"));
  /* ...and it is on this computer now, among the installed models. */
  g_assert_nonnull (tern_model_manager_get_row (panel, "hf:test--repo--q4_k_m"));
  /* Removed while it is the model loaded (mapped, here by the test as the
   * engine maps it): its blocks come back only when it is closed, and the
   * message said "(2.9 kB freed)" all the same. */
  {
    g_autofree char *path = tern_model_store_get_path (store, "hf:test--repo--q4_k_m", TERN_PACKAGE_ROLE_BASE);
    int fd = open (path, O_RDONLY);
    void *map;
    const char *said;

    g_assert_cmpint (fd, >=, 0);
    map = mmap (NULL, 3000, PROT_READ, MAP_PRIVATE, fd, 0);
    g_assert_true (map != MAP_FAILED);
    close (fd);
    g_assert_true (tern_model_manager_remove (panel, "hf:test--repo--q4_k_m", &error));
    g_assert_no_error (error);
    said = tern_model_manager_get_message (panel);
    if (strstr (said, "still loaded") == NULL || strstr (said, "freed)") != NULL)
      g_error ("removing the model loaded, the panel says \"%s\"", said);
    g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
    munmap (map, 3000);
  }

  /* A models folder Tern cannot write: one sentence on the row, as for the
   * catalog's models, the downloader's words in its tooltip. */
  {
    g_autofree char *packages = g_build_filename (root, "packages", NULL);
    g_autofree char *away = g_build_filename (root, "packages.away", NULL);
    const char *q8 = "hf:test--repo--q8_0";

    g_assert_cmpint (g_rename (packages, away), ==, 0);
    g_assert_true (g_file_set_contents (packages, "not a folder", -1, NULL));
    finished = FALSE;
    tern_model_manager_download (panel, q8);
    WAIT_FOR (finished);
    WAIT_FOR (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q8)), "Download failed") != NULL);
    g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q8)),
                              "Tern cannot write to the models folder"));
    g_assert_null (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q8)), root));
    /* Only the sentence is red, as on a failed download's row of the
     * catalog's models: not the row, its size and "Fits in memory…". */
    {
      GtkWidget *hub_row = tern_model_manager_get_hub_row (panel, q8);
      GtkWidget *failure = failure_label (hub_row);

      g_assert_false (gtk_widget_has_css_class (hub_row, "error"));
      g_assert_nonnull (failure);
      g_assert_true (gtk_widget_get_visible (failure) && gtk_widget_has_css_class (failure, "error"));
      g_assert_nonnull (strstr (gtk_label_get_text (GTK_LABEL (failure)), "Download failed"));
      g_assert_null (strstr (gtk_label_get_text (GTK_LABEL (failure)), "Fits in memory"));
      g_assert_cmpuint (count_error_styled (hub_row), ==, 1);
      g_assert_null (strstr (adw_action_row_get_subtitle (ADW_ACTION_ROW (hub_row)), "Download failed"));
    }
    g_assert_nonnull (strstr (gtk_widget_get_tooltip_text (tern_model_manager_get_hub_row (panel, q8)), root));
    g_assert_cmpint (g_unlink (packages), ==, 0);
    g_assert_cmpint (g_rename (away, packages), ==, 0);

    /* The lookup of the files fails before any download (the Hub answers
     * 404): a sentence on the row, not the lookup's URL and status, which
     * go to the tooltip. */
    {
      g_autofree char *nowhere = g_strdup_printf ("%s/nowhere", hub_url);

      g_setenv ("HF_ENDPOINT", nowhere, TRUE);
      tern_model_manager_download (panel, q8);
      WAIT_FOR (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q8)), "asking") == NULL);
      g_assert_nonnull (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q8)),
                                "Hugging Face did not answer as expected"));
      g_assert_null (strstr (row_subtitle (tern_model_manager_get_hub_row (panel, q8)), "nowhere"));
      g_assert_nonnull (strstr (gtk_widget_get_tooltip_text (tern_model_manager_get_hub_row (panel, q8)),
                                "nowhere"));
      g_setenv ("HF_ENDPOINT", hub_url, TRUE);
    }
  }

  /* Nothing anywhere: the panel's empty page says so. */
  type_text (entry, "zzz-nothing");
  WAIT_FOR (empty_page_text (panel) != NULL && strstr (empty_page_text (panel), "Hugging Face") != NULL);
  g_assert_nonnull (strstr (empty_page_text (panel), "zzz-nothing"));

  /* Offline: one sentence and Retry, which searches again. */
  g_setenv ("HF_ENDPOINT", "http://127.0.0.1:9", TRUE);
  type_text (entry, "tiny-chat");
  WAIT_FOR (tern_model_manager_get_hub_message (panel) != NULL
            && strstr (tern_model_manager_get_hub_message (panel), "cannot reach Hugging Face") != NULL);
  g_assert_null (strstr (tern_model_manager_get_hub_message (panel), "127.0.0.1"));
  g_assert_null (empty_page_text (panel));
  spin_for (400);
  save_picture (window, "manager-search-offline.png");
  g_setenv ("HF_ENDPOINT", hub_url, TRUE);
  tern_model_manager_hub_retry (panel);
  WAIT_FOR (tern_model_manager_get_hub_row (panel, "tern-test/Tiny-Chat-7B-GGUF") != NULL);
  g_assert_null (tern_model_manager_get_hub_message (panel));

  /* A Hub answering garbage: a sentence, not a crash. */
  type_text (entry, "garbage-deep");
  WAIT_FOR (tern_model_manager_get_hub_message (panel) != NULL
            && strstr (tern_model_manager_get_hub_message (panel), "did not answer as expected") != NULL);
  g_assert_null (tern_model_manager_get_hub_row (panel, "tern-test/Tiny-Chat-7B-GGUF"));

  /* Too short to search: the group goes, and nothing more is asked. */
  searches = hub_searches ();
  type_text (entry, "g");
  spin_for (600);
  g_assert_null (tern_model_manager_get_hub_message (panel));
  {
    g_autoptr(GPtrArray) after = hub_searches ();

    g_assert_cmpuint (after->len, ==, searches->len);
  }

  gtk_window_destroy (GTK_WINDOW (window));
  g_unsetenv ("HF_ENDPOINT");
  stop_hub ();
}

/* ---- downloads that fail or stop ------------------------------------------- */

/* A catalog of one 2 MB file per behaviour of the test server. */
static char *
served_catalog (const char *sha)
{
  const char *modes[] = { "404", "wrong", "gate" };
  GString *s = g_string_new ("{\"schema\": 1, \"packages\": {");

  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    g_string_append_printf (s, "%s\"p-%s\": {\"files\": [{\"name\": \"m-%s.gguf\", \"url\": \"%s/%s/m.bin\","
                            " \"size\": 2000000, \"sha256\": \"%s\"}]}",
                            i ? "," : "", modes[i], modes[i], hub_url, modes[i], sha);
  g_string_append (s, "}, \"families\": [");
  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    g_string_append_printf (s, "%s{\"id\": \"f%s\", \"label\": \"F %s\", \"tags\": [{\"tag\": \"f%s:x\","
                            " \"label\": \"F %s, a model with a longer name\", \"base\": \"p-%s\"}]}",
                            i ? "," : "", modes[i], modes[i], modes[i], modes[i], modes[i]);
  g_string_append (s, "]}");
  return g_string_free (s, FALSE);
}

static guint64
no_room (const char *path,
         gpointer    data)
{
  (void) path;
  (void) data;
  return 1000;
}

/* How many lines a row's title takes as laid out (0: no title found). */
static int
title_lines (GtkWidget *widget)
{
  if (GTK_IS_LABEL (widget) && gtk_widget_has_css_class (widget, "title"))
    return pango_layout_get_line_count (gtk_label_get_layout (GTK_LABEL (widget)));
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    {
      int n = title_lines (c);

      if (n > 0)
        return n;
    }
  return 0;
}

/* The fraction of the first visible progress bar under `widget`; -1: none. */
static double
bar_fraction (GtkWidget *widget)
{
  if (!gtk_widget_get_visible (widget))
    return -1;
  if (GTK_IS_PROGRESS_BAR (widget))
    return gtk_progress_bar_get_fraction (GTK_PROGRESS_BAR (widget));
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    {
      double f = bar_fraction (c);

      if (f >= 0)
        return f;
    }
  return -1;
}

/* What a row says the moment "pull-finished" has been handled (the panel's
 * handler runs first: it was connected first). */
typedef struct {
  TernModelManager *panel;
  const char       *tag;
  char             *seen;
} RowWords;

static void
on_pull_finished_words (TernDownloader *dl,
                        const char     *tag,
                        const char     *message,
                        const GError   *error,
                        RowWords       *words)
{
  (void) dl;
  (void) message;
  (void) error;
  if (g_strcmp0 (tag, words->tag) != 0)
    return;
  g_free (words->seen);
  words->seen = g_strdup (subtitle (words->panel, tag));
}

/* Every subtitle a row takes, in order: a text shown for a moment only,
 * between two that a test looks at, is in it too. */
static void
record_subtitle (GObject    *row,
                 GParamSpec *pspec,
                 GPtrArray  *texts)
{
  (void) pspec;
  g_ptr_array_add (texts, g_strdup (row_words (GTK_WIDGET (row))));
}

/* The same, for the failure sentence (set as it is shown). */
static void
record_failure (GtkWidget  *label,
                GParamSpec *pspec,
                GPtrArray  *texts)
{
  (void) pspec;
  g_ptr_array_add (texts, g_strdup (gtk_label_get_text (GTK_LABEL (label))));
}

/* How many of the recorded texts have `words` in them. */
static guint
count_texts (GPtrArray  *texts,
             const char *words)
{
  guint n = 0;

  for (guint i = 0; i < texts->len; i++)
    if (strstr (texts->pdata[i], words) != NULL)
      n++;
  return n;
}

static void
test_failed_downloads (void)
{
  g_autofree char *root = g_build_filename (tmp_root, "fail-store", NULL);
  g_autofree char *served = NULL;
  g_autofree char *path = NULL;
  g_autofree char *data = g_malloc (2000000);
  g_autofree char *sha = NULL;
  g_autofree char *json = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(TernCatalog) catalog = NULL;
  g_autoptr(TernModelStore) store = NULL;
  g_autoptr(TernDownloader) dl = NULL;
  TernModelManager *panel;
  GtkWidget *window;
  gboolean finished = FALSE;
  RowWords words = { NULL, "f404:x", NULL };
  g_autoptr(GPtrArray) texts = g_ptr_array_new_with_free_func (g_free);
  const char *failing[] = { "f404:x", "fwrong:x" };
  GtkWidget *watched[G_N_ELEMENTS (failing)];

  start_hub ();
  served = g_build_filename (tmp_root, "served", NULL);
  path = g_build_filename (served, "m.bin", NULL);
  for (gsize j = 0; j < 2000000; j++)
    data[j] = (char) (j * 13);
  g_assert_true (g_file_set_contents (path, data, 2000000, NULL));
  sha = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (guchar *) data, 2000000);
  json = served_catalog (sha);
  catalog = tern_catalog_new_from_data (json, -1, "served.json", &error);
  g_assert_no_error (error);
  store = tern_model_store_new (root, &error);
  g_assert_no_error (error);
  dl = tern_downloader_new (store);
  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 640, 900);
  panel = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
  words.panel = panel;
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));
  g_signal_connect (dl, "pull-finished", G_CALLBACK (on_pull_finished), &finished);

  /* Cancelled halfway: the partial download is on this computer now, and
   * listed there at once, as it is after a restart (it stayed among the
   * catalog's models until the panel was opened again). */
  tern_model_manager_download (panel, "fgate:x");
  WAIT_FOR (strstr (subtitle (panel, "fgate:x"), "50%") != NULL);
  g_assert_cmpint (group_position (panel, "fgate:x"), ==, 2);
  /* Another change in the store (a model imported, removed, another
   * download done) kept the row but lost its progress until the next tick. */
  g_signal_emit_by_name (store, "changed");
  g_assert_nonnull (strstr (subtitle (panel, "fgate:x"), "50%"));
  g_assert_cmpfloat_with_epsilon (bar_fraction (tern_model_manager_get_row (panel, "fgate:x")), 0.5, 0.01);
  spin_for (300);
  save_picture (window, "manager-downloading.png");
  /* At a phone's width the downloading row's title had a word per line
   * beside its bar and Cancel: now no more lines than the same title
   * beside a Download button. */
  {
    GtkWidget *narrow = gtk_window_new ();
    TernModelManager *small = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
    int pulling, idle;

    gtk_window_set_default_size (GTK_WINDOW (narrow), 360, 900);
    gtk_window_set_child (GTK_WINDOW (narrow), GTK_WIDGET (small));
    gtk_window_present (GTK_WINDOW (narrow));
    spin_for (400);
    g_assert_cmpint (gtk_widget_get_width (narrow), <=, 361);
    pulling = title_lines (tern_model_manager_get_row (small, "fgate:x"));
    idle = title_lines (tern_model_manager_get_row (small, "f404:x"));
    g_test_message ("title lines at 360 px: downloading %d, not %d", pulling, idle);
    g_assert_cmpint (pulling, >, 0);
    g_assert_cmpint (pulling, <=, idle);
    save_picture (narrow, "manager-downloading-360.png");
    gtk_window_destroy (GTK_WINDOW (narrow));
  }
  tern_model_manager_cancel (panel, "fgate:x");
  spin (&finished);
  spin_for (50);
  g_assert_cmpint (tern_model_store_get_state (store, "fgate:x", tern_catalog_find_tag (catalog, "fgate:x")), ==, TERN_MODEL_STATE_PARTIAL);
  g_assert_nonnull (strstr (subtitle (panel, "fgate:x"), "50% downloaded"));
  /* Why it stopped, next to Resume: the row said only "50% downloaded", as
   * a download that broke off would (a daily walk). */
  g_test_message ("after Cancel: %s", subtitle (panel, "fgate:x"));
  g_assert_nonnull (strstr (subtitle (panel, "fgate:x"), "50% downloaded, stopped by you"));
  g_assert_cmpint (group_position (panel, "fgate:x"), ==, 0);
  /* And after a restart (a new store and panel on the same folder): the
   * reason was the panel's alone, and the row said only "50% downloaded". */
  {
    g_autoptr(TernModelStore) again = tern_model_store_new (root, &error);
    g_autoptr(TernDownloader) again_dl = NULL;
    GtkWidget *restarted = gtk_window_new ();
    TernModelManager *fresh;

    g_assert_no_error (error);
    again_dl = tern_downloader_new (again);
    fresh = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, again, again_dl));
    gtk_window_set_child (GTK_WINDOW (restarted), GTK_WIDGET (fresh));
    gtk_window_present (GTK_WINDOW (restarted));
    spin_for (50);
    g_test_message ("after a restart: %s", subtitle (fresh, "fgate:x"));
    g_assert_nonnull (strstr (subtitle (fresh, "fgate:x"), "50% downloaded, stopped by you"));
    gtk_window_destroy (GTK_WINDOW (restarted));
  }

  /* Failed: one sentence on the row, the downloader's words (file, URL,
   * sums) in its tooltip. */
  finished = FALSE;
  g_signal_connect (dl, "pull-finished", G_CALLBACK (on_pull_finished_words), &words);
  for (guint i = 0; i < G_N_ELEMENTS (failing); i++)
    {
      watched[i] = tern_model_manager_get_row (panel, failing[i]);
      g_signal_connect (watched[i], "notify::subtitle", G_CALLBACK (record_subtitle), texts);
      if (failure_label (watched[i]) != NULL)
        g_signal_connect (failure_label (watched[i]), "notify::label", G_CALLBACK (record_failure), texts);
    }
  tern_model_manager_download (panel, "f404:x");
  spin (&finished);
  /* Before the pull's own answer: the failure's own sentence already
   * ("pull-finished" carries the error), never the downloader's words
   * (they showed until the answer came), nor the sentence for a failure
   * of no known kind (it showed until the answer came). */
  g_assert_nonnull (words.seen);
  g_assert_nonnull (strstr (words.seen, "Download failed: the server did not send the file"));
  g_assert_null (strstr (words.seen, "http"));
  g_assert_null (strstr (words.seen, "m-404.gguf"));
  /* The sentence comes with the pull's own answer, which may follow the
   * pull-finished signal on a loaded machine. */
  WAIT_FOR (strstr (subtitle (panel, "f404:x"), "Download failed") != NULL);
  g_assert_nonnull (strstr (subtitle (panel, "f404:x"), "Download failed: the server did not send the file"));
  g_assert_null (strstr (subtitle (panel, "f404:x"), "http"));
  g_assert_null (strstr (subtitle (panel, "f404:x"), "m-404.gguf"));
  g_assert_nonnull (strstr (gtk_widget_get_tooltip_text (tern_model_manager_get_row (panel, "f404:x")), "HTTP 404"));
  finished = FALSE;
  tern_model_manager_download (panel, "fwrong:x");
  spin (&finished);
  WAIT_FOR (strstr (subtitle (panel, "fwrong:x"), "Download failed") != NULL);
  g_assert_nonnull (strstr (subtitle (panel, "fwrong:x"), "the file arrived damaged and was deleted"));
  g_assert_null (strstr (subtitle (panel, "fwrong:x"), "sha256"));
  g_assert_null (strstr (subtitle (panel, "fwrong:x"), sha));
  g_assert_nonnull (strstr (gtk_widget_get_tooltip_text (tern_model_manager_get_row (panel, "fwrong:x")), sha));
  /* Only the failure sentence is red: the whole row was, its title, the
   * tag and size and "Fits in memory…" too (a daily walk). Nor is its
   * Download button (it looked destructive): the colour of the same button
   * on a row without an error. */
  {
    GtkWidget *row = tern_model_manager_get_row (panel, "f404:x");
    GtkWidget *failed = find_visible_button_labelled (row, "_Download");
    GtkWidget *gate = find_visible_button_labelled (tern_model_manager_get_row (panel, "fgate:x"), "_Resume");
    GtkWidget *failure = failure_label (row);
    const char *sub = adw_action_row_get_subtitle (ADW_ACTION_ROW (row));
    GdkRGBA a, b;

    g_assert_false (gtk_widget_has_css_class (row, "error"));
    g_assert_nonnull (failure);
    g_assert_true (gtk_widget_get_visible (failure) && gtk_widget_has_css_class (failure, "error"));
    g_assert_cmpuint (count_error_styled (row), ==, 1);
    g_assert_nonnull (strstr (gtk_label_get_text (GTK_LABEL (failure)),
                              "Download failed: the server did not send the file"));
    g_assert_null (strstr (gtk_label_get_text (GTK_LABEL (failure)), "f404:x"));
    g_assert_nonnull (strstr (sub, "f404:x"));
    g_assert_null (strstr (sub, "Download failed"));
    /* A row without a failure shows no failure sentence. */
    g_assert_cmpuint (count_error_styled (tern_model_manager_get_row (panel, "fgate:x")), ==, 0);
    g_assert_null (strstr (subtitle (panel, "fgate:x"), "Download failed"));
    g_assert_nonnull (failed);
    g_assert_nonnull (gate);
    G_GNUC_BEGIN_IGNORE_DEPRECATIONS
    gtk_style_context_get_color (gtk_widget_get_style_context (failed), &a);
    gtk_style_context_get_color (gtk_widget_get_style_context (gate), &b);
    G_GNUC_END_IGNORE_DEPRECATIONS
    g_assert_true (gdk_rgba_equal (&a, &b));
  }
  /* No room on the disk: a sentence on the row, the downloader's figures
   * (needed, free, the folder) in its tooltip. */
  tern_downloader_set_free_space_func (dl, no_room, NULL, NULL);
  /* Refused before it starts: no pull-finished, only the pull's answer
   * (the row said nothing at all before). */
  tern_model_manager_download (panel, "fwrong:x");
  WAIT_FOR (strstr (subtitle (panel, "fwrong:x"), "Download failed") != NULL);
  g_assert_nonnull (strstr (subtitle (panel, "fwrong:x"),
                            "Download failed: there is not enough free disk space. Free some space, then try again."));
  g_assert_null (strstr (subtitle (panel, "fwrong:x"), root));
  g_assert_nonnull (strstr (gtk_widget_get_tooltip_text (tern_model_manager_get_row (panel, "fwrong:x")),
                            "not enough disk space"));
  tern_downloader_set_free_space_func (dl, NULL, NULL, NULL);
  spin_for (400);
  save_picture (window, "manager-failed.png");
  /* Each of these failures has its own sentence: the rows went straight
   * to it, never through "Download failed. Point at this row…" for a
   * moment (between "pull-finished" and the pull's answer). */
  for (guint i = 0; i < G_N_ELEMENTS (failing); i++)
    {
      /* The same rows all along, not made again: none of their texts was
       * missed. */
      g_assert_true (tern_model_manager_get_row (panel, failing[i]) == watched[i]);
      g_signal_handlers_disconnect_by_func (watched[i], record_subtitle, texts);
      if (failure_label (watched[i]) != NULL)
        g_signal_handlers_disconnect_by_func (failure_label (watched[i]), record_failure, texts);
    }
  for (guint i = 0; i < texts->len; i++)
    g_test_message ("subtitle: %s", (char *) texts->pdata[i]);
  g_assert_cmpuint (count_texts (texts, "Download failed: the server did not send the file"), >, 0);
  g_assert_cmpuint (count_texts (texts, "the file arrived damaged and was deleted"), >, 0);
  g_assert_cmpuint (count_texts (texts, "there is not enough free disk space"), >, 0);
  g_assert_cmpuint (count_texts (texts, "Download failed. Point at this row for the details."), ==, 0);

  /* Resumed, the mark is gone: the row and the store no longer say the
   * user stopped it while it runs again (the downloader rewrites the
   * partial file's meta without it). */
  /* From the first frame the row shows the half it already has: it said
   * "0% of 2.0 MB" until the download's thread had opened the partial
   * file. The test holds that file's lock (as another program downloading
   * it would) so that the thread cannot have got there first. Every figure
   * the row shows while it runs is at least that half. */
  {
    g_autoptr(GtkWidget) gate = g_object_ref (tern_model_manager_get_row (panel, "fgate:x"));
    g_autoptr(GPtrArray) resumed = g_ptr_array_new_with_free_func (g_free);
    const TernCatalogPackage *package = tern_catalog_find_tag (catalog, "fgate:x")->packages[TERN_PACKAGE_ROLE_BASE];
    const TernCatalogFile *file = package->files->pdata[0];
    g_autofree char *dest = tern_model_store_get_file_path (store, package->id, file->name);
    g_autofree char *partial = g_strconcat (dest, TERN_PARTIAL_SUFFIX, NULL);
    int held = open (partial, O_RDWR | O_CLOEXEC);
    int percent = -1;
    guint figures = 0;

    g_assert_cmpint (held, >=, 0);
    g_assert_cmpint (flock (held, LOCK_EX | LOCK_NB), ==, 0);
    g_signal_connect (gate, "notify::subtitle", G_CALLBACK (record_subtitle), resumed);
    finished = FALSE;
    tern_model_manager_download (panel, "fgate:x");
    g_test_message ("at Resume: %s", subtitle (panel, "fgate:x"));
    g_assert_cmpint (sscanf (subtitle (panel, "fgate:x"), "%d%% of ", &percent), ==, 1);
    g_assert_cmpint (percent, ==, 50);
    g_assert_cmpfloat_with_epsilon (bar_fraction (gate), 0.5, 0.01);
    spin_for (50);
    close (held);
    WAIT_FOR (strstr (subtitle (panel, "fgate:x"), "stopped by you") == NULL);
    g_test_message ("resumed: %s", subtitle (panel, "fgate:x"));
    spin_for (300);
    g_signal_handlers_disconnect_by_func (gate, record_subtitle, resumed);
    for (guint i = 0; i < resumed->len; i++)
      {
        if (sscanf (resumed->pdata[i], "%d%% of ", &percent) != 1)
          continue;
        g_test_message ("after Resume: %s", (char *) resumed->pdata[i]);
        g_assert_cmpint (percent, >=, 50);
        figures++;
      }
    g_assert_cmpuint (figures, >, 0);
  }
  WAIT_FOR (!tern_model_store_get_download_stopped (store, tern_catalog_find_tag (catalog, "fgate:x")));
  tern_model_manager_cancel (panel, "fgate:x");
  spin (&finished);
  spin_for (50);
  g_assert_nonnull (strstr (subtitle (panel, "fgate:x"), "stopped by you"));

  g_signal_handlers_disconnect_by_func (dl, on_pull_finished_words, &words);
  g_free (words.seen);
  gtk_window_destroy (GTK_WINDOW (window));
  stop_hub ();
}

/* ---- the check after the last byte ----------------------------------------- */

/* The check's hash is held (hash-hold.h) after each MiB until the row has
 * shown that figure, and at the pause until the test has looked at the
 * row. */
typedef struct {
  HashHold          hold;
  TernModelManager *panel;
  GPtrArray        *texts;     /* the row's words at each tick of the check */
  GArray           *fractions; /* double: its bar's */
} CheckWatch;

/* Connected after the panel's handler: sees the row as that one left it. */
static void
watch_check (TernDownloader *dl,
             const char     *tag,
             guint64         done,
             guint64         total,
             double          rate,
             double          eta,
             CheckWatch     *w)
{
  TernDownloadProgress progress;
  GtkWidget *row = tern_model_manager_get_row (w->panel, tag);
  const char *text = subtitle (w->panel, tag);
  double fraction = bar_fraction (row);
  g_autofree char *expected = NULL;

  (void) done;
  (void) total;
  (void) rate;
  (void) eta;
  if (!tern_downloader_get_progress (dl, tag, &progress) || progress.check_total == 0)
    return;
  g_ptr_array_add (w->texts, g_strdup (text));
  g_array_append_val (w->fractions, fraction);
  /* The figure may have moved on since the panel read it: the row shows
   * this one only when its words say so. */
  expected = g_strdup_printf ("Checking the download: %d%%",
                              (int) (100.0 * (double) progress.checked / (double) progress.check_total));
  if (g_strcmp0 (text, expected) != 0)
    return;
  hash_hold_show (&w->hold, progress.checked);
}

static void
test_checking (void)
{
  g_autofree char *root = g_build_filename (tmp_root, "check-store", NULL);
  g_autofree char *path = NULL;
  g_autofree char *data = NULL;
  g_autofree char *sha = NULL;
  g_autofree char *json = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(TernCatalog) catalog = NULL;
  g_autoptr(TernModelStore) store = NULL;
  g_autoptr(TernDownloader) dl = NULL;
  g_autoptr(GPtrArray) shown = g_ptr_array_new ();
  /* Four MiB and a little: five reports of the hash. */
  const gsize size = 4 * 1048576 + 1000;
  const char *expected[] = { "Checking the download: 24%", "Checking the download: 49%",
                             "Checking the download: 74%", "Checking the download: 99%",
                             "Checking the download: 100%" };
  CheckWatch w = { 0 };
  TernModelManager *panel;
  GtkWidget *window;
  gboolean finished = FALSE;

  start_hub ();
  path = g_build_filename (tmp_root, "served", "check.bin", NULL);
  data = g_malloc (size);
  for (gsize j = 0; j < size; j++)
    data[j] = (char) (j * 31 + j / 4096);
  g_assert_true (g_file_set_contents (path, data, (gssize) size, NULL));
  sha = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (guchar *) data, size);
  json = g_strdup_printf ("{\"schema\": 1, \"packages\": {\"p-check\": {\"files\": [{\"name\": \"check.gguf\","
                          " \"url\": \"%s/ok/check.bin\", \"size\": %" G_GSIZE_FORMAT ", \"sha256\": \"%s\"}]}},"
                          " \"families\": [{\"id\": \"check\", \"label\": \"Checked\", \"tags\": [{\"tag\": \"check:x\","
                          " \"label\": \"Checked Model\", \"base\": \"p-check\"}]}]}", hub_url, size, sha);
  catalog = tern_catalog_new_from_data (json, -1, "check.json", &error);
  g_assert_no_error (error);
  store = tern_model_store_new (root, &error);
  g_assert_no_error (error);
  dl = tern_downloader_new (store);
  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 640, 400);
  panel = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));

  hash_hold_init (&w.hold, 2 * 1048576);
  w.panel = panel;
  w.texts = g_ptr_array_new_with_free_func (g_free);
  w.fractions = g_array_new (FALSE, FALSE, sizeof (double));
  g_signal_connect (dl, "progress", G_CALLBACK (watch_check), &w);
  g_signal_connect (dl, "pull-finished", G_CALLBACK (on_pull_finished), &finished);
  tern_manager_test_set_hash_hook (hash_hold_wait, &w.hold);

  /* Every byte is here: the row says it is checking them, and how far,
   * and its bar shows that (not a full bar under "100%, 0:00 left"). */
  tern_model_manager_download (panel, "check:x");
  WAIT_FOR (g_strcmp0 (subtitle (panel, "check:x"), "Checking the download: 49%") == 0);
  spin_for (300);
  g_assert_cmpstr (subtitle (panel, "check:x"), ==, "Checking the download: 49%");
  g_assert_cmpfloat_with_epsilon (bar_fraction (tern_model_manager_get_row (panel, "check:x")), 0.5, 0.01);
  save_picture (window, "manager-checking.png");
  hash_hold_release (&w.hold);
  spin (&finished);
  tern_manager_test_set_hash_hook (NULL, NULL);

  /* Each step of the check was on the row, in order, with its bar. */
  for (guint i = 0; i < w.texts->len; i++)
    {
      double f = g_array_index (w.fractions, double, i);

      g_test_message ("checking: %s, bar %.3f", (char *) w.texts->pdata[i], f);
      if (i > 0)
        g_assert_cmpfloat (f, >=, g_array_index (w.fractions, double, i - 1));
      if (shown->len == 0 || g_strcmp0 (shown->pdata[shown->len - 1], w.texts->pdata[i]) != 0)
        g_ptr_array_add (shown, w.texts->pdata[i]);
    }
  /* (A tick can come before the first MiB is hashed, or show a figure the
   * panel read a moment earlier: only the order of what it showed.) */
  {
    guint n = 0;

    for (guint i = 0; i < shown->len; i++)
      if (n < G_N_ELEMENTS (expected) && g_strcmp0 (shown->pdata[i], expected[n]) == 0)
        n++;
    g_assert_cmpuint (n, ==, G_N_ELEMENTS (expected));
  }
  g_assert_cmpfloat (g_array_index (w.fractions, double, 0), <, 0.3);
  g_assert_cmpfloat_with_epsilon (g_array_index (w.fractions, double, w.fractions->len - 1), 1.0, 0.001);

  /* Then it is installed, as before. */
  WAIT_FOR (tern_model_store_get_state (store, "check:x", tern_catalog_find_tag (catalog, "check:x"))
            == TERN_MODEL_STATE_INSTALLED);
  WAIT_FOR (strstr (subtitle (panel, "check:x"), "installed") != NULL);
  g_assert_null (strstr (subtitle (panel, "check:x"), "Checking"));
  g_assert_false (tern_downloader_is_pulling (dl, "check:x"));

  /* Verify hashes the installed file again: its message says how far it
   * is (a 17 GB model's files take seconds), held at 2 MiB until seen. */
  hash_hold_rearm (&w.hold);
  tern_manager_test_set_hash_hook (hash_hold_wait, &w.hold);
  tern_model_manager_verify (panel);
  WAIT_FOR (g_strcmp0 (tern_model_manager_get_message (panel), "Verifying the installed files… 49%") == 0);
  spin_for (400); /* the message's revealer opens */
  save_picture (window, "manager-verifying.png");
  hash_hold_release (&w.hold);
  WAIT_FOR (g_strcmp0 (tern_model_manager_get_message (panel), "Every installed file is intact.") == 0);
  tern_manager_test_set_hash_hook (NULL, NULL);
  {
    guint64 done, total;

    g_assert_false (tern_model_store_get_check_progress (store, &done, &total));
    g_assert_cmpuint (done, ==, total);
    g_assert_cmpuint (total, ==, size);
  }

  /* A Verify that finds damage lists it: a message of several lines,
   * which the message's box once measured shorter unconstrained than at a
   * given width (GTK 4.8 aligns the close button's baseline only then), a
   * critical under the tests' fatal criticals and overlapping widgets for
   * a user. Laid out, shown and drawn here. */
  {
    g_autofree char *installed = tern_model_store_get_path (store, "check:x", TERN_PACKAGE_ROLE_BASE);
    g_autofree char *bytes = NULL;
    gsize length = 0;

    g_assert_nonnull (installed);
    g_assert_true (g_file_get_contents (installed, &bytes, &length, NULL));
    bytes[length / 2] ^= 0x55;
    g_assert_true (g_file_set_contents (installed, bytes, (gssize) length, NULL));
    tern_model_manager_verify (panel);
    WAIT_FOR (strstr (tern_model_manager_get_message (panel), "damaged or missing file") != NULL);
    g_assert_nonnull (strchr (tern_model_manager_get_message (panel), '\n'));
    spin_for (400); /* the revealer opens, the window is laid out and drawn */
    save_picture (window, "manager-verify-damaged.png");
  }

  g_signal_handlers_disconnect_by_func (dl, watch_check, &w);
  g_ptr_array_unref (w.texts);
  g_array_unref (w.fractions);
  hash_hold_clear (&w.hold);
  gtk_window_destroy (GTK_WINDOW (window));
  stop_hub ();
}

/* A row's own description label (style class tern-row-description), not
 * one of a row inside it (an expander's flash variant, in its revealer).
 * NULL: none. */
static GtkWidget *
description_label (GtkWidget *widget,
                   GtkWidget *row)
{
  if (GTK_IS_REVEALER (widget))
    return NULL;
  if (GTK_IS_LABEL (widget) && gtk_widget_has_css_class (widget, "tern-row-description"))
    return widget;
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    {
      GtkWidget *found = description_label (c, row);

      if (found != NULL)
        return found;
    }
  return NULL;
}

/* Mapped widgets under `widget` whose right edge is past `width` in
 * `window`'s coordinates; the first one's type in *first. */
static guint
count_past (GtkWidget   *widget,
            GtkWidget   *window,
            int          width,
            const char **first)
{
  graphene_rect_t bounds;
  guint n = 0;

  if (!gtk_widget_get_mapped (widget))
    return 0;
  if (gtk_widget_compute_bounds (widget, window, &bounds)
      && bounds.origin.x + bounds.size.width > width + 0.5)
    {
      n++;
      if (*first == NULL)
        *first = G_OBJECT_TYPE_NAME (widget);
    }
  for (GtkWidget *c = gtk_widget_get_first_child (widget); c != NULL; c = gtk_widget_get_next_sibling (c))
    n += count_past (c, window, width, first);
  return n;
}

/* Each model's own description on its row, not only in a tooltip (which a
 * touch screen or a keyboard never shows), in the user's language, and
 * none where it is its family's, shown above the rows; wrapped at 360 px. */
static void
test_descriptions (void)
{
  static const char json[] =
    "{\"schema\": 1, \"packages\": {"
    "  \"p-one\": {\"files\": [{\"name\": \"one.gguf\", \"url\": \"http://127.0.0.1:9/one.gguf\", \"size\": 4}]},"
    "  \"p-two\": {\"files\": [{\"name\": \"two.gguf\", \"url\": \"http://127.0.0.1:9/two.gguf\", \"size\": 4}]}},"
    " \"families\": ["
    "  {\"id\": \"gamma\", \"label\": \"Gamma\","
    "   \"description\": \"Google's Gemma 3 instruction-tuned models (Gemma Terms of Use).\", \"tags\": ["
    "    {\"tag\": \"gamma:1b\", \"label\": \"Gamma 1B\", \"base\": \"p-one\","
    "     \"description\": \"Gemma 3 with 1B parameters, text only: quick short answers and summaries on any"
    " computer.\"},"
    "    {\"tag\": \"gamma:1b-flash\", \"label\": \"Gamma 1B flash\", \"base\": \"p-one\","
    "     \"flags\": {\"single_turn\": true},"
    "     \"description\": \"Flash: the system prompt is pinned once and every question starts from it"
    " (single-turn); uses the same files as gemma3:1b.\"},"
    "    {\"tag\": \"gamma:same\", \"label\": \"Gamma Same\", \"base\": \"p-two\","
    "     \"description\": \"Google's Gemma 3 instruction-tuned models (Gemma Terms of Use).\"},"
    "    {\"tag\": \"gamma:none\", \"label\": \"Gamma None\", \"base\": \"p-two\"}]}]}";
  static const char *const described[] = { "gamma:1b", "gamma:1b-flash" };
  static const char *const plain[] = { "gamma:same", "gamma:none" };
  g_autofree char *root = g_build_filename (tmp_root, "store-descriptions", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TernCatalog) catalog = tern_catalog_new_from_data (json, -1, "descriptions.json", &error);
  g_autoptr(TernModelStore) store = tern_model_store_new (root, &error);
  g_autoptr(TernDownloader) dl = tern_downloader_new (store);
  TernModelManager *panel;
  GtkWidget *window;

  g_assert_no_error (error);
  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 640, 900);
  panel = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));
  adw_expander_row_set_expanded (ADW_EXPANDER_ROW (tern_model_manager_get_row (panel, "gamma:1b")), TRUE);
  for (int i = 0; i < 100 && !gtk_widget_get_mapped (tern_model_manager_get_row (panel, "gamma:1b-flash")); i++)
    spin_for (50);

  for (guint i = 0; i < G_N_ELEMENTS (described); i++)
    {
      const TernCatalogTag *tag = tern_catalog_find_tag (catalog, described[i]);
      GtkWidget *row = tern_model_manager_get_row (panel, described[i]);
      GtkWidget *label = description_label (row, row);
      const char *tip = gtk_widget_get_tooltip_text (row);

      if (label == NULL || !gtk_widget_get_visible (label))
        g_error ("%s: no description on its row (its tooltip: \"%s\")", described[i], tip ? tip : "(none)");
      /* In the user's language, as the catalog's l10n has it. */
      g_assert_cmpstr (gtk_label_get_text (GTK_LABEL (label)), ==, tern_catalog_text (tag->description));
      g_assert_true (gtk_label_get_wrap (GTK_LABEL (label)));
      g_assert_true (gtk_widget_get_mapped (label));
    }
  /* The family's words are its group's, said once; no description, no label. */
  for (guint i = 0; i < G_N_ELEMENTS (plain); i++)
    {
      GtkWidget *row = tern_model_manager_get_row (panel, plain[i]);

      if (description_label (row, row) != NULL)
        g_error ("%s: a description label \"%s\"", plain[i],
                 gtk_label_get_text (GTK_LABEL (description_label (row, row))));
    }
  spin_for (300);
  save_picture (window, "manager-descriptions-640.png");

  /* At 360 px (a phone, a tiled window) the words wrap: nothing is wider
   * than the window. */
  gtk_window_set_default_size (GTK_WINDOW (window), 360, 900);
  for (int i = 0; i < 40 && gtk_widget_get_width (window) > 360; i++)
    spin_for (50);
  spin_for (300);
  g_assert_cmpint (gtk_widget_get_width (window), <=, 360);
  {
    const char *first = NULL;
    guint past = count_past (window, window, gtk_widget_get_width (window), &first);

    if (past > 0)
      g_error ("at 360 px, %u widgets reach past the window's edge (the first a %s)", past, first);
  }
  save_picture (window, "manager-descriptions-360.png");

  /* Imported, a file whose name is not UTF-8 (Latin-1 "mod\xe9l.gguf") is
   * named in readable words: its raw byte went to Pango, which warned. */
  {
    g_autofree char *latin = write_gguf ("mod\xe9l.gguf");
    g_autoptr(GFile) latin_file = g_file_new_for_path (latin);
    g_autofree char *shown = g_filename_display_name (latin);
    g_autofree char *latin_tag = tern_model_manager_import (panel, latin_file, &error);
    const char *said = tern_model_manager_get_message (panel);

    g_assert_no_error (error);
    g_assert_nonnull (tern_model_manager_get_row (panel, latin_tag));
    g_assert_true (said != NULL && g_utf8_validate (said, -1, NULL));
    g_assert_nonnull (strstr (said, shown));
    spin_for (100);
  }
  gtk_window_destroy (GTK_WINDOW (window));
}

/* Xvfb has no D-Bus session: GTK says so once, which is no failure here. */
static gboolean
not_fatal_without_session_bus (const char     *domain,
                               GLogLevelFlags  level,
                               const char     *message,
                               gpointer        data)
{
  (void) domain;
  (void) level;
  (void) data;
  return strstr (message, "session bus") == NULL;
}

int
main (int    argc,
      char **argv)
{
  g_autoptr(GError) error = NULL;
  int status;

  g_setenv ("XDG_DATA_HOME", "/nonexistent-use-explicit-store", TRUE);
  /* The test Hub is on 127.0.0.1: a proxy from the environment would be in
   * the way. */
  for (const char *const *v = (const char *const[]) { "http_proxy", "HTTP_PROXY", "https_proxy",
                                                       "HTTPS_PROXY", "all_proxy", "ALL_PROXY", NULL }; *v; v++)
    g_unsetenv (*v);
  g_setenv ("GTK_A11Y", "none", TRUE);
  g_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (not_fatal_without_session_bus, NULL);
  if (!gtk_init_check ())
    {
      g_printerr ("test-model-panel: no display; skipped\n");
      return 77;
    }
  adw_init ();
  {
    /* The app's style sheet, as TernApplication loads it. */
    g_autoptr(GtkCssProvider) css = gtk_css_provider_new ();

    gtk_css_provider_load_from_resource (css, "/io/github/tern/Tern/style.css");
    gtk_style_context_add_provider_for_display (gdk_display_get_default (), GTK_STYLE_PROVIDER (css),
                                                GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
  }
  tmp_root = g_dir_make_tmp ("tern-panel-XXXXXX", &error);
  g_assert_no_error (error);
  {
    /* A machine of 16 GiB with 4 GiB available, for the memory hint. */
    g_autofree char *meminfo = g_build_filename (tmp_root, "meminfo", NULL);

    g_assert_true (g_file_set_contents (meminfo, "MemTotal:       16777216 kB\n"
                                        "MemFree:          100000 kB\n"
                                        "MemAvailable:    4194304 kB\n", -1, NULL));
    g_setenv ("TERN_MEMINFO", meminfo, TRUE);
  }
  g_test_add_func ("/model-manager/panel", test_panel);
  g_test_add_func ("/model-manager/hub-search", test_hub_search);
  g_test_add_func ("/model-manager/failed-downloads", test_failed_downloads);
  g_test_add_func ("/model-manager/checking", test_checking);
  g_test_add_func ("/model-manager/descriptions", test_descriptions);
  status = g_test_run ();
  tern_manager_remove_tree (tmp_root, NULL);
  g_free (tmp_root);
  return status;
}
