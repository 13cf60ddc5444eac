/*
 * flame_profd — durations, sizes and choices of the command lines.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util-parse.h"

/* The number at the start of @text, and where it ends. */
static int
number(const char *text, double *v, char **end)
{
	/* strtod() takes a sign; a duration or size has none */
	if (!text || !*text || *text == '-' || *text == '+')
		return -EINVAL;
	errno = 0;
	*v = strtod(text, end);
	if (errno || *end == text || !isfinite(*v) || *v < 0)
		return -EINVAL;
	return 0;
}

static int
scaled(double v, double scale, uint64_t max, uint64_t *out)
{
	double r = v * scale;

	if (r > (double)max)
		return -ERANGE;
	*out = (uint64_t)(r + 0.5);
	return 0;
}

int
parse_duration(const char *text, uint64_t max_us, uint64_t *us)
{
	static const struct {
		const char *suffix;
		double scale;
	} units[] = {
		{ "", 1e6 }, { "us", 1 }, { "ms", 1e3 }, { "s", 1e6 },
		{ "m", 60e6 }, { "h", 3600e6 }, { "d", 86400e6 },
	};
	char *end;
	double v;

	if (number(text, &v, &end) < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) == 0)
			return scaled(v, units[i].scale, max_us, us);
	}
	return -EINVAL;
}

int
parse_size(const char *text, uint64_t max_bytes, uint64_t *bytes)
{
	char *end;
	double v, scale = 1;

	if (number(text, &v, &end) < 0)
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
	return scaled(v, scale, max_bytes, bytes);
}

int
parse_enum(const char *text, const char *const *names)
{
	for (int i = 0; names[i]; i++) {
		if (strcmp(text, names[i]) == 0)
			return i;
	}
	return -EINVAL;
}
