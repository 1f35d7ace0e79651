# cmake -DINPUT=FILE -DOUTPUT=OUT.cc -DSYMBOL=kName -P embed_file.cmake
#
# Writes OUT.cc, the definition of kiln::target::cuda::package_files::kName
# (target/cuda/package_files.h): FILE's bytes as an absl::string_view over a
# raw string literal, which the compiler takes byte for byte.
file(READ "${INPUT}" text)
set(delimiter "kiln_embed")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter )${delimiter}\"")
endif()
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}" "// Generated from target/cuda/package/${name} by embed_file.cmake: do not edit.
#include \"target/cuda/package_files.h\"

namespace kiln::target::cuda::package_files {

constexpr absl::string_view ${SYMBOL} = R\"${delimiter}(${text})${delimiter}\";

}  // namespace kiln::target::cuda::package_files
")
