/* The Models panel (app/tern-model-manager.c) on a display (tests/app/
 * xvfb-run.sh): rows by family with their state, the search filter, Use,
 * Remove, Import, and a failed download shown on its row. */
#include <adwaita.h>
#include <glib/gstdio.h>
#include <string.h>

#include "tern-manager-private.h"
#include "tern-model-manager.h"
#include "tern.h"

static char *tmp_root;

static const char catalog_json[] =
  "{\"schema\": 1, \"packages\": {"
  "  \"p-small\": {\"files\": [{\"name\": \"small.gguf\", \"url\": \"http://127.0.0.1:9/small.gguf\", \"size\": 4}]},"
  "  \"p-big\": {\"files\": [{\"name\": \"big.gguf\", \"url\": \"http://127.0.0.1:9/big.gguf\", \"size\": 5}]}},"
  " \"families\": ["
  "  {\"id\": \"alpha\", \"label\": \"Alpha\", \"tags\": ["
  "    {\"tag\": \"alpha:small\", \"label\": \"Alpha Small\", \"base\": \"p-small\"},"
  "    {\"tag\": \"alpha:small-flash\", \"label\": \"Alpha Small flash\", \"base\": \"p-small\","
  "     \"flags\": {\"single_turn\": true}}]},"
  "  {\"id\": \"beta\", \"label\": \"Beta\", \"tags\": ["
  "    {\"tag\": \"beta:big\", \"label\": \"Beta Big\", \"base\": \"p-big\"}]}]}";

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

/* The panel as drawn, to TERN_TEST_OUT/tern-model-manager.png, for a person
 * to look at; not compared with anything. */
static void
save_picture (GtkWidget *window)
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
      path = g_build_filename (dir, "tern-model-manager.png", NULL);
      if (texture != NULL && gdk_texture_save_to_png (texture, path))
        g_test_message ("picture: %s", path);
    }
  g_object_unref (paintable);
}

static const char *
subtitle (TernModelManager *panel,
          const char       *tag)
{
  GtkWidget *row = tern_model_manager_get_row (panel, tag);

  g_assert_nonnull (row);
  return adw_action_row_get_subtitle (ADW_ACTION_ROW (row));
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
                  gboolean       *done)
{
  (void) dl;
  (void) tag;
  (void) message;
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
  g_autoptr(TernDownloader) dl = tern_downloader_new (store);
  g_autofree char *model = write_gguf ("mine.gguf");
  g_autoptr(GFile) model_file = g_file_new_for_path (model);
  g_autofree char *tag = NULL;
  TernModelManager *panel;
  GtkWidget *window;
  UseLog use = { NULL, NULL };
  gboolean finished = FALSE;

  g_assert_no_error (error);
  tern_downloader_set_retry (dl, 1, 10, 10);
  tern_downloader_set_timeout (dl, 1);

  window = gtk_window_new ();
  gtk_window_set_default_size (GTK_WINDOW (window), 640, 640);
  panel = TERN_MODEL_MANAGER (tern_model_manager_new (catalog, store, dl));
  gtk_window_set_child (GTK_WINDOW (window), GTK_WIDGET (panel));
  gtk_window_present (GTK_WINDOW (window));
  g_signal_connect (panel, "use-model", G_CALLBACK (on_use_model), &use);

  /* Everything available; the flash tag shares the small package. */
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small"), "alpha:small · 4 bytes · available"));
  g_assert_nonnull (strstr (subtitle (panel, "beta:big"), "available"));
  g_assert_false (tern_model_manager_use (panel, "alpha:small"));

  /* Installing one makes its sibling need nothing new. */
  install_by_hand (store, catalog, "alpha:small");
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small"), "installed"));
  g_assert_nonnull (strstr (subtitle (panel, "alpha:small-flash"), "nothing new to download"));
  g_assert_true (tern_model_manager_use (panel, "alpha:small"));
  g_assert_cmpstr (use.tag, ==, "alpha:small");
  g_assert_true (g_str_has_suffix (use.path, "/packages/p-small/small.gguf"));

  /* The filter hides what does not match, by tag, label or family. */
  tern_model_manager_set_filter (panel, "beta");
  g_assert_false (gtk_widget_get_visible (tern_model_manager_get_row (panel, "alpha:small")));
  g_assert_true (gtk_widget_get_visible (tern_model_manager_get_row (panel, "beta:big")));
  tern_model_manager_set_filter (panel, "SMALL flash");
  g_assert_true (gtk_widget_get_visible (tern_model_manager_get_row (panel, "alpha:small-flash")));
  g_assert_false (gtk_widget_get_visible (tern_model_manager_get_row (panel, "alpha:small")));
  tern_model_manager_set_filter (panel, NULL);
  g_assert_true (gtk_widget_get_visible (tern_model_manager_get_row (panel, "alpha:small")));

  /* Import: a row in the Imported group; a bad file is reported. */
  tag = tern_model_manager_import (panel, model_file, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (tag, ==, "local:mine");
  g_assert_nonnull (tern_model_manager_get_row (panel, "local:mine"));
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
  spin_for (300);
  save_picture (window);

  /* Remove: the imported row goes, its file stays. */
  g_assert_true (tern_model_manager_remove (panel, "local:mine", &error));
  g_assert_no_error (error);
  g_assert_null (tern_model_manager_get_row (panel, "local:mine"));
  g_assert_true (g_file_test (model, G_FILE_TEST_EXISTS));

  /* A download that cannot connect ends with its error on the row. */
  g_signal_connect (dl, "pull-finished", G_CALLBACK (on_pull_finished), &finished);
  tern_model_manager_download (panel, "beta:big");
  spin (&finished);
  g_assert_nonnull (strstr (subtitle (panel, "beta:big"), "big.gguf"));
  g_assert_false (tern_model_store_has_tag (store, "beta:big"));

  gtk_window_destroy (GTK_WINDOW (window));
  g_free (use.path);
  g_free (use.tag);
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
  g_setenv ("GTK_A11Y", "none", TRUE);
  g_test_init (&argc, &argv, NULL);
  g_test_log_set_fatal_handler (not_fatal_without_session_bus, NULL);
  if (!gtk_init_check ())
    {
      g_printerr ("test-model-panel: no display; skipped\n");
      return 77;
    }
  adw_init ();
  tmp_root = g_dir_make_tmp ("tern-panel-XXXXXX", &error);
  g_assert_no_error (error);
  g_test_add_func ("/model-manager/panel", test_panel);
  status = g_test_run ();
  tern_manager_remove_tree (tmp_root, NULL);
  g_free (tmp_root);
  return status;
}
