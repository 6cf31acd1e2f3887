/*
 * headtail.c -- the head and tail of each output stream (headtail.h): the
 * head keeps whole chunks until it holds its budget's half, the tail is a
 * circular buffer of the newest bytes after the head, evicting from its
 * front; the window is cut at the end, once the stream's size is known.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "headtail.h"

/* A piece of a chunk held in a buffer. */
struct ht_piece {
	uint64_t	 id;
	uint64_t	 offset;
	size_t		 pos;		/* in the head buffer, or the tail's
					   circular buffer */
	size_t		 len;
};

/* One stream's head and tail. */
struct ht_stream {
	size_t		 hbudget, tbudget;	/* bytes */
	size_t		 maxpieces;		/* of the head, of the tail */

	uint8_t		*hbuf;		/* whole chunks, back to back */
	size_t		 hcap, hlen;
	struct ht_piece	*hp;
	size_t		 hn;
	int		 hfull;		/* the head takes no more chunks */
	size_t		 cross;		/* bytes of the head's last chunk past
					   hbudget, also fed to the tail */

	uint8_t		*tbuf;		/* circular, tbudget bytes */
	size_t		 tcap, tstart, tlen;
	struct ht_piece	*tp;		/* circular, maxpieces */
	size_t		 tfirst, tn;
	uint64_t	 seen;		/* bytes fed to the tail */
	uint64_t	 evicted;	/* of them, dropped from its front */
	uint64_t	 evict_id, evict_off;	/* the first byte dropped */

	size_t		 pcap;		/* pieces allocated in hp and tp */
};

struct proto_headtail {
	struct ht_stream st[PROTO_HEADTAIL_STREAMS];
	uint64_t	 last_id;
	int		 oom;
};

static int	ht_tail_feed(struct ht_stream *, uint64_t, uint64_t,
		    const uint8_t *, size_t);
static void	ht_tail_drop(struct ht_stream *, size_t);
static void	ht_rotate(uint8_t *, size_t, size_t);
static void	ht_reverse(uint8_t *, size_t);
static int	ht_piece_cmp(const void *, const void *);

/* A new object with no buffers. */
struct proto_headtail *
proto_headtail_new(void)
{
	return (calloc(1, sizeof (struct proto_headtail)));
}

/* Free the object and its buffers. */
void
proto_headtail_free(struct proto_headtail *ht)
{
	if (ht == NULL)
		return;
	proto_headtail_trim(ht, 0);
	free(ht);
}

/* Free the buffers over keep bytes. */
void
proto_headtail_trim(struct proto_headtail *ht, size_t keep)
{
	struct ht_stream	*st;
	size_t			 i;

	for (i = 0; i < PROTO_HEADTAIL_STREAMS; i++) {
		st = &ht->st[i];
		if (st->hcap > keep) {
			free(st->hbuf);
			st->hbuf = NULL;
			st->hcap = st->hlen = 0;
		}
		if (st->tcap > keep) {
			free(st->tbuf);
			st->tbuf = NULL;
			st->tcap = st->tlen = 0;
		}
		if (st->pcap * sizeof *st->hp > keep) {
			free(st->hp);
			free(st->tp);
			st->hp = st->tp = NULL;
			st->pcap = 0;
			st->hn = st->tn = 0;
		}
	}
}

/* Begin a window with each stream's budget. */
void
proto_headtail_start(struct proto_headtail *ht,
    const size_t budget[PROTO_HEADTAIL_STREAMS], size_t max_pieces)
{
	struct ht_stream	*st;
	size_t			 i, per;

	per = max_pieces / (2 * PROTO_HEADTAIL_STREAMS);
	if (per == 0)
		per = 1;
	for (i = 0; i < PROTO_HEADTAIL_STREAMS; i++) {
		st = &ht->st[i];
		st->hbudget = budget[i] / 2;
		st->tbudget = budget[i] - st->hbudget;
		st->maxpieces = per;
		st->hlen = st->hn = 0;
		st->hfull = 0;
		st->cross = 0;
		st->tstart = st->tlen = st->tfirst = st->tn = 0;
		st->seen = st->evicted = 0;
		st->evict_id = st->evict_off = 0;
	}
	ht->last_id = 0;
	ht->oom = 0;
}

/* Drop n bytes from the tail's front, whole pieces or part of the first. */
static void
ht_tail_drop(struct ht_stream *st, size_t n)
{
	struct ht_piece	*p;
	size_t		 k;

	while (n > 0 && st->tn > 0) {
		p = &st->tp[st->tfirst];
		if (st->evicted == 0) {
			st->evict_id = p->id;
			st->evict_off = p->offset;
		}
		k = n < p->len ? n : p->len;
		p->len -= k;
		p->offset += k;
		p->pos = st->tcap > 0 ? (p->pos + k) % st->tcap : 0;
		st->tstart = st->tcap > 0 ? (st->tstart + k) % st->tcap : 0;
		st->tlen -= k;
		st->evicted += k;
		n -= k;
		if (p->len == 0) {
			st->tfirst = (st->tfirst + 1) % st->maxpieces;
			st->tn--;
		}
	}
}

/* Take bytes after the head into the tail, dropping what falls out. */
static int
ht_tail_feed(struct ht_stream *st, uint64_t id, uint64_t off,
    const uint8_t *data, size_t len)
{
	struct ht_piece	*p;
	size_t		 at, first;

	st->seen += len;
	if (len > st->tbudget) {
		/* Only the piece's last bytes can stay, alone. */
		ht_tail_drop(st, st->tlen);
		if (st->evicted == 0) {
			st->evict_id = id;
			st->evict_off = off;
		}
		st->evicted += len - st->tbudget;
		off += len - st->tbudget;
		data += len - st->tbudget;
		len = st->tbudget;
		st->tstart = 0;
		if (len == 0)
			return (0);
	}
	if (st->tcap < st->tbudget) {
		free(st->tbuf);
		if ((st->tbuf = malloc(st->tbudget)) == NULL) {
			st->tcap = 0;
			return (-1);
		}
		st->tcap = st->tbudget;
		st->tstart = st->tlen = st->tfirst = st->tn = 0;
	}
	if (st->tlen + len > st->tbudget)
		ht_tail_drop(st, st->tlen + len - st->tbudget);
	if (st->tn == st->maxpieces)
		ht_tail_drop(st, st->tp[st->tfirst].len);
	at = (st->tstart + st->tlen) % st->tcap;
	first = st->tcap - at < len ? st->tcap - at : len;
	memcpy(st->tbuf + at, data, first);
	memcpy(st->tbuf, data + first, len - first);
	p = &st->tp[(st->tfirst + st->tn) % st->maxpieces];
	p->id = id;
	p->offset = off;
	p->pos = at;
	p->len = len;
	st->tn++;
	st->tlen += len;
	return (0);
}

/* The next chunk: into its stream's head while it has room, else its tail. */
int
proto_headtail_feed(struct proto_headtail *ht, const struct proto_chunk *c)
{
	struct ht_stream	*st;
	struct ht_piece		*p;
	uint8_t			*nb;
	size_t			 cap;
	int			 s = c->stream;

	if (ht->oom)
		return (-1);
	ht->last_id = c->id;
	if (c->len == 0)
		return (0);
	if (s < 0 || s >= PROTO_HEADTAIL_STREAMS)
		s = PROTO_STREAM_PTY;
	st = &ht->st[s];
	if (st->pcap < st->maxpieces) {
		free(st->hp);
		free(st->tp);
		st->hp = malloc(st->maxpieces * sizeof *st->hp);
		st->tp = malloc(st->maxpieces * sizeof *st->tp);
		st->pcap = st->hp != NULL && st->tp != NULL ? st->maxpieces : 0;
		if (st->pcap == 0)
			goto oom;
	}
	if (st->hfull || st->hn == st->maxpieces) {
		st->hfull = 1;
		if (ht_tail_feed(st, c->id, c->offset, c->data, c->len) != 0)
			goto oom;
		return (0);
	}

	/* The head keeps whole chunks, the last one past its budget too. */
	if (st->hcap - st->hlen < c->len) {
		cap = st->hcap < 4096 ? 4096 : st->hcap;
		while (cap - st->hlen < c->len)
			cap *= 2;
		if ((nb = realloc(st->hbuf, cap)) == NULL)
			goto oom;
		st->hbuf = nb;
		st->hcap = cap;
	}
	memcpy(st->hbuf + st->hlen, c->data, c->len);
	p = &st->hp[st->hn++];
	p->id = c->id;
	p->offset = c->offset;
	p->pos = st->hlen;
	p->len = c->len;
	st->hlen += c->len;
	if (st->hlen >= st->hbudget) {
		st->hfull = 1;
		st->cross = st->hlen - st->hbudget;
		if (st->cross > 0 && ht_tail_feed(st, c->id, c->offset +
		    c->len - st->cross, c->data + c->len - st->cross,
		    st->cross) != 0)
			goto oom;
	}
	return (0);
oom:
	ht->oom = 1;
	return (-1);
}

/* Reverse buf[0..n). */
static void
ht_reverse(uint8_t *buf, size_t n)
{
	size_t	i;
	uint8_t	t;

	for (i = 0; i < n / 2; i++) {
		t = buf[i];
		buf[i] = buf[n - 1 - i];
		buf[n - 1 - i] = t;
	}
}

/* Rotate buf[0..n) left by k: buf[k] comes first. */
static void
ht_rotate(uint8_t *buf, size_t n, size_t k)
{
	if (n == 0 || k % n == 0)
		return;
	ht_reverse(buf, k);
	ht_reverse(buf + k, n - k);
	ht_reverse(buf, n);
}

/* Pieces by id, then offset. */
static int
ht_piece_cmp(const void *a, const void *b)
{
	const struct proto_chunk	*x = a, *y = b;

	if (x->id != y->id)
		return (x->id < y->id ? -1 : 1);
	if (x->offset != y->offset)
		return (x->offset < y->offset ? -1 : 1);
	return (0);
}

/* Cut each stream and write the window's pieces in order. */
void
proto_headtail_finish(struct proto_headtail *ht, struct proto_chunk *out,
    struct proto_headtail_result *res)
{
	struct ht_stream	*st;
	struct ht_piece		*p;
	struct proto_chunk	*c;
	uint64_t		 cut_id[PROTO_HEADTAIL_STREAMS];
	uint64_t		 cut_off[PROTO_HEADTAIL_STREAMS];
	uint64_t		 total, kept;
	size_t			 n = 0, i, j, k, keep, skip, pos;
	int			 s, trunc;

	memset(res, 0, sizeof *res);
	res->last_id = ht->last_id;
	for (s = 0; s < PROTO_HEADTAIL_STREAMS; s++) {
		st = &ht->st[s];
		res->gap_at[s] = SIZE_MAX;
		cut_id[s] = 0;
		if (st->hn == 0 && st->tn == 0 && st->evicted == 0)
			continue;
		trunc = st->evicted > 0;
		/* Line the tail's circular buffer up from its oldest byte. */
		if (st->tn > 0) {
			ht_rotate(st->tbuf, st->tcap, st->tstart);
			for (i = 0; i < st->tn; i++) {
				p = &st->tp[(st->tfirst + i) % st->maxpieces];
				p->pos = (p->pos + st->tcap - st->tstart) %
				    st->tcap;
			}
			st->tstart = 0;
		}
		keep = st->hlen;
		skip = 0;
		if (trunc) {
			if (keep > st->hbudget)
				keep = st->hbudget;
			keep = proto_utf8_cut(st->hbuf, keep);
			while (skip < 3 && skip < st->tlen &&
			    (st->tbuf[skip] & 0xc0) == 0x80)
				skip++;
		}

		/* The head: whole chunks, or its first keep bytes. */
		for (i = 0; i < st->hn; i++) {
			p = &st->hp[i];
			if (p->pos >= keep)
				break;
			c = &out[n++];
			c->id = p->id;
			c->offset = p->offset;
			c->data = st->hbuf + p->pos;
			c->len = (uint32_t)(keep - p->pos < p->len ?
			    keep - p->pos : p->len);
			c->stream = s;
		}
		if (trunc) {
			if (keep < st->hlen) {
				p = &st->hp[0];
				for (i = 0; i < st->hn; i++) {
					p = &st->hp[i];
					if (keep < p->pos + p->len)
						break;
				}
				cut_id[s] = p->id;
				cut_off[s] = p->offset + (keep - p->pos);
			} else {
				cut_id[s] = st->evict_id;
				cut_off[s] = st->evict_off;
			}
		}

		/* The tail, without the head's last chunk again if whole. */
		pos = 0;
		for (i = 0; i < st->tn; i++) {
			p = &st->tp[(st->tfirst + i) % st->maxpieces];
			if (i == 0 && !trunc && st->cross > 0) {
				pos += p->len;
				continue;
			}
			k = pos < skip ? (skip - pos < p->len ? skip - pos :
			    p->len) : 0;
			pos += p->len;
			if (k == p->len)
				continue;
			c = &out[n++];
			c->id = p->id;
			c->offset = p->offset + k;
			c->data = st->tbuf + p->pos + k;
			c->len = (uint32_t)(p->len - k);
			c->stream = s;
		}
		if (trunc) {
			total = st->hlen + st->seen - st->cross;
			kept = keep + (st->tlen - skip);
			res->truncated[s] = total - kept;
			res->truncated_total += total - kept;
			if (res->cut_id == 0 || cut_id[s] < res->cut_id)
				res->cut_id = cut_id[s];
		}
	}
	qsort(out, n, sizeof *out, ht_piece_cmp);
	res->n = n;
	for (s = 0; s < PROTO_HEADTAIL_STREAMS; s++) {
		if (cut_id[s] == 0)
			continue;
		for (j = 0; j < n; j++) {
			if (out[j].id > cut_id[s] || (out[j].id == cut_id[s] &&
			    out[j].offset >= cut_off[s]))
				break;
		}
		res->gap_at[s] = j;
	}
}
