/*
 * The load of a chaos run: POSTERS agents post to one durable channel at a
 * steady rate, each post with its own id, published again with the same
 * id until the broker acknowledges it (CHAT's dedup keeps it once); the
 * members surface their dlv_ durables and ack, all along, each on its own
 * connection; and the churners' membership rows and read ACLs change now
 * and then, as the registry and the manager would write them.
 */
#include "tests/chaos/chaos.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/creds/perms.h"
#include "lib/nats/natsconn.h"
#include "lib/wire/tokens.h"

#define PUB_RETRY_MS 250
#define CHURN_MIN_MS 8000
#define CHURN_SPREAD_MS 12000

/* ---- the posts ---- */

static int
post_index(const char *id)
{
	char *end;
	long n;

	if (id == NULL || strncmp(id, "chaos-", 6) != 0)
		return -1;
	n = strtol(id + 6, &end, 10);
	return *end == '\0' && n >= 0 && n < POSTS_MAX ? (int)n : -1;
}

/* Publish post n until the broker acknowledges it, or stop. */
static void
publish(int n)
{
	char id[64], text[64];
	uint64_t seq = 0;

	snprintf(id, sizeof(id), "chaos-%d", n);
	snprintf(text, sizeof(text), "post %d", n);
	C.posts[n].sent_ms = now_ms();
	/* Once the load stops, a post still unacknowledged gets a minute. */
	for (int64_t give_up = 0;;) {
		if (h_post_dedup(&C.poster_conns[n % POSTERS], &C.mesh, &C.posters[n % POSTERS],
		    C.channel, id, text, &seq) == 0) {
			C.posts[n].seq = seq;
			__atomic_store_n(&C.posts[n].acked_ms, now_ms(), __ATOMIC_RELEASE);
			break;
		}
		atomic_fetch_add(&C.pub_retries, 1);
		if (atomic_load(&C.stop_posting)) {
			if (give_up == 0)
				give_up = now_ms() + 60000;
			else if (now_ms() > give_up)
				break;
		}
		h_nap(PUB_RETRY_MS);
	}
}

static void *
poster_main(void *arg)
{
	int period = 1000 / (C.rate > 0 ? C.rate : 1);
	int64_t next = now_ms();

	(void)arg;
	while (!atomic_load(&C.stop_posting)) {
		int n = atomic_load(&C.nposts);
		if (n >= POSTS_MAX)
			break;
		publish(n);
		atomic_store(&C.nposts, n + 1);
		next += period;
		/* After an outage: on at the rate, no burst to catch up. */
		if (now_ms() > next + 1000)
			next = now_ms();
		while (now_ms() < next && !atomic_load(&C.stop_posting))
			h_nap((int)(next - now_ms()));
	}
	return NULL;
}

/* ---- the members ---- */

/* A frame surfaced by member arg. */
static void
record(void *arg, natsMsg *m)
{
	struct mbr *p = arg;
	const char *h = NULL;
	jsMsgMetaData *md = NULL;
	uint64_t seq = 0;
	int64_t stored = 0;
	json_t *v, *msg;
	int n;

	if (natsMsgHeader_Get(m, "Cotal-Delivery-Frame", &h) != NATS_OK || strcmp(h, "1") != 0)
		atomic_fetch_add(&p->bad_header, 1);
	if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
		seq = md->Sequence.Stream;
		stored = md->Timestamp / 1000000;
		jsMsgMetaData_Destroy(md);
	}
	v = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), 0, NULL);
	msg = json_object_get(v, "msg");
	n = post_index(json_string_value(json_object_get(msg, "id")));
	const char *ch = json_string_value(json_object_get(v, "channel"));
	if (n < 0 || ch == NULL || strcmp(ch, C.channel) != 0) {
		atomic_fetch_add(&p->foreign, 1);
		json_decref(v);
		return;
	}
	struct seen *s = &p->seen[n];
	if (s->frames == 0) {
		s->dlv_seq = seq;
		s->copies = 1;
		s->stored_ms = stored;
		s->surfaced_ms = now_ms();
	} else if (seq != s->dlv_seq && seq != s->dlv_seq2) {
		if (s->copies++ == 1) {
			s->dlv_seq2 = seq;
			s->stored2_ms = stored;
		}
	}
	__atomic_store_n(&s->frames, (uint16_t)(s->frames + 1), __ATOMIC_RELEASE);
	atomic_fetch_add(&p->frames, 1);
	json_decref(v);
}

static void *
member_main(void *arg)
{
	struct mbr *p = arg;

	h_dlv_surface(&p->pl, &C.stop_members, record, p, &p->fetch_errors);
	return NULL;
}

/* ---- the churn ---- */

/* One change of member i, written until the broker takes it. */
static void
churn_write(int i, enum ev_kind kind)
{
	struct mbr *p = &C.m[i];
	struct event e = { .member = i, .kind = kind, .first_ms = now_ms() };
	char err[512], allow[128];

	for (;; h_nap(500)) {
		int rc = 0;
		switch (kind) {
		case EV_LEAVE:
		case EV_JOIN:
			/* The cursor: CHAT's last sequence when the change is
			 * asked, as the registry takes it. */
			if (h_chat_last_seq(&C.prov, &C.mesh, &e.seq) != 0)
				continue;
			rc = h_member_put(&C.prov, &C.mesh, &p->a, C.channel,
			    kind == EV_JOIN ? e.seq : p->join, kind == EV_LEAVE ? e.seq : 0,
			    p->gen + 1, err, sizeof(err));
			break;
		case EV_NARROW:
		case EV_RESTORE:
			snprintf(allow, sizeof(allow), "[\"%s\"]", kind == EV_NARROW ?
			    "elsewhere" : C.channel);
			rc = h_acl_put(&C.prov, &C.mesh, &p->a, allow, false, err, sizeof(err));
			break;
		}
		if (rc == 0)
			break;
	}
	e.done_ms = now_ms();
	p->changed_ms = e.done_ms;
	static const char *const words[] = { [EV_LEAVE] = "leave", [EV_JOIN] = "join",
		[EV_NARROW] = "acl-narrow", [EV_RESTORE] = "acl-restore" };
	if (kind == EV_LEAVE || kind == EV_JOIN)
		say("%-16s %s, %s %" PRIu64 " (written in %lld ms)", words[kind], p->a.name,
		    kind == EV_LEAVE ? "leaveCursor" : "joinCursor", e.seq,
		    (long long)(e.done_ms - e.first_ms));
	else
		say("%-16s %s (written in %lld ms)", words[kind], p->a.name,
		    (long long)(e.done_ms - e.first_ms));
	p->gen++;
	if (kind == EV_JOIN)
		p->join = e.seq, p->leave = 0;
	else if (kind == EV_LEAVE)
		p->leave = e.seq;
	else
		p->narrowed = kind == EV_NARROW;
	/* Read by the checker once the churn thread is joined. */
	if (C.nev < EVENTS_MAX)
		C.ev[C.nev++] = e;
}

static void *
churn_main(void *arg)
{
	uint64_t r = C.seed ^ 0x9e3779b97f4a7c15ULL;

	(void)arg;
	while (!atomic_load(&C.stop_churn)) {
		r = r * 6364136223846793005ULL + 1442695040888963407ULL;
		int wait = CHURN_MIN_MS + (int)((r >> 33) % CHURN_SPREAD_MS);
		for (int64_t until = now_ms() + wait; now_ms() < until && !atomic_load(&C.stop_churn);)
			h_nap(100);
		if (atomic_load(&C.stop_churn))
			break;
		int i = C.members - CHURNERS + (int)((r >> 20) % CHURNERS);
		struct mbr *p = &C.m[i];
		if (p->leave != 0)
			churn_write(i, EV_JOIN);
		else if (p->narrowed)
			churn_write(i, EV_RESTORE);
		else
			churn_write(i, (r >> 40) & 1 ? EV_LEAVE : EV_NARROW);
	}
	return NULL;
}

void
churn_stop(void)
{
	atomic_store(&C.stop_churn, true);
	if (C.churn_th != 0)
		pthread_join(C.churn_th, NULL);
	C.churn_th = 0;
	for (int i = C.members - CHURNERS; i < C.members; i++) {
		if (C.m[i].leave != 0)
			churn_write(i, EV_JOIN);
		if (C.m[i].narrowed)
			churn_write(i, EV_RESTORE);
	}
}

/* ---- set up, start, stop ---- */

int
load_setup(char *err, size_t errlen)
{
	char name[64], path[H_PATH_MAX * 2], key[512];
	uint64_t last = 0;

	snprintf(C.channel, sizeof(C.channel), "chaos");
	space_key(C.mesh.space, key, sizeof(key));
	snprintf(path, sizeof(path), "%s/.cotal/space.%s/provisioner.creds", C.mesh.dir, key);
	if (h_connect_url(&C.mesh, NULL, path, &C.prov, err, errlen) != 0)
		return -1;
	C.posts = calloc(POSTS_MAX, sizeof(*C.posts));
	for (int i = 0; i < POSTERS; i++) {
		snprintf(name, sizeof(name), "cpost%d", i);
		if (h_agent_add(&C.mesh, name, C.channel, &C.posters[i]) != 0 ||
		    h_connect_url(&C.mesh, NULL, C.posters[i].creds, &C.poster_conns[i], err,
		    errlen) != 0) {
			snprintf(err + strlen(err), errlen - strlen(err), " (poster %s)", name);
			return -1;
		}
	}
	for (int i = 0; i < C.members; i++) {
		struct mbr *p = &C.m[i];
		p->idx = i;
		p->churn = i >= C.members - CHURNERS;
		snprintf(name, sizeof(name), "cmem%02d", i);
		if (h_agent_add(&C.mesh, name, C.channel, &p->a) != 0 ||
		    h_connect_url(&C.mesh, NULL, p->a.creds, &p->c, err, errlen) != 0)
			return -1;
		if (h_dlv_attach(p->c.nc, p->c.creds.jwt, &C.mesh, &p->a, &p->pl, err, errlen) != 0)
			return -1;
		p->seen = calloc(POSTS_MAX, sizeof(*p->seen));
	}
	if (h_chat_last_seq(&C.prov, &C.mesh, &last) != 0) {
		snprintf(err, errlen, "CHAT_%s: no stream info", C.mesh.token);
		return -1;
	}
	C.first_join = last;
	for (int i = 0; i < C.members; i++) {
		C.m[i].gen = 1;
		C.m[i].join = last;
		if (h_member_put(&C.prov, &C.mesh, &C.m[i].a, C.channel, last, 0, 1, err,
		    errlen) != 0)
			return -1;
	}
	return 0;
}

void
load_start(void)
{
	for (int i = 0; i < C.members; i++)
		pthread_create(&C.m[i].th, NULL, member_main, &C.m[i]);
	pthread_create(&C.poster_th, NULL, poster_main, NULL);
	pthread_create(&C.churn_th, NULL, churn_main, NULL);
}

void
load_stop_posting(void)
{
	atomic_store(&C.stop_posting, true);
	if (C.poster_th != 0)
		pthread_join(C.poster_th, NULL);
	C.poster_th = 0;
	C.load_end_ms = now_ms();
}

void
load_stop(void)
{
	atomic_store(&C.stop_members, true);
	for (int i = 0; i < C.members; i++) {
		if (C.m[i].th != 0)
			pthread_join(C.m[i].th, NULL);
		C.m[i].th = 0;
	}
}

void
load_free(void)
{
	for (int i = 0; i < C.members; i++) {
		pull_close(&C.m[i].pl);
		h_close(&C.m[i].c);
		free(C.m[i].seen);
	}
	for (int i = 0; i < POSTERS; i++)
		h_close(&C.poster_conns[i]);
	h_close(&C.prov);
	free(C.posts);
}

long
load_missing(void)
{
	long missing = 0;
	int n = atomic_load(&C.nposts);

	for (int i = 0; i < C.members; i++)
		for (int k = 0; k < n; k++)
			if (owed(i, k) && __atomic_load_n(&C.m[i].seen[k].frames, __ATOMIC_ACQUIRE) == 0)
				missing++;
	return missing;
}
