/* tern-catalog.h: the catalog of models Tern can download (data/catalog/
 * models.json, or another file named by --catalog / TERN_CATALOG).
 *
 * A family ("qwen3") has tags ("qwen3:0.6b", "qwen3:0.6b-flash"); a tag
 * names a base package and optionally a draft package (for speculation: a
 * small model of the same vocabulary, a DFlash block draft or an MTP
 * assistant head, as its draft_kind says) and a vision package (a projector);
 * a package is a list of files (URL, size, sha256 when known). Tags may share
 * packages: a flash tag reuses the packages of its family, so installing it
 * after its sibling downloads nothing.
 *
 * The whole file is validated on load; an error names the file and the field,
 * e.g. "models.json: families[0].tags[2].base: unknown package 'qwen3-17b'".
 * The catalog is immutable once loaded; the structs below belong to it. */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

typedef struct {
  char    *name;     /* file name inside the package's directory */
  char    *url;
  guint64  size;     /* bytes; 0 when the catalog does not say */
  char    *sha256;   /* lowercase hex; NULL: take the server's advertised hash */
} TernCatalogFile;

typedef struct {
  char      *id;     /* also the directory name in the store */
  char      *label;
  GPtrArray *files;  /* TernCatalogFile*, at least one; the first is the model */
  /* The model's KV cache per token of context (F16 keys and values, as
   * tn_model_kv_bytes_per_token counts them); 0 when the catalog does not
   * say. For the Models panel's memory hint, before the file is here. */
  guint64    kv_bytes_per_token;
} TernCatalogPackage;

typedef enum {
  TERN_PACKAGE_ROLE_BASE,
  TERN_PACKAGE_ROLE_DRAFT,
  TERN_PACKAGE_ROLE_VISION,
  TERN_PACKAGE_N_ROLES
} TernPackageRole;

/* What the draft package is, so that the right drafter loads it
 * (docs/MODELS.md, docs/DFLASH.md): a whole model with the target's
 * vocabulary, a DFlash block draft, or a Gemma 4 MTP assistant head. */
typedef enum {
  TERN_DRAFT_KIND_MODEL,
  TERN_DRAFT_KIND_DFLASH,
  TERN_DRAFT_KIND_MTP,
  TERN_DRAFT_N_KINDS
} TernDraftKind;

typedef struct _TernCatalogFamily TernCatalogFamily;

/* A model card's suggested sampling; a field below 0 is not given. */
typedef struct {
  double  temperature;
  double  top_p;
  gint64  top_k;
  double  min_p;
} TernCatalogSampling;

typedef struct {
  char                     *tag;              /* "qwen3:0.6b" */
  char                     *label;            /* for the UI */
  char                     *description;      /* may be NULL */
  const TernCatalogFamily  *family;
  const TernCatalogPackage *packages[TERN_PACKAGE_N_ROLES]; /* base always set */
  gboolean                  vision;
  gboolean                  thinking;
  gboolean                  single_turn;      /* flash: pinned system prompt, one-shot asks */
  gboolean                  speculation;      /* speculate with the draft unless told not to */
  TernDraftKind             draft_kind;       /* MODEL when there is no draft */
  GStrv                     requires;         /* engine features the tag needs; never NULL */
  gint64                    context_length;   /* tokens; 0 when not given */
  char                     *min_app_version;  /* may be NULL */
  TernCatalogSampling       sampling;
} TernCatalogTag;

struct _TernCatalogFamily {
  char      *id;           /* "qwen3" */
  char      *label;        /* "Qwen3" */
  char      *description;  /* may be NULL */
  GPtrArray *tags;         /* TernCatalogTag* */
};

#define TERN_TYPE_CATALOG (tern_catalog_get_type ())
G_DECLARE_FINAL_TYPE (TernCatalog, tern_catalog, TERN, CATALOG, GObject)

/* The catalog file to use: TERN_CATALOG when set, else the one shipped with
 * the running program (installed, or the build tree's copy: tern-paths.h). */
char *tern_catalog_default_path (void);

TernCatalog *tern_catalog_new_from_file (const char  *path,
                                         GError     **error);
/* `name` is used in messages in place of a path. */
TernCatalog *tern_catalog_new_from_data (const char  *data,
                                         gssize       length,
                                         const char  *name,
                                         GError     **error);

const char *tern_catalog_get_path (TernCatalog *self);
/* TernCatalogFamily*, in file order. */
GPtrArray  *tern_catalog_get_families (TernCatalog *self);
/* NULL when absent. */
const TernCatalogTag     *tern_catalog_find_tag     (TernCatalog *self,
                                                     const char  *tag);
const TernCatalogPackage *tern_catalog_find_package (TernCatalog *self,
                                                     const char  *id);
/* The tag whose model file `path` is, as the store keeps it
 * (.../PACKAGE/FILE, the base package's first file); the first such tag
 * that is not single-turn. NULL when none. */
const TernCatalogTag     *tern_catalog_find_tag_for_file (TernCatalog *self,
                                                          const char  *path);
/* Every tag, in file order (TernCatalogTag*). */
GPtrArray *tern_catalog_get_tags (TernCatalog *self);

/* Sum of the sizes of the tag's distinct packages (what a pull from nothing
 * downloads); 0 parts count as 0. */
guint64  tern_catalog_tag_size (const TernCatalogTag *tag);
/* FALSE when a file of the tag has no size in the catalog: then the sizes
 * above are lower bounds, and "nothing to download" cannot be said. */
gboolean tern_catalog_tag_size_known (const TernCatalogTag *tag);
guint64  tern_catalog_package_size (const TernCatalogPackage *package);
/* FALSE when the tag needs a newer Tern than this one, or an engine feature
 * this build lacks (tern_catalog_tag_missing_feature says which). */
gboolean tern_catalog_tag_supported (const TernCatalogTag *tag);
/* The first of the tag's `requires` this build does not have; NULL when it
 * has them all. */
const char *tern_catalog_tag_missing_feature (const TernCatalogTag *tag);
/* Why the tag cannot be used here, short enough for a list column
 * ("needs Tern 0.3.0", "needs qwen3moe support"); NULL when it can. */
char *tern_catalog_tag_unsupported_reason (const TernCatalogTag *tag);

/* A catalog word (a description, a label) in the user's language, looked up
 * when it is shown: the catalog keeps the file's English, which --json and
 * the search match too. Words with no translation (another catalog, a Hub
 * tag) come back as they are; NULL and "" too, never gettext's header. The
 * words are extracted from data/catalog/catalog-strings.h
 * (docs/TRANSLATING.md). */
const char *tern_catalog_text (const char *english);

const char *tern_package_role_to_string (TernPackageRole role);
/* "model", "dflash", "mtp": the catalog's words. */
const char *tern_draft_kind_to_string (TernDraftKind kind);
/* The --spec prefix that loads such a draft: "draft", "dflash", "mtp". */
const char *tern_draft_kind_spec_prefix (TernDraftKind kind);
/* Engine features this build has, as `requires` names them (NULL-terminated). */
const char * const *tern_catalog_features (void);

G_END_DECLS
