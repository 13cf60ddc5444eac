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

/*
 * A fast non-cryptographic hash of a byte span (16 bytes per step, a
 * 64x64->128 multiply to mix): the key of the decoder's frame and stack
 * caches, where FNV-1a's byte-at-a-time loop over kilobytes of external
 * term would cost more than the decoding it saves. Equal keys are always
 * compared in full; the hash only spreads them.
 */
static inline uint64_t
hash_mix64(uint64_t a, uint64_t b)
{
	__uint128_t r = (__uint128_t)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t
hash_bytes(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0x243f6a8885a308d3ULL ^ (len * 0x9e3779b97f4a7c15ULL);
	uint64_t a, b;

	while (len >= 16) {
		__builtin_memcpy(&a, p, 8);
		__builtin_memcpy(&b, p + 8, 8);
		h = hash_mix64(a ^ h ^ 0xa0761d6478bd642fULL,
			       b ^ 0xe7037ed1a0b428dbULL);
		p += 16;
		len -= 16;
	}
	a = b = 0;
	if (len > 8) {
		__builtin_memcpy(&a, p, 8);
		__builtin_memcpy(&b, p + 8, len - 8);
	} else {
		__builtin_memcpy(&a, p, len);
	}
	return hash_mix64(a ^ h ^ 0x8ebc6af09c88c6e3ULL,
			  b ^ 0x589965cc75374cc3ULL ^ len);
}
