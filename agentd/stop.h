/*
 * stop.h -- whether the daemon is stopping.  A leaf: any module may ask
 * without knowing the daemon around it.  The state is the loop's (its
 * thread only); whoever runs the shutdown (main.c) marks its start.
 */
#ifndef AGENTD_STOP_H
#define AGENTD_STOP_H

/*
 * Whether a graceful shutdown is under way: new work is refused (503
 * shutting_down) and /healthz says so.
 */
int	agentd_stopping(void);

/* Mark the shutdown begun: 0 the first time, -1 when it already was. */
int	agentd_stop_begin(void);

#endif /* AGENTD_STOP_H */
