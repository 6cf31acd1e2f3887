/*
 * evmem.c -- libevent's memory, with freed blocks kept for reuse by size
 * class.
 */
#include <sys/queue.h>

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include <event2/event.h>

#include "evmem.h"

#define EVMEM_SMALL	16	/* classes of 12, 28, ..., 252 bytes */
#define EVMEM_LARGE	11	/* classes of 256, 384, 512, 768, ..., 8 KiB */
#define EVMEM_CLASSES	(EVMEM_SMALL + EVMEM_LARGE)
#define EVMEM_CLASS_KEEP_BYTES	(EVMEM_KEEP_BYTES / 4)	/* bytes, one class */
#define EVMEM_MEMO	1024	/* slots of the memo of small blocks' classes */
#define EVMEM_MEMO_MASK	((uintptr_t)15)	/* a slot's class bits: malloc
					   aligns to 16, a small class < 16 */

/* A kept block's first bytes. */
struct evmem_block {
	SLIST_ENTRY(evmem_block)	 entry;
};
SLIST_HEAD(evmem_list, evmem_block);

static int	evmem_log2(size_t);
static int	evmem_class_of(size_t);
static int	evmem_class_within(size_t);
static size_t	evmem_size_of(int);
static int	evmem_mine(void);
static _Atomic uintptr_t *evmem_slot(const void *);

static pthread_t	 evmem_owner;	/* the thread that keeps blocks */
static int		 evmem_owned;	/* evmem_owner is set */
static struct evmem_list evmem_lists[EVMEM_CLASSES];
static size_t		 evmem_class_bytes[EVMEM_CLASSES];
static size_t		 evmem_bytes;

/*
 * A small block's class by its address (block | class), written when it
 * is handed out and cleared when it is freed, so that free need not ask
 * malloc_usable_size() (musl's checks its group's meta: ~90 instructions,
 * 45 times a request).  A slot another block took is a miss, never a wrong
 * class: it is the last block handed out there, and any thread's
 * evmem_free() and evmem_realloc() clear it before the block goes.
 */
static _Atomic uintptr_t evmem_memo[EVMEM_MEMO];
_Static_assert(EVMEM_SMALL <= EVMEM_MEMO_MASK + 1, "a small class fits a slot");

/* The index of n's highest bit; n > 0. */
static int
evmem_log2(size_t n)
{
	return ((int)(sizeof(unsigned long) * 8) - 1 -
	    __builtin_clzl((unsigned long)n));
}

/* The bytes of class c. */
static size_t
evmem_size_of(int c)
{
	int	k = c - EVMEM_SMALL;

	if (c < EVMEM_SMALL)
		return ((size_t)16 * (c + 1) - 4);
	if (k % 2 == 0)
		return ((size_t)256 << (k / 2));
	return ((size_t)384 << (k / 2));
}

/* The smallest class that holds n <= EVMEM_MAX bytes. */
static int
evmem_class_of(size_t n)
{
	size_t	m;
	int	b;

	if (n <= 252)
		return ((int)((n + 3) / 16));
	if (n <= 256)
		return (EVMEM_SMALL);
	m = n - 1;
	b = evmem_log2(m);	/* >= 8 */
	return (EVMEM_SMALL + 2 * (b - 8) + 1 + (int)((m >> (b - 1)) & 1));
}

/*
 * The largest class a block of usable bytes holds whole, or -1: under the
 * smallest, or twice EVMEM_MAX and more (too much to keep for it).
 */
static int
evmem_class_within(size_t usable)
{
	int	b, k;

	if (usable < 12 || usable >= (size_t)EVMEM_MAX * 2)
		return (-1);
	if (usable < 256)
		return ((int)((usable + 4) / 16) - 1);
	b = evmem_log2(usable);	/* >= 8 */
	k = 2 * (b - 8) + (usable >= (size_t)3 << (b - 1));
	return (EVMEM_SMALL + (k < EVMEM_LARGE ? k : EVMEM_LARGE - 1));
}

/* The memo slot of block p. */
static _Atomic uintptr_t *
evmem_slot(const void *p)
{
	return (&evmem_memo[((uintptr_t)p >> 4) % EVMEM_MEMO]);
}

/* Whether this is the thread that keeps blocks: no lock is taken. */
static int
evmem_mine(void)
{
	return (evmem_owned && pthread_equal(pthread_self(), evmem_owner));
}

/* Make this thread the keeper; install evmem into libevent, with musl only. */
void
evmem_install(void)
{
	evmem_owner = pthread_self();
	evmem_owned = 1;
#ifndef __GLIBC__
	event_set_mem_functions(evmem_malloc, evmem_realloc, evmem_free);
#endif
}

/* Allocate n bytes: a kept block of n's class, else malloc's of that size. */
void *
evmem_malloc(size_t n)
{
	void	*p;
	size_t	 size;
	int	 c;

	if (n > EVMEM_MAX)
		return (malloc(n));
	c = evmem_class_of(n);
	size = evmem_size_of(c);
	if (evmem_mine() && (p = SLIST_FIRST(&evmem_lists[c])) != NULL) {
		SLIST_REMOVE_HEAD(&evmem_lists[c], entry);
		evmem_class_bytes[c] -= size;
		evmem_bytes -= size;
	} else if ((p = malloc(size)) == NULL)
		return (NULL);
	if (c < EVMEM_SMALL)
		atomic_store_explicit(evmem_slot(p), (uintptr_t)p | (uintptr_t)c,
		    memory_order_relaxed);
	return (p);
}

/* Resize with malloc's realloc (a kept block is never in use). */
void *
evmem_realloc(void *p, size_t n)
{
	_Atomic uintptr_t	*slot;
	uintptr_t		 v;

	if (p != NULL) {
		slot = evmem_slot(p);
		v = atomic_load_explicit(slot, memory_order_relaxed);
		if ((v & ~EVMEM_MEMO_MASK) == (uintptr_t)p)
			atomic_store_explicit(slot, 0, memory_order_relaxed);
	}
	return (realloc(p, n));
}

/*
 * Keep a freed block on the list of its class, within the budget; or free
 * it.  Its class: the memo's, else the largest its usable size holds
 * (musl's is the size asked: a class's size).
 */
void
evmem_free(void *p)
{
	_Atomic uintptr_t	*slot;
	uintptr_t		 v;
	size_t			 size;
	int			 c = -1;

	if (p == NULL)
		return;
	slot = evmem_slot(p);
	v = atomic_load_explicit(slot, memory_order_relaxed);
	if ((v & ~EVMEM_MEMO_MASK) == (uintptr_t)p) {
		atomic_store_explicit(slot, 0, memory_order_relaxed);
		c = (int)(v & EVMEM_MEMO_MASK);
	}
	if (evmem_mine() && (c >= 0 ||
	    (c = evmem_class_within(malloc_usable_size(p))) >= 0)) {
		size = evmem_size_of(c);
		if (evmem_bytes + size <= EVMEM_KEEP_BYTES &&
		    evmem_class_bytes[c] + size <= EVMEM_CLASS_KEEP_BYTES) {
			SLIST_INSERT_HEAD(&evmem_lists[c],
			    (struct evmem_block *)p, entry);
			evmem_class_bytes[c] += size;
			evmem_bytes += size;
			return;
		}
	}
	free(p);
}

/* Free what libevent allocated for its caller: with evmem_free() if it did. */
void
evmem_release(void *p)
{
#ifndef __GLIBC__
	evmem_free(p);
#else
	free(p);
#endif
}

/* Bytes kept now. */
size_t
evmem_kept(void)
{
	return (evmem_bytes);
}
