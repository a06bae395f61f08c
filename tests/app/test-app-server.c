/* test-app-server: the Preferences switch that serves the app's loaded model
 * (server/tern-server.h) on 127.0.0.1, driven through its settings on the
 * real window under Xvfb: GET /health and /v1/models with libsoup, an API
 * key, a model replaced while serving, off, and quitting mid-answer with the
 * server on; a port another program holds. Its own test because libsoup
 * in the process pushes GLib's quark table past its first block, which GLib
 * never frees by design: seen only through the slow unwinder (see
 * meson.build).
 * Exit 77 when no display can be had. */
#include "config.h"

#include <locale.h>
#include <stdio.h>

#include <adwaita.h>
#include <libsoup/soup.h>

#include "tern.h"
#include "tern-application.h"
#include "tern-window.h"
#include "app-test.h"


static gboolean
server_running (TernWindow *w)
{
  return tern_window_get_server_url (w) != NULL;
}

static gboolean
server_stopped (TernWindow *w)
{
  return tern_window_get_server_url (w) == NULL;
}

/* GET base + path; the status code (0: no answer), the body in *body. */
static guint
http_get (const char *base,
          const char *path,
          const char *api_key,
          char      **body)
{
  g_autoptr(SoupSession) session = soup_session_new ();
  g_autofree char *uri = g_strconcat (base, path, NULL);
  g_autoptr(SoupMessage) msg = soup_message_new ("GET", uri);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;

  *body = NULL;
  if (msg == NULL)
    return 0;
  soup_session_set_timeout (session, 20);
  if (api_key != NULL)
    {
      g_autofree char *auth = g_strconcat ("Bearer ", api_key, NULL);
      soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization",
                                    auth);
    }
  bytes = soup_session_send_and_read (session, msg, NULL, &error);
  if (bytes == NULL)
    {
      *body = g_strdup (error->message);
      return 0;
    }
  *body = g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
  return soup_message_get_status (msg);
}

static GSettings *switch_settings;

static gboolean
switched_off (TernWindow *w)
{
  (void) w;
  return !g_settings_get_boolean (switch_settings, "server-enabled");
}

/* A port another program holds: the switch goes off, and the status says
 * so in words a person acts on, short enough for the toast. */
static void
test_port_in_use (TernWindow *w)
{
  GSettings *settings = tern_application_get_settings (
    TERN_APPLICATION (gtk_window_get_application (GTK_WINDOW (w))));
  g_autoptr(GSocketListener) other = g_socket_listener_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *want = NULL;
  guint16 port;

  {
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new (lo, 0);
    g_autoptr(GSocketAddress) bound = NULL;

    CHECK (g_socket_listener_add_address (other, any, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL,
                                          &bound, &error));
    port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  }
  switch_settings = settings;
  g_settings_set_int (settings, "server-port", port);
  g_settings_set_boolean (settings, "server-enabled", TRUE);
  CHECK (wait_for (w, switched_off, 30));
  want = g_strdup_printf ("Port %u is in use by another program", port);
  CHECKF (strstr (tern_window_get_server_status (w), want) != NULL, "%s", tern_window_get_server_status (w));
  CHECKF (strstr (tern_window_get_server_status (w), "Error binding") == NULL, "%s",
          tern_window_get_server_status (w));
  CHECK (tern_window_get_server_url (w) == NULL);
  g_settings_set_int (settings, "server-port", 0);
}

/* The Preferences switch: the app's loaded model served on 127.0.0.1, with
 * an optional API key; off again; back after the model is replaced. */
static guint server_changes;

static void
on_server_status_changed (TernApplication *app)
{
  (void) app;
  server_changes++;
}

static void
test_local_server (TernWindow *w,
                   const char *model)
{
  GSettings *settings = tern_application_get_settings (
    TERN_APPLICATION (gtk_window_get_application (GTK_WINDOW (w))));
  g_autofree char *base = NULL;
  g_autofree char *body = NULL;
  g_autofree char *old_base = NULL;
  guint status;

  g_settings_set_string (settings, "server-api-key", "");
  g_settings_set_boolean (settings, "server-enabled", TRUE);
  CHECK (wait_for (w, server_running, 30));
  if (!server_running (w))
    {
      fprintf (stderr, "server: %s\n", tern_window_get_server_status (w));
      return;
    }
  CHECKF (g_str_has_prefix (tern_window_get_server_url (w), "http://127.0.0.1:"), "%s",
          tern_window_get_server_url (w));
  CHECK (strstr (tern_window_get_server_status (w), tern_window_get_server_url (w)) != NULL);
  /* The application holds the server's state (Preferences read it there),
   * and told of each change. */
  {
    TernApplication *app = TERN_APPLICATION (gtk_window_get_application (GTK_WINDOW (w)));

    CHECK (g_strcmp0 (tern_application_get_server_url (app), tern_window_get_server_url (w)) == 0);
    CHECK (g_strcmp0 (tern_application_get_server_status (app),
                      tern_window_get_server_status (w)) == 0);
    CHECKF (server_changes >= 2, "%u server-status-changed", server_changes);
  }
  /* The header says the server runs. */
  CHECK (gtk_widget_get_visible (GTK_WIDGET (gtk_widget_get_template_child (
    GTK_WIDGET (w), TERN_TYPE_WINDOW, "server_indicator"))));
  base = g_strdup (tern_window_get_server_url (w));
  if (g_str_has_suffix (base, "/v1"))
    base[strlen (base) - 3] = '\0';

  status = http_get (base, "/health", NULL, &body);
  CHECKF (status == 200 && strstr (body, "\"status\":\"ok\"") != NULL, "%u %s", status, body);
  fprintf (stderr, "server: %s/health -> %u %s\n", base, status, body);
  g_clear_pointer (&body, g_free);
  status = http_get (base, "/v1/models", NULL, &body);
  CHECKF (status == 200 && strstr (body, "\"object\":\"list\"") != NULL
          && strstr (body, "test-model") != NULL, "%u %s", status, body);
  fprintf (stderr, "server: %s/v1/models -> %u %s\n", base, status, body);
  g_clear_pointer (&body, g_free);

  /* An API key: refused without it, answered with it. */
  g_settings_set_string (settings, "server-api-key", "sekrit");
  CHECK (wait_for (w, server_stopped, 10) || TRUE);
  CHECK (wait_for (w, server_running, 30));
  g_free (base);
  base = g_strdup (tern_window_get_server_url (w));
  if (base != NULL && g_str_has_suffix (base, "/v1"))
    base[strlen (base) - 3] = '\0';
  if (base != NULL)
    {
      status = http_get (base, "/v1/models", NULL, &body);
      CHECKF (status == 401, "no key: %u %s", status, body);
      g_clear_pointer (&body, g_free);
      status = http_get (base, "/v1/models", "sekrit", &body);
      CHECKF (status == 200, "with the key: %u %s", status, body);
      g_clear_pointer (&body, g_free);
    }

  /* The model is replaced: the server stops before the old one goes and
   * comes back serving the new one. */
  old_base = g_strdup (base);
  activate (w, "load-model", g_variant_new_string (model));
  CHECK (wait_for (w, not_loading, 60));
  CHECK (wait_for (w, idle_engine, 60));
  CHECK (wait_for (w, server_running, 30));
  if (server_running (w))
    {
      g_autofree char *again = g_strdup (tern_window_get_server_url (w));
      if (g_str_has_suffix (again, "/v1"))
        again[strlen (again) - 3] = '\0';
      status = http_get (again, "/health", NULL, &body);
      CHECKF (status == 200, "after a reload: %u %s", status, body);
      g_clear_pointer (&body, g_free);
    }

  /* Off: nothing listens any more. */
  g_settings_set_boolean (settings, "server-enabled", FALSE);
  CHECK (wait_for (w, server_stopped, 30));
  CHECK (!gtk_widget_get_visible (GTK_WIDGET (gtk_widget_get_template_child (
    GTK_WIDGET (w), TERN_TYPE_WINDOW, "server_indicator"))));
  if (old_base != NULL && server_stopped (w))
    {
      status = http_get (old_base, "/health", NULL, &body);
      CHECKF (status == 0, "a stopped server answered %u %s", status, body);
      g_clear_pointer (&body, g_free);
    }
  g_settings_set_string (settings, "server-api-key", "");
  /* On again for the quit test: quitting stops it too. */
  g_settings_set_boolean (settings, "server-enabled", TRUE);
  CHECK (wait_for (w, server_running, 30));
}

static void
test_quit_while_serving (TernWindow     *w,
                         GtkApplication *app)
{
  gint64 t0, end;
  double quit_ms;

  tern_window_set_composer_text (w, "One more long story, please.");
  activate (w, "send", NULL);
  CHECK (wait_for (w, has_tokens, 60));
  t0 = g_get_monotonic_time ();
  g_action_group_activate_action (G_ACTION_GROUP (app), "quit", NULL);
  end = t0 + 10 * G_USEC_PER_SEC;
  while (gtk_application_get_windows (app) != NULL && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, FALSE);
  quit_ms = (g_get_monotonic_time () - t0) / 1000.0;
  CHECK (gtk_application_get_windows (app) == NULL);
  fprintf (stderr, "quit mid-answer with the server on: %.1f ms\n", quit_ms);
  CHECKF (quit_ms < 5000, "quitting took %.0f ms", quit_ms);
}

int
main (void)
{
  g_autofree char *tmp = NULL;
  g_autofree char *model = NULL;
  g_autoptr(TernApplication) app = NULL;
  tn_mkmodel_params p = app_test_model_params ();
  tn_error err = { 0 };
  GSettings *settings;
  TernWindow *w;

  if ((tmp = app_test_start ("tern-app-server")) == NULL)
    return 1;

  model = g_build_filename (tmp, "test-model.gguf", NULL);
  if (tn_mkmodel (&p, model, &err) != TN_OK)
    {
      fprintf (stderr, "mkmodel: %s\n", err.message);
      return 1;
    }

  if ((app = app_test_application_new ()) == NULL)
    return 1;
  settings = tern_application_get_settings (app);
  g_settings_set_int (settings, "max-tokens", 400);
  g_settings_set_int (settings, "threads", 1);
  g_signal_connect (app, "server-status-changed", G_CALLBACK (on_server_status_changed), NULL);
  w = app_test_window_new (app, 0, 0);

  /* On before any model: it waits for one. */
  g_settings_set_int (settings, "server-port", 0);
  g_settings_set_boolean (settings, "server-enabled", TRUE);
  CHECK (tern_window_get_server_url (w) == NULL);
  fprintf (stderr, "server before a model: %s\n", tern_window_get_server_status (w));

  if (app_test_load (w, model, 60))
    {
      test_port_in_use (w);
      test_local_server (w, model);
      test_quit_while_serving (w, GTK_APPLICATION (app));
    }

  return app_test_end (NULL, tmp, "test-app-server");
}
