/*
 * flame_profd — the one string hash (FNV-1a, 64 bit): frame addresses in
 * the perf-script files and the hash tables of the renderers.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FNV1A_BASIS 0xcbf29ce484222325ULL

static inline uint64_t
fnv1a_update(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static inline uint64_t
fnv1a_str(uint64_t h, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ULL;
	}
	return h;
}
