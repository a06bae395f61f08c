/* main.c: tern, the desktop app. */
#include "config.h"

#include <locale.h>

#include <glib/gi18n.h>

#include "tern-application.h"
#include "tern-paths.h"

int
main (int   argc,
      char *argv[])
{
  g_autoptr(TernApplication) app = NULL;
  g_autofree char *localedir = tern_paths_locale_dir ();

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, localedir);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  g_set_application_name (_("Tern"));
  app = tern_application_new (G_APPLICATION_DEFAULT_FLAGS);
  return g_application_run (G_APPLICATION (app), argc, argv);
}
