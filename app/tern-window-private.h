/* tern-window-private.h: the chat window's insides, as GNOME Text Editor
 * keeps its -private.h: the instance struct and the functions that
 * tern-window.c and tern-window-actions.c share (prefixed _tern_window_),
 * and what tests read and drive (tests/app), apart from the window's API in
 * tern-window.h. Not for the rest of the app. */
#pragma once

#include "tern-composer.h"
#include "tern-engine-worker.h"
#include "tern-message-row.h"
#include "tern-window.h"

G_BEGIN_DECLS

#define TERN_N_DRAFTERS 4 /* TernDrafterKind's values */

/* Where a model came from, which says the drafters it offers
 * (tern-window-speculation.c). */
typedef struct {
  char *tag;                   /* the store tag it was opened from; NULL: a file from disk */
  gboolean remote;             /* a server's model: speculation is the server's */
  TernDrafterKind draft_kind;  /* the tag's draft package: its drafter */
  char *draft_path;            /* and file (NULL: the tag has no draft) */
  gboolean speculation;        /* the tag's flags.speculation */
  gboolean single_turn;        /* the tag's flags.single_turn */
  gboolean apply_flags;        /* chosen now in the Models window: its flags set the
                                  mode and speculation (not when reopened at start) */
} TernModelOrigin;

struct _TernWindow {
  AdwApplicationWindow parent_instance;

  /* template */
  AdwToastOverlay *toast_overlay;
  AdwLeaflet *leaflet;
  GtkBox *sidebar;
  GtkListBox *chat_list;
  GtkBox *content;
  GtkButton *back_button;
  AdwWindowTitle *window_title;
  GtkBox *speculation_box;
  GtkToggleButton *speculation_toggle;
  GtkToggleButton *speculation_toggle_narrow;
  GtkMenuButton *mode_menu_button;
  GtkButton *server_indicator;
  GtkDropDown *drafter_dropdown;
  AdwFlap *flap;
  GtkStack *main_stack;
  AdwStatusPage *loading_page;
  AdwStatusPage *newer_page;
  GtkSpinner *loading_spinner;
  GtkProgressBar *loading_progress;
  char *loading_path;      /* the file being loaded */
  GtkStack *transcript_stack;
  GtkScrolledWindow *transcript_scroller;
  GtkRevealer *jump_revealer;
  GtkButton *jump_button;
  GtkBox *message_box;
  TernStatsBar *stats_bar;
  TernComposer *composer;
  TernPinEditor *pin_editor;
  int n_ctx;               /* the session's context, once pinned */
  int n_pin;
  guint64 kv_bytes;
  guint sent_start;        /* the first message the request in flight sent */

  GSettings *settings;
  TernEngineWorker *worker;
  GListStore *chats;
  TernChat *chat;
  char *chats_dir;

  guint load_id;
  guint pin_id;
  guint count_id;
  guint gen_id;
  guint drafter_id;        /* the drafter being prepared */
  guint count_timeout;
  /* Chat files changed a moment ago when the list was read (a sync tool
   * writing them): read again once left alone (load_chats). */
  GPtrArray *chats_busy;   /* their names */
  guint chats_busy_timeout;
  guint chats_busy_tries;

  gboolean model_loaded;
  char *model_description;
  char *model_path; /* the loaded model's file (Preferences' Hardware page) */
  char *pin_text;          /* the text of the pin request in flight */
  /* The last pin failed: the engine refuses answers until one succeeds, so
   * the next send pins again even when the text is the one pinned before. */
  gboolean pin_failed;
  /* "System prompt changed" owed to the next answer: the one Regenerate
   * replaces had it, or an answer that wrote nothing did (on_finished). */
  gboolean regenerated_prompt_changed;
  /* The same for TernMessage.alone: owed to the next answer written. */
  gboolean regenerated_alone;
  gboolean alone_carried;
  gboolean streaming_carried; /* the answer streaming took it over */
  char *streaming_prompt;     /* the system prompt it is written from */
  /* Regenerate under settings that repeat an answer (greedy, or a fixed
   * seed): the answer replaced, and why, so that the same text again is
   * explained rather than looking like a button that did nothing. */
  char *regenerated_text;
  gboolean regenerated_cancelled; /* it was stopped: the new one goes on past it */
  /* The answer Regenerate replaces, back in place if the new one writes
   * nothing (refused, stopped before its first token). */
  GPtrArray *regenerated_taken;
  const char *regenerated_same_reason;
  char *last_error;
  guint streaming_index;   /* message index of the answer being generated */
  TernMessageRow *streaming_row;
  gboolean stick_to_bottom; /* follow the end: the user has not scrolled up */
  gboolean scrolling;      /* our own change of the scroll position */
  double seen_value;        /* the scroll position at the last value-changed */
  double seen_upper;        /* the bounds last announced (notify::upper, */
  double seen_page;         /* notify::page-size) */
  guint follow_tick;       /* the frame callback that keeps the end in view */
  int settled_frames;      /* frames the end has stayed in view */
  guint first_row;         /* the chat's first message drawn: earlier ones wait (APP.md) */
  guint earlier_idle;      /* draws the batch before first_row */
  guint anchor_tick;       /* keeps the view on its messages while a batch lands above */
  GtkWidget *anchor_row;   /* the row the view stays on (weak) */
  double anchor_offset;    /* its top's distance below the view's top, to keep */
  int anchor_frames;       /* frames that distance has held */
  GPtrArray *toasts;       /* shown or waiting */
  gint64     toast_dismissed_ft; /* when a dismissal of a toast on screen last reached
                                  * the overlay, in the frame clock's time */
  gint64     toast_frame_ft;     /* the last frame follow_toast_lift saw */
  GtkCssProvider *toast_lift; /* this window's toasts kept above its composer */
  int        toast_lift_px;
  int        toast_left_px;
  int        toast_right_px;
  int        toast_fit_px;    /* the width the toasts' labels were fitted to */
  guint      toast_lift_tick; /* follow_toast_lift, while a toast is up */
  int        transcript_margin_px; /* the message box's own bottom margin */
  GHashTable *deleted;     /* id -> TernChat deleted with an Undo toast still possible */
  /* Edit Last: the messages taken back, while its toast offers Undo. */
  TernChat *edit_chat;
  GPtrArray *edit_taken;
  guint edit_index;
  AdwToast *edit_toast;
  /* What Edit Last put in the composer (NULL: it left the composer as it
   * was) and what the composer held before, for Undo. */
  char *edit_put_text;
  guint edit_put_images;
  char *edit_before_text;
  guint edit_before_images;
  /* The composer holds an edited message that was refused (too long), and
   * the turn it was to replace is back: Edit Message keeps the edited text
   * rather than the old question. Until the next generation or chat. */
  gboolean edit_draft_kept;
  /* The last "the conversation outgrew the context" toast, until it is
   * dismissed: the next one replaces it instead of queueing behind it. */
  AdwToast *context_toast;
  /* The last one added to the overlay, which may still be hiding; and the
   * retry of a new one that waits for it to be gone. */
  AdwToast *context_toast_shown;
  guint context_toast_wait;
  GtkWidget *chat_menu;    /* the chat list's context menu (a GtkPopoverMenu) */
  int server_port;         /* what the running (or starting) server was asked for */
  char *server_key;
  gboolean server_asked;

  /* Speculation (tern-window-speculation.c). */
  GMenu *speculation_menu;   /* the main menu's section: the switch, then the drafters */
  TernModelOrigin *origin;   /* the loaded model's (NULL: none yet, as from disk) */
  TernModelOrigin *loading_origin; /* the model being loaded's */
  TernDrafterKind offered[TERN_N_DRAFTERS]; /* the header's drafters, in its order */
  guint n_offered;
  TernDrafterKind drafter_kind; /* the one chosen */
  gboolean refused[TERN_N_DRAFTERS]; /* refused for the loaded model until its file changes */
  gboolean syncing_drafters; /* the list is being rebuilt: its selection changes are ours */
};

/* Shared by tern-window.c and tern-window-actions.c. */
void           _tern_window_actions_init         (TernWindow     *self);
/* Enables the actions the window's state allows. */
void           _tern_window_update_actions       (TernWindow     *self);
/* Edit Last's Undo is over: its toast goes and the messages kept for it. */
void           _tern_window_end_edit             (TernWindow     *self);
/* A message's text and images into the composer, in place of its own. */
void           _tern_window_composer_take        (TernWindow     *self,
                                                  TernMessage    *m);
/* A message's text and images into the composer, ahead of what it holds
 * (a blank line between): nothing the user wrote is written over. */
void           _tern_window_composer_add         (TernWindow     *self,
                                                  TernMessage    *m);
/* A toast showing `text` as it is (escaped from the title's markup). */
AdwToast      *_tern_window_toast_new            (TernWindow     *self,
                                                   const char     *text);
/* The text a toast made by _tern_window_toast_new shows. */
const char    *_tern_window_toast_get_text       (AdwToast       *toast);
void           _tern_window_toast                (TernWindow     *self,
                                                  const char     *text);
/* Remembers message as the last error and shows it in a toast. */
/* Whether a toast up or waiting says what MESSAGE ends with. */
gboolean       _tern_window_toast_ends           (TernWindow     *self,
                                                  const char     *message);
void           _tern_window_set_error            (TernWindow     *self,
                                                  const char     *message);
void           _tern_window_keep_toast           (TernWindow     *self,
                                                  AdwToast       *t);
/* Every toast is shown through here, once kept (_tern_window_keep_toast
 * connects first, so that its hold on an early dismissal comes before any
 * other handler): above the composer. */
void           _tern_window_add_toast            (TernWindow     *self,
                                                  AdwToast       *t);
void           _tern_window_on_toast_dismissed   (AdwToast       *t,
                                                  TernWindow     *self);
void           _tern_window_on_save_error        (GObject        *owner,
                                                  const char     *message);
gboolean       _tern_window_is_generating        (TernWindow     *self);
void           _tern_window_save_chat            (TernWindow     *self);
void           _tern_window_show_chat            (TernWindow     *self,
                                                  TernChat       *chat);
void           _tern_window_new_chat             (TernWindow     *self);
gboolean       _tern_window_chat_in_list         (TernWindow     *self,
                                                  TernChat       *chat,
                                                  guint          *position);
void           _tern_window_select_current_chat  (TernWindow     *self);
/* tern-window-engine.c: the worker's signals connected to the window's
 * handlers; the pin editor's "changed" (a token count, once typing pauses). */
void           _tern_window_engine_connect       (TernWindow     *self);
void           _tern_window_on_pin_editor_changed (TernWindow    *self);
/* tern-window.c, for tern-window-engine.c. */
TernMessageRow *_tern_window_add_row             (TernWindow        *self,
                                                  const TernMessage *m);
void           _tern_window_update_context_gauge (TernWindow     *self);
void           _tern_window_show_last_figures (TernWindow     *self);
/* The context's own toast: one at a time (docs/APP.md). */
void           _tern_window_show_context_toast   (TernWindow     *self,
                                                  const char     *text);
void           _tern_window_apply_server         (TernWindow     *self);
void           _tern_window_scroll_to_end        (TernWindow     *self);
void           _tern_window_delete_chat          (TernWindow     *self,
                                                  TernChat       *chat);
void           _tern_window_rename_chat          (TernWindow     *self,
                                                  TernChat       *chat);
void           _tern_window_mark_last_rows       (TernWindow     *self);
void           _tern_window_remove_rows_from     (TernWindow     *self,
                                                  guint           index);
void           _tern_window_update_main_page     (TernWindow     *self);
const char    *_tern_window_chat_page            (TernWindow     *self);
void           _tern_window_request_pin          (TernWindow     *self,
                                                  const char     *text);
void           _tern_window_start_generation     (TernWindow     *self);
void           _tern_window_send_text            (TernWindow     *self,
                                                  const char     *text);
void           _tern_window_end_loading          (TernWindow     *self);

/* Shows the stats bar's legend of the tint where a tint can be seen. */
void           _tern_window_update_tint_legend   (TernWindow     *self);

/* tern-window-speculation.c */
void             _tern_window_speculation_init         (TernWindow      *self);
/* After the model being loaded (its origin set below) loaded. */
void             _tern_window_speculation_model_loaded (TernWindow      *self);
TernDrafterKind  _tern_window_selected_drafter         (TernWindow      *self);
/* path and tag as the Models window's "use-model" gives them (tag NULL: a
 * file from disk, or a server's model reference). */
TernModelOrigin *_tern_model_origin_new                (const char      *path,
                                                        const char      *tag,
                                                        gboolean         apply_flags);
void             _tern_model_origin_free               (TernModelOrigin *origin);
/* Takes origin. */
void             _tern_window_set_loading_origin       (TernWindow      *self,
                                                        TernModelOrigin *origin);

/* For tests. */

/* Images for the next message: the drop target on the chat (files, file
 * lists, textures), how many are attached, whether the model can read them,
 * and the cost preview line. */
GtkDropTarget *tern_window_get_drop_target       (TernWindow     *self);
/* Attached, decoded or still decoding (tern_window_is_attaching). */
guint          tern_window_get_n_attachments     (TernWindow     *self);
gboolean       tern_window_is_attaching          (TernWindow     *self);
TernComposer  *tern_window_get_composer          (TernWindow     *self);
gboolean       tern_window_has_vision            (TernWindow     *self);
const char    *tern_window_get_image_cost_text   (TernWindow     *self);

/* Closes the toasts shown or waiting (tests take screenshots). Only for
 * toasts that have been on screen a while: dismissing one while its show
 * animation runs crashed libadwaita 1.2 in the tests. */
void           tern_window_dismiss_toasts        (TernWindow     *self);

/* State. */
gboolean       tern_window_has_model             (TernWindow     *self);
gboolean       tern_window_is_loading            (TernWindow     *self);
gboolean       tern_window_is_pinning            (TernWindow     *self);
gboolean       tern_window_is_generating         (TernWindow     *self);
/* A draft model or DFlash draft chosen in the header is being loaded. */
gboolean       tern_window_is_preparing_drafter  (TernWindow     *self);
/* "no-model", "loading" or "chat". */
const char    *tern_window_get_page              (TernWindow     *self);
/* The "newer" page's text: why the chat shown cannot be read here. */
const char    *tern_window_get_newer_text        (TernWindow     *self);
const char    *tern_window_get_model_description (TernWindow     *self);
const char    *tern_window_get_last_error        (TernWindow     *self);
TernChat      *tern_window_get_chat              (TernWindow     *self);
GListModel    *tern_window_get_chats             (TernWindow     *self);
/* The transcript's GtkScrolledWindow, and its "jump to the end" button
 * while it is offered (the user scrolled up), else NULL. */
GtkWidget     *tern_window_get_transcript_scroller (TernWindow   *self);
GtkWidget     *tern_window_get_jump_button       (TernWindow     *self);
/* The sidebar's list of chats (a GtkListBox). */
GtkWidget     *tern_window_get_chat_list         (TernWindow     *self);
TernPinEditor *tern_window_get_pin_editor        (TernWindow     *self);
TernStatsBar  *tern_window_get_stats_bar         (TernWindow     *self);
/* The speculation toggle and drafter choice (one linked box). */
GtkWidget     *tern_window_get_speculation_box   (TernWindow     *self);
/* The drafters the header offers, as the action win.drafter names them
 * ("prompt-lookup", "mtp"...), in its order (g_strfreev). */
char         **tern_window_get_drafters          (TernWindow     *self);
/* The store tag the loaded model was opened from; NULL: from disk. */
const char    *tern_window_get_model_tag         (TernWindow     *self);
/* The text the transcript shows for message index (the rendered rows). */
const char    *tern_window_get_row_text          (TernWindow     *self,
                                                  guint           index);
/* The rows drawn: a long chat's earlier messages are drawn as the view
 * nears them (first the last TRANSCRIPT_BATCH). */
guint          tern_window_get_n_rows            (TernWindow     *self);
/* No batch of earlier messages waiting to be drawn or landing. */
gboolean       tern_window_transcript_is_settled (TernWindow     *self);
/* The transcript row of message index (NULL past the end, or not drawn yet). */
GtkWidget     *tern_window_get_row               (TernWindow     *self,
                                                  guint           index);
void           tern_window_set_composer_text     (TernWindow     *self,
                                                  const char     *text);
char          *tern_window_get_composer_text     (TernWindow     *self);

G_END_DECLS
