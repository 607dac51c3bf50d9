# gRPC, protobuf, abseil and libuv as three link targets, so that one
# switch picks how they are linked:
#
#   ltd_absl   abseil's status and strings (the layers below the process layer)
#   ltd_uv     libuv
#   ltd_grpc   gRPC and protobuf (the API edges)
#
# ltctl runs for every command and lt-shim for every job. Linked against
# the shared objects, each spends ~25 ms of CPU before main() on this
# project's VM: the dynamic loader binds ~17,000 symbols across 55 shared
# objects (mostly abseil's). Debian ships the static archives (-dev
# packages, position independent), and with them a start costs about half.
# LTD_STATIC_GRPC=OFF, or an archive missing, links the shared objects.
find_package(Protobuf REQUIRED)
pkg_check_modules(GRPCPP REQUIRED IMPORTED_TARGET grpc++)
option(LTD_STATIC_GRPC "Link gRPC, protobuf, abseil and libuv statically where the archives exist" ON)

add_library(ltd_absl INTERFACE)
add_library(ltd_uv INTERFACE)
add_library(ltd_grpc INTERFACE)

set(ltd_static_archives "")
if(LTD_STATIC_GRPC)
  # pkg-config's --static order is a valid static link order; the system
  # libraries in it stay shared.
  pkg_check_modules(LTD_GRPC_STATIC QUIET grpc++ protobuf)
  # zlib stays shared too: Debian forbids embedding it, and every release
  # has libz.so.1.
  set(system_libs dl pthread rt m c atomic z)
  foreach(name IN LISTS LTD_GRPC_STATIC_STATIC_LIBRARIES)
    if(name IN_LIST system_libs)
      continue()
    endif()
    find_library(ltd_archive_${name} NAMES lib${name}.a NO_CACHE)
    if(NOT ltd_archive_${name})
      message(STATUS "lib${name}.a not found: gRPC, protobuf and abseil are linked shared")
      set(ltd_static_archives "")
      break()
    endif()
    if(NOT ltd_archive_${name} IN_LIST ltd_static_archives)
      list(APPEND ltd_static_archives ${ltd_archive_${name}})
    endif()
  endforeach()
  find_library(ltd_uv_archive NAMES libuv_a.a libuv.a NO_CACHE)
endif()

if(ltd_static_archives)
  message(STATUS "gRPC, protobuf and abseil: static archives")
  add_library(ltd_static_grpc INTERFACE)
  target_link_libraries(ltd_static_grpc INTERFACE
    "$<LINK_GROUP:RESCAN,${ltd_static_archives}>" Threads::Threads ${CMAKE_DL_LIBS} rt atomic z)
  target_link_libraries(ltd_absl INTERFACE ltd_static_grpc)
  target_link_libraries(ltd_grpc INTERFACE ltd_static_grpc)
  target_include_directories(ltd_grpc INTERFACE ${GRPCPP_INCLUDE_DIRS} ${Protobuf_INCLUDE_DIRS})
else()
  target_link_libraries(ltd_absl INTERFACE absl::status absl::statusor absl::strings)
  # absl::Mutex's settings (rpc/mutex_mode.h) in the abseil gRPC uses: the
  # static archives above hold it; here, the shared object.
  target_link_libraries(ltd_grpc INTERFACE protobuf::libprotobuf PkgConfig::GRPCPP
    absl::synchronization)
endif()

if(ltd_static_archives AND ltd_uv_archive)
  target_link_libraries(ltd_uv INTERFACE ${ltd_uv_archive} Threads::Threads ${CMAKE_DL_LIBS} rt)
  target_include_directories(ltd_uv INTERFACE ${LIBUV_INCLUDE_DIRS})
else()
  target_link_libraries(ltd_uv INTERFACE PkgConfig::LIBUV)
endif()

# spdlog and fmt as one link target. LTD_SPDLOG_HEADER_ONLY compiles both
# into the binaries (scripts/package.sh: Debian 12 and 13 ship different
# libfmt and libspdlog sonames, so one package for both may depend on
# neither); otherwise the shared libraries.
option(LTD_SPDLOG_HEADER_ONLY "Compile spdlog and fmt into the binaries" OFF)
add_library(ltd_spdlog INTERFACE)
if(LTD_SPDLOG_HEADER_ONLY)
  find_package(fmt REQUIRED)
  target_compile_definitions(ltd_spdlog INTERFACE SPDLOG_FMT_EXTERNAL)
  target_include_directories(ltd_spdlog INTERFACE
    $<TARGET_PROPERTY:spdlog::spdlog_header_only,INTERFACE_INCLUDE_DIRECTORIES>)
  target_link_libraries(ltd_spdlog INTERFACE fmt::fmt-header-only Threads::Threads)
else()
  # A target with LTD_SELF_CONTAINED set (ltd_self_contained below) links
  # spdlog's and fmt's compiled parts from common/spdlog_fmt_built_in.cc
  # instead of the shared libraries: written for fmt 9, it is built only
  # with that fmt.
  set(ltd_spdlog_built_in_ok OFF)
  if(fmt_VERSION VERSION_GREATER_EQUAL 9 AND fmt_VERSION VERSION_LESS 10)
    set(ltd_spdlog_built_in_ok ON)
  endif()
  if(ltd_spdlog_built_in_ok)
    add_library(ltd_spdlog_built_in STATIC ${PROJECT_SOURCE_DIR}/common/spdlog_fmt_built_in.cc)
    target_compile_definitions(ltd_spdlog_built_in PUBLIC
      $<TARGET_PROPERTY:spdlog::spdlog,INTERFACE_COMPILE_DEFINITIONS>
      $<TARGET_PROPERTY:fmt::fmt,INTERFACE_COMPILE_DEFINITIONS>)
    target_include_directories(ltd_spdlog_built_in SYSTEM PUBLIC
      $<TARGET_PROPERTY:spdlog::spdlog,INTERFACE_INCLUDE_DIRECTORIES>
      $<TARGET_PROPERTY:fmt::fmt,INTERFACE_INCLUDE_DIRECTORIES>)
    target_link_libraries(ltd_spdlog_built_in PUBLIC Threads::Threads)
    target_link_libraries(ltd_spdlog INTERFACE
      $<IF:$<BOOL:$<TARGET_PROPERTY:LTD_SELF_CONTAINED>>,ltd_spdlog_built_in,spdlog::spdlog>)
  else()
    target_link_libraries(ltd_spdlog INTERFACE spdlog::spdlog)
  endif()
endif()

# ltd_self_contained(target): a program started once a job (lt-shim) loads
# no shared library at all: it is linked statically and position-
# independent (-static-pie: its address still randomised), so no loader
# runs at its start. Its start is most of what a small job costs, and the
# loader binding libstdc++, libspdlog, libfmt and then glibc was a fifth
# of it (bench/README.md). spdlog and fmt are compiled in (header-only, or
# common/spdlog_fmt_built_in.cc). Such a program must run no NSS (a static
# glibc loads a shared one beside it for that): see shim/CMakeLists.txt.
# Sanitized
# builds, and an fmt the file was not written for, keep the shared
# libraries: two copies of libstdc++ in one process (a static one and
# libspdlog's) would not be sound.
function(ltd_self_contained target)
  if(LTD_SANITIZE OR LTD_FUZZ OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  if(NOT LTD_SPDLOG_HEADER_ONLY AND NOT ltd_spdlog_built_in_ok)
    message(STATUS "${target}: fmt ${fmt_VERSION}: libspdlog and libstdc++ stay shared")
    return()
  endif()
  set_target_properties(${target} PROPERTIES LTD_SELF_CONTAINED ON)
  target_link_options(${target} PRIVATE -static-pie)
endfunction()
