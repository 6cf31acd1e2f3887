/*
 * process.h -- envd's process.Process service on agentd's sessions: every
 * process it starts is a session (session.h), tagged, listed and signalled
 * through agentd's own API too.  Event loop thread only.
 */
#ifndef AGENTD_ENVD_PROCESS_H
#define AGENTD_ENVD_PROCESS_H

struct config;
struct event_base;
struct session;

/* Register the methods (connect.h): keepalives on base, cfg's ring size. */
void	process_register(struct event_base *, const struct config *);
/* Free every record (at the end, after session_remove_all()). */
void	process_free_all(void);
/* The session observer's part: feed, or end, the processes' streams. */
void	process_session_event(struct session *, int events);

#endif /* AGENTD_ENVD_PROCESS_H */
