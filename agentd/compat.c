/*
 * compat.c -- where a library and musl disagree.
 *
 * evhttp asks getnameinfo() for the peer of every new connection, and on
 * failure calls exit(1).  musl's getnameinfo() fails for AF_UNIX (glibc's
 * answers), so the first request on the unix socket would end agentd.  The
 * static build links with -Wl,--wrap=getnameinfo: non-IP families get an
 * empty numeric answer here, the rest goes to the real function.
 */
#include <sys/socket.h>
#include <netdb.h>
#include <string.h>

int	__real_getnameinfo(const struct sockaddr *, socklen_t, char *, socklen_t,
	    char *, socklen_t, int);
int	__wrap_getnameinfo(const struct sockaddr *, socklen_t, char *, socklen_t,
	    char *, socklen_t, int);

/* getnameinfo() that also answers for AF_UNIX. */
int
__wrap_getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host,
    socklen_t hostlen, char *serv, socklen_t servlen, int flags)
{
	if (sa != NULL && sa->sa_family != AF_INET && sa->sa_family != AF_INET6) {
		if (host != NULL && hostlen > 0)
			strncpy(host, "unix", hostlen - 1)[hostlen - 1] = '\0';
		if (serv != NULL && servlen > 0)
			strncpy(serv, "0", servlen - 1)[servlen - 1] = '\0';
		return (0);
	}
	return (__real_getnameinfo(sa, salen, host, hostlen, serv, servlen,
	    flags));
}
