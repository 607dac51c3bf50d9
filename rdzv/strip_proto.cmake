# Copies one of etcd's .proto files into the build tree without what our
# protoc cannot resolve and C++ does not need: gogoproto's Go options and
# grpc-gateway's HTTP annotations. Run as
#   cmake -DIN=<etcd proto> -DOUT=<copy> -P strip_proto.cmake
file(READ "${IN}" text)
string(REGEX REPLACE "import \"gogoproto/gogo.proto\";" "" text "${text}")
string(REGEX REPLACE "import \"google/api/annotations.proto\";" "" text "${text}")
string(REGEX REPLACE "option \\(gogoproto\\.[a-z_]+\\) = [a-z]+;" "" text "${text}")
# A field's [(gogoproto.nullable) = false] and the like.
string(REGEX REPLACE "\\[\\(gogoproto\\.[^]]*\\]" "" text "${text}")
# option (google.api.http) = { post: "..." body: "*" additional_bindings { ... } };
string(REGEX REPLACE "additional_bindings {[^}]*}" "" text "${text}")
string(REGEX REPLACE "option \\(google\\.api\\.http\\) = {[^}]*};" "" text "${text}")
file(WRITE "${OUT}" "${text}")
