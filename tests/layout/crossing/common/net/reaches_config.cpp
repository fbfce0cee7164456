// Not built: a fixture for check-includes.sh. common/net/ may not include
// common/config/, so the check must refuse this tree.
#include "common/result.h"
#include "common/config/duration.h"
