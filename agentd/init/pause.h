/*
 * pause.h -- the work of POST /v1/sandbox/pause: sync() the file systems
 * on a thread of its own, so that a file system that does not answer (a
 * FUSE daemon stopped, an NFS server gone) holds only the callers that
 * asked, never the loop.  One sync runs at a time; a caller that comes
 * while one runs waits for the next, which starts when that one ends (a
 * sync that started before the caller's writes would not cover them).
 * Event loop thread only.
 */
#ifndef AGENTD_PAUSE_H
#define AGENTD_PAUSE_H

#include <stdint.h>

struct event_base;
struct pause_wait;

/* A sync that started after pause_start() ended, after ms. */
typedef void (*pause_done_fn)(void *arg, int64_t ms);

/* Take the syncs' results on base. */
void	 pause_init(struct event_base *);
/* Stop taking results (after the loop); a sync still running is left. */
void	 pause_free(void);

/* Ask for a sync; done(arg, ms) is called on the loop once, unless
   cancelled first. */
struct pause_wait *pause_start(pause_done_fn done, void *arg);
/* Give up a wait: its done is never called. */
void	 pause_cancel(struct pause_wait *);

#endif /* AGENTD_PAUSE_H */
