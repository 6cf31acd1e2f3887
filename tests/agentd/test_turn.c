/*
 * test_turn.c -- Check unit tests of turn.c: the first look of a loop turn
 * starts it, later looks do not, and the turn ends once the callbacks
 * queued in it ran.
 */
#include <check.h>

#include <event2/event.h>

#include "../checkmain.h"

#include "turn.h"

static Suite	*turn_suite(void);

static struct turn	*looked;	/* the turn the queued callback looks at */
static int		 looked_new;	/* what its look answered */

/* A callback queued in the turn: it still sees the turn open. */
static void
queued_cb(evutil_socket_t fd, short events, void *arg)
{
	looked_new = turn_look(looked);
}

START_TEST(test_first_look_starts_a_turn)
{
	struct event_base	*base = event_base_new();
	struct turn		*t = turn_new(base);
	struct event		*ev = event_new(base, -1, 0, queued_cb, NULL);

	ck_assert_int_eq(turn_open(t), 0);
	/* A callback queued before the first look runs in the same turn. */
	event_active(ev, EV_TIMEOUT, 1);
	looked = t;
	looked_new = -1;
	ck_assert_int_eq(turn_look(t), 1);
	ck_assert_int_eq(turn_open(t), 1);
	ck_assert_int_eq(turn_look(t), 0);
	ck_assert_int_ne(event_base_loop(base, EVLOOP_NONBLOCK), -1);
	ck_assert_int_eq(looked_new, 0);
	/* The turn's event ran: the next look starts another. */
	ck_assert_int_eq(turn_open(t), 0);
	ck_assert_int_eq(turn_look(t), 1);
	ck_assert_int_eq(turn_look(t), 0);
	event_free(ev);
	turn_free(t);
	event_base_free(base);
}
END_TEST

/* The suite. */
static Suite *
turn_suite(void)
{
	Suite	*s = suite_create("turn");
	TCase	*tc = tcase_create("turn");

	tcase_add_test(tc, test_first_look_starts_a_turn);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(turn_suite()));
}
