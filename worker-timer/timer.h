/* worker-timer: the checkpoint timer writer (see timer.c). */
#ifndef COTAL_TIMER_H
#define COTAL_TIMER_H

#include "worker/worker.h"

extern const struct worker_role timer_role;

#endif
