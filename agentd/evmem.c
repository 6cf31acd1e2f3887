/*
 * evmem.c -- libevent's memory, with freed buffer blocks kept for reuse.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>

#include <event2/event.h>

#include "evmem.h"

#define EVMEM_CLASSES	5	/* 512 B, 1 KiB, ..., 8 KiB */
#define EVMEM_SLOTS	64	/* blocks kept per class at most */

static int	evmem_class_of(size_t);

static pthread_mutex_t	 evmem_lock = PTHREAD_MUTEX_INITIALIZER;
static void		*evmem_blocks[EVMEM_CLASSES][EVMEM_SLOTS];
static int		 evmem_count[EVMEM_CLASSES];
static size_t		 evmem_bytes;

/*
 * The class of a size: the largest power of two kept that is <= n, or -1
 * (below EVMEM_MIN, or twice EVMEM_MAX and more: too much to keep for it).
 */
static int
evmem_class_of(size_t n)
{
	size_t	size = EVMEM_MIN;
	int	c = -1;

	if (n >= (size_t)EVMEM_MAX * 2)
		return (-1);
	while (size <= n && size <= EVMEM_MAX) {
		c++;
		size <<= 1;
	}
	return (c);
}

/* Install evmem as libevent's allocator, with musl only. */
void
evmem_install(void)
{
#ifndef __GLIBC__
	event_set_mem_functions(evmem_malloc, evmem_realloc, evmem_free);
#endif
}

/*
 * Allocate n bytes: a kept block if n is a class's size exactly (what
 * evbuffer chains ask for), else malloc's.
 */
void *
evmem_malloc(size_t n)
{
	void	*p = NULL;
	int	 c = evmem_class_of(n);

	if (c >= 0 && ((size_t)EVMEM_MIN << c) == n) {
		pthread_mutex_lock(&evmem_lock);
		if (evmem_count[c] > 0) {
			p = evmem_blocks[c][--evmem_count[c]];
			evmem_bytes -= n;
		}
		pthread_mutex_unlock(&evmem_lock);
	}
	return (p != NULL ? p : malloc(n));
}

/* Resize with malloc's realloc: a kept block is never in use. */
void *
evmem_realloc(void *p, size_t n)
{
	return (realloc(p, n));
}

/* Keep a freed block in the class its usable size covers, or free it. */
void
evmem_free(void *p)
{
	size_t	size;
	int	c;

	if (p == NULL)
		return;
	c = evmem_class_of(malloc_usable_size(p));
	if (c >= 0) {
		size = (size_t)EVMEM_MIN << c;
		pthread_mutex_lock(&evmem_lock);
		if (evmem_count[c] < EVMEM_SLOTS &&
		    evmem_bytes + size <= EVMEM_KEEP_BYTES) {
			evmem_blocks[c][evmem_count[c]++] = p;
			evmem_bytes += size;
			p = NULL;
		}
		pthread_mutex_unlock(&evmem_lock);
	}
	free(p);
}

/* Bytes kept now. */
size_t
evmem_kept(void)
{
	size_t	n;

	pthread_mutex_lock(&evmem_lock);
	n = evmem_bytes;
	pthread_mutex_unlock(&evmem_lock);
	return (n);
}
