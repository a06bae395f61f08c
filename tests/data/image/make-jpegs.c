/* Writes the JPEG fixtures of tests/imageio (test-image.c, jpeg_fixtures)
 * with libjpeg(-turbo), which the tests themselves do not link: the same
 * 32 x 16 picture of four quadrants (red, green / blue, white) as a
 * baseline, a progressive, an arithmetic-coded (sequential and
 * progressive) JPEG, and as Adobe CMYK and YCCK (inverted, as Photoshop
 * writes them); and with restart markers (a DRI segment), in colour and
 * grey. Build and run in tests/data/image:
 *   cc -o /tmp/make-jpegs make-jpegs.c -ljpeg && /tmp/make-jpegs
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>
enum { W = 32, H = 16 };
static void px(int x, int y, unsigned char *rgb) {
    int q = (x >= W / 2) + 2 * (y >= H / 2);
    static const unsigned char c[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
    memcpy(rgb, c[q], 3);
}
static int restart; /* MCUs between restart markers, 0: none */
static void write(const char *path, J_COLOR_SPACE cs, int prog, int arith, const unsigned char *app1, unsigned app1len, int adobe_cmyk_invert) {
    struct jpeg_compress_struct c; struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err); jpeg_create_compress(&c);
    FILE *f = fopen(path, "wb"); jpeg_stdio_dest(&c, f);
    c.image_width = W; c.image_height = H;
    c.input_components = cs == JCS_CMYK || cs == JCS_YCCK ? 4 : cs == JCS_GRAYSCALE ? 1 : 3;
    c.in_color_space = cs == JCS_YCCK ? JCS_CMYK : cs;
    jpeg_set_defaults(&c);
    if (cs == JCS_YCCK) jpeg_set_colorspace(&c, JCS_YCCK);
    c.restart_interval = restart;
    jpeg_set_quality(&c, 95, TRUE);
    if (prog) jpeg_simple_progression(&c);
    if (arith) c.arith_code = TRUE;
    jpeg_start_compress(&c, TRUE);
    if (app1) jpeg_write_marker(&c, JPEG_APP0 + 1, app1, app1len);
    unsigned char row[W * 4];
    while (c.next_scanline < H) {
        int y = c.next_scanline;
        for (int x = 0; x < W; x++) {
            unsigned char rgb[3]; px(x, y, rgb);
            if (c.input_components == 4) {
                /* CMYK of no black ink, stored inverted (Adobe) */
                unsigned char cm[4] = {255 - rgb[0], 255 - rgb[1], 255 - rgb[2], 0};
                for (int k = 0; k < 4; k++) row[x * 4 + k] = adobe_cmyk_invert ? 255 - cm[k] : cm[k];
            } else if (c.input_components == 1) row[x] = rgb[0];
            else memcpy(row + x * 3, rgb, 3);
        }
        JSAMPROW r = row; jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c); fclose(f); jpeg_destroy_compress(&c);
}
int main(void) {
    write("baseline.jpg", JCS_RGB, 0, 0, NULL, 0, 0);
    write("progressive.jpg", JCS_RGB, 1, 0, NULL, 0, 0);
    write("arithmetic.jpg", JCS_RGB, 0, 1, NULL, 0, 0);
    write("arithmetic-progressive.jpg", JCS_RGB, 1, 1, NULL, 0, 0);
    write("cmyk-adobe.jpg", JCS_CMYK, 0, 0, NULL, 0, 1);
    write("ycck-adobe.jpg", JCS_YCCK, 0, 0, NULL, 0, 1);
    restart = 1;
    write("restart.jpg", JCS_RGB, 0, 0, NULL, 0, 0);
    restart = 3;
    write("gray-restart.jpg", JCS_GRAYSCALE, 0, 0, NULL, 0, 0);
    return 0;
}
