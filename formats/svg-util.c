/*
 * flame_profd — XML text for the SVG writers.
 *
 * Frame names come from the profiled node: an atom may hold '<' or '&',
 * and a file name anything. One escaping function for every string that
 * goes into an SVG keeps the output well-formed whatever the node sent.
 */
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "svg-util.h"

size_t
fp_utf8_seq(const unsigned char *p, bool xml)
{
	unsigned char c = p[0];
	size_t n = 0;

	if ((c & 0xe0) == 0xc0 && c >= 0xc2)
		n = 2;
	else if ((c & 0xf0) == 0xe0)
		n = 3;
	else if ((c & 0xf8) == 0xf0 && c <= 0xf4)
		n = 4;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	}
	if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
		return 0;
	if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
		return 0;
	/* U+FFFE and U+FFFF are not XML characters either */
	if (xml && n == 3 && c == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf))
		return 0;
	return n;
}

void
fp_svg_write_escaped(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned char c = *p;
		size_t n;

		switch (c) {
		case '&':
			fputs("&amp;", out);
			p++;
			continue;
		case '<':
			fputs("&lt;", out);
			p++;
			continue;
		case '>':
			fputs("&gt;", out);
			p++;
			continue;
		case '"':
			fputs("&quot;", out);
			p++;
			continue;
		case '\'':
			fputs("&apos;", out);
			p++;
			continue;
		default:
			break;
		}
		if (c < 0x80) {
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				fputs("\xef\xbf\xbd", out);
			else
				putc(c, out);
			p++;
			continue;
		}
		n = fp_utf8_seq(p, true);
		if (n) {
			fwrite(p, 1, n, out);
			p += n;
		} else {
			fputs("\xef\xbf\xbd", out);
			p++;
		}
	}
}

void
fp_svg_format_time(char *dst, size_t size, unsigned long long time_us)
{
	time_t sec = (time_t)(time_us / 1000000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	snprintf(dst, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03lluZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, (time_us % 1000000) / 1000);
}
