/*
 * flame_profd — allocation helpers shared by libsample and formats.
 *
 * A profiler gains nothing from untested out-of-memory paths: every
 * allocation goes through these and aborts on failure.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void *
xzalloc(size_t size)
{
	void *p = calloc(1, size ? size : 1);

	if (!p) {
		fputs("flame_profd: out of memory\n", stderr);
		abort();
	}
	return p;
}

static inline void *
xrealloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);

	if (!p) {
		fputs("flame_profd: out of memory\n", stderr);
		abort();
	}
	return p;
}

static inline char *
xstrdup(const char *s)
{
	size_t len = strlen(s) + 1;
	char *p = xzalloc(len);

	memcpy(p, s, len);
	return p;
}

#define xnew(type) ((type *)xzalloc(sizeof(type)))
