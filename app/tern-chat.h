/* tern-chat.h: one conversation, its messages with their figures, saved as
 * JSON under $XDG_DATA_HOME/tern/chats/ and exported as Markdown. */
#pragma once

#include <gio/gio.h>

#include "tern-engine-worker.h"

G_BEGIN_DECLS

typedef struct {
  char *role;          /* "user" or "assistant" */
  char *text;
  gboolean has_stats;  /* assistant messages that ran */
  TernStats stats;     /* stats.stop_reason points at stop_reason below */
  char *stop_reason;
  gboolean cancelled;
  char *error;
  /* Flash answers: written from another pinned system prompt than the
   * chat's answer before (the prompt was edited and pinned again). */
  gboolean prompt_changed;
  /* Flash answers: the first after answers written in Chat mode. The turns
   * above stay on screen, and were not sent with its message. */
  gboolean alone;
  /* One flag per byte of text, 1 where the token came from an accepted
   * speculative draft; NULL when none did. Saved as byte runs. */
  GByteArray *drafted;
  /* User messages: the images sent with it (GBytes of the image files);
   * NULL: none. Saved beside the chat (DIR/ID.images/, named by sha256). */
  GPtrArray *images;
  /* Their file names by image (GBytes*, held, -> char*), each hashed once,
   * on the first save that needs it: a long chat with photos is saved after
   * every message. Private to tern-chat.c. */
  GHashTable *image_names;
  /* Images a saved chat names that were missing or changed on disk. */
  guint images_missing;
} TernMessage;

/* Messages and bytes of text the chats' titles have looked at: for the
 * tests that bound a load's work (test-app-units). */
extern guint64 tern_chat_title_work;
extern guint64 tern_chat_move_work;

/* The most messages a chat file may hold: more is refused by a load
 * before json-glib builds its tree (~1 KB a message while a file is read)
 * and by a save (docs/APP.md, "A chat's memory"). */
#define TERN_CHAT_MAX_MESSAGES 100000

#define TERN_TYPE_CHAT (tern_chat_get_type ())
G_DECLARE_FINAL_TYPE (TernChat, tern_chat, TERN, CHAT, GObject)

TernChat    *tern_chat_new                (const char    *mode);
/* NULL with error set when the file is unreadable or not a Tern chat: too
 * large, nested too deep, not JSON, or a member missing or of the wrong type
 * (the message names the file and the member). G_IO_ERROR_NOT_SUPPORTED: a
 * chat of a later format (a newer Tern's), left for it to read. The chat's
 * id is the file's name less ".json", whatever its "id" member says (a
 * copy made by a sync tool or by hand is a chat of its own). */
TernChat    *tern_chat_load               (const char    *path,
                                           GError       **error);
/* Writes DIR/ID.json atomically (temporary file, then rename). A chat over
 * the 64 MiB that tern_chat_load reads is refused (G_IO_ERROR_MESSAGE_TOO_LARGE)
 * and its file left as it was. A file there now that is not a chat of a
 * format this version writes (a newer Tern's, brought by a sync tool; one
 * that cannot be read) is never replaced: the chat takes a new id and is
 * saved under it (a g_message says so), the file and its pictures' folder
 * left as they are. */
/* tern_chat_load, but a chat of a later format is read as a stand-in for
 * it (tern_chat_is_newer): known by its file's name, titled by its "title"
 * (else that name), dated by the file, with its messages only when this
 * version reads every one (a role "user" or "assistant" and a string
 * "content"; else none: a page explains it). It is never saved
 * (tern_chat_save fails, saving in the background does nothing) nor
 * deleted by tern_chat_delete_file (which fails): only
 * tern_chat_trash_newer_file removes its file. */
TernChat    *tern_chat_load_or_newer      (const char    *path,
                                           GError       **error);
gboolean     tern_chat_is_newer           (TernChat      *self);
/* A chat of tern_chat_load_listed whose file is larger than this version
 * reads (and does not say newer): listed and handled as a newer Tern's
 * chat (tern_chat_is_newer is TRUE), with nothing of it read. */
gboolean     tern_chat_is_too_large       (TernChat      *self);
/* A newer Tern's chat that tern_chat_load_listed read from its head only
 * (no messages): why. */
typedef enum {
  TERN_CHAT_HEAD_ONLY_NO,     /* read whole, or not a newer Tern's chat */
  TERN_CHAT_HEAD_ONLY_LARGE,  /* its file is larger than this version reads */
  TERN_CHAT_HEAD_ONLY_UNREAD, /* past its head, this version's reader refuses it */
} TernChatHeadOnly;
TernChatHeadOnly tern_chat_get_head_only  (TernChat      *self);
/* Why tern_chat_load_listed read no chat from a file, and so what the
 * list does with it. */
typedef enum {
  TERN_CHAT_UNREAD_BROKEN, /* a file this version can judge, and broken: set aside */
  TERN_CHAT_UNREAD_BUSY,   /* changed in the last TERN_CHAT_QUIET_SECONDS, or this
                            * process out of memory or descriptors: read again later */
  TERN_CHAT_UNREAD_KEEP,   /* not this version's to judge (not a regular file, a link,
                            * not readable): left as it is (one larger than it reads
                            * is listed: tern_chat_is_too_large) */
  TERN_CHAT_UNREAD_GONE,   /* no longer there */
} TernChatUnread;
#define TERN_CHAT_QUIET_SECONDS 10
/* tern_chat_load_or_newer for the list of chats, at NOW (seconds since the
 * epoch): also a newer Tern's chat whose head says so but that is larger
 * than this version reads or broken for its reader. NULL with the error
 * and *UNREAD set when it reads no chat. */
TernChat    *tern_chat_load_listed        (const char    *path,
                                           gint64         now,
                                           TernChatUnread *unread,
                                           GError       **error);
/* The list's record of a file it left out (TERN_CHAT_UNREAD_KEEP, or
 * still changing after a minute): its kind as it is now, not following a
 * link ("fifo", "folder", "link", "file", "other", "gone"), and NAME
 * (g_strescape'd: one line whatever its bytes), "KIND NAME". */
char        *tern_chat_left_out_key       (const char    *dir,
                                           const char    *name);
/* How many of KEYS (tern_chat_left_out_key) the record in the file STATE
 * does not hold: the files the user was not told of yet. The record is
 * then updated (rewritten only when it changes): with ALL (KEYS are every
 * file left out, a start's) it becomes KEYS, so a file that is gone or
 * readable again is forgotten and said again if it comes back; else
 * (another look at some files) KEYS are added. A record that cannot be
 * read counts as empty (each is told again, not never). */
guint        tern_chat_left_out_news      (const char    *state,
                                           GPtrArray     *keys,
                                           gboolean       all);
/* Moves the file of a chat from tern_chat_load_or_newer (and its pictures'
 * folder) to the trash, from where the user can restore it: this version
 * cannot write it back. TRUE if it is gone already; fails, leaving it, if
 * the file there is no longer a newer Tern's chat. */
gboolean     tern_chat_trash_newer_file   (TernChat      *self,
                                           const char    *dir,
                                           GError       **error);
gboolean     tern_chat_save               (TernChat      *self,
                                           const char    *dir,
                                           GError       **error);
/* The same on a background thread, so that the main loop never waits on
 * the disk (an fsync can take tens of milliseconds): the JSON is taken now;
 * writes run one at a time, in the order asked. On failure, error_func runs
 * on the caller's thread-default main context with the message, if owner (a
 * weak reference) is still alive; and with a notice when the chat was saved
 * under a new id (see tern_chat_save), which the chat has taken by then
 * (and by the time tern_chat_wait_saves returns). */
typedef void (*TernChatSaveError) (GObject *owner, const char *message);
void         tern_chat_save_in_background (TernChat      *self,
                                           const char    *dir,
                                           GObject       *owner,
                                           TernChatSaveError error_func);
/* Blocks until every background save asked so far is on disk. */
void         tern_chat_wait_saves         (void);
/* Removes DIR/ID.json and the pictures' folder; a file there that is not
 * this version's chat (see tern_chat_save) is left, with the folder. */
gboolean     tern_chat_delete_file        (TernChat      *self,
                                           const char    *dir,
                                           GError       **error);
char        *tern_chat_to_json            (TernChat      *self);
char        *tern_chat_to_markdown        (TernChat      *self);

const char  *tern_chat_get_id             (TernChat      *self);
/* A chat read from a copy of another's file (see tern_chat_load) and not
 * saved since may have pictures only in that chat's folder: its id, which
 * tern_chat_delete_file of that chat would take them from. NULL: none. */
const char  *tern_chat_get_images_from    (TernChat      *self);
/* The first user message, shortened; "New Chat" while there is none. */
const char  *tern_chat_get_title          (TernChat      *self);
/* A title chosen by the user (saved with the chat); NULL or blank: back to
 * the first user message. */
void         tern_chat_set_title          (TernChat      *self,
                                           const char    *title);
gboolean     tern_chat_has_custom_title   (TernChat      *self);
const char  *tern_chat_get_mode           (TernChat      *self);
void         tern_chat_set_mode           (TernChat      *self,
                                           const char    *mode);
const char  *tern_chat_get_model          (TernChat      *self);
void         tern_chat_set_model          (TernChat      *self,
                                           const char    *model_description);
const char  *tern_chat_get_draft          (TernChat      *self);
gboolean     tern_chat_set_draft          (TernChat      *self,
                                           const char    *text);
const char  *tern_chat_get_system_prompt  (TernChat      *self);
void         tern_chat_set_system_prompt  (TernChat      *self,
                                           const char    *system_prompt);
gint64       tern_chat_get_updated        (TernChat      *self);

/* Messages before this index no longer fit the model's context: chat mode
 * sends the ones from here on (the system prompt always). */
guint        tern_chat_get_context_start  (TernChat      *self);
void         tern_chat_set_context_start  (TernChat      *self,
                                           guint          index);
guint        tern_chat_get_n_messages     (TernChat      *self);
TernMessage *tern_chat_get_message        (TernChat      *self,
                                           guint          index);
TernMessage *tern_chat_append             (TernChat      *self,
                                           const char    *role,
                                           const char    *text);
/* Removes the messages from index on and hands them over (an array that
 * frees them), so that they can be put back with tern_chat_restore. */
GPtrArray   *tern_chat_take_from          (TernChat      *self,
                                           guint          index);
/* Appends messages taken by tern_chat_take_from; empties the array. */
void         tern_chat_restore            (TernChat      *self,
                                           GPtrArray     *messages);
void         tern_chat_truncate           (TernChat      *self,
                                           guint          n_messages);
void         tern_message_set_stats       (TernMessage   *message,
                                           const TernStats *stats);
/* The answer wrote nothing: it was stopped before its first token, or
 * refused (an error before it; an answer cut off by a full context is not
 * refused). Such an answer cannot show that the system prompt changed, nor
 * that the turns above were left out: the first answer written does. */
gboolean     tern_message_wrote_nothing   (const TernMessage *message);
/* Copies drafted[0..strlen (text)) (NULL or all zero: none). */
void         tern_message_set_drafted     (TernMessage   *message,
                                           const guint8  *drafted);
/* "12 tokens · 85.3 tok/s · first token 40 ms · prompt 23 tokens in 12 ms" */
char        *tern_message_format_stats    (const TernMessage *message);
/* Marks a change: the title may have changed and the file needs saving. */
void         tern_chat_touch              (TernChat      *self);

G_END_DECLS
