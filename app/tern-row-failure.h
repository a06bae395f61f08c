/* tern-row-failure.h: a row's failure sentence, alone in the error style. */
#pragma once

#include <adwaita.h>

G_BEGIN_DECLS

/* Shows SENTENCE under the subtitle of ROW (an AdwActionRow or
 * AdwExpanderRow) in a label of its own (style class tern-row-failure),
 * which alone has the error style: the row's title and subtitle keep
 * theirs. NULL hides it. The label is made on the first call; where
 * libadwaita's layout has no subtitle box, it goes at the end of FALLBACK
 * (NULL: a suffix of an action row). Returns the label. */
GtkWidget *tern_row_set_failure (GtkWidget  *row,
                                 GtkBox     *fallback,
                                 const char *sentence);

/* libadwaita's subtitle label under WIDGET (style class "subtitle"), or
 * NULL: the rows' words go beside it. */
GtkWidget *tern_row_find_subtitle_label (GtkWidget *widget);

G_END_DECLS
