/*
 * stop.c -- whether the daemon is stopping (see stop.h).
 */
#include "stop.h"

static int	agentd_stopping_flag;	/* a shutdown is under way */

/* Whether a graceful shutdown is under way. */
int
agentd_stopping(void)
{
	return (agentd_stopping_flag);
}

/* Mark the shutdown begun; -1 when it already was. */
int
agentd_stop_begin(void)
{
	if (agentd_stopping_flag)
		return (-1);
	agentd_stopping_flag = 1;
	return (0);
}
