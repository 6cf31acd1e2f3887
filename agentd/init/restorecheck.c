/*
 * restorecheck.c -- the decisions of restore.c as pure functions
 * (restorecheck.h).
 */
#include <linux/rtc.h>

#include <stdint.h>
#include <string.h>

#include "restorecheck.h"

#define VMGENID_KEY	"NEW_VMGENID=1"

/* Whether a uevent carries NEW_VMGENID=1. */
int
restorecheck_uevent(const char *buf, size_t len)
{
	const char	*p = buf, *end = buf + len, *nul;
	size_t		 n;

	while (p < end) {
		nul = memchr(p, '\0', (size_t)(end - p));
		n = nul != NULL ? (size_t)(nul - p) : (size_t)(end - p);
		if (n == sizeof VMGENID_KEY - 1 &&
		    memcmp(p, VMGENID_KEY, n) == 0)
			return (1);
		p += n + 1;
	}
	return (0);
}

/* Whether the drift moved by more than threshold_ms since the last check. */
int
restorecheck_rtc_moved(int64_t last_ms, int64_t drift_ms, int64_t threshold_ms)
{
	int64_t	d = drift_ms - last_ms;

	return (d > threshold_ms || d < -threshold_ms);
}

/* Whether now_ms is within window_ms of the restore seen at first_ms. */
int
restorecheck_same(int64_t first_ms, int64_t now_ms, int64_t window_ms)
{
	if (first_ms < 0 || now_ms < first_ms)
		return (0);
	return (now_ms - first_ms <= window_ms);
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; Hinnant's). */
static int64_t
days_from_civil(int64_t y, int64_t m, int64_t d)
{
	int64_t	era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return (era * 146097 + doe - 719468);
}

/* The RTC's time as ms since the epoch, or -1. */
int64_t
restorecheck_rtc_ms(const struct rtc_time *tm)
{
	int64_t	days;

	if (tm->tm_year < 70 || tm->tm_year > 8000 || tm->tm_mon < 0 ||
	    tm->tm_mon > 11 || tm->tm_mday < 1 || tm->tm_mday > 31 ||
	    tm->tm_hour < 0 || tm->tm_hour > 23 || tm->tm_min < 0 ||
	    tm->tm_min > 59 || tm->tm_sec < 0 || tm->tm_sec > 60)
		return (-1);
	days = days_from_civil(tm->tm_year + 1900LL, tm->tm_mon + 1LL,
	    tm->tm_mday);
	return (((days * 24 + tm->tm_hour) * 60 + tm->tm_min) * 60000LL +
	    tm->tm_sec * 1000LL);
}
