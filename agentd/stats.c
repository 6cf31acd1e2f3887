/*
 * stats.c -- the counters behind GET /metrics (stats.h).
 */
#include "stats.h"

struct agentd_stats	 agentd_stats;
