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
  target_link_libraries(ltd_grpc INTERFACE protobuf::libprotobuf PkgConfig::GRPCPP)
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
  target_link_libraries(ltd_spdlog INTERFACE spdlog::spdlog)
endif()
