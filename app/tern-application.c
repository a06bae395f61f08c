/* tern-application.c */
#include "config.h"

#include <glib/gi18n.h>
#include <locale.h>

#include "tern.h"
#include "tern-application.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-connections.h"
#endif
#include "tern-paths.h"
#include "tern-preferences-window.h"
#include "tern-window.h"

struct _TernApplication {
  AdwApplication parent_instance;
  GSettings *settings;
  gboolean demo;
  char *server_url;    /* while the local server runs */
  char *server_status;
};

G_DEFINE_FINAL_TYPE (TernApplication, tern_application, ADW_TYPE_APPLICATION)

enum { SIGNAL_SERVER_STATUS_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

void
tern_application_set_server_state (TernApplication *self,
                                   const char      *url,
                                   const char      *status)
{
  g_return_if_fail (TERN_IS_APPLICATION (self));

  g_free (self->server_url);
  self->server_url = g_strdup (url);
  g_free (self->server_status);
  self->server_status = g_strdup (status);
  g_signal_emit (self, signals[SIGNAL_SERVER_STATUS_CHANGED], 0);
}

const char *
tern_application_get_server_url (TernApplication *self)
{
  g_return_val_if_fail (TERN_IS_APPLICATION (self), NULL);
  return self->server_url;
}

const char *
tern_application_get_server_status (TernApplication *self)
{
  g_return_val_if_fail (TERN_IS_APPLICATION (self), NULL);
  return self->server_status ? self->server_status : _("Off");
}

void
tern_i18n_init (void)
{
  const char *dir = g_getenv ("TERN_LOCALEDIR");
  /* The build tree's po/ or the running prefix's locale folder
   * (paths/tern-paths.h); TERN_LOCALEDIR overrides both. */
  g_autofree char *found = tern_paths_locale_dir ();

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, dir != NULL && *dir != '\0' ? dir : found);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
}

GSettings *
tern_settings_new (void)
{
  GSettingsSchemaSource *installed = g_settings_schema_source_get_default ();
  g_autofree char *own_dir = tern_paths_schema_dir ();
  g_autoptr(GSettingsSchema) schema = NULL;

  /* The schema beside the running program first: installed in a prefix
   * that XDG_DATA_DIRS does not name (a copied tree, /opt), or compiled in
   * the build tree (make run, the tests); and not an older Tern's schema
   * installed elsewhere on the system. */
  if (own_dir != NULL)
    {
      g_autoptr(GSettingsSchemaSource) source =
        g_settings_schema_source_new_from_directory (own_dir, installed, FALSE, NULL);
      if (source != NULL)
        schema = g_settings_schema_source_lookup (source, TERN_APP_ID, FALSE);
    }
  if (schema == NULL && installed != NULL)
    schema = g_settings_schema_source_lookup (installed, TERN_APP_ID, TRUE);
  if (schema == NULL)
    g_error ("the GSettings schema %s is not installed (run glib-compile-schemas)", TERN_APP_ID);
  return g_settings_new_full (schema, NULL, NULL);
}

char *
tern_chats_dir (void)
{
  return g_build_filename (g_get_user_data_dir (), "tern", "chats", NULL);
}

char *
tern_demo_model_path (GSettings *settings)
{
  g_autofree char *configured = g_settings_get_string (settings, "demo-model-path");
  const char *env = g_getenv ("TERN_DEMO_MODEL");

  if (configured != NULL && *configured)
    return g_steal_pointer (&configured);
  if (env != NULL && *env)
    return g_strdup (env);
  return g_build_filename (g_get_user_cache_dir (), "tern", "tern-demo-random-weights.gguf",
                           NULL);
}

GSettings *
tern_application_get_settings (TernApplication *self)
{
  return self->settings;
}

/* A GSettings string is UTF-8, a file name any bytes: a name that is not
 * UTF-8 (a Latin-1 "é" from an old archive) raised GLib's critical and the
 * model was forgotten. Such a name is kept as its file: URI, which
 * round-trips any bytes; every other path stays as it was, so that the
 * value older versions wrote, and read, is unchanged. */
void
tern_last_model_set (GSettings  *settings,
                     const char *path,
                     const char *tag)
{
  g_autofree char *stored = tern_paths_to_stored (path);

  /* A relative name a URI cannot hold as it is; NULL still, forgotten,
   * not a critical. */
  if (stored == NULL)
    {
      g_autofree char *absolute = g_canonicalize_filename (path, NULL);

      stored = tern_paths_to_stored (absolute);
    }
  g_settings_set_string (settings, "last-model", stored != NULL ? stored : "");
  g_settings_set_string (settings, "last-model-tag", tag != NULL ? tag : "");
}

char *
tern_last_model_get (GSettings *settings)
{
  g_autofree char *last = g_settings_get_string (settings, "last-model");

  if (last == NULL || *last == '\0')
    return NULL;
  /* docs/APP.md: a file: URI of another host opens nothing. */
  return tern_paths_from_stored (last);
}

static TernWindow *
get_window (TernApplication *self)
{
  GtkWindow *window = gtk_application_get_active_window (GTK_APPLICATION (self));

  if (window == NULL)
    window = GTK_WINDOW (tern_window_new (GTK_APPLICATION (self)));
  return TERN_WINDOW (window);
}

static void
tern_application_activate (GApplication *app)
{
  TernApplication *self = TERN_APPLICATION (app);
  gboolean fresh = gtk_application_get_active_window (GTK_APPLICATION (app)) == NULL;
  TernWindow *window = get_window (self);

  gtk_window_present (GTK_WINDOW (window));
  if (!fresh)
    return;
  if (self->demo)
    tern_window_use_demo_model (window);
  else
    {
      g_autofree char *setting = g_settings_get_string (self->settings, "last-model");
      g_autofree char *last = tern_last_model_get (self->settings);
      g_autofree char *tag = g_settings_get_string (self->settings, "last-model-tag");

      /* A store tag's model comes back with its drafters, not its flags
       * (the mode and speculation stay as they were left). */
      if (last != NULL && g_file_test (last, G_FILE_TEST_IS_REGULAR))
        tern_window_load_tag (window, last, *tag ? tag : NULL, FALSE);
      /* Removed since (the model panel, a file manager): the start page
       * alone said "No Model Loaded", as if none had ever been chosen. */
      else if (setting != NULL && *setting)
        {
          tern_window_say_model_gone (window, last != NULL ? last : setting);
          /* Said once: the next start is a plain one. */
          g_settings_set_string (self->settings, "last-model", "");
          g_settings_set_string (self->settings, "last-model-tag", "");
        }
    }
}

static void
tern_application_open (GApplication *app,
                       GFile       **files,
                       int           n_files,
                       const char   *hint)
{
  TernWindow *window = get_window (TERN_APPLICATION (app));
  g_autofree char *path = NULL;

  (void) hint;
  gtk_window_present (GTK_WINDOW (window));
  if (n_files < 1)
    return;
  path = g_file_get_path (files[0]);
  if (path != NULL)
    tern_window_load_model (window, path);
}

static int
tern_application_handle_local_options (GApplication *app,
                                       GVariantDict *options)
{
  TernApplication *self = TERN_APPLICATION (app);

  if (g_variant_dict_contains (options, "version"))
    {
      g_print ("tern %s\n", TN_VERSION_STRING);
      return 0;
    }
  self->demo = g_variant_dict_contains (options, "demo");
  return -1;
}

static void
action_quit (GSimpleAction *action,
             GVariant      *param,
             gpointer       data)
{
  TernApplication *self = data;
  GList *windows = gtk_application_get_windows (GTK_APPLICATION (self));

  (void) action;
  (void) param;
  /* Closing each window stops its engine thread (cancelling a running
   * answer within one decode step) before the process goes. */
  while (windows != NULL)
    {
      GtkWindow *w = windows->data;
      windows = windows->next;
      gtk_window_close (w);
    }
  g_application_quit (G_APPLICATION (self));
}

static void
on_server_status_changed (TernApplication       *self,
                          TernPreferencesWindow *prefs)
{
  tern_preferences_window_set_server_status (prefs, tern_application_get_server_status (self));
}

static void
action_preferences (GSimpleAction *action,
                    GVariant      *param,
                    gpointer       data)
{
  TernApplication *self = data;
  TernPreferencesWindow *prefs;
  GtkWindow *parent = gtk_application_get_active_window (GTK_APPLICATION (self));

  (void) action;
  (void) param;
  prefs = tern_preferences_window_new (parent, self->settings);
  /* The server switch shows what the server does. */
  tern_preferences_window_set_server_status (prefs, tern_application_get_server_status (self));
  g_signal_connect_object (self, "server-status-changed", G_CALLBACK (on_server_status_changed),
                           prefs, 0);
  if (TERN_IS_WINDOW (parent))
    tern_preferences_window_set_model_path (prefs,
                                            tern_window_get_model_path (TERN_WINDOW (parent)));
  gtk_window_present (GTK_WINDOW (prefs));
}

static void
action_about (GSimpleAction *action,
              GVariant      *param,
              gpointer       data)
{
  TernApplication *self = data;
  static const char *developers[] = { "The Tern authors", NULL };
  GtkWidget *about;

  (void) action;
  (void) param;
  about = g_object_new (ADW_TYPE_ABOUT_WINDOW,
                        "transient-for", gtk_application_get_active_window (GTK_APPLICATION (self)),
                        "application-name", _("Tern"),
                        "application-icon", TERN_APP_ID,
                        "version", TN_VERSION_STRING,
                        "developer-name", _("The Tern authors"),
                        "developers", developers,
                        "license-type", GTK_LICENSE_MIT_X11,
                        "comments", _("Run language models on your own computer, fast."),
                        "translator-credits", _("translator-credits"),
                        NULL);
  gtk_window_present (GTK_WINDOW (about));
}

static const GActionEntry app_entries[] = {
  { "quit", action_quit, NULL, NULL, NULL, { 0 } },
  { "preferences", action_preferences, NULL, NULL, NULL, { 0 } },
  { "about", action_about, NULL, NULL, NULL, { 0 } },
};

/* The app's icon from its own prefix: the icon theme looks only where
 * XDG_DATA_DIRS says, which need not name a tree copied to another prefix.
 * (A path it already searches is searched once more: harmless.) */
static void
add_own_icons (void)
{
  g_autofree char *datadir = NULL;
  g_autofree char *icons = NULL;

  if (tern_paths_prefix () == NULL)
    return;
  datadir = tern_paths_datadir ();
  icons = g_build_filename (datadir, "icons", NULL);
  gtk_icon_theme_add_search_path (gtk_icon_theme_get_for_display (gdk_display_get_default ()),
                                  icons);
}

static void
tern_application_startup (GApplication *app)
{
  TernApplication *self = TERN_APPLICATION (app);
  static const char *quit[] = { "<Primary>q", NULL };
  static const char *prefs[] = { "<Primary>comma", NULL };
  static const char *new_chat[] = { "<Primary>n", NULL };
  static const char *open[] = { "<Primary>o", NULL };
  static const char *stop[] = { "Escape", NULL };
  static const char *regenerate[] = { "<Primary>r", NULL };
  static const char *pin[] = { "<Primary>p", NULL };
  static const char *pin_panel[] = { "F9", NULL };
  static const char *help[] = { "<Primary>question", NULL };
  static const char *edit[] = { "<Primary>e", NULL };
  static const char *add_image[] = { "<Primary><Shift>o", NULL };
  static const char *export_chat[] = { "<Primary><Shift>e", NULL };
  static const char *close_window[] = { "<Primary>w", NULL };
  g_autoptr(GtkCssProvider) css = gtk_css_provider_new ();

  G_APPLICATION_CLASS (tern_application_parent_class)->startup (app);

  g_action_map_add_action_entries (G_ACTION_MAP (self), app_entries, G_N_ELEMENTS (app_entries),
                                   self);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.quit", quit);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "app.preferences", prefs);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.new-chat", new_chat);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.open-model", open);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.stop", stop);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.regenerate", regenerate);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.pin", pin);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.show-pin-panel", pin_panel);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.show-help-overlay", help);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.edit-last", edit);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.add-image", add_image);
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "win.export-chat", export_chat);
  /* GtkWindow's own action. */
  gtk_application_set_accels_for_action (GTK_APPLICATION (self), "window.close", close_window);

  gtk_css_provider_load_from_resource (css, "/io/github/tern/Tern/style.css");
  gtk_style_context_add_provider_for_display (gdk_display_get_default (),
                                              GTK_STYLE_PROVIDER (css),
                                              GTK_STYLE_PROVIDER_PRIORITY_APPLICATION);
  add_own_icons ();
#ifdef TERN_HAVE_MANAGER
  tern_connections_migrate (self->settings);
#endif
}

static void
tern_application_finalize (GObject *object)
{
  TernApplication *self = TERN_APPLICATION (object);

  g_clear_object (&self->settings);
  g_free (self->server_url);
  g_free (self->server_status);
  G_OBJECT_CLASS (tern_application_parent_class)->finalize (object);
}

static void
tern_application_class_init (TernApplicationClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GApplicationClass *app_class = G_APPLICATION_CLASS (klass);

  object_class->finalize = tern_application_finalize;
  app_class->activate = tern_application_activate;
  app_class->open = tern_application_open;
  app_class->startup = tern_application_startup;
  app_class->handle_local_options = tern_application_handle_local_options;

  signals[SIGNAL_SERVER_STATUS_CHANGED] =
    g_signal_new ("server-status-changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL,
                  NULL, NULL, G_TYPE_NONE, 0);
}

static void
tern_application_init (TernApplication *self)
{
  static const GOptionEntry options[] = {
    { "demo", 0, 0, G_OPTION_ARG_NONE, NULL,
      N_("Start on the demo model (random weights)"), NULL },
    { "version", 0, 0, G_OPTION_ARG_NONE, NULL, N_("Print the version and exit"), NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };

  self->settings = tern_settings_new ();
  g_application_add_main_option_entries (G_APPLICATION (self), options);
  g_application_set_option_context_parameter_string (G_APPLICATION (self), _("[MODEL.gguf]"));
}

TernApplication *
tern_application_new (GApplicationFlags flags)
{
  return g_object_new (TERN_TYPE_APPLICATION,
                       "application-id", TERN_APP_ID,
                       "flags", flags | G_APPLICATION_HANDLES_OPEN,
                       "resource-base-path", "/io/github/tern/Tern",
                       NULL);
}
