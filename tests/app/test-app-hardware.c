/* Preferences' Hardware page: the doctor's report (engine/doctor.c) on a
 * fake device tree ($TERN_DOCTOR_ROOT) where the user is not in the NPU's
 * group, computed off the main thread, rendered as rows with their fixes;
 * then the bandwidth measured on request. Saves tern-hardware.png into
 * $TERN_TEST_OUT. */
#include "app-test.h"

#include "tern-application.h"
#include "tern-preferences-window.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void
put (const char *root,
     const char *rel,
     const char *text)
{
  g_autofree char *path = g_build_filename (root, rel, NULL);
  g_autofree char *dir = g_path_get_dirname (path);

  CHECK (g_mkdir_with_parents (dir, 0755) == 0);
  CHECK (g_file_set_contents (path, text, -1, NULL));
}

static gboolean
wait_reports (TernPreferencesWindow *prefs,
              guint                  n,
              double                 seconds)
{
  gint64 end = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);

  while (tern_preferences_window_get_hardware_reports (prefs) < n
         && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, FALSE), g_usleep (1000);
  return tern_preferences_window_get_hardware_reports (prefs) >= n;
}

static void
has (const char *text,
     const char *want)
{
  CHECKF (strstr (text, want) != NULL, "no [%s] in:\n%s", want, text);
}

int
main (void)
{
  g_autofree char *tmp = app_test_start ("tern-app-hardware");
  g_autofree char *root = NULL;
  g_autofree char *node = NULL;
  g_autofree char *text = NULL;
  g_autofree char *shot = NULL;
  g_autoptr(GSettings) settings = NULL;
  TernPreferencesWindow *prefs;
  const char *out = g_getenv ("TERN_TEST_OUT");
  struct stat st;

  if (tmp == NULL)
    return 1;
  /* A machine with a Ryzen AI NPU whose node the user may not open. */
  root = g_build_filename (tmp, "root", NULL);
  put (root, "dev/accel/accel0", "");
  node = g_build_filename (root, "dev/accel/accel0", NULL);
  CHECK (g_chmod (node, 0660) == 0 && stat (node, &st) == 0);
  put (root, "sys/class/accel/accel0/device/vbnv", "RyzenAI-npu4\n");
  put (root, "sys/class/accel/accel0/device/fw_version", "1.1.2.65\n");
  put (root, "sys/module/amdxdna/version", "0.6\n");
  put (root, "proc/cpuinfo", "model name\t: AMD Ryzen AI 9 HX 370 w/ Radeon 890M\n");
  put (root, "proc/sys/kernel/osrelease", "6.12.9-amd64\n");
  put (root, "proc/self/limits", "Max locked memory         unlimited            unlimited            bytes\n");
  text = g_strdup_printf ("Uid:\t%u\t%u\t%u\t%u\nGid:\t%u\t%u\t%u\t%u\nGroups:\t%u\n",
                          (unsigned) st.st_uid + 1000, (unsigned) st.st_uid + 1000,
                          (unsigned) st.st_uid + 1000, (unsigned) st.st_uid + 1000,
                          (unsigned) st.st_gid + 1000, (unsigned) st.st_gid + 1000,
                          (unsigned) st.st_gid + 1000, (unsigned) st.st_gid + 1000,
                          (unsigned) st.st_gid + 1000);
  put (root, "proc/self/status", text);
  g_free (text);
  text = g_strdup_printf ("render:x:%u:\n", (unsigned) st.st_gid);
  put (root, "etc/group", text);
  put (root, "xrt.fake", "version=2.18.0\ndevices=1\nlib_dir=/opt/xilinx/xrt/lib\n");
  put (root, "opt/xilinx/xrt/lib/libxrt_driver_xdna.so", "");
  put (root, "xclbins/manifest.json", "{\"format\": 1, \"kernels\": []}\n");
  g_free (text);
  text = g_build_filename (root, "xclbins", NULL);
  g_setenv ("TERN_DOCTOR_ROOT", root, TRUE);
  g_setenv ("TERN_XCLBIN_DIR", text, TRUE);

  settings = tern_settings_new ();
  prefs = tern_preferences_window_new (NULL, settings);
  gtk_window_set_default_size (GTK_WINDOW (prefs), 640, 1000);
  adw_preferences_window_set_visible_page_name (ADW_PREFERENCES_WINDOW (prefs), "hardware");
  gtk_window_present (GTK_WINDOW (prefs));

  /* The report comes from a worker thread: the main loop keeps running. */
  CHECK (wait_reports (prefs, 1, 60));
  {
    const char *report = tern_preferences_window_get_hardware_text (prefs);

    fprintf (stderr, "%s", report);
    has (report, "OK CPU: AMD Ryzen AI 9 HX 370 w/ Radeon 890M\n");
    has (report, "Note memory bandwidth: not measured\n");
    has (report, "Problem NPU device: /dev/accel/accel0 is not open to this user (mode 0660, group render)\n");
    has (report, "  'sudo usermod -aG render $USER', then log out and in again\n");
    has (report, "OK NPU firmware: 1.1.2.65\n");
    has (report, "OK XRT: 2.18.0\n");
    has (report, "Problem NPU kernels: no kernel images ship in ");
  }
  spin_for (0.3);
  shot = g_build_filename (out && *out ? out : tmp, "tern-hardware.png", NULL);
  CHECK (app_test_save_screenshot (GTK_WIDGET (prefs), shot));
  fprintf (stderr, "screenshot: %s\n", shot);

  /* On request: the bandwidth, measured on the worker as well. */
  tern_preferences_window_check_hardware (prefs, TRUE);
  CHECK (wait_reports (prefs, 2, 120));
  has (tern_preferences_window_get_hardware_text (prefs), "OK memory bandwidth: ");
  has (tern_preferences_window_get_hardware_text (prefs), " GB/s (streaming read)\n");

  gtk_window_destroy (GTK_WINDOW (prefs));
  spin_for (0.1);
  app_test_remove (tmp);
  return tn_test_finish ("app-hardware");
}
