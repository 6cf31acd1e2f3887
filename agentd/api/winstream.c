/*
 * winstream.c -- a big output window sent as it is rendered (winstream.h).
 */
#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <event2/http_struct.h>

#include "http.h"
#include "outq.h"
#include "proto.h"
#include "ringbuf.h"
#include "ringread.h"
#include "session.h"
#include "sse.h"
#include "util.h"
#include "window.h"
#include "winstream.h"

#define WINSTREAM_CHUNKS	64	/* chunks read from the ring at a time */
#define WINSTREAM_READ_BYTES	(256 * 1024) /* bytes of the read buffer */
#define WINSTREAM_TEXT_WORST	6	/* rendered bytes of a byte, as text */
#define WINSTREAM_B64_WORST	2	/* and in base64, with the chunk's
					   object around it */
#define WINSTREAM_CHUNK_BYTES	128	/* bytes of a chunk's object around
					   its data, at most */

/* A window being sent. */
struct winstream {
	struct sse		*sse;
	struct session		*s;
	uint64_t		 at;	/* the last chunk sent, or the one
					   before the window */
	size_t			 skip;	/* bytes of chunk at + 1 read before
					   (a cursor inside it) */
	uint64_t		 last;	/* the newest chunk at the start */
	size_t			 left;	/* bytes of max_bytes not taken */
	size_t			 sent;	/* chunks sent */
	int			 cut;	/* the first chunk was cut */
	int			 eof;	/* exited, output closed at the start */
	int			 encoding;
	struct proto_window	 w;	/* the fields after "output" */
};

static size_t			 winstream_n;
static struct ring_reader	 winstream_reader =	/* while a window is
							   sent */
				    RING_READER_INIT(WINSTREAM_READ_BYTES);
static struct proto_buf		 winstream_out;	/* a pull's chunks rendered,
						   kept while a window is
						   sent (fresh pages for
						   each pull cost more than
						   the rendering) */
static struct ring_chunk	 winstream_chunks[WINSTREAM_CHUNKS];

static int	winstream_wanted(struct evhttp_request *, struct session *,
		    size_t);
static void	winstream_buffer_free(void);
static int	winstream_check(struct evhttp_request *, struct ring *,
		    const struct winstream_ask *, uint64_t *, size_t *,
		    size_t *);
static size_t	winstream_limit(void *, size_t, uint64_t *);
static void	winstream_pull(struct sse *, void *);
static int	winstream_take(void *, struct proto_buf *,
		    const struct ring_read_result *);
static void	winstream_end(struct winstream *);
static void	winstream_gone(void *);
static void	winstream_removed(void *);
static void	winstream_free(struct winstream *);

static const struct sse_feed	 winstream_feed = {
	&winstream_reader, winstream_chunks, nitems(winstream_chunks),
	&winstream_out, winstream_limit, winstream_take
};

/* Whether the window may be big, and the request takes a chunked answer. */
static int
winstream_wanted(struct evhttp_request *req, struct session *s,
    size_t max_bytes)
{
	struct ring_stats	st;

	if (req->major != 1 || req->minor < 1 ||
	    evhttp_request_get_command(req) == EVHTTP_REQ_HEAD ||
	    max_bytes <= WINSTREAM_MIN)
		return (0);
	ring_stats(session_ring(s), &st);
	return (st.bytes_held > WINSTREAM_MIN);
}

/*
 * Look at the window after a->cursor: 1 when it is sent as it is rendered
 * (*after, *skip where it starts, *want the bytes admitted), 0 when it is
 * small, -1 once an error was answered (400 invalid_cursor, 503 too_busy,
 * 503 out_of_memory).
 */
static int
winstream_check(struct evhttp_request *req, struct ring *r,
    const struct winstream_ask *a, uint64_t *after, size_t *skip,
    size_t *want)
{
	struct ring_read_result	 res;
	struct ring_stats	 st;
	struct proto_err	 err;
	uint64_t		 newest = ring_newest(r), data;
	int			 error;

	/* The cursor, checked before the head goes: its first chunk. */
	proto_cursor_split(a->cursor, newest, after, skip);
	error = ring_reader_read(&winstream_reader, r, *after, 1,
	    winstream_chunks, 1, &res);
	if (error == -ENOMEM) {
		http_fail(req, 503, "out_of_memory", "no memory to read a "
		    "window");
		return (-1);
	}
	if (window_cursor(a->cursor, newest, error, &res, winstream_chunks,
	    skip, &err) != 0) {
		http_reply_error(req, &err, NULL);
		return (-1);
	}
	if (error != 0 || res.nchunks == 0)
		return (0);	/* nothing after it: a small answer */
	/* The bytes after the cursor (each chunk's offset is the ring's). */
	ring_stats(r, &st);
	data = st.bytes_total - winstream_chunks[0].offset - *skip;
	if (data > a->max_bytes)
		data = a->max_bytes;
	if (data <= WINSTREAM_MIN)
		return (0);
	/*
	 * Admitted whole, as a whole answer would be, at its rendered size
	 * in base64 with every chunk's object: what is not rendered yet
	 * stays counted, so that unread windows still take the budget.
	 */
	*want = a->object_bytes + data / 3 * 4 + 4 +
	    (size_t)SESSION_WINDOW_CHUNKS * WINSTREAM_CHUNK_BYTES;
	if (outq_admit(*want, &err) != 0) {
		http_reply_error(req, &err, NULL);
		return (-1);
	}
	return (1);
}

/* Free the buffers (no window is being sent). */
static void
winstream_buffer_free(void)
{
	ring_reader_free(&winstream_reader);
	proto_buf_free(&winstream_out);
}

/* Answer with the object and a window sent as it is rendered. */
int
winstream_answer(struct evhttp_request *req, struct session *s,
    const struct proto_session *v, const struct winstream_ask *a)
{
	struct http_req		 hr = { .req = req };
	struct ring		*r = session_ring(s);
	struct proto_session	 obj = *v;
	struct proto_buf	 b = { 0 };
	struct winstream	*ws;
	uint64_t		 after, newest = ring_newest(r);
	size_t			 skip, want;
	int			 go;

	if (!winstream_wanted(req, s, a->max_bytes))
		return (0);
	if ((go = winstream_check(req, r, a, &after, &skip, &want)) != 1) {
		if (winstream_n == 0)
			winstream_buffer_free();
		return (go != 0);
	}

	ws = xcalloc(1, sizeof *ws);
	ws->s = s;
	ws->at = after;
	ws->skip = skip;
	ws->last = newest;
	ws->left = a->max_bytes;
	ws->eof = session_exited(s) && session_output_closed(s);
	ws->encoding = a->encoding;
	ws->w.cursor = a->cursor;
	winstream_n++;

	/* The object's last_chunk is not older than the window. */
	if (obj.last_chunk < newest)
		obj.last_chunk = newest;
	proto_render_window_open(&b, &obj, a->written, a->duplicate);
	if (b.oom)
		fatal("%s: out of memory", __func__);
	ws->sse = sse_start_raw(&hr, a->status, "application/json",
	    winstream_pull, winstream_gone, ws);
	sse_tie(ws->sse, s, winstream_removed);	/* it ends where it is */
	sse_send_raw(ws->sse, b.data, b.len);
	sse_promise(ws->sse, want > b.len ? want - b.len : 0);
	proto_buf_free(&b);
	sse_kick(ws->sse);	/* may end it, and free ws */
	return (1);
}

/*
 * Where the next read starts, and its bytes: what room bytes take rendered
 * at the worst, within the window, and up to the skip's chunk, whose bytes
 * before are not sent.
 */
static size_t
winstream_limit(void *arg, size_t room, uint64_t *at)
{
	struct winstream	*ws = arg;
	size_t			 lim;

	lim = room / (ws->encoding == PROTO_ENC_TEXT ? WINSTREAM_TEXT_WORST :
	    WINSTREAM_B64_WORST);
	if (lim > ws->left)
		lim = ws->left;
	if (ws->skip > 0 && lim <= SIZE_MAX - ws->skip)
		lim += ws->skip;
	*at = ws->at;
	return (lim);
}

/* Send the window's next chunks while the stream has room; end at its end. */
static void
winstream_pull(struct sse *sse, void *arg)
{
	struct winstream	*ws = arg;

	if (sse_feed(sse, session_ring(ws->s), &winstream_feed, ws))
		winstream_end(ws);
}

/*
 * Render the chunks of one ring read that belong to the window into b.
 * Returns 1 when the window ends with them, else 0.
 */
static int
winstream_take(void *arg, struct proto_buf *b,
    const struct ring_read_result *res)
{
	struct winstream	*ws = arg;
	struct proto_chunk	c;
	size_t			i, cut, skip;
	uint64_t		next;

	if (res->dropped > 0) {
		/* Evicted before it was sent: the window ends before it. */
		if (ws->sent > 0)
			return (1);
		/* Before the first: the window's own gap, as a whole one. */
		ws->w.dropped = res->dropped;
		ws->skip = 0;
	}
	for (i = 0; i < res->nchunks; i++) {
		c.id = winstream_chunks[i].id;
		c.offset = winstream_chunks[i].offset;
		c.data = winstream_chunks[i].data;
		c.len = winstream_chunks[i].len;
		c.stream = winstream_chunks[i].stream;
		if (c.id > ws->last)
			return (1);
		skip = ws->skip < c.len ? ws->skip : 0;
		ws->skip = 0;
		c.data += skip;
		c.offset += skip;
		c.len -= (uint32_t)skip;
		if (c.len > ws->left) {
			if (ws->sent > 0)
				return (1);
			/* The first alone passes max_bytes: its first bytes. */
			cut = proto_utf8_cut(c.data, ws->left);
			if (cut == 0)
				cut = ws->left;
			if ((next = proto_cursor_make(c.id, skip + cut)) != 0) {
				c.len = (uint32_t)cut;
				ws->w.cursor = next;
				ws->cut = 1;
			}
		}
		proto_render_window_chunk(b, &c, ws->encoding, ws->sent == 0);
		ws->at = c.id;
		ws->left -= c.len < ws->left ? c.len : ws->left;
		ws->sent++;
		if (ws->cut || ws->at == ws->last ||
		    ws->sent == SESSION_WINDOW_CHUNKS)
			return (1);
	}
	return (0);
}

/* The fields after "output", and the answer's end. */
static void
winstream_end(struct winstream *ws)
{
	struct proto_buf	 b = { 0 };
	struct sse		*sse = ws->sse;

	if (!ws->cut && ws->sent > 0)
		ws->w.cursor = ws->at;
	ws->w.more = ws->cut || ring_newest(session_ring(ws->s)) > ws->at;
	ws->w.eof = ws->eof && !ws->w.more && ws->at == ws->last;
	proto_render_window_close(&b, &ws->w);
	proto_buf_append(&b, "\n", 1);
	if (b.oom)
		fatal("%s: out of memory", __func__);
	sse_send_raw(sse, b.data, b.len);
	proto_buf_free(&b);
	winstream_free(ws);
	sse_end(sse);
}

/* The client went away. */
static void
winstream_gone(void *arg)
{
	winstream_free(arg);
}

/* Its session was removed: the window ends where it is. */
static void
winstream_removed(void *arg)
{
	winstream_end(arg);
}

/* Unlink and free a window's state; the buffer goes with the last one. */
static void
winstream_free(struct winstream *ws)
{
	free(ws);
	if (--winstream_n == 0)
		winstream_buffer_free();
}

/* Windows being sent now. */
size_t
winstream_count(void)
{
	return (winstream_n);
}
