/* tern-context.h: how much context a session gets, and which turns of a
 * conversation still fit in it. Plain arithmetic, no engine calls. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The default cap of the automatic context: longer contexts cost memory
 * (the KV cache) and time per token even when unused. */
#define TERN_CONTEXT_AUTO_MAX 16384
/* The share of physical memory the automatic context's KV cache may take. */
#define TERN_CONTEXT_MEMORY_DIVISOR 8

/* The context (tokens) a session gets when the user has not chosen one:
 * the model's training context, at most TERN_CONTEXT_AUTO_MAX, and no more
 * than a KV cache of 1/TERN_CONTEXT_MEMORY_DIVISOR of mem_bytes holds;
 * rounded down to a multiple of 256, at least 512 (or the training context
 * when smaller). n_ctx_train <= 0: unknown (taken as the cap). */
int      tern_context_auto              (int          n_ctx_train,
                                         guint64      kv_bytes_per_token,
                                         guint64      mem_bytes);
/* Bytes of physical memory (0 when unknown). With TERN_MEMINFO set (tests),
 * the MemTotal of that file, which is in /proc/meminfo's format. */
guint64  tern_context_physical_memory   (void);
/* Bytes of memory a new program can have without swapping: MemAvailable of
 * /proc/meminfo (or of the file TERN_MEMINFO names); 0 when unknown. */
guint64  tern_context_available_memory  (void);
/* The value of `key` ("MemAvailable") in /proc/meminfo's format, in bytes;
 * 0 when absent or garbled. */
guint64  tern_context_parse_meminfo     (const char  *text,
                                         const char  *key);

typedef enum {
  TERN_CONTEXT_FIT_UNKNOWN,  /* no size or no memory figure */
  TERN_CONTEXT_FIT_YES,
  TERN_CONTEXT_FIT_TIGHT,    /* fits, with less than a quarter to spare */
  TERN_CONTEXT_FIT_NO,
} TernContextFit;

/* Whether a model fits in `available` bytes: its files (file_bytes) plus
 * its KV cache at the context tern_context_auto gives it on a machine of
 * `physical` bytes. *need gets the bytes it takes (the files alone when
 * kv_bytes_per_token is 0, unknown), *n_ctx that context (0: unknown). */
TernContextFit tern_context_fit         (guint64      file_bytes,
                                         int          n_ctx_train,
                                         guint64      kv_bytes_per_token,
                                         guint64      physical,
                                         guint64      available,
                                         guint64     *need,
                                         int         *n_ctx);

/* Template framing per message (role header and end of turn), added to the
 * tokens of its text when estimating a conversation's length. */
#define TERN_CONTEXT_MESSAGE_FRAMING 8

/* Which messages of a conversation to send: tokens[i] is message i's cost
 * (its text and framing), roles[i] its role; fixed is what every request
 * has besides them (the system prompt, the assistant header); reserve is
 * the room kept for the answer. Returns the index of the first message to
 * send: 0 when everything fits, else the start of the oldest turn (a user
 * message) kept once whole turns are dropped from the front until the rest
 * plus fixed plus reserve fits in three quarters of n_ctx (room for the
 * next turns, which then reuse the cache). Never past the last user
 * message. */
guint    tern_context_first_kept        (const int          *tokens,
                                         const char * const *roles,
                                         guint               n,
                                         int                 fixed,
                                         int                 n_ctx,
                                         int                 reserve);

G_END_DECLS
