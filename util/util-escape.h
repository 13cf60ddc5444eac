/*
 * flame_profd — the one rule for showing text a node controls (labels,
 * Logger and dictionary values, registered names, atoms, rpc failure
 * reasons): what reaches a terminal, a log line, a folded line, a CSV
 * field or a JSON string goes through fp_text_put_escaped().
 *
 * Kept as they are: printable ASCII and well-formed UTF-8 of U+00A0 and
 * above. Written \xHH (two uppercase hex digits, one per byte, as the
 * perf-script file writes its escapes, docs/FORMAT.md):
 *  - the C0 controls (NUL, BEL, TAB, LF, CR, ESC, ...) and DEL: a
 *    terminal acts on them, a line or a field would end at them;
 *  - the C1 controls U+0080..U+009F (both bytes of their UTF-8 form):
 *    some terminals take U+009B as CSI and U+009D as OSC;
 *  - every byte that is not part of well-formed UTF-8 (a stray
 *    continuation byte, a cut sequence, an overlong form, a surrogate,
 *    past U+10FFFF);
 *  - '\' itself, so that every escape reads back as one byte and a name
 *    holding the text "\x1B" stays apart from one holding ESC.
 *
 * A NUL inside node text is carried through C strings as the overlong
 * pair 0xC0 0x80 (FP_NUL_CARRIER, as Java's modified UTF-8 does): no
 * UTF-8 text holds those bytes, so an atom 'a\0b' stays distinct from
 * 'a' without a length beside every string. It is written \x00.
 */
#pragma once

#include <stddef.h>
#include <string.h>

#include "util-buf.h"

/* What a NUL byte of node text is held as in a C string. */
#define FP_NUL_CARRIER "\xC0\x80"

/*
 * The length of the well-formed UTF-8 sequence of a character of
 * U+0080 and above at @p (at most @n bytes there), or 0.
 */
static inline size_t
fp_utf8_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	}
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
		return 0;
	return len;
}

static inline void
fp_text_put_hex_escape(struct fp_text *t, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	char e[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };

	fp_text_put(t, e, 4);
}

/*
 * Append @len bytes of @s under the rule above. @also names printable
 * ASCII bytes that are escaped too where the output needs it (" " for a
 * perf-script field, ";" for a folded frame), or is NULL.
 */
static inline void
fp_text_put_escaped(struct fp_text *t, const char *s, size_t len,
		    const char *also)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	fp_text_reserve(t, len);
	while (p < end) {
		unsigned char c = *p;
		size_t n;

		if (c >= 0x20 && c < 0x7f) {
			if (c == '\\' || (also && strchr(also, c)))
				fp_text_put_hex_escape(t, c);
			else
				fp_text_putc(t, (char)c);
			p++;
			continue;
		}
		if (c == 0xc0 && end - p >= 2 && p[1] == 0x80) {
			fp_text_put(t, "\\x00", 4);
			p += 2;
			continue;
		}
		n = c >= 0x80 ? fp_utf8_len(p, (size_t)(end - p)) : 0;
		if (n == 0 || (n == 2 && c == 0xc2 && p[1] < 0xa0)) {
			/* a control, a C1 control's lead byte, or a byte of
			 * no character: the bytes after it get their own say */
			fp_text_put_hex_escape(t, c);
			p++;
			continue;
		}
		fp_text_put(t, p, n);
		p += n;
	}
}

/* The same for a NUL-terminated @s. */
static inline void
fp_text_puts_escaped(struct fp_text *t, const char *s, const char *also)
{
	fp_text_put_escaped(t, s, strlen(s), also);
}

/* The value of the hex digit @c (either case), or -1. */
static inline int
fp_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* The byte the escape "\xHH" at @s stands for, or -1 when @s does not
 * start one (reads no further than the first byte that is not one). */
static inline int
fp_hex_escape_at(const char *s)
{
	int hi, lo;

	if (s[0] != '\\' || s[1] != 'x' || (hi = fp_hex_digit(s[2])) < 0 ||
	    (lo = fp_hex_digit(s[3])) < 0)
		return -1;
	return hi << 4 | lo;
}
