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
	TAILQ_ENTRY(cast)	 entry;
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

static TAILQ_HEAD(, cast)	 casts = TAILQ_HEAD_INITIALIZER(casts);
static size_t			 cast_n;
static uint64_t			 cast_total;
static uint8_t			*cast_buf;	/* while a cast is sent */
static size_t			 cast_buf_len;
static struct proto_buf		 cast_out;	/* a pull's events */
static struct proto_buf		 cast_join;	/* a carry and its chunk */
static struct ring_chunk	 cast_chunks[CAST_CHUNKS];

static int	cast_read(struct ring *, uint64_t, size_t,
		    struct ring_read_result *);
static void	cast_event(struct proto_buf *, struct cast *, uint32_t,
		    const char *, const void *, size_t);
static void	cast_resizes(struct proto_buf *, struct cast *, uint32_t);
static void	cast_flush(struct proto_buf *, struct cast *);
static void	cast_chunk(struct proto_buf *, struct cast *,
		    const struct ring_chunk *);
static void	cast_pull(struct sse *, void *);
static void	cast_end(struct cast *);
static void	cast_gone(void *);
static void	cast_free(struct cast *);

/* ring_read() into the read buffer, grown for a chunk too big for it. */
static int
cast_read(struct ring *r, uint64_t at, size_t lim,
    struct ring_read_result *res)
{
	size_t	need = CAST_READ_BYTES;
	int	error;

	for (;;) {
		if (cast_buf_len < need) {
			free(cast_buf);
			cast_buf_len = 0;
			if ((cast_buf = malloc(need)) == NULL)
				return (-ENOMEM);
			cast_buf_len = need;
		}
		error = ring_read(r, at, cast_buf, cast_buf_len, lim,
		    cast_chunks, CAST_CHUNKS, res);
		if (error != -EMSGSIZE || need >= ring_chunk_max(r))
			return (error);
		need = ring_chunk_max(r);
	}
}

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
	TAILQ_INSERT_TAIL(&casts, c, entry);
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
	sse_send_raw(c->sse, b.data, b.len);
	proto_buf_free(&b);
	sse_kick(c->sse);	/* may end it, and free c */
}

/* Send the next chunks as events while the stream has room. */
static void
cast_pull(struct sse *sse, void *arg)
{
	struct cast		*c = arg;
	struct ring_read_result	 res;
	struct proto_buf	*b = &cast_out;
	size_t			 i, lim;
	int			 done = c->at >= c->last;

	while (!done && sse_room(sse)) {
		lim = sse_room_bytes(sse) / CAST_WORST;
		if (cast_read(session_ring(c->s), c->at, lim, &res) != 0) {
			done = 1;	/* out of memory: it ends here */
			break;
		}
		b->len = 0;
		for (i = 0; i < res.nchunks && !done; i++) {
			/* The ring moved past the end while it was sent. */
			if ((done = cast_chunks[i].id > c->last))
				break;
			cast_chunk(b, c, &cast_chunks[i]);
			c->at = cast_chunks[i].id;
			done = c->at >= c->last;
		}
		if (b->oom)
			fatal("%s: out of memory", __func__);
		if (b->len > 0)
			sse_send_raw(sse, b->data, b->len);
		if (res.nchunks == 0 && !res.more)
			done = 1;
	}
	if (done)
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

/* Unlink and free a cast; the buffers go with the last one. */
static void
cast_free(struct cast *c)
{
	TAILQ_REMOVE(&casts, c, entry);
	free(c);
	if (--cast_n > 0)
		return;
	free(cast_buf);
	cast_buf = NULL;
	cast_buf_len = 0;
	proto_buf_free(&cast_out);
	proto_buf_free(&cast_join);
}

/* A removed session: its casts end where they are. */
void
cast_session_event(struct session *s, int events)
{
	struct cast	*c, *next;

	if (!(events & SESSION_EV_REMOVED))
		return;
	for (c = TAILQ_FIRST(&casts); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->s == s)
			cast_end(c);
	}
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
