/* Splitting a thinking model's answer into its reasoning and its reply
 * (docs/SERVER.md, "Reasoning"). */
#pragma once

#include <glib.h>

/* A streaming splitter: an answer that opens with "<think>" (after
 * optional whitespace) has everything up to "</think>" as reasoning and
 * the rest, without its leading newlines, as content; any other answer is
 * all content. Text that may still turn out to be a marker is held back
 * until the next feed or the finish. */
typedef struct tern_reasoning {
    int state;
    GString *hold;
} tern_reasoning;

void tern_reasoning_init(tern_reasoning *r);
void tern_reasoning_clear(tern_reasoning *r);
/* Appends what text settles to content and reasoning. */
void tern_reasoning_feed(tern_reasoning *r, const char *text, GString *content,
                         GString *reasoning);
/* The end of the answer: whatever is held back goes where it was heading
 * (an unclosed <think> block stays reasoning). */
void tern_reasoning_finish(tern_reasoning *r, GString *content, GString *reasoning);
