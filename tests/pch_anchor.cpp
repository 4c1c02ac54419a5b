// The one source of nabla_test_pch, the target that owns the tests' precompiled helpers.h
// (tests/CMakeLists.txt); every test executable reuses that header instead of building its own.
