/*
 * flame_profd — unit tests: pids, names, durations.
 */
#include <errno.h>
#include <string.h>

#include "fp-test.h"
#include "fp/node.h"
#include "fp/term.h"
#include "../daemon/util.h"

static const struct {
	const char *text;
	int rc;
	unsigned num, serial;
} pid_cases[] = {
	{ "<0.123.0>", 0, 123, 0 },
	{ "0.123.0", 0, 123, 0 },
	{ "<0.1.42>", 0, 1, 42 },
	{ "0.4294967295.7", 0, 4294967295u, 7 },
	{ "<1.123.0>", -EINVAL, 0, 0 },		/* another node's pid */
	{ "<0.123.0", -EINVAL, 0, 0 },
	{ "0.123", -EINVAL, 0, 0 },
	{ "0.123.0.1", -EINVAL, 0, 0 },
	{ "", -EINVAL, 0, 0 },
	{ "<0.-1.0>", -EINVAL, 0, 0 },
	{ "0.99999999999.0", -EINVAL, 0, 0 },
	{ "0.1.0 ", -EINVAL, 0, 0 },
};

START_TEST(pid_parse)
{
	struct fp_pid pid = { 0, 0 };
	int rc = fp_pid_parse(pid_cases[_i].text, &pid);

	fp_assert_int_eq(rc, pid_cases[_i].rc);
	if (rc == 0) {
		fp_assert_int_eq(pid.num, pid_cases[_i].num);
		fp_assert_int_eq(pid.serial, pid_cases[_i].serial);
	}
}
END_TEST

static const struct {
	const char *text;
	int rc;
	const char *node;
	unsigned creation, num, serial;
} full_pid_cases[] = {
	{ "<0.123.0>", 0, "", 0, 123, 0 },
	{ "0.99999.0", 0, "", 0, 99999, 0 },
	{ "<rabbit@vm.1795511417.723.0>", 1, "rabbit@vm", 1795511417u, 723, 0 },
	{ "<app@host.example.com.3.1.2>", 1, "app@host.example.com", 3, 1, 2 },
	{ "<app@10.0.0.1.0.45.9>", 1, "app@10.0.0.1", 0, 45, 9 },
	{ "<rabbit.1.723.0>", -EINVAL, "", 0, 0, 0 },	/* no @: no node */
	{ "<@vm.1.2.3>", 1, "@vm", 1, 2, 3 },		/* the node judges it */
	{ "<.1.723.0>", -EINVAL, "", 0, 0, 0 },
	{ "<a@b.1.723>", -EINVAL, "", 0, 0, 0 },
	{ "<a@b.1.723.0", -EINVAL, "", 0, 0, 0 },
	{ "a@b.1.723.0>", -EINVAL, "", 0, 0, 0 },
	{ "<a@b.x.723.0>", -EINVAL, "", 0, 0, 0 },
	{ "<a@b.1.723.99999999999>", -EINVAL, "", 0, 0, 0 },
	{ "<a@b.1..0>", -EINVAL, "", 0, 0, 0 },
	{ "<1.123.0>", -EINVAL, "", 0, 0, 0 },
};

START_TEST(pid_parse_full)
{
	struct fp_pid pid = { 0, 0 };
	char node[64] = "x";
	uint32_t creation = 99;
	int rc = fp_pid_parse_full(full_pid_cases[_i].text, &pid, node,
				   sizeof(node), &creation);

	fp_assert_int_eq(rc, full_pid_cases[_i].rc);
	if (rc >= 0) {
		fp_assert_str_eq(node, full_pid_cases[_i].node);
		fp_assert_int_eq(creation, full_pid_cases[_i].creation);
		fp_assert_int_eq(pid.num, full_pid_cases[_i].num);
		fp_assert_int_eq(pid.serial, full_pid_cases[_i].serial);
	}
}
END_TEST

static const struct {
	const char *given;
	int n;
	const char *first, *second;
} name_cases[] = {
	{ "my_server", 1, "my_server", NULL },
	{ "RwEx.Counter", 2, "Elixir.RwEx.Counter", "RwEx.Counter" },
	{ "Counter", 2, "Elixir.Counter", "Counter" },
	{ "Elixir.RwEx.Counter", 1, "Elixir.RwEx.Counter", NULL },
	{ ":foo", 1, "foo", NULL },
	{ ":\"foo bar\"", 1, "foo bar", NULL },
	{ ":Elixir.X", 1, "Elixir.X", NULL },
	{ "Rw.counter", 1, "Rw.counter", NULL },	/* no alias: lower case */
	{ "Rw..X", 1, "Rw..X", NULL },
	{ "Rw.", 1, "Rw.", NULL },
	{ "s\xc3\xb6k", 1, "s\xc3\xb6k", NULL },
	{ ":", 1, ":", NULL },
	{ "", -EINVAL, NULL, NULL },
	{ ":\"\"", -EINVAL, NULL, NULL },
};

START_TEST(name_candidates)
{
	char cand[2][FP_NAME_MAX];
	int n = fp_name_candidates(name_cases[_i].given, cand);

	fp_assert_int_eq(n, name_cases[_i].n);
	if (n >= 1)
		fp_assert_str_eq(cand[0], name_cases[_i].first);
	if (n == 2)
		fp_assert_str_eq(cand[1], name_cases[_i].second);
}
END_TEST

static const struct {
	const char *name;
	int ok;
} node_cases[] = {
	{ "app@host", 1 },
	{ "app@host.example.com", 1 },
	{ "my-app_2@10.0.0.1", 1 },
	{ "app", 0 },
	{ "@host", 0 },
	{ "app@", 0 },
	{ "a@b@c", 0 },
	{ "a pp@host", 0 },
	{ "app@ho st", 0 },
	{ "app.x@host", 0 },
};

START_TEST(node_name)
{
	const char *why = NULL;
	int rc = fp_node_name_check(node_cases[_i].name, &why);

	if (node_cases[_i].ok) {
		fp_assert_int_eq(rc, 0);
	} else {
		fp_assert_int_eq(rc, -EINVAL);
		fp_assert_ptr_nonnull(why);
	}
}
END_TEST

START_TEST(status_names)
{
	for (int i = 0; i < FP_STATUS_COUNT; i++) {
		const char *name = fp_status_name((enum fp_status)i);

		fp_assert_int_eq(fp_status_from_name(name), i == 0 ? 0 : i);
		/* Flamescope takes everything before the first digit */
		fp_assert(strpbrk(name, "0123456789 \t") == NULL);
	}
	fp_assert_int_eq(fp_status_from_name("bogus"), FP_STATUS_UNKNOWN);
}
END_TEST

static const struct {
	const char *text;
	int rc;
	unsigned long long us;
} duration_cases[] = {
	{ "5s", 0, 5000000ULL },
	{ "500ms", 0, 500000ULL },
	{ "2m", 0, 120000000ULL },
	{ "1h", 0, 3600000000ULL },
	{ "1.5s", 0, 1500000ULL },
	{ "3", 0, 3000000ULL },
	{ "250us", 0, 250ULL },
	{ "", -EINVAL, 0 },
	{ "banana", -EINVAL, 0 },
	{ "5x", -EINVAL, 0 },
	{ "-5s", -EINVAL, 0 },
	{ "s", -EINVAL, 0 },
	{ "1e30h", -ERANGE, 0 },
};

START_TEST(duration_parse)
{
	uint64_t us = 0;
	int rc = fpd_parse_duration(duration_cases[_i].text, &us);

	fp_assert_int_eq(rc, duration_cases[_i].rc);
	if (rc == 0)
		ck_assert_uint_eq(us, duration_cases[_i].us);
}
END_TEST

START_TEST(duration_format)
{
	char buf[32];

	fpd_format_duration(120000000, buf, sizeof(buf));
	fp_assert_str_eq(buf, "2m");
	fpd_format_duration(5000000, buf, sizeof(buf));
	fp_assert_str_eq(buf, "5s");
	fpd_format_duration(250000, buf, sizeof(buf));
	fp_assert_str_eq(buf, "250ms");
	fpd_format_duration(7200000000ULL, buf, sizeof(buf));
	fp_assert_str_eq(buf, "2h");
}
END_TEST

START_TEST(utc_format)
{
	char buf[40];

	fpd_format_utc(1795247790018286ULL, buf, sizeof(buf));
	fp_assert_str_eq(buf, "2026-11-21T07:56:30.018286Z");
}
END_TEST

#define N(a) (int)(sizeof(a) / sizeof(a[0]))

static Suite *
suite(void)
{
	Suite *s = suite_create("term");
	TCase *tc;

	tc = tcase_create("pid");
	tcase_add_loop_test(tc, pid_parse, 0, N(pid_cases));
	tcase_add_loop_test(tc, pid_parse_full, 0, N(full_pid_cases));
	tcase_add_loop_test(tc, name_candidates, 0, N(name_cases));
	suite_add_tcase(s, tc);

	tc = tcase_create("node-name");
	tcase_add_loop_test(tc, node_name, 0, N(node_cases));
	suite_add_tcase(s, tc);

	tc = tcase_create("status");
	tcase_add_test(tc, status_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("duration");
	tcase_add_loop_test(tc, duration_parse, 0, N(duration_cases));
	tcase_add_test(tc, duration_format);
	tcase_add_test(tc, utc_format);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
