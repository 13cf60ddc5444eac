/*
 * flame_profd — reading external term format: the one reader of libsample.
 *
 * Private to libsample. Two levels, one file each way in (etf.c):
 *  - the bounds walk (etf_term_skip(), etf_term_check()) every term passes
 *    before ei may read it, and the etf_decode_*() helpers that then read
 *    through ei, each mapping ei's failure onto -EBADMSG;
 *  - the inlines below, for the hot path of the sample decoder, which look
 *    at tags and lengths themselves instead of going through ei for every
 *    atom and integer. Anything unusual makes them return -1 and the
 *    caller takes ei's path. Every read is checked against @len, so they
 *    are safe on any input, checked or not.
 */
#pragma once

#include <ei.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fp/node.h"

/*
 * Walk the term at buf[start..len) without trusting its lengths: 0 if it
 * is one well-formed term that ends exactly at len (funs, compressed
 * terms and nesting deeper than 256 are refused), -EBADMSG otherwise.
 */
int
etf_term_check(const char *buf, size_t len, size_t start);

/* The same for one term at *pos that need not end the buffer: 0 and *pos
 * past it, or -EBADMSG. */
int
etf_term_skip(const char *buf, size_t len, size_t *pos);

/* Through ei, on checked bytes only; each 0 or -EBADMSG. */

/* Skip any term. */
int
etf_skip_term(const char *buf, int *index);

/* Decode an atom as UTF-8 into dst (at least MAXATOMLEN_UTF8 bytes), a
 * NUL in it as FP_NUL_CARRIER (util-escape.h). */
int
etf_decode_atom(const char *buf, int *index, char *dst);

/* The term at @index as ei prints it, at most @max bytes of that, under
 * the rule for node text (util-escape.h): for a log line. The caller
 * frees it. */
char *
etf_term_text(const char *buf, int index, size_t max);

/* Decode a pid sent by the node into its local numbers. */
int
etf_decode_pid(const char *buf, int *index, struct fp_pid *pid);

/* Decode an integer term (small, int or fitting bignum) into *value. */
int
etf_decode_int(const char *buf, int *index, int64_t *value);

/* 0 if the result of @reply is checked or passes the check now. Every
 * decoder that hands a reply to ei calls this first. */
int
etf_reply_check(const struct fp_reply *reply);

/* {Tag, Term, ...}: where Term's bytes start and end in a checked reply;
 * -EPROTO when the reply is not such a tuple. */
int
etf_reply_element(const struct fp_reply *reply, const char *tag, int *start,
		  int *end);

static inline uint32_t
etf_be32(const unsigned char *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	       ((uint32_t)p[2] << 8) | p[3];
}

static inline uint32_t
etf_be16(const unsigned char *p)
{
	return ((uint32_t)p[0] << 8) | p[1];
}

/*
 * An atom whose bytes are its UTF-8 name: UTF-8 atoms, and latin-1 atoms
 * that are plain ASCII. 0 with the name and its length set and *pos past
 * it, -1 else.
 */
static inline int
etf_atom(const unsigned char *b, size_t len, size_t *pos,
	 const char **name, size_t *n)
{
	size_t p = *pos, k, hdr;
	unsigned char tag;

	if (p >= len)
		return -1;
	tag = b[p];
	if (tag == ERL_SMALL_ATOM_UTF8_EXT || tag == ERL_SMALL_ATOM_EXT) {
		if (len - p < 2)
			return -1;
		k = b[p + 1];
		hdr = 2;
	} else if (tag == ERL_ATOM_UTF8_EXT || tag == ERL_ATOM_EXT) {
		if (len - p < 3)
			return -1;
		k = etf_be16(b + p + 1);
		hdr = 3;
	} else {
		return -1;
	}
	if (len - p - hdr < k || k >= MAXATOMLEN_UTF8)
		return -1;
	if (tag == ERL_SMALL_ATOM_EXT || tag == ERL_ATOM_EXT) {
		for (size_t i = 0; i < k; i++)
			if (b[p + hdr + i] >= 0x80)
				return -1;	/* latin-1: ei re-encodes it */
	}
	*name = (const char *)b + p + hdr;
	*n = k;
	*pos = p + hdr + k;
	return 0;
}

static inline bool
etf_atom_is(const char *name, size_t n, const char *want, size_t wn)
{
	return n == wn && memcmp(name, want, n) == 0;
}

/* A small or 32-bit integer; -1 for anything else (bignums go to ei). */
static inline int
etf_int(const unsigned char *b, size_t len, size_t *pos, int64_t *v)
{
	size_t p = *pos;

	if (p >= len)
		return -1;
	if (b[p] == ERL_SMALL_INTEGER_EXT && len - p >= 2) {
		*v = b[p + 1];
		*pos = p + 2;
		return 0;
	}
	if (b[p] == ERL_INTEGER_EXT && len - p >= 5) {
		*v = (int32_t)etf_be32(b + p + 1);
		*pos = p + 5;
		return 0;
	}
	return -1;
}

/*
 * Skip one term made only of numbers, atoms, strings, binaries, tuples,
 * lists and maps — terms whose bytes mean the same in any message. Pids,
 * references, ports, funs and atom-cache references make it return -1, as
 * does nesting deeper than 64 or a length past @len. A term it passes is
 * one etf_term_skip() passes too, so ei may read it.
 *
 * The same walk as etf_term_skip() (etf.c), narrowed, and inline: it runs
 * over every stack the decoder has not seen before, where sharing the
 * out-of-line walker cost 20% of the cold path (bench/offline
 * -C: 3.2 against 4.0 µs a sample).
 */
static inline int
etf_skip_plain(const unsigned char *b, size_t len, size_t *pos)
{
	uint64_t pending[64];
	int depth = 0;
	size_t p = *pos;

	pending[0] = 1;
	while (depth >= 0) {
		uint64_t n;

		if (pending[depth] == 0) {
			depth--;
			continue;
		}
		pending[depth]--;
		if (p >= len)
			return -1;
		switch (b[p]) {
		case ERL_SMALL_INTEGER_EXT:
			n = 2;
			break;
		case ERL_INTEGER_EXT:
			n = 5;
			break;
		case NEW_FLOAT_EXT:
			n = 9;
			break;
		case ERL_NIL_EXT:
			n = 1;
			break;
		case ERL_SMALL_ATOM_EXT:
		case ERL_SMALL_ATOM_UTF8_EXT:
			if (len - p < 2)
				return -1;
			n = 2 + (uint64_t)b[p + 1];
			break;
		case ERL_ATOM_EXT:
		case ERL_ATOM_UTF8_EXT:
		case ERL_STRING_EXT:
			if (len - p < 3)
				return -1;
			n = 3 + (uint64_t)etf_be16(b + p + 1);
			/* as etf_term_skip(): no atom ei could not hold */
			if (b[p] != ERL_STRING_EXT && n > 3 + 255 * 4)
				return -1;
			break;
		case ERL_BINARY_EXT:
			if (len - p < 5)
				return -1;
			n = 5 + (uint64_t)etf_be32(b + p + 1);
			break;
		case ERL_SMALL_BIG_EXT:
			if (len - p < 2)
				return -1;
			n = 3 + (uint64_t)b[p + 1];
			break;
		case ERL_LARGE_BIG_EXT:
			if (len - p < 5)
				return -1;
			n = 6 + (uint64_t)etf_be32(b + p + 1);
			break;
		case ERL_SMALL_TUPLE_EXT:
		case ERL_LARGE_TUPLE_EXT:
		case ERL_LIST_EXT:
		case ERL_MAP_EXT:
			if (depth + 1 >= (int)(sizeof(pending) / sizeof(pending[0])))
				return -1;
			if (b[p] == ERL_SMALL_TUPLE_EXT) {
				if (len - p < 2)
					return -1;
				n = b[p + 1];
				p += 2;
			} else {
				if (len - p < 5)
					return -1;
				n = etf_be32(b + p + 1);
				p += 5;
				if (b[p - 5] == ERL_LIST_EXT)
					n += 1;		/* the tail */
				else if (b[p - 5] == ERL_MAP_EXT)
					n *= 2;
			}
			pending[++depth] = n;
			continue;
		default:
			return -1;
		}
		if (len - p < n)
			return -1;
		p += n;
	}
	*pos = p;
	return 0;
}

/* An atom of any of the four encodings, as etf_skip_plain() bounds it.
 * (etf_skip_plain() keeps its own copy of the rule in its switch: calling
 * this from there cost the warm decode 17%, bench/offline.) */
static inline int
etf_skip_atom(const unsigned char *b, size_t len, size_t *pos)
{
	size_t p = *pos, n;

	if (p >= len)
		return -1;
	switch (b[p]) {
	case ERL_SMALL_ATOM_UTF8_EXT:
	case ERL_SMALL_ATOM_EXT:
		if (len - p < 2)
			return -1;
		n = 2 + (size_t)b[p + 1];
		break;
	case ERL_ATOM_UTF8_EXT:
	case ERL_ATOM_EXT:
		if (len - p < 3)
			return -1;
		n = 3 + (size_t)etf_be16(b + p + 1);
		if (n > 3 + 255 * 4)
			return -1;
		break;
	default:
		return -1;
	}
	if (len - p < n)
		return -1;
	*pos = p + n;
	return 0;
}

/*
 * A stack frame as process_info/2 sends it, {M, F, Arity, Location}
 * with Location [] or a list of {Key, "string"} and {Key, Integer},
 * skipped in straight-line code; -1 for anything else, which the caller
 * then walks with etf_skip_plain(). Where this returns 0, so does
 * etf_skip_plain() and at the same end: every part is one it passes.
 * Half the cost of the general walk on a 30-frame stack not seen before.
 */
static inline int
etf_skip_frame(const unsigned char *b, size_t len, size_t *pos)
{
	size_t p = *pos, n;

	if (p >= len || len - p < 2 || b[p] != ERL_SMALL_TUPLE_EXT || b[p + 1] != 4)
		return -1;
	p += 2;
	if (etf_skip_atom(b, len, &p) < 0 || etf_skip_atom(b, len, &p) < 0 ||
	    len - p < 3 || b[p] != ERL_SMALL_INTEGER_EXT)
		return -1;
	p += 2;
	if (b[p] == ERL_NIL_EXT) {
		*pos = p + 1;
		return 0;
	}
	if (len - p < 5 || b[p] != ERL_LIST_EXT)
		return -1;
	n = etf_be32(b + p + 1);
	p += 5;
	for (size_t i = 0; i < n; i++) {
		if (len - p < 2 || b[p] != ERL_SMALL_TUPLE_EXT || b[p + 1] != 2)
			return -1;
		p += 2;
		if (etf_skip_atom(b, len, &p) < 0 || p >= len)
			return -1;
		switch (b[p]) {
		case ERL_STRING_EXT:
			if (len - p < 3 || len - p - 3 < etf_be16(b + p + 1))
				return -1;
			p += 3 + etf_be16(b + p + 1);
			break;
		case ERL_SMALL_INTEGER_EXT:
			if (len - p < 2)
				return -1;
			p += 2;
			break;
		case ERL_INTEGER_EXT:
			if (len - p < 5)
				return -1;
			p += 5;
			break;
		default:
			return -1;
		}
	}
	if (p >= len || b[p] != ERL_NIL_EXT)
		return -1;
	*pos = p + 1;
	return 0;
}

/* A frame: the straight-line path when it takes it, else the walk. */
static inline int
etf_skip_frame_or_plain(const unsigned char *b, size_t len, size_t *pos)
{
	return etf_skip_frame(b, len, pos) == 0 ? 0 : etf_skip_plain(b, len, pos);
}
