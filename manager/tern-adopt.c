/* tern-adopt.c: files the user already has, found in other tools' model
 * folders, used instead of downloading them again (docs/MODELS.md).
 *
 * Two of those tools name their files by content: Hugging Face's cache keeps
 * an LFS file as models--OWNER--REPO/blobs/SHA256 and Ollama as
 * blobs/sha256-SHA256, so a file with a known hash is one stat away. The
 * others (llama.cpp's cache, LM Studio) keep plain names: there a file of the
 * same size is a candidate. Every candidate is read and hashed before it is
 * used; a name is never trusted. */
#include "tern-manager-private.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define ADOPT_SCAN_DEPTH 4
#define ADOPT_SCAN_FILES 20000  /* a bound on a walk of somebody's disk */

static const char *
home_dir (void)
{
  const char *home = g_getenv ("HOME");

  return home != NULL && home[0] != '\0' ? home : g_get_home_dir ();
}

static char *
env_or (const char *name,
        const char *fallback_under_home)
{
  const char *value = g_getenv (name);

  if (value != NULL && value[0] != '\0')
    return g_strdup (value);
  return g_build_filename (home_dir (), fallback_under_home, NULL);
}

/* Hugging Face's cache: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub. */
static char *
hf_cache_dir (void)
{
  const char *hub = g_getenv ("HF_HUB_CACHE");
  const char *hf_home = g_getenv ("HF_HOME");

  if (hub != NULL && hub[0] != '\0')
    return g_strdup (hub);
  if (hf_home != NULL && hf_home[0] != '\0')
    return g_build_filename (hf_home, "hub", NULL);
  return g_build_filename (home_dir (), ".cache", "huggingface", "hub", NULL);
}

static gboolean
regular_of_size (const char *path,
                 guint64     size)
{
  struct stat st;

  return stat (path, &st) == 0 && S_ISREG (st.st_mode) && (guint64) st.st_size == size;
}

static gboolean
has_bytes (const char   *path,
           const char   *sha256,
           guint64       size,
           GCancellable *cancellable)
{
  g_autofree char *sha = NULL;

  if (!regular_of_size (path, size))
    return FALSE;
  sha = tern_manager_sha256_file (path, NULL, cancellable, NULL);
  return sha != NULL && g_ascii_strcasecmp (sha, sha256) == 0;
}

/* Files named by their hash. */
static char *
find_by_name (const char   *sha256,
              guint64       size,
              GCancellable *cancellable)
{
  g_autofree char *hf = hf_cache_dir ();
  g_autofree char *ollama = env_or ("OLLAMA_MODELS", ".ollama/models");
  g_autofree char *lower = g_ascii_strdown (sha256, -1);
  g_autoptr(GDir) dir = g_dir_open (hf, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *blob = NULL;

      if (!g_str_has_prefix (name, "models--"))
        continue;
      blob = g_build_filename (hf, name, "blobs", lower, NULL);
      if (has_bytes (blob, lower, size, cancellable))
        return g_steal_pointer (&blob);
    }
  {
    g_autofree char *blob_name = g_strdup_printf ("sha256-%s", lower);
    g_autofree char *blob = g_build_filename (ollama, "blobs", blob_name, NULL);

    if (has_bytes (blob, lower, size, cancellable))
      return g_steal_pointer (&blob);
  }
  return NULL;
}

/* Same-size .gguf files in a folder tree, then their hashes. */
static char *
find_by_size (const char   *root,
              int           depth,
              const char   *sha256,
              guint64       size,
              guint        *budget,
              GCancellable *cancellable)
{
  g_autoptr(GDir) dir = g_dir_open (root, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL && *budget > 0)
    {
      g_autofree char *path = g_build_filename (root, name, NULL);
      struct stat st;

      (*budget)--;
      if (name[0] == '.' || lstat (path, &st) != 0)
        continue;
      if (S_ISDIR (st.st_mode) && depth > 0)
        {
          char *found = find_by_size (path, depth - 1, sha256, size, budget, cancellable);

          if (found != NULL)
            return found;
        }
      else if ((S_ISREG (st.st_mode) || S_ISLNK (st.st_mode)) && g_str_has_suffix (name, ".gguf")
               && has_bytes (path, sha256, size, cancellable))
        return g_steal_pointer (&path);
    }
  return NULL;
}

char *
tern_manager_find_local_copy (const char   *sha256,
                              guint64       size,
                              GCancellable *cancellable)
{
  const char *off = g_getenv ("TERN_ADOPT");
  guint budget = ADOPT_SCAN_FILES;
  char *found;

  if (sha256 == NULL || !tern_manager_is_sha256 (sha256) || size == 0 || (off != NULL && g_str_equal (off, "0")))
    return NULL;
  found = find_by_name (sha256, size, cancellable);
  if (found == NULL)
    {
      g_autofree char *llama = env_or ("LLAMA_CACHE", ".cache/llama.cpp");
      g_autofree char *lmstudio = g_build_filename (home_dir (), ".lmstudio", "models", NULL);
      g_autofree char *lmstudio_old = g_build_filename (home_dir (), ".cache", "lm-studio", "models", NULL);
      const char *roots[] = { llama, lmstudio, lmstudio_old };

      for (guint i = 0; found == NULL && i < G_N_ELEMENTS (roots); i++)
        found = find_by_size (roots[i], ADOPT_SCAN_DEPTH, sha256, size, &budget, cancellable);
    }
  return found;
}

gboolean
tern_manager_link_copy (const char  *source,
                        const char  *dest,
                        GError     **error)
{
  int in, out;

  /* A reflink shares the blocks yet is a file of our own; a hard link is
   * the same file under our name; a symbolic link is last, since the other
   * tool may delete what it points to (`check` then says so). */
  in = open (source, O_RDONLY | O_CLOEXEC);
  if (in >= 0)
    {
      out = open (dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (out >= 0)
        {
          gboolean cloned = ioctl (out, FICLONE, in) == 0;

          close (out);
          if (cloned)
            {
              close (in);
              return TRUE;
            }
          unlink (dest);
        }
      close (in);
    }
  if (link (source, dest) == 0)
    return TRUE;
  if (symlink (source, dest) == 0)
    return TRUE;
  {
    int errsv = errno;

    g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, _("%s: cannot link to %s: %s"), dest, source,
                 g_strerror (errsv));
  }
  return FALSE;
}
