/* tern-size.h: a size as the app shows it. */
#pragma once

#include <locale.h>
#include <string.h>

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

/* The decimal separator the app's sizes have ("131,1 kB" in German). */
static inline const char *
tern_app_decimal_separator (void)
{
#ifdef TERN_HAVE_MANAGER
  return tern_manager_decimal_separator ();
#else
  return localeconv ()->decimal_point;
#endif
}

/* Whether LC_NUMERIC is a locale's own, not C or POSIX: printf's figures
 * then have its decimal point, and with the ' flag ("%'d", which the app's
 * counts of tokens and bytes take) its grouping: "16.384" in German,
 * "16 384" (a narrow no-break space) in French. In C they are not grouped. */
static inline gboolean
tern_app_numeric_locale (void)
{
  const char *numeric = setlocale (LC_NUMERIC, NULL);

  return numeric != NULL && !g_str_equal (numeric, "C") && !g_str_equal (numeric, "POSIX")
         && !g_str_has_prefix (numeric, "C.");
}

/* text, its figures (printf's, with LC_NUMERIC's point) given the sizes'
 * separator: German and French words with numbers in the C locale (a
 * locale not generated, LANGUAGE set) read "4003.9 Token/s" beside
 * "131,1 kB". A point between two digits is a decimal one in the figures
 * this is for. With a locale set for numbers, both are its own already,
 * and a point there groups digits: German "16.384 Token" is no decimal. */
static inline char *
tern_app_localize_decimals (const char *text)
{
  const char *sep = tern_app_decimal_separator ();
  GString *s;

  if (text == NULL || g_str_equal (sep, ".") || tern_app_numeric_locale ())
    return g_strdup (text);
  s = g_string_sized_new (strlen (text) + 8);
  for (const char *p = text; *p != '\0'; p++)
    if (*p == '.' && p > text && g_ascii_isdigit (p[-1]) && g_ascii_isdigit (p[1]))
      g_string_append (s, sep);
    else
      g_string_append_c (s, *p);
  return g_string_free (s, FALSE);
}

G_END_DECLS
