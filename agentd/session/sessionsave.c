/*
 * sessionsave.c -- the session table written to and read from an
 * upgrade's hand-over state (see sessionsave.h).
 */
#include <sys/queue.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "cgroup.h"
#include "log.h"
#include "ringbuf.h"
#include "session.h"
#include "session_int.h"
#include "sessionsave.h"
#include "upgstate.h"
#include "util.h"

#define SESSIONSAVE_CHUNKS	1024	/* chunks copied per ring read */
#define SESSIONSAVE_ARGV_MAX	4096	/* argv entries of a session read */

/* A chunk of a ring read back: its bytes are in the state's blob. */
struct session_load_chunk {
	uint64_t	 id;
	uint8_t		 stream;
	const uint8_t	*data;
	uint32_t	 len;
	uint32_t	 time;
};

/* A [session] section being read. */
struct session_load {
	struct session		*s;
	struct session_timers	 t;
	size_t			 argc;
	uint64_t		 ring_first;
	uint64_t		 ring_offset;
	uint64_t		 ring_bytes_dropped;
	uint64_t		 ring_chunks_dropped;
	int			 ring_closed;
	struct session_load_chunk *chunks;
	size_t			 nchunks, capchunks;
	char			*cgroup;	/* its name */
	int			 cgroup_fd;
	const uint8_t		*inq;		/* queued stdin, in the blob */
	uint64_t		 inq_len;
	int64_t			 quiet_ms;
	int			 bad;		/* dropped whole */
};

static int	sessionsave_fd(const char *, int *);
static void	sessionsave_ring(struct upgstate_w *, struct session *);
static int	sessionsave_keep(int, int *, size_t *, size_t);
static void	sessionsave_close_fds(struct session_load *);
static int	sessionsave_ring_load(struct session_load *);

/* Add fd to the fds kept across the execve; -1 when keep is full. */
static int
sessionsave_keep(int fd, int *keep, size_t *nkeep, size_t max)
{
	if (fd < 0)
		return (0);
	if (*nkeep >= max)
		return (-1);
	keep[(*nkeep)++] = fd;
	return (0);
}

/* Write the chunks a ring holds: their bytes to the blob, a line each. */
static void
sessionsave_ring(struct upgstate_w *w, struct session *s)
{
	static struct ring_chunk	 chunks[SESSIONSAVE_CHUNKS];
	struct ring_read_result		 res;
	struct ring_stats		 st;
	struct ring			*r = session_ring(s);	/* published */
	uint8_t				*buf;
	uint64_t			 cursor, off;
	size_t				 size = ring_chunk_max(r), i;

	ring_stats(r, &st);
	upgstate_put(w, "ring-bytes", "%zu", s->ring_bytes);
	upgstate_put(w, "ring-first", "%" PRIu64, st.oldest);
	upgstate_put(w, "ring-offset", "%" PRIu64, st.bytes_total -
	    st.bytes_held);
	upgstate_put(w, "ring-dropped", "%" PRIu64 " %" PRIu64,
	    st.bytes_dropped, st.chunks_dropped);
	upgstate_put(w, "ring-closed", "%d", ring_closed(r));
	buf = xmalloc(size);
	for (cursor = st.oldest - 1;;) {
		if (ring_read(r, cursor, buf, size, size, chunks,
		    SESSIONSAVE_CHUNKS, &res) != 0 || res.nchunks == 0)
			break;
		for (i = 0; i < res.nchunks; i++) {
			off = upgstate_blob(w, chunks[i].data, chunks[i].len);
			upgstate_put(w, "chunk", "%" PRIu64 " %u %" PRIu64
			    " %u %u", chunks[i].id, chunks[i].stream, off,
			    chunks[i].len, chunks[i].time);
		}
		cursor = chunks[res.nchunks - 1].id;
	}
	free(buf);
}

/* Write every session as a section; collect the fds to keep. */
int
session_save_all(struct upgstate_w *w, int *keep, size_t *nkeep, size_t max)
{
	struct session		*s;
	struct session_timers	 t;
	struct evbuffer_iovec	 v;
	struct session_size	 z;
	uint64_t		 off;
	size_t			 i, len;
	int			 n = 0;

	session_upgrade_prepare();
	for (s = session_first(); s != NULL; s = session_next(s)) {
		upgstate_section(w, "session");
		upgstate_put(w, "id", "%s", s->id);
		upgstate_put(w, "seq", "%" PRIu64, s->seq);
		for (i = 0; s->argv[i] != NULL; i++)
			upgstate_put_bytes(w, "argv", s->argv[i],
			    strlen(s->argv[i]));
		upgstate_put_bytes(w, "cwd", s->cwd, strlen(s->cwd));
		upgstate_put_bytes(w, "user", s->user, strlen(s->user));
		if (s->tag != NULL)
			upgstate_put_bytes(w, "tag", s->tag, strlen(s->tag));
		upgstate_put(w, "tty", "%d %u %u", s->tty, s->rows, s->cols);
		upgstate_put(w, "pid", "%ld", (long)s->pid);
		upgstate_put(w, "status", "%d %d %d %d", s->reaped, s->released,
		    s->status, s->exited);
		upgstate_put(w, "flags", "%d %d %d %d %d", s->timed_out,
		    s->terminating, s->killed, s->oom_killed, s->gone);
		upgstate_put(w, "kill-at-ms", "%" PRId64, s->kill_at_ms -
		    clock_mono_ms());
		upgstate_put(w, "started-ms", "%" PRId64, s->started_ms);
		upgstate_put(w, "age-ms", "%" PRId64, clock_mono_ms() -
		    s->start_mono_ms);
		upgstate_put(w, "start-size", "%u %u", s->start_rows,
		    s->start_cols);
		for (i = 0; session_resize_at(s, i, &z) == 0; i++)
			upgstate_put(w, "resize", "%u %u %u", z.time, z.rows,
			    z.cols);
		upgstate_put(w, "ended-ms", "%" PRId64, s->ended_ms);
		upgstate_put(w, "kept-bytes", "%zu", s->kept_bytes);
		upgstate_put(w, "quiet-ms", "%" PRId64, session_quiet_ms(s));
		for (i = 0; i < 2; i++) {
			if (s->out[i].fd == -1)
				continue;
			upgstate_put(w, i == 0 ? "out0" : "out1", "%d %d",
			    s->out[i].fd, (int)s->out[i].stream);
			if (sessionsave_keep(s->out[i].fd, keep, nkeep,
			    max) != 0)
				return (-1);
		}
		upgstate_put(w, "hup", "%d %" PRId64, s->hup, s->hup_ms);
		if (s->in != -1) {
			upgstate_put(w, "in", "%d %d", s->in, s->in_eof);
			if (!s->tty && sessionsave_keep(s->in, keep, nkeep,
			    max) != 0)
				return (-1);
		}
		upgstate_put(w, "stdin-bytes", "%" PRIu64, s->stdin_bytes);
		if ((len = evbuffer_get_length(s->inq)) > 0) {
			evbuffer_pullup(s->inq, -1);
			evbuffer_peek(s->inq, -1, NULL, &v, 1);
			off = upgstate_blob(w, v.iov_base, len);
			upgstate_put(w, "stdin-queued", "%" PRIu64 " %zu", off,
			    len);
		}
		session_timers_left(s, &t);
		upgstate_put(w, "timers", "%" PRId64 " %" PRId64 " %" PRId64
		    " %" PRId64, t.timeout_ms, t.kill_ms, t.ttl_ms,
		    t.drain_ms);
		if (s->cg != NULL) {
			upgstate_put(w, "cgroup", "%d %s",
			    cgroup_session_fd(s->cg),
			    cgroup_session_name(s->cg));
			if (sessionsave_keep(cgroup_session_fd(s->cg), keep,
			    nkeep, max) != 0)
				return (-1);
		}
		upgstate_put(w, "usage", "%" PRId64 " %" PRId64 " %" PRId64
		    " %" PRId64, s->usage.cpu_ms, s->usage.memory_peak_bytes,
		    s->usage.pids_peak, s->usage.oom_kills);
		sessionsave_ring(w, s);
		n++;
	}
	return (n);
}

/* Begin a [session] section. */
struct session_load *
session_load_begin(void)
{
	struct session_load	*sl;
	struct session		*s;

	sl = xcalloc(1, sizeof *sl);
	sl->cgroup_fd = -1;
	sl->t.timeout_ms = sl->t.kill_ms = sl->t.ttl_ms = sl->t.drain_ms = -1;
	s = sl->s = xcalloc(1, sizeof *s);
	s->out[0].fd = s->out[1].fd = s->in = -1;
	s->pid = -1;
	s->ended_ms = -1;
	s->argv = xcalloc(1, sizeof *s->argv);
	s->usage.cpu_ms = s->usage.memory_peak_bytes = s->usage.pids_peak =
	    s->usage.oom_kills = -1;
	return (sl);
}

/* An fd named by the state, if it is open here: 0, else -1. */
static int
sessionsave_fd(const char *value, int *fd)
{
	int64_t	n;
	char	num[32];

	snprintf(num, sizeof num, "%.*s", (int)strcspn(value, " "), value);
	if (upgstate_i64(num, &n) != 0 || n < 3 || n > INT32_MAX ||
	    fcntl((int)n, F_GETFD) == -1)
		return (-1);
	*fd = (int)n;
	fcntl(*fd, F_SETFD, FD_CLOEXEC);
	return (0);
}

/* One item of a [session] section. */
void
session_load_item(struct session_load *sl, const struct upgstate *r,
    const char *key, const char *value, size_t len)
{
	struct session_load_chunk	*c;
	struct session			*s = sl->s;
	uint64_t			 u, a, b, d;
	unsigned			 stream, x, y, tm, cb[SESSION_CARRY_MAX];
	struct session_out		*o;
	int64_t				 i64, t[4];
	int				 fd, k, v[5];
	char				 name[32];

	if (strcmp(key, "id") == 0 && len > 0 && len <= PROTO_ID_MAX)
		memcpy(s->id, value, len + 1);
	else if (strcmp(key, "seq") == 0 && upgstate_u64(value, &u) == 0)
		s->seq = u;
	else if (strcmp(key, "argv") == 0 && memchr(value, '\0', len) ==
	    NULL && sl->argc < SESSIONSAVE_ARGV_MAX) {
		s->argv = xrealloc(s->argv, (sl->argc + 2) * sizeof *s->argv);
		s->argv[sl->argc++] = xstrdup(value);
		s->argv[sl->argc] = NULL;
	} else if (strcmp(key, "cwd") == 0 && s->cwd == NULL)
		s->cwd = xstrdup(value);
	else if (strcmp(key, "user") == 0 && s->user == NULL)
		s->user = xstrdup(value);
	else if (strcmp(key, "tag") == 0 && s->tag == NULL &&
	    memchr(value, '\0', len) == NULL)
		s->tag = xstrdup(value);
	else if (strcmp(key, "carry") == 0 && sscanf(value, "%u %u %x %x %x",
	    &stream, &x, &cb[0], &cb[1], &cb[2]) == 5 && stream <= 2 &&
	    x <= SESSION_CARRY_MAX && cb[0] <= 0xff && cb[1] <= 0xff &&
	    cb[2] <= 0xff) {
		/* An older agentd's; session_insert() publishes it. */
		o = &s->out[stream == RING_STREAM_STDERR];
		o->carry_len = x;
		for (k = 0; k < SESSION_CARRY_MAX; k++)
			o->carry[k] = (uint8_t)cb[k];
	}
	else if (strcmp(key, "tty") == 0 &&
	    sscanf(value, "%d %u %u", &k, &x, &y) == 3) {
		s->tty = k != 0;
		s->rows = x;
		s->cols = y;
	} else if (strcmp(key, "pid") == 0 && upgstate_i64(value, &i64) == 0 &&
	    i64 > 1 && i64 <= INT32_MAX)
		s->pid = (pid_t)i64;
	else if (strcmp(key, "status") == 0 && sscanf(value, "%d %d %d %d",
	    &v[0], &v[1], &v[2], &v[3]) == 4) {
		s->reaped = v[0] != 0;
		s->released = v[1] != 0;
		s->status = v[2];
		s->exited = v[3] != 0;
	} else if (strcmp(key, "flags") == 0 && sscanf(value, "%d %d %d %d %d",
	    &v[0], &v[1], &v[2], &v[3], &v[4]) == 5) {
		s->timed_out = v[0] != 0;
		s->terminating = v[1] != 0;
		s->killed = v[2] != 0;
		s->oom_killed = v[3] != 0;
		s->gone = v[4] != 0;
	} else if (strcmp(key, "kill-at-ms") == 0 &&
	    upgstate_i64(value, &i64) == 0)
		s->kill_at_ms = clock_mono_ms() + i64;
	else if (strcmp(key, "started-ms") == 0 &&
	    upgstate_i64(value, &i64) == 0)
		s->started_ms = i64;
	else if (strcmp(key, "age-ms") == 0 && upgstate_i64(value, &i64) == 0)
		s->start_mono_ms = clock_mono_ms() - i64;
	else if (strcmp(key, "start-size") == 0 &&
	    sscanf(value, "%u %u", &x, &y) == 2) {
		s->start_rows = x;
		s->start_cols = y;
	} else if (strcmp(key, "resize") == 0 &&
	    sscanf(value, "%u %u %u", &tm, &x, &y) == 3)
		session_log_resize(s, tm, x, y);
	else if (strcmp(key, "ended-ms") == 0 && upgstate_i64(value, &i64) == 0)
		s->ended_ms = i64;
	else if (strcmp(key, "kept-bytes") == 0 && upgstate_u64(value, &u) == 0)
		s->kept_bytes = (size_t)u;
	else if (strcmp(key, "quiet-ms") == 0 && upgstate_i64(value, &i64) == 0)
		s->output_ms = clock_mono_ms() - i64;
	else if ((strcmp(key, "out0") == 0 || strcmp(key, "out1") == 0) &&
	    sscanf(value, "%*d %u", &stream) == 1 && stream <= 2) {
		k = key[3] - '0';
		if (sessionsave_fd(value, &fd) != 0) {
			log_warn("%s: session %s: ignoring %s=%s: not open",
			    __func__, s->id, key, value);
			return;
		}
		s->out[k].fd = fd;
		s->out[k].stream = (enum ring_stream)stream;
	} else if (strcmp(key, "hup") == 0 && sscanf(value, "%d %" SCNd64,
	    &k, &i64) == 2) {
		s->hup = k != 0;
		s->hup_ms = i64;
	} else if (strcmp(key, "in") == 0 && sscanf(value, "%d %d", &fd,
	    &k) == 2) {
		s->in_eof = k != 0;
		if (s->tty)
			s->in = fd;	/* the master: out0's, checked at end */
		else if (sessionsave_fd(value, &s->in) != 0)
			log_warn("%s: session %s: ignoring in=%s: not open",
			    __func__, s->id, value);
	} else if (strcmp(key, "stdin-bytes") == 0 &&
	    upgstate_u64(value, &u) == 0)
		s->stdin_bytes = u;
	else if (strcmp(key, "stdin-queued") == 0 &&
	    sscanf(value, "%" SCNu64 " %" SCNu64, &a, &b) == 2 &&
	    (sl->inq = upgstate_blob_at(r, a, b)) != NULL)
		sl->inq_len = b;
	else if (strcmp(key, "timers") == 0 && sscanf(value, "%" SCNd64 " %"
	    SCNd64 " %" SCNd64 " %" SCNd64, &t[0], &t[1], &t[2], &t[3]) == 4) {
		sl->t.timeout_ms = t[0];
		sl->t.kill_ms = t[1];
		sl->t.ttl_ms = t[2];
		sl->t.drain_ms = t[3];
	} else if (strcmp(key, "cgroup") == 0 &&
	    sscanf(value, "%*d %31s", name) == 1) {
		if (sessionsave_fd(value, &sl->cgroup_fd) != 0) {
			log_warn("%s: session %s: ignoring cgroup=%s: not open",
			    __func__, s->id, value);
			return;
		}
		free(sl->cgroup);
		sl->cgroup = xstrdup(name);
	} else if (strcmp(key, "usage") == 0 && sscanf(value, "%" SCNd64 " %"
	    SCNd64 " %" SCNd64 " %" SCNd64, &t[0], &t[1], &t[2], &t[3]) == 4) {
		s->usage.cpu_ms = t[0];
		s->usage.memory_peak_bytes = t[1];
		s->usage.pids_peak = t[2];
		s->usage.oom_kills = t[3];
	} else if (strcmp(key, "ring-bytes") == 0 &&
	    upgstate_u64(value, &u) == 0)
		s->ring_bytes = (size_t)u;
	else if (strcmp(key, "ring-first") == 0 &&
	    upgstate_u64(value, &u) == 0 && u > 0)
		sl->ring_first = u;
	else if (strcmp(key, "ring-offset") == 0 &&
	    upgstate_u64(value, &u) == 0)
		sl->ring_offset = u;
	else if (strcmp(key, "ring-dropped") == 0 && sscanf(value, "%" SCNu64
	    " %" SCNu64, &a, &b) == 2) {
		sl->ring_bytes_dropped = a;
		sl->ring_chunks_dropped = b;
	} else if (strcmp(key, "ring-closed") == 0 && sscanf(value, "%d",
	    &k) == 1)
		sl->ring_closed = k != 0;
	else if (strcmp(key, "chunk") == 0 && (tm = 0, sscanf(value, "%" SCNu64
	    " %u %" SCNu64 " %" SCNu64 " %u", &a, &stream, &b, &d, &tm)) >= 4 &&
	    stream <= 2 && d <= UINT32_MAX &&
	    upgstate_blob_at(r, b, d) != NULL) {
		if (sl->nchunks == sl->capchunks) {
			sl->capchunks = sl->capchunks == 0 ? 64 :
			    sl->capchunks * 2;
			sl->chunks = xrealloc(sl->chunks, sl->capchunks *
			    sizeof *sl->chunks);
		}
		c = &sl->chunks[sl->nchunks++];
		c->id = a;
		c->stream = (uint8_t)stream;
		c->data = upgstate_blob_at(r, b, d);
		c->len = (uint32_t)d;
		c->time = tm;	/* 0 from an agentd without times */
	} else
		log_warn("%s: session %s: line %zu: ignoring %s=%s", __func__,
		    s->id, upgstate_line(r), key, value);
}

/* Close the fds a dropped section named. */
static void
sessionsave_close_fds(struct session_load *sl)
{
	struct session	*s = sl->s;
	size_t		 i;

	for (i = 0; i < 2; i++) {
		if (s->out[i].fd != -1)
			close(s->out[i].fd);
		s->out[i].fd = -1;
	}
	if (s->in != -1 && !s->tty)
		close(s->in);
	s->in = -1;
	if (sl->cgroup_fd != -1)
		close(sl->cgroup_fd);
	sl->cgroup_fd = -1;
}

/* Make the ring and put the chunks back at their ids; -1 when it cannot. */
static int
sessionsave_ring_load(struct session_load *sl)
{
	struct session	*s = sl->s;
	size_t		 i;
	uint64_t	 want = sl->ring_first;

	if ((s->ring = ring_create(s->ring_bytes, sl->ring_first)) == NULL)
		return (-1);
	ring_resume(s->ring, sl->ring_offset, sl->ring_bytes_dropped,
	    sl->ring_chunks_dropped);
	for (i = 0; i < sl->nchunks; i++) {
		if (sl->chunks[i].id != want) {
			log_warn("%s: session %s: ignoring chunk %" PRIu64
			    " (%" PRIu64 " expected) and the rest", __func__,
			    s->id, sl->chunks[i].id, want);
			break;
		}
		ring_set_time(s->ring, sl->chunks[i].time);
		ring_append(s->ring, sl->chunks[i].data, sl->chunks[i].len,
		    (enum ring_stream)sl->chunks[i].stream);
		want++;
	}
	if (sl->ring_closed)
		ring_close(s->ring);
	return (0);
}

/* End the section: list the session, or drop it. */
int
session_load_end(struct session_load *sl, const struct upgstate *r)
{
	struct session	*s = sl->s;
	const char	*why = NULL;
	int		 error = 0;

	if (s->id[0] == '\0')
		why = "no id";
	else if (session_find(s->id) != NULL)
		why = "its id is listed already";
	else if (s->pid <= 1)
		why = "no pid";
	else if (s->ring_bytes == 0 || sl->ring_first == 0)
		why = "no ring";
	else if (sl->argc == 0 || s->cwd == NULL || s->user == NULL)
		why = "no argv, cwd or user";
	else if (sessionsave_ring_load(sl) != 0)
		why = "its ring cannot be made";
	if (s->start_mono_ms == 0)	/* from an agentd without age-ms */
		s->start_mono_ms = clock_mono_ms() - (clock_wall_ms() -
		    s->started_ms);
	if (why == NULL && s->tty && s->in != -1 && s->in != s->out[0].fd)
		s->in = s->out[0].fd;	/* the master, or closed */
	if (why == NULL && sl->cgroup != NULL &&
	    (s->cg = cgroup_session_adopt(sl->cgroup, sl->cgroup_fd)) == NULL)
		log_warn("%s: session %s: cgroup %s not taken over "
		    "(containment is %s)", __func__, s->id, sl->cgroup,
		    cgroup_containment());
	else if (s->cg != NULL)
		sl->cgroup_fd = -1;	/* the cgroup's now */
	if (why != NULL) {
		log_warn("%s: session %s: dropped: %s", __func__,
		    s->id[0] != '\0' ? s->id : "?", why);
		sessionsave_close_fds(sl);
		if (s->ring != NULL)
			ring_free(s->ring);
		error = -1;
	} else {
		if (sl->cgroup_fd != -1)
			close(sl->cgroup_fd);
		s->inq = evbuffer_new();
		if (s->inq == NULL || (sl->inq_len > 0 &&
		    evbuffer_add(s->inq, sl->inq, sl->inq_len) != 0))
			fatal("%s: out of memory", __func__);
		session_insert(s, &sl->t);
		s = NULL;
	}
	if (s != NULL) {
		for (size_t i = 0; s->argv[i] != NULL; i++)
			free(s->argv[i]);
		free(s->argv);
		free(s->cwd);
		free(s->user);
		free(s->tag);
		free(s);
	}
	free(sl->chunks);
	free(sl->cgroup);
	free(sl);
	(void)r;
	return (error);
}
