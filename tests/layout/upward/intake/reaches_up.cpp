// Not built: a fixture for check-includes.sh. intake/ may not include the
// supervisor, so the check must refuse this tree.
#include "common/result.h"
#include "supervisor/engine.h"
