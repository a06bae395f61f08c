/* Image decoding for vision prompts (tern-image.h says what and why). */
#include "tern-image.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

G_DEFINE_QUARK(tern-image-error-quark, tern_image_error)

/* The formats the vision path promises; gdk-pixbuf may have loaders for
 * more (SVG, TIFF, ICO...), which stay out: a renderer of untrusted SVG is
 * a different risk, and nothing asks for the rest. */
static const char *const accepted[] = {"png", "jpeg", "gif", "webp"};

static gboolean format_accepted(const char *name) {
    for (gsize i = 0; i < G_N_ELEMENTS(accepted); i++)
        if (name && !g_ascii_strcasecmp(name, accepted[i]))
            return TRUE;
    return FALSE;
}

/* ------------------------------------------------------------- decoding */

typedef struct {
    guint64 max_pixels;
    int width, height; /* declared, once the header is read */
    gboolean seen, too_large;
    int rows_done;     /* bottom of the decoded area so far */
    gboolean updated;  /* the loader reports decoded areas */
} probe;

/* Some decoders (PNG) close without an error on a file cut short and
 * return the rows they got; the decoded area says whether all arrived. */
static void on_area_updated(GdkPixbufLoader *loader, int x, int y, int width, int height,
                            gpointer user) {
    (void)loader;
    (void)x;
    (void)width;
    probe *p = user;
    p->updated = TRUE;
    p->rows_done = MAX(p->rows_done, y + height);
}

static void on_size_prepared(GdkPixbufLoader *loader, int width, int height, gpointer user) {
    probe *p = user;
    p->seen = TRUE;
    p->width = width;
    p->height = height;
    if (width <= 0 || height <= 0 || (guint64)width * (guint64)height > p->max_pixels) {
        p->too_large = TRUE;
        /* Zero tells the loader not to allocate the pixel buffer (the
         * GdkPixbufModuleSizeFunc contract); the caller stops feeding. */
        gdk_pixbuf_loader_set_size(loader, 0, 0);
    }
}

typedef struct {
    FILE *file;
    const guint8 *data;
    gsize len, pos;
} source;

/* Next chunk into buf; 0 at the end, -1 on a read error. */
static gssize source_read(source *src, guint8 *buf, gsize cap) {
    if (src->file) {
        size_t n = fread(buf, 1, cap, src->file);
        if (n == 0 && ferror(src->file))
            return -1;
        return (gssize)n;
    }
    gsize n = MIN(cap, src->len - src->pos);
    memcpy(buf, src->data + src->pos, n);
    src->pos += n;
    return (gssize)n;
}

static void set_unsupported(GError **error, const char *name, const char *format) {
    if (format)
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    "%s: %s images are not supported (PNG, JPEG, WebP and GIF are)", name,
                    format);
    else
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    "%s: not an image in a format Tern reads (PNG, JPEG, WebP or GIF)", name);
}

static void set_too_large(GError **error, const char *name, const probe *p) {
    g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                "%s: the image declares %d x %d pixels (%.0f megapixels); the limit is %.0f "
                "megapixels (refused before decoding)",
                name, p->width, p->height, (double)p->width * p->height / (1024.0 * 1024.0),
                (double)p->max_pixels / (1024.0 * 1024.0));
}

/* The loader's format name into buf ("" until it is known). */
static const char *loader_format(GdkPixbufLoader *loader, char buf[16]) {
    GdkPixbufFormat *f = gdk_pixbuf_loader_get_format(loader);
    buf[0] = '\0';
    if (f) {
        char *name = gdk_pixbuf_format_get_name(f);
        g_strlcpy(buf, name ? name : "", 16);
        g_free(name);
    }
    return buf[0] ? buf : NULL;
}

/* Feeds the loader chunk by chunk, stopping as soon as the header declares
 * too many pixels or the format is one we refuse. Returns the decoded
 * (first frame) pixbuf with a reference, or NULL with error set. */
static GdkPixbuf *decode(source *src, const char *name, guint64 max_pixels, char *format_out,
                         GError **error) {
    GdkPixbufLoader *loader = gdk_pixbuf_loader_new();
    probe p = {.max_pixels = max_pixels};
    g_signal_connect(loader, "size-prepared", G_CALLBACK(on_size_prepared), &p);
    g_signal_connect(loader, "area-updated", G_CALLBACK(on_area_updated), &p);
    char fmt_buf[16];
    guint8 *buf = g_malloc(64 * 1024);
    GError *e = NULL;
    gboolean ok = TRUE, any = FALSE;
    for (;;) {
        gssize n = source_read(src, buf, 64 * 1024);
        if (n < 0) {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_IO, "%s: read error: %s", name,
                        g_strerror(errno));
            ok = FALSE;
            break;
        }
        if (n == 0)
            break;
        any = TRUE;
        if (!gdk_pixbuf_loader_write(loader, buf, (gsize)n, &e)) {
            ok = FALSE;
            break;
        }
        if (p.too_large)
            break;
        const char *fmt = loader_format(loader, fmt_buf);
        if (fmt && !format_accepted(fmt)) {
            set_unsupported(error, name, fmt);
            ok = FALSE;
            break;
        }
    }
    g_free(buf);
    GError *close_error = NULL;
    gboolean closed = gdk_pixbuf_loader_close(loader, &close_error);
    if (ok && !any) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT, "%s: the file is empty",
                    name);
        ok = FALSE;
    }
    const char *fmt = loader_format(loader, fmt_buf);
    GdkPixbuf *pixbuf = NULL;
    if (p.too_large) {
        g_clear_error(error);
        set_too_large(error, name, &p);
    } else if (!ok && e) {
        if (!p.seen && (!fmt || g_error_matches(e, GDK_PIXBUF_ERROR,
                                                GDK_PIXBUF_ERROR_UNKNOWN_TYPE)))
            set_unsupported(error, name, fmt && !format_accepted(fmt) ? fmt : NULL);
        else
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        "%s: damaged image data (%s)", name, e->message);
    } else if (ok && fmt && !format_accepted(fmt)) {
        set_unsupported(error, name, fmt);
    } else if (ok && !closed) {
        /* Truncated files end here: the loader ran out of data. */
        if (!p.seen && (!fmt || g_error_matches(close_error, GDK_PIXBUF_ERROR,
                                                GDK_PIXBUF_ERROR_UNKNOWN_TYPE)))
            set_unsupported(error, name, NULL);
        else
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        "%s: damaged or truncated image (%s)", name,
                        close_error ? close_error->message : "the decoder gave up");
    } else if (ok && p.updated && p.rows_done < p.height) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    "%s: truncated image (%d of its %d rows arrived)", name, p.rows_done,
                    p.height);
    } else if (ok) {
        /* For an animation (GIF) this is its first frame. */
        pixbuf = gdk_pixbuf_loader_get_pixbuf(loader);
        if (pixbuf) {
            g_object_ref(pixbuf);
            g_strlcpy(format_out, fmt ? fmt : "?", 16);
        } else {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        "%s: the decoder produced no picture", name);
        }
    }
    g_clear_error(&e);
    g_clear_error(&close_error);
    g_object_unref(loader);
    return pixbuf;
}

/* ---------------------------------------------------------- conversion */

static guint64 limit_of(const TernImageOptions *opts) {
    return opts && opts->max_pixels ? opts->max_pixels : TERN_IMAGE_DEFAULT_MAX_PIXELS;
}

/* Orientation, fitting and float conversion of a decoded picture. Alpha is
 * composited onto white: what a viewer or a browser shows for a transparent
 * screenshot or logo on a light page. (The reference pipelines drop alpha
 * and keep whatever colour transparent pixels store, often black, which
 * turns black text on a transparent background into black on black.) */
static TernImage *convert(GdkPixbuf *pixbuf, const TernImageOptions *opts, const char *format,
                          const char *name, GError **error) {
    if (gdk_pixbuf_get_colorspace(pixbuf) != GDK_COLORSPACE_RGB ||
        gdk_pixbuf_get_bits_per_sample(pixbuf) != 8 ||
        (gdk_pixbuf_get_n_channels(pixbuf) != 3 && gdk_pixbuf_get_n_channels(pixbuf) != 4)) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    "%s: unexpected pixel layout from the decoder", name);
        return NULL;
    }
    const int sw = gdk_pixbuf_get_width(pixbuf), sh = gdk_pixbuf_get_height(pixbuf);
    if (sw <= 0 || sh <= 0 || (guint64)sw * (guint64)sh > limit_of(opts)) {
        probe p = {.max_pixels = limit_of(opts), .width = sw, .height = sh};
        set_too_large(error, name, &p);
        return NULL;
    }
    /* EXIF orientation (JPEG): a new pixbuf, or the same one with a ref. */
    GdkPixbuf *oriented = gdk_pixbuf_apply_embedded_orientation(pixbuf);
    if (!oriented) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    "%s: out of memory applying the orientation", name);
        return NULL;
    }
    GdkPixbuf *pb = oriented;
    int w = gdk_pixbuf_get_width(pb), h = gdk_pixbuf_get_height(pb);
    const int fit = opts ? opts->fit_side : 0;
    if (fit > 0 && (w > fit || h > fit)) {
        const int nw = MIN(w, fit), nh = MIN(h, fit);
        GdkPixbuf *scaled = gdk_pixbuf_scale_simple(pb, nw, nh, GDK_INTERP_BILINEAR);
        g_object_unref(pb);
        if (!scaled) {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        "%s: out of memory scaling the image", name);
            return NULL;
        }
        pb = scaled;
        w = nw;
        h = nh;
    }
    TernImage *img = g_new0(TernImage, 1);
    img->width = w;
    img->height = h;
    img->source_width = sw;
    img->source_height = sh;
    g_strlcpy(img->format, format ? format : "", sizeof img->format);
    img->rgb = g_try_malloc_n((gsize)w * (gsize)h * 3, sizeof(float));
    if (!img->rgb) {
        g_object_unref(pb);
        g_free(img);
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                    "%s: out of memory for %d x %d pixels", name, w, h);
        return NULL;
    }
    const int nc = gdk_pixbuf_get_n_channels(pb), stride = gdk_pixbuf_get_rowstride(pb);
    const gboolean alpha = gdk_pixbuf_get_has_alpha(pb) && nc == 4;
    img->had_alpha = alpha;
    const guint8 *px = gdk_pixbuf_read_pixels(pb);
    for (int y = 0; y < h; y++) {
        const guint8 *row = px + (gsize)y * (gsize)stride;
        float *out = img->rgb + (gsize)y * (gsize)w * 3;
        for (int x = 0; x < w; x++) {
            const guint8 *p = row + (gsize)x * (gsize)nc;
            const float a = alpha ? p[3] / 255.0f : 1.0f;
            for (int c = 0; c < 3; c++)
                out[x * 3 + c] = a * (p[c] / 255.0f) + (1.0f - a);
        }
    }
    g_object_unref(pb);
    return img;
}

/* ------------------------------------------------------------- public */

TernImage *tern_image_load_bytes(const void *data, gsize len, const char *name,
                                 const TernImageOptions *opts, GError **error) {
    g_return_val_if_fail(data || len == 0, NULL);
    if (!name)
        name = "image";
    source src = {.data = data, .len = len};
    char format[16] = "";
    GdkPixbuf *pb = decode(&src, name, limit_of(opts), format, error);
    if (!pb)
        return NULL;
    TernImage *img = convert(pb, opts, format, name, error);
    g_object_unref(pb);
    return img;
}

TernImage *tern_image_load_file(const char *path, const TernImageOptions *opts, GError **error) {
    g_return_val_if_fail(path != NULL, NULL);
    FILE *f = fopen(path, "rb");
    if (!f) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_IO, "%s: %s", path,
                    g_strerror(errno));
        return NULL;
    }
    source src = {.file = f};
    char format[16] = "";
    GdkPixbuf *pb = decode(&src, path, limit_of(opts), format, error);
    fclose(f);
    if (!pb)
        return NULL;
    TernImage *img = convert(pb, opts, format, path, error);
    g_object_unref(pb);
    return img;
}

TernImage *tern_image_load_data_uri(const char *uri, const TernImageOptions *opts,
                                    GError **error) {
    g_return_val_if_fail(uri != NULL, NULL);
    const char *comma = strchr(uri, ',');
    if (g_ascii_strncasecmp(uri, "data:", 5) != 0 || !comma) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    "image URL: only data: URIs are read (data:image/png;base64,...)");
        return NULL;
    }
    g_autofree char *header = g_strndup(uri + 5, (gsize)(comma - uri - 5));
    if (!g_str_has_suffix(header, ";base64")) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    "image URL: the data: URI is not base64-encoded");
        return NULL;
    }
    /* g_base64_decode skips characters outside the alphabet; a payload that
     * is not an image then fails to decode, with the same clear message. */
    gsize len = 0;
    g_autofree guchar *bytes = g_base64_decode(comma + 1, &len);
    return tern_image_load_bytes(bytes ? (const void *)bytes : "", bytes ? len : 0,
                                 "image URL", opts, error);
}

TernImage *tern_image_from_pixbuf(GdkPixbuf *pixbuf, const TernImageOptions *opts,
                                  GError **error) {
    g_return_val_if_fail(GDK_IS_PIXBUF(pixbuf), NULL);
    return convert(pixbuf, opts, "pixbuf", "image", error);
}

void tern_image_free(TernImage *image) {
    if (!image)
        return;
    g_free(image->rgb);
    g_free(image);
}
