/*
 * winstream.h -- a big output window sent as it is rendered.
 *
 * A JSON read whose window holds more than WINSTREAM_MIN bytes of output
 * after its cursor (a large max_bytes over a ring that holds that much) is
 * not rendered whole on the event loop: its answer is a chunked stream of
 * sse.h (status and application/json as ever), the session object first,
 * then the window's chunks read from the ring and rendered as the client
 * takes them (--sse-buffer at a time, and one chunk, within a loop turn's
 * share), then the fields after "output".  So one answer never holds the
 * loop for longer than a slice takes, and an unread answer holds
 * --sse-buffer of memory, not the window; it is admitted at its whole
 * rendered size all the same, its bytes not rendered yet counted in the
 * budget of answers (outq.h) until they are.
 *
 * The window is the one a whole answer would hold (API.md): whole chunks
 * up to max_bytes, the first cut when it alone passes it, at most
 * SESSION_WINDOW_CHUNKS, up to the newest chunk at the start.  A chunk the
 * ring evicts before it was sent ends the window before it ("more": true;
 * the next read reports the gap), as does the session's removal.
 * Event loop thread only.
 */
#ifndef AGENTD_WINSTREAM_H
#define AGENTD_WINSTREAM_H

#include <stddef.h>
#include <stdint.h>

#define WINSTREAM_MIN	(4u << 20)	/* bytes of output: windows up to
					   this are answered whole */

struct evhttp_request;
struct proto_session;
struct session;

/* What the answer carries besides the session and its window. */
struct winstream_ask {
	int		 status;	/* 200, 201 */
	uint64_t	 cursor;
	size_t		 max_bytes;
	int		 encoding;	/* PROTO_ENC_BASE64, PROTO_ENC_TEXT */
	int64_t		 written;	/* -1: none */
	int		 duplicate;
	size_t		 object_bytes;	/* the object rendered, at most */
};

/*
 * Answer req with the session object v and its plain window (no head_tail,
 * no strip_ansi) after the cursor, sent as it is rendered, when the window
 * may be big and the request takes a chunked answer (HTTP/1.1, not HEAD).
 * Returns 1 when req was answered: a stream started, or an error (400
 * invalid_cursor, 503 too_busy); 0 when the caller answers it whole.
 */
int	 winstream_answer(struct evhttp_request *, struct session *,
	    const struct proto_session *v, const struct winstream_ask *);

/* Windows being sent now. */
size_t	 winstream_count(void);

#endif /* AGENTD_WINSTREAM_H */
