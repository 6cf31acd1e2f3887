/*
 * ansi.h -- terminal escape sequences left out of output bytes, for
 * "strip_ansi" windows (API.md).  A small state machine after ECMA-48 and
 * xterm's control sequences, fed a stream's bytes in order, chunk by
 * chunk: a sequence split across two chunks is left out whole.
 *
 * Left out:
 *  - CSI: ESC [ then parameter bytes 0x30-0x3f, intermediates 0x20-0x2f,
 *    up to a final byte 0x40-0x7e ("\e[1;31m", "\e[?25l", "\e[2J").
 *  - OSC: ESC ] ... ended by BEL or ST (ESC \) ("\e]0;title\a",
 *    "\e]8;;url\e\\").
 *  - DCS (ESC P), SOS (ESC X), PM (ESC ^), APC (ESC _): strings ended
 *    by ST.
 *  - Two-byte sequences ESC 0x30-0x7e ("\e7", "\e=", "\eM") and ESC with
 *    intermediates ("\e(B", "\e#8").
 * CAN (0x18) and SUB (0x1a) abort a sequence (and are left out); an ESC
 * inside one aborts it and starts another.  C0 controls inside a CSI are
 * kept (a terminal acts on them there too); any other byte outside
 * 0x20-0x7e ends a CSI or ESC sequence and is kept.  Single-byte C1 controls
 * (0x80-0x9f) are not taken for controls: they are UTF-8 continuation bytes
 * in the output of today's programs.  Everything else is kept as it is.
 *
 * Pure: no I/O, no allocation.  The state is a plain struct; zero it (or
 * call proto_ansi_init()) to begin a stream.
 */
#ifndef PROTO_ANSI_H
#define PROTO_ANSI_H

#include <stddef.h>
#include <stdint.h>

/* Where the machine is: the text, or inside a sequence. */
struct proto_ansi {
	int	 state;		/* PROTO_ANSI_* of ansi.c; 0: the text */
};

/* Begin a stream: outside any sequence. */
void	proto_ansi_init(struct proto_ansi *);

/*
 * Copy in[0..len) to out, leaving out escape sequences, and return the
 * bytes written (at most len).  out may be in (stripping in place), or
 * must not overlap it.  The state carries over to the stream's next call.
 */
size_t	proto_ansi_strip(struct proto_ansi *, const uint8_t *in, size_t len,
	    uint8_t *out);

/* Whether the machine is inside a sequence (after a call). */
int	proto_ansi_inside(const struct proto_ansi *);

#endif /* PROTO_ANSI_H */
