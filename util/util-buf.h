/*
 * flame_profd — the one growable buffer and the one array-growing rule.
 *
 * struct fp_text holds bytes (text or not) and grows by doubling from a
 * first capacity; zero-initialised is empty. fp_grow() makes room in any
 * array kept as (pointer, capacity in elements). Both abort on
 * out-of-memory, as every allocation does (util-mem.h).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util-mem.h"

/* A growing byte buffer; zero-initialised is empty. */
struct fp_text {
	char *buf;
	size_t len, cap;
};

/*
 * Make *cap (in elements of @size bytes) at least @need, doubling from
 * @first; *p is reallocated when it grows. Returns *p.
 */
static inline void *
fp_grow(void **p, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t c = *cap;

	if (need <= c)
		return *p;
	if (!c)
		c = first ? first : 1;
	while (c < need) {
		if (c > SIZE_MAX / 2 / size)
			x_out_of_memory(SIZE_MAX);
		c *= 2;
	}
	*p = xrealloc(*p, c * size);
	*cap = c;
	return *p;
}

/*
 * FP_GROW(arr, cap, need): the array @arr (a typed pointer) has room for
 * at least @need elements afterwards; @cap is its capacity in elements.
 */
#define FP_GROW(arr, cap, need) \
	fp_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)), 16)

/* Room for @more bytes past len; the first allocation is 256 bytes. */
static inline void
fp_text_reserve(struct fp_text *t, size_t more)
{
	fp_grow((void **)&t->buf, &t->cap, t->len + more, 1, 256);
}

/* Like fp_text_reserve(), with the first allocation @first bytes. */
static inline void
fp_text_reserve_first(struct fp_text *t, size_t more, size_t first)
{
	fp_grow((void **)&t->buf, &t->cap, t->len + more, 1, first);
}

static inline void
fp_text_put(struct fp_text *t, const void *s, size_t n)
{
	if (!n)
		return;
	fp_text_reserve(t, n);
	memcpy(t->buf + t->len, s, n);
	t->len += n;
}

static inline void
fp_text_putc(struct fp_text *t, char c)
{
	fp_text_reserve(t, 1);
	t->buf[t->len++] = c;
}

static inline void
fp_text_puts(struct fp_text *t, const char *s)
{
	fp_text_put(t, s, strlen(s));
}

/* The decimal digits of @v. */
static inline void
fp_text_put_u64(struct fp_text *t, uint64_t v)
{
	char tmp[24];
	size_t n = 0;

	do {
		tmp[sizeof(tmp) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fp_text_put(t, tmp + sizeof(tmp) - n, n);
}

/*
 * @n bytes of @s and a NUL after them, for text kept as offsets into one
 * buffer (pointers would move when it grows). Returns the offset of the
 * first byte.
 */
static inline size_t
fp_text_put_str(struct fp_text *t, const void *s, size_t n)
{
	size_t at = t->len;

	fp_text_put(t, s, n);
	fp_text_putc(t, '\0');
	return at;
}

/* Free the bytes; the buffer is empty again. */
static inline void
fp_text_free(struct fp_text *t)
{
	free(t->buf);
	*t = (struct fp_text){ 0 };
}
