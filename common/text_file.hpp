// Writing a whole text file at once (flight records, step traces): created or
// truncated, the text and a final newline, closed; any failure throws
// gcommInvalidArgument naming `what` and the path.
#pragma once

#include <string>

namespace gradcomm {

void write_text_file(const std::string& path, const std::string& text, const char* what);
// Throws as above when `path` cannot be created for writing (it is left empty):
// for a path given now but written much later.
void check_writable(const std::string& path, const char* what);

}  // namespace gradcomm
