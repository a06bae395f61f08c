/* Text from anywhere (a file name, a model's metadata, a server's listing)
 * made fit to show as one line: a terminal, a log, a GTK label or a JSON
 * body takes it as it is, and no name can start a line of its choosing or
 * a terminal sequence. The engine's error messages and the manager's names
 * from the Hugging Face Hub go through the same code. */
#ifndef TN_TEXT_H
#define TN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A hex digit's value (0-9, a-f, A-F), -1 for any other byte: one
 * definition for the JSON readers' \u escapes and the server's chunk
 * sizes, so that they cannot disagree on what a hex digit is. */
static inline int tn_hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* tn_text_one_line's flags. */
enum {
    /* C0 controls and DEL written as "\xNN", for a name quoted inside a
     * message (the reader sees what is there), instead of a space (newline,
     * CR, tab) or '?' (the others), for a message's own arguments. */
    TN_TEXT_ESCAPE_C0 = 1u << 0,
};

/* s[0..n) as one line of valid UTF-8 into out (cap bytes, NUL-terminated),
 * its length returned: C0 controls and DEL as the flags say, a byte that is
 * not UTF-8 as "\xNN", a C1 control (U+0080..U+009F: a terminal reads
 * U+009B as CSI) and a character that tn_text_hidden_char names as
 * "\uNNNN" ("\UNNNNNNNN" past U+FFFF), the rest as it is. Stops before a
 * piece that would not fit; *whole (may be NULL) says whether all of s
 * went in, which 4 * n + 1 bytes always hold. */
size_t tn_text_one_line(const char *s, size_t n, char *out, size_t cap, unsigned flags, bool *whole);

/* The code point of the UTF-8 character s[0..len) when it reorders or hides
 * the text around it, else 0: the bidi controls (U+061C, U+200E/F,
 * U+202A..U+202E, U+2066..U+2069), the zero-width and invisible characters
 * (U+200B..U+200D, U+2060..U+2064, U+FEFF, the tags U+E0000..U+E007F that
 * carry hidden ASCII) and the line and paragraph separators (U+2028/9, a
 * new line in a label). In a name they make a line read as another
 * ("Trojan Source": U+202E shows "abc" as "cba"); in an answer they are
 * the text's own (Arabic, Hebrew), and stay. */
uint32_t tn_text_hidden_char(const char *s, size_t len);

/* A model's answer as it streams to a terminal: newline and tab as they
 * are, and nothing else that a terminal obeys. A C0 control (ESC, a lone
 * CR, BEL, BS, ...) and DEL become "\xNN", a C1 control "\u00NN" and a
 * byte that is not UTF-8 "\xNN", as tn_text_one_line shows them; CR LF
 * stays (it only ends a line). A character or a CR LF cut between two
 * pieces is held until the next one, so that it is shown whole. A stream
 * starts zeroed ({0}). */
typedef struct tn_text_stream {
    unsigned char held[4]; /* a character's first bytes, or a CR */
    unsigned char n_held;
} tn_text_stream;
/* Receives the shown text, a run at a time (never NUL-terminated). */
typedef void (*tn_text_write_fn)(const char *s, size_t n, void *user);
void tn_text_stream_push(tn_text_stream *ts, const char *s, size_t n, tn_text_write_fn write,
                         void *user);
/* The end of the answer: what is held is shown escaped (a character never
 * completed, a last lone CR); the stream starts anew. */
void tn_text_stream_end(tn_text_stream *ts, tn_text_write_fn write, void *user);

#endif
