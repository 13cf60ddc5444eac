/*
 * flame_profd — saturating sums for the renderers.
 *
 * A metric's value or delta is any int64 the file holds; a sum over a
 * whole profile can leave the 64-bit range. A wrapped sum draws a
 * frame's share as a small or negative number, which reads as truth;
 * a sum held at the bound is plainly "a lot", and the caller warns.
 * Each helper returns true when it had to hold the sum at a bound.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

static inline bool
sat_add_u64(uint64_t *acc, uint64_t v)
{
	if (__builtin_add_overflow(*acc, v, acc)) {
		*acc = UINT64_MAX;
		return true;
	}
	return false;
}

static inline bool
sat_add_i64(int64_t *acc, int64_t v)
{
	if (__builtin_add_overflow(*acc, v, acc)) {
		*acc = v < 0 ? INT64_MIN : INT64_MAX;
		return true;
	}
	return false;
}
