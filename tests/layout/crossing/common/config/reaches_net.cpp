// Not built: a fixture for check-includes.sh. common/config/ may not
// include common/net/, so the check must refuse this tree.
#include "common/result.h"
#include "common/net/stream_connection.h"
