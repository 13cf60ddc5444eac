/*
 * flame_profd — offline microbenchmark of the daemon's per-sample path:
 * decode a sample reply (fp_sampler_decode), format it as perf script
 * (fp_perf_format_sample straight into the segment buffer, as the
 * daemon's recorder does) and compress ~1 MiB segments with zstd
 * (fpd_compress_segment, daemon/compress.c). No node, no network, no
 * disk: what one core can do, stage by stage and all together.
 *
 *   bench-offline [-r RUNS] [-t SECONDS] [-s SEGMENT_BYTES] [-l LEVEL]
 *                 [-o TEXT_OUT] [-C | -S] REPLY
 *
 * REPLY is a captured sample reply, term_to_binary of the result of the
 * daemon's sample request (bench/gen-reply.escript writes one). Each
 * stage runs RUNS times (default 9) for about SECONDS each (default 0.3);
 * -o writes one segment of the formatted text there, to look at. The rates
 * are samples per second of CPU time of this process
 * (CLOCK_PROCESS_CPUTIME_ID: on a shared machine wall time also counts the
 * time other processes held the core), with wall-clock rates beside them.
 * Run it pinned: bench/offline does `taskset -c 0`.
 *
 * The reply is decoded as the daemon receives a sample batch: unchecked
 * (fp_reply.checked false), the decoder checking what it reads. The same
 * reply is decoded again and again, so after the first pass every stack
 * is one the sampler has seen: the *warm* case, a node whose sampled
 * processes sit where they sat last time. -C drops the sampler's frame
 * and stack caches before every decode: the *cold* case, every stack and
 * frame new, so every frame is also formatted anew (the format stage then
 * formats copies of the samples without cache ids).
 *
 * -S is the case between: every stack new, made of frames seen before —
 * a node whose processes keep moving through the same code. The reply is
 * copied SHUFFLE_COPIES times before the clock starts, and in each copy
 * the frames of all stacks are shuffled among the slots of the same
 * encoded size (so every copy is still a valid reply, its stacks new
 * orders of the same frames); the passes cycle through the copies. The
 * caches work as in the daemon: every stack misses (a copy's stacks
 * recur only after all the others', long after the sampler's 8 MiB of
 * caches were dropped and refilled), every frame but the first of a
 * refill hits.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ei.h>

#include "compress.h"
#include "fp/perf-script.h"
#include "fp/sample.h"
#include "util-buf.h"
#include "util-mem.h"

struct bench {
	char *reply_buf;
	size_t reply_len;
	struct fp_reply reply;
	struct fp_pid *pids;
	size_t npids;
	struct fp_sampler *sampler;
	struct fp_perf_writer *writer;
	struct fpd_compressor *comp;
	struct fp_text seg;		/* the segment being filled */
	size_t segment_bytes;
	uint64_t time_us;
	bool cold, shuffle;
	char **copies;			/* -S: the shuffled copies of the reply */
	size_t ncopies, next_copy;
	struct fp_sample *uncached;	/* -C, -S: for the format stage */
	struct fp_frame *uncached_frames;

	/* one formatted segment and its sample count, for the compress stage */
	char *text;
	size_t text_len;
	size_t text_samples;

	size_t compressed_bytes;	/* of the last compress-stage segment */
};

struct run {
	double cpu_s, wall_s;
	uint64_t samples;
};

static double
now(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
read_file(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long size;
	int rc = 0;

	if (!f)
		return -errno;
	if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) <= 0 ||
	    fseek(f, 0, SEEK_SET) < 0) {
		rc = -EINVAL;
		goto out_close;
	}
	*buf = xzalloc((size_t)size);
	if (fread(*buf, 1, (size_t)size, f) != (size_t)size) {
		free(*buf);
		rc = -EIO;
		goto out_close;
	}
	*len = (size_t)size;
out_close:
	fclose(f);
	return rc;
}

static int
decode_once(struct bench *b)
{
	/* a new timestamp each time: the history (deltas) is exercised */
	b->time_us += 1000;
	if (b->cold)
		fp_sampler_drop_caches(b->sampler);
	if (b->ncopies) {
		b->reply.buf = b->copies[b->next_copy];
		b->next_copy = (b->next_copy + 1) % b->ncopies;
	}
	return fp_sampler_decode(b->sampler, &b->reply, b->pids, NULL, b->npids,
				 b->time_us, 8);
}

static void
format_samples(struct bench *b, const struct fp_sample *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fp_perf_format_sample(b->writer, &b->seg, &s[i]);
}

static int
compress_segment(struct bench *b, const void *data, size_t len)
{
	const void *out;
	size_t outlen;
	int rc = fpd_compress_segment(b->comp, data, len, &out, &outlen);

	if (rc == 0)
		b->compressed_bytes = outlen;
	return rc;
}

/* One pass of a stage; returns the samples it handled (or -1). */
typedef long (*stage_fn)(struct bench *b);

static long
stage_decode(struct bench *b)
{
	return decode_once(b);
}

static long
stage_format(struct bench *b)
{
	const struct fp_sample *s;
	size_t n;

	s = fp_sampler_samples(b->sampler, &n);
	format_samples(b, b->uncached ? b->uncached : s, n);
	if (b->seg.len >= b->segment_bytes)
		b->seg.len = 0;	/* as if flushed */
	return (long)n;
}

static long
stage_compress(struct bench *b)
{
	if (compress_segment(b, b->text, b->text_len) < 0)
		return -1;
	return (long)b->text_samples;
}

static long
stage_all(struct bench *b)
{
	const struct fp_sample *s;
	size_t n;
	int rc = decode_once(b);

	if (rc < 0)
		return -1;
	s = fp_sampler_samples(b->sampler, &n);
	format_samples(b, s, n);
	if (b->seg.len >= b->segment_bytes) {
		if (compress_segment(b, b->seg.buf, b->seg.len) < 0)
			return -1;
		b->seg.len = 0;
	}
	return (long)n;
}

static int
run_stage(struct bench *b, stage_fn fn, double seconds, struct run *r)
{
	double c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
	uint64_t samples = 0;
	unsigned iter = 0;

	/* check the clock every 16 passes: a pass is 10 us to 2 ms */
	do {
		for (int k = 0; k < 16; k++) {
			long n = fn(b);

			if (n < 0)
				return -EIO;
			samples += (uint64_t)n;
		}
		iter += 16;
	} while (now(CLOCK_PROCESS_CPUTIME_ID) - c0 < seconds);
	r->cpu_s = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
	r->wall_s = now(CLOCK_MONOTONIC) - w0;
	r->samples = samples;
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
report(const char *name, const struct run *runs, int nruns)
{
	double cpu[64], wall[64];

	for (int i = 0; i < nruns; i++) {
		cpu[i] = (double)runs[i].samples / runs[i].cpu_s;
		wall[i] = (double)runs[i].samples / runs[i].wall_s;
	}
	qsort(cpu, (size_t)nruns, sizeof(cpu[0]), cmp_double);
	qsort(wall, (size_t)nruns, sizeof(wall[0]), cmp_double);
	printf("| %-8s | %10.0f | %10.0f–%-10.0f | %8.3f | %10.0f |\n", name,
	       cpu[nruns / 2], cpu[0], cpu[nruns - 1], 1e6 / cpu[nruns / 2],
	       wall[nruns / 2]);
}

static double
pct(uint64_t hits, uint64_t misses)
{
	return hits + misses ? 100.0 * (double)hits / (double)(hits + misses) : 0;
}

/* Fill b->text with whole samples up to about one segment. */
static int
make_text(struct bench *b)
{
	const struct fp_sample *s;
	size_t n;

	b->seg.len = 0;
	b->text_samples = 0;
	while (b->seg.len < b->segment_bytes) {
		if (decode_once(b) < 0)
			return -EBADMSG;
		s = fp_sampler_samples(b->sampler, &n);
		for (size_t i = 0; i < n && b->seg.len < b->segment_bytes; i++) {
			fp_perf_format_sample(b->writer, &b->seg, &s[i]);
			b->text_samples++;
		}
	}
	b->text = xzalloc(b->seg.len);
	memcpy(b->text, b->seg.buf, b->seg.len);
	b->text_len = b->seg.len;
	b->seg.len = 0;
	return 0;
}

enum { SHUFFLE_COPIES = 64 };

struct span {
	int at, len;
};

static int
cmp_span_len(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->len != y->len ? (x->len > y->len) - (x->len < y->len) :
				  (x->at > y->at) - (x->at < y->at);
}

/* Where every frame of every current_stacktrace in the reply is. */
static size_t
find_frames(const char *buf, struct span **out)
{
	char atom[MAXATOMLEN_UTF8];
	int index = 1, nlists, nitems, arity, nframes, type, size;
	size_t n = 0, cap = 0;
	struct span *spans = NULL;

	*out = NULL;
	if (ei_decode_list_header(buf, &index, &nlists) < 0)
		return 0;
	for (int i = 0; i < nlists; i++) {
		if (ei_get_type(buf, &index, &type, &size) < 0)
			break;
		if (type != ERL_LIST_EXT) {	/* undefined: a dead process */
			if (ei_skip_term(buf, &index) < 0)
				break;
			continue;
		}
		ei_decode_list_header(buf, &index, &nitems);
		for (int k = 0; k < nitems; k++) {
			if (ei_decode_tuple_header(buf, &index, &arity) < 0 ||
			    ei_decode_atom(buf, &index, atom) < 0)
				goto out;
			if (strcmp(atom, "current_stacktrace") != 0) {
				if (ei_skip_term(buf, &index) < 0)
					goto out;
				continue;
			}
			if (ei_decode_list_header(buf, &index, &nframes) < 0)
				goto out;
			for (int f = 0; f < nframes; f++) {
				int at = index;

				if (ei_skip_term(buf, &index) < 0)
					goto out;
				FP_GROW(spans, cap, n + 1);
				spans[n++] = (struct span){ at, index - at };
			}
			if (nframes > 0 && ei_skip_term(buf, &index) < 0)
				goto out;	/* the tail */
		}
		if (nitems > 0 && ei_skip_term(buf, &index) < 0)
			goto out;
	}
out:
	*out = spans;
	return n;
}

static uint64_t
xorshift(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

/* -S: SHUFFLE_COPIES copies of the reply, frames shuffled among the slots
 * of their size in each. Returns the number of frames that can move. */
static size_t
make_shuffled_copies(struct bench *b)
{
	struct span *spans, *slot;
	size_t n = find_frames(b->reply_buf, &spans), movable = 0;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t *perm = xzalloc((n ? n : 1) * sizeof(*perm));

	qsort(spans, n, sizeof(*spans), cmp_span_len);
	b->copies = xzalloc(SHUFFLE_COPIES * sizeof(*b->copies));
	b->ncopies = SHUFFLE_COPIES;
	for (size_t c = 0; c < SHUFFLE_COPIES; c++) {
		char *copy = xzalloc(b->reply_len);

		memcpy(copy, b->reply_buf, b->reply_len);
		/* each run of slots of one size: a Fisher–Yates permutation */
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i; j < n && spans[j].len == spans[i].len; j++)
				perm[j - i] = j;
			if (c == 0 && j - i > 1)
				movable += j - i;
			for (size_t k = j - i; k > 1; k--) {
				size_t r = xorshift(&seed) % k, t = perm[k - 1];

				perm[k - 1] = perm[r];
				perm[r] = t;
			}
			for (size_t k = i; k < j; k++) {
				slot = &spans[perm[k - i]];
				memcpy(copy + spans[k].at, b->reply_buf + slot->at,
				       (size_t)slot->len);
			}
		}
		b->copies[c] = copy;
	}
	free(perm);
	free(spans);
	return movable;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: bench-offline [-r RUNS] [-t SECONDS] [-s SEGMENT_BYTES] [-l ZSTD_LEVEL] [-o TEXT_OUT] [-C | -S] REPLY\n");
}

/* Does the reply's first element ask for current_stacktrace? Not in the
 * first list of a pair (fp_node_sample_request()). */
static bool
first_has_stack(const char *buf)
{
	char atom[MAXATOMLEN_UTF8];
	int index = 1, n, arity;

	if (ei_decode_list_header(buf, &index, &n) < 0 ||
	    ei_decode_list_header(buf, &index, &n) < 0)
		return true;
	for (int i = 0; i < n; i++) {
		if (ei_decode_tuple_header(buf, &index, &arity) < 0 || arity != 2 ||
		    ei_decode_atom(buf, &index, atom) < 0)
			return true;
		if (strcmp(atom, "current_stacktrace") == 0)
			return true;
		if (ei_skip_term(buf, &index) < 0)
			return true;
	}
	return false;
}

int
main(int argc, char **argv)
{
	struct fp_perf_options popt = { .lines = false };
	struct bench b = { .segment_bytes = 1u << 20 };
	static const struct {
		const char *name;
		stage_fn fn;
	} stages[] = {
		{ "decode", stage_decode },
		{ "format", stage_format },
		{ "compress", stage_compress },
		{ "all", stage_all },
	};
	struct fp_cache_stats stats;
	struct run runs[64];
	int nruns = 9, level = 3, opt, rc = 1, index = 1, type, count;
	double seconds = 0.3;
	const char *text_out = NULL;

	while ((opt = getopt(argc, argv, "r:t:s:l:o:CSh")) != -1) {
		switch (opt) {
		case 'r': nruns = atoi(optarg); break;
		case 't': seconds = atof(optarg); break;
		case 's': b.segment_bytes = (size_t)strtoull(optarg, NULL, 0); break;
		case 'l': level = atoi(optarg); break;
		case 'o': text_out = optarg; break;
		case 'C': b.cold = true; break;
		case 'S': b.shuffle = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 64;
		}
	}
	if (optind != argc - 1 || nruns < 1 || nruns > 64 || seconds <= 0 ||
	    b.segment_bytes < 4096 || (b.cold && b.shuffle)) {
		usage(stderr);
		return 64;
	}
	if (read_file(argv[optind], &b.reply_buf, &b.reply_len) < 0 ||
	    (unsigned char)b.reply_buf[0] != 131) {
		fprintf(stderr, "bench-offline: %s: not a term_to_binary file\n",
			argv[optind]);
		return 66;
	}
	if (ei_get_type(b.reply_buf, &index, &type, &count) < 0 ||
	    type != ERL_LIST_EXT || count < 1) {
		fprintf(stderr, "bench-offline: %s: not a sample reply (a list)\n",
			argv[optind]);
		return 65;
	}
	b.reply = (struct fp_reply){ .buf = b.reply_buf, .len = b.reply_len,
				    .index = 1 };
	/* two item lists per process (as the daemon asks) or one */
	b.npids = count % 2 == 0 && !first_has_stack(b.reply_buf) ?
		  (size_t)count / 2 : (size_t)count;
	b.pids = xzalloc(b.npids * sizeof(*b.pids));
	for (size_t i = 0; i < b.npids; i++)
		b.pids[i] = (struct fp_pid){ (uint32_t)i + 100, 0 };
	b.sampler = fp_sampler_new();
	b.writer = fp_perf_writer_new(&popt);
	b.comp = fpd_compressor_new(FPD_COMPRESS_ZSTD, level);
	/* as daemon/output.c: the segment's first size */
	fp_text_reserve_first(&b.seg, 1, 65536);

	if (b.shuffle) {
		size_t movable = make_shuffled_copies(&b);

		printf("shuffled: %d copies, %zu frames moved among slots of their size\n",
		       SHUFFLE_COPIES, movable);
		if (movable < 2) {
			fprintf(stderr, "bench-offline: %s: no two frames of one size to shuffle\n",
				argv[optind]);
			rc = 65;
			goto out;
		}
	}
	if (decode_once(&b) != (int)b.npids) {
		fprintf(stderr, "bench-offline: %s: %zu processes, decode failed or found dead ones\n",
			argv[optind], b.npids);
		rc = 65;
		goto out;
	}
	if (b.cold || b.shuffle) {
		/* the format stage's samples: no stack id (-C, -S), no frame
		 * ids (-C) */
		const struct fp_sample *smp;
		size_t n, nf = 0, at = 0;

		smp = fp_sampler_samples(b.sampler, &n);
		for (size_t i = 0; i < n; i++)
			nf += smp[i].nframes;
		b.uncached = xzalloc(n * sizeof(*b.uncached));
		b.uncached_frames = xzalloc((nf ? nf : 1) * sizeof(*b.uncached_frames));
		for (size_t i = 0; i < n; i++) {
			b.uncached[i] = smp[i];
			b.uncached[i].stack_id = 0;
			b.uncached[i].frames = b.uncached_frames + at;
			for (uint32_t k = 0; k < smp[i].nframes; k++) {
				b.uncached_frames[at] = smp[i].frames[k];
				if (b.cold)
					b.uncached_frames[at].id = 0;
				at++;
			}
		}
	}
	if (make_text(&b) < 0)
		goto out;
	if (compress_segment(&b, b.text, b.text_len) < 0)
		goto out;
	if (text_out) {
		FILE *f = fopen(text_out, "w");

		if (!f || fwrite(b.text, 1, b.text_len, f) != b.text_len) {
			perror(text_out);
			if (f)
				fclose(f);
			goto out;
		}
		fclose(f);
	}

	printf("reply: %s, %zu bytes, %zu processes (%.0f B/process in ETF)\n",
	       argv[optind], b.reply_len, b.npids,
	       (double)b.reply_len / (double)b.npids);
	printf("segment: %zu bytes of text, %zu samples (%.0f B/sample), zstd level %d -> %zu bytes (%.1f B/sample, ratio %.1f)\n",
	       b.text_len, b.text_samples,
	       (double)b.text_len / (double)b.text_samples, level,
	       b.compressed_bytes,
	       (double)b.compressed_bytes / (double)b.text_samples,
	       (double)b.text_len / (double)b.compressed_bytes);
	printf("runs: %d x %.2f s CPU per stage\n\n", nruns, seconds);
	printf("| stage    | samples/s (CPU, median) | [min–max] | µs/sample | samples/s (wall) |\n");
	printf("|---|---|---|---|---|\n");
	for (size_t k = 0; k < sizeof(stages) / sizeof(stages[0]); k++) {
		for (int i = 0; i < nruns; i++) {
			if (run_stage(&b, stages[k].fn, seconds, &runs[i]) < 0) {
				fprintf(stderr, "bench-offline: stage %s failed\n",
					stages[k].name);
				goto out;
			}
		}
		b.seg.len = 0;
		report(stages[k].name, runs, nruns);
	}
	fp_sampler_cache_stats(b.sampler, &stats);
	printf("\ndecoder caches over the run: stacks %.1f%% hit (%llu new), frames %.1f%% hit (%llu new), %llu clears\n",
	       pct(stats.stack_hits, stats.stack_misses),
	       (unsigned long long)stats.stack_misses,
	       pct(stats.frame_hits, stats.frame_misses),
	       (unsigned long long)stats.frame_misses,
	       (unsigned long long)stats.clears);
	rc = 0;
out:
	fp_text_free(&b.seg);
	free(b.text);
	fpd_compressor_destroy(b.comp);
	fp_perf_writer_destroy(b.writer);
	fp_sampler_destroy(b.sampler);
	free(b.pids);
	free(b.reply_buf);
	free(b.uncached);
	free(b.uncached_frames);
	for (size_t c = 0; b.copies && c < b.ncopies; c++)
		free(b.copies[c]);
	free(b.copies);
	return rc;
}
