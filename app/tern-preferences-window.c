/* tern-preferences-window.c: every control bound to its GSettings key. */
#include "config.h"

#include <glib/gi18n.h>

#include "tern-preferences-window.h"
#ifdef TERN_HAVE_MANAGER
#include "tern-connections.h"
#include "tern-remote.h"
#include "tern-row-failure.h"
#endif

#include "tern-engine-worker.h"
#include "tern-paths.h"
#include "tn-doctor.h"
#include "tn-xrt.h"

struct _TernPreferencesWindow {
  AdwPreferencesWindow parent_instance;

  GtkSpinButton *temperature_spin;
  GtkSpinButton *top_p_spin;
  GtkSpinButton *seed_spin;
  GtkSpinButton *max_tokens_spin;
  GtkSwitch *thinking_switch;
  GtkSwitch *deterministic_switch;
  GtkSwitch *model_sampling_switch;
  AdwComboRow *drafter_row;
  GtkSpinButton *draft_length_spin;
  GtkSpinButton *threads_spin;
  GtkSpinButton *context_spin;
  AdwActionRow *draft_model_row;
  GtkButton *draft_model_choose;
  GtkButton *draft_model_clear;
  AdwActionRow *dflash_row;
  GtkButton *dflash_choose;
  GtkButton *dflash_clear;
  AdwActionRow *mtp_row;
  GtkButton *mtp_choose;
  GtkButton *mtp_clear;
  AdwActionRow *server_row;
  GtkSwitch *server_switch;
  GtkSpinButton *server_port_spin;
  AdwEntryRow *server_key_row;

  GSettings *settings;

  /* The Hardware page: the doctor's lines (engine/doctor.c), computed on a
   * worker thread each time the page is filled. */
  AdwPreferencesGroup *hw_summary_group;
  AdwPreferencesGroup *hw_cpu_group;
  AdwPreferencesGroup *hw_npu_group;
  AdwActionRow *hw_summary_row;
  GtkButton *hw_measure;
  GPtrArray *hw_rows;        /* the line rows, to remove before a new report */
  GString *hw_text;          /* the rows as text: tests and bug reports */
  char *model_path;          /* the loaded model's file, for its decode bound */
  GCancellable *hw_cancel;
  guint hw_idle;
  guint hw_reports;
  gboolean hw_running;
#ifdef TERN_HAVE_MANAGER
  /* Connections (docs/REMOTE.md): one row per server, rebuilt when the
   * list changes; tests run while the window lives. */
  AdwPreferencesGroup *connections_group;
  AdwEntryRow *connection_url_row;
  AdwPasswordEntryRow *connection_key_row;
  GtkLabel *connection_message;
  GPtrArray *connection_rows;
  GCancellable *cancellable;
#endif
};

G_DEFINE_FINAL_TYPE (TernPreferencesWindow, tern_preferences_window,
                     ADW_TYPE_PREFERENCES_WINDOW)

static void
on_drafter_selected (TernPreferencesWindow *self)
{
  g_settings_set_enum (self->settings, "default-drafter",
                       (int) adw_combo_row_get_selected (self->drafter_row));
}

/* The row shows the file's name; its tooltip the whole path. */
static void
show_path (TernPreferencesWindow *self,
           const char            *key)
{
  gboolean dflash = g_str_equal (key, "dflash-path"), mtp = g_str_equal (key, "mtp-path");
  AdwActionRow *row = dflash ? self->dflash_row : mtp ? self->mtp_row : self->draft_model_row;
  GtkWidget *clear = GTK_WIDGET (dflash ? self->dflash_clear
                                 : mtp  ? self->mtp_clear
                                        : self->draft_model_clear);
  g_autofree char *path = g_settings_get_string (self->settings, key);

  if (*path == '\0')
    {
      adw_action_row_set_subtitle (row, dflash ? _("None chosen: a DFlash draft GGUF made for the loaded model")
                                        : mtp  ? _("None chosen: a Gemma 4 MTP assistant GGUF made for the loaded model")
                                               : _("None chosen: a smaller GGUF model with the same vocabulary"));
      gtk_widget_set_tooltip_text (GTK_WIDGET (row), NULL);
    }
  else
    {
      g_autofree char *name = g_path_get_basename (path);
      g_autofree char *escaped = g_markup_escape_text (name, -1);

      adw_action_row_set_subtitle (row, escaped);
      gtk_widget_set_tooltip_text (GTK_WIDGET (row), path);
    }
  gtk_widget_set_visible (clear, *path != '\0');
}

static void
on_path_changed (TernPreferencesWindow *self,
                 const char            *key)
{
  show_path (self, key);
}

static void
on_file_response (GtkNativeDialog *dialog,
                  int              response,
                  gpointer         data)
{
  TernPreferencesWindow *self = data;
  const char *key = g_object_get_data (G_OBJECT (dialog), "tern-key");

  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GFile) file = gtk_file_chooser_get_file (GTK_FILE_CHOOSER (dialog));
      g_autofree char *path = file ? g_file_get_path (file) : NULL;

      if (path != NULL)
        g_settings_set_string (self->settings, key, path);
    }
  g_object_unref (dialog);
  g_object_unref (self);
}

static void
choose_file (TernPreferencesWindow *self,
             const char            *key,
             const char            *title)
{
  GtkFileChooserNative *dialog;
  g_autoptr(GtkFileFilter) filter = gtk_file_filter_new ();
  g_autofree char *current = g_settings_get_string (self->settings, key);

  dialog = gtk_file_chooser_native_new (title, GTK_WINDOW (self), GTK_FILE_CHOOSER_ACTION_OPEN,
                                        _("_Choose"), _("_Cancel"));
  gtk_file_filter_set_name (filter, _("GGUF models"));
  gtk_file_filter_add_pattern (filter, "*.gguf");
  gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (dialog), filter);
  if (*current != '\0')
    {
      g_autoptr(GFile) file = g_file_new_for_path (current);
      gtk_file_chooser_set_file (GTK_FILE_CHOOSER (dialog), file, NULL);
    }
  g_object_set_data (G_OBJECT (dialog), "tern-key", (gpointer) key);
  g_signal_connect (dialog, "response", G_CALLBACK (on_file_response), g_object_ref (self));
  gtk_native_dialog_show (GTK_NATIVE_DIALOG (dialog));
}

static void
on_draft_model_choose (TernPreferencesWindow *self)
{
  choose_file (self, "draft-model-path", _("Choose a Draft Model"));
}

static void
on_dflash_choose (TernPreferencesWindow *self)
{
  choose_file (self, "dflash-path", _("Choose a DFlash Draft"));
}

static void
on_mtp_choose (TernPreferencesWindow *self)
{
  choose_file (self, "mtp-path", _("Choose an MTP Assistant"));
}

static void
on_mtp_clear (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "mtp-path", "");
}

static void
on_draft_model_clear (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "draft-model-path", "");
}

static void
on_dflash_clear (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "dflash-path", "");
}

static void
on_server_key_apply (TernPreferencesWindow *self)
{
  g_settings_set_string (self->settings, "server-api-key",
                         gtk_editable_get_text (GTK_EDITABLE (self->server_key_row)));
}

void
tern_preferences_window_set_server_status (TernPreferencesWindow *self,
                                           const char            *status)
{
  g_autofree char *escaped = g_markup_escape_text (status ? status : "", -1);

  g_return_if_fail (TERN_IS_PREFERENCES_WINDOW (self));
  adw_action_row_set_subtitle (self->server_row, escaped);
}

/* ---------------------------------------------------------------- Hardware */

typedef struct {
  char *root;        /* $TERN_DOCTOR_ROOT: a fake device tree (tests) */
  char *xclbin_dir;
  char *model_path;
  gboolean bandwidth;
  tn_doctor_report *report;
  tn_error why;      /* why the XRT backend does not run */
  gboolean xrt_runs;
} HardwareJob;

static void
hardware_job_free (gpointer data)
{
  HardwareJob *job = data;

  g_free (job->root);
  g_free (job->xclbin_dir);
  g_free (job->model_path);
  g_free (job->report);
  g_free (job);
}

static void
hardware_thread (GTask        *task,
                 gpointer      source,
                 gpointer      data,
                 GCancellable *cancellable)
{
  HardwareJob *job = data;
  tn_gguf *model = NULL;
  tn_error err = { 0 };
  tn_doctor_params params = { 0 };

  (void) source;
  (void) cancellable;
  /* The file is enough for the sizes: the loaded model stays the worker's. */
  if (job->model_path != NULL && tn_gguf_open (job->model_path, &model, &err) != TN_OK)
    model = NULL;
  params.root = job->root;
  params.xclbin_dir = job->xclbin_dir;
  params.model = model;
  params.measure_bandwidth = job->bandwidth;
  job->report = g_new0 (tn_doctor_report, 1);
  tn_doctor_run (&params, job->report);
  job->xrt_runs = tn_xrt_open (job->root, job->xclbin_dir, NULL, &job->why) == TN_OK
                  && job->report->npu_ok;
  tn_gguf_close (model);
  g_task_return_boolean (task, TRUE);
}

static const char *
hardware_icon (int status)
{
  switch (status)
    {
    case TN_DOCTOR_OK:
      return "emblem-ok-symbolic";
    case TN_DOCTOR_FAIL:
      return "dialog-warning-symbolic";
    default:
      return "dialog-information-symbolic";
    }
}

static const char *
hardware_status_word (int status)
{
  switch (status)
    {
    case TN_DOCTOR_OK:
      return _("OK");
    case TN_DOCTOR_FAIL:
      return _("Problem");
    default:
      return _("Note");
    }
}

static void
hardware_clear (TernPreferencesWindow *self)
{
  for (guint i = 0; i < self->hw_rows->len; i++)
    {
      GtkWidget *row = g_ptr_array_index (self->hw_rows, i);
      AdwPreferencesGroup *group = g_object_get_data (G_OBJECT (row), "tern-group");

      adw_preferences_group_remove (group, row);
    }
  g_ptr_array_set_size (self->hw_rows, 0);
}

static void
hardware_done (GObject      *source,
               GAsyncResult *result,
               gpointer      data)
{
  TernPreferencesWindow *self = TERN_PREFERENCES_WINDOW (source);
  HardwareJob *job = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;
  g_autofree char *why = NULL;

  (void) data;
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    return; /* cancelled: the window is going away */
  self->hw_running = FALSE;
  gtk_widget_set_sensitive (GTK_WIDGET (self->hw_measure), TRUE);
  hardware_clear (self);
  g_string_truncate (self->hw_text, 0);
  why = tern_engine_error_text (&job->why);
  if (job->xrt_runs)
    {
      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->hw_summary_row),
                                     _("Tern can run on the NPU"));
      adw_action_row_set_subtitle (self->hw_summary_row, "");
    }
  else
    {
      g_autofree char *sub = g_strdup_printf (_("The NPU backend cannot run: %s"), why);
      g_autofree char *escaped = g_markup_escape_text (sub, -1);

      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->hw_summary_row),
                                     job->report->cpu_ok ? _("Tern runs on the CPU")
                                                         : _("The CPU backend cannot run"));
      adw_action_row_set_subtitle (self->hw_summary_row, escaped);
    }
  for (int i = 0; i < job->report->n_lines; i++)
    {
      const tn_doctor_line *l = &job->report->lines[i];
      AdwPreferencesGroup *group = l->group == TN_DOCTOR_CPU ? self->hw_cpu_group
                                                             : self->hw_npu_group;
      g_autofree char *text = tern_engine_error_text (&l->text);
      g_autofree char *fix = l->fix.message[0] ? tern_engine_error_text (&l->fix) : NULL;
      g_autofree char *title = g_markup_escape_text (text, -1);
      GtkWidget *row = adw_action_row_new ();
      GtkWidget *icon = gtk_image_new_from_icon_name (hardware_icon (l->status));

      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), title);
      adw_action_row_set_title_lines (ADW_ACTION_ROW (row), 0);
      if (fix != NULL)
        {
          g_autofree char *fix_line = g_strdup_printf (_("Fix: %s"), fix);
          g_autofree char *escaped = g_markup_escape_text (fix_line, -1);

          adw_action_row_set_subtitle (ADW_ACTION_ROW (row), escaped);
          adw_action_row_set_subtitle_lines (ADW_ACTION_ROW (row), 0);
        }
      gtk_widget_set_tooltip_text (icon, hardware_status_word (l->status));
      gtk_accessible_update_property (GTK_ACCESSIBLE (icon), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                      hardware_status_word (l->status), -1);
      if (l->status == TN_DOCTOR_FAIL)
        gtk_widget_add_css_class (icon, "warning");
      else if (l->status == TN_DOCTOR_OK)
        gtk_widget_add_css_class (icon, "success");
      adw_action_row_add_prefix (ADW_ACTION_ROW (row), icon);
      g_object_set_data (G_OBJECT (row), "tern-group", group);
      adw_preferences_group_add (group, row);
      g_ptr_array_add (self->hw_rows, row);
      g_string_append_printf (self->hw_text, "%s %s\n", hardware_status_word (l->status), text);
      if (fix != NULL)
        g_string_append_printf (self->hw_text, "  %s\n", fix);
    }
  self->hw_reports++;
}

static void
hardware_check (TernPreferencesWindow *self,
                gboolean               bandwidth)
{
  g_autoptr(GTask) task = NULL;
  HardwareJob *job;
  const char *root = g_getenv ("TERN_DOCTOR_ROOT");

  if (self->hw_running)
    return;
  self->hw_running = TRUE;
  gtk_widget_set_sensitive (GTK_WIDGET (self->hw_measure), FALSE);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->hw_summary_row),
                                 bandwidth ? _("Measuring the memory bandwidth…")
                                           : _("Checking…"));
  adw_action_row_set_subtitle (self->hw_summary_row, "");
  job = g_new0 (HardwareJob, 1);
  job->root = root != NULL && *root != '\0' ? g_strdup (root) : NULL;
  job->xclbin_dir = tern_paths_xclbin_dir ();
  job->model_path = g_strdup (self->model_path);
  job->bandwidth = bandwidth;
  task = g_task_new (self, self->hw_cancel, hardware_done, NULL);
  g_task_set_task_data (task, job, hardware_job_free);
  g_task_run_in_thread (task, hardware_thread);
}

static gboolean
hardware_first_check (gpointer data)
{
  TernPreferencesWindow *self = data;

  self->hw_idle = 0;
  hardware_check (self, FALSE);
  return G_SOURCE_REMOVE;
}

static void
on_hardware_measure (TernPreferencesWindow *self)
{
  hardware_check (self, TRUE);
}

static void
build_hardware_page (TernPreferencesWindow *self)
{
  AdwPreferencesPage *page = ADW_PREFERENCES_PAGE (adw_preferences_page_new ());

  adw_preferences_page_set_title (page, _("Hardware"));
  adw_preferences_page_set_icon_name (page, "computer-symbolic");
  adw_preferences_page_set_name (page, "hardware");

  self->hw_summary_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_description (
    self->hw_summary_group,
    _("What Tern needs on this computer: each line says it is fine, or what is wrong and how "
      "to fix it. tern-cli doctor prints the same."));
  self->hw_summary_row = ADW_ACTION_ROW (adw_action_row_new ());
  adw_action_row_set_subtitle_lines (self->hw_summary_row, 0);
  adw_preferences_group_add (self->hw_summary_group, GTK_WIDGET (self->hw_summary_row));
  adw_preferences_page_add (page, self->hw_summary_group);

  self->hw_cpu_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->hw_cpu_group, _("CPU"));
  self->hw_measure = GTK_BUTTON (gtk_button_new_with_mnemonic (_("_Measure Bandwidth")));
  gtk_widget_set_valign (GTK_WIDGET (self->hw_measure), GTK_ALIGN_CENTER);
  gtk_widget_set_tooltip_text (GTK_WIDGET (self->hw_measure),
                               _("Reads up to 1 GiB of memory for a second or two: the decode "
                                 "bound of the loaded model follows from it"));
  adw_preferences_group_set_header_suffix (self->hw_cpu_group, GTK_WIDGET (self->hw_measure));
  g_signal_connect_swapped (self->hw_measure, "clicked", G_CALLBACK (on_hardware_measure), self);
  adw_preferences_page_add (page, self->hw_cpu_group);

  self->hw_npu_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->hw_npu_group, _("NPU"));
  adw_preferences_group_set_description (
    self->hw_npu_group,
    _("AMD Ryzen AI NPUs, through XRT and the amdxdna driver. No NPU kernels ship yet: "
      "until they do, Tern runs on the CPU."));
  adw_preferences_page_add (page, self->hw_npu_group);

  adw_preferences_window_add (ADW_PREFERENCES_WINDOW (self), page);
  self->hw_rows = g_ptr_array_new ();
  self->hw_text = g_string_new (NULL);
  self->hw_cancel = g_cancellable_new ();
  /* After the caller had its say (tern_preferences_window_set_model_path). */
  self->hw_idle = g_idle_add (hardware_first_check, self);
}

void
tern_preferences_window_set_model_path (TernPreferencesWindow *self,
                                        const char            *path)
{
  g_return_if_fail (TERN_IS_PREFERENCES_WINDOW (self));
  g_free (self->model_path);
  self->model_path = g_strdup (path);
}

void
tern_preferences_window_check_hardware (TernPreferencesWindow *self,
                                        gboolean               measure_bandwidth)
{
  g_return_if_fail (TERN_IS_PREFERENCES_WINDOW (self));
  hardware_check (self, measure_bandwidth);
}

guint
tern_preferences_window_get_hardware_reports (TernPreferencesWindow *self)
{
  g_return_val_if_fail (TERN_IS_PREFERENCES_WINDOW (self), 0);
  return self->hw_reports;
}

const char *
tern_preferences_window_get_hardware_text (TernPreferencesWindow *self)
{
  g_return_val_if_fail (TERN_IS_PREFERENCES_WINDOW (self), NULL);
  return self->hw_text->str;
}

#ifdef TERN_HAVE_MANAGER
/* ---- connections ----------------------------------------------------------- */

static void show_connections (TernPreferencesWindow *self);

static void
connection_message (TernPreferencesWindow *self,
                    const char            *text,
                    gboolean               is_error)
{
  gtk_label_set_text (self->connection_message, text ? text : "");
  gtk_widget_set_visible (GTK_WIDGET (self->connection_message), text != NULL && *text != '\0');
  if (is_error)
    gtk_widget_add_css_class (GTK_WIDGET (self->connection_message), "error");
  else
    gtk_widget_remove_css_class (GTK_WIDGET (self->connection_message), "error");
}

/* An address saved with its password before it went to the keyring, in a
 * session with no keyring to move it to (tern_connections_migrate). */
static const char *
plain_password_warning (void)
{
  return _("The password in this address is stored in the settings as plain text: there is no "
           "system keyring to move it to. Remove the server and add it again where a keyring "
           "runs.");
}

static void
on_test_done (GObject      *source,
              GAsyncResult *result,
              gpointer      data)
{
  AdwActionRow *row = data;
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) models = tern_connections_list_models_finish (result, &error);
  g_autofree char *text = NULL;
  g_autofree char *list = NULL;

  (void) source;
  /* The window closed meanwhile: its rows are gone. */
  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_object_unref (row);
      return;
    }
  if (models != NULL)
    {
      list = g_strjoinv (", ", models);
      /* Translators: "3 models: qwen3-32b, llama-70b, ..." */
      text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "Connected: %u model: %s",
                                           "Connected: %u models: %s", g_strv_length (models)),
                              g_strv_length (models), list);
    }
  {
    const char *url = g_object_get_data (G_OBJECT (row), "tern-url");
    g_autofree char *escaped = NULL;

    /* The warning stays above whatever the test says. */
    if (tern_connections_has_password (url))
      {
        g_autofree char *both = text != NULL ? g_strconcat (plain_password_warning (), "\n", text, NULL)
                                             : g_strdup (plain_password_warning ());
        g_free (text);
        text = g_steal_pointer (&both);
      }
    escaped = g_markup_escape_text (text != NULL ? text : "", -1);
    adw_action_row_set_subtitle (row, escaped);
  }
  /* The failure on a line of its own, alone in red, as on the Models
   * panel's rows: the whole row was, the server's address too. */
  tern_row_set_failure (GTK_WIDGET (row), NULL, models == NULL ? error->message : NULL);
  g_object_unref (row);
}

static void
on_connection_test (GtkButton *button,
                    gpointer   data)
{
  TernPreferencesWindow *self = data;
  AdwActionRow *row = g_object_get_data (G_OBJECT (button), "tern-row");
  const char *url = g_object_get_data (G_OBJECT (row), "tern-url");

  adw_action_row_set_subtitle (row, _("Testing…"));
  tern_row_set_failure (GTK_WIDGET (row), NULL, NULL);
  tern_connections_list_models_async (url, self->cancellable, on_test_done, g_object_ref (row));
}

static void
on_connection_remove (GtkButton *button,
                      gpointer   data)
{
  TernPreferencesWindow *self = data;
  AdwActionRow *row = g_object_get_data (G_OBJECT (button), "tern-row");
  g_autofree char *url = g_strdup (g_object_get_data (G_OBJECT (row), "tern-url"));

  tern_connections_remove (self->settings, url);
}

static void
on_connection_add (TernPreferencesWindow *self)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *url = g_strstrip (g_strdup (gtk_editable_get_text (GTK_EDITABLE (self->connection_url_row))));
  const char *key = gtk_editable_get_text (GTK_EDITABLE (self->connection_key_row));
  g_autofree char *added = NULL;

  if (*url == '\0')
    return;
  if (!tern_connections_add (self->settings, url, key, &added, &error))
    {
      connection_message (self, error->message, TRUE);
      return;
    }
  connection_message (self, NULL, FALSE);
  gtk_editable_set_text (GTK_EDITABLE (self->connection_url_row), "");
  gtk_editable_set_text (GTK_EDITABLE (self->connection_key_row), "");
  /* Test it right away: the row says whether address and key work. */
  for (guint i = 0; i < self->connection_rows->len; i++)
    {
      AdwActionRow *row = g_ptr_array_index (self->connection_rows, i);
      if (g_strcmp0 (g_object_get_data (G_OBJECT (row), "tern-url"), added) == 0)
        {
          adw_action_row_set_subtitle (row, _("Testing…"));
          tern_connections_list_models_async (added, self->cancellable, on_test_done,
                                              g_object_ref (row));
        }
    }
}

static void
show_connections (TernPreferencesWindow *self)
{
  g_auto(GStrv) urls = g_settings_get_strv (self->settings, "remote-connections");

  for (guint i = 0; i < self->connection_rows->len; i++)
    adw_preferences_group_remove (self->connections_group,
                                  g_ptr_array_index (self->connection_rows, i));
  g_ptr_array_set_size (self->connection_rows, 0);
  for (guint i = 0; urls[i] != NULL; i++)
    {
      GtkWidget *row = adw_action_row_new ();
      GtkWidget *test = gtk_button_new_with_mnemonic (_("_Test"));
      GtkWidget *remove = gtk_button_new_from_icon_name ("user-trash-symbolic");
      /* A password in the address (a proxy's Basic authentication) is not
       * for the screen. */
      g_autofree char *shown = tern_remote_url_shown (urls[i]);
      g_autofree char *escaped = g_markup_escape_text (shown, -1);

      adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), escaped);
      if (tern_connections_has_password (urls[i]))
        {
          g_autofree char *warning = g_markup_escape_text (plain_password_warning (), -1);
          adw_action_row_set_subtitle (ADW_ACTION_ROW (row), warning);
        }
      else
        adw_action_row_set_subtitle (ADW_ACTION_ROW (row), _("Not tested yet"));
      g_object_set_data_full (G_OBJECT (row), "tern-url", g_strdup (urls[i]), g_free);
      gtk_widget_set_valign (test, GTK_ALIGN_CENTER);
      gtk_widget_set_valign (remove, GTK_ALIGN_CENTER);
      gtk_widget_add_css_class (remove, "flat");
      gtk_widget_set_tooltip_text (remove, _("Remove this server and its key"));
      g_object_set_data (G_OBJECT (test), "tern-row", row);
      g_object_set_data (G_OBJECT (remove), "tern-row", row);
      g_signal_connect (test, "clicked", G_CALLBACK (on_connection_test), self);
      g_signal_connect (remove, "clicked", G_CALLBACK (on_connection_remove), self);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), test);
      adw_action_row_add_suffix (ADW_ACTION_ROW (row), remove);
      adw_preferences_group_add (self->connections_group, row);
      g_ptr_array_add (self->connection_rows, row);
    }
  /* With no server added, its heading stood alone over nothing. */
  gtk_widget_set_visible (GTK_WIDGET (self->connections_group), urls[0] != NULL);
}

static void
add_connections_page (TernPreferencesWindow *self)
{
  AdwPreferencesPage *page = ADW_PREFERENCES_PAGE (adw_preferences_page_new ());
  AdwPreferencesGroup *add = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  GtkWidget *button = gtk_button_new_with_mnemonic (_("_Add"));
  GtkWidget *label = gtk_label_new (NULL);
  const gboolean env_key = g_getenv ("TERN_REMOTE_API_KEY") != NULL;

  adw_preferences_page_set_title (page, _("Connections"));
  adw_preferences_page_set_icon_name (page, "network-server-symbolic");
  adw_preferences_group_set_title (add, _("Remote Servers"));
  adw_preferences_group_set_description (
    add, _("OpenAI-compatible servers (vLLM, llama-server, Ollama, tern-cli serve) whose models "
           "the model picker lists beside the local ones. The pinned system prompt is sent first "
           "in every request, and the server's cached tokens show in the stats. Add one by its address, "
           "such as http://gpu-box:8000/v1."));
  self->connection_url_row = ADW_ENTRY_ROW (adw_entry_row_new ());
  /* The example is in the description: in the entry's one-line title it was
   * cut at "http://gpu-box:…" at 360 px. */
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->connection_url_row), _("Server Address"));
  self->connection_key_row = ADW_PASSWORD_ENTRY_ROW (adw_password_entry_row_new ());
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (self->connection_key_row),
                                 _("API key (optional)"));
  gtk_widget_set_valign (button, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (button, "suggested-action");
  adw_entry_row_add_suffix (self->connection_url_row, button);
  g_signal_connect_swapped (button, "clicked", G_CALLBACK (on_connection_add), self);
  g_signal_connect_swapped (self->connection_url_row, "entry-activated",
                            G_CALLBACK (on_connection_add), self);
  adw_preferences_group_add (add, GTK_WIDGET (self->connection_url_row));
  adw_preferences_group_add (add, GTK_WIDGET (self->connection_key_row));

  /* Where keys go, and when they cannot be kept. */
  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_widget_add_css_class (label, "dim-label");
  gtk_widget_set_margin_top (label, 12);
  if (env_key)
    gtk_label_set_text (GTK_LABEL (label),
                        _("The API key comes from TERN_REMOTE_API_KEY in the environment."));
  else if (!tern_connections_keyring_built ())
    gtk_label_set_text (GTK_LABEL (label),
                        _("This build cannot keep API keys (no libsecret): only servers without "
                          "a key work, or set TERN_REMOTE_API_KEY."));
  else
    gtk_label_set_text (GTK_LABEL (label),
                        _("API keys are kept in the system keyring, never in the settings. Without "
                          "a keyring service (a bare session), adding a key fails: set "
                          "TERN_REMOTE_API_KEY instead."));
  adw_preferences_group_add (add, label);
  self->connection_message = GTK_LABEL (gtk_label_new (NULL));
  gtk_label_set_wrap (self->connection_message, TRUE);
  gtk_label_set_xalign (self->connection_message, 0);
  gtk_widget_set_visible (GTK_WIDGET (self->connection_message), FALSE);
  adw_preferences_group_add (add, GTK_WIDGET (self->connection_message));

  self->connections_group = ADW_PREFERENCES_GROUP (adw_preferences_group_new ());
  adw_preferences_group_set_title (self->connections_group, _("Servers"));
  adw_preferences_page_add (page, add);
  adw_preferences_page_add (page, self->connections_group);
  adw_preferences_window_add (ADW_PREFERENCES_WINDOW (self), page);

  self->connection_rows = g_ptr_array_new ();
  self->cancellable = g_cancellable_new ();
  show_connections (self);
  g_signal_connect_object (self->settings, "changed::remote-connections",
                           G_CALLBACK (show_connections), self, G_CONNECT_SWAPPED);
}

#endif

static void
tern_preferences_window_dispose (GObject *object)
{
  TernPreferencesWindow *self = TERN_PREFERENCES_WINDOW (object);

  g_cancellable_cancel (self->hw_cancel);
  g_clear_handle_id (&self->hw_idle, g_source_remove);
#ifdef TERN_HAVE_MANAGER
  if (self->cancellable != NULL)
    g_cancellable_cancel (self->cancellable);
  g_clear_object (&self->cancellable);
  g_clear_pointer (&self->connection_rows, g_ptr_array_unref);
#endif
  G_OBJECT_CLASS (tern_preferences_window_parent_class)->dispose (object);
}

static void
tern_preferences_window_finalize (GObject *object)
{
  TernPreferencesWindow *self = TERN_PREFERENCES_WINDOW (object);

  g_clear_object (&self->settings);
  g_clear_object (&self->hw_cancel);
  g_clear_pointer (&self->hw_rows, g_ptr_array_unref);
  if (self->hw_text != NULL)
    g_string_free (self->hw_text, TRUE);
  g_free (self->model_path);
  G_OBJECT_CLASS (tern_preferences_window_parent_class)->finalize (object);
}

static void
tern_preferences_window_class_init (TernPreferencesWindowClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);

  object_class->dispose = tern_preferences_window_dispose;
  object_class->finalize = tern_preferences_window_finalize;
  gtk_widget_class_set_template_from_resource (
    widget_class, "/io/github/tern/Tern/ui/tern-preferences-window.ui");
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, temperature_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, top_p_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, seed_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, max_tokens_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, thinking_switch);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, deterministic_switch);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, model_sampling_switch);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, drafter_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, draft_length_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, threads_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, context_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, draft_model_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, draft_model_choose);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, draft_model_clear);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, dflash_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, dflash_choose);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, dflash_clear);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, mtp_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, mtp_choose);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, mtp_clear);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, server_row);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, server_switch);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, server_port_spin);
  gtk_widget_class_bind_template_child (widget_class, TernPreferencesWindow, server_key_row);
}

static void
tern_preferences_window_init (TernPreferencesWindow *self)
{
  gtk_widget_init_template (GTK_WIDGET (self));
  build_hardware_page (self);
}

TernPreferencesWindow *
tern_preferences_window_new (GtkWindow *parent,
                             GSettings *settings)
{
  TernPreferencesWindow *self = g_object_new (TERN_TYPE_PREFERENCES_WINDOW,
                                              "transient-for", parent, NULL);

  self->settings = g_object_ref (settings);
  g_settings_bind (settings, "temperature", self->temperature_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "top-p", self->top_p_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "deterministic", self->deterministic_switch, "active", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "model-sampling", self->model_sampling_switch, "active", G_SETTINGS_BIND_DEFAULT);
  /* Deterministic decides alone: what it overrides is greyed out. */
  g_settings_bind (settings, "deterministic", self->model_sampling_switch, "sensitive",
                   G_SETTINGS_BIND_GET | G_SETTINGS_BIND_INVERT_BOOLEAN);
  g_settings_bind (settings, "deterministic", self->temperature_spin, "sensitive",
                   G_SETTINGS_BIND_GET | G_SETTINGS_BIND_INVERT_BOOLEAN);
  g_settings_bind (settings, "deterministic", self->top_p_spin, "sensitive",
                   G_SETTINGS_BIND_GET | G_SETTINGS_BIND_INVERT_BOOLEAN);
  g_settings_bind (settings, "seed", gtk_spin_button_get_adjustment (self->seed_spin), "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "max-tokens", self->max_tokens_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "thinking", self->thinking_switch, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "draft-length", self->draft_length_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "threads", self->threads_spin, "value", G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "context-size", self->context_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  adw_combo_row_set_selected (self->drafter_row,
                              (guint) g_settings_get_enum (settings, "default-drafter"));
  g_signal_connect_swapped (self->drafter_row, "notify::selected",
                            G_CALLBACK (on_drafter_selected), self);
  g_settings_bind (settings, "server-enabled", self->server_switch, "active",
                   G_SETTINGS_BIND_DEFAULT);
  g_settings_bind (settings, "server-port", self->server_port_spin, "value",
                   G_SETTINGS_BIND_DEFAULT);
  {
    g_autofree char *key = g_settings_get_string (settings, "server-api-key");
    gtk_editable_set_text (GTK_EDITABLE (self->server_key_row), key);
  }
  g_signal_connect_swapped (self->server_key_row, "apply", G_CALLBACK (on_server_key_apply),
                            self);
  show_path (self, "draft-model-path");
  show_path (self, "dflash-path");
  show_path (self, "mtp-path");
  g_signal_connect_object (settings, "changed::mtp-path", G_CALLBACK (on_path_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_swapped (self->mtp_choose, "clicked", G_CALLBACK (on_mtp_choose), self);
  g_signal_connect_swapped (self->mtp_clear, "clicked", G_CALLBACK (on_mtp_clear), self);
  g_signal_connect_object (settings, "changed::draft-model-path", G_CALLBACK (on_path_changed),
                           self, G_CONNECT_SWAPPED);
  g_signal_connect_object (settings, "changed::dflash-path", G_CALLBACK (on_path_changed), self,
                           G_CONNECT_SWAPPED);
  g_signal_connect_swapped (self->draft_model_choose, "clicked",
                            G_CALLBACK (on_draft_model_choose), self);
  g_signal_connect_swapped (self->dflash_choose, "clicked", G_CALLBACK (on_dflash_choose), self);
  g_signal_connect_swapped (self->draft_model_clear, "clicked",
                            G_CALLBACK (on_draft_model_clear), self);
  g_signal_connect_swapped (self->dflash_clear, "clicked", G_CALLBACK (on_dflash_clear), self);
#ifdef TERN_HAVE_MANAGER
  add_connections_page (self);
#endif
  return self;
}
