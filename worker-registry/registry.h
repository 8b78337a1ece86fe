/* worker-registry: the membership registry and the control rails (see registry.c). */
#ifndef COTAL_REGISTRY_H
#define COTAL_REGISTRY_H

#include "worker/worker.h"

extern const struct worker_role registry_role;

#endif
