# Turns sdk/ductus.js into a C++ source holding its text, so the worker (which
# may not open files once confined) carries the SDK inside the binary.
# Run as: cmake -DIN=ductus.js -DOUT=sdk_source.cpp -P embed.cmake
file(READ "${IN}" text)
string(FIND "${text}" ")DUCTUS_SDK\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )DUCTUS_SDK\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from sdk/ductus.js by sdk/embed.cmake. Do not edit.\n#include \"worker/sdk_source.h\"\n\nnamespace ductus::worker {\nconst std::string_view kSdkSource = R\"DUCTUS_SDK(${text})DUCTUS_SDK\";\n}  // namespace ductus::worker\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
