/*
 * evmem.h -- libevent's memory, with freed blocks kept for reuse by size
 * class.
 *
 * A request through evhttp takes some 35 allocations from libevent: the
 * request, its header lists, a strdup of each header's name and value, the
 * parsed URI, evbuffers and their chains (a power of two, 512 B and up);
 * all are freed when the request is done.  musl's malloc and free are
 * slow at this (each finds the slot's group and checks its meta; ~45 ns a
 * pair against glibc's ~10), and free unmaps a group as soon as its last
 * slot is freed, so at one request per turn it mapped and unmapped a page
 * per request.
 *
 * evmem rounds a size of EVMEM_MAX bytes or less up to its class and asks
 * malloc for that: 12, 28, 44, ..., 252 bytes (16-byte steps less musl's 4
 * bytes of slot overhead, so the rounding costs nothing there), then 256,
 * 384, 512, 768, ..., 8 KiB (powers of two and the halves between; an
 * evbuffer chain is a class exactly).  A freed block goes on the list of
 * its class, and the next allocation of that class takes it back.  A
 * small block's class is remembered by its address in a fixed memo (8 KiB)
 * when it is handed out; a block the memo lost, or a large one, is kept in
 * the largest class its malloc_usable_size() holds whole (with musl: the
 * size asked, so its own class).  At most EVMEM_KEEP_BYTES are kept in all, and one class
 * keeps at most a quarter of that: a kept block pins its malloc group.
 * Larger blocks, and what does not fit the budget, go to free().  glibc's
 * malloc keeps such blocks itself: evmem_install() only installs the
 * functions with musl.  A block is malloc's either way, but one that
 * libevent hands to its caller to free (evbuffer_readln()'s line) goes back
 * through evmem_release(): a plain free() would leave its memo slot naming
 * an address malloc may give to anyone.
 *
 * Only the thread that called evmem_install() (the loop's) keeps blocks
 * and takes them back, so no lock is taken; on any other thread evmem is
 * malloc() and free().
 */
#ifndef AGENTD_EVMEM_H
#define AGENTD_EVMEM_H

#include <stddef.h>

#define EVMEM_MAX		(8 * 1024)	/* bytes, the largest class */
#define EVMEM_KEEP_BYTES	(256 * 1024)	/* bytes kept at most, in all */

/*
 * Make this thread the one that keeps blocks, and install evmem as
 * libevent's allocator (musl only); before any event call.
 */
void	 evmem_install(void);

/* The allocator itself, for libevent and the unit test. */
void	*evmem_malloc(size_t);
void	*evmem_realloc(void *, size_t);
void	 evmem_free(void *);

/* Free a block libevent handed to its caller to free. */
void	 evmem_release(void *);

/* Bytes kept now (/metrics, the unit test); the keeping thread only. */
size_t	 evmem_kept(void);

#endif /* AGENTD_EVMEM_H */
