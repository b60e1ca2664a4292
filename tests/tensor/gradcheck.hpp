// Moved to the op harness, which owns the finite-difference math; kept so the tests of tensor/
// and model/ include it by its old name.
#pragma once
#include "ops/finite_difference.hpp"
