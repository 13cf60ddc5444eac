/*
 * flame_profd — the names of flame_profd's files.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fp/perf-file.h"
#include "util-mem.h"

/* ".YYYYMMDDTHHMMSS.mmmZ" */
#define STAMP_LEN 21
#define PARTIAL_SUFFIX ".partial"

static const struct {
	const char *suffix;
	enum fp_perf_compress kind;
} suffixes[] = {
	{ ".perf", FP_PERF_PLAIN },
	{ ".perf.gz", FP_PERF_GZIP },
	{ ".perf.zst", FP_PERF_ZSTD },
};

char *
fp_perf_node_name(const char *node)
{
	char *s = xstrdup(node);

	for (char *p = s; *p; p++) {
		char c = *p;

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '@' || c == '-'))
			*p = '_';
	}
	if (s[0] == '.')
		s[0] = '_';
	return s;
}

const char *
fp_perf_compress_suffix(enum fp_perf_compress kind)
{
	switch (kind) {
	case FP_PERF_GZIP: return ".gz";
	case FP_PERF_ZSTD: return ".zst";
	default: return "";
	}
}

/* The length of @name before its .perf[.gz|.zst], or 0 if it has none. */
static size_t
stem_len(const char *name, enum fp_perf_compress *kind)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t e = strlen(suffixes[i].suffix);

		if (n > e && strcmp(name + n - e, suffixes[i].suffix) == 0) {
			if (kind)
				*kind = suffixes[i].kind;
			return n - e;
		}
	}
	return 0;
}

bool
fp_perf_name_kind(const char *name, enum fp_perf_compress *kind)
{
	return stem_len(name, kind) > 0;
}

int
fp_perf_name_format(char *buf, size_t size, const char *node_s,
		    uint64_t epoch_ms, enum fp_perf_compress kind)
{
	time_t secs = (time_t)(epoch_ms / 1000);
	struct tm tm;
	char date[32];
	int n;

	gmtime_r(&secs, &tm);
	strftime(date, sizeof(date), "%Y%m%dT%H%M%S", &tm);
	n = snprintf(buf, size, "%s.%s.%03uZ.perf%s", node_s, date,
		     (unsigned)(epoch_ms % 1000), fp_perf_compress_suffix(kind));
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* @n decimal digits at @p; -1 if there are not */
static int
number(const char *p, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

bool
fp_perf_name_parse(const char *name, struct fp_perf_name *parsed)
{
	enum fp_perf_compress kind;
	size_t stem = stem_len(name, &kind);
	const char *p;
	struct tm tm = { 0 };
	int msec;
	time_t t;

	if (stem < STAMP_LEN)
		return false;
	p = name + stem - STAMP_LEN;
	/* .YYYYMMDDTHHMMSS.mmmZ */
	if (p[0] != '.' || p[9] != 'T' || p[16] != '.' || p[20] != 'Z')
		return false;
	tm.tm_year = number(p + 1, 4) - 1900;
	tm.tm_mon = number(p + 5, 2) - 1;
	tm.tm_mday = number(p + 7, 2);
	tm.tm_hour = number(p + 10, 2);
	tm.tm_min = number(p + 12, 2);
	tm.tm_sec = number(p + 14, 2);
	msec = number(p + 17, 3);
	if (tm.tm_year < -1900 || tm.tm_mon < 0 || tm.tm_mon > 11 ||
	    tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour < 0 ||
	    tm.tm_hour > 23 || tm.tm_min < 0 || tm.tm_min > 59 ||
	    tm.tm_sec < 0 || tm.tm_sec > 60 || msec < 0)
		return false;
	t = timegm(&tm);
	if (t < 0)
		return false;
	if (parsed) {
		parsed->node_len = stem - STAMP_LEN;
		parsed->epoch_ms = (uint64_t)t * 1000 + (uint64_t)msec;
		parsed->kind = kind;
	}
	return true;
}

bool
fp_perf_name_is_of(const char *name, const char *node_s)
{
	struct fp_perf_name parsed;

	return fp_perf_name_parse(name, &parsed) &&
	       parsed.node_len == strlen(node_s) &&
	       strncmp(name, node_s, parsed.node_len) == 0;
}

int
fp_perf_partial_format(char *buf, size_t size, const char *name)
{
	int n = snprintf(buf, size, ".%s" PARTIAL_SUFFIX, name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

bool
fp_perf_partial_parse(const char *partial, const char *tail,
		      const char *node_s, char *name)
{
	size_t len = strlen(partial);
	size_t end = strlen(PARTIAL_SUFFIX) + strlen(tail);

	if (partial[0] != '.' || len < end + 2 || len - end - 1 >= FP_PERF_NAME_MAX ||
	    strncmp(partial + len - end, PARTIAL_SUFFIX, strlen(PARTIAL_SUFFIX)) != 0 ||
	    strcmp(partial + len - strlen(tail), tail) != 0)
		return false;
	memcpy(name, partial + 1, len - end - 1);
	name[len - end - 1] = '\0';
	return fp_perf_name_is_of(name, node_s);
}
