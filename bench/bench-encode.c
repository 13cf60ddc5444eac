/*
 * flame_profd — how long the requests that carry pid lists take to
 * encode and send: an is_process_alive request and a sample request (--request
 * rex, every pid asked in full) for N pids, through the library's own
 * request functions. No node: the connection is one end of a socket
 * pair whose other end a thread reads and throws away.
 *
 *   bench-encode [-r RUNS] [N...]
 *
 * Each request runs RUNS times (default 5) for each N (default 10000,
 * 100000 and 1000000); prints the median wall and CPU time of one request
 * and the bytes it sent. Measurement only: nothing is asserted.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ei.h>

#include "node-private.h"

struct drain {
	int fd;
	unsigned long long bytes;
};

static void *
drain_run(void *data)
{
	struct drain *d = data;
	static char buf[1 << 16];
	ssize_t n;

	while ((n = read(d->fd, buf, sizeof(buf))) > 0)
		d->bytes += (unsigned long long)n;
	return NULL;
}

static double
now_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

enum kind { ALIVE, SAMPLE };

static int
request(struct fp_node *node, enum kind kind, const struct fp_pid *pids,
	size_t n)
{
	uint64_t id;

	if (kind == ALIVE)
		return fp_node_alive_request(node, pids, n, &id);
	return fp_node_sample_request(node, pids, NULL, n, &id);
}

static void
run(enum kind kind, size_t n, int runs)
{
	struct fp_pid *pids = calloc(n, sizeof(*pids));
	double *wall = calloc((size_t)runs, sizeof(*wall));
	double *cpu = calloc((size_t)runs, sizeof(*cpu));
	struct drain d = { 0 };
	unsigned long long bytes = 0;
	pthread_t thread;
	int sv[2];

	for (size_t i = 0; i < n; i++) {
		pids[i].num = (unsigned)(i & 0x7fff);
		pids[i].serial = (unsigned)(i >> 15);
	}
	for (int r = 0; r < runs; r++) {
		/* a new handle each run: its send buffer starts small, as
		 * after a connect */
		struct fp_node *node = fp_node_new("bench@host", "cookie");
		double w0, c0;
		int rc;

		node->creation = 1234;
		snprintf(node->self_name, sizeof(node->self_name), "fpd@host");
		if (ei_connect_xinit(&node->ec, "host", "fpd", "fpd@host", NULL,
				     "cookie", 77) < 0 ||
		    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			perror("bench-encode: setup");
			exit(1);
		}
		node->fd = sv[0];
		d.fd = sv[1];
		d.bytes = 0;
		pthread_create(&thread, NULL, drain_run, &d);
		w0 = now_ms(CLOCK_MONOTONIC);
		c0 = now_ms(CLOCK_THREAD_CPUTIME_ID);
		rc = request(node, kind, pids, n);
		cpu[r] = now_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
		wall[r] = now_ms(CLOCK_MONOTONIC) - w0;
		if (rc < 0) {
			fprintf(stderr, "bench-encode: request: %s\n", strerror(-rc));
			exit(1);
		}
		close(sv[0]);
		node->fd = -1;
		pthread_join(thread, NULL);
		close(sv[1]);
		bytes = d.bytes;
		fp_node_destroy(node);
	}
	qsort(wall, (size_t)runs, sizeof(*wall), cmp_double);
	qsort(cpu, (size_t)runs, sizeof(*cpu), cmp_double);
	printf("%-10s %8zu pids  %10.2f ms wall  %10.2f ms cpu  %10llu bytes  (median of %d)\n",
	       kind == ALIVE ? "alive" : "sample", n, wall[runs / 2],
	       cpu[runs / 2], bytes, runs);
	fflush(stdout);
	free(pids);
	free(wall);
	free(cpu);
}

int
main(int argc, char **argv)
{
	static const size_t defaults[] = { 10000, 100000, 1000000 };
	int runs = 5, opt;

	while ((opt = getopt(argc, argv, "r:h")) != -1) {
		switch (opt) {
		case 'r':
			runs = atoi(optarg);
			if (runs < 1)
				runs = 1;
			break;
		default:
			fprintf(stderr, "usage: bench-encode [-r RUNS] [N...]\n");
			return opt == 'h' ? 0 : 64;
		}
	}
	ei_init();
	for (enum kind k = ALIVE; k <= SAMPLE; k++) {
		if (optind == argc) {
			for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
				run(k, defaults[i], runs);
		}
		for (int i = optind; i < argc; i++)
			run(k, (size_t)strtoull(argv[i], NULL, 10), runs);
	}
	return 0;
}
