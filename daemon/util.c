/*
 * flame_profd — durations and clocks.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "util.h"
#include "util-parse.h"

/* Far beyond any interval, and room to add one to a time in microseconds. */
#define DURATION_MAX_US 100000000000000000ULL	/* 1e17: 3000 years */
#define SIZE_MAX_BYTES 1000000000000000000ULL	/* 1e18 */

int
fpd_parse_duration(const char *str, uint64_t *us)
{
	return parse_duration(str, DURATION_MAX_US, us);
}

int
fpd_parse_size(const char *str, uint64_t *bytes)
{
	return parse_size(str, SIZE_MAX_BYTES, bytes);
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

static uint64_t *cpu_account;	/* fpd_cpu_enter()'s, or NULL */
static uint64_t cpu_entered_us;	/* the process's CPU time then */

static uint64_t
process_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t
fpd_cpu_us(void)
{
	uint64_t now = process_cpu_us();

	if (!cpu_account)
		return now;
	return *cpu_account + (now - cpu_entered_us);
}

void
fpd_cpu_enter(uint64_t *account)
{
	cpu_account = account;
	cpu_entered_us = process_cpu_us();
}

void
fpd_cpu_leave(void)
{
	if (!cpu_account)
		return;
	*cpu_account += process_cpu_us() - cpu_entered_us;
	cpu_account = NULL;
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
fpd_format_utc(uint64_t epoch_us, char *buf, size_t size)
{
	time_t secs = (time_t)(epoch_us / 1000000u);
	struct tm tm;
	char date[32];

	gmtime_r(&secs, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, size, "%s.%06lluZ", date,
		 (unsigned long long)(epoch_us % 1000000));
}

int
fpd_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
