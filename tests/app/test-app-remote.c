/* test-app-remote: the app with a remote engine (docs/REMOTE.md), under Xvfb.
 * A tern server over a tiny model runs in this process (its own thread) with
 * an API key, which the app gets from TERN_REMOTE_API_KEY (no Secret Service
 * here). Preferences > Connections lists the server and its Test answers
 * with the model list; the model picker's reference loads it as the engine;
 * a flash answer streams with live figures and throughput samples; the
 * second answer shows the pinned prompt cached by the server; a wrong key
 * and an unknown model end in clear sentences; a server gone mid-session
 * leaves the chat with what was written; a stand-in server drops the
 * connection mid-answer (the streamed text stays in the chat) and answers
 * 429 with Retry-After. A password in an address never reaches the
 * settings: without a keyring it is refused (an old setting that holds one
 * stays and its row says so), with one (the tests' stand-in) it is kept
 * there, moved there at start, and put back to pass a stand-in proxy's
 * Basic authentication. Screenshots of Preferences and of
 * the remote chat go to TERN_TEST_OUT. Exit 77 without a display. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <adwaita.h>

#include "tern.h"
#include "tern-application.h"
#include "tern-connections.h"
#include "tern-preferences-window.h"
#include "tern-remote.h"
#include "tern-server.h"
#include "tern-stats-bar.h"
#include "tern-window.h"
#include "app-test.h"

static const char *out_dir;

/* Screenshots go to out_dir under their own name, after the page settles
 * (app-test.c waits for crossfades and for the window to be drawn). */
static gboolean
save_screenshot (GtkWidget  *widget,
                 const char *name)
{
  g_autofree char *path = g_build_filename (out_dir, name, NULL);

  spin_for (0.5);
  return app_test_save_screenshot (widget, path);
}

/* ---- a stand-in server for the failures a real one rarely shows ------------ */

/* 0: drop mid-answer, 1: 429, 2: 401 without Basic alice:s3cret */
static volatile gint fake_mode;

static gboolean
on_fake_request (GThreadedSocketService *service,
                 GSocketConnection      *connection,
                 GObject                *source,
                 gpointer                data)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (connection));
  GOutputStream *out = g_io_stream_get_output_stream (G_IO_STREAM (connection));
  g_autoptr(GString) head = g_string_new (NULL);
  const char *reply;
  char c;
  gsize length = 0;

  (void) service;
  (void) source;
  (void) data;
  /* The request head, then its body (Content-Length), read and dropped. */
  while (!g_str_has_suffix (head->str, "\r\n\r\n") && head->len < 65536
         && g_input_stream_read (in, &c, 1, NULL, NULL) == 1)
    g_string_append_c (head, c);
  {
    const char *cl = strstr (head->str, "Content-Length: ");
    if (cl != NULL)
      length = (gsize) g_ascii_strtoull (cl + 16, NULL, 10);
    for (gsize i = 0; i < length && g_input_stream_read (in, &c, 1, NULL, NULL) == 1; i++)
      ;
  }
  if (g_atomic_int_get (&fake_mode) == 2
      && strstr (head->str, "\r\nAuthorization: Basic YWxpY2U6czNjcmV0\r\n") == NULL)
    reply = "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"tern\"\r\n"
            "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
  else if (g_str_has_prefix (head->str, "GET /v1/models"))
    reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\n"
            "Connection: close\r\n\r\n{\"object\":\"list\",\"data\":[{\"id\":\"fake\"}]}";
  else if (g_atomic_int_get (&fake_mode) == 1)
    reply = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 9\r\nContent-Type: application/json\r\n"
            "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
  else
    reply = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            "data: {\"choices\":[{\"delta\":{\"content\":\"partial \"}}]}\n\n"
            "data: {\"choices\":[{\"delta\":{\"content\":\"text\"}}]}\n\n"
            "data: {\"choices\":[{\"delta\":{\"content\":\"cut sho";
  g_output_stream_write_all (out, reply, strlen (reply), NULL, NULL, NULL);
  g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
  return TRUE;
}

static gpointer
serve (gpointer data)
{
  tern_server_run (data);
  return NULL;
}

static gboolean
text_in_subtitle (AdwActionRow *row,
                  const char   *words,
                  double        timeout_s)
{
  gint64 end = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);

  while (g_get_monotonic_time () < end)
    {
      const char *s = adw_action_row_get_subtitle (row);
      if (s != NULL && strstr (s, words) != NULL)
        return TRUE;
      g_main_context_iteration (NULL, FALSE);
      g_usleep (1000);
    }
  return FALSE;
}

/* A row with words in its title or subtitle. */
static gboolean
is_row_with_text (GtkWidget    *widget,
                  gconstpointer words)
{
  return ADW_IS_ACTION_ROW (widget)
         && (strstr (adw_preferences_row_get_title (ADW_PREFERENCES_ROW (widget)) ?: "", words) != NULL
             || strstr (adw_action_row_get_subtitle (ADW_ACTION_ROW (widget)) ?: "", words) != NULL);
}

/* Whether a row under widget has words in its title or subtitle. */
static gboolean
row_text_has (GtkWidget  *widget,
              const char *words)
{
  return find_widget_where (widget, is_row_with_text, words) != NULL;
}

/* Whether any address in the settings has words in it. */
static gboolean
settings_have (GSettings  *settings,
               const char *words)
{
  g_auto(GStrv) list = g_settings_get_strv (settings, "remote-connections");

  for (guint i = 0; list[i] != NULL; i++)
    if (strstr (list[i], words) != NULL)
      return TRUE;
  return FALSE;
}

static void
on_listed (GObject      *source,
           GAsyncResult *result,
           gpointer      data)
{
  char ***models = data;
  g_autoptr(GError) error = NULL;

  (void) source;
  *models = tern_connections_list_models_finish (result, &error);
  if (*models == NULL)
    {
      fprintf (stderr, "listing: %s\n", error->message);
      *models = g_new0 (char *, 1);
    }
}

/* The model ids url lists (none when it refuses), as Test asks for them. */
static char **
list_models (const char *url)
{
  char **models = NULL;
  gint64 end = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  tern_connections_list_models_async (url, NULL, on_listed, &models);
  while (models == NULL && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, FALSE);
  return models != NULL ? models : g_new0 (char *, 1);
}

static GtkWidget *
models_window (void)
{
  GtkWidget *models = NULL;

  for (GList *l = gtk_window_list_toplevels (); l != NULL; l = g_list_delete_link (l, l))
    if (g_strcmp0 (gtk_window_get_title (l->data), "Models") == 0)
      models = l->data;
  return models;
}

/* A row's failure sentence: the label of its own under its subtitle
 * (tern-row-failure), NULL when there is none. */
static GtkWidget *
failure_label (GtkWidget *widget)
{
  return find_label_with_class (widget, "tern-row-failure");
}

/* Visible widgets under widget (itself included) with the error style. */
static guint
count_error_styled (GtkWidget *widget)
{
  guint n = gtk_widget_get_visible (widget) && gtk_widget_has_css_class (widget, "error");

  for (GtkWidget *c = gtk_widget_get_first_child (widget); c; c = gtk_widget_get_next_sibling (c))
    n += count_error_styled (c);
  return n;
}

/* A row that failed shows it: in the error style, or its failure sentence. */
static gboolean
row_failed (AdwActionRow *row,
            double        timeout_s)
{
  gint64 end = g_get_monotonic_time () + (gint64) (timeout_s * G_USEC_PER_SEC);

  for (;;)
    {
      GtkWidget *failure = failure_label (GTK_WIDGET (row));

      if (gtk_widget_has_css_class (GTK_WIDGET (row), "error")
          || (failure != NULL && gtk_widget_get_visible (failure)))
        return TRUE;
      if (g_get_monotonic_time () >= end)
        return FALSE;
      g_main_context_iteration (NULL, FALSE);
    }
}

/* Only the failure's sentence is red (as on a failed download's row in the
 * Models panel), not the row with its address: WHAT says which row. */
static void
check_only_sentence_red (AdwActionRow *row,
                         const char   *what)
{
  GtkWidget *failure = failure_label (GTK_WIDGET (row));

  CHECKF (!gtk_widget_has_css_class (GTK_WIDGET (row), "error"), "%s: the whole row is red", what);
  CHECKF (failure != NULL && gtk_widget_get_visible (failure)
            && gtk_widget_has_css_class (failure, "error")
            && strstr (gtk_label_get_text (GTK_LABEL (failure)), "annot reach") != NULL,
          "%s: no red failure sentence (%s)", what,
          failure != NULL ? gtk_label_get_text (GTK_LABEL (failure)) : "none");
  CHECKF (count_error_styled (GTK_WIDGET (row)) == 1, "%s: %u widgets red", what,
          count_error_styled (GTK_WIDGET (row)));
}

static void
ask (TernWindow *w,
     const char *text)
{
  tern_window_set_composer_text (w, text);
  activate (w, "send", NULL);
  CHECK (wait_for (w, has_tokens, 60));
  CHECK (wait_for (w, idle_engine, 120));
}

int
main (void)
{
  g_autofree char *tmp = NULL;
  g_autofree char *model = NULL;
  g_autofree char *url = NULL;
  g_autofree char *ref = NULL;
  g_autofree char *bad_ref = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(TernApplication) app = NULL;
  tn_mkmodel_params p = app_test_model_params ();
  tern_server_config cfg = { 0 };
  tn_model *m = NULL;
  tn_error err = { 0 };
  tern_server *srv;
  GThread *thread;
  GSettings *settings;
  TernWindow *w;
  TernPreferencesWindow *prefs;
  AdwActionRow *row;
  const char *stats;
  guint rows;

  if ((tmp = app_test_start ("tern-app-remote")) == NULL)
    return 1;
  /* No keyring for the first part, whatever the desktop the test runs on
   * has: the user's own keyring is never written. */
  g_setenv ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/tern-test-bus", TRUE);
  out_dir = g_getenv ("TERN_TEST_OUT") ? g_getenv ("TERN_TEST_OUT") : tmp;

  model = g_build_filename (tmp, "remote-model.gguf", NULL);
  if (tn_mkmodel (&p, model, &err) != TN_OK || tn_model_load (model, tn_model_default_params (), &m, &err) != TN_OK)
    {
      fprintf (stderr, "model: %s\n", err.message);
      return 1;
    }
  cfg.api_key = "sesame";
  cfg.model_id = "big-model";
  cfg.n_ctx = 2048;
  cfg.n_threads = 1;
  srv = tern_server_new (m, &cfg, &error);
  if (srv == NULL)
    {
      fprintf (stderr, "server: %s\n", error->message);
      return 1;
    }
  thread = g_thread_new ("server", serve, srv);
  url = g_strdup (tern_server_url (srv));
  ref = tern_remote_ref_new (url, "big-model");
  bad_ref = tern_remote_ref_new (url, "no-such-model");
  g_setenv ("TERN_REMOTE_API_KEY", "sesame", TRUE);

  if ((app = app_test_application_new ()) == NULL)
    return 1;
  settings = tern_application_get_settings (app);
  g_settings_set_int (settings, "max-tokens", 24);
  g_settings_set_double (settings, "temperature", 0);
  w = app_test_window_new (app, 900, 700);

  /* Preferences > Connections: add the server, test it. */
  CHECK (tern_connections_add (settings, url, NULL, NULL, &error));
  prefs = tern_preferences_window_new (GTK_WINDOW (w), settings);
  gtk_window_present (GTK_WINDOW (prefs));
  row = find_action_row (GTK_WIDGET (prefs), url);
  CHECKF (row != NULL, "a row for %s", url);
  if (row != NULL)
    {
      GtkButton *test = GTK_BUTTON (find_button_labelled (GTK_WIDGET (row), "_Test"));
      CHECK (test != NULL);
      if (test != NULL)
        g_signal_emit_by_name (test, "clicked");
      CHECKF (text_in_subtitle (row, "big-model", 30), "test: %s", adw_action_row_get_subtitle (row));
      fprintf (stderr, "connection test: %s\n", adw_action_row_get_subtitle (row));
    }
  {
    /* The Connections page in view for the screenshot. */
    AdwPreferencesPage *page = NULL;
    GtkWidget *c = GTK_WIDGET (row);
    while (c != NULL && !ADW_IS_PREFERENCES_PAGE (c))
      c = gtk_widget_get_parent (c);
    page = c ? ADW_PREFERENCES_PAGE (c) : NULL;
    if (page != NULL)
      adw_preferences_window_set_visible_page (ADW_PREFERENCES_WINDOW (prefs), page);
    save_screenshot (GTK_WIDGET (prefs), "remote-preferences.png");
  }
  gtk_window_destroy (GTK_WINDOW (prefs));

  /* An unknown model: a clear sentence, no model in use. */
  tern_window_load_model (w, bad_ref);
  CHECK (wait_for (w, not_loading, 60));
  CHECKF (tern_window_get_last_error (w) != NULL
            && strstr (tern_window_get_last_error (w), "has no model 'no-such-model'") != NULL,
          "unknown model: %s", tern_window_get_last_error (w));

  /* A wrong key: the server's 401 in words. */
  g_setenv ("TERN_REMOTE_API_KEY", "wrong", TRUE);
  tern_window_load_model (w, ref);
  CHECK (wait_for (w, not_loading, 60));
  CHECKF (tern_window_get_last_error (w) != NULL
            && strstr (tern_window_get_last_error (w), "refused the API key") != NULL,
          "wrong key: %s", tern_window_get_last_error (w));
  g_setenv ("TERN_REMOTE_API_KEY", "sesame", TRUE);

  /* A password in the address (a proxy's Basic authentication) works, and
   * shows nowhere: not in Preferences, the Models panel, nor a message. */
  {
    g_autofree char *secret_url = g_strdup_printf ("http://alice:s3cret@%s",
                                                   url + strlen ("http://"));
    g_autofree char *normalised = NULL;
    g_autofree char *secret_ref = NULL;
    GtkWidget *models;
    gint64 end;

    CHECK (g_str_has_prefix (url, "http://"));

    /* No keyring: adding it fails in words, nothing is stored. */
    CHECK (!tern_connections_add (settings, secret_url, NULL, &normalised, &error));
    CHECKF (error != NULL && strstr (error->message, "keyring") != NULL
              && strstr (error->message, "s3cret") == NULL,
            "no keyring: %s", error ? error->message : "added");
    g_clear_error (&error);
    CHECK (!settings_have (settings, "s3cret"));

    /* An address saved with its password by an older Tern, no keyring to
     * move it to: it stays, and its row says it is in plain text. */
    {
      /* As Add wrote it (tern_server_url ends in /v1). */
      g_autofree char *old_url = g_strdup (secret_url);
      const char *old_list[] = { old_url, NULL };
      g_auto(GStrv) before = g_settings_get_strv (settings, "remote-connections");

      g_settings_set_strv (settings, "remote-connections", old_list);
      tern_connections_migrate (settings);
      CHECK (settings_have (settings, "s3cret"));
      prefs = tern_preferences_window_new (GTK_WINDOW (w), settings);
      gtk_window_present (GTK_WINDOW (prefs));
      spin_for (0.2);
      CHECK (row_text_has (GTK_WIDGET (prefs), "plain text"));
      CHECK (!row_text_has (GTK_WIDGET (prefs), "s3cret"));
      gtk_window_destroy (GTK_WINDOW (prefs));

      /* With a keyring, it moves there at start. */
      _tern_connections_use_test_keyring ();
      tern_connections_migrate (settings);
      CHECK (!settings_have (settings, "s3cret"));
      CHECK (settings_have (settings, "alice@127.0.0.1"));
      {
        g_autofree char *bare = tern_remote_url_shown (old_url);
        g_autofree char *full = tern_connections_get_url (bare);
        CHECKF (g_strcmp0 (full, old_url) == 0, "put back: %s", full);
      }
      g_settings_set_strv (settings, "remote-connections", (const char * const *) before);
    }

    CHECK (tern_connections_add (settings, secret_url, NULL, &normalised, &error));
    CHECKF (!settings_have (settings, "s3cret") && settings_have (settings, "alice@127.0.0.1"),
            "the password stays out of the settings");
    prefs = tern_preferences_window_new (GTK_WINDOW (w), settings);
    gtk_window_present (GTK_WINDOW (prefs));
    spin_for (0.2);
    CHECK (row_text_has (GTK_WIDGET (prefs), "alice@127.0.0.1"));
    CHECK (!row_text_has (GTK_WIDGET (prefs), "s3cret"));
    gtk_window_destroy (GTK_WINDOW (prefs));

    activate (w, "model-manager", NULL);
    models = models_window ();
    CHECK (models != NULL);
    end = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
    while (models != NULL && !row_text_has (models, "Remote · http://alice@") && g_get_monotonic_time () < end)
      g_main_context_iteration (NULL, FALSE);
    CHECK (models != NULL && row_text_has (models, "Remote · http://alice@"));
    CHECK (models != NULL && !row_text_has (models, "s3cret"));
    if (models != NULL)
      gtk_window_destroy (GTK_WINDOW (models));

    secret_ref = tern_remote_ref_new (normalised, "no-such-model");
    tern_window_load_model (w, secret_ref);
    CHECK (wait_for (w, not_loading, 60));
    CHECKF (tern_window_get_last_error (w) != NULL
              && strstr (tern_window_get_last_error (w), "alice@127.0.0.1") != NULL
              && strstr (tern_window_get_last_error (w), "s3cret") == NULL,
            "unknown model at a password address: %s", tern_window_get_last_error (w));
    g_free (secret_ref);
    secret_ref = tern_remote_ref_new (normalised, "big-model");
    tern_window_load_model (w, secret_ref);
    CHECK (wait_for (w, not_loading, 60));
    CHECKF (tern_window_has_model (w) && tern_window_get_model_description (w) != NULL
              && strstr (tern_window_get_model_description (w), "alice@127.0.0.1") != NULL
              && strstr (tern_window_get_model_description (w), "s3cret") == NULL,
            "loaded from a password address: %s", tern_window_get_model_description (w));
    tern_connections_remove (settings, normalised);
  }

  /* The model picker lists the server's model, marked remote; Use makes it
   * the engine. */
  activate (w, "model-manager", NULL);
  {
    GtkWidget *models = NULL;
    AdwActionRow *mrow = NULL;
    g_autofree char *mark = g_strdup_printf ("Remote · %s", url);
    gint64 end = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

    for (GList *l = gtk_window_list_toplevels (); l != NULL; l = g_list_delete_link (l, l))
      if (g_strcmp0 (gtk_window_get_title (l->data), "Models") == 0)
        models = l->data;
    CHECK (models != NULL);
    while (models != NULL && mrow == NULL && g_get_monotonic_time () < end)
      {
        mrow = find_action_row (models, "big-model");
        g_main_context_iteration (NULL, FALSE);
      }
    CHECK (mrow != NULL);
    if (mrow != NULL)
      {
        GtkButton *use = GTK_BUTTON (find_button_labelled (GTK_WIDGET (mrow), "_Use"));
        CHECKF (g_strcmp0 (adw_action_row_get_subtitle (mrow), mark) == 0, "%s",
                adw_action_row_get_subtitle (mrow));
        save_screenshot (models, "remote-models.png");
        CHECK (use != NULL);
        if (use != NULL)
          g_signal_emit_by_name (use, "clicked");
      }
    else
      tern_window_load_model (w, ref);
  }
  CHECK (wait_for (w, not_loading, 60));
  CHECK (tern_window_has_model (w));
  CHECKF (tern_window_get_model_description (w) != NULL
            && strstr (tern_window_get_model_description (w), "(remote)") != NULL,
          "%s", tern_window_get_model_description (w));
  CHECK (wait_for (w, idle_engine, 60));
  g_action_group_activate_action (G_ACTION_GROUP (w), "mode", g_variant_new_string ("flash"));

  ask (w, "Tell me a story.");
  rows = tern_window_get_n_rows (w);
  CHECKF (rows >= 2 && strlen (tern_window_get_row_text (w, rows - 1)) > 0, "%u rows", rows);
  stats = tern_stats_bar_get_text (tern_window_get_stats_bar (w));
  fprintf (stderr, "first answer: %s\n", stats);
  CHECKF (strstr (stats, "tok/s") != NULL, "%s", stats);
  CHECK (tern_stats_bar_get_n_plot_samples (tern_window_get_stats_bar (w)) > 0);

  /* The pin again: the server reports it cached, the bar says reused (the
   * row's word). */
  ask (w, "Another one.");
  stats = tern_stats_bar_get_text (tern_window_get_stats_bar (w));
  fprintf (stderr, "second answer: %s\n", stats);
  CHECKF (strstr (stats, " reused") != NULL, "the pin comes back reused: %s", stats);
  save_screenshot (GTK_WIDGET (w), "remote-chat.png");

  /* The server goes away: the next answer fails in words, the chat keeps
   * what was written. */
  rows = tern_window_get_n_rows (w);
  tern_server_quit (srv);
  g_thread_join (thread);
  /* Freed: its socket closes, so connecting is refused. */
  tern_server_free (srv);
  srv = NULL;
  tern_window_set_composer_text (w, "Are you there?");
  activate (w, "send", NULL);
  CHECK (wait_for (w, idle_engine, 60));
  CHECKF (tern_window_get_last_error (w) != NULL
            && strstr (tern_window_get_last_error (w), "annot reach") != NULL,
          "server gone: %s", tern_window_get_last_error (w));
  CHECKF (tern_window_get_n_rows (w) >= rows, "%u rows before, %u after", rows,
          tern_window_get_n_rows (w));

  /* The server's row in Preferences, tested again, and in the Models
   * panel: only the sentence that says it cannot be reached is red. */
  prefs = tern_preferences_window_new (GTK_WINDOW (w), settings);
  gtk_window_present (GTK_WINDOW (prefs));
  row = find_action_row (GTK_WIDGET (prefs), url);
  CHECKF (row != NULL, "a row for %s", url);
  if (row != NULL)
    {
      GtkButton *test = GTK_BUTTON (find_button_labelled (GTK_WIDGET (row), "_Test"));
      CHECK (test != NULL);
      if (test != NULL)
        g_signal_emit_by_name (test, "clicked");
      CHECKF (row_failed (row, 30), "test of a server gone: %s", adw_action_row_get_subtitle (row));
      check_only_sentence_red (row, "Preferences");
    }
  gtk_window_destroy (GTK_WINDOW (prefs));
  activate (w, "model-manager", NULL);
  {
    GtkWidget *models = models_window ();
    g_autofree char *shown = tern_remote_url_shown (url);
    AdwActionRow *server_row = NULL;
    gint64 end = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

    CHECK (models != NULL);
    while (models != NULL && server_row == NULL && g_get_monotonic_time () < end)
      {
        server_row = find_action_row (models, shown);
        g_main_context_iteration (NULL, FALSE);
      }
    CHECKF (server_row != NULL, "a row for the server gone, %s", shown);
    if (server_row != NULL)
      {
        CHECK (row_failed (server_row, 30));
        check_only_sentence_red (server_row, "Models");
        save_screenshot (models, "remote-models-gone.png");
      }
    if (models != NULL)
      gtk_window_destroy (GTK_WINDOW (models));
  }

  /* A connection dropped mid-answer, then 429: sentences, and the text
   * streamed before the drop stays in the chat. */
  {
    g_autoptr(GSocketService) fake = g_threaded_socket_service_new (2);
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new (lo, 0);
    g_autoptr(GSocketAddress) bound = NULL;
    g_autofree char *fake_url = NULL;
    g_autofree char *fake_ref = NULL;
    const char *last;

    CHECK (g_socket_listener_add_address (G_SOCKET_LISTENER (fake), any, G_SOCKET_TYPE_STREAM,
                                          G_SOCKET_PROTOCOL_TCP, NULL, &bound, &error));
    g_signal_connect (fake, "run", G_CALLBACK (on_fake_request), NULL);
    g_socket_service_start (fake);
    fake_url = g_strdup_printf ("http://127.0.0.1:%u/v1",
                                g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
    fake_ref = tern_remote_ref_new (fake_url, "fake");
    tern_window_load_model (w, fake_ref);
    CHECK (wait_for (w, not_loading, 60));
    CHECKF (tern_window_has_model (w), "%s", tern_window_get_last_error (w));
    tern_window_set_composer_text (w, "Say something.");
    activate (w, "send", NULL);
    CHECK (wait_for (w, idle_engine, 60));
    last = tern_window_get_last_error (w);
    CHECKF (last != NULL && strstr (last, "in the middle of the answer") != NULL, "drop: %s", last);
    rows = tern_window_get_n_rows (w);
    CHECKF (rows >= 1 && g_str_has_prefix (tern_window_get_row_text (w, rows - 1), "partial text"),
            "the text before the drop stays: '%s'", rows ? tern_window_get_row_text (w, rows - 1) : "");
    g_atomic_int_set (&fake_mode, 1);
    tern_window_set_composer_text (w, "Again.");
    activate (w, "send", NULL);
    CHECK (wait_for (w, idle_engine, 60));
    last = tern_window_get_last_error (w);
    CHECKF (last != NULL && strstr (last, "busy (HTTP 429") != NULL && strstr (last, "wait 9 seconds") != NULL,
            "429: %s", last);

    /* A proxy that wants Basic authentication: the password, kept in the
     * keyring, goes with the address again. */
    g_atomic_int_set (&fake_mode, 2);
    g_unsetenv ("TERN_REMOTE_API_KEY");
    {
      g_autofree char *basic_url = g_strdup_printf (
        "http://alice:s3cret@127.0.0.1:%u",
        g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
      g_autofree char *bare = g_strdup_printf (
        "http://127.0.0.1:%u/v1", g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
      g_autofree char *normalised = NULL;
      g_auto(GStrv) refused = list_models (bare);
      g_auto(GStrv) listed = NULL;
      g_autofree char *basic_ref = NULL;
      g_autofree char *gone = NULL;

      CHECKF (refused[0] == NULL, "the stand-in wants the password: %s", refused[0]);
      CHECK (tern_connections_add (settings, basic_url, NULL, &normalised, &error));
      CHECKF (!settings_have (settings, "s3cret"), "no password in the settings");
      listed = list_models (normalised);
      CHECKF (listed[0] != NULL && g_strcmp0 (listed[0], "fake") == 0, "Basic: %s", listed[0]);
      basic_ref = tern_remote_ref_new (normalised, "fake");
      tern_window_load_model (w, basic_ref);
      CHECK (wait_for (w, not_loading, 60));
      CHECKF (tern_window_has_model (w), "Basic: %s", tern_window_get_last_error (w));
      tern_connections_remove (settings, normalised);
      gone = tern_connections_get_url (normalised);
      CHECKF (strstr (gone, "s3cret") == NULL, "removed with its password: %s", gone);
    }
    g_socket_service_stop (fake);
    g_socket_listener_close (G_SOCKET_LISTENER (fake));
  }

  tn_model_free (m);
  return app_test_end (NULL, tmp, "test-app-remote");
}
