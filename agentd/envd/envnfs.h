/*
 * envnfs.h -- envd's POST /init volumeMounts: NFSv3 mounts with envd's
 * options, made by a child process that is killed past envd's 10 s bound
 * (a mount(2) can hang on a server that does not answer; a thread could
 * not be stopped, a process can), remounted when the lifecycle changes.
 *
 * The paths mounted and their lifecycle are envstate.h's (handed over by a
 * live upgrade).  Event loop thread only.
 */
#ifndef AGENTD_ENVNFS_H
#define AGENTD_ENVNFS_H

#include <stddef.h>

#include <jansson.h>

#define ENVNFS_TIMEOUT_MS	10000	/* envd's nfsMountTimeout */
#define ENVNFS_MOUNTS_MAX	64	/* volumeMounts in one /init */
#define ENVNFS_PORT		2049	/* envd's port= and mountport= */
/* envd's options less the userland ones (fg), its sync a flag (MS_SYNC). */
#define ENVNFS_OPTIONS	"vers=3,proto=tcp,mountproto=tcp,port=2049," \
	"mountport=2049,rsize=1048576,wsize=1048576,noacl,noac," \
	"lookupcache=none,hard,nolock"

struct event_base;

/* The answer: NULL when every mount was made, else envd's cause. */
typedef void (*envnfs_done_fn)(const char *cause, void *arg);

/* Whether mounts is an array of {"nfs_target": "IP:/path", "path": "/x"}. */
int	envnfs_check(json_t *mounts, char *cause, size_t len);
/*
 * Mount those of mounts not mounted yet for lifecycle (NULL is ""),
 * unmounting what was there first; done is called once, later.  0 when
 * there is nothing to do (or mounts are being made already, as envd skips
 * them then): done is not called.  1 when started.
 */
int	envnfs_start(struct event_base *, json_t *mounts, const char *lifecycle,
	    envnfs_done_fn done, void *arg);

#endif /* AGENTD_ENVNFS_H */
