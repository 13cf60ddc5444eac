/*
 * flame_profd — durations and clocks.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flame_profd.h"

int
fpd_parse_duration(const char *str, uint64_t *us)
{
	static const struct {
		const char *suffix;
		double scale;
	} units[] = {
		{ "us", 1 }, { "ms", 1e3 }, { "s", 1e6 }, { "m", 60e6 },
		{ "h", 3600e6 }, { "d", 86400e6 },
	};
	char *end;
	double v;

	if (!str || !*str || *str == '-' || *str == '+')
		return -EINVAL;
	errno = 0;
	v = strtod(str, &end);
	if (errno || end == str || !isfinite(v) || v < 0)
		return -EINVAL;
	if (*end == '\0') {	/* a bare number is seconds */
		*us = (uint64_t)llround(v * 1e6);
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			double r = v * units[i].scale;

			if (r > 1e17)
				return -ERANGE;
			*us = (uint64_t)llround(r);
			return 0;
		}
	}
	return -EINVAL;
}

void
fpd_format_duration(uint64_t us, char *buf, size_t size)
{
	if (us % 3600000000ULL == 0 && us)
		snprintf(buf, size, "%lluh", (unsigned long long)(us / 3600000000ULL));
	else if (us % 60000000ULL == 0 && us)
		snprintf(buf, size, "%llum", (unsigned long long)(us / 60000000ULL));
	else if (us % 1000000ULL == 0)
		snprintf(buf, size, "%llus", (unsigned long long)(us / 1000000ULL));
	else if (us % 1000ULL == 0)
		snprintf(buf, size, "%llums", (unsigned long long)(us / 1000ULL));
	else
		snprintf(buf, size, "%lluus", (unsigned long long)us);
}

uint64_t
fpd_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t
fpd_now_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * Sample timestamps must never go backwards (Flamescope's heat map
 * assumes it), so wall-clock time is read once and advanced by the
 * monotonic clock: an NTP step during a run shifts nothing.
 */
uint64_t
fpd_now_epoch_us(void)
{
	static uint64_t base_epoch, base_mono;

	if (!base_epoch) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		base_epoch = (uint64_t)ts.tv_sec * 1000000u +
			     (uint64_t)ts.tv_nsec / 1000u;
		base_mono = fpd_now_mono_us();
	}
	return base_epoch + (fpd_now_mono_us() - base_mono);
}

void
fpd_format_utc(uint64_t epoch_us, char *buf, size_t size, bool compact)
{
	time_t secs = (time_t)(epoch_us / 1000000u);
	struct tm tm;
	char date[32];

	gmtime_r(&secs, &tm);
	if (compact) {
		strftime(date, sizeof(date), "%Y%m%dT%H%M%S", &tm);
		snprintf(buf, size, "%s.%03lluZ", date,
			 (unsigned long long)(epoch_us / 1000 % 1000));
	} else {
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(buf, size, "%s.%06lluZ", date,
			 (unsigned long long)(epoch_us % 1000000));
	}
}

int
fpd_parse_size(const char *str, uint64_t *bytes)
{
	char *end;
	double v, scale = 1;

	if (!str || !*str || *str == '-' || *str == '+')
		return -EINVAL;
	errno = 0;
	v = strtod(str, &end);
	if (errno || end == str || !isfinite(v) || v < 0)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': scale = 1024.0; end++; break;
	case 'm': case 'M': scale = 1024.0 * 1024; end++; break;
	case 'g': case 'G': scale = 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (v * scale > 1e18)
		return -ERANGE;
	*bytes = (uint64_t)llround(v * scale);
	return 0;
}
