/*
 * httpcore.c -- what http.c and conn.c share: the token check, the HTTP
 * date and the answers' counters (httpcore.h).
 */
#include <string.h>
#include <strings.h>
#include <time.h>

#include "httpcore.h"
#include "util.h"

#define HTTP_CODES_MAX		32	/* distinct status codes counted */
#define HTTP_DATE_LEN		32	/* bytes of an HTTP date and its NUL, with room */

static const char		*token;
static size_t			 token_len;
static struct http_code_count	 codes[HTTP_CODES_MAX];
static size_t			 ncodes;

/* Set the token TCP requests must carry (NULL: none). */
void
httpcore_token(const char *t, size_t len)
{
	token = t;
	token_len = len;
}

/*
 * Whether an Authorization or X-Access-Token value carries the token.
 * Either will do: a proxy in front may put its own credentials in
 * Authorization and pass envd's header on.
 */
int
http_token_ok(const char *v, size_t len, const char *x, size_t xlen)
{
	if (token == NULL)
		return (1);
	if (x != NULL && ct_equal(x, xlen, token, token_len))
		return (1);
	if (v == NULL || len < 7 || strncasecmp(v, "Bearer ", 7) != 0)
		return (0);
	for (v += 7, len -= 7; len > 0 && *v == ' '; v++, len--)
		;
	return (ct_equal(v, len, token, token_len));
}

/*
 * Write the HTTP date of now, formatted once a second (musl's strftime()
 * is six snprintf() calls).
 */
void
http_date(char *buf, size_t len)
{
	static char	date[HTTP_DATE_LEN];
	static time_t	date_at = -1;
	struct tm	tm;
	time_t		now = time(NULL);
	size_t		n;

	if (now != date_at) {
		gmtime_r(&now, &tm);
		if (strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT",
		    &tm) == 0)
			date[0] = '\0';
		date_at = now;
	}
	if (len == 0)
		return;
	n = strlen(date);
	if (n >= len)
		n = len - 1;
	memcpy(buf, date, n);
	buf[n] = '\0';
}

/* Count an answer by its status code. */
void
http_count(int code)
{
	size_t	i;

	for (i = 0; i < ncodes; i++) {
		if (codes[i].code == code) {
			codes[i].count++;
			return;
		}
	}
	if (ncodes < HTTP_CODES_MAX) {
		codes[ncodes].code = code;
		codes[ncodes++].count = 1;
	}
}

/* The status codes answered so far. */
size_t
http_code_counts(const struct http_code_count **out)
{
	*out = codes;
	return (ncodes);
}
