/* main.c: tern, the desktop app. */
#include "config.h"

#include <glib/gi18n.h>
#include <signal.h>

#include "tern-application.h"
#include "tern.h"

int
main (int   argc,
      char *argv[])
{
  g_autoptr(TernApplication) app = NULL;
  tern_i18n_init ();
  /* Past a file size limit (ulimit -f), a write (a download, a saved chat)
   * should fail with EFBIG and be reported, not kill the app and its
   * unsaved work. */
  signal (SIGXFSZ, SIG_IGN);
  tn_sigbus_say (_("tern: a file in use (the model, or its repack cache) was truncated or "
                   "rewritten while it was read; Tern stopped. Start it again once the file is "
                   "complete"));

  g_set_application_name (_("Tern"));
  app = tern_application_new (G_APPLICATION_DEFAULT_FLAGS);
  return g_application_run (G_APPLICATION (app), argc, argv);
}
