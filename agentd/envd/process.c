/*
 * process.c -- envd's process.Process on agentd's sessions (process.h).
 */
#include <sys/types.h>

#include <jansson.h>

#include "connect.h"
#include "process.h"
#include "session.h"
#include "util.h"

static void	process_list(struct envd_call *, json_t *);

static const struct envd_method process_methods[] = {
	{ "process.Process/List", ENVD_UNARY, process_list },
};

/* Register the methods. */
void
process_register(void)
{
	envd_register(process_methods, nitems(process_methods));
}

/* List: the running processes. */
static void
process_list(struct envd_call *call, json_t *msg)
{
	json_t	*o = json_object();

	envd_json_set_new(o, "processes", json_array());
	envd_reply(call, o);
}

/* The session observer's part. */
void
process_session_event(struct session *s, int events)
{
}
