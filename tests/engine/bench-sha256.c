/* meson test --benchmark sha256: SHA-256's rate with the SHA extensions,
 * with the scalar reference, and with GLib's GChecksum (what the model
 * manager used before), on 512 MB in memory, best of three each; with a
 * path in TERN_BENCH_SHA256_FILE, that file's bytes read in 1 MiB pieces
 * as the manager reads a download (docs/MODELS.md). */
#include "cpu/tn-cpu.h"
#include "tn-session.h"

#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static double best_rate(const guchar *buf, size_t n, int how) {
    double best = 0;
    for (int r = 0; r < 3; r++) {
        const gint64 t0 = g_get_monotonic_time();
        if (how == 2) {
            g_free(g_compute_checksum_for_data(G_CHECKSUM_SHA256, buf, n));
        } else {
            tn_sha256_force_scalar(how == 1);
            tn_sha256 c;
            uint8_t d[32];
            tn_sha256_init(&c);
            tn_sha256_update(&c, buf, n);
            tn_sha256_final(&c, d);
        }
        const double s = (double)(g_get_monotonic_time() - t0) / 1e6;
        if (s > 0 && n / 1e6 / s > best)
            best = n / 1e6 / s;
    }
    tn_sha256_force_scalar(false);
    return best;
}

int main(void) {
    const size_t n = (size_t)512 << 20;
    guchar *buf = g_malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = (guchar)(i * 131 + (i >> 12));
    printf("sha256, 512 MB in memory, best of 3 (MB/s):\n");
    printf("  SHA extensions  %s\n", tn_cpu_has_sha() ? "" : "(absent on this CPU: scalar)");
    printf("  tn_sha256        %8.0f\n", best_rate(buf, n, 0));
    printf("  scalar reference %8.0f\n", best_rate(buf, n, 1));
    printf("  GLib GChecksum   %8.0f\n", best_rate(buf, n, 2));
    g_free(buf);
    const char *path = getenv("TERN_BENCH_SHA256_FILE");
    if (path && *path) {
        const int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "%s: cannot open\n", path);
            return 1;
        }
        guchar *piece = g_malloc(1 << 20);
        tn_sha256 c;
        uint8_t d[32];
        off_t off = 0;
        ssize_t got;
        const gint64 t0 = g_get_monotonic_time();
        tn_sha256_init(&c);
        while ((got = pread(fd, piece, 1 << 20, off)) > 0) {
            tn_sha256_update(&c, piece, (size_t)got);
            off += got;
        }
        tn_sha256_final(&c, d);
        const double s = (double)(g_get_monotonic_time() - t0) / 1e6;
        printf("  %s: %.2f GB in %.2f s, %.0f MB/s\n", path, off / 1e9, s, off / 1e6 / s);
        g_free(piece);
        close(fd);
    }
    return 0;
}
