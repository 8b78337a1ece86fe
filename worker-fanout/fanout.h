/* worker-fanout: the fan-out writer (see fanout.c). */
#ifndef COTAL_FANOUT_H
#define COTAL_FANOUT_H

#include "worker/worker.h"

extern const struct worker_role fanout_role;

#endif
