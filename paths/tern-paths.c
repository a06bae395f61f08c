/* tern-paths.c: where the running program finds its data (tern-paths.h). */
#include "tern-paths.h"

#include <string.h>

#ifndef TERN_PREFIX
#error "TERN_PREFIX, TERN_BINDIR, TERN_DATADIR and TERN_LOCALEDIR come from paths/meson.build"
#endif

/* How far above the executable a build tree's root may be: build/cli/tern-cli
 * is one folder down, build/tests/app/test-app-window two. */
#define BUILD_ROOT_MAX_UP 3

typedef struct {
  char *prefix;
  char *build_root;
} Location;

/* Keeps "/" for a prefix of "/bin/tern" instead of an empty string. */
static char *
strip_suffix_dir (const char *dir,
                  const char *suffix)
{
  gsize n = strlen (dir), m = strlen (suffix);

  if (m == 0 || n <= m || dir[n - m - 1] != '/' || strcmp (dir + n - m, suffix) != 0)
    return NULL;
  return n - m - 1 == 0 ? g_strdup ("/") : g_strndup (dir, n - m - 1);
}

static char *
find_build_root (const char *dir)
{
  g_autofree char *d = g_strdup (dir);

  for (int up = 0; up <= BUILD_ROOT_MAX_UP; up++)
    {
      g_autofree char *marker = g_build_filename (d, "meson-private", "coredata.dat", NULL);
      char *parent;

      if (g_file_test (marker, G_FILE_TEST_IS_REGULAR))
        return g_steal_pointer (&d);
      parent = g_path_get_dirname (d);
      if (strcmp (parent, d) == 0)
        {
          g_free (parent);
          break;
        }
      g_free (d);
      d = parent;
    }
  return NULL;
}

static const Location *
location (void)
{
  static gsize once = 0;
  static Location loc;

  if (g_once_init_enter (&once))
    {
      /* /proc/self/exe: the real file, with symbolic links resolved (a link
       * in ~/bin to PREFIX/bin/tern still finds PREFIX). */
      g_autofree char *exe = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *dir = exe != NULL ? g_path_get_dirname (exe) : NULL;

      /* An absolute bindir is not below the prefix: nothing to derive. */
      if (dir != NULL && !g_path_is_absolute (TERN_BINDIR))
        loc.prefix = strip_suffix_dir (dir, TERN_BINDIR);
      if (dir != NULL && loc.prefix == NULL)
        loc.build_root = find_build_root (dir);
      g_once_init_leave (&once, 1);
    }
  return &loc;
}

const char *
tern_paths_prefix (void)
{
  return location ()->prefix;
}

const char *
tern_paths_build_root (void)
{
  return location ()->build_root;
}

/* PREFIX/DIR for an install directory given relative to the prefix. */
static char *
below_prefix (const char *dir)
{
  const char *prefix = tern_paths_prefix ();

  if (g_path_is_absolute (dir))
    return g_strdup (dir);
  return g_build_filename (prefix != NULL ? prefix : TERN_PREFIX, dir, NULL);
}

char *
tern_paths_datadir (void)
{
  return below_prefix (TERN_DATADIR);
}

char *
tern_paths_schema_dir (void)
{
  const char *build = tern_paths_build_root ();
  g_autofree char *dir = NULL;
  g_autofree char *compiled = NULL;

  if (build != NULL)
    dir = g_build_filename (build, "data", NULL);
  else
    {
      g_autofree char *datadir = tern_paths_datadir ();

      dir = g_build_filename (datadir, "glib-2.0", "schemas", NULL);
    }
  compiled = g_build_filename (dir, "gschemas.compiled", NULL);
  if (!g_file_test (compiled, G_FILE_TEST_IS_REGULAR))
    return NULL;
  return g_steal_pointer (&dir);
}

char *
tern_paths_locale_dir (void)
{
  const char *build = tern_paths_build_root ();

  if (build != NULL)
    return g_build_filename (build, "po", NULL);
  return below_prefix (TERN_LOCALEDIR);
}

char *
tern_paths_catalog (void)
{
  const char *build = tern_paths_build_root ();
  g_autofree char *datadir = NULL;

  if (build != NULL)
    return g_build_filename (build, "manager", "models.json", NULL);
  datadir = tern_paths_datadir ();
  return g_build_filename (datadir, "tern", "catalog", "models.json", NULL);
}

char *
tern_paths_xclbin_dir (void)
{
  const char *env = g_getenv ("TERN_XCLBIN_DIR");
  const char *build = tern_paths_build_root ();
  g_autofree char *datadir = NULL;

  if (env != NULL && *env != '\0')
    return g_strdup (env);
  if (build != NULL)
    return g_build_filename (build, "xclbins", NULL);
  datadir = tern_paths_datadir ();
  return g_build_filename (datadir, "tern", "xclbins", NULL);
}

char *
tern_paths_to_stored (const char *path)
{
  if (g_utf8_validate (path, -1, NULL) && !g_str_has_prefix (path, "file:"))
    return g_strdup (path);
  return g_filename_to_uri (path, NULL, NULL);
}

char *
tern_paths_from_stored (const char *text)
{
  g_autofree char *host = NULL;
  g_autofree char *path = NULL;

  if (!g_str_has_prefix (text, "file:"))
    return g_strdup (text);
  path = g_filename_from_uri (text, &host, NULL);
  if (host != NULL && g_ascii_strcasecmp (host, "localhost") != 0)
    return NULL;
  return g_steal_pointer (&path);
}
