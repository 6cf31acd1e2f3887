/*
 * collapse.h -- envd's POST /collapse on the --envd-listen listeners:
 * agentd's own anonymous read-write mappings (those /proc/self/maps names
 * no file or [heap] for, as envd picks them) advised MADV_HUGEPAGE, then
 * each whole 2 MiB chunk in them MADV_COLLAPSE'd (Linux 6.1); answers 200
 * with envd's CollapseResult (regions, chunks, collapsed, alreadyHuge,
 * skipped, elapsedMs: collapsed from smaps_rollup's AnonHugePages growth)
 * and a "note" saying why nothing was collapsed, when nothing was: no
 * whole chunk (a small agentd), or the kernel's refusal (EINVAL: no
 * MADV_COLLAPSE, or THP off).  Event loop thread only.
 */
#ifndef AGENTD_COLLAPSE_H
#define AGENTD_COLLAPSE_H

#define COLLAPSE_CHUNK		(2u << 20)	/* bytes, a huge page */

/* Register the route. */
void	collapse_register(void);

#endif /* AGENTD_COLLAPSE_H */
