/*
 * ansi.c -- escape sequences left out of output bytes: the state machine of
 * ansi.h, one byte at a time.
 */
#include <stddef.h>
#include <stdint.h>

#include "ansi.h"

#define PROTO_ANSI_TEXT		0	/* outside any sequence */
#define PROTO_ANSI_ESC		1	/* after ESC */
#define PROTO_ANSI_ESC_INTER	2	/* ESC and intermediates, before the final */
#define PROTO_ANSI_CSI		3	/* ESC [ ..., before the final byte */
#define PROTO_ANSI_OSC		4	/* ESC ] ..., before BEL or ST */
#define PROTO_ANSI_STR		5	/* DCS, SOS, PM or APC, before ST */
#define PROTO_ANSI_OSC_ESC	6	/* ESC inside an OSC: ST if '\\' follows */
#define PROTO_ANSI_STR_ESC	7	/* ESC inside a DCS/SOS/PM/APC string */

#define ESC	0x1b
#define BEL	0x07
#define CAN	0x18
#define SUB	0x1a

static int	proto_ansi_step(struct proto_ansi *, uint8_t);

/* Begin a stream outside any sequence. */
void
proto_ansi_init(struct proto_ansi *a)
{
	a->state = PROTO_ANSI_TEXT;
}

/* Whether the machine is inside a sequence. */
int
proto_ansi_inside(const struct proto_ansi *a)
{
	return (a->state != PROTO_ANSI_TEXT);
}

/* Take one byte; returns whether it is kept in the output. */
static int
proto_ansi_step(struct proto_ansi *a, uint8_t c)
{
	switch (a->state) {
	case PROTO_ANSI_TEXT:
		if (c != ESC)
			return (1);
		a->state = PROTO_ANSI_ESC;
		return (0);
	case PROTO_ANSI_OSC_ESC:
	case PROTO_ANSI_STR_ESC:
		if (c == '\\') {		/* ST */
			a->state = PROTO_ANSI_TEXT;
			return (0);
		}
		/* The string is aborted; this ESC starts a sequence. */
		a->state = PROTO_ANSI_ESC;
		return (proto_ansi_step(a, c));
	default:
		break;
	}
	if (c == CAN || c == SUB) {		/* abort the sequence */
		a->state = PROTO_ANSI_TEXT;
		return (0);
	}
	switch (a->state) {
	case PROTO_ANSI_ESC:
		if (c == ESC)
			return (0);
		if (c == '[')
			a->state = PROTO_ANSI_CSI;
		else if (c == ']')
			a->state = PROTO_ANSI_OSC;
		else if (c == 'P' || c == 'X' || c == '^' || c == '_')
			a->state = PROTO_ANSI_STR;
		else if (c >= 0x20 && c <= 0x2f)
			a->state = PROTO_ANSI_ESC_INTER;
		else if (c >= 0x30 && c <= 0x7e)
			a->state = PROTO_ANSI_TEXT;	/* two-byte sequence */
		else if (c < 0x20)
			return (1);		/* a control: acted on */
		else {
			a->state = PROTO_ANSI_TEXT;	/* not a sequence */
			return (1);
		}
		return (0);
	case PROTO_ANSI_ESC_INTER:
	case PROTO_ANSI_CSI:
		if (c == ESC) {
			a->state = PROTO_ANSI_ESC;
			return (0);
		}
		if (c < 0x20)
			return (1);		/* a control: acted on */
		if (c >= 0x7f) {
			a->state = PROTO_ANSI_TEXT;
			return (c != 0x7f);
		}
		if (a->state == PROTO_ANSI_CSI ? c >= 0x40 : c >= 0x30)
			a->state = PROTO_ANSI_TEXT;	/* the final byte */
		return (0);
	case PROTO_ANSI_OSC:
		if (c == BEL)
			a->state = PROTO_ANSI_TEXT;
		else if (c == ESC)
			a->state = PROTO_ANSI_OSC_ESC;
		return (0);
	case PROTO_ANSI_STR:
		if (c == ESC)
			a->state = PROTO_ANSI_STR_ESC;
		return (0);
	default:
		a->state = PROTO_ANSI_TEXT;
		return (1);
	}
}

/* Copy in to out without escape sequences; the bytes written. */
size_t
proto_ansi_strip(struct proto_ansi *a, const uint8_t *in, size_t len,
    uint8_t *out)
{
	size_t	i, n = 0;
	uint8_t	c;

	for (i = 0; i < len; i++) {
		c = in[i];
		/* The text goes fast: no escape in sight. */
		if (a->state == PROTO_ANSI_TEXT && c != ESC) {
			out[n++] = c;
			continue;
		}
		if (proto_ansi_step(a, c))
			out[n++] = c;
	}
	return (n);
}
