/*
 * The ctl.delivery rail's fair queue: one FIFO per caller, callers served
 * in turn (see fairq.h). Runs inside the registry worker, under its lock.
 */
#include "worker-registry/fairq.h"

#include <stdlib.h>
#include <string.h>

struct fairq_node {
	struct fairq_node *next;
	void *item;
	size_t bytes;
};

struct fairq_flow {
	struct fairq_flow *next_turn;
	struct fairq_node *head, *tail;
	int n;
	size_t bytes;
	int64_t refusal_second;
	int refusals;
	int serving;            /* its items in service now */
	bool in_line;
	char *caller;
};

void
fairq_init(struct fairq *q, const struct fairq_limits *lim)
{
	memset(q, 0, sizeof(*q));
	q->lim = *lim;
	q->refusal_second = -1;
	strmap_init(&q->flows);
}

enum fairq_verdict
fairq_admits(const struct fairq *q, const char *caller, size_t bytes)
{
	const struct fairq_flow *f = strmap_get(&q->flows, caller);

	if (f != NULL && f->n >= q->lim.caller_max)
		return FAIRQ_CALLER_FULL;
	if (bytes > q->lim.caller_bytes || (f != NULL && f->bytes > q->lim.caller_bytes - bytes))
		return FAIRQ_CALLER_BYTES;
	if (q->n >= q->lim.total_max)
		return FAIRQ_FULL;
	if (bytes > q->lim.total_bytes || q->bytes > q->lim.total_bytes - bytes)
		return FAIRQ_BYTES;
	return FAIRQ_OK;
}

static void
turn_append(struct fairq *q, struct fairq_flow *f)
{
	f->in_line = true;
	f->next_turn = NULL;
	if (q->turn_tail != NULL)
		q->turn_tail->next_turn = f;
	else
		q->turn_head = f;
	q->turn_tail = f;
}

enum fairq_verdict
fairq_push(struct fairq *q, const char *caller, void *item, size_t bytes)
{
	enum fairq_verdict v = fairq_admits(q, caller, bytes);
	struct fairq_flow *f;
	struct fairq_node *node;

	if (v != FAIRQ_OK)
		return v;
	if ((node = calloc(1, sizeof(*node))) == NULL)
		return FAIRQ_NOMEM;
	node->item = item;
	node->bytes = bytes;
	if ((f = strmap_get(&q->flows, caller)) == NULL) {
		if ((f = calloc(1, sizeof(*f))) == NULL || (f->caller = strdup(caller)) == NULL ||
		    strmap_put(&q->flows, caller, f, NULL) != 0) {
			if (f != NULL)
				free(f->caller);
			free(f);
			free(node);
			return FAIRQ_NOMEM;
		}
		turn_append(q, f);
	} else if (!f->in_line && f->serving < q->lim.caller_serving) {
		/* In service with room for one more: its new item is due. */
		turn_append(q, f);
	}
	if (f->tail != NULL)
		f->tail->next = node;
	else
		f->head = node;
	f->tail = node;
	f->n++;
	f->bytes += bytes;
	q->n++;
	q->bytes += bytes;
	return FAIRQ_OK;
}

static void
flow_free(struct fairq_flow *f, void (*free_item)(void *))
{
	struct fairq_node *node, *next;

	for (node = f->head; node != NULL; node = next) {
		next = node->next;
		if (free_item != NULL)
			free_item(node->item);
		free(node);
	}
	free(f->caller);
	free(f);
}

/* One more refusal in the second of now_ms, if fewer than max were made. */
static bool
pace(int64_t *second, int *count, int max, int64_t now_ms)
{
	if (now_ms / 1000 != *second) {
		*second = now_ms / 1000;
		*count = 0;
	}
	if (*count >= max)
		return false;
	(*count)++;
	return true;
}

bool
fairq_refusal_due(struct fairq *q, const char *caller, enum fairq_verdict v, int64_t now_ms)
{
	struct fairq_flow *f = strmap_get(&q->flows, caller);
	int64_t second = q->refusal_second;
	int count = q->refusals;

	/* The queue's own pace bounds the answers of every refusal together
	 * (a caller's line may empty and come back with a fresh pace). */
	if (!pace(&second, &count, FAIRQ_REFUSAL_CALLERS * q->lim.refusals_per_s, now_ms))
		return false;
	if ((v == FAIRQ_CALLER_FULL || v == FAIRQ_CALLER_BYTES) && f != NULL &&
	    !pace(&f->refusal_second, &f->refusals, q->lim.refusals_per_s, now_ms))
		return false;
	q->refusal_second = second;
	q->refusals = count;
	return true;
}

void *
fairq_pop(struct fairq *q)
{
	struct fairq_flow *f = q->turn_head;
	struct fairq_node *node;
	void *item;

	if (f == NULL)
		return NULL;
	node = f->head;
	f->head = node->next;
	if (f->head == NULL)
		f->tail = NULL;
	f->n--;
	f->bytes -= node->bytes;
	q->n--;
	q->bytes -= node->bytes;
	item = node->item;
	free(node);
	/* Its turn is over: to the back of the line while it has items and
	 * fewer than caller_serving in service, else out of it until one has
	 * been served (fairq_done). */
	q->turn_head = f->next_turn;
	if (q->turn_head == NULL)
		q->turn_tail = NULL;
	f->next_turn = NULL;
	f->in_line = false;
	f->serving++;
	if (f->n > 0 && f->serving < q->lim.caller_serving)
		turn_append(q, f);
	return item;
}

bool
fairq_done(struct fairq *q, const char *caller)
{
	struct fairq_flow *f = strmap_get(&q->flows, caller);

	if (f == NULL || f->serving == 0)
		return false;
	f->serving--;
	if (f->in_line)
		return false;
	if (f->n > 0) {
		turn_append(q, f);
		return true;
	}
	if (f->serving == 0) {
		strmap_del(&q->flows, f->caller);
		flow_free(f, NULL);
	}
	return false;
}

bool
fairq_ready(const struct fairq *q)
{
	return q->turn_head != NULL;
}

struct clear_arg {
	void (*free_item)(void *);
};

static int
clear_one(const char *key, void *value, void *arg)
{
	(void)key;
	flow_free(value, ((struct clear_arg *)arg)->free_item);
	return 0;
}

void
fairq_clear(struct fairq *q, void (*free_item)(void *))
{
	struct clear_arg a = { free_item };

	/* Every flow, in the line or in service. */
	strmap_each(&q->flows, clear_one, &a);
	strmap_clear(&q->flows, NULL);
	q->turn_head = q->turn_tail = NULL;
	q->n = 0;
	q->bytes = 0;
}

size_t
fairq_callers(const struct fairq *q)
{
	return q->flows.count;
}
