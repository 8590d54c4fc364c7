# ONNX import needs protobuf-c (libprotobuf-c-dev, protobuf-c-compiler) and
# the schema onnx.proto (libonnx-dev ships /usr/include/onnx/onnx.proto;
# python3-onnx has a copy too).  protoc-c turns the schema into C at build
# time, in the build tree: the generated code is never committed.
#
# kiln_onnx_sources(var) drops src/onnx/ from the list in var unless ONNX
# is on, and then adds the generated onnx.pb-c.c; it sets KILN_HAVE_ONNX,
# KILN_ONNX_GENERATED (the folder of onnx.pb-c.h), PROTOBUF_C_INCLUDE and
# PROTOBUF_C_LIB in the caller's scope.
function(kiln_onnx_sources var)
  set(sources ${${var}})
  list(FILTER sources EXCLUDE REGEX "/src/onnx/")
  set(KILN_HAVE_ONNX OFF PARENT_SCOPE)
  if(NOT KILN_ONNX)
    message(STATUS "kiln: ONNX import off (KILN_ONNX=OFF)")
    list(APPEND sources ${CMAKE_SOURCE_DIR}/src/onnx/unavailable.c)
    set(${var} ${sources} PARENT_SCOPE)
    return()
  endif()
  find_program(PROTOC_C NAMES protoc-c protoc-gen-c)
  find_path(PROTOBUF_C_INCLUDE protobuf-c/protobuf-c.h)
  find_library(PROTOBUF_C_LIB protobuf-c)
  find_file(KILN_ONNX_PROTO onnx.proto
    PATHS /usr/include/onnx /usr/lib/python3/dist-packages/onnx NO_DEFAULT_PATH)
  if(NOT PROTOC_C OR NOT PROTOBUF_C_INCLUDE OR NOT PROTOBUF_C_LIB OR NOT KILN_ONNX_PROTO)
    message(STATUS "kiln: ONNX import off: needs protoc-c (protobuf-c-compiler), "
      "libprotobuf-c-dev and onnx.proto (libonnx-dev); found compiler "
      "'${PROTOC_C}', library '${PROTOBUF_C_LIB}', schema '${KILN_ONNX_PROTO}'")
    list(APPEND sources ${CMAKE_SOURCE_DIR}/src/onnx/unavailable.c)
    set(${var} ${sources} PARENT_SCOPE)
    return()
  endif()
  message(STATUS "kiln: ONNX import on: ${PROTOC_C}, ${PROTOBUF_C_LIB}, schema ${KILN_ONNX_PROTO}")
  set(gen ${CMAKE_BINARY_DIR}/onnx_proto)
  file(MAKE_DIRECTORY ${gen})
  add_custom_command(
    OUTPUT ${gen}/onnx.pb-c.c ${gen}/onnx.pb-c.h
    COMMAND ${CMAKE_COMMAND} -E copy ${KILN_ONNX_PROTO} ${gen}/onnx.proto
    COMMAND ${PROTOC_C} --proto_path=${gen} --c_out=${gen} ${gen}/onnx.proto
    DEPENDS ${KILN_ONNX_PROTO}
    COMMENT "protoc-c: onnx.proto -> onnx.pb-c.c"
    VERBATIM)
  # Generated code: not ours to warn about.
  set_source_files_properties(${gen}/onnx.pb-c.c PROPERTIES
    GENERATED ON COMPILE_OPTIONS -w)
  file(GLOB onnx_sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/onnx/*.c)
  list(FILTER onnx_sources EXCLUDE REGEX "/unavailable\\.c$")
  list(APPEND sources ${onnx_sources} ${gen}/onnx.pb-c.c)
  set(${var} ${sources} PARENT_SCOPE)
  set(KILN_HAVE_ONNX ON PARENT_SCOPE)
  set(KILN_ONNX_GENERATED ${gen} PARENT_SCOPE)
endfunction()
