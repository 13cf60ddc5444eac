/*
 * flame_profd — the event loop.
 *
 * Each pass waits for the timer, the signals and the sources' descriptors,
 * then dispatches: signals first, then input, then the tick. After every
 * call into a source the loop lets it settle what its handlers recorded,
 * so a connection lost deep inside a reply handler is torn down once,
 * here, after the handler has returned.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "loop.h"
#include "daemon-log.h"
#include "options.h"
#include "util.h"
#include "util-mem.h"

/*
 * SIGINT/SIGTERM are honoured within a second whatever the node does:
 * samples in flight are waited for STOP_DRAIN_US, and any wait for the
 * node (a connect, the backtrace_depth put back, a message half read) is
 * given up STOP_GRACE_US after the stop was asked (the library asks
 * every FP_NODE_SLICE_MS, fpd_loop_give_up()).
 */
#define STOP_DRAIN_US 300000u
#define STOP_GRACE_US 600000u

struct fpd_loop {
	int tfd, sfd;
	const char *user;
	struct fpd_run_state run;
	unsigned sigints;		/* since the stop */
	uint64_t start_mono;
	uint64_t duration_us;
	bool duration_over;
	struct fpd_source **sources;
	size_t nsources;
	struct pollfd *pfd;		/* the timer, the signals, the sources */
	struct fpd_source **polled;	/* ... whose descriptor is pfd[2 + i] */
};

static int
setup_fds(struct fpd_loop *loop)
{
	struct itimerspec its = {
		.it_interval = { 0, FPD_TICK_US * 1000 },
		.it_value = { 0, FPD_TICK_US * 1000 },
	};
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	loop->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (loop->sfd < 0)
		return -errno;
	loop->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (loop->tfd < 0)
		return -errno;
	if (timerfd_settime(loop->tfd, 0, &its, NULL) < 0)
		return -errno;
	return 0;
}

int
fpd_loop_new(uint64_t duration_us, const char *user, struct fpd_loop **out)
{
	struct fpd_loop *loop = xnew(struct fpd_loop);
	int rc;

	*out = NULL;
	loop->tfd = loop->sfd = -1;
	loop->pfd = xzalloc(2 * sizeof(*loop->pfd));
	loop->user = user;
	loop->duration_us = duration_us;
	loop->start_mono = fpd_now_mono_us();
	rc = setup_fds(loop);
	if (rc < 0) {
		fpd_fatal("cannot set up timers and signals: %s", strerror(-rc));
		fpd_loop_destroy(loop);
		return rc;
	}
	*out = loop;
	return 0;
}

void
fpd_loop_destroy(struct fpd_loop *loop)
{
	if (!loop)
		return;
	if (loop->tfd >= 0)
		close(loop->tfd);
	if (loop->sfd >= 0)
		close(loop->sfd);
	free(loop->sources);
	free(loop->pfd);
	free(loop->polled);
	free(loop);
}

struct fpd_run_state *
fpd_loop_run_state(struct fpd_loop *loop)
{
	return &loop->run;
}

void
fpd_loop_add(struct fpd_loop *loop, struct fpd_source *src)
{
	size_t n = loop->nsources + 1;

	loop->sources = xrealloc(loop->sources, n * sizeof(*loop->sources));
	loop->polled = xrealloc(loop->polled, n * sizeof(*loop->polled));
	loop->pfd = xrealloc(loop->pfd, (2 + n) * sizeof(*loop->pfd));
	loop->sources[loop->nsources++] = src;
}

bool
fpd_loop_duration_over(const struct fpd_loop *loop)
{
	return loop->duration_over;
}

/* Stop asked (a signal, --duration): the clock of STOP_GRACE_US starts. */
static void
stop(struct fpd_loop *loop)
{
	if (loop->run.stopping)
		return;
	loop->run.stopping = true;
	loop->run.stop_mono = fpd_now_mono_us();
}

static void
settle(struct fpd_source *src)
{
	if (src->ops->settle)
		src->ops->settle(src);
}

/* Also called from inside a source's wait (fpd_loop_give_up()): it
 * settles nothing. */
static void
rotate_all(struct fpd_loop *loop)
{
	for (size_t i = 0; i < loop->nsources; i++) {
		struct fpd_source *src = loop->sources[i];

		if (src->ops->rotate)
			src->ops->rotate(src);
	}
}

/* SIGUSR2: a capture from the flight recorder, where one runs. */
static void
capture_all(struct fpd_loop *loop)
{
	bool any = false;

	for (size_t i = 0; i < loop->nsources; i++) {
		struct fpd_source *src = loop->sources[i];

		if (src->ops->capture) {
			src->ops->capture(src);
			any = true;
		}
	}
	if (!any)
		fpd_info("SIGUSR2: no --flight-recorder runs: nothing to capture");
}

static void
handle_signals(struct fpd_loop *loop)
{
	struct signalfd_siginfo si;

	while (read(loop->sfd, &si, sizeof(si)) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGINT:
		case SIGTERM:
			if (loop->run.stopping && si.ssi_signo == SIGINT &&
			    ++loop->sigints > 1) {
				fpd_warn("second SIGINT: exiting at once");
				rotate_all(loop);
				_exit(FPD_EXIT_OK);
			}
			loop->sigints = 1;
			fpd_info("%s: stopping", strsignal((int)si.ssi_signo));
			stop(loop);
			break;
		case SIGHUP:
			if (fpd_log_reopen() < 0)
				fpd_err("cannot reopen the log file: %s%s",
					strerror(errno), loop->user ?
					" (with --user, the file must be the "
					"user's or its directory writable by "
					"the user: docs/OPERATIONS.md)" : "");
			break;
		case SIGUSR1:
			fpd_info("SIGUSR1: rotating");
			rotate_all(loop);
			break;
		case SIGUSR2:
			capture_all(loop);
			break;
		}
	}
}

bool
fpd_loop_give_up(void *data)
{
	struct fpd_loop *loop = data;

	handle_signals(loop);
	return loop->run.stopping &&
	       fpd_now_mono_us() - loop->run.stop_mono >= STOP_GRACE_US;
}

static void
tick(struct fpd_loop *loop)
{
	uint64_t expirations, now;

	for (size_t i = 0; i < loop->nsources; i++) {
		struct fpd_source *src = loop->sources[i];

		if (src->ops->collect) {
			src->ops->collect(src);
			settle(src);
		}
	}
	now = fpd_now_mono_us();
	if (read(loop->tfd, &expirations, sizeof(expirations)) < 0 &&
	    errno != EAGAIN)
		fpd_debug("timerfd: %s", strerror(errno));
	if (loop->duration_us && now - loop->start_mono >= loop->duration_us &&
	    !loop->run.stopping) {
		fpd_info("duration reached; stopping");
		stop(loop);
		loop->duration_over = true;
	}
	for (size_t i = 0; i < loop->nsources; i++) {
		struct fpd_source *src = loop->sources[i];

		if (src->ops->tick) {
			src->ops->tick(src, now);
			settle(src);
		}
	}
}

/* Stopping: finish the samples in flight, then leave; a node that does
 * not answer is not waited for. True when the loop is done. */
static bool
drained(struct fpd_loop *loop)
{
	uint64_t now = fpd_now_mono_us();
	bool busy = false;

	for (size_t i = 0; i < loop->nsources; i++) {
		struct fpd_source *src = loop->sources[i];

		if (src->ops->drain) {
			src->ops->drain(src, now);
			settle(src);
		}
		busy |= src->ops->in_flight && src->ops->in_flight(src);
	}
	if (busy && now - loop->run.stop_mono < STOP_DRAIN_US)
		return false;
	for (size_t i = 0; i < loop->nsources; i++) {
		struct fpd_source *src = loop->sources[i];

		if (src->ops->abandon)
			src->ops->abandon(src);
	}
	return true;
}

int
fpd_loop_run(struct fpd_loop *loop)
{
	for (;;) {
		struct pollfd *pfd = loop->pfd;
		struct fpd_source **polled = loop->polled;
		nfds_t n = 2;

		if (loop->run.stopping && drained(loop))
			break;
		pfd[0] = (struct pollfd){ .fd = loop->tfd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = loop->sfd, .events = POLLIN };
		for (size_t i = 0; i < loop->nsources; i++) {
			int fd = loop->sources[i]->ops->fd(loop->sources[i]);

			if (fd < 0)
				continue;
			polled[n - 2] = loop->sources[i];
			pfd[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
		}
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			fpd_err("poll: %s", strerror(errno));
			loop->run.exit_code = FPD_EXIT_SOFTWARE;
			break;
		}
		if (pfd[1].revents & POLLIN)
			handle_signals(loop);
		for (nfds_t i = 2; i < n; i++) {
			struct fpd_source *src = polled[i - 2];

			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			src->ops->input(src);
			settle(src);
		}
		if (pfd[0].revents & POLLIN)
			tick(loop);
	}
	return loop->run.exit_code;
}
