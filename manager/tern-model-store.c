/* tern-model-store.c: installed models, shared packages, check and import. */
#include "tern-manager-private.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern.h"
#include "tern-paths.h"

#define STATE_SCHEMA 1
#define STATE_FILE "installed.json"
/* A thousand models take well under 1 MiB of state. */
#define STATE_MAX_BYTES ((guint64) 64 << 20)
#define LOCK_FILE ".lock"

typedef struct {
  char    *name;
  guint64  size;
  char    *sha256;
  gboolean broken;
  GPtrArray *kept;  /* KeptMember*, NULL when none */
} StoreFile;

typedef struct {
  char      *id;
  gboolean   complete;
  GPtrArray *files;  /* StoreFile* */
  GPtrArray *kept;
} StorePackage;

typedef struct {
  char    *tag;
  char    *label;
  char    *packages[TERN_PACKAGE_N_ROLES];  /* package ids, NULL when none */
  gboolean thinking;
  gboolean single_turn;
  gboolean speculation;
  TernDraftKind draft_kind;
  gint64   context_length;
  char    *installed;  /* ISO 8601 */
  GPtrArray *kept;
} StoreTag;

typedef struct {
  char    *tag;
  char    *path;
  guint64  size;
  char    *architecture;
  char    *imported;  /* ISO 8601 */
  gboolean broken;
  GPtrArray *kept;
} StoreLocal;

/* A member of installed.json this version of Tern does not know (a newer
 * one wrote it): kept as the text it was written with and written back
 * after the known ones, so that a downgrade does not lose it. */
typedef struct {
  char *key;
  char *raw;  /* the value's JSON text, byte for byte */
} KeptMember;

struct _TernModelStore {
  GObject     parent_instance;
  char       *root;
  char       *state_path;
  GHashTable *tags;      /* tag -> StoreTag* */
  GHashTable *packages;  /* id -> StorePackage* */
  GHashTable *locals;    /* tag -> StoreLocal* */
  GHashTable *held;      /* id -> count (GUINT_TO_POINTER) */
  GPtrArray  *kept;      /* KeptMember*: unknown top-level members */
  /* A check's progress (tern_model_store_get_check_progress), written by
   * the thread that hashes: bytes of the files to hash, of those done, and
   * of the one being hashed; checking while one runs. Atomic. */
  guint64     check_total;
  guint64     check_done;
  guint64     check_item;
  gint        checking;
};

G_DEFINE_FINAL_TYPE (TernModelStore, tern_model_store, G_TYPE_OBJECT)

enum {
  SIGNAL_CHANGED,
  N_SIGNALS
};

static guint signals[N_SIGNALS];

static void
kept_member_free (KeptMember *member)
{
  g_free (member->key);
  g_free (member->raw);
  g_free (member);
}

static void
store_file_free (StoreFile *file)
{
  g_clear_pointer (&file->kept, g_ptr_array_unref);
  g_free (file->name);
  g_free (file->sha256);
  g_free (file);
}

static void
store_package_free (StorePackage *package)
{
  g_free (package->id);
  g_ptr_array_unref (package->files);
  g_clear_pointer (&package->kept, g_ptr_array_unref);
  g_free (package);
}

static StorePackage *
store_package_new (const char *id)
{
  StorePackage *package = g_new0 (StorePackage, 1);

  package->id = g_strdup (id);
  package->files = g_ptr_array_new_with_free_func ((GDestroyNotify) store_file_free);
  return package;
}

static void
store_tag_free (StoreTag *tag)
{
  g_free (tag->tag);
  g_free (tag->label);
  for (int i = 0; i < TERN_PACKAGE_N_ROLES; i++)
    g_free (tag->packages[i]);
  g_free (tag->installed);
  g_clear_pointer (&tag->kept, g_ptr_array_unref);
  g_free (tag);
}

static void
store_local_free (StoreLocal *local)
{
  g_free (local->tag);
  g_free (local->path);
  g_free (local->architecture);
  g_free (local->imported);
  g_clear_pointer (&local->kept, g_ptr_array_unref);
  g_free (local);
}

const char *
tern_model_state_to_string (TernModelState state)
{
  switch (state)
    {
    case TERN_MODEL_STATE_AVAILABLE: return "available";
    case TERN_MODEL_STATE_PARTIAL: return "partial";
    case TERN_MODEL_STATE_INSTALLED: return "installed";
    case TERN_MODEL_STATE_BROKEN: return "broken";
    default: return "?";
    }
}

static void
tern_model_store_finalize (GObject *object)
{
  TernModelStore *self = TERN_MODEL_STORE (object);

  g_hash_table_unref (self->tags);
  g_hash_table_unref (self->packages);
  g_hash_table_unref (self->locals);
  g_hash_table_unref (self->held);
  g_clear_pointer (&self->kept, g_ptr_array_unref);
  g_free (self->root);
  g_free (self->state_path);
  G_OBJECT_CLASS (tern_model_store_parent_class)->finalize (object);
}

static void
tern_model_store_class_init (TernModelStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = tern_model_store_finalize;

  signals[SIGNAL_CHANGED] =
    g_signal_new ("changed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 0);
}

static void
tern_model_store_init (TernModelStore *self)
{
  self->tags = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) store_tag_free);
  self->packages = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                          (GDestroyNotify) store_package_free);
  self->locals = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                        (GDestroyNotify) store_local_free);
  self->held = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

char *
tern_model_store_default_root (void)
{
  return g_build_filename (g_get_user_data_dir (), "tern", "models", NULL);
}

/* ---- installed.json ---------------------------------------------------- */

/* An imported model's path in installed.json, which is JSON and so UTF-8,
 * while a file name is any bytes: a name that is not UTF-8 (a Latin-1 "é")
 * is kept as its file: URI, any other as the plain path it always was, so
 * that older versions read what they wrote. The path is absolute
 * (tern_model_store_import), so a plain one never starts with "file:". */
static char *
local_path_to_json (const char *path)
{
  char *stored = tern_paths_to_stored (path);

  /* Only a relative path has no URI: kept as valid UTF-8, a broken entry. */
  return stored != NULL ? stored : g_utf8_make_valid (path, -1);
}

/* NULL: no path, or a file: URI that names no file of this machine (parse_state keeps
 * such a value as it is, a broken import). */
static char *
local_path_from_json (const char *text)
{
  return text != NULL ? tern_paths_from_stored (text) : NULL;
}

static gboolean
state_fail (TernModelStore *self,
            GError        **error,
            const char     *field,
            const char     *what)
{
  g_autoptr(GString) shown = g_string_new (NULL);

  /* The field names the file's keys: shown escaped, so that a newline or
   * ESC in one cannot start a line or a terminal sequence in the message. */
  tern_manager_append_shown (shown, field);
  g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_STATE,
               _("%s: %s: %s (move the file away to start over; downloaded files stay in place)"),
               self->state_path, shown->str, what);
  return FALSE;
}

static const char *
obj_string (JsonObject *object,
            const char *key)
{
  JsonNode *node = json_object_get_member (object, key);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (node);
}

static gint64
obj_int (JsonObject *object,
         const char *key,
         gint64      fallback)
{
  JsonNode *node = json_object_get_member (object, key);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return fallback;
  return json_node_get_int (node);
}

static gboolean
obj_bool (JsonObject *object,
          const char *key)
{
  JsonNode *node = json_object_get_member (object, key);

  return node != NULL && JSON_NODE_HOLDS_VALUE (node)
      && json_node_get_value_type (node) == G_TYPE_BOOLEAN && json_node_get_boolean (node);
}

static JsonObject *
obj_object (JsonObject *object,
            const char *key)
{
  JsonNode *node = json_object_get_member (object, key);

  return node != NULL && JSON_NODE_HOLDS_OBJECT (node) ? json_node_get_object (node) : NULL;
}

static void
clear_state (TernModelStore *self)
{
  g_hash_table_remove_all (self->tags);
  g_hash_table_remove_all (self->packages);
  g_hash_table_remove_all (self->locals);
  g_clear_pointer (&self->kept, g_ptr_array_unref);
}

static const char * const role_keys[TERN_PACKAGE_N_ROLES] = { "base", "draft", "vision" };

static gboolean
parse_state (TernModelStore *self,
             JsonNode       *root,
             GError        **error)
{
  JsonObject *object, *tags, *packages, *locals;
  g_autoptr(GList) members = NULL;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return state_fail (self, error, "(top level)", "not a JSON object");
  object = json_node_get_object (root);
  if (obj_int (object, "schema", -1) != STATE_SCHEMA)
    return state_fail (self, error, "schema", "missing or not a schema this version of Tern reads");
  tags = obj_object (object, "tags");
  packages = obj_object (object, "packages");
  locals = obj_object (object, "local");
  if (tags == NULL || packages == NULL || locals == NULL)
    return state_fail (self, error, "(top level)", "'tags', 'packages' and 'local' must be objects");

  members = json_object_get_members (packages);
  for (GList *l = members; l != NULL; l = l->next)
    {
      g_autofree char *field = g_strdup_printf ("packages.%s", (const char *) l->data);
      JsonObject *po = obj_object (packages, l->data);
      JsonNode *files_node;
      StorePackage *package;

      if (po == NULL || !tern_manager_safe_name (l->data))
        return state_fail (self, error, field, "not a package entry");
      files_node = json_object_get_member (po, "files");
      if (files_node == NULL || !JSON_NODE_HOLDS_ARRAY (files_node))
        return state_fail (self, error, field, "'files' must be an array");
      package = store_package_new (l->data);
      package->complete = obj_bool (po, "complete");
      g_hash_table_insert (self->packages, package->id, package);
      for (guint i = 0; i < json_array_get_length (json_node_get_array (files_node)); i++)
        {
          JsonNode *fnode = json_array_get_element (json_node_get_array (files_node), i);
          JsonObject *fo = JSON_NODE_HOLDS_OBJECT (fnode) ? json_node_get_object (fnode) : NULL;
          const char *name = fo ? obj_string (fo, "name") : NULL;
          const char *sha = fo ? obj_string (fo, "sha256") : NULL;
          gint64 size = fo ? obj_int (fo, "size", -1) : -1;
          StoreFile *file;

          if (!tern_manager_safe_name (name) || size < 0 || (sha != NULL && !tern_manager_is_sha256 (sha)))
            return state_fail (self, error, field, "a file entry lacks a valid name, size or sha256");
          file = g_new0 (StoreFile, 1);
          file->name = g_strdup (name);
          file->size = (guint64) size;
          file->sha256 = g_strdup (sha);
          file->broken = obj_bool (fo, "broken");
          g_ptr_array_add (package->files, file);
        }
    }
  g_clear_pointer (&members, g_list_free);

  members = json_object_get_members (tags);
  for (GList *l = members; l != NULL; l = l->next)
    {
      g_autofree char *field = g_strdup_printf ("tags.%s", (const char *) l->data);
      JsonObject *to = obj_object (tags, l->data);
      StoreTag *tag;

      if (to == NULL)
        return state_fail (self, error, field, "not a tag entry");
      /* No catalog family is named "local" (tern-catalog.c): such a tag is
       * an import's, and under both it was listed twice and removed from
       * one only. */
      if (g_str_has_prefix (l->data, TERN_LOCAL_PREFIX))
        return state_fail (self, error, field, "an imported model's tag belongs under 'local'");
      tag = g_new0 (StoreTag, 1);
      tag->tag = g_strdup (l->data);
      g_hash_table_insert (self->tags, tag->tag, tag);
      tag->label = g_strdup (obj_string (to, "label"));
      tag->thinking = obj_bool (to, "thinking");
      tag->single_turn = obj_bool (to, "single_turn");
      tag->speculation = obj_bool (to, "speculation");
      /* Absent in stores written before drafts had kinds: a draft model. */
      tag->draft_kind = TERN_DRAFT_KIND_MODEL;
      for (int k = 0; k < TERN_DRAFT_N_KINDS; k++)
        if (g_strcmp0 (obj_string (to, "draft_kind"), tern_draft_kind_to_string ((TernDraftKind) k)) == 0)
          tag->draft_kind = (TernDraftKind) k;
      tag->context_length = obj_int (to, "context_length", 0);
      tag->installed = g_strdup (obj_string (to, "installed"));
      for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
        {
          const char *id = obj_string (to, role_keys[r]);

          if (id != NULL && !g_hash_table_contains (self->packages, id))
            return state_fail (self, error, field, "names a package that is not in 'packages'");
          tag->packages[r] = g_strdup (id);
        }
      if (tag->packages[TERN_PACKAGE_ROLE_BASE] == NULL)
        return state_fail (self, error, field, "has no 'base' package");
    }
  g_clear_pointer (&members, g_list_free);

  members = json_object_get_members (locals);
  for (GList *l = members; l != NULL; l = l->next)
    {
      g_autofree char *field = g_strdup_printf ("local.%s", (const char *) l->data);
      JsonObject *lo = obj_object (locals, l->data);
      const char *text = lo != NULL ? obj_string (lo, "path") : NULL;
      g_autofree char *path = NULL;
      StoreLocal *local;

      if (text == NULL || !g_str_has_prefix (l->data, TERN_LOCAL_PREFIX))
        return state_fail (self, error, field, "not an imported-model entry with a 'path'");
      local = g_new0 (StoreLocal, 1);
      local->tag = g_strdup (l->data);
      path = local_path_from_json (text);
      /* A "file:" value that is no file: URI (hand-edited: relative, %00)
       * is a broken import, as a plain path to nothing is, kept as written
       * (local_path_to_json writes it back so); refused, it took every
       * model of the store with it. */
      local->broken = path == NULL || obj_bool (lo, "broken");
      local->path = path != NULL ? g_steal_pointer (&path) : g_strdup (text);
      local->size = (guint64) MAX (obj_int (lo, "size", 0), 0);
      local->architecture = g_strdup (obj_string (lo, "architecture"));
      local->imported = g_strdup (obj_string (lo, "imported"));
      g_hash_table_insert (self->locals, local->tag, local);
    }
  return TRUE;
}

/* ---- members this version does not know ---------------------------------
 * Walks the text of installed.json, which tn_json_check has passed (strict,
 * no repeated key), for the spans of values: json-glib would keep a value
 * but not its text (1.10 came back as 1.1000000000000001). */

typedef struct {
  const char *s;
  gsize       pos;
  gsize       end;
} SpanIter;

static gsize
span_skip_ws (const char *s,
              gsize       i,
              gsize       end)
{
  while (i < end && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
    i++;
  return i;
}

/* i at a '"': the index after the closing one. */
static gsize
span_skip_string (const char *s,
                  gsize       i,
                  gsize       end)
{
  for (i++; i < end && s[i] != '"'; i++)
    if (s[i] == '\\')
      i++;
  return MIN (i + 1, end);
}

static gsize
span_skip_value (const char *s,
                 gsize       i,
                 gsize       end)
{
  int depth = 0;

  if (i < end && s[i] == '"')
    return span_skip_string (s, i, end);
  if (i < end && s[i] != '{' && s[i] != '[')
    {
      while (i < end && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t'
             && s[i] != '\n' && s[i] != '\r')
        i++;
      return i;
    }
  while (i < end)
    {
      if (s[i] == '"')
        {
          i = span_skip_string (s, i, end);
          continue;
        }
      if (s[i] == '{' || s[i] == '[')
        depth++;
      else if ((s[i] == '}' || s[i] == ']') && --depth == 0)
        return i + 1;
      i++;
    }
  return end;
}

/* start, end: the span of an object or array (its brackets included). */
static gboolean
span_iter_init (SpanIter   *it,
                const char *s,
                gsize       start,
                gsize       end,
                char        open)
{
  it->s = s;
  it->end = end;
  if (start >= end || s[start] != open)
    return FALSE;
  it->pos = start + 1;
  return TRUE;
}

/* The next element's span; FALSE at the end. */
static gboolean
span_next_element (SpanIter *it,
                   gsize    *start,
                   gsize    *end)
{
  gsize i = span_skip_ws (it->s, it->pos, it->end);

  if (i < it->end && it->s[i] == ',')
    i = span_skip_ws (it->s, i + 1, it->end);
  if (i >= it->end || it->s[i] == '}' || it->s[i] == ']')
    return FALSE;
  *start = i;
  *end = span_skip_value (it->s, i, it->end);
  it->pos = *end;
  return TRUE;
}

/* The next member's key (decoded) and value span; FALSE at the end. */
static gboolean
span_next_member (SpanIter  *it,
                  char     **key,
                  gsize     *start,
                  gsize     *end)
{
  gsize k0, k1;
  gsize i = span_skip_ws (it->s, it->pos, it->end);

  if (i < it->end && it->s[i] == ',')
    i = span_skip_ws (it->s, i + 1, it->end);
  if (i >= it->end || it->s[i] != '"')
    return FALSE;
  k0 = i;
  k1 = span_skip_string (it->s, i, it->end);
  if (memchr (it->s + k0, '\\', k1 - k0) == NULL)
    *key = g_strndup (it->s + k0 + 1, k1 - k0 - 2);
  else
    {
      g_autofree char *literal = g_strndup (it->s + k0, k1 - k0);
      g_autoptr(JsonNode) node = json_from_string (literal, NULL);

      *key = g_strdup (node != NULL && JSON_NODE_HOLDS_VALUE (node) ? json_node_get_string (node) : NULL);
      if (*key == NULL)
        return FALSE;
    }
  i = span_skip_ws (it->s, k1, it->end);
  if (i >= it->end || it->s[i] != ':')
    {
      g_clear_pointer (key, g_free);
      return FALSE;
    }
  *start = span_skip_ws (it->s, i + 1, it->end);
  *end = span_skip_value (it->s, *start, it->end);
  it->pos = *end;
  return TRUE;
}

typedef struct {
  gsize start, end;  /* end 0: no such member */
} Span;

/* The members of the object at [start, end) whose keys are not in known,
 * and the spans of those in wanted (NULL-terminated, a span each in
 * found): one walk for both, where a walk for each wanted key went over
 * the object again, skipping every value before it. */
static GPtrArray *
span_members (const char        *s,
              gsize              start,
              gsize              end,
              const char * const *known,
              const char * const *wanted,
              Span              *found)
{
  GPtrArray *kept = NULL;
  SpanIter it;
  char *key;
  gsize vstart, vend;

  for (guint w = 0; wanted != NULL && wanted[w] != NULL; w++)
    found[w] = (Span) { 0, 0 };
  if (!span_iter_init (&it, s, start, end, '{'))
    return NULL;
  while (span_next_member (&it, &key, &vstart, &vend))
    {
      KeptMember *member;

      for (guint w = 0; wanted != NULL && wanted[w] != NULL; w++)
        if (g_str_equal (key, wanted[w]))
          found[w] = (Span) { vstart, vend };
      if (g_strv_contains (known, key))
        {
          g_free (key);
          continue;
        }
      member = g_new0 (KeptMember, 1);
      member->key = key;
      member->raw = g_strndup (s + vstart, vend - vstart);
      if (kept == NULL)
        kept = g_ptr_array_new_with_free_func ((GDestroyNotify) kept_member_free);
      g_ptr_array_add (kept, member);
    }
  return kept;
}

static const char * const top_keys[] = { "schema", "tags", "packages", "local", NULL };
static const char * const tag_keys[] = { "label", "base", "draft", "vision", "thinking", "single_turn",
                                         "draft_kind", "speculation", "context_length", "installed", NULL };
static const char * const package_keys[] = { "complete", "files", NULL };
static const char * const file_keys[] = { "name", "size", "sha256", "broken", NULL };
static const char * const local_keys[] = { "path", "size", "architecture", "imported", "broken", NULL };

/* After parse_state: the unknown members at the top and in every entry. */
static void
collect_kept (TernModelStore *self,
              const char     *s,
              gsize           length)
{
  static const char * const sections[] = { "tags", "packages", "local", NULL };
  static const char * const files_key[] = { "files", NULL };
  gsize start = span_skip_ws (s, 0, length);
  gsize end = span_skip_value (s, start, length);
  Span section[G_N_ELEMENTS (sections) - 1];

  self->kept = span_members (s, start, end, top_keys, sections, section);
  for (guint n = 0; n < G_N_ELEMENTS (section); n++)
    {
      SpanIter it;
      gsize estart, eend;
      char *key;

      if (section[n].end == 0 || !span_iter_init (&it, s, section[n].start, section[n].end, '{'))
        continue;
      while (span_next_member (&it, &key, &estart, &eend))
        {
          if (n == 0)
            {
              StoreTag *tag = g_hash_table_lookup (self->tags, key);

              if (tag != NULL)
                tag->kept = span_members (s, estart, eend, tag_keys, NULL, NULL);
            }
          else if (n == 1)
            {
              StorePackage *package = g_hash_table_lookup (self->packages, key);
              SpanIter files;
              Span list;
              gsize fstart, fend;

              if (package != NULL)
                {
                  package->kept = span_members (s, estart, eend, package_keys, files_key, &list);
                  /* parse_state added the files in the array's order. */
                  if (list.end != 0 && span_iter_init (&files, s, list.start, list.end, '['))
                    for (guint f = 0; f < package->files->len && span_next_element (&files, &fstart, &fend); f++)
                      ((StoreFile *) package->files->pdata[f])->kept =
                        span_members (s, fstart, fend, file_keys, NULL, NULL);
                }
            }
          else
            {
              StoreLocal *local = g_hash_table_lookup (self->locals, key);

              if (local != NULL)
                local->kept = span_members (s, estart, eend, local_keys, NULL, NULL);
            }
          g_free (key);
        }
    }
}

static gboolean
load_state (TernModelStore *self,
            GError        **error)
{
  g_autofree char *data = NULL;
  g_autoptr(GError) local_error = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  size_t length = 0;
  tn_error read_error = { 0 };
  tn_error check = { 0 };
  int rc;

  clear_state (self);
  /* The models folder may be one the caller chose (tern_model_store_new's
   * root): what sits there under our name is read as any named file is. */
  rc = tn_read_file (self->state_path, STATE_MAX_BYTES, &data, &length, &read_error);
  if (rc == TN_ERR_NOT_FOUND)
    return TRUE;
  if (rc != TN_OK)
    {
      g_autofree char *why = tern_manager_engine_message (&read_error);

      g_set_error_literal (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_STATE, why);
      return FALSE;
    }
  /* Strict JSON before json-glib: it recurses once per nesting level,
   * makes bytes that need not be UTF-8 of C's escapes and keeps the last
   * of a repeated key (a file edited by hand would lose a model's record
   * without a word). */
  if (tn_json_check (data, length, self->state_path, 32,
                     TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS
                     | TN_JSON_NO_HUGE_INTEGERS,
                     &check) != TN_OK)
    {
      g_autofree char *why = tern_manager_engine_message (&check);

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_STATE,
                   _("%s (move the file away to start over; downloaded files stay in place)"), why);
      clear_state (self);
      return FALSE;
    }
  if (!json_parser_load_from_data (parser, data, (gssize) length, &local_error))
    return state_fail (self, error, "(file)", local_error->message);
  if (!parse_state (self, json_parser_get_root (parser), error))
    {
      clear_state (self);
      return FALSE;
    }
  collect_kept (self, data, length);
  return TRUE;
}

static int
compare_strings (gconstpointer a,
                 gconstpointer b)
{
  return strcmp (*(const char * const *) a, *(const char * const *) b);
}

/* Keys in sorted order, so that the file is stable and diffable. */
static GPtrArray *
sorted_keys (GHashTable *table)
{
  GPtrArray *keys = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, table);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_ptr_array_add (keys, key);
  g_ptr_array_sort (keys, compare_strings);
  return keys;
}

/* Kept members go through the generator as unique placeholder strings,
 * which splice_kept then replaces by their text: json-glib has no way to
 * write a value's text as it is. */
typedef struct {
  char      *prefix;  /* random per save: no label can hold it by chance */
  GPtrArray *raws;    /* borrowed texts, in placeholder order */
} KeptWriter;

static void
add_kept (JsonBuilder *b,
          GPtrArray   *kept,
          KeptWriter  *w)
{
  for (guint i = 0; kept != NULL && i < kept->len; i++)
    {
      KeptMember *member = kept->pdata[i];
      g_autofree char *marker = g_strdup_printf ("%s%u", w->prefix, w->raws->len);

      json_builder_set_member_name (b, member->key);
      json_builder_add_string_value (b, marker);
      g_ptr_array_add (w->raws, member->raw);
    }
}

static char *
splice_kept (char       *text,
             gsize      *length,
             KeptWriter *w)
{
  g_autofree char *quoted = g_strconcat ("\"", w->prefix, NULL);
  GString *out;
  const char *p = text;
  const char *hit;

  if (w->raws->len == 0)
    return text;
  out = g_string_sized_new (*length);
  while ((hit = strstr (p, quoted)) != NULL)
    {
      char *after;
      guint64 index = g_ascii_strtoull (hit + strlen (quoted), &after, 10);

      g_string_append_len (out, p, hit - p);
      if (*after != '"' || index >= w->raws->len)
        {
          g_string_append_len (out, hit, (gssize) strlen (quoted));
          p = hit + strlen (quoted);
          continue;
        }
      g_string_append (out, w->raws->pdata[index]);
      p = after + 1;
    }
  g_string_append (out, p);
  g_free (text);
  *length = out->len;
  return g_string_free (out, FALSE);
}

static gboolean
save_state (TernModelStore *self,
            GError        **error)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(GPtrArray) keys = NULL;
  g_autofree char *text = NULL;
  g_autofree char *uuid = g_uuid_string_random ();
  g_autofree char *prefix = g_strdup_printf ("tern-kept-%s-", uuid);
  g_autoptr(GPtrArray) raws = g_ptr_array_new ();
  KeptWriter w = { prefix, raws };
  gsize length;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "schema");
  json_builder_add_int_value (b, STATE_SCHEMA);

  json_builder_set_member_name (b, "tags");
  json_builder_begin_object (b);
  keys = sorted_keys (self->tags);
  for (guint i = 0; i < keys->len; i++)
    {
      StoreTag *tag = g_hash_table_lookup (self->tags, keys->pdata[i]);

      json_builder_set_member_name (b, tag->tag);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "label");
      json_builder_add_string_value (b, tag->label ? tag->label : tag->tag);
      for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
        {
          json_builder_set_member_name (b, role_keys[r]);
          if (tag->packages[r])
            json_builder_add_string_value (b, tag->packages[r]);
          else
            json_builder_add_null_value (b);
        }
      json_builder_set_member_name (b, "thinking");
      json_builder_add_boolean_value (b, tag->thinking);
      json_builder_set_member_name (b, "single_turn");
      json_builder_add_boolean_value (b, tag->single_turn);
      if (tag->packages[TERN_PACKAGE_ROLE_DRAFT] != NULL)
        {
          json_builder_set_member_name (b, "draft_kind");
          json_builder_add_string_value (b, tern_draft_kind_to_string (tag->draft_kind));
          json_builder_set_member_name (b, "speculation");
          json_builder_add_boolean_value (b, tag->speculation);
        }
      json_builder_set_member_name (b, "context_length");
      json_builder_add_int_value (b, tag->context_length);
      if (tag->installed)
        {
          json_builder_set_member_name (b, "installed");
          json_builder_add_string_value (b, tag->installed);
        }
      add_kept (b, tag->kept, &w);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  g_clear_pointer (&keys, g_ptr_array_unref);

  json_builder_set_member_name (b, "packages");
  json_builder_begin_object (b);
  keys = sorted_keys (self->packages);
  for (guint i = 0; i < keys->len; i++)
    {
      StorePackage *package = g_hash_table_lookup (self->packages, keys->pdata[i]);

      json_builder_set_member_name (b, package->id);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "complete");
      json_builder_add_boolean_value (b, package->complete);
      json_builder_set_member_name (b, "files");
      json_builder_begin_array (b);
      for (guint f = 0; f < package->files->len; f++)
        {
          StoreFile *file = package->files->pdata[f];

          json_builder_begin_object (b);
          json_builder_set_member_name (b, "name");
          json_builder_add_string_value (b, file->name);
          json_builder_set_member_name (b, "size");
          json_builder_add_int_value (b, (gint64) file->size);
          json_builder_set_member_name (b, "sha256");
          if (file->sha256)
            json_builder_add_string_value (b, file->sha256);
          else
            json_builder_add_null_value (b);
          if (file->broken)
            {
              json_builder_set_member_name (b, "broken");
              json_builder_add_boolean_value (b, TRUE);
            }
          add_kept (b, file->kept, &w);
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
      add_kept (b, package->kept, &w);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  g_clear_pointer (&keys, g_ptr_array_unref);

  json_builder_set_member_name (b, "local");
  json_builder_begin_object (b);
  keys = sorted_keys (self->locals);
  for (guint i = 0; i < keys->len; i++)
    {
      StoreLocal *local = g_hash_table_lookup (self->locals, keys->pdata[i]);

      json_builder_set_member_name (b, local->tag);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "path");
      {
        g_autofree char *json_path = local_path_to_json (local->path);

        json_builder_add_string_value (b, json_path);
      }
      json_builder_set_member_name (b, "size");
      json_builder_add_int_value (b, (gint64) local->size);
      if (local->architecture)
        {
          json_builder_set_member_name (b, "architecture");
          json_builder_add_string_value (b, local->architecture);
        }
      if (local->imported)
        {
          json_builder_set_member_name (b, "imported");
          json_builder_add_string_value (b, local->imported);
        }
      if (local->broken)
        {
          json_builder_set_member_name (b, "broken");
          json_builder_add_boolean_value (b, TRUE);
        }
      add_kept (b, local->kept, &w);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  add_kept (b, self->kept, &w);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  text = tn_json_escape_unit_separators (json_generator_to_data (gen, NULL), &length);
  text = splice_kept (g_steal_pointer (&text), &length, &w);
  return tern_manager_write_file_atomic (self->state_path, text, length, error);
}

/* Every mutation runs between lock_begin and lock_end: an exclusive flock on
 * the root, and installed.json re-read under it. */
static int
lock_begin (TernModelStore *self,
            GError        **error)
{
  g_autofree char *path = g_build_filename (self->root, LOCK_FILE, NULL);
  int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

  if (fd < 0)
    {
      int errsv = errno;

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, _("%s: cannot open: %s"), path,
                   g_strerror (errsv));
      return -1;
    }
  while (flock (fd, LOCK_EX) != 0)
    if (errno != EINTR)
      break;
  if (!load_state (self, error))
    {
      close (fd);
      return -1;
    }
  return fd;
}

/* A change that could not be written (a full disk) is not kept in memory
 * either: until the next operation read the file again, the Models panel
 * (told the store changed) showed an import, a rename, a mark or a removal
 * that the next start would not find. What the file says stands. */
static gboolean
save_or_reread (TernModelStore *self,
                GError        **error)
{
  if (save_state (self, error))
    return TRUE;
  load_state (self, NULL);
  return FALSE;
}

static gboolean
lock_end (TernModelStore *self,
          int             fd,
          gboolean        save,
          GError        **error)
{
  gboolean ok = TRUE;

  if (save)
    ok = save_or_reread (self, error);
  close (fd);
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
  return ok;
}

TernModelStore *
tern_model_store_new (const char  *root,
                      GError     **error)
{
  g_autoptr(TernModelStore) self = g_object_new (TERN_TYPE_MODEL_STORE, NULL);
  g_autofree char *packages = NULL;

  self->root = root ? g_strdup (root) : tern_model_store_default_root ();
  self->state_path = g_build_filename (self->root, STATE_FILE, NULL);
  packages = g_build_filename (self->root, "packages", NULL);
  if (g_mkdir_with_parents (packages, 0755) != 0)
    {
      int errsv = errno;

      /* What is in the way is a file, a FIFO or a dangling link where a
       * folder of the path should be (ENOTDIR, ENOENT), or a folder this
       * user cannot write: the sentence says what to do about either. */
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
                   _("%s: cannot create the model store (%s): move away the file or broken "
                     "link in its way, or set XDG_DATA_HOME to a folder this user can write"),
                   packages, g_strerror (errsv));
      return NULL;
    }
  if (!load_state (self, error))
    return NULL;
  return g_steal_pointer (&self);
}

const char *
tern_model_store_get_root (TernModelStore *self)
{
  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), NULL);
  return self->root;
}

gboolean
tern_model_store_reload (TernModelStore  *self,
                         GError         **error)
{
  gboolean ok;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), FALSE);
  ok = load_state (self, error);
  g_signal_emit (self, signals[SIGNAL_CHANGED], 0);
  return ok;
}

/* ---- queries ------------------------------------------------------------ */

char **
tern_model_store_list_tags (TernModelStore *self)
{
  g_autoptr(GPtrArray) tags = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, self->tags);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_ptr_array_add (tags, g_strdup (key));
  g_hash_table_iter_init (&iter, self->locals);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_ptr_array_add (tags, g_strdup (key));
  g_ptr_array_sort (tags, compare_strings);
  g_ptr_array_add (tags, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&tags), FALSE);
}

gboolean
tern_model_store_has_tag (TernModelStore *self,
                          const char     *tag)
{
  return tag != NULL && (g_hash_table_contains (self->tags, tag) || g_hash_table_contains (self->locals, tag));
}

gboolean
tern_model_store_is_local (TernModelStore *self,
                           const char     *tag)
{
  return tag != NULL && g_hash_table_contains (self->locals, tag);
}

const char *
tern_model_store_get_label (TernModelStore *self,
                            const char     *tag)
{
  StoreTag *st = tag ? g_hash_table_lookup (self->tags, tag) : NULL;
  StoreLocal *local = tag ? g_hash_table_lookup (self->locals, tag) : NULL;

  if (st != NULL)
    return st->label ? st->label : st->tag;
  if (local != NULL)
    return local->tag + strlen (TERN_LOCAL_PREFIX);
  return NULL;
}

static StoreFile *
find_file (StorePackage *package,
           const char   *name)
{
  for (guint i = 0; package && i < package->files->len; i++)
    {
      StoreFile *file = package->files->pdata[i];

      if (g_str_equal (file->name, name))
        return file;
    }
  return NULL;
}

static gboolean
package_ok (TernModelStore *self,
            const char     *id)
{
  StorePackage *package = g_hash_table_lookup (self->packages, id);

  if (package == NULL || !package->complete)
    return FALSE;
  for (guint i = 0; i < package->files->len; i++)
    if (((StoreFile *) package->files->pdata[i])->broken)
      return FALSE;
  return TRUE;
}

char *
tern_model_store_get_file_path (TernModelStore *self,
                                const char     *package_id,
                                const char     *name)
{
  return g_build_filename (self->root, "packages", package_id, name, NULL);
}

char *
tern_model_store_get_package_dir (TernModelStore *self,
                                  const char     *package_id)
{
  return g_build_filename (self->root, "packages", package_id, NULL);
}

static guint64
file_size_on_disk (const char *path)
{
  struct stat st;

  return stat (path, &st) == 0 && S_ISREG (st.st_mode) ? (guint64) st.st_size : 0;
}

/* Any bytes of the catalog package on disk that are not yet an installed
 * package: verified files or .partial downloads. */
static gboolean
package_has_partial (TernModelStore           *self,
                     const TernCatalogPackage *package)
{
  StorePackage *sp = g_hash_table_lookup (self->packages, package->id);

  if (sp != NULL && sp->complete)
    return FALSE;
  if (sp != NULL && sp->files->len > 0)
    return TRUE;
  for (guint i = 0; i < package->files->len; i++)
    {
      TernCatalogFile *file = package->files->pdata[i];
      g_autofree char *path = tern_model_store_get_file_path (self, package->id, file->name);
      g_autofree char *partial = g_strconcat (path, TERN_PARTIAL_SUFFIX, NULL);

      if (file_size_on_disk (partial) > 0)
        return TRUE;
    }
  return FALSE;
}

TernModelState
tern_model_store_get_state (TernModelStore       *self,
                            const char           *tag,
                            const TernCatalogTag *catalog_tag)
{
  StoreTag *st;
  StoreLocal *local;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), TERN_MODEL_STATE_AVAILABLE);
  if (tag == NULL && catalog_tag != NULL)
    tag = catalog_tag->tag;
  if (tag == NULL)
    return TERN_MODEL_STATE_AVAILABLE;

  local = g_hash_table_lookup (self->locals, tag);
  if (local != NULL)
    return local->broken ? TERN_MODEL_STATE_BROKEN : TERN_MODEL_STATE_INSTALLED;
  st = g_hash_table_lookup (self->tags, tag);
  if (st != NULL)
    {
      for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
        if (st->packages[r] != NULL && !package_ok (self, st->packages[r]))
          return TERN_MODEL_STATE_BROKEN;
      return TERN_MODEL_STATE_INSTALLED;
    }
  if (catalog_tag != NULL)
    for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
      if (catalog_tag->packages[r] != NULL && package_has_partial (self, catalog_tag->packages[r]))
        return TERN_MODEL_STATE_PARTIAL;
  return TERN_MODEL_STATE_AVAILABLE;
}

char *
tern_model_store_get_path (TernModelStore  *self,
                           const char      *tag,
                           TernPackageRole  role)
{
  StoreTag *st;
  StoreLocal *local;
  StorePackage *package;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), NULL);
  g_return_val_if_fail (role < TERN_PACKAGE_N_ROLES, NULL);
  if (tag == NULL)
    return NULL;
  local = g_hash_table_lookup (self->locals, tag);
  if (local != NULL)
    return role == TERN_PACKAGE_ROLE_BASE ? g_strdup (local->path) : NULL;
  st = g_hash_table_lookup (self->tags, tag);
  if (st == NULL || st->packages[role] == NULL)
    return NULL;
  package = g_hash_table_lookup (self->packages, st->packages[role]);
  if (package == NULL || package->files->len == 0)
    return NULL;
  return tern_model_store_get_file_path (self, package->id,
                                         ((StoreFile *) package->files->pdata[0])->name);
}

char *
tern_model_store_get_draft_spec (TernModelStore *self,
                                 const char     *tag,
                                 gboolean       *on_by_default)
{
  g_autofree char *path = NULL;
  StoreTag *st;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), NULL);
  if (on_by_default != NULL)
    *on_by_default = FALSE;
  path = tern_model_store_get_path (self, tag, TERN_PACKAGE_ROLE_DRAFT);
  st = tag ? g_hash_table_lookup (self->tags, tag) : NULL;
  if (path == NULL || st == NULL)
    return NULL;
  if (on_by_default != NULL)
    *on_by_default = st->speculation;
  return g_strdup_printf ("%s:%s", tern_draft_kind_spec_prefix (st->draft_kind), path);
}

gboolean
tern_model_store_get_single_turn (TernModelStore *self,
                                  const char     *tag)
{
  StoreTag *st;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), FALSE);
  st = tag ? g_hash_table_lookup (self->tags, tag) : NULL;
  return st != NULL && st->single_turn;
}

static guint64
package_bytes (TernModelStore *self,
               const char     *id)
{
  StorePackage *package = g_hash_table_lookup (self->packages, id);
  guint64 total = 0;

  for (guint i = 0; package && i < package->files->len; i++)
    total += ((StoreFile *) package->files->pdata[i])->size;
  return total;
}

guint64
tern_model_store_get_tag_size (TernModelStore *self,
                               const char     *tag)
{
  StoreTag *st = tag ? g_hash_table_lookup (self->tags, tag) : NULL;
  StoreLocal *local = tag ? g_hash_table_lookup (self->locals, tag) : NULL;
  guint64 total = 0;

  if (local != NULL)
    return local->size;
  if (st == NULL)
    return 0;
  for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
    {
      gboolean seen = FALSE;

      if (st->packages[r] == NULL)
        continue;
      for (int o = 0; o < r; o++)
        seen |= g_strcmp0 (st->packages[o], st->packages[r]) == 0;
      if (!seen)
        total += package_bytes (self, st->packages[r]);
    }
  return total;
}

gboolean
tern_model_store_has_package (TernModelStore *self,
                              const char     *package_id)
{
  return package_id != NULL && package_ok (self, package_id);
}

guint
tern_model_store_get_package_refcount (TernModelStore *self,
                                       const char     *package_id)
{
  GHashTableIter iter;
  gpointer value;
  guint count = 0;

  g_hash_table_iter_init (&iter, self->tags);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      StoreTag *st = value;
      gboolean uses = FALSE;

      for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
        uses |= g_strcmp0 (st->packages[r], package_id) == 0;
      count += uses;
    }
  return count;
}

char **
tern_model_store_get_tags_using (TernModelStore *self,
                                 const char     *package_id)
{
  g_autoptr(GPtrArray) found = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer key, value;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), NULL);
  g_hash_table_iter_init (&iter, self->tags);
  while (g_hash_table_iter_next (&iter, &key, &value))
    {
      StoreTag *st = value;

      for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
        if (g_strcmp0 (st->packages[r], package_id) == 0)
          {
            g_ptr_array_add (found, g_strdup (key));
            break;
          }
    }
  g_ptr_array_sort (found, compare_strings);
  g_ptr_array_add (found, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&found), FALSE);
}

gboolean
tern_model_store_lookup_file (TernModelStore  *self,
                              const char      *package_id,
                              const char      *name,
                              guint64         *size,
                              const char     **sha256)
{
  StoreFile *file = find_file (g_hash_table_lookup (self->packages, package_id), name);

  if (file == NULL || file->broken)
    return FALSE;
  if (size)
    *size = file->size;
  if (sha256)
    *sha256 = file->sha256;
  return TRUE;
}

const char *
tern_model_store_broken_file_sha256 (TernModelStore *self,
                                     const char     *package_id,
                                     const char     *name)
{
  StoreFile *file = find_file (g_hash_table_lookup (self->packages, package_id), name);

  return file != NULL && file->broken ? file->sha256 : NULL;
}

/* Calls fn on each file of the tag's packages that are not installed
 * (each package once), with its path in the store; stops at the first call
 * that returns FALSE, and returns FALSE then. */
static gboolean
foreach_missing_file (TernModelStore        *self,
                      const TernCatalogTag  *tag,
                      gboolean             (*fn) (TernModelStore        *self,
                                                    const TernCatalogPackage *package,
                                                    const TernCatalogFile *file,
                                                    const char            *path,
                                                    gpointer               data),
                      gpointer               data)
{
  for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
    {
      const TernCatalogPackage *package = tag->packages[r];
      gboolean seen = FALSE;

      if (package == NULL)
        continue;
      for (int o = 0; o < r; o++)
        seen |= tag->packages[o] == package;
      if (seen || package_ok (self, package->id))
        continue;
      for (guint i = 0; i < package->files->len; i++)
        {
          TernCatalogFile *file = package->files->pdata[i];
          g_autofree char *path = tern_model_store_get_file_path (self, package->id, file->name);

          if (!fn (self, package, file, path, data))
            return FALSE;
        }
    }
  return TRUE;
}

static gboolean
add_missing_bytes (TernModelStore           *self,
                   const TernCatalogPackage *package,
                   const TernCatalogFile    *file,
                   const char               *path,
                   gpointer                  data)
{
  guint64 *total = data;
  g_autofree char *partial = NULL;
  guint64 have;

  if (tern_model_store_lookup_file (self, package->id, file->name, NULL, NULL))
    return TRUE;
  partial = g_strconcat (path, TERN_PARTIAL_SUFFIX, NULL);
  have = file_size_on_disk (partial);
  *total = tern_manager_add_size (*total, file->size > have ? file->size - have : 0);
  return TRUE;
}

guint64
tern_model_store_get_missing_bytes (TernModelStore       *self,
                                    const TernCatalogTag *tag)
{
  guint64 total = 0;

  foreach_missing_file (self, tag, add_missing_bytes, &total);
  return total;
}

/* ---- a download the user stopped ---------------------------------------- */

/* That the user stopped a download is kept in its partial files'
 * FILE.partial.json, as "stopped": true beside what the downloader writes
 * there: kept by the panel alone, it was gone after a restart, and the row
 * said only its percentage, as a download that broke off would. The
 * downloader writes that file again, without the mark, as soon as the
 * download is resumed; earlier versions read the file by its other members
 * and pass over this one. */
#define STOPPED_MEMBER "stopped"

/* Calls fn on the meta file of each partial download of the tag's
 * packages that are not installed (each package once); stops at the first
 * that returns FALSE, and returns FALSE then. */
typedef struct
{
  gboolean (*fn) (const char *meta, gpointer data);
  gpointer data;
} PartialMetaWalk;

static gboolean
partial_meta_of (TernModelStore           *self,
                 const TernCatalogPackage *package,
                 const TernCatalogFile    *file,
                 const char               *path,
                 gpointer                  data)
{
  PartialMetaWalk *walk = data;
  g_autofree char *partial = g_strconcat (path, TERN_PARTIAL_SUFFIX, NULL);
  g_autofree char *meta = g_strconcat (path, TERN_PARTIAL_META_SUFFIX, NULL);

  (void) self;
  (void) package;
  (void) file;
  return file_size_on_disk (partial) == 0 || walk->fn (meta, walk->data);
}

static gboolean
foreach_partial_meta (TernModelStore       *self,
                      const TernCatalogTag *tag,
                      gboolean            (*fn) (const char *meta, gpointer data),
                      gpointer              data)
{
  PartialMetaWalk walk = { fn, data };

  return foreach_missing_file (self, tag, partial_meta_of, &walk);
}

/* FALSE (stop looking) at a meta file with the mark. */
static gboolean
meta_not_stopped (const char *meta,
                  gpointer    data)
{
  g_autoptr(JsonObject) object = tern_manager_read_partial_meta (meta);

  (void) data;
  return object == NULL
         || !json_object_get_boolean_member_with_default (object, STOPPED_MEMBER, FALSE);
}

gboolean
tern_model_store_get_download_stopped (TernModelStore       *self,
                                       const TernCatalogTag *tag)
{
  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), FALSE);
  if (tag == NULL)
    return FALSE;
  return !foreach_partial_meta (self, tag, meta_not_stopped, NULL);
}

typedef struct {
  gboolean stopped;
  GError **error;
} MarkStopped;

static gboolean
mark_meta (const char *meta,
           gpointer    data)
{
  MarkStopped *mark = data;
  g_autoptr(JsonObject) object = tern_manager_read_partial_meta (meta);
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(JsonGenerator) gen = NULL;
  g_autofree char *text = NULL;
  gsize length;

  /* No meta file (a download stopped before its first answer) has nothing
   * to resume from that this mark could describe. */
  if (object == NULL
      || json_object_get_boolean_member_with_default (object, STOPPED_MEMBER, FALSE)
           == mark->stopped)
    return TRUE;
  if (mark->stopped)
    json_object_set_boolean_member (object, STOPPED_MEMBER, TRUE);
  else
    json_object_remove_member (object, STOPPED_MEMBER);
  root = json_node_init_object (json_node_alloc (), object);
  gen = json_generator_new ();
  json_generator_set_root (gen, root);
  text = tn_json_escape_unit_separators (json_generator_to_data (gen, NULL), &length);
  return tern_manager_write_file_atomic (meta, text, length, mark->error);
}

gboolean
tern_model_store_set_download_stopped (TernModelStore       *self,
                                       const TernCatalogTag *tag,
                                       gboolean              stopped,
                                       GError              **error)
{
  MarkStopped mark = { stopped, error };

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), FALSE);
  if (tag == NULL)
    return TRUE;
  return foreach_partial_meta (self, tag, mark_meta, &mark);
}

static guint64
tree_size (const char *path)
{
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;
  guint64 total = 0;

  if (dir == NULL)
    return 0;
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, name, NULL);
      struct stat st;

      if (lstat (child, &st) != 0)
        continue;
      if (S_ISDIR (st.st_mode))
        total += tree_size (child);
      else if (S_ISREG (st.st_mode))
        total += (guint64) st.st_size;
    }
  return total;
}

guint64
tern_model_store_get_disk_usage (TernModelStore *self)
{
  g_autofree char *packages = g_build_filename (self->root, "packages", NULL);

  return tree_size (packages);
}

/* ---- mutations ---------------------------------------------------------- */

void
tern_model_store_hold_package (TernModelStore *self,
                               const char     *package_id)
{
  guint count = GPOINTER_TO_UINT (g_hash_table_lookup (self->held, package_id));

  g_hash_table_insert (self->held, g_strdup (package_id), GUINT_TO_POINTER (count + 1));
}

void
tern_model_store_release_package (TernModelStore *self,
                                  const char     *package_id)
{
  guint count = GPOINTER_TO_UINT (g_hash_table_lookup (self->held, package_id));

  if (count <= 1)
    g_hash_table_remove (self->held, package_id);
  else
    g_hash_table_insert (self->held, g_strdup (package_id), GUINT_TO_POINTER (count - 1));
}

gboolean
tern_model_store_record_file (TernModelStore  *self,
                              const char      *package_id,
                              const char      *name,
                              guint64          size,
                              const char      *sha256,
                              GError         **error)
{
  StorePackage *package;
  StoreFile *file;
  int fd = lock_begin (self, error);

  if (fd < 0)
    return FALSE;
  package = g_hash_table_lookup (self->packages, package_id);
  if (package == NULL)
    {
      package = store_package_new (package_id);
      g_hash_table_insert (self->packages, package->id, package);
    }
  file = find_file (package, name);
  if (file == NULL)
    {
      file = g_new0 (StoreFile, 1);
      file->name = g_strdup (name);
      g_ptr_array_add (package->files, file);
    }
  file->size = size;
  g_free (file->sha256);
  file->sha256 = g_strdup (sha256);
  file->broken = FALSE;
  return lock_end (self, fd, TRUE, error);
}

gboolean
tern_model_store_complete_package (TernModelStore            *self,
                                   const TernCatalogPackage  *package,
                                   GError                   **error)
{
  StorePackage *sp;
  int fd = lock_begin (self, error);

  if (fd < 0)
    return FALSE;
  sp = g_hash_table_lookup (self->packages, package->id);
  for (guint i = 0; i < package->files->len; i++)
    {
      TernCatalogFile *file = package->files->pdata[i];
      StoreFile *have = find_file (sp, file->name);

      if (have == NULL || have->broken)
        {
          lock_end (self, fd, FALSE, NULL);
          g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
                       _("package %s: %s is not downloaded and verified yet"), package->id, file->name);
          return FALSE;
        }
    }
  sp->complete = TRUE;
  return lock_end (self, fd, TRUE, error);
}

static char *
now_iso8601 (void)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();

  return g_date_time_format (now, "%Y-%m-%dT%H:%M:%SZ");
}

gboolean
tern_model_store_add_tag (TernModelStore        *self,
                          const TernCatalogTag  *tag,
                          GError               **error)
{
  StoreTag *st;
  int fd = lock_begin (self, error);

  if (fd < 0)
    return FALSE;
  for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
    if (tag->packages[r] != NULL && !package_ok (self, tag->packages[r]->id))
      {
        lock_end (self, fd, FALSE, NULL);
        g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO,
                     _("%s: package %s is not installed"), tag->tag, tag->packages[r]->id);
        return FALSE;
      }
  st = g_new0 (StoreTag, 1);
  st->tag = g_strdup (tag->tag);
  st->label = g_strdup (tag->label);
  for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
    st->packages[r] = tag->packages[r] ? g_strdup (tag->packages[r]->id) : NULL;
  st->thinking = tag->thinking;
  st->single_turn = tag->single_turn;
  st->speculation = tag->speculation;
  st->draft_kind = tag->draft_kind;
  st->context_length = tag->context_length;
  st->installed = now_iso8601 ();
  g_hash_table_replace (self->tags, st->tag, st);
  return lock_end (self, fd, TRUE, error);
}

/* A download in another process (or another downloader of this one) holds
 * an exclusive flock on its .partial file for as long as it writes. Takes
 * the same lock on every partial file of dir and keeps it in *locked until
 * the caller has deleted the tree, so that no download can start writing
 * into a file that is about to be unlinked (the downloader checks, once it
 * holds the lock, that its file still has a name). Returns FALSE, with the
 * busy file's name in *busy, when a download is running there. */
static gboolean
lock_partials (const char  *dir,
               GArray      *locked,
               char       **busy)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  if (d == NULL)
    return TRUE;  /* nothing there, so nothing downloading there */
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = NULL;
      int fd;

      if (!g_str_has_suffix (name, TERN_PARTIAL_SUFFIX))
        continue;
      path = g_build_filename (dir, name, NULL);
      fd = open (path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0)
        continue;  /* gone already, or not a file we made */
      if (flock (fd, LOCK_EX | LOCK_NB) != 0)
        {
          close (fd);
          *busy = g_strndup (name, strlen (name) - strlen (TERN_PARTIAL_SUFFIX));
          return FALSE;
        }
      g_array_append_val (locked, fd);
    }
  return TRUE;
}

static void
unlock_partials (GArray *locked)
{
  for (guint i = 0; i < locked->len; i++)
    close (g_array_index (locked, int, i));
  g_array_set_size (locked, 0);
}

gboolean
tern_model_store_remove (TernModelStore       *self,
                         const char           *tag,
                         const TernCatalogTag *catalog_tag,
                         guint64              *freed,
                         GError              **error)
{
  g_autoptr(GPtrArray) candidates = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) doomed = g_ptr_array_new_with_free_func (g_free);  /* package folders */
  g_autoptr(GArray) locked = g_array_new (FALSE, FALSE, sizeof (int));
  gboolean removed_something = FALSE;
  guint64 freed_bytes = 0;
  StoreTag *st;
  int fd;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), FALSE);
  g_return_val_if_fail (tag != NULL, FALSE);
  if (freed)
    *freed = 0;
  fd = lock_begin (self, error);
  if (fd < 0)
    return FALSE;

  if (g_hash_table_remove (self->locals, tag))
    return lock_end (self, fd, TRUE, error);

  st = g_hash_table_lookup (self->tags, tag);
  for (int r = 0; r < TERN_PACKAGE_N_ROLES; r++)
    {
      if (st != NULL && st->packages[r] != NULL)
        g_ptr_array_add (candidates, g_strdup (st->packages[r]));
      if (catalog_tag != NULL && catalog_tag->packages[r] != NULL)
        g_ptr_array_add (candidates, g_strdup (catalog_tag->packages[r]->id));
    }

  /* Before anything changes: a package this removal would delete must not
   * be in the middle of a download, here or in another program. */
  for (guint i = 0; i < candidates->len; i++)
    {
      const char *id = candidates->pdata[i];
      g_autofree char *dir = NULL;
      g_autofree char *busy = NULL;

      if (tern_model_store_get_package_refcount (self, id) > 0 || g_hash_table_contains (self->held, id))
        continue;
      dir = tern_model_store_get_package_dir (self, id);
      if (!lock_partials (dir, locked, &busy))
        {
          unlock_partials (locked);
          lock_end (self, fd, FALSE, NULL);
          g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_BUSY,
                       _("%s: %s is being downloaded right now (by 'tern-cli pull' or the Tern app); "
                       "nothing was removed: stop or finish that download first"),
                       tag, busy);
          return FALSE;
        }
    }

  if (st != NULL)
    {
      g_hash_table_remove (self->tags, tag);
      removed_something = TRUE;
    }

  for (guint i = 0; i < candidates->len; i++)
    {
      const char *id = candidates->pdata[i];
      g_autofree char *dir = NULL;

      if (tern_model_store_get_package_refcount (self, id) > 0 || g_hash_table_contains (self->held, id))
        continue;
      dir = tern_model_store_get_package_dir (self, id);
      if (g_ptr_array_find_with_equal_func (doomed, dir, g_str_equal, NULL)
          || (!g_file_test (dir, G_FILE_TEST_EXISTS) && !g_hash_table_contains (self->packages, id)))
        continue;
      freed_bytes += tree_size (dir);
      g_hash_table_remove (self->packages, id);
      g_ptr_array_add (doomed, g_steal_pointer (&dir));
      removed_something = TRUE;
    }

  if (!removed_something)
    {
      unlock_partials (locked);
      lock_end (self, fd, FALSE, NULL);
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_UNKNOWN_TAG,
                   _("%s is not installed"), tag);
      return FALSE;
    }
  /* The record first, then the files: deleted first, a save that failed
   * then (a full disk) left installed.json naming files that were gone.
   * This way a failure at any point leaves files no record names at worst,
   * which the next pull of the model takes up again (their sha256 is
   * checked) or the next remove deletes. */
  if (!save_or_reread (self, error))
    {
      unlock_partials (locked);
      lock_end (self, fd, FALSE, NULL);
      return FALSE;
    }
  for (guint i = 0; i < doomed->len; i++)
    if (!tern_manager_remove_tree (doomed->pdata[i], error))
      {
        g_prefix_error (error, _("%s is no longer installed, but not all of its files could be "
                                 "deleted (delete them by hand): "), tag);
        unlock_partials (locked);
        lock_end (self, fd, FALSE, NULL);
        return FALSE;
      }
  unlock_partials (locked);
  if (freed)
    *freed = freed_bytes;
  return lock_end (self, fd, FALSE, error);
}

/* ---- check -------------------------------------------------------------- */

typedef struct {
  char    *package_id;  /* NULL for an imported model */
  char    *name;        /* file name, or the local tag */
  char    *path;
  guint64  size;
  char    *sha256;
  char    *problem;     /* set by the check */
} CheckItem;

static void
check_item_free (CheckItem *item)
{
  g_free (item->package_id);
  g_free (item->name);
  g_free (item->path);
  g_free (item->sha256);
  g_free (item->problem);
  g_free (item);
}

static GPtrArray *
check_prepare (TernModelStore *self)
{
  GPtrArray *items = g_ptr_array_new_with_free_func ((GDestroyNotify) check_item_free);
  g_autoptr(GPtrArray) keys = sorted_keys (self->packages);

  for (guint i = 0; i < keys->len; i++)
    {
      StorePackage *package = g_hash_table_lookup (self->packages, keys->pdata[i]);

      if (!package->complete)
        continue;
      for (guint f = 0; f < package->files->len; f++)
        {
          StoreFile *file = package->files->pdata[f];
          CheckItem *item = g_new0 (CheckItem, 1);

          item->package_id = g_strdup (package->id);
          item->name = g_strdup (file->name);
          item->path = tern_model_store_get_file_path (self, package->id, file->name);
          item->size = file->size;
          item->sha256 = g_strdup (file->sha256);
          g_ptr_array_add (items, item);
        }
    }
  g_clear_pointer (&keys, g_ptr_array_unref);
  keys = sorted_keys (self->locals);
  for (guint i = 0; i < keys->len; i++)
    {
      StoreLocal *local = g_hash_table_lookup (self->locals, keys->pdata[i]);
      CheckItem *item = g_new0 (CheckItem, 1);

      item->name = g_strdup (local->tag);
      item->path = g_strdup (local->path);
      g_ptr_array_add (items, item);
    }
  return items;
}

/* The bytes a check of the items hashes. */
static guint64
check_total_bytes (GPtrArray *items)
{
  guint64 total = 0;

  for (guint i = 0; i < items->len; i++)
    {
      CheckItem *item = items->pdata[i];

      if (item->package_id != NULL && item->sha256 != NULL)
        total += item->size;
    }
  return total;
}

/* Before the check's thread starts: a caller may ask for progress at
 * once, and is then told the whole check's size. */
static void
check_begin (TernModelStore *self,
             GPtrArray      *items)
{
  __atomic_store_n (&self->check_total, check_total_bytes (items), __ATOMIC_RELAXED);
  __atomic_store_n (&self->check_done, 0, __ATOMIC_RELAXED);
  __atomic_store_n (&self->check_item, 0, __ATOMIC_RELAXED);
  g_atomic_int_set (&self->checking, TRUE);
}

/* Runs in any thread: touches only the items and the progress counters
 * that check_begin set up. */
static gboolean
check_run (TernModelStore *self,
           GPtrArray      *items,
           GCancellable   *cancellable,
           GError        **error)
{
  guint64 done = 0;

  for (guint i = 0; i < items->len; i++)
    {
      CheckItem *item = items->pdata[i];
      g_autoptr(GError) local_error = NULL;
      g_autofree char *sha = NULL;
      struct stat st;

      /* The files before this one count whole, hashed or not (a missing
       * or truncated one is not hashed). */
      __atomic_store_n (&self->check_item, 0, __ATOMIC_RELAXED);
      __atomic_store_n (&self->check_done, done, __ATOMIC_RELAXED);
      if (item->package_id != NULL && item->sha256 != NULL)
        done += item->size;

      if (g_cancellable_set_error_if_cancelled (cancellable, error))
        return FALSE;
      if (item->package_id == NULL)
        {
          tn_gguf *gguf = NULL;
          tn_error err;

          if (tn_gguf_open (item->path, &gguf, &err) != TN_OK)
            {
              g_autofree char *reason = tern_manager_engine_message (&err);

              item->problem = g_strdup_printf ("%s: %s", item->name, reason);
            }
          tn_gguf_close (gguf);
          continue;
        }
      if (stat (item->path, &st) != 0)
        {
          int errsv = errno;

          item->problem = g_strdup_printf ("%s: %s", item->path, g_strerror (errsv));
          continue;
        }
      if ((guint64) st.st_size != item->size)
        {
          item->problem = g_strdup_printf (_("%s: %" PRIu64 " bytes, expected %" PRIu64
                                             " (truncated or changed)"), item->path,
                                           (guint64) st.st_size, item->size);
          continue;
        }
      if (item->sha256 == NULL)
        continue;
      sha = tern_manager_sha256_file (item->path, &self->check_item, cancellable, &local_error);
      if (sha == NULL)
        {
          if (g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            {
              g_propagate_error (error, g_steal_pointer (&local_error));
              return FALSE;
            }
          item->problem = g_strdup (local_error->message);
        }
      else if (g_ascii_strcasecmp (sha, item->sha256) != 0)
        /* Translators: tern-cli check and the Models panel: a file whose bytes are not the
         * ones verified at download; the sha256 found, then the one expected */
        item->problem = g_strdup_printf (_("%s: sha256 %s, expected %s (the file is damaged)"),
                                         item->path, sha, item->sha256);
    }
  return TRUE;
}

/* Marks what the check found. *problems gets the findings even when they
 * cannot be recorded (installed.json cannot be written, a full disk): the
 * user is still told what is damaged. */
static gboolean
check_apply (TernModelStore *self,
             GPtrArray      *items,
             GPtrArray     **problems,
             GError        **error)
{
  g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func (g_free);
  int fd;
  gboolean ok;

  for (guint i = 0; i < items->len; i++)
    {
      CheckItem *item = items->pdata[i];

      if (item->problem != NULL)
        g_ptr_array_add (found, g_strdup (item->problem));
    }
  fd = lock_begin (self, error);
  ok = fd >= 0;
  for (guint i = 0; ok && i < items->len; i++)
    {
      CheckItem *item = items->pdata[i];

      if (item->package_id != NULL)
        {
          StoreFile *file = find_file (g_hash_table_lookup (self->packages, item->package_id), item->name);

          if (file != NULL)
            file->broken = item->problem != NULL;
        }
      else
        {
          StoreLocal *local = g_hash_table_lookup (self->locals, item->name);

          if (local != NULL)
            local->broken = item->problem != NULL;
        }
    }
  if (ok && !lock_end (self, fd, TRUE, error))
    ok = FALSE; /* the marks were not written (lock_end read the file again) */
  if (problems)
    *problems = g_steal_pointer (&found);
  return ok;
}

gboolean
tern_model_store_check (TernModelStore  *self,
                        GCancellable    *cancellable,
                        GPtrArray      **problems,
                        GError         **error)
{
  g_autoptr(GPtrArray) items = NULL;
  gboolean ok;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), FALSE);
  if (problems)
    *problems = NULL;
  if (!tern_model_store_reload (self, error))
    return FALSE;
  items = check_prepare (self);
  check_begin (self, items);
  ok = check_run (self, items, cancellable, error);
  g_atomic_int_set (&self->checking, FALSE);
  if (!ok)
    return FALSE;
  return check_apply (self, items, problems, error);
}

static void
check_thread (GTask        *task,
              gpointer      source,
              gpointer      task_data,
              GCancellable *cancellable)
{
  TernModelStore *self = source;
  GError *error = NULL;
  gboolean ok = check_run (self, task_data, cancellable, &error);

  g_atomic_int_set (&self->checking, FALSE);
  if (ok)
    g_task_return_boolean (task, TRUE);
  else
    g_task_return_error (task, error);
}

void
tern_model_store_check_async (TernModelStore      *self,
                              GCancellable        *cancellable,
                              GAsyncReadyCallback  callback,
                              gpointer             user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(GError) error = NULL;
  GPtrArray *items;

  g_task_set_source_tag (task, tern_model_store_check_async);
  if (!tern_model_store_reload (self, &error))
    {
      g_task_return_error (task, g_steal_pointer (&error));
      return;
    }
  items = check_prepare (self);
  g_task_set_task_data (task, items, (GDestroyNotify) g_ptr_array_unref);
  check_begin (self, items);
  g_task_run_in_thread (task, check_thread);
}

gboolean
tern_model_store_get_check_progress (TernModelStore *self,
                                     guint64        *done,
                                     guint64        *total)
{
  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), FALSE);
  *total = __atomic_load_n (&self->check_total, __ATOMIC_RELAXED);
  *done = MIN (__atomic_load_n (&self->check_done, __ATOMIC_RELAXED)
                 + __atomic_load_n (&self->check_item, __ATOMIC_RELAXED),
               *total);
  return g_atomic_int_get (&self->checking);
}

gboolean
tern_model_store_check_finish (TernModelStore  *self,
                               GAsyncResult    *result,
                               GPtrArray      **problems,
                               GError         **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  if (problems)
    *problems = NULL;
  if (!g_task_propagate_boolean (G_TASK (result), error))
    return FALSE;
  return check_apply (self, g_task_get_task_data (G_TASK (result)), problems, error);
}

/* ---- import ------------------------------------------------------------- */

static char *
tn_str_dup (tn_str s)
{
  return g_strndup (s.ptr, (gsize) s.len);
}

/* "Qwen3 0.6B (my fine-tune)" -> "qwen3-0.6b-my-fine-tune" */
static char *
local_name_from (const char *text)
{
  GString *name = g_string_new (NULL);

  for (const char *p = text; *p && name->len < 64; p++)
    {
      char c = g_ascii_tolower (*p);

      if (g_ascii_isalnum (c) || c == '.' || c == '_')
        g_string_append_c (name, c);
      else if (name->len > 0 && name->str[name->len - 1] != '-')
        g_string_append_c (name, '-');
    }
  while (name->len > 0 && (name->str[name->len - 1] == '-' || name->str[name->len - 1] == '.'))
    g_string_truncate (name, name->len - 1);
  while (name->len > 0 && (name->str[0] == '.' || name->str[0] == '-'))
    g_string_erase (name, 0, 1);
  if (name->len == 0)
    g_string_append (name, "model");
  return g_string_free (name, FALSE);
}

static char *
unique_local_tag (TernModelStore *self,
                  const char     *base)
{
  char *tag = g_strconcat (TERN_LOCAL_PREFIX, base, NULL);

  for (int n = 2; g_hash_table_contains (self->locals, tag); n++)
    {
      g_free (tag);
      tag = g_strdup_printf (TERN_LOCAL_PREFIX "%s-%d", base, n);
    }
  return tag;
}

char *
tern_model_store_import (TernModelStore  *self,
                         const char      *path,
                         const char      *name,
                         GError         **error)
{
  g_autofree char *real = NULL;
  g_autofree char *kept = NULL;
  g_autofree char *base = NULL;
  g_autofree char *architecture = NULL;
  g_autofree char *tag = NULL;
  tn_gguf *gguf = NULL;
  tn_error err;
  tn_str str;
  guint64 size;
  StoreLocal *local;
  GHashTableIter iter;
  gpointer value;
  int fd;

  g_return_val_if_fail (TERN_IS_MODEL_STORE (self), NULL);
  g_return_val_if_fail (path != NULL, NULL);

  real = realpath (path, NULL);
  if (real == NULL)
    {
      int errsv = errno;

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IMPORT, "%s: %s", path,
                   g_strerror (errsv));
      return NULL;
    }
  /* The path as given (made absolute), not the link's target: in Hugging
   * Face's cache the target is blobs/SHA256, while the projector and the
   * other files of the model sit beside the snapshot's name. */
  kept = g_canonicalize_filename (path, NULL);
  if (!g_file_test (real, G_FILE_TEST_IS_REGULAR))
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IMPORT, _("%s: not a regular file"), path);
      return NULL;
    }
  /* Through the name too: a split model's other parts are found beside
   * the first part's name (NAME-00002-of-00003.gguf), not beside a blob. */
  if (tn_gguf_open (kept, &gguf, &err) != TN_OK)
    {
      g_autofree char *reason = tern_manager_engine_message (&err);

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IMPORT, "%s", reason);
      return NULL;
    }
  if (tn_gguf_get_str (gguf, "general.architecture", &str) != TN_OK || str.len == 0)
    {
      tn_gguf_close (gguf);
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IMPORT,
                   _("%s: a GGUF file but not a model: it has no general.architecture"), path);
      return NULL;
    }
  /* installed.json keeps it, and JSON is UTF-8: a broken file's raw byte
   * there made the next read of the store fail, for every model. */
  {
    g_autofree char *raw = tn_str_dup (str);

    architecture = raw != NULL ? g_utf8_make_valid (raw, -1) : NULL;
  }
  if (name == NULL && tn_gguf_get_str (gguf, "general.name", &str) == TN_OK && str.len > 0)
    {
      g_autofree char *general_name = tn_str_dup (str);

      base = local_name_from (general_name);
    }
  size = tn_gguf_file_size (gguf);
  tn_gguf_close (gguf);
  if (name != NULL)
    base = local_name_from (name);
  else if (base == NULL)
    {
      g_autofree char *file = g_path_get_basename (real);

      if (g_str_has_suffix (file, ".gguf"))
        file[strlen (file) - 5] = '\0';
      base = local_name_from (file);
    }

  fd = lock_begin (self, error);
  if (fd < 0)
    return NULL;
  g_hash_table_iter_init (&iter, self->locals);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      StoreLocal *known = value;
      g_autofree char *known_real = realpath (known->path, NULL);

      if (!g_str_equal (known->path, kept) && g_strcmp0 (known_real, real) != 0)
        continue;
      known->broken = FALSE;
      known->size = size;
      g_free (known->path);
      known->path = g_strdup (kept);
      /* Imported again with --name: that is a rename. */
      if (name != NULL && !(g_str_has_prefix (known->tag, TERN_LOCAL_PREFIX)
                            && g_str_equal (known->tag + strlen (TERN_LOCAL_PREFIX), base)))
        {
          g_hash_table_steal (self->locals, known->tag);
          g_free (known->tag);
          known->tag = unique_local_tag (self, base);
          g_hash_table_insert (self->locals, known->tag, known);
        }
      tag = g_strdup (known->tag);
      if (!lock_end (self, fd, TRUE, error))
        return NULL;
      return g_steal_pointer (&tag);
    }
  tag = unique_local_tag (self, base);
  local = g_new0 (StoreLocal, 1);
  local->tag = g_strdup (tag);
  local->path = g_strdup (kept);
  local->size = size;
  local->architecture = g_steal_pointer (&architecture);
  local->imported = now_iso8601 ();
  g_hash_table_insert (self->locals, local->tag, local);
  if (!lock_end (self, fd, TRUE, error))
    return NULL;
  return g_steal_pointer (&tag);
}
