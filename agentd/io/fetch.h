/*
 * fetch.h -- download a URL into a file: a small, bounded HTTP/1.1 client
 * for http:// and https:// (TLS by mbedTLS, certificates verified), run on
 * a worker thread of files.c.
 *
 * The client: one GET per hop with "Connection: close"; bodies framed by
 * Content-Length, chunked, or the connection's close; at most
 * FETCH_REDIRECTS redirects (301, 302, 303, 307, 308 with Location,
 * absolute or relative); response heads of at most FETCH_HEAD_MAX bytes.
 * An https:// host that is a name is checked against the certificate's
 * DNS names by mbedTLS (and sent as SNI); an IP literal is checked here
 * against its iPAddress names (or, without any, its CN).  The CA
 * certificates are ca_file's, else the first of $SSL_CERT_FILE,
 * /etc/ssl/certs/ca-certificates.crt, /etc/pki/tls/certs/ca-bundle.crt
 * and /etc/ssl/cert.pem that exists.
 *
 * Threads: fetch_run() runs on a worker thread beside the loop.  It shares
 * no state with other fetches (each has its own TLS contexts) and reads
 * only the environment (SSL_CERT_FILE) and files; it never logs.  Not
 * safe: an allocation failure takes fatal()'s path (util.h), which runs
 * agentd's panic on the worker's thread.
 */
#ifndef AGENTD_FETCH_H
#define AGENTD_FETCH_H

#include <sys/types.h>

#include <stdatomic.h>
#include <stdint.h>

struct proto_err;
struct proto_fetch;

#define FETCH_REDIRECTS		5		/* redirects followed */
#define FETCH_HEAD_MAX		(64 << 10)	/* bytes of a response head */
#define FETCH_LINE_MAX		(8 << 10)	/* bytes of one head line */
#define FETCH_POLL_MS		100		/* cancel is read this often */

/* What a finished fetch gives back. */
struct fetch_result {
	uint64_t	 size;		/* bytes written */
	uint8_t		 sha256[32];
};

/* Set the largest download (--max-fetch-bytes), before any fetch_run(). */
void	fetch_init(size_t max_bytes);
/*
 * Download f->url into f->path: a temporary file in the target's folder
 * (made first with f->mkdir), checked against f->sha256 when given, then
 * renamed into place with f->mode (default 0644).  Blocking: for a worker
 * thread.  Gives up when *cancel becomes nonzero (checked at least every
 * FETCH_POLL_MS while waiting) or f->timeout_ms passes.
 * Returns 0 with res filled, or -1 with err: 502 fetch_failed (the message
 * says why: DNS, connect, TLS, TLS verify, HTTP status, timeout, framing),
 * 422 checksum_mismatch, 400 invalid_request (a bad redirect or ca_file),
 * or the file system's answers (404, 403, 409, 507, see fileio_fail()).
 * On failure no file is left at f->path (an older one stays) nor any
 * temporary file.
 */
int	fetch_run(const struct proto_fetch *f, uid_t owner, atomic_int *cancel,
	    struct fetch_result *res, struct proto_err *err);

/* SHA-256 of buf (mbedTLS). */
void	fetch_sha256(const void *buf, size_t len, uint8_t out[32]);

#endif /* AGENTD_FETCH_H */
