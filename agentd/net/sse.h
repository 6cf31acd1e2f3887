/*
 * sse.h -- Server-Sent Events: a GET with "Accept: text/event-stream" gets
 * a stream of events (id:, event:, data: JSON) instead of one answer.
 *
 * A stream is pulled, never pushed: its producer's pull function writes
 * frames with sse_send() while sse_room() says the stream's unsent bytes
 * (the connection's output buffer and the frames not yet handed to it) are
 * under --sse-buffer, and is called again when they have drained, or when
 * the producer calls sse_kick() because it has news.  So a slow reader
 * costs at most --sse-buffer (and one frame) of memory, and never blocks
 * the loop; what it has not read stays in the producer's ring, and when
 * the ring has moved on the producer sends a gap event.  A comment line
 * goes out every --sse-keepalive.  A client that goes away is seen at once
 * (EV_CLOSED), and its stream is freed: the producer's gone function runs.
 *
 * The output of a session (GET /v1/sessions/{id}) is streamed here:
 * output events (data: the chunk object of a JSON window), gap events
 * ({"dropped_chunks": N}) and, once the session exited and its output was
 * sent, an exit event (data: the session object), after which the stream
 * ends.  The event feed's streams are events.c's.
 * Event loop thread only.
 */
#ifndef AGENTD_SSE_H
#define AGENTD_SSE_H

#include <stddef.h>
#include <stdint.h>

struct http_req;
struct proto_buf;
struct ring;
struct ring_chunk;
struct ring_read_result;
struct ring_reader;
struct session;
struct sse;

/* Write frames while sse_room(); called again when the stream drained. */
typedef void (*sse_pull_fn)(struct sse *, void *arg);
/* The stream's client went away and the stream is freed. */
typedef void (*sse_gone_fn)(void *arg);

/* Set the bounds: --sse-buffer, --sse-keepalive, --idle-timeout. */
void	 sse_init(struct event_base *, size_t buffer_bytes,
	    int64_t keepalive_ms, int64_t idle_timeout_ms);
/* Set the encoding of streams that name none: --encoding (PROTO_ENC_*). */
void	 sse_set_encoding(int encoding);

/* Whether a request asks for a stream: a GET accepting text/event-stream. */
int	 sse_wanted(const struct http_req *);
/*
 * The Last-Event-ID of a reconnecting client into *id: 1 when given, 0
 * when absent, -1 when it is not a decimal id.
 */
int	 sse_last_event_id(const struct http_req *, uint64_t *id);

/* Whether the query string has key (a cursor given, say). */
int	 sse_query_has(const struct http_req *, const char *key);

/*
 * Answer the request with a stream (200, text/event-stream) whose frames
 * come from pull(s, arg), from the first sse_kick() on.  gone(arg) runs
 * when the client goes away.
 */
struct sse *sse_start(struct http_req *, sse_pull_fn, sse_gone_fn,
	    void *arg);
/*
 * The same for a stream of raw bytes of a content type with a status
 * (Connect's application/connect+json, envd.h; a big output window,
 * winstream.h): no keepalive comment lines; frames are queued with
 * sse_send_raw(), not sse_send().
 */
struct sse *sse_start_raw(struct http_req *, int status, const char *type,
	    sse_pull_fn, sse_gone_fn, void *arg);
/*
 * The stream will queue about n more bytes, admitted already (outq.h's
 * outq_admit()): they count in the budget of answers held until queued,
 * and the stream's pulls are not held back by the budget meanwhile.
 */
void	 sse_promise(struct sse *, size_t n);
/*
 * Tie a stream of sse_start_raw() to a session: when the session is
 * removed, removed(arg) runs (arg: the stream's), once, from
 * sse_session_event(); it ends the stream, or not, as it likes.
 */
void	 sse_tie(struct sse *, struct session *, sse_gone_fn removed);
/* Queue raw bytes on a stream of sse_start_raw(). */
void	 sse_send_raw(struct sse *, const void *, size_t);
/*
 * A raw stream fed from a ring (a cast, a window, sse_feed()): its reader,
 * chunk array and output buffer; limit(arg, room, &at) says where the next
 * read starts and how many bytes it may take for room bytes of the stream;
 * take(arg, b, res) renders a read into b and returns 1 when the stream
 * ends with it.
 */
struct sse_feed {
	struct ring_reader	*reader;
	struct ring_chunk	*chunks;
	size_t			 nchunks;
	struct proto_buf	*out;
	size_t			(*limit)(void *, size_t, uint64_t *);
	int			(*take)(void *, struct proto_buf *,
				    const struct ring_read_result *);
};
/*
 * Send ring's chunks on the stream while it has room: read, render, send.
 * Returns 1 when the stream ends (take's word, the ring's end, or out of
 * memory for the read), 0 when the room ran out first.
 */
int	 sse_feed(struct sse *, const struct ring *, const struct sse_feed *,
	    void *arg);
/*
 * Whether the stream takes more frames now: its unsent bytes are under
 * --sse-buffer, and the budget of answers held (outq.h) has room for them.
 * A stream kept waiting by the budget alone is pulled again when it has.
 */
int	 sse_room(const struct sse *);
/* Bytes it takes before its unsent bytes reach --sse-buffer. */
size_t	 sse_room_bytes(const struct sse *);
/*
 * Whether a new stream may start: 0, or -1 once 503 too_busy was answered
 * (the answers held leave no room for its --sse-buffer).
 */
int	 sse_admit(struct http_req *);
/* Queue a frame: "id: ID", "event: EVENT", "data: DATA" (one line). */
void	 sse_send(struct sse *, uint64_t id, const char *event,
	    const char *data, size_t len);
/* The producer has news: pull now if the stream has room. */
void	 sse_kick(struct sse *);
/*
 * End the stream after what was queued (a pull may call it); the stream is
 * freed, and gone is not called.
 */
void	 sse_end(struct sse *);

/* GET /v1/sessions/{id} with Accept: text/event-stream. */
void	 sse_session(struct http_req *, struct session *);
/* The session observer's part: feed, or end, the session's streams. */
void	 sse_session_event(struct session *, int events);

/* Append the streams' gauges and counters to a /metrics answer. */
void	 sse_metrics(struct proto_buf *);

#endif /* AGENTD_SSE_H */
