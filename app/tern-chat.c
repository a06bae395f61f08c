/* tern-chat.c: a conversation and its files.
 *
 * The JSON keeps every figure of every assistant message, so that a chat
 * exported weeks later still says how fast each answer came.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "tern-chat.h"
#include "tern-engine-worker.h"
#include "tern-image.h"
#include "tern-size.h"
#include "tern.h"

#define TITLE_MAX_CHARS 48
/* The chat format this version writes, and the newest it reads: a file of
 * a later one (a newer Tern, the same chats folder synced) is not loaded,
 * since saving it again would drop what this version does not know. */
#define FORMAT_VERSION 1
/* The largest chat file read, and so the largest written: a chat saved
 * larger could never be opened again. Far above any real chat (a
 * million-token conversation is ~4 MiB; pictures are files of their own). */
#define MAX_FILE_BYTES (64 * 1024 * 1024)
/* json-glib's parser recurses once per nesting level: a file of 100,000
 * opening brackets would overflow the stack before any check of ours. A
 * chat nests four levels deep (chat, messages, message, stats or a run). */
#define MAX_DEPTH 32

struct _TernChat {
  GObject parent_instance;
  char *id;
  char *title;
  char *custom_title;  /* chosen by the user; NULL: from the first message */
  char *mode;
  char *model;
  char *system_prompt;
  char *draft;         /* what was being written, not sent; NULL: nothing */
  gint64 created;
  gint64 updated;
  guint context_start; /* messages before it are out of the model's context */
  GPtrArray *messages; /* TernMessage */
  /* The first messages known to give no title (answers, blank prompts):
   * each append looked past them all again, quadratic in a chat of empty
   * prompts. Lowered where messages go (tern_chat_take_from,
   * tern_chat_truncate): a prompt's text is not changed in place. */
  guint untitled;
  /* A copy not saved since it was read: the id of the chat whose folder
   * some of its pictures were read from; NULL: none. */
  char *images_from;
  /* Its file is a newer Tern's chat (tern_chat_load_or_newer): its id, a
   * title, the file's time and, when this version reads them all, its
   * messages' roles and text are known, and it is never saved. */
  gboolean newer;
  /* (With newer, all that holds for it.) Its file is larger than this
   * version reads and does not say newer: only its id and time known. */
  gboolean too_large;
  /* (With newer.) Listed from its head only: why the rest was not read. */
  TernChatHeadOnly head_only;
};

G_DEFINE_FINAL_TYPE (TernChat, tern_chat, G_TYPE_OBJECT)

enum {
  PROP_0,
  PROP_TITLE,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

/* ---------------------------------------------------------------- images
 *
 * A message's images are kept beside the chat, in DIR/ID.images/, one file
 * per distinct image named by the sha256 of its bytes ("<64 hex>.png"): the
 * same picture sent twice is stored once, a name can be checked against
 * its content on reading, and a name from a file can never reach outside
 * that folder. */

#define MAX_IMAGE_BYTES (256 * 1024 * 1024)

static const char *
image_extension (GBytes *bytes)
{
  gsize n;
  const guint8 *b = g_bytes_get_data (bytes, &n);
  const char *format = tern_image_sniff (b, n);

  if (format == NULL)
    return "img";
  return g_str_equal (format, "jpeg") ? "jpg" : format;
}

static char *
image_file_name (GBytes *bytes)
{
  g_autofree char *hash = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);

  return g_strconcat (hash, ".", image_extension (bytes), NULL);
}

/* The file name of a message's K-th image, hashed once per image (the
 * table holds the bytes, so a pointer is never reused while it is a key). */
static const char *
message_image_name (TernMessage *m,
                    guint        k)
{
  GBytes *bytes = g_ptr_array_index (m->images, k);
  const char *name;

  if (m->image_names == NULL)
    m->image_names = g_hash_table_new_full (g_direct_hash, g_direct_equal,
                                            (GDestroyNotify) g_bytes_unref, g_free);
  name = g_hash_table_lookup (m->image_names, bytes);
  if (name == NULL)
    {
      char *made = image_file_name (bytes);

      g_hash_table_insert (m->image_names, g_bytes_ref (bytes), made);
      name = made;
    }
  return name;
}

/* What image_file_name makes, and nothing else. */
static gboolean
image_name_valid (const char *name)
{
  static const char *const exts[] = { "png", "jpg", "gif", "webp", "img" };

  for (int i = 0; i < 64; i++)
    if (!g_ascii_isxdigit (name[i]) || g_ascii_isupper (name[i]))
      return FALSE;
  if (name[64] != '.')
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (exts); i++)
    if (g_str_equal (name + 65, exts[i]))
      return TRUE;
  return FALSE;
}

static char *
images_dir (const char *dir,
            const char *id)
{
  g_autofree char *name = g_strconcat (id, ".images", NULL);

  return g_build_filename (dir, name, NULL);
}

/* The images of a chat to write: names and bytes, in parallel arrays. */
typedef struct {
  GPtrArray *names; /* char* */
  GPtrArray *bytes; /* GBytes* */
} ImageSet;

static void
image_set_clear (ImageSet *set)
{
  g_clear_pointer (&set->names, g_ptr_array_unref);
  g_clear_pointer (&set->bytes, g_ptr_array_unref);
}

static void
image_set_collect (TernChat *self,
                   ImageSet *set)
{
  set->names = g_ptr_array_new_with_free_func (g_free);
  set->bytes = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  for (guint i = 0; i < self->messages->len; i++)
    {
      TernMessage *m = g_ptr_array_index (self->messages, i);

      for (guint k = 0; m->images != NULL && k < m->images->len; k++)
        {
          GBytes *b = g_ptr_array_index (m->images, k);
          const char *name = message_image_name (m, k);

          if (g_ptr_array_find_with_equal_func (set->names, name, g_str_equal, NULL))
            continue;
          g_ptr_array_add (set->names, g_strdup (name));
          g_ptr_array_add (set->bytes, g_bytes_ref (b));
        }
    }
}

/* Writes the images not yet on disk. Called before the JSON is written, so
 * a chat file never names an image that is not there. */
static gboolean
write_images (const char *dir,
              const char *id,
              ImageSet   *set,
              GError    **error)
{
  g_autofree char *folder = images_dir (dir, id);

  if (set->names->len == 0)
    return TRUE;
  if (g_mkdir_with_parents (folder, 0700) != 0)
    {
      int saved = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved), "%s: %s", folder,
                   g_strerror (saved));
      return FALSE;
    }
  for (guint i = 0; i < set->names->len; i++)
    {
      g_autofree char *path = g_build_filename (folder, g_ptr_array_index (set->names, i), NULL);
      GBytes *b = g_ptr_array_index (set->bytes, i);
      gsize n;
      const char *data = g_bytes_get_data (b, &n);

      GStatBuf sb;

      /* Named by its content: a regular file of the right size is the
       * same picture (a changed one is written again). */
      if (g_lstat (path, &sb) == 0 && S_ISREG (sb.st_mode) && (gsize) sb.st_size == n)
        continue;
      if (g_lstat (path, &sb) == 0 && !S_ISREG (sb.st_mode))
        g_unlink (path);
      if (!g_file_set_contents_full (path, data, (gssize) n, G_FILE_SET_CONTENTS_CONSISTENT,
                                     0600, error))
        return FALSE;
    }
  return TRUE;
}

/* Removes the images no message uses any more (an edited message, a
 * truncated chat). Only once the new chat file is in place: the old one,
 * kept when that write fails (a full disk), still names them. */
static void
prune_images (const char *dir,
              const char *id,
              ImageSet   *set)
{
  g_autofree char *folder = images_dir (dir, id);
  g_autoptr(GDir) d = g_dir_open (folder, 0, NULL);
  const char *entry;

  while (d != NULL && (entry = g_dir_read_name (d)) != NULL)
    if (image_name_valid (entry)
        && !g_ptr_array_find_with_equal_func (set->names, entry, g_str_equal, NULL))
      {
        g_autofree char *path = g_build_filename (folder, entry, NULL);
        g_unlink (path);
      }
  if (set->names->len == 0)
    g_rmdir (folder); /* only when empty */
}

/* An image named in a chat file, read back and checked against its name;
 * NULL when it is missing, not a regular file, too large or changed. */
static GBytes *
read_image (const char *folder,
            const char *name)
{
  g_autofree char *path = g_build_filename (folder, name, NULL);
  g_autofree char *data = NULL;
  g_autofree char *hash = NULL;
  GStatBuf sb;
  gsize len = 0;
  GBytes *bytes;

  /* lstat: a symbolic link put in the chat's folder is not followed;
   * tern_read_file checks the type and size again on what it opened (a
   * FIFO swapped in after the lstat is still refused, unread). */
  if (g_lstat (path, &sb) != 0 || !S_ISREG (sb.st_mode) || sb.st_size > MAX_IMAGE_BYTES)
    return NULL;
  if (!tern_read_file (path, MAX_IMAGE_BYTES, &data, &len, NULL))
    return NULL;
  bytes = g_bytes_new_take (g_steal_pointer (&data), len);
  hash = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, bytes);
  if (strncmp (hash, name, 64) != 0)
    {
      g_bytes_unref (bytes);
      return NULL;
    }
  return bytes;
}

static void
message_free (gpointer data)
{
  TernMessage *m = data;

  g_free (m->role);
  g_free (m->text);
  g_free (m->stop_reason);
  g_free (m->error);
  g_clear_pointer (&m->drafted, g_byte_array_unref);
  g_clear_pointer (&m->images, g_ptr_array_unref);
  g_clear_pointer (&m->image_names, g_hash_table_unref);
  g_free (m);
}

void
tern_message_set_drafted (TernMessage  *m,
                          const guint8 *drafted)
{
  gsize len = m->text ? strlen (m->text) : 0;

  g_clear_pointer (&m->drafted, g_byte_array_unref);
  if (drafted == NULL || len == 0 || memchr (drafted, 1, len) == NULL)
    return;
  m->drafted = g_byte_array_sized_new ((guint) len);
  g_byte_array_append (m->drafted, drafted, (guint) len);
}

guint64 tern_chat_title_work;
/* Messages moved in the array by tern_chat_take_from and tern_chat_restore
 * (each one stolen, and each one after it shifted down), for the tests. */
guint64 tern_chat_move_work;

/* After the character at P: NUL-safe on text that is not UTF-8. */
static const char *
next_char (const char *p)
{
  p++;
  while (((guchar) *p & 0xC0) == 0x80)
    p++;
  return p;
}

/* TEXT's title: stripped, one line, at most TITLE_MAX_CHARS characters
 * (cut to one less and "…"); NULL when it is blank. Only its first
 * characters are looked at, and nothing is copied but the title: each
 * message appended works the title out again, and a copy of a long first
 * message each time made a chat of it and many answers never open (past
 * them, only a run of blanks that ends the text is read to its end). */
static char *
message_title (const char *text)
{
  const char *p = text, *cut, *end, *rest;
  char *title, *c;
  guint n;

  while (g_ascii_isspace (*p))
    p++;
  if (*p == '\0')
    {
      tern_chat_title_work += (guint64) (p - text);
      return NULL;
    }
  cut = end = p;
  for (n = 0; n < TITLE_MAX_CHARS && *end; n++)
    {
      end = next_char (end);
      if (n + 1 == TITLE_MAX_CHARS - 1)
        cut = end;
    }
  for (rest = end; g_ascii_isspace (*rest); rest++)
    ;
  tern_chat_title_work += (guint64) (rest - text);
  if (*rest == '\0')
    title = g_strchomp (g_strndup (p, (gsize) (end - p)));
  else
    {
      g_autofree char *head = g_strchomp (g_strndup (p, (gsize) (cut - p)));

      title = g_strconcat (head, "…", NULL);
    }
  for (c = title; *c; c++)
    if (*c == '\n' || *c == '\t')
      *c = ' ';
  return title;
}

static void
update_title (TernChat *self)
{
  g_autofree char *title = g_strdup (self->custom_title);

  for (guint i = self->untitled; title == NULL && i < self->messages->len; i++)
    {
      TernMessage *m = g_ptr_array_index (self->messages, i);

      tern_chat_title_work++;
      if (g_strcmp0 (m->role, "user") == 0 && m->text != NULL)
        title = message_title (m->text);
      if (title == NULL)
        self->untitled = i + 1;
    }
  if (title == NULL)
    title = g_strdup (_("New Chat"));
  if (g_strcmp0 (title, self->title) != 0)
    {
      g_free (self->title);
      self->title = g_steal_pointer (&title);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TITLE]);
    }
}

static void
tern_chat_finalize (GObject *object)
{
  TernChat *self = TERN_CHAT (object);

  g_free (self->id);
  g_free (self->title);
  g_free (self->custom_title);
  g_free (self->mode);
  g_free (self->model);
  g_free (self->draft);
  g_free (self->system_prompt);
  g_free (self->images_from);
  g_ptr_array_unref (self->messages);
  G_OBJECT_CLASS (tern_chat_parent_class)->finalize (object);
}

static void
tern_chat_get_property (GObject    *object,
                        guint       prop_id,
                        GValue     *value,
                        GParamSpec *pspec)
{
  TernChat *self = TERN_CHAT (object);

  switch (prop_id)
    {
    case PROP_TITLE:
      g_value_set_string (value, self->title);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tern_chat_class_init (TernChatClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = tern_chat_finalize;
  object_class->get_property = tern_chat_get_property;

  properties[PROP_TITLE] =
    g_param_spec_string ("title", NULL, NULL, NULL,
                         G_PARAM_READABLE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
tern_chat_init (TernChat *self)
{
  self->messages = g_ptr_array_new_with_free_func (message_free);
  self->created = self->updated = g_get_real_time () / G_USEC_PER_SEC;
  self->mode = g_strdup ("flash");
  update_title (self);
}

TernChat *
tern_chat_new (const char *mode)
{
  TernChat *self = g_object_new (TERN_TYPE_CHAT, NULL);

  self->id = g_uuid_string_random ();
  tern_chat_set_mode (self, mode);
  return self;
}

const char *
tern_chat_get_id (TernChat *self)
{
  return self->id;
}

const char *
tern_chat_get_images_from (TernChat *self)
{
  return self->images_from;
}

const char *
tern_chat_get_title (TernChat *self)
{
  return self->title;
}

void
tern_chat_set_title (TernChat   *self,
                     const char *title)
{
  g_autofree char *clean = g_strstrip (g_strdup (title ? title : ""));

  g_free (self->custom_title);
  self->custom_title = *clean ? g_steal_pointer (&clean) : NULL;
  update_title (self);
}

const char *
tern_chat_get_draft (TernChat *self)
{
  g_return_val_if_fail (TERN_IS_CHAT (self), NULL);
  return self->draft;
}

gboolean
tern_chat_set_draft (TernChat   *self,
                     const char *text)
{
  g_return_val_if_fail (TERN_IS_CHAT (self), FALSE);
  if (text != NULL && text[0] == '\0')
    text = NULL;
  if (g_strcmp0 (self->draft, text) == 0)
    return FALSE;
  g_free (self->draft);
  self->draft = g_strdup (text);
  return TRUE;
}

gboolean
tern_chat_has_custom_title (TernChat *self)
{
  return self->custom_title != NULL;
}

const char *
tern_chat_get_mode (TernChat *self)
{
  return self->mode;
}

void
tern_chat_set_mode (TernChat   *self,
                    const char *mode)
{
  g_free (self->mode);
  self->mode = g_strdup (g_strcmp0 (mode, "chat") == 0 ? "chat" : "flash");
}

const char *
tern_chat_get_model (TernChat *self)
{
  return self->model;
}

void
tern_chat_set_model (TernChat   *self,
                     const char *model_description)
{
  g_free (self->model);
  self->model = g_strdup (model_description);
}

const char *
tern_chat_get_system_prompt (TernChat *self)
{
  return self->system_prompt;
}

void
tern_chat_set_system_prompt (TernChat   *self,
                             const char *system_prompt)
{
  g_free (self->system_prompt);
  self->system_prompt = g_strdup (system_prompt);
}

gint64
tern_chat_get_updated (TernChat *self)
{
  return self->updated;
}

guint
tern_chat_get_context_start (TernChat *self)
{
  return self->context_start;
}

void
tern_chat_set_context_start (TernChat *self,
                             guint     index)
{
  self->context_start = MIN (index, self->messages->len);
}

guint
tern_chat_get_n_messages (TernChat *self)
{
  return self->messages->len;
}

TernMessage *
tern_chat_get_message (TernChat *self,
                       guint     index)
{
  g_return_val_if_fail (index < self->messages->len, NULL);
  return g_ptr_array_index (self->messages, index);
}

/* A load appends with this, and works the title out once at the end. */
static TernMessage *
append_message (TernChat   *self,
                const char *role,
                const char *text)
{
  TernMessage *m = g_new0 (TernMessage, 1);

  m->role = g_strdup (role);
  m->text = g_strdup (text ? text : "");
  g_ptr_array_add (self->messages, m);
  return m;
}

TernMessage *
tern_chat_append (TernChat   *self,
                  const char *role,
                  const char *text)
{
  TernMessage *m = append_message (self, role, text);

  tern_chat_touch (self);
  return m;
}

GPtrArray *
tern_chat_take_from (TernChat *self,
                     guint     index)
{
  GPtrArray *taken = g_ptr_array_new_with_free_func (message_free);
  guint n = index < self->messages->len ? self->messages->len - index : 0;

  /* From the end: a message stolen from the front shifted all those after
   * it (quadratic in the number taken). */
  g_ptr_array_set_size (taken, n);
  for (guint i = n; i-- > 0;)
    {
      tern_chat_move_work++;
      taken->pdata[i] = g_ptr_array_steal_index (self->messages, index + i);
    }
  self->context_start = MIN (self->context_start, index);
  self->untitled = MIN (self->untitled, index);
  tern_chat_touch (self);
  return taken;
}

void
tern_chat_restore (TernChat  *self,
                   GPtrArray *messages)
{
  guint start = self->messages->len;

  /* From the end, as tern_chat_take_from takes them. */
  g_ptr_array_set_size (self->messages, start + messages->len);
  for (guint i = messages->len; i-- > 0;)
    {
      tern_chat_move_work++;
      self->messages->pdata[start + i] = g_ptr_array_steal_index (messages, i);
    }
  update_title (self);
  tern_chat_touch (self);
}

void
tern_chat_truncate (TernChat *self,
                    guint     n_messages)
{
  if (n_messages < self->messages->len)
    g_ptr_array_set_size (self->messages, n_messages);
  self->context_start = MIN (self->context_start, n_messages);
  self->untitled = MIN (self->untitled, n_messages);
  tern_chat_touch (self);
}

void
tern_chat_touch (TernChat *self)
{
  self->updated = g_get_real_time () / G_USEC_PER_SEC;
  update_title (self);
}

void
tern_message_set_stats (TernMessage     *m,
                        const TernStats *stats)
{
  g_free (m->stop_reason);
  m->stop_reason = g_strdup (stats->stop_reason);
  m->stats = *stats;
  m->stats.stop_reason = m->stop_reason;
  m->has_stats = TRUE;
}

gboolean
tern_message_wrote_nothing (const TernMessage *m)
{
  return m->text[0] == '\0'
         && (m->cancelled || (m->error != NULL && g_strcmp0 (m->stop_reason, "context full") != 0));
}

/* Earlier versions saved the marks of an answer that wrote nothing above
 * its empty row, and took its prompt for the chat's: the next answer
 * written was compared with that prompt and not marked, though it was the
 * first written from it. As on_finished does now, the mark goes to the
 * next answer written. After the last answer written it stays where it is,
 * not shown (tern_message_wrote_nothing), for a Regenerate or the next
 * answer to take over. Only a prompt's change is handed on: whether the
 * next answer was a Flash one, that the turns above were not sent, is not
 * in the file. */
static void
carry_marks_of_empty_answers (TernChat *self)
{
  TernMessage *empty = NULL;

  for (guint i = 0; i < self->messages->len; i++)
    {
      TernMessage *m = g_ptr_array_index (self->messages, i);

      if (!g_str_equal (m->role, "assistant"))
        continue;
      if (tern_message_wrote_nothing (m))
        {
          if (empty != NULL && empty->prompt_changed)
            m->prompt_changed = TRUE;
          if (empty != NULL)
            empty->prompt_changed = empty->alone = FALSE;
          empty = m;
          continue;
        }
      if (empty != NULL && empty->prompt_changed)
        m->prompt_changed = TRUE;
      if (empty != NULL)
        empty->prompt_changed = empty->alone = FALSE;
      empty = NULL;
    }
}

char *
tern_message_format_stats (const TernMessage *m)
{
  GString *s;
  const TernStats *st = &m->stats;

  /* An answer cut short by closing the window has no figures (the engine
   * never reported them), but reopened it must not read as a whole one. */
  if (!m->has_stats && m->cancelled)
    return g_strdup (_("stopped"));
  /* A request that failed before its first token has no figures to show. */
  if (!m->has_stats || (m->error != NULL && st->generated_tokens == 0))
    return g_strdup ("");
  s = g_string_new (NULL);
  /* "%'d": the locale's grouping, "16.384" in German (tern-size.h). */
  g_string_append_printf (s, g_dngettext (GETTEXT_PACKAGE, "%'d token", "%'d tokens",
                                          st->generated_tokens),
                          st->generated_tokens);
  if (st->decode_tok_s > 0)
    /* Translators: decode speed, tokens per second */
    g_string_append_printf (s, _(" · %.1f tok/s"), st->decode_tok_s);
  if (st->ttft_ms > 0)
    /* Translators: time to the first token of the answer */
    g_string_append_printf (s, _(" · first token %.0f ms"), st->ttft_ms);
  if (st->prompt_tokens > 0)
    /* Translators: tokens of the request prefilled, and how long it took */
    g_string_append_printf (s, g_dngettext (GETTEXT_PACKAGE, " · prompt %'d token in %.0f ms",
                                            " · prompt %'d tokens in %.0f ms", st->prompt_tokens),
                            st->prompt_tokens, st->prefill_ms);
  if (st->restored_tokens > 0)
    /* Translators: tokens of the prompt taken from the cache, not prefilled again */
    g_string_append_printf (s, _(" · %'d reused"), st->restored_tokens);
  if (st->drafted > 0)
    /* Translators: speculative decoding: of the tokens guessed ahead, how many
     * the model kept (the plural follows the tokens guessed) */
    g_string_append_printf (s, g_dngettext (GETTEXT_PACKAGE, " · %'d of %'d guessed token kept",
                                            " · %'d of %'d guessed tokens kept", st->drafted),
                            st->accepted, st->drafted);
  if (st->drafted > 0 && st->verify_steps > 0)
    /* Translators: speculative decoding: guessed tokens kept per check, on average */
    g_string_append_printf (s, _(" · %.1f kept per check"),
                            (double) st->accepted / st->verify_steps);
  if (m->cancelled)
    g_string_append_printf (s, " · %s", _("stopped"));
  /* Ended mid-sentence by max-tokens, with nothing else to tell it from an
   * answer that ended of itself. */
  else if (g_strcmp0 (st->stop_reason, "limit") == 0)
    /* Translators: "Answer Length Limit" is the setting's title in Preferences */
    g_string_append_printf (s, " · %s", _("cut off by the Answer Length Limit"));
  /* The stats bar's separator beside it (tern-size.h). */
  {
    g_autofree char *figures = g_string_free (s, FALSE);

    return tern_app_localize_decimals (figures);
  }
}

/* ------------------------------------------------------------------ JSON */

static void
add_stats (JsonBuilder     *b,
           const TernStats *st)
{
  json_builder_set_member_name (b, "stats");
  json_builder_begin_object (b);
#define INT_MEMBER(name, field)                  \
  json_builder_set_member_name (b, name);        \
  json_builder_add_int_value (b, st->field);
#define DBL_MEMBER(name, field)                  \
  json_builder_set_member_name (b, name);        \
  json_builder_add_double_value (b, st->field);
  INT_MEMBER ("prompt_tokens", prompt_tokens)
  DBL_MEMBER ("prefill_ms", prefill_ms)
  DBL_MEMBER ("prefill_tok_s", prefill_tok_s)
  INT_MEMBER ("generated_tokens", generated_tokens)
  DBL_MEMBER ("decode_ms", decode_ms)
  DBL_MEMBER ("decode_tok_s", decode_tok_s)
  DBL_MEMBER ("ttft_ms", ttft_ms)
  INT_MEMBER ("restored_tokens", restored_tokens)
  DBL_MEMBER ("restore_ms", restore_ms)
  INT_MEMBER ("drafted", drafted)
  INT_MEMBER ("accepted", accepted)
  INT_MEMBER ("verify_steps", verify_steps)
  INT_MEMBER ("kv_len", kv_len)
#undef INT_MEMBER
#undef DBL_MEMBER
  if (st->stop_reason != NULL)
    {
      json_builder_set_member_name (b, "stop_reason");
      json_builder_add_string_value (b, st->stop_reason);
    }
  json_builder_end_object (b);
}

char *
tern_chat_to_json (TernChat *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "format");
  json_builder_add_string_value (b, "tern-chat");
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, FORMAT_VERSION);
  json_builder_set_member_name (b, "id");
  json_builder_add_string_value (b, self->id);
  json_builder_set_member_name (b, "mode");
  json_builder_add_string_value (b, self->mode);
  if (self->custom_title != NULL)
    {
      json_builder_set_member_name (b, "title");
      json_builder_add_string_value (b, self->custom_title);
    }
  json_builder_set_member_name (b, "created");
  json_builder_add_int_value (b, self->created);
  json_builder_set_member_name (b, "updated");
  json_builder_add_int_value (b, self->updated);
  if (self->model != NULL)
    {
      json_builder_set_member_name (b, "model");
      json_builder_add_string_value (b, self->model);
    }
  if (self->system_prompt != NULL)
    {
      json_builder_set_member_name (b, "system_prompt");
      json_builder_add_string_value (b, self->system_prompt);
    }
  if (self->draft != NULL)
    {
      json_builder_set_member_name (b, "draft");
      json_builder_add_string_value (b, self->draft);
    }
  if (self->context_start > 0)
    {
      json_builder_set_member_name (b, "context_start");
      json_builder_add_int_value (b, self->context_start);
    }
  json_builder_set_member_name (b, "messages");
  json_builder_begin_array (b);
  for (guint i = 0; i < self->messages->len; i++)
    {
      TernMessage *m = g_ptr_array_index (self->messages, i);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "role");
      json_builder_add_string_value (b, m->role);
      json_builder_set_member_name (b, "content");
      json_builder_add_string_value (b, m->text);
      if (m->cancelled)
        {
          json_builder_set_member_name (b, "cancelled");
          json_builder_add_boolean_value (b, TRUE);
        }
      if (m->prompt_changed)
        {
          json_builder_set_member_name (b, "system_prompt_changed");
          json_builder_add_boolean_value (b, TRUE);
        }
      if (m->alone)
        {
          json_builder_set_member_name (b, "flash_alone");
          json_builder_add_boolean_value (b, TRUE);
        }
      if (m->error != NULL)
        {
          json_builder_set_member_name (b, "error");
          json_builder_add_string_value (b, m->error);
        }
      if (m->has_stats)
        add_stats (b, &m->stats);
      if (m->images != NULL && m->images->len > 0)
        {
          /* File names in the chat's images folder, in the message's order. */
          json_builder_set_member_name (b, "images");
          json_builder_begin_array (b);
          for (guint k = 0; k < m->images->len; k++)
            json_builder_add_string_value (b, message_image_name (m, k));
          json_builder_end_array (b);
        }
      if (m->drafted != NULL)
        {
          /* [start, length] byte runs of text from accepted drafts. */
          json_builder_set_member_name (b, "drafted");
          json_builder_begin_array (b);
          for (guint k = 0; k < m->drafted->len;)
            {
              guint end = k;

              if (!m->drafted->data[k])
                {
                  k++;
                  continue;
                }
              while (end < m->drafted->len && m->drafted->data[end])
                end++;
              json_builder_begin_array (b);
              json_builder_add_int_value (b, k);
              json_builder_add_int_value (b, end - k);
              json_builder_end_array (b);
              k = end;
            }
          json_builder_end_array (b);
        }
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  return tn_json_escape_unit_separators (json_generator_to_data (gen, NULL), NULL);
}

/* -------------------------------------------------- the file to replace
 *
 * Only loading looked at a file's version: one that a sync tool brought
 * from a newer Tern on another machine while this one ran, over the file
 * of an open chat, was replaced at that chat's next save, and the newer
 * chat lost. Every save (and delete) now looks first at the file it would
 * replace, and leaves alone any that is not a chat of a format this
 * version writes. */

typedef enum {
  ON_DISK_NONE,    /* no file: nothing to lose */
  ON_DISK_OURS,    /* a chat of a format this version reads and writes */
  ON_DISK_NEWER,   /* a newer Tern's chat */
  ON_DISK_FOREIGN, /* anything else: not a chat, not JSON, not a regular file */
  ON_DISK_UNSURE,  /* (the first bytes only) they do not tell */
  ON_DISK_UNKNOWN  /* not looked at: this process is out of descriptors or
                    * memory (errno in on_disk_errno); the save fails and the
                    * next one looks again, where moving the chat to a new
                    * id made a copy of it at every such failure */
} OnDisk;

/* Every Tern writes "format" and "version" first (tern_chat_to_json): a
 * file's first 4 KiB tell almost always, where a full parse could read
 * 64 MiB at every save. */
#define PEEK_BYTES 4096

/* The checks tern_chat_load makes before json-glib sees a file. */
#define CHAT_JSON_FLAGS \
  (TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS | TN_JSON_NO_HUGE_INTEGERS \
   | TN_JSON_RAW_UNIT_SEPARATOR)

/* What LEN bytes of JSON say the file is, read as tern_chat_load reads
 * them (checked by the engine's reader, then json-glib): the whole file
 * (WHOLE), or the members of its first bytes that were read whole, closed
 * with "}" (see file_on_disk), where a member missing may be further on
 * (ON_DISK_UNSURE). */
static OnDisk
header_of (const char *data,
           gsize       len,
           gboolean    whole)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  tn_error check = { 0 };
  JsonNode *root, *n;
  JsonObject *o;
  gint64 version = 1;

  if (tn_json_check (data, len, NULL, MAX_DEPTH, CHAT_JSON_FLAGS, &check) != TN_OK
      || !json_parser_load_from_data (parser, data, (gssize) len, NULL))
    return whole ? ON_DISK_FOREIGN : ON_DISK_UNSURE;
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return ON_DISK_FOREIGN;
  o = json_node_get_object (root);
  n = json_object_get_member (o, "format");
  if (n == NULL && !whole)
    return ON_DISK_UNSURE;
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING
      || !g_str_equal (json_node_get_string (n), "tern-chat"))
    return ON_DISK_FOREIGN;
  n = json_object_get_member (o, "version");
  if (n == NULL && !whole)
    return ON_DISK_UNSURE;
  if (n != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
        return ON_DISK_FOREIGN;
      version = json_node_get_int (n);
    }
  return version > FORMAT_VERSION ? ON_DISK_NEWER : ON_DISK_OURS;
}

/* What the first N bytes of a longer file say. They were read by a second,
 * lenient reader, which took a head that the load refuses ("version"
 * twice, a "01", a bad escape before it) for this version's chat, and the
 * save replaced the file. Now the engine's reader checks them as the load
 * checks the whole file (tn_json_check_head: a cut is not an error, what
 * the bytes break is), and the members it read whole are decided on as
 * the whole file is (header_of). ON_DISK_UNSURE, for the whole file to
 * decide, whenever the bytes do not tell: an error in them (a cut the
 * engine cannot tell from one is an error), "format" or "version" not
 * among the members read whole. Past these bytes, a chat of this version
 * is taken for what its head says (a "version" again at byte 5000 is the
 * load's to refuse): reading the whole file at every save is what the
 * peek is there to avoid. */
/* The members of BUF's first N bytes read whole, closed with "}" (a text
 * tn_json_check accepts; its length in *LEN); NULL when there are none or
 * the bytes have an error. AT_ERROR: when they have one, the members
 * before it (the longest first bytes without an error, found by halving:
 * a scanner's error stays in every longer text). */
static char *
head_members (const char *buf,
              gsize       n,
              gboolean    at_error,
              gsize      *len)
{
  tn_error check = { 0 };
  gsize members_end = 0;
  char *closed;

  if (tn_json_check_head (buf, n, NULL, MAX_DEPTH, CHAT_JSON_FLAGS, &members_end, &check) != TN_OK)
    {
      gsize good = 0, bad = n;

      members_end = 0;
      if (!at_error)
        return NULL;
      while (bad - good > 1)
        {
          gsize mid = good + (bad - good) / 2;
          gsize end = 0;

          if (tn_json_check_head (buf, mid, NULL, MAX_DEPTH, CHAT_JSON_FLAGS, &end, &check)
              == TN_OK)
            {
              good = mid;
              members_end = end;
            }
          else
            bad = mid;
        }
    }
  if (members_end == 0)
    return NULL;
  closed = g_malloc (members_end + 2);
  memcpy (closed, buf, members_end);
  closed[members_end] = '}';
  closed[members_end + 1] = '\0';
  *len = members_end + 1;
  return closed;
}

static OnDisk
peek_header (const char *buf,
             gsize       n)
{
  g_autofree char *closed = NULL;
  gsize len = 0;

  closed = head_members (buf, n, FALSE, &len);
  if (closed != NULL)
    return header_of (closed, len, FALSE);
  /* An error in them: the whole file decides (below), except that the
   * members before the error saying a newer Tern's chat make it one (a
   * newer Tern's chat that this version's reader refuses further on,
   * listed as newer: tern_chat_load_listed). Either is never replaced. */
  closed = head_members (buf, n, TRUE, &len);
  if (closed != NULL && header_of (closed, len, FALSE) == ON_DISK_NEWER)
    return ON_DISK_NEWER;
  return ON_DISK_UNSURE;
}

/* What the whole file says, read as tern_chat_load reads it (bounded, the
 * JSON checked before json-glib sees it), when its first bytes do not. */
static OnDisk
parse_header (const char *path)
{
  g_autofree char *data = NULL;
  gsize len = 0;

  if (!tern_read_file (path, MAX_FILE_BYTES, &data, &len, NULL))
    return ON_DISK_FOREIGN;
  return header_of (data, len, TRUE);
}

/* What is at PATH now. Opened like tern_read_file opens (O_NONBLOCK: a
 * FIFO put there must not block the save for ever) and only a regular
 * file read; a file that cannot be read is not one to replace either. */
/* Why file_on_disk said ON_DISK_UNKNOWN (per thread: saves run on a pool). */
static __thread int on_disk_errno;

static OnDisk
file_on_disk (const char *path)
{
  char buf[PEEK_BYTES];
  gsize n = 0;
  struct stat sb;
  OnDisk what;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

  if (fd < 0)
    {
      if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
        {
          on_disk_errno = errno;
          return ON_DISK_UNKNOWN;
        }
      return errno == ENOENT ? ON_DISK_NONE : ON_DISK_FOREIGN;
    }
  if (fstat (fd, &sb) != 0 || !S_ISREG (sb.st_mode))
    {
      close (fd);
      return ON_DISK_FOREIGN;
    }
  while (n < sizeof buf)
    {
      ssize_t got = read (fd, buf + n, sizeof buf - n);

      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        {
          close (fd);
          return ON_DISK_FOREIGN;
        }
      if (got == 0)
        break;
      n += (gsize) got;
    }
  close (fd);
  /* All of it read (a file of 4 KiB or less): that is the whole file,
   * unless its head says a newer Tern's chat that is cut short or broken
   * further on: listed as newer (tern_chat_load_listed), it is one. */
  if (n < sizeof buf)
    {
      what = header_of (buf, n, TRUE);
      if (what == ON_DISK_FOREIGN && peek_header (buf, n) == ON_DISK_NEWER)
        what = ON_DISK_NEWER;
      return what;
    }
  what = peek_header (buf, n);
  return what == ON_DISK_UNSURE ? parse_header (path) : what;
}

/* The notice for a chat saved as a new one because its file, PATH, was
 * WHAT. A toast shows one line: what happened comes first, the file last
 * (the new file is in the log). */
static char *
moved_message (OnDisk      what,
               const char *title,
               const char *path)
{
  if (what == ON_DISK_NEWER)
    /* Translators: a chat's title, and its file (left as it is) */
    return g_strdup_printf (_("“%s” is saved as a new chat: its file now holds a newer Tern’s "
                              "chat, left as it is (%s)"),
                            title, path);
  /* Translators: a chat's title, and its file (left as it is) */
  return g_strdup_printf (_("“%s” is saved as a new chat: its file was replaced by one Tern "
                            "cannot read, left as it is (%s)"),
                          title, path);
}

/* The JSON of a chat (tern_chat_to_json's) with another "id": the one of
 * the new file it is saved to. NULL if it is not such JSON. */
static char *
json_with_id (const char *json,
              const char *id)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  JsonNode *root;

  if (!json_parser_load_from_data (parser, json, -1, NULL))
    return NULL;
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  json_object_set_string_member (json_node_get_object (root), "id", id);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  return tn_json_escape_unit_separators (json_generator_to_data (gen, NULL), NULL);
}

/* The messages of a chat's JSON that json-glib wrote (a save): the objects
 * at the third level (in an array of the root object), counted in one pass
 * without a tree. The load counts them in its check's pass instead
 * (tn_json_check_count). */
static guint64
count_messages (const char *json,
                gsize       len)
{
  guint depth = 0;
  guint64 n = 0;

  for (gsize i = 0; i < len; i++)
    switch (json[i])
      {
      case '"':
        /* To the string's end: its brackets are text. */
        for (i++; i < len && json[i] != '"'; i++)
          if (json[i] == '\\')
            i++;
        break;
      case '{':
        if (++depth == 3)
          n++;
        break;
      case '[':
        depth++;
        break;
      case '}':
      case ']':
        depth--;
        break;
      default:
        break;
      }
  return n;
}

/* A chat is never written larger than tern_chat_load reads: the file on
 * disk (and its pictures) stay as last saved, and the error says why. */
static gboolean
check_size (const char *path,
            const char *json,
            GError    **error)
{
  gsize len = strlen (json);
  g_autofree char *size = NULL;
  g_autofree char *max = NULL;
  guint64 n;

  if (len <= MAX_FILE_BYTES && (n = count_messages (json, len)) > TERN_CHAT_MAX_MESSAGES)
    {
      /* Translators: a chat file; its number of messages, and the most a
       * chat may have */
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
                   _("%s: the chat has too many messages to save (%u, at most %u): the file keeps "
                     "it as it was last saved. Export it to keep the rest, and go on in a new chat"),
                   path, (guint) MIN (n, G_MAXUINT), (guint) TERN_CHAT_MAX_MESSAGES);
      return FALSE;
    }
  if (len <= MAX_FILE_BYTES)
    return TRUE;
  size = tern_app_format_size (len);
  max = tern_app_format_size (MAX_FILE_BYTES);
  /* Translators: a chat file; the chat's size and the largest chat file
   * (both like "70.1 MB") */
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
               _("%s: the chat is too large to save (%s, at most %s): the file keeps it as it "
                 "was last saved. Export it to keep the rest, and go on in a new chat"),
               path, size, max);
  return FALSE;
}

/* A background save that found its chat's file not one to replace wrote
 * the chat under a new id: the chat (held) takes that id on the main
 * thread, before its next save is asked or a delete looks for its file. */
typedef struct {
  TernChat *chat;
  char *from;
  char *to;
} Move;

static GMutex save_lock;
static GCond save_done;
static guint saves_pending;
static GPtrArray *moves; /* Move*, under save_lock */

static void
move_free (Move *m)
{
  g_object_unref (m->chat);
  g_free (m->from);
  g_free (m->to);
  g_free (m);
}

/* Main thread only: the chat's id is read there without a lock. */
static void
apply_moves (void)
{
  g_autoptr(GPtrArray) taken = NULL;

  g_mutex_lock (&save_lock);
  taken = g_steal_pointer (&moves);
  g_mutex_unlock (&save_lock);
  for (guint i = 0; taken != NULL && i < taken->len; i++)
    {
      Move *m = g_ptr_array_index (taken, i);

      /* Not if it has moved again since (another save, in the foreground). */
      if (g_str_equal (m->chat->id, m->from))
        {
          g_free (m->chat->id);
          m->chat->id = g_strdup (m->to);
        }
    }
}

gboolean
tern_chat_save (TernChat   *self,
                const char *dir,
                GError    **error)
{
  g_autofree char *json = NULL;
  g_autofree char *name = NULL;
  g_autofree char *path = NULL;
  ImageSet images = { 0 };
  gboolean ok;
  OnDisk what;

  /* Its file holds what this version cannot read: written from here, it
   * would be lost (and the file check would only move the save aside). */
  if (self->newer)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   _("“%s” was saved by a newer version of Tern and cannot be changed here"),
                   tern_chat_get_title (self));
      return FALSE;
    }
  apply_moves ();
  json = tern_chat_to_json (self);
  name = g_strconcat (self->id, ".json", NULL);
  path = g_build_filename (dir, name, NULL);
  if (!check_size (path, json, error))
    return FALSE;
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      int saved = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved), "%s: %s", dir,
                   g_strerror (saved));
      return FALSE;
    }
  /* Before its pictures too: writing them prunes the folder, which a newer
   * Tern's chat of the same id shares. */
  what = file_on_disk (path);
  if (what == ON_DISK_UNKNOWN)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (on_disk_errno),
                   _("%s: cannot look at the file before replacing it: %s"), path,
                   g_strerror (on_disk_errno));
      return FALSE;
    }
  if (what == ON_DISK_NEWER || what == ON_DISK_FOREIGN)
    {
      g_autofree char *old_path = g_steal_pointer (&path);
      g_autofree char *message = NULL;

      g_free (self->id);
      self->id = g_uuid_string_random ();
      g_free (json);
      json = tern_chat_to_json (self);
      g_free (name);
      name = g_strconcat (self->id, ".json", NULL);
      path = g_build_filename (dir, name, NULL);
      message = moved_message (what, tern_chat_get_title (self), old_path);
      g_message ("%s (saved as %s)", message, path);
    }
  image_set_collect (self, &images);
  ok = write_images (dir, self->id, &images, error);
  /* CONSISTENT: a temporary file renamed over the old one, so a crash leaves
   * either the old chat or the new one, never half of one. */
  ok = ok && g_file_set_contents_full (path, json, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                       error);
  if (ok)
    {
      prune_images (dir, self->id, &images);
      g_clear_pointer (&self->images_from, g_free); /* in its own folder now */
    }
  image_set_clear (&images);
  return ok;
}

typedef struct {
  char *dir;
  char *id;
  char *path;
  char *json;
  char *title;
  ImageSet images;
  GWeakRef chat;
  GWeakRef owner;
  TernChatSaveError error_func;
  GMainContext *context;
  char *error;
  char *notice; /* saved as a new chat: said before any error */
} SaveJob;

static void
save_job_free (SaveJob *job)
{
  g_free (job->dir);
  g_free (job->id);
  g_free (job->path);
  g_free (job->json);
  g_free (job->title);
  image_set_clear (&job->images);
  g_weak_ref_clear (&job->chat);
  g_weak_ref_clear (&job->owner);
  g_main_context_unref (job->context);
  g_free (job->error);
  g_free (job->notice);
  g_free (job);
}

static gboolean
save_job_report (gpointer data)
{
  SaveJob *job = data;
  g_autoptr(GObject) owner = g_weak_ref_get (&job->owner);

  apply_moves ();
  if (owner != NULL && job->error_func != NULL && job->notice != NULL)
    job->error_func (owner, job->notice);
  if (owner != NULL && job->error_func != NULL && job->error != NULL)
    job->error_func (owner, job->error);
  return G_SOURCE_REMOVE;
}

/* Pool thread only (one thread): the files that saves found not theirs to
 * replace, and the id each chat was saved under instead (char* -> char*).
 * Saves of the chat asked before it took its new id follow it there,
 * rather than each making a copy of its own. */
static GHashTable *moved_paths;

static void
save_job_move_to (SaveJob    *job,
                  const char *id)
{
  g_autofree char *name = g_strconcat (id, ".json", NULL);
  char *json = json_with_id (job->json, id);

  g_free (job->id);
  job->id = g_strdup (id);
  g_free (job->path);
  job->path = g_build_filename (job->dir, name, NULL);
  if (json != NULL)
    {
      g_free (job->json);
      job->json = json;
    }
}

/* Before anything is written: the file this save would replace is looked
 * at, and one that is not this version's chat kept (see file_on_disk).
 * FALSE (job->error set) when it could not be looked at. */
static gboolean
save_job_check_target (SaveJob *job)
{
  const char *id;
  OnDisk what;

  if (moved_paths == NULL)
    moved_paths = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  while ((id = g_hash_table_lookup (moved_paths, job->path)) != NULL)
    save_job_move_to (job, id);
  what = file_on_disk (job->path);
  if (what == ON_DISK_UNKNOWN)
    {
      job->error = g_strdup_printf (_("%s: cannot look at the file before replacing it: %s"),
                                    job->path, g_strerror (on_disk_errno));
      return FALSE;
    }
  if (what == ON_DISK_NEWER || what == ON_DISK_FOREIGN)
    {
      g_autofree char *new_id = g_uuid_string_random ();
      g_autofree char *old_path = g_strdup (job->path);
      g_autofree char *old_id = g_strdup (job->id);
      TernChat *chat = g_weak_ref_get (&job->chat);

      g_hash_table_insert (moved_paths, g_strdup (old_path), g_strdup (new_id));
      save_job_move_to (job, new_id);
      job->notice = moved_message (what, job->title, old_path);
      g_message ("%s (saved as %s)", job->notice, job->path);
      /* The chat gone meanwhile (deleted): its copy is saved all the same. */
      if (chat != NULL)
        {
          Move *m = g_new0 (Move, 1);

          m->chat = chat; /* unreferenced on the main thread, by apply_moves */
          m->from = g_steal_pointer (&old_id);
          m->to = g_steal_pointer (&new_id);
          g_mutex_lock (&save_lock);
          if (moves == NULL)
            moves = g_ptr_array_new_with_free_func ((GDestroyNotify) move_free);
          g_ptr_array_add (moves, m);
          g_mutex_unlock (&save_lock);
        }
    }
  return TRUE;
}

static void
save_job_run (gpointer data,
              gpointer unused)
{
  SaveJob *job = data;
  g_autoptr(GError) error = NULL;

  (void) unused;
  /* An error already: refused when asked (check_size), nothing written. */
  if (job->error == NULL)
    {
      if (g_mkdir_with_parents (job->dir, 0700) != 0)
        {
          int saved = errno;
          job->error = g_strdup_printf ("%s: %s", job->dir, g_strerror (saved));
        }
      else
        {
          if (save_job_check_target (job))
            {
              if (!write_images (job->dir, job->id, &job->images, &error)
                  || !g_file_set_contents_full (job->path, job->json, -1,
                                                G_FILE_SET_CONTENTS_CONSISTENT, 0600, &error))
                job->error = g_strdup (error->message);
              else
                prune_images (job->dir, job->id, &job->images);
            }
        }
    }

  if (job->error != NULL || job->notice != NULL)
    {
      /* A source of the owner's context, not g_main_context_invoke_full:
       * that would run the report (a toast) on this pool thread whenever
       * the main loop is between iterations (this thread's default context
       * is the main one, and nobody holds it then). */
      GSource *source = g_idle_source_new ();

      g_source_set_priority (source, G_PRIORITY_DEFAULT);
      g_source_set_callback (source, save_job_report, job, (GDestroyNotify) save_job_free);
      g_source_set_static_name (source, "[tern] chat save report");
      g_source_attach (source, job->context);
      g_source_unref (source);
    }
  else
    save_job_free (job);

  g_mutex_lock (&save_lock);
  saves_pending--;
  g_cond_broadcast (&save_done);
  g_mutex_unlock (&save_lock);
}

void
tern_chat_save_in_background (TernChat          *self,
                              const char        *dir,
                              GObject           *owner,
                              TernChatSaveError  error_func)
{
  /* One thread: the writes of a chat land in the order they were asked. */
  static GThreadPool *pool;
  SaveJob *job;
  g_autofree char *name = NULL;

  if (self->newer)
    return; /* never written (see tern_chat_save) */
  job = g_new0 (SaveJob, 1);
  if (g_once_init_enter (&pool))
    g_once_init_leave (&pool, g_thread_pool_new (save_job_run, NULL, 1, FALSE, NULL));
  apply_moves ();
  name = g_strconcat (self->id, ".json", NULL);
  job->dir = g_strdup (dir);
  job->id = g_strdup (self->id);
  job->path = g_build_filename (dir, name, NULL);
  job->json = tern_chat_to_json (self);
  job->title = g_strdup (tern_chat_get_title (self));
  {
    g_autoptr(GError) error = NULL;

    /* Reported like a failed write, in its turn; nothing is written. */
    if (!check_size (job->path, job->json, &error))
      job->error = g_strdup (error->message);
    else
      g_clear_pointer (&self->images_from, g_free); /* written into its own folder */
  }
  /* The bytes are shared, not copied: GBytes are immutable. */
  image_set_collect (self, &job->images);
  g_weak_ref_init (&job->chat, self);
  g_weak_ref_init (&job->owner, owner);
  job->error_func = error_func;
  job->context = g_main_context_ref_thread_default ();
  g_mutex_lock (&save_lock);
  saves_pending++;
  g_mutex_unlock (&save_lock);
  g_thread_pool_push (pool, job, NULL);
}

void
tern_chat_wait_saves (void)
{
  g_mutex_lock (&save_lock);
  while (saves_pending > 0)
    g_cond_wait (&save_done, &save_lock);
  g_mutex_unlock (&save_lock);
  /* Now, not at the report's turn in the main loop: a delete that waited
   * for the saves must find the chat under the id it was saved as. */
  apply_moves ();
}

gboolean
tern_chat_delete_file (TernChat   *self,
                       const char *dir,
                       GError    **error)
{
  g_autofree char *name = NULL;
  g_autofree char *path = NULL;
  g_autofree char *folder = NULL;
  g_autoptr(GDir) d = NULL;
  const char *entry;
  OnDisk what;

  if (self->newer)
    {
      /* Not this version's to remove unasked: tern_chat_trash_newer_file. */
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   _("“%s” was saved by a newer version of Tern and cannot be changed here"),
                   tern_chat_get_title (self));
      return FALSE;
    }
  apply_moves (); /* saved as a new chat: that file is the one to delete */
  name = g_strconcat (self->id, ".json", NULL);
  path = g_build_filename (dir, name, NULL);
  folder = images_dir (dir, self->id);
  what = file_on_disk (path);
  if (what == ON_DISK_UNKNOWN)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (on_disk_errno),
                   _("%s: cannot look at the file before deleting it: %s"), path,
                   g_strerror (on_disk_errno));
      return FALSE;
    }

  /* A newer Tern's chat (or another file) now in its place is not this
   * chat's: it stays, with the pictures' folder it shares. */
  if (what == ON_DISK_NEWER || what == ON_DISK_FOREIGN)
    return TRUE;
  if (g_unlink (path) != 0 && errno != ENOENT)
    {
      int saved = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (saved), "%s: %s", path,
                   g_strerror (saved));
      return FALSE;
    }
  /* Its images go with it; only files that Tern named are removed. */
  d = g_dir_open (folder, 0, NULL);
  while (d != NULL && (entry = g_dir_read_name (d)) != NULL)
    if (image_name_valid (entry))
      {
        g_autofree char *image = g_build_filename (folder, entry, NULL);
        g_unlink (image);
      }
  g_rmdir (folder);
  return TRUE;
}

gboolean
tern_chat_trash_newer_file (TernChat   *self,
                            const char *dir,
                            GError    **error)
{
  g_autofree char *name = g_strconcat (self->id, ".json", NULL);
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *folder = images_dir (dir, self->id);
  g_autoptr(GFile) file = g_file_new_for_path (path);
  g_autoptr(GFile) pictures = g_file_new_for_path (folder);
  g_autoptr(GError) folder_error = NULL;
  OnDisk what;

  g_return_val_if_fail (self->newer, FALSE);
  what = file_on_disk (path);
  if (what == ON_DISK_NONE)
    return TRUE; /* gone already (its Tern deleted it) */
  if (what == ON_DISK_UNKNOWN)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (on_disk_errno),
                   _("%s: cannot look at the file before deleting it: %s"), path,
                   g_strerror (on_disk_errno));
      return FALSE;
    }
  /* Only the file the user was shown: one put there since is not theirs
   * to lose by this. (One too large to read: still a regular file larger
   * than this version reads.) */
  if (self->too_large)
    {
      GStatBuf sb;

      if (g_lstat (path, &sb) != 0 || !S_ISREG (sb.st_mode) || (guint64) sb.st_size <= MAX_FILE_BYTES)
        what = ON_DISK_FOREIGN;
      else
        what = ON_DISK_NEWER;
    }
  if (what != ON_DISK_NEWER)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_EXISTS,
                   _("%s: the file has changed since it was listed and is left as it is"), path);
      return FALSE;
    }
  /* To the trash, not unlinked: what this version cannot read it cannot
   * offer back with Undo, and the trash can. */
  if (!g_file_trash (file, NULL, error))
    return FALSE;
  if (g_file_test (folder, G_FILE_TEST_IS_DIR) && !g_file_trash (pictures, NULL, &folder_error))
    g_warning ("%s: %s", folder, folder_error->message);
  return TRUE;
}

/* Chat files are read back from disk, where anything may have changed them
 * (a crash of another tool, a hand edit, a sync conflict): every member is
 * read through a getter that checks its type, and a file with a member of
 * the wrong type or without one it needs is refused as a whole, so that a
 * half-read chat is never shown, saved over or exported. */


typedef struct {
  const char *path;
  GError **error;
  gboolean failed;
  gboolean borrowed; /* a picture read from the folder its "id" names */
} Reader;

/* Records the first problem only; later getters return their fallback. */
static void
bad_member (Reader     *r,
            const char *where,
            const char *name,
            const char *want)
{
  if (r->failed)
    return;
  r->failed = TRUE;
  /* Translators: a chat file, where in it (e.g. "message 3"), a member
   * name, and what it should be ("a string") */
  g_set_error (r->error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
               _("%s: %s: “%s” is missing or is not %s"), r->path, where, name, want);
}

static const char *
get_string (Reader     *r,
            JsonObject *o,
            const char *where,
            const char *name,
            gboolean    required)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL && !required)
    return NULL;
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    {
      bad_member (r, where, name, _("a string"));
      return NULL;
    }
  return json_node_get_string (n);
}

static gint64
get_int (Reader     *r,
         JsonObject *o,
         const char *where,
         const char *name,
         gint64      fallback)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL)
    return fallback;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    {
      bad_member (r, where, name, _("a whole number"));
      return fallback;
    }
  return json_node_get_int (n);
}

/* A count: an integer clamped to 0 .. INT_MAX (a cast of a larger value
 * would be undefined). */
static int
get_count (Reader     *r,
           JsonObject *o,
           const char *where,
           const char *name)
{
  gint64 v = get_int (r, o, where, name, 0);

  return (int) CLAMP (v, 0, G_MAXINT);
}

static double
get_double (Reader     *r,
            JsonObject *o,
            const char *where,
            const char *name)
{
  JsonNode *n = json_object_get_member (o, name);
  double v;

  if (n == NULL)
    return 0;
  if (!JSON_NODE_HOLDS_VALUE (n)
      || (json_node_get_value_type (n) != G_TYPE_DOUBLE
          && json_node_get_value_type (n) != G_TYPE_INT64))
    {
      bad_member (r, where, name, _("a number"));
      return 0;
    }
  v = json_node_get_double (n);
  return isfinite (v) ? v : 0;
}

static gboolean
get_bool (Reader     *r,
          JsonObject *o,
          const char *where,
          const char *name)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL)
    return FALSE;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
    {
      bad_member (r, where, name, _("true or false"));
      return FALSE;
    }
  return json_node_get_boolean (n);
}

/* NULL when absent (optional) or not of the kind asked (then a problem). */
static JsonNode *
get_node (Reader     *r,
          JsonObject *o,
          const char *where,
          const char *name,
          JsonNodeType type,
          gboolean    required,
          const char *want)
{
  JsonNode *n = json_object_get_member (o, name);

  if (n == NULL && !required)
    return NULL;
  if (n == NULL || JSON_NODE_TYPE (n) != type)
    {
      bad_member (r, where, name, want);
      return NULL;
    }
  return n;
}

static void
read_drafted (Reader      *r,
              TernMessage *m,
              JsonArray   *runs,
              const char  *where)
{
  gsize len = strlen (m->text);
  g_autofree guint8 *mask = g_malloc0 (len + 1);

  for (guint k = 0; k < json_array_get_length (runs); k++)
    {
      JsonNode *rn = json_array_get_element (runs, k);
      JsonArray *run;
      JsonNode *a, *b;
      gint64 start, count;

      if (!JSON_NODE_HOLDS_ARRAY (rn) || json_array_get_length (run = json_node_get_array (rn)) != 2
          || !JSON_NODE_HOLDS_VALUE (a = json_array_get_element (run, 0))
          || !JSON_NODE_HOLDS_VALUE (b = json_array_get_element (run, 1))
          || json_node_get_value_type (a) != G_TYPE_INT64
          || json_node_get_value_type (b) != G_TYPE_INT64)
        {
          bad_member (r, where, "drafted", _("a list of [start, length] pairs"));
          return;
        }
      start = json_node_get_int (a);
      count = json_node_get_int (b);
      /* Runs outside the text (a hand-edited file) are ignored. */
      if (start < 0 || count <= 0 || (guint64) start > len
          || (guint64) count > len - (guint64) start)
        continue;
      memset (mask + start, 1, (gsize) count);
    }
  tern_message_set_drafted (m, mask);
}

static void
read_stats (Reader      *r,
            TernMessage *m,
            JsonObject  *so,
            const char  *where)
{
  TernStats st = { 0 };

  st.prompt_tokens = get_count (r, so, where, "prompt_tokens");
  st.prefill_ms = get_double (r, so, where, "prefill_ms");
  st.prefill_tok_s = get_double (r, so, where, "prefill_tok_s");
  st.generated_tokens = get_count (r, so, where, "generated_tokens");
  st.decode_ms = get_double (r, so, where, "decode_ms");
  st.decode_tok_s = get_double (r, so, where, "decode_tok_s");
  st.ttft_ms = get_double (r, so, where, "ttft_ms");
  st.restored_tokens = get_count (r, so, where, "restored_tokens");
  st.restore_ms = get_double (r, so, where, "restore_ms");
  st.drafted = get_count (r, so, where, "drafted");
  st.accepted = get_count (r, so, where, "accepted");
  st.verify_steps = get_count (r, so, where, "verify_steps");
  st.kv_len = get_count (r, so, where, "kv_len");
  st.stop_reason = get_string (r, so, where, "stop_reason", FALSE);
  tern_message_set_stats (m, &st);
}

/* Images named in a message: a name of the wrong form makes the file
 * refused like any bad member; an image missing from the folder (deleted
 * by hand, changed on disk) is left out and counted, and the text stays. */
static void
read_images (Reader      *r,
             TernMessage *m,
             JsonArray   *names,
             const char  *const folders[2],
             const char  *where)
{
  for (guint i = 0; i < json_array_get_length (names) && !r->failed; i++)
    {
      JsonNode *n = json_array_get_element (names, i);
      const char *name;
      GBytes *bytes;

      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING
          || !image_name_valid (name = json_node_get_string (n)))
        {
          bad_member (r, where, "images", _("a list of image file names"));
          return;
        }
      /* Its own folder, else the one its "id" names (see tern_chat_load):
       * either way the bytes must match the name. */
      bytes = read_image (folders[0], name);
      if (bytes == NULL && folders[1] != NULL
          && (bytes = read_image (folders[1], name)) != NULL)
        r->borrowed = TRUE;
      if (bytes == NULL)
        {
          m->images_missing++;
          continue;
        }
      if (m->images == NULL)
        m->images = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
      g_ptr_array_add (m->images, bytes);
    }
}

/* A chat id as a file name in the chats folder: not empty, no path. */
static gboolean
id_valid (const char *id)
{
  return *id != '\0' && strchr (id, '/') == NULL && strchr (id, '\\') == NULL
         && !g_str_equal (id, ".") && !g_str_equal (id, "..");
}

/* The messages of a newer Tern's chat (its root object O), into SELF
 * when this version reads every one of them: an object with a "role" of
 * "user" or "assistant" and a string "content" (what else a message holds
 * is not shown: pictures, figures). None when one is anything else: a
 * transcript with a message left out, or a role this version does not
 * know shown as another, would misstate the chat. */
static void
newer_messages (TernChat   *self,
                JsonObject *o)
{
  JsonNode *n = json_object_get_member (o, "messages");
  JsonArray *messages;
  guint len;

  if (n == NULL || !JSON_NODE_HOLDS_ARRAY (n))
    return;
  messages = json_node_get_array (n);
  len = json_array_get_length (messages);
  for (guint pass = 0; pass < 2; pass++)
    for (guint i = 0; i < len; i++)
      {
        JsonNode *m = json_array_get_element (messages, i);
        JsonNode *role, *content;
        JsonObject *mo;

        if (!JSON_NODE_HOLDS_OBJECT (m))
          return;
        mo = json_node_get_object (m);
        role = json_object_get_member (mo, "role");
        content = json_object_get_member (mo, "content");
        if (role == NULL || content == NULL || !JSON_NODE_HOLDS_VALUE (role)
            || !JSON_NODE_HOLDS_VALUE (content) || json_node_get_value_type (role) != G_TYPE_STRING
            || json_node_get_value_type (content) != G_TYPE_STRING
            || (!g_str_equal (json_node_get_string (role), "user")
                && !g_str_equal (json_node_get_string (role), "assistant")))
          return;
        /* All checked (the first pass): shown. */
        if (pass == 1)
          append_message (self, json_node_get_string (role), json_node_get_string (content));
      }
}

/* The chat a newer Tern saved at PATH (its root object O), as far as the
 * sidebar needs it: known by its file's name, as every chat is; its
 * "title" when that is a non-blank string (a member this version writes
 * too), else that name; dated by the file. Nothing else is read: what the
 * newer format means by its other members is not known here. */
static TernChat *
newer_chat (const char *path,
            JsonObject *o,
            gint64      version,
            gboolean    whole,
            GError    **error)
{
  g_autoptr(TernChat) self = tern_chat_new ("chat");
  g_autofree char *file_id = g_path_get_basename (path);
  JsonNode *n = json_object_get_member (o, "title");
  GStatBuf sb;

  if (g_str_has_suffix (file_id, ".json"))
    file_id[strlen (file_id) - strlen (".json")] = '\0';
  /* ".json", "..json": no chat of this version's could be known by such a
   * name. Left out, as newer chats were, rather than set aside: that Tern
   * would no longer find it. */
  if (!id_valid (file_id))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   _("%s: saved by a newer version of Tern (chat format %d; this version reads "
                     "up to %d)"),
                   path, (int) MIN (version, G_MAXINT), FORMAT_VERSION);
      return NULL;
    }
  g_free (self->id);
  self->id = g_steal_pointer (&file_id);
  self->newer = TRUE;
  if (n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING)
    {
      g_autofree char *title = g_strstrip (g_strdup (json_node_get_string (n)));

      /* One line of a readable length, however long the file's is (a
       * title of megabytes would be laid out in the list at every draw). */
      for (char *c = title; *c != '\0'; c++)
        if (*c == '\n' || *c == '\r' || *c == '\t')
          *c = ' ';
      if (g_utf8_strlen (title, -1) > TITLE_MAX_CHARS)
        {
          g_autofree char *cut = g_utf8_substring (title, 0, TITLE_MAX_CHARS - 1);

          g_free (title);
          title = g_strconcat (g_strchomp (cut), "…", NULL);
        }
      if (*title != '\0')
        self->custom_title = g_steal_pointer (&title);
    }
  /* (A name that is no UTF-8, "\xff.json", shown with U+FFFD: a label
   * takes only UTF-8.) */
  if (self->custom_title == NULL)
    self->custom_title = g_utf8_make_valid (self->id, -1);
  update_title (self);
  /* Its messages, shown read-only, when this version reads every one of
   * them as its own (the whole file read: WHOLE). */
  if (whole)
    newer_messages (self, o);
  self->updated = g_stat (path, &sb) == 0 ? (gint64) sb.st_mtime : 0;
  self->created = self->updated;
  return g_steal_pointer (&self);
}

static TernChat *load_chat (const char *path,
                            gboolean    newer_ok,
                            GError    **error);

TernChat *
tern_chat_load (const char *path,
                GError    **error)
{
  return load_chat (path, FALSE, error);
}

TernChat *
tern_chat_load_or_newer (const char *path,
                         GError    **error)
{
  return load_chat (path, TRUE, error);
}

gboolean
tern_chat_is_newer (TernChat *self)
{
  g_return_val_if_fail (TERN_IS_CHAT (self), FALSE);
  return self->newer;
}

gboolean
tern_chat_is_too_large (TernChat *self)
{
  g_return_val_if_fail (TERN_IS_CHAT (self), FALSE);
  return self->too_large;
}

TernChatHeadOnly
tern_chat_get_head_only (TernChat *self)
{
  g_return_val_if_fail (TERN_IS_CHAT (self), TERN_CHAT_HEAD_ONLY_NO);
  return self->head_only;
}

static TernChat *
load_chat (const char *path,
           gboolean    newer_ok,
           GError    **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(TernChat) self = NULL;
  g_autofree char *data = NULL;
  gsize len = 0;
  Reader r = { .path = path, .error = error };
  tn_error check = { 0 };
  uint64_t n_messages = 0;
  JsonNode *root, *node;
  JsonObject *o;
  JsonArray *messages;
  const char *id, *format;
  gint64 version;
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *file_id = g_path_get_basename (path);
  g_autofree char *own_folder = NULL;
  g_autofree char *id_folder = NULL;
  const char *folders[2] = { NULL, NULL };

  /* Not g_stat + g_file_get_contents: a FIFO passes a size check (0
   * bytes) and then blocks the window's thread for ever, /dev/zero never
   * ends. tern_read_file refuses both unread. */
  if (!tern_read_file (path, MAX_FILE_BYTES, &data, &len, error))
    return NULL;
  /* Strict JSON before json-glib sees it: json-glib makes bytes that are
   * no UTF-8 of C's escapes ("\\101"), keeps the last of a repeated key
   * (a hand-edited chat would lose a message's text without a word) and
   * recurses once per level; a NUL would cut a message short. The same
   * pass counts the messages (objects at the third level): json-glib's tree
   * takes ~1 KB a message, and a 64 MiB file of empty ones would take
   * 2.4 GB. Refused before it is built; the list leaves the file as it is
   * and says so (tern_chat_load_listed). One walk, not a second one over
   * every chat at startup (docs/APP.md). */
  if (tn_json_check_count (data, len, path, MAX_DEPTH, CHAT_JSON_FLAGS, 3, &n_messages, &check)
      != TN_OK)
    {
      g_autofree char *why = tern_engine_error_text (&check);

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, _("%s: not a Tern chat"), why);
      return NULL;
    }
  {
    guint64 n = n_messages;

    if (n > TERN_CHAT_MAX_MESSAGES)
      {
        /* Translators: a chat file; its number of messages, and the most
         * this version of Tern reads */
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
                     _("%s: %u messages, more than this version of Tern reads (%u)"), path,
                     (guint) MIN (n, G_MAXUINT), (guint) TERN_CHAT_MAX_MESSAGES);
        return NULL;
      }
  }
  if (!json_parser_load_from_data (parser, data, (gssize) len, error))
    {
      if (error != NULL && *error != NULL)
        g_prefix_error (error, "%s: ", path);
      return NULL;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, _("%s: not a Tern chat"), path);
      return NULL;
    }
  o = json_node_get_object (root);
  format = get_string (&r, o, _("the chat"), "format", TRUE);
  if (r.failed)
    return NULL;
  if (!g_str_equal (format, "tern-chat"))
    {
      g_clear_error (error);
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, _("%s: not a Tern chat"), path);
      return NULL;
    }
  /* Before any other member: a later format may have changed them. Files
   * from before "version" was read all say 1 (absent: 1 too). */
  version = get_int (&r, o, _("the chat"), "version", FORMAT_VERSION);
  if (r.failed)
    return NULL;
  if (version > FORMAT_VERSION && newer_ok)
    return newer_chat (path, o, version, TRUE, error);
  if (version > FORMAT_VERSION)
    {
      /* Translators: a chat file; the chat format it is in, and the newest
       * this version of Tern reads */
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                   _("%s: saved by a newer version of Tern (chat format %d; this version reads "
                     "up to %d)"),
                   path, (int) MIN (version, G_MAXINT), FORMAT_VERSION);
      return NULL;
    }
  id = get_string (&r, o, _("the chat"), "id", TRUE);
  node = get_node (&r, o, _("the chat"), "messages", JSON_NODE_ARRAY, TRUE, _("a list"));
  if (r.failed)
    return NULL;
  /* The chat is known by its file's name (less ".json"): that is the file
   * a save replaces and a delete removes, with its pictures' folder. Its
   * "id" is the same in every file Tern wrote, but not in a copy that
   * another tool made in the folder (a sync conflict's "ID (conflicted
   * copy).json", a backup): taken from there, saving or deleting the copy
   * went to the original's file and folder. The copy keeps its file
   * unchanged until it is changed, and then becomes a chat of its own. */
  if (g_str_has_suffix (file_id, ".json"))
    file_id[strlen (file_id) - strlen (".json")] = '\0';
  if (!id_valid (id) || !id_valid (file_id))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, _("%s: bad chat id"), path);
      return NULL;
    }

  self = g_object_new (TERN_TYPE_CHAT, NULL);
  self->id = g_strdup (file_id);
  /* A copy's pictures are still in the folder of the chat it copies until
   * it is saved (then into its own): read from there too. */
  folders[0] = own_folder = images_dir (dir, file_id);
  if (!g_str_equal (id, file_id))
    folders[1] = id_folder = images_dir (dir, id);
  tern_chat_set_mode (self, get_string (&r, o, _("the chat"), "mode", FALSE));
  self->model = g_strdup (get_string (&r, o, _("the chat"), "model", FALSE));
  self->system_prompt = g_strdup (get_string (&r, o, _("the chat"), "system_prompt", FALSE));
  self->custom_title = g_strdup (get_string (&r, o, _("the chat"), "title", FALSE));
  tern_chat_set_draft (self, get_string (&r, o, _("the chat"), "draft", FALSE));
  self->created = get_int (&r, o, _("the chat"), "created", 0);
  self->context_start = (guint) CLAMP (get_int (&r, o, _("the chat"), "context_start", 0), 0,
                                       G_MAXINT);

  messages = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (messages) && !r.failed; i++)
    {
      JsonNode *n = json_array_get_element (messages, i);
      /* Translators: where in a chat file a problem is: the message's number */
      g_autofree char *where = g_strdup_printf (_("message %u"), i + 1);
      JsonObject *mo;
      TernMessage *m;
      const char *role, *content;

      if (!JSON_NODE_HOLDS_OBJECT (n))
        {
          bad_member (&r, where, "messages", _("an object"));
          break;
        }
      mo = json_node_get_object (n);
      role = get_string (&r, mo, where, "role", TRUE);
      content = get_string (&r, mo, where, "content", TRUE);
      if (r.failed)
        break;
      if (!g_str_equal (role, "user") && !g_str_equal (role, "assistant"))
        {
          bad_member (&r, where, "role", _("“user” or “assistant”"));
          break;
        }
      m = append_message (self, role, content);
      m->cancelled = get_bool (&r, mo, where, "cancelled");
      m->prompt_changed = get_bool (&r, mo, where, "system_prompt_changed");
      m->alone = get_bool (&r, mo, where, "flash_alone");
      m->error = g_strdup (get_string (&r, mo, where, "error", FALSE));
      if ((node = get_node (&r, mo, where, "drafted", JSON_NODE_ARRAY, FALSE, _("a list"))))
        read_drafted (&r, m, json_node_get_array (node), where);
      if ((node = get_node (&r, mo, where, "stats", JSON_NODE_OBJECT, FALSE, _("an object"))))
        read_stats (&r, m, json_node_get_object (node), where);
      if ((node = get_node (&r, mo, where, "images", JSON_NODE_ARRAY, FALSE, _("a list"))))
        read_images (&r, m, json_node_get_array (node), folders, where);
    }
  if (r.failed)
    return NULL;
  carry_marks_of_empty_answers (self);
  self->context_start = MIN (self->context_start, self->messages->len);
  update_title (self);
  self->updated = get_int (&r, o, _("the chat"), "updated", self->created);
  if (r.failed)
    return NULL;
  if (r.borrowed)
    self->images_from = g_strdup (id);
  return g_steal_pointer (&self);
}

/* -------------------------------------------- a file the list cannot read
 *
 * A file that tern_chat_load_or_newer refuses was renamed *.corrupt, even
 * when this version could not judge it: a newer Tern's chat over this
 * version's 64 MiB or broken by this version's reader, a file that a sync
 * tool was still writing. Renamed, the newer Tern no longer finds it. Only
 * a file that is this version's to judge is set aside now. */

/* The first PEEK_BYTES of PATH into BUF (*N of them) and what PATH is
 * (*SB, not following a link). 0, or the errno that stopped it; EINVAL:
 * not a regular file (a FIFO is opened without blocking and not read). */
static int
read_head (const char *path,
           char       *buf,
           gsize      *n,
           struct stat *sb)
{
  struct stat opened;
  int fd;

  *n = 0;
  if (lstat (path, sb) != 0)
    return errno;
  if (S_ISLNK (sb->st_mode))
    return 0; /* what it points to is not this folder's file */
  if (!S_ISREG (sb->st_mode))
    return EINVAL;
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
  if (fd < 0)
    return errno == ELOOP ? EINVAL : errno;
  if (fstat (fd, &opened) != 0 || !S_ISREG (opened.st_mode))
    {
      close (fd);
      return EINVAL;
    }
  *sb = opened;
  while (*n < PEEK_BYTES)
    {
      ssize_t got = read (fd, buf + *n, PEEK_BYTES - *n);

      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        {
          int saved = errno;

          close (fd);
          return saved;
        }
      if (got == 0)
        break;
      *n += (gsize) got;
    }
  close (fd);
  return 0;
}

/* The chat for the list when the N bytes of BUF (a file's first) say a
 * newer Tern's chat, read as file_on_disk reads them; NULL (no error) when
 * they do not. */
static TernChat *
newer_from_head (const char *path,
                 const char *buf,
                 gsize       n,
                 GError    **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *closed = NULL;
  gsize len = 0;
  JsonNode *root, *node;

  if (peek_header (buf, n) != ON_DISK_NEWER)
    return NULL;
  /* The members peek_header found a newer chat's. */
  closed = head_members (buf, n, FALSE, &len);
  if (closed == NULL)
    closed = head_members (buf, n, TRUE, &len);
  if (closed == NULL || !json_parser_load_from_data (parser, closed, (gssize) len, NULL)
      || (root = json_parser_get_root (parser)) == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  node = json_object_get_member (json_node_get_object (root), "version");
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return NULL;
  return newer_chat (path, json_node_get_object (root), json_node_get_int (node), FALSE,
                     error);
}

TernChat *
tern_chat_load_listed (const char     *path,
                       gint64          now,
                       TernChatUnread *unread,
                       GError        **error)
{
  g_autoptr(GError) local = NULL;
  TernChat *chat;
  char buf[PEEK_BYTES];
  gsize n = 0;
  struct stat sb;
  int failed;
  gint64 age, changed;

  g_return_val_if_fail (unread != NULL, NULL);
  *unread = TERN_CHAT_UNREAD_BROKEN;
  chat = load_chat (path, TRUE, &local);
  if (chat != NULL)
    return chat;
  if (local == NULL)
    g_set_error (&local, G_IO_ERROR, G_IO_ERROR_FAILED, _("%s: not a Tern chat"), path);
  /* A newer Tern's chat under a name no chat could have (".json"). */
  if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED))
    {
      *unread = TERN_CHAT_UNREAD_KEEP;
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  failed = read_head (path, buf, &n, &sb);
  if (failed == ENOENT)
    {
      *unread = TERN_CHAT_UNREAD_GONE;
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  /* Out of descriptors or memory: nothing is known of the file yet. */
  if (failed == EMFILE || failed == ENFILE || failed == ENOMEM
      || g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NO_SPACE))
    {
      *unread = TERN_CHAT_UNREAD_BUSY;
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  /* Not a regular file (a FIFO, a folder, a device), a link (the user put
   * it there, to a file elsewhere), one this process may not read: none
   * is a file this version wrote and can tell broken. */
  if (failed != 0 || S_ISLNK (sb.st_mode))
    {
      *unread = TERN_CHAT_UNREAD_KEEP;
      if (failed != 0 && local == NULL)
        g_set_error (&local, G_FILE_ERROR, g_file_error_from_errno (failed), "%s: %s", path,
                     g_strerror (failed));
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  /* Changed a moment ago (a sync tool writing it in place, a copy under
   * way): not judged until it has been left alone for a while, whatever
   * its head says (a newer Tern's chat cut short now is read whole, with
   * its messages, once complete). A time in the future by less than as
   * much counts too (another machine's clock). The inode's change time
   * too: a tool that keeps the original's modification time (cp -p,
   * rsync -t, an unpacker) sets it back after writing, and may be writing
   * the next part already; no one can set the change time back, and every
   * write, size change and utimensat moves it to the present. */
  age = now - (gint64) sb.st_mtime;
  changed = now - (gint64) sb.st_ctime;
  if ((age < TERN_CHAT_QUIET_SECONDS && age > -TERN_CHAT_QUIET_SECONDS)
      || (changed < TERN_CHAT_QUIET_SECONDS && changed > -TERN_CHAT_QUIET_SECONDS))
    {
      *unread = TERN_CHAT_UNREAD_BUSY;
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  /* Its head says a newer Tern's chat, whatever the rest (larger than this
   * version reads, or past what its reader takes): listed as newer. */
  {
    g_autoptr(GError) newer_error = NULL;

    chat = newer_from_head (path, buf, n, &newer_error);
    if (chat != NULL)
      {
        /* Its messages are not shown: the whole file is past the size
         * this version reads, or its reader refuses it (what follows the
         * first fault is unknown, and a part of a transcript would
         * misstate the chat). The page says which. */
        chat->head_only = (guint64) sb.st_size > MAX_FILE_BYTES ? TERN_CHAT_HEAD_ONLY_LARGE
                                                                : TERN_CHAT_HEAD_ONLY_UNREAD;
        return chat;
      }
    if (newer_error != NULL)
      {
        *unread = TERN_CHAT_UNREAD_KEEP;
        g_propagate_error (error, g_steal_pointer (&newer_error));
        return NULL;
      }
  }
  /* More messages than this version reads (a whole chat: its JSON was
   * checked): not broken, and perhaps a later version's that allows more.
   * Left as it is, and said. */
  if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE)
      && (guint64) sb.st_size <= MAX_FILE_BYTES)
    *unread = TERN_CHAT_UNREAD_KEEP;
  g_propagate_error (error, g_steal_pointer (&local));
  /* Larger than this version reads: it may be a later version's (one that
   * allows more) and cannot be read here to tell. Listed, read-only as a
   * newer Tern's chat is, known by its file's name; trashed by Delete. */
  if ((guint64) sb.st_size > MAX_FILE_BYTES)
    {
      g_autoptr(JsonObject) none = json_object_new ();
      g_autoptr(GError) large_error = NULL;

      *unread = TERN_CHAT_UNREAD_KEEP;
      chat = newer_chat (path, none, FORMAT_VERSION + 1, FALSE, &large_error);
      if (chat != NULL)
        {
          chat->too_large = TRUE;
          g_clear_error (error);
          return chat;
        }
      return NULL;
    }
  return NULL;
}

char *
tern_chat_left_out_key (const char *dir,
                        const char *name)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *escaped = g_strescape (name, NULL);
  const char *kind = "gone";
  struct stat sb;

  if (lstat (path, &sb) == 0)
    kind = S_ISLNK (sb.st_mode) ? "link"
         : S_ISDIR (sb.st_mode) ? "folder"
         : S_ISFIFO (sb.st_mode) ? "fifo"
         : S_ISREG (sb.st_mode) ? "file"
         : "other";
  return g_strconcat (kind, " ", escaped, NULL);
}

/* The most the record is read: thousands of lines, far more than any
 * folder leaves out; a larger one is not ours and counts as empty. */
#define LEFT_OUT_MAX_BYTES (1024 * 1024)

guint
tern_chat_left_out_news (const char *state,
                         GPtrArray  *keys,
                         gboolean    all)
{
  g_autoptr(GHashTable) known = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GHashTable) now = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GString) out = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;
  guint n_new = 0;

  /* tern_read_file: a FIFO or a device put in its place is refused
   * without blocking the window. */
  if (tern_read_file (state, LEFT_OUT_MAX_BYTES, &text, NULL, NULL))
    {
      lines = g_strsplit (text, "\n", -1);
      for (guint i = 0; lines[i] != NULL; i++)
        if (lines[i][0] != '\0')
          g_hash_table_add (known, lines[i]);
    }
  for (guint i = 0; i < keys->len; i++)
    {
      const char *key = g_ptr_array_index (keys, i);

      if (!g_hash_table_add (now, (gpointer) key))
        continue;
      if (!g_hash_table_contains (known, key))
        n_new++;
      g_string_append_printf (out, "%s\n", key);
    }
  /* Unchanged: not written at every start. */
  if (n_new == 0 && (!all || g_hash_table_size (known) == g_hash_table_size (now)))
    return 0;
  if (!all)
    {
      GHashTableIter iter;
      gpointer key;

      g_hash_table_iter_init (&iter, known);
      while (g_hash_table_iter_next (&iter, &key, NULL))
        if (!g_hash_table_contains (now, key))
          g_string_append_printf (out, "%s\n", (const char *) key);
    }
  if (out->len == 0)
    {
      if (g_unlink (state) != 0 && errno != ENOENT)
        g_message ("%s: %s", state, g_strerror (errno));
    }
  else if (!g_file_set_contents (state, out->str, (gssize) out->len, &error))
    g_message ("%s", error->message);
  return n_new;
}

/* -------------------------------------------------------------- Markdown */

char *
tern_chat_to_markdown (TernChat *self)
{
  GString *s = g_string_new (NULL);

  g_string_append_printf (s, "# %s\n\n", self->title);
  if (self->model != NULL)
    g_string_append_printf (s, _("Model: %s  \n"), self->model);
  g_string_append_printf (s, _("Mode: %s\n\n"),
                          g_str_equal (self->mode, "chat") ? _("multi-turn chat")
                                                           : _("single-turn flash"));
  if (self->system_prompt != NULL && *self->system_prompt)
    {
      g_auto(GStrv) lines = g_strsplit (self->system_prompt, "\n", -1);

      g_string_append_printf (s, "## %s\n\n", _("System prompt"));
      for (guint i = 0; lines[i] != NULL; i++)
        g_string_append_printf (s, "> %s\n", lines[i]);
      g_string_append (s, "\n");
    }
  for (guint i = 0; i < self->messages->len; i++)
    {
      TernMessage *m = g_ptr_array_index (self->messages, i);

      g_string_append_printf (s, "## %s\n\n%s\n\n",
                              g_str_equal (m->role, "user") ? _("User") : _("Assistant"),
                              m->text);
      /* An answer cut short by closing the window has no figures, but was
       * stopped: the line says so. */
      if (m->has_stats || m->cancelled)
        {
          g_autofree char *stats = tern_message_format_stats (m);
          g_string_append_printf (s, "*%s*\n\n", stats);
        }
      if (m->error != NULL)
        g_string_append_printf (s, "*%s: %s*\n\n", _("Error"), m->error);
    }
  return g_string_free (s, FALSE);
}
