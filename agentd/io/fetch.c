/*
 * fetch.c -- download a URL into a file (see fetch.h): URLs, connecting
 * with a deadline, TLS through mbedTLS, the HTTP/1.1 response (head,
 * Content-Length, chunked and close-delimited bodies), redirects.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/oid.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "config.h"
#include "fetch.h"
#include "fetchparse.h"
#include "fileio.h"
#include "proto.h"
#include "util.h"

#define FETCH_BUF		(64 << 10)	/* bytes read from a connection at once */
#define FETCH_HEADERS_MAX	128		/* lines in a response head */
#define FETCH_ASN1_IP		(MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) /* iPAddress */
#define FETCH_CA_MAX		(16 << 20)	/* bytes of a CA bundle */

/* One fetch: its request, its deadline, its TLS and its connection. */
struct fetch {
	const struct proto_fetch	*req;
	uid_t				 owner;		/* symlinks trusted */
	atomic_int			*cancel;
	uint64_t			 max_bytes;	/* of the download */
	int				 hop;		/* 0: the request's URL */
	int				 local;		/* its host is a local address */
	int64_t				 deadline;	/* monotonic ms; 0: none */
	const char			*phase;		/* for timeout messages */
	struct proto_err		*err;
	int				 failed;	/* err is filled */

	/* TLS, set up at the first https:// hop. */
	int				 tls_ready;
	mbedtls_x509_crt		 ca;
	mbedtls_entropy_context		 entropy;
	mbedtls_ctr_drbg_context	 drbg;
	mbedtls_ssl_config		 conf;

	/* The connection of the current hop. */
	int				 fd;
	int				 tls;
	mbedtls_ssl_context		 ssl;
	unsigned char			*buf;		/* FETCH_BUF */
	size_t				 pos, len;
	int				 eof;
};

static size_t	fetch_max_bytes;	/* --max-fetch-bytes */

static int	fetch_fail(struct fetch *, int status, const char *code,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int	fetch_url_parse(struct fetch *, const char *, struct fetch_url *);
static char	*fetch_url_resolve(struct fetch *, const char *,
		    const struct fetch_url *, const char *);
static int	fetch_wait(struct fetch *, int events);
static int	fetch_connect(struct fetch *, const struct fetch_url *);
static int	fetch_tls_setup(struct fetch *);
static int	fetch_tls_start(struct fetch *, const struct fetch_url *);
static int	fetch_tls_check_ip(struct fetch *, const struct fetch_url *);
static int	fetch_bio_send(void *, const unsigned char *, size_t);
static int	fetch_bio_recv(void *, unsigned char *, size_t);
static ssize_t	fetch_read(struct fetch *, void *, size_t);
static int	fetch_fill(struct fetch *);
static int	fetch_write_all(struct fetch *, const void *, size_t);
static int	fetch_getline(struct fetch *, char *, size_t, size_t *);
static int	fetch_head(struct fetch *, struct fetch_head *);
static int	fetch_body(struct fetch *, const struct fetch_head *,
		    struct fileio_tmp *, mbedtls_sha256_context *, uint64_t *);
static int	fetch_sink(struct fetch *, struct fileio_tmp *,
		    mbedtls_sha256_context *, const void *, size_t, uint64_t *);
static void	fetch_close(struct fetch *);
static void	fetch_tls_free(struct fetch *);
static int	fetch_hop(struct fetch *, const char *, struct fileio_tmp *,
		    mbedtls_sha256_context *, uint64_t *, char **);
static void	fetch_mbedtls_error(int, char *, size_t);
static int	fetch_addr_local(const struct sockaddr *);
static int	fetch_ca_load(struct fetch *, const char *);
static int	fetch_oom(struct fetch *);

/* Fill the fetch's error once (the first reason wins); return -1. */
static int
fetch_fail(struct fetch *f, int status, const char *code, const char *fmt,
    ...)
{
	va_list	ap;

	if (f->failed)
		return (-1);
	f->failed = 1;
	f->err->status = status;
	f->err->code = code;
	va_start(ap, fmt);
	vsnprintf(f->err->message, sizeof f->err->message, fmt, ap);
	va_end(ap);
	return (-1);
}

/* No memory for a fetch: 503, the client may try again. */
static int
fetch_oom(struct fetch *f)
{
	return (fetch_fail(f, 503, "out_of_memory",
	    "no memory for the fetch; try again later"));
}

/*
 * Whether an address is this machine's or its link's: loopback, link-local
 * (169.254.0.0/16 holds the clouds' metadata services), unspecified; IPv4
 * mapped into IPv6 too.
 */
static int
fetch_addr_local(const struct sockaddr *sa)
{
	const struct sockaddr_in6	*s6;
	const uint8_t			*a;
	uint32_t			 v4;

	if (sa->sa_family == AF_INET) {
		v4 = ntohl(((const struct sockaddr_in *)(const void *)sa)->
		    sin_addr.s_addr);
		goto v4;
	}
	if (sa->sa_family != AF_INET6)
		return (0);
	s6 = (const struct sockaddr_in6 *)(const void *)sa;
	a = s6->sin6_addr.s6_addr;
	if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
		v4 = (uint32_t)a[12] << 24 | (uint32_t)a[13] << 16 |
		    (uint32_t)a[14] << 8 | a[15];
		goto v4;
	}
	return (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
	    IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr) ||
	    IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr));
v4:
	return ((v4 >> 24) == 127 || (v4 >> 24) == 0 ||
	    (v4 >> 16) == 0xa9fe);
}

/*
 * Whether an address is one of this machine's interfaces' now (getifaddrs):
 * a service bound to the wildcard answers there as on loopback.  IPv4
 * mapped into IPv6 is compared as IPv4.  When the interfaces cannot be
 * read, every address counts as ours: a redirect is refused, not let by.
 */
static int
fetch_addr_ours(const struct sockaddr *sa)
{
	const struct sockaddr_in6	*s6;
	struct ifaddrs			*ifs, *i;
	struct in_addr			 v4;
	const uint8_t			*a;
	int				 fam = sa->sa_family, ours = 0;

	if (fam == AF_INET)
		v4 = ((const struct sockaddr_in *)(const void *)sa)->sin_addr;
	else if (fam == AF_INET6) {
		s6 = (const struct sockaddr_in6 *)(const void *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			a = s6->sin6_addr.s6_addr;
			memcpy(&v4, a + 12, sizeof v4);
			fam = AF_INET;
		}
	} else
		return (0);
	if (getifaddrs(&ifs) == -1)
		return (1);
	for (i = ifs; i != NULL && !ours; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != fam)
			continue;
		if (fam == AF_INET)
			ours = memcmp(&((const struct sockaddr_in *)(const void *)
			    i->ifa_addr)->sin_addr, &v4, sizeof v4) == 0;
		else
			ours = memcmp(&((const struct sockaddr_in6 *)(const void *)
			    i->ifa_addr)->sin6_addr, &s6->sin6_addr,
			    sizeof s6->sin6_addr) == 0;
	}
	freeifaddrs(ifs);
	return (ours);
}

/* mbedTLS's text for an error code. */
static void
fetch_mbedtls_error(int ret, char *buf, size_t len)
{
#ifdef MBEDTLS_ERROR_C
	mbedtls_strerror(ret, buf, len);
#else
	snprintf(buf, len, "mbedTLS error -0x%04x", (unsigned)-ret);
#endif
}

/* SHA-256 of buf. */
void
fetch_sha256(const void *buf, size_t len, uint8_t out[32])
{
	mbedtls_sha256_ret(buf, len, out, 0);
}

/* Take an absolute http(s) URL apart (fetchparse_url). */
static int
fetch_url_parse(struct fetch *f, const char *url, struct fetch_url *u)
{
	char	cause[sizeof f->err->message];

	if (fetchparse_url(url, u, cause, sizeof cause) == 0)
		return (0);
	if (errno == ENOMEM)
		return (fetch_oom(f));
	return (fetch_fail(f, 400, "invalid_request", "%s", cause));
}

/* The absolute URL a Location names, relative to url; malloc'd. */
static char *
fetch_url_resolve(struct fetch *f, const char *url, const struct fetch_url *u,
    const char *loc)
{
	char	cause[sizeof f->err->message], *out;

	if ((out = fetchparse_resolve(url, u, loc, cause, sizeof cause)) != NULL)
		return (out);
	if (errno == ENOMEM)
		fetch_oom(f);
	else
		fetch_fail(f, 502, "fetch_failed", "%s", cause);
	return (NULL);
}

/*
 * Wait until the connection is ready for events, watching the deadline
 * and the cancel flag.  0, or -1 with the fetch's error.
 */
static int
fetch_wait(struct fetch *f, int events)
{
	struct pollfd	pfd;
	int64_t		now, left;
	int		ms, n;

	for (;;) {
		if (atomic_load(f->cancel))
			return (fetch_fail(f, 499, "cancelled",
			    "cancelled: the client went away"));
		ms = FETCH_POLL_MS;
		if (f->deadline != 0) {
			now = clock_mono_ms();
			if ((left = f->deadline - now) <= 0)
				return (fetch_fail(f, 502, "fetch_failed",
				    "timeout: %" PRId64 " ms passed while %s",
				    f->req->timeout_ms, f->phase));
			if (left < ms)
				ms = (int)left;
		}
		pfd.fd = f->fd;
		pfd.events = (short)events;
		pfd.revents = 0;
		if ((n = poll(&pfd, 1, ms)) > 0)
			return (0);
		if (n == -1 && errno != EINTR)
			return (fetch_fail(f, 502, "fetch_failed", "poll: %s",
			    strerror(errno)));
	}
}

/* Resolve the host and connect to the first address that answers. */
static int
fetch_connect(struct fetch *f, const struct fetch_url *u)
{
	struct addrinfo	 hints, *res, *ai;
	char		 addr[INET6_ADDRSTRLEN];
	socklen_t	 len;
	int		 error, so_error = 0, last = 0, local = 0;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	f->phase = "resolving the host";
	if ((error = getaddrinfo(u->host, u->port, &hints, &res)) != 0)
		return (fetch_fail(f, 502, "fetch_failed",
		    "DNS: cannot resolve '%s': %s", u->host,
		    error == EAI_SYSTEM ? strerror(errno) : gai_strerror(error)));
	f->phase = "connecting";
	addr[0] = '\0';
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof addr,
		    NULL, 0, NI_NUMERICHOST);
		/*
		 * A redirect must not lead a remote URL to a local service:
		 * loopback, link-local, or an address of ours.
		 */
		if (f->hop > 0 && !f->local && (fetch_addr_local(ai->ai_addr) ||
		    fetch_addr_ours(ai->ai_addr))) {
			last = EACCES;
			local++;
			continue;
		}
		f->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, ai->ai_protocol);
		if (f->fd == -1) {
			last = errno;
			continue;
		}
		if (connect(f->fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS) {
			if (fetch_wait(f, POLLOUT) != 0) {
				freeaddrinfo(res);
				return (-1);
			}
			len = sizeof so_error;
			if (getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &so_error,
			    &len) == 0 && so_error == 0)
				break;
			last = so_error;
		} else
			last = errno;
		close(f->fd);
		f->fd = -1;
	}
	if (f->fd != -1 && f->hop == 0)
		f->local = fetch_addr_local(ai->ai_addr);
	freeaddrinfo(res);
	if (f->fd == -1 && local > 0)
		return (fetch_fail(f, 502, "fetch_failed", "redirect to a local "
		    "address refused: %s (%s) from a URL that is not local",
		    u->host, addr));
	if (f->fd == -1)
		return (fetch_fail(f, 502, "fetch_failed",
		    "connect to %s port %s%s%s%s: %s", u->host, u->port,
		    addr[0] != '\0' && strcmp(addr, u->host) != 0 ? " (" : "",
		    addr[0] != '\0' && strcmp(addr, u->host) != 0 ? addr : "",
		    addr[0] != '\0' && strcmp(addr, u->host) != 0 ? ")" : "",
		    strerror(last)));
	return (0);
}

/* Send for mbedTLS, blocking on the socket with the deadline. */
static int
fetch_bio_send(void *arg, const unsigned char *buf, size_t len)
{
	struct fetch	*f = arg;
	ssize_t		 n;

	for (;;) {
		n = send(f->fd, buf, len, MSG_NOSIGNAL);
		if (n >= 0)
			return ((int)n);
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			fetch_fail(f, 502, "fetch_failed", "send: %s",
			    strerror(errno));
			return (MBEDTLS_ERR_NET_SEND_FAILED);
		}
		if (fetch_wait(f, POLLOUT) != 0)
			return (MBEDTLS_ERR_NET_SEND_FAILED);
	}
}

/* Receive for mbedTLS, blocking on the socket with the deadline. */
static int
fetch_bio_recv(void *arg, unsigned char *buf, size_t len)
{
	struct fetch	*f = arg;
	ssize_t		 n;

	for (;;) {
		n = recv(f->fd, buf, len, 0);
		if (n >= 0)
			return ((int)n);
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			fetch_fail(f, 502, "fetch_failed", "recv: %s",
			    strerror(errno));
			return (MBEDTLS_ERR_NET_RECV_FAILED);
		}
		if (fetch_wait(f, POLLIN) != 0)
			return (MBEDTLS_ERR_NET_RECV_FAILED);
	}
}

/*
 * Parse the CA bundle at path into f->ca: mbedTLS's return (< 0 when
 * the text is no certificate), or -1 with the fetch's error (-1 is no
 * mbedTLS error).  Opened as the fetch's user would, never blocking (a
 * FIFO, a device: 400), at most FETCH_CA_MAX bytes.
 */
static int
fetch_ca_load(struct fetch *f, const char *path)
{
	struct stat	 st;
	char		*buf = NULL;
	size_t		 len = 0;
	int		 fd, ret;

	if ((fd = fileio_open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, f->owner,
	    f->err)) == -1) {
		if (f->req->ca_file == NULL)
			return (fetch_fail(f, 502, "fetch_failed", "TLS verify: "
			    "cannot open the CA certificates %s", path));
		if (f->err->status != 403)
			return (fetch_fail(f, 400, "invalid_request", "ca_file: "
			    "cannot load %.160s: %s", path, strerror(errno)));
		f->failed = 1;
		return (-1);
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_size > FETCH_CA_MAX) {
		close(fd);
		return (fetch_fail(f, f->req->ca_file != NULL ? 400 : 502,
		    f->req->ca_file != NULL ? "invalid_request" : "fetch_failed",
		    "ca_file: %.160s is not a regular file of at most %d bytes",
		    path, FETCH_CA_MAX));
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		close(fd);
		return (fetch_oom(f));
	}
	len = fd_read_full(fd, buf, (size_t)st.st_size);
	close(fd);
	buf[len] = '\0';
	/* PEM wants the NUL counted; DER is taken as it is. */
	ret = mbedtls_x509_crt_parse(&f->ca, (const unsigned char *)buf,
	    len + (strstr(buf, "-----BEGIN ") != NULL));
	free(buf);
	return (ret == -1 ? MBEDTLS_ERR_X509_INVALID_FORMAT : ret);
}

/* Load the CA certificates and seed the random generator, once. */
static int
fetch_tls_setup(struct fetch *f)
{
	static const char *const	 bundles[] = {
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/cert.pem",
	};
	const char			*ca = f->req->ca_file;
	char				 msg[128];
	size_t				 i;
	int				 ret;

	if (f->tls_ready)
		return (0);
	mbedtls_x509_crt_init(&f->ca);
	mbedtls_entropy_init(&f->entropy);
	mbedtls_ctr_drbg_init(&f->drbg);
	mbedtls_ssl_config_init(&f->conf);
	f->tls_ready = 1;

	if (ca == NULL && (ca = getenv("SSL_CERT_FILE")) != NULL &&
	    access(ca, R_OK) != 0)
		ca = NULL;
	for (i = 0; ca == NULL && i < nitems(bundles); i++) {
		if (access(bundles[i], R_OK) == 0)
			ca = bundles[i];
	}
	if (ca == NULL)
		return (fetch_fail(f, 502, "fetch_failed", "TLS verify: no CA "
		    "certificates (%s missing; see ca_file)", bundles[0]));
	if ((ret = fetch_ca_load(f, ca)) == -1)
		return (-1);
	if (ret < 0 || f->ca.version == 0) {
		fetch_mbedtls_error(ret, msg, sizeof msg);
		if (f->req->ca_file != NULL)
			return (fetch_fail(f, 400, "invalid_request",
			    "ca_file: cannot load %.160s: %s", ca,
			    ret < 0 ? msg : "no certificate in it"));
		return (fetch_fail(f, 502, "fetch_failed", "TLS verify: cannot "
		    "load the CA certificates %s: %s", ca,
		    ret < 0 ? msg : "no certificate in it"));
	}
	if ((ret = mbedtls_ctr_drbg_seed(&f->drbg, mbedtls_entropy_func,
	    &f->entropy, (const unsigned char *)"agentd fetch", 12)) != 0) {
		fetch_mbedtls_error(ret, msg, sizeof msg);
		return (fetch_fail(f, 502, "fetch_failed", "TLS: seeding the "
		    "random generator: %s", msg));
	}
	if ((ret = mbedtls_ssl_config_defaults(&f->conf, MBEDTLS_SSL_IS_CLIENT,
	    MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT)) != 0) {
		fetch_mbedtls_error(ret, msg, sizeof msg);
		return (fetch_fail(f, 502, "fetch_failed", "TLS: %s", msg));
	}
	mbedtls_ssl_conf_authmode(&f->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
	mbedtls_ssl_conf_ca_chain(&f->conf, &f->ca, NULL);
	mbedtls_ssl_conf_rng(&f->conf, mbedtls_ctr_drbg_random, &f->drbg);
	return (0);
}

/*
 * An IP literal: the certificate must name the address in an iPAddress
 * subjectAltName, or, when it has no subjectAltName at all, in its CN
 * (mbedTLS 2.28 checks only DNS names).
 */
static int
fetch_tls_check_ip(struct fetch *f, const struct fetch_url *u)
{
	const mbedtls_x509_crt		*peer;
	const mbedtls_x509_sequence	*san;
	const mbedtls_x509_name		*name;
	unsigned char			 addr[16];
	size_t				 alen;

	if ((peer = mbedtls_ssl_get_peer_cert(&f->ssl)) == NULL)
		return (fetch_fail(f, 502, "fetch_failed",
		    "TLS verify: no certificate from %s", u->host));
	if (inet_pton(AF_INET, u->host, addr) == 1)
		alen = 4;
	else if (inet_pton(AF_INET6, u->host, addr) == 1)
		alen = 16;
	else
		alen = 0;
	if (peer->ext_types & MBEDTLS_X509_EXT_SUBJECT_ALT_NAME) {
		for (san = &peer->subject_alt_names; san != NULL;
		    san = san->next) {
			if (san->buf.tag == FETCH_ASN1_IP && alen != 0 &&
			    san->buf.len == alen &&
			    memcmp(san->buf.p, addr, alen) == 0)
				return (0);
		}
	} else {
		for (name = &peer->subject; name != NULL; name = name->next) {
			if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &name->oid) == 0 &&
			    name->val.len == strlen(u->host) &&
			    memcmp(name->val.p, u->host, name->val.len) == 0)
				return (0);
		}
	}
	return (fetch_fail(f, 502, "fetch_failed", "TLS verify failed for "
	    "%s: the certificate does not name this address", u->host));
}

/* The TLS handshake on the connected socket, certificates verified. */
static int
fetch_tls_start(struct fetch *f, const struct fetch_url *u)
{
	char		 msg[256];
	uint32_t	 flags;
	size_t		 n;
	int		 ret;

	if (fetch_tls_setup(f) != 0)
		return (-1);
	mbedtls_ssl_init(&f->ssl);
	f->tls = 1;
	if ((ret = mbedtls_ssl_setup(&f->ssl, &f->conf)) != 0 ||
	    (!u->ip && (ret = mbedtls_ssl_set_hostname(&f->ssl, u->host)) != 0)) {
		fetch_mbedtls_error(ret, msg, sizeof msg);
		return (fetch_fail(f, 502, "fetch_failed", "TLS: %s", msg));
	}
	mbedtls_ssl_set_bio(&f->ssl, f, fetch_bio_send, fetch_bio_recv, NULL);
	f->phase = "in the TLS handshake";
	while ((ret = mbedtls_ssl_handshake(&f->ssl)) != 0) {
		if (ret == MBEDTLS_ERR_SSL_WANT_READ ||
		    ret == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (f->failed)
			return (-1);	/* timeout, cancel, socket */
		if (ret == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
			flags = mbedtls_ssl_get_verify_result(&f->ssl);
			msg[0] = '\0';
			mbedtls_x509_crt_verify_info(msg, sizeof msg, "", flags);
			for (n = strlen(msg); n > 0 && msg[n - 1] == '\n'; n--)
				msg[n - 1] = '\0';
			for (n = 0; msg[n] != '\0'; n++) {
				if (msg[n] == '\n')
					msg[n] = ';';
			}
			return (fetch_fail(f, 502, "fetch_failed",
			    "TLS verify failed for %s: %s", u->host, msg));
		}
		fetch_mbedtls_error(ret, msg, sizeof msg);
		return (fetch_fail(f, 502, "fetch_failed",
		    "TLS handshake with %s failed: %s", u->host, msg));
	}
	if (u->ip && fetch_tls_check_ip(f, u) != 0)
		return (-1);
	return (0);
}

/* Read up to len bytes: >0, 0 at the end of the stream, -1 on error. */
static ssize_t
fetch_read(struct fetch *f, void *buf, size_t len)
{
	ssize_t	n;
	int	ret;
	char	msg[128];

	if (f->pos < f->len) {
		n = (ssize_t)(f->len - f->pos < len ? f->len - f->pos : len);
		memcpy(buf, f->buf + f->pos, (size_t)n);
		f->pos += (size_t)n;
		return (n);
	}
	if (f->eof)
		return (0);
	if (!f->tls) {
		for (;;) {
			n = recv(f->fd, buf, len, 0);
			if (n >= 0)
				break;
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return (fetch_fail(f, 502, "fetch_failed",
				    "recv: %s", strerror(errno)));
			if (fetch_wait(f, POLLIN) != 0)
				return (-1);
		}
	} else {
		do
			ret = mbedtls_ssl_read(&f->ssl, buf, len);
		while (ret == MBEDTLS_ERR_SSL_WANT_READ ||
		    ret == MBEDTLS_ERR_SSL_WANT_WRITE);
		/* A close without close_notify ends a body too. */
		if (ret == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY ||
		    (ret == MBEDTLS_ERR_SSL_CONN_EOF && !f->failed))
			ret = 0;
		if (ret < 0) {
			if (f->failed)
				return (-1);
			fetch_mbedtls_error(ret, msg, sizeof msg);
			return (fetch_fail(f, 502, "fetch_failed", "TLS: %s",
			    msg));
		}
		n = ret;
	}
	if (n == 0)
		f->eof = 1;
	return (n);
}

/* Read into the connection's buffer; for lines. */
static int
fetch_fill(struct fetch *f)
{
	ssize_t	n;

	f->pos = f->len = 0;
	if ((n = fetch_read(f, f->buf, FETCH_BUF)) < 0)
		return (-1);
	f->len = (size_t)n;
	return (n > 0 ? 0 : 1);
}

/*
 * A line of at most size - 1 bytes, CR LF (or LF) stripped, into line.
 * 0; 1 at the end of the stream before any byte; -1 with the error.
 */
static int
fetch_getline(struct fetch *f, char *line, size_t size, size_t *total)
{
	size_t	n = 0;
	int	c, r;

	for (;;) {
		if (f->pos == f->len) {
			if ((r = fetch_fill(f)) < 0)
				return (-1);
			if (r > 0) {
				if (n == 0)
					return (1);
				return (fetch_fail(f, 502, "fetch_failed",
				    "the connection closed in a response line"));
			}
		}
		c = f->buf[f->pos++];
		if (total != NULL && ++*total > FETCH_HEAD_MAX)
			return (fetch_fail(f, 502, "fetch_failed",
			    "the response head is larger than %d bytes",
			    FETCH_HEAD_MAX));
		if (c == '\n')
			break;
		if (n + 1 >= size)
			return (fetch_fail(f, 502, "fetch_failed",
			    "a response line is longer than %zu bytes",
			    size - 1));
		line[n++] = (char)c;
	}
	if (n > 0 && line[n - 1] == '\r')
		n--;
	line[n] = '\0';
	return (0);
}

/* Read and parse a response head (1xx heads are skipped). */
static int
fetch_head(struct fetch *f, struct fetch_head *h)
{
	char		*line, cause[sizeof f->err->message];
	size_t		 total = 0, nlines;
	int		 r;

	if ((line = malloc(FETCH_LINE_MAX + 1)) == NULL)
		return (fetch_oom(f));
	f->phase = "waiting for the response";
again:
	free(h->location);
	memset(h, 0, sizeof *h);
	if ((r = fetch_getline(f, line, FETCH_LINE_MAX + 1, &total)) != 0) {
		if (r > 0)
			fetch_fail(f, 502, "fetch_failed",
			    "the server closed the connection without an answer");
		goto fail;
	}
	if (fetchparse_status(line, h) != 0) {
		fetch_fail(f, 502, "fetch_failed", "not an HTTP/1.x answer: "
		    "%.60s", line);
		goto fail;
	}
	for (nlines = 0;; nlines++) {
		if ((r = fetch_getline(f, line, FETCH_LINE_MAX + 1, &total)) != 0) {
			if (r > 0)
				fetch_fail(f, 502, "fetch_failed", "the "
				    "connection closed in the response head");
			goto fail;
		}
		if (line[0] == '\0')
			break;
		if (nlines >= FETCH_HEADERS_MAX) {
			fetch_fail(f, 502, "fetch_failed", "more than %d "
			    "header lines in the answer", FETCH_HEADERS_MAX);
			goto fail;
		}
		if (fetchparse_header(line, h, cause, sizeof cause) != 0) {
			if (errno == ENOMEM)
				fetch_oom(f);
			else
				fetch_fail(f, 502, "fetch_failed", "%s", cause);
			goto fail;
		}
	}
	if (h->status >= 100 && h->status < 200 && h->status != 101)
		goto again;
	free(line);
	return (0);
fail:
	free(line);
	free(h->location);
	h->location = NULL;
	return (-1);
}

/* Write received bytes to the file and the hash. */
static int
fetch_sink(struct fetch *f, struct fileio_tmp *t, mbedtls_sha256_context *sha,
    const void *buf, size_t len, uint64_t *size)
{
	if (*size + len > f->max_bytes)
		return (fetch_fail(f, 502, "fetch_failed", "the download is "
		    "larger than --max-fetch-bytes (%" PRIu64 " bytes)",
		    f->max_bytes));
	if (fileio_tmp_write(t, buf, len, f->err) != 0) {
		f->failed = 1;
		return (-1);
	}
	mbedtls_sha256_update_ret(sha, buf, len);
	*size += len;
	return (0);
}

/* Read the body as the head frames it into the file. */
static int
fetch_body(struct fetch *f, const struct fetch_head *h, struct fileio_tmp *t,
    mbedtls_sha256_context *sha, uint64_t *size)
{
	unsigned char	*buf;
	char		 line[256];
	uint64_t	 left, chunk;
	ssize_t		 n;
	size_t		 want;
	int		 rc = -1, r;

	if (h->has_length && h->length > f->max_bytes)
		return (fetch_fail(f, 502, "fetch_failed", "the download has "
		    "%" PRIu64 " bytes, more than --max-fetch-bytes (%" PRIu64
		    ")", h->length, f->max_bytes));
	if ((buf = malloc(FETCH_BUF)) == NULL)
		return (fetch_oom(f));
	f->phase = "reading the body";
	if (h->status == 204 || h->status == 205 || h->status == 304) {
		rc = 0;
	} else if (h->chunked) {
		for (;;) {
			if ((r = fetch_getline(f, line, sizeof line, NULL)) != 0) {
				if (r > 0)
					fetch_fail(f, 502, "fetch_failed", "the "
					    "connection closed in a chunked body "
					    "after %" PRIu64 " bytes", *size);
				goto out;
			}
			if (fetchparse_chunk_size(line, &chunk) != 0) {
				fetch_fail(f, 502, "fetch_failed",
				    "a bad chunk size: %.40s", line);
				goto out;
			}
			if (chunk == 0)
				break;
			for (left = chunk; left > 0; left -= (uint64_t)n) {
				want = left < FETCH_BUF ? (size_t)left : FETCH_BUF;
				if ((n = fetch_read(f, buf, want)) < 0)
					goto out;
				if (n == 0) {
					fetch_fail(f, 502, "fetch_failed", "the "
					    "connection closed in a chunk after "
					    "%" PRIu64 " bytes", *size);
					goto out;
				}
				if (fetch_sink(f, t, sha, buf, (size_t)n, size) != 0)
					goto out;
			}
			if ((r = fetch_getline(f, line, sizeof line, NULL)) != 0 ||
			    line[0] != '\0') {
				if (r >= 0)
					fetch_fail(f, 502, "fetch_failed",
					    "a chunk without its CRLF");
				goto out;
			}
		}
		/* Trailers, up to the empty line (or the end). */
		do {
			if ((r = fetch_getline(f, line, sizeof line, NULL)) < 0)
				goto out;
		} while (r == 0 && line[0] != '\0');
		rc = 0;
	} else if (h->has_length) {
		for (left = h->length; left > 0; left -= (uint64_t)n) {
			want = left < FETCH_BUF ? (size_t)left : FETCH_BUF;
			if ((n = fetch_read(f, buf, want)) < 0)
				goto out;
			if (n == 0) {
				fetch_fail(f, 502, "fetch_failed", "the connection "
				    "closed after %" PRIu64 " of %" PRIu64 " bytes",
				    *size, h->length);
				goto out;
			}
			if (fetch_sink(f, t, sha, buf, (size_t)n, size) != 0)
				goto out;
		}
		rc = 0;
	} else {
		while ((n = fetch_read(f, buf, FETCH_BUF)) > 0) {
			if (fetch_sink(f, t, sha, buf, (size_t)n, size) != 0)
				goto out;
		}
		rc = n == 0 ? 0 : -1;
	}
out:
	free(buf);
	return (rc);
}

/* Close the current hop's connection. */
static void
fetch_close(struct fetch *f)
{
	if (f->tls) {
		mbedtls_ssl_free(&f->ssl);
		f->tls = 0;
	}
	if (f->fd != -1)
		close(f->fd);
	f->fd = -1;
	f->pos = f->len = 0;
	f->eof = 0;
}

/* Free the TLS state of the fetch. */
static void
fetch_tls_free(struct fetch *f)
{
	if (!f->tls_ready)
		return;
	mbedtls_ssl_config_free(&f->conf);
	mbedtls_ctr_drbg_free(&f->drbg);
	mbedtls_entropy_free(&f->entropy);
	mbedtls_x509_crt_free(&f->ca);
	f->tls_ready = 0;
}

/*
 * One request: 0 with the body in the file, 1 with *next set to the URL
 * of a redirect, or -1 with the error.
 */
static int
fetch_hop(struct fetch *f, const char *url, struct fileio_tmp *t,
    mbedtls_sha256_context *sha, uint64_t *size, char **next)
{
	struct fetch_url	 u;
	struct fetch_head	 h;
	char			*req = NULL;
	int			 rc = -1, len;

	memset(&h, 0, sizeof h);
	if (fetch_url_parse(f, url, &u) != 0) {
		/* A bad Location is the server's fault, not the client's. */
		if (f->hop > 0 && f->err->status == 400) {
			f->err->status = 502;
			f->err->code = "fetch_failed";
		}
		return (-1);
	}
	if (fetch_connect(f, &u) != 0)
		goto out;
	if (u.tls && fetch_tls_start(f, &u) != 0)
		goto out;
	len = asprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\n"
	    "User-Agent: agentd/%s\r\nAccept: */*\r\n"
	    "Accept-Encoding: identity\r\nConnection: close\r\n\r\n",
	    u.target, u.hostport, AGENTD_VERSION);
	if (len == -1) {
		req = NULL;
		fetch_oom(f);
		goto out;
	}
	f->phase = "sending the request";
	if (fetch_write_all(f, req, (size_t)len) != 0)
		goto out;
	if (fetch_head(f, &h) != 0)
		goto out;
	switch (h.status) {
	case 301: case 302: case 303: case 307: case 308:
		if (h.location == NULL || *h.location == '\0') {
			fetch_fail(f, 502, "fetch_failed", "HTTP status %d "
			    "without a Location from %.120s", h.status, url);
			goto out;
		}
		if ((*next = fetch_url_resolve(f, url, &u, h.location)) != NULL)
			rc = 1;
		goto out;
	}
	if (h.status < 200 || h.status > 299) {
		fetch_fail(f, 502, "fetch_failed", "HTTP status %d%s%.60s from "
		    "%.120s", h.status, h.reason[0] != '\0' ? " " : "",
		    h.reason, url);
		goto out;
	}
	rc = fetch_body(f, &h, t, sha, size);
out:
	free(req);
	free(h.location);
	free(u.target);
	fetch_close(f);
	return (rc);
}

/* Write all of buf to the connection. */
static int
fetch_write_all(struct fetch *f, const void *buf, size_t len)
{
	const unsigned char	*p = buf;
	char			 msg[128];
	int			 n;

	while (len > 0) {
		if (f->tls) {
			n = mbedtls_ssl_write(&f->ssl, p, len);
			if (n == MBEDTLS_ERR_SSL_WANT_READ ||
			    n == MBEDTLS_ERR_SSL_WANT_WRITE)
				continue;
			if (n < 0) {
				if (f->failed)
					return (-1);
				fetch_mbedtls_error(n, msg, sizeof msg);
				return (fetch_fail(f, 502, "fetch_failed",
				    "TLS: %s", msg));
			}
		} else if ((n = fetch_bio_send(f, p, len)) < 0)
			return (-1);
		p += n;
		len -= (size_t)n;
	}
	return (0);
}

/* Set the largest download (--max-fetch-bytes), before any fetch_run(). */
void
fetch_init(size_t max_bytes)
{
	fetch_max_bytes = max_bytes;
}

/* Download f->url into f->path. */
int
fetch_run(const struct proto_fetch *req, uid_t owner, atomic_int *cancel,
    struct fetch_result *res, struct proto_err *err)
{
	struct fetch		 f;
	struct fileio_tmp	 t;
	mbedtls_sha256_context	 sha;
	char			*url, *next = NULL;
	int			 hops, r = -1;

	memset(&f, 0, sizeof f);
	f.req = req;
	f.cancel = cancel;
	f.err = err;
	f.fd = -1;
	if (req->timeout_ms > 0)
		f.deadline = clock_mono_ms() + req->timeout_ms;
	memset(res, 0, sizeof *res);
	f.owner = owner;
	f.max_bytes = fetch_max_bytes;
	if (fileio_tmp_open(req->path, req->mkdir, owner, &t, err) != 0)
		return (-1);
	f.buf = malloc(FETCH_BUF);
	url = strdup(req->url);
	if (f.buf == NULL || url == NULL) {
		free(f.buf);
		free(url);
		fileio_tmp_abort(&t);
		return (fetch_oom(&f));
	}
	mbedtls_sha256_init(&sha);
	for (hops = 0;; hops++) {
		f.hop = hops;
		mbedtls_sha256_starts_ret(&sha, 0);
		res->size = 0;
		r = fetch_hop(&f, url, &t, &sha, &res->size, &next);
		if (r != 1)
			break;
		free(url);
		url = next;
		next = NULL;
		if (hops + 1 > FETCH_REDIRECTS) {
			r = fetch_fail(&f, 502, "fetch_failed",
			    "more than %d redirects (the last to %.120s)",
			    FETCH_REDIRECTS, url);
			break;
		}
	}
	free(url);
	free(f.buf);
	fetch_tls_free(&f);
	if (r == 0) {
		mbedtls_sha256_finish_ret(&sha, res->sha256);
		if (req->have_sha256 &&
		    memcmp(res->sha256, req->sha256, 32) != 0) {
			char	want[65], got[65];

			proto_sha256_hex(req->sha256, want);
			proto_sha256_hex(res->sha256, got);
			r = proto_fail(err, 422, "checksum_mismatch", "sha256 of "
			    "the download is %s, not %s", got, want);
		} else if (atomic_load(cancel))
			r = proto_fail(err, 499, "cancelled",
			    "cancelled: the client went away");
	}
	mbedtls_sha256_free(&sha);
	if (r != 0) {
		fileio_tmp_abort(&t);
		return (-1);
	}
	return (fileio_tmp_commit(&t, req->mode >= 0 ? (mode_t)req->mode :
	    FILEIO_MODE_DEFAULT, err));
}
