/*
 * cast.c -- a session's output as an asciicast v2 recording (cast.h).
 */
#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "cast.h"
#include "http.h"
#include "proto.h"
#include "ringbuf.h"
#include "ringread.h"
#include "session.h"
#include "sse.h"
#include "util.h"

#define CAST_CHUNKS		64	/* chunks read from the ring at a time */
#define CAST_READ_BYTES		(64 * 1024) /* bytes of the read buffer */
#define CAST_WORST		6	/* rendered bytes of an output byte */
#define CAST_PIPE_COLS		80	/* the header's size for a pipe session */
#define CAST_PIPE_ROWS		24

/* A recording being sent. */
struct cast {
	struct sse		*sse;
	struct session		*s;
	uint64_t		 at;	/* the last chunk sent, or 0 */
	uint64_t		 last;	/* the newest chunk at the start */
	uint64_t		 end;	/* offset after the last byte sent */
	size_t			 nresize; /* resizes of the log sent */
	uint32_t		 time;	/* of the last event, ms */
	uint8_t			 carry[4]; /* a character's first bytes, cut
					   at the end of the last chunk */
	size_t			 carry_len;
};

static size_t			 cast_n;
static uint64_t			 cast_total;
static struct ring_reader	 cast_reader =	/* while a cast is sent */
				    RING_READER_INIT(CAST_READ_BYTES);
static struct proto_buf		 cast_out;	/* a pull's events */
static struct proto_buf		 cast_join;	/* a carry and its chunk */
static struct ring_chunk	 cast_chunks[CAST_CHUNKS];

static void	cast_event(struct proto_buf *, struct cast *, uint32_t,
		    const char *, const void *, size_t);
static void	cast_resizes(struct proto_buf *, struct cast *, uint32_t);
static void	cast_flush(struct proto_buf *, struct cast *);
static void	cast_chunk(struct proto_buf *, struct cast *,
		    const struct ring_chunk *);
static size_t	cast_limit(void *, size_t, uint64_t *);
static int	cast_take(void *, struct proto_buf *,
		    const struct ring_read_result *);
static void	cast_pull(struct sse *, void *);
static void	cast_end(struct cast *);
static void	cast_gone(void *);
static void	cast_removed(void *);
static void	cast_free(struct cast *);

static const struct sse_feed	 cast_feed = {
	&cast_reader, cast_chunks, CAST_CHUNKS, &cast_out, cast_limit,
	cast_take
};

/* One event line: [t, "code", "data"], at time ms, never before the last. */
static void
cast_event(struct proto_buf *b, struct cast *c, uint32_t ms,
    const char *code, const void *data, size_t len)
{
	char	frac[5];

	if (ms < c->time)
		ms = c->time;
	c->time = ms;
	proto_buf_append(b, "[", 1);
	proto_buf_u64(b, ms / 1000);
	snprintf(frac, sizeof frac, ".%03u", ms % 1000);
	proto_buf_append(b, frac, 4);
	proto_buf_append(b, ", \"", 3);
	proto_buf_append(b, code, strlen(code));
	proto_buf_append(b, "\", ", 3);
	proto_buf_json_string(b, data, len);
	proto_buf_append(b, "]\n", 2);
}

/* The resizes of the log up to time ms (all with UINT32_MAX). */
static void
cast_resizes(struct proto_buf *b, struct cast *c, uint32_t ms)
{
	struct session_size	z;
	char			size[32];
	int			n;

	while (session_resize_at(c->s, c->nresize, &z) == 0 && z.time <= ms) {
		n = snprintf(size, sizeof size, "%ux%u", z.cols, z.rows);
		cast_event(b, c, z.time, "r", size, (size_t)n);
		c->nresize++;
	}
}

/* Send what the last chunk left of a character, as it is. */
static void
cast_flush(struct proto_buf *b, struct cast *c)
{
	if (c->carry_len == 0)
		return;
	cast_event(b, c, c->time, "o", c->carry, c->carry_len);
	c->carry_len = 0;
}

/*
 * One chunk: the resizes before it, a marker where output before it was
 * evicted, then its bytes, a character it cuts at its end left to the
 * next chunk.
 */
static void
cast_chunk(struct proto_buf *b, struct cast *c, const struct ring_chunk *k)
{
	const uint8_t	*p = k->data;
	size_t		 len = k->len, cut;
	char		 gap[80];
	int		 n;

	cast_resizes(b, c, k->time);
	if (k->offset != c->end) {
		cast_flush(b, c);
		n = snprintf(gap, sizeof gap, "%" PRIu64 " bytes of output "
		    "evicted from the ring", k->offset - c->end);
		cast_event(b, c, k->time, "m", gap, (size_t)n);
	}
	c->end = k->offset + k->len;
	if (len == 0)
		return;
	if (c->carry_len > 0) {
		cast_join.len = 0;
		proto_buf_append(&cast_join, c->carry, c->carry_len);
		proto_buf_append(&cast_join, p, len);
		if (cast_join.oom)
			fatal("%s: out of memory", __func__);
		p = (const uint8_t *)cast_join.data;
		len = cast_join.len;
		c->carry_len = 0;
	}
	cut = proto_utf8_cut(p, len);
	if (len - cut < sizeof c->carry) {
		memcpy(c->carry, p + cut, len - cut);
		c->carry_len = len - cut;
	} else
		cut = len;
	if (cut > 0)
		cast_event(b, c, k->time, "o", p, cut);
}

/* Answer GET (or HEAD) .../cast. */
void
cast_answer(struct http_req *hr, struct session *s)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(hr->req);
	struct proto_buf	 b = { 0 };
	struct cast		*c;
	const char		*id = session_id(s);
	char			 disp[PROTO_ID_MAX + 40];
	unsigned		 rows, cols;
	int64_t			 start;

	snprintf(disp, sizeof disp, "attachment; filename=\"%s.cast\"", id);
	evhttp_add_header(h, "Content-Disposition", disp);
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	if (hr->method == EVHTTP_REQ_HEAD) {	/* the head alone */
		evhttp_add_header(h, "Content-Type", "application/x-asciicast");
		http_count(200);
		evhttp_send_reply(hr->req, 200, "OK", NULL);
		return;
	}
	if (sse_admit(hr) != 0)
		return;
	c = xcalloc(1, sizeof *c);
	c->s = s;
	c->last = ring_newest(session_ring(s));	/* what was read, published */
	cast_n++;
	cast_total++;

	start = session_start(s, &rows, &cols);
	if (rows == 0 || cols == 0) {
		rows = CAST_PIPE_ROWS;
		cols = CAST_PIPE_COLS;
	}
	proto_buf_printf(&b, "{\"version\": 2, \"width\": %u, \"height\": %u, "
	    "\"timestamp\": %" PRId64 ", \"title\": ", cols, rows,
	    start / 1000);
	proto_buf_json_string(&b, id, strlen(id));
	proto_buf_append(&b, "}\n", 2);
	if (b.oom)
		fatal("%s: out of memory", __func__);
	c->sse = sse_start_raw(hr, 200, "application/x-asciicast", cast_pull,
	    cast_gone, c);
	sse_tie(c->sse, s, cast_removed);	/* it ends where it is */
	sse_send_raw(c->sse, b.data, b.len);
	proto_buf_free(&b);
	sse_kick(c->sse);	/* may end it, and free c */
}

/* Where the next read starts, and its bytes for room bytes of events. */
static size_t
cast_limit(void *arg, size_t room, uint64_t *at)
{
	struct cast	*c = arg;

	*at = c->at;
	return (room / CAST_WORST);
}

/* Render the chunks of a read as events; 1 when the last one is sent. */
static int
cast_take(void *arg, struct proto_buf *b, const struct ring_read_result *res)
{
	struct cast	*c = arg;
	size_t		 i;

	for (i = 0; i < res->nchunks; i++) {
		/* The ring moved past the end while it was sent. */
		if (cast_chunks[i].id > c->last)
			return (1);
		cast_chunk(b, c, &cast_chunks[i]);
		c->at = cast_chunks[i].id;
		if (c->at >= c->last)
			return (1);
	}
	return (0);
}

/* Send the next chunks as events while the stream has room. */
static void
cast_pull(struct sse *sse, void *arg)
{
	struct cast	*c = arg;

	if (c->at >= c->last || sse_feed(sse, session_ring(c->s), &cast_feed,
	    c))
		cast_end(c);
}

/* The last events, and the answer's end. */
static void
cast_end(struct cast *c)
{
	struct proto_buf	 b = { 0 };
	struct sse		*sse = c->sse;

	cast_flush(&b, c);
	cast_resizes(&b, c, UINT32_MAX);
	if (b.oom)
		fatal("%s: out of memory", __func__);
	if (b.len > 0)
		sse_send_raw(sse, b.data, b.len);
	proto_buf_free(&b);
	cast_free(c);
	sse_end(sse);
}

/* The client went away. */
static void
cast_gone(void *arg)
{
	cast_free(arg);
}

/* Its session was removed: the cast ends where it is. */
static void
cast_removed(void *arg)
{
	cast_end(arg);
}

/* Unlink and free a cast; the buffers go with the last one. */
static void
cast_free(struct cast *c)
{
	free(c);
	if (--cast_n > 0)
		return;
	ring_reader_free(&cast_reader);
	proto_buf_free(&cast_out);
	proto_buf_free(&cast_join);
}

/* agentd_casts_total and agentd_casts. */
void
cast_metrics(struct proto_buf *b)
{
	proto_buf_printf(b, "# TYPE agentd_casts_total counter\n"
	    "agentd_casts_total %" PRIu64 "\n"
	    "# TYPE agentd_casts gauge\n"
	    "agentd_casts %zu\n", cast_total, cast_n);
}
