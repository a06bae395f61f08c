/* main.c: tern, the desktop app. */
#include "config.h"

#include <glib/gi18n.h>

#include "tern-application.h"

int
main (int   argc,
      char *argv[])
{
  g_autoptr(TernApplication) app = NULL;
  tern_i18n_init ();

  g_set_application_name (_("Tern"));
  app = tern_application_new (G_APPLICATION_DEFAULT_FLAGS);
  return g_application_run (G_APPLICATION (app), argc, argv);
}
