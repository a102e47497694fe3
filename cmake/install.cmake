# cmake/install.cmake — what `cmake --install` puts where.
#
# Included at the end of the top-level CMakeLists.txt, after every target is
# defined. The installed tree:
#
#   <prefix>/include/ferry/*.hpp                  the public API
#   <prefix>/<libdir>/libferry.so*                the core (CPU backend built in)
#   <prefix>/<libdir>/libferry_backend_<name>.so  runtime-loaded backend modules
#   <prefix>/<libdir>/cmake/ferry/                ferryConfig.cmake & co.
#   <prefix>/bin/ferry-demo, ferry-devices, ...   the samples, when built
#
# Note [Backend modules sit next to libferry]
# The registry looks for libferry_backend_<name>.so in the folder libferry was
# loaded from (see ferry/registry.hpp), so the modules go into the same libdir
# as libferry, in the build tree (CMAKE_LIBRARY_OUTPUT_DIRECTORY) as in the
# install. Modules are never linked by applications, so they are not part of
# the export set.
#
# Note [Private dependencies stay private]
# libferry links fmt, OpenMP and BLAS PRIVATE. For a shared library CMake does
# not export private link dependencies, so ferryConfig.cmake only asks for what
# the exported interface really names (Threads, for std::thread users). Should
# the interface ever name fmt::fmt, OpenMP:: or BLAS:: (a PUBLIC link, or a
# static libferry), the matching find_dependency() lines are added below, so
# the package never breaks for its consumers.

include(CMakePackageConfigHelpers)

if(NOT TARGET ferry)
  message(FATAL_ERROR "cmake/install.cmake: the library target `ferry` is not defined; "
                      "runtime/CMakeLists.txt must add it before this file is included.")
endif()

set(FERRY_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ferry"
    CACHE STRING "Where ferryConfig.cmake is installed, relative to the prefix")
mark_as_advanced(FERRY_INSTALL_CMAKEDIR)

# Installs one backend module (a MODULE library named ferry_backend_<name>)
# next to libferry; see Note [Backend modules sit next to libferry]. Calling it
# twice for one target is harmless. Every ferry_backend_* MODULE target in the
# project is installed automatically at the end of this file, so backend
# CMakeLists need not call it (they are processed before this file is
# included, when the function does not exist yet).
function(ferry_install_backend target)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "ferry_install_backend: no target named `${target}`")
  endif()
  get_target_property(_type ${target} TYPE)
  if(NOT _type STREQUAL "MODULE_LIBRARY" AND NOT _type STREQUAL "SHARED_LIBRARY")
    message(FATAL_ERROR "ferry_install_backend: `${target}` is a ${_type}; a backend must "
                        "be a MODULE (or SHARED) library")
  endif()
  get_target_property(_done ${target} FERRY_BACKEND_INSTALLED)
  if(_done)
    return()
  endif()
  set_target_properties(${target} PROPERTIES FERRY_BACKEND_INSTALLED TRUE)
  install(TARGETS ${target}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_SKIP
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endfunction()

# --- the library, its headers and the export set ---------------------------

install(TARGETS ferry
        EXPORT ferryTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT development
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime
        # Also in the target's own $<INSTALL_INTERFACE:...>; named here too so
        # that the package keeps working if that is ever dropped (CMake
        # removes the duplicate).
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ferry
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT development
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(FILES ${FERRY_GENERATED_DIR}/include/ferry/op_ids.hpp  # from ops/ops.table
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ferry COMPONENT development)

install(EXPORT ferryTargets
        NAMESPACE ferry::
        FILE ferryTargets.cmake
        DESTINATION ${FERRY_INSTALL_CMAKEDIR}
        COMPONENT development)

# The dependencies the exported interface names; see Note [Private
# dependencies stay private].
get_target_property(_ferry_type ferry TYPE)
get_target_property(_ferry_iface ferry INTERFACE_LINK_LIBRARIES)
if(NOT _ferry_iface)
  set(_ferry_iface "")
endif()
set(FERRY_CONFIG_DEPENDENCIES "")
macro(_ferry_dep_if pattern line)
  if("${_ferry_iface}" MATCHES "${pattern}")
    string(APPEND FERRY_CONFIG_DEPENDENCIES "${line}\n")
    message(STATUS "ferry: the exported interface names ${pattern}; "
                   "ferryConfig.cmake will find_dependency it")
  endif()
endmacro()
_ferry_dep_if("fmt::" "find_dependency(fmt)")
_ferry_dep_if("OpenMP::" "find_dependency(OpenMP)")
_ferry_dep_if("BLAS::" "set(BLA_VENDOR OpenBLAS)\nfind_dependency(BLAS)")
if(NOT _ferry_type STREQUAL "SHARED_LIBRARY")
  message(WARNING "ferry: the `ferry` target is a ${_ferry_type}, not a SHARED library; its "
                  "private dependencies become link dependencies of every consumer.")
endif()

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/ferryConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/ferryConfig.cmake
  INSTALL_DESTINATION ${FERRY_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)

# 0.x: a minor release may change the API, so only the same minor matches.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/ferryConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)

install(FILES ${PROJECT_BINARY_DIR}/cmake/ferryConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/ferryConfigVersion.cmake
        DESTINATION ${FERRY_INSTALL_CMAKEDIR}
        COMPONENT development)

# --- backend modules and programs ------------------------------------------

# Every ferry_backend_* and ferry_distributed_* MODULE target in the project, except those under
# tests/ and benchmarks/ (test plugins such as ferry_backend_testdev are not
# shipped) and those with the target property FERRY_NO_INSTALL set.
function(_ferry_collect_backends dir out)
  set(_found "")
  foreach(_skip tests benchmarks)
    set(_skip_dir "${PROJECT_SOURCE_DIR}/${_skip}")
    cmake_path(IS_PREFIX _skip_dir "${dir}" NORMALIZE _inside)
    if(_inside)
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  get_property(_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(_t IN LISTS _targets)
    if(_t MATCHES "^ferry_(backend|distributed)_")
      get_target_property(_type ${_t} TYPE)
      get_target_property(_no_install ${_t} FERRY_NO_INSTALL)
      if(_type STREQUAL "MODULE_LIBRARY" AND NOT _no_install)
        list(APPEND _found ${_t})
      endif()
    endif()
  endforeach()
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_sub IN LISTS _subdirs)
    _ferry_collect_backends(${_sub} _more)
    list(APPEND _found ${_more})
  endforeach()
  set(${out} ${_found} PARENT_SCOPE)
endfunction()

_ferry_collect_backends(${PROJECT_SOURCE_DIR} _ferry_backends)
foreach(_b IN LISTS _ferry_backends)
  ferry_install_backend(${_b})
endforeach()
if(_ferry_backends)
  message(STATUS "ferry: installing backend modules: ${_ferry_backends}")
endif()

if(FERRY_SAMPLE_TARGETS)
  install(TARGETS ${FERRY_SAMPLE_TARGETS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          COMPONENT runtime)
endif()
