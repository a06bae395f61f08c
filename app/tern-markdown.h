/* tern-markdown.h: Markdown (GitHub flavour, through cmark-gfm) as widgets. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* Fills box (vertical) with one widget per top-level block of markdown.
 * Widgets of blocks that did not change since the last call are kept; when
 * markdown extends what the box showed, only its last block on is parsed
 * again (blocks before it are final), so re-rendering a growing answer costs
 * what its last block costs, not what the whole answer does. */
void  tern_markdown_render         (GtkBox     *box,
                                    const char *markdown);
/* The same, with the bytes of markdown whose drafted[i] is non-zero (tokens
 * from accepted speculative drafts) drawn in color ("#rrggbb"); drafted has
 * strlen (markdown) entries, or is NULL for no tint. */
void  tern_markdown_render_tinted  (GtkBox       *box,
                                    const char   *markdown,
                                    const guint8 *drafted,
                                    const char   *color);
/* Fills box with text as typed: no Markdown, every line break and blank
 * kept (a user's pasted log, an indented listing). */
void  tern_markdown_render_plain   (GtkBox     *box,
                                    const char *text);
/* The Pango markup of len bytes of text (-1: up to its NUL) shown as typed:
 * escaped, made valid UTF-8. */
char *tern_markdown_plain_to_pango (const char *text,
                                    gssize      len);
/* The Pango markup of the blocks, one per line: for tests. */
char *tern_markdown_to_pango       (const char *markdown);
char *tern_markdown_to_pango_tinted (const char   *markdown,
                                     const guint8 *drafted,
                                     const char   *color);

G_END_DECLS
