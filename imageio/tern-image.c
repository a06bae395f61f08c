/* Image decoding for vision prompts (tern-image.h says what and why). */
#include "tern-image.h"

/* Messages reach users of the app and the CLI: translated in Tern's
 * domain, whatever the program's default domain. */
#ifndef GETTEXT_PACKAGE
#define GETTEXT_PACKAGE "tern"
#endif
#include <glib/gi18n-lib.h>
#include <gio/gio.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
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

/* ------------------------------------------------------ sniffing first */

/* The file's first bytes name its format, and only that format's loader
 * ever sees the data: gdk-pixbuf's own sniffing would hand an SVG, a TIFF
 * or an XPM to its renderer before we could refuse it (a 330-byte SVG cost
 * seconds and half a gigabyte in librsvg). */
const char *tern_image_sniff(const void *data, gsize len) {
    const guint8 *b = data;
    const gsize n = data ? len : 0;
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8))
        return "png";
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
        return "jpeg";
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6)))
        return "gif";
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4))
        return "webp";
    return NULL;
}

/* A TIFF container that a camera wrote: a RAW photo (DNG, NEF, CR2, ARW,
 * ORF, RW2, PEF...), whose owner would not think of it as a TIFF. Told by
 * what the bytes hold: the signatures of CR2 ("CR" at 8), ORF ("IIRO",
 * "IIRS", "MMOR") and RW2 ("IIU"), the DNGVersion tag (C612) in IFD0, or
 * IFD0's Make tag naming a maker whose TIFF files are its RAW format
 * (Nikon, Sony, Pentax, Samsung, as their cameras spell it; not Canon,
 * Epson or Kodak, whose scanners write TIFFs too). Returns that format's
 * usual name, or NULL for any other TIFF. */
static const char *camera_raw(const guint8 *b, gsize n) {
    if (n >= 4 && (!memcmp(b, "IIRO", 4) || !memcmp(b, "IIRS", 4) || !memcmp(b, "MMOR", 4)))
        return "ORF";
    if (n >= 4 && !memcmp(b, "IIU\0", 4))
        return "RW2";
    if (n < 8 || (memcmp(b, "II*\0", 4) && memcmp(b, "MM\0*", 4)))
        return NULL;
    if (n >= 10 && b[8] == 'C' && b[9] == 'R')
        return "CR2";
    const gboolean le = b[0] == 'I';
#define TIFF16(p) (le ? (guint32)(p)[0] | (guint32)(p)[1] << 8 : (guint32)(p)[0] << 8 | (p)[1])
#define TIFF32(p) (le ? TIFF16(p) | TIFF16((p) + 2) << 16 : TIFF16(p) << 16 | TIFF16((p) + 2))
    const guint32 ifd = TIFF32(b + 4);
    if (ifd < 8 || (guint64)ifd + 2 > n)
        return NULL;
    static const struct {
        const char *make, *format;
    } makers[] = {{"NIKON", "NEF"}, {"SONY", "ARW"}, {"PENTAX", "PEF"}, {"SAMSUNG", "SRW"}};
    const char *by_make = NULL;
    const guint32 count = TIFF16(b + ifd);
    for (guint32 k = 0; k < count && (guint64)ifd + 2 + 12 * (k + 1) <= n; k++) {
        const guint8 *e = b + ifd + 2 + 12 * k;
        const guint32 tag = TIFF16(e), len = TIFF32(e + 4);
        if (tag == 0xC612)
            return "DNG";
        if (tag != 0x010F || TIFF16(e + 2) != 2) /* Make, in ASCII */
            continue;
        const guint32 at = len <= 4 ? (guint32)(ifd + 2 + 12 * k + 8) : TIFF32(e + 8);
        for (gsize m = 0; m < G_N_ELEMENTS(makers) && (guint64)at + len <= n; m++) {
            const gsize ml = strlen(makers[m].make);
            if (len >= ml && !memcmp(b + at, makers[m].make, ml))
                by_make = makers[m].format;
        }
    }
#undef TIFF32
#undef TIFF16
    return by_make;
}

/* A format Tern does not read, named by its first bytes for the refusal:
 * "not a format Tern reads" alone leaves the owner of an iPhone's HEIC or a
 * scanner's TIFF wondering whether the file is broken. Only named, never
 * decoded. *raw: the format is a camera's RAW one (camera_raw, or CR3). */
static const char *refused_format(const guint8 *b, gsize n, gboolean *raw) {
    *raw = FALSE;
    static const char *const heif_brands[] = {"heic", "heix", "hevc", "hevx",
                                              "heim", "heis", "mif1", "msf1"};
    if (n >= 12 && !memcmp(b + 4, "ftyp", 4)) {
        /* The major brand, then the compatible ones up to the box's end. */
        const guint32 box = (guint32)b[0] << 24 | (guint32)b[1] << 16 | (guint32)b[2] << 8 | b[3];
        const gsize end = MIN(n, (gsize)MAX(box, 12u));
        gboolean heif = FALSE;
        if (!memcmp(b + 8, "crx ", 4)) {
            *raw = TRUE;
            return "CR3";
        }
        for (gsize at = 8; at + 4 <= end; at += at == 8 ? 8 : 4) {
            if (!memcmp(b + at, "avif", 4) || !memcmp(b + at, "avis", 4))
                return "AVIF";
            for (gsize k = 0; k < G_N_ELEMENTS(heif_brands); k++)
                heif = heif || !memcmp(b + at, heif_brands[k], 4);
        }
        return heif ? "HEIC" : NULL;
    }
    const char *camera = camera_raw(b, n);
    if (camera) {
        *raw = TRUE;
        return camera;
    }
    if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4)))
        return "TIFF";
    if (n >= 18 && b[0] == 'B' && b[1] == 'M') {
        /* The DIB header's size, to tell a bitmap from text starting "BM". */
        const guint32 dib = (guint32)b[14] | (guint32)b[15] << 8 | (guint32)b[16] << 16 |
                            (guint32)b[17] << 24;
        if (dib == 12 || dib == 40 || dib == 52 || dib == 56 || dib == 64 || dib == 108 ||
            dib == 124)
            return "BMP";
    }
    if ((n >= 2 && b[0] == 0xFF && b[1] == 0x0A) ||
        (n >= 12 && !memcmp(b, "\0\0\0\x0cJXL \r\n\x87\n", 12)))
        return "JPEG XL";
    if (n >= 6 && !memcmp(b, "\0\0\1\0", 4) && (b[4] || b[5]))
        return "ICO";
    if (n >= 4 && !memcmp(b, "8BPS", 4))
        return "PSD";
    if (n >= 5 && !memcmp(b, "%PDF-", 5))
        return "PDF";
    /* SVG: text, after a byte-order mark and blanks, that starts with an
     * svg element, or with an XML declaration or doctype that one follows. */
    gsize at = n >= 3 && !memcmp(b, "\xef\xbb\xbf", 3) ? 3 : 0;
    while (at < n && g_ascii_isspace(b[at]))
        at++;
    if (n - at >= 4 && !memcmp(b + at, "<svg", 4))
        return "SVG";
    if (n - at >= 2 && b[at] == '<' && (b[at + 1] == '?' || b[at + 1] == '!'))
        for (gsize k = at; k + 4 <= n; k++)
            if (!memcmp(b + k, "<svg", 4))
                return "SVG";
    return NULL;
}

/* A JPEG decoder given a file cut short fills the missing rows with grey
 * and reports success, so completeness is checked on the byte stream: the
 * marker segments are walked (their lengths skip APP data, whose EXIF
 * thumbnail holds markers of its own) up to the first scan, and the
 * entropy-coded data then ends at the EOI marker (FF D9; a data byte FF is
 * always followed by 00, so FF D9 cannot occur inside a scan), or, for a
 * file that ends inside its last scan, where jpeg_last_scan_whole says. */
typedef enum {
    JPEG_MARKER_FF, /* expecting FF */
    JPEG_MARKER_ID, /* expecting the marker byte */
    JPEG_LEN_HI,
    JPEG_LEN_LO,
    JPEG_SKIP,      /* inside a segment's payload */
    JPEG_SCAN,      /* entropy-coded data */
    JPEG_SCAN_FF,   /* entropy-coded data, after an FF */
    JPEG_END,       /* EOI seen: whatever follows is a trailer */
    JPEG_BAD,
} jpeg_state;

typedef struct {
    jpeg_state state;
    guint8 marker;
    guint32 skip, seg_len;
    gboolean in_scan_header; /* the segment being skipped is an SOS header */
    guint scans;
    guint8 sof[5];         /* a frame header's precision, height and width */
    guint32 width, height; /* from the frame header (SOFn), 0 before it */
    guint8 sof_marker;     /* the first frame header's marker, 0 before it */
    guint8 precision;      /* and its sample precision in bits */
    gboolean dnl;          /* a DNL marker (the height, after the first scan) */
    gboolean costly;       /* scans x jpeg_pass_cost past TERN_IMAGE_MAX_JPEG_SCAN_PIXELS */
    /* What jpeg_last_scan_whole needs, gathered on the way so that it
     * starts at the last scan's data instead of walking the file again.
     * Offsets are into the whole file. */
    guint64 at;            /* bytes walked */
    guint64 seg_at;        /* the current segment's payload */
    guint8 nf, fid[4], fh[4], fv[4]; /* the frame's components (0: not valid) */
    guint64 table_at[8];   /* DC 0-3, AC 0-3: where the table in force is defined; 0 none */
    guint restart;         /* the DRI interval in force */
    guint64 scan_data_at;  /* the last scan's entropy-coded data */
    guint8 scan_ns, scan_ci[4], scan_td[4], scan_ta[4]; /* its components and tables */
    gboolean untold;       /* a segment the check cannot take: it answers no */
} jpeg_walk;

/* SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC): a frame header. */
static gboolean jpeg_is_sof(guint8 m) {
    return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

static void jpeg_segment_done(jpeg_walk *j, const guint8 *file);

/* What one scan's output pass costs, in pixels, against
 * TERN_IMAGE_MAX_JPEG_SCAN_PIXELS: a frame whose colour components are all
 * at full resolution (4:4:4, CMYK) counts half as much again as a grey or
 * subsampled one (14 progressive scans of 6000 x 6000 4:4:4 took 2.0 s of
 * CPU, 12 grey ones of 8192 x 8192 1.9 s). Before the frame header, 0. */
static guint64 jpeg_pass_cost(const jpeg_walk *j) {
    const guint64 px = (guint64)j->width * j->height;
    gboolean full = j->nf > 1;
    for (guint c = 1; c < j->nf; c++)
        full = full && j->fh[c] == j->fh[0] && j->fv[c] == j->fv[0];
    return full ? px + px / 2 : px;
}

/* Walks file[from, to): the bytes that have arrived since the last call
 * (those before stay in file: a segment's payload is read whole once it
 * has all arrived). */
static void jpeg_feed(jpeg_walk *j, const guint8 *file, gsize from, gsize to) {
    for (gsize i = from; i < to && j->state != JPEG_END && j->state != JPEG_BAD; i++) {
        const guint8 c = file[i];
        switch (j->state) {
        case JPEG_MARKER_FF:
            j->state = c == 0xFF ? JPEG_MARKER_ID : JPEG_BAD;
            break;
        case JPEG_MARKER_ID:
            if (c == 0xFF) /* fill byte */
                break;
            j->marker = c;
            if (c == 0xD9)
                j->state = JPEG_END;
            else if (c == 0xD8 || c == 0x01 || (c >= 0xD0 && c <= 0xD7))
                j->state = JPEG_MARKER_FF; /* no payload */
            else if (c == 0x00)
                j->state = JPEG_BAD;
            else
                j->state = JPEG_LEN_HI;
            break;
        case JPEG_LEN_HI:
            j->skip = (guint32)c << 8;
            j->state = JPEG_LEN_LO;
            break;
        case JPEG_LEN_LO:
            j->skip |= c;
            if (j->skip < 2) {
                j->state = JPEG_BAD;
                break;
            }
            j->skip -= 2;
            j->seg_len = j->skip;
            j->in_scan_header = j->marker == 0xDA;
            if (j->in_scan_header && ++j->scans > TERN_IMAGE_MAX_JPEG_SCANS) {
                j->state = JPEG_BAD;
                break;
            }
            /* Counted at each scan, so a file is refused from the header of
             * the first scan too many, before the rest is read. */
            if (j->in_scan_header &&
                (guint64)j->scans * jpeg_pass_cost(j) > TERN_IMAGE_MAX_JPEG_SCAN_PIXELS) {
                j->costly = TRUE;
                j->state = JPEG_BAD;
                break;
            }
            j->seg_at = i + 1;
            if (!j->skip)
                jpeg_segment_done(j, file);
            j->state = j->skip ? JPEG_SKIP : (j->in_scan_header ? JPEG_SCAN : JPEG_MARKER_FF);
            break;
        case JPEG_SKIP:
            if (jpeg_is_sof(j->marker) && j->seg_len - j->skip < sizeof j->sof) {
                const guint32 at = j->seg_len - j->skip;
                j->sof[at] = c;
                if (at == sizeof j->sof - 1) {
                    j->height = (guint32)j->sof[1] << 8 | j->sof[2];
                    j->width = (guint32)j->sof[3] << 8 | j->sof[4];
                    if (!j->sof_marker) {
                        j->sof_marker = j->marker;
                        j->precision = j->sof[0];
                    }
                }
            }
            if (--j->skip == 0) {
                jpeg_segment_done(j, file);
                j->state = j->in_scan_header ? JPEG_SCAN : JPEG_MARKER_FF;
            }
            break;
        case JPEG_SCAN:
            if (c == 0xFF)
                j->state = JPEG_SCAN_FF;
            break;
        case JPEG_SCAN_FF:
            if (c == 0x00 || (c >= 0xD0 && c <= 0xD7))
                j->state = JPEG_SCAN; /* stuffed byte or restart marker */
            else if (c == 0xFF)
                ; /* fill */
            else if (c == 0xD9)
                j->state = JPEG_END;
            else { /* the next segment of a progressive file (DHT, SOS...) */
                j->marker = c;
                j->dnl = j->dnl || c == 0xDC;
                j->state = JPEG_LEN_HI;
            }
            break;
        case JPEG_END:
        case JPEG_BAD:
            break;
        }
    }
}

/* What gdk-pixbuf's JPEG loader decodes (libjpeg's 8-bit interface): 8-bit
 * samples in a baseline, extended, progressive or arithmetic-coded
 * (sequential or progressive) frame, whose height the frame header gives.
 * libjpeg refuses the others with "Unsupported JPEG data precision 12",
 * "Unsupported JPEG process: SOF type 0xc3" or "Empty JPEG image (DNL not
 * supported)", which read as damage; the file is whole, its kind is not
 * read here, and the user can save it as one that is. (A height of 0 with
 * no DNL marker is damage: left to the loader's "damaged".) */
static gboolean jpeg_frame_supported(const jpeg_walk *j) {
    const guint8 m = j->sof_marker;
    return !m || (j->precision == 8 && (j->height || !j->dnl) &&
                  (m == 0xC0 || m == 0xC1 || m == 0xC2 || m == 0xC9 || m == 0xCA));
}

/* A JPEG that ends inside its last scan may lack only its EOI marker
 * (some cameras and encoders write such files; viewers show them whole),
 * or be cut inside the scan, which the decoder would grey-fill. The bytes
 * tell which for a sequential Huffman-coded frame (SOF0, SOF1: what
 * cameras write): its last scan's entropy-coded data is decoded far
 * enough to count its MCUs (Huffman codes, the bits they announce, and
 * the restart markers a DRI asks for; no coefficient is computed), and
 * the scan is whole when the bytes present hold every MCU the frame
 * declares. A progressive or arithmetic-coded JPEG would need its
 * coefficients decoded to tell, so one without EOI stays refused. */
enum { JPEG_LOOK = 9 }; /* codes up to this long are found in one lookup */

typedef struct {
    int maxcode[17], mincode[17], valptr[17]; /* by code length; maxcode -1: none */
    guint8 symbols[256];
    guint16 look[1 << JPEG_LOOK]; /* by the next JPEG_LOOK bits: length << 8 | symbol */
} jpeg_huff;

typedef struct {
    const guint8 *b;
    gsize n, pos;
    guint64 acc; /* its low `bits` bits are the next ones */
    int bits;
} jpeg_bits;

/* Tops up the bit buffer, up to a marker or the end of the data. */
static void jpeg_fill(jpeg_bits *r) {
    while (r->bits <= 56 && r->pos < r->n) {
        const guint8 c = r->b[r->pos];
        if (c == 0xFF && (r->pos + 1 >= r->n || r->b[r->pos + 1] != 0x00))
            return;
        r->pos += c == 0xFF ? 2 : 1;
        r->acc = r->acc << 8 | c;
        r->bits += 8;
    }
}

static gboolean jpeg_skip_bits(jpeg_bits *r, int n) {
    if (r->bits < n)
        jpeg_fill(r);
    if (r->bits < n)
        return FALSE;
    r->bits -= n;
    return TRUE;
}

/* A symbol of table h (ITU T.81 F.2.2.3); -1 when the data ends first or
 * holds no valid code. */
static int jpeg_symbol(jpeg_bits *r, const jpeg_huff *h) {
    if (r->bits < 16)
        jpeg_fill(r);
    if (r->bits >= JPEG_LOOK) {
        const guint16 e = h->look[(r->acc >> (r->bits - JPEG_LOOK)) & ((1 << JPEG_LOOK) - 1)];
        if (e) {
            r->bits -= e >> 8;
            return e & 0xFF;
        }
    }
    for (int l = 1; l <= 16 && l <= r->bits; l++) {
        const int code = (int)(r->acc >> (r->bits - l)) & ((1 << l) - 1);
        if (h->maxcode[l] >= 0 && code <= h->maxcode[l]) {
            r->bits -= l;
            return h->symbols[h->valptr[l] + code - h->mincode[l]];
        }
    }
    return -1;
}

/* The length of the Huffman table defined at s (within a DHT segment's
 * len bytes left), or 0 when it is not valid. */
static gsize jpeg_table_len(const guint8 *s, gsize len) {
    if (len < 17 || (s[0] >> 4) > 1 || (s[0] & 15) > 3)
        return 0;
    int code = 0, k = 0;
    for (int l = 1; l <= 16; l++) {
        code += s[l];
        k += s[l];
        if (code > 1 << l || k > 256)
            return 0;
        code <<= 1;
    }
    return len < 17 + (gsize)k ? 0 : 17 + (gsize)k;
}

/* The decoding tables of the valid table defined at s (jpeg_table_len). */
static void jpeg_build_table(const guint8 *s, jpeg_huff *h) {
    int code = 0, k = 0;
    for (int l = 1; l <= 16; l++) {
        const int count = s[l];
        h->valptr[l] = k;
        h->mincode[l] = code;
        code += count;
        k += count;
        h->maxcode[l] = count ? code - 1 : -1;
        code <<= 1;
    }
    memcpy(h->symbols, s + 17, (gsize)k);
    memset(h->look, 0, sizeof h->look);
    for (int l = 1; l <= JPEG_LOOK; l++)
        for (int c = h->mincode[l]; c <= h->maxcode[l]; c++)
            for (int x = 0; x < 1 << (JPEG_LOOK - l); x++)
                h->look[c << (JPEG_LOOK - l) | x] =
                    (guint16)(l << 8 | h->symbols[h->valptr[l] + c - h->mincode[l]]);
}

/* The MCUs of the scan that r reads, from its first byte: all there? */
static gboolean jpeg_mcus_whole(jpeg_bits *r, guint32 width, guint32 height, const guint8 fh[4],
                                const guint8 fv[4], guint nf, const guint8 ci[4], guint ns,
                                const jpeg_huff *dc[4], const jpeg_huff *ac[4], guint restart) {
    guint hmax = 1, vmax = 1;
    for (guint c = 0; c < nf; c++) {
        hmax = MAX(hmax, fh[c]);
        vmax = MAX(vmax, fv[c]);
    }
    guint64 mcus;
    guint blocks[4];
    if (ns == 1) { /* one component: an MCU is one block */
        const guint c = ci[0];
        mcus = (((guint64)width * fh[c] + 8 * hmax - 1) / (8 * hmax)) *
               (((guint64)height * fv[c] + 8 * vmax - 1) / (8 * vmax));
        blocks[0] = 1;
    } else {
        mcus = (((guint64)width + 8 * hmax - 1) / (8 * hmax)) *
               (((guint64)height + 8 * vmax - 1) / (8 * vmax));
        for (guint k = 0; k < ns; k++)
            blocks[k] = (guint)fh[ci[k]] * fv[ci[k]];
    }
    for (guint64 m = 0; m < mcus; m++) {
        if (restart && m && m % restart == 0) {
            /* Byte-aligned, then RSTn (fill bytes FF before it allowed). */
            r->bits = 0;
            while (r->pos + 1 < r->n && r->b[r->pos] == 0xFF && r->b[r->pos + 1] == 0xFF)
                r->pos++;
            if (r->pos + 1 >= r->n || r->b[r->pos] != 0xFF || r->b[r->pos + 1] < 0xD0 ||
                r->b[r->pos + 1] > 0xD7)
                return FALSE;
            r->pos += 2;
        }
        for (guint k = 0; k < ns; k++)
            for (guint blk = 0; blk < blocks[k]; blk++) {
                const int s = jpeg_symbol(r, dc[k]);
                if (s < 0 || s > 11 || !jpeg_skip_bits(r, s))
                    return FALSE;
                /* As libjpeg reads them (jdhuff.c): a run past the 63rd
                 * coefficient ends the block. */
                for (int i = 1; i < 64; i++) {
                    const int rs = jpeg_symbol(r, ac[k]);
                    if (rs < 0)
                        return FALSE;
                    if (rs & 15) {
                        i += rs >> 4;
                        if (!jpeg_skip_bits(r, rs & 15))
                            return FALSE;
                    } else if (rs >> 4 == 15) {
                        i += 15;
                    } else {
                        break;
                    }
                }
            }
    }
    return TRUE;
}

/* A segment's payload has all arrived (at file + j->seg_at, j->seg_len
 * bytes): what the last-scan check needs of it is kept. */
static void jpeg_segment_done(jpeg_walk *j, const guint8 *file) {
    const guint8 m = j->marker, *s = file + j->seg_at;
    const gsize sl = j->seg_len;
    if (jpeg_is_sof(m)) {
        /* Kept for any frame: jpeg_decode_bytes needs its components. */
        j->nf = 0;
        if (sl < 6 || s[5] < 1 || s[5] > 4 || sl < 6 + 3u * s[5]) {
            j->untold = TRUE;
            return;
        }
        for (guint c = 0; c < s[5]; c++) {
            j->fid[c] = s[6 + 3 * c];
            j->fh[c] = s[7 + 3 * c] >> 4;
            j->fv[c] = s[7 + 3 * c] & 15;
            if (j->fh[c] < 1 || j->fh[c] > 4 || j->fv[c] < 1 || j->fv[c] > 4) {
                j->untold = TRUE;
                return;
            }
        }
        j->nf = s[5];
        /* Progressive, arithmetic-coded or other: not told. */
        if ((m != 0xC0 && m != 0xC1) || s[0] != 8)
            j->untold = TRUE;
    } else if (j->untold) {
        return;
    } else if (m == 0xC4) {
        for (gsize at = 0; at < sl;) {
            const gsize t = jpeg_table_len(s + at, sl - at);
            if (!t) {
                j->untold = TRUE;
                return;
            }
            j->table_at[(s[at] >> 4) * 4 + (s[at] & 15)] = j->seg_at + at;
            at += t;
        }
    } else if (m == 0xDD) {
        if (sl < 2)
            j->untold = TRUE;
        else
            j->restart = (guint)s[0] << 8 | s[1];
    } else if (m == 0xDA) {
        if (!j->nf || !j->width || !j->height || sl < 1 || s[0] < 1 || s[0] > 4 ||
            sl < 1 + 2u * s[0] + 3) {
            j->untold = TRUE;
            return;
        }
        j->scan_ns = s[0];
        for (guint k = 0; k < j->scan_ns; k++) {
            guint c = 0;
            while (c < j->nf && j->fid[c] != s[1 + 2 * k])
                c++;
            const guint8 td = s[2 + 2 * k] >> 4, ta = s[2 + 2 * k] & 15;
            if (c == j->nf || td > 3 || ta > 3 || !j->table_at[td] || !j->table_at[4 + ta]) {
                j->untold = TRUE;
                return;
            }
            j->scan_ci[k] = (guint8)c;
            j->scan_td[k] = td;
            j->scan_ta[k] = ta;
        }
        j->scan_data_at = j->seg_at + sl;
    }
}

/* b: a whole JPEG file but its end, which falls inside its last scan (the
 * walk j ended in JPEG_SCAN or JPEG_SCAN_FF): whether that scan is whole. */
static gboolean jpeg_last_scan_whole(const guint8 *b, gsize n, const jpeg_walk *j) {
    if (j->untold || !j->scan_data_at || j->scan_data_at > n)
        return FALSE;
    jpeg_huff tables[8];
    gboolean built[8] = {FALSE};
    const jpeg_huff *sdc[4], *sac[4];
    for (guint k = 0; k < j->scan_ns; k++) {
        const guint dc = j->scan_td[k], ac = 4 + j->scan_ta[k];
        if (!built[dc])
            jpeg_build_table(b + j->table_at[dc], &tables[dc]);
        if (!built[ac])
            jpeg_build_table(b + j->table_at[ac], &tables[ac]);
        built[dc] = built[ac] = TRUE;
        sdc[k] = &tables[dc];
        sac[k] = &tables[ac];
    }
    jpeg_bits r = {.b = b, .n = n, .pos = j->scan_data_at};
    return jpeg_mcus_whole(&r, j->width, j->height, j->fh, j->fv, j->nf, j->scan_ci, j->scan_ns,
                           sdc, sac, j->restart);
}

/* What decoding the walked JPEG takes (TERN_IMAGE_MAX_JPEG_DECODE_BYTES):
 * the picture, and every coefficient when there is more than one scan
 * (libjpeg's full-image buffer: blocks by component, each dimension
 * rounded up to the component's sampling factor). 0 when the frame's
 * components are not known (libjpeg refuses such a frame). */
static guint64 jpeg_decode_bytes(const jpeg_walk *j) {
    if (!j->nf)
        return 0;
    guint hmax = 1, vmax = 1;
    for (guint c = 0; c < j->nf; c++) {
        hmax = MAX(hmax, j->fh[c]);
        vmax = MAX(vmax, j->fv[c]);
    }
    guint64 bytes = (guint64)j->width * j->height * (j->nf == 4 ? 4 : 3);
    for (guint c = 0; j->scans > 1 && c < j->nf; c++) {
        guint64 bw = ((guint64)j->width * j->fh[c] + 8 * hmax - 1) / (8 * hmax);
        guint64 bh = ((guint64)j->height * j->fv[c] + 8 * vmax - 1) / (8 * vmax);
        bw = (bw + j->fh[c] - 1) / j->fh[c] * j->fh[c];
        bh = (bh + j->fv[c] - 1) / j->fv[c] * j->fv[c];
        bytes += bw * bh * 64 * 2;
    }
    return bytes;
}

/* Only a GIF's first frame is used, and gdk-pixbuf's GIF loader parses every
 * frame of a file, in time quadratic in their number (a 2 MB GIF of 100000
 * tiny frames took 16 s; a 20 MB request body holds ten times as many). So
 * the block structure is walked as it arrives, and the loader is given the
 * bytes up to the end of the first image's data, then the trailer: the
 * cost is that of one frame, whatever follows it. The walk also says
 * whether the first frame arrived whole. */
typedef enum {
    GIF_HEADER,     /* signature and logical screen descriptor (13 bytes) */
    GIF_BLOCK,      /* expecting an introducer: extension, image or trailer */
    GIF_EXT_LABEL,
    GIF_SUB_LEN,    /* a data sub-block's length byte (0 ends the block) */
    GIF_SKIP,       /* inside a colour table or a sub-block */
    GIF_IMAGE_DESC, /* the 9 bytes after an image separator */
    GIF_LZW_MIN,
    GIF_FIRST_DONE, /* the first image's data is complete */
    GIF_TRAILER,    /* the trailer came before any image */
    GIF_BAD,
} gif_state;

/* Why a walk stopped at GIF_BAD: the user is told which, since a GIF of a
 * sound block structure whose frame lies off its screen is not "broken
 * blocks" (the attack report's complaint). */
typedef enum {
    GIF_BAD_BLOCKS, /* a byte where an introducer must be */
    GIF_BAD_SCREEN, /* a logical screen 0 pixels wide or high */
    GIF_BAD_FRAME,  /* a first image of no pixels, or reaching past the screen */
} gif_bad;

typedef struct {
    gif_state state, after_skip;
    guint32 count;  /* bytes seen of the header or descriptor, or left to skip */
    guint8 flags;   /* the packed byte of the screen or image descriptor */
    gboolean image; /* the sub-blocks being read are the first image's data */
    guint8 desc[9];  /* the screen's 4 size bytes, then an image descriptor's 9 */
    guint32 screen_w, screen_h;
    gif_bad bad;
} gif_walk;

static guint32 gif_u16(const guint8 *b) {
    return (guint32)b[0] | (guint32)b[1] << 8;
}

/* A screen or a first image of no pixels, or an image that reaches past
 * the screen: gdk-pixbuf's loader went on with them into GLib criticals
 * (a row stride for no rows, a copy from outside the frame). */
static gboolean gif_screen_bad(const gif_walk *g) {
    return gif_u16(g->desc) == 0 || gif_u16(g->desc + 2) == 0;
}

static gboolean gif_image_bad(const gif_walk *g) {
    const guint32 x = gif_u16(g->desc), y = gif_u16(g->desc + 2);
    const guint32 w = gif_u16(g->desc + 4), h = gif_u16(g->desc + 6);
    return w == 0 || h == 0 || x + w > g->screen_w || y + h > g->screen_h;
}

static void gif_skip_then(gif_walk *g, guint8 flags, gif_state next) {
    /* A colour table follows the descriptor when its flags say so. */
    const guint32 table = flags & 0x80 ? 3u << ((flags & 7) + 1) : 0;
    g->count = table;
    g->after_skip = next;
    g->state = table ? GIF_SKIP : next;
}

/* Walks n bytes; returns how many of them the stream has up to the end of
 * the first image's data (n until that end is among them). */
static gsize gif_feed(gif_walk *g, const guint8 *b, gsize n) {
    for (gsize i = 0; i < n; i++) {
        const guint8 c = b[i];
        switch (g->state) {
        case GIF_HEADER:
            if (++g->count >= 7 && g->count <= 10)
                g->desc[g->count - 7] = c;
            if (g->count == 10) {
                if (gif_screen_bad(g)) {
                    g->bad = GIF_BAD_SCREEN;
                    g->state = GIF_BAD;
                    return i;
                }
                g->screen_w = gif_u16(g->desc);
                g->screen_h = gif_u16(g->desc + 2);
            }
            if (g->count == 11)
                g->flags = c;
            else if (g->count == 13)
                gif_skip_then(g, g->flags, GIF_BLOCK);
            break;
        case GIF_BLOCK:
            if (c == 0x21) {
                g->state = GIF_EXT_LABEL;
            } else if (c == 0x2C) {
                g->count = 0;
                g->state = GIF_IMAGE_DESC;
            } else if (c == 0x3B) {
                g->state = GIF_TRAILER;
                return n;
            } else {
                g->state = GIF_BAD;
                return i;
            }
            break;
        case GIF_EXT_LABEL:
            g->image = FALSE;
            g->state = GIF_SUB_LEN;
            break;
        case GIF_SUB_LEN:
            if (c) {
                g->count = c;
                g->after_skip = GIF_SUB_LEN;
                g->state = GIF_SKIP;
            } else if (g->image) {
                g->state = GIF_FIRST_DONE;
                return i + 1;
            } else {
                g->state = GIF_BLOCK;
            }
            break;
        case GIF_SKIP:
            if (--g->count == 0)
                g->state = g->after_skip;
            break;
        case GIF_IMAGE_DESC:
            g->desc[g->count++] = c;
            if (g->count == 8 && gif_image_bad(g)) {
                g->bad = GIF_BAD_FRAME;
                g->state = GIF_BAD;
                return i;
            }
            if (g->count == 9)
                gif_skip_then(g, c, GIF_LZW_MIN);
            break;
        case GIF_LZW_MIN:
            g->image = TRUE;
            g->state = GIF_SUB_LEN;
            break;
        case GIF_FIRST_DONE:
        case GIF_TRAILER:
        case GIF_BAD:
            return i;
        }
    }
    return n;
}

/* gdk-pixbuf's PNG loader closes without an error on a file cut short, and
 * an interlaced PNG reports the whole image as updated from the first rows
 * of its first pass on: rows that never arrived stay uninitialized memory.
 * libpng does refuse image data that ends short once it sees the next
 * chunk, so a PNG counts as complete when its chunks, walked by their
 * lengths, reach the end of IEND.
 *
 * The walk also decides which chunks the loader sees. libpng's progressive
 * reader gathers every chunk but IDAT whole before it looks at it, copying
 * what it holds again on each write: one 20 MB ancillary chunk (a comment,
 * an unknown "abCd") took 22 s, 100 MB more than 5 minutes. The pixels
 * depend only on IHDR, PLTE, tRNS and IDAT (gdk-pixbuf applies no gamma,
 * chromaticity or ICC profile: it keeps text, iCCP and pHYs as options of
 * the pixbuf, which Tern never reads), so the other ancillary chunks (a
 * lowercase first letter) are dropped whole, CRC included, and what the
 * loader gets is still a valid PNG. A tRNS of more than 256 bytes is not a
 * valid one, and libpng ignores it: it is dropped too. A critical chunk
 * other than IDAT holds 768 bytes at most (PLTE): a longer one is refused
 * here, before the loader buffers it. IDAT is streamed by libpng, and
 * passes whatever its length. */
enum { PNG_MAX_KEPT_CHUNK = 64 * 1024 }; /* of a chunk other than IDAT */

/* An interlaced (Adam7) PNG is checked further: gdk-pixbuf reports every
 * row decoded from the first pass on, so rows that a later pass was to
 * write are not counted missing when the compressed data breaks (libpng
 * takes a broken deflate stream or Adler-32 checksum for a warning and
 * stops) or ends early (a clean stream holding only the first passes). So
 * its IDAT data is inflated here as it streams past, into a scratch buffer
 * that is thrown away (memory stays bounded), with GIO's zlib decompressor,
 * which checks the stream to its end and its Adler-32: it must end cleanly
 * by IEND, having inflated exactly the bytes the IHDR implies (a filter
 * byte and the packed pixels of each row of each pass), or inflate more
 * than those: libpng warns of the excess and ignores it, so GdkPixbuf and
 * other viewers show the picture, as Tern does a non-interlaced PNG's
 * (whose excess the loader ignores alike); inflating stops at the first
 * byte past the rows, so a bomb is not inflated on. That inflates the
 * data twice: about 0.02 s more for a 4096 x 4096 RGBA PNG (0.29 -> 0.31 s
 * in all; docs/VISION.md). A non-interlaced PNG is not inflated twice: its
 * rows arrive in order, and the loader's count of them tells. */
enum { PNG_Z_RUNNING, PNG_Z_END, PNG_Z_ERROR, PNG_Z_EXCESS };
enum { PNG_ZOUT = 64 * 1024 }; /* the scratch buffer */

typedef struct {
    guint64 pos;    /* bytes walked */
    guint64 skip;   /* of the current chunk's data and CRC */
    guint8 head[8]; /* length and type of the next chunk */
    int n_head;
    gboolean iend;  /* the chunk being skipped is IEND */
    gboolean drop;  /* the chunk being skipped is not given to the loader */
    gboolean bad;   /* a chunk the loader is not given; head holds its header */
    /* The interlaced check (above). */
    guint64 max_pixels;        /* larger images are refused by their size */
    guint32 chunk_len;         /* of the chunk being skipped */
    gboolean is_ihdr, is_idat; /* the chunk being skipped (IHDR: the first chunk) */
    guint8 ihdr[13];
    gboolean check_z; /* an interlaced PNG: its image data is inflated */
    GConverter *z;
    guint8 *zout;
    guint64 inflated, expected; /* bytes out of the stream; what the IHDR implies */
    int zstate;                 /* PNG_Z_* */
} png_walk;

static gboolean png_complete(const png_walk *w) {
    return w->iend && w->skip == 0;
}

static guint32 png_u32(const guint8 *b) {
    return (guint32)b[0] << 24 | (guint32)b[1] << 16 | (guint32)b[2] << 8 | b[3];
}

static void png_walk_clear(png_walk *w) {
    g_clear_object(&w->z);
    g_clear_pointer(&w->zout, g_free);
}

/* What an Adam7 image's passes inflate to: for each pass that holds
 * pixels, a filter byte and the packed pixels of each of its rows. */
static guint64 png_adam7_bytes(guint32 width, guint32 height, guint bits) {
    static const guint8 x0[7] = {0, 4, 0, 2, 0, 1, 0}, dx[7] = {8, 8, 4, 4, 2, 2, 1};
    static const guint8 y0[7] = {0, 0, 4, 0, 2, 0, 1}, dy[7] = {8, 8, 8, 4, 4, 2, 2};
    guint64 total = 0;
    for (int k = 0; k < 7; k++) {
        const guint64 pw = width > x0[k] ? (width - x0[k] + dx[k] - 1) / dx[k] : 0;
        const guint64 ph = height > y0[k] ? (height - y0[k] + dy[k] - 1) / dy[k] : 0;
        if (pw && ph)
            total += ph * (1 + (pw * bits + 7) / 8);
    }
    return total;
}

/* The IHDR is whole: an interlaced PNG of a valid kind, not too large, has
 * its image data checked. Anything else is left to libpng and the loader. */
static void png_ihdr_seen(png_walk *w) {
    static const guint8 channels[7] = {1, 0, 3, 1, 2, 0, 4}; /* by color type */
    const guint32 width = png_u32(w->ihdr), height = png_u32(w->ihdr + 4);
    const guint depth = w->ihdr[8], ctype = w->ihdr[9];
    const guint ch = ctype < 7 ? channels[ctype] : 0;
    if (w->ihdr[12] != 1 || !ch || !depth || depth > 16 || (depth & (depth - 1)) || !width ||
        !height || (guint64)width * height > w->max_pixels ||
        (guint64)width * height > (guint64)1 << 56)
        return;
    w->check_z = TRUE;
    w->expected = png_adam7_bytes(width, height, ch * depth);
}

/* n bytes of an interlaced PNG's IDAT data, inflated and counted. */
static void png_inflate(png_walk *w, const guint8 *in, gsize n) {
    if (!w->z) {
        w->z = G_CONVERTER(g_zlib_decompressor_new(G_ZLIB_COMPRESSOR_FORMAT_ZLIB));
        w->zout = g_malloc(PNG_ZOUT);
    }
    /* Output may still be pending after the input is used up. */
    gboolean full = FALSE;
    while (w->zstate == PNG_Z_RUNNING && (n || full)) {
        gsize got = 0, made = 0;
        GError *err = NULL;
        /* One byte past the rows at most: that byte tells the excess. */
        const gsize room = (gsize)MIN((guint64)PNG_ZOUT, w->expected - w->inflated + 1);
        const GConverterResult r = g_converter_convert(w->z, in, n, w->zout, room,
                                                       G_CONVERTER_NO_FLAGS, &got, &made, &err);
        in += got;
        n -= got;
        w->inflated += made;
        if (r == G_CONVERTER_ERROR) {
            /* "Need more input" is no fault: the next IDAT brings it. */
            if (!g_error_matches(err, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT))
                w->zstate = PNG_Z_ERROR;
            g_error_free(err);
            break;
        }
        if (w->inflated > w->expected)
            w->zstate = PNG_Z_EXCESS; /* the rows are whole; libpng ignores the rest */
        else if (r == G_CONVERTER_FINISHED)
            w->zstate = PNG_Z_END; /* IDAT bytes after it are ignored (libpng warns) */
        full = made == room;
    }
}

/* For an interlaced PNG whose chunks all arrived: its image data inflated
 * whole, to the end of the stream or past its rows. */
static gboolean png_inflated_whole(const png_walk *w) {
    return !w->check_z || w->zstate == PNG_Z_EXCESS ||
           (w->zstate == PNG_Z_END && w->inflated == w->expected);
}

/* The chunk header in w->head is complete: keep, drop or refuse it. */
static void png_chunk_start(png_walk *w) {
    const guint32 len = png_u32(w->head);
    const guint8 *type = w->head + 4;
    gboolean letters = TRUE;
    for (int k = 0; k < 4; k++)
        letters = letters && g_ascii_isalpha(type[k]);
    /* A type that is not four letters is kept, for libpng to refuse. */
    const gboolean ancillary = letters && g_ascii_islower(type[0]);
    const gboolean idat = !memcmp(type, "IDAT", 4);
    if (len > 0x7fffffffu) { /* PNG's lengths have 31 bits */
        w->bad = TRUE;
        return;
    }
    w->drop = ancillary && (memcmp(type, "tRNS", 4) || len > 256);
    if (!w->drop && !idat && len > PNG_MAX_KEPT_CHUNK) {
        w->bad = TRUE;
        return;
    }
    w->skip = (guint64)len + 4;
    w->iend = !memcmp(type, "IEND", 4);
    w->chunk_len = len;
    w->is_ihdr = w->pos == 16 && !memcmp(type, "IHDR", 4);
    w->is_idat = idat;
}

/* run bytes of the current chunk's data and CRC, from where w->skip says:
 * the IHDR is kept, IDAT data inflated for the interlaced check. */
static void png_chunk_bytes(png_walk *w, const guint8 *b, gsize run) {
    if (w->skip <= 4) /* its CRC */
        return;
    const gsize data = (gsize)MIN((guint64)run, w->skip - 4);
    const guint64 off = w->chunk_len - (w->skip - 4);
    if (w->is_ihdr) {
        for (gsize k = 0; k < data && off + k < sizeof w->ihdr; k++)
            w->ihdr[off + k] = b[k];
        if (w->chunk_len == sizeof w->ihdr && off + data == sizeof w->ihdr)
            png_ihdr_seen(w);
    } else if (w->is_idat && w->check_z) {
        png_inflate(w, b, data);
    }
}

/* Walks n bytes, and writes those the loader is to get to out (room for
 * n + 8: a kept chunk's header goes out once all 8 bytes have arrived).
 * Returns how many it wrote. Stops at the end of IEND, or when w->bad. */
static gsize png_feed(png_walk *w, const guint8 *b, gsize n, guint8 *out) {
    gsize o = 0, i = 0;
    while (i < n && !png_complete(w) && !w->bad) {
        if (w->pos < 8 || w->skip) { /* the signature, or a chunk's data and CRC */
            const gsize run = (gsize)MIN((guint64)(n - i), w->pos < 8 ? 8 - w->pos : w->skip);
            if (w->pos < 8 || !w->drop) {
                memcpy(out + o, b + i, run);
                o += run;
            }
            if (w->pos >= 8) {
                png_chunk_bytes(w, b + i, run);
                w->skip -= run;
            }
            w->pos += run;
            i += run;
            continue;
        }
        w->head[w->n_head++] = b[i++];
        w->pos++;
        if (w->n_head < 8)
            continue;
        w->n_head = 0;
        png_chunk_start(w);
        if (!w->bad && !w->drop) {
            memcpy(out + o, w->head, 8);
            o += 8;
        }
    }
    return o;
}

/* What the walk refused, for the user. The chunk's type is quoted byte by
 * byte, a byte that is not printable ASCII as "\xNN" (as the engine's
 * messages show such bytes, docs/VISION.md): a '?' for each hid what the
 * file holds from the user and from a bug report. A backslash is escaped
 * too, so that "\x89" can only mean the byte 0x89. */
static void set_png_bad(GError **error, const char *name, const png_walk *w) {
    char type[4 * 4 + 1];
    gsize o = 0;
    for (int k = 0; k < 4; k++) {
        const guint8 c = w->head[4 + k];
        if (g_ascii_isgraph(c) && c != '\\')
            type[o++] = (char)c;
        else
            o += (gsize)g_snprintf(type + o, sizeof type - o, "\\x%02x", c);
    }
    type[o] = '\0';
    const guint32 len = png_u32(w->head);
    if (len > 0x7fffffffu)
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: damaged PNG (a chunk declares %u bytes, more than the format allows)"),
                    name, len);
    else
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: damaged PNG (its %s chunk declares %u bytes, far more than a valid "
                      "one holds)"),
                    name, type, len);
}

/* What the interlaced check found (the image data is not whole). */
static void set_png_z_bad(GError **error, const char *name, const png_walk *w) {
    const unsigned long long got = w->inflated, want = w->expected;
    if (w->zstate == PNG_Z_ERROR)
        /* No count: the decompressor reports none for its failing call. */
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: damaged PNG (its compressed image data is corrupt: it fails to "
                      "inflate, or fails its checksum)"),
                    name);
    else
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: damaged PNG (its compressed image data is corrupt: it ends after "
                      "%llu of the %llu bytes of its interlaced rows)"),
                    name, got, want);
}

/* An animated WebP (VP8X with the animation flag) is decoded by the loader
 * at close, every frame into a canvas of its own, and only then does it
 * report the size: a 124-byte file declaring a 16000 x 16000 canvas cost
 * 2.9 GB before it was refused, and 2000 frames on an 8000 x 8000 canvas
 * (160 KB) crashed the loader once its allocations failed. So the canvas
 * is checked from the VP8X chunk before anything is fed, and the loader is
 * given the chunks up to the end of the first frame (ANMF), with the RIFF
 * size made to match: one canvas, whatever follows. Returns the length of
 * that prefix, 0 while it has not all arrived, or G_MAXSIZE when the first
 * frame holds no picture. */
static gsize webp_first_frame_end(const guint8 *b, gsize len) {
    for (guint64 pos = 12; pos + 8 <= len;) {
        const guint32 size = (guint32)b[pos + 4] | (guint32)b[pos + 5] << 8 |
                             (guint32)b[pos + 6] << 16 | (guint32)b[pos + 7] << 24;
        const guint64 end = pos + 8 + size + (size & 1);
        if (end > len)
            return 0;
        if (!memcmp(b + pos, "ANMF", 4)) {
            /* Its 16-byte frame header, then the frame's picture: an ALPH,
             * VP8 or VP8L chunk. Without one the loader's animation had no
             * frame, and it asked an iterator it never made for a picture
             * (GLib criticals). */
            const guint8 *f = b + pos + 8 + 16;
            if (size < 16 + 8 ||
                (memcmp(f, "ALPH", 4) && memcmp(f, "VP8 ", 4) && memcmp(f, "VP8L", 4)))
                return G_MAXSIZE;
            return (gsize)end;
        }
        pos = end;
    }
    return 0;
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
    if (n) /* data may be NULL when len is 0 (an empty GBytes gives NULL) */
        memcpy(buf, src->data + src->pos, n);
    src->pos += n;
    return (gssize)n;
}

/* format: a loader's name for a format it has; kind: what the first bytes
 * of a file no loader is made for say it is (refused_format), or NULL; raw:
 * kind is a camera's RAW format. */
static void set_unsupported_kind(GError **error, const char *name, const char *format,
                                 const char *kind, gboolean raw) {
    if (format)
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    _("%s: %s images are not supported (PNG, JPEG, WebP and GIF are)"), name,
                    format);
    else if (kind && raw)
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    _("%s: not an image in a format Tern reads (PNG, JPEG, WebP or GIF); this "
                      "one is a camera RAW photo (%s)"),
                    name, kind);
    else if (kind)
        /* The sentence of an unknown file, kept whole: callers and clients
         * match on it. */
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    _("%s: not an image in a format Tern reads (PNG, JPEG, WebP or GIF); this "
                      "one is %s"),
                    name, kind);
    else
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    _("%s: not an image in a format Tern reads (PNG, JPEG, WebP or GIF)"), name);
}

static void set_unsupported(GError **error, const char *name, const char *format) {
    set_unsupported_kind(error, name, format, NULL, FALSE);
}

static void set_too_large(GError **error, const char *name, const probe *p) {
    g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                _("%s: the image declares %d x %d pixels (%.0f megapixels); the limit is %.0f "
                "megapixels (refused before decoding)"),
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
/* Reads until buf holds `want` bytes or the source ends: a pipe or a
 * socket may hand over the first bytes in pieces. */
static gssize source_fill(source *src, guint8 *buf, gsize want) {
    gsize got = 0;
    while (got < want) {
        gssize n = source_read(src, buf + got, want - got);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (gsize)n;
    }
    return (gssize)got;
}

/* One chunk into the loader; FALSE stops the feeding (error or e set). */
static gboolean feed_loader(GdkPixbufLoader *loader, const guint8 *data, gsize n, probe *p,
                            const char *name, char fmt_buf[16], GError **e, GError **error) {
    if (!gdk_pixbuf_loader_write(loader, data, n, e))
        return FALSE;
    if (p->too_large)
        return TRUE;
    const char *fmt = loader_format(loader, fmt_buf);
    if (fmt && !format_accepted(fmt)) {
        set_unsupported(error, name, fmt);
        return FALSE;
    }
    return TRUE;
}

/* The largest of 8, 4 and 2 by which libjpeg may divide a w x h JPEG
 * while decoding it (its DCT scaling), leaving each side at least twice
 * what fit makes of it (a side no longer than fit stays whole): 1 when
 * none does. The BILINEAR reduction to fit then starts from a picture up
 * to 64 times smaller, and still averages two or more of its pixels each
 * way: reduced to just over fit, a picture's sharp edges moved by up to
 * half a pixel (75 of 255 at worst on a checkerboard). Decoding every pixel
 * of an 8000 x 6000 photo, filling and freeing its 144 MB, took 0.55 s of
 * CPU for a picture the encoder sees at 896 x 896 (docs/VISION.md). */
static int jpeg_scale_denom(guint32 w, guint32 h, int fit) {
    if (fit <= 0)
        return 1;
    const guint32 tw = w > (guint32)fit ? 2 * (guint32)fit : w;
    const guint32 th = h > (guint32)fit ? 2 * (guint32)fit : h;
    for (int d = 8; d >= 2; d /= 2)
        if ((w + (guint32)d - 1) / (guint32)d >= tw && (h + (guint32)d - 1) / (guint32)d >= th)
            return d;
    return 1;
}

/* *src_w x *src_h: the picture's size as stored, which the returned pixbuf
 * has unless a JPEG was decoded reduced for fit_side. */
static GdkPixbuf *decode(source *src, const char *name, guint64 max_pixels, int fit_side,
                         char *format_out, int *src_w, int *src_h, GError **error) {
    enum { CHUNK = 64 * 1024 };
    guint8 *buf = g_malloc(CHUNK);
    /* A whole first chunk: some loaders (WebP) need the full header in
     * their first write. */
    gssize head = source_fill(src, buf, CHUNK);
    if (head < 0) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_IO, _("%s: read error: %s"), name,
                    g_strerror(errno));
        g_free(buf);
        return NULL;
    }
    if (head == 0) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT, _("%s: the file is empty"),
                    name);
        g_free(buf);
        return NULL;
    }
    const char *sniffed = tern_image_sniff(buf, (gsize)head);
    GError *e = NULL;
    GdkPixbufLoader *loader = sniffed ? gdk_pixbuf_loader_new_with_type(sniffed, &e) : NULL;
    if (!loader) {
        /* Not one of ours by its magic bytes, or no loader for it here
         * (WebP without webp-pixbuf-loader). */
        gboolean raw = FALSE;
        const char *kind = sniffed ? NULL : refused_format(buf, (gsize)head, &raw);
        set_unsupported_kind(error, name, sniffed && e ? sniffed : NULL, kind, raw);
        g_clear_error(&e);
        g_free(buf);
        return NULL;
    }
    const gboolean is_jpeg = !strcmp(sniffed, "jpeg"), is_webp = !strcmp(sniffed, "webp");
    const gboolean is_gif = !strcmp(sniffed, "gif"), is_png = !strcmp(sniffed, "png");
    jpeg_walk jpeg = {.state = JPEG_MARKER_FF};
    gif_walk gif = {.state = GIF_HEADER};
    png_walk png = {.max_pixels = max_pixels};
    /* What the PNG walk keeps of each read (up to 8 bytes of a chunk
     * header from the read before). */
    guint8 *png_out = is_png ? g_malloc(CHUNK + 8) : NULL;
    /* RIFF's size field counts the bytes after its first 8. */
    guint64 riff_total = is_webp ? 8u + ((guint64)buf[4] | (guint64)buf[5] << 8 |
                                               (guint64)buf[6] << 16 | (guint64)buf[7] << 24)
                                       : 0;
    guint64 total = 0;
    probe p = {.max_pixels = max_pixels};
    /* VP8X: flags at 20, canvas width - 1 and height - 1 (24 bits each). */
    GByteArray *webp_anim = NULL;
    if (is_webp && head >= 30 && !memcmp(buf + 12, "VP8X", 4)) {
        const guint32 cw = 1 + ((guint32)buf[24] | (guint32)buf[25] << 8 | (guint32)buf[26] << 16);
        const guint32 ch = 1 + ((guint32)buf[27] | (guint32)buf[28] << 8 | (guint32)buf[29] << 16);
        if ((guint64)cw * ch > max_pixels) {
            p.seen = p.too_large = TRUE;
            p.width = (int)cw;
            p.height = (int)ch;
        } else if (buf[20] & 0x02) {
            webp_anim = g_byte_array_new();
        }
    } else if (is_webp && head >= 25 && !memcmp(buf + 12, "VP8L", 4) && buf[20] == 0x2f) {
        /* A lossless picture alone: the loader allocated for its declared
         * size before reporting it (a 36-byte file declaring 16384 x 16384
         * cost 900 MB and 0.75 s), so the VP8L header's size (after its
         * signature, 14 bits each of width - 1 and height - 1) is checked
         * first. A lossy VP8 one is reported before any allocation. */
        const guint32 bits = (guint32)buf[21] | (guint32)buf[22] << 8 |
                             (guint32)buf[23] << 16 | (guint32)buf[24] << 24;
        const guint32 lw = 1 + (bits & 0x3fff), lh = 1 + ((bits >> 14) & 0x3fff);
        if ((guint64)lw * lh > max_pixels) {
            p.seen = p.too_large = TRUE;
            p.width = (int)lw;
            p.height = (int)lh;
        }
    }
    g_signal_connect(loader, "size-prepared", G_CALLBACK(on_size_prepared), &p);
    g_signal_connect(loader, "area-updated", G_CALLBACK(on_area_updated), &p);
    char fmt_buf[16];
    /* A JPEG is held back until its end marker has arrived: given a short
     * file, the decoder would first allocate and grey-fill every declared
     * pixel. Held bytes are bounded by the source (the server's body limit,
     * a file the user picked) and by TERN_IMAGE_MAX_JPEG_BYTES. */
    GByteArray *held = is_jpeg ? g_byte_array_new() : NULL;
    int rows_want = 0; /* the rows of a JPEG decoded reduced (jpeg_scale_denom) */
    /* refused: error is set by a check of the byte stream (JPEG, GIF, PNG, WebP). */
    gboolean ok = TRUE, any = FALSE, refused = FALSE;
    /* A RIFF size too small for the "WEBP" tag and one chunk header, or
     * larger than a RIFF chunk can be: libwebp refuses it with "Could not
     * get WebP header information", which tells the user nothing. */
    if (is_webp && (riff_total - 8 < 12 || riff_total - 8 > 0xfffffff6u)) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: damaged WebP (its RIFF header declares %llu bytes; a WebP file holds "
                      "12 to 4294967286)"),
                    name, (unsigned long long)(riff_total - 8));
        ok = FALSE;
        refused = TRUE;
    }
    for (gboolean first = TRUE; !refused && !p.too_large; first = FALSE) {
        gssize n = first ? head : source_read(src, buf, CHUNK);
        if (n < 0) {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_IO, _("%s: read error: %s"), name,
                        g_strerror(errno));
            ok = FALSE;
            break;
        }
        if (n == 0)
            break;
        any = TRUE;
        total += (guint64)n;
        if (held) {
            if (held->len + (guint64)n > TERN_IMAGE_MAX_JPEG_BYTES) {
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                            _("%s: the JPEG file is larger than %u MiB"), name,
                            TERN_IMAGE_MAX_JPEG_BYTES >> 20);
                ok = FALSE;
                refused = TRUE;
                break;
            }
            g_byte_array_append(held, buf, (guint)n);
            jpeg_feed(&jpeg, held->data, held->len - (gsize)n, held->len);
            /* Past the end marker is a trailer the decoder does not need,
             * and a broken structure will not mend: reading on would only
             * fill the buffer (a 653-byte JPEG with a 2 GB trailer, or a
             * header followed by zeros, was refused as larger than 256 MiB
             * after reading that much). */
            if (jpeg.state == JPEG_END || jpeg.state == JPEG_BAD)
                break;
            continue;
        }
        if (webp_anim) {
            /* Held until the first frame is whole (bounded as a JPEG is). */
            if (webp_anim->len + (guint64)n > TERN_IMAGE_MAX_JPEG_BYTES) {
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                            _("%s: the first frame of the WebP animation is larger than %u MiB"),
                            name, TERN_IMAGE_MAX_JPEG_BYTES >> 20);
                ok = FALSE;
                refused = TRUE;
                break;
            }
            g_byte_array_append(webp_anim, buf, (guint)n);
            const gsize cut = webp_first_frame_end(webp_anim->data, webp_anim->len);
            if (!cut)
                continue;
            if (cut == G_MAXSIZE) {
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                            _("%s: damaged WebP animation (its first frame holds no picture)"),
                            name);
                ok = FALSE;
                refused = TRUE;
                g_byte_array_unref(webp_anim);
                webp_anim = NULL;
                break;
            }
            const guint32 riff = (guint32)(cut - 8);
            for (int i = 0; i < 4; i++)
                webp_anim->data[4 + i] = (guint8)(riff >> (8 * i));
            total = riff_total = cut;
            if (!feed_loader(loader, webp_anim->data, cut, &p, name, fmt_buf, &e, error))
                ok = FALSE;
            g_byte_array_unref(webp_anim);
            webp_anim = NULL;
            break;
        }
        gsize use = (gsize)n;
        const guint8 *feed = buf;
        if (is_png) {
            use = png_feed(&png, buf, (gsize)n, png_out);
            feed = png_out;
        }
        if (is_gif) {
            use = gif_feed(&gif, buf, (gsize)n);
            if (gif.state == GIF_BAD) {
                if (gif.bad == GIF_BAD_SCREEN)
                    g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                                _("%s: damaged GIF (its screen is %u x %u pixels: no picture "
                                  "fits)"),
                                name, gif_u16(gif.desc), gif_u16(gif.desc + 2));
                else if (gif.bad == GIF_BAD_FRAME)
                    g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                                _("%s: damaged GIF (its first frame, %u x %u pixels at %u,%u, "
                                  "is empty or reaches past its %u x %u screen)"),
                                name, gif_u16(gif.desc + 4), gif_u16(gif.desc + 6),
                                gif_u16(gif.desc), gif_u16(gif.desc + 2), gif.screen_w,
                                gif.screen_h);
                else
                    g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                                _("%s: damaged GIF (its block structure is broken)"), name);
                ok = FALSE;
                refused = TRUE;
                break;
            }
        }
        /* use is 0 when a read held only bytes of dropped PNG chunks. */
        if (use && !feed_loader(loader, feed, use, &p, name, fmt_buf, &e, error)) {
            ok = FALSE;
            break;
        }
        /* After the bytes before it: a header they hold that declares too
         * many pixels is the refusal to report. */
        if (png.bad && !p.too_large) {
            set_png_bad(error, name, &png);
            ok = FALSE;
            refused = TRUE;
            break;
        }
        if (png.zstate == PNG_Z_ERROR && !p.too_large) {
            set_png_z_bad(error, name, &png);
            ok = FALSE;
            refused = TRUE;
            break;
        }
        /* Nothing after a PNG's IEND or a WebP's RIFF size is image data:
         * a trailer (1 GB, say) is not read. */
        if (p.too_large || gif.state == GIF_TRAILER || (is_png && png_complete(&png)) ||
            (is_webp && total >= riff_total))
            break;
        if (gif.state == GIF_FIRST_DONE) {
            /* The trailer right after the first frame: the rest is unread. */
            static const guint8 trailer = 0x3B;
            if (!feed_loader(loader, &trailer, 1, &p, name, fmt_buf, &e, error))
                ok = FALSE;
            break;
        }
    }
    if (webp_anim) {
        /* The source ended (or failed) before the first frame was whole. */
        if (ok) {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        _("%s: truncated WebP (the file ends before its first frame is "
                          "complete)"),
                        name);
            ok = FALSE;
            refused = TRUE;
        }
        g_byte_array_unref(webp_anim);
    }
    if (is_png && ok && !p.too_large && any && !png_complete(&png)) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: truncated PNG (the file ends before its IEND chunk)"), name);
        ok = FALSE;
        refused = TRUE;
    }
    if (is_png && ok && !p.too_large && any && png_complete(&png) && !png_inflated_whole(&png)) {
        set_png_z_bad(error, name, &png);
        ok = FALSE;
        refused = TRUE;
    }
    png_walk_clear(&png);
    if (is_gif && ok && !p.too_large && gif.state != GIF_FIRST_DONE &&
        gif.state != GIF_TRAILER && any) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: truncated GIF (the file ends before its first frame is complete)"),
                    name);
        ok = FALSE;
        refused = TRUE;
    }
    g_free(buf);
    g_free(png_out);
    if (held && ok) {
        if (!jpeg_frame_supported(&jpeg)) {
            if (jpeg.precision != 8)
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                            _("%s: a JPEG of %u-bit samples is not supported (8-bit JPEGs "
                              "are): save it as an 8-bit JPEG"),
                            name, jpeg.precision);
            else if (!jpeg.height)
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                            _("%s: a JPEG that gives its height only after its image data (a "
                              "DNL marker) is not supported: save it again with an image "
                              "editor"),
                            name);
            else
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                            _("%s: a lossless or hierarchical JPEG is not supported (baseline, "
                              "progressive and arithmetic-coded JPEGs are): save it as a "
                              "baseline JPEG"),
                            name);
            ok = FALSE;
            refused = TRUE;
        } else if (jpeg.scans > TERN_IMAGE_MAX_JPEG_SCANS) {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                        _("%s: a JPEG of more than %u scans (each one decodes the whole picture "
                          "again)"),
                        name, TERN_IMAGE_MAX_JPEG_SCANS);
            ok = FALSE;
            refused = TRUE;
        } else if (jpeg.costly && (guint64)jpeg.width * jpeg.height > max_pixels) {
            /* Its size alone is refused: the message for that. */
            p.seen = p.too_large = TRUE;
            p.width = (int)jpeg.width;
            p.height = (int)jpeg.height;
            ok = FALSE;
        } else if (jpeg.costly) {
            g_set_error(
                error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                _("%s: a progressive JPEG of %u or more scans at %u x %u pixels (each "
                  "scan decodes the whole picture again; at most %u scans at this size): "
                  "save it as a baseline JPEG or scale it down"),
                name, jpeg.scans, jpeg.width, jpeg.height,
                (guint)(TERN_IMAGE_MAX_JPEG_SCAN_PIXELS / jpeg_pass_cost(&jpeg)));
            ok = FALSE;
            refused = TRUE;
        } else if ((guint64)jpeg.width * jpeg.height <= max_pixels &&
                   jpeg_decode_bytes(&jpeg) > TERN_IMAGE_MAX_JPEG_DECODE_BYTES) {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_TOO_LARGE,
                        _("%s: a JPEG of %u scans at %u x %u pixels would take %llu MiB to "
                          "decode (the decoder holds every coefficient until the last scan; "
                          "the limit is %llu MiB): save it as a baseline JPEG or scale it down"),
                        name, jpeg.scans, jpeg.width, jpeg.height,
                        (unsigned long long)(jpeg_decode_bytes(&jpeg) >> 20),
                        (unsigned long long)(TERN_IMAGE_MAX_JPEG_DECODE_BYTES >> 20));
            ok = FALSE;
            refused = TRUE;
        } else if ((jpeg.state == JPEG_SCAN || jpeg.state == JPEG_SCAN_FF) &&
                   (guint64)jpeg.width * jpeg.height > max_pixels) {
            /* Refused by its size whole or not: its scan is not walked. */
            p.seen = p.too_large = TRUE;
            p.width = (int)jpeg.width;
            p.height = (int)jpeg.height;
            ok = FALSE;
        } else if (jpeg.state == JPEG_SCAN || jpeg.state == JPEG_SCAN_FF) {
            if (jpeg_last_scan_whole(held->data, held->len, &jpeg)) {
                /* Only the end marker is missing: the decoder gets it,
                 * and finishes the scan with no data made up. */
                g_byte_array_append(held, (const guint8 *)"\xFF\xD9", 2);
            } else if (jpeg.sof_marker == 0xC2 || jpeg.sof_marker == 0xCA) {
                /* Not "truncated": it may lack only its marker, and the
                 * user can often still open it elsewhere and re-save it. */
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                            _("%s: a progressive JPEG that ends inside its last scan, without "
                              "its end-of-image marker (Tern cannot tell whether that scan is "
                              "complete): if it opens whole in an image viewer, save it again "
                              "from there"),
                            name);
                ok = FALSE;
                refused = TRUE;
            } else if (jpeg.sof_marker == 0xC9) {
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                            _("%s: an arithmetic-coded JPEG that ends inside its last scan, "
                              "without its end-of-image marker (Tern cannot tell whether that "
                              "scan is complete): if it opens whole in an image viewer, save it "
                              "again from there"),
                            name);
                ok = FALSE;
                refused = TRUE;
            } else {
                g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                            _("%s: truncated JPEG (the file ends before its end-of-image marker)"),
                            name);
                ok = FALSE;
                refused = TRUE;
            }
        } else if (jpeg.state != JPEG_END) {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        jpeg.state == JPEG_BAD
                            ? _("%s: damaged JPEG (its marker structure is broken)")
                            : _("%s: truncated JPEG (the file ends before its end-of-image marker)"),
                        name);
            ok = FALSE;
            refused = TRUE;
        }
        const int denom = ok ? jpeg_scale_denom(jpeg.width, jpeg.height, fit_side) : 1;
        if (denom > 1) {
            rows_want = (int)((jpeg.height + (guint32)denom - 1) / (guint32)denom);
            gdk_pixbuf_loader_set_size(loader,
                                       (int)((jpeg.width + (guint32)denom - 1) / (guint32)denom),
                                       rows_want);
        }
        for (guint off = 0; ok && off < held->len && !p.too_large; off += CHUNK)
            if (!feed_loader(loader, held->data + off, MIN((guint)CHUNK, held->len - off), &p,
                             name, fmt_buf, &e, error))
                ok = FALSE;
    }
    if (held)
        g_byte_array_unref(held);
    GError *close_error = NULL;
    gboolean closed = gdk_pixbuf_loader_close(loader, &close_error);
    if (ok && !any) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT, _("%s: the file is empty"),
                    name);
        ok = FALSE;
    }
    const char *fmt = loader_format(loader, fmt_buf);
    GdkPixbuf *pixbuf = NULL;
    if (refused) {
        /* error is set by the walk (for a JPEG, the loader never saw the data) */
    } else if (p.too_large) {
        g_clear_error(error);
        set_too_large(error, name, &p);
    } else if (!ok && e) {
        if (!p.seen && (!fmt || g_error_matches(e, GDK_PIXBUF_ERROR,
                                                GDK_PIXBUF_ERROR_UNKNOWN_TYPE)))
            set_unsupported(error, name, fmt && !format_accepted(fmt) ? fmt : NULL);
        else
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        _("%s: damaged image data (%s)"), name, e->message);
    } else if (ok && fmt && !format_accepted(fmt)) {
        set_unsupported(error, name, fmt);
    } else if (ok && !closed) {
        /* Truncated files end here: the loader ran out of data. */
        if (!p.seen && (!fmt || g_error_matches(close_error, GDK_PIXBUF_ERROR,
                                                GDK_PIXBUF_ERROR_UNKNOWN_TYPE)))
            set_unsupported(error, name, NULL);
        else
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        _("%s: damaged or truncated image (%s)"), name,
                        close_error ? close_error->message : _("the decoder gave up"));
    } else if (ok && is_webp && total < riff_total) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: truncated WebP (%llu of its %llu bytes arrived)"), name,
                    (unsigned long long)total, (unsigned long long)riff_total);
    } else if (ok && is_png && p.rows_done < p.height) {
        /* Its chunks all arrived (the walk reached the end of IEND; a file
         * cut short was refused above), so the compressed data is bad: a
         * broken deflate stream or Adler-32 checksum is only a warning to
         * libpng, which stops there, and the loader closes without an
         * error, having reported no area if no row decoded (its pixels never
         * written: none counts as zero rows). Not "truncated": the same
         * download again will not mend it. */
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: damaged PNG (its compressed image data is corrupt; %d of its %d rows "
                      "decoded)"),
                    name, p.rows_done, p.height);
    } else if (ok && !is_gif && p.updated && p.rows_done < (rows_want ? rows_want : p.height)) {
        /* Not for a GIF: its walk saw the first frame whole, and the loader
         * reports that frame's area, which may rightly cover only a part of
         * the logical screen (the rest is transparent). */
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: truncated image (%d of its %d rows arrived)"), name, p.rows_done,
                    rows_want ? rows_want : p.height);
    } else if (ok) {
        /* For an animation (GIF) this is its first frame. */
        pixbuf = gdk_pixbuf_loader_get_pixbuf(loader);
        if (pixbuf) {
            g_object_ref(pixbuf);
            g_strlcpy(format_out, fmt ? fmt : "?", 16);
            *src_w = rows_want ? p.width : gdk_pixbuf_get_width(pixbuf);
            *src_h = rows_want ? p.height : gdk_pixbuf_get_height(pixbuf);
        } else {
            g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                        _("%s: the decoder produced no picture"), name);
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
static TernImage *convert(GdkPixbuf *pixbuf, int src_w, int src_h, const TernImageOptions *opts,
                          const char *format, const char *name, GError **error) {
    if (gdk_pixbuf_get_colorspace(pixbuf) != GDK_COLORSPACE_RGB ||
        gdk_pixbuf_get_bits_per_sample(pixbuf) != 8 ||
        (gdk_pixbuf_get_n_channels(pixbuf) != 3 && gdk_pixbuf_get_n_channels(pixbuf) != 4)) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    _("%s: unexpected pixel layout from the decoder"), name);
        return NULL;
    }
    /* As stored: the pixbuf may be a JPEG decoded reduced (decode). */
    const int sw = src_w, sh = src_h;
    if (sw <= 0 || sh <= 0 || (guint64)sw * (guint64)sh > limit_of(opts)) {
        probe p = {.max_pixels = limit_of(opts), .width = sw, .height = sh};
        set_too_large(error, name, &p);
        return NULL;
    }
    /* EXIF orientation (JPEG): a new pixbuf, or the same one with a ref. */
    GdkPixbuf *oriented = gdk_pixbuf_apply_embedded_orientation(pixbuf);
    if (!oriented) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_CORRUPT,
                    _("%s: out of memory applying the orientation"), name);
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
                        _("%s: out of memory scaling the image"), name);
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
                    _("%s: out of memory for %d x %d pixels"), name, w, h);
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
    int sw = 0, sh = 0;
    GdkPixbuf *pb = decode(&src, name, limit_of(opts), opts ? opts->fit_side : 0, format, &sw,
                           &sh, error);
    if (!pb)
        return NULL;
    TernImage *img = convert(pb, sw, sh, opts, format, name, error);
    g_object_unref(pb);
    return img;
}

TernImage *tern_image_load_file(const char *path, const TernImageOptions *opts, GError **error) {
    g_return_val_if_fail(path != NULL, NULL);
    /* Opened without blocking and checked before reading: a FIFO named
     * like a picture would otherwise hang the caller in open() or read(). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_IO, "%s: %s", path,
                    g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_IO,
                    _("%s: not a regular file, so not an image Tern reads"), path);
        close(fd);
        return NULL;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_IO, "%s: %s", path,
                    g_strerror(errno));
        close(fd);
        return NULL;
    }
    source src = {.file = f};
    char format[16] = "";
    int sw = 0, sh = 0;
    GdkPixbuf *pb = decode(&src, path, limit_of(opts), opts ? opts->fit_side : 0, format, &sw,
                           &sh, error);
    fclose(f);
    if (!pb)
        return NULL;
    TernImage *img = convert(pb, sw, sh, opts, format, path, error);
    g_object_unref(pb);
    return img;
}

TernImage *tern_image_load_data_uri(const char *uri, const TernImageOptions *opts,
                                    GError **error) {
    g_return_val_if_fail(uri != NULL, NULL);
    const char *comma = strchr(uri, ',');
    if (g_ascii_strncasecmp(uri, "data:", 5) != 0 || !comma) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    _("image URL: only data: URIs are read (data:image/png;base64,...)"));
        return NULL;
    }
    g_autofree char *header = g_strndup(uri + 5, (gsize)(comma - uri - 5));
    /* MIME's encoding name, in any case (as the WHATWG URL reader takes it):
     * ";BASE64" was refused as not base64. */
    const size_t hlen = strlen(header);
    if (hlen < 7 || g_ascii_strcasecmp(header + hlen - 7, ";base64") != 0) {
        g_set_error(error, TERN_IMAGE_ERROR, TERN_IMAGE_ERROR_UNSUPPORTED,
                    _("image URL: the data: URI is not base64-encoded"));
        return NULL;
    }
    /* g_base64_decode skips characters outside the alphabet; a payload that
     * is not an image then fails to decode, with the same clear message.
     * It also drops a last group of 2 or 3 characters that has no '='
     * padding (which some encoders leave out): the image would lose its
     * last byte or two, and a JPEG or PNG is then refused as truncated. So
     * the padding is restored first. */
    const char *payload = comma + 1;
    /* The data is URL text (RFC 2397): a URL encoder writes '+', '/' and '='
     * as %2B, %2F and %3D. Left escaped, the '%' was skipped and the hex
     * digits after it read as base64: a valid URI, a "damaged" picture. A
     * '%' that starts no escape stays, skipped below. */
    g_autofree char *unescaped = NULL;
    if (strchr(payload, '%')) {
        char *o = unescaped = g_malloc(strlen(payload) + 1);
        for (const char *c = payload; *c; c++) {
            if (c[0] == '%' && g_ascii_isxdigit(c[1]) && g_ascii_isxdigit(c[2])) {
                *o++ = (char)(g_ascii_xdigit_value(c[1]) * 16 + g_ascii_xdigit_value(c[2]));
                c += 2;
            } else {
                *o++ = *c;
            }
        }
        *o = '\0';
        payload = unescaped;
    }
    gsize n_alpha = 0;
    gboolean padded = FALSE;
    for (const char *c = payload; *c; c++) {
        if (g_ascii_isalnum(*c) || *c == '+' || *c == '/')
            n_alpha++;
        else if (*c == '=')
            padded = TRUE;
    }
    g_autofree char *repadded = NULL;
    if (!padded && n_alpha % 4 >= 2)
        repadded = g_strconcat(payload, n_alpha % 4 == 2 ? "==" : "=", NULL);
    gsize len = 0;
    g_autofree guchar *bytes = g_base64_decode(repadded ? repadded : payload, &len);
    return tern_image_load_bytes(bytes ? (const void *)bytes : "", bytes ? len : 0,
                                 "image URL", opts, error);
}

TernImage *tern_image_from_pixbuf(GdkPixbuf *pixbuf, const TernImageOptions *opts,
                                  GError **error) {
    g_return_val_if_fail(GDK_IS_PIXBUF(pixbuf), NULL);
    return convert(pixbuf, gdk_pixbuf_get_width(pixbuf), gdk_pixbuf_get_height(pixbuf), opts,
                   "pixbuf", "image", error);
}

void tern_image_free(TernImage *image) {
    if (!image)
        return;
    g_free(image->rgb);
    g_free(image);
}
