/* tern-markdown.c: cmark-gfm's tree turned into labels, code blocks and
 * grids. Paragraphs, headings, lists and quotes become Pango markup in a
 * wrapping, selectable GtkLabel; fenced code gets its own block with a copy
 * button; GFM tables a GtkGrid. */
#include "config.h"

#include <string.h>

#include <glib/gi18n.h>
#include <cmark-gfm.h>
#include <cmark-gfm-core-extensions.h>

#include "tern-markdown.h"

typedef enum {
  BLOCK_TEXT,
  BLOCK_CODE,
  BLOCK_RULE,
  BLOCK_TABLE,
} BlockKind;

typedef struct {
  BlockKind kind;
  char *key;      /* what the widget shows: markup, code, or cells */
  char *language; /* code blocks */
  char *markup;   /* code blocks with tinted runs: the code as Pango markup */
  GPtrArray *rows; /* tables: GPtrArray of GPtrArray of markup */
} Block;

static void
block_free (gpointer data)
{
  Block *b = data;

  g_free (b->key);
  g_free (b->language);
  g_free (b->markup);
  g_clear_pointer (&b->rows, g_ptr_array_unref);
  g_free (b);
}

static gboolean
node_is (cmark_node *node,
         const char *type_string)
{
  return g_strcmp0 (cmark_node_get_type_string (node), type_string) == 0;
}

static void
append_escaped (GString    *s,
                const char *text)
{
  g_autofree char *escaped = g_markup_escape_text (text ? text : "", -1);
  g_string_append (s, escaped);
}

/* Tokens that came from accepted speculative drafts are drawn in a tint.
 * The flags are per byte of the Markdown source; cmark gives no source
 * positions for inlines, so each literal is found again in the source,
 * searching forward from the end of the previous one. The first match is
 * never past the literal's real place, so the search cannot run ahead; a
 * literal that is not in the source verbatim (an entity, an escape) is
 * simply drawn untinted. Spans open and close within one literal, so the
 * markup stays well nested whatever the Markdown structure. */
typedef struct {
  const char *source;
  const guint8 *mask; /* [strlen (source)]; NULL: no tint */
  gsize cursor;
  const char *color;  /* "#rrggbb" */
} Tint;

static void render_inlines (cmark_node *parent, GString *s, Tint *t);
static void render_block_markup (cmark_node *node, GString *s, int depth, Tint *t);

/* Escapes text into s, with the tinted runs of its source bytes in spans. */
static void
append_literal (GString    *s,
                const char *text,
                Tint       *t)
{
  const char *found;
  gsize len, at;

  if (text == NULL || *text == '\0')
    return;
  len = strlen (text);
  found = (t != NULL && t->mask != NULL) ? strstr (t->source + t->cursor, text) : NULL;
  if (found == NULL)
    {
      append_escaped (s, text);
      return;
    }
  at = (gsize) (found - t->source);
  t->cursor = at + len;
  for (gsize i = 0; i < len;)
    {
      gboolean tinted = t->mask[at + i] != 0;
      gsize j = i + 1;
      g_autofree char *escaped = NULL;

      /* Runs break only at character boundaries: a token boundary inside a
       * UTF-8 sequence takes the flag of the sequence's first byte. */
      while (j < len && (((guchar) text[j] & 0xC0) == 0x80 || (t->mask[at + j] != 0) == tinted))
        j++;
      escaped = g_markup_escape_text (text + i, (gssize) (j - i));
      if (tinted)
        g_string_append_printf (s, "<span foreground=\"%s\">%s</span>", t->color, escaped);
      else
        g_string_append (s, escaped);
      i = j;
    }
}

static void
render_inline (cmark_node *node,
               GString    *s,
               Tint       *t)
{
  switch (cmark_node_get_type (node))
    {
    case CMARK_NODE_TEXT:
    case CMARK_NODE_HTML_INLINE:
      append_literal (s, cmark_node_get_literal (node), t);
      break;
    case CMARK_NODE_SOFTBREAK:
      g_string_append_c (s, ' ');
      break;
    case CMARK_NODE_LINEBREAK:
      g_string_append_c (s, '\n');
      break;
    case CMARK_NODE_CODE:
      g_string_append (s, "<tt>");
      append_literal (s, cmark_node_get_literal (node), t);
      g_string_append (s, "</tt>");
      break;
    case CMARK_NODE_EMPH:
      g_string_append (s, "<i>");
      render_inlines (node, s, t);
      g_string_append (s, "</i>");
      break;
    case CMARK_NODE_STRONG:
      g_string_append (s, "<b>");
      render_inlines (node, s, t);
      g_string_append (s, "</b>");
      break;
    case CMARK_NODE_LINK:
      {
        const char *url = cmark_node_get_url (node);
        if (url != NULL && *url)
          {
            g_autofree char *escaped = g_markup_escape_text (url, -1);
            g_string_append_printf (s, "<a href=\"%s\">", escaped);
            render_inlines (node, s, t);
            g_string_append (s, "</a>");
          }
        else
          render_inlines (node, s, t);
      }
      break;
    case CMARK_NODE_IMAGE:
      render_inlines (node, s, t);
      break;
    default:
      if (node_is (node, "strikethrough"))
        {
          g_string_append (s, "<s>");
          render_inlines (node, s, t);
          g_string_append (s, "</s>");
        }
      else if (cmark_node_first_child (node) != NULL)
        render_inlines (node, s, t);
      else
        append_literal (s, cmark_node_get_literal (node), t);
    }
}

static void
render_inlines (cmark_node *parent,
                GString    *s,
                Tint       *t)
{
  for (cmark_node *n = cmark_node_first_child (parent); n; n = cmark_node_next (n))
    render_inline (n, s, t);
}

static void
append_indented (GString    *s,
                 const char *text,
                 const char *first_prefix,
                 int         indent)
{
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);

  for (guint i = 0; lines[i] != NULL; i++)
    {
      if (i > 0)
        g_string_append_c (s, '\n');
      if (i == 0)
        g_string_append (s, first_prefix);
      else
        for (int k = 0; k < indent; k++)
          g_string_append_c (s, ' ');
      g_string_append (s, lines[i]);
    }
}

static void
render_list (cmark_node *list,
             GString    *s,
             int         depth,
             Tint       *t)
{
  gboolean ordered = cmark_node_get_list_type (list) == CMARK_ORDERED_LIST;
  int number = cmark_node_get_list_start (list);
  gboolean first_item = TRUE;

  for (cmark_node *item = cmark_node_first_child (list); item; item = cmark_node_next (item))
    {
      g_autoptr(GString) body = g_string_new (NULL);
      g_autofree char *bullet = NULL;
      gboolean first = TRUE;

      for (cmark_node *child = cmark_node_first_child (item); child;
           child = cmark_node_next (child))
        {
          if (!first)
            g_string_append_c (body, '\n');
          render_block_markup (child, body, depth + 1, t);
          first = FALSE;
        }
      bullet = ordered ? g_strdup_printf ("%*s%d. ", depth * 3, "", number++)
                       : g_strdup_printf ("%*s• ", depth * 3, "");
      if (!first_item)
        g_string_append_c (s, '\n');
      append_indented (s, body->str, bullet, (int) g_utf8_strlen (bullet, -1));
      first_item = FALSE;
    }
}

static void
render_block_markup (cmark_node *node,
                     GString    *s,
                     int         depth,
                     Tint       *t)
{
  switch (cmark_node_get_type (node))
    {
    case CMARK_NODE_PARAGRAPH:
      render_inlines (node, s, t);
      break;
    case CMARK_NODE_HEADING:
      {
        static const char *sizes[] = { "xx-large", "x-large", "large", "medium", "medium", "medium" };
        int level = CLAMP (cmark_node_get_heading_level (node), 1, 6);
        g_string_append_printf (s, "<span weight=\"bold\" size=\"%s\">", sizes[level - 1]);
        render_inlines (node, s, t);
        g_string_append (s, "</span>");
      }
      break;
    case CMARK_NODE_LIST:
      render_list (node, s, depth, t);
      break;
    case CMARK_NODE_BLOCK_QUOTE:
      {
        g_autoptr(GString) body = g_string_new (NULL);
        for (cmark_node *c = cmark_node_first_child (node); c; c = cmark_node_next (c))
          {
            if (body->len)
              g_string_append (body, "\n\n");
            render_block_markup (c, body, depth, t);
          }
        g_string_append (s, "<i>");
        append_indented (s, body->str, "▎ ", 0);
        g_string_append (s, "</i>");
      }
      break;
    case CMARK_NODE_CODE_BLOCK:
      g_string_append (s, "<tt>");
      append_literal (s, cmark_node_get_literal (node), t);
      g_string_append (s, "</tt>");
      while (s->len && s->str[s->len - 1] == '\n')
        g_string_truncate (s, s->len - 1);
      break;
    case CMARK_NODE_THEMATIC_BREAK:
      g_string_append (s, "―――");
      break;
    case CMARK_NODE_HTML_BLOCK:
      append_literal (s, cmark_node_get_literal (node), t);
      break;
    default:
      render_inlines (node, s, t);
    }
}

static GPtrArray *
parse_blocks (const char *markdown,
              Tint       *t,
              int        *last_line)
{
  static const char *extensions[] = { "table", "strikethrough", "autolink", "tasklist" };
  GPtrArray *blocks = g_ptr_array_new_with_free_func (block_free);
  cmark_parser *parser;
  cmark_node *doc;

  cmark_gfm_core_extensions_ensure_registered ();
  parser = cmark_parser_new (CMARK_OPT_DEFAULT);
  for (guint i = 0; i < G_N_ELEMENTS (extensions); i++)
    {
      cmark_syntax_extension *ext = cmark_find_syntax_extension (extensions[i]);
      if (ext != NULL)
        cmark_parser_attach_syntax_extension (parser, ext);
    }
  cmark_parser_feed (parser, markdown, strlen (markdown));
  doc = cmark_parser_finish (parser);

  for (cmark_node *node = cmark_node_first_child (doc); node; node = cmark_node_next (node))
    {
      Block *b = g_new0 (Block, 1);

      if (cmark_node_get_type (node) == CMARK_NODE_CODE_BLOCK)
        {
          const char *info = cmark_node_get_fence_info (node);
          g_autofree char *code = g_strdup (cmark_node_get_literal (node));
          gsize len = strlen (code);

          while (len > 0 && code[len - 1] == '\n')
            code[--len] = '\0';
          b->kind = BLOCK_CODE;
          if (t != NULL && t->mask != NULL)
            {
              GString *m = g_string_new (NULL);
              append_literal (m, code, t);
              /* Untinted code stays plain text (no markup to parse). */
              if (strstr (m->str, "<span") != NULL)
                b->markup = g_string_free (m, FALSE);
              else
                g_string_free (m, TRUE);
            }
          b->key = g_steal_pointer (&code);
          if (info != NULL && *info)
            {
              g_auto(GStrv) words = g_strsplit (info, " ", 2);
              b->language = g_strdup (words[0]);
            }
        }
      else if (cmark_node_get_type (node) == CMARK_NODE_THEMATIC_BREAK)
        {
          b->kind = BLOCK_RULE;
          b->key = g_strdup ("---");
        }
      else if (node_is (node, "table"))
        {
          GString *key = g_string_new (NULL);

          b->kind = BLOCK_TABLE;
          b->rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
          for (cmark_node *row = cmark_node_first_child (node); row; row = cmark_node_next (row))
            {
              GPtrArray *cells = g_ptr_array_new_with_free_func (g_free);
              gboolean header = row == cmark_node_first_child (node);

              for (cmark_node *cell = cmark_node_first_child (row); cell;
                   cell = cmark_node_next (cell))
                {
                  GString *m = g_string_new (header ? "<b>" : "");
                  render_inlines (cell, m, t);
                  if (header)
                    g_string_append (m, "</b>");
                  g_string_append (key, m->str);
                  g_string_append_c (key, '\t');
                  g_ptr_array_add (cells, g_string_free (m, FALSE));
                }
              g_string_append_c (key, '\n');
              g_ptr_array_add (b->rows, cells);
            }
          b->key = g_string_free (key, FALSE);
        }
      else
        {
          GString *m = g_string_new (NULL);
          render_block_markup (node, m, 0, t);
          b->kind = BLOCK_TEXT;
          b->key = g_string_free (m, FALSE);
        }
      g_ptr_array_add (blocks, b);
      if (last_line != NULL)
        *last_line = cmark_node_get_start_line (node);
    }

  cmark_node_free (doc);
  cmark_parser_free (parser);
  return blocks;
}

char *
tern_markdown_to_pango (const char *markdown)
{
  return tern_markdown_to_pango_tinted (markdown, NULL, NULL);
}

char *
tern_markdown_to_pango_tinted (const char   *markdown,
                               const guint8 *drafted,
                               const char   *color)
{
  Tint tint = { .source = markdown, .mask = drafted, .color = color ? color : "#3584e4" };
  g_autoptr(GPtrArray) blocks = parse_blocks (markdown, &tint, NULL);
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < blocks->len; i++)
    {
      Block *b = g_ptr_array_index (blocks, i);
      g_string_append (s, b->markup ? b->markup : b->key);
      g_string_append_c (s, '\n');
    }
  return g_string_free (s, FALSE);
}

/* ------------------------------------------------------------- widgets */

#define KEY_KIND "tern-md-kind"
#define KEY_TEXT "tern-md-key"
#define KEY_LABEL "tern-md-label"
#define KEY_CODE "tern-md-code"

static GtkWidget *
text_label_new (void)
{
  GtkWidget *label = gtk_label_new (NULL);

  gtk_label_set_wrap (GTK_LABEL (label), TRUE);
  gtk_label_set_wrap_mode (GTK_LABEL (label), PANGO_WRAP_WORD_CHAR);
  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  /* Without a width in characters, GTK measures a wrapping label's minimum
   * width by laying it out at width 0: one line per character, each one
   * re-shaped, the most expensive of the four layouts a changed label gets.
   * At 20 characters (~160 px, within the 360 px window) that layout has a
   * twentieth of the lines; the longest main-loop stall while an answer
   * streams fell from 15-18 ms to 10-13 ms (release, under Xvfb). */
  gtk_label_set_width_chars (GTK_LABEL (label), 20);
  gtk_widget_set_focusable (label, FALSE);
  /* Unfocusable is not enough: GTK 4.8's selectable label still answers
   * Tab ("focus" vfunc), its grab fails, and it says it took the focus.
   * Tab in the transcript stayed on the first message's Copy button. */
  gtk_widget_set_can_focus (label, FALSE);
  return label;
}

/* 1: the text reads right to left, 0: left to right, -1: no letter to
 * tell. Its first letter decides, as Pango's automatic direction decides
 * the label's lines (pango_find_base_dir, the same rule, is deprecated). */
static int
text_direction (const char *text)
{
  for (const char *p = text; p != NULL && *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      if (!g_unichar_isalpha (c))
        continue;
      switch (g_unichar_get_script (c))
        {
        case G_UNICODE_SCRIPT_ARABIC:
        case G_UNICODE_SCRIPT_HEBREW:
        case G_UNICODE_SCRIPT_SYRIAC:
        case G_UNICODE_SCRIPT_THAANA:
        case G_UNICODE_SCRIPT_NKO:
        case G_UNICODE_SCRIPT_SAMARITAN:
        case G_UNICODE_SCRIPT_MANDAIC:
        case G_UNICODE_SCRIPT_ADLAM:
        case G_UNICODE_SCRIPT_HANIFI_ROHINGYA:
        case G_UNICODE_SCRIPT_IMPERIAL_ARAMAIC:
        case G_UNICODE_SCRIPT_PHOENICIAN:
        case G_UNICODE_SCRIPT_KHAROSHTHI:
        case G_UNICODE_SCRIPT_AVESTAN:
          return 1;
        default:
          return 0;
        }
    }
  return -1;
}

/* GtkLabel places its layout by xalign less the layout's logical x, and a
 * right-to-left line already sits at the right of the layout: at xalign 0
 * it is drawn at the left of the bubble. At xalign 1 it stays at the
 * right; its wrapped lines keep Pango's alignment, which follows each
 * paragraph's direction. */
static void
label_set_rtl (GtkWidget *label,
               gboolean   rtl)
{
  gtk_label_set_xalign (GTK_LABEL (label), rtl ? 1 : 0);
}

/* A label on its own (a table cell, a piece of plain text): its own text
 * decides. */
static void
label_follow_direction (GtkWidget *label)
{
  label_set_rtl (label, text_direction (gtk_label_get_text (GTK_LABEL (label))) == 1);
}

/* A long paragraph is shown as a column of labels, each cut once it is
 * long enough: while an answer streams, only its last piece changes, so a
 * frame re-shapes a few hundred characters, not the whole paragraph
 * (shaping, three to four Pango layouts per changed label, is what made
 * frames of long answers slow). A cut prefers the end of a sentence, then a
 * space; text without spaces (code-like or garbled output) is cut at any
 * character, as its lines wrap anywhere anyway. Cuts may fall inside
 * markup: the tags open at a cut are closed at the end of the piece and
 * opened again at the start of the next, so that every piece is markup on
 * its own. Cuts depend only on the text before them, so the pieces already
 * shown keep their text as the paragraph grows. The line before a cut may
 * end early, which reads as a line break. */
#define PIECE_MIN 300
#define PIECE_MAX 600

/* Replays the tags of markup[from, to) onto open (a stack of opening tags). */
static void
follow_tags (GPtrArray  *open,
             const char *from,
             const char *to)
{
  for (const char *p = from; p < to; p++)
    {
      const char *end;

      if (*p != '<' || (end = strchr (p, '>')) == NULL)
        continue;
      if (p[1] == '/')
        {
          if (open->len > 0)
            g_ptr_array_remove_index (open, open->len - 1);
        }
      else if (end[-1] != '/')
        g_ptr_array_add (open, g_strndup (p, (gsize) (end + 1 - p)));
      p = end;
    }
}

static void
append_closing_tags (GString   *s,
                     GPtrArray *open)
{
  for (guint i = open->len; i-- > 0;)
    {
      const char *tag = g_ptr_array_index (open, i);
      gsize name = strcspn (tag + 1, " >/");

      g_string_append (s, "</");
      g_string_append_len (s, tag + 1, (gssize) name);
      g_string_append_c (s, '>');
    }
}

static GPtrArray *
split_markup (const char *markup)
{
  GPtrArray *pieces = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) open = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GString) prefix = g_string_new (NULL); /* tags open where the piece starts */
  const char *start = markup;
  const char *p = markup;
  const char *space_cut = NULL;

  while (*p != '\0')
    {
      gsize len = (gsize) (p - start);
      const char *cut = NULL;
      gsize skip = 0;

      if (*p == '<')
        {
          const char *end = strchr (p, '>');

          if (end == NULL)
            break;
          p = end + 1;
          continue;
        }
      if (*p == ' ' && len >= PIECE_MIN)
        {
          if (p[-1] == '.' || p[-1] == '!' || p[-1] == '?' || p[-1] == ':')
            cut = p, skip = 1;
          else if (space_cut == NULL)
            space_cut = p;
        }
      if (cut == NULL && len >= PIECE_MAX)
        {
          if (space_cut != NULL)
            cut = space_cut, skip = 1;
          else
            cut = p;
        }
      if (cut != NULL)
        {
          GString *piece = g_string_new (prefix->str);

          g_string_append_len (piece, start, (gssize) (cut - start));
          follow_tags (open, start, cut);
          append_closing_tags (piece, open);
          g_ptr_array_add (pieces, g_string_free (piece, FALSE));
          g_string_truncate (prefix, 0);
          for (guint i = 0; i < open->len; i++)
            g_string_append (prefix, g_ptr_array_index (open, i));
          start = p = cut + skip;
          space_cut = NULL;
          continue;
        }
      /* An entity (&amp;, &#x1;) is one character: never cut inside it. */
      if (*p == '&' && strchr (p, ';') != NULL)
        p = strchr (p, ';') + 1;
      else
        p = g_utf8_next_char (p);
    }
  {
    GString *last = g_string_new (prefix->str);

    g_string_append (last, start);
    g_ptr_array_add (pieces, g_string_free (last, FALSE));
  }
  return pieces;
}

static GtkWidget *
paragraph_new (void)
{
  return gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
}

static void
paragraph_update (GtkWidget  *box,
                  const char *markup)
{
  g_autoptr(GPtrArray) pieces = split_markup (markup);
  GtkWidget *label = gtk_widget_get_first_child (box);
  guint i;

  for (i = 0; i < pieces->len; i++)
    {
      const char *piece = g_ptr_array_index (pieces, i);

      if (label == NULL)
        {
          label = text_label_new ();
          gtk_box_append (GTK_BOX (box), label);
        }
      if (g_strcmp0 (gtk_label_get_label (GTK_LABEL (label)), piece) != 0
          || !gtk_label_get_use_markup (GTK_LABEL (label)))
        gtk_label_set_markup (GTK_LABEL (label), piece);
      label = gtk_widget_get_next_sibling (label);
    }
  while (label != NULL)
    {
      GtkWidget *next = gtk_widget_get_next_sibling (label);
      gtk_box_remove (GTK_BOX (box), label);
      label = next;
    }
  /* The paragraph's first letter decides for all its pieces, checked on
   * every update: a streamed answer's first letter may come late. */
  {
    int dir = -1;

    for (label = gtk_widget_get_first_child (box); label != NULL && dir < 0;
         label = gtk_widget_get_next_sibling (label))
      dir = text_direction (gtk_label_get_text (GTK_LABEL (label)));
    for (label = gtk_widget_get_first_child (box); label != NULL;
         label = gtk_widget_get_next_sibling (label))
      label_set_rtl (label, dir == 1);
  }
}

static void
on_copy_clicked (GtkButton *button,
                 GtkWidget *block)
{
  const char *code = g_object_get_data (G_OBJECT (block), KEY_CODE);

  gdk_clipboard_set_text (gtk_widget_get_clipboard (GTK_WIDGET (button)), code ? code : "");
  gtk_widget_activate_action (GTK_WIDGET (button), "win.show-toast", "s", _("Code copied"));
}

static GtkWidget *
code_block_new (Block *b)
{
  GtkWidget *block = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  GtkWidget *header = gtk_box_new (GTK_ORIENTATION_HORIZONTAL, 6);
  GtkWidget *lang = gtk_label_new (b->language ? b->language : _("Code"));
  GtkWidget *copy = gtk_button_new_from_icon_name ("edit-copy-symbolic");
  GtkWidget *scroller = gtk_scrolled_window_new ();
  GtkWidget *label = gtk_label_new (NULL);

  gtk_widget_add_css_class (block, "tern-code-block");
  gtk_widget_add_css_class (block, "card");
  gtk_widget_add_css_class (header, "tern-code-header");
  gtk_widget_add_css_class (lang, "caption");
  gtk_widget_add_css_class (lang, "dim-label");
  gtk_widget_set_hexpand (lang, TRUE);
  gtk_label_set_xalign (GTK_LABEL (lang), 0);
  gtk_widget_add_css_class (copy, "flat");
  gtk_widget_add_css_class (copy, "circular");
  gtk_widget_set_tooltip_text (copy, _("Copy Code"));
  gtk_accessible_update_property (GTK_ACCESSIBLE (copy), GTK_ACCESSIBLE_PROPERTY_LABEL,
                                  _("Copy Code"), -1);
  g_signal_connect (copy, "clicked", G_CALLBACK (on_copy_clicked), block);
  gtk_box_append (GTK_BOX (header), lang);
  gtk_box_append (GTK_BOX (header), copy);

  gtk_label_set_xalign (GTK_LABEL (label), 0);
  gtk_label_set_selectable (GTK_LABEL (label), TRUE);
  gtk_widget_set_focusable (label, FALSE);
  gtk_widget_set_can_focus (label, FALSE); /* as text_label_new's */
  gtk_widget_add_css_class (label, "monospace");
  gtk_widget_add_css_class (label, "tern-code");
  gtk_scrolled_window_set_policy (GTK_SCROLLED_WINDOW (scroller), GTK_POLICY_AUTOMATIC,
                                  GTK_POLICY_NEVER);
  gtk_scrolled_window_set_propagate_natural_height (GTK_SCROLLED_WINDOW (scroller), TRUE);
  gtk_scrolled_window_set_child (GTK_SCROLLED_WINDOW (scroller), label);

  gtk_box_append (GTK_BOX (block), header);
  gtk_box_append (GTK_BOX (block), scroller);
  g_object_set_data (G_OBJECT (block), KEY_LABEL, label);
  return block;
}

static GtkWidget *
table_new (Block *b)
{
  GtkWidget *grid = gtk_grid_new ();

  gtk_widget_add_css_class (grid, "tern-table");
  gtk_grid_set_column_spacing (GTK_GRID (grid), 18);
  gtk_grid_set_row_spacing (GTK_GRID (grid), 6);
  for (guint r = 0; r < b->rows->len; r++)
    {
      GPtrArray *cells = g_ptr_array_index (b->rows, r);
      for (guint c = 0; c < cells->len; c++)
        {
          GtkWidget *label = text_label_new ();
          gtk_label_set_markup (GTK_LABEL (label), g_ptr_array_index (cells, c));
          label_follow_direction (label);
          gtk_grid_attach (GTK_GRID (grid), label, (int) c, (int) r, 1, 1);
        }
    }
  return grid;
}

static GtkWidget *
block_widget_new (Block *b)
{
  GtkWidget *w;

  switch (b->kind)
    {
    case BLOCK_CODE:
      w = code_block_new (b);
      break;
    case BLOCK_RULE:
      w = gtk_separator_new (GTK_ORIENTATION_HORIZONTAL);
      break;
    case BLOCK_TABLE:
      w = table_new (b);
      break;
    case BLOCK_TEXT:
    default:
      w = paragraph_new ();
      break;
    }
  g_object_set_data (G_OBJECT (w), KEY_KIND, GINT_TO_POINTER (b->kind + 1));
  return w;
}

/* Points widget w at block b; the widget must have b's kind. */
static void
block_widget_update (GtkWidget *w,
                     Block     *b)
{
  const char *old = g_object_get_data (G_OBJECT (w), KEY_TEXT);
  const char *key = b->markup ? b->markup : b->key;

  if (g_strcmp0 (old, key) == 0)
    return;
  switch (b->kind)
    {
    case BLOCK_TEXT:
      paragraph_update (w, b->key);
      break;
    case BLOCK_CODE:
      if (b->markup != NULL)
        gtk_label_set_markup (GTK_LABEL (g_object_get_data (G_OBJECT (w), KEY_LABEL)), b->markup);
      else
        gtk_label_set_text (GTK_LABEL (g_object_get_data (G_OBJECT (w), KEY_LABEL)), b->key);
      g_object_set_data_full (G_OBJECT (w), KEY_CODE, g_strdup (b->key), g_free);
      break;
    case BLOCK_RULE:
    case BLOCK_TABLE:
    default:
      break;
    }
  g_object_set_data_full (G_OBJECT (w), KEY_TEXT, g_strdup (key), g_free);
}

void
tern_markdown_render (GtkBox     *box,
                      const char *markdown)
{
  tern_markdown_render_tinted (box, markdown, NULL, NULL);
}

/* What a box shows, so that a growing answer is parsed from its last block
 * on: CommonMark never reopens a closed block, so once a later block has
 * started, the blocks before it are final and so are their widgets. */
typedef struct {
  GString *stable;      /* the source up to the start of the last block */
  GByteArray *mask;     /* drafted flags of stable (empty: untinted) */
  char color[8];
  guint n_widgets;      /* widgets of the blocks in stable */
} Shown;

#define KEY_SHOWN "tern-md-shown"

static void
shown_free (gpointer data)
{
  Shown *shown = data;

  g_string_free (shown->stable, TRUE);
  g_byte_array_unref (shown->mask);
  g_free (shown);
}

/* Byte offset of the start of 1-based line in text, with cmark's line
 * endings (\n, \r\n, \r). */
static gsize
line_offset (const char *text,
             int         line)
{
  const char *p = text;

  for (int l = 1; l < line && *p != '\0'; p++)
    if (*p == '\n' || (*p == '\r' && p[1] != '\n'))
      l++;
  return (gsize) (p - text);
}

void
tern_markdown_render_tinted (GtkBox       *box,
                             const char   *markdown,
                             const guint8 *drafted,
                             const char   *color)
{
  const char *source = markdown ? markdown : "";
  Shown *shown = g_object_get_data (G_OBJECT (box), KEY_SHOWN);
  gsize from = 0;
  guint skip = 0;
  Tint tint;
  g_autoptr(GPtrArray) blocks = NULL;
  GtkWidget *child;
  GtkWidget *prev = NULL;
  int last_line = 0;

  color = color ? color : "#3584e4";
  if (shown == NULL)
    {
      shown = g_new0 (Shown, 1);
      shown->stable = g_string_new (NULL);
      shown->mask = g_byte_array_new ();
      g_object_set_data_full (G_OBJECT (box), KEY_SHOWN, shown, shown_free);
    }
  /* The same source and tint up to the last block: parse from there. A
   * link reference definition ("[x]: url") reaches across blocks, before
   * and after it, so an answer that may hold one is parsed whole. */
  if (shown->stable->len > 0 && strncmp (source, shown->stable->str, shown->stable->len) == 0
      && (drafted != NULL) == (shown->mask->len > 0) && g_str_equal (color, shown->color)
      && (drafted == NULL || memcmp (drafted, shown->mask->data, shown->stable->len) == 0)
      && strstr (source, "]:") == NULL)
    {
      from = shown->stable->len;
      skip = shown->n_widgets;
    }
  tint = (Tint) { .source = source + from, .mask = drafted ? drafted + from : NULL,
                  .color = color };
  blocks = parse_blocks (tint.source, &tint, &last_line);

  child = gtk_widget_get_first_child (GTK_WIDGET (box));
  for (guint i = 0; i < skip && child != NULL; i++)
    {
      prev = child;
      child = gtk_widget_get_next_sibling (child);
    }
  for (guint i = 0; i < blocks->len; i++)
    {
      Block *b = g_ptr_array_index (blocks, i);
      GtkWidget *next = child ? gtk_widget_get_next_sibling (child) : NULL;
      gboolean reusable = child != NULL
        && GPOINTER_TO_INT (g_object_get_data (G_OBJECT (child), KEY_KIND)) == (int) b->kind + 1
        && (b->kind != BLOCK_TABLE
            || g_strcmp0 (g_object_get_data (G_OBJECT (child), KEY_TEXT), b->key) == 0);

      if (!reusable)
        {
          GtkWidget *w = block_widget_new (b);

          if (child != NULL)
            gtk_box_remove (box, child);
          gtk_box_insert_child_after (box, w, prev);
          child = w;
        }
      block_widget_update (child, b);
      prev = child;
      child = next;
    }
  while (child != NULL)
    {
      GtkWidget *next = gtk_widget_get_next_sibling (child);
      gtk_box_remove (box, child);
      child = next;
    }

  /* The new stable point: the start of the last block. */
  if (blocks->len > 0)
    {
      gsize stable = from + line_offset (tint.source, last_line);

      g_string_truncate (shown->stable, 0);
      g_string_append_len (shown->stable, source, (gssize) stable);
      g_byte_array_set_size (shown->mask, 0);
      if (drafted != NULL && stable > 0)
        g_byte_array_append (shown->mask, drafted, (guint) stable);
      g_strlcpy (shown->color, color, sizeof shown->color);
      shown->n_widgets = skip + blocks->len - 1;
    }
  else if (from == 0)
    {
      g_string_truncate (shown->stable, 0);
      shown->n_widgets = 0;
    }
}

/* Lines of at most about this many bytes go in one label (a line longer
 * than that alone): a pasted log of 32 KB is then shaped in pieces, and a
 * changed width re-wraps each piece on its own. The pieces are stacked
 * without spacing, so the cuts do not show. */
#define PLAIN_PIECE 2048

char *
tern_markdown_plain_to_pango (const char *text,
                              gssize      len)
{
  /* Valid UTF-8 first: Pango refuses the whole label otherwise, and a chat
   * file's text may come from anywhere. */
  g_autofree char *valid = g_utf8_make_valid (text != NULL ? text : "", text != NULL ? len : 0);

  return g_markup_escape_text (valid, -1);
}

void
tern_markdown_render_plain (GtkBox     *box,
                            const char *text)
{
  g_autofree char *trimmed = g_strchomp (g_strdup (text ? text : ""));
  const char *p = trimmed;
  GtkWidget *child;
  GtkWidget *pieces;

  g_object_set_data (G_OBJECT (box), KEY_SHOWN, NULL);
  while ((child = gtk_widget_get_first_child (GTK_WIDGET (box))) != NULL)
    gtk_box_remove (box, child);
  /* Only blank lines: nothing, as tern_markdown_render draws nothing. */
  if (p[strspn (p, " \t\r\n")] == '\0')
    return;
  pieces = gtk_box_new (GTK_ORIENTATION_VERTICAL, 0);
  gtk_box_append (box, pieces);
  while (*p != '\0')
    {
      gsize len = strlen (p);
      GtkWidget *label;
      g_autofree char *markup = NULL;

      if (len > PLAIN_PIECE)
        {
          const char *nl = g_strrstr_len (p, PLAIN_PIECE, "\n");

          if (nl == NULL || nl == p)
            nl = strchr (p + 1, '\n');
          if (nl != NULL)
            len = (gsize) (nl - p);
        }
      /* Markup, escaped, so that every label of a message reads alike. */
      markup = tern_markdown_plain_to_pango (p, (gssize) len);
      label = text_label_new ();
      gtk_label_set_markup (GTK_LABEL (label), markup);
      label_follow_direction (label);
      gtk_box_append (GTK_BOX (pieces), label);
      p += len;
      /* The line break a cut fell on is the step to the next label. */
      if (*p == '\n')
        p++;
    }
}
