/* tern-paths.h: where the running program finds its data.
 *
 * Installed, the data is found relative to the executable: PREFIX/bin/tern
 * reads PREFIX/share/..., whatever PREFIX is (a package's /usr, a Flatpak's
 * /app, a folder the tree was copied to). Run from a meson build tree (make
 * run, the tests), it is found in that build tree. Only when neither applies
 * does the prefix configured at build time count.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The prefix the running executable is installed in (the folder above its
 * bindir), or NULL when it does not sit in a bindir. */
const char *tern_paths_prefix          (void);
/* The meson build tree the running executable was built in (found by
 * meson-private/coredata.dat at most three folders above it), or NULL. */
const char *tern_paths_build_root      (void);
/* PREFIX/DATADIR: the running prefix's, else the configured one. */
char       *tern_paths_datadir         (void);
/* Where the compiled GSettings schema is: the build tree's data/ folder, or
 * DATADIR/glib-2.0/schemas; NULL when neither has gschemas.compiled. */
char       *tern_paths_schema_dir      (void);
/* The folder of the message catalogs (LOCALEDIR): the build tree's po/ folder
 * (meson compiles LANG/LC_MESSAGES/tern.mo there), else PREFIX/LOCALEDIR. */
char       *tern_paths_locale_dir      (void);
/* The model catalog shipped with Tern: the build tree's copy
 * (manager/models.json), else DATADIR/tern/catalog/models.json. */
char       *tern_paths_catalog         (void);
/* The NPU kernel manifest's folder (xclbins/README.md): $TERN_XCLBIN_DIR,
 * else the build tree's xclbins/, else DATADIR/tern/xclbins. */
char       *tern_paths_xclbin_dir      (void);

/* A model file's path as a UTF-8 text (a GSettings string, JSON) holds
 * it: the plain path where it is UTF-8, which is what older versions wrote
 * and read, else its file: URI, which holds any bytes. NULL for a relative
 * path that is not UTF-8 (no URI holds it). */
char       *tern_paths_to_stored       (const char *path);
/* The local file a stored text names: a plain path as it is, a file: URI
 * as its file name. NULL for a file: value that is no URI (a relative
 * one, %00) or names another host: file://elsewhere/m.gguf is not the
 * /m.gguf of this machine. */
char       *tern_paths_from_stored     (const char *text);

G_END_DECLS
