/*
 * upgstate.c -- the hand-over state's format (see upgstate.h).
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "upgstate.h"
#include "util.h"

#define UPGSTATE_FNV_BASIS	0xcbf29ce484222325ull
#define UPGSTATE_FNV_PRIME	0x100000001b3ull
#define UPGSTATE_KEY_MAX	64	/* bytes of a key or section name */

struct upgstate_w {
	char		*text;		/* the items */
	size_t		 len, cap;
	int		 blob;		/* memfd */
	uint64_t	 blob_len;
	uint64_t	 blob_sum;	/* FNV-1a so far */
	int		 error;		/* errno of a blob write, 0 */
};

struct upgstate {
	char		*text;		/* the whole state, NUL-terminated */
	size_t		 len;		/* up to the checksum line */
	size_t		 pos;		/* the next line */
	size_t		 body;		/* where the items start */
	size_t		 last;		/* where the last item's line starts */
	size_t		 line;		/* its number */
	size_t		 item_line;
	char		 key[UPGSTATE_KEY_MAX + 1];
	char		*value;		/* unescaped, malloc'd */
	size_t		 value_cap;
	int		 blob_fd;
	const uint8_t	*blob;		/* mapped, or NULL when empty */
	uint64_t	 blob_len;
};

static void	upgstate_add(struct upgstate_w *, const char *, size_t);
static void	upgstate_escape(struct upgstate_w *, const void *, size_t);
static uint64_t	upgstate_fnv(uint64_t, const void *, size_t);
static int	upgstate_name_ok(const char *, size_t);
static int	upgstate_unescape(struct upgstate *, const char *, size_t,
		    size_t *);
static int	upgstate_header(struct upgstate *, const char *, uint64_t *,
		    char *, size_t);
static int	upgstate_write_all(int, const void *, size_t);

/* Fold len bytes into an FNV-1a 64 hash. */
static uint64_t
upgstate_fnv(uint64_t h, const void *data, size_t len)
{
	const uint8_t	*p = data;
	size_t		 i;

	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= UPGSTATE_FNV_PRIME;
	}
	return (h);
}

/* FNV-1a 64 of len bytes. */
uint64_t
upgstate_checksum(const void *data, size_t len)
{
	return (upgstate_fnv(UPGSTATE_FNV_BASIS, data, len));
}

/* Whether a key or section name is [a-z0-9_-]+ and short enough. */
static int
upgstate_name_ok(const char *s, size_t len)
{
	size_t	i;

	if (len == 0 || len > UPGSTATE_KEY_MAX)
		return (0);
	for (i = 0; i < len; i++) {
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return (0);
	}
	return (1);
}

/* Start a state, with its blob memfd. */
struct upgstate_w *
upgstate_writer(char *cause, size_t causelen)
{
	struct upgstate_w	*w;
	int			 fd;

	if ((fd = memfd_create("agentd-upgrade-blob", MFD_CLOEXEC)) == -1) {
		snprintf(cause, causelen, "memfd_create: %s", strerror(errno));
		return (NULL);
	}
	w = xcalloc(1, sizeof *w);
	w->blob = fd;
	w->blob_sum = UPGSTATE_FNV_BASIS;
	return (w);
}

/* Append raw text. */
static void
upgstate_add(struct upgstate_w *w, const char *s, size_t len)
{
	if (w->len + len + 1 > w->cap) {
		w->cap = w->cap == 0 ? 4096 : w->cap;
		while (w->len + len + 1 > w->cap)
			w->cap *= 2;
		w->text = xrealloc(w->text, w->cap);
	}
	memcpy(w->text + w->len, s, len);
	w->len += len;
}

/* Append a value, escaped. */
static void
upgstate_escape(struct upgstate_w *w, const void *data, size_t len)
{
	const uint8_t	*p = data;
	char		 hex[5];
	size_t		 i, run = 0;

	for (i = 0; i < len; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			continue;
		upgstate_add(w, (const char *)p + run, i - run);
		run = i + 1;
		if (p[i] == '\\')
			upgstate_add(w, "\\\\", 2);
		else if (p[i] == '\n')
			upgstate_add(w, "\\n", 2);
		else {
			snprintf(hex, sizeof hex, "\\x%02x", p[i]);
			upgstate_add(w, hex, 4);
		}
	}
	upgstate_add(w, (const char *)p + run, len - run);
}

/* Begin a section. */
void
upgstate_section(struct upgstate_w *w, const char *name)
{
	upgstate_add(w, "[", 1);
	upgstate_add(w, name, strlen(name));
	upgstate_add(w, "]\n", 2);
}

/* Add key=bytes. */
void
upgstate_put_bytes(struct upgstate_w *w, const char *key, const void *data,
    size_t len)
{
	upgstate_add(w, key, strlen(key));
	upgstate_add(w, "=", 1);
	upgstate_escape(w, data, len);
	upgstate_add(w, "\n", 1);
}

/* Add key=printf'd value. */
void
upgstate_put(struct upgstate_w *w, const char *key, const char *fmt, ...)
{
	va_list	 ap;
	char	*v;
	int	 n;

	va_start(ap, fmt);
	n = vasprintf(&v, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("%s: out of memory", __func__);
	upgstate_put_bytes(w, key, v, (size_t)n);
	free(v);
}

/* Write all of len bytes to fd. */
static int
upgstate_write_all(int fd, const void *data, size_t len)
{
	const uint8_t	*p = data;
	ssize_t		 n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return (-errno);
		}
		p += n;
		len -= (size_t)n;
	}
	return (0);
}

/* Append bytes to the blob; their offset. */
uint64_t
upgstate_blob(struct upgstate_w *w, const void *data, size_t len)
{
	uint64_t	off = w->blob_len;
	int		error;

	if (len == 0 || w->error != 0)
		return (off);
	if ((error = upgstate_write_all(w->blob, data, len)) != 0) {
		w->error = -error;
		return (off);
	}
	w->blob_sum = upgstate_fnv(w->blob_sum, data, len);
	w->blob_len += len;
	return (off);
}

/* Give up a state being written. */
void
upgstate_writer_free(struct upgstate_w *w)
{
	if (w == NULL)
		return;
	if (w->blob != -1)
		close(w->blob);
	free(w->text);
	free(w);
}

/* Write the text to a new memfd: header, items, checksum. */
int
upgstate_finish(struct upgstate_w *w, int *textfd, int *blobfd, char *cause,
    size_t causelen)
{
	char		*out, sum[48];
	int		 fd = -1, n, error;
	size_t		 len;

	*textfd = *blobfd = -1;
	if (w->error != 0) {
		snprintf(cause, causelen, "blob: %s", strerror(w->error));
		upgstate_writer_free(w);
		return (-1);
	}
	n = asprintf(&out, "%s %d\nblob-fd=%d\nblob-bytes=%" PRIu64
	    "\nblob-checksum=%016" PRIx64 "\n", UPGSTATE_MAGIC,
	    UPGSTATE_VERSION, w->blob, w->blob_len, w->blob_sum);
	if (n < 0)
		fatal("%s: out of memory", __func__);
	len = (size_t)n + w->len;
	out = xrealloc(out, len + sizeof sum);
	if (w->len > 0)
		memcpy(out + n, w->text, w->len);
	n = snprintf(sum, sizeof sum, "checksum=%016" PRIx64 "\n",
	    upgstate_checksum(out, len));
	memcpy(out + len, sum, (size_t)n);
	len += (size_t)n;
	if ((fd = memfd_create("agentd-upgrade-state", MFD_CLOEXEC)) == -1 ||
	    (error = upgstate_write_all(fd, out, len)) != 0) {
		error = errno;
		snprintf(cause, causelen, "state memfd: %s", strerror(error));
		if (fd != -1)
			close(fd);
		free(out);
		upgstate_writer_free(w);
		return (-1);
	}
	free(out);
	*textfd = fd;
	*blobfd = w->blob;
	w->blob = -1;
	upgstate_writer_free(w);
	return (0);
}

/* Parse a decimal u64. */
int
upgstate_u64(const char *v, uint64_t *out)
{
	char			*end;
	unsigned long long	 n;

	if (v == NULL || *v < '0' || *v > '9')
		return (-1);
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0')
		return (-1);
	*out = n;
	return (0);
}

/* Parse a decimal i64. */
int
upgstate_i64(const char *v, int64_t *out)
{
	char		*end;
	long long	 n;

	if (v == NULL || *v == '\0')
		return (-1);
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0')
		return (-1);
	*out = n;
	return (0);
}

/* The header line "key=VALUE" at the reader's position; its number. */
static int
upgstate_header(struct upgstate *r, const char *key, uint64_t *out,
    char *cause, size_t causelen)
{
	const char	*line = r->text + r->pos, *nl;
	size_t		 klen = strlen(key);
	char		*end;

	nl = memchr(line, '\n', r->len - r->pos);
	if (nl == NULL || (size_t)(nl - line) <= klen + 1 ||
	    strncmp(line, key, klen) != 0 || line[klen] != '=') {
		snprintf(cause, causelen, "line %zu: %s= expected", r->line,
		    key);
		return (-1);
	}
	errno = 0;
	*out = strtoull(line + klen + 1, &end, strcmp(key, "blob-checksum") ==
	    0 ? 16 : 10);
	if (errno != 0 || end != nl) {
		snprintf(cause, causelen, "line %zu: bad %s", r->line, key);
		return (-1);
	}
	r->pos = (size_t)(nl + 1 - r->text);
	r->line++;
	return (0);
}

/* Read and check a state. */
struct upgstate *
upgstate_open(int fd, char *cause, size_t causelen)
{
	struct upgstate	*r;
	struct stat	 st;
	char		 want[64], *p;
	uint64_t	 sum, blob_fd, blob_len, blob_sum;
	size_t		 got = 0, n;
	ssize_t		 k;
	void		*map;

	if (fstat(fd, &st) == -1) {
		snprintf(cause, causelen, "fstat: %s", strerror(errno));
		return (NULL);
	}
	if (st.st_size <= 0 || (uint64_t)st.st_size > UPGSTATE_TEXT_MAX) {
		snprintf(cause, causelen, "state of %lld bytes",
		    (long long)st.st_size);
		return (NULL);
	}
	r = xcalloc(1, sizeof *r);
	r->blob_fd = -1;
	r->text = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		k = pread(fd, r->text + got, (size_t)st.st_size - got,
		    (off_t)got);
		if (k == -1 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	r->text[got] = '\0';
	n = (size_t)snprintf(want, sizeof want, "%s %d\n", UPGSTATE_MAGIC,
	    UPGSTATE_VERSION);
	if (got < n || strncmp(r->text, want, n) != 0) {
		if (got >= strlen(UPGSTATE_MAGIC) && strncmp(r->text,
		    UPGSTATE_MAGIC " ", strlen(UPGSTATE_MAGIC) + 1) == 0)
			snprintf(cause, causelen, "foreign version: %.*s",
			    (int)strcspn(r->text, "\n"), r->text);
		else
			snprintf(cause, causelen, "not an agentd state");
		goto fail;
	}
	/* The last line is the checksum of everything before it. */
	if (got < n + 1 || r->text[got - 1] != '\n') {
		snprintf(cause, causelen, "truncated (no last line)");
		goto fail;
	}
	for (p = r->text + got - 1; p > r->text && p[-1] != '\n'; p--)
		;
	if (strncmp(p, "checksum=", 9) != 0) {
		snprintf(cause, causelen, "truncated (no checksum line)");
		goto fail;
	}
	errno = 0;
	sum = strtoull(p + 9, NULL, 16);
	if (errno != 0 || sum != upgstate_checksum(r->text,
	    (size_t)(p - r->text))) {
		snprintf(cause, causelen, "checksum mismatch");
		goto fail;
	}
	r->len = (size_t)(p - r->text);
	r->pos = n;
	r->line = 2;
	if (upgstate_header(r, "blob-fd", &blob_fd, cause, causelen) != 0 ||
	    upgstate_header(r, "blob-bytes", &blob_len, cause, causelen) != 0 ||
	    upgstate_header(r, "blob-checksum", &blob_sum, cause,
	    causelen) != 0)
		goto fail;
	r->body = r->pos;
	if (blob_fd <= INT32_MAX && blob_fd > 2 &&
	    fstat((int)blob_fd, &st) == 0)
		r->blob_fd = (int)blob_fd;
	if (r->blob_fd == -1 || (uint64_t)st.st_size < blob_len) {
		snprintf(cause, causelen, "blob fd %" PRIu64 ": missing or "
		    "short", blob_fd);
		goto fail;
	}
	r->blob_len = blob_len;
	if (blob_len > 0) {
		map = mmap(NULL, blob_len, PROT_READ, MAP_PRIVATE, r->blob_fd,
		    0);
		if (map == MAP_FAILED) {
			snprintf(cause, causelen, "blob: mmap: %s",
			    strerror(errno));
			goto fail;
		}
		r->blob = map;
		if (upgstate_checksum(r->blob, blob_len) != blob_sum) {
			snprintf(cause, causelen, "blob checksum mismatch");
			goto fail;
		}
	}
	return (r);
fail:
	upgstate_close(r);
	return (NULL);
}

/* Free a state read. */
void
upgstate_close(struct upgstate *r)
{
	if (r == NULL)
		return;
	if (r->blob != NULL)
		munmap((void *)r->blob, r->blob_len);
	if (r->blob_fd != -1)
		close(r->blob_fd);
	free(r->text);
	free(r->value);
	free(r);
}

/* The byte two hex digits at p spell, or -1 (sscanf's %x took " 5", "-1"). */
static int
upgstate_hex2(const char *p)
{
	int	v = 0, i, c;

	for (i = 0; i < 2; i++) {
		c = (unsigned char)p[i];
		if (c >= '0' && c <= '9')
			v = v * 16 + c - '0';
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = v * 16 + c - 'A' + 10;
		else
			return (-1);
	}
	return (v);
}

/* Unescape s (len bytes) into r->value; -1 on a bad escape. */
static int
upgstate_unescape(struct upgstate *r, const char *s, size_t len,
    size_t *outlen)
{
	size_t		i, o = 0;
	int		x;

	if (len + 1 > r->value_cap) {
		r->value_cap = len + 1;
		r->value = xrealloc(r->value, r->value_cap);
	}
	for (i = 0; i < len; i++) {
		if (s[i] != '\\') {
			r->value[o++] = s[i];
			continue;
		}
		if (i + 1 < len && s[i + 1] == '\\')
			r->value[o++] = '\\';
		else if (i + 1 < len && s[i + 1] == 'n')
			r->value[o++] = '\n';
		else if (i + 3 < len && s[i + 1] == 'x' &&
		    (x = upgstate_hex2(s + i + 2)) != -1) {
			r->value[o++] = (char)x;
			i += 2;
		} else
			return (-1);
		i++;
	}
	r->value[o] = '\0';
	*outlen = o;
	return (0);
}

/* The next section or item; garbled lines are skipped. */
int
upgstate_next(struct upgstate *r, const char **key, const char **value,
    size_t *len)
{
	const char	*line, *nl, *eq;
	size_t		 llen;

	while (r->pos < r->len) {
		line = r->text + r->pos;
		r->last = r->pos;
		nl = memchr(line, '\n', r->len - r->pos);
		llen = nl != NULL ? (size_t)(nl - line) : r->len - r->pos;
		r->pos += llen + 1;
		r->item_line = r->line++;
		if (llen == 0)
			continue;
		if (line[0] == '[') {
			if (llen < 3 || line[llen - 1] != ']' ||
			    !upgstate_name_ok(line + 1, llen - 2)) {
				log_warn("%s: line %zu: ignoring a garbled "
				    "section", __func__, r->item_line);
				continue;
			}
			memcpy(r->key, line + 1, llen - 2);
			r->key[llen - 2] = '\0';
			*key = r->key;
			*value = NULL;
			*len = 0;
			return (UPGSTATE_SECTION);
		}
		eq = memchr(line, '=', llen);
		if (eq == NULL || !upgstate_name_ok(line, (size_t)(eq - line)) ||
		    upgstate_unescape(r, eq + 1, llen - (size_t)(eq + 1 - line),
		    len) != 0) {
			log_warn("%s: line %zu: ignoring a garbled line",
			    __func__, r->item_line);
			continue;
		}
		memcpy(r->key, line, (size_t)(eq - line));
		r->key[eq - line] = '\0';
		*key = r->key;
		*value = r->value;
		return (UPGSTATE_ITEM);
	}
	return (UPGSTATE_END);
}

/* The line number of the last item returned. */
size_t
upgstate_line(const struct upgstate *r)
{
	return (r->item_line);
}

/* The blob's bytes [off, off + len). */
const uint8_t *
upgstate_blob_at(const struct upgstate *r, uint64_t off, uint64_t len)
{
	static const uint8_t	empty[1];

	if (off > r->blob_len || len > r->blob_len - off)
		return (NULL);
	if (len == 0)
		return (empty);
	return (r->blob + off);
}

/* The blob fd's number. */
int
upgstate_blob_fd(const struct upgstate *r)
{
	return (r->blob_fd);
}

/* Give the last item or section back: the next call returns it again. */
void
upgstate_unread(struct upgstate *r)
{
	if (r->last >= r->body && r->last < r->pos) {
		r->pos = r->last;
		r->line = r->item_line;
	}
}

/* Read again from the first item. */
void
upgstate_rewind(struct upgstate *r)
{
	r->pos = r->last = r->body;
	r->line = 5;
}
