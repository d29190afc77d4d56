# libFuzzer target for the ONNX importer, built only with -DTSOPT_FUZZ=ON and
# clang (see `make fuzz`, build dir build-fuzz). The library sources are
# compiled into the target itself so that they carry the fuzzer's coverage
# instrumentation. Included from the top-level CMakeLists.txt (CMake needs the
# three lines):
#   if(TSOPT_FUZZ)
#     include(tests/fuzz/fuzz.cmake)
#   endif()
# Run: build-fuzz/fuzz_import -max_total_time=60 CORPUS_DIR
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TSOPT_FUZZ needs clang: configure with -DCMAKE_C_COMPILER=clang")
endif()

set(FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)
file(GLOB_RECURSE FUZZ_LIB_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/*.c)
list(FILTER FUZZ_LIB_SOURCES EXCLUDE REGEX "/src/(cli|dist)/")

set(FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer -g)
# the rule sets the library embeds (written by the top-level CMakeLists.txt
# at configure time)
foreach(set ${TSOPT_RULE_SETS})
  list(APPEND FUZZ_LIB_SOURCES ${CMAKE_BINARY_DIR}/gen/${set}_rules.c)
endforeach()
add_executable(fuzz_import ${FUZZ_DIR}/fuzz_import.c ${FUZZ_LIB_SOURCES})
target_compile_options(fuzz_import PRIVATE ${FUZZ_FLAGS})
target_link_options(fuzz_import PRIVATE ${FUZZ_FLAGS})
# Same includes, definitions and libraries as tsopt_lib, whatever it gains later
# (generator expressions, so the include line may sit anywhere in the file).
target_include_directories(fuzz_import PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src
  $<TARGET_PROPERTY:tsopt_lib,INCLUDE_DIRECTORIES>)
target_compile_definitions(fuzz_import PRIVATE $<TARGET_PROPERTY:tsopt_lib,COMPILE_DEFINITIONS>)
target_link_libraries(fuzz_import PRIVATE $<TARGET_PROPERTY:tsopt_lib,LINK_LIBRARIES>)
