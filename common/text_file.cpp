#include "common/text_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace gradcomm {

namespace {
FILE* open_for_writing(const std::string& path, const char* what) {
  FILE* f = std::fopen(path.c_str(), "w");
  require(f != nullptr, "cannot write the ", what, " to '", path, "': ", std::strerror(errno));
  return f;
}
}  // namespace

void write_text_file(const std::string& path, const std::string& text, const char* what) {
  FILE* f = open_for_writing(path, what);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fputc('\n', f) != EOF;
  const bool closed = std::fclose(f) == 0;
  require(ok && closed, "writing the ", what, " to '", path, "' failed");
}

void check_writable(const std::string& path, const char* what) {
  std::fclose(open_for_writing(path, what));
}

}  // namespace gradcomm
