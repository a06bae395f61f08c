/* The NPU backend through XRT (AMD Ryzen AI NPUs, the amdxdna driver):
 * what XRT sees, the kernel manifest (xclbins/manifest.json) and the
 * backend's open, which today always refuses with the precise reason and
 * leaves the work to the CPU. Nothing here computes.
 *
 * A self-contained module with a plain C API, so that the backend registry
 * can call tn_xrt_open as one more backend's constructor. Without XRT at
 * build time (meson -Dxrt=disabled, or no libxrt-dev) the same API exists
 * and says so. docs/DOCTOR.md explains every check.
 */
#ifndef TN_XRT_H
#define TN_XRT_H

#include "tern.h"

/* The oldest XRT that opens hardware contexts on the NPU (through its xdna
 * plugin, shipped from 2.17 on). Debian 12's libxrt-dev is 2.13. */
#define TN_XRT_MIN_MAJOR 2
#define TN_XRT_MIN_MINOR 17

/* The plugin that lets XRT see an amdxdna device (amd/xdna-driver builds
 * it); XRT loads it from the folder of its own libraries. */
#define TN_XRT_XDNA_PLUGIN "libxrt_driver_xdna.so"

typedef struct tn_xrt_probe {
    bool built;           /* libtern was built against XRT */
    bool faked;           /* read from a fake tree (below), not from XRT */
    int major, minor;     /* the XRT version (0.0 when not built) */
    char version[32];     /* as XRT spells it, "2.13.0" */
    int n_devices;        /* devices XRT enumerates: what tn_xrt_open would use */
    char lib_dir[512];    /* where XRT's libraries (and its plugins) are; "" unknown */
    bool plugin_found;    /* lib_dir holds TN_XRT_XDNA_PLUGIN */
} tn_xrt_probe;

/* Asks XRT what it sees, the way the backend would open it. root non-NULL
 * (the doctor's fake trees, tests/doctor/): XRT is not asked; ROOT/xrt.fake
 * holds "version=2.18.0", "devices=1" and "lib_dir=/opt/xilinx/xrt/lib"
 * lines (a missing file: XRT not built), and the plugin is looked for under
 * ROOT/lib_dir. Never fails: what cannot be found stays 0 or "". */
void tn_xrt_probe_run(const char *root, tn_xrt_probe *out);

/* One kernel image of the manifest. */
typedef struct tn_xrt_kernel {
    char image[128];   /* file name inside the xclbins folder, no '/' */
    char op[32];       /* the operation it computes ("matmul") */
    char type[16];     /* the weight type it reads (tn_type_name: "q4_0") */
    uint8_t sha256[32];
} tn_xrt_kernel;

typedef struct tn_xrt_manifest {
    int n_kernels;
    tn_xrt_kernel *kernels;
} tn_xrt_manifest;

/* Reads DIR/manifest.json (xclbins/README.md has the format). Garbage, a
 * bad field or an unknown operation or type fails with the file and the
 * entry (TN_ERR_FORMAT); a missing file is TN_ERR_NOT_FOUND. An empty
 * "kernels" array is valid: that is what ships today. */
int tn_xrt_manifest_load(const char *dir, tn_xrt_manifest **out, tn_error *err);
void tn_xrt_manifest_free(tn_xrt_manifest *m);
/* Checks every image's sha256 against the manifest before anything loads
 * it: TN_ERR_IO for an unreadable image, TN_ERR_FORMAT for a mismatch (the
 * message names the image, both digests and the fix). */
int tn_xrt_manifest_verify(const tn_xrt_manifest *m, const char *dir, tn_error *err);

typedef struct tn_xrt_backend tn_xrt_backend;

/* Opens the NPU backend: XRT built in and new enough, a device XRT sees,
 * a manifest whose images verify. Today it never succeeds: it fails with
 * TN_ERR_UNSUPPORTED and the first reason (for example "no kernel images
 * ship in xclbins/ yet"), and the caller runs on the CPU. root: as
 * tn_xrt_probe_run (NULL: the real machine). */
int tn_xrt_open(const char *root, const char *xclbin_dir, tn_xrt_backend **out, tn_error *err);
void tn_xrt_close(tn_xrt_backend *b);

#endif
