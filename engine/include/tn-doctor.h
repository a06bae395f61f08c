/* The hardware doctor: what `tern-cli doctor` prints and the app's Hardware
 * page shows. Each line says OK, or the problem and its fix: the CPU (model,
 * kernel family, bandwidth, the decode bound of a model) and everything the
 * NPU backend needs (the device node and its permissions, the amdxdna driver
 * and firmware, the kernel, the memlock limit, XRT and its plugin, the kernel
 * manifest). docs/DOCTOR.md lists the checks.
 *
 * Texts are tn_errors made by tn_fail, so that the callers translate them as
 * they translate the engine's errors (tn_error_format, docs/TRANSLATING.md).
 *
 * root: the doctor reads ROOT/dev, ROOT/sys, ROOT/proc and ROOT/etc instead
 * of the machine's (tern-cli reads it from $TERN_DOCTOR_ROOT): the tests'
 * fake device trees. The process' credentials come from ROOT/proc/self/status
 * as well, so that a tree decides who may open its fake device; with a root
 * nothing is opened or asked by ioctl, and XRT's answers come from
 * ROOT/xrt.fake (engine/include/tn-xrt.h). */
#ifndef TN_DOCTOR_H
#define TN_DOCTOR_H

#include "tern.h"

typedef enum tn_doctor_status {
    TN_DOCTOR_OK = 0,
    TN_DOCTOR_INFO = 1, /* nothing to fix; not checked (no model, --quick) */
    TN_DOCTOR_FAIL = 2,
} tn_doctor_status;

typedef enum tn_doctor_group {
    TN_DOCTOR_CPU = 0,
    TN_DOCTOR_NPU = 1,
} tn_doctor_group;

typedef struct tn_doctor_line {
    const char *id;   /* stable name for scripts and tests: "npu.device" */
    int group;        /* tn_doctor_group */
    int status;       /* tn_doctor_status */
    tn_error text;    /* "NPU device: /dev/accel/accel0 opens" */
    tn_error fix;     /* the fix; fix.message[0] == '\0' when there is none */
} tn_doctor_line;

#define TN_DOCTOR_MAX_LINES 16

typedef struct tn_doctor_report {
    int n_lines;
    tn_doctor_line lines[TN_DOCTOR_MAX_LINES];
    bool cpu_ok;  /* the CPU backend can run */
    bool npu_ok;  /* the XRT backend can run (never today: no kernels ship) */
} tn_doctor_report;

typedef struct tn_doctor_params {
    const char *root;        /* NULL: the machine itself */
    const char *xclbin_dir;  /* the kernel manifest's folder; NULL: not found */
    const tn_gguf *model;    /* the model's file (tn_gguf_open: no need to load
                              * it); NULL: no decode bound, memlock against 1 GiB */
    bool measure_bandwidth;  /* false: the bandwidth line says it was skipped */
    int n_threads;           /* for the bandwidth; <= 0: the physical cores */
} tn_doctor_params;

/* Fills *report (about 40 KiB: allocate it). Never fails: what cannot be
 * read becomes a line that says so. Measuring the bandwidth takes a second or
 * two and 256 MiB to 1 GiB of memory. */
void tn_doctor_run(const tn_doctor_params *params, tn_doctor_report *report);
/* Bytes of weights one decode step reads (the decode bound's numerator):
 * every tensor, except one row of an untied token embedding and of Gemma
 * 4's per-layer token table. */
uint64_t tn_doctor_weight_bytes_per_token(const tn_gguf *g);

/* Facts the doctor compares against, for its tests and docs. */
#define TN_DOCTOR_KERNEL_MIN_MAJOR 6
#define TN_DOCTOR_KERNEL_MIN_MINOR 10
#define TN_DOCTOR_XDNA_DRM_MIN_MAJOR 0
#define TN_DOCTOR_XDNA_DRM_MIN_MINOR 6
#define TN_DOCTOR_FW_MIN_MAJOR 1
#define TN_DOCTOR_FW_MIN_MINOR 1
#define TN_DOCTOR_FW_MAX_MAJOR 1
#define TN_DOCTOR_MEMLOCK_DEFAULT_NEED ((uint64_t)1 << 30)

#endif
