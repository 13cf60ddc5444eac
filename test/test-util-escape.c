/*
 * flame_profd — unit tests: the one rule for showing text a node controls
 * (util/util-escape.h): every class of byte, ill-formed UTF-8, NUL.
 */
#include <stdlib.h>
#include <string.h>

#include "fp-test.h"
#include "util-escape.h"

static const struct {
	const char *what;
	const char *in;
	size_t len;		/* 0: strlen(in) */
	const char *also;
	const char *out;
} cases[] = {
	{ "plain ASCII", "worker 1: ok", 0, NULL, "worker 1: ok" },
	{ "ESC of a colour", "a\x1b[31mred", 0, NULL, "a\\x1B[31mred" },
	{ "OSC title with BEL", "\x1b]0;pwned\x07", 0, NULL,
	  "\\x1B]0;pwned\\x07" },
	{ "CR, LF, TAB", "a\rb\nc\td", 0, NULL, "a\\x0Db\\x0Ac\\x09d" },
	{ "a forged folded line", "x\nfake_root;forged:frame/0 1000000", 0, ";",
	  "x\\x0Afake_root\\x3Bforged:frame/0 1000000" },
	{ "DEL and the other C0", "\x01\x7f\x1f", 0, NULL, "\\x01\\x7F\\x1F" },
	{ "backslash, so escapes read back", "c:\\x1B", 0, NULL, "c:\\x5Cx1B" },
	{ "a NUL byte", "a\0b", 3, NULL, "a\\x00b" },
	{ "the NUL carrier", "a" FP_NUL_CARRIER "b", 0, NULL, "a\\x00b" },
	{ "space only when asked", "a b", 0, " ", "a\\x20b" },
	{ "UTF-8 kept", "m\xc3\xb6te \xe2\x82\xac \xf0\x9f\x94\xa5", 0, NULL,
	  "m\xc3\xb6te \xe2\x82\xac \xf0\x9f\x94\xa5" },
	{ "U+00A0 kept", "\xc2\xa0", 0, NULL, "\xc2\xa0" },
	{ "C1 CSI (U+009B)", "\xc2\x9b" "31m", 0, NULL, "\\xC2\\x9B31m" },
	{ "C1 OSC (U+009D)", "\xc2\x9d", 0, NULL, "\\xC2\\x9D" },
	{ "a stray continuation byte", "a\x80z", 0, NULL, "a\\x80z" },
	{ "latin-1, no UTF-8", "caf\xe9!", 0, NULL, "caf\\xE9!" },
	{ "a sequence cut by the end", "a\xe2\x82", 0, NULL, "a\\xE2\\x82" },
	{ "a sequence cut by ASCII", "\xe2x", 0, NULL, "\\xE2x" },
	{ "overlong '/'", "\xc0\xaf", 0, NULL, "\\xC0\\xAF" },
	{ "overlong 3-byte", "\xe0\x80\xaf", 0, NULL, "\\xE0\\x80\\xAF" },
	{ "a surrogate", "\xed\xa0\x80", 0, NULL, "\\xED\\xA0\\x80" },
	{ "past U+10FFFF", "\xf4\x90\x80\x80", 0, NULL,
	  "\\xF4\\x90\\x80\\x80" },
	{ "0xFF", "\xff", 0, NULL, "\\xFF" },
	{ "empty", "", 0, NULL, "" },
};

START_TEST(escape_classes)
{
	struct fp_text t = { 0 };
	size_t len = cases[_i].len ? cases[_i].len : strlen(cases[_i].in);

	fp_text_put_escaped(&t, cases[_i].in, len, cases[_i].also);
	fp_text_putc(&t, '\0');
	ck_assert_msg(strcmp(t.buf, cases[_i].out) == 0, "%s: got \"%s\"",
		      cases[_i].what, t.buf);
	fp_text_free(&t);
}
END_TEST

/* What it writes is printable ASCII and well-formed UTF-8 of U+00A0 and
 * above, whatever it is given: every byte value, in every position. */
START_TEST(escape_output_is_inert)
{
	struct fp_text t = { 0 };
	unsigned char in[3];

	for (unsigned a = 0; a < 256; a++) {
		for (unsigned b = 0; b < 256; b += 7) {
			in[0] = (unsigned char)a;
			in[1] = (unsigned char)b;
			in[2] = 0x80;
			t.len = 0;
			fp_text_put_escaped(&t, (const char *)in, sizeof(in), NULL);
			for (size_t i = 0; i < t.len;) {
				const unsigned char *p = (const unsigned char *)t.buf + i;
				size_t n;

				if (*p >= 0x20 && *p < 0x7f) {
					i++;
					continue;
				}
				n = fp_utf8_len(p, t.len - i);
				fp_assert(n > 0);
				fp_assert(!(n == 2 && p[0] == 0xc2 && p[1] < 0xa0));
				i += n;
			}
		}
	}
	fp_text_free(&t);
}
END_TEST

static Suite *
escape_suite(void)
{
	Suite *s = suite_create("util-escape");
	TCase *tc = tcase_create("escape");

	tcase_add_loop_test(tc, escape_classes, 0,
			    (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, escape_output_is_inert);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(escape_suite());
}
