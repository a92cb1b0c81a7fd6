/*
 * gradcomm — a CUDA/NCCL gradient-communication engine. Public C API (C99).
 *
 * Conventions, for every function in this header and the headers it includes:
 *  - Every function returns a gcommStatus_t (except the few string getters, which
 *    never fail). On failure, gcommGetLastError() returns a message with the detail;
 *    the objects named in the call are left unchanged.
 *  - No C++ exception and no CUDA sticky error ever crosses this boundary.
 *  - Out-pointers must not be NULL.
 *  - Config structs are versioned: declare them with their ..._INITIALIZER macro,
 *    then change the fields you need (see gcommLogConfig_t for the pattern).
 *  - Thread safety is stated per object in each header; the functions of core.h
 *    are all safe to call from any thread.
 */
#ifndef GRADCOMM_GRADCOMM_H
#define GRADCOMM_GRADCOMM_H

/* The umbrella header: it only includes. types.h is the leaf every header
 * includes; each layer's header declares that layer's functions. */
#include "gradcomm/comm.h"
#include "gradcomm/core.h"
#include "gradcomm/kernels.h"
#include "gradcomm/membership.h"
#include "gradcomm/memory.h"
#include "gradcomm/outer_sync.h"
#include "gradcomm/reducer.h"
#include "gradcomm/types.h"

#endif /* GRADCOMM_GRADCOMM_H */
