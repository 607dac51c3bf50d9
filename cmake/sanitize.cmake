# LTD_SANITIZE (scripts/sanitize.sh): AddressSanitizer, LeakSanitizer and
# UBSan over every object built here, with libstdc++'s own checks
# (_GLIBCXX_ASSERTIONS: bounds of operator[], front() of an empty
# container). Any report ends the process (-fno-sanitize-recover=all,
# abort_on_error), so it cannot scroll past as a warning.
#
# Where reports go. ltd starts its helpers (lt-shim, lt-exec, lt-userio,
# gdb through lt-exec) with an empty or fixed environment and stderr on
# /dev/null, so ASAN_OPTIONS set by a test never reaches them and their
# report would vanish. Every executable therefore carries its options in
# (cmake/sanitizer_defaults.cc): reports go to files in
# LTD_SANITIZER_LOG_DIR, named after the program and pid, whoever started
# it and whatever user it became; scripts/sanitize.sh fails the run when one
# appears and names it.
option(LTD_SANITIZE "Build with AddressSanitizer and UBSan (scripts/sanitize.sh)" OFF)
set(LTD_SANITIZER_LOG_DIR "${PROJECT_BINARY_DIR}/sanitizer-reports" CACHE PATH
  "Where sanitized programs write their reports (scripts/sanitize.sh checks it)")

if(LTD_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
    -fno-omit-frame-pointer)
  add_compile_definitions(_GLIBCXX_ASSERTIONS)
  add_link_options(-fsanitize=address,undefined)
  # Stack frames named in reports: the symbolizer by its path, as ltd's
  # helpers run with no PATH (and the runtime's own search of PATH can find
  # something else first and warn; a warning in a report file fails the
  # run).
  find_program(LTD_LLVM_SYMBOLIZER NAMES llvm-symbolizer-16 llvm-symbolizer
    PATHS /usr/lib/llvm-16/bin)
  if(LTD_LLVM_SYMBOLIZER)
    get_filename_component(LTD_LLVM_SYMBOLIZER_REAL ${LTD_LLVM_SYMBOLIZER} REALPATH)
    set(LTD_SYMBOLIZER_OPTION ":external_symbolizer_path=${LTD_LLVM_SYMBOLIZER_REAL}")
  else()
    set(LTD_SYMBOLIZER_OPTION ":symbolize=0")
  endif()
  # The options, with this build's report directory in them. Generated so
  # that no compile command holds the path (ccache keys stay the same in
  # any checkout).
  configure_file(${PROJECT_SOURCE_DIR}/cmake/sanitizer_defaults.cc.in
    ${PROJECT_BINARY_DIR}/sanitizer_defaults.cc @ONLY)
endif()


# A sanitized program runs 2-3 times slower: the tests' ctest timeouts are
# multiplied by this (their own deadlines and asserts stay as they are).
if(LTD_SANITIZE)
  set(ltd_default_timeout_scale 3)
else()
  set(ltd_default_timeout_scale 1)
endif()
set(LTD_TEST_TIMEOUT_SCALE ${ltd_default_timeout_scale} CACHE STRING
  "Multiplier of every test's ctest TIMEOUT (3 in a sanitized build)")

# SECONDS times LTD_TEST_TIMEOUT_SCALE, into VAR.
function(ltd_test_timeout var seconds)
  math(EXPR scaled "${seconds} * ${LTD_TEST_TIMEOUT_SCALE}")
  set(${var} ${scaled} PARENT_SCOPE)
endfunction()

# Every executable under DIR (and its subdirectories) gets the built-in
# options. Called once, after every add_subdirectory.
function(ltd_sanitize_executables dir)
  if(NOT LTD_SANITIZE)
    return()
  endif()
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      target_sources(${target} PRIVATE ${PROJECT_BINARY_DIR}/sanitizer_defaults.cc)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    ltd_sanitize_executables(${sub})
  endforeach()
endfunction()
