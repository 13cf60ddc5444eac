/*
 * flame_profd — the node's own CPU samples, read with perf_event_open(2).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perf-events.h"
#include "perf-symbols.h"
#include "util.h"
#include "util-mem.h"

#define RING_PAGES 16			/* data pages per thread: 64 KiB */
#define RESCAN_US 1000000u		/* look for new threads */
#define MAX_CHAIN 256

struct thread {
	pid_t tid;
	int fd;
	void *ring;
	size_t ring_len;
	char comm[20];
	bool seen;			/* in the last scan of /proc */
};

/* A record copied out of a ring, until the batch is sorted. */
struct raw {
	uint64_t time_ns;
	size_t thread;
	bool kernel;
	uint32_t nips;
	size_t ips_at;			/* in the source's ips array */
};

struct fpd_perf_events {
	pid_t pid;
	unsigned freq;
	bool user_only;
	int epfd;
	struct thread *threads;
	size_t nthreads;
	uint64_t scanned_us;
	uint64_t lost;
	struct fpd_symbols *syms;

	struct raw *raws;
	size_t nraws, raws_cap;
	uint64_t *ips;
	size_t nips, ips_cap;
	struct fp_frame frames[MAX_CHAIN + 1];
};

static long
perf_event_open(struct perf_event_attr *attr, pid_t tid)
{
	return syscall(SYS_perf_event_open, attr, tid, -1, -1,
		       PERF_FLAG_FD_CLOEXEC);
}

static int
open_thread(struct fpd_perf_events *src, pid_t tid, struct thread *t)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = src->freq,
		.freq = 1,
		.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			       PERF_SAMPLE_CALLCHAIN,
		.exclude_callchain_kernel = 1,
		.exclude_kernel = src->user_only,
		.exclude_hv = 1,
		.use_clockid = 1,
		.clockid = CLOCK_MONOTONIC,
		.watermark = 1,
		.wakeup_watermark = RING_PAGES * 4096 / 4,
	};
	struct epoll_event ev = { .events = EPOLLIN };
	long fd;
	void *ring;
	size_t len = (RING_PAGES + 1) * (size_t)sysconf(_SC_PAGESIZE);

	fd = perf_event_open(&attr, tid);
	if (fd < 0 && (errno == EACCES || errno == EPERM) && !src->user_only) {
		src->user_only = true;
		attr.exclude_kernel = 1;
		fd = perf_event_open(&attr, tid);
	}
	if (fd < 0)
		return -errno;
	ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
	if (ring == MAP_FAILED) {
		int err = -errno;

		close((int)fd);
		return err;
	}
	*t = (struct thread){ .tid = tid, .fd = (int)fd, .ring = ring,
			      .ring_len = len, .seen = true };
	ev.data.u64 = (uint64_t)tid;
	epoll_ctl(src->epfd, EPOLL_CTL_ADD, (int)fd, &ev);
	return 0;
}

static void
close_thread(struct fpd_perf_events *src, struct thread *t)
{
	epoll_ctl(src->epfd, EPOLL_CTL_DEL, t->fd, NULL);
	munmap(t->ring, t->ring_len);
	close(t->fd);
}

static void
read_comm(pid_t pid, pid_t tid, char *buf, size_t size)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	buf[0] = '\0';
	f = fopen(path, "re");
	if (f) {
		if (fgets(buf, (int)size, f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
	/* the node names its threads (a NIF may, any bytes): the label
	 * goes into files read as UTF-8 */
	fpd_utf8_fix(buf, strlen(buf));
	if (!buf[0])
		snprintf(buf, size, "thread");
}

/* Open events on threads not seen yet, close those that are gone.
 * Returns the first error when no thread could be opened at all. */
static int
scan_threads(struct fpd_perf_events *src)
{
	char path[64];
	struct dirent *de;
	DIR *dir;
	int first_err = 0;

	src->scanned_us = fpd_now_mono_us();
	snprintf(path, sizeof(path), "/proc/%d/task", (int)src->pid);
	dir = opendir(path);
	if (!dir)
		return -ESRCH;
	for (size_t i = 0; i < src->nthreads; i++)
		src->threads[i].seen = false;
	while ((de = readdir(dir))) {
		char *end;
		long tid = strtol(de->d_name, &end, 10);
		bool known = false;

		if (*end || tid <= 0)
			continue;
		for (size_t i = 0; i < src->nthreads; i++) {
			if (src->threads[i].tid == tid) {
				src->threads[i].seen = known = true;
				break;
			}
		}
		if (known)
			continue;
		struct thread t;
		int rc = open_thread(src, (pid_t)tid, &t);
		if (rc < 0) {
			if (!first_err)
				first_err = rc;
			continue;
		}
		read_comm(src->pid, (pid_t)tid, t.comm, sizeof(t.comm));
		src->threads = xrealloc(src->threads,
					(src->nthreads + 1) * sizeof(*src->threads));
		src->threads[src->nthreads++] = t;
	}
	closedir(dir);
	/* A thread that exited is gone from /proc; its buffer was read
	 * before this scan (fpd_perf_events_read() scans after reading). */
	for (size_t i = 0; i < src->nthreads;) {
		if (!src->threads[i].seen) {
			close_thread(src, &src->threads[i]);
			src->threads[i] = src->threads[--src->nthreads];
		} else {
			i++;
		}
	}
	return src->nthreads ? 0 : (first_err ? first_err : -ESRCH);
}

int
fpd_perf_events_new(const struct fpd_perf_events_config *config,
		    struct fpd_perf_events **out)
{
	struct fpd_perf_events *src;
	int rc;

	*out = NULL;
	if (!config->freq || config->pid <= 0)
		return -EINVAL;
	src = xnew(struct fpd_perf_events);
	src->pid = config->pid;
	src->freq = config->freq;
	src->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (src->epfd < 0) {
		rc = -errno;
		free(src);
		return rc;
	}
	rc = scan_threads(src);
	if (rc < 0) {
		fpd_perf_events_destroy(src);
		return rc;
	}
	src->syms = fpd_symbols_new(config->pid, config->map_dir);
	*out = src;
	return 0;
}

void
fpd_perf_events_destroy(struct fpd_perf_events *src)
{
	if (!src)
		return;
	for (size_t i = 0; i < src->nthreads; i++)
		close_thread(src, &src->threads[i]);
	free(src->threads);
	if (src->epfd >= 0)
		close(src->epfd);
	fpd_symbols_destroy(src->syms);
	free(src->raws);
	free(src->ips);
	free(src);
}

int
fpd_perf_events_fd(const struct fpd_perf_events *src)
{
	return src->epfd;
}

uint64_t
fpd_perf_events_lost(const struct fpd_perf_events *src)
{
	return src->lost;
}

unsigned
fpd_perf_events_threads(const struct fpd_perf_events *src)
{
	return (unsigned)src->nthreads;
}

bool
fpd_perf_events_user_only(const struct fpd_perf_events *src)
{
	return src->user_only;
}

/* Copy @len bytes at ring offset @off (the data area wraps). */
static void
ring_copy(const struct thread *t, uint64_t off, void *dst, size_t len)
{
	const struct perf_event_mmap_page *meta = t->ring;
	const char *data = (const char *)t->ring + meta->data_offset;
	uint64_t size = meta->data_size;
	size_t at = (size_t)(off % size);
	size_t first = len < size - at ? len : (size_t)(size - at);

	memcpy(dst, data + at, first);
	if (first < len)
		memcpy((char *)dst + first, data, len - first);
}

static void
drain_thread(struct fpd_perf_events *src, size_t ti)
{
	struct thread *t = &src->threads[ti];
	struct perf_event_mmap_page *meta = t->ring;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	uint64_t rec[8 + MAX_CHAIN];

	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;

		ring_copy(t, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || tail + h.size > head)
			break;
		if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
			uint64_t lost[2];

			ring_copy(t, tail + sizeof(h), lost, sizeof(lost));
			src->lost += lost[1];
		} else if (h.type == PERF_RECORD_SAMPLE && h.size <= sizeof(rec)) {
			/* pid, tid; time; nr; ips[nr] */
			ring_copy(t, tail, rec, h.size);
			size_t words = (h.size - sizeof(h)) / 8;
			const uint64_t *w = (const uint64_t *)((const char *)rec + sizeof(h));

			if (words >= 3 && w[2] <= words - 3) {
				uint32_t nr = (uint32_t)w[2];

				if (src->nraws == src->raws_cap) {
					src->raws_cap = src->raws_cap ? 2 * src->raws_cap : 256;
					src->raws = xrealloc(src->raws, src->raws_cap * sizeof(*src->raws));
				}
				if (src->nips + nr > src->ips_cap) {
					src->ips_cap = 2 * (src->nips + nr) + 1024;
					src->ips = xrealloc(src->ips, src->ips_cap * sizeof(*src->ips));
				}
				memcpy(src->ips + src->nips, w + 3, nr * sizeof(uint64_t));
				src->raws[src->nraws++] = (struct raw){
					.time_ns = w[1],
					.thread = ti,
					.kernel = (h.misc & PERF_RECORD_MISC_CPUMODE_MASK) ==
						  PERF_RECORD_MISC_KERNEL,
					.nips = nr,
					.ips_at = src->nips,
				};
				src->nips += nr;
			}
		}
		tail += h.size;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

static int
cmp_raw(const void *a, const void *b)
{
	const struct raw *x = a, *y = b;

	return x->time_ns < y->time_ns ? -1 : x->time_ns > y->time_ns;
}

int
fpd_perf_events_read(struct fpd_perf_events *src, int64_t epoch_offset_us,
		     fpd_perf_emit_fn emit, void *data)
{
	int emitted = 0, rc = 0;
	size_t n;

	src->nraws = src->nips = 0;
	for (size_t i = 0; i < src->nthreads; i++)
		drain_thread(src, i);
	n = src->nraws;
	/* raws is NULL until the first sample: qsort() takes no NULL */
	if (n > 1)
		qsort(src->raws, n, sizeof(*src->raws), cmp_raw);

	for (size_t i = 0; i < n && !rc; i++) {
		const struct raw *r = &src->raws[i];
		const struct thread *t = &src->threads[r->thread];
		uint32_t nf = 0;
		bool first_user = true;
		struct fp_sample s = {
			.pid = { .num = 0, .serial = (uint32_t)t->tid },
			.time_us = (uint64_t)((int64_t)(r->time_ns / 1000) + epoch_offset_us),
			.status = FP_STATUS_CPU,
			.label = t->comm,
		};

		if (r->kernel)
			src->frames[nf++] = (struct fp_frame){
				.module = "[kernel]", .function = "kernel",
				.file = "kernel",
			};
		for (uint32_t k = 0; k < r->nips && nf < MAX_CHAIN + 1; k++) {
			uint64_t ip = src->ips[r->ips_at + k];

			if (ip >= (uint64_t)PERF_CONTEXT_MAX)
				continue;	/* a context marker */
			/* every address but the sampled one is a return
			 * address: the call is the byte before it */
			fpd_symbols_lookup(src->syms, first_user ? ip : ip - 1,
					   &src->frames[nf++]);
			first_user = false;
		}
		s.frames = src->frames;
		s.nframes = nf;
		rc = emit(data, &s);
		if (!rc)
			emitted++;
	}
	if (fpd_now_mono_us() - src->scanned_us >= RESCAN_US)
		scan_threads(src);
	return rc ? rc : emitted;
}
