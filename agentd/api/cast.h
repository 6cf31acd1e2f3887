/*
 * cast.h -- GET /v1/sessions/{id}/cast: a session's output as an
 * asciicast v2 recording (asciinema's format).
 *
 * The answer is a header line, then one event line per chunk the ring
 * holds, oldest first, up to the newest chunk at the start: [t, "o",
 * data] at the chunk's time (seconds since the session's start, the time
 * its first byte was read), [t, "r", "COLSxROWS"] for each resize the log
 * holds, [t, "m", "..."] where the ring evicted output.  Times never
 * decrease.  Bytes that are not UTF-8 become U+FFFD; a character split
 * between two chunks is kept whole.  It is sent as it is rendered, as a
 * stream of sse.h (--sse-buffer at a time), so a big ring never holds the
 * loop or a copy of itself.  A session removed meanwhile ends it there.
 * Event loop thread only.
 */
#ifndef AGENTD_CAST_H
#define AGENTD_CAST_H

struct http_req;
struct proto_buf;
struct session;

/*
 * Answer GET .../cast, HEAD with its head alone (the route checked the
 * method and the session).
 */
void	 cast_answer(struct http_req *, struct session *);
/* The session observer's part: a removed session's casts end. */
void	 cast_session_event(struct session *, int events);
/* agentd_casts_total and agentd_casts into /metrics. */
void	 cast_metrics(struct proto_buf *);

#endif /* AGENTD_CAST_H */
