# cmake -DINPUT=FILE -DOUTPUT=OUT.cc -DSYMBOL=kName -DNAMESPACE=kiln::x -DHEADER=path/to/decl.h -P embed_file.cmake
#
# Writes OUT.cc, the definition of NAMESPACE::SYMBOL (declared in HEADER):
# FILE's bytes as an absl::string_view over a raw string literal, which the
# compiler takes byte for byte. kiln embeds files this way where a file in
# the repository is the one home of some text (a cuda package's sources,
# the default machine description).
file(READ "${INPUT}" text)
set(delimiter "kiln_embed")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter )${delimiter}\"")
endif()
file(RELATIVE_PATH name "${CMAKE_CURRENT_LIST_DIR}/.." "${INPUT}")
file(WRITE "${OUTPUT}" "// Generated from ${name} by tools/embed_file.cmake: do not edit.
#include \"${HEADER}\"

namespace ${NAMESPACE} {

constexpr absl::string_view ${SYMBOL} = R\"${delimiter}(${text})${delimiter}\";

}  // namespace ${NAMESPACE}
")
