# tests/install/register.cmake — include()d from tests/CMakeLists.txt.
#
# Adds the CTest test `install_package`: installs this build tree into a
# temporary prefix and builds and runs tests/install/ (an out-of-tree app
# using find_package(ferry)) against it. The app is built with this build's
# compiler and, under FERRY_SANITIZE, with the same -fsanitize flags: a
# sanitized libferry needs the sanitizer runtimes linked into the executable.

set(_ferry_install_test_args "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}")
if(CMAKE_GENERATOR MATCHES "Ninja" AND CMAKE_MAKE_PROGRAM)
  list(APPEND _ferry_install_test_args "-DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}")
endif()
if(FERRY_SANITIZE)
  list(APPEND _ferry_install_test_args
       "-DCMAKE_CXX_FLAGS=-fsanitize=${FERRY_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all"
       "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${FERRY_SANITIZE}")
endif()

add_test(NAME install_package
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_install_test.sh ${PROJECT_BINARY_DIR}
                 ${_ferry_install_test_args})
set_tests_properties(install_package PROPERTIES
                     LABELS "install"
                     TIMEOUT 600)
unset(_ferry_install_test_args)
