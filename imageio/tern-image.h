/* Image decoding for vision prompts: files, bytes, data: URIs and pixbufs
 * to the float RGB the vision encoder takes (tn_vision_encode).
 *
 * Outside the engine (which stays GLib-free); used by the CLI, the server
 * and the app. Decoding goes through gdk-pixbuf: PNG (8/16-bit, grayscale,
 * palette, alpha), JPEG (EXIF orientation applied), GIF (first frame), WebP
 * (with Debian's webp-pixbuf-loader). Other formats are refused.
 *
 * Untrusted input is the normal case: the declared size is checked against
 * a pixel limit as soon as the decoder has read the header, before any
 * pixel buffer is made (a "decompression bomb" declaring 100000 x 100000
 * pixels costs a few kilobytes of reading); damaged, truncated and unknown
 * data fail with a GError naming the source. Nothing here aborts.
 *
 * The format is decided by the first bytes (magic numbers) before any
 * decoder runs, and only that format's loader is used: gdk-pixbuf's own
 * sniffing would pass SVG, TIFF or XPM data to their decoders. A JPEG must
 * be complete (its end marker present, or, for a sequential Huffman-coded
 * one, every MCU of its last scan) before it is decoded, since JPEG
 * decoders turn a short file into a grey picture; a WebP must hold the
 * bytes its RIFF header declares; a PNG must deliver every row.
 */
#ifndef TERN_IMAGE_H
#define TERN_IMAGE_H

#include <gdk-pixbuf/gdk-pixbuf.h>
#include <glib.h>

G_BEGIN_DECLS

#define TERN_IMAGE_ERROR (tern_image_error_quark())
GQuark tern_image_error_quark(void);

typedef enum {
    TERN_IMAGE_ERROR_IO,          /* cannot read the file */
    TERN_IMAGE_ERROR_UNSUPPORTED, /* not an image, or a format other than PNG/JPEG/WebP/GIF */
    TERN_IMAGE_ERROR_CORRUPT,     /* damaged or truncated */
    TERN_IMAGE_ERROR_TOO_LARGE,   /* declared dimensions beyond the pixel limit */
} TernImageError;

/* 64 megapixels: any camera photo of today; the decoded buffer of the
 * largest accepted image is then at most 256 MiB. */
#define TERN_IMAGE_DEFAULT_MAX_PIXELS (64u * 1024u * 1024u)

/* A JPEG is read whole before decoding (to check that it is complete):
 * the largest file it may be. */
#define TERN_IMAGE_MAX_JPEG_BYTES (256u * 1024u * 1024u)
/* Scans a JPEG may have. The decoder goes over every block of the picture
 * again for each scan, even one of no data: a 199 KB progressive
 * 4096 x 4096 JPEG with 10,000 empty refinement scans took 7 minutes to
 * decode (the server's decode threads all held by two such images).
 * Encoders write up to about a dozen (jpegtran, mozjpeg: 10 to 20). */
#define TERN_IMAGE_MAX_JPEG_SCANS 100u
/* Scans times pixels a JPEG may have: the decoder's work, as each scan
 * costs an output pass over the whole picture, whatever the scan holds.
 * The scan limit alone let an 8192 x 8192 progressive file of 99 scans
 * through: 11 s to decode grey, 21 s in 4:4:4 colour (the 2-core test
 * machine). The bound is 12 passes at the pixel limit: a camera's or an
 * encoder's progressive file (libjpeg writes 10 scans for colour, mozjpeg
 * about a dozen) passes up to 64 megapixels, one of 15 scans up to 51; the
 * worst file it accepts, 12 scans of 8192 x 8192, decodes in 1.7 s of CPU
 * grey or 4:2:0. A frame whose colour components are all at full
 * resolution (4:4:4, CMYK) counts its pixels half as much again: its
 * passes cost more (14 scans of 57 megapixels took 3.1 s), and it is held
 * to 8 passes at 64 megapixels (about 2 s at worst). docs/VISION.md has the
 * measurements. */
#define TERN_IMAGE_MAX_JPEG_SCAN_PIXELS (12ull * TERN_IMAGE_DEFAULT_MAX_PIXELS)
/* Bytes a JPEG may take to decode: the picture (3 bytes a pixel, 4 for
 * CMYK), plus, for a file of more than one scan (progressive, or a
 * sequential one with a scan per component), every DCT coefficient, which
 * the decoder holds until the last scan (2 bytes each, 64 a block, for
 * each component at its sampling). A 393 KB progressive 8192 x 8192 4:4:4
 * file of 3 scans took 582 MB; one in 4:2:0 (what cameras write) needs
 * 384 MiB at the pixel limit, and passes. */
#define TERN_IMAGE_MAX_JPEG_DECODE_BYTES (512ull * 1024 * 1024)

typedef struct {
    guint64 max_pixels; /* 0: TERN_IMAGE_DEFAULT_MAX_PIXELS */
    /* > 0: a dimension longer than this is first reduced to fit_side (area
     * filter: gdk-pixbuf's BILINEAR integrates over each output pixel when
     * reducing), each dimension on its own. Pass the encoder's input side
     * (tn_vision_input_side): its bilinear resampling to that square then
     * never reduces, so fine detail does not alias. (The encoder squashes
     * any aspect to its square, as Gemma 3's processor does, so reducing the
     * two dimensions independently loses nothing.) A JPEG is decoded
     * reduced by libjpeg to no less than twice fit_side a side first
     * (docs/VISION.md); source_width and source_height stay as stored. */
    int fit_side;
} TernImageOptions;

typedef struct {
    int width, height;               /* of rgb (after orientation and fitting) */
    float *rgb;                      /* [height][width][3], row-major, values in [0, 1] */
    int source_width, source_height; /* as stored (before orientation and fitting) */
    char format[16];                 /* "png", "jpeg", "gif", "webp" */
    gboolean had_alpha;              /* alpha was composited onto white */
} TernImage;

/* The format its first bytes name: "png", "jpeg", "gif", "webp", or NULL
 * for anything else (the only formats the loaders below accept). */
const char *tern_image_sniff(const void *data, gsize len);

/* opts may be NULL (defaults). `name` labels messages for bytes. */
TernImage *tern_image_load_file(const char *path, const TernImageOptions *opts, GError **error);
TernImage *tern_image_load_bytes(const void *data, gsize len, const char *name,
                                 const TernImageOptions *opts, GError **error);
/* "data:image/png;base64,...." (OpenAI image_url content); base64 only. */
TernImage *tern_image_load_data_uri(const char *uri, const TernImageOptions *opts,
                                    GError **error);
/* An already decoded picture (the app's clipboard texture as a pixbuf). */
TernImage *tern_image_from_pixbuf(GdkPixbuf *pixbuf, const TernImageOptions *opts,
                                  GError **error);
void tern_image_free(TernImage *image);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TernImage, tern_image_free)

G_END_DECLS

#endif
