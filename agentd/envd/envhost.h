/*
 * envhost.h -- what envd's POST /init changes in the sandbox's system: the
 * trust store (caBundle), /etc/hosts (hyperloopIP) and the clock
 * (timestamp), done as envd does them, and the checks of that input.
 *
 * Nothing here knows HTTP or envd's state; envd.c checks the whole body
 * first (the *_check() functions, pure), then applies it.  Errors: -1 with
 * a cause.  Event loop thread only (each change is one small file).
 */
#ifndef AGENTD_ENVHOST_H
#define AGENTD_ENVHOST_H

#include <stddef.h>
#include <stdint.h>

#define ENVHOST_CA_BUNDLE	"/etc/ssl/certs/ca-certificates.crt"
#define ENVHOST_CA_EXTRA	"/usr/local/share/ca-certificates/e2b-ca.crt"
#define ENVHOST_HOSTS		"/etc/hosts"
#define ENVHOST_EVENTS_HOST	"events.e2b.local"
#define ENVHOST_FILE_MAX	(64u << 20)	/* a trust store or hosts file */
#define ENVHOST_PAST_NS		50000000LL	/* envd's maxTimeInPast */
#define ENVHOST_FUTURE_NS	5000000000LL	/* envd's maxTimeInFuture */

/* Whether pem is one or more PEM certificates and nothing else. */
int	 envhost_pem_check(const char *pem, char *cause, size_t len);
/* Whether ip is an IPv4 or IPv6 address. */
int	 envhost_ip_check(const char *ip, char *cause, size_t len);
/* An RFC 3339 time ("2026-01-02T03:04:05.5+01:00") as ns since the epoch. */
int	 envhost_time_parse(const char *, int64_t *ns, char *cause, size_t len);

/*
 * Install pem, normalized to one trailing newline (*out, the caller's to
 * free), as envd's installer does: appended to ENVHOST_CA_BUNDLE with prev
 * (the normalized bundle installed before, or NULL) taken out and no
 * second copy of itself, written whole to ENVHOST_CA_EXTRA; both written
 * aside and renamed.  Nothing is written when it is prev.
 */
int	 envhost_ca_install(const char *pem, const char *prev, char **out,
	    char *cause, size_t len);
/*
 * Point ENVHOST_EVENTS_HOST at ip in ENVHOST_HOSTS: its other entries go,
 * every other line stays; written aside and renamed, and not at all when
 * nothing changes.
 */
int	 envhost_hosts_set(const char *ip, char *cause, size_t len);
/*
 * Step CLOCK_REALTIME to ns when it is more than ENVHOST_PAST_NS behind or
 * ENVHOST_FUTURE_NS ahead of it (envd's shouldSetSystemTime): 1 when set,
 * 0 when within, -1 with cause when clock_settime() failed.
 */
int	 envhost_clock_set(int64_t ns, char *cause, size_t len);

#endif /* AGENTD_ENVHOST_H */
