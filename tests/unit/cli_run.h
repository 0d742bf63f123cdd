// Runs build/bin/tandem (TANDEM_BINARY) with arguments through the shell, for the tests of
// its subcommands: the exit status and everything it printed.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tandem::testing {

struct run_result {
  int status = -1;  // the exit status; -1 when it did not start or did not exit
  std::string out;  // stdout and stderr together
};

// args is shell text (quote what needs it).
inline run_result run(const std::string& args) {
  const std::string cmd = std::string(TANDEM_BINARY) + " " + args + " 2>&1";
  run_result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace tandem::testing
