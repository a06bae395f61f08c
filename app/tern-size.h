/* tern-size.h: a size as the app shows it. */
#pragma once

#include <glib.h>

#ifdef TERN_HAVE_MANAGER
#include "tern-manager.h"
#endif

G_BEGIN_DECLS

/* In the app's own units and the language's decimal separator
 * (tern_manager_format_size: "1,5 Go" in French where LC_NUMERIC is C);
 * g_format_size's words come from GLib's catalog, often not installed, and
 * its separator from LC_NUMERIC alone. A build without the model manager
 * has only GLib's. */
static inline char *
tern_app_format_size (guint64 bytes)
{
#ifdef TERN_HAVE_MANAGER
  return tern_manager_format_size (bytes);
#else
  return g_format_size (bytes);
#endif
}

G_END_DECLS
