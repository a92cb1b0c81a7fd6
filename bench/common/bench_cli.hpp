// The bench programs' command lines, with gradcomm-perf's conventions: CLI11
// (short and long forms, -h/--help), and every parse or validation error exits 2
// with the reason and a pointer to --help; an unwritable -J file fails before the
// run, not after it.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

namespace gradcomm::bench {

// Says why the command line is refused and returns the exit code, 2.
inline int refuse(const char* program, const std::string& why) {
  std::fprintf(stderr, "%s: %s\nRun %s --help for the options.\n", program, why.c_str(), program);
  return 2;
}

// Parses argv into `app`'s options. nullopt: go on; otherwise exit with the code
// (0 after --help, 2 after an error, which is printed).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const char* program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return refuse(program, e.what());
  }
  return std::nullopt;
}

// Opens the -J file for writing ("" -> nullptr, true); false after saying why.
inline bool open_json(const std::string& path, const char* program, FILE*& out) {
  out = nullptr;
  if (path.empty()) return true;
  out = std::fopen(path.c_str(), "w");
  if (out != nullptr) return true;
  std::fprintf(stderr, "%s: cannot write %s: %s\n", program, path.c_str(), std::strerror(errno));
  return false;
}

}  // namespace gradcomm::bench
