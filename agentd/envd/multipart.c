/*
 * multipart.c -- multipart/form-data read in place (see multipart.h).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "multipart.h"

static const char *multipart_find(const char *, size_t, const char *, size_t);
static int	multipart_bchar(int);
static int	multipart_headers(const char *, size_t,
		    struct multipart_part *, char *, size_t);

/* memmem, spelled out for clarity of bounds. */
static const char *
multipart_find(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
	return (memmem(hay, hlen, needle, nlen));
}

/* Whether c may be in a boundary (RFC 2046 bchars, space but not last). */
static int
multipart_bchar(int c)
{
	return ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z') || strchr("'()+_,-./:=? ", c) != NULL);
}

/* A parameter of a header value. */
int
multipart_param(const char *v, size_t len, const char *param, char *out,
    size_t outlen)
{
	const char	*end = v + len, *name;
	size_t		 plen = strlen(param), nlen, o;

	/* Skip the value's first token (the type: "form-data"). */
	while (v < end && *v != ';') {
		if (*v == '"')
			return (-1);
		v++;
	}
	while (v < end) {
		v++;				/* ';' */
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		name = v;
		while (v < end && *v != '=' && *v != ';' && *v != ' ' &&
		    *v != '\t')
			v++;
		nlen = (size_t)(v - name);
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		if (v >= end || *v != '=') {
			if (nlen == 0 && v >= end)
				return (0);	/* a trailing ';' */
			return (-1);
		}
		v++;
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		o = 0;
		if (v < end && *v == '"') {
			for (v++; v < end && *v != '"'; v++) {
				if (*v == '\\' && v + 1 < end)
					v++;
				if (o + 1 >= outlen)
					return (-1);
				out[o++] = *v;
			}
			if (v >= end)
				return (-1);	/* unterminated */
			v++;
		} else {
			while (v < end && *v != ';' && *v != ' ' &&
			    *v != '\t') {
				if (o + 1 >= outlen)
					return (-1);
				out[o++] = *v++;
			}
		}
		out[o] = '\0';
		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		if (v < end && *v != ';')
			return (-1);
		if (nlen == plen && strncasecmp(name, param, plen) == 0)
			return (1);
	}
	return (0);
}

/* Take the boundary and find nothing yet. */
int
multipart_init(struct multipart *m, const char *ct, const char *body,
    size_t len, char *cause, size_t causelen)
{
	char	b[MULTIPART_BOUNDARY_MAX + 2];
	size_t	blen, i;
	int	r;

	memset(m, 0, sizeof *m);
	m->body = body;
	m->len = len;
	if (ct == NULL || strncasecmp(ct, "multipart/", 10) != 0) {
		snprintf(cause, causelen, "not a multipart body");
		return (-1);
	}
	r = multipart_param(ct, strlen(ct), "boundary", b, sizeof b);
	blen = r == 1 ? strlen(b) : 0;
	if (r != 1 || blen == 0 || blen > MULTIPART_BOUNDARY_MAX ||
	    b[blen - 1] == ' ') {
		snprintf(cause, causelen, "the Content-Type has no valid "
		    "boundary");
		return (-1);
	}
	for (i = 0; i < blen; i++) {
		if (!multipart_bchar((unsigned char)b[i])) {
			snprintf(cause, causelen, "the boundary has a byte "
			    "RFC 2046 does not allow");
			return (-1);
		}
	}
	memcpy(m->delim, "\r\n--", 4);
	memcpy(m->delim + 4, b, blen);
	m->delim_len = blen + 4;
	m->off = (size_t)-1;		/* the first boundary is not found yet */
	return (0);
}

/* Read a part's headers (len bytes, CRLF-separated, no final CRLF). */
static int
multipart_headers(const char *h, size_t len, struct multipart_part *p,
    char *cause, size_t causelen)
{
	const char	*end = h + len, *eol, *colon, *v;
	size_t		 vlen;
	int		 seen = 0, r;

	while (h < end) {
		eol = multipart_find(h, (size_t)(end - h), "\r\n", 2);
		if (eol == NULL)
			eol = end;
		colon = memchr(h, ':', (size_t)(eol - h));
		if (colon == NULL || colon == h) {
			snprintf(cause, causelen, "a part has a malformed "
			    "header line");
			return (-1);
		}
		if ((size_t)(colon - h) == 19 &&
		    strncasecmp(h, "Content-Disposition", 19) == 0) {
			v = colon + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			vlen = (size_t)(eol - v);
			if (seen++ || vlen < 9 || strncasecmp(v, "form-data",
			    9) != 0 || (vlen > 9 && v[9] != ';' && v[9] != ' ')) {
				snprintf(cause, causelen, "a part's "
				    "Content-Disposition is not form-data");
				return (-1);
			}
			if (multipart_param(v, vlen, "name", p->name,
			    sizeof p->name) == -1 ||
			    (r = multipart_param(v, vlen, "filename",
			    p->filename, sizeof p->filename)) == -1) {
				snprintf(cause, causelen, "a part's "
				    "Content-Disposition is malformed");
				return (-1);
			}
			p->has_filename = r == 1;
		}
		h = eol + (eol < end ? 2 : 0);
	}
	return (0);
}

/* The next part. */
int
multipart_next(struct multipart *m, struct multipart_part *p, char *cause,
    size_t causelen)
{
	const char	*s, *hend, *d;
	size_t		 left;

	p->name[0] = p->filename[0] = '\0';
	p->has_filename = 0;
	p->data = NULL;
	p->len = 0;
	if (m->done)
		return (0);
	if (m->off == (size_t)-1) {
		/* The first boundary may open the body, without its CRLF. */
		if (m->len >= m->delim_len - 2 && memcmp(m->body, m->delim + 2,
		    m->delim_len - 2) == 0)
			m->off = m->delim_len - 2;
		else if ((s = multipart_find(m->body, m->len, m->delim,
		    m->delim_len)) != NULL)
			m->off = (size_t)(s - m->body) + m->delim_len;
		else {
			snprintf(cause, causelen, "the body has no boundary");
			return (-1);
		}
	}
	/* After a boundary: "--" ends the body, else (whitespace) CRLF. */
	s = m->body + m->off;
	left = m->len - m->off;
	if (left >= 2 && s[0] == '-' && s[1] == '-') {
		m->done = 1;
		return (0);
	}
	while (left > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		left--;
	}
	if (left < 2 || s[0] != '\r' || s[1] != '\n') {
		snprintf(cause, causelen, "a boundary is not followed by a "
		    "line end");
		return (-1);
	}
	s += 2;
	left -= 2;
	/* Headers, up to an empty line (or none at all). */
	if (left >= 2 && s[0] == '\r' && s[1] == '\n')
		hend = s;
	else if ((hend = multipart_find(s, left < MULTIPART_HEADERS_MAX + 4 ?
	    left : MULTIPART_HEADERS_MAX + 4, "\r\n\r\n", 4)) == NULL) {
		snprintf(cause, causelen, left > MULTIPART_HEADERS_MAX ?
		    "a part's headers are over %d bytes" :
		    "a part's headers do not end", MULTIPART_HEADERS_MAX);
		return (-1);
	}
	if (hend != s && multipart_headers(s, (size_t)(hend - s), p, cause,
	    causelen) != 0)
		return (-1);
	s = hend + (hend == s ? 2 : 4);
	left = m->len - (size_t)(s - m->body);
	if ((d = multipart_find(s, left, m->delim, m->delim_len)) == NULL) {
		snprintf(cause, causelen, "a part has no closing boundary");
		return (-1);
	}
	p->data = s;
	p->len = (size_t)(d - s);
	m->off = (size_t)(d - m->body) + m->delim_len;
	return (1);
}
