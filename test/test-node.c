/*
 * flame_profd — unit tests: the request encoders of the node connection,
 * decoded back with ei.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp-test.h"
#include "conn.h"
#include "node-private.h"
#include "request.h"

#define TARGET "app@host"

/* A node handle that encodes as if connected to TARGET: no socket. */
static struct fp_node *
offline_node(void)
{
	struct fp_node *node = fp_node_new(TARGET, "cookie");

	ei_init();
	node->creation = 1234;
	snprintf(node->self_name, sizeof(node->self_name), "fpd@host");
	fp_assert_int_eq(ei_connect_xinit(&node->ec, "host", "fpd", "fpd@host",
					  NULL, "cookie", 77), 0);
	return node;
}

static struct fp_pid *
make_pids(size_t n)
{
	struct fp_pid *pids = calloc(n, sizeof(*pids));

	/* every size of number ei encodes, and serials beyond 0 */
	for (size_t i = 0; i < n; i++) {
		pids[i].num = (unsigned)((i * 2654435761u) & 0x7fff);
		pids[i].serial = (unsigned)(i >> 15);
	}
	return pids;
}

/* [Pid, ...] at *index: the same pids, the target's, in order */
static void
check_pid_list(const char *buf, int *index, const struct fp_pid *pids,
	       size_t n)
{
	int count;

	fp_assert_int_eq(ei_decode_list_header(buf, index, &count), 0);
	fp_assert_int_eq(count, (int)n);
	for (size_t i = 0; i < n; i++) {
		erlang_pid p;

		if (ei_decode_pid(buf, index, &p) < 0)
			ck_abort_msg("pid %zu of %zu does not decode", i, n);
		if (p.num != pids[i].num || p.serial != pids[i].serial ||
		    p.creation != 1234 || strcmp(p.node, TARGET) != 0)
			ck_abort_msg("pid %zu of %zu: <%u.%u> of %s/%u, want <%u.%u>",
				     i, n, p.num, p.serial, p.node, p.creation,
				     pids[i].num, pids[i].serial);
	}
	if (n)
		fp_assert_int_eq(ei_decode_list_header(buf, index, &count), 0);
	fp_assert_int_eq(count, 0);
}

static const size_t list_sizes[] = { 0, 1, 100000, 1000000 };

START_TEST(pid_list)
{
	size_t n = list_sizes[_i];
	struct fp_node *node = offline_node();
	struct fp_pid *pids = make_pids(n ? n : 1);
	ei_x_buff x;
	int index = 0, version;

	ei_x_new_with_version(&x);
	node_encode_pid_list(node, &x, pids, n);
	fp_assert_int_eq(ei_decode_version(x.buff, &index, &version), 0);
	check_pid_list(x.buff, &index, pids, n);
	fp_assert_int_eq(index, x.index);
	ei_x_free(&x);
	free(pids);
	fp_node_destroy(node);
}
END_TEST

/* {'$gen_call', {Self, Ref}, {call, timer, tc, [lists, map, Args], user}} */
START_TEST(rpc_timed)
{
	size_t n = list_sizes[_i];
	struct fp_node *node = offline_node();
	struct fp_pid *pids = make_pids(n ? n : 1);
	char atom[MAXATOMLEN_UTF8];
	ei_x_buff args, x;
	erlang_pid self;
	erlang_ref ref;
	int index = 0, version, arity, count;

	ei_x_new(&args);
	ei_x_new(&x);
	ei_x_encode_list_header(&args, 1);
	node_encode_pid_list(node, &args, pids, n);
	ei_x_encode_empty_list(&args);
	node_rpc_encode(node, &x, "lists", "map", &args, 42, false, true);

	fp_assert_int_eq(ei_decode_version(x.buff, &index, &version), 0);
	fp_assert_int_eq(ei_decode_tuple_header(x.buff, &index, &arity), 0);
	fp_assert_int_eq(arity, 3);
	fp_assert_int_eq(ei_decode_atom(x.buff, &index, atom), 0);
	fp_assert_str_eq(atom, "$gen_call");
	fp_assert_int_eq(ei_decode_tuple_header(x.buff, &index, &arity), 0);
	fp_assert_int_eq(ei_decode_pid(x.buff, &index, &self), 0);
	fp_assert_str_eq(self.node, "fpd@host");
	fp_assert_int_eq(ei_decode_ref(x.buff, &index, &ref), 0);
	fp_assert_int_eq((int)ref.n[0], 42);
	fp_assert_int_eq(ei_decode_tuple_header(x.buff, &index, &arity), 0);
	fp_assert_int_eq(arity, 5);
	for (int k = 0; k < 3; k++) {
		static const char *const want[] = { "call", "timer", "tc" };

		fp_assert_int_eq(ei_decode_atom(x.buff, &index, atom), 0);
		fp_assert_str_eq(atom, want[k]);
	}
	fp_assert_int_eq(ei_decode_list_header(x.buff, &index, &count), 0);
	fp_assert_int_eq(count, 3);
	fp_assert_int_eq(ei_decode_atom(x.buff, &index, atom), 0);
	fp_assert_str_eq(atom, "lists");
	fp_assert_int_eq(ei_decode_atom(x.buff, &index, atom), 0);
	fp_assert_str_eq(atom, "map");
	fp_assert_int_eq(ei_decode_list_header(x.buff, &index, &count), 0);
	fp_assert_int_eq(count, 1);
	check_pid_list(x.buff, &index, pids, n);
	fp_assert_int_eq(ei_decode_list_header(x.buff, &index, &count), 0);
	fp_assert_int_eq(count, 0);	/* Args' tail */
	fp_assert_int_eq(ei_decode_list_header(x.buff, &index, &count), 0);
	fp_assert_int_eq(count, 0);	/* [lists, map, Args]'s */
	fp_assert_int_eq(ei_decode_atom(x.buff, &index, atom), 0);
	fp_assert_str_eq(atom, "user");
	fp_assert_int_eq(index, x.index);

	ei_x_free(&args);
	ei_x_free(&x);
	free(pids);
	fp_node_destroy(node);
}
END_TEST

/* A byte at a time, a megabyte: the buffer is moved a few dozen times,
 * not once per 200 bytes as ei's own growth would. */
START_TEST(reserve_doubles)
{
	ei_x_buff x;
	int moves = 0, size;

	ei_x_new(&x);
	size = x.buffsz;
	for (int i = 0; i < (1 << 20); i++) {
		node_x_reserve(&x, 1);
		if (x.buffsz - x.index < 101)
			ck_abort_msg("%d bytes free at %d", x.buffsz - x.index, i);
		x.buff[x.index++] = (char)i;
		if (x.buffsz != size) {
			moves++;
			size = x.buffsz;
		}
	}
	fp_assert_int_lt(moves, 32);
	for (int i = 0; i < (1 << 20); i++) {
		if ((unsigned char)x.buff[i] != (unsigned char)i)
			ck_abort_msg("byte %d changed", i);
	}
	ei_x_free(&x);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("node");
	TCase *tc;

	tc = tcase_create("encode");
	tcase_add_loop_test(tc, pid_list, 0, 4);
	tcase_add_loop_test(tc, rpc_timed, 0, 4);
	tcase_add_test(tc, reserve_doubles);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
