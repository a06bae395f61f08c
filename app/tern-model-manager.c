/* tern-model-manager.c: the Models panel over TernCatalog, TernModelStore
 * and TernDownloader. Rows are made once per catalog; their state is
 * recomputed from the store and the downloader whenever either says so. */
#include "config.h"

#include <adwaita.h>
#include <glib/gi18n.h>
#include <stdlib.h>
#include <string.h>

#include "tern-model-manager.h"
#include "tern-connections.h"
#include "tern-remote.h"
#include "tern-context.h"
#include "tern-hub.h"
#include "tern-row-failure.h"

typedef struct _Row Row;
typedef struct _HubResult HubResult;

/* The Hugging Face search under the list (docs/MODELS.md, "Searching
 * Hugging Face"). */
typedef enum {
  HUB_IDLE,       /* no search: the text is too short */
  HUB_SEARCHING,
  HUB_DONE,
  HUB_FAILED,
} HubState;

/* Typing pauses this long before the Hub is asked. */
#define HUB_DEBOUNCE_MS 300
/* Shorter text matches too much of the Hub to be a search. */
#define HUB_MIN_CHARS 2
/* Narrower than this, a row's buttons go under its words: beside them, a
 * German "Herunterladen" left a 360 px window's title, description and
 * size half the row, some 250 px tall a row (docs/APP.md, "Models"). */
#define NARROW_ROW_WIDTH 500

struct _TernModelManager {
  GtkBox          parent_instance;

  GtkSearchEntry *search_entry;
  GtkButton      *import_button;
  GtkButton      *check_button;
  GtkRevealer    *message_revealer;
  GtkLabel       *message_label;
  GtkButton      *message_close_button;
  GtkStack       *stack;
  AdwStatusPage  *error_page;
  GtkBox         *groups_box;
  GtkLabel       *disk_label;
  GtkRevealer    *offline_revealer;
  GtkLabel       *offline_label;
  GtkButton      *retry_button;

  TernCatalog    *catalog;
  TernModelStore *store;
  TernDownloader *downloader;
  GHashTable     *rows;    /* tag -> Row* */
  GPtrArray      *groups;  /* AdwPreferencesGroup* in groups_box */
  AdwPreferencesGroup *here_group;  /* installed, partial, imported: first */
  /* The tags in here_group when it was made: a change rebuilds the list. */
  char           *here_key;
  GHashTable     *errors;  /* tag -> the last failure to show on its row */
  GHashTable     *error_details; /* tag -> that failure's own words, for the tooltip */
  GHashTable     *offline; /* tags whose download found no network: Retry */
  GHashTable     *stopped; /* tags whose partial download the user stopped (Cancel) */
  gint64          retried_at; /* real time of the last Retry, us; 0: none */
  /* Memory for the hint on each row, read when the rows are updated. */
  guint64         mem_physical;
  guint64         mem_available;
  GCancellable   *cancellable;
  char           *filter;  /* lowercase, NULL: none */
  gboolean        checking;
  guint           check_tick; /* the Verify message's figure, while checking */
  /* The models of the servers in Preferences > Connections, listed first
   * and marked remote (docs/REMOTE.md). */
  GSettings      *settings;
  AdwPreferencesGroup *remote_group;
  GPtrArray      *remote_rows;

  AdwStatusPage  *no_results_page;
  /* Hugging Face: a group after the catalog's, its header spinner, the
   * sentence row (searching, nothing found, offline or failed, with Retry)
   * and one expander row per repository found. */
  AdwPreferencesGroup *hub_group;
  GtkSpinner     *hub_spinner;
  AdwActionRow   *hub_status;
  GtkImage       *hub_status_icon;
  GtkSpinner     *hub_status_spinner;
  GtkButton      *hub_retry;
  GPtrArray      *hub_results;     /* HubResult*, shown in hub_group */
  GHashTable     *hub_rows;        /* tag -> HubQuantRow* of hub_results */
  GCancellable   *hub_cancellable; /* the search and listings in flight */
  guint           hub_timeout;     /* the pause after typing */
  char           *hub_query;       /* searched, or being searched */
  HubState        hub_state;
  guint           hub_generation;  /* answers of older searches are dropped */
  /* The rows' buttons are under their words (NARROW_ROW_WIDTH); moved
   * after an allocation, from an idle (narrow_idle), never during one. */
  gboolean        narrow;
  guint           narrow_idle;
  GtkWidget      *width_probe;
};

/* One quantization of a repository found: a row inside its repository's. */
typedef struct {
  HubResult      *result;
  TernHubQuant   *quant;     /* in result->repo */
  GtkWidget      *row;       /* AdwActionRow */
  GtkProgressBar *progress;
  GtkButton      *download;
  GtkButton      *cancel;
  GtkButton      *use;
  gboolean        resolving; /* asking the Hub which files, before the pull */
} HubQuantRow;

/* One repository found: an expander row that lists its quantizations the
 * first time it is opened. */
struct _HubResult {
  TernModelManager *self;
  char             *id;
  gboolean          gated;
  guint64           downloads;
  guint64           likes;
  GtkWidget        *row;          /* AdwExpanderRow */
  GtkWidget        *gated_icon;
  GPtrArray        *children;     /* rows inside it */
  GPtrArray        *quant_rows;   /* HubQuantRow* */
  TernHubRepo      *repo;
  gboolean          loading;
  gboolean          loaded;
};

/* A model's row: an AdwActionRow, or an AdwExpanderRow when the model has a
 * flash variant, which is then a row inside it (an option of its model,
 * not a second model). */
struct _Row {
  TernModelManager     *self;
  char                 *tag;
  const TernCatalogTag *catalog_tag;  /* NULL: imported or no longer in the catalog */
  AdwPreferencesGroup  *group;
  GtkWidget            *row;          /* AdwActionRow or AdwExpanderRow */
  Row                  *parent;       /* set on a flash variant's row */
  Row                  *variant;      /* the flash variant inside this row */
  GtkProgressBar       *progress;
  GtkButton            *download;
  GtkButton            *cancel;
  GtkButton            *remove;
  GtkButton            *use;
  GtkWidget            *failure;      /* the failure sentence, under the subtitle */
  GtkWidget            *description;  /* the model's own words, under its title; NULL: none */
  char                 *haystack;     /* what the filter searches, lowercase */
};

G_DEFINE_FINAL_TYPE (TernModelManager, tern_model_manager, GTK_TYPE_BOX)

enum {
  PROP_0,
  PROP_CATALOG,
  PROP_STORE,
  PROP_DOWNLOADER,
  N_PROPS
};

enum {
  SIGNAL_USE_MODEL,
  N_SIGNALS
};

static GParamSpec *properties[N_PROPS];
static guint signals[N_SIGNALS];

/* A running download's row words; NULL before its first figures (the
 * total is not known yet). */
static char *
progress_text (const TernDownloadProgress *p)
{
  g_autofree char *of = NULL;
  g_autofree char *speed = NULL;
  g_autofree char *left = NULL;
  int percent;

  if (p->check_total > 0)
    {
      percent = (int) (100.0 * (double) p->checked / (double) p->check_total);
      /* Translators: while a downloaded file's sha256 is computed from the
       * disk (some seconds for a large model): "Checking the download: 45%" */
      return g_strdup_printf (_("Checking the download: %d%%"), percent);
    }
  if (p->total == 0)
    return NULL;
  percent = (int) (100.0 * (double) p->done / (double) p->total);
  of = tern_manager_format_size (p->total);
  /* A connection that breaks off after a few bytes, retried, crawls at a
   * byte or so a second: its "581222:16 left" said nothing true. Hours and
   * minutes from an hour on (tern_manager_format_time_left). */
  left = tern_manager_format_time_left (p->eta);
  if (left == NULL)
    return g_strdup_printf (_("%d%% of %s"), percent, of);
  speed = tern_manager_format_size ((guint64) p->rate);
  /* Translators: "45% of 610 MB · 5.1 MB/s · 1:58 left" or "... · 1 h 05 min left" */
  return g_strdup_printf (_("%d%% of %s · %s/s · %s left"), percent, of, speed, left);
}

char *
_tern_model_manager_progress_text (const TernDownloadProgress *progress)
{
  return progress_text (progress);
}

/* The bar's: the check's own, while a file is checked, runs from the start
 * again, so that it moves instead of standing full. */
static double
progress_fraction (const TernDownloadProgress *p)
{
  if (p->check_total > 0)
    return (double) p->checked / (double) p->check_total;
  return p->total > 0 ? (double) p->done / (double) p->total : 0;
}

static void update_row (Row *row);
static gboolean hub_update_view (TernModelManager *self,
                                 guint             shown);
static void hub_update_rows (TernModelManager *self);
static void hub_update_quant_row (HubQuantRow *qr);
static void hub_download (TernModelManager *self,
                          HubQuantRow      *qr);

static void
row_free (Row *row)
{
  g_free (row->tag);
  g_free (row->haystack);
  g_free (row);
}

static void
row_set_subtitle (Row        *row,
                  const char *text)
{
  if (ADW_IS_EXPANDER_ROW (row->row))
    adw_expander_row_set_subtitle (ADW_EXPANDER_ROW (row->row), text);
  else
    adw_action_row_set_subtitle (ADW_ACTION_ROW (row->row), text);
}

static void
set_message (TernModelManager *self,
             const char       *text,
             gboolean          is_error)
{
  /* An error's words may name a file in its own bytes (not UTF-8). */
  g_autofree char *valid = g_utf8_make_valid (text ? text : "", -1);

  gtk_label_set_text (self->message_label, valid);
  if (is_error)
    gtk_widget_add_css_class (GTK_WIDGET (self->message_label), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (self->message_label), "error");
  gtk_revealer_set_reveal_child (self->message_revealer, text != NULL);
}

static void
update_disk_label (TernModelManager *self)
{
  g_autofree char *used = NULL;
  g_autofree char *text = NULL;
  guint64 bytes;

  if (self->store == NULL)
    {
      gtk_label_set_text (self->disk_label, "");
      return;
    }
  bytes = tern_model_store_get_disk_usage (self->store);
  used = tern_manager_format_size (bytes);
  /* By the count of bytes, as GNOME's sizes: the participle agrees with
   * the size, "0 octet utilisé" in French (0 and 1 are singular there),
   * "1 byte", "2 bytes". */
  /* Translators: "3.1 GB used in /home/me/.local/share/tern/models"; the
   * plural form follows the number of bytes */
  text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%s used in %s", "%s used in %s",
                                       (unsigned long) MIN (bytes, G_MAXULONG)),
                          used, tern_model_store_get_root (self->store));
  gtk_label_set_text (self->disk_label, text);
}

/* ---- filter --------------------------------------------------------------- */

static gboolean
row_matches (Row        *row,
             const char *filter)
{
  g_auto(GStrv) words = NULL;

  if (filter == NULL || *filter == '\0')
    return TRUE;
  words = g_strsplit_set (filter, " \t", -1);
  for (char **w = words; *w; w++)
    if (**w != '\0' && strstr (row->haystack, *w) == NULL)
      return FALSE;
  return TRUE;
}

static void
apply_filter (TernModelManager *self)
{
  g_autoptr(GHashTable) visible_groups = g_hash_table_new (NULL, NULL);
  GHashTableIter iter;
  gpointer value;
  guint shown = 0;
  gboolean hub_shown;

  g_hash_table_iter_init (&iter, self->rows);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Row *row = value;
      gboolean visible = row_matches (row, self->filter);

      if (row->parent != NULL)
        continue;  /* with its model, below */
      if (row->variant != NULL)
        {
          gboolean variant = row_matches (row->variant, self->filter);

          /* A search that only the flash variant matches opens its model. */
          gtk_widget_set_visible (row->variant->row, variant);
          if (self->filter != NULL && variant && !visible)
            adw_expander_row_set_expanded (ADW_EXPANDER_ROW (row->row), TRUE);
          visible |= variant;
        }
      gtk_widget_set_visible (row->row, visible);
      if (visible)
        {
          g_hash_table_add (visible_groups, row->group);
          shown++;
        }
    }
  for (guint i = 0; i < self->groups->len; i++)
    gtk_widget_set_visible (self->groups->pdata[i], g_hash_table_contains (visible_groups, self->groups->pdata[i]));
  hub_shown = hub_update_view (self, shown);
  if (g_strcmp0 (gtk_stack_get_visible_child_name (self->stack), "error") == 0)
    return;
  gtk_stack_set_visible_child_name (self->stack, shown > 0 || hub_shown || g_hash_table_size (self->rows) == 0
                                                   ? "list" : "no-results");
}

void
tern_model_manager_set_filter (TernModelManager *self,
                               const char       *text)
{
  g_return_if_fail (TERN_IS_MODEL_MANAGER (self));
  g_free (self->filter);
  self->filter = text && *text ? g_utf8_strdown (text, -1) : NULL;
  apply_filter (self);
}

static void
on_search_changed (TernModelManager *self)
{
  tern_model_manager_set_filter (self, gtk_editable_get_text (GTK_EDITABLE (self->search_entry)));
}

/* ---- rows ------------------------------------------------------------------ */

static void
on_download_clicked (GtkButton *button,
                     Row       *row)
{
  (void) button;
  tern_model_manager_download (row->self, row->tag);
}

static void
on_cancel_clicked (GtkButton *button,
                   Row       *row)
{
  (void) button;
  tern_model_manager_cancel (row->self, row->tag);
}

static void
on_use_clicked (GtkButton *button,
                Row       *row)
{
  (void) button;
  tern_model_manager_use (row->self, row->tag);
}

/* A tag for a callback that may outlive the panel. */
typedef struct {
  GWeakRef  self;
  char     *tag;
} TagRef;

static void
tag_ref_free (TagRef *pending)
{
  g_weak_ref_clear (&pending->self);
  g_free (pending->tag);
  g_free (pending);
}

static void
on_remove_response (AdwMessageDialog *dialog,
                    const char       *response,
                    TagRef    *pending)
{
  g_autoptr(TernModelManager) self = g_weak_ref_get (&pending->self);
  g_autoptr(GError) error = NULL;

  (void) dialog;
  if (self != NULL && g_str_equal (response, "remove") && !tern_model_manager_remove (self, pending->tag, &error))
    set_message (self, error->message, TRUE);
}

static void
on_remove_clicked (GtkButton *button,
                   Row       *row)
{
  TernModelManager *self = row->self;
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  g_autofree char *heading = g_strdup_printf (_("Remove %s?"), row->tag);
  const char *body;
  AdwMessageDialog *dialog;
  TagRef *pending;

  (void) button;
  if (tern_model_store_is_local (self->store, row->tag))
    body = _("Tern forgets this imported model. The file itself is not deleted.");
  else if (tern_model_store_get_state (self->store, row->tag, row->catalog_tag) == TERN_MODEL_STATE_PARTIAL)
    body = _("The partial download is deleted.");
  else
    body = _("Its files are deleted, except files that another installed model also uses.");
  dialog = ADW_MESSAGE_DIALOG (adw_message_dialog_new (GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                                       heading, body));
  adw_message_dialog_add_responses (dialog, "cancel", _("_Cancel"), "remove", _("_Remove"), NULL);
  adw_message_dialog_set_response_appearance (dialog, "remove", ADW_RESPONSE_DESTRUCTIVE);
  adw_message_dialog_set_default_response (dialog, "cancel");
  adw_message_dialog_set_close_response (dialog, "cancel");
  pending = g_new0 (TagRef, 1);
  g_weak_ref_init (&pending->self, self);
  pending->tag = g_strdup (row->tag);
  g_signal_connect_data (dialog, "response", G_CALLBACK (on_remove_response), pending,
                         (GClosureNotify) (void (*) (void)) tag_ref_free, 0);
  gtk_window_present (GTK_WINDOW (dialog));
}

static GtkButton *
row_button (Row        *row,
            GtkBox     *box,
            const char *label,
            const char *tooltip,
            GCallback   callback)
{
  GtkButton *button = GTK_BUTTON (gtk_button_new_with_mnemonic (label));

  gtk_widget_set_valign (GTK_WIDGET (button), GTK_ALIGN_CENTER);
  gtk_widget_set_tooltip_text (GTK_WIDGET (button), tooltip);
  g_signal_connect (button, "clicked", callback, row);
  gtk_box_append (box, GTK_WIDGET (button));
  return button;
}

/* A running download's bar, under its Cancel button: beside the title, a
 * bar of the theme's 150 px and Cancel left a 360 px window's row a word
 * per line for its title. The box is shown only while there is a pull. */
static GtkBox *
pull_box_new (GtkBox          *row_box,
              GtkProgressBar **progress)
{
  GtkBox *pull = GTK_BOX (gtk_box_new (GTK_ORIENTATION_VERTICAL, 4));

  gtk_widget_set_valign (GTK_WIDGET (pull), GTK_ALIGN_CENTER);
  gtk_box_append (row_box, GTK_WIDGET (pull));
  *progress = GTK_PROGRESS_BAR (gtk_progress_bar_new ());
  gtk_widget_add_css_class (GTK_WIDGET (*progress), "tern-row-progress");
  return pull;
}

/* A failed download's sentence in a label of its own, which alone has the
 * error style (tern_row_set_failure): the whole row was red, its title,
 * tag and size and "Fits in memory…" too. */
static void
add_failure_label (Row    *row,
                   GtkBox *buttons)
{
  row->failure = tern_row_set_failure (row->row, buttons, NULL);
}

/* The row's own description, or NULL: under its family's heading, a tag
 * whose words are the family's (already shown above the rows) says
 * nothing more. */
static const char *
row_description (TernModelManager     *self,
                 AdwPreferencesGroup  *group,
                 const TernCatalogTag *tag)
{
  if (tag == NULL || tag->description == NULL || *tag->description == '\0')
    return NULL;
  if (group != self->here_group && tag->family != NULL
      && g_strcmp0 (tag->description, tag->family->description) == 0)
    return NULL;
  return tern_catalog_text (tag->description);
}

/* The description in a wrapped label of its own between the title and the
 * subtitle: it was only a tooltip, which a touch screen or a keyboard never
 * shows, and the subtitle is rewritten on every download tick. */
static GtkWidget *
add_description_label (GtkWidget  *row,
                       const char *text)
{
  GtkWidget *label = gtk_label_new (text);
  GtkWidget *subtitle = tern_row_find_subtitle_label (row);

  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_widget_set_halign (label, GTK_ALIGN_FILL);
  gtk_widget_add_css_class (label, "tern-row-description");
  if (subtitle != NULL && GTK_IS_BOX (gtk_widget_get_parent (subtitle)))
    gtk_box_insert_child_after (GTK_BOX (gtk_widget_get_parent (subtitle)), label,
                                gtk_widget_get_prev_sibling (subtitle));
  else if (ADW_IS_ACTION_ROW (row))
    adw_action_row_add_prefix (ADW_ACTION_ROW (row), label);
  else
    adw_expander_row_add_prefix (ADW_EXPANDER_ROW (row), label);
  return label;
}

/* A row's buttons beside its words (a suffix, or an expander's action),
 * or under them in the box of its title and subtitle, its words then the
 * row's whole width. Only ever moved from an idle (apply_narrow): the
 * panel's width, which decides, is the window's, not the rows'. */
static void
row_place_buttons (GtkWidget *row,
                   GtkWidget *buttons,
                   gboolean   narrow)
{
  GtkWidget *subtitle = tern_row_find_subtitle_label (row);
  GtkWidget *words = subtitle != NULL ? gtk_widget_get_parent (subtitle) : NULL;
  GtkWidget *parent = gtk_widget_get_parent (buttons);

  if (!GTK_IS_BOX (words) || (parent == words) == narrow)
    return;
  g_object_ref (buttons);
  if (parent == words)
    gtk_box_remove (GTK_BOX (words), buttons);
  else if (parent != NULL && ADW_IS_EXPANDER_ROW (row))
    adw_expander_row_remove (ADW_EXPANDER_ROW (row), buttons);
  else if (parent != NULL)
    adw_action_row_remove (ADW_ACTION_ROW (row), buttons);
  gtk_widget_set_halign (buttons, narrow ? GTK_ALIGN_START : GTK_ALIGN_FILL);
  gtk_widget_set_margin_top (buttons, narrow ? 6 : 0);
  if (narrow)
    gtk_box_append (GTK_BOX (words), buttons);
  else if (ADW_IS_EXPANDER_ROW (row))
    adw_expander_row_add_action (ADW_EXPANDER_ROW (row), buttons);
  else
    adw_action_row_add_suffix (ADW_ACTION_ROW (row), buttons);
  g_object_unref (buttons);
  /* The words' height for their new width: without it the row kept its
   * old height until the next change of width. */
  gtk_widget_queue_resize (words);
}

/* parent: the model whose flash variant this row is (NULL: a model);
 * with_variant: the model has one, so its row is an expander. */
static Row *
add_row (TernModelManager     *self,
         AdwPreferencesGroup  *group,
         const char           *tag,
         const TernCatalogTag *catalog_tag,
         Row                  *parent,
         gboolean              with_variant)
{
  Row *row = g_new0 (Row, 1);
  GtkBox *box = GTK_BOX (gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6));
  const char *label = catalog_tag ? tern_catalog_text (catalog_tag->label)
                                    : tern_model_store_get_label (self->store, tag);

  row->self = self;
  row->tag = g_strdup (tag);
  row->catalog_tag = catalog_tag;
  row->group = group;
  row->parent = parent;
  row->row = with_variant ? adw_expander_row_new () : adw_action_row_new ();
  if (parent != NULL)
    /* Translators: the row, inside a model's row, of its single-turn variant */
    adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row->row), _("Flash (one question at a time)"));
  else
    adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row->row), label ? label : tag);
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row->row), FALSE);
  {
    const char *description = row_description (self, group, catalog_tag);

    if (description != NULL)
      row->description = add_description_label (row->row, description);
  }
  {
    /* The English words too: a search for "images" still finds a model
     * whose description is shown as "liest Bilder". */
    g_autofree char *words = catalog_tag
      ? g_strjoin (" ", tag, catalog_tag->label, label ? label : "", catalog_tag->family->label,
                   catalog_tag->description ? catalog_tag->description : "",
                   catalog_tag->description ? tern_catalog_text (catalog_tag->description) : "", NULL)
      : g_strjoin (" ", tag, label ? label : "", NULL);

    row->haystack = g_utf8_strdown (words, -1);
  }

  {
    GtkBox *pull = pull_box_new (box, &row->progress);

    row->cancel = row_button (row, pull, _("_Cancel"), _("Stop the download; it resumes from here next time"),
                              G_CALLBACK (on_cancel_clicked));
    gtk_box_append (pull, GTK_WIDGET (row->progress));
  }
  /* Plain, not suggested-action: one suggested action per view at most
   * (GNOME HIG), and a list of blue buttons suggests nothing. */
  row->download = row_button (row, box, _("_Download"), NULL, G_CALLBACK (on_download_clicked));
  row->remove = row_button (row, box, _("_Remove"), NULL, G_CALLBACK (on_remove_clicked));
  row->use = row_button (row, box, _("_Use"), _("Load this model"), G_CALLBACK (on_use_clicked));
  if (with_variant)
    adw_expander_row_add_action (ADW_EXPANDER_ROW (row->row), GTK_WIDGET (box));
  else
    adw_action_row_add_suffix (ADW_ACTION_ROW (row->row), GTK_WIDGET (box));
  row_place_buttons (row->row, GTK_WIDGET (box), self->narrow);
  add_failure_label (row, box);
  if (parent != NULL)
    {
      parent->variant = row;
      adw_expander_row_add_row (ADW_EXPANDER_ROW (parent->row), row->row);
    }
  else
    adw_preferences_group_add (group, row->row);

  g_hash_table_replace (self->rows, row->tag, row);
  update_row (row);
  return row;
}

static char *
state_text (Row            *row,
            TernModelState  state)
{
  TernModelManager *self = row->self;

  if (tern_downloader_is_pulling (self->downloader, row->tag))
    return g_strdup (_("downloading"));
  switch (state)
    {
    case TERN_MODEL_STATE_INSTALLED:
      return g_strdup (_("installed"));
    case TERN_MODEL_STATE_BROKEN:
      return g_strdup (_("damaged: download it again"));
    case TERN_MODEL_STATE_PARTIAL:
      {
        guint64 total = tern_catalog_tag_size (row->catalog_tag);
        guint64 missing = tern_model_store_get_missing_bytes (self->store, row->catalog_tag);
        int percent = total > 0 && missing <= total ? (int) (100.0 * (double) (total - missing) / (double) total) : 0;

        /* A failure has its sentence under the row; a cancel has none, and
         * "40% downloaded" alone beside Resume read as a download that
         * broke off for no reason given. */
        if (g_hash_table_contains (self->stopped, row->tag)
            || tern_model_store_get_download_stopped (self->store, row->catalog_tag))
          /* Translators: a download the user cancelled, "40% downloaded, stopped by you" */
          return g_strdup_printf (_("%d%% downloaded, stopped by you"), percent);
        /* Translators: a paused download, "40% downloaded" */
        return g_strdup_printf (_("%d%% downloaded"), percent);
      }
    case TERN_MODEL_STATE_AVAILABLE:
    default:
      if (row->catalog_tag != NULL && !tern_catalog_tag_supported (row->catalog_tag))
        return tern_catalog_tag_unsupported_reason (row->catalog_tag);
      if (row->catalog_tag != NULL && !tern_catalog_tag_size_known (row->catalog_tag))
        return g_strdup (_("available, size unknown"));
      if (row->catalog_tag != NULL && tern_model_store_get_missing_bytes (self->store, row->catalog_tag) == 0)
        return g_strdup (_("available, nothing new to download"));
      return g_strdup (_("available"));
    }
}

/* The memory hint: the files plus the KV cache at the context the app
 * would give the model (tern_context_auto), against the memory free now.
 * kv 0 (not known): the files alone, as a lower bound. NULL when a figure is
 * missing. */
static char *
fit_sentence (TernModelManager *self,
              guint64           files,
              int               n_ctx_train,
              guint64           kv)
{
  guint64 need = 0;
  int n_ctx = 0;
  TernContextFit fit;
  g_autofree char *need_text = NULL;
  g_autofree char *free_text = NULL;
  g_autofree char *detail = NULL;
  const char *verdict;

  fit = tern_context_fit (files, n_ctx_train, kv, self->mem_physical, self->mem_available, &need, &n_ctx);
  if (fit == TERN_CONTEXT_FIT_UNKNOWN)
    return NULL;
  need_text = tern_manager_format_size (need);
  free_text = tern_manager_format_size (self->mem_available);
  switch (fit)
    {
    case TERN_CONTEXT_FIT_YES:
      verdict = _("Fits in memory");
      break;
    case TERN_CONTEXT_FIT_TIGHT:
      verdict = _("Fits in memory, with little to spare");
      break;
    case TERN_CONTEXT_FIT_NO:
    case TERN_CONTEXT_FIT_UNKNOWN:
    default:
      verdict = _("Likely too big for the free memory");
      break;
    }
  if (n_ctx > 0)
    /* Translators: "about 1.2 GB with a 16,384-token context; 6.1 GB free";
     * %'d groups the digits as the locale does ("16.384" in German) */
    detail = g_strdup_printf (_("about %s with a %'d-token context; %s free"), need_text, n_ctx, free_text);
  else
    /* Translators: an imported model, whose context memory is not known: "at least 1.2 GB; 6.1 GB free" */
    detail = g_strdup_printf (_("at least %s; %s free"), need_text, free_text);
  /* Translators: the verdict and its figures, "Fits in memory (about
   * 1.2 GB with a 16,384-token context; 6.1 GB free)" (Chinese takes
   * full-width parentheses) */
  return g_strdup_printf (_("%s (%s)"), verdict, detail);
}

static char *
fit_text (Row *row)
{
  TernModelManager *self = row->self;
  guint64 files, kv = 0;
  int n_ctx_train = 0;

  if (row->catalog_tag != NULL)
    {
      files = tern_catalog_tag_size (row->catalog_tag);
      kv = row->catalog_tag->packages[TERN_PACKAGE_ROLE_BASE]->kv_bytes_per_token;
      n_ctx_train = (int) MIN (row->catalog_tag->context_length, G_MAXINT);
    }
  else
    files = tern_model_store_get_tag_size (self->store, row->tag);
  return fit_sentence (self, files, n_ctx_train, kv);
}

static void
update_row (Row *row)
{
  TernModelManager *self = row->self;
  TernModelState state = tern_model_store_get_state (self->store, row->tag, row->catalog_tag);
  gboolean pulling = tern_downloader_is_pulling (self->downloader, row->tag);
  gboolean installed = state == TERN_MODEL_STATE_INSTALLED;
  gboolean can_download = row->catalog_tag != NULL && !installed && !pulling;
  g_autofree char *size = NULL;
  g_autofree char *status = state_text (row, state);
  g_autofree char *subtitle = NULL;
  g_autofree char *fit = row->parent == NULL ? fit_text (row) : NULL;
  const char *error = g_hash_table_lookup (self->errors, row->tag);
  const char *failure = NULL;
  TernDownloadProgress progress;
  guint64 bytes;

  bytes = row->catalog_tag ? tern_catalog_tag_size (row->catalog_tag)
                           : tern_model_store_get_tag_size (self->store, row->tag);
  size = tern_manager_format_size (bytes);
  /* A store change updates, or makes again, every row: a running download's
   * row keeps its figures (the downloader's, as of now) instead of
   * "downloading" and an empty bar until the next tick. */
  if (!pulling || !tern_downloader_get_progress (self->downloader, row->tag, &progress))
    progress.total = progress.check_total = 0;
  if ((subtitle = progress_text (&progress)) == NULL)
    {
      failure = error != NULL ? error : state == TERN_MODEL_STATE_BROKEN ? status : NULL;
      if (failure != NULL)
        subtitle = g_strdup_printf ("%s · %s%s%s", row->tag, size, fit != NULL ? "\n" : "",
                                    fit != NULL ? fit : "");
      else
        subtitle = g_strdup_printf ("%s · %s · %s%s%s", row->tag, size, status, fit != NULL ? "\n" : "",
                                    fit != NULL ? fit : "");
    }
  row_set_subtitle (row, subtitle);
  gtk_label_set_text (GTK_LABEL (row->failure), failure != NULL ? failure : "");
  gtk_widget_set_visible (row->failure, failure != NULL);
  gtk_progress_bar_set_fraction (row->progress, progress_fraction (&progress));
  {
    const char *details = error != NULL ? g_hash_table_lookup (self->error_details, row->tag) : NULL;

    /* The description is on the row itself (row->description). */
    gtk_widget_set_tooltip_text (row->row, details);
  }

  gtk_widget_set_visible (GTK_WIDGET (row->progress), pulling);
  gtk_widget_set_visible (GTK_WIDGET (row->cancel), pulling);
  gtk_widget_set_visible (gtk_widget_get_parent (GTK_WIDGET (row->progress)), pulling);
  gtk_widget_set_visible (GTK_WIDGET (row->download), can_download);
  if (can_download)
    {
      gboolean nothing = tern_model_store_get_missing_bytes (self->store, row->catalog_tag) == 0;
      g_autofree char *tip = NULL;

      gtk_button_set_label (row->download, state == TERN_MODEL_STATE_BROKEN ? _("_Repair")
                                           : state == TERN_MODEL_STATE_PARTIAL ? _("_Resume")
                                           : nothing ? _("_Add") : _("_Download"));
      gtk_widget_set_sensitive (GTK_WIDGET (row->download), tern_catalog_tag_supported (row->catalog_tag));
      if (nothing)
        tip = g_strdup (_("Its files are already here (shared with another model)"));
      else
        {
          g_autofree char *missing = tern_manager_format_size (
            tern_model_store_get_missing_bytes (self->store, row->catalog_tag));

          tip = g_strdup_printf (_("Download %s"), missing);
        }
      gtk_widget_set_tooltip_text (GTK_WIDGET (row->download), tip);
    }
  gtk_widget_set_visible (GTK_WIDGET (row->remove), !pulling && state != TERN_MODEL_STATE_AVAILABLE);
  gtk_widget_set_visible (GTK_WIDGET (row->use), !pulling && installed);
  /* Two buttons side by side (Remove and Use, Resume and Remove) left a
   * 360 px window's row some 70 px for its words in German, eleven lines
   * with words cut in two; stacked, they take the wider one's width. A row
   * has three lines of words or more, about the height of two buttons.
   * Under the words (a narrow panel), they have the row's width: in a line. */
  gtk_orientable_set_orientation (GTK_ORIENTABLE (gtk_widget_get_parent (GTK_WIDGET (row->remove))),
                                  !self->narrow
                                  && gtk_widget_get_visible (GTK_WIDGET (row->download))
                                  + gtk_widget_get_visible (GTK_WIDGET (row->remove))
                                  + gtk_widget_get_visible (GTK_WIDGET (row->use)) > 1
                                  ? GTK_ORIENTATION_VERTICAL : GTK_ORIENTATION_HORIZONTAL);
}

static void
read_memory (TernModelManager *self)
{
  self->mem_physical = tern_context_physical_memory ();
  self->mem_available = tern_context_available_memory ();
}

static void
update_rows (TernModelManager *self)
{
  GHashTableIter iter;
  gpointer value;

  read_memory (self);
  g_hash_table_iter_init (&iter, self->rows);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    update_row (value);
  update_disk_label (self);
}

static void
clear_groups (TernModelManager *self)
{
  for (guint i = 0; i < self->groups->len; i++)
    gtk_box_remove (self->groups_box, self->groups->pdata[i]);
  g_ptr_array_set_size (self->groups, 0);
  g_hash_table_remove_all (self->rows);
  self->here_group = NULL;
}

static AdwPreferencesGroup *
add_group (TernModelManager *self,
           const char       *title,
           const char       *description)
{
  AdwPreferencesGroup *group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());

  adw_preferences_group_set_title (group, title);
  if (description != NULL)
    adw_preferences_group_set_description (group, description);
  gtk_box_append (self->groups_box, GTK_WIDGET (group));
  g_ptr_array_add (self->groups, group);
  return group;
}

/* The flash variant of a catalog tag: a single-turn tag of the same family
 * on the same base package. NULL when it has none, or is one itself. */
static const TernCatalogTag *
flash_variant_of (const TernCatalogTag *tag)
{
  GPtrArray *tags = tag->family->tags;

  if (tag->single_turn)
    return NULL;
  for (guint i = 0; i < tags->len; i++)
    {
      const TernCatalogTag *other = tags->pdata[i];

      if (other->single_turn
          && other->packages[TERN_PACKAGE_ROLE_BASE] == tag->packages[TERN_PACKAGE_ROLE_BASE])
        return other;
    }
  return NULL;
}

/* The model a flash tag is shown inside, or NULL when it stands alone. */
static const TernCatalogTag *
flash_model_of (const TernCatalogTag *tag)
{
  GPtrArray *tags = tag->family->tags;

  if (!tag->single_turn)
    return NULL;
  for (guint i = 0; i < tags->len; i++)
    if (flash_variant_of (tags->pdata[i]) == tag)
      return tags->pdata[i];
  return NULL;
}

/* Whether a model (with its flash variant) has anything on this computer:
 * installed, partly downloaded, damaged. Those are listed first. */
static gboolean
model_is_here (TernModelManager     *self,
               const TernCatalogTag *tag)
{
  const TernCatalogTag *variant = flash_variant_of (tag);

  return tern_model_store_get_state (self->store, tag->tag, tag) != TERN_MODEL_STATE_AVAILABLE
         || (variant != NULL
             && tern_model_store_get_state (self->store, variant->tag, variant) != TERN_MODEL_STATE_AVAILABLE);
}

/* The models listed first, as one string: when it changes, the list is
 * made again. */
static char *
here_key (TernModelManager *self)
{
  g_auto(GStrv) tags = tern_model_store_list_tags (self->store);
  g_autoptr(GString) key = g_string_new (NULL);
  GPtrArray *all = tern_catalog_get_tags (self->catalog);

  for (guint i = 0; i < all->len; i++)
    {
      const TernCatalogTag *tag = all->pdata[i];

      if (flash_model_of (tag) == NULL && model_is_here (self, tag))
        g_string_append_printf (key, "%s\n", tag->tag);
    }
  for (char **t = tags; *t; t++)
    if (tern_catalog_find_tag (self->catalog, *t) == NULL)
      g_string_append_printf (key, "%s\n", *t);
  return g_string_free (g_steal_pointer (&key), FALSE);
}

static AdwPreferencesGroup *
here_group (TernModelManager *self)
{
  if (self->here_group == NULL)
    self->here_group = add_group (self, _("On This Computer"),
                                  _("Installed and partly downloaded models, and models imported from files"));
  return self->here_group;
}

static void
add_model (TernModelManager     *self,
           AdwPreferencesGroup  *group,
           const TernCatalogTag *tag)
{
  const TernCatalogTag *variant = flash_variant_of (tag);
  Row *row = add_row (self, group, tag->tag, tag, NULL, variant != NULL);

  if (variant != NULL)
    add_row (self, group, variant->tag, variant, row, FALSE);
}

/* Installed and partial models first (GNOME Software lists what is
 * installed apart), then the rest of the catalog by family; flash variants
 * inside their model's row. */
static void
rebuild (TernModelManager *self)
{
  g_auto(GStrv) tags = NULL;
  GPtrArray *families;

  clear_groups (self);
  g_clear_pointer (&self->here_key, g_free);
  if (self->catalog == NULL || self->store == NULL)
    return;
  read_memory (self);
  gtk_stack_set_visible_child_name (self->stack, "list");
  families = tern_catalog_get_families (self->catalog);
  self->here_key = here_key (self);
  for (guint f = 0; f < families->len; f++)
    {
      const TernCatalogFamily *family = families->pdata[f];

      for (guint t = 0; t < family->tags->len; t++)
        {
          const TernCatalogTag *tag = family->tags->pdata[t];

          if (flash_model_of (tag) == NULL && model_is_here (self, tag))
            add_model (self, here_group (self), tag);
        }
    }
  tags = tern_model_store_list_tags (self->store);
  for (char **t = tags; *t; t++)
    if (tern_catalog_find_tag (self->catalog, *t) == NULL)
      add_row (self, here_group (self), *t, NULL, NULL, FALSE);
  for (guint f = 0; f < families->len; f++)
    {
      const TernCatalogFamily *family = families->pdata[f];
      AdwPreferencesGroup *group = NULL;

      for (guint t = 0; t < family->tags->len; t++)
        {
          const TernCatalogTag *tag = family->tags->pdata[t];

          if (flash_model_of (tag) != NULL || model_is_here (self, tag))
            continue;
          if (group == NULL)
            group = add_group (self, family->label, tern_catalog_text (family->description));
          add_model (self, group, tag);
        }
    }
  /* The Hub's results come after everything the catalog has. */
  if (self->hub_group != NULL)
    gtk_box_reorder_child_after (self->groups_box, GTK_WIDGET (self->hub_group),
                                 gtk_widget_get_last_child (GTK_WIDGET (self->groups_box)));
  update_disk_label (self);
  apply_filter (self);
}

static void
show_error_page (TernModelManager *self,
                 const char       *message)
{
  clear_groups (self);
  adw_status_page_set_description (self->error_page, message);
  gtk_stack_set_visible_child_name (self->stack, "error");
  gtk_widget_set_sensitive (GTK_WIDGET (self->import_button), self->store != NULL);
  gtk_widget_set_sensitive (GTK_WIDGET (self->check_button), self->store != NULL);
}

/* ---- store and downloader signals ------------------------------------------ */

static void
on_store_changed (TernModelManager *self)
{
  g_autofree char *key = NULL;

  if (self->catalog == NULL || self->store == NULL)
    return;
  key = here_key (self);
  if (g_strcmp0 (key, self->here_key) != 0)
    {
      rebuild (self);
      hub_update_rows (self);
      return;
    }
  update_rows (self);
  hub_update_rows (self);
  apply_filter (self);
}

static void
on_progress (TernDownloader   *downloader,
             const char       *tag,
             guint64           done,
             guint64           total,
             double            rate,
             double            eta,
             TernModelManager *self)
{
  Row *row = g_hash_table_lookup (self->rows, tag);
  TernDownloadProgress progress = { done, total, rate, eta, 0, 0 };
  TernDownloadProgress now;
  g_autofree char *text = NULL;

  /* The signal has no room for the check's figures. */
  if (tern_downloader_get_progress (downloader, tag, &now))
    {
      progress.checked = now.checked;
      progress.check_total = now.check_total;
    }
  if (row == NULL && total > 0 && self->hub_rows != NULL)
    {
      HubQuantRow *qr = g_hash_table_lookup (self->hub_rows, tag);

      if (qr == NULL)
        return;
      if (!gtk_widget_get_visible (GTK_WIDGET (qr->progress)) || qr->resolving)
        {
          qr->resolving = FALSE;
          hub_update_quant_row (qr);
        }
      gtk_progress_bar_set_fraction (qr->progress, progress_fraction (&progress));
      return;
    }
  if (row == NULL || total == 0)
    return;
  if (!gtk_widget_get_visible (GTK_WIDGET (row->progress)))
    update_row (row);
  gtk_progress_bar_set_fraction (row->progress, progress_fraction (&progress));
  text = progress_text (&progress);
  row_set_subtitle (row, text);
}

static void note_pull_error (TernModelManager *self,
                             const char       *tag,
                             gboolean          hub,
                             const GError     *error);

static void
on_pull_finished (TernDownloader   *downloader,
                  const char       *tag,
                  const char       *error_message,
                  const GError     *error,
                  TernModelManager *self)
{
  Row *row = g_hash_table_lookup (self->rows, tag);
  HubQuantRow *qr = self->hub_rows != NULL ? g_hash_table_lookup (self->hub_rows, tag) : NULL;

  (void) downloader;
  (void) error_message;
  if (row == NULL && qr == NULL)
    return;
  g_hash_table_remove (self->errors, tag);
  g_hash_table_remove (self->error_details, tag);
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    g_hash_table_add (self->stopped, g_strdup (tag));
  else
    g_hash_table_remove (self->stopped, tag);
  /* Kept with the partial files too, so that a restart still says why
   * (docs/APP.md); the panel's own record covers this run if it cannot be
   * written. */
  if (row != NULL && row->catalog_tag != NULL)
    {
      g_autoptr(GError) local_error = NULL;

      if (!tern_model_store_set_download_stopped (self->store, row->catalog_tag,
                                                  g_hash_table_contains (self->stopped, tag),
                                                  &local_error))
        g_message ("%s", local_error->message);
    }
  /* The signal has the error the pull's answer brings next: the row goes
   * from its progress straight to what failed. With the message alone it
   * said "Download failed. Point at this row…" until the answer came. A
   * pull started elsewhere (another window) has its answer there. */
  if (error != NULL)
    note_pull_error (self, tag, row == NULL, error);
  if (qr != NULL)
    hub_update_quant_row (qr);
  /* A stopped or failed download leaves a partial file, which the store
   * does not announce: the model now belongs among those on this
   * computer, as it is listed after a restart. */
  on_store_changed (self);
}

static void
show_offline (TernModelManager *self,
              const char       *details)
{
  gboolean any = g_hash_table_size (self->offline) > 0;

  /* One sentence a person can act on; the URL and the resolver's words stay
   * out of sight, in the tooltip, for whoever asks. */
  if (details != NULL && self->retried_at != 0
      && g_get_real_time () - self->retried_at < 60 * G_USEC_PER_SEC)
    {
      /* Retry failed again at once: the same words would look as though
       * nothing had been tried. */
      g_autoptr(GDateTime) when = g_date_time_new_from_unix_local (self->retried_at / G_USEC_PER_SEC);
      g_autofree char *time = g_date_time_format (when, "%X");
      /* Translators: %s is the time of day of the last try */
      g_autofree char *text = g_strdup_printf (_("Tern still cannot reach the download server (tried again at %s). "
                                                 "Check that this computer is online, then try again."),
                                               time);

      gtk_label_set_text (self->offline_label, text);
    }
  else
    gtk_label_set_text (self->offline_label,
                        _("Tern cannot reach the download server. Check that this computer is online, "
                          "then try again."));
  if (details != NULL)
    gtk_widget_set_tooltip_text (GTK_WIDGET (self->offline_label), details);
  gtk_revealer_set_reveal_child (self->offline_revealer, any);
}

/* What a failed download says on its row; error NULL: a failure known by
 * the downloader's words alone. The downloader's own words (the file, the
 * URL, two sha256 sums) filled the row with twenty lines at a narrow width
 * and named the tag twice; they stay in the tooltip. NULL: nothing to say
 * (a cancel the user asked for). */
static const char *
download_failure_sentence (const GError *error)
{
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return NULL;
  if (error == NULL || error->domain != TERN_MANAGER_ERROR)
    return _("Download failed. Point at this row for the details.");
  switch (error->code)
    {
    case TERN_MANAGER_ERROR_HTTP:
      return _("Download failed: the server did not send the file. Try again later.");
    case TERN_MANAGER_ERROR_NETWORK:
      return _("Download failed: the connection broke off. Try again to go on from where it stopped.");
    case TERN_MANAGER_ERROR_CHECKSUM:
      return _("Download failed: the file arrived damaged and was deleted. Download it again.");
    case TERN_MANAGER_ERROR_SIZE:
      return _("Download failed: the server’s file is not the size expected. Try again later.");
    case TERN_MANAGER_ERROR_IO:
      return _("Download failed: Tern cannot write to the models folder.");
    case TERN_MANAGER_ERROR_NO_SPACE:
      return _("Download failed: there is not enough free disk space. Free some space, then try again.");
    case TERN_MANAGER_ERROR_BUSY:
      return _("Not downloaded: this model is being downloaded already.");
    case TERN_MANAGER_ERROR_APP_TOO_OLD:
      return _("Not downloaded: this model needs a newer version of Tern.");
    default:
      return _("Download failed. Point at this row for the details.");
    }
}

/* The one writer of a failed download's row words, whichever tells of the
 * failure: the row has a sentence, the tooltip the details. */
static void
note_failure (TernModelManager *self,
              const char       *key,
              const GError     *error,
              const char       *details)
{
  const char *sentence = download_failure_sentence (error);

  if (sentence == NULL)
    {
      g_hash_table_remove (self->errors, key);
      g_hash_table_remove (self->error_details, key);
      return;
    }
  g_hash_table_replace (self->errors, g_strdup (key), g_strdup (sentence));
  g_hash_table_replace (self->error_details, g_strdup (key), g_strdup (details));
}

static const char *hub_failure_sentence (const GError *error);

/* A pull's error, from "pull-finished" or from the pull's answer (which
 * alone tells of a pull refused before it starts); both say the same, so
 * the second changes nothing. An unreachable server is said once, above
 * the list, with Retry, instead of on a catalog model's row; a found
 * quantization has no such banner and says it on its row. */
static void
note_pull_error (TernModelManager *self,
                 const char       *tag,
                 gboolean          hub,
                 const GError     *error)
{
  if (!g_error_matches (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_OFFLINE))
    note_failure (self, tag, error, error->message);
  else if (hub)
    g_hash_table_replace (self->errors, g_strdup (tag), g_strdup (hub_failure_sentence (error)));
  else
    {
      g_hash_table_remove (self->errors, tag);
      g_hash_table_add (self->offline, g_strdup (tag));
      show_offline (self, error->message);
    }
}

static void
pull_done (GObject      *source,
           GAsyncResult *result,
           gpointer      data)
{
  TagRef *pending = data;
  g_autoptr(TernModelManager) self = g_weak_ref_get (&pending->self);
  g_autoptr(GError) error = NULL;

  if (!tern_downloader_pull_finish (TERN_DOWNLOADER (source), result, &error) && self != NULL)
    {
      Row *row = g_hash_table_lookup (self->rows, pending->tag);

      note_pull_error (self, pending->tag, FALSE, error);
      if (row != NULL)
        update_row (row);
    }
  tag_ref_free (pending);
}

void
tern_model_manager_retry (TernModelManager *self)
{
  g_autofree gpointer *keys = NULL;
  g_auto(GStrv) tags = NULL;

  g_return_if_fail (TERN_IS_MODEL_MANAGER (self));
  keys = g_hash_table_get_keys_as_array (self->offline, NULL);
  tags = g_strdupv ((char **) keys);
  g_hash_table_remove_all (self->offline);
  self->retried_at = g_get_real_time ();
  show_offline (self, NULL);
  for (guint i = 0; tags[i] != NULL; i++)
    tern_model_manager_download (self, tags[i]);
}

const char *
tern_model_manager_get_offline_message (TernModelManager *self)
{
  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  if (!gtk_revealer_get_reveal_child (self->offline_revealer))
    return NULL;
  return gtk_label_get_text (self->offline_label);
}

void
tern_model_manager_download (TernModelManager *self,
                             const char       *tag)
{
  TagRef *pending;
  Row *row;

  g_return_if_fail (TERN_IS_MODEL_MANAGER (self));
  row = tag ? g_hash_table_lookup (self->rows, tag) : NULL;
  if (row == NULL && tag != NULL && self->hub_rows != NULL && self->downloader != NULL)
    {
      HubQuantRow *qr = g_hash_table_lookup (self->hub_rows, tag);

      if (qr != NULL)
        hub_download (self, qr);
      return;
    }
  if (row == NULL || self->catalog == NULL || self->downloader == NULL
      || tern_downloader_is_pulling (self->downloader, tag))
    return;
  g_hash_table_remove (self->errors, tag);
  pending = g_new0 (TagRef, 1);
  g_weak_ref_init (&pending->self, self);
  pending->tag = g_strdup (tag);
  tern_downloader_pull_async (self->downloader, self->catalog, tag, NULL, pull_done, pending);
  /* Show it as running right away. A pull refused before it starts (no
   * room, a newer Tern needed) sends no pull-finished: pull_done says why. */
  update_row (row);
}

void
tern_model_manager_cancel (TernModelManager *self,
                           const char       *tag)
{
  g_return_if_fail (TERN_IS_MODEL_MANAGER (self));
  if (self->downloader != NULL)
    tern_downloader_cancel (self->downloader, tag);
}

/* Whether this process maps PATH: the engine maps a model for as long as
 * it is loaded (engine/gguf.c), and a file removed while mapped keeps its
 * blocks until it is closed. */
static gboolean
mapped_here (const char *path)
{
  g_autofree char *maps = NULL;
  char *real;
  gboolean found = FALSE;

  if (path == NULL || (real = realpath (path, NULL)) == NULL)
    return FALSE;
  if (g_file_get_contents ("/proc/self/maps", &maps, NULL, NULL))
    for (char *line = maps; !found && line != NULL && *line != '\0';)
      {
        char *end = strchr (line, '\n');
        char *name;

        if (end != NULL)
          *end = '\0';
        /* The file's name is the last field, the only one that starts
         * with a slash. */
        name = strchr (line, '/');
        found = name != NULL && strcmp (name, real) == 0;
        line = end != NULL ? end + 1 : NULL;
      }
  free (real);
  return found;
}

gboolean
tern_model_manager_remove (TernModelManager  *self,
                           const char        *tag,
                           GError           **error)
{
  Row *row;
  guint64 freed = 0;
  g_autofree char *path = NULL;
  gboolean loaded, local;

  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), FALSE);
  g_return_val_if_fail (tag != NULL, FALSE);
  if (self->store == NULL)
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IO, _("No model store"));
      return FALSE;
    }
  row = g_hash_table_lookup (self->rows, tag);
  if (self->downloader != NULL && tern_downloader_is_pulling (self->downloader, tag))
    {
      g_set_error (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_BUSY,
                   _("%s is being downloaded: cancel it first"), tag);
      return FALSE;
    }
  path = tern_model_store_get_path (self->store, tag, TERN_PACKAGE_ROLE_BASE);
  loaded = mapped_here (path);
  local = tern_model_store_is_local (self->store, tag);
  if (!tern_model_store_remove (self->store, tag, row ? row->catalog_tag : NULL, &freed, error))
    return FALSE;
  /* An imported model's file is the user's and stays: "(0 bytes freed)"
   * read as if it had been deleted, or as a failure to. */
  if (local)
    {
      g_autofree char *text = g_strdup_printf (_("Removed %s from the list. The file itself is not deleted."),
                                               tag);

      set_message (self, text, FALSE);
      return TRUE;
    }
  {
    g_autofree char *size = tern_manager_format_size (freed);
    /* Loaded, its space is not free yet: "freed" was not true until then. */
    g_autofree char *text = loaded && freed > 0
      /* Translators: a model removed while it is loaded: its name, then
       * its size ("4.1 GB") */
      ? g_strdup_printf (_("Removed %s. It is still loaded: its %s are freed when another model is loaded or Tern is closed."),
                         tag, size)
      : g_strdup_printf (_("Removed %s (%s freed)."), tag, size);

    set_message (self, text, FALSE);
  }
  return TRUE;
}

gboolean
tern_model_manager_use (TernModelManager *self,
                        const char       *tag)
{
  g_autofree char *path = NULL;

  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), FALSE);
  if (self->store == NULL || tern_model_store_get_state (self->store, tag, NULL) != TERN_MODEL_STATE_INSTALLED)
    return FALSE;
  path = tern_model_store_get_path (self->store, tag, TERN_PACKAGE_ROLE_BASE);
  if (path == NULL)
    return FALSE;
  g_signal_emit (self, signals[SIGNAL_USE_MODEL], 0, path, tag);
  return TRUE;
}

/* ---- remote models ---------------------------------------------------------- */

static void
on_remote_use (GtkButton *button,
               gpointer   data)
{
  TernModelManager *self = data;
  const char *ref = g_object_get_data (G_OBJECT (button), "tern-ref");

  g_signal_emit (self, signals[SIGNAL_USE_MODEL], 0, ref, ref);
}

/* A server's model (REF), or the server itself that could not list its
 * models (REF NULL: FAILURE says why). */
static void
remote_row (TernModelManager *self,
            const char       *title,
            const char       *subtitle,
            const char       *ref,
            const char       *failure)
{
  GtkWidget *row = adw_action_row_new ();
  g_autofree char *t = g_markup_escape_text (title, -1);
  g_autofree char *st = g_markup_escape_text (subtitle != NULL ? subtitle : "", -1);

  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), t);
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), st);
  if (ref != NULL)
    {
      GtkWidget *use = gtk_button_new_with_mnemonic (_("_Use"));

      gtk_widget_set_valign (use, GTK_ALIGN_CENTER);
      gtk_widget_set_tooltip_text (use, _("Use this model on its server"));
      g_object_set_data_full (G_OBJECT (use), "tern-ref", g_strdup (ref), g_free);
      g_signal_connect (use, "clicked", G_CALLBACK (on_remote_use), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), use);
    }
  else
    /* Only the failure in red: the whole row was, the server's address
     * too, unlike a failed download's row. */
    tern_row_set_failure (row, NULL, failure);
  adw_preferences_group_add (self->remote_group, row);
  g_ptr_array_add (self->remote_rows, row);
}

typedef struct {
  TernModelManager *self;
  char *url;
} RemoteListing;

static void
on_remote_models (GObject      *source,
                  GAsyncResult *result,
                  gpointer      data)
{
  RemoteListing *l = data;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) models = tern_connections_list_models_finish (result, &error);

  (void) source;
  if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED) && l->self->remote_group != NULL)
    {
      /* Translators: the subtitle of a model served by another machine */
      g_autofree char *shown = tern_remote_url_shown (l->url);
      g_autofree char *where = g_strdup_printf (_("Remote · %s"), shown);

      if (models == NULL)
        remote_row (l->self, shown, NULL, NULL, error->message);
      for (guint i = 0; models != NULL && models[i] != NULL; i++)
        {
          g_autofree char *ref = tern_remote_ref_new (l->url, models[i]);
          remote_row (l->self, models[i], where, ref, NULL);
        }
    }
  g_object_unref (l->self);
  g_free (l->url);
  g_free (l);
}

static void
list_remote (TernModelManager *self)
{
  g_auto(GStrv) urls = NULL;

  for (guint i = 0; i < self->remote_rows->len; i++)
    adw_preferences_group_remove (self->remote_group, self->remote_rows->pdata[i]);
  g_ptr_array_set_size (self->remote_rows, 0);
  urls = g_settings_get_strv (self->settings, "remote-connections");
  gtk_widget_set_visible (GTK_WIDGET (self->remote_group), urls[0] != NULL);
  for (guint i = 0; urls[i] != NULL; i++)
    {
      RemoteListing *l = g_new0 (RemoteListing, 1);

      l->self = g_object_ref (self);
      l->url = g_strdup (urls[i]);
      tern_connections_list_models_async (urls[i], self->cancellable, on_remote_models, l);
    }
}

void
tern_model_manager_set_settings (TernModelManager *self,
                                 GSettings        *settings)
{
  g_return_if_fail (TERN_IS_MODEL_MANAGER (self));
  if (self->settings != NULL)
    {
      list_remote (self); /* presented again: the servers may have changed */
      return;
    }
  self->settings = g_object_ref (settings);
  self->remote_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->remote_group, _("Remote"));
  adw_preferences_group_set_description (self->remote_group,
                                         _("Models of the servers in Preferences › Connections"));
  gtk_box_prepend (self->groups_box, GTK_WIDGET (self->remote_group));
  self->remote_rows = g_ptr_array_new ();
  g_signal_connect_object (settings, "changed::remote-connections", G_CALLBACK (list_remote), self,
                           G_CONNECT_SWAPPED);
  list_remote (self);
}

/* ---- Hugging Face search ------------------------------------------------------ */

/* An answer that may come after the panel is gone or its search replaced. */
typedef struct {
  GWeakRef  self;
  guint     generation;
  char     *key;   /* the repository's id, or the tag being resolved */
} HubPending;

static HubPending *
hub_pending_new (TernModelManager *self,
                 const char       *key)
{
  HubPending *p = g_new0 (HubPending, 1);

  g_weak_ref_init (&p->self, self);
  p->generation = self->hub_generation;
  p->key = g_strdup (key);
  return p;
}

static void
hub_pending_free (HubPending *p)
{
  g_weak_ref_clear (&p->self);
  g_free (p->key);
  g_free (p);
}

static void
hub_quant_row_free (HubQuantRow *qr)
{
  g_free (qr);
}

static void
hub_result_free (HubResult *r)
{
  g_ptr_array_unref (r->children);
  g_ptr_array_unref (r->quant_rows);
  g_clear_pointer (&r->repo, tern_hub_repo_free);
  g_free (r->id);
  g_free (r);
}

/* The sentence a failure is shown as; the words of the error itself stay in
 * the tooltip, for whoever asks. */
static const char *
hub_failure_sentence (const GError *error)
{
  if (g_error_matches (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_OFFLINE))
    return _("Tern cannot reach Hugging Face. Check that this computer is online, then try again.");
  return _("Hugging Face did not answer as expected. Try again later.");
}

/* The digits grouped as the user's locale groups them. */
static char *
format_count (guint64 n)
{
  return g_strdup_printf ("%'" G_GUINT64_FORMAT, n);
}

static gulong
plural_n (guint64 n)
{
  return (gulong) MIN (n, (guint64) G_MAXULONG);
}

static void
hub_result_set_subtitle (HubResult *r)
{
  g_autofree char *count = format_count (r->downloads);
  g_autofree char *likes_count = format_count (r->likes);
  g_autofree char *downloads = NULL;
  g_autofree char *likes = NULL;
  g_autofree char *text = NULL;

  /* Translators: the Hub counts the downloads of the last 30 days */
  downloads = g_strdup_printf (ngettext ("%s download last month", "%s downloads last month",
                                         plural_n (r->downloads)), count);
  likes = g_strdup_printf (ngettext ("%s like", "%s likes", plural_n (r->likes)), likes_count);
  if (r->gated)
    /* Translators: a repository whose files need an access token */
    text = g_strdup_printf ("%s · %s · %s", downloads, likes, _("gated"));
  else
    text = g_strdup_printf ("%s · %s", downloads, likes);
  adw_expander_row_set_subtitle (ADW_EXPANDER_ROW (r->row), text);
  gtk_widget_set_visible (r->gated_icon, r->gated);
}

static void
hub_result_clear_children (HubResult *r)
{
  TernModelManager *self = r->self;

  for (guint i = 0; i < r->quant_rows->len; i++)
    {
      HubQuantRow *qr = r->quant_rows->pdata[i];

      if (qr->quant->tag != NULL && g_hash_table_lookup (self->hub_rows, qr->quant->tag) == qr)
        g_hash_table_remove (self->hub_rows, qr->quant->tag);
    }
  g_ptr_array_set_size (r->quant_rows, 0);
  for (guint i = 0; i < r->children->len; i++)
    adw_expander_row_remove (ADW_EXPANDER_ROW (r->row), r->children->pdata[i]);
  g_ptr_array_set_size (r->children, 0);
}

/* A row inside a repository's that says something (loading, failed, none). */
static GtkWidget *
hub_result_add_note (HubResult  *r,
                     const char *text,
                     const char *details,
                     gboolean    busy)
{
  GtkWidget *row = adw_action_row_new ();

  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), text);
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (row), FALSE);
  if (details != NULL)
    gtk_widget_set_tooltip_text (row, details);
  if (busy)
    {
      GtkWidget *spinner = gtk_spinner_new ();

      gtk_spinner_start (GTK_SPINNER (spinner));
      adw_action_row_add_prefix (ADW_ACTION_ROW (row), spinner);
    }
  adw_expander_row_add_row (ADW_EXPANDER_ROW (r->row), row);
  g_ptr_array_add (r->children, row);
  return row;
}

static void hub_load_quants (HubResult *r);

static void
on_hub_quants_retry (GtkButton *button,
                     HubResult *r)
{
  (void) button;
  hub_load_quants (r);
}

static void
on_hub_download_clicked (GtkButton   *button,
                         HubQuantRow *qr)
{
  (void) button;
  if (qr->quant->tag != NULL)
    tern_model_manager_download (qr->result->self, qr->quant->tag);
}

static void
on_hub_cancel_clicked (GtkButton   *button,
                       HubQuantRow *qr)
{
  (void) button;
  if (qr->quant->tag != NULL)
    tern_model_manager_cancel (qr->result->self, qr->quant->tag);
}

static void
on_hub_use_clicked (GtkButton   *button,
                    HubQuantRow *qr)
{
  (void) button;
  if (qr->quant->tag != NULL)
    tern_model_manager_use (qr->result->self, qr->quant->tag);
}

static GtkButton *
hub_row_button (GtkBox      *box,
                const char  *label,
                const char  *tooltip,
                GCallback    callback,
                HubQuantRow *qr)
{
  GtkButton *button = GTK_BUTTON (gtk_button_new_with_mnemonic (label));

  gtk_widget_set_valign (GTK_WIDGET (button), GTK_ALIGN_CENTER);
  if (tooltip != NULL)
    gtk_widget_set_tooltip_text (GTK_WIDGET (button), tooltip);
  g_signal_connect (button, "clicked", callback, qr);
  gtk_box_append (box, GTK_WIDGET (button));
  return button;
}

static void
hub_add_quant_row (HubResult    *r,
                   TernHubQuant *quant)
{
  TernModelManager *self = r->self;
  HubQuantRow *qr = g_new0 (HubQuantRow, 1);
  GtkBox *box = GTK_BOX (gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6));

  qr->result = r;
  qr->quant = quant;
  qr->row = adw_action_row_new ();
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (qr->row), quant->name);
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (qr->row), FALSE);
  {
    GtkBox *pull = pull_box_new (box, &qr->progress);

    qr->cancel = hub_row_button (pull, _("_Cancel"), _("Stop the download; it resumes from here next time"),
                                 G_CALLBACK (on_hub_cancel_clicked), qr);
    gtk_box_append (pull, GTK_WIDGET (qr->progress));
  }
  /* Plain buttons, as the catalog's (GNOME HIG: no row of blue buttons). */
  qr->download = hub_row_button (box, _("_Download"), NULL, G_CALLBACK (on_hub_download_clicked), qr);
  qr->use = hub_row_button (box, _("_Use"), _("Load this model"), G_CALLBACK (on_hub_use_clicked), qr);
  adw_action_row_add_suffix (ADW_ACTION_ROW (qr->row), GTK_WIDGET (box));
  row_place_buttons (qr->row, GTK_WIDGET (box), self->narrow);
  adw_expander_row_add_row (ADW_EXPANDER_ROW (r->row), qr->row);
  g_ptr_array_add (r->children, qr->row);
  g_ptr_array_add (r->quant_rows, qr);
  if (quant->tag != NULL)
    g_hash_table_replace (self->hub_rows, quant->tag, qr);
  hub_update_quant_row (qr);
}

static HubResult *
hub_find_result (TernModelManager *self,
                 const char       *id)
{
  for (guint i = 0; self->hub_results != NULL && i < self->hub_results->len; i++)
    {
      HubResult *r = self->hub_results->pdata[i];

      if (g_str_equal (r->id, id))
        return r;
    }
  return NULL;
}

static void
on_hub_quants (GObject      *source,
               GAsyncResult *result,
               gpointer      data)
{
  HubPending *pending = data;
  g_autoptr(TernModelManager) self = g_weak_ref_get (&pending->self);
  g_autoptr(GError) error = NULL;
  g_autoptr(TernHubRepo) repo = tern_hub_list_quants_finish (result, &error);
  HubResult *r;

  (void) source;
  if (self == NULL || pending->generation != self->hub_generation
      || (r = hub_find_result (self, pending->key)) == NULL)
    {
      hub_pending_free (pending);
      return;
    }
  hub_pending_free (pending);
  r->loading = FALSE;
  hub_result_clear_children (r);
  if (repo == NULL)
    {
      GtkWidget *note;
      GtkWidget *retry;

      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return;
      /* A gated repository without a token says so in its own words. */
      if (g_error_matches (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_HTTP) && strstr (error->message, "HF_TOKEN"))
        note = hub_result_add_note (r, _("This repository is gated: accept its terms on Hugging Face, then set "
                                         "HF_TOKEN to an access token and start Tern again."),
                                    error->message, FALSE);
      else
        note = hub_result_add_note (r, hub_failure_sentence (error), error->message, FALSE);
      gtk_widget_add_css_class (note, "error");
      retry = gtk_button_new_with_mnemonic (_("_Retry"));
      gtk_widget_set_valign (retry, GTK_ALIGN_CENTER);
      g_signal_connect (retry, "clicked", G_CALLBACK (on_hub_quants_retry), r);
      adw_action_row_add_suffix (ADW_ACTION_ROW (note), retry);
      return;
    }
  r->loaded = TRUE;
  r->gated |= repo->gated;
  hub_result_set_subtitle (r);
  g_clear_pointer (&r->repo, tern_hub_repo_free);
  r->repo = g_steal_pointer (&repo);
  read_memory (self);
  if (r->repo->quants->len == 0)
    hub_result_add_note (r, _("This repository has no GGUF model files."), NULL, FALSE);
  for (guint i = 0; i < r->repo->quants->len; i++)
    hub_add_quant_row (r, r->repo->quants->pdata[i]);
}

static void
hub_load_quants (HubResult *r)
{
  TernModelManager *self = r->self;

  if (r->loading)
    return;
  r->loading = TRUE;
  hub_result_clear_children (r);
  hub_result_add_note (r, _("Asking Hugging Face for the files…"), NULL, TRUE);
  tern_hub_list_quants_async (r->id, self->hub_cancellable, on_hub_quants, hub_pending_new (self, r->id));
}

static void
on_hub_expanded (GObject    *row,
                 GParamSpec *pspec,
                 HubResult  *r)
{
  (void) pspec;
  if (adw_expander_row_get_expanded (ADW_EXPANDER_ROW (row)) && !r->loaded)
    hub_load_quants (r);
}

static void
hub_add_result (TernModelManager   *self,
                const TernHubModel *model)
{
  HubResult *r = g_new0 (HubResult, 1);

  r->self = self;
  r->id = g_strdup (model->id);
  r->gated = model->gated;
  r->downloads = model->downloads;
  r->likes = model->likes;
  r->children = g_ptr_array_new ();
  r->quant_rows = g_ptr_array_new_with_free_func ((GDestroyNotify) hub_quant_row_free);
  r->row = adw_expander_row_new ();
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (r->row), model->id);
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (r->row), FALSE);
  r->gated_icon = gtk_image_new_from_icon_name ("changes-prevent-symbolic");
  gtk_widget_set_tooltip_text (r->gated_icon, _("Gated: its files need an access token. Accept the repository's "
                                                "terms on Hugging Face, then set HF_TOKEN."));
  adw_expander_row_add_action (ADW_EXPANDER_ROW (r->row), r->gated_icon);
  hub_result_set_subtitle (r);
  g_signal_connect (r->row, "notify::expanded", G_CALLBACK (on_hub_expanded), r);
  adw_preferences_group_add (self->hub_group, r->row);
  g_ptr_array_add (self->hub_results, r);
}

static void
hub_clear_results (TernModelManager *self)
{
  g_hash_table_remove_all (self->hub_rows);
  for (guint i = 0; i < self->hub_results->len; i++)
    adw_preferences_group_remove (self->hub_group, ((HubResult *) self->hub_results->pdata[i])->row);
  g_ptr_array_set_size (self->hub_results, 0);
}

static void
hub_set_status (TernModelManager *self,
                const char       *text,
                const char       *icon,
                const char       *details,
                gboolean          retry)
{
  gboolean busy = text != NULL && icon == NULL;

  gtk_widget_set_visible (GTK_WIDGET (self->hub_status), text != NULL);
  if (text == NULL)
    return;
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->hub_status), text);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->hub_status), details);
  gtk_widget_set_visible (GTK_WIDGET (self->hub_status_icon), icon != NULL);
  if (icon != NULL)
    gtk_image_set_from_icon_name (self->hub_status_icon, icon);
  gtk_widget_set_visible (GTK_WIDGET (self->hub_status_spinner), busy);
  gtk_spinner_set_spinning (self->hub_status_spinner, busy);
  gtk_widget_set_visible (GTK_WIDGET (self->hub_retry), retry);
}

/* Shows what the search has come to; TRUE when the group is shown. shown:
 * the catalog's rows that match. */
static gboolean
hub_update_view (TernModelManager *self,
                 guint             shown)
{
  gboolean visible = TRUE;

  if (self->hub_group == NULL)
    return FALSE;
  gtk_widget_set_visible (GTK_WIDGET (self->hub_spinner), self->hub_state == HUB_SEARCHING);
  gtk_spinner_set_spinning (self->hub_spinner, self->hub_state == HUB_SEARCHING);
  adw_status_page_set_description (self->no_results_page, NULL);
  switch (self->hub_state)
    {
    case HUB_IDLE:
      visible = FALSE;
      break;
    case HUB_SEARCHING:
      hub_set_status (self, self->hub_results->len == 0 ? _("Searching Hugging Face…") : NULL, NULL, NULL, FALSE);
      break;
    case HUB_DONE:
      if (self->hub_results->len > 0)
        hub_set_status (self, NULL, NULL, NULL, FALSE);
      else if (shown > 0)
        {
          g_autofree char *text = g_strdup_printf (_("No GGUF models on Hugging Face match “%s”."), self->hub_query);

          hub_set_status (self, text, "edit-find-symbolic", NULL, FALSE);
        }
      else
        {
          g_autofree char *text = g_strdup_printf (_("Nothing in the catalog, on this computer or on Hugging Face "
                                                     "matches “%s”."), self->hub_query);

          /* Nothing anywhere: the panel's own empty page says it. */
          adw_status_page_set_description (self->no_results_page, text);
          visible = FALSE;
        }
      break;
    case HUB_FAILED:
    default:
      break;
    }
  gtk_widget_set_visible (GTK_WIDGET (self->hub_group), visible);
  return visible;
}

static void
on_hub_search_done (GObject      *source,
                    GAsyncResult *result,
                    gpointer      data)
{
  HubPending *pending = data;
  g_autoptr(TernModelManager) self = g_weak_ref_get (&pending->self);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) found = tern_hub_search_finish (result, &error);
  gboolean current = self != NULL && pending->generation == self->hub_generation;

  (void) source;
  hub_pending_free (pending);
  if (!current)
    return;
  hub_clear_results (self);
  if (found == NULL)
    {
      self->hub_state = HUB_FAILED;
      hub_set_status (self, hub_failure_sentence (error),
                      g_error_matches (error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_OFFLINE)
                        ? "network-offline-symbolic" : "dialog-warning-symbolic",
                      error->message, TRUE);
    }
  else
    {
      self->hub_state = HUB_DONE;
      for (guint i = 0; i < found->len; i++)
        hub_add_result (self, found->pdata[i]);
    }
  apply_filter (self);
}

/* Asks the Hub now, instead of whatever it was asked before. */
static void
hub_search_now (TernModelManager *self,
                const char       *text)
{
  g_cancellable_cancel (self->hub_cancellable);
  g_clear_object (&self->hub_cancellable);
  self->hub_cancellable = g_cancellable_new ();
  self->hub_generation++;
  if (text != self->hub_query)
    {
      g_free (self->hub_query);
      self->hub_query = g_strdup (text);
    }
  self->hub_state = HUB_SEARCHING;
  tern_hub_search_async (self->hub_query, TERN_HUB_SEARCH_LIMIT_DEFAULT, self->hub_cancellable,
                         on_hub_search_done, hub_pending_new (self, NULL));
  apply_filter (self);
}

static gboolean
on_hub_pause (gpointer data)
{
  TernModelManager *self = data;
  g_autofree char *text = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->search_entry))));

  self->hub_timeout = 0;
  hub_search_now (self, text);
  return G_SOURCE_REMOVE;
}

static void
on_search_text_changed (TernModelManager *self)
{
  g_autofree char *text = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->search_entry))));

  g_clear_handle_id (&self->hub_timeout, g_source_remove);
  if (self->hub_results == NULL)
    return;  /* disposed */
  if (g_utf8_strlen (text, -1) < HUB_MIN_CHARS)
    {
      /* Nothing to search for: whatever was under way goes, with its rows. */
      g_cancellable_cancel (self->hub_cancellable);
      self->hub_generation++;
      g_clear_pointer (&self->hub_query, g_free);
      self->hub_state = HUB_IDLE;
      hub_clear_results (self);
      apply_filter (self);
      return;
    }
  if (self->hub_query != NULL && g_str_equal (text, self->hub_query) && self->hub_state != HUB_FAILED)
    return;
  self->hub_timeout = g_timeout_add (HUB_DEBOUNCE_MS, on_hub_pause, self);
}

/* The Models window of a parent, and the panel of a Models window. */
#define WINDOW_KEY "tern-model-manager-window"

/* Escape in the search: the search goes first, then the Models window (a
 * panel inside another window stays). */
static void
on_stop_search (TernModelManager *self)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));

  if (*gtk_editable_get_text (GTK_EDITABLE (self->search_entry)) != '\0')
    gtk_editable_set_text (GTK_EDITABLE (self->search_entry), "");
  else if (GTK_IS_WINDOW (root)
           && g_object_get_data (G_OBJECT (root), WINDOW_KEY) == self)
    gtk_window_close (GTK_WINDOW (root));
}

static void
on_search_activate (TernModelManager *self)
{
  if (self->hub_timeout != 0)
    {
      g_clear_handle_id (&self->hub_timeout, g_source_remove);
      on_hub_pause (self);
    }
}

void
tern_model_manager_hub_retry (TernModelManager *self)
{
  g_return_if_fail (TERN_IS_MODEL_MANAGER (self));
  if (self->hub_query != NULL)
    hub_search_now (self, self->hub_query);
}

static void
hub_update_quant_row (HubQuantRow *qr)
{
  TernModelManager *self = qr->result->self;
  const TernHubQuant *q = qr->quant;
  const char *tag = q->tag;
  TernModelState state = tag != NULL && self->store != NULL ? tern_model_store_get_state (self->store, tag, NULL)
                                                            : TERN_MODEL_STATE_AVAILABLE;
  gboolean pulling = tag != NULL && self->downloader != NULL && tern_downloader_is_pulling (self->downloader, tag);
  gboolean installed = state == TERN_MODEL_STATE_INSTALLED;
  const char *error = tag != NULL ? g_hash_table_lookup (self->errors, tag) : NULL;
  g_autoptr(GString) subtitle = g_string_new (NULL);
  const char *failure = NULL;
  g_autofree char *fit = q->size > 0 ? fit_sentence (self, q->size, 0, 0) : NULL;
  guint64 with_projector = q->size + qr->result->repo->mmproj_size;

  if (q->size > 0)
    {
      g_autofree char *size = tern_manager_format_size (q->size);

      g_string_append (subtitle, size);
    }
  else
    g_string_append (subtitle, _("size unknown"));
  if (q->n_files > 1)
    {
      g_string_append (subtitle, " · ");
      /* Translators: a model split into several files */
      g_string_append_printf (subtitle, ngettext ("%u file", "%u files", q->n_files), q->n_files);
    }
  if (qr->resolving)
    g_string_append_printf (subtitle, " · %s", _("asking Hugging Face for the files…"));
  else if (pulling)
    g_string_append_printf (subtitle, " · %s", _("downloading"));
  else if (installed)
    g_string_append_printf (subtitle, " · %s", _("installed"));
  else if (state == TERN_MODEL_STATE_BROKEN)
    failure = _("damaged: download it again");
  else
    failure = error;
  if (fit != NULL)
    g_string_append_printf (subtitle, "\n%s", fit);
  adw_action_row_set_subtitle (ADW_ACTION_ROW (qr->row), subtitle->str);
  gtk_widget_set_tooltip_text (qr->row, error != NULL && !pulling && !installed && !qr->resolving
                                        ? g_hash_table_lookup (self->error_details, tag) : NULL);
  /* The failure on a line of its own, alone in red, as on the rows of
   * the catalog's models: the whole row was, its size and "Fits in
   * memory…" too. */
  tern_row_set_failure (qr->row, NULL, failure);

  gtk_widget_set_visible (GTK_WIDGET (qr->progress), pulling || qr->resolving);
  gtk_widget_set_visible (GTK_WIDGET (qr->cancel), pulling);
  gtk_widget_set_visible (gtk_widget_get_parent (GTK_WIDGET (qr->progress)), pulling || qr->resolving);
  gtk_widget_set_visible (GTK_WIDGET (qr->use), installed && !pulling);
  gtk_widget_set_visible (GTK_WIDGET (qr->download), !installed && !pulling && !qr->resolving);
  gtk_widget_set_sensitive (GTK_WIDGET (qr->download), q->ref != NULL);
  if (q->ref == NULL)
    gtk_widget_set_tooltip_text (GTK_WIDGET (qr->download),
                                 _("Tern cannot tell these files from the repository's other models by name"));
  else if (with_projector > q->size && q->size > 0)
    {
      g_autofree char *size = tern_manager_format_size (with_projector);
      /* Translators: "Download 4.9 GB, with the vision projector" */
      g_autofree char *tip = g_strdup_printf (_("Download %s, with the vision projector"), size);

      gtk_widget_set_tooltip_text (GTK_WIDGET (qr->download), tip);
    }
  else if (q->size > 0)
    {
      g_autofree char *size = tern_manager_format_size (q->size);
      g_autofree char *tip = g_strdup_printf (_("Download %s"), size);

      gtk_widget_set_tooltip_text (GTK_WIDGET (qr->download), tip);
    }
  else
    gtk_widget_set_tooltip_text (GTK_WIDGET (qr->download), NULL);
}

static void
hub_update_rows (TernModelManager *self)
{
  GHashTableIter iter;
  gpointer value;

  if (self->hub_rows == NULL)
    return;
  g_hash_table_iter_init (&iter, self->hub_rows);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    hub_update_quant_row (value);
}

static void
hub_pull_done (GObject      *source,
               GAsyncResult *result,
               gpointer      data)
{
  HubPending *pending = data;
  g_autoptr(TernModelManager) self = g_weak_ref_get (&pending->self);
  g_autoptr(GError) error = NULL;

  if (!tern_downloader_pull_finish (TERN_DOWNLOADER (source), result, &error) && self != NULL
      && self->hub_rows != NULL)
    {
      HubQuantRow *qr = g_hash_table_lookup (self->hub_rows, pending->key);

      note_pull_error (self, pending->key, TRUE, error);
      if (qr != NULL)
        hub_update_quant_row (qr);
    }
  hub_pending_free (pending);
}

static void
on_hub_resolved (GObject      *source,
                 GAsyncResult *result,
                 gpointer      data)
{
  HubPending *pending = data;
  g_autoptr(TernModelManager) self = g_weak_ref_get (&pending->self);
  g_autoptr(GError) error = NULL;
  g_autofree char *tag = NULL;
  g_autoptr(TernCatalog) catalog = tern_hub_resolve_finish (result, &tag, &error);
  HubQuantRow *qr;

  (void) source;
  if (self == NULL || self->downloader == NULL || self->hub_rows == NULL)
    {
      hub_pending_free (pending);
      return;
    }
  qr = g_hash_table_lookup (self->hub_rows, pending->key);
  if (qr != NULL)
    qr->resolving = FALSE;
  if (catalog == NULL || g_strcmp0 (tag, pending->key) != 0)
    {
      /* A sentence on the row, as for a failed download; the lookup's own
       * words (its URL, the status) in the tooltip. */
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          g_hash_table_replace (self->errors, g_strdup (pending->key),
                                g_strdup (error == NULL ? _("Hugging Face named other files than it listed. "
                                                            "Search again.")
                                                        : hub_failure_sentence (error)));
          if (error != NULL)
            g_hash_table_replace (self->error_details, g_strdup (pending->key), g_strdup (error->message));
          else
            g_hash_table_remove (self->error_details, pending->key);
        }
      if (qr != NULL)
        hub_update_quant_row (qr);
      hub_pending_free (pending);
      return;
    }
  /* From here it is the pull `tern-cli pull REF` makes, with the same
   * one-tag catalog; the pending answer goes on to the pull. */
  tern_downloader_pull_async (self->downloader, catalog, tag, NULL, hub_pull_done, pending);
  if (qr != NULL)
    {
      hub_update_quant_row (qr);
      gtk_progress_bar_set_fraction (qr->progress, 0);
    }
}

/* Download of a quantization found: the reference is resolved (the files
 * at the commit main names now), then pulled. */
static void
hub_download (TernModelManager *self,
              HubQuantRow      *qr)
{
  if (qr->quant->ref == NULL || qr->resolving || tern_downloader_is_pulling (self->downloader, qr->quant->tag))
    return;
  g_hash_table_remove (self->errors, qr->quant->tag);
  qr->resolving = TRUE;
  hub_update_quant_row (qr);
  gtk_progress_bar_pulse (qr->progress);
  tern_hub_resolve_async (qr->quant->ref, self->cancellable, on_hub_resolved,
                          hub_pending_new (self, qr->quant->tag));
}

GtkWidget *
tern_model_manager_get_hub_row (TernModelManager *self,
                                const char       *key)
{
  HubQuantRow *qr;
  HubResult *r;

  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  if (key == NULL || self->hub_results == NULL)
    return NULL;
  qr = g_hash_table_lookup (self->hub_rows, key);
  if (qr != NULL)
    return qr->row;
  r = hub_find_result (self, key);
  return r ? r->row : NULL;
}

const char *
tern_model_manager_get_hub_message (TernModelManager *self)
{
  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  if (self->hub_group == NULL || !gtk_widget_get_visible (GTK_WIDGET (self->hub_group))
      || !gtk_widget_get_visible (GTK_WIDGET (self->hub_status)))
    return NULL;
  return adw_preferences_row_get_title (ADW_PREFERENCES_ROW (self->hub_status));
}

/* The group, its sentence row and the header spinner, made once. */
static void
hub_init (TernModelManager *self)
{
  GtkWidget *retry;

  self->hub_results = g_ptr_array_new_with_free_func ((GDestroyNotify) hub_result_free);
  self->hub_rows = g_hash_table_new (g_str_hash, g_str_equal);
  self->hub_cancellable = g_cancellable_new ();
  self->hub_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->hub_group, _("Hugging Face"));
  adw_preferences_group_set_description (self->hub_group,
                                         _("GGUF models on the Hub, most downloaded first. Open one to see its "
                                           "quantizations."));
  self->hub_spinner = GTK_SPINNER (gtk_spinner_new ());
  gtk_widget_set_valign (GTK_WIDGET (self->hub_spinner), GTK_ALIGN_CENTER);
  adw_preferences_group_set_header_suffix (self->hub_group, GTK_WIDGET (self->hub_spinner));

  self->hub_status = ADW_ACTION_ROW (adw_action_row_new ());
  adw_preferences_row_set_use_markup (ADW_PREFERENCES_ROW (self->hub_status), FALSE);
  self->hub_status_icon = GTK_IMAGE (gtk_image_new ());
  self->hub_status_spinner = GTK_SPINNER (gtk_spinner_new ());
  adw_action_row_add_prefix (self->hub_status, GTK_WIDGET (self->hub_status_icon));
  adw_action_row_add_prefix (self->hub_status, GTK_WIDGET (self->hub_status_spinner));
  retry = gtk_button_new_with_mnemonic (_("_Retry"));
  gtk_widget_set_valign (retry, GTK_ALIGN_CENTER);
  gtk_widget_set_tooltip_text (retry, _("Search Hugging Face again"));
  g_signal_connect_swapped (retry, "clicked", G_CALLBACK (tern_model_manager_hub_retry), self);
  adw_action_row_add_suffix (self->hub_status, retry);
  self->hub_retry = GTK_BUTTON (retry);
  adw_preferences_group_add (self->hub_group, GTK_WIDGET (self->hub_status));
  gtk_widget_set_visible (GTK_WIDGET (self->hub_status), FALSE);
  gtk_widget_set_visible (GTK_WIDGET (self->hub_group), FALSE);
  gtk_box_append (self->groups_box, GTK_WIDGET (self->hub_group));
}

/* ---- import ---------------------------------------------------------------- */

char *
tern_model_manager_import (TernModelManager  *self,
                           GFile             *file,
                           GError           **error)
{
  g_autofree char *path = NULL;
  g_autoptr(GError) local_error = NULL;
  char *tag;

  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  g_return_val_if_fail (G_IS_FILE (file), NULL);
  path = g_file_get_path (file);
  if (path == NULL)
    {
      g_autofree char *uri = g_file_get_uri (file);

      g_set_error (&local_error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IMPORT,
                   _("%s: only files on this computer can be imported"), uri);
      tag = NULL;
    }
  else if (self->store == NULL)
    {
      g_set_error (&local_error, TERN_MANAGER_ERROR, TERN_MANAGER_ERROR_IMPORT, _("No model store to import into"));
      tag = NULL;
    }
  else
    tag = tern_model_store_import (self->store, path, NULL, &local_error);

  if (tag == NULL)
    {
      set_message (self, local_error->message, TRUE);
      g_propagate_error (error, g_steal_pointer (&local_error));
      return NULL;
    }
  {
    /* A file name is bytes, a label UTF-8 (a Latin-1 "mod\xe9l.gguf"). */
    g_autofree char *shown = g_filename_display_name (path);
    g_autofree char *text = g_strdup_printf (_("Imported %s as %s."), shown, tag);

    set_message (self, text, FALSE);
  }
  return tag;
}

static void
on_chooser_response (GtkNativeDialog  *chooser,
                     int               response,
                     TernModelManager *self)
{
  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (chooser));
      g_autofree char *tag = NULL;

      if (file != NULL)
        tag = tern_model_manager_import (self, file, NULL);
    }
  gtk_native_dialog_destroy (chooser);
  g_object_unref (chooser);
  g_object_unref (self);
}

static void
on_import_clicked (TernModelManager *self)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  GtkFileChooserNative *chooser;
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();

  chooser = gtk_file_chooser_native_new (_("Import a Model"), GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                         GTK_FILE_CHOOSER_ACTION_OPEN, _("_Import"), _("_Cancel"));
  gtk_file_filter_set_name (filter, _("GGUF models"));
  gtk_file_filter_add_pattern (filter, "*.gguf");
  gtk_file_filter_add_pattern (filter, "*.GGUF");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (chooser), filter);
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  g_signal_connect (chooser, "response", G_CALLBACK (on_chooser_response), g_object_ref (self));
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (chooser));
}

static gboolean
on_drop (GtkDropTarget    *target,
         const GValue     *value,
         double            x,
         double            y,
         TernModelManager *self)
{
  GSList *files;
  gboolean any = FALSE;

  (void) target;
  (void) x;
  (void) y;
  if (!G_VALUE_HOLDS (value, GDK_TYPE_FILE_LIST))
    return FALSE;
  files = gdk_file_list_get_files (g_value_get_boxed (value));
  for (GSList *l = files; l != NULL; l = l->next)
    {
      g_autofree char *tag = tern_model_manager_import (self, l->data, NULL);

      any |= tag != NULL;
    }
  g_slist_free (files);
  return any;
}

/* ---- verify ---------------------------------------------------------------- */

static void
check_done (GObject      *source,
            GAsyncResult *result,
            gpointer      data)
{
  g_autoptr(TernModelManager) self = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) problems = NULL;
  gboolean ok = tern_model_store_check_finish (TERN_MODEL_STORE (source), result, &problems, &error);
  g_autoptr(GString) text = g_string_new (NULL);

  self->checking = FALSE;
  g_clear_handle_id (&self->check_tick, g_source_remove);
  gtk_widget_set_sensitive (GTK_WIDGET (self->check_button), TRUE);
  if (!ok && g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    return;
  /* What the check found, also when it could not be recorded (a full
   * disk): the error follows it. */
  if (problems != NULL && problems->len > 0)
    {
      g_string_append_printf (text, ngettext ("%u damaged or missing file (Repair downloads it again):",
                                              "%u damaged or missing files (Repair downloads them again):",
                                              problems->len), problems->len);
      for (guint i = 0; i < problems->len; i++)
        g_string_append_printf (text, "\n%s", (const char *) problems->pdata[i]);
    }
  if (!ok)
    g_string_append_printf (text, "%s%s", text->len > 0 ? "\n" : "", error->message);
  if (ok && problems->len == 0)
    set_message (self, _("Every installed file is intact."), FALSE);
  else
    set_message (self, text->str, TRUE);
}

/* A large model's files take seconds to hash (17 GB: about 11 s): the
 * message says how far the check is. */
static gboolean
check_tick (gpointer data)
{
  TernModelManager *self = data;
  guint64 done, total;

  if (tern_model_store_get_check_progress (self->store, &done, &total) && total > 0)
    {
      g_autofree char *text =
        /* Translators: the Models window's Verify, while it hashes the files */
        g_strdup_printf (_("Verifying the installed files… %d%%"),
                         (int) (100.0 * (double) done / (double) total));

      set_message (self, text, FALSE);
    }
  return G_SOURCE_CONTINUE;
}

static void
on_check_clicked (TernModelManager *self)
{
  if (self->store == NULL || self->checking)
    return;
  self->checking = TRUE;
  gtk_widget_set_sensitive (GTK_WIDGET (self->check_button), FALSE);
  set_message (self, _("Verifying the installed files…"), FALSE);
  tern_model_store_check_async (self->store, self->cancellable, check_done, g_object_ref (self));
  self->check_tick = g_timeout_add (200, check_tick, self);
}

void
tern_model_manager_verify (TernModelManager *self)
{
  g_return_if_fail (TERN_IS_MODEL_MANAGER (self));
  on_check_clicked (self);
}

/* ---- object ---------------------------------------------------------------- */

static void
set_up (TernModelManager *self)
{
  g_autoptr(GError) error = NULL;

  if (self->store == NULL)
    {
      self->store = tern_model_store_new (NULL, &error);
      if (self->store == NULL)
        {
          show_error_page (self, error->message);
          return;
        }
    }
  if (self->downloader == NULL)
    self->downloader = tern_downloader_new (self->store);
  if (self->catalog == NULL)
    {
      g_autofree char *path = tern_catalog_default_path ();

      self->catalog = tern_catalog_new_from_file (path, &error);
    }

  g_signal_connect_object (self->store, "changed", G_CALLBACK (on_store_changed), self, G_CONNECT_SWAPPED);
  g_signal_connect_object (self->downloader, "progress", G_CALLBACK (on_progress), self, 0);
  g_signal_connect_object (self->downloader, "pull-finished", G_CALLBACK (on_pull_finished), self, 0);

  if (self->catalog == NULL)
    {
      show_error_page (self, error->message);
      return;
    }
  rebuild (self);
}

static void
tern_model_manager_constructed (GObject *object)
{
  G_OBJECT_CLASS (tern_model_manager_parent_class)->constructed (object);
  set_up (TERN_MODEL_MANAGER (object));
}

static void
tern_model_manager_dispose (GObject *object)
{
  TernModelManager *self = TERN_MODEL_MANAGER (object);

  g_cancellable_cancel (self->cancellable);
  g_clear_handle_id (&self->hub_timeout, g_source_remove);
  g_clear_handle_id (&self->check_tick, g_source_remove);
  g_clear_handle_id (&self->narrow_idle, g_source_remove);
  if (self->width_probe != NULL)
    g_signal_handlers_disconnect_by_data (self->width_probe, self);
  g_cancellable_cancel (self->hub_cancellable);
  /* Answers still on their way find nothing to fill in. */
  self->hub_generation++;
  if (self->groups != NULL)
    clear_groups (self);
  self->remote_group = NULL;
  g_clear_pointer (&self->remote_rows, g_ptr_array_unref);
  g_clear_object (&self->settings);
  gtk_widget_dispose_template (GTK_WIDGET (self), TERN_TYPE_MODEL_MANAGER);
  /* The rows went with the template's widgets; their records go now. */
  g_clear_pointer (&self->hub_rows, g_hash_table_unref);
  g_clear_pointer (&self->hub_results, g_ptr_array_unref);
  self->hub_group = NULL;
  g_clear_object (&self->catalog);
  g_clear_object (&self->downloader);
  g_clear_object (&self->store);
  G_OBJECT_CLASS (tern_model_manager_parent_class)->dispose (object);
}

static void
tern_model_manager_finalize (GObject *object)
{
  TernModelManager *self = TERN_MODEL_MANAGER (object);

  g_hash_table_unref (self->rows);
  g_ptr_array_unref (self->groups);
  g_hash_table_unref (self->errors);
  g_hash_table_unref (self->error_details);
  g_hash_table_unref (self->offline);
  g_hash_table_unref (self->stopped);
  g_free (self->here_key);
  g_clear_object (&self->cancellable);
  g_clear_object (&self->hub_cancellable);
  g_free (self->hub_query);
  g_free (self->filter);
  G_OBJECT_CLASS (tern_model_manager_parent_class)->finalize (object);
}

static void
tern_model_manager_get_property (GObject    *object,
                                 guint       prop_id,
                                 GValue     *value,
                                 GParamSpec *pspec)
{
  TernModelManager *self = TERN_MODEL_MANAGER (object);

  switch (prop_id)
    {
    case PROP_CATALOG:
      g_value_set_object (value, self->catalog);
      break;
    case PROP_STORE:
      g_value_set_object (value, self->store);
      break;
    case PROP_DOWNLOADER:
      g_value_set_object (value, self->downloader);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
tern_model_manager_set_property (GObject      *object,
                                 guint         prop_id,
                                 const GValue *value,
                                 GParamSpec   *pspec)
{
  TernModelManager *self = TERN_MODEL_MANAGER (object);

  switch (prop_id)
    {
    case PROP_CATALOG:
      g_set_object (&self->catalog, g_value_get_object (value));
      break;
    case PROP_STORE:
      g_set_object (&self->store, g_value_get_object (value));
      break;
    case PROP_DOWNLOADER:
      g_set_object (&self->downloader, g_value_get_object (value));
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static gboolean
apply_narrow (gpointer data)
{
  TernModelManager *self = data;
  GHashTableIter iter;
  gpointer value;

  self->narrow_idle = 0;
  self->narrow = gtk_widget_get_width (self->width_probe) < NARROW_ROW_WIDTH;
  g_hash_table_iter_init (&iter, self->rows);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      Row *row = value;

      row_place_buttons (row->row, gtk_widget_get_parent (GTK_WIDGET (row->remove)), self->narrow);
      update_row (row);
    }
  for (guint i = 0; self->hub_results != NULL && i < self->hub_results->len; i++)
    {
      HubResult *r = g_ptr_array_index (self->hub_results, i);

      for (guint j = 0; j < r->quant_rows->len; j++)
        {
          HubQuantRow *qr = g_ptr_array_index (r->quant_rows, j);

          row_place_buttons (qr->row, gtk_widget_get_parent (GTK_WIDGET (qr->download)), self->narrow);
        }
    }
  return G_SOURCE_REMOVE;
}

/* The rows' layout follows the panel's width (GTK 4.8 and libadwaita 1.2
 * have no breakpoints; a GtkBox's size_allocate is its layout manager's,
 * not a vfunc to override): a drawing area of no height, the panel's
 * last child, tells each width it is given. Moving buttons while
 * allocating would ask for a new allocation inside this one, so an idle
 * moves them. Rows with their buttons under their words are narrower,
 * never wider: the width that decided stays. */
static void
on_width_probe_resize (GtkDrawingArea *probe,
                       int             width,
                       int             height,
                       gpointer        data)
{
  TernModelManager *self = data;

  (void) probe;
  (void) height;
  if ((width < NARROW_ROW_WIDTH) != self->narrow && self->narrow_idle == 0)
    self->narrow_idle = g_idle_add_full (G_PRIORITY_HIGH_IDLE, apply_narrow, self, NULL);
}

static void
tern_model_manager_class_init (TernModelManagerClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->constructed = tern_model_manager_constructed;
  object_class->dispose = tern_model_manager_dispose;
  object_class->finalize = tern_model_manager_finalize;
  object_class->get_property = tern_model_manager_get_property;
  object_class->set_property = tern_model_manager_set_property;

  properties[PROP_CATALOG] =
    g_param_spec_object ("catalog", NULL, NULL, TERN_TYPE_CATALOG,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  properties[PROP_STORE] =
    g_param_spec_object ("store", NULL, NULL, TERN_TYPE_MODEL_STORE,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  properties[PROP_DOWNLOADER] =
    g_param_spec_object ("downloader", NULL, NULL, TERN_TYPE_DOWNLOADER,
                         G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);

  signals[SIGNAL_USE_MODEL] =
    g_signal_new ("use-model", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL, NULL,
                  G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_STRING);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/tern/Tern/ui/tern-model-manager.ui");
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, search_entry);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, import_button);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, check_button);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, message_revealer);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, message_label);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, message_close_button);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, stack);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, error_page);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, groups_box);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, disk_label);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, offline_revealer);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, offline_label);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, retry_button);
  gtk_widget_class_bind_template_child (widget_class, TernModelManager, no_results_page);
}

static void
on_message_close (TernModelManager *self)
{
  set_message (self, NULL, FALSE);
}

static void
tern_model_manager_init (TernModelManager *self)
{
  GtkDropTarget *drop;

  gtk_widget_init_template (GTK_WIDGET (self));
  /* No picture for a screen reader and nothing to click: only a width. */
  self->width_probe = g_object_new (GTK_TYPE_DRAWING_AREA, "accessible-role", GTK_ACCESSIBLE_ROLE_PRESENTATION,
                                    "hexpand", TRUE, "can-target", FALSE, NULL);
  g_signal_connect (self->width_probe, "resize", G_CALLBACK (on_width_probe_resize), self);
  gtk_box_append (GTK_BOX (self), self->width_probe);
  self->rows = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) row_free);
  self->groups = g_ptr_array_new ();
  self->errors = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->error_details = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->offline = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->stopped = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->cancellable = g_cancellable_new ();

  g_signal_connect_swapped (self->search_entry, "search-changed", G_CALLBACK (on_search_changed), self);
  /* Each keystroke restarts the pause before the Hub is asked; Enter asks
   * at once. */
  g_signal_connect_swapped (self->search_entry, "changed", G_CALLBACK (on_search_text_changed), self);
  g_signal_connect_swapped (self->search_entry, "activate", G_CALLBACK (on_search_activate), self);
  g_signal_connect_swapped (self->search_entry, "stop-search", G_CALLBACK (on_stop_search), self);
  hub_init (self);
  g_signal_connect_swapped (self->import_button, "clicked", G_CALLBACK (on_import_clicked), self);
  g_signal_connect_swapped (self->check_button, "clicked", G_CALLBACK (on_check_clicked), self);
  g_signal_connect_swapped (self->message_close_button, "clicked", G_CALLBACK (on_message_close), self);
  g_signal_connect_swapped (self->retry_button, "clicked", G_CALLBACK (tern_model_manager_retry), self);

  drop = gtk_drop_target_new (GDK_TYPE_FILE_LIST, GDK_ACTION_COPY);
  g_signal_connect (drop, "drop", G_CALLBACK (on_drop), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (drop));
}

GtkWidget *
tern_model_manager_new (TernCatalog    *catalog,
                        TernModelStore *store,
                        TernDownloader *downloader)
{
  return g_object_new (TERN_TYPE_MODEL_MANAGER, "catalog", catalog, "store", store, "downloader",
                       downloader, NULL);
}

TernCatalog *
tern_model_manager_get_catalog (TernModelManager *self)
{
  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  return self->catalog;
}

TernModelStore *
tern_model_manager_get_store (TernModelManager *self)
{
  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  return self->store;
}

TernDownloader *
tern_model_manager_get_downloader (TernModelManager *self)
{
  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  return self->downloader;
}

GtkWidget *
tern_model_manager_get_row (TernModelManager *self,
                            const char       *tag)
{
  Row *row;

  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  row = tag ? g_hash_table_lookup (self->rows, tag) : NULL;
  return row ? row->row : NULL;
}

const char *
tern_model_manager_get_message (TernModelManager *self)
{
  g_return_val_if_fail (TERN_IS_MODEL_MANAGER (self), NULL);
  if (!gtk_revealer_get_reveal_child (self->message_revealer))
    return NULL;
  return gtk_label_get_text (self->message_label);
}

/* ---- the Models window ------------------------------------------------------ */

static void
forget_window (GObject *parent)
{
  g_object_set_data (parent, WINDOW_KEY, NULL);
}

static void
close_window_of (TernModelManager *self)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));

  if (GTK_IS_WINDOW (root))
    gtk_window_close (GTK_WINDOW (root));
}

TernModelManager *
tern_model_manager_present (GtkWindow *parent,
                            GCallback  on_use_model,
                            gpointer   user_data)
{
  GtkWindow *window = parent ? g_object_get_data (G_OBJECT (parent), WINDOW_KEY) : NULL;
  GtkWidget *box, *header, *manager;

  if (window == NULL)
    {
      window = GTK_WINDOW (adw_window_new ());
      gtk_window_set_title (window, _("Models"));
      gtk_window_set_default_size (window, 640, 720);
      gtk_window_set_hide_on_close (window, TRUE);
      if (parent != NULL)
        {
          gtk_window_set_transient_for (window, parent);
          /* One window per parent, which goes with the parent. */
          gtk_window_set_destroy_with_parent (window, TRUE);
          g_object_set_data (G_OBJECT (parent), WINDOW_KEY, window);
          g_signal_connect_object (window, "destroy", G_CALLBACK (forget_window), parent, G_CONNECT_SWAPPED);
        }
      box = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
      header = adw_header_bar_new ();
      manager = tern_model_manager_new (NULL, NULL, NULL);
      gtk_widget_set_vexpand (manager, TRUE);
      gtk_box_append (GTK_BOX (box), header);
      gtk_box_append (GTK_BOX (box), manager);
      adw_window_set_content (ADW_WINDOW (window), box);
      if (on_use_model != NULL)
        g_signal_connect_swapped (manager, "use-model", on_use_model, user_data);
      g_signal_connect (manager, "use-model", G_CALLBACK (close_window_of), NULL);
      g_object_set_data (G_OBJECT (window), WINDOW_KEY, manager);
      /* Escape closes it, as a secondary window does (the search entry
       * takes Escape first: on_stop_search). */
      {
        GtkEventController *keys = gtk_shortcut_controller_new ();

        gtk_shortcut_controller_add_shortcut (
          GTK_SHORTCUT_CONTROLLER (keys),
          gtk_shortcut_new (gtk_keyval_trigger_new (GDK_KEY_Escape, 0),
                            gtk_named_action_new ("window.close")));
        gtk_widget_add_controller (GTK_WIDGET (window), keys);
      }
    }
  gtk_window_present (window);
  return TERN_MODEL_MANAGER (g_object_get_data (G_OBJECT (window), WINDOW_KEY));
}
