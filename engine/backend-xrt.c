/* The AMD NPU backend through XRT (docs/BACKENDS.md, docs/DOCTOR.md). No
 * kernel images ship yet, so tn_xrt_open always refuses with the first
 * reason it finds (not built with XRT, no device, XRT too old, no kernels)
 * and the model runs on the CPU, saying why; every operation is the CPU's.
 * Nothing here pretends to compute. */
#include "tn-backend.h"
#include "tn-xrt.h"

static int xrt_open(tn_backend *be, tn_error *err) {
    tn_xrt_backend *b = NULL;
    /* NULL root: the real machine. NULL xclbins folder: the open refuses
     * with "no kernel images ship" once a device is seen. */
    int rc = tn_xrt_open(NULL, NULL, &b, err);
    be->state = b;
    return rc;
}

static void xrt_close(tn_backend *be) { tn_xrt_close(be->state); }

const tn_backend_ops tn_backend_xrt_ops = {
    .name = "xrt",
    .by_name_only = true,
    .open = xrt_open,
    .close = xrt_close,
};
