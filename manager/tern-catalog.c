/* tern-catalog.c: loading and validating the model catalog. */
#include "tern-manager-private.h"
#include "tern.h"

#include "tern-paths.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

struct _TernCatalog {
  GObject     parent_instance;
  char       *path;
  GPtrArray  *families;  /* TernCatalogFamily* (owned) */
  GPtrArray  *packages;  /* TernCatalogPackage* (owned), file order */
  GPtrArray  *tags;      /* TernCatalogTag* (borrowed from families) */
  GHashTable *package_by_id;
  GHashTable *tag_by_name;
};

G_DEFINE_FINAL_TYPE (TernCatalog, tern_catalog, G_TYPE_OBJECT)

#define CATALOG_SCHEMA 1
/* The shipped catalog is tens of KiB; a thousand times that is not a catalog. */
#define CATALOG_MAX_BYTES ((guint64) 64 << 20)

static void
catalog_file_free (TernCatalogFile *file)
{
  g_free (file->name);
  g_free (file->url);
  g_free (file->sha256);
  g_free (file);
}

static void
catalog_package_free (TernCatalogPackage *package)
{
  g_free (package->id);
  g_free (package->label);
  g_ptr_array_unref (package->files);
  g_free (package);
}

static void
catalog_tag_free (TernCatalogTag *tag)
{
  g_free (tag->tag);
  g_free (tag->label);
  g_free (tag->description);
  g_free (tag->min_app_version);
  g_strfreev (tag->requires);
  g_free (tag);
}

static void
catalog_family_free (TernCatalogFamily *family)
{
  g_free (family->id);
  g_free (family->label);
  g_free (family->description);
  g_ptr_array_unref (family->tags);
  g_free (family);
}

static void
tern_catalog_finalize (GObject *object)
{
  TernCatalog *self = TERN_CATALOG (object);

  g_clear_pointer (&self->tag_by_name, g_hash_table_unref);
  g_clear_pointer (&self->package_by_id, g_hash_table_unref);
  g_clear_pointer (&self->tags, g_ptr_array_unref);
  g_clear_pointer (&self->families, g_ptr_array_unref);
  g_clear_pointer (&self->packages, g_ptr_array_unref);
  g_free (self->path);
  G_OBJECT_CLASS (tern_catalog_parent_class)->finalize (object);
}

static void
tern_catalog_class_init (TernCatalogClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = tern_catalog_finalize;
}

static void
tern_catalog_init (TernCatalog *self)
{
  self->families = g_ptr_array_new_with_free_func ((GDestroyNotify) catalog_family_free);
  self->packages = g_ptr_array_new_with_free_func ((GDestroyNotify) catalog_package_free);
  self->tags = g_ptr_array_new ();
  self->package_by_id = g_hash_table_new (g_str_hash, g_str_equal);
  self->tag_by_name = g_hash_table_new (g_str_hash, g_str_equal);
}

/* Validation: every check fails with "NAME: FIELD: what is wrong", in the
 * user's language: whoever edits a catalog file may read it in the app or
 * tern-cli (docs/TRANSLATING.md). The field and the JSON keys stay as the
 * file spells them. */
typedef struct {
  const char *name;
  GError    **error;
} Loader;

G_GNUC_PRINTF (3, 4) static gboolean
fail (Loader     *loader,
      const char *field,
      const char *fmt,
      ...)
{
  g_autofree char *message = NULL;
  g_autofree char *whole = NULL;
  GString *shown = g_string_new (NULL);
  va_list ap;

  va_start (ap, fmt);
  message = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  /* The field's keys and the values quoted are the file's words (or a Hub
   * listing's, for a reference resolved into a catalog): shown escaped, so
   * that a newline or ESC in a name cannot start a line or a terminal
   * sequence of their choosing in our message. */
  whole = g_strdup_printf ("%s: %s: %s", loader->name, field, message);
  tern_manager_append_shown (shown, whole);
  g_set_error_literal (loader->error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CATALOG, shown->str);
  g_string_free (shown, TRUE);
  return FALSE;
}

static const char *
node_kind (JsonNode *node)
{
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return "null"; /* JSON's word */
  if (JSON_NODE_HOLDS_OBJECT (node))
    return _("an object");
  if (JSON_NODE_HOLDS_ARRAY (node))
    return _("an array");
  switch (json_node_get_value_type (node))
    {
    case G_TYPE_STRING: return _("a string");
    case G_TYPE_BOOLEAN: return _("a boolean");
    case G_TYPE_INT64: return _("an integer");
    case G_TYPE_DOUBLE: return _("a number with a fraction");
    default: return _("a value");
    }
}

/* Refuses keys not in `allowed` (NULL-terminated): a misspelt "sha265" would
 * otherwise silently drop a checksum. */
static gboolean
check_keys (Loader             *loader,
            const char         *field,
            JsonObject         *object,
            const char * const *allowed)
{
  g_autoptr(GList) members = json_object_get_members (object);

  for (GList *l = members; l != NULL; l = l->next)
    if (!g_strv_contains (allowed, l->data))
      {
        g_autofree char *names = g_strjoinv (", ", (char **) allowed);

        return fail (loader, field, _("unknown field '%s' (allowed: %s)"), (const char *) l->data, names);
      }
  return TRUE;
}

static gboolean
get_string (Loader      *loader,
            const char  *field,
            JsonObject  *object,
            const char  *key,
            gboolean     required,
            const char **out)
{
  JsonNode *node = json_object_get_member (object, key);

  *out = NULL;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      if (required)
        return fail (loader, field, _("missing '%s'"), key);
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_STRING)
    return fail (loader, field, _("'%s' must be a string, not %s"), key, node_kind (node));
  *out = json_node_get_string (node);
  if (required && **out == '\0')
    return fail (loader, field, _("'%s' is empty"), key);
  return TRUE;
}

static gboolean
get_int (Loader     *loader,
         const char *field,
         JsonObject *object,
         const char *key,
         gint64      min,
         gint64     *out)
{
  JsonNode *node = json_object_get_member (object, key);

  *out = 0;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return fail (loader, field, _("'%s' must be an integer, not %s"), key, node_kind (node));
  *out = json_node_get_int (node);
  if (*out < min)
    return fail (loader, field, _("'%s' is %lld, must be at least %lld"),
                 key, (long long) *out, (long long) min);
  return TRUE;
}

static gboolean
get_bool (Loader     *loader,
          const char *field,
          JsonObject *object,
          const char *key,
          gboolean   *out)
{
  JsonNode *node = json_object_get_member (object, key);

  *out = FALSE;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_BOOLEAN)
    return fail (loader, field, _("'%s' must be true or false, not %s"), key, node_kind (node));
  *out = json_node_get_boolean (node);
  return TRUE;
}

static gboolean
get_member (Loader      *loader,
            const char  *field,
            JsonObject  *object,
            const char  *key,
            JsonNodeType type,
            JsonNode   **out)
{
  JsonNode *node = json_object_get_member (object, key);

  *out = NULL;
  if (node == NULL)
    return fail (loader, field, _("missing '%s'"), key);
  if (JSON_NODE_TYPE (node) != type)
    {
      /* One sentence per kind: the kind is part of what is translated. */
      if (type == JSON_NODE_OBJECT)
        return fail (loader, field, _("'%s' must be an object, not %s"), key, node_kind (node));
      return fail (loader, field, _("'%s' must be an array, not %s"), key, node_kind (node));
    }
  *out = node;
  return TRUE;
}

static gboolean
valid_version (const char *version)
{
  if (version == NULL || !g_ascii_isdigit (*version))
    return FALSE;
  for (const char *p = version; *p; p++)
    if (!g_ascii_isdigit (*p) && !(*p == '.' && g_ascii_isdigit (p[1])))
      return FALSE;
  return TRUE;
}

static TernCatalogPackage *
load_package (Loader     *loader,
              const char *id,
              JsonNode   *node)
{
  static const char * const package_keys[] = { "label", "files", "kv_bytes_per_token", NULL };
  static const char * const file_keys[] = { "name", "url", "size", "sha256", NULL };
  g_autofree char *field = g_strdup_printf ("packages.%s", id);
  g_autoptr(GHashTable) names = g_hash_table_new (g_str_hash, g_str_equal);
  TernCatalogPackage *package;
  JsonObject *object;
  JsonNode *files_node;
  JsonArray *files;
  const char *label;
  gint64 kv_bytes_per_token;

  if (!tern_manager_safe_name (id))
    {
      fail (loader, field, _("a package id may use only letters, digits and '._+-' and may not start with '.'"));
      return NULL;
    }
  if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      fail (loader, field, _("must be an object, not %s"), node_kind (node));
      return NULL;
    }
  object = json_node_get_object (node);
  if (!check_keys (loader, field, object, package_keys)
      || !get_string (loader, field, object, "label", FALSE, &label)
      || !get_int (loader, field, object, "kv_bytes_per_token", 1, &kv_bytes_per_token)
      || !get_member (loader, field, object, "files", JSON_NODE_ARRAY, &files_node))
    return NULL;
  files = json_node_get_array (files_node);
  if (json_array_get_length (files) == 0)
    {
      fail (loader, field, _("'files' is empty: a package needs at least one file"));
      return NULL;
    }

  package = g_new0 (TernCatalogPackage, 1);
  package->id = g_strdup (id);
  package->label = g_strdup (label);
  package->kv_bytes_per_token = (guint64) kv_bytes_per_token;
  package->files = g_ptr_array_new_with_free_func ((GDestroyNotify) catalog_file_free);

  for (guint i = 0; i < json_array_get_length (files); i++)
    {
      g_autofree char *file_field = g_strdup_printf ("%s.files[%u]", field, i);
      JsonNode *file_node = json_array_get_element (files, i);
      JsonObject *file_object;
      const char *name, *url, *sha256;
      TernCatalogFile *file;
      gint64 size;

      if (!JSON_NODE_HOLDS_OBJECT (file_node))
        {
          fail (loader, file_field, _("must be an object, not %s"), node_kind (file_node));
          goto error;
        }
      file_object = json_node_get_object (file_node);
      if (!check_keys (loader, file_field, file_object, file_keys)
          || !get_string (loader, file_field, file_object, "name", TRUE, &name)
          || !get_string (loader, file_field, file_object, "url", TRUE, &url)
          || !get_int (loader, file_field, file_object, "size", 1, &size)
          || !get_string (loader, file_field, file_object, "sha256", FALSE, &sha256))
        goto error;
      if (!tern_manager_safe_name (name) || g_str_has_suffix (name, TERN_PARTIAL_SUFFIX)
          || g_str_has_suffix (name, TERN_PARTIAL_META_SUFFIX))
        {
          fail (loader, file_field, _("name '%s' is not a plain file name (letters, digits, '._+-'; "
                "not starting with '.'; not ending in '%s')"), name,
                TERN_PARTIAL_SUFFIX);
          goto error;
        }
      if (g_hash_table_contains (names, name))
        {
          fail (loader, file_field, _("name '%s' appears twice in the package"), name);
          goto error;
        }
      g_hash_table_add (names, (gpointer) name);
      if (!tern_manager_valid_url (url))
        {
          fail (loader, file_field, _("url '%s' is not an http:// or https:// URL with a host"), url);
          goto error;
        }
      if (sha256 != NULL && !tern_manager_is_sha256 (sha256))
        {
          fail (loader, file_field, _("sha256 '%s' is not 64 hexadecimal digits (use null when unknown)"),
                sha256);
          goto error;
        }
      file = g_new0 (TernCatalogFile, 1);
      file->name = g_strdup (name);
      file->url = g_strdup (url);
      file->size = (guint64) size;
      file->sha256 = sha256 ? g_ascii_strdown (sha256, -1) : NULL;
      g_ptr_array_add (package->files, file);
    }
  return package;

error:
  catalog_package_free (package);
  return NULL;
}

static gboolean
valid_family_id (const char *id)
{
  if (!g_ascii_islower (*id) && !g_ascii_isdigit (*id))
    return FALSE;
  for (const char *p = id; *p; p++)
    if (!g_ascii_islower (*p) && !g_ascii_isdigit (*p) && !strchr ("._-", *p))
      return FALSE;
  return strlen (id) <= 64;
}

static const TernCatalogPackage *
resolve_package (TernCatalog *self,
                 Loader      *loader,
                 const char  *field,
                 JsonObject  *object,
                 const char  *key,
                 gboolean     required,
                 gboolean    *ok)
{
  const TernCatalogPackage *package;
  const char *id;

  *ok = get_string (loader, field, object, key, required, &id);
  if (!*ok || id == NULL)
    return NULL;
  package = g_hash_table_lookup (self->package_by_id, id);
  if (package == NULL)
    {
      g_autofree char *where = g_strdup_printf ("%s.%s", field, key);
      *ok = fail (loader, where, _("unknown package '%s' (not in 'packages')"), id);
    }
  return package;
}

static const char * const draft_kinds[TERN_DRAFT_N_KINDS] = { "model", "dflash", "mtp" };

/* A DFlash draft or an MTP head cannot stand in for a model, and a kind
 * with no draft is a tag that meant something it did not say: both are
 * errors rather than silently plain decoding. */
static gboolean
parse_draft_kind (Loader        *loader,
                  const char    *field,
                  const char    *value,
                  gboolean       has_draft,
                  TernDraftKind *out)
{
  *out = TERN_DRAFT_KIND_MODEL;
  if (value == NULL)
    return TRUE;
  for (int k = 0; k < TERN_DRAFT_N_KINDS; k++)
    if (g_str_equal (value, draft_kinds[k]))
      {
        *out = (TernDraftKind) k;
        if (*out != TERN_DRAFT_KIND_MODEL && !has_draft)
          return fail (loader, field, _("draft_kind is '%s' but there is no 'draft' package"), value);
        return TRUE;
      }
  return fail (loader, field, _("draft_kind '%s' is not one of model, dflash, mtp"), value);
}

/* Feature names are free-form on purpose: a newer catalog may name a
 * feature this Tern has never heard of, and the tag is then shown as
 * needing it instead of the whole catalog failing to load. */
static gboolean
load_requires (Loader      *loader,
               const char  *field,
               JsonObject  *object,
               GStrv       *out)
{
  JsonNode *node = json_object_get_member (object, "requires");
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  JsonArray *array;

  *out = NULL;
  if (node != NULL && !JSON_NODE_HOLDS_NULL (node))
    {
      if (!JSON_NODE_HOLDS_ARRAY (node))
        return fail (loader, field, _("'%s' must be an array, not %s"), "requires", node_kind (node));
      array = json_node_get_array (node);
      for (guint i = 0; i < json_array_get_length (array); i++)
        {
          JsonNode *element = json_array_get_element (array, i);
          const char *name;

          if (!JSON_NODE_HOLDS_VALUE (element) || json_node_get_value_type (element) != G_TYPE_STRING)
            return fail (loader, field, _("requires[%u] must be a string, not %s"), i, node_kind (element));
          name = json_node_get_string (element);
          if (!valid_family_id (name))
            return fail (loader, field, _("requires[%u] '%s' is not a feature name (lowercase letters, "
                                          "digits, '._-')"), i, name);
          g_ptr_array_add (names, g_strdup (name));
        }
    }
  g_ptr_array_add (names, NULL);
  *out = (GStrv) g_ptr_array_steal (names, NULL);
  return TRUE;
}

/* The number `key` of `object` within [min, max] (min excluded when
 * min_open), integral when `integer`; absent: *out stays. */
static gboolean
get_number (Loader     *loader,
            const char *field,
            JsonObject *object,
            const char *key,
            double      min,
            gboolean    min_open,
            double      max,
            gboolean    integer,
            double     *out)
{
  JsonNode *node = json_object_get_member (object, key);
  double value;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (node)
      || (json_node_get_value_type (node) != G_TYPE_INT64
          && (integer || json_node_get_value_type (node) != G_TYPE_DOUBLE)))
    return fail (loader, field, integer ? _("'%s' must be an integer, not %s") : _("'%s' must be a number, not %s"),
                 key, node_kind (node));
  value = json_node_get_value_type (node) == G_TYPE_INT64 ? (double) json_node_get_int (node)
                                                          : json_node_get_double (node);
  if (!isfinite (value) || value < min || (min_open && value == min) || value > max)
    return min_open ? fail (loader, field, _("'%s' is %g; it must be above %g and at most %g"), key, value, min, max)
                    : fail (loader, field, _("'%s' is %g; it must be from %g to %g"), key, value, min, max);
  *out = value;
  return TRUE;
}

/* "sampling": the model card's suggested values. */
static gboolean
load_sampling (Loader              *loader,
               const char          *field,
               JsonObject          *object,
               TernCatalogSampling *sampling)
{
  static const char * const keys[] = { "temperature", "top_p", "top_k", "min_p", NULL };
  g_autofree char *where = g_strdup_printf ("%s.sampling", field);
  JsonNode *node = json_object_get_member (object, "sampling");
  JsonObject *o;
  double top_k = -1;

  sampling->temperature = sampling->top_p = sampling->min_p = -1;
  sampling->top_k = -1;
  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    return TRUE;
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return fail (loader, where, _("must be an object, not %s"), node_kind (node));
  o = json_node_get_object (node);
  if (!check_keys (loader, where, o, keys)
      || !get_number (loader, where, o, "temperature", 0, FALSE, 100, FALSE, &sampling->temperature)
      || !get_number (loader, where, o, "top_p", 0, TRUE, 1, FALSE, &sampling->top_p)
      || !get_number (loader, where, o, "top_k", 0, FALSE, 100000, TRUE, &top_k)
      || !get_number (loader, where, o, "min_p", 0, FALSE, 1, FALSE, &sampling->min_p))
    return FALSE;
  sampling->top_k = (gint64) top_k;
  return TRUE;
}

static TernCatalogTag *
load_tag (TernCatalog       *self,
          Loader            *loader,
          const char        *field,
          TernCatalogFamily *family,
          JsonNode          *node)
{
  static const char * const tag_keys[] = {
    "tag", "label", "description", "base", "draft", "draft_kind", "vision", "flags",
    "context_length", "min_app_version", "requires", "sampling", NULL
  };
  static const char * const flag_keys[] = { "vision", "thinking", "single_turn", "speculation", NULL };
  g_autofree char *prefix = g_strdup_printf ("%s:", family->id);
  TernCatalogTag *tag;
  JsonObject *object;
  JsonNode *flags_node;
  const char *name, *label, *description, *min_version, *draft_kind;
  gboolean ok;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      fail (loader, field, _("must be an object, not %s"), node_kind (node));
      return NULL;
    }
  object = json_node_get_object (node);
  if (!check_keys (loader, field, object, tag_keys)
      || !get_string (loader, field, object, "tag", TRUE, &name)
      || !get_string (loader, field, object, "label", TRUE, &label)
      || !get_string (loader, field, object, "description", FALSE, &description)
      || !get_string (loader, field, object, "min_app_version", FALSE, &min_version)
      || !get_string (loader, field, object, "draft_kind", FALSE, &draft_kind))
    return NULL;
  if (!g_str_has_prefix (name, prefix) || !valid_family_id (name + strlen (prefix)))
    {
      fail (loader, field, _("tag '%s' must be '%sNAME' (NAME: lowercase letters, digits, '._-')"),
            name, prefix);
      return NULL;
    }
  if (g_hash_table_contains (self->tag_by_name, name))
    {
      fail (loader, field, _("tag '%s' is defined twice"), name);
      return NULL;
    }
  if (min_version != NULL && !valid_version (min_version))
    {
      fail (loader, field, _("min_app_version '%s' is not a version like '0.1.0'"), min_version);
      return NULL;
    }

  tag = g_new0 (TernCatalogTag, 1);
  tag->tag = g_strdup (name);
  tag->label = g_strdup (label);
  tag->description = g_strdup (description);
  tag->min_app_version = g_strdup (min_version);
  tag->family = family;

  tag->packages[TERN_PACKAGE_ROLE_BASE] = resolve_package (self, loader, field, object, "base", TRUE, &ok);
  if (!ok)
    goto error;
  tag->packages[TERN_PACKAGE_ROLE_DRAFT] = resolve_package (self, loader, field, object, "draft", FALSE, &ok);
  if (!ok)
    goto error;
  tag->packages[TERN_PACKAGE_ROLE_VISION] = resolve_package (self, loader, field, object, "vision", FALSE, &ok);
  if (!ok)
    goto error;
  if (tag->packages[TERN_PACKAGE_ROLE_DRAFT] == tag->packages[TERN_PACKAGE_ROLE_BASE])
    {
      fail (loader, field, _("'draft' is the same package as 'base'"));
      goto error;
    }
  if (!parse_draft_kind (loader, field, draft_kind, tag->packages[TERN_PACKAGE_ROLE_DRAFT] != NULL,
                         &tag->draft_kind)
      || !load_requires (loader, field, object, &tag->requires))
    goto error;

  flags_node = json_object_get_member (object, "flags");
  if (flags_node != NULL)
    {
      g_autofree char *flags_field = g_strdup_printf ("%s.flags", field);
      JsonObject *flags;

      if (!JSON_NODE_HOLDS_OBJECT (flags_node))
        {
          fail (loader, flags_field, _("must be an object, not %s"), node_kind (flags_node));
          goto error;
        }
      flags = json_node_get_object (flags_node);
      if (!check_keys (loader, flags_field, flags, flag_keys)
          || !get_bool (loader, flags_field, flags, "vision", &tag->vision)
          || !get_bool (loader, flags_field, flags, "thinking", &tag->thinking)
          || !get_bool (loader, flags_field, flags, "single_turn", &tag->single_turn)
          || !get_bool (loader, flags_field, flags, "speculation", &tag->speculation))
        goto error;
    }
  /* Speculation without a draft would have to pick a drafter the catalog did
   * not name; a tag that wants lookup decoding can say so once there is a
   * kind for it. */
  if (tag->speculation && tag->packages[TERN_PACKAGE_ROLE_DRAFT] == NULL)
    {
      fail (loader, field, _("flags.speculation is true but there is no 'draft' package"));
      goto error;
    }
  if (tag->vision != (tag->packages[TERN_PACKAGE_ROLE_VISION] != NULL))
    {
      fail (loader, field, "%s",
            tag->vision ? _("flags.vision is true but there is no 'vision' package")
                        : _("there is a 'vision' package but flags.vision is not true"));
      goto error;
    }
  if (!get_int (loader, field, object, "context_length", 1, &tag->context_length)
      || !load_sampling (loader, field, object, &tag->sampling))
    goto error;
  return tag;

error:
  catalog_tag_free (tag);
  return NULL;
}

static gboolean
load_root (TernCatalog *self,
           Loader      *loader,
           JsonNode    *root)
{
  static const char * const root_keys[] = { "schema", "packages", "families", NULL };
  static const char * const family_keys[] = { "id", "label", "description", "tags", NULL };
  JsonObject *object;
  JsonNode *packages_node, *families_node;
  JsonArray *families;
  gint64 schema;
  g_autoptr(GList) ids = NULL;

  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return fail (loader, _("(top level)"), _("must be an object, not %s"), node_kind (root));
  object = json_node_get_object (root);
  if (!check_keys (loader, _("(top level)"), object, root_keys)
      || !get_int (loader, "schema", object, "schema", 0, &schema))
    return FALSE;
  if (!json_object_has_member (object, "schema"))
    return fail (loader, "schema", _("missing (this reader knows schema %d)"), CATALOG_SCHEMA);
  if (schema != CATALOG_SCHEMA)
    return fail (loader, "schema", _("is %lld; this version of Tern reads schema %d"),
                 (long long) schema, CATALOG_SCHEMA);

  if (!get_member (loader, _("(top level)"), object, "packages", JSON_NODE_OBJECT, &packages_node)
      || !get_member (loader, _("(top level)"), object, "families", JSON_NODE_ARRAY, &families_node))
    return FALSE;

  ids = json_object_get_members (json_node_get_object (packages_node));
  for (GList *l = ids; l != NULL; l = l->next)
    {
      JsonNode *node = json_object_get_member (json_node_get_object (packages_node), l->data);
      TernCatalogPackage *package = load_package (loader, l->data, node);

      if (package == NULL)
        return FALSE;
      g_ptr_array_add (self->packages, package);
      g_hash_table_insert (self->package_by_id, package->id, package);
    }

  families = json_node_get_array (families_node);
  for (guint i = 0; i < json_array_get_length (families); i++)
    {
      g_autofree char *field = g_strdup_printf ("families[%u]", i);
      JsonNode *node = json_array_get_element (families, i);
      TernCatalogFamily *family;
      JsonObject *family_object;
      JsonNode *tags_node;
      JsonArray *tags;
      const char *id, *label, *description;

      if (!JSON_NODE_HOLDS_OBJECT (node))
        return fail (loader, field, _("must be an object, not %s"), node_kind (node));
      family_object = json_node_get_object (node);
      if (!check_keys (loader, field, family_object, family_keys)
          || !get_string (loader, field, family_object, "id", TRUE, &id)
          || !get_string (loader, field, family_object, "label", TRUE, &label)
          || !get_string (loader, field, family_object, "description", FALSE, &description)
          || !get_member (loader, field, family_object, "tags", JSON_NODE_ARRAY, &tags_node))
        return FALSE;
      if (!valid_family_id (id))
        return fail (loader, field, _("id '%s' may use only lowercase letters, digits and '._-'"), id);
      if (g_str_equal (id, TERN_LOCAL_FAMILY))
        return fail (loader, field, _("id '%s' is reserved for imported models"), TERN_LOCAL_FAMILY);
      for (guint f = 0; f < self->families->len; f++)
        if (g_str_equal (((TernCatalogFamily *) self->families->pdata[f])->id, id))
          return fail (loader, field, _("family '%s' is defined twice"), id);

      family = g_new0 (TernCatalogFamily, 1);
      family->id = g_strdup (id);
      family->label = g_strdup (label);
      family->description = g_strdup (description);
      family->tags = g_ptr_array_new_with_free_func ((GDestroyNotify) catalog_tag_free);
      g_ptr_array_add (self->families, family);

      tags = json_node_get_array (tags_node);
      if (json_array_get_length (tags) == 0)
        return fail (loader, field, _("'tags' is empty"));
      for (guint t = 0; t < json_array_get_length (tags); t++)
        {
          g_autofree char *tag_field = g_strdup_printf ("families[%u].tags[%u]", i, t);
          TernCatalogTag *tag = load_tag (self, loader, tag_field, family,
                                          json_array_get_element (tags, t));

          if (tag == NULL)
            return FALSE;
          g_ptr_array_add (family->tags, tag);
          g_ptr_array_add (self->tags, tag);
          g_hash_table_insert (self->tag_by_name, tag->tag, tag);
        }
    }
  return TRUE;
}

TernCatalog *
tern_catalog_new_from_data (const char  *data,
                            gssize       length,
                            const char  *name,
                            GError     **error)
{
  g_autoptr(TernCatalog) self = g_object_new (TERN_TYPE_CATALOG, NULL);
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(GError) parse_error = NULL;
  Loader loader = { name ? name : "catalog", error };
  tn_error check = { 0 };

  g_return_val_if_fail (data != NULL, NULL);

  self->path = g_strdup (loader.name);
  /* Strict JSON before json-glib: it makes bytes of C's escapes ("\\666",
   * no UTF-8, for a label the Models panel would show), keeps the last of
   * a repeated key (a second "url" or "sha256" in a hand-edited file would
   * win without a word) and recurses once per level (a catalog nests 6). */
  if (tn_json_check (data, length < 0 ? strlen (data) : (gsize) length, loader.name, 32,
                     TN_JSON_NO_DUPLICATE_KEYS | TN_JSON_NO_NUL | TN_JSON_NO_HUGE_NUMBERS
                     | TN_JSON_NO_HUGE_INTEGERS,
                     &check) != TN_OK)
    {
      g_autofree char *why = tern_manager_engine_message (&check);

      g_set_error_literal (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CATALOG, why);
      return NULL;
    }
  if (!json_parser_load_from_data (parser, data, length, &parse_error))
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CATALOG,
                   _("%s: not valid JSON: %s"), loader.name, parse_error->message);
      return NULL;
    }
  if (!load_root (self, &loader, json_parser_get_root (parser)))
    return NULL;
  return g_steal_pointer (&self);
}

TernCatalog *
tern_catalog_new_from_file (const char  *path,
                            GError     **error)
{
  g_autofree char *data = NULL;
  size_t length = 0;
  tn_error read_error = { 0 };

  g_return_val_if_fail (path != NULL, NULL);

  /* $TERN_CATALOG names any file: a FIFO or a device there is refused, not
   * waited on or read without end (docs/DESIGN.md, "Files a user names"). */
  if (tn_read_file (path, CATALOG_MAX_BYTES, &data, &length, &read_error) != TN_OK)
    {
      g_autofree char *why = tern_manager_engine_message (&read_error);

      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_CATALOG,
                   _("cannot read the model catalog: %s"), why);
      return NULL;
    }
  return tern_catalog_new_from_data (data, (gssize) length, path, error);
}

char *
tern_catalog_default_path (void)
{
  const char *env = g_getenv ("TERN_CATALOG");

  if (env != NULL && *env != '\0')
    return g_strdup (env);
  return tern_paths_catalog ();
}

const char *
tern_catalog_get_path (TernCatalog *self)
{
  g_return_val_if_fail (TERN_IS_CATALOG (self), NULL);
  return self->path;
}

GPtrArray *
tern_catalog_get_families (TernCatalog *self)
{
  g_return_val_if_fail (TERN_IS_CATALOG (self), NULL);
  return self->families;
}

const TernCatalogTag *
tern_catalog_find_tag_for_file (TernCatalog *self,
                                const char  *path)
{
  g_autofree char *dir = NULL;
  g_autofree char *package = NULL;
  g_autofree char *name = NULL;

  g_return_val_if_fail (TERN_IS_CATALOG (self), NULL);
  if (path == NULL)
    return NULL;
  dir = g_path_get_dirname (path);
  package = g_path_get_basename (dir);
  name = g_path_get_basename (path);
  for (guint i = 0; i < self->tags->len; i++)
    {
      const TernCatalogTag *tag = self->tags->pdata[i];
      const TernCatalogPackage *base = tag->packages[TERN_PACKAGE_ROLE_BASE];
      const TernCatalogFile *file = base->files->pdata[0];

      if (!tag->single_turn && g_str_equal (base->id, package) && g_str_equal (file->name, name))
        return tag;
    }
  return NULL;
}

GPtrArray *
tern_catalog_get_tags (TernCatalog *self)
{
  g_return_val_if_fail (TERN_IS_CATALOG (self), NULL);
  return self->tags;
}

const TernCatalogTag *
tern_catalog_find_tag (TernCatalog *self,
                       const char  *tag)
{
  g_return_val_if_fail (TERN_IS_CATALOG (self), NULL);
  return tag ? g_hash_table_lookup (self->tag_by_name, tag) : NULL;
}

const TernCatalogPackage *
tern_catalog_find_package (TernCatalog *self,
                           const char  *id)
{
  g_return_val_if_fail (TERN_IS_CATALOG (self), NULL);
  return id ? g_hash_table_lookup (self->package_by_id, id) : NULL;
}

guint64
tern_catalog_package_size (const TernCatalogPackage *package)
{
  guint64 total = 0;

  /* Saturating: a catalog may give sizes up to 2^63-1 each. */
  for (guint i = 0; i < package->files->len; i++)
    total = tern_manager_add_size (total, ((TernCatalogFile *) package->files->pdata[i])->size);
  return total;
}

guint64
tern_catalog_tag_size (const TernCatalogTag *tag)
{
  guint64 total = 0;

  for (int role = 0; role < TERN_PACKAGE_N_ROLES; role++)
    {
      gboolean seen = FALSE;

      if (tag->packages[role] == NULL)
        continue;
      for (int other = 0; other < role; other++)
        seen |= tag->packages[other] == tag->packages[role];
      if (!seen)
        total = tern_manager_add_size (total, tern_catalog_package_size (tag->packages[role]));
    }
  return total;
}

gboolean
tern_catalog_tag_size_known (const TernCatalogTag *tag)
{
  for (int role = 0; role < TERN_PACKAGE_N_ROLES; role++)
    {
      const TernCatalogPackage *package = tag->packages[role];

      for (guint i = 0; package != NULL && i < package->files->len; i++)
        if (((TernCatalogFile *) package->files->pdata[i])->size == 0)
          return FALSE;
    }
  return TRUE;
}

/* What the engine of this build runs, in the words of the catalog's
 * `requires`. A tag naming anything else is listed but not downloadable:
 * nothing offers a file this Tern cannot run. Whoever teaches the engine a
 * new architecture or drafter adds its name here (docs/MODELS.md lists
 * the names the shipped catalog uses: qwen3moe, gpt-oss, gemma4-moe, mtp). */
static const char * const engine_features[] = {
  "llama", "qwen3", "gemma3", "gemma4", "qwen3moe", "gemma4-moe", "gpt-oss", "draft-model", "dflash",
  "mtp", NULL
};

const char * const *
tern_catalog_features (void)
{
  return engine_features;
}

const char *
tern_catalog_text (const char *english)
{
  /* gettext ("") is the catalog's header, not a translation. */
  if (english == NULL || *english == '\0')
    return english;
  return g_dgettext (GETTEXT_PACKAGE, english);
}

const char *
tern_catalog_tag_missing_feature (const TernCatalogTag *tag)
{
  for (guint i = 0; tag->requires != NULL && tag->requires[i] != NULL; i++)
    if (!g_strv_contains (engine_features, tag->requires[i]))
      return tag->requires[i];
  return NULL;
}

gboolean
tern_catalog_tag_supported (const TernCatalogTag *tag)
{
  return tern_catalog_tag_missing_feature (tag) == NULL
      && (tag->min_app_version == NULL
          || tern_manager_version_compare (tern_manager_app_version (), tag->min_app_version) >= 0);
}

char *
tern_catalog_tag_unsupported_reason (const TernCatalogTag *tag)
{
  const char *feature = tern_catalog_tag_missing_feature (tag);

  if (feature != NULL)
    /* Translators: %s is an engine feature from the catalog, e.g. "qwen3moe" or "mtp" */
    return g_strdup_printf (_("needs %s support"), feature);
  if (!tern_catalog_tag_supported (tag))
    return g_strdup_printf (_("needs Tern %s"), tag->min_app_version);
  return NULL;
}

const char *
tern_draft_kind_to_string (TernDraftKind kind)
{
  return (unsigned) kind < TERN_DRAFT_N_KINDS ? draft_kinds[kind] : "?";
}

const char *
tern_draft_kind_spec_prefix (TernDraftKind kind)
{
  switch (kind)
    {
    case TERN_DRAFT_KIND_MODEL: return "draft";
    case TERN_DRAFT_KIND_DFLASH: return "dflash";
    case TERN_DRAFT_KIND_MTP: return "mtp";
    case TERN_DRAFT_N_KINDS:
    default: return "?";
    }
}

const char *
tern_package_role_to_string (TernPackageRole role)
{
  switch (role)
    {
    case TERN_PACKAGE_ROLE_BASE: return "base";
    case TERN_PACKAGE_ROLE_DRAFT: return "draft";
    case TERN_PACKAGE_ROLE_VISION: return "vision";
    case TERN_PACKAGE_N_ROLES:
    default: return "?";
    }
}
