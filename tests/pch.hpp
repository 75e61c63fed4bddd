// Precompiled for the test binary: libtorch's C++ frontend and Catch2 are
// the slow parts of every test file. libtorch's logging defines a CHECK
// macro of its own; Catch2's must win in tests, so it comes last.
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>
