// Fixture for include_rules_keep_ctl_off_the_engine: ctl/ (ductusctl) may
// include common/ alone, never the engine's headers.
#include "common/result.h"
#include "supervisor/control_socket.h"
