/*
 * fuzz_ring.c -- libFuzzer harness for ringbuf/: the input is a little
 * program of ring operations (appends, reserves and commits, abandoned
 * reservations, reads at any cursor with any limits, close), run against a
 * model of what the ring was given.  Every read is checked against the model
 * exactly: ids, offsets, streams, bytes, the window's limits, dropped and
 * more; and the counters after every step.
 *
 * A byte's content is a function of its offset in the output, so the model
 * keeps only each chunk's offset, length and stream.
 *
 * Input: byte 0 picks the capacity and the first id (1, or near 2^64 so
 * that the ids run out); then one opcode byte and its operands per step.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringbuf.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FR_STEPS_MAX	2048	/* steps of one input */
#define FR_CHUNKS_MAX	(FR_STEPS_MAX * 4 + 16)
#define FR_READ_CHUNKS	32	/* chunk descriptors of one read at most */

/* What the model knows of one chunk. */
struct fr_chunk {
	uint64_t	offset;
	uint32_t	len;
	uint8_t		stream;
};

/* The input being consumed. */
struct fr_in {
	const uint8_t	*p;
	size_t		 n;
};

static struct fr_chunk	 model[FR_CHUNKS_MAX];
static size_t		 nmodel;		/* chunks appended */
static uint64_t		 first_id;
static uint64_t		 total;			/* bytes appended */
static uint64_t		 last_oldest;
static int		 only_appends;		/* no reservation ever */
static int		 abandoned;		/* a reservation since the last chunk */
static unsigned		 notified;
static uint8_t		*wbuf, *rbuf;
static size_t		 wbuf_len, rbuf_len;

static void
must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_ring: %s\n", what);
		abort();
	}
}

/* The byte at output offset off. */
static uint8_t
fr_byte(uint64_t off)
{
	uint64_t	x = off * 0x9e3779b97f4a7c15ull;

	return ((uint8_t)(x >> 56) ^ (uint8_t)off);
}

/* Fill p with the bytes of offsets off .. off + len. */
static void
fr_fill(uint8_t *p, uint64_t off, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++)
		p[i] = fr_byte(off + i);
}

static unsigned
fr_u8(struct fr_in *in)
{
	unsigned	v;

	if (in->n == 0)
		return (0);
	v = in->p[0];
	in->p++;
	in->n--;
	return (v);
}

static unsigned
fr_u16(struct fr_in *in)
{
	return (fr_u8(in) | fr_u8(in) << 8);
}

/* The newest id the model knows, first_id - 1 when none. */
static uint64_t
fr_head(void)
{
	return (first_id - 1 + nmodel);
}

static const struct fr_chunk *
fr_chunk(uint64_t id)
{
	must(id >= first_id && id - first_id < nmodel, "id outside the model");
	return (&model[id - first_id]);
}

/* The ring accepted a chunk: remember it. */
static void
fr_add(size_t len, unsigned stream)
{
	must(nmodel < FR_CHUNKS_MAX, "model full");
	model[nmodel].offset = total;
	model[nmodel].len = (uint32_t)len;
	model[nmodel].stream = (uint8_t)stream;
	nmodel++;
	abandoned = 0;
	total += len;
}

static void
fr_notify(struct ring *r, void *arg)
{
	notified++;
}

static uint64_t
fr_round(uint64_t len)
{
	return ((len + 7) & ~(uint64_t)7);
}

/* The counters must say what the model says. */
static void
fr_check_stats(struct ring *r)
{
	struct ring_stats	 st;
	uint64_t		 head = fr_head(), held = 0, dropped = 0;
	uint64_t		 rsum = 0, rmax = 0, k;

	ring_stats(r, &st);
	must(st.newest == (nmodel == 0 ? 0 : head), "stats: newest");
	must(ring_newest(r) == st.newest, "ring_newest");
	must(st.oldest >= first_id && st.oldest - first_id <= nmodel,
	    "stats: oldest");
	must(st.oldest >= last_oldest, "stats: oldest went back");
	last_oldest = st.oldest;
	/*
	 * The newest chunk stays, unless a reservation since made room for
	 * more than the rest of the ring.
	 */
	must(nmodel == 0 || abandoned || st.oldest <= head,
	    "newest chunk evicted");
	/* Indexes, not ids: the last id is UINT64_MAX in some runs. */
	for (k = 0; k < st.oldest - first_id; k++)
		dropped += model[k].len;
	for (k = st.oldest - first_id; k < nmodel; k++) {
		held += model[k].len;
		rsum += fr_round(model[k].len);
	}
	must(st.bytes_total == total, "stats: bytes_total");
	must(st.bytes_held == held, "stats: bytes_held");
	must(st.bytes_dropped == dropped, "stats: bytes_dropped");
	must(st.chunks_dropped == st.oldest - first_id, "stats: chunks_dropped");
	must(rsum <= st.capacity, "held chunks exceed the arena");
	must(nmodel == 0 || head - st.oldest + 1 <= st.slots,
	    "held chunks exceed the index");
	/*
	 * Evictions only when needed: with only appends, keeping one more
	 * chunk would not have fitted (its words, one skipped arena end at
	 * most, or the index).
	 */
	if (only_appends && st.oldest > first_id && nmodel > 0) {
		rsum = rmax = 0;
		for (k = st.oldest - 1 - first_id; k < nmodel; k++) {
			rsum += fr_round(model[k].len);
			if (fr_round(model[k].len) > rmax)
				rmax = fr_round(model[k].len);
		}
		must(rsum + rmax > st.capacity ||
		    head - (st.oldest - 1) + 1 > st.slots,
		    "a chunk was evicted without need");
	}
}

/* ring_read at cursor with these limits, checked against the model. */
static void
fr_read(struct ring *r, uint64_t cursor, size_t bufsize, size_t max_bytes,
    size_t maxchunks)
{
	struct ring_chunk	 ch[FR_READ_CHUNKS];
	struct ring_read_result	 res;
	struct ring_stats	 st;
	uint64_t		 head = fr_head(), start, k;
	size_t			 n, nbytes, limit, i;
	int			 error;
	uint8_t			*expect;

	if (bufsize > rbuf_len) {
		free(rbuf);
		rbuf = malloc(bufsize);
		must(rbuf != NULL, "malloc");
		rbuf_len = bufsize;
	}
	ring_stats(r, &st);
	error = ring_read(r, cursor, rbuf, bufsize, max_bytes, ch, maxchunks,
	    &res);
	if (cursor > head) {
		must(error == -ERANGE, "cursor after head: not ERANGE");
		return;
	}
	start = cursor + 1 > st.oldest ? cursor + 1 : st.oldest;
	if (cursor == head || maxchunks == 0) {
		must(error == 0 && res.nchunks == 0 && res.dropped == 0 &&
		    res.nbytes == 0, "empty read");
		must(res.more == (cursor < head), "empty read: more");
		must(res.newest == (nmodel == 0 ? 0 : head), "empty read: newest");
		return;
	}
	/* The model's window. */
	limit = max_bytes < bufsize ? max_bytes : bufsize;
	n = nbytes = 0;
	for (k = start - first_id; k < nmodel && n < maxchunks; k++) {
		if (n == 0) {
			if (model[k].len > bufsize) {
				must(error == -EMSGSIZE, "no EMSGSIZE");
				return;
			}
		} else if (nbytes >= limit || model[k].len > limit - nbytes)
			break;
		nbytes += model[k].len;
		n++;
	}
	must(error == 0, "read failed");
	must(res.nchunks == n, "window: number of chunks");
	must(res.nbytes == nbytes, "window: bytes");
	/* A gap is reported with the chunks after it, never alone. */
	must(res.dropped == (n > 0 ? start - cursor - 1 : 0), "window: dropped");
	/*
	 * No chunk although ids follow the cursor (a reservation evicted
	 * them all): more, as when readers are lapped (ringbuf.h).
	 */
	must(res.more == (n > 0 ? start + n - 1 < head : cursor < head),
	    "window: more");
	must(res.newest == head, "window: newest");
	expect = malloc(nbytes + 1);
	must(expect != NULL, "malloc");
	nbytes = 0;
	for (i = 0; i < n; i++) {
		const struct fr_chunk *m = fr_chunk(start + i);

		must(ch[i].id == start + i, "chunk id");
		must(ch[i].offset == m->offset, "chunk offset");
		must(ch[i].len == m->len, "chunk length");
		must(ch[i].stream == m->stream, "chunk stream");
		must(ch[i].data == rbuf + nbytes, "chunks not back to back");
		fr_fill(expect, m->offset, m->len);
		must(memcmp(ch[i].data, expect, m->len) == 0, "chunk bytes");
		nbytes += m->len;
	}
	free(expect);
}

/* Append len bytes (split at the chunk size) unless the ids run out. */
static void
fr_append(struct ring *r, size_t len, unsigned stream)
{
	size_t		 cap = ring_chunk_max(r), nchunks, n;
	uint64_t	 id;
	unsigned	 before = notified;

	if (len > wbuf_len) {
		free(wbuf);
		wbuf = malloc(len + 1);
		must(wbuf != NULL, "malloc");
		wbuf_len = len;
	}
	fr_fill(wbuf, total, len);
	nchunks = len == 0 ? 1 : (len - 1) / cap + 1;
	errno = 0;
	id = ring_append(r, wbuf, len, (enum ring_stream)stream);
	if (UINT64_MAX - fr_head() < nchunks) {
		must(id == 0 && errno == EOVERFLOW, "append past the last id");
		return;
	}
	do {
		n = len < cap ? len : cap;
		fr_add(n, stream);
		len -= n;
	} while (len > 0);
	must(id == fr_head(), "append: id");
	must(notified == before + 1, "append: notify once");
}

/* Reserve want bytes; commit commit of them unless abandon. */
static void
fr_reserve(struct ring *r, size_t want, size_t commit, int abandon,
    unsigned stream)
{
	size_t		 len = want;
	uint8_t		*p;
	uint64_t	 id;
	unsigned	 before = notified;

	only_appends = 0;
	errno = 0;
	p = ring_reserve(r, &len);
	if (fr_head() == UINT64_MAX) {
		must(p == NULL && errno == EOVERFLOW, "reserve past the last id");
		must(ring_commit(r, 0, RING_STREAM_STDOUT) == 0,
		    "commit without a reservation");
		return;
	}
	must(p != NULL, "reserve failed");
	must(len == (want < ring_chunk_max(r) ? want : ring_chunk_max(r)),
	    "reserve: length");
	if (abandon) {
		abandoned = 1;
		return;
	}
	if (commit > len) {
		/* Too much: refused, and the reservation stays. */
		must(ring_commit(r, commit, (enum ring_stream)stream) == 0,
		    "commit beyond the reservation");
		commit = len;
	}
	fr_fill(p, total, commit);
	id = ring_commit(r, commit, (enum ring_stream)stream);
	fr_add(commit, stream);
	must(id == fr_head(), "commit: id");
	must(notified == before + 1, "commit: notify");
	must(ring_commit(r, 0, RING_STREAM_STDOUT) == 0, "second commit");
}

/* libFuzzer's entry point. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fr_in	 in = { data, size };
	struct ring	*r;
	size_t		 cap, steps, len, span;
	uint64_t	 cursor, head;
	unsigned	 op, b;

	if (size < 3)
		return (0);
	b = fr_u8(&in);
	cap = RING_CAPACITY_MIN + (fr_u16(&in) % 32) * 512 + (b & 0x40 ? 3 : 0);
	first_id = (b & 0x80) ? UINT64_MAX - (b & 0x3f) : 1;
	r = ring_create(cap, first_id);
	must(r != NULL, "ring_create");
	must(ring_chunk_max(r) == fr_round(cap), "chunk max");
	must(ring_create(RING_CAPACITY_MIN - 1, 1) == NULL && errno == EINVAL,
	    "small capacity accepted");
	nmodel = 0;
	total = 0;
	last_oldest = first_id;
	only_appends = 1;
	abandoned = 0;
	notified = 0;
	ring_set_notify(r, fr_notify, NULL);
	must(ring_newest(r) == 0, "new ring: newest");

	for (steps = 0; steps < FR_STEPS_MAX && in.n > 0; steps++) {
		op = fr_u8(&in);
		switch (op % 8) {
		case 0:		/* append, maybe longer than a chunk */
			len = fr_u16(&in) % (2 * ring_chunk_max(r) + 2);
			fr_append(r, len, fr_u8(&in) % 3);
			break;
		case 1:		/* append a little */
			fr_append(r, fr_u8(&in) % 64, op >> 6);
			break;
		case 2:		/* reserve and commit part of it */
			len = fr_u16(&in) % (ring_chunk_max(r) + 64);
			fr_reserve(r, len, fr_u16(&in) % (len + 2), 0,
			    fr_u8(&in) % 3);
			break;
		case 3:		/* reserve and abandon */
			fr_reserve(r, fr_u16(&in), 0, 1, 0);
			break;
		case 4:		/* read near the head */
		case 5:		/* read anywhere, with odd limits */
			head = fr_head();
			span = (size_t)(nmodel + 2);
			cursor = head + 1 - (uint64_t)(fr_u16(&in) % span);
			if (cursor < first_id - 1 || (op & 0x20))
				cursor = first_id - 1 + (nmodel > 0 ?
				    (uint64_t)fr_u8(&in) % nmodel : 0);
			if (op % 8 == 4)
				fr_read(r, cursor, ring_chunk_max(r),
				    fr_u8(&in) == 0 ? SIZE_MAX :
				    (size_t)fr_u16(&in), FR_READ_CHUNKS);
			else
				fr_read(r, cursor, 1 + fr_u16(&in) %
				    (ring_chunk_max(r) + 16), fr_u16(&in),
				    fr_u8(&in) % (FR_READ_CHUNKS + 1));
			break;
		case 6:		/* close; appends still work */
			b = notified;
			ring_close(r);
			must(ring_closed(r), "closed");
			must(notified == b + 1, "close: notify");
			break;
		default:	/* the empty chunk */
			fr_append(r, 0, op >> 6);
			break;
		}
		fr_check_stats(r);
	}
	/* Everything held reads back from the oldest on. */
	head = fr_head();
	if (nmodel > 0)
		fr_read(r, first_id - 1, ring_chunk_max(r), SIZE_MAX,
		    FR_READ_CHUNKS);
	ring_free(r);
	return (0);
}
