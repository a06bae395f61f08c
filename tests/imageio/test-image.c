/* Image decoding for vision prompts (imageio/tern-image.c), on images this
 * test writes itself: gdk-pixbuf's savers (PNG with alpha, JPEG, WebP),
 * PNGs assembled by hand with zlib (grayscale, 16-bit, a header declaring
 * 100000 x 100000 pixels), a GIF assembled by hand (two frames), a JPEG
 * given an EXIF orientation by hand, a truncated file, a text file named
 * .png, a data: URI, and hostile headers (SVG, TIFF, JPEGs cut short or
 * declaring 8000 x 8000 pixels in 324 bytes, a WebP cut short).
 */
#include "tern-embed-cache.h"
#include "tern-image.h"
#include "tn-test.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>
#include <zlib.h>

static char *tmp_path(const char *name) {
    return g_build_filename(tn_test_tmpdir(), name, NULL);
}

static void write_file(const char *path, const void *data, gsize len) {
    GError *e = NULL;
    CHECKF(g_file_set_contents(path, data, (gssize)len, &e), "%s", e ? e->message : "");
    g_clear_error(&e);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const float *px(const TernImage *im, int x, int y) {
    return im->rgb + ((size_t)y * im->width + x) * 3;
}

static bool near3(const float *p, float r, float g, float b, float tol) {
    return fabsf(p[0] - r) <= tol && fabsf(p[1] - g) <= tol && fabsf(p[2] - b) <= tol;
}

/* ------------------------------------------------------- PNG by hand */

static void put32(GByteArray *a, guint32 v) {
    guint8 b[4] = {v >> 24, v >> 16, v >> 8, v};
    g_byte_array_append(a, b, 4);
}

static void chunk(GByteArray *png, const char *type, const guint8 *data, guint32 len) {
    put32(png, len);
    g_byte_array_append(png, (const guint8 *)type, 4);
    if (len)
        g_byte_array_append(png, data, len);
    uLong crc = crc32(0, (const Bytef *)type, 4);
    if (len)
        crc = crc32(crc, data, len);
    put32(png, (guint32)crc);
}

/* raw: height rows of row_bytes (no filter bytes yet). */
static GByteArray *png_by_hand(guint32 w, guint32 h, int depth, int ctype, const guint8 *raw,
                               gsize row_bytes) {
    static const guint8 sig[8] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n'};
    GByteArray *png = g_byte_array_new();
    g_byte_array_append(png, sig, 8);
    guint8 ihdr[13] = {w >> 24, w >> 16, w >> 8, w, h >> 24, h >> 16, h >> 8, h,
                       (guint8)depth, (guint8)ctype, 0, 0, 0};
    chunk(png, "IHDR", ihdr, 13);
    if (raw) {
        gsize n = (row_bytes + 1) * h;
        guint8 *filtered = g_malloc(n);
        for (guint32 y = 0; y < h; y++) {
            filtered[y * (row_bytes + 1)] = 0;
            memcpy(filtered + y * (row_bytes + 1) + 1, raw + y * row_bytes, row_bytes);
        }
        uLongf zlen = compressBound(n);
        guint8 *z = g_malloc(zlen);
        CHECK(compress(z, &zlen, filtered, n) == Z_OK);
        chunk(png, "IDAT", z, (guint32)zlen);
        g_free(z);
        g_free(filtered);
    } else {
        /* A bomb: a little compressed data that would inflate to the
         * declared size; the decoder must not get that far. */
        guint8 zeros[4096] = {0};
        uLongf zlen = compressBound(sizeof zeros);
        guint8 *z = g_malloc(zlen);
        compress(z, &zlen, zeros, sizeof zeros);
        chunk(png, "IDAT", z, (guint32)zlen);
        g_free(z);
    }
    chunk(png, "IEND", NULL, 0);
    return png;
}

static TernImage *load(const char *path, const TernImageOptions *o, GError **e) {
    TernImage *im = tern_image_load_file(path, o, e);
    return im;
}

static void hand_pngs(void) {
    /* 8-bit grayscale ramp, 4 x 2. */
    guint8 gray[8] = {0, 85, 170, 255, 255, 170, 85, 0};
    GByteArray *png = png_by_hand(4, 2, 8, 0, gray, 4);
    g_autofree char *p1 = tmp_path("gray8.png");
    write_file(p1, png->data, png->len);
    g_byte_array_unref(png);
    GError *e = NULL;
    TernImage *im = load(p1, NULL, &e);
    CHECKF(im != NULL, "gray8: %s", e ? e->message : "");
    if (im) {
        CHECK(im->width == 4 && im->height == 2 && !strcmp(im->format, "png"));
        CHECK(near3(px(im, 0, 0), 0, 0, 0, 1e-6f) && near3(px(im, 3, 0), 1, 1, 1, 1e-6f));
        CHECK(near3(px(im, 1, 0), 85 / 255.0f, 85 / 255.0f, 85 / 255.0f, 1e-6f));
        CHECK(!im->had_alpha);
    }
    tern_image_free(im);
    g_clear_error(&e);

    /* 16-bit RGB, 2 x 1: (65535, 0, 32768) and (0, 65535, 257). */
    guint8 rgb16[12] = {0xff, 0xff, 0, 0, 0x80, 0x00, 0, 0, 0xff, 0xff, 0x01, 0x01};
    png = png_by_hand(2, 1, 16, 2, rgb16, 12);
    g_autofree char *p2 = tmp_path("rgb16.png");
    write_file(p2, png->data, png->len);
    g_byte_array_unref(png);
    im = load(p2, NULL, &e);
    CHECKF(im != NULL, "rgb16: %s", e ? e->message : "");
    if (im) {
        CHECK(im->width == 2 && im->height == 1);
        CHECKF(near3(px(im, 0, 0), 1, 0, 0.5f, 1.0f / 255) &&
                   near3(px(im, 1, 0), 0, 1, 1.0f / 255, 1.0f / 255),
               "16-bit values: %g %g %g / %g %g %g", px(im, 0, 0)[0], px(im, 0, 0)[1],
               px(im, 0, 0)[2], px(im, 1, 0)[0], px(im, 1, 0)[1], px(im, 1, 0)[2]);
    }
    tern_image_free(im);
    g_clear_error(&e);

    /* 16-bit grayscale with alpha (type 4): one transparent, one opaque. */
    guint8 ga16[8] = {0, 0, 0, 0, 0x40, 0x00, 0xff, 0xff};
    png = png_by_hand(2, 1, 16, 4, ga16, 8);
    g_autofree char *p3 = tmp_path("ga16.png");
    write_file(p3, png->data, png->len);
    g_byte_array_unref(png);
    im = load(p3, NULL, &e);
    CHECKF(im != NULL, "gray+alpha 16: %s", e ? e->message : "");
    if (im) {
        CHECK(im->had_alpha);
        CHECKF(near3(px(im, 0, 0), 1, 1, 1, 1e-6f), "transparent black is not white");
        CHECK(near3(px(im, 1, 0), 0.25f, 0.25f, 0.25f, 1.0f / 255));
    }
    tern_image_free(im);
    g_clear_error(&e);

    /* The bomb: 100000 x 100000 declared, refused before decoding. */
    png = png_by_hand(100000, 100000, 8, 6, NULL, 0);
    g_autofree char *p4 = tmp_path("bomb.png");
    write_file(p4, png->data, png->len);
    double t0 = now_s();
    im = tern_image_load_bytes(png->data, png->len, "bomb.png", NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE));
    CHECKF(e && strstr(e->message, "100000 x 100000") && strstr(e->message, "bomb.png"),
           "bomb message: %s", e ? e->message : "");
    g_clear_error(&e);
    im = load(p4, NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE));
    CHECKF(now_s() - t0 < 2.0, "the bomb took %.2f s", now_s() - t0);
    g_clear_error(&e);
    g_byte_array_unref(png);
    /* A smaller limit applies too: 8 x 8 > 32 pixels. */
    png = png_by_hand(8, 8, 8, 0, (guint8[64]){0}, 8);
    TernImageOptions small = {.max_pixels = 32};
    im = tern_image_load_bytes(png->data, png->len, "limit.png", &small, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE));
    g_clear_error(&e);
    g_byte_array_unref(png);
}

/* A copy of png with a chunk put in at byte `at` (a chunk boundary). */
static GByteArray *with_chunk(const GByteArray *png, gsize at, const char *type,
                              const guint8 *data, guint32 len) {
    GByteArray *out = g_byte_array_sized_new(png->len + len + 12);
    g_byte_array_append(out, png->data, (guint)at);
    chunk(out, type, data, len);
    g_byte_array_append(out, png->data + at, (guint)(png->len - at));
    return out;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Decodes png and checks it gives exactly the pixels of `want`. */
static void same_pixels(const GByteArray *png, const TernImage *want, const char *label) {
    GError *e = NULL;
    TernImage *im = tern_image_load_bytes(png->data, png->len, label, NULL, &e);
    CHECKF(im != NULL, "%s: %s", label, e ? e->message : "");
    if (im && want) {
        CHECKF(im->width == want->width && im->height == want->height &&
                   im->had_alpha == want->had_alpha &&
                   !memcmp(im->rgb, want->rgb,
                           sizeof(float) * 3 * (size_t)want->width * (size_t)want->height),
               "%s: not the pixels of the same PNG without its extra chunks", label);
    }
    tern_image_free(im);
    g_clear_error(&e);
}

/* An APNG decodes to its default image (IHDR + IDAT; the animation chunks
 * are ancillary and dropped before the loader): with an fcTL before IDAT,
 * as APNG encoders write them, that image is the first frame, which a
 * browser shows first. Without one the default image is outside the
 * animation (APNG-aware viewers skip it); Tern shows it on purpose, as
 * every viewer without APNG support does: the author's still picture
 * (docs/VISION.md, "Animations"). 4 x 4 RGB: red default image, blue
 * frame in fdAT. */
static void apng_zdata(const guint8 rgb[3], guint8 **z, uLongf *zlen) {
    guint8 raw[4 * 13];
    for (int y = 0; y < 4; y++) {
        raw[y * 13] = 0;
        for (int x = 0; x < 4; x++)
            memcpy(raw + y * 13 + 1 + x * 3, rgb, 3);
    }
    *zlen = compressBound(sizeof raw);
    *z = g_malloc(*zlen);
    CHECK(compress(*z, zlen, raw, sizeof raw) == Z_OK);
}

static void fctl(GByteArray *png, guint32 seq) {
    guint8 d[26] = {seq >> 24, seq >> 16, seq >> 8, seq, 0, 0, 0, 4, 0, 0, 0, 4};
    d[21] = 1; /* a delay of 1/10 s */
    d[23] = 10;
    chunk(png, "fcTL", d, sizeof d);
}

static void apng(void) {
    static const guint8 red[3] = {255, 0, 0}, blue[3] = {0, 0, 255};
    for (int in_animation = 1; in_animation >= 0; in_animation--) {
        static const guint8 sig[8] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n'};
        static const guint8 ihdr[13] = {0, 0, 0, 4, 0, 0, 0, 4, 8, 2, 0, 0, 0};
        GByteArray *png = g_byte_array_new();
        g_byte_array_append(png, sig, 8);
        chunk(png, "IHDR", ihdr, 13);
        const guint8 actl[8] = {0, 0, 0, (guint8)(1 + in_animation), 0, 0, 0, 0};
        chunk(png, "acTL", actl, 8);
        guint32 seq = 0;
        if (in_animation)
            fctl(png, seq++);
        guint8 *z = NULL;
        uLongf zlen = 0;
        apng_zdata(red, &z, &zlen);
        chunk(png, "IDAT", z, (guint32)zlen);
        g_free(z);
        fctl(png, seq++);
        apng_zdata(blue, &z, &zlen);
        GByteArray *fdat = g_byte_array_new();
        put32(fdat, seq++);
        g_byte_array_append(fdat, z, (guint)zlen);
        chunk(png, "fdAT", fdat->data, fdat->len);
        g_byte_array_unref(fdat);
        g_free(z);
        chunk(png, "IEND", NULL, 0);
        GError *e = NULL;
        TernImage *im = tern_image_load_bytes(png->data, png->len, "anim.png", NULL, &e);
        CHECKF(im != NULL && im->width == 4 && im->height == 4 && near3(px(im, 2, 2), 1, 0, 0, 0),
               "APNG, default image %s the animation: %s", in_animation ? "in" : "outside",
               e ? e->message : "not the red default image");
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(png);
    }
}

/* A PNG's chunks other than those of its pixels: libpng's progressive
 * reader gathers each one whole, copying what it holds again on every
 * 64 KiB write, so one 20 MB chunk took 22 s (100 MB, minutes). They are
 * dropped before the loader; the pixels stay the same, and a critical chunk
 * too long to be valid is refused. */
static void png_chunks(void) {
    GError *e = NULL;
    /* 16 x 16 RGB, every pixel different. */
    guint8 rgb[16 * 16 * 3];
    for (int i = 0; i < 16 * 16 * 3; i++)
        rgb[i] = (guint8)(i * 7 + 3);
    GByteArray *base = png_by_hand(16, 16, 8, 2, rgb, 16 * 3);
    const gsize after_ihdr = 8 + 12 + 13, before_iend = base->len - 12;
    TernImage *want = tern_image_load_bytes(base->data, base->len, "base.png", NULL, &e);
    CHECKF(want != NULL, "base.png: %s", e ? e->message : "");
    g_clear_error(&e);

    /* Text and other metadata before IDAT and after it. */
    static const char text[] = "Comment\0a picture";
    static const guint8 itxt[] = "Title\0\0\0en\0Titel\0\xc3\xa9t\xc3\xa9";
    static const guint8 gama[4] = {0, 0, 0xb1, 0x8f};
    static const guint8 phys[9] = {0, 0, 0x0b, 0x13, 0, 0, 0x0b, 0x13, 1};
    GByteArray *a = with_chunk(base, after_ihdr, "tEXt", (const guint8 *)text, sizeof text - 1);
    GByteArray *b = with_chunk(a, after_ihdr, "iTXt", itxt, sizeof itxt - 1);
    GByteArray *c = with_chunk(b, after_ihdr, "gAMA", gama, sizeof gama);
    GByteArray *d = with_chunk(c, after_ihdr, "pHYs", phys, sizeof phys);
    GByteArray *meta = with_chunk(d, d->len - 12, "tEXt", (const guint8 *)text, sizeof text - 1);
    same_pixels(meta, want, "text.png");
    g_byte_array_unref(a);
    g_byte_array_unref(b);
    g_byte_array_unref(c);
    g_byte_array_unref(d);
    g_byte_array_unref(meta);

    /* A palette with transparency (PLTE, tRNS), metadata around them. */
    guint8 idx[16];
    for (int i = 0; i < 16; i++)
        idx[i] = (guint8)(i % 4);
    GByteArray *pal = g_byte_array_new();
    {
        GByteArray *t = png_by_hand(4, 4, 8, 3, idx, 4);
        static const guint8 plte[12] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
        static const guint8 trns[3] = {0, 128, 255};
        GByteArray *t1 = with_chunk(t, after_ihdr, "tRNS", trns, sizeof trns);
        g_byte_array_unref(t);
        GByteArray *t2 = with_chunk(t1, after_ihdr, "PLTE", plte, sizeof plte);
        g_byte_array_append(pal, t2->data, t2->len);
        g_byte_array_unref(t1);
        g_byte_array_unref(t2);
    }
    const gsize pal_plte = after_ihdr, pal_trns = pal_plte + 12 + 12,
                pal_idat = pal_trns + 12 + 3;
    TernImage *want_pal = tern_image_load_bytes(pal->data, pal->len, "pal.png", NULL, &e);
    CHECKF(want_pal != NULL && want_pal->had_alpha, "pal.png: %s", e ? e->message : "");
    g_clear_error(&e);
    if (want_pal) /* index 0 at alpha 0 is white, index 1 half green */
        CHECK(near3(px(want_pal, 0, 0), 1, 1, 1, 1e-6f) &&
              near3(px(want_pal, 1, 0), 127 / 255.0f, 1, 127 / 255.0f, 1.0f / 255));
    {
        GByteArray *t1 = with_chunk(pal, after_ihdr, "tEXt", (const guint8 *)text,
                                    sizeof text - 1);
        /* after PLTE and tRNS, before IDAT */
        GByteArray *t2 = with_chunk(t1, pal_idat + 12 + sizeof text - 1, "zzZz", gama,
                                    sizeof gama);
        same_pixels(t2, want_pal, "pal-text.png");
        g_byte_array_unref(t1);
        g_byte_array_unref(t2);
    }

    /* A dropped chunk that puts the next one's header across the 64 KiB
     * reads at each of its bytes: IDAT, PLTE, tRNS. */
    guint8 *pad = g_malloc0(64 * 1024);
    for (int k = 0; k <= 8; k++) {
        const struct {
            const GByteArray *png;
            gsize at;
            const TernImage *want;
        } at[] = {{base, after_ihdr, want}, {pal, pal_plte, want_pal}, {pal, pal_trns, want_pal}};
        for (size_t j = 0; j < G_N_ELEMENTS(at); j++) {
            /* The next header then starts k bytes before 65536. */
            const guint32 len = (guint32)(65536 - k - at[j].at - 12);
            GByteArray *t = with_chunk(at[j].png, at[j].at, "prVt", pad, len);
            char label[64];
            g_snprintf(label, sizeof label, "across-reads-%zu-%d.png", j, k);
            same_pixels(t, at[j].want, label);
            g_byte_array_unref(t);
        }
    }
    g_free(pad);

    /* 20 MB in one ancillary chunk: an unknown one after IDAT (as the
     * attack had it), a comment before IDAT, a compressed comment. Each
     * must cost time in proportion to its size: CPU time, well under the
     * seconds the quadratic path takes (22 s for one, under ASan 30 s). */
    const guint32 big = 20u << 20;
    guint8 *filler = g_malloc(big);
    memset(filler, 'a', big);
    memcpy(filler, "Comment", 8); /* a keyword, its NUL, then text */
    struct {
        const char *label, *type;
        gboolean before_idat;
    } bigs[] = {
        {"abCd-20M.png", "abCd", FALSE},
        {"tEXt-20M.png", "tEXt", TRUE},
        {"zTXt-20M.png", "zTXt", TRUE},
        {"iCCP-20M.png", "iCCP", TRUE},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bigs); i++) {
        GByteArray *t = with_chunk(base, bigs[i].before_idat ? after_ihdr : before_iend,
                                   bigs[i].type, filler, big);
        const double t0 = cpu_s();
        same_pixels(t, want, bigs[i].label);
        const double spent = cpu_s() - t0;
        CHECKF(spent < 1.0, "%s: %.2f s of CPU time to decode", bigs[i].label, spent);
        fprintf(stderr, "%s: %.3f s of CPU time\n", bigs[i].label, spent);
        g_byte_array_unref(t);
    }
    /* The attack's file, through a path: an ancillary chunk declaring 2 GB
     * after IDAT, and zeros to 20 MB (sparse). Not a picture: it ends
     * before IEND. */
    {
        GByteArray *t = g_byte_array_new();
        g_byte_array_append(t, base->data, (guint)before_iend);
        put32(t, 0x7ffffff0);
        g_byte_array_append(t, (const guint8 *)"abCd", 4);
        g_autofree char *path = tmp_path("bigchunk.png");
        write_file(path, t->data, t->len);
        CHECK(truncate(path, big) == 0);
        const double t0 = cpu_s();
        TernImage *im = load(path, NULL, &e);
        const double spent = cpu_s() - t0;
        CHECKF(im == NULL && e && strstr(e->message, "truncated PNG"), "bigchunk.png: %s",
               e ? e->message : "accepted");
        CHECKF(spent < 1.0, "bigchunk.png: %.2f s of CPU time", spent);
        fprintf(stderr, "bigchunk.png (%s): %.3f s of CPU time\n", e ? e->message : "", spent);
        tern_image_free(im);
        g_clear_error(&e);
        unlink(path);
        g_byte_array_unref(t);
    }
    /* Critical chunks other than IDAT are passed on, so one far longer
     * than a valid one (PLTE: 768 bytes) is refused before the loader
     * gathers it; so is a length of more than 31 bits. */
    {
        GByteArray *t = with_chunk(pal, after_ihdr, "PLTE", filler, big);
        const double t0 = cpu_s();
        TernImage *im = tern_image_load_bytes(t->data, t->len, "plte.png", NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT) &&
                   strstr(e->message, "PLTE chunk") && strstr(e->message, "plte.png"),
               "20 MB PLTE: %s", e ? e->message : "accepted");
        CHECKF(cpu_s() - t0 < 1.0, "20 MB PLTE: %.2f s", cpu_s() - t0);
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(t);
        t = g_byte_array_new();
        g_byte_array_append(t, base->data, (guint)after_ihdr);
        put32(t, 0x80000000u);
        g_byte_array_append(t, (const guint8 *)"teXt", 4);
        g_byte_array_append(t, filler, 4096);
        im = tern_image_load_bytes(t->data, t->len, "len.png", NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT) &&
                   strstr(e->message, "more than the format allows"),
               "a 32-bit chunk length: %s", e ? e->message : "accepted");
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(t);
        /* A damaged chunk's type is what a user quotes in a bug report:
         * its bytes that are not printable (and the backslash that
         * starts an escape) are shown as "\xNN", the others as they are. */
        t = g_byte_array_new();
        g_byte_array_append(t, base->data, (guint)after_ihdr);
        put32(t, 530720168u);
        g_byte_array_append(t, (const guint8 *)"\x89\\1\n", 4);
        g_byte_array_append(t, filler, 4096);
        im = tern_image_load_bytes(t->data, t->len, "corrupt.png", NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT) &&
                   strstr(e->message, "its \\x89\\x5c1\\x0a chunk declares 530720168 bytes") &&
                   g_utf8_validate(e->message, -1, NULL),
               "an unprintable chunk type: %s", e ? e->message : "accepted");
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(t);
    }
    g_free(filler);
    tern_image_free(want);
    tern_image_free(want_pal);
    g_byte_array_unref(pal);
    g_byte_array_unref(base);
}

/* ------------------------------------------------- savers of gdk-pixbuf */

static GdkPixbuf *two_halves(int w, int h, gboolean alpha) {
    GdkPixbuf *pb = gdk_pixbuf_new(GDK_COLORSPACE_RGB, alpha, 8, w, h);
    const int nc = gdk_pixbuf_get_n_channels(pb), stride = gdk_pixbuf_get_rowstride(pb);
    guint8 *p = gdk_pixbuf_get_pixels(pb);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            guint8 *q = p + y * stride + x * nc;
            const bool left = x < w / 2;
            q[0] = left ? 255 : 0;
            q[1] = 0;
            q[2] = left ? 0 : 255;
            if (alpha)
                q[3] = 255;
        }
    return pb;
}

static void mean_rgb(const TernImage *im, int x0, int y0, int x1, int y1, float out[3]) {
    double s[3] = {0, 0, 0};
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            for (int c = 0; c < 3; c++)
                s[c] += px(im, x, y)[c];
    for (int c = 0; c < 3; c++)
        out[c] = (float)(s[c] / ((double)(x1 - x0) * (y1 - y0)));
}

static void alpha_png(void) {
    GdkPixbuf *pb = gdk_pixbuf_new(GDK_COLORSPACE_RGB, TRUE, 8, 3, 1);
    guint8 *p = gdk_pixbuf_get_pixels(pb);
    const guint8 v[12] = {255, 0, 0, 0, 0, 0, 0, 128, 0, 0, 255, 255};
    memcpy(p, v, 12);
    g_autofree char *path = tmp_path("rgba.png");
    GError *e = NULL;
    CHECK(gdk_pixbuf_save(pb, path, "png", &e, NULL));
    g_object_unref(pb);
    TernImage *im = load(path, NULL, &e);
    CHECKF(im != NULL, "rgba: %s", e ? e->message : "");
    if (im) {
        CHECK(im->had_alpha && im->width == 3);
        CHECKF(near3(px(im, 0, 0), 1, 1, 1, 1e-6f), "transparent red must be white");
        CHECK(near3(px(im, 1, 0), 127 / 255.0f, 127 / 255.0f, 127 / 255.0f, 1.0f / 255));
        CHECK(near3(px(im, 2, 0), 0, 0, 1, 1e-6f));
    }
    tern_image_free(im);
    g_clear_error(&e);
}

/* JPEG with an EXIF APP1 segment saying orientation 6 (rotate 90 degrees
 * clockwise to display), inserted by hand after SOI. */
static void exif_jpeg(void) {
    GdkPixbuf *pb = two_halves(40, 20, FALSE); /* red left, blue right */
    gchar *jpg = NULL;
    gsize len = 0;
    GError *e = NULL;
    CHECK(gdk_pixbuf_save_to_buffer(pb, &jpg, &len, "jpeg", &e, "quality", "95", NULL));
    g_object_unref(pb);
    static const guint8 app1[] = {
        0xFF, 0xE1, 0x00, 34, 'E', 'x', 'i', 'f', 0, 0,
        'I', 'I', 42, 0, 8, 0, 0, 0,     /* TIFF header, IFD at 8 */
        1, 0,                            /* one entry */
        0x12, 0x01, 3, 0, 1, 0, 0, 0,    /* tag 0x0112 SHORT x1 */
        6, 0, 0, 0,                      /* value 6 */
        0, 0, 0, 0,                      /* no next IFD */
    };
    GByteArray *out = g_byte_array_new();
    g_byte_array_append(out, (guint8 *)jpg, 2);
    g_byte_array_append(out, app1, sizeof app1);
    g_byte_array_append(out, (guint8 *)jpg + 2, (guint)(len - 2));
    g_free(jpg);
    g_autofree char *path = tmp_path("rotated.jpg");
    write_file(path, out->data, out->len);
    g_byte_array_unref(out);
    TernImage *im = load(path, NULL, &e);
    CHECKF(im != NULL, "exif jpeg: %s", e ? e->message : "");
    if (im) {
        CHECK(!strcmp(im->format, "jpeg"));
        CHECK(im->source_width == 40 && im->source_height == 20);
        CHECKF(im->width == 20 && im->height == 40, "oriented size %d x %d, want 20 x 40",
               im->width, im->height);
        if (im->width == 20 && im->height == 40) {
            float top[3], bottom[3];
            mean_rgb(im, 2, 2, 18, 16, top);
            mean_rgb(im, 2, 24, 18, 38, bottom);
            CHECKF(top[0] > 0.8f && top[2] < 0.2f && bottom[2] > 0.8f && bottom[0] < 0.2f,
                   "rotation: top %.2f %.2f %.2f, bottom %.2f %.2f %.2f", top[0], top[1],
                   top[2], bottom[0], bottom[1], bottom[2]);
        }
    }
    tern_image_free(im);
    g_clear_error(&e);
}

static void webp(void) {
    GdkPixbufFormat *fmt = NULL;
    GSList *formats = gdk_pixbuf_get_formats();
    for (GSList *l = formats; l; l = l->next) {
        g_autofree char *n = gdk_pixbuf_format_get_name(l->data);
        if (!strcmp(n, "webp"))
            fmt = l->data;
    }
    g_slist_free(formats);
    CHECKF(fmt != NULL, "no WebP loader: install webp-pixbuf-loader (tools/ensure-deps.sh app)");
    if (!fmt || !gdk_pixbuf_format_is_writable(fmt))
        return;
    GdkPixbuf *pb = two_halves(32, 16, FALSE);
    gchar *data = NULL;
    gsize len = 0;
    GError *e = NULL;
    CHECKF(gdk_pixbuf_save_to_buffer(pb, &data, &len, "webp", &e, "quality", "95", NULL), "%s",
           e ? e->message : "");
    g_object_unref(pb);
    TernImage *im = tern_image_load_bytes(data, len, "image.webp", NULL, &e);
    CHECKF(im != NULL, "webp: %s", e ? e->message : "");
    if (im) {
        float l[3], r[3];
        mean_rgb(im, 2, 2, 12, 14, l);
        mean_rgb(im, 20, 2, 30, 14, r);
        CHECK(!strcmp(im->format, "webp") && im->width == 32 && im->height == 16);
        CHECK(l[0] > 0.8f && l[2] < 0.2f && r[2] > 0.8f && r[0] < 0.2f);
    }
    tern_image_free(im);
    /* Animations, made of that picture (its chunks after the RIFF header)
     * as frames: the loader decodes an animation at close, every frame into
     * a canvas of its own, and reported the canvas size only then. */
    struct {
        guint32 side, frames;
        gboolean refused;
    } anims[] = {
        {1024, 256, FALSE}, /* 1 GB of canvases (12 s under ASan) for one frame */
        {9000, 1, TRUE},    /* 81 megapixels: refused before any canvas */
    };
    for (size_t a = 0; a < G_N_ELEMENTS(anims); a++) {
        GByteArray *w = g_byte_array_new();
        const guint8 head[] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'};
        g_byte_array_append(w, head, sizeof head);
        const guint32 c = anims[a].side - 1;
        const guint8 vp8x[] = {'V', 'P', '8', 'X', 10, 0, 0, 0, 0x02, 0, 0, 0,
                               c & 255, (c >> 8) & 255, c >> 16, c & 255, (c >> 8) & 255, c >> 16};
        const guint8 anim[] = {'A', 'N', 'I', 'M', 6, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        g_byte_array_append(w, vp8x, sizeof vp8x);
        g_byte_array_append(w, anim, sizeof anim);
        const guint32 sub = (guint32)(len - 12), body = 16 + sub + (sub & 1);
        for (guint32 f = 0; f < anims[a].frames; f++) {
            const guint8 anmf[] = {'A', 'N', 'M', 'F', body & 255, (body >> 8) & 255,
                                   (body >> 16) & 255, body >> 24,
                                   0, 0, 0, 0, 0, 0, /* at (0, 0) */
                                   31, 0, 0, 15, 0, 0, /* 32 x 16 */
                                   100, 0, 0, 0};
            g_byte_array_append(w, anmf, sizeof anmf);
            g_byte_array_append(w, (const guint8 *)data + 12, sub);
            if (sub & 1)
                g_byte_array_append(w, (const guint8 *)"", 1);
        }
        const guint32 riff = w->len - 8;
        for (int i = 0; i < 4; i++)
            w->data[4 + i] = (guint8)(riff >> (8 * i));
        const double t0 = now_s();
        im = tern_image_load_bytes(w->data, w->len, "anim.webp", NULL, &e);
        const double took = now_s() - t0;
        if (anims[a].refused)
            CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE),
                   "animated WebP on a %u px canvas: %s", anims[a].side,
                   e ? e->message : "accepted");
        else
            CHECKF(im != NULL && im->width == (int)anims[a].side, "animated WebP: %s",
                   e ? e->message : "wrong size");
        if (im) {
            float l[3];
            mean_rgb(im, 2, 2, 12, 14, l);
            CHECK(l[0] > 0.8f && l[2] < 0.2f); /* the first frame's left half, red */
        }
        CHECKF(took < 2.0, "animated WebP (%u frames on %u x %u) took %.2f s", anims[a].frames,
               anims[a].side, anims[a].side, took);
        tern_image_free(im);
        g_clear_error(&e);
        /* Cut inside the first frame: refused. */
        if (a == 0) {
            im = tern_image_load_bytes(w->data, 60, "cut.webp", NULL, &e);
            CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
                   "animated WebP cut: %s", e ? e->message : "accepted");
            tern_image_free(im);
            g_clear_error(&e);
        }
        g_byte_array_unref(w);
    }
    /* A RIFF size no WebP can have: named as such, not libwebp's "Could not
     * get WebP header information". */
    static const guint32 riff_sizes[] = {0, 11, 0xfffffff7u, 0xffffffffu};
    for (size_t i = 0; i < G_N_ELEMENTS(riff_sizes); i++) {
        guint8 *bad = g_memdup2(data, len);
        for (int k = 0; k < 4; k++)
            bad[4 + k] = (guint8)(riff_sizes[i] >> (8 * k));
        im = tern_image_load_bytes(bad, len, "riff.webp", NULL, &e);
        char want[64];
        g_snprintf(want, sizeof want, "declares %u bytes", riff_sizes[i]);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT) &&
                   strstr(e->message, want) && !strstr(e->message, "Could not get"),
               "RIFF size %u: %s", riff_sizes[i], e ? e->message : "accepted");
        tern_image_free(im);
        g_clear_error(&e);
        g_free(bad);
    }
    g_free(data);
    g_clear_error(&e);
}

static long max_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* A lossless WebP (VP8L) declares its size in its first bytes, but the
 * loader allocated for it before reporting it: a 36-byte file declaring
 * 16384 x 16384 cost 900 MB and 0.75 s before its refusal. The size is
 * read from the VP8L header and refused before the loader sees the file;
 * the same 2 x 2 picture at its real size still decodes. */
static void webp_lossless_size(void) {
    /* 2 x 2 red, lossless (cwebp -lossless, as ImageMagick writes it). */
    guint8 vp8l[] = {'R',  'I',  'F',  'F',  0x1c, 0,    0,    0,    'W',  'E',  'B',  'P',
                     'V',  'P',  '8',  'L',  0x0f, 0,    0,    0,    0x2f, 0x01, 0x40, 0x00,
                     0x00, 0x07, 0x10, 0xfd, 0x8f, 0xfe, 0x07, 0x22, 0xa2, 0xff, 0x01, 0x00};
    GError *e = NULL;
    TernImage *im = tern_image_load_bytes(vp8l, sizeof vp8l, "small.webp", NULL, &e);
    CHECKF(im != NULL && im->width == 2 && im->height == 2 && near3(px(im, 1, 1), 1, 0, 0, 0.02f),
           "2 x 2 lossless WebP: %s", e ? e->message : "not 2 x 2 red");
    tern_image_free(im);
    g_clear_error(&e);
    /* 14 bits each of width - 1 and height - 1, after the 0x2f signature. */
    guint32 bits = (guint32)vp8l[21] | (guint32)vp8l[22] << 8 | (guint32)vp8l[23] << 16 |
                   (guint32)vp8l[24] << 24;
    bits = (bits & ~((1u << 28) - 1)) | 16383u | 16383u << 14;
    for (int k = 0; k < 4; k++)
        vp8l[21 + k] = (guint8)(bits >> (8 * k));
    const long rss0 = max_rss_mb();
    const double t0 = now_s();
    im = tern_image_load_bytes(vp8l, sizeof vp8l, "huge.webp", NULL, &e);
    const double took = now_s() - t0;
    CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE) &&
               strstr(e->message, "16384 x 16384") && strstr(e->message, "huge.webp"),
           "lossless WebP declaring 16384 x 16384: %s", e ? e->message : "accepted");
    CHECKF(max_rss_mb() - rss0 < 256, "refusing it took the peak memory from %ld to %ld MB",
           rss0, max_rss_mb());
    CHECKF(took < 1.0, "refusing it took %.2f s", took);
    printf("# lossless WebP declaring 16384 x 16384 refused in %.3f s\n", took);
    tern_image_free(im);
    g_clear_error(&e);
}

/* Two 1 x 1 frames: red, then black. The first frame is what counts. */
static void gif(void) {
    static const guint8 gif[] = {
        'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0x80, 0, 0, /* screen, 2-colour table */
        0xff, 0, 0, 0, 0, 0,                                   /* red, black */
        0x21, 0xF9, 4, 0, 10, 0, 0, 0,                         /* frame 1: 0.1 s */
        0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x44, 0x01, 0,  /* index 0 */
        0x21, 0xF9, 4, 0, 10, 0, 0, 0,                         /* frame 2 */
        0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x4C, 0x01, 0,  /* index 1 */
        0x3B,
    };
    GError *e = NULL;
    TernImage *im = tern_image_load_bytes(gif, sizeof gif, "anim.gif", NULL, &e);
    CHECKF(im != NULL, "gif: %s", e ? e->message : "");
    if (im) {
        CHECK(!strcmp(im->format, "gif") && im->width == 1 && im->height == 1);
        CHECKF(near3(px(im, 0, 0), 1, 0, 0, 1e-6f), "first frame: %g %g %g", px(im, 0, 0)[0],
               px(im, 0, 0)[1], px(im, 0, 0)[2]);
    }
    tern_image_free(im);
    g_clear_error(&e);

    /* A still image of 2 x 2 red pixels at (1, 1) on a 4 x 4 screen: the
     * rest of the screen is transparent, so white. */
    static const guint8 part[] = {
        'G', 'I', 'F', '8', '9', 'a', 4, 0, 4, 0, 0x80, 0, 0, 0xff, 0, 0, 0, 0, 0,
        0x2C, 1, 0, 1, 0, 2, 0, 2, 0, 0, /* at (1, 1), 2 x 2 */
        2, 4, 0x04, 0x41, 0x10, 0x05, 0, /* clear, 0 (four times), end */
        0x3B,
    };
    im = tern_image_load_bytes(part, sizeof part, "part.gif", NULL, &e);
    CHECKF(im != NULL, "gif with a first frame smaller than its screen: %s",
           e ? e->message : "");
    if (im) {
        CHECK(im->width == 4 && im->height == 4 && im->had_alpha);
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 4; x++) {
                const bool red = x >= 1 && x <= 2 && y >= 1 && y <= 2;
                CHECKF(near3(px(im, x, y), 1, red ? 0 : 1, red ? 0 : 1, 1e-6f),
                       "part.gif (%d, %d): %g %g %g", x, y, px(im, x, y)[0], px(im, x, y)[1],
                       px(im, x, y)[2]);
            }
    }
    tern_image_free(im);
    g_clear_error(&e);

    /* The same two frames, then 200000 more (4.6 MB): gdk-pixbuf parses
     * every frame, in time quadratic in their number (100000 took 16 s);
     * only the first is read. */
    enum { MORE = 200000, FRAME = 23 };
    GByteArray *many = g_byte_array_sized_new(sizeof gif + MORE * FRAME);
    g_byte_array_append(many, gif, sizeof gif - 1); /* all but the trailer */
    for (int i = 0; i < MORE; i++)
        g_byte_array_append(many, gif + 19 + FRAME, FRAME); /* frame 2 */
    g_byte_array_append(many, gif + sizeof gif - 1, 1);
    const double t0 = now_s();
    im = tern_image_load_bytes(many->data, many->len, "many.gif", NULL, &e);
    const double took = now_s() - t0;
    CHECKF(im != NULL && near3(px(im, 0, 0), 1, 0, 0, 1e-6f), "many frames: %s",
           e ? e->message : "wrong first frame");
    CHECKF(took < 2.0, "a GIF of %d frames took %.2f s", MORE + 2, took);
    tern_image_free(im);
    g_clear_error(&e);
    /* Cut inside the first frame's data: refused, not decoded from a part. */
    im = tern_image_load_bytes(many->data, 30, "cut.gif", NULL, &e);
    CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
           "gif cut in its first frame: %s", e ? e->message : "accepted");
    tern_image_free(im);
    g_clear_error(&e);
    g_byte_array_unref(many);
}

/* ---------------------------------------------------------- bad input */

static void bad_input(void) {
    GError *e = NULL;
    /* Text named .png. */
    g_autofree char *txt = tmp_path("notes.png");
    const char *text = "These are my notes, not a picture.\n";
    write_file(txt, text, strlen(text));
    TernImage *im = load(txt, NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED));
    CHECKF(e && strstr(e->message, "notes.png") && strstr(e->message, "PNG, JPEG"), "%s",
           e ? e->message : "");
    g_clear_error(&e);

    /* Truncated: a noisy PNG cut in half. */
    GdkPixbuf *pb = gdk_pixbuf_new(GDK_COLORSPACE_RGB, FALSE, 8, 64, 64);
    guint8 *p = gdk_pixbuf_get_pixels(pb);
    uint64_t st = 1;
    for (int i = 0; i < 64 * gdk_pixbuf_get_rowstride(pb); i++)
        p[i] = (guint8)tn_test_rand(&st);
    gchar *data = NULL;
    gsize len = 0;
    CHECK(gdk_pixbuf_save_to_buffer(pb, &data, &len, "png", &e, NULL));
    g_object_unref(pb);
    g_autofree char *cut = tmp_path("cut.png");
    write_file(cut, data, len / 2);
    im = load(cut, NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT));
    CHECKF(e && strstr(e->message, "cut.png"), "%s", e ? e->message : "");
    CHECKF(e && strstr(e->message, "truncated"), "%s", e ? e->message : "");
    g_clear_error(&e);
    /* Whole files whose compressed data is bad: a broken deflate stream, a
     * wrong Adler-32 checksum (chunk CRCs right). libpng takes both for a
     * warning and stops; they are damaged, not truncated: a new download
     * of the same file will not mend them. */
    {
        enum { W = 64, H = 48 };
        guint8 rows[H * (W * 3 + 1)];
        for (gsize i = 0; i < sizeof rows; i++)
            rows[i] = i % (W * 3 + 1) ? (guint8)(i * 7) : 0;
        uLongf zlen = compressBound(sizeof rows);
        guint8 *z = g_malloc(zlen);
        CHECK(compress(z, &zlen, rows, sizeof rows) == Z_OK);
        static const guint8 ihdr[13] = {0, 0, 0, W, 0, 0, 0, H, 8, 2, 0, 0, 0};
        for (int k = 0; k < 2; k++) {
            guint8 *bad = g_memdup2(z, zlen);
            if (k == 0)
                bad[2] = bad[3] = 0xFF; /* the first block's header: no valid codes */
            else
                bad[zlen - 1] ^= 0xFF; /* Adler-32 */
            GByteArray *png = g_byte_array_new();
            g_byte_array_append(png, (const guint8 *)"\x89PNG\r\n\x1a\n", 8);
            chunk(png, "IHDR", ihdr, sizeof ihdr);
            chunk(png, "IDAT", bad, (guint32)zlen);
            chunk(png, "IEND", NULL, 0);
            const char *label = k == 0 ? "deflate.png" : "adler.png";
            im = tern_image_load_bytes(png->data, png->len, label, NULL, &e);
            CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT) &&
                       strstr(e->message, label) && strstr(e->message, "damaged PNG") &&
                       !strstr(e->message, "truncated"),
                   "%s: %s", label, e ? e->message : "accepted");
            tern_image_free(im);
            g_clear_error(&e);
            g_byte_array_unref(png);
            g_free(bad);
        }
        g_free(z);
    }
    /* Cut a few bytes into the image data, before any row decodes: the
     * loader closes without an error and reports no rows at all; its
     * pixels were never written. */
    gsize idat = 0;
    for (gsize i = 8; i + 4 < len; i++)
        if (!memcmp(data + i, "IDAT", 4)) {
            idat = i;
            break;
        }
    CHECK(idat > 0);
    for (gsize extra = 0; idat && extra <= 6; extra += 3) {
        im = tern_image_load_bytes(data, idat + 4 + extra, "cut.png", NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
               "png cut %zu bytes into its IDAT: %s", extra, e ? e->message : "accepted");
        tern_image_free(im);
        g_clear_error(&e);
    }
    /* An interlaced PNG (Adam7, 40 x 25 noise, stored uncompressed) cut
     * anywhere before its IEND: the loader reports the whole image updated
     * from the first pass on (whose rows 0, 8, 16 and 24 reach the bottom
     * row), the rows still missing never written. */
    {
        static const int pass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                       {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
        enum { W = 40, H = 25 };
        guint8 grid[H][W][3];
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < 3; c++)
                    grid[y][x][c] = (guint8)tn_test_rand(&st);
        GByteArray *raw = g_byte_array_new();
        gsize pass2 = 0; /* bytes of the first two passes */
        for (int k = 0; k < 7; k++) {
            for (int y = pass[k][1]; y < H; y += pass[k][3]) {
                g_byte_array_append(raw, (const guint8 *)"", 1); /* filter: none */
                for (int x = pass[k][0]; x < W; x += pass[k][2])
                    g_byte_array_append(raw, grid[y][x], 3);
            }
            if (k == 1)
                pass2 = raw->len;
        }
        uLongf zlen = compressBound(raw->len);
        guint8 *z = g_malloc(zlen);
        CHECK(compress2(z, &zlen, raw->data, raw->len, 0) == Z_OK);
        const guint8 ihdr[13] = {0, 0, 0, W, 0, 0, 0, H, 8, 2, 0, 0, 1 /* Adam7 */};
        GByteArray *il = g_byte_array_new();
        g_byte_array_append(il, (const guint8 *)"\x89PNG\r\n\x1a\n", 8);
        chunk(il, "IHDR", ihdr, 13);
        chunk(il, "IDAT", z, (guint32)zlen);
        chunk(il, "IEND", NULL, 0);
        im = tern_image_load_bytes(il->data, il->len, "interlaced.png", NULL, &e);
        CHECKF(im != NULL && im->width == W && im->height == H, "interlaced png: %s",
               e ? e->message : "");
        if (im && im->width == W && im->height == H) {
            int wrong = 0;
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    wrong += !near3(px(im, x, y), grid[y][x][0] / 255.0f, grid[y][x][1] / 255.0f,
                                    grid[y][x][2] / 255.0f, 1e-6f);
            CHECKF(wrong == 0, "interlaced png: %d of its %d pixels wrong", wrong, W * H);
        }
        tern_image_free(im);
        g_clear_error(&e);
        /* The same stream in IDAT chunks of 7 bytes: the same pixels. */
        {
            GByteArray *split = g_byte_array_new();
            g_byte_array_append(split, (const guint8 *)"\x89PNG\r\n\x1a\n", 8);
            chunk(split, "IHDR", ihdr, 13);
            for (uLongf at = 0; at < zlen; at += 7)
                chunk(split, "IDAT", z + at, (guint32)MIN(7, zlen - at));
            chunk(split, "IEND", NULL, 0);
            TernImage *want = tern_image_load_bytes(il->data, il->len, "interlaced.png", NULL, &e);
            g_clear_error(&e);
            same_pixels(split, want, "interlaced.png in 7-byte IDAT chunks");
            tern_image_free(want);
            g_byte_array_unref(split);
        }
        const gsize il_cuts[] = {il->len / 4, il->len / 2, il->len - 12, il->len - 1};
        for (size_t i = 0; i < G_N_ELEMENTS(il_cuts); i++) {
            im = tern_image_load_bytes(il->data, il_cuts[i], "interlaced.png", NULL, &e);
            CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
                   "interlaced png cut to %zu of %u bytes: %s", il_cuts[i], il->len,
                   e ? e->message : "accepted");
            tern_image_free(im);
            g_clear_error(&e);
        }
        /* Whole files (every chunk there, CRCs right) whose compressed data
         * goes bad after the second pass: libpng takes a broken deflate
         * stream or Adler-32 for a warning and stops, and gdk-pixbuf has
         * reported every row from the first pass on, so the rows of the
         * later passes were never written. All but the stream that never
         * ends (which libpng refuses at IEND) were accepted. Then (4, 5)
         * whole rows followed by more data, 64 KiB of zeros or a single
         * byte: libpng warns and ignores the rest, and GdkPixbuf shows the
         * picture; so does Tern (it refused them as damaged), the same
         * pixels as without the excess, as for a non-interlaced PNG. */
        for (int k = 0; k < 6; k++) {
            GByteArray *zb = g_byte_array_new();
            if (k >= 4) {
                const guint extra = k == 4 ? 65536 : 1;
                GByteArray *more = g_byte_array_sized_new(raw->len + extra);
                g_byte_array_append(more, raw->data, raw->len);
                g_byte_array_set_size(more, raw->len + extra);
                memset(more->data + raw->len, 0, extra);
                uLongf n = compressBound(more->len);
                g_byte_array_set_size(zb, (guint)n);
                CHECK(compress2(zb->data, &n, more->data, more->len, 9) == Z_OK);
                g_byte_array_set_size(zb, (guint)n);
                g_byte_array_unref(more);
            } else if (k == 3) { /* a wrong Adler-32 on data compressed as usual */
                uLongf n = compressBound(raw->len);
                g_byte_array_set_size(zb, (guint)n);
                CHECK(compress2(zb->data, &n, raw->data, raw->len, 9) == Z_OK);
                g_byte_array_set_size(zb, (guint)n);
                zb->data[n - 1] ^= 0x01;
            } else {
                /* The first two passes compressed, then (0) a block of the
                 * reserved type 3, (1) the stream ended cleanly there, (2)
                 * nothing more: the stream never ends. */
                z_stream zs = {0};
                CHECK(deflateInit(&zs, 9) == Z_OK);
                guint8 out[8192];
                zs.next_in = raw->data;
                zs.avail_in = (uInt)pass2;
                zs.next_out = out;
                zs.avail_out = sizeof out;
                CHECK(deflate(&zs, k == 1 ? Z_FINISH : Z_FULL_FLUSH) ==
                      (k == 1 ? Z_STREAM_END : Z_OK));
                g_byte_array_append(zb, out, (guint)(sizeof out - zs.avail_out));
                deflateEnd(&zs);
                if (k == 0)
                    g_byte_array_append(zb, (const guint8 *)"\xff\xff\xff\xff", 4);
            }
            GByteArray *bad = g_byte_array_new();
            g_byte_array_append(bad, (const guint8 *)"\x89PNG\r\n\x1a\n", 8);
            chunk(bad, "IHDR", ihdr, 13);
            chunk(bad, "IDAT", zb->data, zb->len);
            chunk(bad, "IEND", NULL, 0);
            static const char *const labels[] = {"il-block.png", "il-short.png", "il-open.png",
                                                 "il-adler.png", "il-more.png", "il-more1.png"};
            im = tern_image_load_bytes(bad->data, bad->len, labels[k], NULL, &e);
            if (k >= 4) {
                CHECKF(im != NULL && im->width == W && im->height == H, "%s: %s", labels[k],
                       e ? e->message : "");
                int wrong = 0;
                for (int y = 0; im && im->width == W && im->height == H && y < H; y++)
                    for (int x = 0; x < W; x++)
                        wrong += !near3(px(im, x, y), grid[y][x][0] / 255.0f,
                                        grid[y][x][1] / 255.0f, grid[y][x][2] / 255.0f, 1e-6f);
                CHECKF(wrong == 0, "%s: %d of its %d pixels wrong", labels[k], wrong, W * H);
                /* The same rows not interlaced, with the same excess. */
                GByteArray *flat = g_byte_array_new();
                for (int y = 0; y < H; y++) {
                    g_byte_array_append(flat, (const guint8 *)"", 1);
                    g_byte_array_append(flat, grid[y][0], W * 3);
                }
                g_byte_array_set_size(flat, flat->len + (k == 4 ? 65536 : 1));
                memset(flat->data + (gsize)H * (1 + W * 3), 0, k == 4 ? 65536 : 1);
                uLongf fn = compressBound(flat->len);
                guint8 *fz = g_malloc(fn);
                CHECK(compress2(fz, &fn, flat->data, flat->len, 9) == Z_OK);
                guint8 flat_ihdr[13];
                memcpy(flat_ihdr, ihdr, 13);
                flat_ihdr[12] = 0;
                GByteArray *fpng = g_byte_array_new();
                g_byte_array_append(fpng, (const guint8 *)"\x89PNG\r\n\x1a\n", 8);
                chunk(fpng, "IHDR", flat_ihdr, 13);
                chunk(fpng, "IDAT", fz, (guint32)fn);
                chunk(fpng, "IEND", NULL, 0);
                same_pixels(fpng, im, k == 4 ? "flat-more.png" : "flat-more1.png");
                g_byte_array_unref(fpng);
                g_free(fz);
                g_byte_array_unref(flat);
                tern_image_free(im);
                g_clear_error(&e);
                g_byte_array_unref(bad);
                g_byte_array_unref(zb);
                continue;
            }
            CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT) &&
                       strstr(e->message, labels[k]) &&
                       strstr(e->message, k == 2 ? "damaged"
                                                 : "damaged PNG (its compressed image data is "
                                                   "corrupt") &&
                       !strstr(e->message, "truncated"),
                   "%s: %s", labels[k], e ? e->message : "accepted");
            tern_image_free(im);
            g_clear_error(&e);
            g_byte_array_unref(bad);
            g_byte_array_unref(zb);
        }
        g_free(z);
        g_byte_array_unref(raw);
        g_byte_array_unref(il);
    }
    /* The whole PNG, then 1 GiB of trailer (a sparse file): not read. */
    {
        g_autofree char *trail = tmp_path("trailer.png");
        write_file(trail, data, len);
        CHECK(truncate(trail, 1 << 30) == 0);
        const double t0 = now_s();
        im = load(trail, NULL, &e);
        CHECKF(im != NULL && now_s() - t0 < 1.0, "a PNG with a 1 GiB trailer: %.2f s, %s",
               now_s() - t0, e ? e->message : "");
        tern_image_free(im);
        g_clear_error(&e);
        unlink(trail);
    }
    /* Damaged: bytes of the middle flipped (CRC and zlib checks). */
    for (gsize i = len / 3; i < len / 3 + 64; i++)
        data[i] ^= 0x5a;
    im = tern_image_load_bytes(data, len, "damaged.png", NULL, &e);
    CHECK(im == NULL && e != NULL);
    g_clear_error(&e);
    g_free(data);

    /* Empty, missing. */
    g_autofree char *empty = tmp_path("empty.png");
    write_file(empty, "", 0);
    im = load(empty, NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT));
    g_clear_error(&e);
    /* No bytes at all, as an empty GBytes gives them (data NULL): the app
     * passes g_bytes_get_data() of a dropped or pasted payload. */
    im = tern_image_load_bytes(NULL, 0, "empty drop", NULL, &e);
    CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
           "NULL, 0: %s", e ? e->message : "accepted");
    g_clear_error(&e);
    im = load("/nonexistent/picture.png", NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_IO));
    CHECKF(e && strstr(e->message, "/nonexistent/picture.png"), "%s", e ? e->message : "");
    g_clear_error(&e);

    /* An SVG: gdk-pixbuf may read it; the vision path does not. */
    const char *svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\">"
                      "<rect width=\"10\" height=\"10\" fill=\"red\"/></svg>";
    im = tern_image_load_bytes(svg, strlen(svg), "drawing.svg", NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED));
    g_clear_error(&e);
}

static void data_uri_and_fit(void) {
    /* A 1-pixel checkerboard, 400 x 200: fitted to 50 it must average to
     * grey (area filter); point sampling would alias to black or white. */
    GdkPixbuf *pb = gdk_pixbuf_new(GDK_COLORSPACE_RGB, FALSE, 8, 400, 200);
    const int stride = gdk_pixbuf_get_rowstride(pb);
    guint8 *p = gdk_pixbuf_get_pixels(pb);
    for (int y = 0; y < 200; y++)
        for (int x = 0; x < 400; x++)
            memset(p + y * stride + x * 3, (x + y) % 2 ? 255 : 0, 3);
    gchar *png = NULL;
    gsize len = 0;
    GError *e = NULL;
    CHECK(gdk_pixbuf_save_to_buffer(pb, &png, &len, "png", &e, NULL));
    g_autofree char *b64 = g_base64_encode((guchar *)png, len);
    g_autofree char *uri = g_strconcat("data:image/png;base64,", b64, NULL);
    TernImageOptions o = {.fit_side = 50};
    TernImage *im = tern_image_load_data_uri(uri, &o, &e);
    CHECKF(im != NULL, "data uri: %s", e ? e->message : "");
    if (im) {
        CHECK(im->width == 50 && im->height == 50);
        CHECK(im->source_width == 400 && im->source_height == 200);
        float worst = 0;
        for (int i = 0; i < 50 * 50 * 3; i++)
            worst = fmaxf(worst, fabsf(im->rgb[i] - 0.5f));
        CHECKF(worst < 0.05f, "fitted checkerboard deviates by %.3f from grey", worst);
    }
    tern_image_free(im);
    /* Smaller than fit_side: untouched. */
    TernImageOptions big = {.fit_side = 1000};
    im = tern_image_from_pixbuf(pb, &big, &e);
    CHECK(im && im->width == 400 && im->height == 200 && im->rgb[0] == 0.0f &&
          im->rgb[3] == 1.0f);
    tern_image_free(im);
    g_object_unref(pb);
    g_free(png);
    g_clear_error(&e);

    /* Without its '=' padding, and wrapped in lines as MIME writes it: the
     * same picture (JPEGs, whose last two bytes are their end marker, of
     * lengths that need padding). */
    int unpadded = 0;
    for (int jw = 20; jw < 40 && unpadded < 4; jw++) {
        GdkPixbuf *jp = two_halves(jw, 16, FALSE);
        gchar *jpg = NULL;
        gsize jlen = 0;
        CHECK(gdk_pixbuf_save_to_buffer(jp, &jpg, &jlen, "jpeg", &e, NULL));
        g_object_unref(jp);
        if (jlen % 3 != 0) {
            unpadded++;
            g_autofree char *enc = g_base64_encode((const guchar *)jpg, jlen);
            *strchr(enc, '=') = '\0';
            GString *wrapped = g_string_new("data:image/jpeg;base64,");
            for (size_t i = 0; i < strlen(enc); i += 76)
                g_string_append_printf(wrapped, "%.76s\r\n", enc + i);
            im = tern_image_load_data_uri(wrapped->str, NULL, &e);
            CHECKF(im != NULL && im->width == jw, "unpadded base64 of %zu bytes: %s", jlen,
                   e ? e->message : "");
            tern_image_free(im);
            g_clear_error(&e);
            g_string_free(wrapped, TRUE);
        }
        g_free(jpg);
    }
    CHECK(unpadded == 4);

    /* A data: URI's data is URL text (RFC 2397): a URL encoder writes '+',
     * '/' and '=' as %2B, %2F and %3D, and "base64" may come in any case
     * (it is MIME's encoding name; the WHATWG URL reader matches it so).
     * Each was refused: the escapes' hex digits were read as base64 (the
     * picture "damaged"), ";BASE64" was "not base64-encoded". */
    CHECKF(strpbrk(b64, "+/") != NULL, "the picture's base64 has a '+' or '/' to escape");
    GString *esc = g_string_new("data:image/png;base64,");
    for (const char *c = b64; *c; c++)
        if (*c == '+' || *c == '/' || *c == '=')
            g_string_append_printf(esc, "%%%02X", (unsigned)*c);
        else
            g_string_append_c(esc, *c);
    im = tern_image_load_data_uri(esc->str, &o, &e);
    CHECKF(im != NULL && im->source_width == 400 && im->source_height == 200,
           "%%-escaped base64: %s", e ? e->message : "");
    tern_image_free(im);
    g_clear_error(&e);
    g_string_free(esc, TRUE);
    g_autofree char *upper = g_strconcat("data:image/png;BASE64,", b64, NULL);
    im = tern_image_load_data_uri(upper, &o, &e);
    CHECKF(im != NULL && im->source_width == 400, ";BASE64: %s", e ? e->message : "");
    tern_image_free(im);
    g_clear_error(&e);
    /* A '%' that starts no escape stays as it was: outside the alphabet,
     * skipped like a line break. */
    g_autofree char *broken = g_strconcat("data:image/png;base64,", b64, "%", NULL);
    im = tern_image_load_data_uri(broken, &o, &e);
    CHECKF(im != NULL && im->source_width == 400, "a broken %%-escape: %s",
           e ? e->message : "");
    tern_image_free(im);
    g_clear_error(&e);

    im = tern_image_load_data_uri("data:image/png,notbase64", NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED));
    g_clear_error(&e);
    im = tern_image_load_data_uri("https://example.com/cat.png", NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED));
    g_clear_error(&e);
    im = tern_image_load_data_uri("data:image/png;base64,aGVsbG8gd29ybGQ=", NULL, &e);
    CHECK(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED));
    g_clear_error(&e);
}

/* ------------------------------------------------- hostile headers */

/* Formats outside the four are refused by their first bytes, before any
 * decoder runs; JPEG and WebP files cut short are refused rather than
 * decoded into grey; a JPEG header declaring 8000 x 8000 pixels in a
 * 324-byte file allocates nothing. */
static void hostile_headers(void) {
    GError *e = NULL;
    /* An SVG that asks the renderer for a huge canvas and a filter chain. */
    const char *svg =
        "<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"60000\" "
        "height=\"60000\"><filter id=\"f\"><feGaussianBlur stdDeviation=\"900\"/></filter>"
        "<rect width=\"60000\" height=\"60000\" filter=\"url(#f)\"/></svg>";
    static const guint8 tiff[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const char *xpm = "/* XPM */\nstatic char *x[] = {\"1 1 1 1\", \"a c #000000\", \"a\"};\n";
    struct {
        const char *label;
        const void *data;
        gsize len;
    } others[] = {
        {"svg", svg, strlen(svg)},
        {"tiff", tiff, sizeof tiff},
        {"xpm", xpm, strlen(xpm)},
        {"one byte", "\x89", 1},
        {"png magic cut", "\x89PNG\r\n", 6},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(others); i++) {
        TernImage *im = tern_image_load_bytes(others[i].data, others[i].len, others[i].label,
                                              NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED),
               "%s: %s", others[i].label, e ? e->message : "accepted");
        CHECKF(e && strstr(e->message, "not an image in a format Tern reads"), "%s: %s",
               others[i].label, e ? e->message : "");
        tern_image_free(im);
        g_clear_error(&e);
    }

    /* Formats people have that Tern does not read: refused by their first
     * bytes, naming what the file is, so that it is not taken for broken.
     * Text that merely starts like one (BM..., <!-- ...) is not named. */
    {
        static const guint8 bmp[] = {'B', 'M', 70, 0, 0, 0, 0, 0, 0, 0, 54, 0, 0, 0, 40, 0, 0, 0,
                                     1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 24, 0};
        static const guint8 heic[] = {0, 0, 0, 24, 'f', 't', 'y', 'p', 'h', 'e', 'i', 'c',
                                      0, 0, 0, 0, 'm', 'i', 'f', '1', 'h', 'e', 'i', 'c'};
        static const guint8 avif[] = {0, 0, 0, 28, 'f', 't', 'y', 'p', 'a', 'v', 'i', 'f', 0, 0,
                                      0, 0, 'm', 'i', 'f', '1', 'm', 'i', 'a', 'f', 'a', 'v', 'i', 'f'};
        static const guint8 mp4[] = {0, 0, 0, 20, 'f', 't', 'y', 'p', 'i', 's', 'o', 'm',
                                     0, 0, 0, 0, 'i', 's', 'o', 'm'};
        static const guint8 tiff_be[] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 0};
        static const guint8 jxl[] = {0xFF, 0x0A, 0xFA, 0x7F, 0x01, 0x90};
        static const guint8 ico[] = {0, 0, 1, 0, 1, 0, 16, 16, 0, 0, 1, 0, 32, 0};
        /* Camera RAW files (TIFF containers but CR3): IFD0 at 8 holding
         * DNGVersion, or a Make (ASCII, at 26 when longer than 4 bytes). */
        static const guint8 dng[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0xC6, 1, 0,
                                     4, 0, 0, 0, 1, 4, 0, 0, 0, 0, 0, 0};
        static const guint8 nef[] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x0F, 0, 2,
                                     0, 0, 0, 18, 0, 0, 0, 26, 0, 0, 0, 0, 'N', 'I',
                                     'K', 'O', 'N', ' ', 'C', 'O', 'R', 'P', 'O', 'R',
                                     'A', 'T', 'I', 'O', 'N', 0};
        static const guint8 arw[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x0F, 0x01, 2, 0,
                                     5, 0, 0, 0, 26, 0, 0, 0, 0, 0, 0, 0, 'S', 'O',
                                     'N', 'Y', 0};
        static const guint8 scanner[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x0F, 0x01, 2,
                                         0, 6, 0, 0, 0, 26, 0, 0, 0, 0, 0, 0, 0, 'E', 'P',
                                         'S', 'O', 'N', 0};
        static const guint8 cr2[] = {'I', 'I', 42, 0, 16, 0, 0, 0, 'C', 'R', 2, 0, 0, 0, 0, 0};
        static const guint8 orf[] = {'I', 'I', 'R', 'O', 8, 0, 0, 0, 0, 0};
        static const guint8 rw2[] = {'I', 'I', 'U', 0, 24, 0, 0, 0, 0, 0};
        static const guint8 cr3[] = {0, 0, 0, 24, 'f', 't', 'y', 'p', 'c', 'r', 'x', ' ',
                                     0, 0, 0, 1, 'c', 'r', 'x', ' ', 'i', 's', 'o', 'm'};
        const char *xml_svg = "\xef\xbb\xbf\n<?xml version=\"1.0\"?>\n<!-- drawn -->\n"
                              "<svg xmlns=\"http://www.w3.org/2000/svg\"/>";
        struct {
            const char *label;
            const void *data;
            gsize len;
            const char *kind; /* NULL: not named */
        } named[] = {
            {"photo.heic", heic, sizeof heic, "HEIC"},
            {"photo.avif", avif, sizeof avif, "AVIF"},
            {"scan.tif", tiff_be, sizeof tiff_be, "TIFF"},
            {"scan-le.tif", tiff, sizeof tiff, "TIFF"},
            {"epson-scan.tif", scanner, sizeof scanner, "TIFF"},
            {"photo.dng", dng, sizeof dng, "a camera RAW photo (DNG)"},
            {"photo.nef", nef, sizeof nef, "a camera RAW photo (NEF)"},
            {"photo.arw", arw, sizeof arw, "a camera RAW photo (ARW)"},
            {"photo.cr2", cr2, sizeof cr2, "a camera RAW photo (CR2)"},
            {"photo.orf", orf, sizeof orf, "a camera RAW photo (ORF)"},
            {"photo.rw2", rw2, sizeof rw2, "a camera RAW photo (RW2)"},
            {"photo.cr3", cr3, sizeof cr3, "a camera RAW photo (CR3)"},
            {"paint.bmp", bmp, sizeof bmp, "BMP"},
            {"photo.jxl", jxl, sizeof jxl, "JPEG XL"},
            {"favicon.ico", ico, sizeof ico, "ICO"},
            {"drawing.psd", "8BPS\0\1", 6, "PSD"},
            {"paper.pdf", "%PDF-1.7\n", 9, "PDF"},
            {"drawing.svg", svg, strlen(svg), "SVG"},
            {"bom.svg", xml_svg, strlen(xml_svg), "SVG"},
            {"clip.mp4", mp4, sizeof mp4, NULL},
            {"cars.png", "BMW and Audi, a list\n", 21, NULL},
            {"page.png", "<!DOCTYPE html><html></html>", 29, NULL},
        };
        for (size_t i = 0; i < G_N_ELEMENTS(named); i++) {
            TernImage *im =
                tern_image_load_bytes(named[i].data, named[i].len, named[i].label, NULL, &e);
            g_autofree char *says =
                named[i].kind ? g_strdup_printf("this one is %s", named[i].kind) : NULL;
            CHECKF(im == NULL &&
                       g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED) &&
                       strstr(e->message, named[i].label) &&
                       strstr(e->message, "not an image in a format Tern reads") &&
                       (says ? strstr(e->message, says) != NULL
                             : strstr(e->message, "this one is") == NULL),
                   "%s: %s", named[i].label, e ? e->message : "accepted");
            tern_image_free(im);
            g_clear_error(&e);
        }
    }

    /* A FIFO named like a picture: refused without waiting for a writer. */
    g_autofree char *fifo = tmp_path("pipe.png");
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    TernImage *fim = load(fifo, NULL, &e);
    CHECKF(fim == NULL && e && strstr(e->message, "not a regular file"), "fifo: %s",
           e ? e->message : "accepted");
    tern_image_free(fim);
    g_clear_error(&e);
    g_autofree char *dir_path = tmp_path("");
    fim = load(dir_path, NULL, &e);
    CHECKF(fim == NULL && e && strstr(e->message, "not a regular file"), "directory: %s",
           e ? e->message : "accepted");
    tern_image_free(fim);
    g_clear_error(&e);

    /* JPEG: complete, with a trailer after the end marker, and cut short. */
    GdkPixbuf *pb = two_halves(64, 48, FALSE);
    gchar *jpg = NULL;
    gsize len = 0;
    CHECK(gdk_pixbuf_save_to_buffer(pb, &jpg, &len, "jpeg", &e, "quality", "90", NULL));
    g_object_unref(pb);
    CHECK(len > 400 && (guint8)jpg[len - 2] == 0xFF && (guint8)jpg[len - 1] == 0xD9);
    TernImage *im = tern_image_load_bytes(jpg, len, "whole.jpg", NULL, &e);
    CHECKF(im != NULL && im->width == 64 && im->height == 48, "whole jpeg: %s",
           e ? e->message : "");
    tern_image_free(im);
    g_clear_error(&e);
    GByteArray *trailer = g_byte_array_new();
    g_byte_array_append(trailer, (guint8 *)jpg, (guint)len);
    g_byte_array_append(trailer, (const guint8 *)"camera trailer", 14);
    im = tern_image_load_bytes(trailer->data, trailer->len, "trailer.jpg", NULL, &e);
    CHECKF(im != NULL, "jpeg with a trailer: %s", e ? e->message : "");
    tern_image_free(im);
    g_clear_error(&e);
    g_byte_array_unref(trailer);
    /* (Cut to len - 2 or len - 1, only its end marker is missing:
     * jpeg_without_eoi.) */
    const gsize cuts[] = {len - 3, len / 2, 200, 20, 4};
    for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++) {
        im = tern_image_load_bytes(jpg, cuts[i], "cut.jpg", NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
               "jpeg cut to %zu of %zu bytes: %s", cuts[i], len, e ? e->message : "accepted");
        tern_image_free(im);
        g_clear_error(&e);
    }
    /* The same file through a path (chunked reads) cut inside its scan. */
    g_autofree char *cut_path = tmp_path("cut.jpg");
    write_file(cut_path, jpg, len - 3);
    im = load(cut_path, NULL, &e);
    CHECKF(im == NULL && e && strstr(e->message, "truncated JPEG"), "%s",
           e ? e->message : "accepted");
    tern_image_free(im);
    g_clear_error(&e);

    /* A 300 MiB file (sparse): the whole JPEG, then a trailer of zeros; and
     * its first 20 bytes, then zeros. The first is a picture, the second
     * damaged; neither is read past its first chunk. */
    for (int broken = 0; broken < 2; broken++) {
        g_autofree char *big = tmp_path(broken ? "zeros.jpg" : "long-trailer.jpg");
        write_file(big, jpg, broken ? 20 : len);
        CHECK(truncate(big, 300 << 20) == 0);
        const double t0 = now_s();
        im = load(big, NULL, &e);
        if (broken)
            CHECKF(im == NULL && e && strstr(e->message, "damaged JPEG"), "zeros.jpg: %s",
                   e ? e->message : "accepted");
        else
            CHECKF(im != NULL && im->width == 64, "long-trailer.jpg: %s", e ? e->message : "");
        CHECKF(now_s() - t0 < 1.0, "a 300 MiB JPEG file took %.2f s", now_s() - t0);
        tern_image_free(im);
        g_clear_error(&e);
        unlink(big);
    }

    /* 324 bytes declaring 8000 x 8000 in the frame header (SOF0). */
    gsize sof = 0;
    for (gsize i = 2; i + 9 < len; i++)
        if ((guint8)jpg[i] == 0xFF && (guint8)jpg[i + 1] == 0xC0) {
            sof = i;
            break;
        }
    CHECKF(sof > 0 && sof + 9 < 324, "no SOF0 early in the JPEG (at %zu)", sof);
    if (sof > 0 && sof + 9 < 324) {
        guint8 bomb[324];
        memcpy(bomb, jpg, sizeof bomb);
        bomb[sof + 5] = 8000 >> 8;
        bomb[sof + 6] = 8000 & 0xFF;
        bomb[sof + 7] = 8000 >> 8;
        bomb[sof + 8] = 8000 & 0xFF;
        im = tern_image_load_bytes(bomb, sizeof bomb, "bomb.jpg", NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT) &&
                   strstr(e->message, "truncated JPEG"),
               "8000x8000 in 324 bytes: %s", e ? e->message : "decoded");
        tern_image_free(im);
        g_clear_error(&e);
    }
    /* Broken marker structure: a segment length of 1. */
    GByteArray *broken = g_byte_array_new();
    g_byte_array_append(broken, (guint8 *)jpg, (guint)len);
    broken->data[4] = 0;
    broken->data[5] = 1;
    im = tern_image_load_bytes(broken->data, broken->len, "broken.jpg", NULL, &e);
    CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
           "broken jpeg: %s", e ? e->message : "accepted");
    tern_image_free(im);
    g_clear_error(&e);
    g_byte_array_unref(broken);
    g_free(jpg);

    /* WebP: its RIFF header says how many bytes must arrive. */
    pb = two_halves(32, 16, FALSE);
    gchar *webp_data = NULL;
    gsize webp_len = 0;
    if (gdk_pixbuf_save_to_buffer(pb, &webp_data, &webp_len, "webp", &e, NULL)) {
        im = tern_image_load_bytes(webp_data, webp_len - 1, "cut.webp", NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
               "webp cut by one byte: %s", e ? e->message : "accepted");
        tern_image_free(im);
        g_free(webp_data);
    }
    g_clear_error(&e);
    g_object_unref(pb);

    /* GIF magic, garbage after it. */
    static const char bad_gif[] = "GIF89a\xff\xff\xff\xff garbage";
    im = tern_image_load_bytes(bad_gif, sizeof bad_gif - 1, "bad.gif", NULL, &e);
    CHECKF(im == NULL && e != NULL, "garbage gif: accepted");
    tern_image_free(im);
    g_clear_error(&e);
}

/* A JPEG of four coloured quadrants (w x h), as gdk-pixbuf saves it, with
 * an EXIF APP1 segment right after SOI when app1 is given. */
static GByteArray *quadrant_jpeg(int w, int h, const guint8 *app1, gsize app1_len) {
    GdkPixbuf *pb = gdk_pixbuf_new(GDK_COLORSPACE_RGB, FALSE, 8, w, h);
    const int stride = gdk_pixbuf_get_rowstride(pb);
    guint8 *p = gdk_pixbuf_get_pixels(pb);
    static const guint8 colour[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            memcpy(p + y * stride + x * 3, colour[(x >= w / 2) + 2 * (y >= h / 2)], 3);
    gchar *jpg = NULL;
    gsize len = 0;
    GError *e = NULL;
    CHECKF(gdk_pixbuf_save_to_buffer(pb, &jpg, &len, "jpeg", &e, "quality", "95", NULL), "%s",
           e ? e->message : "");
    g_clear_error(&e);
    g_object_unref(pb);
    GByteArray *out = g_byte_array_new();
    if (jpg && len > 2) {
        g_byte_array_append(out, (guint8 *)jpg, 2);
        if (app1)
            g_byte_array_append(out, app1, (guint)app1_len);
        g_byte_array_append(out, (guint8 *)jpg + 2, (guint)(len - 2));
    }
    g_free(jpg);
    return out;
}

/* Where the pixel shown at (x, y) comes from in a w x h picture stored
 * with EXIF orientation o (the TIFF/EXIF definition of tag 0x0112). */
static void oriented_source(int o, int w, int h, int x, int y, int *sx, int *sy) {
    switch (o) {
    case 2: *sx = w - 1 - x; *sy = y; break;
    case 3: *sx = w - 1 - x; *sy = h - 1 - y; break;
    case 4: *sx = x; *sy = h - 1 - y; break;
    case 5: *sx = y; *sy = x; break;
    case 6: *sx = y; *sy = h - 1 - x; break;
    case 7: *sx = w - 1 - y; *sy = h - 1 - x; break;
    case 8: *sx = w - 1 - y; *sy = x; break;
    default: *sx = x; *sy = y; break;
    }
}

/* im is upright's pixels shown as orientation o says. */
static void check_oriented(const TernImage *im, const TernImage *upright, int o, const char *label) {
    const int w = upright->width, h = upright->height;
    const bool turned = o >= 5;
    CHECKF(im->width == (turned ? h : w) && im->height == (turned ? w : h),
           "%s: %d x %d, want %d x %d", label, im->width, im->height, turned ? h : w,
           turned ? w : h);
    if (im->width != (turned ? h : w) || im->height != (turned ? w : h))
        return;
    int wrong = 0;
    for (int y = 0; y < im->height; y++)
        for (int x = 0; x < im->width; x++) {
            int sx, sy;
            oriented_source(o, w, h, x, y, &sx, &sy);
            wrong += memcmp(px(im, x, y), px(upright, sx, sy), 3 * sizeof(float)) != 0;
        }
    CHECKF(wrong == 0, "%s: %d of %d pixels not where orientation %d puts them", label, wrong,
           im->width * im->height, o);
}

/* JPEGs as cameras and editors write them: all eight EXIF orientations
 * against the upright decode, malformed EXIF blocks (an IFD offset past the
 * end, an IFD chain that loops, an absurd entry count), and kinds of JPEG
 * that gdk-pixbuf's loader does not decode (12-bit samples, lossless),
 * which are refused as unsupported, not as damaged. */
static void jpeg_kinds(void) {
    enum { W = 32, H = 16 };
    GError *e = NULL;
    GByteArray *plain = quadrant_jpeg(W, H, NULL, 0);
    TernImage *upright = tern_image_load_bytes(plain->data, plain->len, "upright.jpg", NULL, &e);
    CHECKF(upright != NULL && upright->width == W && upright->height == H, "upright: %s",
           e ? e->message : "");
    g_clear_error(&e);
    /* APP1: Exif, a big-endian TIFF header, IFD0 of one SHORT entry. */
    guint8 app1[] = {
        0xFF, 0xE1, 0x00, 34, 'E', 'x', 'i', 'f', 0, 0,
        'M', 'M', 0, 42, 0, 0, 0, 8, /* TIFF header, IFD0 at 8 */
        0, 1,                        /* one entry */
        0x01, 0x12, 0, 3, 0, 0, 0, 1, /* tag 0x0112 SHORT x1 */
        0, 1, 0, 0,                  /* value (patched) */
        0, 0, 0, 0,                  /* next IFD */
    };
    for (int o = 1; o <= 8 && upright; o++) {
        app1[29] = (guint8)o;
        GByteArray *j = quadrant_jpeg(W, H, app1, sizeof app1);
        char label[32];
        g_snprintf(label, sizeof label, "orientation-%d.jpg", o);
        TernImage *im = tern_image_load_bytes(j->data, j->len, label, NULL, &e);
        CHECKF(im != NULL, "%s: %s", label, e ? e->message : "");
        if (im)
            check_oriented(im, upright, o, label);
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(j);
    }
    /* Decoded reduced (256 x 128 fitted to 32: libjpeg halves it), the
     * orientation still applies. */
    {
        TernImageOptions fit = {.fit_side = 32};
        GByteArray *big = quadrant_jpeg(256, 128, NULL, 0);
        TernImage *up = tern_image_load_bytes(big->data, big->len, "upright-fit.jpg", &fit, &e);
        CHECKF(up != NULL && up->source_width == 256, "upright fitted: %s", e ? e->message : "");
        g_clear_error(&e);
        for (int o = 2; o <= 8 && up; o++) {
            app1[29] = (guint8)o;
            GByteArray *j = quadrant_jpeg(256, 128, app1, sizeof app1);
            char label[40];
            g_snprintf(label, sizeof label, "orientation-%d-fitted.jpg", o);
            TernImage *im = tern_image_load_bytes(j->data, j->len, label, &fit, &e);
            CHECKF(im != NULL, "%s: %s", label, e ? e->message : "");
            if (im)
                check_oriented(im, up, o, label);
            tern_image_free(im);
            g_clear_error(&e);
            g_byte_array_unref(j);
        }
        tern_image_free(up);
        g_byte_array_unref(big);
    }
    /* Malformed EXIF (orientation 6 in the entry): decoded whatever the
     * block holds, promptly, showing either the stored or the rotated
     * picture. */
    for (int k = 0; k < 3 && upright; k++) {
        guint8 bad[sizeof app1];
        memcpy(bad, app1, sizeof bad);
        bad[29] = 6;
        if (k == 0) /* IFD0 past the end of the block */
            bad[16] = 0x7f, bad[17] = 0xff;
        else if (k == 1) /* the next IFD is IFD0 again */
            bad[33] = 8;
        else /* 65535 entries in a block of one */
            bad[18] = bad[19] = 0xff;
        GByteArray *j = quadrant_jpeg(W, H, bad, sizeof bad);
        static const char *const labels[] = {"exif-offset.jpg", "exif-loop.jpg", "exif-count.jpg"};
        const double t0 = now_s();
        TernImage *im = tern_image_load_bytes(j->data, j->len, labels[k], NULL, &e);
        CHECKF(im != NULL && now_s() - t0 < 2.0, "%s: %.2f s, %s", labels[k], now_s() - t0,
               e ? e->message : "");
        if (im)
            check_oriented(im, upright, im->width == W ? 1 : 6, labels[k]);
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(j);
    }
    /* The frame header patched: 12-bit samples (as SOF0 and as SOF1, the
     * extended process that allows them), the lossless process SOF3, and a
     * height of 0 (given later by a DNL marker, which libjpeg does not
     * read). */
    gsize sof = 0;
    for (gsize i = 2; i + 4 < plain->len; i++)
        if (plain->data[i] == 0xFF && plain->data[i + 1] == 0xC0) {
            sof = i;
            break;
        }
    CHECK(sof > 0);
    for (int k = 0; k < 4 && sof; k++) {
        GByteArray *j = g_byte_array_new();
        g_byte_array_append(j, plain->data, plain->len);
        if (k < 2)
            j->data[sof + 4] = 12;
        if (k == 1)
            j->data[sof + 1] = 0xC1;
        if (k == 2)
            j->data[sof + 1] = 0xC3;
        if (k == 3) { /* the height moved to a DNL segment before EOI */
            const guint8 dnl[6] = {0xFF, 0xDC, 0, 4, j->data[sof + 5], j->data[sof + 6]};
            j->data[sof + 5] = j->data[sof + 6] = 0;
            g_byte_array_set_size(j, j->len - 2);
            g_byte_array_append(j, dnl, sizeof dnl);
            g_byte_array_append(j, (const guint8 *)"\xff\xd9", 2);
        }
        static const char *const labels[] = {"twelve.jpg", "twelve-sof1.jpg", "lossless.jpg",
                                             "dnl.jpg"};
        static const char *const says[] = {"12-bit", "12-bit", "lossless", "DNL"};
        TernImage *im = tern_image_load_bytes(j->data, j->len, labels[k], NULL, &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED) &&
                   strstr(e->message, labels[k]) &&
                   strstr(e->message, says[k]) &&
                   !strstr(e->message, "damaged"),
               "%s: %s", labels[k], e ? e->message : "accepted");
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(j);
    }
    tern_image_free(upright);
    g_byte_array_unref(plain);
}

/* JPEGs that gdk-pixbuf's saver cannot write, made with libjpeg by
 * tests/data/image/make-jpegs.c: the quadrant picture as a progressive and
 * an arithmetic-coded (sequential, progressive) JPEG, which hold the
 * baseline's coefficients and so decode to its very pixels, and as Adobe
 * CMYK and YCCK (inverted, as Photoshop writes them), which decode to the
 * quadrants' colours, not their negatives. */
static void jpeg_fixtures(void) {
    const char *root = g_getenv("TERN_SOURCE_ROOT");
    CHECKF(root != NULL, "TERN_SOURCE_ROOT is not set");
    if (!root)
        return;
    GError *e = NULL;
    g_autofree char *base_path = g_build_filename(root, "tests/data/image/baseline.jpg", NULL);
    TernImage *base = load(base_path, NULL, &e);
    CHECKF(base != NULL && base->width == 32 && base->height == 16, "%s: %s", base_path,
           e ? e->message : "");
    g_clear_error(&e);
    static const char *const same[] = {"progressive.jpg", "arithmetic.jpg",
                                       "arithmetic-progressive.jpg"};
    for (size_t i = 0; i < G_N_ELEMENTS(same) && base; i++) {
        g_autofree char *path = g_build_filename(root, "tests/data/image", same[i], NULL);
        TernImage *im = load(path, NULL, &e);
        CHECKF(im != NULL && im->width == base->width && im->height == base->height &&
                   !memcmp(im->rgb, base->rgb, sizeof(float) * 3 * 32 * 16),
               "%s: %s", same[i], e ? e->message : "not the baseline's pixels");
        tern_image_free(im);
        g_clear_error(&e);
    }
    static const char *const inked[] = {"baseline.jpg", "cmyk-adobe.jpg", "ycck-adobe.jpg"};
    static const float colour[4][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}};
    for (size_t i = 0; i < G_N_ELEMENTS(inked); i++) {
        g_autofree char *path = g_build_filename(root, "tests/data/image", inked[i], NULL);
        TernImage *im = load(path, NULL, &e);
        CHECKF(im != NULL && im->width == 32 && im->height == 16, "%s: %s", inked[i],
               e ? e->message : "");
        for (int q = 0; im && im->width == 32 && im->height == 16 && q < 4; q++) {
            float m[3];
            const int x0 = q % 2 ? 18 : 2, y0 = q / 2 ? 10 : 2;
            mean_rgb(im, x0, y0, x0 + 12, y0 + 4, m);
            CHECKF(fabsf(m[0] - colour[q][0]) < 0.05f && fabsf(m[1] - colour[q][1]) < 0.05f &&
                       fabsf(m[2] - colour[q][2]) < 0.05f,
                   "%s: quadrant %d is %.2f %.2f %.2f, want %.0f %.0f %.0f", inked[i], q, m[0],
                   m[1], m[2], colour[q][0], colour[q][1], colour[q][2]);
        }
        tern_image_free(im);
        g_clear_error(&e);
    }
    tern_image_free(base);
}

/* A JPEG whose last scan is whole but whose end marker (FF D9) is missing,
 * or half of it: decoded to the very pixels of the whole file. Cut anywhere
 * inside the scan, even by its last byte, it is still refused as truncated
 * (the decoder would grey-fill the rest). Baseline JPEGs of gdk-pixbuf's
 * saver (4:2:0, sizes on and off the 16-pixel MCU grid) and libjpeg's
 * fixtures with restart markers (colour, and grey: one component, so one
 * block an MCU); a progressive or arithmetic-coded file cannot be told
 * complete from its bytes without decoding it, so it is refused without
 * its end marker, with a message that says so and what to do. */
static void jpeg_without_eoi(void) {
    GError *e = NULL;
    const char *root = g_getenv("TERN_SOURCE_ROOT");
    CHECKF(root != NULL, "TERN_SOURCE_ROOT is not set");
    const char *const fixtures[] = {"restart.jpg", "gray-restart.jpg", "progressive.jpg",
                                    "arithmetic.jpg", "arithmetic-progressive.jpg"};
    const int sizes[][2] = {{64, 48}, {61, 45}, {1, 1}, {17, 200}};
    for (size_t i = 0; i < G_N_ELEMENTS(sizes) + G_N_ELEMENTS(fixtures); i++) {
        gchar *jpg = NULL;
        gsize len = 0;
        g_autofree char *label = NULL;
        if (i < G_N_ELEMENTS(sizes)) {
            GdkPixbuf *pb = two_halves(sizes[i][0], sizes[i][1], FALSE);
            CHECK(gdk_pixbuf_save_to_buffer(pb, &jpg, &len, "jpeg", &e, "quality", "90", NULL));
            g_object_unref(pb);
            label = g_strdup_printf("%dx%d.jpg", sizes[i][0], sizes[i][1]);
        } else if (root) {
            label = g_strdup(fixtures[i - G_N_ELEMENTS(sizes)]);
            g_autofree char *path = g_build_filename(root, "tests/data/image", label, NULL);
            CHECKF(g_file_get_contents(path, &jpg, &len, &e), "%s", e ? e->message : "");
        }
        g_clear_error(&e);
        if (!jpg || len < 8 || (guint8)jpg[len - 2] != 0xFF || (guint8)jpg[len - 1] != 0xD9) {
            CHECKF(FALSE, "%s: no end marker", label ? label : "?");
            g_free(jpg);
            continue;
        }
        const gboolean progressive = label && strstr(label, "progressive") != NULL;
        const gboolean arithmetic = label && strstr(label, "arithmetic") != NULL;
        TernImage *whole = tern_image_load_bytes(jpg, len, label, NULL, &e);
        CHECKF(whole != NULL, "%s: %s", label, e ? e->message : "");
        g_clear_error(&e);
        for (gsize missing = 1; whole && missing <= 2; missing++) {
            TernImage *im = tern_image_load_bytes(jpg, len - missing, label, NULL, &e);
            if (progressive || arithmetic)
                CHECKF(im == NULL &&
                           g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT) &&
                           strstr(e->message, label) &&
                           strstr(e->message, progressive ? "a progressive JPEG"
                                                          : "an arithmetic-coded JPEG") &&
                           strstr(e->message, "cannot tell") &&
                           strstr(e->message, "save it again"),
                       "%s without %zu end bytes: %s", label, missing,
                       e ? e->message : "accepted");
            else
                CHECKF(im != NULL && im->width == whole->width &&
                           im->height == whole->height &&
                           !memcmp(im->rgb, whole->rgb,
                                   sizeof(float) * 3 * (gsize)whole->width * whole->height),
                       "%s without %zu end bytes: %s", label, missing,
                       e ? e->message : "not the whole file's pixels");
            tern_image_free(im);
            g_clear_error(&e);
        }
        /* The last 40 bytes of the scan, cut one by one. */
        for (gsize cut = len - 3; cut + 43 > len && cut > 2; cut--) {
            TernImage *im = tern_image_load_bytes(jpg, cut, label, NULL, &e);
            CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
                   "%s cut to %zu of %zu bytes: %s", label, cut, len,
                   e ? e->message : "accepted");
            tern_image_free(im);
            g_clear_error(&e);
        }
        /* Declaring more pixels than the limit: refused for its size, its
         * scan never walked (it could hold 256 MiB of one-bit codes). */
        for (gsize at = 2; i == 0 && at + 9 < len; at++)
            if ((guint8)jpg[at] == 0xFF && (guint8)jpg[at + 1] == 0xC0) {
                jpg[at + 5] = jpg[at + 7] = (gchar)(9000 >> 8);
                jpg[at + 6] = jpg[at + 8] = (gchar)(9000 & 0xFF);
                TernImage *im = tern_image_load_bytes(jpg, len - 2, label, NULL, &e);
                CHECKF(im == NULL &&
                           g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE) &&
                           strstr(e->message, "9000 x 9000"),
                       "9000 x 9000 without its end marker: %s", e ? e->message : "accepted");
                tern_image_free(im);
                g_clear_error(&e);
                break;
            }
        tern_image_free(whole);
        g_free(jpg);
    }
}

/* ------------------------------------------ progressive JPEG work */

static void jpeg_segment(GByteArray *a, guint8 marker, const guint8 *data, guint16 len) {
    const guint8 head[4] = {0xFF, marker, (guint8)((len + 2) >> 8), (guint8)(len + 2)};
    g_byte_array_append(a, head, 4);
    g_byte_array_append(a, data, len);
}

/* A progressive grey JPEG of w x h pixels and `scans` scans (at most 128),
 * built by hand: every coefficient zero (mid grey), in a valid progression
 * (DC in two steps of successive approximation, then each AC coefficient
 * alone, first and refined), and each scan with real entropy data, one 0
 * bit a block (DC category 0, end of band, or a refinement bit): what a
 * hostile file of that many scans costs the decoder. */
static GByteArray *progressive_jpeg(guint w, guint h, guint scans) {
    GByteArray *a = g_byte_array_new();
    g_byte_array_append(a, (const guint8 *)"\xFF\xD8", 2);
    guint8 dqt[65] = {0};
    memset(dqt + 1, 1, 64);
    jpeg_segment(a, 0xDB, dqt, sizeof dqt);
    const guint8 sof[] = {8, h >> 8, h & 0xFF, w >> 8, w & 0xFF, 1, 1, 0x11, 0};
    jpeg_segment(a, 0xC2, sof, sizeof sof);
    /* One code, of one bit: DC category 0, and AC symbol 0x00 (end of band). */
    for (guint8 cls = 0; cls <= 0x10; cls += 0x10) {
        guint8 dht[18] = {cls, 1};
        jpeg_segment(a, 0xC4, dht, sizeof dht);
    }
    const gsize bytes = ((gsize)((w + 7) / 8) * ((h + 7) / 8) + 7) / 8;
    guint8 *zeros = g_malloc0(bytes);
    for (guint i = 0; i < scans && i < 128; i++) {
        const guint k = i < 2 ? 0 : i < 65 ? i - 1 : i - 64;
        const guint8 ah = i == 1 || i >= 65, al = !ah;
        const guint8 sos[] = {1, 1, 0, k, k, (guint8)(ah << 4 | al)};
        jpeg_segment(a, 0xDA, sos, sizeof sos);
        g_byte_array_append(a, zeros, (guint)bytes);
    }
    g_free(zeros);
    g_byte_array_append(a, (const guint8 *)"\xFF\xD9", 2);
    return a;
}

/* Each scan of a progressive JPEG costs a pass over the whole picture, so
 * scans x pixels is bounded, not only the scans: 99 scans of 64 megapixels
 * took 11 s grey, 21 s in colour. Refused from the markers, before the
 * decoder sees the file; a file at the bound is decoded. */
static void jpeg_scan_work(void) {
    GError *e = NULL;
    const TernImageOptions fit = {.fit_side = 64};
    /* 4096 x 4096 is 16 Mi pixels: 48 scans are the bound. */
    G_STATIC_ASSERT(TERN_IMAGE_MAX_JPEG_SCAN_PIXELS == 48ull * 4096 * 4096);
    GByteArray *at = progressive_jpeg(4096, 4096, 48);
    double t0 = now_s();
    TernImage *im = tern_image_load_bytes(at->data, at->len, "at.jpg", &fit, &e);
    CHECKF(im != NULL && im->source_width == 4096 && !strcmp(im->format, "jpeg"),
           "48 scans of 4096 x 4096: %s", e ? e->message : "");
    if (im)
        CHECKF(near3(px(im, 10, 10), 0.5f, 0.5f, 0.5f, 0.02f), "mid grey: %.3f", px(im, 10, 10)[0]);
    printf("# 48 scans of 4096 x 4096 decoded in %.2f s\n", now_s() - t0);
    tern_image_free(im);
    g_clear_error(&e);
    g_byte_array_unref(at);

    struct {
        guint w, h, scans;
        const char *says;
    } over[] = {
        {4096, 4096, 49, "at most 48 scans at this size"},
        {8192, 8192, 99, "at most 12 scans at this size"},
        {8192, 8192, 13, "at most 12 scans at this size"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(over); i++) {
        GByteArray *j = progressive_jpeg(over[i].w, over[i].h, over[i].scans);
        t0 = now_s();
        im = tern_image_load_bytes(j->data, j->len, "scans.jpg", &fit, &e);
        const double took = now_s() - t0;
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE) &&
                   strstr(e->message, "scans.jpg") && strstr(e->message, over[i].says),
               "%u scans of %u x %u: %s", over[i].scans, over[i].w, over[i].h,
               e ? e->message : "decoded");
        CHECKF(took < 1.0, "%u scans of %u x %u refused in %.2f s", over[i].scans, over[i].w,
               over[i].h, took);
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(j);
    }
}

/* A colour JPEG of w x h pixels (components sampled 1x1, 4:4:4) in
 * `scans` single-component scans, progressive (DC, then AC coefficient k
 * of each component in turn) or sequential (scans = 3, one component
 * each), every coefficient zero (mid grey), each scan a 0 bit a block. */
static GByteArray *multi_scan_jpeg(guint w, guint h, guint scans, gboolean progressive) {
    GByteArray *a = g_byte_array_new();
    g_byte_array_append(a, (const guint8 *)"\xFF\xD8", 2);
    guint8 dqt[65] = {0};
    memset(dqt + 1, 1, 64);
    jpeg_segment(a, 0xDB, dqt, sizeof dqt);
    const guint8 sof[] = {8, h >> 8, h & 0xFF, w >> 8, w & 0xFF, 3,
                          1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0};
    jpeg_segment(a, progressive ? 0xC2 : 0xC0, sof, sizeof sof);
    for (guint8 cls = 0; cls <= 0x10; cls += 0x10) {
        guint8 dht[18] = {cls, 1};
        jpeg_segment(a, 0xC4, dht, sizeof dht);
    }
    const gsize bytes = ((gsize)((w + 7) / 8) * ((h + 7) / 8) + 7) / 8;
    guint8 *zeros = g_malloc0(bytes);
    for (guint i = 0; i < scans; i++) {
        const guint8 k = progressive ? (guint8)(i / 3) : 0;
        const guint8 sos[] = {1, (guint8)(1 + i % 3), 0, k, progressive ? k : 63, 0};
        jpeg_segment(a, 0xDA, sos, sizeof sos);
        g_byte_array_append(a, zeros, (guint)bytes);
    }
    g_free(zeros);
    g_byte_array_append(a, (const guint8 *)"\xFF\xD9", 2);
    return a;
}

/* A JPEG of several scans is decoded with all its coefficients held until
 * the last one (2 bytes each, 64 a block, per component), on top of the
 * picture: a 393 KB progressive 8192 x 8192 4:4:4 file of 3 scans took
 * 582 MB (0.9 s). Past TERN_IMAGE_MAX_JPEG_DECODE_BYTES it is refused from
 * its markers; the same file at 4096 x 4096 decodes, as does a
 * single-scan (baseline) one at 8192 x 8192, which holds no coefficients. */
static void jpeg_decode_memory(void) {
    GError *e = NULL;
    const TernImageOptions fit = {.fit_side = 64};
    struct {
        guint side, scans;
        gboolean progressive, refused;
    } cases[] = {
        {8192, 3, TRUE, TRUE},
        {8192, 3, FALSE, TRUE},
        {4096, 3, TRUE, FALSE},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        GByteArray *j = multi_scan_jpeg(cases[i].side, cases[i].side, cases[i].scans,
                                        cases[i].progressive);
        const double t0 = now_s();
        TernImage *im = tern_image_load_bytes(j->data, j->len, "coef.jpg", &fit, &e);
        const double took = now_s() - t0;
        if (cases[i].refused) {
            CHECKF(im == NULL &&
                       g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE) &&
                       strstr(e->message, "coef.jpg") && strstr(e->message, "MiB to decode") &&
                       strstr(e->message, "the limit is 512 MiB"),
                   "%u scans of %u x %u 4:4:4: %s", cases[i].scans, cases[i].side,
                   cases[i].side, e ? e->message : "decoded");
            CHECKF(took < 0.5, "refused in %.2f s", took);
        } else {
            CHECKF(im != NULL && im->source_width == (int)cases[i].side &&
                       near3(px(im, 5, 5), 0.5f, 0.5f, 0.5f, 0.02f),
                   "%u scans of %u x %u 4:4:4: %s", cases[i].scans, cases[i].side,
                   cases[i].side, e ? e->message : "not mid grey");
        }
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(j);
    }
}

/* A scan's output pass costs more when every colour component is at full
 * resolution (4:4:4): 14 progressive scans of 6000 x 6000 4:4:4 took 2.0 s
 * of CPU (-O2), where the pixel count alone allowed 22; such a frame counts
 * its pixels half as much again. Grey at the same size keeps its 22. */
static void jpeg_scan_work_444(void) {
    GError *e = NULL;
    const TernImageOptions fit = {.fit_side = 64};
    GByteArray *j = multi_scan_jpeg(6000, 6000, 15, TRUE);
    const double t0 = now_s();
    TernImage *im = tern_image_load_bytes(j->data, j->len, "444.jpg", &fit, &e);
    const double took = now_s() - t0;
    CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE) &&
               strstr(e->message, "444.jpg") && strstr(e->message, "15 or more scans") &&
               strstr(e->message, "at most 14 scans at this size"),
           "15 scans of 6000 x 6000 4:4:4: %s", e ? e->message : "decoded");
    CHECKF(took < 0.5, "refused in %.2f s", took);
    tern_image_free(im);
    g_clear_error(&e);
    g_byte_array_unref(j);
    /* Grey, 22 scans at that size: still under the bound (refused at 23). */
    for (guint scans = 22; scans <= 23; scans++) {
        j = progressive_jpeg(6000, 6000, scans);
        im = tern_image_load_bytes(j->data, j->len, "grey.jpg", &fit, &e);
        if (scans == 22)
            CHECKF(im != NULL && near3(px(im, 5, 5), 0.5f, 0.5f, 0.5f, 0.02f),
                   "22 grey scans of 6000 x 6000: %s", e ? e->message : "not mid grey");
        else
            CHECKF(im == NULL && e && strstr(e->message, "at most 22 scans at this size"),
                   "23 grey scans of 6000 x 6000: %s", e ? e->message : "decoded");
        tern_image_free(im);
        g_clear_error(&e);
        g_byte_array_unref(j);
    }
}

/* The encodings cache the server and the app share: copies out, keyed by
 * content and budget, bounded by entries and bytes, least recently used
 * first out, and safe from several threads. */
static float *rows_of(int n_tokens, int n_embd, float base) {
    float *r = malloc(sizeof(float) * (size_t)n_tokens * (size_t)n_embd);
    for (int i = 0; r && i < n_tokens * n_embd; i++)
        r[i] = base + (float)i;
    return r;
}

static bool holds(TernEmbedCache *c, const char *key, int budget, int n_tokens, int n_embd,
                  float base) {
    int n = -1;
    float *got = tern_embed_cache_get(c, key, budget, &n);
    bool ok = got && n == n_tokens;
    for (int i = 0; ok && i < n_tokens * n_embd; i++)
        ok = got[i] == base + (float)i;
    free(got);
    return ok;
}

typedef struct {
    TernEmbedCache *cache;
    int seed;
} hammer_arg;

static gpointer hammer(gpointer data) {
    hammer_arg *a = data;
    float *r = rows_of(4, 8, (float)a->seed);
    for (int i = 0; i < 2000; i++) {
        char key[32];
        g_snprintf(key, sizeof key, "k%d", (i * 7 + a->seed) % 13);
        if (i % 3 == 0) {
            tern_embed_cache_put(a->cache, key, i % 2, r, 4, 8);
        } else {
            int n = 0;
            free(tern_embed_cache_get(a->cache, key, i % 2, &n));
        }
        if (i % 500 == 499)
            tern_embed_cache_clear(a->cache);
    }
    free(r);
    return NULL;
}

static void embed_cache(void) {
    TernEmbedCache *c = tern_embed_cache_new(3, 1 << 20);
    float *a = rows_of(2, 4, 1), *b = rows_of(3, 4, 100);
    int n = -7;
    CHECK(tern_embed_cache_get(c, "a", 70, &n) == NULL && n == -7);
    tern_embed_cache_put(c, "a", 70, a, 2, 4);
    a[0] = -1; /* the cache holds its own copy */
    CHECK(holds(c, "a", 70, 2, 4, 1));
    CHECK(tern_embed_cache_get(c, "a", 140, &n) == NULL); /* the budget is part of the key */
    tern_embed_cache_put(c, "a", 70, b, 3, 4);           /* same key and budget: replaced */
    CHECK(holds(c, "a", 70, 3, 4, 100) && tern_embed_cache_size(c) == 1);
    /* Entries bound (3): "a" used last stays, the least recently used goes. */
    tern_embed_cache_put(c, "b", 70, b, 3, 4);
    tern_embed_cache_put(c, "c", 70, b, 3, 4);
    CHECK(holds(c, "a", 70, 3, 4, 100));
    tern_embed_cache_put(c, "d", 70, b, 3, 4);
    CHECK(tern_embed_cache_size(c) == 3);
    CHECK(tern_embed_cache_get(c, "b", 70, &n) == NULL);
    CHECK(holds(c, "a", 70, 3, 4, 100) && holds(c, "c", 70, 3, 4, 100) &&
          holds(c, "d", 70, 3, 4, 100));
    /* Garbage in: nothing kept, nothing read. */
    tern_embed_cache_put(c, NULL, 70, b, 3, 4);
    tern_embed_cache_put(c, "e", 70, NULL, 3, 4);
    tern_embed_cache_put(c, "e", 70, b, 0, 4);
    tern_embed_cache_put(c, "e", 70, b, -3, 4);
    CHECK(tern_embed_cache_get(c, NULL, 70, &n) == NULL && tern_embed_cache_size(c) == 3);
    tern_embed_cache_clear(c);
    CHECK(tern_embed_cache_size(c) == 0 && tern_embed_cache_get(c, "a", 70, &n) == NULL);
    tern_embed_cache_free(c);

    /* Bytes bound: 3 entries of 48 bytes in 100 bytes keep 2; one entry
     * larger than the bound is not kept at all. */
    c = tern_embed_cache_new(8, 100);
    tern_embed_cache_put(c, "x", 1, b, 3, 4);
    tern_embed_cache_put(c, "y", 1, b, 3, 4);
    tern_embed_cache_put(c, "z", 1, b, 3, 4);
    CHECK(tern_embed_cache_size(c) == 2 && tern_embed_cache_get(c, "x", 1, &n) == NULL);
    float *big = rows_of(10, 4, 0);
    tern_embed_cache_put(c, "big", 1, big, 10, 4);
    CHECK(tern_embed_cache_get(c, "big", 1, &n) == NULL && tern_embed_cache_size(c) == 2);
    free(big);
    tern_embed_cache_free(c);
    free(a);
    free(b);

    /* Four threads putting, getting and clearing at once. */
    c = tern_embed_cache_new(5, 1 << 20);
    GThread *t[4];
    hammer_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (hammer_arg){c, i};
        t[i] = g_thread_new("hammer", hammer, &args[i]);
    }
    for (int i = 0; i < 4; i++)
        g_thread_join(t[i]);
    CHECK(tern_embed_cache_size(c) <= 5);
    tern_embed_cache_free(c);
    tern_embed_cache_free(NULL);
}

/* Inputs fuzz-image found (tests/fuzz/fuzz-image.c): each drove gdk-pixbuf's
 * loader into GLib criticals (an animated WebP whose first ANMF frame holds
 * no picture: an iterator asked for a frame it never made; GIFs with a
 * first image of no rows or reaching past the screen: a row stride of
 * nothing, a copy from outside the frame). Each is now refused as damaged
 * before the loader sees it, without a critical. */
static guint n_criticals;

static void count_critical(const char *domain, GLogLevelFlags level, const char *message,
                           gpointer data) {
    (void)level;
    (void)data;
    n_criticals++;
    fprintf(stderr, "critical (%s): %s\n", domain ? domain : "", message);
}

static void fuzz_finds(void) {
    static const guint8 webp_empty_frame[] = {
        0x52, 0x49, 0x46, 0x46, 0x82, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56, 0x50, 0x38,
        0x58, 0x0a, 0x00, 0x00, 0x00, 0x56, 0x50, 0x38, 0x58, 0x0a, 0x00, 0x00, 0x01, 0x10, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x41, 0x4e, 0x4d, 0x46, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x41, 0xd6};
    static const guint8 webp_no_frame[] = {
        0x52, 0x49, 0x46, 0x46, 0x82, 0x00, 0x80, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56, 0x50, 0x38,
        0x58, 0x0a, 0x00, 0x00, 0x00, 0x56, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x41, 0x4e, 0x4d, 0x46, 0x00, 0x00, 0x00, 0x00, 0x00, 0x26};
    static const guint8 gif_no_rows[] = {
        0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0xff, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x21, 0xf9, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x21, 0x4b, 0x04, 0x01, 0x00, 0x00, 0x69, 0x63, 0x6e, 0x73, 0x00,
        0x25, 0x00, 0x00, 0x00, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7,
        0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7,
        0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7,
        0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7,
        0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7,
        0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7,
        0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7, 0xc7,
        0xc7, 0xc7, 0xc7, 0xc7, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x2c, 0x02, 0x62, 0x6d, 0x03, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x42, 0x60, 0x82};
    static const guint8 gif_past_screen[] = {
        0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x01, 0x00, 0xff, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x21, 0xf9, 0x04, 0xef, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00,
        0x00, 0x00, 0x95, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x2a, 0x00, 0x3b};
    /* gif_past_screen with a screen 0 pixels wide */
    guint8 gif_zero_screen[sizeof gif_past_screen];
    memcpy(gif_zero_screen, gif_past_screen, sizeof gif_zero_screen);
    gif_zero_screen[6] = 0;
    /* The message names what is wrong: these GIFs' block structure is
     * sound, and "broken block structure" sent users looking for the wrong
     * fault. */
    struct {
        const char *label;
        const guint8 *data;
        gsize len;
        const char *want;
    } cases[] = {
        {"webp, empty first frame", webp_empty_frame, sizeof webp_empty_frame, NULL},
        {"webp, no frame", webp_no_frame, sizeof webp_no_frame, NULL},
        {"gif, first image of no rows", gif_no_rows, sizeof gif_no_rows,
         "is empty or reaches past its 1 x 1 screen"},
        {"gif, first image past the screen", gif_past_screen, sizeof gif_past_screen,
         "its first frame, 149 x 1 pixels at 0,0, is empty or reaches past its 1 x 1 screen"},
        {"gif, a screen 0 pixels wide", gif_zero_screen, sizeof gif_zero_screen,
         "its screen is 0 x 1 pixels"},
    };
    static const char *const domains[] = {"GLib", "GLib-GObject", "GdkPixbuf"};
    guint ids[G_N_ELEMENTS(domains)];
    for (size_t d = 0; d < G_N_ELEMENTS(domains); d++)
        ids[d] = g_log_set_handler(domains[d], G_LOG_LEVEL_CRITICAL, count_critical, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        GError *e = NULL;
        n_criticals = 0;
        TernImage *im = tern_image_load_bytes(cases[i].data, cases[i].len, cases[i].label, NULL,
                                              &e);
        CHECKF(im == NULL && g_error_matches(e, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT),
               "%s: %s", cases[i].label, e ? e->message : "accepted");
        CHECKF(n_criticals == 0, "%s: %u GLib criticals", cases[i].label, n_criticals);
        CHECKF(!cases[i].want || (e && strstr(e->message, cases[i].want)), "%s: %s, want '%s'",
               cases[i].label, e ? e->message : "accepted", cases[i].want);
        if (e)
            fprintf(stderr, "%s: %s\n", cases[i].label, e->message);
        tern_image_free(im);
        g_clear_error(&e);
    }
    for (size_t d = 0; d < G_N_ELEMENTS(domains); d++)
        g_log_remove_handler(domains[d], ids[d]);
}

/* A JPEG larger than fit_side is decoded reduced by libjpeg (1/2, 1/4 or
 * 1/8) before the BILINEAR reduction: the picture is that of decoding
 * every pixel and reducing those, within a rounding's difference, and the
 * source size is still the stored one. Sides that allow 1/8, 1/4 and 1/2,
 * none (under twice the fitting), and one side shorter than it. */
static void jpeg_reduced(void) {
    static const struct { int w, h, fit; } cases[] = {
        {3600, 3600, 224}, {4000, 3000, 224}, {1800, 1400, 224}, {900, 900, 112},
        {1000, 700, 224}, {2000, 150, 224},
    };
    for (gsize c = 0; c < G_N_ELEMENTS(cases); c++) {
        const int w = cases[c].w, h = cases[c].h, fit = cases[c].fit;
        GdkPixbuf *pb = gdk_pixbuf_new(GDK_COLORSPACE_RGB, FALSE, 8, w, h);
        guint8 *px = gdk_pixbuf_get_pixels(pb);
        const int st = gdk_pixbuf_get_rowstride(pb);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                guint8 *q = px + (gsize)y * st + (gsize)x * 3;
                const bool sun = (x - w / 3) * (x - w / 3) + (y - h / 3) * (y - h / 3) < h * h / 25;
                q[0] = sun ? 250 : (guint8)(x * 200 / w);
                q[1] = sun ? 220 : (guint8)(y * 200 / h);
                q[2] = (guint8)(((x / 16 + y / 16) & 1) ? 200 : 40);
            }
        gchar *jpg;
        gsize len;
        GError *e = NULL;
        CHECK(gdk_pixbuf_save_to_buffer(pb, &jpg, &len, "jpeg", &e, "quality", "90", NULL));
        /* What the whole decode and the reduction gave. */
        GdkPixbufLoader *l = gdk_pixbuf_loader_new_with_type("jpeg", NULL);
        CHECK(gdk_pixbuf_loader_write(l, (const guint8 *)jpg, len, NULL) &&
              gdk_pixbuf_loader_close(l, NULL));
        GdkPixbuf *whole = gdk_pixbuf_loader_get_pixbuf(l);
        const int nw = MIN(w, fit), nh = MIN(h, fit);
        GdkPixbuf *want = gdk_pixbuf_scale_simple(whole, nw, nh, GDK_INTERP_BILINEAR);
        TernImageOptions o = {.fit_side = fit};
        TernImage *im = tern_image_load_bytes(jpg, len, "r.jpg", &o, &e);
        CHECKF(im && im->width == nw && im->height == nh && im->source_width == w &&
                   im->source_height == h,
               "%d x %d at %d: %s %d x %d from %d x %d", w, h, fit, e ? e->message : "",
               im ? im->width : 0, im ? im->height : 0, im ? im->source_width : 0,
               im ? im->source_height : 0);
        if (im && im->width == nw && im->height == nh) {
            const guint8 *wp = gdk_pixbuf_get_pixels(want);
            const int ws = gdk_pixbuf_get_rowstride(want);
            double sum = 0, worst = 0;
            for (int y = 0; y < nh; y++)
                for (int x = 0; x < nw * 3; x++) {
                    const double d = fabs(im->rgb[(gsize)y * nw * 3 + x] * 255.0 - wp[y * ws + x]);
                    sum += d;
                    worst = MAX(worst, d);
                }
            const double mean = sum / (nw * nh * 3.0);
            fprintf(stderr, "reduced JPEG %d x %d at %d: mean %.3f, worst %.1f of 255\n", w, h,
                    fit, mean, worst);
            CHECKF(mean < 1.5 && worst <= 24,
                   "%d x %d at %d: %.3f of 255 on average from the whole decode, %.1f at worst",
                   w, h, fit, mean, worst);
        }
        tern_image_free(im);
        g_clear_error(&e);
        g_object_unref(want);
        g_object_unref(l);
        g_free(jpg);
        g_object_unref(pb);
    }
}

int main(void) {
    webp_lossless_size(); /* first: it measures the peak memory */
    embed_cache();
    hand_pngs();
    png_chunks();
    apng();
    alpha_png();
    exif_jpeg();
    jpeg_kinds();
    jpeg_fixtures();
    jpeg_without_eoi();
    jpeg_reduced();
    webp();
    gif();
    bad_input();
    data_uri_and_fit();
    hostile_headers();
    jpeg_scan_work();
    jpeg_decode_memory();
    jpeg_scan_work_444();
    fuzz_finds();
    return tn_test_finish("image");
}
