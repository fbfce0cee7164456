// Not built: a fixture for check-includes.sh (a file that keeps its rule).
#pragma once
#include "common/result.h"
