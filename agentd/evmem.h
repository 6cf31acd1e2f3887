/*
 * evmem.h -- libevent's memory, with freed buffer blocks kept for reuse.
 *
 * libevent allocates an evbuffer chain (a power of two, 1 KiB and up) for
 * each read of a request and each answer's headers, and frees it once the
 * request is done.  musl's malloc unmaps a group of slots as soon as its
 * last one is freed, so at one request per turn it maps and unmaps a page
 * per request.  evmem keeps up to EVMEM_KEEP_BYTES of freed blocks between
 * EVMEM_MIN and EVMEM_MAX bytes, by power-of-two size class, and hands them
 * back to the next allocation of exactly a class's size (an evbuffer
 * chain's; other sizes are malloc's: kept blocks of other sizes did not
 * save anything measurable).  glibc's malloc keeps such blocks itself:
 * evmem_install() only installs the functions with musl.
 *
 * Thread-safe (one mutex); libevent calls it from the loop's thread.
 */
#ifndef AGENTD_EVMEM_H
#define AGENTD_EVMEM_H

#include <stddef.h>

#define EVMEM_MIN		512		/* bytes, the smallest class kept */
#define EVMEM_MAX		(8 * 1024)	/* bytes, the largest class kept */
#define EVMEM_KEEP_BYTES	(128 * 1024)	/* bytes kept at most, in all */

/* Install evmem as libevent's allocator (musl only); before any event call. */
void	 evmem_install(void);

/* The allocator itself, for libevent and the unit test. */
void	*evmem_malloc(size_t);
void	*evmem_realloc(void *, size_t);
void	 evmem_free(void *);

/* Bytes kept now (for the unit test and /metrics). */
size_t	 evmem_kept(void);

#endif /* AGENTD_EVMEM_H */
