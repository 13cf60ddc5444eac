/*
 * flame_profd — allocation helpers shared by libsample and formats.
 *
 * A profiler gains nothing from untested out-of-memory paths: every
 * allocation goes through these and aborts on failure. The message names
 * the program that runs (glibc's program_invocation_short_name): the
 * daemon and flame_prof share these helpers.
 */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void __attribute__((noreturn))
x_out_of_memory(size_t size)
{
	fprintf(stderr, "%s: out of memory (allocating %zu bytes)\n",
		program_invocation_short_name, size);
	abort();
}

static inline void *
xzalloc(size_t size)
{
	void *p = calloc(1, size ? size : 1);

	if (!p)
		x_out_of_memory(size);
	return p;
}

static inline void *
xrealloc(void *ptr, size_t size)
{
	void *p = realloc(ptr, size ? size : 1);

	if (!p)
		x_out_of_memory(size);
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
