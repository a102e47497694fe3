// tests/distributed/keep_libraries_loaded.cpp — in the sanitizer variant only: a dlclose that
// unloads nothing, for ferry_dist_tests (tests/distributed/CMakeLists.txt).
//
// Open MPI 4.1 keeps allocations in its components (mca_*.so) until exit and unloads the
// components in MPI_Finalize. LeakSanitizer, which looks at exit, then finds those blocks
// allocated from "<unknown module>" and cannot tell them from ferry's own, and a suppression
// cannot name them. The executable's own dlclose comes first in symbol lookup (the target
// exports its symbols), so every component stays loaded and named, and tools/sanitizers/
// lsan.supp suppresses Open MPI's libraries and components by name; a leak of ferry's keeps
// its own frames and is reported.
extern "C" int dlclose(void*) { return 0; }
