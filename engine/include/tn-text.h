/* Text from anywhere (a file name, a model's metadata, a server's listing)
 * made fit to show as one line: a terminal, a log, a GTK label or a JSON
 * body takes it as it is, and no name can start a line of its choosing or
 * a terminal sequence. The engine's error messages and the manager's names
 * from the Hugging Face Hub go through the same code. */
#ifndef TN_TEXT_H
#define TN_TEXT_H

#include <stdbool.h>
#include <stddef.h>

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
 * U+009B as CSI) as "\u00NN", the rest as it is. Stops before a piece that
 * would not fit; *whole (may be NULL) says whether all of s went in, which
 * 4 * n + 1 bytes always hold. */
size_t tn_text_one_line(const char *s, size_t n, char *out, size_t cap, unsigned flags, bool *whole);

#endif
