/*
 * upgstate.h -- the state one agentd hands to its successor across execve
 * (upgrade.h), in the manner of systemd's serialization: plain "key=value"
 * lines in an anonymous file (a memfd), grouped into sections that start
 * with a "[name]" line (one per session, say).  Bytes that are no text (a
 * ring's chunks, queued stdin) go to a second memfd, the blob, and a line
 * names them by offset and length.  Fds that survive are named by number
 * in a line ("out-fd=12").
 *
 * The text is:
 *
 *	agentd-upgrade-state 1		the format's version
 *	blob-fd=N			the blob memfd
 *	blob-bytes=N
 *	blob-checksum=HEX		FNV-1a 64 of the blob
 *	...				sections and items
 *	checksum=HEX			FNV-1a 64 of every byte above this line
 *
 * A value is escaped: backslash, newline, and bytes below 0x20 or 0x7f and
 * above as \\, \n, \xHH.  Keys are [a-z0-9_-]+, sections [a-z0-9_-]+.
 *
 * The reader refuses a state whose version is not UPGSTATE_VERSION, whose
 * checksum or blob does not match, or that is cut short (no checksum
 * line).  Within a state that passes, a line it cannot parse is logged
 * "ignoring" and skipped, never fatal; what to do with an item whose key or
 * value a consumer does not know is the consumer's (log and skip too).
 *
 * Errors: -1 with a cause the caller can show.  Nothing here exits.
 */
#ifndef AGENTD_UPGSTATE_H
#define AGENTD_UPGSTATE_H

#include <stddef.h>
#include <stdint.h>

#define UPGSTATE_VERSION	1		/* the format written and read */
#define UPGSTATE_MAGIC		"agentd-upgrade-state"
#define UPGSTATE_TEXT_MAX	(256u << 20)	/* bytes of text read at most */
#define UPGSTATE_CAUSE_MAX	256		/* bytes of a cause */

struct upgstate_w;	/* a state being written */
struct upgstate;	/* a state being read */

/* Start a state: the blob memfd is made now.  NULL with cause on failure. */
struct upgstate_w *upgstate_writer(char *cause, size_t causelen);
/* Begin a section "[name]". */
void	 upgstate_section(struct upgstate_w *, const char *name);
/* Add key=value, the value printf'd then escaped. */
void	 upgstate_put(struct upgstate_w *, const char *key, const char *fmt,
	    ...) __attribute__((format(printf, 3, 4)));
/* Add key=value for a string of len bytes (any bytes), escaped. */
void	 upgstate_put_bytes(struct upgstate_w *, const char *key,
	    const void *data, size_t len);
/*
 * Append len bytes to the blob; returns their offset in it.  A write that
 * fails makes upgstate_finish() fail.
 */
uint64_t upgstate_blob(struct upgstate_w *, const void *data, size_t len);
/*
 * End the state: write the text (header, items, checksum) to a new memfd.
 * Returns 0 with *textfd and *blobfd set (both O_CLOEXEC, the caller's to
 * close), or -1 with cause.  Frees w either way.
 */
int	 upgstate_finish(struct upgstate_w *, int *textfd, int *blobfd,
	    char *cause, size_t causelen);
/* Give up a state being written (closes its blob). */
void	 upgstate_writer_free(struct upgstate_w *);

/*
 * Read the state in textfd (from offset 0): check the version, the
 * checksums and the blob (named by blob-fd=, which is closed with the
 * state, or at once when the state is refused).  NULL with cause when
 * refused; textfd is the caller's.
 */
struct upgstate *upgstate_open(int textfd, char *cause, size_t causelen);
/* Free a state read, and close its blob fd. */
void	 upgstate_close(struct upgstate *);

/* What upgstate_next() found. */
#define UPGSTATE_END		0	/* no more */
#define UPGSTATE_SECTION	1	/* "[name]": *key is the name */
#define UPGSTATE_ITEM		2	/* key=value, the value unescaped */

/*
 * The next section start or item, in order; lines that cannot be parsed
 * are logged and skipped.  *key and *value are valid until the next call;
 * *len is the value's length (it may hold NULs).
 */
int	 upgstate_next(struct upgstate *, const char **key,
	    const char **value, size_t *len);
/* Give the last section or item back (the next call returns it again),
   once; at UPGSTATE_END, nothing. */
void	 upgstate_unread(struct upgstate *);
/* Read again from the first item. */
void	 upgstate_rewind(struct upgstate *);
/* Line number of the last item returned (for a consumer's log). */
size_t	 upgstate_line(const struct upgstate *);
/* The blob's bytes [off, off + len), or NULL when out of range. */
const uint8_t *upgstate_blob_at(const struct upgstate *, uint64_t off,
	    uint64_t len);
/* The blob fd's number, as named by the state (to tell it apart). */
int	 upgstate_blob_fd(const struct upgstate *);

/* Parse a decimal u64 / i64; 0, or -1 when value is not one. */
int	 upgstate_u64(const char *value, uint64_t *out);
int	 upgstate_i64(const char *value, int64_t *out);
/* FNV-1a 64 of len bytes (the checksums). */
uint64_t upgstate_checksum(const void *, size_t len);

#endif /* AGENTD_UPGSTATE_H */
