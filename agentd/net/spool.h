/*
 * spool.h -- a request body kept on disk instead of in memory: an unlinked
 * file (O_TMPFILE) in a folder (--envd-spool-dir), so nothing stays behind
 * when agentd or the client goes.  The gate (gate.c) spools envd's POST
 * /files bodies over --max-body; envfiles.c spools a gzip body inflated.
 * Any thread, one spool at a time per caller.
 */
#ifndef AGENTD_SPOOL_H
#define AGENTD_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#define SPOOL_CAUSE_MAX		160	/* bytes of a cause */

struct evbuffer;
struct spool;

/*
 * Open a spool in dir.  expect: the bytes that will come, or 0 if unknown;
 * when the file system has less room it fails at once.  NULL with *status
 * (507: no room, 503: another failure) and cause.
 */
struct spool	*spool_open(const char *dir, uint64_t expect, int *status,
		    char *cause, size_t causelen);
/* Append len bytes: 0, or -1 with *status (507 on ENOSPC/EDQUOT) and cause. */
int		 spool_write(struct spool *, const void *, size_t len,
		    int *status, char *cause, size_t causelen);
/* Move the first len bytes of buf to the spool (they are drained): as above. */
int		 spool_write_buffer(struct spool *, struct evbuffer *, size_t len,
		    int *status, char *cause, size_t causelen);
/* Bytes written so far. */
uint64_t	 spool_size(const struct spool *);
/*
 * Map the spool's bytes, readable and writable (private: writes stay in
 * memory): *map and *len, NULL and 0 when empty.  0, or -1 with cause.
 * The map outlives the spool; the caller munmap()s it (spool_unmap()).
 */
int		 spool_map(struct spool *, char **map, size_t *len, char *cause,
		    size_t causelen);
/* Undo spool_map(). */
void		 spool_unmap(char *map, size_t len);
/* Close the file (its bytes go with it) and free the spool; NULL is fine. */
void		 spool_free(struct spool *);

#endif /* AGENTD_SPOOL_H */
