/* tern-window-speculation.c: the header's speculation control follows the
 * loaded model (docs/APP.md, "Speculation").
 *
 * The drafter list holds prompt lookup, which needs nothing, and only the
 * drafters that can work with the model in use:
 * - a model opened from a store tag (the Models window) offers what the
 *   tag's packages bring: its draft model, DFlash draft or MTP assistant;
 * - a model opened from disk offers the drafters whose file is set in
 *   Preferences ("Draft Files for Models Opened From Disk") and exists;
 * - a server's model offers lookup only (speculation is the server's).
 * A drafter the engine refuses for the model (another vocabulary, another
 * target) is dropped from the list until its file changes, with the engine's
 * words in a toast; the choice goes back to lookup and nothing else changes.
 * A tag opened from the Models window also sets what its flags say: flash
 * (single-turn) or chat, and speculation on with its drafter when
 * flags.speculation is true.
 */
#include "config.h"

#include <string.h>

#include <glib/gi18n.h>

#ifdef TERN_HAVE_MANAGER
#include "tern-manager.h"
#include "tern-connections.h"
#endif
#include "tern-window-private.h"

/* In the order of TernDrafterKind and of the settings' Drafter enum. */
static const char *const drafter_nicks[TERN_N_DRAFTERS] = {
  "prompt-lookup", "draft-model", "dflash", "mtp"
};
/* The setting that names each file drafter's file for models from disk. */
static const char *const drafter_keys[TERN_N_DRAFTERS] = {
  NULL, "draft-model-path", "dflash-path", "mtp-path"
};

/* Short: the header must hold them beside the mode switch. */
static const char *
drafter_label (TernDrafterKind kind)
{
  switch (kind)
    {
    case TERN_DRAFTER_DRAFT_MODEL:
      /* Translators: Drafter: a draft model */
      return _("Draft");
    case TERN_DRAFTER_DFLASH:
      return _("DFlash");
    case TERN_DRAFTER_MTP:
      /* Translators: Drafter: Gemma 4's multi-token-prediction assistant */
      return _("MTP");
    case TERN_DRAFTER_PROMPT_LOOKUP:
    default:
      /* Translators: Drafter: prompt lookup */
      return _("Lookup");
    }
}

static const char *
drafter_menu_label (TernDrafterKind kind)
{
  switch (kind)
    {
    case TERN_DRAFTER_DRAFT_MODEL:
      return _("Drafter: Draft _Model");
    case TERN_DRAFTER_DFLASH:
      return _("Drafter: D_Flash");
    case TERN_DRAFTER_MTP:
      return _("Drafter: M_TP Assistant");
    case TERN_DRAFTER_PROMPT_LOOKUP:
    default:
      return _("Drafter: Prompt _Lookup");
    }
}

void
_tern_model_origin_free (TernModelOrigin *origin)
{
  if (origin == NULL)
    return;
  g_free (origin->tag);
  g_free (origin->draft_path);
  g_free (origin);
}

/* The file of a file drafter for the loaded model (NULL: it has none). */
static char *
drafter_file (TernWindow      *self,
              TernDrafterKind  kind)
{
  const TernModelOrigin *o = self->origin;
  g_autofree char *path = NULL;

  if (kind == TERN_DRAFTER_PROMPT_LOOKUP || (guint) kind >= TERN_N_DRAFTERS)
    return NULL;
  if (o != NULL && o->remote)
    return NULL;
  if (o != NULL && o->tag != NULL)
    return o->draft_path != NULL && o->draft_kind == kind ? g_strdup (o->draft_path) : NULL;
  path = g_settings_get_string (self->settings, drafter_keys[kind]);
  return *path != '\0' ? g_steal_pointer (&path) : NULL;
}

static gboolean
is_offered (TernWindow      *self,
            TernDrafterKind  kind)
{
  g_autofree char *file = NULL;

  if (kind == TERN_DRAFTER_PROMPT_LOOKUP)
    return TRUE;
  file = drafter_file (self, kind);
  return file != NULL && !self->refused[kind] && g_file_test (file, G_FILE_TEST_IS_REGULAR);
}

static void
set_action_state (TernWindow *self)
{
  GAction *action = g_action_map_lookup_action (G_ACTION_MAP (self), "drafter");

  if (action != NULL)
    g_simple_action_set_state (G_SIMPLE_ACTION (action),
                               g_variant_new_string (drafter_nicks[self->drafter_kind]));
}

/* Rebuilds the header's list and the main menu's drafter items from what is
 * offered now, and selects want when it is offered, else lookup. Changes
 * the selection without preparing anything: the caller knows whether the
 * drafter has to be loaded. */
static void
sync_drafters (TernWindow      *self,
               TernDrafterKind  want)
{
  g_autoptr(GtkStringList) list = NULL;
  guint selected = 0;

  /* Disposed (a setting changed while the window closes). */
  if (self->drafter_dropdown == NULL)
    return;
  list = gtk_string_list_new (NULL);
  self->syncing_drafters = TRUE;
  self->n_offered = 0;
  for (guint k = 0; k < TERN_N_DRAFTERS; k++)
    if (is_offered (self, (TernDrafterKind) k))
      {
        if ((TernDrafterKind) k == want)
          selected = self->n_offered;
        self->offered[self->n_offered++] = (TernDrafterKind) k;
        gtk_string_list_append (list, drafter_label ((TernDrafterKind) k));
      }
  gtk_drop_down_set_model (self->drafter_dropdown, G_LIST_MODEL (list));
  gtk_drop_down_set_selected (self->drafter_dropdown, selected);
  self->drafter_kind = self->offered[selected];
  /* A single entry is no choice: the list says so rather than offer it. */
  gtk_widget_set_sensitive (GTK_WIDGET (self->drafter_dropdown), self->n_offered > 1);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->drafter_dropdown),
                               self->n_offered > 1 ? NULL
                               : _("Prompt lookup is the only drafter for this model: a model from the Models window brings its own drafters, and for a model opened from disk draft files are set in Preferences"));

  if (self->speculation_menu != NULL)
    {
      /* The section's first item is the speculation switch. */
      while (g_menu_model_get_n_items (G_MENU_MODEL (self->speculation_menu)) > 1)
        g_menu_remove (self->speculation_menu, 1);
      for (guint i = 0; i < self->n_offered; i++)
        {
          g_autoptr(GMenuItem) item = g_menu_item_new (drafter_menu_label (self->offered[i]), NULL);

          g_menu_item_set_action_and_target_value (item, "win.drafter",
                                                   g_variant_new_string (drafter_nicks[self->offered[i]]));
          g_menu_append_item (self->speculation_menu, item);
        }
    }
  set_action_state (self);
  self->syncing_drafters = FALSE;
}

/* A file drafter is loaded against the model in use, on the worker; a
 * refusal (another vocabulary, another target) comes back as a toast with
 * the engine's words (on_drafter_ready). Lookup frees the one loaded. */
static void
prepare_drafter (TernWindow *self)
{
  g_autofree char *path = NULL;

  if (!self->model_loaded || self->worker == NULL)
    return;
  path = drafter_file (self, self->drafter_kind);
  self->drafter_id = tern_engine_worker_prepare_drafter (self->worker, self->drafter_kind, path);
}

TernDrafterKind
_tern_window_selected_drafter (TernWindow *self)
{
  return self->drafter_kind;
}

static void
on_drafter_selected (TernWindow *self)
{
  guint i = gtk_drop_down_get_selected (self->drafter_dropdown);
  TernDrafterKind kind = i < self->n_offered ? self->offered[i] : TERN_DRAFTER_PROMPT_LOOKUP;

  if (self->syncing_drafters || kind == self->drafter_kind)
    return;
  self->drafter_kind = kind;
  set_action_state (self);
  prepare_drafter (self);
}

static void
on_drafter_ready (TernWindow                  *self,
                  const TernDrafterReadyEvent *ev)
{
  if (ev->id != self->drafter_id)
    return;
  self->drafter_id = 0;
  if (ev->error == NULL)
    return;
  _tern_window_set_error (self, ev->error);
  /* It cannot work with this model: not offered again until its file
   * changes or another model loads. */
  if ((guint) ev->kind < TERN_N_DRAFTERS && ev->kind != TERN_DRAFTER_PROMPT_LOOKUP)
    self->refused[ev->kind] = TRUE;
  sync_drafters (self, TERN_DRAFTER_PROMPT_LOOKUP);
}

static gboolean
origin_uses_settings (TernWindow *self)
{
  return self->origin == NULL || (self->origin->tag == NULL && !self->origin->remote);
}

static void
on_draft_path_changed (TernWindow *self,
                       const char *key)
{
  TernDrafterKind kind = TERN_DRAFTER_PROMPT_LOOKUP;
  TernDrafterKind before = self->drafter_kind;

  for (guint k = 1; k < TERN_N_DRAFTERS; k++)
    if (g_str_equal (key, drafter_keys[k]))
      kind = (TernDrafterKind) k;
  if (kind == TERN_DRAFTER_PROMPT_LOOKUP || !origin_uses_settings (self))
    return;
  /* Another file may fit where the refused one did not. */
  self->refused[kind] = FALSE;
  sync_drafters (self, before);
  if (self->drafter_kind != before || self->drafter_kind == kind)
    prepare_drafter (self);
}

/* Why a drafter the list does not hold cannot be chosen. */
static char *
not_offered_reason (TernWindow      *self,
                    TernDrafterKind  kind)
{
  g_autofree char *file = NULL;

  if (!origin_uses_settings (self))
    return g_strdup (_("The loaded model provides no drafter of this kind: the list shows the ones it has"));
  file = drafter_file (self, kind);
  if (file == NULL)
    return g_strdup (kind == TERN_DRAFTER_DFLASH
                       ? _("No DFlash draft file is chosen: choose one in Preferences")
                     : kind == TERN_DRAFTER_MTP
                       ? _("No MTP assistant file is chosen: choose one in Preferences")
                       : _("No draft model file is chosen: choose one in Preferences"));
  /* Translators: %s is the path of a draft file set in Preferences */
  return g_strdup_printf (_("%s: no such file (the draft file set in Preferences)"), file);
}

static void
action_drafter (GSimpleAction *action,
                GVariant      *state,
                gpointer       data)
{
  TernWindow *self = data;
  const char *nick = g_variant_get_string (state, NULL);
  TernDrafterKind kind = TERN_N_DRAFTERS;

  (void) action;
  for (guint k = 0; k < TERN_N_DRAFTERS; k++)
    if (g_str_equal (nick, drafter_nicks[k]))
      kind = (TernDrafterKind) k;
  if ((guint) kind >= TERN_N_DRAFTERS)
    return;
  /* Refused before: asked for by name, it is tried again (the file may
   * have been replaced in place). */
  if (kind != TERN_DRAFTER_PROMPT_LOOKUP && self->refused[kind])
    {
      self->refused[kind] = FALSE;
      if (is_offered (self, kind))
        {
          sync_drafters (self, kind);
          prepare_drafter (self);
          return;
        }
      self->refused[kind] = TRUE;
    }
  for (guint i = 0; i < self->n_offered; i++)
    if (self->offered[i] == kind)
      {
        gtk_drop_down_set_selected (self->drafter_dropdown, i);
        return;
      }
  {
    g_autofree char *reason = not_offered_reason (self, kind);

    _tern_window_set_error (self, reason);
  }
}

void
_tern_window_set_loading_origin (TernWindow      *self,
                                 TernModelOrigin *origin)
{
  _tern_model_origin_free (self->loading_origin);
  self->loading_origin = origin;
}

/* A store tag's drafter and flags, when path is the tag's model file;
 * otherwise (a file from disk, a tag no longer installed, an imported
 * model) NULL. */
static TernModelOrigin *
origin_of_tag (const char *path,
               const char *tag,
               gboolean    apply_flags)
{
#ifdef TERN_HAVE_MANAGER
  g_autoptr(TernModelStore) store = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *base = NULL;
  g_autofree char *spec = NULL;
  TernModelOrigin *origin;
  gboolean on = FALSE;

  if (tag == NULL || *tag == '\0' || path == NULL)
    return NULL;
  store = tern_model_store_new (NULL, &error);
  if (store == NULL)
    {
      g_debug ("%s", error->message);
      return NULL;
    }
  base = tern_model_store_get_path (store, tag, TERN_PACKAGE_ROLE_BASE);
  if (base == NULL || !g_str_equal (base, path) || tern_model_store_is_local (store, tag))
    return NULL;
  origin = g_new0 (TernModelOrigin, 1);
  origin->tag = g_strdup (tag);
  origin->apply_flags = apply_flags;
  origin->single_turn = tern_model_store_get_single_turn (store, tag);
  spec = tern_model_store_get_draft_spec (store, tag, &on);
  if (spec != NULL)
    {
      /* "draft:PATH", "dflash:PATH" or "mtp:PATH" (tern_draft_kind_spec_prefix). */
      static const struct { const char *prefix; TernDrafterKind kind; } kinds[] = {
        { "draft:", TERN_DRAFTER_DRAFT_MODEL },
        { "dflash:", TERN_DRAFTER_DFLASH },
        { "mtp:", TERN_DRAFTER_MTP },
      };

      for (guint i = 0; i < G_N_ELEMENTS (kinds); i++)
        if (g_str_has_prefix (spec, kinds[i].prefix))
          {
            origin->draft_kind = kinds[i].kind;
            origin->draft_path = g_strdup (spec + strlen (kinds[i].prefix));
            origin->speculation = on;
          }
    }
  return origin;
#else
  (void) path;
  (void) tag;
  (void) apply_flags;
  return NULL;
#endif
}

TernModelOrigin *
_tern_model_origin_new (const char *path,
                        const char *tag,
                        gboolean    apply_flags)
{
  TernModelOrigin *origin = origin_of_tag (path, tag, apply_flags);

  if (origin != NULL)
    return origin;
  origin = g_new0 (TernModelOrigin, 1);
#ifdef TERN_HAVE_MANAGER
  {
    g_autofree char *url = NULL;
    g_autofree char *model = NULL;

    origin->remote = tern_remote_ref_parse (path, &url, &model);
  }
#endif
  return origin;
}

/* The model in use changed: its drafters replace the old one's (whose
 * draft went with it), and a tag chosen in the Models window sets what its
 * flags say. */
void
_tern_window_speculation_model_loaded (TernWindow *self)
{
  TernModelOrigin *origin = self->loading_origin;
  TernDrafterKind want = self->drafter_kind;

  self->loading_origin = NULL;
  if (origin == NULL)
    origin = g_new0 (TernModelOrigin, 1);
  _tern_model_origin_free (self->origin);
  self->origin = origin;
  memset (self->refused, 0, sizeof self->refused);
  if (origin->apply_flags && origin->tag != NULL)
    {
      /* A catalog tag and its -flash sibling differ by this flag; a Hub
       * download ("hf:...") has no flash sibling and leaves the mode alone. */
      if (origin->single_turn)
        g_settings_set_string (self->settings, "mode", "flash");
      else if (!g_str_has_prefix (origin->tag, "hf:"))
        g_settings_set_string (self->settings, "mode", "chat");
      if (origin->draft_path != NULL && origin->speculation)
        {
          want = origin->draft_kind;
          g_settings_set_boolean (self->settings, "speculation", TRUE);
        }
    }
  sync_drafters (self, want);
  if (self->drafter_kind != TERN_DRAFTER_PROMPT_LOOKUP)
    prepare_drafter (self);
}

const char *
tern_window_get_model_tag (TernWindow *self)
{
  return self->origin != NULL ? self->origin->tag : NULL;
}

char **
tern_window_get_drafters (TernWindow *self)
{
  char **nicks = g_new0 (char *, self->n_offered + 1);

  for (guint i = 0; i < self->n_offered; i++)
    nicks[i] = g_strdup (drafter_nicks[self->offered[i]]);
  return nicks;
}

void
_tern_window_speculation_init (TernWindow *self)
{
  g_autoptr(GSimpleAction) drafter = NULL;
  int initial = g_settings_get_enum (self->settings, "default-drafter");

  /* The header starts at the default drafter when it is offered; a file
   * drafter is loaded with the model. */
  self->drafter_kind = TERN_DRAFTER_PROMPT_LOOKUP;
  drafter = g_simple_action_new_stateful ("drafter", G_VARIANT_TYPE_STRING,
                                          g_variant_new_string (drafter_nicks[0]));
  g_signal_connect (drafter, "change-state", G_CALLBACK (action_drafter), self);
  g_action_map_add_action (G_ACTION_MAP (self), G_ACTION (drafter));
  sync_drafters (self, initial >= 0 && initial < TERN_N_DRAFTERS ? (TernDrafterKind) initial
                                                                   : TERN_DRAFTER_PROMPT_LOOKUP);

  g_signal_connect_swapped (self->drafter_dropdown, "notify::selected",
                            G_CALLBACK (on_drafter_selected), self);
  for (guint k = 1; k < TERN_N_DRAFTERS; k++)
    {
      g_autofree char *signal = g_strconcat ("changed::", drafter_keys[k], NULL);

      g_signal_connect_object (self->settings, signal, G_CALLBACK (on_draft_path_changed), self,
                               G_CONNECT_SWAPPED);
    }
  g_signal_connect_swapped (self->worker, "drafter-ready", G_CALLBACK (on_drafter_ready), self);
}
