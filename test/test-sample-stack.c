/*
 * flame_profd — unit tests: stacktraces: the frame and stack caches,
 * the frame skip, the edges of the stack decoder.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp-test.h"
#include "fp/sample.h"
#include "etf.h"
#include "sample-fixtures.h"

/* Frames and stacks seen before come from the decoder's caches, with ids
 * the writers key on; a changed stack is decoded anew. */
START_TEST(decode_cache)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	struct proc moved = proc_a;
	const struct fp_sample *out;
	struct fp_cache_stats st;
	uint64_t stack_id, plus_id;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	r = reply_procs(&x, (const struct proc *[]){ &proc_a, &proc_a }, 2);

	out = decode_expect(s, &r, pids, NULL, 2, 1, 2, &n);
	stack_id = out[0].stack_id;
	plus_id = out[0].frames[1].id;
	fp_assert(stack_id != 0);
	fp_assert_int_eq(out[1].stack_id, stack_id);
	fp_assert(out[0].frames[0].id != 0 && plus_id != 0);
	fp_assert(out[0].frames[0].id != plus_id);
	fp_assert_int_eq(out[1].frames[1].id, plus_id);
	fp_assert_str_eq(out[1].frames[0].file, "lists.erl");
	fp_sampler_cache_stats(s, &st);
	fp_assert_int_eq(st.stack_misses, 1);
	fp_assert_int_eq(st.stack_hits, 1);
	fp_assert_int_eq(st.frame_misses, 2);

	/* again: both from the cache, through each process's last stack */
	out = decode_expect(s, &r, pids, NULL, 2, 2, 2, &n);
	fp_assert_int_eq(out[0].stack_id, stack_id);
	fp_assert_int_eq(out[1].stack_id, stack_id);
	fp_assert_int_eq(out[0].frames[0].line, 1263);
	fp_assert_str_eq(out[0].frames[1].module, "erlang");
	fp_sampler_cache_stats(s, &st);
	fp_assert_int_eq(st.stack_hits, 3);
	ei_x_free(&x);

	/* the first process moved to another line: a new stack whose second
	 * frame is the one cached before */
	moved.line = 1264;
	r = reply_procs(&x, (const struct proc *[]){ &moved, &proc_a }, 2);
	out = decode_expect(s, &r, pids, NULL, 2, 3, 2, &n);
	fp_assert(out[0].stack_id != 0 && out[0].stack_id != stack_id);
	fp_assert_int_eq(out[0].frames[0].line, 1264);
	fp_assert_int_eq(out[0].frames[1].id, plus_id);
	fp_assert_int_eq(out[1].stack_id, stack_id);
	fp_assert_int_eq(out[1].frames[0].line, 1263);

	/* dropped caches: the same content under new ids */
	fp_sampler_drop_caches(s);
	out = decode_expect(s, &r, pids, NULL, 2, 4, 2, &n);
	fp_assert(out[1].stack_id != stack_id);
	fp_assert_int_eq(out[1].frames[0].line, 1263);
	fp_assert_str_eq(out[1].frames[0].module, "lists");

	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* Many distinct stacks: the caches are dropped when they outgrow their
 * bound, between two decodes, and what comes out stays right. */
START_TEST(decode_cache_bound)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[50];
	struct fp_cache_stats st;
	struct proc p = proc_a;
	long line = 1;

	for (int i = 0; i < 50; i++)
		pids[i] = (struct fp_pid){ (unsigned)(100 + i), 0 };
	for (int round = 0; round < 1600; round++) {
		const struct fp_sample *out;
		struct fp_reply r;
		ei_x_buff x;
		size_t n;

		ei_x_new_with_version(&x);
		ei_x_encode_list_header(&x, 50);
		for (int i = 0; i < 50; i++) {
			p.line = line + i;
			enc_proc(&x, &p);
		}
		ei_x_encode_empty_list(&x);
		r = reply_of(&x);
		out = decode_expect(s, &r, pids, NULL, 50, 1, 50, &n);
		for (int i = 0; i < 50; i++) {
			fp_assert_int_eq(out[i].frames[0].line, line + i);
			fp_assert_str_eq(out[i].frames[0].file, "lists.erl");
			fp_assert_str_eq(out[i].frames[1].function, "+");
			fp_assert(out[i].stack_id != 0);
		}
		line += 50;
		ei_x_free(&x);
	}
	fp_sampler_cache_stats(s, &st);
	fp_assert_int_eq(st.stack_misses, 80000);
	fp_assert(st.clears >= 1);
	fp_sampler_destroy(s);
}
END_TEST

/* A sample batch arrives unchecked: cut anywhere, it is refused, and
 * nothing is read past the end (an exact-size copy, for the sanitizers). */
START_TEST(decode_unchecked_truncated)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	struct fp_reply r;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	enc_proc(&x, &proc_a);
	enc_proc(&x, &proc_a);
	ei_x_encode_empty_list(&x);

	for (int len = 1; len <= x.index; len++) {
		char *copy = malloc((size_t)len);

		memcpy(copy, x.buff, (size_t)len);
		r = (struct fp_reply){ .buf = copy, .len = (size_t)len, .index = 1 };
		/* twice: the second pass takes the cached paths */
		for (int pass = 0; pass < 2; pass++)
			decode_expect(s, &r, pids, NULL, 2, 1, len == x.index ? 2 : -EBADMSG, NULL);
		free(copy);
	}
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

START_TEST(decode_unicode_file)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 9, 1 };
	struct proc p = proc_a;
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	p.unicode_file = true;
	p.name = "s\xc3\xb6" "k";	/* UTF-8 atom */
	r = reply_procs(&x, (const struct proc *[]){ &p }, 1);
	out = decode_expect(s, &r, &pid, NULL, 1, 1, 1, &n);
	fp_assert_str_eq(out[0].frames[0].file, "\xc3\xb6.erl");
	fp_assert_str_eq(out[0].registered_name, "s\xc3\xb6" "k");
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* The head of a frame, {M, F, Arity, ...: the caller adds the location. */
static void
enc_mfa(ei_x_buff *x, const char *m, const char *f, long arity)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, m);
	ei_x_encode_atom(x, f);
	ei_x_encode_long(x, arity);
}

/* {lists, F, 1, [{file, "lists.erl"}, {line, Line}]}, atoms as @enc
 * (ERLANG_UTF8: SMALL_ATOM_UTF8_EXT; ERLANG_LATIN1: ATOM_EXT) */
static void
enc_frame(ei_x_buff *x, const char *f, long line, erlang_char_encoding enc)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom_as(x, "lists", ERLANG_UTF8, enc);
	ei_x_encode_atom_as(x, f, ERLANG_UTF8, enc);
	ei_x_encode_long(x, 1);
	ei_x_encode_list_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom_as(x, "file", ERLANG_UTF8, enc);
	ei_x_encode_string(x, "lists.erl");
	enc_kv_long(x, "line", line);
	ei_x_encode_empty_list(x);
}

/*
 * The straight-line frame skip: takes the shapes process_info sends,
 * leaves everything else to the general walk, and where it takes a frame
 * ends where the walk does; cut short anywhere it refuses (exact-size
 * copies, for the sanitizers).
 */
START_TEST(skip_frame)
{
	enum { FAST, WALK };
	static const struct {
		const char *what;
		int path;
	} cases[] = {
		{ "utf8 atoms, small line", FAST },
		{ "latin-1 atoms, line > 255", FAST },
		{ "no location", FAST },
		{ "args instead of arity", WALK },
		{ "file as code points", WALK },
		{ "error_info map", WALK },
		{ "three-tuple", WALK },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		ei_x_buff x;
		size_t start = 1, fast = 1, walk = 1;

		ei_x_new_with_version(&x);
		switch (c) {
		case 0: enc_frame(&x, "foldl", 12, ERLANG_UTF8); break;
		case 1: enc_frame(&x, "foldl", 70000, ERLANG_LATIN1); break;
		case 2:
			enc_mfa(&x, "erlang", "apply", 2);
			ei_x_encode_empty_list(&x);
			break;
		case 3:
			ei_x_encode_tuple_header(&x, 4);
			ei_x_encode_atom(&x, "erlang");
			ei_x_encode_atom(&x, "+");
			ei_x_encode_list_header(&x, 1);
			ei_x_encode_long(&x, 1);
			ei_x_encode_empty_list(&x);
			ei_x_encode_empty_list(&x);
			break;
		case 4:
			enc_mfa(&x, "m", "f", 0);
			ei_x_encode_list_header(&x, 1);
			ei_x_encode_tuple_header(&x, 2);
			ei_x_encode_atom(&x, "file");
			ei_x_encode_list_header(&x, 1);
			ei_x_encode_long(&x, 0x3b1);
			ei_x_encode_empty_list(&x);
			ei_x_encode_empty_list(&x);
			break;
		case 5:
			enc_mfa(&x, "m", "f", 0);
			ei_x_encode_list_header(&x, 1);
			ei_x_encode_tuple_header(&x, 2);
			ei_x_encode_atom(&x, "error_info");
			ei_x_encode_map_header(&x, 0);
			ei_x_encode_empty_list(&x);
			break;
		case 6:
			ei_x_encode_tuple_header(&x, 3);
			ei_x_encode_atom(&x, "m");
			ei_x_encode_atom(&x, "f");
			ei_x_encode_long(&x, 0);
			break;
		}
		/* the whole frame */
		fp_assert_int_eq(etf_skip_frame((unsigned char *)x.buff,
						(size_t)x.index, &fast),
				 cases[c].path == FAST ? 0 : -1);
		fp_assert_int_eq(etf_skip_plain((unsigned char *)x.buff,
						(size_t)x.index, &walk), 0);
		fp_assert_int_eq(walk, (size_t)x.index);
		if (cases[c].path == FAST)
			fp_assert_int_eq(fast, walk);
		fast = walk = start;
		fp_assert_int_eq(etf_skip_frame_or_plain((unsigned char *)x.buff,
							 (size_t)x.index, &fast), 0);
		fp_assert_int_eq(fast, (size_t)x.index);

		/* cut short: refused by both */
		for (size_t len = 1; len < (size_t)x.index; len++) {
			unsigned char *copy = malloc(len);

			memcpy(copy, x.buff, len);
			fast = walk = start;
			fp_assert_int_eq(etf_skip_frame(copy, len, &fast), -1);
			fp_assert_int_eq(etf_skip_plain(copy, len, &walk), -1);
			fp_assert_int_eq(fast, start);
			free(copy);
		}
		ei_x_free(&x);
	}
}
END_TEST

/* A process with only a stack (and reductions): @order names the frames,
 * top first. */
static void
enc_stack_proc(ei_x_buff *x, const char *const *order, int n)
{
	ei_x_encode_list_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "current_stacktrace");
	ei_x_encode_list_header(x, n);
	for (int i = 0; i < n; i++)
		enc_frame(x, order[i], 10 + order[i][0], ERLANG_UTF8);
	ei_x_encode_empty_list(x);
	enc_kv_long(x, "reductions", 1);
	ei_x_encode_empty_list(x);
}

/*
 * New stacks made of known frames (a process moving through code it ran
 * before): each stack is new, each frame comes from the cache with the id
 * it had, and a stack another process sent is found by its bytes.
 */
START_TEST(decode_known_frames)
{
	static const char *const abc[] = { "a", "b", "c" },
			  *const cab[] = { "c", "a", "b" },
			  *const bc[] = { "b", "c" };
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[3] = { { 80, 0 }, { 81, 0 }, { 82, 0 } };
	const struct fp_sample *out;
	struct fp_cache_stats st;
	uint64_t ids[3];
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 1);
	enc_stack_proc(&x, abc, 3);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	out = decode_expect(s, &r, pids, NULL, 1, 1, 1, &n);
	fp_assert_int_eq(out[0].nframes, 3);
	for (int i = 0; i < 3; i++) {
		ids[i] = out[0].frames[i].id;
		fp_assert(ids[i] != 0);
	}
	fp_assert_str_eq(out[0].frames[1].function, "b");
	fp_assert_int_eq(out[0].frames[2].line, 10 + 'c');
	ei_x_free(&x);

	/* the same process elsewhere, two others: c a b, a b c, b c */
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 3);
	enc_stack_proc(&x, cab, 3);
	enc_stack_proc(&x, abc, 3);
	enc_stack_proc(&x, bc, 2);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	out = decode_expect(s, &r, pids, NULL, 3, 2, 3, &n);
	fp_assert_int_eq(out[0].frames[0].id, ids[2]);
	fp_assert_int_eq(out[0].frames[1].id, ids[0]);
	fp_assert_int_eq(out[0].frames[2].id, ids[1]);
	fp_assert_str_eq(out[0].frames[0].function, "c");
	fp_assert_str_eq(out[0].frames[0].file, "lists.erl");
	fp_assert_int_eq(out[2].nframes, 2);
	fp_assert_int_eq(out[2].frames[0].id, ids[1]);
	fp_assert(out[0].stack_id != out[1].stack_id);
	fp_assert(out[2].stack_id != out[1].stack_id);
	fp_sampler_cache_stats(s, &st);
	fp_assert_int_eq(st.frame_misses, 3);	/* the first three only */
	fp_assert_int_eq(st.stack_misses, 3);	/* abc, cab, bc */
	fp_assert_int_eq(st.stack_hits, 1);	/* abc from another process */

	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/*
 * Stacks at the edges of the encoding: [] written as a LIST_EXT of none
 * (an empty stack), the same with a tail that is not [], a count the
 * bytes cannot hold, elements that are not frames.
 */
START_TEST(decode_stack_edges)
{
	static const struct {
		const char *bytes;
		int len;
		int result;
	} cases[] = {
		{ "l\0\0\0\0j", 6, 1 },
		{ "l\0\0\0\0a\1", 7, -EBADMSG },
		{ "l\x7f\xff\xff\xffj", 6, -EBADMSG },
		{ "l\0\0\0\3jjjj", 9, -EBADMSG },
	};
	struct fp_pid pid = { 80, 0 };

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct fp_sampler *s = fp_sampler_new();
		const struct fp_sample *out;
		struct fp_reply r;
		ei_x_buff x;
		size_t n;

		ei_x_new_with_version(&x);
		ei_x_encode_list_header(&x, 1);
		ei_x_encode_list_header(&x, 2);
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "current_stacktrace");
		ei_x_append_buf(&x, cases[c].bytes, cases[c].len);
		enc_kv_long(&x, "reductions", 1);
		ei_x_encode_empty_list(&x);
		ei_x_encode_empty_list(&x);
		r = reply_of(&x);
		/* twice: the second time through the caches */
		for (int pass = 0; pass < 2; pass++)
			decode_expect(s, &r, &pid, NULL, 1, 1 + pass, cases[c].result, NULL);
		if (cases[c].result == 1) {
			out = fp_sampler_samples(s, &n);
			fp_assert_int_eq(n, 1);
			fp_assert_int_eq(out[0].nframes, 0);
			fp_assert_int_eq(out[0].value[FP_METRIC_REDUCTIONS], 1);
		}
		ei_x_free(&x);
		fp_sampler_destroy(s);
	}
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("sample-stack");
	TCase *tc;

	tc = tcase_create("stack");
	tcase_add_test(tc, decode_cache);
	tcase_add_test(tc, decode_cache_bound);
	tcase_add_test(tc, decode_unchecked_truncated);
	tcase_add_test(tc, decode_known_frames);
	tcase_add_test(tc, skip_frame);
	tcase_add_test(tc, decode_stack_edges);
	tcase_add_test(tc, decode_unicode_file);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
