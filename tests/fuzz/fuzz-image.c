/* libFuzzer target for imageio/tern-image.c: a picture's bytes, as a
 * client's image_url and a drop in the app give them. Tern's own code is
 * what runs first on them (the magic-number sniff, the JPEG/GIF/PNG/WebP
 * structure walks that decide when the data ends, the RIFF and VP8X
 * headers, the pixel limit read from the header, orientation, fitting,
 * the float conversion, the data: URI's base64 and its re-padding);
 * gdk-pixbuf's loaders then decode (not instrumented here).
 *
 * The input is the picture. Its length picks the options (fit_side 0, 16,
 * 224 or 896; a 1-megapixel limit, so a declared bomb costs nothing), and
 * every other length also sends it as a base64 data: URI without its '='
 * padding. Input that starts with "data:" goes to the URI reader as text.
 * Promises: no GLib critical on the way; a picture or an error, never both
 * or neither; a picture's
 * sizes are positive, its source within the limit, fitted within
 * fit_side, its format one the sniff names, every value in [0, 1]; the
 * data: URI decodes to the same picture as the bytes.
 *
 * Seeds: tests/fuzz/corpus/image/ (PNG RGB and RGBA, JPEG, WebP, GIF).
 * Run:   build-fuzz/tests/fuzz/fuzz-image tests/fuzz/corpus/image
 */
#include "tern-image.h"
#include "fuzz-promise.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIXELS (1u << 20)

static void check(TernImage *img, GError *e, int fit) {
    PROMISE((img == NULL) != (e == NULL));
    if (!img) {
        PROMISE(e->message != NULL);
        return;
    }
    PROMISE(img->width > 0 && img->height > 0 && img->rgb != NULL);
    PROMISE(img->source_width > 0 && img->source_height > 0);
    PROMISE((uint64_t)img->source_width * (uint64_t)img->source_height <= MAX_PIXELS);
    if (fit > 0)
        PROMISE(img->width <= fit && img->height <= fit);
    PROMISE(!strcmp(img->format, "png") || !strcmp(img->format, "jpeg") ||
            !strcmp(img->format, "gif") || !strcmp(img->format, "webp"));
    const size_t n = (size_t)img->width * (size_t)img->height * 3;
    for (size_t i = 0; i < n; i++)
        PROMISE(img->rgb[i] >= 0.0f && img->rgb[i] <= 1.0f);
}

/* A GLib critical is a broken precondition somewhere under the reader
 * (gdk-pixbuf's loaders given what they should not have been given): a
 * crash here, with the input, though it only warns in the app. Except the
 * one Tern cannot keep out (docs/VISION.md): webp-pixbuf-loader, given an
 * animation whose first frame's VP8 data is damaged, warns that it "could
 * not instantiate" its iterator and then asks that missing iterator for a
 * picture. The reader still returns an error for such a file. */
static gboolean webp_iter_failed;

static void on_warning(const char *domain, GLogLevelFlags level, const char *message,
                       gpointer data) {
    (void)domain;
    (void)level;
    (void)data;
    if (strstr(message, "Could not instantiate WebP implementation of GdkPixbufAnimationIter"))
        webp_iter_failed = TRUE;
}

static void on_critical(const char *domain, GLogLevelFlags level, const char *message,
                        gpointer data) {
    (void)level;
    (void)data;
    if (webp_iter_failed)
        return;
    fprintf(stderr, "%s-CRITICAL: %s\n", domain ? domain : "", message);
    __builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    static const char *const domains[] = {"GLib", "GLib-GObject", "GLib-GIO", "GdkPixbuf",
                                          "tern-image"};
    for (size_t i = 0; i < sizeof domains / sizeof domains[0]; i++)
        g_log_set_handler(domains[i], G_LOG_LEVEL_CRITICAL, on_critical, NULL);
    g_log_set_handler(NULL, G_LOG_LEVEL_WARNING, on_warning, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const int fits[4] = {0, 16, 224, 896};
    const int fit = fits[size & 3];
    const TernImageOptions opts = {.max_pixels = MAX_PIXELS, .fit_side = fit};
    GError *e = NULL;

    webp_iter_failed = FALSE;

    if (size >= 5 && !memcmp(data, "data:", 5)) {
        char *uri = g_strndup((const char *)data, size);
        TernImage *img = tern_image_load_data_uri(uri, &opts, &e);
        check(img, e, fit);
        tern_image_free(img);
        g_clear_error(&e);
        g_free(uri);
        return 0;
    }

    TernImage *img = tern_image_load_bytes(data, size, "fuzz", &opts, &e);
    check(img, e, fit);
    if ((size >> 2) & 1) {
        /* The same bytes as a client would send them, padding left out. */
        char *b64 = g_base64_encode(data, size);
        char *end = b64 + strlen(b64);
        while (end > b64 && end[-1] == '=')
            *--end = '\0';
        char *uri = g_strconcat("data:image/png;base64,", b64, NULL);
        GError *ue = NULL;
        TernImage *again = tern_image_load_data_uri(uri, &opts, &ue);
        check(again, ue, fit);
        PROMISE((img == NULL) == (again == NULL));
        if (img && again)
            PROMISE(img->width == again->width && img->height == again->height &&
                    img->source_width == again->source_width &&
                    img->source_height == again->source_height &&
                    !strcmp(img->format, again->format) &&
                    !memcmp(img->rgb, again->rgb,
                            (size_t)img->width * (size_t)img->height * 3 * sizeof(float)));
        tern_image_free(again);
        g_clear_error(&ue);
        g_free(uri);
        g_free(b64);
    }
    tern_image_free(img);
    g_clear_error(&e);
    return 0;
}
