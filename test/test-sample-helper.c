/*
 * flame_profd — unit tests: the helper's batches and rows, and the
 * renaming of its module.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp-test.h"
#include "fp/sample.h"
#include "path.h"
#include "sample-fixtures.h"

/* term_to_binary({Time, Pids, Asks, Results}) of a row: pid 80 in full
 * (@p's items in two lists) and, with @probe81, pid 81 probed. */
static void
enc_row(ei_x_buff *x, long time, const struct proc *p,
	const struct proc *probe81, const char *asks_override,
	int nasks_override)
{
	struct proc rest = *p;
	ei_x_buff row;
	char asks[2] = { FP_ASK_FULL, FP_ASK_PROBE };

	ei_x_new_with_version(&row);
	ei_x_encode_tuple_header(&row, 4);
	ei_x_encode_long(&row, time);
	ei_x_encode_list_header(&row, 1 + (probe81 != NULL));
	enc_pid(&row, 80);
	if (probe81)
		enc_pid(&row, 81);
	ei_x_encode_empty_list(&row);
	if (asks_override)
		ei_x_encode_binary(&row, asks_override, nasks_override);
	else
		ei_x_encode_binary(&row, asks, 1 + (probe81 != NULL));
	ei_x_encode_list_header(&row, 2 + (probe81 != NULL));
	rest.no_status = true;
	enc_status(&row, p->status);
	enc_proc(&row, &rest);
	if (probe81)
		enc_probe(&row, probe81);
	ei_x_encode_empty_list(&row);
	ei_x_encode_binary(x, row.buff, row.index);
	ei_x_free(&row);
}

static void
enc_batch_head(ei_x_buff *x, long rows, bool last)
{
	ei_x_encode_tuple_header(x, 6);
	ei_x_encode_atom(x, "flame_profd_batch");
	ei_x_encode_long(x, 1000);
	ei_x_encode_long(x, 77);
	ei_x_encode_long(x, 3);
	ei_x_encode_boolean(x, last);
	if (rows)
		ei_x_encode_list_header(x, rows);
}

/* A batch's rows decode into what fp_sampler_decode() takes. */
START_TEST(batch_rows)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[4];
	enum fp_ask asks[4];
	struct fp_batch b;
	struct fp_batch_row row;
	struct fp_reply r;
	struct proc idle1 = proc_idle;
	const struct fp_sample *out;
	size_t n;
	ei_x_buff x;

	idle1.reductions = 1001;	/* the full sample's signal */
	ei_x_new_with_version(&x);
	enc_batch_head(&x, 3, true);
	enc_row(&x, 500, &proc_a, NULL, NULL, 0);
	{
		/* pid 81 in full first, then probed */
		ei_x_buff rb;
		struct proc rest = proc_idle;
		char asks2[2] = { FP_ASK_FULL, FP_ASK_FULL };

		ei_x_new_with_version(&rb);
		ei_x_encode_tuple_header(&rb, 4);
		ei_x_encode_long(&rb, 520);
		ei_x_encode_list_header(&rb, 2);
		enc_pid(&rb, 80);
		enc_pid(&rb, 81);
		ei_x_encode_empty_list(&rb);
		ei_x_encode_binary(&rb, asks2, 2);
		ei_x_encode_list_header(&rb, 4);
		rest.no_status = true;
		for (int k = 0; k < 2; k++) {
			enc_status(&rb, "running");
			enc_proc(&rb, k ? &rest : &proc_a);
		}
		ei_x_encode_empty_list(&rb);
		ei_x_encode_binary(&x, rb.buff, rb.index);
		ei_x_free(&rb);
	}
	enc_row(&x, 540, &proc_a, &idle1, NULL, 0);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	r.checked = true;

	fp_assert_int_eq(fp_node_batch_open(&r, &b), 0);
	fp_assert_int_eq(b.sent_us, 1000);
	fp_assert_int_eq(b.work_us, 77);
	fp_assert_int_eq(b.skipped, 3);
	fp_assert(b.last);
	fp_assert_int_eq(b.rows, 3);

	fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, 4), 1);
	fp_assert_int_eq(row.time_us, 500);
	fp_assert_int_eq(row.n, 1);
	fp_assert_int_eq(pids[0].num, 80);
	fp_assert_int_eq(asks[0], FP_ASK_FULL);
	decode_expect(s, &row.results, pids, asks, row.n, row.time_us, 1, NULL);
	out = fp_sampler_samples(s, &n);
	fp_assert_str_eq(out[0].registered_name, "my_server");
	fp_assert_int_eq(out[0].value[FP_METRIC_REDUCTIONS], 1000);

	fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, 4), 1);
	fp_assert_int_eq(row.n, 2);
	decode_expect(s, &row.results, pids, asks, row.n, row.time_us, 2, NULL);

	/* the probe of 81 finds it where its full sample left it (plus
	 * that sample's signal): a sample without a stack of its own */
	fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, 4), 1);
	fp_assert_int_eq(row.n, 2);
	fp_assert_int_eq(pids[1].num, 81);
	fp_assert_int_eq(asks[1], FP_ASK_PROBE);
	decode_expect(s, &row.results, pids, asks, row.n, row.time_us, 2, NULL);
	fp_assert_int_eq(fp_sampler_reused(s), 1);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(out[1].time_us, 540);
	fp_assert_int_eq(out[1].nframes, 2);

	fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, 4), 0);
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

START_TEST(batch_bad)
{
	struct fp_pid pids[4];
	enum fp_ask asks[4];
	struct fp_batch b;
	struct fp_batch_row row;
	struct fp_reply r;
	int open_rc = 0, row_rc = -EBADMSG;
	size_t max = 4;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	switch (_i) {
	case 0:		/* the helper failed */
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "flame_profd_error");
		ei_x_encode_atom(&x, "badarg");
		open_rc = -EPROTO;
		break;
	case 1:		/* no batch */
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "flame_profd_batch");
		ei_x_encode_long(&x, 1);
		open_rc = -EBADMSG;
		break;
	case 2:		/* a negative count */
		ei_x_encode_tuple_header(&x, 6);
		ei_x_encode_atom(&x, "flame_profd_batch");
		ei_x_encode_long(&x, 1);
		ei_x_encode_long(&x, -5);
		ei_x_encode_long(&x, 0);
		ei_x_encode_boolean(&x, 0);
		ei_x_encode_empty_list(&x);
		open_rc = -EBADMSG;
		break;
	case 3:		/* asks shorter than the pids */
		enc_batch_head(&x, 1, false);
		enc_row(&x, 5, &proc_a, &proc_idle, "\0", 1);
		ei_x_encode_empty_list(&x);
		break;
	case 4:		/* an ask that is none */
		enc_batch_head(&x, 1, false);
		enc_row(&x, 5, &proc_a, NULL, "\7", 1);
		ei_x_encode_empty_list(&x);
		break;
	case 5:		/* more pids than room */
		enc_batch_head(&x, 1, false);
		enc_row(&x, 5, &proc_a, &proc_idle, NULL, 0);
		ei_x_encode_empty_list(&x);
		max = 1;
		break;
	case 6:		/* a row that is no term */
		enc_batch_head(&x, 1, false);
		ei_x_encode_binary(&x, "\203h\2a", 4);
		ei_x_encode_empty_list(&x);
		break;
	case 7:		/* a row that is not a binary */
		enc_batch_head(&x, 1, false);
		ei_x_encode_atom(&x, "row");
		ei_x_encode_empty_list(&x);
		break;
	}
	r = reply_of(&x);
	fp_assert_int_eq(fp_node_batch_open(&r, &b), open_rc);
	if (open_rc == 0)
		fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, max), row_rc);
	ei_x_free(&x);
}
END_TEST

/* The module's name is its first atom: renamed in place, same length. */
START_TEST(beam_rename)
{
	unsigned char *beam = malloc(fp_helper_beam_len);
	/* FOR1, BEAM, and an AtU8 chunk of the OTP 26 kind: a negative
	 * count, lengths as compact terms (18 takes two bytes) */
	unsigned char compact[] = "FOR1\0\0\0\x24" "BEAM" "AtU8\0\0\0\x18"
				  "\xff\xff\xff\xff\x08\x12" "flame_profd_helper";

	memcpy(beam, fp_helper_beam, fp_helper_beam_len);
	fp_assert(memmem(beam, fp_helper_beam_len, "flame_profd_helper", 18));
	fp_assert_int_eq(node_beam_rename(beam, fp_helper_beam_len,
					  "flame_profd_helper",
					  "fpdh_0123456789abc"), 0);
	fp_assert(!memmem(beam, fp_helper_beam_len, "flame_profd_helper", 18));
	fp_assert(memmem(beam, fp_helper_beam_len, "fpdh_0123456789abc", 18));
	/* no longer the module named */
	fp_assert_int_eq(node_beam_rename(beam, fp_helper_beam_len,
					  "flame_profd_helper",
					  "fpdh_0123456789abd"), -EINVAL);
	/* names of other lengths, short and foreign images */
	fp_assert_int_eq(node_beam_rename(beam, fp_helper_beam_len,
					  "fpdh_0123456789abc", "x"), -EINVAL);
	fp_assert_int_eq(node_beam_rename(beam, 40, "fpdh_0123456789abc",
					  "fpdh_0123456789abd"), -EINVAL);
	beam[0] = 'X';
	fp_assert_int_eq(node_beam_rename(beam, fp_helper_beam_len,
					  "fpdh_0123456789abc",
					  "fpdh_0123456789abd"), -EINVAL);

	fp_assert_int_eq(node_beam_rename(compact, sizeof(compact) - 1,
					  "flame_profd_helper",
					  "fpdh_0123456789abc"), 0);
	fp_assert(memmem(compact, sizeof(compact) - 1, "fpdh_0123456789abc", 18));
	free(beam);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("sample-helper");
	TCase *tc;

	tc = tcase_create("helper");
	tcase_add_test(tc, batch_rows);
	tcase_add_loop_test(tc, batch_bad, 0, 8);
	tcase_add_test(tc, beam_rename);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
