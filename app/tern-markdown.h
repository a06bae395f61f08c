/* tern-markdown.h: Markdown (GitHub flavour, through cmark-gfm) as widgets. */
#pragma once

#include <gtk/gtk.h>

G_BEGIN_DECLS

/* Fills box (vertical) with one widget per top-level block of markdown.
 * Widgets of blocks that did not change since the last call are kept, so
 * re-rendering a growing answer at every frame only touches its last block. */
void  tern_markdown_render         (GtkBox     *box,
                                    const char *markdown);
/* The Pango markup of the non-code blocks, one per line: for tests. */
char *tern_markdown_to_pango       (const char *markdown);

G_END_DECLS
