/*
 * flame_profd — the control socket's daemon end.
 *
 * The loop polls one descriptor of it: the listening socket, or while a
 * client is served, that client's connection (further clients wait in
 * the backlog). A client has FPD_CTL_CLIENT_US to send its one line;
 * the answer is a few hundred bytes sent without waiting (a socket's
 * buffer holds it), and the connection is closed. So a client that
 * sends nothing, or never reads, costs the loop nothing but that second,
 * and no request does any work beyond what a SIGUSR2 does.
 *
 * Who may ask: the socket is 0600 and owned by the user the daemon runs
 * as, in the node's directory (no other user may write there, fs-safe.h),
 * and the peer's credentials (SO_PEERCRED) are checked again: root or
 * that user, nobody else.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl.h"
#include "daemon-log.h"
#include "flight.h"
#include "fs-safe.h"
#include "recorder.h"
#include "session.h"
#include "source.h"
#include "util.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-mem.h"

#define RATE_SLOTS 11			/* achieved: over the last 10 s */
#define RATE_STEP_US 1000000u
#define ACCEPT_PAUSE_US 1000000u	/* out of descriptors: accept again after */

struct fpd_ctl {
	struct fpd_source source;	/* first: the loop's handle */
	struct fpd_ctl_config cfg;
	int lfd, cfd;
	struct fpd_made made;
	char line[FPD_CTL_LINE_MAX];
	size_t len;
	uint64_t deadline_mono;
	/* out of descriptors: the listening socket is not polled before
	 * this (monotonic; 0: polled) */
	uint64_t accept_paused_until;
	bool accept_warned;
	/* the recorder's samples once a second, for the achieved rate */
	uint64_t rate_mono[RATE_SLOTS], rate_samples[RATE_SLOTS];
	size_t rate_n, rate_next;
};

static void
drop_client(struct fpd_ctl *ctl)
{
	if (ctl->cfd >= 0)
		close(ctl->cfd);
	ctl->cfd = -1;
	ctl->len = 0;
}

static void
answer(struct fpd_ctl *ctl, const struct fp_text *t)
{
	ssize_t n = send(ctl->cfd, t->buf, t->len, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (n < 0 || (size_t)n < t->len)
		fpd_debug("ctl: the client took %zd of the answer's %zu bytes",
			  n, t->len);
	drop_client(ctl);
}

static void
put_error(struct fp_text *t, enum fpd_ctl_error e, const char *text)
{
	fp_text_puts(t, "error: ");
	fp_text_puts(t, fpd_ctl_error_name(e));
	fp_text_putc(t, ' ');
	fp_text_puts(t, text);
	fp_text_putc(t, '\n');
}

static void
put_key(struct fp_text *t, const char *key)
{
	fp_text_puts(t, key);
	fp_text_puts(t, ": ");
}

static void
put_u64(struct fp_text *t, const char *key, uint64_t v)
{
	put_key(t, key);
	fp_text_put_u64(t, v);
	fp_text_putc(t, '\n');
}

static double
achieved(const struct fpd_ctl *ctl)
{
	size_t newest = (ctl->rate_next + RATE_SLOTS - 1) % RATE_SLOTS;
	size_t oldest = ctl->rate_n < RATE_SLOTS ? 0 : ctl->rate_next;
	uint64_t us;

	if (ctl->rate_n < 2)
		return 0;
	us = ctl->rate_mono[newest] - ctl->rate_mono[oldest];
	return us ? (double)(ctl->rate_samples[newest] -
			     ctl->rate_samples[oldest]) * 1e6 / (double)us : 0;
}

static void
status(struct fpd_ctl *ctl, struct fp_text *t)
{
	const struct fpd_ctl_config *c = &ctl->cfg;
	char num[64];

	fp_text_puts(t, "ok\n");
	put_key(t, "node");
	fp_text_puts_escaped(t, c->node, NULL);
	fp_text_putc(t, '\n');
	put_key(t, "dir");
	fp_text_puts_escaped(t, c->dir, NULL);
	fp_text_putc(t, '\n');
	put_key(t, "connected");
	fp_text_puts(t, c->session && fpd_session_connected(c->session) ?
		     "yes\n" : "no\n");
	put_u64(t, "samples", fpd_recorder_samples(c->rec));
	snprintf(num, sizeof(num), "achieved: %.1f/s\n", achieved(ctl));
	fp_text_puts(t, num);
	put_key(t, "flight_recorder");
	if (!c->flight) {
		fp_text_puts(t, "off\n");
		return;
	}
	fp_text_puts(t, "on\n");
	{
		const struct fpd_flight_stats *s = fpd_flight_stats(c->flight);
		char when[40];

		put_u64(t, "ring_bytes", s->bytes);
		put_u64(t, "ring_peak_bytes", s->peak_bytes);
		put_u64(t, "ring_samples", s->samples);
		snprintf(num, sizeof(num), "ring_span: %.1f s\n",
			 s->frames ? (double)(s->newest_us - s->oldest_us) / 1e6 : 0.0);
		fp_text_puts(t, num);
		put_u64(t, "captures", s->captures);
		put_u64(t, "captures_last_hour", fpd_flight_last_hour(c->flight));
		put_u64(t, "held_off", s->suppressed);
		put_u64(t, "capped", s->capped);
		put_key(t, "last_trigger");
		if (!s->last_outcome) {
			fp_text_puts(t, "none\n");
			return;
		}
		fpd_format_utc(s->last_trigger_us, when, sizeof(when));
		fp_text_puts(t, s->last_trigger);
		if (s->last_reason[0]) {
			fp_text_puts(t, " \"");
			fp_text_puts(t, s->last_reason);	/* escaped */
			fp_text_putc(t, '"');
		}
		fp_text_puts(t, " at ");
		fp_text_puts(t, when);
		fp_text_puts(t, " (");
		fp_text_puts(t, s->last_outcome);
		fp_text_puts(t, ")\n");
	}
}

static void
trigger(struct fpd_ctl *ctl, const char *reason, struct fp_text *t)
{
	char dir[FP_PERF_NAME_MAX], text[160];
	int rc;

	if (!ctl->cfg.flight) {
		put_error(t, FPD_CTL_ERR_NO_RECORDER,
			  "the daemon runs without --flight-recorder");
		return;
	}
	rc = fpd_flight_fire_ctl(ctl->cfg.flight, reason, fpd_now_epoch_us(),
				 dir, sizeof(dir));
	if (rc == -EBUSY) {
		put_error(t, FPD_CTL_ERR_HELD_OFF,
			  "a capture is being written: it holds this moment");
		return;
	}
	if (rc == -EDQUOT) {
		snprintf(text, sizeof(text), "%" PRIu64 " captures began in the "
			 "last hour (--max-captures-per-hour): counted, nothing "
			 "written", (uint64_t)fpd_flight_last_hour(ctl->cfg.flight));
		put_error(t, FPD_CTL_ERR_CAPPED, text);
		return;
	}
	fp_text_puts(t, "ok\n");
	put_key(t, "capture");
	fp_text_puts_escaped(t, ctl->cfg.dir, NULL);
	fp_text_putc(t, '/');
	fp_text_puts(t, dir);
	fp_text_putc(t, '\n');
}

static void
serve(struct fpd_ctl *ctl, const char *line, size_t len)
{
	struct fpd_ctl_request req;
	struct fp_text t = { 0 };
	const char *why;

	if (fpd_ctl_parse(line, len, &req, &why) < 0)
		put_error(&t, FPD_CTL_ERR_REQUEST, why);
	else if (req.verb == FPD_CTL_STATUS)
		status(ctl, &t);
	else
		trigger(ctl, req.reason, &t);
	answer(ctl, &t);
	fp_text_free(&t);
}

static void
accept_client(struct fpd_ctl *ctl)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = accept4(ctl->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0) {
		/* The client stays in the backlog and the socket readable:
		 * polled again at once, the loop would spin until a
		 * descriptor is free. */
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM) {
			if (!ctl->accept_warned)
				fpd_warn("ctl: cannot accept a client: %s; the "
					 "socket is tried again every second",
					 strerror(errno));
			ctl->accept_warned = true;
			ctl->accept_paused_until = fpd_now_mono_us() + ACCEPT_PAUSE_US;
		}
		return;
	}
	ctl->cfd = fd;
	ctl->len = 0;
	ctl->deadline_mono = fpd_now_mono_us() + FPD_CTL_CLIENT_US;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    (cred.uid != 0 && cred.uid != ctl->cfg.uid)) {
		struct fp_text t = { 0 };

		fpd_warn("ctl: refused a client of uid %ld: only root and the "
			 "daemon's user (uid %u) are served",
			 len == sizeof(cred) ? (long)cred.uid : -1L,
			 (unsigned)ctl->cfg.uid);
		put_error(&t, FPD_CTL_ERR_REFUSED,
			  "only root and the daemon's user are served");
		answer(ctl, &t);
		fp_text_free(&t);
	}
}

static void
read_client(struct fpd_ctl *ctl)
{
	ssize_t n = recv(ctl->cfd, ctl->line + ctl->len,
			 sizeof(ctl->line) - ctl->len, MSG_DONTWAIT);
	char *nl;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		drop_client(ctl);	/* gone before a whole line */
		return;
	}
	ctl->len += (size_t)n;
	nl = memchr(ctl->line, '\n', ctl->len);
	if (nl) {
		serve(ctl, ctl->line, (size_t)(nl - ctl->line));
	} else if (ctl->len == sizeof(ctl->line)) {
		struct fp_text t = { 0 };

		put_error(&t, FPD_CTL_ERR_REQUEST, "request longer than 512 bytes");
		answer(ctl, &t);
		fp_text_free(&t);
	}
}

/* ---- as a source of the loop --------------------------------------------- */

static int
source_fd(struct fpd_source *src)
{
	struct fpd_ctl *ctl = (struct fpd_ctl *)src;

	if (ctl->cfd >= 0)
		return ctl->cfd;
	return ctl->accept_paused_until ? -1 : ctl->lfd;
}

static void
source_input(struct fpd_source *src)
{
	struct fpd_ctl *ctl = (struct fpd_ctl *)src;

	if (ctl->cfd >= 0)
		read_client(ctl);
	else
		accept_client(ctl);
}

static void
source_tick(struct fpd_source *src, uint64_t now)
{
	struct fpd_ctl *ctl = (struct fpd_ctl *)src;
	size_t last = (ctl->rate_next + RATE_SLOTS - 1) % RATE_SLOTS;

	if (ctl->cfd >= 0 && now >= ctl->deadline_mono) {
		fpd_debug("ctl: a client sent no whole request in time; dropped");
		drop_client(ctl);
	}
	if (ctl->accept_paused_until && now >= ctl->accept_paused_until)
		ctl->accept_paused_until = 0;
	if (!ctl->rate_n || now - ctl->rate_mono[last] >= RATE_STEP_US) {
		ctl->rate_mono[ctl->rate_next] = now;
		ctl->rate_samples[ctl->rate_next] = fpd_recorder_samples(ctl->cfg.rec);
		ctl->rate_next = (ctl->rate_next + 1) % RATE_SLOTS;
		if (ctl->rate_n < RATE_SLOTS)
			ctl->rate_n++;
	}
}

static const struct fpd_source_ops ctl_source_ops = {
	.fd = source_fd,
	.input = source_input,
	.tick = source_tick,
};

struct fpd_source *
fpd_ctl_source(struct fpd_ctl *ctl)
{
	return &ctl->source;
}

/* ---- life cycle ------------------------------------------------------------ */

int
fpd_ctl_new(const struct fpd_ctl_config *c, struct fpd_ctl **out)
{
	struct fpd_trust trust = { c->uid, c->gid };
	struct fpd_ctl *ctl = xnew(struct fpd_ctl);
	const char *why = NULL;
	int fd;

	ctl->source.ops = &ctl_source_ops;
	ctl->cfg = *c;
	ctl->cfd = -1;
	fd = fpd_fs_bind_socket(c->dirfd, FPD_CTL_SOCKET, &trust, &ctl->made,
				&why);
	if (fd < 0) {
		if (why)
			fpd_fatal("control socket %s/%s %s", c->dir,
				  FPD_CTL_SOCKET, why);
		else
			fpd_fatal("cannot make control socket %s/%s: %s", c->dir,
				  FPD_CTL_SOCKET, strerror(-fd));
		free(ctl);
		*out = NULL;
		return fd;
	}
	ctl->lfd = fd;
	fpd_info("ctl: listening on %s/%s", c->dir, FPD_CTL_SOCKET);
	*out = ctl;
	return 0;
}

void
fpd_ctl_set_session(struct fpd_ctl *ctl, const struct fpd_session *session)
{
	ctl->cfg.session = session;
}

void
fpd_ctl_destroy(struct fpd_ctl *ctl)
{
	if (!ctl)
		return;
	drop_client(ctl);
	close(ctl->lfd);
	fpd_fs_unlink_socket_made(ctl->cfg.dirfd, FPD_CTL_SOCKET, &ctl->made);
	free(ctl);
}
