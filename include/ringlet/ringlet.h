#pragma once
// ringlet: collective communication (all-reduce, broadcast, barrier, ...) over TCP and shared
// memory. Include this one header.

#include "ringlet/bootstrap.h"
#include "ringlet/communicator.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"
#include "ringlet/spawn.h"
#include "ringlet/store.h"
#include "ringlet/types.h"
#include "ringlet/version.h"
