/*
 * flame_profd — the one reader of external term format in libsample.
 *
 * ei's decoders trust the lengths inside a term: a reply claiming a
 * 4 GiB string inside a 100-byte message makes them read past the buffer,
 * and ei_skip_term() recurses once per nesting level. Every term is
 * therefore walked here first, iteratively, against the real length and a
 * nesting limit (etf_term_skip(), etf_term_check()); only a term that
 * passes reaches ei, through the etf_decode_*() helpers below. The hot
 * path reads tags and lengths itself with the inlines in etf.h.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etf.h"
#include "util-escape.h"

#define MAX_DEPTH 256

/* Skip an atom (any encoding) at *pos; a node name inside pids etc. */
static int
skip_atom(const unsigned char *b, size_t len, size_t *pos)
{
	size_t p = *pos, n;

	if (p >= len)
		return -EBADMSG;
	switch (b[p]) {
	case ERL_ATOM_EXT:
	case ERL_ATOM_UTF8_EXT:
		if (len - p < 3)
			return -EBADMSG;
		n = etf_be16(b + p + 1);
		p += 3;
		break;
	case ERL_SMALL_ATOM_EXT:
	case ERL_SMALL_ATOM_UTF8_EXT:
		if (len - p < 2)
			return -EBADMSG;
		n = b[p + 1];
		p += 2;
		break;
	default:
		return -EBADMSG;
	}
	if (n > 255 * 4 || len - p < n)
		return -EBADMSG;
	*pos = p + n;
	return 0;
}

static inline int
need(size_t len, size_t pos, size_t n)
{
	return len - pos >= n ? 0 : -EBADMSG;
}

/* A leaf of @hdr header bytes whose payload length is the @lenbytes
 * bytes after the tag. */
static inline int
skip_sized(const unsigned char *b, size_t len, size_t *pos, size_t hdr,
	   int lenbytes)
{
	size_t p = *pos;
	uint64_t n;

	if (need(len, p, hdr) < 0)
		return -EBADMSG;
	n = lenbytes == 1 ? b[p + 1] :
	    lenbytes == 2 ? etf_be16(b + p + 1) : etf_be32(b + p + 1);
	if (need(len, p + hdr, n) < 0)
		return -EBADMSG;
	*pos = p + hdr + n;
	return 0;
}

int
etf_term_skip(const char *buf, size_t len, size_t *pos)
{
	const unsigned char *b = (const unsigned char *)buf;
	/* elements still to read at each open level; a list also owes its
	 * tail, counted as one more element */
	uint64_t pending[MAX_DEPTH];
	int depth = 0;
	size_t p = *pos;

	if (p > len)
		return -EBADMSG;
	pending[0] = 1;
	while (depth >= 0) {
		uint64_t n;
		size_t q;

		if (pending[depth] == 0) {
			depth--;
			continue;
		}
		pending[depth]--;
		if (p >= len)
			return -EBADMSG;
		switch (b[p]) {
		case ERL_SMALL_INTEGER_EXT:
			if (need(len, p, 2) < 0)
				return -EBADMSG;
			p += 2;
			continue;
		case ERL_INTEGER_EXT:
			if (need(len, p, 5) < 0)
				return -EBADMSG;
			p += 5;
			continue;
		/* ERL_FLOAT_EXT (old text floats, sscanf'd by ei without a
		 * bound) is refused: nodes since R11 send NEW_FLOAT_EXT. */
		case NEW_FLOAT_EXT:
			if (need(len, p, 9) < 0)
				return -EBADMSG;
			p += 9;
			continue;
		case ERL_ATOM_EXT:
		case ERL_ATOM_UTF8_EXT:
		case ERL_SMALL_ATOM_EXT:
		case ERL_SMALL_ATOM_UTF8_EXT:
			if (skip_atom(b, len, &p) < 0)
				return -EBADMSG;
			continue;
		case ERL_NIL_EXT:
			p += 1;
			continue;
		/* tag, length (1, 2 or 4 bytes), maybe more header, payload */
		case ERL_STRING_EXT:
			if (skip_sized(b, len, &p, 3, 2) < 0)
				return -EBADMSG;
			continue;
		case ERL_BINARY_EXT:
			if (skip_sized(b, len, &p, 5, 4) < 0)
				return -EBADMSG;
			continue;
		case ERL_BIT_BINARY_EXT:	/* + bits in the last byte */
			if (skip_sized(b, len, &p, 6, 4) < 0)
				return -EBADMSG;
			continue;
		case ERL_SMALL_BIG_EXT:		/* + sign */
			if (skip_sized(b, len, &p, 3, 1) < 0)
				return -EBADMSG;
			continue;
		case ERL_LARGE_BIG_EXT:		/* + sign */
			if (skip_sized(b, len, &p, 6, 4) < 0)
				return -EBADMSG;
			continue;
		case ERL_PID_EXT:
		case ERL_NEW_PID_EXT:
			q = p + 1;
			if (skip_atom(b, len, &q) < 0 ||
			    need(len, q, b[p] == ERL_PID_EXT ? 9 : 12) < 0)
				return -EBADMSG;
			p = q + (b[p] == ERL_PID_EXT ? 9 : 12);
			continue;
		case ERL_PORT_EXT:
		case ERL_NEW_PORT_EXT:
		case ERL_V4_PORT_EXT:
			q = p + 1;
			n = b[p] == ERL_PORT_EXT ? 5 : b[p] == ERL_NEW_PORT_EXT ? 8 : 12;
			if (skip_atom(b, len, &q) < 0 || need(len, q, n) < 0)
				return -EBADMSG;
			p = q + n;
			continue;
		case ERL_REFERENCE_EXT:
			q = p + 1;
			if (skip_atom(b, len, &q) < 0 || need(len, q, 5) < 0)
				return -EBADMSG;
			p = q + 5;
			continue;
		case ERL_NEW_REFERENCE_EXT:
		case ERL_NEWER_REFERENCE_EXT:
			if (need(len, p, 3) < 0)
				return -EBADMSG;
			n = etf_be16(b + p + 1);
			if (n > 5)
				return -EBADMSG;	/* ei's erlang_ref holds 5 words */
			q = p + 3;
			if (skip_atom(b, len, &q) < 0)
				return -EBADMSG;
			n = (b[p] == ERL_NEW_REFERENCE_EXT ? 1 : 4) + 4 * n;
			if (need(len, q, n) < 0)
				return -EBADMSG;
			p = q + n;
			continue;
		case ERL_EXPORT_EXT:
			q = p + 1;
			if (skip_atom(b, len, &q) < 0 || skip_atom(b, len, &q) < 0 ||
			    need(len, q, 2) < 0 || b[q] != ERL_SMALL_INTEGER_EXT)
				return -EBADMSG;
			p = q + 2;
			continue;
		case ERL_SMALL_TUPLE_EXT:
		case ERL_LARGE_TUPLE_EXT:
		case ERL_LIST_EXT:
		case ERL_MAP_EXT:
			if (b[p] == ERL_SMALL_TUPLE_EXT) {
				if (need(len, p, 2) < 0)
					return -EBADMSG;
				n = b[p + 1];
				p += 2;
			} else {
				if (need(len, p, 5) < 0)
					return -EBADMSG;
				n = etf_be32(b + p + 1);
				if (b[p] == ERL_MAP_EXT)
					n *= 2;
				else if (b[p] == ERL_LIST_EXT)
					n += 1;		/* the tail */
				p += 5;
			}
			/* each element takes at least a byte */
			if (n > len - p)
				return -EBADMSG;
			if (n == 0)
				continue;
			if (depth + 1 >= MAX_DEPTH)
				return -EBADMSG;
			pending[++depth] = n;
			continue;
		default:
			return -EBADMSG;	/* funs, compressed, unknown */
		}
	}
	*pos = p;
	return 0;
}

int
etf_term_check(const char *buf, size_t len, size_t start)
{
	size_t p = start;

	if (etf_term_skip(buf, len, &p) < 0)
		return -EBADMSG;
	return p == len ? 0 : -EBADMSG;
}

int
etf_skip_term(const char *buf, int *index)
{
	return ei_skip_term(buf, index) < 0 ? -EBADMSG : 0;
}

int
etf_decode_atom(const char *buf, int *index, char *dst)
{
	const unsigned char *b = (const unsigned char *)buf + *index;
	size_t n, hdr, out = 0;
	bool utf8;

	/* Not ei_decode_atom_as(): it copies a NUL of the atom into the C
	 * string, which then ends there ('a\0b' would read as 'a'). */
	switch (b[0]) {
	case ERL_SMALL_ATOM_UTF8_EXT:
	case ERL_SMALL_ATOM_EXT:
		n = b[1];
		hdr = 2;
		break;
	case ERL_ATOM_UTF8_EXT:
	case ERL_ATOM_EXT:
		n = etf_be16(b + 1);
		hdr = 3;
		break;
	default:
		return -EBADMSG;
	}
	utf8 = b[0] == ERL_SMALL_ATOM_UTF8_EXT || b[0] == ERL_ATOM_UTF8_EXT;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = b[hdr + i];

		if (out + 3 > MAXATOMLEN_UTF8)
			return -EBADMSG;
		if (c == 0) {
			memcpy(dst + out, FP_NUL_CARRIER, 2);
			out += 2;
		} else if (utf8 || c < 0x80) {
			dst[out++] = (char)c;
		} else {
			/* latin-1 */
			dst[out++] = (char)(0xc0 | (c >> 6));
			dst[out++] = (char)(0x80 | (c & 0x3f));
		}
	}
	dst[out] = '\0';
	*index += (int)(hdr + n);
	return 0;
}

char *
etf_term_text(const char *buf, int index, size_t max)
{
	struct fp_text t = { 0 };
	char *printed = NULL;
	size_t n;

	if (ei_s_print_term(&printed, buf, &index) < 0 || !printed) {
		free(printed);
		return xstrdup("?");
	}
	n = strlen(printed);
	fp_text_put_escaped(&t, printed, n < max ? n : max, NULL);
	if (n > max)
		fp_text_puts(&t, "...");
	fp_text_putc(&t, '\0');
	free(printed);
	return t.buf;
}

int
etf_decode_pid(const char *buf, int *index, struct fp_pid *pid)
{
	erlang_pid p;

	if (ei_decode_pid(buf, index, &p) < 0)
		return -EBADMSG;
	pid->num = p.num;
	pid->serial = p.serial;
	return 0;
}

int
etf_decode_int(const char *buf, int *index, int64_t *value)
{
	long long v;

	if (ei_decode_longlong(buf, index, &v) < 0)
		return -EBADMSG;
	*value = v;
	return 0;
}

int
etf_reply_check(const struct fp_reply *reply)
{
	if (reply->checked)
		return 0;
	return etf_term_check(reply->buf, reply->len, (size_t)reply->index);
}

/* {Tag, Term, ...}: the bytes of the second element of a checked reply. */
int
etf_reply_element(const struct fp_reply *reply, const char *tag, int *start,
		  int *end)
{
	char atom[MAXATOMLEN_UTF8];
	int index = reply->index, arity;

	if (ei_decode_tuple_header(reply->buf, &index, &arity) < 0 || arity < 2 ||
	    etf_decode_atom(reply->buf, &index, atom) < 0 ||
	    strcmp(atom, tag) != 0)
		return -EPROTO;
	*start = index;
	if (ei_skip_term(reply->buf, &index) < 0)
		return -EPROTO;
	*end = index;
	return 0;
}

int
fp_reply_take_time(struct fp_reply *reply, uint64_t *us)
{
	const unsigned char *b = (const unsigned char *)reply->buf;
	size_t p = (size_t)reply->index, end;
	int index;
	int64_t v;

	/* {Microseconds, Result}, read without trusting an unchecked reply */
	if (reply->badrpc || reply->len - p < 2 || b[p] != ERL_SMALL_TUPLE_EXT ||
	    b[p + 1] != 2)
		return -EBADMSG;
	p += 2;
	end = p;
	if (etf_int(b, reply->len, &end, &v) < 0) {
		/* a bignum: check it before ei reads it */
		if (etf_term_skip(reply->buf, reply->len, &end) < 0)
			return -EBADMSG;
		index = (int)p;
		if (etf_decode_int(reply->buf, &index, &v) < 0 ||
		    (size_t)index != end)
			return -EBADMSG;
	}
	if (v < 0)
		return -EBADMSG;
	*us = (uint64_t)v;
	reply->index = (int)end;
	return 0;
}

int
fp_node_decode_int(const struct fp_reply *reply, int64_t *value)
{
	int index = reply->index;

	if (reply->badrpc || etf_reply_check(reply) < 0)
		return -EBADMSG;
	return etf_decode_int(reply->buf, &index, value);
}

